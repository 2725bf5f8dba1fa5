/* Conv (1-D/2-D/3-D and beyond, groups, pads/auto_pad, strides, dilations, bias) and the
 * sliding-window attribute rules shared with ConvTranspose and the pools.
 *
 * Per (image, group) item the convolution is one GEMM on the shared core:
 *   Y[g] (Mg x P) = W[g] (Mg x Cg*KS) x col (Cg*KS x P)
 * where col is the im2col matrix: row (c, kernel position), column output position, holding
 * the input value that kernel tap sees there (0 in the padding). col is built in chunks of
 * whole output rows so scratch stays bounded (about CONV_COL_TARGET elements) whatever the
 * image size; halves are widened to float32 while it is built. A 1x1 convolution with unit
 * strides and no padding skips im2col: the input already is col. Depthwise-like convolutions
 * (one input channel per group, few outputs per group) run a direct loop instead, where a
 * GEMM with K = KS would waste the micro-kernel.
 *
 * Items run one after another with the GEMM and im2col split over the pool, or, when each
 * item is small, in parallel with single-threaded products. The output is contiguous (both
 * when the kernel allocates it and when the VM preallocates it). */
#include <string.h>

#include "kernels/gemm.h"

/* -O2's "very cheap" vectorizer model skips loops with run-time trip counts, which is every
 * inner loop here; the copies and axpys below vectorize well under the dynamic model. */
#define CONV_VECTORIZE STAX_KERNEL_OPTIMIZE("vect-cost-model=dynamic")

/* Elements of one im2col chunk (4 MiB of float32) unless one output row needs more. */
#define CONV_COL_TARGET (1 << 20)
/* Multiply-adds per item below which items run in parallel instead. */
#define CONV_SMALL_ITEM (1 << 20)

/* ---- window attributes ------------------------------------------------------------------- */

stax_status_t stax_window_read_ints(const stax_kernel_call_t* call, const char* name, int32_t count,
                                    int64_t default_value, int64_t min_value, int64_t* out,
                                    bool* out_present) {
  const int64_t* data = NULL;
  int32_t given = -1;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(call->node, name, &given, &data));
  if (out_present) *out_present = given >= 0;
  if (given < 0) {
    for (int32_t k = 0; k < count; k++) out[k] = default_value;
    return STAX_OK;
  }
  if (given != count) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute '%s' has %d values, expected %d", name, given, count);
  }
  for (int32_t k = 0; k < count; k++) {
    if (data[k] < min_value) {
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "attribute '%s'[%d] = %lld must be at least %lld", name, k,
                               (long long)data[k], (long long)min_value);
    }
    out[k] = data[k];
  }
  return STAX_OK;
}

stax_status_t stax_window_read_flag(const stax_kernel_call_t* call, const char* name,
                                    bool* out_value) {
  int64_t value = 0;
  *out_value = false;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, name, 0, &value));
  if (value != 0 && value != 1) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute '%s' must be 0 or 1, got %lld",
                             name, (long long)value);
  }
  *out_value = value == 1;
  return STAX_OK;
}

stax_status_t stax_window_read(const stax_kernel_call_t* call, const stax_tensor_t* x,
                               stax_window_t* out) {
  memset(out, 0, sizeof(*out));
  out->spatial = x->rank - 2;
  for (int32_t i = 0; i < out->spatial; i++) out->input[i] = x->dims[2 + i];
  const char* auto_pad = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "auto_pad", "NOTSET", &auto_pad));
  if (strcmp(auto_pad, "NOTSET") == 0) {
    out->auto_pad = STAX_AUTO_PAD_NOTSET;
  } else if (strcmp(auto_pad, "SAME_UPPER") == 0) {
    out->auto_pad = STAX_AUTO_PAD_SAME_UPPER;
  } else if (strcmp(auto_pad, "SAME_LOWER") == 0) {
    out->auto_pad = STAX_AUTO_PAD_SAME_LOWER;
  } else if (strcmp(auto_pad, "VALID") == 0) {
    out->auto_pad = STAX_AUTO_PAD_VALID;
  } else {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or "
                             "VALID, got \"%s\"",
                             auto_pad);
  }
  bool has_pads = false;
  STAX_RETURN_IF_ERROR(
      stax_window_read_ints(call, "strides", out->spatial, 1, 1, out->strides, NULL));
  STAX_RETURN_IF_ERROR(
      stax_window_read_ints(call, "dilations", out->spatial, 1, 1, out->dilations, NULL));
  STAX_RETURN_IF_ERROR(
      stax_window_read_ints(call, "pads", 2 * out->spatial, 0, 0, out->pads, &has_pads));
  if (has_pads && out->auto_pad != STAX_AUTO_PAD_NOTSET) {
    /* Exporters often write zero pads next to auto_pad; only real pads conflict. */
    for (int32_t k = 0; k < 2 * out->spatial; k++) {
      if (out->pads[k] != 0) {
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "attribute 'pads' cannot be combined with auto_pad \"%s\"",
                                 auto_pad);
      }
    }
  }
  return STAX_OK;
}

stax_status_t stax_window_forward(const stax_kernel_call_t* call, stax_window_t* w) {
  const int32_t spatial = w->spatial;
  for (int32_t i = 0; i < spatial; i++) {
    const int64_t input = w->input[i], stride = w->strides[i];
    const int64_t extent = w->dilations[i] * (w->kernel[i] - 1) + 1;
    int64_t* begin = &w->pads[i];
    int64_t* end = &w->pads[spatial + i];
    int64_t size = 0;
    switch (w->auto_pad) {
      case STAX_AUTO_PAD_SAME_UPPER:
      case STAX_AUTO_PAD_SAME_LOWER: {
        size = stax_ceil_div(input, stride);
        int64_t total = (size - 1) * stride + extent - input;
        if (total < 0) total = 0;
        /* SAME_UPPER puts the odd pad at the end, SAME_LOWER at the beginning. */
        *begin = w->auto_pad == STAX_AUTO_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        *end = total - *begin;
        break;
      }
      case STAX_AUTO_PAD_VALID:
        *begin = *end = 0;
        size = stax_ceil_div(input - extent + 1, stride);
        break;
      case STAX_AUTO_PAD_NOTSET: {
        int64_t span = input + *begin + *end - extent;
        if (!w->ceil_mode) {
          size = stax_floor_div(span, stride) + 1;
        } else {
          size = stax_ceil_div(span, stride) + 1;
          /* The last window must start inside the input or the begin padding. */
          if (size > 0 && (size - 1) * stride >= input + *begin) size--;
        }
        break;
      }
    }
    if (size < 1) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 0 dim %d (%lld) is too small for the window (extent %lld, "
                               "pads %lld + %lld, stride %lld): the output size would be %lld",
                               2 + i, (long long)input, (long long)extent, (long long)*begin,
                               (long long)*end, (long long)stride, (long long)size);
    }
    w->output[i] = size;
  }
  return STAX_OK;
}

/* ---- the plan ---------------------------------------------------------------------------- */

static double element_as_double(const stax_tensor_t* t, int64_t index) {
  const void* base = stax_tensor_data(t);
  int64_t at = index * (t->rank ? t->strides[0] : 0);
  switch (t->dtype) {
    case STAX_DTYPE_FLOAT16:
      return stax_f16_to_f32(((const uint16_t*)base)[at]);
    case STAX_DTYPE_BFLOAT16:
      return stax_bf16_to_f32(((const uint16_t*)base)[at]);
    default:
      return stax_load_as_f64(t->dtype, base, at);
  }
}

typedef struct conv_plan_t {
  stax_kernel_call_t* call;
  const stax_tensor_t* x;
  const stax_tensor_t* w; /* the weight, or a contiguous copy of it */
  const stax_tensor_t* bias;
  stax_tensor_t* y;
  stax_window_t window;
  int64_t group, cg, mg, kernel_size, kdim, positions, last_size, outer_count;
  stax_dtype_t compute_dtype;
  size_t compute_size;
  int64_t w_row_stride, w_col_stride;
  bool pointwise;
  int64_t x_spatial_stride; /* merged, for the pointwise path */
  int64_t chunk_rows;       /* outer output rows per im2col chunk */
  size_t col_bytes, workspace_bytes, slot_bytes;
  char* scratch;
  int64_t item_count, slot_count;
  stax_threadpool_t* inner_pool;
} conv_plan_t;

/* ---- im2col ------------------------------------------------------------------------------ */

typedef struct im2col_t {
  const conv_plan_t* plan;
  const char* x_base; /* the item's first input channel */
  char* col;
  int64_t q_begin, q_end; /* outer output rows of this chunk */
  int64_t columns;        /* (q_end - q_begin) * last_size */
} im2col_t;

/* Row r of col = input channel r / KS seen through kernel tap r % KS, for the chunk's output
 * positions. The last spatial dim's valid range is solved once per row, so the inner loop has
 * no bounds checks. */
#define CONV_IM2COL(name, src_t, dst_t, CONVERT)                                                 \
  CONV_VECTORIZE static void name(void* opaque, int64_t row_begin, int64_t row_end) {            \
    const im2col_t* t = opaque;                                                                  \
    const conv_plan_t* p = t->plan;                                                              \
    const stax_window_t* w = &p->window;                                                         \
    const int32_t last = w->spatial - 1;                                                         \
    const int64_t* xs = p->x->strides + 2;                                                       \
    for (int64_t r = row_begin; r < row_end; r++) {                                              \
      int64_t c = r / p->kernel_size, tap = r % p->kernel_size, k[STAX_MAX_RANK];                \
      for (int32_t d = last; d >= 0; d--) {                                                      \
        k[d] = tap % w->kernel[d];                                                               \
        tap /= w->kernel[d];                                                                     \
      }                                                                                          \
      const src_t* channel = (const src_t*)t->x_base + c * p->x->strides[1];                     \
      dst_t* dst = (dst_t*)t->col + r * t->columns;                                              \
      const int64_t shift = k[last] * w->dilations[last] - w->pads[last];                        \
      const int64_t step = w->strides[last], stride = xs[last];                                  \
      int64_t lo = stax_ceil_div(-shift, step),                                                  \
              hi = stax_floor_div(w->input[last] - 1 - shift, step) + 1;                         \
      if (lo < 0) lo = 0;                                                                        \
      if (hi > p->last_size) hi = p->last_size;                                                  \
      if (hi < lo) hi = lo;                                                                      \
      for (int64_t q = t->q_begin; q < t->q_end; q++) {                                          \
        dst_t* out = dst + (q - t->q_begin) * p->last_size;                                      \
        int64_t rest = q, offset = 0;                                                            \
        bool inside = true;                                                                      \
        for (int32_t d = last - 1; d >= 0; d--) {                                                \
          int64_t o = rest % w->output[d];                                                       \
          rest /= w->output[d];                                                                  \
          int64_t i = o * w->strides[d] + k[d] * w->dilations[d] - w->pads[d];                   \
          if (i < 0 || i >= w->input[d]) inside = false;                                         \
          offset += i * xs[d];                                                                   \
        }                                                                                        \
        if (!inside) {                                                                           \
          for (int64_t o = 0; o < p->last_size; o++) out[o] = 0;                                 \
          continue;                                                                              \
        }                                                                                        \
        const src_t* line = channel + offset;                                                    \
        for (int64_t o = 0; o < lo; o++) out[o] = 0;                                             \
        if (step == 1 && stride == 1) {                                                          \
          for (int64_t o = lo; o < hi; o++) out[o] = CONVERT(line[o + shift]);                   \
        } else {                                                                                 \
          for (int64_t o = lo; o < hi; o++) out[o] = CONVERT(line[(o * step + shift) * stride]); \
        }                                                                                        \
        for (int64_t o = hi; o < p->last_size; o++) out[o] = 0;                                  \
      }                                                                                          \
    }                                                                                            \
  }

#define CONV_SAME(x) (x)
CONV_IM2COL(im2col_f32, float, float, CONV_SAME)
CONV_IM2COL(im2col_f64, double, double, CONV_SAME)
CONV_IM2COL(im2col_f16, uint16_t, float, stax_f16_to_f32)
CONV_IM2COL(im2col_bf16, uint16_t, float, stax_bf16_to_f32)

static stax_parallel_fn im2col_for(stax_dtype_t dtype) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32:
      return im2col_f32;
    case STAX_DTYPE_FLOAT64:
      return im2col_f64;
    case STAX_DTYPE_FLOAT16:
      return im2col_f16;
    default:
      return im2col_bf16;
  }
}

/* ---- the GEMM path ----------------------------------------------------------------------- */

/* Fills rows [0, mg) x columns [0, columns) of C with the bias of channels g*mg + m. */
static void fill_bias(const conv_plan_t* p, int64_t g, void* c, int64_t row_stride,
                      int64_t columns) {
  for (int64_t m = 0; m < p->mg; m++) {
    double value = element_as_double(p->bias, g * p->mg + m);
    if (p->compute_dtype == STAX_DTYPE_FLOAT64) {
      double* row = (double*)c + m * row_stride;
      for (int64_t j = 0; j < columns; j++) row[j] = value;
    } else {
      float* row = (float*)c + m * row_stride;
      for (int64_t j = 0; j < columns; j++) row[j] = (float)value;
    }
  }
}

static void conv_item(const conv_plan_t* p, int64_t item, char* slot) {
  const int64_t n = item / p->group, g = item % p->group;
  const stax_tensor_t *x = p->x, *y = p->y;
  const size_t x_size = stax_dtype_size(x->dtype), y_size = stax_dtype_size(y->dtype);
  char* col = slot;
  char* workspace = slot + p->col_bytes;
  float* product = (float*)(workspace + p->workspace_bytes); /* halves only */
  stax_gemm_operand_t a = {p->w->dtype, NULL, p->w_row_stride, p->w_col_stride};
  a.data = (const char*)stax_tensor_data(p->w) +
           g * p->mg * p->w_row_stride * (int64_t)stax_dtype_size(p->w->dtype);
  const char* x_base = (const char*)stax_tensor_data(x) +
                       (n * x->strides[0] + g * p->cg * x->strides[1]) * (int64_t)x_size;
  const int64_t y_base = n * y->strides[0] + g * p->mg * y->strides[1];
  const bool half = stax_dtype_is_half(y->dtype);
  for (int64_t q0 = 0; q0 < p->outer_count; q0 += p->chunk_rows) {
    const int64_t q1 = q0 + p->chunk_rows < p->outer_count ? q0 + p->chunk_rows : p->outer_count;
    const int64_t columns = (q1 - q0) * p->last_size, first = q0 * p->last_size;
    stax_gemm_operand_t b;
    if (p->pointwise) {
      b = (stax_gemm_operand_t){x->dtype, x_base + first * p->x_spatial_stride * (int64_t)x_size,
                                x->strides[1], p->x_spatial_stride};
    } else {
      im2col_t t = {p, x_base, col, q0, q1, columns};
      int64_t grain = columns >= 16384 ? 1 : 16384 / (columns ? columns : 1);
      stax_parallel_for(p->inner_pool, p->kdim, grain, im2col_for(x->dtype), &t);
      b = (stax_gemm_operand_t){p->compute_dtype, col, columns, 1};
    }
    void* c = half ? (void*)product : (char*)stax_tensor_data(y) + (y_base + first) * (int64_t)y_size;
    int64_t c_row_stride = half ? columns : y->strides[1];
    if (p->bias) fill_bias(p, g, c, c_row_stride, columns);
    stax_gemm_run(p->compute_dtype, workspace, p->inner_pool, p->mg, columns, p->kdim, 1.0, &a, &b,
                  p->bias ? 1.0 : 0.0, c, c_row_stride, 1);
    if (half) {
      uint16_t* target = (uint16_t*)stax_tensor_data(y) + y_base + first;
      bool bf16 = y->dtype == STAX_DTYPE_BFLOAT16;
      for (int64_t m = 0; m < p->mg; m++) {
        for (int64_t j = 0; j < columns; j++) {
          float v = product[m * columns + j];
          target[m * y->strides[1] + j] = bf16 ? stax_f32_to_bf16(v) : stax_f32_to_f16(v);
        }
      }
    }
  }
}

static void conv_slots(void* opaque, int64_t begin, int64_t end) {
  const conv_plan_t* p = opaque;
  for (int64_t s = begin; s < end; s++) {
    int64_t first = s * p->item_count / p->slot_count;
    int64_t last = (s + 1) * p->item_count / p->slot_count;
    for (int64_t item = first; item < last; item++)
      conv_item(p, item, p->scratch + (size_t)s * p->slot_bytes);
  }
}

/* ---- the direct path (one input channel per group) --------------------------------------- */

/* Output channel (n, m) = sum over taps of weight * shifted input plane. The tap loop is
 * outermost so the inner loop is a strided axpy over one output row. */
#define CONV_DIRECT(name, elem_t)                                                           \
  CONV_VECTORIZE static void name(void* opaque, int64_t begin, int64_t end) {               \
    const conv_plan_t* p = opaque;                                                          \
    const stax_window_t* w = &p->window;                                                    \
    const int32_t last = w->spatial - 1;                                                    \
    const stax_tensor_t *x = p->x, *y = p->y, *wt = p->w;                                   \
    const int64_t* xs = x->strides + 2;                                                     \
    const int64_t channels = y->dims[1];                                                    \
    for (int64_t item = begin; item < end; item++) {                                        \
      const int64_t n = item / channels, m = item % channels, g = m / p->mg;                \
      const elem_t* plane =                                                                 \
          (const elem_t*)stax_tensor_data(x) + n * x->strides[0] + g * x->strides[1];          \
      elem_t* out = (elem_t*)stax_tensor_data(y) + n * y->strides[0] + m * y->strides[1];      \
      const elem_t* filter = (const elem_t*)stax_tensor_data(wt) + m * wt->strides[0];         \
      elem_t bias = p->bias ? (elem_t)element_as_double(p->bias, m) : 0;                    \
      for (int64_t i = 0; i < p->positions; i++) out[i] = bias;                             \
      for (int64_t tap = 0; tap < p->kernel_size; tap++) {                                  \
        int64_t k[STAX_MAX_RANK], rest_tap = tap, w_offset = 0;                             \
        for (int32_t d = last; d >= 0; d--) {                                               \
          k[d] = rest_tap % w->kernel[d];                                                   \
          rest_tap /= w->kernel[d];                                                         \
          w_offset += k[d] * wt->strides[2 + d];                                            \
        }                                                                                   \
        const elem_t weight = filter[w_offset];                                             \
        const int64_t shift = k[last] * w->dilations[last] - w->pads[last];                 \
        const int64_t step = w->strides[last], stride = xs[last];                           \
        int64_t lo = stax_ceil_div(-shift, step);                                           \
        int64_t hi = stax_floor_div(w->input[last] - 1 - shift, step) + 1;                  \
        if (lo < 0) lo = 0;                                                                 \
        if (hi > p->last_size) hi = p->last_size;                                           \
        for (int64_t q = 0; q < p->outer_count && lo < hi; q++) {                           \
          int64_t rest = q, offset = 0;                                                     \
          bool inside = true;                                                               \
          for (int32_t d = last - 1; d >= 0; d--) {                                         \
            int64_t o = rest % w->output[d];                                                \
            rest /= w->output[d];                                                           \
            int64_t at = o * w->strides[d] + k[d] * w->dilations[d] - w->pads[d];           \
            if (at < 0 || at >= w->input[d]) inside = false;                                \
            offset += at * xs[d];                                                           \
          }                                                                                 \
          if (!inside) continue;                                                            \
          elem_t* row = out + q * p->last_size + lo;                                        \
          const elem_t* line = plane + offset + (lo * step + shift) * stride;               \
          const int64_t count = hi - lo;                                                    \
          if (step == 1 && stride == 1) {                                                   \
            for (int64_t o = 0; o < count; o++) row[o] += weight * line[o];                 \
          } else {                                                                          \
            for (int64_t o = 0; o < count; o++) row[o] += weight * line[o * step * stride]; \
          }                                                                                 \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
  }

CONV_DIRECT(conv_direct_f32, float)
CONV_DIRECT(conv_direct_f64, double)

/* ---- the kernel -------------------------------------------------------------------------- */

static stax_status_t conv_check(stax_kernel_call_t* call, const stax_tensor_t* x,
                                const stax_tensor_t* w, const stax_tensor_t* bias,
                                int64_t* out_group) {
  if (!stax_dtype_is_float(x->dtype)) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 must be a floating-point type, got %s",
                             stax_dtype_name(x->dtype));
  }
  for (int32_t i = 1; i < 3; i++) {
    const stax_tensor_t* other = i == 1 ? w : bias;
    if (other && other->dtype != x->dtype) {
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 0 is %s but input %d is %s",
                               stax_dtype_name(x->dtype), i, stax_dtype_name(other->dtype));
    }
  }
  if (x->rank < 3) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 must be (N, C, D1, ...) with rank >= 3, got rank %d",
                             x->rank);
  }
  if (w->rank != x->rank) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 1 (weights) has rank %d but input 0 has rank %d", w->rank,
                             x->rank);
  }
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "group", 1, out_group));
  if (*out_group < 1) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'group' = %lld must be >= 1",
                             (long long)*out_group);
  }
  return STAX_OK;
}

/* kernel_shape, when given, must equal the weight's spatial dims. */
static stax_status_t read_kernel_shape(stax_kernel_call_t* call, const stax_tensor_t* w,
                                       stax_window_t* window) {
  int64_t kernel[STAX_MAX_RANK];
  bool present = false;
  STAX_RETURN_IF_ERROR(
      stax_window_read_ints(call, "kernel_shape", window->spatial, 1, 1, kernel, &present));
  for (int32_t i = 0; i < window->spatial; i++) {
    if (w->dims[2 + i] < 1) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 1 dim %d is %lld: kernel dims must be at least 1", 2 + i,
                               (long long)w->dims[2 + i]);
    }
    if (present && kernel[i] != w->dims[2 + i]) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "attribute 'kernel_shape'[%d] = %lld but input 1 dim %d is %lld", i,
                               (long long)kernel[i], 2 + i, (long long)w->dims[2 + i]);
    }
    window->kernel[i] = w->dims[2 + i];
  }
  return STAX_OK;
}

stax_status_t stax_kernel_Conv(stax_kernel_call_t* call) {
  stax_tensor_t* x = stax_kernel_input(call, 0);
  stax_tensor_t* w = stax_kernel_input(call, 1);
  stax_tensor_t* bias = stax_kernel_input(call, 2);
  if (!x || !w) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "needs inputs X and W");
  int64_t group = 1;
  STAX_RETURN_IF_ERROR(conv_check(call, x, w, bias, &group));
  const int64_t channels = x->dims[1], out_channels = w->dims[0];
  if (channels != w->dims[1] * group) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 has %lld channels (dim 1) but input 1 dim 1 (%lld) x group "
                             "%lld = %lld",
                             (long long)channels, (long long)w->dims[1], (long long)group,
                             (long long)(w->dims[1] * group));
  }
  if (out_channels % group != 0) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 1 dim 0 (%lld output channels) is not divisible by group %lld",
                             (long long)out_channels, (long long)group);
  }
  if (bias && (bias->rank != 1 || bias->dims[0] != out_channels)) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 2 (bias) must be a vector of %lld values, got %s",
                             (long long)out_channels, stax_dims_text(bias->rank, bias->dims).text);
  }
  conv_plan_t plan;
  memset(&plan, 0, sizeof(plan));
  STAX_RETURN_IF_ERROR(stax_window_read(call, x, &plan.window));
  STAX_RETURN_IF_ERROR(read_kernel_shape(call, w, &plan.window));
  STAX_RETURN_IF_ERROR(stax_window_forward(call, &plan.window));
  const stax_window_t* window = &plan.window;
  int64_t dims[STAX_MAX_RANK] = {x->dims[0], out_channels};
  for (int32_t i = 0; i < window->spatial; i++) dims[2 + i] = window->output[i];
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, x->dtype, x->rank, dims, &y));
  if (stax_tensor_element_count(y) == 0) return STAX_OK;

  plan.call = call;
  plan.x = x;
  plan.w = w;
  plan.bias = bias;
  plan.y = y;
  plan.group = group;
  plan.cg = channels / group;
  plan.mg = out_channels / group;
  plan.kernel_size = 1;
  plan.positions = 1;
  bool unit = true;
  for (int32_t i = 0; i < window->spatial; i++) {
    plan.kernel_size *= window->kernel[i];
    plan.positions *= window->output[i];
    unit = unit && window->kernel[i] == 1 && window->strides[i] == 1 && window->pads[i] == 0 &&
           window->pads[window->spatial + i] == 0;
  }
  plan.kdim = plan.cg * plan.kernel_size;
  plan.last_size = window->output[window->spatial - 1];
  plan.outer_count = plan.positions / plan.last_size;
  plan.compute_dtype = x->dtype == STAX_DTYPE_FLOAT64 ? STAX_DTYPE_FLOAT64 : STAX_DTYPE_FLOAT32;
  plan.compute_size = stax_dtype_size(plan.compute_dtype);
  const int32_t threads = call->pool ? stax_threadpool_thread_count(call->pool) : 1;
  stax_status_t status = STAX_OK;
  stax_tensor_t* w_copy = NULL;

  if (plan.cg == 1 && plan.mg <= 4 && !stax_dtype_is_half(x->dtype) && plan.kernel_size > 1) {
    const int64_t items = x->dims[0] * out_channels;
    int64_t grain = plan.positions * plan.kernel_size >= 65536
                        ? 1
                        : 65536 / (plan.positions * plan.kernel_size);
    stax_parallel_for(call->pool, items, grain,
                      x->dtype == STAX_DTYPE_FLOAT64 ? conv_direct_f64 : conv_direct_f32, &plan);
    return STAX_OK;
  }

  if (!stax_kernel_merge_trailing(w, 1, &plan.w_col_stride)) {
    STAX_GOTO_IF_ERROR(status, stax_tensor_copy(call->allocator, w, &w_copy), cleanup,
                       "Conv node '%s': contiguous copy of the weights", call->node->name);
    plan.w = w_copy;
    plan.w_col_stride = 1;
  }
  plan.w_row_stride = plan.w->strides[0];
  plan.pointwise = unit && stax_kernel_merge_trailing(x, 2, &plan.x_spatial_stride);

  plan.chunk_rows = plan.outer_count;
  if (!plan.pointwise) {
    int64_t per_row = plan.kdim * plan.last_size;
    int64_t rows = per_row > 0 ? CONV_COL_TARGET / per_row : plan.outer_count;
    if (rows < 1) rows = 1;
    if (rows < plan.chunk_rows) plan.chunk_rows = rows;
  }
  const int64_t chunk_columns = plan.chunk_rows * plan.last_size;
  plan.col_bytes = plan.pointwise ? 0 : (size_t)(plan.kdim * chunk_columns) * plan.compute_size;
  plan.col_bytes = (plan.col_bytes + 63) / 64 * 64;
  plan.workspace_bytes =
      stax_gemm_workspace_size(plan.compute_dtype, plan.mg, chunk_columns, plan.kdim);
  plan.workspace_bytes = (plan.workspace_bytes + 63) / 64 * 64;
  plan.slot_bytes = plan.col_bytes + plan.workspace_bytes +
                    (stax_dtype_is_half(x->dtype) ? (size_t)(plan.mg * chunk_columns) * sizeof(float) : 0);
  plan.slot_bytes = (plan.slot_bytes + 63) / 64 * 64;
  if (plan.slot_bytes == 0) plan.slot_bytes = 64;

  plan.item_count = x->dims[0] * group;
  double item_work = (double)plan.mg * (double)plan.kdim * (double)plan.positions;
  bool items_in_parallel = threads > 1 && plan.item_count > 1 && item_work < CONV_SMALL_ITEM;
  plan.slot_count =
      items_in_parallel ? (plan.item_count < 4 * threads ? plan.item_count : 4 * threads) : 1;
  plan.inner_pool = items_in_parallel ? NULL : call->pool;
  size_t scratch_bytes = plan.slot_bytes * (size_t)plan.slot_count;
  void* scratch = NULL;
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_malloc_aligned(call->allocator, scratch_bytes, 64, &scratch), cleanup,
      "Conv node '%s': %zu bytes of im2col scratch", call->node->name, scratch_bytes);
  plan.scratch = scratch;
  if (items_in_parallel) {
    stax_parallel_for(call->pool, plan.slot_count, 1, conv_slots, &plan);
  } else {
    conv_slots(&plan, 0, 1);
  }
  stax_allocator_free_aligned(call->allocator, scratch, scratch_bytes, 64);

cleanup:
  if (w_copy) stax_tensor_release(w_copy);
  if (status) stax_kernel_release_outputs(call);
  return status;
}
