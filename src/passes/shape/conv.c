/* Shape functions for sliding-window ops: Conv, ConvTranspose, the quantized ConvInteger and
 * QLinearConv, MaxPool, AveragePool and the global pools. Inputs are channels-first (N, C, D1, ..., Dn).
 *
 * Output spatial sizes are symbolic (per spatial dim i, extent = dilation*(kernel-1) + 1):
 *   explicit pads (auto_pad NOTSET): floor((D + pad_begin + pad_end - extent) / stride) + 1,
 *       with ceil instead of floor under ceil_mode (pools), where a window may not start in
 *       the end padding: min(that, ceil((D + pad_begin) / stride));
 *   SAME_UPPER / SAME_LOWER:        ceil(D / stride);
 *   VALID:                          ceil((D - extent + 1) / stride);
 *   ConvTranspose: stride*(D-1) + output_padding + extent - pad_begin - pad_end, D*stride for
 *       SAME_*, or the output_shape attribute.
 * A size that is provably below 1 is an error naming the node, input dim and formula. */
#include <stdio.h>
#include <string.h>

#include "passes/shape/shape_util.h"

typedef enum auto_pad_e {
  AUTO_PAD_NOTSET,
  AUTO_PAD_SAME_UPPER,
  AUTO_PAD_SAME_LOWER,
  AUTO_PAD_VALID,
} auto_pad_t;

/* Window attributes shared by every op here, one entry per spatial dim. */
typedef struct window_t {
  int32_t spatial;
  auto_pad_t auto_pad;
  bool ceil_mode;
  int64_t strides[STAX_MAX_RANK];
  int64_t dilations[STAX_MAX_RANK];
  int64_t pads[2 * STAX_MAX_RANK]; /* begin values for every dim, then end values */
} window_t;

/* Reads an INTS attribute of exactly `count` values, each >= min_value; missing attributes
 * fill `out` with default_value. *out_present says whether it was given. */
static stax_status_t read_int_list(const stax_shape_infer_t* ic, const char* name,
                                   int32_t count, int64_t default_value, int64_t min_value,
                                   int64_t* out, bool* out_present) {
  const int64_t* data = NULL;
  int32_t given = -1;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(ic->node, name, &given, &data));
  if (out_present) *out_present = given >= 0;
  if (given < 0) {
    for (int32_t k = 0; k < count; k++) out[k] = default_value;
    return STAX_OK;
  }
  if (given != count) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute '%s' has %d values, expected %d", name, given, count);
  }
  for (int32_t k = 0; k < count; k++) {
    if (data[k] < min_value) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "attribute '%s'[%d] = %lld must be at least %lld", name, k,
                              (long long)data[k], (long long)min_value);
    }
    out[k] = data[k];
  }
  return STAX_OK;
}

static stax_status_t read_window(const stax_shape_infer_t* ic, int32_t spatial,
                                 bool allow_ceil_mode, window_t* out) {
  memset(out, 0, sizeof(*out));
  out->spatial = spatial;
  const char* auto_pad = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "auto_pad", "NOTSET", &auto_pad));
  if (strcmp(auto_pad, "NOTSET") == 0) {
    out->auto_pad = AUTO_PAD_NOTSET;
  } else if (strcmp(auto_pad, "SAME_UPPER") == 0) {
    out->auto_pad = AUTO_PAD_SAME_UPPER;
  } else if (strcmp(auto_pad, "SAME_LOWER") == 0) {
    out->auto_pad = AUTO_PAD_SAME_LOWER;
  } else if (strcmp(auto_pad, "VALID") == 0) {
    out->auto_pad = AUTO_PAD_VALID;
  } else {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or "
                            "VALID, got \"%s\"",
                            auto_pad);
  }
  bool has_pads = false;
  STAX_RETURN_IF_ERROR(read_int_list(ic, "strides", spatial, 1, 1, out->strides, NULL));
  STAX_RETURN_IF_ERROR(read_int_list(ic, "dilations", spatial, 1, 1, out->dilations, NULL));
  STAX_RETURN_IF_ERROR(read_int_list(ic, "pads", 2 * spatial, 0, 0, out->pads, &has_pads));
  if (has_pads && out->auto_pad != AUTO_PAD_NOTSET) {
    /* Exporters often write zero pads next to auto_pad; only real pads conflict. */
    for (int32_t k = 0; k < 2 * spatial; k++) {
      if (out->pads[k] != 0) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                                "attribute 'pads' cannot be combined with auto_pad \"%s\"",
                                auto_pad);
      }
    }
  }
  if (allow_ceil_mode) {
    STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "ceil_mode", false, &out->ceil_mode));
  }
  return STAX_OK;
}

/* dilation * (kernel - 1) + 1 */
static const stax_dim_t* window_extent(stax_shape_ctx_t* shape, const stax_dim_t* kernel,
                                       int64_t dilation) {
  return stax_dim_add_const(shape, stax_dim_mul_const(shape, kernel, dilation), 1 - dilation);
}

/* Fails when the output size is provably below 1. */
static stax_status_t check_output_size(stax_shape_infer_t* ic, const stax_shape_operand_t* x,
                                       int32_t axis, const stax_dim_t* size) {
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  int64_t low = 0, high = 0;
  stax_dim_bounds(ic->shape, size, &low, &high);
  if (high >= 1) return STAX_OK;
  char input_text[96], size_text[160];
  return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                          "input %d '%s' dim %d (%s) is too small for the window: the output "
                          "size %s is less than 1",
                          x->input_index, x->name, axis,
                          stax_shape_dim_text(ic, x->dims[axis], input_text, sizeof(input_text)),
                          stax_shape_dim_text(ic, size, size_text, sizeof(size_text)));
}

/* The output size of a forward window (Conv, pools) along spatial dim i. */
static stax_status_t window_output_size(stax_shape_infer_t* ic, const window_t* window,
                                        int32_t i, const stax_shape_operand_t* x,
                                        const stax_dim_t* kernel, const stax_dim_t** out_size) {
  stax_shape_ctx_t* shape = ic->shape;
  const stax_dim_t* input = x->dims[2 + i];
  const stax_dim_t* stride = stax_dim_const(shape, window->strides[i]);
  const stax_dim_t* extent = window_extent(shape, kernel, window->dilations[i]);
  const stax_dim_t* size = NULL;
  switch (window->auto_pad) {
    case AUTO_PAD_SAME_UPPER:
    case AUTO_PAD_SAME_LOWER: size = stax_dim_ceildiv(shape, input, stride); break;
    case AUTO_PAD_VALID:
      size = stax_dim_ceildiv(
          shape, stax_dim_add_const(shape, stax_dim_sub(shape, input, extent), 1), stride);
      break;
    case AUTO_PAD_NOTSET: {
      int64_t pad_begin = window->pads[i], pad_end = window->pads[window->spatial + i];
      const stax_dim_t* span =
          stax_dim_sub(shape, stax_dim_add_const(shape, input, pad_begin + pad_end), extent);
      if (!window->ceil_mode) {
        size = stax_dim_add_const(shape, stax_dim_floordiv(shape, span, stride), 1);
      } else {
        const stax_dim_t* rounded_up =
            stax_dim_add_const(shape, stax_dim_ceildiv(shape, span, stride), 1);
        /* The last window must start inside the input or the begin padding. */
        const stax_dim_t* starts =
            stax_dim_ceildiv(shape, stax_dim_add_const(shape, input, pad_begin), stride);
        size = stax_dim_min(shape, rounded_up, starts);
      }
      break;
    }
  }
  STAX_RETURN_IF_ERROR(check_output_size(ic, x, 2 + i, size));
  *out_size = size;
  return STAX_OK;
}

/* x: (N, C, D1..Dn) with n >= 1, a floating-point dtype (pools also allow 8-bit ints). */
static stax_status_t read_spatial_input(stax_shape_infer_t* ic, stax_dtype_mask_t allowed,
                                        const char* what, stax_shape_operand_t* x) {
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, x));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, x, allowed, what));
  return stax_shape_require_rank(ic, x, 3, STAX_MAX_RANK);
}

/* Checks a kernel_shape attribute against the weight's spatial dims (from axis 2). */
static stax_status_t check_kernel_shape(stax_shape_infer_t* ic, const stax_shape_operand_t* w,
                                        int32_t spatial) {
  int64_t kernel[STAX_MAX_RANK];
  bool present = false;
  STAX_RETURN_IF_ERROR(read_int_list(ic, "kernel_shape", spatial, 1, 1, kernel, &present));
  for (int32_t i = 0; present && i < spatial; i++) {
    int64_t actual = 0;
    if (stax_shape_dim_const(ic, w->dims[2 + i], &actual) && actual != kernel[i]) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "attribute 'kernel_shape'[%d] = %lld but input %d '%s' dim %d is "
                              "%lld",
                              i, (long long)kernel[i], w->input_index, w->name, 2 + i,
                              (long long)actual);
    }
    const stax_dim_t* expected = stax_dim_const(ic->shape, kernel[i]);
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
    STAX_RETURN_IF_ERROR(stax_shape_match_dim(ic, w, 2 + i, expected, w->input_index, 2 + i));
  }
  return STAX_OK;
}

static stax_status_t read_group(stax_shape_infer_t* ic, int64_t* out_group) {
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "group", 1, out_group));
  if (*out_group < 1) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'group' = %lld must be >= 1",
                            (long long)*out_group);
  }
  return STAX_OK;
}

/* Fails when a known channel count is not a multiple of the group count. */
static stax_status_t check_divisible(stax_shape_infer_t* ic, const stax_shape_operand_t* operand,
                                     int32_t axis, int64_t group) {
  int64_t channels = 0;
  if (stax_shape_dim_const(ic, operand->dims[axis], &channels) && channels % group != 0) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input %d '%s' dim %d (%lld) is not divisible by group %lld",
                            operand->input_index, operand->name, axis, (long long)channels,
                            (long long)group);
  }
  return STAX_OK;
}

/* Requires `channels` (x's dim 1) == per_group * group, with a clear message for constants. */
static stax_status_t check_channels(stax_shape_infer_t* ic, const stax_shape_operand_t* x,
                                    const stax_shape_operand_t* w, int32_t w_axis,
                                    int64_t group) {
  int64_t channels = 0, per_group = 0;
  if (stax_shape_dim_const(ic, x->dims[1], &channels) &&
      stax_shape_dim_const(ic, w->dims[w_axis], &per_group) && channels != per_group * group) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input %d '%s' has %lld channels (dim 1) but input %d '%s' dim %d "
                            "(%lld) x group %lld = %lld",
                            x->input_index, x->name, (long long)channels, w->input_index,
                            w->name, w_axis, (long long)per_group, (long long)group,
                            (long long)(per_group * group));
  }
  const stax_dim_t* expected = stax_dim_mul_const(ic->shape, w->dims[w_axis], group);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_shape_match_dim(ic, x, 1, expected, w->input_index, w_axis);
}

/* Optional bias (input bias_index): a vector of `channels` entries with x's dtype, or int32
 * when int32_bias (QLinearConv). */
static stax_status_t check_bias(stax_shape_infer_t* ic, const stax_shape_operand_t* x,
                                int32_t bias_index, bool int32_bias, const stax_dim_t* channels,
                                int32_t channels_input, int32_t channels_axis) {
  stax_shape_operand_t bias;
  bool present = false;
  stax_shape_read_input(ic, bias_index, &bias, &present);
  if (!present) return STAX_OK;
  if (int32_bias) {
    STAX_RETURN_IF_ERROR(
        stax_shape_require_dtype(ic, &bias, STAX_DTYPE_BIT(STAX_DTYPE_INT32), "int32"));
  } else {
    STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, x, &bias));
  }
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &bias, 1, 1));
  return stax_shape_match_dim(ic, &bias, 0, channels, channels_input, channels_axis);
}

/* The output of a forward convolution of x by w (already read and dtype-checked), with an
 * optional bias at input bias_index (-1: none). */
static stax_status_t conv_output(stax_shape_infer_t* ic, const stax_shape_operand_t* x,
                                 const stax_shape_operand_t* w, int32_t bias_index,
                                 bool int32_bias, stax_dtype_t out_dtype) {
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, w, x->rank, x->rank));
  int32_t spatial = x->rank - 2;
  int64_t group = 1;
  window_t window;
  /* Attributes before any unification: a rejected node should record as few equalities as
   * possible (the union-find cannot undo them). */
  STAX_RETURN_IF_ERROR(read_group(ic, &group));
  STAX_RETURN_IF_ERROR(read_window(ic, spatial, false, &window));
  STAX_RETURN_IF_ERROR(check_divisible(ic, w, 0, group));
  STAX_RETURN_IF_ERROR(check_kernel_shape(ic, w, spatial));
  STAX_RETURN_IF_ERROR(check_channels(ic, x, w, 1, group));
  if (bias_index >= 0) {
    STAX_RETURN_IF_ERROR(
        check_bias(ic, x, bias_index, int32_bias, w->dims[0], w->input_index, 0));
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  dims[0] = stax_dim_resolve(ic->shape, x->dims[0]);
  dims[1] = stax_dim_resolve(ic->shape, w->dims[0]);
  for (int32_t i = 0; i < spatial; i++) {
    STAX_RETURN_IF_ERROR(window_output_size(ic, &window, i, x, w->dims[2 + i], &dims[2 + i]));
  }
  return stax_shape_set_output(ic, 0, out_dtype, x->rank, dims);
}

/* Conv(X, W, B?): W is (M, C/group, k1..kn); the output is (N, M, o1..on). */
stax_status_t stax_shape_conv(stax_shape_infer_t* ic) {
  stax_shape_operand_t x, w;
  STAX_RETURN_IF_ERROR(read_spatial_input(ic, STAX_DTYPES_FLOAT, "a floating-point type", &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &w));
  STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &x, &w));
  return conv_output(ic, &x, &w, 2, false, x.dtype);
}

/* A zero point or scale of a quantized conv: `dtype_like` (when given) fixes its dtype;
 * per_channel allows [M] besides one element. Only constant dims can be checked here. */
static stax_status_t conv_quant_param(stax_shape_infer_t* ic, int32_t index, bool required,
                                      const stax_shape_operand_t* dtype_like, bool per_channel,
                                      const stax_shape_operand_t* w) {
  stax_shape_operand_t p;
  bool present = false;
  STAX_RETURN_IF_ERROR(stax_shape_read_quant_param(ic, index, required, dtype_like, &p, &present));
  if (!present) return STAX_OK;
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &p, 0, 1));
  int64_t length = 0, channels = 0;
  if (p.rank == 1 && stax_shape_dim_const(ic, p.dims[0], &length) && length != 1) {
    if (!per_channel) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "input %d '%s' dim 0 is %lld; it must have one element (per "
                              "tensor)",
                              index, p.name, (long long)length);
    }
    if (stax_shape_dim_const(ic, w->dims[0], &channels) && channels != length) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "input %d '%s' dim 0 is %lld but input %d '%s' dim 0 (output "
                              "channels) is %lld",
                              index, p.name, (long long)length, w->input_index, w->name,
                              (long long)channels);
    }
  }
  return STAX_OK;
}

/* ConvInteger(x, w, x_zero_point?, w_zero_point?) -> int32, Conv's shape. */
stax_status_t stax_shape_conv_integer(stax_shape_infer_t* ic) {
  stax_shape_operand_t x, w;
  STAX_RETURN_IF_ERROR(read_spatial_input(ic, STAX_DTYPES_QUANT_8BIT, "int8 or uint8", &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &w));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &w, STAX_DTYPES_QUANT_8BIT, "int8 or uint8"));
  STAX_RETURN_IF_ERROR(conv_quant_param(ic, 2, false, &x, false, &w));
  STAX_RETURN_IF_ERROR(conv_quant_param(ic, 3, false, &w, true, &w));
  return conv_output(ic, &x, &w, -1, false, STAX_DTYPE_INT32);
}

/* QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?) -> y_zp's dtype. */
stax_status_t stax_shape_qlinear_conv(stax_shape_infer_t* ic) {
  stax_shape_operand_t x, w, y_zero;
  STAX_RETURN_IF_ERROR(read_spatial_input(ic, STAX_DTYPES_QUANT_8BIT, "int8 or uint8", &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 3, &w));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &w, STAX_DTYPES_QUANT_8BIT, "int8 or uint8"));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 7, &y_zero));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &y_zero, STAX_DTYPES_QUANT_8BIT, "int8 or uint8"));
  STAX_RETURN_IF_ERROR(conv_quant_param(ic, 1, true, NULL, false, &w));
  STAX_RETURN_IF_ERROR(conv_quant_param(ic, 2, true, &x, false, &w));
  STAX_RETURN_IF_ERROR(conv_quant_param(ic, 4, true, NULL, true, &w));
  STAX_RETURN_IF_ERROR(conv_quant_param(ic, 5, true, &w, true, &w));
  STAX_RETURN_IF_ERROR(conv_quant_param(ic, 6, true, NULL, false, &w));
  STAX_RETURN_IF_ERROR(conv_quant_param(ic, 7, true, &y_zero, false, &w));
  return conv_output(ic, &x, &w, 8, true, y_zero.dtype);
}

/* ConvTranspose(X, W, B?): W is (C, M/group, k1..kn); the output is (N, M, o1..on). */
stax_status_t stax_shape_conv_transpose(stax_shape_infer_t* ic) {
  stax_shape_operand_t x, w;
  STAX_RETURN_IF_ERROR(read_spatial_input(ic, STAX_DTYPES_FLOAT, "a floating-point type", &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &w));
  STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &x, &w));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &w, x.rank, x.rank));
  stax_shape_ctx_t* shape = ic->shape;
  int32_t spatial = x.rank - 2;
  int64_t group = 1;
  window_t window;
  STAX_RETURN_IF_ERROR(read_group(ic, &group));
  STAX_RETURN_IF_ERROR(read_window(ic, spatial, false, &window));
  int64_t output_padding[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(
      read_int_list(ic, "output_padding", spatial, 0, 0, output_padding, NULL));
  for (int32_t i = 0; i < spatial; i++) {
    if (output_padding[i] >= window.strides[i] && output_padding[i] >= window.dilations[i]) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "attribute 'output_padding'[%d] = %lld must be less than the "
                              "stride (%lld) or the dilation (%lld)",
                              i, (long long)output_padding[i], (long long)window.strides[i],
                              (long long)window.dilations[i]);
    }
  }
  /* output_shape may list the spatial dims only, or (as some exporters do) all of them. */
  const int64_t* output_shape = NULL;
  int32_t output_shape_count = -1;
  STAX_RETURN_IF_ERROR(
      stax_node_attr_ints(ic->node, "output_shape", &output_shape_count, &output_shape));
  if (output_shape_count >= 0) {
    if (output_shape_count != spatial && output_shape_count != spatial + 2) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "attribute 'output_shape' has %d values, expected %d",
                              output_shape_count, spatial);
    }
    output_shape += output_shape_count - spatial;
    for (int32_t i = 0; i < spatial; i++) {
      if (output_shape[i] < 1) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                                "attribute 'output_shape' value %lld for spatial dim %d must "
                                "be at least 1",
                                (long long)output_shape[i], i);
      }
    }
  }
  /* Shapes last, once every attribute is known to be valid. */
  STAX_RETURN_IF_ERROR(check_divisible(ic, &x, 1, group));
  STAX_RETURN_IF_ERROR(check_kernel_shape(ic, &w, spatial));
  STAX_RETURN_IF_ERROR(check_channels(ic, &x, &w, 0, 1));
  const stax_dim_t* out_channels = stax_dim_mul_const(shape, w.dims[1], group);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  STAX_RETURN_IF_ERROR(check_bias(ic, &x, 2, false, out_channels, 1, 1));
  const stax_dim_t* dims[STAX_MAX_RANK];
  dims[0] = stax_dim_resolve(shape, x.dims[0]);
  dims[1] = stax_dim_resolve(shape, out_channels);
  for (int32_t i = 0; i < spatial; i++) {
    const stax_dim_t* input = x.dims[2 + i];
    const stax_dim_t* size = NULL;
    if (output_shape_count >= 0) {
      size = stax_dim_const(shape, output_shape[i]);
    } else if (window.auto_pad == AUTO_PAD_SAME_UPPER ||
               window.auto_pad == AUTO_PAD_SAME_LOWER) {
      size = stax_dim_mul_const(shape, input, window.strides[i]);
    } else {
      int64_t pads = window.pads[i] + window.pads[spatial + i]; /* zero under VALID */
      const stax_dim_t* extent = window_extent(shape, w.dims[2 + i], window.dilations[i]);
      const stax_dim_t* stretched =
          stax_dim_mul_const(shape, stax_dim_add_const(shape, input, -1), window.strides[i]);
      size = stax_dim_add_const(shape, stax_dim_add(shape, stretched, extent),
                                output_padding[i] - pads);
    }
    STAX_RETURN_IF_ERROR(check_output_size(ic, &x, 2 + i, size));
    dims[2 + i] = size;
  }
  return stax_shape_set_output(ic, 0, x.dtype, x.rank, dims);
}

/* MaxPool / AveragePool(X) -> Y, Indices? (MaxPool only, int64, Y's shape). */
stax_status_t stax_shape_pool(stax_shape_infer_t* ic) {
  bool is_max = ic->node->op == STAX_OP_MaxPool;
  stax_dtype_mask_t allowed = STAX_DTYPES_FLOAT;
  if (is_max) allowed |= STAX_DTYPE_BIT(STAX_DTYPE_INT8) | STAX_DTYPE_BIT(STAX_DTYPE_UINT8);
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(read_spatial_input(
      ic, allowed, is_max ? "a floating-point type, int8 or uint8" : "a floating-point type", &x));
  int32_t spatial = x.rank - 2;
  if (!stax_node_attr_find(ic->node, "kernel_shape")) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'kernel_shape' is required");
  }
  int64_t kernel[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(read_int_list(ic, "kernel_shape", spatial, 1, 1, kernel, NULL));
  bool flag = false;
  if (is_max) {
    STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "storage_order", false, &flag));
  } else {
    STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "count_include_pad", false, &flag));
  }
  window_t window;
  STAX_RETURN_IF_ERROR(read_window(ic, spatial, true, &window));
  const stax_dim_t* dims[STAX_MAX_RANK];
  dims[0] = x.dims[0];
  dims[1] = x.dims[1];
  for (int32_t i = 0; i < spatial; i++) {
    const stax_dim_t* kernel_dim = stax_dim_const(ic->shape, kernel[i]);
    STAX_RETURN_IF_ERROR(window_output_size(ic, &window, i, &x, kernel_dim, &dims[2 + i]));
  }
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, x.dtype, x.rank, dims));
  if (!is_max) return STAX_OK;
  return stax_shape_set_output(ic, 1, STAX_DTYPE_INT64, x.rank, dims);
}

/* GlobalAveragePool / GlobalMaxPool(X): (N, C, D1..Dn) -> (N, C, 1, ..., 1). */
stax_status_t stax_shape_global_pool(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(read_spatial_input(ic, STAX_DTYPES_FLOAT, "a floating-point type", &x));
  const stax_dim_t* dims[STAX_MAX_RANK];
  const stax_dim_t* one = stax_dim_const(ic->shape, 1);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  dims[0] = x.dims[0];
  dims[1] = x.dims[1];
  for (int32_t axis = 2; axis < x.rank; axis++) dims[axis] = one;
  return stax_shape_set_output(ic, 0, x.dtype, x.rank, dims);
}
