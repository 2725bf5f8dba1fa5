/* SequenceMap (opset 17) by its ONNX function: the body runs once per element, as a Loop over
 * the first input's length. The importer writes that expansion as protobuf nodes and converts
 * them as if the model had them:
 *
 *   alias_k   = Identity(input_k)                 (so body names never shadow the inputs)
 *   length    = SequenceLength(alias_0)
 *   empty_j   = SequenceEmpty(dtype of body output j)
 *   outputs   = Loop(length, "", empty_j...) with the body
 *     (iteration, cond, acc_j...) ->
 *       body input k := SequenceAt(alias_k, iteration) for sequence inputs, Identity(alias_k)
 *                       for tensor inputs
 *       ... the SequenceMap body's nodes, initializers and value_info ...
 *       (Identity(cond), SequenceInsert(acc_j, body output j)...)
 *
 * Every sequence input must be as long as the first (SequenceAt reports the position and the
 * length otherwise). Everything is allocated in the importer's arena. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

typedef struct stax_onnx_builder_t {
  stax_onnx_scope_t* scope;
  const char* base; /* the node's name: fresh names derive from it */
} stax_onnx_builder_t;

static stax_status_t stax_onnx_build_alloc(stax_onnx_builder_t* b, size_t size, void** out) {
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&b->scope->importer->arena, size, 16, out));
  memset(*out, 0, size);
  return STAX_OK;
}

static stax_status_t stax_onnx_build_name(stax_onnx_builder_t* b, const char* suffix,
                                          char** out_name) {
  const char* name = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_scope_new_name(b->scope, b->base, suffix, &name));
  *out_name = (char*)name;
  return STAX_OK;
}

/* A node with up to 3 inputs and one output; `attribute` may be NULL. */
static stax_status_t stax_onnx_build_node(stax_onnx_builder_t* b, const char* op_type,
                                          int32_t input_count, char* const* inputs, char* output,
                                          Onnx__AttributeProto* attribute,
                                          Onnx__NodeProto** out_node) {
  Onnx__NodeProto* node = NULL;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(*node), &memory));
  node = memory;
  Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;
  *node = init;
  node->op_type = (char*)op_type;
  STAX_RETURN_IF_ERROR(stax_onnx_build_name(b, op_type, &node->name));
  node->n_input = (size_t)input_count;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(char*) * (size_t)(input_count + 1), &memory));
  node->input = memory;
  for (int32_t k = 0; k < input_count; k++) node->input[k] = inputs[k];
  node->n_output = 1;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(char*), &memory));
  node->output = memory;
  node->output[0] = output;
  if (attribute) {
    STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(Onnx__AttributeProto*), &memory));
    node->attribute = memory;
    node->attribute[0] = attribute;
    node->n_attribute = 1;
  }
  *out_node = node;
  return STAX_OK;
}

/* A ValueInfoProto: a scalar tensor of `elem_type`, or (sequence_of != NULL) a sequence of
 * that tensor type. */
static stax_status_t stax_onnx_build_info(stax_onnx_builder_t* b, char* name, int32_t elem_type,
                                          Onnx__TypeProto* sequence_of,
                                          Onnx__ValueInfoProto** out_info) {
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(Onnx__ValueInfoProto), &memory));
  Onnx__ValueInfoProto* info = memory;
  Onnx__ValueInfoProto info_init = ONNX__VALUE_INFO_PROTO__INIT;
  *info = info_init;
  info->name = name;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(Onnx__TypeProto), &memory));
  Onnx__TypeProto* type = memory;
  Onnx__TypeProto type_init = ONNX__TYPE_PROTO__INIT;
  *type = type_init;
  if (sequence_of) {
    STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(Onnx__TypeProto__Sequence), &memory));
    Onnx__TypeProto__Sequence* sequence = memory;
    Onnx__TypeProto__Sequence sequence_init = ONNX__TYPE_PROTO__SEQUENCE__INIT;
    *sequence = sequence_init;
    sequence->elem_type = sequence_of;
    type->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
    type->sequence_type = sequence;
  } else {
    STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(Onnx__TypeProto__Tensor), &memory));
    Onnx__TypeProto__Tensor* tensor = memory;
    Onnx__TypeProto__Tensor tensor_init = ONNX__TYPE_PROTO__TENSOR__INIT;
    *tensor = tensor_init;
    tensor->has_elem_type = 1;
    tensor->elem_type = elem_type;
    STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(Onnx__TensorShapeProto), &memory));
    Onnx__TensorShapeProto* shape = memory;
    Onnx__TensorShapeProto shape_init = ONNX__TENSOR_SHAPE_PROTO__INIT;
    *shape = shape_init; /* no dims: a scalar */
    tensor->shape = shape;
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tensor;
  }
  info->type = type;
  *out_info = info;
  return STAX_OK;
}

static stax_status_t stax_onnx_build_array(stax_onnx_builder_t* b, size_t count, void*** out) {
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(b, sizeof(void*) * (count ? count : 1), &memory));
  *out = memory;
  return STAX_OK;
}

stax_status_t stax_onnx_convert_sequence_map(stax_onnx_scope_t* scope,
                                             const Onnx__NodeProto* node, int32_t index) {
  char base_buffer[64];
  snprintf(base_buffer, sizeof(base_buffer), "SequenceMap_%d", (int)index);
  const char* node_name = node->name && node->name[0] ? node->name : base_buffer;
  stax_onnx_builder_t b = {scope, node_name};
  const Onnx__GraphProto* body = NULL;
  for (size_t a = 0; a < node->n_attribute; a++)
    if (node->attribute[a] && node->attribute[a]->name &&
        strcmp(node->attribute[a]->name, "body") == 0)
      body = node->attribute[a]->g;
  if (!body)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "SequenceMap node '%s': attribute 'body' (a graph) is required",
                            node_name);
  size_t inputs = node->n_input, outputs = node->n_output;
  if (inputs < 1 || outputs < 1 || body->n_input != inputs || body->n_output != outputs)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "SequenceMap node '%s': %zu inputs and %zu outputs, but its body has "
                            "%zu inputs and %zu outputs",
                            node_name, inputs, outputs, body->n_input, body->n_output);
  /* Which inputs are sequences, and the aliases the body reads them through. */
  bool* is_sequence = NULL;
  char** aliases = NULL;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(&b, inputs * sizeof(bool), &memory));
  is_sequence = memory;
  STAX_RETURN_IF_ERROR(stax_onnx_build_array(&b, inputs, (void***)&aliases));
  for (size_t k = 0; k < inputs; k++) {
    const char* name = node->input[k];
    stax_value_id_t value = STAX_VALUE_NONE;
    if (name && name[0]) STAX_RETURN_IF_ERROR(stax_onnx_scope_resolve(scope, name, &value));
    if (value == STAX_VALUE_NONE)
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "SequenceMap node '%s': input %zu '%s' is not produced by any node, "
                              "initializer or input",
                              node_name, k, name ? name : "");
    is_sequence[k] = stax_value_is_sequence(scope->graph, value);
    if (k == 0 && !is_sequence[k])
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "SequenceMap node '%s': input 0 '%s' is a tensor; it must be a "
                              "sequence",
                              node_name, name);
    Onnx__NodeProto* alias = NULL;
    STAX_RETURN_IF_ERROR(stax_onnx_build_name(&b, "input", &aliases[k]));
    STAX_RETURN_IF_ERROR(stax_onnx_build_node(&b, "Identity", 1, &node->input[k], aliases[k],
                                              NULL, &alias));
    STAX_RETURN_IF_ERROR(stax_onnx_convert_node(scope, alias, index));
  }
  char* length = NULL;
  Onnx__NodeProto* length_node = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_name(&b, "length", &length));
  STAX_RETURN_IF_ERROR(stax_onnx_build_node(&b, "SequenceLength", 1, &aliases[0], length, NULL,
                                            &length_node));
  STAX_RETURN_IF_ERROR(stax_onnx_convert_node(scope, length_node, index));

  /* The Loop body. */
  Onnx__GraphProto* loop_body = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(&b, sizeof(*loop_body), &memory));
  loop_body = memory;
  Onnx__GraphProto graph_init = ONNX__GRAPH_PROTO__INIT;
  *loop_body = graph_init;
  loop_body->name = (char*)"SequenceMap body";
  char *iteration = NULL, *cond = NULL, *cond_out = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_name(&b, "iteration", &iteration));
  STAX_RETURN_IF_ERROR(stax_onnx_build_name(&b, "cond", &cond));
  STAX_RETURN_IF_ERROR(stax_onnx_build_name(&b, "cond_out", &cond_out));
  loop_body->n_input = 2 + outputs;
  loop_body->n_output = 1 + outputs;
  STAX_RETURN_IF_ERROR(stax_onnx_build_array(&b, loop_body->n_input, (void***)&loop_body->input));
  STAX_RETURN_IF_ERROR(stax_onnx_build_array(&b, loop_body->n_output, (void***)&loop_body->output));
  STAX_RETURN_IF_ERROR(stax_onnx_build_info(&b, iteration, ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
                                            NULL, &loop_body->input[0]));
  STAX_RETURN_IF_ERROR(stax_onnx_build_info(&b, cond, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, NULL,
                                            &loop_body->input[1]));
  STAX_RETURN_IF_ERROR(stax_onnx_build_info(&b, cond_out, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL,
                                            NULL, &loop_body->output[0]));
  size_t node_count = 1 + inputs + body->n_node + outputs;
  STAX_RETURN_IF_ERROR(stax_onnx_build_array(&b, node_count, (void***)&loop_body->node));
  size_t n = 0;
  STAX_RETURN_IF_ERROR(stax_onnx_build_node(&b, "Identity", 1, &cond, cond_out, NULL,
                                            &loop_body->node[n++]));
  for (size_t k = 0; k < inputs; k++) {
    const char* element = body->input[k] ? body->input[k]->name : NULL;
    if (!element || !element[0])
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "SequenceMap node '%s': body input %zu has no name", node_name, k);
    char* at_inputs[2] = {aliases[k], iteration};
    STAX_RETURN_IF_ERROR(stax_onnx_build_node(&b, is_sequence[k] ? "SequenceAt" : "Identity",
                                              is_sequence[k] ? 2 : 1, at_inputs, (char*)element,
                                              NULL, &loop_body->node[n++]));
  }
  for (size_t k = 0; k < body->n_node; k++) loop_body->node[n++] = body->node[k];
  Onnx__NodeProto** empties = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_array(&b, outputs, (void***)&empties));
  for (size_t j = 0; j < outputs; j++) {
    const Onnx__ValueInfoProto* result = body->output[j];
    const Onnx__TypeProto* type = result ? result->type : NULL;
    if (!result || !result->name || !type ||
        type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !type->tensor_type ||
        !type->tensor_type->has_elem_type)
      return stax_status_make(STAX_UNIMPLEMENTED,
                              "SequenceMap node '%s': body output %zu needs a tensor type with an "
                              "element type (the dtype of output sequence %zu)",
                              node_name, j, j);
    /* Names made here are not bound until the body is imported: number them apart. */
    char *acc = NULL, *acc_out = NULL, *empty = NULL, suffix[48];
    snprintf(suffix, sizeof(suffix), "acc_%zu", j);
    STAX_RETURN_IF_ERROR(stax_onnx_build_name(&b, suffix, &acc));
    snprintf(suffix, sizeof(suffix), "acc_out_%zu", j);
    STAX_RETURN_IF_ERROR(stax_onnx_build_name(&b, suffix, &acc_out));
    snprintf(suffix, sizeof(suffix), "empty_%zu", j);
    STAX_RETURN_IF_ERROR(stax_onnx_build_name(&b, suffix, &empty));
    /* The carried sequences hold the body output's tensor type. */
    STAX_RETURN_IF_ERROR(stax_onnx_build_info(&b, acc, 0, (Onnx__TypeProto*)type,
                                              &loop_body->input[2 + j]));
    STAX_RETURN_IF_ERROR(stax_onnx_build_info(&b, acc_out, 0, (Onnx__TypeProto*)type,
                                              &loop_body->output[1 + j]));
    char* insert_inputs[2] = {acc, result->name};
    STAX_RETURN_IF_ERROR(stax_onnx_build_node(&b, "SequenceInsert", 2, insert_inputs, acc_out,
                                              NULL, &loop_body->node[n++]));
    Onnx__AttributeProto* dtype = NULL;
    STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(&b, sizeof(*dtype), &memory));
    dtype = memory;
    Onnx__AttributeProto attribute_init = ONNX__ATTRIBUTE_PROTO__INIT;
    *dtype = attribute_init;
    dtype->name = (char*)"dtype";
    dtype->has_type = 1;
    dtype->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    dtype->has_i = 1;
    dtype->i = type->tensor_type->elem_type;
    STAX_RETURN_IF_ERROR(stax_onnx_build_node(&b, "SequenceEmpty", 0, NULL, empty, dtype,
                                              &empties[j]));
    STAX_RETURN_IF_ERROR(stax_onnx_convert_node(scope, empties[j], index));
  }
  loop_body->n_node = n;
  loop_body->n_initializer = body->n_initializer;
  loop_body->initializer = body->initializer;
  loop_body->n_sparse_initializer = body->n_sparse_initializer;
  loop_body->sparse_initializer = body->sparse_initializer;
  loop_body->n_value_info = body->n_value_info;
  loop_body->value_info = body->value_info;

  /* The Loop itself, named after the SequenceMap and giving its outputs. */
  Onnx__NodeProto* loop = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(&b, sizeof(*loop), &memory));
  loop = memory;
  Onnx__NodeProto node_init = ONNX__NODE_PROTO__INIT;
  *loop = node_init;
  loop->op_type = (char*)"Loop";
  loop->name = (char*)node_name;
  loop->n_input = 2 + outputs;
  STAX_RETURN_IF_ERROR(stax_onnx_build_array(&b, loop->n_input, (void***)&loop->input));
  loop->input[0] = length;
  loop->input[1] = (char*)"";
  for (size_t j = 0; j < outputs; j++) loop->input[2 + j] = empties[j]->output[0];
  loop->n_output = outputs;
  loop->output = node->output;
  Onnx__AttributeProto* body_attribute = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_build_alloc(&b, sizeof(*body_attribute), &memory));
  body_attribute = memory;
  Onnx__AttributeProto attribute_init = ONNX__ATTRIBUTE_PROTO__INIT;
  *body_attribute = attribute_init;
  body_attribute->name = (char*)"body";
  body_attribute->has_type = 1;
  body_attribute->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
  body_attribute->g = loop_body;
  STAX_RETURN_IF_ERROR(stax_onnx_build_array(&b, 1, (void***)&loop->attribute));
  loop->attribute[0] = body_attribute;
  loop->n_attribute = 1;
  return stax_onnx_convert_node(scope, loop, index);
}
