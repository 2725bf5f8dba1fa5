/* Shape functions for LayerNormalization (with its optional Mean and InvStdDev outputs),
 * BatchNormalization (with its optional running statistics) and LRN. InstanceNormalization
 * only checks its inputs and lives with the same-shape ops in reduce.c. */
#include "passes/shape/shape_util.h"

/* LayerNormalization(X, Scale, B?) -> Y, Mean?, InvStdDev?. Scale and B broadcast into the
 * normalized dims X[axis:]; Mean and InvStdDev keep X's rank with the normalized dims set to
 * 1, in the dtype named by stash_type. */
stax_status_t stax_shape_layer_norm(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &x, STAX_DTYPES_FLOAT,
                                                "a floating-point type"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &x));
  int64_t axis_value = -1, stash_type = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", -1, &axis_value));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "stash_type", 1, &stash_type));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_value, x.rank, "axis", &axis));
  stax_dtype_t stash_dtype = stash_type >= INT32_MIN && stash_type <= INT32_MAX
                                 ? stax_dtype_from_onnx((int32_t)stash_type)
                                 : STAX_DTYPE_INVALID;
  if (!stax_dtype_is_float(stash_dtype)) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'stash_type' = %lld is not a floating-point dtype",
                            (long long)stash_type);
  }
  stax_shape_operand_t sides[2];
  bool present[2] = {false, false};
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &sides[0]));
  present[0] = true;
  stax_shape_read_input(ic, 2, &sides[1], &present[1]);
  for (int32_t k = 0; k < 2; k++) {
    if (!present[k]) continue;
    STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &x, &sides[k]));
    if (sides[k].rank > x.rank - axis) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "input %d '%s' has rank %d, more than the %d normalized dims of "
                              "input 0 '%s' (axis %d)",
                              k + 1, sides[k].name, sides[k].rank, x.rank - axis, x.name, axis);
    }
  }
  /* Dims last, once everything else is valid (the union-find cannot undo equalities). */
  for (int32_t k = 0; k < 2; k++) {
    if (present[k]) STAX_RETURN_IF_ERROR(stax_shape_broadcast_to(ic, &sides[k], &x));
  }
  const stax_dim_t* stat_dims[STAX_MAX_RANK];
  const stax_dim_t* one = stax_dim_const(ic->shape, 1);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  for (int32_t k = 0; k < x.rank; k++) stat_dims[k] = k < axis ? x.dims[k] : one;
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, x.dtype, x.rank, x.dims));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 1, stash_dtype, x.rank, stat_dims));
  return stax_shape_set_output(ic, 2, stash_dtype, x.rank, stat_dims);
}

/* BatchNormalization(X, scale, B, input_mean, input_var) -> Y, running_mean?, running_var?.
 * X is (N, C, D1, ...); the four side inputs are (C). */
stax_status_t stax_shape_batch_norm(stax_shape_infer_t* ic) {
  stax_shape_operand_t operands[5];
  for (int32_t i = 0; i < 5; i++) {
    STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, i, &operands[i]));
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &operands[i], STAX_DTYPES_FLOAT,
                                                  "a floating-point type"));
  }
  const stax_shape_operand_t* x = &operands[0];
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, x, 2, -1));
  /* scale/B share a dtype, and so do mean/var (ONNX T1 and T2). */
  STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &operands[1], &operands[2]));
  STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &operands[3], &operands[4]));
  for (int32_t i = 1; i < 5; i++) {
    STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &operands[i], 1, 1));
  }
  bool training = false;
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "training_mode", false, &training));
  /* Dims last, once everything else is valid (the union-find cannot undo equalities). */
  for (int32_t i = 1; i < 5; i++) {
    STAX_RETURN_IF_ERROR(stax_shape_match_dim(ic, &operands[i], 0, x->dims[1], 0, 1));
  }
  const stax_dim_t* channels = stax_dim_resolve(ic->shape, x->dims[1]);
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, x->dtype, x->rank, x->dims));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 1, operands[3].dtype, 1, &channels));
  return stax_shape_set_output(ic, 2, operands[3].dtype, 1, &channels);
}

/* LRN(X) -> Y of X's shape. X is (N, C, D1, ...): the window runs along dim 1, so a rank
 * below 3 is refused as ONNX defines the op (ONNX Runtime takes rank 4 only). `size`, the
 * window's channel count, is required and positive; it may exceed C (the window is clipped). */
stax_status_t stax_shape_lrn(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &x, STAX_DTYPES_FLOAT,
                                                "a floating-point type"));
  if (x.rank < 3) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 0 '%s' has rank %d; LRN needs (N, C, D1, ...), rank >= 3, "
                            "with the channels in dim 1",
                            x.name, x.rank);
  }
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &x));
  if (!stax_node_attr_find(ic->node, "size")) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'size' (how many channels of input 0 '%s' dim 1 to sum "
                            "over) is required",
                            x.name);
  }
  int64_t size = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "size", 0, &size));
  if (size <= 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'size' is %lld; it counts channels of input 0 '%s' dim 1 "
                            "and must be positive",
                            (long long)size, x.name);
  }
  return stax_shape_set_output(ic, 0, x.dtype, x.rank, x.dims);
}
