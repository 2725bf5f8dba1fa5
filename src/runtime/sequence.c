/* Sequence values (ONNX sequence(tensor)): an immutable list of retained tensors of one dtype,
 * carried by a tensor handle (tensor_internal.h explains why), created, read and freed here.
 * The sequence ops (src/kernels/sequence.c) build new sequences from old ones; nothing
 * modifies a sequence after it is made, so sharing one between registers, loop iterations and
 * the caller is safe. */
#include <string.h>

#include "runtime/tensor_internal.h"

stax_status_t stax_tensor_require_tensor(const stax_tensor_t* tensor, const char* what) {
  if (tensor && tensor->is_sequence)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s is a sequence of %lld %s tensors; a tensor is needed here", what,
                            (long long)tensor->length, stax_dtype_name(tensor->dtype));
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
  stax_tensor_t* sequence = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(allocator, 1, sizeof(*sequence), (void**)&sequence),
                       "while creating a sequence of %lld %s tensors", (long long)length,
                       stax_dtype_name(dtype));
  if (length > 0) {
    stax_status_t status = stax_allocator_malloc(allocator, (size_t)length * sizeof(stax_tensor_t*),
                                                 (void**)&sequence->items);
    if (status) {
      stax_allocator_free(allocator, sequence, sizeof(*sequence));
      return stax_status_annotate(status, "while creating a sequence of %lld %s tensors",
                                  (long long)length, stax_dtype_name(dtype));
    }
  }
  atomic_init(&sequence->refcount, 1);
  sequence->allocator = allocator;
  sequence->dtype = dtype;
  sequence->is_sequence = true;
  sequence->length = length;
  for (int64_t k = 0; k < length; k++) {
    sequence->items[k] = elements[k];
    stax_tensor_retain(elements[k]);
  }
  *out_sequence = sequence;
  return STAX_OK;
}

void stax_sequence_destroy_items(stax_tensor_t* sequence) {
  for (int64_t k = 0; k < sequence->length; k++) stax_tensor_release(sequence->items[k]);
  if (sequence->items)
    stax_allocator_free(sequence->allocator, sequence->items,
                        (size_t)sequence->length * sizeof(stax_tensor_t*));
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
