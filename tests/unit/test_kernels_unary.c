/* Tests for the unary kernels (src/kernels/unary.c): every op against libm in double on
 * float32/float64 and the half types, integer variants with wrap-around at the extremes, NaN
 * handling, attributes and their defaults, Clip bounds from inputs and attributes, IsInf
 * flags, Identity as a view, Dropout in inference mode, non-contiguous inputs, preallocated
 * outputs, thread pool runs and the error paths. */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static stax_status_t run1(stax_kernel_fn fn, stax_op_t op, const stax_node_attr_t* attrs,
                          int32_t attr_count, stax_tensor_t* x, stax_tensor_t** out) {
  return kt_run_kernel(fn, op, attrs, attr_count, &x, 1, out, 1, NULL);
}

/* ---- float ops against double references ------------------------------------------------- */

typedef struct float_case_t {
  stax_kernel_fn fn;
  stax_op_t op;
  double (*reference)(double x);
  double low, high; /* the input range sampled */
} float_case_t;

static double ref_relu(double x) { return x < 0 ? 0 : x; }
static double ref_leaky_relu(double x) { return x < 0 ? (double)0.01f * x : x; }
static double ref_elu(double x) { return x < 0 ? exp(x) - 1 : x; }
static double ref_selu(double x) {
  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
  return x <= 0 ? gamma * (alpha * exp(x) - alpha) : gamma * x;
}
static double ref_celu(double x) { return fmax(0, x) + fmin(0, exp(x) - 1); }
static double ref_thresholded_relu(double x) { return x > 1 ? x : 0; }
static double ref_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_hard_sigmoid(double x) { return fmax(0, fmin(1, (double)0.2f * x + 0.5)); }
static double ref_hard_swish(double x) { return x * fmax(0, fmin(1, x / 6 + 0.5)); }
static double ref_softsign(double x) { return x / (1 + fabs(x)); }
static double ref_softplus(double x) { return log(exp(x) + 1); }
static double ref_shrink(double x) { return x < -0.5 ? x : x > 0.5 ? x : 0; }
static double ref_reciprocal(double x) { return 1 / x; }
static double ref_neg(double x) { return -x; }
static double ref_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
static double ref_round(double x) {
  double r = floor(x + 0.5);
  if (r - x == 0.5 && fmod(r, 2) != 0) r -= 1; /* halves go to the even neighbour */
  return r;
}

static const float_case_t kFloatCases[] = {
    {stax_kernel_Relu, STAX_OP_Relu, ref_relu, -3, 3},
    {stax_kernel_LeakyRelu, STAX_OP_LeakyRelu, ref_leaky_relu, -3, 3},
    {stax_kernel_Elu, STAX_OP_Elu, ref_elu, -3, 3},
    {stax_kernel_Selu, STAX_OP_Selu, ref_selu, -3, 3},
    {stax_kernel_Celu, STAX_OP_Celu, ref_celu, -3, 3},
    {stax_kernel_ThresholdedRelu, STAX_OP_ThresholdedRelu, ref_thresholded_relu, -3, 3},
    {stax_kernel_Gelu, STAX_OP_Gelu, ref_gelu, -3, 3},
    {stax_kernel_Sigmoid, STAX_OP_Sigmoid, ref_sigmoid, -8, 8},
    {stax_kernel_HardSigmoid, STAX_OP_HardSigmoid, ref_hard_sigmoid, -4, 4},
    {stax_kernel_HardSwish, STAX_OP_HardSwish, ref_hard_swish, -4, 4},
    {stax_kernel_Softsign, STAX_OP_Softsign, ref_softsign, -3, 3},
    {stax_kernel_Softplus, STAX_OP_Softplus, ref_softplus, -5, 5},
    {stax_kernel_Shrink, STAX_OP_Shrink, ref_shrink, -2, 2},
    {stax_kernel_Tanh, STAX_OP_Tanh, tanh, -3, 3},
    {stax_kernel_Exp, STAX_OP_Exp, exp, -3, 3},
    {stax_kernel_Log, STAX_OP_Log, log, 0.1, 5},
    {stax_kernel_Sqrt, STAX_OP_Sqrt, sqrt, 0, 9},
    {stax_kernel_Reciprocal, STAX_OP_Reciprocal, ref_reciprocal, 0.25, 4},
    {stax_kernel_Neg, STAX_OP_Neg, ref_neg, -3, 3},
    {stax_kernel_Abs, STAX_OP_Abs, fabs, -3, 3},
    {stax_kernel_Erf, STAX_OP_Erf, erf, -3, 3},
    {stax_kernel_Sin, STAX_OP_Sin, sin, -3, 3},
    {stax_kernel_Cos, STAX_OP_Cos, cos, -3, 3},
    {stax_kernel_Tan, STAX_OP_Tan, tan, -1.2, 1.2},
    {stax_kernel_Asin, STAX_OP_Asin, asin, -0.99, 0.99},
    {stax_kernel_Acos, STAX_OP_Acos, acos, -0.99, 0.99},
    {stax_kernel_Atan, STAX_OP_Atan, atan, -3, 3},
    {stax_kernel_Sinh, STAX_OP_Sinh, sinh, -3, 3},
    {stax_kernel_Cosh, STAX_OP_Cosh, cosh, -3, 3},
    {stax_kernel_Asinh, STAX_OP_Asinh, asinh, -3, 3},
    {stax_kernel_Acosh, STAX_OP_Acosh, acosh, 1, 5},
    {stax_kernel_Atanh, STAX_OP_Atanh, atanh, -0.9, 0.9},
    {stax_kernel_Floor, STAX_OP_Floor, floor, -3, 3},
    {stax_kernel_Ceil, STAX_OP_Ceil, ceil, -3, 3},
    {stax_kernel_Round, STAX_OP_Round, ref_round, -3, 3},
    {stax_kernel_Sign, STAX_OP_Sign, ref_sign, -3, 3},
};

/* 41 samples over [low, high] (including the quarter points, so Round sees halves), laid out
 * as a transposed [41, 2] view so the kernel reads a strided input. */
static void check_float_case(const float_case_t* c, stax_dtype_t dtype) {
  enum { N = 41 };
  double values[2 * N];
  for (int i = 0; i < N; i++) {
    double v = c->low + (c->high - c->low) * i / (N - 1);
    if (c->op == STAX_OP_Round || c->op == STAX_OP_Floor || c->op == STAX_OP_Ceil)
      v = -5 + 0.25 * i; /* exact quarters, halves included */
    values[2 * i] = v;
    values[2 * i + 1] = 0;
  }
  const int64_t dims[2] = {N, 2};
  stax_tensor_t* base = kt_make_codec(dtype, 2, dims, values);
  stax_tensor_t* transposed = NULL, *x = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &transposed)); /* [2, N] */
  const int64_t starts[1] = {0}, ends[1] = {1};
  CHECK_OK(
      stax_tensor_slice(kt_allocator(), transposed, 1, starts, ends, NULL, NULL, &x)); /* [1, N] */
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(c->fn, c->op, NULL, 0, x, &out));
  CHECK(out && stax_tensor_dtype(out) == dtype && stax_tensor_rank(out) == 2);
  bool half = dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16;
  double relative = dtype == STAX_DTYPE_FLOAT64 ? 1e-12 : dtype == STAX_DTYPE_FLOAT32 ? 2e-6
                    : dtype == STAX_DTYPE_FLOAT16                            ? 2e-3
                                                                             : 1.6e-2;
  for (int64_t i = 0; out && i < N; i++) {
    double input = kt_get_codec(x, i);
    double expected = c->reference(input);
    double tolerance = relative * fabs(expected) + (half ? relative : relative * 1e-2);
    if (fabs(kt_get_codec(out, i) - expected) > tolerance)
      fprintf(stderr, "%s on %s at %.9g: got %.9g want %.9g\n", stax_op_name(c->op),
              stax_dtype_name(dtype), input, kt_get_codec(out, i), expected);
    CHECK_NEAR(kt_get_codec(out, i), expected, tolerance);
  }
  kt_release_all((stax_tensor_t*[]){base, transposed, x, out}, 4);
}

static void test_float_ops(void) {
  const stax_dtype_t dtypes[4] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16,
                                  STAX_DTYPE_BFLOAT16};
  for (size_t c = 0; c < sizeof(kFloatCases) / sizeof(kFloatCases[0]); c++)
    for (int k = 0; k < 4; k++) check_float_case(&kFloatCases[c], dtypes[k]);
}

static void test_round_half_to_even(void) {
  const int64_t dims[1] = {8};
  stax_tensor_t* x = kt_make_codec(STAX_DTYPE_FLOAT32, 1, dims,
                                 (double[]){0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 1e30});
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Round, STAX_OP_Round, NULL, 0, x, &out));
  const double expected[8] = {0, 2, 2, -0, -2, -2, 2, 1e30};
  for (int i = 0; i < 8; i++) CHECK_NEAR(kt_get_codec(out, i), (float)expected[i], 0);
  CHECK(signbit(kt_get_codec(out, 3)));
  kt_release_all((stax_tensor_t*[]){x, out}, 2);
}

static void test_attributes(void) {
  const int64_t dims[1] = {4};
  stax_tensor_t* x = kt_make_codec(STAX_DTYPE_FLOAT64, 1, dims, (double[]){-2, -0.25, 0.25, 2});
  stax_tensor_t* out = NULL;
  struct {
    stax_kernel_fn fn;
    stax_op_t op;
    stax_node_attr_t attrs[2];
    int32_t attr_count;
    double expected[4];
  } cases[] = {
      {stax_kernel_LeakyRelu,
       STAX_OP_LeakyRelu,
       {kt_attr_float("alpha", 0.5f)},
       1,
       {-1, -0.125, 0.25, 2}},
      {stax_kernel_Elu,
       STAX_OP_Elu,
       {kt_attr_float("alpha", 2.0f)},
       1,
       {2 * (exp(-2) - 1), 2 * (exp(-0.25) - 1), 0.25, 2}},
      {stax_kernel_Selu,
       STAX_OP_Selu,
       {kt_attr_float("alpha", 2.0f), kt_attr_float("gamma", 3.0f)},
       2,
       {3 * 2 * (exp(-2) - 1), 3 * 2 * (exp(-0.25) - 1), 0.75, 6}},
      {stax_kernel_Celu,
       STAX_OP_Celu,
       {kt_attr_float("alpha", 2.0f)},
       1,
       {2 * (exp(-1) - 1), 2 * (exp(-0.125) - 1), 0.25, 2}},
      {stax_kernel_ThresholdedRelu,
       STAX_OP_ThresholdedRelu,
       {kt_attr_float("alpha", 0.0f)},
       1,
       {0, 0, 0.25, 2}},
      {stax_kernel_HardSigmoid,
       STAX_OP_HardSigmoid,
       {kt_attr_float("alpha", 0.5f), kt_attr_float("beta", 0.25f)},
       2,
       {0, 0.125, 0.375, 1}},
      {stax_kernel_Shrink,
       STAX_OP_Shrink,
       {kt_attr_float("bias", 1.0f), kt_attr_float("lambd", 0.2f)},
       2,
       {-1, 0.75, -0.75, 1}},
      {stax_kernel_Gelu, STAX_OP_Gelu, {kt_attr_string("approximate", "tanh")}, 1, {0}},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    out = NULL;
    CHECK_OK(run1(cases[c].fn, cases[c].op, cases[c].attrs, cases[c].attr_count, x, &out));
    for (int i = 0; out && i < 4; i++) {
      double expected = cases[c].expected[i];
      if (cases[c].op == STAX_OP_Gelu) {
        double v = kt_get_codec(x, i);
        expected = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      }
      CHECK_NEAR(kt_get_codec(out, i), expected, 1e-7);
    }
    if (out) stax_tensor_release(out);
  }
  /* bad attributes */
  out = NULL;
  stax_node_attr_t bad_gelu = kt_attr_string("approximate", "erf");
  CHECK_ERROR(run1(stax_kernel_Gelu, STAX_OP_Gelu, &bad_gelu, 1, x, &out), STAX_INVALID_ARGUMENT,
              "Gelu node 'node0': attribute 'approximate'");
  stax_node_attr_t zero_alpha = kt_attr_float("alpha", 0.0f);
  CHECK_ERROR(run1(stax_kernel_Celu, STAX_OP_Celu, &zero_alpha, 1, x, &out), STAX_INVALID_ARGUMENT,
              "Celu node 'node0': attribute 'alpha' must not be 0");
  stax_node_attr_t wrong_type = kt_attr_int("alpha", 1);
  CHECK_ERROR(run1(stax_kernel_LeakyRelu, STAX_OP_LeakyRelu, &wrong_type, 1, x, &out),
              STAX_INVALID_ARGUMENT, "attribute 'alpha' must be FLOAT");
  CHECK(out == NULL);
  stax_tensor_release(x);
}

static void test_nan_propagation(void) {
  const int64_t dims[1] = {1};
  stax_tensor_t* x = kt_make_codec(STAX_DTYPE_FLOAT32, 1, dims, (double[]){NAN});
  const stax_kernel_fn fns[] = {stax_kernel_Relu, stax_kernel_LeakyRelu, stax_kernel_Elu,
                                stax_kernel_Celu, stax_kernel_Sigmoid, stax_kernel_HardSigmoid,
                                stax_kernel_Softplus, stax_kernel_Abs, stax_kernel_Sign,
                                stax_kernel_Round, stax_kernel_Clip};
  const stax_op_t ops[] = {STAX_OP_Relu, STAX_OP_LeakyRelu, STAX_OP_Elu, STAX_OP_Celu,
                           STAX_OP_Sigmoid, STAX_OP_HardSigmoid, STAX_OP_Softplus, STAX_OP_Abs,
                           STAX_OP_Sign, STAX_OP_Round, STAX_OP_Clip};
  for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
    stax_tensor_t* out = NULL;
    CHECK_OK(run1(fns[k], ops[k], NULL, 0, x, &out));
    if (!(out && isnan(kt_get_codec(out, 0)))) fprintf(stderr, "%s drops NaN\n", stax_op_name(ops[k]));
    CHECK(out && isnan(kt_get_codec(out, 0)));
    if (out) stax_tensor_release(out);
  }
  stax_tensor_release(x);
}

/* ---- integer variants -------------------------------------------------------------------- */

static void test_integer_ops(void) {
  const int64_t dims[1] = {5};
  int32_t values[5] = {INT32_MIN, -7, 0, 7, INT32_MAX};
  stax_tensor_t* x = kt_make_raw(STAX_DTYPE_INT32, 1, dims, values);
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Neg, STAX_OP_Neg, NULL, 0, x, &out));
  int32_t* r = stax_tensor_data(out);
  CHECK_EQ_INT(r[0], INT32_MIN); /* wraps, as numpy */
  CHECK_EQ_INT(r[1], 7);
  CHECK_EQ_INT(r[4], -INT32_MAX);
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(run1(stax_kernel_Abs, STAX_OP_Abs, NULL, 0, x, &out));
  r = stax_tensor_data(out);
  CHECK_EQ_INT(r[0], INT32_MIN);
  CHECK_EQ_INT(r[1], 7);
  CHECK_EQ_INT(r[3], 7);
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(run1(stax_kernel_Relu, STAX_OP_Relu, NULL, 0, x, &out));
  r = stax_tensor_data(out);
  CHECK(r[0] == 0 && r[1] == 0 && r[2] == 0 && r[3] == 7 && r[4] == INT32_MAX);
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(run1(stax_kernel_Sign, STAX_OP_Sign, NULL, 0, x, &out));
  r = stax_tensor_data(out);
  CHECK(r[0] == -1 && r[1] == -1 && r[2] == 0 && r[3] == 1 && r[4] == 1);
  stax_tensor_release(out);
  out = NULL;
  /* Shrink on integers computes in double and truncates back */
  stax_node_attr_t shrink_attrs[2] = {kt_attr_float("bias", 1.5f), kt_attr_float("lambd", 2.0f)};
  CHECK_OK(run1(stax_kernel_Shrink, STAX_OP_Shrink, shrink_attrs, 2, x, &out));
  r = stax_tensor_data(out);
  CHECK_EQ_INT(r[1], -5); /* -7 + 1.5 = -5.5 */
  CHECK_EQ_INT(r[2], 0);
  CHECK_EQ_INT(r[3], 5);
  CHECK_EQ_INT(r[4], INT32_MAX - 2); /* 2147483645.5 truncates */
  CHECK_EQ_INT(r[0], INT32_MIN + 2); /* -2147483646.5 truncates */
  stax_tensor_release(out);
  out = NULL;
  /* unsigned: Abs is the identity, Sign is 0/1 */
  uint64_t u[3] = {0, 5, UINT64_MAX};
  const int64_t three[1] = {3};
  stax_tensor_t* ux = kt_make_raw(STAX_DTYPE_UINT64, 1, three, u);
  CHECK_OK(run1(stax_kernel_Abs, STAX_OP_Abs, NULL, 0, ux, &out));
  CHECK(((uint64_t*)stax_tensor_data(out))[2] == UINT64_MAX);
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(run1(stax_kernel_Sign, STAX_OP_Sign, NULL, 0, ux, &out));
  CHECK(((uint64_t*)stax_tensor_data(out))[0] == 0 && ((uint64_t*)stax_tensor_data(out))[2] == 1);
  stax_tensor_release(out);
  out = NULL;
  /* int8 Neg of -128 */
  int8_t small[2] = {-128, 5};
  const int64_t two[1] = {2};
  stax_tensor_t* sx = kt_make_raw(STAX_DTYPE_INT8, 1, two, small);
  CHECK_OK(run1(stax_kernel_Neg, STAX_OP_Neg, NULL, 0, sx, &out));
  CHECK_EQ_INT(((int8_t*)stax_tensor_data(out))[0], -128);
  CHECK_EQ_INT(((int8_t*)stax_tensor_data(out))[1], -5);
  stax_tensor_release(out);
  out = NULL;
  /* ops that take no integers */
  CHECK_ERROR(run1(stax_kernel_Exp, STAX_OP_Exp, NULL, 0, x, &out), STAX_DTYPE_MISMATCH,
              "Exp node 'node0': input dtype int32 is not supported");
  CHECK_ERROR(run1(stax_kernel_Neg, STAX_OP_Neg, NULL, 0, ux, &out), STAX_DTYPE_MISMATCH, "uint64");
  CHECK_ERROR(run1(stax_kernel_Relu, STAX_OP_Relu, NULL, 0, ux, &out), STAX_DTYPE_MISMATCH,
              "uint64");
  CHECK_ERROR(run1(stax_kernel_Not, STAX_OP_Not, NULL, 0, x, &out), STAX_DTYPE_MISMATCH, "int32");
  CHECK_ERROR(run1(stax_kernel_IsNaN, STAX_OP_IsNaN, NULL, 0, x, &out), STAX_DTYPE_MISMATCH,
              "int32");
  CHECK_ERROR(kt_run_kernel(stax_kernel_Tanh, STAX_OP_Tanh, NULL, 0, NULL, 0, &out, 1, NULL),
              STAX_INVALID_ARGUMENT, "input 0 is missing");
  CHECK(out == NULL);
  kt_release_all((stax_tensor_t*[]){x, ux, sx}, 3);
}

/* ---- Not, IsNaN, IsInf ------------------------------------------------------------------- */

static void test_predicates(void) {
  const int64_t dims[1] = {5};
  uint8_t flags[5] = {0, 1, 2, 255, 0};
  stax_tensor_t* b = kt_make_raw(STAX_DTYPE_BOOL, 1, dims, flags);
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Not, STAX_OP_Not, NULL, 0, b, &out));
  const uint8_t not_expected[5] = {1, 0, 0, 0, 1};
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[i], not_expected[i]);
  stax_tensor_release(out);
  const stax_dtype_t dtypes[4] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16,
                                  STAX_DTYPE_BFLOAT16};
  const double values[5] = {NAN, INFINITY, -INFINITY, 0, -1e30};
  for (int k = 0; k < 4; k++) {
    stax_tensor_t* x = kt_make_codec(dtypes[k], 1, dims, values);
    out = NULL;
    CHECK_OK(run1(stax_kernel_IsNaN, STAX_OP_IsNaN, NULL, 0, x, &out));
    CHECK(stax_tensor_dtype(out) == STAX_DTYPE_BOOL);
    const uint8_t nan_expected[5] = {1, 0, 0, 0, 0};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[i], nan_expected[i]);
    stax_tensor_release(out);
    for (int mode = 0; mode < 4; mode++) {
      stax_node_attr_t attrs[2] = {kt_attr_int("detect_negative", mode & 1),
                                   kt_attr_int("detect_positive", (mode >> 1) & 1)};
      out = NULL;
      CHECK_OK(run1(stax_kernel_IsInf, STAX_OP_IsInf, attrs, 2, x, &out));
      uint8_t* r = stax_tensor_data(out);
      CHECK_EQ_INT(r[0], 0);
      CHECK_EQ_INT(r[1], (mode >> 1) & 1);
      /* -1e30 overflows float16 to -inf; that is an infinity of the input dtype */
      CHECK_EQ_INT(r[2], mode & 1);
      CHECK_EQ_INT(r[3], 0);
      CHECK_EQ_INT(r[4], dtypes[k] == STAX_DTYPE_FLOAT16 ? (mode & 1) : 0);
      stax_tensor_release(out);
    }
    out = NULL;
    CHECK_OK(run1(stax_kernel_IsInf, STAX_OP_IsInf, NULL, 0, x, &out)); /* both by default */
    CHECK(((uint8_t*)stax_tensor_data(out))[1] == 1 && ((uint8_t*)stax_tensor_data(out))[2] == 1);
    stax_tensor_release(out);
    stax_tensor_release(x);
  }
  stax_tensor_release(b);
}

/* ---- Clip -------------------------------------------------------------------------------- */

static void test_clip(void) {
  const int64_t dims[2] = {2, 3};
  const double values[6] = {-5, -1, 0, 1, 5, 10};
  const stax_dtype_t dtypes[6] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT16, STAX_DTYPE_INT8,
                                  STAX_DTYPE_INT64, STAX_DTYPE_UINT16, STAX_DTYPE_FLOAT64};
  for (int k = 0; k < 6; k++) {
    stax_dtype_t dtype = dtypes[k];
    double v[6];
    for (int i = 0; i < 6; i++)
      v[i] = stax_dtype_is_unsigned_int(dtype) ? values[i] + 5 : values[i];
    stax_tensor_t* x = kt_make_codec(dtype, 2, dims, v);
    stax_tensor_t* low =
        kt_make_codec(dtype, 0, NULL, (double[]){stax_dtype_is_unsigned_int(dtype) ? 4 : -1});
    const int64_t one[1] = {1};
    stax_tensor_t* high =
        kt_make_codec(dtype, 1, one, (double[]){stax_dtype_is_unsigned_int(dtype) ? 9 : 4});
    double lo = kt_get_codec(low, 0), hi = kt_get_codec(high, 0);
    /* both bounds, only min, only max (min omitted as NULL), none */
    stax_tensor_t* cases[4][3] = {{x, low, high}, {x, low, NULL}, {x, NULL, high}, {x, NULL, NULL}};
    for (int c = 0; c < 4; c++) {
      stax_tensor_t* out = NULL;
      CHECK_OK(kt_run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, cases[c], c == 1 ? 2 : 3, &out,
                          1, NULL));
      for (int64_t i = 0; out && i < 6; i++) {
        double e = kt_get_codec(x, i);
        if (cases[c][1] && e < lo) e = lo;
        if (cases[c][2] && e > hi) e = hi;
        CHECK_NEAR(kt_get_codec(out, i), e, 0);
      }
      if (out) stax_tensor_release(out);
    }
    /* min > max: everything becomes max */
    stax_tensor_t* inverted[3] = {x, high, low};
    stax_tensor_t* out = NULL;
    CHECK_OK(kt_run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, inverted, 3, &out, 1, NULL));
    for (int64_t i = 0; out && i < 6; i++) CHECK_NEAR(kt_get_codec(out, i), lo, 0);
    if (out) stax_tensor_release(out);
    kt_release_all((stax_tensor_t*[]){x, low, high}, 3);
  }
  /* int64 bounds beyond 2^53 stay exact */
  int64_t big[3] = {INT64_MAX, INT64_MAX - 3, 0}, bound = INT64_MAX - 1;
  const int64_t three[1] = {3};
  stax_tensor_t* bx = kt_make_raw(STAX_DTYPE_INT64, 1, three, big);
  stax_tensor_t* bhigh = kt_make_raw(STAX_DTYPE_INT64, 0, NULL, &bound);
  stax_tensor_t* big_inputs[3] = {bx, NULL, bhigh};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, big_inputs, 3, &out, 1, NULL));
  CHECK(((int64_t*)stax_tensor_data(out))[0] == INT64_MAX - 1);
  CHECK(((int64_t*)stax_tensor_data(out))[1] == INT64_MAX - 3);
  stax_tensor_release(out);
  out = NULL;
  /* opset-6 attributes */
  const int64_t four[1] = {4};
  stax_tensor_t* fx = kt_make_codec(STAX_DTYPE_FLOAT32, 1, four, (double[]){-3, -0.5, 0.5, 3});
  stax_node_attr_t attrs[2] = {kt_attr_float("min", -1.0f), kt_attr_float("max", 1.0f)};
  CHECK_OK(kt_run_kernel(stax_kernel_Clip, STAX_OP_Clip, attrs, 2, &fx, 1, &out, 1, NULL));
  const double expected[4] = {-1, -0.5, 0.5, 1};
  for (int i = 0; i < 4; i++) CHECK_NEAR(kt_get_codec(out, i), expected[i], 0);
  stax_tensor_release(out);
  out = NULL;
  /* errors: a bound that is not one element, a bound of another dtype */
  const int64_t two[1] = {2};
  stax_tensor_t* pair = kt_make_codec(STAX_DTYPE_FLOAT32, 1, two, (double[]){0, 1});
  stax_tensor_t* bad_shape[2] = {fx, pair};
  CHECK_ERROR(kt_run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, bad_shape, 2, &out, 1, NULL),
              STAX_INVALID_ARGUMENT,
              "Clip node 'node0': input 1 (min) must be a scalar, got dims [2]");
  stax_tensor_t* bad_dtype[3] = {fx, NULL, bhigh};
  CHECK_ERROR(kt_run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, bad_dtype, 3, &out, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 2 (max) is int64 but input 0 is float32");
  CHECK(out == NULL);
  kt_release_all((stax_tensor_t*[]){bx, bhigh, fx, pair}, 4);
}

/* ---- Identity, Dropout ------------------------------------------------------------------- */

static void test_identity(void) {
  const int64_t dims[2] = {3, 4};
  double values[12];
  for (int i = 0; i < 12; i++) values[i] = i;
  stax_tensor_t* base = kt_make_codec(STAX_DTYPE_INT16, 2, dims, values);
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &x));
  /* no output given: a view, sharing the buffer */
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Identity, STAX_OP_Identity, NULL, 0, x, &out));
  CHECK(out && stax_tensor_buffer(out) == stax_tensor_buffer(base));
  for (int64_t i = 0; out && i < 12; i++) CHECK_NEAR(kt_get_codec(out, i), kt_get_codec(x, i), 0);
  if (out) stax_tensor_release(out);
  /* preallocated: a copy */
  const int64_t t_dims[2] = {4, 3};
  stax_tensor_t* preallocated = kt_make_codec(STAX_DTYPE_INT16, 2, t_dims, NULL);
  out = preallocated;
  CHECK_OK(run1(stax_kernel_Identity, STAX_OP_Identity, NULL, 0, x, &out));
  CHECK(out == preallocated);
  for (int64_t i = 0; i < 12; i++) CHECK_NEAR(kt_get_codec(preallocated, i), kt_get_codec(x, i), 0);
  stax_tensor_t* wrong = kt_make_codec(STAX_DTYPE_INT16, 2, dims, NULL);
  out = wrong;
  CHECK_ERROR(run1(stax_kernel_Identity, STAX_OP_Identity, NULL, 0, x, &out), STAX_SHAPE_MISMATCH,
              "Identity node 'node0': output 0");
  kt_release_all((stax_tensor_t*[]){base, x, preallocated, wrong}, 4);
}

static void test_dropout(void) {
  const int64_t dims[2] = {2, 3};
  stax_tensor_t* x = kt_make_codec(STAX_DTYPE_FLOAT32, 2, dims, (double[]){1, -2, 3, -4, 5, -6});
  stax_tensor_t* ratio = kt_make_codec(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){0.3});
  stax_tensor_t* training_off = kt_make_codec(STAX_DTYPE_BOOL, 0, NULL, (double[]){0});
  stax_tensor_t* inputs[3] = {x, ratio, training_off};
  stax_tensor_t* outputs[2] = {NULL, NULL};
  CHECK_OK(kt_run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, inputs, 3, outputs, 2, NULL));
  CHECK(outputs[0] && outputs[1] && stax_tensor_dtype(outputs[1]) == STAX_DTYPE_BOOL);
  for (int64_t i = 0; outputs[0] && i < 6; i++) {
    CHECK_NEAR(kt_get_codec(outputs[0], i), kt_get_codec(x, i), 0);
    CHECK_EQ_INT(((uint8_t*)stax_tensor_data(outputs[1]))[i], 1);
  }
  kt_release_all(outputs, 2);
  /* output only */
  stax_tensor_t* only[1] = {NULL};
  CHECK_OK(kt_run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, &x, 1, only, 1, NULL));
  CHECK(only[0] && kt_get_codec(only[0], 5) == -6);
  kt_release_all(only, 1);
  /* training with a ratio is refused; a ratio of 0 in training is the identity */
  stax_tensor_t* training_on = kt_make_codec(STAX_DTYPE_BOOL, 0, NULL, (double[]){1});
  stax_tensor_t* training[3] = {x, ratio, training_on};
  outputs[0] = outputs[1] = NULL;
  CHECK_ERROR(
      kt_run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, training, 3, outputs, 2, NULL),
      STAX_UNIMPLEMENTED, "Dropout node 'node0': training mode");
  stax_tensor_t* zero = kt_make_codec(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){0});
  stax_tensor_t* training_zero[3] = {x, zero, training_on};
  CHECK_OK(kt_run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, training_zero, 3, outputs, 2,
                      NULL));
  kt_release_all(outputs, 2);
  outputs[0] = outputs[1] = NULL;
  stax_tensor_t* bad_ratio = kt_make_codec(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){1.5});
  stax_tensor_t* bad[2] = {x, bad_ratio};
  CHECK_ERROR(kt_run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, bad, 2, outputs, 2, NULL),
              STAX_INVALID_ARGUMENT, "input 1 (ratio) must be in [0, 1)");
  /* a preallocated mask of the wrong shape releases the output the kernel made */
  stax_tensor_t* wrong_mask = kt_make_codec(STAX_DTYPE_BOOL, 1, (int64_t[]){6}, NULL);
  outputs[0] = NULL;
  outputs[1] = wrong_mask;
  CHECK_ERROR(kt_run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, &x, 1, outputs, 2, NULL),
              STAX_SHAPE_MISMATCH, "output 1");
  CHECK(outputs[0] == NULL && outputs[1] == wrong_mask);
  kt_release_all((stax_tensor_t*[]){x, ratio, training_off, training_on, zero, bad_ratio, wrong_mask},
              7);
}

/* ---- outputs, zero sizes, threads -------------------------------------------------------- */

static void test_outputs_and_sizes(void) {
  const int64_t dims[3] = {2, 0, 3};
  stax_tensor_t* empty = kt_make_codec(STAX_DTYPE_FLOAT32, 3, dims, NULL);
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Exp, STAX_OP_Exp, NULL, 0, empty, &out));
  CHECK(out && stax_tensor_element_count(out) == 0 && stax_tensor_rank(out) == 3);
  if (out) stax_tensor_release(out);
  stax_tensor_t* scalar = kt_make_codec(STAX_DTYPE_FLOAT64, 0, NULL, (double[]){-2});
  out = NULL;
  CHECK_OK(run1(stax_kernel_Abs, STAX_OP_Abs, NULL, 0, scalar, &out));
  CHECK(out && stax_tensor_rank(out) == 0 && kt_get_codec(out, 0) == 2);
  if (out) stax_tensor_release(out);
  /* preallocated, right and wrong */
  stax_tensor_t* preallocated = kt_make_codec(STAX_DTYPE_FLOAT64, 0, NULL, NULL);
  out = preallocated;
  CHECK_OK(run1(stax_kernel_Neg, STAX_OP_Neg, NULL, 0, scalar, &out));
  CHECK(out == preallocated && kt_get_codec(preallocated, 0) == 2);
  const int64_t one[1] = {1};
  stax_tensor_t* wrong = kt_make_codec(STAX_DTYPE_FLOAT64, 1, one, NULL);
  out = wrong;
  CHECK_ERROR(run1(stax_kernel_Neg, STAX_OP_Neg, NULL, 0, scalar, &out), STAX_SHAPE_MISMATCH,
              "Neg node 'node0': output 0");
  stax_tensor_t* wrong_dtype = kt_make_codec(STAX_DTYPE_FLOAT64, 0, NULL, NULL);
  out = wrong_dtype;
  CHECK_ERROR(run1(stax_kernel_IsNaN, STAX_OP_IsNaN, NULL, 0, scalar, &out), STAX_SHAPE_MISMATCH,
              "bool");
  kt_release_all((stax_tensor_t*[]){empty, scalar, preallocated, wrong, wrong_dtype}, 5);
}

static void test_thread_pool(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  const int64_t dims[2] = {513, 401};
  int64_t n = dims[0] * dims[1];
  double* values = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) values[i] = (double)(i % 301) / 50.0 - 3;
  const stax_dtype_t dtypes[2] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT16};
  for (int k = 0; k < 2; k++) {
    stax_tensor_t* x = kt_make_codec(dtypes[k], 2, dims, values);
    stax_tensor_t* xt = NULL;
    CHECK_OK(stax_tensor_transpose(kt_allocator(), x, NULL, &xt));
    stax_tensor_t* sources[2] = {x, xt};
    for (int s = 0; s < 2; s++) {
      stax_tensor_t* out = NULL;
      CHECK_OK(kt_run_kernel(stax_kernel_Sigmoid, STAX_OP_Sigmoid, NULL, 0, &sources[s], 1, &out, 1,
                          pool));
      int64_t mismatches = 0;
      for (int64_t i = 0; out && i < n; i++) {
        double expected = 1 / (1 + exp(-kt_get_codec(sources[s], i)));
        if (fabs(kt_get_codec(out, i) - expected) > (k ? 2e-3 : 1e-6)) mismatches++;
      }
      CHECK_EQ_INT(mismatches, 0);
      if (out) stax_tensor_release(out);
    }
    kt_release_all((stax_tensor_t*[]){x, xt}, 2);
  }
  free(values);
  stax_threadpool_destroy(pool);
}

/* float32 Erf takes a vectorized polynomial (kernels/fast_math.h): over 120001 points of
 * [-6, 6] (contiguous, so the vector loop and its tail both run) its relative error against
 * double erf stays below 1e-6, and the special values come out as libm's: signed zeros,
 * +-1 at +-inf and far out, NaN stays NaN, tiny and subnormal inputs scale by 2/sqrt(pi). */
static void test_erf_float32_fast_path(void) {
  enum { N = 120001, SPECIAL = 10 };
  const float special[SPECIAL] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN,
                                  1e30f, -1e30f, 1e-20f, 1e-40f, 0.99999994f};
  const int64_t dims[1] = {N + SPECIAL};
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_create(kt_allocator(), STAX_DTYPE_FLOAT32, 1, dims, &x));
  float* in = stax_tensor_data(x);
  for (int i = 0; i < N; i++) in[i] = -6.0f + 12.0f * (float)i / (float)(N - 1);
  for (int i = 0; i < SPECIAL; i++) in[N + i] = special[i];
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Erf, STAX_OP_Erf, NULL, 0, x, &out));
  const float* y = out ? stax_tensor_data(out) : NULL;
  double worst = 0;
  for (int i = 0; y && i < N + SPECIAL; i++) {
    double expected = erf((double)in[i]);
    if (isnan(expected)) {
      CHECK(isnan(y[i]));
      continue;
    }
    double error = fabs(y[i] - expected);
    /* Subnormal results carry fewer bits: an absolute bound there. */
    double allowed = fabs(expected) < 1e-37 ? 1e-44 : 1e-6 * fabs(expected);
    if (error > allowed) fprintf(stderr, "erf(%.9g): %.9g, libm %.9g\n", in[i], y[i], expected);
    CHECK(error <= allowed);
    if (fabs(expected) >= 1e-37 && error / fabs(expected) > worst) worst = error / fabs(expected);
    if (expected == 0) CHECK((signbit(y[i]) != 0) == (signbit(expected) != 0));
  }
  printf("  float32 erf: worst relative error %.2g\n", worst);
  kt_release_all((stax_tensor_t*[]){x, out}, 2);
}

STAX_TEST_MAIN(STAX_TEST(test_float_ops), STAX_TEST(test_erf_float32_fast_path), STAX_TEST(test_round_half_to_even),
               STAX_TEST(test_attributes), STAX_TEST(test_nan_propagation),
               STAX_TEST(test_integer_ops), STAX_TEST(test_predicates), STAX_TEST(test_clip),
               STAX_TEST(test_identity), STAX_TEST(test_dropout),
               STAX_TEST(test_outputs_and_sizes), STAX_TEST(test_thread_pool))
