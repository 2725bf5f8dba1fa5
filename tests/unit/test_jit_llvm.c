/* Tests for the LLVM JIT backend (src/jit/llvm_*.c, jit.c) with elementwise lowering
 * (lower_elementwise.c, lower_ops.c): random elementwise chains with numpy broadcasting over
 * many concrete shapes (rank 0..4, odd sizes, tails), every fusible unary op on special values,
 * compares / Where / Cast / integer and bool ops, strided and reversed views, the thread pool,
 * other vector widths; the vectorized float32 math against libm; kernels built from kernel IR
 * by hand; compile-failure injection; not-fusible and malformed groups; run-time checks;
 * kernel texts; releasing many kernels. References are the generic kernels. Row kernels and
 * matmul are in test_jit_fused.c. */
#include <float.h>
#include <pthread.h>
#include <stdlib.h>

#include "jit/kernel_ir.h"
#include "test_jit_util.h"

/* float32 results agree with the double-precision reference to a few ulp; transcendental ops
 * to the documented approximation error. */
#define F32_ATOL 2e-6
#define F32_RTOL 2e-5

typedef struct op_case_t {
  stax_op_t op;
  int32_t attr_count;
  stax_node_attr_t attrs[2];
  double low, high; /* input range where the op is defined */
} op_case_t;

static const op_case_t unary_cases[] = {
    {STAX_OP_Relu, 0, {{0}}, -3, 3},        {STAX_OP_LeakyRelu, 0, {{0}}, -3, 3},
    {STAX_OP_Elu, 0, {{0}}, -3, 3},         {STAX_OP_Selu, 0, {{0}}, -3, 3},
    {STAX_OP_Celu, 0, {{0}}, -3, 3},        {STAX_OP_ThresholdedRelu, 0, {{0}}, -3, 3},
    {STAX_OP_Gelu, 0, {{0}}, -6, 6},        {STAX_OP_Sigmoid, 0, {{0}}, -20, 20},
    {STAX_OP_HardSigmoid, 0, {{0}}, -5, 5}, {STAX_OP_HardSwish, 0, {{0}}, -5, 5},
    {STAX_OP_Softsign, 0, {{0}}, -5, 5},    {STAX_OP_Softplus, 0, {{0}}, -20, 20},
    {STAX_OP_Shrink, 0, {{0}}, -3, 3},      {STAX_OP_Tanh, 0, {{0}}, -10, 10},
    {STAX_OP_Exp, 0, {{0}}, -80, 80},       {STAX_OP_Log, 0, {{0}}, 1e-6, 1e6},
    {STAX_OP_Sqrt, 0, {{0}}, 0, 100},       {STAX_OP_Reciprocal, 0, {{0}}, 0.5, 3},
    {STAX_OP_Neg, 0, {{0}}, -3, 3},         {STAX_OP_Abs, 0, {{0}}, -3, 3},
    {STAX_OP_Erf, 0, {{0}}, -4, 4},         {STAX_OP_Sin, 0, {{0}}, -6, 6},
    {STAX_OP_Cos, 0, {{0}}, -6, 6},         {STAX_OP_Atan, 0, {{0}}, -6, 6},
    {STAX_OP_Sinh, 0, {{0}}, -4, 4},        {STAX_OP_Asinh, 0, {{0}}, -4, 4},
    {STAX_OP_Floor, 0, {{0}}, -3, 3},       {STAX_OP_Ceil, 0, {{0}}, -3, 3},
    {STAX_OP_Round, 0, {{0}}, -3, 3},       {STAX_OP_Sign, 0, {{0}}, -3, 3},
};

static void set_attrs(op_case_t* c) {
  switch (c->op) {
    case STAX_OP_LeakyRelu:
      c->attrs[0] = tg_attr_float("alpha", 0.2f);
      c->attr_count = 1;
      break;
    case STAX_OP_Elu:
      c->attrs[0] = tg_attr_float("alpha", 0.7f);
      c->attr_count = 1;
      break;
    case STAX_OP_Celu:
      c->attrs[0] = tg_attr_float("alpha", 1.5f);
      c->attr_count = 1;
      break;
    case STAX_OP_ThresholdedRelu:
      c->attrs[0] = tg_attr_float("alpha", 0.5f);
      c->attr_count = 1;
      break;
    case STAX_OP_Shrink:
      c->attrs[0] = tg_attr_float("bias", 0.25f);
      c->attrs[1] = tg_attr_float("lambd", 1.0f);
      c->attr_count = 2;
      break;
    default: break;
  }
}

/* ---- every unary op, float32 and float64, on a long odd-sized vector --------------------- */

static void test_unary_ops(void) {
  size_t case_count = sizeof(unary_cases) / sizeof(unary_cases[0]);
  for (size_t i = 0; i < case_count; i++) {
    for (int32_t wide = 0; wide < 2; wide++) {
      op_case_t c = unary_cases[i];
      set_attrs(&c);
      stax_dtype_t dtype = wide ? STAX_DTYPE_FLOAT64 : STAX_DTYPE_FLOAT32;
      test_group_t tg;
      tg_init(&tg);
      int64_t dims[1] = {1003};
      int32_t x = tg_input_layout(&tg, "x", dtype, 1, dims, 0, c.low, c.high);
      int32_t y = tg_node(&tg, c.op, 1, &x, dtype, 1, dims, c.attr_count, c.attrs);
      tg_output(&tg, y);
      double atol = wide ? 1e-12 : F32_ATOL, rtol = wide ? 1e-12 : F32_RTOL;
      if (c.op == STAX_OP_Exp) rtol = wide ? 1e-12 : 3e-6; /* values up to e^80 */
      char name[64];
      snprintf(name, sizeof(name), "%s_%s", stax_op_name(c.op), stax_dtype_name(dtype));
      CHECK_EQ_INT(tg_check(&tg, name, NULL, NULL, atol, rtol), STAX_OK_CODE);
      tg_free(&tg);
    }
  }
}

/* Special values through every float32 unary op: NaN, infinities, zeros, extremes. */
static void test_unary_special_values(void) {
  static const float specials[] = {NAN,     INFINITY, -INFINITY, 0.0f,     -0.0f, 1e-40f,
                                   -1e-40f, FLT_MIN,  FLT_MAX,   -FLT_MAX, 88.7f, -88.7f,
                                   100.0f,  -100.0f,  0.5f,      -0.5f,    1.0f,  -1.0f,
                                   1e-7f,   -1e-7f,   9.5f,      -9.5f,    3.0f};
  size_t special_count = sizeof(specials) / sizeof(specials[0]);
  size_t case_count = sizeof(unary_cases) / sizeof(unary_cases[0]);
  for (size_t i = 0; i < case_count; i++) {
    op_case_t c = unary_cases[i];
    set_attrs(&c);
    test_group_t tg;
    tg_init(&tg);
    int64_t dims[1] = {(int64_t)special_count};
    int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 1, dims);
    memcpy(stax_tensor_data(tg.tensors[x]), specials, sizeof(specials));
    int32_t y = tg_node(&tg, c.op, 1, &x, STAX_DTYPE_FLOAT32, 1, dims, c.attr_count, c.attrs);
    tg_output(&tg, y);
    char name[64];
    snprintf(name, sizeof(name), "special_%s", stax_op_name(c.op));
    /* The JIT's Gelu is 0.5 x erfc(-x / sqrt 2), as the generic kernel's: relative accuracy
     * holds into the negative tail (at -9.5 both give about -1e-20, not 0). */
    double atol = 1e-44;
    CHECK_EQ_INT(tg_check(&tg, name, NULL, NULL, atol, F32_RTOL), STAX_OK_CODE);
    tg_free(&tg);
  }
}

/* ---- random elementwise chains with broadcasting ----------------------------------------- */

/* A shape that broadcasts into (rank, dims): some dims set to 1, some leading dims dropped. */
static int32_t broadcast_variant(int32_t rank, const int64_t* dims, int64_t* out_dims) {
  int32_t drop = rank > 0 ? (int32_t)tg_int(0, rank) : 0;
  int32_t out_rank = rank - drop;
  for (int32_t d = 0; d < out_rank; d++) {
    int64_t full = dims[drop + d];
    out_dims[d] = tg_int(0, 2) == 0 ? 1 : full;
  }
  return out_rank;
}

static void random_chain_case(int32_t iteration, int32_t vector_bits) {
  static const stax_op_t binary_ops[] = {STAX_OP_Add, STAX_OP_Sub, STAX_OP_Mul,
                                         STAX_OP_Max, STAX_OP_Min, STAX_OP_PRelu};
  static const stax_op_t unary_ops[] = {STAX_OP_Relu, STAX_OP_Sigmoid,  STAX_OP_Tanh,
                                        STAX_OP_Gelu, STAX_OP_Exp,      STAX_OP_Abs,
                                        STAX_OP_Neg,  STAX_OP_Softplus, STAX_OP_Erf};
  int32_t rank = (int32_t)tg_int(0, 4);
  int64_t dims[STAX_MAX_RANK];
  for (int32_t d = 0; d < rank; d++) {
    int64_t pick = tg_int(0, 9);
    dims[d] = pick < 6 ? tg_int(1, 9) : pick < 8 ? tg_int(10, 40) : tg_int(60, 130);
  }
  test_group_t tg;
  tg_init(&tg);
  int32_t layout = rank >= 2 ? (int32_t)tg_int(0, 3) : rank == 1 ? (int32_t)tg_int(0, 1) * 2 : 0;
  int32_t x = tg_input_layout(&tg, "x", STAX_DTYPE_FLOAT32, rank, dims, layout, -2, 2);
  int64_t bdims[STAX_MAX_RANK];
  int32_t brank = broadcast_variant(rank, dims, bdims);
  int32_t b = tg_input_layout(&tg, "b", STAX_DTYPE_FLOAT32, brank, bdims, 0, -2, 2);
  int64_t cdims[STAX_MAX_RANK];
  int32_t crank = broadcast_variant(rank, dims, cdims);
  int32_t cvalue = tg_input_layout(&tg, "c", STAX_DTYPE_FLOAT32, crank, cdims, 0, 0.5, 2);
  int32_t current = x;
  int32_t steps = (int32_t)tg_int(2, 6);
  for (int32_t s = 0; s < steps; s++) {
    if (tg_int(0, 1)) {
      stax_op_t op =
          binary_ops[tg_int(0, (int64_t)(sizeof(binary_ops) / sizeof(binary_ops[0])) - 1)];
      int32_t inputs[2] = {current, tg_int(0, 1) ? b : cvalue};
      if (op == STAX_OP_PRelu) inputs[1] = b;
      current = tg_node(&tg, op, 2, inputs, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
    } else {
      stax_op_t op = unary_ops[tg_int(0, (int64_t)(sizeof(unary_ops) / sizeof(unary_ops[0])) - 1)];
      current = tg_node(&tg, op, 1, &current, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
    }
  }
  /* A second output reuses an intermediate: both stored by one kernel. */
  int32_t inputs[2] = {current, x};
  int32_t second = tg_node(&tg, STAX_OP_Add, 2, inputs, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
  tg_output(&tg, current);
  tg_output(&tg, second);
  char name[64];
  snprintf(name, sizeof(name), "chain%d", (int)iteration);
  stax_jit_compile_options_t options = {.vector_bits = vector_bits};
  CHECK_EQ_INT(tg_check(&tg, name, &options, NULL, 1e-5, 1e-4), STAX_OK_CODE);
  tg_free(&tg);
}

static void test_random_chains(void) {
  for (int32_t i = 0; i < 60; i++) random_chain_case(i, 0);
}

static void test_random_chains_other_widths(void) {
  for (int32_t i = 0; i < 20; i++) random_chain_case(100 + i, i % 2 ? 128 : 512);
}

/* ---- dtypes other than float32 ----------------------------------------------------------- */

static void test_compare_where_cast(void) {
  test_group_t tg;
  tg_init(&tg);
  int64_t dims[2] = {7, 13}, row[1] = {13};
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t y = tg_input(&tg, "y", STAX_DTYPE_FLOAT32, 1, row);
  int32_t xy[2] = {x, y};
  int32_t less = tg_node(&tg, STAX_OP_Less, 2, xy, STAX_DTYPE_BOOL, 2, dims, 0, NULL);
  int32_t greater = tg_node(&tg, STAX_OP_Greater, 2, xy, STAX_DTYPE_BOOL, 2, dims, 0, NULL);
  int32_t either[2] = {less, greater};
  int32_t or_value = tg_node(&tg, STAX_OP_Or, 2, either, STAX_DTYPE_BOOL, 2, dims, 0, NULL);
  int32_t not_value = tg_node(&tg, STAX_OP_Not, 1, &or_value, STAX_DTYPE_BOOL, 2, dims, 0, NULL);
  int32_t where_inputs[3] = {less, x, y};
  int32_t where =
      tg_node(&tg, STAX_OP_Where, 3, where_inputs, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  stax_node_attr_t to_int = tg_attr_int("to", 6); /* int32 */
  int32_t as_int = tg_node(&tg, STAX_OP_Cast, 1, &where, STAX_DTYPE_INT32, 2, dims, 1, &to_int);
  stax_node_attr_t to_double = tg_attr_int("to", 11);
  int32_t as_double =
      tg_node(&tg, STAX_OP_Cast, 1, &as_int, STAX_DTYPE_FLOAT64, 2, dims, 1, &to_double);
  tg_output(&tg, where);
  tg_output(&tg, as_int);
  tg_output(&tg, as_double);
  tg_output(&tg, not_value);
  CHECK_EQ_INT(tg_check(&tg, "compare_where_cast", NULL, NULL, 0, 0), STAX_OK_CODE);
  tg_free(&tg);
}

static void test_integer_ops(void) {
  static const stax_dtype_t dtypes[] = {STAX_DTYPE_INT32, STAX_DTYPE_INT64, STAX_DTYPE_INT8,
                                        STAX_DTYPE_UINT8, STAX_DTYPE_UINT32};
  for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
    stax_dtype_t dtype = dtypes[t];
    bool is_unsigned = stax_dtype_is_unsigned_int(dtype);
    test_group_t tg;
    tg_init(&tg);
    int64_t dims[2] = {5, 19};
    int32_t a = tg_input_layout(&tg, "a", dtype, 2, dims, 0, is_unsigned ? 0 : -100, 100);
    int32_t b = tg_input_layout(&tg, "b", dtype, 2, dims, 1, is_unsigned ? 0 : -100, 100);
    int32_t ab[2] = {a, b};
    int32_t sum = tg_node(&tg, STAX_OP_Add, 2, ab, dtype, 2, dims, 0, NULL);
    int32_t product_inputs[2] = {sum, b};
    int32_t product = tg_node(&tg, STAX_OP_Mul, 2, product_inputs, dtype, 2, dims, 0, NULL);
    int32_t max = tg_node(&tg, STAX_OP_Max, 2, ab, dtype, 2, dims, 0, NULL);
    int32_t diff_inputs[2] = {product, max};
    int32_t diff = tg_node(&tg, STAX_OP_Sub, 2, diff_inputs, dtype, 2, dims, 0, NULL);
    int32_t abs_value = tg_node(&tg, STAX_OP_Abs, 1, &diff, dtype, 2, dims, 0, NULL);
    int32_t sign = tg_node(&tg, STAX_OP_Sign, 1, &diff, dtype, 2, dims, 0, NULL);
    int32_t equal = tg_node(&tg, STAX_OP_Equal, 2, ab, STAX_DTYPE_BOOL, 2, dims, 0, NULL);
    tg_output(&tg, diff);
    tg_output(&tg, abs_value);
    tg_output(&tg, sign);
    tg_output(&tg, equal);
    if (!is_unsigned) {
      int32_t relu = tg_node(&tg, STAX_OP_Relu, 1, &diff, dtype, 2, dims, 0, NULL);
      int32_t neg = tg_node(&tg, STAX_OP_Neg, 1, &diff, dtype, 2, dims, 0, NULL);
      tg_output(&tg, relu);
      tg_output(&tg, neg);
    }
    CHECK_EQ_INT(tg_check(&tg, stax_dtype_name(dtype), NULL, NULL, 0, 0), STAX_OK_CODE);
    tg_free(&tg);
  }
}

static void test_clip_pow_variadic(void) {
  test_group_t tg;
  tg_init(&tg);
  int64_t dims[3] = {3, 4, 21}, scalar_dims[1] = {1};
  int32_t x = tg_input_layout(&tg, "x", STAX_DTYPE_FLOAT32, 3, dims, 0, 0.1, 3);
  int32_t low = tg_input(&tg, "low", STAX_DTYPE_FLOAT32, 0, scalar_dims);
  *(float*)stax_tensor_data(tg.tensors[low]) = 0.5f;
  int32_t high = tg_input(&tg, "high", STAX_DTYPE_FLOAT32, 0, scalar_dims);
  *(float*)stax_tensor_data(tg.tensors[high]) = 2.5f;
  tg.values[high].constant = tg.tensors[high]; /* folded at compile time */
  int32_t clip_inputs[3] = {x, low, high};
  int32_t clipped =
      tg_node(&tg, STAX_OP_Clip, 3, clip_inputs, STAX_DTYPE_FLOAT32, 3, dims, 0, NULL);
  int32_t exponents[4];
  float exponent_values[4] = {2.0f, 0.5f, 3.0f, 1.7f};
  int32_t current = clipped;
  for (int32_t e = 0; e < 4; e++) {
    exponents[e] = tg_input(&tg, "e", STAX_DTYPE_FLOAT32, 0, scalar_dims);
    *(float*)stax_tensor_data(tg.tensors[exponents[e]]) = exponent_values[e];
    if (e != 3) tg.values[exponents[e]].constant = tg.tensors[exponents[e]];
    int32_t pow_inputs[2] = {clipped, exponents[e]};
    int32_t powered =
        tg_node(&tg, STAX_OP_Pow, 2, pow_inputs, STAX_DTYPE_FLOAT32, 3, dims, 0, NULL);
    int32_t sum_inputs[2] = {current, powered};
    current = tg_node(&tg, STAX_OP_Sum, 2, sum_inputs, STAX_DTYPE_FLOAT32, 3, dims, 0, NULL);
  }
  int32_t mean_inputs[3] = {current, clipped, x};
  int32_t mean = tg_node(&tg, STAX_OP_Mean, 3, mean_inputs, STAX_DTYPE_FLOAT32, 3, dims, 0, NULL);
  tg_output(&tg, mean);
  CHECK_EQ_INT(tg_check(&tg, "clip_pow", NULL, NULL, 1e-5, 1e-5), STAX_OK_CODE);
  tg_free(&tg);
}

/* ---- the thread pool, big tensors -------------------------------------------------------- */

static void test_parallel(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(tg_sys(), 4, &pool));
  int64_t shapes[3][2] = {{300, 1001}, {1, 250007}, {100003, 3}};
  for (int32_t s = 0; s < 3; s++) {
    test_group_t tg;
    tg_init(&tg);
    int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, shapes[s]);
    int64_t row[1] = {shapes[s][1]};
    int32_t b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 1, row);
    int32_t xb[2] = {x, b};
    int32_t sum = tg_node(&tg, STAX_OP_Add, 2, xb, STAX_DTYPE_FLOAT32, 2, shapes[s], 0, NULL);
    int32_t y = tg_node(&tg, STAX_OP_Sigmoid, 1, &sum, STAX_DTYPE_FLOAT32, 2, shapes[s], 0, NULL);
    tg_output(&tg, y);
    stax_jit_compile_options_t options = {.thread_count = 4};
    CHECK_EQ_INT(tg_check(&tg, "parallel", &options, pool, F32_ATOL, F32_RTOL), STAX_OK_CODE);
    tg_free(&tg);
  }
  stax_threadpool_destroy(pool);
}

/* ---- float32 math accuracy against libm -------------------------------------------------- */

typedef struct math_case_t {
  stax_kir_unary_op_t op;
  double (*reference)(double);
  double low, high;
  double max_ulp; /* relative error bound in float32 ulps (of the reference) */
  double max_abs; /* or this absolute error */
} math_case_t;

static double ulp_error(float value, double reference) {
  if (isnan(reference)) return isnan(value) ? 0 : INFINITY;
  if (isinf(reference)) return value == reference ? 0 : INFINITY;
  double ulp = reference == 0
                   ? FLT_TRUE_MIN
                   : nextafterf((float)fabs(reference), INFINITY) - (float)fabs(reference);
  return fabs((double)value - reference) / ulp;
}

static void test_math_accuracy(void) {
  static const math_case_t cases[] = {
      {STAX_KIR_EXP, exp, -104, 88.7, 3, 0},   {STAX_KIR_EXPM1, expm1, -10, 10, 3, 0},
      {STAX_KIR_LOG, log, 1e-30, 1e30, 3, 0},  {STAX_KIR_LOG1P, log1p, -0.999, 100, 4, 0},
      {STAX_KIR_TANH, tanh, -12, 12, 6, 1e-9}, {STAX_KIR_ERF, erf, -6, 6, 0, 3e-7},
      /* erfc keeps relative accuracy into the tail: the fit's 2e-8 and float32 evaluation
       * (4e-7 to 6e-7 relative up to x = 3) plus the float32 rounding of x^2 that exp
       * amplifies, about 6e-8 x^2 (measured 65 ulp at worst over [-6, 9], where erfc(9) is
       * 4e-37 and 1 - erf would be 0; 121 ulp with the previous fit). */
      {STAX_KIR_ERFC, erfc, -6, 9, 100, 0},
  };
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  enum { COUNT = 100003 };
  float* input = malloc(sizeof(float) * COUNT);
  float* output = malloc(sizeof(float) * COUNT);
  /* 8 lanes, and 16 (one zmm on AVX-512, where exp scales with vscalefps; two vectors
   * elsewhere). */
  for (size_t run = 0; run < 2 * sizeof(cases) / sizeof(cases[0]); run++) {
    const math_case_t* m = &cases[run / 2];
    int32_t width = run % 2 ? 16 : 8;
    stax_kir_kernel_t* k = NULL;
    CHECK_OK(stax_kir_kernel_create(tg_sys(), stax_kir_unary_op_name(m->op), &k));
    int64_t dims[1] = {COUNT};
    int32_t in =
        stax_kir_add_buffer(k, "in", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
    int32_t out =
        stax_kir_add_buffer(k, "out", STAX_KIR_BUFFER_OUTPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
    stax_kir_loop_t* loop = stax_kir_add_loop(k, stax_kir_add_stage(k, "s"), "i", COUNT);
    loop->vector_width = width;
    stax_kir_index_t at = stax_kir_index_constant(0);
    stax_kir_index_add_term(k, &at, stax_kir_loop_id(k, loop), 1);
    stax_kir_add_store(k, &loop->body, out, &at,
                       stax_kir_unary(k, m->op, stax_kir_load(k, in, &at)));
    stax_jit_kernel_t* kernel = NULL;
    CHECK_OK(stax_jit_compile_kernel_ir(backend, k, NULL, &kernel));
    stax_kir_kernel_destroy(k);
    if (!kernel) continue;
    /* Uniform in the range, plus a logarithmic sweep near zero for the odd functions. */
    for (int32_t i = 0; i < COUNT; i++) {
      double t = (double)i / (COUNT - 1);
      input[i] = m->op == STAX_KIR_LOG ? (float)exp(log(m->low) + t * (log(m->high) - log(m->low)))
                                       : (float)(m->low + t * (m->high - m->low));
      if (i % 7 == 0 && m->op != STAX_KIR_LOG)
        input[i] = (float)(pow(10.0, -12 * t) * (i % 2 ? -1 : 1));
    }
    void* data[2] = {input, output};
    CHECK_OK(stax_jit_kernel_run_data(kernel, data, NULL));
    double worst_ulp = 0, worst_abs = 0;
    int64_t bad = 0;
    for (int32_t i = 0; i < COUNT; i++) {
      double reference = m->reference((double)input[i]);
      double ulps = ulp_error(output[i], reference);
      double abs_error = fabs((double)output[i] - reference);
      if (ulps > worst_ulp) worst_ulp = ulps;
      if (abs_error > worst_abs) worst_abs = abs_error;
      if (ulps > m->max_ulp && abs_error > m->max_abs && bad++ < 3)
        fprintf(stderr, "%s(%.9g) = %.9g, libm %.9g (%.2f ulp)\n", stax_kir_unary_op_name(m->op),
                input[i], output[i], reference, ulps);
    }
    printf("  %-6s x%-2d max error %.2f ulp, %.3g absolute\n", stax_kir_unary_op_name(m->op),
           (int)width, worst_ulp, worst_abs);
    CHECK_EQ_INT(bad, 0);
    stax_jit_kernel_release(kernel);
  }
  free(input);
  free(output);
}

/* ---- failure paths ----------------------------------------------------------------------- */

static void build_small_group(test_group_t* tg) {
  tg_init(tg);
  int64_t dims[1] = {10};
  int32_t x = tg_input(tg, "x", STAX_DTYPE_FLOAT32, 1, dims);
  int32_t y = tg_node(tg, STAX_OP_Relu, 1, &x, STAX_DTYPE_FLOAT32, 1, dims, 0, NULL);
  tg_output(tg, y);
}

static void test_compile_failure_injection(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  test_group_t tg;
  build_small_group(&tg);
  stax_jit_stats_t before = stax_jit_stats();
  stax_jit_compile_options_t options = {
      .inject_failure = true, .keep_llvm_ir = true, .keep_assembly = true};
  stax_jit_kernel_t* kernel = NULL;
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "inject"), &options, &kernel),
              STAX_INTERNAL, "injected");
  CHECK(kernel == NULL);
  setenv("STAX_JIT_FAIL_COMPILE", "1", 1);
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "inject"), NULL, &kernel),
              STAX_INTERNAL, "injected");
  unsetenv("STAX_JIT_FAIL_COMPILE");
  stax_jit_stats_t after = stax_jit_stats();
  CHECK_EQ_INT(after.failed - before.failed, 2);
  CHECK_EQ_INT(after.live_kernels, before.live_kernels);
  /* The backend keeps working afterwards. */
  CHECK_EQ_INT(tg_check(&tg, "after_failure", NULL, NULL, 0, 0), STAX_OK_CODE);
  tg_free(&tg);
}

static void test_not_fusible_and_malformed(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  stax_jit_kernel_t* kernel = NULL;
  /* An op without lowering. */
  test_group_t tg;
  tg_init(&tg);
  int64_t dims[2] = {4, 6}, flat[2] = {6, 4};
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t t = tg_node(&tg, STAX_OP_Transpose, 1, &x, STAX_DTYPE_FLOAT32, 2, flat, 0, NULL);
  tg_output(&tg, t);
  stax_jit_stats_t before = stax_jit_stats();
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "transpose"), NULL, &kernel),
              STAX_UNIMPLEMENTED, "Transpose");
  CHECK_EQ_INT(stax_jit_stats().not_fusible - before.not_fusible, 1);
  tg_free(&tg);
  /* float16 lowers (computed in float32; test_jit_half checks the values). */
  tg_init(&tg);
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT16, 2, dims);
  t = tg_node(&tg, STAX_OP_Relu, 1, &x, STAX_DTYPE_FLOAT16, 2, dims, 0, NULL);
  tg_output(&tg, t);
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "half"), NULL, &kernel));
  if (kernel) stax_jit_kernel_release(kernel);
  kernel = NULL;
  tg_free(&tg);
  /* Integer division stays with the interpreter (division by zero is a status there). */
  tg_init(&tg);
  x = tg_input(&tg, "x", STAX_DTYPE_INT32, 2, dims);
  int32_t xx[2] = {x, x};
  t = tg_node(&tg, STAX_OP_Div, 2, xx, STAX_DTYPE_INT32, 2, dims, 0, NULL);
  tg_output(&tg, t);
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "idiv"), NULL, &kernel),
              STAX_UNIMPLEMENTED, "Div");
  tg_free(&tg);
  /* Outputs that do not broadcast together. */
  tg_init(&tg);
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int64_t other[2] = {4, 7};
  t = tg_node(&tg, STAX_OP_Relu, 1, &x, STAX_DTYPE_FLOAT32, 2, other, 0, NULL);
  tg_output(&tg, t);
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "shapes"), NULL, &kernel),
              STAX_UNIMPLEMENTED, "broadcast");
  tg_free(&tg);
  /* Malformed descriptions. */
  build_small_group(&tg);
  tg.node_inputs[0][0] = 7; /* a value that does not exist */
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "bad"), NULL, &kernel),
              STAX_INVALID_ARGUMENT, "out of range");
  tg.node_inputs[0][0] = 1; /* reads its own output */
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "bad"), NULL, &kernel),
              STAX_INVALID_ARGUMENT, "before it is produced");
  tg.node_inputs[0][0] = 0;
  tg.outputs[0] = 0; /* an input listed as output */
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "bad"), NULL, &kernel),
              STAX_INVALID_ARGUMENT, NULL);
  CHECK(kernel == NULL);
  tg_free(&tg);
}

static void test_run_checks(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  test_group_t tg;
  build_small_group(&tg);
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "checks"), NULL, &kernel));
  if (!kernel) {
    tg_free(&tg);
    return;
  }
  CHECK_EQ_INT(stax_jit_kernel_input_count(kernel), 1);
  CHECK_EQ_INT(stax_jit_kernel_output_count(kernel), 1);
  stax_tensor_t* x = tg.tensors[0];
  int64_t dims[1] = {10}, wrong[1] = {11};
  stax_tensor_t* out = NULL;
  stax_tensor_t* bad = NULL;
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 1, dims, &out));
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 1, wrong, &bad));
  CHECK_ERROR(stax_jit_kernel_run(kernel, 1, &bad, 1, &out, NULL), STAX_FAILED_PRECONDITION, "x");
  CHECK_ERROR(stax_jit_kernel_run(kernel, 1, &x, 1, &bad, NULL), STAX_FAILED_PRECONDITION, NULL);
  CHECK_ERROR(stax_jit_kernel_run(kernel, 0, NULL, 1, &out, NULL), STAX_INVALID_ARGUMENT, NULL);
  /* In place over the very same view is fine for an elementwise kernel... */
  stax_tensor_t* copy = NULL;
  CHECK_OK(stax_tensor_copy(tg_sys(), x, &copy));
  CHECK_OK(stax_jit_kernel_run(kernel, 1, &copy, 1, &copy, NULL));
  const float* source = stax_tensor_data(x);
  const float* result = stax_tensor_data(copy);
  for (int32_t i = 0; i < 10; i++) CHECK(result[i] == (source[i] < 0 ? 0.0f : source[i]));
  /* ...a partial overlap is not. */
  int64_t big[1] = {20};
  stax_tensor_t* buffer = NULL;
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 1, big, &buffer));
  stax_tensor_t* first = NULL;
  stax_tensor_t* shifted = NULL;
  int64_t start0 = 0, end0 = 10, start1 = 5, end1 = 15;
  CHECK_OK(stax_tensor_slice(tg_sys(), buffer, 1, &start0, &end0, NULL, NULL, &first));
  CHECK_OK(stax_tensor_slice(tg_sys(), buffer, 1, &start1, &end1, NULL, NULL, &shifted));
  CHECK_ERROR(stax_jit_kernel_run(kernel, 1, &first, 1, &shifted, NULL), STAX_FAILED_PRECONDITION,
              "overlaps");
  stax_tensor_release(first);
  stax_tensor_release(shifted);
  stax_tensor_release(buffer);
  stax_tensor_release(copy);
  stax_tensor_release(out);
  stax_tensor_release(bad);
  stax_jit_kernel_release(kernel);
  tg_free(&tg);
}

/* ---- texts, lifetime --------------------------------------------------------------------- */

static void test_source_texts(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  stax_jit_target_info_t target = stax_jit_backend_target(backend);
  CHECK(target.vector_bits >= 128);
  CHECK(target.cpu != NULL && target.cpu[0] != '\0');
  test_group_t tg;
  build_small_group(&tg);
  stax_jit_kernel_t* kernel = NULL;
  stax_jit_compile_options_t options = {
      .keep_kernel_ir = true, .keep_llvm_ir = true, .keep_assembly = true};
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "texts"), &options, &kernel));
  if (kernel) {
    CHECK(strstr(stax_jit_kernel_ir_text(kernel), "kernel texts") != NULL);
    CHECK(strstr(stax_jit_kernel_ir_text(kernel), "vector(") != NULL);
    CHECK(strstr(stax_jit_kernel_llvm_ir_text(kernel, false), "_stage0.body") != NULL);
    CHECK(strstr(stax_jit_kernel_llvm_ir_text(kernel, true), "define void @stax_k") != NULL);
    CHECK(strstr(stax_jit_kernel_asm_text(kernel), "ret") != NULL);
    CHECK(stax_jit_kernel_compile_ms(kernel) > 0);
    CHECK_EQ_STR(stax_jit_kernel_name(kernel), "texts");
    stax_jit_kernel_release(kernel);
  }
  /* Texts are only kept when asked for. */
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "texts"), NULL, &kernel));
  if (kernel) {
    CHECK(stax_jit_kernel_ir_text(kernel) == NULL);
    CHECK(stax_jit_kernel_asm_text(kernel) == NULL);
    stax_jit_kernel_release(kernel);
  }
  tg_free(&tg);
}

static void test_release_many(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  uint64_t live = stax_jit_stats().live_kernels;
  test_group_t tg;
  build_small_group(&tg);
  stax_jit_kernel_t* kernels[40] = {NULL};
  for (int32_t i = 0; i < 40; i++)
    CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "many"), NULL, &kernels[i]));
  CHECK_EQ_INT(stax_jit_stats().live_kernels, live + 40);
  /* Free every other one, run the rest: freeing one kernel leaves the others intact. */
  for (int32_t i = 0; i < 40; i += 2) stax_jit_kernel_release(kernels[i]);
  stax_tensor_t* expected[1] = {NULL};
  CHECK_OK(tg_reference(&tg, expected));
  for (int32_t i = 1; i < 40; i += 2) {
    stax_tensor_t* actual[1] = {NULL};
    stax_jit_kernel_retain(kernels[i]);
    CHECK_OK(tg_run(&tg, kernels[i], NULL, actual));
    stax_jit_kernel_release(kernels[i]);
    CHECK_EQ_INT(tg_compare("many", actual[0], expected[0], 0, 0), 0);
    stax_tensor_release(actual[0]);
    stax_jit_kernel_release(kernels[i]);
  }
  stax_tensor_release(expected[0]);
  CHECK_EQ_INT(stax_jit_stats().live_kernels, live);
  tg_free(&tg);
}

/* ---- compiles from several threads at once (the VM's background compiler) ---------------- */

typedef struct compile_job_t {
  test_group_t group;
  stax_tensor_t* expected;
  int64_t mismatches;
  stax_status_code_t code;
} compile_job_t;

static void* compile_job_run(void* arg) {
  compile_job_t* job = arg;
  stax_jit_backend_t* backend = NULL;
  stax_status_t status = stax_jit_backend_get(&backend);
  for (int32_t round = 0; round < 3 && status == STAX_OK; round++) {
    stax_jit_kernel_t* kernel = NULL;
    status = stax_jit_compile_group(backend, tg_group(&job->group, "threaded"), NULL, &kernel);
    if (status != STAX_OK) break;
    stax_tensor_t* actual[1] = {NULL};
    status = tg_run(&job->group, kernel, NULL, actual);
    if (status == STAX_OK && actual[0]) {
      /* tg_compare's CHECKs would race on the harness counters: compare by hand. */
      const float* x = stax_tensor_data(actual[0]);
      const float* y = stax_tensor_data(job->expected);
      for (int64_t i = 0; i < stax_tensor_element_count(job->expected); i++)
        if (!(fabs((double)x[i] - (double)y[i]) <= 1e-5 + 1e-4 * fabs((double)y[i])))
          job->mismatches++;
    }
    stax_tensor_release(actual[0]);
    stax_jit_kernel_release(kernel);
  }
  job->code = stax_status_consume_code(status);
  return NULL;
}

static void test_concurrent_compiles(void) {
  if (!tg_backend()) return;
  enum { JOBS = 4 };
  compile_job_t jobs[JOBS];
  pthread_t threads[JOBS];
  for (int32_t j = 0; j < JOBS; j++) {
    compile_job_t* job = &jobs[j];
    memset(job, 0, sizeof(*job));
    tg_init(&job->group);
    int64_t dims[2] = {17 + j, 29}, row[1] = {29};
    int32_t x = tg_input(&job->group, "x", STAX_DTYPE_FLOAT32, 2, dims);
    int32_t b = tg_input(&job->group, "b", STAX_DTYPE_FLOAT32, 1, row);
    int32_t xb[2] = {x, b};
    int32_t sum = tg_node(&job->group, STAX_OP_Add, 2, xb, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
    stax_op_t activation = j % 2 ? STAX_OP_Gelu : STAX_OP_Sigmoid;
    int32_t y = tg_node(&job->group, activation, 1, &sum, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
    tg_output(&job->group, y);
    stax_tensor_t* expected[1] = {NULL};
    CHECK_OK(tg_reference(&job->group, expected));
    job->expected = expected[0];
  }
  for (int32_t j = 0; j < JOBS; j++)
    CHECK(pthread_create(&threads[j], NULL, compile_job_run, &jobs[j]) == 0);
  for (int32_t j = 0; j < JOBS; j++) {
    pthread_join(threads[j], NULL);
    CHECK_EQ_INT(jobs[j].code, STAX_OK_CODE);
    CHECK_EQ_INT(jobs[j].mismatches, 0);
    stax_tensor_release(jobs[j].expected);
    tg_free(&jobs[j].group);
  }
}

/* ---- edge shapes: empty tensors, broadcast views as inputs ------------------------------- */

static void test_edge_shapes(void) {
  /* Zero-sized outputs: the kernel does nothing and succeeds. */
  test_group_t tg;
  tg_init(&tg);
  int64_t empty[3] = {3, 0, 5};
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 3, empty);
  int32_t y = tg_node(&tg, STAX_OP_Exp, 1, &x, STAX_DTYPE_FLOAT32, 3, empty, 0, NULL);
  tg_output(&tg, y);
  CHECK_EQ_INT(tg_check(&tg, "empty", NULL, NULL, 0, 0), STAX_OK_CODE);
  tg_free(&tg);
  /* An input that is a broadcast view (stride 0 on a dim of size > 1). */
  tg_init(&tg);
  int64_t row[2] = {1, 13}, dims[2] = {6, 13};
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, row);
  stax_tensor_t* wide = NULL;
  CHECK_OK(stax_tensor_broadcast(tg_sys(), tg.tensors[x], 2, dims, &wide));
  stax_tensor_release(tg.tensors[x]);
  tg.tensors[x] = wide;
  tg.values[x].dims[0] = 6;
  tg.values[x].strides[0] = 0;
  tg.values[x].strides[1] = wide ? stax_tensor_strides(wide)[1] : 1;
  int32_t z = tg_input_layout(&tg, "z", STAX_DTYPE_FLOAT32, 2, dims, 2, -1, 1);
  int32_t xz[2] = {x, z};
  y = tg_node(&tg, STAX_OP_Mul, 2, xz, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, y);
  CHECK_EQ_INT(tg_check(&tg, "broadcast_view", NULL, NULL, 0, 0), STAX_OK_CODE);
  tg_free(&tg);
}

STAX_TEST_MAIN(STAX_TEST(test_concurrent_compiles), STAX_TEST(test_edge_shapes),
               STAX_TEST(test_unary_ops), STAX_TEST(test_unary_special_values),
               STAX_TEST(test_random_chains), STAX_TEST(test_random_chains_other_widths),
               STAX_TEST(test_compare_where_cast), STAX_TEST(test_integer_ops),
               STAX_TEST(test_clip_pow_variadic), STAX_TEST(test_parallel),
               STAX_TEST(test_math_accuracy), STAX_TEST(test_compile_failure_injection),
               STAX_TEST(test_not_fusible_and_malformed), STAX_TEST(test_run_checks),
               STAX_TEST(test_source_texts), STAX_TEST(test_release_many))
