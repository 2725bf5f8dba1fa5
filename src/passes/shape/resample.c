/* Shape functions for ops whose output size comes from a sizes-like input: Expand (broadcast
 * to a shape), Tile (repeats), Pad (pads) and Resize (scales or sizes).
 *
 * When that input is not known at build time but its length is, the affected dims become
 * fresh symbols (see shape_operands.h); Expand keeps an input dim that is a constant other
 * than 1, since broadcasting cannot change it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "passes/shape/shape_operands.h"

/* ---- Expand ------------------------------------------------------------------------------ */

stax_status_t stax_shape_expand(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &data));
  stax_shape_vector_t shape;
  STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 1, "shape", &shape));
  STAX_RETURN_IF_ERROR(stax_shape_require_vector_length(ic, 1, "shape", &shape));
  if (shape.count > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "the shape has %lld entries; at most rank %d is supported",
                            (long long)shape.count, STAX_MAX_RANK);
  }
  int32_t count = (int32_t)shape.count;
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = data.rank > count ? data.rank : count;
  if (!shape.known) {
    for (int32_t k = 0; k < rank; k++) {
      int32_t data_axis = k - (rank - data.rank);
      int64_t value = 0;
      if (data_axis >= 0 && stax_shape_dim_const(ic, data.dims[data_axis], &value) &&
          value != 1) {
        dims[k] = data.dims[data_axis];
      } else {
        STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, k, 0, STAX_DIM_MAX, &dims[k]));
      }
    }
    return stax_infer_set_output(ic, 0, data.dtype, rank, dims);
  }
  for (int32_t k = 0; k < count; k++) {
    int64_t value = 0;
    if (stax_shape_dim_const(ic, shape.entries[k], &value) && value < 0) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "shape entry %d is %lld; sizes must be >= 0", k, (long long)value);
    }
  }
  /* The target shape broadcasts like a second operand (bidirectional, per ONNX Expand). */
  const stax_value_t* shape_value = stax_infer_input(ic, 1);
  stax_shape_operand_t operands[2] = {data, {0}};
  operands[1].name = shape_value->name;
  operands[1].dtype = data.dtype;
  operands[1].rank = count;
  operands[1].dims = shape.entries;
  operands[1].input_index = 1;
  STAX_RETURN_IF_ERROR(stax_shape_broadcast(ic, 2, operands, &rank, dims));
  return stax_infer_set_output(ic, 0, data.dtype, rank, dims);
}

/* ---- Tile -------------------------------------------------------------------------------- */

stax_status_t stax_shape_tile(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &data));
  stax_shape_vector_t repeats;
  STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 1, "repeats", &repeats));
  if (repeats.count >= 0 && repeats.count != data.rank) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "'repeats' has %lld entries but input 0 '%s' has rank %d",
                            (long long)repeats.count, data.name, data.rank);
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < data.rank; k++) {
    if (!repeats.known) {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, k, 0, STAX_DIM_MAX, &dims[k]));
      continue;
    }
    int64_t value = 0;
    if (stax_shape_dim_const(ic, repeats.entries[k], &value) && value < 0) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "repeats[%d] is %lld; it must be >= 0",
                              k, (long long)value);
    }
    dims[k] = stax_dim_mul(ic->shape, data.dims[k], repeats.entries[k]);
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_output(ic, 0, data.dtype, data.rank, dims);
}

/* ---- Pad --------------------------------------------------------------------------------- */

static stax_status_t check_pad_mode(stax_shape_infer_t* ic) {
  const char* mode = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "mode", "constant", &mode));
  static const char* const allowed[] = {"constant", "reflect", "edge", "wrap"};
  for (size_t k = 0; k < sizeof(allowed) / sizeof(allowed[0]); k++) {
    if (strcmp(mode, allowed[k]) == 0) return STAX_OK;
  }
  return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                          "attribute 'mode' must be constant, reflect, edge or wrap, got \"%s\"",
                          mode);
}

stax_status_t stax_shape_pad(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &data));
  STAX_RETURN_IF_ERROR(check_pad_mode(ic));
  stax_shape_operand_t fill;
  bool has_fill = false;
  stax_shape_read_input(ic, 2, &fill, &has_fill);
  if (has_fill) STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &fill, &data));

  /* Padded axes: input 3 (opset 18) or all of them. */
  int32_t axes[STAX_MAX_RANK];
  int32_t axis_count = data.rank;
  bool axes_known = true;
  for (int32_t k = 0; k < data.rank; k++) axes[k] = k;
  if (stax_infer_input(ic, 3)) {
    stax_shape_vector_t axes_vector;
    STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 3, "axes", &axes_vector));
    axes_known = axes_vector.known;
    axis_count = (int32_t)(axes_vector.count > STAX_MAX_RANK ? STAX_MAX_RANK + 1
                                                             : axes_vector.count);
    bool seen[STAX_MAX_RANK] = {false};
    for (int32_t k = 0; axes_known && k < axis_count; k++) {
      int64_t value = 0;
      if (!stax_shape_vector_const(ic, &axes_vector, k, &value)) {
        axes_known = false;
        break;
      }
      char what[32];
      snprintf(what, sizeof(what), "axes[%d]", k);
      STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, value, data.rank, what, &axes[k]));
      if (seen[axes[k]]) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "axes[%d] = %lld repeats axis %d", k,
                                (long long)value, axes[k]);
      }
      seen[axes[k]] = true;
    }
  }
  stax_shape_vector_t pads;
  STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 1, "pads", &pads));
  if (axes_known && pads.count >= 0 && pads.count != 2 * (int64_t)axis_count) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "'pads' has %lld entries; %d padded axes need %d",
                            (long long)pads.count, axis_count, 2 * axis_count);
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < data.rank; k++) dims[k] = data.dims[k];
  if (!axes_known) {
    /* Any axis may be padded. */
    for (int32_t k = 0; k < data.rank; k++) {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, k, 0, STAX_DIM_MAX, &dims[k]));
    }
    return stax_infer_set_output(ic, 0, data.dtype, data.rank, dims);
  }
  for (int32_t k = 0; k < axis_count; k++) {
    int32_t axis = axes[k];
    if (!pads.known) {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, axis, 0, STAX_DIM_MAX, &dims[axis]));
      continue;
    }
    /* Negative pads crop; the result must stay >= 0. */
    dims[axis] = stax_dim_add(ic->shape, data.dims[axis],
                              stax_dim_add(ic->shape, pads.entries[k],
                                           pads.entries[k + axis_count]));
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
    int64_t value = 0;
    if (stax_shape_dim_const(ic, dims[axis], &value) && value < 0) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "pads make input 0 '%s' dim %d negative (%lld)", data.name, axis,
                              (long long)value);
    }
  }
  return stax_infer_set_output(ic, 0, data.dtype, data.rank, dims);
}

/* ---- Resize ------------------------------------------------------------------------------ */

/* floor(d * scale) as a dim. Exact for constant d; for symbolic d when scale is p / 2^j
 * (1.5, 0.5, 2, 0.25: what models use, and exactly representable), floor(d * p / 2^j);
 * otherwise a fresh symbol, since float rounding would make any formula a guess. */
static stax_status_t scaled_dim(stax_shape_infer_t* ic, const stax_dim_t* dim, double scale,
                                int32_t axis, const stax_dim_t** out_dim) {
  int64_t value = 0;
  if (stax_shape_dim_const(ic, dim, &value)) {
    double scaled = floor((double)value * scale);
    if (!(scaled < 4.0e18)) {
      return stax_infer_error(ic, STAX_OUT_OF_RANGE, "scale %g makes dim %d too large", scale,
                              axis);
    }
    *out_dim = stax_dim_const(ic->shape, (int64_t)scaled);
    return stax_infer_check_dims(ic);
  }
  for (int64_t denominator = 1; denominator <= 1024; denominator *= 2) {
    double numerator = scale * (double)denominator;
    if (numerator == floor(numerator) && numerator < 1.0e9) {
      const stax_dim_t* scaled = stax_dim_mul_const(ic->shape, dim, (int64_t)numerator);
      *out_dim = stax_dim_floordiv(ic->shape, scaled, stax_dim_const(ic->shape, denominator));
      return stax_infer_check_dims(ic);
    }
  }
  return stax_shape_fresh_dim(ic, 0, axis, 0, STAX_DIM_MAX, out_dim);
}

/* Sizes with keep_aspect_ratio_policy not_larger / not_smaller: one scale for all axes. */
static stax_status_t resize_keep_aspect(stax_shape_infer_t* ic,
                                        const stax_shape_operand_t* data, const int32_t* axes,
                                        int32_t axis_count, const stax_shape_vector_t* sizes,
                                        bool not_larger, const stax_dim_t** dims) {
  double scale = not_larger ? INFINITY : 0.0;
  bool known = sizes->known;
  for (int32_t k = 0; known && k < axis_count; k++) {
    int64_t size = 0, dim = 0;
    known = stax_shape_vector_const(ic, sizes, k, &size) &&
            stax_shape_dim_const(ic, data->dims[axes[k]], &dim) && dim > 0;
    if (!known) break;
    double ratio = (double)size / (double)dim;
    scale = not_larger ? fmin(scale, ratio) : fmax(scale, ratio);
  }
  for (int32_t k = 0; k < axis_count; k++) {
    int32_t axis = axes[k];
    if (!known) {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, axis, 0, STAX_DIM_MAX, &dims[axis]));
      continue;
    }
    int64_t dim = 0;
    (void)stax_shape_dim_const(ic, data->dims[axis], &dim);
    dims[axis] = stax_dim_const(ic->shape, (int64_t)floor(scale * (double)dim + 0.5));
  }
  return stax_infer_check_dims(ic);
}

static stax_status_t resize_from_sizes(stax_shape_infer_t* ic, const stax_shape_operand_t* data,
                                       int32_t sizes_index, const int32_t* axes,
                                       int32_t axis_count, const stax_dim_t** dims) {
  stax_shape_vector_t sizes;
  STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, sizes_index, "sizes", &sizes));
  if (sizes.count >= 0 && sizes.count != axis_count) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "'sizes' has %lld entries but %d axes are resized",
                            (long long)sizes.count, axis_count);
  }
  for (int32_t k = 0; sizes.known && k < axis_count; k++) {
    int64_t size = 0;
    if (stax_shape_vector_const(ic, &sizes, k, &size) && size < 0) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "sizes[%d] is %lld; it must be >= 0",
                              k, (long long)size);
    }
  }
  const char* policy = NULL;
  STAX_RETURN_IF_ERROR(
      stax_node_attr_string(ic->node, "keep_aspect_ratio_policy", "stretch", &policy));
  if (strcmp(policy, "not_larger") == 0 || strcmp(policy, "not_smaller") == 0) {
    return resize_keep_aspect(ic, data, axes, axis_count, &sizes,
                              strcmp(policy, "not_larger") == 0, dims);
  }
  if (strcmp(policy, "stretch") != 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'keep_aspect_ratio_policy' must be stretch, not_larger "
                            "or not_smaller, got \"%s\"",
                            policy);
  }
  for (int32_t k = 0; k < axis_count; k++) {
    if (sizes.known) {
      dims[axes[k]] = sizes.entries[k];
    } else {
      STAX_RETURN_IF_ERROR(
          stax_shape_fresh_dim(ic, 0, axes[k], 0, STAX_DIM_MAX, &dims[axes[k]]));
    }
  }
  return STAX_OK;
}

static stax_status_t resize_from_scales(stax_shape_infer_t* ic,
                                        const stax_shape_operand_t* data, int32_t scales_index,
                                        const int32_t* axes, int32_t axis_count,
                                        const stax_dim_t** dims) {
  stax_shape_operand_t scales;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, scales_index, &scales));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &scales, STAX_DTYPES_FLOAT,
                                                "a floating-point type"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &scales, 1, 1));
  int64_t length = 0;
  if (stax_shape_dim_const(ic, scales.dims[0], &length) && length != axis_count) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "'scales' has %lld entries but %d axes are resized",
                            (long long)length, axis_count);
  }
  double values[STAX_MAX_RANK];
  int32_t count = 0;
  bool known = false;
  STAX_RETURN_IF_ERROR(stax_shape_read_const_doubles(ic, scales_index, "scales", STAX_MAX_RANK,
                                                     values, &count, &known));
  for (int32_t k = 0; k < axis_count; k++) {
    int32_t axis = axes[k];
    if (!known) {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, axis, 0, STAX_DIM_MAX, &dims[axis]));
      continue;
    }
    if (!(values[k] > 0) || isinf(values[k])) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "scales[%d] is %g; it must be > 0", k,
                              values[k]);
    }
    STAX_RETURN_IF_ERROR(scaled_dim(ic, data->dims[axis], values[k], axis, &dims[axis]));
  }
  return STAX_OK;
}

/* An optional input that is present and not the empty placeholder tensor exporters write. */
static bool resize_input_given(stax_shape_infer_t* ic, int32_t i) {
  const stax_value_t* value = stax_infer_input(ic, i);
  if (!value) return false;
  int64_t length = 0;
  return !(value->rank == 1 && stax_shape_dim_const(ic, value->dims[0], &length) && length == 0);
}

stax_status_t stax_shape_resize(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &data, 1, STAX_MAX_RANK));
  /* Opset 10 has (X, scales); opset 11+ has (X, roi, scales, sizes). */
  int32_t scales_index = ic->node->input_count == 2 ? 1 : 2;
  int32_t sizes_index = 3;
  bool has_scales = resize_input_given(ic, scales_index);
  bool has_sizes = ic->node->input_count > 3 && resize_input_given(ic, sizes_index);
  if (has_scales && has_sizes) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "takes scales or sizes, not both");
  }
  if (!has_scales && !has_sizes) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "needs scales (input %d) or sizes (input 3)", scales_index);
  }
  int32_t axes[STAX_MAX_RANK];
  int32_t axis_count = data.rank;
  for (int32_t k = 0; k < data.rank; k++) axes[k] = k;
  int32_t attr_count = -1;
  const int64_t* attr_axes = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(ic->node, "axes", &attr_count, &attr_axes));
  if (attr_count >= 0) {
    if (attr_count > data.rank) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "attribute 'axes' has %d entries for input 0 of rank %d",
                              attr_count, data.rank);
    }
    bool seen[STAX_MAX_RANK] = {false};
    for (int32_t k = 0; k < attr_count; k++) {
      char what[32];
      snprintf(what, sizeof(what), "axes[%d]", k);
      STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, attr_axes[k], data.rank, what, &axes[k]));
      if (seen[axes[k]]) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "axes[%d] = %lld repeats axis %d", k,
                                (long long)attr_axes[k], axes[k]);
      }
      seen[axes[k]] = true;
    }
    axis_count = attr_count;
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < data.rank; k++) dims[k] = data.dims[k];
  if (has_sizes) {
    STAX_RETURN_IF_ERROR(resize_from_sizes(ic, &data, sizes_index, axes, axis_count, dims));
  } else {
    STAX_RETURN_IF_ERROR(resize_from_scales(ic, &data, scales_index, axes, axis_count, dims));
  }
  return stax_infer_set_output(ic, 0, data.dtype, data.rank, dims);
}
