/* Object-detection kernels: NonMaxSuppression and RoiAlign.
 *
 * Both follow ONNX's definitions with the arithmetic ONNX Runtime and onnx's reference
 * evaluator use, so that results match theirs exactly, not only within a tolerance:
 *
 * NonMaxSuppression works in float32 (the only type ONNX allows). Per batch and class, the
 * boxes whose score is above score_threshold (all of them without one) are taken in order of
 * descending score, ties by ascending box index (ONNX Runtime's order); a box is kept unless
 * its IoU with a box already kept in that class is above iou_threshold, until
 * max_output_boxes_per_class are kept. The IoU test is ONNX Runtime's: boxes that do not
 * overlap (touching edges included), and boxes of zero or negative area, never suppress.
 * Corners may come in either order (center_point_box 0); NaN scores are never selected (ONNX
 * leaves them undefined; ORT's order with NaN is not a strict ordering).
 *
 * RoiAlign computes the geometry (roi corners, bins, sample points, bilinear weights) and the
 * sums in the input's precision: float for float32 and the 16-bit types, double for float64.
 * Each output bin averages (or, in max mode, takes the maximum of) a grid of bilinear samples,
 * sampling_ratio per bin side or ceil(roi side / bins) when it is 0. Max mode is ONNX
 * Runtime's: the maximum over samples of the largest of the four weighted corner values
 * (max(w1*v1, w2*v2, w3*v3, w4*v4)), not the maximum of the interpolated values. A sample
 * more than one pixel outside the image contributes 0 (ORT multiplies a zero weight by the
 * channel's first pixel: the same for finite data). The geometry is separable: a table of
 * sample rows and one of sample columns per roi, shared by every channel, which run in
 * parallel. */
#include <math.h>
#include <string.h>

#include "kernels/kernel.h"

/* ---- shared helpers ------------------------------------------------------------------------ */

/* A float scalar input (rank 0 or one element) as float; *out_present false when absent. */
static stax_status_t read_float_scalar(const stax_kernel_call_t* call, int32_t i,
                                       const char* role, float* out_value, bool* out_present) {
  *out_present = false;
  const stax_tensor_t* t = stax_kernel_input(call, i);
  if (!t) return STAX_OK;
  if (t->dtype != STAX_DTYPE_FLOAT32)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input %d (%s) must be float32, got %s",
                             i, role, stax_dtype_name(t->dtype));
  if (t->rank > 1 || stax_tensor_element_count(t) != 1)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input %d (%s) must be a scalar, got rank %d with %lld elements", i,
                             role, t->rank, (long long)stax_tensor_element_count(t));
  *out_value = ((const float*)stax_buffer_data(t->buffer))[t->offset];
  *out_present = true;
  return STAX_OK;
}

/* ---- NonMaxSuppression --------------------------------------------------------------------- */

/* A box as the IoU test sees it: extents with min <= max (for well-formed boxes) and area. */
typedef struct nms_box_t {
  float x_min, x_max, y_min, y_max, area;
} nms_box_t;

typedef struct nms_candidate_t {
  float score;
  int64_t index;
} nms_candidate_t;

/* True when a comes before b: descending score, then ascending index (a total order: NaN
 * scores are left out). */
static inline bool nms_before(const nms_candidate_t* a, const nms_candidate_t* b) {
  return a->score > b->score || (a->score == b->score && a->index < b->index);
}

/* The candidates form a binary heap with the first in order at the root, so a class costs
 * O(S + taken * log S) rather than a full sort: usually only the best few are ever looked at
 * (max_output_boxes_per_class, as ONNX Runtime's priority queue does). */
static void nms_sift_down(nms_candidate_t* heap, int64_t count, int64_t at) {
  nms_candidate_t item = heap[at];
  for (;;) {
    int64_t child = 2 * at + 1;
    if (child >= count) break;
    if (child + 1 < count && nms_before(&heap[child + 1], &heap[child])) child++;
    if (!nms_before(&heap[child], &item)) break;
    heap[at] = heap[child];
    at = child;
  }
  heap[at] = item;
}

static void nms_heapify(nms_candidate_t* heap, int64_t count) {
  for (int64_t at = count / 2 - 1; at >= 0; at--) nms_sift_down(heap, count, at);
}

/* Removes and returns the root. count > 0. */
static nms_candidate_t nms_pop(nms_candidate_t* heap, int64_t* count) {
  nms_candidate_t top = heap[0];
  heap[0] = heap[--*count];
  if (*count > 0) nms_sift_down(heap, *count, 0);
  return top;
}

/* std::max / std::min's forms, so NaN coordinates behave as in ONNX Runtime. */
static inline float nms_max(float a, float b) { return a < b ? b : a; }
static inline float nms_min(float a, float b) { return b < a ? b : a; }

static void nms_sort_pair(float a, float b, float* out_min, float* out_max) {
  if (a >= b) {
    *out_min = b;
    *out_max = a;
  } else {
    *out_min = a;
    *out_max = b;
  }
}

static nms_box_t nms_box(const float coordinates[4], bool center_point_box) {
  nms_box_t box;
  if (center_point_box) {
    /* [x_center, y_center, width, height] */
    float half_width = coordinates[2] / 2, half_height = coordinates[3] / 2;
    box.x_min = coordinates[0] - half_width;
    box.x_max = coordinates[0] + half_width;
    box.y_min = coordinates[1] - half_height;
    box.y_max = coordinates[1] + half_height;
  } else {
    /* [y1, x1, y2, x2], either diagonal */
    nms_sort_pair(coordinates[1], coordinates[3], &box.x_min, &box.x_max);
    nms_sort_pair(coordinates[0], coordinates[2], &box.y_min, &box.y_max);
  }
  box.area = (box.x_max - box.x_min) * (box.y_max - box.y_min);
  return box;
}

/* True when `candidate` overlaps `kept` by more than the threshold. */
static bool nms_suppresses(const nms_box_t* candidate, const nms_box_t* kept, float threshold) {
  float left = nms_max(candidate->x_min, kept->x_min);
  float right = nms_min(candidate->x_max, kept->x_max);
  if (right <= left) return false;
  float top = nms_max(candidate->y_min, kept->y_min);
  float bottom = nms_min(candidate->y_max, kept->y_max);
  if (bottom <= top) return false;
  float intersection = (right - left) * (bottom - top);
  if (intersection <= 0) return false;
  float union_area = candidate->area + kept->area - intersection;
  if (candidate->area <= 0 || kept->area <= 0 || union_area <= 0) return false;
  return intersection / union_area > threshold;
}

typedef struct nms_rows_t {
  int64_t* data; /* (batch, class, box) triples */
  int64_t count;
  int64_t capacity;
} nms_rows_t;

static stax_status_t nms_rows_push(const stax_kernel_call_t* call, nms_rows_t* rows,
                                   int64_t batch, int64_t class_index, int64_t box) {
  if (rows->count == rows->capacity) {
    int64_t capacity = rows->capacity ? rows->capacity * 2 : 64;
    void* data = rows->data;
    STAX_RETURN_IF_ERROR(stax_allocator_realloc(call->allocator,
                                                (size_t)rows->capacity * 3 * sizeof(int64_t),
                                                (size_t)capacity * 3 * sizeof(int64_t), &data));
    rows->data = data;
    rows->capacity = capacity;
  }
  int64_t* row = rows->data + rows->count * 3;
  row[0] = batch;
  row[1] = class_index;
  row[2] = box;
  rows->count++;
  return STAX_OK;
}

static stax_status_t nms_check_inputs(const stax_kernel_call_t* call, const stax_tensor_t* boxes,
                                      const stax_tensor_t* scores) {
  if (!boxes || !scores)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d (%s) is missing",
                             boxes ? 1 : 0, boxes ? "scores" : "boxes");
  if (boxes->dtype != STAX_DTYPE_FLOAT32 || scores->dtype != STAX_DTYPE_FLOAT32)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input %d (%s) must be float32, got %s",
                             boxes->dtype != STAX_DTYPE_FLOAT32 ? 0 : 1,
                             boxes->dtype != STAX_DTYPE_FLOAT32 ? "boxes" : "scores",
                             stax_dtype_name(boxes->dtype != STAX_DTYPE_FLOAT32 ? boxes->dtype
                                                                                : scores->dtype));
  if (boxes->rank != 3)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 (boxes) has rank %d; boxes are [num_batches, "
                             "spatial_dimension, 4]",
                             boxes->rank);
  if (scores->rank != 3)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 1 (scores) has rank %d; scores are [num_batches, "
                             "num_classes, spatial_dimension]",
                             scores->rank);
  if (boxes->dims[2] != 4)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 (boxes) dim 2 is %lld; each box has 4 coordinates",
                             (long long)boxes->dims[2]);
  if (boxes->dims[0] != scores->dims[0])
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "num_batches mismatch: input 0 (boxes) dim 0 is %lld but input 1 "
                             "(scores) dim 0 is %lld",
                             (long long)boxes->dims[0], (long long)scores->dims[0]);
  if (boxes->dims[1] != scores->dims[2])
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "spatial_dimension mismatch: input 0 (boxes) dim 1 is %lld but "
                             "input 1 (scores) dim 2 is %lld",
                             (long long)boxes->dims[1], (long long)scores->dims[2]);
  return STAX_OK;
}

stax_status_t stax_kernel_NonMaxSuppression(stax_kernel_call_t* call) {
  const stax_tensor_t* boxes = stax_kernel_input(call, 0);
  const stax_tensor_t* scores = stax_kernel_input(call, 1);
  STAX_RETURN_IF_ERROR(nms_check_inputs(call, boxes, scores));
  int64_t center_point_box = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "center_point_box", 0, &center_point_box));
  if (center_point_box != 0 && center_point_box != 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'center_point_box' is %lld; it must be 0 or 1",
                             (long long)center_point_box);
  /* Without max_output_boxes_per_class ONNX selects nothing; a negative one is 0 too. */
  int64_t max_per_class = 0;
  const stax_tensor_t* max_tensor = stax_kernel_input(call, 2);
  if (max_tensor) {
    int64_t count = 0;
    STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, max_tensor,
                                               "input 2 (max_output_boxes_per_class)", 1,
                                               &max_per_class, &count));
    if (count != 1)
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 2 (max_output_boxes_per_class) must hold one value, has "
                               "%lld",
                               (long long)count);
    if (max_per_class < 0) max_per_class = 0;
  }
  float iou_threshold = 0, score_threshold = 0; /* an absent iou_threshold is 0 */
  bool has_iou = false, has_score_threshold = false;
  STAX_RETURN_IF_ERROR(read_float_scalar(call, 3, "iou_threshold", &iou_threshold, &has_iou));
  STAX_RETURN_IF_ERROR(read_float_scalar(call, 4, "score_threshold", &score_threshold,
                                         &has_score_threshold));

  /* ONNX Runtime refuses thresholds outside [0, 1] (and NaN); so does stax. */
  if (has_iou && !(iou_threshold >= 0 && iou_threshold <= 1))
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 3 (iou_threshold) is %g; it must be in [0, 1]",
                             (double)iou_threshold);
  int64_t batches = boxes->dims[0], spatial = boxes->dims[1], classes = scores->dims[1];
  int64_t keep_limit = max_per_class < spatial ? max_per_class : spatial;
  const float* box_data = stax_buffer_data(boxes->buffer);
  const float* score_data = stax_buffer_data(scores->buffer);
  nms_box_t* batch_boxes = NULL;
  nms_candidate_t* candidates = NULL;
  int64_t* kept = NULL;
  nms_rows_t rows = {0};
  stax_status_t status = STAX_OK;
  size_t spatial_slots = (size_t)(spatial > 0 ? spatial : 1);
  if (keep_limit > 0 && classes > 0) {
    STAX_GOTO_IF_ERROR(status,
                       stax_allocator_malloc(call->allocator, spatial_slots * sizeof(nms_box_t),
                                             (void**)&batch_boxes),
                       cleanup);
    STAX_GOTO_IF_ERROR(status,
                       stax_allocator_malloc(call->allocator,
                                             spatial_slots * sizeof(nms_candidate_t),
                                             (void**)&candidates),
                       cleanup);
    STAX_GOTO_IF_ERROR(status,
                       stax_allocator_malloc(call->allocator, spatial_slots * sizeof(int64_t),
                                             (void**)&kept),
                       cleanup);
  }
  for (int64_t b = 0; b < batches && keep_limit > 0 && classes > 0; b++) {
    for (int64_t s = 0; s < spatial; s++) {
      float coordinates[4];
      for (int32_t k = 0; k < 4; k++)
        coordinates[k] = box_data[boxes->offset + b * boxes->strides[0] +
                                  s * boxes->strides[1] + k * boxes->strides[2]];
      batch_boxes[s] = nms_box(coordinates, center_point_box == 1);
    }
    for (int64_t c = 0; c < classes; c++) {
      int64_t candidate_count = 0;
      for (int64_t s = 0; s < spatial; s++) {
        float score = score_data[scores->offset + b * scores->strides[0] +
                                 c * scores->strides[1] + s * scores->strides[2]];
        if (score != score) continue;
        if (has_score_threshold && !(score > score_threshold)) continue;
        candidates[candidate_count].score = score;
        candidates[candidate_count].index = s;
        candidate_count++;
      }
      nms_heapify(candidates, candidate_count);
      int64_t kept_count = 0;
      while (candidate_count > 0 && kept_count < keep_limit) {
        nms_candidate_t next = nms_pop(candidates, &candidate_count);
        const nms_box_t* box = &batch_boxes[next.index];
        bool suppressed = false;
        for (int64_t k = 0; k < kept_count && !suppressed; k++)
          suppressed = nms_suppresses(box, &batch_boxes[kept[k]], iou_threshold);
        if (suppressed) continue;
        kept[kept_count++] = next.index;
        STAX_GOTO_IF_ERROR(status, nms_rows_push(call, &rows, b, c, next.index), cleanup);
      }
    }
  }
  {
    int64_t dims[2] = {rows.count, 3};
    stax_tensor_t* out = NULL;
    STAX_GOTO_IF_ERROR(status, stax_kernel_output(call, 0, STAX_DTYPE_INT64, 2, dims, &out),
                       cleanup);
    if (rows.count > 0)
      memcpy(stax_tensor_data(out), rows.data, (size_t)rows.count * 3 * sizeof(int64_t));
  }
cleanup:
  if (batch_boxes)
    stax_allocator_free(call->allocator, batch_boxes, spatial_slots * sizeof(nms_box_t));
  if (candidates)
    stax_allocator_free(call->allocator, candidates, spatial_slots * sizeof(nms_candidate_t));
  if (kept) stax_allocator_free(call->allocator, kept, spatial_slots * sizeof(int64_t));
  if (rows.data)
    stax_allocator_free(call->allocator, rows.data, (size_t)rows.capacity * 3 * sizeof(int64_t));
  return status;
}

/* ---- RoiAlign ------------------------------------------------------------------------------ */

/* Most sample rows (output_height * grid height) or columns one roi may need (kernel.h);
 * ONNX Runtime would try to allocate whatever a roi asks for. */
#define ROI_MAX_SAMPLES_PER_AXIS STAX_ROI_ALIGN_MAX_SAMPLES_PER_AXIS

/* One sample row (or column): the two pixel rows it interpolates between and their weights
 * (low * low_weight + high * high_weight); valid false when the sample is more than a pixel
 * outside the image (it then contributes 0). */
typedef struct roi_sample_f32_t {
  int64_t low, high;
  float low_weight, high_weight;
  bool valid;
} roi_sample_f32_t;

typedef struct roi_sample_f64_t {
  int64_t low, high;
  double low_weight, high_weight;
  bool valid;
} roi_sample_f64_t;

/* What every roi shares. */
typedef struct roi_params_t {
  int64_t height, width, channels;
  int64_t output_height, output_width;
  int64_t sampling_ratio; /* 0: adaptive */
  float spatial_scale;
  bool half_pixel, max_mode;
} roi_params_t;

/* One roi's geometry: its sample grid per bin and the tables (rows[output_height * grid_h],
 * columns[output_width * grid_w]). */
typedef struct roi_geometry_t {
  int64_t grid_h, grid_w;
  int64_t count; /* the average's divisor: max(grid_h * grid_w, 1) */
  void* rows;
  void* columns;
} roi_geometry_t;

/* The per-channel work of one roi. */
typedef struct roi_task_t {
  const roi_params_t* params;
  const roi_geometry_t* geometry;
  const stax_tensor_t* x;
  int64_t batch;
  stax_dtype_t out_dtype;
  void* out; /* the roi's [C, oh, ow] block of the contiguous output */
} roi_task_t;

static inline float roi_load_f32(stax_dtype_t dtype, const void* base, int64_t offset) {
  if (dtype == STAX_DTYPE_FLOAT32) return ((const float*)base)[offset];
  if (dtype == STAX_DTYPE_FLOAT16) return stax_f16_to_f32(((const uint16_t*)base)[offset]);
  return stax_bf16_to_f32(((const uint16_t*)base)[offset]);
}

static inline void roi_store_f32(stax_dtype_t dtype, void* base, int64_t index, float value) {
  if (dtype == STAX_DTYPE_FLOAT32) {
    ((float*)base)[index] = value;
  } else if (dtype == STAX_DTYPE_FLOAT16) {
    ((uint16_t*)base)[index] = stax_f32_to_f16(value);
  } else {
    ((uint16_t*)base)[index] = stax_f32_to_bf16(value);
  }
}

/* The sample grid of one bin side: sampling_ratio, or ceil(extent / bins) when it is 0; 0
 * for an empty, negative or NaN extent (no samples: the bin is 0). *out_too_large when the
 * grid exceeds the table limit. */
static int64_t roi_grid(int64_t sampling_ratio, double extent_over_bins, int64_t bins,
                        bool* out_too_large) {
  double grid = sampling_ratio > 0 ? (double)sampling_ratio : ceil(extent_over_bins);
  if (!(grid > 0)) return 0;
  if (grid * (double)bins > (double)ROI_MAX_SAMPLES_PER_AXIS) {
    *out_too_large = true;
    return 0;
  }
  return (int64_t)grid;
}

/* Instantiates the geometry for one compute type T: roi_axis_T (a sample table) and
 * roi_geometry_T. The expressions keep ONNX Runtime's order of operations, which decides the
 * last bit and which pixel a sample lands on. */
#define ROI_MAX(a, b) ((a) < (b) ? (b) : (a))
#define ROI_DEFINE(SUFFIX, T, CEIL)                                                            \
  static void roi_axis_##SUFFIX(T start, T bin_size, int64_t bins, int64_t grid, int64_t size,  \
                                int64_t stride, roi_sample_##SUFFIX##_t* samples) {             \
    for (int64_t p = 0; p < bins; p++) {                                                        \
      for (int64_t i = 0; i < grid; i++) {                                                      \
        roi_sample_##SUFFIX##_t* sample = &samples[p * grid + i];                               \
        T at = start + (T)p * bin_size + ((T)i + (T)0.5) * bin_size / (T)grid;                  \
        memset(sample, 0, sizeof(*sample));                                                     \
        if (size <= 0 || at != at || at < (T)-1.0 || at > (T)size) continue;                    \
        if (at <= 0) at = 0;                                                                    \
        int64_t low = (int64_t)at, high = 0;                                                    \
        if (low >= size - 1) {                                                                  \
          high = low = size - 1;                                                                \
          at = (T)low;                                                                          \
        } else {                                                                                \
          high = low + 1;                                                                       \
        }                                                                                       \
        T fraction = at - (T)low;                                                               \
        sample->low = low * stride;                                                             \
        sample->high = high * stride;                                                           \
        sample->high_weight = fraction;                                                         \
        sample->low_weight = (T)1. - fraction;                                                  \
        sample->valid = true;                                                                   \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
                                                                                                \
  /* Corners, bins and grid of roi `coordinates` (x1, y1, x2, y2); the tables are filled only  \
   * when `fill`. *out_too_large when the grid exceeds the limit. */                           \
  static void roi_geometry_##SUFFIX(const roi_params_t* params, const T coordinates[4],        \
                                    const int64_t* strides, bool fill,                          \
                                    roi_geometry_t* geometry, bool* out_too_large) {            \
    T offset = params->half_pixel ? (T)0.5 : (T)0.0;                                            \
    T scale = (T)params->spatial_scale;                                                         \
    T start_w = coordinates[0] * scale - offset;                                                \
    T start_h = coordinates[1] * scale - offset;                                                \
    T end_w = coordinates[2] * scale - offset;                                                  \
    T end_h = coordinates[3] * scale - offset;                                                  \
    T roi_width = end_w - start_w;                                                              \
    T roi_height = end_h - start_h;                                                             \
    if (!params->half_pixel) {                                                                  \
      /* output_half_pixel (opset 10) makes malformed rois at least 1 x 1 */                    \
      roi_width = ROI_MAX(roi_width, (T)1.);                                                    \
      roi_height = ROI_MAX(roi_height, (T)1.);                                                  \
    }                                                                                           \
    T bin_h = roi_height / (T)params->output_height;                                            \
    T bin_w = roi_width / (T)params->output_width;                                              \
    *out_too_large = false;                                                                     \
    geometry->grid_h = roi_grid(params->sampling_ratio,                                         \
                                (double)CEIL(roi_height / (T)params->output_height),            \
                                params->output_height, out_too_large);                          \
    geometry->grid_w = roi_grid(params->sampling_ratio,                                         \
                                (double)CEIL(roi_width / (T)params->output_width),              \
                                params->output_width, out_too_large);                           \
    int64_t count = geometry->grid_h * geometry->grid_w;                                        \
    geometry->count = count > 1 ? count : 1;                                                    \
    if (!fill || *out_too_large) return;                                                        \
    roi_axis_##SUFFIX(start_h, bin_h, params->output_height, geometry->grid_h, params->height,  \
                      strides[2], geometry->rows);                                              \
    roi_axis_##SUFFIX(start_w, bin_w, params->output_width, geometry->grid_w, params->width,    \
                      strides[3], geometry->columns);                                           \
  }                                                                                             \

/* Instantiates roi_channels_NAME, the parallel-for task over one roi's channels, for compute
 * type T reading X through LOAD(data, offset) and writing through STORE(out, index, value).
 * The sample tables hold element offsets (index x stride), so the loops only add. */
#define ROI_DEFINE_CHANNELS(NAME, SUFFIX, T, LOAD, STORE)                                       \
  static void roi_channels_##NAME(void* opaque, int64_t begin, int64_t end) {                   \
    const roi_task_t* task = opaque;                                                            \
    const roi_params_t* params = task->params;                                                  \
    const roi_geometry_t* geometry = task->geometry;                                            \
    const roi_sample_##SUFFIX##_t* rows = geometry->rows;                                       \
    const roi_sample_##SUFFIX##_t* columns = geometry->columns;                                 \
    const stax_tensor_t* x = task->x;                                                           \
    const void* data = stax_buffer_data(x->buffer);                                             \
    stax_dtype_t dtype = x->dtype;                                                              \
    int64_t grid_h = geometry->grid_h, grid_w = geometry->grid_w;                               \
    int64_t output_width = params->output_width;                                                \
    int64_t bins = params->output_height * output_width;                                        \
    T divisor = (T)geometry->count;                                                             \
    (void)dtype;                                                                                \
    for (int64_t c = begin; c < end; c++) {                                                     \
      int64_t base = x->offset + task->batch * x->strides[0] + c * x->strides[1];               \
      for (int64_t ph = 0; ph < params->output_height; ph++) {                                  \
        const roi_sample_##SUFFIX##_t* bin_rows = &rows[ph * grid_h];                           \
        for (int64_t pw = 0; pw < output_width; pw++) {                                         \
          const roi_sample_##SUFFIX##_t* bin_columns = &columns[pw * grid_w];                   \
          T value = 0;                                                                          \
          bool have = false; /* max mode: value holds a sample */                               \
          for (int64_t iy = 0; iy < grid_h; iy++) {                                             \
            const roi_sample_##SUFFIX##_t* row = &bin_rows[iy];                                 \
            if (!row->valid) {                                                                  \
              /* every sample of this row contributes 0 */                                      \
              if (params->max_mode && grid_w > 0) {                                             \
                value = have ? ROI_MAX(value, (T)0) : (T)0;                                     \
                have = true;                                                                    \
              }                                                                                 \
              continue;                                                                         \
            }                                                                                   \
            int64_t low_row = base + row->low, high_row = base + row->high;                     \
            T hy = row->low_weight, ly = row->high_weight;                                      \
            if (!params->max_mode) {                                                            \
              for (int64_t ix = 0; ix < grid_w; ix++) {                                         \
                const roi_sample_##SUFFIX##_t* column = &bin_columns[ix];                       \
                if (!column->valid) continue;                                                   \
                T hx = column->low_weight, lx = column->high_weight;                            \
                value += hy * hx * LOAD(data, low_row + column->low) +                          \
                         hy * lx * LOAD(data, low_row + column->high) +                         \
                         ly * hx * LOAD(data, high_row + column->low) +                         \
                         ly * lx * LOAD(data, high_row + column->high);                         \
              }                                                                                 \
              continue;                                                                         \
            }                                                                                   \
            for (int64_t ix = 0; ix < grid_w; ix++) {                                           \
              const roi_sample_##SUFFIX##_t* column = &bin_columns[ix];                         \
              T sample = 0;                                                                     \
              if (column->valid) {                                                              \
                T hx = column->low_weight, lx = column->high_weight;                            \
                T v1 = hy * hx * LOAD(data, low_row + column->low);                             \
                T v2 = hy * lx * LOAD(data, low_row + column->high);                            \
                T v3 = ly * hx * LOAD(data, high_row + column->low);                            \
                T v4 = ly * lx * LOAD(data, high_row + column->high);                           \
                sample = ROI_MAX(ROI_MAX(ROI_MAX(v1, v2), v3), v4);                             \
              }                                                                                 \
              value = have ? ROI_MAX(value, sample) : sample;                                   \
              have = true;                                                                      \
            }                                                                                   \
          }                                                                                     \
          if (!params->max_mode) value /= divisor;                                              \
          STORE(task->out, c * bins + ph * output_width + pw, value);                           \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
  }

ROI_DEFINE(f32, float, ceilf)
ROI_DEFINE(f64, double, ceil)

#define ROI_LOAD_FLOAT(data, offset) (((const float*)(data))[offset])
#define ROI_LOAD_HALF(data, offset) roi_load_f32(dtype, data, offset)
#define ROI_LOAD_DOUBLE(data, offset) (((const double*)(data))[offset])
#define ROI_STORE_FLOAT(out, index, value) (((float*)(out))[index] = (value))
#define ROI_STORE_HALF(out, index, value) roi_store_f32(task->out_dtype, out, index, value)
#define ROI_STORE_DOUBLE(out, index, value) (((double*)(out))[index] = (value))
ROI_DEFINE_CHANNELS(f32, f32, float, ROI_LOAD_FLOAT, ROI_STORE_FLOAT)
ROI_DEFINE_CHANNELS(half, f32, float, ROI_LOAD_HALF, ROI_STORE_HALF)
ROI_DEFINE_CHANNELS(f64, f64, double, ROI_LOAD_DOUBLE, ROI_STORE_DOUBLE)

/* Roi r's coordinates in its compute type: out_f64 for float64 rois, out_f32 otherwise. */
static void roi_coordinates(const stax_tensor_t* rois, int64_t r, float* out_f32,
                            double* out_f64) {
  const void* data = stax_buffer_data(rois->buffer);
  for (int32_t k = 0; k < 4; k++) {
    int64_t offset = rois->offset + r * rois->strides[0] + k * rois->strides[1];
    if (rois->dtype == STAX_DTYPE_FLOAT64) {
      out_f64[k] = ((const double*)data)[offset];
    } else {
      out_f32[k] = roi_load_f32(rois->dtype, data, offset);
    }
  }
}

static stax_status_t roi_read_params(const stax_kernel_call_t* call, const stax_tensor_t* x,
                                     roi_params_t* out_params) {
  int64_t output_height = 1, output_width = 1, sampling_ratio = 0;
  float spatial_scale = 1.0f;
  const char* mode = NULL;
  const char* transform = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "output_height", 1, &output_height));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "output_width", 1, &output_width));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "sampling_ratio", 0, &sampling_ratio));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "spatial_scale", 1.0f, &spatial_scale));
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "mode", "avg", &mode));
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "coordinate_transformation_mode",
                                             "half_pixel", &transform));
  if (output_height <= 0 || output_width <= 0 || output_height > ROI_MAX_SAMPLES_PER_AXIS ||
      output_width > ROI_MAX_SAMPLES_PER_AXIS)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attributes output_height = %lld and output_width = %lld; both "
                             "must be in [1, %lld]",
                             (long long)output_height, (long long)output_width,
                             (long long)ROI_MAX_SAMPLES_PER_AXIS);
  if (sampling_ratio < 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'sampling_ratio' is %lld; it must be >= 0 (0: adaptive)",
                             (long long)sampling_ratio);
  bool max_mode = strcmp(mode, "max") == 0;
  if (!max_mode && strcmp(mode, "avg") != 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'mode' is '%s'; it must be 'avg' or 'max'", mode);
  bool half_pixel = strcmp(transform, "half_pixel") == 0;
  if (!half_pixel && strcmp(transform, "output_half_pixel") != 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'coordinate_transformation_mode' is '%s'; it must be "
                             "'half_pixel' or 'output_half_pixel'",
                             transform);
  *out_params = (roi_params_t){
      .height = x->dims[2],
      .width = x->dims[3],
      .channels = x->dims[1],
      .output_height = output_height,
      .output_width = output_width,
      .sampling_ratio = sampling_ratio,
      .spatial_scale = spatial_scale,
      .half_pixel = half_pixel,
      .max_mode = max_mode,
  };
  return STAX_OK;
}

static stax_status_t roi_check_inputs(const stax_kernel_call_t* call, const stax_tensor_t* x,
                                      const stax_tensor_t* rois,
                                      const stax_tensor_t* batch_indices) {
  if (!x || !rois || !batch_indices)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d (%s) is missing",
                             !x ? 0 : (!rois ? 1 : 2),
                             !x ? "X" : (!rois ? "rois" : "batch_indices"));
  if (!stax_dtype_is_float(x->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 (X) must be a floating-point tensor, got %s",
                             stax_dtype_name(x->dtype));
  if (rois->dtype != x->dtype)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 1 (rois) has dtype %s; it must match input 0 (X), %s",
                             stax_dtype_name(rois->dtype), stax_dtype_name(x->dtype));
  if (batch_indices->dtype != STAX_DTYPE_INT64)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 2 (batch_indices) must be int64, got %s",
                             stax_dtype_name(batch_indices->dtype));
  if (x->rank != 4)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 (X) has rank %d; RoiAlign needs [N, C, H, W], rank 4",
                             x->rank);
  if (rois->rank != 2)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 1 (rois) has rank %d; rois are [num_rois, 4]", rois->rank);
  if (rois->dims[1] != 4)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 1 (rois) dim 1 is %lld; each roi has 4 coordinates (x1, "
                             "y1, x2, y2)",
                             (long long)rois->dims[1]);
  if (batch_indices->rank != 1)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 2 (batch_indices) has rank %d; it must be [num_rois]",
                             batch_indices->rank);
  if (batch_indices->dims[0] != rois->dims[0])
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "num_rois mismatch: input 1 (rois) dim 0 is %lld but input 2 "
                             "(batch_indices) dim 0 is %lld",
                             (long long)rois->dims[0], (long long)batch_indices->dims[0]);
  const int64_t* indices = stax_buffer_data(batch_indices->buffer);
  for (int64_t r = 0; r < rois->dims[0]; r++) {
    int64_t batch = indices[batch_indices->offset + r * batch_indices->strides[0]];
    if (batch < 0 || batch >= x->dims[0])
      return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                               "input 2 (batch_indices) element %lld is %lld, outside input 0 "
                               "(X) dim 0 of size %lld",
                               (long long)r, (long long)batch, (long long)x->dims[0]);
  }
  return STAX_OK;
}

/* Work below which one roi's channels run on the calling thread (samples x channels). */
#define ROI_PARALLEL_GRAIN 16384

stax_status_t stax_kernel_RoiAlign(stax_kernel_call_t* call) {
  const stax_tensor_t* x = stax_kernel_input(call, 0);
  const stax_tensor_t* rois = stax_kernel_input(call, 1);
  const stax_tensor_t* batch_indices = stax_kernel_input(call, 2);
  STAX_RETURN_IF_ERROR(roi_check_inputs(call, x, rois, batch_indices));
  roi_params_t params;
  STAX_RETURN_IF_ERROR(roi_read_params(call, x, &params));
  bool wide = x->dtype == STAX_DTYPE_FLOAT64;
  stax_parallel_fn channels = wide ? roi_channels_f64
                              : x->dtype == STAX_DTYPE_FLOAT32 ? roi_channels_f32
                                                               : roi_channels_half;
  int64_t roi_count = rois->dims[0];
  /* First pass: every roi's grid, so a roi that asks too much fails before any work. */
  int64_t most_rows = 1, most_columns = 1;
  for (int64_t r = 0; r < roi_count; r++) {
    float c32[4] = {0};
    double c64[4] = {0};
    roi_coordinates(rois, r, c32, c64);
    roi_geometry_t geometry = {0};
    bool too_large = false;
    if (wide) {
      roi_geometry_f64(&params, c64, x->strides, false, &geometry, &too_large);
    } else {
      roi_geometry_f32(&params, c32, x->strides, false, &geometry, &too_large);
    }
    if (too_large)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "input 1 (rois) row %lld needs more than %lld sample points "
                               "along one axis (output bins x sampling grid; sampling_ratio "
                               "%lld, spatial_scale %g)",
                               (long long)r, (long long)ROI_MAX_SAMPLES_PER_AXIS,
                               (long long)params.sampling_ratio, (double)params.spatial_scale);
    int64_t row_samples = geometry.grid_h * params.output_height;
    int64_t column_samples = geometry.grid_w * params.output_width;
    if (row_samples > most_rows) most_rows = row_samples;
    if (column_samples > most_columns) most_columns = column_samples;
  }
  int64_t dims[4] = {roi_count, params.channels, params.output_height, params.output_width};
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, x->dtype, 4, dims, &out));
  if (stax_tensor_element_count(out) == 0) return STAX_OK;
  size_t sample_size = wide ? sizeof(roi_sample_f64_t) : sizeof(roi_sample_f32_t);
  size_t rows_bytes = (size_t)most_rows * sample_size;
  size_t columns_bytes = (size_t)most_columns * sample_size;
  void* rows = NULL;
  void* columns = NULL;
  stax_status_t status = stax_allocator_malloc(call->allocator, rows_bytes, &rows);
  if (status == STAX_OK) status = stax_allocator_malloc(call->allocator, columns_bytes, &columns);
  if (status != STAX_OK) {
    stax_kernel_release_outputs(call);
    goto cleanup;
  }
  const int64_t* indices = stax_buffer_data(batch_indices->buffer);
  size_t out_size = stax_dtype_size(x->dtype);
  int64_t block = params.channels * params.output_height * params.output_width;
  for (int64_t r = 0; r < roi_count; r++) {
    float c32[4] = {0};
    double c64[4] = {0};
    roi_coordinates(rois, r, c32, c64);
    roi_geometry_t geometry = {.rows = rows, .columns = columns};
    bool too_large = false;
    if (wide) {
      roi_geometry_f64(&params, c64, x->strides, true, &geometry, &too_large);
    } else {
      roi_geometry_f32(&params, c32, x->strides, true, &geometry, &too_large);
    }
    roi_task_t task = {
        .params = &params,
        .geometry = &geometry,
        .x = x,
        .batch = indices[batch_indices->offset + r * batch_indices->strides[0]],
        .out_dtype = x->dtype,
        .out = (char*)stax_tensor_data(out) + (size_t)(r * block) * out_size,
    };
    int64_t per_channel = params.output_height * params.output_width *
                          (geometry.count > 0 ? geometry.count : 1);
    int64_t grain = per_channel >= ROI_PARALLEL_GRAIN ? 1 : ROI_PARALLEL_GRAIN / per_channel;
    stax_parallel_for(call->pool, params.channels, grain, channels, &task);
  }
cleanup:
  if (rows) stax_allocator_free(call->allocator, rows, rows_bytes);
  if (columns) stax_allocator_free(call->allocator, columns, columns_bytes);
  return status;
}
