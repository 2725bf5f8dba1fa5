/* Helpers for the shape-inference tests (test_shape_*.c): graphs with symbolic inputs written
 * as "B,3,S" (digits are constants, names are symbols with range [1, inf)), integer
 * initializers, one-call node construction and printing a value's shape as "[B, 3, S]". */
#ifndef STAX_TESTS_SHAPE_TEST_UTIL_H_
#define STAX_TESTS_SHAPE_TEST_UTIL_H_

#include <ctype.h>

#include "test_harness.h"

static inline stax_graph_t* shape_test_graph(void) {
  stax_graph_t* graph = NULL;
  CHECK_OK(stax_graph_create(stax_allocator_system(), &graph));
  return graph;
}

static inline const stax_dim_t* shape_test_symbol(stax_graph_t* graph, const char* name) {
  const stax_dim_t* dim = NULL;
  CHECK_OK(stax_symbol_get(stax_graph_shape_ctx(graph), name, 1, STAX_DIM_MAX, &dim));
  return dim;
}

/* Parses "B,3,S" ("" is a scalar) into dims. Returns the rank. */
static inline int32_t shape_test_parse(stax_graph_t* graph, const char* spec,
                                const stax_dim_t** dims) {
  int32_t rank = 0;
  const char* p = spec;
  while (*p) {
    char token[32];
    size_t length = 0;
    while (*p && *p != ',' && length + 1 < sizeof(token)) token[length++] = *p++;
    token[length] = '\0';
    if (*p == ',') p++;
    if (isdigit((unsigned char)token[0])) {
      dims[rank++] = stax_dim_const(stax_graph_shape_ctx(graph), strtoll(token, NULL, 10));
    } else {
      dims[rank++] = shape_test_symbol(graph, token);
    }
  }
  return rank;
}

static inline stax_value_id_t shape_test_input(stax_graph_t* graph, const char* name,
                                        stax_dtype_t dtype, const char* spec) {
  const stax_dim_t* dims[STAX_MAX_RANK + 4];
  int32_t rank = shape_test_parse(graph, spec, dims);
  stax_value_id_t value = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, name, dtype, rank, dims, &value));
  return value;
}

/* An int64 initializer of rank 1 (or rank 0 when rank0 is true and count is 1). */
static inline stax_value_id_t shape_test_ints(stax_graph_t* graph, const char* name, int32_t count,
                                       const int64_t* values, bool rank0) {
  int64_t dims[1] = {count};
  stax_tensor_t* tensor = NULL;
  stax_value_id_t value = STAX_VALUE_NONE;
  CHECK_OK(stax_tensor_create(stax_allocator_system(), STAX_DTYPE_INT64, rank0 ? 0 : 1, dims,
                              &tensor));
  if (!tensor) return value;
  int64_t* data = (int64_t*)stax_tensor_data(tensor);
  for (int32_t k = 0; k < count; k++) data[k] = values[k];
  CHECK_OK(stax_graph_add_initializer(graph, name, tensor, &value));
  stax_tensor_release(tensor);
  return value;
}

/* A float32 scalar initializer. */
static inline stax_value_id_t shape_test_float_scalar(stax_graph_t* graph, const char* name,
                                               float number) {
  stax_tensor_t* tensor = NULL;
  stax_value_id_t value = STAX_VALUE_NONE;
  CHECK_OK(stax_tensor_create(stax_allocator_system(), STAX_DTYPE_FLOAT32, 0, NULL, &tensor));
  if (!tensor) return value;
  *(float*)stax_tensor_data(tensor) = number;
  CHECK_OK(stax_graph_add_initializer(graph, name, tensor, &value));
  stax_tensor_release(tensor);
  return value;
}

/* Adds a node; out_outputs may be NULL when output_count is 1 and the caller ignores it. */
static inline stax_status_t shape_test_node(stax_graph_t* graph, stax_op_t op, const char* name,
                                     int32_t input_count, const stax_value_id_t* inputs,
                                     int32_t output_count, int32_t attr_count,
                                     const stax_attr_t* attrs, stax_value_id_t* out_outputs) {
  stax_value_id_t scratch[8];
  stax_node_desc_t desc = {op,           name,         input_count, inputs, output_count,
                           NULL,         attr_count,   attrs};
  return stax_graph_add_node(graph, &desc, out_outputs ? out_outputs : scratch);
}

static inline void shape_test_append(char* text, size_t size, size_t* used, const char* piece) {
  size_t length = strlen(piece);
  if (*used + length >= size) length = size - 1 - *used;
  memcpy(text + *used, piece, length);
  *used += length;
  text[*used] = '\0';
}

/* "[B, 3, floor((H - 1)/2) + 1]" */
static inline const char* shape_test_print(stax_graph_t* graph, stax_value_id_t value) {
  static char text[1024];
  size_t used = 0;
  text[0] = '\0';
  shape_test_append(text, sizeof(text), &used, "[");
  int32_t rank = stax_value_rank(graph, value);
  const stax_dim_t* const* dims = stax_value_dims(graph, value);
  for (int32_t k = 0; k < rank; k++) {
    if (k > 0) shape_test_append(text, sizeof(text), &used, ", ");
    char dim[256];
    stax_dim_print(stax_graph_shape_ctx(graph), dims[k], dim, sizeof(dim));
    shape_test_append(text, sizeof(text), &used, dim);
  }
  shape_test_append(text, sizeof(text), &used, "]");
  return text;
}

/* Checks dtype and printed shape of a value. */
#define CHECK_VALUE(graph, value, dtype, shape_text)                  \
  do {                                                                \
    CHECK_EQ_STR(stax_dtype_name(stax_value_dtype((graph), (value))), \
                 stax_dtype_name(dtype));                             \
    CHECK_EQ_STR(shape_test_print((graph), (value)), (shape_text));   \
  } while (0)

#endif /* STAX_TESTS_SHAPE_TEST_UTIL_H_ */
