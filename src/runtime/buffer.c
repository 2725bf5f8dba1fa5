/* Refcounted buffers: blocks stax allocates (header + 64-byte aligned data in one allocation)
 * and wrapped foreign memory with a release callback. Pooled blocks are handed to pool.c when
 * their last reference goes. */
#include <string.h>

#include "runtime/tensor_internal.h"

_Static_assert(sizeof(struct stax_buffer_s) <= STAX_BUFFER_HEADER_SIZE,
               "the buffer header must fit in front of the data");
_Static_assert(STAX_BUFFER_HEADER_SIZE % STAX_BUFFER_ALIGNMENT == 0,
               "data after the header must keep the block's alignment");

void stax_buffer_init_block(stax_buffer_t* buffer, stax_allocator_t allocator, size_t size,
                            size_t capacity, bool pooled) {
  memset(buffer, 0, sizeof(*buffer));
  atomic_init(&buffer->refcount, 1);
  atomic_init(&buffer->derived, NULL);
  buffer->data = (char*)buffer + STAX_BUFFER_HEADER_SIZE;
  buffer->size = size;
  buffer->capacity = capacity;
  buffer->allocator = allocator;
  buffer->pooled = pooled ? 1 : 0;
  buffer->owns_data = 1;
}

stax_status_t stax_buffer_allocate(stax_allocator_t allocator, size_t size_bytes,
                                   stax_buffer_t** out_buffer) {
  *out_buffer = NULL;
  if (size_bytes > SIZE_MAX - STAX_BUFFER_HEADER_SIZE) {
    return stax_status_make(STAX_OUT_OF_MEMORY, "buffer of %zu bytes is too large", size_bytes);
  }
  void* block = NULL;
  STAX_RETURN_IF_ERROR(
      stax_allocator_malloc_aligned(allocator, STAX_BUFFER_HEADER_SIZE + size_bytes,
                                    STAX_BUFFER_ALIGNMENT, &block),
      "while allocating a buffer of %zu bytes", size_bytes);
  stax_buffer_t* buffer = (stax_buffer_t*)block;
  stax_buffer_init_block(buffer, allocator, size_bytes, size_bytes, false);
  *out_buffer = buffer;
  return STAX_OK;
}

stax_status_t stax_buffer_wrap(stax_allocator_t allocator, void* data, size_t size_bytes,
                               stax_buffer_release_fn release, void* release_ctx,
                               stax_buffer_t** out_buffer) {
  *out_buffer = NULL;
  if (data == NULL && size_bytes != 0) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "cannot wrap a NULL pointer as a buffer of %zu bytes", size_bytes);
  }
  stax_buffer_t* buffer = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, sizeof(*buffer), (void**)&buffer),
                       "while wrapping %zu bytes of memory", size_bytes);
  memset(buffer, 0, sizeof(*buffer));
  atomic_init(&buffer->refcount, 1);
  atomic_init(&buffer->derived, NULL);
  buffer->data = data;
  buffer->size = size_bytes;
  buffer->capacity = size_bytes;
  buffer->allocator = allocator;
  buffer->release = release;
  buffer->release_ctx = release_ctx;
  *out_buffer = buffer;
  return STAX_OK;
}

void stax_buffer_set_immutable(stax_buffer_t* buffer) {
  if (buffer && buffer->owns_data) buffer->immutable = 1;
}

const void* stax_buffer_derived_get(const stax_buffer_t* buffer, uint64_t key, size_t size) {
  if (!buffer || !buffer->immutable) return NULL;
  for (stax_buffer_derived_t* d =
           atomic_load_explicit(&((stax_buffer_t*)buffer)->derived, memory_order_acquire);
       d; d = d->next)
    if (d->key == key && d->size == size) return d->data;
  return NULL;
}

const void* stax_buffer_derived_put(stax_buffer_t* buffer, uint64_t key, void* data, size_t size) {
  stax_allocator_t system = stax_allocator_system();
  stax_buffer_derived_t* entry = NULL;
  if (!buffer || !buffer->immutable ||
      stax_allocator_malloc(system, sizeof(*entry), (void**)&entry) != STAX_OK) {
    stax_allocator_free_aligned(system, data, size, STAX_BUFFER_ALIGNMENT);
    return NULL;
  }
  entry->key = key;
  entry->size = size;
  entry->data = data;
  stax_buffer_derived_t* head = atomic_load_explicit(&buffer->derived, memory_order_acquire);
  for (;;) {
    /* Another thread may have stored the same key meanwhile: use theirs. */
    for (stax_buffer_derived_t* d = head; d; d = d->next) {
      if (d->key == key && d->size == size) {
        stax_allocator_free_aligned(system, data, size, STAX_BUFFER_ALIGNMENT);
        stax_allocator_free(system, entry, sizeof(*entry));
        return d->data;
      }
    }
    entry->next = head;
    if (atomic_compare_exchange_weak_explicit(&buffer->derived, &head, entry,
                                              memory_order_acq_rel, memory_order_acquire))
      return data;
  }
}

/* Frees the derived data and clears the flag (a pooled block is reused for other contents). */
static void stax_buffer_drop_derived(stax_buffer_t* buffer) {
  stax_allocator_t system = stax_allocator_system();
  stax_buffer_derived_t* d = atomic_exchange_explicit(&buffer->derived, NULL, memory_order_acquire);
  while (d) {
    stax_buffer_derived_t* next = d->next;
    stax_allocator_free_aligned(system, d->data, d->size, STAX_BUFFER_ALIGNMENT);
    stax_allocator_free(system, d, sizeof(*d));
    d = next;
  }
  buffer->immutable = 0;
}

void stax_buffer_retain(stax_buffer_t* buffer) {
  if (buffer) atomic_fetch_add_explicit(&buffer->refcount, 1, memory_order_relaxed);
}

void stax_buffer_release(stax_buffer_t* buffer) {
  if (buffer == NULL) return;
  /* acq_rel: every other owner's writes happen before the memory is reused or freed. */
  if (atomic_fetch_sub_explicit(&buffer->refcount, 1, memory_order_acq_rel) != 1) return;
  stax_buffer_drop_derived(buffer);
  if (!buffer->owns_data) {
    if (buffer->release) buffer->release(buffer->release_ctx, buffer->data);
    stax_allocator_free(buffer->allocator, buffer, sizeof(*buffer));
    return;
  }
  if (buffer->pooled) {
    stax_pool_take_back(buffer);
    return;
  }
  stax_allocator_free_aligned(buffer->allocator, buffer, STAX_BUFFER_HEADER_SIZE + buffer->capacity,
                              STAX_BUFFER_ALIGNMENT);
}

void* stax_buffer_data(const stax_buffer_t* buffer) { return buffer ? buffer->data : NULL; }

size_t stax_buffer_size(const stax_buffer_t* buffer) { return buffer ? buffer->size : 0; }
