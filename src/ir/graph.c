/* The graph IR builder: creating and destroying graphs and subgraphs, graph inputs,
 * initializers, captures, nodes (with arity and attribute checks, then shape inference, and a
 * complete rollback when any step fails), outputs, declared shapes, and the accessors. */
#include <stdio.h>
#include <string.h>

#include "ir/graph_internal.h"


/* Initializers this small with integer contents are recorded as constant dims, so a Reshape
 * whose shape comes from an initializer infers exactly. */
#define STAX_CONTENT_MAX_ELEMENTS 64

/* ---- small helpers ----------------------------------------------------------------------- */

/* Grows *array (elements of elem_size) so it holds at least `needed` elements. On failure the
 * array and capacity are unchanged. */
static stax_status_t stax_graph_reserve(stax_graph_t* graph, void** array, int32_t* capacity,
                                        int32_t needed, size_t elem_size) {
  if (needed <= *capacity) return STAX_OK;
  if (needed < 0 || needed > INT32_MAX / 2) {
    return stax_status_make(STAX_OUT_OF_MEMORY, "graph grows beyond %d entries", INT32_MAX / 2);
  }
  int32_t new_capacity = *capacity ? *capacity : 8;
  while (new_capacity < needed) new_capacity *= 2;
  void* memory = *array;
  STAX_RETURN_IF_ERROR(stax_allocator_realloc(graph->allocator, (size_t)*capacity * elem_size,
                                              (size_t)new_capacity * elem_size, &memory));
  *array = memory;
  *capacity = new_capacity;
  return STAX_OK;
}

static stax_status_t stax_graph_reserve_values(stax_graph_t* graph, int32_t extra) {
  void* array = graph->values;
  stax_status_t status = stax_graph_reserve(graph, &array, &graph->value_capacity,
                                            graph->value_count + extra, sizeof(stax_value_t));
  graph->values = array;
  return status;
}

/* Room for one more id in a graph's input or output list. */
static stax_status_t stax_graph_reserve_id(stax_graph_t* graph, stax_value_id_t** ids,
                                           int32_t* capacity, int32_t count) {
  void* array = *ids;
  stax_status_t status =
      stax_graph_reserve(graph, &array, capacity, count + 1, sizeof(stax_value_id_t));
  *ids = array;
  return status;
}

static bool stax_dtype_valid(stax_dtype_t dtype) {
  return dtype >= 0 && dtype < STAX_DTYPE_COUNT;
}

static bool stax_graph_value_valid(const stax_graph_t* graph, stax_value_id_t value) {
  return graph != NULL && value >= 0 && value < graph->value_count;
}

static bool stax_graph_node_valid(const stax_graph_t* graph, stax_node_id_t node) {
  return graph != NULL && node >= 0 && node < graph->node_count;
}

/* Copies `count` dim pointers into the arena (NULL for count 0). */
static stax_status_t stax_graph_copy_dims(stax_graph_t* graph, int32_t count,
                                          const stax_dim_t* const* dims,
                                          const stax_dim_t*** out_dims) {
  *out_dims = NULL;
  if (count <= 0) return STAX_OK;
  void* copy = NULL;
  STAX_RETURN_IF_ERROR(
      stax_arena_memdup(&graph->arena, dims, (size_t)count * sizeof(dims[0]), &copy));
  *out_dims = copy;
  return STAX_OK;
}

/* A NULL dim usually means a dim constructor failed; its reason is waiting in the shape
 * context. */
static stax_status_t stax_graph_null_dim_error(stax_graph_t* graph, const char* what,
                                               const char* name, int32_t dim) {
  stax_status_t pending = stax_shape_ctx_take_error(graph->shape);
  if (pending != STAX_OK) {
    return stax_status_annotate(pending, "%s '%s' dim %d", what, name, dim);
  }
  return stax_status_make(STAX_INVALID_ARGUMENT, "%s '%s': dim %d is NULL", what, name, dim);
}

static void stax_value_init(stax_value_t* value, const char* name, uint32_t flags) {
  memset(value, 0, sizeof(*value));
  value->name = name;
  value->dtype = STAX_DTYPE_INVALID;
  value->rank = -1;
  value->producer = -1;
  value->producer_output = -1;
  value->flags = flags;
  value->content_count = -1;
  value->outer_value = STAX_VALUE_NONE;
  value->elem_rank = -1;
}

/* Checks that a new graph-level value's name is usable. */
static stax_status_t stax_graph_check_new_name(const stax_graph_t* graph, const char* what,
                                               const char* name) {
  if (name == NULL || name[0] == '\0') {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s needs a non-empty name", what);
  }
  uintptr_t existing = 0;
  if (stax_hash_map_get_string(graph->names, name, &existing)) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s '%s': the graph already has a value named '%s'", what, name,
                            name);
  }
  return STAX_OK;
}

/* Appends a fully prepared value: reserves room, copies the name, registers it. Nothing
 * changes on failure. */
static stax_status_t stax_graph_append_value(stax_graph_t* graph, const stax_value_t* prepared,
                                             stax_value_id_t* out_value) {
  STAX_RETURN_IF_ERROR(stax_graph_reserve_values(graph, 1));
  const char* name = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_strdup(&graph->arena, prepared->name, &name));
  stax_value_id_t id = graph->value_count;
  STAX_RETURN_IF_ERROR(stax_hash_map_put_string(graph->names, name, (uintptr_t)id));
  graph->values[id] = *prepared;
  graph->values[id].name = name;
  graph->value_count++;
  *out_value = id;
  return STAX_OK;
}

/* ---- create / destroy -------------------------------------------------------------------- */

static stax_status_t stax_graph_create_internal(stax_allocator_t allocator,
                                                stax_graph_t* parent,
                                                stax_graph_t** out_graph) {
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(allocator, 1, sizeof(stax_graph_t), &memory));
  stax_graph_t* graph = memory;
  graph->allocator = allocator;
  graph->parent = parent;
  stax_arena_init(&graph->arena, allocator, 0);
  stax_status_t status = STAX_OK;
  if (parent) {
    graph->shape = parent->shape;
  } else {
    STAX_GOTO_IF_ERROR(status, stax_shape_ctx_create(allocator, &graph->shape), cleanup);
  }
  STAX_GOTO_IF_ERROR(status,
                     stax_hash_map_create(allocator, STAX_HASH_KEY_STRING, &graph->names),
                     cleanup);
  *out_graph = graph;
  return STAX_OK;

cleanup:
  stax_graph_destroy(graph);
  return status;
}

stax_status_t stax_graph_create(stax_allocator_t allocator, stax_graph_t** out_graph) {
  if (out_graph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_graph_create: out_graph is NULL");
  }
  *out_graph = NULL;
  return stax_graph_create_internal(allocator, NULL, out_graph);
}

stax_status_t stax_graph_create_subgraph(stax_graph_t* parent, stax_graph_t** out_subgraph) {
  if (out_subgraph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "stax_graph_create_subgraph: out_subgraph is NULL");
  }
  *out_subgraph = NULL;
  if (parent == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "stax_graph_create_subgraph: parent graph is NULL");
  }
  return stax_graph_create_internal(parent->allocator, parent, out_subgraph);
}

void stax_graph_destroy(stax_graph_t* graph) {
  if (graph == NULL) return;
  stax_allocator_t allocator = graph->allocator;
  /* Subgraphs first: they share the shape context this graph may own. */
  for (int32_t n = 0; n < graph->node_count; n++) stax_node_attrs_release(&graph->nodes[n]);
  for (int32_t v = 0; v < graph->value_count; v++) {
    if (graph->values[v].constant) stax_tensor_release(graph->values[v].constant);
  }
  stax_hash_map_destroy(graph->names);
  if (graph->parent == NULL) stax_shape_ctx_destroy(graph->shape);
  stax_allocator_free(allocator, graph->values, (size_t)graph->value_capacity * sizeof(stax_value_t));
  stax_allocator_free(allocator, graph->nodes, (size_t)graph->node_capacity * sizeof(stax_node_t));
  stax_allocator_free(allocator, graph->inputs,
                      (size_t)graph->input_capacity * sizeof(stax_value_id_t));
  stax_allocator_free(allocator, graph->outputs,
                      (size_t)graph->output_capacity * sizeof(stax_value_id_t));
  stax_arena_deinit(&graph->arena);
  stax_allocator_free(allocator, graph, sizeof(stax_graph_t));
}

stax_shape_ctx_t* stax_graph_shape_ctx(stax_graph_t* graph) { return graph ? graph->shape : NULL; }

stax_graph_t* stax_graph_parent(const stax_graph_t* graph) { return graph ? graph->parent : NULL; }

/* ---- inputs, initializers, captures ------------------------------------------------------ */

stax_status_t stax_graph_add_input(stax_graph_t* graph, const char* name, stax_dtype_t dtype,
                                   int32_t rank, const stax_dim_t* const* dims,
                                   stax_value_id_t* out_value) {
  if (out_value) *out_value = STAX_VALUE_NONE;
  if (graph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_graph_add_input: graph is NULL");
  }
  STAX_RETURN_IF_ERROR(stax_graph_check_new_name(graph, "graph input", name));
  if (!stax_dtype_valid(dtype)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "graph input '%s': invalid dtype %d", name,
                            (int)dtype);
  }
  if (rank < 0 || rank > STAX_MAX_RANK) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "graph input '%s': rank %d is outside 0..%d", name, rank,
                            STAX_MAX_RANK);
  }
  if (rank > 0 && dims == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "graph input '%s': rank %d but no dims given", name, rank);
  }
  for (int32_t d = 0; d < rank; d++) {
    if (dims[d] == NULL) return stax_graph_null_dim_error(graph, "graph input", name, d);
  }
  STAX_RETURN_IF_ERROR(
      stax_graph_reserve_id(graph, &graph->inputs, &graph->input_capacity, graph->input_count));
  stax_value_t value;
  stax_value_init(&value, name, STAX_VALUE_IS_INPUT);
  value.dtype = dtype;
  value.rank = rank;
  STAX_RETURN_IF_ERROR(stax_graph_copy_dims(graph, rank, dims, &value.dims));
  stax_value_id_t id = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_append_value(graph, &value, &id));
  graph->inputs[graph->input_count++] = id;
  if (out_value) *out_value = id;
  return STAX_OK;
}

stax_status_t stax_graph_add_sequence_input(stax_graph_t* graph, const char* name,
                                            stax_dtype_t dtype, int32_t elem_rank,
                                            const stax_dim_t* const* elem_dims,
                                            stax_value_id_t* out_value) {
  if (out_value) *out_value = STAX_VALUE_NONE;
  if (graph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_graph_add_sequence_input: graph is NULL");
  }
  STAX_RETURN_IF_ERROR(stax_graph_check_new_name(graph, "graph input", name));
  if (!stax_dtype_valid(dtype)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "graph input '%s': invalid dtype %d", name,
                            (int)dtype);
  }
  if (elem_rank < -1 || elem_rank > STAX_MAX_RANK) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "graph input '%s': element rank %d is outside -1..%d", name,
                            elem_rank, STAX_MAX_RANK);
  }
  STAX_RETURN_IF_ERROR(
      stax_graph_reserve_id(graph, &graph->inputs, &graph->input_capacity, graph->input_count));
  stax_value_t value;
  stax_value_init(&value, name, STAX_VALUE_IS_INPUT);
  value.dtype = dtype;
  value.rank = 0;
  value.is_sequence = true;
  value.elem_rank = elem_rank;
  if (elem_rank > 0) {
    const stax_dim_t* dims[STAX_MAX_RANK];
    for (int32_t d = 0; d < elem_rank; d++) dims[d] = elem_dims ? elem_dims[d] : NULL;
    void* copy = NULL;
    STAX_RETURN_IF_ERROR(stax_arena_memdup(&graph->arena, dims,
                                           (size_t)elem_rank * sizeof(dims[0]), &copy));
    value.elem_dims = copy;
  }
  stax_value_id_t id = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_append_value(graph, &value, &id));
  graph->inputs[graph->input_count++] = id;
  if (out_value) *out_value = id;
  return STAX_OK;
}

/* Reads the small integer contents of an initializer as constant dims. */
static stax_status_t stax_graph_initializer_content(stax_graph_t* graph, const char* name,
                                                    stax_tensor_t* tensor,
                                                    stax_value_t* value) {
  stax_dtype_t dtype = stax_tensor_dtype(tensor);
  int32_t rank = stax_tensor_rank(tensor);
  int64_t count = stax_tensor_element_count(tensor);
  if ((dtype != STAX_DTYPE_INT64 && dtype != STAX_DTYPE_INT32) || rank > 1 ||
      count > STAX_CONTENT_MAX_ELEMENTS) {
    return STAX_OK;
  }
  int64_t stride = rank == 1 ? stax_tensor_strides(tensor)[0] : 0;
  const unsigned char* data = stax_tensor_data(tensor);
  size_t element_size = stax_dtype_size(dtype);
  const stax_dim_t** content = NULL;
  if (count > 0) {
    void* memory = NULL;
    STAX_RETURN_IF_ERROR(stax_arena_alloc(&graph->arena, (size_t)count * sizeof(content[0]), 0,
                                          &memory));
    content = memory;
  }
  for (int64_t i = 0; i < count; i++) {
    const unsigned char* element = data + (ptrdiff_t)(i * stride) * (ptrdiff_t)element_size;
    int64_t number;
    if (dtype == STAX_DTYPE_INT64) {
      memcpy(&number, element, sizeof(number));
    } else {
      int32_t narrow;
      memcpy(&narrow, element, sizeof(narrow));
      number = narrow;
    }
    content[i] = stax_dim_const(graph->shape, number);
    if (content[i] == NULL) {
      return stax_graph_null_dim_error(graph, "initializer content of", name, (int32_t)i);
    }
  }
  value->content_count = (int32_t)count;
  value->content = content;
  return STAX_OK;
}

stax_status_t stax_graph_set_constant_content(stax_graph_t* graph, stax_value_id_t value) {
  stax_value_t* info = &graph->values[value];
  if (!info->constant) return STAX_OK;
  return stax_graph_initializer_content(graph, info->name, info->constant, info);
}

stax_status_t stax_graph_add_initializer(stax_graph_t* graph, const char* name,
                                         stax_tensor_t* tensor, stax_value_id_t* out_value) {
  if (out_value) *out_value = STAX_VALUE_NONE;
  if (graph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_graph_add_initializer: graph is NULL");
  }
  STAX_RETURN_IF_ERROR(stax_graph_check_new_name(graph, "initializer", name));
  if (tensor == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "initializer '%s': tensor is NULL", name);
  }
  stax_dtype_t dtype = stax_tensor_dtype(tensor);
  int32_t rank = stax_tensor_rank(tensor);
  if (!stax_dtype_valid(dtype) || rank < 0 || rank > STAX_MAX_RANK) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "initializer '%s': tensor has invalid dtype %d or rank %d", name,
                            (int)dtype, rank);
  }
  stax_value_t value;
  stax_value_init(&value, name, STAX_VALUE_IS_INITIALIZER);
  value.dtype = dtype;
  value.rank = rank;
  const int64_t* tensor_dims = stax_tensor_dims(tensor);
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t d = 0; d < rank; d++) {
    dims[d] = stax_dim_const(graph->shape, tensor_dims[d]);
    if (dims[d] == NULL) return stax_graph_null_dim_error(graph, "initializer", name, d);
  }
  STAX_RETURN_IF_ERROR(stax_graph_copy_dims(graph, rank, dims, &value.dims));
  STAX_RETURN_IF_ERROR(stax_graph_initializer_content(graph, name, tensor, &value));
  value.constant = tensor;
  stax_value_id_t id = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_append_value(graph, &value, &id));
  stax_tensor_retain(tensor);
  if (out_value) *out_value = id;
  return STAX_OK;
}

stax_status_t stax_graph_capture(stax_graph_t* subgraph, stax_value_id_t outer_value,
                                 stax_value_id_t* out_local_value) {
  if (out_local_value) *out_local_value = STAX_VALUE_NONE;
  if (subgraph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_graph_capture: graph is NULL");
  }
  stax_graph_t* parent = subgraph->parent;
  if (parent == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "capture of value %d: the graph is not a subgraph", outer_value);
  }
  if (!stax_graph_value_valid(parent, outer_value)) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "capture: value id %d does not exist in the parent graph (%d "
                            "values)",
                            outer_value, parent->value_count);
  }
  const stax_value_t* outer = &parent->values[outer_value];
  uintptr_t existing = 0;
  if (stax_hash_map_get_string(subgraph->names, outer->name, &existing)) {
    const stax_value_t* local = &subgraph->values[existing];
    if ((local->flags & STAX_VALUE_IS_CAPTURE) && local->outer_value == outer_value) {
      if (out_local_value) *out_local_value = (stax_value_id_t)existing;
      return STAX_OK;
    }
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "capture of '%s': the subgraph already has its own value named "
                            "'%s'",
                            outer->name, outer->name);
  }
  /* The local stand-in mirrors the outer value: same name, dtype, symbolic dims (the shape
   * context is shared), constant and contents, so shape functions see no difference. */
  stax_value_t value;
  stax_value_init(&value, outer->name, STAX_VALUE_IS_CAPTURE);
  value.dtype = outer->dtype;
  value.rank = outer->rank;
  value.outer_value = outer_value;
  STAX_RETURN_IF_ERROR(stax_graph_copy_dims(subgraph, outer->rank,
                                            (const stax_dim_t* const*)outer->dims, &value.dims));
  if (outer->content_count >= 0) {
    STAX_RETURN_IF_ERROR(stax_graph_copy_dims(subgraph, outer->content_count,
                                              (const stax_dim_t* const*)outer->content,
                                              &value.content));
    value.content_count = outer->content_count;
  }
  value.constant = outer->constant;
  value.is_sequence = outer->is_sequence;
  value.elem_rank = outer->elem_rank;
  value.elem_dims = outer->elem_dims; /* arena memory of an ancestor, which outlives this graph */
  stax_value_id_t id = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_append_value(subgraph, &value, &id));
  if (value.constant) stax_tensor_retain(value.constant);
  if (out_local_value) *out_local_value = id;
  return STAX_OK;
}

/* ---- nodes ------------------------------------------------------------------------------- */

/* "expects 2 inputs", "expects 1 to 3 inputs", "expects at least 1 input". */
static void stax_arity_text(int32_t min, int32_t max, const char* noun, char* buffer,
                            size_t size) {
  if (max < 0) {
    snprintf(buffer, size, "at least %d %s%s", min, noun, min == 1 ? "" : "s");
  } else if (min == max) {
    snprintf(buffer, size, "%d %s%s", min, noun, min == 1 ? "" : "s");
  } else {
    snprintf(buffer, size, "%d to %d %ss", min, max, noun);
  }
}

static stax_status_t stax_check_arity(const char* op_name, const char* node_name, int32_t min,
                                      int32_t max, int32_t count, const char* noun) {
  if (count >= min && (max < 0 || count <= max)) return STAX_OK;
  char expected[64];
  stax_arity_text(min, max, noun, expected, sizeof(expected));
  return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s': expects %s, got %d", op_name,
                          node_name, expected, count);
}

/* Validation that needs no allocation: arity, input ids, explicit output names. */
static stax_status_t stax_graph_check_node(const stax_graph_t* graph,
                                           const stax_node_desc_t* desc,
                                           const char* node_name) {
  const char* op_name = stax_op_name(desc->op);
  if (desc->input_count > 0 && desc->inputs == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s': input_count is %d but inputs is NULL", op_name,
                            node_name, desc->input_count);
  }
  STAX_RETURN_IF_ERROR(stax_check_arity(op_name, node_name, stax_op_min_inputs(desc->op),
                                        stax_op_max_inputs(desc->op), desc->input_count,
                                        "input"));
  STAX_RETURN_IF_ERROR(stax_check_arity(op_name, node_name, stax_op_min_outputs(desc->op),
                                        stax_op_max_outputs(desc->op), desc->output_count,
                                        "output"));
  int32_t min_inputs = stax_op_min_inputs(desc->op);
  for (int32_t i = 0; i < desc->input_count; i++) {
    stax_value_id_t id = desc->inputs[i];
    if (id == STAX_VALUE_NONE) {
      if (i < min_inputs && !(stax_op_flags(desc->op) & STAX_OPF_OPTIONAL_SLOTS)) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s node '%s': input %d is required but missing", op_name,
                                node_name, i);
      }
      continue;
    }
    if (!stax_graph_value_valid(graph, id)) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s node '%s': input %d is value id %d, which does not exist in "
                              "this graph (%d values)",
                              op_name, node_name, i, id, graph->value_count);
    }
  }
  for (int32_t i = 0; desc->output_names && i < desc->output_count; i++) {
    const char* name = desc->output_names[i];
    if (name == NULL || name[0] == '\0') continue;
    uintptr_t existing = 0;
    if (stax_hash_map_get_string(graph->names, name, &existing)) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s node '%s': output %d name '%s' is already used by another "
                              "value",
                              op_name, node_name, i, name);
    }
    for (int32_t j = 0; j < i; j++) {
      if (desc->output_names[j] && strcmp(desc->output_names[j], name) == 0) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s node '%s': outputs %d and %d are both named '%s'", op_name,
                                node_name, j, i, name);
      }
    }
  }
  return STAX_OK;
}

/* An output name: the caller's, or "<node>:<i>", with a numeric suffix if a value already
 * has that name (auto names must never collide). */
static stax_status_t stax_graph_output_name(stax_graph_t* graph, const stax_node_desc_t* desc,
                                            const char* node_name, int32_t i,
                                            const char** out_name) {
  *out_name = NULL;
  const char* given = desc->output_names ? desc->output_names[i] : NULL;
  if (given != NULL && given[0] != '\0') {
    return stax_arena_strdup(&graph->arena, given, out_name);
  }
  size_t length = strlen(node_name) + 32;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&graph->arena, length, 1, &memory));
  char* name = memory;
  snprintf(name, length, "%s:%d", node_name, i);
  uintptr_t existing = 0;
  for (int32_t suffix = 1; stax_hash_map_get_string(graph->names, name, &existing); suffix++) {
    snprintf(name, length, "%s:%d_%d", node_name, i, suffix);
  }
  *out_name = name;
  return STAX_OK;
}

stax_status_t stax_graph_add_node(stax_graph_t* graph, const stax_node_desc_t* desc,
                                  stax_value_id_t* out_outputs) {
  if (graph == NULL || desc == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_graph_add_node: %s is NULL",
                            graph == NULL ? "graph" : "desc");
  }
  if (desc->op < 0 || desc->op >= STAX_OP_COUNT) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "node '%s': invalid op %d",
                            desc->name ? desc->name : "(unnamed)", (int)desc->op);
  }
  if (out_outputs) {
    for (int32_t i = 0; i < desc->output_count; i++) out_outputs[i] = STAX_VALUE_NONE;
  }
  const char* op_name = stax_op_name(desc->op);
  const int32_t saved_auto_name = graph->next_auto_name;
  char auto_name[96];
  const char* node_name = desc->name;
  if (node_name == NULL || node_name[0] == '\0') {
    snprintf(auto_name, sizeof(auto_name), "%s_%d", op_name, graph->next_auto_name);
    node_name = auto_name;
  }
  STAX_RETURN_IF_ERROR(stax_graph_check_node(graph, desc, node_name));
  stax_node_attr_t* attrs = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attrs_copy(graph, desc->op, node_name, desc->attr_count,
                                            desc->attrs, &attrs));

  /* From here on every step is undone on failure: reserve first so no later step can fail
   * half-way through an array update. */
  const int32_t first_output = graph->value_count;
  const stax_node_id_t node_id = graph->node_count;
  int32_t names_registered = 0;
  bool outputs_initialized = false;
  bool node_appended = false;
  bool shape_checkpointed = false;
  stax_shape_checkpoint_t shape_checkpoint = {0, 0, 0, 0};
  stax_status_t status = STAX_OK;
  void* nodes = graph->nodes;
  status = stax_graph_reserve(graph, &nodes, &graph->node_capacity, graph->node_count + 1,
                              sizeof(stax_node_t));
  graph->nodes = nodes;
  if (status != STAX_OK) goto rollback;
  STAX_GOTO_IF_ERROR(status, stax_graph_reserve_values(graph, desc->output_count), rollback);

  stax_node_t node;
  memset(&node, 0, sizeof(node));
  node.op = desc->op;
  node.input_count = desc->input_count;
  node.output_count = desc->output_count;
  node.attr_count = desc->attr_count;
  node.attrs = attrs;
  STAX_GOTO_IF_ERROR(status, stax_arena_strdup(&graph->arena, node_name, &node.name), rollback);
  if (desc->input_count > 0) {
    void* copy = NULL;
    STAX_GOTO_IF_ERROR(status,
                       stax_arena_memdup(&graph->arena, desc->inputs,
                                         (size_t)desc->input_count * sizeof(stax_value_id_t),
                                         &copy),
                       rollback);
    node.inputs = copy;
  }
  void* outputs = NULL;
  STAX_GOTO_IF_ERROR(status,
                     stax_arena_alloc(&graph->arena,
                                      (size_t)desc->output_count * sizeof(stax_value_id_t), 0,
                                      &outputs),
                     rollback);
  node.outputs = outputs;

  for (int32_t i = 0; i < desc->output_count; i++) {
    stax_value_t* value = &graph->values[first_output + i];
    stax_value_init(value, NULL, 0);
    value->producer = node_id;
    value->producer_output = i;
    node.outputs[i] = first_output + i;
  }
  outputs_initialized = true;
  for (int32_t i = 0; i < desc->output_count; i++) {
    stax_value_t* value = &graph->values[first_output + i];
    STAX_GOTO_IF_ERROR(status, stax_graph_output_name(graph, desc, node.name, i, &value->name),
                       rollback);
    STAX_GOTO_IF_ERROR(status,
                       stax_hash_map_put_string(graph->names, value->name,
                                                (uintptr_t)(first_output + i)),
                       rollback);
    names_registered++;
  }

  graph->nodes[node_id] = node;
  graph->node_count++;
  graph->value_count += desc->output_count;
  node_appended = true;
  if (node_name == auto_name) graph->next_auto_name++;
  /* A shape function can unify, pin and narrow symbols or create fresh ones before it finds a
   * contradiction; the checkpoint lets a rejected node leave the shared context as it was, so
   * no symbol stays pinned by a node the graph never got. */
  shape_checkpoint = stax_shape_ctx_checkpoint(graph->shape);
  shape_checkpointed = true;
  STAX_GOTO_IF_ERROR(status, stax_shape_infer_node(graph, node_id), rollback);
  stax_shape_ctx_commit(graph->shape, shape_checkpoint);

  /* Committed: the node now holds references to its attribute tensors and owns its
   * subgraphs. */
  stax_node_attrs_commit(&graph->nodes[node_id]);
  (void)stax_fold_node(graph, node_id);
  if (out_outputs) {
    for (int32_t i = 0; i < desc->output_count; i++) out_outputs[i] = first_output + i;
  }
  return STAX_OK;

rollback:
  if (shape_checkpointed) stax_shape_ctx_rollback(graph->shape, shape_checkpoint);
  for (int32_t i = 0; i < names_registered; i++) {
    stax_hash_map_remove_string(graph->names, graph->values[first_output + i].name);
  }
  if (outputs_initialized) {
    for (int32_t i = 0; i < desc->output_count; i++) {
      stax_value_t* value = &graph->values[first_output + i];
      if (value->constant) stax_tensor_release(value->constant);
      value->constant = NULL;
    }
  }
  if (node_appended) {
    graph->node_count = node_id;
    graph->value_count = first_output;
  }
  graph->next_auto_name = saved_auto_name;
  return status;
}

stax_status_t stax_graph_add_output(stax_graph_t* graph, stax_value_id_t value) {
  if (graph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_graph_add_output: graph is NULL");
  }
  if (!stax_graph_value_valid(graph, value)) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "graph output: value id %d does not exist in this graph (%d "
                            "values)",
                            value, graph->value_count);
  }
  for (int32_t i = 0; i < graph->output_count; i++) {
    if (graph->outputs[i] == value) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "graph output '%s' is already output %d of the graph",
                              graph->values[value].name, i);
    }
  }
  STAX_RETURN_IF_ERROR(stax_graph_reserve_id(graph, &graph->outputs, &graph->output_capacity,
                                             graph->output_count));
  graph->outputs[graph->output_count++] = value;
  graph->values[value].flags |= STAX_VALUE_IS_OUTPUT;
  return STAX_OK;
}

stax_status_t stax_graph_declare_shape(stax_graph_t* graph, stax_value_id_t value,
                                       stax_dtype_t dtype, int32_t rank,
                                       const stax_dim_t* const* dims) {
  if (graph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_graph_declare_shape: graph is NULL");
  }
  if (!stax_graph_value_valid(graph, value)) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "declared shape: value id %d does not exist in this graph (%d "
                            "values)",
                            value, graph->value_count);
  }
  const stax_value_t* target = &graph->values[value];
  if (target->is_sequence) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "value '%s': declared as a tensor, but it is a sequence of %s tensors",
                            target->name, stax_dtype_name(target->dtype));
  }
  if (dtype != target->dtype) {
    return stax_status_make(STAX_DTYPE_MISMATCH,
                            "value '%s': declared dtype %s, inferred dtype %s", target->name,
                            stax_dtype_name(dtype), stax_dtype_name(target->dtype));
  }
  if (rank != target->rank) {
    return stax_status_make(STAX_SHAPE_MISMATCH, "value '%s': declared rank %d, inferred rank %d",
                            target->name, rank, target->rank);
  }
  if (rank > 0 && dims == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "value '%s': declared rank %d but no dims given", target->name,
                            rank);
  }
  for (int32_t d = 0; d < rank; d++) {
    if (dims[d] == NULL) return stax_graph_null_dim_error(graph, "declared shape of", target->name, d);
    char declared_origin[160], inferred_origin[160];
    snprintf(declared_origin, sizeof(declared_origin), "value '%s' declared dim %d",
             target->name, d);
    snprintf(inferred_origin, sizeof(inferred_origin), "value '%s' inferred dim %d",
             target->name, d);
    STAX_RETURN_IF_ERROR(stax_dim_unify(graph->shape, dims[d], declared_origin,
                                        target->dims[d], inferred_origin));
  }
  return STAX_OK;
}

/* ---- inspection -------------------------------------------------------------------------- */

int32_t stax_graph_value_count(const stax_graph_t* graph) { return graph ? graph->value_count : 0; }
int32_t stax_graph_node_count(const stax_graph_t* graph) { return graph ? graph->node_count : 0; }
int32_t stax_graph_input_count(const stax_graph_t* graph) { return graph ? graph->input_count : 0; }
int32_t stax_graph_output_count(const stax_graph_t* graph) {
  return graph ? graph->output_count : 0;
}

stax_value_id_t stax_graph_input(const stax_graph_t* graph, int32_t index) {
  if (graph == NULL || index < 0 || index >= graph->input_count) return STAX_VALUE_NONE;
  return graph->inputs[index];
}

stax_value_id_t stax_graph_output(const stax_graph_t* graph, int32_t index) {
  if (graph == NULL || index < 0 || index >= graph->output_count) return STAX_VALUE_NONE;
  return graph->outputs[index];
}

stax_value_id_t stax_graph_find_value(const stax_graph_t* graph, const char* name) {
  uintptr_t id = 0;
  if (graph == NULL || name == NULL || !stax_hash_map_get_string(graph->names, name, &id)) {
    return STAX_VALUE_NONE;
  }
  return (stax_value_id_t)id;
}

const char* stax_value_name(const stax_graph_t* graph, stax_value_id_t value) {
  return stax_graph_value_valid(graph, value) ? graph->values[value].name : NULL;
}

stax_dtype_t stax_value_dtype(const stax_graph_t* graph, stax_value_id_t value) {
  return stax_graph_value_valid(graph, value) ? graph->values[value].dtype : STAX_DTYPE_INVALID;
}

int32_t stax_value_rank(const stax_graph_t* graph, stax_value_id_t value) {
  return stax_graph_value_valid(graph, value) ? graph->values[value].rank : -1;
}

const stax_dim_t* const* stax_value_dims(const stax_graph_t* graph, stax_value_id_t value) {
  return stax_graph_value_valid(graph, value) ? graph->values[value].dims : NULL;
}

bool stax_value_is_sequence(const stax_graph_t* graph, stax_value_id_t value) {
  return stax_graph_value_valid(graph, value) && graph->values[value].is_sequence;
}

int32_t stax_value_elem_rank(const stax_graph_t* graph, stax_value_id_t value) {
  return stax_graph_value_valid(graph, value) ? graph->values[value].elem_rank : -1;
}

const stax_dim_t* const* stax_value_elem_dims(const stax_graph_t* graph, stax_value_id_t value) {
  return stax_graph_value_valid(graph, value)
             ? (const stax_dim_t* const*)graph->values[value].elem_dims
             : NULL;
}

stax_tensor_t* stax_value_constant(const stax_graph_t* graph, stax_value_id_t value) {
  return stax_graph_value_valid(graph, value) ? graph->values[value].constant : NULL;
}

stax_node_id_t stax_value_producer(const stax_graph_t* graph, stax_value_id_t value) {
  return stax_graph_value_valid(graph, value) ? graph->values[value].producer : -1;
}

stax_op_t stax_node_op(const stax_graph_t* graph, stax_node_id_t node) {
  return stax_graph_node_valid(graph, node) ? graph->nodes[node].op : STAX_OP_INVALID;
}

const char* stax_node_name(const stax_graph_t* graph, stax_node_id_t node) {
  return stax_graph_node_valid(graph, node) ? graph->nodes[node].name : NULL;
}

int32_t stax_node_input_count(const stax_graph_t* graph, stax_node_id_t node) {
  return stax_graph_node_valid(graph, node) ? graph->nodes[node].input_count : 0;
}

stax_value_id_t stax_node_input(const stax_graph_t* graph, stax_node_id_t node, int32_t i) {
  if (!stax_graph_node_valid(graph, node)) return STAX_VALUE_NONE;
  const stax_node_t* n = &graph->nodes[node];
  return i >= 0 && i < n->input_count ? n->inputs[i] : STAX_VALUE_NONE;
}

int32_t stax_node_output_count(const stax_graph_t* graph, stax_node_id_t node) {
  return stax_graph_node_valid(graph, node) ? graph->nodes[node].output_count : 0;
}

stax_value_id_t stax_node_output(const stax_graph_t* graph, stax_node_id_t node, int32_t i) {
  if (!stax_graph_node_valid(graph, node)) return STAX_VALUE_NONE;
  const stax_node_t* n = &graph->nodes[node];
  return i >= 0 && i < n->output_count ? n->outputs[i] : STAX_VALUE_NONE;
}
