/* Helpers for the shape-inference tests (test_shape_*.c): graphs with symbolic inputs written
 * as text ("B,3,S" or "B, S, 768": digits are constants, names are symbols with range [1, inf),
 * "T>=0" asks for [0, inf)), small initializers, adding nodes with brace lists (INPUTS, ATTRS),
 * and reading shapes and symbolic contents back as text ("[B, S, 12, 64]") so a check states
 * the whole expected shape. Every helper that cannot do its job fails a check or aborts, so a
 * broken fixture never passes silently. */
#ifndef STAX_TESTS_SHAPE_TEST_UTIL_H_
#define STAX_TESTS_SHAPE_TEST_UTIL_H_

#include <string.h>

#include "ir/graph_internal.h"
#include "test_harness.h"

#define SHAPE_TEST_COUNT_OF(type, ...) \
  ((int32_t)(sizeof((type[]){__VA_ARGS__}) / sizeof(type)))
/* INPUTS(a, b) and ATTRS(x, y) expand to "count, array" argument pairs. */
#define INPUTS(...) \
  SHAPE_TEST_COUNT_OF(stax_value_id_t, __VA_ARGS__), (stax_value_id_t[]){__VA_ARGS__}
#define ATTRS(...) SHAPE_TEST_COUNT_OF(stax_attr_t, __VA_ARGS__), (stax_attr_t[]){__VA_ARGS__}
#define NO_ATTRS 0, NULL

/* Every test needs a graph; without one nothing below can run, so failing to get one aborts. */
static inline stax_graph_t* shape_test_graph(void) {
  stax_graph_t* graph = NULL;
  stax_status_t status = stax_graph_create(stax_allocator_system(), &graph);
  if (status != STAX_OK) {
    fprintf(stderr, "shape_test_graph: %s\n", stax_status_message(status));
    stax_status_free(status);
    abort();
  }
  return graph;
}

/* A dim from text: a decimal constant, or a symbol with range [1, inf); "T>=0" asks for the
 * range [min, inf) instead (ranges narrow to the intersection when a symbol is named again). */
static inline const stax_dim_t* shape_test_dim(stax_graph_t* graph, const char* text) {
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(graph);
  char* end = NULL;
  long long value = strtoll(text, &end, 10);
  if (end != text && *end == '\0') return stax_dim_const(ctx, value);
  char name[64];
  snprintf(name, sizeof(name), "%s", text);
  int64_t min = 1;
  char* bound = strstr(name, ">=");
  if (bound) {
    min = strtoll(bound + 2, NULL, 10);
    *bound = '\0';
  }
  const stax_dim_t* dim = NULL;
  stax_status_t status = stax_symbol_get(ctx, name, min, STAX_DIM_MAX, &dim);
  if (status != STAX_OK) {
    fprintf(stderr, "shape_test_dim(%s): %s\n", text, stax_status_message(status));
    stax_status_free(status);
    CHECK(dim != NULL);
  }
  return dim;
}

/* A graph input with dims given as text separated by commas and/or spaces ("" for a scalar).
 * One slot more than the largest rank, so a too-long list reaches add_input and fails there
 * rather than being cut short. */
static inline stax_value_id_t shape_test_input(stax_graph_t* graph, const char* name,
                                               stax_dtype_t dtype, const char* dims_text) {
  const stax_dim_t* dims[STAX_MAX_RANK + 1];
  int32_t rank = 0;
  char buffer[256];
  snprintf(buffer, sizeof(buffer), "%s", dims_text);
  for (char* token = strtok(buffer, ", "); token && rank < STAX_MAX_RANK + 1;
       token = strtok(NULL, ", ")) {
    dims[rank++] = shape_test_dim(graph, token);
  }
  stax_value_id_t value = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, name, dtype, rank, dims, &value));
  return value;
}

/* A tensor of `count` elements of dtype (rank 1, or rank 0 when scalar) copied from data. */
static inline stax_tensor_t* shape_test_tensor(stax_dtype_t dtype, bool scalar, int64_t count,
                                               const void* data) {
  stax_tensor_t* tensor = NULL;
  CHECK_OK(stax_tensor_create(stax_allocator_system(), dtype, scalar ? 0 : 1, &count, &tensor));
  if (tensor && data && count > 0) {
    memcpy(stax_tensor_data(tensor), data, (size_t)count * stax_dtype_size(dtype));
  }
  return tensor;
}

/* Adds `tensor` as an initializer and releases the caller's reference. */
static inline stax_value_id_t shape_test_initializer(stax_graph_t* graph, const char* name,
                                                     stax_tensor_t* tensor) {
  stax_value_id_t value = STAX_VALUE_NONE;
  if (!tensor) return value; /* shape_test_tensor already failed a check */
  CHECK_OK(stax_graph_add_initializer(graph, name, tensor, &value));
  stax_tensor_release(tensor);
  return value;
}

/* An int64 vector initializer: shape_test_ints(g, "shape", 2, (int64_t[]){4, 2}). */
static inline stax_value_id_t shape_test_ints(stax_graph_t* graph, const char* name,
                                              int64_t count, const int64_t* values) {
  return shape_test_initializer(graph, name,
                                shape_test_tensor(STAX_DTYPE_INT64, false, count, values));
}

/* An int64 scalar (rank 0) initializer. */
static inline stax_value_id_t shape_test_scalar(stax_graph_t* graph, const char* name,
                                                int64_t value) {
  return shape_test_initializer(graph, name, shape_test_tensor(STAX_DTYPE_INT64, true, 1, &value));
}

/* A float32 scalar (rank 0) initializer. */
static inline stax_value_id_t shape_test_float_scalar(stax_graph_t* graph, const char* name,
                                                      float value) {
  return shape_test_initializer(graph, name,
                                shape_test_tensor(STAX_DTYPE_FLOAT32, true, 1, &value));
}

/* Adds a node; on success out_outputs (may be NULL) receives output_count ids. */
static inline stax_status_t shape_test_node(stax_graph_t* graph, stax_op_t op, const char* name,
                                            int32_t input_count, const stax_value_id_t* inputs,
                                            int32_t attr_count, const stax_attr_t* attrs,
                                            int32_t output_count, stax_value_id_t* out_outputs) {
  stax_node_desc_t desc = {
      .op = op,
      .name = name,
      .input_count = input_count,
      .inputs = inputs,
      .output_count = output_count,
      .attr_count = attr_count,
      .attrs = attrs,
  };
  return stax_graph_add_node(graph, &desc, out_outputs);
}

/* Adds a one-output node and returns its output (STAX_VALUE_NONE after a failed check). */
static inline stax_value_id_t shape_test_node1(stax_graph_t* graph, stax_op_t op,
                                               const char* name, int32_t input_count,
                                               const stax_value_id_t* inputs, int32_t attr_count,
                                               const stax_attr_t* attrs) {
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(graph, op, name, input_count, inputs, attr_count, attrs, 1, &out));
  return out;
}

/* "[B, 3, floor((H - 1)/2) + 1]": each dim resolved through the equalities known so far, so a
 * dim that a later node pinned prints as its value. */
static inline const char* shape_test_dims_text(stax_graph_t* graph, int32_t count,
                                               const stax_dim_t* const* dims, char* buffer,
                                               size_t size) {
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(graph);
  size_t used = (size_t)snprintf(buffer, size, "[");
  for (int32_t k = 0; k < count && used < size; k++) {
    if (k > 0) used += (size_t)snprintf(buffer + used, size - used, ", ");
    if (used < size) {
      used += (size_t)stax_dim_print(ctx, stax_dim_resolve(ctx, dims[k]), buffer + used,
                                     size - used);
    }
  }
  if (used < size) snprintf(buffer + used, size - used, "]");
  return buffer;
}

/* The value's shape as text, e.g. "[B, S, 12, 64]"; "<none>" for an invalid id. The text lives
 * in a static buffer until the next call. */
static inline const char* shape_test_shape(stax_graph_t* graph, stax_value_id_t value) {
  static char buffer[1024];
  if (value < 0 || value >= stax_graph_value_count(graph)) return "<none>";
  return shape_test_dims_text(graph, stax_value_rank(graph, value), stax_value_dims(graph, value),
                              buffer, sizeof(buffer));
}

/* The value's symbolic contents as text, "<unknown>" when not known, "<none>" for an invalid
 * id. */
static inline const char* shape_test_content(stax_graph_t* graph, stax_value_id_t value) {
  static char buffer[1024];
  if (value < 0 || value >= stax_graph_value_count(graph)) return "<none>";
  const stax_value_t* v = stax_graph_value(graph, value);
  if (v->content_count < 0) return "<unknown>";
  return shape_test_dims_text(graph, v->content_count, (const stax_dim_t* const*)v->content,
                              buffer, sizeof(buffer));
}

/* Checks dtype and printed shape of a value. */
#define CHECK_VALUE(graph, value, dtype, shape_text)                  \
  do {                                                                \
    CHECK_EQ_STR(stax_dtype_name(stax_value_dtype((graph), (value))), \
                 stax_dtype_name(dtype));                             \
    CHECK_EQ_STR(shape_test_shape((graph), (value)), (shape_text));   \
  } while (0)

#endif /* STAX_TESTS_SHAPE_TEST_UTIL_H_ */
