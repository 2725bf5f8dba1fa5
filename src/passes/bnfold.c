/* BatchNormalization folding: an inference BatchNormalization with constant scale, B, mean and
 * var is the per-channel affine map y = x * a + b, a = scale / sqrt(var + epsilon),
 * b = B - mean * a (channels on dim 1).
 *
 *   Conv(x, W, B?) -> BatchNormalization   when W (and B) are constants and the Conv's output
 *                                          feeds only the BatchNormalization: one Conv with
 *                                          W'[m, ...] = W[m, ...] * a[m] and
 *                                          B'[m] = (B[m] - mean[m]) * a[m] + B_bn[m]
 *   any other BatchNormalization           -> Mul(x, a) then Add(., b), a and b of shape
 *                                          [C, 1, ..., 1], which the JIT fuses with the
 *                                          elementwise ops and Conv around them
 *
 * The BatchNormalization node is rewritten in place (its output keeps its name); the Conv it
 * absorbed dies. a, b, W' and B' are computed in double and rounded once to the input's dtype.
 *
 * Within rounding, not bit for bit. The interpreter's BatchNormalization rounds once per
 * element (x * a + b in double); after folding, the Conv sums W' x products in float32 (each
 * product differs from W x * a by the rounding of W'), and Mul + Add round twice in float32
 * (plus the rounding of a and b to float32). Typical differences are a few float32 ulps of the
 * output's magnitude; an output that is a small difference of large terms (x * a close to -b)
 * differs by a few ulps of those terms. The tests hold results to 1e-5 relative to (1 + |y|)
 * against the unfolded model. Training-mode nodes, nodes whose running statistics outputs are
 * used, and non-constant parameters are left alone. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "passes/pass.h"

/* The per-channel map of an inference BatchNormalization with constant parameters: a and b
 * (channels entries each; `scratch` holds 2 * channels more), or false when the node does not
 * qualify. */
static bool stax_bnfold_affine(stax_pass_ctx_t* ctx, const stax_node_t* node, int64_t channels,
                               double* a, double* b, double* scratch) {
  stax_graph_t* g = ctx->graph;
  if (node->input_count != 5) return false;
  for (int32_t k = 1; k < node->output_count; k++)
    if (node->outputs[k] != STAX_VALUE_NONE && ctx->uses[node->outputs[k]] > 0) return false;
  int64_t training = 0;
  float epsilon = 1e-5f;
  stax_status_t status = stax_node_attr_int(node, "training_mode", 0, &training);
  if (status == STAX_OK) status = stax_node_attr_float(node, "epsilon", 1e-5f, &epsilon);
  if (status != STAX_OK) {
    stax_status_free(status);
    return false;
  }
  if (training != 0) return false;
  double* mean = scratch;
  double* var = scratch + channels;
  double* params[4] = {a, b, mean, var};
  /* scale, B, mean, var into a, b, scratch. */
  for (int32_t k = 0; k < 4; k++) {
    stax_value_id_t v = node->inputs[1 + k];
    const stax_tensor_t* t = v == STAX_VALUE_NONE ? NULL : g->values[v].constant;
    if (!t || stax_tensor_rank(t) != 1 || stax_tensor_dims(t)[0] != channels) return false;
    if (!stax_pass_read_doubles(t, params[k], channels)) return false;
  }
  /* The same arithmetic as the generic kernel's statistics (src/kernels/normalization.c). */
  for (int64_t c = 0; c < channels; c++) {
    double multiplier = a[c] / sqrt(var[c] + (double)epsilon);
    b[c] = b[c] - mean[c] * multiplier;
    a[c] = multiplier;
    if (!isfinite(a[c]) || !isfinite(b[c])) return false; /* var + eps <= 0, or overflow */
  }
  return true;
}

static bool stax_bnfold_float_dtype(stax_dtype_t dtype) {
  return dtype == STAX_DTYPE_FLOAT32 || dtype == STAX_DTYPE_FLOAT64;
}

/* A new constant of `dtype`, `rank` dims, filled from `values` (rounded once). */
static stax_status_t stax_bnfold_constant(stax_pass_ctx_t* ctx, const char* name,
                                          stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                          const double* values, int64_t count,
                                          stax_value_id_t* out_value) {
  stax_tensor_t* t = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(ctx->graph->allocator, dtype, rank, dims, &t));
  stax_convert_elements(STAX_DTYPE_FLOAT64, values, dtype, stax_tensor_data(t), count);
  stax_status_t status = stax_pass_add_constant(ctx, name, t, out_value);
  stax_tensor_release(t);
  return status;
}

/* Conv -> BatchNormalization at node n: the BatchNormalization becomes the Conv with folded
 * weights. */
static stax_status_t stax_bnfold_into_conv(stax_pass_ctx_t* ctx, stax_node_id_t n,
                                           stax_node_id_t conv_id, const double* a,
                                           const double* b, bool* out_done) {
  *out_done = false;
  stax_graph_t* g = ctx->graph;
  const stax_node_t* conv = &g->nodes[conv_id];
  stax_value_id_t w = conv->inputs[1];
  stax_value_id_t bias = conv->input_count > 2 ? conv->inputs[2] : STAX_VALUE_NONE;
  const stax_tensor_t* wt = g->values[w].constant;
  const stax_tensor_t* bt = bias == STAX_VALUE_NONE ? NULL : g->values[bias].constant;
  stax_dtype_t dtype = g->values[conv->outputs[0]].dtype;
  if (!wt || (bias != STAX_VALUE_NONE && !bt) || stax_tensor_dtype(wt) != dtype ||
      (bt && stax_tensor_dtype(bt) != dtype) || stax_tensor_rank(wt) < 1)
    return STAX_OK;
  int64_t out_channels = stax_tensor_dims(wt)[0];
  if (bt && (stax_tensor_rank(bt) != 1 || stax_tensor_dims(bt)[0] != out_channels))
    return STAX_OK;
  int64_t count = stax_tensor_element_count(wt);
  if (out_channels < 1 || count % out_channels != 0) return STAX_OK;
  stax_allocator_t allocator = g->allocator;
  double* values = NULL;
  size_t bytes = (size_t)(count + out_channels) * sizeof(double);
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, bytes, (void**)&values));
  double* folded_bias = values + count;
  stax_status_t status = STAX_OK;
  bool readable = stax_pass_read_doubles(wt, values, count);
  for (int64_t m = 0; m < out_channels; m++) folded_bias[m] = 0;
  if (readable && bt) readable = stax_pass_read_doubles(bt, folded_bias, out_channels);
  if (!readable) goto cleanup;
  int64_t per_channel = count / out_channels;
  for (int64_t m = 0; m < out_channels; m++) {
    for (int64_t i = 0; i < per_channel; i++) values[m * per_channel + i] *= a[m];
    folded_bias[m] = folded_bias[m] * a[m] + b[m];
  }
  char name[256];
  const char* base = g->nodes[n].name ? g->nodes[n].name : "bn";
  stax_value_id_t new_w = STAX_VALUE_NONE, new_b = STAX_VALUE_NONE;
  snprintf(name, sizeof(name), "%s.folded_weight", base);
  STAX_GOTO_IF_ERROR(status,
                     stax_bnfold_constant(ctx, name, dtype, stax_tensor_rank(wt),
                                          stax_tensor_dims(wt), values, count, &new_w),
                     cleanup);
  snprintf(name, sizeof(name), "%s.folded_bias", base);
  STAX_GOTO_IF_ERROR(status,
                     stax_bnfold_constant(ctx, name, dtype, 1, &out_channels, folded_bias,
                                          out_channels, &new_b),
                     cleanup);
  /* The Conv's attributes, as the builder's form. */
  conv = &g->nodes[conv_id];
  enum { kMaxAttrs = 16 };
  stax_attr_t attrs[kMaxAttrs];
  int32_t attr_count = 0;
  if (!stax_pass_builder_attrs(conv, attrs, kMaxAttrs, &attr_count)) goto cleanup;
  stax_value_id_t inputs[3] = {conv->inputs[0], new_w, new_b};
  STAX_GOTO_IF_ERROR(status,
                     stax_pass_rewrite_node(ctx, n, STAX_OP_Conv, 3, inputs, attr_count,
                                            attrs, out_done),
                     cleanup);
  if (*out_done) {
    ctx->dead[conv_id] = true;
    stax_pass_count(ctx, "BatchNormalization folded into Conv");
  }
cleanup:
  stax_allocator_free(allocator, values, bytes);
  return status;
}

/* Any other BatchNormalization at node n: Mul(x, a) inserted before it, the node itself
 * rewritten into Add(., b). */
static stax_status_t stax_bnfold_affine_nodes(stax_pass_ctx_t* ctx, stax_node_id_t n,
                                              int64_t channels, const double* a,
                                              const double* b, bool* out_done) {
  *out_done = false;
  stax_graph_t* g = ctx->graph;
  stax_value_id_t x = g->nodes[n].inputs[0];
  const stax_value_t* xv = &g->values[x];
  int32_t rank = xv->rank;
  stax_dtype_t dtype = xv->dtype;
  int64_t dims[STAX_MAX_RANK];
  dims[0] = channels;
  for (int32_t d = 1; d < rank - 1; d++) dims[d] = 1;
  char name[256];
  const char* base = g->nodes[n].name ? g->nodes[n].name : "bn";
  stax_value_id_t scale = STAX_VALUE_NONE, shift = STAX_VALUE_NONE, scaled = STAX_VALUE_NONE;
  snprintf(name, sizeof(name), "%s.scale", base);
  STAX_RETURN_IF_ERROR(
      stax_bnfold_constant(ctx, name, dtype, rank - 1, dims, a, channels, &scale));
  snprintf(name, sizeof(name), "%s.shift", base);
  STAX_RETURN_IF_ERROR(
      stax_bnfold_constant(ctx, name, dtype, rank - 1, dims, b, channels, &shift));
  stax_value_id_t mul_inputs[2] = {x, scale};
  stax_node_desc_t mul = {.op = STAX_OP_Mul, .input_count = 2, .inputs = mul_inputs};
  snprintf(name, sizeof(name), "%s.scaled", base);
  STAX_RETURN_IF_ERROR(stax_pass_insert_node(ctx, n, &mul, name, &scaled));
  /* The BatchNormalization moved up by one. */
  stax_value_id_t add_inputs[2] = {scaled, shift};
  STAX_RETURN_IF_ERROR(
      stax_pass_rewrite_node(ctx, n + 1, STAX_OP_Add, 2, add_inputs, 0, NULL, out_done));
  if (*out_done) {
    stax_pass_count(ctx, "BatchNormalization into Mul + Add");
  } else {
    ctx->dead[n] = true; /* the Mul nothing reads */
  }
  return STAX_OK;
}

/* Channels a folded BatchNormalization may have (its parameters are read into doubles). */
#define STAX_BNFOLD_MAX_CHANNELS ((int64_t)1 << 24)

static stax_status_t stax_bnfold_node(stax_pass_ctx_t* ctx, stax_node_id_t n, int64_t channels,
                                      bool* out_inserted) {
  *out_inserted = false;
  stax_graph_t* g = ctx->graph;
  size_t bytes = (size_t)channels * 4 * sizeof(double);
  double* a = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(g->allocator, bytes, (void**)&a));
  double* b = a + channels;
  stax_status_t status = STAX_OK;
  const stax_node_t* node = &g->nodes[n];
  if (stax_bnfold_affine(ctx, node, channels, a, b, b + channels)) {
    stax_value_id_t x = node->inputs[0];
    bool done = false;
    stax_node_t* conv = stax_pass_producer_op(ctx, x, STAX_OP_Conv);
    if (conv && conv->input_count >= 2 && conv->output_count == 1 && ctx->uses[x] == 1 &&
        !ctx->pinned[x])
      status = stax_bnfold_into_conv(ctx, n, g->values[x].producer, a, b, &done);
    if (status == STAX_OK && !done) {
      status = stax_bnfold_affine_nodes(ctx, n, channels, a, b, &done);
      *out_inserted = status == STAX_OK;
    }
  }
  stax_allocator_free(g->allocator, a, bytes);
  return status;
}

stax_status_t stax_pass_run_bnfold(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    if (ctx->dead[n] || g->nodes[n].op != STAX_OP_BatchNormalization) continue;
    if (!ctx->uses_valid) STAX_RETURN_IF_ERROR(stax_pass_refresh_uses(ctx));
    const stax_node_t* node = &g->nodes[n];
    if (node->input_count < 1 || node->inputs[0] == STAX_VALUE_NONE || node->output_count < 1 ||
        node->outputs[0] == STAX_VALUE_NONE)
      continue;
    stax_value_id_t x = node->inputs[0];
    const stax_value_t* xv = &g->values[x];
    if (xv->constant || xv->rank < 2 || xv->rank > STAX_MAX_RANK ||
        !stax_bnfold_float_dtype(xv->dtype) || !stax_dim_is_const(xv->dims[1]) ||
        g->values[node->outputs[0]].constant)
      continue;
    int64_t channels = stax_dim_const_value(xv->dims[1]);
    if (channels < 1 || channels > STAX_BNFOLD_MAX_CHANNELS) continue;
    bool inserted = false;
    STAX_RETURN_IF_ERROR(stax_bnfold_node(ctx, n, channels, &inserted));
    if (inserted) n++; /* past the Mul: the BatchNormalization (now Add) is at n + 1 */
  }
  return STAX_OK;
}
