/* Comparison and logic kernels: Equal, Less, LessOrEqual, Greater, GreaterOrEqual (numbers;
 * Equal also bool) and And, Or, Xor (bool). Outputs are bool; inputs broadcast numpy-style.
 * float16/bfloat16 compare through float32, which is exact. Bool inputs are bytes where any
 * non-zero value reads as true, so logic normalizes before combining. */
#include <string.h>

#include "kernels/elementwise.h"

/* out[i] = EXPR(x, y) as a 0/1 byte; T is the operand type. The contiguous and
 * scalar-operand loops are separate so they vectorize. */
#define COMPARE_ROW(name, TA, EXPR)                                                         \
  static bool name(void* out_, int64_t out_stride, const void* a_, int64_t a_stride,       \
                   const void* b_, int64_t b_stride, int64_t count) {                      \
    typedef TA T;                                                                          \
    uint8_t* restrict out = out_;                                                          \
    const T* restrict a = a_;                                                              \
    const T* restrict b = b_;                                                              \
    STAX_BINARY_ROW_LOOPS(EXPR)                                                            \
    return false;                                                                          \
  }

/* X(dtype suffix, C type, op, EXPR) for every dtype compared natively. */
#define NUMERIC_TYPES(X, op, ...)                                                            \
  X(FLOAT32, float, op, __VA_ARGS__) X(FLOAT64, double, op, __VA_ARGS__)                   \
  X(INT8, int8_t, op, __VA_ARGS__) X(INT16, int16_t, op, __VA_ARGS__)                      \
  X(INT32, int32_t, op, __VA_ARGS__) X(INT64, int64_t, op, __VA_ARGS__)                    \
  X(UINT8, uint8_t, op, __VA_ARGS__) X(UINT16, uint16_t, op, __VA_ARGS__)                  \
  X(UINT32, uint32_t, op, __VA_ARGS__) X(UINT64, uint64_t, op, __VA_ARGS__)

#define DEFINE_COMPARE(dtype, ctype, op, ...) \
  COMPARE_ROW(compare_##op##_##dtype, ctype, __VA_ARGS__)
#define CASE_FN(dtype, ctype, op, ...) \
  case STAX_DTYPE_##dtype:             \
    return compare_##op##_##dtype;

NUMERIC_TYPES(DEFINE_COMPARE, Equal, x == y)
NUMERIC_TYPES(DEFINE_COMPARE, Less, x < y)
NUMERIC_TYPES(DEFINE_COMPARE, LessOrEqual, x <= y)
NUMERIC_TYPES(DEFINE_COMPARE, Greater, x > y)
NUMERIC_TYPES(DEFINE_COMPARE, GreaterOrEqual, x >= y)
COMPARE_ROW(compare_Equal_BOOL, uint8_t, (x != 0) == (y != 0))
COMPARE_ROW(compare_And_BOOL, uint8_t, (x != 0) & (y != 0))
COMPARE_ROW(compare_Or_BOOL, uint8_t, (x != 0) | (y != 0))
COMPARE_ROW(compare_Xor_BOOL, uint8_t, (x != 0) ^ (y != 0))

static stax_binary_row_fn compare_row_for(stax_op_t op, stax_dtype_t dtype) {
  switch (op) {
    case STAX_OP_Equal:
      if (dtype == STAX_DTYPE_BOOL) return compare_Equal_BOOL;
      switch (dtype) {
        NUMERIC_TYPES(CASE_FN, Equal)
        default: return NULL;
      }
    case STAX_OP_Less:
      switch (dtype) {
        NUMERIC_TYPES(CASE_FN, Less)
        default: return NULL;
      }
    case STAX_OP_LessOrEqual:
      switch (dtype) {
        NUMERIC_TYPES(CASE_FN, LessOrEqual)
        default: return NULL;
      }
    case STAX_OP_Greater:
      switch (dtype) {
        NUMERIC_TYPES(CASE_FN, Greater)
        default: return NULL;
      }
    case STAX_OP_GreaterOrEqual:
      switch (dtype) {
        NUMERIC_TYPES(CASE_FN, GreaterOrEqual)
        default: return NULL;
      }
    case STAX_OP_And: return dtype == STAX_DTYPE_BOOL ? compare_And_BOOL : NULL;
    case STAX_OP_Or: return dtype == STAX_DTYPE_BOOL ? compare_Or_BOOL : NULL;
    case STAX_OP_Xor: return dtype == STAX_DTYPE_BOOL ? compare_Xor_BOOL : NULL;
    default: return NULL;
  }
}

static stax_status_t compare_kernel(stax_kernel_call_t* call) {
  stax_tensor_t* a = stax_kernel_input(call, 0);
  stax_tensor_t* b = stax_kernel_input(call, 1);
  if (!a || !b)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing", a ? 1 : 0);
  if (a->dtype != b->dtype)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 1 is %s but input 0 is %s",
                             stax_dtype_name(b->dtype), stax_dtype_name(a->dtype));
  bool half = a->dtype == STAX_DTYPE_FLOAT16 || a->dtype == STAX_DTYPE_BFLOAT16;
  stax_dtype_t compute = half ? STAX_DTYPE_FLOAT32 : a->dtype;
  stax_binary_row_fn fn = compare_row_for(call->node->op, compute);
  if (!fn)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input dtype %s is not supported",
                             stax_dtype_name(a->dtype));
  int32_t rank = 0;
  int64_t dims[STAX_MAX_RANK];
  stax_tensor_t* operands[2] = {a, b};
  STAX_RETURN_IF_ERROR(stax_kernel_broadcast_shape(call, 2, operands, &rank, dims));
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, STAX_DTYPE_BOOL, rank, dims, &out));
  (void)stax_binary_elementwise_run(call->pool, a, b, out, fn, compute, STAX_DTYPE_BOOL);
  return STAX_OK;
}

stax_status_t stax_kernel_Equal(stax_kernel_call_t* call) { return compare_kernel(call); }
stax_status_t stax_kernel_Less(stax_kernel_call_t* call) { return compare_kernel(call); }
stax_status_t stax_kernel_LessOrEqual(stax_kernel_call_t* call) { return compare_kernel(call); }
stax_status_t stax_kernel_Greater(stax_kernel_call_t* call) { return compare_kernel(call); }
stax_status_t stax_kernel_GreaterOrEqual(stax_kernel_call_t* call) {
  return compare_kernel(call);
}
stax_status_t stax_kernel_And(stax_kernel_call_t* call) { return compare_kernel(call); }
stax_status_t stax_kernel_Or(stax_kernel_call_t* call) { return compare_kernel(call); }
stax_status_t stax_kernel_Xor(stax_kernel_call_t* call) { return compare_kernel(call); }
