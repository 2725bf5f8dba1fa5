/* No-op removal: nodes whose output equals an input element for element. Bit for bit: each
 * removed node copies its input unchanged (Identity; Dropout in inference mode, whose output
 * is its input; Cast and CastLike to the type the value has; Reshape, Flatten, Squeeze,
 * Unsqueeze and Expand to the shape it has; Transpose by the identity permutation; Concat of
 * one input). The node's output is replaced by its input and DCE drops the node. */
#include "passes/pass.h"

static bool stax_noop_identity_perm(const stax_node_t* node, int32_t rank) {
  int64_t perm[STAX_MAX_RANK];
  if (rank > STAX_MAX_RANK || !stax_pass_transpose_perm(node, rank, perm)) return false;
  for (int32_t k = 0; k < rank; k++)
    if (perm[k] != k) return false;
  return true;
}

/* Dropout copies its input when training_mode is absent or a constant false. */
static bool stax_noop_dropout(stax_pass_ctx_t* ctx, const stax_node_t* node) {
  if (node->output_count > 1 && node->outputs[1] != STAX_VALUE_NONE &&
      ctx->uses[node->outputs[1]] > 0)
    return false; /* the mask is used */
  if (node->input_count < 3 || node->inputs[2] == STAX_VALUE_NONE) return true;
  double training = 1;
  return stax_pass_scalar(ctx, node->inputs[2], &training) && training == 0;
}

static bool stax_noop_node(stax_pass_ctx_t* ctx, const stax_node_t* node) {
  if (node->input_count < 1 || node->inputs[0] == STAX_VALUE_NONE || node->output_count < 1)
    return false;
  stax_value_id_t in = node->inputs[0], out = node->outputs[0];
  const stax_value_t* value = &ctx->graph->values[in];
  switch (node->op) {
    case STAX_OP_Identity:
      return true;
    case STAX_OP_Dropout:
      return stax_noop_dropout(ctx, node);
    case STAX_OP_Cast:
    case STAX_OP_CastLike:
    case STAX_OP_Reshape:
    case STAX_OP_Flatten:
    case STAX_OP_Squeeze:
    case STAX_OP_Unsqueeze:
    case STAX_OP_Expand:
      return stax_pass_same_type(ctx, in, out);
    case STAX_OP_Transpose:
      return stax_noop_identity_perm(node, value->rank);
    case STAX_OP_Concat:
      return node->input_count == 1;
    default:
      return false;
  }
}

stax_status_t stax_pass_run_noop(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    if (ctx->dead[n]) continue;
    if (!ctx->uses_valid) STAX_RETURN_IF_ERROR(stax_pass_refresh_uses(ctx));
    const stax_node_t* node = &g->nodes[n];
    if (!stax_noop_node(ctx, node)) continue;
    if (!stax_pass_replace_value(ctx, node->outputs[0], node->inputs[0])) continue;
    stax_pass_count(ctx, node->op == STAX_OP_Identity   ? "Identity removed"
                         : node->op == STAX_OP_Dropout  ? "Dropout removed"
                         : node->op == STAX_OP_Cast || node->op == STAX_OP_CastLike
                             ? "Cast to the same type removed"
                         : node->op == STAX_OP_Transpose ? "identity Transpose removed"
                         : node->op == STAX_OP_Concat   ? "one-input Concat removed"
                                                        : "shape-keeping view removed");
  }
  return STAX_OK;
}
