/* Helpers for the JIT tests: build fusion groups by hand (values, nodes with attributes,
 * input tensors with any strides), run a group through the generic kernels node by node (the
 * reference), run it through the JIT, and compare outputs with a tolerance. */
#ifndef STAX_TEST_JIT_UTIL_H_
#define STAX_TEST_JIT_UTIL_H_

#include <math.h>
#include <string.h>

#include "jit/jit.h"
#include "kernels/kernel.h"
#include "test_harness.h"

#define TG_MAX_VALUES 48
#define TG_MAX_NODES 24

typedef struct test_group_t {
  stax_jit_value_t values[TG_MAX_VALUES];
  stax_tensor_t* tensors[TG_MAX_VALUES]; /* inputs (owned) */
  int32_t value_count;
  stax_jit_node_t nodes[TG_MAX_NODES];
  stax_node_t graph_nodes[TG_MAX_NODES];
  int32_t node_inputs[TG_MAX_NODES][6];
  int32_t node_outputs[TG_MAX_NODES][3];
  stax_value_id_t graph_inputs[TG_MAX_NODES][6];
  stax_value_id_t graph_outputs[TG_MAX_NODES][3];
  stax_node_attr_t attrs[TG_MAX_NODES][4];
  int32_t node_count;
  int32_t inputs[TG_MAX_VALUES];
  int32_t input_count;
  int32_t outputs[TG_MAX_VALUES];
  int32_t output_count;
  stax_jit_group_t group;
} test_group_t;

static inline stax_allocator_t tg_sys(void) {
  return stax_allocator_system();
}

static uint64_t tg_rng = 0x243F6A8885A308D3ull;
static inline uint64_t tg_next(void) {
  tg_rng ^= tg_rng << 13;
  tg_rng ^= tg_rng >> 7;
  tg_rng ^= tg_rng << 17;
  return tg_rng;
}
static inline int64_t tg_int(int64_t low, int64_t high) {
  return low + (int64_t)(tg_next() % (uint64_t)(high - low + 1));
}
/* Uniform in [low, high). */
static inline double tg_uniform(double low, double high) {
  return low + (high - low) * (double)(tg_next() >> 11) / 9007199254740992.0;
}

static inline void tg_init(test_group_t* tg) {
  memset(tg, 0, sizeof(*tg));
}

/* When set, tg_fill rounds float values to multiples of 1/8, so float32 products and sums of
 * them are exact and matmul results can be compared tightly. */
static bool tg_grid = false;

static inline void tg_free(test_group_t* tg) {
  for (int32_t v = 0; v < tg->value_count; v++) stax_tensor_release(tg->tensors[v]);
  memset(tg, 0, sizeof(*tg));
}

/* Fills a tensor (any strides) with uniform values in [low, high) (integers: rounded). */
static inline void tg_fill(stax_tensor_t* t, double low, double high) {
  int64_t count = stax_tensor_element_count(t);
  int32_t rank = stax_tensor_rank(t);
  const int64_t* dims = stax_tensor_dims(t);
  const int64_t* strides = stax_tensor_strides(t);
  stax_dtype_t dtype = stax_tensor_dtype(t);
  char* base = stax_tensor_data(t);
  size_t size = stax_dtype_size(dtype);
  for (int64_t i = 0; i < count; i++) {
    int64_t rest = i, offset = 0;
    for (int32_t d = rank - 1; d >= 0; d--) {
      offset += (rest % dims[d]) * strides[d];
      rest /= dims[d];
    }
    double x = tg_uniform(low, high);
    if (!stax_dtype_is_float(dtype)) x = floor(x);
    if (tg_grid && stax_dtype_is_float(dtype)) x = round(x * 8) / 8;
    if (dtype == STAX_DTYPE_BOOL) x = tg_next() & 1;
    stax_convert_elements(STAX_DTYPE_FLOAT64, &x, dtype, base + offset * (int64_t)size, 1);
  }
}

/* An input value backed by a new tensor. layout: 0 contiguous, 1 transposed view of the last
 * two dims (rank >= 2), 2 reversed last dim (negative stride), 3 a strided slice (every other
 * element of a twice-as-long last dim). Values filled uniformly in [low, high). */
static inline int32_t tg_input_layout(test_group_t* tg, const char* name, stax_dtype_t dtype,
                                      int32_t rank, const int64_t* dims, int32_t layout, double low,
                                      double high) {
  int32_t v = tg->value_count++;
  stax_tensor_t* t = NULL;
  if (layout == 1 && rank >= 2) {
    int64_t swapped[STAX_MAX_RANK];
    memcpy(swapped, dims, sizeof(int64_t) * (size_t)rank);
    swapped[rank - 1] = dims[rank - 2];
    swapped[rank - 2] = dims[rank - 1];
    stax_tensor_t* base = NULL;
    CHECK_OK(stax_tensor_create(tg_sys(), dtype, rank, swapped, &base));
    int32_t perm[STAX_MAX_RANK];
    for (int32_t d = 0; d < rank; d++) perm[d] = d;
    perm[rank - 1] = rank - 2;
    perm[rank - 2] = rank - 1;
    CHECK_OK(stax_tensor_transpose(tg_sys(), base, perm, &t));
    stax_tensor_release(base);
  } else if ((layout == 2 || layout == 3) && rank >= 1) {
    int64_t wide[STAX_MAX_RANK];
    memcpy(wide, dims, sizeof(int64_t) * (size_t)rank);
    if (layout == 3) wide[rank - 1] = dims[rank - 1] * 2;
    stax_tensor_t* base = NULL;
    CHECK_OK(stax_tensor_create(tg_sys(), dtype, rank, wide, &base));
    int64_t start = layout == 2 ? -1 : 0, end = layout == 2 ? INT64_MIN : INT64_MAX;
    int64_t step = layout == 2 ? -1 : 2;
    int32_t axis = rank - 1;
    CHECK_OK(stax_tensor_slice(tg_sys(), base, 1, &start, &end, &axis, &step, &t));
    stax_tensor_release(base);
  } else {
    CHECK_OK(stax_tensor_create(tg_sys(), dtype, rank, dims, &t));
  }
  tg->tensors[v] = t;
  if (t) tg_fill(t, low, high);
  stax_jit_value_t* value = &tg->values[v];
  value->name = name;
  value->role = STAX_JIT_VALUE_INPUT;
  value->dtype = dtype;
  value->rank = rank;
  for (int32_t d = 0; d < rank; d++) {
    value->dims[d] = dims[d];
    value->strides[d] = t ? stax_tensor_strides(t)[d] : 0;
  }
  tg->inputs[tg->input_count++] = v;
  return v;
}

static inline int32_t tg_input(test_group_t* tg, const char* name, stax_dtype_t dtype, int32_t rank,
                               const int64_t* dims) {
  return tg_input_layout(tg, name, dtype, rank, dims, 0, -3.0, 3.0);
}

/* A temporary (role changes to OUTPUT with tg_output). */
static inline int32_t tg_value(test_group_t* tg, stax_dtype_t dtype, int32_t rank,
                               const int64_t* dims) {
  int32_t v = tg->value_count++;
  stax_jit_value_t* value = &tg->values[v];
  value->role = STAX_JIT_VALUE_TEMPORARY;
  value->dtype = dtype;
  value->rank = rank;
  for (int32_t d = 0; d < rank; d++) value->dims[d] = dims[d];
  stax_shape_contiguous_strides(rank, value->dims, value->strides);
  return v;
}

static inline void tg_output(test_group_t* tg, int32_t v) {
  tg->values[v].role = STAX_JIT_VALUE_OUTPUT;
  tg->outputs[tg->output_count++] = v;
}

/* Adds a node; attrs (up to 4) copied. outputs: value indices (-1 for omitted). */
static inline void tg_node_n(test_group_t* tg, stax_op_t op, int32_t input_count,
                             const int32_t* inputs, int32_t output_count, const int32_t* outputs,
                             int32_t attr_count, const stax_node_attr_t* attrs) {
  int32_t n = tg->node_count++;
  for (int32_t i = 0; i < input_count; i++) {
    tg->node_inputs[n][i] = inputs[i];
    tg->graph_inputs[n][i] = inputs[i] >= 0 ? inputs[i] : STAX_VALUE_NONE;
  }
  for (int32_t o = 0; o < output_count; o++) {
    tg->node_outputs[n][o] = outputs[o];
    tg->graph_outputs[n][o] = outputs[o] >= 0 ? outputs[o] : STAX_VALUE_NONE;
  }
  for (int32_t a = 0; a < attr_count; a++) tg->attrs[n][a] = attrs[a];
  stax_node_t* node = &tg->graph_nodes[n];
  node->op = op;
  node->name = stax_op_name(op);
  node->input_count = input_count;
  node->inputs = tg->graph_inputs[n];
  node->output_count = output_count;
  node->outputs = tg->graph_outputs[n];
  node->attr_count = attr_count;
  node->attrs = tg->attrs[n];
  stax_jit_node_t* jn = &tg->nodes[n];
  jn->node = node;
  jn->input_count = input_count;
  jn->inputs = tg->node_inputs[n];
  jn->output_count = output_count;
  jn->outputs = tg->node_outputs[n];
}

/* One-output node creating its output value. */
static inline int32_t tg_node(test_group_t* tg, stax_op_t op, int32_t input_count,
                              const int32_t* inputs, stax_dtype_t dtype, int32_t rank,
                              const int64_t* dims, int32_t attr_count,
                              const stax_node_attr_t* attrs) {
  int32_t out = tg_value(tg, dtype, rank, dims);
  tg_node_n(tg, op, input_count, inputs, 1, &out, attr_count, attrs);
  return out;
}

static inline stax_node_attr_t tg_attr_int(const char* name, int64_t value) {
  stax_node_attr_t a = {.name = name, .type = STAX_ATTR_INT};
  a.value.i = value;
  return a;
}
static inline stax_node_attr_t tg_attr_float(const char* name, float value) {
  stax_node_attr_t a = {.name = name, .type = STAX_ATTR_FLOAT};
  a.value.f = value;
  return a;
}
static inline stax_node_attr_t tg_attr_string(const char* name, const char* value) {
  stax_node_attr_t a = {.name = name, .type = STAX_ATTR_STRING};
  a.value.s = value;
  return a;
}
static inline stax_node_attr_t tg_attr_ints(const char* name, int32_t count,
                                            const int64_t* values) {
  stax_node_attr_t a = {.name = name, .type = STAX_ATTR_INTS};
  a.value.ints.count = count;
  a.value.ints.data = values;
  return a;
}

static inline const stax_jit_group_t* tg_group(test_group_t* tg, const char* name) {
  stax_jit_group_t* g = &tg->group;
  g->name = name;
  g->node_count = tg->node_count;
  g->nodes = tg->nodes;
  g->value_count = tg->value_count;
  g->values = tg->values;
  g->input_count = tg->input_count;
  g->inputs = tg->inputs;
  g->output_count = tg->output_count;
  g->outputs = tg->outputs;
  return g;
}

/* Runs the group through the generic kernels (on `pool`, which may be NULL); out_tensors[i]
 * gets output i (owned). */
static inline stax_status_t tg_reference_on(test_group_t* tg, stax_threadpool_t* pool,
                                            stax_tensor_t** out_tensors) {
  stax_tensor_t* live[TG_MAX_VALUES] = {NULL};
  stax_status_t status = STAX_OK;
  for (int32_t v = 0; v < tg->value_count; v++)
    if (tg->tensors[v]) {
      live[v] = tg->tensors[v];
      stax_tensor_retain(live[v]);
    }
  for (int32_t n = 0; n < tg->node_count && status == STAX_OK; n++) {
    const stax_jit_node_t* jn = &tg->nodes[n];
    stax_tensor_t* inputs[6] = {NULL};
    stax_tensor_t* outputs[3] = {NULL};
    for (int32_t i = 0; i < jn->input_count; i++)
      inputs[i] = jn->inputs[i] >= 0 ? live[jn->inputs[i]] : NULL;
    stax_kernel_call_t call = {.node = jn->node,
                               .allocator = tg_sys(),
                               .pool = pool,
                               .input_count = jn->input_count,
                               .inputs = inputs,
                               .output_count = jn->output_count,
                               .outputs = outputs};
    status = stax_kernel_for_op(jn->node->op)(&call);
    for (int32_t o = 0; o < jn->output_count; o++) {
      if (jn->outputs[o] >= 0 && status == STAX_OK) {
        live[jn->outputs[o]] = outputs[o];
      } else if (outputs[o]) {
        stax_tensor_release(outputs[o]);
      }
    }
  }
  for (int32_t i = 0; i < tg->output_count; i++) {
    out_tensors[i] = status == STAX_OK ? live[tg->outputs[i]] : NULL;
    if (out_tensors[i]) stax_tensor_retain(out_tensors[i]);
  }
  for (int32_t v = 0; v < tg->value_count; v++) stax_tensor_release(live[v]);
  return status;
}

static inline stax_status_t tg_reference(test_group_t* tg, stax_tensor_t** out_tensors) {
  return tg_reference_on(tg, NULL, out_tensors);
}

/* Runs a compiled kernel on the group's inputs into fresh contiguous outputs. */
static inline stax_status_t tg_run(test_group_t* tg, stax_jit_kernel_t* kernel,
                                   stax_threadpool_t* pool, stax_tensor_t** out_tensors) {
  stax_tensor_t* inputs[TG_MAX_VALUES];
  for (int32_t i = 0; i < tg->input_count; i++) inputs[i] = tg->tensors[tg->inputs[i]];
  for (int32_t i = 0; i < tg->output_count; i++) {
    const stax_jit_value_t* v = &tg->values[tg->outputs[i]];
    out_tensors[i] = NULL;
    STAX_RETURN_IF_ERROR(stax_tensor_create(tg_sys(), v->dtype, v->rank, v->dims, &out_tensors[i]));
  }
  return stax_jit_kernel_run(kernel, tg->input_count, inputs, tg->output_count, out_tensors, pool);
}

/* Element-by-element comparison: |a - b| <= atol + rtol * |b|; NaN matches NaN, infinities
 * must match exactly. Returns the number of mismatches (printing the first few). */
static inline int64_t tg_compare(const char* what, const stax_tensor_t* actual,
                                 const stax_tensor_t* expected, double atol, double rtol) {
  if (!actual || !expected) return 1;
  int64_t count = stax_tensor_element_count(expected);
  if (stax_tensor_element_count(actual) != count) {
    fprintf(stderr, "%s: %lld vs %lld elements\n", what,
            (long long)stax_tensor_element_count(actual), (long long)count);
    return 1;
  }
  stax_tensor_t* a = NULL;
  stax_tensor_t* b = NULL;
  CHECK_OK(stax_tensor_copy(tg_sys(), actual, &a));
  CHECK_OK(stax_tensor_copy(tg_sys(), expected, &b));
  double* x = malloc(sizeof(double) * (size_t)(count + 1));
  double* y = malloc(sizeof(double) * (size_t)(count + 1));
  stax_convert_elements(stax_tensor_dtype(a), stax_tensor_data(a), STAX_DTYPE_FLOAT64, x,
                        (size_t)count);
  stax_convert_elements(stax_tensor_dtype(b), stax_tensor_data(b), STAX_DTYPE_FLOAT64, y,
                        (size_t)count);
  int64_t bad = 0;
  for (int64_t i = 0; i < count; i++) {
    bool ok;
    if (isnan(y[i])) {
      ok = isnan(x[i]);
    } else if (isinf(y[i])) {
      ok = x[i] == y[i];
    } else {
      ok = fabs(x[i] - y[i]) <= atol + rtol * fabs(y[i]);
    }
    if (!ok && bad++ < 5)
      fprintf(stderr, "%s: element %lld: jit %.9g, reference %.9g\n", what, (long long)i, x[i],
              y[i]);
  }
  free(x);
  free(y);
  stax_tensor_release(a);
  stax_tensor_release(b);
  return bad;
}

/* The JIT backend, or NULL (with a note, not a failure) when stax was built without LLVM:
 * the tests then have nothing to check. */
static inline stax_jit_backend_t* tg_backend(void) {
  stax_jit_backend_t* backend = NULL;
  stax_status_t status = stax_jit_backend_get(&backend);
  if (stax_status_code(status) == STAX_UNIMPLEMENTED) {
    static bool noted = false;
    if (!noted) printf("  (no JIT backend in this build: %s)\n", stax_status_message(status));
    noted = true;
    stax_status_free(status);
    return NULL;
  }
  CHECK_OK(status);
  return backend;
}

/* Compiles, runs and compares every output against the reference; returns the kernel's
 * compile status code (outputs compared only on success). */
static inline stax_status_code_t tg_check(test_group_t* tg, const char* name,
                                          const stax_jit_compile_options_t* options,
                                          stax_threadpool_t* pool, double atol, double rtol) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return STAX_OK_CODE; /* nothing to check without LLVM */
  stax_jit_kernel_t* kernel = NULL;
  stax_status_t status = stax_jit_compile_group(backend, tg_group(tg, name), options, &kernel);
  if (status != STAX_OK) {
    stax_status_code_t code = stax_status_code(status);
    if (code != STAX_UNIMPLEMENTED) fprintf(stderr, "%s: %s\n", name, stax_status_message(status));
    stax_status_free(status);
    return code;
  }
  stax_tensor_t* expected[TG_MAX_VALUES] = {NULL};
  stax_tensor_t* actual[TG_MAX_VALUES] = {NULL};
  CHECK_OK(tg_reference(tg, expected));
  CHECK_OK(tg_run(tg, kernel, pool, actual));
  for (int32_t i = 0; i < tg->output_count; i++) {
    int64_t bad = tg_compare(name, actual[i], expected[i], atol, rtol);
    if (bad) fprintf(stderr, "%s: output %d: %lld mismatches\n", name, (int)i, (long long)bad);
    CHECK(bad == 0);
    stax_tensor_release(actual[i]);
    stax_tensor_release(expected[i]);
  }
  stax_jit_kernel_release(kernel);
  return STAX_OK_CODE;
}

#endif /* STAX_TEST_JIT_UTIL_H_ */
