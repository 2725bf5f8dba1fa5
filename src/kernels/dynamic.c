/* Kernels whose output size depends on input values: NonZero, TopK, Unique and Compress.
 *
 * TopK and Unique order elements through one key per element: a uint64 whose unsigned order
 * is the value order of the element's dtype (integers exactly, all 64 bits; floats with -0
 * equal to +0 and every NaN equal to the others and above +inf, as numpy sorts). Ties are
 * broken by position, so results are deterministic: TopK returns the lower index first among
 * equal values, Unique reports each value's first occurrence. Values are copied as element
 * bytes, so outputs are exact for every dtype. */
#include <string.h>

#include "kernels/movement.h"

/* ---- element helpers ---------------------------------------------------------------------- */

/* Element offset (in elements) of the i-th element in row-major order of a view. */
static int64_t element_offset(const stax_tensor_t* t, int64_t i) {
  int64_t offset = t->offset;
  for (int32_t k = t->rank - 1; k >= 0; k--) {
    offset += (i % t->dims[k]) * t->strides[k];
    i /= t->dims[k];
  }
  return offset;
}

/* Walks a view in row-major order: call with the current offset, then step. */
typedef struct element_walk_t {
  const stax_tensor_t* tensor;
  int64_t index[STAX_MAX_RANK];
  int64_t offset;
} element_walk_t;

static void element_walk_init(element_walk_t* walk, const stax_tensor_t* tensor) {
  memset(walk, 0, sizeof(*walk));
  walk->tensor = tensor;
  walk->offset = tensor->offset;
}

static void element_walk_next(element_walk_t* walk) {
  const stax_tensor_t* t = walk->tensor;
  for (int32_t k = t->rank - 1; k >= 0; k--) {
    walk->offset += t->strides[k];
    if (++walk->index[k] < t->dims[k]) return;
    walk->offset -= walk->index[k] * t->strides[k];
    walk->index[k] = 0;
  }
}

static bool element_is_nonzero(stax_dtype_t dtype, const char* data, int64_t offset) {
  if (stax_dtype_is_float(dtype)) return stax_load_as_f64(dtype, data, offset) != 0.0;
  size_t size = stax_dtype_size(dtype);
  const unsigned char* bytes = (const unsigned char*)data + offset * (int64_t)size;
  for (size_t b = 0; b < size; b++)
    if (bytes[b]) return true;
  return false;
}

/* The order-preserving key described at the top of the file. */
static uint64_t element_key(stax_dtype_t dtype, const char* data, int64_t offset) {
  const uint64_t sign = (uint64_t)1 << 63;
  if (stax_dtype_is_float(dtype)) {
    double value = stax_load_as_f64(dtype, data, offset);
    if (value != value) return UINT64_MAX;
    if (value == 0) value = 0; /* -0 == +0 */
    uint64_t bits;
    memcpy(&bits, &value, sizeof(bits));
    return (bits & sign) ? ~bits : bits | sign;
  }
  if (dtype == STAX_DTYPE_UINT64) return ((const uint64_t*)(const void*)data)[offset];
  if (dtype == STAX_DTYPE_UINT32) return ((const uint32_t*)(const void*)data)[offset];
  if (dtype == STAX_DTYPE_UINT16) return ((const uint16_t*)(const void*)data)[offset];
  if (dtype == STAX_DTYPE_UINT8 || dtype == STAX_DTYPE_BOOL)
    return ((const uint8_t*)(const void*)data)[offset];
  return (uint64_t)stax_load_as_i64(dtype, data, offset) ^ sign;
}

/* ---- merge sort of positions -------------------------------------------------------------- */

/* Sorts order[0..n) (positions) by compare(ctx, a, b) < 0, stably; scratch holds n entries. */
typedef int (*position_compare_fn)(const void* ctx, int64_t a, int64_t b);

static void merge_sort(int64_t* order, int64_t* scratch, int64_t n, position_compare_fn compare,
                       const void* ctx) {
  /* Bottom-up: runs of width 1, 2, 4, ... merged back and forth between the two arrays. */
  int64_t* from = order;
  int64_t* to = scratch;
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t left = 0; left < n; left += 2 * width) {
      int64_t middle = left + width < n ? left + width : n;
      int64_t right = left + 2 * width < n ? left + 2 * width : n;
      int64_t i = left, j = middle, k = left;
      while (i < middle && j < right)
        to[k++] = compare(ctx, from[j], from[i]) < 0 ? from[j++] : from[i++];
      while (i < middle) to[k++] = from[i++];
      while (j < right) to[k++] = from[j++];
    }
    int64_t* swap = from;
    from = to;
    to = swap;
  }
  if (from != order) memcpy(order, from, sizeof(int64_t) * (size_t)n);
}

/* ---- NonZero ------------------------------------------------------------------------------ */

stax_status_t stax_kernel_NonZero(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  const char* base = stax_buffer_data(data->buffer);
  int64_t total = stax_tensor_element_count(data);
  int64_t count = 0;
  element_walk_t walk;
  element_walk_init(&walk, data);
  for (int64_t i = 0; i < total; i++, element_walk_next(&walk))
    count += element_is_nonzero(data->dtype, base, walk.offset);
  /* A scalar behaves as a 1-element vector (numpy's nonzero on 0-d input). */
  int32_t rows = data->rank > 0 ? data->rank : 1;
  int64_t dims[2] = {rows, count};
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, STAX_DTYPE_INT64, 2, dims, &out));
  int64_t* values = stax_tensor_data(out);
  int64_t j = 0;
  element_walk_init(&walk, data);
  for (int64_t i = 0; i < total && j < count; i++, element_walk_next(&walk)) {
    if (!element_is_nonzero(data->dtype, base, walk.offset)) continue;
    for (int32_t k = 0; k < data->rank; k++) values[k * count + j] = walk.index[k];
    if (data->rank == 0) values[j] = 0;
    j++;
  }
  return STAX_OK;
}

/* ---- TopK --------------------------------------------------------------------------------- */

typedef struct topk_order_t {
  const uint64_t* keys;
  bool largest;
} topk_order_t;

static int topk_compare(const void* ctx, int64_t a, int64_t b) {
  const topk_order_t* o = ctx;
  uint64_t ka = o->keys[a], kb = o->keys[b];
  if (ka != kb) return (ka > kb) == o->largest ? -1 : 1;
  return a < b ? -1 : (a > b ? 1 : 0);
}

stax_status_t stax_kernel_TopK(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  if (data->rank == 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is a scalar; TopK needs rank >= 1");
  int64_t k = 0, k_count = 0;
  STAX_RETURN_IF_ERROR(
      stax_kernel_read_ints(call, stax_kernel_input(call, 1), "k (input 1)", 1, &k, &k_count));
  if (k_count != 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "k (input 1) must hold one value");
  int64_t axis_value = -1, largest = 1, sorted = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", -1, &axis_value));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "largest", 1, &largest));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "sorted", 1, &sorted));
  (void)sorted; /* unsorted output may be in any order; sorted order is one of them */
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, data->rank, "axis", &axis));
  int64_t n = data->dims[axis];
  if (k < 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "k = %lld; it must be >= 0", (long long)k);
  if (k > n)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "k = %lld exceeds input 0 axis %d of size %lld (valid range [0, %lld])",
                             (long long)k, axis, (long long)n, (long long)n);
  if (call->output_count < 2)
    return stax_kernel_error(call, STAX_INTERNAL, "TopK needs 2 outputs, node has %d",
                             call->output_count);
  int64_t dims[STAX_MAX_RANK];
  memcpy(dims, data->dims, sizeof(int64_t) * (size_t)data->rank);
  dims[axis] = k;
  bool preallocated[2] = {call->outputs[0] != NULL, call->outputs[1] != NULL};
  stax_tensor_t *values = NULL, *indices = NULL;
  stax_status_t status =
      stax_movement_contiguous_output(call, 0, data->dtype, data->rank, dims, &values);
  if (status == STAX_OK)
    status = stax_movement_contiguous_output(call, 1, STAX_DTYPE_INT64, data->rank, dims, &indices);
  if (status != STAX_OK || stax_tensor_element_count(values) == 0) goto done;

  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < axis; d++) outer *= data->dims[d];
  for (int32_t d = axis + 1; d < data->rank; d++) inner *= data->dims[d];
  uint64_t* keys = NULL;
  int64_t *order = NULL, *scratch = NULL;
  size_t bytes = sizeof(int64_t) * (size_t)n;
  status = stax_allocator_malloc(call->allocator, bytes, (void**)&keys);
  if (status == STAX_OK) status = stax_allocator_malloc(call->allocator, bytes, (void**)&order);
  if (status == STAX_OK) status = stax_allocator_malloc(call->allocator, bytes, (void**)&scratch);
  if (status == STAX_OK) {
    const char* base = stax_buffer_data(data->buffer);
    char* value_out = stax_tensor_data(values);
    int64_t* index_out = stax_tensor_data(indices);
    size_t size = stax_dtype_size(data->dtype);
    topk_order_t ordering = {keys, largest != 0};
    int64_t axis_stride = data->strides[axis];
    for (int64_t o = 0; o < outer; o++) {
      for (int64_t in = 0; in < inner; in++) {
        /* The slice's first element: (o, 0, in) in data's index space. */
        int64_t first = data->offset, rest = in;
        for (int32_t d = data->rank - 1; d > axis; d--) {
          first += (rest % data->dims[d]) * data->strides[d];
          rest /= data->dims[d];
        }
        rest = o;
        for (int32_t d = axis - 1; d >= 0; d--) {
          first += (rest % data->dims[d]) * data->strides[d];
          rest /= data->dims[d];
        }
        for (int64_t i = 0; i < n; i++) {
          keys[i] = element_key(data->dtype, base, first + i * axis_stride);
          order[i] = i;
        }
        merge_sort(order, scratch, n, topk_compare, &ordering);
        for (int64_t j = 0; j < k; j++) {
          int64_t out_index = (o * k + j) * inner + in;
          memcpy(value_out + out_index * (int64_t)size,
                 base + (first + order[j] * axis_stride) * (int64_t)size, size);
          index_out[out_index] = order[j];
        }
      }
    }
  }
  if (keys) stax_allocator_free(call->allocator, keys, bytes);
  if (order) stax_allocator_free(call->allocator, order, bytes);
  if (scratch) stax_allocator_free(call->allocator, scratch, bytes);
done:
  if (status != STAX_OK) stax_movement_release_created(call, preallocated, 2);
  return status;
}

/* ---- Unique ------------------------------------------------------------------------------- */

/* Items are slices along the axis (or single elements when flattened), compared by their
 * elements' keys in row-major order. */
typedef struct unique_order_t {
  const uint64_t* keys; /* item i's keys at keys + i * width */
  int64_t width;
} unique_order_t;

static int unique_compare_items(const unique_order_t* o, int64_t a, int64_t b) {
  const uint64_t* ka = o->keys + a * o->width;
  const uint64_t* kb = o->keys + b * o->width;
  for (int64_t i = 0; i < o->width; i++)
    if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
  return 0;
}

static int unique_compare(const void* ctx, int64_t a, int64_t b) {
  int c = unique_compare_items(ctx, a, b);
  if (c != 0) return c;
  return a < b ? -1 : (a > b ? 1 : 0);
}

/* Orders unique groups by first occurrence (sorted = 0). */
static int first_occurrence_compare(const void* ctx, int64_t a, int64_t b) {
  const int64_t* first = ctx;
  return first[a] < first[b] ? -1 : (first[a] > first[b] ? 1 : 0);
}

typedef struct unique_scratch_t {
  uint64_t* keys;
  int64_t* order;
  int64_t* scratch;
  int64_t* group_of; /* item -> group (in sorted-key order) */
  int64_t* first;    /* group -> first item */
  int64_t* counts;   /* group -> count */
  int64_t* rank;     /* output position -> group */
  int64_t* position; /* group -> output position */
  size_t key_bytes, item_bytes;
} unique_scratch_t;

static void unique_scratch_free(const stax_kernel_call_t* call, unique_scratch_t* s) {
  if (s->keys) stax_allocator_free(call->allocator, s->keys, s->key_bytes);
  int64_t** arrays[] = {&s->order, &s->scratch, &s->group_of, &s->first,
                        &s->counts, &s->rank, &s->position};
  for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
    if (*arrays[i]) stax_allocator_free(call->allocator, *arrays[i], s->item_bytes);
}

static stax_status_t unique_scratch_allocate(const stax_kernel_call_t* call, unique_scratch_t* s,
                                             int64_t items, int64_t width) {
  memset(s, 0, sizeof(*s));
  s->key_bytes = sizeof(uint64_t) * (size_t)(items * width + 1);
  s->item_bytes = sizeof(int64_t) * (size_t)(items + 1);
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, s->key_bytes, (void**)&s->keys));
  int64_t** arrays[] = {&s->order, &s->scratch, &s->group_of, &s->first,
                        &s->counts, &s->rank, &s->position};
  for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
    STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, s->item_bytes, (void**)arrays[i]));
  return STAX_OK;
}

/* Copies item `from` of data (a slice along axis, or one flattened element) to position `to`
 * of y along the same axis. */
static stax_status_t unique_copy_item(const stax_kernel_call_t* call, stax_tensor_t* data,
                                      stax_tensor_t* y, int32_t axis, bool flattened, int64_t from,
                                      int64_t to) {
  size_t size = stax_dtype_size(data->dtype);
  if (flattened) {
    memcpy((char*)stax_tensor_data(y) + to * (int64_t)size,
           (const char*)stax_buffer_data(data->buffer) + element_offset(data, from) * (int64_t)size,
           size);
    return STAX_OK;
  }
  int64_t from_end = from + 1, to_end = to + 1;
  stax_tensor_t *source = NULL, *target = NULL;
  stax_status_t status =
      stax_tensor_slice(call->allocator, data, 1, &from, &from_end, &axis, NULL, &source);
  if (status == STAX_OK)
    status = stax_tensor_slice(call->allocator, y, 1, &to, &to_end, &axis, NULL, &target);
  if (status == STAX_OK) status = stax_tensor_copy_into(source, target);
  if (source) stax_tensor_release(source);
  if (target) stax_tensor_release(target);
  return stax_movement_annotate(call, status);
}

stax_status_t stax_kernel_Unique(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t sorted = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "sorted", 1, &sorted));
  bool flattened = stax_node_attr_find(call->node, "axis") == NULL;
  int32_t axis = 0;
  if (!flattened) {
    int64_t axis_value = 0;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis_value));
    STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, data->rank, "axis", &axis));
  }
  int32_t outputs = call->output_count < 4 ? call->output_count : 4;
  if (outputs < 1) return stax_kernel_error(call, STAX_INTERNAL, "Unique needs at least one output");
  int64_t total = stax_tensor_element_count(data);
  int64_t items = flattened ? total : data->dims[axis];
  int64_t width = flattened || items == 0 ? 1 : total / items;
  bool preallocated[4] = {false, false, false, false};
  for (int32_t i = 0; i < outputs; i++) preallocated[i] = call->outputs[i] != NULL;

  unique_scratch_t s;
  stax_status_t status = unique_scratch_allocate(call, &s, items, width);
  int64_t groups = 0;
  if (status == STAX_OK) {
    /* Keys item by item: an item's elements are the slice in row-major order. */
    const char* base = stax_buffer_data(data->buffer);
    int64_t inner = 1;
    for (int32_t d = axis + 1; !flattened && d < data->rank; d++) inner *= data->dims[d];
    element_walk_t walk;
    element_walk_init(&walk, data);
    for (int64_t i = 0; i < total; i++, element_walk_next(&walk)) {
      int64_t item = i, element = 0;
      if (!flattened) {
        /* Row-major element i is (outer, item, inner) around the axis. */
        item = (i / inner) % items;
        element = (i / (inner * items)) * inner + i % inner;
      }
      s.keys[item * width + element] = element_key(data->dtype, base, walk.offset);
    }
    for (int64_t i = 0; i < items; i++) s.order[i] = i;
    unique_order_t ordering = {s.keys, width};
    merge_sort(s.order, s.scratch, items, unique_compare, &ordering);
    /* Equal items are adjacent, the first occurrence first. */
    for (int64_t i = 0; i < items; i++) {
      int64_t item = s.order[i];
      if (i == 0 || unique_compare_items(&ordering, s.order[i - 1], item) != 0) {
        s.first[groups] = item;
        s.counts[groups] = 0;
        groups++;
      }
      s.group_of[item] = groups - 1;
      s.counts[groups - 1]++;
    }
    for (int64_t g = 0; g < groups; g++) s.rank[g] = g;
    if (!sorted) merge_sort(s.rank, s.scratch, groups, first_occurrence_compare, s.first);
    for (int64_t p = 0; p < groups; p++) s.position[s.rank[p]] = p;
  }

  /* Y: the unique items in output order. */
  stax_tensor_t* y = NULL;
  if (status == STAX_OK) {
    int64_t dims[STAX_MAX_RANK];
    int32_t rank = flattened ? 1 : data->rank;
    if (flattened) {
      dims[0] = groups;
    } else {
      memcpy(dims, data->dims, sizeof(int64_t) * (size_t)rank);
      dims[axis] = groups;
    }
    status = stax_movement_contiguous_output(call, 0, data->dtype, rank, dims, &y);
  }
  for (int64_t p = 0; status == STAX_OK && p < groups && stax_tensor_element_count(y) > 0; p++)
    status = unique_copy_item(call, data, y, axis, flattened, s.first[s.rank[p]], p);
  /* indices (first occurrences), inverse_indices, counts. */
  const int64_t lengths[4] = {0, groups, items, groups};
  for (int32_t o = 1; o < outputs && status == STAX_OK; o++) {
    stax_tensor_t* out = NULL;
    status = stax_movement_contiguous_output(call, o, STAX_DTYPE_INT64, 1, &lengths[o], &out);
    if (status != STAX_OK) break;
    int64_t* values = stax_tensor_data(out);
    for (int64_t i = 0; i < lengths[o]; i++) {
      if (o == 1) values[i] = s.first[s.rank[i]];
      else if (o == 2) values[i] = s.position[s.group_of[i]];
      else values[i] = s.counts[s.rank[i]];
    }
  }
  unique_scratch_free(call, &s);
  if (status != STAX_OK) stax_movement_release_created(call, preallocated, outputs);
  return status;
}

/* ---- Compress ----------------------------------------------------------------------------- */

stax_status_t stax_kernel_Compress(stax_kernel_call_t* call) {
  stax_tensor_t *data = NULL, *condition = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 1, &condition));
  if (condition->rank != 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "condition (input 1) must have rank 1, got %d", condition->rank);
  bool flattened = stax_node_attr_find(call->node, "axis") == NULL;
  int32_t axis = 0;
  if (!flattened) {
    int64_t axis_value = 0;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis_value));
    STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, data->rank, "axis", &axis));
  }
  int64_t available = flattened ? stax_tensor_element_count(data) : data->dims[axis];
  /* A condition shorter than the axis drops the rest; a true entry past the end selects
   * something that does not exist. */
  const char* condition_data = stax_buffer_data(condition->buffer);
  int64_t length = condition->dims[0];
  int64_t selected = 0;
  for (int64_t i = 0; i < length; i++) {
    int64_t offset = condition->offset + i * condition->strides[0];
    if (!element_is_nonzero(condition->dtype, condition_data, offset)) continue;
    if (i >= available)
      return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                               "condition (input 1) entry %lld is true but input 0 has only %lld "
                               "%s (valid positions [0, %lld])",
                               (long long)i, (long long)available,
                               flattened ? "elements" : "slices along the axis",
                               (long long)available - 1);
    selected++;
  }
  int64_t dims[STAX_MAX_RANK];
  int32_t rank = flattened ? 1 : data->rank;
  if (flattened) {
    dims[0] = selected;
  } else {
    memcpy(dims, data->dims, sizeof(int64_t) * (size_t)rank);
    dims[axis] = selected;
  }
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, data->dtype, rank, dims, &out));
  if (stax_tensor_element_count(out) == 0) return STAX_OK;
  stax_status_t status = STAX_OK;
  int64_t position = 0;
  for (int64_t i = 0; i < length && status == STAX_OK; i++) {
    int64_t offset = condition->offset + i * condition->strides[0];
    if (!element_is_nonzero(condition->dtype, condition_data, offset)) continue;
    /* Runs of consecutive true entries move as one block. */
    int64_t end = i + 1;
    while (end < length &&
           element_is_nonzero(condition->dtype, condition_data,
                              condition->offset + end * condition->strides[0]))
      end++;
    int64_t run = end - i;
    if (flattened) {
      size_t size = stax_dtype_size(data->dtype);
      const char* base = stax_buffer_data(data->buffer);
      char* target = stax_tensor_data(out);
      for (int64_t e = 0; e < run; e++)
        memcpy(target + (position + e) * (int64_t)size,
               base + element_offset(data, i + e) * (int64_t)size, size);
    } else {
      int64_t to = position, to_end = position + run;
      stax_tensor_t *source = NULL, *target = NULL;
      status = stax_tensor_slice(call->allocator, data, 1, &i, &end, &axis, NULL, &source);
      if (status == STAX_OK)
        status = stax_tensor_slice(call->allocator, out, 1, &to, &to_end, &axis, NULL, &target);
      if (status == STAX_OK) status = stax_tensor_copy_into(source, target);
      if (source) stax_tensor_release(source);
      if (target) stax_tensor_release(target);
      status = stax_movement_annotate(call, status);
    }
    position += run;
    i = end - 1;
  }
  if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
  return status;
}
