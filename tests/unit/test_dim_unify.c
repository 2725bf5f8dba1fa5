/* Symbolic dims: the union-find of equal dims, contradiction messages, pinning symbols and
 * symbol ranges, and checkpoints that roll all of it back (src/ir/dim_unify.c, src/ir/dim.c). */
#include "ir/dim_internal.h" /* class roots and the undo log length, read without allocating */
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

static void check_range(stax_shape_ctx_t* ctx, const stax_dim_t* d, int64_t min, int64_t max) {
  stax_symbol_id_t id = -1;
  CHECK(stax_dim_as_symbol(d, &id));
  int64_t low = 0, high = 0;
  stax_symbol_range(ctx, id, &low, &high);
  CHECK_EQ_INT(low, min);
  CHECK_EQ_INT(high, max);
}

static void test_constant_contradiction(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  CHECK_ERROR(stax_dim_unify(ctx, stax_dim_const(ctx, 3), "MatMul node 'mm' input 0, dim 1",
                             stax_dim_const(ctx, 4), "MatMul node 'mm' input 1, dim 0"),
              STAX_SHAPE_MISMATCH,
              "dim 3 (from MatMul node 'mm' input 0, dim 1) cannot equal dim 4 (from MatMul "
              "node 'mm' input 1, dim 0)");
  CHECK_OK(stax_dim_unify(ctx, stax_dim_const(ctx, 3), "a", stax_dim_const(ctx, 3), "b"));
  /* without origins the message still names both dims */
  CHECK_ERROR(stax_dim_unify(ctx, stax_dim_const(ctx, 5), NULL, stax_dim_const(ctx, 6), NULL),
              STAX_SHAPE_MISMATCH, "dim 5 cannot equal dim 6");
  stax_shape_ctx_destroy(ctx);
}

static void test_known_constant_contradiction(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  CHECK_OK(stax_dim_unify(ctx, s, "x dim 0", stax_dim_const(ctx, 3), "weight dim 0"));
  CHECK(stax_dim_resolve(ctx, s) == stax_dim_const(ctx, 3));
  check_range(ctx, s, 3, 3);
  CHECK_ERROR(stax_dim_unify(ctx, s, "y dim 1", stax_dim_const(ctx, 4), "bias dim 0"),
              STAX_SHAPE_MISMATCH,
              "dim S (from y dim 1), known to equal 3, cannot equal dim 4 (from bias dim 0)");
  /* a dim's first origin is remembered for later messages */
  CHECK_ERROR(stax_dim_unify(ctx, stax_dim_const(ctx, 4), NULL, s, NULL), STAX_SHAPE_MISMATCH,
              "dim 4 (from bias dim 0) cannot equal dim S (from x dim 0), known to equal 3");
  stax_shape_ctx_destroy(ctx);
}

static void test_pin_out_of_range(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s0 = symbol(ctx, "S0", 0, STAX_DIM_MAX);
  const stax_dim_t* s1 = symbol(ctx, "S1", 1, STAX_DIM_MAX);
  CHECK_OK(stax_dim_unify(ctx, s0, "a", s1, "b"));
  check_range(ctx, s0, 1, STAX_DIM_MAX); /* the class shares the tighter range */
  CHECK_ERROR(stax_dim_unify(ctx, s0, "concat input 0", stax_dim_mul_const(ctx, s1, 2),
                             "concat input 1"),
              STAX_SHAPE_MISMATCH,
              "dim S0 (from concat input 0) cannot equal dim 2*S1 (from concat input 1), known "
              "to equal 2*S0: forces S0 = 0, outside its range [1, inf)");
  /* nothing was pinned by the failed attempt */
  CHECK(stax_dim_resolve(ctx, s1) == s0);
  check_range(ctx, s0, 1, STAX_DIM_MAX);
  stax_shape_ctx_destroy(ctx);
}

static void test_pin_to_zero(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s0 = symbol(ctx, "S0", 0, STAX_DIM_MAX);
  const stax_dim_t* s1 = symbol(ctx, "S1", 0, STAX_DIM_MAX);
  CHECK_OK(stax_dim_unify(ctx, s0, "a", s1, "b"));
  CHECK_OK(stax_dim_unify(ctx, s0, "a", stax_dim_mul_const(ctx, s1, 2), "c"));
  CHECK(stax_dim_resolve(ctx, s0) == stax_dim_const(ctx, 0));
  CHECK(stax_dim_resolve(ctx, s1) == stax_dim_const(ctx, 0));
  check_range(ctx, s0, 0, 0);
  CHECK(stax_dim_known_equal(ctx, s1, stax_dim_const(ctx, 0)));
  CHECK(stax_dim_known_equal(ctx, stax_dim_add_const(ctx, s1, 5), stax_dim_const(ctx, 5)));
  stax_shape_ctx_destroy(ctx);
}

static void test_linear_pins(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 2, 10);
  CHECK_ERROR(stax_dim_unify(ctx, s, "x", stax_dim_const(ctx, 1), "y"), STAX_SHAPE_MISMATCH,
              "forces S = 1, outside its range [2, 10]");
  CHECK_ERROR(stax_dim_unify(ctx, stax_dim_mul_const(ctx, s, 2), "x", stax_dim_const(ctx, 7), "y"),
              STAX_SHAPE_MISMATCH, "dim 2*S (from x) cannot equal dim 7 (from y): forces 2*S - 7 "
                                   "= 0, which has no integer solution");
  CHECK_OK(stax_dim_unify(ctx, stax_dim_add_const(ctx, stax_dim_mul_const(ctx, s, 3), 1), "x",
                          stax_dim_const(ctx, 13), "y"));
  CHECK(stax_dim_resolve(ctx, s) == stax_dim_const(ctx, 4));
  check_range(ctx, s, 4, 4);
  /* the pinned value flows into every formula */
  const stax_dim_t* t = symbol(ctx, "T", 0, STAX_DIM_MAX);
  CHECK(stax_dim_known_equal(ctx, stax_dim_mul(ctx, s, t), stax_dim_mul_const(ctx, t, 4)));
  CHECK(stax_dim_resolve(ctx, stax_dim_mul(ctx, s, t)) == stax_dim_mul_const(ctx, t, 4));
  stax_shape_ctx_destroy(ctx);
}

static void test_range_contradiction_and_narrowing(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, 5);
  const stax_dim_t* t = symbol(ctx, "T", 10, 20);
  CHECK_ERROR(stax_dim_unify(ctx, s, "x", t, "y"), STAX_SHAPE_MISMATCH,
              "dim S (from x) cannot equal dim T (from y): their difference S - T is always in "
              "[-20, -5]");
  const stax_dim_t* u = symbol(ctx, "U", 3, 30);
  const stax_dim_t* v = symbol(ctx, "V", 0, 12);
  CHECK_OK(stax_dim_unify(ctx, v, "x", u, "y"));
  CHECK(stax_dim_resolve(ctx, v) == u); /* U was created first */
  check_range(ctx, u, 3, 12);
  /* narrowing a member narrows the class's symbol */
  CHECK_OK(stax_symbol_get(ctx, "V", 5, 8, &v));
  check_range(ctx, u, 5, 8);
  check_range(ctx, v, 5, 8);
  const stax_dim_t* again = NULL;
  CHECK_ERROR(stax_symbol_get(ctx, "V", 20, 30, &again), STAX_INVALID_ARGUMENT,
              "symbol 'V' has range [5, 8], which does not intersect [20, 30]");
  CHECK(again == NULL);
  /* a member's range must also hold for a class root that is a constant */
  const stax_dim_t* w = symbol(ctx, "W", 0, STAX_DIM_MAX);
  CHECK_OK(stax_dim_unify(ctx, w, NULL, stax_dim_const(ctx, 7), NULL));
  CHECK_ERROR(stax_symbol_get(ctx, "W", 8, STAX_DIM_MAX, &again), STAX_INVALID_ARGUMENT,
              "[7, 7], which does not intersect [8, inf)");
  /* a nonlinear equation that ranges rule out */
  const stax_dim_t* p = symbol(ctx, "P", 1, 4);
  const stax_dim_t* q = symbol(ctx, "Q", 1, 4);
  CHECK_ERROR(stax_dim_unify(ctx, stax_dim_mul(ctx, p, q), "a", stax_dim_const(ctx, 17), "b"),
              STAX_SHAPE_MISMATCH, "their difference P*Q - 17 is always in [-16, -1]");
  stax_shape_ctx_destroy(ctx);
}

static void test_symbol_get_ranges(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, 100);
  const stax_dim_t* again = symbol(ctx, "S", 10, STAX_DIM_MAX);
  CHECK(again == s);
  check_range(ctx, s, 10, 100);
  CHECK_ERROR(stax_symbol_get(ctx, "S", 200, 300, &again), STAX_INVALID_ARGUMENT,
              "symbol 'S' has range [10, 100], which does not intersect [200, 300]");
  check_range(ctx, s, 10, 100);
  CHECK_ERROR(stax_symbol_get(ctx, "S", 5, 4, &again), STAX_INVALID_ARGUMENT,
              "symbol 'S': empty range [5, 4]");
  CHECK_ERROR(stax_symbol_get(ctx, "R", 5, 4, &again), STAX_INVALID_ARGUMENT, "empty range");
  CHECK_EQ_INT(stax_shape_ctx_symbol_count(ctx), 1);
  stax_shape_ctx_destroy(ctx);
}

static void test_transitive_equality(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* a = symbol(ctx, "A", 0, STAX_DIM_MAX);
  const stax_dim_t* b = symbol(ctx, "B", 0, STAX_DIM_MAX);
  const stax_dim_t* c = symbol(ctx, "C", 0, STAX_DIM_MAX);
  const stax_dim_t* d = symbol(ctx, "D", 0, STAX_DIM_MAX);
  CHECK(!stax_dim_known_equal(ctx, a, c));
  CHECK_OK(stax_dim_unify(ctx, c, "x", b, "y"));
  CHECK_OK(stax_dim_unify(ctx, b, "y", a, "z"));
  CHECK(stax_dim_known_equal(ctx, a, c));
  CHECK(stax_dim_known_equal(ctx, c, a));
  CHECK(stax_dim_resolve(ctx, c) == a);
  CHECK(stax_dim_known_equal(ctx, stax_dim_add_const(ctx, stax_dim_mul_const(ctx, a, 2), 1),
                             stax_dim_add_const(ctx, stax_dim_mul_const(ctx, c, 2), 1)));
  CHECK(stax_dim_known_equal(ctx, stax_dim_mul(ctx, b, d), stax_dim_mul(ctx, d, c)));
  CHECK(!stax_dim_known_equal(ctx, a, d));
  CHECK(!stax_dim_known_equal(ctx, a, NULL));
  /* unifying again is a no-op */
  CHECK_OK(stax_dim_unify(ctx, a, NULL, c, NULL));
  CHECK_OK(stax_dim_unify(ctx, a, NULL, a, NULL));
  stax_shape_ctx_destroy(ctx);
}

static void test_resolve_prefers_simple(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* x = symbol(ctx, "X", 0, STAX_DIM_MAX);
  const stax_dim_t* y = symbol(ctx, "Y", 1, STAX_DIM_MAX);
  const stax_dim_t* z = symbol(ctx, "Z", 1, STAX_DIM_MAX);
  const stax_dim_t* yz = stax_dim_mul(ctx, y, z);
  /* a symbol beats a product */
  CHECK_OK(stax_dim_unify(ctx, yz, "reshape", x, "input"));
  CHECK(stax_dim_resolve(ctx, yz) == x);
  CHECK(stax_dim_resolve(ctx, x) == x);
  /* a constant beats everything */
  CHECK_OK(stax_dim_unify(ctx, yz, "reshape", stax_dim_const(ctx, 12), "constant"));
  CHECK(stax_dim_resolve(ctx, x) == stax_dim_const(ctx, 12));
  CHECK(stax_dim_resolve(ctx, yz) == stax_dim_const(ctx, 12));
  CHECK(stax_dim_known_equal(ctx, stax_dim_add_const(ctx, x, 1), stax_dim_const(ctx, 13)));
  /* fewer terms beat more */
  const stax_dim_t* p = symbol(ctx, "P", 0, STAX_DIM_MAX);
  const stax_dim_t* q = symbol(ctx, "Q", 0, STAX_DIM_MAX);
  const stax_dim_t* long_sum = stax_dim_add(ctx, stax_dim_mul(ctx, p, q), stax_dim_mul(ctx, q, q));
  const stax_dim_t* short_sum = stax_dim_add_const(ctx, stax_dim_mul(ctx, p, p), 1);
  CHECK_OK(stax_dim_unify(ctx, long_sum, NULL, short_sum, NULL));
  CHECK(stax_dim_resolve(ctx, long_sum) == short_sum);
  CHECK(stax_dim_resolve(ctx, NULL) == NULL);
  CHECK(stax_dim_resolve(NULL, x) == NULL);
  stax_shape_ctx_destroy(ctx);
}

static void test_unify_errors(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  CHECK_ERROR(stax_dim_unify(NULL, s, NULL, s, NULL), STAX_INVALID_ARGUMENT, NULL);
  CHECK_ERROR(stax_dim_unify(ctx, NULL, "node 'a'", s, NULL), STAX_INVALID_ARGUMENT,
              "cannot unify a NULL dim (from node 'a')");
  /* a NULL produced by a failed construction reports that failure */
  const stax_dim_t* bad = stax_dim_floordiv(ctx, s, stax_dim_const(ctx, 0));
  CHECK_ERROR(stax_dim_unify(ctx, s, NULL, bad, NULL), STAX_INVALID_ARGUMENT, "divide S by 0");
  CHECK(stax_shape_ctx_take_error(ctx) == STAX_OK);
  /* a pinned divisor turning 0 makes resolution fail with a reason */
  const stax_dim_t* t = symbol(ctx, "T", 0, STAX_DIM_MAX);
  const stax_dim_t* quotient = stax_dim_floordiv(ctx, s, t);
  CHECK_OK(stax_dim_unify(ctx, t, NULL, stax_dim_const(ctx, 0), NULL));
  CHECK_ERROR(stax_dim_unify(ctx, quotient, NULL, s, NULL), STAX_INVALID_ARGUMENT,
              "divide S by 0");
  CHECK(!stax_dim_known_equal(ctx, quotient, s));
  CHECK_ERROR(stax_shape_ctx_take_error(ctx), STAX_INVALID_ARGUMENT, "divide S by 0");
  stax_shape_ctx_destroy(ctx);
}

static void test_min_max_through_classes(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 0, STAX_DIM_MAX);
  const stax_dim_t* t = symbol(ctx, "T", 0, STAX_DIM_MAX);
  const stax_dim_t* m = stax_dim_min(ctx, s, t);
  CHECK_OK(stax_dim_unify(ctx, s, NULL, t, NULL));
  CHECK(stax_dim_resolve(ctx, m) == s);
  CHECK(stax_dim_known_equal(ctx, m, stax_dim_max(ctx, t, s)));
  stax_shape_ctx_destroy(ctx);
}

/* ---- randomized: equations that hold for chosen values never contradict ------------------ */

static uint64_t random_state = 0x2545f4914f6cdd1dull;

static int64_t random_below(int64_t n) { /* xorshift64: deterministic across runs */
  random_state ^= random_state << 13;
  random_state ^= random_state >> 7;
  random_state ^= random_state << 17;
  return (int64_t)(random_state % (uint64_t)n);
}

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static const stax_dim_t* random_formula(stax_shape_ctx_t* ctx, const stax_dim_t* const* symbols,
                                        const int64_t* values, int depth, int64_t* out_value) {
  int64_t choice = depth == 0 ? random_below(2) : random_below(7);
  int64_t a = 0, b = 0;
  if (choice == 0) {
    *out_value = random_below(6);
    return stax_dim_const(ctx, *out_value);
  }
  if (choice == 1) {
    int64_t i = random_below(5);
    *out_value = values[i];
    return symbols[i];
  }
  const stax_dim_t* x = random_formula(ctx, symbols, values, depth - 1, &a);
  if (choice == 5) {
    int64_t q = 1 + random_below(3);
    *out_value = floor_div(a, q);
    return stax_dim_floordiv(ctx, x, stax_dim_const(ctx, q));
  }
  const stax_dim_t* y = random_formula(ctx, symbols, values, depth - 1, &b);
  switch (choice) {
    case 2: *out_value = a + b; return stax_dim_add(ctx, x, y);
    case 3: *out_value = a - b; return stax_dim_sub(ctx, x, y);
    case 4: *out_value = a * b; return stax_dim_mul(ctx, x, y);
    default: *out_value = a < b ? a : b; return stax_dim_min(ctx, x, y);
  }
}

static void test_random_true_equations(void) {
  static const char* const names[5] = {"A", "B", "C", "D", "E"};
  for (int round = 0; round < 200; round++) {
    stax_shape_ctx_t* ctx = make_ctx();
    const stax_dim_t* symbols[5];
    int64_t values[5];
    for (int i = 0; i < 5; i++) {
      symbols[i] = symbol(ctx, names[i], 0, 6);
      values[i] = random_below(7);
    }
    for (int k = 0; k < 8; k++) {
      int64_t vf = 0, vg = 0;
      const stax_dim_t* f = random_formula(ctx, symbols, values, 3, &vf);
      const stax_dim_t* g = random_formula(ctx, symbols, values, 3, &vg);
      g = stax_dim_add_const(ctx, g, vf - vg); /* now f == g under `values` */
      stax_status_t status = stax_dim_unify(ctx, f, "f", g, "g");
      if (status) fprintf(stderr, "round %d: %s\n", round, stax_status_message(status));
      CHECK_OK(status);
      CHECK(stax_dim_known_equal(ctx, f, g));
    }
    /* whatever was pinned or merged, each symbol still resolves to its chosen value */
    for (int i = 0; i < 5; i++) {
      int64_t value = -1;
      CHECK_OK(stax_dim_eval(ctx, stax_dim_resolve(ctx, symbols[i]), values, &value));
      CHECK_EQ_INT(value, values[i]);
    }
    stax_shape_ctx_destroy(ctx);
  }
}

/* ---- checkpoints ------------------------------------------------------------------------- */

static void check_unbound(stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  CHECK(stax_dim_resolve(ctx, d) == d);
  CHECK(stax_dim_class_root(d) == d);
}

static void test_checkpoint_rollback(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 1, 100);
  const stax_dim_t* t = symbol(ctx, "T", 0, 50);
  const stax_dim_t* u = symbol(ctx, "U", 20, STAX_DIM_MAX);
  const stax_dim_t* two_s = stax_dim_mul_const(ctx, s, 2);
  stax_shape_checkpoint_t checkpoint = stax_shape_ctx_checkpoint(ctx);
  CHECK_EQ_INT(checkpoint.depth, 1);
  CHECK_OK(stax_dim_unify(ctx, s, "x dim 0", stax_dim_const(ctx, 4), "y dim 0"));
  CHECK(stax_dim_resolve(ctx, s) == stax_dim_const(ctx, 4));
  CHECK(stax_dim_resolve(ctx, two_s) == stax_dim_const(ctx, 8));
  check_range(ctx, s, 4, 4);
  CHECK_OK(stax_dim_unify(ctx, u, NULL, t, NULL)); /* T (created first) wins with [20, 50] */
  check_range(ctx, t, 20, 50);
  CHECK_OK(stax_symbol_get(ctx, "U", 0, 30, &u));
  check_range(ctx, t, 20, 30);
  check_range(ctx, u, 20, 30);
  CHECK(stax_dim_known_equal(ctx, t, u));
  stax_shape_ctx_rollback(ctx, checkpoint);

  check_unbound(ctx, s);
  check_range(ctx, s, 1, 100);
  CHECK(stax_dim_resolve(ctx, two_s) == two_s);
  check_unbound(ctx, t);
  check_unbound(ctx, u);
  check_range(ctx, t, 0, 50);
  check_range(ctx, u, 20, STAX_DIM_MAX);
  CHECK(!stax_dim_known_equal(ctx, t, u));
  /* The origin recorded under the checkpoint is gone: the message names only this call's. */
  CHECK_ERROR(stax_dim_unify(ctx, s, NULL, stax_dim_const(ctx, 101), "z dim 0"),
              STAX_SHAPE_MISMATCH,
              "dim S cannot equal dim 101 (from z dim 0): forces S = 101, outside its range "
              "[1, 100]");
  /* Nothing outstanding: later changes are permanent and a stale rollback is ignored. */
  CHECK_OK(stax_dim_unify(ctx, s, NULL, stax_dim_const(ctx, 9), NULL));
  stax_shape_ctx_rollback(ctx, checkpoint);
  CHECK(stax_dim_resolve(ctx, s) == stax_dim_const(ctx, 9));
  CHECK_EQ_INT(ctx->undo_count, 0);
  stax_shape_ctx_destroy(ctx);
}

/* Path compression under a checkpoint rewrites links of classes that already existed; those
 * rewrites must be undone too or a member stays attached to the rolled-back root. */
static void test_checkpoint_undoes_path_compression(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s0 = symbol(ctx, "S0", 1, STAX_DIM_MAX);
  const stax_dim_t* s1 = symbol(ctx, "S1", 1, STAX_DIM_MAX);
  const stax_dim_t* s2 = symbol(ctx, "S2", 1, STAX_DIM_MAX);
  CHECK_OK(stax_dim_unify(ctx, s1, NULL, s2, NULL));
  CHECK_OK(stax_dim_unify(ctx, s0, NULL, s1, NULL));
  CHECK(s2->class_parent == s1); /* the chain S2 -> S1 -> S0 */
  CHECK(s1->class_parent == s0);
  stax_shape_checkpoint_t checkpoint = stax_shape_ctx_checkpoint(ctx);
  CHECK_OK(stax_dim_unify(ctx, s0, NULL, stax_dim_const(ctx, 6), NULL));
  CHECK(stax_dim_resolve(ctx, s2) == stax_dim_const(ctx, 6));
  CHECK(s2->class_parent == stax_dim_const(ctx, 6)); /* compressed */
  stax_shape_ctx_rollback(ctx, checkpoint);
  CHECK(s2->class_parent == s1);
  CHECK(s1->class_parent == s0);
  CHECK(s0->class_parent == NULL);
  CHECK(stax_dim_resolve(ctx, s2) == s0);
  check_range(ctx, s0, 1, STAX_DIM_MAX);
  stax_shape_ctx_destroy(ctx);
}

static void test_checkpoint_nesting(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 1, STAX_DIM_MAX);
  const stax_dim_t* t = symbol(ctx, "T", 1, STAX_DIM_MAX);
  const stax_dim_t* fresh = NULL;

  /* inner rollback, outer commit: only the outer change stays */
  stax_shape_checkpoint_t outer = stax_shape_ctx_checkpoint(ctx);
  CHECK_OK(stax_dim_unify(ctx, s, NULL, stax_dim_const(ctx, 4), NULL));
  stax_shape_checkpoint_t inner = stax_shape_ctx_checkpoint(ctx);
  CHECK_EQ_INT(inner.depth, 2);
  CHECK_OK(stax_dim_unify(ctx, t, NULL, stax_dim_const(ctx, 5), NULL));
  CHECK_OK(stax_symbol_fresh(ctx, "nz", 0, STAX_DIM_MAX, "NonZero node 'nz'", &fresh));
  CHECK_EQ_INT(stax_shape_ctx_symbol_count(ctx), 3);
  stax_shape_ctx_rollback(ctx, inner);
  CHECK(stax_dim_resolve(ctx, s) == stax_dim_const(ctx, 4));
  check_unbound(ctx, t);
  check_range(ctx, t, 1, STAX_DIM_MAX);
  CHECK_EQ_INT(stax_shape_ctx_symbol_count(ctx), 2);
  CHECK(ctx->undo_count > 0); /* the outer checkpoint can still undo S = 4 */
  stax_shape_ctx_commit(ctx, outer);
  CHECK_EQ_INT(ctx->undo_count, 0);
  CHECK_EQ_INT(ctx->checkpoint_depth, 0);
  CHECK(stax_dim_resolve(ctx, s) == stax_dim_const(ctx, 4));
  check_range(ctx, s, 4, 4);

  /* inner commit, outer rollback: the outer one undoes the inner's committed changes too */
  outer = stax_shape_ctx_checkpoint(ctx);
  inner = stax_shape_ctx_checkpoint(ctx);
  CHECK_OK(stax_dim_unify(ctx, t, NULL, stax_dim_const(ctx, 5), NULL));
  stax_shape_ctx_commit(ctx, inner);
  CHECK(stax_dim_resolve(ctx, t) == stax_dim_const(ctx, 5));
  stax_shape_ctx_rollback(ctx, outer);
  check_unbound(ctx, t);

  /* ending the outer checkpoint ends the inner one; ending that again does nothing */
  outer = stax_shape_ctx_checkpoint(ctx);
  inner = stax_shape_ctx_checkpoint(ctx);
  CHECK_OK(stax_dim_unify(ctx, t, NULL, stax_dim_const(ctx, 5), NULL));
  stax_shape_ctx_rollback(ctx, outer);
  CHECK_EQ_INT(ctx->checkpoint_depth, 0);
  stax_shape_ctx_rollback(ctx, inner);
  stax_shape_ctx_commit(ctx, inner);
  CHECK_EQ_INT(ctx->checkpoint_depth, 0);
  check_unbound(ctx, t);
  CHECK(stax_dim_resolve(ctx, s) == stax_dim_const(ctx, 4));

  /* no checkpoint: nothing is logged however much changes */
  for (int i = 0; i < 50; i++) {
    char name[16];
    snprintf(name, sizeof(name), "R%d", i);
    const stax_dim_t* r = symbol(ctx, name, 1, STAX_DIM_MAX);
    CHECK_OK(stax_dim_unify(ctx, r, NULL, t, NULL));
  }
  CHECK_EQ_INT(ctx->undo_count, 0);
  /* a NULL context has no checkpoints */
  stax_shape_checkpoint_t none = stax_shape_ctx_checkpoint(NULL);
  CHECK_EQ_INT(none.depth, 0);
  stax_shape_ctx_rollback(NULL, none);
  stax_shape_ctx_commit(NULL, none);
  stax_shape_ctx_destroy(ctx);
}

static void test_checkpoint_drops_new_symbols(void) {
  stax_shape_ctx_t* ctx = make_ctx();
  const stax_dim_t* s = symbol(ctx, "S", 1, STAX_DIM_MAX);
  stax_shape_checkpoint_t checkpoint = stax_shape_ctx_checkpoint(ctx);
  const stax_dim_t* n = symbol(ctx, "N", 5, 6);
  const stax_dim_t* fresh = NULL;
  CHECK_OK(stax_symbol_fresh(ctx, "nonzero", 0, STAX_DIM_MAX, "NonZero node 'nz'", &fresh));
  stax_symbol_id_t n_id = -1, fresh_id = -1;
  CHECK(stax_dim_as_symbol(n, &n_id));
  CHECK(stax_dim_as_symbol(fresh, &fresh_id));
  CHECK_EQ_STR(stax_symbol_name(ctx, fresh_id), "nonzero_0");
  CHECK_OK(stax_dim_unify(ctx, s, NULL, stax_dim_add(ctx, n, fresh), NULL));
  stax_shape_ctx_rollback(ctx, checkpoint);

  CHECK_EQ_INT(stax_shape_ctx_symbol_count(ctx), 1);
  CHECK(stax_symbol_name(ctx, n_id) == NULL);
  CHECK(stax_symbol_name(ctx, fresh_id) == NULL);
  check_unbound(ctx, s);
  /* "N" is unknown by name again: asking for it creates a symbol with exactly the new range
   * instead of narrowing the rolled-back [5, 6] (which [7, 9] would not even intersect). */
  const stax_dim_t* again = symbol(ctx, "N", 7, 9);
  CHECK_EQ_INT(stax_shape_ctx_symbol_count(ctx), 2);
  check_range(ctx, again, 7, 9);
  check_unbound(ctx, again);
  /* fresh names are handed out again from where the checkpoint was */
  CHECK_OK(stax_symbol_fresh(ctx, "nonzero", 0, STAX_DIM_MAX, NULL, &fresh));
  CHECK(stax_dim_as_symbol(fresh, &fresh_id));
  CHECK_EQ_STR(stax_symbol_name(ctx, fresh_id), "nonzero_0");
  CHECK_EQ_INT(stax_shape_ctx_symbol_count(ctx), 3);
  stax_shape_ctx_destroy(ctx);
}

/* What a rollback must restore: each tracked dim's class root (invariant under path
 * compression) and every symbol's range. Read without allocating. */
#define SNAPSHOT_DIMS 8
typedef struct snapshot_t {
  int32_t symbol_count;
  const stax_dim_t* roots[SNAPSHOT_DIMS];
  int64_t min[SNAPSHOT_DIMS], max[SNAPSHOT_DIMS];
} snapshot_t;

static snapshot_t take_snapshot(stax_shape_ctx_t* ctx, const stax_dim_t* const* dims) {
  snapshot_t snapshot;
  memset(&snapshot, 0, sizeof(snapshot));
  snapshot.symbol_count = stax_shape_ctx_symbol_count(ctx);
  for (int i = 0; i < SNAPSHOT_DIMS; i++) {
    snapshot.roots[i] = stax_dim_class_root(dims[i]);
    stax_symbol_range(ctx, i, &snapshot.min[i], &snapshot.max[i]);
  }
  return snapshot;
}

static bool same_snapshot(const snapshot_t* a, const snapshot_t* b) {
  if (a->symbol_count != b->symbol_count) return false;
  for (int i = 0; i < SNAPSHOT_DIMS; i++) {
    if (a->roots[i] != b->roots[i] || a->min[i] != b->min[i] || a->max[i] != b->max[i]) {
      return false;
    }
  }
  return true;
}

/* Fails the k-th allocation (or every one from it on) while a checkpoint is logging: each
 * operation must either succeed or fail with OUT_OF_MEMORY and change nothing, and the final
 * rollback must restore the state from before the checkpoint. `prefill` log entries are made
 * first, so that over the runs the log has to grow at every point inside the operations,
 * including between the writes of one operation. Returns the runs in which something failed. */
static int run_checkpoint_faults_once(bool fail_all_after, int prefill) {
  int failed_runs = 0;
  for (uint64_t k = 1;; k++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), 0);
    state.fail_all_after = fail_all_after;
    stax_shape_ctx_t* ctx = NULL;
    CHECK_OK(stax_shape_ctx_create(stax_failing_allocator(&state), &ctx));
    if (!ctx) return failed_runs;
    const stax_dim_t* d[SNAPSHOT_DIMS];
    static const char* const names[SNAPSHOT_DIMS] = {"S0", "S1", "S2", "T", "U", "V", "W", "X"};
    for (int i = 0; i < SNAPSHOT_DIMS; i++) d[i] = symbol(ctx, names[i], 0, 50);
    CHECK_OK(stax_dim_unify(ctx, d[1], NULL, d[2], NULL)); /* S2 -> S1 -> S0 */
    CHECK_OK(stax_dim_unify(ctx, d[0], NULL, d[1], NULL));
    CHECK_OK(stax_dim_unify(ctx, d[3], NULL, d[4], NULL)); /* U -> T */
    /* operands are built before faults start, so only the operations themselves can fail */
    const stax_dim_t* four = stax_dim_const(ctx, 4);
    const stax_dim_t* two_x_plus_one = stax_dim_add_const(ctx, stax_dim_mul_const(ctx, d[7], 2), 1);
    const stax_dim_t* seven = stax_dim_const(ctx, 7);
    const snapshot_t before_checkpoint = take_snapshot(ctx, d);
    stax_shape_checkpoint_t checkpoint = stax_shape_ctx_checkpoint(ctx);
    for (int i = 0; i < prefill; i++) {
      /* harmless entries: a constant's origin, set to what it already is */
      CHECK_OK(stax_shape_set_origin(ctx, (stax_dim_t*)seven, NULL));
    }
    state.fail_at = state.allocation_count + k;

    for (int op = 0; op < 5; op++) {
      const snapshot_t before = take_snapshot(ctx, d);
      const stax_dim_t* out = NULL;
      stax_status_t status = STAX_OK;
      switch (op) {
        case 0: status = stax_dim_unify(ctx, d[2], "a", four, "b"); break;
        case 1: status = stax_symbol_get(ctx, "U", 2, 9, &out); break;
        case 2: status = stax_dim_unify(ctx, d[5], NULL, d[6], "w"); break;
        case 3: status = stax_symbol_fresh(ctx, "nz", 0, 50, "nz", &out); break;
        default: status = stax_dim_unify(ctx, two_x_plus_one, NULL, seven, NULL); break;
      }
      if (status != STAX_OK) {
        CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
        stax_status_free(status);
        const snapshot_t after = take_snapshot(ctx, d);
        CHECK(same_snapshot(&before, &after));
        continue;
      }
      switch (op) {
        case 0:
          CHECK(stax_dim_class_root(d[0]) == four);
          CHECK_EQ_INT(ctx->symbols[0].min, 4);
          CHECK_EQ_INT(ctx->symbols[0].max, 4);
          break;
        case 1:
          CHECK(out == d[4]);
          CHECK_EQ_INT(ctx->symbols[3].min, 2); /* the class's symbol T narrows too */
          CHECK_EQ_INT(ctx->symbols[3].max, 9);
          CHECK_EQ_INT(ctx->symbols[4].max, 9);
          break;
        case 2:
          CHECK(stax_dim_class_root(d[6]) == d[5]);
          break;
        case 3:
          CHECK_EQ_INT(stax_shape_ctx_symbol_count(ctx), before.symbol_count + 1);
          break;
        default:
          CHECK(stax_dim_class_root(d[7]) == stax_dim_const(ctx, 3));
          CHECK_EQ_INT(ctx->symbols[7].min, 3);
          break;
      }
    }
    const bool any_failed = state.failed_count > 0;
    state.fail_at = 0;
    stax_shape_ctx_rollback(ctx, checkpoint);
    const snapshot_t after_rollback = take_snapshot(ctx, d);
    CHECK(same_snapshot(&before_checkpoint, &after_rollback));
    CHECK_EQ_INT(ctx->undo_count, 0);
    /* still usable */
    CHECK_OK(stax_dim_unify(ctx, d[2], NULL, stax_dim_const(ctx, 5), NULL));
    CHECK(stax_dim_resolve(ctx, d[0]) == stax_dim_const(ctx, 5));
    stax_shape_ctx_destroy(ctx);
    CHECK_EQ_INT(state.live_allocations, 0);
    if (!any_failed) break; /* the k-th allocation came after the last operation */
    failed_runs++;
  }
  return failed_runs;
}

static void run_checkpoint_faults(bool fail_all_after) {
  for (int prefill = 0; prefill <= 40; prefill++) {
    /* at least the log's first allocation or its growth, and the fresh symbol's name */
    CHECK(run_checkpoint_faults_once(fail_all_after, prefill) >= 2);
  }
}

/* Random true equations committed first, then random equations for other values (which may
 * contradict them) under a checkpoint: the rollback must bring back exactly the first state. */
static void test_checkpoint_random_rollback(void) {
  static const char* const names[5] = {"A", "B", "C", "D", "E"};
  for (int round = 0; round < 100; round++) {
    stax_shape_ctx_t* ctx = make_ctx();
    const stax_dim_t* d[SNAPSHOT_DIMS];
    int64_t values[5], other[5];
    for (int i = 0; i < 5; i++) {
      d[i] = symbol(ctx, names[i], 0, 6);
      values[i] = random_below(7);
      other[i] = random_below(7);
    }
    for (int k = 0; k < 3; k++) {
      int64_t vf = 0, vg = 0;
      const stax_dim_t* f = random_formula(ctx, d, values, 2, &vf);
      const stax_dim_t* g = random_formula(ctx, d, values, 2, &vg);
      CHECK_OK(stax_dim_unify(ctx, f, NULL, stax_dim_add_const(ctx, g, vf - vg), NULL));
    }
    for (int i = 5; i < SNAPSHOT_DIMS; i++) d[i] = d[i - 5];
    const snapshot_t before = take_snapshot(ctx, d);
    stax_shape_checkpoint_t checkpoint = stax_shape_ctx_checkpoint(ctx);
    for (int k = 0; k < 6; k++) {
      int64_t vf = 0, vg = 0;
      const stax_dim_t* f = random_formula(ctx, d, other, 3, &vf);
      const stax_dim_t* g = random_formula(ctx, d, other, 3, &vg);
      stax_status_t status =
          stax_dim_unify(ctx, f, "f", stax_dim_add_const(ctx, g, vf - vg), "g");
      if (status != STAX_OK) CHECK_EQ_INT(stax_status_code(status), STAX_SHAPE_MISMATCH);
      stax_status_free(status);
    }
    stax_shape_ctx_rollback(ctx, checkpoint);
    const snapshot_t after = take_snapshot(ctx, d);
    CHECK(same_snapshot(&before, &after));
    for (int i = 0; i < 5; i++) {
      int64_t value = -1;
      CHECK_OK(stax_dim_eval(ctx, stax_dim_resolve(ctx, d[i]), values, &value));
      CHECK_EQ_INT(value, values[i]);
    }
    stax_shape_ctx_destroy(ctx);
  }
}

static void test_checkpoint_fail_one_allocation(void) { run_checkpoint_faults(false); }
static void test_checkpoint_fail_all_after(void) { run_checkpoint_faults(true); }

STAX_TEST_MAIN(STAX_TEST(test_constant_contradiction),
               STAX_TEST(test_known_constant_contradiction), STAX_TEST(test_pin_out_of_range),
               STAX_TEST(test_pin_to_zero), STAX_TEST(test_linear_pins),
               STAX_TEST(test_range_contradiction_and_narrowing),
               STAX_TEST(test_symbol_get_ranges), STAX_TEST(test_transitive_equality),
               STAX_TEST(test_resolve_prefers_simple), STAX_TEST(test_unify_errors),
               STAX_TEST(test_min_max_through_classes), STAX_TEST(test_random_true_equations),
               STAX_TEST(test_checkpoint_rollback),
               STAX_TEST(test_checkpoint_undoes_path_compression),
               STAX_TEST(test_checkpoint_nesting), STAX_TEST(test_checkpoint_drops_new_symbols),
               STAX_TEST(test_checkpoint_random_rollback),
               STAX_TEST(test_checkpoint_fail_one_allocation),
               STAX_TEST(test_checkpoint_fail_all_after))
