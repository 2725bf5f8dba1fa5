/* Algebraic simplification. Every rule here is bit for bit:
 *   - x*1, 1*x and x/1 are x (for floats too: x*1 is exact, -0*1 is -0, NaN stays NaN);
 *   - x+0, 0+x and x-0 are x for integers; for floats only x + (-0.0) and x - (+0.0) are,
 *     since -0.0 + 0.0 is +0.0 (so x + 0.0 is left alone);
 *   - Neg(Neg(x)) is x;
 *   - Transpose(Transpose(x, p), q) is one Transpose by the composed permutation, or x;
 *   - a chain of Reshape/Flatten/Squeeze/Unsqueeze that ends in x's own shape is x, and
 *     Reshape(Reshape(x, a), b) is Reshape(x, b) when b has no 0 that copies a dim of a.
 * Each rule applies only where the result has exactly the original output's dtype and shape
 * (broadcasting against the constant must not grow it). */
#include "passes/pass.h"

/* `a op b` is a when b is a constant whose every element is `neutral` (and, for a commutative
 * op, b when a is), provided the survivor already has the output's dtype and shape.
 * `sign_of_zero`: a zero neutral must match in sign too. */
static stax_value_id_t stax_simplify_neutral(stax_pass_ctx_t* ctx, stax_value_id_t a,
                                             stax_value_id_t b, stax_value_id_t out,
                                             double neutral, bool sign_of_zero,
                                             bool commutative) {
  if (stax_pass_constant_all(ctx, b, neutral, sign_of_zero) && stax_pass_same_type(ctx, a, out))
    return a;
  if (commutative && stax_pass_constant_all(ctx, a, neutral, sign_of_zero) &&
      stax_pass_same_type(ctx, b, out))
    return b;
  return STAX_VALUE_NONE;
}

/* Binary identities: the operand that survives, or NONE. */
static stax_value_id_t stax_simplify_binary(stax_pass_ctx_t* ctx, const stax_node_t* node) {
  if (node->input_count != 2 || node->inputs[0] == STAX_VALUE_NONE ||
      node->inputs[1] == STAX_VALUE_NONE)
    return STAX_VALUE_NONE;
  stax_value_id_t a = node->inputs[0], b = node->inputs[1], out = node->outputs[0];
  bool is_float = stax_dtype_is_float(ctx->graph->values[out].dtype);
  switch (node->op) {
    case STAX_OP_Mul: return stax_simplify_neutral(ctx, a, b, out, 1.0, false, true);
    case STAX_OP_Div: return stax_simplify_neutral(ctx, a, b, out, 1.0, false, false);
    /* Floats: only -0.0 is neutral for +, since -0.0 + 0.0 is +0.0. */
    case STAX_OP_Add:
      return stax_simplify_neutral(ctx, a, b, out, is_float ? -0.0 : 0.0, is_float, true);
    case STAX_OP_Sub: return stax_simplify_neutral(ctx, a, b, out, 0.0, is_float, false);
    default: return STAX_VALUE_NONE;
  }
}

static bool stax_simplify_is_reshape_family(stax_op_t op) {
  return op == STAX_OP_Reshape || op == STAX_OP_Flatten || op == STAX_OP_Squeeze ||
         op == STAX_OP_Unsqueeze;
}

/* Reshape's target shape has no 0 entry that would copy a dim of its input. */
static bool stax_simplify_shape_keeps_meaning(stax_pass_ctx_t* ctx, const stax_node_t* node) {
  int64_t allow_zero = 0;
  stax_status_t status = stax_node_attr_int(node, "allowzero", 0, &allow_zero);
  if (status != STAX_OK) {
    stax_status_free(status);
    return false;
  }
  if (allow_zero) return true;
  const stax_value_t* shape = &ctx->graph->values[node->inputs[1]];
  if (shape->content_count < 0) return false;
  for (int32_t i = 0; i < shape->content_count; i++) {
    const stax_dim_t* d = shape->content[i];
    if (!stax_dim_is_const(d)) {
      int64_t lo = 0, hi = 0;
      stax_dim_bounds(ctx->graph->shape, d, &lo, &hi);
      if (lo <= 0 && hi >= 0) return false;
    } else if (stax_dim_const_value(d) == 0) {
      return false;
    }
  }
  return true;
}

stax_status_t stax_pass_run_simplify(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    if (ctx->dead[n]) continue;
    stax_node_t* node = &g->nodes[n];
    if (node->output_count < 1 || node->outputs[0] == STAX_VALUE_NONE) continue;
    stax_value_id_t out = node->outputs[0];
    stax_value_id_t x = stax_simplify_binary(ctx, node);
    if (x != STAX_VALUE_NONE) {
      if (stax_pass_replace_value(ctx, out, x)) stax_pass_count(ctx, "arithmetic identity removed");
      continue;
    }
    if (node->input_count < 1 || node->inputs[0] == STAX_VALUE_NONE) continue;
    stax_node_t* inner = stax_pass_producer(ctx, node->inputs[0]);
    if (!inner || inner->input_count < 1 || inner->inputs[0] == STAX_VALUE_NONE) continue;
    stax_value_id_t source = inner->inputs[0];
    if (node->op == STAX_OP_Neg && inner->op == STAX_OP_Neg) {
      if (stax_pass_replace_value(ctx, out, source)) stax_pass_count(ctx, "Neg of Neg removed");
      continue;
    }
    if (node->op == STAX_OP_Transpose && inner->op == STAX_OP_Transpose) {
      int32_t rank = g->values[source].rank;
      int64_t p[STAX_MAX_RANK], q[STAX_MAX_RANK], r[STAX_MAX_RANK];
      if (!stax_pass_transpose_perm(inner, rank, p) || !stax_pass_transpose_perm(node, rank, q))
        continue;
      bool identity = true;
      for (int32_t k = 0; k < rank; k++) {
        r[k] = p[q[k]];
        if (r[k] != k) identity = false;
      }
      if (identity) {
        if (stax_pass_replace_value(ctx, out, source))
          stax_pass_count(ctx, "Transpose pair removed");
        continue;
      }
      stax_attr_t perm = stax_attr_ints("perm", rank, r);
      bool done = false;
      STAX_RETURN_IF_ERROR(
          stax_pass_rewrite_node(ctx, n, STAX_OP_Transpose, 1, &source, 1, &perm, &done));
      if (done) stax_pass_count(ctx, "Transpose pair merged");
      continue;
    }
    if (stax_simplify_is_reshape_family(node->op) && stax_simplify_is_reshape_family(inner->op)) {
      if (stax_pass_same_type(ctx, out, source)) {
        if (stax_pass_replace_value(ctx, out, source))
          stax_pass_count(ctx, "view round trip removed");
        continue;
      }
      if (node->op == STAX_OP_Reshape && node->input_count == 2 &&
          node->inputs[1] != STAX_VALUE_NONE && stax_simplify_shape_keeps_meaning(ctx, node)) {
        stax_value_id_t inputs[2] = {source, node->inputs[1]};
        int32_t attr_count = 0;
        stax_attr_t attrs[1];
        int64_t allow_zero = 0;
        STAX_RETURN_IF_ERROR(stax_node_attr_int(node, "allowzero", 0, &allow_zero));
        if (allow_zero) attrs[attr_count++] = stax_attr_int("allowzero", allow_zero);
        bool done = false;
        STAX_RETURN_IF_ERROR(stax_pass_rewrite_node(ctx, n, STAX_OP_Reshape, 2, inputs,
                                                    attr_count, attrs, &done));
        if (done) stax_pass_count(ctx, "Reshape of a reshape merged");
      }
    }
  }
  return STAX_OK;
}
