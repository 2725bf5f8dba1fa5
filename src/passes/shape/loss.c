/* Shape functions for the classification losses NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss: scores (N, C, d1..dk), integer targets (N, d1..dk), optional
 * per-class weights (C). The loss is a scalar unless reduction is "none", where it has the
 * target's shape. */
#include <string.h>

#include "passes/shape/shape_util.h"

/* Checks scores, target and weights; returns the reduction mode through out_none. */
static stax_status_t check_loss_inputs(stax_shape_infer_t* ic, stax_shape_operand_t* scores,
                                       stax_shape_operand_t* target, bool* out_none) {
  *out_none = false;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, scores));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, target));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, scores, STAX_DTYPES_FLOAT,
                                                "a floating-point type"));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, target, STAX_DTYPES_INDEX,
                                                "int32 or int64"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, scores, 2, -1));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, scores));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, target, scores->rank - 1, scores->rank - 1));
  stax_shape_operand_t weights;
  bool has_weights = false;
  stax_shape_read_input(ic, 2, &weights, &has_weights);
  if (has_weights) {
    STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, scores, &weights));
    STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &weights, 1, 1));
  }
  const char* reduction = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "reduction", "mean", &reduction));
  if (strcmp(reduction, "none") != 0 && strcmp(reduction, "sum") != 0 &&
      strcmp(reduction, "mean") != 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'reduction' must be \"none\", \"sum\" or \"mean\", got "
                            "\"%s\"",
                            reduction);
  }
  *out_none = strcmp(reduction, "none") == 0;
  /* Dims last, once everything else is valid (the union-find cannot undo equalities).
   * target dim 0 is N (scores dim 0); target dim k >= 1 is scores dim k + 1. */
  for (int32_t axis = 0; axis < target->rank; axis++) {
    int32_t scores_axis = axis == 0 ? 0 : axis + 1;
    STAX_RETURN_IF_ERROR(
        stax_shape_match_dim(ic, target, axis, scores->dims[scores_axis], 0, scores_axis));
  }
  if (has_weights) {
    STAX_RETURN_IF_ERROR(stax_shape_match_dim(ic, &weights, 0, scores->dims[1], 0, 1));
  }
  return STAX_OK;
}

static stax_status_t set_loss_output(stax_shape_infer_t* ic, const stax_shape_operand_t* scores,
                                     const stax_shape_operand_t* target, bool none) {
  if (!none) return stax_shape_set_output(ic, 0, scores->dtype, 0, NULL);
  return stax_shape_set_output(ic, 0, scores->dtype, target->rank, target->dims);
}

stax_status_t stax_shape_nll_loss(stax_shape_infer_t* ic) {
  stax_shape_operand_t input, target;
  bool none = false;
  STAX_RETURN_IF_ERROR(check_loss_inputs(ic, &input, &target, &none));
  return set_loss_output(ic, &input, &target, none);
}

/* Output 1 (optional) is the log-probabilities, shaped like the scores. */
stax_status_t stax_shape_softmax_ce_loss(stax_shape_infer_t* ic) {
  stax_shape_operand_t scores, labels;
  bool none = false;
  STAX_RETURN_IF_ERROR(check_loss_inputs(ic, &scores, &labels, &none));
  STAX_RETURN_IF_ERROR(set_loss_output(ic, &scores, &labels, none));
  return stax_shape_set_output(ic, 1, scores.dtype, scores.rank, scores.dims);
}
