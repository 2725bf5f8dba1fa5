/* Generic kernels for ArgMax and ArgMin: the int64 index of the largest / smallest element
 * along one axis (attribute 'axis', default 0, negative counts from the end), with 'keepdims'
 * (default 1) and 'select_last_index' (default 0: the first of equal values wins).
 *
 * Every numeric dtype is compared exactly in its own domain (int64 / uint64 for integers, so
 * 64-bit values above 2^53 still order correctly; double for floats, which holds every
 * float16, bfloat16 and float32 exactly). NaN counts as the extreme in both directions, as
 * numpy's argmax / argmin do: the first NaN (the last with select_last_index) is chosen. An
 * empty axis has no answer and is an error unless the output is empty too.
 *
 * The output index space (the input's dims without the axis) is walked row by row. When the
 * axis is the innermost dim in memory, each output scans its run of the axis; otherwise a
 * block of outputs is updated together, one axis step at a time, so every step reads a
 * contiguous block. */
#include <math.h>
#include <stdlib.h>

#include "kernels/kernel.h"

/* Outputs updated together in the blocked scan; values are converted this many at a time. */
#define ARG_BLOCK 256

typedef enum arg_domain_e { ARG_FLOAT, ARG_SIGNED, ARG_UNSIGNED } arg_domain_t;

typedef struct arg_ctx_t {
  const char* input; /* first element */
  stax_dtype_t dtype;
  int64_t element_size;
  arg_domain_t domain;
  bool is_max;
  bool select_last;
  int64_t axis_length;
  int64_t axis_stride;  /* input elements */
  int64_t inner_input_stride;
  int64_t inner_output_stride;
  int64_t* output;      /* first element */
} arg_ctx_t;

typedef union arg_value_t {
  double f;
  int64_t i;
  uint64_t u;
} arg_value_t;

/* True when candidate v (seen later) replaces the current best b. */
static inline bool arg_better(const arg_ctx_t* c, arg_value_t v, arg_value_t b) {
  switch (c->domain) {
    case ARG_FLOAT: {
      bool v_nan = v.f != v.f, b_nan = b.f != b.f;
      if (c->select_last) return v_nan || (c->is_max ? v.f >= b.f : v.f <= b.f);
      return (v_nan && !b_nan) || (c->is_max ? v.f > b.f : v.f < b.f);
    }
    case ARG_SIGNED:
      if (c->select_last) return c->is_max ? v.i >= b.i : v.i <= b.i;
      return c->is_max ? v.i > b.i : v.i < b.i;
    case ARG_UNSIGNED:
      if (c->select_last) return c->is_max ? v.u >= b.u : v.u <= b.u;
      return c->is_max ? v.u > b.u : v.u < b.u;
  }
  return false;
}

/* Converts `count` elements at byte stride into wide values of the context's domain. */
static void arg_load(const arg_ctx_t* c, int64_t offset, int64_t stride, int64_t count,
                     arg_value_t* out) {
  static const stax_dtype_t wide[] = {STAX_DTYPE_FLOAT64, STAX_DTYPE_INT64, STAX_DTYPE_UINT64};
  stax_convert_strided(c->dtype, c->input + offset * c->element_size, stride * c->element_size,
                       wide[c->domain], out, sizeof(arg_value_t), count);
}

/* One output: scans the axis from input offset `offset`. */
static int64_t arg_scan_axis(const arg_ctx_t* c, int64_t offset) {
  arg_value_t values[ARG_BLOCK];
  arg_value_t best = {0};
  int64_t best_index = 0;
  for (int64_t start = 0; start < c->axis_length; start += ARG_BLOCK) {
    int64_t n = c->axis_length - start < ARG_BLOCK ? c->axis_length - start : ARG_BLOCK;
    arg_load(c, offset + start * c->axis_stride, c->axis_stride, n, values);
    int64_t k = 0;
    if (start == 0) best = values[k++];
    for (; k < n; k++) {
      if (arg_better(c, values[k], best)) {
        best = values[k];
        best_index = start + k;
      }
    }
  }
  return best_index;
}

static void arg_row(void* opaque, const int64_t* offsets, int64_t count) {
  const arg_ctx_t* c = opaque;
  int64_t in_offset = offsets[0], out_offset = offsets[1];
  if (count == 1 || llabs((long long)c->axis_stride) <= llabs((long long)c->inner_input_stride)) {
    for (int64_t j = 0; j < count; j++)
      c->output[out_offset + j * c->inner_output_stride] =
          arg_scan_axis(c, in_offset + j * c->inner_input_stride);
    return;
  }
  arg_value_t best[ARG_BLOCK], values[ARG_BLOCK];
  int64_t best_index[ARG_BLOCK];
  for (int64_t start = 0; start < count; start += ARG_BLOCK) {
    int64_t n = count - start < ARG_BLOCK ? count - start : ARG_BLOCK;
    int64_t block_offset = in_offset + start * c->inner_input_stride;
    arg_load(c, block_offset, c->inner_input_stride, n, best);
    for (int64_t j = 0; j < n; j++) best_index[j] = 0;
    for (int64_t k = 1; k < c->axis_length; k++) {
      arg_load(c, block_offset + k * c->axis_stride, c->inner_input_stride, n, values);
      for (int64_t j = 0; j < n; j++) {
        if (arg_better(c, values[j], best[j])) {
          best[j] = values[j];
          best_index[j] = k;
        }
      }
    }
    for (int64_t j = 0; j < n; j++)
      c->output[out_offset + (start + j) * c->inner_output_stride] = best_index[j];
  }
}

static stax_status_t arg_reduce_kernel(stax_kernel_call_t* call, bool is_max) {
  const stax_tensor_t* x = stax_kernel_input(call, 0);
  if (!x) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is missing");
  if (!stax_dtype_is_float(x->dtype) && !stax_dtype_is_integer(x->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 0 has unsupported dtype %s",
                             stax_dtype_name(x->dtype));
  int64_t axis = 0, keepdims = 1, select_last = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "keepdims", 1, &keepdims));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "select_last_index", 0, &select_last));
  if (axis < -(int64_t)x->rank || axis >= x->rank)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "axis %lld is out of range for input 0 of rank %d", (long long)axis,
                             x->rank);
  if (axis < 0) axis += x->rank;

  /* The output index space: the input's dims without the axis. */
  int32_t space_rank = 0;
  int64_t space_dims[STAX_MAX_RANK], in_strides[STAX_MAX_RANK], out_strides[STAX_MAX_RANK];
  int64_t out_dims[STAX_MAX_RANK];
  int32_t out_rank = 0;
  int64_t out_count = 1;
  for (int32_t d = 0; d < x->rank; d++) {
    if (d == axis) {
      if (keepdims) out_dims[out_rank++] = 1;
      continue;
    }
    out_dims[out_rank++] = x->dims[d];
    space_dims[space_rank] = x->dims[d];
    in_strides[space_rank] = x->strides[d];
    space_rank++;
    out_count *= x->dims[d];
  }
  if (out_count > 0 && x->dims[axis] == 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 dim %lld (the axis) is 0: no element to choose",
                             (long long)axis);
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, STAX_DTYPE_INT64, out_rank, out_dims, &y));
  if (out_count == 0) return STAX_OK;
  /* y's own strides (without the kept axis) serve a preallocated output of any layout. */
  for (int32_t d = 0, s = 0; d < x->rank; d++) {
    if (d == axis) continue;
    out_strides[s++] = y->strides[keepdims ? d : (d < axis ? d : d - 1)];
  }
  arg_ctx_t ctx = {
      .input = (const char*)stax_buffer_data(x->buffer) +
               x->offset * (int64_t)stax_dtype_size(x->dtype),
      .dtype = x->dtype,
      .element_size = (int64_t)stax_dtype_size(x->dtype),
      .domain = stax_dtype_is_float(x->dtype)         ? ARG_FLOAT
                : stax_dtype_is_signed_int(x->dtype) ? ARG_SIGNED
                                                      : ARG_UNSIGNED,
      .is_max = is_max,
      .select_last = select_last != 0,
      .axis_length = x->dims[axis],
      .axis_stride = x->strides[axis],
      .inner_input_stride = space_rank > 0 ? in_strides[space_rank - 1] : 0,
      .inner_output_stride = space_rank > 0 ? out_strides[space_rank - 1] : 0,
      .output = (int64_t*)stax_buffer_data(y->buffer) + y->offset,
  };
  const int64_t* strides[2] = {in_strides, out_strides};
  stax_nd_for_each_row_parallel(call->pool, space_rank, space_dims, 2, strides, NULL,
                                ctx.axis_length, arg_row, &ctx);
  return STAX_OK;
}

stax_status_t stax_kernel_ArgMax(stax_kernel_call_t* call) {
  return arg_reduce_kernel(call, true);
}

stax_status_t stax_kernel_ArgMin(stax_kernel_call_t* call) {
  return arg_reduce_kernel(call, false);
}
