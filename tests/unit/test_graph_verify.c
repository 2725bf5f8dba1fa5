/* Verifier tests: a graph built through the API verifies; then each test corrupts one part of
 * the internal structs (a cycle, a dangling id, a broken producer link, a bad attribute, a bad
 * subgraph link, ...) and expects an error status naming the problem, never a crash. Each
 * corruption is undone before the graph is destroyed. */
#include "ir/graph_internal.h"
#include "test_harness.h"

typedef struct test_graph_t {
  stax_graph_t* graph;
  stax_value_id_t x, y, a, b, c, d, leaky;
} test_graph_t;

/* x, y: float32[B, 4]
 *   a = Add(x, y); b = Relu(a); c = Mul(b, x); d = Neg(x); leaky = LeakyRelu(d) {alpha}
 *   outputs c, leaky */
static test_graph_t build(void) {
  test_graph_t t;
  memset(&t, 0, sizeof(t));
  CHECK_OK(stax_graph_create(stax_allocator_system(), &t.graph));
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(t.graph);
  const stax_dim_t* batch = NULL;
  CHECK_OK(stax_symbol_get(ctx, "B", 1, STAX_DIM_MAX, &batch));
  const stax_dim_t* dims[2] = {batch, stax_dim_const(ctx, 4)};
  CHECK_OK(stax_graph_add_input(t.graph, "x", STAX_DTYPE_FLOAT32, 2, dims, &t.x));
  CHECK_OK(stax_graph_add_input(t.graph, "y", STAX_DTYPE_FLOAT32, 2, dims, &t.y));
  stax_value_id_t add_inputs[2] = {t.x, t.y};
  stax_node_desc_t add = {STAX_OP_Add, "add", 2, add_inputs, 1, NULL, 0, NULL};
  CHECK_OK(stax_graph_add_node(t.graph, &add, &t.a));
  stax_node_desc_t relu = {STAX_OP_Relu, "relu", 1, &t.a, 1, NULL, 0, NULL};
  CHECK_OK(stax_graph_add_node(t.graph, &relu, &t.b));
  stax_value_id_t mul_inputs[2] = {t.b, t.x};
  stax_node_desc_t mul = {STAX_OP_Mul, "mul", 2, mul_inputs, 1, NULL, 0, NULL};
  CHECK_OK(stax_graph_add_node(t.graph, &mul, &t.c));
  stax_node_desc_t neg = {STAX_OP_Neg, "neg", 1, &t.x, 1, NULL, 0, NULL};
  CHECK_OK(stax_graph_add_node(t.graph, &neg, &t.d));
  stax_attr_t alpha = stax_attr_float("alpha", 0.5f);
  stax_node_desc_t leaky = {STAX_OP_LeakyRelu, "leaky", 1, &t.d, 1, NULL, 1, &alpha};
  CHECK_OK(stax_graph_add_node(t.graph, &leaky, &t.leaky));
  CHECK_OK(stax_graph_add_output(t.graph, t.c));
  CHECK_OK(stax_graph_add_output(t.graph, t.leaky));
  return t;
}

static void test_valid_graph(void) {
  test_graph_t t = build();
  CHECK_EQ_INT(stax_graph_node_count(t.graph), 5);
  CHECK_OK(stax_graph_verify(t.graph));
  CHECK_ERROR(stax_graph_verify(NULL), STAX_INVALID_ARGUMENT, "graph is NULL");
  stax_graph_destroy(t.graph);
}

static void test_cycle(void) {
  test_graph_t t = build();
  /* add now reads mul's output: add -> relu -> mul -> add. */
  stax_node_t* add = stax_graph_node(t.graph, 0);
  add->inputs[1] = t.c;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "nodes form a cycle (each uses the next one's output): 'add' <- 'mul' <- 'relu' "
              "<- 'add'");
  /* A node reading its own output is the smallest cycle. */
  add->inputs[1] = t.a;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "nodes form a cycle (each uses the next one's output): 'add' <- 'add'");
  add->inputs[1] = t.y;
  CHECK_OK(stax_graph_verify(t.graph));
  stax_graph_destroy(t.graph);
}

static void test_out_of_order(void) {
  test_graph_t t = build();
  /* relu reads neg's output, which is produced later but does not depend on relu. */
  stax_node_t* relu = stax_graph_node(t.graph, 1);
  relu->inputs[0] = t.d;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "Relu node 'relu' input 0 uses value 'neg:0' before Neg node 'neg' produces it "
              "(nodes are not in topological order)");
  relu->inputs[0] = t.a;
  stax_graph_destroy(t.graph);
}

static void test_dangling_ids(void) {
  test_graph_t t = build();
  stax_node_t* mul = stax_graph_node(t.graph, 2);
  mul->inputs[1] = 999;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "Mul node 'mul': input 1 is value id 999, which does not exist (7 values)");
  mul->inputs[1] = -7;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "input 1 is value id -7");
  mul->inputs[1] = STAX_VALUE_NONE;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "Mul node 'mul': input 1 is required but missing");
  mul->inputs[1] = t.x;

  t.graph->outputs[0] = 77;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "graph output 0 is value id 77, which does not exist");
  t.graph->outputs[0] = t.c;

  t.graph->inputs[1] = t.a;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "graph input 1 is value id 2, which is not a graph input value");
  t.graph->inputs[1] = t.y;

  mul->outputs[0] = 50;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "claims to be output 0");
  mul->outputs[0] = t.c;
  CHECK_OK(stax_graph_verify(t.graph));
  stax_graph_destroy(t.graph);
}

static void test_producer_links(void) {
  test_graph_t t = build();
  stax_value_t* c = stax_graph_value(t.graph, t.c);
  c->producer = 0;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "value 'mul:0' claims to be output 0 of Add node 'add', which does not produce it");
  c->producer = 40;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "value 'mul:0': producer node id 40 is not in the graph (5 nodes)");
  c->producer = 2;
  c->producer_output = 3;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "claims to be output 3");
  c->producer_output = 0;

  stax_value_t* x = stax_graph_value(t.graph, t.x);
  x->flags = 0;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "value 'x' has no producer and is not a graph input, initializer or capture");
  x->flags = STAX_VALUE_IS_INPUT;
  x->flags |= STAX_VALUE_IS_CAPTURE;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "capture 'x': outer value id -1 is not in the parent graph");
  x->flags = STAX_VALUE_IS_INPUT | STAX_VALUE_IS_INITIALIZER;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "initializer 'x' has no tensor");
  x->flags = STAX_VALUE_IS_INPUT;
  CHECK_OK(stax_graph_verify(t.graph));
  stax_graph_destroy(t.graph);
}

static void test_value_types(void) {
  test_graph_t t = build();
  stax_value_t* b = stax_graph_value(t.graph, t.b);
  b->dtype = (stax_dtype_t)99;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "value 'relu:0': invalid dtype 99");
  b->dtype = STAX_DTYPE_FLOAT32;
  b->rank = 12;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "value 'relu:0': invalid rank 12");
  b->rank = 2;
  const stax_dim_t* saved = b->dims[1];
  b->dims[1] = NULL;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "value 'relu:0': dim 1 is NULL");
  b->dims[1] = saved;
  b->content_count = 2;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "invalid content count 2");
  b->content_count = -1;
  const char* name = b->name;
  b->name = NULL;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "value 3 has no name");
  b->name = name;
  CHECK_OK(stax_graph_verify(t.graph));
  stax_graph_destroy(t.graph);
}

static void test_node_structure(void) {
  test_graph_t t = build();
  stax_node_t* add = stax_graph_node(t.graph, 0);
  add->input_count = 1;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "Add node 'add': expects 2 inputs, has 1");
  add->input_count = 2;
  add->output_count = 2;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "Add node 'add': expects 1 output, has 2");
  add->output_count = 1;
  add->op = (stax_op_t)9999;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "node 0 ('add'): invalid op 9999");
  add->op = STAX_OP_Add;
  stax_value_id_t* inputs = add->inputs;
  add->inputs = NULL;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INTERNAL,
              "Add node 'add': input, output or attribute array is missing");
  add->inputs = inputs;
  const char* name = add->name;
  add->name = NULL;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "Add node 0 has no name");
  add->name = name;

  t.graph->value_count = t.graph->value_capacity + 1;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INTERNAL, "graph value table is corrupt");
  t.graph->value_count = 7;
  t.graph->node_count = -1;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INTERNAL, "graph node table is corrupt");
  t.graph->node_count = 5;
  CHECK_OK(stax_graph_verify(t.graph));
  stax_graph_destroy(t.graph);
}

static void test_attributes(void) {
  test_graph_t t = build();
  stax_node_t* leaky = stax_graph_node(t.graph, 4);
  CHECK_EQ_INT(leaky->attr_count, 1);
  leaky->attrs[0].type = STAX_ATTR_INT;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "LeakyRelu node 'leaky': attribute 'alpha' must be FLOAT, got INT");
  leaky->attrs[0].type = STAX_ATTR_FLOAT;
  const char* name = leaky->attrs[0].name;
  leaky->attrs[0].name = "beta";
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT,
              "LeakyRelu node 'leaky': unknown attribute 'beta' (LeakyRelu accepts: alpha)");
  leaky->attrs[0].name = NULL;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INVALID_ARGUMENT, "an attribute has no name");
  leaky->attrs[0].name = name;
  stax_node_attr_t* attrs = leaky->attrs;
  leaky->attrs = NULL;
  CHECK_ERROR(stax_graph_verify(t.graph), STAX_INTERNAL, "attribute array is missing");
  leaky->attrs = attrs;
  CHECK_OK(stax_graph_verify(t.graph));
  stax_graph_destroy(t.graph);
}

/* cond: bool[]; z = If(cond) with both branches returning Identity(x) from the outer graph. */
static stax_graph_t* build_with_if(stax_graph_t** out_then, stax_graph_t** out_else) {
  test_graph_t t = build();
  stax_graph_t* graph = t.graph;
  stax_value_id_t cond = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, "cond", STAX_DTYPE_BOOL, 0, NULL, &cond));
  stax_graph_t* branches[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    CHECK_OK(stax_graph_create_subgraph(graph, &branches[i]));
    stax_value_id_t local = STAX_VALUE_NONE;
    CHECK_OK(stax_graph_capture(branches[i], t.x, &local));
    stax_node_desc_t identity = {STAX_OP_Identity, i ? "else_id" : "then_id", 1, &local, 1,
                                 NULL, 0, NULL};
    stax_value_id_t result = STAX_VALUE_NONE;
    CHECK_OK(stax_graph_add_node(branches[i], &identity, &result));
    CHECK_OK(stax_graph_add_output(branches[i], result));
  }
  stax_attr_t attrs[2] = {stax_attr_graph("then_branch", branches[0]),
                          stax_attr_graph("else_branch", branches[1])};
  stax_node_desc_t if_node = {STAX_OP_If, "branch", 1, &cond, 1, NULL, 2, attrs};
  stax_value_id_t z = STAX_VALUE_NONE;
  stax_status_t status = stax_graph_add_node(graph, &if_node, &z);
  CHECK_OK(status);
  *out_then = branches[0];
  *out_else = branches[1];
  return graph;
}

static void test_subgraphs(void) {
  stax_graph_t* then_branch = NULL;
  stax_graph_t* else_branch = NULL;
  stax_graph_t* graph = build_with_if(&then_branch, &else_branch);
  CHECK_OK(stax_graph_verify(graph));
  stax_node_t* if_node = stax_graph_node(graph, 5);
  CHECK_EQ_INT(if_node->op, STAX_OP_If);

  /* A problem inside a branch is reported with the path to it. */
  stax_node_t* inner = stax_graph_node(else_branch, 0);
  inner->inputs[0] = 12;
  CHECK_ERROR(stax_graph_verify(graph), STAX_INVALID_ARGUMENT,
              "in attribute 'else_branch' of If node 'branch': Identity node 'else_id': input 0 "
              "is value id 12");
  inner->inputs[0] = 0;
  stax_value_t* captured = stax_graph_value(then_branch, 0);
  captured->outer_value = 100;
  CHECK_ERROR(stax_graph_verify(graph), STAX_INVALID_ARGUMENT,
              "in attribute 'then_branch' of If node 'branch': capture 'x': outer value id 100");
  captured->outer_value = 0;

  /* Subgraph links: a branch claiming another parent, a graph containing itself, nothing. */
  else_branch->parent = then_branch;
  CHECK_ERROR(stax_graph_verify(graph), STAX_INVALID_ARGUMENT,
              "If node 'branch': attribute 'else_branch' is not a subgraph of this graph");
  else_branch->parent = graph;
  if_node->attrs[1].value.graph = graph;
  CHECK_ERROR(stax_graph_verify(graph), STAX_INVALID_ARGUMENT,
              "attribute 'else_branch' is not a subgraph of this graph");
  if_node->attrs[1].value.graph = NULL;
  CHECK_ERROR(stax_graph_verify(graph), STAX_INVALID_ARGUMENT,
              "attribute 'else_branch' is not a subgraph of this graph");
  if_node->attrs[1].value.graph = else_branch;

  /* A branch whose node owns the branch itself: the links can never make the walk loop. */
  stax_node_t* then_node = stax_graph_node(then_branch, 0);
  stax_node_attr_t loop_attr = {.name = "then_branch", .type = STAX_ATTR_GRAPH};
  loop_attr.value.graph = then_branch;
  stax_op_t saved_op = then_node->op;
  int32_t saved_count = then_node->attr_count;
  stax_node_attr_t* saved_attrs = then_node->attrs;
  then_node->op = STAX_OP_If;
  then_node->attr_count = 1;
  then_node->attrs = &loop_attr;
  stax_graph_t* saved_parent = then_branch->parent;
  then_branch->parent = then_branch;
  stax_status_t status = stax_graph_verify(graph);
  CHECK(status != STAX_OK);
  stax_status_free(status);
  then_branch->parent = saved_parent;
  then_node->op = saved_op;
  then_node->attr_count = saved_count;
  then_node->attrs = saved_attrs;
  CHECK_OK(stax_graph_verify(graph));
  stax_graph_destroy(graph);
}

STAX_TEST_MAIN(STAX_TEST(test_valid_graph), STAX_TEST(test_cycle), STAX_TEST(test_out_of_order),
               STAX_TEST(test_dangling_ids), STAX_TEST(test_producer_links),
               STAX_TEST(test_value_types), STAX_TEST(test_node_structure),
               STAX_TEST(test_attributes), STAX_TEST(test_subgraphs))
