/* Tests for the binary, comparison, variadic and Where kernels (src/kernels/binary.c,
 * compare.c, variadic.c, where.c): every op on several dtypes against values computed here
 * element by element, numpy broadcasting (rank 0 through rank 6, zero-sized dims), views
 * (transposed, sliced, negative steps, broadcast), preallocated and in-place outputs, thread
 * pool runs, and the error paths (shape mismatch, dtype mismatch, integer division by zero). */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static const stax_dtype_t kNumericDtypes[] = {
    STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16,
    STAX_DTYPE_INT8,    STAX_DTYPE_INT16,   STAX_DTYPE_INT32,   STAX_DTYPE_INT64,
    STAX_DTYPE_UINT8,   STAX_DTYPE_UINT16,  STAX_DTYPE_UINT32,  STAX_DTYPE_UINT64};
#define NUMERIC_DTYPE_COUNT ((int)(sizeof(kNumericDtypes) / sizeof(kNumericDtypes[0])))

/* Logical index into `in` of output element i under numpy broadcasting. */
static int64_t broadcast_source(int32_t out_rank, const int64_t* out_dims, int64_t i,
                                const stax_tensor_t* in) {
  int32_t rank = stax_tensor_rank(in);
  const int64_t* dims = stax_tensor_dims(in);
  int64_t index = 0, scale = 1;
  for (int32_t d = out_rank - 1; d >= 0; d--) {
    int64_t coordinate = i % out_dims[d];
    i /= out_dims[d];
    int32_t in_d = d - (out_rank - rank);
    if (in_d < 0) continue;
    if (dims[in_d] != 1) index += coordinate * scale;
    scale *= dims[in_d];
  }
  return index;
}

static stax_status_t run2(stax_kernel_fn fn, stax_op_t op, stax_tensor_t* a, stax_tensor_t* b,
                          stax_tensor_t** out) {
  stax_tensor_t* inputs[2] = {a, b};
  return kt_run_kernel(fn, op, NULL, 0, inputs, 2, out, 1, NULL);
}

/* Deterministic small values: signed in [-9, 9], unsigned in [0, 18], never 0 when
 * `nonzero`. */
static double sample(stax_dtype_t dtype, int64_t i, int salt, bool nonzero) {
  int64_t v = (int64_t)((i * 7 + salt * 13) % 19) - 9;
  if (stax_dtype_is_unsigned_int(dtype)) v += 9;
  if (nonzero && v == 0) v = 3;
  if (stax_dtype_is_float(dtype)) return (double)v * 0.5;
  return (double)v;
}

/* ---- arithmetic on every dtype ----------------------------------------------------------- */

typedef enum arith_e { ARITH_ADD, ARITH_SUB, ARITH_MUL, ARITH_DIV, ARITH_MOD } arith_t;

static double arith_reference(arith_t op, stax_dtype_t dtype, double x, double y) {
  bool is_float = stax_dtype_is_float(dtype);
  switch (op) {
    case ARITH_ADD: return x + y;
    case ARITH_SUB: return x - y;
    case ARITH_MUL: return x * y;
    case ARITH_DIV: return is_float ? x / y : trunc(x / y);
    case ARITH_MOD: {
      double r = fmod(x, y);
      /* Integers use fmod = 0 here: the result takes the divisor's sign. */
      if (!is_float && r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
  }
  return NAN;
}

static void check_arith(arith_t op, stax_kernel_fn fn, stax_op_t op_id) {
  const int64_t a_dims[3] = {2, 3, 4}, b_dims[2] = {3, 1};
  for (int k = 0; k < NUMERIC_DTYPE_COUNT; k++) {
    stax_dtype_t dtype = kNumericDtypes[k];
    double a_values[24], b_values[3];
    for (int i = 0; i < 24; i++) a_values[i] = sample(dtype, i, 1, false);
    for (int i = 0; i < 3; i++) b_values[i] = sample(dtype, i, 2, true);
    /* Unsigned subtraction wraps; keep it in range so the reference stays simple. */
    if (op == ARITH_SUB && stax_dtype_is_unsigned_int(dtype))
      for (int i = 0; i < 24; i++) a_values[i] += 20;
    stax_tensor_t* a = kt_make_codec(dtype, 3, a_dims, a_values);
    stax_tensor_t* b = kt_make_codec(dtype, 2, b_dims, b_values);
    stax_node_attr_t fmod_attr = kt_attr_int("fmod", stax_dtype_is_float(dtype) ? 1 : 0);
    stax_tensor_t* inputs[2] = {a, b};
    stax_tensor_t* out = NULL;
    CHECK_OK(kt_run_kernel(fn, op_id, &fmod_attr, op == ARITH_MOD ? 1 : 0, inputs, 2, &out, 1,
                        NULL));
    CHECK(out && kt_dims_are(out, 3, a_dims) && stax_tensor_dtype(out) == dtype);
    for (int64_t i = 0; out && i < 24; i++) {
      double x = kt_get_codec(a, i), y = kt_get_codec(b, broadcast_source(3, a_dims, i, b));
      double expected = kt_round_to(dtype, arith_reference(op, dtype, x, y));
      double tolerance = (dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16)
                             ? 1e-2 * fabs(expected) + 1e-3
                             : 1e-6 * fabs(expected);
      if (fabs(kt_get_codec(out, i) - expected) > tolerance) {
        fprintf(stderr, "op %d dtype %s element %lld: %g op %g\n", (int)op,
                stax_dtype_name(dtype), (long long)i, x, y);
      }
      CHECK_NEAR(kt_get_codec(out, i), expected, tolerance);
    }
    if (out) stax_tensor_release(out);
    stax_tensor_release(a);
    stax_tensor_release(b);
  }
}

static void test_add_every_dtype(void) { check_arith(ARITH_ADD, stax_kernel_Add, STAX_OP_Add); }
static void test_sub_every_dtype(void) { check_arith(ARITH_SUB, stax_kernel_Sub, STAX_OP_Sub); }
static void test_mul_every_dtype(void) { check_arith(ARITH_MUL, stax_kernel_Mul, STAX_OP_Mul); }
static void test_div_every_dtype(void) { check_arith(ARITH_DIV, stax_kernel_Div, STAX_OP_Div); }
static void test_mod_every_dtype(void) { check_arith(ARITH_MOD, stax_kernel_Mod, STAX_OP_Mod); }

/* ---- integer edge cases ------------------------------------------------------------------ */

static void test_integer_wraparound(void) {
  const int64_t dims[1] = {2};
  {
    int8_t a[2] = {100, -128}, b[2] = {100, -1};
    stax_tensor_t* ta = kt_make_raw(STAX_DTYPE_INT8, 1, dims, a);
    stax_tensor_t* tb = kt_make_raw(STAX_DTYPE_INT8, 1, dims, b);
    stax_tensor_t* out = NULL;
    CHECK_OK(run2(stax_kernel_Add, STAX_OP_Add, ta, tb, &out));
    CHECK_EQ_INT(((int8_t*)stax_tensor_data(out))[0], -56);  /* 200 - 256 */
    CHECK_EQ_INT(((int8_t*)stax_tensor_data(out))[1], 127);  /* -129 + 256 */
    stax_tensor_release(out);
    out = NULL;
    CHECK_OK(run2(stax_kernel_Div, STAX_OP_Div, ta, tb, &out));
    CHECK_EQ_INT(((int8_t*)stax_tensor_data(out))[0], 1);
    CHECK_EQ_INT(((int8_t*)stax_tensor_data(out))[1], -128); /* -128 / -1 wraps */
    stax_tensor_release(out);
    stax_tensor_release(ta);
    stax_tensor_release(tb);
  }
  {
    uint16_t a[2] = {65535, 3}, b[2] = {65535, 5};
    stax_tensor_t* ta = kt_make_raw(STAX_DTYPE_UINT16, 1, dims, a);
    stax_tensor_t* tb = kt_make_raw(STAX_DTYPE_UINT16, 1, dims, b);
    stax_tensor_t* out = NULL;
    CHECK_OK(run2(stax_kernel_Mul, STAX_OP_Mul, ta, tb, &out));
    CHECK_EQ_INT(((uint16_t*)stax_tensor_data(out))[0], 1); /* (2^16-1)^2 mod 2^16 */
    CHECK_EQ_INT(((uint16_t*)stax_tensor_data(out))[1], 15);
    stax_tensor_release(out);
    out = NULL;
    CHECK_OK(run2(stax_kernel_Sub, STAX_OP_Sub, tb, ta, &out));
    CHECK_EQ_INT(((uint16_t*)stax_tensor_data(out))[0], 0);
    CHECK_EQ_INT(((uint16_t*)stax_tensor_data(out))[1], 2);
    stax_tensor_release(out);
    out = NULL;
    CHECK_OK(run2(stax_kernel_Sub, STAX_OP_Sub, ta, tb, &out));
    CHECK_EQ_INT(((uint16_t*)stax_tensor_data(out))[1], 65534); /* 3 - 5 wraps */
    stax_tensor_release(out);
    stax_tensor_release(ta);
    stax_tensor_release(tb);
  }
  {
    int64_t a[2] = {INT64_MAX, INT64_MIN}, b[2] = {2, -1};
    stax_tensor_t* ta = kt_make_raw(STAX_DTYPE_INT64, 1, dims, a);
    stax_tensor_t* tb = kt_make_raw(STAX_DTYPE_INT64, 1, dims, b);
    stax_tensor_t* out = NULL;
    CHECK_OK(run2(stax_kernel_Mul, STAX_OP_Mul, ta, tb, &out));
    CHECK(((int64_t*)stax_tensor_data(out))[0] == -2);       /* 2^64 - 2 wraps */
    CHECK(((int64_t*)stax_tensor_data(out))[1] == INT64_MIN); /* -MIN wraps */
    stax_tensor_release(out);
    out = NULL;
    CHECK_OK(run2(stax_kernel_Add, STAX_OP_Add, ta, ta, &out));
    CHECK(((int64_t*)stax_tensor_data(out))[0] == -2);
    CHECK(((int64_t*)stax_tensor_data(out))[1] == 0);
    stax_tensor_release(out);
    out = NULL;
    stax_node_attr_t fmod0 = kt_attr_int("fmod", 0);
    stax_tensor_t* inputs[2] = {ta, tb};
    CHECK_OK(kt_run_kernel(stax_kernel_Mod, STAX_OP_Mod, &fmod0, 1, inputs, 2, &out, 1, NULL));
    CHECK(((int64_t*)stax_tensor_data(out))[0] == 1);
    CHECK(((int64_t*)stax_tensor_data(out))[1] == 0); /* MIN mod -1 must not trap */
    stax_tensor_release(out);
    stax_tensor_release(ta);
    stax_tensor_release(tb);
  }
  {
    int32_t a[2] = {INT32_MAX, 7}, b[2] = {1, -2};
    stax_tensor_t* ta = kt_make_raw(STAX_DTYPE_INT32, 1, dims, a);
    stax_tensor_t* tb = kt_make_raw(STAX_DTYPE_INT32, 1, dims, b);
    stax_tensor_t* out = NULL;
    CHECK_OK(run2(stax_kernel_Add, STAX_OP_Add, ta, tb, &out));
    CHECK_EQ_INT(((int32_t*)stax_tensor_data(out))[0], INT32_MIN);
    CHECK_EQ_INT(((int32_t*)stax_tensor_data(out))[1], 5);
    stax_tensor_release(out);
    out = NULL;
    CHECK_OK(run2(stax_kernel_Div, STAX_OP_Div, ta, tb, &out));
    CHECK_EQ_INT(((int32_t*)stax_tensor_data(out))[1], -3); /* truncates toward zero */
    stax_tensor_release(out);
    stax_tensor_release(ta);
    stax_tensor_release(tb);
  }
}

static void test_mod_signs(void) {
  const int64_t dims[1] = {4};
  int32_t a[4] = {-7, 7, -7, 7}, b[4] = {3, -3, -3, 3};
  stax_tensor_t* ta = kt_make_raw(STAX_DTYPE_INT32, 1, dims, a);
  stax_tensor_t* tb = kt_make_raw(STAX_DTYPE_INT32, 1, dims, b);
  stax_tensor_t* inputs[2] = {ta, tb};
  stax_tensor_t* out = NULL;
  stax_node_attr_t fmod0 = kt_attr_int("fmod", 0), fmod1 = kt_attr_int("fmod", 1);
  CHECK_OK(kt_run_kernel(stax_kernel_Mod, STAX_OP_Mod, &fmod0, 1, inputs, 2, &out, 1, NULL));
  int32_t* r = stax_tensor_data(out);
  CHECK_EQ_INT(r[0], 2);
  CHECK_EQ_INT(r[1], -2);
  CHECK_EQ_INT(r[2], -1);
  CHECK_EQ_INT(r[3], 1);
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(kt_run_kernel(stax_kernel_Mod, STAX_OP_Mod, &fmod1, 1, inputs, 2, &out, 1, NULL));
  r = stax_tensor_data(out);
  CHECK_EQ_INT(r[0], -1);
  CHECK_EQ_INT(r[1], 1);
  CHECK_EQ_INT(r[2], -1);
  CHECK_EQ_INT(r[3], 1);
  stax_tensor_release(out);
  out = NULL;
  /* Floats: fmod = 1 follows the dividend's sign; fmod = 0 is refused. */
  double fa[2] = {-7.5, 7.5}, fb[2] = {2, -2};
  const int64_t fdims[1] = {2};
  stax_tensor_t* xa = kt_make_codec(STAX_DTYPE_FLOAT64, 1, fdims, fa);
  stax_tensor_t* xb = kt_make_codec(STAX_DTYPE_FLOAT64, 1, fdims, fb);
  stax_tensor_t* finputs[2] = {xa, xb};
  CHECK_OK(kt_run_kernel(stax_kernel_Mod, STAX_OP_Mod, &fmod1, 1, finputs, 2, &out, 1, NULL));
  CHECK_NEAR(kt_get_codec(out, 0), -1.5, 0);
  CHECK_NEAR(kt_get_codec(out, 1), 1.5, 0);
  stax_tensor_release(out);
  out = NULL;
  /* fmod = 0 on floats (opset 28): numpy's mod, the divisor's sign; a zero result is a zero
   * with the divisor's sign, x = inf or y = 0 give NaN, y = inf gives x or y. */
  CHECK_OK(kt_run_kernel(stax_kernel_Mod, STAX_OP_Mod, &fmod0, 1, finputs, 2, &out, 1, NULL));
  CHECK_NEAR(kt_get_codec(out, 0), 0.5, 0);
  CHECK_NEAR(kt_get_codec(out, 1), -0.5, 0);
  stax_tensor_release(out);
  out = NULL;
  const int64_t six[1] = {6};
  double sa[6] = {4, -4, INFINITY, 3, 5, -5}, sb[6] = {-2, 2, 3, 0, INFINITY, INFINITY};
  stax_tensor_t* special_a = kt_make_codec(STAX_DTYPE_FLOAT32, 1, six, sa);
  stax_tensor_t* special_b = kt_make_codec(STAX_DTYPE_FLOAT32, 1, six, sb);
  stax_tensor_t* special[2] = {special_a, special_b};
  CHECK_OK(kt_run_kernel(stax_kernel_Mod, STAX_OP_Mod, &fmod0, 1, special, 2, &out, 1, NULL));
  const float* sr = stax_tensor_data(out);
  CHECK(sr[0] == 0 && signbit(sr[0]));
  CHECK(sr[1] == 0 && !signbit(sr[1]));
  CHECK(isnan(sr[2]) && isnan(sr[3]));
  CHECK(sr[4] == 5);
  CHECK(isinf(sr[5]) && sr[5] > 0);
  stax_tensor_release(out);
  out = NULL;
  kt_release_all((stax_tensor_t*[]){special_a, special_b}, 2);
  stax_node_attr_t fmod2 = kt_attr_int("fmod", 2);
  CHECK_ERROR(kt_run_kernel(stax_kernel_Mod, STAX_OP_Mod, &fmod2, 1, inputs, 2, &out, 1, NULL),
              STAX_INVALID_ARGUMENT, "'fmod' must be 0 or 1");
  kt_release_all((stax_tensor_t*[]){ta, tb, xa, xb}, 4);
}

static void test_integer_division_by_zero(void) {
  const int64_t dims[2] = {2, 3};
  const double a_values[6] = {1, 2, 3, 4, 5, 6}, b_values[3] = {1, 0, 2};
  const int64_t b_dims[1] = {3};
  const stax_dtype_t dtypes[3] = {STAX_DTYPE_INT32, STAX_DTYPE_UINT8, STAX_DTYPE_INT64};
  for (int k = 0; k < 3; k++) {
    stax_tensor_t* a = kt_make_codec(dtypes[k], 2, dims, a_values);
    stax_tensor_t* b = kt_make_codec(dtypes[k], 1, b_dims, b_values);
    stax_tensor_t* out = NULL;
    CHECK_ERROR(run2(stax_kernel_Div, STAX_OP_Div, a, b, &out), STAX_INVALID_ARGUMENT,
                "Div node 'node0': integer division by zero");
    CHECK(out == NULL); /* released, nothing leaks */
    stax_tensor_t* inputs[2] = {a, b};
    for (int64_t fmod_value = 0; fmod_value <= 1; fmod_value++) {
      stax_node_attr_t attr = kt_attr_int("fmod", fmod_value);
      CHECK_ERROR(kt_run_kernel(stax_kernel_Mod, STAX_OP_Mod, &attr, 1, inputs, 2, &out, 1, NULL),
                  STAX_INVALID_ARGUMENT, "Mod node 'node0': integer modulo by zero");
      CHECK(out == NULL);
    }
    /* A preallocated output stays with the caller on error. */
    stax_tensor_t* preallocated = kt_make_codec(dtypes[k], 2, dims, NULL);
    out = preallocated;
    CHECK_ERROR(run2(stax_kernel_Div, STAX_OP_Div, a, b, &out), STAX_INVALID_ARGUMENT, "zero");
    CHECK(out == preallocated);
    kt_release_all((stax_tensor_t*[]){a, b, preallocated}, 3);
  }
  /* Float division by zero is IEEE, not an error. */
  const int64_t one[1] = {1};
  stax_tensor_t* x = kt_make_codec(STAX_DTYPE_FLOAT32, 1, one, (double[]){1});
  stax_tensor_t* zero = kt_make_codec(STAX_DTYPE_FLOAT32, 1, one, (double[]){0});
  stax_tensor_t* out = NULL;
  CHECK_OK(run2(stax_kernel_Div, STAX_OP_Div, x, zero, &out));
  CHECK(isinf(kt_get_codec(out, 0)) && kt_get_codec(out, 0) > 0);
  kt_release_all((stax_tensor_t*[]){x, zero, out}, 3);
}

/* ---- Pow, BitShift, PRelu ---------------------------------------------------------------- */

static void test_pow(void) {
  const int64_t dims[1] = {4};
  /* float32 ^ float32, float32 ^ int64, float16 ^ float16 */
  stax_tensor_t* base = kt_make_codec(STAX_DTYPE_FLOAT32, 1, dims, (double[]){2, 9, 0.5, -3});
  stax_tensor_t* exponent = kt_make_codec(STAX_DTYPE_FLOAT32, 1, dims, (double[]){3, 0.5, -2, 2});
  stax_tensor_t* out = NULL;
  CHECK_OK(run2(stax_kernel_Pow, STAX_OP_Pow, base, exponent, &out));
  const double expected[4] = {8, 3, 4, 9};
  for (int i = 0; i < 4; i++) CHECK_NEAR(kt_get_codec(out, i), expected[i], 1e-6);
  stax_tensor_release(out);
  out = NULL;
  stax_tensor_t* int_exponent = kt_make_codec(STAX_DTYPE_INT64, 1, dims, (double[]){3, 2, -2, 3});
  CHECK_OK(run2(stax_kernel_Pow, STAX_OP_Pow, base, int_exponent, &out));
  CHECK(stax_tensor_dtype(out) == STAX_DTYPE_FLOAT32);
  const double expected_int[4] = {8, 81, 4, -27};
  for (int i = 0; i < 4; i++) CHECK_NEAR(kt_get_codec(out, i), expected_int[i], 1e-6);
  stax_tensor_release(out);
  out = NULL;
  stax_tensor_t* half_base = kt_make_codec(STAX_DTYPE_FLOAT16, 1, dims, (double[]){2, 9, 0.5, -3});
  stax_tensor_t* half_exponent =
      kt_make_codec(STAX_DTYPE_FLOAT16, 1, dims, (double[]){3, 0.5, -2, 2});
  CHECK_OK(run2(stax_kernel_Pow, STAX_OP_Pow, half_base, half_exponent, &out));
  for (int i = 0; i < 4; i++) CHECK_NEAR(kt_get_codec(out, i), expected[i], 1e-3);
  stax_tensor_release(out);
  out = NULL;
  /* Integer base: exact, wrapping, negative exponents truncate. */
  int32_t ib[6] = {2, 3, -1, 2, 7, 2}, ie[6] = {10, -1, -3, 31, 0, 32};
  const int64_t six[1] = {6};
  stax_tensor_t* ibase = kt_make_raw(STAX_DTYPE_INT32, 1, six, ib);
  stax_tensor_t* iexp = kt_make_raw(STAX_DTYPE_INT32, 1, six, ie);
  CHECK_OK(run2(stax_kernel_Pow, STAX_OP_Pow, ibase, iexp, &out));
  int32_t* r = stax_tensor_data(out);
  CHECK_EQ_INT(r[0], 1024);
  CHECK_EQ_INT(r[1], 0);
  CHECK_EQ_INT(r[2], -1);
  CHECK_EQ_INT(r[3], INT32_MIN);
  CHECK_EQ_INT(r[4], 1);
  CHECK_EQ_INT(r[5], 0);
  stax_tensor_release(out);
  out = NULL;
  /* Integer base, float exponent: computed in double and truncated. */
  stax_tensor_t* fexp = kt_make_codec(STAX_DTYPE_FLOAT32, 1, six, (double[]){0.5, 2, 2, 1.5, 0.5, 3});
  CHECK_OK(run2(stax_kernel_Pow, STAX_OP_Pow, ibase, fexp, &out));
  r = stax_tensor_data(out);
  CHECK(stax_tensor_dtype(out) == STAX_DTYPE_INT32);
  CHECK_EQ_INT(r[0], 1); /* sqrt(2) = 1.41 */
  CHECK_EQ_INT(r[1], 9);
  CHECK_EQ_INT(r[3], 2); /* 2^1.5 = 2.83 */
  CHECK_EQ_INT(r[4], 2); /* sqrt(7) = 2.65 */
  CHECK_EQ_INT(r[5], 8);
  stax_tensor_release(out);
  out = NULL;
  /* 0 to a negative integer power is 1/0. */
  stax_tensor_t* zero = kt_make_codec(STAX_DTYPE_INT64, 0, NULL, (double[]){0});
  stax_tensor_t* minus_one = kt_make_codec(STAX_DTYPE_INT64, 0, NULL, (double[]){-1});
  CHECK_ERROR(run2(stax_kernel_Pow, STAX_OP_Pow, zero, minus_one, &out), STAX_INVALID_ARGUMENT,
              "Pow node 'node0': integer 0 raised to a negative power");
  CHECK(out == NULL);
  stax_tensor_t* flag = kt_make_codec(STAX_DTYPE_BOOL, 0, NULL, (double[]){1});
  CHECK_ERROR(run2(stax_kernel_Pow, STAX_OP_Pow, base, flag, &out), STAX_DTYPE_MISMATCH, "bool");
  kt_release_all((stax_tensor_t*[]){base, exponent, int_exponent, half_base, half_exponent, ibase,
                                 iexp, fexp, zero, minus_one, flag},
              11);
}

static void test_bitshift(void) {
  const int64_t dims[1] = {4};
  uint8_t a[4] = {1, 255, 16, 3}, b[4] = {3, 1, 8, 0};
  stax_tensor_t* ta = kt_make_raw(STAX_DTYPE_UINT8, 1, dims, a);
  stax_tensor_t* tb = kt_make_raw(STAX_DTYPE_UINT8, 1, dims, b);
  stax_tensor_t* inputs[2] = {ta, tb};
  stax_tensor_t* out = NULL;
  stax_node_attr_t left = kt_attr_string("direction", "LEFT"),
                   right = kt_attr_string("direction", "RIGHT");
  CHECK_OK(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, &left, 1, inputs, 2, &out, 1, NULL));
  uint8_t* r = stax_tensor_data(out);
  CHECK_EQ_INT(r[0], 8);
  CHECK_EQ_INT(r[1], 254);
  CHECK_EQ_INT(r[2], 0); /* shift by the width */
  CHECK_EQ_INT(r[3], 3);
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, &right, 1, inputs, 2, &out, 1, NULL));
  r = stax_tensor_data(out);
  CHECK_EQ_INT(r[0], 0);
  CHECK_EQ_INT(r[1], 127);
  CHECK_EQ_INT(r[2], 0);
  CHECK_EQ_INT(r[3], 3);
  stax_tensor_release(out);
  out = NULL;
  uint64_t wa[3] = {1, UINT64_MAX, 5}, wb[3] = {63, 64, 1000};
  const int64_t three[1] = {3};
  stax_tensor_t* xa = kt_make_raw(STAX_DTYPE_UINT64, 1, three, wa);
  stax_tensor_t* xb = kt_make_raw(STAX_DTYPE_UINT64, 1, three, wb);
  stax_tensor_t* wide[2] = {xa, xb};
  CHECK_OK(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, &left, 1, wide, 2, &out, 1, NULL));
  uint64_t* w = stax_tensor_data(out);
  CHECK(w[0] == UINT64_C(1) << 63);
  CHECK(w[1] == 0 && w[2] == 0);
  stax_tensor_release(out);
  out = NULL;
  stax_node_attr_t bad = kt_attr_string("direction", "UP");
  CHECK_ERROR(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, &bad, 1, inputs, 2, &out, 1, NULL),
              STAX_INVALID_ARGUMENT, "BitShift node 'node0': attribute 'direction'");
  CHECK_ERROR(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, NULL, 0, inputs, 2, &out, 1, NULL),
              STAX_INVALID_ARGUMENT, "direction");
  /* Signed types (opset 28): arithmetic right shifts; a negative or too wide count leaves
   * the sign fill (-1 or 0); left shifts drop the bits past the sign bit. */
  const int64_t six[1] = {6};
  int8_t sa[6] = {-128, -5, 100, -1, -7, 64}, sb[6] = {7, 1, -1, 8, 2, 1};
  stax_tensor_t* signed_a = kt_make_raw(STAX_DTYPE_INT8, 1, six, sa);
  stax_tensor_t* signed_b = kt_make_raw(STAX_DTYPE_INT8, 1, six, sb);
  stax_tensor_t* signed_inputs[2] = {signed_a, signed_b};
  CHECK_OK(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, &right, 1, signed_inputs, 2,
                         &out, 1, NULL));
  const int8_t* sr = stax_tensor_data(out);
  const int8_t expected_right[6] = {-1, -3, 0, -1, -2, 32};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(sr[i], expected_right[i]);
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, &left, 1, signed_inputs, 2,
                         &out, 1, NULL));
  sr = stax_tensor_data(out);
  const int8_t expected_left[6] = {0, -10, 0, 0, -28, -128};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(sr[i], expected_left[i]);
  stax_tensor_release(out);
  out = NULL;
  int64_t la[3] = {INT64_MIN, -1, 3}, lb[3] = {63, 64, 62};
  stax_tensor_t* long_a = kt_make_raw(STAX_DTYPE_INT64, 1, three, la);
  stax_tensor_t* long_b = kt_make_raw(STAX_DTYPE_INT64, 1, three, lb);
  stax_tensor_t* long_inputs[2] = {long_a, long_b};
  CHECK_OK(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, &right, 1, long_inputs, 2,
                         &out, 1, NULL));
  const int64_t* lr = stax_tensor_data(out);
  CHECK(lr[0] == -1 && lr[1] == -1 && lr[2] == 0);
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, &left, 1, long_inputs, 2,
                         &out, 1, NULL));
  lr = stax_tensor_data(out);
  CHECK(lr[0] == 0 && lr[1] == 0 && lr[2] == INT64_MIN + (INT64_C(1) << 62));
  stax_tensor_release(out);
  out = NULL;
  stax_tensor_t* floats = kt_make_codec(STAX_DTYPE_FLOAT32, 1, dims, (double[]){1, 2, 3, 4});
  stax_tensor_t* float_inputs[2] = {floats, floats};
  CHECK_ERROR(kt_run_kernel(stax_kernel_BitShift, STAX_OP_BitShift, &left, 1, float_inputs, 2,
                            &out, 1, NULL),
              STAX_DTYPE_MISMATCH, "float32");
  CHECK(out == NULL);
  kt_release_all((stax_tensor_t*[]){ta, tb, xa, xb, signed_a, signed_b, long_a, long_b, floats},
                 9);
}

static void test_prelu(void) {
  const int64_t x_dims[3] = {2, 3, 2}, slope_dims[2] = {3, 1};
  const stax_dtype_t dtypes[4] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT16, STAX_DTYPE_INT32,
                                  STAX_DTYPE_UINT32};
  for (int k = 0; k < 4; k++) {
    stax_dtype_t dtype = dtypes[k];
    double xv[12];
    for (int i = 0; i < 12; i++) xv[i] = sample(dtype, i, 5, false);
    stax_tensor_t* x = kt_make_codec(dtype, 3, x_dims, xv);
    stax_tensor_t* slope = kt_make_codec(dtype, 2, slope_dims, (double[]){2, 3, 0});
    stax_tensor_t* out = NULL;
    CHECK_OK(run2(stax_kernel_PRelu, STAX_OP_PRelu, x, slope, &out));
    CHECK(kt_dims_are(out, 3, x_dims));
    for (int64_t i = 0; i < 12; i++) {
      double v = kt_get_codec(x, i), s = kt_get_codec(slope, broadcast_source(3, x_dims, i, slope));
      CHECK_NEAR(kt_get_codec(out, i), v < 0 ? v * s : v, 1e-6);
    }
    kt_release_all((stax_tensor_t*[]){x, slope, out}, 3);
  }
  /* The slope may not grow X. */
  const int64_t small[1] = {3}, big[2] = {2, 3};
  stax_tensor_t* x = kt_make_codec(STAX_DTYPE_FLOAT32, 1, small, (double[]){1, -1, 2});
  stax_tensor_t* slope = kt_make_codec(STAX_DTYPE_FLOAT32, 2, big, (double[]){1, 2, 3, 4, 5, 6});
  stax_tensor_t* out = NULL;
  CHECK_ERROR(run2(stax_kernel_PRelu, STAX_OP_PRelu, x, slope, &out), STAX_SHAPE_MISMATCH,
              "PRelu node 'node0': slope (input 1) dims [2, 3]");
  CHECK(out == NULL);
  kt_release_all((stax_tensor_t*[]){x, slope}, 2);
}

/* ---- broadcasting, views and outputs ----------------------------------------------------- */

/* Checks Add(a, b) against the element-by-element reference for any views. */
static void check_add_views(stax_tensor_t* a, stax_tensor_t* b, stax_threadpool_t* pool) {
  stax_tensor_t* inputs[2] = {a, b};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run_kernel(stax_kernel_Add, STAX_OP_Add, NULL, 0, inputs, 2, &out, 1, pool));
  if (!out) return;
  int32_t rank = stax_tensor_rank(out);
  const int64_t* dims = stax_tensor_dims(out);
  int64_t n = stax_tensor_element_count(out);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; i++) {
    double expected = kt_get_codec(a, broadcast_source(rank, dims, i, a)) +
                      kt_get_codec(b, broadcast_source(rank, dims, i, b));
    if (kt_get_codec(out, i) != kt_round_to(stax_tensor_dtype(out), expected)) mismatches++;
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_tensor_release(out);
}

static stax_tensor_t* make_iota(stax_dtype_t dtype, int32_t rank, const int64_t* dims) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; d++) n *= dims[d];
  double* values = calloc((size_t)(n ? n : 1), sizeof(double));
  for (int64_t i = 0; i < n; i++) values[i] = (double)(i % 97) - 40;
  stax_tensor_t* t = kt_make_codec(dtype, rank, dims, values);
  free(values);
  return t;
}

static void test_broadcast_ranks(void) {
  /* rank 0 with rank 0, rank 0 with rank 2 */
  stax_tensor_t* s1 = kt_make_codec(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){1.5});
  stax_tensor_t* s2 = kt_make_codec(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){2});
  stax_tensor_t* out = NULL;
  CHECK_OK(run2(stax_kernel_Add, STAX_OP_Add, s1, s2, &out));
  CHECK(out && stax_tensor_rank(out) == 0);
  CHECK_NEAR(kt_get_codec(out, 0), 3.5, 0);
  stax_tensor_release(out);
  const int64_t m_dims[2] = {2, 3};
  stax_tensor_t* m = make_iota(STAX_DTYPE_FLOAT32, 2, m_dims);
  check_add_views(s1, m, NULL);
  check_add_views(m, s1, NULL);
  /* rank 6, every dim broadcasting somewhere */
  const int64_t a6[6] = {2, 1, 3, 1, 2, 2}, b6[6] = {1, 2, 1, 3, 1, 2}, c4[4] = {3, 1, 2, 1};
  stax_tensor_t* a = make_iota(STAX_DTYPE_INT32, 6, a6);
  stax_tensor_t* b = make_iota(STAX_DTYPE_INT32, 6, b6);
  stax_tensor_t* c = make_iota(STAX_DTYPE_INT32, 4, c4);
  check_add_views(a, b, NULL);
  check_add_views(a, c, NULL);
  check_add_views(c, b, NULL);
  /* zero-sized dims broadcast to zero-sized outputs */
  const int64_t z_dims[2] = {0, 3}, row_dims[1] = {3}, z1_dims[3] = {2, 0, 1};
  stax_tensor_t* z = make_iota(STAX_DTYPE_FLOAT64, 2, z_dims);
  stax_tensor_t* row = make_iota(STAX_DTYPE_FLOAT64, 1, row_dims);
  stax_tensor_t* z1 = make_iota(STAX_DTYPE_FLOAT64, 3, z1_dims);
  out = NULL;
  CHECK_OK(run2(stax_kernel_Add, STAX_OP_Add, z, row, &out));
  CHECK(out && kt_dims_are(out, 2, z_dims));
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(run2(stax_kernel_Mul, STAX_OP_Mul, z1, row, &out));
  const int64_t z1_out[3] = {2, 0, 3};
  CHECK(out && kt_dims_are(out, 3, z1_out));
  stax_tensor_release(out);
  /* shapes that do not broadcast */
  const int64_t four[1] = {4};
  stax_tensor_t* v4 = make_iota(STAX_DTYPE_FLOAT32, 1, four);
  out = NULL;
  CHECK_ERROR(run2(stax_kernel_Add, STAX_OP_Add, m, v4, &out), STAX_SHAPE_MISMATCH,
              "Add node 'node0': input 1 dim 0 is 4");
  CHECK(out == NULL);
  CHECK_ERROR(run2(stax_kernel_Less, STAX_OP_Less, m, v4, &out), STAX_SHAPE_MISMATCH,
              "Less node 'node0'");
  kt_release_all((stax_tensor_t*[]){s1, s2, m, a, b, c, z, row, z1, v4}, 10);
}

static void test_views(void) {
  const int64_t dims[3] = {4, 3, 5};
  stax_tensor_t* base = make_iota(STAX_DTYPE_FLOAT32, 3, dims);
  const int64_t row_dims[1] = {4};
  stax_tensor_t* row4 = make_iota(STAX_DTYPE_FLOAT32, 1, row_dims);
  /* transposed: [5, 3, 4] */
  stax_tensor_t* transposed = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &transposed));
  check_add_views(transposed, row4, NULL);
  check_add_views(transposed, transposed, NULL);
  /* sliced with steps, and a negative step */
  stax_tensor_t* sliced = NULL;
  const int64_t starts[3] = {0, 2, 4}, ends[3] = {4, -100, -100}, steps[3] = {2, -1, -2};
  CHECK_OK(stax_tensor_slice(kt_allocator(), base, 3, starts, ends, NULL, steps, &sliced));
  /* [2, 3, 3] */
  const int64_t other_dims[3] = {2, 1, 3};
  stax_tensor_t* other = make_iota(STAX_DTYPE_FLOAT32, 3, other_dims);
  check_add_views(sliced, other, NULL);
  /* an explicitly broadcast view (stride 0) */
  const int64_t wide[3] = {2, 3, 3};
  stax_tensor_t* broadcast = NULL;
  CHECK_OK(stax_tensor_broadcast(kt_allocator(), other, 3, wide, &broadcast));
  check_add_views(broadcast, sliced, NULL);
  /* half types on views go through the conversion blocks */
  stax_tensor_t* half = make_iota(STAX_DTYPE_FLOAT16, 3, dims);
  stax_tensor_t* half_t = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), half, NULL, &half_t));
  stax_tensor_t* half_row = make_iota(STAX_DTYPE_FLOAT16, 1, row_dims);
  check_add_views(half_t, half_row, NULL);
  kt_release_all((stax_tensor_t*[]){base, row4, transposed, sliced, other, broadcast, half, half_t,
                                 half_row},
              9);
}

static void test_preallocated_outputs(void) {
  const int64_t dims[2] = {2, 3}, row_dims[1] = {3};
  stax_tensor_t* a = make_iota(STAX_DTYPE_INT16, 2, dims);
  stax_tensor_t* b = make_iota(STAX_DTYPE_INT16, 1, row_dims);
  stax_tensor_t* preallocated = kt_make_codec(STAX_DTYPE_INT16, 2, dims, NULL);
  stax_tensor_t* out = preallocated;
  CHECK_OK(run2(stax_kernel_Sub, STAX_OP_Sub, a, b, &out));
  CHECK(out == preallocated);
  for (int64_t i = 0; i < 6; i++)
    CHECK_NEAR(kt_get_codec(out, i), kt_get_codec(a, i) - kt_get_codec(b, i % 3), 0);
  /* wrong dims, wrong dtype */
  const int64_t wrong_dims[2] = {3, 2};
  stax_tensor_t* wrong = kt_make_codec(STAX_DTYPE_INT16, 2, wrong_dims, NULL);
  out = wrong;
  CHECK_ERROR(run2(stax_kernel_Sub, STAX_OP_Sub, a, b, &out), STAX_SHAPE_MISMATCH,
              "Sub node 'node0': output 0");
  CHECK(out == wrong);
  stax_tensor_t* wrong_dtype = kt_make_codec(STAX_DTYPE_INT32, 2, dims, NULL);
  out = wrong_dtype;
  CHECK_ERROR(run2(stax_kernel_Sub, STAX_OP_Sub, a, b, &out), STAX_SHAPE_MISMATCH, "int32");
  stax_tensor_t* wrong_bool = kt_make_codec(STAX_DTYPE_INT16, 2, dims, NULL);
  out = wrong_bool;
  CHECK_ERROR(run2(stax_kernel_Equal, STAX_OP_Equal, a, b, &out), STAX_SHAPE_MISMATCH, "bool");
  /* in place: the output is input 0 itself */
  stax_tensor_t* in_place = make_iota(STAX_DTYPE_INT16, 2, dims);
  out = in_place;
  CHECK_OK(run2(stax_kernel_Add, STAX_OP_Add, in_place, b, &out));
  for (int64_t i = 0; i < 6; i++) CHECK_NEAR(kt_get_codec(in_place, i), kt_get_codec(a, i) + kt_get_codec(b, i % 3), 0);
  /* mismatched input dtypes */
  stax_tensor_t* f = make_iota(STAX_DTYPE_FLOAT32, 1, row_dims);
  out = NULL;
  CHECK_ERROR(run2(stax_kernel_Add, STAX_OP_Add, a, f, &out), STAX_DTYPE_MISMATCH,
              "Add node 'node0': input 1 is float32 but input 0 is int16");
  stax_tensor_t* flags = kt_make_codec(STAX_DTYPE_BOOL, 1, row_dims, (double[]){1, 0, 1});
  CHECK_ERROR(run2(stax_kernel_Add, STAX_OP_Add, flags, flags, &out), STAX_DTYPE_MISMATCH, "bool");
  CHECK_ERROR(run2(stax_kernel_Add, STAX_OP_Add, a, NULL, &out), STAX_INVALID_ARGUMENT,
              "input 1 is missing");
  CHECK(out == NULL);
  kt_release_all((stax_tensor_t*[]){a, b, preallocated, wrong, wrong_dtype, wrong_bool, in_place, f,
                                 flags},
              9);
}

static void test_thread_pool(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  /* flat (contiguous, same shape), broadcast rows, and half floats, all large */
  const int64_t flat_dims[1] = {200003}, rows_dims[2] = {300, 701}, col_dims[2] = {300, 1};
  stax_tensor_t* a = make_iota(STAX_DTYPE_FLOAT32, 1, flat_dims);
  stax_tensor_t* b = make_iota(STAX_DTYPE_FLOAT32, 1, flat_dims);
  check_add_views(a, b, pool);
  stax_tensor_t* m = make_iota(STAX_DTYPE_INT32, 2, rows_dims);
  stax_tensor_t* col = make_iota(STAX_DTYPE_INT32, 2, col_dims);
  check_add_views(m, col, pool);
  stax_tensor_t* mt = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), m, NULL, &mt));
  const int64_t row300[1] = {300};
  stax_tensor_t* r = make_iota(STAX_DTYPE_INT32, 1, row300);
  check_add_views(mt, r, pool);
  stax_tensor_t* h = make_iota(STAX_DTYPE_BFLOAT16, 2, rows_dims);
  stax_tensor_t* hc = make_iota(STAX_DTYPE_BFLOAT16, 2, col_dims);
  check_add_views(h, hc, pool);
  /* a single zero divisor near the end, found by whichever thread runs that chunk, reports */
  stax_tensor_t* divisor = make_iota(STAX_DTYPE_INT32, 2, rows_dims);
  for (int64_t i = 0; i < 300 * 701; i++)
    if (((int32_t*)stax_tensor_data(divisor))[i] == 0) ((int32_t*)stax_tensor_data(divisor))[i] = 7;
  ((int32_t*)stax_tensor_data(divisor))[300 * 701 - 5] = 0;
  stax_tensor_t* inputs[2] = {m, divisor};
  stax_tensor_t* out = NULL;
  CHECK_ERROR(kt_run_kernel(stax_kernel_Div, STAX_OP_Div, NULL, 0, inputs, 2, &out, 1, pool),
              STAX_INVALID_ARGUMENT, "division by zero");
  CHECK(out == NULL);
  kt_release_all((stax_tensor_t*[]){a, b, m, col, mt, r, h, hc, divisor}, 9);
  stax_threadpool_destroy(pool);
}

/* ---- comparisons and logic --------------------------------------------------------------- */

static void test_comparisons(void) {
  const stax_op_t ops[5] = {STAX_OP_Equal, STAX_OP_Less, STAX_OP_LessOrEqual, STAX_OP_Greater,
                            STAX_OP_GreaterOrEqual};
  const stax_kernel_fn fns[5] = {stax_kernel_Equal, stax_kernel_Less, stax_kernel_LessOrEqual,
                                 stax_kernel_Greater, stax_kernel_GreaterOrEqual};
  const int64_t a_dims[2] = {3, 4}, b_dims[1] = {4};
  for (int k = 0; k < NUMERIC_DTYPE_COUNT; k++) {
    stax_dtype_t dtype = kNumericDtypes[k];
    double av[12], bv[4];
    for (int i = 0; i < 12; i++) av[i] = sample(dtype, i % 5, 0, false);
    for (int i = 0; i < 4; i++) bv[i] = sample(dtype, i, 0, false);
    stax_tensor_t* a = kt_make_codec(dtype, 2, a_dims, av);
    stax_tensor_t* b = kt_make_codec(dtype, 1, b_dims, bv);
    for (int o = 0; o < 5; o++) {
      stax_tensor_t* out = NULL;
      CHECK_OK(run2(fns[o], ops[o], a, b, &out));
      CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_BOOL && kt_dims_are(out, 2, a_dims));
      for (int64_t i = 0; out && i < 12; i++) {
        double x = kt_get_codec(a, i), y = kt_get_codec(b, i % 4);
        bool expected = o == 0   ? x == y
                        : o == 1 ? x < y
                        : o == 2 ? x <= y
                        : o == 3 ? x > y
                                 : x >= y;
        CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[i], expected);
      }
      if (out) stax_tensor_release(out);
    }
    kt_release_all((stax_tensor_t*[]){a, b}, 2);
  }
  /* NaN compares false except through Not-equal; exact 64-bit comparisons */
  const int64_t two[1] = {2};
  stax_tensor_t* nan = kt_make_codec(STAX_DTYPE_FLOAT32, 1, two, (double[]){NAN, 1});
  stax_tensor_t* out = NULL;
  CHECK_OK(run2(stax_kernel_Equal, STAX_OP_Equal, nan, nan, &out));
  CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[0], 0);
  CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[1], 1);
  stax_tensor_release(out);
  out = NULL;
  int64_t big[2] = {INT64_MAX, INT64_MAX - 1};
  stax_tensor_t* tb = kt_make_raw(STAX_DTYPE_INT64, 1, two, big);
  stax_tensor_t* scalar = kt_make_raw(STAX_DTYPE_INT64, 0, NULL, &big[0]);
  CHECK_OK(run2(stax_kernel_Less, STAX_OP_Less, tb, scalar, &out));
  CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[0], 0);
  CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[1], 1); /* differs only past 2^53 */
  stax_tensor_release(out);
  out = NULL;
  /* bool Equal reads any non-zero byte as true */
  uint8_t flags_a[2] = {2, 0}, flags_b[2] = {1, 0};
  stax_tensor_t* fa = kt_make_raw(STAX_DTYPE_BOOL, 1, two, flags_a);
  stax_tensor_t* fb = kt_make_raw(STAX_DTYPE_BOOL, 1, two, flags_b);
  CHECK_OK(run2(stax_kernel_Equal, STAX_OP_Equal, fa, fb, &out));
  CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[0], 1);
  CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[1], 1);
  stax_tensor_release(out);
  out = NULL;
  CHECK_ERROR(run2(stax_kernel_Less, STAX_OP_Less, fa, fb, &out), STAX_DTYPE_MISMATCH,
              "Less node 'node0': input dtype bool");
  CHECK_ERROR(run2(stax_kernel_Greater, STAX_OP_Greater, nan, tb, &out), STAX_DTYPE_MISMATCH,
              "input 1 is int64 but input 0 is float32");
  kt_release_all((stax_tensor_t*[]){nan, tb, scalar, fa, fb}, 5);
}

static void test_logic(void) {
  /* [4, 1] x [2]: the truth table, with byte 7 standing in for true */
  const int64_t col_dims[2] = {2, 1}, row_dims[1] = {2};
  uint8_t col[2] = {0, 7}, row[2] = {0, 1};
  stax_tensor_t* a = kt_make_raw(STAX_DTYPE_BOOL, 2, col_dims, col);
  stax_tensor_t* b = kt_make_raw(STAX_DTYPE_BOOL, 1, row_dims, row);
  const stax_kernel_fn fns[3] = {stax_kernel_And, stax_kernel_Or, stax_kernel_Xor};
  const stax_op_t ops[3] = {STAX_OP_And, STAX_OP_Or, STAX_OP_Xor};
  const uint8_t expected[3][4] = {{0, 0, 0, 1}, {0, 1, 1, 1}, {0, 1, 1, 0}};
  for (int o = 0; o < 3; o++) {
    stax_tensor_t* out = NULL;
    CHECK_OK(run2(fns[o], ops[o], a, b, &out));
    for (int i = 0; out && i < 4; i++)
      CHECK_EQ_INT(((uint8_t*)stax_tensor_data(out))[i], expected[o][i]);
    if (out) stax_tensor_release(out);
  }
  stax_tensor_t* ints = kt_make_codec(STAX_DTYPE_INT32, 1, row_dims, (double[]){1, 0});
  stax_tensor_t* out = NULL;
  CHECK_ERROR(run2(stax_kernel_And, STAX_OP_And, ints, ints, &out), STAX_DTYPE_MISMATCH,
              "And node 'node0': input dtype int32");
  kt_release_all((stax_tensor_t*[]){a, b, ints}, 3);
}

/* ---- variadic ---------------------------------------------------------------------------- */

static void check_variadic(stax_kernel_fn fn, stax_op_t op, stax_dtype_t dtype,
                           int32_t input_count) {
  const int64_t dims[4][3] = {{2, 1, 3}, {4, 1, 1}, {3, 0, 0}, {1, 4, 3}};
  const int32_t ranks[4] = {3, 2, 1, 3};
  stax_tensor_t* inputs[7] = {0};
  for (int32_t i = 0; i < input_count; i++) {
    int64_t n = 1;
    for (int32_t d = 0; d < ranks[i % 4]; d++) n *= dims[i % 4][d];
    double values[24];
    for (int64_t e = 0; e < n; e++) values[e] = sample(dtype, e, i, false);
    inputs[i] = kt_make_codec(dtype, ranks[i % 4], dims[i % 4], values);
  }
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run_kernel(fn, op, NULL, 0, inputs, input_count, &out, 1, NULL));
  if (out) {
    int32_t rank = stax_tensor_rank(out);
    const int64_t* out_dims = stax_tensor_dims(out);
    int64_t n = stax_tensor_element_count(out);
    for (int64_t e = 0; e < n; e++) {
      double acc = kt_get_codec(inputs[0], broadcast_source(rank, out_dims, e, inputs[0]));
      for (int32_t i = 1; i < input_count; i++) {
        double v = kt_get_codec(inputs[i], broadcast_source(rank, out_dims, e, inputs[i]));
        if (op == STAX_OP_Max) acc = v > acc ? v : acc;
        else if (op == STAX_OP_Min) acc = v < acc ? v : acc;
        else acc = kt_round_to(dtype, acc + v); /* the output accumulates in its dtype */
      }
      if (op == STAX_OP_Mean) acc /= input_count;
      double expected = kt_round_to(dtype, acc);
      CHECK_NEAR(kt_get_codec(out, e), expected, 1e-2 * fabs(expected) + 1e-6);
    }
    stax_tensor_release(out);
  }
  kt_release_all(inputs, input_count);
}

static void test_variadic(void) {
  for (int k = 0; k < NUMERIC_DTYPE_COUNT; k++) {
    check_variadic(stax_kernel_Max, STAX_OP_Max, kNumericDtypes[k], 3);
    check_variadic(stax_kernel_Min, STAX_OP_Min, kNumericDtypes[k], 2);
  }
  const stax_dtype_t floats[4] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16,
                                  STAX_DTYPE_BFLOAT16};
  for (int k = 0; k < 4; k++) {
    check_variadic(stax_kernel_Sum, STAX_OP_Sum, floats[k], 7);
    check_variadic(stax_kernel_Mean, STAX_OP_Mean, floats[k], 3);
    check_variadic(stax_kernel_Sum, STAX_OP_Sum, floats[k], 1);
    check_variadic(stax_kernel_Mean, STAX_OP_Mean, floats[k], 1);
  }
  check_variadic(stax_kernel_Max, STAX_OP_Max, STAX_DTYPE_INT64, 1);
  /* NaN anywhere wins in Max and Min */
  const int64_t two[1] = {2};
  stax_tensor_t* a = kt_make_codec(STAX_DTYPE_FLOAT32, 1, two, (double[]){NAN, 1});
  stax_tensor_t* b = kt_make_codec(STAX_DTYPE_FLOAT32, 1, two, (double[]){5, NAN});
  stax_tensor_t* inputs[2] = {a, b};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run_kernel(stax_kernel_Max, STAX_OP_Max, NULL, 0, inputs, 2, &out, 1, NULL));
  CHECK(isnan(kt_get_codec(out, 0)) && isnan(kt_get_codec(out, 1)));
  stax_tensor_release(out);
  out = NULL;
  CHECK_OK(kt_run_kernel(stax_kernel_Min, STAX_OP_Min, NULL, 0, inputs, 2, &out, 1, NULL));
  CHECK(isnan(kt_get_codec(out, 0)) && isnan(kt_get_codec(out, 1)));
  stax_tensor_release(out);
  out = NULL;
  /* exact int64 extremes */
  int64_t big[2] = {INT64_MAX, INT64_MIN}, small[2] = {INT64_MAX - 1, INT64_MIN + 1};
  stax_tensor_t* ba = kt_make_raw(STAX_DTYPE_INT64, 1, two, big);
  stax_tensor_t* bb = kt_make_raw(STAX_DTYPE_INT64, 1, two, small);
  stax_tensor_t* big_inputs[2] = {bb, ba};
  CHECK_OK(kt_run_kernel(stax_kernel_Max, STAX_OP_Max, NULL, 0, big_inputs, 2, &out, 1, NULL));
  CHECK(((int64_t*)stax_tensor_data(out))[0] == INT64_MAX);
  CHECK(((int64_t*)stax_tensor_data(out))[1] == INT64_MIN + 1);
  stax_tensor_release(out);
  out = NULL;
  /* errors */
  CHECK_ERROR(kt_run_kernel(stax_kernel_Sum, STAX_OP_Sum, NULL, 0, big_inputs, 2, &out, 1, NULL),
              STAX_DTYPE_MISMATCH, "Sum node 'node0': input dtype int64");
  stax_tensor_t* mixed[2] = {a, ba};
  CHECK_ERROR(kt_run_kernel(stax_kernel_Max, STAX_OP_Max, NULL, 0, mixed, 2, &out, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 1 is int64 but input 0 is float32");
  const int64_t three[1] = {3};
  stax_tensor_t* c = kt_make_codec(STAX_DTYPE_FLOAT32, 1, three, (double[]){1, 2, 3});
  stax_tensor_t* bad[3] = {a, b, c};
  CHECK_ERROR(kt_run_kernel(stax_kernel_Mean, STAX_OP_Mean, NULL, 0, bad, 3, &out, 1, NULL),
              STAX_SHAPE_MISMATCH, "Mean node 'node0': input 2 dim 0 is 3");
  CHECK_ERROR(kt_run_kernel(stax_kernel_Max, STAX_OP_Max, NULL, 0, bad, 0, &out, 1, NULL),
              STAX_INVALID_ARGUMENT, "at least one input");
  CHECK(out == NULL);
  /* preallocated */
  stax_tensor_t* preallocated = kt_make_codec(STAX_DTYPE_FLOAT32, 1, two, NULL);
  stax_tensor_t* pair[2] = {b, b};
  out = preallocated;
  CHECK_OK(kt_run_kernel(stax_kernel_Mean, STAX_OP_Mean, NULL, 0, pair, 2, &out, 1, NULL));
  CHECK(out == preallocated);
  CHECK_NEAR(kt_get_codec(out, 0), 5, 0);
  kt_release_all((stax_tensor_t*[]){a, b, ba, bb, c, preallocated}, 6);
}

/* ---- Where ------------------------------------------------------------------------------- */

static void test_where(void) {
  const stax_dtype_t dtypes[5] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_INT64, STAX_DTYPE_FLOAT16,
                                  STAX_DTYPE_UINT8, STAX_DTYPE_BOOL};
  const int64_t cond_dims[2] = {2, 1}, x_dims[2] = {1, 3}, out_dims[2] = {2, 3};
  uint8_t condition_bytes[2] = {0, 9};
  for (int k = 0; k < 5; k++) {
    stax_tensor_t* condition = kt_make_raw(STAX_DTYPE_BOOL, 2, cond_dims, condition_bytes);
    stax_tensor_t* x = kt_make_codec(dtypes[k], 2, x_dims, (double[]){1, 0, 3});
    stax_tensor_t* y = kt_make_codec(dtypes[k], 0, NULL, (double[]){2});
    stax_tensor_t* inputs[3] = {condition, x, y};
    stax_tensor_t* out = NULL;
    CHECK_OK(kt_run_kernel(stax_kernel_Where, STAX_OP_Where, NULL, 0, inputs, 3, &out, 1, NULL));
    CHECK(out && kt_dims_are(out, 2, out_dims) && stax_tensor_dtype(out) == dtypes[k]);
    for (int64_t i = 0; out && i < 6; i++) {
      double expected = i < 3 ? kt_round_to(dtypes[k], 2) : kt_get_codec(x, i % 3);
      CHECK_NEAR(kt_get_codec(out, i), expected, 0);
    }
    if (out) stax_tensor_release(out);
    kt_release_all((stax_tensor_t*[]){condition, x, y}, 3);
  }
  /* a full-shape condition choosing between two scalars */
  {
    const int64_t five[1] = {5};
    uint8_t bytes[5] = {1, 0, 0, 3, 0};
    stax_tensor_t* condition = kt_make_raw(STAX_DTYPE_BOOL, 1, five, bytes);
    stax_tensor_t* x = kt_make_codec(STAX_DTYPE_INT16, 0, NULL, (double[]){-4});
    stax_tensor_t* y = kt_make_codec(STAX_DTYPE_INT16, 0, NULL, (double[]){9});
    stax_tensor_t* inputs[3] = {condition, x, y};
    stax_tensor_t* out = NULL;
    CHECK_OK(kt_run_kernel(stax_kernel_Where, STAX_OP_Where, NULL, 0, inputs, 3, &out, 1, NULL));
    const double expected[5] = {-4, 9, 9, -4, 9};
    for (int64_t i = 0; out && i < 5; i++) CHECK_NEAR(kt_get_codec(out, i), expected[i], 0);
    kt_release_all((stax_tensor_t*[]){condition, x, y, out}, 4);
  }
  /* same-shape contiguous fast path, large, on a pool, with a transposed operand */
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  const int64_t big[2] = {257, 301};
  stax_tensor_t* condition = make_iota(STAX_DTYPE_BOOL, 2, big);
  stax_tensor_t* x = make_iota(STAX_DTYPE_INT32, 2, big);
  const int64_t big_t[2] = {301, 257};
  stax_tensor_t* y_base = make_iota(STAX_DTYPE_INT32, 2, big_t);
  stax_tensor_t* y = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), y_base, NULL, &y));
  stax_tensor_t* inputs[3] = {condition, x, y};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run_kernel(stax_kernel_Where, STAX_OP_Where, NULL, 0, inputs, 3, &out, 1, pool));
  int64_t mismatches = 0;
  for (int64_t i = 0; out && i < 257 * 301; i++)
    if (kt_get_codec(out, i) != (kt_get_codec(condition, i) ? kt_get_codec(x, i) : kt_get_codec(y, i))) mismatches++;
  CHECK_EQ_INT(mismatches, 0);
  if (out) stax_tensor_release(out);
  out = NULL;
  /* errors */
  stax_tensor_t* not_bool[3] = {x, x, x};
  CHECK_ERROR(kt_run_kernel(stax_kernel_Where, STAX_OP_Where, NULL, 0, not_bool, 3, &out, 1, NULL),
              STAX_DTYPE_MISMATCH, "Where node 'node0': input 0 (condition) must be bool");
  stax_tensor_t* f = make_iota(STAX_DTYPE_FLOAT32, 2, big);
  stax_tensor_t* mixed[3] = {condition, x, f};
  CHECK_ERROR(kt_run_kernel(stax_kernel_Where, STAX_OP_Where, NULL, 0, mixed, 3, &out, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 2 is float32 but input 1 is int32");
  stax_tensor_t* wrong_shape[3] = {condition, x, y_base};
  CHECK_ERROR(kt_run_kernel(stax_kernel_Where, STAX_OP_Where, NULL, 0, wrong_shape, 3, &out, 1, NULL),
              STAX_SHAPE_MISMATCH, "Where node 'node0'");
  CHECK(out == NULL);
  kt_release_all((stax_tensor_t*[]){condition, x, y_base, y, f}, 5);
  stax_threadpool_destroy(pool);
}

/* ---- allocation failures ----------------------------------------------------------------- */

/* Fails each allocation the kernel makes through call->allocator in turn: every failure is a
 * status, the output is left NULL, and nothing leaks. */
static void test_allocation_failures(void) {
  const int64_t dims[2] = {2, 3}, row_dims[1] = {3};
  stax_tensor_t* a = make_iota(STAX_DTYPE_FLOAT32, 2, dims);
  stax_tensor_t* b = make_iota(STAX_DTYPE_FLOAT32, 1, row_dims);
  const stax_op_t ops[2] = {STAX_OP_Add, STAX_OP_Mean};
  const stax_kernel_fn fns[2] = {stax_kernel_Add, stax_kernel_Mean};
  for (int o = 0; o < 2; o++) {
    bool succeeded = false;
    for (uint64_t fail_at = 1; fail_at <= 16 && !succeeded; fail_at++) {
      stax_failing_allocator_t state;
      stax_failing_allocator_init(&state, kt_allocator(), fail_at);
      stax_node_t node;
      memset(&node, 0, sizeof(node));
      node.op = ops[o];
      node.name = "node0";
      stax_tensor_t* inputs[3] = {a, b, a};
      stax_tensor_t* out = NULL;
      stax_kernel_call_t call;
      memset(&call, 0, sizeof(call));
      call.node = &node;
      call.allocator = stax_failing_allocator(&state);
      call.input_count = o == 0 ? 2 : 3;
      call.inputs = inputs;
      call.output_count = 1;
      call.outputs = &out;
      stax_status_t status = fns[o](&call);
      if (status) {
        CHECK(out == NULL);
        CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
        stax_status_free(status);
      } else {
        succeeded = true;
        double a4 = kt_get_codec(a, 4), b1 = kt_get_codec(b, 1);
        CHECK_NEAR(kt_get_codec(out, 4), o == 0 ? a4 + b1 : (2 * a4 + b1) / 3, 1e-5);
        stax_tensor_release(out);
      }
      CHECK_EQ_INT(state.live_allocations, 0);
    }
    CHECK(succeeded);
  }
  kt_release_all((stax_tensor_t*[]){a, b}, 2);
}

STAX_TEST_MAIN(STAX_TEST(test_allocation_failures), STAX_TEST(test_add_every_dtype), STAX_TEST(test_sub_every_dtype),
               STAX_TEST(test_mul_every_dtype), STAX_TEST(test_div_every_dtype),
               STAX_TEST(test_mod_every_dtype), STAX_TEST(test_integer_wraparound),
               STAX_TEST(test_mod_signs), STAX_TEST(test_integer_division_by_zero),
               STAX_TEST(test_pow), STAX_TEST(test_bitshift), STAX_TEST(test_prelu),
               STAX_TEST(test_broadcast_ranks), STAX_TEST(test_views),
               STAX_TEST(test_preallocated_outputs), STAX_TEST(test_thread_pool),
               STAX_TEST(test_comparisons), STAX_TEST(test_logic), STAX_TEST(test_variadic),
               STAX_TEST(test_where))
