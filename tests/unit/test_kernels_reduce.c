/* Tests for the Reduce* and ArgMax/ArgMin generic kernels (src/kernels/reduce.c,
 * src/kernels/arg_reduce.c): values against a naive reference computed here, every dtype
 * family, keepdims both ways, negative axes, axes as attribute and as input, empty axes with
 * and without noop, rank 0, zero-sized dims, non-contiguous views, preallocated outputs, the
 * thread pool's split paths, and the error paths. */
#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* The kernels under test, called directly (not through the VM's table). */
static stax_kernel_fn kernel_for(stax_op_t op) {
  switch (op) {
#define KERNEL_CASE(name) \
  case STAX_OP_##name:    \
    return stax_kernel_##name;
    KERNEL_CASE(ReduceSum)
    KERNEL_CASE(ReduceMean)
    KERNEL_CASE(ReduceMax)
    KERNEL_CASE(ReduceMin)
    KERNEL_CASE(ReduceProd)
    KERNEL_CASE(ReduceL1)
    KERNEL_CASE(ReduceL2)
    KERNEL_CASE(ReduceSumSquare)
    KERNEL_CASE(ReduceLogSum)
    KERNEL_CASE(ReduceLogSumExp)
    KERNEL_CASE(ArgMax)
    KERNEL_CASE(ArgMin)
#undef KERNEL_CASE
    default:
      return NULL;
  }
}

/* Runs one kernel with one output; *out is the output (owned) or NULL. */
static stax_status_t run_kernel(stax_op_t op, stax_node_attr_t* attrs, int32_t attr_count,
                                stax_tensor_t* const* inputs, int32_t input_count,
                                stax_threadpool_t* pool, stax_tensor_t** out) {
  return kt_call_kernel(kernel_for(op), op, "n", attrs, attr_count, inputs, input_count, out, 1,
                        kt_allocator(), pool);
}

static uint64_t rng_state = 88172645463325252ull;
static double random_value(void) { /* xorshift: uniform in [-4, 4) on a 1/64 grid */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(int64_t)(rng_state % 512) / 64.0 - 4.0;
}

/* Naive reference: reduces contiguous `x` (dims) over `reduced` axes with the op's formula. */
static void reference_reduce(stax_op_t op, int32_t rank, const int64_t* dims,
                             const bool* reduced, const double* x, double* out,
                             int64_t* out_count) {
  int64_t total = 1, outputs = 1;
  for (int32_t d = 0; d < rank; d++) {
    total *= dims[d];
    if (!reduced[d]) outputs *= dims[d];
  }
  *out_count = outputs;
  static double acc[4096], maxima[4096];
  static int64_t counts[4096];
  for (int64_t o = 0; o < outputs; o++) {
    acc[o] = op == STAX_OP_ReduceProd ? 1.0 : 0.0;
    maxima[o] = op == STAX_OP_ReduceMin ? INFINITY : -INFINITY;
    counts[o] = 0;
  }
  for (int pass = 0; pass < 2; pass++) {
    for (int64_t i = 0; i < total; i++) {
      int64_t rest = i, o = 0, scale = 1;
      for (int32_t d = rank - 1; d >= 0; d--) {
        int64_t index = rest % dims[d];
        rest /= dims[d];
        if (!reduced[d]) {
          o += index * scale;
          scale *= dims[d];
        }
      }
      double v = x[i];
      if (pass == 0) {
        counts[o]++;
        if (op == STAX_OP_ReduceMax || op == STAX_OP_ReduceLogSumExp) maxima[o] = fmax(maxima[o], v);
        if (op == STAX_OP_ReduceMin) maxima[o] = fmin(maxima[o], v);
        if (op == STAX_OP_ReduceSum || op == STAX_OP_ReduceMean || op == STAX_OP_ReduceLogSum)
          acc[o] += v;
        if (op == STAX_OP_ReduceProd) acc[o] *= v;
        if (op == STAX_OP_ReduceL1) acc[o] += fabs(v);
        if (op == STAX_OP_ReduceL2 || op == STAX_OP_ReduceSumSquare) acc[o] += v * v;
      } else if (op == STAX_OP_ReduceLogSumExp) {
        acc[o] += exp(v - maxima[o]);
      }
    }
  }
  for (int64_t o = 0; o < outputs; o++) {
    switch (op) {
      case STAX_OP_ReduceMax:
      case STAX_OP_ReduceMin: out[o] = maxima[o]; break;
      case STAX_OP_ReduceMean: out[o] = acc[o] / (double)counts[o]; break;
      case STAX_OP_ReduceL2: out[o] = sqrt(acc[o]); break;
      case STAX_OP_ReduceLogSum: out[o] = log(acc[o]); break;
      case STAX_OP_ReduceLogSumExp: out[o] = maxima[o] + log(acc[o]); break;
      default: out[o] = acc[o]; break;
    }
  }
}

static const stax_op_t reduce_ops[] = {
    STAX_OP_ReduceSum,  STAX_OP_ReduceMean,      STAX_OP_ReduceMax,    STAX_OP_ReduceMin,
    STAX_OP_ReduceProd, STAX_OP_ReduceL1,        STAX_OP_ReduceL2,     STAX_OP_ReduceSumSquare,
    STAX_OP_ReduceLogSum, STAX_OP_ReduceLogSumExp};
#define REDUCE_OP_COUNT ((int)(sizeof(reduce_ops) / sizeof(reduce_ops[0])))

/* ---- Reduce*: values ------------------------------------------------------------------------ */

static void test_reduce_sum_literal(void) {
  const int64_t dims[] = {2, 3};
  const double values[] = {1, 2, 3, 4, 5, 6};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  const int64_t axes[] = {1};
  for (int keep = 0; keep <= 1; keep++) {
    stax_node_attr_t attrs[] = {kt_attr_ints("axes", 1, axes), kt_attr_int("keepdims", keep)};
    stax_tensor_t* y = NULL;
    CHECK_OK(run_kernel(STAX_OP_ReduceSum, attrs, 2, &x, 1, NULL, &y));
    if (!y) continue;
    CHECK_EQ_INT(stax_tensor_rank(y), keep ? 2 : 1);
    CHECK_EQ_INT(stax_tensor_dims(y)[0], 2);
    if (keep) CHECK_EQ_INT(stax_tensor_dims(y)[1], 1);
    const float* out = stax_tensor_data(y);
    CHECK_NEAR(out[0], 6.0, 0);
    CHECK_NEAR(out[1], 15.0, 0);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
}

/* Every op, every axis subset of a [3, 4, 5] tensor (negative spellings too), both keepdims,
 * axes as attribute and as an int64 / int32 input, float32 and float64. */
static void test_reduce_all_ops_all_axes(void) {
  const int64_t dims[] = {3, 4, 5};
  double x_values[60];
  for (int i = 0; i < 60; i++) x_values[i] = random_value();
  /* Positive values for LogSum and Prod stay well conditioned. */
  double positive[60];
  for (int i = 0; i < 60; i++) positive[i] = 0.75 + fabs(x_values[i]) / 8.0;
  for (int dt = 0; dt < 2; dt++) {
    stax_dtype_t dtype = dt == 0 ? STAX_DTYPE_FLOAT32 : STAX_DTYPE_FLOAT64;
    for (int k = 0; k < REDUCE_OP_COUNT; k++) {
      stax_op_t op = reduce_ops[k];
      const double* data =
          (op == STAX_OP_ReduceLogSum || op == STAX_OP_ReduceProd) ? positive : x_values;
      stax_tensor_t* x = kt_make(dtype, 3, dims, data);
      for (int mask = 1; mask < 8; mask++) {
        bool reduced[3];
        int64_t axes[3];
        int32_t count = 0;
        for (int d = 0; d < 3; d++) {
          reduced[d] = (mask >> d) & 1;
          /* Spell every other axis negatively. */
          if (reduced[d]) {
            axes[count] = (count % 2) ? d - 3 : d;
            count++;
          }
        }
        double expected[60];
        int64_t expected_count = 0;
        reference_reduce(op, 3, dims, reduced, data, expected, &expected_count);
        for (int form = 0; form < 3; form++) {
          for (int keep = 0; keep <= 1; keep++) {
            stax_node_attr_t attrs[2] = {kt_attr_int("keepdims", keep)};
            int32_t attr_count = 1;
            stax_tensor_t* inputs[2] = {x, NULL};
            int32_t input_count = 1;
            if (form == 0) {
              attrs[attr_count++] = kt_attr_ints("axes", count, axes);
            } else {
              double axes_values[3] = {(double)axes[0], (double)axes[1], (double)axes[2]};
              int64_t axes_dims[] = {count};
              inputs[1] = kt_make(form == 1 ? STAX_DTYPE_INT64 : STAX_DTYPE_INT32, 1,
                                      axes_dims, axes_values);
              input_count = 2;
            }
            stax_tensor_t* y = NULL;
            CHECK_OK(run_kernel(op, attrs, attr_count, inputs, input_count, NULL, &y));
            if (inputs[1]) stax_tensor_release(inputs[1]);
            if (!y) continue;
            CHECK_EQ_INT(stax_tensor_rank(y), keep ? 3 : 3 - count);
            CHECK_EQ_INT(stax_tensor_element_count(y), expected_count);
            double got[60];
            kt_read_values(y, got);
            double tolerance = dtype == STAX_DTYPE_FLOAT32 ? 1e-5 : 1e-12;
            for (int64_t o = 0; o < expected_count; o++)
              CHECK_NEAR(got[o], expected[o], tolerance * (1 + fabs(expected[o])));
            stax_tensor_release(y);
          }
        }
      }
      stax_tensor_release(x);
    }
  }
}

/* Row lengths around the lane width and the conversion chunk, reduced inner and outer. */
static void test_reduce_odd_lengths(void) {
  const int64_t lengths[] = {1, 3, 7, 9, 13, 255, 257, 523};
  static double values[2 * 523], expected[2 * 523];
  for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++) {
    const int64_t dims[] = {2, lengths[l]};
    for (int64_t i = 0; i < 2 * lengths[l]; i++) values[i] = 0.9 + fabs(random_value()) / 16;
    stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT64, 2, dims, values);
    for (int k = 0; k < REDUCE_OP_COUNT; k++) {
      for (int axis = 0; axis < 2; axis++) {
        bool reduced[2] = {axis == 0, axis == 1};
        int64_t expected_count = 0;
        reference_reduce(reduce_ops[k], 2, dims, reduced, values, expected, &expected_count);
        const int64_t axes[] = {axis};
        stax_node_attr_t attrs[] = {kt_attr_ints("axes", 1, axes)};
        stax_tensor_t* y = NULL;
        CHECK_OK(run_kernel(reduce_ops[k], attrs, 1, &x, 1, NULL, &y));
        if (!y) continue;
        const double* got = stax_tensor_data(y);
        for (int64_t o = 0; o < expected_count; o++)
          CHECK_NEAR(got[o], expected[o], 1e-12 * (1 + fabs(expected[o])));
        stax_tensor_release(y);
      }
    }
    stax_tensor_release(x);
  }
}

/* float16 and bfloat16 accumulate in double and round once. */
static void test_reduce_half_types(void) {
  const int64_t dims[] = {2, 4};
  const double values[] = {0.5, 1.5, -2.0, 4.0, 1024, 1, 1, 1};
  const int64_t axes[] = {-1};
  stax_dtype_t dtypes[] = {STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16};
  for (int t = 0; t < 2; t++) {
    stax_tensor_t* x = kt_make(dtypes[t], 2, dims, values);
    stax_node_attr_t attrs[] = {kt_attr_ints("axes", 1, axes), kt_attr_int("keepdims", 0)};
    stax_tensor_t* y = NULL;
    CHECK_OK(run_kernel(STAX_OP_ReduceSum, attrs, 2, &x, 1, NULL, &y));
    double got[2] = {0};
    if (y) kt_read_values(y, got);
    CHECK_NEAR(got[0], 4.0, 0);
    /* 1024 + 3 = 1027: float16 rounds to 1027 (spacing 1), bfloat16 to 1024 (spacing 8). */
    CHECK_NEAR(got[1], t == 0 ? 1027.0 : 1024.0, 0);
    if (y) stax_tensor_release(y);
    y = NULL;
    CHECK_OK(run_kernel(STAX_OP_ReduceMax, attrs, 2, &x, 1, NULL, &y));
    if (y) kt_read_values(y, got);
    CHECK_NEAR(got[0], 4.0, 0);
    CHECK_NEAR(got[1], 1024.0, 0);
    if (y) stax_tensor_release(y);
    stax_tensor_release(x);
  }
}

/* Integers: exact 64-bit sums, truncating Mean, wrapping narrow sums, limits for Max/Min. */
static void test_reduce_integers(void) {
  const int64_t dims[] = {3};
  /* int64 beyond 2^53: a double accumulator would lose the +1s. */
  int64_t big[] = {(INT64_C(1) << 60) + 1, 1, 1};
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_wrap(kt_allocator(), big, STAX_DTYPE_INT64, 1, dims, NULL, NULL, NULL, &x));
  stax_tensor_t* y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceSum, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK(*(int64_t*)stax_tensor_data(y) == (INT64_C(1) << 60) + 3);
  if (y) stax_tensor_release(y);
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMax, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK(*(int64_t*)stax_tensor_data(y) == (INT64_C(1) << 60) + 1);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);

  /* int32 Mean truncates toward zero: (-7 + 0) / 2 = -3; (5 + 2) / 2 = 3. */
  const int64_t dims2[] = {2, 2};
  const double ints[] = {-7, 0, 5, 2};
  x = kt_make(STAX_DTYPE_INT32, 2, dims2, ints);
  const int64_t axes[] = {1};
  stax_node_attr_t attrs[] = {kt_attr_ints("axes", 1, axes), kt_attr_int("keepdims", 0)};
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMean, attrs, 2, &x, 1, NULL, &y));
  if (y) {
    CHECK_EQ_INT(((int32_t*)stax_tensor_data(y))[0], -3);
    CHECK_EQ_INT(((int32_t*)stax_tensor_data(y))[1], 3);
    stax_tensor_release(y);
  }
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceL1, attrs, 2, &x, 1, NULL, &y));
  if (y) {
    CHECK_EQ_INT(((int32_t*)stax_tensor_data(y))[0], 7);
    CHECK_EQ_INT(((int32_t*)stax_tensor_data(y))[1], 7);
    stax_tensor_release(y);
  }
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceL2, attrs, 2, &x, 1, NULL, &y));
  if (y) { /* sqrt(49) = 7, sqrt(29) = 5.38 -> 5 */
    CHECK_EQ_INT(((int32_t*)stax_tensor_data(y))[0], 7);
    CHECK_EQ_INT(((int32_t*)stax_tensor_data(y))[1], 5);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);

  /* int32 sum wraps like int32 arithmetic. */
  const double wrap[] = {2147483647.0, 1.0};
  const int64_t dims1[] = {2};
  x = kt_make(STAX_DTYPE_INT32, 1, dims1, wrap);
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceSum, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK_EQ_INT(*(int32_t*)stax_tensor_data(y), INT32_MIN);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);

  /* uint64 above INT64_MAX orders as unsigned. */
  uint64_t unsigned_values[] = {UINT64_MAX - 1, 3, UINT64_C(1) << 63};
  CHECK_OK(stax_tensor_wrap(kt_allocator(), unsigned_values, STAX_DTYPE_UINT64, 1, dims, NULL, NULL, NULL,
                            &x));
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMax, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK(*(uint64_t*)stax_tensor_data(y) == UINT64_MAX - 1);
  if (y) stax_tensor_release(y);
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMin, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK(*(uint64_t*)stax_tensor_data(y) == 3);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);

  /* int8 / uint8 Max and Min, and bool Max (any) / Min (all). */
  const double small[] = {-128, 127, 5};
  x = kt_make(STAX_DTYPE_INT8, 1, dims, small);
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMin, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK_EQ_INT(*(int8_t*)stax_tensor_data(y), -128);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);
  const double bytes[] = {200, 7, 255};
  x = kt_make(STAX_DTYPE_UINT8, 1, dims, bytes);
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMax, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK_EQ_INT(*(uint8_t*)stax_tensor_data(y), 255);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);
  const double flags[] = {0, 1, 0};
  x = kt_make(STAX_DTYPE_BOOL, 1, dims, flags);
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMax, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK_EQ_INT(*(uint8_t*)stax_tensor_data(y), 1);
  if (y) stax_tensor_release(y);
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMin, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK_EQ_INT(*(uint8_t*)stax_tensor_data(y), 0);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);
}

/* No axes: everything, or (noop_with_empty_axes) each element on its own. */
static void test_reduce_empty_axes(void) {
  const int64_t dims[] = {2, 2};
  const double values[] = {1, -2, 3, -4};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  stax_tensor_t* y = NULL;
  stax_node_attr_t keep0[] = {kt_attr_int("keepdims", 0)};
  CHECK_OK(run_kernel(STAX_OP_ReduceSumSquare, keep0, 1, &x, 1, NULL, &y));
  if (y) {
    CHECK_EQ_INT(stax_tensor_rank(y), 0);
    CHECK_NEAR(*(float*)stax_tensor_data(y), 30.0, 0);
    stax_tensor_release(y);
  }
  /* An empty axes input behaves like no axes. */
  const int64_t zero[] = {0};
  stax_tensor_t* empty_axes = kt_make(STAX_DTYPE_INT64, 1, zero, NULL);
  stax_tensor_t* inputs[] = {x, empty_axes};
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceSum, NULL, 0, inputs, 2, NULL, &y));
  if (y) {
    CHECK_EQ_INT(stax_tensor_rank(y), 2);
    CHECK_EQ_INT(stax_tensor_dims(y)[0], 1);
    CHECK_NEAR(*(float*)stax_tensor_data(y), -2.0, 0);
    stax_tensor_release(y);
  }
  stax_node_attr_t noop[] = {kt_attr_int("noop_with_empty_axes", 1)};
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceSumSquare, noop, 1, inputs, 2, NULL, &y));
  if (y) {
    double got[4];
    kt_read_values(y, got);
    CHECK_EQ_INT(stax_tensor_dims(y)[0], 2);
    CHECK_EQ_INT(stax_tensor_dims(y)[1], 2);
    for (int i = 0; i < 4; i++) CHECK_NEAR(got[i], values[i] * values[i], 0);
    stax_tensor_release(y);
  }
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMean, noop, 1, &x, 1, NULL, &y));
  if (y) {
    double got[4];
    kt_read_values(y, got);
    for (int i = 0; i < 4; i++) CHECK_NEAR(got[i], values[i], 0);
    stax_tensor_release(y);
  }
  stax_tensor_release(empty_axes);
  stax_tensor_release(x);
}

static void test_reduce_rank0(void) {
  const double value[] = {-2.5};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT64, 0, NULL, value);
  for (int k = 0; k < REDUCE_OP_COUNT; k++) {
    stax_tensor_t* y = NULL;
    CHECK_OK(run_kernel(reduce_ops[k], NULL, 0, &x, 1, NULL, &y));
    if (!y) continue;
    CHECK_EQ_INT(stax_tensor_rank(y), 0);
    double got = *(double*)stax_tensor_data(y);
    double want = -2.5;
    switch (reduce_ops[k]) {
      case STAX_OP_ReduceL1:
      case STAX_OP_ReduceL2: want = 2.5; break;
      case STAX_OP_ReduceSumSquare: want = 6.25; break;
      default: break;
    }
    if (reduce_ops[k] == STAX_OP_ReduceLogSum) CHECK(isnan(got)); /* log(-2.5) */
    else CHECK_NEAR(got, want, 1e-15);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
}

/* Reductions over an empty set give the identity. */
static void test_reduce_zero_sized(void) {
  const int64_t dims[] = {2, 0, 3};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 3, dims, NULL);
  const int64_t axes[] = {1};
  stax_node_attr_t attrs[] = {kt_attr_ints("axes", 1, axes)};
  struct {
    stax_op_t op;
    double want;
  } cases[] = {{STAX_OP_ReduceSum, 0.0},         {STAX_OP_ReduceProd, 1.0},
               {STAX_OP_ReduceMax, -INFINITY},   {STAX_OP_ReduceMin, INFINITY},
               {STAX_OP_ReduceLogSum, -INFINITY}, {STAX_OP_ReduceLogSumExp, -INFINITY},
               {STAX_OP_ReduceL2, 0.0},          {STAX_OP_ReduceMean, NAN}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    stax_tensor_t* y = NULL;
    CHECK_OK(run_kernel(cases[c].op, attrs, 1, &x, 1, NULL, &y));
    if (!y) continue;
    CHECK_EQ_INT(stax_tensor_rank(y), 3);
    CHECK_EQ_INT(stax_tensor_element_count(y), 6);
    double got[6];
    kt_read_values(y, got);
    for (int i = 0; i < 6; i++) {
      if (isnan(cases[c].want)) CHECK(isnan(got[i]));
      else CHECK(got[i] == cases[c].want);
    }
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
  /* Integer Max of nothing is the dtype's lowest value. */
  x = kt_make(STAX_DTYPE_INT32, 3, dims, NULL);
  stax_tensor_t* y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceMax, attrs, 1, &x, 1, NULL, &y));
  if (y) CHECK_EQ_INT(((int32_t*)stax_tensor_data(y))[5], INT32_MIN);
  if (y) stax_tensor_release(y);
  /* Reducing a non-empty dim of an empty tensor gives an empty output. */
  const int64_t axes2[] = {2};
  stax_node_attr_t attrs2[] = {kt_attr_ints("axes", 1, axes2), kt_attr_int("keepdims", 0)};
  y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceSum, attrs2, 2, &x, 1, NULL, &y));
  if (y) {
    CHECK_EQ_INT(stax_tensor_rank(y), 2);
    CHECK_EQ_INT(stax_tensor_dims(y)[1], 0);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
}

/* Transposed and negatively-strided views reduce like their materialized values. */
static void test_reduce_non_contiguous(void) {
  const int64_t dims[] = {4, 6};
  double values[24];
  for (int i = 0; i < 24; i++) values[i] = random_value();
  stax_tensor_t* base = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  stax_tensor_t* transposed = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &transposed)); /* [6, 4] */
  double t_values[24];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++) t_values[i * 4 + j] = values[j * 6 + i];
  /* Columns 5, 3, 1 of every row: step -2. */
  const int64_t starts[] = {5}, ends[] = {-100}, steps[] = {-2};
  const int32_t slice_axes[] = {1};
  stax_tensor_t* sliced = NULL;
  CHECK_OK(stax_tensor_slice(kt_allocator(), base, 1, starts, ends, slice_axes, steps, &sliced));
  double s_values[12];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) s_values[i * 3 + j] = values[i * 6 + 5 - 2 * j];
  struct {
    stax_tensor_t* view;
    const double* data;
    int64_t dims[2];
  } views[] = {{transposed, t_values, {6, 4}}, {sliced, s_values, {4, 3}}};
  for (int v = 0; v < 2; v++) {
    for (int k = 0; k < REDUCE_OP_COUNT; k++) {
      if (reduce_ops[k] == STAX_OP_ReduceLogSum || reduce_ops[k] == STAX_OP_ReduceProd) continue;
      for (int axis = 0; axis < 2; axis++) {
        bool reduced[2] = {axis == 0, axis == 1};
        double expected[24];
        int64_t expected_count = 0;
        reference_reduce(reduce_ops[k], 2, views[v].dims, reduced, views[v].data, expected,
                         &expected_count);
        const int64_t axes[] = {axis};
        stax_node_attr_t attrs[] = {kt_attr_ints("axes", 1, axes)};
        stax_tensor_t* y = NULL;
        CHECK_OK(run_kernel(reduce_ops[k], attrs, 1, &views[v].view, 1, NULL, &y));
        if (!y) continue;
        double got[24];
        kt_read_values(y, got);
        for (int64_t o = 0; o < expected_count; o++)
          CHECK_NEAR(got[o], expected[o], 1e-5 * (1 + fabs(expected[o])));
        stax_tensor_release(y);
      }
    }
  }
  stax_tensor_release(transposed);
  stax_tensor_release(sliced);
  stax_tensor_release(base);
}

static void test_reduce_preallocated(void) {
  const int64_t dims[] = {2, 3};
  const double values[] = {1, 2, 3, 4, 5, 6};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  const int64_t axes[] = {0};
  stax_node_attr_t attrs[] = {kt_attr_ints("axes", 1, axes), kt_attr_int("keepdims", 0)};
  const int64_t out_dims[] = {3};
  stax_tensor_t* y = kt_make(STAX_DTYPE_FLOAT32, 1, out_dims, NULL);
  stax_tensor_t* out = y;
  CHECK_OK(run_kernel(STAX_OP_ReduceMin, attrs, 2, &x, 1, NULL, &out));
  CHECK(out == y);
  const float* data = stax_tensor_data(y);
  CHECK_NEAR(data[0], 1, 0);
  CHECK_NEAR(data[1], 2, 0);
  CHECK_NEAR(data[2], 3, 0);
  stax_tensor_release(y);
  /* A preallocated output of the wrong shape is reported, and left to its owner. */
  const int64_t wrong_dims[] = {2};
  y = kt_make(STAX_DTYPE_FLOAT32, 1, wrong_dims, NULL);
  out = y;
  CHECK_ERROR(run_kernel(STAX_OP_ReduceMin, attrs, 2, &x, 1, NULL, &out), STAX_SHAPE_MISMATCH,
              "output 0");
  stax_tensor_release(y);
  stax_tensor_release(x);
}

/* Large enough to use the pool: split over a kept dim, and partial results for a full
 * reduction; results match the single-threaded ones. */
static void test_reduce_threaded(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  if (!pool) return;
  const int64_t dims[] = {300, 700};
  static double values[300 * 700];
  for (int i = 0; i < 300 * 700; i++) values[i] = random_value();
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  for (int k = 0; k < REDUCE_OP_COUNT; k++) {
    stax_op_t op = reduce_ops[k];
    if (op == STAX_OP_ReduceLogSum || op == STAX_OP_ReduceProd) continue;
    for (int mode = 0; mode < 3; mode++) { /* axis 0, axis 1, all */
      const int64_t axes[] = {mode == 2 ? 0 : mode, 1};
      stax_node_attr_t attrs[] = {kt_attr_ints("axes", mode == 2 ? 2 : 1, axes)};
      stax_tensor_t* single = NULL;
      stax_tensor_t* threaded = NULL;
      CHECK_OK(run_kernel(op, attrs, 1, &x, 1, NULL, &single));
      CHECK_OK(run_kernel(op, attrs, 1, &x, 1, pool, &threaded));
      if (single && threaded) {
        int64_t n = stax_tensor_element_count(single);
        const float* a = stax_tensor_data(single);
        const float* b = stax_tensor_data(threaded);
        bool close = true;
        for (int64_t i = 0; i < n; i++)
          if (fabs((double)a[i] - b[i]) > 1e-5 * (1 + fabs((double)a[i]))) close = false;
        CHECK(close);
      }
      if (mode == 2 && threaded && op == STAX_OP_ReduceSum) {
        double want = 0;
        for (int i = 0; i < 300 * 700; i++) want += (float)values[i];
        CHECK_NEAR(*(float*)stax_tensor_data(threaded), want, 1e-6 * fabs(want) + 1e-3);
      }
      if (single) stax_tensor_release(single);
      if (threaded) stax_tensor_release(threaded);
    }
  }
  stax_tensor_release(x);
  /* int64 full reduction through partials stays exact. */
  x = kt_make(STAX_DTYPE_INT64, 2, dims, NULL);
  int64_t* data = stax_tensor_data(x);
  int64_t want = 0;
  for (int i = 0; i < 300 * 700; i++) {
    data[i] = (INT64_C(1) << 40) + i;
    want += data[i];
  }
  stax_tensor_t* y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceSum, NULL, 0, &x, 1, pool, &y));
  if (y) CHECK(*(int64_t*)stax_tensor_data(y) == want);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);
  stax_threadpool_destroy(pool);
}

static void test_reduce_log_sum_exp_stable(void) {
  const int64_t dims[] = {3};
  const double values[] = {1000, 1000, -INFINITY};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 1, dims, values);
  stax_tensor_t* y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ReduceLogSumExp, NULL, 0, &x, 1, NULL, &y));
  if (y) CHECK_NEAR(*(float*)stax_tensor_data(y), 1000 + log(2.0), 1e-3);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);
}

static void test_reduce_errors(void) {
  const int64_t dims[] = {2, 3};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  stax_tensor_t* y = NULL;
  const int64_t bad_axis[] = {2};
  stax_node_attr_t attrs[] = {kt_attr_ints("axes", 1, bad_axis)};
  CHECK_ERROR(run_kernel(STAX_OP_ReduceSum, attrs, 1, &x, 1, NULL, &y), STAX_OUT_OF_RANGE,
              "axes[0] = 2 is out of range for input 0 of rank 2");
  CHECK(y == NULL);
  const int64_t negative_axis[] = {-3};
  attrs[0] = kt_attr_ints("axes", 1, negative_axis);
  CHECK_ERROR(run_kernel(STAX_OP_ReduceMax, attrs, 1, &x, 1, NULL, &y), STAX_OUT_OF_RANGE,
              "-3");
  const int64_t repeated[] = {1, -1};
  attrs[0] = kt_attr_ints("axes", 2, repeated);
  CHECK_ERROR(run_kernel(STAX_OP_ReduceMean, attrs, 1, &x, 1, NULL, &y), STAX_INVALID_ARGUMENT,
              "repeats axis 1");
  /* Axes both ways. */
  const int64_t one[] = {1};
  attrs[0] = kt_attr_ints("axes", 1, one);
  const int64_t axes_dims[] = {1};
  const double axes_value[] = {1};
  stax_tensor_t* axes = kt_make(STAX_DTYPE_INT64, 1, axes_dims, axes_value);
  stax_tensor_t* inputs[] = {x, axes};
  CHECK_ERROR(run_kernel(STAX_OP_ReduceSum, attrs, 1, inputs, 2, NULL, &y),
              STAX_INVALID_ARGUMENT, "both");
  stax_tensor_release(axes);
  /* Float axes input. */
  axes = kt_make(STAX_DTYPE_FLOAT32, 1, axes_dims, axes_value);
  inputs[1] = axes;
  CHECK_ERROR(run_kernel(STAX_OP_ReduceSum, NULL, 0, inputs, 2, NULL, &y), STAX_DTYPE_MISMATCH,
              "axes");
  stax_tensor_release(axes);
  /* The 'keepdims' attribute of the wrong type. */
  stax_node_attr_t wrong_type = kt_attr_ints("keepdims", 1, one);
  CHECK_ERROR(run_kernel(STAX_OP_ReduceSum, &wrong_type, 1, &x, 1, NULL, &y),
              STAX_INVALID_ARGUMENT, "keepdims");
  stax_tensor_release(x);
  /* bool only for Max / Min. */
  x = kt_make(STAX_DTYPE_BOOL, 2, dims, NULL);
  CHECK_ERROR(run_kernel(STAX_OP_ReduceSum, NULL, 0, &x, 1, NULL, &y), STAX_DTYPE_MISMATCH,
              "bool");
  CHECK(y == NULL);
  stax_tensor_release(x);
}

/* Every allocation failing in turn: an error and nothing left behind, or (when only the
 * threaded partial results could not be had) the right answer computed inline. */
static void test_reduce_fault_injection(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  const int64_t dims[] = {400, 400};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT64, 2, dims, NULL);
  if (!x) return;
  double* data = stax_tensor_data(x);
  for (int i = 0; i < 400 * 400; i++) data[i] = (i % 5) - 2.0;
  stax_op_t ops[] = {STAX_OP_ReduceSum, STAX_OP_ReduceLogSumExp};
  for (int k = 0; k < 2; k++) {
    double want = ops[k] == STAX_OP_ReduceSum ? 0.0 : 2.0 + log(400 * 400 / 5 * (1 + exp(-1) + exp(-2) + exp(-3) + exp(-4)));
    bool succeeded = false;
    for (uint64_t fail_at = 1; fail_at < 20 && !succeeded; fail_at++) {
      stax_failing_allocator_t state;
      stax_failing_allocator_init(&state, kt_allocator(), fail_at);
      stax_node_t node = {.op = ops[k], .name = "f"};
      stax_tensor_t* out = NULL;
      stax_kernel_call_t call = {.node = &node,
                                 .allocator = stax_failing_allocator(&state),
                                 .pool = pool,
                                 .input_count = 1,
                                 .inputs = &x,
                                 .output_count = 1,
                                 .outputs = &out};
      stax_status_t status = kernel_for(ops[k])(&call);
      if (status == STAX_OK) {
        succeeded = true;
        CHECK(out != NULL);
        if (out) {
          CHECK_NEAR(*(double*)stax_tensor_data(out), want, 1e-9 * (1 + fabs(want)));
          stax_tensor_release(out);
        }
      } else {
        CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
        stax_status_free(status);
        CHECK(out == NULL);
      }
      CHECK_EQ_INT(state.live_allocations, 0);
    }
    CHECK(succeeded);
  }
  stax_tensor_release(x);
  stax_threadpool_destroy(pool);
}

/* ---- ArgMax / ArgMin ----------------------------------------------------------------------- */

static int64_t* run_arg(stax_op_t op, stax_tensor_t* x, int64_t axis, int64_t keepdims,
                        int64_t last, stax_threadpool_t* pool, stax_tensor_t** out) {
  stax_node_attr_t attrs[] = {kt_attr_int("axis", axis), kt_attr_int("keepdims", keepdims),
                              kt_attr_int("select_last_index", last)};
  *out = NULL;
  CHECK_OK(run_kernel(op, attrs, 3, &x, 1, pool, out));
  if (*out) CHECK(stax_tensor_dtype(*out) == STAX_DTYPE_INT64);
  return *out ? stax_tensor_data(*out) : NULL;
}

static void test_arg_basic(void) {
  const int64_t dims[] = {2, 4};
  const double values[] = {3, 9, 9, 1, -5, -5, 2, -5};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  stax_tensor_t* y = NULL;
  int64_t* r = run_arg(STAX_OP_ArgMax, x, 1, 1, 0, NULL, &y);
  if (r) {
    CHECK_EQ_INT(stax_tensor_rank(y), 2);
    CHECK_EQ_INT(stax_tensor_dims(y)[1], 1);
    CHECK_EQ_INT(r[0], 1);
    CHECK_EQ_INT(r[1], 2);
    stax_tensor_release(y);
  }
  r = run_arg(STAX_OP_ArgMax, x, -1, 0, 1, NULL, &y);
  if (r) {
    CHECK_EQ_INT(stax_tensor_rank(y), 1);
    CHECK_EQ_INT(r[0], 2);
    CHECK_EQ_INT(r[1], 2);
    stax_tensor_release(y);
  }
  r = run_arg(STAX_OP_ArgMin, x, 1, 0, 0, NULL, &y);
  if (r) {
    CHECK_EQ_INT(r[0], 3);
    CHECK_EQ_INT(r[1], 0);
    stax_tensor_release(y);
  }
  r = run_arg(STAX_OP_ArgMin, x, 1, 0, 1, NULL, &y);
  if (r) {
    CHECK_EQ_INT(r[0], 3);
    CHECK_EQ_INT(r[1], 3);
    stax_tensor_release(y);
  }
  /* Axis 0 (the blocked path): per column. */
  r = run_arg(STAX_OP_ArgMin, x, 0, 0, 0, NULL, &y);
  if (r) {
    const int64_t want[] = {1, 1, 1, 1};
    for (int j = 0; j < 4; j++) CHECK_EQ_INT(r[j], want[j]);
    stax_tensor_release(y);
  }
  r = run_arg(STAX_OP_ArgMax, x, 0, 1, 0, NULL, &y);
  if (r) {
    CHECK_EQ_INT(stax_tensor_dims(y)[0], 1);
    const int64_t want[] = {0, 0, 0, 0};
    for (int j = 0; j < 4; j++) CHECK_EQ_INT(r[j], want[j]);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
}

/* Against a naive scan, on a transposed view, over every axis, several dtypes. */
static void test_arg_reference(void) {
  const int64_t dims[] = {5, 3, 7};
  double values[105];
  for (int i = 0; i < 105; i++) values[i] = floor(random_value()); /* many ties */
  stax_dtype_t dtypes[] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT16, STAX_DTYPE_INT32,
                           STAX_DTYPE_INT8, STAX_DTYPE_FLOAT64, STAX_DTYPE_BFLOAT16};
  for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
    stax_tensor_t* base = kt_make(dtypes[t], 3, dims, values);
    const int32_t perm[] = {2, 0, 1};
    stax_tensor_t* x = NULL;
    CHECK_OK(stax_tensor_transpose(kt_allocator(), base, perm, &x)); /* [7, 5, 3] */
    if (!x) continue;
    const int64_t* xd = stax_tensor_dims(x);
    for (int op = 0; op < 2; op++) {
      for (int axis = 0; axis < 3; axis++) {
        for (int last = 0; last <= 1; last++) {
          stax_tensor_t* y = NULL;
          int64_t* r = run_arg(op ? STAX_OP_ArgMin : STAX_OP_ArgMax, x, axis, 0, last, NULL, &y);
          if (!r) continue;
          int64_t o = 0;
          int64_t idx[3];
          bool all_ok = true;
          for (idx[0] = 0; idx[0] < (axis == 0 ? 1 : xd[0]); idx[0]++)
            for (idx[1] = 0; idx[1] < (axis == 1 ? 1 : xd[1]); idx[1]++)
              for (idx[2] = 0; idx[2] < (axis == 2 ? 1 : xd[2]); idx[2]++) {
                int64_t best = 0;
                double best_value = 0;
                for (int64_t k = 0; k < xd[axis]; k++) {
                  int64_t at[3] = {idx[0], idx[1], idx[2]};
                  at[axis] = k;
                  /* x[a][b][c] = base[b][c][a] */
                  double v = values[(at[1] * 3 + at[2]) * 7 + at[0]];
                  bool better = k == 0 || (op ? (last ? v <= best_value : v < best_value)
                                              : (last ? v >= best_value : v > best_value));
                  if (better) {
                    best = k;
                    best_value = v;
                  }
                }
                if (r[o++] != best) all_ok = false;
              }
          CHECK(all_ok);
          stax_tensor_release(y);
        }
      }
    }
    stax_tensor_release(x);
    stax_tensor_release(base);
  }
}

static void test_arg_special_values(void) {
  /* NaN is chosen (first NaN), as numpy does. */
  const int64_t dims[] = {4};
  const double values[] = {1, NAN, 5, NAN};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 1, dims, values);
  stax_tensor_t* y = NULL;
  int64_t* r = run_arg(STAX_OP_ArgMax, x, 0, 0, 0, NULL, &y);
  if (r) CHECK_EQ_INT(r[0], 1);
  if (y) stax_tensor_release(y);
  r = run_arg(STAX_OP_ArgMin, x, 0, 0, 1, NULL, &y);
  if (r) CHECK_EQ_INT(r[0], 3);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);
  /* int64 values that differ only beyond 2^53. */
  int64_t big[] = {(INT64_C(1) << 60) + 1, (INT64_C(1) << 60) + 3, (INT64_C(1) << 60) + 2};
  const int64_t dims3[] = {3};
  CHECK_OK(stax_tensor_wrap(kt_allocator(), big, STAX_DTYPE_INT64, 1, dims3, NULL, NULL, NULL, &x));
  r = run_arg(STAX_OP_ArgMax, x, 0, 1, 0, NULL, &y);
  if (r) CHECK_EQ_INT(r[0], 1);
  if (y) stax_tensor_release(y);
  stax_tensor_release(x);
  /* Rank 1, keepdims 0: a scalar. A long axis crosses chunk boundaries. */
  const int64_t long_dims[] = {1000};
  static double long_values[1000];
  for (int i = 0; i < 1000; i++) long_values[i] = i == 777 ? 50 : (i % 17);
  x = kt_make(STAX_DTYPE_UINT16, 1, long_dims, long_values);
  r = run_arg(STAX_OP_ArgMax, x, 0, 0, 0, NULL, &y);
  if (r) {
    CHECK_EQ_INT(stax_tensor_rank(y), 0);
    CHECK_EQ_INT(r[0], 777);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
}

static void test_arg_errors_and_empty(void) {
  const int64_t dims[] = {2, 0};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  stax_tensor_t* y = NULL;
  stax_node_attr_t attrs[] = {kt_attr_int("axis", 1)};
  CHECK_ERROR(run_kernel(STAX_OP_ArgMax, attrs, 1, &x, 1, NULL, &y), STAX_INVALID_ARGUMENT,
              "is 0");
  CHECK(y == NULL);
  /* Along the non-empty axis the output is empty: fine. */
  attrs[0] = kt_attr_int("axis", 0);
  CHECK_OK(run_kernel(STAX_OP_ArgMax, attrs, 1, &x, 1, NULL, &y));
  if (y) {
    CHECK_EQ_INT(stax_tensor_element_count(y), 0);
    stax_tensor_release(y);
    y = NULL;
  }
  attrs[0] = kt_attr_int("axis", 2);
  CHECK_ERROR(run_kernel(STAX_OP_ArgMin, attrs, 1, &x, 1, NULL, &y), STAX_OUT_OF_RANGE,
              "axis 2 is out of range for input 0 of rank 2");
  stax_tensor_release(x);
  const int64_t dims2[] = {2};
  x = kt_make(STAX_DTYPE_BOOL, 1, dims2, NULL);
  attrs[0] = kt_attr_int("axis", 0);
  CHECK_ERROR(run_kernel(STAX_OP_ArgMin, attrs, 1, &x, 1, NULL, &y), STAX_DTYPE_MISMATCH, "bool");
  stax_tensor_release(x);
}

static void test_arg_threaded_preallocated(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  const int64_t dims[] = {400, 300};
  static double values[400 * 300];
  for (int i = 0; i < 400 * 300; i++) values[i] = random_value();
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT64, 2, dims, values);
  for (int axis = 0; axis < 2; axis++) {
    const int64_t out_dims[] = {axis == 0 ? 300 : 400};
    stax_tensor_t* y = kt_make(STAX_DTYPE_INT64, 1, out_dims, NULL);
    stax_tensor_t* out = y;
    stax_node_attr_t attrs[] = {kt_attr_int("axis", axis), kt_attr_int("keepdims", 0)};
    CHECK_OK(run_kernel(STAX_OP_ArgMax, attrs, 2, &x, 1, pool, &out));
    CHECK(out == y);
    const int64_t* r = stax_tensor_data(y);
    bool all_ok = true;
    for (int64_t o = 0; o < out_dims[0]; o++) {
      int64_t best = 0;
      for (int64_t k = 1; k < dims[axis]; k++) {
        double v = axis == 0 ? values[k * 300 + o] : values[o * 300 + k];
        double b = axis == 0 ? values[best * 300 + o] : values[o * 300 + best];
        if (v > b) best = k;
      }
      if (r[o] != best) all_ok = false;
    }
    CHECK(all_ok);
    stax_tensor_release(y);
  }
  stax_tensor_release(x);
  stax_threadpool_destroy(pool);
}

STAX_TEST_MAIN(STAX_TEST(test_reduce_sum_literal), STAX_TEST(test_reduce_all_ops_all_axes),
               STAX_TEST(test_reduce_odd_lengths),
               STAX_TEST(test_reduce_half_types), STAX_TEST(test_reduce_integers),
               STAX_TEST(test_reduce_empty_axes), STAX_TEST(test_reduce_rank0),
               STAX_TEST(test_reduce_zero_sized), STAX_TEST(test_reduce_non_contiguous),
               STAX_TEST(test_reduce_preallocated), STAX_TEST(test_reduce_threaded),
               STAX_TEST(test_reduce_log_sum_exp_stable), STAX_TEST(test_reduce_errors),
               STAX_TEST(test_reduce_fault_injection),
               STAX_TEST(test_arg_basic), STAX_TEST(test_arg_reference),
               STAX_TEST(test_arg_special_values), STAX_TEST(test_arg_errors_and_empty),
               STAX_TEST(test_arg_threaded_preallocated))
