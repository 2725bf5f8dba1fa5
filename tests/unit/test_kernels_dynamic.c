/* Tests for the data-dependent kernels (src/kernels/dynamic.c): NonZero (-0 and NaN, scalars,
 * empty inputs), TopK (largest/smallest, ties by lower index, NaN and signed zeros, exact
 * 64-bit integers, k = 0), Unique (the ONNX examples sorted and unsorted, flattened and along
 * an axis, partial outputs) and Compress (with and without axis, short and long conditions),
 * with strided inputs, preallocated outputs and every error path. */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static inline stax_allocator_t allocator(void) { return stax_allocator_system(); }

/* Element i of a contiguous array of `dtype`, as a double, and the reverse (the runtime's
 * Cast conversions, tested on their own in test_dtype.c). */
static inline double load_double(stax_dtype_t dtype, const void* base, int64_t i) {
  double value = 0;
  stax_convert_elements(dtype, (const char*)base + i * (int64_t)stax_dtype_size(dtype),
                        STAX_DTYPE_FLOAT64, &value, 1);
  return value;
}

static inline void store_double(stax_dtype_t dtype, void* base, int64_t i, double v) {
  stax_convert_elements(STAX_DTYPE_FLOAT64, &v, dtype, (char*)base + i * (int64_t)stax_dtype_size(dtype), 1);
}

/* Element offset of row-major element i of any view. */
static inline int64_t view_offset(const stax_tensor_t* t, int64_t i) {
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

static inline double get(const stax_tensor_t* t, int64_t i) {
  return load_double(stax_tensor_dtype(t), stax_buffer_data(stax_tensor_buffer(t)), view_offset(t, i));
}

/* Exact read of an int64 tensor. */
static inline int64_t get_int(const stax_tensor_t* t, int64_t i) {
  return ((const int64_t*)stax_buffer_data(stax_tensor_buffer(t)))[view_offset(t, i)];
}

static inline stax_tensor_t* make(stax_dtype_t dtype, int32_t rank, const int64_t* dims, const double* values) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(allocator(), dtype, rank, dims, &t));
  if (!t) return NULL;
  int64_t n = stax_tensor_element_count(t);
  for (int64_t i = 0; i < n; i++) store_double(dtype, stax_tensor_data(t), i, values ? values[i] : 0);
  return t;
}

/* The same values as a non-contiguous view: every other element of a tensor twice as long on
 * the last axis (rank >= 1). */
static inline stax_tensor_t* make_strided(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                   const double* values) {
  int64_t wide[STAX_MAX_RANK];
  for (int32_t k = 0; k < rank; k++) wide[k] = dims[k];
  wide[rank - 1] = 2 * dims[rank - 1];
  stax_tensor_t* base = NULL;
  CHECK_OK(stax_tensor_create_zeros(allocator(), dtype, rank, wide, &base));
  if (!base) return NULL;
  int64_t n = 1;
  for (int32_t k = 0; k < rank; k++) n *= dims[k];
  int64_t last = dims[rank - 1];
  for (int64_t i = 0; i < n; i++)
    store_double(dtype, stax_tensor_data(base), (i / last) * 2 * last + (i % last) * 2, values[i]);
  int64_t start = 0, end = wide[rank - 1], step = 2;
  int32_t axis = rank - 1;
  stax_tensor_t* view = NULL;
  CHECK_OK(stax_tensor_slice(allocator(), base, 1, &start, &end, &axis, &step, &view));
  stax_tensor_release(base);
  CHECK(view && !stax_tensor_is_contiguous(view));
  return view;
}

/* The same values as a view with a negative stride on the last axis. */
static inline stax_tensor_t* make_reversed(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                    const double* values) {
  stax_tensor_t* base = make(dtype, rank, dims, NULL);
  if (!base) return NULL;
  int64_t n = stax_tensor_element_count(base), last = dims[rank - 1];
  for (int64_t i = 0; i < n; i++)
    store_double(dtype, stax_tensor_data(base), (i / last) * last + (last - 1 - i % last), values[i]);
  int64_t start = -1, end = INT64_MIN, step = -1;
  int32_t axis = rank - 1;
  stax_tensor_t* view = NULL;
  CHECK_OK(stax_tensor_slice(allocator(), base, 1, &start, &end, &axis, &step, &view));
  stax_tensor_release(base);
  return view;
}

static inline stax_tensor_t* make_ints(int32_t rank, const int64_t* dims, const int64_t* values) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(allocator(), STAX_DTYPE_INT64, rank, dims, &t));
  if (t && stax_tensor_element_count(t) > 0) {
    size_t bytes = sizeof(int64_t) * (size_t)stax_tensor_element_count(t);
    if (values) memcpy(stax_tensor_data(t), values, bytes);
    else memset(stax_tensor_data(t), 0, bytes);
  }
  return t;
}

static inline stax_tensor_t* vec(int64_t count, const int64_t* values) { return make_ints(1, &count, values); }

/* The pool and allocator kernels run with; tests of the parallel paths and of allocation
 * failures set them for a while. */
static stax_threadpool_t* test_pool = NULL;
static stax_allocator_t* test_allocator = NULL;

static inline stax_status_t run(stax_kernel_fn fn, stax_op_t op, const stax_node_attr_t* attrs,
                         int32_t attr_count, stax_tensor_t** inputs, int32_t input_count,
                         stax_tensor_t** outputs, int32_t output_count) {
  stax_node_t node;
  memset(&node, 0, sizeof(node));
  node.op = op;
  node.name = "node0";
  node.attr_count = attr_count;
  node.attrs = (stax_node_attr_t*)attrs;
  stax_kernel_call_t call;
  memset(&call, 0, sizeof(call));
  call.node = &node;
  call.allocator = test_allocator ? *test_allocator : allocator();
  call.pool = test_pool;
  call.input_count = input_count;
  call.inputs = inputs;
  call.output_count = output_count;
  call.outputs = outputs;
  return fn(&call);
}

static inline stax_node_attr_t attr_int(const char* name, int64_t value) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_INT;
  a.value.i = value;
  return a;
}

static inline void release_all(stax_tensor_t** tensors, int count) {
  for (int i = 0; i < count; i++) {
    if (tensors[i]) stax_tensor_release(tensors[i]);
    tensors[i] = NULL;
  }
}

static inline bool dims_are(const stax_tensor_t* t, int32_t rank, const int64_t* dims) {
  if (!t || stax_tensor_rank(t) != rank) return false;
  for (int32_t k = 0; k < rank; k++)
    if (stax_tensor_dims(t)[k] != dims[k]) return false;
  return true;
}

/* Runs a kernel with allocation number 1, 2, 3, ... failing until it succeeds: every failure
 * must be a status with no output left behind, and nothing may leak either way. */
static inline void check_allocation_failures(stax_kernel_fn fn, stax_op_t op,
                                             const stax_node_attr_t* attrs, int32_t attr_count,
                                             stax_tensor_t** inputs, int32_t input_count,
                                             int32_t output_count) {
  for (uint64_t fail_at = 1; fail_at < 1000; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), fail_at);
    stax_allocator_t failing = stax_failing_allocator(&state);
    stax_tensor_t* outputs[8] = {NULL};
    test_allocator = &failing;
    stax_status_t status = run(fn, op, attrs, attr_count, inputs, input_count, outputs, output_count);
    test_allocator = NULL;
    bool failed = status != STAX_OK;
    if (failed) CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
    stax_status_free(status);
    for (int32_t i = 0; failed && i < output_count; i++) CHECK(outputs[i] == NULL);
    release_all(outputs, output_count);
    CHECK_EQ_INT(state.live_allocations, 0);
    if (!failed) {
      CHECK(state.failed_count == 0);
      return;
    }
  }
  CHECK(false); /* never succeeded */
}

/* Checks every element of t (row-major, any view) against expected. */
static inline void check_values(const stax_tensor_t* t, const double* expected, int64_t count, double tolerance) {
  CHECK(t != NULL);
  if (!t) return;
  CHECK_EQ_INT(stax_tensor_element_count(t), count);
  if (stax_tensor_element_count(t) != count) return;
  for (int64_t i = 0; i < count; i++) {
    double value = get(t, i);
    if (!(fabs(value - expected[i]) <= tolerance)) {
      fprintf(stderr, "  element %lld: got %.9g, expected %.9g\n", (long long)i, value, expected[i]);
      CHECK_NEAR(value, expected[i], tolerance);
      return;
    }
  }
  CHECK(true);
}

static void check_ints(const stax_tensor_t* t, const int64_t* expected, int64_t count) {
  CHECK(t != NULL && stax_tensor_dtype(t) == STAX_DTYPE_INT64);
  if (!t || stax_tensor_element_count(t) != count) {
    CHECK_EQ_INT(t ? stax_tensor_element_count(t) : -1, count);
    return;
  }
  for (int64_t i = 0; i < count; i++)
    if (get_int(t, i) != expected[i]) {
      fprintf(stderr, "  element %lld\n", (long long)i);
      CHECK_EQ_INT(get_int(t, i), expected[i]);
      return;
    }
  CHECK(true);
}

static stax_tensor_t* bools(int32_t rank, const int64_t* dims, const double* values) {
  return make(STAX_DTYPE_BOOL, rank, dims, values);
}

/* ---- NonZero ------------------------------------------------------------------------------ */

static void test_nonzero(void) {
  /* -0.0 is zero, NaN is not. */
  stax_tensor_t* x = make_strided(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3},
                                  (double[]){1, 0, 2, -0.0, NAN, 0});
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){2, 3}));
  check_ints(out, (int64_t[]){0, 0, 1, 0, 2, 1}, 6);
  release_all(&out, 1);
  stax_tensor_release(x);
  /* Bool 3-D, and a preallocated output. */
  x = bools(3, (int64_t[]){2, 1, 2}, (double[]){0, 1, 1, 0});
  out = make_ints(2, (int64_t[]){3, 2}, NULL);
  CHECK_OK(run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  check_ints(out, (int64_t[]){0, 1, 0, 0, 1, 0}, 6);
  release_all(&out, 1);
  stax_tensor_release(x);
  /* Scalars behave as 1-element vectors; an empty tensor has no entries. */
  x = make(STAX_DTYPE_INT8, 0, NULL, (double[]){-3});
  CHECK_OK(run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){1, 1}));
  check_ints(out, (int64_t[]){0}, 1);
  release_all(&out, 1);
  stax_tensor_release(x);
  x = make(STAX_DTYPE_UINT64, 0, NULL, (double[]){0});
  CHECK_OK(run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){1, 0}));
  release_all(&out, 1);
  stax_tensor_release(x);
  x = make(STAX_DTYPE_FLOAT16, 2, (int64_t[]){0, 4}, NULL);
  CHECK_OK(run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){2, 0}));
  release_all(&out, 1);
  /* Preallocated with the wrong count. */
  out = make_ints(2, (int64_t[]){2, 1}, NULL);
  CHECK_ERROR(run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1), STAX_SHAPE_MISMATCH,
              "[2, 0]");
  release_all(&out, 1);
  stax_tensor_release(x);
}

/* ---- TopK --------------------------------------------------------------------------------- */

static stax_status_t topk(stax_tensor_t* x, int64_t k, const stax_node_attr_t* attrs, int32_t attr_count,
                          stax_tensor_t** outs) {
  stax_tensor_t* kt = vec(1, &k);
  stax_tensor_t* inputs[2] = {x, kt};
  stax_status_t status = run(stax_kernel_TopK, STAX_OP_TopK, attrs, attr_count, inputs, 2, outs, 2);
  stax_tensor_release(kt);
  return status;
}

static void test_topk(void) {
  double values[12];
  for (int i = 0; i < 12; i++) values[i] = i;
  stax_tensor_t* x = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, values);
  stax_tensor_t* outs[2] = {NULL, NULL};
  /* The ONNX example: largest 3 along the last axis. */
  CHECK_OK(topk(x, 3, NULL, 0, outs));
  CHECK(dims_are(outs[0], 2, (int64_t[]){3, 3}));
  check_values(outs[0], (double[]){3, 2, 1, 7, 6, 5, 11, 10, 9}, 9, 0);
  check_ints(outs[1], (int64_t[]){3, 2, 1, 3, 2, 1, 3, 2, 1}, 9);
  release_all(outs, 2);
  /* Smallest 2 along axis 0. */
  stax_node_attr_t attrs[2] = {attr_int("axis", 0), attr_int("largest", 0)};
  CHECK_OK(topk(x, 2, attrs, 2, outs));
  CHECK(dims_are(outs[0], 2, (int64_t[]){2, 4}));
  check_values(outs[0], (double[]){0, 1, 2, 3, 4, 5, 6, 7}, 8, 0);
  check_ints(outs[1], (int64_t[]){0, 0, 0, 0, 1, 1, 1, 1}, 8);
  release_all(outs, 2);
  stax_tensor_release(x);
  /* Ties go to the lower index first; a reversed int16 input. */
  x = make_reversed(STAX_DTYPE_INT16, 1, (int64_t[]){5}, (double[]){3, 1, 3, 2, 1});
  CHECK_OK(topk(x, 3, NULL, 0, outs));
  check_values(outs[0], (double[]){3, 3, 2}, 3, 0);
  check_ints(outs[1], (int64_t[]){0, 2, 3}, 3);
  release_all(outs, 2);
  attrs[0] = attr_int("axis", -1);
  CHECK_OK(topk(x, 3, attrs, 2, outs));
  check_values(outs[0], (double[]){1, 1, 2}, 3, 0);
  check_ints(outs[1], (int64_t[]){1, 4, 3}, 3);
  release_all(outs, 2);
  stax_tensor_release(x);
  /* NaN sorts above everything; -0 ties with +0. */
  x = make(STAX_DTYPE_FLOAT64, 1, (int64_t[]){5}, (double[]){-0.0, NAN, INFINITY, 0.0, -INFINITY});
  CHECK_OK(topk(x, 5, NULL, 0, outs));
  check_ints(outs[1], (int64_t[]){1, 2, 0, 3, 4}, 5);
  release_all(outs, 2);
  stax_tensor_release(x);
  /* int64 beyond 2^53 and uint64 above 2^63 keep their exact order. */
  int64_t big[3] = {((int64_t)1 << 60) + 1, ((int64_t)1 << 60) + 2, ((int64_t)1 << 60)};
  x = make_ints(1, (int64_t[]){3}, big);
  CHECK_OK(topk(x, 1, NULL, 0, outs));
  CHECK(outs[0] && get_int(outs[0], 0) == big[1]);
  check_ints(outs[1], (int64_t[]){1}, 1);
  release_all(outs, 2);
  stax_tensor_release(x);
  x = make(STAX_DTYPE_UINT64, 1, (int64_t[]){3}, NULL);
  uint64_t* u = stax_tensor_data(x);
  u[0] = UINT64_MAX;
  u[1] = 5;
  u[2] = ((uint64_t)1 << 63) + 7;
  CHECK_OK(topk(x, 3, attrs + 1, 1, outs));
  check_ints(outs[1], (int64_t[]){1, 2, 0}, 3);
  release_all(outs, 2);
  stax_tensor_release(x);
  /* k = 0, and preallocated outputs. */
  x = make(STAX_DTYPE_BFLOAT16, 2, (int64_t[]){2, 3}, (double[]){1, 5, 3, 4, 2, 6});
  CHECK_OK(topk(x, 0, NULL, 0, outs));
  CHECK(dims_are(outs[0], 2, (int64_t[]){2, 0}) && dims_are(outs[1], 2, (int64_t[]){2, 0}));
  release_all(outs, 2);
  outs[0] = make(STAX_DTYPE_BFLOAT16, 2, (int64_t[]){2, 1}, NULL);
  outs[1] = make_ints(2, (int64_t[]){2, 1}, NULL);
  CHECK_OK(topk(x, 1, NULL, 0, outs));
  check_values(outs[0], (double[]){5, 6}, 2, 0);
  check_ints(outs[1], (int64_t[]){1, 2}, 2);
  release_all(outs, 2);
  /* Errors. */
  CHECK_ERROR(topk(x, 4, NULL, 0, outs), STAX_OUT_OF_RANGE,
              "k = 4 exceeds input 0 axis 1 of size 3 (valid range [0, 3])");
  CHECK_ERROR(topk(x, -1, NULL, 0, outs), STAX_INVALID_ARGUMENT, "k = -1");
  stax_node_attr_t far = attr_int("axis", 2);
  CHECK_ERROR(topk(x, 1, &far, 1, outs), STAX_INVALID_ARGUMENT, "axis = 2");
  CHECK(outs[0] == NULL && outs[1] == NULL);
  stax_tensor_release(x);
  x = make(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){1});
  CHECK_ERROR(topk(x, 1, NULL, 0, outs), STAX_INVALID_ARGUMENT, "scalar");
  stax_tensor_release(x);
}

/* ---- Unique ------------------------------------------------------------------------------- */

static void test_unique_flat(void) {
  stax_tensor_t* x = make_strided(STAX_DTYPE_FLOAT32, 1, (int64_t[]){6}, (double[]){2, 1, 1, 3, 4, 3});
  stax_tensor_t* outs[4] = {NULL, NULL, NULL, NULL};
  /* The ONNX examples, unsorted and sorted. */
  stax_node_attr_t unsorted = attr_int("sorted", 0);
  CHECK_OK(run(stax_kernel_Unique, STAX_OP_Unique, &unsorted, 1, &x, 1, outs, 4));
  check_values(outs[0], (double[]){2, 1, 3, 4}, 4, 0);
  check_ints(outs[1], (int64_t[]){0, 1, 3, 4}, 4);
  check_ints(outs[2], (int64_t[]){0, 1, 1, 2, 3, 2}, 6);
  check_ints(outs[3], (int64_t[]){1, 2, 2, 1}, 4);
  release_all(outs, 4);
  CHECK_OK(run(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, outs, 4));
  check_values(outs[0], (double[]){1, 2, 3, 4}, 4, 0);
  check_ints(outs[1], (int64_t[]){1, 0, 3, 4}, 4);
  check_ints(outs[2], (int64_t[]){1, 0, 0, 2, 3, 2}, 6);
  check_ints(outs[3], (int64_t[]){2, 1, 2, 1}, 4);
  release_all(outs, 4);
  stax_tensor_release(x);
  /* A 2-D input is flattened; -0 equals +0 (the first occurrence's bytes are kept); only Y
   * requested. */
  x = make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){2, 2}, (double[]){0.0, -1, -0.0, -1});
  CHECK_OK(run(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, outs, 1));
  CHECK(dims_are(outs[0], 1, (int64_t[]){2}));
  check_values(outs[0], (double[]){-1, 0}, 2, 0);
  CHECK(outs[0] && !signbit(get(outs[0], 1)));
  release_all(outs, 1);
  stax_tensor_release(x);
  /* Signed integers order below zero; an empty input has no unique values. */
  x = make(STAX_DTYPE_INT8, 1, (int64_t[]){4}, (double[]){5, -128, 127, -128});
  CHECK_OK(run(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, outs, 4));
  check_values(outs[0], (double[]){-128, 5, 127}, 3, 0);
  check_ints(outs[3], (int64_t[]){2, 1, 1}, 3);
  release_all(outs, 4);
  stax_tensor_release(x);
  x = make(STAX_DTYPE_INT32, 1, (int64_t[]){0}, NULL);
  CHECK_OK(run(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, outs, 4));
  CHECK(dims_are(outs[0], 1, (int64_t[]){0}) && dims_are(outs[2], 1, (int64_t[]){0}));
  release_all(outs, 4);
  stax_tensor_release(x);
}

static void test_unique_axis(void) {
  /* ONNX example, axis 0. */
  stax_tensor_t* x = make(STAX_DTYPE_INT64, 2, (int64_t[]){3, 3}, (double[]){1, 0, 0, 1, 0, 0, 2, 3, 4});
  stax_tensor_t* outs[4] = {NULL, NULL, NULL, NULL};
  stax_node_attr_t attrs[2] = {attr_int("axis", 0), attr_int("sorted", 1)};
  CHECK_OK(run(stax_kernel_Unique, STAX_OP_Unique, attrs, 2, &x, 1, outs, 4));
  CHECK(dims_are(outs[0], 2, (int64_t[]){2, 3}));
  check_values(outs[0], (double[]){1, 0, 0, 2, 3, 4}, 6, 0);
  check_ints(outs[1], (int64_t[]){0, 2}, 2);
  check_ints(outs[2], (int64_t[]){0, 0, 1}, 3);
  check_ints(outs[3], (int64_t[]){2, 1}, 2);
  release_all(outs, 4);
  stax_tensor_release(x);
  /* ONNX example, axis 1 of a [2, 4, 2] tensor (slices compared element by element). */
  double values[16] = {1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1};
  x = make_strided(STAX_DTYPE_UINT8, 3, (int64_t[]){2, 4, 2}, values);
  attrs[0] = attr_int("axis", -2);
  CHECK_OK(run(stax_kernel_Unique, STAX_OP_Unique, attrs, 2, &x, 1, outs, 4));
  CHECK(dims_are(outs[0], 3, (int64_t[]){2, 3, 2}));
  check_values(outs[0], (double[]){0, 1, 1, 1, 2, 1, 0, 1, 1, 1, 2, 1}, 12, 0);
  check_ints(outs[1], (int64_t[]){1, 0, 2}, 3);
  check_ints(outs[2], (int64_t[]){1, 0, 2, 0}, 4);
  check_ints(outs[3], (int64_t[]){2, 1, 1}, 3);
  release_all(outs, 4);
  /* Unsorted keeps first-occurrence order. */
  attrs[1] = attr_int("sorted", 0);
  CHECK_OK(run(stax_kernel_Unique, STAX_OP_Unique, attrs, 2, &x, 1, outs, 3));
  check_values(outs[0], (double[]){1, 1, 0, 1, 2, 1, 1, 1, 0, 1, 2, 1}, 12, 0);
  check_ints(outs[1], (int64_t[]){0, 1, 2}, 3);
  check_ints(outs[2], (int64_t[]){0, 1, 2, 1}, 4);
  release_all(outs, 3);
  stax_node_attr_t far = attr_int("axis", 3);
  CHECK_ERROR(run(stax_kernel_Unique, STAX_OP_Unique, &far, 1, &x, 1, outs, 4), STAX_INVALID_ARGUMENT,
              "axis = 3");
  CHECK(outs[0] == NULL);
  stax_tensor_release(x);
}

/* ---- Compress ----------------------------------------------------------------------------- */

static void test_compress(void) {
  double values[6] = {1, 2, 3, 4, 5, 6};
  stax_tensor_t* x = make_strided(STAX_DTYPE_FLOAT16, 2, (int64_t[]){3, 2}, values);
  stax_tensor_t* condition = bools(1, (int64_t[]){3}, (double[]){0, 1, 1});
  stax_tensor_t* inputs[2] = {x, condition};
  stax_tensor_t* out = NULL;
  /* The ONNX examples. */
  stax_node_attr_t axis = attr_int("axis", 0);
  CHECK_OK(run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){2, 2}));
  check_values(out, (double[]){3, 4, 5, 6}, 4, 0);
  release_all(&out, 1);
  stax_tensor_release(condition);
  condition = bools(1, (int64_t[]){2}, (double[]){0, 1});
  inputs[1] = condition;
  axis = attr_int("axis", -1);
  CHECK_OK(run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){3, 1}));
  check_values(out, (double[]){2, 4, 6}, 3, 0);
  release_all(&out, 1);
  /* Flattened, with a condition shorter than the input. */
  CHECK_OK(run(stax_kernel_Compress, STAX_OP_Compress, NULL, 0, inputs, 2, &out, 1));
  CHECK(dims_are(out, 1, (int64_t[]){1}));
  check_values(out, (double[]){2}, 1, 0);
  release_all(&out, 1);
  stax_tensor_release(condition);
  condition = bools(1, (int64_t[]){5}, (double[]){0, 1, 0, 0, 1});
  inputs[1] = condition;
  CHECK_OK(run(stax_kernel_Compress, STAX_OP_Compress, NULL, 0, inputs, 2, &out, 1));
  check_values(out, (double[]){2, 5}, 2, 0);
  release_all(&out, 1);
  /* A longer condition is fine while its extra entries are false... */
  stax_tensor_release(condition);
  condition = bools(1, (int64_t[]){5}, (double[]){1, 0, 1, 0, 0});
  inputs[1] = condition;
  axis = attr_int("axis", 0);
  CHECK_OK(run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1));
  check_values(out, (double[]){1, 2, 5, 6}, 4, 0);
  release_all(&out, 1);
  /* ...and out of range when one is true. */
  stax_tensor_release(condition);
  condition = bools(1, (int64_t[]){5}, (double[]){1, 0, 0, 1, 0});
  inputs[1] = condition;
  CHECK_ERROR(run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1),
              STAX_OUT_OF_RANGE, "entry 3 is true but input 0 has only 3 slices along the axis (valid positions [0, 2])");
  stax_tensor_release(condition);
  condition = bools(2, (int64_t[]){1, 3}, (double[]){1, 1, 1});
  inputs[1] = condition;
  CHECK_ERROR(run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "rank 1");
  stax_tensor_release(condition);
  /* Nothing selected, into a preallocated empty output. */
  condition = bools(1, (int64_t[]){3}, (double[]){0, 0, 0});
  inputs[1] = condition;
  out = make(STAX_DTYPE_FLOAT16, 2, (int64_t[]){0, 2}, NULL);
  CHECK_OK(run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1));
  release_all(&out, 1);
  stax_tensor_release(condition);
  stax_tensor_release(x);
}

static void test_allocation_failures(void) {
  stax_tensor_t* x = make(STAX_DTYPE_INT32, 2, (int64_t[]){3, 4}, (double[]){3, 1, 3, 2, 0, 0, 5, 1, 2, 2, 2, 9});
  stax_tensor_t* k = vec(1, (int64_t[]){2});
  stax_tensor_t* inputs[2] = {x, k};
  check_allocation_failures(stax_kernel_TopK, STAX_OP_TopK, NULL, 0, inputs, 2, 2);
  check_allocation_failures(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, 4);
  stax_node_attr_t axis = attr_int("axis", 1);
  check_allocation_failures(stax_kernel_Unique, STAX_OP_Unique, &axis, 1, &x, 1, 4);
  check_allocation_failures(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, 1);
  stax_tensor_t* condition = bools(1, (int64_t[]){4}, (double[]){1, 0, 1, 1});
  inputs[1] = condition;
  check_allocation_failures(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, 1);
  stax_tensor_t* all[3] = {x, k, condition};
  release_all(all, 3);
}

STAX_TEST_MAIN(STAX_TEST(test_nonzero), STAX_TEST(test_topk), STAX_TEST(test_unique_flat),
               STAX_TEST(test_unique_axis), STAX_TEST(test_compress), STAX_TEST(test_allocation_failures))
