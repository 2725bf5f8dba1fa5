/* ONNX import: models are built in the test by filling protobuf-c structs and packing them,
 * then imported from memory or from files. Covers dim_params and symbols, the unsupported-op
 * report, every prefix of a truncated model and byte corruption, bad initializer sizes,
 * dangling inputs, cycles and out-of-order nodes, external data (and paths that escape),
 * per-opset conversions, subgraph captures, TensorProto files, and allocation failures. */
#include <stdarg.h>
#include <unistd.h>

#include "ir/graph_internal.h"
#include "onnx/onnx.pb-c.h"
#include "stax/onnx.h"
#include "test_harness.h"

/* ---- building models ---------------------------------------------------------------------- */

/* Everything the builders allocate, freed by builder_reset(). protobuf-c only reads the
 * structs while packing, so string literals can be stored in them. */
static void* kept[4096];
static int kept_count = 0;

static void* keep(size_t size) {
  void* memory = calloc(1, size ? size : 1);
  if (memory == NULL || kept_count == (int)(sizeof(kept) / sizeof(kept[0]))) abort();
  kept[kept_count++] = memory;
  return memory;
}

static void builder_reset(void) {
  for (int i = 0; i < kept_count; i++) free(kept[i]);
  kept_count = 0;
}

static void* keep_copy(const void* data, size_t size) {
  void* memory = keep(size);
  if (size) memcpy(memory, data, size);
  return memory;
}

#define LIST(T, ...) ((T*[]){__VA_ARGS__}), (sizeof((T*[]){__VA_ARGS__}) / sizeof(T*))
#define NONE_LIST NULL, 0

/* "a,b,,c" -> {"a", "b", "", "c"}; "" -> no names. */
static char** split_names(const char* text, size_t* out_count) {
  *out_count = 0;
  if (text == NULL || text[0] == '\0') return NULL;
  char* copy = keep_copy(text, strlen(text) + 1);
  char** names = keep(64 * sizeof(char*));
  char* start = copy;
  for (char* p = copy;; p++) {
    if (*p == ',' || *p == '\0') {
      bool end = *p == '\0';
      *p = '\0';
      names[(*out_count)++] = start;
      start = p + 1;
      if (end) break;
    }
  }
  return names;
}

/* dims: "4" is a dim_value, "" an unknown dim, anything else a dim_param; rank -1: no shape. */
static Onnx__ValueInfoProto* value_info(const char* name, int32_t elem_type, int rank,
                                        const char* const* dims) {
  Onnx__ValueInfoProto* info = keep(sizeof(*info));
  *info = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
  info->name = (char*)name;
  Onnx__TypeProto* type = keep(sizeof(*type));
  *type = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
  Onnx__TypeProto__Tensor* tensor = keep(sizeof(*tensor));
  *tensor = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
  tensor->has_elem_type = 1;
  tensor->elem_type = elem_type;
  type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  type->tensor_type = tensor;
  info->type = type;
  if (rank < 0) return info;
  Onnx__TensorShapeProto* shape = keep(sizeof(*shape));
  *shape = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
  shape->n_dim = (size_t)rank;
  shape->dim = keep((size_t)(rank + 1) * sizeof(shape->dim[0]));
  for (int d = 0; d < rank; d++) {
    Onnx__TensorShapeProto__Dimension* dim = keep(sizeof(*dim));
    *dim = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    if (dims[d][0] >= '0' && dims[d][0] <= '9') {
      dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      dim->dim_value = atoll(dims[d]);
    } else if (dims[d][0]) {
      dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      dim->dim_param = (char*)dims[d];
    }
    shape->dim[d] = dim;
  }
  tensor->shape = shape;
  return info;
}

#define DIMS(...) ((const char* const[]){__VA_ARGS__})
#define FLOAT_VI(name, rank, ...) value_info(name, 1, rank, DIMS(__VA_ARGS__))

static Onnx__AttributeProto* attribute(const char* name, Onnx__AttributeProto__AttributeType type) {
  Onnx__AttributeProto* attr = keep(sizeof(*attr));
  *attr = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
  attr->name = (char*)name;
  attr->has_type = 1;
  attr->type = type;
  return attr;
}

static Onnx__AttributeProto* attr_int(const char* name, int64_t value) {
  Onnx__AttributeProto* attr = attribute(name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  attr->has_i = 1;
  attr->i = value;
  return attr;
}

static Onnx__AttributeProto* attr_float(const char* name, float value) {
  Onnx__AttributeProto* attr = attribute(name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  attr->has_f = 1;
  attr->f = value;
  return attr;
}

static Onnx__AttributeProto* attr_ints(const char* name, size_t count, const int64_t* values) {
  Onnx__AttributeProto* attr = attribute(name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  attr->n_ints = count;
  attr->ints = keep_copy(values, count * sizeof(int64_t));
  return attr;
}
#define INTS(name, ...)                                                     \
  attr_ints(name, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), \
            (int64_t[]){__VA_ARGS__})

static Onnx__AttributeProto* attr_graph(const char* name, Onnx__GraphProto* graph) {
  Onnx__AttributeProto* attr = attribute(name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
  attr->g = graph;
  return attr;
}

static Onnx__NodeProto* node_with(const char* op_type, const char* name, const char* inputs,
                                  const char* outputs, Onnx__AttributeProto** attrs,
                                  size_t attr_count) {
  Onnx__NodeProto* node = keep(sizeof(*node));
  *node = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
  node->op_type = (char*)op_type;
  node->name = (char*)name;
  node->input = split_names(inputs, &node->n_input);
  node->output = split_names(outputs, &node->n_output);
  node->n_attribute = attr_count;
  node->attribute = keep_copy(attrs, attr_count * sizeof(attrs[0]));
  return node;
}
#define NODE(op, name, in, out) node_with(op, name, in, out, NULL, 0)
#define NODE_ATTRS(op, name, in, out, ...) node_with(op, name, in, out, LIST(Onnx__AttributeProto, __VA_ARGS__))

/* A float32 initializer stored in raw_data. */
static Onnx__TensorProto* float_tensor(const char* name, size_t rank, const int64_t* dims,
                                       const float* values, size_t count) {
  Onnx__TensorProto* tensor = keep(sizeof(*tensor));
  *tensor = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
  tensor->name = (char*)name;
  tensor->has_data_type = 1;
  tensor->data_type = 1;
  tensor->n_dims = rank;
  tensor->dims = keep_copy(dims, rank * sizeof(int64_t));
  tensor->has_raw_data = 1;
  tensor->raw_data.len = count * sizeof(float);
  tensor->raw_data.data = keep_copy(values, count * sizeof(float));
  return tensor;
}

static Onnx__GraphProto* graph_of(const char* name, Onnx__NodeProto** nodes, size_t node_count,
                                  Onnx__TensorProto** inits, size_t init_count,
                                  Onnx__ValueInfoProto** inputs, size_t input_count,
                                  Onnx__ValueInfoProto** outputs, size_t output_count) {
  Onnx__GraphProto* graph = keep(sizeof(*graph));
  *graph = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
  graph->name = (char*)name;
  graph->n_node = node_count;
  graph->node = keep_copy(nodes, node_count * sizeof(nodes[0]));
  graph->n_initializer = init_count;
  graph->initializer = keep_copy(inits, init_count * sizeof(inits[0]));
  graph->n_input = input_count;
  graph->input = keep_copy(inputs, input_count * sizeof(inputs[0]));
  graph->n_output = output_count;
  graph->output = keep_copy(outputs, output_count * sizeof(outputs[0]));
  return graph;
}

/* Packs a model around `graph` importing the default domain at `opset` (kept memory). */
static uint8_t* pack_model(Onnx__GraphProto* graph, int64_t opset, size_t* out_size) {
  Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
  model.has_ir_version = 1;
  model.ir_version = 8;
  Onnx__OperatorSetIdProto opset_id = ONNX__OPERATOR_SET_ID_PROTO__INIT;
  opset_id.domain = "";
  opset_id.has_version = 1;
  opset_id.version = opset;
  Onnx__OperatorSetIdProto* opsets[1] = {&opset_id};
  model.n_opset_import = 1;
  model.opset_import = opsets;
  model.graph = graph;
  *out_size = onnx__model_proto__get_packed_size(&model);
  uint8_t* data = keep(*out_size);
  onnx__model_proto__pack(&model, data);
  return data;
}

static stax_status_t import_bytes(const uint8_t* data, size_t size, stax_graph_t** out_graph) {
  return stax_onnx_import_memory(stax_allocator_system(), data, size, "test.onnx", NULL,
                                 out_graph);
}

static const int64_t dims_4x3[] = {4, 3};
static const float weights_4x3[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static const int64_t dims_3[] = {3};
static const float bias_3[3] = {0.5f, -1, 2};

/* Y = MatMul(X[B, 4], W[4, 3]) + b[3], output [B, 3]; value_info Y1 [B, 3]. */
static Onnx__GraphProto* matmul_add_graph(const char* output_dim1) {
  Onnx__GraphProto* graph = graph_of(
      "mm", LIST(Onnx__NodeProto, NODE("MatMul", "mm", "X,W", "Y1"), NODE("Add", "add", "Y1,b", "Y")),
      LIST(Onnx__TensorProto, float_tensor("W", 2, dims_4x3, weights_4x3, 12),
           float_tensor("b", 1, dims_3, bias_3, 3)),
      LIST(Onnx__ValueInfoProto, FLOAT_VI("X", 2, "B", "4")),
      LIST(Onnx__ValueInfoProto, FLOAT_VI("Y", 2, "B", output_dim1)));
  graph->n_value_info = 1;
  graph->value_info = keep(sizeof(graph->value_info[0]));
  graph->value_info[0] = FLOAT_VI("Y1", 2, "B", "3");
  return graph;
}

static const char* symbol_name_of(stax_graph_t* graph, const stax_dim_t* dim) {
  stax_symbol_id_t id = -1;
  if (!stax_dim_as_symbol(dim, &id)) return "(not a symbol)";
  return stax_symbol_name(stax_graph_shape_ctx(graph), id);
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_matmul_add_with_dim_params(void) {
  size_t size = 0;
  uint8_t* data = pack_model(matmul_add_graph("3"), 13, &size);
  stax_graph_t* graph = NULL;
  CHECK_OK(import_bytes(data, size, &graph));
  CHECK(graph != NULL);
  if (graph) {
    CHECK_EQ_INT(stax_graph_input_count(graph), 1);
    CHECK_EQ_INT(stax_graph_node_count(graph), 2);
    CHECK_EQ_INT(stax_node_op(graph, 0), STAX_OP_MatMul);
    CHECK_EQ_INT(stax_node_op(graph, 1), STAX_OP_Add);
    stax_value_id_t x = stax_graph_input(graph, 0);
    CHECK_EQ_STR(stax_value_name(graph, x), "X");
    CHECK_EQ_STR(symbol_name_of(graph, stax_value_dims(graph, x)[0]), "B");
    CHECK(stax_dim_is_const(stax_value_dims(graph, x)[1]));
    stax_value_id_t y = stax_graph_output(graph, 0);
    CHECK_EQ_STR(stax_value_name(graph, y), "Y");
    CHECK(stax_value_dims(graph, y)[0] == stax_value_dims(graph, x)[0]);
    CHECK_EQ_INT(stax_dim_const_value(stax_value_dims(graph, y)[1]), 3);
    stax_tensor_t* w = stax_value_constant(graph, stax_graph_find_value(graph, "W"));
    CHECK(w != NULL);
    if (w) CHECK_NEAR(((const float*)stax_tensor_data(w))[11], 12, 0);
    stax_graph_destroy(graph);
  }
  /* A symbol binding fixes the dim_param. */
  stax_onnx_symbol_binding_t binding = {"B", 5};
  stax_onnx_import_options_t options = {.symbol_binding_count = 1, .symbol_bindings = &binding};
  CHECK_OK(stax_onnx_import_memory(stax_allocator_system(), data, size, "test.onnx", &options,
                                   &graph));
  if (graph) {
    const stax_dim_t* dim = stax_value_dims(graph, stax_graph_input(graph, 0))[0];
    CHECK(stax_dim_is_const(dim) && stax_dim_const_value(dim) == 5);
    stax_graph_destroy(graph);
  }
  /* dim_param symbols start at 1 unless the options allow empty dims. */
  stax_onnx_import_options_t zero_options = {.dims_may_be_zero = true};
  CHECK_OK(stax_onnx_import_memory(stax_allocator_system(), data, size, NULL, &zero_options, &graph));
  if (graph) {
    stax_symbol_id_t id = -1;
    int64_t low = -1, high = -1;
    CHECK(stax_dim_as_symbol(stax_value_dims(graph, stax_graph_input(graph, 0))[0], &id));
    stax_symbol_range(stax_graph_shape_ctx(graph), id, &low, &high);
    CHECK_EQ_INT(low, 0);
    stax_graph_destroy(graph);
  }
  /* A declared output dim that contradicts inference is an error naming the output. */
  data = pack_model(matmul_add_graph("7"), 13, &size);
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_SHAPE_MISMATCH, "'Y'");
  CHECK(graph == NULL);
  builder_reset();
}

static void test_value_info_contradiction(void) {
  Onnx__GraphProto* graph_proto = matmul_add_graph("3");
  graph_proto->value_info[0] = FLOAT_VI("Y1", 2, "B", "5");
  size_t size = 0;
  uint8_t* data = pack_model(graph_proto, 13, &size);
  stax_graph_t* graph = NULL;
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_SHAPE_MISMATCH, "value_info of 'Y1'");
  graph_proto->value_info[0] = value_info("Y1", 7, 2, DIMS("B", "3"));
  data = pack_model(graph_proto, 13, &size);
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_DTYPE_MISMATCH, "Y1");
  builder_reset();
}

static void test_unsupported_ops_are_listed_together(void) {
  Onnx__NodeProto* custom = NODE("Relu", "custom_relu", "X", "Z");
  custom->domain = "com.example";
  Onnx__GraphProto* graph_proto = graph_of(
      "g",
      LIST(Onnx__NodeProto, NODE("FancyOp", "fancy_1", "X", "A"), NODE("Relu", "r", "A", "B"),
           NODE("WeirdOp", "weird_1", "B", "C"), NODE("FancyOp", "fancy_2", "C", "D"),
           NODE("FancyOp", "", "D", "E"), custom),
      NONE_LIST, LIST(Onnx__ValueInfoProto, FLOAT_VI("X", 1, "4")),
      LIST(Onnx__ValueInfoProto, FLOAT_VI("E", 1, "4"), FLOAT_VI("Z", 1, "4")));
  size_t size = 0;
  uint8_t* data = pack_model(graph_proto, 13, &size);
  stax_graph_t* graph = NULL;
  stax_status_t status = import_bytes(data, size, &graph);
  CHECK_EQ_INT(stax_status_code(status), STAX_UNIMPLEMENTED);
  const char* message = stax_status_message(status);
  CHECK(strstr(message, "FancyOp") && strstr(message, "'fancy_1'") &&
        strstr(message, "'fancy_2'") && strstr(message, "'#4'"));
  CHECK(strstr(message, "WeirdOp") && strstr(message, "'weird_1'"));
  CHECK(strstr(message, "com.example.Relu") && strstr(message, "domain"));
  CHECK(strstr(message, "opset 13"));
  CHECK(strstr(message, "'r'") == NULL);
  stax_status_free(status);
  CHECK(graph == NULL);

  stax_onnx_op_report_t* report = NULL;
  CHECK_OK(stax_onnx_check_ops_memory(stax_allocator_system(), data, size, "m", &report));
  CHECK_EQ_INT(stax_onnx_op_report_count(report), 3);
  CHECK_EQ_STR(stax_onnx_op_report_op_type(report, 0), "FancyOp");
  CHECK_EQ_STR(stax_onnx_op_report_domain(report, 0), "");
  CHECK_EQ_INT(stax_onnx_op_report_opset(report, 0), 13);
  CHECK_EQ_INT(stax_onnx_op_report_node_count(report, 0), 3);
  CHECK_EQ_STR(stax_onnx_op_report_node_name(report, 0, 1), "fancy_2");
  CHECK_EQ_STR(stax_onnx_op_report_domain(report, 2), "com.example");
  CHECK(stax_onnx_op_report_node_name(report, 0, 9) == NULL);
  CHECK(stax_onnx_op_report_op_type(report, 7) == NULL);
  char small[16];
  int needed = stax_onnx_op_report_print(report, small, sizeof(small));
  CHECK(needed > (int)sizeof(small) && strlen(small) == sizeof(small) - 1);
  stax_onnx_op_report_destroy(report);

  /* A supported model has an empty report. */
  data = pack_model(matmul_add_graph("3"), 13, &size);
  CHECK_OK(stax_onnx_check_ops_memory(stax_allocator_system(), data, size, "m", &report));
  CHECK_EQ_INT(stax_onnx_op_report_count(report), 0);
  stax_onnx_op_report_destroy(report);
  /* Opsets beyond the newest supported are refused as a whole, with stax's maximum and the
   * onnx package's converter named; the newest itself imports. */
  CHECK_EQ_INT(STAX_ONNX_MAX_OPSET, 28);
  data = pack_model(matmul_add_graph("3"), STAX_ONNX_MAX_OPSET, &size);
  CHECK_OK(import_bytes(data, size, &graph));
  stax_graph_destroy(graph);
  graph = NULL;
  data = pack_model(matmul_add_graph("3"), STAX_ONNX_MAX_OPSET + 1, &size);
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_UNIMPLEMENTED,
              "uses default-domain opset 29; stax supports opsets 1 to 28: convert the model "
              "with the onnx package's Python API, "
              "onnx.version_converter.convert_version(model, 28)");
  CHECK_OK(stax_onnx_check_ops_memory(stax_allocator_system(), data, size, "m", &report));
  CHECK_EQ_INT(stax_onnx_op_report_count(report), 2);
  CHECK(strstr(stax_onnx_op_report_reason(report, 0),
               "opset newer than stax supports (at most 28; "
               "onnx.version_converter.convert_version(model, 28)") != NULL);
  stax_onnx_op_report_destroy(report);
  builder_reset();
}

static void test_truncated_and_corrupted_models_fail_cleanly(void) {
  size_t size = 0;
  uint8_t* data = pack_model(matmul_add_graph("3"), 13, &size);
  int ok = 0, failed = 0;
  for (size_t length = 0; length < size; length++) {
    uint8_t* prefix = malloc(length ? length : 1);
    memcpy(prefix, data, length);
    stax_graph_t* graph = NULL;
    stax_status_t status = import_bytes(prefix, length, &graph);
    if (status == STAX_OK) {
      ok++;
      stax_graph_destroy(graph);
    } else {
      failed++;
      CHECK(graph == NULL);
      CHECK(stax_status_message(status)[0] != '\0');
      stax_status_free(status);
    }
    free(prefix);
  }
  CHECK(failed > 0);
  CHECK_EQ_INT(ok + failed, (long long)size);
  /* Flipping any byte must not crash either. */
  uint8_t* copy = malloc(size);
  for (size_t i = 0; i < size; i++) {
    for (int pattern = 0; pattern < 2; pattern++) {
      memcpy(copy, data, size);
      copy[i] = pattern ? (uint8_t)(copy[i] ^ 0xff) : 0x80;
      stax_graph_t* graph = NULL;
      stax_status_t status = import_bytes(copy, size, &graph);
      if (status == STAX_OK) stax_graph_destroy(graph);
      stax_status_free(status);
    }
  }
  free(copy);
  stax_graph_t* graph = NULL;
  static const uint8_t garbage[] = "definitely not a protobuf";
  CHECK_ERROR(import_bytes(garbage, sizeof(garbage), &graph), STAX_PARSE_ERROR, "test.onnx");
  CHECK_ERROR(stax_onnx_import_file(stax_allocator_system(), "/nonexistent/model.onnx", NULL,
                                    &graph),
              STAX_IO_ERROR, "/nonexistent/model.onnx");
  CHECK_ERROR(import_bytes(data, size, NULL), STAX_INVALID_ARGUMENT, NULL);
  builder_reset();
}

static void test_initializer_size_must_match_dims(void) {
  Onnx__GraphProto* graph_proto = matmul_add_graph("3");
  graph_proto->initializer[0]->raw_data.len = 40;
  size_t size = 0;
  uint8_t* data = pack_model(graph_proto, 13, &size);
  stax_graph_t* graph = NULL;
  stax_status_t status = import_bytes(data, size, &graph);
  CHECK_EQ_INT(stax_status_code(status), STAX_INVALID_ARGUMENT);
  CHECK(strstr(stax_status_message(status), "initializer 'W'") &&
        strstr(stax_status_message(status), "40") && strstr(stax_status_message(status), "48"));
  stax_status_free(status);
  /* Typed fields: 2 values for 3 elements. */
  Onnx__TensorProto* bias = graph_proto->initializer[1];
  graph_proto->initializer[0]->raw_data.len = 48;
  bias->has_raw_data = 0;
  bias->n_float_data = 2;
  bias->float_data = keep_copy(bias_3, sizeof(bias_3));
  data = pack_model(graph_proto, 13, &size);
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_INVALID_ARGUMENT, "float_data has 2 values");
  bias->n_float_data = 3;
  data = pack_model(graph_proto, 13, &size);
  CHECK_OK(import_bytes(data, size, &graph));
  stax_graph_destroy(graph);
  /* Unsupported data type names the tensor. */
  bias->data_type = 8; /* STRING */
  data = pack_model(graph_proto, 13, &size);
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_UNIMPLEMENTED, "initializer 'b'");
  builder_reset();
}

static void test_dangling_input_cycles_and_order(void) {
  Onnx__GraphProto* graph_proto = graph_of(
      "g", LIST(Onnx__NodeProto, NODE("Add", "adder", "X,nowhere", "Y")), NONE_LIST,
      LIST(Onnx__ValueInfoProto, FLOAT_VI("X", 1, "4")),
      LIST(Onnx__ValueInfoProto, FLOAT_VI("Y", 1, "4")));
  size_t size = 0;
  uint8_t* data = pack_model(graph_proto, 13, &size);
  stax_graph_t* graph = NULL;
  stax_status_t status = import_bytes(data, size, &graph);
  CHECK_EQ_INT(stax_status_code(status), STAX_INVALID_ARGUMENT);
  CHECK(strstr(stax_status_message(status), "'adder'") &&
        strstr(stax_status_message(status), "'nowhere'"));
  stax_status_free(status);

  /* Out of order but acyclic: sorted. */
  graph_proto = graph_of(
      "g", LIST(Onnx__NodeProto, NODE("Neg", "second", "A", "Y"), NODE("Relu", "first", "X", "A")),
      NONE_LIST, LIST(Onnx__ValueInfoProto, FLOAT_VI("X", 1, "4")),
      LIST(Onnx__ValueInfoProto, FLOAT_VI("Y", 1, "4")));
  data = pack_model(graph_proto, 13, &size);
  CHECK_OK(import_bytes(data, size, &graph));
  if (graph) {
    CHECK_EQ_STR(stax_node_name(graph, 0), "first");
    CHECK_EQ_STR(stax_node_name(graph, 1), "second");
    stax_graph_destroy(graph);
  }
  /* A real cycle names its nodes. */
  graph_proto = graph_of("g",
                         LIST(Onnx__NodeProto, NODE("Relu", "head", "X", "H"),
                              NODE("Add", "loop_a", "H,B", "A"), NODE("Neg", "loop_b", "A", "B")),
                         NONE_LIST, LIST(Onnx__ValueInfoProto, FLOAT_VI("X", 1, "4")),
                         LIST(Onnx__ValueInfoProto, FLOAT_VI("B", 1, "4")));
  data = pack_model(graph_proto, 13, &size);
  status = import_bytes(data, size, &graph);
  CHECK_EQ_INT(stax_status_code(status), STAX_INVALID_ARGUMENT);
  CHECK(strstr(stax_status_message(status), "cycle") &&
        strstr(stax_status_message(status), "'loop_a'") &&
        strstr(stax_status_message(status), "'loop_b'") &&
        !strstr(stax_status_message(status), "'head'"));
  stax_status_free(status);
  /* Two producers of one name. */
  graph_proto = graph_of("g",
                         LIST(Onnx__NodeProto, NODE("Relu", "p1", "X", "Y"), NODE("Neg", "p2", "X", "Y")),
                         NONE_LIST, LIST(Onnx__ValueInfoProto, FLOAT_VI("X", 1, "4")),
                         LIST(Onnx__ValueInfoProto, FLOAT_VI("Y", 1, "4")));
  data = pack_model(graph_proto, 13, &size);
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_INVALID_ARGUMENT, "produced by both");
  builder_reset();
}

/* ---- external data ------------------------------------------------------------------------- */

static Onnx__TensorProto* external_tensor(const char* name, const char* location,
                                          const char* offset, const char* length) {
  Onnx__TensorProto* tensor = keep(sizeof(*tensor));
  *tensor = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
  tensor->name = (char*)name;
  tensor->has_data_type = 1;
  tensor->data_type = 1;
  tensor->n_dims = 2;
  tensor->dims = keep_copy(dims_4x3, sizeof(dims_4x3));
  tensor->has_data_location = 1;
  tensor->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  const char* keys[3] = {"location", "offset", "length"};
  const char* values[3] = {location, offset, length};
  tensor->external_data = keep(3 * sizeof(tensor->external_data[0]));
  for (int i = 0; i < 3; i++) {
    if (values[i] == NULL) continue;
    Onnx__StringStringEntryProto* entry = keep(sizeof(*entry));
    *entry = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    entry->key = (char*)keys[i];
    entry->value = (char*)values[i];
    tensor->external_data[tensor->n_external_data++] = entry;
  }
  return tensor;
}

static void write_file(const char* path, const void* data, size_t size) {
  FILE* file = fopen(path, "wb");
  CHECK(file != NULL);
  if (file == NULL) return;
  CHECK(fwrite(data, 1, size, file) == size);
  fclose(file);
}

/* Writes a MatMul model whose W is external data described by (location, offset, length). */
static stax_status_t import_external(const char* dir, const char* location, const char* offset,
                                     const char* length, stax_graph_t** out_graph) {
  Onnx__GraphProto* graph_proto = matmul_add_graph("3");
  graph_proto->initializer[0] = external_tensor("W", location, offset, length);
  size_t size = 0;
  uint8_t* data = pack_model(graph_proto, 13, &size);
  char path[512];
  snprintf(path, sizeof(path), "%s/model.onnx", dir);
  write_file(path, data, size);
  return stax_onnx_import_file(stax_allocator_system(), path, NULL, out_graph);
}

static void test_external_data(void) {
  char dir[] = "/tmp/stax_onnx_test_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char outside[] = "/tmp/stax_onnx_outside_XXXXXX";
  CHECK(mkdtemp(outside) != NULL);
  unsigned char blob[16 + sizeof(weights_4x3)];
  memset(blob, 0xab, 16);
  memcpy(blob + 16, weights_4x3, sizeof(weights_4x3));
  char path[512];
  snprintf(path, sizeof(path), "%s/weights.bin", dir);
  write_file(path, blob, sizeof(blob));
  char outside_file[512], link_path[512];
  snprintf(outside_file, sizeof(outside_file), "%s/secret.bin", outside);
  write_file(outside_file, blob, sizeof(blob));
  snprintf(link_path, sizeof(link_path), "%s/link.bin", dir);
  CHECK(symlink(outside_file, link_path) == 0);

  stax_graph_t* graph = NULL;
  CHECK_OK(import_external(dir, "weights.bin", "16", "48", &graph));
  if (graph) {
    stax_tensor_t* w = stax_value_constant(graph, stax_graph_find_value(graph, "W"));
    CHECK(w && memcmp(stax_tensor_data(w), weights_4x3, sizeof(weights_4x3)) == 0);
    stax_graph_destroy(graph);
  }
  CHECK_OK(import_external(dir, "./weights.bin", "16", NULL, &graph)); /* to the end */
  stax_graph_destroy(graph);
  CHECK_ERROR(import_external(dir, "weights.bin", "20", "48", &graph), STAX_INVALID_ARGUMENT,
              "at offset 20");
  CHECK_ERROR(import_external(dir, "weights.bin", "0", "40", &graph), STAX_INVALID_ARGUMENT,
              "has 40 bytes, its dims need 48");
  CHECK_ERROR(import_external(dir, "weights.bin", "999", NULL, &graph), STAX_INVALID_ARGUMENT,
              "past the end");
  CHECK_ERROR(import_external(dir, "weights.bin", "-1", NULL, &graph), STAX_INVALID_ARGUMENT,
              "offset '-1'");
  CHECK_ERROR(import_external(dir, "../weights.bin", "16", "48", &graph), STAX_INVALID_ARGUMENT,
              "inside the model's directory");
  CHECK_ERROR(import_external(dir, "sub/../../x.bin", "16", "48", &graph), STAX_INVALID_ARGUMENT,
              "inside the model's directory");
  CHECK_ERROR(import_external(dir, outside_file, "16", "48", &graph), STAX_INVALID_ARGUMENT,
              "relative path");
  CHECK_ERROR(import_external(dir, "link.bin", "16", "48", &graph), STAX_INVALID_ARGUMENT,
              "outside the model's directory");
  CHECK_ERROR(import_external(dir, "missing.bin", "0", NULL, &graph), STAX_IO_ERROR,
              "missing.bin");
  CHECK_ERROR(import_external(dir, NULL, "0", NULL, &graph), STAX_INVALID_ARGUMENT, "location");

  /* From memory: refused without a directory, read with one. */
  Onnx__GraphProto* graph_proto = matmul_add_graph("3");
  graph_proto->initializer[0] = external_tensor("W", "weights.bin", "16", "48");
  size_t size = 0;
  uint8_t* data = pack_model(graph_proto, 13, &size);
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_INVALID_ARGUMENT, "from memory");
  stax_onnx_import_options_t options = {.external_data_directory = dir};
  CHECK_OK(stax_onnx_import_memory(stax_allocator_system(), data, size, NULL, &options, &graph));
  stax_graph_destroy(graph);

  snprintf(path, sizeof(path), "%s/model.onnx", dir);
  unlink(path);
  unlink(link_path);
  snprintf(path, sizeof(path), "%s/weights.bin", dir);
  unlink(path);
  unlink(outside_file);
  rmdir(dir);
  rmdir(outside);
  builder_reset();
}

/* ---- opset conversions --------------------------------------------------------------------- */

/* Imports a one-node model `op(X[2, 1, 4]) -> Y` and returns the graph. */
static stax_graph_t* import_single(Onnx__NodeProto* node, Onnx__TensorProto** inits,
                                   size_t init_count, int64_t opset) {
  Onnx__GraphProto* graph_proto =
      graph_of("g", LIST(Onnx__NodeProto, node), inits, init_count,
               LIST(Onnx__ValueInfoProto, FLOAT_VI("X", 3, "2", "1", "4")),
               LIST(Onnx__ValueInfoProto, value_info("Y", 0, -1, NULL)));
  size_t size = 0;
  uint8_t* data = pack_model(graph_proto, opset, &size);
  stax_graph_t* graph = NULL;
  CHECK_OK(import_bytes(data, size, &graph));
  return graph;
}

static Onnx__TensorProto* int64_tensor(const char* name, size_t count, const int64_t* values) {
  Onnx__TensorProto* tensor = keep(sizeof(*tensor));
  *tensor = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
  tensor->name = (char*)name;
  tensor->has_data_type = 1;
  tensor->data_type = 7;
  tensor->n_dims = 1;
  tensor->dims = keep(sizeof(int64_t));
  tensor->dims[0] = (int64_t)count;
  tensor->n_int64_data = count;
  tensor->int64_data = keep_copy(values, count * sizeof(int64_t));
  return tensor;
}

/* The output's dims as text, "2x4". */
static void output_dims(stax_graph_t* graph, char* buf, size_t size) {
  buf[0] = '\0';
  if (graph == NULL) return;
  stax_value_id_t y = stax_graph_output(graph, 0);
  size_t used = 0;
  for (int32_t d = 0; d < stax_value_rank(graph, y) && used < size; d++) {
    used += (size_t)stax_dim_print(stax_graph_shape_ctx(graph), stax_value_dims(graph, y)[d],
                                   buf + used, size - used);
    if (d + 1 < stax_value_rank(graph, y) && used < size) used += (size_t)snprintf(buf + used, size - used, "x");
  }
}

/* Input i of the last node, as an int64/float constant element. */
static double constant_input(stax_graph_t* graph, int32_t i, int64_t element) {
  stax_node_id_t node = stax_graph_node_count(graph) - 1;
  stax_tensor_t* tensor = stax_value_constant(graph, stax_node_input(graph, node, i));
  if (tensor == NULL) return NAN;
  double value = 0;
  stax_convert_elements(stax_tensor_dtype(tensor),
                        (const char*)stax_tensor_data(tensor) +
                            element * (int64_t)stax_dtype_size(stax_tensor_dtype(tensor)),
                        STAX_DTYPE_FLOAT64, &value, 1);
  return value;
}

static void test_squeeze_opset_11_vs_13(void) {
  stax_graph_t* old_graph =
      import_single(NODE_ATTRS("Squeeze", "sq", "X", "Y", INTS("axes", 1)), NONE_LIST, 11);
  stax_graph_t* new_graph = import_single(NODE("Squeeze", "sq", "X,axes", "Y"),
                                          LIST(Onnx__TensorProto, int64_tensor("axes", 1, (int64_t[]){1})), 13);
  char old_dims[64], new_dims[64];
  output_dims(old_graph, old_dims, sizeof(old_dims));
  output_dims(new_graph, new_dims, sizeof(new_dims));
  CHECK_EQ_STR(old_dims, "2x4");
  CHECK_EQ_STR(new_dims, "2x4");
  if (old_graph) {
    CHECK_EQ_INT(stax_node_input_count(old_graph, 0), 2);
    CHECK_NEAR(constant_input(old_graph, 1, 0), 1, 0);
  }
  stax_graph_destroy(old_graph);
  stax_graph_destroy(new_graph);
  /* Unsqueeze too, and the attribute at 13 is rejected by the op schema's arity rules. */
  old_graph = import_single(NODE_ATTRS("Unsqueeze", "u", "X", "Y", INTS("axes", 0, 4)), NONE_LIST, 12);
  output_dims(old_graph, old_dims, sizeof(old_dims));
  CHECK_EQ_STR(old_dims, "1x2x1x4x1");
  stax_graph_destroy(old_graph);
  builder_reset();
}

static void test_clip_opset_6_vs_11(void) {
  stax_graph_t* old_graph = import_single(
      NODE_ATTRS("Clip", "c", "X", "Y", attr_float("min", -1), attr_float("max", 2)), NONE_LIST, 6);
  Onnx__TensorProto* low = float_tensor("low", 0, NULL, (float[]){-1}, 1);
  Onnx__TensorProto* high = float_tensor("high", 0, NULL, (float[]){2}, 1);
  stax_graph_t* new_graph =
      import_single(NODE("Clip", "c", "X,low,high", "Y"), LIST(Onnx__TensorProto, low, high), 11);
  CHECK(old_graph && new_graph);
  if (old_graph && new_graph) {
    CHECK_EQ_INT(stax_node_input_count(old_graph, 0), 3);
    CHECK_NEAR(constant_input(old_graph, 1, 0), -1, 0);
    CHECK_NEAR(constant_input(old_graph, 2, 0), 2, 0);
    CHECK_EQ_INT(stax_value_dtype(old_graph, stax_node_input(old_graph, 0, 1)), STAX_DTYPE_FLOAT32);
    CHECK_EQ_INT(stax_value_rank(old_graph, stax_node_input(old_graph, 0, 1)), 0);
    CHECK_NEAR(constant_input(new_graph, 2, 0), 2, 0);
  }
  stax_graph_destroy(old_graph);
  stax_graph_destroy(new_graph);
  /* Only max: min stays omitted. */
  old_graph = import_single(NODE_ATTRS("Clip", "c", "X", "Y", attr_float("max", 3)), NONE_LIST, 6);
  if (old_graph) {
    CHECK_EQ_INT(stax_node_input(old_graph, 0, 1), STAX_VALUE_NONE);
    CHECK_NEAR(constant_input(old_graph, 2, 0), 3, 0);
  }
  stax_graph_destroy(old_graph);
  builder_reset();
}

static void test_slice_opset_9_vs_10(void) {
  stax_graph_t* old_graph = import_single(
      NODE_ATTRS("Slice", "s", "X", "Y", INTS("starts", 1), INTS("ends", 3), INTS("axes", 2)),
      NONE_LIST, 9);
  stax_graph_t* new_graph = import_single(
      NODE("Slice", "s", "X,starts,ends,axes", "Y"),
      LIST(Onnx__TensorProto, int64_tensor("starts", 1, (int64_t[]){1}),
           int64_tensor("ends", 1, (int64_t[]){3}), int64_tensor("axes", 1, (int64_t[]){2})),
      10);
  char old_dims[64], new_dims[64];
  output_dims(old_graph, old_dims, sizeof(old_dims));
  output_dims(new_graph, new_dims, sizeof(new_dims));
  CHECK_EQ_STR(old_dims, "2x1x2");
  CHECK_EQ_STR(new_dims, old_dims);
  if (old_graph) {
    CHECK_EQ_INT(stax_node_input_count(old_graph, 0), 4);
    CHECK_NEAR(constant_input(old_graph, 2, 0), 3, 0);
  }
  stax_graph_destroy(old_graph);
  stax_graph_destroy(new_graph);
  builder_reset();
}

static void test_softmax_before_13_flattens(void) {
  /* axis 1 of a rank-3 input: softmax over dims 1 and 2 together. */
  stax_graph_t* graph =
      import_single(NODE_ATTRS("Softmax", "sm", "X", "Y", attr_int("axis", 1)), NONE_LIST, 11);
  if (graph) {
    CHECK_EQ_INT(stax_node_op(graph, 0), STAX_OP_Flatten);
    stax_node_id_t last = stax_graph_node_count(graph) - 1;
    CHECK_EQ_INT(stax_node_op(graph, last), STAX_OP_Reshape);
    char dims[64];
    output_dims(graph, dims, sizeof(dims));
    CHECK_EQ_STR(dims, "2x1x4");
    CHECK_EQ_STR(stax_value_name(graph, stax_graph_output(graph, 0)), "Y");
  }
  stax_graph_destroy(graph);
  /* The last axis needs no rewrite. */
  graph = import_single(NODE_ATTRS("LogSoftmax", "sm", "X", "Y", attr_int("axis", -1)),
                        NONE_LIST, 11);
  if (graph) {
    CHECK_EQ_INT(stax_graph_node_count(graph), 1);
    CHECK_EQ_INT(stax_node_op(graph, 0), STAX_OP_LogSoftmax);
  }
  stax_graph_destroy(graph);
  builder_reset();
}

static const char* string_attr(stax_graph_t* graph, stax_node_id_t node, const char* name) {
  const stax_node_attr_t* attr = stax_node_attr_find(stax_graph_node(graph, node), name);
  return attr && attr->type == STAX_ATTR_STRING ? attr->value.s : "(missing)";
}

static void test_other_legacy_conversions(void) {
  char dims[64];
  /* Pad-2: pads and value attributes become inputs. */
  stax_graph_t* graph = import_single(NODE_ATTRS("Pad", "p", "X", "Y", INTS("pads", 0, 1, 0, 0, 1, 0),
                                                 attr_float("value", 1.5f)), NONE_LIST, 2);
  output_dims(graph, dims, sizeof(dims));
  CHECK_EQ_STR(dims, "2x3x4");
  if (graph) CHECK_NEAR(constant_input(graph, 2, 0), 1.5, 0);
  stax_graph_destroy(graph);
  /* TopK-1: k becomes a 1-element input. */
  graph = import_single(NODE_ATTRS("TopK", "t", "X", "Y,I", attr_int("k", 2)), NONE_LIST, 1);
  output_dims(graph, dims, sizeof(dims));
  CHECK_EQ_STR(dims, "2x1x2");
  if (graph) CHECK_NEAR(constant_input(graph, 1, 0), 2, 0);
  stax_graph_destroy(graph);
  /* Upsample-9 -> Resize(X, roi omitted, scales) with the old coordinate rules. */
  graph = import_single(NODE("Upsample", "up", "X,scales", "Y"),
                        LIST(Onnx__TensorProto, float_tensor("scales", 1, (int64_t[]){3},
                                                             (float[]){1, 2, 2}, 3)),
                        9);
  if (graph) {
    CHECK_EQ_INT(stax_node_op(graph, 0), STAX_OP_Resize);
    CHECK_EQ_INT(stax_node_input(graph, 0, 1), STAX_VALUE_NONE);
    CHECK_EQ_STR(string_attr(graph, 0, "coordinate_transformation_mode"), "asymmetric");
    CHECK_EQ_STR(string_attr(graph, 0, "nearest_mode"), "floor");
  }
  stax_graph_destroy(graph);
  /* Upsample-7 keeps scales in an attribute; "bilinear" is linear. */
  Onnx__AttributeProto* scales = attribute("scales", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
  scales->n_floats = 3;
  scales->floats = keep_copy((float[]){1, 2, 2}, 3 * sizeof(float));
  Onnx__AttributeProto* mode = attribute("mode", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  mode->has_s = 1;
  mode->s.data = (uint8_t*)"bilinear";
  mode->s.len = 8;
  graph = import_single(NODE_ATTRS("Upsample", "up", "X", "Y", scales, mode), NONE_LIST, 7);
  output_dims(graph, dims, sizeof(dims));
  CHECK_EQ_STR(dims, "2x2x8");
  if (graph) CHECK_EQ_STR(string_attr(graph, 0, "mode"), "linear");
  stax_graph_destroy(graph);
  /* Dropout-7's mask had the input's type: a Cast follows. */
  graph = import_single(NODE_ATTRS("Dropout", "d", "X", "Y,M", attr_int("is_test", 1)), NONE_LIST, 7);
  if (graph) CHECK_EQ_INT(stax_value_dtype(graph, stax_graph_find_value(graph, "M")), STAX_DTYPE_FLOAT32);
  stax_graph_destroy(graph);
  /* Cast-5 names the type by string; Concat-3 defaults axis to 1. */
  Onnx__AttributeProto* to = attribute("to", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  to->has_s = 1;
  to->s.data = (uint8_t*)"DOUBLE";
  to->s.len = 6;
  graph = import_single(NODE_ATTRS("Cast", "c", "X", "Y", to), NONE_LIST, 5);
  if (graph) CHECK_EQ_INT(stax_value_dtype(graph, stax_graph_output(graph, 0)), STAX_DTYPE_FLOAT64);
  stax_graph_destroy(graph);
  graph = import_single(NODE("Concat", "cat", "X,X", "Y"), NONE_LIST, 3);
  output_dims(graph, dims, sizeof(dims));
  CHECK_EQ_STR(dims, "2x2x4");
  stax_graph_destroy(graph);
  /* Add-6 broadcast=1 axis=1: B [1] aligns with A's dim 1, so it gains a trailing 1. */
  graph = import_single(NODE_ATTRS("Add", "a", "X,B", "Y", attr_int("broadcast", 1), attr_int("axis", 1)),
                        LIST(Onnx__TensorProto, float_tensor("B", 1, (int64_t[]){1}, (float[]){3}, 1)), 6);
  if (graph) {
    CHECK_EQ_INT(stax_node_op(graph, 0), STAX_OP_Unsqueeze);
    CHECK_EQ_INT(stax_value_rank(graph, stax_node_input(graph, 1, 1)), 2);
  }
  stax_graph_destroy(graph);
  /* BatchNormalization-9 asking for the running statistics means training mode. */
  Onnx__TensorProto* one = float_tensor("one", 1, (int64_t[]){1}, (float[]){1}, 1);
  graph = import_single(NODE_ATTRS("BatchNormalization", "bn", "X,one,one,one,one", "Y,mean,var",
                                   attr_int("spatial", 1)),
                        LIST(Onnx__TensorProto, one), 9);
  if (graph) {
    const stax_node_attr_t* training =
        stax_node_attr_find(stax_graph_node(graph, 0), "training_mode");
    CHECK(training && training->value.i == 1);
  }
  stax_graph_destroy(graph);
  builder_reset();
}

/* ---- subgraphs ------------------------------------------------------------------------------- */

/* If(C) { If(C) { Relu(X) } else { Abs(X) } } else { Neg(X) }: branches read the top-level X. */
static Onnx__GraphProto* nested_if_graph(void) {
  Onnx__GraphProto* inner_then = graph_of(
      "inner_then", LIST(Onnx__NodeProto, NODE("Relu", "inner_relu", "X", "T1")), NONE_LIST,
      NONE_LIST, LIST(Onnx__ValueInfoProto, FLOAT_VI("T1", 1, "4")));
  Onnx__GraphProto* inner_else = graph_of(
      "inner_else", LIST(Onnx__NodeProto, NODE("Abs", "inner_abs", "X", "E1")), NONE_LIST,
      NONE_LIST, LIST(Onnx__ValueInfoProto, FLOAT_VI("E1", 1, "4")));
  Onnx__GraphProto* then_branch = graph_of(
      "then",
      LIST(Onnx__NodeProto, NODE_ATTRS("If", "inner_if", "C", "T", attr_graph("then_branch", inner_then),
                                       attr_graph("else_branch", inner_else))),
      NONE_LIST, NONE_LIST, LIST(Onnx__ValueInfoProto, FLOAT_VI("T", 1, "4")));
  Onnx__GraphProto* else_branch = graph_of(
      "else", LIST(Onnx__NodeProto, NODE("Neg", "neg", "X", "E")), NONE_LIST, NONE_LIST,
      LIST(Onnx__ValueInfoProto, FLOAT_VI("E", 1, "4")));
  return graph_of(
      "g",
      LIST(Onnx__NodeProto, NODE_ATTRS("If", "outer_if", "C", "Y", attr_graph("then_branch", then_branch),
                                       attr_graph("else_branch", else_branch))),
      NONE_LIST, LIST(Onnx__ValueInfoProto, FLOAT_VI("X", 1, "4"), value_info("C", 9, 0, NULL)),
      LIST(Onnx__ValueInfoProto, FLOAT_VI("Y", 1, "4")));
}

static void test_if_subgraphs_capture_outer_values(void) {
  Onnx__GraphProto* graph_proto = nested_if_graph();
  Onnx__GraphProto* else_branch = graph_proto->node[0]->attribute[1]->g;
  size_t size = 0;
  uint8_t* data = pack_model(graph_proto, 13, &size);
  stax_graph_t* graph = NULL;
  CHECK_OK(import_bytes(data, size, &graph));
  if (graph) {
    CHECK_EQ_INT(stax_graph_node_count(graph), 1);
    CHECK_EQ_INT(stax_node_op(graph, 0), STAX_OP_If);
    stax_graph_destroy(graph);
  }
  /* A subgraph reading a name nobody defines is a dangling input inside it. */
  else_branch->node[0]->input[0] = "missing_outer";
  data = pack_model(graph_proto, 13, &size);
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_INVALID_ARGUMENT, "'missing_outer'");
  builder_reset();
}

static void test_nesting_limit(void) {
  /* 60 levels of If: each level nests graph -> node -> attribute -> graph. */
  Onnx__GraphProto* inner = graph_of("leaf", LIST(Onnx__NodeProto, NODE("Relu", "leaf", "X", "L")),
                                     NONE_LIST, NONE_LIST,
                                     LIST(Onnx__ValueInfoProto, FLOAT_VI("L", 1, "4")));
  for (int level = 0; level < 60; level++) {
    char* output = keep(32);
    snprintf(output, 32, "out%d", level);
    Onnx__GraphProto* other = graph_of(
        "other", LIST(Onnx__NodeProto, NODE("Neg", "other", "X", "O")), NONE_LIST, NONE_LIST,
        LIST(Onnx__ValueInfoProto, FLOAT_VI("O", 1, "4")));
    inner = graph_of("level",
                     LIST(Onnx__NodeProto, NODE_ATTRS("If", "if", "C", output, attr_graph("then_branch", inner),
                                                      attr_graph("else_branch", other))),
                     NONE_LIST, NONE_LIST, LIST(Onnx__ValueInfoProto, FLOAT_VI(output, 1, "4")));
  }
  inner->n_input = 2;
  inner->input = keep(2 * sizeof(inner->input[0]));
  inner->input[0] = FLOAT_VI("X", 1, "4");
  inner->input[1] = value_info("C", 9, 0, NULL);
  size_t size = 0;
  uint8_t* data = pack_model(inner, 13, &size);
  stax_graph_t* graph = NULL;
  CHECK_ERROR(import_bytes(data, size, &graph), STAX_PARSE_ERROR, "nest deeper");
  builder_reset();
}

/* ---- tensors, faults -------------------------------------------------------------------------- */

static void test_tensor_files(void) {
  Onnx__TensorProto* tensor_proto = float_tensor("input_x", 2, dims_4x3, weights_4x3, 12);
  size_t size = onnx__tensor_proto__get_packed_size(tensor_proto);
  uint8_t* data = keep(size);
  onnx__tensor_proto__pack(tensor_proto, data);
  char path[] = "/tmp/stax_onnx_tensor_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) {
    CHECK(write(fd, data, size) == (ssize_t)size);
    close(fd);
  }
  stax_tensor_t* tensor = NULL;
  char* name = NULL;
  CHECK_OK(stax_onnx_load_tensor_file(stax_allocator_system(), path, &tensor, &name));
  if (tensor) {
    CHECK_EQ_INT(stax_tensor_rank(tensor), 2);
    CHECK_EQ_INT(stax_tensor_dims(tensor)[0], 4);
    CHECK_NEAR(((const float*)stax_tensor_data(tensor))[5], 6, 0);
    CHECK_EQ_STR(name, "input_x");
  }
  stax_tensor_release(tensor);
  stax_onnx_string_free(stax_allocator_system(), name);
  unlink(path);
  CHECK_ERROR(stax_onnx_parse_tensor(stax_allocator_system(), data, size - 3, "cut.pb", &tensor,
                                     NULL),
              STAX_PARSE_ERROR, "cut.pb");
  /* A real backend-test input, when the Debian test data is installed. */
  const char* real = "/usr/share/libonnx-testdata/data/node/test_add/test_data_set_0/input_0.pb";
  if (access(real, R_OK) == 0) {
    CHECK_OK(stax_onnx_load_tensor_file(stax_allocator_system(), real, &tensor, NULL));
    if (tensor) CHECK_EQ_INT(stax_tensor_dtype(tensor), STAX_DTYPE_FLOAT32);
    stax_tensor_release(tensor);
  }
  builder_reset();
}

/* Fails each allocation in turn until the import succeeds; every failure must return a
 * status and free everything. */
static void check_allocation_failures(const uint8_t* data, size_t size) {
  bool succeeded = false;
  for (uint64_t fail_at = 1; fail_at < 5000 && !succeeded; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), fail_at);
    stax_graph_t* graph = NULL;
    stax_status_t status = stax_onnx_import_memory(stax_failing_allocator(&state), data, size,
                                                   "faulty.onnx", NULL, &graph);
    if (status == STAX_OK) {
      succeeded = true;
      stax_graph_destroy(graph);
    } else {
      CHECK(graph == NULL);
      stax_status_free(status);
    }
    CHECK_EQ_INT(state.live_allocations, 0);
    if (state.live_allocations != 0) {
      fprintf(stderr, "  leak after failing allocation %llu\n", (unsigned long long)fail_at);
      break;
    }
  }
  CHECK(succeeded);
}

static void test_allocation_failures_leak_nothing(void) {
  size_t size = 0;
  uint8_t* data = pack_model(matmul_add_graph("3"), 13, &size);
  check_allocation_failures(data, size);
  data = pack_model(nested_if_graph(), 13, &size);
  check_allocation_failures(data, size);
  builder_reset();
}

STAX_TEST_MAIN(STAX_TEST(test_matmul_add_with_dim_params), STAX_TEST(test_value_info_contradiction),
               STAX_TEST(test_unsupported_ops_are_listed_together),
               STAX_TEST(test_truncated_and_corrupted_models_fail_cleanly),
               STAX_TEST(test_initializer_size_must_match_dims),
               STAX_TEST(test_dangling_input_cycles_and_order), STAX_TEST(test_external_data),
               STAX_TEST(test_squeeze_opset_11_vs_13), STAX_TEST(test_clip_opset_6_vs_11),
               STAX_TEST(test_slice_opset_9_vs_10), STAX_TEST(test_softmax_before_13_flattens),
               STAX_TEST(test_other_legacy_conversions),
               STAX_TEST(test_if_subgraphs_capture_outer_values), STAX_TEST(test_nesting_limit),
               STAX_TEST(test_tensor_files), STAX_TEST(test_allocation_failures_leak_nothing))
