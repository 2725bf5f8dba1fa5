/* ConvInteger and QLinearConv: Conv (any spatial rank, groups, pads / auto_pad, strides,
 * dilations) of int8/uint8 inputs on the integer GEMM core (gemm_int8.c).
 *
 * Per (image, group) the convolution is one product
 *   Y[g] (Mg x P) = (W[g] - w_zero) (Mg x Cg*KS) x col (Cg*KS x P)
 * where col is the im2col matrix of x - x_zero as int16 (0 in the padding: padding holds the
 * zero point, which stands for real 0). x's zero point is per tensor; w's per tensor or per
 * output channel ([M]). ConvInteger writes the int32 sums. QLinearConv adds the int32 bias
 * (input 8, [M], quantized with scale x_scale * w_scale[m] and zero point 0) and requantizes
 * as ONNX Runtime does: (float)(acc + bias) * (x_scale * w_scale[m] / y_scale) in float32,
 * rounded half to even, plus y_zero_point, saturated to y's dtype. */
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/quant.h"

typedef struct conv_int_t {
  const stax_tensor_t* x;
  const stax_tensor_t* w; /* contiguous */
  stax_window_t window;
  int64_t group, cg, mg, out_channels, kernel_size, kdim, positions;
  int32_t x_zero;
  int32_t* w_zero;     /* out_channels entries, or NULL */
  float* multipliers;  /* QLinearConv: out_channels entries */
  int32_t* bias;       /* QLinearConv: out_channels entries, or NULL */
  int32_t y_zero;
  stax_dtype_t y_dtype;
} conv_int_t;

typedef struct im2col_int_t {
  const conv_int_t* conv;
  const char* x_base; /* the image's first channel of the group */
  int16_t* col;
} im2col_int_t;

/* Rows [begin, end) of col: row = channel * KS + kernel position. */
static void im2col_int_task(void* ctx, int64_t begin, int64_t end) {
  const im2col_int_t* job = ctx;
  const conv_int_t* conv = job->conv;
  const stax_tensor_t* x = conv->x;
  const stax_window_t* w = &conv->window;
  int32_t spatial = w->spatial;
  for (int64_t row = begin; row < end; row++) {
    int64_t channel = row / conv->kernel_size, kpos = row % conv->kernel_size;
    int64_t tap[STAX_MAX_RANK];
    for (int32_t i = spatial - 1; i >= 0; i--) {
      tap[i] = kpos % w->kernel[i];
      kpos /= w->kernel[i];
    }
    int16_t* out = job->col + row * conv->positions;
    int64_t position[STAX_MAX_RANK] = {0};
    for (int64_t p = 0; p < conv->positions; p++) {
      int64_t offset = channel * x->strides[1];
      bool inside = true;
      for (int32_t i = 0; i < spatial && inside; i++) {
        int64_t at = position[i] * w->strides[i] - w->pads[i] + tap[i] * w->dilations[i];
        inside = at >= 0 && at < w->input[i];
        offset += at * x->strides[2 + i];
      }
      int32_t v = 0;
      if (inside) {
        v = (x->dtype == STAX_DTYPE_INT8 ? ((const int8_t*)job->x_base)[offset]
                                         : ((const uint8_t*)job->x_base)[offset]) -
            conv->x_zero;
      }
      out[p] = (int16_t)v;
      for (int32_t i = spatial - 1; i >= 0; i--) {
        if (++position[i] < w->output[i]) break;
        position[i] = 0;
      }
    }
  }
}

/* Reads a per-tensor ([one element]) or per-output-channel ([M]) parameter into out[M]. */
static stax_status_t per_channel(const stax_kernel_call_t* call, int32_t index, const char* role,
                                 int64_t channels, bool integer, void* out) {
  const stax_tensor_t* t = stax_kernel_input(call, index);
  int64_t count = stax_tensor_element_count(t);
  if (count != 1 && !(t->rank == 1 && count == channels)) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input %d (%s) has shape %s; it must have one element or be [M] = "
                             "[%lld] (per output channel, weight dim 0)",
                             index, role, stax_dims_text(t->rank, t->dims).text,
                             (long long)channels);
  }
  for (int64_t m = 0; m < channels; m++) {
    int64_t at = t->offset + (count == 1 ? 0 : m * t->strides[0]);
    if (integer) {
      ((int32_t*)out)[m] = (int32_t)stax_load_as_i64(t->dtype, stax_buffer_data(t->buffer), at);
    } else {
      ((float*)out)[m] = (float)stax_load_as_f64(t->dtype, stax_buffer_data(t->buffer), at);
    }
  }
  return STAX_OK;
}

/* One element of a per-tensor parameter; SHAPE_MISMATCH naming it otherwise. */
static stax_status_t per_tensor(const stax_kernel_call_t* call, int32_t index, const char* role,
                                double* out) {
  const stax_tensor_t* t = stax_kernel_input(call, index);
  if (stax_tensor_element_count(t) != 1) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input %d (%s) has shape %s; it must have one element (per tensor)",
                             index, role, stax_dims_text(t->rank, t->dims).text);
  }
  *out = stax_load_as_f64(t->dtype, stax_buffer_data(t->buffer), t->offset);
  return STAX_OK;
}

/* Shapes, attributes and the window; x_index / w_index are the inputs' positions. */
static stax_status_t conv_int_setup(stax_kernel_call_t* call, int32_t x_index, int32_t w_index,
                                    conv_int_t* conv) {
  const stax_tensor_t* x = conv->x = stax_kernel_input(call, x_index);
  const stax_tensor_t* w = stax_kernel_input(call, w_index);
  if (x == NULL || w == NULL) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing",
                             x == NULL ? x_index : w_index);
  }
  for (int32_t side = 0; side < 2; side++) {
    const stax_tensor_t* t = side ? w : x;
    if (t->dtype != STAX_DTYPE_INT8 && t->dtype != STAX_DTYPE_UINT8) {
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                               "input %d has dtype %s, expected int8 or uint8",
                               side ? w_index : x_index, stax_dtype_name(t->dtype));
    }
  }
  if (x->rank < 3) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input %d must be (N, C, D1, ...) with rank >= 3, got rank %d",
                             x_index, x->rank);
  }
  if (w->rank != x->rank) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input %d (w) has rank %d but input %d (x) has rank %d", w_index,
                             w->rank, x_index, x->rank);
  }
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "group", 1, &conv->group));
  if (conv->group < 1) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'group' = %lld must be >= 1",
                             (long long)conv->group);
  }
  conv->out_channels = w->dims[0];
  if (x->dims[1] != w->dims[1] * conv->group) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input %d has %lld channels (dim 1) but input %d dim 1 (%lld) x "
                             "group %lld = %lld",
                             x_index, (long long)x->dims[1], w_index, (long long)w->dims[1],
                             (long long)conv->group, (long long)(w->dims[1] * conv->group));
  }
  if (conv->out_channels % conv->group != 0) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input %d dim 0 (%lld output channels) is not divisible by group "
                             "%lld",
                             w_index, (long long)conv->out_channels, (long long)conv->group);
  }
  STAX_RETURN_IF_ERROR(stax_window_read(call, x, &conv->window));
  int64_t kernel[STAX_MAX_RANK];
  bool present = false;
  STAX_RETURN_IF_ERROR(stax_window_read_ints(call, "kernel_shape", conv->window.spatial, 1, 1,
                                             kernel, &present));
  conv->kernel_size = 1;
  for (int32_t i = 0; i < conv->window.spatial; i++) {
    if (w->dims[2 + i] < 1 || (present && kernel[i] != w->dims[2 + i])) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input %d dim %d is %lld but attribute 'kernel_shape'[%d] is %lld "
                               "(kernel dims must be at least 1)",
                               w_index, 2 + i, (long long)w->dims[2 + i], i,
                               (long long)(present ? kernel[i] : w->dims[2 + i]));
    }
    conv->window.kernel[i] = w->dims[2 + i];
    conv->kernel_size *= w->dims[2 + i];
  }
  STAX_RETURN_IF_ERROR(stax_window_forward(call, &conv->window));
  conv->positions = 1;
  for (int32_t i = 0; i < conv->window.spatial; i++) conv->positions *= conv->window.output[i];
  conv->cg = w->dims[1];
  conv->mg = conv->out_channels / conv->group;
  conv->kdim = conv->cg * conv->kernel_size;
  return STAX_OK;
}

/* Runs every (image, group) product into y (int32 sums, or requantized when multipliers). */
static stax_status_t conv_int_run(stax_kernel_call_t* call, conv_int_t* conv, stax_tensor_t* y) {
  const stax_tensor_t* x = conv->x;
  int64_t images = x->dims[0];
  bool requantize = conv->multipliers != NULL;
  /* Rounded up so the int32 sums after the columns stay aligned. */
  size_t col_bytes = ((size_t)conv->kdim * (size_t)conv->positions * sizeof(int16_t) + 63) &
                     ~(size_t)63;
  size_t acc_bytes = requantize ? (size_t)conv->mg * (size_t)conv->positions * sizeof(int32_t) : 0;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(
      stax_allocator_malloc_aligned(call->allocator, col_bytes + acc_bytes, 64, &memory));
  int16_t* col = memory;
  int32_t* acc = requantize ? (int32_t*)((char*)memory + col_bytes) : NULL;
  int64_t low = 0, high = 0;
  if (requantize) stax_quant_range(conv->y_dtype, &low, &high);
  const char* x_data = stax_buffer_data(x->buffer);
  const char* w_data = (const char*)stax_buffer_data(conv->w->buffer) + conv->w->offset;
  stax_status_t status = STAX_OK;
  for (int64_t image = 0; image < images && status == STAX_OK; image++) {
    for (int64_t g = 0; g < conv->group && status == STAX_OK; g++) {
      im2col_int_t job = {conv,
                          x_data + x->offset + image * x->strides[0] +
                              g * conv->cg * x->strides[1],
                          col};
      int64_t grain = conv->positions >= 4096 ? 1 : 4096 / conv->positions + 1;
      stax_parallel_for(call->pool, conv->kdim, grain, im2col_int_task, &job);
      stax_gemm_int_operand_t a = {conv->w->dtype, w_data + g * conv->mg * conv->kdim,
                                   conv->kdim, 1};
      stax_gemm_int_operand_t b = {STAX_DTYPE_INT16, col, conv->positions, 1};
      int64_t y_first = y->offset + (image * conv->out_channels + g * conv->mg) * conv->positions;
      int32_t* c = requantize ? acc : (int32_t*)stax_buffer_data(y->buffer) + y_first;
      status = stax_gemm_int(call->allocator, call->pool, conv->mg, conv->positions, conv->kdim,
                             &a, conv->w_zero ? conv->w_zero + g * conv->mg : NULL, &b, NULL, c,
                             conv->positions);
      if (status != STAX_OK || !requantize) continue;
      void* y_data = stax_buffer_data(y->buffer);
      for (int64_t m = 0; m < conv->mg; m++) {
        int64_t channel = g * conv->mg + m;
        uint32_t bias = conv->bias ? (uint32_t)conv->bias[channel] : 0;
        float multiplier = conv->multipliers[channel];
        for (int64_t p = 0; p < conv->positions; p++) {
          /* int32 wrap-around addition, computed without signed overflow. */
          uint32_t sum = (uint32_t)acc[m * conv->positions + p] + bias;
          int32_t total = sum <= INT32_MAX ? (int32_t)sum : -(int32_t)(~sum) - 1;
          stax_quant_store(conv->y_dtype, y_data, y_first + m * conv->positions + p,
                           stax_quant_saturate((float)total * multiplier, conv->y_zero, low,
                                               high));
        }
      }
    }
  }
  stax_allocator_free_aligned(call->allocator, memory, col_bytes + acc_bytes, 64);
  return status;
}

/* The contiguous weight (a copy when the input is a strided view) and the zero points. */
static stax_status_t conv_int_weights(stax_kernel_call_t* call, int32_t w_index,
                                      int32_t zero_index, const char* zero_role, conv_int_t* conv,
                                      stax_tensor_t** out_copy, int32_t* w_zero) {
  stax_tensor_t* w = stax_kernel_input(call, w_index);
  *out_copy = NULL;
  conv->w = w;
  if (stax_kernel_input(call, zero_index)) {
    STAX_RETURN_IF_ERROR(stax_quant_require_dtype(call, zero_index, zero_role, w->dtype, w_index,
                                                  "w"));
    STAX_RETURN_IF_ERROR(
        per_channel(call, zero_index, zero_role, conv->out_channels, true, w_zero));
    conv->w_zero = w_zero;
  }
  if (!stax_tensor_is_contiguous(w)) {
    STAX_RETURN_IF_ERROR(stax_tensor_copy(call->allocator, w, out_copy));
    conv->w = *out_copy;
  }
  return STAX_OK;
}

/* Output dims (N, M, o1..on). */
static void conv_int_dims(const conv_int_t* conv, int64_t* dims) {
  dims[0] = conv->x->dims[0];
  dims[1] = conv->out_channels;
  for (int32_t i = 0; i < conv->window.spatial; i++) dims[2 + i] = conv->window.output[i];
}

/* x's per-tensor zero point, input `index` (optional for ConvInteger). */
static stax_status_t x_zero_point(stax_kernel_call_t* call, int32_t index, int32_t x_index,
                                  conv_int_t* conv) {
  if (!stax_kernel_input(call, index)) return STAX_OK;
  STAX_RETURN_IF_ERROR(
      stax_quant_require_dtype(call, index, "x_zero_point", conv->x->dtype, x_index, "x"));
  double value = 0;
  STAX_RETURN_IF_ERROR(per_tensor(call, index, "x_zero_point", &value));
  conv->x_zero = (int32_t)value;
  return STAX_OK;
}

stax_status_t stax_kernel_ConvInteger(stax_kernel_call_t* call) {
  conv_int_t conv;
  memset(&conv, 0, sizeof(conv));
  STAX_RETURN_IF_ERROR(conv_int_setup(call, 0, 1, &conv));
  STAX_RETURN_IF_ERROR(x_zero_point(call, 2, 0, &conv));
  size_t zero_bytes = (size_t)conv.out_channels * sizeof(int32_t);
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, zero_bytes, &memory));
  stax_tensor_t* copy = NULL;
  stax_status_t status = conv_int_weights(call, 1, 3, "w_zero_point", &conv, &copy, memory);
  int64_t dims[STAX_MAX_RANK];
  conv_int_dims(&conv, dims);
  stax_tensor_t* y = NULL;
  if (status == STAX_OK) {
    status = stax_kernel_output(call, 0, STAX_DTYPE_INT32, conv.x->rank, dims, &y);
  }
  if (status == STAX_OK) {
    status = conv_int_run(call, &conv, y);
    if (status != STAX_OK) stax_kernel_release_outputs(call);
  }
  if (copy) stax_tensor_release(copy);
  stax_allocator_free(call->allocator, memory, zero_bytes);
  return status;
}

stax_status_t stax_kernel_QLinearConv(stax_kernel_call_t* call) {
  conv_int_t conv;
  memset(&conv, 0, sizeof(conv));
  STAX_RETURN_IF_ERROR(conv_int_setup(call, 0, 3, &conv));
  static const int32_t scale_inputs[] = {1, 4, 6};
  static const char* const scale_roles[] = {"x_scale", "w_scale", "y_scale"};
  for (int32_t i = 0; i < 3; i++) {
    STAX_RETURN_IF_ERROR(stax_quant_require_scale_dtype(call, scale_inputs[i], scale_roles[i]));
  }
  if (!stax_kernel_input(call, 2) || !stax_kernel_input(call, 5) || !stax_kernel_input(call, 7)) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "inputs 2, 5 and 7 (the zero points) are required");
  }
  STAX_RETURN_IF_ERROR(x_zero_point(call, 2, 0, &conv));
  const stax_tensor_t* y_zero = stax_kernel_input(call, 7);
  if (y_zero->dtype != STAX_DTYPE_INT8 && y_zero->dtype != STAX_DTYPE_UINT8) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 7 (y_zero_point) has dtype %s, expected int8 or uint8",
                             stax_dtype_name(y_zero->dtype));
  }
  conv.y_dtype = y_zero->dtype;
  double x_scale = 0, y_scale = 0, y_zero_value = 0;
  STAX_RETURN_IF_ERROR(per_tensor(call, 1, "x_scale", &x_scale));
  STAX_RETURN_IF_ERROR(per_tensor(call, 6, "y_scale", &y_scale));
  STAX_RETURN_IF_ERROR(per_tensor(call, 7, "y_zero_point", &y_zero_value));
  conv.y_zero = (int32_t)y_zero_value;
  const stax_tensor_t* bias = stax_kernel_input(call, 8);
  if (bias && (bias->dtype != STAX_DTYPE_INT32 || bias->rank != 1 ||
               bias->dims[0] != conv.out_channels)) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 8 (B) is %s %s; it must be int32 [M] = [%lld]",
                             stax_dtype_name(bias->dtype),
                             stax_dims_text(bias->rank, bias->dims).text,
                             (long long)conv.out_channels);
  }
  /* w_zero, multipliers, bias: out_channels entries each. */
  size_t per = (size_t)conv.out_channels * 4;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, 3 * per, &memory));
  int32_t* w_zero = memory;
  float* multipliers = (float*)((char*)memory + per);
  int32_t* bias_values = (int32_t*)((char*)memory + 2 * per);
  stax_tensor_t* copy = NULL;
  stax_status_t status = conv_int_weights(call, 3, 5, "w_zero_point", &conv, &copy, w_zero);
  if (status == STAX_OK) {
    status = per_channel(call, 4, "w_scale", conv.out_channels, false, multipliers);
  }
  if (status == STAX_OK) {
    for (int64_t m = 0; m < conv.out_channels; m++) {
      multipliers[m] = (float)x_scale * multipliers[m] / (float)y_scale;
    }
    conv.multipliers = multipliers;
    if (bias) {
      for (int64_t m = 0; m < conv.out_channels; m++) {
        bias_values[m] = (int32_t)stax_load_as_i64(bias->dtype, stax_buffer_data(bias->buffer),
                                                   bias->offset + m * bias->strides[0]);
      }
      conv.bias = bias_values;
    }
  }
  int64_t dims[STAX_MAX_RANK];
  conv_int_dims(&conv, dims);
  stax_tensor_t* y = NULL;
  if (status == STAX_OK) status = stax_kernel_output(call, 0, conv.y_dtype, conv.x->rank, dims, &y);
  if (status == STAX_OK) {
    status = conv_int_run(call, &conv, y);
    if (status != STAX_OK) stax_kernel_release_outputs(call);
  }
  if (copy) stax_tensor_release(copy);
  stax_allocator_free(call->allocator, memory, 3 * per);
  return status;
}
