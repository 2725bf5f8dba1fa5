/* Where(condition, X, Y): X where the bool condition holds, else Y, with numpy broadcasting of
 * all three. Selection never looks at values, only at their bytes, so one row function per
 * element size (1, 2, 4, 8 bytes) serves every dtype; the contiguous loop is a branch-free
 * select the compiler vectorizes. */
#include "kernels/elementwise.h"

/* Operand order: output, condition, X, Y. */
typedef struct where_plan_t {
  char* data[4];
  int64_t sizes[4];
  int64_t inner[4];
} where_plan_t;

#define WHERE_ROW(name, T)                                                                    \
  static void name(void* ctx, const int64_t* offsets, int64_t count) {                        \
    const where_plan_t* plan = ctx;                                                           \
    T* restrict out = (T*)(void*)(plan->data[0] + offsets[0] * plan->sizes[0]);               \
    const uint8_t* restrict condition = (const uint8_t*)(plan->data[1] + offsets[1]);         \
    const T* restrict x = (const T*)(const void*)(plan->data[2] + offsets[2] * plan->sizes[2]); \
    const T* restrict y = (const T*)(const void*)(plan->data[3] + offsets[3] * plan->sizes[3]); \
    int64_t os = plan->inner[0], cs = plan->inner[1], xs = plan->inner[2], ys = plan->inner[3]; \
    if (os == 1 && cs == 1 && xs == 1 && ys == 1) {                                           \
      for (int64_t i = 0; i < count; i++) out[i] = condition[i] ? x[i] : y[i];                \
    } else if (os == 1 && cs == 1 && xs == 0 && ys == 0) {                                    \
      const T xv = x[0], yv = y[0];                                                           \
      for (int64_t i = 0; i < count; i++) out[i] = condition[i] ? xv : yv;                    \
    } else {                                                                                  \
      for (int64_t i = 0; i < count; i++)                                                     \
        out[i * os] = condition[i * cs] ? x[i * xs] : y[i * ys];                              \
    }                                                                                         \
  }

WHERE_ROW(where_row_1, uint8_t)
WHERE_ROW(where_row_2, uint16_t)
WHERE_ROW(where_row_4, uint32_t)
WHERE_ROW(where_row_8, uint64_t)

stax_status_t stax_kernel_Where(stax_kernel_call_t* call) {
  stax_tensor_t* inputs[3];
  for (int32_t i = 0; i < 3; i++) {
    inputs[i] = stax_kernel_input(call, i);
    if (!inputs[i]) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing", i);
  }
  if (inputs[0]->dtype != STAX_DTYPE_BOOL)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 0 (condition) must be bool, got %s",
                             stax_dtype_name(inputs[0]->dtype));
  if (inputs[1]->dtype != inputs[2]->dtype)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 2 is %s but input 1 is %s",
                             stax_dtype_name(inputs[2]->dtype), stax_dtype_name(inputs[1]->dtype));
  int32_t rank = 0;
  int64_t dims[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(stax_kernel_broadcast_shape(call, 3, inputs, &rank, dims));
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, inputs[1]->dtype, rank, dims, &out));

  const stax_tensor_t* operands[4] = {out, inputs[0], inputs[1], inputs[2]};
  where_plan_t plan;
  int64_t strides[4][STAX_MAX_RANK];
  int64_t base_offsets[4];
  for (int32_t k = 0; k < 4; k++) {
    plan.data[k] = stax_buffer_data(operands[k]->buffer);
    plan.sizes[k] = (int64_t)stax_dtype_size(operands[k]->dtype);
    stax_kernel_broadcast_strides(operands[k], rank, dims, strides[k]);
    base_offsets[k] = operands[k]->offset;
  }
  stax_nd_row_fn row;
  switch (plan.sizes[0]) {
    case 8: row = where_row_8; break;
    case 4: row = where_row_4; break;
    case 2: row = where_row_2; break;
    default: row = where_row_1; break;
  }
  stax_elementwise_iterate(call->pool, rank, dims, 4, (const int64_t(*)[STAX_MAX_RANK])strides,
                           base_offsets, plan.inner, row, &plan);
  return STAX_OK;
}
