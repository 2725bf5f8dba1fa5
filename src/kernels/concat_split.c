/* Concat and Split: joining tensors along an axis and cutting one into pieces. Both move
 * bytes only (every dtype), through slice views of the output (Concat) or of the input
 * (Split) and the runtime's strided copy, so any input layout works. */
#include <stdio.h>
#include <string.h>

#include "kernels/movement.h"

/* A view of `tensor` restricted to [begin, begin + length) along `axis`. */
static stax_status_t axis_range_view(const stax_kernel_call_t* call, stax_tensor_t* tensor,
                                     int32_t axis, int64_t begin, int64_t length,
                                     stax_tensor_t** out_view) {
  int64_t end = begin + length;
  return stax_movement_annotate(
      call, stax_tensor_slice(call->allocator, tensor, 1, &begin, &end, &axis, NULL, out_view));
}

/* ---- Concat ------------------------------------------------------------------------------- */

stax_status_t stax_kernel_Concat(stax_kernel_call_t* call) {
  stax_tensor_t* first = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &first));
  if (first->rank == 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 is a scalar; Concat needs rank >= 1");
  const stax_node_attr_t* axis_attr = stax_node_attr_find(call->node, "axis");
  if (!axis_attr) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'axis' is missing");
  int64_t axis_value = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis_value));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, first->rank, "axis", &axis));

  int64_t dims[STAX_MAX_RANK];
  memcpy(dims, first->dims, sizeof(int64_t) * (size_t)first->rank);
  dims[axis] = 0;
  for (int32_t i = 0; i < call->input_count; i++) {
    stax_tensor_t* input = NULL;
    STAX_RETURN_IF_ERROR(stax_movement_require_input(call, i, &input));
    if (input->dtype != first->dtype)
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input %d is %s but input 0 is %s", i,
                               stax_dtype_name(input->dtype), stax_dtype_name(first->dtype));
    if (input->rank != first->rank)
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH, "input %d has rank %d but input 0 has rank %d",
                               i, input->rank, first->rank);
    for (int32_t k = 0; k < first->rank; k++) {
      if (k != axis && input->dims[k] != first->dims[k])
        return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                                 "input %d %s differs from input 0 %s in dim %d (only axis %d may "
                                 "differ)",
                                 i, stax_dims_text(input->rank, input->dims).text,
                                 stax_dims_text(first->rank, first->dims).text, k, axis);
    }
    if (__builtin_add_overflow(dims[axis], input->dims[axis], &dims[axis]))
      return stax_kernel_error(call, STAX_OUT_OF_RANGE, "the concatenated dim %d overflows", axis);
  }

  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, first->dtype, first->rank, dims, &out));
  stax_status_t status = STAX_OK;
  int64_t offset = 0;
  for (int32_t i = 0; i < call->input_count && status == STAX_OK; i++) {
    stax_tensor_t* input = call->inputs[i];
    int64_t length = input->dims[axis];
    if (stax_tensor_element_count(input) == 0) {
      offset += length;
      continue;
    }
    stax_tensor_t* part = NULL;
    status = axis_range_view(call, out, axis, offset, length, &part);
    if (status == STAX_OK) {
      status = stax_movement_annotate(call, stax_tensor_copy_into(input, part));
      stax_tensor_release(part);
    }
    offset += length;
  }
  if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
  return status;
}

/* ---- Split -------------------------------------------------------------------------------- */

#define SPLIT_MAX_OUTPUTS 4096

/* The size of each of the `count` pieces of `dim`: from input 1 or the 'split' attribute,
 * else equal parts (opset 18's num_outputs lets the last part be smaller; without it the
 * parts must be equal). */
static stax_status_t split_sizes(const stax_kernel_call_t* call, int64_t dim, int32_t axis,
                                 int32_t count, int64_t* sizes) {
  stax_tensor_t* split_input = stax_kernel_input(call, 1);
  int32_t attr_count = -1;
  const int64_t* attr = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(call->node, "split", &attr_count, &attr));
  if (split_input || attr_count >= 0) {
    int64_t given = 0;
    if (split_input) {
      STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, split_input, "split (input 1)", count + 1,
                                                 sizes, &given));
    } else {
      given = attr_count;
      for (int32_t k = 0; k < attr_count && k <= count; k++) sizes[k] = attr[k];
    }
    if (given != count)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "split has %lld entries but the node has %d outputs",
                               (long long)given, count);
    int64_t total = 0;
    for (int32_t k = 0; k < count; k++) {
      if (sizes[k] < 0)
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "split[%d] is %lld; sizes must be >= 0", k, (long long)sizes[k]);
      if (__builtin_add_overflow(total, sizes[k], &total))
        return stax_kernel_error(call, STAX_OUT_OF_RANGE, "the split sizes overflow");
    }
    if (total != dim)
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "split sizes sum to %lld but input 0 dim %d is %lld",
                               (long long)total, axis, (long long)dim);
    return STAX_OK;
  }
  const stax_node_attr_t* num_outputs_attr = stax_node_attr_find(call->node, "num_outputs");
  if (num_outputs_attr) {
    int64_t num_outputs = 0;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "num_outputs", 0, &num_outputs));
    if (num_outputs != count)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "attribute 'num_outputs' is %lld but the node has %d outputs",
                               (long long)num_outputs, count);
  }
  int64_t piece = (dim + count - 1) / count;
  int64_t last = dim - piece * (count - 1);
  if (dim % count != 0 && (!num_outputs_attr || last < 0))
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 dim %d is %lld, which cannot be split into %d %sparts", axis,
                             (long long)dim, count, num_outputs_attr ? "" : "equal ");
  for (int32_t k = 0; k < count; k++) sizes[k] = k + 1 < count ? piece : last;
  return STAX_OK;
}

stax_status_t stax_kernel_Split(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  if (data->rank == 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is a scalar; Split needs rank >= 1");
  int32_t count = call->output_count;
  if (count < 1 || count > SPLIT_MAX_OUTPUTS)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "has %d outputs; 1 to %d are supported",
                             count, SPLIT_MAX_OUTPUTS);
  int64_t axis_value = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", 0, &axis_value));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_movement_normalize_axis(call, axis_value, data->rank, "axis", &axis));

  stax_status_t status = STAX_OK;
  int64_t* sizes = NULL;
  bool* preallocated = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, sizeof(int64_t) * (size_t)(count + 1),
                                             (void**)&sizes));
  STAX_GOTO_IF_ERROR(status,
                     stax_allocator_calloc(call->allocator, (size_t)count, sizeof(bool),
                                           (void**)&preallocated),
                     cleanup);
  for (int32_t k = 0; k < count; k++) preallocated[k] = call->outputs[k] != NULL;
  STAX_GOTO_IF_ERROR(status, split_sizes(call, data->dims[axis], axis, count, sizes), cleanup);

  int64_t dims[STAX_MAX_RANK];
  memcpy(dims, data->dims, sizeof(int64_t) * (size_t)data->rank);
  int64_t offset = 0;
  for (int32_t k = 0; k < count; k++) {
    dims[axis] = sizes[k];
    stax_tensor_t* out = NULL;
    STAX_GOTO_IF_ERROR(status, stax_kernel_output(call, k, data->dtype, data->rank, dims, &out),
                       cleanup);
    if (stax_tensor_element_count(out) > 0) {
      stax_tensor_t* piece = NULL;
      STAX_GOTO_IF_ERROR(status, axis_range_view(call, data, axis, offset, sizes[k], &piece),
                         cleanup);
      status = stax_movement_annotate(call, stax_tensor_copy_into(piece, out));
      stax_tensor_release(piece);
      if (status != STAX_OK) goto cleanup;
    }
    offset += sizes[k];
  }

cleanup:
  if (status != STAX_OK && preallocated) stax_movement_release_created(call, preallocated, count);
  if (preallocated) stax_allocator_free(call->allocator, preallocated, (size_t)count * sizeof(bool));
  stax_allocator_free(call->allocator, sizes, sizeof(int64_t) * (size_t)(count + 1));
  return status;
}
