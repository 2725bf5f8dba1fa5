/* MatMulInteger and QLinearMatMul: numpy matmul (1-D operands are vectors, batch dims
 * broadcast) of int8/uint8 operands on the integer GEMM core (gemm_int8.c).
 *
 * Quantization parameters of A (zero point, scale) are per tensor (one element), per row (a
 * 1-D [M]) or per batch and row ([..., M, 1], batch dims A's or 1); those of B per tensor,
 * per column ([N]) or per batch and column ([..., 1, N]); QLinearMatMul's output scale and
 * zero point follow A's rule. MatMulInteger writes the int32 sums; QLinearMatMul requantizes
 * them (kernels/quant.h): (float)acc * (a_scale * b_scale / y_scale) in float32, rounded half
 * to even, plus y_zero_point, saturated to y's dtype.
 *
 * When B has no batch dims and A's batch and row dims walk with one stride (a contiguous
 * activation times a weight), the batch is folded into M: one product, B packed once. */
#include <string.h>

#include "kernels/quant.h"

/* ---- geometry ------------------------------------------------------------------------------- */

typedef struct mm_geometry_t {
  const stax_tensor_t* a;
  const stax_tensor_t* b;
  int32_t batch_rank;
  int64_t batch_dims[STAX_MAX_RANK];
  int64_t batch_count;
  int64_t m, n, k;
  int32_t out_rank;
  int64_t out_dims[STAX_MAX_RANK];
} mm_geometry_t;

static stax_status_t mm_geometry(const stax_kernel_call_t* call, int32_t a_index,
                                 int32_t b_index, mm_geometry_t* g) {
  memset(g, 0, sizeof(*g));
  const stax_tensor_t* a = g->a = stax_kernel_input(call, a_index);
  const stax_tensor_t* b = g->b = stax_kernel_input(call, b_index);
  if (a == NULL || b == NULL) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing",
                             a == NULL ? a_index : b_index);
  }
  for (int32_t side = 0; side < 2; side++) {
    const stax_tensor_t* t = side ? b : a;
    if (t->dtype != STAX_DTYPE_INT8 && t->dtype != STAX_DTYPE_UINT8) {
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                               "input %d has dtype %s, expected int8 or uint8",
                               side ? b_index : a_index, stax_dtype_name(t->dtype));
    }
    if (t->rank < 1) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH, "input %d is a scalar; matmul needs "
                               "rank >= 1", side ? b_index : a_index);
    }
  }
  g->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
  g->k = a->dims[a->rank - 1];
  int32_t b_k_axis = b->rank >= 2 ? b->rank - 2 : 0;
  g->n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  if (b->dims[b_k_axis] != g->k) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "contraction dim: input %d dim %d is %lld but input %d dim %d is "
                             "%lld",
                             a_index, a->rank - 1, (long long)g->k, b_index, b_k_axis,
                             (long long)b->dims[b_k_axis]);
  }
  int32_t a_batch = a->rank > 2 ? a->rank - 2 : 0, b_batch = b->rank > 2 ? b->rank - 2 : 0;
  g->batch_rank = a_batch > b_batch ? a_batch : b_batch;
  g->batch_count = 1;
  for (int32_t d = 0; d < g->batch_rank; d++) {
    int32_t da = d - (g->batch_rank - a_batch), db = d - (g->batch_rank - b_batch);
    int64_t x = da >= 0 ? a->dims[da] : 1, y = db >= 0 ? b->dims[db] : 1;
    if (x != y && x != 1 && y != 1) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "batch dims do not broadcast: input %d dim %d is %lld, input %d "
                               "dim %d is %lld",
                               a_index, da, (long long)x, b_index, db, (long long)y);
    }
    g->batch_dims[d] = x == 1 ? y : x;
    g->batch_count *= g->batch_dims[d];
  }
  g->out_rank = 0;
  for (int32_t d = 0; d < g->batch_rank; d++) g->out_dims[g->out_rank++] = g->batch_dims[d];
  if (a->rank >= 2) g->out_dims[g->out_rank++] = g->m;
  if (b->rank >= 2) g->out_dims[g->out_rank++] = g->n;
  return STAX_OK;
}

/* Element offset of batch `index` (a multi-index over the output batch dims) in t, whose
 * first `t_batch` dims are its batch dims (right-aligned with the output's; size-1 dims
 * broadcast). */
static int64_t batch_offset(const stax_tensor_t* t, int32_t t_batch, const mm_geometry_t* g,
                            const int64_t* index) {
  int64_t offset = t->offset;
  for (int32_t d = 0; d < t_batch; d++) {
    if (t->dims[d] != 1) offset += index[g->batch_rank - t_batch + d] * t->strides[d];
  }
  return offset;
}

/* ---- quantization parameters ---------------------------------------------------------------- */

/* One zero point or scale input of side A (rows) or B (columns). */
typedef struct mm_param_t {
  const stax_tensor_t* t; /* NULL: absent (zero point 0) */
  int32_t batch_rank;     /* > 0 or the tensor has the matrix's rank: per batch */
  int64_t stride;         /* along M or N; 0 per tensor */
} mm_param_t;

static stax_status_t mm_param(const stax_kernel_call_t* call, int32_t index, const char* role,
                              const mm_geometry_t* g, bool rows, int32_t matrix_index,
                              mm_param_t* out) {
  memset(out, 0, sizeof(*out));
  const stax_tensor_t* t = out->t = stax_kernel_input(call, index);
  if (t == NULL) return STAX_OK;
  const stax_tensor_t* matrix = rows ? g->a : g->b;
  int64_t length = rows ? g->m : g->n;
  if (stax_tensor_element_count(t) == 1) return STAX_OK;
  if (t->rank == 1 && matrix->rank >= 2 && t->dims[0] == length) {
    out->stride = t->strides[0];
    return STAX_OK;
  }
  bool ok = t->rank == matrix->rank && matrix->rank >= 2;
  if (ok) {
    int32_t along = rows ? t->rank - 2 : t->rank - 1, other = rows ? t->rank - 1 : t->rank - 2;
    ok = t->dims[along] == length && t->dims[other] == 1;
    for (int32_t d = 0; ok && d < t->rank - 2; d++) {
      ok = t->dims[d] == 1 || t->dims[d] == matrix->dims[d];
    }
    out->batch_rank = t->rank - 2;
    out->stride = t->strides[along];
  }
  if (ok) return STAX_OK;
  return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                           "input %d (%s) has shape %s; it must have one element, or be %s = "
                           "[%lld] (per %s of input %d) or [..., %s] with input %d's batch dims",
                           index, role, stax_dims_text(t->rank, t->dims).text,
                           rows ? "[M]" : "[N]", (long long)length, rows ? "row" : "column",
                           matrix_index, rows ? "M, 1" : "1, N", matrix_index);
}

/* The parameter's entries for one batch as int32 (zero points) or float (scales). */
static void mm_param_ints(const mm_param_t* p, const mm_geometry_t* g, const int64_t* index,
                          int64_t length, int32_t* out) {
  const void* base = stax_buffer_data(p->t->buffer);
  int64_t offset = batch_offset(p->t, p->batch_rank, g, index);
  for (int64_t r = 0; r < length; r++) {
    out[r] = (int32_t)stax_load_as_i64(p->t->dtype, base, offset + r * p->stride);
  }
}

static void mm_param_floats(const mm_param_t* p, const mm_geometry_t* g, const int64_t* index,
                            int64_t length, float* out) {
  const void* base = stax_buffer_data(p->t->buffer);
  int64_t offset = batch_offset(p->t, p->batch_rank, g, index);
  for (int64_t r = 0; r < length; r++) {
    out[r] = (float)stax_load_as_f64(p->t->dtype, base, offset + r * p->stride);
  }
}

/* ---- the product -------------------------------------------------------------------------- */

typedef struct mm_quant_t {
  mm_param_t a_zero, b_zero;
  /* QLinearMatMul only */
  bool requantize;
  mm_param_t a_scale, b_scale, y_scale, y_zero;
  stax_dtype_t y_dtype;
} mm_quant_t;

/* Requantizes an M x N block of sums into y (contiguous rows of N). */
static void mm_requantize(const mm_quant_t* q, const mm_geometry_t* g, const int64_t* index,
                          int64_t m, int64_t row_period, const int32_t* acc, void* y,
                          int64_t y_index, float* scratch) {
  float* a_scale = scratch;
  float* y_scale = a_scale + row_period;
  float* b_scale = y_scale + row_period;
  int32_t* y_zero = (int32_t*)(b_scale + g->n);
  mm_param_floats(&q->a_scale, g, index, q->a_scale.stride ? row_period : 1, a_scale);
  mm_param_floats(&q->y_scale, g, index, q->y_scale.stride ? row_period : 1, y_scale);
  mm_param_floats(&q->b_scale, g, index, q->b_scale.stride ? g->n : 1, b_scale);
  mm_param_ints(&q->y_zero, g, index, q->y_zero.stride ? row_period : 1, y_zero);
  int64_t low = 0, high = 0;
  stax_quant_range(q->y_dtype, &low, &high);
  for (int64_t r = 0; r < m; r++) {
    int64_t rr = r % row_period;
    float sa = a_scale[q->a_scale.stride ? rr : 0], sy = y_scale[q->y_scale.stride ? rr : 0];
    int32_t zy = y_zero[q->y_zero.stride ? rr : 0];
    for (int64_t c = 0; c < g->n; c++) {
      float multiplier = sa * b_scale[q->b_scale.stride ? c : 0] / sy;
      float value = (float)acc[r * g->n + c] * multiplier;
      stax_quant_store(q->y_dtype, y, y_index + r * g->n + c,
                       stax_quant_saturate(value, zy, low, high));
    }
  }
}

static stax_status_t mm_run(stax_kernel_call_t* call, const mm_geometry_t* g,
                            const mm_quant_t* q, stax_tensor_t* y) {
  const stax_tensor_t* a = g->a;
  const stax_tensor_t* b = g->b;
  int32_t a_batch = a->rank > 2 ? a->rank - 2 : 0, b_batch = b->rank > 2 ? b->rank - 2 : 0;
  /* Fold A's batch into M when B and B's parameters are shared by every batch and A's
   * batch-and-row dims walk with one stride. */
  int64_t rows = g->m, a_row_stride = a->rank >= 2 ? a->strides[a->rank - 2] : 0;
  int64_t batches = g->batch_count;
  bool shared = b_batch == 0 && q->b_zero.batch_rank == 0 &&
                (!q->requantize || q->b_scale.batch_rank == 0) && q->a_zero.batch_rank == 0 &&
                (!q->requantize || (q->a_scale.batch_rank == 0 && q->y_scale.batch_rank == 0 &&
                                    q->y_zero.batch_rank == 0));
  if (shared && a_batch > 0 && a->rank >= 2 &&
      stax_shape_lead_rows(a->rank - 1, a->dims, a->strides, &rows, &a_row_stride)) {
    batches = 1;
  } else {
    rows = g->m;
    a_row_stride = a->rank >= 2 ? a->strides[a->rank - 2] : 0;
  }
  int64_t n = g->n;
  size_t acc_bytes = q->requantize ? (size_t)rows * (size_t)n * sizeof(int32_t) : 0;
  size_t zero_bytes = ((size_t)rows + (size_t)n) * sizeof(int32_t);
  size_t scale_bytes = q->requantize ? (2 * (size_t)g->m + (size_t)n + (size_t)g->m) * 4 : 0;
  size_t total = acc_bytes + zero_bytes + scale_bytes;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc_aligned(call->allocator, total, 64, &memory));
  int32_t* acc = q->requantize ? memory : NULL;
  int32_t* a_zero = (int32_t*)((char*)memory + acc_bytes);
  int32_t* b_zero = a_zero + rows;
  float* scratch = (float*)(b_zero + n);
  void* y_data = stax_buffer_data(y->buffer);
  int64_t index[STAX_MAX_RANK] = {0};
  stax_status_t status = STAX_OK;
  for (int64_t batch = 0; batch < batches && status == STAX_OK; batch++) {
    if (batch > 0) {
      for (int32_t d = g->batch_rank - 1; d >= 0; d--) {
        if (++index[d] < g->batch_dims[d]) break;
        index[d] = 0;
      }
    }
    const int32_t* a_zero_use = NULL;
    const int32_t* b_zero_use = NULL;
    if (q->a_zero.t) {
      int64_t length = q->a_zero.stride ? g->m : 1;
      mm_param_ints(&q->a_zero, g, index, length, a_zero);
      for (int64_t r = length; r < rows; r++) a_zero[r] = a_zero[q->a_zero.stride ? r % g->m : 0];
      a_zero_use = a_zero;
    }
    if (q->b_zero.t) {
      int64_t length = q->b_zero.stride ? n : 1;
      mm_param_ints(&q->b_zero, g, index, length, b_zero);
      for (int64_t c = length; c < n; c++) b_zero[c] = b_zero[0];
      b_zero_use = b_zero;
    }
    stax_gemm_int_operand_t ao = {a->dtype,
                                  (const char*)stax_buffer_data(a->buffer) +
                                      batch_offset(a, a_batch, g, index),
                                  a_row_stride, a->strides[a->rank - 1]};
    stax_gemm_int_operand_t bo = {b->dtype,
                                  (const char*)stax_buffer_data(b->buffer) +
                                      batch_offset(b, b_batch, g, index),
                                  b->rank >= 2 ? b->strides[b->rank - 2] : b->strides[0],
                                  b->rank >= 2 ? b->strides[b->rank - 1] : 0};
    /* batch_offset counts elements; the operands' dtypes are one byte wide. */
    int64_t y_index = y->offset + batch * rows * n;
    int32_t* c = q->requantize ? acc : (int32_t*)y_data + y_index;
    status = stax_gemm_int(call->allocator, call->pool, rows, n, g->k, &ao, a_zero_use, &bo,
                           b_zero_use, c, n);
    if (status == STAX_OK && q->requantize) {
      mm_requantize(q, g, index, rows, g->m, acc, y_data, y_index, scratch);
    }
  }
  stax_allocator_free_aligned(call->allocator, memory, total, 64);
  return status;
}

/* ---- the ops -------------------------------------------------------------------------------- */

stax_status_t stax_kernel_MatMulInteger(stax_kernel_call_t* call) {
  mm_geometry_t g;
  STAX_RETURN_IF_ERROR(mm_geometry(call, 0, 1, &g));
  STAX_RETURN_IF_ERROR(stax_quant_require_dtype(call, 2, "a_zero_point", g.a->dtype, 0, "A"));
  STAX_RETURN_IF_ERROR(stax_quant_require_dtype(call, 3, "b_zero_point", g.b->dtype, 1, "B"));
  mm_quant_t q = {0};
  STAX_RETURN_IF_ERROR(mm_param(call, 2, "a_zero_point", &g, true, 0, &q.a_zero));
  STAX_RETURN_IF_ERROR(mm_param(call, 3, "b_zero_point", &g, false, 1, &q.b_zero));
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, STAX_DTYPE_INT32, g.out_rank, g.out_dims, &y));
  stax_status_t status = mm_run(call, &g, &q, y);
  if (status != STAX_OK) stax_kernel_release_outputs(call);
  return status;
}

stax_status_t stax_kernel_QLinearMatMul(stax_kernel_call_t* call) {
  mm_geometry_t g;
  STAX_RETURN_IF_ERROR(mm_geometry(call, 0, 3, &g));
  STAX_RETURN_IF_ERROR(stax_quant_require_scale_dtype(call, 1, "a_scale"));
  STAX_RETURN_IF_ERROR(stax_quant_require_scale_dtype(call, 4, "b_scale"));
  STAX_RETURN_IF_ERROR(stax_quant_require_scale_dtype(call, 6, "y_scale"));
  STAX_RETURN_IF_ERROR(stax_quant_require_dtype(call, 2, "a_zero_point", g.a->dtype, 0, "a"));
  STAX_RETURN_IF_ERROR(stax_quant_require_dtype(call, 5, "b_zero_point", g.b->dtype, 3, "b"));
  const stax_tensor_t* y_zero = stax_kernel_input(call, 7);
  if (y_zero == NULL) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 7 (y_zero_point) is missing");
  }
  if (y_zero->dtype != STAX_DTYPE_INT8 && y_zero->dtype != STAX_DTYPE_UINT8) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 7 (y_zero_point) has dtype %s, expected int8 or uint8",
                             stax_dtype_name(y_zero->dtype));
  }
  mm_quant_t q = {.requantize = true, .y_dtype = y_zero->dtype};
  STAX_RETURN_IF_ERROR(mm_param(call, 1, "a_scale", &g, true, 0, &q.a_scale));
  STAX_RETURN_IF_ERROR(mm_param(call, 2, "a_zero_point", &g, true, 0, &q.a_zero));
  STAX_RETURN_IF_ERROR(mm_param(call, 4, "b_scale", &g, false, 3, &q.b_scale));
  STAX_RETURN_IF_ERROR(mm_param(call, 5, "b_zero_point", &g, false, 3, &q.b_zero));
  STAX_RETURN_IF_ERROR(mm_param(call, 6, "y_scale", &g, true, 0, &q.y_scale));
  STAX_RETURN_IF_ERROR(mm_param(call, 7, "y_zero_point", &g, true, 0, &q.y_zero));
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, q.y_dtype, g.out_rank, g.out_dims, &y));
  stax_status_t status = mm_run(call, &g, &q, y);
  if (status != STAX_OK) stax_kernel_release_outputs(call);
  return status;
}
