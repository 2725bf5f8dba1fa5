/* Shape-chain folding, graph side. Shape inference knows the contents of small integer values
 * as dim expressions: Concat(Unsqueeze(Gather(Shape(x), 0)), [12, 64]) holds [B, 12, 64], and
 * so does the same chain over another tensor of x's batch. Two such values with the same
 * dtype, length and (symbolically equal) contents are the same tensor, element for element,
 * so every use of the later one takes the earlier one and the later chain dies in dce. Bit for
 * bit: the contents determine the value.
 *
 * The other half is in the compiler (src/vm/compile_nodes.c): a node whose integer outputs
 * have contents computable from the symbols bound where it runs becomes DIM_VALUES (dim code,
 * no kernel), so nothing reads the chain behind it and the dead-instruction sweep removes it.
 * Switching `shapefold` off switches off both. */
#include "passes/pass.h"

/* v's contents, when it is a non-constant integer value of rank 0 or 1 whose every element
 * shape inference knows. */
static bool stax_shapefold_known(const stax_graph_t* g, stax_value_id_t v) {
  if (v == STAX_VALUE_NONE) return false;
  const stax_value_t* value = &g->values[v];
  if (value->constant || value->rank > 1 || value->content_count < 0 || !value->content)
    return false;
  if (value->dtype != STAX_DTYPE_INT64 && value->dtype != STAX_DTYPE_INT32) return false;
  for (int32_t k = 0; k < value->content_count; k++)
    if (!value->content[k]) return false;
  return true;
}

static bool stax_shapefold_equal(stax_pass_ctx_t* ctx, stax_value_id_t a, stax_value_id_t b) {
  const stax_value_t* x = &ctx->graph->values[a];
  const stax_value_t* y = &ctx->graph->values[b];
  if (x->content_count != y->content_count || !stax_pass_same_type(ctx, a, b)) return false;
  for (int32_t k = 0; k < x->content_count; k++)
    if (x->content[k] != y->content[k] &&
        !stax_dim_known_equal(ctx->graph->shape, x->content[k], y->content[k]))
      return false;
  return true;
}

stax_status_t stax_pass_run_shapefold(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 1; n < g->node_count; n++) {
    if (ctx->dead[n]) continue;
    stax_node_t* node = &g->nodes[n];
    for (int32_t k = 0; k < node->output_count; k++) {
      stax_value_id_t v = node->outputs[k];
      if (!stax_shapefold_known(g, v) || ctx->pinned[v]) continue;
      /* An earlier value (its producer comes first, so it is defined wherever v is used). */
      bool merged = false;
      for (stax_node_id_t m = 0; m < n && !merged; m++) {
        if (ctx->dead[m]) continue;
        const stax_node_t* earlier = &g->nodes[m];
        for (int32_t j = 0; j < earlier->output_count && !merged; j++) {
          stax_value_id_t w = earlier->outputs[j];
          if (!stax_shapefold_known(g, w) || !stax_shapefold_equal(ctx, v, w)) continue;
          merged = stax_pass_replace_value(ctx, v, w);
        }
      }
      if (merged) stax_pass_count(ctx, "shape values with equal contents merged");
    }
  }
  return STAX_OK;
}
