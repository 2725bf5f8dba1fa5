/* Kernels that make tensors from shapes, attributes and small inputs: Shape, Size,
 * ConstantOfShape, Range, Constant, EyeLike, OneHot and Trilu. Fills move element bytes, so
 * every dtype works; Range computes integers exactly in int64 and floats in double (rounded
 * once to the output type). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/movement.h"

/* Writes `count` copies of one element (element_size bytes) to contiguous dst. */
static void fill_pattern(char* dst, int64_t count, const void* element, size_t element_size) {
  bool zero = true;
  for (size_t b = 0; b < element_size; b++) zero = zero && ((const unsigned char*)element)[b] == 0;
  if (zero || count == 0) {
    memset(dst, 0, (size_t)count * element_size);
    return;
  }
  /* Doubling copies: log2(count) memcpy calls instead of one per element. */
  memcpy(dst, element, element_size);
  int64_t filled = 1;
  while (filled < count) {
    int64_t chunk = filled < count - filled ? filled : count - filled;
    memcpy(dst + filled * (int64_t)element_size, dst, (size_t)chunk * element_size);
    filled += chunk;
  }
}

/* The first element of a tensor with exactly one element, as a double. */
static stax_status_t read_scalar(const stax_kernel_call_t* call, int32_t i, const char* what,
                                 double* out_value) {
  stax_tensor_t* tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, i, &tensor));
  if (stax_tensor_element_count(tensor) != 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "%s must hold exactly one element, got %s",
                             what, stax_dims_text(tensor->rank, tensor->dims).text);
  *out_value = stax_load_as_f64(tensor->dtype, stax_buffer_data(tensor->buffer), tensor->offset);
  return STAX_OK;
}

/* ---- Shape / Size ------------------------------------------------------------------------- */

stax_status_t stax_kernel_Shape(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t start = 0, end = data->rank;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "start", 0, &start));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "end", data->rank, &end));
  /* Opset 15: negative values count from the back; both clamp to [0, rank]. */
  if (start < 0) start += data->rank;
  if (end < 0) end += data->rank;
  start = start < 0 ? 0 : (start > data->rank ? data->rank : start);
  end = end < 0 ? 0 : (end > data->rank ? data->rank : end);
  int64_t count = end > start ? end - start : 0;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, STAX_DTYPE_INT64, 1, &count, &out));
  int64_t* values = stax_tensor_data(out);
  for (int64_t k = 0; k < count; k++) values[k] = data->dims[start + k];
  return STAX_OK;
}

stax_status_t stax_kernel_Size(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, STAX_DTYPE_INT64, 0, NULL, &out));
  *(int64_t*)stax_tensor_data(out) = stax_tensor_element_count(data);
  return STAX_OK;
}

/* ---- ConstantOfShape ---------------------------------------------------------------------- */

stax_status_t stax_kernel_ConstantOfShape(stax_kernel_call_t* call) {
  int64_t dims[STAX_MAX_RANK];
  int64_t rank = 0;
  STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, stax_kernel_input(call, 0), "shape (input 0)",
                                             STAX_MAX_RANK, dims, &rank));
  for (int64_t k = 0; k < rank; k++) {
    if (dims[k] < 0)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "shape %s has %lld at position %lld; sizes must be >= 0",
                               stax_dims_text((int32_t)rank, dims).text, (long long)dims[k],
                               (long long)k);
  }
  stax_dtype_t dtype = STAX_DTYPE_FLOAT32;
  unsigned char element[16] = {0};
  const stax_node_attr_t* value_attr = stax_node_attr_find(call->node, "value");
  if (value_attr) {
    stax_tensor_t* value = value_attr->type == STAX_ATTR_TENSOR ? value_attr->value.tensor : NULL;
    if (!value || stax_tensor_element_count(value) != 1)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "attribute 'value' must be a tensor with one element");
    dtype = value->dtype;
    memcpy(element, stax_tensor_data(value), stax_dtype_size(dtype));
  }
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, dtype, (int32_t)rank, dims, &out));
  fill_pattern(stax_tensor_data(out), stax_tensor_element_count(out), element,
               stax_dtype_size(dtype));
  return STAX_OK;
}

/* ---- Range -------------------------------------------------------------------------------- */

/* max(ceil((limit - start) / delta), 0) for integers, without overflow. */
static stax_status_t range_count_integer(const stax_kernel_call_t* call, int64_t start,
                                         int64_t limit, int64_t delta, int64_t* out_count) {
  *out_count = 0;
  if (delta > 0 ? limit <= start : limit >= start) return STAX_OK;
  uint64_t span = delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
  uint64_t step = delta > 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
  uint64_t count = span / step + (span % step != 0);
  if (count > (uint64_t)INT64_MAX / 8)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE, "Range(%lld, %lld, %lld) has %llu elements",
                             (long long)start, (long long)limit, (long long)delta,
                             (unsigned long long)count);
  *out_count = (int64_t)count;
  return STAX_OK;
}

stax_status_t stax_kernel_Range(stax_kernel_call_t* call) {
  stax_tensor_t* inputs[3] = {NULL, NULL, NULL};
  static const char* const names[3] = {"start (input 0)", "limit (input 1)", "delta (input 2)"};
  for (int32_t i = 0; i < 3; i++) {
    STAX_RETURN_IF_ERROR(stax_movement_require_input(call, i, &inputs[i]));
    if (stax_tensor_element_count(inputs[i]) != 1)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "%s must be a scalar, got %s", names[i],
                               stax_dims_text(inputs[i]->rank, inputs[i]->dims).text);
    if (inputs[i]->dtype != inputs[0]->dtype)
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "%s is %s but start is %s", names[i],
                               stax_dtype_name(inputs[i]->dtype),
                               stax_dtype_name(inputs[0]->dtype));
  }
  stax_dtype_t dtype = inputs[0]->dtype;
  if (dtype == STAX_DTYPE_BOOL)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "Range does not take bool inputs");
  int64_t count = 0;
  stax_tensor_t* out = NULL;
  if (stax_dtype_is_integer(dtype)) {
    int64_t values[3];
    for (int32_t i = 0; i < 3; i++)
      values[i] = stax_load_as_i64(dtype, stax_buffer_data(inputs[i]->buffer), inputs[i]->offset);
    if (values[2] == 0) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "delta (input 2) is 0");
    STAX_RETURN_IF_ERROR(range_count_integer(call, values[0], values[1], values[2], &count));
    STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, dtype, 1, &count, &out));
    void* data = stax_tensor_data(out);
    uint64_t value = (uint64_t)values[0];
    for (int64_t i = 0; i < count; i++) {
      /* Every value lies between start and limit, so it fits the input type. */
      int64_t exact = (int64_t)value;
      stax_convert_elements(STAX_DTYPE_INT64, &exact, dtype,
                            (char*)data + i * (int64_t)stax_dtype_size(dtype), 1);
      value += (uint64_t)values[2];
    }
    return STAX_OK;
  }
  double values[3];
  for (int32_t i = 0; i < 3; i++)
    values[i] = stax_load_as_f64(dtype, stax_buffer_data(inputs[i]->buffer), inputs[i]->offset);
  if (values[2] == 0) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "delta (input 2) is 0");
  double real_count = ceil((values[1] - values[0]) / values[2]);
  if (isnan(real_count) || real_count > 1.0e15)
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "Range(%g, %g, %g) does not have a usable element count", values[0],
                             values[1], values[2]);
  count = real_count > 0 ? (int64_t)real_count : 0;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, dtype, 1, &count, &out));
  void* data = stax_tensor_data(out);
  for (int64_t i = 0; i < count; i++)
    stax_store_from_f64(dtype, data, i, values[0] + (double)i * values[2]);
  return STAX_OK;
}

/* ---- Constant ----------------------------------------------------------------------------- */

stax_status_t stax_kernel_Constant(stax_kernel_call_t* call) {
  static const char* const value_attrs[] = {"value",       "value_int",    "value_ints",
                                            "value_float", "value_floats", "value_string",
                                            "value_strings"};
  const stax_node_attr_t* attr = NULL;
  for (size_t k = 0; k < sizeof(value_attrs) / sizeof(value_attrs[0]); k++) {
    const stax_node_attr_t* found = stax_node_attr_find(call->node, value_attrs[k]);
    if (!found) continue;
    if (attr)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "has both '%s' and '%s'; exactly one value attribute is allowed",
                               attr->name, found->name);
    attr = found;
  }
  if (!attr)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "needs one of the attributes value, value_int, value_ints, "
                             "value_float, value_floats");
  stax_tensor_t* out = NULL;
  switch (attr->type) {
    case STAX_ATTR_TENSOR: {
      stax_tensor_t* value = attr->value.tensor;
      if (!value) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'value' has no tensor");
      /* A copy, never the attribute's own buffer: the VM may write into outputs in place. */
      bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
      STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, value->dtype, value->rank, value->dims, &out));
      stax_status_t status = stax_movement_annotate(call, stax_tensor_copy_into(value, out));
      if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
      return status;
    }
    case STAX_ATTR_INT:
      STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, STAX_DTYPE_INT64, 0, NULL, &out));
      *(int64_t*)stax_tensor_data(out) = attr->value.i;
      return STAX_OK;
    case STAX_ATTR_FLOAT:
      STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, STAX_DTYPE_FLOAT32, 0, NULL, &out));
      *(float*)stax_tensor_data(out) = attr->value.f;
      return STAX_OK;
    case STAX_ATTR_INTS: {
      int64_t count = attr->value.ints.count;
      STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, STAX_DTYPE_INT64, 1, &count, &out));
      if (count > 0) memcpy(stax_tensor_data(out), attr->value.ints.data, sizeof(int64_t) * (size_t)count);
      return STAX_OK;
    }
    case STAX_ATTR_FLOATS: {
      int64_t count = attr->value.floats.count;
      STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, STAX_DTYPE_FLOAT32, 1, &count, &out));
      if (count > 0) memcpy(stax_tensor_data(out), attr->value.floats.data, sizeof(float) * (size_t)count);
      return STAX_OK;
    }
    default:
      return stax_kernel_error(call, STAX_UNIMPLEMENTED,
                               "attribute '%s': string constants are not supported", attr->name);
  }
}

/* ---- EyeLike ------------------------------------------------------------------------------ */

stax_status_t stax_kernel_EyeLike(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  if (data->rank != 2)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 must have rank 2, got %d",
                             data->rank);
  stax_dtype_t dtype = data->dtype;
  if (stax_node_attr_find(call->node, "dtype")) {
    int64_t code = 0;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "dtype", 0, &code));
    dtype = code >= INT32_MIN && code <= INT32_MAX ? stax_dtype_from_onnx((int32_t)code)
                                                   : STAX_DTYPE_INVALID;
    if (dtype == STAX_DTYPE_INVALID)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "attribute 'dtype' = %lld is not a supported ONNX element type",
                               (long long)code);
  }
  int64_t k = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "k", 0, &k));
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, dtype, 2, data->dims, &out));
  int64_t rows = data->dims[0], cols = data->dims[1];
  char* values = stax_tensor_data(out);
  memset(values, 0, (size_t)(rows * cols) * stax_dtype_size(dtype));
  /* Ones at (i, i + k): rows max(0, -k) .. while the column stays inside. */
  if (k >= cols || k <= -rows) return STAX_OK;
  for (int64_t i = k < 0 ? -k : 0; i < rows && i + k < cols; i++)
    stax_store_from_f64(dtype, values, i * cols + i + k, 1.0);
  return STAX_OK;
}

/* ---- OneHot ------------------------------------------------------------------------------- */

/* ONNX: indices outside [-depth, depth-1] give a row of all off values (not an error). */
stax_status_t stax_kernel_OneHot(stax_kernel_call_t* call) {
  stax_tensor_t *indices = NULL, *values = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &indices));
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 2, &values));
  double depth_value = 0;
  STAX_RETURN_IF_ERROR(read_scalar(call, 1, "depth (input 1)", &depth_value));
  if (!(depth_value >= 1) || depth_value > 1.0e12)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "depth (input 1) is %g; it must be >= 1",
                             depth_value);
  int64_t depth = (int64_t)depth_value;
  if (stax_tensor_element_count(values) != 2)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "values (input 2) must hold two elements [off, on], got %s",
                             stax_dims_text(values->rank, values->dims).text);
  if (indices->dtype == STAX_DTYPE_BOOL)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "indices (input 0) must be numeric, got bool");
  int32_t out_rank = indices->rank + 1;
  if (out_rank > STAX_MAX_RANK)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "indices of rank %d give an output of rank %d; at most %d is supported",
                             indices->rank, out_rank, STAX_MAX_RANK);
  int64_t axis = -1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "axis", -1, &axis));
  if (axis < -(int64_t)out_rank || axis >= out_rank)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "axis = %lld is out of range for output rank %d (valid range [%d, %d])",
                             (long long)axis, out_rank, -out_rank, out_rank - 1);
  if (axis < 0) axis += out_rank;
  int64_t dims[STAX_MAX_RANK];
  int64_t inner = 1; /* elements after the axis; the index count covers those before */
  for (int32_t k = 0, d = 0; k < out_rank; k++) {
    if (k == axis) {
      dims[k] = depth;
      continue;
    }
    dims[k] = indices->dims[d];
    if (k > axis) inner *= indices->dims[d];
    d++;
  }
  stax_dtype_t dtype = values->dtype;
  size_t size = stax_dtype_size(dtype);
  /* off and on as element bytes (values may be any view). */
  unsigned char off[16], on[16];
  const char* value_data = stax_buffer_data(values->buffer);
  int64_t value_stride = 0; /* the stride of the one axis of size 2 */
  for (int32_t k = 0; k < values->rank; k++)
    if (values->dims[k] == 2) value_stride = values->strides[k];
  memcpy(off, value_data + values->offset * (int64_t)size, size);
  memcpy(on, value_data + (values->offset + value_stride) * (int64_t)size, size);

  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_contiguous_output(call, 0, dtype, out_rank, dims, &out));
  char* out_data = stax_tensor_data(out);
  fill_pattern(out_data, stax_tensor_element_count(out), off, size);
  const char* index_data = stax_buffer_data(indices->buffer);
  int64_t position[STAX_MAX_RANK] = {0};
  int64_t count = stax_tensor_element_count(indices);
  for (int64_t i = 0; i < count; i++) {
    int64_t offset = indices->offset;
    for (int32_t k = 0; k < indices->rank; k++) offset += position[k] * indices->strides[k];
    double raw = stax_load_as_f64(indices->dtype, index_data, offset);
    int64_t index = stax_dtype_is_integer(indices->dtype)
                        ? stax_load_as_i64(indices->dtype, index_data, offset)
                        : (raw >= -(double)depth && raw < (double)depth ? (int64_t)raw : depth);
    if (index < 0 && index >= -depth) index += depth;
    if (index >= 0 && index < depth) {
      int64_t o = i / inner, n = i % inner;
      memcpy(out_data + ((o * depth + index) * inner + n) * (int64_t)size, on, size);
    }
    for (int32_t k = indices->rank - 1; k >= 0; k--) {
      if (++position[k] < indices->dims[k]) break;
      position[k] = 0;
    }
  }
  return STAX_OK;
}

/* ---- Trilu -------------------------------------------------------------------------------- */

stax_status_t stax_kernel_Trilu(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  if (data->rank < 2)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 must have rank >= 2, got %d",
                             data->rank);
  int64_t k = 0;
  stax_tensor_t* k_input = stax_kernel_input(call, 1);
  if (k_input) {
    int64_t count = 0;
    STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, k_input, "k (input 1)", 1, &k, &count));
    if (count != 1)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "k (input 1) must hold one value");
  }
  int64_t upper = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "upper", 1, &upper));
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(
      stax_movement_contiguous_output(call, 0, data->dtype, data->rank, data->dims, &out));
  stax_status_t status = stax_movement_annotate(call, stax_tensor_copy_into(data, out));
  if (status != STAX_OK) {
    stax_movement_release_created(call, &preallocated, 1);
    return status;
  }
  int64_t rows = data->dims[data->rank - 2], cols = data->dims[data->rank - 1];
  int64_t matrices = rows * cols == 0 ? 0 : stax_tensor_element_count(data) / (rows * cols);
  /* Past +-(rows + cols) every diagonal is kept or dropped alike; clamping avoids overflow. */
  int64_t limit = rows + cols;
  if (k > limit) k = limit;
  if (k < -limit) k = -limit;
  size_t size = stax_dtype_size(data->dtype);
  char* base = stax_tensor_data(out);
  for (int64_t m = 0; m < matrices; m++) {
    for (int64_t i = 0; i < rows; i++) {
      char* row = base + (m * rows + i) * cols * (int64_t)size;
      /* upper keeps j >= i + k (zero [0, i + k)); lower keeps j <= i + k (zero (i + k, cols)). */
      int64_t edge = i + k;
      if (upper) {
        int64_t end = edge < 0 ? 0 : (edge > cols ? cols : edge);
        memset(row, 0, (size_t)end * size);
      } else {
        int64_t begin = edge + 1 < 0 ? 0 : (edge + 1 > cols ? cols : edge + 1);
        memset(row + begin * (int64_t)size, 0, (size_t)(cols - begin) * size);
      }
    }
  }
  return STAX_OK;
}
