/* Symbolic dims: canonical forms, printing, bounds, evaluation, dim code, overflow and
 * out-of-memory behaviour (src/ir/dim*.c). */
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

static const char* text(stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  static char buf[256];
  (void)stax_dim_print(ctx, d, buf, sizeof(buf));
  return buf;
}

static void test_constants(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  CHECK(stax_dim_const(ctx, 5) == stax_dim_const(ctx, 5));
  CHECK(stax_dim_const(ctx, (int64_t)1 << 40) == stax_dim_const(ctx, (int64_t)1 << 40));
  CHECK(stax_dim_const(ctx, -100000) == stax_dim_const(ctx, -100000));
  CHECK(stax_dim_const(ctx, 5) != stax_dim_const(ctx, 6));
  CHECK(stax_dim_is_const(stax_dim_const(ctx, 7)));
  CHECK_EQ_INT(stax_dim_const_value(stax_dim_const(ctx, -7)), -7);
  const stax_dim_t* three = stax_dim_const(ctx, 3);
  const stax_dim_t* four = stax_dim_const(ctx, 4);
  CHECK(stax_dim_add(ctx, three, four) == stax_dim_const(ctx, 7));
  CHECK(stax_dim_sub(ctx, three, four) == stax_dim_const(ctx, -1));
  CHECK(stax_dim_mul(ctx, three, four) == stax_dim_const(ctx, 12));
  CHECK(stax_dim_add_const(ctx, three, 10) == stax_dim_const(ctx, 13));
  CHECK(stax_dim_mul_const(ctx, three, -2) == stax_dim_const(ctx, -6));
  CHECK(!stax_dim_is_const(NULL));
  CHECK_EQ_INT(stax_dim_const_value(NULL), 0);
  stax_shape_ctx_destroy(ctx);
}

static void test_cancellation_and_collection(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  CHECK(stax_dim_sub(ctx, s, s) == stax_dim_const(ctx, 0));
  const stax_dim_t* two_s = stax_dim_mul_const(ctx, s, 2);
  CHECK(stax_dim_add(ctx, two_s, s) == stax_dim_mul_const(ctx, s, 3));
  CHECK_EQ_STR(text(ctx, stax_dim_add(ctx, two_s, s)), "3*S");
  /* (S + 1) - 1 is S itself, not a sum */
  CHECK(stax_dim_add_const(ctx, stax_dim_add_const(ctx, s, 1), -1) == s);
  CHECK(stax_dim_mul_const(ctx, s, 0) == stax_dim_const(ctx, 0));
  CHECK(stax_dim_mul_const(ctx, s, 1) == s);
  stax_symbol_id_t id = -1;
  CHECK(stax_dim_as_symbol(s, &id));
  CHECK_EQ_INT(id, 0);
  CHECK(!stax_dim_as_symbol(two_s, &id));
  CHECK_EQ_INT(id, -1);
  CHECK(stax_shape_ctx_take_error(ctx) == STAX_OK);
  stax_shape_ctx_destroy(ctx);
}

static void test_commutativity_and_distributivity(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* a = symbol(ctx, "A", 0, STAX_DIM_MAX);
  const stax_dim_t* b = symbol(ctx, "B", 0, STAX_DIM_MAX);
  const stax_dim_t* c = symbol(ctx, "C", 0, STAX_DIM_MAX);
  CHECK(stax_dim_add(ctx, a, b) == stax_dim_add(ctx, b, a));
  CHECK(stax_dim_mul(ctx, a, b) == stax_dim_mul(ctx, b, a));
  CHECK(stax_dim_add(ctx, stax_dim_add(ctx, a, b), c) ==
        stax_dim_add(ctx, a, stax_dim_add(ctx, b, c)));
  CHECK(stax_dim_mul(ctx, stax_dim_mul(ctx, a, b), c) ==
        stax_dim_mul(ctx, a, stax_dim_mul(ctx, c, b)));
  /* (A + B) * C == A*C + B*C */
  const stax_dim_t* left = stax_dim_mul(ctx, stax_dim_add(ctx, a, b), c);
  const stax_dim_t* right = stax_dim_add(ctx, stax_dim_mul(ctx, a, c), stax_dim_mul(ctx, b, c));
  CHECK(left == right);
  CHECK_EQ_STR(text(ctx, left), "A*C + B*C");
  /* (A + 1)(A - 1) == A^2 - 1 */
  const stax_dim_t* square = stax_dim_mul(ctx, stax_dim_add_const(ctx, a, 1),
                                          stax_dim_add_const(ctx, a, -1));
  CHECK_EQ_STR(text(ctx, square), "A^2 - 1");
  CHECK(stax_dim_add_const(ctx, square, 1) == stax_dim_mul(ctx, a, a));
  /* (2A + 3)(B - 1) expands fully */
  const stax_dim_t* product = stax_dim_mul(ctx, stax_dim_add_const(ctx, stax_dim_mul_const(ctx, a, 2), 3),
                                           stax_dim_add_const(ctx, b, -1));
  CHECK_EQ_STR(text(ctx, product), "2*A*B - 2*A + 3*B - 3");
  stax_shape_ctx_destroy(ctx);
}

static void test_print_format(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* b = symbol(ctx, "B", 0, STAX_DIM_MAX);
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* h = symbol(ctx, "H", 0, STAX_DIM_MAX);
  const stax_dim_t* bs = stax_dim_mul(ctx, b, s);
  CHECK_EQ_STR(text(ctx, stax_dim_add_const(ctx, stax_dim_mul_const(ctx, bs, 3), 1)), "3*B*S + 1");
  CHECK_EQ_STR(text(ctx, stax_dim_add_const(ctx, stax_dim_sub(ctx, stax_dim_mul_const(ctx, b, 2), s), -4)),
               "2*B - S - 4");
  CHECK_EQ_STR(text(ctx, stax_dim_sub(ctx, stax_dim_const(ctx, 4), s)), "-S + 4");
  CHECK_EQ_STR(text(ctx, stax_dim_mul_const(ctx, s, -3)), "-3*S");
  CHECK_EQ_STR(text(ctx, stax_dim_add(ctx, stax_dim_add_const(ctx, s, 1), bs)), "B*S + S + 1");
  /* conv output size, stride 2, kernel 3, pad 1: floor((H + 2 - 3)/2) + 1 */
  const stax_dim_t* conv = stax_dim_add_const(
      ctx, stax_dim_floordiv(ctx, stax_dim_add_const(ctx, h, -1), stax_dim_const(ctx, 2)), 1);
  CHECK_EQ_STR(text(ctx, conv), "floor((H + 1)/2)");
  const stax_dim_t* pooled = stax_dim_add_const(
      ctx, stax_dim_floordiv(ctx, stax_dim_add_const(ctx, h, -3), stax_dim_const(ctx, 2)), 1);
  CHECK_EQ_STR(text(ctx, pooled), "floor((H + 1)/2) - 1");
  CHECK_EQ_STR(text(ctx, stax_dim_min(ctx, s, h)), "min(S, H)");
  CHECK_EQ_STR(text(ctx, stax_dim_max(ctx, h, stax_dim_add_const(ctx, s, 2))), "max(H, S + 2)");
  CHECK_EQ_STR(text(ctx, stax_dim_floordiv(ctx, s, stax_dim_mul(ctx, b, h))), "floor(S/(B*H))");
  CHECK_EQ_STR(text(ctx, stax_dim_ceildiv(ctx, stax_dim_add_const(ctx, s, 1), h)),
               "ceil((S + 1)/H)");
  CHECK_EQ_STR(text(ctx, stax_dim_mul_const(ctx, stax_dim_min(ctx, s, h), 2)), "2*min(S, H)");
  CHECK_EQ_STR(text(ctx, NULL), "(null)");
  /* snprintf-style: the needed length comes back even when the buffer is small */
  char small[4];
  int needed = stax_dim_print(ctx, stax_dim_add_const(ctx, stax_dim_mul_const(ctx, bs, 3), 1),
                              small, sizeof(small));
  CHECK_EQ_INT(needed, 9);
  CHECK_EQ_STR(small, "3*B");
  CHECK_EQ_INT(stax_dim_print(ctx, s, NULL, 0), 1);
  stax_shape_ctx_destroy(ctx);
}

static void test_division(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* b = symbol(ctx, "B", 1, STAX_DIM_MAX);
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* h = symbol(ctx, "H", 1, STAX_DIM_MAX);
  const stax_dim_t* z = symbol(ctx, "Z", 0, STAX_DIM_MAX); /* may be 0 */
  const stax_dim_t* two = stax_dim_const(ctx, 2);
  /* exact division by a monomial known to be >= 1 */
  const stax_dim_t* bsh = stax_dim_mul(ctx, stax_dim_mul(ctx, b, s), h);
  CHECK(stax_dim_floordiv(ctx, bsh, h) == stax_dim_mul(ctx, b, s));
  CHECK(stax_dim_ceildiv(ctx, bsh, h) == stax_dim_mul(ctx, b, s));
  CHECK(stax_dim_floordiv(ctx, h, h) == stax_dim_const(ctx, 1));
  /* (2*S*H) / (4*H) = floor(S/2) */
  CHECK(stax_dim_floordiv(ctx, stax_dim_mul_const(ctx, stax_dim_mul(ctx, s, h), 2),
                          stax_dim_mul_const(ctx, h, 4)) == stax_dim_floordiv(ctx, s, stax_dim_const(ctx, 2)));
  /* a divisor that may be 0 keeps the division */
  const stax_dim_t* sz = stax_dim_mul(ctx, s, z);
  CHECK_EQ_STR(text(ctx, stax_dim_floordiv(ctx, sz, z)), "floor(S*Z/Z)");
  /* constants */
  const stax_dim_t* four_s_plus_two = stax_dim_add_const(ctx, stax_dim_mul_const(ctx, s, 4), 2);
  CHECK(stax_dim_floordiv(ctx, four_s_plus_two, two) ==
        stax_dim_add_const(ctx, stax_dim_mul_const(ctx, s, 2), 1));
  const stax_dim_t* two_s_plus_one = stax_dim_add_const(ctx, stax_dim_mul_const(ctx, s, 2), 1);
  CHECK(stax_dim_floordiv(ctx, two_s_plus_one, two) == s);
  CHECK(stax_dim_ceildiv(ctx, two_s_plus_one, two) == stax_dim_add_const(ctx, s, 1));
  CHECK(stax_dim_ceildiv(ctx, h, two) ==
        stax_dim_floordiv(ctx, stax_dim_add_const(ctx, h, 1), two));
  CHECK(stax_dim_floordiv(ctx, stax_dim_mul_const(ctx, s, 2), stax_dim_const(ctx, 4)) ==
        stax_dim_floordiv(ctx, s, two));
  CHECK(stax_dim_floordiv(ctx, s, stax_dim_const(ctx, 1)) == s);
  CHECK(stax_dim_floordiv(ctx, stax_dim_const(ctx, 7), two) == stax_dim_const(ctx, 3));
  CHECK(stax_dim_floordiv(ctx, stax_dim_const(ctx, -7), two) == stax_dim_const(ctx, -4));
  CHECK(stax_dim_ceildiv(ctx, stax_dim_const(ctx, 7), two) == stax_dim_const(ctx, 4));
  CHECK(stax_dim_ceildiv(ctx, stax_dim_const(ctx, -7), two) == stax_dim_const(ctx, -3));
  CHECK(stax_dim_floordiv(ctx, stax_dim_const(ctx, 0), h) == stax_dim_const(ctx, 0));
  /* negative coefficients: floor(-S/2) = -S + floor(S/2) holds for every integer S */
  const stax_dim_t* neg = stax_dim_floordiv(ctx, stax_dim_mul_const(ctx, s, -1), two);
  CHECK_EQ_STR(text(ctx, neg), "-S + floor(S/2)");
  int64_t values[4] = {0, 3, 0, 0}, value = 0;
  CHECK_OK(stax_dim_eval(ctx, neg, values, &value));
  CHECK_EQ_INT(value, -2);
  /* ranges decide */
  const stax_dim_t* small = symbol(ctx, "small", 0, 1);
  const stax_dim_t* big = symbol(ctx, "big", 4, 10);
  CHECK(stax_dim_floordiv(ctx, small, two) == stax_dim_const(ctx, 0));
  CHECK(stax_dim_floordiv(ctx, stax_dim_add_const(ctx, small, 2), big) == stax_dim_const(ctx, 0));
  CHECK(stax_dim_ceildiv(ctx, stax_dim_add_const(ctx, small, 1), big) == stax_dim_const(ctx, 1));
  CHECK(stax_shape_ctx_take_error(ctx) == STAX_OK);
  /* invalid divisors */
  CHECK(stax_dim_floordiv(ctx, s, stax_dim_const(ctx, 0)) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT,
              "cannot divide S by 0: the divisor must be positive");
  CHECK(stax_dim_ceildiv(ctx, s, stax_dim_const(ctx, -3)) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT, "by -3");
  const stax_dim_t* nonpositive = symbol(ctx, "N", -5, 0);
  CHECK(stax_dim_floordiv(ctx, s, nonpositive) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT,
              "cannot divide S by N: the divisor is never positive (range [-5, 0])");
  stax_shape_ctx_destroy(ctx);
}

static void test_min_max(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* t = symbol(ctx, "T", 0, STAX_DIM_MAX);
  const stax_dim_t* zero = stax_dim_const(ctx, 0);
  CHECK(stax_dim_min(ctx, stax_dim_const(ctx, 3), stax_dim_const(ctx, 5)) == stax_dim_const(ctx, 3));
  CHECK(stax_dim_max(ctx, stax_dim_const(ctx, 3), stax_dim_const(ctx, 5)) == stax_dim_const(ctx, 5));
  CHECK(stax_dim_min(ctx, s, s) == s);
  CHECK(stax_dim_max(ctx, s, s) == s);
  CHECK(stax_dim_min(ctx, s, zero) == zero);
  CHECK(stax_dim_max(ctx, s, zero) == s);
  CHECK(stax_dim_min(ctx, s, stax_dim_add_const(ctx, s, 1)) == s);
  CHECK(stax_dim_max(ctx, stax_dim_add_const(ctx, s, 1), s) == stax_dim_add_const(ctx, s, 1));
  CHECK(stax_dim_min(ctx, s, t) == stax_dim_min(ctx, t, s));
  CHECK(stax_dim_max(ctx, s, t) == stax_dim_max(ctx, t, s));
  CHECK(stax_dim_min(ctx, s, t) != stax_dim_max(ctx, s, t));
  const stax_dim_t* bounded = symbol(ctx, "K", 10, 20);
  CHECK(stax_dim_min(ctx, bounded, stax_dim_const(ctx, 64)) == bounded);
  CHECK(stax_dim_max(ctx, bounded, stax_dim_const(ctx, 5)) == bounded);
  CHECK_EQ_STR(text(ctx, stax_dim_max(ctx, bounded, stax_dim_const(ctx, 15))), "max(15, K)");
  stax_shape_ctx_destroy(ctx);
}

static void test_bounds(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 1, 10);
  const stax_dim_t* t = symbol(ctx, "T", 0, 5);
  const stax_dim_t* u = symbol(ctx, "U", 0, STAX_DIM_MAX);
  const stax_dim_t* n = symbol(ctx, "N", -3, 2);
  int64_t low = 0, high = 0;
  /* 2*S - T + 1 in [2 - 5 + 1, 20 + 1] */
  stax_dim_bounds(ctx, stax_dim_add_const(ctx, stax_dim_sub(ctx, stax_dim_mul_const(ctx, s, 2), t), 1),
                  &low, &high);
  CHECK_EQ_INT(low, -2);
  CHECK_EQ_INT(high, 21);
  stax_dim_bounds(ctx, stax_dim_mul(ctx, s, t), &low, &high);
  CHECK_EQ_INT(low, 0);
  CHECK_EQ_INT(high, 50);
  stax_dim_bounds(ctx, stax_dim_floordiv(ctx, s, stax_dim_const(ctx, 2)), &low, &high);
  CHECK_EQ_INT(low, 0);
  CHECK_EQ_INT(high, 5);
  stax_dim_bounds(ctx, stax_dim_min(ctx, s, t), &low, &high);
  CHECK_EQ_INT(low, 0);
  CHECK_EQ_INT(high, 5);
  stax_dim_bounds(ctx, stax_dim_max(ctx, s, t), &low, &high);
  CHECK_EQ_INT(low, 1);
  CHECK_EQ_INT(high, 10);
  stax_dim_bounds(ctx, stax_dim_mul(ctx, n, n), &low, &high);
  CHECK_EQ_INT(low, 0);
  CHECK_EQ_INT(high, 9);
  stax_dim_bounds(ctx, stax_dim_mul(ctx, stax_dim_mul(ctx, n, n), n), &low, &high);
  CHECK_EQ_INT(low, -27);
  CHECK_EQ_INT(high, 8);
  stax_dim_bounds(ctx, stax_dim_mul(ctx, n, s), &low, &high);
  CHECK_EQ_INT(low, -30);
  CHECK_EQ_INT(high, 20);
  /* unbounded symbols saturate and stay unbounded */
  stax_dim_bounds(ctx, stax_dim_add_const(ctx, u, -5), &low, &high);
  CHECK_EQ_INT(low, -5);
  CHECK(high == INT64_MAX);
  stax_dim_bounds(ctx, stax_dim_mul_const(ctx, u, -2), &low, &high);
  CHECK(low == INT64_MIN);
  CHECK_EQ_INT(high, 0);
  stax_dim_bounds(ctx, stax_dim_sub(ctx, stax_dim_mul(ctx, u, u), u), &low, &high);
  CHECK(low == INT64_MIN);
  CHECK(high == INT64_MAX);
  stax_dim_bounds(ctx, stax_dim_floordiv(ctx, u, stax_dim_const(ctx, 4)), &low, &high);
  CHECK_EQ_INT(low, 0);
  CHECK(high == INT64_MAX);
  stax_dim_bounds(ctx, stax_dim_floordiv(ctx, t, s), &low, &high); /* T/S, S >= 1 */
  CHECK_EQ_INT(low, 0);
  CHECK_EQ_INT(high, 5);
  stax_dim_bounds(ctx, stax_dim_ceildiv(ctx, stax_dim_add_const(ctx, t, 1), s), &low, &high);
  CHECK_EQ_INT(low, 1);
  CHECK_EQ_INT(high, 6);
  stax_dim_bounds(ctx, stax_dim_floordiv(ctx, s, u), &low, &high); /* U may be 0 */
  CHECK_EQ_INT(low, 0);
  CHECK_EQ_INT(high, 10);
  stax_dim_bounds(ctx, stax_dim_const(ctx, -4), &low, &high);
  CHECK_EQ_INT(low, -4);
  CHECK_EQ_INT(high, -4);
  stax_dim_bounds(ctx, NULL, &low, &high);
  CHECK(low == INT64_MIN && high == INT64_MAX);
  stax_shape_ctx_destroy(ctx);
}

static void test_eval(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* b = symbol(ctx, "B", 0, STAX_DIM_MAX);
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* t = symbol(ctx, "T", 0, STAX_DIM_MAX);
  int64_t values[3] = {2, 5, 0};
  int64_t value = 0;
  const stax_dim_t* expr = stax_dim_add_const(ctx, stax_dim_mul_const(ctx, stax_dim_mul(ctx, b, s), 3), 1);
  CHECK_OK(stax_dim_eval(ctx, expr, values, &value));
  CHECK_EQ_INT(value, 31);
  CHECK_OK(stax_dim_eval(ctx, stax_dim_mul(ctx, s, s), values, &value));
  CHECK_EQ_INT(value, 25);
  CHECK_OK(stax_dim_eval(ctx, stax_dim_floordiv(ctx, s, b), values, &value));
  CHECK_EQ_INT(value, 2);
  CHECK_OK(stax_dim_eval(ctx, stax_dim_ceildiv(ctx, s, b), values, &value));
  CHECK_EQ_INT(value, 3);
  CHECK_OK(stax_dim_eval(ctx, stax_dim_min(ctx, s, b), values, &value));
  CHECK_EQ_INT(value, 2);
  CHECK_OK(stax_dim_eval(ctx, stax_dim_max(ctx, s, b), values, &value));
  CHECK_EQ_INT(value, 5);
  CHECK_OK(stax_dim_eval(ctx, stax_dim_const(ctx, -9), NULL, &value));
  CHECK_EQ_INT(value, -9);
  /* errors */
  int64_t unbound[3] = {2, STAX_SYMBOL_UNBOUND, 0};
  CHECK_ERROR(stax_dim_eval(ctx, expr, unbound, &value), STAX_FAILED_PRECONDITION,
              "symbol S is unbound");
  CHECK_ERROR(stax_dim_eval(ctx, s, NULL, &value), STAX_FAILED_PRECONDITION, "S is unbound");
  CHECK_ERROR(stax_dim_eval(ctx, stax_dim_floordiv(ctx, s, t), values, &value),
              STAX_INVALID_ARGUMENT, "division by zero in floor(S/T)");
  CHECK_ERROR(stax_dim_eval(ctx, stax_dim_ceildiv(ctx, s, t), values, &value),
              STAX_INVALID_ARGUMENT, "division by zero");
  int64_t huge[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 1};
  CHECK_ERROR(stax_dim_eval(ctx, stax_dim_mul(ctx, b, s), huge, &value), STAX_INVALID_ARGUMENT,
              "overflows int64");
  CHECK_ERROR(stax_dim_eval(ctx, stax_dim_mul(ctx, s, s), huge, &value), STAX_INVALID_ARGUMENT,
              "overflows int64");
  int64_t edge[3] = {INT64_MAX, 1, 1};
  CHECK_ERROR(stax_dim_eval(ctx, stax_dim_add(ctx, b, s), edge, &value), STAX_INVALID_ARGUMENT,
              "B + S overflows int64");
  CHECK_ERROR(stax_dim_eval(ctx, NULL, values, &value), STAX_INVALID_ARGUMENT, "NULL dim");
  CHECK_ERROR(stax_dim_eval(ctx, s, values, NULL), STAX_INVALID_ARGUMENT, "out_value");
  /* a fresh symbol's origin shows up when it has no value */
  const stax_dim_t* fresh = NULL;
  CHECK_OK(stax_symbol_fresh(ctx, "nz", 0, STAX_DIM_MAX, "NonZero node 'nz' output 0, dim 1",
                             &fresh));
  int64_t four[4] = {1, 1, 1, STAX_SYMBOL_UNBOUND};
  CHECK_ERROR(stax_dim_eval(ctx, fresh, four, &value), STAX_FAILED_PRECONDITION,
              "symbol nz_0 is unbound (NonZero node 'nz' output 0, dim 1)");
  stax_shape_ctx_destroy(ctx);
}

static void test_overflow(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  CHECK(stax_dim_add_const(ctx, stax_dim_const(ctx, INT64_MAX), 1) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT,
              "dim expression overflows int64");
  CHECK(stax_dim_mul_const(ctx, stax_dim_mul_const(ctx, s, INT64_MAX / 2 + 1), 2) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT, "overflows int64");
  CHECK(stax_dim_sub(ctx, stax_dim_const(ctx, 0), stax_dim_mul_const(ctx, s, INT64_MIN)) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT, "overflows int64");
  const stax_dim_t* big = stax_dim_add_const(ctx, s, INT64_MAX);
  CHECK(stax_dim_add_const(ctx, big, 1) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT, "overflows int64");
  CHECK(stax_dim_mul(ctx, big, stax_dim_add_const(ctx, s, 2)) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT, "overflows int64");
  /* NULL propagates without a second error; the first error is the one reported */
  CHECK(stax_dim_floordiv(ctx, s, stax_dim_const(ctx, 0)) == NULL);
  CHECK(stax_dim_add(ctx, stax_dim_floordiv(ctx, s, stax_dim_const(ctx, 0)), s) == NULL);
  CHECK(stax_dim_add_const(ctx, stax_dim_const(ctx, INT64_MAX), 1) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT, "divide S by 0");
  CHECK(stax_shape_ctx_take_error(ctx) == STAX_OK);
  CHECK(stax_dim_add(ctx, NULL, s) == NULL);
  CHECK(stax_dim_mul(ctx, s, NULL) == NULL);
  CHECK(stax_dim_min(ctx, NULL, s) == NULL);
  CHECK(stax_dim_floordiv(ctx, NULL, s) == NULL);
  CHECK(stax_dim_add(NULL, s, s) == NULL);
  CHECK(stax_dim_const(NULL, 1) == NULL);
  /* ceil by a huge constant stays exact */
  const stax_dim_t* ceil = stax_dim_ceildiv(ctx, s, stax_dim_const(ctx, INT64_MAX));
  CHECK(ceil != NULL);
  int64_t values[1] = {5}, value = 0;
  CHECK_OK(stax_dim_eval(ctx, ceil, values, &value));
  CHECK_EQ_INT(value, 1);
  stax_shape_ctx_destroy(ctx);
}

static void test_symbols(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* a = symbol(ctx, "nz_1", 0, STAX_DIM_MAX); /* taken by hand */
  const stax_dim_t* f0 = NULL;
  const stax_dim_t* f1 = NULL;
  CHECK_OK(stax_symbol_fresh(ctx, "nz", 0, 100, "NonZero node 'n'", &f0));
  CHECK_OK(stax_symbol_fresh(ctx, "nz", 0, 100, NULL, &f1));
  stax_symbol_id_t id0 = -1, id1 = -1, id_a = -1;
  CHECK(stax_dim_as_symbol(f0, &id0) && stax_dim_as_symbol(f1, &id1));
  CHECK(stax_dim_as_symbol(a, &id_a));
  CHECK_EQ_STR(stax_symbol_name(ctx, id0), "nz_0");
  CHECK_EQ_STR(stax_symbol_name(ctx, id1), "nz_2");
  CHECK_EQ_INT(stax_shape_ctx_symbol_count(ctx), 3);
  CHECK(stax_symbol_name(ctx, 3) == NULL);
  CHECK(stax_symbol_name(ctx, -1) == NULL);
  CHECK(stax_symbol_dim(ctx, id1) == f1);
  CHECK(stax_symbol_dim(ctx, 17) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT, "no symbol with id 17");
  int64_t min = -1, max = -1;
  stax_symbol_range(ctx, id0, &min, &max);
  CHECK_EQ_INT(min, 0);
  CHECK_EQ_INT(max, 100);
  /* the same name is the same symbol */
  const stax_dim_t* again = NULL;
  CHECK_OK(stax_symbol_get(ctx, "nz_1", 0, STAX_DIM_MAX, &again));
  CHECK(again == a);
  CHECK_ERROR(stax_symbol_fresh(ctx, "", 0, 1, NULL, &again), STAX_INVALID_ARGUMENT, "prefix");
  CHECK(again == NULL);
  CHECK_ERROR(stax_symbol_fresh(ctx, "p", 3, 1, NULL, &again), STAX_INVALID_ARGUMENT,
              "empty range [3, 1]");
  CHECK_ERROR(stax_symbol_fresh(NULL, "p", 0, 1, NULL, &again), STAX_INVALID_ARGUMENT, NULL);
  CHECK_ERROR(stax_symbol_fresh(ctx, "p", 0, 1, NULL, NULL), STAX_INVALID_ARGUMENT, NULL);
  /* stax_dim_symbols: deduplicated, and the full count even past capacity */
  const stax_dim_t* expr = stax_dim_add(ctx, stax_dim_mul(ctx, f0, a),
                                        stax_dim_floordiv(ctx, f1, stax_dim_add_const(ctx, a, 1)));
  stax_symbol_id_t ids[4] = {-1, -1, -1, -1};
  CHECK_EQ_INT(stax_dim_symbols(expr, ids, 4), 3);
  CHECK_EQ_INT(stax_dim_symbols(expr, ids, 1), 3);
  CHECK_EQ_INT(stax_dim_symbols(expr, NULL, 0), 3);
  CHECK_EQ_INT(stax_dim_symbols(stax_dim_const(ctx, 3), ids, 4), 0);
  CHECK_EQ_INT(stax_dim_symbols(NULL, ids, 4), 0);
  stax_shape_ctx_destroy(ctx);
}

static void check_code_matches(stax_shape_ctx_t* ctx, const stax_dim_t* d, const int64_t* values,
                               int32_t symbol_count) {
  stax_dim_code_t code[64];
  int32_t count = stax_dim_emit_code(d, NULL, 0);
  CHECK(count > 0 && count <= 64);
  CHECK_EQ_INT(stax_dim_emit_code(d, code, 64), count);
  int64_t expected = 0, actual = 0;
  CHECK_OK(stax_dim_eval(ctx, d, values, &expected));
  CHECK_OK(stax_dim_code_eval(code, count, values, symbol_count, &actual));
  CHECK_EQ_INT(actual, expected);
}

static void test_dim_code(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* b = symbol(ctx, "B", 1, STAX_DIM_MAX);
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  int64_t values[2] = {3, 7};
  check_code_matches(ctx, stax_dim_const(ctx, 42), values, 2);
  check_code_matches(ctx, s, values, 2);
  check_code_matches(ctx, stax_dim_add_const(ctx, stax_dim_mul_const(ctx, stax_dim_mul(ctx, b, s), 3), -1),
                     values, 2);
  check_code_matches(ctx, stax_dim_mul(ctx, stax_dim_mul(ctx, s, s), b), values, 2);
  check_code_matches(ctx, stax_dim_floordiv(ctx, stax_dim_add_const(ctx, s, 1), stax_dim_const(ctx, 2)),
                     values, 2);
  check_code_matches(ctx, stax_dim_ceildiv(ctx, s, b), values, 2);
  check_code_matches(ctx, stax_dim_sub(ctx, stax_dim_min(ctx, s, b), stax_dim_max(ctx, s, b)), values, 2);
  /* exact form of a small program */
  stax_dim_code_t code[8];
  CHECK_EQ_INT(stax_dim_emit_code(stax_dim_add_const(ctx, stax_dim_mul_const(ctx, s, 2), 1), code, 8), 5);
  CHECK_EQ_INT(code[0].op, STAX_DIM_CODE_SYMBOL);
  CHECK_EQ_INT(code[0].value, 1);
  CHECK_EQ_INT(code[1].op, STAX_DIM_CODE_CONST);
  CHECK_EQ_INT(code[1].value, 2);
  CHECK_EQ_INT(code[2].op, STAX_DIM_CODE_MUL);
  CHECK_EQ_INT(code[3].op, STAX_DIM_CODE_CONST);
  CHECK_EQ_INT(code[4].op, STAX_DIM_CODE_ADD);
  CHECK_EQ_INT(stax_dim_emit_code(NULL, code, 8), 0);
  /* malformed programs */
  int64_t value = 0;
  stax_dim_code_t underflow[] = {{STAX_DIM_CODE_CONST, 1}, {STAX_DIM_CODE_ADD, 0}};
  CHECK_ERROR(stax_dim_code_eval(underflow, 2, values, 2, &value), STAX_INVALID_ARGUMENT,
              "underflows the stack");
  stax_dim_code_t leftover[] = {{STAX_DIM_CODE_CONST, 1}, {STAX_DIM_CODE_CONST, 2}};
  CHECK_ERROR(stax_dim_code_eval(leftover, 2, values, 2, &value), STAX_INVALID_ARGUMENT,
              "leaves 2 values");
  stax_dim_code_t bad_op[] = {{99, 0}};
  CHECK_ERROR(stax_dim_code_eval(bad_op, 1, values, 2, &value), STAX_INVALID_ARGUMENT, "bad op 99");
  stax_dim_code_t bad_symbol[] = {{STAX_DIM_CODE_SYMBOL, 2}};
  CHECK_ERROR(stax_dim_code_eval(bad_symbol, 1, values, 2, &value), STAX_INVALID_ARGUMENT,
              "names symbol 2 of 2");
  CHECK_ERROR(stax_dim_code_eval(code, 0, values, 2, &value), STAX_INVALID_ARGUMENT, "empty");
  stax_dim_code_t deep[65];
  for (int i = 0; i < 65; i++) deep[i] = (stax_dim_code_t){STAX_DIM_CODE_CONST, i};
  CHECK_ERROR(stax_dim_code_eval(deep, 65, values, 2, &value), STAX_INVALID_ARGUMENT,
              "more than 64 stack entries");
  int64_t unbound[2] = {3, STAX_SYMBOL_UNBOUND};
  stax_dim_code_t one_symbol[] = {{STAX_DIM_CODE_SYMBOL, 1}};
  CHECK_ERROR(stax_dim_code_eval(one_symbol, 1, unbound, 2, &value), STAX_FAILED_PRECONDITION,
              "symbol #1 is unbound");
  stax_dim_code_t divide[] = {{STAX_DIM_CODE_CONST, 1}, {STAX_DIM_CODE_CONST, 0},
                              {STAX_DIM_CODE_FLOORDIV, 0}};
  CHECK_ERROR(stax_dim_code_eval(divide, 3, values, 2, &value), STAX_INVALID_ARGUMENT,
              "division by zero");
  stax_dim_code_t overflow[] = {{STAX_DIM_CODE_CONST, INT64_MAX}, {STAX_DIM_CODE_CONST, 1},
                                {STAX_DIM_CODE_ADD, 0}};
  CHECK_ERROR(stax_dim_code_eval(overflow, 3, values, 2, &value), STAX_INVALID_ARGUMENT,
              "overflows int64");
  CHECK_ERROR(stax_dim_code_eval(code, 5, values, 2, NULL), STAX_INVALID_ARGUMENT, "out_value");
  stax_shape_ctx_destroy(ctx);
}

/* bcast(a, b): numpy broadcasting of dims that may be 1 at run time. */
static void test_bcast(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* n = symbol(ctx, "N", 0, STAX_DIM_MAX);
  const stax_dim_t* m = symbol(ctx, "M", 0, STAX_DIM_MAX);
  const stax_dim_t* k = symbol(ctx, "K", 2, STAX_DIM_MAX);
  const stax_dim_t* one = stax_dim_const(ctx, 1);
  const stax_dim_t* nm = stax_dim_bcast(ctx, n, m);
  /* simplification */
  CHECK(stax_dim_bcast(ctx, n, n) == n);
  CHECK(stax_dim_bcast(ctx, n, one) == n);
  CHECK(stax_dim_bcast(ctx, one, n) == n);
  CHECK(stax_dim_bcast(ctx, stax_dim_const(ctx, 4), stax_dim_const(ctx, 4)) == stax_dim_const(ctx, 4));
  CHECK(stax_dim_bcast(ctx, one, stax_dim_const(ctx, 4)) == stax_dim_const(ctx, 4));
  CHECK(stax_dim_bcast(ctx, one, one) == one);
  CHECK(nm == stax_dim_bcast(ctx, m, n)); /* commutative */
  CHECK(stax_dim_bcast(ctx, nm, n) == nm); /* absorbs its operands */
  CHECK(stax_dim_bcast(ctx, m, nm) == nm);
  CHECK(stax_dim_bcast(ctx, nm, nm) == nm);
  const stax_dim_t* nmk = stax_dim_bcast(ctx, nm, k);
  CHECK(nmk == stax_dim_bcast(ctx, n, stax_dim_bcast(ctx, k, m))); /* associative */
  CHECK(nm != n && nm != m && !stax_dim_is_const(nm));
  CHECK(stax_dim_has_bcast(nm) && !stax_dim_has_bcast(n));
  CHECK(stax_dim_has_bcast(stax_dim_mul_const(ctx, nm, 2)));
  /* K >= 2 decides the value (K) but not that N broadcasts with it: no simplification */
  CHECK(stax_dim_bcast(ctx, n, k) != k);
  CHECK_EQ_STR(text(ctx, nm), "bcast(N, M)");
  CHECK_EQ_STR(text(ctx, nmk), "bcast(N, M, K)");
  CHECK_EQ_STR(text(ctx, stax_dim_add_const(ctx, stax_dim_mul_const(ctx, nm, 2), 1)),
               "2*bcast(N, M) + 1");
  /* two constants other than 1 never broadcast */
  CHECK(stax_dim_bcast(ctx, stax_dim_const(ctx, 3), stax_dim_const(ctx, 5)) == NULL);
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_SHAPE_MISMATCH, "cannot broadcast 3 with 5");
  CHECK(stax_dim_bcast(ctx, NULL, n) == NULL);
  CHECK_OK(stax_shape_ctx_take_error(ctx));
  /* bounds: an operand >= 2 is the value */
  int64_t low = 0, high = 0;
  stax_dim_bounds(ctx, stax_dim_bcast(ctx, n, k), &low, &high);
  CHECK_EQ_INT(low, 2);
  CHECK(high == STAX_DIM_MAX);
  const stax_dim_t* small = symbol(ctx, "Small", 0, 3);
  const stax_dim_t* big = symbol(ctx, "Big", 1, 9);
  stax_dim_bounds(ctx, stax_dim_bcast(ctx, small, big), &low, &high);
  CHECK_EQ_INT(low, 0);
  CHECK_EQ_INT(high, 9);
  /* evaluation: N when M == 1, M when N == 1, the value when equal; else an error */
  int64_t values[5] = {1, 5, 7, 0, 1};
  int64_t value = 0;
  CHECK_OK(stax_dim_eval(ctx, nm, values, &value));
  CHECK_EQ_INT(value, 5);
  values[0] = 5;
  values[1] = 1;
  CHECK_OK(stax_dim_eval(ctx, nm, values, &value));
  CHECK_EQ_INT(value, 5);
  values[1] = 5;
  CHECK_OK(stax_dim_eval(ctx, nm, values, &value));
  CHECK_EQ_INT(value, 5);
  values[0] = 0; /* numpy: 0 with 1 is 0, 0 with 5 does not broadcast */
  values[1] = 1;
  CHECK_OK(stax_dim_eval(ctx, nm, values, &value));
  CHECK_EQ_INT(value, 0);
  values[0] = 3;
  values[1] = 5;
  CHECK_ERROR(stax_dim_eval(ctx, nm, values, &value), STAX_SHAPE_MISMATCH,
              "cannot broadcast N = 3 with M = 5");
  values[0] = 1;
  CHECK_ERROR(stax_dim_eval(ctx, nmk, values, &value), STAX_SHAPE_MISMATCH,
              "cannot broadcast M = 5 with K = 7");
  /* dim code agrees, and fails the same way */
  values[2] = 5;
  check_code_matches(ctx, nmk, values, 5);
  check_code_matches(ctx, stax_dim_mul(ctx, nm, k), values, 5);
  stax_dim_code_t code[16];
  int32_t count = stax_dim_emit_code(nm, code, 16);
  CHECK_EQ_INT(count, 3);
  CHECK_EQ_INT(code[2].op, STAX_DIM_CODE_BCAST);
  values[0] = 3;
  CHECK_ERROR(stax_dim_code_eval(code, count, values, 5, &value), STAX_SHAPE_MISMATCH,
              "cannot broadcast 3 with 5");
  stax_shape_ctx_destroy(ctx);
}

/* An equality between a broadcast and another dim cannot be checked at run time, so it falls
 * back to unifying the broadcast's operands (the old assumption, which the guards check). */
static void test_bcast_unify(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* n = symbol(ctx, "N", 1, STAX_DIM_MAX);
  const stax_dim_t* m = symbol(ctx, "M", 1, STAX_DIM_MAX);
  const stax_dim_t* k = symbol(ctx, "K", 1, STAX_DIM_MAX);
  const stax_dim_t* nm = stax_dim_bcast(ctx, n, m);
  CHECK(!stax_dim_known_equal(ctx, n, m));
  CHECK_OK(stax_dim_unify(ctx, nm, NULL, k, NULL));
  CHECK(stax_dim_known_equal(ctx, n, m));
  CHECK(stax_dim_known_equal(ctx, n, k));
  CHECK(stax_dim_resolve(ctx, nm) == stax_dim_resolve(ctx, n));
  /* nested in a formula too */
  const stax_dim_t* u = symbol(ctx, "U", 1, STAX_DIM_MAX);
  const stax_dim_t* v = symbol(ctx, "V", 1, STAX_DIM_MAX);
  const stax_dim_t* w = symbol(ctx, "W", 1, STAX_DIM_MAX);
  CHECK_OK(stax_dim_unify(ctx, stax_dim_mul(ctx, stax_dim_bcast(ctx, u, v), w), NULL,
                          stax_dim_const(ctx, 12), NULL));
  CHECK(stax_dim_known_equal(ctx, u, v));
  /* pinning an operand to 1 removes it from the broadcast */
  const stax_dim_t* p = symbol(ctx, "P", 1, STAX_DIM_MAX);
  const stax_dim_t* q = symbol(ctx, "Q", 1, STAX_DIM_MAX);
  const stax_dim_t* pq = stax_dim_bcast(ctx, p, q);
  CHECK_OK(stax_dim_unify(ctx, p, NULL, stax_dim_const(ctx, 1), NULL));
  CHECK(stax_dim_resolve(ctx, pq) == q);
  /* a rolled-back equality leaves the operands apart */
  const stax_dim_t* x = symbol(ctx, "X", 1, STAX_DIM_MAX);
  const stax_dim_t* y = symbol(ctx, "Y", 1, STAX_DIM_MAX);
  stax_shape_checkpoint_t checkpoint = stax_shape_ctx_checkpoint(ctx);
  CHECK_OK(stax_dim_unify(ctx, stax_dim_bcast(ctx, x, y), NULL, x, NULL));
  CHECK(stax_dim_known_equal(ctx, x, y));
  stax_shape_ctx_rollback(ctx, checkpoint);
  CHECK(!stax_dim_known_equal(ctx, x, y));
  stax_shape_ctx_destroy(ctx);
}

static void test_ctx_errors(void) {
  CHECK_ERROR(stax_shape_ctx_create(stax_allocator_system(), NULL), STAX_INVALID_ARGUMENT, NULL);
  stax_shape_ctx_destroy(NULL);
  CHECK(stax_shape_ctx_take_error(NULL) == STAX_OK);
  const stax_dim_t* d = NULL;
  CHECK_ERROR(stax_symbol_get(NULL, "S", 0, 1, &d), STAX_INVALID_ARGUMENT, NULL);
  stax_shape_ctx_t* ctx = make_ctx();
  CHECK_ERROR(stax_symbol_get(ctx, "", 0, 1, &d), STAX_INVALID_ARGUMENT, "must not be empty");
  CHECK_ERROR(stax_symbol_get(ctx, NULL, 0, 1, &d), STAX_INVALID_ARGUMENT, "must not be empty");
  CHECK_ERROR(stax_symbol_get(ctx, "S", 0, 1, NULL), STAX_INVALID_ARGUMENT, "out_dim");
  CHECK_EQ_INT(stax_shape_ctx_symbol_count(NULL), 0);
  int64_t min = 1, max = 1;
  stax_symbol_range(ctx, 99, &min, &max);
  CHECK_EQ_INT(min, 0);
  CHECK(max == STAX_DIM_MAX);
  stax_shape_ctx_destroy(ctx);
}

/* ---- randomized: canonical forms must evaluate like the formulas they came from ---------- */

static uint64_t random_state = 0x9e3779b97f4a7c15ull;

static uint64_t random_next(void) { /* xorshift64: deterministic across runs */
  random_state ^= random_state << 13;
  random_state ^= random_state >> 7;
  random_state ^= random_state << 17;
  return random_state;
}

static int64_t random_below(int64_t n) { return (int64_t)(random_next() % (uint64_t)n); }

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* Builds a random formula and computes its value directly under `values`, side by side. */
static const stax_dim_t* random_formula(stax_shape_ctx_t* ctx, const stax_dim_t* const* symbols,
                                        const int64_t* values, int depth, int64_t* out_value) {
  int64_t choice = depth == 0 ? random_below(2) : random_below(10);
  if (choice == 0) {
    int64_t c = random_below(9) - 3;
    *out_value = c;
    return stax_dim_const(ctx, c);
  }
  if (choice == 1) {
    int64_t i = random_below(4);
    *out_value = values[i];
    return symbols[i];
  }
  int64_t a = 0, b = 0;
  const stax_dim_t* x = random_formula(ctx, symbols, values, depth - 1, &a);
  if (choice == 5 || choice == 6) { /* divide by a positive constant or by P >= 1 */
    bool by_symbol = random_below(3) == 0;
    int64_t q = by_symbol ? values[3] : 1 + random_below(5);
    const stax_dim_t* divisor = by_symbol ? symbols[3] : stax_dim_const(ctx, q);
    bool ceil = choice == 6;
    *out_value = ceil ? -floor_div(-a, q) : floor_div(a, q);
    return ceil ? stax_dim_ceildiv(ctx, x, divisor) : stax_dim_floordiv(ctx, x, divisor);
  }
  if (choice == 7) {
    int64_t c = random_below(7) - 3;
    *out_value = a * c;
    return stax_dim_mul_const(ctx, x, c);
  }
  const stax_dim_t* y = random_formula(ctx, symbols, values, depth - 1, &b);
  switch (choice) {
    case 2: *out_value = a + b; return stax_dim_add(ctx, x, y);
    case 3: *out_value = a - b; return stax_dim_sub(ctx, x, y);
    case 4: *out_value = a * b; return stax_dim_mul(ctx, x, y);
    case 8: *out_value = a < b ? a : b; return stax_dim_min(ctx, x, y);
    default: *out_value = a > b ? a : b; return stax_dim_max(ctx, x, y);
  }
}

static void test_random_formulas(void) {
  static const int64_t mins[4] = {0, 1, -3, 1}, maxs[4] = {3, 5, 3, 4};
  static const char* const names[4] = {"A", "B", "N", "P"};
  for (int round = 0; round < 300; round++) {
    stax_shape_ctx_t* ctx = make_ctx();
    const stax_dim_t* symbols[4];
    int64_t values[4];
    for (int i = 0; i < 4; i++) {
      symbols[i] = symbol(ctx, names[i], mins[i], maxs[i]);
      values[i] = mins[i] + random_below(maxs[i] - mins[i] + 1);
    }
    for (int k = 0; k < 20; k++) {
      int64_t expected = 0, actual = 0, low = 0, high = 0;
      const stax_dim_t* d = random_formula(ctx, symbols, values, 4, &expected);
      CHECK(d != NULL);
      if (!d) {
        stax_status_free(stax_shape_ctx_take_error(ctx));
        continue;
      }
      CHECK_OK(stax_dim_eval(ctx, d, values, &actual));
      if (actual != expected) {
        fprintf(stderr, "round %d: %s = %lld, expected %lld (A=%lld B=%lld N=%lld P=%lld)\n",
                round, text(ctx, d), (long long)actual, (long long)expected,
                (long long)values[0], (long long)values[1], (long long)values[2],
                (long long)values[3]);
      }
      CHECK_EQ_INT(actual, expected);
      stax_dim_bounds(ctx, d, &low, &high);
      CHECK(low <= actual && actual <= high);
      /* the dim code the VM runs agrees too */
      stax_dim_code_t code[512];
      int32_t count = stax_dim_emit_code(d, code, 512);
      if (count <= 512) {
        int64_t from_code = 0;
        stax_status_t status = stax_dim_code_eval(code, count, values, 4, &from_code);
        if (status == STAX_OK) CHECK_EQ_INT(from_code, expected);
        stax_status_free(status); /* only a too-deep stack may fail here */
      }
    }
    stax_shape_ctx_destroy(ctx);
  }
}

/* Builds a representative set of dims, unifications and guards; returns the first failure. */
static stax_status_t build_everything(stax_shape_ctx_t* ctx) {
  const stax_dim_t* b = NULL;
  const stax_dim_t* s = NULL;
  const stax_dim_t* h = NULL;
  const stax_dim_t* fresh = NULL;
  STAX_RETURN_IF_ERROR(stax_symbol_get(ctx, "B", 1, 64, &b));
  STAX_RETURN_IF_ERROR(stax_symbol_get(ctx, "S", 0, STAX_DIM_MAX, &s));
  STAX_RETURN_IF_ERROR(stax_symbol_get(ctx, "H", 1, STAX_DIM_MAX, &h));
  STAX_RETURN_IF_ERROR(stax_symbol_fresh(ctx, "nz", 0, STAX_DIM_MAX, "NonZero 'n'", &fresh));
  const stax_dim_t* terms[16];
  int count = 0;
  for (int i = 0; i < 12; i++) { /* enough terms to outgrow the inline scratch buffers */
    const stax_dim_t* t = NULL;
    char name[16];
    snprintf(name, sizeof(name), "T%d", i);
    STAX_RETURN_IF_ERROR(stax_symbol_get(ctx, name, 0, STAX_DIM_MAX, &t));
    terms[count++] = stax_dim_mul_const(ctx, t, i + 2);
  }
  const stax_dim_t* sum = stax_dim_const(ctx, 300);
  for (int i = 0; i < count; i++) sum = stax_dim_add(ctx, sum, terms[i]);
  const stax_dim_t* product = stax_dim_mul(ctx, sum, stax_dim_add_const(ctx, b, 1));
  const stax_dim_t* bsh = stax_dim_mul(ctx, stax_dim_mul(ctx, b, s), h);
  const stax_dim_t* quotient = stax_dim_floordiv(ctx, bsh, h);
  const stax_dim_t* conv = stax_dim_add_const(
      ctx, stax_dim_floordiv(ctx, stax_dim_add_const(ctx, h, -3), stax_dim_const(ctx, 2)), 1);
  const stax_dim_t* ceil = stax_dim_ceildiv(ctx, stax_dim_mul_const(ctx, sum, 3), stax_dim_const(ctx, 7));
  const stax_dim_t* minimum = stax_dim_min(ctx, fresh, stax_dim_max(ctx, s, h));
  const stax_dim_t* big = stax_dim_const(ctx, 1000000);
  const stax_dim_t* power = stax_dim_mul(ctx, stax_dim_mul(ctx, product, product), conv);
  if (!product || !quotient || !ceil || !minimum || !big || !power) {
    return stax_shape_ctx_take_error(ctx);
  }
  STAX_RETURN_IF_ERROR(stax_dim_unify(ctx, quotient, "reshape", stax_dim_mul(ctx, b, s), "input"));
  STAX_RETURN_IF_ERROR(stax_dim_unify(ctx, s, "x dim 1", fresh, "y dim 0"));
  STAX_RETURN_IF_ERROR(stax_dim_unify(ctx, stax_dim_mul_const(ctx, h, 2), "a", big, "b"));
  if (!stax_dim_known_equal(ctx, fresh, s)) {
    stax_status_t pending = stax_shape_ctx_take_error(ctx);
    return pending ? pending : stax_status_make(STAX_INTERNAL, "lost an equality");
  }
  const stax_dim_t* x_dims[3] = {b, s, stax_dim_const(ctx, 64)};
  const stax_dim_t* y_dims[2] = {stax_dim_mul_const(ctx, fresh, 2), h};
  stax_shape_guard_input_t inputs[2] = {{"x", 3, x_dims}, {"y", 2, y_dims}};
  stax_shape_guards_t* guards = NULL;
  STAX_RETURN_IF_ERROR(stax_shape_guards_build(ctx, 2, inputs, &guards));
  stax_shape_guards_destroy(guards);
  return stax_shape_ctx_take_error(ctx);
}

static void test_out_of_memory(void) {
  /* Fail each allocation in turn until a run needs no failure; every run must report
   * OUT_OF_MEMORY (or succeed) and leave nothing allocated. */
  bool finished = false;
  for (uint64_t fail_at = 1; fail_at < 2000 && !finished; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), fail_at);
    stax_shape_ctx_t* ctx = NULL;
    stax_status_t status = stax_shape_ctx_create(stax_failing_allocator(&state), &ctx);
    if (status == STAX_OK) status = build_everything(ctx);
    if (status != STAX_OK) {
      if (stax_status_code(status) != STAX_OUT_OF_MEMORY) {
        fprintf(stderr, "fail_at %llu: %s\n", (unsigned long long)fail_at,
                stax_status_message(status));
      }
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      stax_status_free(status);
    }
    stax_shape_ctx_destroy(ctx);
    CHECK_EQ_INT(state.live_allocations, 0);
    CHECK_EQ_INT(state.live_bytes, 0);
    if (state.failed_count == 0) {
      finished = true;
      CHECK(status == STAX_OK);
      CHECK(fail_at > 10); /* the set really allocates */
    }
  }
  CHECK(finished);
}

STAX_TEST_MAIN(STAX_TEST(test_constants), STAX_TEST(test_cancellation_and_collection),
               STAX_TEST(test_commutativity_and_distributivity), STAX_TEST(test_print_format),
               STAX_TEST(test_division), STAX_TEST(test_min_max), STAX_TEST(test_bounds),
               STAX_TEST(test_eval), STAX_TEST(test_overflow), STAX_TEST(test_symbols),
               STAX_TEST(test_dim_code), STAX_TEST(test_bcast), STAX_TEST(test_bcast_unify),
               STAX_TEST(test_ctx_errors), STAX_TEST(test_random_formulas),
               STAX_TEST(test_out_of_memory))
