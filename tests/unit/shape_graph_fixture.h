/* Helpers for shape-inference tests: graphs with symbolic inputs written as text ("B,S,768"),
 * small int64 initializers, adding nodes with brace lists, and reading shapes and symbolic
 * contents back as text ("[B, S, 12, 64]") so a check states the whole expected shape. */
#ifndef STAX_TESTS_SHAPE_GRAPH_FIXTURE_H_
#define STAX_TESTS_SHAPE_GRAPH_FIXTURE_H_

#include <string.h>

#include "ir/graph_internal.h"
#include "test_harness.h"

#define FIXTURE_COUNT_OF(type, ...) \
  ((int32_t)(sizeof((type[]){__VA_ARGS__}) / sizeof(type)))
/* INPUTS(a, b) and ATTRS(x, y) expand to "count, array" argument pairs. */
#define INPUTS(...) FIXTURE_COUNT_OF(stax_value_id_t, __VA_ARGS__), (stax_value_id_t[]){__VA_ARGS__}
#define ATTRS(...) FIXTURE_COUNT_OF(stax_attr_t, __VA_ARGS__), (stax_attr_t[]){__VA_ARGS__}
#define NO_ATTRS 0, NULL

static inline stax_graph_t* fixture_graph(void) {
  stax_graph_t* graph = NULL;
  stax_status_t status = stax_graph_create(stax_allocator_system(), &graph);
  if (status != STAX_OK) {
    fprintf(stderr, "fixture_graph: %s\n", stax_status_message(status));
    stax_status_free(status);
    abort();
  }
  return graph;
}

/* A dim from text: a decimal constant, or a symbol with range [1, inf); "T>=0" asks for the
 * range [0, inf) instead (ranges narrow to the intersection when a symbol is named again). */
static inline const stax_dim_t* fixture_dim(stax_graph_t* graph, const char* text) {
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
    fprintf(stderr, "fixture_dim(%s): %s\n", text, stax_status_message(status));
    stax_status_free(status);
  }
  return dim;
}

/* A graph input with dims given as comma-separated text ("" for a scalar). */
static inline stax_value_id_t fixture_input(stax_graph_t* graph, const char* name,
                                            stax_dtype_t dtype, const char* dims_text) {
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  char buffer[256];
  snprintf(buffer, sizeof(buffer), "%s", dims_text);
  for (char* token = strtok(buffer, ", "); token && rank < STAX_MAX_RANK;
       token = strtok(NULL, ", ")) {
    dims[rank++] = fixture_dim(graph, token);
  }
  stax_value_id_t value = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(graph, name, dtype, rank, dims, &value));
  return value;
}

/* A tensor of `count` elements of dtype (rank 1, or rank 0 when scalar) copied from data. */
static inline stax_tensor_t* fixture_tensor(stax_dtype_t dtype, bool scalar, int64_t count,
                                            const void* data) {
  stax_tensor_t* tensor = NULL;
  CHECK_OK(stax_tensor_create(stax_allocator_system(), dtype, scalar ? 0 : 1, &count, &tensor));
  if (tensor && count > 0) {
    memcpy(stax_tensor_data(tensor), data, (size_t)count * stax_dtype_size(dtype));
  }
  return tensor;
}

static inline stax_value_id_t fixture_initializer(stax_graph_t* graph, const char* name,
                                                  stax_tensor_t* tensor) {
  stax_value_id_t value = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(graph, name, tensor, &value));
  stax_tensor_release(tensor);
  return value;
}

/* An int64 vector initializer: fixture_ints(g, "shape", 2, (int64_t[]){4, 2}). */
static inline stax_value_id_t fixture_ints(stax_graph_t* graph, const char* name,
                                           int64_t count, const int64_t* values) {
  return fixture_initializer(graph, name,
                             fixture_tensor(STAX_DTYPE_INT64, false, count, values));
}

static inline stax_value_id_t fixture_scalar(stax_graph_t* graph, const char* name,
                                             int64_t value) {
  return fixture_initializer(graph, name, fixture_tensor(STAX_DTYPE_INT64, true, 1, &value));
}

/* Adds a node; on success out_outputs receives output_count ids. */
static inline stax_status_t fixture_node(stax_graph_t* graph, stax_op_t op, const char* name,
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
static inline stax_value_id_t fixture_node1(stax_graph_t* graph, stax_op_t op, const char* name,
                                            int32_t input_count, const stax_value_id_t* inputs,
                                            int32_t attr_count, const stax_attr_t* attrs) {
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(fixture_node(graph, op, name, input_count, inputs, attr_count, attrs, 1, &out));
  return out;
}

static inline const char* fixture_dims_text(stax_graph_t* graph, int32_t count,
                                            const stax_dim_t* const* dims, char* buffer,
                                            size_t size) {
  size_t used = (size_t)snprintf(buffer, size, "[");
  for (int32_t k = 0; k < count && used < size; k++) {
    if (k > 0) used += (size_t)snprintf(buffer + used, size - used, ", ");
    if (used < size) {
      used += (size_t)stax_dim_print(stax_graph_shape_ctx(graph),
                                     stax_dim_resolve(stax_graph_shape_ctx(graph), dims[k]),
                                     buffer + used, size - used);
    }
  }
  if (used < size) snprintf(buffer + used, size - used, "]");
  return buffer;
}

/* The value's shape as text, e.g. "[B, S, 12, 64]"; "<none>" for an invalid id. */
static inline const char* fixture_shape(stax_graph_t* graph, stax_value_id_t value) {
  static char buffer[512];
  if (value < 0 || value >= stax_graph_value_count(graph)) return "<none>";
  return fixture_dims_text(graph, stax_value_rank(graph, value), stax_value_dims(graph, value),
                           buffer, sizeof(buffer));
}

/* The value's symbolic contents as text, or "<unknown>". */
static inline const char* fixture_content(stax_graph_t* graph, stax_value_id_t value) {
  static char buffer[512];
  if (value < 0 || value >= stax_graph_value_count(graph)) return "<none>";
  const stax_value_t* v = stax_graph_value(graph, value);
  if (v->content_count < 0) return "<unknown>";
  return fixture_dims_text(graph, v->content_count, (const stax_dim_t* const*)v->content, buffer,
                           sizeof(buffer));
}

#endif /* STAX_TESTS_SHAPE_GRAPH_FIXTURE_H_ */
