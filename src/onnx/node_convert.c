/* One ONNX node -> stax node(s): resolves input names (capturing outer values in subgraphs),
 * names every output (omitted optional outputs get private names), converts attributes, runs
 * the per-opset rewrites, and adds the node, whose shape function checks it at once. Also the
 * helpers rewrites use to add constants and extra nodes. */
#include <stdio.h>
#include <string.h>

#include "ir/graph_internal.h"
#include "onnx/onnx_internal.h"

stax_status_t stax_onnx_node_set_input(stax_onnx_node_t* node, int32_t i, stax_value_id_t value) {
  if (i >= node->input_capacity) {
    int32_t capacity = node->input_capacity ? node->input_capacity * 2 : 8;
    while (capacity <= i) capacity *= 2;
    void* memory = NULL;
    STAX_RETURN_IF_ERROR(stax_arena_alloc(&node->scope->importer->arena,
                                          (size_t)capacity * sizeof(stax_value_id_t), 0,
                                          &memory));
    if (node->input_count) {
      memcpy(memory, node->inputs, (size_t)node->input_count * sizeof(stax_value_id_t));
    }
    node->inputs = memory;
    node->input_capacity = capacity;
  }
  while (node->input_count <= i) node->inputs[node->input_count++] = STAX_VALUE_NONE;
  node->inputs[i] = value;
  return STAX_OK;
}

stax_status_t stax_onnx_emit(stax_onnx_node_t* node, stax_op_t op, const char* suffix,
                             int32_t input_count, const stax_value_id_t* inputs,
                             int32_t output_count, const char* const* output_names,
                             int32_t attr_count, const stax_attr_t* attrs,
                             stax_value_id_t* out_outputs) {
  stax_onnx_scope_t* scope = node->scope;
  const char* name = node->name;
  if (suffix != NULL) STAX_RETURN_IF_ERROR(stax_onnx_scope_new_name(scope, node->name, suffix, &name));
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&scope->importer->arena,
                                        ((size_t)output_count + 1) * sizeof(const char*), 0,
                                        &memory));
  const char** names = memory;
  for (int32_t o = 0; o < output_count; o++) {
    names[o] = output_names ? output_names[o] : NULL;
    if (names[o] == NULL) {
      char piece[32];
      snprintf(piece, sizeof(piece), "%d", o);
      STAX_RETURN_IF_ERROR(stax_onnx_scope_new_name(scope, name, piece, &names[o]));
    }
  }
  /* Trailing omitted inputs are the same as fewer inputs; ops count their arity that way. */
  int32_t count = input_count;
  while (count > 0 && inputs[count - 1] == STAX_VALUE_NONE) count--;
  stax_node_desc_t desc = {.op = op,
                           .name = name,
                           .input_count = count,
                           .inputs = inputs,
                           .output_count = output_count,
                           .output_names = names,
                           .attr_count = attr_count,
                           .attrs = attrs};
  return stax_graph_add_node(scope->graph, &desc, out_outputs);
}

stax_status_t stax_onnx_node_int64_constant(stax_onnx_node_t* node, const char* suffix,
                                            bool scalar, int32_t count, const int64_t* values,
                                            stax_value_id_t* out_value) {
  *out_value = STAX_VALUE_NONE;
  stax_onnx_importer_t* importer = node->scope->importer;
  int64_t dims[1] = {count};
  stax_tensor_t* tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(importer->allocator, STAX_DTYPE_INT64, scalar ? 0 : 1,
                                          dims, &tensor));
  if (count > 0) memcpy(stax_tensor_data(tensor), values, (size_t)count * sizeof(int64_t));
  stax_status_t status =
      stax_onnx_scope_add_constant(node->scope, node->name, suffix, tensor, out_value);
  stax_tensor_release(tensor);
  return status;
}

stax_status_t stax_onnx_node_scalar_constant(stax_onnx_node_t* node, const char* suffix,
                                             stax_dtype_t dtype, double value,
                                             stax_value_id_t* out_value) {
  *out_value = STAX_VALUE_NONE;
  stax_onnx_importer_t* importer = node->scope->importer;
  stax_tensor_t* tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(importer->allocator, dtype, 0, NULL, &tensor));
  stax_convert_elements(STAX_DTYPE_FLOAT64, &value, dtype, stax_tensor_data(tensor), 1);
  stax_status_t status =
      stax_onnx_scope_add_constant(node->scope, node->name, suffix, tensor, out_value);
  stax_tensor_release(tensor);
  return status;
}

/* The node's name for stax and for messages: its own, or "<op_type>#<index>". */
static stax_status_t stax_onnx_node_name(stax_onnx_importer_t* importer,
                                         const Onnx__NodeProto* proto, int32_t index,
                                         const char** out_name) {
  if (proto->name && proto->name[0]) {
    *out_name = proto->name;
    return STAX_OK;
  }
  char generated[160];
  snprintf(generated, sizeof(generated), "%.100s#%d", proto->op_type ? proto->op_type : "node",
           index);
  return stax_arena_strdup(&importer->arena, generated, out_name);
}

static stax_status_t stax_onnx_node_prepare(stax_onnx_scope_t* scope,
                                            const Onnx__NodeProto* proto, int32_t index,
                                            stax_onnx_node_t* node) {
  stax_onnx_importer_t* importer = scope->importer;
  memset(node, 0, sizeof(*node));
  node->scope = scope;
  node->proto = proto;
  node->op_type = proto->op_type ? proto->op_type : "";
  node->opset = importer->opset;
  STAX_RETURN_IF_ERROR(stax_onnx_node_name(importer, proto, index, &node->name));
  node->op = stax_onnx_op_for_type(node->op_type);
  const char* reason = stax_onnx_unsupported_reason(proto, importer->opset);
  if (reason != NULL) {
    /* The model-wide report runs first; this guards direct callers. */
    return stax_status_make(STAX_UNIMPLEMENTED, "%s node '%s' (opset %lld): %s", node->op_type,
                            node->name, (long long)importer->opset, reason);
  }
  if (proto->n_input > (size_t)INT32_MAX / 2 || proto->n_output > (size_t)INT32_MAX / 2) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s' has too many inputs or outputs",
                            node->op_type, node->name);
  }
  for (size_t i = 0; i < proto->n_input; i++) {
    const char* input = proto->input[i];
    stax_value_id_t value = STAX_VALUE_NONE;
    if (input != NULL && input[0] != '\0') {
      STAX_RETURN_IF_ERROR(stax_onnx_scope_resolve(scope, input, &value));
      if (value == STAX_VALUE_NONE) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s node '%s' input %zu '%s' is not produced by any node, "
                                "initializer or graph input",
                                node->op_type, node->name, i, input);
      }
    }
    STAX_RETURN_IF_ERROR(stax_onnx_node_set_input(node, (int32_t)i, value));
  }
  node->output_count = (int32_t)proto->n_output;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&importer->arena,
                                        ((size_t)node->output_count + 1) * sizeof(const char*),
                                        0, &memory));
  node->output_names = memory;
  for (int32_t o = 0; o < node->output_count; o++) {
    const char* output = proto->output[o];
    if (output == NULL || output[0] == '\0') {
      char piece[48];
      snprintf(piece, sizeof(piece), "unused_output_%d", o);
      STAX_RETURN_IF_ERROR(stax_onnx_scope_new_name(scope, node->name, piece, &output));
    }
    node->output_names[o] = output;
  }
  /* Omitted trailing outputs are the same as fewer outputs (BatchNormalization-9 lists five,
   * stax's has three), down to the op's minimum. */
  while (node->output_count > 1 && node->output_count > stax_op_min_outputs(node->op) &&
         (proto->output[node->output_count - 1] == NULL ||
          proto->output[node->output_count - 1][0] == '\0')) {
    node->output_count--;
  }
  return stax_onnx_attrs_convert(scope, proto, node->name, node->op, node->inputs,
                                 node->input_count, &node->attrs);
}

stax_status_t stax_onnx_convert_node(stax_onnx_scope_t* scope, const Onnx__NodeProto* proto,
                                     int32_t index) {
  if (proto->op_type && strcmp(proto->op_type, "SequenceMap") == 0 &&
      stax_onnx_is_default_domain(proto->domain))
    return stax_onnx_convert_sequence_map(scope, proto, index);
  stax_onnx_node_t node;
  stax_status_t status = stax_onnx_node_prepare(scope, proto, index, &node);
  bool done = false;
  if (status == STAX_OK) status = stax_onnx_legacy_convert(&node, &done);
  if (status == STAX_OK && !done) {
    status = stax_onnx_emit(&node, node.op, NULL, node.input_count, node.inputs,
                            node.output_count, node.output_names, node.attrs.count,
                            node.attrs.items, NULL);
  }
  if (status != STAX_OK) {
    stax_onnx_attrs_discard(&node.attrs);
    return status;
  }
  stax_onnx_attrs_committed(&node.attrs);
  for (size_t o = 0; o < proto->n_output; o++) {
    const char* output = proto->output[o];
    if (output == NULL || output[0] == '\0') continue;
    stax_value_id_t value = stax_graph_find_value(scope->graph, output);
    if (value == STAX_VALUE_NONE) {
      return stax_status_make(STAX_INTERNAL, "%s node '%s': output '%s' was not created",
                              node.op_type, node.name, output);
    }
    STAX_RETURN_IF_ERROR(stax_onnx_scope_bind(scope, output, value));
  }
  return STAX_OK;
}
