/* Variadic elementwise kernels: Max, Min (every number type), Sum, Mean (floating point), each
 * over one or more inputs broadcast numpy-style to a common shape.
 *
 * The output accumulates: out = in0 op in1, then out = out op in_k for each further input
 * (the output is an exact alias of the accumulator operand, which the row functions allow).
 * One input is a copy. Mean divides the sum by the input count at the end. Max and Min
 * propagate NaN like numpy.maximum/minimum, so a NaN anywhere is never silently dropped.
 * float16/bfloat16 accumulate in the output's own dtype, one rounding per input, through
 * float32 arithmetic. */
#include "kernels/elementwise.h"

#define VARIADIC_ROW(name, TA, EXPR)                                                       \
  static bool name(void* out_, int64_t out_stride, const void* a_, int64_t a_stride,       \
                   const void* b_, int64_t b_stride, int64_t count) {                      \
    typedef TA T;                                                                          \
    T* restrict out = out_;                                                                \
    const T* restrict a = a_;                                                              \
    const T* restrict b = b_;                                                              \
    STAX_BINARY_ROW_LOOPS(EXPR)                                                            \
    return false;                                                                          \
  }

#define FLOAT_TYPES(X, op, ...) \
  X(FLOAT32, float, op, __VA_ARGS__) X(FLOAT64, double, op, __VA_ARGS__)
#define INTEGER_TYPES(X, op, ...)                                                            \
  X(INT8, int8_t, op, __VA_ARGS__) X(INT16, int16_t, op, __VA_ARGS__)                      \
  X(INT32, int32_t, op, __VA_ARGS__) X(INT64, int64_t, op, __VA_ARGS__)                    \
  X(UINT8, uint8_t, op, __VA_ARGS__) X(UINT16, uint16_t, op, __VA_ARGS__)                  \
  X(UINT32, uint32_t, op, __VA_ARGS__) X(UINT64, uint64_t, op, __VA_ARGS__)

#define DEFINE_ROW(dtype, ctype, op, ...) VARIADIC_ROW(variadic_##op##_##dtype, ctype, __VA_ARGS__)
#define CASE_FN(dtype, ctype, op, ...) \
  case STAX_DTYPE_##dtype:             \
    return variadic_##op##_##dtype;

/* x != x is true only for NaN; the comparisons keep whichever operand is NaN. */
FLOAT_TYPES(DEFINE_ROW, Max, (x > y || x != x) ? x : y)
INTEGER_TYPES(DEFINE_ROW, Max, x > y ? x : y)
FLOAT_TYPES(DEFINE_ROW, Min, (x < y || x != x) ? x : y)
INTEGER_TYPES(DEFINE_ROW, Min, x < y ? x : y)
FLOAT_TYPES(DEFINE_ROW, Sum, x + y)
FLOAT_TYPES(DEFINE_ROW, Divide, x / y)

static stax_binary_row_fn variadic_row_for(stax_op_t op, stax_dtype_t dtype) {
  switch (op) {
    case STAX_OP_Max:
      switch (dtype) {
        FLOAT_TYPES(CASE_FN, Max)
        INTEGER_TYPES(CASE_FN, Max)
        default: return NULL;
      }
    case STAX_OP_Min:
      switch (dtype) {
        FLOAT_TYPES(CASE_FN, Min)
        INTEGER_TYPES(CASE_FN, Min)
        default: return NULL;
      }
    case STAX_OP_Sum:
    case STAX_OP_Mean:
      switch (dtype) {
        FLOAT_TYPES(CASE_FN, Sum)
        default: return NULL;
      }
    default: return NULL;
  }
}

/* out /= count, with count as a scalar tensor of the compute dtype. */
static stax_status_t divide_by_count(stax_kernel_call_t* call, stax_tensor_t* out,
                                     stax_dtype_t compute, int32_t count) {
  float divisor32 = (float)count;
  double divisor64 = (double)count;
  void* divisor = compute == STAX_DTYPE_FLOAT32 ? (void*)&divisor32 : (void*)&divisor64;
  stax_tensor_t* scalar = NULL;
  STAX_RETURN_IF_ERROR(
      stax_tensor_wrap(call->allocator, divisor, compute, 0, NULL, NULL, NULL, NULL, &scalar));
  stax_binary_row_fn fn = compute == STAX_DTYPE_FLOAT32 ? variadic_Divide_FLOAT32
                                                        : variadic_Divide_FLOAT64;
  (void)stax_binary_elementwise_run(call->pool, out, scalar, out, fn, compute, compute);
  stax_tensor_release(scalar);
  return STAX_OK;
}

static stax_status_t variadic_kernel(stax_kernel_call_t* call) {
  int32_t count = call->input_count;
  if (count < 1) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "needs at least one input");
  for (int32_t i = 0; i < count; i++) {
    const stax_tensor_t* input = call->inputs[i];
    if (!input) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing", i);
    if (input->dtype != call->inputs[0]->dtype)
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input %d is %s but input 0 is %s", i,
                               stax_dtype_name(input->dtype),
                               stax_dtype_name(call->inputs[0]->dtype));
  }
  stax_dtype_t dtype = call->inputs[0]->dtype;
  bool half = dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16;
  stax_dtype_t compute = half ? STAX_DTYPE_FLOAT32 : dtype;
  stax_binary_row_fn fn = variadic_row_for(call->node->op, compute);
  if (!fn)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input dtype %s is not supported",
                             stax_dtype_name(dtype));
  int32_t rank = 0;
  int64_t dims[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(stax_kernel_broadcast_shape(call, count, call->inputs, &rank, dims));
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, dtype, rank, dims, &out));
  stax_status_t status = STAX_OK;
  if (count == 1) {
    status = stax_tensor_copy_into(call->inputs[0], out);
  } else {
    (void)stax_binary_elementwise_run(call->pool, call->inputs[0], call->inputs[1], out, fn,
                                      compute, compute);
    for (int32_t i = 2; i < count; i++)
      (void)stax_binary_elementwise_run(call->pool, out, call->inputs[i], out, fn, compute,
                                        compute);
  }
  if (!status && call->node->op == STAX_OP_Mean && count > 1)
    status = divide_by_count(call, out, compute, count);
  if (status) {
    if (!preallocated) {
      stax_tensor_release(out);
      call->outputs[0] = NULL;
    }
    return stax_status_annotate(status, "%s node '%s'", stax_op_name(call->node->op),
                                call->node->name ? call->node->name : "?");
  }
  return STAX_OK;
}

stax_status_t stax_kernel_Max(stax_kernel_call_t* call) { return variadic_kernel(call); }
stax_status_t stax_kernel_Min(stax_kernel_call_t* call) { return variadic_kernel(call); }
stax_status_t stax_kernel_Sum(stax_kernel_call_t* call) { return variadic_kernel(call); }
stax_status_t stax_kernel_Mean(stax_kernel_call_t* call) { return variadic_kernel(call); }
