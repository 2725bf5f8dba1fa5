/* Shape functions for ops that produce new tensors from shapes or attributes: Shape, Size,
 * ConstantOfShape, Range, Constant and EyeLike.
 *
 * Shape and Size are where symbolic contents start: Shape(x) records x's dims as its
 * contents, so later Gather/Concat/Reshape see B and S rather than unknown numbers. Range with
 * symbolic limits (Range(0, S, 1), position ids) gets the symbolic length ceil((S - 0) / 1). */
#include <math.h>
#include <string.h>

#include "passes/shape/shape_operands.h"

/* ---- Shape / Size ------------------------------------------------------------------------ */

stax_status_t stax_shape_shape_of(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  int64_t start = 0, end = data.rank;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "start", 0, &start));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "end", data.rank, &end));
  /* Opset 15: negative values count from the back; both are clamped to [0, rank]. */
  if (start < 0) start += data.rank;
  if (end < 0) end += data.rank;
  start = start < 0 ? 0 : (start > data.rank ? data.rank : start);
  end = end < 0 ? 0 : (end > data.rank ? data.rank : end);
  int32_t count = end > start ? (int32_t)(end - start) : 0;
  return stax_shape_set_vector_output(ic, 0, STAX_DTYPE_INT64, false, count,
                                      count > 0 ? data.dims + start : NULL);
}

stax_status_t stax_shape_size_of(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  const stax_dim_t* size = stax_shape_product(ic, data.rank, data.dims);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_shape_set_vector_output(ic, 0, STAX_DTYPE_INT64, true, 1, &size);
}

/* ---- Constant ---------------------------------------------------------------------------- */

/* Output 0 := tensor: its dims, the constant itself, and contents for small integer vectors. */
static stax_status_t set_constant_output(stax_shape_infer_t* ic, stax_tensor_t* tensor) {
  int32_t rank = stax_tensor_rank(tensor);
  const int64_t* tensor_dims = stax_tensor_dims(tensor);
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < rank; k++) dims[k] = stax_dim_const(ic->shape, tensor_dims[k]);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, stax_tensor_dtype(tensor), rank, dims));
  stax_infer_set_constant(ic, 0, tensor);
  /* The output value now holds the constant, so its contents read like an initializer's. */
  const stax_value_t* output = stax_graph_value(ic->graph, ic->node->outputs[0]);
  return stax_shape_forward_content(ic, output, 0, rank);
}

/* A new tensor of `count` elements (rank 0 when scalar) filled from `values` of `dtype`. */
static stax_status_t make_tensor(stax_shape_infer_t* ic, stax_dtype_t dtype, bool scalar,
                                 int64_t count, const void* values, stax_tensor_t** out_tensor) {
  STAX_RETURN_IF_ERROR(stax_tensor_create(ic->graph->allocator, dtype, scalar ? 0 : 1, &count,
                                          out_tensor));
  if (count > 0) {
    memcpy(stax_tensor_data(*out_tensor), values, (size_t)count * stax_dtype_size(dtype));
  }
  return STAX_OK;
}

stax_status_t stax_shape_constant(stax_shape_infer_t* ic) {
  static const char* const value_attrs[] = {"value",       "value_int",    "value_ints",
                                            "value_float", "value_floats", "value_string",
                                            "value_strings"};
  const stax_node_attr_t* attr = NULL;
  for (size_t k = 0; k < sizeof(value_attrs) / sizeof(value_attrs[0]); k++) {
    const stax_node_attr_t* found = stax_node_attr_find(ic->node, value_attrs[k]);
    if (!found) continue;
    if (attr) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "has both '%s' and '%s'; exactly one value attribute is allowed",
                              attr->name, found->name);
    }
    attr = found;
  }
  if (!attr) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "needs one of the attributes value, value_int, value_ints, "
                            "value_float, value_floats");
  }
  stax_tensor_t* tensor = NULL;
  switch (attr->type) {
    case STAX_ATTR_TENSOR:
      if (!attr->value.tensor) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'value' has no tensor");
      }
      tensor = attr->value.tensor;
      stax_tensor_retain(tensor);
      break;
    case STAX_ATTR_INT:
      STAX_RETURN_IF_ERROR(make_tensor(ic, STAX_DTYPE_INT64, true, 1, &attr->value.i, &tensor));
      break;
    case STAX_ATTR_INTS:
      STAX_RETURN_IF_ERROR(make_tensor(ic, STAX_DTYPE_INT64, false, attr->value.ints.count,
                                       attr->value.ints.data, &tensor));
      break;
    case STAX_ATTR_FLOAT:
      STAX_RETURN_IF_ERROR(
          make_tensor(ic, STAX_DTYPE_FLOAT32, true, 1, &attr->value.f, &tensor));
      break;
    case STAX_ATTR_FLOATS:
      STAX_RETURN_IF_ERROR(make_tensor(ic, STAX_DTYPE_FLOAT32, false, attr->value.floats.count,
                                       attr->value.floats.data, &tensor));
      break;
    default:
      return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                              "attribute '%s': string constants are not supported", attr->name);
  }
  stax_status_t status = set_constant_output(ic, tensor);
  stax_tensor_release(tensor);
  return status;
}

/* ---- ConstantOfShape --------------------------------------------------------------------- */

stax_status_t stax_shape_constant_of_shape(stax_shape_infer_t* ic) {
  stax_shape_vector_t shape;
  STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 0, "shape", &shape));
  STAX_RETURN_IF_ERROR(stax_shape_require_vector_length(ic, 0, "shape", &shape));
  if (shape.count > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "the shape has %lld entries; at most rank %d is supported",
                            (long long)shape.count, STAX_MAX_RANK);
  }
  stax_dtype_t dtype = STAX_DTYPE_FLOAT32;
  int64_t fill = 0;
  const stax_node_attr_t* value_attr = stax_node_attr_find(ic->node, "value");
  if (value_attr) {
    stax_tensor_t* value = value_attr->value.tensor;
    if (value_attr->type != STAX_ATTR_TENSOR || !value ||
        stax_tensor_element_count(value) != 1) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "attribute 'value' must be a tensor with one element");
    }
    dtype = stax_tensor_dtype(value);
    stax_convert_elements(dtype, stax_tensor_data(value), STAX_DTYPE_INT64, &fill, 1);
  }
  int32_t rank = (int32_t)shape.count;
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < rank; k++) {
    if (!shape.known) {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, k, 0, STAX_DIM_MAX, &dims[k]));
      continue;
    }
    int64_t size = 0;
    if (stax_shape_dim_const(ic, shape.entries[k], &size) && size < 0) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "shape entry %d is %lld; sizes must be >= 0", k, (long long)size);
    }
    dims[k] = shape.entries[k];
  }
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, dtype, rank, dims));
  /* A filled integer vector (e.g. ones for an Expand shape) has known contents. */
  int64_t count = 1;
  if (!stax_dtype_is_integer(dtype) || rank > 1 ||
      (rank == 1 && !stax_shape_dim_const(ic, dims[0], &count)) ||
      count > STAX_SHAPE_CONTENT_MAX) {
    return STAX_OK;
  }
  const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
  for (int64_t k = 0; k < count; k++) content[k] = stax_dim_const(ic->shape, fill);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_content(ic, 0, (int32_t)count, content);
}

/* ---- Range ------------------------------------------------------------------------------- */

/* ONNX's element count max(ceil((limit - start) / delta), 0) for integers, without overflow. */
static stax_status_t range_count_integer(stax_shape_infer_t* ic, int64_t start, int64_t limit,
                                         int64_t delta, int64_t* out_count) {
  *out_count = 0;
  if (delta > 0 ? limit <= start : limit >= start) return STAX_OK;
  uint64_t span = delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
  uint64_t step = delta > 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
  uint64_t count = span / step + (span % step != 0);
  if (count > (uint64_t)INT64_MAX) {
    return stax_infer_error(ic, STAX_OUT_OF_RANGE, "the range has %llu elements",
                            (unsigned long long)count);
  }
  *out_count = (int64_t)count;
  return STAX_OK;
}

/* Integer Range over dims (constants or symbolic contents) with a constant delta. */
static stax_status_t range_symbolic(stax_shape_infer_t* ic, stax_dtype_t dtype,
                                    const stax_dim_t* start, const stax_dim_t* limit,
                                    int64_t delta) {
  stax_shape_ctx_t* ctx = ic->shape;
  int64_t start_value = 0, limit_value = 0, length_value = 0;
  const stax_dim_t* length = NULL;
  if (stax_shape_dim_const(ic, start, &start_value) &&
      stax_shape_dim_const(ic, limit, &limit_value)) {
    STAX_RETURN_IF_ERROR(
        range_count_integer(ic, start_value, limit_value, delta, &length_value));
    length = stax_dim_const(ctx, length_value);
  } else {
    const stax_dim_t* span =
        delta > 0 ? stax_dim_sub(ctx, limit, start) : stax_dim_sub(ctx, start, limit);
    const stax_dim_t* clamped = stax_shape_max(ic, span, stax_dim_const(ctx, 0));
    int64_t magnitude = delta > 0 ? delta : -delta;
    length = magnitude == 1 ? clamped
                            : stax_dim_ceildiv(ctx, clamped, stax_dim_const(ctx, magnitude));
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, dtype, 1, &length));
  if (!stax_shape_dim_const(ic, length, &length_value) ||
      length_value > STAX_SHAPE_CONTENT_MAX) {
    return STAX_OK;
  }
  const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
  for (int64_t k = 0; k < length_value; k++) {
    content[k] = stax_dim_add_const(ctx, start, k * delta);
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_content(ic, 0, (int32_t)length_value, content);
}

static stax_status_t range_float(stax_shape_infer_t* ic, stax_dtype_t dtype) {
  double values[3];
  bool known = true;
  for (int32_t i = 0; i < 3; i++) {
    int32_t count = 0;
    bool this_known = false;
    STAX_RETURN_IF_ERROR(stax_shape_read_const_doubles(ic, i, "range bound", 1, &values[i],
                                                       &count, &this_known));
    known = known && this_known;
  }
  if (known && values[2] == 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "delta (input 2) is 0");
  }
  const stax_dim_t* length = NULL;
  if (!known) {
    STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, 0, 0, STAX_DIM_MAX, &length));
    return stax_infer_set_output(ic, 0, dtype, 1, &length);
  }
  double count = ceil((values[1] - values[0]) / values[2]);
  if (isnan(count) || count > 4.0e18) {
    return stax_infer_error(ic, STAX_OUT_OF_RANGE,
                            "Range(%g, %g, %g) does not have a usable element count", values[0],
                            values[1], values[2]);
  }
  length = stax_dim_const(ic->shape, count > 0 ? (int64_t)count : 0);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_output(ic, 0, dtype, 1, &length);
}

stax_status_t stax_shape_range(stax_shape_infer_t* ic) {
  static const char* const roles[3] = {"start", "limit", "delta"};
  stax_shape_operand_t operands[3];
  for (int32_t i = 0; i < 3; i++) {
    STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, i, &operands[i]));
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &operands[i], STAX_DTYPES_NUMERIC,
                                                  "a number"));
    STAX_RETURN_IF_ERROR(stax_shape_require_scalar(ic, &operands[i], roles[i]));
    if (i > 0) STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &operands[i], &operands[0]));
  }
  stax_dtype_t dtype = operands[0].dtype;
  /* stash_type (opset 27) names float16/bfloat16's compute type, float32 (1, the default)
   * or float64 (11). The kernel computes every float Range in double: exactly the float64
   * stash, and the float32 one except where float32 itself would round start + i * delta.
   * A stash in the half type itself is refused rather than imitated. */
  int64_t stash_type = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "stash_type", 1, &stash_type));
  bool half = dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16;
  if (half && stash_type != 1 && stash_type != 11) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "attribute 'stash_type' = %lld for %s input 0 '%s' is not supported "
                            "(1, float32, or 11, float64)",
                            (long long)stash_type, stax_dtype_name(dtype), operands[0].name);
  }
  if (!stax_dtype_is_integer(dtype)) return range_float(ic, dtype);
  const stax_dim_t* entries[3];
  bool known = true;
  for (int32_t i = 0; i < 3; i++) {
    stax_shape_vector_t vector;
    STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, i, roles[i], &vector));
    known = known && vector.known && vector.count == 1;
    entries[i] = known ? vector.entries[0] : NULL;
  }
  int64_t delta = 0;
  bool delta_const = entries[2] && stax_shape_dim_const(ic, entries[2], &delta);
  if (delta_const && delta == 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "delta (input 2) is 0");
  }
  if (known && delta_const) return range_symbolic(ic, dtype, entries[0], entries[1], delta);
  const stax_dim_t* length = NULL;
  STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, 0, 0, STAX_DIM_MAX, &length));
  return stax_infer_set_output(ic, 0, dtype, 1, &length);
}

/* ---- EyeLike ----------------------------------------------------------------------------- */

stax_status_t stax_shape_eye_like(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &data, 2, 2));
  stax_dtype_t dtype = data.dtype;
  if (stax_node_attr_find(ic->node, "dtype")) {
    int64_t code = 0;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "dtype", 0, &code));
    dtype = code >= INT32_MIN && code <= INT32_MAX ? stax_dtype_from_onnx((int32_t)code)
                                                   : STAX_DTYPE_INVALID;
    if (dtype == STAX_DTYPE_INVALID) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "attribute 'dtype' is %lld, not a supported ONNX element type",
                              (long long)code);
    }
  }
  return stax_infer_set_output(ic, 0, dtype, 2, data.dims);
}
