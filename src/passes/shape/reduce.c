/* Shape functions for reductions (Reduce*, ArgMax/ArgMin) and for ops whose output has the
 * input's shape but which check an axis or side inputs (Softmax family, CumSum,
 * InstanceNormalization, Trilu).
 *
 * Reduce* axes come from the 'axes' attribute (older opsets) or from input 1 (opset 18, and
 * ReduceSum from opset 13). The input must be known when the graph is built (a constant or
 * symbolic contents whose entries are constants): the output rank depends on it. */
#include <stdio.h>
#include <string.h>

#include "passes/shape/shape_util.h"
#include "passes/shape/shape_operands.h"

/* ---- Reduce* ----------------------------------------------------------------------------- */

/* Reads the axes (attribute or input 1) and marks reduced axes in `reduced`. *out_all is true
 * when no axes were given. */
static stax_status_t read_reduce_axes(stax_shape_infer_t* ic, int32_t rank, bool* reduced,
                                      bool* out_all) {
  *out_all = false;
  int64_t values[STAX_SHAPE_CONTENT_MAX];
  int32_t count = -1;
  const int64_t* attribute_axes = NULL;
  int32_t attribute_count = -1;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(ic->node, "axes", &attribute_count, &attribute_axes));
  bool has_input = stax_infer_input(ic, 1) != NULL;
  if (attribute_count >= 0 && has_input) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "axes given both as an attribute and as input 1");
  }
  if (has_input) {
    STAX_RETURN_IF_ERROR(stax_shape_read_const_ints(ic, 1, "axes", STAX_SHAPE_CONTENT_MAX,
                                                    values, &count));
  } else if (attribute_count >= 0) {
    if (attribute_count > STAX_SHAPE_CONTENT_MAX) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "%d axes for rank %d",
                              attribute_count, rank);
    }
    if (attribute_count > 0)
      memcpy(values, attribute_axes, sizeof(values[0]) * (size_t)attribute_count);
    count = attribute_count;
  }
  if (count <= 0) {
    *out_all = true;
    return STAX_OK;
  }
  for (int32_t k = 0; k < count; k++) {
    char what[32];
    snprintf(what, sizeof(what), "axes[%d]", k);
    int32_t axis = 0;
    STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, values[k], rank, what, &axis));
    if (reduced[axis]) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "axes[%d] = %lld repeats axis %d", k,
                              (long long)values[k], axis);
    }
    reduced[axis] = true;
  }
  return STAX_OK;
}

/* Sum/Prod/Max/Min of a rank-1 integer tensor with symbolic contents (e.g. the element count
 * as ReduceProd(Shape(x))) has symbolic contents too. */
static stax_status_t reduce_content(stax_shape_infer_t* ic, const stax_shape_operand_t* x,
                                    bool all_reduced) {
  stax_op_t op = ic->node->op;
  if (x->rank != 1 || !all_reduced || !stax_dtype_is_integer(x->dtype)) return STAX_OK;
  if (op != STAX_OP_ReduceSum && op != STAX_OP_ReduceProd && op != STAX_OP_ReduceMax &&
      op != STAX_OP_ReduceMin) {
    return STAX_OK;
  }
  const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
  int32_t count = 0;
  if (!stax_shape_value_content(ic, stax_infer_input(ic, 0), STAX_SHAPE_CONTENT_MAX, content,
                                &count)) {
    return STAX_OK;
  }
  /* Max and Min of nothing have no value; Sum and Prod have their identities. */
  if (count == 0 && (op == STAX_OP_ReduceMax || op == STAX_OP_ReduceMin)) return STAX_OK;
  const stax_dim_t* result = stax_dim_const(ic->shape, op == STAX_OP_ReduceProd ? 1 : 0);
  for (int32_t k = 0; k < count; k++) {
    const stax_dim_t* element = content[k];
    if (k == 0 && (op == STAX_OP_ReduceMax || op == STAX_OP_ReduceMin)) {
      result = element;
    } else if (op == STAX_OP_ReduceSum) {
      result = stax_dim_add(ic->shape, result, element);
    } else if (op == STAX_OP_ReduceProd) {
      result = stax_dim_mul(ic->shape, result, element);
    } else if (op == STAX_OP_ReduceMax) {
      result = stax_dim_max(ic->shape, result, element);
    } else {
      result = stax_dim_min(ic->shape, result, element);
    }
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_content(ic, 0, 1, &result);
}

/* Axes only known at run time (a graph input): the output rank is still static — the input's
 * with keepdims, else minus the axes count, which must be a static length — and every output
 * dim becomes a fresh symbol bounded by the largest input dim; the kernel computes the real
 * shape and the VM binds the symbols after it runs. */
static stax_status_t reduce_runtime_axes(stax_shape_infer_t* ic, const stax_shape_operand_t* x,
                                         const stax_value_t* axes, bool keepdims,
                                         bool noop_with_empty_axes) {
  stax_shape_operand_t axes_operand;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &axes_operand));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &axes_operand, STAX_DTYPES_INT, "an integer"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &axes_operand, 0, 1));
  if (axes->rank != 1 || !stax_dim_is_const(axes->dims[0])) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "axes (input 1) must be a 1-D tensor of static length when its "
                            "values are only known at run time");
  }
  int64_t axis_count = stax_dim_const_value(axes->dims[0]);
  if (axis_count > x->rank) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "%lld axes for an input of rank %d",
                            (long long)axis_count, x->rank);
  }
  int64_t upper = 1;
  for (int32_t d = 0; d < x->rank; d++) {
    int64_t bound = stax_shape_dim_upper(ic, x->dims[d]);
    if (bound > upper) upper = bound;
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  if (axis_count == 0) {
    /* An empty axes tensor: the identity, or everything reduced; static either way. */
    if (noop_with_empty_axes) return stax_shape_set_output(ic, 0, x->dtype, x->rank, x->dims);
    const stax_dim_t* one = stax_dim_const(ic->shape, 1);
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
    for (int32_t d = 0; d < x->rank; d++) dims[d] = one;
    return stax_shape_set_output(ic, 0, x->dtype, keepdims ? x->rank : 0, dims);
  }
  int32_t rank = keepdims ? x->rank : x->rank - (int32_t)axis_count;
  for (int32_t d = 0; d < rank; d++)
    STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, d, 0, upper, &dims[d]));
  return stax_shape_set_output(ic, 0, x->dtype, rank, dims);
}

stax_status_t stax_shape_reduce(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  /* Opset 20 lets ReduceMax / ReduceMin take bool (logical any / all). */
  bool allows_bool = ic->node->op == STAX_OP_ReduceMax || ic->node->op == STAX_OP_ReduceMin;
  if (!(allows_bool && x.dtype == STAX_DTYPE_BOOL))
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &x, STAX_DTYPES_NUMERIC, "a number"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &x));
  bool keepdims = true, noop_with_empty_axes = false;
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "keepdims", true, &keepdims));
  STAX_RETURN_IF_ERROR(
      stax_shape_attr_flag(ic, "noop_with_empty_axes", false, &noop_with_empty_axes));
  const stax_value_t* axes_value = stax_infer_input(ic, 1);
  if (axes_value && !axes_value->constant && axes_value->content_count < 0)
    return reduce_runtime_axes(ic, &x, axes_value, keepdims, noop_with_empty_axes);
  bool reduced[STAX_MAX_RANK] = {false};
  bool all = false;
  STAX_RETURN_IF_ERROR(read_reduce_axes(ic, x.rank, reduced, &all));
  if (all && noop_with_empty_axes) {
    /* No axes and the op asked to be the identity. */
    return stax_shape_set_output(ic, 0, x.dtype, x.rank, x.dims);
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  const stax_dim_t* one = stax_dim_const(ic->shape, 1);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  for (int32_t axis = 0; axis < x.rank; axis++) {
    if (all || reduced[axis]) {
      if (keepdims) dims[rank++] = one;
    } else {
      dims[rank++] = x.dims[axis];
    }
  }
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, x.dtype, rank, dims));
  return reduce_content(ic, &x, all || (x.rank == 1 && reduced[0]));
}

/* ---- ArgMax / ArgMin --------------------------------------------------------------------- */

stax_status_t stax_shape_arg_reduce(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &x, STAX_DTYPES_NUMERIC, "a number"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &x));
  int64_t axis_value = 0;
  bool keepdims = true, select_last_index = false;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_value));
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "keepdims", true, &keepdims));
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "select_last_index", false, &select_last_index));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_value, x.rank, "axis", &axis));
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  const stax_dim_t* one = stax_dim_const(ic->shape, 1);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  for (int32_t k = 0; k < x.rank; k++) {
    if (k != axis) {
      dims[rank++] = x.dims[k];
    } else if (keepdims) {
      dims[rank++] = one;
    }
  }
  return stax_shape_set_output(ic, 0, STAX_DTYPE_INT64, rank, dims);
}

/* ---- same-shape ops ---------------------------------------------------------------------- */

static stax_status_t check_softmax(stax_shape_infer_t* ic, const stax_shape_operand_t* x) {
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, x, STAX_DTYPES_FLOAT,
                                                "a floating-point type"));
  int64_t axis_value = -1;
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", -1, &axis_value));
  return stax_shape_normalize_axis(ic, axis_value, x->rank, "axis", &axis);
}

/* CumSum(x, axis): the axis is a scalar input; when it is known it must be in range. */
static stax_status_t check_cumsum(stax_shape_infer_t* ic, const stax_shape_operand_t* x) {
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, x, STAX_DTYPES_NUMERIC, "a number"));
  stax_shape_operand_t axis_input;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &axis_input));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &axis_input, STAX_DTYPES_INDEX,
                                                "int32 or int64"));
  STAX_RETURN_IF_ERROR(stax_shape_require_scalar(ic, &axis_input, "axis"));
  bool flag = false;
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "exclusive", false, &flag));
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "reverse", false, &flag));
  const stax_dim_t* content[1];
  int32_t count = 0;
  int64_t axis_value = 0;
  if (stax_shape_value_content(ic, stax_infer_input(ic, 1), 1, content, &count) &&
      count == 1 && stax_shape_dim_const(ic, content[0], &axis_value)) {
    int32_t axis = 0;
    STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_value, x->rank, "axis", &axis));
  }
  return STAX_OK;
}

/* InstanceNormalization(x, scale, bias): scale and bias are [C] with C = x's dim 1. */
static stax_status_t check_instance_norm(stax_shape_infer_t* ic,
                                         const stax_shape_operand_t* x) {
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, x, STAX_DTYPES_FLOAT,
                                                "a floating-point type"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, x, 3, -1));
  stax_shape_operand_t sides[2];
  for (int32_t k = 0; k < 2; k++) {
    STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, k + 1, &sides[k]));
    STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, x, &sides[k]));
    STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &sides[k], 1, 1));
  }
  /* Dims last, once everything else is valid (the union-find cannot undo equalities). */
  for (int32_t k = 0; k < 2; k++) {
    STAX_RETURN_IF_ERROR(stax_shape_match_dim(ic, &sides[k], 0, x->dims[1], 0, 1));
  }
  return STAX_OK;
}

/* Trilu(x, k?): x is at least a matrix; k is an int64 scalar. */
static stax_status_t check_trilu(stax_shape_infer_t* ic, const stax_shape_operand_t* x) {
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, x, 2, -1));
  bool upper = true;
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "upper", true, &upper));
  stax_shape_operand_t k;
  bool has_k = false;
  stax_shape_read_input(ic, 1, &k, &has_k);
  if (has_k) {
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &k, STAX_DTYPE_BIT(STAX_DTYPE_INT64),
                                                  "int64"));
    STAX_RETURN_IF_ERROR(stax_shape_require_scalar(ic, &k, "k"));
  }
  return STAX_OK;
}

stax_status_t stax_shape_same_shape(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  switch (ic->node->op) {
    case STAX_OP_Softmax:
    case STAX_OP_LogSoftmax:
    case STAX_OP_Hardmax: STAX_RETURN_IF_ERROR(check_softmax(ic, &x)); break;
    case STAX_OP_CumSum: STAX_RETURN_IF_ERROR(check_cumsum(ic, &x)); break;
    case STAX_OP_InstanceNormalization: STAX_RETURN_IF_ERROR(check_instance_norm(ic, &x)); break;
    case STAX_OP_Trilu: STAX_RETURN_IF_ERROR(check_trilu(ic, &x)); break;
    default: break;
  }
  return stax_shape_set_output(ic, 0, x.dtype, x.rank, x.dims);
}
