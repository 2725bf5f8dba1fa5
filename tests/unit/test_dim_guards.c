/* Symbolic dims: run-time shape guards built from declared input dims
 * (src/ir/dim_guards.c). */
#include "test_harness.h"

static stax_shape_ctx_t* make_ctx(void) {
  stax_shape_ctx_t* ctx = NULL;
  CHECK_OK(stax_shape_ctx_create(stax_allocator_system(), &ctx));
  return ctx;
}

static const stax_dim_t* symbol(stax_shape_ctx_t* ctx, const char* name, int64_t min,
                                int64_t max) {
  const stax_dim_t* d = NULL;
  CHECK_OK(stax_symbol_get(ctx, name, min, max, &d));
  return d;
}

static const char* program(const stax_shape_guards_t* guards) {
  static char buf[1024];
  (void)stax_shape_guards_print(guards, buf, sizeof(buf));
  return buf;
}

static void test_two_inputs_share_symbols(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* b = symbol(ctx, "B", 1, 64);
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* x_dims[3] = {b, s, stax_dim_const(ctx, 64)};
  const stax_dim_t* y_dims[2] = {b, s};
  stax_shape_guard_input_t inputs[2] = {{"x", 3, x_dims}, {"y", 2, y_dims}};
  stax_shape_guards_t* guards = NULL;
  CHECK_OK(stax_shape_guards_build(ctx, 2, inputs, &guards));
  /* B's range needs a check; S's [0, inf) is implied by dims being >= 0 */
  CHECK_EQ_INT(stax_shape_guards_check_count(guards), 4);
  CHECK_EQ_INT(stax_shape_guards_step_count(guards), 6);
  CHECK_EQ_STR(program(guards),
               "bind B := x[0]\n"
               "check B in [1, 64]\n"
               "bind S := x[1]\n"
               "check x[2] == 64\n"
               "check y[0] == B\n"
               "check y[1] == S\n");
  const stax_shape_guard_step_t* steps = stax_shape_guards_steps(guards);
  CHECK_EQ_INT(steps[0].kind, STAX_GUARD_BIND);
  CHECK_EQ_INT(steps[0].symbol, 0);
  CHECK_EQ_INT(steps[0].scale, 1);
  CHECK_EQ_INT(steps[0].offset, 0);
  CHECK_EQ_INT(steps[1].kind, STAX_GUARD_RANGE);
  CHECK_EQ_INT(steps[1].min, 1);
  CHECK_EQ_INT(steps[1].max, 64);
  CHECK_EQ_INT(steps[3].kind, STAX_GUARD_CHECK);
  CHECK_EQ_INT(steps[3].input, 0);
  CHECK_EQ_INT(steps[3].dim, 2);
  CHECK(steps[3].expr == stax_dim_const(ctx, 64));
  CHECK(steps[4].expr == b);
  char small[8];
  CHECK_EQ_INT(stax_shape_guards_print(guards, small, sizeof(small)), (int)strlen(program(guards)));
  CHECK_EQ_STR(small, "bind B ");

  int32_t ranks[2] = {3, 2};
  int64_t x[3] = {2, 7, 64}, y[2] = {2, 7};
  const int64_t* dims[2] = {x, y};
  int64_t values[2] = {0, 0};
  CHECK_OK(stax_shape_guards_check(guards, ranks, dims, values));
  CHECK_EQ_INT(values[0], 2);
  CHECK_EQ_INT(values[1], 7);

  y[1] = 8;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "input 'y' dim 1 is 8, but it must equal S (= 7)");
  y[1] = 7;
  x[2] = 63;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "input 'x' dim 2 is 63, but it must equal 64");
  x[2] = 64;
  x[0] = 100;
  y[0] = 100;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "symbol B = 100 (from input 'x' dim 0) is outside its range [1, 64]");
  x[0] = 0;
  y[0] = 0;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "symbol B = 0 (from input 'x' dim 0) is outside its range [1, 64]");
  x[0] = 2;
  y[0] = 2;
  int32_t bad_ranks[2] = {3, 3};
  CHECK_ERROR(stax_shape_guards_check(guards, bad_ranks, dims, values), STAX_SHAPE_MISMATCH,
              "input 'y' has rank 3, but rank 2 was declared");
  x[1] = -7;
  y[1] = -7;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "input 'x' dim 1 is -7; dims cannot be negative");
  x[1] = 7;
  y[1] = 7;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, NULL), STAX_INVALID_ARGUMENT,
              "out_values");
  CHECK_ERROR(stax_shape_guards_check(guards, NULL, dims, values), STAX_INVALID_ARGUMENT, NULL);
  const int64_t* missing[2] = {x, NULL};
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, missing, values), STAX_INVALID_ARGUMENT,
              "input 'y' has no dims");
  CHECK_ERROR(stax_shape_guards_check(NULL, ranks, dims, values), STAX_INVALID_ARGUMENT, NULL);
  CHECK_OK(stax_shape_guards_check(guards, ranks, dims, values));
  stax_shape_guards_destroy(guards);
  stax_shape_ctx_destroy(ctx);
}

static void test_scaled_symbol(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* z_dims[2] = {stax_dim_mul_const(ctx, s, 2), stax_dim_add_const(ctx, s, 1)};
  stax_shape_guard_input_t inputs[1] = {{"z", 2, z_dims}};
  stax_shape_guards_t* guards = NULL;
  CHECK_OK(stax_shape_guards_build(ctx, 1, inputs, &guards));
  CHECK_EQ_STR(program(guards), "bind S := z[0]/2\ncheck z[1] == S + 1\n");
  CHECK_EQ_INT(stax_shape_guards_check_count(guards), 1);
  CHECK_EQ_INT(stax_shape_guards_steps(guards)[0].scale, 2);
  int32_t ranks[1] = {2};
  int64_t z[2] = {6, 4};
  const int64_t* dims[1] = {z};
  int64_t values[1] = {0};
  CHECK_OK(stax_shape_guards_check(guards, ranks, dims, values));
  CHECK_EQ_INT(values[0], 3);
  z[0] = 7;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "input 'z' dim 0 is 7, which is not 2*S for any integer S");
  stax_shape_guards_destroy(guards);
  stax_shape_ctx_destroy(ctx);
}

static void test_offset_symbol_needs_range(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* t = symbol(ctx, "T", 0, STAX_DIM_MAX);
  /* S + 3 = 2 would give S = -1, so the range check stays; T - 1 implies T >= 1 >= 0 */
  const stax_dim_t* w_dims[3] = {stax_dim_add_const(ctx, s, 3),
                                 stax_dim_add_const(ctx, stax_dim_mul_const(ctx, t, 2), -1),
                                 stax_dim_add(ctx, s, t)};
  stax_shape_guard_input_t inputs[1] = {{NULL, 3, w_dims}};
  stax_shape_guards_t* guards = NULL;
  CHECK_OK(stax_shape_guards_build(ctx, 1, inputs, &guards));
  CHECK_EQ_STR(program(guards),
               "bind S := input0[0] - 3\n"
               "check S in [0, inf)\n"
               "bind T := (input0[1] + 1)/2\n"
               "check input0[2] == S + T\n");
  int32_t ranks[1] = {3};
  int64_t w[3] = {5, 7, 6};
  const int64_t* dims[1] = {w};
  int64_t values[2] = {0, 0};
  CHECK_OK(stax_shape_guards_check(guards, ranks, dims, values));
  CHECK_EQ_INT(values[0], 2);
  CHECK_EQ_INT(values[1], 4);
  w[0] = 2;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "symbol S = -1 (from input 0 dim 0) is outside its range [0, inf)");
  w[0] = 5;
  w[1] = 8;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "input 0 dim 1 is 8, which is not 2*T - 1 for any integer T");
  w[1] = 7;
  w[2] = 7;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "input 0 dim 2 is 7, but it must equal S + T (= 6)");
  stax_shape_guards_destroy(guards);
  stax_shape_ctx_destroy(ctx);
}

static void test_unified_symbols(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* t = symbol(ctx, "T", 0, STAX_DIM_MAX);
  const stax_dim_t* k = symbol(ctx, "K", 0, STAX_DIM_MAX);
  CHECK_OK(stax_dim_unify(ctx, s, "x dim 0", t, "y dim 0"));
  CHECK_OK(stax_dim_unify(ctx, k, "x dim 1", stax_dim_const(ctx, 64), "weight"));
  const stax_dim_t* x_dims[2] = {s, k};
  const stax_dim_t* y_dims[1] = {t};
  stax_shape_guard_input_t inputs[2] = {{"x", 2, x_dims}, {"y", 1, y_dims}};
  stax_shape_guards_t* guards = NULL;
  CHECK_OK(stax_shape_guards_build(ctx, 2, inputs, &guards));
  /* T is not a new free symbol: it is checked against S */
  CHECK_EQ_STR(program(guards), "bind S := x[0]\ncheck x[1] == 64\ncheck y[0] == S\n");
  CHECK_EQ_INT(stax_shape_guards_check_count(guards), 2);
  int32_t ranks[2] = {2, 1};
  int64_t x[2] = {5, 64}, y[1] = {5};
  const int64_t* dims[2] = {x, y};
  int64_t values[3] = {0, 0, 0};
  CHECK_OK(stax_shape_guards_check(guards, ranks, dims, values));
  CHECK_EQ_INT(values[0], 5);
  CHECK_EQ_INT(values[1], 5); /* derived from S */
  CHECK_EQ_INT(values[2], 64); /* pinned */
  y[0] = 6;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "input 'y' dim 0 is 6, but it must equal S (= 5)");
  stax_shape_guards_destroy(guards);
  stax_shape_ctx_destroy(ctx);
}

static void test_products_wait_for_bindings(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* b = symbol(ctx, "B", 0, STAX_DIM_MAX);
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* u = symbol(ctx, "U", 0, STAX_DIM_MAX);
  const stax_dim_t* v = symbol(ctx, "V", 0, STAX_DIM_MAX);
  const stax_dim_t* flat_dims[2] = {stax_dim_mul(ctx, b, s), stax_dim_mul(ctx, u, v)};
  const stax_dim_t* x_dims[2] = {b, s};
  stax_shape_guard_input_t inputs[2] = {{"flat", 2, flat_dims}, {"x", 2, x_dims}};
  stax_shape_guards_t* guards = NULL;
  CHECK_OK(stax_shape_guards_build(ctx, 2, inputs, &guards));
  /* U*V never becomes checkable: U and V appear nowhere else */
  CHECK_EQ_STR(program(guards), "bind B := x[0]\nbind S := x[1]\ncheck flat[0] == B*S\n");
  int32_t ranks[2] = {2, 2};
  int64_t flat[2] = {6, 99}, x[2] = {2, 3};
  const int64_t* dims[2] = {flat, x};
  int64_t values[4] = {0, 0, 0, 0};
  CHECK_OK(stax_shape_guards_check(guards, ranks, dims, values));
  CHECK_EQ_INT(values[0], 2);
  CHECK_EQ_INT(values[1], 3);
  CHECK(values[2] == STAX_SYMBOL_UNBOUND);
  CHECK(values[3] == STAX_SYMBOL_UNBOUND);
  flat[0] = 7;
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_SHAPE_MISMATCH,
              "input 'flat' dim 0 is 7, but it must equal B*S (= 6)");
  stax_shape_guards_destroy(guards);
  stax_shape_ctx_destroy(ctx);
}

static void test_check_evaluation_error(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* t = symbol(ctx, "T", 0, STAX_DIM_MAX);
  const stax_dim_t* x_dims[3] = {s, t, stax_dim_floordiv(ctx, s, t)};
  stax_shape_guard_input_t inputs[1] = {{"x", 3, x_dims}};
  stax_shape_guards_t* guards = NULL;
  CHECK_OK(stax_shape_guards_build(ctx, 1, inputs, &guards));
  int32_t ranks[1] = {3};
  int64_t x[3] = {6, 0, 1};
  const int64_t* dims[1] = {x};
  int64_t values[2];
  CHECK_ERROR(stax_shape_guards_check(guards, ranks, dims, values), STAX_INVALID_ARGUMENT,
              "while checking input 'x' dim 2: division by zero in floor(S/T)");
  x[1] = 4;
  CHECK_OK(stax_shape_guards_check(guards, ranks, dims, values));
  stax_shape_guards_destroy(guards);
  stax_shape_ctx_destroy(ctx);
}

static void test_build_errors(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  stax_shape_guards_t* guards = NULL;
  CHECK_ERROR(stax_shape_guards_build(ctx, 1, NULL, &guards), STAX_INVALID_ARGUMENT, NULL);
  CHECK_ERROR(stax_shape_guards_build(ctx, -1, NULL, &guards), STAX_INVALID_ARGUMENT, NULL);
  CHECK_ERROR(stax_shape_guards_build(NULL, 0, NULL, &guards), STAX_INVALID_ARGUMENT, NULL);
  CHECK_ERROR(stax_shape_guards_build(ctx, 0, NULL, NULL), STAX_INVALID_ARGUMENT, NULL);
  stax_shape_guard_input_t negative_rank[1] = {{"x", -1, NULL}};
  CHECK_ERROR(stax_shape_guards_build(ctx, 1, negative_rank, &guards), STAX_INVALID_ARGUMENT,
              "input 'x': rank -1");
  CHECK(guards == NULL);
  const stax_dim_t* with_null[2] = {s, NULL};
  stax_shape_guard_input_t null_dim[1] = {{"x", 2, with_null}};
  CHECK_ERROR(stax_shape_guards_build(ctx, 1, null_dim, &guards), STAX_INVALID_ARGUMENT,
              "input 'x' dim 1 is NULL");
  /* a NULL dim from a failed construction reports that failure */
  with_null[1] = stax_dim_floordiv(ctx, s, stax_dim_const(ctx, 0));
  CHECK_ERROR(stax_shape_guards_build(ctx, 1, null_dim, &guards), STAX_INVALID_ARGUMENT,
              "divide S by 0");
  CHECK(guards == NULL);
  /* no inputs: an empty program that always passes */
  CHECK_OK(stax_shape_guards_build(ctx, 0, NULL, &guards));
  CHECK_EQ_INT(stax_shape_guards_check_count(guards), 0);
  CHECK_EQ_STR(program(guards), "");
  int64_t values[1];
  CHECK_OK(stax_shape_guards_check(guards, NULL, NULL, values));
  CHECK(values[0] == STAX_SYMBOL_UNBOUND);
  stax_shape_guards_destroy(guards);
  stax_shape_guards_destroy(NULL);
  CHECK_EQ_INT(stax_shape_guards_check_count(NULL), 0);
  CHECK_EQ_INT(stax_shape_guards_step_count(NULL), 0);
  CHECK(stax_shape_guards_steps(NULL) == NULL);
  stax_shape_ctx_destroy(ctx);
}

static void test_guards_out_of_memory(void) {
  bool finished = false;
  for (uint64_t fail_at = 1; fail_at < 500 && !finished; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), 0);
    stax_shape_ctx_t* ctx = NULL;
    CHECK_OK(stax_shape_ctx_create(stax_failing_allocator(&state), &ctx));
    const stax_dim_t* b = symbol(ctx, "B", 1, 64);
    const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
    const stax_dim_t* x_dims[3] = {b, stax_dim_mul(ctx, b, s), stax_dim_const(ctx, 64)};
    const stax_dim_t* y_dims[2] = {s, stax_dim_mul_const(ctx, s, 2)};
    stax_shape_guard_input_t inputs[2] = {{"x", 3, x_dims}, {"y", 2, y_dims}};
    /* fail only inside the build */
    state.fail_at = state.allocation_count + fail_at;
    stax_shape_guards_t* guards = NULL;
    stax_status_t status = stax_shape_guards_build(ctx, 2, inputs, &guards);
    if (status) {
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      CHECK(guards == NULL);
      stax_status_free(status);
    } else {
      CHECK_EQ_INT(stax_shape_guards_check_count(guards), 4);
    }
    finished = state.failed_count == 0;
    stax_shape_guards_destroy(guards);
    stax_shape_ctx_destroy(ctx);
    CHECK_EQ_INT(state.live_allocations, 0);
  }
  CHECK(finished);
}

STAX_TEST_MAIN(STAX_TEST(test_two_inputs_share_symbols), STAX_TEST(test_scaled_symbol),
               STAX_TEST(test_offset_symbol_needs_range), STAX_TEST(test_unified_symbols),
               STAX_TEST(test_products_wait_for_bindings), STAX_TEST(test_check_evaluation_error),
               STAX_TEST(test_build_errors), STAX_TEST(test_guards_out_of_memory))
