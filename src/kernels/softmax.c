/* Generic kernels for Softmax, LogSoftmax and Hardmax along one axis.
 *
 * Opset-13 semantics only: the attribute 'axis' (default -1) names a single axis and every
 * other dim is independent. The opset < 13 form (axis default 1, input flattened to 2-D
 * around it) is not handled here: the ONNX importer rewrites old-opset nodes into this form
 * (Reshape around a Softmax on the last axis), so one kernel serves both.
 *
 * Numerics: values are converted to double, the slice's maximum is subtracted before exp, so
 * no finite input overflows; Softmax = exp(x - max) / sum, LogSoftmax = x - max - log(sum).
 * A NaN anywhere in a slice makes that slice NaN. Hardmax puts 1 at the first maximum of the
 * slice and 0 elsewhere. float16 / bfloat16 / float32 / float64 are supported.
 *
 * Layout: the index space without the axis is walked row by row (in parallel for large
 * tensors). When the axis is the innermost dim in memory each slice is processed on its own
 * in three streaming passes (max; exp and sum; write); otherwise a block of slices advances
 * one axis step at a time so every step reads a contiguous block. Neither needs heap scratch:
 * float32 / float64 Softmax parks exp(x - max) in the output between the last two passes so
 * exp runs once per element.
 *
 * Fast path: float32 Softmax over an axis contiguous in input and output (attention scores,
 * the common case) runs in float32 with a polynomial exp the compiler vectorizes (Cephes'
 * expf: within 2 ulp; arguments below -87.33, where exp leaves float32's normal range, give
 * 0) and a double sum: about 6x faster than libm's double exp per element, which was most of
 * an interpreted attention block's time (a BERT-base layer at 4 x 128 tokens: 9.7 ms of 128).
 * Its loop is compiled per ISA level (kernels/fast_loops.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fast_loops.h"
#include "kernels/kernel.h"

#define SOFTMAX_BLOCK 256

typedef enum softmax_kind_e { KIND_SOFTMAX, KIND_LOG_SOFTMAX, KIND_HARDMAX } softmax_kind_t;

typedef struct softmax_ctx_t {
  softmax_kind_t kind;
  stax_dtype_t dtype;
  int64_t element_size;
  const char* input;  /* first element */
  char* output;       /* first element */
  int64_t axis_length;
  int64_t axis_input_stride;
  int64_t axis_output_stride;
  int64_t inner_input_stride;
  int64_t inner_output_stride;
  const stax_fast_loops_t* fast; /* the float32 fast path's loops at the current ISA level */
} softmax_ctx_t;

static inline double max_with_nan(double a, double b) { return (b > a || b != b) ? b : a; }

/* Rows of any float dtype as doubles (strides in elements). */
static void load(const softmax_ctx_t* c, int64_t offset, int64_t stride, int64_t count,
                 double* out) {
  stax_kernel_load_f64_row(c->dtype, c->input + offset * c->element_size, stride, count, out);
}

static void load_output(const softmax_ctx_t* c, int64_t offset, int64_t stride, int64_t count,
                        double* out) {
  stax_kernel_load_f64_row(c->dtype, c->output + offset * c->element_size, stride, count, out);
}

static void store(const softmax_ctx_t* c, int64_t offset, int64_t stride, int64_t count,
                  const double* values) {
  stax_kernel_store_f64_row(c->dtype, values, count, c->output + offset * c->element_size, stride);
}

/* Softmax evaluates exp once per element: the second pass parks exp(x - max) in the output
 * and the third scales it. Only float32 / float64 outputs park them: a float16 / bfloat16
 * park would round twice, so those recompute exp instead. */
static bool parks_exponentials(const softmax_ctx_t* c) {
  return c->kind == KIND_SOFTMAX &&
         (c->dtype == STAX_DTYPE_FLOAT32 || c->dtype == STAX_DTYPE_FLOAT64);
}

/* One slice along the axis, in three passes (two for Hardmax). */
static void softmax_slice(const softmax_ctx_t* c, int64_t in_offset, int64_t out_offset) {
  if (c->kind == KIND_SOFTMAX && c->dtype == STAX_DTYPE_FLOAT32 && c->axis_input_stride == 1 &&
      c->axis_output_stride == 1) {
    c->fast->softmax_row((float*)c->output + out_offset, (const float*)c->input + in_offset,
                         c->axis_length);
    return;
  }
  double values[SOFTMAX_BLOCK];
  int64_t length = c->axis_length, in_stride = c->axis_input_stride;
  int64_t out_stride = c->axis_output_stride;
  bool park = parks_exponentials(c);
  double max = -INFINITY, sum = 0.0;
  int64_t best = 0;
  for (int64_t start = 0; start < length; start += SOFTMAX_BLOCK) {
    int64_t n = length - start < SOFTMAX_BLOCK ? length - start : SOFTMAX_BLOCK;
    load(c, in_offset + start * in_stride, in_stride, n, values);
    if (c->kind == KIND_HARDMAX) {
      for (int64_t k = 0; k < n; k++) {
        if (start + k == 0 || values[k] > max) {
          max = values[k];
          best = start + k;
        }
      }
    } else {
      for (int64_t k = 0; k < n; k++) max = max_with_nan(max, values[k]);
    }
  }
  if (c->kind != KIND_HARDMAX) {
    for (int64_t start = 0; start < length; start += SOFTMAX_BLOCK) {
      int64_t n = length - start < SOFTMAX_BLOCK ? length - start : SOFTMAX_BLOCK;
      load(c, in_offset + start * in_stride, in_stride, n, values);
      for (int64_t k = 0; k < n; k++) {
        values[k] = exp(values[k] - max);
        sum += values[k];
      }
      if (park) store(c, out_offset + start * out_stride, out_stride, n, values);
    }
  }
  double inverse = 1.0 / sum, shift = max + log(sum);
  for (int64_t start = 0; start < length; start += SOFTMAX_BLOCK) {
    int64_t n = length - start < SOFTMAX_BLOCK ? length - start : SOFTMAX_BLOCK;
    if (c->kind == KIND_HARDMAX) {
      for (int64_t k = 0; k < n; k++) values[k] = start + k == best ? 1.0 : 0.0;
    } else if (park) {
      load_output(c, out_offset + start * out_stride, out_stride, n, values);
      for (int64_t k = 0; k < n; k++) values[k] *= inverse;
    } else {
      load(c, in_offset + start * in_stride, in_stride, n, values);
      if (c->kind == KIND_SOFTMAX) {
        for (int64_t k = 0; k < n; k++) values[k] = exp(values[k] - max) * inverse;
      } else {
        for (int64_t k = 0; k < n; k++) values[k] -= shift;
      }
    }
    store(c, out_offset + start * out_stride, out_stride, n, values);
  }
}

/* `count` neighbouring slices (along the inner dim of the index space) advanced together. */
static void softmax_block(const softmax_ctx_t* c, int64_t in_offset, int64_t out_offset,
                          int64_t count) {
  double values[SOFTMAX_BLOCK], max[SOFTMAX_BLOCK], sum[SOFTMAX_BLOCK];
  double finish[SOFTMAX_BLOCK]; /* Softmax: 1 / sum; LogSoftmax: max + log(sum) */
  int64_t best[SOFTMAX_BLOCK];
  int64_t in_inner = c->inner_input_stride, out_inner = c->inner_output_stride;
  bool park = parks_exponentials(c);
  for (int64_t j = 0; j < count; j++) {
    max[j] = -INFINITY;
    sum[j] = 0.0;
    best[j] = 0;
  }
  for (int64_t k = 0; k < c->axis_length; k++) {
    load(c, in_offset + k * c->axis_input_stride, in_inner, count, values);
    if (c->kind == KIND_HARDMAX) {
      for (int64_t j = 0; j < count; j++) {
        if (k == 0 || values[j] > max[j]) {
          max[j] = values[j];
          best[j] = k;
        }
      }
    } else {
      for (int64_t j = 0; j < count; j++) max[j] = max_with_nan(max[j], values[j]);
    }
  }
  if (c->kind != KIND_HARDMAX) {
    for (int64_t k = 0; k < c->axis_length; k++) {
      load(c, in_offset + k * c->axis_input_stride, in_inner, count, values);
      for (int64_t j = 0; j < count; j++) {
        values[j] = exp(values[j] - max[j]);
        sum[j] += values[j];
      }
      if (park) store(c, out_offset + k * c->axis_output_stride, out_inner, count, values);
    }
    for (int64_t j = 0; j < count; j++)
      finish[j] = c->kind == KIND_SOFTMAX ? 1.0 / sum[j] : max[j] + log(sum[j]);
  }
  for (int64_t k = 0; k < c->axis_length; k++) {
    if (c->kind == KIND_HARDMAX) {
      for (int64_t j = 0; j < count; j++) values[j] = best[j] == k ? 1.0 : 0.0;
    } else if (park) {
      load_output(c, out_offset + k * c->axis_output_stride, out_inner, count, values);
      for (int64_t j = 0; j < count; j++) values[j] *= finish[j];
    } else {
      load(c, in_offset + k * c->axis_input_stride, in_inner, count, values);
      if (c->kind == KIND_SOFTMAX) {
        for (int64_t j = 0; j < count; j++) values[j] = exp(values[j] - max[j]) * finish[j];
      } else {
        for (int64_t j = 0; j < count; j++) values[j] -= finish[j];
      }
    }
    store(c, out_offset + k * c->axis_output_stride, out_inner, count, values);
  }
}

static void softmax_row(void* opaque, const int64_t* offsets, int64_t count) {
  const softmax_ctx_t* c = opaque;
  bool axis_innermost =
      count == 1 ||
      llabs((long long)c->axis_input_stride) <= llabs((long long)c->inner_input_stride);
  if (axis_innermost) {
    for (int64_t j = 0; j < count; j++)
      softmax_slice(c, offsets[0] + j * c->inner_input_stride,
                    offsets[1] + j * c->inner_output_stride);
    return;
  }
  for (int64_t start = 0; start < count; start += SOFTMAX_BLOCK) {
    int64_t n = count - start < SOFTMAX_BLOCK ? count - start : SOFTMAX_BLOCK;
    softmax_block(c, offsets[0] + start * c->inner_input_stride,
                  offsets[1] + start * c->inner_output_stride, n);
  }
}

static stax_status_t softmax_kernel(stax_kernel_call_t* call, softmax_kind_t kind) {
  const stax_tensor_t* x = stax_kernel_input(call, 0);
  if (!x) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is missing");
  if (!stax_dtype_is_float(x->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 must be a floating-point tensor, got %s",
                             stax_dtype_name(x->dtype));
  int64_t axis = -1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", -1, &axis));
  if (axis < -(int64_t)x->rank || axis >= x->rank)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "axis %lld is out of range for input 0 of rank %d", (long long)axis,
                             x->rank);
  if (axis < 0) axis += x->rank;
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, x->dtype, x->rank, x->dims, &y));

  /* The index space without the axis; y's own strides serve a preallocated output of any
   * layout. */
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
  softmax_ctx_t ctx = {
      .kind = kind,
      .dtype = x->dtype,
      .element_size = element_size,
      .input = (const char*)stax_buffer_data(x->buffer) + x->offset * element_size,
      .output = (char*)stax_buffer_data(y->buffer) + y->offset * element_size,
      .axis_length = x->dims[axis],
      .axis_input_stride = x->strides[axis],
      .axis_output_stride = y->strides[axis],
      .inner_input_stride = space_rank > 0 ? in_strides[space_rank - 1] : 0,
      .inner_output_stride = space_rank > 0 ? out_strides[space_rank - 1] : 0,
      .fast = stax_fast_loops(),
  };
  if (ctx.axis_length == 0) return STAX_OK;
  const int64_t* strides[2] = {in_strides, out_strides};
  stax_nd_for_each_row_parallel(call->pool, space_rank, space_dims, 2, strides, NULL,
                                ctx.axis_length, softmax_row, &ctx);
  return STAX_OK;
}

stax_status_t stax_kernel_Softmax(stax_kernel_call_t* call) {
  return softmax_kernel(call, KIND_SOFTMAX);
}

stax_status_t stax_kernel_LogSoftmax(stax_kernel_call_t* call) {
  return softmax_kernel(call, KIND_LOG_SOFTMAX);
}

stax_status_t stax_kernel_Hardmax(stax_kernel_call_t* call) {
  return softmax_kernel(call, KIND_HARDMAX);
}
