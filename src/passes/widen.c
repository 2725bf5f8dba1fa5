/* float16 / bfloat16 MatMul, Gemm, Conv and MaxPool computed in float32 between Casts:
 *
 *   Y16 = MatMul(A16, B16)   ->   Y16 = Cast(MatMul(Cast(A16, f32), Cast(B16, f32)), f16)
 *
 * Why: the generic kernels already compute these ops this way (widen the operands, run the
 * float32 GEMM or convolution, accumulate a bias in float32, round each output once), so the
 * rewrite changes no result beyond the float32 summation order every kernel tier already may
 * differ in. What it changes is who runs them: the JIT's matmul, conv and pool lowerings are
 * float32 only, so a 16-bit model's products used to interpret, together with the elementwise
 * epilogue fused behind them (a BERT layer in float16 ran 2.3x the float32 time). Rewritten,
 * the product compiles with its epilogue, which rounds to 16 bits exactly where the
 * interpreter does (the Cast, then each 16-bit elementwise op), and the widening of an
 * activation fuses into the group that produces it.
 *
 * A constant operand's Cast folds at build time (`fold`), so weights are widened once, when
 * the model loads, and kept in float32: twice the bytes of the 16-bit weights (the 16-bit
 * copy is dropped when nothing else reads it). MaxPool picks one of its inputs, which
 * float32 holds exactly, so it is bit for bit; AveragePool is left alone (its kernel sums in
 * double and rounds once, which a float32 result then rounded to 16 bits would not always
 * match). MaxPool with an Indices output is left alone too. */
#include <stdio.h>

#include "passes/pass.h"
#include "runtime/tensor_internal.h"

bool stax_pass_widens_op(stax_op_t op) {
  return op == STAX_OP_MatMul || op == STAX_OP_Gemm || op == STAX_OP_Conv ||
         op == STAX_OP_MaxPool || op == STAX_OP_GlobalMaxPool;
}

/* Every present input has the 16-bit dtype of the one output. */
static bool stax_widen_candidate(const stax_graph_t* g, const stax_node_t* node) {
  if (!stax_pass_widens_op(node->op) || node->output_count != 1 ||
      node->outputs[0] == STAX_VALUE_NONE || node->input_count < 1 || node->input_count > 3)
    return false;
  stax_dtype_t dtype = g->values[node->outputs[0]].dtype;
  if (!stax_dtype_is_half(dtype) || g->values[node->outputs[0]].constant) return false;
  for (int32_t i = 0; i < node->input_count; i++)
    if (node->inputs[i] != STAX_VALUE_NONE && g->values[node->inputs[i]].dtype != dtype)
      return false;
  return true;
}

/* The one live node reading v, or -1. */
static stax_node_id_t stax_widen_only_reader(stax_pass_ctx_t* ctx, stax_node_id_t from,
                                             stax_value_id_t v) {
  if (ctx->uses[v] != 1 || ctx->pinned[v]) return -1;
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = from; n < g->node_count; n++) {
    if (ctx->dead[n]) continue;
    for (int32_t i = 0; i < g->nodes[n].input_count; i++)
      if (g->nodes[n].inputs[i] == v) return n;
  }
  return -1;
}

/* A Conv's BatchNormalization to widen with it: an inference node (one output) of the same
 * dtype that alone reads the Conv's output. Widened together, `bnfold` then folds it into the
 * float32 Conv, which skips the 16-bit rounding of the Conv's output in between (within
 * 16-bit rounding, not bit for bit, as bnfold itself is within float32 rounding). */
static stax_node_id_t stax_widen_batchnorm(stax_pass_ctx_t* ctx, stax_node_id_t conv) {
  stax_graph_t* g = ctx->graph;
  stax_value_id_t y = g->nodes[conv].outputs[0];
  stax_node_id_t bn = stax_widen_only_reader(ctx, conv + 1, y);
  if (bn < 0) return -1;
  const stax_node_t* node = &g->nodes[bn];
  if (node->op != STAX_OP_BatchNormalization || node->input_count != 5 ||
      node->output_count != 1 || node->inputs[0] != y || node->outputs[0] == STAX_VALUE_NONE ||
      g->values[node->outputs[0]].dtype != g->values[y].dtype)
    return -1;
  for (int32_t i = 1; i < 5; i++)
    if (node->inputs[i] == STAX_VALUE_NONE || g->values[node->inputs[i]].dtype != g->values[y].dtype)
      return -1;
  return bn;
}

/* Widens chain[0..count) (each node reading the one before it): every outside input through a
 * Cast to float32, each node again in float32, all inserted before the last node, which is
 * rewritten into the Cast of the last product back to its dtype (so its output keeps its id).
 * *out_inserted counts the nodes inserted. */
static stax_status_t stax_widen_chain(stax_pass_ctx_t* ctx, const stax_node_id_t* chain,
                                      int32_t count, int32_t* out_inserted) {
  *out_inserted = 0;
  stax_graph_t* g = ctx->graph;
  enum { kMaxAttrs = 16, kMaxChain = 2, kMaxInputs = 5 };
  stax_attr_t attrs[kMaxChain][kMaxAttrs];
  int32_t attr_counts[kMaxChain];
  for (int32_t c = 0; c < count; c++)
    if (!stax_pass_builder_attrs(&g->nodes[chain[c]], attrs[c], kMaxAttrs, &attr_counts[c]))
      return STAX_OK;
  stax_node_id_t at = chain[count - 1];
  stax_dtype_t dtype = g->values[g->nodes[at].outputs[0]].dtype;
  stax_attr_t to_f32 = stax_attr_int("to", stax_dtype_to_onnx(STAX_DTYPE_FLOAT32));
  stax_value_id_t product = STAX_VALUE_NONE;
  char name[256];
  for (int32_t c = 0; c < count; c++) {
    /* The last node moves up as nodes go in before it; the others stay before it. */
    const stax_node_t* node = &g->nodes[c == count - 1 ? at : chain[c]];
    stax_op_t op = node->op;
    int32_t input_count = node->input_count;
    char base[200];
    snprintf(base, sizeof(base), "%s", node->name ? node->name : stax_op_name(op));
    stax_value_id_t previous = c > 0 ? g->nodes[chain[c - 1]].outputs[0] : STAX_VALUE_NONE;
    stax_value_id_t wide[kMaxInputs];
    for (int32_t i = 0; i < input_count; i++) {
      stax_value_id_t v = g->nodes[c == count - 1 ? at : chain[c]].inputs[i];
      wide[i] = v;
      if (v == STAX_VALUE_NONE) continue;
      if (c > 0 && v == previous) {
        wide[i] = product;
        continue;
      }
      stax_node_desc_t cast = {.op = STAX_OP_Cast, .input_count = 1, .inputs = &v,
                               .attr_count = 1, .attrs = &to_f32};
      snprintf(name, sizeof(name), "%s.in%d_f32", base, (int)i);
      STAX_RETURN_IF_ERROR(stax_pass_insert_node(ctx, at, &cast, name, &wide[i]));
      at++;
      (*out_inserted)++;
    }
    stax_node_desc_t compute = {.op = op, .input_count = input_count, .inputs = wide,
                                .attr_count = attr_counts[c], .attrs = attrs[c]};
    snprintf(name, sizeof(name), "%s.f32", base);
    STAX_RETURN_IF_ERROR(stax_pass_insert_node(ctx, at, &compute, name, &product));
    at++;
    (*out_inserted)++;
  }
  stax_attr_t to_half = stax_attr_int("to", stax_dtype_to_onnx(dtype));
  bool done = false;
  STAX_RETURN_IF_ERROR(
      stax_pass_rewrite_node(ctx, at, STAX_OP_Cast, 1, &product, 1, &to_half, &done));
  if (done) {
    for (int32_t c = 0; c + 1 < count; c++) ctx->dead[chain[c]] = true;
    stax_pass_count(ctx, count > 1 ? "16-bit Conv + BatchNormalization computed in float32"
                                   : "16-bit products computed in float32 between Casts");
  } else {
    /* Shape inference disagreed: the nodes stay as they were; the inserted ones are unread. */
    for (stax_node_id_t k = at - *out_inserted; k < at; k++) ctx->dead[k] = true;
  }
  return STAX_OK;
}

stax_status_t stax_pass_run_widen(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    if (ctx->dead[n] || !stax_widen_candidate(g, &g->nodes[n])) continue;
    if (!ctx->uses_valid) STAX_RETURN_IF_ERROR(stax_pass_refresh_uses(ctx));
    stax_node_id_t chain[2] = {n, -1};
    int32_t count = 1;
    if (g->nodes[n].op == STAX_OP_Conv && (chain[1] = stax_widen_batchnorm(ctx, n)) >= 0) count = 2;
    int32_t inserted = 0;
    STAX_RETURN_IF_ERROR(stax_widen_chain(ctx, chain, count, &inserted));
    /* A lone node moved up by what was inserted before it; a pair's Conv stays at n. */
    if (count == 1) n += inserted;
  }
  return STAX_OK;
}
