/* Transpose into Gemm's transposed operand. Gemm(Transpose(A), B) is Gemm(A, B) with transA
 * flipped, and likewise for B with transB, when the Transpose swaps the two axes of a 2-D
 * value (perm [1, 0], or none). Bit for bit: the interpreter's Gemm kernel and the JIT's
 * lowering both read a transposed operand as the same matrix with its strides swapped, which
 * is exactly what the Transpose's view gave them; the Transpose (a TRANSPOSE_VIEW, and for
 * the JIT a view between two groups) goes away.
 *
 * MatMul has no transposed form in ONNX: MatMul(A, Transpose(B)) keeps its TRANSPOSE_VIEW,
 * which both the MatMul kernel and the JIT read through strides (packing absorbs them), and a
 * Transpose of a constant B is folded into a transposed constant by `fold`. */
#include "passes/pass.h"

/* The Transpose's input when v is a 2-D axis swap, else NONE. */
static stax_value_id_t stax_gemmtrans_source(stax_pass_ctx_t* ctx, stax_value_id_t v) {
  stax_node_t* t = stax_pass_producer_op(ctx, v, STAX_OP_Transpose);
  if (!t || t->input_count != 1 || t->inputs[0] == STAX_VALUE_NONE) return STAX_VALUE_NONE;
  if (ctx->graph->values[t->inputs[0]].rank != 2) return STAX_VALUE_NONE;
  int64_t perm[2];
  if (!stax_pass_transpose_perm(t, 2, perm) || perm[0] != 1 || perm[1] != 0)
    return STAX_VALUE_NONE;
  return t->inputs[0];
}

stax_status_t stax_pass_run_gemmtrans(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    if (ctx->dead[n]) continue;
    stax_node_t* node = &g->nodes[n];
    if (node->op != STAX_OP_Gemm || node->input_count < 2 || node->input_count > 3 ||
        node->output_count != 1 || node->attr_count > 4)
      continue;
    stax_value_id_t inputs[3] = {node->inputs[0], node->inputs[1],
                                 node->input_count > 2 ? node->inputs[2] : STAX_VALUE_NONE};
    float alpha = 1.0f, beta = 1.0f;
    int64_t trans[2] = {0, 0};
    stax_status_t status = stax_node_attr_int(node, "transA", 0, &trans[0]);
    if (!status) status = stax_node_attr_int(node, "transB", 0, &trans[1]);
    if (!status) status = stax_node_attr_float(node, "alpha", 1.0f, &alpha);
    if (!status) status = stax_node_attr_float(node, "beta", 1.0f, &beta);
    if (status) { /* malformed: the kernel reports it */
      stax_status_free(status);
      continue;
    }
    bool changed = false;
    for (int32_t side = 0; side < 2; side++) {
      stax_value_id_t source = stax_gemmtrans_source(ctx, inputs[side]);
      if (source == STAX_VALUE_NONE) continue;
      inputs[side] = source;
      trans[side] = !trans[side];
      changed = true;
    }
    if (!changed) continue;
    stax_attr_t attrs[4] = {stax_attr_int("transA", trans[0] != 0),
                            stax_attr_int("transB", trans[1] != 0),
                            stax_attr_float("alpha", alpha), stax_attr_float("beta", beta)};
    bool done = false;
    STAX_RETURN_IF_ERROR(stax_pass_rewrite_node(ctx, n, STAX_OP_Gemm, node->input_count, inputs,
                                                4, attrs, &done));
    if (done) stax_pass_count(ctx, "Transposes absorbed into Gemm's transA/transB");
  }
  return STAX_OK;
}
