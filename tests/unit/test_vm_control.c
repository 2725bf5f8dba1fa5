/* VM control flow: If lowered to JUMP_IF_FALSE / MOVE / JUMP with both branches inline, and
 * ONNX Loop lowered to LOOP_BEGIN / body / LOOP_END: trip counts, conditions, zero
 * iterations, scan outputs stacked at exit, and loop-carried values that change shape from
 * one iteration to the next (their symbols rebound at each body entry). Values are checked
 * against plain C under both dispatch loops. */
#include "test_vm_util.h"

static stax_graph_t* vm_subgraph(stax_graph_t* parent) {
  stax_graph_t* sub = NULL;
  CHECK_OK(stax_graph_create_subgraph(parent, &sub));
  return sub;
}

static stax_value_id_t vm_capture(stax_graph_t* sub, stax_value_id_t outer) {
  stax_value_id_t local = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(sub, outer, &local));
  return local;
}

static stax_value_id_t vm_if(stax_graph_t* g, stax_value_id_t cond, stax_graph_t* then_branch,
                             stax_graph_t* else_branch) {
  stax_attr_t attrs[2] = {stax_attr_graph("then_branch", then_branch),
                          stax_attr_graph("else_branch", else_branch)};
  return vm_node(g, STAX_OP_If, "if", 1, &cond, 2, attrs);
}

static stax_tensor_t* vm_bool_scalar(bool value) {
  uint8_t byte = value ? 1 : 0;
  return vm_tensor(STAX_DTYPE_BOOL, 0, NULL, &byte);
}

static stax_tensor_t* vm_int_scalar(int64_t value) {
  return vm_tensor(STAX_DTYPE_INT64, 0, NULL, &value);
}

/* A constant true condition: the graph builder wants Loop's M and cond present. */
static stax_value_id_t vm_always(stax_graph_t* g) {
  uint8_t yes = 1;
  return vm_initializer(g, "always", STAX_DTYPE_BOOL, 0, NULL, &yes);
}

/* if cond: x + 1 else: x * x, x: float32[N]. */
static void test_if(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t cond = vm_input(g, "cond", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  float one_value = 1.0f;
  int64_t one_dims[1] = {1};
  stax_value_id_t one = vm_initializer(g, "one", STAX_DTYPE_FLOAT32, 1, one_dims, &one_value);
  stax_graph_t* then_branch = vm_subgraph(g);
  vm_output(then_branch, vm_binary(then_branch, STAX_OP_Add, "plus_one",
                                   vm_capture(then_branch, x), vm_capture(then_branch, one)));
  stax_graph_t* else_branch = vm_subgraph(g);
  stax_value_id_t else_x = vm_capture(else_branch, x);
  vm_output(else_branch, vm_binary(else_branch, STAX_OP_Mul, "square", else_x, else_x));
  vm_output(g, vm_if(g, cond, then_branch, else_branch));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  char* text = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "JUMP_IF_FALSE") && strstr(text, "MOVE"));
  free(text);
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int taken = 0; taken < 2; taken++) {
      int64_t x_dims[1] = {5};
      float xs[5] = {-2, -1, 0, 1, 2.5f};
      stax_tensor_t* inputs[2] = {vm_bool_scalar(taken), vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs)};
      stax_tensor_t* output = NULL;
      CHECK_OK(stax_context_run(context, 2, inputs, 1, &output));
      if (output) {
        CHECK(vm_dims_equal(output, 1, x_dims));
        for (int i = 0; i < 5; i++)
          CHECK_NEAR(vm_f32(output)[i], taken ? xs[i] + 1 : xs[i] * xs[i], 0);
        stax_tensor_release(output);
      }
      stax_tensor_release(inputs[0]);
      stax_tensor_release(inputs[1]);
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* Branches of different lengths: then Concat(x, x) [2N], else x [N]. The If's output dim is a
 * fresh symbol bound after the join, and the Relu after it is preallocated from it. */
static void test_if_branch_shapes_differ(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t cond = vm_input(g, "cond", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  stax_graph_t* then_branch = vm_subgraph(g);
  stax_value_id_t then_x = vm_capture(then_branch, x);
  stax_value_id_t pair[2] = {then_x, then_x};
  stax_attr_t axis = stax_attr_int("axis", 0);
  vm_output(then_branch, vm_node(then_branch, STAX_OP_Concat, "twice", 2, pair, 1, &axis));
  stax_graph_t* else_branch = vm_subgraph(g);
  vm_output(else_branch, vm_capture(else_branch, x));
  stax_value_id_t chosen = vm_if(g, cond, then_branch, else_branch);
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", chosen));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  char* text = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "SHAPE_VARIANT") && strstr(text, "ALLOC_TENSOR"));
  free(text);
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int taken = 0; taken < 2; taken++) {
      for (int64_t n = 1; n <= 3; n++) {
        int64_t x_dims[1] = {n};
        float xs[3] = {-1.5f, 2.0f, 3.0f};
        stax_tensor_t* inputs[2] = {vm_bool_scalar(taken), vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs)};
        stax_tensor_t* output = NULL;
        CHECK_OK(stax_context_run(context, 2, inputs, 1, &output));
        int64_t out_dims[1] = {taken ? 2 * n : n};
        if (output) {
          CHECK(vm_dims_equal(output, 1, out_dims));
          for (int64_t i = 0; i < out_dims[0]; i++) {
            float value = xs[i % n];
            CHECK_NEAR(vm_f32(output)[i], value < 0 ? 0 : value, 0);
          }
          stax_tensor_release(output);
        }
        stax_tensor_release(inputs[0]);
        stax_tensor_release(inputs[1]);
      }
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* Loop M times: acc = acc + x (acc starts at x), scan acc * acc. */
static stax_program_t* build_accumulate_loop(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* n[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t m = vm_input(g, "M", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, n);
  stax_graph_t* body = vm_subgraph(g);
  vm_input(body, "iteration", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t cond_in = vm_input(body, "cond_in", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t acc = vm_input(body, "acc", STAX_DTYPE_FLOAT32, 1, n);
  stax_value_id_t next = vm_binary(body, STAX_OP_Add, "accumulate", acc, vm_capture(body, x));
  vm_output(body, vm_unary(body, STAX_OP_Identity, "keep_going", cond_in));
  vm_output(body, next);
  vm_output(body, vm_binary(body, STAX_OP_Mul, "square", next, next));
  stax_value_id_t inputs[3] = {m, vm_always(g), x};
  stax_value_id_t outputs[2];
  stax_attr_t attr = stax_attr_graph("body", body);
  stax_node_desc_t desc = {.op = STAX_OP_Loop, .name = "loop", .input_count = 3, .inputs = inputs,
                           .output_count = 2, .attr_count = 1, .attrs = &attr};
  CHECK_OK(stax_graph_add_node(g, &desc, outputs));
  vm_output(g, outputs[0]);
  vm_output(g, outputs[1]);
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  return program;
}

static void test_loop_accumulate(void) {
  stax_program_t* program = build_accumulate_loop();
  if (!program) return;
  char* text = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "LOOP_BEGIN") && strstr(text, "LOOP_END"));
  free(text);
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    int64_t trips[4] = {3, 0, 1, 5};
    for (int t = 0; t < 4; t++) {
      int64_t x_dims[1] = {4};
      float xs[4] = {1, -2, 0.5f, 3};
      stax_tensor_t* inputs[2] = {vm_int_scalar(trips[t]), vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs)};
      stax_tensor_t* outputs[2] = {NULL, NULL};
      CHECK_OK(stax_context_run(context, 2, inputs, 2, outputs));
      int64_t scan_dims[2] = {trips[t], 4};
      if (outputs[0] && outputs[1]) {
        CHECK(vm_dims_equal(outputs[0], 1, x_dims));
        CHECK(vm_dims_equal(outputs[1], 2, scan_dims));
        for (int i = 0; i < 4; i++)
          CHECK_NEAR(vm_f32(outputs[0])[i], xs[i] * (float)(trips[t] + 1), 1e-5);
        for (int64_t k = 0; k < trips[t]; k++) {
          for (int i = 0; i < 4; i++) {
            float acc = xs[i] * (float)(k + 2);
            CHECK_NEAR(vm_f32(outputs[1])[k * 4 + i], acc * acc, 1e-4);
          }
        }
      }
      for (int k = 0; k < 2; k++) {
        if (outputs[k]) stax_tensor_release(outputs[k]);
        stax_tensor_release(inputs[k]);
      }
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* The carried value grows by one element per iteration (acc: [K] with K rebound at each body
 * entry); the final value's dim is bound after the loop and Relu runs on it. */
static void test_loop_changing_shape(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* n[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t m = vm_input(g, "M", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, n);
  float minus_one = -1.0f;
  int64_t one_dims[1] = {1};
  stax_value_id_t tail = vm_initializer(g, "tail", STAX_DTYPE_FLOAT32, 1, one_dims, &minus_one);
  stax_graph_t* body = vm_subgraph(g);
  const stax_dim_t* k[1] = {vm_symbol(body, "K", 0, STAX_DIM_MAX)};
  vm_input(body, "iteration", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t cond_in = vm_input(body, "cond_in", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t acc = vm_input(body, "acc", STAX_DTYPE_FLOAT32, 1, k);
  stax_value_id_t pieces[2] = {acc, vm_capture(body, tail)};
  stax_attr_t axis = stax_attr_int("axis", 0);
  vm_output(body, vm_unary(body, STAX_OP_Identity, "keep_going", cond_in));
  vm_output(body, vm_node(body, STAX_OP_Concat, "grow", 2, pieces, 1, &axis));
  stax_value_id_t inputs[3] = {m, vm_always(g), x};
  stax_value_id_t grown = STAX_VALUE_NONE;
  stax_attr_t attr = stax_attr_graph("body", body);
  stax_node_desc_t desc = {.op = STAX_OP_Loop, .name = "loop", .input_count = 3, .inputs = inputs,
                           .output_count = 1, .attr_count = 1, .attrs = &attr};
  CHECK_OK(stax_graph_add_node(g, &desc, &grown));
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", grown));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int64_t trips = 0; trips <= 4; trips++) {
      int64_t x_dims[1] = {3};
      float xs[3] = {1, -2, 3};
      stax_tensor_t* inputs[2] = {vm_int_scalar(trips), vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs)};
      stax_tensor_t* output = NULL;
      CHECK_OK(stax_context_run(context, 2, inputs, 1, &output));
      int64_t out_dims[1] = {3 + trips};
      if (output) {
        CHECK(vm_dims_equal(output, 1, out_dims));
        for (int64_t i = 0; i < 3 + trips; i++)
          CHECK_NEAR(vm_f32(output)[i], i < 3 && xs[i] > 0 ? xs[i] : 0, 0);
        stax_tensor_release(output);
      }
      stax_tensor_release(inputs[0]);
      stax_tensor_release(inputs[1]);
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* A large trip count: the body's condition (iteration < limit) stops the loop first. */
static void test_loop_condition(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* n[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t start = vm_input(g, "start", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t limit = vm_input(g, "limit", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, n);
  stax_graph_t* body = vm_subgraph(g);
  stax_value_id_t iteration = vm_input(body, "iteration", STAX_DTYPE_INT64, 0, NULL);
  vm_input(body, "cond_in", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t acc = vm_input(body, "acc", STAX_DTYPE_FLOAT32, 1, n);
  vm_output(body, vm_binary(body, STAX_OP_Less, "more", iteration, vm_capture(body, limit)));
  vm_output(body, vm_binary(body, STAX_OP_Add, "accumulate", acc, vm_capture(body, x)));
  int64_t many = 1000;
  stax_value_id_t cap = vm_initializer(g, "cap", STAX_DTYPE_INT64, 0, NULL, &many);
  stax_value_id_t inputs[3] = {cap, start, x};
  stax_value_id_t result = STAX_VALUE_NONE;
  stax_attr_t attr = stax_attr_graph("body", body);
  stax_node_desc_t desc = {.op = STAX_OP_Loop, .name = "loop", .input_count = 3, .inputs = inputs,
                           .output_count = 1, .attr_count = 1, .attrs = &attr};
  CHECK_OK(stax_graph_add_node(g, &desc, &result));
  vm_output(g, result);
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int64_t lim = 0; lim <= 3; lim++) {
      for (int begin = 0; begin < 2; begin++) {
        int64_t x_dims[1] = {2};
        float xs[2] = {1.5f, -1};
        stax_tensor_t* inputs[3] = {vm_bool_scalar(begin), vm_int_scalar(lim),
                                    vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs)};
        stax_tensor_t* output = NULL;
        CHECK_OK(stax_context_run(context, 3, inputs, 1, &output));
        /* Iterations 0..lim run (the one with iteration == lim reports false). */
        float factor = begin ? (float)(lim + 2) : 1.0f;
        if (output) {
          for (int i = 0; i < 2; i++) CHECK_NEAR(vm_f32(output)[i], xs[i] * factor, 1e-5);
          stax_tensor_release(output);
        }
        for (int k = 0; k < 3; k++) stax_tensor_release(inputs[k]);
      }
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* An If inside a Loop body, capturing x through two levels: even iterations add x, odd ones
 * subtract it. */
static void test_if_inside_loop(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* n[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t m = vm_input(g, "M", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, n);
  int64_t two = 2, zero = 0;
  stax_value_id_t two_value = vm_initializer(g, "two", STAX_DTYPE_INT64, 0, NULL, &two);
  stax_value_id_t zero_value = vm_initializer(g, "zero", STAX_DTYPE_INT64, 0, NULL, &zero);
  stax_graph_t* body = vm_subgraph(g);
  stax_value_id_t iteration = vm_input(body, "iteration", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t cond_in = vm_input(body, "cond_in", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t acc = vm_input(body, "acc", STAX_DTYPE_FLOAT32, 1, n);
  stax_value_id_t parity = vm_binary(body, STAX_OP_Mod, "parity", iteration, vm_capture(body, two_value));
  stax_value_id_t even = vm_binary(body, STAX_OP_Equal, "even", parity, vm_capture(body, zero_value));
  stax_value_id_t body_x = vm_capture(body, x);
  stax_graph_t* then_branch = vm_subgraph(body);
  vm_output(then_branch, vm_binary(then_branch, STAX_OP_Add, "add_x", vm_capture(then_branch, acc),
                                   vm_capture(then_branch, body_x)));
  stax_graph_t* else_branch = vm_subgraph(body);
  vm_output(else_branch, vm_binary(else_branch, STAX_OP_Sub, "sub_x", vm_capture(else_branch, acc),
                                   vm_capture(else_branch, body_x)));
  vm_output(body, vm_unary(body, STAX_OP_Identity, "keep_going", cond_in));
  vm_output(body, vm_if(body, even, then_branch, else_branch));
  stax_value_id_t inputs[3] = {m, vm_always(g), x};
  stax_value_id_t result = STAX_VALUE_NONE;
  stax_attr_t attr = stax_attr_graph("body", body);
  stax_node_desc_t desc = {.op = STAX_OP_Loop, .name = "loop", .input_count = 3, .inputs = inputs,
                           .output_count = 1, .attr_count = 1, .attrs = &attr};
  CHECK_OK(stax_graph_add_node(g, &desc, &result));
  vm_output(g, result);
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int64_t trips = 0; trips <= 5; trips++) {
      int64_t x_dims[1] = {3};
      float xs[3] = {1, -2, 0.5f};
      stax_tensor_t* inputs_now[2] = {vm_int_scalar(trips), vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs)};
      stax_tensor_t* output = NULL;
      CHECK_OK(stax_context_run(context, 2, inputs_now, 1, &output));
      float factor = 1.0f;
      for (int64_t i = 0; i < trips; i++) factor += i % 2 == 0 ? 1.0f : -1.0f;
      if (output) {
        CHECK(vm_dims_equal(output, 1, x_dims));
        for (int i = 0; i < 3; i++) CHECK_NEAR(vm_f32(output)[i], xs[i] * factor, 1e-6);
        stax_tensor_release(output);
      }
      stax_tensor_release(inputs_now[0]);
      stax_tensor_release(inputs_now[1]);
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

static void test_loop_errors(void) {
  stax_program_t* program = build_accumulate_loop();
  if (!program) return;
  stax_context_t* context = vm_context(program, STAX_DISPATCH_DEFAULT);
  int64_t x_dims[1] = {2}, m_dims[1] = {2};
  float xs[2] = {1, 2};
  int64_t two_trips[2] = {1, 2};
  /* M must be a scalar: a rank mismatch is caught at the input boundary. */
  stax_tensor_t* inputs[2] = {vm_tensor(STAX_DTYPE_INT64, 1, m_dims, two_trips),
                              vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs)};
  stax_tensor_t* outputs[2] = {NULL, NULL};
  CHECK_ERROR(stax_context_run(context, 2, inputs, 2, outputs), STAX_SHAPE_MISMATCH,
              "input \"M\" has rank 1");
  CHECK(outputs[0] == NULL && outputs[1] == NULL);
  stax_tensor_release(inputs[0]);
  inputs[0] = vm_int_scalar(2);
  CHECK_OK(stax_context_run(context, 2, inputs, 2, outputs)); /* still usable */
  for (int k = 0; k < 2; k++) {
    if (outputs[k]) stax_tensor_release(outputs[k]);
    stax_tensor_release(inputs[k]);
  }
  stax_context_destroy(context);
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_if), STAX_TEST(test_if_branch_shapes_differ),
               STAX_TEST(test_loop_accumulate), STAX_TEST(test_loop_changing_shape),
               STAX_TEST(test_loop_condition), STAX_TEST(test_if_inside_loop),
               STAX_TEST(test_loop_errors))
