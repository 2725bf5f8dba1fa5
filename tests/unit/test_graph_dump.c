/* Graph dump tests: build small graphs with the C API, dump them into a temporary file and
 * compare the text with the expected listing, character for character. */
#include "ir/graph_internal.h"
#include "test_harness.h"

/* Dumps into a tmpfile and returns the text (malloc'd; the caller frees it). */
static char* dump_to_string(const stax_graph_t* graph) {
  FILE* file = tmpfile();
  CHECK(file != NULL);
  if (file == NULL) return NULL;
  CHECK_OK(stax_graph_dump(graph, file));
  long size = ftell(file);
  rewind(file);
  char* text = calloc(1, (size_t)size + 1);
  if (text && fread(text, 1, (size_t)size, file) != (size_t)size) text[0] = '\0';
  fclose(file);
  return text;
}

static void check_dump(const stax_graph_t* graph, const char* expected) {
  char* text = dump_to_string(graph);
  CHECK_EQ_STR(text, expected);
  if (text && strcmp(text, expected) != 0) fprintf(stderr, "--- got:\n%s--- wanted:\n%s", text, expected);
  free(text);
}

static const stax_dim_t* symbol(stax_graph_t* graph, const char* name) {
  const stax_dim_t* dim = NULL;
  CHECK_OK(stax_symbol_get(stax_graph_shape_ctx(graph), name, 1, STAX_DIM_MAX, &dim));
  return dim;
}

static stax_value_id_t add_node(stax_graph_t* graph, stax_op_t op, const char* name,
                                int32_t input_count, const stax_value_id_t* inputs,
                                int32_t attr_count, const stax_attr_t* attrs) {
  stax_node_desc_t desc = {op, name, input_count, inputs, 1, NULL, attr_count, attrs};
  stax_value_id_t output = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_node(graph, &desc, &output));
  return output;
}

static void test_dump_linear_graph(void) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(stax_allocator_system(), &graph));
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(graph);
  const stax_dim_t* x_dims[3] = {symbol(graph, "B"), symbol(graph, "S"), stax_dim_const(ctx, 64)};
  stax_value_id_t x = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, "x", STAX_DTYPE_FLOAT32, 3, x_dims, &x));
  int64_t w_dims[2] = {64, 256};
  stax_tensor_t* weight = NULL;
  CHECK_OK(stax_tensor_create_zeros(stax_allocator_system(), STAX_DTYPE_FLOAT32, 2, w_dims,
                                    &weight));
  stax_value_id_t w = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, "w", weight, &w));
  stax_tensor_release(weight);

  stax_value_id_t matmul_inputs[2] = {x, w};
  stax_node_desc_t matmul = {STAX_OP_MatMul, "mm", 2, matmul_inputs, 1,
                             (const char* const[]){"h"}, 0, NULL};
  stax_value_id_t h = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_node(graph, &matmul, &h));
  stax_attr_t gelu_attrs[1] = {stax_attr_string("approximate", "tanh")};
  stax_value_id_t g = add_node(graph, STAX_OP_Gelu, "gelu", 1, &h, 1, gelu_attrs);
  int64_t perm[3] = {0, 2, 1};
  stax_attr_t transpose_attrs[1] = {stax_attr_ints("perm", 3, perm)};
  stax_value_id_t t = add_node(graph, STAX_OP_Transpose, NULL, 1, &g, 1, transpose_attrs);
  stax_value_id_t concat_inputs[2] = {t, t};
  stax_attr_t concat_attrs[1] = {stax_attr_int("axis", 2)};
  stax_value_id_t c = add_node(graph, STAX_OP_Concat, "cat", 2, concat_inputs, 1, concat_attrs);
  stax_attr_t leaky_attrs[1] = {stax_attr_float("alpha", 0.25f)};
  stax_value_id_t y = add_node(graph, STAX_OP_LeakyRelu, "y", 1, &c, 1, leaky_attrs);
  stax_value_id_t clip_inputs[3] = {y, STAX_VALUE_NONE, STAX_VALUE_NONE};
  stax_value_id_t clipped = add_node(graph, STAX_OP_Clip, "clip", 3, clip_inputs, 0, NULL);
  CHECK_OK(stax_graph_add_output(graph, clipped));
  CHECK_OK(stax_graph_add_output(graph, x));
  check_dump(graph,
             "graph(x: float32[B, S, 64], w: float32[64, 256] = initializer) {\n"
             "  %h = MatMul(x, w)                     # float32[B, S, 256]\n"
             "  %gelu:0 = Gelu(%h) {approximate=\"tanh\"} # float32[B, S, 256]\n"
             "  %Transpose_0:0 = Transpose(%gelu:0) {perm=[0, 2, 1]} # float32[B, 256, S]\n"
             "  %cat:0 = Concat(%Transpose_0:0, %Transpose_0:0) {axis=2} # float32[B, 256, 2*S]\n"
             "  %y:0 = LeakyRelu(%cat:0) {alpha=0.25} # float32[B, 256, 2*S]\n"
             "  %clip:0 = Clip(%y:0, _, _)            # float32[B, 256, 2*S]\n"
             "} -> (%clip:0, x)\n");
  stax_graph_destroy(graph);
}

static void test_dump_attribute_kinds(void) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(stax_allocator_system(), &graph));
  float floats[2] = {1.5f, -2.0f};
  stax_attr_t floats_attr = stax_attr_floats("value_floats", 2, floats);
  stax_value_id_t k = add_node(graph, STAX_OP_Constant, "k", 0, NULL, 1, &floats_attr);
  int64_t dims[1] = {2};
  stax_tensor_t* fill = NULL;
  CHECK_OK(stax_tensor_create_zeros(stax_allocator_system(), STAX_DTYPE_INT32, 1,
                                    (int64_t[]){1}, &fill));
  stax_tensor_t* shape = NULL;
  CHECK_OK(stax_tensor_create(stax_allocator_system(), STAX_DTYPE_INT64, 1, dims, &shape));
  ((int64_t*)stax_tensor_data(shape))[0] = 3;
  ((int64_t*)stax_tensor_data(shape))[1] = 5;
  stax_value_id_t shape_id = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, "shape", shape, &shape_id));
  stax_attr_t fill_attr = stax_attr_tensor("value", fill);
  stax_value_id_t filled = add_node(graph, STAX_OP_ConstantOfShape, "fill", 1, &shape_id, 1,
                                    &fill_attr);
  stax_value_id_t identity = add_node(graph, STAX_OP_Identity, "id", 1, &k, 0, NULL);
  stax_attr_t gelu_mode = stax_attr_string("approximate", "tanh");
  stax_value_id_t gelu = add_node(graph, STAX_OP_Gelu, "gelu", 1, &identity, 1, &gelu_mode);
  /* The shape function accepts only real modes; escaping is shown by swapping the stored
   * string afterwards. */
  stax_graph_node(graph, 3)->attrs[0].value.s = "q\"b\\n\n\x01";
  CHECK_OK(stax_graph_add_output(graph, gelu));
  CHECK_OK(stax_graph_add_output(graph, filled));
  check_dump(graph,
             "graph(shape: int64[2] = initializer) {\n"
             "  %k:0 = Constant() {value_floats=[1.5, -2]} # float32[2]\n"
             "  %fill:0 = ConstantOfShape(shape) {value=tensor(int32[1])} # int32[3, 5]\n"
             "  %id:0 = Identity(%k:0)                # float32[2]\n"
             "  %gelu:0 = Gelu(%id:0) {approximate=\"q\\\"b\\\\n\\n\\x01\"} # float32[2]\n"
             "} -> (%gelu:0, %fill:0)\n");
  /* The same node with a STRINGS payload, which no real op here accepts. */
  stax_node_attr_t* attr = &stax_graph_node(graph, 3)->attrs[0];
  static const char* const strings[2] = {"a\"b", "tab\there"};
  attr->type = STAX_ATTR_STRINGS;
  attr->value.strings.count = 2;
  attr->value.strings.data = strings;
  char* text = dump_to_string(graph);
  CHECK(text && strstr(text, "  %gelu:0 = Gelu(%id:0) {approximate=[\"a\\\"b\", \"tab\\there\"]} "
                             "# float32[2]\n"));
  free(text);
  attr->type = STAX_ATTR_STRING;
  stax_tensor_release(fill);
  stax_tensor_release(shape);
  stax_graph_destroy(graph);
}

static void test_dump_subgraphs(void) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(stax_allocator_system(), &graph));
  const stax_dim_t* dims[1] = {symbol(graph, "N")};
  stax_value_id_t x = STAX_VALUE_NONE, cond = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, "x", STAX_DTYPE_FLOAT32, 1, dims, &x));
  CHECK_OK(stax_graph_add_input(graph, "cond", STAX_DTYPE_BOOL, 0, NULL, &cond));
  stax_graph_t* branches[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    CHECK_OK(stax_graph_create_subgraph(graph, &branches[i]));
    stax_value_id_t local = STAX_VALUE_NONE;
    CHECK_OK(stax_graph_capture(branches[i], x, &local));
    stax_value_id_t result = add_node(branches[i], i ? STAX_OP_Neg : STAX_OP_Relu,
                                      i ? "neg" : "relu", 1, &local, 0, NULL);
    CHECK_OK(stax_graph_add_output(branches[i], result));
  }
  stax_attr_t attrs[2] = {stax_attr_graph("then_branch", branches[0]),
                          stax_attr_graph("else_branch", branches[1])};
  stax_value_id_t z = add_node(graph, STAX_OP_If, "if", 1, &cond, 2, attrs);
  CHECK_OK(stax_graph_add_output(graph, z));
  check_dump(graph,
             "graph(x: float32[N], cond: bool[]) {\n"
             "  %if:0 = If(cond)                      # float32[N]\n"
             "    then_branch = graph(x: float32[N] = capture) {\n"
             "      %relu:0 = Relu(x)                 # float32[N]\n"
             "    } -> (%relu:0)\n"
             "    else_branch = graph(x: float32[N] = capture) {\n"
             "      %neg:0 = Neg(x)                   # float32[N]\n"
             "    } -> (%neg:0)\n"
             "} -> (%if:0)\n");
  stax_graph_destroy(graph);
}

static void test_dump_errors(void) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(stax_allocator_system(), &graph));
  CHECK_ERROR(stax_graph_dump(NULL, stdout), STAX_INVALID_ARGUMENT, "graph is NULL");
  CHECK_ERROR(stax_graph_dump(graph, NULL), STAX_INVALID_ARGUMENT, "output file is NULL");
  check_dump(graph, "graph() {\n} -> ()\n");
  /* A stream opened for reading cannot take the dump. */
  FILE* read_only = tmpfile();
  CHECK(read_only != NULL);
  if (read_only) {
    FILE* reopened = freopen(NULL, "r", read_only);
    if (reopened) {
      CHECK_ERROR(stax_graph_dump(graph, reopened), STAX_IO_ERROR, "writing the graph dump");
      fclose(reopened);
    }
  }
  stax_graph_destroy(graph);
}

STAX_TEST_MAIN(STAX_TEST(test_dump_linear_graph), STAX_TEST(test_dump_attribute_kinds),
               STAX_TEST(test_dump_subgraphs), STAX_TEST(test_dump_errors))
