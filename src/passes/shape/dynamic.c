/* Shape functions for ops whose output size depends on input *values*: NonZero, Compress,
 * Unique and TopK (with a k only known at run time).
 *
 * The data-dependent dim is a fresh symbol whose range is what the op can produce (NonZero of
 * [d0..dn]: [0, d0*...*dn]; Unique: [0, N]; Compress: [0, min(dim, condition length)];
 * TopK: [0, dim]). When the deciding input is a constant, the exact count is used instead. */
#include "passes/shape/shape_operands.h"

/* ---- NonZero ----------------------------------------------------------------------------- */

stax_status_t stax_shape_nonzero(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  const stax_value_t* value = stax_infer_input(ic, 0);
  /* A scalar behaves as a 1-element vector (numpy's nonzero on 0-d input). */
  int32_t index_rows = data.rank > 0 ? data.rank : 1;
  const stax_dim_t* dims[2] = {stax_dim_const(ic->shape, index_rows), NULL};
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  if (value->constant) {
    int64_t count = 0;
    STAX_RETURN_IF_ERROR(stax_shape_count_nonzero(
        ic, value->constant, stax_tensor_element_count(value->constant), &count));
    dims[1] = stax_dim_const(ic->shape, count);
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  } else {
    const stax_dim_t* elements = stax_shape_product(ic, data.rank, data.dims);
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
    STAX_RETURN_IF_ERROR(
        stax_shape_fresh_dim(ic, 0, 1, 0, stax_shape_dim_upper(ic, elements), &dims[1]));
  }
  return stax_infer_set_output(ic, 0, STAX_DTYPE_INT64, 2, dims);
}

/* ---- Compress ---------------------------------------------------------------------------- */

stax_status_t stax_shape_compress(stax_shape_infer_t* ic) {
  stax_shape_operand_t data, condition;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &condition));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &condition, STAX_DTYPES_BOOL, "bool"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &condition, 1, 1));
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 1;
  int32_t axis = 0;
  const stax_dim_t* selected = NULL; /* the dim the condition selects along */
  if (stax_node_attr_find(ic->node, "axis")) {
    int64_t axis_attr = 0;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_attr));
    STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_attr, data.rank, "axis", &axis));
    rank = data.rank;
    for (int32_t k = 0; k < rank; k++) dims[k] = data.dims[k];
    selected = data.dims[axis];
  } else {
    /* Without an axis the input is flattened first. */
    selected = stax_shape_product(ic, data.rank, data.dims);
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  }
  /* Elements past the shorter of the two are not selected. */
  int64_t upper = stax_shape_dim_upper(ic, selected);
  int64_t condition_upper = stax_shape_dim_upper(ic, condition.dims[0]);
  if (condition_upper < upper) upper = condition_upper;
  const stax_value_t* condition_value = stax_infer_input(ic, 1);
  int64_t selected_low = 0, selected_high = 0, condition_length = 0;
  stax_dim_bounds(ic->shape, selected, &selected_low, &selected_high);
  if (condition_value->constant &&
      stax_shape_dim_const(ic, condition.dims[0], &condition_length) &&
      (selected_low >= condition_length || selected_low == selected_high)) {
    /* The number of selected elements is fixed: count the true entries that apply. */
    int64_t limit = condition_length < selected_low ? condition_length : selected_low;
    int64_t count = 0;
    STAX_RETURN_IF_ERROR(stax_shape_count_nonzero(ic, condition_value->constant, limit, &count));
    dims[axis] = stax_dim_const(ic->shape, count);
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  } else {
    STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, axis, 0, upper, &dims[axis]));
  }
  return stax_infer_set_output(ic, 0, data.dtype, rank, dims);
}

/* ---- TopK -------------------------------------------------------------------------------- */

stax_status_t stax_shape_topk(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &data, 1, STAX_MAX_RANK));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &data, STAX_DTYPES_NUMERIC, "a number"));
  int64_t axis_attr = -1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", -1, &axis_attr));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_attr, data.rank, "axis", &axis));
  stax_shape_vector_t k_vector;
  STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 1, "k", &k_vector));
  if (k_vector.count >= 0 && k_vector.count != 1) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 1 (k) must hold exactly one element, got %lld",
                            (long long)k_vector.count);
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < data.rank; k++) dims[k] = data.dims[k];
  int64_t k_value = 0, dim_value = 0;
  if (!k_vector.known) {
    STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, axis, 0,
                                              stax_shape_dim_upper(ic, data.dims[axis]),
                                              &dims[axis]));
  } else if (stax_shape_vector_const(ic, &k_vector, 0, &k_value)) {
    if (k_value < 0) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "k is %lld; it must be >= 0",
                              (long long)k_value);
    }
    if (stax_shape_dim_const(ic, data.dims[axis], &dim_value) && k_value > dim_value) {
      return stax_infer_error(ic, STAX_OUT_OF_RANGE,
                              "k = %lld exceeds input 0 '%s' dim %d of size %lld",
                              (long long)k_value, data.name, axis, (long long)dim_value);
    }
    dims[axis] = k_vector.entries[0];
  } else {
    dims[axis] = k_vector.entries[0]; /* a symbolic k, e.g. min(S, 10) from shape arithmetic */
  }
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, data.dtype, data.rank, dims));
  return stax_infer_set_output(ic, 1, STAX_DTYPE_INT64, data.rank, dims);
}

/* ---- Unique ------------------------------------------------------------------------------ */

stax_status_t stax_shape_unique(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &data));
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 1;
  int32_t axis = 0;
  const stax_dim_t* total = NULL; /* the number of slices Unique compares */
  if (stax_node_attr_find(ic->node, "axis")) {
    int64_t axis_attr = 0;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_attr));
    STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_attr, data.rank, "axis", &axis));
    rank = data.rank;
    for (int32_t k = 0; k < rank; k++) dims[k] = data.dims[k];
    total = data.dims[axis];
  } else {
    total = stax_shape_product(ic, data.rank, data.dims);
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  }
  int64_t low = 0, high = 0;
  stax_dim_bounds(ic->shape, total, &low, &high);
  /* A non-empty input has at least one unique element. */
  const stax_dim_t* unique_count = NULL;
  STAX_RETURN_IF_ERROR(
      stax_shape_fresh_dim(ic, 0, axis, low >= 1 ? 1 : 0, high, &unique_count));
  dims[axis] = unique_count;
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, data.dtype, rank, dims));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 1, STAX_DTYPE_INT64, 1, &unique_count));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 2, STAX_DTYPE_INT64, 1, &total));
  return stax_shape_set_output(ic, 3, STAX_DTYPE_INT64, 1, &unique_count);
}
