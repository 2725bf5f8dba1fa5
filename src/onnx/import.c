/* The ONNX importer's public entry points (include/stax/onnx.h): model files and bytes to
 * graphs, the unsupported-op check, and TensorProto files to tensors. Each parses with
 * protobuf-c through the caller's allocator and frees the parsed message before returning. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static const stax_onnx_import_options_t stax_onnx_default_options = {0};

/* Parses a ModelProto that has a graph. */
static stax_status_t stax_onnx_parse_model(stax_onnx_proto_allocator_t* proto_allocator,
                                           const void* data, size_t size, const char* name,
                                           Onnx__ModelProto** out_model) {
  *out_model = NULL;
  ProtobufCMessage* message = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_unpack(proto_allocator, &onnx__model_proto__descriptor, data,
                                        size, name, &message));
  Onnx__ModelProto* model = (Onnx__ModelProto*)message;
  if (model->graph == NULL) {
    protobuf_c_message_free_unpacked(message, &proto_allocator->base);
    return stax_status_make(STAX_PARSE_ERROR, "'%s' is not an ONNX model: it has no graph",
                            name);
  }
  *out_model = model;
  return STAX_OK;
}

/* The report as an UNIMPLEMENTED status, or OK when it is empty. */
static stax_status_t stax_onnx_report_status(stax_allocator_t allocator,
                                             const stax_onnx_op_report_t* report,
                                             const char* name) {
  if (stax_onnx_op_report_count(report) == 0) return STAX_OK;
  int length = stax_onnx_op_report_print(report, NULL, 0);
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, (size_t)length + 1, &memory));
  stax_onnx_op_report_print(report, memory, (size_t)length + 1);
  stax_status_t status = stax_status_make(STAX_UNIMPLEMENTED, "model '%s' uses %s", name,
                                          (const char*)memory);
  stax_allocator_free(allocator, memory, (size_t)length + 1);
  return status;
}

static stax_status_t stax_onnx_import_model(stax_allocator_t allocator,
                                            const Onnx__ModelProto* model, const char* name,
                                            const char* external_directory,
                                            const stax_onnx_import_options_t* options,
                                            stax_graph_t** out_graph) {
  /* The opset first: a model newer than stax gets one message saying how to convert it
   * rather than every one of its ops listed as unsupported. */
  int64_t opset = 0;
  STAX_RETURN_IF_ERROR(stax_onnx_model_opset(model, name, &opset));
  stax_onnx_op_report_t* report = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_op_report_build(allocator, model, &report));
  stax_status_t status = stax_onnx_report_status(allocator, report, name);
  stax_onnx_op_report_destroy(report);
  STAX_RETURN_IF_ERROR(status);

  stax_onnx_importer_t importer;
  memset(&importer, 0, sizeof(importer));
  importer.allocator = allocator;
  importer.model_name = name;
  importer.external_directory = external_directory;
  importer.options = options ? options : &stax_onnx_default_options;
  importer.opset = opset;
  stax_arena_init(&importer.arena, allocator, 0);
  stax_graph_t* graph = NULL;
  STAX_GOTO_IF_ERROR(status, stax_graph_create(allocator, &graph), cleanup);
  char what[300];
  const char* graph_name = model->graph->name;
  if (graph_name && graph_name[0]) {
    snprintf(what, sizeof(what), "graph '%.256s'", graph_name);
  } else {
    snprintf(what, sizeof(what), "the model's graph");
  }
  STAX_GOTO_IF_ERROR(status,
                     stax_onnx_import_graph(&importer, NULL, model->graph, what, graph, 0, NULL),
                     cleanup);
  STAX_GOTO_IF_ERROR(status, stax_graph_verify(graph), cleanup);
  STAX_LOG(ONNX, "imported '%s': opset %lld, %d nodes, %d inputs, %d outputs", name,
           (long long)importer.opset, stax_graph_node_count(graph),
           stax_graph_input_count(graph), stax_graph_output_count(graph));
  *out_graph = graph;
  graph = NULL;

cleanup:
  stax_graph_destroy(graph);
  stax_arena_deinit(&importer.arena);
  if (status != STAX_OK) status = stax_status_annotate(status, "model '%s'", name);
  return status;
}

static stax_status_t stax_onnx_import_bytes(stax_allocator_t allocator, const void* data,
                                            size_t size, const char* name,
                                            const char* external_directory,
                                            const stax_onnx_import_options_t* options,
                                            stax_graph_t** out_graph) {
  stax_onnx_proto_allocator_t proto_allocator;
  stax_onnx_proto_allocator_init(&proto_allocator, allocator);
  Onnx__ModelProto* model = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_parse_model(&proto_allocator, data, size, name, &model));
  stax_status_t status =
      stax_onnx_import_model(allocator, model, name, external_directory, options, out_graph);
  protobuf_c_message_free_unpacked(&model->base, &proto_allocator.base);
  return status;
}

stax_status_t stax_onnx_import_file(stax_allocator_t allocator, const char* path,
                                    const stax_onnx_import_options_t* options,
                                    stax_graph_t** out_graph) {
  if (out_graph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_onnx_import_file: out_graph is NULL");
  }
  *out_graph = NULL;
  void* data = NULL;
  size_t size = 0;
  STAX_RETURN_IF_ERROR(stax_onnx_read_file(allocator, path, &data, &size));
  stax_arena_t arena;
  stax_arena_init(&arena, allocator, 256);
  const char* directory = NULL;
  stax_status_t status = stax_onnx_directory_of(&arena, path, &directory);
  if (status == STAX_OK) {
    status = stax_onnx_import_bytes(allocator, data, size, path, directory, options, out_graph);
  }
  stax_arena_deinit(&arena);
  stax_allocator_free(allocator, data, size);
  return status;
}

stax_status_t stax_onnx_import_memory(stax_allocator_t allocator, const void* data, size_t size,
                                      const char* name, const stax_onnx_import_options_t* options,
                                      stax_graph_t** out_graph) {
  if (out_graph == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_onnx_import_memory: out_graph is NULL");
  }
  *out_graph = NULL;
  const char* directory = options ? options->external_data_directory : NULL;
  return stax_onnx_import_bytes(allocator, data, size, name ? name : "(memory)", directory,
                                options, out_graph);
}

/* ---- the unsupported-op check -------------------------------------------------------------- */

stax_status_t stax_onnx_check_ops_memory(stax_allocator_t allocator, const void* data,
                                         size_t size, const char* name,
                                         stax_onnx_op_report_t** out_report) {
  if (out_report == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_onnx_check_ops: out_report is NULL");
  }
  *out_report = NULL;
  stax_onnx_proto_allocator_t proto_allocator;
  stax_onnx_proto_allocator_init(&proto_allocator, allocator);
  Onnx__ModelProto* model = NULL;
  STAX_RETURN_IF_ERROR(
      stax_onnx_parse_model(&proto_allocator, data, size, name ? name : "(memory)", &model));
  stax_status_t status = stax_onnx_op_report_build(allocator, model, out_report);
  protobuf_c_message_free_unpacked(&model->base, &proto_allocator.base);
  return status;
}

stax_status_t stax_onnx_check_ops_file(stax_allocator_t allocator, const char* path,
                                       stax_onnx_op_report_t** out_report) {
  if (out_report == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_onnx_check_ops: out_report is NULL");
  }
  *out_report = NULL;
  void* data = NULL;
  size_t size = 0;
  STAX_RETURN_IF_ERROR(stax_onnx_read_file(allocator, path, &data, &size));
  stax_status_t status = stax_onnx_check_ops_memory(allocator, data, size, path, out_report);
  stax_allocator_free(allocator, data, size);
  return status;
}

/* ---- TensorProto files ------------------------------------------------------------------- */

void stax_onnx_string_free(stax_allocator_t allocator, char* string) {
  if (string != NULL) stax_allocator_free(allocator, string, strlen(string) + 1);
}

stax_status_t stax_onnx_parse_tensor(stax_allocator_t allocator, const void* data, size_t size,
                                     const char* name, stax_tensor_t** out_tensor,
                                     char** out_tensor_name) {
  if (out_tensor_name) *out_tensor_name = NULL;
  if (out_tensor == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_onnx_parse_tensor: out_tensor is NULL");
  }
  *out_tensor = NULL;
  if (name == NULL) name = "(memory)";
  stax_onnx_proto_allocator_t proto_allocator;
  stax_onnx_proto_allocator_init(&proto_allocator, allocator);
  ProtobufCMessage* message = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_unpack(&proto_allocator, &onnx__tensor_proto__descriptor, data,
                                        size, name, &message));
  const Onnx__TensorProto* proto = (const Onnx__TensorProto*)message;
  const char* tensor_name = proto->name ? proto->name : "";
  char what[512];
  snprintf(what, sizeof(what), "tensor '%.200s' in '%.200s'", tensor_name, name);
  stax_tensor_t* tensor = NULL;
  stax_status_t status = stax_onnx_tensor_from_proto(allocator, proto, what, NULL, &tensor);
  char* copy = NULL;
  if (status == STAX_OK && out_tensor_name) {
    size_t length = strlen(tensor_name) + 1;
    void* memory = NULL;
    status = stax_allocator_malloc(allocator, length, &memory);
    if (status == STAX_OK) {
      memcpy(memory, tensor_name, length);
      copy = memory;
    }
  }
  protobuf_c_message_free_unpacked(message, &proto_allocator.base);
  if (status != STAX_OK) {
    stax_tensor_release(tensor);
    return status;
  }
  *out_tensor = tensor;
  if (out_tensor_name) *out_tensor_name = copy;
  return STAX_OK;
}

stax_status_t stax_onnx_load_tensor_file(stax_allocator_t allocator, const char* path,
                                         stax_tensor_t** out_tensor, char** out_name) {
  if (out_name) *out_name = NULL;
  if (out_tensor == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "stax_onnx_load_tensor_file: out_tensor is NULL");
  }
  *out_tensor = NULL;
  void* data = NULL;
  size_t size = 0;
  STAX_RETURN_IF_ERROR(stax_onnx_read_file(allocator, path, &data, &size));
  stax_status_t status = stax_onnx_parse_tensor(allocator, data, size, path, out_tensor, out_name);
  stax_allocator_free(allocator, data, size);
  return status;
}
