/* MaxPool (with the optional Indices output), AveragePool, GlobalAveragePool and
 * GlobalMaxPool over any spatial rank and any input strides.
 *
 * Each (image, channel) plane is one task on the pool. For every output position the window's
 * in-range taps form a box (per dim, the taps whose input position lies in [0, D)), so the
 * loops visit only real elements: padding never contributes to a max, and AveragePool divides
 * by the box size (count_include_pad = 0) or by the taps inside the explicitly padded input
 * (count_include_pad = 1; positions past the end pad that ceil_mode adds never count). A
 * window with nothing to average gives NaN (0 / 0), as the ONNX reference does.
 *
 * MaxPool follows ONNX Runtime where ONNX is silent: NaN never wins a comparison, and a window
 * with no in-range element yields the type's lowest finite value with index -1. Indices are
 * offsets into the flattened input (N, C, D1, ...): row-major, or with the spatial dims in
 * column-major order when storage_order is 1. Averages accumulate in double. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/gemm.h"

typedef struct pool_plan_t {
  const stax_tensor_t* x;
  stax_tensor_t* y;
  stax_tensor_t* indices; /* MaxPool's second output, or NULL */
  stax_window_t window;
  bool count_include_pad;
  int64_t channels, out_positions, in_plane;
  int64_t index_strides[STAX_MAX_RANK]; /* flattened-index step per spatial dim */
} pool_plan_t;

/* The taps of one output position: a box [lo, hi) per dim of in-range taps. */
typedef struct pool_box_t {
  int64_t lo[STAX_MAX_RANK], hi[STAX_MAX_RANK], start[STAX_MAX_RANK];
  int64_t valid;  /* taps inside the input */
  int64_t padded; /* taps inside the padded input */
} pool_box_t;

static void window_box(const stax_window_t* w, int64_t position, pool_box_t* box) {
  box->valid = box->padded = 1;
  for (int32_t d = w->spatial - 1; d >= 0; d--) {
    const int64_t o = position % w->output[d];
    position /= w->output[d];
    const int64_t start = o * w->strides[d] - w->pads[d];
    const int64_t dilation = w->dilations[d], kernel = w->kernel[d], input = w->input[d];
    int64_t lo = stax_ceil_div(-start, dilation);
    int64_t hi = stax_floor_div(input - 1 - start, dilation) + 1;
    if (lo < 0) lo = 0;
    if (hi > kernel) hi = kernel;
    if (hi < lo) hi = lo;
    int64_t padded_lo = stax_ceil_div(-w->pads[d] - start, dilation);
    int64_t padded_hi = stax_floor_div(input + w->pads[w->spatial + d] - 1 - start, dilation) + 1;
    if (padded_lo < 0) padded_lo = 0;
    if (padded_hi > kernel) padded_hi = kernel;
    box->lo[d] = lo;
    box->hi[d] = hi;
    box->start[d] = start;
    box->valid *= hi - lo;
    box->padded *= padded_hi > padded_lo ? padded_hi - padded_lo : 0;
  }
}

/* Visits every tap of the box: BODY sees `offset` (element offset into the plane) and
 * `flat` (the flattened index step sum). */
#define POOL_FOR_EACH_TAP(p, box, BODY)                                     \
  do {                                                                      \
    const stax_window_t* w_ = &(p)->window;                                 \
    int64_t tap_[STAX_MAX_RANK];                                            \
    for (int32_t d_ = 0; d_ < w_->spatial; d_++) tap_[d_] = (box).lo[d_];   \
    for (int64_t t_ = 0; t_ < (box).valid; t_++) {                          \
      int64_t offset = 0, flat = 0;                                         \
      for (int32_t d_ = 0; d_ < w_->spatial; d_++) {                        \
        int64_t position_ = (box).start[d_] + tap_[d_] * w_->dilations[d_]; \
        offset += position_ * (p)->x->strides[2 + d_];                      \
        flat += position_ * (p)->index_strides[d_];                         \
      }                                                                     \
      BODY;                                                                 \
      for (int32_t d_ = w_->spatial - 1; d_ >= 0; d_--) {                   \
        if (++tap_[d_] < (box).hi[d_]) break;                               \
        tap_[d_] = (box).lo[d_];                                            \
      }                                                                     \
    }                                                                       \
  } while (0)

/* ---- MaxPool ----------------------------------------------------------------------------- */

#define POOL_MAX(name, elem_t, value_t, LOAD, LOWEST)                                         \
  static void name(void* opaque, int64_t begin, int64_t end) {                                \
    const pool_plan_t* p = opaque;                                                            \
    for (int64_t plane = begin; plane < end; plane++) {                                       \
      const int64_t n = plane / p->channels, c = plane % p->channels;                         \
      const elem_t* in =                                                                      \
          (const elem_t*)stax_tensor_data(p->x) + n * p->x->strides[0] + c * p->x->strides[1];   \
      elem_t* out = (elem_t*)stax_tensor_data(p->y) + plane * p->out_positions;                  \
      int64_t* out_index =                                                                    \
          p->indices ? (int64_t*)stax_tensor_data(p->indices) + plane * p->out_positions : NULL; \
      const int64_t index_base = plane * p->in_plane;                                         \
      for (int64_t o = 0; o < p->out_positions; o++) {                                        \
        pool_box_t box;                                                                       \
        window_box(&p->window, o, &box);                                                      \
        value_t best = LOAD(LOWEST);                                                          \
        elem_t best_raw = LOWEST;                                                             \
        int64_t best_index = -1;                                                              \
        POOL_FOR_EACH_TAP(p, box, {                                                           \
          const elem_t raw = in[offset];                                                      \
          const value_t v = LOAD(raw);                                                        \
          if (v > best || (best_index < 0 && v == best)) {                                    \
            best = v;                                                                         \
            best_raw = raw;                                                                   \
            best_index = index_base + flat;                                                   \
          }                                                                                   \
        });                                                                                   \
        out[o] = best_raw;                                                                    \
        if (out_index) out_index[o] = best_index;                                             \
      }                                                                                       \
    }                                                                                         \
  }

#define POOL_SAME(x) (x)
#define POOL_F16(x) stax_f16_to_f32(x)
#define POOL_BF16(x) stax_bf16_to_f32(x)
/* Lowest finite values; halves as bit patterns (-65504 and -3.39e38). */
POOL_MAX(max_pool_f32, float, float, POOL_SAME, -FLT_MAX)
POOL_MAX(max_pool_f64, double, double, POOL_SAME, -DBL_MAX)
POOL_MAX(max_pool_f16, uint16_t, float, POOL_F16, 0xFBFF)
POOL_MAX(max_pool_bf16, uint16_t, float, POOL_BF16, 0xFF7F)
POOL_MAX(max_pool_i8, int8_t, int32_t, POOL_SAME, INT8_MIN)
POOL_MAX(max_pool_u8, uint8_t, int32_t, POOL_SAME, 0)

/* ---- AveragePool ------------------------------------------------------------------------- */

static void store_float(stax_dtype_t dtype, void* base, int64_t i, double v) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32:
      ((float*)base)[i] = (float)v;
      break;
    case STAX_DTYPE_FLOAT64:
      ((double*)base)[i] = v;
      break;
    case STAX_DTYPE_FLOAT16:
      ((uint16_t*)base)[i] = stax_f64_to_f16(v);
      break;
    default:
      ((uint16_t*)base)[i] = stax_f64_to_bf16(v);
      break;
  }
}

#define POOL_AVERAGE(name, elem_t, LOAD)                                                    \
  static void name(void* opaque, int64_t begin, int64_t end) {                              \
    const pool_plan_t* p = opaque;                                                          \
    for (int64_t plane = begin; plane < end; plane++) {                                     \
      const int64_t n = plane / p->channels, c = plane % p->channels;                       \
      const elem_t* in =                                                                    \
          (const elem_t*)stax_tensor_data(p->x) + n * p->x->strides[0] + c * p->x->strides[1]; \
      void* out = stax_tensor_data(p->y);                                                      \
      for (int64_t o = 0; o < p->out_positions; o++) {                                      \
        pool_box_t box;                                                                     \
        window_box(&p->window, o, &box);                                                    \
        double sum = 0;                                                                     \
        POOL_FOR_EACH_TAP(p, box, {                                                         \
          sum += (double)LOAD(in[offset]);                                                  \
          (void)flat;                                                                       \
        });                                                                                 \
        int64_t count = p->count_include_pad ? box.padded : box.valid;                      \
        store_float(p->y->dtype, out, plane * p->out_positions + o,                         \
                    count > 0 ? sum / (double)count : NAN);                                 \
      }                                                                                     \
    }                                                                                       \
  }

POOL_AVERAGE(average_pool_f32, float, POOL_SAME)
POOL_AVERAGE(average_pool_f64, double, POOL_SAME)
POOL_AVERAGE(average_pool_f16, uint16_t, POOL_F16)
POOL_AVERAGE(average_pool_bf16, uint16_t, POOL_BF16)

static stax_parallel_fn pool_fn(stax_op_t op, stax_dtype_t dtype) {
  bool is_max = op == STAX_OP_MaxPool || op == STAX_OP_GlobalMaxPool;
  switch (dtype) {
    case STAX_DTYPE_FLOAT32:
      return is_max ? max_pool_f32 : average_pool_f32;
    case STAX_DTYPE_FLOAT64:
      return is_max ? max_pool_f64 : average_pool_f64;
    case STAX_DTYPE_FLOAT16:
      return is_max ? max_pool_f16 : average_pool_f16;
    case STAX_DTYPE_BFLOAT16:
      return is_max ? max_pool_bf16 : average_pool_bf16;
    case STAX_DTYPE_INT8:
      return is_max ? max_pool_i8 : NULL;
    case STAX_DTYPE_UINT8:
      return is_max ? max_pool_u8 : NULL;
    default:
      return NULL;
  }
}

/* ---- the kernels ------------------------------------------------------------------------- */

static stax_status_t check_input(stax_kernel_call_t* call, const stax_tensor_t* x) {
  if (!x) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is missing");
  if (!pool_fn(call->node->op, x->dtype)) {
    bool is_max = call->node->op == STAX_OP_MaxPool;
    return stax_kernel_error(
        call, STAX_DTYPE_MISMATCH, "input 0 must be %s, got %s",
        is_max ? "a floating-point type, int8 or uint8" : "a floating-point type",
        stax_dtype_name(x->dtype));
  }
  if (x->rank < 3) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 must be (N, C, D1, ...) with rank >= 3, got rank %d",
                             x->rank);
  }
  return STAX_OK;
}

/* Allocates the outputs and runs the planes over the pool. */
static stax_status_t run_pool(stax_kernel_call_t* call, pool_plan_t* plan, bool want_indices) {
  const stax_tensor_t* x = plan->x;
  const stax_window_t* w = &plan->window;
  int64_t dims[STAX_MAX_RANK] = {x->dims[0], x->dims[1]};
  plan->out_positions = plan->in_plane = 1;
  for (int32_t i = 0; i < w->spatial; i++) {
    dims[2 + i] = w->output[i];
    plan->out_positions *= w->output[i];
    plan->in_plane *= w->input[i];
  }
  plan->channels = x->dims[1];
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, x->dtype, x->rank, dims, &plan->y));
  if (want_indices) {
    stax_status_t status =
        stax_kernel_output(call, 1, STAX_DTYPE_INT64, x->rank, dims, &plan->indices);
    if (status) {
      stax_kernel_release_outputs(call);
      return status;
    }
  }
  const int64_t planes = x->dims[0] * x->dims[1];
  if (planes == 0 || plan->out_positions == 0) return STAX_OK;
  int64_t window_size = 1;
  for (int32_t i = 0; i < w->spatial; i++) window_size *= w->kernel[i];
  const int64_t work = plan->out_positions * window_size;
  const int64_t grain = work >= 16384 ? 1 : 16384 / (work ? work : 1);
  stax_parallel_for(call->pool, planes, grain, pool_fn(call->node->op, x->dtype), plan);
  return STAX_OK;
}

static stax_status_t pool_kernel(stax_kernel_call_t* call) {
  const bool is_max = call->node->op == STAX_OP_MaxPool;
  stax_tensor_t* x = stax_kernel_input(call, 0);
  STAX_RETURN_IF_ERROR(check_input(call, x));
  pool_plan_t plan;
  memset(&plan, 0, sizeof(plan));
  plan.x = x;
  stax_window_t* w = &plan.window;
  STAX_RETURN_IF_ERROR(stax_window_read(call, x, w));
  if (!stax_node_attr_find(call->node, "kernel_shape"))
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'kernel_shape' is required");
  STAX_RETURN_IF_ERROR(
      stax_window_read_ints(call, "kernel_shape", w->spatial, 1, 1, w->kernel, NULL));
  STAX_RETURN_IF_ERROR(stax_window_read_flag(call, "ceil_mode", &w->ceil_mode));
  bool column_major = false;
  if (is_max) {
    STAX_RETURN_IF_ERROR(stax_window_read_flag(call, "storage_order", &column_major));
  } else {
    STAX_RETURN_IF_ERROR(stax_window_read_flag(call, "count_include_pad", &plan.count_include_pad));
  }
  STAX_RETURN_IF_ERROR(stax_window_forward(call, w));
  /* Flattened-index steps: row-major over the spatial dims, or column-major (first dim
   * fastest) for storage_order 1. */
  int64_t step = 1;
  for (int32_t k = 0; k < w->spatial; k++) {
    int32_t d = column_major ? k : w->spatial - 1 - k;
    plan.index_strides[d] = step;
    step *= w->input[d];
  }
  return run_pool(call, &plan, is_max && call->output_count > 1);
}

stax_status_t stax_kernel_MaxPool(stax_kernel_call_t* call) { return pool_kernel(call); }

stax_status_t stax_kernel_AveragePool(stax_kernel_call_t* call) { return pool_kernel(call); }

/* The global pools are windows covering the whole input: same loops, one output per plane. */
static stax_status_t global_pool_kernel(stax_kernel_call_t* call) {
  stax_tensor_t* x = stax_kernel_input(call, 0);
  STAX_RETURN_IF_ERROR(check_input(call, x));
  if (x->dtype == STAX_DTYPE_INT8 || x->dtype == STAX_DTYPE_UINT8) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 must be a floating-point type, got %s",
                             stax_dtype_name(x->dtype));
  }
  pool_plan_t plan;
  memset(&plan, 0, sizeof(plan));
  plan.x = x;
  stax_window_t* w = &plan.window;
  w->spatial = x->rank - 2;
  for (int32_t i = 0; i < w->spatial; i++) {
    w->input[i] = x->dims[2 + i];
    w->kernel[i] = x->dims[2 + i] > 0 ? x->dims[2 + i] : 1;
    w->strides[i] = w->dilations[i] = 1;
    w->output[i] = 1;
  }
  return run_pool(call, &plan, false);
}

stax_status_t stax_kernel_GlobalAveragePool(stax_kernel_call_t* call) {
  return global_pool_kernel(call);
}

stax_status_t stax_kernel_GlobalMaxPool(stax_kernel_call_t* call) {
  return global_pool_kernel(call);
}
