/* Kernels of the sequence ops (ops.def "sequences"): building sequences from tensors and from
 * other sequences, reading elements, splitting a tensor into a sequence and concatenating one.
 * Sequences are immutable (src/runtime/sequence.c): Insert and Erase make a new item list
 * that shares the elements (appending at the end shares the list too, amortized O(1)). SequenceAt returns the element itself (shared, like a view);
 * SplitToSequence copies its pieces so a sequence never aliases a tensor its caller may
 * reuse. Positions follow ONNX: negative counts from the back; out of range is OUT_OF_RANGE
 * naming the input, the position and the length. */
#include <string.h>

#include "kernels/movement.h"

static stax_status_t require_sequence(const stax_kernel_call_t* call, int32_t i,
                                      stax_tensor_t** out_sequence) {
  *out_sequence = stax_kernel_input(call, i);
  if (!*out_sequence || !(*out_sequence)->is_sequence)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d must be a sequence", i);
  return STAX_OK;
}

static stax_status_t require_tensor(const stax_kernel_call_t* call, int32_t i,
                                    stax_tensor_t** out_tensor) {
  *out_tensor = stax_kernel_input(call, i);
  if (!*out_tensor) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is required", i);
  if ((*out_tensor)->is_sequence)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input %d is a sequence; a tensor is needed there", i);
  return STAX_OK;
}

/* Reads the position input `i` (an int32/int64 scalar) and maps it to [0, limit]: the valid
 * range is [-length, limit] where limit is length (insert) or length - 1 (at, erase). */
static stax_status_t read_position(const stax_kernel_call_t* call, int32_t i, int64_t length,
                                   int64_t limit, int64_t* out_position) {
  stax_tensor_t* tensor = stax_kernel_input(call, i);
  if (tensor->is_sequence)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d 'position' is a sequence", i);
  if (tensor->dtype != STAX_DTYPE_INT32 && tensor->dtype != STAX_DTYPE_INT64)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input %d 'position' must be int32 or int64, got %s", i,
                             stax_dtype_name(tensor->dtype));
  if (stax_tensor_element_count(tensor) != 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input %d 'position' must be a scalar, got dims %s", i,
                             stax_dims_text(tensor->rank, tensor->dims).text);
  int64_t position = stax_load_as_i64(tensor->dtype, stax_buffer_data(tensor->buffer), tensor->offset);
  if (position < -length || position > limit)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "input %d 'position' is %lld, outside [%lld, %lld] for a sequence of "
                             "length %lld",
                             i, (long long)position, (long long)-length, (long long)limit,
                             (long long)length);
  *out_position = position < 0 ? position + length : position;
  return STAX_OK;
}

/* Output 0 := a sequence of `count` tensors (retained by it). */
static stax_status_t set_sequence_output(stax_kernel_call_t* call, stax_dtype_t dtype,
                                         int64_t count, stax_tensor_t* const* items) {
  if (call->outputs[0])
    return stax_kernel_error(call, STAX_INTERNAL, "a sequence output cannot be preallocated");
  stax_tensor_t* sequence = NULL;
  STAX_RETURN_IF_ERROR(stax_sequence_create(call->allocator, dtype, count, items, &sequence),
                       "%s node '%s'", stax_op_name(call->node->op), call->node->name);
  stax_kernel_set_output(call, 0, sequence);
  return STAX_OK;
}

/* A scratch array of `count` tensor pointers (NULL for count 0). */
static stax_status_t scratch_items(const stax_kernel_call_t* call, int64_t count,
                                   stax_tensor_t*** out_items) {
  *out_items = NULL;
  if (count <= 0) return STAX_OK;
  return stax_allocator_malloc(call->allocator, (size_t)count * sizeof(stax_tensor_t*),
                               (void**)out_items);
}

static void free_items(const stax_kernel_call_t* call, stax_tensor_t** items, int64_t count) {
  if (items) stax_allocator_free(call->allocator, items, (size_t)count * sizeof(stax_tensor_t*));
}

stax_status_t stax_kernel_SequenceEmpty(stax_kernel_call_t* call) {
  int64_t code = 0;
  stax_dtype_t dtype = STAX_DTYPE_INVALID;
  STAX_RETURN_IF_ERROR(stax_node_attr_onnx_dtype(call->node, "dtype", &code, &dtype));
  if (code == 0) dtype = STAX_DTYPE_FLOAT32;
  if (dtype == STAX_DTYPE_INVALID)
    return stax_kernel_error(call, STAX_UNIMPLEMENTED, "attribute 'dtype' is ONNX type %lld, "
                             "which stax has no dtype for", (long long)code);
  return set_sequence_output(call, dtype, 0, NULL);
}

stax_status_t stax_kernel_SequenceConstruct(stax_kernel_call_t* call) {
  stax_tensor_t* first = NULL;
  STAX_RETURN_IF_ERROR(require_tensor(call, 0, &first));
  for (int32_t k = 1; k < call->input_count; k++) {
    stax_tensor_t* input = NULL;
    STAX_RETURN_IF_ERROR(require_tensor(call, k, &input));
    if (input->dtype != first->dtype)
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                               "input %d is %s but input 0 is %s; a sequence holds one dtype", k,
                               stax_dtype_name(input->dtype), stax_dtype_name(first->dtype));
  }
  return set_sequence_output(call, first->dtype, call->input_count, call->inputs);
}

stax_status_t stax_kernel_SequenceInsert(stax_kernel_call_t* call) {
  stax_tensor_t *sequence = NULL, *tensor = NULL;
  STAX_RETURN_IF_ERROR(require_sequence(call, 0, &sequence));
  STAX_RETURN_IF_ERROR(require_tensor(call, 1, &tensor));
  if (tensor->dtype != sequence->dtype)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 1 'tensor' is %s, but the sequence holds %s tensors",
                             stax_dtype_name(tensor->dtype), stax_dtype_name(sequence->dtype));
  int64_t length = sequence->length, position = length;
  if (length >= STAX_SEQUENCE_MAX_LENGTH)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE, "the sequence already holds %lld elements, "
                             "the most stax allows", (long long)length);
  if (stax_kernel_input(call, 2))
    STAX_RETURN_IF_ERROR(read_position(call, 2, length, length, &position));
  if (position == length) {
    /* Appending (the default, and what a Loop that collects values does): shares the block. */
    if (call->outputs[0])
      return stax_kernel_error(call, STAX_INTERNAL, "a sequence output cannot be preallocated");
    stax_tensor_t* appended = NULL;
    STAX_RETURN_IF_ERROR(stax_sequence_append(call->allocator, sequence, tensor, &appended),
                         "SequenceInsert node '%s'", call->node->name);
    stax_kernel_set_output(call, 0, appended);
    return STAX_OK;
  }
  stax_tensor_t** items = NULL;
  STAX_RETURN_IF_ERROR(scratch_items(call, length + 1, &items));
  for (int64_t k = 0; k < position; k++) items[k] = sequence->items[k];
  items[position] = tensor;
  for (int64_t k = position; k < length; k++) items[k + 1] = sequence->items[k];
  stax_status_t status = set_sequence_output(call, sequence->dtype, length + 1, items);
  free_items(call, items, length + 1);
  return status;
}

stax_status_t stax_kernel_SequenceErase(stax_kernel_call_t* call) {
  stax_tensor_t* sequence = NULL;
  STAX_RETURN_IF_ERROR(require_sequence(call, 0, &sequence));
  int64_t length = sequence->length, position = length - 1;
  if (stax_kernel_input(call, 1)) {
    STAX_RETURN_IF_ERROR(read_position(call, 1, length, length - 1, &position));
  } else if (length == 0) {
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "the sequence is empty; there is no element to erase");
  }
  stax_tensor_t** items = NULL;
  STAX_RETURN_IF_ERROR(scratch_items(call, length - 1, &items));
  for (int64_t k = 0, j = 0; k < length; k++)
    if (k != position) items[j++] = sequence->items[k];
  stax_status_t status = set_sequence_output(call, sequence->dtype, length - 1, items);
  free_items(call, items, length - 1);
  return status;
}

stax_status_t stax_kernel_SequenceAt(stax_kernel_call_t* call) {
  stax_tensor_t* sequence = NULL;
  STAX_RETURN_IF_ERROR(require_sequence(call, 0, &sequence));
  if (!stax_kernel_input(call, 1))
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 1 'position' is required");
  int64_t position = 0;
  STAX_RETURN_IF_ERROR(read_position(call, 1, sequence->length, sequence->length - 1, &position));
  stax_tensor_t* element = sequence->items[position];
  if (call->outputs[0]) {
    stax_tensor_t* out = NULL;
    STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, element->dtype, element->rank, element->dims, &out));
    return stax_movement_annotate(call, stax_tensor_copy_into(element, out));
  }
  stax_tensor_retain(element);
  stax_kernel_set_output(call, 0, element);
  return STAX_OK;
}

stax_status_t stax_kernel_SequenceLength(stax_kernel_call_t* call) {
  stax_tensor_t* sequence = NULL;
  STAX_RETURN_IF_ERROR(require_sequence(call, 0, &sequence));
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, STAX_DTYPE_INT64, 0, NULL, &out));
  *(int64_t*)stax_tensor_data(out) = sequence->length;
  return STAX_OK;
}

/* ---- SplitToSequence ---------------------------------------------------------------------- */

/* The pieces' sizes along the axis: from input 1 (a scalar chunk size, the last piece
 * smaller; or one size per piece, summing to the dim), else pieces of 1. */
static stax_status_t split_to_sequence_sizes(const stax_kernel_call_t* call, int64_t dim,
                                             int64_t** out_sizes, int64_t* out_count) {
  *out_sizes = NULL;
  *out_count = 0;
  stax_tensor_t* split = stax_kernel_input(call, 1);
  int64_t count = 0;
  if (!split) {
    count = dim;
  } else {
    if (split->is_sequence || (split->dtype != STAX_DTYPE_INT32 && split->dtype != STAX_DTYPE_INT64))
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 1 'split' must be an int32 or "
                               "int64 tensor");
    if (split->rank > 1)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "input 1 'split' must be a scalar or 1-D, got rank %d", split->rank);
    if (split->rank == 0) {
      int64_t chunk = stax_load_as_i64(split->dtype, stax_buffer_data(split->buffer), split->offset);
      if (chunk <= 0)
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "input 1 'split' is %lld; a chunk size must be positive",
                                 (long long)chunk);
      count = dim / chunk + (dim % chunk != 0);
    } else {
      count = split->dims[0];
    }
  }
  if (count > STAX_SEQUENCE_MAX_LENGTH)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE, "%lld pieces; a sequence holds at most %lld",
                             (long long)count, (long long)STAX_SEQUENCE_MAX_LENGTH);
  if (count == 0) return STAX_OK;
  int64_t* sizes = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, (size_t)count * sizeof(int64_t),
                                             (void**)&sizes));
  int64_t total = 0;
  for (int64_t k = 0; k < count; k++) {
    if (!split) {
      sizes[k] = 1;
    } else if (split->rank == 0) {
      int64_t chunk = stax_load_as_i64(split->dtype, stax_buffer_data(split->buffer), split->offset);
      sizes[k] = k + 1 < count ? chunk : dim - chunk * (count - 1);
    } else {
      sizes[k] = stax_load_as_i64(split->dtype, stax_buffer_data(split->buffer),
                                  split->offset + k * split->strides[0]);
      if (sizes[k] < 0 || __builtin_add_overflow(total, sizes[k], &total)) {
        int64_t bad = sizes[k];
        stax_allocator_free(call->allocator, sizes, (size_t)count * sizeof(int64_t));
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "input 1 'split' entry %lld is %lld; sizes must be >= 0",
                                 (long long)k, (long long)bad);
      }
    }
  }
  if (split && split->rank == 1 && total != dim) {
    stax_allocator_free(call->allocator, sizes, (size_t)count * sizeof(int64_t));
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 1 'split' sums to %lld, but the input's dim along the axis "
                             "is %lld",
                             (long long)total, (long long)dim);
  }
  *out_sizes = sizes;
  *out_count = count;
  return STAX_OK;
}

stax_status_t stax_kernel_SplitToSequence(stax_kernel_call_t* call) {
  stax_tensor_t* input = NULL;
  STAX_RETURN_IF_ERROR(require_tensor(call, 0, &input));
  if (input->rank < 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 is a scalar; SplitToSequence needs rank >= 1");
  int64_t axis_value = 0, keepdims = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis_value));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "keepdims", 1, &keepdims));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, input->rank, "axis", &axis));
  /* keepdims = 0 drops the axis only when no split is given (pieces of 1). */
  bool drop_axis = keepdims == 0 && !stax_kernel_input(call, 1);
  int64_t* sizes = NULL;
  int64_t count = 0;
  STAX_RETURN_IF_ERROR(split_to_sequence_sizes(call, input->dims[axis], &sizes, &count));
  stax_tensor_t** items = NULL;
  stax_status_t status = scratch_items(call, count, &items);
  int64_t made = 0, begin = 0;
  for (int64_t k = 0; k < count && status == STAX_OK; k++) {
    int64_t end = begin + sizes[k];
    stax_tensor_t *view = NULL, *piece = NULL;
    status = stax_tensor_slice(call->allocator, input, 1, &begin, &end, &axis, NULL, &view);
    if (status == STAX_OK) status = stax_tensor_copy(call->allocator, view, &piece);
    stax_tensor_release(view);
    if (status == STAX_OK && drop_axis) {
      int64_t dims[STAX_MAX_RANK];
      int32_t rank = 0;
      for (int32_t d = 0; d < piece->rank; d++)
        if (d != axis) dims[rank++] = piece->dims[d];
      stax_tensor_t* squeezed = NULL;
      status = stax_tensor_reshape(call->allocator, piece, rank, dims, true, &squeezed);
      stax_tensor_release(piece);
      piece = squeezed;
    }
    if (status == STAX_OK) items[made++] = piece;
    begin = end;
  }
  if (status == STAX_OK) status = set_sequence_output(call, input->dtype, count, items);
  for (int64_t k = 0; k < made; k++) stax_tensor_release(items[k]);
  free_items(call, items, count);
  if (sizes) stax_allocator_free(call->allocator, sizes, (size_t)count * sizeof(int64_t));
  return stax_movement_annotate(call, status);
}

/* ---- ConcatFromSequence ------------------------------------------------------------------- */

stax_status_t stax_kernel_ConcatFromSequence(stax_kernel_call_t* call) {
  stax_tensor_t* sequence = NULL;
  STAX_RETURN_IF_ERROR(require_sequence(call, 0, &sequence));
  if (!stax_node_attr_find(call->node, "axis"))
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'axis' is missing");
  int64_t axis_value = 0, new_axis = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis_value));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "new_axis", 0, &new_axis));
  if (new_axis != 0 && new_axis != 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'new_axis' is %lld; 0 or 1",
                             (long long)new_axis);
  if (sequence->length == 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 is an empty sequence; ConcatFromSequence needs at least one "
                             "element");
  const stax_tensor_t* first = sequence->items[0];
  int32_t rank = first->rank + (int32_t)new_axis;
  if (rank > STAX_MAX_RANK)
    return stax_kernel_error(call, STAX_UNIMPLEMENTED, "the output would have rank %d; at most %d",
                             rank, STAX_MAX_RANK);
  if (rank == 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "the elements are scalars; ConcatFromSequence needs new_axis = 1");
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, rank, "axis", &axis));
  int64_t dims[STAX_MAX_RANK];
  /* Each element as seen in the output's rank: a dim of 1 inserted at the axis (new_axis). */
  for (int32_t d = 0, e = 0; d < rank; d++) dims[d] = new_axis && d == axis ? 1 : first->dims[e++];
  int64_t total = 0;
  for (int64_t k = 0; k < sequence->length; k++) {
    const stax_tensor_t* element = sequence->items[k];
    if (element->rank != first->rank)
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "element %lld has rank %d but element 0 has rank %d",
                               (long long)k, element->rank, first->rank);
    for (int32_t d = 0; d < element->rank; d++) {
      int32_t out_d = new_axis && d >= axis ? d + 1 : d;
      if (out_d != axis && element->dims[d] != first->dims[d])
        return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                                 "element %lld %s differs from element 0 %s in dim %d (only the "
                                 "axis may differ)",
                                 (long long)k, stax_dims_text(element->rank, element->dims).text,
                                 stax_dims_text(first->rank, first->dims).text, d);
    }
    int64_t length = new_axis ? 1 : element->dims[axis];
    if (__builtin_add_overflow(total, length, &total))
      return stax_kernel_error(call, STAX_OUT_OF_RANGE, "the concatenated dim %d overflows", axis);
  }
  dims[axis] = total;
  bool preallocated = call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, first->dtype, rank, dims, &out));
  stax_status_t status = STAX_OK;
  int64_t offset = 0;
  for (int64_t k = 0; k < sequence->length && status == STAX_OK; k++) {
    stax_tensor_t* element = sequence->items[k];
    int64_t length = new_axis ? 1 : element->dims[axis];
    if (stax_tensor_element_count(element) == 0) {
      offset += length;
      continue;
    }
    int64_t end = offset + length;
    stax_tensor_t *part = NULL, *source = element;
    status = stax_tensor_slice(call->allocator, out, 1, &offset, &end, &axis, NULL, &part);
    if (status == STAX_OK && new_axis)
      status = stax_tensor_reshape(call->allocator, element, rank, part->dims, true, &source);
    if (status == STAX_OK) status = stax_tensor_copy_into(source, part);
    if (source != element) stax_tensor_release(source);
    stax_tensor_release(part);
    offset = end;
  }
  if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
  return stax_movement_annotate(call, status);
}
