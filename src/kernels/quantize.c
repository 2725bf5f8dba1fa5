/* Generic kernels for linear quantization: QuantizeLinear, DequantizeLinear and
 * DynamicQuantizeLinear, and the helpers the other quantized kernels share (kernels/quant.h).
 *
 * Granularity of QuantizeLinear / DequantizeLinear, from the scale's shape (input 1):
 *   per-tensor  the scale has one element (of any rank, as the ONNX reference takes it);
 *   per-axis    block_size 0 and a 1-D scale of x.dims[axis] elements;
 *   blocked     block_size B > 0 and a scale of x's rank, equal dims except along axis,
 *               where it has ceil(D / B) entries (the last block may be short).
 * The zero point (input 2), when given, has the scale's shape and sets the quantized dtype.
 * x is walked as (outer, D, inner) around the axis: element (o, d, i) uses scale entry 0, d,
 * or (o * S + d / B) * inner + i.
 *
 * Arithmetic:
 *   QuantizeLinear: x / scale in the precision dtype (attribute `precision`, else the scale's
 *     dtype); a float16/bfloat16 quotient is formed in float32 and rounded to the dtype,
 *     which is its correctly rounded value. Then round half to even, add the zero point and
 *     saturate to int8, uint8, int16 or uint16. NaN quantizes to the zero point.
 *   DequantizeLinear: (x - zero point) exactly, then times the scale in the output dtype
 *     (float32 for float16/bfloat16 outputs, rounded once at the end, as the reference does).
 *   DynamicQuantizeLinear (float32 x): the range [min(0, min x), max(0, max x)] over the
 *     non-NaN elements gives scale = (max - min) / 255 (1 / 255 when the range is empty) and
 *     zero point round(saturate(0 - min / scale)); then QuantizeLinear to uint8, all in
 *     float32 as the ONNX reference and ONNX Runtime compute it. */
#include <string.h>

#include "kernels/quant.h"

#define QUANT_CHUNK 256
/* Elements per parallel task. */
#define QUANT_GRAIN 16384

/* ---- shared helpers ----------------------------------------------------------------------- */

bool stax_quant_range(stax_dtype_t dtype, int64_t* out_low, int64_t* out_high) {
  switch (dtype) {
    case STAX_DTYPE_INT8: *out_low = INT8_MIN, *out_high = INT8_MAX; return true;
    case STAX_DTYPE_UINT8: *out_low = 0, *out_high = UINT8_MAX; return true;
    case STAX_DTYPE_INT16: *out_low = INT16_MIN, *out_high = INT16_MAX; return true;
    case STAX_DTYPE_UINT16: *out_low = 0, *out_high = UINT16_MAX; return true;
    case STAX_DTYPE_INT32: *out_low = INT32_MIN, *out_high = INT32_MAX; return true;
    default: return false;
  }
}

void stax_quant_store(stax_dtype_t dtype, void* base, int64_t index, int64_t value) {
  switch (dtype) {
    case STAX_DTYPE_INT8: ((int8_t*)base)[index] = (int8_t)value; break;
    case STAX_DTYPE_UINT8: ((uint8_t*)base)[index] = (uint8_t)value; break;
    case STAX_DTYPE_INT16: ((int16_t*)base)[index] = (int16_t)value; break;
    case STAX_DTYPE_UINT16: ((uint16_t*)base)[index] = (uint16_t)value; break;
    case STAX_DTYPE_INT32: ((int32_t*)base)[index] = (int32_t)value; break;
    default: break;
  }
}

/* Calls visit(ctx, element offset, logical index) for every element in row-major order. */
static void for_each_element(const stax_tensor_t* t, void (*visit)(void*, int64_t, int64_t),
                             void* ctx) {
  int64_t count = stax_tensor_element_count(t);
  int64_t index[STAX_MAX_RANK] = {0};
  int64_t offset = t->offset;
  for (int64_t e = 0; e < count; e++) {
    visit(ctx, offset, e);
    for (int32_t d = t->rank - 1; d >= 0; d--) {
      if (++index[d] < t->dims[d]) {
        offset += t->strides[d];
        break;
      }
      offset -= (t->dims[d] - 1) * t->strides[d];
      index[d] = 0;
    }
  }
}

typedef struct read_ctx_t {
  const stax_tensor_t* t;
  double* f64;
  int32_t* i32;
} read_ctx_t;

static void read_one(void* ctx, int64_t offset, int64_t e) {
  read_ctx_t* read = ctx;
  const void* base = stax_buffer_data(read->t->buffer);
  if (read->f64) {
    read->f64[e] = stax_load_as_f64(read->t->dtype, base, offset);
  } else {
    read->i32[e] = (int32_t)stax_load_as_i64(read->t->dtype, base, offset);
  }
}

void stax_quant_read_f64(const stax_tensor_t* tensor, double* out) {
  read_ctx_t read = {tensor, out, NULL};
  for_each_element(tensor, read_one, &read);
}

void stax_quant_read_i32(const stax_tensor_t* tensor, int32_t* out) {
  read_ctx_t read = {tensor, NULL, out};
  for_each_element(tensor, read_one, &read);
}

stax_status_t stax_quant_require_dtype(const stax_kernel_call_t* call, int32_t index,
                                       const char* role, stax_dtype_t dtype, int32_t like_index,
                                       const char* like_role) {
  const stax_tensor_t* t = stax_kernel_input(call, index);
  if (t == NULL || t->dtype == dtype) return STAX_OK;
  return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                           "input %d (%s) has dtype %s, but it must have the dtype of input %d "
                           "(%s), %s",
                           index, role, stax_dtype_name(t->dtype), like_index, like_role,
                           stax_dtype_name(dtype));
}

stax_status_t stax_quant_require_scale_dtype(const stax_kernel_call_t* call, int32_t index,
                                             const char* role) {
  const stax_tensor_t* t = stax_kernel_input(call, index);
  if (t == NULL) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d (%s) is missing",
                                          index, role);
  if (stax_dtype_kind(t->dtype) == 'F') return STAX_OK;
  return stax_kernel_error(call, t->dtype == STAX_DTYPE_INT32 ? STAX_UNIMPLEMENTED
                                                              : STAX_DTYPE_MISMATCH,
                           "input %d (%s) has dtype %s; stax takes float32, float16, bfloat16 "
                           "or float64 scales",
                           index, role, stax_dtype_name(t->dtype));
}

/* ---- granularity ---------------------------------------------------------------------------- */

typedef enum quant_mode_e { QUANT_PER_TENSOR, QUANT_PER_AXIS, QUANT_BLOCKED } quant_mode_t;

typedef struct quant_layout_t {
  quant_mode_t mode;
  int64_t outer, axis_dim, inner; /* x as (outer, D, inner) */
  int64_t block, blocks;          /* blocked: B and S = ceil(D / B) */
  int64_t scale_count;
} quant_layout_t;

static stax_status_t quant_layout(const stax_kernel_call_t* call, const stax_tensor_t* x,
                                  const stax_tensor_t* scale, const stax_tensor_t* zero,
                                  const char* scale_role, const char* zero_role,
                                  quant_layout_t* out) {
  memset(out, 0, sizeof(*out));
  int64_t axis = 1, block = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 1, &axis));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "block_size", 0, &block));
  if (block < 0) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'block_size' = %lld must be positive (or 0: no blocks)",
                             (long long)block);
  }
  /* One element each is per tensor whatever the ranks (quantizers write a [1] scale with a
   * scalar zero point). */
  if (zero != NULL &&
      !(stax_tensor_element_count(zero) == 1 && stax_tensor_element_count(scale) == 1)) {
    bool same = zero->rank == scale->rank;
    for (int32_t d = 0; same && d < scale->rank; d++) same = zero->dims[d] == scale->dims[d];
    if (!same) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 2 (%s) has shape %s but input 1 (%s) has shape %s; they "
                               "must be equal",
                               zero_role, stax_dims_text(zero->rank, zero->dims).text, scale_role,
                               stax_dims_text(scale->rank, scale->dims).text);
    }
  }
  out->scale_count = stax_tensor_element_count(scale);
  out->outer = 1;
  out->axis_dim = 1;
  out->inner = stax_tensor_element_count(x);
  if (out->scale_count == 1) return STAX_OK; /* per tensor, whatever the rank */
  if (axis < -(int64_t)x->rank || axis >= x->rank) {
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "attribute 'axis' = %lld is out of range for input 0 (x) of rank %d",
                             (long long)axis, x->rank);
  }
  int32_t a = (int32_t)(axis < 0 ? axis + x->rank : axis);
  out->outer = 1;
  for (int32_t d = 0; d < a; d++) out->outer *= x->dims[d];
  out->axis_dim = x->dims[a];
  out->inner = 1;
  for (int32_t d = a + 1; d < x->rank; d++) out->inner *= x->dims[d];
  if (block == 0) {
    if (scale->rank != 1) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 1 (%s) has shape %s: a per-axis scale is 1-D (a blocked "
                               "one needs attribute 'block_size')",
                               scale_role, stax_dims_text(scale->rank, scale->dims).text);
    }
    if (scale->dims[0] != x->dims[a]) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 1 (%s) dim 0 is %lld but input 0 (x) dim %d (axis %lld) "
                               "is %lld",
                               scale_role, (long long)scale->dims[0], a, (long long)axis,
                               (long long)x->dims[a]);
    }
    out->mode = QUANT_PER_AXIS;
    return STAX_OK;
  }
  if (scale->rank != x->rank) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 1 (%s) has rank %d but input 0 (x) has rank %d; blocked "
                             "quantization (block_size %lld) needs equal ranks",
                             scale_role, scale->rank, x->rank, (long long)block);
  }
  for (int32_t d = 0; d < x->rank; d++) {
    int64_t want = d == a ? (x->dims[d] + block - 1) / block : x->dims[d];
    if (scale->dims[d] == want) continue;
    if (d == a) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 1 (%s) dim %d is %lld but input 0 (x) dim %d (axis) is %lld, "
                               "which in blocks of %lld needs %lld",
                               scale_role, d, (long long)scale->dims[d], d,
                               (long long)x->dims[d], (long long)block, (long long)want);
    }
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 1 (%s) dim %d is %lld but input 0 (x) dim %d is %lld; only "
                             "the axis dim %d is blocked",
                             scale_role, d, (long long)scale->dims[d], d, (long long)x->dims[d],
                             a);
  }
  out->mode = QUANT_BLOCKED;
  out->block = block;
  out->blocks = scale->dims[a];
  return STAX_OK;
}

/* The scale entry of logical element e. */
static inline int64_t quant_scale_index(const quant_layout_t* layout, int64_t e) {
  switch (layout->mode) {
    case QUANT_PER_TENSOR: return 0;
    case QUANT_PER_AXIS: return (e / layout->inner) % layout->axis_dim;
    case QUANT_BLOCKED: {
      int64_t inner = e % layout->inner;
      int64_t d = (e / layout->inner) % layout->axis_dim;
      int64_t o = e / (layout->inner * layout->axis_dim);
      return (o * layout->blocks + d / layout->block) * layout->inner + inner;
    }
  }
  return 0;
}

/* value rounded to `dtype` (a float dtype), back in double. */
static double round_to(stax_dtype_t dtype, double value) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: return (double)(float)value;
    case STAX_DTYPE_FLOAT64: return value;
    default: {
      uint16_t bits = 0;
      stax_convert_elements(STAX_DTYPE_FLOAT64, &value, dtype, &bits, 1);
      double back = 0;
      stax_convert_elements(dtype, &bits, STAX_DTYPE_FLOAT64, &back, 1);
      return back;
    }
  }
}

/* The scales and zero points of one call, as doubles / int32s, plus x and y. */
typedef struct quant_plan_t {
  quant_layout_t layout;
  const stax_tensor_t* x; /* contiguous */
  stax_tensor_t* y;       /* contiguous */
  const double* scales;
  const int32_t* zeros; /* NULL: 0 */
  stax_dtype_t precision;
  int64_t low, high;
} quant_plan_t;

static void quantize_task(void* ctx, int64_t begin, int64_t end) {
  const quant_plan_t* plan = ctx;
  const char* x_base = (const char*)stax_buffer_data(plan->x->buffer) +
                       plan->x->offset * (int64_t)stax_dtype_size(plan->x->dtype);
  void* y_base = (char*)stax_buffer_data(plan->y->buffer) +
                 plan->y->offset * (int64_t)stax_dtype_size(plan->y->dtype);
  double values[QUANT_CHUNK];
  bool exact_x = plan->precision == plan->x->dtype || plan->precision == STAX_DTYPE_FLOAT64;
  for (int64_t start = begin; start < end; start += QUANT_CHUNK) {
    int64_t n = end - start < QUANT_CHUNK ? end - start : QUANT_CHUNK;
    stax_kernel_load_f64_row(plan->x->dtype,
                             x_base + start * (int64_t)stax_dtype_size(plan->x->dtype), 1, n,
                             values);
    for (int64_t k = 0; k < n; k++) {
      int64_t s = quant_scale_index(&plan->layout, start + k);
      double x = exact_x ? values[k] : round_to(plan->precision, values[k]);
      double quotient;
      if (plan->precision == STAX_DTYPE_FLOAT32) {
        quotient = (double)((float)x / (float)plan->scales[s]);
      } else if (plan->precision == STAX_DTYPE_FLOAT64) {
        quotient = x / plan->scales[s];
      } else {
        quotient = round_to(plan->precision, (double)((float)x / (float)plan->scales[s]));
      }
      int64_t zero = plan->zeros ? plan->zeros[s] : 0;
      stax_quant_store(plan->y->dtype, y_base, start + k,
                       stax_quant_saturate(quotient, zero, plan->low, plan->high));
    }
  }
}

static void dequantize_task(void* ctx, int64_t begin, int64_t end) {
  const quant_plan_t* plan = ctx;
  const char* x_base = (const char*)stax_buffer_data(plan->x->buffer);
  char* y_base = (char*)stax_buffer_data(plan->y->buffer) +
                 plan->y->offset * (int64_t)stax_dtype_size(plan->y->dtype);
  double values[QUANT_CHUNK];
  for (int64_t start = begin; start < end; start += QUANT_CHUNK) {
    int64_t n = end - start < QUANT_CHUNK ? end - start : QUANT_CHUNK;
    for (int64_t k = 0; k < n; k++) {
      int64_t s = quant_scale_index(&plan->layout, start + k);
      int64_t q = stax_load_as_i64(plan->x->dtype, x_base, plan->x->offset + start + k);
      int64_t diff = q - (plan->zeros ? plan->zeros[s] : 0);
      values[k] = plan->y->dtype == STAX_DTYPE_FLOAT64
                      ? (double)diff * plan->scales[s]
                      : (double)((float)diff * (float)plan->scales[s]);
    }
    stax_kernel_store_f64_row(plan->y->dtype, values, n,
                              y_base + start * (int64_t)stax_dtype_size(plan->y->dtype), 1);
  }
}

/* Reads scale and zero point; *out_scales / *out_zeros are freed by plan_release. */
typedef struct quant_params_t {
  stax_allocator_t allocator;
  double* scales;
  int32_t* zeros;
  int64_t count;
} quant_params_t;

static stax_status_t params_read(const stax_kernel_call_t* call, const stax_tensor_t* scale,
                                 const stax_tensor_t* zero, quant_params_t* out) {
  out->allocator = call->allocator;
  out->count = stax_tensor_element_count(scale);
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator,
                                             (size_t)out->count * sizeof(double), &memory));
  out->scales = memory;
  stax_quant_read_f64(scale, out->scales);
  if (zero != NULL) {
    STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator,
                                               (size_t)out->count * sizeof(int32_t), &memory));
    out->zeros = memory;
    stax_quant_read_i32(zero, out->zeros);
  }
  return STAX_OK;
}

static void params_release(quant_params_t* params) {
  if (params->scales) {
    stax_allocator_free(params->allocator, params->scales, (size_t)params->count * sizeof(double));
  }
  if (params->zeros) {
    stax_allocator_free(params->allocator, params->zeros, (size_t)params->count * sizeof(int32_t));
  }
}

/* An ONNX type code attribute as a stax dtype; *out stays INVALID when absent or 0. */
static stax_status_t read_dtype_attr(const stax_kernel_call_t* call, const char* name,
                                     stax_dtype_t* out) {
  int64_t code = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_onnx_dtype(call->node, name, &code, out));
  if (code != 0 && *out == STAX_DTYPE_INVALID) {
    return stax_kernel_error(call, STAX_UNIMPLEMENTED,
                             "attribute '%s' = %lld (ONNX type code) is not supported: stax has "
                             "no such dtype (float8, int4 and other narrow types are not "
                             "supported)",
                             name, (long long)code);
  }
  return STAX_OK;
}

/* A contiguous x: the input itself or a copy (released by the caller when *out_copy). */
static stax_status_t contiguous_input(const stax_kernel_call_t* call, stax_tensor_t* x,
                                      const stax_tensor_t** out_x, stax_tensor_t** out_copy) {
  *out_copy = NULL;
  *out_x = x;
  if (stax_tensor_is_contiguous(x)) return STAX_OK;
  STAX_RETURN_IF_ERROR(stax_tensor_copy(call->allocator, x, out_copy));
  *out_x = *out_copy;
  return STAX_OK;
}

/* ---- QuantizeLinear ------------------------------------------------------------------------- */

stax_status_t stax_kernel_QuantizeLinear(stax_kernel_call_t* call) {
  stax_tensor_t* x = stax_kernel_input(call, 0);
  stax_tensor_t* scale = stax_kernel_input(call, 1);
  stax_tensor_t* zero = stax_kernel_input(call, 2);
  if (x == NULL) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 (x) is missing");
  STAX_RETURN_IF_ERROR(stax_quant_require_scale_dtype(call, 1, "y_scale"));
  if (stax_dtype_kind(x->dtype) != 'F' && x->dtype != STAX_DTYPE_INT32) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 (x) has dtype %s, expected a floating-point type or int32",
                             stax_dtype_name(x->dtype));
  }
  stax_dtype_t out_dtype = STAX_DTYPE_INVALID, precision = STAX_DTYPE_INVALID;
  STAX_RETURN_IF_ERROR(read_dtype_attr(call, "output_dtype", &out_dtype));
  STAX_RETURN_IF_ERROR(read_dtype_attr(call, "precision", &precision));
  if (zero != NULL) {
    if (out_dtype != STAX_DTYPE_INVALID && out_dtype != zero->dtype) {
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                               "attribute 'output_dtype' says %s but input 2 (y_zero_point) has "
                               "dtype %s",
                               stax_dtype_name(out_dtype), stax_dtype_name(zero->dtype));
    }
    out_dtype = zero->dtype;
  }
  if (out_dtype == STAX_DTYPE_INVALID) out_dtype = STAX_DTYPE_UINT8;
  int64_t low = 0, high = 0;
  if (out_dtype == STAX_DTYPE_INT32 || !stax_quant_range(out_dtype, &low, &high)) {
    return stax_kernel_error(call, STAX_UNIMPLEMENTED,
                             "quantizing to %s is not supported: the output (from %s) must be "
                             "int8, uint8, int16 or uint16",
                             stax_dtype_name(out_dtype),
                             zero ? "input 2 (y_zero_point)" : "attribute 'output_dtype'");
  }
  if (precision == STAX_DTYPE_INVALID) precision = scale->dtype;
  if (stax_dtype_kind(precision) != 'F') {
    return stax_kernel_error(call, STAX_UNIMPLEMENTED,
                             "attribute 'precision' %s is not supported: it must be a "
                             "floating-point type",
                             stax_dtype_name(precision));
  }
  quant_plan_t plan = {.precision = precision, .low = low, .high = high};
  STAX_RETURN_IF_ERROR(
      quant_layout(call, x, scale, zero, "y_scale", "y_zero_point", &plan.layout));
  stax_tensor_t* copy = NULL;
  quant_params_t params = {0};
  stax_status_t status = contiguous_input(call, x, &plan.x, &copy);
  if (status == STAX_OK) status = params_read(call, scale, zero, &params);
  if (status == STAX_OK) status = stax_kernel_output(call, 0, out_dtype, x->rank, x->dims, &plan.y);
  if (status == STAX_OK) {
    plan.scales = params.scales;
    plan.zeros = params.zeros;
    stax_parallel_for(call->pool, stax_tensor_element_count(x), QUANT_GRAIN, quantize_task, &plan);
  }
  params_release(&params);
  if (copy) stax_tensor_release(copy);
  return status;
}

/* ---- DequantizeLinear ----------------------------------------------------------------------- */

stax_status_t stax_kernel_DequantizeLinear(stax_kernel_call_t* call) {
  stax_tensor_t* x = stax_kernel_input(call, 0);
  stax_tensor_t* scale = stax_kernel_input(call, 1);
  stax_tensor_t* zero = stax_kernel_input(call, 2);
  if (x == NULL) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 (x) is missing");
  STAX_RETURN_IF_ERROR(stax_quant_require_scale_dtype(call, 1, "x_scale"));
  int64_t low = 0, high = 0;
  if (!stax_quant_range(x->dtype, &low, &high)) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 (x) has dtype %s, expected int8, uint8, int16, uint16 or "
                             "int32",
                             stax_dtype_name(x->dtype));
  }
  STAX_RETURN_IF_ERROR(stax_quant_require_dtype(call, 2, "x_zero_point", x->dtype, 0, "x"));
  stax_dtype_t out_dtype = STAX_DTYPE_INVALID;
  STAX_RETURN_IF_ERROR(read_dtype_attr(call, "output_dtype", &out_dtype));
  if (out_dtype == STAX_DTYPE_INVALID) out_dtype = scale->dtype;
  if (stax_dtype_kind(out_dtype) != 'F') {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "attribute 'output_dtype' %s must be a floating-point type",
                             stax_dtype_name(out_dtype));
  }
  quant_plan_t plan = {.x = x};
  STAX_RETURN_IF_ERROR(
      quant_layout(call, x, scale, zero, "x_scale", "x_zero_point", &plan.layout));
  stax_tensor_t* copy = NULL;
  quant_params_t params = {0};
  stax_status_t status = contiguous_input(call, x, &plan.x, &copy);
  if (status == STAX_OK) status = params_read(call, scale, zero, &params);
  if (status == STAX_OK) status = stax_kernel_output(call, 0, out_dtype, x->rank, x->dims, &plan.y);
  if (status == STAX_OK) {
    plan.scales = params.scales;
    plan.zeros = params.zeros;
    stax_parallel_for(call->pool, stax_tensor_element_count(x), QUANT_GRAIN, dequantize_task,
                      &plan);
  }
  params_release(&params);
  if (copy) stax_tensor_release(copy);
  return status;
}

/* ---- DynamicQuantizeLinear ------------------------------------------------------------------ */

typedef struct range_ctx_t {
  const float* data;
  float low, high;
} range_ctx_t;

static void range_one(void* ctx, int64_t offset, int64_t e) {
  (void)e;
  range_ctx_t* range = ctx;
  float v = range->data[offset];
  if (v < range->low) range->low = v;
  if (v > range->high) range->high = v;
}

stax_status_t stax_kernel_DynamicQuantizeLinear(stax_kernel_call_t* call) {
  stax_tensor_t* x = stax_kernel_input(call, 0);
  if (x == NULL) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 (x) is missing");
  if (x->dtype != STAX_DTYPE_FLOAT32) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 (x) has dtype %s, expected float32",
                             stax_dtype_name(x->dtype));
  }
  /* The range always holds 0, so the zero point is exact; NaNs fail both comparisons. */
  range_ctx_t range = {stax_buffer_data(x->buffer), 0.0f, 0.0f};
  for_each_element(x, range_one, &range);
  float scale = (range.high == range.low ? 1.0f : range.high - range.low) / 255.0f;
  float initial_zero = 0.0f - range.low / scale;
  if (initial_zero < 0.0f) initial_zero = 0.0f;
  if (initial_zero > 255.0f) initial_zero = 255.0f;
  int32_t zero = (int32_t)nearbyintf(initial_zero);

  stax_tensor_t *y = NULL, *y_scale = NULL, *y_zero = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, STAX_DTYPE_UINT8, x->rank, x->dims, &y));
  stax_status_t status = stax_kernel_output(call, 1, STAX_DTYPE_FLOAT32, 0, NULL, &y_scale);
  if (status == STAX_OK) status = stax_kernel_output(call, 2, STAX_DTYPE_UINT8, 0, NULL, &y_zero);
  if (status != STAX_OK) {
    stax_kernel_release_outputs(call);
    return status;
  }
  *(float*)stax_tensor_data(y_scale) = scale;
  *(uint8_t*)stax_tensor_data(y_zero) = (uint8_t)zero;

  stax_tensor_t* copy = NULL;
  quant_plan_t plan = {.precision = STAX_DTYPE_FLOAT32, .low = 0, .high = 255, .y = y};
  plan.layout.mode = QUANT_PER_TENSOR;
  plan.layout.outer = plan.layout.axis_dim = 1;
  plan.layout.inner = stax_tensor_element_count(x);
  double scale_value = scale;
  int32_t zero_value = zero;
  plan.scales = &scale_value;
  plan.zeros = &zero_value;
  status = contiguous_input(call, x, &plan.x, &copy);
  if (status == STAX_OK) {
    stax_parallel_for(call->pool, stax_tensor_element_count(x), QUANT_GRAIN, quantize_task, &plan);
  } else {
    stax_kernel_release_outputs(call);
  }
  if (copy) stax_tensor_release(copy);
  return status;
}
