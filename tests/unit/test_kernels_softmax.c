/* Tests for the Softmax, LogSoftmax and Hardmax generic kernels (src/kernels/softmax.c):
 * values against a naive reference computed here along every axis (negative spellings too),
 * float16 / bfloat16 / float32 / float64, huge and infinite inputs, non-contiguous views,
 * preallocated outputs, zero-sized dims, the thread pool, and the error paths. */
#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

static stax_kernel_fn kernel_for(stax_op_t op) {
  switch (op) {
    case STAX_OP_Softmax: return stax_kernel_Softmax;
    case STAX_OP_LogSoftmax: return stax_kernel_LogSoftmax;
    case STAX_OP_Hardmax: return stax_kernel_Hardmax;
    default: return NULL;
  }
}

/* Runs op with attribute axis (or none when has_axis is false). */
static stax_status_t run_softmax(stax_op_t op, bool has_axis, int64_t axis, stax_tensor_t* x,
                                 stax_threadpool_t* pool, stax_tensor_t** out) {
  stax_node_attr_t attr = kt_attr_int("axis", axis);
  return kt_call_kernel(kernel_for(op), op, "s", &attr, has_axis ? 1 : 0, &x, 1, out, 1,
                        kt_allocator(), pool);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double random_value(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(int64_t)(rng_state % 1024) / 64.0 - 8.0;
}

/* Naive reference over contiguous data of `dims` along `axis`. */
static void reference(stax_op_t op, int32_t rank, const int64_t* dims, int32_t axis,
                      const double* x, double* out) {
  int64_t outer = 1, inner = 1, length = dims[axis];
  for (int32_t d = 0; d < axis; d++) outer *= dims[d];
  for (int32_t d = axis + 1; d < rank; d++) inner *= dims[d];
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      const double* slice = x + o * length * inner + i;
      double* result = out + o * length * inner + i;
      double max = slice[0];
      int64_t first = 0;
      for (int64_t k = 1; k < length; k++)
        if (slice[k * inner] > max) {
          max = slice[k * inner];
          first = k;
        }
      double sum = 0;
      for (int64_t k = 0; k < length; k++) sum += exp(slice[k * inner] - max);
      for (int64_t k = 0; k < length; k++) {
        double v = slice[k * inner];
        if (op == STAX_OP_Softmax) result[k * inner] = exp(v - max) / sum;
        else if (op == STAX_OP_LogSoftmax) result[k * inner] = v - max - log(sum);
        else result[k * inner] = k == first ? 1.0 : 0.0;
      }
    }
  }
}

static const stax_op_t ops[] = {STAX_OP_Softmax, STAX_OP_LogSoftmax, STAX_OP_Hardmax};

static void test_softmax_literal(void) {
  const int64_t dims[] = {1, 3};
  const double values[] = {1, 2, 3};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  stax_tensor_t* y = NULL;
  CHECK_OK(run_softmax(STAX_OP_Softmax, false, 0, x, NULL, &y)); /* default axis -1 */
  if (y) {
    const float* out = stax_tensor_data(y);
    double sum = exp(1) + exp(2) + exp(3);
    CHECK_NEAR(out[0], exp(1) / sum, 1e-7);
    CHECK_NEAR(out[1], exp(2) / sum, 1e-7);
    CHECK_NEAR(out[2], exp(3) / sum, 1e-7);
    stax_tensor_release(y);
  }
  y = NULL;
  CHECK_OK(run_softmax(STAX_OP_Hardmax, false, 0, x, NULL, &y));
  if (y) {
    const float* out = stax_tensor_data(y);
    CHECK(out[0] == 0 && out[1] == 0 && out[2] == 1);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
}

/* Every op, every axis of [3, 4, 5], float32 and float64, with ties for Hardmax. */
static void test_softmax_reference_all_axes(void) {
  const int64_t dims[] = {3, 4, 5};
  double values[60], expected[60], got[60];
  for (int i = 0; i < 60; i++) values[i] = floor(random_value() * 2) / 2;
  for (int dt = 0; dt < 2; dt++) {
    stax_dtype_t dtype = dt ? STAX_DTYPE_FLOAT64 : STAX_DTYPE_FLOAT32;
    stax_tensor_t* x = kt_make(dtype, 3, dims, values);
    for (int k = 0; k < 3; k++) {
      for (int axis = -3; axis < 3; axis++) {
        reference(ops[k], 3, dims, axis < 0 ? axis + 3 : axis, values, expected);
        stax_tensor_t* y = NULL;
        CHECK_OK(run_softmax(ops[k], true, axis, x, NULL, &y));
        if (!y) continue;
        CHECK_EQ_INT(stax_tensor_element_count(y), 60);
        CHECK(stax_tensor_dtype(y) == dtype);
        kt_read_values(y, got);
        double tolerance = dt ? 1e-13 : 2e-6;
        bool close = true;
        for (int i = 0; i < 60; i++)
          if (!(fabs(got[i] - expected[i]) <= tolerance * (1 + fabs(expected[i])))) close = false;
        CHECK(close);
        stax_tensor_release(y);
      }
    }
    stax_tensor_release(x);
  }
}

/* Long slices cross chunk boundaries in both the per-slice and the blocked paths. */
static void test_softmax_long_axis(void) {
  const int64_t dims[] = {3, 600};
  static double values[1800], expected[1800], got[1800];
  for (int i = 0; i < 1800; i++) values[i] = random_value();
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT64, 2, dims, values);
  for (int k = 0; k < 3; k++) {
    for (int axis = 0; axis < 2; axis++) {
      reference(ops[k], 2, dims, axis, values, expected);
      stax_tensor_t* y = NULL;
      CHECK_OK(run_softmax(ops[k], true, axis, x, NULL, &y));
      if (!y) continue;
      kt_read_values(y, got);
      bool close = true;
      for (int i = 0; i < 1800; i++)
        if (!(fabs(got[i] - expected[i]) <= 1e-12 * (1 + fabs(expected[i])))) close = false;
      CHECK(close);
      stax_tensor_release(y);
    }
  }
  stax_tensor_release(x);
}

static void test_softmax_half_types(void) {
  const int64_t dims[] = {2, 2};
  const double values[] = {0, 0, 1, -1};
  stax_dtype_t dtypes[] = {STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16};
  for (int t = 0; t < 2; t++) {
    stax_tensor_t* x = kt_make(dtypes[t], 2, dims, values);
    stax_tensor_t* y = NULL;
    CHECK_OK(run_softmax(STAX_OP_Softmax, true, 1, x, NULL, &y));
    double got[4] = {0};
    if (y) kt_read_values(y, got);
    double tolerance = t ? 4e-3 : 5e-4;
    CHECK_NEAR(got[0], 0.5, 0);
    CHECK_NEAR(got[1], 0.5, 0);
    CHECK_NEAR(got[2], 1 / (1 + exp(-2)), tolerance);
    CHECK_NEAR(got[3], 1 / (1 + exp(2)), tolerance);
    if (y) stax_tensor_release(y);
    y = NULL;
    CHECK_OK(run_softmax(STAX_OP_LogSoftmax, true, 1, x, NULL, &y));
    if (y) kt_read_values(y, got);
    CHECK_NEAR(got[0], -log(2.0), tolerance);
    CHECK_NEAR(got[3], -2 - log(1 + exp(-2)), 2e-2);
    if (y) stax_tensor_release(y);
    stax_tensor_release(x);
  }
  /* Both layouts (per slice and blocked) recompute exp for the 16-bit types. */
  const int64_t dims2[] = {3, 5};
  double values2[15], rounded[15], expected[15], got[15];
  for (int i = 0; i < 15; i++) {
    values2[i] = random_value() / 4;
    rounded[i] = stax_f16_to_f32(stax_f32_to_f16((float)values2[i]));
  }
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT16, 2, dims2, values2);
  for (int k = 0; k < 2; k++) {
    for (int axis = 0; axis < 2; axis++) {
      reference(ops[k], 2, dims2, axis, rounded, expected);
      stax_tensor_t* y = NULL;
      CHECK_OK(run_softmax(ops[k], true, axis, x, NULL, &y));
      if (!y) continue;
      kt_read_values(y, got);
      bool close = true;
      for (int i = 0; i < 15; i++)
        if (!(fabs(got[i] - expected[i]) <= 1e-3 * (1 + fabs(expected[i])))) close = false;
      CHECK(close);
      stax_tensor_release(y);
    }
  }
  stax_tensor_release(x);
}

/* Subtracting the max keeps huge inputs finite; -inf entries get probability 0. */
static void test_softmax_extreme_values(void) {
  const int64_t dims[] = {4};
  const double values[] = {10000, 10000, -INFINITY, 9999};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 1, dims, values);
  stax_tensor_t* y = NULL;
  CHECK_OK(run_softmax(STAX_OP_Softmax, true, 0, x, NULL, &y));
  if (y) {
    const float* out = stax_tensor_data(y);
    double sum = 2 + exp(-1);
    CHECK_NEAR(out[0], 1 / sum, 1e-7);
    CHECK_NEAR(out[2], 0, 0);
    CHECK_NEAR(out[3], exp(-1) / sum, 1e-7);
    stax_tensor_release(y);
  }
  y = NULL;
  CHECK_OK(run_softmax(STAX_OP_LogSoftmax, true, 0, x, NULL, &y));
  if (y) {
    const float* out = stax_tensor_data(y);
    CHECK_NEAR(out[0], -log(2 + exp(-1)), 1e-6);
    CHECK(isinf(out[2]) && out[2] < 0);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
  /* A NaN poisons its slice only. */
  const int64_t dims2[] = {2, 2};
  const double with_nan[] = {NAN, 1, 2, 3};
  x = kt_make(STAX_DTYPE_FLOAT64, 2, dims2, with_nan);
  y = NULL;
  CHECK_OK(run_softmax(STAX_OP_Softmax, true, 1, x, NULL, &y));
  if (y) {
    const double* out = stax_tensor_data(y);
    CHECK(isnan(out[0]) && isnan(out[1]));
    CHECK_NEAR(out[2] + out[3], 1.0, 1e-15);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
}

/* The float32 fast path (contiguous axis): against the double reference, 4 ulp-ish relative
 * (plus what float32 inputs round) over rows of 1 to 600, rows spanning 0..-200 (exp leaves
 * float32's range: those elements must be 0 or tiny), a NaN row, a row with +inf (NaN, as
 * in double), a row of -inf with one finite value, and in place. */
static void test_softmax_float32_fast_path(void) {
  const int64_t lengths[] = {1, 7, 64, 600};
  for (int l = 0; l < 4; l++) {
    int64_t n = lengths[l], dims[2] = {5, n};
    double* values = calloc((size_t)(5 * n), sizeof(double));
    double* expected = calloc((size_t)(5 * n), sizeof(double));
    double* got = calloc((size_t)(5 * n), sizeof(double));
    for (int64_t i = 0; i < 5 * n; i++) values[i] = (float)random_value();
    for (int64_t k = 0; k < n; k++) values[2 * n + k] = (float)(-200.0 * (double)k / (double)n);
    if (n > 1) values[3 * n + 1] = NAN;
    if (n > 1) values[1 * n + 0] = INFINITY; /* inf - inf: the whole row NaN */
    for (int64_t k = 0; k < n; k++) values[4 * n + k] = k == n / 2 ? 3.0 : -INFINITY;
    reference(STAX_OP_Softmax, 2, dims, 1, values, expected);
    stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
    for (int in_place = 0; in_place < 2; in_place++) {
      stax_tensor_t* y = NULL;
      if (in_place) {
        y = x;
        stax_tensor_retain(y);
        stax_node_attr_t attr = kt_attr_int("axis", 1);
        CHECK_OK(kt_call_kernel(stax_kernel_Softmax, STAX_OP_Softmax, "s", &attr, 1, &x, 1, &y,
                                1, kt_allocator(), NULL));
      } else {
        CHECK_OK(run_softmax(STAX_OP_Softmax, true, 1, x, NULL, &y));
      }
      if (!y) continue;
      kt_read_values(y, got);
      int64_t bad = 0;
      for (int64_t i = 0; i < 5 * n; i++) {
        bool ok = isnan(expected[i]) ? isnan(got[i])
                                     : fabs(got[i] - expected[i]) <= 1e-6 * expected[i] + 1e-37;
        if (!ok && bad++ < 3)
          fprintf(stderr, "n %lld element %lld: %.9g vs %.9g\n", (long long)n, (long long)i,
                  got[i], expected[i]);
      }
      CHECK_EQ_INT(bad, 0);
      stax_tensor_release(y);
      if (in_place) break; /* x now holds outputs */
    }
    stax_tensor_release(x);
    free(values);
    free(expected);
    free(got);
  }
}

/* A transposed view and a negatively strided slice, into preallocated outputs. */
static void test_softmax_views_preallocated(void) {
  const int64_t dims[] = {5, 6};
  double values[30];
  for (int i = 0; i < 30; i++) values[i] = random_value();
  stax_tensor_t* base = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  stax_tensor_t* transposed = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &transposed)); /* [6, 5] */
  double t_values[30], expected[30], got[30];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 5; j++) t_values[i * 5 + j] = values[j * 6 + i];
  const int64_t t_dims[] = {6, 5};
  for (int k = 0; k < 3; k++) {
    for (int axis = 0; axis < 2; axis++) {
      reference(ops[k], 2, t_dims, axis, t_values, expected);
      stax_tensor_t* y = kt_make(STAX_DTYPE_FLOAT32, 2, t_dims, NULL);
      stax_tensor_t* out = y;
      CHECK_OK(run_softmax(ops[k], true, axis, transposed, NULL, &out));
      CHECK(out == y);
      kt_read_values(y, got);
      bool close = true;
      for (int i = 0; i < 30; i++)
        if (!(fabs(got[i] - expected[i]) <= 2e-6 * (1 + fabs(expected[i])))) close = false;
      CHECK(close);
      stax_tensor_release(y);
    }
  }
  /* Rows 4, 2, 0 (step -2). */
  const int64_t starts[] = {4}, ends[] = {-100}, steps[] = {-2};
  const int32_t axes[] = {0};
  stax_tensor_t* sliced = NULL;
  CHECK_OK(stax_tensor_slice(kt_allocator(), base, 1, starts, ends, axes, steps, &sliced));
  double s_values[18];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 6; j++) s_values[i * 6 + j] = values[(4 - 2 * i) * 6 + j];
  const int64_t s_dims[] = {3, 6};
  for (int axis = 0; axis < 2; axis++) {
    reference(STAX_OP_LogSoftmax, 2, s_dims, axis, s_values, expected);
    stax_tensor_t* y = NULL;
    CHECK_OK(run_softmax(STAX_OP_LogSoftmax, true, axis, sliced, NULL, &y));
    if (!y) continue;
    kt_read_values(y, got);
    for (int i = 0; i < 18; i++) CHECK_NEAR(got[i], expected[i], 2e-6 * (1 + fabs(expected[i])));
    stax_tensor_release(y);
  }
  /* Wrong preallocated dtype. */
  stax_tensor_t* wrong = kt_make(STAX_DTYPE_FLOAT64, 2, t_dims, NULL);
  stax_tensor_t* out = wrong;
  CHECK_ERROR(run_softmax(STAX_OP_Softmax, true, 0, transposed, NULL, &out),
              STAX_SHAPE_MISMATCH, "float64");
  stax_tensor_release(wrong);
  stax_tensor_release(sliced);
  stax_tensor_release(transposed);
  stax_tensor_release(base);
}

static void test_softmax_zero_sized(void) {
  const int64_t dims[] = {0, 4};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  for (int axis = 0; axis < 2; axis++) {
    stax_tensor_t* y = NULL;
    CHECK_OK(run_softmax(STAX_OP_Softmax, true, axis, x, NULL, &y));
    if (y) {
      CHECK_EQ_INT(stax_tensor_dims(y)[0], 0);
      CHECK_EQ_INT(stax_tensor_dims(y)[1], 4);
      stax_tensor_release(y);
    }
  }
  stax_tensor_release(x);
}

static void test_softmax_threaded(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  const int64_t dims[] = {256, 300};
  static double values[256 * 300], expected[256 * 300], got[256 * 300];
  for (int i = 0; i < 256 * 300; i++) values[i] = random_value();
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  for (int axis = 0; axis < 2; axis++) {
    /* The values lie on a 1/64 grid: float32 holds them exactly. */
    reference(STAX_OP_Softmax, 2, dims, axis, values, expected);
    stax_tensor_t* y = NULL;
    CHECK_OK(run_softmax(STAX_OP_Softmax, true, axis, x, pool, &y));
    if (!y) continue;
    kt_read_values(y, got);
    bool close = true;
    for (int i = 0; i < 256 * 300; i++)
      if (!(fabs(got[i] - expected[i]) <= 1e-6 * (1 + fabs(expected[i])))) close = false;
    CHECK(close);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
  stax_threadpool_destroy(pool);
}

static void test_softmax_errors(void) {
  const int64_t dims[] = {2, 3};
  stax_tensor_t* x = kt_make(STAX_DTYPE_INT32, 2, dims, NULL);
  stax_tensor_t* y = NULL;
  CHECK_ERROR(run_softmax(STAX_OP_Softmax, true, 1, x, NULL, &y), STAX_DTYPE_MISMATCH, "int32");
  CHECK(y == NULL);
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  CHECK_ERROR(run_softmax(STAX_OP_LogSoftmax, true, 2, x, NULL, &y), STAX_OUT_OF_RANGE,
              "axis 2 is out of range for input 0 of rank 2");
  CHECK_ERROR(run_softmax(STAX_OP_Hardmax, true, -3, x, NULL, &y), STAX_OUT_OF_RANGE,
              "axis -3");
  CHECK(y == NULL);
  stax_tensor_release(x);
  /* A scalar has no axis. */
  x = kt_make(STAX_DTYPE_FLOAT32, 0, NULL, NULL);
  CHECK_ERROR(run_softmax(STAX_OP_Softmax, false, 0, x, NULL, &y), STAX_OUT_OF_RANGE, "rank 0");
  stax_tensor_release(x);
}

STAX_TEST_MAIN(STAX_TEST(test_softmax_literal), STAX_TEST(test_softmax_reference_all_axes),
               STAX_TEST(test_softmax_float32_fast_path),
               STAX_TEST(test_softmax_long_axis), STAX_TEST(test_softmax_half_types),
               STAX_TEST(test_softmax_extreme_values),
               STAX_TEST(test_softmax_views_preallocated), STAX_TEST(test_softmax_zero_sized),
               STAX_TEST(test_softmax_threaded), STAX_TEST(test_softmax_errors))
