/* The elementwise machinery shared by the elementwise kernel files (binary.c defines it):
 * N-d iteration that merges contiguous dims and splits the work over the thread pool, and
 * the broadcast binary driver that stages float16/bfloat16 or mixed dtypes through a compute
 * dtype. */
#ifndef STAX_KERNELS_ELEMENTWISE_H_
#define STAX_KERNELS_ELEMENTWISE_H_

#include "kernels/kernel.h"

/* A row of an elementwise binary op: out[i*os] = f(a[i*as], b[i*bs]) for i < count (strides
 * in elements). Returns true when some element faulted (integer division by zero, ...). */
typedef bool (*stax_binary_row_fn)(void* out, int64_t out_stride, const void* a,
                                   int64_t a_stride, const void* b, int64_t b_stride,
                                   int64_t count);

/* Walks `dims` with operand_count stride sets (merging dims that are contiguous for every
 * operand), over the pool for large spaces; out_inner_strides receives each operand's stride
 * along the rows `row` sees. */
void stax_elementwise_iterate(stax_threadpool_t* pool, int32_t rank, const int64_t* dims,
                              int32_t operand_count,
                              const int64_t (*strides)[STAX_MAX_RANK],
                              const int64_t* base_offsets, int64_t* out_inner_strides,
                              stax_nd_row_fn row, void* ctx);

/* out = fn(a, b) with numpy broadcasting; returns true when a row reported a fault. */
bool stax_binary_elementwise_run(stax_threadpool_t* pool, const stax_tensor_t* a,
                                 const stax_tensor_t* b, stax_tensor_t* out,
                                 stax_binary_row_fn fn, stax_dtype_t compute_in,
                                 stax_dtype_t compute_out);

/* The loops of a binary row function, shared by the arithmetic, comparison and variadic
 * kernels: out[i] = EXPR over x = a[i], y = b[i] (T: the operand type), with the contiguous
 * and scalar-operand cases apart so each vectorizes. Expects out, a and b (pointers; out may
 * equal a or b; EXPR converts to out's element type by assignment, as a cast would) and out_stride,
 * a_stride, b_stride, count in scope; returns false when there is nothing to do. */
#define STAX_BINARY_ROW_LOOPS(EXPR)                                   \
  if (count <= 0) return false;                                       \
  if (out_stride == 1 && a_stride == 1 && b_stride == 1) {            \
    for (int64_t i = 0; i < count; i++) {                             \
      T x = a[i], y = b[i];                                           \
      out[i] = (EXPR);                            \
    }                                                                 \
  } else if (out_stride == 1 && a_stride == 1 && b_stride == 0) {     \
    const T y = b[0];                                                 \
    for (int64_t i = 0; i < count; i++) {                             \
      T x = a[i];                                                     \
      out[i] = (EXPR);                            \
    }                                                                 \
  } else if (out_stride == 1 && a_stride == 0 && b_stride == 1) {     \
    const T x = a[0];                                                 \
    for (int64_t i = 0; i < count; i++) {                             \
      T y = b[i];                                                     \
      out[i] = (EXPR);                            \
    }                                                                 \
  } else {                                                            \
    for (int64_t i = 0; i < count; i++) {                             \
      T x = a[i * a_stride], y = b[i * b_stride];                     \
      out[i * out_stride] = (EXPR);               \
    }                                                                 \
  }

#endif /* STAX_KERNELS_ELEMENTWISE_H_ */
