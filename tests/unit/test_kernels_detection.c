/* Tests for the detection kernels (src/kernels/detection.c). NonMaxSuppression: hand-worked
 * cases (ties by lower index, flipped corners, center boxes, zero-area and touching boxes,
 * thresholds, limits, batches and classes in order), strided inputs, a preallocated output,
 * every error path and allocation failures. RoiAlign: a linear ramp image, where bilinear
 * samples are exact, so averages are the ramp at the mean sample point (half_pixel and
 * output_half_pixel, fixed and adaptive grids), max mode's weighted corners, rois outside the
 * image, float64 and float16, a strided X, threads against one thread, errors and allocation
 * failures. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

#define F32 STAX_DTYPE_FLOAT32

static void check_rows(const stax_tensor_t* t, int64_t rows, const int64_t* expected) {
  CHECK(kt_dims_are(t, 2, (int64_t[]){rows, 3}));
  if (!kt_dims_are(t, 2, (int64_t[]){rows, 3})) return;
  for (int64_t i = 0; i < rows * 3; i++)
    if (kt_get_int(t, i) != expected[i]) {
      fprintf(stderr, "  element %lld\n", (long long)i);
      CHECK_EQ_INT(kt_get_int(t, i), expected[i]);
      return;
    }
  CHECK(true);
}

/* Runs NMS on boxes [1, S, 4] and scores [1, 1, S] with max 10. */
static stax_status_t run_nms(int64_t spatial, const double* boxes, const double* scores,
                             double iou, const double* score_threshold, int64_t center,
                             stax_tensor_t** out) {
  stax_tensor_t* inputs[5] = {
      kt_make(F32, 3, (int64_t[]){1, spatial, 4}, boxes),
      kt_make(F32, 3, (int64_t[]){1, 1, spatial}, scores),
      kt_scalar_int(10),
      kt_make(F32, 0, NULL, (double[]){iou}),
      score_threshold ? kt_make(F32, 1, (int64_t[]){1}, score_threshold) : NULL,
  };
  stax_node_attr_t attr = kt_attr_int("center_point_box", center);
  stax_status_t status =
      kt_run(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, &attr, 1, inputs, 5, out, 1);
  for (int i = 0; i < 5; i++) kt_release(inputs[i]);
  return status;
}

static void test_nms_order_and_suppression(void) {
  stax_tensor_t* out = NULL;
  /* Equal scores: lower index first; box 2 equals box 0 and goes. */
  CHECK_OK(run_nms(4, (double[]){0, 0, 1, 1, 5, 5, 6, 6, 0, 0, 1, 1, 2, 2, 3, 3},
                   (double[]){0.5, 0.5, 0.5, 0.5}, 0.5, NULL, 0, &out));
  check_rows(out, 3, (int64_t[]){0, 0, 0, 0, 0, 1, 0, 0, 3});
  kt_release_all(&out, 1);
  /* Flipped corners are the same box: the best of the three is kept. */
  CHECK_OK(run_nms(4, (double[]){0, 0, 4, 4, 4, 4, 0, 0, 0, 4, 4, 0, 10, 10, 12, 12},
                   (double[]){0.1, 0.9, 0.5, 0.3}, 0.5, NULL, 0, &out));
  check_rows(out, 2, (int64_t[]){0, 0, 1, 0, 0, 3});
  kt_release_all(&out, 1);
  /* IoU of [0,0,2,2] and [0,1,2,3] is 2/6: kept at 0.4, suppressed at 0.3; equal to the
   * threshold keeps it (suppression needs IoU > threshold). */
  double pair[8] = {0, 0, 2, 2, 0, 1, 2, 3};
  CHECK_OK(run_nms(2, pair, (double[]){0.9, 0.8}, 0.4, NULL, 0, &out));
  check_rows(out, 2, (int64_t[]){0, 0, 0, 0, 0, 1});
  kt_release_all(&out, 1);
  CHECK_OK(run_nms(2, pair, (double[]){0.9, 0.8}, 0.3, NULL, 0, &out));
  check_rows(out, 1, (int64_t[]){0, 0, 0});
  kt_release_all(&out, 1);
  double square[8] = {0, 0, 2, 2, 0, 0, 2, 2};
  CHECK_OK(run_nms(2, square, (double[]){0.9, 0.8}, 1.0, NULL, 0, &out));
  check_rows(out, 2, (int64_t[]){0, 0, 0, 0, 0, 1});
  kt_release_all(&out, 1);
  /* Zero-area boxes and touching boxes never suppress, even at iou 0. */
  CHECK_OK(run_nms(4, (double[]){1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 2, 2, 2, 0, 4, 2},
                   (double[]){0.9, 0.8, 0.7, 0.6}, 0.0, NULL, 0, &out));
  check_rows(out, 4, (int64_t[]){0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3});
  kt_release_all(&out, 1);
  /* The score threshold is strict; NaN scores are never selected. */
  double threshold = 0.5;
  CHECK_OK(run_nms(3, (double[]){0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5},
                   (double[]){0.5, NAN, 0.6}, 0.5, &threshold, 0, &out));
  check_rows(out, 1, (int64_t[]){0, 0, 2});
  kt_release_all(&out, 1);
  CHECK_OK(run_nms(3, (double[]){0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5},
                   (double[]){0.5, NAN, 0.6}, 0.5, NULL, 0, &out));
  check_rows(out, 2, (int64_t[]){0, 0, 2, 0, 0, 0});
  kt_release_all(&out, 1);
  /* Center boxes: [1,1,2,2] is [0,0]-[2,2]; [2,1,2,2] is [1,0]-[3,2]: IoU 1/3. */
  CHECK_OK(run_nms(2, (double[]){1, 1, 2, 2, 2, 1, 2, 2}, (double[]){0.8, 0.9}, 0.3, NULL, 1,
                   &out));
  check_rows(out, 1, (int64_t[]){0, 0, 1});
  kt_release_all(&out, 1);
  CHECK_OK(run_nms(2, (double[]){1, 1, 2, 2, 2, 1, 2, 2}, (double[]){0.8, 0.9}, 0.34, NULL, 1,
                   &out));
  check_rows(out, 2, (int64_t[]){0, 0, 1, 0, 0, 0});
  kt_release_all(&out, 1);
  /* No boxes. */
  CHECK_OK(run_nms(0, NULL, NULL, 0.5, NULL, 0, &out));
  check_rows(out, 0, NULL);
  kt_release_all(&out, 1);
}

static void test_nms_batches_classes_and_limits(void) {
  /* Two batches, two classes; boxes (per batch) 0: [0,0,1,1], 1: [0,0,1,1.1], 2: [3,3,4,4]. */
  double boxes[24] = {0, 0, 1, 1, 0, 0, 1, 1.1, 3, 3, 4, 4,
                      3, 3, 4, 4, 0, 0, 1, 1, 0, 0, 1, 1};
  double scores[12] = {0.1, 0.9, 0.5,   /* b0 c0 */
                       0.7, 0.2, 0.3,   /* b0 c1 */
                       0.4, 0.4, 0.6,   /* b1 c0 */
                       0.0, 0.0, 0.0};  /* b1 c1 */
  /* scores [B, C, S] stored as a transposed view of [B, S, C]. */
  double stored[12];
  for (int b = 0; b < 2; b++)
    for (int c = 0; c < 2; c++)
      for (int s = 0; s < 3; s++) stored[b * 6 + s * 2 + c] = scores[b * 6 + c * 3 + s];
  stax_tensor_t* base = kt_make(F32, 3, (int64_t[]){2, 3, 2}, stored);
  stax_tensor_t* scores_view = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, (int32_t[]){0, 2, 1}, &scores_view));
  stax_tensor_release(base);
  CHECK(!stax_tensor_is_contiguous(scores_view));
  stax_tensor_t* boxes_view = kt_make_strided(F32, 3, (int64_t[]){2, 3, 4}, boxes);
  stax_tensor_t* inputs[4] = {boxes_view, scores_view, kt_scalar_int(2),
                              kt_make(F32, 1, (int64_t[]){1}, (double[]){0.5})};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, NULL, 0, inputs, 4,
                  &out, 1));
  check_rows(out, 8, (int64_t[]){0, 0, 1, 0, 0, 2,   /* box 0 overlaps box 1 */
                                 0, 1, 0, 0, 1, 2,   /* class 1: box 0 first, then 2 */
                                 1, 0, 2, 1, 0, 0,   /* batch 1: tie 0.4, lower index */
                                 1, 1, 0, 1, 1, 1}); /* all scores 0: boxes 0, 1 */
  kt_release_all(&out, 1);
  /* A preallocated output of the right shape is filled; a wrong one is refused. */
  out = kt_make_ints(2, (int64_t[]){8, 3}, NULL);
  CHECK_OK(kt_run(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, NULL, 0, inputs, 4,
                  &out, 1));
  CHECK_EQ_INT(kt_get_int(out, 2), 1);
  kt_release_all(&out, 1);
  out = kt_make_ints(2, (int64_t[]){6, 3}, NULL);
  CHECK_ERROR(kt_run(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, NULL, 0, inputs,
                     4, &out, 1),
              STAX_SHAPE_MISMATCH, "output 0");
  kt_release_all(&out, 1);
  /* max 0 and a negative max select nothing; no max input at all neither. */
  kt_release(inputs[2]);
  inputs[2] = kt_scalar_int(-1);
  CHECK_OK(kt_run(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, NULL, 0, inputs, 4,
                  &out, 1));
  check_rows(out, 0, NULL);
  kt_release_all(&out, 1);
  CHECK_OK(kt_run(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, NULL, 0, inputs, 2,
                  &out, 1));
  check_rows(out, 0, NULL);
  kt_release_all(&out, 1);
  kt_release(inputs[2]);
  inputs[2] = kt_scalar_int(1);
  CHECK_OK(kt_run(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, NULL, 0, inputs, 4,
                  &out, 1));
  check_rows(out, 4, (int64_t[]){0, 0, 1, 0, 1, 0, 1, 0, 2, 1, 1, 0});
  kt_release_all(&out, 1);
  kt_check_allocation_failures(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, NULL, 0,
                               inputs, 4, 1);
  for (int i = 0; i < 4; i++) kt_release(inputs[i]);
}

static void test_nms_errors(void) {
  stax_tensor_t* out = NULL;
  stax_tensor_t* boxes = kt_make(F32, 3, (int64_t[]){2, 3, 4}, NULL);
  stax_tensor_t* scores = kt_make(F32, 3, (int64_t[]){2, 1, 3}, NULL);
  stax_tensor_t* flat = kt_make(F32, 2, (int64_t[]){3, 4}, NULL);
  stax_tensor_t* five = kt_make(F32, 3, (int64_t[]){2, 3, 5}, NULL);
  stax_tensor_t* other_batch = kt_make(F32, 3, (int64_t[]){3, 1, 3}, NULL);
  stax_tensor_t* other_spatial = kt_make(F32, 3, (int64_t[]){2, 1, 4}, NULL);
  stax_tensor_t* doubles = kt_make(STAX_DTYPE_FLOAT64, 3, (int64_t[]){2, 3, 4}, NULL);
  stax_tensor_t* pair = kt_vec(2, (int64_t[]){1, 2});
  stax_tensor_t* empty = kt_vec(0, NULL);
  stax_tensor_t* three = kt_scalar_int(3);
  stax_tensor_t* big_iou = kt_make(F32, 0, NULL, (double[]){1.5});
  stax_tensor_t* nan_iou = kt_make(F32, 0, NULL, (double[]){NAN});
  stax_tensor_t* two_floats = kt_make(F32, 1, (int64_t[]){2}, (double[]){0.1, 0.2});
  struct {
    stax_tensor_t* inputs[5];
    int32_t count;
    stax_status_code_t code;
    const char* message;
  } cases[] = {
      {{flat, scores}, 2, STAX_SHAPE_MISMATCH,
       "NonMaxSuppression node 'node0': input 0 (boxes) has rank 2"},
      {{boxes, flat}, 2, STAX_SHAPE_MISMATCH, "input 1 (scores) has rank 2"},
      {{five, scores}, 2, STAX_SHAPE_MISMATCH, "input 0 (boxes) dim 2 is 5"},
      {{boxes, other_batch}, 2, STAX_SHAPE_MISMATCH,
       "num_batches mismatch: input 0 (boxes) dim 0 is 2 but input 1 (scores) dim 0 is 3"},
      {{boxes, other_spatial}, 2, STAX_SHAPE_MISMATCH,
       "spatial_dimension mismatch: input 0 (boxes) dim 1 is 3 but input 1 (scores) dim 2 is 4"},
      {{doubles, scores}, 2, STAX_DTYPE_MISMATCH, "input 0 (boxes) must be float32, got float64"},
      {{boxes, scores, pair}, 3, STAX_INVALID_ARGUMENT,
       "input 2 (max_output_boxes_per_class) has 2 values, at most 1 allowed"},
      {{boxes, scores, empty}, 3, STAX_SHAPE_MISMATCH,
       "input 2 (max_output_boxes_per_class) must hold one value, has 0"},
      {{boxes, scores, three, big_iou}, 4, STAX_INVALID_ARGUMENT,
       "input 3 (iou_threshold) is 1.5; it must be in [0, 1]"},
      {{boxes, scores, three, nan_iou}, 4, STAX_INVALID_ARGUMENT, "input 3 (iou_threshold) is"},
      {{boxes, scores, three, NULL, two_floats}, 5, STAX_SHAPE_MISMATCH,
       "input 4 (score_threshold) must be a scalar"},
      {{boxes, scores, three, NULL, three}, 5, STAX_DTYPE_MISMATCH,
       "input 4 (score_threshold) must be float32, got int64"},
      {{NULL, scores}, 2, STAX_INVALID_ARGUMENT, "input 0 (boxes) is missing"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    CHECK_ERROR(kt_run(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, NULL, 0,
                       cases[i].inputs, cases[i].count, &out, 1),
                cases[i].code, cases[i].message);
    CHECK(out == NULL);
  }
  stax_node_attr_t center = kt_attr_int("center_point_box", 3);
  CHECK_ERROR(kt_run(stax_kernel_NonMaxSuppression, STAX_OP_NonMaxSuppression, &center, 1,
                     (stax_tensor_t*[]){boxes, scores}, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "attribute 'center_point_box' is 3");
  stax_tensor_t* all[] = {boxes, scores, flat, five, other_batch, other_spatial, doubles,
                          pair, empty, three, big_iou, nan_iou, two_floats};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) kt_release(all[i]);
}

/* ---- RoiAlign ------------------------------------------------------------------------------ */

/* X[n, c, y, x] = 100 n + 10 c + 4 y + x on an 8 x 8 image (4y + x needs W = 4 to be
 * "linear" per row only; bilinear interpolation of any function affine in (y, x) is exact). */
static stax_tensor_t* ramp(stax_dtype_t dtype, int64_t batches, int64_t channels) {
  int64_t count = batches * channels * 64;
  double* values = malloc(sizeof(double) * (size_t)count);
  for (int64_t i = 0; i < count; i++) {
    int64_t x = i % 8, y = i / 8 % 8, c = i / 64 % channels, n = i / 64 / channels;
    values[i] = 100.0 * (double)n + 10.0 * (double)c + 4.0 * (double)y + (double)x;
  }
  stax_tensor_t* t = kt_make(dtype, 4, (int64_t[]){batches, channels, 8, 8}, values);
  free(values);
  return t;
}

static stax_status_t run_roi(stax_tensor_t* x, int64_t count, const double* rois,
                             const int64_t* batch, const stax_node_attr_t* attrs,
                             int32_t attr_count, stax_tensor_t** out) {
  stax_tensor_t* inputs[3] = {kt_make(stax_tensor_dtype(x), 2, (int64_t[]){count, 4}, rois),
                              kt_vec(count, batch), x};
  stax_tensor_t* ordered[3] = {x, inputs[0], inputs[1]};
  stax_status_t status =
      kt_run(stax_kernel_RoiAlign, STAX_OP_RoiAlign, attrs, attr_count, ordered, 3, out, 1);
  kt_release(inputs[0]);
  kt_release(inputs[1]);
  return status;
}

static void test_roi_align_averages(void) {
  stax_tensor_t* x = ramp(F32, 2, 2);
  stax_tensor_t* out = NULL;
  /* half_pixel: roi [0,0]-[2,2] starts at -0.5; two samples per side at 0 and 1: the mean
   * sample point is (0.5, 0.5): 4 * 0.5 + 0.5 = 2.5 (+ 10 c + 100 n). */
  stax_node_attr_t two[1] = {kt_attr_int("sampling_ratio", 2)};
  CHECK_OK(run_roi(x, 2, (double[]){0, 0, 2, 2, 0, 0, 2, 2}, (int64_t[]){0, 1}, two, 1, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){2, 2, 1, 1}));
  kt_check_values(out, (double[]){2.5, 12.5, 102.5, 112.5}, 4, 1e-5);
  kt_release_all(&out, 1);
  /* output_half_pixel: samples at 0.5 and 1.5: the mean is (1, 1): 5. */
  stax_node_attr_t legacy[2] = {kt_attr_int("sampling_ratio", 2),
                                kt_attr_string("coordinate_transformation_mode",
                                               "output_half_pixel")};
  CHECK_OK(run_roi(x, 1, (double[]){0, 0, 2, 2}, (int64_t[]){0}, legacy, 2, &out));
  kt_check_values(out, (double[]){5, 15}, 2, 1e-5);
  kt_release_all(&out, 1);
  /* 2 x 2 bins over [1,1]-[5,5] (half_pixel: [0.5, 4.5]), adaptive grid ceil(2) = 2; each
   * bin's mean point is its center: (1.5, 1.5), (1.5, 3.5), (3.5, 1.5), (3.5, 3.5).
   * spatial_scale 0.5 on a roi given at twice the size gives the same. */
  stax_node_attr_t bins[3] = {kt_attr_int("output_height", 2), kt_attr_int("output_width", 2),
                              kt_attr_float("spatial_scale", 0.5f)};
  CHECK_OK(run_roi(x, 1, (double[]){2, 2, 10, 10}, (int64_t[]){1}, bins, 3, &out));
  kt_check_values(out, (double[]){107.5, 109.5, 115.5, 117.5, 117.5, 119.5, 125.5, 127.5}, 8,
                  1e-4);
  kt_release_all(&out, 1);
  /* Fully outside the image: 0. Samples beyond the last pixel clamp to it. */
  CHECK_OK(run_roi(x, 2, (double[]){20, 20, 30, 30, 7.5, 7.5, 8.5, 8.5}, (int64_t[]){0, 0}, two, 1,
                   &out));
  kt_check_values(out, (double[]){0, 0, 35, 45}, 4, 1e-5);
  kt_release_all(&out, 1);
  /* Zero rois, and a preallocated output. */
  CHECK_OK(run_roi(x, 0, NULL, NULL, two, 1, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){0, 2, 1, 1}));
  kt_release_all(&out, 1);
  out = kt_make(F32, 4, (int64_t[]){1, 2, 1, 1}, NULL);
  CHECK_OK(run_roi(x, 1, (double[]){0, 0, 2, 2}, (int64_t[]){0}, two, 1, &out));
  kt_check_values(out, (double[]){2.5, 12.5}, 2, 1e-5);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
}

static void test_roi_align_max_and_dtypes(void) {
  stax_tensor_t* x = ramp(F32, 1, 1);
  stax_tensor_t* out = NULL;
  /* Samples on pixel centers (0,0), (0,1), (1,0), (1,1): each has weight 1 on its pixel and
   * the maximum is X[1][1] = 5. Between pixels (half a pixel off), max mode takes the
   * largest weighted corner: at (0.5, 0.5) every weight is 0.25, so 0.25 * X[1][1]. */
  stax_node_attr_t max_attrs[2] = {kt_attr_int("sampling_ratio", 2), kt_attr_string("mode", "max")};
  CHECK_OK(run_roi(x, 1, (double[]){0, 0, 2, 2}, (int64_t[]){0}, max_attrs, 2, &out));
  kt_check_values(out, (double[]){5}, 1, 1e-6);
  kt_release_all(&out, 1);
  stax_node_attr_t one_sample[2] = {kt_attr_int("sampling_ratio", 1),
                                    kt_attr_string("mode", "max")};
  CHECK_OK(run_roi(x, 1, (double[]){0.5, 0.5, 1.5, 1.5}, (int64_t[]){0}, one_sample, 2, &out));
  kt_check_values(out, (double[]){0.25 * 5}, 1, 1e-6);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
  /* float64, float16 and bfloat16 give the same averages. */
  stax_dtype_t dtypes[3] = {STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16};
  for (int k = 0; k < 3; k++) {
    x = ramp(dtypes[k], 1, 2);
    stax_node_attr_t two[1] = {kt_attr_int("sampling_ratio", 2)};
    CHECK_OK(run_roi(x, 1, (double[]){0, 0, 2, 2}, (int64_t[]){0}, two, 1, &out));
    CHECK_EQ_INT(stax_tensor_dtype(out), dtypes[k]);
    kt_check_values(out, (double[]){2.5, 12.5}, 2, k == 0 ? 1e-12 : 0.1);
    kt_release_all(&out, 1);
    stax_tensor_release(x);
  }
}

static void test_roi_align_strided_and_threads(void) {
  /* 3 channels x 8 x 8 ramp, stored with every other element of a wider last axis. */
  int64_t count = 2 * 3 * 64;
  double* values = malloc(sizeof(double) * (size_t)count);
  for (int64_t i = 0; i < count; i++) values[i] = sin((double)i * 0.37) * 10;
  stax_tensor_t* dense = kt_make(F32, 4, (int64_t[]){2, 3, 8, 8}, values);
  stax_tensor_t* strided = kt_make_strided(F32, 4, (int64_t[]){2, 3, 8, 8}, values);
  free(values);
  double rois[5 * 4] = {0, 0, 7, 7, 1.3, 2.2, 5.1, 6.8, -2, -2, 3, 3, 6, 1, 9, 4, 2, 2, 2.5, 7};
  int64_t batch[5] = {0, 1, 1, 0, 1};
  stax_node_attr_t attrs[3] = {kt_attr_int("output_height", 3), kt_attr_int("output_width", 2),
                               kt_attr_int("sampling_ratio", 0)};
  stax_tensor_t *a = NULL, *b = NULL, *c = NULL;
  CHECK_OK(run_roi(dense, 5, rois, batch, attrs, 3, &a));
  CHECK_OK(run_roi(strided, 5, rois, batch, attrs, 3, &b));
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  kt_test_pool = pool;
  CHECK_OK(run_roi(dense, 5, rois, batch, attrs, 3, &c));
  kt_test_pool = NULL;
  stax_threadpool_destroy(pool);
  int64_t n = stax_tensor_element_count(a);
  bool same = stax_tensor_element_count(b) == n && stax_tensor_element_count(c) == n;
  for (int64_t i = 0; same && i < n; i++)
    same = kt_get(a, i) == kt_get(b, i) && kt_get(a, i) == kt_get(c, i);
  CHECK(same);
  kt_release(a);
  kt_release(b);
  kt_release(c);
  /* Allocation failures leave no output and no leak. */
  stax_tensor_t* inputs[3] = {dense, kt_make(F32, 2, (int64_t[]){5, 4}, rois), kt_vec(5, batch)};
  kt_check_allocation_failures(stax_kernel_RoiAlign, STAX_OP_RoiAlign, attrs, 3, inputs, 3, 1);
  kt_release(inputs[1]);
  kt_release(inputs[2]);
  stax_tensor_release(dense);
  stax_tensor_release(strided);
}

static void test_roi_align_errors(void) {
  stax_tensor_t* out = NULL;
  stax_tensor_t* x = ramp(F32, 2, 1);
  stax_tensor_t* rois = kt_make(F32, 2, (int64_t[]){2, 4}, (double[]){0, 0, 1, 1, 0, 0, 2, 2});
  stax_tensor_t* batch = kt_vec(2, (int64_t[]){0, 1});
  stax_tensor_t* bad_batch = kt_vec(2, (int64_t[]){0, 2});
  stax_tensor_t* negative_batch = kt_vec(2, (int64_t[]){-1, 0});
  stax_tensor_t* short_batch = kt_vec(1, (int64_t[]){0});
  stax_tensor_t* x3 = kt_make(F32, 3, (int64_t[]){1, 8, 8}, NULL);
  stax_tensor_t* rois5 = kt_make(F32, 2, (int64_t[]){2, 5}, NULL);
  stax_tensor_t* rois1 = kt_make(F32, 1, (int64_t[]){4}, NULL);
  stax_tensor_t* rois64 = kt_make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){2, 4}, NULL);
  stax_tensor_t* ints = kt_make(STAX_DTYPE_INT32, 4, (int64_t[]){1, 1, 2, 2}, NULL);
  stax_tensor_t* huge = kt_make(F32, 2, (int64_t[]){2, 4}, (double[]){0, 0, 1, 1, 0, 0, 1e12, 1});
  struct {
    stax_tensor_t* inputs[3];
    stax_status_code_t code;
    const char* message;
  } cases[] = {
      {{x, rois, bad_batch}, STAX_OUT_OF_RANGE,
       "RoiAlign node 'node0': input 2 (batch_indices) element 1 is 2, outside input 0 (X) dim "
       "0 of size 2"},
      {{x, rois, negative_batch}, STAX_OUT_OF_RANGE, "element 0 is -1"},
      {{x, rois, short_batch}, STAX_SHAPE_MISMATCH,
       "num_rois mismatch: input 1 (rois) dim 0 is 2 but input 2 (batch_indices) dim 0 is 1"},
      {{x3, rois, batch}, STAX_SHAPE_MISMATCH, "input 0 (X) has rank 3"},
      {{x, rois5, batch}, STAX_SHAPE_MISMATCH, "input 1 (rois) dim 1 is 5"},
      {{x, rois1, batch}, STAX_SHAPE_MISMATCH, "input 1 (rois) has rank 1"},
      {{x, rois64, batch}, STAX_DTYPE_MISMATCH, "input 1 (rois) has dtype float64"},
      {{ints, rois, batch}, STAX_DTYPE_MISMATCH, "input 0 (X) must be a floating-point tensor"},
      {{x, rois, NULL}, STAX_INVALID_ARGUMENT, "input 2 (batch_indices) is missing"},
      {{x, huge, batch}, STAX_INVALID_ARGUMENT,
       "input 1 (rois) row 1 needs more than 16777216 sample points"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    CHECK_ERROR(kt_run(stax_kernel_RoiAlign, STAX_OP_RoiAlign, NULL, 0, cases[i].inputs, 3, &out,
                       1),
                cases[i].code, cases[i].message);
    CHECK(out == NULL);
  }
  struct {
    stax_node_attr_t attr;
    const char* message;
  } attrs[] = {
      {kt_attr_string("mode", "median"), "attribute 'mode' is 'median'"},
      {kt_attr_string("coordinate_transformation_mode", "asymmetric"),
       "attribute 'coordinate_transformation_mode' is 'asymmetric'"},
      {kt_attr_int("output_height", 0), "output_height = 0"},
      {kt_attr_int("output_width", (int64_t)1 << 25), "both must be in [1, 16777216]"},
      {kt_attr_int("sampling_ratio", -2), "attribute 'sampling_ratio' is -2"},
      {kt_attr_int("sampling_ratio", (int64_t)1 << 40), "needs more than 16777216"},
  };
  for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
    CHECK_ERROR(kt_run(stax_kernel_RoiAlign, STAX_OP_RoiAlign, &attrs[i].attr, 1,
                       (stax_tensor_t*[]){x, rois, batch}, 3, &out, 1),
                STAX_INVALID_ARGUMENT, attrs[i].message);
  stax_tensor_t* all[] = {x, rois, batch, bad_batch, negative_batch, short_batch, x3,
                          rois5, rois1, rois64, ints, huge};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) kt_release(all[i]);
}

STAX_TEST_MAIN(STAX_TEST(test_nms_order_and_suppression),
               STAX_TEST(test_nms_batches_classes_and_limits), STAX_TEST(test_nms_errors),
               STAX_TEST(test_roi_align_averages), STAX_TEST(test_roi_align_max_and_dtypes),
               STAX_TEST(test_roi_align_strided_and_threads), STAX_TEST(test_roi_align_errors))
