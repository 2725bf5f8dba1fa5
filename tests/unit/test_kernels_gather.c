/* Tests for the indexing kernels (src/kernels/gather_scatter.c): Gather, GatherElements,
 * GatherND (batch_dims), ScatterElements and ScatterND with every reduction, against the ONNX
 * operator examples and values computed here; negative indices, int32 and int64 indices,
 * strided and reversed data, several dtypes, preallocated outputs, integer wrap-around, and
 * every error path (an index out of range names its value, position and valid range). */
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

/* ---- Gather ------------------------------------------------------------------------------- */

static void test_gather_axes(void) {
  /* data [3, 4] = 10*i + j. */
  double values[12];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) values[i * 4 + j] = 10 * i + j;
  stax_tensor_t* data = make_strided(STAX_DTYPE_FLOAT16, 2, (int64_t[]){3, 4}, values);
  /* axis 0, indices [2, 2] with negatives: out[a][b][:] = data[idx[a][b]][:]. */
  int64_t idx[4] = {2, -3, -1, 0};
  stax_tensor_t* indices = make_ints(2, (int64_t[]){2, 2}, idx);
  stax_tensor_t* inputs[2] = {data, indices};
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1));
  CHECK(dims_are(out, 3, (int64_t[]){2, 2, 4}));
  double expected[16];
  for (int k = 0; k < 4; k++) {
    int64_t row = idx[k] < 0 ? idx[k] + 3 : idx[k];
    for (int j = 0; j < 4; j++) expected[k * 4 + j] = values[row * 4 + j];
  }
  check_values(out, expected, 16, 0);
  release_all(&out, 1);
  /* axis 1 with int32 indices [3]: out[i][k] = data[i][idx[k]]. */
  double idx32[3] = {3, 0, -1};
  stax_tensor_t* indices32 = make(STAX_DTYPE_INT32, 1, (int64_t[]){3}, idx32);
  inputs[1] = indices32;
  stax_node_attr_t axis = attr_int("axis", -1);
  CHECK_OK(run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){3, 3}));
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) expected[i * 3 + k] = values[i * 4 + (k == 0 ? 3 : (k == 1 ? 0 : 3))];
  check_values(out, expected, 9, 0);
  release_all(&out, 1);
  /* A scalar index drops the axis; into a preallocated output. */
  stax_tensor_t* one = scalar_int(1);
  inputs[1] = one;
  out = make(STAX_DTYPE_FLOAT16, 1, (int64_t[]){3}, NULL);
  CHECK_OK(run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1));
  check_values(out, (double[]){1, 11, 21}, 3, 0);
  release_all(&out, 1);
  /* No indices: an empty output. */
  stax_tensor_t* none = vec(0, NULL);
  inputs[1] = none;
  CHECK_OK(run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){0, 4}));
  release_all(&out, 1);
  stax_tensor_t* all[5] = {data, indices, indices32, one, none};
  release_all(all, 5);
}

static void test_gather_dtypes_and_layouts(void) {
  /* Every element size, a reversed data view and a 3-D gather on the middle axis. */
  stax_dtype_t dtypes[5] = {STAX_DTYPE_BOOL, STAX_DTYPE_INT16, STAX_DTYPE_UINT32, STAX_DTYPE_INT64,
                            STAX_DTYPE_FLOAT64};
  double values[24];
  for (int i = 0; i < 24; i++) values[i] = (i * 7) % 11 % 2 == 0 || i % 5 == 0 ? i % 2 : 1;
  for (int d = 0; d < 5; d++) {
    for (int i = 0; i < 24; i++) values[i] = dtypes[d] == STAX_DTYPE_BOOL ? (i % 3 == 0) : i * 3 - 20;
    if (dtypes[d] == STAX_DTYPE_UINT32)
      for (int i = 0; i < 24; i++) values[i] = i * 3;
    stax_tensor_t* data = make_reversed(dtypes[d], 3, (int64_t[]){2, 3, 4}, values);
    int64_t idx[2] = {2, 0};
    stax_tensor_t* indices = vec(2, idx);
    stax_tensor_t* inputs[2] = {data, indices};
    stax_node_attr_t axis = attr_int("axis", 1);
    stax_tensor_t* out = NULL;
    CHECK_OK(run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1));
    CHECK(dims_are(out, 3, (int64_t[]){2, 2, 4}));
    double expected[16];
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++)
        for (int c = 0; c < 4; c++) expected[(a * 2 + b) * 4 + c] = values[(a * 3 + idx[b]) * 4 + c];
    check_values(out, expected, 16, 0);
    release_all(&out, 1);
    stax_tensor_release(indices);
    stax_tensor_release(data);
  }
}

static void test_gather_errors(void) {
  stax_tensor_t* data = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, NULL);
  stax_tensor_t* indices = make_ints(2, (int64_t[]){2, 2}, (int64_t[]){0, 1, 2, 3});
  stax_tensor_t* inputs[2] = {data, indices};
  stax_tensor_t* out = NULL;
  CHECK_ERROR(run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1), STAX_OUT_OF_RANGE,
              "indices (input 1) value 3 at position [1, 1] is out of range for input 0 axis 0 of "
              "size 3 (valid range [-3, 2])");
  CHECK(out == NULL);
  stax_tensor_release(indices);
  indices = vec(1, (int64_t[]){-4});
  inputs[1] = indices;
  CHECK_ERROR(run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1), STAX_OUT_OF_RANGE,
              "value -4 at position [0]");
  /* A preallocated output stays untouched on error and with the caller. */
  out = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){1, 2}, (double[]){5, 6});
  CHECK_ERROR(run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1), STAX_OUT_OF_RANGE,
              "value -4");
  check_values(out, (double[]){5, 6}, 2, 0);
  release_all(&out, 1);
  stax_node_attr_t axis = attr_int("axis", 2);
  CHECK_ERROR(run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "axis = 2 is out of range for rank 2");
  stax_tensor_release(indices);
  indices = make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){1}, (double[]){0});
  inputs[1] = indices;
  CHECK_ERROR(run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1), STAX_DTYPE_MISMATCH,
              "float32");
  stax_tensor_release(indices);
  /* An empty axis has no valid index at all. */
  stax_tensor_t* empty = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){0, 2}, NULL);
  indices = vec(1, (int64_t[]){0});
  stax_tensor_t* in2[2] = {empty, indices};
  CHECK_ERROR(run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, in2, 2, &out, 1), STAX_OUT_OF_RANGE,
              "size 0");
  /* Rank overflow of the output. */
  stax_tensor_t* deep = make_ints(7, (int64_t[]){1, 1, 1, 1, 1, 1, 1}, (int64_t[]){0});
  stax_tensor_t* wide = make(STAX_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 1}, NULL);
  stax_tensor_t* in3[2] = {wide, deep};
  CHECK_ERROR(run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, in3, 2, &out, 1), STAX_INVALID_ARGUMENT,
              "rank 9");
  stax_tensor_t* all[5] = {data, indices, empty, deep, wide};
  release_all(all, 5);
}

/* ---- GatherElements ----------------------------------------------------------------------- */

static void test_gather_elements(void) {
  /* ONNX examples. */
  stax_tensor_t* data = make(STAX_DTYPE_INT32, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
  stax_tensor_t* indices = make_ints(2, (int64_t[]){2, 2}, (int64_t[]){0, 0, 1, 0});
  stax_tensor_t* inputs[2] = {data, indices};
  stax_node_attr_t axis = attr_int("axis", 1);
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_GatherElements, STAX_OP_GatherElements, &axis, 1, inputs, 2, &out, 1));
  check_values(out, (double[]){1, 1, 4, 3}, 4, 0);
  release_all(&out, 1);
  stax_tensor_release(data);
  stax_tensor_release(indices);
  double nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  data = make_strided(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, nine);
  indices = make_ints(2, (int64_t[]){2, 3}, (int64_t[]){1, 2, 0, 2, 0, -3});
  inputs[0] = data;
  inputs[1] = indices;
  CHECK_OK(run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1));
  CHECK(dims_are(out, 2, (int64_t[]){2, 3}));
  check_values(out, (double[]){4, 8, 3, 7, 2, 3}, 6, 0);
  release_all(&out, 1);
  /* Errors: the value, its position and the range; indices larger than data off the axis. */
  stax_tensor_release(indices);
  indices = make_ints(2, (int64_t[]){2, 1}, (int64_t[]){0, 3});
  inputs[1] = indices;
  CHECK_ERROR(run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1),
              STAX_OUT_OF_RANGE, "value 3 at position [1, 0] is out of range for input 0 axis 0 of size 3");
  stax_tensor_release(indices);
  indices = make_ints(2, (int64_t[]){1, 4}, (int64_t[]){0, 0, 0, 0});
  inputs[1] = indices;
  CHECK_ERROR(run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "exceeds input 0 [3, 3] on axis 1");
  stax_tensor_release(indices);
  indices = vec(1, (int64_t[]){0});
  inputs[1] = indices;
  CHECK_ERROR(run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "rank 1");
  CHECK(out == NULL);
  stax_tensor_release(indices);
  stax_tensor_release(data);
}

/* ---- GatherND ----------------------------------------------------------------------------- */

static void gather_nd_case(int64_t batch_dims, int32_t data_rank, const int64_t* data_dims,
                           int32_t index_rank, const int64_t* index_dims, const int64_t* index_values,
                           int32_t out_rank, const int64_t* out_dims, const double* expected,
                           int64_t expected_count) {
  double values[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  stax_tensor_t* data = make(STAX_DTYPE_INT64, data_rank, data_dims, values);
  stax_tensor_t* indices = make_ints(index_rank, index_dims, index_values);
  stax_tensor_t* inputs[2] = {data, indices};
  stax_node_attr_t batch = attr_int("batch_dims", batch_dims);
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_GatherND, STAX_OP_GatherND, &batch, 1, inputs, 2, &out, 1));
  CHECK(dims_are(out, out_rank, out_dims));
  check_values(out, expected, expected_count, 0);
  release_all(&out, 1);
  stax_tensor_release(indices);
  stax_tensor_release(data);
}

static void test_gather_nd(void) {
  /* The ONNX operator examples. */
  gather_nd_case(0, 2, (int64_t[]){2, 2}, 2, (int64_t[]){2, 2}, (int64_t[]){0, 0, 1, 1}, 1,
                 (int64_t[]){2}, (double[]){0, 3}, 2);
  gather_nd_case(0, 2, (int64_t[]){2, 2}, 2, (int64_t[]){2, 1}, (int64_t[]){1, 0}, 2,
                 (int64_t[]){2, 2}, (double[]){2, 3, 0, 1}, 4);
  gather_nd_case(0, 3, (int64_t[]){2, 2, 2}, 2, (int64_t[]){2, 2}, (int64_t[]){0, 1, 1, 0}, 2,
                 (int64_t[]){2, 2}, (double[]){2, 3, 4, 5}, 4);
  gather_nd_case(0, 3, (int64_t[]){2, 2, 2}, 3, (int64_t[]){2, 1, 2}, (int64_t[]){0, 1, 1, 0}, 3,
                 (int64_t[]){2, 1, 2}, (double[]){2, 3, 4, 5}, 4);
  gather_nd_case(1, 3, (int64_t[]){2, 2, 2}, 2, (int64_t[]){2, 1}, (int64_t[]){1, 0}, 2,
                 (int64_t[]){2, 2}, (double[]){2, 3, 4, 5}, 4);
  /* Full tuples with negative components pick single elements. */
  gather_nd_case(0, 3, (int64_t[]){2, 2, 2}, 2, (int64_t[]){2, 3}, (int64_t[]){-1, -1, -1, 0, 1, 0},
                 1, (int64_t[]){2}, (double[]){7, 2}, 2);
  /* batch_dims = 1 with full tuples per batch: out[b][t] = data[b][i][j]. */
  gather_nd_case(1, 3, (int64_t[]){2, 2, 2}, 3, (int64_t[]){2, 2, 2},
                 (int64_t[]){0, 0, 1, 1, 1, 0, 0, 1}, 2, (int64_t[]){2, 2}, (double[]){0, 3, 6, 5}, 4);
}

static void test_gather_nd_errors(void) {
  stax_tensor_t* data = make(STAX_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, NULL);
  stax_tensor_t* indices = make_ints(2, (int64_t[]){2, 2}, (int64_t[]){1, 2, 0, 3});
  stax_tensor_t* inputs[2] = {data, indices};
  stax_tensor_t* out = NULL;
  CHECK_ERROR(run(stax_kernel_GatherND, STAX_OP_GatherND, NULL, 0, inputs, 2, &out, 1),
              STAX_OUT_OF_RANGE, "value 3 at position [1, 1] is out of range for input 0 axis 1 of size 3");
  stax_tensor_release(indices);
  indices = make_ints(2, (int64_t[]){1, 4}, (int64_t[]){0, 0, 0, 0});
  inputs[1] = indices;
  CHECK_ERROR(run(stax_kernel_GatherND, STAX_OP_GatherND, NULL, 0, inputs, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "last dim is 4");
  stax_tensor_release(indices);
  indices = make_ints(2, (int64_t[]){1, 1}, (int64_t[]){0});
  inputs[1] = indices;
  stax_node_attr_t batch = attr_int("batch_dims", 1);
  CHECK_ERROR(run(stax_kernel_GatherND, STAX_OP_GatherND, &batch, 1, inputs, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "batch dim 0 differs");
  batch = attr_int("batch_dims", 3);
  CHECK_ERROR(run(stax_kernel_GatherND, STAX_OP_GatherND, &batch, 1, inputs, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "batch_dims = 3");
  CHECK(out == NULL);
  stax_tensor_release(indices);
  stax_tensor_release(data);
}

/* ---- ScatterElements ---------------------------------------------------------------------- */

static void test_scatter_elements(void) {
  /* ONNX example, axis 0. */
  stax_tensor_t* data = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, NULL);
  stax_tensor_t* indices = make_ints(2, (int64_t[]){2, 3}, (int64_t[]){1, 0, 2, 0, 2, 1});
  stax_tensor_t* updates =
      make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, (double[]){1.0, 1.1, 1.2, 2.0, 2.1, 2.2});
  stax_tensor_t* inputs[3] = {data, indices, updates};
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, NULL, 0, inputs, 3, &out, 1));
  double expected[9] = {2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2};
  check_values(out, expected, 9, 1e-6);
  release_all(&out, 1);
  stax_tensor_t* all[3] = {data, indices, updates};
  release_all(all, 3);
  /* axis 1 with duplicate indices under every reduction (data is not modified). */
  data = make_strided(STAX_DTYPE_FLOAT64, 2, (int64_t[]){1, 5}, (double[]){1, 2, 3, 4, 5});
  indices = make_ints(2, (int64_t[]){1, 2}, (int64_t[]){1, -4});
  updates = make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){1, 2}, (double[]){1.1, 2.1});
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  const char* reductions[5] = {"none", "add", "mul", "max", "min"};
  double at_one[5] = {2.1, 2 + 1.1 + 2.1, 2 * 1.1 * 2.1, 2.1, 1.1};
  for (int r = 0; r < 5; r++) {
    stax_node_attr_t attrs[2] = {attr_int("axis", 1), attr_string("reduction", reductions[r])};
    CHECK_OK(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, attrs, 2, inputs, 3, &out, 1));
    check_values(out, (double[]){1, at_one[r], 3, 4, 5}, 5, 1e-12);
    release_all(&out, 1);
  }
  check_values(data, (double[]){1, 2, 3, 4, 5}, 5, 0);
  /* Errors. */
  stax_node_attr_t bad[2] = {attr_int("axis", 1), attr_string("reduction", "sum")};
  CHECK_ERROR(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, bad, 2, inputs, 3, &out, 1),
              STAX_INVALID_ARGUMENT, "none, add, mul, max or min");
  stax_node_attr_t axis1 = attr_int("axis", 1);
  stax_tensor_release(indices);
  indices = make_ints(2, (int64_t[]){1, 2}, (int64_t[]){0, 5});
  inputs[1] = indices;
  CHECK_ERROR(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &axis1, 1, inputs, 3, &out, 1),
              STAX_OUT_OF_RANGE, "value 5 at position [0, 1] is out of range for input 0 axis 1 of size 5 (valid range [-5, 4])");
  stax_tensor_release(updates);
  updates = make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){1, 1}, NULL);
  inputs[2] = updates;
  CHECK_ERROR(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &axis1, 1, inputs, 3, &out, 1),
              STAX_SHAPE_MISMATCH, "must have the shape of indices");
  stax_tensor_release(updates);
  updates = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){1, 2}, NULL);
  inputs[2] = updates;
  CHECK_ERROR(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &axis1, 1, inputs, 3, &out, 1),
              STAX_DTYPE_MISMATCH, "updates (input 2) is float32");
  CHECK(out == NULL);
  release_all(all, 0);
  stax_tensor_t* rest[3] = {data, indices, updates};
  release_all(rest, 3);
}

static void test_scatter_integer_reductions(void) {
  /* int32 add wraps around instead of overflowing; uint8 mul wraps; max/min are exact for int64. */
  stax_tensor_t* data = make(STAX_DTYPE_INT32, 1, (int64_t[]){2}, (double[]){2147483647.0, -5});
  stax_tensor_t* indices = vec(2, (int64_t[]){0, 1});
  stax_tensor_t* updates = make(STAX_DTYPE_INT32, 1, (int64_t[]){2}, (double[]){1, 7});
  stax_tensor_t* inputs[3] = {data, indices, updates};
  stax_node_attr_t add = attr_string("reduction", "add");
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &add, 1, inputs, 3, &out, 1));
  check_values(out, (double[]){-2147483648.0, 2}, 2, 0);
  release_all(&out, 1);
  stax_tensor_t* all[3] = {data, indices, updates};
  release_all(all, 3);
  data = make(STAX_DTYPE_UINT8, 1, (int64_t[]){1}, (double[]){200});
  indices = vec(1, (int64_t[]){0});
  updates = make(STAX_DTYPE_UINT8, 1, (int64_t[]){1}, (double[]){3});
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  stax_node_attr_t mul = attr_string("reduction", "mul");
  CHECK_OK(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &mul, 1, inputs, 3, &out, 1));
  check_values(out, (double[]){600 % 256}, 1, 0);
  release_all(&out, 1);
  release_all(all, 0);
  stax_tensor_t* rest[3] = {data, indices, updates};
  release_all(rest, 3);
  /* int64 max near the top of the range, where doubles would round. */
  int64_t big = INT64_MAX - 1;
  data = make_ints(1, (int64_t[]){1}, &big);
  indices = vec(1, (int64_t[]){0});
  int64_t bigger = INT64_MAX;
  updates = make_ints(1, (int64_t[]){1}, &bigger);
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  stax_node_attr_t max = attr_string("reduction", "max");
  CHECK_OK(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &max, 1, inputs, 3, &out, 1));
  CHECK(out && get_int(out, 0) == INT64_MAX);
  release_all(&out, 1);
  stax_node_attr_t min = attr_string("reduction", "min");
  CHECK_OK(run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &min, 1, inputs, 3, &out, 1));
  CHECK(out && get_int(out, 0) == INT64_MAX - 1);
  release_all(&out, 1);
  stax_tensor_t* last[3] = {data, indices, updates};
  release_all(last, 3);
}

/* ---- ScatterND ---------------------------------------------------------------------------- */

static void test_scatter_nd(void) {
  /* ONNX example 1. */
  double eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  stax_tensor_t* data = make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){8}, eight);
  stax_tensor_t* indices = make_ints(2, (int64_t[]){4, 1}, (int64_t[]){4, 3, 1, 7});
  stax_tensor_t* updates = make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){4}, (double[]){9, 10, 11, 12});
  stax_tensor_t* inputs[3] = {data, indices, updates};
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_ScatterND, STAX_OP_ScatterND, NULL, 0, inputs, 3, &out, 1));
  check_values(out, (double[]){1, 11, 3, 10, 9, 6, 7, 12}, 8, 0);
  release_all(&out, 1);
  stax_tensor_t* all[3] = {data, indices, updates};
  release_all(all, 3);
  /* Slab updates: data [3, 2, 2], indices [[0], [-1]], strided updates [2, 2, 2]. */
  double zeros[12] = {0};
  data = make(STAX_DTYPE_INT16, 3, (int64_t[]){3, 2, 2}, zeros);
  indices = make_ints(2, (int64_t[]){2, 1}, (int64_t[]){0, -1});
  double slabs[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  updates = make_strided(STAX_DTYPE_INT16, 3, (int64_t[]){2, 2, 2}, slabs);
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  CHECK_OK(run(stax_kernel_ScatterND, STAX_OP_ScatterND, NULL, 0, inputs, 3, &out, 1));
  check_values(out, (double[]){1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8}, 12, 0);
  release_all(&out, 1);
  /* Duplicates with add and mul on element tuples. */
  stax_tensor_release(indices);
  stax_tensor_release(updates);
  stax_tensor_release(data);
  data = make(STAX_DTYPE_INT16, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
  indices = make_ints(2, (int64_t[]){3, 2}, (int64_t[]){1, 1, 1, 1, 0, 0});
  updates = make(STAX_DTYPE_INT16, 1, (int64_t[]){3}, (double[]){10, 20, 5});
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  stax_node_attr_t add = attr_string("reduction", "add");
  CHECK_OK(run(stax_kernel_ScatterND, STAX_OP_ScatterND, &add, 1, inputs, 3, &out, 1));
  check_values(out, (double[]){6, 2, 3, 34}, 4, 0);
  release_all(&out, 1);
  stax_node_attr_t mul = attr_string("reduction", "mul");
  out = make(STAX_DTYPE_INT16, 2, (int64_t[]){2, 2}, NULL);
  CHECK_OK(run(stax_kernel_ScatterND, STAX_OP_ScatterND, &mul, 1, inputs, 3, &out, 1));
  check_values(out, (double[]){5, 2, 3, 800}, 4, 0);
  release_all(&out, 1);
  /* Errors. */
  stax_tensor_release(indices);
  indices = make_ints(2, (int64_t[]){3, 2}, (int64_t[]){1, 1, 2, 0, 0, 0});
  inputs[1] = indices;
  CHECK_ERROR(run(stax_kernel_ScatterND, STAX_OP_ScatterND, NULL, 0, inputs, 3, &out, 1),
              STAX_OUT_OF_RANGE, "value 2 at position [1, 0] is out of range for input 0 axis 0 of size 2");
  stax_tensor_release(updates);
  updates = make(STAX_DTYPE_INT16, 1, (int64_t[]){2}, NULL);
  inputs[2] = updates;
  CHECK_ERROR(run(stax_kernel_ScatterND, STAX_OP_ScatterND, NULL, 0, inputs, 3, &out, 1),
              STAX_SHAPE_MISMATCH, "need [3]");
  CHECK(out == NULL);
  stax_tensor_t* rest[3] = {data, indices, updates};
  release_all(rest, 3);
}

/* ---- the parallel paths ------------------------------------------------------------------ */

static void test_parallel_gathers(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(allocator(), 4, &pool));
  test_pool = pool;
  enum { R = 97, C = 613, K = 400 };
  static double values[R * C];
  for (int i = 0; i < R * C; i++) values[i] = i % 4093;
  stax_tensor_t* data = make(STAX_DTYPE_INT32, 2, (int64_t[]){R, C}, values);
  static int64_t idx[K];
  for (int k = 0; k < K; k++) idx[k] = (k * 31) % C - (k % 2 ? C : 0);
  stax_tensor_t* indices = vec(K, idx);
  stax_tensor_t* inputs[2] = {data, indices};
  stax_node_attr_t axis = attr_int("axis", 1);
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1));
  bool all_equal = true;
  for (int64_t i = 0; out && i < R; i++)
    for (int64_t k = 0; k < K; k++) {
      int64_t j = idx[k] < 0 ? idx[k] + C : idx[k];
      all_equal = all_equal && get(out, i * K + k) == values[i * C + j];
    }
  CHECK(all_equal);
  release_all(&out, 1);
  /* GatherElements over the whole tensor along axis 0. */
  static int64_t rows[R * C];
  for (int i = 0; i < R * C; i++) rows[i] = (i * 13) % R;
  stax_tensor_t* row_indices = make_ints(2, (int64_t[]){R, C}, rows);
  inputs[1] = row_indices;
  CHECK_OK(run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1));
  all_equal = true;
  for (int64_t e = 0; out && e < R * C; e++)
    all_equal = all_equal && get(out, e) == values[rows[e] * C + e % C];
  CHECK(all_equal);
  release_all(&out, 1);
  stax_tensor_t* all[3] = {data, indices, row_indices};
  release_all(all, 3);
  test_pool = NULL;
  stax_threadpool_destroy(pool);
}

static void test_allocation_failures(void) {
  double values[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  stax_tensor_t* data = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, values);
  stax_tensor_t* indices = make_ints(2, (int64_t[]){2, 1}, (int64_t[]){2, -1});
  stax_tensor_t* inputs[3] = {data, indices, NULL};
  check_allocation_failures(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, 1);
  check_allocation_failures(stax_kernel_GatherND, STAX_OP_GatherND, NULL, 0, inputs, 2, 1);
  stax_tensor_t* updates = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, NULL);
  inputs[2] = updates;
  stax_node_attr_t add = attr_string("reduction", "add");
  check_allocation_failures(stax_kernel_ScatterND, STAX_OP_ScatterND, &add, 1, inputs, 3, 1);
  stax_tensor_t* element_indices = make_ints(2, (int64_t[]){1, 4}, (int64_t[]){0, 1, 2, 0});
  stax_tensor_t* element_updates = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){1, 4}, NULL);
  stax_tensor_t* element_inputs[3] = {data, element_indices, element_updates};
  check_allocation_failures(stax_kernel_ScatterElements, STAX_OP_ScatterElements, NULL, 0,
                            element_inputs, 3, 1);
  check_allocation_failures(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0,
                            element_inputs, 2, 1);
  stax_tensor_t* all[5] = {data, indices, updates, element_indices, element_updates};
  release_all(all, 5);
}

STAX_TEST_MAIN(STAX_TEST(test_gather_axes), STAX_TEST(test_gather_dtypes_and_layouts),
               STAX_TEST(test_gather_errors), STAX_TEST(test_gather_elements),
               STAX_TEST(test_gather_nd), STAX_TEST(test_gather_nd_errors),
               STAX_TEST(test_scatter_elements), STAX_TEST(test_scatter_integer_reductions),
               STAX_TEST(test_scatter_nd), STAX_TEST(test_parallel_gathers),
               STAX_TEST(test_allocation_failures))
