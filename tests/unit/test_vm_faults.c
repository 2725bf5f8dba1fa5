/* Fault injection: compiling a program, creating a context and running it with an allocator
 * that fails its Nth allocation, for every N until the operation succeeds. Each failure must
 * come back as OUT_OF_MEMORY with nothing leaked (the allocator counts live allocations), and
 * a context that failed a run must still run correctly afterwards. */
#include "test_vm_util.h"

/* A graph touching most of the compiler: guards with an expression, a view, an If, a Loop
 * with a scan output, kernels with static and dynamic shapes. */
static stax_graph_t* build_graph(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 16), vm_const(g, 4)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t cond = vm_input(g, "cond", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t m = vm_input(g, "M", STAX_DTYPE_INT64, 0, NULL);
  uint8_t yes = 1;
  stax_value_id_t always = vm_initializer(g, "always", STAX_DTYPE_BOOL, 0, NULL, &yes);
  stax_value_id_t doubled = vm_binary(g, STAX_OP_Add, "double", x, x);
  int64_t perm[2] = {1, 0};
  stax_attr_t perm_attr = stax_attr_ints("perm", 2, perm);
  stax_value_id_t transposed = vm_node(g, STAX_OP_Transpose, "transpose", 1, &doubled, 1, &perm_attr);
  stax_graph_t* then_branch = NULL;
  stax_graph_t* else_branch = NULL;
  CHECK_OK(stax_graph_create_subgraph(g, &then_branch));
  CHECK_OK(stax_graph_create_subgraph(g, &else_branch));
  stax_value_id_t then_t = STAX_VALUE_NONE, else_t = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(then_branch, transposed, &then_t));
  CHECK_OK(stax_graph_capture(else_branch, transposed, &else_t));
  vm_output(then_branch, vm_unary(then_branch, STAX_OP_Relu, "relu", then_t));
  vm_output(else_branch, vm_binary(else_branch, STAX_OP_Mul, "square", else_t, else_t));
  stax_attr_t branches[2] = {stax_attr_graph("then_branch", then_branch),
                             stax_attr_graph("else_branch", else_branch)};
  stax_value_id_t chosen = vm_node(g, STAX_OP_If, "if", 1, &cond, 2, branches);
  stax_graph_t* body = NULL;
  CHECK_OK(stax_graph_create_subgraph(g, &body));
  const stax_dim_t* t_dims[2] = {vm_const(g, 4), dims[0]};
  vm_input(body, "iteration", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t cond_in = vm_input(body, "cond_in", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t acc = vm_input(body, "acc", STAX_DTYPE_FLOAT32, 2, t_dims);
  stax_value_id_t captured = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(body, chosen, &captured));
  stax_value_id_t next = vm_binary(body, STAX_OP_Add, "accumulate", acc, captured);
  vm_output(body, vm_unary(body, STAX_OP_Identity, "keep_going", cond_in));
  vm_output(body, next);
  vm_output(body, vm_unary(body, STAX_OP_Relu, "scan", next));
  stax_value_id_t loop_inputs[3] = {m, always, chosen};
  stax_value_id_t loop_outputs[2];
  stax_attr_t body_attr = stax_attr_graph("body", body);
  stax_node_desc_t desc = {.op = STAX_OP_Loop, .name = "loop", .input_count = 3,
                           .inputs = loop_inputs, .output_count = 2, .attr_count = 1,
                           .attrs = &body_attr};
  CHECK_OK(stax_graph_add_node(g, &desc, loop_outputs));
  vm_output(g, loop_outputs[0]);
  vm_output(g, loop_outputs[1]);
  return g;
}

static void test_compile_faults(void) {
  stax_graph_t* g = build_graph();
  int failures = 0;
  bool succeeded = false;
  for (uint64_t fail_at = 1; fail_at < 20000 && !succeeded; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, vm_alloc(), fail_at);
    stax_program_t* program = NULL;
    stax_status_t status = stax_program_compile(stax_failing_allocator(&state), g, NULL, &program);
    if (status == STAX_OK) {
      succeeded = true;
      stax_program_release(program);
    } else {
      failures++;
      CHECK(program == NULL);
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      stax_status_free(status);
    }
    CHECK_EQ_INT(state.live_allocations, 0);
    CHECK_EQ_INT(state.live_bytes, 0);
  }
  CHECK(succeeded);
  CHECK(failures > 50); /* the compiler allocates a lot: each point was exercised */
  stax_graph_destroy(g);
}

static void test_run_faults(void) {
  stax_graph_t* g = build_graph();
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  int64_t x_dims[2] = {3, 4};
  float xs[12];
  for (int i = 0; i < 12; i++) xs[i] = (float)i - 5.0f;
  uint8_t yes = 1;
  int64_t trips = 3;
  stax_tensor_t* inputs[3] = {vm_tensor(STAX_DTYPE_FLOAT32, 2, x_dims, xs),
                              vm_tensor(STAX_DTYPE_BOOL, 0, NULL, &yes),
                              vm_tensor(STAX_DTYPE_INT64, 0, NULL, &trips)};
  /* With the memory plan (the default) and without: placed temporaries allocate nothing, so
   * the run has fewer allocation points with it (the arena is one). */
  for (int planned = 0; planned < 2; planned++) {
  stax_context_options_t options = {.disable_memory_plan = !planned};
  bool succeeded = false;
  int run_failures = 0;
  for (uint64_t fail_at = 1; fail_at < 5000 && !succeeded; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, vm_alloc(), fail_at);
    stax_context_t* context = NULL;
    stax_status_t status =
        stax_context_create(stax_failing_allocator(&state), program, &options, &context);
    if (status) {
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      stax_status_free(status);
      CHECK_EQ_INT(state.live_allocations, 0);
      continue;
    }
    stax_tensor_t* outputs[2] = {NULL, NULL};
    status = stax_context_run(context, 3, inputs, 2, outputs);
    if (status) {
      run_failures++;
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      CHECK(outputs[0] == NULL && outputs[1] == NULL);
      stax_status_free(status);
      /* The same context runs fine once memory is available again. */
      state.fail_at = 0;
      CHECK_OK(stax_context_run(context, 3, inputs, 2, outputs));
    } else {
      succeeded = true;
    }
    if (outputs[0] && outputs[1]) {
      int64_t final_dims[2] = {4, 3}, scan_dims[3] = {3, 4, 3};
      CHECK(vm_dims_equal(outputs[0], 2, final_dims));
      CHECK(vm_dims_equal(outputs[1], 3, scan_dims));
      /* chosen = Relu(2x)^T; final = chosen * (M + 1). */
      for (int64_t i = 0; i < 4; i++) {
        for (int64_t j = 0; j < 3; j++) {
          float chosen = 2 * xs[j * 4 + i] > 0 ? 2 * xs[j * 4 + i] : 0;
          CHECK_NEAR(vm_f32(outputs[0])[i * 3 + j], chosen * 4, 0);
        }
      }
    }
    for (int k = 0; k < 2; k++)
      if (outputs[k]) stax_tensor_release(outputs[k]);
    stax_context_destroy(context);
    CHECK_EQ_INT(state.live_allocations, 0);
    CHECK_EQ_INT(state.live_bytes, 0);
  }
  CHECK(succeeded);
  CHECK(run_failures > (planned ? 1 : 5));
  }
  for (int k = 0; k < 3; k++) stax_tensor_release(inputs[k]);
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_compile_faults), STAX_TEST(test_run_faults))
