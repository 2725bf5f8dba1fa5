/* Indexing kernels: Gather, GatherElements, GatherND, ScatterElements and ScatterND.
 *
 * Every kernel first loads its indices into a flat int64 array and checks all of them
 * (negative values count from the end); an index out of range is OUT_OF_RANGE naming its
 * value, its position in the indices tensor and the valid range, and nothing is read or
 * written before that check passes. The gathers then move element bytes (every dtype) in
 * parallel; the scatters run in index order, because with duplicate indices the order decides
 * the result, and reduce in the element's own type (integers wrap instead of overflowing). */
#include <stdio.h>
#include <string.h>

#include "kernels/movement.h"

/* ---- indices ------------------------------------------------------------------------------ */

typedef struct index_array_t {
  int64_t* values;
  int64_t count;
} index_array_t;

static void index_array_free(const stax_kernel_call_t* call, index_array_t* indices) {
  if (indices->values)
    stax_allocator_free(call->allocator, indices->values, sizeof(int64_t) * (size_t)(indices->count + 1));
  indices->values = NULL;
}

/* Loads every element of an integer tensor (any view) in row-major order. */
static stax_status_t index_array_load(const stax_kernel_call_t* call, const stax_tensor_t* tensor,
                                      const char* what, index_array_t* out) {
  out->values = NULL;
  out->count = 0;
  if (!stax_dtype_is_integer(tensor->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "%s must be int32 or int64, got %s", what,
                             stax_dtype_name(tensor->dtype));
  int64_t count = stax_tensor_element_count(tensor);
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, sizeof(int64_t) * (size_t)(count + 1),
                                             (void**)&out->values));
  out->count = count;
  const char* data = stax_buffer_data(tensor->buffer);
  int64_t index[STAX_MAX_RANK] = {0};
  for (int64_t i = 0; i < count; i++) {
    int64_t offset = tensor->offset;
    for (int32_t k = 0; k < tensor->rank; k++) offset += index[k] * tensor->strides[k];
    out->values[i] = stax_load_as_i64(tensor->dtype, data, offset);
    for (int32_t k = tensor->rank - 1; k >= 0; k--) {
      if (++index[k] < tensor->dims[k]) break;
      index[k] = 0;
    }
  }
  return STAX_OK;
}

/* Checks and normalizes indices in place. Entry i is bounded by bounds[i % period]
 * (period 1: one bound; period k: the components of GatherND/ScatterND tuples); axes[] names
 * the data axis of each bound in the message. */
static stax_status_t index_array_check(const stax_kernel_call_t* call, const char* what,
                                       const stax_tensor_t* tensor, index_array_t* indices,
                                       const int64_t* bounds, const int32_t* axes, int64_t period) {
  for (int64_t i = 0; i < indices->count; i++) {
    int64_t bound = bounds[period > 1 ? i % period : 0];
    int64_t value = indices->values[i];
    if (value >= -bound && value < bound) {
      if (value < 0) indices->values[i] = value + bound;
      continue;
    }
    int64_t position[STAX_MAX_RANK];
    int64_t rest = i;
    for (int32_t k = tensor->rank - 1; k >= 0; k--) {
      position[k] = tensor->dims[k] ? rest % tensor->dims[k] : 0;
      rest = tensor->dims[k] ? rest / tensor->dims[k] : 0;
    }
    int32_t axis = axes[period > 1 ? i % period : 0];
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "%s value %lld at position %s is out of range for input 0 axis %d of "
                             "size %lld (valid range [%lld, %lld])",
                             what, (long long)value, stax_dims_text(tensor->rank, position).text,
                             axis, (long long)bound, (long long)-bound, (long long)bound - 1);
  }
  return STAX_OK;
}

/* ---- strided blocks ----------------------------------------------------------------------- */

/* The layout of a block of a tensor (trailing dims, with the leading position fixed), with
 * size-1 dims dropped and linear neighbours merged so contiguous blocks become one run. */
typedef struct block_layout_t {
  int32_t rank; /* >= 1 */
  int64_t dims[STAX_MAX_RANK];
  int64_t strides[STAX_MAX_RANK];
  int64_t count;
} block_layout_t;

static void block_layout_init(block_layout_t* block, int32_t rank, const int64_t* dims,
                              const int64_t* strides) {
  block->rank = 0;
  block->count = 1;
  for (int32_t k = 0; k < rank; k++) {
    block->count *= dims[k];
    if (dims[k] == 1) continue;
    int32_t r = block->rank;
    if (r > 0 && block->strides[r - 1] == strides[k] * dims[k]) {
      block->dims[r - 1] *= dims[k];
      block->strides[r - 1] = strides[k];
      continue;
    }
    block->dims[r] = dims[k];
    block->strides[r] = strides[k];
    block->rank++;
  }
  if (block->rank == 0) {
    block->rank = 1;
    block->dims[0] = 1;
    block->strides[0] = 1;
  }
}

/* Calls run(ctx, run_index, src_offset, src_stride, count) for each innermost run of the block
 * starting at element offset `base`; runs are numbered in row-major order. */
typedef void (*block_run_fn)(void* ctx, int64_t run_index, int64_t src_offset, int64_t src_stride,
                             int64_t count);

static void block_for_each_run(const block_layout_t* block, int64_t base, block_run_fn run,
                               void* ctx) {
  if (block->count == 0) return;
  int32_t outer = block->rank - 1;
  int64_t runs = block->count / block->dims[outer];
  int64_t index[STAX_MAX_RANK] = {0};
  int64_t offset = base;
  for (int64_t r = 0; r < runs; r++) {
    run(ctx, r, offset, block->strides[outer], block->dims[outer]);
    for (int32_t k = outer - 1; k >= 0; k--) {
      offset += block->strides[k];
      if (++index[k] < block->dims[k]) break;
      offset -= index[k] * block->strides[k];
      index[k] = 0;
    }
  }
}

typedef struct block_copy_t {
  char* dst; /* contiguous destination of the whole block */
  int64_t run_length;
  const char* src; /* buffer data */
  size_t element_size;
} block_copy_t;

static void block_copy_run(void* ctx, int64_t run_index, int64_t src_offset, int64_t src_stride,
                           int64_t count) {
  const block_copy_t* c = ctx;
  int64_t size = (int64_t)c->element_size;
  stax_movement_copy_elements(c->dst + run_index * c->run_length * size, 1,
                              c->src + src_offset * size, src_stride, count, c->element_size);
}

/* Copies the block at element offset `base` of `src` into contiguous `dst`. */
static void block_copy(char* dst, const char* src, int64_t base, const block_layout_t* block,
                       size_t element_size) {
  block_copy_t c = {dst, block->dims[block->rank - 1], src, element_size};
  block_for_each_run(block, base, block_copy_run, &c);
}

/* ---- element-wise reductions for the scatters ------------------------------------------- */

typedef enum scatter_reduction_t {
  SCATTER_NONE,
  SCATTER_ADD,
  SCATTER_MUL,
  SCATTER_MAX,
  SCATTER_MIN
} scatter_reduction_t;

static stax_status_t read_reduction(const stax_kernel_call_t* call,
                                    scatter_reduction_t* out_reduction) {
  const char* name = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "reduction", "none", &name));
  static const char* const names[] = {"none", "add", "mul", "max", "min"};
  for (int32_t k = 0; k < 5; k++) {
    if (strcmp(name, names[k]) == 0) {
      *out_reduction = (scatter_reduction_t)k;
      return STAX_OK;
    }
  }
  return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                           "attribute 'reduction' must be none, add, mul, max or min, got \"%s\"",
                           name);
}

/* Integer add and mul go through the unsigned type of at least int's width, which wraps
 * instead of overflowing (and stays unsigned after the usual promotions). */
#define COMBINE_INTEGER(ctype, utype)                                       \
  do {                                                                      \
    ctype* d = (ctype*)dst;                                                 \
    const ctype* s = (const ctype*)src;                                     \
    for (int64_t i = 0; i < count; i++) {                                   \
      ctype a = d[i], b = s[i * stride];                                    \
      switch (reduction) {                                                  \
        case SCATTER_ADD: d[i] = (ctype)((utype)a + (utype)b); break;       \
        case SCATTER_MUL: d[i] = (ctype)((utype)a * (utype)b); break;       \
        case SCATTER_MAX: d[i] = a > b ? a : b; break;                      \
        case SCATTER_MIN: d[i] = a < b ? a : b; break;                      \
        default: d[i] = b; break;                                           \
      }                                                                     \
    }                                                                       \
  } while (0)

/* NaN propagates through max and min, as in ONNX's reference (numpy maximum / minimum). */
#define COMBINE_FLOAT(ctype, load, store)                                   \
  do {                                                                      \
    ctype* d = (ctype*)dst;                                                 \
    const ctype* s = (const ctype*)src;                                     \
    for (int64_t i = 0; i < count; i++) {                                   \
      double a = load(d[i]), b = load(s[i * stride]), r;                    \
      switch (reduction) {                                                  \
        case SCATTER_ADD: r = a + b; break;                                 \
        case SCATTER_MUL: r = a * b; break;                                 \
        case SCATTER_MAX: r = (a != a || b != b) ? a + b : (a > b ? a : b); break; \
        case SCATTER_MIN: r = (a != a || b != b) ? a + b : (a < b ? a : b); break; \
        default: r = b; break;                                              \
      }                                                                     \
      d[i] = store(r);                                                      \
    }                                                                       \
  } while (0)

static double load_f32(float v) { return v; }
static float store_f32(double v) { return (float)v; }
static double load_f64(double v) { return v; }
static double store_f64(double v) { return v; }
static double load_f16(uint16_t v) { return stax_f16_to_f32(v); }
static uint16_t store_f16(double v) { return stax_f64_to_f16(v); }
static double load_bf16(uint16_t v) { return stax_bf16_to_f32(v); }
static uint16_t store_bf16(double v) { return stax_f64_to_bf16(v); }

/* dst[i] = dst[i] (op) src[i * stride] for a contiguous dst run. */
static void combine_run(stax_dtype_t dtype, scatter_reduction_t reduction, void* dst,
                        const void* src, int64_t stride, int64_t count) {
  if (reduction == SCATTER_NONE) {
    /* Plain assignment moves bytes, exactly, for every dtype. */
    stax_movement_copy_elements(dst, 1, src, stride, count, stax_dtype_size(dtype));
    return;
  }
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: COMBINE_FLOAT(float, load_f32, store_f32); return;
    case STAX_DTYPE_FLOAT64: COMBINE_FLOAT(double, load_f64, store_f64); return;
    case STAX_DTYPE_FLOAT16: COMBINE_FLOAT(uint16_t, load_f16, store_f16); return;
    case STAX_DTYPE_BFLOAT16: COMBINE_FLOAT(uint16_t, load_bf16, store_bf16); return;
    case STAX_DTYPE_INT8: COMBINE_INTEGER(int8_t, uint32_t); return;
    case STAX_DTYPE_INT16: COMBINE_INTEGER(int16_t, uint32_t); return;
    case STAX_DTYPE_INT32: COMBINE_INTEGER(int32_t, uint32_t); return;
    case STAX_DTYPE_INT64: COMBINE_INTEGER(int64_t, uint64_t); return;
    case STAX_DTYPE_UINT8: COMBINE_INTEGER(uint8_t, uint32_t); return;
    case STAX_DTYPE_UINT16: COMBINE_INTEGER(uint16_t, uint32_t); return;
    case STAX_DTYPE_UINT32: COMBINE_INTEGER(uint32_t, uint32_t); return;
    case STAX_DTYPE_UINT64: COMBINE_INTEGER(uint64_t, uint64_t); return;
    case STAX_DTYPE_BOOL: {
      /* Booleans: add is or, mul is and (numpy's bool arithmetic). */
      uint8_t* d = dst;
      const uint8_t* s = src;
      for (int64_t i = 0; i < count; i++) {
        uint8_t a = d[i] != 0, b = s[i * stride] != 0;
        switch (reduction) {
          case SCATTER_ADD: case SCATTER_MAX: d[i] = a | b; break;
          case SCATTER_MUL: case SCATTER_MIN: d[i] = a & b; break;
          default: d[i] = b; break;
        }
      }
      return;
    }
    default:
      return;
  }
}

#undef COMBINE_INTEGER
#undef COMBINE_FLOAT

/* ---- Gather ------------------------------------------------------------------------------- */

typedef struct gather_plan_t {
  const int64_t* indices;
  int64_t index_count;
  int32_t axis;
  const int64_t* data_dims;
  const int64_t* data_strides;
  int64_t data_offset;
  const char* data; /* buffer data */
  block_layout_t inner;
  int64_t inner_count;
  char* out;
  size_t element_size;
} gather_plan_t;

/* Items are (outer position, index) pairs in output order. */
static void gather_items(void* ctx, int64_t begin, int64_t end) {
  const gather_plan_t* p = ctx;
  int64_t size = (int64_t)p->element_size;
  for (int64_t item = begin; item < end; item++) {
    int64_t outer = item / p->index_count;
    int64_t j = item % p->index_count;
    int64_t offset = p->data_offset + p->indices[j] * p->data_strides[p->axis];
    for (int32_t k = p->axis - 1; k >= 0; k--) {
      offset += (outer % p->data_dims[k]) * p->data_strides[k];
      outer /= p->data_dims[k];
    }
    block_copy(p->out + item * p->inner_count * size, p->data, offset, &p->inner, p->element_size);
  }
}

static int64_t grain_for(int64_t work_per_item) {
  return work_per_item >= 16384 ? 1 : 16384 / (work_per_item > 0 ? work_per_item : 1);
}

stax_status_t stax_kernel_Gather(stax_kernel_call_t* call) {
  stax_tensor_t *data = NULL, *indices_tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 1, &indices_tensor));
  if (data->rank == 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is a scalar; Gather needs rank >= 1");
  int64_t axis_value = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis_value));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, data->rank, "axis", &axis));
  int32_t out_rank = data->rank - 1 + indices_tensor->rank;
  if (out_rank > STAX_MAX_RANK)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "the output would have rank %d; at most %d is supported", out_rank,
                             STAX_MAX_RANK);
  int64_t dims[STAX_MAX_RANK];
  int32_t r = 0;
  for (int32_t k = 0; k < axis; k++) dims[r++] = data->dims[k];
  for (int32_t k = 0; k < indices_tensor->rank; k++) dims[r++] = indices_tensor->dims[k];
  for (int32_t k = axis + 1; k < data->rank; k++) dims[r++] = data->dims[k];

  index_array_t indices;
  STAX_RETURN_IF_ERROR(index_array_load(call, indices_tensor, "indices (input 1)", &indices));
  stax_status_t status = index_array_check(call, "indices (input 1)", indices_tensor, &indices,
                                           &data->dims[axis], &axis, 1);
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  if (status == STAX_OK)
    status = stax_movement_contiguous_output(call, 0, data->dtype, out_rank, dims, &out);
  if (status == STAX_OK && stax_tensor_element_count(out) > 0) {
    gather_plan_t plan;
    memset(&plan, 0, sizeof(plan));
    plan.indices = indices.values;
    plan.index_count = indices.count;
    plan.axis = axis;
    plan.data_dims = data->dims;
    plan.data_strides = data->strides;
    plan.data_offset = data->offset;
    plan.data = stax_buffer_data(data->buffer);
    block_layout_init(&plan.inner, data->rank - axis - 1, data->dims + axis + 1,
                      data->strides + axis + 1);
    plan.inner_count = plan.inner.count;
    plan.out = stax_tensor_data(out);
    plan.element_size = stax_dtype_size(data->dtype);
    int64_t outer = 1;
    for (int32_t k = 0; k < axis; k++) outer *= data->dims[k];
    stax_parallel_for(call->pool, outer * indices.count, grain_for(plan.inner_count), gather_items,
                      &plan);
  }
  if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
  index_array_free(call, &indices);
  return status;
}

/* ---- GatherElements / ScatterElements ----------------------------------------------------- */

/* Checks the shared shape rules: indices (and updates) have data's rank and fit inside data
 * on every axis but `axis`. */
static stax_status_t check_elements_shapes(const stax_kernel_call_t* call, const stax_tensor_t* data,
                                           const stax_tensor_t* indices, int32_t axis) {
  if (indices->rank != data->rank)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "indices (input 1) has rank %d but input 0 has rank %d",
                             indices->rank, data->rank);
  for (int32_t k = 0; k < data->rank; k++) {
    if (k != axis && indices->dims[k] > data->dims[k])
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "indices (input 1) %s exceeds input 0 %s on axis %d",
                               stax_dims_text(indices->rank, indices->dims).text,
                               stax_dims_text(data->rank, data->dims).text, k);
  }
  return STAX_OK;
}

typedef struct gather_elements_plan_t {
  const int64_t* indices;
  const int64_t* index_dims;
  int32_t rank;
  int32_t axis;
  const int64_t* data_strides;
  int64_t data_offset;
  const char* data;
  char* out;
  size_t element_size;
} gather_elements_plan_t;

static void gather_elements_items(void* ctx, int64_t begin, int64_t end) {
  const gather_elements_plan_t* p = ctx;
  int64_t size = (int64_t)p->element_size;
  for (int64_t item = begin; item < end; item++) {
    int64_t rest = item;
    int64_t offset = p->data_offset;
    for (int32_t k = p->rank - 1; k >= 0; k--) {
      int64_t coordinate = rest % p->index_dims[k];
      rest /= p->index_dims[k];
      offset += (k == p->axis ? p->indices[item] : coordinate) * p->data_strides[k];
    }
    memcpy(p->out + item * size, p->data + offset * size, p->element_size);
  }
}

stax_status_t stax_kernel_GatherElements(stax_kernel_call_t* call) {
  stax_tensor_t *data = NULL, *indices_tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 1, &indices_tensor));
  if (data->rank == 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 is a scalar; GatherElements needs rank >= 1");
  int64_t axis_value = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis_value));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, data->rank, "axis", &axis));
  STAX_RETURN_IF_ERROR(check_elements_shapes(call, data, indices_tensor, axis));
  index_array_t indices;
  STAX_RETURN_IF_ERROR(index_array_load(call, indices_tensor, "indices (input 1)", &indices));
  stax_status_t status = index_array_check(call, "indices (input 1)", indices_tensor, &indices,
                                           &data->dims[axis], &axis, 1);
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  if (status == STAX_OK)
    status = stax_movement_contiguous_output(call, 0, data->dtype, indices_tensor->rank,
                                             indices_tensor->dims, &out);
  if (status == STAX_OK && indices.count > 0) {
    gather_elements_plan_t plan = {indices.values, indices_tensor->dims, data->rank, axis,
                                   data->strides, data->offset, stax_buffer_data(data->buffer),
                                   stax_tensor_data(out), stax_dtype_size(data->dtype)};
    stax_parallel_for(call->pool, indices.count, 16384, gather_elements_items, &plan);
  }
  if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
  index_array_free(call, &indices);
  return status;
}

stax_status_t stax_kernel_ScatterElements(stax_kernel_call_t* call) {
  stax_tensor_t *data = NULL, *indices_tensor = NULL, *updates = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 1, &indices_tensor));
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 2, &updates));
  if (data->rank == 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 is a scalar; ScatterElements needs rank >= 1");
  if (updates->dtype != data->dtype)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "updates (input 2) is %s but input 0 is %s",
                             stax_dtype_name(updates->dtype), stax_dtype_name(data->dtype));
  bool same_shape = updates->rank == indices_tensor->rank;
  for (int32_t k = 0; same_shape && k < updates->rank; k++)
    same_shape = updates->dims[k] == indices_tensor->dims[k];
  if (!same_shape)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "updates (input 2) %s must have the shape of indices (input 1) %s",
                             stax_dims_text(updates->rank, updates->dims).text,
                             stax_dims_text(indices_tensor->rank, indices_tensor->dims).text);
  int64_t axis_value = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis_value));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, data->rank, "axis", &axis));
  scatter_reduction_t reduction = SCATTER_NONE;
  STAX_RETURN_IF_ERROR(read_reduction(call, &reduction));
  STAX_RETURN_IF_ERROR(check_elements_shapes(call, data, indices_tensor, axis));
  index_array_t indices;
  STAX_RETURN_IF_ERROR(index_array_load(call, indices_tensor, "indices (input 1)", &indices));
  stax_status_t status = index_array_check(call, "indices (input 1)", indices_tensor, &indices,
                                           &data->dims[axis], &axis, 1);
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  if (status == STAX_OK)
    status = stax_movement_contiguous_output(call, 0, data->dtype, data->rank, data->dims, &out);
  if (status == STAX_OK) status = stax_movement_annotate(call, stax_tensor_copy_into(data, out));
  if (status == STAX_OK && indices.count > 0) {
    char* out_data = stax_tensor_data(out);
    const char* update_data = stax_buffer_data(updates->buffer);
    int64_t size = (int64_t)stax_dtype_size(data->dtype);
    for (int64_t item = 0; item < indices.count; item++) {
      int64_t rest = item;
      int64_t out_offset = 0, update_offset = updates->offset;
      for (int32_t k = data->rank - 1; k >= 0; k--) {
        int64_t coordinate = rest % indices_tensor->dims[k];
        rest /= indices_tensor->dims[k];
        out_offset += (k == axis ? indices.values[item] : coordinate) * out->strides[k];
        update_offset += coordinate * updates->strides[k];
      }
      combine_run(data->dtype, reduction, out_data + out_offset * size,
                  update_data + update_offset * size, 1, 1);
    }
  }
  if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
  index_array_free(call, &indices);
  return status;
}

/* ---- GatherND / ScatterND ----------------------------------------------------------------- */

typedef struct gather_nd_plan_t {
  const int64_t* indices; /* tuple t at indices + t * components */
  int32_t components;
  int32_t batch_dims;
  int64_t tuples_per_batch;
  const int64_t* data_dims;
  const int64_t* data_strides;
  int64_t data_offset;
  const char* data;
  block_layout_t slab;
  char* out;
  size_t element_size;
} gather_nd_plan_t;

static void gather_nd_items(void* ctx, int64_t begin, int64_t end) {
  const gather_nd_plan_t* p = ctx;
  int64_t size = (int64_t)p->element_size;
  for (int64_t t = begin; t < end; t++) {
    int64_t offset = p->data_offset;
    int64_t batch = t / p->tuples_per_batch;
    for (int32_t k = p->batch_dims - 1; k >= 0; k--) {
      offset += (batch % p->data_dims[k]) * p->data_strides[k];
      batch /= p->data_dims[k];
    }
    const int64_t* tuple = p->indices + t * p->components;
    for (int32_t c = 0; c < p->components; c++)
      offset += tuple[c] * p->data_strides[p->batch_dims + c];
    block_copy(p->out + t * p->slab.count * size, p->data, offset, &p->slab, p->element_size);
  }
}

/* Shape checks shared by GatherND and ScatterND: indices' last dim k picks a slab of data
 * after batch_dims + k axes. Returns the per-component bounds and axes for the index check. */
static stax_status_t check_nd_indices(const stax_kernel_call_t* call, const stax_tensor_t* data,
                                      const stax_tensor_t* indices, int32_t batch_dims,
                                      int32_t* out_components, int64_t* bounds, int32_t* axes) {
  if (indices->rank < 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "indices (input 1) must have rank >= 1");
  int64_t components = indices->dims[indices->rank - 1];
  if (components > data->rank - batch_dims)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "indices (input 1) last dim is %lld but input 0 has only %d axes "
                             "after %d batch dims",
                             (long long)components, data->rank - batch_dims, batch_dims);
  for (int32_t k = 0; k < batch_dims; k++) {
    if (indices->dims[k] != data->dims[k])
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "batch dim %d differs: indices (input 1) %s, input 0 %s", k,
                               stax_dims_text(indices->rank, indices->dims).text,
                               stax_dims_text(data->rank, data->dims).text);
  }
  for (int32_t c = 0; c < components; c++) {
    axes[c] = batch_dims + c;
    bounds[c] = data->dims[batch_dims + c];
  }
  *out_components = (int32_t)components;
  return STAX_OK;
}

stax_status_t stax_kernel_GatherND(stax_kernel_call_t* call) {
  stax_tensor_t *data = NULL, *indices_tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 1, &indices_tensor));
  int64_t batch_value = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "batch_dims", 0, &batch_value));
  if (batch_value < 0 || batch_value >= data->rank || batch_value >= indices_tensor->rank)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "batch_dims = %lld must be >= 0 and below both input ranks (%d, %d)",
                             (long long)batch_value, data->rank, indices_tensor->rank);
  int32_t batch_dims = (int32_t)batch_value;
  int32_t components = 0;
  int64_t bounds[STAX_MAX_RANK];
  int32_t axes[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(
      check_nd_indices(call, data, indices_tensor, batch_dims, &components, bounds, axes));
  int32_t out_rank = indices_tensor->rank - 1 + data->rank - batch_dims - components;
  if (out_rank > STAX_MAX_RANK)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "the output would have rank %d; at most %d is supported", out_rank,
                             STAX_MAX_RANK);
  int64_t dims[STAX_MAX_RANK];
  int32_t r = 0;
  for (int32_t k = 0; k < indices_tensor->rank - 1; k++) dims[r++] = indices_tensor->dims[k];
  for (int32_t k = batch_dims + components; k < data->rank; k++) dims[r++] = data->dims[k];

  index_array_t indices;
  STAX_RETURN_IF_ERROR(index_array_load(call, indices_tensor, "indices (input 1)", &indices));
  stax_status_t status = STAX_OK;
  if (components > 0)
    status = index_array_check(call, "indices (input 1)", indices_tensor, &indices, bounds, axes,
                               components);
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  if (status == STAX_OK)
    status = stax_movement_contiguous_output(call, 0, data->dtype, out_rank, dims, &out);
  if (status == STAX_OK && stax_tensor_element_count(out) > 0) {
    gather_nd_plan_t plan;
    memset(&plan, 0, sizeof(plan));
    plan.indices = indices.values;
    plan.components = components;
    plan.batch_dims = batch_dims;
    int64_t tuples = 1, tuples_per_batch = 1;
    for (int32_t k = 0; k < indices_tensor->rank - 1; k++) {
      tuples *= indices_tensor->dims[k];
      if (k >= batch_dims) tuples_per_batch *= indices_tensor->dims[k];
    }
    plan.tuples_per_batch = tuples_per_batch;
    plan.data_dims = data->dims;
    plan.data_strides = data->strides;
    plan.data_offset = data->offset;
    plan.data = stax_buffer_data(data->buffer);
    int32_t slab_axis = batch_dims + components;
    block_layout_init(&plan.slab, data->rank - slab_axis, data->dims + slab_axis,
                      data->strides + slab_axis);
    plan.out = stax_tensor_data(out);
    plan.element_size = stax_dtype_size(data->dtype);
    stax_parallel_for(call->pool, tuples, grain_for(plan.slab.count), gather_nd_items, &plan);
  }
  if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
  index_array_free(call, &indices);
  return status;
}

typedef struct scatter_run_t {
  stax_dtype_t dtype;
  scatter_reduction_t reduction;
  char* dst; /* contiguous slab in the output */
  int64_t run_length;
  const char* src;
  size_t element_size;
} scatter_run_t;

static void scatter_nd_run(void* ctx, int64_t run_index, int64_t src_offset, int64_t src_stride,
                           int64_t count) {
  const scatter_run_t* s = ctx;
  int64_t size = (int64_t)s->element_size;
  combine_run(s->dtype, s->reduction, s->dst + run_index * s->run_length * size,
              s->src + src_offset * size, src_stride, count);
}

stax_status_t stax_kernel_ScatterND(stax_kernel_call_t* call) {
  stax_tensor_t *data = NULL, *indices_tensor = NULL, *updates = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 1, &indices_tensor));
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 2, &updates));
  if (updates->dtype != data->dtype)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "updates (input 2) is %s but input 0 is %s",
                             stax_dtype_name(updates->dtype), stax_dtype_name(data->dtype));
  scatter_reduction_t reduction = SCATTER_NONE;
  STAX_RETURN_IF_ERROR(read_reduction(call, &reduction));
  int32_t components = 0;
  int64_t bounds[STAX_MAX_RANK];
  int32_t axes[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(check_nd_indices(call, data, indices_tensor, 0, &components, bounds, axes));
  /* updates = indices.shape[:-1] + data.shape[k:] */
  int32_t want_rank = indices_tensor->rank - 1 + data->rank - components;
  int64_t want[2 * STAX_MAX_RANK];
  int32_t r = 0;
  for (int32_t k = 0; k < indices_tensor->rank - 1; k++) want[r++] = indices_tensor->dims[k];
  for (int32_t k = components; k < data->rank; k++) want[r++] = data->dims[k];
  bool same = updates->rank == want_rank;
  for (int32_t k = 0; same && k < want_rank; k++) same = updates->dims[k] == want[k];
  if (!same)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "updates (input 2) is %s but indices %s and input 0 %s need %s",
                             stax_dims_text(updates->rank, updates->dims).text,
                             stax_dims_text(indices_tensor->rank, indices_tensor->dims).text,
                             stax_dims_text(data->rank, data->dims).text,
                             stax_dims_text(want_rank > STAX_MAX_RANK ? STAX_MAX_RANK : want_rank,
                                            want).text);

  index_array_t indices;
  STAX_RETURN_IF_ERROR(index_array_load(call, indices_tensor, "indices (input 1)", &indices));
  stax_status_t status = STAX_OK;
  if (components > 0)
    status = index_array_check(call, "indices (input 1)", indices_tensor, &indices, bounds, axes,
                               components);
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  if (status == STAX_OK)
    status = stax_movement_contiguous_output(call, 0, data->dtype, data->rank, data->dims, &out);
  if (status == STAX_OK) status = stax_movement_annotate(call, stax_tensor_copy_into(data, out));
  if (status == STAX_OK && stax_tensor_element_count(out) > 0) {
    int32_t tuple_rank = indices_tensor->rank - 1;
    int64_t tuples = 1;
    for (int32_t k = 0; k < tuple_rank; k++) tuples *= indices_tensor->dims[k];
    block_layout_t slab;
    block_layout_init(&slab, updates->rank - tuple_rank, updates->dims + tuple_rank,
                      updates->strides + tuple_rank);
    scatter_run_t run = {data->dtype, reduction, NULL, slab.dims[slab.rank - 1],
                         stax_buffer_data(updates->buffer), stax_dtype_size(data->dtype)};
    char* out_data = stax_tensor_data(out);
    int64_t size = (int64_t)run.element_size;
    for (int64_t t = 0; t < tuples; t++) {
      int64_t out_offset = 0, update_offset = updates->offset, rest = t;
      for (int32_t k = tuple_rank - 1; k >= 0; k--) {
        update_offset += (rest % indices_tensor->dims[k]) * updates->strides[k];
        rest /= indices_tensor->dims[k];
      }
      for (int32_t c = 0; c < components; c++)
        out_offset += indices.values[t * components + c] * out->strides[c];
      run.dst = out_data + out_offset * size;
      block_for_each_run(&slab, update_offset, scatter_nd_run, &run);
    }
  }
  if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
  index_array_free(call, &indices);
  return status;
}
