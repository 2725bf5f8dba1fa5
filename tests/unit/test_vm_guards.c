/* Input guards: before the first instruction runs, the caller's tensors are checked against
 * the model's declared shapes. Each error names the input and the dim, the expected expression
 * with its value and where that value came from. After a rejected run the context works. */
#include "test_vm_util.h"

/* x: float32[B, 4], y: float32[B, 4], z: float32[2*B + 1]; outputs x + y and Relu(z).
 * B has range [1, 8]. */
static stax_program_t* build_guarded(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* b = vm_symbol(g, "B", 1, 8);
  stax_shape_ctx_t* shape = stax_graph_shape_ctx(g);
  const stax_dim_t* dims[2] = {b, vm_const(g, 4)};
  const stax_dim_t* z_dims[1] = {stax_dim_add_const(shape, stax_dim_mul_const(shape, b, 2), 1)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t z = vm_input(g, "z", STAX_DTYPE_FLOAT32, 1, z_dims);
  vm_output(g, vm_binary(g, STAX_OP_Add, "add", x, y));
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", z));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  return program;
}

typedef struct guard_case_t {
  int64_t x_dims[3];
  int32_t x_rank;
  stax_dtype_t x_dtype;
  int64_t y_dims[2];
  int64_t z_dim;
} guard_case_t;

static stax_status_t run_case(stax_context_t* context, const guard_case_t* c) {
  stax_tensor_t* inputs[3] = {vm_tensor(c->x_dtype, c->x_rank, c->x_dims, NULL),
                              vm_tensor(STAX_DTYPE_FLOAT32, 2, c->y_dims, NULL),
                              vm_tensor(STAX_DTYPE_FLOAT32, 1, &c->z_dim, NULL)};
  for (int k = 0; k < 3; k++) {
    if (!inputs[k]) continue;
    size_t bytes = (size_t)stax_tensor_element_count(inputs[k]) *
                   stax_dtype_size(stax_tensor_dtype(inputs[k]));
    memset(stax_tensor_data(inputs[k]), 0, bytes);
  }
  stax_tensor_t* outputs[2] = {NULL, NULL};
  stax_status_t status = stax_context_run(context, 3, inputs, 2, outputs);
  CHECK(status != STAX_OK || (outputs[0] && outputs[1]));
  if (status != STAX_OK) CHECK(outputs[0] == NULL && outputs[1] == NULL);
  for (int k = 0; k < 3; k++) stax_tensor_release(inputs[k]);
  for (int k = 0; k < 2; k++)
    if (outputs[k]) stax_tensor_release(outputs[k]);
  return status;
}

static void test_guard_errors(void) {
  stax_program_t* program = build_guarded();
  if (!program) return;
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    guard_case_t good = {{4, 4}, 2, STAX_DTYPE_FLOAT32, {4, 4}, 9};
    CHECK_OK(run_case(context, &good));

    /* A symbol bound twice with different values: B = 4 from x, 5 in y. */
    guard_case_t bound_twice = good;
    bound_twice.y_dims[0] = 5;
    CHECK_ERROR(run_case(context, &bound_twice), STAX_SHAPE_MISMATCH,
                "input \"y\" dim 0 is 5, but the model says B = 4 (bound by input \"x\" dim 0)");

    /* A constant dim. */
    guard_case_t wrong_constant = good;
    wrong_constant.y_dims[1] = 3;
    CHECK_ERROR(run_case(context, &wrong_constant), STAX_SHAPE_MISMATCH,
                "input \"y\" dim 1 is 3, but the model says 4");

    /* An expression of a bound symbol. */
    guard_case_t wrong_expression = good;
    wrong_expression.z_dim = 8;
    CHECK_ERROR(run_case(context, &wrong_expression), STAX_SHAPE_MISMATCH,
                "input \"z\" dim 0 is 8, but the model says 2*B + 1 = 9 (B = 4 from input \"x\" dim 0)");

    /* Range: B is at most 8. */
    guard_case_t too_big = {{9, 4}, 2, STAX_DTYPE_FLOAT32, {9, 4}, 19};
    CHECK_ERROR(run_case(context, &too_big), STAX_SHAPE_MISMATCH,
                "input \"x\" dim 0 gives B = 9, outside its range [1, 8]");

    /* Rank and dtype are checked before any dim. */
    guard_case_t wrong_rank = {{4, 4, 1}, 3, STAX_DTYPE_FLOAT32, {4, 4}, 9};
    CHECK_ERROR(run_case(context, &wrong_rank), STAX_SHAPE_MISMATCH,
                "input \"x\" has rank 3 (dims [4, 4, 1]), but the model says rank 2 [B, 4]");
    guard_case_t wrong_dtype = good;
    wrong_dtype.x_dtype = STAX_DTYPE_INT32;
    CHECK_ERROR(run_case(context, &wrong_dtype), STAX_DTYPE_MISMATCH,
                "input \"x\" is int32, but the model says float32");

    /* The context is still usable, with another shape. */
    guard_case_t other = {{2, 4}, 2, STAX_DTYPE_FLOAT32, {2, 4}, 5};
    CHECK_OK(run_case(context, &other));
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

/* The guard table the compiler built, as the disassembly prints it: one bind, one check per
 * other dim, one range check. */
static void test_guard_listing(void) {
  stax_program_t* program = build_guarded();
  if (!program) return;
  char* text = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "bind B := input \"x\" dim 0"));
  CHECK(text && strstr(text, "check input \"y\" dim 0 == B"));
  CHECK(text && strstr(text, "check input \"z\" dim 0 == 2*B + 1"));
  CHECK(text && strstr(text, "range B in [1, 8]"));
  CHECK(text && strstr(text, "B in [1, 8], bound by input \"x\" dim 0"));
  free(text);
  stax_program_release(program);
}

/* Non-contiguous inputs are accepted without copies (a transposed view of a buffer). */
static void test_strided_input(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "R", 1, 16), vm_symbol(g, "C", 1, 16)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  vm_output(g, vm_binary(g, STAX_OP_Add, "double", x, x));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  stax_context_t* context = vm_context(program, STAX_DISPATCH_DEFAULT);
  int64_t dims_value[2] = {2, 3};
  float data[6] = {0, 1, 2, 3, 4, 5};
  stax_tensor_t* base = vm_tensor(STAX_DTYPE_FLOAT32, 2, dims_value, data);
  stax_tensor_t* transposed = NULL;
  CHECK_OK(stax_tensor_transpose(vm_alloc(), base, NULL, &transposed));
  stax_tensor_t* output = NULL;
  CHECK_OK(stax_context_run(context, 1, &transposed, 1, &output));
  int64_t out_dims[2] = {3, 2};
  if (output) {
    CHECK(vm_dims_equal(output, 2, out_dims));
    for (int64_t i = 0; i < 3; i++)
      for (int64_t j = 0; j < 2; j++)
        CHECK_NEAR(vm_f32(output)[i * 2 + j], 2 * data[j * 3 + i], 0);
    stax_tensor_release(output);
  }
  stax_tensor_release(transposed);
  stax_tensor_release(base);
  stax_context_destroy(context);
  stax_program_release(program);
}

/* a[N, 3] + b[M, 3] (output dims [bcast(N, M), 3]): the guards accept N and M apart, a
 * run where one is 1 broadcasts, and a pair that does not broadcast fails at the output's
 * allocation with the node, both inputs, the axis and both values. */
static void test_broadcast_dims(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* a_dims[2] = {vm_symbol(g, "N", 1, 16), vm_const(g, 3)};
  const stax_dim_t* b_dims[2] = {vm_symbol(g, "M", 1, 16), vm_const(g, 3)};
  stax_value_id_t a = vm_input(g, "a", STAX_DTYPE_FLOAT32, 2, a_dims);
  stax_value_id_t b = vm_input(g, "b", STAX_DTYPE_FLOAT32, 2, b_dims);
  vm_output(g, vm_binary(g, STAX_OP_Add, "add0", a, b));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  char text[64];
  stax_program_output_dim_text(program, 0, 0, text, sizeof(text));
  CHECK_EQ_STR(text, "bcast(N, M)");
  static const int64_t pairs[][2] = {{1, 5}, {5, 1}, {5, 5}, {1, 1}, {3, 5}};
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
      int64_t ad[2] = {pairs[p][0], 3}, bd[2] = {pairs[p][1], 3};
      float av[48], bv[48];
      for (int i = 0; i < 48; i++) {
        av[i] = (float)i;
        bv[i] = 100.0f * (float)i;
      }
      stax_tensor_t* inputs[2] = {vm_tensor(STAX_DTYPE_FLOAT32, 2, ad, av),
                                  vm_tensor(STAX_DTYPE_FLOAT32, 2, bd, bv)};
      stax_tensor_t* output = NULL;
      stax_status_t status = stax_context_run(context, 2, inputs, 1, &output);
      if (pairs[p][0] != pairs[p][1] && pairs[p][0] != 1 && pairs[p][1] != 1) {
        CHECK_ERROR(status, STAX_SHAPE_MISMATCH,
                    "Add 'add0': cannot broadcast input 0 'a' dim 0 (N = 3) with input 1 'b' "
                    "dim 0 (M = 5)");
      } else {
        CHECK_OK(status);
        int64_t rows = pairs[p][0] > pairs[p][1] ? pairs[p][0] : pairs[p][1];
        int64_t dims[2] = {rows, 3};
        CHECK(output && vm_dims_equal(output, 2, dims));
        for (int64_t i = 0; output && i < rows * 3; i++) {
          int64_t r = i / 3, c = i % 3;
          float want = av[(pairs[p][0] == 1 ? 0 : r) * 3 + c] + bv[(pairs[p][1] == 1 ? 0 : r) * 3 + c];
          CHECK(vm_f32_at(output, i) == want);
        }
      }
      if (output) stax_tensor_release(output);
      stax_tensor_release(inputs[0]);
      stax_tensor_release(inputs[1]);
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_guard_errors), STAX_TEST(test_guard_listing),
               STAX_TEST(test_strided_input), STAX_TEST(test_broadcast_dims))
