/* Shape functions for QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear: the output
 * has x's shape; its dtype is the quantized type (QuantizeLinear: the zero point's dtype, else
 * attribute output_dtype, else uint8) or the float type (DequantizeLinear: output_dtype, else
 * the scale's dtype).
 *
 * The scale's shape says the granularity (src/kernels/quantize.c has the rules): one element
 * (per tensor), 1-D with x.dims[axis] entries (per axis), or x's rank with ceil(D / block_size)
 * entries along the axis (blocked). Dims that are constants here are checked here, naming
 * the node, the inputs and the dims; symbolic ones are left to the kernel, which checks them
 * at run time: scales are nearly always constants, and unifying a symbolic scale length with
 * x's dim would be wrong when it turns out to be a per-tensor [1]. */
#include "passes/shape/shape_util.h"

#define QUANT_TARGETS                                                                    \
  (STAX_DTYPE_BIT(STAX_DTYPE_INT8) | STAX_DTYPE_BIT(STAX_DTYPE_UINT8) |                  \
   STAX_DTYPE_BIT(STAX_DTYPE_INT16) | STAX_DTYPE_BIT(STAX_DTYPE_UINT16))
#define QUANT_TARGETS_TEXT "int8, uint8, int16 or uint16"

/* An ONNX type code attribute as a dtype (INVALID when absent or 0). Codes stax has no dtype
 * for (float8, int4, ...) are UNIMPLEMENTED. */
static stax_status_t dtype_attr(const stax_shape_infer_t* ic, const char* name,
                                stax_dtype_t* out) {
  int64_t code = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_onnx_dtype(ic->node, name, &code, out));
  if (code != 0 && *out == STAX_DTYPE_INVALID) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "attribute '%s' = %lld (ONNX type code) is not supported: stax has "
                            "no such dtype (float8, int4 and other narrow types are not "
                            "supported)",
                            name, (long long)code);
  }
  return STAX_OK;
}

static bool known(const stax_shape_infer_t* ic, const stax_dim_t* dim, int64_t* out) {
  return stax_shape_dim_const(ic, dim, out);
}

/* True when every dim is the constant 1 (rank 0 included). */
static bool single_element(const stax_shape_infer_t* ic, const stax_shape_operand_t* operand) {
  for (int32_t d = 0; d < operand->rank; d++) {
    int64_t value = 0;
    if (!known(ic, operand->dims[d], &value) || value != 1) return false;
  }
  return true;
}

/* Scale (input 1) and zero point (input 2, optional) against x (input 0). */
static stax_status_t check_params(stax_shape_infer_t* ic, const stax_shape_operand_t* x,
                                  stax_shape_operand_t* scale, bool* has_zero,
                                  stax_shape_operand_t* zero) {
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, scale));
  if (scale->dtype == STAX_DTYPE_INT32) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "input 1 '%s' is an int32 scale, which stax does not support (it "
                            "takes float scales)",
                            scale->name);
  }
  STAX_RETURN_IF_ERROR(
      stax_shape_require_dtype(ic, scale, STAX_DTYPES_FLOAT, "a floating-point type"));
  stax_shape_read_input(ic, 2, zero, has_zero);
  int64_t block = 0, axis = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "block_size", 0, &block));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 1, &axis));
  if (block < 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'block_size' = %lld must be positive (or 0: no blocks)",
                            (long long)block);
  }
  /* One element each is per tensor whatever the ranks (quantizers write a [1] scale with a
   * scalar zero point). */
  if (*has_zero && !(single_element(ic, scale) && single_element(ic, zero))) {
    if (zero->rank != scale->rank) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "input 2 '%s' has rank %d but input 1 '%s' has rank %d; the zero "
                              "point must have the scale's shape",
                              zero->name, zero->rank, scale->name, scale->rank);
    }
    for (int32_t d = 0; d < scale->rank; d++) {
      int64_t zd = 0, sd = 0;
      if (known(ic, zero->dims[d], &zd) && known(ic, scale->dims[d], &sd) && zd != sd) {
        return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                                "input 2 '%s' dim %d is %lld but input 1 '%s' dim %d is %lld; "
                                "the zero point must have the scale's shape",
                                zero->name, d, (long long)zd, scale->name, d, (long long)sd);
      }
    }
  }
  /* Per tensor: one element, whatever the rank. */
  int64_t length = 0;
  if (single_element(ic, scale)) return STAX_OK;
  int32_t a = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis, x->rank, "axis", &a));
  int64_t x_dim = 0;
  bool x_known = known(ic, x->dims[a], &x_dim);
  if (block == 0) {
    if (scale->rank != 1) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "input 1 '%s' has rank %d: a per-axis scale is 1-D (a blocked one "
                              "needs attribute 'block_size')",
                              scale->name, scale->rank);
    }
    if (x_known && known(ic, scale->dims[0], &length) && length != x_dim) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "input 1 '%s' dim 0 is %lld but input 0 '%s' dim %d (axis %lld) is "
                              "%lld",
                              scale->name, (long long)length, x->name, a, (long long)axis,
                              (long long)x_dim);
    }
    return STAX_OK;
  }
  if (scale->rank != x->rank) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 1 '%s' has rank %d but input 0 '%s' has rank %d; blocked "
                            "quantization (block_size %lld) needs equal ranks",
                            scale->name, scale->rank, x->name, x->rank, (long long)block);
  }
  for (int32_t d = 0; d < x->rank; d++) {
    int64_t sd = 0, xd = 0;
    if (!known(ic, scale->dims[d], &sd) || !known(ic, x->dims[d], &xd)) continue;
    int64_t want = d == a ? (xd + block - 1) / block : xd;
    if (sd == want) continue;
    if (d == a) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "input 1 '%s' dim %d is %lld but input 0 '%s' dim %d (axis) is "
                              "%lld, which in blocks of %lld needs %lld",
                              scale->name, d, (long long)sd, x->name, d, (long long)xd,
                              (long long)block, (long long)want);
    }
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 1 '%s' dim %d is %lld but input 0 '%s' dim %d is %lld; only "
                            "the axis dim %d is blocked",
                            scale->name, d, (long long)sd, x->name, d, (long long)xd, a);
  }
  return STAX_OK;
}

stax_status_t stax_shape_read_quant_param(stax_shape_infer_t* ic, int32_t index, bool required,
                                          const stax_shape_operand_t* dtype_like,
                                          stax_shape_operand_t* out_param, bool* out_present) {
  stax_shape_read_input(ic, index, out_param, out_present);
  if (!*out_present) {
    if (!required) return STAX_OK;
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "input %d is required", index);
  }
  if (dtype_like) return stax_shape_require_same_dtype(ic, dtype_like, out_param);
  return stax_shape_require_dtype(ic, out_param, STAX_DTYPES_FLOAT, "a floating-point type");
}

/* QuantizeLinear(x, y_scale, y_zero_point?) -> y. */
stax_status_t stax_shape_quantize(stax_shape_infer_t* ic) {
  stax_shape_operand_t x, scale, zero;
  bool has_zero = false;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(
      ic, &x, STAX_DTYPES_FLOAT | STAX_DTYPE_BIT(STAX_DTYPE_INT32),
      "a floating-point type or int32"));
  STAX_RETURN_IF_ERROR(check_params(ic, &x, &scale, &has_zero, &zero));
  stax_dtype_t out = STAX_DTYPE_INVALID, precision = STAX_DTYPE_INVALID;
  STAX_RETURN_IF_ERROR(dtype_attr(ic, "output_dtype", &out));
  STAX_RETURN_IF_ERROR(dtype_attr(ic, "precision", &precision));
  if (precision != STAX_DTYPE_INVALID && !(STAX_DTYPE_BIT(precision) & STAX_DTYPES_FLOAT)) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "attribute 'precision' %s is not supported: it must be a "
                            "floating-point type",
                            stax_dtype_name(precision));
  }
  if (has_zero) {
    if (!(STAX_DTYPE_BIT(zero.dtype) & QUANT_TARGETS)) {
      return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                              "input 2 '%s' has dtype %s: quantizing to it is not supported "
                              "(stax quantizes to " QUANT_TARGETS_TEXT ")",
                              zero.name, stax_dtype_name(zero.dtype));
    }
    if (out != STAX_DTYPE_INVALID && out != zero.dtype) {
      return stax_infer_error(ic, STAX_DTYPE_MISMATCH,
                              "attribute 'output_dtype' says %s but input 2 '%s' has dtype %s",
                              stax_dtype_name(out), zero.name, stax_dtype_name(zero.dtype));
    }
    out = zero.dtype;
  }
  if (out == STAX_DTYPE_INVALID) out = STAX_DTYPE_UINT8;
  if (!(STAX_DTYPE_BIT(out) & QUANT_TARGETS)) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "attribute 'output_dtype' %s is not supported: stax quantizes to "
                            QUANT_TARGETS_TEXT,
                            stax_dtype_name(out));
  }
  return stax_shape_set_output(ic, 0, out, x.rank, x.dims);
}

/* DequantizeLinear(x, x_scale, x_zero_point?) -> y. */
stax_status_t stax_shape_dequantize(stax_shape_infer_t* ic) {
  stax_shape_operand_t x, scale, zero;
  bool has_zero = false;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(
      ic, &x, QUANT_TARGETS | STAX_DTYPE_BIT(STAX_DTYPE_INT32), QUANT_TARGETS_TEXT " or int32"));
  STAX_RETURN_IF_ERROR(check_params(ic, &x, &scale, &has_zero, &zero));
  if (has_zero) STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &x, &zero));
  stax_dtype_t out = STAX_DTYPE_INVALID;
  STAX_RETURN_IF_ERROR(dtype_attr(ic, "output_dtype", &out));
  if (out == STAX_DTYPE_INVALID) out = scale.dtype;
  if (!(STAX_DTYPE_BIT(out) & STAX_DTYPES_FLOAT)) {
    return stax_infer_error(ic, STAX_DTYPE_MISMATCH,
                            "attribute 'output_dtype' %s must be a floating-point type",
                            stax_dtype_name(out));
  }
  return stax_shape_set_output(ic, 0, out, x.rank, x.dims);
}

/* DynamicQuantizeLinear(x float32) -> y (uint8, x's shape), y_scale (float32 scalar),
 * y_zero_point (uint8 scalar). */
stax_status_t stax_shape_dynamic_quantize(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  STAX_RETURN_IF_ERROR(
      stax_shape_require_dtype(ic, &x, STAX_DTYPE_BIT(STAX_DTYPE_FLOAT32), "float32"));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, STAX_DTYPE_UINT8, x.rank, x.dims));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 1, STAX_DTYPE_FLOAT32, 0, NULL));
  return stax_shape_set_output(ic, 2, STAX_DTYPE_UINT8, 0, NULL);
}
