/* AttributeProto -> stax_attr_t. Scalars and lists are copied into the importer's arena (or
 * borrowed from the parsed model, which outlives the import); TENSOR attributes become stax
 * tensors and GRAPH attributes become subgraphs imported under the node's scope. The list
 * holds a reference to every tensor and subgraph until the node is added. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static stax_status_t stax_onnx_attrs_reserve(stax_onnx_importer_t* importer,
                                             stax_onnx_attrs_t* attrs, int32_t needed) {
  if (needed <= attrs->capacity) return STAX_OK;
  int32_t capacity = attrs->capacity ? attrs->capacity * 2 : 8;
  while (capacity < needed) capacity *= 2;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(
      stax_arena_alloc(&importer->arena, (size_t)capacity * sizeof(stax_attr_t), 0, &memory));
  if (attrs->count) memcpy(memory, attrs->items, (size_t)attrs->count * sizeof(stax_attr_t));
  attrs->items = memory;
  attrs->capacity = capacity;
  return STAX_OK;
}

static void stax_onnx_attr_release(stax_attr_t* attr, bool destroy_graph) {
  if (attr->type == STAX_ATTR_TENSOR && attr->value.tensor) {
    stax_tensor_release(attr->value.tensor);
  } else if (attr->type == STAX_ATTR_GRAPH && attr->value.graph && destroy_graph) {
    stax_graph_destroy(attr->value.graph);
  }
  attr->value.tensor = NULL;
}

void stax_onnx_attrs_committed(stax_onnx_attrs_t* attrs) {
  /* The graph retained the tensors itself and took ownership of the subgraphs. Rewrites that
   * consume attributes never see GRAPH attributes (only If and Loop have them). */
  for (int32_t i = 0; i < attrs->count; i++) stax_onnx_attr_release(&attrs->items[i], false);
  attrs->count = 0;
}

void stax_onnx_attrs_discard(stax_onnx_attrs_t* attrs) {
  for (int32_t i = 0; i < attrs->count; i++) stax_onnx_attr_release(&attrs->items[i], true);
  attrs->count = 0;
}

const stax_attr_t* stax_onnx_attrs_find(const stax_onnx_attrs_t* attrs, const char* name) {
  for (int32_t i = 0; i < attrs->count; i++) {
    if (strcmp(attrs->items[i].name, name) == 0) return &attrs->items[i];
  }
  return NULL;
}

bool stax_onnx_attrs_remove(stax_onnx_attrs_t* attrs, const char* name) {
  for (int32_t i = 0; i < attrs->count; i++) {
    if (strcmp(attrs->items[i].name, name) != 0) continue;
    stax_onnx_attr_release(&attrs->items[i], true);
    memmove(&attrs->items[i], &attrs->items[i + 1],
            (size_t)(attrs->count - i - 1) * sizeof(stax_attr_t));
    attrs->count--;
    return true;
  }
  return false;
}

stax_status_t stax_onnx_attrs_set(stax_onnx_importer_t* importer, stax_onnx_attrs_t* attrs,
                                  stax_attr_t attr) {
  stax_arena_t* arena = &importer->arena;
  STAX_RETURN_IF_ERROR(stax_arena_strdup(arena, attr.name, &attr.name));
  void* copy = NULL;
  switch (attr.type) {
    case STAX_ATTR_STRING:
      STAX_RETURN_IF_ERROR(stax_arena_strdup(arena, attr.value.s, &attr.value.s));
      break;
    case STAX_ATTR_INTS:
      STAX_RETURN_IF_ERROR(stax_arena_memdup(arena, attr.value.ints.data,
                                             (size_t)attr.value.ints.count * sizeof(int64_t),
                                             &copy));
      attr.value.ints.data = copy;
      break;
    case STAX_ATTR_FLOATS:
      STAX_RETURN_IF_ERROR(stax_arena_memdup(arena, attr.value.floats.data,
                                             (size_t)attr.value.floats.count * sizeof(float),
                                             &copy));
      attr.value.floats.data = copy;
      break;
    case STAX_ATTR_INT:
    case STAX_ATTR_FLOAT:
      break;
    default:
      return stax_status_make(STAX_INTERNAL, "stax_onnx_attrs_set: attribute '%s' has type %s",
                              attr.name, stax_attr_type_name(attr.type));
  }
  stax_onnx_attrs_remove(attrs, attr.name);
  STAX_RETURN_IF_ERROR(stax_onnx_attrs_reserve(importer, attrs, attrs->count + 1));
  attrs->items[attrs->count++] = attr;
  return STAX_OK;
}

/* ---- conversion -------------------------------------------------------------------------- */

/* IR version 1 files may leave `type` out; the field in use says it. */
static Onnx__AttributeProto__AttributeType stax_onnx_attribute_type(
    const Onnx__AttributeProto* attribute) {
  if (attribute->has_type) return attribute->type;
  if (attribute->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (attribute->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (attribute->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (attribute->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (attribute->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
  if (attribute->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  if (attribute->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  if (attribute->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static const char* stax_onnx_attribute_type_name(Onnx__AttributeProto__AttributeType type) {
  switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "GRAPHS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "SPARSE_TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "SPARSE_TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "TYPE_PROTO";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "TYPE_PROTOS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED: return "UNDEFINED";
    default: return "unknown";
  }
}

/* A NUL-terminated copy of protobuf bytes; embedded NULs would silently cut the string. */
static stax_status_t stax_onnx_copy_string(stax_onnx_importer_t* importer,
                                           ProtobufCBinaryData bytes, const char* what,
                                           const char** out_text) {
  *out_text = NULL;
  if (bytes.len > 0 && memchr(bytes.data, '\0', bytes.len) != NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s contains a NUL byte", what);
  }
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&importer->arena, bytes.len + 1, 1, &memory));
  if (bytes.len) memcpy(memory, bytes.data, bytes.len);
  ((char*)memory)[bytes.len] = '\0';
  *out_text = memory;
  return STAX_OK;
}

static stax_status_t stax_onnx_check_count(size_t count, const char* what) {
  if (count > (size_t)INT32_MAX) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s has %zu values; at most %d", what, count,
                            INT32_MAX);
  }
  return STAX_OK;
}

/* Types for a Loop body's inputs when the model leaves them out: (iteration, condition,
 * carried values...) follow the Loop node's inputs. */
static int32_t stax_onnx_loop_hints(stax_onnx_scope_t* scope, const stax_value_id_t* inputs,
                                    int32_t input_count, stax_onnx_input_hint_t* hints,
                                    int32_t capacity) {
  int32_t count = input_count < capacity ? input_count : capacity;
  for (int32_t i = 0; i < count; i++) {
    hints[i].dtype = STAX_DTYPE_INVALID;
    hints[i].rank = -1;
    hints[i].is_sequence = false;
    if (i == 0) {
      hints[i].dtype = STAX_DTYPE_INT64;
      hints[i].rank = 0;
    } else if (i == 1) {
      hints[i].dtype = STAX_DTYPE_BOOL;
      hints[i].rank = 0;
    } else if (inputs[i] != STAX_VALUE_NONE) {
      hints[i].dtype = stax_value_dtype(scope->graph, inputs[i]);
      hints[i].rank = stax_value_rank(scope->graph, inputs[i]);
      hints[i].is_sequence = stax_value_is_sequence(scope->graph, inputs[i]);
    }
  }
  return count;
}

static stax_status_t stax_onnx_convert_graph_attribute(stax_onnx_scope_t* scope,
                                                       const Onnx__AttributeProto* attribute,
                                                       const char* node_name, stax_op_t op,
                                                       const stax_value_id_t* inputs,
                                                       int32_t input_count,
                                                       stax_graph_t** out_graph) {
  *out_graph = NULL;
  stax_onnx_importer_t* importer = scope->importer;
  enum { hint_capacity = 64 };
  stax_onnx_input_hint_t hints[hint_capacity];
  int32_t hint_count = 0;
  if (op == STAX_OP_Loop && strcmp(attribute->name, "body") == 0) {
    hint_count = stax_onnx_loop_hints(scope, inputs, input_count, hints, hint_capacity);
  }
  char what_buffer[512];
  snprintf(what_buffer, sizeof(what_buffer), "%s node '%s' attribute '%s'", stax_op_name(op),
           node_name, attribute->name);
  const char* what = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_strdup(&importer->arena, what_buffer, &what));
  stax_graph_t* subgraph = NULL;
  STAX_RETURN_IF_ERROR(stax_graph_create_subgraph(scope->graph, &subgraph));
  stax_status_t status = stax_onnx_import_graph(importer, scope, attribute->g, what, subgraph,
                                                hint_count, hints);
  if (status != STAX_OK) {
    stax_graph_destroy(subgraph);
    return status;
  }
  *out_graph = subgraph;
  return STAX_OK;
}

static stax_status_t stax_onnx_convert_attribute(stax_onnx_scope_t* scope,
                                                 const Onnx__AttributeProto* attribute,
                                                 const char* node_name, stax_op_t op,
                                                 const stax_value_id_t* inputs,
                                                 int32_t input_count, stax_attr_t* out_attr) {
  stax_onnx_importer_t* importer = scope->importer;
  char what[384];
  snprintf(what, sizeof(what), "%s node '%s' attribute '%s'", stax_op_name(op), node_name,
           attribute->name);
  if (attribute->ref_attr_name && attribute->ref_attr_name[0]) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s refers to function attribute '%s'; references are only valid "
                            "inside functions",
                            what, attribute->ref_attr_name);
  }
  const char* name = attribute->name;
  Onnx__AttributeProto__AttributeType type = stax_onnx_attribute_type(attribute);
  switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
      *out_attr = stax_attr_float(name, attribute->f);
      return STAX_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
      *out_attr = stax_attr_int(name, attribute->i);
      return STAX_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
      const char* text = NULL;
      STAX_RETURN_IF_ERROR(stax_onnx_copy_string(importer, attribute->s, what, &text));
      *out_attr = stax_attr_string(name, text);
      return STAX_OK;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
      STAX_RETURN_IF_ERROR(stax_onnx_check_count(attribute->n_floats, what));
      *out_attr = stax_attr_floats(name, (int32_t)attribute->n_floats, attribute->floats);
      return STAX_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
      STAX_RETURN_IF_ERROR(stax_onnx_check_count(attribute->n_ints, what));
      *out_attr = stax_attr_ints(name, (int32_t)attribute->n_ints, attribute->ints);
      return STAX_OK;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
      STAX_RETURN_IF_ERROR(stax_onnx_check_count(attribute->n_strings, what));
      const char** texts = NULL;
      if (attribute->n_strings) {
        void* memory = NULL;
        STAX_RETURN_IF_ERROR(stax_arena_alloc(&importer->arena,
                                              attribute->n_strings * sizeof(const char*), 0,
                                              &memory));
        texts = memory;
      }
      for (size_t i = 0; i < attribute->n_strings; i++) {
        STAX_RETURN_IF_ERROR(
            stax_onnx_copy_string(importer, attribute->strings[i], what, &texts[i]));
      }
      *out_attr = stax_attr_strings(name, (int32_t)attribute->n_strings, texts);
      return STAX_OK;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
      if (attribute->t == NULL) {
        return stax_status_make(STAX_INVALID_ARGUMENT, "%s has type TENSOR but no tensor", what);
      }
      stax_tensor_t* tensor = NULL;
      STAX_RETURN_IF_ERROR(stax_onnx_tensor_from_proto(importer->allocator, attribute->t, what,
                                                       importer->external_directory, &tensor));
      *out_attr = stax_attr_tensor(name, tensor);
      return STAX_OK;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: {
      if (attribute->g == NULL) {
        return stax_status_make(STAX_INVALID_ARGUMENT, "%s has type GRAPH but no graph", what);
      }
      stax_graph_t* subgraph = NULL;
      STAX_RETURN_IF_ERROR(stax_onnx_convert_graph_attribute(scope, attribute, node_name, op,
                                                             inputs, input_count, &subgraph));
      *out_attr = stax_attr_graph(name, subgraph);
      return STAX_OK;
    }
    default:
      return stax_status_make(STAX_UNIMPLEMENTED,
                              "%s has type %s, which stax does not support", what,
                              stax_onnx_attribute_type_name(type));
  }
}

stax_status_t stax_onnx_attrs_convert(stax_onnx_scope_t* scope, const Onnx__NodeProto* node,
                                      const char* node_name, stax_op_t op,
                                      const stax_value_id_t* inputs, int32_t input_count,
                                      stax_onnx_attrs_t* attrs) {
  stax_onnx_importer_t* importer = scope->importer;
  for (size_t a = 0; a < node->n_attribute; a++) {
    const Onnx__AttributeProto* attribute = node->attribute[a];
    if (attribute == NULL || attribute->name == NULL || attribute->name[0] == '\0') {
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s': attribute %zu has no name",
                              stax_op_name(op), node_name, a);
    }
    if (stax_onnx_attrs_find(attrs, attribute->name)) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s node '%s' has attribute '%s' more than once", stax_op_name(op),
                              node_name, attribute->name);
    }
    STAX_RETURN_IF_ERROR(stax_onnx_attrs_reserve(importer, attrs, attrs->count + 1));
    stax_attr_t attr;
    STAX_RETURN_IF_ERROR(stax_onnx_convert_attribute(scope, attribute, node_name, op, inputs,
                                                     input_count, &attr));
    attrs->items[attrs->count++] = attr;
  }
  return STAX_OK;
}
