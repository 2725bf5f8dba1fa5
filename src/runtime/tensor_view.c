/* View operations: reshape, transpose, slice, broadcast, squeeze, unsqueeze. Each computes new
 * dims, strides and offset and returns a tensor sharing the input's buffer; none touches the
 * data (reshape_copy is the one exception, and only when no view exists). */
#include <string.h>

#include "runtime/tensor_internal.h"

static stax_status_t stax_check_tensor(const char* op, const stax_tensor_t* tensor) {
  if (tensor == NULL) return stax_status_make(STAX_INVALID_ARGUMENT, "%s: tensor is NULL", op);
  return stax_tensor_require_tensor(tensor, op);
}

static stax_status_t stax_view_of(stax_allocator_t allocator, const stax_tensor_t* tensor,
                                  int32_t rank, const int64_t* dims, const int64_t* strides,
                                  int64_t offset, stax_tensor_t** out_tensor) {
  return stax_tensor_make_view(allocator, tensor->buffer, tensor->dtype, rank, dims, strides,
                               offset, out_tensor);
}

/* ---- reshape ------------------------------------------------------------------------------ */

/* Resolves 0 (copy the input dim, unless allow_zero) and -1 (inferred) into concrete dims. */
static stax_status_t stax_reshape_resolve(const stax_tensor_t* tensor, int32_t rank,
                                          const int64_t* dims, bool allow_zero, int64_t* out_dims) {
  if (rank < 0 || rank > STAX_MAX_RANK) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "reshape: rank %d is outside 0..%d", (int)rank,
                            STAX_MAX_RANK);
  }
  if (rank > 0 && dims == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "reshape: rank %d but no dims given", (int)rank);
  }
  int32_t inferred = -1;
  bool has_zero = false;
  int64_t known = 1;
  for (int32_t k = 0; k < rank; k++) {
    int64_t d = dims[k];
    if (d == -1) {
      if (inferred >= 0) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "reshape: dims %d and %d are both -1 in %s; at most one can be "
                                "inferred",
                                (int)inferred, (int)k, stax_dims_text(rank, dims).text);
      }
      inferred = k;
      continue;
    }
    if (d < -1) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "reshape: dim %d of %s is %lld", (int)k,
                              stax_dims_text(rank, dims).text, (long long)d);
    }
    if (d == 0 && !allow_zero) {
      if (k >= tensor->rank) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "reshape: dim %d of %s is 0 (copy the input dim) but the input "
                                "%s has rank %d",
                                (int)k, stax_dims_text(rank, dims).text,
                                stax_dims_text(tensor->rank, tensor->dims).text, (int)tensor->rank);
      }
      d = tensor->dims[k];
    }
    if (d == 0) has_zero = true;
    out_dims[k] = d;
    if (d != 0 && __builtin_mul_overflow(known, d, &known)) {
      return stax_status_make(STAX_OUT_OF_RANGE, "reshape: element count of %s overflows int64",
                              stax_dims_text(rank, dims).text);
    }
  }
  int64_t count = stax_tensor_element_count(tensor);
  if (inferred >= 0) {
    if (has_zero) {
      /* ONNX: with allowzero, a 0 next to a -1 is invalid; without it, the copied input dim
       * was 0, and -1 could be anything. */
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "reshape: cannot infer the -1 in %s when another dim is 0",
                              stax_dims_text(rank, dims).text);
    }
    if (count % known != 0) {
      return stax_status_make(STAX_SHAPE_MISMATCH,
                              "reshape: cannot reshape %s (%lld elements) to %s: %lld is not a "
                              "multiple of %lld",
                              stax_dims_text(tensor->rank, tensor->dims).text, (long long)count,
                              stax_dims_text(rank, dims).text, (long long)count, (long long)known);
    }
    out_dims[inferred] = count / known;
    return STAX_OK;
  }
  int64_t new_count = has_zero ? 0 : known;
  if (new_count != count) {
    return stax_status_make(STAX_SHAPE_MISMATCH,
                            "reshape: cannot reshape %s (%lld elements) to %s (%lld elements)",
                            stax_dims_text(tensor->rank, tensor->dims).text, (long long)count,
                            stax_dims_text(rank, out_dims).text, (long long)new_count);
  }
  return STAX_OK;
}

/* Strides that make (rank, dims) a view of `tensor`, or false. Dims are matched in groups with
 * equal products; each input group must be linear in memory (every stride = next stride *
 * next dim), and its output dims then split that line row-major. Size-1 dims are skipped on
 * both sides since they are never stepped along. */
static bool stax_reshape_strides(const stax_tensor_t* tensor, int32_t rank, const int64_t* dims,
                                 int64_t* out_strides) {
  int64_t old_dims[STAX_MAX_RANK], old_strides[STAX_MAX_RANK];
  int32_t old_rank = 0;
  for (int32_t k = 0; k < tensor->rank; k++) {
    if (tensor->dims[k] == 1) continue;
    old_dims[old_rank] = tensor->dims[k];
    old_strides[old_rank] = tensor->strides[k];
    old_rank++;
  }
  if (stax_tensor_element_count(tensor) == 0) {
    stax_shape_contiguous_strides(rank, dims, out_strides);
    return true;
  }
  int32_t new_index = 0, old_index = 0;
  while (new_index < rank && old_index < old_rank) {
    int32_t new_end = new_index + 1, old_end = old_index + 1;
    int64_t new_product = dims[new_index], old_product = old_dims[old_index];
    while (new_product != old_product) {
      if (new_product < old_product) {
        new_product *= dims[new_end++];
      } else {
        old_product *= old_dims[old_end++];
      }
    }
    for (int32_t k = old_index; k + 1 < old_end; k++) {
      if (old_strides[k] != old_strides[k + 1] * old_dims[k + 1]) return false;
    }
    out_strides[new_end - 1] = old_strides[old_end - 1];
    for (int32_t k = new_end - 1; k > new_index; k--) {
      out_strides[k - 1] = out_strides[k] * dims[k];
    }
    new_index = new_end;
    old_index = old_end;
  }
  /* Whatever is left on the output side is size 1; any stride works, row-major is tidiest. */
  for (int32_t k = rank - 1; k >= new_index; k--) {
    out_strides[k] = k == rank - 1 ? 1 : out_strides[k + 1] * dims[k + 1];
  }
  return true;
}

static stax_status_t stax_reshape_impl(stax_allocator_t allocator, stax_tensor_t* tensor,
                                       int32_t rank, const int64_t* dims, bool allow_zero,
                                       bool copy_if_needed, stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_check_tensor("reshape", tensor));
  int64_t new_dims[STAX_MAX_RANK];
  int64_t new_strides[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(stax_reshape_resolve(tensor, rank, dims, allow_zero, new_dims));
  if (stax_reshape_strides(tensor, rank, new_dims, new_strides)) {
    return stax_view_of(allocator, tensor, rank, new_dims, new_strides, tensor->offset, out_tensor);
  }
  if (!copy_if_needed) {
    return stax_status_make(STAX_FAILED_PRECONDITION,
                            "reshape: %s with strides %s cannot be viewed as %s without a copy "
                            "(use stax_tensor_reshape_copy)",
                            stax_dims_text(tensor->rank, tensor->dims).text,
                            stax_dims_text(tensor->rank, tensor->strides).text,
                            stax_dims_text(rank, new_dims).text);
  }
  stax_tensor_t* copy = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_copy(allocator, tensor, &copy), "in reshape_copy");
  stax_status_t status =
      stax_reshape_impl(allocator, copy, rank, new_dims, true, false, out_tensor);
  stax_tensor_release(copy);
  return status;
}

stax_status_t stax_tensor_reshape(stax_allocator_t allocator, stax_tensor_t* tensor, int32_t rank,
                                  const int64_t* dims, bool allow_zero,
                                  stax_tensor_t** out_tensor) {
  return stax_reshape_impl(allocator, tensor, rank, dims, allow_zero, false, out_tensor);
}

stax_status_t stax_tensor_reshape_copy(stax_allocator_t allocator, stax_tensor_t* tensor,
                                       int32_t rank, const int64_t* dims, bool allow_zero,
                                       stax_tensor_t** out_tensor) {
  return stax_reshape_impl(allocator, tensor, rank, dims, allow_zero, true, out_tensor);
}

/* ---- transpose ---------------------------------------------------------------------------- */

stax_status_t stax_tensor_transpose(stax_allocator_t allocator, stax_tensor_t* tensor,
                                    const int32_t* perm, stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_check_tensor("transpose", tensor));
  int32_t rank = tensor->rank;
  int64_t dims[STAX_MAX_RANK], strides[STAX_MAX_RANK];
  bool seen[STAX_MAX_RANK] = {false};
  for (int32_t k = 0; k < rank; k++) {
    int32_t axis = perm ? perm[k] : rank - 1 - k;
    if (axis < 0 || axis >= rank) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "transpose: perm[%d] = %d is out of range for rank %d", (int)k,
                              (int)axis, (int)rank);
    }
    if (seen[axis]) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "transpose: perm[%d] = %d repeats an axis; perm must be a "
                              "permutation of 0..%d",
                              (int)k, (int)axis, (int)rank - 1);
    }
    seen[axis] = true;
    dims[k] = tensor->dims[axis];
    strides[k] = tensor->strides[axis];
  }
  return stax_view_of(allocator, tensor, rank, dims, strides, tensor->offset, out_tensor);
}

/* ---- slice -------------------------------------------------------------------------------- */

static int64_t stax_clamp(int64_t value, int64_t low, int64_t high) {
  return value < low ? low : value > high ? high : value;
}

stax_status_t stax_tensor_slice(stax_allocator_t allocator, stax_tensor_t* tensor, int32_t count,
                                const int64_t* starts, const int64_t* ends, const int32_t* axes,
                                const int64_t* steps, stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_check_tensor("slice", tensor));
  int32_t rank = tensor->rank;
  if (count < 0 || count > rank) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "slice: %d axes given for a tensor of rank %d",
                            (int)count, (int)rank);
  }
  if (count > 0 && (starts == NULL || ends == NULL)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "slice: starts and ends are required");
  }
  int64_t dims[STAX_MAX_RANK], strides[STAX_MAX_RANK];
  memcpy(dims, tensor->dims, sizeof(int64_t) * (size_t)rank);
  memcpy(strides, tensor->strides, sizeof(int64_t) * (size_t)rank);
  int64_t offset = tensor->offset;
  bool seen[STAX_MAX_RANK] = {false};
  for (int32_t i = 0; i < count; i++) {
    int32_t axis = axes ? axes[i] : i;
    if (axis < -rank || axis >= rank) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "slice: axes[%d] = %d is out of range for rank %d", (int)i, (int)axis,
                              (int)rank);
    }
    if (axis < 0) axis += rank;
    if (seen[axis]) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "slice: axis %d is sliced twice", (int)axis);
    }
    seen[axis] = true;
    int64_t step = steps ? steps[i] : 1;
    if (step == 0) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "slice: steps[%d] (axis %d) is 0", (int)i,
                              (int)axis);
    }
    int64_t dim = tensor->dims[axis];
    /* ONNX: negative positions count from the end, then clamp to the valid range for the
     * direction ([0, dim] going forward, [-1, dim-1] going backward). Adding dim to a
     * negative value cannot overflow. */
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t length;
    if (dim == 0) {
      /* Nothing to take in either direction (the backward clamp range [-1, dim-1] would be
       * empty and pick a phantom element). */
      length = 0;
    } else if (step > 0) {
      start = stax_clamp(start, 0, dim);
      end = stax_clamp(end, 0, dim);
      length = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = stax_clamp(start, 0, dim - 1);
      end = stax_clamp(end, -1, dim - 1);
      /* -INT64_MIN does not exist; any span takes one element with a step that large. */
      int64_t magnitude = step == INT64_MIN ? INT64_MAX : -step;
      length = start > end ? (start - end - 1) / magnitude + 1 : 0;
    }
    dims[axis] = length;
    if (length > 0) offset += start * tensor->strides[axis];
    /* A single element is never stepped over, and a huge step times the stride could
     * overflow; only a real step changes the stride. */
    if (length > 1 && __builtin_mul_overflow(tensor->strides[axis], step, &strides[axis])) {
      return stax_status_make(STAX_OUT_OF_RANGE, "slice: step %lld on axis %d overflows the stride",
                              (long long)step, (int)axis);
    }
  }
  return stax_view_of(allocator, tensor, rank, dims, strides, offset, out_tensor);
}

/* ---- broadcast ---------------------------------------------------------------------------- */

stax_status_t stax_tensor_broadcast(stax_allocator_t allocator, stax_tensor_t* tensor, int32_t rank,
                                    const int64_t* dims, stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_check_tensor("broadcast", tensor));
  int64_t target_count = 0;
  STAX_RETURN_IF_ERROR(stax_shape_validate("broadcast target", rank, dims, &target_count));
  if (rank < tensor->rank) {
    return stax_status_make(
        STAX_SHAPE_MISMATCH, "broadcast: cannot broadcast %s to %s of lower rank",
        stax_dims_text(tensor->rank, tensor->dims).text, stax_dims_text(rank, dims).text);
  }
  int64_t strides[STAX_MAX_RANK];
  int32_t lead = rank - tensor->rank;
  for (int32_t k = 0; k < rank; k++) {
    if (k < lead) {
      strides[k] = 0;
      continue;
    }
    int64_t from = tensor->dims[k - lead];
    if (from == dims[k]) {
      strides[k] = tensor->strides[k - lead];
    } else if (from == 1) {
      strides[k] = 0;
    } else {
      return stax_status_make(STAX_SHAPE_MISMATCH,
                              "broadcast: cannot broadcast %s to %s: dim %d is %lld, target "
                              "dim %d is %lld",
                              stax_dims_text(tensor->rank, tensor->dims).text,
                              stax_dims_text(rank, dims).text, (int)(k - lead), (long long)from,
                              (int)k, (long long)dims[k]);
    }
  }
  return stax_view_of(allocator, tensor, rank, dims, strides, tensor->offset, out_tensor);
}

/* ---- squeeze / unsqueeze ------------------------------------------------------------------ */

stax_status_t stax_tensor_squeeze(stax_allocator_t allocator, stax_tensor_t* tensor,
                                  int32_t axis_count, const int32_t* axes,
                                  stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_check_tensor("squeeze", tensor));
  int32_t rank = tensor->rank;
  bool drop[STAX_MAX_RANK] = {false};
  if (axes == NULL) {
    for (int32_t k = 0; k < rank; k++) drop[k] = tensor->dims[k] == 1;
  } else {
    if (axis_count < 0 || axis_count > rank) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "squeeze: %d axes given for a tensor of rank %d", (int)axis_count,
                              (int)rank);
    }
    for (int32_t i = 0; i < axis_count; i++) {
      int32_t axis = axes[i];
      if (axis < -rank || axis >= rank) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "squeeze: axes[%d] = %d is out of range for rank %d", (int)i,
                                (int)axis, (int)rank);
      }
      if (axis < 0) axis += rank;
      if (drop[axis]) {
        return stax_status_make(STAX_INVALID_ARGUMENT, "squeeze: axis %d is listed twice",
                                (int)axis);
      }
      if (tensor->dims[axis] != 1) {
        return stax_status_make(
            STAX_INVALID_ARGUMENT, "squeeze: cannot squeeze axis %d of %s: its size is %lld, not 1",
            (int)axis, stax_dims_text(rank, tensor->dims).text, (long long)tensor->dims[axis]);
      }
      drop[axis] = true;
    }
  }
  int64_t dims[STAX_MAX_RANK], strides[STAX_MAX_RANK];
  int32_t new_rank = 0;
  for (int32_t k = 0; k < rank; k++) {
    if (drop[k]) continue;
    dims[new_rank] = tensor->dims[k];
    strides[new_rank] = tensor->strides[k];
    new_rank++;
  }
  return stax_view_of(allocator, tensor, new_rank, dims, strides, tensor->offset, out_tensor);
}

stax_status_t stax_tensor_unsqueeze(stax_allocator_t allocator, stax_tensor_t* tensor,
                                    int32_t axis_count, const int32_t* axes,
                                    stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_check_tensor("unsqueeze", tensor));
  if (axis_count < 0 || (axis_count > 0 && axes == NULL)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "unsqueeze: %d axes given without a list",
                            (int)axis_count);
  }
  int32_t new_rank = tensor->rank + axis_count;
  if (new_rank > STAX_MAX_RANK) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "unsqueeze: rank %d plus %d axes exceeds the maximum rank %d",
                            (int)tensor->rank, (int)axis_count, STAX_MAX_RANK);
  }
  bool inserted[STAX_MAX_RANK] = {false};
  for (int32_t i = 0; i < axis_count; i++) {
    int32_t axis = axes[i];
    if (axis < -new_rank || axis >= new_rank) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "unsqueeze: axes[%d] = %d is out of range for output rank %d", (int)i,
                              (int)axis, (int)new_rank);
    }
    if (axis < 0) axis += new_rank;
    if (inserted[axis]) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "unsqueeze: axis %d is listed twice",
                              (int)axis);
    }
    inserted[axis] = true;
  }
  int64_t dims[STAX_MAX_RANK], strides[STAX_MAX_RANK];
  /* Fill from the innermost dim out so a new size-1 dim gets the stride it would have in a
   * row-major layout (next stride * next dim); it is never stepped along either way. */
  int32_t source = tensor->rank - 1;
  for (int32_t k = new_rank - 1; k >= 0; k--) {
    if (inserted[k]) {
      dims[k] = 1;
      strides[k] = 1;
      if (k < new_rank - 1 && __builtin_mul_overflow(strides[k + 1], dims[k + 1], &strides[k])) {
        strides[k] = 0;
      }
    } else {
      dims[k] = tensor->dims[source];
      strides[k] = tensor->strides[source];
      source--;
    }
  }
  return stax_view_of(allocator, tensor, new_rank, dims, strides, tensor->offset, out_tensor);
}
