/* Internal layout of buffers and tensors, shared by the runtime and the kernels. Users see
 * only the opaque handles of include/stax/runtime.h. */
#ifndef STAX_RUNTIME_TENSOR_INTERNAL_H_
#define STAX_RUNTIME_TENSOR_INTERNAL_H_

#include <stdatomic.h>

#include "stax/runtime.h"

struct stax_buffer_s {
  atomic_int_fast32_t refcount;
  void* data;
  size_t size;                    /* bytes usable */
  size_t capacity;                /* bytes allocated (pool size class) */
  stax_allocator_t allocator;     /* frees the struct (and data when owned) */
  stax_buffer_release_fn release; /* for wrapped memory; NULL when stax owns data */
  void* release_ctx;
  uint8_t pooled;                 /* data returns to a thread's pool on release */
  uint8_t owns_data;
};

struct stax_tensor_s {
  atomic_int_fast32_t refcount;
  stax_allocator_t allocator;
  stax_buffer_t* buffer; /* retained */
  stax_dtype_t dtype;
  int32_t rank;
  int64_t offset; /* in elements */
  int64_t dims[STAX_MAX_RANK];
  int64_t strides[STAX_MAX_RANK]; /* in elements */
};

#endif /* STAX_RUNTIME_TENSOR_INTERNAL_H_ */
