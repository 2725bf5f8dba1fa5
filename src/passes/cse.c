/* Common-subexpression elimination, bit for bit: a node with the op, inputs and attributes of
 * an earlier node computes the same values (every stax kernel is deterministic), so its
 * outputs are replaced by the earlier node's. Equal constants (same dtype, dims and bytes, up
 * to 64 KiB each; exporters repeat scalars and shape vectors) are merged first, so nodes that
 * differ only in which copy they read become equal. Nodes with subgraphs are left alone. */
#include <string.h>

#include "base/hash_map.h"
#include "passes/pass.h"

#define STAX_CSE_CONSTANT_MAX_BYTES ((int64_t)64 << 10)

static bool stax_cse_constant_key(const stax_tensor_t* t, uint64_t* out_hash) {
  if (!stax_tensor_is_contiguous(t)) return false;
  int64_t bytes = stax_tensor_element_count(t) * (int64_t)stax_dtype_size(stax_tensor_dtype(t));
  if (bytes > STAX_CSE_CONSTANT_MAX_BYTES) return false;
  uint64_t h = stax_hash_u64((uint64_t)stax_tensor_dtype(t) * 131u + (uint64_t)stax_tensor_rank(t));
  h = stax_hash_bytes(stax_tensor_dims(t), (size_t)stax_tensor_rank(t) * sizeof(int64_t), h);
  *out_hash = stax_hash_bytes(stax_tensor_data(t), (size_t)bytes, h);
  return true;
}

static bool stax_cse_constants_equal(const stax_tensor_t* a, const stax_tensor_t* b) {
  if (stax_tensor_dtype(a) != stax_tensor_dtype(b) || stax_tensor_rank(a) != stax_tensor_rank(b))
    return false;
  if (memcmp(stax_tensor_dims(a), stax_tensor_dims(b),
             (size_t)stax_tensor_rank(a) * sizeof(int64_t)) != 0)
    return false;
  size_t bytes = (size_t)stax_tensor_element_count(a) * stax_dtype_size(stax_tensor_dtype(a));
  return memcmp(stax_tensor_data(a), stax_tensor_data(b), bytes) == 0;
}

static uint64_t stax_cse_attr_hash(const stax_node_attr_t* attr, uint64_t h) {
  h = stax_hash_bytes(attr->name, strlen(attr->name), h);
  h = stax_hash_combine(h, (uint64_t)attr->type);
  switch (attr->type) {
    case STAX_ATTR_INT: return stax_hash_combine(h, (uint64_t)attr->value.i);
    case STAX_ATTR_FLOAT: return stax_hash_bytes(&attr->value.f, sizeof(float), h);
    case STAX_ATTR_STRING: return stax_hash_bytes(attr->value.s, strlen(attr->value.s), h);
    case STAX_ATTR_INTS:
      return stax_hash_bytes(attr->value.ints.data,
                             (size_t)attr->value.ints.count * sizeof(int64_t), h);
    case STAX_ATTR_FLOATS:
      return stax_hash_bytes(attr->value.floats.data,
                             (size_t)attr->value.floats.count * sizeof(float), h);
    default: return stax_hash_combine(h, (uint64_t)attr->value.strings.count);
  }
}

static bool stax_cse_attr_equal(const stax_node_attr_t* a, const stax_node_attr_t* b) {
  if (a->type != b->type || strcmp(a->name, b->name) != 0) return false;
  switch (a->type) {
    case STAX_ATTR_INT: return a->value.i == b->value.i;
    case STAX_ATTR_FLOAT: return memcmp(&a->value.f, &b->value.f, sizeof(float)) == 0;
    case STAX_ATTR_STRING: return strcmp(a->value.s, b->value.s) == 0;
    case STAX_ATTR_INTS:
      return a->value.ints.count == b->value.ints.count &&
             (a->value.ints.count == 0 ||
              memcmp(a->value.ints.data, b->value.ints.data,
                     (size_t)a->value.ints.count * sizeof(int64_t)) == 0);
    case STAX_ATTR_FLOATS:
      return a->value.floats.count == b->value.floats.count &&
             (a->value.floats.count == 0 ||
              memcmp(a->value.floats.data, b->value.floats.data,
                     (size_t)a->value.floats.count * sizeof(float)) == 0);
    case STAX_ATTR_STRINGS:
      if (a->value.strings.count != b->value.strings.count) return false;
      for (int32_t k = 0; k < a->value.strings.count; k++)
        if (strcmp(a->value.strings.data[k], b->value.strings.data[k]) != 0) return false;
      return true;
    case STAX_ATTR_TENSOR:
      return a->value.tensor == b->value.tensor ||
             (a->value.tensor && b->value.tensor &&
              stax_tensor_is_contiguous(a->value.tensor) &&
              stax_tensor_is_contiguous(b->value.tensor) &&
              stax_cse_constants_equal(a->value.tensor, b->value.tensor));
    default:
      return false;
  }
}

static bool stax_cse_has_subgraph(const stax_node_t* node) {
  for (int32_t a = 0; a < node->attr_count; a++)
    if (node->attrs[a].type == STAX_ATTR_GRAPH) return true;
  return false;
}

static uint64_t stax_cse_node_hash(const stax_node_t* node) {
  uint64_t h = stax_hash_u64((uint64_t)node->op + 1);
  h = stax_hash_combine(h, (uint64_t)node->input_count * 977u + (uint64_t)node->output_count);
  for (int32_t i = 0; i < node->input_count; i++)
    h = stax_hash_combine(h, (uint64_t)(uint32_t)node->inputs[i]);
  /* Attributes in any order: combine their hashes commutatively. */
  uint64_t attrs = 0;
  for (int32_t a = 0; a < node->attr_count; a++) attrs += stax_cse_attr_hash(&node->attrs[a], 7);
  return stax_hash_combine(h, attrs);
}

static bool stax_cse_nodes_equal(const stax_node_t* a, const stax_node_t* b) {
  if (a->op != b->op || a->input_count != b->input_count ||
      a->output_count != b->output_count || a->attr_count != b->attr_count)
    return false;
  for (int32_t i = 0; i < a->input_count; i++)
    if (a->inputs[i] != b->inputs[i]) return false;
  for (int32_t k = 0; k < a->output_count; k++)
    if ((a->outputs[k] == STAX_VALUE_NONE) != (b->outputs[k] == STAX_VALUE_NONE)) return false;
  for (int32_t x = 0; x < a->attr_count; x++) {
    const stax_node_attr_t* match = stax_node_attr_find(b, a->attrs[x].name);
    if (!match || !stax_cse_attr_equal(&a->attrs[x], match)) return false;
  }
  return true;
}

static stax_status_t stax_cse_constants(stax_pass_ctx_t* ctx, stax_hash_map_t* seen) {
  stax_graph_t* g = ctx->graph;
  for (stax_value_id_t v = 0; v < g->value_count; v++) {
    const stax_value_t* value = &g->values[v];
    if (!value->constant || (value->flags & (STAX_VALUE_IS_INPUT | STAX_VALUE_IS_CAPTURE)))
      continue;
    if (value->producer >= 0 && !ctx->dead[value->producer]) continue; /* not folded yet */
    if (!ctx->uses_valid) STAX_RETURN_IF_ERROR(stax_pass_refresh_uses(ctx));
    if (ctx->uses[v] == 0) continue;
    uint64_t hash = 0;
    if (!stax_cse_constant_key(value->constant, &hash)) continue;
    uintptr_t earlier = 0;
    if (!stax_hash_map_get_u64(seen, hash, &earlier)) {
      STAX_RETURN_IF_ERROR(stax_hash_map_put_u64(seen, hash, (uintptr_t)v));
      continue;
    }
    const stax_value_t* first = &g->values[earlier];
    if (!stax_cse_constants_equal(first->constant, value->constant)) continue;
    if (stax_pass_replace_value(ctx, v, (stax_value_id_t)earlier))
      stax_pass_count(ctx, "equal constants merged");
  }
  return STAX_OK;
}

static stax_status_t stax_cse_nodes(stax_pass_ctx_t* ctx, stax_hash_map_t* seen) {
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    if (ctx->dead[n]) continue;
    const stax_node_t* node = &g->nodes[n];
    if (node->output_count < 1 || stax_cse_has_subgraph(node)) continue;
    uint64_t hash = stax_cse_node_hash(node);
    uintptr_t earlier = 0;
    if (!stax_hash_map_get_u64(seen, hash, &earlier) || ctx->dead[earlier]) {
      STAX_RETURN_IF_ERROR(stax_hash_map_put_u64(seen, hash, (uintptr_t)n));
      continue;
    }
    const stax_node_t* first = &g->nodes[earlier];
    if (!stax_cse_nodes_equal(first, node)) continue;
    bool replaced = true;
    for (int32_t k = 0; k < node->output_count; k++) {
      if (node->outputs[k] == STAX_VALUE_NONE) continue;
      if (!ctx->uses_valid) STAX_RETURN_IF_ERROR(stax_pass_refresh_uses(ctx));
      if (ctx->pinned[node->outputs[k]] ||
          !stax_pass_same_type(ctx, node->outputs[k], first->outputs[k]))
        replaced = false;
    }
    if (!replaced) continue;
    for (int32_t k = 0; k < node->output_count; k++)
      if (node->outputs[k] != STAX_VALUE_NONE)
        (void)stax_pass_replace_value(ctx, node->outputs[k], first->outputs[k]);
    stax_pass_count(ctx, "equal nodes merged");
  }
  return STAX_OK;
}

stax_status_t stax_pass_run_cse(stax_pass_ctx_t* ctx) {
  stax_hash_map_t* seen = NULL;
  STAX_RETURN_IF_ERROR(stax_hash_map_create(ctx->graph->allocator, STAX_HASH_KEY_U64, &seen));
  stax_status_t status = stax_cse_constants(ctx, seen);
  stax_hash_map_destroy(seen);
  seen = NULL;
  if (status != STAX_OK) return status;
  STAX_RETURN_IF_ERROR(stax_hash_map_create(ctx->graph->allocator, STAX_HASH_KEY_U64, &seen));
  status = stax_cse_nodes(ctx, seen);
  stax_hash_map_destroy(seen);
  return status;
}
