/* Internal interface of the quantization kernels (quantize.c, matmul_integer.c,
 * conv_integer.c, gemm_int8.c): quantized ranges, rounding with saturation, reading the small
 * scale / zero-point tensors, and the integer GEMM core with int32 accumulation.
 *
 * Requantization (QLinearMatMul, QLinearConv) follows ONNX Runtime: the multiplier
 * a_scale * b_scale / y_scale is formed in float32, the int32 accumulator is converted to
 * float32 and multiplied by it, rounded half to even, the output zero point added and the
 * result saturated. The ONNX reference does the multiplication in float64; the two differ
 * only when the float32 product lands within an ulp of a rounding tie. */
#ifndef STAX_KERNELS_QUANT_H_
#define STAX_KERNELS_QUANT_H_

#include <math.h>

#include "kernels/kernel.h"

/* The integer range of a quantized dtype (int8, uint8, int16, uint16; int32 for
 * DequantizeLinear's input). False for any other dtype. */
bool stax_quant_range(stax_dtype_t dtype, int64_t* out_low, int64_t* out_high);

/* round-half-even(value) + zero_point, saturated to [low, high]; NaN gives the zero point. */
static inline int64_t stax_quant_saturate(double value, int64_t zero_point, int64_t low,
                                          int64_t high) {
  double rounded = value == value ? nearbyint(value) : 0.0;
  double shifted = rounded + (double)zero_point;
  if (shifted <= (double)low) return low;
  if (shifted >= (double)high) return high;
  return (int64_t)shifted;
}

/* Stores integer `value` (already in range) as element `index` of an integer dtype. */
void stax_quant_store(stax_dtype_t dtype, void* base, int64_t index, int64_t value);

/* Reads every element of a small tensor (any strides), in row-major order, as doubles /
 * int32s into `out` (room for its element count). */
void stax_quant_read_f64(const stax_tensor_t* tensor, double* out);
void stax_quant_read_i32(const stax_tensor_t* tensor, int32_t* out);

/* Checks that input `index` (named `role` in messages: "a_zero_point") has dtype `dtype`:
 * DTYPE_MISMATCH naming the node, the input, its dtype and the input it must agree with. */
STAX_MUST_USE stax_status_t stax_quant_require_dtype(const stax_kernel_call_t* call,
                                                     int32_t index, const char* role,
                                                     stax_dtype_t dtype, int32_t like_index,
                                                     const char* like_role);
/* Checks that a scale input has a floating-point dtype (float32, float16, bfloat16, float64). */
STAX_MUST_USE stax_status_t stax_quant_require_scale_dtype(const stax_kernel_call_t* call,
                                                           int32_t index, const char* role);

/* ---- integer GEMM core (gemm_int8.c) ----------------------------------------------------- */

/* One operand: element (r, c) is at data + (r * row_stride + c * col_stride) elements, of
 * dtype int8, uint8 or int16 (the im2col matrix of ConvInteger, zero points subtracted). */
typedef struct stax_gemm_int_operand_t {
  stax_dtype_t dtype;
  const void* data;
  int64_t row_stride;
  int64_t col_stride;
} stax_gemm_int_operand_t;

/* C (M x N, int32, row stride c_row_stride, unit column stride) =
 *   sum over k of (A[m, k] - a_zero[m]) * (B[k, n] - b_zero[n])
 * with wrap-around int32 accumulation (ONNX: "accumulation may overflow if and only if in
 * 32 bits"). a_zero / b_zero may be NULL (zero); each difference must fit int16, which holds
 * for 8-bit operands and zero points and for ConvInteger's columns. Packs both operands to
 * int16 panels from `allocator` and splits the tiles over `pool`. */
STAX_MUST_USE stax_status_t stax_gemm_int(stax_allocator_t allocator, stax_threadpool_t* pool,
                                          int64_t m, int64_t n, int64_t k,
                                          const stax_gemm_int_operand_t* a,
                                          const int32_t* a_zero,
                                          const stax_gemm_int_operand_t* b,
                                          const int32_t* b_zero, int32_t* c,
                                          int64_t c_row_stride);

/* The micro-kernel in use ("avx512vnni", "avxvnni", "avx2", "generic"), following stax_isa()
 * and the CPU's VNNI extensions. */
const char* stax_gemm_int_isa_name(void);
/* Forces a variant by name (tests run every one the CPU has); NULL goes back to picking from
 * the CPU. False when the CPU lacks it or the name is unknown. */
bool stax_gemm_int_set_isa(const char* name);

#endif /* STAX_KERNELS_QUANT_H_ */
