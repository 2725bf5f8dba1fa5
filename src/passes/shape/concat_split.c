/* Shape functions for Concat and Split. Both also carry symbolic contents of small integer
 * vectors, so shape pieces glued with Concat (or cut apart with Split) stay symbolic. */
#include <stdio.h>
#include <string.h>

#include "passes/shape/shape_operands.h"

/* ---- Concat ------------------------------------------------------------------------------ */

/* Output contents when every input is a rank-1 integer vector with known contents. */
static stax_status_t concat_content(stax_shape_infer_t* ic, int32_t input_count) {
  const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
  int32_t total = 0;
  for (int32_t i = 0; i < input_count; i++) {
    const stax_value_t* value = stax_infer_input(ic, i);
    const stax_dim_t* piece[STAX_SHAPE_CONTENT_MAX];
    int32_t count = 0;
    if (!value || value->rank != 1 || !stax_dtype_is_integer(value->dtype) ||
        !stax_shape_value_content(ic, value, STAX_SHAPE_CONTENT_MAX, piece, &count) ||
        total + count > STAX_SHAPE_CONTENT_MAX) {
      return stax_infer_check_dims(ic);
    }
    memcpy(content + total, piece, sizeof(piece[0]) * (size_t)count);
    total += count;
  }
  return stax_infer_set_content(ic, 0, total, content);
}

stax_status_t stax_shape_concat(stax_shape_infer_t* ic) {
  if (!stax_node_attr_find(ic->node, "axis")) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'axis' is required");
  }
  int64_t axis_attr = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_attr));
  int32_t input_count = ic->node->input_count;
  stax_shape_operand_t first;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &first));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &first, 1, STAX_MAX_RANK));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_attr, first.rank, "axis", &axis));
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < first.rank; k++) dims[k] = first.dims[k];
  for (int32_t i = 1; i < input_count; i++) {
    stax_shape_operand_t next;
    STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, i, &next));
    STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &next, &first));
    if (next.rank != first.rank) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "input %d '%s' has rank %d but input 0 '%s' has rank %d", i,
                              next.name, next.rank, first.name, first.rank);
    }
    for (int32_t k = 0; k < first.rank; k++) {
      if (k == axis) {
        dims[k] = stax_dim_add(ic->shape, dims[k], next.dims[k]);
        continue;
      }
      int64_t expected = 0, actual = 0;
      if (stax_shape_dim_const(ic, first.dims[k], &expected) &&
          stax_shape_dim_const(ic, next.dims[k], &actual) && expected != actual) {
        return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                                "input %d '%s' dim %d is %lld but input 0 '%s' dim %d is %lld; "
                                "only the concatenation axis %d may differ",
                                i, next.name, k, (long long)actual, first.name, k,
                                (long long)expected, axis);
      }
      STAX_RETURN_IF_ERROR(stax_shape_match_dim(ic, &next, k, first.dims[k], 0, k));
    }
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, first.dtype, first.rank, dims));
  return concat_content(ic, input_count);
}

/* ---- Split ------------------------------------------------------------------------------- */

/* Sizes given explicitly (input 1 or the "split" attribute): one per output, summing to the
 * split dim. */
static stax_status_t split_given_sizes(stax_shape_infer_t* ic, const stax_shape_operand_t* data,
                                       int32_t axis, int32_t output_count,
                                       const stax_dim_t** sizes) {
  stax_shape_vector_t split;
  const stax_dim_t* dim = data->dims[axis];
  if (stax_infer_input(ic, 1)) {
    STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 1, "split", &split));
  } else {
    int32_t count = -1;
    const int64_t* values = NULL;
    STAX_RETURN_IF_ERROR(stax_node_attr_ints(ic->node, "split", &count, &values));
    if (count > STAX_SHAPE_CONTENT_MAX) count = STAX_SHAPE_CONTENT_MAX + 1;
    split.known = count <= STAX_SHAPE_CONTENT_MAX;
    split.count = count;
    for (int32_t k = 0; split.known && k < count; k++) {
      split.entries[k] = stax_dim_const(ic->shape, values[k]);
    }
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  }
  if (split.count >= 0 && split.count != output_count) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "'split' has %lld entries but the node has %d outputs",
                            (long long)split.count, output_count);
  }
  if (!split.known) {
    int64_t upper = stax_shape_dim_upper(ic, dim);
    for (int32_t k = 0; k < output_count; k++) {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, k, axis, 0, upper, &sizes[k]));
    }
    return STAX_OK;
  }
  const stax_dim_t* total = stax_dim_const(ic->shape, 0);
  for (int32_t k = 0; k < output_count; k++) {
    int64_t value = 0;
    if (stax_shape_dim_const(ic, split.entries[k], &value) && value < 0) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "split[%d] is %lld; sizes must be >= 0",
                              k, (long long)value);
    }
    sizes[k] = split.entries[k];
    total = stax_dim_add(ic->shape, total, sizes[k]);
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  int64_t total_value = 0, dim_value = 0;
  if (stax_shape_dim_const(ic, total, &total_value) &&
      stax_shape_dim_const(ic, dim, &dim_value) && total_value != dim_value) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "split sizes sum to %lld but input 0 '%s' dim %d is %lld",
                            (long long)total_value, data->name, axis, (long long)dim_value);
  }
  char origin[256];
  snprintf(origin, sizeof(origin), "Split node '%s' input 0, dim %d", ic->node->name, axis);
  return stax_shape_unify_described(ic, dim, origin, total, "the sum of the split sizes");
}

/* No sizes: equal parts. Opset 18's num_outputs allows a smaller last part
 * (ceil(d/n) each, the rest last); older opsets require d to divide evenly. */
static stax_status_t split_equal_sizes(stax_shape_infer_t* ic, const stax_shape_operand_t* data,
                                       int32_t axis, int32_t output_count,
                                       const stax_dim_t** sizes) {
  const stax_node_attr_t* num_outputs_attr = stax_node_attr_find(ic->node, "num_outputs");
  if (num_outputs_attr) {
    int64_t num_outputs = 0;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "num_outputs", 0, &num_outputs));
    if (num_outputs != output_count) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "attribute 'num_outputs' is %lld but the node has %d outputs",
                              (long long)num_outputs, output_count);
    }
  }
  const stax_dim_t* dim = data->dims[axis];
  const stax_dim_t* parts = stax_dim_const(ic->shape, output_count);
  int64_t value = 0;
  if (stax_shape_dim_const(ic, dim, &value)) {
    int64_t piece = (value + output_count - 1) / output_count;
    int64_t last = value - piece * (output_count - 1);
    if (value % output_count != 0 && (!num_outputs_attr || last < 0)) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "input 0 '%s' dim %d is %lld, which cannot be split into %d "
                              "%sparts",
                              data->name, axis, (long long)value, output_count,
                              num_outputs_attr ? "" : "equal ");
    }
    for (int32_t k = 0; k < output_count; k++) {
      sizes[k] = stax_dim_const(ic->shape, k + 1 < output_count ? piece : last);
    }
    return stax_infer_check_dims(ic);
  }
  if (!num_outputs_attr) {
    /* Divisibility is the model's promise; the kernel checks it at run time. */
    const stax_dim_t* piece = stax_dim_floordiv(ic->shape, dim, parts);
    for (int32_t k = 0; k < output_count; k++) sizes[k] = piece;
    return stax_infer_check_dims(ic);
  }
  const stax_dim_t* piece = stax_dim_ceildiv(ic->shape, dim, parts);
  for (int32_t k = 0; k + 1 < output_count; k++) sizes[k] = piece;
  sizes[output_count - 1] =
      stax_dim_sub(ic->shape, dim, stax_dim_mul_const(ic->shape, piece, output_count - 1));
  return stax_infer_check_dims(ic);
}

/* Each output's contents when a known integer vector is split along axis 0. */
static stax_status_t split_content(stax_shape_infer_t* ic, int32_t output_count,
                                   const stax_dim_t* const* sizes) {
  const stax_value_t* input = stax_infer_input(ic, 0);
  const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
  int32_t count = 0;
  if (input->rank != 1 || !stax_dtype_is_integer(input->dtype) ||
      !stax_shape_value_content(ic, input, STAX_SHAPE_CONTENT_MAX, content, &count)) {
    return stax_infer_check_dims(ic);
  }
  int64_t begin = 0;
  for (int32_t k = 0; k < output_count; k++) {
    int64_t size = 0;
    if (!stax_shape_dim_const(ic, sizes[k], &size) || begin + size > count) return STAX_OK;
    STAX_RETURN_IF_ERROR(stax_infer_set_content(ic, k, (int32_t)size, content + begin));
    begin += size;
  }
  return STAX_OK;
}

stax_status_t stax_shape_split(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &data, 1, STAX_MAX_RANK));
  int64_t axis_attr = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_attr));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_attr, data.rank, "axis", &axis));
  int32_t output_count = ic->node->output_count;
  if (output_count > STAX_SHAPE_CONTENT_MAX) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED, "%d outputs; at most %d are supported",
                            output_count, STAX_SHAPE_CONTENT_MAX);
  }
  const stax_dim_t* sizes[STAX_SHAPE_CONTENT_MAX];
  if (stax_infer_input(ic, 1) || stax_node_attr_find(ic->node, "split")) {
    STAX_RETURN_IF_ERROR(split_given_sizes(ic, &data, axis, output_count, sizes));
  } else {
    STAX_RETURN_IF_ERROR(split_equal_sizes(ic, &data, axis, output_count, sizes));
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < data.rank; k++) dims[k] = data.dims[k];
  for (int32_t k = 0; k < output_count; k++) {
    dims[axis] = sizes[k];
    STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, k, data.dtype, data.rank, dims));
  }
  return split_content(ic, output_count, sizes);
}
