/* Tests for the normalization (Layer, Batch, Instance, LRN), loss and CumSum generic kernels
 * (src/kernels/normalization.c, src/kernels/loss.c, src/kernels/cumsum.c): values against
 * references computed here, optional inputs and outputs, several dtypes, non-contiguous
 * inputs, preallocated outputs, zero-sized dims, the thread pool, and the error paths (bad
 * shapes, dtypes, axes, labels out of range, training mode). */
#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

static stax_kernel_fn kernel_for(stax_op_t op) {
  switch (op) {
    case STAX_OP_LayerNormalization: return stax_kernel_LayerNormalization;
    case STAX_OP_BatchNormalization: return stax_kernel_BatchNormalization;
    case STAX_OP_InstanceNormalization: return stax_kernel_InstanceNormalization;
    case STAX_OP_LRN: return stax_kernel_LRN;
    case STAX_OP_NegativeLogLikelihoodLoss: return stax_kernel_NegativeLogLikelihoodLoss;
    case STAX_OP_SoftmaxCrossEntropyLoss: return stax_kernel_SoftmaxCrossEntropyLoss;
    case STAX_OP_CumSum: return stax_kernel_CumSum;
    default: return NULL;
  }
}

/* Runs a kernel; outputs[0..output_count) in/out as in the calling convention. */
static stax_status_t run_node(stax_op_t op, stax_node_attr_t* attrs, int32_t attr_count,
                              stax_tensor_t* const* inputs, int32_t input_count,
                              stax_tensor_t** outputs, int32_t output_count,
                              stax_threadpool_t* pool) {
  return kt_call_kernel(kernel_for(op), op, "k", attrs, attr_count, inputs, input_count, outputs,
                        output_count, kt_allocator(), pool);
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double random_value(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(int64_t)(rng_state % 1024) / 64.0 - 8.0;
}

static bool all_close(const double* got, const double* want, int64_t n, double tolerance) {
  bool ok = true;
  for (int64_t i = 0; i < n; i++) {
    if (!(fabs(got[i] - want[i]) <= tolerance * (1 + fabs(want[i])))) {
      if (ok)
        fprintf(stderr, "  first mismatch at %lld: got %.9g, want %.9g\n", (long long)i, got[i],
                want[i]);
      ok = false;
    }
  }
  return ok;
}

/* ---- LayerNormalization ------------------------------------------------------------------- */

/* Rows of `row_length` contiguous values; scale / bias per element of a row (bias may be
 * NULL). Also returns the per-row mean and 1/std. */
static void reference_layer_norm(const double* x, int64_t rows, int64_t row_length,
                                 const double* scale, const double* bias, double epsilon,
                                 double* y, double* mean, double* inv_std) {
  for (int64_t r = 0; r < rows; r++) {
    const double* row = x + r * row_length;
    double m = 0, v = 0;
    for (int64_t k = 0; k < row_length; k++) m += row[k];
    m /= (double)row_length;
    for (int64_t k = 0; k < row_length; k++) v += (row[k] - m) * (row[k] - m);
    v /= (double)row_length;
    double inv = 1 / sqrt(v + epsilon);
    for (int64_t k = 0; k < row_length; k++)
      y[r * row_length + k] = (row[k] - m) * inv * scale[k] + (bias ? bias[k] : 0);
    if (mean) mean[r] = m;
    if (inv_std) inv_std[r] = inv;
  }
}

static void test_layer_norm_values(void) {
  const int64_t dims[] = {2, 3, 4};
  double values[24], scale_values[12], bias_values[12];
  for (int i = 0; i < 24; i++) values[i] = random_value();
  for (int i = 0; i < 12; i++) {
    scale_values[i] = random_value();
    bias_values[i] = random_value();
  }
  stax_dtype_t dtypes[] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT64};
  for (int t = 0; t < 2; t++) {
    stax_tensor_t* x = kt_make(dtypes[t], 3, dims, values);
    for (int axis_case = 0; axis_case < 3; axis_case++) {
      /* axis -1 (rows of 4), axis 1 (rows of 12), axis -2 == 1 without bias */
      int64_t axis = axis_case == 0 ? -1 : axis_case == 1 ? 1 : -2;
      bool with_bias = axis_case != 2;
      int64_t row_length = axis == -1 ? 4 : 12, rows = 24 / row_length;
      const int64_t* side_dims = axis == -1 ? dims + 2 : dims + 1;
      int32_t side_rank = axis == -1 ? 1 : 2;
      stax_tensor_t* scale = kt_make(dtypes[t], side_rank, side_dims, scale_values);
      stax_tensor_t* bias = with_bias ? kt_make(dtypes[t], side_rank, side_dims, bias_values)
                                      : NULL;
      stax_node_attr_t attrs[] = {kt_attr_int("axis", axis), kt_attr_float("epsilon", 1e-3f)};
      stax_tensor_t* inputs[] = {x, scale, bias};
      stax_tensor_t* outputs[3] = {NULL, NULL, NULL};
      CHECK_OK(run_node(STAX_OP_LayerNormalization, attrs, 2, inputs, with_bias ? 3 : 2, outputs,
                        3, NULL));
      double want[24], want_mean[6], want_inv[6], got[24];
      reference_layer_norm(values, rows, row_length, scale_values, with_bias ? bias_values : NULL,
                           (double)1e-3f, want, want_mean, want_inv);
      if (outputs[0] && outputs[1] && outputs[2]) {
        kt_read_values(outputs[0], got);
        CHECK(all_close(got, want, 24, t ? 1e-12 : 1e-5));
        /* Mean and InvStdDev: float32 (stash_type 1), normalized dims kept as 1. */
        CHECK(stax_tensor_dtype(outputs[1]) == STAX_DTYPE_FLOAT32);
        CHECK_EQ_INT(stax_tensor_rank(outputs[1]), 3);
        CHECK_EQ_INT(stax_tensor_dims(outputs[1])[0], 2);
        CHECK_EQ_INT(stax_tensor_dims(outputs[1])[2], 1);
        CHECK_EQ_INT(stax_tensor_element_count(outputs[2]), rows);
        kt_read_values(outputs[1], got);
        CHECK(all_close(got, want_mean, rows, 1e-6));
        kt_read_values(outputs[2], got);
        CHECK(all_close(got, want_inv, rows, 1e-6));
      } else {
        CHECK(false);
      }
      kt_release_all(outputs, 3);
      stax_tensor_release(scale);
      if (bias) stax_tensor_release(bias);
    }
    stax_tensor_release(x);
  }
}

/* A scale of rank 1 broadcasts across the normalized dims; a transposed input is read right;
 * float16 works; a preallocated Y is filled. */
static void test_layer_norm_broadcast_views(void) {
  const int64_t dims[] = {3, 2, 5}; /* normalize over [2, 5] (axis 1) */
  double values[30];
  for (int i = 0; i < 30; i++) values[i] = random_value();
  /* Build x as the transpose of a [5, 2, 3] tensor so its strides are reversed. */
  const int64_t base_dims[] = {5, 2, 3};
  double base_values[30];
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 2; b++)
      for (int c = 0; c < 5; c++) base_values[(c * 2 + b) * 3 + a] = values[(a * 2 + b) * 5 + c];
  stax_tensor_t* base = kt_make(STAX_DTYPE_FLOAT16, 3, base_dims, base_values);
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &x));
  const int64_t scale_dims[] = {5};
  const double scale_values[] = {1, 2, 0.5, -1, 0.25};
  stax_tensor_t* scale = kt_make(STAX_DTYPE_FLOAT16, 1, scale_dims, scale_values);
  double full_scale[10];
  for (int i = 0; i < 10; i++) full_scale[i] = scale_values[i % 5];
  double rounded[30];
  for (int i = 0; i < 30; i++) rounded[i] = stax_f16_to_f32(stax_f32_to_f16((float)values[i]));
  double want[30], got[30];
  reference_layer_norm(rounded, 3, 10, full_scale, NULL, 1e-5, want, NULL, NULL);
  stax_tensor_t* y = kt_make(STAX_DTYPE_FLOAT16, 3, dims, NULL);
  stax_tensor_t* outputs[1] = {y};
  stax_node_attr_t attrs[] = {kt_attr_int("axis", 1)};
  stax_tensor_t* inputs[] = {x, scale};
  CHECK_OK(run_node(STAX_OP_LayerNormalization, attrs, 1, inputs, 2, outputs, 1, NULL));
  CHECK(outputs[0] == y);
  kt_read_values(y, got);
  CHECK(all_close(got, want, 30, 2e-3));
  stax_tensor_release(y);
  stax_tensor_release(scale);
  stax_tensor_release(x);
  stax_tensor_release(base);
}

static void test_layer_norm_threaded(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  const int64_t dims[] = {300, 257};
  static double values[300 * 257], want[300 * 257], got[300 * 257];
  double scale_values[257], bias_values[257];
  for (int i = 0; i < 300 * 257; i++) values[i] = random_value() + 100; /* a large offset */
  for (int i = 0; i < 257; i++) {
    scale_values[i] = random_value();
    bias_values[i] = random_value();
  }
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  stax_tensor_t* scale = kt_make(STAX_DTYPE_FLOAT32, 1, dims + 1, scale_values);
  stax_tensor_t* bias = kt_make(STAX_DTYPE_FLOAT32, 1, dims + 1, bias_values);
  stax_tensor_t* inputs[] = {x, scale, bias};
  stax_tensor_t* outputs[1] = {NULL};
  CHECK_OK(run_node(STAX_OP_LayerNormalization, NULL, 0, inputs, 3, outputs, 1, pool));
  reference_layer_norm(values, 300, 257, scale_values, bias_values, 1e-5, want, NULL, NULL);
  if (outputs[0]) {
    kt_read_values(outputs[0], got);
    CHECK(all_close(got, want, 300 * 257, 1e-5));
  }
  kt_release_all(outputs, 1);
  stax_tensor_release(x);
  stax_tensor_release(scale);
  stax_tensor_release(bias);
  stax_threadpool_destroy(pool);
}

static void test_layer_norm_errors(void) {
  const int64_t dims[] = {2, 3};
  const int64_t bad_dims[] = {4};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  stax_tensor_t* scale = kt_make(STAX_DTYPE_FLOAT32, 1, bad_dims, NULL);
  stax_tensor_t* inputs[] = {x, scale};
  stax_tensor_t* outputs[3] = {NULL, NULL, NULL};
  CHECK_ERROR(run_node(STAX_OP_LayerNormalization, NULL, 0, inputs, 2, outputs, 3, NULL),
              STAX_SHAPE_MISMATCH, "input 1 dim 0 is 4");
  CHECK(outputs[0] == NULL && outputs[1] == NULL && outputs[2] == NULL);
  stax_tensor_release(scale);
  scale = kt_make(STAX_DTYPE_FLOAT32, 1, dims + 1, NULL);
  inputs[1] = scale;
  stax_node_attr_t attrs[] = {kt_attr_int("axis", 2)};
  CHECK_ERROR(run_node(STAX_OP_LayerNormalization, attrs, 1, inputs, 2, outputs, 1, NULL),
              STAX_OUT_OF_RANGE, "axis 2 is out of range for input 0 of rank 2");
  attrs[0] = kt_attr_int("stash_type", 7); /* int64 */
  CHECK_ERROR(run_node(STAX_OP_LayerNormalization, attrs, 1, inputs, 2, outputs, 1, NULL),
              STAX_INVALID_ARGUMENT, "stash_type");
  CHECK_ERROR(run_node(STAX_OP_LayerNormalization, NULL, 0, inputs, 1, outputs, 1, NULL),
              STAX_INVALID_ARGUMENT, "input 1 is missing");
  /* A preallocated Mean of the wrong dims: nothing this call made is left behind. */
  const int64_t wrong_dims[] = {2, 3};
  stax_tensor_t* wrong = kt_make(STAX_DTYPE_FLOAT32, 2, wrong_dims, NULL);
  outputs[1] = wrong;
  CHECK_ERROR(run_node(STAX_OP_LayerNormalization, NULL, 0, inputs, 2, outputs, 2, NULL),
              STAX_SHAPE_MISMATCH, "output 1");
  CHECK(outputs[0] == NULL);
  CHECK(outputs[1] == wrong);
  stax_tensor_release(wrong);
  stax_tensor_release(scale);
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_INT32, 2, dims, NULL);
  inputs[0] = x;
  outputs[1] = NULL;
  CHECK_ERROR(run_node(STAX_OP_LayerNormalization, NULL, 0, inputs, 2, outputs, 1, NULL),
              STAX_DTYPE_MISMATCH, "int32");
  stax_tensor_release(x);
}

/* ---- BatchNormalization / InstanceNormalization -------------------------------------------- */

static void test_batch_norm(void) {
  const int64_t dims[] = {2, 3, 2}; /* N, C, W */
  double values[12];
  for (int i = 0; i < 12; i++) values[i] = random_value();
  const int64_t c_dims[] = {3};
  const double scale[] = {1, 2, -1}, bias[] = {0, 1, 0.5}, mean[] = {0.5, -1, 2},
               var[] = {1, 4, 0.25};
  for (int t = 0; t < 2; t++) {
    stax_dtype_t dtype = t ? STAX_DTYPE_FLOAT64 : STAX_DTYPE_FLOAT32;
    stax_tensor_t* inputs[5] = {
        kt_make(dtype, 3, dims, values), kt_make(dtype, 1, c_dims, scale),
        kt_make(dtype, 1, c_dims, bias), kt_make(dtype, 1, c_dims, mean),
        kt_make(dtype, 1, c_dims, var)};
    stax_node_attr_t attrs[] = {kt_attr_float("epsilon", 0.0f)};
    stax_tensor_t* outputs[3] = {NULL, NULL, NULL};
    CHECK_OK(run_node(STAX_OP_BatchNormalization, attrs, 1, inputs, 5, outputs, 3, NULL));
    double got[12], want[12];
    for (int n = 0; n < 2; n++)
      for (int c = 0; c < 3; c++)
        for (int w = 0; w < 2; w++) {
          int i = (n * 3 + c) * 2 + w;
          want[i] = (values[i] - mean[c]) / sqrt(var[c]) * scale[c] + bias[c];
        }
    if (outputs[0]) {
      kt_read_values(outputs[0], got);
      CHECK(all_close(got, want, 12, t ? 1e-14 : 1e-6));
    }
    /* The running statistics pass through in inference. */
    if (outputs[1] && outputs[2]) {
      kt_read_values(outputs[1], got);
      CHECK(all_close(got, mean, 3, 0));
      kt_read_values(outputs[2], got);
      CHECK(all_close(got, var, 3, 0));
    } else {
      CHECK(false);
    }
    kt_release_all(outputs, 3);
    kt_release_all(inputs, 5);
  }
  /* Rank 2 (N, C) and a transposed input, mixed dtypes (float16 X, float32 statistics). */
  const int64_t base_dims[] = {3, 4}; /* C, N */
  double base_values[12];
  for (int i = 0; i < 12; i++) base_values[i] = random_value();
  stax_tensor_t* base = kt_make(STAX_DTYPE_FLOAT16, 2, base_dims, base_values);
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &x)); /* [4, 3] */
  stax_tensor_t* inputs[5] = {x, kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, scale),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, bias),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, mean),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, var)};
  stax_tensor_t* outputs[1] = {NULL};
  CHECK_OK(run_node(STAX_OP_BatchNormalization, NULL, 0, inputs, 5, outputs, 1, NULL));
  if (outputs[0]) {
    double got[12], want[12];
    for (int n = 0; n < 4; n++)
      for (int c = 0; c < 3; c++)
        want[n * 3 + c] = (base_values[c * 4 + n] - mean[c]) / sqrt(var[c] + 1e-5) * scale[c] +
                          bias[c];
    kt_read_values(outputs[0], got);
    CHECK(all_close(got, want, 12, 2e-3));
  }
  kt_release_all(outputs, 1);
  kt_release_all(inputs, 5);
  stax_tensor_release(base);
}

/* Training mode reference: X is [N, C, inner] contiguous; per-channel mean and population
 * variance over N and inner. */
static void reference_batch_norm_training(const double* x, int64_t n_count, int64_t channels,
                                          int64_t inner, const double* scale,
                                          const double* bias, const double* input_mean,
                                          const double* input_var, double epsilon,
                                          double momentum, double* y, double* running_mean,
                                          double* running_var) {
  for (int64_t c = 0; c < channels; c++) {
    double m = 0, v = 0, count = (double)(n_count * inner);
    for (int64_t n = 0; n < n_count; n++)
      for (int64_t k = 0; k < inner; k++) m += x[(n * channels + c) * inner + k];
    m /= count;
    for (int64_t n = 0; n < n_count; n++)
      for (int64_t k = 0; k < inner; k++) {
        double d = x[(n * channels + c) * inner + k] - m;
        v += d * d;
      }
    v /= count;
    for (int64_t n = 0; n < n_count; n++)
      for (int64_t k = 0; k < inner; k++) {
        int64_t i = (n * channels + c) * inner + k;
        y[i] = (x[i] - m) / sqrt(v + epsilon) * scale[c] + bias[c];
      }
    running_mean[c] = input_mean[c] * momentum + m * (1 - momentum);
    running_var[c] = input_var[c] * momentum + v * (1 - momentum);
  }
}

static void test_batch_norm_training(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  /* Shapes [N, C, D...]: rank 2, 3, 4 and 5, including N = 1 and C = 1. */
  static const int64_t shapes[][5] = {
      {4, 3}, {1, 5}, {2, 3, 2}, {2, 3, 4, 5}, {3, 1, 2, 3}, {2, 2, 3, 1, 4}, {5, 4, 7, 9}};
  static const int32_t ranks[] = {2, 2, 3, 4, 4, 5, 4};
  for (int s = 0; s < (int)(sizeof(ranks) / sizeof(ranks[0])); s++) {
    int32_t rank = ranks[s];
    const int64_t* dims = shapes[s];
    int64_t channels = dims[1], inner = 1;
    for (int32_t d = 2; d < rank; d++) inner *= dims[d];
    int64_t total = dims[0] * channels * inner;
    double* values = malloc((size_t)total * sizeof(double));
    double* want = malloc((size_t)total * sizeof(double));
    double* got = malloc((size_t)total * sizeof(double));
    double scale[8], bias[8], mean[8], var[8], want_mean[8], want_var[8], got_c[8];
    /* A large offset checks the two-pass variance. */
    for (int64_t i = 0; i < total; i++) values[i] = random_value() + (s == 6 ? 1000.0 : 0.0);
    for (int64_t c = 0; c < channels; c++) {
      scale[c] = random_value();
      bias[c] = random_value();
      mean[c] = random_value();
      var[c] = fabs(random_value()) + 0.5;
    }
    const int64_t c_dims[] = {channels};
    for (int t = 0; t < 2; t++) {
      stax_dtype_t dtype = t ? STAX_DTYPE_FLOAT64 : STAX_DTYPE_FLOAT32;
      /* Round the inputs to the dtype so the reference sees the same values. */
      stax_tensor_t* inputs[5] = {
          kt_make(dtype, rank, dims, values), kt_make(dtype, 1, c_dims, scale),
          kt_make(dtype, 1, c_dims, bias), kt_make(dtype, 1, c_dims, mean),
          kt_make(dtype, 1, c_dims, var)};
      double x_used[1 << 12];
      CHECK(total <= (1 << 12));
      kt_read_values(inputs[0], x_used);
      double epsilon = s % 2 ? 1e-2 : 1e-5;
      double momentum = s % 3 == 0 ? 0.9 : 0.25; /* 0.9 is the default: not set below */
      stax_node_attr_t attrs[3] = {kt_attr_int("training_mode", 1),
                                   kt_attr_float("epsilon", (float)epsilon),
                                   kt_attr_float("momentum", (float)momentum)};
      int32_t attr_count = s % 3 == 0 ? 2 : 3;
      epsilon = (double)(float)epsilon;
      momentum = (double)(float)momentum;
      reference_batch_norm_training(x_used, dims[0], channels, inner, scale, bias, mean, var,
                                    epsilon, momentum, want, want_mean, want_var);
      double tolerance = t ? 1e-12 : 1e-5;
      int32_t output_count = s == 1 ? 1 : 3; /* Y alone is allowed too */
      stax_tensor_t* outputs[3] = {NULL, NULL, NULL};
      CHECK_OK(run_node(STAX_OP_BatchNormalization, attrs, attr_count, inputs, 5, outputs,
                        output_count, s == 3 ? pool : NULL));
      if (outputs[0]) {
        CHECK_EQ_INT(outputs[0]->dtype, dtype);
        kt_read_values(outputs[0], got);
        CHECK(all_close(got, want, total, tolerance));
      } else {
        CHECK(false);
      }
      if (output_count == 3) {
        if (outputs[1] && outputs[2]) {
          CHECK_EQ_INT(outputs[1]->rank, 1);
          CHECK_EQ_INT(outputs[1]->dims[0], channels);
          CHECK_EQ_INT(outputs[2]->dims[0], channels);
          kt_read_values(outputs[1], got_c);
          CHECK(all_close(got_c, want_mean, channels, tolerance));
          kt_read_values(outputs[2], got_c);
          CHECK(all_close(got_c, want_var, channels, tolerance));
        } else {
          CHECK(false);
        }
      }
      kt_release_all(outputs, 3);
      kt_release_all(inputs, 5);
    }
    free(values);
    free(want);
    free(got);
  }
  /* A transposed (non-contiguous) float16 X with float32 statistics: X is [N=4, C=3]. */
  const int64_t base_dims[] = {3, 4}; /* C, N */
  double base_values[12], x_used[12];
  for (int i = 0; i < 12; i++) base_values[i] = random_value();
  stax_tensor_t* base = kt_make(STAX_DTYPE_FLOAT16, 2, base_dims, base_values);
  kt_read_values(base, base_values);
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &x));
  for (int n = 0; n < 4; n++)
    for (int c = 0; c < 3; c++) x_used[n * 3 + c] = base_values[c * 4 + n];
  const int64_t c_dims[] = {3};
  const double scale[] = {1, 2, -1}, bias[] = {0, 1, 0.5}, mean[] = {0.5, -1, 2},
               var[] = {1, 4, 0.25};
  stax_tensor_t* inputs[5] = {x, kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, scale),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, bias),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, mean),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, var)};
  stax_node_attr_t attrs[] = {kt_attr_int("training_mode", 1)};
  stax_tensor_t* outputs[3] = {NULL, NULL, NULL};
  CHECK_OK(run_node(STAX_OP_BatchNormalization, attrs, 1, inputs, 5, outputs, 3, NULL));
  double want[12], got[12], want_mean[3], want_var[3];
  reference_batch_norm_training(x_used, 4, 3, 1, scale, bias, mean, var, (double)1e-5f,
                                (double)0.9f, want, want_mean, want_var);
  if (outputs[0] && outputs[1] && outputs[2]) {
    CHECK_EQ_INT(outputs[0]->dtype, STAX_DTYPE_FLOAT16);
    CHECK_EQ_INT(outputs[1]->dtype, STAX_DTYPE_FLOAT32);
    kt_read_values(outputs[0], got);
    CHECK(all_close(got, want, 12, 2e-3));
    kt_read_values(outputs[1], got);
    CHECK(all_close(got, want_mean, 3, 1e-6));
    kt_read_values(outputs[2], got);
    CHECK(all_close(got, want_var, 3, 1e-6));
  } else {
    CHECK(false);
  }
  kt_release_all(outputs, 3);
  kt_release_all(inputs, 5);
  stax_tensor_release(base);
  stax_threadpool_destroy(pool);
}

static void test_batch_norm_errors(void) {
  const int64_t dims[] = {2, 3};
  const int64_t c_dims[] = {3}, bad_dims[] = {2};
  stax_tensor_t* inputs[5] = {kt_make(STAX_DTYPE_FLOAT32, 2, dims, NULL),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, NULL),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, NULL),
                              kt_make(STAX_DTYPE_FLOAT32, 1, bad_dims, NULL),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, NULL)};
  stax_tensor_t* outputs[1] = {NULL};
  CHECK_ERROR(run_node(STAX_OP_BatchNormalization, NULL, 0, inputs, 5, outputs, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 3 (input_mean) has dims [2], expected [3]");
  CHECK(outputs[0] == NULL);
  stax_node_attr_t training[] = {kt_attr_int("training_mode", 1)};
  CHECK_ERROR(run_node(STAX_OP_BatchNormalization, training, 1, inputs, 5, outputs, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 3 (input_mean)");
  CHECK(outputs[0] == NULL);
  kt_release_all(inputs, 5);
  const int64_t rank1[] = {3};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 1, rank1, NULL);
  stax_tensor_t* short_inputs[5] = {x, x, x, x, x};
  CHECK_ERROR(run_node(STAX_OP_BatchNormalization, NULL, 0, short_inputs, 5, outputs, 1, NULL),
              STAX_INVALID_ARGUMENT, "rank >= 2");
  stax_tensor_release(x);
}

static void test_instance_norm(void) {
  const int64_t dims[] = {2, 3, 2, 3}; /* N, C, H, W */
  double values[36];
  for (int i = 0; i < 36; i++) values[i] = random_value();
  const int64_t c_dims[] = {3};
  const double scale[] = {1, -2, 0.5}, bias[] = {0, 1, -1};
  stax_tensor_t* inputs[3] = {kt_make(STAX_DTYPE_FLOAT32, 4, dims, values),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, scale),
                              kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, bias)};
  stax_node_attr_t attrs[] = {kt_attr_float("epsilon", 0.01f)};
  stax_tensor_t* outputs[1] = {NULL};
  CHECK_OK(run_node(STAX_OP_InstanceNormalization, attrs, 1, inputs, 3, outputs, 1, NULL));
  double want[36], got[36], unit_scale[6];
  for (int r = 0; r < 6; r++) {
    int c = r % 3;
    for (int k = 0; k < 6; k++) unit_scale[k] = scale[c];
    double row_bias[6];
    for (int k = 0; k < 6; k++) row_bias[k] = bias[c];
    reference_layer_norm(values + r * 6, 1, 6, unit_scale, row_bias, (double)0.01f,
                         want + r * 6, NULL, NULL);
  }
  if (outputs[0]) {
    kt_read_values(outputs[0], got);
    CHECK(all_close(got, want, 36, 1e-5));
  }
  kt_release_all(outputs, 1);
  /* The same through a non-contiguous view: swap H and W twice over a copy. */
  const int32_t perm[] = {0, 1, 3, 2};
  stax_tensor_t* swapped = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), inputs[0], perm, &swapped));
  stax_tensor_t* materialized = NULL;
  CHECK_OK(stax_tensor_copy(kt_allocator(), swapped, &materialized)); /* [2, 3, 3, 2] contiguous */
  stax_tensor_t* view = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), materialized, perm, &view)); /* back to [2,3,2,3] */
  stax_tensor_t* view_inputs[3] = {view, inputs[1], inputs[2]};
  CHECK_OK(run_node(STAX_OP_InstanceNormalization, attrs, 1, view_inputs, 3, outputs, 1, NULL));
  if (outputs[0]) {
    kt_read_values(outputs[0], got);
    CHECK(all_close(got, want, 36, 1e-5));
  }
  kt_release_all(outputs, 1);
  stax_tensor_release(view);
  stax_tensor_release(materialized);
  stax_tensor_release(swapped);
  /* Errors: wrong scale length. */
  const int64_t bad_dims[] = {4};
  stax_tensor_t* bad = kt_make(STAX_DTYPE_FLOAT32, 1, bad_dims, NULL);
  stax_tensor_t* bad_inputs[3] = {inputs[0], bad, inputs[2]};
  CHECK_ERROR(run_node(STAX_OP_InstanceNormalization, NULL, 0, bad_inputs, 3, outputs, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 1 (scale) has dims [4], expected [3]");
  CHECK(outputs[0] == NULL);
  stax_tensor_release(bad);
  kt_release_all(inputs, 3);
}

/* ---- LRN ------------------------------------------------------------------------------------ */

/* The ONNX formula over contiguous (N, C, S) values: channels c - floor((size - 1) / 2) to
 * c + ceil((size - 1) / 2), clipped to [0, C). */
static void reference_lrn(const double* x, int64_t n, int64_t c, int64_t s, int64_t size,
                          double alpha, double beta, double bias, double* y) {
  for (int64_t b = 0; b < n; b++) {
    for (int64_t ch = 0; ch < c; ch++) {
      int64_t first = ch - (size - 1) / 2, last = ch + size / 2;
      if (first < 0) first = 0;
      if (last > c - 1) last = c - 1;
      for (int64_t k = 0; k < s; k++) {
        double sum = 0;
        for (int64_t i = first; i <= last; i++) {
          double v = x[(b * c + i) * s + k];
          sum += v * v;
        }
        y[(b * c + ch) * s + k] =
            x[(b * c + ch) * s + k] / pow(bias + alpha / (double)size * sum, beta);
      }
    }
  }
}

static void test_lrn(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 3, &pool));
  /* (N, C, H, W) with C below, at and above the window, even and odd sizes, a spatial row
   * longer than one chunk, float32 / float64 / float16 / bfloat16. */
  static const struct {
    int64_t dims[4];
    int64_t size;
    stax_dtype_t dtype;
  } cases[] = {
      {{2, 3, 2, 3}, 5, STAX_DTYPE_FLOAT32},  {{1, 1, 3, 3}, 3, STAX_DTYPE_FLOAT32},
      {{2, 6, 1, 2}, 2, STAX_DTYPE_FLOAT64},  {{1, 7, 2, 2}, 4, STAX_DTYPE_FLOAT32},
      {{1, 4, 17, 19}, 3, STAX_DTYPE_FLOAT32}, {{2, 5, 2, 2}, 3, STAX_DTYPE_FLOAT16},
      {{1, 5, 3, 1}, 1, STAX_DTYPE_BFLOAT16},
  };
  const float alpha = 0.5f, beta = 0.6f, bias = 2.0f;
  for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
    const int64_t* d = cases[t].dims;
    int64_t count = d[0] * d[1] * d[2] * d[3];
    double values[1400], want[1400], got[1400];
    CHECK(count <= 1400);
    stax_dtype_t dtype = cases[t].dtype;
    for (int64_t i = 0; i < count; i++) values[i] = random_value() / 4;
    stax_tensor_t* x = kt_make(dtype, 4, d, values);
    kt_read_values(x, values); /* what the dtype holds */
    stax_node_attr_t attrs[] = {kt_attr_int("size", cases[t].size), kt_attr_float("alpha", alpha),
                                kt_attr_float("beta", beta), kt_attr_float("bias", bias)};
    stax_tensor_t* outputs[1] = {NULL};
    CHECK_OK(run_node(STAX_OP_LRN, attrs, 4, &x, 1, outputs, 1, pool));
    reference_lrn(values, d[0], d[1], d[2] * d[3], cases[t].size, alpha, beta, bias, want);
    double tolerance = dtype == STAX_DTYPE_FLOAT64   ? 1e-12
                       : dtype == STAX_DTYPE_FLOAT32 ? 1e-6
                       : dtype == STAX_DTYPE_FLOAT16 ? 1e-3
                                                     : 8e-3;
    if (outputs[0]) {
      CHECK(outputs[0]->dtype == dtype);
      kt_read_values(outputs[0], got);
      CHECK(all_close(got, want, count, tolerance));
    }
    kt_release_all(outputs, 1);
    stax_tensor_release(x);
  }

  /* A non-contiguous input (H and W swapped through a view) and a rank-3 and rank-5 one. */
  const int64_t dims[] = {2, 4, 3, 5};
  double values[120], want[120], got[120];
  for (int i = 0; i < 120; i++) values[i] = random_value();
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 4, dims, values);
  const int32_t perm[] = {0, 1, 3, 2};
  stax_tensor_t* swapped = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), x, perm, &swapped)); /* [2, 4, 5, 3] view */
  stax_tensor_t* materialized = NULL;
  CHECK_OK(stax_tensor_copy(kt_allocator(), swapped, &materialized));
  double swapped_values[120];
  kt_read_values(materialized, swapped_values);
  stax_node_attr_t attrs[] = {kt_attr_int("size", 3)};
  stax_tensor_t* outputs[1] = {NULL};
  CHECK_OK(run_node(STAX_OP_LRN, attrs, 1, &swapped, 1, outputs, 1, NULL));
  reference_lrn(swapped_values, 2, 4, 15, 3, (double)1e-4f, 0.75, 1.0, want);
  if (outputs[0]) {
    kt_read_values(outputs[0], got);
    CHECK(all_close(got, want, 120, 1e-6));
  }
  kt_release_all(outputs, 1);
  const int64_t rank3[] = {2, 4, 15}, rank5[] = {2, 4, 3, 1, 5};
  for (int k = 0; k < 2; k++) {
    stax_tensor_t* reshaped = kt_make(STAX_DTYPE_FLOAT32, k ? 5 : 3, k ? rank5 : rank3, values);
    CHECK_OK(run_node(STAX_OP_LRN, attrs, 1, &reshaped, 1, outputs, 1, NULL));
    reference_lrn(values, 2, 4, 15, 3, (double)1e-4f, 0.75, 1.0, want);
    if (outputs[0]) {
      kt_read_values(outputs[0], got);
      CHECK(all_close(got, want, 120, 1e-6));
    }
    kt_release_all(outputs, 1);
    stax_tensor_release(reshaped);
  }
  /* A preallocated output is written in place. */
  stax_tensor_t* preallocated = kt_make(STAX_DTYPE_FLOAT32, 4, dims, NULL);
  outputs[0] = preallocated;
  CHECK_OK(run_node(STAX_OP_LRN, attrs, 1, &x, 1, outputs, 1, NULL));
  CHECK(outputs[0] == preallocated);
  reference_lrn(values, 2, 4, 15, 3, (double)1e-4f, 0.75, 1.0, want);
  kt_read_values(preallocated, got);
  CHECK(all_close(got, want, 120, 1e-6));

  /* Errors name the node, the input and dim 1; nothing is left allocated. */
  outputs[0] = NULL;
  CHECK_ERROR(run_node(STAX_OP_LRN, NULL, 0, &x, 1, outputs, 1, NULL), STAX_INVALID_ARGUMENT,
              "LRN node 'k': attribute 'size' (how many channels of input 0 dim 1 to sum over) "
              "is required");
  stax_node_attr_t zero[] = {kt_attr_int("size", 0)}, negative[] = {kt_attr_int("size", -2)};
  CHECK_ERROR(run_node(STAX_OP_LRN, zero, 1, &x, 1, outputs, 1, NULL), STAX_INVALID_ARGUMENT,
              "LRN node 'k': attribute 'size' is 0; it counts channels of input 0 dim 1");
  CHECK_ERROR(run_node(STAX_OP_LRN, negative, 1, &x, 1, outputs, 1, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'size' is -2");
  const int64_t flat[] = {2, 60};
  stax_tensor_t* matrix = kt_make(STAX_DTYPE_FLOAT32, 2, flat, values);
  CHECK_ERROR(run_node(STAX_OP_LRN, attrs, 1, &matrix, 1, outputs, 1, NULL),
              STAX_SHAPE_MISMATCH, "LRN node 'k': input 0 has rank 2; LRN needs (N, C, D1, ...)");
  stax_tensor_t* ints = kt_make(STAX_DTYPE_INT32, 4, dims, NULL);
  CHECK_ERROR(run_node(STAX_OP_LRN, attrs, 1, &ints, 1, outputs, 1, NULL), STAX_DTYPE_MISMATCH,
              "input 0 must be a floating-point tensor, got int32");
  CHECK(outputs[0] == NULL);
  kt_release_all((stax_tensor_t*[]){x, swapped, materialized, preallocated, matrix, ints}, 6);
  stax_threadpool_destroy(pool);
}

/* ---- losses -------------------------------------------------------------------------------- */

/* Reference NLL over contiguous logp [N, C, D] and targets [N, D]. */
static double reference_nll(const double* logp, const int64_t* target, const double* weights,
                            int64_t n, int64_t c, int64_t d, bool has_ignore, int64_t ignore,
                            const char* reduction, double* per_position) {
  double total = 0, weight_total = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < d; k++) {
      int64_t t = target[i * d + k];
      double loss = 0, w = 0;
      if (!(has_ignore && t == ignore)) {
        w = weights ? weights[t] : 1;
        loss = -logp[(i * c + t) * d + k] * w;
      }
      per_position[i * d + k] = loss;
      total += loss;
      weight_total += w;
    }
  if (strcmp(reduction, "mean") == 0) return total / weight_total;
  return total;
}

static void test_nll_loss(void) {
  /* N = 2, C = 3, D = 2 (an N-d target). */
  const int64_t dims[] = {2, 3, 2}, target_dims[] = {2, 2}, c_dims[] = {3};
  double logp[12];
  for (int i = 0; i < 12; i++) logp[i] = -fabs(random_value());
  const int64_t target[] = {0, 2, 1, 1};
  const double target_values[] = {0, 2, 1, 1};
  const double weights[] = {0.5, 2, 1};
  const char* reductions[] = {"none", "sum", "mean"};
  for (int r = 0; r < 3; r++) {
    for (int variant = 0; variant < 3; variant++) { /* plain, weights, weights + ignore 1 */
      stax_tensor_t* inputs[3] = {kt_make(STAX_DTYPE_FLOAT32, 3, dims, logp),
                                  kt_make(STAX_DTYPE_INT64, 2, target_dims, target_values),
                                  variant ? kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, weights)
                                          : NULL};
      stax_node_attr_t attrs[] = {kt_attr_string("reduction", reductions[r]),
                                  kt_attr_int("ignore_index", 1)};
      stax_tensor_t* outputs[1] = {NULL};
      CHECK_OK(run_node(STAX_OP_NegativeLogLikelihoodLoss, attrs, variant == 2 ? 2 : 1, inputs,
                        variant ? 3 : 2, outputs, 1, NULL));
      double per_position[4];
      double float_logp[12];
      for (int i = 0; i < 12; i++) float_logp[i] = (float)logp[i];
      double want = reference_nll(float_logp, target, variant ? weights : NULL, 2, 3, 2,
                                  variant == 2, 1, reductions[r], per_position);
      if (outputs[0]) {
        double got[4];
        kt_read_values(outputs[0], got);
        if (r == 0) {
          CHECK_EQ_INT(stax_tensor_rank(outputs[0]), 2);
          CHECK(all_close(got, per_position, 4, 1e-6));
        } else {
          CHECK_EQ_INT(stax_tensor_rank(outputs[0]), 0);
          CHECK_NEAR(got[0], want, 1e-6 * (1 + fabs(want)));
        }
      }
      kt_release_all(outputs, 1);
      kt_release_all(inputs, 3);
    }
  }
  /* A literal 2-D case: mean of -logp at the targets. */
  const int64_t dims2[] = {2, 2}, t_dims2[] = {2};
  const double logp2[] = {-1, -2, -3, -4}, t2[] = {1, 0};
  stax_tensor_t* inputs[2] = {kt_make(STAX_DTYPE_FLOAT64, 2, dims2, logp2),
                              kt_make(STAX_DTYPE_INT32, 1, t_dims2, t2)};
  stax_tensor_t* outputs[1] = {NULL};
  CHECK_OK(run_node(STAX_OP_NegativeLogLikelihoodLoss, NULL, 0, inputs, 2, outputs, 1, NULL));
  if (outputs[0]) CHECK_NEAR(*(double*)stax_tensor_data(outputs[0]), 2.5, 0);
  kt_release_all(outputs, 1);
  kt_release_all(inputs, 2);
}

static void test_nll_loss_errors(void) {
  const int64_t dims[] = {2, 3, 2}, target_dims[] = {2, 2};
  const double bad_target[] = {0, 2, 3, 1};
  stax_tensor_t* inputs[2] = {kt_make(STAX_DTYPE_FLOAT32, 3, dims, NULL),
                              kt_make(STAX_DTYPE_INT64, 2, target_dims, bad_target)};
  stax_tensor_t* outputs[1] = {NULL};
  CHECK_ERROR(run_node(STAX_OP_NegativeLogLikelihoodLoss, NULL, 0, inputs, 2, outputs, 1, NULL),
              STAX_OUT_OF_RANGE, "value 3 at position [1, 0] is out of range [0, 3)");
  CHECK(outputs[0] == NULL);
  /* The same label is fine when it is the ignore_index. */
  stax_node_attr_t ignore[] = {kt_attr_int("ignore_index", 3)};
  CHECK_OK(run_node(STAX_OP_NegativeLogLikelihoodLoss, ignore, 1, inputs, 2, outputs, 1, NULL));
  kt_release_all(outputs, 1);
  const double negative[] = {0, -1, 0, 0};
  stax_tensor_release(inputs[1]);
  inputs[1] = kt_make(STAX_DTYPE_INT32, 2, target_dims, negative);
  CHECK_ERROR(run_node(STAX_OP_NegativeLogLikelihoodLoss, NULL, 0, inputs, 2, outputs, 1, NULL),
              STAX_OUT_OF_RANGE, "value -1 at position [0, 1]");
  stax_node_attr_t bad_reduction[] = {kt_attr_string("reduction", "max")};
  CHECK_ERROR(
      run_node(STAX_OP_NegativeLogLikelihoodLoss, bad_reduction, 1, inputs, 2, outputs, 1, NULL),
      STAX_INVALID_ARGUMENT, "\"max\"");
  stax_tensor_release(inputs[1]);
  const int64_t wrong_dims[] = {2, 3};
  inputs[1] = kt_make(STAX_DTYPE_INT64, 2, wrong_dims, NULL);
  CHECK_ERROR(run_node(STAX_OP_NegativeLogLikelihoodLoss, NULL, 0, inputs, 2, outputs, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 1 dim 1 is 3 but input 0 dim 2 is 2");
  stax_tensor_release(inputs[1]);
  inputs[1] = kt_make(STAX_DTYPE_FLOAT32, 2, target_dims, NULL);
  CHECK_ERROR(run_node(STAX_OP_NegativeLogLikelihoodLoss, NULL, 0, inputs, 2, outputs, 1, NULL),
              STAX_DTYPE_MISMATCH, "int32 or int64");
  kt_release_all(inputs, 2);
}

static void test_softmax_cross_entropy(void) {
  /* N = 3, C = 4, D = 2. */
  const int64_t dims[] = {3, 4, 2}, target_dims[] = {3, 2}, c_dims[] = {4};
  double scores[24];
  for (int i = 0; i < 24; i++) scores[i] = random_value();
  const int64_t target[] = {0, 3, 2, 1, 1, 0};
  const double target_values[] = {0, 3, 2, 1, 1, 0};
  const double weights[] = {1, 0.5, 2, 1.5};
  /* Reference log-softmax over C. */
  double logp[24];
  for (int n = 0; n < 3; n++)
    for (int d = 0; d < 2; d++) {
      double max = -INFINITY, sum = 0;
      for (int c = 0; c < 4; c++) max = fmax(max, scores[(n * 4 + c) * 2 + d]);
      for (int c = 0; c < 4; c++) sum += exp(scores[(n * 4 + c) * 2 + d] - max);
      for (int c = 0; c < 4; c++)
        logp[(n * 4 + c) * 2 + d] = scores[(n * 4 + c) * 2 + d] - max - log(sum);
    }
  const char* reductions[] = {"none", "sum", "mean"};
  for (int r = 0; r < 3; r++) {
    stax_tensor_t* inputs[3] = {kt_make(STAX_DTYPE_FLOAT64, 3, dims, scores),
                                kt_make(STAX_DTYPE_INT64, 2, target_dims, target_values),
                                kt_make(STAX_DTYPE_FLOAT64, 1, c_dims, weights)};
    stax_node_attr_t attrs[] = {kt_attr_string("reduction", reductions[r]),
                                kt_attr_int("ignore_index", 0)};
    stax_tensor_t* outputs[2] = {NULL, NULL};
    CHECK_OK(run_node(STAX_OP_SoftmaxCrossEntropyLoss, attrs, 2, inputs, 3, outputs, 2, NULL));
    double per_position[6];
    double want =
        reference_nll(logp, target, weights, 3, 4, 2, true, 0, reductions[r], per_position);
    if (outputs[0] && outputs[1]) {
      double got[24];
      kt_read_values(outputs[0], got);
      if (r == 0) CHECK(all_close(got, per_position, 6, 1e-13));
      else CHECK_NEAR(got[0], want, 1e-13 * (1 + fabs(want)));
      kt_read_values(outputs[1], got);
      CHECK(all_close(got, logp, 24, 1e-13));
    } else {
      CHECK(false);
    }
    kt_release_all(outputs, 2);
    kt_release_all(inputs, 3);
  }
  /* Without weights, without log_prob, float32, default mean. */
  stax_tensor_t* inputs[2] = {kt_make(STAX_DTYPE_FLOAT32, 3, dims, scores),
                              kt_make(STAX_DTYPE_INT32, 2, target_dims, target_values)};
  stax_tensor_t* outputs[1] = {NULL};
  CHECK_OK(run_node(STAX_OP_SoftmaxCrossEntropyLoss, NULL, 0, inputs, 2, outputs, 1, NULL));
  double per_position[6];
  double want = reference_nll(logp, target, NULL, 3, 4, 2, false, 0, "mean", per_position);
  if (outputs[0]) CHECK_NEAR(*(float*)stax_tensor_data(outputs[0]), want, 1e-5);
  kt_release_all(outputs, 1);
  /* Huge scores stay finite. */
  const int64_t dims2[] = {1, 2}, t_dims2[] = {1};
  const double huge[] = {10000, 10000}, label[] = {1};
  stax_tensor_t* huge_inputs[2] = {kt_make(STAX_DTYPE_FLOAT32, 2, dims2, huge),
                                   kt_make(STAX_DTYPE_INT64, 1, t_dims2, label)};
  CHECK_OK(run_node(STAX_OP_SoftmaxCrossEntropyLoss, NULL, 0, huge_inputs, 2, outputs, 1, NULL));
  if (outputs[0]) CHECK_NEAR(*(float*)stax_tensor_data(outputs[0]), log(2.0), 1e-6);
  kt_release_all(outputs, 1);
  kt_release_all(huge_inputs, 2);
  /* Label out of range: no output made, even with log_prob requested. */
  const double bad[] = {0, 4, 0, 0, 0, 0};
  stax_tensor_release(inputs[1]);
  inputs[1] = kt_make(STAX_DTYPE_INT64, 2, target_dims, bad);
  stax_tensor_t* two[2] = {NULL, NULL};
  CHECK_ERROR(run_node(STAX_OP_SoftmaxCrossEntropyLoss, NULL, 0, inputs, 2, two, 2, NULL),
              STAX_OUT_OF_RANGE, "value 4 at position [0, 1] is out of range [0, 4)");
  CHECK(two[0] == NULL && two[1] == NULL);
  kt_release_all(inputs, 2);
}

/* ---- CumSum -------------------------------------------------------------------------------- */

static stax_status_t run_cumsum(stax_tensor_t* x, stax_tensor_t* axis, int64_t exclusive,
                                int64_t reverse, stax_threadpool_t* pool, stax_tensor_t** out) {
  stax_node_attr_t attrs[] = {kt_attr_int("exclusive", exclusive), kt_attr_int("reverse", reverse)};
  stax_tensor_t* inputs[] = {x, axis};
  return run_node(STAX_OP_CumSum, attrs, 2, inputs, 2, out, 1, pool);
}

static void test_cumsum_literal(void) {
  const int64_t dims[] = {5};
  const double values[] = {1, 2, 3, 4, 5};
  const double want[4][5] = {{1, 3, 6, 10, 15},  /* plain */
                             {0, 1, 3, 6, 10},   /* exclusive */
                             {15, 14, 12, 9, 5}, /* reverse */
                             {14, 12, 9, 5, 0}}; /* exclusive + reverse */
  stax_dtype_t dtypes[] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_INT32, STAX_DTYPE_UINT64,
                           STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16, STAX_DTYPE_FLOAT64};
  const double zero[] = {0};
  stax_tensor_t* axis = kt_make(STAX_DTYPE_INT32, 0, NULL, zero);
  for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
    stax_tensor_t* x = kt_make(dtypes[t], 1, dims, values);
    for (int mode = 0; mode < 4; mode++) {
      stax_tensor_t* y = NULL;
      CHECK_OK(run_cumsum(x, axis, mode & 1, mode >> 1, NULL, &y));
      if (!y) continue;
      CHECK(stax_tensor_dtype(y) == dtypes[t]);
      double got[5];
      kt_read_values(y, got);
      CHECK(all_close(got, want[mode], 5, 0));
      stax_tensor_release(y);
    }
    stax_tensor_release(x);
  }
  stax_tensor_release(axis);
}

/* [3, 4] along each axis (1-D int64 axis input, negative too), on a transposed view. */
static void test_cumsum_axes_views(void) {
  const int64_t base_dims[] = {4, 3};
  double base_values[12];
  for (int i = 0; i < 12; i++) base_values[i] = random_value();
  stax_tensor_t* base = kt_make(STAX_DTYPE_FLOAT64, 2, base_dims, base_values);
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &x)); /* [3, 4] */
  double values[12];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) values[i * 4 + j] = base_values[j * 3 + i];
  const int64_t one[] = {1};
  for (int axis_value = -2; axis_value < 2; axis_value++) {
    int axis = axis_value < 0 ? axis_value + 2 : axis_value;
    const double axis_data[] = {axis_value};
    stax_tensor_t* axis_tensor = kt_make(STAX_DTYPE_INT64, 1, one, axis_data);
    for (int mode = 0; mode < 4; mode++) {
      bool exclusive = mode & 1, reverse = mode >> 1;
      double want[12];
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
          double sum = 0;
          int length = axis == 0 ? 3 : 4, position = axis == 0 ? i : j;
          for (int k = 0; k < length; k++) {
            bool included = reverse ? (exclusive ? k > position : k >= position)
                                    : (exclusive ? k < position : k <= position);
            if (included) sum += axis == 0 ? values[k * 4 + j] : values[i * 4 + k];
          }
          want[i * 4 + j] = sum;
        }
      stax_tensor_t* y = NULL;
      CHECK_OK(run_cumsum(x, axis_tensor, exclusive, reverse, NULL, &y));
      if (!y) continue;
      double got[12];
      kt_read_values(y, got);
      CHECK(all_close(got, want, 12, 1e-14));
      stax_tensor_release(y);
    }
    stax_tensor_release(axis_tensor);
  }
  stax_tensor_release(x);
  stax_tensor_release(base);
}

/* int64 running sums stay exact past 2^53; long axes cross chunk boundaries; threaded. */
static void test_cumsum_integers_long(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  const int64_t dims[] = {64, 1000};
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_create(kt_allocator(), STAX_DTYPE_INT64, 2, dims, &x));
  if (!x) return;
  int64_t* data = stax_tensor_data(x);
  for (int i = 0; i < 64 * 1000; i++) data[i] = (INT64_C(1) << 50) + i; /* sums reach 2^60: exact only in integers */
  const double axis_values[2] = {1, 0};
  for (int a = 0; a < 2; a++) {
    stax_tensor_t* axis = kt_make(STAX_DTYPE_INT64, 0, NULL, &axis_values[a]);
    stax_tensor_t* y = NULL;
    CHECK_OK(run_cumsum(x, axis, 0, a, pool, &y)); /* axis 0 runs in reverse */
    if (y) {
      const int64_t* r = stax_tensor_data(y);
      bool exact = true;
      for (int i = 0; i < 64 && exact; i++) {
        if (a == 0) {
          int64_t sum = 0;
          for (int j = 0; j < 1000; j++) {
            sum += data[i * 1000 + j];
            if (r[i * 1000 + j] != sum) exact = false;
          }
        }
      }
      if (a == 1) {
        for (int j = 0; j < 1000 && exact; j++) {
          int64_t sum = 0;
          for (int i = 63; i >= 0; i--) {
            sum += data[i * 1000 + j];
            if (r[i * 1000 + j] != sum) exact = false;
          }
        }
      }
      CHECK(exact);
      stax_tensor_release(y);
    }
    stax_tensor_release(axis);
  }
  stax_tensor_release(x);
  stax_threadpool_destroy(pool);
}

static void test_cumsum_errors_and_empty(void) {
  const int64_t dims[] = {2, 0};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  const double one_value[] = {1}, two_value[] = {2};
  stax_tensor_t* axis = kt_make(STAX_DTYPE_INT64, 0, NULL, one_value);
  stax_tensor_t* y = NULL;
  CHECK_OK(run_cumsum(x, axis, 0, 0, NULL, &y));
  if (y) {
    CHECK_EQ_INT(stax_tensor_element_count(y), 0);
    stax_tensor_release(y);
    y = NULL;
  }
  stax_tensor_release(axis);
  axis = kt_make(STAX_DTYPE_INT64, 0, NULL, two_value);
  CHECK_ERROR(run_cumsum(x, axis, 0, 0, NULL, &y), STAX_OUT_OF_RANGE,
              "axis 2 is out of range for input 0 of rank 2");
  CHECK(y == NULL);
  stax_tensor_release(axis);
  axis = kt_make(STAX_DTYPE_FLOAT32, 0, NULL, one_value);
  CHECK_ERROR(run_cumsum(x, axis, 0, 0, NULL, &y), STAX_DTYPE_MISMATCH, "int32 or int64");
  stax_tensor_release(axis);
  const int64_t two[] = {2};
  axis = kt_make(STAX_DTYPE_INT64, 1, two, NULL);
  CHECK_ERROR(run_cumsum(x, axis, 0, 0, NULL, &y), STAX_INVALID_ARGUMENT, "axis");
  stax_tensor_release(axis);
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_BOOL, 1, two, NULL);
  axis = kt_make(STAX_DTYPE_INT64, 0, NULL, NULL);
  CHECK_ERROR(run_cumsum(x, axis, 0, 0, NULL, &y), STAX_DTYPE_MISMATCH, "bool");
  stax_tensor_release(axis);
  stax_tensor_release(x);
}

/* Every allocation failing in turn: an error with no output and nothing leaked, until the
 * call succeeds. Covers the multi-output kernels' partial-failure paths. */
static void test_fault_injection(void) {
  const int64_t dims[] = {2, 3, 4}, c_dims[] = {3}, target_dims[] = {2, 4}, row_dims[] = {4};
  double values[24];
  for (int i = 0; i < 24; i++) values[i] = random_value();
  const double ones[] = {1, 1, 1, 1}, labels[] = {0, 1, 2, 0, 1, 2, 0, 1};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 3, dims, values);
  stax_tensor_t* channel = kt_make(STAX_DTYPE_FLOAT32, 1, c_dims, ones);
  stax_tensor_t* row = kt_make(STAX_DTYPE_FLOAT32, 1, row_dims, ones);
  stax_tensor_t* target = kt_make(STAX_DTYPE_INT64, 2, target_dims, labels);
  /* A view whose rows need a contiguous copy in InstanceNormalization. */
  const int32_t perm[] = {0, 2, 1};
  stax_tensor_t* transposed = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), x, perm, &transposed)); /* [2, 4, 3] */
  const int64_t t_c_dims[] = {4};
  stax_tensor_t* t_channel = kt_make(STAX_DTYPE_FLOAT32, 1, t_c_dims, ones);
  struct {
    stax_op_t op;
    stax_tensor_t* inputs[5];
    int32_t input_count, output_count;
  } cases[] = {
      {STAX_OP_LayerNormalization, {x, row, row}, 3, 3},
      {STAX_OP_BatchNormalization, {x, channel, channel, channel, channel}, 5, 3},
      {STAX_OP_InstanceNormalization, {transposed, t_channel, t_channel}, 3, 1},
      {STAX_OP_SoftmaxCrossEntropyLoss, {x, target}, 2, 2},
      {STAX_OP_NegativeLogLikelihoodLoss, {x, target, channel}, 3, 1},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    bool succeeded = false;
    for (uint64_t fail_at = 1; fail_at < 30 && !succeeded; fail_at++) {
      stax_failing_allocator_t state;
      stax_failing_allocator_init(&state, kt_allocator(), fail_at);
      stax_node_t node = {.op = cases[c].op, .name = "f"};
      stax_tensor_t* outputs[3] = {NULL, NULL, NULL};
      stax_kernel_call_t call = {.node = &node,
                                 .allocator = stax_failing_allocator(&state),
                                 .input_count = cases[c].input_count,
                                 .inputs = cases[c].inputs,
                                 .output_count = cases[c].output_count,
                                 .outputs = outputs};
      stax_status_t status = kernel_for(cases[c].op)(&call);
      if (status == STAX_OK) {
        succeeded = true;
        for (int32_t i = 0; i < cases[c].output_count; i++) CHECK(outputs[i] != NULL);
        kt_release_all(outputs, 3);
      } else {
        CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
        stax_status_free(status);
        CHECK(outputs[0] == NULL && outputs[1] == NULL && outputs[2] == NULL);
      }
      CHECK_EQ_INT(state.live_allocations, 0);
    }
    CHECK(succeeded);
  }
  stax_tensor_release(t_channel);
  stax_tensor_release(transposed);
  stax_tensor_release(target);
  stax_tensor_release(row);
  stax_tensor_release(channel);
  stax_tensor_release(x);
}

STAX_TEST_MAIN(STAX_TEST(test_fault_injection), STAX_TEST(test_layer_norm_values), STAX_TEST(test_layer_norm_broadcast_views),
               STAX_TEST(test_layer_norm_threaded), STAX_TEST(test_layer_norm_errors),
               STAX_TEST(test_batch_norm), STAX_TEST(test_batch_norm_training),
               STAX_TEST(test_batch_norm_errors),
               STAX_TEST(test_instance_norm), STAX_TEST(test_lrn), STAX_TEST(test_nll_loss),
               STAX_TEST(test_nll_loss_errors), STAX_TEST(test_softmax_cross_entropy),
               STAX_TEST(test_cumsum_literal), STAX_TEST(test_cumsum_axes_views),
               STAX_TEST(test_cumsum_integers_long), STAX_TEST(test_cumsum_errors_and_empty))
