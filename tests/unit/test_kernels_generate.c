/* Tests for the generating kernels (src/kernels/generate.c): Shape (start/end), Size,
 * ConstantOfShape (default and typed values), Range (integers exactly, floats, empty and
 * reversed ranges), Constant from every value attribute, EyeLike (k, dtype), OneHot (every
 * axis, negative and out-of-range indices, float depth) and Trilu (upper/lower, k, batches),
 * with strided inputs, preallocated outputs and the error paths. */
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

static inline stax_tensor_t* scalar_int(int64_t value) { return make_ints(0, NULL, &value); }

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

static inline stax_node_attr_t attr_ints(const char* name, int32_t count, const int64_t* values) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_INTS;
  a.value.ints.count = count;
  a.value.ints.data = values;
  return a;
}

static inline stax_node_attr_t attr_float(const char* name, float value) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_FLOAT;
  a.value.f = value;
  return a;
}

static inline stax_node_attr_t attr_string(const char* name, const char* value) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_STRING;
  a.value.s = value;
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

static stax_node_attr_t attr_tensor(const char* name, stax_tensor_t* tensor) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_TENSOR;
  a.value.tensor = tensor;
  return a;
}

/* ---- Shape / Size ------------------------------------------------------------------------- */

static void test_shape_and_size(void) {
  stax_tensor_t* x = make(STAX_DTYPE_FLOAT32, 3, (int64_t[]){2, 0, 5}, NULL);
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_Shape, STAX_OP_Shape, NULL, 0, &x, 1, &out, 1));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT64);
  CHECK(dims_are(out, 1, (int64_t[]){3}));
  check_values(out, (double[]){2, 0, 5}, 3, 0);
  release_all(&out, 1);
  /* start / end, negative and clamped. */
  struct { int64_t start, end; int64_t count; double first; } cases[] = {
      {1, 3, 2, 0}, {-1, 3, 1, 5}, {-10, 1, 1, 2}, {2, 1, 0, 0}, {0, 100, 3, 2}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    stax_node_attr_t attrs[2] = {attr_int("start", cases[c].start), attr_int("end", cases[c].end)};
    CHECK_OK(run(stax_kernel_Shape, STAX_OP_Shape, attrs, 2, &x, 1, &out, 1));
    CHECK(dims_are(out, 1, &cases[c].count));
    if (cases[c].count > 0) CHECK_EQ_INT(get_int(out, 0), (int64_t)cases[c].first);
    release_all(&out, 1);
  }
  CHECK_OK(run(stax_kernel_Size, STAX_OP_Size, NULL, 0, &x, 1, &out, 1));
  CHECK(dims_are(out, 0, NULL));
  CHECK_EQ_INT(get_int(out, 0), 0);
  release_all(&out, 1);
  stax_tensor_release(x);
  /* A scalar: shape [], size 1; into preallocated outputs. */
  stax_tensor_t* s = make(STAX_DTYPE_BOOL, 0, NULL, (double[]){1});
  out = make_ints(1, (int64_t[]){0}, NULL);
  CHECK_OK(run(stax_kernel_Shape, STAX_OP_Shape, NULL, 0, &s, 1, &out, 1));
  release_all(&out, 1);
  out = make_ints(0, NULL, (int64_t[]){99});
  CHECK_OK(run(stax_kernel_Size, STAX_OP_Size, NULL, 0, &s, 1, &out, 1));
  CHECK_EQ_INT(get_int(out, 0), 1);
  release_all(&out, 1);
  CHECK_ERROR(run(stax_kernel_Size, STAX_OP_Size, NULL, 0, NULL, 0, &out, 1), STAX_INVALID_ARGUMENT,
              "input 0 is missing");
  stax_tensor_release(s);
}

/* ---- ConstantOfShape ---------------------------------------------------------------------- */

static void test_constant_of_shape(void) {
  stax_tensor_t* shape = vec(2, (int64_t[]){2, 3});
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, &out, 1));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_FLOAT32);
  check_values(out, (double[]){0, 0, 0, 0, 0, 0}, 6, 0);
  release_all(&out, 1);
  /* int64 value (exact beyond 2^53), bool, float16. */
  int64_t big = ((int64_t)1 << 60) + 1;
  stax_tensor_t* value = make_ints(1, (int64_t[]){1}, &big);
  stax_node_attr_t attr = attr_tensor("value", value);
  CHECK_OK(run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, &attr, 1, &shape, 1, &out, 1));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT64);
  for (int i = 0; i < 6; i++) CHECK(out && get_int(out, i) == big);
  release_all(&out, 1);
  stax_tensor_release(value);
  stax_dtype_t dtypes[3] = {STAX_DTYPE_BOOL, STAX_DTYPE_FLOAT16, STAX_DTYPE_UINT16};
  for (int d = 0; d < 3; d++) {
    value = make(dtypes[d], 1, (int64_t[]){1}, (double[]){1});
    attr = attr_tensor("value", value);
    CHECK_OK(run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, &attr, 1, &shape, 1, &out, 1));
    CHECK(out && stax_tensor_dtype(out) == dtypes[d]);
    check_values(out, (double[]){1, 1, 1, 1, 1, 1}, 6, 0);
    release_all(&out, 1);
    stax_tensor_release(value);
  }
  stax_tensor_release(shape);
  /* An empty shape gives a scalar; a zero dim an empty tensor. */
  shape = vec(0, NULL);
  CHECK_OK(run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, &out, 1));
  CHECK(dims_are(out, 0, NULL));
  release_all(&out, 1);
  stax_tensor_release(shape);
  shape = vec(2, (int64_t[]){4, 0});
  CHECK_OK(run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){4, 0}));
  release_all(&out, 1);
  stax_tensor_release(shape);
  /* Errors. */
  shape = vec(2, (int64_t[]){4, -1});
  CHECK_ERROR(run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "has -1 at position 1");
  stax_tensor_release(shape);
  shape = vec(1, (int64_t[]){2});
  value = make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){2}, NULL);
  attr = attr_tensor("value", value);
  CHECK_ERROR(run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, &attr, 1, &shape, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "one element");
  CHECK(out == NULL);
  stax_tensor_release(value);
  stax_tensor_release(shape);
}

/* ---- Range -------------------------------------------------------------------------------- */

static stax_status_t range(stax_dtype_t dtype, double start, double limit, double delta,
                           stax_tensor_t** out) {
  stax_tensor_t* inputs[3] = {make(dtype, 0, NULL, &start), make(dtype, 0, NULL, &limit),
                              make(dtype, 0, NULL, &delta)};
  stax_status_t status = run(stax_kernel_Range, STAX_OP_Range, NULL, 0, inputs, 3, out, 1);
  release_all(inputs, 3);
  return status;
}

static void test_range(void) {
  stax_tensor_t* out = NULL;
  CHECK_OK(range(STAX_DTYPE_INT32, 3, 10, 3, &out));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT32);
  check_values(out, (double[]){3, 6, 9}, 3, 0);
  release_all(&out, 1);
  CHECK_OK(range(STAX_DTYPE_INT64, 10, 4, -2, &out));
  check_values(out, (double[]){10, 8, 6}, 3, 0);
  release_all(&out, 1);
  CHECK_OK(range(STAX_DTYPE_INT16, 5, 5, 1, &out));
  CHECK(dims_are(out, 1, (int64_t[]){0}));
  release_all(&out, 1);
  CHECK_OK(range(STAX_DTYPE_INT32, 5, 1, 1, &out)); /* wrong direction: empty */
  CHECK(dims_are(out, 1, (int64_t[]){0}));
  release_all(&out, 1);
  /* Floats: count = ceil((limit - start) / delta). */
  CHECK_OK(range(STAX_DTYPE_FLOAT32, 1, 2, 0.3, &out));
  check_values(out, (double[]){1, 1.3, 1.6, 1.9}, 4, 1e-6);
  release_all(&out, 1);
  CHECK_OK(range(STAX_DTYPE_FLOAT64, 0, -1, -0.25, &out));
  check_values(out, (double[]){0, -0.25, -0.5, -0.75}, 4, 0);
  release_all(&out, 1);
  /* Preallocated. */
  out = make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){2}, NULL);
  CHECK_OK(range(STAX_DTYPE_FLOAT32, 0, 2, 1, &out));
  check_values(out, (double[]){0, 1}, 2, 0);
  release_all(&out, 1);
  /* int64 exact near the top of the range. */
  stax_tensor_t* inputs[3] = {scalar_int(INT64_MAX - 2), scalar_int(INT64_MAX), scalar_int(1)};
  CHECK_OK(run(stax_kernel_Range, STAX_OP_Range, NULL, 0, inputs, 3, &out, 1));
  CHECK(out && get_int(out, 1) == INT64_MAX - 1);
  release_all(&out, 1);
  release_all(inputs, 3);
  /* Errors. */
  CHECK_ERROR(range(STAX_DTYPE_INT32, 0, 5, 0, &out), STAX_INVALID_ARGUMENT, "delta (input 2) is 0");
  CHECK_ERROR(range(STAX_DTYPE_FLOAT32, 0, 5, 0, &out), STAX_INVALID_ARGUMENT, "delta (input 2) is 0");
  CHECK_ERROR(range(STAX_DTYPE_FLOAT32, 0, INFINITY, 1, &out), STAX_OUT_OF_RANGE, "element count");
  stax_tensor_t* mixed[3] = {scalar_int(0), make(STAX_DTYPE_INT32, 0, NULL, (double[]){3}), scalar_int(1)};
  CHECK_ERROR(run(stax_kernel_Range, STAX_OP_Range, NULL, 0, mixed, 3, &out, 1), STAX_DTYPE_MISMATCH,
              "limit (input 1) is int32");
  stax_tensor_release(mixed[1]);
  mixed[1] = vec(2, (int64_t[]){1, 2});
  CHECK_ERROR(run(stax_kernel_Range, STAX_OP_Range, NULL, 0, mixed, 3, &out, 1), STAX_INVALID_ARGUMENT,
              "must be a scalar");
  CHECK(out == NULL);
  release_all(mixed, 3);
}

/* ---- Constant ----------------------------------------------------------------------------- */

static void test_constant(void) {
  stax_tensor_t* out = NULL;
  stax_tensor_t* value = make(STAX_DTYPE_INT8, 2, (int64_t[]){2, 2}, (double[]){1, -2, 3, -4});
  stax_node_attr_t attr = attr_tensor("value", value);
  CHECK_OK(run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT8);
  check_values(out, (double[]){1, -2, 3, -4}, 4, 0);
  /* A copy: the attribute's tensor is never handed out. */
  CHECK(out && stax_tensor_buffer(out) != stax_tensor_buffer(value));
  release_all(&out, 1);
  attr = attr_float("value_float", 2.5f);
  CHECK_OK(run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  CHECK(dims_are(out, 0, NULL) && stax_tensor_dtype(out) == STAX_DTYPE_FLOAT32);
  check_values(out, (double[]){2.5}, 1, 0);
  release_all(&out, 1);
  attr = attr_int("value_int", -9);
  CHECK_OK(run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  CHECK(dims_are(out, 0, NULL) && get_int(out, 0) == -9);
  release_all(&out, 1);
  int64_t ints[3] = {4, 5, 6};
  attr = attr_ints("value_ints", 3, ints);
  CHECK_OK(run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  check_values(out, (double[]){4, 5, 6}, 3, 0);
  release_all(&out, 1);
  float floats[2] = {0.5f, -1.5f};
  memset(&attr, 0, sizeof(attr));
  attr.name = "value_floats";
  attr.type = STAX_ATTR_FLOATS;
  attr.value.floats.count = 2;
  attr.value.floats.data = floats;
  CHECK_OK(run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  check_values(out, (double[]){0.5, -1.5}, 2, 0);
  release_all(&out, 1);
  /* Errors. */
  CHECK_ERROR(run(stax_kernel_Constant, STAX_OP_Constant, NULL, 0, NULL, 0, &out, 1),
              STAX_INVALID_ARGUMENT, "needs one of");
  stax_node_attr_t two[2] = {attr_tensor("value", value), attr_int("value_int", 1)};
  CHECK_ERROR(run(stax_kernel_Constant, STAX_OP_Constant, two, 2, NULL, 0, &out, 1),
              STAX_INVALID_ARGUMENT, "exactly one");
  attr = attr_string("value_string", "hello");
  CHECK_ERROR(run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1),
              STAX_UNIMPLEMENTED, "string");
  /* A preallocated output of the wrong shape. */
  attr = attr_tensor("value", value);
  out = make(STAX_DTYPE_INT8, 1, (int64_t[]){4}, NULL);
  CHECK_ERROR(run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1),
              STAX_SHAPE_MISMATCH, "[2, 2]");
  release_all(&out, 1);
  stax_tensor_release(value);
}

/* ---- EyeLike ------------------------------------------------------------------------------ */

static void test_eye_like(void) {
  stax_tensor_t* x = make(STAX_DTYPE_INT32, 2, (int64_t[]){3, 4}, NULL);
  stax_tensor_t* out = NULL;
  for (int64_t k = -4; k <= 5; k++) {
    stax_node_attr_t attr = attr_int("k", k);
    CHECK_OK(run(stax_kernel_EyeLike, STAX_OP_EyeLike, &attr, 1, &x, 1, &out, 1));
    CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT32);
    double expected[12];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) expected[i * 4 + j] = j - i == k ? 1 : 0;
    check_values(out, expected, 12, 0);
    release_all(&out, 1);
  }
  /* dtype attribute (ONNX codes: 10 = float16, 9 = bool). */
  int64_t codes[2] = {10, 9};
  stax_dtype_t dtypes[2] = {STAX_DTYPE_FLOAT16, STAX_DTYPE_BOOL};
  for (int c = 0; c < 2; c++) {
    stax_node_attr_t attr = attr_int("dtype", codes[c]);
    CHECK_OK(run(stax_kernel_EyeLike, STAX_OP_EyeLike, &attr, 1, &x, 1, &out, 1));
    CHECK(out && stax_tensor_dtype(out) == dtypes[c]);
    check_values(out, (double[]){1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, 12, 0);
    release_all(&out, 1);
  }
  stax_node_attr_t bad = attr_int("dtype", 8); /* string */
  CHECK_ERROR(run(stax_kernel_EyeLike, STAX_OP_EyeLike, &bad, 1, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "dtype' = 8");
  stax_tensor_release(x);
  x = make(STAX_DTYPE_INT32, 1, (int64_t[]){3}, NULL);
  CHECK_ERROR(run(stax_kernel_EyeLike, STAX_OP_EyeLike, NULL, 0, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "rank 2");
  stax_tensor_release(x);
  x = make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){0, 2}, NULL);
  CHECK_OK(run(stax_kernel_EyeLike, STAX_OP_EyeLike, NULL, 0, &x, 1, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){0, 2}));
  release_all(&out, 1);
  stax_tensor_release(x);
}

/* ---- OneHot ------------------------------------------------------------------------------- */

static void test_one_hot(void) {
  /* indices [2, 2] = {0, -1, 3, 7} (7 is past depth 4: all off), depth 4, values {off 5, on 9}. */
  stax_tensor_t* indices = make_ints(2, (int64_t[]){2, 2}, (int64_t[]){0, -1, 3, 7});
  stax_tensor_t* depth = scalar_int(4);
  stax_tensor_t* values = make(STAX_DTYPE_INT32, 1, (int64_t[]){2}, (double[]){5, 9});
  stax_tensor_t* inputs[3] = {indices, depth, values};
  stax_tensor_t* out = NULL;
  int64_t normalized[4] = {0, 3, 3, -100};
  for (int64_t axis = -3; axis <= 2; axis++) {
    stax_node_attr_t attr = attr_int("axis", axis);
    CHECK_OK(run(stax_kernel_OneHot, STAX_OP_OneHot, &attr, 1, inputs, 3, &out, 1));
    int64_t a = axis < 0 ? axis + 3 : axis;
    int64_t dims[3];
    for (int k = 0; k < 3; k++) dims[k] = k == a ? 4 : 2; /* indices are [2, 2] */
    CHECK(dims_are(out, 3, dims));
    double expected[16];
    /* out[..., position of depth = v, ...] = on where v == normalized index. */
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++)
        for (int v = 0; v < 4; v++) {
          int64_t coordinate[3];
          int64_t rest[2] = {i, j};
          for (int k = 0, d = 0; k < 3; k++) coordinate[k] = k == a ? v : rest[d++];
          expected[(coordinate[0] * dims[1] + coordinate[1]) * dims[2] + coordinate[2]] =
              normalized[i * 2 + j] == v ? 9 : 5;
        }
    check_values(out, expected, 16, 0);
    release_all(&out, 1);
  }
  /* Float depth and float indices, a float16 values tensor. */
  stax_tensor_t* findices = make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){3}, (double[]){1.0, -3.0, 2.0});
  stax_tensor_t* fdepth = make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){1}, (double[]){3});
  stax_tensor_t* hvalues = make(STAX_DTYPE_FLOAT16, 1, (int64_t[]){2}, (double[]){0, 0.5});
  stax_tensor_t* finputs[3] = {findices, fdepth, hvalues};
  CHECK_OK(run(stax_kernel_OneHot, STAX_OP_OneHot, NULL, 0, finputs, 3, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){3, 3}));
  check_values(out, (double[]){0, 0.5, 0, 0.5, 0, 0, 0, 0, 0.5}, 9, 0);
  release_all(&out, 1);
  /* Errors. */
  stax_tensor_t* zero = scalar_int(0);
  inputs[1] = zero;
  CHECK_ERROR(run(stax_kernel_OneHot, STAX_OP_OneHot, NULL, 0, inputs, 3, &out, 1), STAX_INVALID_ARGUMENT,
              "depth (input 1) is 0");
  inputs[1] = depth;
  stax_node_attr_t far = attr_int("axis", 3);
  CHECK_ERROR(run(stax_kernel_OneHot, STAX_OP_OneHot, &far, 1, inputs, 3, &out, 1), STAX_INVALID_ARGUMENT,
              "axis = 3");
  stax_tensor_t* three = make(STAX_DTYPE_INT32, 1, (int64_t[]){3}, NULL);
  inputs[2] = three;
  CHECK_ERROR(run(stax_kernel_OneHot, STAX_OP_OneHot, NULL, 0, inputs, 3, &out, 1), STAX_INVALID_ARGUMENT,
              "two elements");
  CHECK(out == NULL);
  stax_tensor_t* all[8] = {indices, depth, values, findices, fdepth, hvalues, zero, three};
  release_all(all, 8);
}

/* ---- Trilu -------------------------------------------------------------------------------- */

static void test_trilu(void) {
  /* x [2, 3, 4] = 1 + i, batch of two matrices, strided. */
  double values[24];
  for (int i = 0; i < 24; i++) values[i] = i + 1;
  stax_tensor_t* x = make_strided(STAX_DTYPE_FLOAT64, 3, (int64_t[]){2, 3, 4}, values);
  stax_tensor_t* out = NULL;
  for (int upper = 0; upper <= 1; upper++) {
    for (int64_t k = -4; k <= 5; k++) {
      stax_tensor_t* kt = scalar_int(k);
      stax_tensor_t* inputs[2] = {x, kt};
      stax_node_attr_t attr = attr_int("upper", upper);
      CHECK_OK(run(stax_kernel_Trilu, STAX_OP_Trilu, &attr, 1, inputs, 2, &out, 1));
      double expected[24];
      for (int m = 0; m < 2; m++)
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 4; j++) {
            bool keep = upper ? j - i >= k : j - i <= k;
            int e = (m * 3 + i) * 4 + j;
            expected[e] = keep ? values[e] : 0;
          }
      check_values(out, expected, 24, 0);
      release_all(&out, 1);
      stax_tensor_release(kt);
    }
  }
  /* Defaults: upper, k = 0; int8 into a preallocated output. */
  stax_tensor_t* y = make(STAX_DTYPE_INT8, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
  out = make(STAX_DTYPE_INT8, 2, (int64_t[]){2, 2}, NULL);
  CHECK_OK(run(stax_kernel_Trilu, STAX_OP_Trilu, NULL, 0, &y, 1, &out, 1));
  check_values(out, (double[]){1, 2, 0, 4}, 4, 0);
  release_all(&out, 1);
  /* Huge k does not overflow. */
  stax_tensor_t* huge = scalar_int(INT64_MIN);
  stax_tensor_t* inputs[2] = {y, huge};
  CHECK_OK(run(stax_kernel_Trilu, STAX_OP_Trilu, NULL, 0, inputs, 2, &out, 1));
  check_values(out, (double[]){1, 2, 3, 4}, 4, 0);
  release_all(&out, 1);
  stax_tensor_t* v = make(STAX_DTYPE_INT8, 1, (int64_t[]){2}, NULL);
  CHECK_ERROR(run(stax_kernel_Trilu, STAX_OP_Trilu, NULL, 0, &v, 1, &out, 1), STAX_INVALID_ARGUMENT,
              "rank >= 2");
  CHECK(out == NULL);
  stax_tensor_t* all[4] = {x, y, huge, v};
  release_all(all, 4);
}

static void test_allocation_failures(void) {
  stax_tensor_t* indices = make_ints(1, (int64_t[]){3}, (int64_t[]){0, 2, 1});
  stax_tensor_t* depth = scalar_int(3);
  stax_tensor_t* values = make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){2}, (double[]){0, 1});
  stax_tensor_t* inputs[3] = {indices, depth, values};
  check_allocation_failures(stax_kernel_OneHot, STAX_OP_OneHot, NULL, 0, inputs, 3, 1);
  stax_tensor_t* m = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, NULL);
  check_allocation_failures(stax_kernel_Trilu, STAX_OP_Trilu, NULL, 0, &m, 1, 1);
  check_allocation_failures(stax_kernel_EyeLike, STAX_OP_EyeLike, NULL, 0, &m, 1, 1);
  stax_node_attr_t value = attr_tensor("value", m);
  check_allocation_failures(stax_kernel_Constant, STAX_OP_Constant, &value, 1, NULL, 0, 1);
  stax_tensor_t* shape = vec(2, (int64_t[]){2, 2});
  check_allocation_failures(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, 1);
  stax_tensor_t* all[5] = {indices, depth, values, m, shape};
  release_all(all, 5);
}

STAX_TEST_MAIN(STAX_TEST(test_shape_and_size), STAX_TEST(test_constant_of_shape),
               STAX_TEST(test_range), STAX_TEST(test_constant), STAX_TEST(test_eye_like),
               STAX_TEST(test_one_hot), STAX_TEST(test_trilu),
               STAX_TEST(test_allocation_failures))
