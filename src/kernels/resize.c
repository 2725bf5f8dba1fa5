/* Resize: nearest, N-d linear and cubic interpolation with every ONNX coordinate
 * transformation (half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners,
 * asymmetric, tf_crop_and_resize), scales or sizes (with keep_aspect_ratio_policy), and the
 * opset 18 axes attribute. Antialiasing is not implemented and says so.
 *
 * The interpolation is separable: for every output coordinate along every axis, a small table
 * holds the input taps (element offsets, already clamped to the edge) and their weights, so an
 * output element is the sum over the tensor product of its axes' taps. Tables follow ONNX's
 * reference implementation: linear and cubic read edge-padded neighbours, cubic can exclude
 * outside taps and renormalize, tf_crop_and_resize writes extrapolation_value wherever a
 * coordinate falls outside the input. Nearest moves element bytes (exact for every dtype);
 * linear and cubic accumulate in double and round once (to nearest for integer outputs). An
 * axis that is not resized gets one tap of weight 1, so a 2-D resize of NCHW costs 4 or 16
 * taps per element, not 2^4 or 4^4. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/movement.h"

typedef enum resize_mode_t { RESIZE_NEAREST, RESIZE_LINEAR, RESIZE_CUBIC } resize_mode_t;

typedef enum coordinate_mode_t {
  COORDINATE_HALF_PIXEL,
  COORDINATE_HALF_PIXEL_SYMMETRIC,
  COORDINATE_PYTORCH_HALF_PIXEL,
  COORDINATE_ALIGN_CORNERS,
  COORDINATE_ASYMMETRIC,
  COORDINATE_TF_CROP_AND_RESIZE,
  COORDINATE_TF_HALF_PIXEL_FOR_NN /* opsets 11-12 only */
} coordinate_mode_t;

typedef enum nearest_mode_t {
  NEAREST_ROUND_PREFER_FLOOR,
  NEAREST_ROUND_PREFER_CEIL,
  NEAREST_FLOOR,
  NEAREST_CEIL
} nearest_mode_t;

typedef struct resize_options_t {
  resize_mode_t mode;
  coordinate_mode_t coordinates;
  nearest_mode_t nearest;
  double cubic_a;
  bool exclude_outside;
  double extrapolation_value;
} resize_options_t;

/* Per axis: for each output coordinate, `taps` (offset, weight) pairs and an outside flag. */
typedef struct axis_taps_t {
  int32_t taps;
  int64_t* offsets; /* out_dim * taps element offsets (input index * input stride) */
  double* weights;  /* out_dim * taps */
  uint8_t* outside; /* out_dim flags: extrapolate (tf_crop_and_resize only) */
} axis_taps_t;

/* ---- options ------------------------------------------------------------------------------ */

static stax_status_t pick(const stax_kernel_call_t* call, const char* attribute, const char* value,
                          const char* const* names, int32_t count, int32_t* out_index) {
  for (int32_t k = 0; k < count; k++) {
    if (strcmp(value, names[k]) == 0) {
      *out_index = k;
      return STAX_OK;
    }
  }
  char allowed[256] = "";
  size_t used = 0;
  for (int32_t k = 0; k < count && used < sizeof(allowed); k++)
    used += (size_t)snprintf(allowed + used, sizeof(allowed) - used, "%s%s", k ? ", " : "", names[k]);
  return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute '%s' must be one of %s, got \"%s\"",
                           attribute, allowed, value);
}

static stax_status_t read_options(const stax_kernel_call_t* call, bool opset10_form,
                                  resize_options_t* options) {
  const char* text = NULL;
  int32_t index = 0;
  static const char* const modes[] = {"nearest", "linear", "cubic"};
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "mode", "nearest", &text));
  STAX_RETURN_IF_ERROR(pick(call, "mode", text, modes, 3, &index));
  options->mode = (resize_mode_t)index;
  /* Opset 10's Resize(X, scales) had no transformation attribute; it behaved as asymmetric
   * with floor for nearest (like Upsample). */
  static const char* const coordinates[] = {"half_pixel",    "half_pixel_symmetric",
                                            "pytorch_half_pixel", "align_corners",
                                            "asymmetric",    "tf_crop_and_resize",
                                            "tf_half_pixel_for_nn"};
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "coordinate_transformation_mode",
                                             opset10_form ? "asymmetric" : "half_pixel", &text));
  STAX_RETURN_IF_ERROR(pick(call, "coordinate_transformation_mode", text, coordinates, 7, &index));
  options->coordinates = (coordinate_mode_t)index;
  static const char* const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "nearest_mode",
                                             opset10_form ? "floor" : "round_prefer_floor", &text));
  STAX_RETURN_IF_ERROR(pick(call, "nearest_mode", text, nearest, 4, &index));
  options->nearest = (nearest_mode_t)index;
  float cubic_a = -0.75f, extrapolation = 0.0f;
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "cubic_coeff_a", -0.75f, &cubic_a));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "extrapolation_value", 0.0f, &extrapolation));
  options->cubic_a = cubic_a;
  options->extrapolation_value = extrapolation;
  int64_t flag = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "exclude_outside", 0, &flag));
  options->exclude_outside = flag != 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "antialias", 0, &flag));
  if (flag != 0 && options->mode != RESIZE_NEAREST)
    return stax_kernel_error(call, STAX_UNIMPLEMENTED,
                             "antialias = 1 with mode '%s' is not implemented",
                             modes[options->mode]);
  return STAX_OK;
}

/* An optional input that is present and not the empty placeholder exporters write. */
static stax_tensor_t* given_input(const stax_kernel_call_t* call, int32_t i) {
  stax_tensor_t* t = stax_kernel_input(call, i);
  return t && stax_tensor_element_count(t) > 0 ? t : NULL;
}

/* Reads a 1-D float tensor of exactly `count` values. */
static stax_status_t read_doubles(const stax_kernel_call_t* call, const stax_tensor_t* t,
                                  const char* what, int32_t count, double* values) {
  if (!stax_dtype_is_float(t->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "%s must be a float tensor, got %s", what,
                             stax_dtype_name(t->dtype));
  if (t->rank != 1 || t->dims[0] != count)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "%s is %s; %d values are needed", what,
                             stax_dims_text(t->rank, t->dims).text, count);
  const char* base = stax_buffer_data(t->buffer);
  for (int32_t k = 0; k < count; k++)
    values[k] = stax_load_as_f64(t->dtype, base, t->offset + k * t->strides[0]);
  return STAX_OK;
}

/* ---- output size and per-axis scales ------------------------------------------------------ */

typedef struct resize_geometry_t {
  int32_t rank;
  int64_t out_dims[STAX_MAX_RANK];
  double scales[STAX_MAX_RANK];
  double roi_start[STAX_MAX_RANK];
  double roi_end[STAX_MAX_RANK];
} resize_geometry_t;

static stax_status_t compute_geometry(const stax_kernel_call_t* call, const stax_tensor_t* x,
                                      bool opset10_form, coordinate_mode_t coordinates,
                                      resize_geometry_t* g) {
  int32_t rank = x->rank;
  g->rank = rank;
  for (int32_t k = 0; k < rank; k++) {
    g->out_dims[k] = x->dims[k];
    g->scales[k] = 1.0;
    g->roi_start[k] = 0.0;
    g->roi_end[k] = 1.0;
  }
  int32_t axes[STAX_MAX_RANK];
  int32_t axis_count = rank;
  for (int32_t k = 0; k < rank; k++) axes[k] = k;
  int32_t attr_count = -1;
  const int64_t* attr_axes = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(call->node, "axes", &attr_count, &attr_axes));
  if (attr_count >= 0) {
    if (attr_count > rank)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "attribute 'axes' has %d entries for input 0 of rank %d",
                               attr_count, rank);
    bool seen[STAX_MAX_RANK] = {false};
    for (int32_t k = 0; k < attr_count; k++) {
      char what[32];
      snprintf(what, sizeof(what), "axes[%d]", k);
      STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, attr_axes[k], rank, what, &axes[k]));
      if (seen[axes[k]])
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "axes[%d] = %lld repeats axis %d",
                                 k, (long long)attr_axes[k], axes[k]);
      seen[axes[k]] = true;
    }
    axis_count = attr_count;
  }

  stax_tensor_t* scales_input = given_input(call, opset10_form ? 1 : 2);
  stax_tensor_t* sizes_input = opset10_form ? NULL : given_input(call, 3);
  if (scales_input && sizes_input)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "takes scales or sizes, not both");
  if (!scales_input && !sizes_input)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "needs scales (input %d) or sizes (input 3)",
                             opset10_form ? 1 : 2);
  if (scales_input) {
    double values[STAX_MAX_RANK];
    STAX_RETURN_IF_ERROR(read_doubles(call, scales_input, "scales", axis_count, values));
    for (int32_t k = 0; k < axis_count; k++) {
      int32_t axis = axes[k];
      if (!(values[k] > 0) || isinf(values[k]))
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "scales[%d] is %g; it must be > 0", k,
                                 values[k]);
      double scaled = floor((double)x->dims[axis] * values[k]);
      if (!(scaled < 4.0e18))
        return stax_kernel_error(call, STAX_OUT_OF_RANGE, "scales[%d] = %g makes dim %d too large",
                                 k, values[k], axis);
      g->scales[axis] = values[k];
      g->out_dims[axis] = (int64_t)scaled;
    }
  } else {
    int64_t sizes[STAX_MAX_RANK];
    int64_t count = 0;
    STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, sizes_input, "sizes (input 3)", STAX_MAX_RANK,
                                               sizes, &count));
    if (count != axis_count)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "sizes has %lld entries but %d axes are resized", (long long)count,
                               axis_count);
    for (int32_t k = 0; k < axis_count; k++) {
      if (sizes[k] < 0)
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "sizes[%d] is %lld; it must be >= 0",
                                 k, (long long)sizes[k]);
    }
    const char* policy = NULL;
    STAX_RETURN_IF_ERROR(
        stax_node_attr_string(call->node, "keep_aspect_ratio_policy", "stretch", &policy));
    bool not_larger = strcmp(policy, "not_larger") == 0;
    bool not_smaller = strcmp(policy, "not_smaller") == 0;
    if (!not_larger && !not_smaller && strcmp(policy, "stretch") != 0)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "attribute 'keep_aspect_ratio_policy' must be stretch, not_larger "
                               "or not_smaller, got \"%s\"",
                               policy);
    if (not_larger || not_smaller) {
      /* One scale for every resized axis, then sizes rounded from it (ONNX opset 18). */
      double scale = not_larger ? INFINITY : 0.0;
      for (int32_t k = 0; k < axis_count; k++) {
        int64_t dim = x->dims[axes[k]];
        if (dim == 0) continue;
        double ratio = (double)sizes[k] / (double)dim;
        scale = not_larger ? fmin(scale, ratio) : fmax(scale, ratio);
      }
      if (isinf(scale) || scale <= 0) scale = 1.0;
      for (int32_t k = 0; k < axis_count; k++) {
        g->scales[axes[k]] = scale;
        g->out_dims[axes[k]] = (int64_t)floor(scale * (double)x->dims[axes[k]] + 0.5);
      }
    } else {
      for (int32_t k = 0; k < axis_count; k++) {
        int32_t axis = axes[k];
        g->out_dims[axis] = sizes[k];
        g->scales[axis] = x->dims[axis] > 0 ? (double)sizes[k] / (double)x->dims[axis] : 1.0;
      }
    }
  }
  for (int32_t k = 0; k < rank; k++) {
    if (x->dims[k] == 0 && g->out_dims[k] > 0)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "input 0 dim %d is 0, so it cannot be resized to %lld", k,
                               (long long)g->out_dims[k]);
  }
  if (coordinates == COORDINATE_TF_CROP_AND_RESIZE) {
    stax_tensor_t* roi = opset10_form ? NULL : given_input(call, 1);
    if (roi) {
      double values[2 * STAX_MAX_RANK];
      STAX_RETURN_IF_ERROR(read_doubles(call, roi, "roi (input 1)", 2 * axis_count, values));
      for (int32_t k = 0; k < axis_count; k++) {
        g->roi_start[axes[k]] = values[k];
        g->roi_end[axes[k]] = values[axis_count + k];
      }
    }
  }
  return STAX_OK;
}

/* ---- per-axis taps ------------------------------------------------------------------------ */

/* The input coordinate that output coordinate x maps to on one axis. */
static double original_coordinate(coordinate_mode_t mode, double x, int64_t in, int64_t out,
                                  double scale, double roi_start, double roi_end) {
  switch (mode) {
    case COORDINATE_HALF_PIXEL_SYMMETRIC: {
      double adjustment = (double)out / (scale * (double)in);
      double center = (double)in / 2;
      return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    case COORDINATE_PYTORCH_HALF_PIXEL:
      return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case COORDINATE_ALIGN_CORNERS: {
      /* ONNX measures the resized length as in * scale, unrounded, when scales are given
       * (with sizes the two agree), so downsampling by 0.6 maps 4 -> 2.4, not 2. */
      double resized = scale * (double)in;
      return out > 1 && resized > 1 ? x * (double)(in - 1) / (resized - 1) : 0.0;
    }
    case COORDINATE_TF_HALF_PIXEL_FOR_NN:
      return (x + 0.5) / scale;
    case COORDINATE_ASYMMETRIC:
      return x / scale;
    case COORDINATE_TF_CROP_AND_RESIZE:
      return out > 1 ? roi_start * (double)(in - 1) +
                           x * (roi_end - roi_start) * (double)(in - 1) / (double)(out - 1)
                     : 0.5 * (roi_start + roi_end) * (double)(in - 1);
    case COORDINATE_HALF_PIXEL:
    default:
      return (x + 0.5) / scale - 0.5;
  }
}

static double cubic_weight(double distance, double a) {
  double d = fabs(distance);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

static int64_t clamp_index(int64_t i, int64_t in) { return i < 0 ? 0 : (i >= in ? in - 1 : i); }

/* Fills one axis's table. */
static void axis_taps_fill(const resize_options_t* o, const resize_geometry_t* g, int32_t axis,
                           int64_t in, int64_t stride, axis_taps_t* t) {
  int64_t out = g->out_dims[axis];
  for (int64_t x = 0; x < out; x++) {
    double source = original_coordinate(o->coordinates, (double)x, in, out, g->scales[axis],
                                        g->roi_start[axis], g->roi_end[axis]);
    int64_t* offsets = t->offsets + x * t->taps;
    double* weights = t->weights + x * t->taps;
    t->outside[x] = o->coordinates == COORDINATE_TF_CROP_AND_RESIZE &&
                    (source < 0 || source > (double)(in - 1));
    /* A wild roi can put the coordinate anywhere; far outside, every tap clamps to the edge
     * anyway, and the bound keeps the integer conversions below defined. */
    if (source != source) source = 0;
    if (source < -(double)((int64_t)1 << 40)) source = -(double)((int64_t)1 << 40);
    if (source > (double)((int64_t)1 << 40)) source = (double)((int64_t)1 << 40);
    if (t->taps == 1) {
      int64_t index = (int64_t)x;
      if (o->mode == RESIZE_NEAREST) {
        double low = floor(source), fraction = source - low;
        switch (o->nearest) {
          case NEAREST_ROUND_PREFER_FLOOR: index = (int64_t)low + (fraction > 0.5); break;
          case NEAREST_ROUND_PREFER_CEIL: index = (int64_t)low + (fraction >= 0.5); break;
          case NEAREST_FLOOR: index = (int64_t)low; break;
          case NEAREST_CEIL: index = (int64_t)ceil(source); break;
        }
      }
      offsets[0] = clamp_index(index, in) * stride;
      weights[0] = 1.0;
      continue;
    }
    double low = floor(source), fraction = source - low;
    int64_t base = (int64_t)low;
    if (t->taps == 2) {
      offsets[0] = clamp_index(base, in) * stride;
      offsets[1] = clamp_index(base + 1, in) * stride;
      weights[0] = 1 - fraction;
      weights[1] = fraction;
      continue;
    }
    double sum = 0;
    for (int32_t k = 0; k < 4; k++) {
      int64_t index = base - 1 + k;
      double w = cubic_weight(fraction - (double)(k - 1), o->cubic_a);
      if (o->exclude_outside && (index < 0 || index >= in)) w = 0;
      offsets[k] = clamp_index(index, in) * stride;
      weights[k] = w;
      sum += w;
    }
    if (o->exclude_outside && sum != 0)
      for (int32_t k = 0; k < 4; k++) weights[k] /= sum;
  }
}

/* True when the axis maps every output coordinate exactly onto itself (not resized). */
static bool axis_is_identity(const resize_options_t* o, const resize_geometry_t* g, int32_t axis,
                             int64_t in) {
  int64_t out = g->out_dims[axis];
  if (out != in) return false;
  for (int64_t x = 0; x < out; x++) {
    double source = original_coordinate(o->coordinates, (double)x, in, out, g->scales[axis],
                                        g->roi_start[axis], g->roi_end[axis]);
    if (source != (double)x) return false;
  }
  return true;
}

/* ---- the sampling loop -------------------------------------------------------------------- */

#define RESIZE_STACK_COMBINATIONS 256

typedef struct resize_plan_t {
  const resize_options_t* options;
  int32_t rank;
  const int64_t* out_dims;
  const axis_taps_t* axes;
  const char* src; /* input buffer data */
  int64_t src_offset;
  stax_dtype_t dtype;
  char* dst; /* contiguous output */
  unsigned char extrapolation[16];
  int64_t combinations; /* product of the outer axes' taps */
  stax_allocator_t allocator;
  _Atomic int failed; /* a chunk could not get scratch memory */
} resize_plan_t;

static void store_result(const resize_plan_t* p, int64_t index, double value) {
  if (!stax_dtype_is_float(p->dtype) && p->dtype != STAX_DTYPE_BOOL) value = round(value);
  stax_store_from_f64(p->dtype, p->dst, index, value);
}

static void resize_rows(void* ctx, int64_t begin, int64_t end) {
  resize_plan_t* p = ctx;
  int32_t outer = p->rank - 1;
  const axis_taps_t* last = &p->axes[outer];
  int64_t row_length = p->out_dims[outer];
  size_t size = stax_dtype_size(p->dtype);
  int64_t stack_offsets[RESIZE_STACK_COMBINATIONS];
  double stack_weights[RESIZE_STACK_COMBINATIONS];
  int64_t* offsets = stack_offsets;
  double* weights = stack_weights;
  if (p->combinations > RESIZE_STACK_COMBINATIONS) {
    void* block = NULL;
    size_t bytes = (size_t)p->combinations * (sizeof(int64_t) + sizeof(double));
    stax_status_t status = stax_allocator_malloc(p->allocator, bytes, &block);
    if (status != STAX_OK) {
      stax_status_free(status);
      p->failed = 1;
      return;
    }
    offsets = block;
    weights = (double*)(offsets + p->combinations);
  }
  int64_t index[STAX_MAX_RANK] = {0};
  int64_t rest = begin;
  for (int32_t k = outer - 1; k >= 0; k--) {
    index[k] = rest % p->out_dims[k];
    rest /= p->out_dims[k];
  }
  for (int64_t row = begin; row < end; row++) {
    int64_t first = row * row_length;
    /* The outer axes' taps multiplied out: one (offset, weight) per combination. */
    int64_t count = 1;
    bool outside = false;
    offsets[0] = p->src_offset;
    weights[0] = 1.0;
    for (int32_t k = 0; k < outer; k++) {
      const axis_taps_t* a = &p->axes[k];
      outside = outside || a->outside[index[k]];
      const int64_t* tap_offsets = a->offsets + index[k] * a->taps;
      const double* tap_weights = a->weights + index[k] * a->taps;
      for (int64_t c = count - 1; c >= 0; c--) {
        for (int32_t t = a->taps - 1; t >= 0; t--) {
          offsets[c * a->taps + t] = offsets[c] + tap_offsets[t];
          weights[c * a->taps + t] = weights[c] * tap_weights[t];
        }
      }
      count *= a->taps;
    }
    for (int64_t j = 0; j < row_length; j++) {
      if (outside || last->outside[j]) {
        memcpy(p->dst + (first + j) * (int64_t)size, p->extrapolation, size);
        continue;
      }
      const int64_t* tap_offsets = last->offsets + j * last->taps;
      const double* tap_weights = last->weights + j * last->taps;
      if (p->options->mode == RESIZE_NEAREST) {
        memcpy(p->dst + (first + j) * (int64_t)size,
               p->src + (offsets[0] + tap_offsets[0]) * (int64_t)size, size);
        continue;
      }
      double sum = 0;
      if (p->dtype == STAX_DTYPE_FLOAT32) {
        /* The common case without the per-element dtype switch. */
        const float* src = (const float*)(const void*)p->src;
        for (int64_t c = 0; c < count; c++)
          for (int32_t t = 0; t < last->taps; t++)
            sum += weights[c] * tap_weights[t] * (double)src[offsets[c] + tap_offsets[t]];
        ((float*)(void*)p->dst)[first + j] = (float)sum;
        continue;
      }
      for (int64_t c = 0; c < count; c++)
        for (int32_t t = 0; t < last->taps; t++)
          sum += weights[c] * tap_weights[t] *
                 stax_load_as_f64(p->dtype, p->src, offsets[c] + tap_offsets[t]);
      store_result(p, first + j, sum);
    }
    for (int32_t k = outer - 1; k >= 0; k--) {
      if (++index[k] < p->out_dims[k]) break;
      index[k] = 0;
    }
  }
  if (offsets != stack_offsets)
    stax_allocator_free(p->allocator, offsets,
                        (size_t)p->combinations * (sizeof(int64_t) + sizeof(double)));
}

/* ---- the kernel --------------------------------------------------------------------------- */

stax_status_t stax_kernel_Resize(stax_kernel_call_t* call) {
  stax_tensor_t* x = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &x));
  if (x->rank < 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is a scalar; Resize needs rank >= 1");
  bool opset10_form = call->input_count == 2;
  resize_options_t options;
  STAX_RETURN_IF_ERROR(read_options(call, opset10_form, &options));
  resize_geometry_t geometry;
  STAX_RETURN_IF_ERROR(compute_geometry(call, x, opset10_form, options.coordinates, &geometry));
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(
      stax_movement_contiguous_output(call, 0, x->dtype, x->rank, geometry.out_dims, &out));
  if (stax_tensor_element_count(out) == 0) return STAX_OK;

  int32_t rank = x->rank;
  axis_taps_t axes[STAX_MAX_RANK];
  int64_t table_entries = 0;
  int64_t combinations = 1;
  int32_t mode_taps = options.mode == RESIZE_NEAREST ? 1 : (options.mode == RESIZE_LINEAR ? 2 : 4);
  for (int32_t k = 0; k < rank; k++) {
    bool identity = options.coordinates != COORDINATE_TF_CROP_AND_RESIZE &&
                    axis_is_identity(&options, &geometry, k, x->dims[k]);
    axes[k].taps = identity ? 1 : mode_taps;
    table_entries += geometry.out_dims[k] * axes[k].taps;
    if (k < rank - 1) combinations *= axes[k].taps;
  }
  /* One block: offsets, weights, then outside flags. */
  int64_t out_total = 0;
  for (int32_t k = 0; k < rank; k++) out_total += geometry.out_dims[k];
  size_t bytes = (size_t)table_entries * (sizeof(int64_t) + sizeof(double)) + (size_t)out_total + 8;
  void* block = NULL;
  stax_status_t status = stax_allocator_malloc(call->allocator, bytes, &block);
  if (status != STAX_OK) {
    stax_movement_release_created(call, &preallocated, 1);
    return status;
  }
  int64_t* offsets = block;
  double* weights = (double*)(offsets + table_entries);
  uint8_t* flags = (uint8_t*)(weights + table_entries);
  for (int32_t k = 0; k < rank; k++) {
    axes[k].offsets = offsets;
    axes[k].weights = weights;
    axes[k].outside = flags;
    offsets += geometry.out_dims[k] * axes[k].taps;
    weights += geometry.out_dims[k] * axes[k].taps;
    flags += geometry.out_dims[k];
    axis_taps_fill(&options, &geometry, k, x->dims[k], x->strides[k], &axes[k]);
  }

  resize_plan_t plan;
  memset(&plan, 0, sizeof(plan));
  plan.options = &options;
  plan.rank = rank;
  plan.out_dims = geometry.out_dims;
  plan.axes = axes;
  plan.src = stax_buffer_data(x->buffer);
  plan.src_offset = x->offset;
  plan.dtype = x->dtype;
  plan.dst = stax_tensor_data(out);
  plan.combinations = combinations;
  plan.allocator = call->allocator;
  stax_store_from_f64(x->dtype, plan.extrapolation, 0, options.extrapolation_value);
  int64_t row_length = geometry.out_dims[rank - 1];
  int64_t rows = stax_tensor_element_count(out) / row_length;
  int64_t work = row_length * combinations * axes[rank - 1].taps;
  stax_parallel_for(call->pool, rows, work >= 8192 ? 1 : 8192 / (work > 0 ? work : 1), resize_rows,
                    &plan);
  stax_allocator_free(call->allocator, block, bytes);
  if (plan.failed) {
    stax_movement_release_created(call, &preallocated, 1);
    return stax_kernel_error(call, STAX_OUT_OF_MEMORY, "no scratch memory for %lld tap combinations",
                             (long long)combinations);
  }
  return STAX_OK;
}
