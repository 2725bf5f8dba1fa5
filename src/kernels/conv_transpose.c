/* ConvTranspose (any spatial rank, groups, strides, dilations, pads/auto_pad, output_padding,
 * output_shape, bias) as GEMM + col2im.
 *
 * Per (image, group) item, with W[g] the group's Cg x (Mg*KS) weight rows and X[g] its
 * Cg x P input:
 *   col (Mg*KS x P) = W[g]^T x X[g]         (the shared GEMM core; the transpose is a stride swap)
 *   Y[g][m, i*s - pad + k*d] += col[(m, k), i]  for every in-range output position (col2im)
 * col is computed in chunks of whole input rows to bound scratch. col2im is split over output
 * channels, which never write to each other's planes, so the scatter needs no atomics. Halves
 * accumulate in a float32 copy of the item's output planes and are rounded once.
 *
 * Output size per spatial dim: output_shape when given (pads then follow from the total
 * padding, the odd one at the end for SAME_UPPER and at the beginning otherwise, as the ONNX
 * reference does), D * stride under SAME_UPPER/SAME_LOWER (same pad rule), otherwise
 * stride*(D-1) + output_padding + dilation*(kernel-1) + 1 - pad_begin - pad_end. */
#include <string.h>

#include "kernels/gemm.h"

#define CONV_TRANSPOSE_COL_TARGET (1 << 20)
#define CONV_TRANSPOSE_SMALL_ITEM (1 << 20)

typedef struct transpose_plan_t {
  const stax_tensor_t* x; /* the input, or a contiguous copy */
  const stax_tensor_t* w; /* the weight, or a contiguous copy */
  const stax_tensor_t* bias;
  stax_tensor_t* y;
  stax_window_t window; /* input = X's spatial dims, output = Y's */
  int64_t group, cg, mg, kernel_size, in_positions, out_positions, last_in, outer_in;
  int64_t out_strides[STAX_MAX_RANK]; /* Y's spatial strides (contiguous) */
  stax_dtype_t compute_dtype;
  size_t compute_size;
  int64_t w_col_stride, x_spatial_stride;
  int64_t chunk_rows;
  size_t col_bytes, workspace_bytes, slot_bytes;
  char* scratch;
  int64_t item_count, slot_count;
  stax_threadpool_t* inner_pool;
} transpose_plan_t;

/* ---- col2im ------------------------------------------------------------------------------ */

typedef struct col2im_t {
  const transpose_plan_t* plan;
  const char* col;
  char* target;           /* the item's first output plane (compute dtype) */
  int64_t target_channel; /* elements between output planes */
  int64_t q_begin, q_end; /* outer input rows of the chunk */
  int64_t columns;
} col2im_t;

#define CONV_TRANSPOSE_COL2IM(name, elem_t)                                                  \
  STAX_KERNEL_OPTIMIZE("vect-cost-model=dynamic")                                            \
  static void name(void* opaque, int64_t m_begin, int64_t m_end) {                           \
    const col2im_t* t = opaque;                                                              \
    const transpose_plan_t* p = t->plan;                                                     \
    const stax_window_t* w = &p->window;                                                     \
    const int32_t last = w->spatial - 1;                                                     \
    for (int64_t m = m_begin; m < m_end; m++) {                                              \
      elem_t* plane = (elem_t*)t->target + m * t->target_channel;                            \
      for (int64_t tap = 0; tap < p->kernel_size; tap++) {                                   \
        int64_t k[STAX_MAX_RANK], rest_tap = tap;                                            \
        for (int32_t d = last; d >= 0; d--) {                                                \
          k[d] = rest_tap % w->kernel[d];                                                    \
          rest_tap /= w->kernel[d];                                                          \
        }                                                                                    \
        const elem_t* src = (const elem_t*)t->col + (m * p->kernel_size + tap) * t->columns; \
        const int64_t shift = k[last] * w->dilations[last] - w->pads[last];                  \
        const int64_t step = w->strides[last];                                               \
        int64_t lo = stax_ceil_div(-shift, step);                                            \
        int64_t hi = stax_floor_div(w->output[last] - 1 - shift, step) + 1;                  \
        if (lo < 0) lo = 0;                                                                  \
        if (hi > p->last_in) hi = p->last_in;                                                \
        for (int64_t q = t->q_begin; q < t->q_end && lo < hi; q++) {                         \
          int64_t rest = q, offset = 0;                                                      \
          bool inside = true;                                                                \
          for (int32_t d = last - 1; d >= 0; d--) {                                          \
            int64_t i = rest % w->input[d];                                                  \
            rest /= w->input[d];                                                             \
            int64_t o = i * w->strides[d] + k[d] * w->dilations[d] - w->pads[d];             \
            if (o < 0 || o >= w->output[d]) inside = false;                                  \
            offset += o * p->out_strides[d];                                                 \
          }                                                                                  \
          if (!inside) continue;                                                             \
          const elem_t* line = src + (q - t->q_begin) * p->last_in;                          \
          elem_t* out = plane + offset + lo * step + shift;                                  \
          for (int64_t i = lo; i < hi; i++) out[(i - lo) * step] += line[i];                 \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }

CONV_TRANSPOSE_COL2IM(col2im_f32, float)
CONV_TRANSPOSE_COL2IM(col2im_f64, double)

/* ---- items ------------------------------------------------------------------------------- */

static double bias_value(const stax_tensor_t* bias, int64_t m) {
  const void* base = stax_tensor_data(bias);
  int64_t at = m * bias->strides[0];
  switch (bias->dtype) {
    case STAX_DTYPE_FLOAT16:
      return stax_f16_to_f32(((const uint16_t*)base)[at]);
    case STAX_DTYPE_BFLOAT16:
      return stax_bf16_to_f32(((const uint16_t*)base)[at]);
    default:
      return stax_load_as_f64(bias->dtype, base, at);
  }
}

static void transpose_item(const transpose_plan_t* p, int64_t item, char* slot) {
  const int64_t n = item / p->group, g = item % p->group;
  const stax_tensor_t *x = p->x, *w = p->w, *y = p->y;
  const bool half = stax_dtype_is_half(y->dtype);
  char* col = slot;
  char* workspace = slot + p->col_bytes;
  char* accumulator = workspace + p->workspace_bytes; /* halves only */
  /* Target planes: Y itself, or the float32 accumulator for halves. */
  const int64_t y_base = n * y->strides[0] + g * p->mg * y->strides[1];
  char* target =
      half ? accumulator : (char*)stax_tensor_data(y) + y_base * (int64_t)stax_dtype_size(y->dtype);
  const int64_t target_channel = half ? p->out_positions : y->strides[1];
  for (int64_t m = 0; m < p->mg; m++) {
    double value = p->bias ? bias_value(p->bias, g * p->mg + m) : 0.0;
    for (int64_t o = 0; o < p->out_positions; o++) {
      if (p->compute_dtype == STAX_DTYPE_FLOAT64) {
        ((double*)target)[m * target_channel + o] = value;
      } else {
        ((float*)target)[m * target_channel + o] = (float)value;
      }
    }
  }
  /* A = W[g]^T: rows (m, tap) of stride w_col_stride, columns c of stride W's dim 0. */
  stax_gemm_operand_t a = {w->dtype, NULL, p->w_col_stride, w->strides[0]};
  a.data = (const char*)stax_tensor_data(w) +
           g * p->cg * w->strides[0] * (int64_t)stax_dtype_size(w->dtype);
  const size_t x_size = stax_dtype_size(x->dtype);
  const char* x_base = (const char*)stax_tensor_data(x) +
                       (n * x->strides[0] + g * p->cg * x->strides[1]) * (int64_t)x_size;
  const int64_t rows = p->mg * p->kernel_size;
  for (int64_t q0 = 0; q0 < p->outer_in; q0 += p->chunk_rows) {
    const int64_t q1 = q0 + p->chunk_rows < p->outer_in ? q0 + p->chunk_rows : p->outer_in;
    const int64_t columns = (q1 - q0) * p->last_in;
    stax_gemm_operand_t b = {x->dtype,
                             x_base + q0 * p->last_in * p->x_spatial_stride * (int64_t)x_size,
                             x->strides[1], p->x_spatial_stride};
    stax_gemm_run(p->compute_dtype, workspace, p->inner_pool, rows, columns, p->cg, 1.0, &a, &b,
                  0.0, col, columns, 1);
    col2im_t t = {p, col, target, target_channel, q0, q1, columns};
    stax_parallel_for(p->inner_pool, p->mg, 1,
                      p->compute_dtype == STAX_DTYPE_FLOAT64 ? col2im_f64 : col2im_f32, &t);
  }
  if (half) {
    uint16_t* out = (uint16_t*)stax_tensor_data(y) + y_base;
    const float* acc = (const float*)accumulator;
    bool bf16 = y->dtype == STAX_DTYPE_BFLOAT16;
    for (int64_t m = 0; m < p->mg; m++) {
      for (int64_t o = 0; o < p->out_positions; o++) {
        float v = acc[m * p->out_positions + o];
        out[m * y->strides[1] + o] = bf16 ? stax_f32_to_bf16(v) : stax_f32_to_f16(v);
      }
    }
  }
}

static void transpose_slots(void* opaque, int64_t begin, int64_t end) {
  const transpose_plan_t* p = opaque;
  for (int64_t s = begin; s < end; s++) {
    int64_t first = s * p->item_count / p->slot_count;
    int64_t last = (s + 1) * p->item_count / p->slot_count;
    for (int64_t item = first; item < last; item++)
      transpose_item(p, item, p->scratch + (size_t)s * p->slot_bytes);
  }
}

/* ---- attributes and sizes ---------------------------------------------------------------- */

static stax_status_t output_sizes(stax_kernel_call_t* call, stax_window_t* w) {
  const int32_t spatial = w->spatial;
  int64_t output_padding[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(
      stax_window_read_ints(call, "output_padding", spatial, 0, 0, output_padding, NULL));
  for (int32_t i = 0; i < spatial; i++) {
    if (output_padding[i] >= w->strides[i] && output_padding[i] >= w->dilations[i]) {
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "attribute 'output_padding'[%d] = %lld must be less than the "
                               "stride (%lld) or the dilation (%lld)",
                               i, (long long)output_padding[i], (long long)w->strides[i],
                               (long long)w->dilations[i]);
    }
  }
  /* output_shape may list the spatial dims only, or (as some exporters do) all of them. */
  const int64_t* output_shape = NULL;
  int32_t given = -1;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(call->node, "output_shape", &given, &output_shape));
  if (given >= 0) {
    if (given != spatial && given != spatial + 2) {
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "attribute 'output_shape' has %d values, expected %d", given,
                               spatial);
    }
    output_shape += given - spatial;
  }
  for (int32_t i = 0; i < spatial; i++) {
    const int64_t extent = w->dilations[i] * (w->kernel[i] - 1) + 1;
    const int64_t natural = w->strides[i] * (w->input[i] - 1) + output_padding[i] + extent;
    int64_t* begin = &w->pads[i];
    int64_t* end = &w->pads[spatial + i];
    int64_t size;
    bool same = w->auto_pad == STAX_AUTO_PAD_SAME_UPPER || w->auto_pad == STAX_AUTO_PAD_SAME_LOWER;
    if (given >= 0 || same) {
      size = given >= 0 ? output_shape[i] : w->input[i] * w->strides[i];
      int64_t total = natural - size;
      *begin = w->auto_pad == STAX_AUTO_PAD_SAME_UPPER ? stax_floor_div(total, 2)
                                                       : total - stax_floor_div(total, 2);
      *end = total - *begin;
    } else {
      if (w->auto_pad == STAX_AUTO_PAD_VALID) *begin = *end = 0;
      size = natural - *begin - *end;
    }
    if (size < 1) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 0 dim %d (%lld) gives an output size of %lld (pads %lld + "
                               "%lld); it must be at least 1",
                               2 + i, (long long)w->input[i], (long long)size, (long long)*begin,
                               (long long)*end);
    }
    w->output[i] = size;
  }
  return STAX_OK;
}

stax_status_t stax_kernel_ConvTranspose(stax_kernel_call_t* call) {
  stax_tensor_t* x = stax_kernel_input(call, 0);
  stax_tensor_t* w = stax_kernel_input(call, 1);
  stax_tensor_t* bias = stax_kernel_input(call, 2);
  if (!x || !w) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "needs inputs X and W");
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
  if (x->rank < 3 || w->rank != x->rank) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "inputs 0 and 1 must both be (N or C, C or M/group, D1, ...) with "
                             "rank >= 3, got ranks %d and %d",
                             x->rank, w->rank);
  }
  int64_t group = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "group", 1, &group));
  if (group < 1) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'group' = %lld must be >= 1",
                             (long long)group);
  }
  const int64_t channels = x->dims[1];
  if (w->dims[0] != channels) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 has %lld channels (dim 1) but input 1 dim 0 is %lld",
                             (long long)channels, (long long)w->dims[0]);
  }
  if (channels % group != 0) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 dim 1 (%lld channels) is not divisible by group %lld",
                             (long long)channels, (long long)group);
  }
  const int64_t out_channels = w->dims[1] * group;
  if (bias && (bias->rank != 1 || bias->dims[0] != out_channels)) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 2 (bias) must be a vector of %lld values, got %s",
                             (long long)out_channels, stax_dims_text(bias->rank, bias->dims).text);
  }
  transpose_plan_t plan;
  memset(&plan, 0, sizeof(plan));
  STAX_RETURN_IF_ERROR(stax_window_read(call, x, &plan.window));
  stax_window_t* window = &plan.window;
  int64_t kernel[STAX_MAX_RANK];
  bool has_kernel_shape = false;
  STAX_RETURN_IF_ERROR(stax_window_read_ints(call, "kernel_shape", window->spatial, 1, 1, kernel,
                                             &has_kernel_shape));
  for (int32_t i = 0; i < window->spatial; i++) {
    if (w->dims[2 + i] < 1 || (has_kernel_shape && kernel[i] != w->dims[2 + i])) {
      return stax_kernel_error(
          call, STAX_SHAPE_MISMATCH, "input 1 dim %d is %lld but the kernel shape needs %lld there",
          2 + i, (long long)w->dims[2 + i], (long long)(has_kernel_shape ? kernel[i] : 1));
    }
    window->kernel[i] = w->dims[2 + i];
  }
  STAX_RETURN_IF_ERROR(output_sizes(call, window));
  int64_t dims[STAX_MAX_RANK] = {x->dims[0], out_channels};
  for (int32_t i = 0; i < window->spatial; i++) dims[2 + i] = window->output[i];
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, x->dtype, x->rank, dims, &y));
  if (stax_tensor_element_count(y) == 0) return STAX_OK;

  stax_status_t status = STAX_OK;
  stax_tensor_t *w_copy = NULL, *x_copy = NULL;
  void* scratch = NULL;
  size_t scratch_bytes = 0;
  plan.x = x;
  plan.w = w;
  plan.bias = bias;
  plan.y = y;
  plan.group = group;
  plan.cg = channels / group;
  plan.mg = w->dims[1];
  plan.kernel_size = plan.in_positions = plan.out_positions = 1;
  for (int32_t i = window->spatial - 1; i >= 0; i--) {
    plan.out_strides[i] = plan.out_positions;
    plan.kernel_size *= window->kernel[i];
    plan.in_positions *= window->input[i];
    plan.out_positions *= window->output[i];
  }
  plan.last_in = window->input[window->spatial - 1];
  plan.outer_in = plan.last_in ? plan.in_positions / plan.last_in : 0;
  plan.compute_dtype = x->dtype == STAX_DTYPE_FLOAT64 ? STAX_DTYPE_FLOAT64 : STAX_DTYPE_FLOAT32;
  plan.compute_size = stax_dtype_size(plan.compute_dtype);
  if (!stax_kernel_merge_trailing(w, 1, &plan.w_col_stride)) {
    STAX_GOTO_IF_ERROR(status, stax_tensor_copy(call->allocator, w, &w_copy), cleanup,
                       "ConvTranspose node '%s': contiguous copy of the weights", call->node->name);
    plan.w = w_copy;
    plan.w_col_stride = 1;
  }
  if (!stax_kernel_merge_trailing(x, 2, &plan.x_spatial_stride)) {
    STAX_GOTO_IF_ERROR(status, stax_tensor_copy(call->allocator, x, &x_copy), cleanup,
                       "ConvTranspose node '%s': contiguous copy of the input", call->node->name);
    plan.x = x_copy;
    plan.x_spatial_stride = 1;
  }
  const int64_t rows = plan.mg * plan.kernel_size;
  plan.chunk_rows = plan.outer_in;
  if (rows * plan.last_in > 0) {
    int64_t fit = CONV_TRANSPOSE_COL_TARGET / (rows * plan.last_in);
    if (fit < 1) fit = 1;
    if (fit < plan.chunk_rows) plan.chunk_rows = fit;
  }
  if (plan.chunk_rows < 1) plan.chunk_rows = 1;
  const int64_t chunk_columns = plan.chunk_rows * plan.last_in;
  plan.col_bytes = ((size_t)(rows * chunk_columns) * plan.compute_size + 63) / 64 * 64;
  plan.workspace_bytes =
      (stax_gemm_workspace_size(plan.compute_dtype, rows, chunk_columns, plan.cg) + 63) / 64 * 64;
  plan.slot_bytes =
      plan.col_bytes + plan.workspace_bytes +
      (stax_dtype_is_half(x->dtype) ? (size_t)(plan.mg * plan.out_positions) * sizeof(float) : 0);
  plan.slot_bytes = (plan.slot_bytes + 63) / 64 * 64;
  if (plan.slot_bytes == 0) plan.slot_bytes = 64;

  const int32_t threads = call->pool ? stax_threadpool_thread_count(call->pool) : 1;
  plan.item_count = x->dims[0] * group;
  double item_work = (double)rows * (double)plan.cg * (double)plan.in_positions;
  bool items_in_parallel =
      threads > 1 && plan.item_count > 1 && item_work < CONV_TRANSPOSE_SMALL_ITEM;
  plan.slot_count =
      items_in_parallel ? (plan.item_count < 4 * threads ? plan.item_count : 4 * threads) : 1;
  plan.inner_pool = items_in_parallel ? NULL : call->pool;
  scratch_bytes = plan.slot_bytes * (size_t)plan.slot_count;
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_malloc_aligned(call->allocator, scratch_bytes, 64, &scratch), cleanup,
      "ConvTranspose node '%s': %zu bytes of scratch", call->node->name, scratch_bytes);
  plan.scratch = scratch;
  if (items_in_parallel) {
    stax_parallel_for(call->pool, plan.slot_count, 1, transpose_slots, &plan);
  } else {
    transpose_slots(&plan, 0, 1);
  }

cleanup:
  if (scratch) stax_allocator_free_aligned(call->allocator, scratch, scratch_bytes, 64);
  if (w_copy) stax_tensor_release(w_copy);
  if (x_copy) stax_tensor_release(x_copy);
  if (status) stax_kernel_release_outputs(call);
  return status;
}
