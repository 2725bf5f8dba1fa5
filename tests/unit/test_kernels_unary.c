/* Tests for the unary kernels (src/kernels/unary.c): every op against libm in double on
 * float32/float64 and the half types, integer variants with wrap-around at the extremes, NaN
 * handling, attributes and their defaults, Clip bounds from inputs and attributes, IsInf
 * flags, Identity as a view, Dropout in inference mode, non-contiguous inputs, preallocated
 * outputs, thread pool runs and the error paths. */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static stax_allocator_t allocator(void) { return stax_allocator_system(); }

static double load_double(stax_dtype_t dtype, const void* base, int64_t i) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: return ((const float*)base)[i];
    case STAX_DTYPE_FLOAT64: return ((const double*)base)[i];
    case STAX_DTYPE_FLOAT16: return stax_f16_to_f32(((const uint16_t*)base)[i]);
    case STAX_DTYPE_BFLOAT16: return stax_bf16_to_f32(((const uint16_t*)base)[i]);
    case STAX_DTYPE_INT8: return ((const int8_t*)base)[i];
    case STAX_DTYPE_INT16: return ((const int16_t*)base)[i];
    case STAX_DTYPE_INT32: return ((const int32_t*)base)[i];
    case STAX_DTYPE_INT64: return (double)((const int64_t*)base)[i];
    case STAX_DTYPE_UINT8: return ((const uint8_t*)base)[i];
    case STAX_DTYPE_UINT16: return ((const uint16_t*)base)[i];
    case STAX_DTYPE_UINT32: return ((const uint32_t*)base)[i];
    case STAX_DTYPE_UINT64: return (double)((const uint64_t*)base)[i];
    case STAX_DTYPE_BOOL: return ((const uint8_t*)base)[i];
    default: return NAN;
  }
}

static void store_double(stax_dtype_t dtype, void* base, int64_t i, double v) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: ((float*)base)[i] = (float)v; break;
    case STAX_DTYPE_FLOAT64: ((double*)base)[i] = v; break;
    case STAX_DTYPE_FLOAT16: ((uint16_t*)base)[i] = stax_f32_to_f16((float)v); break;
    case STAX_DTYPE_BFLOAT16: ((uint16_t*)base)[i] = stax_f32_to_bf16((float)v); break;
    case STAX_DTYPE_INT8: ((int8_t*)base)[i] = (int8_t)v; break;
    case STAX_DTYPE_INT16: ((int16_t*)base)[i] = (int16_t)v; break;
    case STAX_DTYPE_INT32: ((int32_t*)base)[i] = (int32_t)v; break;
    case STAX_DTYPE_INT64: ((int64_t*)base)[i] = (int64_t)v; break;
    case STAX_DTYPE_UINT8: ((uint8_t*)base)[i] = (uint8_t)v; break;
    case STAX_DTYPE_UINT16: ((uint16_t*)base)[i] = (uint16_t)v; break;
    case STAX_DTYPE_UINT32: ((uint32_t*)base)[i] = (uint32_t)v; break;
    case STAX_DTYPE_UINT64: ((uint64_t*)base)[i] = (uint64_t)v; break;
    case STAX_DTYPE_BOOL: ((uint8_t*)base)[i] = (uint8_t)(v != 0); break;
    default: break;
  }
}

static stax_tensor_t* make_tensor(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                  const double* values) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(allocator(), dtype, rank, dims, &t));
  if (!t) return NULL;
  int64_t n = stax_tensor_element_count(t);
  for (int64_t i = 0; i < n; i++)
    store_double(dtype, stax_tensor_data(t), i, values ? values[i] : 0);
  return t;
}

static stax_tensor_t* make_raw(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                               const void* bytes) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(allocator(), dtype, rank, dims, &t));
  if (t)
    memcpy(stax_tensor_data(t), bytes,
           (size_t)stax_tensor_element_count(t) * stax_dtype_size(dtype));
  return t;
}

static int64_t view_offset(const stax_tensor_t* t, int64_t i) {
  int32_t rank = stax_tensor_rank(t);
  const int64_t* dims = stax_tensor_dims(t);
  const int64_t* strides = stax_tensor_strides(t);
  int64_t offset = stax_tensor_offset(t);
  for (int32_t d = rank - 1; d >= 0; d--) {
    offset += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return offset;
}

static double get(const stax_tensor_t* t, int64_t i) {
  return load_double(stax_tensor_dtype(t), stax_buffer_data(stax_tensor_buffer(t)),
                     view_offset(t, i));
}

static stax_status_t run_kernel(stax_kernel_fn fn, stax_op_t op, const stax_node_attr_t* attrs,
                                int32_t attr_count, stax_tensor_t** inputs, int32_t input_count,
                                stax_tensor_t** outputs, int32_t output_count,
                                stax_threadpool_t* pool) {
  stax_node_t node;
  memset(&node, 0, sizeof(node));
  node.op = op;
  node.name = "node0";
  node.attr_count = attr_count;
  node.attrs = (stax_node_attr_t*)attrs;
  stax_kernel_call_t call;
  memset(&call, 0, sizeof(call));
  call.node = &node;
  call.allocator = allocator();
  call.pool = pool;
  call.input_count = input_count;
  call.inputs = inputs;
  call.output_count = output_count;
  call.outputs = outputs;
  return fn(&call);
}

static stax_status_t run1(stax_kernel_fn fn, stax_op_t op, const stax_node_attr_t* attrs,
                          int32_t attr_count, stax_tensor_t* x, stax_tensor_t** out) {
  return run_kernel(fn, op, attrs, attr_count, &x, 1, out, 1, NULL);
}

static stax_node_attr_t float_attr(const char* name, float value) {
  stax_node_attr_t attr;
  memset(&attr, 0, sizeof(attr));
  attr.name = name;
  attr.type = STAX_ATTR_FLOAT;
  attr.value.f = value;
  return attr;
}

static stax_node_attr_t int_attr(const char* name, int64_t value) {
  stax_node_attr_t attr;
  memset(&attr, 0, sizeof(attr));
  attr.name = name;
  attr.type = STAX_ATTR_INT;
  attr.value.i = value;
  return attr;
}

static stax_node_attr_t string_attr(const char* name, const char* value) {
  stax_node_attr_t attr;
  memset(&attr, 0, sizeof(attr));
  attr.name = name;
  attr.type = STAX_ATTR_STRING;
  attr.value.s = value;
  return attr;
}

static void release_all(stax_tensor_t** tensors, int count) {
  for (int i = 0; i < count; i++)
    if (tensors[i]) stax_tensor_release(tensors[i]);
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
  stax_tensor_t* base = make_tensor(dtype, 2, dims, values);
  stax_tensor_t* transposed = NULL, *x = NULL;
  CHECK_OK(stax_tensor_transpose(allocator(), base, NULL, &transposed)); /* [2, N] */
  const int64_t starts[1] = {0}, ends[1] = {1};
  CHECK_OK(
      stax_tensor_slice(allocator(), transposed, 1, starts, ends, NULL, NULL, &x)); /* [1, N] */
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(c->fn, c->op, NULL, 0, x, &out));
  CHECK(out && stax_tensor_dtype(out) == dtype && stax_tensor_rank(out) == 2);
  bool half = dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16;
  double relative = dtype == STAX_DTYPE_FLOAT64 ? 1e-12 : dtype == STAX_DTYPE_FLOAT32 ? 2e-6
                    : dtype == STAX_DTYPE_FLOAT16                            ? 2e-3
                                                                             : 1.6e-2;
  for (int64_t i = 0; out && i < N; i++) {
    double input = get(x, i);
    double expected = c->reference(input);
    double tolerance = relative * fabs(expected) + (half ? relative : relative * 1e-2);
    if (fabs(get(out, i) - expected) > tolerance)
      fprintf(stderr, "%s on %s at %.9g: got %.9g want %.9g\n", stax_op_name(c->op),
              stax_dtype_name(dtype), input, get(out, i), expected);
    CHECK_NEAR(get(out, i), expected, tolerance);
  }
  release_all((stax_tensor_t*[]){base, transposed, x, out}, 4);
}

static void test_float_ops(void) {
  const stax_dtype_t dtypes[4] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16,
                                  STAX_DTYPE_BFLOAT16};
  for (size_t c = 0; c < sizeof(kFloatCases) / sizeof(kFloatCases[0]); c++)
    for (int k = 0; k < 4; k++) check_float_case(&kFloatCases[c], dtypes[k]);
}

static void test_round_half_to_even(void) {
  const int64_t dims[1] = {8};
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 1, dims,
                                 (double[]){0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 1e30});
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Round, STAX_OP_Round, NULL, 0, x, &out));
  const double expected[8] = {0, 2, 2, -0, -2, -2, 2, 1e30};
  for (int i = 0; i < 8; i++) CHECK_NEAR(get(out, i), (float)expected[i], 0);
  CHECK(signbit(get(out, 3)));
  release_all((stax_tensor_t*[]){x, out}, 2);
}

static void test_attributes(void) {
  const int64_t dims[1] = {4};
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT64, 1, dims, (double[]){-2, -0.25, 0.25, 2});
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
       {float_attr("alpha", 0.5f)},
       1,
       {-1, -0.125, 0.25, 2}},
      {stax_kernel_Elu,
       STAX_OP_Elu,
       {float_attr("alpha", 2.0f)},
       1,
       {2 * (exp(-2) - 1), 2 * (exp(-0.25) - 1), 0.25, 2}},
      {stax_kernel_Selu,
       STAX_OP_Selu,
       {float_attr("alpha", 2.0f), float_attr("gamma", 3.0f)},
       2,
       {3 * 2 * (exp(-2) - 1), 3 * 2 * (exp(-0.25) - 1), 0.75, 6}},
      {stax_kernel_Celu,
       STAX_OP_Celu,
       {float_attr("alpha", 2.0f)},
       1,
       {2 * (exp(-1) - 1), 2 * (exp(-0.125) - 1), 0.25, 2}},
      {stax_kernel_ThresholdedRelu,
       STAX_OP_ThresholdedRelu,
       {float_attr("alpha", 0.0f)},
       1,
       {0, 0, 0.25, 2}},
      {stax_kernel_HardSigmoid,
       STAX_OP_HardSigmoid,
       {float_attr("alpha", 0.5f), float_attr("beta", 0.25f)},
       2,
       {0, 0.125, 0.375, 1}},
      {stax_kernel_Shrink,
       STAX_OP_Shrink,
       {float_attr("bias", 1.0f), float_attr("lambd", 0.2f)},
       2,
       {-1, 0.75, -0.75, 1}},
      {stax_kernel_Gelu, STAX_OP_Gelu, {string_attr("approximate", "tanh")}, 1, {0}},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    out = NULL;
    CHECK_OK(run1(cases[c].fn, cases[c].op, cases[c].attrs, cases[c].attr_count, x, &out));
    for (int i = 0; out && i < 4; i++) {
      double expected = cases[c].expected[i];
      if (cases[c].op == STAX_OP_Gelu) {
        double v = get(x, i);
        expected = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      }
      CHECK_NEAR(get(out, i), expected, 1e-7);
    }
    if (out) stax_tensor_release(out);
  }
  /* bad attributes */
  out = NULL;
  stax_node_attr_t bad_gelu = string_attr("approximate", "erf");
  CHECK_ERROR(run1(stax_kernel_Gelu, STAX_OP_Gelu, &bad_gelu, 1, x, &out), STAX_INVALID_ARGUMENT,
              "Gelu node 'node0': attribute 'approximate'");
  stax_node_attr_t zero_alpha = float_attr("alpha", 0.0f);
  CHECK_ERROR(run1(stax_kernel_Celu, STAX_OP_Celu, &zero_alpha, 1, x, &out), STAX_INVALID_ARGUMENT,
              "Celu node 'node0': attribute 'alpha' must not be 0");
  stax_node_attr_t wrong_type = int_attr("alpha", 1);
  CHECK_ERROR(run1(stax_kernel_LeakyRelu, STAX_OP_LeakyRelu, &wrong_type, 1, x, &out),
              STAX_INVALID_ARGUMENT, "attribute 'alpha' must be FLOAT");
  CHECK(out == NULL);
  stax_tensor_release(x);
}

static void test_nan_propagation(void) {
  const int64_t dims[1] = {1};
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 1, dims, (double[]){NAN});
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
    if (!(out && isnan(get(out, 0)))) fprintf(stderr, "%s drops NaN\n", stax_op_name(ops[k]));
    CHECK(out && isnan(get(out, 0)));
    if (out) stax_tensor_release(out);
  }
  stax_tensor_release(x);
}

/* ---- integer variants -------------------------------------------------------------------- */

static void test_integer_ops(void) {
  const int64_t dims[1] = {5};
  int32_t values[5] = {INT32_MIN, -7, 0, 7, INT32_MAX};
  stax_tensor_t* x = make_raw(STAX_DTYPE_INT32, 1, dims, values);
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
  stax_node_attr_t shrink_attrs[2] = {float_attr("bias", 1.5f), float_attr("lambd", 2.0f)};
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
  stax_tensor_t* ux = make_raw(STAX_DTYPE_UINT64, 1, three, u);
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
  stax_tensor_t* sx = make_raw(STAX_DTYPE_INT8, 1, two, small);
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
  CHECK_ERROR(run_kernel(stax_kernel_Tanh, STAX_OP_Tanh, NULL, 0, NULL, 0, &out, 1, NULL),
              STAX_INVALID_ARGUMENT, "input 0 is missing");
  CHECK(out == NULL);
  release_all((stax_tensor_t*[]){x, ux, sx}, 3);
}

/* ---- Not, IsNaN, IsInf ------------------------------------------------------------------- */

static void test_predicates(void) {
  const int64_t dims[1] = {5};
  uint8_t flags[5] = {0, 1, 2, 255, 0};
  stax_tensor_t* b = make_raw(STAX_DTYPE_BOOL, 1, dims, flags);
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Not, STAX_OP_Not, NULL, 0, b, &out));
  const uint8_t not_expected[5] = {1, 0, 0, 0, 1};
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[i], not_expected[i]);
  stax_tensor_release(out);
  const stax_dtype_t dtypes[4] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16,
                                  STAX_DTYPE_BFLOAT16};
  const double values[5] = {NAN, INFINITY, -INFINITY, 0, -1e30};
  for (int k = 0; k < 4; k++) {
    stax_tensor_t* x = make_tensor(dtypes[k], 1, dims, values);
    out = NULL;
    CHECK_OK(run1(stax_kernel_IsNaN, STAX_OP_IsNaN, NULL, 0, x, &out));
    CHECK(stax_tensor_dtype(out) == STAX_DTYPE_BOOL);
    const uint8_t nan_expected[5] = {1, 0, 0, 0, 0};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[i], nan_expected[i]);
    stax_tensor_release(out);
    for (int mode = 0; mode < 4; mode++) {
      stax_node_attr_t attrs[2] = {int_attr("detect_negative", mode & 1),
                                   int_attr("detect_positive", (mode >> 1) & 1)};
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
    stax_tensor_t* x = make_tensor(dtype, 2, dims, v);
    stax_tensor_t* low =
        make_tensor(dtype, 0, NULL, (double[]){stax_dtype_is_unsigned_int(dtype) ? 4 : -1});
    const int64_t one[1] = {1};
    stax_tensor_t* high =
        make_tensor(dtype, 1, one, (double[]){stax_dtype_is_unsigned_int(dtype) ? 9 : 4});
    double lo = get(low, 0), hi = get(high, 0);
    /* both bounds, only min, only max (min omitted as NULL), none */
    stax_tensor_t* cases[4][3] = {{x, low, high}, {x, low, NULL}, {x, NULL, high}, {x, NULL, NULL}};
    for (int c = 0; c < 4; c++) {
      stax_tensor_t* out = NULL;
      CHECK_OK(run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, cases[c], c == 1 ? 2 : 3, &out,
                          1, NULL));
      for (int64_t i = 0; out && i < 6; i++) {
        double e = get(x, i);
        if (cases[c][1] && e < lo) e = lo;
        if (cases[c][2] && e > hi) e = hi;
        CHECK_NEAR(get(out, i), e, 0);
      }
      if (out) stax_tensor_release(out);
    }
    /* min > max: everything becomes max */
    stax_tensor_t* inverted[3] = {x, high, low};
    stax_tensor_t* out = NULL;
    CHECK_OK(run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, inverted, 3, &out, 1, NULL));
    for (int64_t i = 0; out && i < 6; i++) CHECK_NEAR(get(out, i), lo, 0);
    if (out) stax_tensor_release(out);
    release_all((stax_tensor_t*[]){x, low, high}, 3);
  }
  /* int64 bounds beyond 2^53 stay exact */
  int64_t big[3] = {INT64_MAX, INT64_MAX - 3, 0}, bound = INT64_MAX - 1;
  const int64_t three[1] = {3};
  stax_tensor_t* bx = make_raw(STAX_DTYPE_INT64, 1, three, big);
  stax_tensor_t* bhigh = make_raw(STAX_DTYPE_INT64, 0, NULL, &bound);
  stax_tensor_t* big_inputs[3] = {bx, NULL, bhigh};
  stax_tensor_t* out = NULL;
  CHECK_OK(run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, big_inputs, 3, &out, 1, NULL));
  CHECK(((int64_t*)stax_tensor_data(out))[0] == INT64_MAX - 1);
  CHECK(((int64_t*)stax_tensor_data(out))[1] == INT64_MAX - 3);
  stax_tensor_release(out);
  out = NULL;
  /* opset-6 attributes */
  const int64_t four[1] = {4};
  stax_tensor_t* fx = make_tensor(STAX_DTYPE_FLOAT32, 1, four, (double[]){-3, -0.5, 0.5, 3});
  stax_node_attr_t attrs[2] = {float_attr("min", -1.0f), float_attr("max", 1.0f)};
  CHECK_OK(run_kernel(stax_kernel_Clip, STAX_OP_Clip, attrs, 2, &fx, 1, &out, 1, NULL));
  const double expected[4] = {-1, -0.5, 0.5, 1};
  for (int i = 0; i < 4; i++) CHECK_NEAR(get(out, i), expected[i], 0);
  stax_tensor_release(out);
  out = NULL;
  /* errors: a bound that is not one element, a bound of another dtype */
  const int64_t two[1] = {2};
  stax_tensor_t* pair = make_tensor(STAX_DTYPE_FLOAT32, 1, two, (double[]){0, 1});
  stax_tensor_t* bad_shape[2] = {fx, pair};
  CHECK_ERROR(run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, bad_shape, 2, &out, 1, NULL),
              STAX_INVALID_ARGUMENT,
              "Clip node 'node0': input 1 (min) must be a scalar, got dims [2]");
  stax_tensor_t* bad_dtype[3] = {fx, NULL, bhigh};
  CHECK_ERROR(run_kernel(stax_kernel_Clip, STAX_OP_Clip, NULL, 0, bad_dtype, 3, &out, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 2 (max) is int64 but input 0 is float32");
  CHECK(out == NULL);
  release_all((stax_tensor_t*[]){bx, bhigh, fx, pair}, 4);
}

/* ---- Identity, Dropout ------------------------------------------------------------------- */

static void test_identity(void) {
  const int64_t dims[2] = {3, 4};
  double values[12];
  for (int i = 0; i < 12; i++) values[i] = i;
  stax_tensor_t* base = make_tensor(STAX_DTYPE_INT16, 2, dims, values);
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_transpose(allocator(), base, NULL, &x));
  /* no output given: a view, sharing the buffer */
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Identity, STAX_OP_Identity, NULL, 0, x, &out));
  CHECK(out && stax_tensor_buffer(out) == stax_tensor_buffer(base));
  for (int64_t i = 0; out && i < 12; i++) CHECK_NEAR(get(out, i), get(x, i), 0);
  if (out) stax_tensor_release(out);
  /* preallocated: a copy */
  const int64_t t_dims[2] = {4, 3};
  stax_tensor_t* preallocated = make_tensor(STAX_DTYPE_INT16, 2, t_dims, NULL);
  out = preallocated;
  CHECK_OK(run1(stax_kernel_Identity, STAX_OP_Identity, NULL, 0, x, &out));
  CHECK(out == preallocated);
  for (int64_t i = 0; i < 12; i++) CHECK_NEAR(get(preallocated, i), get(x, i), 0);
  stax_tensor_t* wrong = make_tensor(STAX_DTYPE_INT16, 2, dims, NULL);
  out = wrong;
  CHECK_ERROR(run1(stax_kernel_Identity, STAX_OP_Identity, NULL, 0, x, &out), STAX_SHAPE_MISMATCH,
              "Identity node 'node0': output 0");
  release_all((stax_tensor_t*[]){base, x, preallocated, wrong}, 4);
}

static void test_dropout(void) {
  const int64_t dims[2] = {2, 3};
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 2, dims, (double[]){1, -2, 3, -4, 5, -6});
  stax_tensor_t* ratio = make_tensor(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){0.3});
  stax_tensor_t* training_off = make_tensor(STAX_DTYPE_BOOL, 0, NULL, (double[]){0});
  stax_tensor_t* inputs[3] = {x, ratio, training_off};
  stax_tensor_t* outputs[2] = {NULL, NULL};
  CHECK_OK(run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, inputs, 3, outputs, 2, NULL));
  CHECK(outputs[0] && outputs[1] && stax_tensor_dtype(outputs[1]) == STAX_DTYPE_BOOL);
  for (int64_t i = 0; outputs[0] && i < 6; i++) {
    CHECK_NEAR(get(outputs[0], i), get(x, i), 0);
    CHECK_EQ_INT(((uint8_t*)stax_tensor_data(outputs[1]))[i], 1);
  }
  release_all(outputs, 2);
  /* output only */
  stax_tensor_t* only[1] = {NULL};
  CHECK_OK(run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, &x, 1, only, 1, NULL));
  CHECK(only[0] && get(only[0], 5) == -6);
  release_all(only, 1);
  /* training with a ratio is refused; a ratio of 0 in training is the identity */
  stax_tensor_t* training_on = make_tensor(STAX_DTYPE_BOOL, 0, NULL, (double[]){1});
  stax_tensor_t* training[3] = {x, ratio, training_on};
  outputs[0] = outputs[1] = NULL;
  CHECK_ERROR(
      run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, training, 3, outputs, 2, NULL),
      STAX_UNIMPLEMENTED, "Dropout node 'node0': training mode");
  stax_tensor_t* zero = make_tensor(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){0});
  stax_tensor_t* training_zero[3] = {x, zero, training_on};
  CHECK_OK(run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, training_zero, 3, outputs, 2,
                      NULL));
  release_all(outputs, 2);
  outputs[0] = outputs[1] = NULL;
  stax_tensor_t* bad_ratio = make_tensor(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){1.5});
  stax_tensor_t* bad[2] = {x, bad_ratio};
  CHECK_ERROR(run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, bad, 2, outputs, 2, NULL),
              STAX_INVALID_ARGUMENT, "input 1 (ratio) must be in [0, 1)");
  /* a preallocated mask of the wrong shape releases the output the kernel made */
  stax_tensor_t* wrong_mask = make_tensor(STAX_DTYPE_BOOL, 1, (int64_t[]){6}, NULL);
  outputs[0] = NULL;
  outputs[1] = wrong_mask;
  CHECK_ERROR(run_kernel(stax_kernel_Dropout, STAX_OP_Dropout, NULL, 0, &x, 1, outputs, 2, NULL),
              STAX_SHAPE_MISMATCH, "output 1");
  CHECK(outputs[0] == NULL && outputs[1] == wrong_mask);
  release_all((stax_tensor_t*[]){x, ratio, training_off, training_on, zero, bad_ratio, wrong_mask},
              7);
}

/* ---- outputs, zero sizes, threads -------------------------------------------------------- */

static void test_outputs_and_sizes(void) {
  const int64_t dims[3] = {2, 0, 3};
  stax_tensor_t* empty = make_tensor(STAX_DTYPE_FLOAT32, 3, dims, NULL);
  stax_tensor_t* out = NULL;
  CHECK_OK(run1(stax_kernel_Exp, STAX_OP_Exp, NULL, 0, empty, &out));
  CHECK(out && stax_tensor_element_count(out) == 0 && stax_tensor_rank(out) == 3);
  if (out) stax_tensor_release(out);
  stax_tensor_t* scalar = make_tensor(STAX_DTYPE_FLOAT64, 0, NULL, (double[]){-2});
  out = NULL;
  CHECK_OK(run1(stax_kernel_Abs, STAX_OP_Abs, NULL, 0, scalar, &out));
  CHECK(out && stax_tensor_rank(out) == 0 && get(out, 0) == 2);
  if (out) stax_tensor_release(out);
  /* preallocated, right and wrong */
  stax_tensor_t* preallocated = make_tensor(STAX_DTYPE_FLOAT64, 0, NULL, NULL);
  out = preallocated;
  CHECK_OK(run1(stax_kernel_Neg, STAX_OP_Neg, NULL, 0, scalar, &out));
  CHECK(out == preallocated && get(preallocated, 0) == 2);
  const int64_t one[1] = {1};
  stax_tensor_t* wrong = make_tensor(STAX_DTYPE_FLOAT64, 1, one, NULL);
  out = wrong;
  CHECK_ERROR(run1(stax_kernel_Neg, STAX_OP_Neg, NULL, 0, scalar, &out), STAX_SHAPE_MISMATCH,
              "Neg node 'node0': output 0");
  stax_tensor_t* wrong_dtype = make_tensor(STAX_DTYPE_FLOAT64, 0, NULL, NULL);
  out = wrong_dtype;
  CHECK_ERROR(run1(stax_kernel_IsNaN, STAX_OP_IsNaN, NULL, 0, scalar, &out), STAX_SHAPE_MISMATCH,
              "bool");
  release_all((stax_tensor_t*[]){empty, scalar, preallocated, wrong, wrong_dtype}, 5);
}

static void test_thread_pool(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(allocator(), 2, &pool));
  const int64_t dims[2] = {513, 401};
  int64_t n = dims[0] * dims[1];
  double* values = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) values[i] = (double)(i % 301) / 50.0 - 3;
  const stax_dtype_t dtypes[2] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT16};
  for (int k = 0; k < 2; k++) {
    stax_tensor_t* x = make_tensor(dtypes[k], 2, dims, values);
    stax_tensor_t* xt = NULL;
    CHECK_OK(stax_tensor_transpose(allocator(), x, NULL, &xt));
    stax_tensor_t* sources[2] = {x, xt};
    for (int s = 0; s < 2; s++) {
      stax_tensor_t* out = NULL;
      CHECK_OK(run_kernel(stax_kernel_Sigmoid, STAX_OP_Sigmoid, NULL, 0, &sources[s], 1, &out, 1,
                          pool));
      int64_t mismatches = 0;
      for (int64_t i = 0; out && i < n; i++) {
        double expected = 1 / (1 + exp(-get(sources[s], i)));
        if (fabs(get(out, i) - expected) > (k ? 2e-3 : 1e-6)) mismatches++;
      }
      CHECK_EQ_INT(mismatches, 0);
      if (out) stax_tensor_release(out);
    }
    release_all((stax_tensor_t*[]){x, xt}, 2);
  }
  free(values);
  stax_threadpool_destroy(pool);
}

STAX_TEST_MAIN(STAX_TEST(test_float_ops), STAX_TEST(test_round_half_to_even),
               STAX_TEST(test_attributes), STAX_TEST(test_nan_propagation),
               STAX_TEST(test_integer_ops), STAX_TEST(test_predicates), STAX_TEST(test_clip),
               STAX_TEST(test_identity), STAX_TEST(test_dropout),
               STAX_TEST(test_outputs_and_sizes), STAX_TEST(test_thread_pool))
