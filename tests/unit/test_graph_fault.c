/* Fault injection for the graph builder: the same small graph is built under a failing
 * allocator that fails allocation 1, 2, 3, ... until the build succeeds. Every failing run
 * must end in an OUT_OF_MEMORY status, and after stax_graph_destroy nothing may be left
 * allocated. Run once failing a single allocation (later ones succeed, exercising recovery)
 * and once failing every allocation from that point on. */
#include "ir/graph_internal.h"
#include "test_harness.h"

/* The build stops at the first error; whatever was built is handed back for destruction. */
static stax_status_t build_small_graph(stax_allocator_t allocator, stax_graph_t** out_graph,
                                       stax_tensor_t** out_weight) {
  STAX_RETURN_IF_ERROR(stax_graph_create(allocator, out_graph));
  stax_graph_t* graph = *out_graph;
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(graph);
  const stax_dim_t* batch = NULL;
  STAX_RETURN_IF_ERROR(stax_symbol_get(ctx, "B", 1, STAX_DIM_MAX, &batch));
  const stax_dim_t* dims[2] = {batch, stax_dim_const(ctx, 4)};
  stax_value_id_t x = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_add_input(graph, "x", STAX_DTYPE_FLOAT32, 2, dims, &x));

  int64_t weight_dims[1] = {4};
  STAX_RETURN_IF_ERROR(
      stax_tensor_create_zeros(allocator, STAX_DTYPE_FLOAT32, 1, weight_dims, out_weight));
  stax_value_id_t w = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_add_initializer(graph, "w", *out_weight, &w));
  int64_t shape_values[2] = {-1, 2};
  int64_t shape_dims[1] = {2};
  stax_tensor_t* shape = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(allocator, STAX_DTYPE_INT64, 1, shape_dims, &shape));
  memcpy(stax_tensor_data(shape), shape_values, sizeof(shape_values));
  stax_value_id_t shape_id = STAX_VALUE_NONE;
  stax_status_t status = stax_graph_add_initializer(graph, "shape", shape, &shape_id);
  stax_tensor_release(shape);
  STAX_RETURN_IF_ERROR(status);

  stax_value_id_t add_inputs[2] = {x, w};
  stax_value_id_t sum = STAX_VALUE_NONE;
  stax_node_desc_t add = {STAX_OP_Add, NULL, 2, add_inputs, 1, NULL, 0, NULL};
  STAX_RETURN_IF_ERROR(stax_graph_add_node(graph, &add, &sum));
  stax_attr_t alpha = stax_attr_float("alpha", 0.1f);
  const char* leaky_names[1] = {"activated"};
  stax_node_desc_t leaky = {STAX_OP_LeakyRelu, "leaky", 1, &sum, 1, leaky_names, 1, &alpha};
  stax_value_id_t activated = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_add_node(graph, &leaky, &activated));
  int64_t perm[2] = {1, 0};
  stax_attr_t perm_attr = stax_attr_ints("perm", 2, perm);
  stax_node_desc_t transpose = {STAX_OP_Transpose, NULL, 1, &activated, 1, NULL, 1, &perm_attr};
  stax_value_id_t transposed = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_add_node(graph, &transpose, &transposed));
  stax_value_id_t reshape_inputs[2] = {transposed, shape_id};
  stax_node_desc_t reshape = {STAX_OP_Reshape, "reshape", 2, reshape_inputs, 1, NULL, 0, NULL};
  stax_value_id_t reshaped = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_add_node(graph, &reshape, &reshaped));
  STAX_RETURN_IF_ERROR(stax_graph_add_output(graph, reshaped));
  STAX_RETURN_IF_ERROR(stax_graph_add_output(graph, activated));

  /* A subgraph with a capture, built and then destroyed by the caller's cleanup. */
  stax_graph_t* body = NULL;
  STAX_RETURN_IF_ERROR(stax_graph_create_subgraph(graph, &body));
  stax_value_id_t local = STAX_VALUE_NONE;
  status = stax_graph_capture(body, activated, &local);
  stax_value_id_t copied = STAX_VALUE_NONE;
  stax_node_desc_t identity = {STAX_OP_Identity, "copy", 1, &local, 1, NULL, 0, NULL};
  if (status == STAX_OK) status = stax_graph_add_node(body, &identity, &copied);
  if (status == STAX_OK) status = stax_graph_add_output(body, copied);
  if (status == STAX_OK) status = stax_graph_verify(body);
  stax_graph_destroy(body);
  STAX_RETURN_IF_ERROR(status);

  const stax_dim_t* declared[2] = {batch, stax_dim_const(ctx, 4)};
  STAX_RETURN_IF_ERROR(
      stax_graph_declare_shape(graph, activated, STAX_DTYPE_FLOAT32, 2, declared));
  STAX_RETURN_IF_ERROR(stax_graph_verify(graph));
  return STAX_OK;
}

static void run_fault_injection(bool fail_all_after) {
  int successes = 0;
  uint64_t fail_at = 1;
  for (; fail_at < 20000 && successes == 0; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), fail_at);
    state.fail_all_after = fail_all_after;
    stax_allocator_t allocator = stax_failing_allocator(&state);
    stax_graph_t* graph = NULL;
    stax_tensor_t* weight = NULL;
    stax_status_t status = build_small_graph(allocator, &graph, &weight);
    if (status == STAX_OK) {
      successes++;
      CHECK_EQ_INT(state.failed_count, 0);
      CHECK_EQ_INT(stax_graph_node_count(graph), 4);
    } else {
      if (stax_status_code(status) != STAX_OUT_OF_MEMORY || state.failed_count == 0) {
        fprintf(stderr, "fail_at %llu: [%s] %s\n", (unsigned long long)fail_at,
                stax_status_code_name(stax_status_code(status)), stax_status_message(status));
      }
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      CHECK(state.failed_count > 0);
      stax_status_free(status);
    }
    stax_graph_destroy(graph);
    stax_tensor_release(weight);
    if (state.live_allocations != 0) {
      fprintf(stderr, "fail_at %llu: %lld allocations leaked\n", (unsigned long long)fail_at,
              (long long)state.live_allocations);
    }
    CHECK_EQ_INT(state.live_allocations, 0);
    CHECK_EQ_INT(state.live_bytes, 0);
  }
  CHECK_EQ_INT(successes, 1);
  /* The graph really needed a good number of allocations, so many paths were exercised. */
  CHECK(fail_at > 20);
}

static void test_fail_one_allocation(void) { run_fault_injection(false); }
static void test_fail_all_after(void) { run_fault_injection(true); }

STAX_TEST_MAIN(STAX_TEST(test_fail_one_allocation), STAX_TEST(test_fail_all_after))
