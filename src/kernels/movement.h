/* Helpers shared by the data-movement kernels (defined in reshape.c): strided element copies,
 * errors with the node's prefix, axis normalization, and output handling that returns views
 * when the caller left the output to the kernel and copies into preallocated outputs. */
#ifndef STAX_KERNELS_MOVEMENT_H_
#define STAX_KERNELS_MOVEMENT_H_

#include "kernels/kernel.h"

/* Copies `count` elements of `element_size` bytes between strided runs (strides in elements,
 * any sign). */
void stax_movement_copy_elements(char* dst, int64_t dst_stride, const char* src,
                                 int64_t src_stride, int64_t count, size_t element_size);
/* Prefixes a status from a runtime call with the node. */
stax_status_t stax_movement_annotate(const stax_kernel_call_t* call, stax_status_t status);
stax_status_t stax_movement_normalize_axis(const stax_kernel_call_t* call, int64_t axis,
                                           int32_t rank, const char* what, int32_t* out_axis);
stax_status_t stax_movement_require_input(const stax_kernel_call_t* call, int32_t i,
                                          stax_tensor_t** out_tensor);
stax_status_t stax_movement_contiguous_output(stax_kernel_call_t* call, int32_t i,
                                              stax_dtype_t dtype, int32_t rank,
                                              const int64_t* dims, stax_tensor_t** out_tensor);
/* Output i becomes `view` when the caller left it NULL; else view is copied into it. */
stax_status_t stax_movement_output_view(stax_kernel_call_t* call, int32_t i, stax_tensor_t* view);
stax_status_t stax_movement_copy_reshaped(const stax_kernel_call_t* call, stax_tensor_t* src,
                                          stax_tensor_t* dst);
/* Releases the outputs the kernel created (preallocated[i] false), for error paths. */
void stax_movement_release_created(stax_kernel_call_t* call, const bool* preallocated,
                                   int32_t count);

#endif /* STAX_KERNELS_MOVEMENT_H_ */
