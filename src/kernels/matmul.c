/* MatMul (numpy matmul: 1-D promotion, broadcast batch dims) and Gemm (transA/transB, alpha,
 * beta, C broadcast into [M, N]), plus the strided batched matmul that Einsum reuses.
 *
 * Floating-point products go through the packed GEMM core (gemm_f32.c): float32 and float64
 * directly, float16/bfloat16 widened to float32 while packing and accumulated in float32 (one
 * rounding per output). Integer products use a blocked loop in unsigned arithmetic, so
 * overflow wraps modulo 2^bits as in numpy/ONNX Runtime instead of being undefined behaviour.
 *
 * Batches run one after another with the core splitting each product over the pool, or, when
 * the matrices are small or many, in parallel with one single-threaded product per task. */
#include <string.h>

#include "kernels/gemm.h"

/* Below this many multiply-adds per matrix, batches are split over the pool instead. */
#define MATMUL_SMALL_PRODUCT (1 << 18)
/* Column block of the integer loop: its accumulator row lives on the stack. */
#define MATMUL_INT_BLOCK 256

static int64_t matrix_batch_count(const stax_matrix_batch_t* m) {
  int64_t count = 1;
  for (int32_t d = 0; d < m->batch_rank; d++) count *= m->batch_dims[d];
  return count;
}

/* Element offset of matrix `index` (row-major over batch_dims) within a batch. */
static int64_t matrix_batch_offset(const stax_matrix_batch_t* m, int64_t index) {
  int64_t offset = 0;
  for (int32_t d = m->batch_rank - 1; d >= 0; d--) {
    int64_t dim = m->batch_dims[d];
    offset += (index % dim) * m->batch_strides[d];
    index /= dim;
  }
  return offset;
}

static void* element_at(const stax_matrix_batch_t* m, int64_t offset) {
  return (char*)m->data + offset * (int64_t)stax_dtype_size(m->dtype);
}

/* ---- integer products -------------------------------------------------------------------- */

/* out = a x b over one matrix, accumulating in acc_t (unsigned, at least as wide as int) so
 * every product and sum wraps; converting back keeps the low bits, which is the wrapped
 * result for signed types as well. */
#define MATMUL_INTEGER(name, elem_t, acc_t)                                                        \
  static void name(const stax_matrix_batch_t* a, int64_t a_offset, const stax_matrix_batch_t* b,   \
                   int64_t b_offset, const stax_matrix_batch_t* out, int64_t out_offset) {         \
    const elem_t* a_data = (const elem_t*)a->data + a_offset;                                      \
    const elem_t* b_data = (const elem_t*)b->data + b_offset;                                      \
    elem_t* out_data = (elem_t*)out->data + out_offset;                                            \
    const int64_t m = out->rows, n = out->cols, k = a->cols;                                       \
    acc_t acc[MATMUL_INT_BLOCK] = {0};                                                             \
    for (int64_t j0 = 0; j0 < n; j0 += MATMUL_INT_BLOCK) {                                         \
      int64_t width = n - j0 < MATMUL_INT_BLOCK ? n - j0 : MATMUL_INT_BLOCK;                       \
      for (int64_t i = 0; i < m; i++) {                                                            \
        for (int64_t j = 0; j < width; j++) acc[j] = 0;                                            \
        const elem_t* a_row = a_data + i * a->row_stride;                                          \
        for (int64_t p = 0; p < k; p++) {                                                          \
          acc_t scale = (acc_t)a_row[p * a->col_stride];                                           \
          if (scale == 0) continue;                                                                \
          const elem_t* b_row = b_data + p * b->row_stride + j0 * b->col_stride;                   \
          if (b->col_stride == 1) {                                                                \
            for (int64_t j = 0; j < width; j++) acc[j] += scale * (acc_t)b_row[j];                 \
          } else {                                                                                 \
            for (int64_t j = 0; j < width; j++) acc[j] += scale * (acc_t)b_row[j * b->col_stride]; \
          }                                                                                        \
        }                                                                                          \
        elem_t* out_row = out_data + i * out->row_stride + j0 * out->col_stride;                   \
        for (int64_t j = 0; j < width; j++) out_row[j * out->col_stride] = (elem_t)acc[j];         \
      }                                                                                            \
    }                                                                                              \
  }

MATMUL_INTEGER(matmul_int8, int8_t, uint32_t)
MATMUL_INTEGER(matmul_int16, int16_t, uint32_t)
MATMUL_INTEGER(matmul_int32, int32_t, uint32_t)
MATMUL_INTEGER(matmul_int64, int64_t, uint64_t)
MATMUL_INTEGER(matmul_uint8, uint8_t, uint32_t)
MATMUL_INTEGER(matmul_uint16, uint16_t, uint32_t)
MATMUL_INTEGER(matmul_uint32, uint32_t, uint32_t)
MATMUL_INTEGER(matmul_uint64, uint64_t, uint64_t)

typedef void (*matmul_integer_fn)(const stax_matrix_batch_t* a, int64_t a_offset,
                                  const stax_matrix_batch_t* b, int64_t b_offset,
                                  const stax_matrix_batch_t* out, int64_t out_offset);

static matmul_integer_fn matmul_integer_for(stax_dtype_t dtype) {
  switch (dtype) {
    case STAX_DTYPE_INT8:
      return matmul_int8;
    case STAX_DTYPE_INT16:
      return matmul_int16;
    case STAX_DTYPE_INT32:
      return matmul_int32;
    case STAX_DTYPE_INT64:
      return matmul_int64;
    case STAX_DTYPE_UINT8:
      return matmul_uint8;
    case STAX_DTYPE_UINT16:
      return matmul_uint16;
    case STAX_DTYPE_UINT32:
      return matmul_uint32;
    case STAX_DTYPE_UINT64:
      return matmul_uint64;
    default:
      return NULL;
  }
}

/* ---- the batch driver -------------------------------------------------------------------- */

typedef struct matmul_plan_t {
  const stax_matrix_batch_t* a;
  const stax_matrix_batch_t* b;
  const stax_matrix_batch_t* out;
  stax_dtype_t compute_dtype; /* FLOAT32/FLOAT64 for the core; INVALID for integers */
  matmul_integer_fn integer;
  char* scratch;          /* group_count slots of slot_bytes */
  size_t workspace_bytes; /* the core's packing space, at the start of a slot */
  size_t slot_bytes;      /* + M*N float32 for half outputs */
  int64_t batch_count, group_count;
  stax_threadpool_t* inner_pool; /* for the core: the pool when batches run one by one */
  const void* prepacked_b;       /* B packed once (a constant weight), or NULL */
} matmul_plan_t;

/* One matrix of the batch, with the slot's scratch. */
static void matmul_one(const matmul_plan_t* plan, int64_t index, char* slot) {
  const stax_matrix_batch_t *a = plan->a, *b = plan->b, *out = plan->out;
  int64_t a_offset = matrix_batch_offset(a, index), b_offset = matrix_batch_offset(b, index);
  int64_t out_offset = matrix_batch_offset(out, index);
  if (plan->integer) {
    plan->integer(a, a_offset, b, b_offset, out, out_offset);
    return;
  }
  const int64_t m = out->rows, n = out->cols, k = a->cols;
  stax_gemm_operand_t a_operand = {a->dtype, element_at(a, a_offset), a->row_stride, a->col_stride};
  stax_gemm_operand_t b_operand = {b->dtype, element_at(b, b_offset), b->row_stride, b->col_stride};
  if (!stax_dtype_is_half(out->dtype)) {
    stax_gemm_run_prepacked(plan->compute_dtype, slot, plan->inner_pool, m, n, k, 1.0, &a_operand,
                            &b_operand, plan->prepacked_b, 0.0, element_at(out, out_offset),
                            out->row_stride, out->col_stride);
    return;
  }
  float* product = (float*)(slot + plan->workspace_bytes);
  stax_gemm_run_prepacked(STAX_DTYPE_FLOAT32, slot, plan->inner_pool, m, n, k, 1.0, &a_operand,
                          &b_operand, plan->prepacked_b, 0.0, product, n, 1);
  uint16_t* target = element_at(out, out_offset);
  bool bf16 = out->dtype == STAX_DTYPE_BFLOAT16;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      float v = product[i * n + j];
      target[i * out->row_stride + j * out->col_stride] =
          bf16 ? stax_f32_to_bf16(v) : stax_f32_to_f16(v);
    }
  }
}

/* Group g runs batches [g*count/groups, (g+1)*count/groups) with slot g. */
static void matmul_groups(void* opaque, int64_t begin, int64_t end) {
  const matmul_plan_t* plan = opaque;
  for (int64_t g = begin; g < end; g++) {
    char* slot = plan->scratch ? plan->scratch + (size_t)g * plan->slot_bytes : NULL;
    int64_t first = g * plan->batch_count / plan->group_count;
    int64_t last = (g + 1) * plan->batch_count / plan->group_count;
    for (int64_t index = first; index < last; index++) matmul_one(plan, index, slot);
  }
}

/* B packed once and kept with its buffer when B is a constant weight shared by every batch
 * index (NULL otherwise: the core packs it per call). Packing costs about what one call's
 * packing does, once. */
static const void* prepacked_b(stax_buffer_t* buffer, const stax_gemm_operand_t* operand,
                               stax_dtype_t compute_dtype, int64_t n, int64_t k) {
  if (!buffer || !buffer->immutable || n <= 0 || k <= 0) return NULL;
  int64_t offset = (int64_t)((const char*)operand->data - (const char*)stax_buffer_data(buffer));
  size_t size = stax_gemm_prepacked_b_size(compute_dtype, n, k);
  uint64_t key = stax_gemm_prepacked_b_key(compute_dtype, n, k, operand, offset);
  const void* packed = stax_buffer_derived_get(buffer, key, size);
  if (packed) return packed;
  void* fresh = NULL;
  stax_status_t status = stax_allocator_malloc_aligned(stax_allocator_system(), size, 64, &fresh);
  if (status) { /* no memory for it: pack per call as usual */
    stax_status_free(status);
    return NULL;
  }
  stax_gemm_prepack_b(compute_dtype, n, k, operand, fresh);
  return stax_buffer_derived_put(buffer, key, fresh, size);
}

static const void* matmul_prepacked_b(const stax_matrix_batch_t* b, stax_dtype_t compute_dtype,
                                      int64_t n, int64_t k) {
  for (int32_t d = 0; d < b->batch_rank; d++)
    if (b->batch_strides[d] != 0 && b->batch_dims[d] != 1) return NULL;
  stax_gemm_operand_t operand = {b->dtype, b->data, b->row_stride, b->col_stride};
  return prepacked_b(b->buffer, &operand, compute_dtype, n, k);
}

/* stax_gemm with B packed once when it is a constant (Gemm's weight, often transB). */
static stax_status_t gemm_constant_b(const stax_kernel_call_t* call, stax_dtype_t compute, int64_t m,
                                     int64_t n, int64_t k, double alpha,
                                     const stax_gemm_operand_t* a, const stax_gemm_operand_t* b,
                                     stax_buffer_t* b_buffer, double beta, void* y) {
  const void* packed = prepacked_b(b_buffer, b, compute, n, k);
  if (!packed)
    return stax_gemm(call->allocator, compute, call->pool, m, n, k, alpha, a, b, beta, y, n, 1);
  size_t bytes = stax_gemm_workspace_size(compute, m, n, k);
  void* workspace = NULL;
  if (bytes > 0)
    STAX_RETURN_IF_ERROR(stax_allocator_malloc_aligned(call->allocator, bytes, 64, &workspace),
                         "gemm workspace of %zu bytes", bytes);
  stax_gemm_run_prepacked(compute, workspace, call->pool, m, n, k, alpha, a, b, packed, beta, y, n,
                          1);
  if (workspace) stax_allocator_free_aligned(call->allocator, workspace, bytes, 64);
  return STAX_OK;
}

stax_status_t stax_matmul_batched(const stax_kernel_call_t* call, const stax_matrix_batch_t* a,
                                  const stax_matrix_batch_t* b, const stax_matrix_batch_t* out) {
  matmul_plan_t plan;
  memset(&plan, 0, sizeof(plan));
  plan.a = a;
  plan.b = b;
  plan.out = out;
  plan.batch_count = matrix_batch_count(out);
  if (plan.batch_count == 0 || out->rows == 0 || out->cols == 0) return STAX_OK;
  const int64_t m = out->rows, n = out->cols, k = a->cols;
  if (stax_dtype_is_integer(out->dtype)) {
    plan.integer = matmul_integer_for(out->dtype);
  } else if (out->dtype == STAX_DTYPE_FLOAT64) {
    plan.compute_dtype = STAX_DTYPE_FLOAT64;
  } else if (out->dtype == STAX_DTYPE_FLOAT32 || stax_dtype_is_half(out->dtype)) {
    plan.compute_dtype = STAX_DTYPE_FLOAT32;
  }
  if (!plan.integer && plan.compute_dtype != STAX_DTYPE_FLOAT32 &&
      plan.compute_dtype != STAX_DTYPE_FLOAT64) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "no matrix product for %s",
                             stax_dtype_name(out->dtype));
  }

  int32_t threads = call->pool ? stax_threadpool_thread_count(call->pool) : 1;
  double work = (double)m * (double)n * (double)k;
  /* Splitting one product over the pool pays a fork and a join per product; with at least two
   * products per thread (attention's QK^T and P.V: batch x heads of them) whole products per
   * task keep every thread busy with none of that. */
  bool batches_in_parallel = threads > 1 && plan.batch_count > 1 &&
                             (work < MATMUL_SMALL_PRODUCT || plan.batch_count >= 2 * threads);
  plan.group_count =
      batches_in_parallel ? (plan.batch_count < 4 * threads ? plan.batch_count : 4 * threads) : 1;
  plan.inner_pool = batches_in_parallel ? NULL : call->pool;
  if (!plan.integer) {
    plan.workspace_bytes = stax_gemm_workspace_size(plan.compute_dtype, m, n, k);
    plan.slot_bytes = plan.workspace_bytes;
    if (stax_dtype_is_half(out->dtype)) plan.slot_bytes += (size_t)(m * n) * sizeof(float);
    plan.slot_bytes = (plan.slot_bytes + 63) / 64 * 64;
  }
  if (!plan.integer) plan.prepacked_b = matmul_prepacked_b(b, plan.compute_dtype, n, k);
  size_t scratch_bytes = plan.slot_bytes * (size_t)plan.group_count;
  if (scratch_bytes > 0) {
    void* scratch = NULL;
    STAX_RETURN_IF_ERROR(
        stax_allocator_malloc_aligned(call->allocator, scratch_bytes, 64, &scratch),
        "%s node '%s': matmul scratch of %zu bytes", stax_op_name(call->node->op), call->node->name,
        scratch_bytes);
    plan.scratch = scratch;
  }
  if (batches_in_parallel) {
    stax_parallel_for(call->pool, plan.group_count, 1, matmul_groups, &plan);
  } else {
    matmul_groups(&plan, 0, 1);
  }
  if (plan.scratch) stax_allocator_free_aligned(call->allocator, plan.scratch, scratch_bytes, 64);
  return STAX_OK;
}

/* ---- MatMul ------------------------------------------------------------------------------ */

static bool matmul_dtype_supported(stax_dtype_t dtype) {
  return stax_dtype_is_float(dtype) || matmul_integer_for(dtype) != NULL;
}

/* Batch strides of `tensor`'s leading `batch_rank` dims seen from an output batch of
 * `out_batch_rank` dims: 0 where the tensor lacks the dim or has size 1. */
static void batch_strides_for(const stax_tensor_t* tensor, int32_t batch_rank,
                              int32_t out_batch_rank, int64_t* out_strides) {
  int32_t lead = out_batch_rank - batch_rank;
  for (int32_t d = 0; d < out_batch_rank; d++) {
    int32_t td = d - lead;
    out_strides[d] = td < 0 || tensor->dims[td] == 1 ? 0 : tensor->strides[td];
  }
}

static void* tensor_first_element(const stax_tensor_t* tensor) {
  return (char*)stax_buffer_data(tensor->buffer) +
         tensor->offset * (int64_t)stax_dtype_size(tensor->dtype);
}

stax_status_t stax_kernel_MatMul(stax_kernel_call_t* call) {
  stax_tensor_t* a = stax_kernel_input(call, 0);
  stax_tensor_t* b = stax_kernel_input(call, 1);
  if (!a || !b) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "needs two inputs");
  if (a->dtype != b->dtype) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 0 is %s but input 1 is %s",
                             stax_dtype_name(a->dtype), stax_dtype_name(b->dtype));
  }
  if (!matmul_dtype_supported(a->dtype)) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "inputs must be numbers, got %s",
                             stax_dtype_name(a->dtype));
  }
  if (a->rank < 1 || b->rank < 1) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input %d is a scalar; MatMul needs rank >= 1", a->rank < 1 ? 0 : 1);
  }
  int32_t a_k_axis = a->rank - 1, b_k_axis = b->rank == 1 ? 0 : b->rank - 2;
  if (a->dims[a_k_axis] != b->dims[b_k_axis]) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "contraction dims differ: input 0 dim %d is %lld but input 1 dim %d "
                             "is %lld",
                             a_k_axis, (long long)a->dims[a_k_axis], b_k_axis,
                             (long long)b->dims[b_k_axis]);
  }
  int32_t a_batch = a->rank > 2 ? a->rank - 2 : 0, b_batch = b->rank > 2 ? b->rank - 2 : 0;
  int32_t batch_rank = a_batch > b_batch ? a_batch : b_batch;
  int64_t dims[STAX_MAX_RANK];
  for (int32_t d = 0; d < batch_rank; d++) {
    int32_t ad = d - (batch_rank - a_batch), bd = d - (batch_rank - b_batch);
    int64_t a_dim = ad >= 0 ? a->dims[ad] : 1, b_dim = bd >= 0 ? b->dims[bd] : 1;
    if (a_dim != b_dim && a_dim != 1 && b_dim != 1) {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "batch dims do not broadcast: input 0 dim %d is %lld but input 1 "
                               "dim %d is %lld",
                               ad, (long long)a_dim, bd, (long long)b_dim);
    }
    dims[d] = a_dim == 1 ? b_dim : a_dim;
  }
  int32_t rank = batch_rank;
  int64_t m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
  int64_t n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  if (a->rank >= 2) dims[rank++] = m;
  if (b->rank >= 2) dims[rank++] = n;
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, a->dtype, rank, dims, &y));

  stax_matrix_batch_t av = {a->dtype, tensor_first_element(a), batch_rank};
  stax_matrix_batch_t bv = {b->dtype, tensor_first_element(b), batch_rank};
  stax_matrix_batch_t yv = {y->dtype, tensor_first_element(y), batch_rank};
  for (int32_t d = 0; d < batch_rank; d++)
    av.batch_dims[d] = bv.batch_dims[d] = yv.batch_dims[d] = dims[d];
  batch_strides_for(a, a_batch, batch_rank, av.batch_strides);
  batch_strides_for(b, b_batch, batch_rank, bv.batch_strides);
  batch_strides_for(y, batch_rank, batch_rank, yv.batch_strides);
  av.rows = m;
  av.cols = a->dims[a_k_axis];
  av.row_stride = a->rank >= 2 ? a->strides[a->rank - 2] : 0;
  av.col_stride = a->strides[a_k_axis];
  bv.rows = b->dims[b_k_axis];
  bv.cols = n;
  bv.row_stride = b->strides[b_k_axis];
  bv.col_stride = b->rank >= 2 ? b->strides[b->rank - 1] : 0;
  bv.buffer = b->buffer;
  yv.rows = m;
  yv.cols = n;
  yv.row_stride = a->rank >= 2 ? y->strides[batch_rank] : 0;
  yv.col_stride = b->rank >= 2 ? y->strides[rank - 1] : 0;
  stax_status_t status = stax_matmul_batched(call, &av, &bv, &yv);
  if (status) stax_kernel_release_outputs(call);
  return status;
}

/* ---- Gemm -------------------------------------------------------------------------------- */

/* Integer element access keeping all 64 bits: signed types sign-extend, stores truncate. */
static uint64_t load_integer_bits(stax_dtype_t dtype, const void* base, int64_t i) {
  switch (dtype) {
    case STAX_DTYPE_INT8:
      return (uint64_t)(int64_t)((const int8_t*)base)[i];
    case STAX_DTYPE_INT16:
      return (uint64_t)(int64_t)((const int16_t*)base)[i];
    case STAX_DTYPE_INT32:
      return (uint64_t)(int64_t)((const int32_t*)base)[i];
    case STAX_DTYPE_INT64:
      return (uint64_t)((const int64_t*)base)[i];
    case STAX_DTYPE_UINT8:
      return ((const uint8_t*)base)[i];
    case STAX_DTYPE_UINT16:
      return ((const uint16_t*)base)[i];
    case STAX_DTYPE_UINT32:
      return ((const uint32_t*)base)[i];
    case STAX_DTYPE_UINT64:
      return ((const uint64_t*)base)[i];
    default:
      return 0;
  }
}

static void store_integer_bits(stax_dtype_t dtype, void* base, int64_t i, uint64_t v) {
  switch (dtype) {
    case STAX_DTYPE_INT8:
      ((int8_t*)base)[i] = (int8_t)v;
      break;
    case STAX_DTYPE_INT16:
      ((int16_t*)base)[i] = (int16_t)v;
      break;
    case STAX_DTYPE_INT32:
      ((int32_t*)base)[i] = (int32_t)v;
      break;
    case STAX_DTYPE_INT64:
      ((int64_t*)base)[i] = (int64_t)v;
      break;
    case STAX_DTYPE_UINT8:
      ((uint8_t*)base)[i] = (uint8_t)v;
      break;
    case STAX_DTYPE_UINT16:
      ((uint16_t*)base)[i] = (uint16_t)v;
      break;
    case STAX_DTYPE_UINT32:
      ((uint32_t*)base)[i] = (uint32_t)v;
      break;
    case STAX_DTYPE_UINT64:
      ((uint64_t*)base)[i] = v;
      break;
    default:
      break;
  }
}

/* Integer Gemm epilogue on the contiguous product y: y = alpha*y + beta*c. Exact with
 * wrap-around when alpha is 1 and beta is 0 or 1; otherwise through double, saturating. */
static void gemm_integer_epilogue(stax_tensor_t* y, const stax_tensor_t* c,
                                  const int64_t* c_strides, float alpha, float beta) {
  const int64_t m = y->dims[0], n = y->dims[1];
  void* y_data = tensor_first_element(y);
  const void* c_data = c ? tensor_first_element(c) : NULL;
  bool has_c = c && beta != 0.0f;
  if (alpha == 1.0f && (!has_c || beta == 1.0f)) {
    if (!has_c) return;
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < n; j++) {
        uint64_t sum = load_integer_bits(y->dtype, y_data, i * n + j) +
                       load_integer_bits(c->dtype, c_data, i * c_strides[0] + j * c_strides[1]);
        store_integer_bits(y->dtype, y_data, i * n + j, sum);
      }
    }
    return;
  }
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double value = (double)alpha * stax_load_as_f64(y->dtype, y_data, i * n + j);
      if (has_c)
        value +=
            (double)beta * stax_load_as_f64(c->dtype, c_data, i * c_strides[0] + j * c_strides[1]);
      stax_store_from_f64(y->dtype, y_data, i * n + j, value);
    }
  }
}

/* Writes C broadcast to [M, N] into a float buffer (float32 or float64 by compute dtype). */
static void gemm_fill_bias(const stax_tensor_t* c, const int64_t* c_strides,
                           stax_dtype_t compute_dtype, void* target, int64_t m, int64_t n,
                           int64_t row_stride) {
  const void* c_data = tensor_first_element(c);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      int64_t at = i * c_strides[0] + j * c_strides[1];
      double v;
      switch (c->dtype) {
        case STAX_DTYPE_FLOAT16:
          v = stax_f16_to_f32(((const uint16_t*)c_data)[at]);
          break;
        case STAX_DTYPE_BFLOAT16:
          v = stax_bf16_to_f32(((const uint16_t*)c_data)[at]);
          break;
        default:
          v = stax_load_as_f64(c->dtype, c_data, at);
          break;
      }
      if (compute_dtype == STAX_DTYPE_FLOAT64) {
        ((double*)target)[i * row_stride + j] = v;
      } else {
        ((float*)target)[i * row_stride + j] = (float)v;
      }
    }
  }
}

stax_status_t stax_kernel_Gemm(stax_kernel_call_t* call) {
  stax_tensor_t* a = stax_kernel_input(call, 0);
  stax_tensor_t* b = stax_kernel_input(call, 1);
  stax_tensor_t* c = stax_kernel_input(call, 2);
  if (!a || !b) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "needs inputs A and B");
  for (int32_t i = 1; i < 3; i++) {
    const stax_tensor_t* other = i == 1 ? b : c;
    if (other && other->dtype != a->dtype) {
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 0 is %s but input %d is %s",
                               stax_dtype_name(a->dtype), i, stax_dtype_name(other->dtype));
    }
  }
  if (!matmul_dtype_supported(a->dtype)) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "inputs must be numbers, got %s",
                             stax_dtype_name(a->dtype));
  }
  if (a->rank != 2 || b->rank != 2) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "inputs A and B must be 2-D, got ranks %d and %d", a->rank, b->rank);
  }
  int64_t trans_a = 0, trans_b = 0;
  float alpha = 1.0f, beta = 1.0f;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "transA", 0, &trans_a));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "transB", 0, &trans_b));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "alpha", 1.0f, &alpha));
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, "beta", 1.0f, &beta));
  int32_t m_axis = trans_a ? 1 : 0, a_k_axis = trans_a ? 0 : 1;
  int32_t b_k_axis = trans_b ? 1 : 0, n_axis = trans_b ? 0 : 1;
  const int64_t m = a->dims[m_axis], k = a->dims[a_k_axis], n = b->dims[n_axis];
  if (k != b->dims[b_k_axis]) {
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "contraction dims differ: input 0 dim %d is %lld but input 1 dim %d "
                             "is %lld",
                             a_k_axis, (long long)k, b_k_axis, (long long)b->dims[b_k_axis]);
  }
  int64_t c_strides[2] = {0, 0};
  if (c) {
    if (c->rank > 2) {
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "input 2 (C) must have rank <= 2, got %d", c->rank);
    }
    const int64_t target[2] = {m, n};
    for (int32_t d = 0; d < c->rank; d++) {
      int32_t axis = 2 - c->rank + d;
      if (c->dims[d] != 1 && c->dims[d] != target[axis]) {
        return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                                 "input 2 (C) dim %d is %lld, which does not broadcast to %s "
                                 "%lld",
                                 d, (long long)c->dims[d],
                                 axis == 0 ? "M =" : "N =", (long long)target[axis]);
      }
      c_strides[axis] = c->dims[d] == 1 ? 0 : c->strides[d];
    }
  }
  const int64_t dims[2] = {m, n};
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, a->dtype, 2, dims, &y));
  if (m == 0 || n == 0) return STAX_OK;

  stax_status_t status = STAX_OK;
  bool has_c = c && beta != 0.0f;
  stax_gemm_operand_t a_operand = {a->dtype, tensor_first_element(a), a->strides[m_axis],
                                   a->strides[a_k_axis]};
  stax_gemm_operand_t b_operand = {b->dtype, tensor_first_element(b), b->strides[b_k_axis],
                                   b->strides[n_axis]};
  if (stax_dtype_is_integer(a->dtype)) {
    stax_matrix_batch_t av = {a->dtype, (void*)a_operand.data, 0};
    stax_matrix_batch_t bv = {b->dtype, (void*)b_operand.data, 0};
    stax_matrix_batch_t yv = {y->dtype, tensor_first_element(y), 0};
    av.rows = m, av.cols = k, av.row_stride = a_operand.row_stride;
    av.col_stride = a_operand.col_stride;
    bv.rows = k, bv.cols = n, bv.row_stride = b_operand.row_stride;
    bv.col_stride = b_operand.col_stride;
    yv.rows = m, yv.cols = n, yv.row_stride = n, yv.col_stride = 1;
    status = stax_matmul_batched(call, &av, &bv, &yv);
    if (!status) gemm_integer_epilogue(y, c, c_strides, alpha, beta);
  } else if (a->dtype == STAX_DTYPE_FLOAT32 || a->dtype == STAX_DTYPE_FLOAT64) {
    stax_dtype_t compute = a->dtype;
    void* y_data = tensor_first_element(y);
    if (has_c) gemm_fill_bias(c, c_strides, compute, y_data, m, n, n);
    status = gemm_constant_b(call, compute, m, n, k, alpha, &a_operand, &b_operand, b->buffer,
                             has_c ? beta : 0.0, y_data);
    if (status) status = stax_status_annotate(status, "Gemm node '%s'", call->node->name);
  } else {
    /* Halves: accumulate in a float32 copy of the result, round once at the end. */
    float* product = NULL;
    size_t bytes = (size_t)(m * n) * sizeof(float);
    status = stax_allocator_malloc_aligned(call->allocator, bytes, 64, (void**)&product);
    if (status) status = stax_status_annotate(status, "Gemm node '%s'", call->node->name);
    if (!status) {
      if (has_c) gemm_fill_bias(c, c_strides, STAX_DTYPE_FLOAT32, product, m, n, n);
      status = stax_gemm(call->allocator, STAX_DTYPE_FLOAT32, call->pool, m, n, k, alpha,
                         &a_operand, &b_operand, has_c ? beta : 0.0, product, n, 1);
      if (status) status = stax_status_annotate(status, "Gemm node '%s'", call->node->name);
      uint16_t* y_data = tensor_first_element(y);
      bool bf16 = a->dtype == STAX_DTYPE_BFLOAT16;
      for (int64_t i = 0; !status && i < m * n; i++)
        y_data[i] = bf16 ? stax_f32_to_bf16(product[i]) : stax_f32_to_f16(product[i]);
      stax_allocator_free_aligned(call->allocator, product, bytes, 64);
    }
  }
  if (status) stax_kernel_release_outputs(call);
  return status;
}
