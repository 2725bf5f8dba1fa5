/* Slice, Pad and Tile.
 *
 * Slice is a view (strides times steps, an offset) and copies only into a preallocated output.
 * Pad and Tile share one engine: every output coordinate along an axis maps to an input
 * coordinate on that axis alone (padding reflects, clamps or wraps; tiling wraps), or to "no
 * input" for constant padding. Per-axis tables of those source coordinates turn both ops into
 * a gather that moves element bytes, so every dtype works, and rows run across the pool. */
#include <stdio.h>
#include <string.h>

#include "kernels/movement.h"

/* ---- Slice -------------------------------------------------------------------------------- */

stax_status_t stax_kernel_Slice(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t starts[STAX_MAX_RANK], ends[STAX_MAX_RANK], axes[STAX_MAX_RANK], steps[STAX_MAX_RANK];
  int64_t count = 0, end_count = 0;
  STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, stax_kernel_input(call, 1), "starts (input 1)",
                                             STAX_MAX_RANK, starts, &count));
  STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, stax_kernel_input(call, 2), "ends (input 2)",
                                             STAX_MAX_RANK, ends, &end_count));
  if (end_count != count)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "starts has %lld entries but ends has %lld", (long long)count,
                             (long long)end_count);
  if (count > data->rank)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "%lld axes sliced but input 0 has rank %d", (long long)count,
                             data->rank);
  stax_tensor_t* axes_input = stax_kernel_input(call, 3);
  stax_tensor_t* steps_input = stax_kernel_input(call, 4);
  if (axes_input) {
    int64_t axis_count = 0;
    STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, axes_input, "axes (input 3)", STAX_MAX_RANK,
                                               axes, &axis_count));
    if (axis_count != count)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "axes has %lld entries but starts has %lld",
                               (long long)axis_count, (long long)count);
  } else {
    for (int64_t k = 0; k < count; k++) axes[k] = k;
  }
  if (steps_input) {
    int64_t step_count = 0;
    STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, steps_input, "steps (input 4)",
                                               STAX_MAX_RANK, steps, &step_count));
    if (step_count != count)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "steps has %lld entries but starts has %lld",
                               (long long)step_count, (long long)count);
  } else {
    for (int64_t k = 0; k < count; k++) steps[k] = 1;
  }
  int32_t normalized[STAX_MAX_RANK];
  bool seen[STAX_MAX_RANK] = {false};
  for (int32_t k = 0; k < (int32_t)count; k++) {
    char what[32];
    snprintf(what, sizeof(what), "axes[%d]", k);
    STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axes[k], data->rank, what,
                                                      &normalized[k]));
    if (seen[normalized[k]])
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "axes[%d] = %lld repeats axis %d", k,
                               (long long)axes[k], normalized[k]);
    seen[normalized[k]] = true;
    if (steps[k] == 0)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "steps[%d] (axis %d) is 0", k,
                               normalized[k]);
  }
  stax_tensor_t* view = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_annotate(
      call, stax_tensor_slice(call->allocator, data, (int32_t)count, starts, ends, normalized,
                              steps, &view)));
  return stax_movement_output_view(call, 0, view);
}

/* ---- the axis-map gather (Pad, Tile) ------------------------------------------------------ */

typedef struct axis_map_gather_t {
  int32_t rank; /* >= 1 */
  const int64_t* out_dims;
  const int64_t* maps[STAX_MAX_RANK]; /* per axis: source coordinate, or -1 for the fill */
  const char* src_data;               /* buffer data of the input */
  int64_t src_offset;                 /* in elements */
  int64_t src_strides[STAX_MAX_RANK];
  char* dst;                          /* contiguous output */
  size_t element_size;
  unsigned char fill[16];             /* one element of the constant */
} axis_map_gather_t;

static void fill_elements(char* dst, int64_t count, const unsigned char* fill, size_t size) {
  bool zero = true;
  for (size_t b = 0; b < size; b++) zero = zero && fill[b] == 0;
  if (zero) {
    memset(dst, 0, (size_t)count * size);
    return;
  }
  for (int64_t i = 0; i < count; i++) memcpy(dst + i * (int64_t)size, fill, size);
}

/* One output row: the last axis's map picks each element. */
static void gather_row(const axis_map_gather_t* g, char* dst, int64_t src_base, int64_t count) {
  const int64_t* map = g->maps[g->rank - 1];
  int64_t stride = g->src_strides[g->rank - 1];
  size_t size = g->element_size;
#define GATHER_ROW(type)                                                         \
  do {                                                                           \
    type* d = (type*)(void*)dst;                                                 \
    const type* s = (const type*)(const void*)g->src_data;                       \
    type fill_value;                                                             \
    memcpy(&fill_value, g->fill, sizeof(type));                                  \
    for (int64_t j = 0; j < count; j++)                                          \
      d[j] = map[j] < 0 ? fill_value : s[src_base + map[j] * stride];            \
  } while (0)
  switch (size) {
    case 1:
      GATHER_ROW(uint8_t);
      return;
    case 2:
      GATHER_ROW(uint16_t);
      return;
    case 4:
      GATHER_ROW(uint32_t);
      return;
    case 8:
      GATHER_ROW(uint64_t);
      return;
    default:
      for (int64_t j = 0; j < count; j++) {
        if (map[j] < 0)
          memcpy(dst + j * (int64_t)size, g->fill, size);
        else
          memcpy(dst + j * (int64_t)size, g->src_data + (src_base + map[j] * stride) * (int64_t)size,
                 size);
      }
      return;
  }
#undef GATHER_ROW
}

static void gather_rows(void* ctx, int64_t begin, int64_t end) {
  const axis_map_gather_t* g = ctx;
  int32_t outer = g->rank - 1;
  int64_t row_length = g->out_dims[outer];
  int64_t index[STAX_MAX_RANK] = {0};
  int64_t rest = begin;
  for (int32_t k = outer - 1; k >= 0; k--) {
    index[k] = rest % g->out_dims[k];
    rest /= g->out_dims[k];
  }
  for (int64_t row = begin; row < end; row++) {
    char* dst = g->dst + row * row_length * (int64_t)g->element_size;
    int64_t src_base = g->src_offset;
    bool filled = false;
    for (int32_t k = 0; k < outer; k++) {
      int64_t source = g->maps[k][index[k]];
      if (source < 0) {
        filled = true;
        break;
      }
      src_base += source * g->src_strides[k];
    }
    if (filled)
      fill_elements(dst, row_length, g->fill, g->element_size);
    else
      gather_row(g, dst, src_base, row_length);
    for (int32_t k = outer - 1; k >= 0; k--) {
      if (++index[k] < g->out_dims[k]) break;
      index[k] = 0;
    }
  }
}

/* Writes out[i] = in[maps[0][i0], ..., maps[r-1][ir]] (or the fill) into the contiguous
 * output `out`. */
static void run_axis_map_gather(stax_threadpool_t* pool, const stax_tensor_t* in,
                                stax_tensor_t* out, int64_t* const* maps,
                                const unsigned char* fill) {
  if (stax_tensor_element_count(out) == 0) return;
  axis_map_gather_t g;
  memset(&g, 0, sizeof(g));
  g.rank = out->rank;
  g.out_dims = out->dims;
  for (int32_t k = 0; k < out->rank; k++) {
    g.maps[k] = maps[k];
    g.src_strides[k] = in->strides[k];
  }
  g.src_data = stax_buffer_data(in->buffer);
  g.src_offset = in->offset;
  g.dst = stax_tensor_data(out);
  g.element_size = stax_dtype_size(out->dtype);
  if (fill) memcpy(g.fill, fill, g.element_size);
  int64_t row_length = out->dims[out->rank - 1];
  int64_t rows = stax_tensor_element_count(out) / row_length;
  int64_t grain = row_length >= 32768 ? 1 : 32768 / row_length;
  stax_parallel_for(pool, rows, grain, gather_rows, &g);
}

/* Allocates one table per axis for the maps (out_dims summed), freed with free_maps. */
static stax_status_t allocate_maps(const stax_kernel_call_t* call, int32_t rank,
                                   const int64_t* out_dims, int64_t** maps, int64_t* out_total) {
  int64_t total = 0;
  for (int32_t k = 0; k < rank; k++) total += out_dims[k];
  *out_total = total;
  int64_t* block = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, sizeof(int64_t) * (size_t)(total + 1),
                                             (void**)&block));
  for (int32_t k = 0; k < rank; k++) {
    maps[k] = block;
    block += out_dims[k];
  }
  return STAX_OK;
}

static void free_maps(const stax_kernel_call_t* call, int64_t** maps, int64_t total) {
  stax_allocator_free(call->allocator, maps[0], sizeof(int64_t) * (size_t)(total + 1));
}

/* ---- Pad ---------------------------------------------------------------------------------- */

typedef enum pad_mode_t { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode_t;

/* The source coordinate of padded coordinate c (c < 0 or c >= dim) on an axis of size dim:
 * numpy's rules, which keep reflecting / wrapping when the pad exceeds the dim. */
static int64_t pad_source(pad_mode_t mode, int64_t c, int64_t dim) {
  if (c >= 0 && c < dim) return c;
  switch (mode) {
    case PAD_EDGE:
      return c < 0 ? 0 : dim - 1;
    case PAD_WRAP: {
      int64_t r = c % dim;
      return r < 0 ? r + dim : r;
    }
    case PAD_REFLECT: {
      if (dim == 1) return 0;
      int64_t period = 2 * (dim - 1);
      int64_t r = c % period;
      if (r < 0) r += period;
      return r >= dim ? period - r : r;
    }
    default:
      return -1;
  }
}

/* Reads the optional constant_value input into one element of `dtype`. */
static stax_status_t read_pad_constant(const stax_kernel_call_t* call, stax_dtype_t dtype,
                                       unsigned char* fill) {
  memset(fill, 0, 16);
  stax_tensor_t* value = stax_kernel_input(call, 2);
  if (!value || stax_tensor_element_count(value) == 0) return STAX_OK;
  if (stax_tensor_element_count(value) != 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "constant_value (input 2) must hold one element, got %lld",
                             (long long)stax_tensor_element_count(value));
  /* One element: the view's first element, converted if an exporter typed it differently. */
  stax_convert_elements(value->dtype, stax_tensor_data(value), dtype, fill, 1);
  return STAX_OK;
}

stax_status_t stax_kernel_Pad(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  const char* mode_name = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "mode", "constant", &mode_name));
  pad_mode_t mode;
  if (strcmp(mode_name, "constant") == 0)
    mode = PAD_CONSTANT;
  else if (strcmp(mode_name, "reflect") == 0)
    mode = PAD_REFLECT;
  else if (strcmp(mode_name, "edge") == 0)
    mode = PAD_EDGE;
  else if (strcmp(mode_name, "wrap") == 0)
    mode = PAD_WRAP;
  else
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'mode' must be constant, reflect, edge or wrap, got \"%s\"",
                             mode_name);
  int32_t rank = data->rank;
  int32_t axes[STAX_MAX_RANK];
  int32_t axis_count = rank;
  for (int32_t k = 0; k < rank; k++) axes[k] = k;
  stax_tensor_t* axes_input = stax_kernel_input(call, 3);
  if (axes_input) {
    int64_t values[STAX_MAX_RANK];
    int64_t count = 0;
    STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, axes_input, "axes (input 3)", STAX_MAX_RANK,
                                               values, &count));
    bool seen[STAX_MAX_RANK] = {false};
    for (int32_t k = 0; k < (int32_t)count; k++) {
      char what[32];
      snprintf(what, sizeof(what), "axes[%d]", k);
      STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, values[k], rank, what, &axes[k]));
      if (seen[axes[k]])
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "axes[%d] = %lld repeats axis %d",
                                 k, (long long)values[k], axes[k]);
      seen[axes[k]] = true;
    }
    axis_count = (int32_t)count;
  }
  int64_t pads[2 * STAX_MAX_RANK];
  int64_t pad_count = 0;
  STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, stax_kernel_input(call, 1), "pads (input 1)",
                                             2 * STAX_MAX_RANK, pads, &pad_count));
  if (pad_count != 2 * axis_count)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "pads has %lld entries; %d padded axes need %d", (long long)pad_count,
                             axis_count, 2 * axis_count);
  int64_t begin[STAX_MAX_RANK] = {0}, dims[STAX_MAX_RANK];
  memcpy(dims, data->dims, sizeof(int64_t) * (size_t)rank);
  for (int32_t k = 0; k < axis_count; k++) {
    int32_t axis = axes[k];
    int64_t before = pads[k], after = pads[k + axis_count];
    int64_t size = 0;
    if (__builtin_add_overflow(data->dims[axis], before, &size) ||
        __builtin_add_overflow(size, after, &size) || size < 0)
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "pads %lld and %lld on axis %d make input 0 dim %lld %s",
                               (long long)before, (long long)after, axis,
                               (long long)data->dims[axis], size < 0 ? "negative" : "overflow");
    if (mode != PAD_CONSTANT && data->dims[axis] == 0 && size > 0)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "mode '%s' cannot pad axis %d of size 0 (there is nothing to "
                               "repeat)",
                               mode_name, axis);
    begin[axis] = before;
    dims[axis] = size;
  }
  unsigned char fill[16];
  STAX_RETURN_IF_ERROR(read_pad_constant(call, data->dtype, fill));

  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, data->dtype, rank, dims, &out));
  if (rank == 0) {
    stax_status_t status = stax_movement_annotate(call, stax_tensor_copy_into(data, out));
    if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
    return status;
  }
  int64_t* maps[STAX_MAX_RANK];
  int64_t total = 0;
  stax_status_t status = allocate_maps(call, rank, dims, maps, &total);
  if (status != STAX_OK) {
    stax_movement_release_created(call, &preallocated, 1);
    return status;
  }
  for (int32_t k = 0; k < rank; k++)
    for (int64_t o = 0; o < dims[k]; o++) maps[k][o] = pad_source(mode, o - begin[k], data->dims[k]);
  run_axis_map_gather(call->pool, data, out, maps, fill);
  free_maps(call, maps, total);
  return STAX_OK;
}

/* ---- Tile --------------------------------------------------------------------------------- */

stax_status_t stax_kernel_Tile(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t repeats[STAX_MAX_RANK];
  int64_t count = 0;
  STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, stax_kernel_input(call, 1),
                                             "repeats (input 1)", STAX_MAX_RANK, repeats, &count));
  int32_t rank = data->rank;
  if (count != rank)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "repeats has %lld entries but input 0 has rank %d", (long long)count,
                             rank);
  int64_t dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < rank; k++) {
    if (repeats[k] < 0)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "repeats[%d] is %lld; it must be >= 0",
                               k, (long long)repeats[k]);
    if (__builtin_mul_overflow(data->dims[k], repeats[k], &dims[k]))
      return stax_kernel_error(call, STAX_OUT_OF_RANGE, "repeats[%d] = %lld makes dim %d overflow",
                               k, (long long)repeats[k], k);
  }
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, data->dtype, rank, dims, &out));
  if (rank == 0) {
    stax_status_t status = stax_movement_annotate(call, stax_tensor_copy_into(data, out));
    if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
    return status;
  }
  int64_t* maps[STAX_MAX_RANK];
  int64_t total = 0;
  stax_status_t status = allocate_maps(call, rank, dims, maps, &total);
  if (status != STAX_OK) {
    stax_movement_release_created(call, &preallocated, 1);
    return status;
  }
  for (int32_t k = 0; k < rank; k++)
    for (int64_t o = 0; o < dims[k]; o++) maps[k][o] = o % data->dims[k];
  run_axis_map_gather(call->pool, data, out, maps, NULL);
  free_maps(call, maps, total);
  return STAX_OK;
}
