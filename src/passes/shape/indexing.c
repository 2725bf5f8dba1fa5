/* Shape functions for ops indexed by another tensor: Gather, GatherElements, GatherND,
 * ScatterElements/ScatterND and OneHot. Gather also propagates symbolic contents, so
 * Gather(Shape(x), 0) is x's dim 0 itself. */
#include <string.h>

#include "passes/shape/shape_operands.h"

/* ---- Gather ------------------------------------------------------------------------------ */

/* Contents of Gather over a known integer vector with known constant indices. Constant
 * indices out of range are errors even when the contents are unknown but the dim is not. */
static stax_status_t gather_content(stax_shape_infer_t* ic, const stax_shape_operand_t* data,
                                    int32_t axis, const stax_shape_operand_t* indices) {
  const stax_value_t* index_value = stax_infer_input(ic, 1);
  const stax_dim_t* index_dims[STAX_SHAPE_CONTENT_MAX];
  int32_t index_count = 0;
  if (!stax_shape_value_content(ic, index_value, STAX_SHAPE_CONTENT_MAX, index_dims,
                                &index_count)) {
    return stax_infer_check_dims(ic);
  }
  int64_t dim_value = -1;
  bool dim_known = stax_shape_dim_const(ic, data->dims[axis], &dim_value);
  int64_t index_values[STAX_SHAPE_CONTENT_MAX];
  for (int32_t k = 0; k < index_count; k++) {
    if (!stax_shape_dim_const(ic, index_dims[k], &index_values[k])) return STAX_OK;
    if (dim_known && (index_values[k] < -dim_value || index_values[k] >= dim_value)) {
      return stax_infer_error(ic, STAX_OUT_OF_RANGE,
                              "index %lld (input 1 '%s' element %d) is out of range for input 0 "
                              "'%s' dim %d of size %lld",
                              (long long)index_values[k], indices->name, k, data->name, axis,
                              (long long)dim_value);
    }
  }
  const stax_value_t* data_value = stax_infer_input(ic, 0);
  const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
  int32_t count = 0;
  if (data->rank != 1 || !stax_dtype_is_integer(data->dtype) ||
      !stax_shape_value_content(ic, data_value, STAX_SHAPE_CONTENT_MAX, content, &count)) {
    return stax_infer_check_dims(ic);
  }
  const stax_dim_t* result[STAX_SHAPE_CONTENT_MAX];
  for (int32_t k = 0; k < index_count; k++) {
    int64_t index = index_values[k] < 0 ? index_values[k] + count : index_values[k];
    if (index < 0 || index >= count) return STAX_OK; /* caught above when the dim is known */
    result[k] = content[index];
  }
  return stax_infer_set_content(ic, 0, index_count, result);
}

stax_status_t stax_shape_gather(stax_shape_infer_t* ic) {
  stax_shape_operand_t data, indices;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &indices));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &data, 1, STAX_MAX_RANK));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &indices, STAX_DTYPES_INDEX,
                                                "int32 or int64"));
  int64_t axis_attr = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_attr));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_attr, data.rank, "axis", &axis));
  int32_t rank = data.rank - 1 + indices.rank;
  if (rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "the output has rank %d; at most %d is supported", rank,
                            STAX_MAX_RANK);
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t next = 0;
  for (int32_t k = 0; k < axis; k++) dims[next++] = data.dims[k];
  for (int32_t k = 0; k < indices.rank; k++) dims[next++] = indices.dims[k];
  for (int32_t k = axis + 1; k < data.rank; k++) dims[next++] = data.dims[k];
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, data.dtype, rank, dims));
  return gather_content(ic, &data, axis, &indices);
}

/* ---- GatherElements ---------------------------------------------------------------------- */

stax_status_t stax_shape_gather_elements(stax_shape_infer_t* ic) {
  stax_shape_operand_t data, indices;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &indices));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &data, 1, STAX_MAX_RANK));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &indices, STAX_DTYPES_INDEX,
                                                "int32 or int64"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &indices, data.rank, data.rank));
  int64_t axis_attr = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_attr));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_attr, data.rank, "axis", &axis));
  /* The output takes the indices' shape; ONNX lets it be smaller than data on every axis. */
  return stax_infer_set_output(ic, 0, data.dtype, indices.rank, indices.dims);
}

/* ---- GatherND ---------------------------------------------------------------------------- */

/* The static length of the index tuples (indices' last dim), which decides the output rank. */
static stax_status_t index_tuple_length(stax_shape_infer_t* ic,
                                        const stax_shape_operand_t* indices,
                                        int64_t* out_length) {
  char dim_text[96];
  const stax_dim_t* last = indices->dims[indices->rank - 1];
  if (!stax_shape_dim_const(ic, last, out_length)) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "input %d '%s' dim %d is %s; it must be static because it decides "
                            "the output rank",
                            indices->input_index, indices->name, indices->rank - 1,
                            stax_shape_dim_text(ic, last, dim_text, sizeof(dim_text)));
  }
  return STAX_OK;
}

stax_status_t stax_shape_gather_nd(stax_shape_infer_t* ic) {
  stax_shape_operand_t data, indices;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &indices));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &data, 1, STAX_MAX_RANK));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &indices, 1, STAX_MAX_RANK));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &indices, STAX_DTYPE_BIT(STAX_DTYPE_INT64),
                                                "int64"));
  int64_t batch_dims = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "batch_dims", 0, &batch_dims));
  int32_t smaller_rank = data.rank < indices.rank ? data.rank : indices.rank;
  if (batch_dims < 0 || batch_dims >= smaller_rank) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'batch_dims' is %lld; it must be in [0, %d) for inputs "
                            "of rank %d and %d",
                            (long long)batch_dims, smaller_rank, data.rank, indices.rank);
  }
  int64_t tuple = 0;
  STAX_RETURN_IF_ERROR(index_tuple_length(ic, &indices, &tuple));
  if (tuple < 1 || tuple > data.rank - batch_dims) {
    return stax_infer_error(ic, STAX_OUT_OF_RANGE,
                            "input 1 '%s' indexes %lld dims of input 0 '%s', but only 1 to %lld "
                            "remain after %lld batch dims",
                            indices.name, (long long)tuple, data.name,
                            (long long)(data.rank - batch_dims), (long long)batch_dims);
  }
  for (int32_t k = 0; k < batch_dims; k++) {
    STAX_RETURN_IF_ERROR(stax_shape_match_dim(ic, &indices, k, data.dims[k], 0, k));
  }
  const stax_dim_t* dims[2 * STAX_MAX_RANK];
  int32_t rank = 0;
  for (int32_t k = 0; k < indices.rank - 1; k++) dims[rank++] = indices.dims[k];
  for (int32_t k = (int32_t)(batch_dims + tuple); k < data.rank; k++) dims[rank++] = data.dims[k];
  if (rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "the output has rank %d; at most %d is supported", rank,
                            STAX_MAX_RANK);
  }
  return stax_infer_set_output(ic, 0, data.dtype, rank, dims);
}

/* ---- ScatterElements / ScatterND --------------------------------------------------------- */

static stax_status_t check_reduction(stax_shape_infer_t* ic) {
  const char* reduction = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "reduction", "none", &reduction));
  static const char* const allowed[] = {"none", "add", "mul", "max", "min"};
  for (size_t k = 0; k < sizeof(allowed) / sizeof(allowed[0]); k++) {
    if (strcmp(reduction, allowed[k]) == 0) return STAX_OK;
  }
  return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                          "attribute 'reduction' must be none, add, mul, max or min, got \"%s\"",
                          reduction);
}

static stax_status_t scatter_elements_check(stax_shape_infer_t* ic,
                                            const stax_shape_operand_t* data,
                                            const stax_shape_operand_t* indices,
                                            const stax_shape_operand_t* updates) {
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, indices, data->rank, data->rank));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, updates, data->rank, data->rank));
  int64_t axis_attr = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_attr));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_attr, data->rank, "axis", &axis));
  for (int32_t k = 0; k < data->rank; k++) {
    STAX_RETURN_IF_ERROR(stax_shape_match_dim(ic, updates, k, indices->dims[k], 1, k));
  }
  return STAX_OK;
}

static stax_status_t scatter_nd_check(stax_shape_infer_t* ic, const stax_shape_operand_t* data,
                                      const stax_shape_operand_t* indices,
                                      const stax_shape_operand_t* updates) {
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, indices, 1, STAX_MAX_RANK));
  int64_t tuple = 0;
  STAX_RETURN_IF_ERROR(index_tuple_length(ic, indices, &tuple));
  if (tuple < 1 || tuple > data->rank) {
    return stax_infer_error(ic, STAX_OUT_OF_RANGE,
                            "input 1 '%s' indexes %lld dims of input 0 '%s', which has rank %d",
                            indices->name, (long long)tuple, data->name, data->rank);
  }
  int32_t expected_rank = indices->rank - 1 + data->rank - (int32_t)tuple;
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, updates, expected_rank, expected_rank));
  for (int32_t k = 0; k < indices->rank - 1; k++) {
    STAX_RETURN_IF_ERROR(stax_shape_match_dim(ic, updates, k, indices->dims[k], 1, k));
  }
  for (int32_t k = (int32_t)tuple; k < data->rank; k++) {
    STAX_RETURN_IF_ERROR(stax_shape_match_dim(ic, updates, indices->rank - 1 + k - (int32_t)tuple,
                                              data->dims[k], 0, k));
  }
  return STAX_OK;
}

stax_status_t stax_shape_scatter(stax_shape_infer_t* ic) {
  stax_shape_operand_t data, indices, updates;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &indices));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 2, &updates));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &data, 1, STAX_MAX_RANK));
  STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &updates, &data));
  STAX_RETURN_IF_ERROR(check_reduction(ic));
  if (ic->node->op == STAX_OP_ScatterND) {
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &indices,
                                                  STAX_DTYPE_BIT(STAX_DTYPE_INT64), "int64"));
    STAX_RETURN_IF_ERROR(scatter_nd_check(ic, &data, &indices, &updates));
  } else {
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &indices, STAX_DTYPES_INDEX,
                                                  "int32 or int64"));
    STAX_RETURN_IF_ERROR(scatter_elements_check(ic, &data, &indices, &updates));
  }
  return stax_infer_set_output(ic, 0, data.dtype, data.rank, data.dims);
}

/* ---- OneHot ------------------------------------------------------------------------------ */

/* The depth as a dim: constant (any numeric type, truncated as ONNX casts it to int64),
 * symbolic contents, or a fresh symbol when only known at run time. */
static stax_status_t one_hot_depth(stax_shape_infer_t* ic, int32_t axis,
                                   const stax_dim_t** out_depth) {
  *out_depth = NULL;
  stax_shape_operand_t depth;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &depth));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &depth, STAX_DTYPES_NUMERIC, "a number"));
  STAX_RETURN_IF_ERROR(stax_shape_require_scalar(ic, &depth, "depth"));
  const stax_value_t* value = stax_infer_input(ic, 1);
  int64_t depth_value = 0;
  bool known = false;
  if (stax_dtype_is_integer(depth.dtype)) {
    stax_shape_vector_t vector;
    STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 1, "depth", &vector));
    if (vector.known && vector.count == 1) {
      if (!stax_shape_vector_const(ic, &vector, 0, &depth_value)) {
        *out_depth = vector.entries[0];
        return STAX_OK;
      }
      known = true;
    }
  } else if (value->constant) {
    double number = 0;
    int32_t count = 0;
    STAX_RETURN_IF_ERROR(stax_shape_read_const_doubles(ic, 1, "depth", 1, &number, &count,
                                                       &known));
    if (!(number > -9.0e18 && number < 9.0e18)) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "depth %g is not a usable size",
                              number);
    }
    depth_value = (int64_t)number;
  }
  if (!known) return stax_shape_fresh_dim(ic, 0, axis, 0, STAX_DIM_MAX, out_depth);
  if (depth_value < 1) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "depth is %lld; it must be >= 1",
                            (long long)depth_value);
  }
  *out_depth = stax_dim_const(ic->shape, depth_value);
  return stax_infer_check_dims(ic);
}

stax_status_t stax_shape_one_hot(stax_shape_infer_t* ic) {
  stax_shape_operand_t indices, values;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &indices));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 2, &values));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &indices, STAX_DTYPES_NUMERIC, "a number"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &values, 1, 1));
  int64_t value_count = 0;
  if (stax_shape_dim_const(ic, values.dims[0], &value_count) && value_count != 2) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 2 '%s' (values) must hold 2 elements [off, on], got %lld",
                            values.name, (long long)value_count);
  }
  int32_t rank = indices.rank + 1;
  if (rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "the output has rank %d; at most %d is supported", rank,
                            STAX_MAX_RANK);
  }
  int64_t axis_attr = -1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", -1, &axis_attr));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_attr, rank, "axis", &axis));
  const stax_dim_t* depth = NULL;
  STAX_RETURN_IF_ERROR(one_hot_depth(ic, axis, &depth));
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0, next = 0; k < rank; k++) dims[k] = k == axis ? depth : indices.dims[next++];
  return stax_infer_set_output(ic, 0, values.dtype, rank, dims);
}
