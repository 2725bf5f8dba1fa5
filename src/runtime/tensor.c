/* Tensors: creation (fresh, zeroed, views over buffers, wrapped user memory), refcounting,
 * accessors, contiguity, and copies between any two views with dtype conversion. The view
 * operations themselves live in tensor_view.c. */
#include <stdio.h>
#include <string.h>

#include "runtime/tensor_internal.h"

/* Copies this large are split over the default thread pool (smaller ones are not worth the
 * hand-off). */
#define STAX_PARALLEL_COPY_MIN_ELEMENTS (INT64_C(1) << 18)

/* ---- shape helpers ---------------------------------------------------------------------- */

stax_dims_text_t stax_dims_text(int32_t rank, const int64_t* dims) {
  stax_dims_text_t result;
  size_t used = 0;
  result.text[used++] = '[';
  for (int32_t k = 0; k < rank && dims; k++) {
    int written = snprintf(result.text + used, sizeof(result.text) - used, "%s%lld", k ? ", " : "",
                           (long long)dims[k]);
    if (written < 0 || (size_t)written >= sizeof(result.text) - used - 1) break;
    used += (size_t)written;
  }
  result.text[used++] = ']';
  result.text[used] = '\0';
  return result;
}

stax_status_t stax_shape_validate(const char* what, int32_t rank, const int64_t* dims,
                                  int64_t* out_count) {
  *out_count = 0;
  if (rank < 0 || rank > STAX_MAX_RANK) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s: rank %d is outside 0..%d", what, (int)rank,
                            STAX_MAX_RANK);
  }
  if (rank > 0 && dims == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s: rank %d but no dims given", what,
                            (int)rank);
  }
  int64_t count = 1;
  bool empty = false;
  for (int32_t k = 0; k < rank; k++) {
    if (dims[k] < 0) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s: dim %d of %s is negative (%lld)", what,
                              (int)k, stax_dims_text(rank, dims).text, (long long)dims[k]);
    }
    if (dims[k] == 0) empty = true;
  }
  /* An empty tensor's count is 0 however large its other dims; only non-empty ones can
   * overflow. */
  for (int32_t k = 0; k < rank && !empty; k++) {
    if (__builtin_mul_overflow(count, dims[k], &count)) {
      return stax_status_make(STAX_OUT_OF_RANGE, "%s: element count of %s overflows int64", what,
                              stax_dims_text(rank, dims).text);
    }
  }
  *out_count = empty ? 0 : count;
  return STAX_OK;
}

void stax_shape_contiguous_strides(int32_t rank, const int64_t* dims, int64_t* out_strides) {
  int64_t stride = 1;
  for (int32_t k = rank - 1; k >= 0; k--) {
    out_strides[k] = stride;
    /* Past an overflow or a 0 dim the strides are never used to reach an element. */
    if (dims[k] > 0 && __builtin_mul_overflow(stride, dims[k], &stride)) stride = 0;
  }
}

bool stax_shape_lead_rows(int32_t lead, const int64_t* dims, const int64_t* strides,
                          int64_t* out_rows, int64_t* out_row_stride) {
  int64_t rows = 1, row_stride = 0, inner = 0; /* inner: what the next outer dim must stride */
  for (int32_t d = lead - 1; d >= 0; d--) {
    if (__builtin_mul_overflow(rows, dims[d], &rows)) return false;
    if (dims[d] <= 1) continue;
    if (row_stride == 0) {
      row_stride = strides[d];
      if (row_stride == 0) return false; /* a broadcast lead dim is not rows */
    } else if (strides[d] != inner) {
      return false;
    }
    if (__builtin_mul_overflow(strides[d], dims[d], &inner)) return false;
  }
  *out_rows = rows;
  *out_row_stride = row_stride;
  return true;
}

bool stax_shape_extent(int32_t rank, const int64_t* dims, const int64_t* strides,
                       int64_t* out_lowest, int64_t* out_highest) {
  int64_t lowest = 0, highest = 0;
  *out_lowest = 0;
  *out_highest = 0;
  for (int32_t k = 0; k < rank; k++) {
    if (dims[k] == 0) return false;
  }
  for (int32_t k = 0; k < rank; k++) {
    int64_t reach;
    if (__builtin_mul_overflow(dims[k] - 1, strides[k], &reach)) return false;
    if (reach < 0 ? __builtin_add_overflow(lowest, reach, &lowest)
                  : __builtin_add_overflow(highest, reach, &highest)) {
      return false;
    }
  }
  *out_lowest = lowest;
  *out_highest = highest;
  return true;
}

static stax_status_t stax_check_dtype(const char* what, stax_dtype_t dtype) {
  if (!stax_dtype_is_valid(dtype)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s: invalid dtype %d", what, (int)dtype);
  }
  return STAX_OK;
}

/* ---- creation ----------------------------------------------------------------------------- */

stax_status_t stax_tensor_make_view(stax_allocator_t allocator, stax_buffer_t* buffer,
                                    stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                    const int64_t* strides, int64_t offset,
                                    stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  stax_tensor_t* tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, sizeof(*tensor), (void**)&tensor),
                       "while creating a %s tensor %s", stax_dtype_name(dtype),
                       stax_dims_text(rank, dims).text);
  memset(tensor, 0, sizeof(*tensor));
  atomic_init(&tensor->refcount, 1);
  tensor->allocator = allocator;
  tensor->buffer = buffer;
  stax_buffer_retain(buffer);
  tensor->dtype = dtype;
  tensor->rank = rank;
  tensor->offset = offset;
  for (int32_t k = 0; k < rank; k++) {
    tensor->dims[k] = dims[k];
    tensor->strides[k] = strides[k];
  }
  *out_tensor = tensor;
  return STAX_OK;
}

stax_status_t stax_tensor_create(stax_allocator_t allocator, stax_dtype_t dtype, int32_t rank,
                                 const int64_t* dims, stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  int64_t count = 0;
  STAX_RETURN_IF_ERROR(stax_check_dtype("tensor_create", dtype));
  STAX_RETURN_IF_ERROR(stax_shape_validate("tensor_create", rank, dims, &count));
  size_t element_size = stax_dtype_size(dtype);
  if ((uint64_t)count > SIZE_MAX / element_size) {
    return stax_status_make(STAX_OUT_OF_MEMORY, "tensor_create: %s tensor %s is too large",
                            stax_dtype_name(dtype), stax_dims_text(rank, dims).text);
  }
  stax_buffer_t* buffer = NULL;
  STAX_RETURN_IF_ERROR(stax_buffer_allocate(allocator, (size_t)count * element_size, &buffer),
                       "while creating a %s tensor %s", stax_dtype_name(dtype),
                       stax_dims_text(rank, dims).text);
  int64_t strides[STAX_MAX_RANK];
  stax_shape_contiguous_strides(rank, dims, strides);
  stax_status_t status =
      stax_tensor_make_view(allocator, buffer, dtype, rank, dims, strides, 0, out_tensor);
  stax_buffer_release(buffer); /* the tensor holds its own reference on success */
  return status;
}

stax_status_t stax_tensor_create_zeros(stax_allocator_t allocator, stax_dtype_t dtype, int32_t rank,
                                       const int64_t* dims, stax_tensor_t** out_tensor) {
  STAX_RETURN_IF_ERROR(stax_tensor_create(allocator, dtype, rank, dims, out_tensor));
  stax_buffer_t* buffer = (*out_tensor)->buffer;
  /* All-zero bytes are 0 (and +0.0, false) in every dtype. */
  memset(buffer->data, 0, buffer->size);
  return STAX_OK;
}

stax_status_t stax_tensor_create_view(stax_allocator_t allocator, stax_buffer_t* buffer,
                                      stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                      const int64_t* strides, int64_t offset,
                                      stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  int64_t count = 0;
  if (buffer == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "tensor_create_view: buffer is NULL");
  }
  STAX_RETURN_IF_ERROR(stax_check_dtype("tensor_create_view", dtype));
  STAX_RETURN_IF_ERROR(stax_shape_validate("tensor_create_view", rank, dims, &count));
  int64_t row_major[STAX_MAX_RANK];
  if (strides == NULL) {
    stax_shape_contiguous_strides(rank, dims, row_major);
    strides = row_major;
  }
  if (offset < 0) {
    return stax_status_make(STAX_OUT_OF_RANGE, "tensor_create_view: offset %lld is negative",
                            (long long)offset);
  }
  if (count > 0) {
    int64_t lowest = 0, highest = 0, end_bytes = 0;
    int64_t element_size = (int64_t)stax_dtype_size(dtype);
    bool in_range = stax_shape_extent(rank, dims, strides, &lowest, &highest) &&
                    offset + lowest >= 0 &&
                    !__builtin_add_overflow(offset, highest + 1, &end_bytes) &&
                    !__builtin_mul_overflow(end_bytes, element_size, &end_bytes) &&
                    (uint64_t)end_bytes <= (uint64_t)buffer->size;
    if (!in_range) {
      return stax_status_make(
          STAX_OUT_OF_RANGE,
          "tensor_create_view: %s view %s with strides %s at offset %lld reaches outside the "
          "%zu-byte buffer",
          stax_dtype_name(dtype), stax_dims_text(rank, dims).text,
          stax_dims_text(rank, strides).text, (long long)offset, buffer->size);
    }
  }
  return stax_tensor_make_view(allocator, buffer, dtype, rank, dims, strides, offset, out_tensor);
}

stax_status_t stax_tensor_wrap(stax_allocator_t allocator, void* data, stax_dtype_t dtype,
                               int32_t rank, const int64_t* dims, const int64_t* strides,
                               stax_buffer_release_fn release, void* release_ctx,
                               stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  int64_t count = 0;
  STAX_RETURN_IF_ERROR(stax_check_dtype("tensor_wrap", dtype));
  STAX_RETURN_IF_ERROR(stax_shape_validate("tensor_wrap", rank, dims, &count));
  int64_t row_major[STAX_MAX_RANK];
  if (strides == NULL) {
    stax_shape_contiguous_strides(rank, dims, row_major);
    strides = row_major;
  }
  for (int32_t k = 0; k < rank; k++) {
    /* The buffer starts at `data`, so nothing may lie before it. */
    if (strides[k] < 0) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "tensor_wrap: stride %d is negative (%lld); wrap the lowest "
                              "address and slice with a negative step instead",
                              (int)k, (long long)strides[k]);
    }
  }
  int64_t size_bytes = 0;
  if (count > 0) {
    int64_t lowest = 0, highest = 0;
    if (!stax_shape_extent(rank, dims, strides, &lowest, &highest) ||
        __builtin_mul_overflow(highest + 1, (int64_t)stax_dtype_size(dtype), &size_bytes)) {
      return stax_status_make(STAX_OUT_OF_RANGE,
                              "tensor_wrap: view %s with strides %s spans more than int64 "
                              "bytes",
                              stax_dims_text(rank, dims).text, stax_dims_text(rank, strides).text);
    }
    if (data == NULL) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "tensor_wrap: data is NULL for a non-empty tensor %s",
                              stax_dims_text(rank, dims).text);
    }
  }
  stax_buffer_t* buffer = NULL;
  /* The release callback is attached only once nothing can fail, so on error the memory
   * stays the caller's, untouched. */
  STAX_RETURN_IF_ERROR(stax_buffer_wrap(allocator, data, (size_t)size_bytes, NULL, NULL, &buffer),
                       "in tensor_wrap");
  stax_status_t status =
      stax_tensor_make_view(allocator, buffer, dtype, rank, dims, strides, 0, out_tensor);
  if (status == STAX_OK) {
    buffer->release = release;
    buffer->release_ctx = release_ctx;
  }
  stax_buffer_release(buffer);
  return status;
}

void stax_tensor_retain(stax_tensor_t* tensor) {
  if (tensor) atomic_fetch_add_explicit(&tensor->refcount, 1, memory_order_relaxed);
}

void stax_tensor_release(stax_tensor_t* tensor) {
  if (tensor == NULL) return;
  if (atomic_fetch_sub_explicit(&tensor->refcount, 1, memory_order_acq_rel) != 1) return;
  if (tensor->is_sequence) stax_sequence_destroy_items(tensor);
  stax_buffer_release(tensor->buffer);
  stax_allocator_free(tensor->allocator, tensor, sizeof(*tensor));
}

/* ---- accessors ---------------------------------------------------------------------------- */

stax_dtype_t stax_tensor_dtype(const stax_tensor_t* tensor) { return tensor->dtype; }
int32_t stax_tensor_rank(const stax_tensor_t* tensor) { return tensor->rank; }
const int64_t* stax_tensor_dims(const stax_tensor_t* tensor) { return tensor->dims; }
const int64_t* stax_tensor_strides(const stax_tensor_t* tensor) { return tensor->strides; }
int64_t stax_tensor_offset(const stax_tensor_t* tensor) { return tensor->offset; }
stax_buffer_t* stax_tensor_buffer(const stax_tensor_t* tensor) { return tensor->buffer; }

int64_t stax_tensor_element_count(const stax_tensor_t* tensor) {
  int64_t count = 1;
  for (int32_t k = 0; k < tensor->rank; k++) count *= tensor->dims[k];
  return count;
}

void* stax_tensor_data(const stax_tensor_t* tensor) {
  if (tensor->buffer == NULL) return NULL; /* a sequence handle */
  return (char*)tensor->buffer->data + tensor->offset * (int64_t)stax_dtype_size(tensor->dtype);
}

bool stax_tensor_is_contiguous(const stax_tensor_t* tensor) {
  for (int32_t k = 0; k < tensor->rank; k++) {
    if (tensor->dims[k] == 0) return true;
  }
  int64_t expected = 1;
  for (int32_t k = tensor->rank - 1; k >= 0; k--) {
    /* A size-1 dim is never stepped along, so its stride does not matter. */
    if (tensor->dims[k] != 1 && tensor->strides[k] != expected) return false;
    expected *= tensor->dims[k];
  }
  return true;
}

/* ---- copies ------------------------------------------------------------------------------- */

/* A copy walk with dims merged wherever both sides are linear across the boundary, so most
 * copies become one long inner run. Strides here are in bytes. */
typedef struct stax_copy_plan_t {
  int32_t rank; /* >= 1 */
  int64_t dims[STAX_MAX_RANK];
  int64_t src_strides[STAX_MAX_RANK];
  int64_t dst_strides[STAX_MAX_RANK];
  const char* src;
  char* dst;
  stax_dtype_t src_dtype;
  stax_dtype_t dst_dtype;
} stax_copy_plan_t;

static void stax_copy_plan_init(stax_copy_plan_t* plan, const stax_tensor_t* src,
                                stax_tensor_t* dst) {
  int64_t src_size = (int64_t)stax_dtype_size(src->dtype);
  int64_t dst_size = (int64_t)stax_dtype_size(dst->dtype);
  plan->rank = 0;
  for (int32_t k = 0; k < src->rank; k++) {
    if (src->dims[k] == 1) continue;
    int32_t r = plan->rank;
    int64_t src_stride = src->strides[k] * src_size;
    int64_t dst_stride = dst->strides[k] * dst_size;
    if (r > 0 && plan->src_strides[r - 1] == src_stride * src->dims[k] &&
        plan->dst_strides[r - 1] == dst_stride * src->dims[k]) {
      plan->dims[r - 1] *= src->dims[k];
      plan->src_strides[r - 1] = src_stride;
      plan->dst_strides[r - 1] = dst_stride;
      continue;
    }
    plan->dims[r] = src->dims[k];
    plan->src_strides[r] = src_stride;
    plan->dst_strides[r] = dst_stride;
    plan->rank++;
  }
  if (plan->rank == 0) {
    plan->rank = 1;
    plan->dims[0] = 1;
    plan->src_strides[0] = src_size;
    plan->dst_strides[0] = dst_size;
  }
  plan->src = (const char*)stax_tensor_data(src);
  plan->dst = (char*)stax_tensor_data(dst);
  plan->src_dtype = src->dtype;
  plan->dst_dtype = dst->dtype;
}

static int64_t stax_copy_plan_rows(const stax_copy_plan_t* plan) {
  int64_t rows = 1;
  for (int32_t k = 0; k + 1 < plan->rank; k++) rows *= plan->dims[k];
  return rows;
}

/* Copies rows [begin, end) of the plan (a row is one run along the innermost merged dim). */
static void stax_copy_plan_run(void* ctx, int64_t begin, int64_t end) {
  const stax_copy_plan_t* plan = (const stax_copy_plan_t*)ctx;
  int32_t outer = plan->rank - 1;
  int64_t index[STAX_MAX_RANK] = {0};
  int64_t src_offset = 0, dst_offset = 0;
  int64_t rest = begin;
  for (int32_t k = outer - 1; k >= 0; k--) {
    index[k] = rest % plan->dims[k];
    rest /= plan->dims[k];
    src_offset += index[k] * plan->src_strides[k];
    dst_offset += index[k] * plan->dst_strides[k];
  }
  for (int64_t row = begin; row < end; row++) {
    stax_convert_strided(plan->src_dtype, plan->src + src_offset, plan->src_strides[outer],
                         plan->dst_dtype, plan->dst + dst_offset, plan->dst_strides[outer],
                         plan->dims[outer]);
    for (int32_t k = outer - 1; k >= 0; k--) {
      src_offset += plan->src_strides[k];
      dst_offset += plan->dst_strides[k];
      if (++index[k] < plan->dims[k]) break;
      src_offset -= index[k] * plan->src_strides[k];
      dst_offset -= index[k] * plan->dst_strides[k];
      index[k] = 0;
    }
  }
}

/* Byte range [first, last] a non-empty view touches. */
static void stax_tensor_byte_range(const stax_tensor_t* tensor, int64_t* out_first,
                                   int64_t* out_last) {
  int64_t lowest = 0, highest = 0;
  int64_t size = (int64_t)stax_dtype_size(tensor->dtype);
  (void)stax_shape_extent(tensor->rank, tensor->dims, tensor->strides, &lowest, &highest);
  *out_first = (tensor->offset + lowest) * size;
  *out_last = (tensor->offset + highest) * size + size - 1;
}

static stax_status_t stax_copy_between(const stax_tensor_t* src, stax_tensor_t* dst) {
  stax_copy_plan_t plan;
  stax_copy_plan_init(&plan, src, dst);
  int64_t rows = stax_copy_plan_rows(&plan);
  if (rows > 1 && stax_tensor_element_count(src) >= STAX_PARALLEL_COPY_MIN_ELEMENTS) {
    int64_t grain = STAX_PARALLEL_COPY_MIN_ELEMENTS / plan.dims[plan.rank - 1];
    stax_parallel_for(stax_threadpool_default(), rows, grain > 0 ? grain : 1, stax_copy_plan_run,
                      &plan);
  } else {
    stax_copy_plan_run(&plan, 0, rows);
  }
  return STAX_OK;
}

stax_status_t stax_tensor_copy_into(const stax_tensor_t* src, stax_tensor_t* dst) {
  if (src == NULL || dst == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "tensor_copy_into: %s tensor is NULL",
                            src == NULL ? "source" : "destination");
  }
  STAX_RETURN_IF_ERROR(stax_tensor_require_tensor(src, "tensor_copy_into: the source"));
  STAX_RETURN_IF_ERROR(stax_tensor_require_tensor(dst, "tensor_copy_into: the destination"));
  bool same_dims = src->rank == dst->rank;
  for (int32_t k = 0; same_dims && k < src->rank; k++) same_dims = src->dims[k] == dst->dims[k];
  if (!same_dims) {
    return stax_status_make(
        STAX_SHAPE_MISMATCH, "tensor_copy_into: source dims %s differ from destination dims %s",
        stax_dims_text(src->rank, src->dims).text, stax_dims_text(dst->rank, dst->dims).text);
  }
  if (stax_tensor_element_count(src) == 0) return STAX_OK;
  for (int32_t k = 0; k < dst->rank; k++) {
    if (dst->strides[k] == 0 && dst->dims[k] > 1) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "tensor_copy_into: destination dim %d (size %lld) is broadcast "
                              "(stride 0), so its elements alias",
                              (int)k, (long long)dst->dims[k]);
    }
  }
  if (src->buffer == dst->buffer) {
    int64_t src_first, src_last, dst_first, dst_last;
    stax_tensor_byte_range(src, &src_first, &src_last);
    stax_tensor_byte_range(dst, &dst_first, &dst_last);
    bool identical = src->dtype == dst->dtype && src->offset == dst->offset &&
                     memcmp(src->strides, dst->strides, sizeof(int64_t) * (size_t)src->rank) == 0;
    if (identical) return STAX_OK;
    if (src_first <= dst_last && dst_first <= src_last) {
      /* Overlapping views of one buffer: read everything before writing anything. */
      stax_tensor_t* staging = NULL;
      STAX_RETURN_IF_ERROR(
          stax_tensor_create(src->allocator, src->dtype, src->rank, src->dims, &staging),
          "while staging an overlapping copy");
      stax_status_t status = stax_copy_between(src, staging);
      if (status == STAX_OK) status = stax_copy_between(staging, dst);
      stax_tensor_release(staging);
      return status;
    }
  }
  return stax_copy_between(src, dst);
}

stax_status_t stax_tensor_copy(stax_allocator_t allocator, const stax_tensor_t* tensor,
                               stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  if (tensor == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "tensor_copy: tensor is NULL");
  }
  STAX_RETURN_IF_ERROR(stax_tensor_require_tensor(tensor, "tensor_copy: the value"));
  stax_tensor_t* copy = NULL;
  STAX_RETURN_IF_ERROR(
      stax_tensor_create(allocator, tensor->dtype, tensor->rank, tensor->dims, &copy),
      "in tensor_copy");
  stax_status_t status = stax_tensor_copy_into(tensor, copy);
  if (status != STAX_OK) {
    stax_tensor_release(copy);
    return status;
  }
  *out_tensor = copy;
  return STAX_OK;
}
