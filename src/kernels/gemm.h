/* Internal interface of the linear-algebra kernels: the packed, cache-blocked GEMM core
 * (gemm_f32.c) that MatMul, Gemm, Einsum, Conv and ConvTranspose share (and the JIT may call),
 * the strided batched matmul (matmul.c) that Einsum reuses, and the sliding-window attribute
 * rules (conv.c) that Conv, ConvTranspose and the pools share.
 *
 * The core computes C = alpha * A * B + beta * C for an M x K matrix A and a K x N matrix B
 * given as strided views (any strides, negative or zero included; a transposed operand is
 * just swapped strides, which packing absorbs for free). C is float32 when the compute dtype
 * is FLOAT32 (A and B may then be float32, float16 or bfloat16: halves are widened while
 * packing) and float64 when it is FLOAT64 (A and B float64). beta == 0 ignores C's previous
 * contents, NaNs included (BLAS semantics). */
#ifndef STAX_KERNELS_GEMM_H_
#define STAX_KERNELS_GEMM_H_

#include "kernels/kernel.h"

/* Per-function optimisation settings for hot loops (GCC's optimize attribute). Clang has no
 * such attribute and needs none: it vectorizes these loops at -O2 and contracts a*b+c into
 * FMA within an expression by default. */
#if defined(__GNUC__) && !defined(__clang__)
#define STAX_KERNEL_OPTIMIZE(...) __attribute__((optimize(__VA_ARGS__)))
#else
#define STAX_KERNEL_OPTIMIZE(...)
#endif

/* One operand: element (r, c) is at data + (r * row_stride + c * col_stride) elements. */
typedef struct stax_gemm_operand_t {
  stax_dtype_t dtype;
  const void* data;
  int64_t row_stride;
  int64_t col_stride;
} stax_gemm_operand_t;

/* True when the core computes in compute_dtype (FLOAT32 or FLOAT64) from operands of `dtype`. */
bool stax_gemm_supports(stax_dtype_t compute_dtype, stax_dtype_t operand_dtype);

/* Bytes of scratch stax_gemm_run needs for these sizes (packed panels; bounded by the block
 * sizes, not by M, N, K). 0 when nothing needs packing (an empty product). */
size_t stax_gemm_workspace_size(stax_dtype_t compute_dtype, int64_t m, int64_t n, int64_t k);

/* Runs the product with caller-provided scratch (64-byte aligned, at least
 * stax_gemm_workspace_size bytes). Splits the work over `pool` when the product is large
 * enough (pool may be NULL; calls from inside a parallel task run inline). Never fails:
 * operands must be supported (stax_gemm_supports). */
void stax_gemm_run(stax_dtype_t compute_dtype, void* workspace, stax_threadpool_t* pool, int64_t m,
                   int64_t n, int64_t k, double alpha, const stax_gemm_operand_t* a,
                   const stax_gemm_operand_t* b, double beta, void* c, int64_t c_row_stride,
                   int64_t c_col_stride);

/* B packed once: a constant weight (an immutable buffer, runtime/tensor_internal.h) is packed
 * whole, in the layout and order stax_gemm_run would pack it block by block, and kept with
 * its buffer; stax_gemm_run_prepacked then skips packing B (for an FFN weight of a BERT layer
 * at a few dozen tokens per call, packing took about a quarter of the product's time). The
 * key names the layout: the micro-kernel in use, the operand's dtype, place and strides, the
 * sizes. Results are bit-identical to stax_gemm_run's. */
size_t stax_gemm_prepacked_b_size(stax_dtype_t compute_dtype, int64_t n, int64_t k);
uint64_t stax_gemm_prepacked_b_key(stax_dtype_t compute_dtype, int64_t n, int64_t k,
                                   const stax_gemm_operand_t* b, int64_t offset_bytes);
void stax_gemm_prepack_b(stax_dtype_t compute_dtype, int64_t n, int64_t k,
                         const stax_gemm_operand_t* b, void* out);
void stax_gemm_run_prepacked(stax_dtype_t compute_dtype, void* workspace, stax_threadpool_t* pool,
                             int64_t m, int64_t n, int64_t k, double alpha,
                             const stax_gemm_operand_t* a, const stax_gemm_operand_t* b,
                             const void* prepacked_b, double beta, void* c, int64_t c_row_stride,
                             int64_t c_col_stride);

/* Allocates the scratch from `allocator`, runs, frees. */
STAX_MUST_USE stax_status_t stax_gemm(stax_allocator_t allocator, stax_dtype_t compute_dtype,
                                      stax_threadpool_t* pool, int64_t m, int64_t n, int64_t k,
                                      double alpha, const stax_gemm_operand_t* a,
                                      const stax_gemm_operand_t* b, double beta, void* c,
                                      int64_t c_row_stride, int64_t c_col_stride);

/* The micro-kernel variant in use ("avx512f", "avx2+fma", "generic"; "generic-8x32" only when
 * forced: the AVX-512 tile geometry on the generic target, for tests). */
const char* stax_gemm_isa_name(void);
/* That variant's float32 register tile: MR rows by NR columns. */
void stax_gemm_f32_tile(int32_t* mr, int32_t* nr);
/* Forces a variant by name (tests and benchmarks run every variant the CPU has); NULL goes
 * back to picking from the CPU. False when the CPU lacks it or the name is unknown. Not meant
 * to be changed while products run on other threads. */
bool stax_gemm_set_isa(const char* name);

/* ---- batched matmul over strided views (matmul.c) ---------------------------------------- */

/* A batch of matrices: matrix b (a multi-index over batch_dims) starts at
 * data + sum(b[d] * batch_strides[d]) elements; within it (r, c) is at
 * r * row_stride + c * col_stride. Broadcast batch dims have stride 0. */
typedef struct stax_matrix_batch_t {
  stax_dtype_t dtype;
  void* data;
  int32_t batch_rank;
  int64_t batch_dims[STAX_MAX_RANK];
  int64_t batch_strides[STAX_MAX_RANK];
  int64_t rows, cols;
  int64_t row_stride, col_stride;
  /* Optional: the buffer data lives in; when immutable (a program constant) and the same
   * matrix serves every batch index, B is packed once and kept with it. */
  stax_buffer_t* buffer;
} stax_matrix_batch_t;

/* out[b] = a[b] x b[b] for every batch index, all three with the same dtype (any numeric
 * dtype: floats through the core, halves accumulated in float32, integers with wrap-around)
 * and the same batch dims (out's). Shapes must agree (a.cols == b.rows, ...): checked by the
 * caller. Runs batches in parallel when the matrices are small. */
STAX_MUST_USE stax_status_t stax_matmul_batched(const stax_kernel_call_t* call,
                                                const stax_matrix_batch_t* a,
                                                const stax_matrix_batch_t* b,
                                                const stax_matrix_batch_t* out);

/* ---- sliding windows (conv.c) ----------------------------------------------------------- */

typedef enum stax_auto_pad_e {
  STAX_AUTO_PAD_NOTSET,
  STAX_AUTO_PAD_SAME_UPPER,
  STAX_AUTO_PAD_SAME_LOWER,
  STAX_AUTO_PAD_VALID,
} stax_auto_pad_t;

/* Window geometry per spatial dim (input dims 2..). pads holds the begin pads of every dim,
 * then the end pads; after stax_window_forward they are the resolved ones (auto_pad applied). */
typedef struct stax_window_t {
  int32_t spatial;
  stax_auto_pad_t auto_pad;
  bool ceil_mode;
  int64_t input[STAX_MAX_RANK];
  int64_t kernel[STAX_MAX_RANK];
  int64_t strides[STAX_MAX_RANK];
  int64_t dilations[STAX_MAX_RANK];
  int64_t pads[2 * STAX_MAX_RANK];
  int64_t output[STAX_MAX_RANK];
} stax_window_t;

/* Reads an INTS attribute of exactly `count` values, each >= min_value; a missing one fills
 * `out` with default_value. *out_present (may be NULL) says whether it was given. */
STAX_MUST_USE stax_status_t stax_window_read_ints(const stax_kernel_call_t* call, const char* name,
                                                  int32_t count, int64_t default_value,
                                                  int64_t min_value, int64_t* out,
                                                  bool* out_present);
/* Reads a 0/1 INT attribute. */
STAX_MUST_USE stax_status_t stax_window_read_flag(const stax_kernel_call_t* call, const char* name,
                                                  bool* out_value);
/* Reads auto_pad, strides, dilations and pads for input x (rank >= 3); kernel is left 0. */
STAX_MUST_USE stax_status_t stax_window_read(const stax_kernel_call_t* call, const stax_tensor_t* x,
                                             stax_window_t* out);
/* Output sizes of a forward window (Conv, pools; ceil_mode for pools) with the auto_pad pads
 * resolved; SHAPE_MISMATCH naming the input dim when a size would be below 1. */
STAX_MUST_USE stax_status_t stax_window_forward(const stax_kernel_call_t* call,
                                                stax_window_t* window);

/* Floor and ceiling of a / b for b > 0 and any sign of a. */
static inline int64_t stax_floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
static inline int64_t stax_ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

#endif /* STAX_KERNELS_GEMM_H_ */
