/* Tests for Conv, ConvTranspose and the pools (src/kernels/conv.c, conv_transpose.c, pool.c)
 * against naive references written here: a direct convolution sum, a transposed convolution
 * as a scatter, and window loops for the pools (indices included). Covers 1-D/2-D/3-D,
 * groups and depthwise, explicit and automatic padding, strides, dilations, the 1x1 shortcut,
 * im2col chunking, every float dtype, threads, and the error paths. Values are multiples of
 * 1/8 in [-4, 4], so float32 results are exact up to summation order. */
#include <stdint.h>

#include "kernels/gemm.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double random_value(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(int64_t)(rng_state % 64) / 8.0 - 4.0;
}

static stax_tensor_t* make_tensor(stax_dtype_t dtype, int32_t rank, const int64_t* dims) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(kt_allocator(), dtype, rank, dims, &t));
  if (!t) return NULL;
  int64_t n = stax_tensor_element_count(t);
  for (int64_t i = 0; i < n; i++) {
    double v = random_value();
    if (dtype == STAX_DTYPE_INT8) v = (double)(int64_t)(v * 8);
    if (dtype == STAX_DTYPE_UINT8) v = (double)(int64_t)(v * 8 + 32);
    kt_store_codec(dtype, stax_tensor_data(t), i, v);
  }
  return t;
}

/* Logical (row-major) values of any view, as doubles; the caller frees. */
static double* to_doubles(const stax_tensor_t* t) {
  int64_t n = stax_tensor_element_count(t);
  double* values = malloc(sizeof(double) * (size_t)(n ? n : 1));
  int32_t rank = stax_tensor_rank(t);
  const int64_t* dims = stax_tensor_dims(t);
  const int64_t* strides = stax_tensor_strides(t);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, offset = 0;
    for (int32_t d = rank - 1; d >= 0; d--) {
      offset += (rest % dims[d]) * strides[d];
      rest /= dims[d];
    }
    values[i] = kt_load_codec(stax_tensor_dtype(t), stax_tensor_data(t), offset);
  }
  return values;
}

static stax_status_t run_kernel(stax_op_t op, stax_node_attr_t* attrs, int32_t attr_count,
                                stax_tensor_t* const* inputs, int32_t input_count,
                                stax_threadpool_t* pool, stax_tensor_t** outputs,
                                int32_t output_count) {
  stax_kernel_fn fn = stax_kernel_GlobalMaxPool;
  switch (op) {
    case STAX_OP_Conv: fn = stax_kernel_Conv; break;
    case STAX_OP_ConvTranspose: fn = stax_kernel_ConvTranspose; break;
    case STAX_OP_MaxPool: fn = stax_kernel_MaxPool; break;
    case STAX_OP_AveragePool: fn = stax_kernel_AveragePool; break;
    case STAX_OP_GlobalAveragePool: fn = stax_kernel_GlobalAveragePool; break;
    default: break;
  }
  return kt_call_kernel(fn, op, "n", attrs, attr_count, inputs, input_count, outputs, output_count,
                        kt_allocator(), pool);
}

/* Window parameters of a reference computation (resolved pads: begin..., then end...). */
typedef struct window_params_t {
  int32_t spatial;
  int64_t strides[3], dilations[3], pads[6];
  int64_t group;
} window_params_t;

static window_params_t plain_window(int32_t spatial) {
  window_params_t p = {.spatial = spatial, .group = 1};
  for (int32_t i = 0; i < spatial; i++) p.strides[i] = p.dilations[i] = 1;
  return p;
}

static bool check_dims(const stax_tensor_t* t, int32_t rank, const int64_t* dims) {
  bool same = stax_tensor_rank(t) == rank;
  for (int32_t d = 0; same && d < rank; d++) same = stax_tensor_dims(t)[d] == dims[d];
  if (!same) {
    fprintf(stderr, "dims differ: got");
    for (int32_t d = 0; d < stax_tensor_rank(t); d++)
      fprintf(stderr, " %lld", (long long)stax_tensor_dims(t)[d]);
    fprintf(stderr, "\n");
  }
  return same;
}

static void compare(const stax_tensor_t* out, const double* expected, int64_t count,
                    double tolerance, const char* what) {
  double* got = to_doubles(out);
  int bad = 0;
  for (int64_t i = 0; i < count; i++) {
    double e = kt_round_to(stax_tensor_dtype(out), expected[i]);
    bool nan_ok = isnan(e) && isnan(got[i]);
    if (!nan_ok && !(fabs(got[i] - e) <= tolerance * (1 + fabs(e))) && bad++ < 3)
      fprintf(stderr, "%s [%lld]: %.9g vs %.9g\n", what, (long long)i, got[i], e);
  }
  CHECK(bad == 0);
  free(got);
}

/* Row-major index of `index` (rank dims) and back. */
static void unflatten(int64_t flat, int32_t rank, const int64_t* dims, int64_t* index) {
  for (int32_t d = rank - 1; d >= 0; d--) {
    index[d] = flat % dims[d];
    flat /= dims[d];
  }
}

/* ---- Conv reference ---------------------------------------------------------------------- */

/* y[n, m, o] = b[m] + sum over c in m's group and taps k of x[n, c, o*s - pad + k*d] * w[m, c, k]
 */
static void reference_conv(const double* x, const int64_t* xd, const double* w, const int64_t* wd,
                           const double* b, const window_params_t* p, const int64_t* yd,
                           double* y) {
  const int32_t rank = p->spatial + 2;
  int64_t y_count = 1, taps = 1;
  for (int32_t d = 0; d < rank; d++) y_count *= yd[d];
  for (int32_t d = 2; d < rank; d++) taps *= wd[d];
  const int64_t cg = wd[1], mg = yd[1] / p->group;
  for (int64_t flat = 0; flat < y_count; flat++) {
    int64_t index[5], k[3];
    unflatten(flat, rank, yd, index);
    const int64_t n = index[0], m = index[1], g = m / mg;
    double sum = b ? b[m] : 0;
    for (int64_t c = 0; c < cg; c++) {
      for (int64_t t = 0; t < taps; t++) {
        unflatten(t, p->spatial, wd + 2, k);
        int64_t x_flat = n * xd[1] + g * cg + c, w_flat = m * cg + c;
        bool inside = true;
        for (int32_t d = 0; d < p->spatial; d++) {
          int64_t i = index[2 + d] * p->strides[d] - p->pads[d] + k[d] * p->dilations[d];
          if (i < 0 || i >= xd[2 + d]) inside = false;
          x_flat = x_flat * xd[2 + d] + i;
          w_flat = w_flat * wd[2 + d] + k[d];
        }
        if (inside) sum += x[x_flat] * w[w_flat];
      }
    }
    y[flat] = sum;
  }
}

typedef struct conv_case_t {
  stax_dtype_t dtype;
  int32_t rank;
  int64_t x_dims[5], w_dims[5], y_dims[5];
  window_params_t window; /* what the reference uses */
  bool bias;
  const char* auto_pad; /* NULL: explicit pads from window */
  bool kernel_shape_attr;
  bool transposed_input; /* feed X as a transposed view of its spatial dims (2-D only) */
} conv_case_t;

static void run_conv_case(const conv_case_t* cc, stax_threadpool_t* pool) {
  const int32_t spatial = cc->rank - 2;
  stax_tensor_t *x = NULL, *base = NULL;
  if (cc->transposed_input) {
    int64_t swapped[4] = {cc->x_dims[0], cc->x_dims[1], cc->x_dims[3], cc->x_dims[2]};
    base = make_tensor(cc->dtype, 4, swapped);
    const int32_t perm[4] = {0, 1, 3, 2};
    CHECK_OK(stax_tensor_transpose(kt_allocator(), base, perm, &x));
  } else {
    x = make_tensor(cc->dtype, cc->rank, cc->x_dims);
  }
  stax_tensor_t* w = make_tensor(cc->dtype, cc->rank, cc->w_dims);
  const int64_t bias_dims[1] = {cc->w_dims[0]};
  stax_tensor_t* b = cc->bias ? make_tensor(cc->dtype, 1, bias_dims) : NULL;
  stax_node_attr_t attrs[8];
  int32_t count = 0;
  const window_params_t* p = &cc->window;
  attrs[count++] = kt_attr_ints("strides", spatial, p->strides);
  attrs[count++] = kt_attr_ints("dilations", spatial, p->dilations);
  attrs[count++] = kt_attr_int("group", p->group);
  if (cc->auto_pad) {
    attrs[count++] = kt_attr_string("auto_pad", cc->auto_pad);
  } else {
    attrs[count++] = kt_attr_ints("pads", 2 * spatial, p->pads);
  }
  if (cc->kernel_shape_attr) attrs[count++] = kt_attr_ints("kernel_shape", spatial, cc->w_dims + 2);
  stax_tensor_t* inputs[3] = {x, w, b};
  stax_tensor_t* y = NULL;
  CHECK_OK(run_kernel(STAX_OP_Conv, attrs, count, inputs, b ? 3 : 2, pool, &y, 1));
  if (y && check_dims(y, cc->rank, cc->y_dims)) {
    double *xv = to_doubles(x), *wv = to_doubles(w), *bv = b ? to_doubles(b) : NULL;
    int64_t y_count = stax_tensor_element_count(y);
    double* expected = malloc(sizeof(double) * (size_t)y_count);
    reference_conv(xv, cc->x_dims, wv, cc->w_dims, bv, p, cc->y_dims, expected);
    bool half = cc->dtype == STAX_DTYPE_FLOAT16 || cc->dtype == STAX_DTYPE_BFLOAT16;
    compare(y, expected, y_count, half ? 1e-2 : 1e-6, "conv");
    free(xv);
    free(wv);
    free(bv);
    free(expected);
  } else {
    CHECK(y != NULL);
  }
  kt_release(y);
  kt_release(x);
  kt_release(base);
  kt_release(w);
  kt_release(b);
}

static void test_conv_2d(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  conv_case_t cc = {.dtype = STAX_DTYPE_FLOAT32,
                    .rank = 4,
                    .x_dims = {2, 3, 9, 11},
                    .w_dims = {4, 3, 3, 3},
                    .y_dims = {2, 4, 9, 11},
                    .bias = true,
                    .kernel_shape_attr = true};
  cc.window = plain_window(2);
  for (int i = 0; i < 4; i++) cc.window.pads[i] = 1;
  run_conv_case(&cc, NULL);
  run_conv_case(&cc, pool);
  /* Strides, dilations and asymmetric pads. */
  cc.window.strides[0] = 2, cc.window.strides[1] = 3;
  cc.window.dilations[0] = 2, cc.window.dilations[1] = 1;
  cc.window.pads[0] = 0, cc.window.pads[1] = 1, cc.window.pads[2] = 2, cc.window.pads[3] = 0;
  cc.y_dims[2] = 4, cc.y_dims[3] = 4; /* (9+2-5)/2+1, (11+1-3)/3+1 */
  cc.bias = false;
  run_conv_case(&cc, pool);
  /* The same on a transposed (non-contiguous) input. */
  cc.transposed_input = true;
  run_conv_case(&cc, NULL);
  /* Every float dtype. */
  cc.transposed_input = false;
  const stax_dtype_t dtypes[3] = {STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16};
  for (int t = 0; t < 3; t++) {
    cc.dtype = dtypes[t];
    cc.bias = t != 1;
    run_conv_case(&cc, pool);
  }
  stax_threadpool_destroy(pool);
}

static void test_conv_groups_and_pointwise(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 3, &pool));
  /* group 2: 4 input channels, 6 outputs. */
  conv_case_t cc = {.dtype = STAX_DTYPE_FLOAT32,
                    .rank = 4,
                    .x_dims = {2, 4, 7, 6},
                    .w_dims = {6, 2, 3, 2},
                    .y_dims = {2, 6, 5, 5},
                    .bias = true};
  cc.window = plain_window(2);
  cc.window.group = 2;
  run_conv_case(&cc, pool);
  /* Depthwise (direct path), multiplier 1 and 2, float32 and float64, with padding. */
  conv_case_t dw = {.dtype = STAX_DTYPE_FLOAT32,
                    .rank = 4,
                    .x_dims = {2, 5, 8, 9},
                    .w_dims = {5, 1, 3, 3},
                    .y_dims = {2, 5, 4, 5},
                    .bias = true};
  dw.window = plain_window(2);
  dw.window.group = 5;
  dw.window.strides[0] = dw.window.strides[1] = 2;
  for (int i = 0; i < 4; i++) dw.window.pads[i] = 1;
  run_conv_case(&dw, pool);
  dw.w_dims[0] = 10, dw.y_dims[1] = 10, dw.dtype = STAX_DTYPE_FLOAT64;
  dw.window.dilations[1] = 2, dw.y_dims[3] = 4; /* (9+2-5)/2+1 */
  run_conv_case(&dw, NULL);
  dw.dtype = STAX_DTYPE_FLOAT16; /* halves take the im2col path */
  run_conv_case(&dw, pool);
  /* 1x1, unit stride, no pads: the input is used as the GEMM operand directly. */
  conv_case_t pw = {.dtype = STAX_DTYPE_FLOAT32,
                    .rank = 4,
                    .x_dims = {3, 6, 5, 7},
                    .w_dims = {8, 3, 1, 1},
                    .y_dims = {3, 8, 5, 7},
                    .bias = true};
  pw.window = plain_window(2);
  pw.window.group = 2;
  run_conv_case(&pw, pool);
  pw.transposed_input = true; /* not mergeable: falls back to im2col */
  run_conv_case(&pw, NULL);
  /* A 1x1 conv over one image, big enough for the threaded GEMM. */
  conv_case_t big = {.dtype = STAX_DTYPE_FLOAT32,
                     .rank = 4,
                     .x_dims = {1, 64, 12, 12},
                     .w_dims = {48, 64, 1, 1},
                     .y_dims = {1, 48, 12, 12}};
  big.window = plain_window(2);
  run_conv_case(&big, pool);
  stax_threadpool_destroy(pool);
}

static void test_conv_1d_3d_auto_pad_and_chunks(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  conv_case_t c1 = {.dtype = STAX_DTYPE_FLOAT32,
                    .rank = 3,
                    .x_dims = {1, 2, 17},
                    .w_dims = {3, 2, 4},
                    .y_dims = {1, 3, 6},
                    .bias = true};
  c1.window = plain_window(1);
  c1.window.strides[0] = 3, c1.window.pads[0] = 2, c1.window.pads[1] = 1; /* (17+3-4)/3+1 */
  run_conv_case(&c1, NULL);
  conv_case_t c3 = {.dtype = STAX_DTYPE_FLOAT32,
                    .rank = 5,
                    .x_dims = {2, 2, 5, 6, 4},
                    .w_dims = {3, 2, 2, 3, 2},
                    .y_dims = {2, 3, 6, 3, 3},
                    .bias = true};
  c3.window = plain_window(3);
  c3.window.strides[1] = 2;
  c3.window.pads[0] = 1, c3.window.pads[3] = 1; /* depth: 5+2-2+1 = 6 */
  c3.window.pads[1] = 1;                        /* height: (6+1-3)/2+1 = 3 */
  run_conv_case(&c3, pool);
  /* auto_pad: SAME_UPPER / SAME_LOWER with an odd total pad put the extra at the end / start. */
  conv_case_t same = {.dtype = STAX_DTYPE_FLOAT32,
                      .rank = 4,
                      .x_dims = {1, 2, 7, 8},
                      .w_dims = {2, 2, 4, 3},
                      .y_dims = {1, 2, 4, 4},
                      .auto_pad = "SAME_UPPER"};
  same.window = plain_window(2);
  same.window.strides[0] = same.window.strides[1] = 2;
  /* H: out 4, total = 3*2+4-7 = 3 -> 1 + 2; W: out 4, total = 3*2+3-8 = 1 -> 0 + 1. */
  same.window.pads[0] = 1, same.window.pads[2] = 2, same.window.pads[1] = 0,
  same.window.pads[3] = 1;
  run_conv_case(&same, NULL);
  same.auto_pad = "SAME_LOWER";
  same.window.pads[0] = 2, same.window.pads[2] = 1, same.window.pads[1] = 1,
  same.window.pads[3] = 0;
  run_conv_case(&same, NULL);
  same.auto_pad = "VALID";
  for (int i = 0; i < 4; i++) same.window.pads[i] = 0;
  same.y_dims[2] = 2, same.y_dims[3] = 3; /* ceil((7-4+1)/2), ceil((8-3+1)/2) */
  run_conv_case(&same, pool);
  /* More than one im2col chunk: Cg*KS*W_out is over the chunk budget, so rows go one by one. */
  conv_case_t chunked = {.dtype = STAX_DTYPE_FLOAT32,
                         .rank = 4,
                         .x_dims = {1, 250, 3, 850},
                         .w_dims = {2, 250, 1, 5},
                         .y_dims = {1, 2, 3, 846}};
  chunked.window = plain_window(2);
  run_conv_case(&chunked, pool);
  stax_threadpool_destroy(pool);
}

static void test_conv_errors(void) {
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 5, 5});
  stax_tensor_t* w_bad_channels = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){4, 2, 3, 3});
  stax_tensor_t* w = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){4, 3, 3, 3});
  stax_tensor_t* w_groups = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){4, 1, 3, 3});
  stax_tensor_t* w_big = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){4, 3, 7, 3});
  stax_tensor_t* bias = make_tensor(STAX_DTYPE_FLOAT32, 1, (int64_t[]){3});
  stax_tensor_t* x64 = make_tensor(STAX_DTYPE_FLOAT64, 4, (int64_t[]){1, 3, 5, 5});
  stax_tensor_t* x2d = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 5});
  stax_tensor_t* y = NULL;
  stax_tensor_t* bad_channels[2] = {x, w_bad_channels};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, NULL, 0, bad_channels, 2, NULL, &y, 1), STAX_SHAPE_MISMATCH,
              "input 0 has 3 channels (dim 1) but input 1 dim 1 (2) x group 1");
  stax_node_attr_t group3[1] = {kt_attr_int("group", 3)};
  stax_tensor_t* grouped[2] = {x, w_groups};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, group3, 1, grouped, 2, NULL, &y, 1), STAX_SHAPE_MISMATCH,
              "not divisible by group 3");
  stax_node_attr_t group0[1] = {kt_attr_int("group", 0)};
  stax_tensor_t* plain[2] = {x, w};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, group0, 1, plain, 2, NULL, &y, 1), STAX_INVALID_ARGUMENT,
              "group");
  const int64_t kernel[2] = {2, 2};
  stax_node_attr_t bad_kernel[1] = {kt_attr_ints("kernel_shape", 2, kernel)};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, bad_kernel, 1, plain, 2, NULL, &y, 1), STAX_SHAPE_MISMATCH,
              "attribute 'kernel_shape'[0] = 2 but input 1 dim 2 is 3");
  stax_node_attr_t short_kernel[1] = {kt_attr_ints("kernel_shape", 1, kernel)};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, short_kernel, 1, plain, 2, NULL, &y, 1),
              STAX_INVALID_ARGUMENT, "has 1 values, expected 2");
  stax_tensor_t* too_big[2] = {x, w_big};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, NULL, 0, too_big, 2, NULL, &y, 1), STAX_SHAPE_MISMATCH,
              "too small");
  stax_node_attr_t bad_pad[1] = {kt_attr_string("auto_pad", "SAME")};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, bad_pad, 1, plain, 2, NULL, &y, 1), STAX_INVALID_ARGUMENT,
              "auto_pad");
  const int64_t pads[4] = {1, 1, 1, 1};
  stax_node_attr_t both[2] = {kt_attr_string("auto_pad", "VALID"), kt_attr_ints("pads", 4, pads)};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, both, 2, plain, 2, NULL, &y, 1), STAX_INVALID_ARGUMENT,
              "cannot be combined");
  stax_tensor_t* with_bias[3] = {x, w, bias};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, NULL, 0, with_bias, 3, NULL, &y, 1), STAX_SHAPE_MISMATCH,
              "bias");
  stax_tensor_t* mixed[2] = {x64, w};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, NULL, 0, mixed, 2, NULL, &y, 1), STAX_DTYPE_MISMATCH,
              "float32");
  stax_tensor_t* flat[2] = {x2d, w};
  CHECK_ERROR(run_kernel(STAX_OP_Conv, NULL, 0, flat, 2, NULL, &y, 1), STAX_INVALID_ARGUMENT,
              "rank");
  CHECK(y == NULL);
  kt_release(x);
  kt_release(w_bad_channels);
  kt_release(w);
  kt_release(w_groups);
  kt_release(w_big);
  kt_release(bias);
  kt_release(x64);
  kt_release(x2d);
}

/* ---- ConvTranspose ----------------------------------------------------------------------- */

/* y[n, g*mg + m, i*s - pad + k*d] += x[n, g*cg + c, i] * w[g*cg + c, m, k] */
static void reference_conv_transpose(const double* x, const int64_t* xd, const double* w,
                                     const int64_t* wd, const double* b, const window_params_t* p,
                                     const int64_t* yd, double* y) {
  const int32_t rank = p->spatial + 2;
  int64_t y_count = 1, x_count = 1, taps = 1;
  for (int32_t d = 0; d < rank; d++) {
    y_count *= yd[d];
    x_count *= xd[d];
  }
  for (int32_t d = 2; d < rank; d++) taps *= wd[d];
  const int64_t cg = xd[1] / p->group, mg = wd[1];
  int64_t plane = 1;
  for (int32_t d = 2; d < rank; d++) plane *= yd[d];
  for (int64_t i = 0; i < y_count; i++) y[i] = b ? b[(i / plane) % yd[1]] : 0;
  for (int64_t flat = 0; flat < x_count; flat++) {
    int64_t index[5], k[3];
    unflatten(flat, rank, xd, index);
    const int64_t n = index[0], c = index[1], g = c / cg;
    for (int64_t m = 0; m < mg; m++) {
      for (int64_t t = 0; t < taps; t++) {
        unflatten(t, p->spatial, wd + 2, k);
        int64_t y_flat = n * yd[1] + g * mg + m, w_flat = c * mg + m;
        bool inside = true;
        for (int32_t d = 0; d < p->spatial; d++) {
          int64_t o = index[2 + d] * p->strides[d] - p->pads[d] + k[d] * p->dilations[d];
          if (o < 0 || o >= yd[2 + d]) inside = false;
          y_flat = y_flat * yd[2 + d] + o;
          w_flat = w_flat * wd[2 + d] + k[d];
        }
        if (inside) y[y_flat] += x[flat] * w[w_flat];
      }
    }
  }
}

typedef struct transpose_case_t {
  stax_dtype_t dtype;
  int32_t rank;
  int64_t x_dims[5], w_dims[5], y_dims[5];
  window_params_t window;
  int64_t output_padding[3];
  bool bias;
  const char* auto_pad;
  const int64_t* output_shape; /* spatial dims, or NULL */
} transpose_case_t;

static void run_transpose_case(const transpose_case_t* tc, stax_threadpool_t* pool) {
  const int32_t spatial = tc->rank - 2;
  stax_tensor_t* x = make_tensor(tc->dtype, tc->rank, tc->x_dims);
  stax_tensor_t* w = make_tensor(tc->dtype, tc->rank, tc->w_dims);
  const int64_t bias_dims[1] = {tc->y_dims[1]};
  stax_tensor_t* b = tc->bias ? make_tensor(tc->dtype, 1, bias_dims) : NULL;
  const window_params_t* p = &tc->window;
  stax_node_attr_t attrs[8];
  int32_t count = 0;
  attrs[count++] = kt_attr_ints("strides", spatial, p->strides);
  attrs[count++] = kt_attr_ints("dilations", spatial, p->dilations);
  attrs[count++] = kt_attr_int("group", p->group);
  attrs[count++] = kt_attr_ints("output_padding", spatial, tc->output_padding);
  if (tc->auto_pad) attrs[count++] = kt_attr_string("auto_pad", tc->auto_pad);
  if (tc->output_shape) attrs[count++] = kt_attr_ints("output_shape", spatial, tc->output_shape);
  if (!tc->auto_pad && !tc->output_shape) attrs[count++] = kt_attr_ints("pads", 2 * spatial, p->pads);
  stax_tensor_t* inputs[3] = {x, w, b};
  stax_tensor_t* y = NULL;
  CHECK_OK(run_kernel(STAX_OP_ConvTranspose, attrs, count, inputs, b ? 3 : 2, pool, &y, 1));
  if (y && check_dims(y, tc->rank, tc->y_dims)) {
    double *xv = to_doubles(x), *wv = to_doubles(w), *bv = b ? to_doubles(b) : NULL;
    int64_t y_count = stax_tensor_element_count(y);
    double* expected = malloc(sizeof(double) * (size_t)y_count);
    reference_conv_transpose(xv, tc->x_dims, wv, tc->w_dims, bv, p, tc->y_dims, expected);
    bool half = tc->dtype == STAX_DTYPE_FLOAT16 || tc->dtype == STAX_DTYPE_BFLOAT16;
    compare(y, expected, y_count, half ? 1e-2 : 1e-6, "conv transpose");
    free(xv);
    free(wv);
    free(bv);
    free(expected);
  } else {
    CHECK(y != NULL);
  }
  kt_release(y);
  kt_release(x);
  kt_release(w);
  kt_release(b);
}

static void test_conv_transpose(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  /* 2-D, stride 2, pads 1, output_padding 1: 2*(4-1)+1+3-2 = 8, 2*(5-1)+1+3-2 = 10. */
  transpose_case_t tc = {.dtype = STAX_DTYPE_FLOAT32,
                         .rank = 4,
                         .x_dims = {2, 3, 4, 5},
                         .w_dims = {3, 2, 3, 3},
                         .y_dims = {2, 2, 8, 10},
                         .bias = true,
                         .output_padding = {1, 1}};
  tc.window = plain_window(2);
  tc.window.strides[0] = tc.window.strides[1] = 2;
  for (int i = 0; i < 4; i++) tc.window.pads[i] = 1;
  run_transpose_case(&tc, NULL);
  run_transpose_case(&tc, pool);
  /* Groups and dilation: 6 channels in 3 groups, 2 outputs each. */
  transpose_case_t gc = {.dtype = STAX_DTYPE_FLOAT32,
                         .rank = 4,
                         .x_dims = {1, 6, 3, 4},
                         .w_dims = {6, 2, 2, 3},
                         .y_dims = {1, 6, 5, 8}};
  gc.window = plain_window(2);
  gc.window.group = 3;
  gc.window.dilations[0] = 3; /* (3-1) + 3*(2-1)+1 = 6, minus pads 1+0 = 5 */
  gc.window.strides[1] = 2;   /* 2*(4-1) + 3 = 9, minus pads 0+1 = 8 */
  gc.window.pads[0] = 1, gc.window.pads[3] = 1;
  run_transpose_case(&gc, pool);
  /* 1-D and 3-D, float64 and halves. */
  transpose_case_t t1 = {.dtype = STAX_DTYPE_FLOAT64,
                         .rank = 3,
                         .x_dims = {2, 2, 7},
                         .w_dims = {2, 3, 4},
                         .y_dims = {2, 3, 23},
                         .bias = true,
                         .output_padding = {2}};
  t1.window = plain_window(1);
  t1.window.strides[0] = 3; /* 3*6 + 2 + 4 - 1 = 23 */
  t1.window.pads[0] = 1;
  run_transpose_case(&t1, NULL);
  transpose_case_t t3 = {.dtype = STAX_DTYPE_FLOAT16,
                         .rank = 5,
                         .x_dims = {1, 2, 2, 3, 2},
                         .w_dims = {2, 2, 2, 2, 3},
                         .y_dims = {1, 2, 3, 5, 4},
                         .bias = true};
  t3.window = plain_window(3);
  t3.window.strides[1] = 2; /* 1+2 = 3, 2*2+2 = 6 - 1 pad, 1+3 = 4 */
  t3.window.pads[4] = 1;
  run_transpose_case(&t3, pool);
  t3.dtype = STAX_DTYPE_BFLOAT16;
  run_transpose_case(&t3, NULL);
  /* output_shape: total padding 2*(4-1)+0+3 - 7 = 2 -> pads 1 and 1 for H; for W 2*(5-1)+3-10
   * = 1 -> begin 1 (total - total/2), end 0. */
  static const int64_t shape[2] = {7, 10};
  transpose_case_t os = {.dtype = STAX_DTYPE_FLOAT32,
                         .rank = 4,
                         .x_dims = {1, 2, 4, 5},
                         .w_dims = {2, 3, 3, 3},
                         .y_dims = {1, 3, 7, 10},
                         .output_shape = shape};
  os.window = plain_window(2);
  os.window.strides[0] = os.window.strides[1] = 2;
  os.window.pads[0] = 1, os.window.pads[2] = 1, os.window.pads[1] = 1, os.window.pads[3] = 0;
  run_transpose_case(&os, NULL);
  /* SAME_UPPER: out = D*s; H total 2*3+3-8 = 1 -> begin 0, end 1; W 2*4+3-10 = 1 likewise. */
  os.output_shape = NULL;
  os.auto_pad = "SAME_UPPER";
  os.y_dims[2] = 8, os.y_dims[3] = 10;
  os.window.pads[0] = 0, os.window.pads[2] = 1, os.window.pads[1] = 0, os.window.pads[3] = 1;
  run_transpose_case(&os, NULL);
  os.auto_pad = "SAME_LOWER";
  os.window.pads[0] = 1, os.window.pads[2] = 0, os.window.pads[1] = 1, os.window.pads[3] = 0;
  run_transpose_case(&os, pool);
  stax_threadpool_destroy(pool);
}

static void test_conv_transpose_errors(void) {
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 4, 4});
  stax_tensor_t* w_bad = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){2, 2, 3, 3});
  stax_tensor_t* w = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){3, 2, 3, 3});
  stax_tensor_t* y = NULL;
  stax_tensor_t* bad[2] = {x, w_bad};
  CHECK_ERROR(run_kernel(STAX_OP_ConvTranspose, NULL, 0, bad, 2, NULL, &y, 1), STAX_SHAPE_MISMATCH,
              "input 0 has 3 channels (dim 1) but input 1 dim 0 is 2");
  stax_tensor_t* good[2] = {x, w};
  const int64_t padding[2] = {1, 1};
  stax_node_attr_t bad_padding[1] = {kt_attr_ints("output_padding", 2, padding)};
  CHECK_ERROR(run_kernel(STAX_OP_ConvTranspose, bad_padding, 1, good, 2, NULL, &y, 1),
              STAX_INVALID_ARGUMENT, "output_padding");
  stax_node_attr_t group2[1] = {kt_attr_int("group", 2)};
  CHECK_ERROR(run_kernel(STAX_OP_ConvTranspose, group2, 1, good, 2, NULL, &y, 1),
              STAX_SHAPE_MISMATCH, "not divisible by group 2");
  const int64_t pads[4] = {3, 3, 3, 3};
  stax_node_attr_t huge_pads[1] = {kt_attr_ints("pads", 4, pads)};
  CHECK_ERROR(run_kernel(STAX_OP_ConvTranspose, huge_pads, 1, good, 2, NULL, &y, 1),
              STAX_SHAPE_MISMATCH, "at least 1");
  const int64_t shape[3] = {5, 5, 5};
  stax_node_attr_t bad_shape[1] = {kt_attr_ints("output_shape", 3, shape)};
  CHECK_ERROR(run_kernel(STAX_OP_ConvTranspose, bad_shape, 1, good, 2, NULL, &y, 1),
              STAX_INVALID_ARGUMENT, "output_shape");
  CHECK(y == NULL);
  kt_release(x);
  kt_release(w_bad);
  kt_release(w);
}

/* ---- pools ------------------------------------------------------------------------------- */

typedef struct pool_case_t {
  stax_op_t op;
  stax_dtype_t dtype;
  int32_t rank;
  int64_t x_dims[5], kernel[3], y_dims[5];
  window_params_t window; /* resolved pads for the reference */
  bool ceil_mode, count_include_pad, column_major, indices;
  const char* auto_pad;
} pool_case_t;

static void run_pool_case(const pool_case_t* pc, stax_threadpool_t* pool) {
  const int32_t spatial = pc->rank - 2;
  stax_tensor_t* x = make_tensor(pc->dtype, pc->rank, pc->x_dims);
  const window_params_t* p = &pc->window;
  stax_node_attr_t attrs[8];
  int32_t count = 0;
  attrs[count++] = kt_attr_ints("kernel_shape", spatial, pc->kernel);
  attrs[count++] = kt_attr_ints("strides", spatial, p->strides);
  attrs[count++] = kt_attr_ints("dilations", spatial, p->dilations);
  attrs[count++] = kt_attr_int("ceil_mode", pc->ceil_mode);
  if (pc->op == STAX_OP_MaxPool) {
    attrs[count++] = kt_attr_int("storage_order", pc->column_major);
  } else {
    attrs[count++] = kt_attr_int("count_include_pad", pc->count_include_pad);
  }
  if (pc->auto_pad) {
    attrs[count++] = kt_attr_string("auto_pad", pc->auto_pad);
  } else {
    attrs[count++] = kt_attr_ints("pads", 2 * spatial, p->pads);
  }
  stax_tensor_t* outputs[2] = {NULL, NULL};
  CHECK_OK(run_kernel(pc->op, attrs, count, &x, 1, pool, outputs, pc->indices ? 2 : 1));
  stax_tensor_t* y = outputs[0];
  if (y && check_dims(y, pc->rank, pc->y_dims)) {
    double* xv = to_doubles(x);
    int64_t y_count = stax_tensor_element_count(y), taps = 1;
    for (int32_t d = 0; d < spatial; d++) taps *= pc->kernel[d];
    double* expected = malloc(sizeof(double) * (size_t)y_count);
    int64_t* expected_index = malloc(sizeof(int64_t) * (size_t)y_count);
    for (int64_t flat = 0; flat < y_count; flat++) {
      int64_t index[5], k[3];
      unflatten(flat, pc->rank, pc->y_dims, index);
      double best = -INFINITY, sum = 0;
      int64_t best_at = -1, valid = 0, padded = 0;
      for (int64_t t = 0; t < taps; t++) {
        unflatten(t, spatial, pc->kernel, k);
        bool inside = true, in_padded = true;
        int64_t row_major = index[0] * pc->x_dims[1] + index[1], column = 0, scale = 1;
        for (int32_t d = 0; d < spatial; d++) {
          int64_t i = index[2 + d] * p->strides[d] - p->pads[d] + k[d] * p->dilations[d];
          if (i < 0 || i >= pc->x_dims[2 + d]) inside = false;
          if (i < -p->pads[d] || i >= pc->x_dims[2 + d] + p->pads[spatial + d]) in_padded = false;
          row_major = row_major * pc->x_dims[2 + d] + i;
          column += i * scale;
          scale *= pc->x_dims[2 + d];
        }
        padded += in_padded;
        if (!inside) continue;
        double v = xv[row_major];
        valid++;
        sum += v;
        if (v > best) {
          best = v;
          best_at =
              pc->column_major ? (index[0] * pc->x_dims[1] + index[1]) * scale + column : row_major;
        }
      }
      if (pc->op == STAX_OP_MaxPool) {
        expected[flat] = best;
      } else {
        int64_t divisor = pc->count_include_pad ? padded : valid;
        expected[flat] = divisor ? sum / (double)divisor : NAN;
      }
      expected_index[flat] = best_at;
    }
    compare(y, expected, y_count, pc->op == STAX_OP_MaxPool ? 0 : 1e-6, "pool");
    if (pc->indices && outputs[1]) {
      CHECK(stax_tensor_dtype(outputs[1]) == STAX_DTYPE_INT64);
      const int64_t* got = stax_tensor_data(outputs[1]);
      int bad = 0;
      for (int64_t i = 0; i < y_count; i++) {
        /* Ties: both the reference and the kernel keep the first maximum in tap order. */
        if (got[i] != expected_index[i] && bad++ < 3)
          fprintf(stderr, "pool index [%lld]: %lld vs %lld\n", (long long)i, (long long)got[i],
                  (long long)expected_index[i]);
      }
      CHECK(bad == 0);
    }
    free(xv);
    free(expected);
    free(expected_index);
  } else {
    CHECK(y != NULL);
  }
  kt_release(outputs[0]);
  kt_release(outputs[1]);
  kt_release(x);
}

static void test_max_pool(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  pool_case_t pc = {.op = STAX_OP_MaxPool,
                    .dtype = STAX_DTYPE_FLOAT32,
                    .rank = 4,
                    .x_dims = {2, 3, 9, 10},
                    .kernel = {3, 3},
                    .y_dims = {2, 3, 5, 5},
                    .indices = true};
  pc.window = plain_window(2);
  pc.window.strides[0] = pc.window.strides[1] = 2;
  for (int i = 0; i < 4; i++) pc.window.pads[i] = 1; /* (9+2-3)/2+1 = 5, (10+2-3)/2+1 = 5 */
  run_pool_case(&pc, pool);
  pc.column_major = true;
  run_pool_case(&pc, NULL);
  /* ceil_mode: (10+2-3)/2 rounds up to 5 -> 6 windows; the last starts at 9 < 10+1. */
  pc.column_major = false;
  pc.ceil_mode = true;
  pc.y_dims[3] = 6;
  run_pool_case(&pc, NULL);
  /* Dilation 2 (extent 5) with ceil_mode: H (9+2-5)/2 = 3 -> 4; W (10+2-5)/2 = 3.5 -> 5. */
  pc.window.dilations[0] = pc.window.dilations[1] = 2;
  pc.y_dims[2] = 4, pc.y_dims[3] = 5;
  run_pool_case(&pc, pool);
  /* 8-bit integers and halves. */
  pc.window.dilations[0] = pc.window.dilations[1] = 1;
  pc.ceil_mode = false;
  pc.y_dims[2] = 5, pc.y_dims[3] = 5;
  const stax_dtype_t dtypes[4] = {STAX_DTYPE_INT8, STAX_DTYPE_UINT8, STAX_DTYPE_FLOAT16,
                                  STAX_DTYPE_FLOAT64};
  for (int t = 0; t < 4; t++) {
    pc.dtype = dtypes[t];
    run_pool_case(&pc, pool);
  }
  /* 1-D without indices, 3-D with SAME_UPPER (pads resolved by hand for the reference). */
  pool_case_t p1 = {.op = STAX_OP_MaxPool,
                    .dtype = STAX_DTYPE_FLOAT32,
                    .rank = 3,
                    .x_dims = {2, 2, 11},
                    .kernel = {4},
                    .y_dims = {2, 2, 3}};
  p1.window = plain_window(1);
  p1.window.strides[0] = 3; /* (11-4)/3+1 = 3 */
  run_pool_case(&p1, NULL);
  pool_case_t p3 = {.op = STAX_OP_MaxPool,
                    .dtype = STAX_DTYPE_FLOAT32,
                    .rank = 5,
                    .x_dims = {1, 2, 5, 4, 6},
                    .kernel = {2, 3, 2},
                    .y_dims = {1, 2, 3, 4, 3},
                    .indices = true,
                    .auto_pad = "SAME_UPPER"};
  p3.window = plain_window(3);
  p3.window.strides[0] = 2, p3.window.strides[2] = 2;
  /* D: out 3, total 2*2+2-5 = 1 -> 0+1; H: out 4, total 3+3-4 = 2 -> 1+1; W: 2*2+2-6 = 0. */
  p3.window.pads[3] = 1, p3.window.pads[1] = 1, p3.window.pads[4] = 1;
  run_pool_case(&p3, pool);
  stax_threadpool_destroy(pool);
}

static void test_average_and_global_pool(void) {
  pool_case_t pc = {.op = STAX_OP_AveragePool,
                    .dtype = STAX_DTYPE_FLOAT32,
                    .rank = 4,
                    .x_dims = {2, 2, 7, 8},
                    .kernel = {3, 2},
                    .y_dims = {2, 2, 4, 5}};
  pc.window = plain_window(2);
  pc.window.strides[0] = 2, pc.window.strides[1] = 2;
  pc.window.pads[0] = 1, pc.window.pads[2] = 1, pc.window.pads[1] = 1, pc.window.pads[3] = 1;
  run_pool_case(&pc, NULL); /* (7+2-3)/2+1 = 4, (8+2-2)/2+1 = 5 */
  pc.count_include_pad = true;
  run_pool_case(&pc, NULL);
  /* ceil_mode adds windows reaching past the end pad; those positions never count. */
  pc.ceil_mode = true;
  pc.window.pads[2] = 0, pc.window.pads[3] = 0;
  pc.y_dims[2] = 4, pc.y_dims[3] = 5; /* ceil((7+1-3)/2)+1 = 4, ceil((8+1-2)/2)+1 = 5 */
  run_pool_case(&pc, NULL);
  pc.count_include_pad = false;
  pc.dtype = STAX_DTYPE_BFLOAT16;
  run_pool_case(&pc, NULL);
  pc.dtype = STAX_DTYPE_FLOAT64;
  pc.window.dilations[1] = 2; /* extent 3: ceil((8+1-3)/2)+1 = 4 */
  pc.y_dims[3] = 4;
  run_pool_case(&pc, NULL);
  /* Global pools over 3-D inputs (strided view). */
  stax_tensor_t* base = make_tensor(STAX_DTYPE_FLOAT32, 5, (int64_t[]){2, 3, 4, 5, 6});
  stax_tensor_t* x = NULL;
  const int32_t perm[5] = {0, 1, 4, 2, 3};
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, perm, &x));
  double* xv = to_doubles(x);
  for (int kind = 0; kind < 2; kind++) {
    stax_op_t op = kind ? STAX_OP_GlobalMaxPool : STAX_OP_GlobalAveragePool;
    stax_tensor_t* y = NULL;
    CHECK_OK(run_kernel(op, NULL, 0, &x, 1, NULL, &y, 1));
    if (y && check_dims(y, 5, (int64_t[]){2, 3, 1, 1, 1})) {
      double expected[6];
      for (int64_t plane = 0; plane < 6; plane++) {
        double sum = 0, best = -INFINITY;
        for (int64_t i = 0; i < 120; i++) {
          sum += xv[plane * 120 + i];
          best = fmax(best, xv[plane * 120 + i]);
        }
        expected[plane] = kind ? best : sum / 120;
      }
      compare(y, expected, 6, 1e-6, kind ? "GlobalMaxPool" : "GlobalAveragePool");
    }
    kt_release(y);
  }
  free(xv);
  kt_release(x);
  kt_release(base);
}

static void test_pool_errors(void) {
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 4, 4});
  stax_tensor_t* i8 = make_tensor(STAX_DTYPE_INT8, 4, (int64_t[]){1, 2, 4, 4});
  stax_tensor_t* flat = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 4});
  stax_tensor_t* outputs[2] = {NULL, NULL};
  CHECK_ERROR(run_kernel(STAX_OP_MaxPool, NULL, 0, &x, 1, NULL, outputs, 1), STAX_INVALID_ARGUMENT,
              "kernel_shape");
  const int64_t kernel[2] = {2, 2}, big[2] = {6, 2};
  stax_node_attr_t k2[1] = {kt_attr_ints("kernel_shape", 2, kernel)};
  CHECK_ERROR(run_kernel(STAX_OP_AveragePool, k2, 1, &i8, 1, NULL, outputs, 1), STAX_DTYPE_MISMATCH,
              "int8");
  CHECK_ERROR(run_kernel(STAX_OP_MaxPool, k2, 1, &flat, 1, NULL, outputs, 1), STAX_INVALID_ARGUMENT,
              "rank");
  stax_node_attr_t too_big[1] = {kt_attr_ints("kernel_shape", 2, big)};
  CHECK_ERROR(run_kernel(STAX_OP_MaxPool, too_big, 1, &x, 1, NULL, outputs, 1), STAX_SHAPE_MISMATCH,
              "too small");
  stax_node_attr_t bad_order[2] = {kt_attr_ints("kernel_shape", 2, kernel),
                                   kt_attr_int("storage_order", 2)};
  CHECK_ERROR(run_kernel(STAX_OP_MaxPool, bad_order, 2, &x, 1, NULL, outputs, 1),
              STAX_INVALID_ARGUMENT, "storage_order");
  CHECK_ERROR(run_kernel(STAX_OP_GlobalMaxPool, NULL, 0, &i8, 1, NULL, outputs, 1),
              STAX_DTYPE_MISMATCH, "int8");
  CHECK(outputs[0] == NULL && outputs[1] == NULL);
  kt_release(x);
  kt_release(i8);
  kt_release(flat);
}

/* ---- allocation failures ----------------------------------------------------------------- */

/* Fails each allocation in turn: every failure must come back as OUT_OF_MEMORY with no output
 * set and nothing left allocated, and the sweep must end in a success. */
static void fault_sweep(stax_op_t op, stax_node_attr_t* attrs, int32_t attr_count,
                        stax_tensor_t* const* inputs, int32_t input_count) {
  bool succeeded = false;
  for (uint64_t fail_at = 1; fail_at < 64 && !succeeded; fail_at++) {
    stax_failing_allocator_t failing;
    stax_failing_allocator_init(&failing, kt_allocator(), fail_at);
    stax_node_t node = {.op = op, .name = "n", .attr_count = attr_count, .attrs = attrs};
    stax_tensor_t* out[2] = {NULL, NULL};
    stax_kernel_call_t call = {.node = &node,
                               .allocator = stax_failing_allocator(&failing),
                               .input_count = input_count,
                               .inputs = inputs,
                               .output_count = op == STAX_OP_MaxPool ? 2 : 1,
                               .outputs = out};
    stax_status_t status = op == STAX_OP_Conv            ? stax_kernel_Conv(&call)
                           : op == STAX_OP_ConvTranspose ? stax_kernel_ConvTranspose(&call)
                                                         : stax_kernel_MaxPool(&call);
    if (status == STAX_OK) {
      succeeded = true;
      CHECK(out[0] != NULL);
    } else {
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      CHECK(out[0] == NULL && out[1] == NULL);
      stax_status_free(status);
    }
    kt_release(out[0]);
    kt_release(out[1]);
    CHECK_EQ_INT(failing.live_allocations, 0);
  }
  CHECK(succeeded);
}

static void test_allocation_failures(void) {
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT16, 4, (int64_t[]){2, 4, 6, 5});
  stax_tensor_t* w = make_tensor(STAX_DTYPE_FLOAT16, 4, (int64_t[]){4, 4, 3, 2});
  stax_tensor_t* b = make_tensor(STAX_DTYPE_FLOAT16, 1, (int64_t[]){4});
  stax_tensor_t* xt = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), w, (int32_t[]){0, 1, 3, 2}, &xt)); /* forces a copy */
  stax_tensor_t* conv[3] = {x, w, b};
  fault_sweep(STAX_OP_Conv, NULL, 0, conv, 3);
  stax_tensor_t* strided[3] = {x, xt, NULL};
  fault_sweep(STAX_OP_Conv, NULL, 0, strided, 2);
  fault_sweep(STAX_OP_ConvTranspose, NULL, 0, conv, 3);
  const int64_t kernel[2] = {2, 2};
  stax_node_attr_t k2[1] = {kt_attr_ints("kernel_shape", 2, kernel)};
  fault_sweep(STAX_OP_MaxPool, k2, 1, &x, 1);
  kt_release(x);
  kt_release(w);
  kt_release(b);
  kt_release(xt);
}

STAX_TEST_MAIN(STAX_TEST(test_allocation_failures), STAX_TEST(test_conv_2d),
               STAX_TEST(test_conv_groups_and_pointwise),
               STAX_TEST(test_conv_1d_3d_auto_pad_and_chunks), STAX_TEST(test_conv_errors),
               STAX_TEST(test_conv_transpose), STAX_TEST(test_conv_transpose_errors),
               STAX_TEST(test_max_pool), STAX_TEST(test_average_and_global_pool),
               STAX_TEST(test_pool_errors))
