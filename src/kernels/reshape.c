/* View kernels: Reshape, Flatten, Transpose, Squeeze, Unsqueeze and Expand. With no
 * preallocated output each returns a view of its input (these ops are flagged VIEW, so the VM
 * lets the output share the input's buffer); into a preallocated output each copies.
 *
 * This file also holds the small helpers the data-movement kernel files share (reshape.c,
 * concat_split.c, slice_pad.c, gather_scatter.c, generate.c, resize.c, space_depth.c,
 * dynamic.c). No internal header declares them yet, so each of those files repeats the
 * prototypes it uses; the definitions here are the one source. */
#include <stdio.h>
#include <string.h>

#include "kernels/movement.h"


/* Copies `count` elements of `element_size` bytes between strided runs (strides in
 * elements, any sign). Typed loops for the common sizes so the compiler moves whole words. */
void stax_movement_copy_elements(char* dst, int64_t dst_stride, const char* src,
                                 int64_t src_stride, int64_t count, size_t element_size) {
  if (count <= 0) return;
  if (dst_stride == 1 && src_stride == 1) {
    memmove(dst, src, (size_t)count * element_size);
    return;
  }
#define STAX_COPY_RUN(type)                                                 \
  do {                                                                      \
    type* d = (type*)(void*)dst;                                            \
    const type* s = (const type*)(const void*)src;                          \
    for (int64_t i = 0; i < count; i++) d[i * dst_stride] = s[i * src_stride]; \
  } while (0)
  switch (element_size) {
    case 1:
      STAX_COPY_RUN(uint8_t);
      return;
    case 2:
      STAX_COPY_RUN(uint16_t);
      return;
    case 4:
      STAX_COPY_RUN(uint32_t);
      return;
    case 8:
      STAX_COPY_RUN(uint64_t);
      return;
    default:
      for (int64_t i = 0; i < count; i++)
        memcpy(dst + i * dst_stride * (int64_t)element_size,
               src + i * src_stride * (int64_t)element_size, element_size);
      return;
  }
#undef STAX_COPY_RUN
}

/* Prefixes a status from the runtime (whose messages do not know the node) with the node. */
stax_status_t stax_movement_annotate(const stax_kernel_call_t* call, stax_status_t status) {
  if (status == STAX_OK) return status;
  const char* op = call->node ? stax_op_name(call->node->op) : "kernel";
  const char* name = call->node && call->node->name ? call->node->name : "?";
  return stax_status_annotate(status, "%s node '%s'", op, name);
}

stax_status_t stax_movement_normalize_axis(const stax_kernel_call_t* call, int64_t axis,
                                           int32_t rank, const char* what, int32_t* out_axis) {
  *out_axis = 0;
  if (axis < -(int64_t)rank || axis >= (int64_t)rank) {
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "%s = %lld is out of range for rank %d (valid range [%d, %d])", what,
                             (long long)axis, rank, -rank, rank - 1);
  }
  *out_axis = (int32_t)(axis < 0 ? axis + rank : axis);
  return STAX_OK;
}

stax_status_t stax_movement_require_input(const stax_kernel_call_t* call, int32_t i,
                                          stax_tensor_t** out_tensor) {
  *out_tensor = stax_kernel_input(call, i);
  if (!*out_tensor) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing", i);
  return STAX_OK;
}

/* stax_kernel_output, plus the contiguity the flat-writing kernels rely on (the VM only
 * preallocates contiguous outputs; anything else is a bug worth naming). */
stax_status_t stax_movement_contiguous_output(stax_kernel_call_t* call, int32_t i,
                                              stax_dtype_t dtype, int32_t rank,
                                              const int64_t* dims, stax_tensor_t** out_tensor) {
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, i, dtype, rank, dims, out_tensor));
  if (!stax_tensor_is_contiguous(*out_tensor)) {
    *out_tensor = NULL;
    return stax_kernel_error(call, STAX_INTERNAL, "preallocated output %d is not contiguous", i);
  }
  return STAX_OK;
}

/* Hands `view` (owned) out as output i: as the output itself when none was preallocated,
 * else copied into the preallocated one (and released). */
stax_status_t stax_movement_output_view(stax_kernel_call_t* call, int32_t i, stax_tensor_t* view) {
  if (i < 0 || i >= call->output_count) {
    stax_tensor_release(view);
    return stax_kernel_error(call, STAX_INTERNAL, "output %d requested, node has %d", i,
                             call->output_count);
  }
  if (!call->outputs[i]) {
    call->outputs[i] = view;
    return STAX_OK;
  }
  stax_tensor_t* out = NULL;
  stax_status_t status = stax_kernel_output(call, i, view->dtype, view->rank, view->dims, &out);
  if (status == STAX_OK) status = stax_movement_annotate(call, stax_tensor_copy_into(view, out));
  stax_tensor_release(view);
  return status;
}

/* Copies the elements of src, in row-major order, into dst of the same element count but
 * another shape. One side is viewed in the other's shape; when neither view exists (both
 * non-contiguous), src goes through a contiguous copy first. */
stax_status_t stax_movement_copy_reshaped(const stax_kernel_call_t* call, stax_tensor_t* src,
                                          stax_tensor_t* dst) {
  stax_tensor_t* view = NULL;
  stax_status_t status = stax_tensor_reshape(call->allocator, dst, src->rank, src->dims, true, &view);
  if (status == STAX_OK) {
    status = stax_tensor_copy_into(src, view);
    stax_tensor_release(view);
    return stax_movement_annotate(call, status);
  }
  if (stax_status_code(status) != STAX_FAILED_PRECONDITION)
    return stax_movement_annotate(call, status);
  stax_status_free(status); /* dst's strides allow no view: reshape a copy of src instead */
  status = stax_tensor_reshape_copy(call->allocator, src, dst->rank, dst->dims, true, &view);
  if (status == STAX_OK) {
    status = stax_tensor_copy_into(view, dst);
    stax_tensor_release(view);
  }
  return stax_movement_annotate(call, status);
}

void stax_movement_release_created(stax_kernel_call_t* call, const bool* preallocated,
                                   int32_t count) {
  for (int32_t i = 0; i < count && i < call->output_count; i++) {
    if (!preallocated[i] && call->outputs[i]) {
      stax_tensor_release(call->outputs[i]);
      call->outputs[i] = NULL;
    }
  }
}

/* ---- Reshape ------------------------------------------------------------------------------ */

/* Resolves the ONNX shape input: 0 copies the input dim (unless allowzero), one -1 is
 * inferred. Errors name the node and both shapes. */
static stax_status_t resolve_reshape_dims(const stax_kernel_call_t* call, const stax_tensor_t* data,
                                          int32_t count, const int64_t* shape, bool allow_zero,
                                          int64_t* out_dims) {
  int32_t inferred = -1;
  bool has_zero = false;
  int64_t known = 1;
  for (int32_t k = 0; k < count; k++) {
    int64_t d = shape[k];
    if (d == -1) {
      if (inferred >= 0)
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "shape %s has -1 at positions %d and %d; at most one dim can be "
                                 "inferred",
                                 stax_dims_text(count, shape).text, inferred, k);
      inferred = k;
      out_dims[k] = -1;
      continue;
    }
    if (d < -1)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "shape %s has %lld at position %d",
                               stax_dims_text(count, shape).text, (long long)d, k);
    if (d == 0 && !allow_zero) {
      if (k >= data->rank)
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "shape %s has 0 (copy the input dim) at position %d, but input "
                                 "0 %s has rank %d",
                                 stax_dims_text(count, shape).text, k,
                                 stax_dims_text(data->rank, data->dims).text, data->rank);
      d = data->dims[k];
    }
    if (d == 0) has_zero = true;
    out_dims[k] = d;
    if (d != 0 && __builtin_mul_overflow(known, d, &known))
      return stax_kernel_error(call, STAX_OUT_OF_RANGE, "shape %s has too many elements",
                               stax_dims_text(count, shape).text);
  }
  int64_t elements = stax_tensor_element_count(data);
  if (inferred >= 0) {
    if (has_zero || elements % known != 0)
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "cannot reshape input 0 %s (%lld elements) to shape %s: the -1 "
                               "cannot be inferred",
                               stax_dims_text(data->rank, data->dims).text, (long long)elements,
                               stax_dims_text(count, shape).text);
    out_dims[inferred] = elements / known;
    return STAX_OK;
  }
  int64_t new_elements = has_zero ? 0 : known;
  if (new_elements != elements)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "cannot reshape input 0 %s (%lld elements) to %s (%lld elements; "
                             "shape input %s)",
                             stax_dims_text(data->rank, data->dims).text, (long long)elements,
                             stax_dims_text(count, out_dims).text, (long long)new_elements,
                             stax_dims_text(count, shape).text);
  return STAX_OK;
}

/* Output i := data in the given shape: a view when possible and no output was preallocated,
 * else a copy. The element counts must already agree. */
static stax_status_t reshape_to(stax_kernel_call_t* call, stax_tensor_t* data, int32_t rank,
                                const int64_t* dims) {
  if (call->output_count < 1)
    return stax_kernel_error(call, STAX_INTERNAL, "output 0 requested, node has 0");
  if (!call->outputs[0]) {
    stax_tensor_t* view = NULL;
    stax_status_t status = stax_tensor_reshape(call->allocator, data, rank, dims, true, &view);
    if (status == STAX_OK) {
      call->outputs[0] = view;
      return STAX_OK;
    }
    if (stax_status_code(status) != STAX_FAILED_PRECONDITION)
      return stax_movement_annotate(call, status);
    stax_status_free(status); /* strides allow no view: copy below */
  }
  bool preallocated = call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, data->dtype, rank, dims, &out));
  stax_status_t status = stax_movement_copy_reshaped(call, data, out);
  if (status != STAX_OK && !preallocated) stax_movement_release_created(call, &preallocated, 1);
  return status;
}

stax_status_t stax_kernel_Reshape(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t shape[STAX_MAX_RANK];
  int64_t count = 0;
  STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, stax_kernel_input(call, 1), "shape (input 1)",
                                             STAX_MAX_RANK, shape, &count));
  int64_t allow_zero = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "allowzero", 0, &allow_zero));
  int64_t dims[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(
      resolve_reshape_dims(call, data, (int32_t)count, shape, allow_zero != 0, dims));
  return reshape_to(call, data, (int32_t)count, dims);
}

/* ---- Flatten ------------------------------------------------------------------------------ */

stax_status_t stax_kernel_Flatten(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t axis = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 1, &axis));
  /* Flatten's axis ranges over [-r, r]: r puts every dim in the outer product. */
  if (axis < -(int64_t)data->rank || axis > data->rank)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "axis = %lld is out of range for rank %d (valid range [%d, %d])",
                             (long long)axis, data->rank, -data->rank, data->rank);
  if (axis < 0) axis += data->rank;
  int64_t dims[2] = {1, 1};
  for (int32_t k = 0; k < data->rank; k++) dims[k < axis ? 0 : 1] *= data->dims[k];
  return reshape_to(call, data, 2, dims);
}

/* ---- Transpose ---------------------------------------------------------------------------- */

stax_status_t stax_kernel_Transpose(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int32_t perm_count = -1;
  const int64_t* perm_attr = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(call->node, "perm", &perm_count, &perm_attr));
  int32_t perm[STAX_MAX_RANK];
  if (perm_count < 0) {
    for (int32_t k = 0; k < data->rank; k++) perm[k] = data->rank - 1 - k;
  } else {
    if (perm_count != data->rank)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "perm has %d entries but input 0 has rank %d", perm_count,
                               data->rank);
    bool seen[STAX_MAX_RANK] = {false};
    for (int32_t k = 0; k < perm_count; k++) {
      if (perm_attr[k] < 0 || perm_attr[k] >= data->rank)
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "perm[%d] = %lld is out of range for rank %d (valid range [0, "
                                 "%d])",
                                 k, (long long)perm_attr[k], data->rank, data->rank - 1);
      if (seen[perm_attr[k]])
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "perm[%d] = %lld repeats an axis; perm must be a permutation",
                                 k, (long long)perm_attr[k]);
      seen[perm_attr[k]] = true;
      perm[k] = (int32_t)perm_attr[k];
    }
  }
  stax_tensor_t* view = NULL;
  STAX_RETURN_IF_ERROR(
      stax_movement_annotate(call, stax_tensor_transpose(call->allocator, data, perm, &view)));
  return stax_movement_output_view(call, 0, view);
}

/* ---- Squeeze / Unsqueeze ------------------------------------------------------------------ */

/* Axes from input 1 (opset 13) or the 'axes' attribute (older opsets). *out_count is -1 when
 * neither is given. */
static stax_status_t read_axes(const stax_kernel_call_t* call, int64_t* axes, int32_t* out_count) {
  *out_count = -1;
  stax_tensor_t* axes_input = stax_kernel_input(call, 1);
  if (axes_input) {
    int64_t count = 0;
    STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, axes_input, "axes (input 1)", STAX_MAX_RANK,
                                               axes, &count));
    *out_count = (int32_t)count;
    return STAX_OK;
  }
  int32_t count = -1;
  const int64_t* attr = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(call->node, "axes", &count, &attr));
  if (count > STAX_MAX_RANK)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "axes has %d entries, at most %d allowed",
                             count, STAX_MAX_RANK);
  for (int32_t k = 0; k < count; k++) axes[k] = attr[k];
  *out_count = count;
  return STAX_OK;
}

/* Normalizes axes against `rank`, rejecting repeats. */
static stax_status_t normalize_axes(const stax_kernel_call_t* call, const int64_t* axes,
                                    int32_t count, int32_t rank, int32_t* out_axes) {
  bool seen[STAX_MAX_RANK] = {false};
  for (int32_t k = 0; k < count; k++) {
    char what[32];
    snprintf(what, sizeof(what), "axes[%d]", k);
    STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axes[k], rank, what, &out_axes[k]));
    if (seen[out_axes[k]])
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "axes[%d] = %lld repeats axis %d", k,
                               (long long)axes[k], out_axes[k]);
    seen[out_axes[k]] = true;
  }
  return STAX_OK;
}

stax_status_t stax_kernel_Squeeze(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t axes[STAX_MAX_RANK];
  int32_t count = -1;
  STAX_RETURN_IF_ERROR(read_axes(call, axes, &count));
  /* An empty axes list squeezes every size-1 dim, as if none were given (onnxruntime reads
   * it that way too). */
  if (count == 0) count = -1;
  int32_t normalized[STAX_MAX_RANK];
  if (count >= 0) {
    STAX_RETURN_IF_ERROR(normalize_axes(call, axes, count, data->rank, normalized));
    for (int32_t k = 0; k < count; k++) {
      if (data->dims[normalized[k]] != 1)
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "cannot squeeze axis %d of input 0 %s: its size is %lld, not 1",
                                 normalized[k], stax_dims_text(data->rank, data->dims).text,
                                 (long long)data->dims[normalized[k]]);
    }
  }
  stax_tensor_t* view = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_annotate(
      call, stax_tensor_squeeze(call->allocator, data, count < 0 ? 0 : count,
                                count < 0 ? NULL : normalized, &view)));
  return stax_movement_output_view(call, 0, view);
}

stax_status_t stax_kernel_Unsqueeze(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t axes[STAX_MAX_RANK];
  int32_t count = -1;
  STAX_RETURN_IF_ERROR(read_axes(call, axes, &count));
  if (count < 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "needs axes (input 1 or the 'axes' attribute)");
  int32_t out_rank = data->rank + count;
  if (out_rank > STAX_MAX_RANK)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 of rank %d plus %d axes exceeds the maximum rank %d",
                             data->rank, count, STAX_MAX_RANK);
  int32_t normalized[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(normalize_axes(call, axes, count, out_rank, normalized));
  stax_tensor_t* view = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_annotate(
      call, stax_tensor_unsqueeze(call->allocator, data, count, normalized, &view)));
  return stax_movement_output_view(call, 0, view);
}

/* ---- Expand ------------------------------------------------------------------------------- */

/* Expand broadcasts both ways: a 1 in the shape keeps the input's dim (numpy rules on the two
 * shapes), so the output may be larger than the requested shape. */
stax_status_t stax_kernel_Expand(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t shape[STAX_MAX_RANK];
  int64_t count = 0;
  STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, stax_kernel_input(call, 1), "shape (input 1)",
                                             STAX_MAX_RANK, shape, &count));
  int32_t rank = data->rank > (int32_t)count ? data->rank : (int32_t)count;
  int64_t dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < rank; k++) {
    int32_t data_axis = k - (rank - data->rank);
    int32_t shape_axis = k - (rank - (int32_t)count);
    int64_t from = data_axis >= 0 ? data->dims[data_axis] : 1;
    int64_t want = shape_axis >= 0 ? shape[shape_axis] : 1;
    if (want < 0)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "shape %s has %lld at position %d; sizes must be >= 0",
                               stax_dims_text((int32_t)count, shape).text, (long long)want,
                               shape_axis);
    if (from == want || want == 1) {
      dims[k] = from;
    } else if (from == 1) {
      dims[k] = want;
    } else {
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 0 %s does not broadcast to shape %s: dim %d is %lld, the "
                               "shape asks for %lld",
                               stax_dims_text(data->rank, data->dims).text,
                               stax_dims_text((int32_t)count, shape).text, data_axis,
                               (long long)from, (long long)want);
    }
  }
  stax_tensor_t* view = NULL;
  STAX_RETURN_IF_ERROR(
      stax_movement_annotate(call, stax_tensor_broadcast(call->allocator, data, rank, dims, &view)));
  return stax_movement_output_view(call, 0, view);
}
