/* Helpers shared by the kernel unit tests (test_kernels_*.c): tensors filled through the
 * runtime's conversions (kt_make, kt_make_strided, kt_make_reversed) or through the test's own
 * codec (kt_make_codec, kt_make_raw), reads of any view (kt_get, kt_get_codec, kt_get_int),
 * attribute builders, kernel runners on a node built on the stack (kt_run with the settable
 * kt_test_pool / kt_test_allocator, kt_run_kernel with an explicit pool), value and dims
 * checks, and the allocation-failure sweep. */
#ifndef STAX_TESTS_KERNEL_TEST_UTIL_H_
#define STAX_TESTS_KERNEL_TEST_UTIL_H_

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernel.h"
#include "test_harness.h"

static inline stax_allocator_t kt_allocator(void) { return stax_allocator_system(); }

/* Element i of a contiguous array of `dtype`, as a double, and the reverse, through the
 * runtime's Cast conversions (tested on their own in test_dtype.c). kt_load_codec /
 * kt_store_codec below are the test's own independent codec instead. */
static inline double kt_load_double(stax_dtype_t dtype, const void* base, int64_t i) {
  double value = 0;
  stax_convert_elements(dtype, (const char*)base + i * (int64_t)stax_dtype_size(dtype),
                        STAX_DTYPE_FLOAT64, &value, 1);
  return value;
}

static inline void kt_store_double(stax_dtype_t dtype, void* base, int64_t i, double v) {
  stax_convert_elements(STAX_DTYPE_FLOAT64, &v, dtype,
                        (char*)base + i * (int64_t)stax_dtype_size(dtype), 1);
}

/* Element offset of row-major element i of any view. */
static inline int64_t kt_view_offset(const stax_tensor_t* t, int64_t i) {
  int32_t rank = stax_tensor_rank(t);
  const int64_t* dims = stax_tensor_dims(t);
  const int64_t* strides = stax_tensor_strides(t);
  int64_t offset = stax_tensor_offset(t);
  for (int32_t d = rank - 1; d >= 0; d--) {
    offset += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return offset;
}

static inline double kt_get(const stax_tensor_t* t, int64_t i) {
  return kt_load_double(stax_tensor_dtype(t), stax_buffer_data(stax_tensor_buffer(t)),
                        kt_view_offset(t, i));
}

/* Exact read of an int64 tensor. */
static inline int64_t kt_get_int(const stax_tensor_t* t, int64_t i) {
  return ((const int64_t*)stax_buffer_data(stax_tensor_buffer(t)))[kt_view_offset(t, i)];
}

/* The test's own element codec, independent of the runtime's conversions: element i of a
 * contiguous array of `dtype` as a double. */
static inline double kt_load_codec(stax_dtype_t dtype, const void* base, int64_t i) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: return ((const float*)base)[i];
    case STAX_DTYPE_FLOAT64: return ((const double*)base)[i];
    case STAX_DTYPE_FLOAT16: return stax_f16_to_f32(((const uint16_t*)base)[i]);
    case STAX_DTYPE_BFLOAT16: return stax_bf16_to_f32(((const uint16_t*)base)[i]);
    case STAX_DTYPE_INT8: return ((const int8_t*)base)[i];
    case STAX_DTYPE_INT16: return ((const int16_t*)base)[i];
    case STAX_DTYPE_INT32: return ((const int32_t*)base)[i];
    case STAX_DTYPE_INT64: return (double)((const int64_t*)base)[i];
    case STAX_DTYPE_UINT8: return ((const uint8_t*)base)[i];
    case STAX_DTYPE_UINT16: return ((const uint16_t*)base)[i];
    case STAX_DTYPE_UINT32: return ((const uint32_t*)base)[i];
    case STAX_DTYPE_UINT64: return (double)((const uint64_t*)base)[i];
    case STAX_DTYPE_BOOL: return ((const uint8_t*)base)[i];
    default: return NAN;
  }
}

/* Stores with plain C casts: only for small exact values every dtype can hold. */
static inline void kt_store_codec(stax_dtype_t dtype, void* base, int64_t i, double v) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: ((float*)base)[i] = (float)v; break;
    case STAX_DTYPE_FLOAT64: ((double*)base)[i] = v; break;
    case STAX_DTYPE_FLOAT16: ((uint16_t*)base)[i] = stax_f32_to_f16((float)v); break;
    case STAX_DTYPE_BFLOAT16: ((uint16_t*)base)[i] = stax_f32_to_bf16((float)v); break;
    case STAX_DTYPE_INT8: ((int8_t*)base)[i] = (int8_t)v; break;
    case STAX_DTYPE_INT16: ((int16_t*)base)[i] = (int16_t)v; break;
    case STAX_DTYPE_INT32: ((int32_t*)base)[i] = (int32_t)v; break;
    case STAX_DTYPE_INT64: ((int64_t*)base)[i] = (int64_t)v; break;
    case STAX_DTYPE_UINT8: ((uint8_t*)base)[i] = (uint8_t)v; break;
    case STAX_DTYPE_UINT16: ((uint16_t*)base)[i] = (uint16_t)v; break;
    case STAX_DTYPE_UINT32: ((uint32_t*)base)[i] = (uint32_t)v; break;
    case STAX_DTYPE_UINT64: ((uint64_t*)base)[i] = (uint64_t)v; break;
    case STAX_DTYPE_BOOL: ((uint8_t*)base)[i] = (uint8_t)(v != 0); break;
    default: break;
  }
}

/* What storing v into dtype keeps under the test's codec (exact for the tests' values; rounds
 * for halves). */
static inline double kt_round_to(stax_dtype_t dtype, double v) {
  unsigned char slot[8];
  kt_store_codec(dtype, slot, 0, v);
  return kt_load_codec(dtype, slot, 0);
}

/* Row-major element i of any view, decoded by the test's codec. */
static inline double kt_get_codec(const stax_tensor_t* t, int64_t i) {
  return kt_load_codec(stax_tensor_dtype(t), stax_buffer_data(stax_tensor_buffer(t)),
                       kt_view_offset(t, i));
}

/* How a test writes element i of a contiguous array: kt_store_double or kt_store_codec. */
typedef void (*kt_store_fn)(stax_dtype_t dtype, void* base, int64_t i, double v);

/* A contiguous tensor of `values` written with `store` (values NULL: zeros). */
static inline stax_tensor_t* kt_make_with(kt_store_fn store, stax_dtype_t dtype, int32_t rank,
                                          const int64_t* dims, const double* values) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(kt_allocator(), dtype, rank, dims, &t));
  if (!t) return NULL;
  int64_t n = stax_tensor_element_count(t);
  for (int64_t i = 0; i < n; i++) store(dtype, stax_tensor_data(t), i, values ? values[i] : 0);
  return t;
}

/* A contiguous tensor filled through the test's codec (values NULL: zeros). */
static inline stax_tensor_t* kt_make_codec(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                           const double* values) {
  return kt_make_with(kt_store_codec, dtype, rank, dims, values);
}

/* Raw bytes copied in (for exact 64-bit and bit-pattern tests). */
static inline stax_tensor_t* kt_make_raw(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                         const void* bytes) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(kt_allocator(), dtype, rank, dims, &t));
  if (t)
    memcpy(stax_tensor_data(t), bytes,
           (size_t)stax_tensor_element_count(t) * stax_dtype_size(dtype));
  return t;
}

/* A contiguous tensor filled through the runtime's conversions (values NULL: zeros). */
static inline stax_tensor_t* kt_make(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                     const double* values) {
  return kt_make_with(kt_store_double, dtype, rank, dims, values);
}

/* The same values as a non-contiguous view: every other element of a tensor twice as long on
 * the last axis (rank >= 1). */
static inline stax_tensor_t* kt_make_strided(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                             const double* values) {
  int64_t wide[STAX_MAX_RANK];
  for (int32_t k = 0; k < rank; k++) wide[k] = dims[k];
  wide[rank - 1] = 2 * dims[rank - 1];
  stax_tensor_t* base = NULL;
  CHECK_OK(stax_tensor_create_zeros(kt_allocator(), dtype, rank, wide, &base));
  if (!base) return NULL;
  int64_t n = 1;
  for (int32_t k = 0; k < rank; k++) n *= dims[k];
  int64_t last = dims[rank - 1];
  for (int64_t i = 0; i < n; i++)
    kt_store_double(dtype, stax_tensor_data(base), (i / last) * 2 * last + (i % last) * 2,
                    values[i]);
  int64_t start = 0, end = wide[rank - 1], step = 2;
  int32_t axis = rank - 1;
  stax_tensor_t* view = NULL;
  CHECK_OK(stax_tensor_slice(kt_allocator(), base, 1, &start, &end, &axis, &step, &view));
  stax_tensor_release(base);
  CHECK(view && !stax_tensor_is_contiguous(view));
  return view;
}

/* The same values as a view with a negative stride on the last axis. */
static inline stax_tensor_t* kt_make_reversed(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                              const double* values) {
  stax_tensor_t* base = kt_make(dtype, rank, dims, NULL);
  if (!base) return NULL;
  int64_t n = stax_tensor_element_count(base), last = dims[rank - 1];
  for (int64_t i = 0; i < n; i++)
    kt_store_double(dtype, stax_tensor_data(base), (i / last) * last + (last - 1 - i % last),
                    values[i]);
  int64_t start = -1, end = INT64_MIN, step = -1;
  int32_t axis = rank - 1;
  stax_tensor_t* view = NULL;
  CHECK_OK(stax_tensor_slice(kt_allocator(), base, 1, &start, &end, &axis, &step, &view));
  stax_tensor_release(base);
  return view;
}

static inline stax_tensor_t* kt_make_ints(int32_t rank, const int64_t* dims,
                                          const int64_t* values) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(kt_allocator(), STAX_DTYPE_INT64, rank, dims, &t));
  if (t && stax_tensor_element_count(t) > 0) {
    size_t bytes = sizeof(int64_t) * (size_t)stax_tensor_element_count(t);
    if (values)
      memcpy(stax_tensor_data(t), values, bytes);
    else
      memset(stax_tensor_data(t), 0, bytes);
  }
  return t;
}

static inline stax_tensor_t* kt_vec(int64_t count, const int64_t* values) {
  return kt_make_ints(1, &count, values);
}

static inline stax_tensor_t* kt_scalar_int(int64_t value) { return kt_make_ints(0, NULL, &value); }

/* The pool and allocator kernels run with; tests of the parallel paths and of allocation
 * failures set them for a while. */
static stax_threadpool_t* kt_test_pool = NULL;
static stax_allocator_t* kt_test_allocator = NULL;

/* Runs a kernel through a node named `node_name` built on the stack. */
static inline stax_status_t kt_call_kernel(stax_kernel_fn fn, stax_op_t op, const char* node_name,
                                           const stax_node_attr_t* attrs, int32_t attr_count,
                                           stax_tensor_t* const* inputs, int32_t input_count,
                                           stax_tensor_t** outputs, int32_t output_count,
                                           stax_allocator_t allocator, stax_threadpool_t* pool) {
  stax_node_t node;
  memset(&node, 0, sizeof(node));
  node.op = op;
  node.name = node_name;
  node.attr_count = attr_count;
  node.attrs = (stax_node_attr_t*)attrs;
  stax_kernel_call_t call;
  memset(&call, 0, sizeof(call));
  call.node = &node;
  call.allocator = allocator;
  call.pool = pool;
  call.input_count = input_count;
  call.inputs = inputs;
  call.output_count = output_count;
  call.outputs = outputs;
  return fn(&call);
}

/* Runs a kernel with kt_test_allocator (or the system allocator) and kt_test_pool. */
static inline stax_status_t kt_run(stax_kernel_fn fn, stax_op_t op, const stax_node_attr_t* attrs,
                                   int32_t attr_count, stax_tensor_t** inputs, int32_t input_count,
                                   stax_tensor_t** outputs, int32_t output_count) {
  return kt_call_kernel(fn, op, "node0", attrs, attr_count, inputs, input_count, outputs,
                        output_count, kt_test_allocator ? *kt_test_allocator : kt_allocator(),
                        kt_test_pool);
}

/* Runs a kernel with the system allocator and an explicit pool (NULL: serial). */
static inline stax_status_t kt_run_kernel(stax_kernel_fn fn, stax_op_t op,
                                          const stax_node_attr_t* attrs, int32_t attr_count,
                                          stax_tensor_t** inputs, int32_t input_count,
                                          stax_tensor_t** outputs, int32_t output_count,
                                          stax_threadpool_t* pool) {
  return kt_call_kernel(fn, op, "node0", attrs, attr_count, inputs, input_count, outputs,
                        output_count, kt_allocator(), pool);
}

static inline stax_node_attr_t kt_attr_int(const char* name, int64_t value) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_INT;
  a.value.i = value;
  return a;
}

static inline stax_node_attr_t kt_attr_ints(const char* name, int32_t count,
                                            const int64_t* values) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_INTS;
  a.value.ints.count = count;
  a.value.ints.data = values;
  return a;
}

static inline stax_node_attr_t kt_attr_float(const char* name, float value) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_FLOAT;
  a.value.f = value;
  return a;
}

static inline stax_node_attr_t kt_attr_string(const char* name, const char* value) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_STRING;
  a.value.s = value;
  return a;
}

/* Reads any view into doubles in row-major order (through a contiguous copy and the runtime's
 * conversions). */
static inline void kt_read_values(const stax_tensor_t* t, double* out) {
  stax_tensor_t* copy = NULL;
  CHECK_OK(stax_tensor_copy(kt_allocator(), t, &copy));
  if (!copy) return;
  stax_convert_elements(stax_tensor_dtype(copy), stax_tensor_data(copy), STAX_DTYPE_FLOAT64, out,
                        (size_t)stax_tensor_element_count(copy));
  stax_tensor_release(copy);
}

/* Releases a tensor that may be NULL. */
static inline void kt_release(stax_tensor_t* t) {
  if (t) stax_tensor_release(t);
}

/* Releases and clears, so the array can serve the next call's outputs. */
static inline void kt_release_all(stax_tensor_t** tensors, int count) {
  for (int i = 0; i < count; i++) {
    if (tensors[i]) stax_tensor_release(tensors[i]);
    tensors[i] = NULL;
  }
}

static inline bool kt_dims_are(const stax_tensor_t* t, int32_t rank, const int64_t* dims) {
  if (!t || stax_tensor_rank(t) != rank) return false;
  for (int32_t k = 0; k < rank; k++)
    if (stax_tensor_dims(t)[k] != dims[k]) return false;
  return true;
}

/* Runs a kernel with allocation number 1, 2, 3, ... failing until it succeeds: every failure
 * must be a status with no output left behind, and nothing may leak either way. */
static inline void kt_check_allocation_failures(stax_kernel_fn fn, stax_op_t op,
                                                const stax_node_attr_t* attrs, int32_t attr_count,
                                                stax_tensor_t** inputs, int32_t input_count,
                                                int32_t output_count) {
  for (uint64_t fail_at = 1; fail_at < 1000; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), fail_at);
    stax_allocator_t failing = stax_failing_allocator(&state);
    stax_tensor_t* outputs[8] = {NULL};
    kt_test_allocator = &failing;
    stax_status_t status =
        kt_run(fn, op, attrs, attr_count, inputs, input_count, outputs, output_count);
    kt_test_allocator = NULL;
    bool failed = status != STAX_OK;
    if (failed) CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
    stax_status_free(status);
    for (int32_t i = 0; failed && i < output_count; i++) CHECK(outputs[i] == NULL);
    kt_release_all(outputs, output_count);
    CHECK_EQ_INT(state.live_allocations, 0);
    if (!failed) {
      CHECK(state.failed_count == 0);
      return;
    }
  }
  CHECK(false); /* never succeeded */
}

/* Checks every element of t (row-major, any view) against expected. */
static inline void kt_check_values(const stax_tensor_t* t, const double* expected, int64_t count,
                                   double tolerance) {
  CHECK(t != NULL);
  if (!t) return;
  CHECK_EQ_INT(stax_tensor_element_count(t), count);
  if (stax_tensor_element_count(t) != count) return;
  for (int64_t i = 0; i < count; i++) {
    double value = kt_get(t, i);
    if (!(fabs(value - expected[i]) <= tolerance)) {
      fprintf(stderr, "  element %lld: got %.9g, expected %.9g\n", (long long)i, value,
              expected[i]);
      CHECK_NEAR(value, expected[i], tolerance);
      return;
    }
  }
  CHECK(true);
}

static inline stax_node_attr_t kt_attr_tensor(const char* name, stax_tensor_t* tensor) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_TENSOR;
  a.value.tensor = tensor;
  return a;
}

#endif /* STAX_TESTS_KERNEL_TEST_UTIL_H_ */
