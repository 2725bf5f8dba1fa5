/* Shape functions of the object-detection ops: NonMaxSuppression, whose output row count
 * depends on the scores (a fresh symbol bounded by what the inputs allow), and RoiAlign. */
#include <stdio.h>
#include <string.h>

#include "kernels/kernel.h" /* STAX_ROI_ALIGN_MAX_SAMPLES_PER_AXIS */
#include "passes/shape/shape_operands.h"

/* Unifies operand dim `axis` with the constant `expected` (a symbolic dim becomes that
 * constant and the input guards check it); a different constant is SHAPE_MISMATCH naming the
 * input, the dim and `why`. */
static stax_status_t detection_require_dim(stax_shape_infer_t* ic,
                                           const stax_shape_operand_t* operand, int32_t axis,
                                           int64_t expected, const char* why) {
  int64_t value = 0;
  if (stax_shape_dim_const(ic, operand->dims[axis], &value)) {
    if (value == expected) return STAX_OK;
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH, "input %d '%s' dim %d is %lld; %s",
                            operand->input_index, operand->name, axis, (long long)value, why);
  }
  char origin[160];
  snprintf(origin, sizeof(origin), "input %d '%s' dim %d", operand->input_index, operand->name,
           axis);
  return stax_shape_unify_described(ic, operand->dims[axis], origin,
                                    stax_dim_const(ic->shape, expected), why);
}

/* An optional scalar input of NonMaxSuppression: rank 0 or one element, of `allowed` dtypes. */
static stax_status_t nms_check_scalar(stax_shape_infer_t* ic, int32_t i, const char* role,
                                      stax_dtype_mask_t allowed, const char* what) {
  stax_shape_operand_t operand;
  bool present = false;
  stax_shape_read_input(ic, i, &operand, &present);
  if (!present) return STAX_OK;
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &operand, allowed, what));
  return stax_shape_require_scalar(ic, &operand, role);
}

static int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (a < 0 || b < 0) return 0;
  if (__builtin_mul_overflow(a, b, &product)) return STAX_DIM_MAX;
  return product;
}

/* NonMaxSuppression(boxes[B, S, 4], scores[B, C, S], max_output_boxes_per_class?,
 * iou_threshold?, score_threshold?) -> int64[K, 2 + 1]: K is a fresh symbol in
 * [0, B * C * min(S, max_output_boxes_per_class)] (the bound from a constant max, else
 * B * C * S); without max_output_boxes_per_class, ONNX selects nothing, so K is 0. */
stax_status_t stax_shape_nms(stax_shape_infer_t* ic) {
  stax_shape_operand_t boxes, scores;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &boxes));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &scores));
  const stax_dtype_mask_t float32 = STAX_DTYPE_BIT(STAX_DTYPE_FLOAT32);
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &boxes, float32, "float32"));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &scores, float32, "float32"));
  if (boxes.rank != 3) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 0 '%s' has rank %d; boxes are [num_batches, "
                            "spatial_dimension, 4], rank 3",
                            boxes.name, boxes.rank);
  }
  if (scores.rank != 3) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 1 '%s' has rank %d; scores are [num_batches, num_classes, "
                            "spatial_dimension], rank 3",
                            scores.name, scores.rank);
  }
  STAX_RETURN_IF_ERROR(detection_require_dim(
      ic, &boxes, 2, 4, "each box has 4 coordinates (boxes are [num_batches, "
                        "spatial_dimension, 4])"));
  STAX_RETURN_IF_ERROR(stax_shape_require_equal_dims(ic, "num_batches", &boxes, 0, &scores, 0));
  STAX_RETURN_IF_ERROR(
      stax_shape_require_equal_dims(ic, "spatial_dimension", &boxes, 1, &scores, 2));
  STAX_RETURN_IF_ERROR(nms_check_scalar(ic, 2, "max_output_boxes_per_class",
                                        STAX_DTYPE_BIT(STAX_DTYPE_INT64), "int64"));
  STAX_RETURN_IF_ERROR(nms_check_scalar(ic, 3, "iou_threshold", float32, "float32"));
  STAX_RETURN_IF_ERROR(nms_check_scalar(ic, 4, "score_threshold", float32, "float32"));
  int64_t center_point_box = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "center_point_box", 0, &center_point_box));
  if (center_point_box != 0 && center_point_box != 1) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'center_point_box' is %lld; it must be 0 (corners y1, "
                            "x1, y2, x2) or 1 (x_center, y_center, width, height)",
                            (long long)center_point_box);
  }

  int64_t per_class = stax_shape_dim_upper(ic, boxes.dims[1]);
  stax_shape_operand_t max_operand;
  bool has_max = false;
  stax_shape_read_input(ic, 2, &max_operand, &has_max);
  if (!has_max) {
    per_class = 0;
  } else {
    stax_shape_vector_t max_vector;
    int64_t limit = 0;
    STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 2, "max_output_boxes_per_class", &max_vector));
    if (max_vector.known && max_vector.count == 1 &&
        stax_shape_vector_const(ic, &max_vector, 0, &limit)) {
      if (limit < 0) limit = 0; /* a negative maximum selects nothing, as 0 does */
      if (limit < per_class) per_class = limit;
    }
  }
  int64_t upper = saturating_mul(saturating_mul(stax_shape_dim_upper(ic, boxes.dims[0]),
                                                stax_shape_dim_upper(ic, scores.dims[1])),
                                 per_class);
  const stax_dim_t* dims[2] = {NULL, stax_dim_const(ic->shape, 3)};
  if (upper == 0) {
    dims[0] = stax_dim_const(ic->shape, 0);
  } else {
    STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, 0, 0, upper, &dims[0]));
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_output(ic, 0, STAX_DTYPE_INT64, 2, dims);
}

/* RoiAlign(X[N, C, H, W], rois[R, 4], batch_indices[R]) -> Y[R, C, output_height,
 * output_width] in X's dtype. */
stax_status_t stax_shape_roi_align(stax_shape_infer_t* ic) {
  stax_shape_operand_t x, rois, batch_indices;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &rois));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 2, &batch_indices));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &x, STAX_DTYPES_FLOAT,
                                                "a floating-point type"));
  STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &x, &rois));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &batch_indices,
                                                STAX_DTYPE_BIT(STAX_DTYPE_INT64), "int64"));
  if (x.rank != 4) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 0 '%s' has rank %d; RoiAlign needs X as [N, C, H, W], rank 4",
                            x.name, x.rank);
  }
  if (rois.rank != 2) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 1 '%s' has rank %d; rois are [num_rois, 4], rank 2",
                            rois.name, rois.rank);
  }
  if (batch_indices.rank != 1) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 2 '%s' has rank %d; batch_indices are [num_rois], rank 1",
                            batch_indices.name, batch_indices.rank);
  }
  STAX_RETURN_IF_ERROR(detection_require_dim(
      ic, &rois, 1, 4, "each roi has 4 coordinates (x1, y1, x2, y2)"));
  STAX_RETURN_IF_ERROR(
      stax_shape_require_equal_dims(ic, "num_rois", &rois, 0, &batch_indices, 0));
  int64_t output_height = 1, output_width = 1, sampling_ratio = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "output_height", 1, &output_height));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "output_width", 1, &output_width));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "sampling_ratio", 0, &sampling_ratio));
  if (output_height <= 0 || output_width <= 0 ||
      output_height > STAX_ROI_ALIGN_MAX_SAMPLES_PER_AXIS ||
      output_width > STAX_ROI_ALIGN_MAX_SAMPLES_PER_AXIS) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attributes output_height = %lld and output_width = %lld; both "
                            "must be in [1, %lld]",
                            (long long)output_height, (long long)output_width,
                            (long long)STAX_ROI_ALIGN_MAX_SAMPLES_PER_AXIS);
  }
  if (sampling_ratio < 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'sampling_ratio' is %lld; it must be >= 0 (0: adaptive)",
                            (long long)sampling_ratio);
  }
  const char* mode = NULL;
  const char* transform = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "mode", "avg", &mode));
  STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "coordinate_transformation_mode",
                                             "half_pixel", &transform));
  if (strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'mode' is '%s'; it must be 'avg' or 'max'", mode);
  }
  if (strcmp(transform, "half_pixel") != 0 && strcmp(transform, "output_half_pixel") != 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'coordinate_transformation_mode' is '%s'; it must be "
                            "'half_pixel' or 'output_half_pixel'",
                            transform);
  }
  const stax_dim_t* dims[4] = {rois.dims[0], x.dims[1], stax_dim_const(ic->shape, output_height),
                               stax_dim_const(ic->shape, output_width)};
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_output(ic, 0, x.dtype, 4, dims);
}
