/* Graph IR builder tests: the op table, attributes and their schema, inputs, initializers,
 * captures, add_node (arity, ids, attributes, names, inference, rollback), outputs, declared
 * shapes, the attribute getters and the shape-inference helpers. */
#include "ir/graph_internal.h"
#include "runtime/tensor_internal.h"
#include "test_harness.h"

static stax_allocator_t system_allocator(void) { return stax_allocator_system(); }

static const stax_dim_t* symbol(stax_graph_t* graph, const char* name) {
  const stax_dim_t* dim = NULL;
  stax_status_t status =
      stax_symbol_get(stax_graph_shape_ctx(graph), name, 1, STAX_DIM_MAX, &dim);
  CHECK(status == STAX_OK);
  stax_status_free(status);
  return dim;
}

static const stax_dim_t* constant(stax_graph_t* graph, int64_t value) {
  return stax_dim_const(stax_graph_shape_ctx(graph), value);
}

/* A graph with x: float32[B, 4] and y: float32[B, 4]. */
static stax_graph_t* make_graph(stax_value_id_t* out_x, stax_value_id_t* out_y) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(system_allocator(), &graph));
  const stax_dim_t* dims[2] = {symbol(graph, "B"), constant(graph, 4)};
  CHECK_OK(stax_graph_add_input(graph, "x", STAX_DTYPE_FLOAT32, 2, dims, out_x));
  CHECK_OK(stax_graph_add_input(graph, "y", STAX_DTYPE_FLOAT32, 2, dims, out_y));
  return graph;
}

static stax_status_t add_simple(stax_graph_t* graph, stax_op_t op, const char* name,
                                int32_t input_count, const stax_value_id_t* inputs,
                                int32_t attr_count, const stax_attr_t* attrs,
                                stax_value_id_t* out_output) {
  stax_node_desc_t desc = {op, name, input_count, inputs, 1, NULL, attr_count, attrs};
  return stax_graph_add_node(graph, &desc, out_output);
}

static void test_op_table(void) {
  CHECK_EQ_INT(stax_op_from_name("Add"), STAX_OP_Add);
  CHECK_EQ_INT(stax_op_from_name("Loop"), STAX_OP_Loop);
  CHECK_EQ_INT(stax_op_from_name("If"), STAX_OP_If);
  CHECK_EQ_INT(stax_op_from_name("Abs"), STAX_OP_Abs);
  CHECK_EQ_INT(stax_op_from_name("add"), STAX_OP_INVALID);
  CHECK_EQ_INT(stax_op_from_name("NoSuchOp"), STAX_OP_INVALID);
  CHECK_EQ_INT(stax_op_from_name(""), STAX_OP_INVALID);
  CHECK_EQ_INT(stax_op_from_name(NULL), STAX_OP_INVALID);
  for (int32_t op = 0; op < STAX_OP_COUNT; op++) {
    CHECK_EQ_INT(stax_op_from_name(stax_op_name((stax_op_t)op)), op);
  }
  CHECK_EQ_STR(stax_op_name(STAX_OP_MatMul), "MatMul");
  CHECK_EQ_STR(stax_op_name(STAX_OP_INVALID), "invalid");
  CHECK_EQ_STR(stax_op_name(STAX_OP_COUNT), "invalid");
  CHECK_EQ_INT(stax_op_flags(STAX_OP_Add), STAX_OPF_ELEMENTWISE | STAX_OPF_BROADCAST);
  CHECK_EQ_INT(stax_op_flags(STAX_OP_Loop), STAX_OPF_CONTROL | STAX_OPF_OPTIONAL_SLOTS);
  CHECK_EQ_INT(stax_op_flags(STAX_OP_INVALID), 0);
}

static void test_attr_constructors(void) {
  int64_t ints[2] = {1, 2};
  float floats[1] = {0.5f};
  const char* strings[1] = {"a"};
  stax_attr_t attr = stax_attr_int("axis", -1);
  CHECK_EQ_STR(attr.name, "axis");
  CHECK_EQ_INT(attr.type, STAX_ATTR_INT);
  CHECK_EQ_INT(attr.value.i, -1);
  attr = stax_attr_float("alpha", 0.25f);
  CHECK(attr.type == STAX_ATTR_FLOAT && attr.value.f == 0.25f);
  attr = stax_attr_string("mode", "constant");
  CHECK(attr.type == STAX_ATTR_STRING && strcmp(attr.value.s, "constant") == 0);
  attr = stax_attr_ints("pads", 2, ints);
  CHECK(attr.type == STAX_ATTR_INTS && attr.value.ints.count == 2 && attr.value.ints.data == ints);
  attr = stax_attr_floats("scales", 1, floats);
  CHECK(attr.type == STAX_ATTR_FLOATS && attr.value.floats.data == floats);
  attr = stax_attr_strings("names", 1, strings);
  CHECK(attr.type == STAX_ATTR_STRINGS && attr.value.strings.count == 1);
  attr = stax_attr_tensor("value", NULL);
  CHECK(attr.type == STAX_ATTR_TENSOR && attr.value.tensor == NULL);
  attr = stax_attr_graph("body", NULL);
  CHECK(attr.type == STAX_ATTR_GRAPH && attr.value.graph == NULL);
  CHECK_EQ_STR(stax_attr_type_name(STAX_ATTR_INT), "INT");
  CHECK_EQ_STR(stax_attr_type_name(STAX_ATTR_FLOATS), "FLOATS");
  CHECK_EQ_STR(stax_attr_type_name(STAX_ATTR_GRAPH), "GRAPH");
  CHECK_EQ_STR(stax_attr_type_name((stax_attr_type_t)42), "invalid");
}

static void test_inputs(void) {
  stax_graph_t* graph = NULL;
  CHECK_ERROR(stax_graph_create(system_allocator(), NULL), STAX_INVALID_ARGUMENT, "out_graph");
  CHECK_OK(stax_graph_create(system_allocator(), &graph));
  CHECK(stax_graph_parent(graph) == NULL);
  CHECK(stax_graph_shape_ctx(graph) != NULL);
  const stax_dim_t* dims[3] = {symbol(graph, "B"), symbol(graph, "S"), constant(graph, 64)};
  stax_value_id_t x = 99;
  CHECK_OK(stax_graph_add_input(graph, "x", STAX_DTYPE_FLOAT32, 3, dims, &x));
  CHECK_EQ_INT(x, 0);
  stax_value_id_t scalar = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, "n", STAX_DTYPE_INT64, 0, NULL, &scalar));
  CHECK_EQ_INT(scalar, 1);
  CHECK_EQ_INT(stax_graph_input_count(graph), 2);
  CHECK_EQ_INT(stax_graph_value_count(graph), 2);
  CHECK_EQ_INT(stax_graph_input(graph, 1), scalar);
  CHECK_EQ_INT(stax_graph_input(graph, 2), STAX_VALUE_NONE);
  CHECK_EQ_INT(stax_graph_input(graph, -1), STAX_VALUE_NONE);
  CHECK_EQ_INT(stax_graph_find_value(graph, "x"), x);
  CHECK_EQ_INT(stax_graph_find_value(graph, "nope"), STAX_VALUE_NONE);
  CHECK_EQ_INT(stax_graph_find_value(graph, NULL), STAX_VALUE_NONE);
  CHECK_EQ_STR(stax_value_name(graph, x), "x");
  CHECK_EQ_INT(stax_value_dtype(graph, x), STAX_DTYPE_FLOAT32);
  CHECK_EQ_INT(stax_value_rank(graph, x), 3);
  CHECK(stax_value_dims(graph, x)[0] == dims[0]);
  CHECK(stax_value_dims(graph, x)[2] == dims[2]);
  CHECK_EQ_INT(stax_value_producer(graph, x), -1);
  CHECK(stax_value_constant(graph, x) == NULL);
  CHECK_EQ_INT(stax_value_rank(graph, scalar), 0);
  /* Out-of-range accessors return neutral answers. */
  CHECK(stax_value_name(graph, 7) == NULL);
  CHECK_EQ_INT(stax_value_dtype(graph, -3), STAX_DTYPE_INVALID);
  CHECK_EQ_INT(stax_value_rank(graph, 7), -1);
  CHECK(stax_value_dims(graph, 7) == NULL);
  CHECK_EQ_INT(stax_value_producer(graph, 7), -1);
  CHECK_EQ_INT(stax_node_op(graph, 0), STAX_OP_INVALID);
  CHECK(stax_node_name(graph, 0) == NULL);
  CHECK_EQ_INT(stax_node_input_count(graph, 0), 0);
  CHECK_EQ_INT(stax_node_output(graph, 0, 0), STAX_VALUE_NONE);

  stax_value_id_t bad = 5;
  CHECK_ERROR(stax_graph_add_input(graph, "x", STAX_DTYPE_FLOAT32, 3, dims, &bad),
              STAX_INVALID_ARGUMENT, "already has a value named 'x'");
  CHECK_EQ_INT(bad, STAX_VALUE_NONE);
  CHECK_ERROR(stax_graph_add_input(graph, "z", (stax_dtype_t)99, 3, dims, NULL),
              STAX_INVALID_ARGUMENT, "graph input 'z': invalid dtype 99");
  CHECK_ERROR(stax_graph_add_input(graph, "z", STAX_DTYPE_INVALID, 3, dims, NULL),
              STAX_INVALID_ARGUMENT, "invalid dtype");
  CHECK_ERROR(stax_graph_add_input(graph, "z", STAX_DTYPE_FLOAT32, -1, dims, NULL),
              STAX_INVALID_ARGUMENT, "rank -1 is outside 0..8");
  CHECK_ERROR(stax_graph_add_input(graph, "z", STAX_DTYPE_FLOAT32, 9, dims, NULL),
              STAX_INVALID_ARGUMENT, "rank 9");
  CHECK_ERROR(stax_graph_add_input(graph, "z", STAX_DTYPE_FLOAT32, 2, NULL, NULL),
              STAX_INVALID_ARGUMENT, "no dims");
  const stax_dim_t* holes[2] = {dims[0], NULL};
  CHECK_ERROR(stax_graph_add_input(graph, "z", STAX_DTYPE_FLOAT32, 2, holes, NULL),
              STAX_INVALID_ARGUMENT, "dim 1 is NULL");
  CHECK_ERROR(stax_graph_add_input(graph, "", STAX_DTYPE_FLOAT32, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "non-empty name");
  CHECK_ERROR(stax_graph_add_input(graph, NULL, STAX_DTYPE_FLOAT32, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "non-empty name");
  CHECK_ERROR(stax_graph_add_input(NULL, "z", STAX_DTYPE_FLOAT32, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "graph is NULL");
  /* A failed dim construction surfaces as its own error, named after the input. */
  const stax_dim_t* failed = stax_dim_floordiv(stax_graph_shape_ctx(graph), dims[0],
                                               constant(graph, 0));
  CHECK(failed == NULL);
  const stax_dim_t* with_failed[1] = {failed};
  stax_status_t status =
      stax_graph_add_input(graph, "z", STAX_DTYPE_FLOAT32, 1, with_failed, NULL);
  CHECK(status != STAX_OK);
  CHECK(strstr(stax_status_message(status), "graph input 'z' dim 0") != NULL);
  stax_status_free(status);
  CHECK_EQ_INT(stax_graph_value_count(graph), 2);
  CHECK_EQ_INT(stax_graph_input_count(graph), 2);
  stax_graph_destroy(graph);
  stax_graph_destroy(NULL);
}

static stax_tensor_t* int64_vector(int32_t count, const int64_t* values) {
  int64_t dims[1] = {count};
  stax_tensor_t* tensor = NULL;
  CHECK_OK(stax_tensor_create(system_allocator(), STAX_DTYPE_INT64, 1, dims, &tensor));
  if (tensor && count > 0) memcpy(stax_tensor_data(tensor), values, (size_t)count * 8);
  return tensor;
}

static void test_initializers(void) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(system_allocator(), &graph));
  int64_t shape_values[3] = {2, -1, 64};
  stax_tensor_t* shape = int64_vector(3, shape_values);
  stax_value_id_t shape_id = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, "shape", shape, &shape_id));
  CHECK_EQ_INT(shape->refcount, 2);
  CHECK(stax_value_constant(graph, shape_id) == shape);
  CHECK_EQ_INT(stax_value_dtype(graph, shape_id), STAX_DTYPE_INT64);
  CHECK_EQ_INT(stax_value_rank(graph, shape_id), 1);
  const stax_dim_t* dim0 = stax_value_dims(graph, shape_id)[0];
  CHECK(stax_dim_is_const(dim0) && stax_dim_const_value(dim0) == 3);
  const stax_value_t* value = stax_graph_value(graph, shape_id);
  CHECK_EQ_INT(value->content_count, 3);
  CHECK_EQ_INT(stax_dim_const_value(value->content[0]), 2);
  CHECK_EQ_INT(stax_dim_const_value(value->content[1]), -1);
  CHECK_EQ_INT(stax_dim_const_value(value->content[2]), 64);
  CHECK(value->flags & STAX_VALUE_IS_INITIALIZER);

  /* int32 scalars count too; float tensors and long vectors get no contents. */
  stax_tensor_t* scalar = NULL;
  CHECK_OK(stax_tensor_create(system_allocator(), STAX_DTYPE_INT32, 0, NULL, &scalar));
  *(int32_t*)stax_tensor_data(scalar) = -7;
  stax_value_id_t scalar_id = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, "scalar", scalar, &scalar_id));
  CHECK_EQ_INT(stax_graph_value(graph, scalar_id)->content_count, 1);
  CHECK_EQ_INT(stax_dim_const_value(stax_graph_value(graph, scalar_id)->content[0]), -7);

  int64_t weight_dims[2] = {64, 256};
  stax_tensor_t* weight = NULL;
  CHECK_OK(stax_tensor_create_zeros(system_allocator(), STAX_DTYPE_FLOAT32, 2, weight_dims,
                                    &weight));
  stax_value_id_t weight_id = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, "w", weight, &weight_id));
  CHECK_EQ_INT(stax_graph_value(graph, weight_id)->content_count, -1);
  CHECK_EQ_INT(stax_dim_const_value(stax_value_dims(graph, weight_id)[1]), 256);

  int64_t long_values[65] = {0};
  stax_tensor_t* long_vector = int64_vector(65, long_values);
  stax_value_id_t long_id = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, "long", long_vector, &long_id));
  CHECK_EQ_INT(stax_graph_value(graph, long_id)->content_count, -1);

  /* A strided view is read through its strides. */
  stax_tensor_t* strided = NULL;
  int64_t every_other[1] = {2};
  int64_t stride[1] = {2};
  CHECK_OK(stax_tensor_create_view(system_allocator(), stax_tensor_buffer(shape),
                                   STAX_DTYPE_INT64, 1, every_other, stride, 0, &strided));
  stax_value_id_t strided_id = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, "strided", strided, &strided_id));
  CHECK_EQ_INT(stax_dim_const_value(stax_graph_value(graph, strided_id)->content[1]), 64);

  CHECK_ERROR(stax_graph_add_initializer(graph, "shape", shape, NULL), STAX_INVALID_ARGUMENT,
              "initializer 'shape': the graph already has a value named 'shape'");
  CHECK_ERROR(stax_graph_add_initializer(graph, "none", NULL, NULL), STAX_INVALID_ARGUMENT,
              "initializer 'none': tensor is NULL");
  CHECK_ERROR(stax_graph_add_initializer(graph, NULL, shape, NULL), STAX_INVALID_ARGUMENT,
              "non-empty name");
  CHECK_EQ_INT(shape->refcount, 2); /* the graph's reference; the view holds the buffer */
  stax_graph_destroy(graph);
  CHECK_EQ_INT(shape->refcount, 1);
  CHECK_EQ_INT(weight->refcount, 1);
  stax_tensor_release(shape);
  stax_tensor_release(scalar);
  stax_tensor_release(weight);
  stax_tensor_release(long_vector);
  stax_tensor_release(strided);
}

static void test_captures(void) {
  stax_value_id_t x = STAX_VALUE_NONE, y = STAX_VALUE_NONE;
  stax_graph_t* graph = make_graph(&x, &y);
  int64_t values[2] = {4, 5};
  stax_tensor_t* tensor = int64_vector(2, values);
  stax_value_id_t init = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, "k", tensor, &init));

  stax_graph_t* body = NULL;
  CHECK_ERROR(stax_graph_create_subgraph(NULL, &body), STAX_INVALID_ARGUMENT, "parent");
  CHECK_ERROR(stax_graph_create_subgraph(graph, NULL), STAX_INVALID_ARGUMENT, "out_subgraph");
  CHECK_OK(stax_graph_create_subgraph(graph, &body));
  CHECK(stax_graph_parent(body) == graph);
  CHECK(stax_graph_shape_ctx(body) == stax_graph_shape_ctx(graph));

  stax_value_id_t local = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(body, y, &local));
  CHECK_EQ_INT(local, 0);
  CHECK_EQ_STR(stax_value_name(body, local), "y");
  CHECK_EQ_INT(stax_value_dtype(body, local), STAX_DTYPE_FLOAT32);
  CHECK_EQ_INT(stax_value_rank(body, local), 2);
  CHECK(stax_value_dims(body, local)[0] == stax_value_dims(graph, y)[0]);
  CHECK_EQ_INT(stax_graph_value(body, local)->outer_value, y);
  CHECK(stax_graph_value(body, local)->flags & STAX_VALUE_IS_CAPTURE);
  stax_value_id_t again = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(body, y, &again));
  CHECK_EQ_INT(again, local);
  CHECK_EQ_INT(stax_graph_value_count(body), 1);

  stax_value_id_t captured_constant = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(body, init, &captured_constant));
  CHECK(stax_value_constant(body, captured_constant) == tensor);
  CHECK_EQ_INT(stax_graph_value(body, captured_constant)->content_count, 2);
  CHECK_EQ_INT(tensor->refcount, 3);

  const stax_dim_t* one[1] = {constant(graph, 1)};
  CHECK_OK(stax_graph_add_input(body, "x", STAX_DTYPE_INT64, 1, one, NULL));
  CHECK_ERROR(stax_graph_capture(body, x, NULL), STAX_INVALID_ARGUMENT,
              "capture of 'x': the subgraph already has its own value named 'x'");
  CHECK_ERROR(stax_graph_capture(body, 99, NULL), STAX_INVALID_ARGUMENT,
              "value id 99 does not exist in the parent graph");
  CHECK_ERROR(stax_graph_capture(graph, x, NULL), STAX_INVALID_ARGUMENT, "not a subgraph");
  CHECK_ERROR(stax_graph_capture(NULL, x, NULL), STAX_INVALID_ARGUMENT, "graph is NULL");

  /* A nested subgraph captures from its direct parent, which may itself be a capture. */
  stax_graph_t* inner = NULL;
  CHECK_OK(stax_graph_create_subgraph(body, &inner));
  stax_value_id_t inner_y = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(inner, local, &inner_y));
  CHECK_EQ_STR(stax_value_name(inner, inner_y), "y");
  CHECK(stax_graph_shape_ctx(inner) == stax_graph_shape_ctx(graph));
  stax_graph_destroy(inner);
  stax_graph_destroy(body);
  CHECK_EQ_INT(tensor->refcount, 2);
  stax_graph_destroy(graph);
  CHECK_EQ_INT(tensor->refcount, 1);
  stax_tensor_release(tensor);
}

static void test_add_nodes(void) {
  stax_value_id_t x = STAX_VALUE_NONE, y = STAX_VALUE_NONE;
  stax_graph_t* graph = make_graph(&x, &y);
  stax_value_id_t inputs[2] = {x, y};
  stax_value_id_t sum = STAX_VALUE_NONE;
  CHECK_OK(add_simple(graph, STAX_OP_Add, NULL, 2, inputs, 0, NULL, &sum));
  CHECK_EQ_INT(sum, 2);
  CHECK_EQ_INT(stax_graph_node_count(graph), 1);
  CHECK_EQ_STR(stax_node_name(graph, 0), "Add_0");
  CHECK_EQ_STR(stax_value_name(graph, sum), "Add_0:0");
  CHECK_EQ_INT(stax_value_producer(graph, sum), 0);
  CHECK_EQ_INT(stax_value_dtype(graph, sum), STAX_DTYPE_FLOAT32);
  CHECK_EQ_INT(stax_value_rank(graph, sum), 2);
  CHECK(stax_dim_known_equal(stax_graph_shape_ctx(graph), stax_value_dims(graph, sum)[0],
                             symbol(graph, "B")));
  CHECK_EQ_INT(stax_node_op(graph, 0), STAX_OP_Add);
  CHECK_EQ_INT(stax_node_input_count(graph, 0), 2);
  CHECK_EQ_INT(stax_node_input(graph, 0, 1), y);
  CHECK_EQ_INT(stax_node_input(graph, 0, 2), STAX_VALUE_NONE);
  CHECK_EQ_INT(stax_node_output_count(graph, 0), 1);
  CHECK_EQ_INT(stax_node_output(graph, 0, 0), sum);

  /* Named node and named output. */
  const char* names[1] = {"ident"};
  stax_node_desc_t desc = {STAX_OP_Identity, "id1", 1, &sum, 1, names, 0, NULL};
  stax_value_id_t ident = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_node(graph, &desc, &ident));
  CHECK_EQ_STR(stax_value_name(graph, ident), "ident");
  CHECK_EQ_INT(stax_graph_find_value(graph, "ident"), ident);
  CHECK_EQ_STR(stax_node_name(graph, 1), "id1");

  /* Auto names keep counting and never collide with existing values. */
  stax_value_id_t relu_input = STAX_VALUE_NONE;
  const char* taken[1] = {"Relu_1:0"};
  stax_node_desc_t taking = {STAX_OP_Identity, NULL, 1, &ident, 1, taken, 0, NULL};
  CHECK_OK(stax_graph_add_node(graph, &taking, &relu_input));
  CHECK_EQ_STR(stax_node_name(graph, 2), "Identity_1");
  stax_value_id_t relu = STAX_VALUE_NONE;
  CHECK_OK(add_simple(graph, STAX_OP_Relu, NULL, 1, &relu_input, 0, NULL, &relu));
  CHECK_EQ_STR(stax_node_name(graph, 3), "Relu_2");
  stax_node_desc_t same_name = {STAX_OP_Relu, "Relu_1", 1, &relu, 1, NULL, 0, NULL};
  stax_value_id_t renamed = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_node(graph, &same_name, &renamed));
  CHECK_EQ_STR(stax_value_name(graph, renamed), "Relu_1:0_1");

  /* Optional inputs may be omitted with STAX_VALUE_NONE past the required ones. */
  stax_value_id_t clip_inputs[3] = {x, STAX_VALUE_NONE, STAX_VALUE_NONE};
  stax_value_id_t clipped = STAX_VALUE_NONE;
  CHECK_OK(add_simple(graph, STAX_OP_Clip, "clip", 3, clip_inputs, 0, NULL, &clipped));
  CHECK_EQ_INT(stax_node_input(graph, 5, 1), STAX_VALUE_NONE);

  /* Attributes are copied: the caller's arrays may change afterwards. */
  stax_attr_t alpha = stax_attr_float("alpha", 0.125f);
  stax_value_id_t leaky = STAX_VALUE_NONE;
  CHECK_OK(add_simple(graph, STAX_OP_LeakyRelu, "leaky", 1, &x, 1, &alpha, &leaky));
  alpha.value.f = 9.0f;
  const stax_node_t* node = stax_graph_node(graph, 6);
  CHECK_EQ_INT(node->attr_count, 1);
  CHECK(node->attrs[0].name != alpha.name);
  CHECK_EQ_STR(node->attrs[0].name, "alpha");
  CHECK(node->attrs[0].value.f == 0.125f);
  CHECK_EQ_INT(stax_graph_node_count(graph), 7);
  CHECK_OK(stax_graph_verify(graph));
  stax_graph_destroy(graph);
}

static void test_node_errors(void) {
  stax_value_id_t x = STAX_VALUE_NONE, y = STAX_VALUE_NONE;
  stax_graph_t* graph = make_graph(&x, &y);
  stax_value_id_t three[3] = {x, y, x};
  stax_value_id_t out = 7;
  CHECK_ERROR(add_simple(graph, STAX_OP_Add, "add1", 3, three, 0, NULL, &out),
              STAX_INVALID_ARGUMENT, "Add node 'add1': expects 2 inputs, got 3");
  CHECK_EQ_INT(out, STAX_VALUE_NONE);
  CHECK_ERROR(add_simple(graph, STAX_OP_Clip, "c", 0, NULL, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "Clip node 'c': expects 1 to 3 inputs, got 0");
  CHECK_ERROR(add_simple(graph, STAX_OP_Concat, "cat", 0, NULL, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "Concat node 'cat': expects at least 1 input, got 0");
  CHECK_ERROR(add_simple(graph, STAX_OP_Add, NULL, 3, three, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "Add node 'Add_0': expects 2 inputs");
  stax_node_desc_t two_outputs = {STAX_OP_Relu, "r", 1, &x, 2, NULL, 0, NULL};
  stax_value_id_t outs[2];
  CHECK_ERROR(stax_graph_add_node(graph, &two_outputs, outs), STAX_INVALID_ARGUMENT,
              "Relu node 'r': expects 1 output, got 2");
  stax_node_desc_t no_outputs = {STAX_OP_Relu, "r", 1, &x, 0, NULL, 0, NULL};
  CHECK_ERROR(stax_graph_add_node(graph, &no_outputs, NULL), STAX_INVALID_ARGUMENT,
              "expects 1 output, got 0");
  stax_value_id_t dangling[2] = {x, 42};
  CHECK_ERROR(add_simple(graph, STAX_OP_Add, "a", 2, dangling, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "Add node 'a': input 1 is value id 42, which does not exist");
  stax_value_id_t negative[2] = {-5, x};
  CHECK_ERROR(add_simple(graph, STAX_OP_Add, "a", 2, negative, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "input 0 is value id -5");
  stax_value_id_t missing[2] = {x, STAX_VALUE_NONE};
  CHECK_ERROR(add_simple(graph, STAX_OP_Add, "a", 2, missing, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "Add node 'a': input 1 is required but missing");
  CHECK_ERROR(add_simple(graph, STAX_OP_Add, "a", 2, NULL, 0, NULL, NULL),
              STAX_INVALID_ARGUMENT, "inputs is NULL");
  stax_node_desc_t bad_op = {(stax_op_t)999, "weird", 1, &x, 1, NULL, 0, NULL};
  CHECK_ERROR(stax_graph_add_node(graph, &bad_op, NULL), STAX_INVALID_ARGUMENT,
              "node 'weird': invalid op 999");
  CHECK_ERROR(stax_graph_add_node(graph, NULL, NULL), STAX_INVALID_ARGUMENT, "desc is NULL");
  CHECK_ERROR(stax_graph_add_node(NULL, &bad_op, NULL), STAX_INVALID_ARGUMENT, "graph is NULL");

  /* Output names. */
  const char* taken[1] = {"x"};
  stax_node_desc_t reuse = {STAX_OP_Relu, "r", 1, &x, 1, taken, 0, NULL};
  CHECK_ERROR(stax_graph_add_node(graph, &reuse, NULL), STAX_INVALID_ARGUMENT,
              "Relu node 'r': output 0 name 'x' is already used by another value");
  const char* twice[2] = {"v", "v"};
  stax_node_desc_t dropout = {STAX_OP_Dropout, "d", 1, &x, 2, twice, 0, NULL};
  CHECK_ERROR(stax_graph_add_node(graph, &dropout, outs), STAX_INVALID_ARGUMENT,
              "Dropout node 'd': outputs 0 and 1 are both named 'v'");
  CHECK_EQ_INT(stax_graph_node_count(graph), 0);
  CHECK_EQ_INT(stax_graph_value_count(graph), 2);
  stax_graph_destroy(graph);
}

static void test_attribute_errors(void) {
  stax_value_id_t x = STAX_VALUE_NONE, y = STAX_VALUE_NONE;
  stax_graph_t* graph = make_graph(&x, &y);
  stax_attr_t unknown = stax_attr_float("alpha", 1.0f);
  CHECK_ERROR(add_simple(graph, STAX_OP_Relu, "r", 1, &x, 1, &unknown, NULL),
              STAX_INVALID_ARGUMENT,
              "Relu node 'r': unknown attribute 'alpha' (Relu accepts: none)");
  stax_attr_t typo = stax_attr_int("kernel_shap", 3);
  stax_value_id_t conv_inputs[2] = {x, y};
  CHECK_ERROR(add_simple(graph, STAX_OP_Conv, "c", 2, conv_inputs, 1, &typo, NULL),
              STAX_INVALID_ARGUMENT,
              "Conv node 'c': unknown attribute 'kernel_shap' (Conv accepts: auto_pad, "
              "dilations, group, kernel_shape, pads, strides)");
  stax_attr_t wrong_type = stax_attr_int("alpha", 1);
  CHECK_ERROR(add_simple(graph, STAX_OP_LeakyRelu, "l", 1, &x, 1, &wrong_type, NULL),
              STAX_INVALID_ARGUMENT,
              "LeakyRelu node 'l': attribute 'alpha' must be FLOAT, got INT");
  stax_attr_t twice[2] = {stax_attr_float("alpha", 1.0f), stax_attr_float("alpha", 2.0f)};
  CHECK_ERROR(add_simple(graph, STAX_OP_LeakyRelu, "l", 1, &x, 2, twice, NULL),
              STAX_INVALID_ARGUMENT, "LeakyRelu node 'l': attribute 'alpha' is given twice");
  stax_attr_t no_name = stax_attr_float(NULL, 1.0f);
  CHECK_ERROR(add_simple(graph, STAX_OP_LeakyRelu, "l", 1, &x, 1, &no_name, NULL),
              STAX_INVALID_ARGUMENT, "LeakyRelu node 'l': an attribute has no name");
  stax_attr_t bad_type = stax_attr_float("alpha", 1.0f);
  bad_type.type = (stax_attr_type_t)77;
  CHECK_ERROR(add_simple(graph, STAX_OP_LeakyRelu, "l", 1, &x, 1, &bad_type, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'alpha' has invalid type 77");
  stax_attr_t null_string = stax_attr_string("approximate", NULL);
  CHECK_ERROR(add_simple(graph, STAX_OP_Gelu, "g", 1, &x, 1, &null_string, NULL),
              STAX_INVALID_ARGUMENT, "Gelu node 'g': attribute 'approximate' has no value");
  stax_attr_t negative = stax_attr_ints("perm", -2, NULL);
  CHECK_ERROR(add_simple(graph, STAX_OP_Transpose, "t", 1, &x, 1, &negative, NULL),
              STAX_INVALID_ARGUMENT, "Transpose node 't': attribute 'perm' has a negative count -2");
  stax_attr_t null_ints = stax_attr_ints("perm", 2, NULL);
  CHECK_ERROR(add_simple(graph, STAX_OP_Transpose, "t", 1, &x, 1, &null_ints, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'perm' has no value");
  const char* holes[2] = {"a", NULL};
  stax_attr_t null_entry = stax_attr_strings("value_strings", 2, holes);
  CHECK_ERROR(add_simple(graph, STAX_OP_Constant, "k", 0, NULL, 1, &null_entry, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'value_strings' entry 1 is NULL");
  stax_attr_t null_tensor = stax_attr_tensor("value", NULL);
  CHECK_ERROR(add_simple(graph, STAX_OP_Constant, "k", 0, NULL, 1, &null_tensor, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'value' has no value");
  CHECK_ERROR(add_simple(graph, STAX_OP_LeakyRelu, "l", 1, &x, 2, NULL, NULL),
              STAX_INVALID_ARGUMENT, "attribute count 2 with no attribute array");

  /* Subgraph attributes must be this graph's own subgraphs, each passed once. */
  stax_graph_t* other = NULL;
  CHECK_OK(stax_graph_create(system_allocator(), &other));
  stax_graph_t* foreign = NULL;
  CHECK_OK(stax_graph_create_subgraph(other, &foreign));
  stax_graph_t* branch = NULL;
  CHECK_OK(stax_graph_create_subgraph(graph, &branch));
  CHECK_OK(stax_graph_add_input(graph, "cond", STAX_DTYPE_BOOL, 0, NULL, NULL));
  stax_value_id_t cond = stax_graph_find_value(graph, "cond");
  stax_attr_t foreign_attrs[2] = {stax_attr_graph("then_branch", foreign),
                                  stax_attr_graph("else_branch", branch)};
  CHECK_ERROR(add_simple(graph, STAX_OP_If, "if1", 1, &cond, 2, foreign_attrs, NULL),
              STAX_INVALID_ARGUMENT,
              "If node 'if1': attribute 'then_branch' is not a subgraph of this graph");
  stax_attr_t same[2] = {stax_attr_graph("then_branch", branch),
                         stax_attr_graph("else_branch", branch)};
  CHECK_ERROR(add_simple(graph, STAX_OP_If, "if1", 1, &cond, 2, same, NULL),
              STAX_INVALID_ARGUMENT,
              "If node 'if1': attributes 'then_branch' and 'else_branch' pass the same subgraph");
  stax_attr_t null_graph = stax_attr_graph("then_branch", NULL);
  CHECK_ERROR(add_simple(graph, STAX_OP_If, "if1", 1, &cond, 1, &null_graph, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'then_branch' has no value");
  stax_attr_t wrong_graph_type = stax_attr_int("then_branch", 1);
  CHECK_ERROR(add_simple(graph, STAX_OP_If, "if1", 1, &cond, 1, &wrong_graph_type, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'then_branch' must be GRAPH, got INT");
  CHECK_EQ_INT(stax_graph_node_count(graph), 0);
  /* Ownership stayed with the caller on every failure. */
  stax_graph_destroy(branch);
  stax_graph_destroy(foreign);
  stax_graph_destroy(other);
  stax_graph_destroy(graph);
}

static void test_rollback(void) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(system_allocator(), &graph));
  const stax_dim_t* three[1] = {constant(graph, 3)};
  const stax_dim_t* four[1] = {constant(graph, 4)};
  stax_value_id_t a = STAX_VALUE_NONE, b = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, "a", STAX_DTYPE_FLOAT32, 1, three, &a));
  CHECK_OK(stax_graph_add_input(graph, "b", STAX_DTYPE_FLOAT32, 1, four, &b));
  stax_value_id_t first = STAX_VALUE_NONE;
  CHECK_OK(add_simple(graph, STAX_OP_Relu, NULL, 1, &a, 0, NULL, &first));
  CHECK_EQ_STR(stax_node_name(graph, 0), "Relu_0");

  /* Shape inference fails: [3] + [4] cannot broadcast. */
  stax_value_id_t inputs[2] = {a, b};
  const char* names[1] = {"sum"};
  stax_node_desc_t desc = {STAX_OP_Add, NULL, 2, inputs, 1, names, 0, NULL};
  stax_value_id_t out = 5;
  stax_status_t status = stax_graph_add_node(graph, &desc, &out);
  CHECK_EQ_INT(stax_status_code(status), STAX_SHAPE_MISMATCH);
  CHECK(strstr(stax_status_message(status), "Add_1") != NULL);
  stax_status_free(status);
  CHECK_EQ_INT(out, STAX_VALUE_NONE);
  CHECK_EQ_INT(stax_graph_node_count(graph), 1);
  CHECK_EQ_INT(stax_graph_value_count(graph), 3);
  CHECK_EQ_INT(stax_graph_find_value(graph, "sum"), STAX_VALUE_NONE);

  /* A dtype failure with a tensor attribute and an auto-named output: nothing retained. */
  int64_t one_dim[1] = {1};
  stax_tensor_t* fill = NULL;
  CHECK_OK(stax_tensor_create_zeros(system_allocator(), STAX_DTYPE_FLOAT32, 1, one_dim, &fill));
  stax_attr_t value = stax_attr_tensor("value", fill);
  stax_node_desc_t bad_shape = {STAX_OP_ConstantOfShape, NULL, 1, &a, 1, NULL, 1, &value};
  CHECK_ERROR(stax_graph_add_node(graph, &bad_shape, &out), STAX_DTYPE_MISMATCH,
              "ConstantOfShape node 'ConstantOfShape_1'");
  CHECK_EQ_INT(fill->refcount, 1);
  CHECK_EQ_INT(stax_graph_find_value(graph, "ConstantOfShape_1:0"), STAX_VALUE_NONE);
  CHECK_EQ_INT(stax_graph_value_count(graph), 3);

  /* The same names and counter are free again. */
  const char* names_ok[1] = {"sum"};
  stax_node_desc_t good = {STAX_OP_Add, NULL, 2, (stax_value_id_t[]){a, a}, 1, names_ok, 0, NULL};
  CHECK_OK(stax_graph_add_node(graph, &good, &out));
  CHECK_EQ_INT(out, 3);
  CHECK_EQ_STR(stax_node_name(graph, 1), "Add_1");
  CHECK_EQ_INT(stax_graph_find_value(graph, "sum"), out);
  CHECK_OK(stax_graph_verify(graph));

  /* A successful node holds its tensor attribute until the graph goes. */
  int64_t shape_values[1] = {2};
  stax_tensor_t* shape = int64_vector(1, shape_values);
  stax_value_id_t shape_id = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, "shape", shape, &shape_id));
  stax_node_desc_t fill_node = {STAX_OP_ConstantOfShape, "fill", 1, &shape_id, 1, NULL, 1, &value};
  CHECK_OK(stax_graph_add_node(graph, &fill_node, &out));
  CHECK(fill->refcount >= 2);
  stax_graph_destroy(graph);
  CHECK_EQ_INT(fill->refcount, 1);
  CHECK_EQ_INT(shape->refcount, 1);
  stax_tensor_release(fill);
  stax_tensor_release(shape);
}

/* A node rejected after its shape function already unified dims must not leave the equality in
 * the shared shape context: Concat along axis 1 matches dim 0 of each input with input 0's, so
 * [S, 2] with [4, 3] pins S = 4 before [5, 1] contradicts it. */
static void test_rollback_shape_context(void) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(system_allocator(), &graph));
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(graph);
  const stax_dim_t* s = symbol(graph, "S");
  const stax_dim_t* x_dims[2] = {s, constant(graph, 2)};
  const stax_dim_t* y_dims[2] = {constant(graph, 4), constant(graph, 3)};
  const stax_dim_t* z_dims[2] = {constant(graph, 5), constant(graph, 1)};
  const stax_dim_t* w_dims[2] = {constant(graph, 7), constant(graph, 1)};
  const stax_dim_t* v_dims[1] = {constant(graph, 4)};
  const stax_dim_t* u_dims[1] = {s};
  stax_value_id_t x = STAX_VALUE_NONE, y = STAX_VALUE_NONE, z = STAX_VALUE_NONE;
  stax_value_id_t w = STAX_VALUE_NONE, v = STAX_VALUE_NONE, u = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, "x", STAX_DTYPE_FLOAT32, 2, x_dims, &x));
  CHECK_OK(stax_graph_add_input(graph, "y", STAX_DTYPE_FLOAT32, 2, y_dims, &y));
  CHECK_OK(stax_graph_add_input(graph, "z", STAX_DTYPE_FLOAT32, 2, z_dims, &z));
  CHECK_OK(stax_graph_add_input(graph, "w", STAX_DTYPE_FLOAT32, 2, w_dims, &w));
  CHECK_OK(stax_graph_add_input(graph, "v", STAX_DTYPE_FLOAT32, 1, v_dims, &v));
  CHECK_OK(stax_graph_add_input(graph, "u", STAX_DTYPE_FLOAT32, 1, u_dims, &u));

  const int32_t nodes_before = stax_graph_node_count(graph);
  const int32_t values_before = stax_graph_value_count(graph);
  const int32_t symbols_before = stax_shape_ctx_symbol_count(ctx);

  stax_attr_t axis = stax_attr_int("axis", 1);
  stax_value_id_t out = STAX_VALUE_NONE;
  /* The message names 4 as input 0's dim 0: S had been unified with y's 4 when z failed. */
  CHECK_ERROR(add_simple(graph, STAX_OP_Concat, "cat", 3, (stax_value_id_t[]){x, y, z}, 1, &axis,
                         &out),
              STAX_SHAPE_MISMATCH, "input 2 'z' dim 0 is 5 but input 0 'x' dim 0 is 4");
  CHECK_EQ_INT(out, STAX_VALUE_NONE);
  CHECK_EQ_INT(stax_graph_node_count(graph), nodes_before);
  CHECK_EQ_INT(stax_graph_value_count(graph), values_before);
  CHECK_EQ_INT(stax_shape_ctx_symbol_count(ctx), symbols_before);
  CHECK(stax_dim_resolve(ctx, s) == s);
  CHECK(!stax_dim_known_equal(ctx, s, constant(graph, 4)));
  stax_symbol_id_t id = -1;
  CHECK(stax_dim_as_symbol(s, &id));
  int64_t min = 0, max = 0;
  stax_symbol_range(ctx, id, &min, &max);
  CHECK_EQ_INT(min, 1);
  CHECK_EQ_INT(max, STAX_DIM_MAX);

  /* Had S stayed pinned to 4, S = 7 would now be a contradiction. */
  CHECK_OK(add_simple(graph, STAX_OP_Concat, "cat", 2, (stax_value_id_t[]){x, w}, 1, &axis,
                      &out));
  CHECK(stax_dim_resolve(ctx, s) == constant(graph, 7));
  stax_symbol_range(ctx, id, &min, &max);
  CHECK_EQ_INT(min, 7);
  CHECK_EQ_INT(max, 7);
  CHECK_EQ_INT(stax_value_rank(graph, out), 2);
  CHECK(stax_dim_resolve(ctx, stax_value_dims(graph, out)[0]) == constant(graph, 7));
  CHECK(stax_value_dims(graph, out)[1] == constant(graph, 3));
  /* The committed equality holds for later nodes: [S] + [4] would pin S = 4 on its own, and
   * now is a contradiction that leaves S = 7. */
  CHECK_ERROR(add_simple(graph, STAX_OP_Add, "sum", 2, (stax_value_id_t[]){u, v}, 0, NULL, &out),
              STAX_SHAPE_MISMATCH, "sum");
  CHECK(stax_dim_resolve(ctx, s) == constant(graph, 7));
  CHECK_OK(stax_graph_verify(graph));
  stax_graph_destroy(graph);
}

static void test_outputs_and_declared_shapes(void) {
  stax_value_id_t x = STAX_VALUE_NONE, y = STAX_VALUE_NONE;
  stax_graph_t* graph = make_graph(&x, &y);
  stax_value_id_t inputs[2] = {x, y};
  stax_value_id_t sum = STAX_VALUE_NONE;
  CHECK_OK(add_simple(graph, STAX_OP_Add, "add", 2, inputs, 0, NULL, &sum));
  CHECK_OK(stax_graph_add_output(graph, sum));
  CHECK_OK(stax_graph_add_output(graph, x));
  CHECK_EQ_INT(stax_graph_output_count(graph), 2);
  CHECK_EQ_INT(stax_graph_output(graph, 0), sum);
  CHECK_EQ_INT(stax_graph_output(graph, 1), x);
  CHECK_EQ_INT(stax_graph_output(graph, 2), STAX_VALUE_NONE);
  CHECK(stax_graph_value(graph, sum)->flags & STAX_VALUE_IS_OUTPUT);
  CHECK_ERROR(stax_graph_add_output(graph, sum), STAX_INVALID_ARGUMENT,
              "graph output 'add:0' is already output 0");
  CHECK_ERROR(stax_graph_add_output(graph, 17), STAX_INVALID_ARGUMENT, "value id 17");
  CHECK_ERROR(stax_graph_add_output(NULL, 0), STAX_INVALID_ARGUMENT, "graph is NULL");

  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(graph);
  const stax_dim_t* declared[2] = {constant(graph, 8), constant(graph, 4)};
  CHECK_ERROR(stax_graph_declare_shape(graph, sum, STAX_DTYPE_INT64, 2, declared),
              STAX_DTYPE_MISMATCH, "value 'add:0': declared dtype int64, inferred dtype float32");
  CHECK_ERROR(stax_graph_declare_shape(graph, sum, STAX_DTYPE_FLOAT32, 3, declared),
              STAX_SHAPE_MISMATCH, "value 'add:0': declared rank 3, inferred rank 2");
  CHECK_ERROR(stax_graph_declare_shape(graph, 55, STAX_DTYPE_FLOAT32, 2, declared),
              STAX_INVALID_ARGUMENT, "value id 55");
  CHECK_ERROR(stax_graph_declare_shape(graph, sum, STAX_DTYPE_FLOAT32, 2, NULL),
              STAX_INVALID_ARGUMENT, "no dims");
  const stax_dim_t* hole[2] = {NULL, constant(graph, 4)};
  CHECK_ERROR(stax_graph_declare_shape(graph, sum, STAX_DTYPE_FLOAT32, 2, hole),
              STAX_INVALID_ARGUMENT, "dim 0 is NULL");
  const stax_dim_t* wrong[2] = {symbol(graph, "B"), constant(graph, 5)};
  CHECK_ERROR(stax_graph_declare_shape(graph, sum, STAX_DTYPE_FLOAT32, 2, wrong),
              STAX_SHAPE_MISMATCH, "value 'add:0' declared dim 1");
  /* Declaring B = 8 binds the symbol for every value that uses it. */
  CHECK_OK(stax_graph_declare_shape(graph, sum, STAX_DTYPE_FLOAT32, 2, declared));
  const stax_dim_t* resolved = stax_dim_resolve(ctx, stax_value_dims(graph, x)[0]);
  CHECK(stax_dim_is_const(resolved) && stax_dim_const_value(resolved) == 8);
  stax_graph_destroy(graph);
}

static void test_attr_getters(void) {
  stax_value_id_t x = STAX_VALUE_NONE, y = STAX_VALUE_NONE;
  stax_graph_t* graph = make_graph(&x, &y);
  int64_t perm[2] = {1, 0};
  stax_attr_t transpose_attrs[1] = {stax_attr_ints("perm", 2, perm)};
  stax_value_id_t transposed = STAX_VALUE_NONE;
  CHECK_OK(add_simple(graph, STAX_OP_Transpose, "t", 1, &x, 1, transpose_attrs, &transposed));
  stax_attr_t gelu_attrs[1] = {stax_attr_string("approximate", "tanh")};
  CHECK_OK(add_simple(graph, STAX_OP_Gelu, "g", 1, &x, 1, gelu_attrs, NULL));
  const stax_node_t* transpose = stax_graph_node(graph, 0);
  const stax_node_t* gelu = stax_graph_node(graph, 1);

  int32_t count = 0;
  const int64_t* data = NULL;
  CHECK_OK(stax_node_attr_ints(transpose, "perm", &count, &data));
  CHECK_EQ_INT(count, 2);
  CHECK(data != perm && data[0] == 1 && data[1] == 0);
  CHECK_OK(stax_node_attr_ints(transpose, "axes", &count, &data));
  CHECK_EQ_INT(count, -1);
  CHECK(data == NULL);
  int64_t number = 0;
  CHECK_ERROR(stax_node_attr_int(transpose, "perm", 5, &number), STAX_INVALID_ARGUMENT,
              "Transpose node 't': attribute 'perm' must be INT, got INTS");
  CHECK_EQ_INT(number, 5);
  CHECK_OK(stax_node_attr_int(transpose, "missing", 5, &number));
  CHECK_EQ_INT(number, 5);
  float real = 0.0f;
  CHECK_OK(stax_node_attr_float(gelu, "epsilon", 0.5f, &real));
  CHECK(real == 0.5f);
  CHECK_ERROR(stax_node_attr_float(gelu, "approximate", 0.5f, &real), STAX_INVALID_ARGUMENT,
              "must be FLOAT, got STRING");
  const char* text = NULL;
  CHECK_OK(stax_node_attr_string(gelu, "approximate", "none", &text));
  CHECK_EQ_STR(text, "tanh");
  CHECK(text != gelu_attrs[0].value.s);
  CHECK_OK(stax_node_attr_string(transpose, "approximate", "none", &text));
  CHECK_EQ_STR(text, "none");
  CHECK_ERROR(stax_node_attr_string(transpose, "perm", "none", &text), STAX_INVALID_ARGUMENT,
              "must be STRING, got INTS");
  const float* floats = NULL;
  CHECK_OK(stax_node_attr_floats(gelu, "scales", &count, &floats));
  CHECK_EQ_INT(count, -1);
  CHECK_ERROR(stax_node_attr_floats(gelu, "approximate", &count, &floats), STAX_INVALID_ARGUMENT,
              "must be FLOATS");
  CHECK_ERROR(stax_node_attr_ints(gelu, "approximate", &count, &data), STAX_INVALID_ARGUMENT,
              "must be INTS");
  CHECK(stax_node_attr_find(gelu, "approximate") == &gelu->attrs[0]);
  CHECK(stax_node_attr_find(gelu, "nope") == NULL);
  CHECK(stax_node_attr_find(gelu, NULL) == NULL);
  stax_graph_destroy(graph);
}

static void test_infer_helpers(void) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(system_allocator(), &graph));
  const stax_dim_t* dims[3] = {symbol(graph, "B"), constant(graph, 3), constant(graph, 7)};
  stax_value_id_t x = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, "x", STAX_DTYPE_FLOAT32, 3, dims, &x));
  stax_value_id_t clip_inputs[3] = {x, STAX_VALUE_NONE, STAX_VALUE_NONE};
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(add_simple(graph, STAX_OP_Clip, "a", 3, clip_inputs, 0, NULL, &out));
  stax_shape_infer_t ic = {graph, stax_graph_node(graph, 0), 0, stax_graph_shape_ctx(graph)};

  CHECK(stax_infer_input(&ic, 0) == stax_graph_value(graph, x));
  CHECK(stax_infer_input(&ic, 1) == NULL);
  CHECK(stax_infer_input(&ic, 3) == NULL);
  CHECK(stax_infer_input(&ic, -1) == NULL);

  CHECK_ERROR(stax_infer_error(&ic, STAX_OUT_OF_RANGE, "axis %d is out of range", 9),
              STAX_OUT_OF_RANGE, "Clip node 'a': axis 9 is out of range");
  CHECK_ERROR(stax_infer_unify(&ic, dims[1], 0, 2, dims[2], 1, 0), STAX_SHAPE_MISMATCH,
              "Clip node 'a' input 0 dim 2");
  CHECK_ERROR(stax_infer_unify(&ic, dims[1], 0, 2, dims[2], 1, 0), STAX_SHAPE_MISMATCH,
              "Clip node 'a' input 1 dim 0");
  CHECK_ERROR(stax_infer_unify(&ic, dims[1], -1, 4, dims[2], -1, -1), STAX_SHAPE_MISMATCH,
              "Clip node 'a' dim 4");
  CHECK_OK(stax_infer_unify(&ic, dims[0], 0, 0, dims[0], 0, 0));
  CHECK_ERROR(stax_infer_unify(&ic, NULL, 0, 0, dims[0], 0, 0), STAX_INTERNAL, "NULL dim");

  /* A failed construction is reported through check_dims, annotated with the node. */
  CHECK_OK(stax_infer_check_dims(&ic));
  CHECK(stax_dim_floordiv(ic.shape, dims[0], constant(graph, 0)) == NULL);
  stax_status_t status = stax_infer_check_dims(&ic);
  CHECK(status != STAX_OK);
  CHECK(strstr(stax_status_message(status), "Clip node 'a'") != NULL);
  stax_status_free(status);
  CHECK(stax_dim_floordiv(ic.shape, dims[0], constant(graph, 0)) == NULL);
  const stax_dim_t* failed[1] = {NULL};
  status = stax_infer_set_output(&ic, 0, STAX_DTYPE_FLOAT32, 1, failed);
  CHECK(status != STAX_OK && strstr(stax_status_message(status), "output 0 dim entry 0"));
  stax_status_free(status);
  CHECK_ERROR(stax_infer_set_output(&ic, 0, STAX_DTYPE_FLOAT32, 1, failed), STAX_INTERNAL,
              "output 0 dim entry 0 is NULL");

  /* Outputs: bad index, dtype, rank are shape-function bugs or rank overflows. */
  CHECK_ERROR(stax_infer_set_output(&ic, 1, STAX_DTYPE_FLOAT32, 0, NULL), STAX_INTERNAL,
              "addressed output 1 of 1");
  CHECK_ERROR(stax_infer_set_output(&ic, 0, STAX_DTYPE_INVALID, 0, NULL), STAX_INTERNAL,
              "invalid dtype");
  CHECK_ERROR(stax_infer_set_output(&ic, 0, STAX_DTYPE_FLOAT32, 9, dims), STAX_SHAPE_MISMATCH,
              "rank 9");
  CHECK_OK(stax_infer_set_output(&ic, 0, STAX_DTYPE_INT64, 1, dims));
  CHECK_EQ_INT(stax_value_dtype(graph, out), STAX_DTYPE_INT64);
  CHECK_EQ_INT(stax_value_rank(graph, out), 1);
  const stax_dim_t* content[2] = {dims[0], dims[1]};
  CHECK_OK(stax_infer_set_content(&ic, 0, 2, content));
  CHECK_EQ_INT(stax_graph_value(graph, out)->content_count, 2);
  CHECK(stax_graph_value(graph, out)->content[0] == dims[0]);
  CHECK_ERROR(stax_infer_set_content(&ic, 0, -1, content), STAX_INTERNAL, "content count -1");
  CHECK_ERROR(stax_infer_set_content(&ic, 2, 1, content), STAX_INTERNAL, "addressed output 2");

  int64_t two[1] = {2};
  stax_tensor_t* tensor = int64_vector(1, two);
  stax_infer_set_constant(&ic, 0, tensor);
  CHECK_EQ_INT(tensor->refcount, 2);
  CHECK(stax_value_constant(graph, out) == tensor);
  stax_infer_set_constant(&ic, 0, NULL);
  CHECK_EQ_INT(tensor->refcount, 1);
  stax_infer_set_constant(&ic, 0, tensor);
  stax_infer_set_constant(&ic, 5, tensor); /* ignored */
  CHECK_EQ_INT(tensor->refcount, 2);

  /* Re-running inference on a stored node works and restores its real output. */
  CHECK_OK(stax_shape_infer_node(graph, 0));
  CHECK_EQ_INT(stax_value_dtype(graph, out), STAX_DTYPE_FLOAT32);
  CHECK_EQ_INT(stax_value_rank(graph, out), 3);
  CHECK_ERROR(stax_shape_infer_node(graph, 1), STAX_INTERNAL, "node id 1");
  CHECK_ERROR(stax_shape_infer_node(NULL, 0), STAX_INTERNAL, "node id 0");
  stax_graph_destroy(graph);
  CHECK_EQ_INT(tensor->refcount, 1);
  stax_tensor_release(tensor);
}

STAX_TEST_MAIN(STAX_TEST(test_op_table), STAX_TEST(test_attr_constructors), STAX_TEST(test_inputs),
               STAX_TEST(test_initializers), STAX_TEST(test_captures), STAX_TEST(test_add_nodes),
               STAX_TEST(test_node_errors), STAX_TEST(test_attribute_errors),
               STAX_TEST(test_rollback), STAX_TEST(test_rollback_shape_context),
               STAX_TEST(test_outputs_and_declared_shapes),
               STAX_TEST(test_attr_getters), STAX_TEST(test_infer_helpers))
