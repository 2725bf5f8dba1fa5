/* Shape inference for NonMaxSuppression (the data-dependent row count and its bound, the
 * optional inputs) and RoiAlign, with every error path. */
#include "shape_test_util.h"

#define F32 STAX_DTYPE_FLOAT32
#define F64 STAX_DTYPE_FLOAT64
#define I64 STAX_DTYPE_INT64

static void check_fresh_range(stax_graph_t* g, const stax_dim_t* dim, int64_t min, int64_t max) {
  stax_symbol_id_t id = -1;
  CHECK(stax_dim_as_symbol(dim, &id));
  int64_t low = -1, high = -1;
  if (id >= 0) stax_symbol_range(stax_graph_shape_ctx(g), id, &low, &high);
  CHECK_EQ_INT(low, min);
  CHECK_EQ_INT(high, max);
}

static void test_nms_shapes(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t boxes = shape_test_input(g, "boxes", F32, "B,S,4");
  stax_value_id_t scores = shape_test_input(g, "scores", F32, "B,C,S");
  stax_value_id_t max_out = shape_test_input(g, "max", I64, "1");
  stax_value_id_t iou = shape_test_input(g, "iou", F32, "");
  stax_value_id_t nms = shape_test_node1(g, STAX_OP_NonMaxSuppression, "nms",
                                         INPUTS(boxes, scores, max_out, iou), NO_ATTRS);
  CHECK_EQ_INT(stax_value_dtype(g, nms), I64);
  CHECK_EQ_INT(stax_value_rank(g, nms), 2);
  CHECK_EQ_INT(stax_dim_const_value(stax_value_dims(g, nms)[1]), 3);
  check_fresh_range(g, stax_value_dims(g, nms)[0], 0, STAX_DIM_MAX);
  /* A constant maximum bounds the rows by batches x classes x min(S, max). */
  stax_value_id_t fixed_boxes = shape_test_input(g, "fixed_boxes", F32, "2,100,4");
  stax_value_id_t fixed_scores = shape_test_input(g, "fixed_scores", F32, "2,3,100");
  stax_value_id_t five = shape_test_ints(g, "five", 1, (int64_t[]){5});
  stax_value_id_t bounded =
      shape_test_node1(g, STAX_OP_NonMaxSuppression, "bounded",
                       INPUTS(fixed_boxes, fixed_scores, five), NO_ATTRS);
  check_fresh_range(g, stax_value_dims(g, bounded)[0], 0, 30);
  stax_value_id_t thousand = shape_test_scalar(g, "thousand", 1000);
  stax_value_id_t by_boxes =
      shape_test_node1(g, STAX_OP_NonMaxSuppression, "by_boxes",
                       INPUTS(fixed_boxes, fixed_scores, thousand), NO_ATTRS);
  check_fresh_range(g, stax_value_dims(g, by_boxes)[0], 0, 600);
  /* Without a maximum (or with a negative one) nothing is selected: the row count is 0. */
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_NonMaxSuppression, "none",
                                                    INPUTS(boxes, scores), NO_ATTRS)),
               "[0, 3]");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(
                                       g, STAX_OP_NonMaxSuppression, "negative",
                                       INPUTS(fixed_boxes, fixed_scores,
                                              shape_test_scalar(g, "minus", -2)),
                                       NO_ATTRS)),
               "[0, 3]");
  /* center_point_box 1 and an omitted middle input. */
  stax_value_id_t threshold = shape_test_input(g, "threshold", F32, "1");
  CHECK_OK(shape_test_node(g, STAX_OP_NonMaxSuppression, "center",
                           INPUTS(boxes, scores, max_out, STAX_VALUE_NONE, threshold),
                           ATTRS(stax_attr_int("center_point_box", 1)), 1, &nms));
  stax_graph_destroy(g);
}

static void test_nms_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t boxes = shape_test_input(g, "boxes", F32, "2,5,4");
  stax_value_id_t scores = shape_test_input(g, "scores", F32, "2,3,5");
  stax_value_id_t flat = shape_test_input(g, "flat", F32, "5,4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_NonMaxSuppression, "rank", INPUTS(flat, scores),
                              NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH,
              "NonMaxSuppression node 'rank': input 0 'flat' has rank 2; boxes are "
              "[num_batches, spatial_dimension, 4], rank 3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_NonMaxSuppression, "scores_rank", INPUTS(boxes, flat),
                              NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "input 1 'flat' has rank 2; scores are");
  stax_value_id_t five = shape_test_input(g, "five", F32, "2,5,5");
  CHECK_ERROR(shape_test_node(g, STAX_OP_NonMaxSuppression, "coords", INPUTS(five, scores),
                              NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "input 0 'five' dim 2 is 5; each box has 4 coordinates");
  stax_value_id_t other_batch = shape_test_input(g, "other_batch", F32, "3,3,5");
  CHECK_ERROR(shape_test_node(g, STAX_OP_NonMaxSuppression, "batch",
                              INPUTS(boxes, other_batch), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH,
              "num_batches mismatch: input 0 'boxes' dim 0 is 2 but input 1 'other_batch' "
              "dim 0 is 3");
  stax_value_id_t other_spatial = shape_test_input(g, "other_spatial", F32, "2,3,6");
  CHECK_ERROR(shape_test_node(g, STAX_OP_NonMaxSuppression, "spatial",
                              INPUTS(boxes, other_spatial), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH,
              "spatial_dimension mismatch: input 0 'boxes' dim 1 is 5 but input 1 "
              "'other_spatial' dim 2 is 6");
  stax_value_id_t doubles = shape_test_input(g, "doubles", F64, "2,5,4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_NonMaxSuppression, "dtype", INPUTS(doubles, scores),
                              NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 0 'doubles' has dtype float64, expected float32");
  stax_value_id_t pair = shape_test_ints(g, "pair", 2, (int64_t[]){3, 4});
  CHECK_ERROR(shape_test_node(g, STAX_OP_NonMaxSuppression, "max_vector",
                              INPUTS(boxes, scores, pair), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "input 2 'pair' (max_output_boxes_per_class) must be a scalar");
  stax_value_id_t int_iou = shape_test_scalar(g, "int_iou", 1);
  CHECK_ERROR(shape_test_node(g, STAX_OP_NonMaxSuppression, "iou_dtype",
                              INPUTS(boxes, scores, STAX_VALUE_NONE, int_iou), NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 3 'int_iou' has dtype int64, expected float32");
  CHECK_ERROR(shape_test_node(g, STAX_OP_NonMaxSuppression, "center", INPUTS(boxes, scores),
                              ATTRS(stax_attr_int("center_point_box", 2)), 1, &out),
              STAX_INVALID_ARGUMENT, "attribute 'center_point_box' is 2");
  /* A symbolic coordinate dim becomes 4; a later contradiction names both origins. */
  stax_value_id_t open = shape_test_input(g, "open", F32, "2,5,K");
  CHECK_OK(shape_test_node(g, STAX_OP_NonMaxSuppression, "open", INPUTS(open, scores),
                           NO_ATTRS, 1, &out));
  CHECK_EQ_STR(shape_test_shape(g, open), "[2, 5, 4]");
  stax_graph_destroy(g);
}

static void test_roi_align_shapes(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,256,H,W");
  stax_value_id_t rois = shape_test_input(g, "rois", F32, "R,4");
  stax_value_id_t indices = shape_test_input(g, "indices", I64, "R");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_RoiAlign, "default",
                                                    INPUTS(x, rois, indices), NO_ATTRS)),
               "[R, 256, 1, 1]");
  CHECK_EQ_STR(shape_test_shape(
                   g, shape_test_node1(g, STAX_OP_RoiAlign, "pooled", INPUTS(x, rois, indices),
                                       ATTRS(stax_attr_int("output_height", 7),
                                             stax_attr_int("output_width", 5),
                                             stax_attr_int("sampling_ratio", 2),
                                             stax_attr_float("spatial_scale", 0.0625f),
                                             stax_attr_string("mode", "max"),
                                             stax_attr_string("coordinate_transformation_mode",
                                                              "output_half_pixel")))),
               "[R, 256, 7, 5]");
  /* The roi count of batch_indices and rois is one dim. */
  stax_value_id_t rois2 = shape_test_input(g, "rois2", F32, "Q,4");
  stax_value_id_t indices2 = shape_test_input(g, "indices2", I64, "P");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_RoiAlign, "unified",
                                                    INPUTS(x, rois2, indices2), NO_ATTRS)),
               "[Q, 256, 1, 1]");
  CHECK_EQ_STR(shape_test_shape(g, indices2), "[Q]");
  stax_value_id_t halves = shape_test_input(g, "halves", STAX_DTYPE_FLOAT16, "1,3,8,8");
  stax_value_id_t half_rois = shape_test_input(g, "half_rois", STAX_DTYPE_FLOAT16, "2,4");
  stax_value_id_t two = shape_test_input(g, "two", I64, "2");
  stax_value_id_t y = shape_test_node1(g, STAX_OP_RoiAlign, "half",
                                       INPUTS(halves, half_rois, two), NO_ATTRS);
  CHECK_EQ_INT(stax_value_dtype(g, y), STAX_DTYPE_FLOAT16);
  CHECK_EQ_STR(shape_test_shape(g, y), "[2, 3, 1, 1]");
  stax_graph_destroy(g);
}

static void test_roi_align_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t x = shape_test_input(g, "x", F32, "1,3,8,8");
  stax_value_id_t rois = shape_test_input(g, "rois", F32, "2,4");
  stax_value_id_t indices = shape_test_input(g, "indices", I64, "2");
  stax_value_id_t x3 = shape_test_input(g, "x3", F32, "3,8,8");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "rank", INPUTS(x3, rois, indices), NO_ATTRS,
                              1, &out),
              STAX_SHAPE_MISMATCH,
              "RoiAlign node 'rank': input 0 'x3' has rank 3; RoiAlign needs X as [N, C, H, W]");
  stax_value_id_t flat = shape_test_input(g, "flat", F32, "8");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "rois_rank", INPUTS(x, flat, indices),
                              NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "input 1 'flat' has rank 1; rois are [num_rois, 4]");
  stax_value_id_t five = shape_test_input(g, "five", F32, "2,5");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "coords", INPUTS(x, five, indices), NO_ATTRS,
                              1, &out),
              STAX_SHAPE_MISMATCH, "input 1 'five' dim 1 is 5; each roi has 4 coordinates");
  stax_value_id_t three = shape_test_input(g, "three", I64, "3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "count", INPUTS(x, rois, three), NO_ATTRS, 1,
                              &out),
              STAX_SHAPE_MISMATCH,
              "num_rois mismatch: input 1 'rois' dim 0 is 2 but input 2 'three' dim 0 is 3");
  stax_value_id_t matrix = shape_test_input(g, "matrix", I64, "2,1");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "indices_rank", INPUTS(x, rois, matrix),
                              NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "input 2 'matrix' has rank 2; batch_indices are [num_rois]");
  stax_value_id_t int32_indices = shape_test_input(g, "int32_indices", STAX_DTYPE_INT32, "2");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "indices_dtype",
                              INPUTS(x, rois, int32_indices), NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 2 'int32_indices' has dtype int32, expected int64");
  stax_value_id_t double_rois = shape_test_input(g, "double_rois", F64, "2,4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "rois_dtype", INPUTS(x, double_rois, indices),
                              NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "double_rois");
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "1,3,8,8");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "x_dtype", INPUTS(ints, rois, indices),
                              NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 0 'ints' has dtype int64, expected a floating-point");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "mode", INPUTS(x, rois, indices),
                              ATTRS(stax_attr_string("mode", "sum")), 1, &out),
              STAX_INVALID_ARGUMENT, "attribute 'mode' is 'sum'; it must be 'avg' or 'max'");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "transform", INPUTS(x, rois, indices),
                              ATTRS(stax_attr_string("coordinate_transformation_mode",
                                                     "align_corners")),
                              1, &out),
              STAX_INVALID_ARGUMENT, "'align_corners'; it must be 'half_pixel' or");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "height", INPUTS(x, rois, indices),
                              ATTRS(stax_attr_int("output_width", -2)), 1, &out),
              STAX_INVALID_ARGUMENT, "output_height = 1 and output_width = -2");
  CHECK_ERROR(shape_test_node(g, STAX_OP_RoiAlign, "ratio", INPUTS(x, rois, indices),
                              ATTRS(stax_attr_int("sampling_ratio", -1)), 1, &out),
              STAX_INVALID_ARGUMENT, "attribute 'sampling_ratio' is -1");
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_nms_shapes), STAX_TEST(test_nms_errors),
               STAX_TEST(test_roi_align_shapes), STAX_TEST(test_roi_align_errors))
