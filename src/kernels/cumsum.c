/* Generic kernel for CumSum(x, axis): running sums along one axis. The axis is a scalar (or
 * one-element 1-D) int32/int64 input, negative counting from the end; attribute 'exclusive'
 * (default 0) leaves out the element itself, 'reverse' (default 0) runs from the end.
 *
 * Floating-point inputs (float16, bfloat16, float32, float64) run in double, so float16 and
 * float32 running sums are rounded once per output rather than once per step; integer inputs
 * run in 64-bit wrapping arithmetic, which narrows to the dtype's own wrapping result.
 *
 * Layout: as in softmax.c, a slice is scanned on its own when the axis is innermost in
 * memory; otherwise a block of slices advances one axis step at a time. No heap scratch. */
#include <stdlib.h>

#include "kernels/kernel.h"

#define CUMSUM_BLOCK 256

typedef union cumsum_value_t {
  double f;
  uint64_t u;
} cumsum_value_t;

typedef struct cumsum_ctx_t {
  stax_dtype_t dtype;
  stax_dtype_t wide; /* FLOAT64, INT64 or UINT64: the running-sum domain */
  int64_t element_size;
  const char* input;
  char* output;
  bool exclusive;
  bool reverse;
  int64_t axis_length;
  int64_t axis_input_stride;
  int64_t axis_output_stride;
  int64_t inner_input_stride;
  int64_t inner_output_stride;
} cumsum_ctx_t;

static void load(const cumsum_ctx_t* c, int64_t offset, int64_t stride, int64_t count,
                 cumsum_value_t* out) {
  stax_convert_strided(c->dtype, c->input + offset * c->element_size, stride * c->element_size,
                       c->wide, out, sizeof(cumsum_value_t), count);
}

static void store(const cumsum_ctx_t* c, int64_t offset, int64_t stride, int64_t count,
                  const cumsum_value_t* values) {
  stax_convert_strided(c->wide, values, sizeof(cumsum_value_t), c->dtype,
                       c->output + offset * c->element_size, stride * c->element_size, count);
}

/* Replaces values[k] by the running sum in place, in the ctx's direction. */
static void prefix(const cumsum_ctx_t* c, cumsum_value_t* values, int64_t count,
                   cumsum_value_t* running) {
  bool is_float = c->wide == STAX_DTYPE_FLOAT64;
  for (int64_t i = 0; i < count; i++) {
    int64_t k = c->reverse ? count - 1 - i : i;
    cumsum_value_t v = values[k];
    if (is_float) {
      double before = running->f;
      running->f += v.f;
      values[k].f = c->exclusive ? before : running->f;
    } else {
      uint64_t before = running->u;
      running->u += v.u;
      values[k].u = c->exclusive ? before : running->u;
    }
  }
}

/* One slice along the axis, in chunks taken in the direction of the sum. */
static void cumsum_slice(const cumsum_ctx_t* c, int64_t in_offset, int64_t out_offset) {
  cumsum_value_t values[CUMSUM_BLOCK];
  cumsum_value_t running = {0};
  if (c->wide == STAX_DTYPE_FLOAT64) running.f = 0.0;
  int64_t length = c->axis_length;
  int64_t chunks = (length + CUMSUM_BLOCK - 1) / CUMSUM_BLOCK;
  for (int64_t i = 0; i < chunks; i++) {
    int64_t chunk = c->reverse ? chunks - 1 - i : i;
    int64_t start = chunk * CUMSUM_BLOCK;
    int64_t n = length - start < CUMSUM_BLOCK ? length - start : CUMSUM_BLOCK;
    load(c, in_offset + start * c->axis_input_stride, c->axis_input_stride, n, values);
    prefix(c, values, n, &running);
    store(c, out_offset + start * c->axis_output_stride, c->axis_output_stride, n, values);
  }
}

/* `count` neighbouring slices advanced together, one axis step at a time. */
static void cumsum_block(const cumsum_ctx_t* c, int64_t in_offset, int64_t out_offset,
                         int64_t count) {
  cumsum_value_t values[CUMSUM_BLOCK], running[CUMSUM_BLOCK];
  bool is_float = c->wide == STAX_DTYPE_FLOAT64;
  for (int64_t j = 0; j < count; j++) {
    running[j].u = 0;
    if (is_float) running[j].f = 0.0;
  }
  for (int64_t i = 0; i < c->axis_length; i++) {
    int64_t k = c->reverse ? c->axis_length - 1 - i : i;
    load(c, in_offset + k * c->axis_input_stride, c->inner_input_stride, count, values);
    for (int64_t j = 0; j < count; j++) {
      if (is_float) {
        double before = running[j].f;
        running[j].f += values[j].f;
        values[j].f = c->exclusive ? before : running[j].f;
      } else {
        uint64_t before = running[j].u;
        running[j].u += values[j].u;
        values[j].u = c->exclusive ? before : running[j].u;
      }
    }
    store(c, out_offset + k * c->axis_output_stride, c->inner_output_stride, count, values);
  }
}

static void cumsum_row(void* opaque, const int64_t* offsets, int64_t count) {
  const cumsum_ctx_t* c = opaque;
  bool axis_innermost =
      count == 1 ||
      llabs((long long)c->axis_input_stride) <= llabs((long long)c->inner_input_stride);
  if (axis_innermost) {
    for (int64_t j = 0; j < count; j++)
      cumsum_slice(c, offsets[0] + j * c->inner_input_stride,
                   offsets[1] + j * c->inner_output_stride);
    return;
  }
  for (int64_t start = 0; start < count; start += CUMSUM_BLOCK) {
    int64_t n = count - start < CUMSUM_BLOCK ? count - start : CUMSUM_BLOCK;
    cumsum_block(c, offsets[0] + start * c->inner_input_stride,
                 offsets[1] + start * c->inner_output_stride, n);
  }
}

stax_status_t stax_kernel_CumSum(stax_kernel_call_t* call) {
  const stax_tensor_t* x = stax_kernel_input(call, 0);
  if (!x) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is missing");
  if (!stax_dtype_is_float(x->dtype) && !stax_dtype_is_integer(x->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 0 has unsupported dtype %s",
                             stax_dtype_name(x->dtype));
  const stax_tensor_t* axis_tensor = stax_kernel_input(call, 1);
  if (axis_tensor && axis_tensor->dtype != STAX_DTYPE_INT32 &&
      axis_tensor->dtype != STAX_DTYPE_INT64)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 1 (axis) must be int32 or int64, got %s",
                             stax_dtype_name(axis_tensor->dtype));
  int64_t axis = 0, axis_count = 0;
  STAX_RETURN_IF_ERROR(
      stax_kernel_read_ints(call, axis_tensor, "input 1 (axis)", 1, &axis, &axis_count));
  if (axis_count != 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 1 (axis) has no value");
  int64_t exclusive = 0, reverse = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "exclusive", 0, &exclusive));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "reverse", 0, &reverse));
  if (axis < -(int64_t)x->rank || axis >= x->rank)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "axis %lld is out of range for input 0 of rank %d", (long long)axis,
                             x->rank);
  if (axis < 0) axis += x->rank;
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, x->dtype, x->rank, x->dims, &y));

  int32_t space_rank = 0;
  int64_t space_dims[STAX_MAX_RANK], in_strides[STAX_MAX_RANK], out_strides[STAX_MAX_RANK];
  for (int32_t d = 0; d < x->rank; d++) {
    if (d == axis) continue;
    space_dims[space_rank] = x->dims[d];
    in_strides[space_rank] = x->strides[d];
    out_strides[space_rank] = y->strides[d];
    space_rank++;
  }
  int64_t element_size = (int64_t)stax_dtype_size(x->dtype);
  cumsum_ctx_t ctx = {
      .dtype = x->dtype,
      .wide = stax_dtype_is_float(x->dtype)         ? STAX_DTYPE_FLOAT64
              : stax_dtype_is_signed_int(x->dtype) ? STAX_DTYPE_INT64
                                                    : STAX_DTYPE_UINT64,
      .element_size = element_size,
      .input = (const char*)stax_buffer_data(x->buffer) + x->offset * element_size,
      .output = (char*)stax_buffer_data(y->buffer) + y->offset * element_size,
      .exclusive = exclusive != 0,
      .reverse = reverse != 0,
      .axis_length = x->dims[axis],
      .axis_input_stride = x->strides[axis],
      .axis_output_stride = y->strides[axis],
      .inner_input_stride = space_rank > 0 ? in_strides[space_rank - 1] : 0,
      .inner_output_stride = space_rank > 0 ? out_strides[space_rank - 1] : 0,
  };
  if (ctx.axis_length == 0) return STAX_OK;
  const int64_t* strides[2] = {in_strides, out_strides};
  stax_nd_for_each_row_parallel(call->pool, space_rank, space_dims, 2, strides, NULL,
                                ctx.axis_length, cumsum_row, &ctx);
  return STAX_OK;
}
