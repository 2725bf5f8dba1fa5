/* Dead-code elimination: a node none of whose outputs is used (by a node, a graph output or a
 * subgraph's capture) is removed, last node first so a dead chain goes in one sweep. Kernels
 * have no side effects, so removing one changes no result; a call that would have failed in a
 * removed node (a Gather index out of range whose result nothing reads) now succeeds, as in
 * other runtimes. Unused constants need no pass: the compiler loads only constants in use. */
#include "passes/pass.h"

stax_status_t stax_pass_run_dce(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  STAX_RETURN_IF_ERROR(stax_pass_refresh_uses(ctx));
  for (stax_node_id_t n = g->node_count - 1; n >= 0; n--) {
    if (ctx->dead[n]) continue;
    const stax_node_t* node = &g->nodes[n];
    bool used = node->output_count == 0;
    for (int32_t k = 0; k < node->output_count && !used; k++)
      if (node->outputs[k] != STAX_VALUE_NONE && ctx->uses[node->outputs[k]] > 0) used = true;
    if (used) continue;
    ctx->dead[n] = true;
    for (int32_t i = 0; i < node->input_count; i++)
      if (node->inputs[i] != STAX_VALUE_NONE) ctx->uses[node->inputs[i]]--;
    /* Captures of its subgraphs count as uses of this graph's values too. */
    for (int32_t a = 0; a < node->attr_count; a++) {
      if (node->attrs[a].type != STAX_ATTR_GRAPH || !node->attrs[a].value.graph) continue;
      const stax_graph_t* sub = node->attrs[a].value.graph;
      for (stax_value_id_t v = 0; v < sub->value_count; v++)
        if ((sub->values[v].flags & STAX_VALUE_IS_CAPTURE) && sub->values[v].outer_value >= 0 &&
            sub->values[v].outer_value < g->value_count)
          ctx->uses[sub->values[v].outer_value]--;
    }
    stax_pass_count(ctx, "dead nodes removed");
    ctx->uses_valid = true; /* kept exact above */
  }
  return STAX_OK;
}
