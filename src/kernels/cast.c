/* Cast (to = an ONNX TensorProto type code) and CastLike (to input 1's dtype). Conversion
 * follows stax_convert_strided (runtime/convert.c): float to integer truncates toward zero and
 * saturates (NaN -> 0), integer to integer wraps, to bool is x != 0, to float rounds to nearest
 * even. The float8 'saturate' and 'round_mode' attributes have no effect on the dtypes stax
 * has. Rows of any strides convert directly; nothing is staged. */
#include "kernels/elementwise.h"

/* Operand 0 is the output, 1 the input. */
typedef struct cast_plan_t {
  stax_dtype_t dtypes[2];
  int64_t sizes[2];
  char* data[2];
  int64_t inner[2];
} cast_plan_t;

static void cast_row(void* ctx, const int64_t* offsets, int64_t count) {
  const cast_plan_t* plan = ctx;
  stax_convert_strided(plan->dtypes[1], plan->data[1] + offsets[1] * plan->sizes[1],
                       plan->inner[1] * plan->sizes[1], plan->dtypes[0],
                       plan->data[0] + offsets[0] * plan->sizes[0],
                       plan->inner[0] * plan->sizes[0], count);
}

static stax_status_t cast_to(stax_kernel_call_t* call, stax_dtype_t dtype) {
  stax_tensor_t* x = stax_kernel_input(call, 0);
  if (!x) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is missing");
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, dtype, x->rank, x->dims, &out));
  const stax_tensor_t* operands[2] = {out, x};
  cast_plan_t plan;
  int64_t strides[2][STAX_MAX_RANK];
  int64_t base_offsets[2];
  for (int32_t k = 0; k < 2; k++) {
    plan.dtypes[k] = operands[k]->dtype;
    plan.sizes[k] = (int64_t)stax_dtype_size(operands[k]->dtype);
    plan.data[k] = stax_buffer_data(operands[k]->buffer);
    stax_kernel_broadcast_strides(operands[k], x->rank, x->dims, strides[k]);
    base_offsets[k] = operands[k]->offset;
  }
  stax_elementwise_iterate(call->pool, x->rank, x->dims, 2,
                           (const int64_t(*)[STAX_MAX_RANK])strides, base_offsets, plan.inner,
                           cast_row, &plan);
  return STAX_OK;
}

stax_status_t stax_kernel_Cast(stax_kernel_call_t* call) {
  if (!stax_node_attr_find(call->node, "to"))
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'to' is required");
  int64_t to = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "to", 0, &to));
  stax_dtype_t dtype =
      to >= INT32_MIN && to <= INT32_MAX ? stax_dtype_from_onnx((int32_t)to) : STAX_DTYPE_INVALID;
  if (dtype == STAX_DTYPE_INVALID)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'to' = %lld is not a supported dtype (ONNX type code)",
                             (long long)to);
  return cast_to(call, dtype);
}

stax_status_t stax_kernel_CastLike(stax_kernel_call_t* call) {
  stax_tensor_t* like = stax_kernel_input(call, 1);
  if (!like) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 1 is missing");
  return cast_to(call, like->dtype);
}
