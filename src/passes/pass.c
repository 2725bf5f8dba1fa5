/* The graph-pass framework (src/passes/pass.h): use counts, replacement, checked in-place
 * rewrites and compaction. */
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Most passes rewrite in place; the per-value and per-node arrays grow (stax_pass_grow) when one
 * adds constants or nodes. */
stax_status_t stax_pass_ctx_init(stax_pass_ctx_t* ctx, stax_graph_t* graph) {
  memset(ctx, 0, sizeof(*ctx));
  ctx->graph = graph;
  ctx->value_capacity = graph->value_count > 0 ? graph->value_count : 1;
  ctx->node_capacity = graph->node_count > 0 ? graph->node_count : 1;
  stax_status_t status = stax_allocator_calloc(graph->allocator, (size_t)ctx->value_capacity,
                                               sizeof(int32_t), (void**)&ctx->uses);
  if (status == STAX_OK)
    status = stax_allocator_calloc(graph->allocator, (size_t)ctx->value_capacity, sizeof(bool),
                                   (void**)&ctx->pinned);
  if (status == STAX_OK)
    status = stax_allocator_calloc(graph->allocator, (size_t)ctx->node_capacity, sizeof(bool),
                                   (void**)&ctx->dead);
  if (status == STAX_OK) status = stax_pass_refresh_uses(ctx);
  if (status != STAX_OK) stax_pass_ctx_deinit(ctx);
  return status;
}

void stax_pass_ctx_deinit(stax_pass_ctx_t* ctx) {
  if (!ctx->graph) return;
  stax_allocator_t a = ctx->graph->allocator;
  if (ctx->uses) stax_allocator_free(a, ctx->uses, (size_t)ctx->value_capacity * sizeof(int32_t));
  if (ctx->pinned) stax_allocator_free(a, ctx->pinned, (size_t)ctx->value_capacity * sizeof(bool));
  if (ctx->dead) stax_allocator_free(a, ctx->dead, (size_t)ctx->node_capacity * sizeof(bool));
  memset(ctx, 0, sizeof(*ctx));
}

void stax_graph_count_uses(const stax_graph_t* graph, const bool* dead, int32_t* uses,
                           bool* pinned) {
  memset(uses, 0, (size_t)graph->value_count * sizeof(int32_t));
  if (pinned) memset(pinned, 0, (size_t)graph->value_count * sizeof(bool));
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    if (dead && dead[n]) continue;
    const stax_node_t* node = &graph->nodes[n];
    for (int32_t i = 0; i < node->input_count; i++)
      if (node->inputs[i] != STAX_VALUE_NONE) uses[node->inputs[i]]++;
    for (int32_t a = 0; a < node->attr_count; a++) {
      if (node->attrs[a].type != STAX_ATTR_GRAPH || !node->attrs[a].value.graph) continue;
      const stax_graph_t* sub = node->attrs[a].value.graph;
      for (stax_value_id_t v = 0; v < sub->value_count; v++) {
        const stax_value_t* local = &sub->values[v];
        if (!(local->flags & STAX_VALUE_IS_CAPTURE)) continue;
        if (local->outer_value < 0 || local->outer_value >= graph->value_count) continue;
        uses[local->outer_value]++;
        if (pinned) pinned[local->outer_value] = true;
      }
    }
  }
  for (int32_t o = 0; o < graph->output_count; o++) {
    uses[graph->outputs[o]]++;
    if (pinned) pinned[graph->outputs[o]] = true;
  }
  if (pinned)
    for (int32_t i = 0; i < graph->input_count; i++) pinned[graph->inputs[i]] = true;
}

stax_status_t stax_pass_refresh_uses(stax_pass_ctx_t* ctx) {
  stax_graph_count_uses(ctx->graph, ctx->dead, ctx->uses, ctx->pinned);
  ctx->uses_valid = true;
  return STAX_OK;
}

void stax_pass_tally_add(stax_pass_tally_t* tally, const char* label, int32_t count) {
  for (int32_t k = 0; k < STAX_PASS_TALLY_MAX; k++) {
    if (tally->label[k] == NULL) tally->label[k] = label;
    if (tally->label[k] == label || strcmp(tally->label[k], label) == 0) {
      tally->count[k] += count;
      return;
    }
  }
}

void stax_pass_count(stax_pass_ctx_t* ctx, const char* label) {
  ctx->changes++;
  ctx->uses_valid = false;
  stax_pass_tally_add(&ctx->tally, label, 1);
}

stax_node_t* stax_pass_producer(stax_pass_ctx_t* ctx, stax_value_id_t v) {
  if (v == STAX_VALUE_NONE) return NULL;
  stax_node_id_t p = ctx->graph->values[v].producer;
  if (p < 0 || ctx->dead[p]) return NULL;
  return &ctx->graph->nodes[p];
}

stax_node_t* stax_pass_producer_op(stax_pass_ctx_t* ctx, stax_value_id_t v, stax_op_t op) {
  stax_node_t* node = stax_pass_producer(ctx, v);
  return node && node->op == op ? node : NULL;
}

bool stax_pass_same_type(stax_pass_ctx_t* ctx, stax_value_id_t a, stax_value_id_t b) {
  const stax_value_t* x = &ctx->graph->values[a];
  const stax_value_t* y = &ctx->graph->values[b];
  if (x->dtype != y->dtype || x->rank != y->rank) return false;
  for (int32_t d = 0; d < x->rank; d++)
    if (x->dims[d] != y->dims[d] &&
        !stax_dim_known_equal(ctx->graph->shape, x->dims[d], y->dims[d]))
      return false;
  return true;
}

/* Element i (row-major) of a constant of any layout, as double. */
static bool stax_pass_element(const stax_tensor_t* t, int64_t i, double* out) {
  int32_t rank = stax_tensor_rank(t);
  const int64_t* dims = stax_tensor_dims(t);
  const int64_t* strides = stax_tensor_strides(t);
  int64_t offset = 0, rest = i;
  for (int32_t d = rank - 1; d >= 0; d--) {
    int64_t extent = dims[d] > 0 ? dims[d] : 1;
    offset += (rest % extent) * strides[d];
    rest /= extent;
  }
  stax_dtype_t dtype = stax_tensor_dtype(t);
  size_t size = stax_dtype_size(dtype);
  if (size == 0) return false;
  const unsigned char* element = (const unsigned char*)stax_tensor_data(t) + offset * (int64_t)size;
  stax_convert_elements(dtype, element, STAX_DTYPE_FLOAT64, out, 1);
  return true;
}

bool stax_pass_scalar(stax_pass_ctx_t* ctx, stax_value_id_t v, double* out_value) {
  if (v == STAX_VALUE_NONE) return false;
  const stax_tensor_t* t = ctx->graph->values[v].constant;
  if (!t || stax_tensor_element_count(t) != 1) return false;
  return stax_pass_element(t, 0, out_value);
}

bool stax_pass_constant_all(stax_pass_ctx_t* ctx, stax_value_id_t v, double value,
                            bool match_sign_of_zero) {
  if (v == STAX_VALUE_NONE) return false;
  const stax_tensor_t* t = ctx->graph->values[v].constant;
  if (!t) return false;
  int64_t count = stax_tensor_element_count(t);
  if (count < 1 || count > 4096) return false;
  for (int64_t i = 0; i < count; i++) {
    double x = 0;
    if (!stax_pass_element(t, i, &x) || x != value) return false;
    if (match_sign_of_zero && value == 0 && signbit(x) != signbit(value)) return false;
  }
  return true;
}

bool stax_pass_read_doubles(const stax_tensor_t* t, double* out, int64_t count) {
  if (count != stax_tensor_element_count(t) || stax_dtype_size(stax_tensor_dtype(t)) == 0)
    return false;
  if (stax_tensor_is_contiguous(t)) {
    stax_convert_elements(stax_tensor_dtype(t), stax_tensor_data(t), STAX_DTYPE_FLOAT64, out,
                          count);
    return true;
  }
  for (int64_t i = 0; i < count; i++)
    if (!stax_pass_element(t, i, &out[i])) return false;
  return true;
}

bool stax_pass_transpose_perm(const stax_node_t* node, int32_t rank, int64_t* out_perm) {
  int32_t count = -1;
  const int64_t* values = NULL;
  stax_status_t status = stax_node_attr_ints(node, "perm", &count, &values);
  if (status != STAX_OK) {
    stax_status_free(status);
    return false;
  }
  if (count >= 0 && count != rank) return false;
  for (int32_t k = 0; k < rank; k++) {
    out_perm[k] = count >= 0 ? values[k] : rank - 1 - k;
    if (out_perm[k] < 0 || out_perm[k] >= rank) return false;
  }
  return true;
}

bool stax_pass_replace_value(stax_pass_ctx_t* ctx, stax_value_id_t from, stax_value_id_t to) {
  if (from == to || from == STAX_VALUE_NONE || to == STAX_VALUE_NONE) return false;
  if (!ctx->uses_valid && stax_pass_refresh_uses(ctx) != STAX_OK) return false;
  if (ctx->pinned[from] || !stax_pass_same_type(ctx, from, to)) return false;
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    if (ctx->dead[n]) continue;
    stax_node_t* node = &g->nodes[n];
    for (int32_t i = 0; i < node->input_count; i++)
      if (node->inputs[i] == from) node->inputs[i] = to;
  }
  ctx->uses_valid = false;
  return true;
}

stax_status_t stax_pass_rewrite_node(stax_pass_ctx_t* ctx, stax_node_id_t id, stax_op_t op,
                                     int32_t input_count, const stax_value_id_t* inputs,
                                     int32_t attr_count, const stax_attr_t* attrs,
                                     bool* out_done) {
  *out_done = false;
  stax_graph_t* g = ctx->graph;
  stax_node_t* node = &g->nodes[id];
  if (node->output_count < stax_op_min_outputs(op) ||
      (stax_op_max_outputs(op) >= 0 && node->output_count > stax_op_max_outputs(op)) ||
      input_count < stax_op_min_inputs(op) ||
      (stax_op_max_inputs(op) >= 0 && input_count > stax_op_max_inputs(op)))
    return STAX_OK;
  enum { kMaxOutputs = 8 };
  if (node->output_count > kMaxOutputs) return STAX_OK;
  for (int32_t k = 0; k < node->output_count; k++)
    if (g->values[node->outputs[k]].constant) return STAX_OK; /* folded already */
  stax_node_attr_t* new_attrs = NULL;
  stax_status_t status = stax_node_attrs_copy(g, op, node->name, attr_count, attrs, &new_attrs);
  if (status != STAX_OK) {
    stax_status_free(status); /* a pass offered a form the schema refuses: keep the node */
    return STAX_OK;
  }
  void* copy = NULL;
  if (input_count > 0)
    STAX_RETURN_IF_ERROR(stax_arena_memdup(&g->arena, inputs,
                                           (size_t)input_count * sizeof(stax_value_id_t), &copy));
  /* Keep what the node and its outputs were, to restore them when the new form disagrees. */
  stax_node_t saved = *node;
  stax_value_t saved_values[kMaxOutputs];
  for (int32_t k = 0; k < node->output_count; k++) saved_values[k] = g->values[node->outputs[k]];
  node->op = op;
  node->input_count = input_count;
  node->inputs = copy;
  node->attr_count = attr_count;
  node->attrs = new_attrs;
  stax_shape_checkpoint_t checkpoint = stax_shape_ctx_checkpoint(g->shape);
  status = stax_shape_infer_node(g, id);
  bool agrees = status == STAX_OK;
  for (int32_t k = 0; agrees && k < node->output_count; k++) {
    const stax_value_t* now = &g->values[node->outputs[k]];
    const stax_value_t* was = &saved_values[k];
    if (now->dtype != was->dtype || now->rank != was->rank || now->constant) agrees = false;
    for (int32_t d = 0; agrees && d < now->rank; d++)
      if (now->dims[d] != was->dims[d] &&
          !stax_dim_known_equal(g->shape, now->dims[d], was->dims[d]))
        agrees = false;
  }
  stax_status_free(status);
  if (!agrees) {
    stax_shape_ctx_rollback(g->shape, checkpoint);
    for (int32_t k = 0; k < node->output_count; k++) {
      stax_value_t* now = &g->values[node->outputs[k]];
      if (now->constant && now->constant != saved_values[k].constant)
        stax_tensor_release(now->constant);
      *now = saved_values[k];
    }
    *node = saved; /* the new attributes were never committed: nothing to release */
    return STAX_OK;
  }
  stax_shape_ctx_commit(g->shape, checkpoint);
  /* Keep the dims the rest of the graph was inferred with (equal, maybe another spelling). */
  for (int32_t k = 0; k < node->output_count; k++) {
    stax_value_t* now = &g->values[node->outputs[k]];
    now->dims = saved_values[k].dims;
  }
  stax_node_attrs_release(&saved);
  stax_node_attrs_commit(node);
  ctx->uses_valid = false;
  *out_done = true;
  return STAX_OK;
}

/* Grows `*array` (elements of `size` bytes, `*capacity` of them) to at least `needed`, zeroing
 * the new part. */
static stax_status_t stax_pass_grow_array(stax_allocator_t a, void** array, int32_t* capacity,
                                          int32_t needed, size_t size) {
  if (needed <= *capacity) return STAX_OK;
  int32_t grown = *capacity * 2 > needed ? *capacity * 2 : needed;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, (size_t)grown, size, &memory));
  memcpy(memory, *array, (size_t)*capacity * size);
  stax_allocator_free(a, *array, (size_t)*capacity * size);
  *array = memory;
  *capacity = grown;
  return STAX_OK;
}

/* Makes the context's arrays cover every value and node the graph now has. */
static stax_status_t stax_pass_grow(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  stax_allocator_t a = g->allocator;
  if (g->value_count > ctx->value_capacity) {
    int32_t capacity = ctx->value_capacity;
    STAX_RETURN_IF_ERROR(stax_pass_grow_array(a, (void**)&ctx->uses, &capacity, g->value_count,
                                              sizeof(int32_t)));
    capacity = ctx->value_capacity;
    STAX_RETURN_IF_ERROR(stax_pass_grow_array(a, (void**)&ctx->pinned, &capacity,
                                              g->value_count, sizeof(bool)));
    ctx->value_capacity = capacity;
  }
  if (g->node_count > ctx->node_capacity)
    STAX_RETURN_IF_ERROR(stax_pass_grow_array(a, (void**)&ctx->dead, &ctx->node_capacity,
                                              g->node_count, sizeof(bool)));
  ctx->uses_valid = false;
  return STAX_OK;
}

bool stax_pass_builder_attrs(const stax_node_t* node, stax_attr_t* out_attrs, int32_t capacity,
                             int32_t* out_count) {
  *out_count = 0;
  if (node->attr_count > capacity) return false;
  for (int32_t k = 0; k < node->attr_count; k++) {
    const stax_node_attr_t* from = &node->attrs[k];
    stax_attr_t* to = &out_attrs[k];
    to->name = from->name;
    to->type = from->type;
    switch (from->type) {
      case STAX_ATTR_INT: to->value.i = from->value.i; break;
      case STAX_ATTR_FLOAT: to->value.f = from->value.f; break;
      case STAX_ATTR_STRING: to->value.s = from->value.s; break;
      case STAX_ATTR_INTS:
        to->value.ints.count = from->value.ints.count;
        to->value.ints.data = from->value.ints.data;
        break;
      default: return false;
    }
  }
  *out_count = node->attr_count;
  return true;
}

/* A name no value of the graph has: base_name, else base_name_1, _2, ... */
static void stax_pass_unique_name(const stax_graph_t* g, const char* base_name, char* out,
                                  size_t size) {
  snprintf(out, size, "%s", base_name);
  for (int32_t k = 1; stax_graph_find_value(g, out) != STAX_VALUE_NONE; k++)
    snprintf(out, size, "%s_%d", base_name, (int)k);
}

stax_status_t stax_pass_add_constant(stax_pass_ctx_t* ctx, const char* base_name,
                                     stax_tensor_t* tensor, stax_value_id_t* out_value) {
  *out_value = STAX_VALUE_NONE;
  char name[256];
  stax_pass_unique_name(ctx->graph, base_name, name, sizeof(name));
  /* Room first, so a failure leaves the graph as it was. */
  stax_graph_t* g = ctx->graph;
  int32_t saved = g->value_count;
  g->value_count++;
  stax_status_t status = stax_pass_grow(ctx);
  g->value_count = saved;
  STAX_RETURN_IF_ERROR(status);
  return stax_graph_add_initializer(g, name, tensor, out_value);
}

stax_status_t stax_pass_insert_node(stax_pass_ctx_t* ctx, stax_node_id_t before,
                                    const stax_node_desc_t* desc, const char* base_name,
                                    stax_value_id_t* out_output) {
  *out_output = STAX_VALUE_NONE;
  stax_graph_t* g = ctx->graph;
  char name[256];
  stax_pass_unique_name(g, base_name, name, sizeof(name));
  const char* output_names[1] = {name};
  stax_node_desc_t one = *desc;
  one.output_count = 1;
  one.output_names = output_names;
  one.name = name;
  int32_t saved_values = g->value_count, saved_nodes = g->node_count;
  g->value_count++;
  g->node_count++;
  stax_status_t status = stax_pass_grow(ctx);
  g->value_count = saved_values;
  g->node_count = saved_nodes;
  STAX_RETURN_IF_ERROR(status);
  stax_value_id_t output = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_add_node(g, &one, &output));
  /* Rotate the new last node down to `before`; the nodes it passes move up by one. */
  stax_node_id_t last = g->node_count - 1;
  stax_node_t added = g->nodes[last];
  memmove(&g->nodes[before + 1], &g->nodes[before], (size_t)(last - before) * sizeof(stax_node_t));
  memmove(&ctx->dead[before + 1], &ctx->dead[before], (size_t)(last - before) * sizeof(bool));
  g->nodes[before] = added;
  ctx->dead[before] = false;
  for (stax_node_id_t n = before; n <= last; n++)
    for (int32_t k = 0; k < g->nodes[n].output_count; k++)
      if (g->nodes[n].outputs[k] != STAX_VALUE_NONE)
        g->values[g->nodes[n].outputs[k]].producer = n;
  ctx->uses_valid = false;
  *out_output = output;
  return STAX_OK;
}

void stax_pass_compact(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  int32_t out = 0;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    stax_node_t* node = &g->nodes[n];
    if (ctx->dead[n]) {
      for (int32_t k = 0; k < node->output_count; k++) {
        if (node->outputs[k] == STAX_VALUE_NONE) continue;
        stax_value_t* value = &g->values[node->outputs[k]];
        value->producer = -1;
        value->producer_output = 0;
        value->flags |= value->constant ? STAX_VALUE_IS_INITIALIZER : STAX_VALUE_IS_DEAD;
      }
      stax_node_attrs_release(node);
      continue;
    }
    if (out != n) g->nodes[out] = *node;
    for (int32_t k = 0; k < g->nodes[out].output_count; k++)
      if (g->nodes[out].outputs[k] != STAX_VALUE_NONE)
        g->values[g->nodes[out].outputs[k]].producer = out;
    out++;
  }
  g->node_count = out;
  memset(ctx->dead, 0, (size_t)ctx->node_capacity * sizeof(bool));
  ctx->uses_valid = false;
}
