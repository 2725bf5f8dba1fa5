/* Generic kernels for LayerNormalization, BatchNormalization (inference),
 * InstanceNormalization and LRN.
 *
 * LayerNormalization(X, Scale, B?) normalizes over the dims X[axis:] (axis default -1):
 *   Y = (X - mean) / sqrt(var + epsilon) * Scale + B,  var the population variance,
 * Scale and B broadcasting into X[axis:]. Optional outputs Mean and InvStdDev have X's rank
 * with the normalized dims set to 1, in the dtype named by stash_type (default 1, float32).
 * InstanceNormalization(X, scale, B) does the same over X[2:] for every (n, c), with one
 * scale and bias per channel. BatchNormalization(X, scale, B, input_mean, input_var) uses the
 * given statistics per channel (dim 1): Y = (X - mean) / sqrt(var + epsilon) * scale + B.
 * With training_mode = 1 (opset 14/15) mean and var are instead the batch statistics per
 * channel over every axis but 1, var the population (biased) variance, and the optional
 * outputs are running_mean = input_mean * momentum + mean * (1 - momentum) and
 * running_var = input_var * momentum + var * (1 - momentum) (momentum default 0.9; the ONNX
 * spec and reference use the same biased var here). In inference the optional outputs, when a
 * model lists them, are the inputs' statistics unchanged.
 *
 * Numerics: everything runs in double whatever stash_type says (at least as accurate as the
 * float32 stash), with a two-pass mean and variance so large offsets do not cancel.
 *
 * Layout: Layer/InstanceNormalization treat X as rows (the normalized dims) under outer dims;
 * a row whose dims cannot be walked with one stride is first copied to a contiguous tensor.
 * Rows are split over the thread pool; each row is read three times in chunks (sum, squared
 * deviations, output) with no heap scratch. BatchNormalization folds the statistics into one
 * multiply-add per channel and walks X row by row.
 *
 * LRN(X) (local response normalization, X of (N, C, D1, ...)) divides each element by
 * (bias + alpha / size * square_sum) ^ beta, square_sum adding the squares of the same position
 * in channels c - floor((size - 1) / 2) to c + ceil((size - 1) / 2), clipped to [0, C). Each
 * (n, c) row of D1 * ... values is one task item, read in chunks: the window's rows are summed
 * into a chunk of squares, then the row itself is scaled, in double. */
#include <math.h>
#include <string.h>

#include "kernels/fast_loops.h"
#include "kernels/kernel.h"

#define NORM_CHUNK 256
/* Elements one parallel task should at least cover. */
#define NORM_GRAIN_ELEMENTS 32768

/* ---- shared helpers ------------------------------------------------------------------------ */

/* Output i is requested unless the node marks it omitted. */
static bool output_wanted(const stax_kernel_call_t* call, int32_t i) {
  if (i >= call->output_count) return false;
  const stax_node_t* node = call->node;
  if (node && node->outputs && i < node->output_count) return node->outputs[i] != STAX_VALUE_NONE;
  return true;
}

/* Releases the outputs this call created (those that were NULL on entry). */
static void release_created_outputs(stax_kernel_call_t* call, const bool* preallocated) {
  for (int32_t i = 0; i < call->output_count && i < 3; i++) {
    if (!preallocated[i] && call->outputs[i]) {
      stax_tensor_release(call->outputs[i]);
      call->outputs[i] = NULL;
    }
  }
}

static void* element_address(const stax_tensor_t* t, int64_t offset) {
  return (char*)stax_buffer_data(t->buffer) + offset * (int64_t)stax_dtype_size(t->dtype);
}

/* Reads a whole small tensor (any strides, rank <= 1 here) into doubles. */
static void load_vector(const stax_tensor_t* t, int64_t count, double* out) {
  int64_t stride = t->rank == 0 ? 0 : t->strides[0];
  stax_convert_strided(t->dtype, element_address(t, t->offset),
                       stride * (int64_t)stax_dtype_size(t->dtype), STAX_DTYPE_FLOAT64, out,
                       sizeof(double), count);
}

/* The single stride that walks dims[axis:] of `t` in row-major order, if one exists. */
static bool region_stride(const stax_tensor_t* t, int32_t axis, int64_t* out_stride) {
  bool have = false;
  int64_t expected = 0; /* the stride the next outer dim must have to continue the run */
  *out_stride = 1;
  for (int32_t d = t->rank - 1; d >= axis; d--) {
    if (t->dims[d] == 1) continue;
    if (t->dims[d] == 0) return true; /* an empty row is never walked */
    if (!have) {
      have = true;
      *out_stride = t->strides[d];
    } else if (t->strides[d] != expected) {
      return false;
    }
    expected = t->strides[d] * t->dims[d];
  }
  return true;
}

/* ---- rows: shared by Layer- and InstanceNormalization ------------------------------------- */

typedef struct norm_rows_t {
  const stax_tensor_t* x; /* rows walkable with x_stride */
  stax_tensor_t* y;
  stax_tensor_t* mean;     /* optional outputs (LayerNormalization) */
  stax_tensor_t* inv_std;
  int32_t axis;            /* rows are dims[axis:] */
  int64_t row_length;
  int64_t x_stride, y_stride;
  double epsilon;
  /* LayerNormalization: per element of a row (row_length values). InstanceNormalization:
   * per channel, row r using channel r % channels. */
  const double* scale;
  const double* bias;      /* may be NULL: no bias */
  int64_t channels;        /* 0 for per-element scale and bias */
  const stax_fast_loops_t* fast; /* the float32 fast path's loops at the current ISA level */
} norm_rows_t;

/* Offset of row r's first element in `t` (outer dims are t's dims [0, axis)). */
static int64_t row_offset(const stax_tensor_t* t, int32_t axis, const int64_t* outer_dims,
                          int64_t row) {
  int64_t offset = t->offset;
  for (int32_t d = axis - 1; d >= 0; d--) {
    offset += (row % outer_dims[d]) * t->strides[d];
    row /= outer_dims[d];
  }
  return offset;
}

/* LayerNormalization's optional Mean and InvStdDev outputs for one row. */
static void store_row_stats(const norm_rows_t* rows, int64_t row, double mean, double inv_std) {
  if (rows->mean) {
    int64_t offset = row_offset(rows->mean, rows->axis, rows->x->dims, row);
    stax_convert_strided(STAX_DTYPE_FLOAT64, &mean, 0, rows->mean->dtype,
                         element_address(rows->mean, offset), 0, 1);
  }
  if (rows->inv_std) {
    int64_t offset = row_offset(rows->inv_std, rows->axis, rows->x->dims, row);
    stax_convert_strided(STAX_DTYPE_FLOAT64, &inv_std, 0, rows->inv_std->dtype,
                         element_address(rows->inv_std, offset), 0, 1);
  }
}

/* The fast path: a contiguous float32 row in and out, per-element scale and bias, in the
 * same double arithmetic as the general path, read and written directly with eight partial
 * sums so the loops vectorize (kernels/fast_loops.h, compiled per ISA level): LayerNorm over
 * [4, 128, 768] interpreted went from 3.9x ONNX Runtime's time (converting every element
 * through a double buffer three times) to about its speed at SSE2 on an AVX-512 machine. */
static void normalize_row(const norm_rows_t* rows, int64_t row) {
  const stax_tensor_t* x = rows->x;
  int64_t x_size = (int64_t)stax_dtype_size(x->dtype);
  int64_t y_size = (int64_t)stax_dtype_size(rows->y->dtype);
  int64_t x_offset = row_offset(x, rows->axis, x->dims, row);
  int64_t y_offset = row_offset(rows->y, rows->axis, x->dims, row);
  const char* x_row = (const char*)stax_buffer_data(x->buffer) + x_offset * x_size;
  char* y_row = (char*)stax_buffer_data(rows->y->buffer) + y_offset * y_size;
  int64_t length = rows->row_length;
  double values[NORM_CHUNK];
  double sum = 0.0, squares = 0.0;
  if (x->dtype == STAX_DTYPE_FLOAT32 && rows->y->dtype == STAX_DTYPE_FLOAT32 &&
      rows->x_stride == 1 && rows->y_stride == 1 && rows->channels == 0 && length > 0) {
    double mean = 0, inv_std = 0;
    rows->fast->layer_norm_row((float*)y_row, (const float*)x_row, length, rows->epsilon,
                               rows->scale, rows->bias, &mean, &inv_std);
    store_row_stats(rows, row, mean, inv_std);
    return;
  }
  for (int64_t start = 0; start < length; start += NORM_CHUNK) {
    int64_t n = length - start < NORM_CHUNK ? length - start : NORM_CHUNK;
    stax_convert_strided(x->dtype, x_row + start * rows->x_stride * x_size,
                         rows->x_stride * x_size, STAX_DTYPE_FLOAT64, values, sizeof(double), n);
    for (int64_t k = 0; k < n; k++) sum += values[k];
  }
  double mean = sum / (double)length;
  for (int64_t start = 0; start < length; start += NORM_CHUNK) {
    int64_t n = length - start < NORM_CHUNK ? length - start : NORM_CHUNK;
    stax_convert_strided(x->dtype, x_row + start * rows->x_stride * x_size,
                         rows->x_stride * x_size, STAX_DTYPE_FLOAT64, values, sizeof(double), n);
    for (int64_t k = 0; k < n; k++) squares += (values[k] - mean) * (values[k] - mean);
  }
  double inv_std = 1.0 / sqrt(squares / (double)length + rows->epsilon);
  double channel_scale = 1.0, channel_bias = 0.0;
  if (rows->channels > 0) {
    int64_t channel = row % rows->channels;
    channel_scale = rows->scale[channel];
    channel_bias = rows->bias ? rows->bias[channel] : 0.0;
  }
  for (int64_t start = 0; start < length; start += NORM_CHUNK) {
    int64_t n = length - start < NORM_CHUNK ? length - start : NORM_CHUNK;
    stax_convert_strided(x->dtype, x_row + start * rows->x_stride * x_size,
                         rows->x_stride * x_size, STAX_DTYPE_FLOAT64, values, sizeof(double), n);
    if (rows->channels > 0) {
      for (int64_t k = 0; k < n; k++)
        values[k] = (values[k] - mean) * inv_std * channel_scale + channel_bias;
    } else {
      const double* scale = rows->scale + start;
      const double* bias = rows->bias ? rows->bias + start : NULL;
      for (int64_t k = 0; k < n; k++)
        values[k] = (values[k] - mean) * inv_std * scale[k] + (bias ? bias[k] : 0.0);
    }
    stax_convert_strided(STAX_DTYPE_FLOAT64, values, sizeof(double), rows->y->dtype,
                         y_row + start * rows->y_stride * y_size, rows->y_stride * y_size, n);
  }
  store_row_stats(rows, row, mean, inv_std);
}

static void normalize_rows_task(void* opaque, int64_t begin, int64_t end) {
  for (int64_t row = begin; row < end; row++) normalize_row(opaque, row);
}

static void normalize_all_rows(stax_threadpool_t* pool, const norm_rows_t* rows,
                               int64_t row_count) {
  int64_t length = rows->row_length > 0 ? rows->row_length : 1;
  int64_t grain = length >= NORM_GRAIN_ELEMENTS ? 1 : NORM_GRAIN_ELEMENTS / length;
  stax_parallel_for(pool, row_count, grain, normalize_rows_task, (void*)rows);
}

/* Makes *inout_x walkable by one stride over dims[axis:], copying when it is not. *out_copy
 * is the copy to release (or NULL). */
static stax_status_t rows_walkable(stax_kernel_call_t* call, const stax_tensor_t** inout_x,
                                   int32_t axis, stax_tensor_t** out_copy, int64_t* out_stride) {
  *out_copy = NULL;
  if (region_stride(*inout_x, axis, out_stride)) return STAX_OK;
  STAX_RETURN_IF_ERROR(stax_tensor_copy(call->allocator, *inout_x, out_copy),
                       "%s node '%s': contiguous copy of input 0", stax_op_name(call->node->op),
                       call->node->name);
  *inout_x = *out_copy;
  region_stride(*out_copy, axis, out_stride);
  return STAX_OK;
}

/* ---- LayerNormalization --------------------------------------------------------------------- */

/* Fills out_values (the normalized shape's element count) from `side` broadcast into
 * x's dims [axis:]; SHAPE_MISMATCH when it does not broadcast. */
static stax_status_t broadcast_into_rows(stax_kernel_call_t* call, int32_t input,
                                         const stax_tensor_t* side, const stax_tensor_t* x,
                                         int32_t axis, double* out_values) {
  int32_t region_rank = x->rank - axis;
  if (!stax_dtype_is_float(side->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input %d must be a floating-point tensor, got %s", input,
                             stax_dtype_name(side->dtype));
  if (side->rank > region_rank)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input %d has rank %d, more than the %d normalized dims of input 0 "
                             "(axis %d)",
                             input, side->rank, region_rank, axis);
  int64_t strides[STAX_MAX_RANK];
  for (int32_t d = 0; d < region_rank; d++) {
    int32_t sd = d - (region_rank - side->rank);
    if (sd < 0) {
      strides[d] = 0;
      continue;
    }
    int64_t dim = side->dims[sd], want = x->dims[axis + d];
    if (dim != want && dim != 1)
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input %d dim %d is %lld, which does not broadcast to input 0 dim "
                               "%d = %lld",
                               input, sd, (long long)dim, axis + d, (long long)want);
    strides[d] = dim == 1 ? 0 : side->strides[sd];
  }
  int64_t count = 1;
  for (int32_t d = axis; d < x->rank; d++) count *= x->dims[d];
  for (int64_t j = 0; j < count; j++) {
    int64_t rest = j, offset = side->offset;
    for (int32_t d = region_rank - 1; d >= 0; d--) {
      int64_t dim = x->dims[axis + d];
      offset += (rest % dim) * strides[d];
      rest /= dim;
    }
    stax_convert_strided(side->dtype, element_address(side, offset), 0, STAX_DTYPE_FLOAT64,
                         &out_values[j], sizeof(double), 1);
  }
  return STAX_OK;
}

stax_status_t stax_kernel_LayerNormalization(stax_kernel_call_t* call) {
  const stax_tensor_t* x = stax_kernel_input(call, 0);
  const stax_tensor_t* scale = stax_kernel_input(call, 1);
  const stax_tensor_t* bias = stax_kernel_input(call, 2);
  if (!x || !scale)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing", x ? 1 : 0);
  if (!stax_dtype_is_float(x->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 must be a floating-point tensor, got %s",
                             stax_dtype_name(x->dtype));
  int64_t axis = -1, stash_type = 1;
  float epsilon = 1e-5f;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", -1, &axis));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "stash_type", 1, &stash_type));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "epsilon", 1e-5f, &epsilon));
  if (axis < -(int64_t)x->rank || axis >= x->rank)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "axis %lld is out of range for input 0 of rank %d", (long long)axis,
                             x->rank);
  if (axis < 0) axis += x->rank;
  stax_dtype_t stash_dtype = stash_type >= INT32_MIN && stash_type <= INT32_MAX
                                 ? stax_dtype_from_onnx((int32_t)stash_type)
                                 : STAX_DTYPE_INVALID;
  if (!stax_dtype_is_float(stash_dtype))
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'stash_type' = %lld is not a floating-point dtype",
                             (long long)stash_type);
  int64_t row_length = 1, row_count = 1;
  for (int32_t d = 0; d < x->rank; d++) {
    if (d < axis) row_count *= x->dims[d];
    else row_length *= x->dims[d];
  }

  /* Scale and bias broadcast once into per-element arrays shared by every row. */
  size_t side_bytes = (size_t)(row_length > 0 ? row_length : 1) * sizeof(double) * 2;
  double* sides = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, side_bytes, (void**)&sides),
                       "%s node '%s': scale and bias", stax_op_name(call->node->op),
                       call->node->name);
  stax_tensor_t* copy = NULL;
  bool preallocated[3] = {false, false, false};
  for (int32_t i = 0; i < call->output_count && i < 3; i++)
    preallocated[i] = call->outputs[i] != NULL;
  stax_status_t status = broadcast_into_rows(call, 1, scale, x, (int32_t)axis, sides);
  if (status == STAX_OK && bias)
    status = broadcast_into_rows(call, 2, bias, x, (int32_t)axis, sides + row_length);
  int64_t x_stride = 1, y_stride = 1;
  if (status == STAX_OK) status = rows_walkable(call, &x, (int32_t)axis, &copy, &x_stride);

  norm_rows_t rows = {
      .x = x,
      .axis = (int32_t)axis,
      .row_length = row_length,
      .x_stride = x_stride,
      .epsilon = epsilon,
      .scale = sides,
      .bias = bias ? sides + row_length : NULL,
      .fast = stax_fast_loops(),
  };
  if (status == STAX_OK) status = stax_kernel_output(call, 0, x->dtype, x->rank, x->dims, &rows.y);
  if (status == STAX_OK && !region_stride(rows.y, (int32_t)axis, &y_stride))
    status = stax_kernel_error(call, STAX_INTERNAL, "preallocated output 0 is not contiguous");
  rows.y_stride = y_stride;
  int64_t stat_dims[STAX_MAX_RANK];
  for (int32_t d = 0; d < x->rank; d++) stat_dims[d] = d < axis ? x->dims[d] : 1;
  if (status == STAX_OK && output_wanted(call, 1))
    status = stax_kernel_output(call, 1, stash_dtype, x->rank, stat_dims, &rows.mean);
  if (status == STAX_OK && output_wanted(call, 2))
    status = stax_kernel_output(call, 2, stash_dtype, x->rank, stat_dims, &rows.inv_std);
  if (status == STAX_OK && row_count > 0) normalize_all_rows(call->pool, &rows, row_count);

  if (status != STAX_OK) release_created_outputs(call, preallocated);
  if (copy) stax_tensor_release(copy);
  stax_allocator_free(call->allocator, sides, side_bytes);
  return status;
}

/* ---- InstanceNormalization ------------------------------------------------------------------ */

/* Checks that input i is a float vector of `channels` values and reads it. */
static stax_status_t read_channel_vector(stax_kernel_call_t* call, int32_t input,
                                         const char* what, int64_t channels, double* out) {
  const stax_tensor_t* t = stax_kernel_input(call, input);
  if (!t) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d (%s) is missing", input, what);
  if (!stax_dtype_is_float(t->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input %d (%s) must be a floating-point tensor, got %s", input,
                             what, stax_dtype_name(t->dtype));
  if (t->rank != 1 || t->dims[0] != channels)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input %d (%s) has dims %s, expected [%lld] (input 0 dim 1)", input,
                             what, stax_dims_text(t->rank, t->dims).text, (long long)channels);
  load_vector(t, channels, out);
  return STAX_OK;
}

/* Checks input 0 of Batch/InstanceNormalization: float, rank >= 2 (N, C, ...). */
static stax_status_t check_channel_input(stax_kernel_call_t* call, const stax_tensor_t* x) {
  if (!x) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is missing");
  if (!stax_dtype_is_float(x->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 must be a floating-point tensor, got %s",
                             stax_dtype_name(x->dtype));
  if (x->rank < 2)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 must have rank >= 2 (N, C, ...), got rank %d", x->rank);
  return STAX_OK;
}

stax_status_t stax_kernel_InstanceNormalization(stax_kernel_call_t* call) {
  const stax_tensor_t* x = stax_kernel_input(call, 0);
  STAX_RETURN_IF_ERROR(check_channel_input(call, x));
  float epsilon = 1e-5f;
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "epsilon", 1e-5f, &epsilon));
  int64_t channels = x->dims[1];
  size_t side_bytes = (size_t)(channels > 0 ? channels : 1) * sizeof(double) * 2;
  double* sides = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, side_bytes, (void**)&sides),
                       "%s node '%s': scale and bias", stax_op_name(call->node->op),
                       call->node->name);
  bool preallocated[3] = {call->output_count > 0 && call->outputs[0] != NULL, false, false};
  stax_tensor_t* copy = NULL;
  int64_t x_stride = 1, y_stride = 1;
  stax_status_t status = read_channel_vector(call, 1, "scale", channels, sides);
  if (status == STAX_OK) status = read_channel_vector(call, 2, "B", channels, sides + channels);
  if (status == STAX_OK) status = rows_walkable(call, &x, 2, &copy, &x_stride);
  int64_t row_length = 1;
  for (int32_t d = 2; d < x->rank; d++) row_length *= x->dims[d];
  norm_rows_t rows = {
      .x = x,
      .axis = 2,
      .row_length = row_length,
      .x_stride = x_stride,
      .epsilon = epsilon,
      .scale = sides,
      .bias = sides + channels,
      .channels = channels,
      .fast = stax_fast_loops(),
  };
  if (status == STAX_OK) status = stax_kernel_output(call, 0, x->dtype, x->rank, x->dims, &rows.y);
  if (status == STAX_OK && !region_stride(rows.y, 2, &y_stride))
    status = stax_kernel_error(call, STAX_INTERNAL, "preallocated output 0 is not contiguous");
  rows.y_stride = y_stride;
  if (status == STAX_OK && channels > 0)
    normalize_all_rows(call->pool, &rows, x->dims[0] * channels);
  if (status != STAX_OK) release_created_outputs(call, preallocated);
  if (copy) stax_tensor_release(copy);
  stax_allocator_free(call->allocator, sides, side_bytes);
  return status;
}

/* ---- BatchNormalization --------------------------------------------------------------------- */

typedef struct batch_norm_ctx_t {
  stax_dtype_t x_dtype, y_dtype;
  const char* x_base; /* buffer starts: offsets from the walk include the tensors' offsets */
  char* y_base;
  int64_t x_size, y_size;
  int64_t inner_x_stride, inner_y_stride, inner_channel_stride;
  const double* multiplier; /* scale / sqrt(var + epsilon), per channel */
  const double* addend;     /* B - mean * multiplier */
} batch_norm_ctx_t;

static void batch_norm_row(void* opaque, const int64_t* offsets, int64_t count) {
  const batch_norm_ctx_t* c = opaque;
  double values[NORM_CHUNK];
  for (int64_t start = 0; start < count; start += NORM_CHUNK) {
    int64_t n = count - start < NORM_CHUNK ? count - start : NORM_CHUNK;
    stax_convert_strided(c->x_dtype,
                         c->x_base + (offsets[0] + start * c->inner_x_stride) * c->x_size,
                         c->inner_x_stride * c->x_size, STAX_DTYPE_FLOAT64, values,
                         sizeof(double), n);
    int64_t channel = offsets[2] + start * c->inner_channel_stride;
    for (int64_t k = 0; k < n; k++, channel += c->inner_channel_stride)
      values[k] = values[k] * c->multiplier[channel] + c->addend[channel];
    stax_convert_strided(STAX_DTYPE_FLOAT64, values, sizeof(double), c->y_dtype,
                         c->y_base + (offsets[1] + start * c->inner_y_stride) * c->y_size,
                         c->inner_y_stride * c->y_size, n);
  }
}

/* Batch statistics (training_mode = 1): a serial walk over X, summing per channel. The first
 * pass (deviation_of == NULL) adds x to sums[c]; the second adds (x - deviation_of[c])^2. */
typedef struct batch_stats_ctx_t {
  stax_dtype_t x_dtype;
  const char* x_base;
  int64_t x_size;
  int64_t inner_x_stride, inner_channel_stride;
  const double* deviation_of;
  double* sums;
} batch_stats_ctx_t;

static void batch_stats_row(void* opaque, const int64_t* offsets, int64_t count) {
  const batch_stats_ctx_t* c = opaque;
  double values[NORM_CHUNK];
  for (int64_t start = 0; start < count; start += NORM_CHUNK) {
    int64_t n = count - start < NORM_CHUNK ? count - start : NORM_CHUNK;
    stax_convert_strided(c->x_dtype,
                         c->x_base + (offsets[0] + start * c->inner_x_stride) * c->x_size,
                         c->inner_x_stride * c->x_size, STAX_DTYPE_FLOAT64, values,
                         sizeof(double), n);
    int64_t channel = offsets[1] + start * c->inner_channel_stride;
    if (c->deviation_of) {
      for (int64_t k = 0; k < n; k++, channel += c->inner_channel_stride) {
        double d = values[k] - c->deviation_of[channel];
        c->sums[channel] += d * d;
      }
    } else {
      for (int64_t k = 0; k < n; k++, channel += c->inner_channel_stride)
        c->sums[channel] += values[k];
    }
  }
}

/* Fills batch_mean and batch_var (channels values each) with X's per-channel mean and
 * population variance over every axis but 1 (two passes, in double). */
static void batch_statistics(const stax_tensor_t* x, double* batch_mean, double* batch_var) {
  int64_t channels = x->dims[1];
  int64_t per_channel = 1;
  for (int32_t d = 0; d < x->rank; d++) {
    if (d != 1) per_channel *= x->dims[d];
  }
  for (int64_t c = 0; c < channels; c++) batch_mean[c] = batch_var[c] = 0.0;
  int64_t channel_strides[STAX_MAX_RANK] = {0};
  channel_strides[1] = 1;
  const int64_t* strides[2] = {x->strides, channel_strides};
  int64_t base_offsets[2] = {x->offset, 0};
  batch_stats_ctx_t ctx = {
      .x_dtype = x->dtype,
      .x_base = stax_buffer_data(x->buffer),
      .x_size = (int64_t)stax_dtype_size(x->dtype),
      .inner_x_stride = x->strides[x->rank - 1],
      .inner_channel_stride = channel_strides[x->rank - 1],
      .deviation_of = NULL,
      .sums = batch_mean,
  };
  stax_nd_for_each_row(x->rank, x->dims, 2, strides, base_offsets, batch_stats_row, &ctx);
  /* An empty batch (per_channel == 0) gives NaN statistics, as a mean over nothing does. */
  for (int64_t c = 0; c < channels; c++) batch_mean[c] /= (double)per_channel;
  ctx.deviation_of = batch_mean;
  ctx.sums = batch_var;
  stax_nd_for_each_row(x->rank, x->dims, 2, strides, base_offsets, batch_stats_row, &ctx);
  for (int64_t c = 0; c < channels; c++) batch_var[c] /= (double)per_channel;
}

/* Writes `values` (out's dims[0] of them) into the rank-1 tensor `out`, any stride. */
static void store_vector(stax_tensor_t* out, const double* values) {
  int64_t stride = out->rank == 0 ? 0 : out->strides[0];
  int64_t count = out->rank == 0 ? 1 : out->dims[0];
  stax_convert_strided(STAX_DTYPE_FLOAT64, values, sizeof(double), out->dtype,
                       element_address(out, out->offset),
                       stride * (int64_t)stax_dtype_size(out->dtype), count);
}

stax_status_t stax_kernel_BatchNormalization(stax_kernel_call_t* call) {
  const stax_tensor_t* x = stax_kernel_input(call, 0);
  STAX_RETURN_IF_ERROR(check_channel_input(call, x));
  int64_t training_mode = 0;
  float epsilon = 1e-5f, momentum = 0.9f;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "training_mode", 0, &training_mode));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "epsilon", 1e-5f, &epsilon));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "momentum", 0.9f, &momentum));
  bool training = training_mode != 0;
  int64_t channels = x->dims[1];
  size_t count = (size_t)(channels > 0 ? channels : 1);
  size_t scratch_bytes = count * sizeof(double) * 6;
  double* scratch = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, scratch_bytes, (void**)&scratch),
                       "%s node '%s': statistics", stax_op_name(call->node->op),
                       call->node->name);
  double* scale = scratch;
  double* bias = scratch + count;
  double* mean = scratch + 2 * count;
  double* var = scratch + 3 * count;
  static const char* const names[4] = {"scale", "B", "input_mean", "input_var"};
  double* targets[4] = {scale, bias, mean, var};
  bool preallocated[3] = {false, false, false};
  for (int32_t i = 0; i < call->output_count && i < 3; i++)
    preallocated[i] = call->outputs[i] != NULL;
  stax_status_t status = STAX_OK;
  for (int32_t i = 0; i < 4 && status == STAX_OK; i++)
    status = read_channel_vector(call, i + 1, names[i], channels, targets[i]);
  /* Training: normalize with the batch statistics; mean and var become the running averages
   * (the optional outputs). */
  double* batch_mean = scratch + 4 * count;
  double* batch_var = scratch + 5 * count;
  if (status == STAX_OK && training) {
    batch_statistics(x, batch_mean, batch_var);
    double keep = (double)momentum;
    for (int64_t c = 0; c < channels; c++) {
      mean[c] = mean[c] * keep + batch_mean[c] * (1.0 - keep);
      var[c] = var[c] * keep + batch_var[c] * (1.0 - keep);
    }
  }
  const double* norm_mean = training ? batch_mean : mean;
  const double* norm_var = training ? batch_var : var;
  /* Fold the statistics: y = x * multiplier + addend (multiplier into scale, addend into B). */
  for (int64_t c = 0; status == STAX_OK && c < channels; c++) {
    double multiplier = scale[c] / sqrt(norm_var[c] + (double)epsilon);
    bias[c] -= norm_mean[c] * multiplier;
    scale[c] = multiplier;
  }
  stax_tensor_t* y = NULL;
  if (status == STAX_OK) status = stax_kernel_output(call, 0, x->dtype, x->rank, x->dims, &y);
  /* Inference passes the running statistics through unchanged; training writes the updated
   * running averages. */
  for (int32_t i = 1; i <= 2 && status == STAX_OK; i++) {
    if (!output_wanted(call, i)) continue;
    const stax_tensor_t* statistic = stax_kernel_input(call, i + 2);
    stax_tensor_t* out = NULL;
    status = stax_kernel_output(call, i, statistic->dtype, 1, statistic->dims, &out);
    if (status != STAX_OK) break;
    if (training)
      store_vector(out, i == 1 ? mean : var);
    else
      status = stax_tensor_copy_into(statistic, out);
  }
  if (status == STAX_OK) {
    /* A third operand whose offset is the channel index: stride 1 on dim 1, 0 elsewhere. */
    int64_t channel_strides[STAX_MAX_RANK] = {0};
    channel_strides[1] = 1;
    const int64_t* strides[3] = {x->strides, y->strides, channel_strides};
    int64_t base_offsets[3] = {x->offset, y->offset, 0};
    batch_norm_ctx_t ctx = {
        .x_dtype = x->dtype,
        .y_dtype = y->dtype,
        .x_base = stax_buffer_data(x->buffer),
        .y_base = stax_buffer_data(y->buffer),
        .x_size = (int64_t)stax_dtype_size(x->dtype),
        .y_size = (int64_t)stax_dtype_size(y->dtype),
        .inner_x_stride = x->strides[x->rank - 1],
        .inner_y_stride = y->strides[x->rank - 1],
        .inner_channel_stride = channel_strides[x->rank - 1],
        .multiplier = scale,
        .addend = bias,
    };
    stax_nd_for_each_row_parallel(call->pool, x->rank, x->dims, 3, strides, base_offsets, 1,
                                  batch_norm_row, &ctx);
  }
  if (status != STAX_OK) release_created_outputs(call, preallocated);
  stax_allocator_free(call->allocator, scratch, scratch_bytes);
  return status;
}

/* ---- LRN ------------------------------------------------------------------------------------ */

typedef struct lrn_rows_t {
  const stax_tensor_t* x; /* dims[2:] walkable with x_stride */
  stax_tensor_t* y;
  int64_t channels, row_length;
  int64_t x_stride, y_stride;
  int64_t before, after; /* the window: channels c - before to c + after */
  double alpha_over_size, beta, bias;
} lrn_rows_t;

static void lrn_row(const lrn_rows_t* rows, int64_t row) {
  const stax_tensor_t* x = rows->x;
  int64_t x_size = (int64_t)stax_dtype_size(x->dtype);
  int64_t y_size = (int64_t)stax_dtype_size(rows->y->dtype);
  int64_t channel = row % rows->channels;
  int64_t first = channel - rows->before > 0 ? channel - rows->before : 0;
  int64_t last = channel + rows->after < rows->channels - 1 ? channel + rows->after
                                                            : rows->channels - 1;
  const char* x_base = stax_buffer_data(x->buffer);
  /* Rows of one image are `channels` apart in row numbering and strides[1] apart in memory. */
  int64_t x_row = row_offset(x, 2, x->dims, row);
  int64_t y_row = row_offset(rows->y, 2, x->dims, row);
  char* y_base = stax_buffer_data(rows->y->buffer);
  double squares[NORM_CHUNK], values[NORM_CHUNK];
  for (int64_t start = 0; start < rows->row_length; start += NORM_CHUNK) {
    int64_t n = rows->row_length - start < NORM_CHUNK ? rows->row_length - start : NORM_CHUNK;
    for (int64_t k = 0; k < n; k++) squares[k] = 0.0;
    for (int64_t i = first; i <= last; i++) {
      int64_t offset = x_row + (i - channel) * x->strides[1] + start * rows->x_stride;
      stax_convert_strided(x->dtype, x_base + offset * x_size, rows->x_stride * x_size,
                           STAX_DTYPE_FLOAT64, values, sizeof(double), n);
      for (int64_t k = 0; k < n; k++) squares[k] += values[k] * values[k];
    }
    stax_convert_strided(x->dtype, x_base + (x_row + start * rows->x_stride) * x_size,
                         rows->x_stride * x_size, STAX_DTYPE_FLOAT64, values, sizeof(double), n);
    for (int64_t k = 0; k < n; k++)
      values[k] /= pow(rows->bias + rows->alpha_over_size * squares[k], rows->beta);
    stax_convert_strided(STAX_DTYPE_FLOAT64, values, sizeof(double), rows->y->dtype,
                         y_base + (y_row + start * rows->y_stride) * y_size,
                         rows->y_stride * y_size, n);
  }
}

static void lrn_rows_task(void* opaque, int64_t begin, int64_t end) {
  for (int64_t row = begin; row < end; row++) lrn_row(opaque, row);
}

stax_status_t stax_kernel_LRN(stax_kernel_call_t* call) {
  const stax_tensor_t* x = stax_kernel_input(call, 0);
  if (!x) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is missing");
  if (!stax_dtype_is_float(x->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 must be a floating-point tensor, got %s",
                             stax_dtype_name(x->dtype));
  if (x->rank < 3)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 has rank %d; LRN needs (N, C, D1, ...), rank >= 3, with "
                             "the channels in dim 1",
                             x->rank);
  if (!stax_node_attr_find(call->node, "size"))
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'size' (how many channels of input 0 dim 1 to sum over) "
                             "is required");
  int64_t size = 0;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "size", 0, &size));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "alpha", 1e-4f, &alpha));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "beta", 0.75f, &beta));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "bias", 1.0f, &bias));
  if (size <= 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'size' is %lld; it counts channels of input 0 dim 1 and "
                             "must be positive",
                             (long long)size);
  bool preallocated[3] = {call->output_count > 0 && call->outputs[0] != NULL, false, false};
  stax_tensor_t* copy = NULL;
  int64_t x_stride = 1, y_stride = 1;
  STAX_RETURN_IF_ERROR(rows_walkable(call, &x, 2, &copy, &x_stride));
  int64_t row_length = 1;
  for (int32_t d = 2; d < x->rank; d++) row_length *= x->dims[d];
  lrn_rows_t rows = {
      .x = x,
      .channels = x->dims[1],
      .row_length = row_length,
      .x_stride = x_stride,
      /* (size - 1) / 2 rounded down before the channel and up after it, as ONNX defines. */
      .before = (size - 1) / 2,
      .after = size / 2,
      .alpha_over_size = (double)alpha / (double)size,
      .beta = beta,
      .bias = bias,
  };
  stax_status_t status = stax_kernel_output(call, 0, x->dtype, x->rank, x->dims, &rows.y);
  if (status == STAX_OK && !region_stride(rows.y, 2, &y_stride))
    status = stax_kernel_error(call, STAX_INTERNAL, "preallocated output 0 is not contiguous");
  rows.y_stride = y_stride;
  int64_t row_count = x->dims[0] * x->dims[1];
  if (status == STAX_OK && row_count > 0 && row_length > 0) {
    int64_t grain = row_length >= NORM_GRAIN_ELEMENTS ? 1 : NORM_GRAIN_ELEMENTS / row_length;
    stax_parallel_for(call->pool, row_count, grain, lrn_rows_task, &rows);
  }
  if (status != STAX_OK) release_created_outputs(call, preallocated);
  if (copy) stax_tensor_release(copy);
  return status;
}
