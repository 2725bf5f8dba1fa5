/* Sequence values (ONNX sequence(tensor)): an immutable list of retained tensors of one dtype,
 * carried by a tensor handle (tensor_internal.h explains why), created, read and freed here.
 * The sequence ops (src/kernels/sequence.c) build new sequences from old ones; nothing
 * modifies a sequence after it is made, so sharing one between registers, loop iterations and
 * the caller is safe.
 *
 * The elements live in a refcounted block that several sequences may share: a sequence is
 * (block, length), and appending to a sequence whose length is the block's `used` count
 * claims the next slot with a compare-and-swap and shares the block (a Go-slice-like growth
 * path: one winner per slot, so two threads appending to one sequence never both write it;
 * the loser copies). Elements at and past a sequence's length are never read through it. */
#include <string.h>

#include "runtime/tensor_internal.h"

typedef struct stax_sequence_block_s {
  atomic_int_fast32_t refcount;
  stax_allocator_t allocator;
  _Atomic int64_t used; /* slots holding a retained tensor */
  int64_t capacity;
  stax_tensor_t* slots[]; /* capacity entries */
} stax_sequence_block_t;

static size_t stax_sequence_block_size(int64_t capacity) {
  return sizeof(stax_sequence_block_t) + (size_t)capacity * sizeof(stax_tensor_t*);
}

static void stax_sequence_block_release(stax_sequence_block_t* block) {
  if (!block || atomic_fetch_sub_explicit(&block->refcount, 1, memory_order_acq_rel) != 1) return;
  int64_t used = atomic_load(&block->used);
  for (int64_t k = 0; k < used; k++) stax_tensor_release(block->slots[k]);
  stax_allocator_free(block->allocator, block, stax_sequence_block_size(block->capacity));
}

stax_status_t stax_tensor_require_tensor(const stax_tensor_t* tensor, const char* what) {
  if (tensor && tensor->is_sequence)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s is a sequence of %lld %s tensors; a tensor is needed here", what,
                            (long long)tensor->length, stax_dtype_name(tensor->dtype));
  return STAX_OK;
}

/* A handle over `block` (retained by the handle: the caller passes its reference). */
static stax_status_t stax_sequence_handle(stax_allocator_t allocator, stax_dtype_t dtype,
                                          stax_sequence_block_t* block, int64_t length,
                                          stax_tensor_t** out_sequence) {
  stax_tensor_t* sequence = NULL;
  stax_status_t status = stax_allocator_calloc(allocator, 1, sizeof(*sequence), (void**)&sequence);
  if (status) {
    stax_sequence_block_release(block);
    return stax_status_annotate(status, "while creating a sequence of %lld %s tensors",
                                (long long)length, stax_dtype_name(dtype));
  }
  atomic_init(&sequence->refcount, 1);
  sequence->allocator = allocator;
  sequence->dtype = dtype;
  sequence->is_sequence = true;
  sequence->length = length;
  sequence->block = block;
  sequence->items = block ? block->slots : NULL;
  *out_sequence = sequence;
  return STAX_OK;
}

/* A block of `capacity` slots holding retained copies of items[0, count). */
static stax_status_t stax_sequence_block_make(stax_allocator_t allocator, int64_t capacity,
                                              int64_t count, stax_tensor_t* const* items,
                                              stax_sequence_block_t** out_block) {
  *out_block = NULL;
  if (capacity == 0) return STAX_OK;
  stax_sequence_block_t* block = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, stax_sequence_block_size(capacity),
                                             (void**)&block));
  atomic_init(&block->refcount, 1);
  block->allocator = allocator;
  block->capacity = capacity;
  atomic_init(&block->used, count);
  for (int64_t k = 0; k < count; k++) {
    block->slots[k] = items[k];
    stax_tensor_retain(items[k]);
  }
  *out_block = block;
  return STAX_OK;
}

stax_status_t stax_sequence_create(stax_allocator_t allocator, stax_dtype_t dtype, int64_t length,
                                   stax_tensor_t* const* elements, stax_tensor_t** out_sequence) {
  if (!out_sequence)
    return stax_status_make(STAX_INVALID_ARGUMENT, "sequence_create: out_sequence is NULL");
  *out_sequence = NULL;
  if (!stax_dtype_is_valid(dtype))
    return stax_status_make(STAX_INVALID_ARGUMENT, "sequence_create: invalid dtype %d", (int)dtype);
  if (length < 0 || length > STAX_SEQUENCE_MAX_LENGTH)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "sequence_create: length %lld is outside [0, %lld]", (long long)length,
                            (long long)STAX_SEQUENCE_MAX_LENGTH);
  if (length > 0 && !elements)
    return stax_status_make(STAX_INVALID_ARGUMENT, "sequence_create: elements is NULL");
  for (int64_t k = 0; k < length; k++) {
    const stax_tensor_t* element = elements[k];
    if (!element)
      return stax_status_make(STAX_INVALID_ARGUMENT, "sequence_create: element %lld is NULL",
                              (long long)k);
    if (element->is_sequence)
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "sequence_create: element %lld is a sequence; elements must be "
                              "tensors",
                              (long long)k);
    if (element->dtype != dtype)
      return stax_status_make(STAX_DTYPE_MISMATCH,
                              "sequence_create: element %lld is %s %s, but the sequence holds %s",
                              (long long)k, stax_dtype_name(element->dtype),
                              stax_dims_text(element->rank, element->dims).text,
                              stax_dtype_name(dtype));
  }
  stax_sequence_block_t* block = NULL;
  STAX_RETURN_IF_ERROR(stax_sequence_block_make(allocator, length, length, elements, &block),
                       "while creating a sequence of %lld %s tensors", (long long)length,
                       stax_dtype_name(dtype));
  return stax_sequence_handle(allocator, dtype, block, length, out_sequence);
}

stax_status_t stax_sequence_append(stax_allocator_t allocator, const stax_tensor_t* sequence,
                                   stax_tensor_t* element, stax_tensor_t** out_sequence) {
  *out_sequence = NULL;
  int64_t length = sequence->length;
  if (length >= STAX_SEQUENCE_MAX_LENGTH)
    return stax_status_make(STAX_OUT_OF_RANGE,
                            "the sequence already holds %lld elements, the most stax allows",
                            (long long)length);
  stax_sequence_block_t* block = sequence->block;
  int64_t expected = length;
  if (block && length < block->capacity &&
      atomic_compare_exchange_strong(&block->used, &expected, length + 1)) {
    /* This sequence's block ends at its last element and has room: take the next slot. */
    stax_tensor_retain(element);
    block->slots[length] = element;
    atomic_fetch_add_explicit(&block->refcount, 1, memory_order_relaxed);
    return stax_sequence_handle(allocator, sequence->dtype, block, length + 1, out_sequence);
  }
  int64_t capacity = length < 4 ? 8 : 2 * length;
  if (capacity > STAX_SEQUENCE_MAX_LENGTH) capacity = STAX_SEQUENCE_MAX_LENGTH;
  stax_sequence_block_t* copy = NULL;
  STAX_RETURN_IF_ERROR(stax_sequence_block_make(allocator, capacity, length, sequence->items, &copy),
                       "while appending to a sequence of %lld %s tensors", (long long)length,
                       stax_dtype_name(sequence->dtype));
  stax_tensor_retain(element);
  copy->slots[length] = element;
  atomic_store(&copy->used, length + 1);
  return stax_sequence_handle(allocator, sequence->dtype, copy, length + 1, out_sequence);
}

void stax_sequence_destroy_items(stax_tensor_t* sequence) {
  stax_sequence_block_release(sequence->block);
  sequence->block = NULL;
  sequence->items = NULL;
  sequence->length = 0;
}

bool stax_tensor_is_sequence(const stax_tensor_t* value) { return value && value->is_sequence; }

int64_t stax_sequence_length(const stax_tensor_t* sequence) {
  return sequence && sequence->is_sequence ? sequence->length : -1;
}

stax_tensor_t* stax_sequence_at(const stax_tensor_t* sequence, int64_t index) {
  if (!sequence || !sequence->is_sequence || index < 0 || index >= sequence->length) return NULL;
  return sequence->items[index];
}
