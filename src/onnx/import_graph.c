/* One GraphProto -> one stax graph (the model's graph or an If/Loop subgraph): the name table
 * with captures from enclosing graphs, initializers, typed inputs, node order (ONNX requires
 * topological order; out-of-order files are sorted, real cycles are errors naming the nodes),
 * nodes, value_info and output declarations cross-checked against inference. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ---- scopes ------------------------------------------------------------------------------ */

stax_status_t stax_onnx_scope_bind(stax_onnx_scope_t* scope, const char* name,
                                   stax_value_id_t value) {
  return stax_hash_map_put_string(scope->values, name, (uintptr_t)value);
}

stax_status_t stax_onnx_scope_resolve(stax_onnx_scope_t* scope, const char* name,
                                      stax_value_id_t* out_value) {
  *out_value = STAX_VALUE_NONE;
  uintptr_t found = 0;
  if (stax_hash_map_get_string(scope->values, name, &found)) {
    *out_value = (stax_value_id_t)found;
    return STAX_OK;
  }
  /* A name this graph defines but has not bound yet is a use before definition, not a
   * reference to an enclosing graph (ONNX names are SSA across nesting). */
  if (scope->parent == NULL || stax_hash_map_get_string(scope->defined, name, &found)) {
    return STAX_OK;
  }
  stax_value_id_t outer = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_onnx_scope_resolve(scope->parent, name, &outer));
  if (outer == STAX_VALUE_NONE) return STAX_OK;
  stax_value_id_t local = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_capture(scope->graph, outer, &local), "%s", scope->what);
  STAX_RETURN_IF_ERROR(stax_onnx_scope_bind(scope, name, local));
  *out_value = local;
  return STAX_OK;
}

static bool stax_onnx_name_taken(const stax_onnx_scope_t* scope, const char* name) {
  if (stax_graph_find_value(scope->graph, name) != STAX_VALUE_NONE) return true;
  uintptr_t found = 0;
  for (const stax_onnx_scope_t* s = scope; s != NULL; s = s->parent) {
    if (stax_hash_map_get_string(s->defined, name, &found)) return true;
  }
  return false;
}

stax_status_t stax_onnx_scope_new_name(stax_onnx_scope_t* scope, const char* base,
                                       const char* suffix, const char** out_name) {
  *out_name = NULL;
  size_t length = strlen(base) + strlen(suffix) + 24;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&scope->importer->arena, length, 1, &memory));
  char* name = memory;
  snprintf(name, length, "%s/%s", base, suffix);
  for (int64_t attempt = 1; stax_onnx_name_taken(scope, name); attempt++) {
    snprintf(name, length, "%s/%s_%lld", base, suffix, (long long)attempt);
  }
  *out_name = name;
  return STAX_OK;
}

stax_status_t stax_onnx_scope_add_constant(stax_onnx_scope_t* scope, const char* base,
                                           const char* suffix, stax_tensor_t* tensor,
                                           stax_value_id_t* out_value) {
  *out_value = STAX_VALUE_NONE;
  const char* name = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_scope_new_name(scope, base, suffix, &name));
  return stax_graph_add_initializer(scope->graph, name, tensor, out_value);
}

static void stax_onnx_scope_deinit(stax_onnx_scope_t* scope) {
  stax_hash_map_destroy(scope->values);
  stax_hash_map_destroy(scope->defined);
  stax_hash_map_destroy(scope->value_info);
}

/* "Add node 'name'" or "Add node #3" for unnamed nodes. */
static void stax_onnx_node_label(const Onnx__NodeProto* node, int32_t index, char* buf,
                                 size_t size) {
  const char* op_type = node->op_type ? node->op_type : "(no op_type)";
  if (node->name && node->name[0]) {
    snprintf(buf, size, "%s node '%s'", op_type, node->name);
  } else {
    snprintf(buf, size, "%s node #%d", op_type, index);
  }
}

/* ---- names the graph defines --------------------------------------------------------------- */

/* Kinds recorded in scope->defined: what defines each name (node outputs store 2 + index). */
enum { STAX_ONNX_DEFINED_INITIALIZER = 0, STAX_ONNX_DEFINED_INPUT = 1, STAX_ONNX_DEFINED_NODE = 2 };

static stax_status_t stax_onnx_collect_definitions(stax_onnx_scope_t* scope) {
  const Onnx__GraphProto* proto = scope->proto;
  for (size_t i = 0; i < proto->n_initializer; i++) {
    const Onnx__TensorProto* initializer = proto->initializer[i];
    const char* name = initializer ? initializer->name : NULL;
    if (name == NULL || name[0] == '\0') {
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s: initializer %zu has no name",
                              scope->what, i);
    }
    uintptr_t found = 0;
    if (stax_hash_map_get_string(scope->defined, name, &found)) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s: two initializers are named '%s'",
                              scope->what, name);
    }
    STAX_RETURN_IF_ERROR(
        stax_hash_map_put_string(scope->defined, name, STAX_ONNX_DEFINED_INITIALIZER));
  }
  for (size_t i = 0; i < proto->n_input; i++) {
    const char* name = proto->input[i] ? proto->input[i]->name : NULL;
    if (name == NULL || name[0] == '\0') {
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s: input %zu has no name", scope->what, i);
    }
    uintptr_t found = 0;
    if (stax_hash_map_get_string(scope->defined, name, &found)) {
      /* An input that is also an initializer is a constant with a default (IR >= 4). */
      if (found == STAX_ONNX_DEFINED_INITIALIZER) continue;
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s: two inputs are named '%s'",
                              scope->what, name);
    }
    STAX_RETURN_IF_ERROR(stax_hash_map_put_string(scope->defined, name, STAX_ONNX_DEFINED_INPUT));
  }
  for (size_t n = 0; n < proto->n_node; n++) {
    const Onnx__NodeProto* node = proto->node[n];
    if (node == NULL) continue;
    for (size_t o = 0; o < node->n_output; o++) {
      const char* name = node->output[o];
      if (name == NULL || name[0] == '\0') continue;
      uintptr_t found = 0;
      if (stax_hash_map_get_string(scope->defined, name, &found)) {
        char label[256];
        stax_onnx_node_label(node, (int32_t)n, label, sizeof(label));
        if (found >= STAX_ONNX_DEFINED_NODE) {
          char other[256];
          int32_t other_index = (int32_t)(found - STAX_ONNX_DEFINED_NODE);
          stax_onnx_node_label(proto->node[other_index], other_index, other, sizeof(other));
          return stax_status_make(STAX_INVALID_ARGUMENT,
                                  "%s: value '%s' is produced by both %s and %s", scope->what,
                                  name, other, label);
        }
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s: %s output '%s' has the name of a graph %s", scope->what,
                                label, name,
                                found == STAX_ONNX_DEFINED_INPUT ? "input" : "initializer");
      }
      STAX_RETURN_IF_ERROR(
          stax_hash_map_put_string(scope->defined, name, STAX_ONNX_DEFINED_NODE + n));
    }
  }
  for (size_t i = 0; i < proto->n_value_info; i++) {
    const Onnx__ValueInfoProto* info = proto->value_info[i];
    if (info == NULL || info->name == NULL) continue;
    uintptr_t found = 0;
    if (stax_hash_map_get_string(scope->value_info, info->name, &found)) continue;
    STAX_RETURN_IF_ERROR(stax_hash_map_put_string(scope->value_info, info->name, (uintptr_t)info));
  }
  return STAX_OK;
}

/* ---- node order ---------------------------------------------------------------------------- */

typedef struct stax_onnx_edges_t {
  int32_t count, capacity;
  int32_t* pairs; /* producer, consumer, producer, consumer, ... */
} stax_onnx_edges_t;

static stax_status_t stax_onnx_add_edge(stax_onnx_scope_t* scope, stax_onnx_edges_t* edges,
                                        const char* name, int32_t consumer) {
  if (name == NULL || name[0] == '\0') return STAX_OK;
  uintptr_t found = 0;
  if (!stax_hash_map_get_string(scope->defined, name, &found) || found < STAX_ONNX_DEFINED_NODE) {
    return STAX_OK;
  }
  if (edges->count == edges->capacity) {
    int32_t capacity = edges->capacity ? edges->capacity * 2 : 64;
    void* memory = NULL;
    STAX_RETURN_IF_ERROR(stax_arena_alloc(&scope->importer->arena,
                                          (size_t)capacity * 2 * sizeof(int32_t), 0, &memory));
    if (edges->count) memcpy(memory, edges->pairs, (size_t)edges->count * 2 * sizeof(int32_t));
    edges->pairs = memory;
    edges->capacity = capacity;
  }
  edges->pairs[2 * edges->count] = (int32_t)(found - STAX_ONNX_DEFINED_NODE);
  edges->pairs[2 * edges->count + 1] = consumer;
  edges->count++;
  return STAX_OK;
}

/* Names a subgraph uses from outside are implicit inputs of the node that holds it. Names
 * are SSA across nesting, so any use of a name this graph's nodes produce refers to it. */
static stax_status_t stax_onnx_subgraph_edges(stax_onnx_scope_t* scope, stax_onnx_edges_t* edges,
                                              const Onnx__GraphProto* subgraph,
                                              int32_t consumer) {
  if (subgraph == NULL) return STAX_OK;
  for (size_t n = 0; n < subgraph->n_node; n++) {
    const Onnx__NodeProto* node = subgraph->node[n];
    if (node == NULL) continue;
    for (size_t i = 0; i < node->n_input; i++) {
      STAX_RETURN_IF_ERROR(stax_onnx_add_edge(scope, edges, node->input[i], consumer));
    }
    for (size_t a = 0; a < node->n_attribute; a++) {
      const Onnx__AttributeProto* attribute = node->attribute[a];
      if (attribute == NULL) continue;
      STAX_RETURN_IF_ERROR(stax_onnx_subgraph_edges(scope, edges, attribute->g, consumer));
    }
  }
  for (size_t o = 0; o < subgraph->n_output; o++) {
    if (subgraph->output[o]) {
      STAX_RETURN_IF_ERROR(stax_onnx_add_edge(scope, edges, subgraph->output[o]->name, consumer));
    }
  }
  return STAX_OK;
}

/* A binary min-heap of node indices, so a sorted order stays as close to the file's as
 * possible. */
static void stax_onnx_heap_push(int32_t* heap, int32_t* size, int32_t value) {
  int32_t i = (*size)++;
  heap[i] = value;
  while (i > 0 && heap[(i - 1) / 2] > heap[i]) {
    int32_t parent = (i - 1) / 2;
    int32_t swap = heap[parent];
    heap[parent] = heap[i];
    heap[i] = swap;
    i = parent;
  }
}

static int32_t stax_onnx_heap_pop(int32_t* heap, int32_t* size) {
  int32_t top = heap[0];
  heap[0] = heap[--(*size)];
  int32_t i = 0;
  for (;;) {
    int32_t left = 2 * i + 1, right = left + 1, smallest = i;
    if (left < *size && heap[left] < heap[smallest]) smallest = left;
    if (right < *size && heap[right] < heap[smallest]) smallest = right;
    if (smallest == i) break;
    int32_t swap = heap[smallest];
    heap[smallest] = heap[i];
    heap[i] = swap;
    i = smallest;
  }
  return top;
}

/* Some nodes could not be ordered: walk back through unfinished producers until a node
 * repeats, and name that cycle. */
static stax_status_t stax_onnx_cycle_error(stax_onnx_scope_t* scope, int32_t node_count,
                                           const int32_t* indegree, const int32_t* pred_start,
                                           const int32_t* preds, int32_t* scratch) {
  int32_t* position = scratch;
  int32_t* path = scratch + node_count;
  for (int32_t n = 0; n < node_count; n++) position[n] = -1;
  int32_t current = 0;
  while (current < node_count && indegree[current] == 0) current++;
  int32_t length = 0;
  while (current < node_count && position[current] < 0) {
    position[current] = length;
    path[length++] = current;
    int32_t next = node_count;
    for (int32_t e = pred_start[current]; e < pred_start[current + 1]; e++) {
      if (indegree[preds[e]] > 0) {
        next = preds[e];
        break;
      }
    }
    current = next;
  }
  char text[1024];
  size_t used = 0;
  text[0] = '\0';
  if (current < node_count) {
    /* Each path entry's producer is the next entry, and path[first] produces the last one:
     * the data flows path[first] -> path[length - 1] -> ... -> path[first]. */
    int32_t first = position[current];
    char label[256];
    stax_onnx_node_label(scope->proto->node[current], current, label, sizeof(label));
    used += (size_t)snprintf(text, sizeof(text), "%s", label);
    for (int32_t k = length - 1; k >= first && used < sizeof(text); k--) {
      stax_onnx_node_label(scope->proto->node[path[k]], path[k], label, sizeof(label));
      used += (size_t)snprintf(text + used, sizeof(text) - used, " -> %s", label);
    }
  }
  return stax_status_make(STAX_INVALID_ARGUMENT, "%s: the nodes form a cycle: %s", scope->what,
                          text);
}

/* The order to add nodes in: the file's when it is topological, else a stable sort. */
static stax_status_t stax_onnx_node_order(stax_onnx_scope_t* scope, int32_t** out_order) {
  *out_order = NULL;
  const Onnx__GraphProto* proto = scope->proto;
  stax_arena_t* arena = &scope->importer->arena;
  int32_t node_count = (int32_t)proto->n_node;
  stax_onnx_edges_t edges = {0, 0, NULL};
  for (int32_t n = 0; n < node_count; n++) {
    const Onnx__NodeProto* node = proto->node[n];
    if (node == NULL) continue;
    for (size_t i = 0; i < node->n_input; i++) {
      STAX_RETURN_IF_ERROR(stax_onnx_add_edge(scope, &edges, node->input[i], n));
    }
    for (size_t a = 0; a < node->n_attribute; a++) {
      const Onnx__AttributeProto* attribute = node->attribute[a];
      if (attribute) STAX_RETURN_IF_ERROR(stax_onnx_subgraph_edges(scope, &edges, attribute->g, n));
    }
  }
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(
      stax_arena_alloc(arena, ((size_t)node_count + 1) * sizeof(int32_t), 0, &memory));
  int32_t* order = memory;
  bool sorted = true;
  for (int32_t e = 0; e < edges.count; e++) {
    if (edges.pairs[2 * e] >= edges.pairs[2 * e + 1]) sorted = false;
  }
  if (sorted) {
    for (int32_t n = 0; n < node_count; n++) order[n] = n;
    *out_order = order;
    return STAX_OK;
  }
  STAX_LOG(ONNX, "%s: nodes are not in topological order; sorting", scope->what);

  /* Kahn's algorithm over CSR successor and predecessor lists. */
  size_t ints = 5 * ((size_t)node_count + 1) + 2 * (size_t)edges.count + 2 * (size_t)node_count;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(arena, ints * sizeof(int32_t), 0, &memory));
  int32_t* succ_start = memory;
  int32_t* pred_start = succ_start + node_count + 1;
  int32_t* indegree = pred_start + node_count + 1;
  int32_t* heap = indegree + node_count + 1;
  int32_t* cursor = heap + node_count + 1;
  int32_t* succs = cursor + node_count + 1;
  int32_t* preds = succs + edges.count;
  int32_t* scratch = preds + edges.count;
  memset(succ_start, 0, 2 * ((size_t)node_count + 1) * sizeof(int32_t));
  for (int32_t e = 0; e < edges.count; e++) {
    succ_start[edges.pairs[2 * e] + 1]++;
    pred_start[edges.pairs[2 * e + 1] + 1]++;
  }
  for (int32_t n = 0; n < node_count; n++) {
    indegree[n] = pred_start[n + 1];
    succ_start[n + 1] += succ_start[n];
    pred_start[n + 1] += pred_start[n];
  }
  for (int32_t n = 0; n <= node_count; n++) cursor[n] = succ_start[n];
  for (int32_t e = 0; e < edges.count; e++) succs[cursor[edges.pairs[2 * e]]++] = edges.pairs[2 * e + 1];
  for (int32_t n = 0; n <= node_count; n++) cursor[n] = pred_start[n];
  for (int32_t e = 0; e < edges.count; e++) preds[cursor[edges.pairs[2 * e + 1]]++] = edges.pairs[2 * e];

  int32_t heap_size = 0, emitted = 0;
  for (int32_t n = 0; n < node_count; n++) {
    if (indegree[n] == 0) stax_onnx_heap_push(heap, &heap_size, n);
  }
  while (heap_size > 0) {
    int32_t n = stax_onnx_heap_pop(heap, &heap_size);
    order[emitted++] = n;
    for (int32_t e = succ_start[n]; e < succ_start[n + 1]; e++) {
      if (--indegree[succs[e]] == 0) stax_onnx_heap_push(heap, &heap_size, succs[e]);
    }
  }
  if (emitted < node_count) {
    return stax_onnx_cycle_error(scope, node_count, indegree, pred_start, preds, scratch);
  }
  *out_order = order;
  return STAX_OK;
}

/* ---- declarations ---------------------------------------------------------------------- */

/* Cross-checks a declared type (value_info, graph output) with the inferred one. Unknown
 * declared parts take the inferred ones, so they add nothing and contradict nothing. */
static stax_status_t stax_onnx_declare(stax_onnx_scope_t* scope, stax_value_id_t value,
                                       const Onnx__ValueInfoProto* info, const char* what) {
  stax_graph_t* graph = scope->graph;
  {
    bool is_sequence = false;
    stax_dtype_t elem_dtype = STAX_DTYPE_INVALID;
    int32_t elem_rank = -1;
    const stax_dim_t* elem_dims[STAX_MAX_RANK];
    STAX_RETURN_IF_ERROR(stax_onnx_sequence_type(stax_graph_shape_ctx(graph), info, what,
                                                 &is_sequence, &elem_dtype, &elem_rank,
                                                 elem_dims));
    if (is_sequence || stax_value_is_sequence(graph, value)) {
      /* A declared sequence type adds nothing the inference lacks; it must only agree. */
      if (!is_sequence) {
        const Onnx__TypeProto* type = info ? info->type : NULL;
        if (type == NULL || type->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return STAX_OK;
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s: declared as a tensor, but it is a sequence of %s tensors",
                                what, stax_dtype_name(stax_value_dtype(graph, value)));
      }
      if (!stax_value_is_sequence(graph, value))
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s: declared as a sequence, but it is a %s tensor", what,
                                stax_dtype_name(stax_value_dtype(graph, value)));
      if (elem_dtype != STAX_DTYPE_INVALID && elem_dtype != stax_value_dtype(graph, value))
        return stax_status_make(STAX_DTYPE_MISMATCH,
                                "%s: declared a sequence of %s tensors, inferred %s", what,
                                stax_dtype_name(elem_dtype),
                                stax_dtype_name(stax_value_dtype(graph, value)));
      return STAX_OK;
    }
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  bool unknown[STAX_MAX_RANK];
  stax_dtype_t dtype = STAX_DTYPE_INVALID;
  int32_t rank = -1;
  scope->importer->reading_declaration = true;
  stax_status_t status = stax_onnx_value_type(scope->importer, stax_graph_shape_ctx(graph), info,
                                              what, &dtype, &rank, dims, unknown);
  scope->importer->reading_declaration = false;
  STAX_RETURN_IF_ERROR(status);
  stax_dtype_t inferred_dtype = stax_value_dtype(graph, value);
  int32_t inferred_rank = stax_value_rank(graph, value);
  if (dtype == STAX_DTYPE_INVALID) dtype = inferred_dtype;
  if (dtype != inferred_dtype) {
    return stax_status_make(STAX_DTYPE_MISMATCH, "%s: declared dtype %s, inferred dtype %s",
                            what, stax_dtype_name(dtype), stax_dtype_name(inferred_dtype));
  }
  if (rank < 0) return STAX_OK;
  if (rank != inferred_rank) {
    return stax_status_make(STAX_SHAPE_MISMATCH, "%s: declared rank %d, inferred rank %d", what,
                            rank, inferred_rank);
  }
  const stax_dim_t* const* inferred = stax_value_dims(graph, value);
  for (int32_t d = 0; d < rank; d++) {
    /* A broadcast dim (bcast(N, M), docs/ir.md) is left as inferred: exporters name output
     * dims freely ("N", "unk__3"), and an equality with a broadcast falls back to N == M,
     * which would reject the very calls that broadcast (ONNX Runtime does not check these
     * declarations either). */
    if (unknown[d] || stax_dim_has_bcast(inferred[d])) dims[d] = inferred[d];
  }
  STAX_RETURN_IF_ERROR(stax_graph_declare_shape(graph, value, dtype, rank, dims), "%s", what);
  return STAX_OK;
}

static stax_status_t stax_onnx_declare_node_outputs(stax_onnx_scope_t* scope,
                                                    const Onnx__NodeProto* node) {
  for (size_t o = 0; o < node->n_output; o++) {
    const char* name = node->output[o];
    uintptr_t info = 0;
    if (name == NULL || name[0] == '\0' ||
        !stax_hash_map_get_string(scope->value_info, name, &info)) {
      continue;
    }
    stax_value_id_t value = stax_graph_find_value(scope->graph, name);
    if (value == STAX_VALUE_NONE) continue;
    char what[512];
    snprintf(what, sizeof(what), "%s: value_info of '%s'", scope->what, name);
    STAX_RETURN_IF_ERROR(
        stax_onnx_declare(scope, value, (const Onnx__ValueInfoProto*)info, what));
  }
  return STAX_OK;
}

/* ---- inputs, initializers, outputs ------------------------------------------------------- */

static stax_status_t stax_onnx_add_initializers(stax_onnx_scope_t* scope) {
  stax_onnx_importer_t* importer = scope->importer;
  const Onnx__GraphProto* proto = scope->proto;
  if (proto->n_sparse_initializer > 0) {
    return stax_status_make(STAX_UNIMPLEMENTED,
                            "%s has %zu sparse initializers, which stax does not support",
                            scope->what, proto->n_sparse_initializer);
  }
  for (size_t i = 0; i < proto->n_initializer; i++) {
    const Onnx__TensorProto* initializer = proto->initializer[i];
    char what[512];
    snprintf(what, sizeof(what), "initializer '%s'", initializer->name);
    stax_tensor_t* tensor = NULL;
    STAX_RETURN_IF_ERROR(stax_onnx_tensor_from_proto(importer->allocator, initializer, what,
                                                     importer->external_directory, &tensor));
    stax_value_id_t value = STAX_VALUE_NONE;
    stax_status_t status = stax_graph_add_initializer(scope->graph, initializer->name, tensor,
                                                      &value);
    stax_tensor_release(tensor);
    STAX_RETURN_IF_ERROR(status);
    STAX_RETURN_IF_ERROR(stax_onnx_scope_bind(scope, initializer->name, value));
  }
  return STAX_OK;
}

static stax_status_t stax_onnx_add_inputs(stax_onnx_scope_t* scope, int32_t hint_count,
                                          const stax_onnx_input_hint_t* hints) {
  stax_onnx_importer_t* importer = scope->importer;
  const Onnx__GraphProto* proto = scope->proto;
  stax_shape_ctx_t* shape = stax_graph_shape_ctx(scope->graph);
  for (size_t i = 0; i < proto->n_input; i++) {
    const Onnx__ValueInfoProto* info = proto->input[i];
    uintptr_t kind = 0;
    stax_hash_map_get_string(scope->defined, info->name, &kind);
    if (kind == STAX_ONNX_DEFINED_INITIALIZER) continue;
    char what[512];
    snprintf(what, sizeof(what), "%s input '%s'", scope->what, info->name);
    const stax_dim_t* dims[STAX_MAX_RANK];
    stax_dtype_t dtype = STAX_DTYPE_INVALID;
    int32_t rank = -1;
    bool is_sequence = false;
    STAX_RETURN_IF_ERROR(
        stax_onnx_sequence_type(shape, info, what, &is_sequence, &dtype, &rank, dims));
    const Onnx__TypeProto* type = info->type;
    bool untyped = type == NULL || type->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET;
    if (!is_sequence && untyped && (int32_t)i < hint_count && hints[i].is_sequence) {
      is_sequence = true;
      rank = -1;
    }
    if (is_sequence) {
      if (dtype == STAX_DTYPE_INVALID && (int32_t)i < hint_count) dtype = hints[i].dtype;
      if (dtype == STAX_DTYPE_INVALID)
        return stax_status_make(STAX_UNIMPLEMENTED,
                                "%s is a sequence without an element type; stax needs the "
                                "dtype of every input",
                                what);
      stax_value_id_t value = STAX_VALUE_NONE;
      STAX_RETURN_IF_ERROR(
          stax_graph_add_sequence_input(scope->graph, info->name, dtype, rank, dims, &value));
      STAX_RETURN_IF_ERROR(stax_onnx_scope_bind(scope, info->name, value));
      continue;
    }
    STAX_RETURN_IF_ERROR(
        stax_onnx_value_type(importer, shape, info, what, &dtype, &rank, dims, NULL));
    if ((int32_t)i < hint_count) {
      const stax_onnx_input_hint_t* hint = &hints[i];
      if (dtype == STAX_DTYPE_INVALID) dtype = hint->dtype;
      if (rank < 0 && hint->rank >= 0) {
        rank = hint->rank;
        for (int32_t d = 0; d < rank; d++) {
          char origin[600];
          snprintf(origin, sizeof(origin), "%s dim %d", what, d);
          STAX_RETURN_IF_ERROR(stax_onnx_fresh_dim(importer, shape, origin, &dims[d]));
        }
      }
    }
    if (dtype == STAX_DTYPE_INVALID || rank < 0) {
      return stax_status_make(STAX_UNIMPLEMENTED,
                              "%s has no %s; stax needs the dtype and rank of every input",
                              what, dtype == STAX_DTYPE_INVALID ? "tensor type" : "shape");
    }
    stax_value_id_t value = STAX_VALUE_NONE;
    STAX_RETURN_IF_ERROR(stax_graph_add_input(scope->graph, info->name, dtype, rank, dims, &value));
    STAX_RETURN_IF_ERROR(stax_onnx_scope_bind(scope, info->name, value));
  }
  return STAX_OK;
}

static bool stax_onnx_is_graph_output(const stax_graph_t* graph, stax_value_id_t value) {
  for (int32_t i = 0; i < stax_graph_output_count(graph); i++) {
    if (stax_graph_output(graph, i) == value) return true;
  }
  return false;
}

static stax_status_t stax_onnx_add_outputs(stax_onnx_scope_t* scope) {
  const Onnx__GraphProto* proto = scope->proto;
  for (size_t i = 0; i < proto->n_output; i++) {
    const Onnx__ValueInfoProto* info = proto->output[i];
    const char* name = info ? info->name : NULL;
    if (name == NULL || name[0] == '\0') {
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s: output %zu has no name", scope->what,
                              i);
    }
    stax_value_id_t value = STAX_VALUE_NONE;
    STAX_RETURN_IF_ERROR(stax_onnx_scope_resolve(scope, name, &value));
    if (value == STAX_VALUE_NONE) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s: output '%s' is not produced by any node, initializer or "
                              "input",
                              scope->what, name);
    }
    if (stax_onnx_is_graph_output(scope->graph, value)) {
      /* The same value listed twice: the second listing gets a value of its own. */
      const char* copy_name = NULL;
      STAX_RETURN_IF_ERROR(stax_onnx_scope_new_name(scope, name, "output_copy", &copy_name));
      stax_node_desc_t desc = {.op = STAX_OP_Identity, .name = copy_name, .input_count = 1,
                               .inputs = &value, .output_count = 1,
                               .output_names = &copy_name};
      stax_value_id_t copy = STAX_VALUE_NONE;
      STAX_RETURN_IF_ERROR(stax_graph_add_node(scope->graph, &desc, &copy));
      value = copy;
    }
    STAX_RETURN_IF_ERROR(stax_graph_add_output(scope->graph, value));
    char what[512];
    snprintf(what, sizeof(what), "%s output '%s'", scope->what, name);
    STAX_RETURN_IF_ERROR(stax_onnx_declare(scope, value, info, what));
  }
  return STAX_OK;
}

/* ---- the graph ----------------------------------------------------------------------------- */

stax_status_t stax_onnx_import_graph(stax_onnx_importer_t* importer, stax_onnx_scope_t* parent,
                                     const Onnx__GraphProto* proto, const char* what,
                                     stax_graph_t* graph, int32_t hint_count,
                                     const stax_onnx_input_hint_t* hints) {
  stax_onnx_scope_t scope;
  memset(&scope, 0, sizeof(scope));
  scope.importer = importer;
  scope.graph = graph;
  scope.proto = proto;
  scope.parent = parent;
  scope.depth = parent ? parent->depth + 1 : 0;
  scope.what = what;
  stax_status_t status = STAX_OK;
  if (scope.depth > STAX_ONNX_MAX_NESTING) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s: subgraphs nest deeper than %d", what,
                            STAX_ONNX_MAX_NESTING);
  }
  if (proto->n_node > (size_t)INT32_MAX / 8 || proto->n_input > (size_t)INT32_MAX / 8) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s has too many nodes or inputs", what);
  }
  STAX_GOTO_IF_ERROR(status,
                     stax_hash_map_create(importer->allocator, STAX_HASH_KEY_STRING,
                                          &scope.values),
                     cleanup);
  STAX_GOTO_IF_ERROR(status,
                     stax_hash_map_create(importer->allocator, STAX_HASH_KEY_STRING,
                                          &scope.defined),
                     cleanup);
  STAX_GOTO_IF_ERROR(status,
                     stax_hash_map_create(importer->allocator, STAX_HASH_KEY_STRING,
                                          &scope.value_info),
                     cleanup);
  for (size_t n = 0; n < proto->n_node; n++) {
    if (proto->node[n] == NULL) {
      status = stax_status_make(STAX_INVALID_ARGUMENT, "%s: node %zu is empty", what, n);
      goto cleanup;
    }
  }
  STAX_GOTO_IF_ERROR(status, stax_onnx_collect_definitions(&scope), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_onnx_add_initializers(&scope), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_onnx_add_inputs(&scope, hint_count, hints), cleanup);
  int32_t* order = NULL;
  STAX_GOTO_IF_ERROR(status, stax_onnx_node_order(&scope, &order), cleanup);
  for (size_t k = 0; k < proto->n_node; k++) {
    int32_t n = order[k];
    STAX_GOTO_IF_ERROR(status, stax_onnx_convert_node(&scope, proto->node[n], n), cleanup);
    STAX_GOTO_IF_ERROR(status, stax_onnx_declare_node_outputs(&scope, proto->node[n]), cleanup);
  }
  STAX_GOTO_IF_ERROR(status, stax_onnx_add_outputs(&scope), cleanup);

cleanup:
  stax_onnx_scope_deinit(&scope);
  return status;
}
