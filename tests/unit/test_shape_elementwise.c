/* Shape inference for elementwise ops: broadcasting (constant and symbolic dims, unification),
 * dtype rules, attributes, optional outputs and symbolic contents of shape arithmetic. */
#include "ir/graph_internal.h"
#include "shape_test_util.h"

#define F32 STAX_DTYPE_FLOAT32
#define I64 STAX_DTYPE_INT64
#define BOOL_T STAX_DTYPE_BOOL

static void test_broadcast_symbolic(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,1,3");
  stax_value_id_t y = shape_test_input(g, "y", F32, "S,1");
  stax_value_id_t in[2] = {x, y}, out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "add", 2, in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, S, 3]");
  /* scalar with a matrix */
  stax_value_id_t s = shape_test_input(g, "s", F32, "");
  stax_value_id_t in2[2] = {s, x};
  CHECK_OK(shape_test_node(g, STAX_OP_Mul, "mul", 2, in2, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, 1, 3]");
  stax_value_id_t in3[2] = {s, s};
  CHECK_OK(shape_test_node(g, STAX_OP_Sub, "sub", 2, in3, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[]");
  stax_graph_destroy(g);
}

static void test_broadcast_mismatch(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t a = shape_test_input(g, "a", F32, "2,3");
  stax_value_id_t b = shape_test_input(g, "b", F32, "4");
  stax_value_id_t in[2] = {a, b};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Add, "add", 2, in, 0, NULL, 1, NULL), STAX_SHAPE_MISMATCH,
              "Add node 'add': cannot broadcast input 0 'a' dim 1 (3) with input 1 'b' dim 0 (4)");
  CHECK_EQ_INT(stax_graph_node_count(g), 0);
  stax_graph_destroy(g);
}

/* A symbol against a constant is unified with it; a later contradiction is an error. */
static void test_broadcast_unifies_symbols(void) {
  stax_graph_t* g = shape_test_graph();
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  stax_value_id_t a = shape_test_input(g, "a", F32, "S");
  stax_value_id_t b = shape_test_input(g, "b", F32, "4");
  stax_value_id_t c = shape_test_input(g, "c", F32, "5");
  stax_value_id_t t = shape_test_input(g, "t", F32, "T");
  stax_value_id_t u = shape_test_input(g, "u", F32, "U");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t ab[2] = {a, b};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "ab", 2, ab, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[4]");
  CHECK(stax_dim_known_equal(ctx, shape_test_dim(g, "S"), stax_dim_const(ctx, 4)));
  stax_value_id_t ac[2] = {a, c};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Add, "ac", 2, ac, 0, NULL, 1, NULL), STAX_SHAPE_MISMATCH,
              "input 0 'a' dim 0 (4) with input 1 'c' dim 0 (5)");
  /* two symbols that may be 1 broadcast (bcast(T, U)); nothing is unified */
  stax_value_id_t tu[2] = {t, u};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "tu", 2, tu, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[bcast(T, U)]");
  CHECK(!stax_dim_known_equal(ctx, shape_test_dim(g, "T"), shape_test_dim(g, "U")));
  stax_value_id_t tc[2] = {t, c};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "tc", 2, tc, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[5]");
  /* T is 5 now: the earlier broadcast resolves to bcast(5, U), and U against a (S = 4) pins
   * U = 4, which contradicts it */
  stax_value_id_t ua[2] = {u, a};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "ua", 2, ua, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[4]");
  stax_graph_destroy(g);
}

/* Symbolic dims that may be 1 broadcast into bcast(N, M) (docs/ir.md, "Broadcasting"). */
static void test_broadcast_symbolic_dims(void) {
  stax_graph_t* g = shape_test_graph();
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  stax_value_id_t n = shape_test_input(g, "n", F32, "N");
  stax_value_id_t m = shape_test_input(g, "m", F32, "M");
  stax_value_id_t one = shape_test_input(g, "one", F32, "1");
  stax_value_id_t nk = shape_test_input(g, "nk", F32, "N,1,K");
  stax_value_id_t mk = shape_test_input(g, "mk", F32, "1,M,K");
  stax_value_id_t out = STAX_VALUE_NONE, out2 = STAX_VALUE_NONE;
  stax_value_id_t nm[2] = {n, m};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "add0", 2, nm, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[bcast(N, M)]");
  /* the same pair in the other order is the same dim */
  stax_value_id_t mn[2] = {m, n};
  CHECK_OK(shape_test_node(g, STAX_OP_Mul, "mul0", 2, mn, 0, NULL, 1, &out2));
  CHECK(stax_value_dims(g, out)[0] == stax_value_dims(g, out2)[0]);
  /* [N] with [1] is N; [N] with [N] is N */
  stax_value_id_t n1[2] = {n, one};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "n1", 2, n1, 0, NULL, 1, &out2));
  CHECK_VALUE(g, out2, F32, "[N]");
  stax_value_id_t nn[2] = {n, n};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "nn", 2, nn, 0, NULL, 1, &out2));
  CHECK_VALUE(g, out2, F32, "[N]");
  /* the broadcast with N again is the broadcast (N is 1 or its value) */
  stax_value_id_t again[2] = {out, n};
  CHECK_OK(shape_test_node(g, STAX_OP_Sub, "again", 2, again, 0, NULL, 1, &out2));
  CHECK_VALUE(g, out2, F32, "[bcast(N, M)]");
  /* 3-D: a[N, 1, K] + b[1, M, K] */
  stax_value_id_t grid[2] = {nk, mk};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "grid", 2, grid, 0, NULL, 1, &out2));
  CHECK_VALUE(g, out2, F32, "[N, M, K]");
  /* three operands (Where): the condition's dim joins the broadcast */
  stax_value_id_t p = shape_test_input(g, "p", BOOL_T, "P");
  stax_value_id_t where[3] = {p, n, m};
  CHECK_OK(shape_test_node(g, STAX_OP_Where, "where", 3, where, 0, NULL, 1, &out2));
  CHECK_VALUE(g, out2, F32, "[bcast(N, M, P)]");
  CHECK(!stax_dim_known_equal(ctx, shape_test_dim(g, "N"), shape_test_dim(g, "M")));
  stax_graph_destroy(g);
}

/* Two dims that both cannot be 1 must be equal: unified, as before; and an equality a later
 * node needs between a broadcast and another dim falls back to unifying the operands. */
static void test_broadcast_symbolic_unified(void) {
  stax_graph_t* g = shape_test_graph();
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  stax_value_id_t p = shape_test_input(g, "p", F32, "P>=2");
  stax_value_id_t q = shape_test_input(g, "q", F32, "Q>=2");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t pq[2] = {p, q};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "pq", 2, pq, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[P]");
  CHECK(stax_dim_known_equal(ctx, shape_test_dim(g, "P"), shape_test_dim(g, "Q")));
  /* one of them >= 2 is still a broadcast: the other may be 1 */
  stax_value_id_t n = shape_test_input(g, "n", F32, "N");
  stax_value_id_t pn[2] = {p, n};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "pn", 2, pn, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[bcast(P, N)]");
  /* Concat along axis 1 of [bcast(N, M), 1] and [N, 1]: axis 0 must be equal, so N == M */
  stax_value_id_t a = shape_test_input(g, "a", F32, "N,1");
  stax_value_id_t b = shape_test_input(g, "b", F32, "M,1");
  stax_value_id_t ab[2] = {a, b}, sum = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "ab", 2, ab, 0, NULL, 1, &sum));
  CHECK_VALUE(g, sum, F32, "[bcast(N, M), 1]");
  CHECK(!stax_dim_known_equal(ctx, shape_test_dim(g, "N"), shape_test_dim(g, "M")));
  stax_attr_t axis = stax_attr_int("axis", 1);
  stax_value_id_t cat[2] = {sum, a};
  CHECK_OK(shape_test_node(g, STAX_OP_Concat, "cat", 2, cat, 1, &axis, 1, &out));
  CHECK_VALUE(g, out, F32, "[N, 2]");
  CHECK(stax_dim_known_equal(ctx, shape_test_dim(g, "N"), shape_test_dim(g, "M")));
  stax_graph_destroy(g);
}

/* A node rejected for a constant conflict in one axis records no equality for the others. */
static void test_rejected_node_records_nothing(void) {
  stax_graph_t* g = shape_test_graph();
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  stax_value_id_t a = shape_test_input(g, "a", F32, "S,3");
  stax_value_id_t b = shape_test_input(g, "b", F32, "4,5");
  stax_value_id_t t = shape_test_input(g, "t", F32, "T");
  stax_value_id_t four = shape_test_input(g, "four", F32, "4");
  stax_value_id_t five = shape_test_input(g, "five", F32, "5");
  stax_value_id_t ab[2] = {a, b};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Add, "add", 2, ab, 0, NULL, 1, NULL), STAX_SHAPE_MISMATCH,
              "input 0 'a' dim 1 (3) with input 1 'b' dim 1 (5)");
  CHECK(!stax_dim_known_equal(ctx, shape_test_dim(g, "S"), stax_dim_const(ctx, 4)));
  stax_value_id_t t45[3] = {t, four, five};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Sum, "sum", 3, t45, 0, NULL, 1, NULL), STAX_SHAPE_MISMATCH,
              "input 1 'four' dim 0 (4) with input 2 'five' dim 0 (5)");
  CHECK(!stax_dim_known_equal(ctx, shape_test_dim(g, "T"), stax_dim_const(ctx, 4)));
  stax_graph_destroy(g);
}

static void test_too_many_inputs(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "2");
  stax_value_id_t in[65];
  for (int k = 0; k < 65; k++) in[k] = x;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Max, "max", 65, in, 0, NULL, 1, NULL), STAX_UNIMPLEMENTED,
              "65 inputs; at most 64 are supported");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_Max, "max64", 64, in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[2]");
  stax_value_id_t missing[2] = {x, STAX_VALUE_NONE};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Add, "add", 2, missing, 0, NULL, 1, NULL),
              STAX_INVALID_ARGUMENT, "Add node 'add': input 1 is required");
  stax_graph_destroy(g);
}

/* A symbol whose range pins it to 1 broadcasts like the constant 1. */
static void test_broadcast_symbol_of_one(void) {
  stax_graph_t* g = shape_test_graph();
  const stax_dim_t* one = NULL;
  CHECK_OK(stax_symbol_get(stax_graph_shape_ctx(g), "One", 1, 1, &one));
  const stax_dim_t* dims[1] = {one};
  stax_value_id_t a = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(g, "a", F32, 1, dims, &a));
  stax_value_id_t b = shape_test_input(g, "b", F32, "7");
  stax_value_id_t in[2] = {a, b}, out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "add", 2, in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[7]");
  stax_graph_destroy(g);
}

static void test_binary_dtypes(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "2");
  stax_value_id_t i = shape_test_input(g, "i", I64, "2");
  stax_value_id_t flag = shape_test_input(g, "flag", BOOL_T, "2");
  stax_value_id_t u8 = shape_test_input(g, "u8", STAX_DTYPE_UINT8, "2");
  stax_value_id_t i32 = shape_test_input(g, "i32", STAX_DTYPE_INT32, "2");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t xi[2] = {x, i};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Add, "add", 2, xi, 0, NULL, 1, NULL), STAX_DTYPE_MISMATCH,
              "input 0 'x' has dtype float32 but input 1 'i' has dtype int64");
  stax_value_id_t bb[2] = {flag, flag};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Mul, "mul", 2, bb, 0, NULL, 1, NULL), STAX_DTYPE_MISMATCH,
              "input 0 'flag' has dtype bool, expected a number");
  /* Pow lets the exponent's type differ */
  CHECK_OK(shape_test_node(g, STAX_OP_Pow, "pow", 2, xi, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[2]");
  /* Mod: floats take fmod 0 (opset 28) or 1 */
  stax_value_id_t xx[2] = {x, x};
  CHECK_OK(shape_test_node(g, STAX_OP_Mod, "mod", 2, xx, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[2]");
  stax_attr_t fmod = stax_attr_int("fmod", 1);
  CHECK_OK(shape_test_node(g, STAX_OP_Mod, "mod", 2, xx, 1, &fmod, 1, &out));
  stax_attr_t bad_fmod = stax_attr_int("fmod", 3);
  stax_value_id_t ii[2] = {i, i};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Mod, "mod2", 2, ii, 1, &bad_fmod, 1, NULL),
              STAX_INVALID_ARGUMENT, "'fmod' must be 0 or 1, got 3");
  /* BitShift: integers (signed since opset 28), direction required */
  stax_attr_t left = stax_attr_string("direction", "LEFT");
  stax_attr_t up = stax_attr_string("direction", "UP");
  stax_value_id_t uu[2] = {u8, u8}, i32s[2] = {i32, i32};
  CHECK_OK(shape_test_node(g, STAX_OP_BitShift, "shift", 2, uu, 1, &left, 1, &out));
  CHECK_VALUE(g, out, STAX_DTYPE_UINT8, "[2]");
  CHECK_OK(shape_test_node(g, STAX_OP_BitShift, "shift2", 2, i32s, 1, &left, 1, &out));
  CHECK_VALUE(g, out, STAX_DTYPE_INT32, "[2]");
  CHECK_ERROR(shape_test_node(g, STAX_OP_BitShift, "shift2f", 2, xx, 1, &left, 1, NULL),
              STAX_DTYPE_MISMATCH, "expected an integer type");
  CHECK_ERROR(shape_test_node(g, STAX_OP_BitShift, "shift3", 2, uu, 1, &up, 1, NULL),
              STAX_INVALID_ARGUMENT, "\"LEFT\" or \"RIGHT\", got \"UP\"");
  CHECK_ERROR(shape_test_node(g, STAX_OP_BitShift, "shift4", 2, uu, 0, NULL, 1, NULL),
              STAX_INVALID_ARGUMENT, "got none");
  stax_graph_destroy(g);
}

static void test_prelu(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,4,H");
  stax_value_id_t slope = shape_test_input(g, "slope", F32, "4,1");
  stax_value_id_t wrong = shape_test_input(g, "wrong", F32, "3,1");
  stax_value_id_t big = shape_test_input(g, "big", F32, "1,1,1,1");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t ok_in[2] = {x, slope};
  CHECK_OK(shape_test_node(g, STAX_OP_PRelu, "prelu", 2, ok_in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, 4, H]");
  stax_value_id_t bad_in[2] = {x, wrong};
  CHECK_ERROR(shape_test_node(g, STAX_OP_PRelu, "prelu2", 2, bad_in, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH,
              "cannot broadcast input 1 'wrong' dim 0 (3) to input 0 'x' dim 1 (4)");
  stax_value_id_t big_in[2] = {x, big};
  CHECK_ERROR(shape_test_node(g, STAX_OP_PRelu, "prelu3", 2, big_in, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 1 'big' has rank 4 and cannot broadcast");
  stax_graph_destroy(g);
}

static void test_compare_and_logic(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,1");
  stax_value_id_t y = shape_test_input(g, "y", F32, "5");
  stax_value_id_t p = shape_test_input(g, "p", BOOL_T, "B,1");
  stax_value_id_t q = shape_test_input(g, "q", BOOL_T, "1,5");
  stax_value_id_t i = shape_test_input(g, "i", I64, "5");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t xy[2] = {x, y}, pq[2] = {p, q}, xp[2] = {x, p}, xi[2] = {x, i};
  CHECK_OK(shape_test_node(g, STAX_OP_Less, "less", 2, xy, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, BOOL_T, "[B, 5]");
  CHECK_OK(shape_test_node(g, STAX_OP_And, "and", 2, pq, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, BOOL_T, "[B, 5]");
  CHECK_OK(shape_test_node(g, STAX_OP_Equal, "eq", 2, pq, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, BOOL_T, "[B, 5]");
  CHECK_ERROR(shape_test_node(g, STAX_OP_And, "and2", 2, xy, 0, NULL, 1, NULL), STAX_DTYPE_MISMATCH,
              "And node 'and2': input 0 'x' has dtype float32, expected bool");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Xor, "xor", 2, xp, 0, NULL, 1, NULL), STAX_DTYPE_MISMATCH,
              "expected bool");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Greater, "gt", 2, pq, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "expected a number");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Equal, "eq2", 2, xi, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 1 'i' has dtype int64");
  stax_graph_destroy(g);
}

static void test_variadic_and_where(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t a = shape_test_input(g, "a", F32, "B,1");
  stax_value_id_t b = shape_test_input(g, "b", F32, "1,C");
  stax_value_id_t c = shape_test_input(g, "c", F32, "C");
  stax_value_id_t i = shape_test_input(g, "i", I64, "C");
  stax_value_id_t cond = shape_test_input(g, "cond", BOOL_T, "B,1");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t abc[3] = {a, b, c};
  CHECK_OK(shape_test_node(g, STAX_OP_Max, "max", 3, abc, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, C]");
  CHECK_OK(shape_test_node(g, STAX_OP_Mean, "mean", 1, abc, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, 1]");
  stax_value_id_t ii[2] = {i, i};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Sum, "sum", 2, ii, 0, NULL, 1, NULL), STAX_DTYPE_MISMATCH,
              "expected a floating-point type");
  CHECK_OK(shape_test_node(g, STAX_OP_Min, "min", 2, ii, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, I64, "[C]");
  stax_value_id_t ai[2] = {a, i};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Max, "max2", 2, ai, 0, NULL, 1, NULL), STAX_DTYPE_MISMATCH,
              "input 0 'a' has dtype float32 but input 1 'i'");
  stax_value_id_t where_in[3] = {cond, b, c};
  CHECK_OK(shape_test_node(g, STAX_OP_Where, "where", 3, where_in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, C]");
  stax_value_id_t bad_cond[3] = {a, b, c};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Where, "where2", 3, bad_cond, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 0 'a' has dtype float32, expected bool");
  stax_value_id_t mixed[3] = {cond, b, i};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Where, "where3", 3, mixed, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 1 'b' has dtype float32 but input 2 'i'");
  stax_graph_destroy(g);
}

static void test_unary(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,3");
  stax_value_id_t i = shape_test_input(g, "i", I64, "B");
  stax_value_id_t u = shape_test_input(g, "u", STAX_DTYPE_UINT8, "B");
  stax_value_id_t p = shape_test_input(g, "p", BOOL_T, "2");
  stax_value_id_t lo = shape_test_input(g, "lo", F32, "");
  stax_value_id_t vec = shape_test_input(g, "vec", F32, "2");
  stax_value_id_t ilo = shape_test_input(g, "ilo", I64, "");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_Relu, "relu", 1, &x, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, 3]");
  CHECK_OK(shape_test_node(g, STAX_OP_Relu, "relu_int", 1, &i, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, I64, "[B]");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Relu, "relu_u8", 1, &u, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH,
              "input 0 'u' has dtype uint8, expected a floating-point or "
              "signed integer type");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Exp, "exp", 1, &i, 0, NULL, 1, NULL), STAX_DTYPE_MISMATCH,
              "expected a floating-point type");
  CHECK_OK(shape_test_node(g, STAX_OP_Abs, "abs", 1, &u, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, STAX_DTYPE_UINT8, "[B]");
  CHECK_OK(shape_test_node(g, STAX_OP_Not, "not", 1, &p, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, BOOL_T, "[2]");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Not, "not2", 1, &x, 0, NULL, 1, NULL), STAX_DTYPE_MISMATCH,
              "expected bool");
  CHECK_OK(shape_test_node(g, STAX_OP_Identity, "id", 1, &p, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, BOOL_T, "[2]");
  stax_attr_t tanh_mode = stax_attr_string("approximate", "tanh");
  stax_attr_t bogus = stax_attr_string("approximate", "bogus");
  CHECK_OK(shape_test_node(g, STAX_OP_Gelu, "gelu", 1, &x, 1, &tanh_mode, 1, &out));
  CHECK_ERROR(shape_test_node(g, STAX_OP_Gelu, "gelu2", 1, &x, 1, &bogus, 1, NULL),
              STAX_INVALID_ARGUMENT, "\"none\" or \"tanh\", got \"bogus\"");
  stax_attr_t zero_alpha = stax_attr_float("alpha", 0.0f);
  CHECK_ERROR(shape_test_node(g, STAX_OP_Celu, "celu", 1, &x, 1, &zero_alpha, 1, NULL),
              STAX_INVALID_ARGUMENT, "'alpha' must not be 0");
  /* Clip bounds: optional scalars of the input dtype */
  stax_value_id_t clip_ok[3] = {x, STAX_VALUE_NONE, lo};
  CHECK_OK(shape_test_node(g, STAX_OP_Clip, "clip", 3, clip_ok, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, 3]");
  stax_value_id_t clip_vec[2] = {x, vec};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Clip, "clip2", 2, clip_vec, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 1 'vec' (min) must be a scalar, got rank 1");
  stax_value_id_t clip_int[2] = {x, ilo};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Clip, "clip3", 2, clip_int, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 1 'ilo' has dtype int64");
  stax_graph_destroy(g);
}

static void test_predicates_and_casts(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,3");
  stax_value_id_t i = shape_test_input(g, "i", I64, "B");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_IsNaN, "nan", 1, &x, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, BOOL_T, "[B, 3]");
  CHECK_ERROR(shape_test_node(g, STAX_OP_IsNaN, "nan2", 1, &i, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "expected a floating-point type");
  stax_attr_t detect = stax_attr_int("detect_negative", 2);
  CHECK_ERROR(shape_test_node(g, STAX_OP_IsInf, "inf", 1, &x, 1, &detect, 1, NULL),
              STAX_INVALID_ARGUMENT, "'detect_negative' must be 0 or 1, got 2");
  stax_attr_t to_int64 = stax_attr_int("to", 7);
  CHECK_OK(shape_test_node(g, STAX_OP_Cast, "cast", 1, &x, 1, &to_int64, 1, &out));
  CHECK_VALUE(g, out, I64, "[B, 3]");
  stax_attr_t to_string = stax_attr_int("to", 8);
  CHECK_ERROR(shape_test_node(g, STAX_OP_Cast, "cast2", 1, &x, 1, &to_string, 1, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'to' = 8 is not a supported dtype");
  stax_attr_t to_huge = stax_attr_int("to", (int64_t)1 << 40);
  CHECK_ERROR(shape_test_node(g, STAX_OP_Cast, "cast4", 1, &x, 1, &to_huge, 1, NULL),
              STAX_INVALID_ARGUMENT, "is not a supported dtype");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Cast, "cast3", 1, &x, 0, NULL, 1, NULL),
              STAX_INVALID_ARGUMENT, "Cast node 'cast3': attribute 'to' is required");
  stax_value_id_t like[2] = {x, i};
  CHECK_OK(shape_test_node(g, STAX_OP_CastLike, "like", 2, like, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, I64, "[B, 3]");
  stax_graph_destroy(g);
}

static void test_dropout(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S");
  stax_value_id_t i = shape_test_input(g, "i", I64, "B");
  stax_value_id_t half = shape_test_float_scalar(g, "half", 0.5f);
  stax_value_id_t too_big = shape_test_float_scalar(g, "too_big", 1.5f);
  stax_value_id_t training = shape_test_input(g, "training", BOOL_T, "");
  stax_value_id_t outs[2] = {STAX_VALUE_NONE, STAX_VALUE_NONE};
  stax_value_id_t in[3] = {x, half, training};
  CHECK_OK(shape_test_node(g, STAX_OP_Dropout, "drop", 3, in, 0, NULL, 2, outs));
  CHECK_VALUE(g, outs[0], F32, "[B, S]");
  CHECK_VALUE(g, outs[1], BOOL_T, "[B, S]");
  CHECK_OK(shape_test_node(g, STAX_OP_Dropout, "drop1", 1, in, 0, NULL, 1, outs));
  CHECK_VALUE(g, outs[0], F32, "[B, S]");
  stax_value_id_t bad_ratio[2] = {x, too_big};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Dropout, "drop2", 2, bad_ratio, 0, NULL, 1, NULL),
              STAX_INVALID_ARGUMENT, "input 1 'too_big' (ratio) must be in [0, 1), got 1.5");
  stax_value_id_t int_ratio[2] = {x, i};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Dropout, "drop3", 2, int_ratio, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 1 'i' has dtype int64");
  stax_value_id_t bad_training[3] = {x, half, half};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Dropout, "drop4", 3, bad_training, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 2 'half' has dtype float32, expected bool");
  stax_value_id_t vector = shape_test_input(g, "vector", F32, "2");
  stax_value_id_t vector_ratio[2] = {x, vector};
  CHECK_ERROR(shape_test_node(g, STAX_OP_Dropout, "drop6", 2, vector_ratio, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 1 'vector' has rank 1, expected 0");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Dropout, "drop5", 1, &i, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "expected a floating-point type");
  stax_graph_destroy(g);
}

/* Symbolic contents: integer arithmetic on shape vectors stays symbolic. */
static void test_content_propagation(void) {
  stax_graph_t* g = shape_test_graph();
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  const stax_dim_t* b = shape_test_dim(g, "B");
  const stax_dim_t* s = shape_test_dim(g, "S");
  /* Stand-in for Shape(x): an int64 [2] input whose contents are [B, S]. */
  stax_value_id_t shape = shape_test_input(g, "shape", I64, "2");
  static const stax_dim_t* shape_content[2];
  shape_content[0] = b;
  shape_content[1] = s;
  stax_graph_value(g, shape)->content = shape_content;
  stax_graph_value(g, shape)->content_count = 2;
  int64_t two_value = 2, pair[2] = {3, 4};
  stax_value_id_t two = shape_test_scalar(g, "two", two_value);
  stax_value_id_t constant_pair = shape_test_ints(g, "pair", 2, pair);
  stax_value_id_t out = STAX_VALUE_NONE;

  stax_value_id_t mul_in[2] = {shape, two};
  CHECK_OK(shape_test_node(g, STAX_OP_Mul, "mul", 2, mul_in, 0, NULL, 1, &out));
  const stax_value_t* product = stax_graph_value(g, out);
  CHECK_EQ_INT(product->content_count, 2);
  if (product->content_count == 2) {
    CHECK(product->content[0] == stax_dim_mul_const(ctx, b, 2));
    CHECK(product->content[1] == stax_dim_mul_const(ctx, s, 2));
  }
  stax_value_id_t div_in[2] = {out, two};
  CHECK_OK(shape_test_node(g, STAX_OP_Div, "div", 2, div_in, 0, NULL, 1, &out));
  const stax_value_t* quotient = stax_graph_value(g, out);
  CHECK_EQ_INT(quotient->content_count, 2);
  if (quotient->content_count == 2) {
    CHECK(quotient->content[0] == b);
    CHECK(quotient->content[1] == s);
  }
  stax_value_id_t add_in[2] = {shape, constant_pair};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "add", 2, add_in, 0, NULL, 1, &out));
  const stax_value_t* sum = stax_graph_value(g, out);
  CHECK_EQ_INT(sum->content_count, 2);
  if (sum->content_count == 2) {
    CHECK(sum->content[0] == stax_dim_add_const(ctx, b, 3));
    CHECK(sum->content[1] == stax_dim_add_const(ctx, s, 4));
  }
  CHECK_OK(shape_test_node(g, STAX_OP_Neg, "neg", 1, &shape, 0, NULL, 1, &out));
  const stax_value_t* negated = stax_graph_value(g, out);
  CHECK_EQ_INT(negated->content_count, 2);
  if (negated->content_count == 2) CHECK(negated->content[0] == stax_dim_mul_const(ctx, b, -1));
  stax_value_id_t max_in[2] = {shape, constant_pair};
  CHECK_OK(shape_test_node(g, STAX_OP_Max, "max", 2, max_in, 0, NULL, 1, &out));
  CHECK_EQ_INT(stax_graph_value(g, out)->content_count, 2);
  stax_attr_t to_int32 = stax_attr_int("to", 6);
  CHECK_OK(shape_test_node(g, STAX_OP_Cast, "cast", 1, &shape, 1, &to_int32, 1, &out));
  const stax_value_t* cast = stax_graph_value(g, out);
  CHECK_EQ_INT(cast->content_count, 2);
  if (cast->content_count == 2) CHECK(cast->content[1] == s);
  stax_attr_t to_float = stax_attr_int("to", 1);
  CHECK_OK(shape_test_node(g, STAX_OP_Cast, "cast_f", 1, &shape, 1, &to_float, 1, &out));
  CHECK_EQ_INT(stax_graph_value(g, out)->content_count, -1);
  CHECK_OK(shape_test_node(g, STAX_OP_Identity, "id", 1, &constant_pair, 0, NULL, 1, &out));
  CHECK(stax_value_constant(g, out) == stax_value_constant(g, constant_pair));
  /* an empty vector against a scalar stays empty */
  stax_value_id_t empty = shape_test_ints(g, "empty", 0, NULL);
  stax_value_id_t empty_in[2] = {empty, two};
  CHECK_OK(shape_test_node(g, STAX_OP_Add, "add_empty", 2, empty_in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, I64, "[0]");
  CHECK_EQ_INT(stax_graph_value(g, out)->content_count, 0);
  /* Division by a non-constant leaves the contents unknown but is not an error. */
  stax_value_id_t by_shape[2] = {constant_pair, shape};
  CHECK_OK(shape_test_node(g, STAX_OP_Div, "div2", 2, by_shape, 0, NULL, 1, &out));
  CHECK_EQ_INT(stax_graph_value(g, out)->content_count, -1);
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_broadcast_symbolic), STAX_TEST(test_broadcast_mismatch),
               STAX_TEST(test_broadcast_unifies_symbols), STAX_TEST(test_broadcast_symbolic_dims),
               STAX_TEST(test_broadcast_symbolic_unified),
               STAX_TEST(test_broadcast_symbol_of_one),
               STAX_TEST(test_rejected_node_records_nothing), STAX_TEST(test_too_many_inputs),
               STAX_TEST(test_binary_dtypes), STAX_TEST(test_prelu),
               STAX_TEST(test_compare_and_logic), STAX_TEST(test_variadic_and_where),
               STAX_TEST(test_unary), STAX_TEST(test_predicates_and_casts),
               STAX_TEST(test_dropout), STAX_TEST(test_content_propagation))
