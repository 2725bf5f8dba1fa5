/* stax .npy files: read and write tensors in numpy's format (versions 1.0-3.0, little-endian,
 * C or Fortran order) for every stax dtype numpy knows (bfloat16 has no numpy code and is
 * rejected). */
#ifndef STAX_NPY_H_
#define STAX_NPY_H_

#include "stax/base.h"
#include "stax/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loads a whole .npy file into a new contiguous tensor. Malformed headers, unsupported dtypes
 * (e.g. object arrays, big-endian), and data shorter than the shape needs are errors naming
 * the file and the problem. */
STAX_MUST_USE stax_status_t stax_npy_load(stax_allocator_t allocator, const char* path,
                                          stax_tensor_t** out_tensor);
/* The same from memory. */
STAX_MUST_USE stax_status_t stax_npy_parse(stax_allocator_t allocator, const void* data,
                                           size_t size, const char* name,
                                           stax_tensor_t** out_tensor);
/* Writes a tensor (any view) as a C-order version 1.0 .npy file. */
STAX_MUST_USE stax_status_t stax_npy_save(const stax_tensor_t* tensor, const char* path);

#ifdef __cplusplus
}
#endif

#endif /* STAX_NPY_H_ */
