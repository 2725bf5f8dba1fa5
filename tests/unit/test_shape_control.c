/* Shape inference for If and Loop: branch agreement and merging, constant conditions, stable
 * and changing loop-carried dims, scan outputs with trip-count dims, and every error path. */
#include "shape_test_util.h"

#define F32 STAX_DTYPE_FLOAT32
#define I64 STAX_DTYPE_INT64
#define BOOL STAX_DTYPE_BOOL

static stax_graph_t* subgraph(stax_graph_t* parent) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create_subgraph(parent, &graph));
  return graph;
}

/* A branch that outputs `outer` sliced to its first `keep` rows (keep < 0: unchanged). */
static stax_graph_t* slicing_branch(stax_graph_t* parent, stax_value_id_t outer, int64_t keep) {
  stax_graph_t* branch = subgraph(parent);
  stax_value_id_t local = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(branch, outer, &local));
  stax_value_id_t result = local;
  if (keep >= 0) {
    stax_value_id_t start = shape_test_ints(branch, "start", 1, (int64_t[]){0});
    stax_value_id_t end = shape_test_ints(branch, "end", 1, &keep);
    result = shape_test_node1(branch, STAX_OP_Slice, "cut", INPUTS(local, start, end), NO_ATTRS);
  } else {
    result = shape_test_node1(branch, STAX_OP_Transpose, "same", INPUTS(local),
                              ATTRS(stax_attr_ints("perm", 2, (int64_t[]){0, 1})));
  }
  CHECK_OK(stax_graph_add_output(branch, result));
  return branch;
}

static void test_if_merges_branches(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "8,D");
  stax_value_id_t cond = shape_test_input(g, "cond", BOOL, "");
  /* Same shape in both branches: kept. */
  stax_value_id_t same =
      shape_test_node1(g, STAX_OP_If, "same", INPUTS(cond),
                       ATTRS(stax_attr_graph("then_branch", slicing_branch(g, x, 3)),
                             stax_attr_graph("else_branch", slicing_branch(g, x, 3))));
  CHECK_EQ_STR(shape_test_shape(g, same), "[3, D]");
  /* 3 rows or 5 rows: a fresh dim in [3, 5]; D agrees. */
  stax_value_id_t merged =
      shape_test_node1(g, STAX_OP_If, "merged", INPUTS(cond),
                       ATTRS(stax_attr_graph("then_branch", slicing_branch(g, x, 3)),
                             stax_attr_graph("else_branch", slicing_branch(g, x, 5))));
  const stax_dim_t* rows = stax_value_dims(g, merged)[0];
  stax_symbol_id_t id = -1;
  CHECK(stax_dim_as_symbol(rows, &id));
  int64_t low = -1, high = -1;
  stax_dim_bounds(stax_graph_shape_ctx(g), rows, &low, &high);
  CHECK_EQ_INT(low, 3);
  CHECK_EQ_INT(high, 5);
  CHECK(stax_value_dims(g, merged)[1] == stax_value_dims(g, x)[1]);
  CHECK_EQ_INT(stax_value_dtype(g, merged), F32);
  stax_graph_destroy(g);
}

/* A constant condition takes one branch, with its contents. */
static void test_if_constant_condition(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S");
  uint8_t true_value = 1;
  stax_value_id_t yes =
      shape_test_initializer(g, "yes", shape_test_tensor(BOOL, true, 1, &true_value));
  stax_graph_t* then_branch = subgraph(g);
  stax_value_id_t local = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(then_branch, x, &local));
  CHECK_OK(stax_graph_add_output(
      then_branch, shape_test_node1(then_branch, STAX_OP_Shape, "s", INPUTS(local), NO_ATTRS)));
  stax_graph_t* else_branch = subgraph(g);
  CHECK_OK(stax_graph_add_output(else_branch,
                                 shape_test_ints(else_branch, "fixed", 2, (int64_t[]){1, 1})));
  stax_value_id_t taken = shape_test_node1(g, STAX_OP_If, "taken", INPUTS(yes),
                                           ATTRS(stax_attr_graph("then_branch", then_branch),
                                                 stax_attr_graph("else_branch", else_branch)));
  CHECK_EQ_STR(shape_test_shape(g, taken), "[2]");
  CHECK_EQ_STR(shape_test_content(g, taken), "[B, S]");
  /* Both branches give shape [2]; with a run-time condition the contents differ and drop. */
  stax_value_id_t cond = shape_test_input(g, "cond", BOOL, "1");
  stax_graph_t* then2 = subgraph(g);
  CHECK_OK(stax_graph_capture(then2, x, &local));
  CHECK_OK(stax_graph_add_output(
      then2, shape_test_node1(then2, STAX_OP_Shape, "s", INPUTS(local), NO_ATTRS)));
  stax_graph_t* else2 = subgraph(g);
  CHECK_OK(stax_graph_add_output(else2, shape_test_ints(else2, "fixed", 2, (int64_t[]){1, 1})));
  stax_value_id_t either = shape_test_node1(
      g, STAX_OP_If, "either", INPUTS(cond),
      ATTRS(stax_attr_graph("then_branch", then2), stax_attr_graph("else_branch", else2)));
  CHECK_EQ_STR(shape_test_shape(g, either), "[2]");
  CHECK_EQ_STR(shape_test_content(g, either), "<unknown>");
  stax_graph_destroy(g);
}

static void test_if_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "8,D");
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "8,D");
  stax_value_id_t cond = shape_test_input(g, "cond", BOOL, "");
  stax_value_id_t out[2];
  stax_graph_t* a = slicing_branch(g, x, 3);
  stax_graph_t* b = slicing_branch(g, ints, 3);
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_If, "dtype", INPUTS(cond),
                      ATTRS(stax_attr_graph("then_branch", a), stax_attr_graph("else_branch", b)),
                      1, out),
      STAX_DTYPE_MISMATCH, "If node 'dtype': output 0: then_branch gives float32");
  stax_graph_destroy(b);
  stax_graph_t* flat = subgraph(g);
  stax_value_id_t local = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(flat, x, &local));
  CHECK_OK(stax_graph_add_output(flat, shape_test_node1(flat, STAX_OP_Flatten, "f", INPUTS(local),
                                                        ATTRS(stax_attr_int("axis", 0)))));
  stax_graph_t* vector = subgraph(g);
  CHECK_OK(stax_graph_capture(vector, x, &local));
  stax_value_id_t minus_one = shape_test_ints(vector, "minus_one", 1, (int64_t[]){-1});
  CHECK_OK(stax_graph_add_output(
      vector, shape_test_node1(vector, STAX_OP_Reshape, "r", INPUTS(local, minus_one), NO_ATTRS)));
  CHECK_ERROR(shape_test_node(g, STAX_OP_If, "rank", INPUTS(cond),
                              ATTRS(stax_attr_graph("then_branch", flat),
                                    stax_attr_graph("else_branch", vector)),
                              1, out),
              STAX_SHAPE_MISMATCH, "then_branch gives rank 2");
  CHECK_ERROR(
      shape_test_node(
          g, STAX_OP_If, "count", INPUTS(cond),
          ATTRS(stax_attr_graph("then_branch", a), stax_attr_graph("else_branch", flat)), 2, out),
      STAX_INVALID_ARGUMENT, "then_branch has 1 outputs but the node has 2");
  CHECK_ERROR(shape_test_node(g, STAX_OP_If, "missing", INPUTS(cond),
                              ATTRS(stax_attr_graph("then_branch", a)), 1, out),
              STAX_INVALID_ARGUMENT, "attribute 'else_branch' (a graph) is required");
  stax_value_id_t float_cond = shape_test_input(g, "float_cond", F32, "");
  CHECK_ERROR(
      shape_test_node(
          g, STAX_OP_If, "cond", INPUTS(float_cond),
          ATTRS(stax_attr_graph("then_branch", a), stax_attr_graph("else_branch", flat)), 1, out),
      STAX_DTYPE_MISMATCH, "expected bool");
  stax_graph_destroy(a);
  stax_graph_destroy(flat);
  stax_graph_destroy(vector);
  CHECK_EQ_INT(stax_graph_node_count(g), 0);
  stax_graph_destroy(g);
}

/* A loop body: carried acc [acc_dims] (kept as is) and seq [T] (grows by one per iteration),
 * plus two scan outputs: row 0 of acc ([4]) and the grown seq. */
static stax_graph_t* loop_body(stax_graph_t* parent, const char* acc_dims) {
  stax_graph_t* body = subgraph(parent);
  shape_test_input(body, "iteration", I64, "");
  stax_value_id_t cond_in = shape_test_input(body, "cond_in", BOOL, "");
  stax_value_id_t acc = shape_test_input(body, "acc", F32, acc_dims);
  stax_value_id_t seq = shape_test_input(body, "seq", I64, "T");
  stax_value_id_t acc_shape =
      shape_test_node1(body, STAX_OP_Shape, "acc_shape", INPUTS(acc), NO_ATTRS);
  stax_value_id_t acc_next =
      shape_test_node1(body, STAX_OP_Reshape, "acc_next", INPUTS(acc, acc_shape), NO_ATTRS);
  stax_value_id_t extra = shape_test_ints(body, "extra", 1, (int64_t[]){7});
  stax_value_id_t seq_next = shape_test_node1(body, STAX_OP_Concat, "seq_next", INPUTS(seq, extra),
                                              ATTRS(stax_attr_int("axis", 0)));
  stax_value_id_t row = shape_test_node1(
      body, STAX_OP_Gather, "row", INPUTS(acc_next, shape_test_scalar(body, "zero", 0)), NO_ATTRS);
  CHECK_OK(stax_graph_add_output(body, cond_in));
  CHECK_OK(stax_graph_add_output(body, acc_next));
  CHECK_OK(stax_graph_add_output(body, seq_next));
  CHECK_OK(stax_graph_add_output(body, row));
  CHECK_OK(stax_graph_add_output(
      body, shape_test_node1(body, STAX_OP_Transpose, "copy", INPUTS(seq_next), NO_ATTRS)));
  return body;
}

/* The exporters' for loop: M = 5 and a constant true condition the body passes through. */
static void test_loop_for(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t acc = shape_test_input(g, "acc0", F32, "B,4");
  stax_value_id_t seq = shape_test_input(g, "seq0", I64, "2");
  stax_value_id_t trips = shape_test_scalar(g, "trips", 5);
  uint8_t true_value = 1;
  stax_value_id_t yes =
      shape_test_initializer(g, "yes", shape_test_tensor(BOOL, true, 1, &true_value));
  stax_value_id_t out[4];
  CHECK_OK(shape_test_node(g, STAX_OP_Loop, "loop", INPUTS(trips, yes, acc, seq),
                           ATTRS(stax_attr_graph("body", loop_body(g, "B,4"))), 4, out));
  CHECK_EQ_STR(shape_test_shape(g, out[0]), "[B, 4]"); /* stable */
  const stax_dim_t* grown = stax_value_dims(g, out[1])[0];
  stax_symbol_id_t id = -1;
  CHECK(stax_dim_as_symbol(grown, &id));            /* changes every iteration: fresh */
  CHECK_EQ_STR(shape_test_shape(g, out[2]), "[5, 4]"); /* M iterations of acc row 0 */
  CHECK_EQ_INT(stax_value_rank(g, out[3]), 2);
  CHECK_EQ_INT(stax_dim_const_value(stax_value_dims(g, out[3])[0]), 5);
  /* The body's own T + 1 means nothing outside: fresh. */
  CHECK(stax_dim_as_symbol(stax_value_dims(g, out[3])[1], &id));
  stax_graph_destroy(g);
}

/* A body input declared with its own symbol unifies with the initial dim when stable; with
 * a condition the iteration count is a fresh dim in [0, M]. */
static void test_loop_while(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t acc = shape_test_input(g, "acc0", F32, "B,4");
  stax_value_id_t seq = shape_test_input(g, "seq0", I64, "2");
  stax_value_id_t trips = shape_test_scalar(g, "trips", 9);
  stax_value_id_t cond = shape_test_input(g, "cond", BOOL, "");
  stax_value_id_t out[4];
  CHECK_OK(shape_test_node(g, STAX_OP_Loop, "loop", INPUTS(trips, cond, acc, seq),
                           ATTRS(stax_attr_graph("body", loop_body(g, "Inner,4"))), 4, out));
  CHECK_EQ_STR(shape_test_shape(g, out[0]), "[B, 4]");
  CHECK(stax_dim_known_equal(stax_graph_shape_ctx(g), shape_test_dim(g, "Inner"),
                             shape_test_dim(g, "B")));
  const stax_dim_t* count = stax_value_dims(g, out[2])[0];
  int64_t low = -1, high = -1;
  stax_dim_bounds(stax_graph_shape_ctx(g), count, &low, &high);
  CHECK_EQ_INT(low, 0);
  CHECK_EQ_INT(high, 9);
  CHECK(stax_value_dims(g, out[3])[0] == count);
  /* A trip count known only at run time: unbounded. */
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "");
  CHECK_OK(shape_test_node(g, STAX_OP_Loop, "runtime_trips", INPUTS(runtime, cond, acc, seq),
                           ATTRS(stax_attr_graph("body", loop_body(g, "B,4"))), 4, out));
  stax_dim_bounds(stax_graph_shape_ctx(g), stax_value_dims(g, out[2])[0], &low, &high);
  CHECK_EQ_INT(high, STAX_DIM_MAX);
  stax_graph_destroy(g);
}

static void test_loop_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t acc = shape_test_input(g, "acc0", F32, "B,4");
  stax_value_id_t acc5 = shape_test_input(g, "acc5", F32, "B,5");
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "B,4");
  stax_value_id_t seq = shape_test_input(g, "seq0", I64, "2");
  stax_value_id_t trips = shape_test_scalar(g, "trips", 5);
  stax_value_id_t cond = shape_test_input(g, "cond", BOOL, "");
  stax_value_id_t out[4];
  stax_graph_t* body = loop_body(g, "B,4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Loop, "inputs", INPUTS(trips, cond, acc),
                              ATTRS(stax_attr_graph("body", body)), 3, out),
              STAX_INVALID_ARGUMENT,
              "Loop node 'inputs': the body has 4 inputs; with 1 loop-carried");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Loop, "outputs", INPUTS(trips, cond, acc, seq),
                              ATTRS(stax_attr_graph("body", body)), 3, out),
              STAX_INVALID_ARGUMENT,
              "the node has 3 outputs but the body gives 2 loop-carried and 2");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Loop, "dtype", INPUTS(trips, cond, ints, seq),
                              ATTRS(stax_attr_graph("body", body)), 4, out),
              STAX_DTYPE_MISMATCH, "loop-carried value 0: input 2 'ints' is int64");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Loop, "dims", INPUTS(trips, cond, acc5, seq),
                              ATTRS(stax_attr_graph("body", body)), 4, out),
              STAX_SHAPE_MISMATCH, "body input 'acc', dim 1");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Loop, "nobody", INPUTS(trips, cond, acc, seq), NO_ATTRS, 4, out),
      STAX_INVALID_ARGUMENT, "attribute 'body' (a graph) is required");
  stax_value_id_t float_trips = shape_test_input(g, "float_trips", F32, "");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Loop, "trips", INPUTS(float_trips, cond, acc, seq),
                              ATTRS(stax_attr_graph("body", body)), 4, out),
              STAX_DTYPE_MISMATCH, "input 0 'float_trips' has dtype float32");
  stax_graph_destroy(body);
  /* A body whose condition output is not bool. */
  stax_graph_t* bad = subgraph(g);
  stax_value_id_t iteration = shape_test_input(bad, "iteration", I64, "");
  shape_test_input(bad, "cond_in", BOOL, "");
  CHECK_OK(stax_graph_add_output(bad, iteration));
  CHECK_OK(stax_graph_add_output(
      bad, shape_test_node1(bad, STAX_OP_Shape, "scan", INPUTS(iteration), NO_ATTRS)));
  CHECK_ERROR(shape_test_node(g, STAX_OP_Loop, "cond", INPUTS(trips, cond),
                              ATTRS(stax_attr_graph("body", bad)), 1, out),
              STAX_DTYPE_MISMATCH,
              "body output 0 'iteration' (the condition) is int64, expected bool");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Loop, "carried", INPUTS(trips, cond, acc),
                              ATTRS(stax_attr_graph("body", bad)), 1, out),
              STAX_INVALID_ARGUMENT, "the body has 2 inputs");
  stax_graph_destroy(bad);
  stax_graph_destroy(g);
}

/* A scan output of rank 8 would need rank 9 outside the loop. */
static void test_loop_scan_rank_limit(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t deep = shape_test_input(g, "deep", F32, "1,1,1,1,1,1,1,1");
  stax_value_id_t trips = shape_test_scalar(g, "trips", 2);
  stax_value_id_t cond = shape_test_input(g, "cond", BOOL, "");
  stax_graph_t* body = subgraph(g);
  shape_test_input(body, "iteration", I64, "");
  stax_value_id_t cond_in = shape_test_input(body, "cond_in", BOOL, "");
  stax_value_id_t local = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(body, deep, &local));
  CHECK_OK(stax_graph_add_output(body, cond_in));
  CHECK_OK(stax_graph_add_output(body, local));
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Loop, "deep", INPUTS(trips, cond),
                              ATTRS(stax_attr_graph("body", body)), 1, &out),
              STAX_UNIMPLEMENTED, "scan output 0 has rank 9");
  stax_graph_destroy(body);
  stax_graph_destroy(g);
}

/* ---- fault injection ---------------------------------------------------------------------- */

static stax_status_t add_node(stax_graph_t* graph, stax_op_t op, int32_t input_count,
                              const stax_value_id_t* inputs, int32_t attr_count,
                              const stax_attr_t* attrs, int32_t output_count,
                              stax_value_id_t* out_outputs) {
  stax_node_desc_t desc = {op, NULL, input_count, inputs, output_count, NULL, attr_count, attrs};
  return stax_graph_add_node(graph, &desc, out_outputs);
}

/* A branch or body: `capture` (if not NONE) is captured and passed through a Transpose. With
 * loop_inputs the graph is a Loop body: (iteration, cond, acc) -> (cond, acc, acc row 0). */
static stax_status_t build_subgraph(stax_graph_t* parent, stax_value_id_t capture, bool loop_inputs,
                                    stax_graph_t** out_graph) {
  STAX_RETURN_IF_ERROR(stax_graph_create_subgraph(parent, out_graph));
  stax_graph_t* graph = *out_graph;
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(graph);
  stax_value_id_t value = STAX_VALUE_NONE;
  if (loop_inputs) {
    const stax_dim_t* batch = NULL;
    STAX_RETURN_IF_ERROR(stax_symbol_get(ctx, "B", 1, STAX_DIM_MAX, &batch));
    const stax_dim_t* dims[2] = {batch, stax_dim_const(ctx, 8)};
    stax_value_id_t iteration = STAX_VALUE_NONE, cond = STAX_VALUE_NONE;
    STAX_RETURN_IF_ERROR(stax_graph_add_input(graph, "i", I64, 0, NULL, &iteration));
    STAX_RETURN_IF_ERROR(stax_graph_add_input(graph, "c", BOOL, 0, NULL, &cond));
    STAX_RETURN_IF_ERROR(stax_graph_add_input(graph, "acc", F32, 2, dims, &value));
    STAX_RETURN_IF_ERROR(stax_graph_add_output(graph, cond));
  } else {
    STAX_RETURN_IF_ERROR(stax_graph_capture(graph, capture, &value));
  }
  stax_value_id_t copied = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Transpose, 1, &value, 1,
                                (stax_attr_t[]){stax_attr_ints("perm", 2, (int64_t[]){0, 1})}, 1,
                                &copied));
  STAX_RETURN_IF_ERROR(stax_graph_add_output(graph, copied));
  if (loop_inputs) {
    stax_value_id_t row = STAX_VALUE_NONE, zero = STAX_VALUE_NONE;
    STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Constant, 0, NULL, 1,
                                  (stax_attr_t[]){stax_attr_int("value_int", 0)}, 1, &zero));
    STAX_RETURN_IF_ERROR(
        add_node(graph, STAX_OP_Gather, 2, (stax_value_id_t[]){copied, zero}, 0, NULL, 1, &row));
    STAX_RETURN_IF_ERROR(stax_graph_add_output(graph, row));
  }
  return STAX_OK;
}

/* Adds a node whose GRAPH attributes are owned by the caller until the node exists. */
static stax_status_t add_control_node(stax_graph_t* graph, stax_op_t op, int32_t input_count,
                                      const stax_value_id_t* inputs, int32_t graph_count,
                                      const char* const* attr_names, stax_graph_t** subgraphs,
                                      int32_t output_count, stax_value_id_t* out_outputs) {
  stax_attr_t attrs[2] = {{0}};
  for (int32_t k = 0; k < graph_count; k++) attrs[k] = stax_attr_graph(attr_names[k], subgraphs[k]);
  stax_status_t status =
      add_node(graph, op, input_count, inputs, graph_count, attrs, output_count, out_outputs);
  if (status == STAX_OK) {
    for (int32_t k = 0; k < graph_count; k++) subgraphs[k] = NULL; /* the node owns them now */
  }
  return status;
}

/* Shape arithmetic, Constant, Slice, NonZero, If and Loop: group B's allocating paths. */
static stax_status_t build_dynamic_graph(stax_allocator_t allocator, stax_graph_t** out_graph) {
  STAX_RETURN_IF_ERROR(stax_graph_create(allocator, out_graph));
  stax_graph_t* graph = *out_graph;
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(graph);
  const stax_dim_t* batch = NULL;
  STAX_RETURN_IF_ERROR(stax_symbol_get(ctx, "B", 1, STAX_DIM_MAX, &batch));
  const stax_dim_t* dims[2] = {batch, stax_dim_const(ctx, 8)};
  stax_value_id_t x = STAX_VALUE_NONE, cond = STAX_VALUE_NONE, shape = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_add_input(graph, "x", F32, 2, dims, &x));
  STAX_RETURN_IF_ERROR(stax_graph_add_input(graph, "cond", BOOL, 0, NULL, &cond));
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Shape, 1, &x, 0, NULL, 1, &shape));
  stax_value_id_t pick = STAX_VALUE_NONE, batch_piece = STAX_VALUE_NONE, tail = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Constant, 0, NULL, 1,
                                (stax_attr_t[]){stax_attr_ints("value_ints", 1, (int64_t[]){0})}, 1,
                                &pick));
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Gather, 2, (stax_value_id_t[]){shape, pick}, 0, NULL,
                                1, &batch_piece));
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Constant, 0, NULL, 1,
                                (stax_attr_t[]){stax_attr_ints("value_ints", 2, (int64_t[]){2, 4})},
                                1, &tail));
  stax_value_id_t target = STAX_VALUE_NONE, reshaped = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Concat, 2, (stax_value_id_t[]){batch_piece, tail}, 1,
                                (stax_attr_t[]){stax_attr_int("axis", 0)}, 1, &target));
  STAX_RETURN_IF_ERROR(
      add_node(graph, STAX_OP_Reshape, 2, (stax_value_id_t[]){x, target}, 0, NULL, 1, &reshaped));
  stax_value_id_t one = STAX_VALUE_NONE, minus_one = STAX_VALUE_NONE, sliced = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Constant, 0, NULL, 1,
                                (stax_attr_t[]){stax_attr_ints("value_ints", 1, (int64_t[]){1})}, 1,
                                &one));
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Constant, 0, NULL, 1,
                                (stax_attr_t[]){stax_attr_ints("value_ints", 1, (int64_t[]){-1})},
                                1, &minus_one));
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Slice, 3, (stax_value_id_t[]){x, one, minus_one}, 0,
                                NULL, 1, &sliced));
  stax_value_id_t nonzero = STAX_VALUE_NONE, chosen = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_NonZero, 1, &sliced, 0, NULL, 1, &nonzero));
  stax_graph_t* subgraphs[2] = {NULL, NULL};
  static const char* const branch_names[2] = {"then_branch", "else_branch"};
  stax_status_t status = build_subgraph(graph, x, false, &subgraphs[0]);
  if (status == STAX_OK) status = build_subgraph(graph, sliced, false, &subgraphs[1]);
  if (status == STAX_OK) {
    status = add_control_node(graph, STAX_OP_If, 1, &cond, 2, branch_names, subgraphs, 1, &chosen);
  }
  stax_graph_destroy(subgraphs[0]);
  stax_graph_destroy(subgraphs[1]);
  subgraphs[0] = subgraphs[1] = NULL;
  STAX_RETURN_IF_ERROR(status);
  stax_value_id_t trips = STAX_VALUE_NONE, loop_outputs[2];
  STAX_RETURN_IF_ERROR(add_node(graph, STAX_OP_Constant, 0, NULL, 1,
                                (stax_attr_t[]){stax_attr_int("value_int", 3)}, 1, &trips));
  static const char* const body_name[1] = {"body"};
  status = build_subgraph(graph, STAX_VALUE_NONE, true, &subgraphs[0]);
  if (status == STAX_OK) {
    status = add_control_node(graph, STAX_OP_Loop, 3, (stax_value_id_t[]){trips, cond, x}, 1,
                              body_name, subgraphs, 2, loop_outputs);
  }
  stax_graph_destroy(subgraphs[0]);
  STAX_RETURN_IF_ERROR(status);
  return stax_graph_verify(graph);
}

static void run_fault_injection(bool fail_all_after) {
  int successes = 0;
  uint64_t fail_at = 1;
  for (; fail_at < 20000 && successes == 0; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), fail_at);
    state.fail_all_after = fail_all_after;
    stax_graph_t* graph = NULL;
    stax_status_t status = build_dynamic_graph(stax_failing_allocator(&state), &graph);
    if (status == STAX_OK) {
      successes++;
      CHECK_EQ_INT(state.failed_count, 0);
      for (stax_node_id_t n = 0; n < stax_graph_node_count(graph); n++) {
        stax_value_id_t output = stax_node_output(graph, n, 0);
        if (stax_node_op(graph, n) == STAX_OP_Reshape) {
          CHECK_EQ_STR(shape_test_shape(graph, output), "[B, 2, 4]");
        } else if (stax_node_op(graph, n) == STAX_OP_If) {
          CHECK_EQ_INT(stax_value_rank(graph, output), 2);
        } else if (stax_node_op(graph, n) == STAX_OP_Loop) {
          CHECK_EQ_STR(shape_test_shape(graph, output), "[B, 8]");
          /* The run-time condition may stop early: up to 3 rows. */
          const stax_dim_t* rows = stax_value_dims(graph, stax_node_output(graph, n, 1))[0];
          int64_t low = -1, high = -1;
          stax_dim_bounds(stax_graph_shape_ctx(graph), rows, &low, &high);
          CHECK_EQ_INT(high, 3);
        }
      }
      CHECK_EQ_INT(stax_graph_node_count(graph), 13);
    } else {
      if (stax_status_code(status) != STAX_OUT_OF_MEMORY) {
        fprintf(stderr, "fail_at %llu: [%s] %s\n", (unsigned long long)fail_at,
                stax_status_code_name(stax_status_code(status)), stax_status_message(status));
      }
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      CHECK(state.failed_count > 0);
      stax_status_free(status);
    }
    stax_graph_destroy(graph);
    CHECK_EQ_INT(state.live_allocations, 0);
  }
  CHECK_EQ_INT(successes, 1);
  CHECK(fail_at > 50);
}

static void test_fault_fail_one_allocation(void) {
  run_fault_injection(false);
}
static void test_fault_fail_all_after(void) {
  run_fault_injection(true);
}

STAX_TEST_MAIN(STAX_TEST(test_if_merges_branches), STAX_TEST(test_if_constant_condition),
               STAX_TEST(test_if_errors), STAX_TEST(test_loop_for), STAX_TEST(test_loop_while),
               STAX_TEST(test_loop_errors), STAX_TEST(test_loop_scan_rank_limit),
               STAX_TEST(test_fault_fail_one_allocation), STAX_TEST(test_fault_fail_all_after))
