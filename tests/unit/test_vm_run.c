/* VM end to end: graphs built with the C API, compiled to bytecode and run under both dispatch
 * loops, compared with values computed here in plain C. Covers elementwise chains with
 * broadcasting, static variants, MatMul, views (Reshape, Transpose), Shape/Concat feeding a
 * Reshape, a run-time Reshape shape, NonZero (data-dependent dims), 100+ random shapes through
 * one program, output ownership, profiling counters and the disassembly. */
#include "test_vm_util.h"

/* out = Relu((x + y) * x), x and y: float32[B, 4]. */
static stax_graph_t* build_add_mul_relu(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 64), vm_const(g, 4)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t sum = vm_binary(g, STAX_OP_Add, "add", x, y);
  stax_value_id_t product = vm_binary(g, STAX_OP_Mul, "mul", sum, x);
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", product));
  return g;
}

static void test_add_mul_relu(void) {
  stax_graph_t* g = build_add_mul_relu();
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g); /* the program keeps what it needs */
  if (!program) return;
  CHECK_EQ_INT(stax_program_input_count(program), 2);
  CHECK_EQ_INT(stax_program_output_count(program), 1);
  CHECK_EQ_STR(stax_program_input_name(program, 1), "y");
  CHECK_EQ_INT(stax_program_input_dtype(program, 0), STAX_DTYPE_FLOAT32);
  CHECK_EQ_INT(stax_program_output_rank(program, 0), 2);
  char text[32];
  CHECK(stax_program_input_dim_text(program, 0, 0, text, sizeof(text)) > 0);
  CHECK_EQ_STR(text, "B");
  stax_program_output_dim_text(program, 0, 1, text, sizeof(text));
  CHECK_EQ_STR(text, "4");
  CHECK_EQ_INT(stax_program_input_dim_text(program, 0, 2, text, sizeof(text)), -1);
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    int64_t dims[2] = {3, 4};
    float xs[12], ys[12];
    for (int i = 0; i < 12; i++) {
      xs[i] = (float)(i - 5) * 0.5f;
      ys[i] = (float)(7 - i) * 0.25f;
    }
    stax_tensor_t* inputs[2] = {vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, xs),
                                vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, ys)};
    stax_tensor_t* output = NULL;
    CHECK_OK(stax_context_run(context, 2, inputs, 1, &output));
    if (output) {
      CHECK(vm_dims_equal(output, 2, dims));
      for (int i = 0; i < 12; i++) {
        float expected = (xs[i] + ys[i]) * xs[i];
        CHECK_NEAR(vm_f32(output)[i], expected < 0 ? 0.0f : expected, 1e-6);
      }
      stax_tensor_release(output);
    }
    stax_tensor_release(inputs[0]);
    stax_tensor_release(inputs[1]);
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

static void test_static_variant_and_disassembly(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_const(g, 2), vm_const(g, 3)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 2, dims);
  vm_output(g, vm_binary(g, STAX_OP_Add, "add", x, y));
  stax_program_t* with_static = vm_compile(g);
  stax_compile_options_t options = {.disable_static_variants = true,
                                    .disable_profile_points = true};
  stax_program_t* generic = NULL;
  CHECK_OK(stax_program_compile(vm_alloc(), g, &options, &generic));
  stax_graph_destroy(g);
  if (!with_static || !generic) return;
  char* text = vm_disassembly(with_static, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "Add_STATIC"));
  CHECK(text && strstr(text, "float32[2, 3]"));
  CHECK(text && strstr(text, "PROFILE_POINT"));
  /* The JIT guard in front of the segment: match a compiled version, call it, jump past. */
  CHECK(text && strstr(text, "JUMP_IF_SHAPE_UNMATCHED    jit versions of segment 0, -> "));
  CHECK(text && strstr(text, "CALL_FUNC                  function \"stax.jit\", (), ()"));
  free(text);
  text = vm_disassembly(generic, STAX_DISASSEMBLE_EXTENDED | STAX_DISASSEMBLE_COMPACT);
  CHECK(text && !strstr(text, "Add_STATIC") && strstr(text, "Add "));
  CHECK(text && !strstr(text, "PROFILE_POINT") && !strstr(text, "JUMP_IF_SHAPE_UNMATCHED"));
  CHECK(text && strstr(text, "compact form"));
  free(text);
  for (int p = 0; p < 2; p++) {
    stax_context_t* context = vm_context(p ? generic : with_static, STAX_DISPATCH_DEFAULT);
    int64_t shape[2] = {2, 3};
    float xs[6] = {1, 2, 3, 4, 5, 6}, ys[6] = {10, 20, 30, 40, 50, 60};
    stax_tensor_t* inputs[2] = {vm_tensor(STAX_DTYPE_FLOAT32, 2, shape, xs),
                                vm_tensor(STAX_DTYPE_FLOAT32, 2, shape, ys)};
    stax_tensor_t* output = NULL;
    CHECK_OK(stax_context_run(context, 2, inputs, 1, &output));
    for (int i = 0; output && i < 6; i++) CHECK_NEAR(vm_f32(output)[i], xs[i] + ys[i], 0);
    if (output) stax_tensor_release(output);
    stax_tensor_release(inputs[0]);
    stax_tensor_release(inputs[1]);
    stax_context_destroy(context);
  }
  stax_program_release(with_static);
  stax_program_release(generic);
}

/* out0 = Relu((x + y) * x), out1 = out0 - y with x: [B, S], y: [S] broadcast; 120 random
 * shapes in sequence through one program and one context per dispatch mode. */
static void test_random_shapes(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* x_dims[2] = {vm_symbol(g, "B", 1, 16), vm_symbol(g, "S", 1, 16)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, x_dims);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 1, x_dims + 1);
  stax_value_id_t sum = vm_binary(g, STAX_OP_Add, "add", x, y);
  stax_value_id_t product = vm_binary(g, STAX_OP_Mul, "mul", sum, x);
  stax_value_id_t relu = vm_unary(g, STAX_OP_Relu, "relu", product);
  vm_output(g, relu);
  vm_output(g, vm_binary(g, STAX_OP_Sub, "sub", relu, y));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  vm_rng_t rng = {0x1234abcd};
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    int mismatches = 0;
    for (int round = 0; round < 120; round++) {
      int64_t b = vm_rng_range(&rng, 1, 16), s = vm_rng_range(&rng, 1, 16);
      int64_t dims[2] = {b, s};
      stax_tensor_t* inputs[2] = {vm_random_f32(&rng, 2, dims), vm_random_f32(&rng, 1, dims + 1)};
      stax_tensor_t* outputs[2] = {NULL, NULL};
      CHECK_OK(stax_context_run(context, 2, inputs, 2, outputs));
      if (outputs[0] && outputs[1]) {
        CHECK(vm_dims_equal(outputs[0], 2, dims) && vm_dims_equal(outputs[1], 2, dims));
        const float* xs = vm_f32(inputs[0]);
        const float* ys = vm_f32(inputs[1]);
        for (int64_t i = 0; i < b * s; i++) {
          float value = (xs[i] + ys[i % s]) * xs[i];
          float relu_value = value < 0 ? 0.0f : value;
          if (vm_f32(outputs[0])[i] != relu_value || vm_f32(outputs[1])[i] != relu_value - ys[i % s])
            mismatches++;
        }
      }
      for (int k = 0; k < 2; k++) {
        if (outputs[k]) stax_tensor_release(outputs[k]);
        stax_tensor_release(inputs[k]);
      }
    }
    CHECK_EQ_INT(mismatches, 0);
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* out = x @ w + bias with w: [4, 3] and bias: [3] constants. */
static void test_matmul(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 32), vm_const(g, 4)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  float weights[12], bias[3] = {0.5f, -1.0f, 2.0f};
  for (int i = 0; i < 12; i++) weights[i] = (float)(i % 5) - 2.0f;
  int64_t w_dims[2] = {4, 3}, b_dims[1] = {3};
  stax_value_id_t w = vm_initializer(g, "w", STAX_DTYPE_FLOAT32, 2, w_dims, weights);
  stax_value_id_t b = vm_initializer(g, "bias", STAX_DTYPE_FLOAT32, 1, b_dims, bias);
  stax_value_id_t product = vm_binary(g, STAX_OP_MatMul, "matmul", x, w);
  vm_output(g, vm_binary(g, STAX_OP_Add, "bias_add", product, b));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  vm_rng_t rng = {77};
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int64_t rows = 1; rows <= 5; rows += 2) {
      int64_t x_dims[2] = {rows, 4};
      stax_tensor_t* input = vm_random_f32(&rng, 2, x_dims);
      stax_tensor_t* output = NULL;
      CHECK_OK(stax_context_run(context, 1, &input, 1, &output));
      int64_t out_dims[2] = {rows, 3};
      if (output) {
        CHECK(vm_dims_equal(output, 2, out_dims));
        for (int64_t r = 0; r < rows; r++) {
          for (int c = 0; c < 3; c++) {
            float expected = bias[c];
            for (int k = 0; k < 4; k++) expected += vm_f32(input)[r * 4 + k] * weights[k * 3 + c];
            CHECK_NEAR(vm_f32(output)[r * 3 + c], expected, 1e-5);
          }
        }
        stax_tensor_release(output);
      }
      stax_tensor_release(input);
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* r = Reshape(x[B, 6], [-1, 3]) -> [2B, 3] (a view); t = Transpose(r) -> [3, 2B] (a view);
 * outputs t itself and Relu(t). */
static void test_views(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 32), vm_const(g, 6)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int64_t shape[2] = {-1, 3}, shape_dims[1] = {2};
  stax_value_id_t target = vm_initializer(g, "target", STAX_DTYPE_INT64, 1, shape_dims, shape);
  stax_value_id_t reshape_inputs[2] = {x, target};
  stax_value_id_t r = vm_node(g, STAX_OP_Reshape, "reshape", 2, reshape_inputs, 0, NULL);
  int64_t perm[2] = {1, 0};
  stax_attr_t attr = stax_attr_ints("perm", 2, perm);
  stax_value_id_t t = vm_node(g, STAX_OP_Transpose, "transpose", 1, &r, 1, &attr);
  vm_output(g, t);
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", t));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  char* text = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "RESHAPE_VIEW") && strstr(text, "TRANSPOSE_VIEW"));
  CHECK(text && strstr(text, "float32[2*B, 3]"));
  free(text);
  vm_rng_t rng = {99};
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int64_t b = 1; b <= 4; b++) {
      int64_t x_dims[2] = {b, 6};
      stax_tensor_t* input = vm_random_f32(&rng, 2, x_dims);
      stax_tensor_t* outputs[2] = {NULL, NULL};
      CHECK_OK(stax_context_run(context, 1, &input, 2, outputs));
      int64_t out_dims[2] = {3, 2 * b};
      if (outputs[0] && outputs[1]) {
        CHECK(vm_dims_equal(outputs[0], 2, out_dims) && vm_dims_equal(outputs[1], 2, out_dims));
        /* A view shares the input's buffer: no copy was made. */
        CHECK(stax_tensor_buffer(outputs[0]) == stax_tensor_buffer(input));
        for (int64_t i = 0; i < 3; i++) {
          for (int64_t j = 0; j < 2 * b; j++) {
            float expected = vm_f32(input)[j * 3 + i];
            CHECK_NEAR(vm_f32_at(outputs[0], i * 2 * b + j), expected, 0);
            CHECK_NEAR(vm_f32(outputs[1])[i * 2 * b + j], expected < 0 ? 0 : expected, 0);
          }
        }
      }
      for (int k = 0; k < 2; k++)
        if (outputs[k]) stax_tensor_release(outputs[k]);
      stax_tensor_release(input);
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* Expand(x[S], Shape(y[B, S])) -> [B, S] as a BROADCAST_TO view (stride 0 on dim 0). */
static void test_expand_view(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 32), vm_symbol(g, "S", 1, 32)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims + 1);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t expand_inputs[2] = {x, vm_unary(g, STAX_OP_Shape, "shape", y)};
  stax_value_id_t expanded = vm_node(g, STAX_OP_Expand, "expand", 2, expand_inputs, 0, NULL);
  vm_output(g, expanded);
  vm_output(g, vm_binary(g, STAX_OP_Mul, "mul", expanded, y));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  char* text = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "BROADCAST_TO") && strstr(text, "broadcast"));
  free(text);
  vm_rng_t rng = {31};
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int round = 0; round < 5; round++) {
      int64_t y_dims[2] = {vm_rng_range(&rng, 1, 4), vm_rng_range(&rng, 1, 4)};
      stax_tensor_t* inputs[2] = {vm_random_f32(&rng, 1, y_dims + 1), vm_random_f32(&rng, 2, y_dims)};
      stax_tensor_t* outputs[2] = {NULL, NULL};
      CHECK_OK(stax_context_run(context, 2, inputs, 2, outputs));
      if (outputs[0] && outputs[1]) {
        CHECK(vm_dims_equal(outputs[0], 2, y_dims) && vm_dims_equal(outputs[1], 2, y_dims));
        CHECK_EQ_INT(stax_tensor_strides(outputs[0])[0], 0);
        for (int64_t i = 0; i < y_dims[0] * y_dims[1]; i++) {
          float xv = vm_f32(inputs[0])[i % y_dims[1]];
          CHECK_NEAR(vm_f32_at(outputs[0], i), xv, 0);
          CHECK_NEAR(vm_f32(outputs[1])[i], xv * vm_f32(inputs[1])[i], 0);
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

/* Reshape(x[B, S], Concat(Shape(x), [1])) -> [B, S, 1]: the shape is computed by Shape and
 * Concat, and the reshape target is known symbolically. */
static void test_shape_concat_reshape(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 32), vm_symbol(g, "S", 1, 32)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t shape = vm_unary(g, STAX_OP_Shape, "shape", x);
  int64_t one[1] = {1}, one_dims[1] = {1};
  stax_value_id_t ones = vm_initializer(g, "one", STAX_DTYPE_INT64, 1, one_dims, one);
  stax_attr_t axis = stax_attr_int("axis", 0);
  stax_value_id_t concat_inputs[2] = {shape, ones};
  stax_value_id_t target = vm_node(g, STAX_OP_Concat, "concat", 2, concat_inputs, 1, &axis);
  stax_value_id_t reshape_inputs[2] = {x, target};
  stax_value_id_t r = vm_node(g, STAX_OP_Reshape, "reshape", 2, reshape_inputs, 0, NULL);
  vm_output(g, vm_binary(g, STAX_OP_Add, "double", r, r));
  vm_output(g, shape);
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  vm_rng_t rng = {5};
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int round = 0; round < 6; round++) {
      int64_t x_dims[2] = {vm_rng_range(&rng, 1, 5), vm_rng_range(&rng, 1, 5)};
      stax_tensor_t* input = vm_random_f32(&rng, 2, x_dims);
      stax_tensor_t* outputs[2] = {NULL, NULL};
      CHECK_OK(stax_context_run(context, 1, &input, 2, outputs));
      int64_t out_dims[3] = {x_dims[0], x_dims[1], 1};
      if (outputs[0] && outputs[1]) {
        CHECK(vm_dims_equal(outputs[0], 3, out_dims));
        for (int64_t i = 0; i < x_dims[0] * x_dims[1]; i++)
          CHECK_NEAR(vm_f32(outputs[0])[i], 2 * vm_f32(input)[i], 0);
        const int64_t* shape_values = stax_tensor_data(outputs[1]);
        CHECK_EQ_INT(shape_values[0], x_dims[0]);
        CHECK_EQ_INT(shape_values[1], x_dims[1]);
      }
      for (int k = 0; k < 2; k++)
        if (outputs[k]) stax_tensor_release(outputs[k]);
      stax_tensor_release(input);
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* Reshape with a shape that is a run-time input: the VM reads it, reshapes, and binds the
 * output's fresh symbols with SHAPE_VARIANT so the Add after it is preallocated. */
static void test_runtime_reshape(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 64)};
  const stax_dim_t* shape_dims[1] = {vm_const(g, 2)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  stax_value_id_t shape = vm_input(g, "shape", STAX_DTYPE_INT64, 1, shape_dims);
  stax_value_id_t reshape_inputs[2] = {x, shape};
  stax_value_id_t r = vm_node(g, STAX_OP_Reshape, "reshape", 2, reshape_inputs, 0, NULL);
  vm_output(g, vm_binary(g, STAX_OP_Mul, "square", r, r));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  char* text = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "SHAPE_VARIANT") && strstr(text, "bind "));
  free(text);
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    int64_t cases[3][3] = {{12, 3, 4}, {12, -1, 6}, {6, 6, 1}};
    for (int c = 0; c < 3; c++) {
      int64_t x_dims[1] = {cases[c][0]}, s_dims[1] = {2};
      float xs[12];
      for (int i = 0; i < 12; i++) xs[i] = (float)i - 3.0f;
      stax_tensor_t* inputs[2] = {vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs),
                                  vm_tensor(STAX_DTYPE_INT64, 1, s_dims, cases[c] + 1)};
      stax_tensor_t* output = NULL;
      CHECK_OK(stax_context_run(context, 2, inputs, 1, &output));
      int64_t expected_dims[2] = {cases[c][1] < 0 ? cases[c][0] / cases[c][2] : cases[c][1], cases[c][2]};
      if (output) {
        CHECK(vm_dims_equal(output, 2, expected_dims));
        for (int64_t i = 0; i < cases[c][0]; i++) CHECK_NEAR(vm_f32(output)[i], xs[i] * xs[i], 0);
        stax_tensor_release(output);
      }
      stax_tensor_release(inputs[0]);
      stax_tensor_release(inputs[1]);
    }
    /* A shape whose element count disagrees is an error naming the instruction. */
    int64_t x_dims[1] = {5}, s_dims[1] = {2}, bad[2] = {2, 2};
    float xs[5] = {0};
    stax_tensor_t* inputs[2] = {vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs),
                                vm_tensor(STAX_DTYPE_INT64, 1, s_dims, bad)};
    stax_tensor_t* output = NULL;
    CHECK_ERROR(stax_context_run(context, 2, inputs, 1, &output), STAX_SHAPE_MISMATCH,
                "RESHAPE_VIEW");
    CHECK(output == NULL);
    stax_tensor_release(inputs[0]);
    stax_tensor_release(inputs[1]);
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* NonZero: the output's second dim is bound from the live result, then Add runs on it. */
static void test_nonzero(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  stax_value_id_t indices = vm_unary(g, STAX_OP_NonZero, "nonzero", x);
  vm_output(g, vm_binary(g, STAX_OP_Add, "twice", indices, indices));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  char* text = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "SHAPE_VARIANT") && strstr(text, "shape barrier"));
  free(text);
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    float values[3][6] = {{0, 1, 0, 2, 3, 0}, {0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1}};
    int64_t expected_counts[3] = {3, 0, 6};
    for (int c = 0; c < 3; c++) {
      int64_t x_dims[1] = {6};
      stax_tensor_t* input = vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, values[c]);
      stax_tensor_t* output = NULL;
      CHECK_OK(stax_context_run(context, 1, &input, 1, &output));
      int64_t out_dims[2] = {1, expected_counts[c]};
      if (output) {
        CHECK(vm_dims_equal(output, 2, out_dims));
        const int64_t* got = stax_tensor_data(output);
        int64_t k = 0;
        for (int64_t i = 0; i < 6; i++)
          if (values[c][i] != 0) CHECK_EQ_INT(got[k++], 2 * i);
        stax_tensor_release(output);
      }
      stax_tensor_release(input);
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* Outputs are owned: they stay valid after the context and program are gone. Counters: every
 * run counts each executed instruction once and enters each straight-line segment once. */
static void test_ownership_and_profiling(void) {
  stax_graph_t* g = build_add_mul_relu();
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  stax_context_t* context = vm_context(program, STAX_DISPATCH_DEFAULT);
  stax_program_release(program); /* the context keeps its own reference */
  int64_t dims[2] = {2, 4};
  float xs[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  stax_tensor_t* inputs[2] = {vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, xs),
                              vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, xs)};
  stax_tensor_t* output = NULL;
  for (int run = 0; run < 3; run++) {
    if (output) stax_tensor_release(output);
    CHECK_OK(stax_context_run(context, 2, inputs, 1, &output));
  }
  int32_t count = stax_context_instruction_count(context);
  const uint64_t* counts = stax_context_instruction_counts(context);
  const uint64_t* nanos = stax_context_instruction_nanos(context);
  CHECK(count > 5);
  int32_t skipped = 0;
  for (int32_t i = 0; i < count; i++) {
    /* Straight-line code: everything runs once per run, except the JIT's segment call and
     * the jump past the segment after each guard (the JIT is off: every guard jumps). */
    if (counts[i] == 0) skipped++;
    else CHECK_EQ_INT(counts[i], 3);
    CHECK_EQ_INT(nanos[i], 0); /* timing is off */
  }
  CHECK_EQ_INT(skipped, 2 * stax_context_segment_count(context));
  CHECK(stax_context_segment_count(context) >= 1);
  for (int32_t s = 0; s < stax_context_segment_count(context); s++)
    CHECK_EQ_INT(stax_context_segment_counts(context)[s], 3);
  stax_context_destroy(context);
  if (output) {
    for (int i = 0; i < 8; i++) CHECK_NEAR(vm_f32(output)[i], 2 * xs[i] * xs[i], 0);
    stax_tensor_release(output);
  }
  stax_tensor_release(inputs[0]);
  stax_tensor_release(inputs[1]);
}

static void test_bad_arguments(void) {
  stax_graph_t* g = build_add_mul_relu();
  stax_program_t* program = vm_compile(g);
  stax_program_t* none = NULL;
  CHECK_ERROR(stax_program_compile(vm_alloc(), NULL, NULL, &none), STAX_INVALID_ARGUMENT, NULL);
  stax_graph_destroy(g);
  if (!program) return;
  stax_context_t* context = vm_context(program, STAX_DISPATCH_SWITCH);
  int64_t dims[2] = {2, 4};
  stax_tensor_t* x = vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  stax_tensor_t* inputs[2] = {x, NULL};
  stax_tensor_t* output = NULL;
  CHECK_ERROR(stax_context_run(context, 1, inputs, 1, &output), STAX_INVALID_ARGUMENT,
              "takes 2 inputs");
  CHECK_ERROR(stax_context_run(context, 2, inputs, 1, &output), STAX_INVALID_ARGUMENT,
              "input 1 \"y\" is NULL");
  inputs[1] = x;
  stax_tensor_t* two_outputs[2] = {NULL, NULL};
  CHECK_ERROR(stax_context_run(context, 2, inputs, 2, two_outputs), STAX_INVALID_ARGUMENT,
              "has 1 outputs");
  stax_context_options_t bad = {.dispatch = (stax_dispatch_mode_t)7};
  stax_context_t* other = NULL;
  CHECK_ERROR(stax_context_create(vm_alloc(), program, &bad, &other), STAX_INVALID_ARGUMENT,
              "dispatch");
  CHECK(other == NULL);
  stax_tensor_release(x);
  stax_context_destroy(context);
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_add_mul_relu), STAX_TEST(test_static_variant_and_disassembly),
               STAX_TEST(test_random_shapes), STAX_TEST(test_matmul), STAX_TEST(test_views), STAX_TEST(test_expand_view),
               STAX_TEST(test_shape_concat_reshape), STAX_TEST(test_runtime_reshape),
               STAX_TEST(test_nonzero), STAX_TEST(test_ownership_and_profiling),
               STAX_TEST(test_bad_arguments))
