/* Helpers shared by the generic kernels: output allocation and checking, errors that name the
 * node, numpy broadcasting, row-wise N-d iteration, and dtype-generic scalar access. */
#include <stdio.h>
#include <string.h>

#include "kernels/kernel.h"

stax_status_t stax_kernel_error(const stax_kernel_call_t* call, stax_status_code_t code,
                                const char* fmt, ...) {
  char message[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  const char* op = call->node ? stax_op_name(call->node->op) : "kernel";
  const char* name = call->node && call->node->name ? call->node->name : "?";
  return stax_status_make(code, "%s node '%s': %s", op, name, message);
}

static void format_dims(char* buf, size_t size, int32_t rank, const int64_t* dims) {
  size_t used = 0;
  used += (size_t)snprintf(buf + used, size - used, "[");
  for (int32_t i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)dims[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

stax_status_t stax_kernel_output(stax_kernel_call_t* call, int32_t i, stax_dtype_t dtype,
                                 int32_t rank, const int64_t* dims,
                                 stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  if (i < 0 || i >= call->output_count)
    return stax_kernel_error(call, STAX_INTERNAL, "output %d requested, node has %d", i,
                             call->output_count);
  stax_tensor_t* existing = call->outputs[i];
  if (existing) {
    bool same = existing->dtype == dtype && existing->rank == rank;
    for (int32_t d = 0; same && d < rank; d++) same = existing->dims[d] == dims[d];
    if (!same) {
      char want[160], have[160];
      format_dims(want, sizeof(want), rank, dims);
      format_dims(have, sizeof(have), existing->rank, existing->dims);
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "output %d: inputs give %s %s but the model's shapes give %s %s",
                               i, stax_dtype_name(dtype), want, stax_dtype_name(existing->dtype),
                               have);
    }
    *out_tensor = existing;
    return STAX_OK;
  }
  int64_t bytes = (int64_t)stax_dtype_size(dtype);
  for (int32_t d = 0; d < rank; d++) {
    if (dims[d] < 0)
      return stax_kernel_error(call, STAX_INTERNAL, "output %d dim %d is negative (%lld)", i, d,
                               (long long)dims[d]);
    if (dims[d] != 0 && bytes > INT64_MAX / dims[d])
      return stax_kernel_error(call, STAX_OUT_OF_RANGE, "output %d is too large", i);
    bytes *= dims[d];
  }
  stax_buffer_t* buffer = NULL;
  STAX_RETURN_IF_ERROR(stax_buffer_allocate_pooled((size_t)bytes, &buffer),
                       "%s node '%s' output %d", stax_op_name(call->node->op), call->node->name,
                       i);
  stax_status_t status =
      stax_tensor_create_view(call->allocator, buffer, dtype, rank, dims, NULL, 0, out_tensor);
  stax_buffer_release(buffer); /* the tensor holds its own reference */
  if (status) return status;
  stax_kernel_set_output(call, i, *out_tensor);
  return STAX_OK;
}

void stax_kernel_set_output(stax_kernel_call_t* call, int32_t i, stax_tensor_t* tensor) {
  call->outputs[i] = tensor;
  if (i < 32) call->kernel_set_outputs |= 1u << i;
}

void stax_kernel_release_outputs(stax_kernel_call_t* call) {
  for (int32_t i = 0; i < call->output_count && i < 32; i++) {
    if (!(call->kernel_set_outputs & (1u << i))) continue;
    if (call->outputs[i]) stax_tensor_release(call->outputs[i]);
    call->outputs[i] = NULL;
  }
  call->kernel_set_outputs = 0;
}

stax_status_t stax_kernel_broadcast_shape(const stax_kernel_call_t* call, int32_t count,
                                          stax_tensor_t* const* tensors, int32_t* out_rank,
                                          int64_t* out_dims) {
  int32_t rank = 0;
  for (int32_t t = 0; t < count; t++)
    if (tensors[t] && tensors[t]->rank > rank) rank = tensors[t]->rank;
  for (int32_t d = 0; d < rank; d++) out_dims[d] = 1;
  for (int32_t t = 0; t < count; t++) {
    const stax_tensor_t* x = tensors[t];
    if (!x) continue;
    for (int32_t d = 0; d < x->rank; d++) {
      int32_t od = rank - x->rank + d;
      int64_t dim = x->dims[d];
      if (dim == out_dims[od] || dim == 1) continue;
      if (out_dims[od] == 1) {
        out_dims[od] = dim;
        continue;
      }
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input %d dim %d is %lld, which does not broadcast with %lld", t,
                               d, (long long)dim, (long long)out_dims[od]);
    }
  }
  *out_rank = rank;
  return STAX_OK;
}

void stax_kernel_broadcast_strides(const stax_tensor_t* tensor, int32_t rank,
                                   const int64_t* dims, int64_t* out_strides) {
  (void)dims;
  int32_t lead = rank - tensor->rank;
  for (int32_t d = 0; d < rank; d++) {
    if (d < lead) {
      out_strides[d] = 0;
    } else {
      int32_t td = d - lead;
      /* A size-1 dim never advances, whatever its stored stride. */
      out_strides[d] = tensor->dims[td] == 1 ? 0 : tensor->strides[td];
    }
  }
}

bool stax_kernel_merge_trailing(const stax_tensor_t* t, int32_t first, int64_t* out_stride) {
  int64_t stride = 0, extent = 1;
  bool seen = false;
  for (int32_t d = t->rank - 1; d >= first; d--) {
    if (t->dims[d] == 1) continue;
    if (!seen) {
      stride = t->strides[d];
      seen = true;
    } else if (t->strides[d] != stride * extent) {
      return false;
    }
    extent *= t->dims[d];
  }
  *out_stride = seen ? stride : 1;
  return true;
}

/* Iterates rows [row_begin, row_end) of the outer index space (product of dims[0..rank-2]). */
static void nd_rows_range(int32_t rank, const int64_t* dims, int32_t operand_count,
                          const int64_t* const* strides, const int64_t* base_offsets,
                          stax_nd_row_fn row, void* ctx, int64_t row_begin, int64_t row_end) {
  int64_t offsets[STAX_ND_MAX_OPERANDS];
  int64_t index[STAX_MAX_RANK];
  int64_t count = rank > 0 ? dims[rank - 1] : 1;
  int32_t outer = rank > 0 ? rank - 1 : 0;
  /* Decompose row_begin into the outer multi-index once, then step like an odometer. */
  int64_t rest = row_begin;
  for (int32_t d = outer - 1; d >= 0; d--) {
    index[d] = dims[d] ? rest % dims[d] : 0;
    rest = dims[d] ? rest / dims[d] : 0;
  }
  for (int32_t k = 0; k < operand_count; k++) {
    offsets[k] = base_offsets ? base_offsets[k] : 0;
    for (int32_t d = 0; d < outer; d++) offsets[k] += index[d] * strides[k][d];
  }
  for (int64_t r = row_begin; r < row_end; r++) {
    row(ctx, offsets, count);
    for (int32_t d = outer - 1; d >= 0; d--) {
      index[d]++;
      for (int32_t k = 0; k < operand_count; k++) offsets[k] += strides[k][d];
      if (index[d] < dims[d]) break;
      for (int32_t k = 0; k < operand_count; k++) offsets[k] -= index[d] * strides[k][d];
      index[d] = 0;
    }
  }
}

static int64_t nd_row_count(int32_t rank, const int64_t* dims) {
  int64_t rows = 1;
  for (int32_t d = 0; d < rank; d++) {
    if (dims[d] == 0) return 0;
    if (d < rank - 1) rows *= dims[d];
  }
  return rows;
}

void stax_nd_for_each_row(int32_t rank, const int64_t* dims, int32_t operand_count,
                          const int64_t* const* strides, const int64_t* base_offsets,
                          stax_nd_row_fn row, void* ctx) {
  int64_t rows = nd_row_count(rank, dims);
  if (rows == 0) return;
  nd_rows_range(rank, dims, operand_count, strides, base_offsets, row, ctx, 0, rows);
}

typedef struct nd_parallel_ctx_t {
  int32_t rank;
  const int64_t* dims;
  int32_t operand_count;
  const int64_t* const* strides;
  const int64_t* base_offsets;
  stax_nd_row_fn row;
  void* ctx;
  int64_t pieces; /* > 1: every row is split into this many column ranges, one task each */
} nd_parallel_ctx_t;

static void nd_parallel_chunk(void* opaque, int64_t begin, int64_t end) {
  nd_parallel_ctx_t* p = opaque;
  if (p->pieces <= 1) {
    nd_rows_range(p->rank, p->dims, p->operand_count, p->strides, p->base_offsets, p->row,
                  p->ctx, begin, end);
    return;
  }
  /* Task t is column range t % pieces of row t / pieces. */
  int32_t last = p->rank - 1; /* the split dim; the row index walks dims [0, last) */
  int64_t count = p->dims[last];
  for (int64_t t = begin; t < end; t++) {
    int64_t r = t / p->pieces, piece = t % p->pieces;
    int64_t c0 = count * piece / p->pieces, c1 = count * (piece + 1) / p->pieces;
    if (c1 <= c0) continue;
    int64_t offsets[STAX_ND_MAX_OPERANDS];
    for (int32_t k = 0; k < p->operand_count; k++) {
      int64_t offset = p->base_offsets ? p->base_offsets[k] : 0, rest = r;
      for (int32_t d = last - 1; d >= 0; d--) {
        offset += (rest % p->dims[d]) * p->strides[k][d];
        rest /= p->dims[d];
      }
      offsets[k] = offset + c0 * p->strides[k][last];
    }
    p->row(p->ctx, offsets, c1 - c0);
  }
}

/* Chunks of >= 32k elements of work, so small tensors stay on one thread. */
#define ND_GRAIN_WORK 32768

void stax_nd_for_each_row_parallel(stax_threadpool_t* pool, int32_t rank, const int64_t* dims,
                                   int32_t operand_count, const int64_t* const* strides,
                                   const int64_t* base_offsets, int64_t point_cost,
                                   stax_nd_row_fn row, void* ctx) {
  int64_t rows = nd_row_count(rank, dims);
  if (rows == 0) return;
  int64_t count = rank > 0 ? dims[rank - 1] : 1;
  int64_t cost = point_cost > 1 ? point_cost : 1;
  int64_t row_cost = count * cost;
  int64_t threads = pool ? stax_threadpool_thread_count(pool) : 1;
  nd_parallel_ctx_t p = {rank, dims, operand_count, strides, base_offsets, row, ctx, 1};
  if (threads > 1 && rank > 0 && rows < 2 * threads && row_cost >= 2 * ND_GRAIN_WORK) {
    /* Too few rows to share (a [6144] space of softmax rows is one row): split the rows. */
    int64_t pieces = row_cost / ND_GRAIN_WORK;
    if (pieces > 4 * threads) pieces = 4 * threads;
    if (pieces > count) pieces = count;
    p.pieces = pieces;
    stax_parallel_for(pool, rows * pieces, 1, nd_parallel_chunk, &p);
    return;
  }
  int64_t grain = row_cost >= ND_GRAIN_WORK ? 1 : (ND_GRAIN_WORK + row_cost - 1) / row_cost;
  if (!pool || rows <= grain) {
    nd_rows_range(rank, dims, operand_count, strides, base_offsets, row, ctx, 0, rows);
    return;
  }
  stax_parallel_for(pool, rows, grain, nd_parallel_chunk, &p);
}

double stax_load_as_f64(stax_dtype_t dtype, const void* base, int64_t index) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT16:
      return stax_f16_to_f32(((const uint16_t*)base)[index]);
    case STAX_DTYPE_BFLOAT16:
      return stax_bf16_to_f32(((const uint16_t*)base)[index]);
    case STAX_DTYPE_FLOAT32:
      return ((const float*)base)[index];
    case STAX_DTYPE_FLOAT64:
      return ((const double*)base)[index];
    case STAX_DTYPE_INT8:
      return ((const int8_t*)base)[index];
    case STAX_DTYPE_INT16:
      return ((const int16_t*)base)[index];
    case STAX_DTYPE_INT32:
      return ((const int32_t*)base)[index];
    case STAX_DTYPE_INT64:
      return (double)((const int64_t*)base)[index];
    case STAX_DTYPE_UINT8:
    case STAX_DTYPE_BOOL:
      return ((const uint8_t*)base)[index];
    case STAX_DTYPE_UINT16:
      return ((const uint16_t*)base)[index];
    case STAX_DTYPE_UINT32:
      return ((const uint32_t*)base)[index];
    case STAX_DTYPE_UINT64:
      return (double)((const uint64_t*)base)[index];
    default:
      return 0.0;
  }
}

void stax_store_from_f64(stax_dtype_t dtype, void* base, int64_t index, double value) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT16:
      ((uint16_t*)base)[index] = stax_f32_to_f16((float)value);
      return;
    case STAX_DTYPE_BFLOAT16:
      ((uint16_t*)base)[index] = stax_f32_to_bf16((float)value);
      return;
    case STAX_DTYPE_BOOL:
      ((uint8_t*)base)[index] = value != 0.0;
      return;
    case STAX_DTYPE_FLOAT32:
      ((float*)base)[index] = (float)value;
      return;
    case STAX_DTYPE_FLOAT64:
      ((double*)base)[index] = value;
      return;
    default:
      break;
  }
  /* Integers: ONNX Cast truncates toward zero; out-of-range and NaN are undefined there, we
   * saturate instead of invoking C undefined behaviour. */
  stax_convert_elements(STAX_DTYPE_FLOAT64, &value, dtype,
                        (char*)base + (size_t)index * stax_dtype_size(dtype), 1);
}

int64_t stax_load_as_i64(stax_dtype_t dtype, const void* base, int64_t index) {
  switch (dtype) {
    case STAX_DTYPE_INT64:
      return ((const int64_t*)base)[index];
    case STAX_DTYPE_INT32:
      return ((const int32_t*)base)[index];
    case STAX_DTYPE_INT16:
      return ((const int16_t*)base)[index];
    case STAX_DTYPE_INT8:
      return ((const int8_t*)base)[index];
    case STAX_DTYPE_UINT8:
    case STAX_DTYPE_BOOL:
      return ((const uint8_t*)base)[index];
    case STAX_DTYPE_UINT16:
      return ((const uint16_t*)base)[index];
    case STAX_DTYPE_UINT32:
      return ((const uint32_t*)base)[index];
    case STAX_DTYPE_UINT64: {
      uint64_t v = ((const uint64_t*)base)[index];
      return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    default: {
      double v = stax_load_as_f64(dtype, base, index);
      if (!(v == v)) return 0;
      if (v >= 9.2e18) return INT64_MAX;
      if (v <= -9.2e18) return INT64_MIN;
      return (int64_t)v;
    }
  }
}

stax_status_t stax_kernel_read_ints(const stax_kernel_call_t* call,
                                    const stax_tensor_t* tensor, const char* what,
                                    int64_t capacity, int64_t* out_values, int64_t* out_count) {
  *out_count = 0;
  if (!tensor) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "%s is missing", what);
  if (!stax_dtype_is_integer(tensor->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "%s must be an integer tensor, got %s",
                             what, stax_dtype_name(tensor->dtype));
  if (tensor->rank > 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "%s must be a scalar or 1-D, got rank %d",
                             what, tensor->rank);
  int64_t n = tensor->rank == 0 ? 1 : tensor->dims[0];
  if (n > capacity)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "%s has %lld values, at most %lld allowed",
                             what, (long long)n, (long long)capacity);
  const char* data = stax_buffer_data(tensor->buffer);
  int64_t stride = tensor->rank == 0 ? 0 : tensor->strides[0];
  for (int64_t i = 0; i < n; i++)
    out_values[i] = stax_load_as_i64(tensor->dtype, data, tensor->offset + i * stride);
  *out_count = n;
  return STAX_OK;
}
