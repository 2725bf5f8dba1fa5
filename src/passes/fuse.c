/* Pattern fusion: chains exporters write for one operation become that operation's node, so
 * the interpreter runs one kernel instead of five to nine and the JIT sees the op it has a
 * lowering for. The last node of the chain is rewritten in place (its output, and so the
 * graph's names, stay); the rest die when nothing else uses them. Results agree within
 * float32 rounding, not bit for bit: the fused kernels evaluate the same formula with other
 * roundings (Gelu through erfc, LayerNormalization with one mean and variance pass).
 *
 *   GELU, erf form:   0.5 * x * (1 + erf(x / sqrt(2)))   (or x * 0.70710678), factors in any
 *                     order and grouping                 -> Gelu(x)
 *   GELU, tanh form:  0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x^3))), x^3 as
 *                     Pow(x, 3) or x*x*x                 -> Gelu(x, approximate="tanh")
 *   LayerNorm:        d = x - ReduceMean(x); v = ReduceMean(d^2 or d*d);
 *                     d / Sqrt(v + eps) * gamma (+ beta), over the last axis, gamma and beta
 *                     constants of the last dim's length -> LayerNormalization(x, gamma, beta) */
#include <math.h>

#include "passes/pass.h"

#define STAX_FUSE_MAX_FACTORS 6

static bool stax_fuse_near(double value, double expected) {
  return fabs(value - expected) <= 1e-4 * fabs(expected);
}

static bool stax_fuse_scalar_near(stax_pass_ctx_t* ctx, stax_value_id_t v, double expected) {
  double value = 0;
  return stax_pass_scalar(ctx, v, &value) && stax_fuse_near(value, expected);
}

/* The factors of a product of Mul nodes rooted at v (inner Muls only when nothing else uses
 * them). Returns the count, or -1 when there are too many. */
static int32_t stax_fuse_factors(stax_pass_ctx_t* ctx, stax_value_id_t v, bool root,
                                 stax_value_id_t* factors, int32_t count) {
  stax_node_t* mul = stax_pass_producer_op(ctx, v, STAX_OP_Mul);
  if (mul && mul->input_count == 2 && (root || ctx->uses[v] == 1)) {
    count = stax_fuse_factors(ctx, mul->inputs[0], false, factors, count);
    if (count < 0) return -1;
    return stax_fuse_factors(ctx, mul->inputs[1], false, factors, count);
  }
  if (count >= STAX_FUSE_MAX_FACTORS) return -1;
  factors[count] = v;
  return count + 1;
}

static bool stax_fuse_take_scalar(stax_pass_ctx_t* ctx, stax_value_id_t* factors, int32_t* count,
                                  double expected) {
  for (int32_t k = 0; k < *count; k++) {
    if (!stax_fuse_scalar_near(ctx, factors[k], expected)) continue;
    factors[k] = factors[--*count];
    return true;
  }
  return false;
}

/* Add(a, b) with b (or a) the scalar `c`: the other operand, else NONE. */
static stax_value_id_t stax_fuse_add_scalar(stax_pass_ctx_t* ctx, stax_value_id_t v, double c) {
  stax_node_t* add = stax_pass_producer_op(ctx, v, STAX_OP_Add);
  if (!add || add->input_count != 2) return STAX_VALUE_NONE;
  if (stax_fuse_scalar_near(ctx, add->inputs[1], c)) return add->inputs[0];
  if (stax_fuse_scalar_near(ctx, add->inputs[0], c)) return add->inputs[1];
  return STAX_VALUE_NONE;
}

/* x / c or x * (1 / c): x, else NONE. */
static stax_value_id_t stax_fuse_scaled(stax_pass_ctx_t* ctx, stax_value_id_t v, double c) {
  stax_node_t* node = stax_pass_producer(ctx, v);
  if (!node || node->input_count != 2) return STAX_VALUE_NONE;
  if (node->op == STAX_OP_Div && stax_fuse_scalar_near(ctx, node->inputs[1], c))
    return node->inputs[0];
  if (node->op == STAX_OP_Mul) {
    if (stax_fuse_scalar_near(ctx, node->inputs[1], 1.0 / c)) return node->inputs[0];
    if (stax_fuse_scalar_near(ctx, node->inputs[0], 1.0 / c)) return node->inputs[1];
  }
  return STAX_VALUE_NONE;
}

/* x^3 as Pow(x, 3) or a product x*x*x. */
static bool stax_fuse_is_cube(stax_pass_ctx_t* ctx, stax_value_id_t v, stax_value_id_t x) {
  stax_node_t* pow = stax_pass_producer_op(ctx, v, STAX_OP_Pow);
  if (pow && pow->input_count == 2 && pow->inputs[0] == x &&
      stax_fuse_scalar_near(ctx, pow->inputs[1], 3.0))
    return true;
  stax_value_id_t factors[STAX_FUSE_MAX_FACTORS];
  int32_t count = stax_fuse_factors(ctx, v, false, factors, 0);
  if (count != 3) return false;
  return factors[0] == x && factors[1] == x && factors[2] == x;
}

/* 0.7978845608 * (x + 0.044715 * x^3), in any operand order: true when it is that of x. */
static bool stax_fuse_tanh_inner(stax_pass_ctx_t* ctx, stax_value_id_t v, stax_value_id_t x) {
  stax_value_id_t factors[STAX_FUSE_MAX_FACTORS];
  int32_t count = stax_fuse_factors(ctx, v, false, factors, 0);
  if (count != 2 || !stax_fuse_take_scalar(ctx, factors, &count, 0.7978845608028654))
    return false;
  stax_node_t* add = stax_pass_producer_op(ctx, factors[0], STAX_OP_Add);
  if (!add || add->input_count != 2) return false;
  stax_value_id_t other = add->inputs[0] == x ? add->inputs[1]
                          : add->inputs[1] == x ? add->inputs[0]
                                                : STAX_VALUE_NONE;
  if (other == STAX_VALUE_NONE) return false;
  stax_value_id_t terms[STAX_FUSE_MAX_FACTORS];
  int32_t term_count = stax_fuse_factors(ctx, other, false, terms, 0);
  if (term_count < 2 || !stax_fuse_take_scalar(ctx, terms, &term_count, 0.044715)) return false;
  if (term_count == 1) return stax_fuse_is_cube(ctx, terms[0], x);
  return term_count == 3 && terms[0] == x && terms[1] == x && terms[2] == x;
}

/* GELU rooted at node `n` (a Mul): rewrites it into Gelu. */
static stax_status_t stax_fuse_gelu(stax_pass_ctx_t* ctx, stax_node_id_t n, bool* out_done) {
  *out_done = false;
  stax_graph_t* g = ctx->graph;
  stax_value_id_t root = g->nodes[n].outputs[0];
  stax_value_id_t factors[STAX_FUSE_MAX_FACTORS];
  int32_t count = stax_fuse_factors(ctx, root, true, factors, 0);
  if (count != 3 || !stax_fuse_take_scalar(ctx, factors, &count, 0.5)) return STAX_OK;
  for (int32_t k = 0; k < 2; k++) {
    stax_value_id_t x = factors[1 - k];
    stax_value_id_t activation = stax_fuse_add_scalar(ctx, factors[k], 1.0);
    if (activation == STAX_VALUE_NONE || x == STAX_VALUE_NONE) continue;
    if (!stax_pass_same_type(ctx, x, root)) continue;
    const char* approximate = NULL;
    stax_node_t* erf = stax_pass_producer_op(ctx, activation, STAX_OP_Erf);
    stax_node_t* tanh = stax_pass_producer_op(ctx, activation, STAX_OP_Tanh);
    if (erf && erf->input_count == 1 &&
        stax_fuse_scaled(ctx, erf->inputs[0], 1.4142135623730951) == x) {
      approximate = "none";
    } else if (tanh && tanh->input_count == 1 && stax_fuse_tanh_inner(ctx, tanh->inputs[0], x)) {
      approximate = "tanh";
    } else {
      continue;
    }
    stax_attr_t attr = stax_attr_string("approximate", approximate);
    bool tanh_form = approximate[0] == 't';
    STAX_RETURN_IF_ERROR(stax_pass_rewrite_node(ctx, n, STAX_OP_Gelu, 1, &x, tanh_form ? 1 : 0,
                                                &attr, out_done));
    if (*out_done)
      stax_pass_count(ctx, tanh_form ? "tanh GELU fused into Gelu" : "GELU fused into Gelu");
    return STAX_OK;
  }
  return STAX_OK;
}

/* ReduceMean over exactly the last axis with keepdims; its input, else NONE. */
static stax_value_id_t stax_fuse_mean_last(stax_pass_ctx_t* ctx, stax_value_id_t v) {
  stax_node_t* mean = stax_pass_producer_op(ctx, v, STAX_OP_ReduceMean);
  if (!mean || mean->input_count < 1 || mean->inputs[0] == STAX_VALUE_NONE) return STAX_VALUE_NONE;
  int32_t rank = ctx->graph->values[mean->inputs[0]].rank;
  int64_t keep = 1, noop = 0;
  int32_t count = -1;
  const int64_t* axes = NULL;
  stax_status_t status = stax_node_attr_int(mean, "keepdims", 1, &keep);
  if (status == STAX_OK) status = stax_node_attr_int(mean, "noop_with_empty_axes", 0, &noop);
  if (status == STAX_OK) status = stax_node_attr_ints(mean, "axes", &count, &axes);
  if (status != STAX_OK) {
    stax_status_free(status);
    return STAX_VALUE_NONE;
  }
  if (!keep || rank < 1) return STAX_VALUE_NONE;
  int64_t axis = 0;
  if (count == 1) {
    axis = axes[0];
  } else if (count < 0 && mean->input_count >= 2 && mean->inputs[1] != STAX_VALUE_NONE) {
    double value = 0;
    if (!stax_pass_scalar(ctx, mean->inputs[1], &value)) return STAX_VALUE_NONE;
    axis = (int64_t)value;
  } else {
    return STAX_VALUE_NONE;
  }
  if (axis != -1 && axis != rank - 1) return STAX_VALUE_NONE;
  return mean->inputs[0];
}

/* A rank-1 constant of length `channels`. */
static bool stax_fuse_channel_constant(stax_pass_ctx_t* ctx, stax_value_id_t v, int64_t channels) {
  const stax_tensor_t* t = v == STAX_VALUE_NONE ? NULL : ctx->graph->values[v].constant;
  return t && stax_tensor_rank(t) == 1 && stax_tensor_dims(t)[0] == channels;
}

static stax_status_t stax_fuse_layer_norm(stax_pass_ctx_t* ctx, stax_node_id_t n, bool* out_done) {
  *out_done = false;
  stax_graph_t* g = ctx->graph;
  stax_node_t* node = &g->nodes[n];
  if (node->input_count != 2) return STAX_OK;
  stax_value_id_t root = node->outputs[0];
  stax_value_id_t scaled = STAX_VALUE_NONE, beta = STAX_VALUE_NONE;
  if (node->op == STAX_OP_Add) {
    for (int32_t k = 0; k < 2 && scaled == STAX_VALUE_NONE; k++) {
      if (!g->values[node->inputs[1 - k]].constant) continue;
      if (!stax_pass_producer_op(ctx, node->inputs[k], STAX_OP_Mul)) continue;
      scaled = node->inputs[k];
      beta = node->inputs[1 - k];
    }
    if (scaled == STAX_VALUE_NONE || ctx->uses[scaled] != 1) return STAX_OK;
  } else if (node->op == STAX_OP_Mul) {
    scaled = root;
  } else {
    return STAX_OK;
  }
  stax_node_t* mul = stax_pass_producer_op(ctx, scaled, STAX_OP_Mul);
  if (!mul || mul->input_count != 2) return STAX_OK;
  for (int32_t k = 0; k < 2; k++) {
    stax_value_id_t gamma = mul->inputs[1 - k];
    stax_node_t* div = stax_pass_producer_op(ctx, mul->inputs[k], STAX_OP_Div);
    if (!div || div->input_count != 2 || !g->values[gamma].constant) continue;
    stax_value_id_t d = div->inputs[0];
    stax_node_t* sqrt = stax_pass_producer_op(ctx, div->inputs[1], STAX_OP_Sqrt);
    stax_node_t* sub = stax_pass_producer_op(ctx, d, STAX_OP_Sub);
    if (!sqrt || sqrt->input_count != 1 || !sub || sub->input_count != 2) continue;
    stax_value_id_t x = sub->inputs[0];
    if (stax_fuse_mean_last(ctx, sub->inputs[1]) != x) continue;
    stax_node_t* add_eps = stax_pass_producer_op(ctx, sqrt->inputs[0], STAX_OP_Add);
    if (!add_eps || add_eps->input_count != 2) continue;
    double eps = 0;
    stax_value_id_t variance = STAX_VALUE_NONE;
    if (stax_pass_scalar(ctx, add_eps->inputs[1], &eps)) variance = add_eps->inputs[0];
    else if (stax_pass_scalar(ctx, add_eps->inputs[0], &eps)) variance = add_eps->inputs[1];
    if (variance == STAX_VALUE_NONE || !(eps >= 0)) continue;
    stax_value_id_t squared = stax_fuse_mean_last(ctx, variance);
    stax_node_t* pow = stax_pass_producer_op(ctx, squared, STAX_OP_Pow);
    stax_node_t* sq = stax_pass_producer_op(ctx, squared, STAX_OP_Mul);
    bool is_square = (pow && pow->input_count == 2 && pow->inputs[0] == d &&
                      stax_fuse_scalar_near(ctx, pow->inputs[1], 2.0)) ||
                     (sq && sq->input_count == 2 && sq->inputs[0] == d && sq->inputs[1] == d);
    if (!is_square) continue;
    const stax_value_t* xv = &g->values[x];
    if (xv->rank < 1 || !stax_dim_is_const(xv->dims[xv->rank - 1])) continue;
    int64_t channels = stax_dim_const_value(xv->dims[xv->rank - 1]);
    if (!stax_fuse_channel_constant(ctx, gamma, channels)) continue;
    if (beta != STAX_VALUE_NONE && !stax_fuse_channel_constant(ctx, beta, channels)) continue;
    if (!stax_pass_same_type(ctx, x, root) || g->values[gamma].dtype != xv->dtype ||
        (beta != STAX_VALUE_NONE && g->values[beta].dtype != xv->dtype))
      continue;
    stax_value_id_t inputs[3] = {x, gamma, beta};
    stax_attr_t attrs[2] = {stax_attr_int("axis", -1), stax_attr_float("epsilon", (float)eps)};
    STAX_RETURN_IF_ERROR(stax_pass_rewrite_node(ctx, n, STAX_OP_LayerNormalization,
                                                beta == STAX_VALUE_NONE ? 2 : 3, inputs, 2,
                                                attrs, out_done));
    if (*out_done) stax_pass_count(ctx, "LayerNorm chain fused into LayerNormalization");
    return STAX_OK;
  }
  return STAX_OK;
}

stax_status_t stax_pass_run_fuse(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  /* Last node first, so a chain matches at its end (LayerNorm with its beta, not without). */
  for (stax_node_id_t n = g->node_count - 1; n >= 0; n--) {
    if (ctx->dead[n]) continue;
    stax_node_t* node = &g->nodes[n];
    if (node->output_count != 1 || node->outputs[0] == STAX_VALUE_NONE) continue;
    if (node->op != STAX_OP_Mul && node->op != STAX_OP_Add) continue;
    if (!ctx->uses_valid) STAX_RETURN_IF_ERROR(stax_pass_refresh_uses(ctx));
    if (ctx->uses[node->outputs[0]] == 0) continue; /* the inside of a chain fused already */
    bool done = false;
    if (node->op == STAX_OP_Mul) STAX_RETURN_IF_ERROR(stax_fuse_gelu(ctx, n, &done));
    if (!done) STAX_RETURN_IF_ERROR(stax_fuse_layer_norm(ctx, n, &done));
  }
  return STAX_OK;
}
