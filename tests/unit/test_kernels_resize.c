/* Tests for Resize (src/kernels/resize.c): the ONNX backend-test cases (nearest, linear,
 * align_corners, cubic, tf_crop_and_resize with extrapolation, nearest ceil), then every mode,
 * coordinate transformation and nearest rounding against an independent reference written
 * here (sample points weighted by distance), up- and downsampling, output length 1, 1-D to
 * 4-D, float16/bfloat16/integer dtypes, strided inputs, sizes with axes and
 * keep_aspect_ratio_policy, the opset 10 form, and every error path. */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static stax_tensor_t* floats(int64_t count, const double* values) {
  return kt_make(STAX_DTYPE_FLOAT32, 1, &count, values);
}

/* Runs Resize(x, roi, scales, sizes) with string attributes given as name/value pairs. */
static stax_status_t resize(stax_tensor_t* x, stax_tensor_t* roi, stax_tensor_t* scales,
                            stax_tensor_t* sizes, const stax_node_attr_t* attrs, int32_t attr_count,
                            stax_tensor_t** out) {
  stax_tensor_t* inputs[4] = {x, roi, scales, sizes};
  return kt_run(stax_kernel_Resize, STAX_OP_Resize, attrs, attr_count, inputs, 4, out, 1);
}

/* ---- an independent reference: per-axis sample points and weights by distance ------------- */

typedef struct reference_t {
  const char* mode;        /* nearest, linear, cubic */
  const char* coordinates; /* coordinate_transformation_mode */
  const char* nearest;     /* nearest_mode */
  double a;                /* cubic coefficient */
  bool exclude_outside;
  double extrapolation;
} reference_t;

/* The source coordinate, per the ONNX operator documentation's formulas. align_corners
 * measures the resized length as in * scale, unrounded (what ONNX's backend test data for
 * downsampling by 0.6 expects); with sizes, scale = out / in and the two agree. */
static double reference_source(const reference_t* r, double x, double in, double out, double scale,
                               double start, double end) {
  if (!strcmp(r->coordinates, "align_corners"))
    return out == 1 || in * scale <= 1 ? 0 : x * (in - 1) / (in * scale - 1);
  if (!strcmp(r->coordinates, "asymmetric")) return x / scale;
  if (!strcmp(r->coordinates, "pytorch_half_pixel")) return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
  if (!strcmp(r->coordinates, "tf_crop_and_resize"))
    return out > 1 ? start * (in - 1) + x * (end - start) * (in - 1) / (out - 1)
                   : 0.5 * (start + end) * (in - 1);
  return (x + 0.5) / scale - 0.5;
}

static double keys_kernel(double d, double a) {
  d = fabs(d);
  if (d <= 1) return (a + 2) * d * d * d - (a + 3) * d * d + 1;
  if (d < 2) return a * d * d * d - 5 * a * d * d + 8 * a * d - 4 * a;
  return 0;
}

/* Sample points along one axis: up to 4 (index, weight); returns the count, or -1 when the
 * coordinate is outside (tf_crop_and_resize). */
static int reference_points(const reference_t* r, double source, int64_t in, int64_t* index,
                            double* weight) {
  if (!strcmp(r->coordinates, "tf_crop_and_resize") && (source < 0 || source > in - 1)) return -1;
  if (!strcmp(r->mode, "nearest")) {
    double f = floor(source), v;
    if (!strcmp(r->nearest, "floor")) v = f;
    else if (!strcmp(r->nearest, "ceil")) v = ceil(source);
    else if (!strcmp(r->nearest, "round_prefer_ceil")) v = source - f >= 0.5 ? f + 1 : f;
    else v = source - f > 0.5 ? f + 1 : f;
    int64_t i = (int64_t)v;
    index[0] = i < 0 ? 0 : (i >= in ? in - 1 : i);
    weight[0] = 1;
    return 1;
  }
  int n = !strcmp(r->mode, "linear") ? 2 : 4;
  int64_t first = (int64_t)floor(source) - (n == 4 ? 1 : 0);
  double sum = 0;
  for (int k = 0; k < n; k++) {
    int64_t i = first + k;
    double d = source - (double)i;
    weight[k] = n == 2 ? 1 - fabs(d) : keys_kernel(d, r->a);
    if (r->exclude_outside && (i < 0 || i >= in)) weight[k] = 0;
    sum += weight[k];
    index[k] = i < 0 ? 0 : (i >= in ? in - 1 : i);
  }
  if (r->exclude_outside)
    for (int k = 0; k < n; k++) weight[k] /= sum;
  return n;
}

/* Resizes a contiguous [rank <= 4] array of doubles. */
static void reference_resize(const reference_t* r, int32_t rank, const int64_t* in_dims,
                             const double* data, const int64_t* out_dims, const double* scales,
                             const double* roi, double* out) {
  int64_t total = 1;
  for (int32_t k = 0; k < rank; k++) total *= out_dims[k];
  for (int64_t e = 0; e < total; e++) {
    int64_t position[4], rest = e;
    for (int32_t k = rank - 1; k >= 0; k--) {
      position[k] = rest % out_dims[k];
      rest /= out_dims[k];
    }
    int64_t index[4][4];
    double weight[4][4];
    int count[4];
    bool outside = false;
    for (int32_t k = 0; k < rank; k++) {
      double source = reference_source(r, (double)position[k], (double)in_dims[k], (double)out_dims[k],
                                       scales[k], roi ? roi[k] : 0, roi ? roi[rank + k] : 1);
      count[k] = reference_points(r, source, in_dims[k], index[k], weight[k]);
      if (count[k] < 0) outside = true;
    }
    if (outside) {
      out[e] = r->extrapolation;
      continue;
    }
    double sum = 0;
    int pick[4] = {0, 0, 0, 0};
    for (;;) {
      double w = 1;
      int64_t offset = 0;
      for (int32_t k = 0; k < rank; k++) {
        w *= weight[k][pick[k]];
        offset = offset * in_dims[k] + index[k][pick[k]];
      }
      sum += w * data[offset];
      int32_t k = rank - 1;
      while (k >= 0 && ++pick[k] == count[k]) pick[k--] = 0;
      if (k < 0) break;
    }
    out[e] = sum;
  }
}

/* ---- ONNX backend-test cases -------------------------------------------------------------- */

static void test_resize_onnx_examples(void) {
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, (double[]){1, 2, 3, 4});
  stax_tensor_t* out = NULL;
  /* resize_upsample_scales_nearest */
  stax_tensor_t* scales = floats(4, (double[]){1, 1, 2, 3});
  CHECK_OK(resize(x, NULL, scales, NULL, NULL, 0, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){1, 1, 4, 6}));
  kt_check_values(out, (double[]){1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4},
               24, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(scales);
  /* resize_upsample_scales_linear and _align_corners */
  scales = floats(4, (double[]){1, 1, 2, 2});
  stax_node_attr_t linear = kt_attr_string("mode", "linear");
  CHECK_OK(resize(x, NULL, scales, NULL, &linear, 1, &out));
  kt_check_values(out, (double[]){1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4},
               16, 1e-6);
  kt_release_all(&out, 1);
  stax_node_attr_t corners[2] = {kt_attr_string("mode", "linear"),
                                 kt_attr_string("coordinate_transformation_mode", "align_corners")};
  CHECK_OK(resize(x, NULL, scales, NULL, corners, 2, &out));
  kt_check_values(out,
               (double[]){1, 4.0 / 3, 5.0 / 3, 2, 5.0 / 3, 2, 7.0 / 3, 8.0 / 3, 7.0 / 3, 8.0 / 3, 3,
                          10.0 / 3, 3, 10.0 / 3, 11.0 / 3, 4},
               16, 1e-6);
  kt_release_all(&out, 1);
  stax_tensor_release(scales);
  stax_tensor_release(x);
  /* resize_downsample_scales_nearest and _linear */
  x = kt_make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 4}, (double[]){1, 2, 3, 4, 5, 6, 7, 8});
  scales = floats(4, (double[]){1, 1, 0.6, 0.6});
  CHECK_OK(resize(x, NULL, scales, NULL, NULL, 0, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){1, 1, 1, 2}));
  kt_check_values(out, (double[]){1, 3}, 2, 0);
  kt_release_all(&out, 1);
  CHECK_OK(resize(x, NULL, scales, NULL, &linear, 1, &out));
  kt_check_values(out, (double[]){2.6666665, 4.3333331}, 2, 1e-5);
  kt_release_all(&out, 1);
  stax_tensor_release(scales);
  stax_tensor_release(x);
  /* resize_upsample_scales_cubic: the first element worked out by hand is 0.47265625. */
  double sixteen[16];
  for (int i = 0; i < 16; i++) sixteen[i] = i + 1;
  x = kt_make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, sixteen);
  scales = floats(4, (double[]){1, 1, 2, 2});
  stax_node_attr_t cubic = kt_attr_string("mode", "cubic");
  CHECK_OK(resize(x, NULL, scales, NULL, &cubic, 1, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){1, 1, 8, 8}));
  CHECK(out && fabs(kt_get(out, 0) - 0.47265625) < 1e-6);
  CHECK(out && fabs(kt_get(out, 63) - 16.52734375) < 1e-5);
  kt_release_all(&out, 1);
  stax_tensor_release(scales);
  /* resize_tf_crop_and_resize, with and without extrapolation. */
  stax_tensor_t* roi = floats(8, (double[]){0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8});
  stax_tensor_t* sizes = kt_vec(4, (int64_t[]){1, 1, 3, 3});
  stax_node_attr_t crop[2] = {kt_attr_string("mode", "linear"),
                              kt_attr_string("coordinate_transformation_mode", "tf_crop_and_resize")};
  CHECK_OK(resize(x, roi, NULL, sizes, crop, 2, &out));
  kt_check_values(out, (double[]){7.6, 7.9, 8.2, 8.8, 9.1, 9.4, 10.0, 10.3, 10.6}, 9, 1e-5);
  kt_release_all(&out, 1);
  stax_tensor_release(roi);
  roi = floats(8, (double[]){0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7});
  stax_node_attr_t extrapolate[3] = {crop[0], crop[1], kt_attr_float("extrapolation_value", 10)};
  CHECK_OK(resize(x, roi, NULL, sizes, extrapolate, 3, &out));
  kt_check_values(out, (double[]){7.6, 10, 10, 12.4, 10, 10, 10, 10, 10}, 9, 1e-5);
  kt_release_all(&out, 1);
  /* resize_upsample_sizes_nearest_ceil_half_pixel, first row. */
  stax_tensor_release(sizes);
  sizes = kt_vec(4, (int64_t[]){1, 1, 8, 8});
  stax_node_attr_t ceil_mode = kt_attr_string("nearest_mode", "ceil");
  CHECK_OK(resize(x, NULL, NULL, sizes, &ceil_mode, 1, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){1, 1, 8, 8}));
  double row[8] = {1, 2, 2, 3, 3, 4, 4, 4};
  for (int j = 0; j < 8; j++) CHECK(out && kt_get(out, j) == row[j]);
  kt_release_all(&out, 1);
  stax_tensor_t* all[3] = {x, roi, sizes};
  kt_release_all(all, 3);
}

/* ---- every mode against the reference ----------------------------------------------------- */

static void check_against_reference(const reference_t* r, int32_t rank, const int64_t* in_dims,
                                    const int64_t* out_dims, const double* scale_values,
                                    bool use_sizes, const double* roi_values, stax_dtype_t dtype,
                                    bool strided) {
  double data[64];
  int64_t count = 1;
  for (int32_t k = 0; k < rank; k++) count *= in_dims[k];
  for (int64_t i = 0; i < count; i++) data[i] = (double)((i * 37) % 23) - 7 + (i % 3) * 0.25;
  if (!stax_dtype_is_float(dtype))
    for (int64_t i = 0; i < count; i++) data[i] = (double)((i * 37) % 23);
  stax_tensor_t* x = strided ? kt_make_strided(dtype, rank, in_dims, data) : kt_make(dtype, rank, in_dims, data);
  double expected[512];
  double scales[4];
  for (int32_t k = 0; k < rank; k++)
    scales[k] = use_sizes ? (double)out_dims[k] / (double)in_dims[k] : (double)(float)scale_values[k];
  /* The kernel sees the roi as float32, so the reference does too (0.1f + 0.4f is not 0.5). */
  double roi_rounded[8];
  for (int32_t k = 0; roi_values && k < 2 * rank; k++) roi_rounded[k] = (double)(float)roi_values[k];
  reference_resize(r, rank, in_dims, data, out_dims, scales, roi_values ? roi_rounded : NULL,
                   expected);
  int64_t out_count = 1;
  for (int32_t k = 0; k < rank; k++) out_count *= out_dims[k];
  if (!stax_dtype_is_float(dtype))
    for (int64_t i = 0; i < out_count; i++) expected[i] = round(expected[i]);
  stax_tensor_t* scales_tensor = use_sizes ? NULL : floats(rank, scale_values);
  stax_tensor_t* sizes_tensor = use_sizes ? kt_vec(rank, out_dims) : NULL;
  stax_tensor_t* roi = roi_values ? floats(2 * rank, roi_values) : NULL;
  stax_node_attr_t attrs[6] = {kt_attr_string("mode", r->mode),
                               kt_attr_string("coordinate_transformation_mode", r->coordinates),
                               kt_attr_string("nearest_mode", r->nearest),
                               kt_attr_float("cubic_coeff_a", (float)r->a),
                               kt_attr_int("exclude_outside", r->exclude_outside),
                               kt_attr_float("extrapolation_value", (float)r->extrapolation)};
  stax_tensor_t* out = NULL;
  CHECK_OK(resize(x, roi, scales_tensor, sizes_tensor, attrs, 6, &out));
  CHECK(kt_dims_are(out, rank, out_dims));
  double tolerance = dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16 ? 0.1 : 1e-4;
  if (!stax_dtype_is_float(dtype)) tolerance = 1.0; /* rounding of exact .5 cases may differ */
  int failures_before = stax_test_failures_;
  kt_check_values(out, expected, out_count, tolerance);
  if (stax_test_failures_ != failures_before)
    fprintf(stderr, "  (mode %s, %s, %s, exclude_outside %d, %s, rank %d)\n", r->mode,
            r->coordinates, r->nearest, r->exclude_outside, stax_dtype_name(dtype), rank);
  kt_release_all(&out, 1);
  stax_tensor_t* all[4] = {x, scales_tensor, sizes_tensor, roi};
  kt_release_all(all, 4);
}

static void test_resize_modes(void) {
  const char* coordinates[6] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                "tf_crop_and_resize", "half_pixel"};
  const char* nearest[4] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char* modes[3] = {"nearest", "linear", "cubic"};
  double roi[6] = {0.1, 0.0, 0.2, 0.9, 1.0, 1.3};
  for (int m = 0; m < 3; m++) {
    for (int c = 0; c < 5; c++) {
      for (int n = 0; n < (m == 0 ? 4 : 1); n++) {
        for (int exclude = 0; exclude <= (m == 2 ? 1 : 0); exclude++) {
          reference_t r = {modes[m], coordinates[c], nearest[n], -0.5, exclude != 0, -1};
          bool crop = c == 4;
          /* Upsampling by sizes, 3-D (every axis resized). */
          check_against_reference(&r, 3, (int64_t[]){2, 3, 4}, (int64_t[]){3, 5, 7}, NULL, true,
                                  crop ? roi : NULL, STAX_DTYPE_FLOAT32, false);
          /* Downsampling by scales from a strided float64 input. */
          if (!crop)
            check_against_reference(&r, 2, (int64_t[]){5, 7}, (int64_t[]){2, 3},
                                    (double[]){0.5, 0.5}, false, NULL, STAX_DTYPE_FLOAT64, true);
          /* Output length 1 (the special cases of pytorch_half_pixel and align_corners). */
          check_against_reference(&r, 2, (int64_t[]){3, 4}, (int64_t[]){1, 6}, NULL, true,
                                  crop ? (double[]){0, 0, 1, 1} : NULL, STAX_DTYPE_FLOAT32, false);
        }
      }
    }
  }
  /* Other dtypes: half types, and integers (rounded to nearest). */
  reference_t bilinear = {"linear", "half_pixel", "round_prefer_floor", -0.75, false, 0};
  check_against_reference(&bilinear, 2, (int64_t[]){3, 3}, (int64_t[]){5, 4}, NULL, true, NULL,
                          STAX_DTYPE_FLOAT16, false);
  check_against_reference(&bilinear, 2, (int64_t[]){3, 3}, (int64_t[]){5, 4}, NULL, true, NULL,
                          STAX_DTYPE_BFLOAT16, true);
  check_against_reference(&bilinear, 2, (int64_t[]){3, 3}, (int64_t[]){5, 4}, NULL, true, NULL,
                          STAX_DTYPE_INT32, false);
  reference_t near = {"nearest", "asymmetric", "floor", -0.75, false, 0};
  check_against_reference(&near, 2, (int64_t[]){3, 3}, (int64_t[]){6, 2}, NULL, true, NULL,
                          STAX_DTYPE_INT64, true);
  check_against_reference(&near, 1, (int64_t[]){5}, (int64_t[]){9}, NULL, true, NULL,
                          STAX_DTYPE_UINT8, false);
  /* Trilinear over four axes (batch axis untouched). */
  reference_t trilinear = {"linear", "align_corners", "round_prefer_floor", -0.75, false, 0};
  check_against_reference(&trilinear, 4, (int64_t[]){2, 2, 3, 2}, (int64_t[]){2, 4, 5, 3}, NULL, true,
                          NULL, STAX_DTYPE_FLOAT32, false);
}

static void test_resize_uint8_rounding_and_nearest_bytes(void) {
  /* uint8 [0, 255] upsampled to 4 with half_pixel linear: 0, 63.75 -> 64, 191.25 -> 191, 255. */
  stax_tensor_t* x = kt_make(STAX_DTYPE_UINT8, 2, (int64_t[]){1, 2}, (double[]){0, 255});
  stax_tensor_t* sizes = kt_vec(2, (int64_t[]){1, 4});
  stax_node_attr_t linear = kt_attr_string("mode", "linear");
  stax_tensor_t* out = NULL;
  CHECK_OK(resize(x, NULL, NULL, sizes, &linear, 1, &out));
  kt_check_values(out, (double[]){0, 64, 191, 255}, 4, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
  /* Nearest copies bytes: int64 values beyond 2^53 survive exactly. */
  int64_t big[2] = {((int64_t)1 << 60) + 3, -((int64_t)1 << 58) - 1};
  x = kt_make_ints(2, (int64_t[]){1, 2}, big);
  CHECK_OK(resize(x, NULL, NULL, sizes, NULL, 0, &out));
  CHECK(out && kt_get_int(out, 0) == big[0] && kt_get_int(out, 3) == big[1]);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
  stax_tensor_release(sizes);
}

static void test_resize_sizes_axes_policy(void) {
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, (double[]){1, 2, 3, 4});
  stax_tensor_t* out = NULL;
  /* axes (opset 18): sizes for the last two axes only. */
  int64_t axes[2] = {2, -1};
  stax_tensor_t* sizes = kt_vec(2, (int64_t[]){7, 8});
  stax_node_attr_t attrs[2] = {kt_attr_ints("axes", 2, axes), kt_attr_string("keep_aspect_ratio_policy", "not_larger")};
  CHECK_OK(resize(x, NULL, NULL, sizes, attrs, 2, &out));
  /* not_larger: scale min(7/2, 8/2) = 3.5, so 7 x 7, sampled with that scale. */
  CHECK(kt_dims_are(out, 4, (int64_t[]){1, 1, 7, 7}));
  reference_t r = {"nearest", "half_pixel", "round_prefer_floor", -0.75, false, 0};
  double expected[64];
  reference_resize(&r, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4}, (int64_t[]){7, 7},
                   (double[]){3.5, 3.5}, NULL, expected);
  kt_check_values(out, expected, 49, 0);
  kt_release_all(&out, 1);
  attrs[1] = kt_attr_string("keep_aspect_ratio_policy", "not_smaller");
  CHECK_OK(resize(x, NULL, NULL, sizes, attrs, 2, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){1, 1, 8, 8}));
  kt_release_all(&out, 1);
  /* Scales with axes, into a preallocated output. */
  stax_tensor_t* scales = floats(2, (double[]){2, 1});
  out = kt_make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 2}, NULL);
  CHECK_OK(resize(x, NULL, scales, NULL, attrs, 1, &out));
  kt_check_values(out, (double[]){1, 2, 1, 2, 3, 4, 3, 4}, 8, 0);
  kt_release_all(&out, 1);
  /* Empty placeholder inputs (as exporters write them) count as absent. */
  stax_tensor_t* empty = floats(0, NULL);
  stax_tensor_t* full_sizes = kt_vec(4, (int64_t[]){1, 1, 4, 4});
  CHECK_OK(resize(x, empty, empty, full_sizes, NULL, 0, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){1, 1, 4, 4}));
  kt_release_all(&out, 1);
  /* The opset 10 form Resize(X, scales): asymmetric, floor. */
  stax_tensor_t* line = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){2}, (double[]){1, 2});
  stax_tensor_t* three = floats(1, (double[]){3});
  stax_tensor_t* pair[2] = {line, three};
  CHECK_OK(kt_run(stax_kernel_Resize, STAX_OP_Resize, NULL, 0, pair, 2, &out, 1));
  kt_check_values(out, (double[]){1, 1, 1, 2, 2, 2}, 6, 0);
  kt_release_all(&out, 1);
  /* Zero-sized output. */
  stax_tensor_t* to_zero = kt_vec(4, (int64_t[]){1, 1, 0, 3});
  CHECK_OK(resize(x, NULL, NULL, to_zero, NULL, 0, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){1, 1, 0, 3}));
  kt_release_all(&out, 1);
  stax_tensor_t* all[8] = {x, sizes, scales, empty, full_sizes, line, three, to_zero};
  kt_release_all(all, 8);
}

static void test_resize_errors(void) {
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, NULL);
  stax_tensor_t* scales = floats(2, (double[]){2, 2});
  stax_tensor_t* sizes = kt_vec(2, (int64_t[]){4, 4});
  stax_tensor_t* out = NULL;
  CHECK_ERROR(resize(x, NULL, scales, sizes, NULL, 0, &out), STAX_INVALID_ARGUMENT, "not both");
  CHECK_ERROR(resize(x, NULL, NULL, NULL, NULL, 0, &out), STAX_INVALID_ARGUMENT, "needs scales");
  stax_node_attr_t bad = kt_attr_string("mode", "bilinear");
  CHECK_ERROR(resize(x, NULL, scales, NULL, &bad, 1, &out), STAX_INVALID_ARGUMENT,
              "one of nearest, linear, cubic");
  bad = kt_attr_string("coordinate_transformation_mode", "corners");
  CHECK_ERROR(resize(x, NULL, scales, NULL, &bad, 1, &out), STAX_INVALID_ARGUMENT, "corners");
  bad = kt_attr_string("nearest_mode", "round");
  CHECK_ERROR(resize(x, NULL, scales, NULL, &bad, 1, &out), STAX_INVALID_ARGUMENT, "round");
  stax_node_attr_t antialias[2] = {kt_attr_string("mode", "linear"), kt_attr_int("antialias", 1)};
  CHECK_ERROR(resize(x, NULL, scales, NULL, antialias, 2, &out), STAX_UNIMPLEMENTED, "antialias");
  bad = kt_attr_string("keep_aspect_ratio_policy", "fit");
  CHECK_ERROR(resize(x, NULL, NULL, sizes, &bad, 1, &out), STAX_INVALID_ARGUMENT, "fit");
  stax_tensor_t* three = floats(3, (double[]){1, 1, 1});
  CHECK_ERROR(resize(x, NULL, three, NULL, NULL, 0, &out), STAX_INVALID_ARGUMENT, "2 values are needed");
  stax_tensor_t* negative = floats(2, (double[]){1, -2});
  CHECK_ERROR(resize(x, NULL, negative, NULL, NULL, 0, &out), STAX_INVALID_ARGUMENT, "scales[1] is -2");
  stax_tensor_t* bad_sizes = kt_vec(2, (int64_t[]){1, -1});
  CHECK_ERROR(resize(x, NULL, NULL, bad_sizes, NULL, 0, &out), STAX_INVALID_ARGUMENT, "sizes[1] is -1");
  stax_tensor_t* int_scales = kt_vec(2, (int64_t[]){2, 2});
  CHECK_ERROR(resize(x, NULL, int_scales, NULL, NULL, 0, &out), STAX_DTYPE_MISMATCH, "float");
  stax_node_attr_t crop = kt_attr_string("coordinate_transformation_mode", "tf_crop_and_resize");
  stax_tensor_t* short_roi = floats(2, (double[]){0, 1});
  CHECK_ERROR(resize(x, short_roi, scales, NULL, &crop, 1, &out), STAX_INVALID_ARGUMENT, "roi");
  stax_tensor_t* empty = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){0, 2}, NULL);
  CHECK_ERROR(resize(empty, NULL, NULL, sizes, NULL, 0, &out), STAX_INVALID_ARGUMENT,
              "dim 0 is 0, so it cannot be resized to 4");
  int64_t repeated[2] = {0, -2};
  stax_node_attr_t axes = kt_attr_ints("axes", 2, repeated);
  CHECK_ERROR(resize(x, NULL, scales, NULL, &axes, 1, &out), STAX_INVALID_ARGUMENT, "repeats axis 0");
  CHECK(out == NULL);
  /* A wild roi must not crash (coordinates far outside become extrapolation). */
  stax_tensor_t* wild = floats(4, (double[]){-1e30, NAN, 1e30, 1e38});
  CHECK_OK(resize(x, wild, NULL, sizes, &crop, 1, &out));
  kt_release_all(&out, 1);
  stax_tensor_t* all[11] = {x, scales, sizes, three, negative, bad_sizes, int_scales, short_roi, empty, wild};
  kt_release_all(all, 10);
}

static void test_resize_parallel(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  kt_test_pool = pool;
  enum { H = 40, W = 52, OH = 97, OW = 75 };
  static double data[H * W], expected[OH * OW];
  for (int i = 0; i < H * W; i++) data[i] = (i * 37) % 101 * 0.5;
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, H, W}, data);
  stax_tensor_t* sizes = kt_vec(4, (int64_t[]){1, 1, OH, OW});
  const char* modes[2] = {"linear", "cubic"};
  for (int m = 0; m < 2; m++) {
    stax_node_attr_t mode = kt_attr_string("mode", modes[m]);
    stax_tensor_t* out = NULL;
    CHECK_OK(resize(x, NULL, NULL, sizes, &mode, 1, &out));
    reference_t r = {modes[m], "half_pixel", "round_prefer_floor", -0.75, false, 0};
    reference_resize(&r, 2, (int64_t[]){H, W}, data, (int64_t[]){OH, OW},
                     (double[]){(double)OH / H, (double)OW / W}, NULL, expected);
    kt_check_values(out, expected, OH * OW, 1e-3);
    kt_release_all(&out, 1);
  }
  stax_tensor_release(sizes);
  stax_tensor_release(x);
  kt_test_pool = NULL;
  stax_threadpool_destroy(pool);
}

static void test_allocation_failures(void) {
  /* Rank 6 cubic: 4^5 tap combinations per row, more than the stack buffer holds, so each
   * worker allocates and a failure there must surface as a status too. */
  int64_t dims[6] = {2, 2, 2, 2, 2, 2};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 6, dims, NULL);
  stax_tensor_t* sizes = kt_vec(6, (int64_t[]){3, 3, 3, 3, 3, 3});
  stax_tensor_t* inputs[4] = {x, NULL, NULL, sizes};
  stax_node_attr_t cubic = kt_attr_string("mode", "cubic");
  kt_check_allocation_failures(stax_kernel_Resize, STAX_OP_Resize, &cubic, 1, inputs, 4, 1);
  stax_node_attr_t linear = kt_attr_string("mode", "linear");
  kt_check_allocation_failures(stax_kernel_Resize, STAX_OP_Resize, &linear, 1, inputs, 4, 1);
  /* Constant input, constant output: the weights of every combination sum to one. */
  stax_tensor_t* ones = kt_make(STAX_DTYPE_FLOAT64, 6, dims, NULL);
  for (int i = 0; i < 64; i++) ((double*)stax_tensor_data(ones))[i] = 2.5;
  inputs[0] = ones;
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_Resize, STAX_OP_Resize, &cubic, 1, inputs, 4, &out, 1));
  bool all_equal = true;
  for (int i = 0; out && i < 729; i++) all_equal = all_equal && fabs(kt_get(out, i) - 2.5) < 1e-12;
  CHECK(all_equal);
  kt_release_all(&out, 1);
  stax_tensor_t* all[3] = {x, sizes, ones};
  kt_release_all(all, 3);
}

STAX_TEST_MAIN(STAX_TEST(test_resize_onnx_examples), STAX_TEST(test_resize_modes),
               STAX_TEST(test_resize_uint8_rounding_and_nearest_bytes),
               STAX_TEST(test_resize_sizes_axes_policy), STAX_TEST(test_resize_errors),
               STAX_TEST(test_resize_parallel), STAX_TEST(test_allocation_failures))
