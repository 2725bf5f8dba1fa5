/* Reading shape-giving inputs, fresh symbols, bound-aware min/max and message helpers for the
 * shape functions of data movement, generators, data-dependent and control-flow ops. */
#include "passes/shape/shape_operands.h"

#include <ctype.h>
#include <stdio.h>

/* ---- vectors ----------------------------------------------------------------------------- */

stax_status_t stax_shape_read_vector(stax_shape_infer_t* ic, int32_t i, const char* role,
                                     stax_shape_vector_t* out_vector) {
  out_vector->known = false;
  out_vector->count = -1;
  stax_shape_operand_t operand;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, i, &operand));
  if (!stax_dtype_is_integer(operand.dtype)) {
    return stax_infer_error(ic, STAX_DTYPE_MISMATCH,
                            "input %d '%s' (%s) has dtype %s, expected an integer type", i,
                            operand.name, role, stax_dtype_name(operand.dtype));
  }
  if (operand.rank > 1) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input %d '%s' (%s) must be a 1-D tensor, got rank %d", i,
                            operand.name, role, operand.rank);
  }
  const stax_value_t* value = stax_infer_input(ic, i);
  int32_t count = 0;
  if (stax_shape_value_content(ic, value, STAX_SHAPE_CONTENT_MAX, out_vector->entries,
                               &count)) {
    out_vector->known = true;
    out_vector->count = count;
    return STAX_OK;
  }
  /* A constant too long to track still has a known length; a failed dim construction left
   * its reason in the context. */
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  int64_t length = 0;
  if (value->constant) {
    out_vector->count = stax_tensor_element_count(value->constant);
  } else if (operand.rank == 0) {
    out_vector->count = 1;
  } else if (stax_shape_dim_const(ic, operand.dims[0], &length)) {
    out_vector->count = length;
  }
  return STAX_OK;
}

stax_status_t stax_shape_require_vector_length(stax_shape_infer_t* ic, int32_t i,
                                               const char* role,
                                               const stax_shape_vector_t* vector) {
  if (vector->count >= 0) return STAX_OK;
  const stax_value_t* value = stax_infer_input(ic, i);
  char length[64] = "?";
  if (value && value->rank == 1) stax_shape_dim_text(ic, value->dims[0], length, sizeof(length));
  return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                          "input %d '%s' (%s) is not known when the graph is built and its "
                          "length (%s) is not static, so the output rank is unknown",
                          i, value && value->name ? value->name : "", role, length);
}

bool stax_shape_vector_const(stax_shape_infer_t* ic, const stax_shape_vector_t* vector,
                             int64_t k, int64_t* out_value) {
  *out_value = 0;
  if (!vector->known || k < 0 || k >= vector->count) return false;
  return stax_shape_dim_const(ic, vector->entries[k], out_value);
}

/* ---- constant tensors -------------------------------------------------------------------- */

/* A contiguous tensor with the same elements: the tensor itself (retained) or a copy. */
static stax_status_t contiguous_tensor(stax_shape_infer_t* ic, const stax_tensor_t* tensor,
                                       stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  if (stax_tensor_is_contiguous(tensor)) {
    stax_tensor_retain((stax_tensor_t*)tensor);
    *out_tensor = (stax_tensor_t*)tensor;
    return STAX_OK;
  }
  return stax_tensor_copy(ic->graph->allocator, tensor, out_tensor);
}

stax_status_t stax_shape_read_const_doubles(stax_shape_infer_t* ic, int32_t i,
                                            const char* role, int32_t capacity,
                                            double* out_values, int32_t* out_count,
                                            bool* out_known) {
  *out_count = 0;
  *out_known = false;
  const stax_value_t* value = stax_infer_input(ic, i);
  if (!value || !value->constant) return STAX_OK;
  int64_t count = stax_tensor_element_count(value->constant);
  if (count > capacity) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "input %d '%s' (%s) has %lld elements; at most %d are supported", i,
                            value->name, role, (long long)count, capacity);
  }
  stax_tensor_t* contiguous = NULL;
  STAX_RETURN_IF_ERROR(contiguous_tensor(ic, value->constant, &contiguous));
  stax_convert_elements(stax_tensor_dtype(contiguous), stax_tensor_data(contiguous),
                        STAX_DTYPE_FLOAT64, out_values, (size_t)count);
  stax_tensor_release(contiguous);
  *out_count = (int32_t)count;
  *out_known = true;
  return STAX_OK;
}

stax_status_t stax_shape_count_nonzero(stax_shape_infer_t* ic, const stax_tensor_t* tensor,
                                       int64_t limit, int64_t* out_count) {
  *out_count = 0;
  int64_t total = stax_tensor_element_count(tensor);
  if (limit > total) limit = total;
  if (limit <= 0) return STAX_OK;
  stax_tensor_t* contiguous = NULL;
  STAX_RETURN_IF_ERROR(contiguous_tensor(ic, tensor, &contiguous));
  stax_dtype_t dtype = stax_tensor_dtype(contiguous);
  const char* data = stax_tensor_data(contiguous);
  size_t element_size = stax_dtype_size(dtype);
  /* Converting to bool applies the dtype's own notion of zero (-0.0 and NaN included). */
  uint8_t flags[1024];
  int64_t count = 0;
  for (int64_t begin = 0; begin < limit; begin += (int64_t)sizeof(flags)) {
    int64_t chunk = limit - begin < (int64_t)sizeof(flags) ? limit - begin : (int64_t)sizeof(flags);
    stax_convert_elements(dtype, data + (size_t)begin * element_size, STAX_DTYPE_BOOL, flags,
                          (size_t)chunk);
    for (int64_t k = 0; k < chunk; k++) count += flags[k] != 0;
  }
  stax_tensor_release(contiguous);
  *out_count = count;
  return STAX_OK;
}

/* ---- dims -------------------------------------------------------------------------------- */

stax_status_t stax_shape_fresh_dim(stax_shape_infer_t* ic, int32_t output, int32_t dim,
                                   int64_t min, int64_t max, const stax_dim_t** out_dim) {
  *out_dim = NULL;
  const char* op_name = stax_op_name(ic->node->op);
  char prefix[32];
  size_t length = 0;
  for (; op_name[length] && length + 1 < sizeof(prefix); length++) {
    prefix[length] = (char)tolower((unsigned char)op_name[length]);
  }
  prefix[length] = '\0';
  char origin[256];
  snprintf(origin, sizeof(origin), "%s node '%s' output %d, dim %d", op_name, ic->node->name,
           output, dim);
  if (max < min) max = min;
  stax_status_t status = stax_symbol_fresh(ic->shape, prefix, min, max, origin, out_dim);
  if (status != STAX_OK) {
    return stax_status_annotate(status, "%s node '%s'", op_name, ic->node->name);
  }
  return STAX_OK;
}

int64_t stax_shape_dim_upper(stax_shape_infer_t* ic, const stax_dim_t* dim) {
  int64_t low = 0, high = STAX_DIM_MAX;
  if (dim) stax_dim_bounds(ic->shape, dim, &low, &high);
  return high;
}

const stax_dim_t* stax_shape_product(stax_shape_infer_t* ic, int32_t count,
                                     const stax_dim_t* const* dims) {
  const stax_dim_t* product = stax_dim_const(ic->shape, 1);
  for (int32_t k = 0; k < count; k++) product = stax_dim_mul(ic->shape, product, dims[k]);
  return product;
}

/* -1 when a <= b for every value of the symbols, +1 when a >= b, 0 when it depends. */
static int compare_by_bounds(stax_shape_infer_t* ic, const stax_dim_t* a, const stax_dim_t* b) {
  if (a == b) return -1;
  const stax_dim_t* difference = stax_dim_sub(ic->shape, a, b);
  if (!difference) return 0;
  int64_t low = 0, high = 0;
  stax_dim_bounds(ic->shape, difference, &low, &high);
  if (high <= 0) return -1;
  if (low >= 0) return 1;
  return 0;
}

const stax_dim_t* stax_shape_min(stax_shape_infer_t* ic, const stax_dim_t* a,
                                 const stax_dim_t* b) {
  if (!a || !b) return NULL;
  int order = compare_by_bounds(ic, a, b);
  if (order < 0) return a;
  if (order > 0) return b;
  return stax_dim_min(ic->shape, a, b);
}

const stax_dim_t* stax_shape_max(stax_shape_infer_t* ic, const stax_dim_t* a,
                                 const stax_dim_t* b) {
  if (!a || !b) return NULL;
  int order = compare_by_bounds(ic, a, b);
  if (order < 0) return b;
  if (order > 0) return a;
  return stax_dim_max(ic->shape, a, b);
}

/* ---- messages ---------------------------------------------------------------------------- */

const char* stax_shape_dims_text(stax_shape_infer_t* ic, int32_t rank,
                                 const stax_dim_t* const* dims, char* buf, size_t size) {
  if (size == 0) return buf;
  size_t used = 0;
  buf[0] = '\0';
  /* snprintf-style appends that stop cleanly at the end of buf. */
#define APPEND_TEXT(text)                                                     \
  do {                                                                        \
    if (used < size) {                                                        \
      int written_ = snprintf(buf + used, size - used, "%s", (text));         \
      used += written_ > 0 ? (size_t)written_ : 0;                            \
    }                                                                         \
  } while (0)
  APPEND_TEXT("[");
  for (int32_t k = 0; k < rank; k++) {
    char dim_text[96];
    if (k > 0) APPEND_TEXT(", ");
    APPEND_TEXT(stax_shape_dim_text(ic, dims[k], dim_text, sizeof(dim_text)));
  }
  APPEND_TEXT("]");
#undef APPEND_TEXT
  return buf;
}

stax_status_t stax_shape_unify_described(stax_shape_infer_t* ic, const stax_dim_t* a,
                                         const char* origin_a, const stax_dim_t* b,
                                         const char* origin_b) {
  stax_status_t status = stax_dim_unify(ic->shape, a, origin_a, b, origin_b);
  if (status != STAX_OK) {
    return stax_status_annotate(status, "%s node '%s'", stax_op_name(ic->node->op),
                                ic->node->name);
  }
  return STAX_OK;
}

/* ---- outputs ----------------------------------------------------------------------------- */

stax_status_t stax_shape_set_vector_output(stax_shape_infer_t* ic, int32_t i, stax_dtype_t dtype,
                                           bool scalar, int32_t count,
                                           const stax_dim_t* const* content) {
  const stax_dim_t* length = stax_dim_const(ic->shape, count);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, i, dtype, scalar ? 0 : 1, &length));
  return stax_infer_set_content(ic, i, count, content);
}

stax_status_t stax_shape_forward_content(stax_shape_infer_t* ic, const stax_value_t* input,
                                         int32_t i, int32_t output_rank) {
  if (!input || output_rank > 1 || !stax_dtype_is_integer(input->dtype)) return STAX_OK;
  const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
  int32_t count = 0;
  if (!stax_shape_value_content(ic, input, STAX_SHAPE_CONTENT_MAX, content, &count)) {
    return stax_infer_check_dims(ic);
  }
  return stax_infer_set_content(ic, i, count, content);
}
