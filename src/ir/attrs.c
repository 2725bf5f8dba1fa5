/* Node attributes: the public stax_attr_* constructors, the schema from op_attrs.def, the
 * validation add_node and the verifier run, the deep copy into a graph's arena, and the typed
 * getters shape functions and passes use. */
#include <string.h>

#include "ir/graph_internal.h"


/* ---- constructors ------------------------------------------------------------------------ */

stax_attr_t stax_attr_int(const char* name, int64_t value) {
  stax_attr_t attr = {.name = name, .type = STAX_ATTR_INT};
  attr.value.i = value;
  return attr;
}

stax_attr_t stax_attr_float(const char* name, float value) {
  stax_attr_t attr = {.name = name, .type = STAX_ATTR_FLOAT};
  attr.value.f = value;
  return attr;
}

stax_attr_t stax_attr_string(const char* name, const char* value) {
  stax_attr_t attr = {.name = name, .type = STAX_ATTR_STRING};
  attr.value.s = value;
  return attr;
}

stax_attr_t stax_attr_ints(const char* name, int32_t count, const int64_t* values) {
  stax_attr_t attr = {.name = name, .type = STAX_ATTR_INTS};
  attr.value.ints.count = count;
  attr.value.ints.data = values;
  return attr;
}

stax_attr_t stax_attr_floats(const char* name, int32_t count, const float* values) {
  stax_attr_t attr = {.name = name, .type = STAX_ATTR_FLOATS};
  attr.value.floats.count = count;
  attr.value.floats.data = values;
  return attr;
}

stax_attr_t stax_attr_strings(const char* name, int32_t count, const char* const* values) {
  stax_attr_t attr = {.name = name, .type = STAX_ATTR_STRINGS};
  attr.value.strings.count = count;
  attr.value.strings.data = values;
  return attr;
}

stax_attr_t stax_attr_tensor(const char* name, stax_tensor_t* tensor) {
  stax_attr_t attr = {.name = name, .type = STAX_ATTR_TENSOR};
  attr.value.tensor = tensor;
  return attr;
}

stax_attr_t stax_attr_graph(const char* name, stax_graph_t* subgraph) {
  stax_attr_t attr = {.name = name, .type = STAX_ATTR_GRAPH};
  attr.value.graph = subgraph;
  return attr;
}

const char* stax_attr_type_name(stax_attr_type_t type) {
  switch (type) {
    case STAX_ATTR_INT: return "INT";
    case STAX_ATTR_FLOAT: return "FLOAT";
    case STAX_ATTR_STRING: return "STRING";
    case STAX_ATTR_INTS: return "INTS";
    case STAX_ATTR_FLOATS: return "FLOATS";
    case STAX_ATTR_STRINGS: return "STRINGS";
    case STAX_ATTR_TENSOR: return "TENSOR";
    case STAX_ATTR_GRAPH: return "GRAPH";
  }
  return "invalid";
}

static bool stax_attr_type_valid(stax_attr_type_t type) {
  return type >= STAX_ATTR_INT && type <= STAX_ATTR_GRAPH;
}

/* ---- schema ------------------------------------------------------------------------------ */

typedef struct stax_attr_schema_entry_t {
  stax_op_t op;
  const char* name;
  stax_attr_type_t type;
} stax_attr_schema_entry_t;

static const stax_attr_schema_entry_t stax_attr_schema[] = {
#define STAX_OP_ATTR(op_name, attr_name, attr_type) \
  {STAX_OP_##op_name, attr_name, STAX_ATTR_##attr_type},
#include "ir/op_attrs.def"
#undef STAX_OP_ATTR
};

#define STAX_ATTR_SCHEMA_COUNT ((int32_t)(sizeof(stax_attr_schema) / sizeof(stax_attr_schema[0])))

static const stax_attr_schema_entry_t* stax_attr_schema_find(stax_op_t op, const char* name) {
  for (int32_t i = 0; i < STAX_ATTR_SCHEMA_COUNT; i++) {
    if (stax_attr_schema[i].op == op && strcmp(stax_attr_schema[i].name, name) == 0) {
      return &stax_attr_schema[i];
    }
  }
  return NULL;
}

/* Lists the op's attribute names ("auto_pad, dilations, ...") for the unknown-attribute
 * message, so the user sees the likely typo's correct spelling. */
static void stax_attr_schema_list(stax_op_t op, char* buffer, size_t size) {
  size_t used = 0;
  buffer[0] = '\0';
  for (int32_t i = 0; i < STAX_ATTR_SCHEMA_COUNT && used < size; i++) {
    if (stax_attr_schema[i].op != op) continue;
    int written = snprintf(buffer + used, size - used, "%s%s", used ? ", " : "",
                           stax_attr_schema[i].name);
    if (written < 0) break;
    used += (size_t)written;
  }
  if (used == 0) snprintf(buffer, size, "none");
}

stax_status_t stax_attr_check_schema(stax_op_t op, const char* node_name,
                                     const char* attr_name, stax_attr_type_t type) {
  const char* op_name = stax_op_name(op);
  if (attr_name == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s': an attribute has no name",
                            op_name, node_name);
  }
  const stax_attr_schema_entry_t* entry = stax_attr_schema_find(op, attr_name);
  if (entry == NULL) {
    char accepted[512];
    stax_attr_schema_list(op, accepted, sizeof(accepted));
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s': unknown attribute '%s' (%s accepts: %s)", op_name,
                            node_name, attr_name, op_name, accepted);
  }
  if (entry->type != type) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s': attribute '%s' must be %s, got %s", op_name,
                            node_name, attr_name, stax_attr_type_name(entry->type),
                            stax_attr_type_name(type));
  }
  return STAX_OK;
}

/* ---- validation and copy ----------------------------------------------------------------- */

/* Payload checks beyond the type: pointers a bad caller could leave NULL, negative counts,
 * and subgraphs that do not belong here or are already owned by another node. */
static stax_status_t stax_attr_check_payload(stax_graph_t* graph, stax_op_t op,
                                             const char* node_name, int32_t index,
                                             const stax_attr_t* attrs) {
  const stax_attr_t* attr = &attrs[index];
  const char* op_name = stax_op_name(op);
  switch (attr->type) {
    case STAX_ATTR_INT:
    case STAX_ATTR_FLOAT:
      return STAX_OK;
    case STAX_ATTR_STRING:
      if (attr->value.s == NULL) break;
      return STAX_OK;
    case STAX_ATTR_INTS:
    case STAX_ATTR_FLOATS:
    case STAX_ATTR_STRINGS: {
      /* The three array members share a layout: a count followed by a pointer. */
      int32_t count = attr->value.ints.count;
      const void* data = attr->type == STAX_ATTR_INTS     ? (const void*)attr->value.ints.data
                         : attr->type == STAX_ATTR_FLOATS ? (const void*)attr->value.floats.data
                                                          : (const void*)attr->value.strings.data;
      if (count < 0) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s node '%s': attribute '%s' has a negative count %d", op_name,
                                node_name, attr->name, count);
      }
      if (count > 0 && data == NULL) break;
      if (attr->type == STAX_ATTR_STRINGS) {
        for (int32_t i = 0; i < count; i++) {
          if (attr->value.strings.data[i] == NULL) {
            return stax_status_make(STAX_INVALID_ARGUMENT,
                                    "%s node '%s': attribute '%s' entry %d is NULL", op_name,
                                    node_name, attr->name, i);
          }
        }
      }
      return STAX_OK;
    }
    case STAX_ATTR_TENSOR:
      if (attr->value.tensor == NULL) break;
      return STAX_OK;
    case STAX_ATTR_GRAPH: {
      stax_graph_t* subgraph = attr->value.graph;
      if (subgraph == NULL) break;
      if (subgraph->parent != graph) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s node '%s': attribute '%s' is not a subgraph of this graph "
                                "(create it with stax_graph_create_subgraph on this graph)",
                                op_name, node_name, attr->name);
      }
      for (int32_t i = 0; i < index; i++) {
        if (attrs[i].type == STAX_ATTR_GRAPH && attrs[i].value.graph == subgraph) {
          return stax_status_make(STAX_INVALID_ARGUMENT,
                                  "%s node '%s': attributes '%s' and '%s' pass the same "
                                  "subgraph",
                                  op_name, node_name, attrs[i].name, attr->name);
        }
      }
      for (int32_t n = 0; n < graph->node_count; n++) {
        const stax_node_t* other = &graph->nodes[n];
        for (int32_t a = 0; a < other->attr_count; a++) {
          if (other->attrs[a].type == STAX_ATTR_GRAPH && other->attrs[a].value.graph == subgraph) {
            return stax_status_make(STAX_INVALID_ARGUMENT,
                                    "%s node '%s': attribute '%s' passes a subgraph already "
                                    "owned by %s node '%s'",
                                    op_name, node_name, attr->name, stax_op_name(other->op),
                                    other->name);
          }
        }
      }
      return STAX_OK;
    }
  }
  return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s': attribute '%s' has no value",
                          op_name, node_name, attr->name);
}

static stax_status_t stax_attr_copy_one(stax_arena_t* arena, const stax_attr_t* source,
                                        stax_node_attr_t* target) {
  STAX_RETURN_IF_ERROR(stax_arena_strdup(arena, source->name, &target->name));
  target->type = source->type;
  switch (source->type) {
    case STAX_ATTR_INT:
      target->value.i = source->value.i;
      return STAX_OK;
    case STAX_ATTR_FLOAT:
      target->value.f = source->value.f;
      return STAX_OK;
    case STAX_ATTR_STRING:
      return stax_arena_strdup(arena, source->value.s, &target->value.s);
    case STAX_ATTR_INTS: {
      int32_t count = source->value.ints.count;
      void* copy = NULL;
      if (count > 0) {
        STAX_RETURN_IF_ERROR(stax_arena_memdup(arena, source->value.ints.data,
                                               (size_t)count * sizeof(int64_t), &copy));
      }
      target->value.ints.count = count;
      target->value.ints.data = copy;
      return STAX_OK;
    }
    case STAX_ATTR_FLOATS: {
      int32_t count = source->value.floats.count;
      void* copy = NULL;
      if (count > 0) {
        STAX_RETURN_IF_ERROR(stax_arena_memdup(arena, source->value.floats.data,
                                               (size_t)count * sizeof(float), &copy));
      }
      target->value.floats.count = count;
      target->value.floats.data = copy;
      return STAX_OK;
    }
    case STAX_ATTR_STRINGS: {
      int32_t count = source->value.strings.count;
      const char** copy = NULL;
      if (count > 0) {
        void* memory = NULL;
        STAX_RETURN_IF_ERROR(
            stax_arena_alloc(arena, (size_t)count * sizeof(const char*), 0, &memory));
        copy = memory;
        for (int32_t i = 0; i < count; i++) {
          STAX_RETURN_IF_ERROR(stax_arena_strdup(arena, source->value.strings.data[i], &copy[i]));
        }
      }
      target->value.strings.count = count;
      target->value.strings.data = copy;
      return STAX_OK;
    }
    case STAX_ATTR_TENSOR:
      /* Retained only when the node is committed, so a failed add_node has nothing to undo. */
      target->value.tensor = source->value.tensor;
      return STAX_OK;
    case STAX_ATTR_GRAPH:
      target->value.graph = source->value.graph;
      return STAX_OK;
  }
  return stax_status_make(STAX_INTERNAL, "attribute '%s' has an invalid type", source->name);
}

stax_status_t stax_node_attrs_copy(stax_graph_t* graph, stax_op_t op, const char* node_name,
                                   int32_t count, const stax_attr_t* attrs,
                                   stax_node_attr_t** out_attrs) {
  *out_attrs = NULL;
  const char* op_name = stax_op_name(op);
  if (count < 0 || (count > 0 && attrs == NULL)) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s': attribute count %d with %s attribute array", op_name,
                            node_name, count, attrs ? "an" : "no");
  }
  for (int32_t i = 0; i < count; i++) {
    const stax_attr_t* attr = &attrs[i];
    if (attr->name != NULL && !stax_attr_type_valid(attr->type)) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s node '%s': attribute '%s' has invalid type %d", op_name,
                              node_name, attr->name, (int)attr->type);
    }
    STAX_RETURN_IF_ERROR(stax_attr_check_schema(op, node_name, attr->name, attr->type));
    for (int32_t j = 0; j < i; j++) {
      if (strcmp(attrs[j].name, attr->name) == 0) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s node '%s': attribute '%s' is given twice", op_name,
                                node_name, attr->name);
      }
    }
    STAX_RETURN_IF_ERROR(stax_attr_check_payload(graph, op, node_name, i, attrs));
  }
  if (count == 0) return STAX_OK;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(
      stax_arena_alloc(&graph->arena, (size_t)count * sizeof(stax_node_attr_t), 0, &memory));
  stax_node_attr_t* copies = memory;
  memset(copies, 0, (size_t)count * sizeof(stax_node_attr_t));
  for (int32_t i = 0; i < count; i++) {
    STAX_RETURN_IF_ERROR(stax_attr_copy_one(&graph->arena, &attrs[i], &copies[i]));
  }
  *out_attrs = copies;
  return STAX_OK;
}

void stax_node_attrs_commit(stax_node_t* node) {
  for (int32_t i = 0; i < node->attr_count; i++) {
    if (node->attrs[i].type == STAX_ATTR_TENSOR) stax_tensor_retain(node->attrs[i].value.tensor);
  }
}

void stax_node_attrs_release(stax_node_t* node) {
  for (int32_t i = 0; i < node->attr_count; i++) {
    stax_node_attr_t* attr = &node->attrs[i];
    if (attr->type == STAX_ATTR_TENSOR && attr->value.tensor != NULL) {
      stax_tensor_release(attr->value.tensor);
      attr->value.tensor = NULL;
    } else if (attr->type == STAX_ATTR_GRAPH && attr->value.graph != NULL) {
      stax_graph_destroy(attr->value.graph);
      attr->value.graph = NULL;
    }
  }
}

/* ---- getters ----------------------------------------------------------------------------- */

const stax_node_attr_t* stax_node_attr_find(const stax_node_t* node, const char* name) {
  if (node == NULL || name == NULL) return NULL;
  for (int32_t i = 0; i < node->attr_count; i++) {
    if (strcmp(node->attrs[i].name, name) == 0) return &node->attrs[i];
  }
  return NULL;
}

/* Finds `name` and checks its type; *out_attr is NULL when the attribute is missing. */
static stax_status_t stax_node_attr_typed(const stax_node_t* node, const char* name,
                                          stax_attr_type_t type,
                                          const stax_node_attr_t** out_attr) {
  *out_attr = NULL;
  const stax_node_attr_t* attr = stax_node_attr_find(node, name);
  if (attr == NULL) return STAX_OK;
  if (attr->type != type) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s': attribute '%s' must be %s, got %s",
                            stax_op_name(node->op), node->name, name, stax_attr_type_name(type),
                            stax_attr_type_name(attr->type));
  }
  *out_attr = attr;
  return STAX_OK;
}

stax_status_t stax_node_attr_int(const stax_node_t* node, const char* name,
                                 int64_t default_value, int64_t* out_value) {
  *out_value = default_value;
  const stax_node_attr_t* attr = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_typed(node, name, STAX_ATTR_INT, &attr));
  if (attr) *out_value = attr->value.i;
  return STAX_OK;
}

stax_status_t stax_node_attr_onnx_dtype(const stax_node_t* node, const char* name,
                                        int64_t* out_code, stax_dtype_t* out_dtype) {
  *out_dtype = STAX_DTYPE_INVALID;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(node, name, 0, out_code));
  if (*out_code > 0 && *out_code <= INT32_MAX)
    *out_dtype = stax_dtype_from_onnx((int32_t)*out_code);
  return STAX_OK;
}

stax_status_t stax_node_attr_float(const stax_node_t* node, const char* name,
                                   float default_value, float* out_value) {
  *out_value = default_value;
  const stax_node_attr_t* attr = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_typed(node, name, STAX_ATTR_FLOAT, &attr));
  if (attr) *out_value = attr->value.f;
  return STAX_OK;
}

stax_status_t stax_node_attr_string(const stax_node_t* node, const char* name,
                                    const char* default_value, const char** out_value) {
  *out_value = default_value;
  const stax_node_attr_t* attr = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_typed(node, name, STAX_ATTR_STRING, &attr));
  if (attr) *out_value = attr->value.s;
  return STAX_OK;
}

stax_status_t stax_node_attr_ints(const stax_node_t* node, const char* name,
                                  int32_t* out_count, const int64_t** out_data) {
  *out_count = -1;
  *out_data = NULL;
  const stax_node_attr_t* attr = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_typed(node, name, STAX_ATTR_INTS, &attr));
  if (attr) {
    *out_count = attr->value.ints.count;
    *out_data = attr->value.ints.data;
  }
  return STAX_OK;
}

stax_status_t stax_node_attr_floats(const stax_node_t* node, const char* name,
                                    int32_t* out_count, const float** out_data) {
  *out_count = -1;
  *out_data = NULL;
  const stax_node_attr_t* attr = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_typed(node, name, STAX_ATTR_FLOATS, &attr));
  if (attr) {
    *out_count = attr->value.floats.count;
    *out_data = attr->value.floats.data;
  }
  return STAX_OK;
}
