/* Tests for the generating kernels (src/kernels/generate.c): Shape (start/end), Size,
 * ConstantOfShape (default and typed values), Range (integers exactly, floats, empty and
 * reversed ranges), Constant from every value attribute, EyeLike (k, dtype), OneHot (every
 * axis, negative and out-of-range indices, float depth) and Trilu (upper/lower, k, batches),
 * with strided inputs, preallocated outputs and the error paths. */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- Shape / Size ------------------------------------------------------------------------- */

static void test_shape_and_size(void) {
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 3, (int64_t[]){2, 0, 5}, NULL);
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_Shape, STAX_OP_Shape, NULL, 0, &x, 1, &out, 1));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT64);
  CHECK(kt_dims_are(out, 1, (int64_t[]){3}));
  kt_check_values(out, (double[]){2, 0, 5}, 3, 0);
  kt_release_all(&out, 1);
  /* start / end, negative and clamped. */
  struct { int64_t start, end; int64_t count; double first; } cases[] = {
      {1, 3, 2, 0}, {-1, 3, 1, 5}, {-10, 1, 1, 2}, {2, 1, 0, 0}, {0, 100, 3, 2}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    stax_node_attr_t attrs[2] = {kt_attr_int("start", cases[c].start), kt_attr_int("end", cases[c].end)};
    CHECK_OK(kt_run(stax_kernel_Shape, STAX_OP_Shape, attrs, 2, &x, 1, &out, 1));
    CHECK(kt_dims_are(out, 1, &cases[c].count));
    if (cases[c].count > 0) CHECK_EQ_INT(kt_get_int(out, 0), (int64_t)cases[c].first);
    kt_release_all(&out, 1);
  }
  CHECK_OK(kt_run(stax_kernel_Size, STAX_OP_Size, NULL, 0, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 0, NULL));
  CHECK_EQ_INT(kt_get_int(out, 0), 0);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
  /* A scalar: shape [], size 1; into preallocated outputs. */
  stax_tensor_t* s = kt_make(STAX_DTYPE_BOOL, 0, NULL, (double[]){1});
  out = kt_make_ints(1, (int64_t[]){0}, NULL);
  CHECK_OK(kt_run(stax_kernel_Shape, STAX_OP_Shape, NULL, 0, &s, 1, &out, 1));
  kt_release_all(&out, 1);
  out = kt_make_ints(0, NULL, (int64_t[]){99});
  CHECK_OK(kt_run(stax_kernel_Size, STAX_OP_Size, NULL, 0, &s, 1, &out, 1));
  CHECK_EQ_INT(kt_get_int(out, 0), 1);
  kt_release_all(&out, 1);
  CHECK_ERROR(kt_run(stax_kernel_Size, STAX_OP_Size, NULL, 0, NULL, 0, &out, 1), STAX_INVALID_ARGUMENT,
              "input 0 is missing");
  stax_tensor_release(s);
}

/* ---- ConstantOfShape ---------------------------------------------------------------------- */

static void test_constant_of_shape(void) {
  stax_tensor_t* shape = kt_vec(2, (int64_t[]){2, 3});
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, &out, 1));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_FLOAT32);
  kt_check_values(out, (double[]){0, 0, 0, 0, 0, 0}, 6, 0);
  kt_release_all(&out, 1);
  /* int64 value (exact beyond 2^53), bool, float16. */
  int64_t big = ((int64_t)1 << 60) + 1;
  stax_tensor_t* value = kt_make_ints(1, (int64_t[]){1}, &big);
  stax_node_attr_t attr = kt_attr_tensor("value", value);
  CHECK_OK(kt_run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, &attr, 1, &shape, 1, &out, 1));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT64);
  for (int i = 0; i < 6; i++) CHECK(out && kt_get_int(out, i) == big);
  kt_release_all(&out, 1);
  stax_tensor_release(value);
  stax_dtype_t dtypes[3] = {STAX_DTYPE_BOOL, STAX_DTYPE_FLOAT16, STAX_DTYPE_UINT16};
  for (int d = 0; d < 3; d++) {
    value = kt_make(dtypes[d], 1, (int64_t[]){1}, (double[]){1});
    attr = kt_attr_tensor("value", value);
    CHECK_OK(kt_run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, &attr, 1, &shape, 1, &out, 1));
    CHECK(out && stax_tensor_dtype(out) == dtypes[d]);
    kt_check_values(out, (double[]){1, 1, 1, 1, 1, 1}, 6, 0);
    kt_release_all(&out, 1);
    stax_tensor_release(value);
  }
  stax_tensor_release(shape);
  /* An empty shape gives a scalar; a zero dim an empty tensor. */
  shape = kt_vec(0, NULL);
  CHECK_OK(kt_run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, &out, 1));
  CHECK(kt_dims_are(out, 0, NULL));
  kt_release_all(&out, 1);
  stax_tensor_release(shape);
  shape = kt_vec(2, (int64_t[]){4, 0});
  CHECK_OK(kt_run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){4, 0}));
  kt_release_all(&out, 1);
  stax_tensor_release(shape);
  /* Errors. */
  shape = kt_vec(2, (int64_t[]){4, -1});
  CHECK_ERROR(kt_run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "has -1 at position 1");
  stax_tensor_release(shape);
  shape = kt_vec(1, (int64_t[]){2});
  value = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){2}, NULL);
  attr = kt_attr_tensor("value", value);
  CHECK_ERROR(kt_run(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, &attr, 1, &shape, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "one element");
  CHECK(out == NULL);
  stax_tensor_release(value);
  stax_tensor_release(shape);
}

/* ---- Range -------------------------------------------------------------------------------- */

static stax_status_t range(stax_dtype_t dtype, double start, double limit, double delta,
                           stax_tensor_t** out) {
  stax_tensor_t* inputs[3] = {kt_make(dtype, 0, NULL, &start), kt_make(dtype, 0, NULL, &limit),
                              kt_make(dtype, 0, NULL, &delta)};
  stax_status_t status = kt_run(stax_kernel_Range, STAX_OP_Range, NULL, 0, inputs, 3, out, 1);
  kt_release_all(inputs, 3);
  return status;
}

static void test_range(void) {
  stax_tensor_t* out = NULL;
  CHECK_OK(range(STAX_DTYPE_INT32, 3, 10, 3, &out));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT32);
  kt_check_values(out, (double[]){3, 6, 9}, 3, 0);
  kt_release_all(&out, 1);
  CHECK_OK(range(STAX_DTYPE_INT64, 10, 4, -2, &out));
  kt_check_values(out, (double[]){10, 8, 6}, 3, 0);
  kt_release_all(&out, 1);
  CHECK_OK(range(STAX_DTYPE_INT16, 5, 5, 1, &out));
  CHECK(kt_dims_are(out, 1, (int64_t[]){0}));
  kt_release_all(&out, 1);
  CHECK_OK(range(STAX_DTYPE_INT32, 5, 1, 1, &out)); /* wrong direction: empty */
  CHECK(kt_dims_are(out, 1, (int64_t[]){0}));
  kt_release_all(&out, 1);
  /* Floats: count = ceil((limit - start) / delta). */
  CHECK_OK(range(STAX_DTYPE_FLOAT32, 1, 2, 0.3, &out));
  kt_check_values(out, (double[]){1, 1.3, 1.6, 1.9}, 4, 1e-6);
  kt_release_all(&out, 1);
  CHECK_OK(range(STAX_DTYPE_FLOAT64, 0, -1, -0.25, &out));
  kt_check_values(out, (double[]){0, -0.25, -0.5, -0.75}, 4, 0);
  kt_release_all(&out, 1);
  /* Preallocated. */
  out = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){2}, NULL);
  CHECK_OK(range(STAX_DTYPE_FLOAT32, 0, 2, 1, &out));
  kt_check_values(out, (double[]){0, 1}, 2, 0);
  kt_release_all(&out, 1);
  /* int64 exact near the top of the range. */
  stax_tensor_t* inputs[3] = {kt_scalar_int(INT64_MAX - 2), kt_scalar_int(INT64_MAX), kt_scalar_int(1)};
  CHECK_OK(kt_run(stax_kernel_Range, STAX_OP_Range, NULL, 0, inputs, 3, &out, 1));
  CHECK(out && kt_get_int(out, 1) == INT64_MAX - 1);
  kt_release_all(&out, 1);
  kt_release_all(inputs, 3);
  /* Errors. */
  CHECK_ERROR(range(STAX_DTYPE_INT32, 0, 5, 0, &out), STAX_INVALID_ARGUMENT, "delta (input 2) is 0");
  CHECK_ERROR(range(STAX_DTYPE_FLOAT32, 0, 5, 0, &out), STAX_INVALID_ARGUMENT, "delta (input 2) is 0");
  CHECK_ERROR(range(STAX_DTYPE_FLOAT32, 0, INFINITY, 1, &out), STAX_OUT_OF_RANGE, "element count");
  stax_tensor_t* mixed[3] = {kt_scalar_int(0), kt_make(STAX_DTYPE_INT32, 0, NULL, (double[]){3}), kt_scalar_int(1)};
  CHECK_ERROR(kt_run(stax_kernel_Range, STAX_OP_Range, NULL, 0, mixed, 3, &out, 1), STAX_DTYPE_MISMATCH,
              "limit (input 1) is int32");
  stax_tensor_release(mixed[1]);
  mixed[1] = kt_vec(2, (int64_t[]){1, 2});
  CHECK_ERROR(kt_run(stax_kernel_Range, STAX_OP_Range, NULL, 0, mixed, 3, &out, 1), STAX_INVALID_ARGUMENT,
              "must be a scalar");
  CHECK(out == NULL);
  kt_release_all(mixed, 3);
}

/* ---- Constant ----------------------------------------------------------------------------- */

static void test_constant(void) {
  stax_tensor_t* out = NULL;
  stax_tensor_t* value = kt_make(STAX_DTYPE_INT8, 2, (int64_t[]){2, 2}, (double[]){1, -2, 3, -4});
  stax_node_attr_t attr = kt_attr_tensor("value", value);
  CHECK_OK(kt_run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT8);
  kt_check_values(out, (double[]){1, -2, 3, -4}, 4, 0);
  /* A copy: the attribute's tensor is never handed out. */
  CHECK(out && stax_tensor_buffer(out) != stax_tensor_buffer(value));
  kt_release_all(&out, 1);
  attr = kt_attr_float("value_float", 2.5f);
  CHECK_OK(kt_run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  CHECK(kt_dims_are(out, 0, NULL) && stax_tensor_dtype(out) == STAX_DTYPE_FLOAT32);
  kt_check_values(out, (double[]){2.5}, 1, 0);
  kt_release_all(&out, 1);
  attr = kt_attr_int("value_int", -9);
  CHECK_OK(kt_run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  CHECK(kt_dims_are(out, 0, NULL) && kt_get_int(out, 0) == -9);
  kt_release_all(&out, 1);
  int64_t ints[3] = {4, 5, 6};
  attr = kt_attr_ints("value_ints", 3, ints);
  CHECK_OK(kt_run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  kt_check_values(out, (double[]){4, 5, 6}, 3, 0);
  kt_release_all(&out, 1);
  float floats[2] = {0.5f, -1.5f};
  memset(&attr, 0, sizeof(attr));
  attr.name = "value_floats";
  attr.type = STAX_ATTR_FLOATS;
  attr.value.floats.count = 2;
  attr.value.floats.data = floats;
  CHECK_OK(kt_run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1));
  kt_check_values(out, (double[]){0.5, -1.5}, 2, 0);
  kt_release_all(&out, 1);
  /* Errors. */
  CHECK_ERROR(kt_run(stax_kernel_Constant, STAX_OP_Constant, NULL, 0, NULL, 0, &out, 1),
              STAX_INVALID_ARGUMENT, "needs one of");
  stax_node_attr_t two[2] = {kt_attr_tensor("value", value), kt_attr_int("value_int", 1)};
  CHECK_ERROR(kt_run(stax_kernel_Constant, STAX_OP_Constant, two, 2, NULL, 0, &out, 1),
              STAX_INVALID_ARGUMENT, "exactly one");
  attr = kt_attr_string("value_string", "hello");
  CHECK_ERROR(kt_run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1),
              STAX_UNIMPLEMENTED, "string");
  /* A preallocated output of the wrong shape. */
  attr = kt_attr_tensor("value", value);
  out = kt_make(STAX_DTYPE_INT8, 1, (int64_t[]){4}, NULL);
  CHECK_ERROR(kt_run(stax_kernel_Constant, STAX_OP_Constant, &attr, 1, NULL, 0, &out, 1),
              STAX_SHAPE_MISMATCH, "[2, 2]");
  kt_release_all(&out, 1);
  stax_tensor_release(value);
}

/* ---- EyeLike ------------------------------------------------------------------------------ */

static void test_eye_like(void) {
  stax_tensor_t* x = kt_make(STAX_DTYPE_INT32, 2, (int64_t[]){3, 4}, NULL);
  stax_tensor_t* out = NULL;
  for (int64_t k = -4; k <= 5; k++) {
    stax_node_attr_t attr = kt_attr_int("k", k);
    CHECK_OK(kt_run(stax_kernel_EyeLike, STAX_OP_EyeLike, &attr, 1, &x, 1, &out, 1));
    CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_INT32);
    double expected[12];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) expected[i * 4 + j] = j - i == k ? 1 : 0;
    kt_check_values(out, expected, 12, 0);
    kt_release_all(&out, 1);
  }
  /* dtype attribute (ONNX codes: 10 = float16, 9 = bool). */
  int64_t codes[2] = {10, 9};
  stax_dtype_t dtypes[2] = {STAX_DTYPE_FLOAT16, STAX_DTYPE_BOOL};
  for (int c = 0; c < 2; c++) {
    stax_node_attr_t attr = kt_attr_int("dtype", codes[c]);
    CHECK_OK(kt_run(stax_kernel_EyeLike, STAX_OP_EyeLike, &attr, 1, &x, 1, &out, 1));
    CHECK(out && stax_tensor_dtype(out) == dtypes[c]);
    kt_check_values(out, (double[]){1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, 12, 0);
    kt_release_all(&out, 1);
  }
  stax_node_attr_t bad = kt_attr_int("dtype", 8); /* string */
  CHECK_ERROR(kt_run(stax_kernel_EyeLike, STAX_OP_EyeLike, &bad, 1, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "dtype' = 8");
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_INT32, 1, (int64_t[]){3}, NULL);
  CHECK_ERROR(kt_run(stax_kernel_EyeLike, STAX_OP_EyeLike, NULL, 0, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "rank 2");
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){0, 2}, NULL);
  CHECK_OK(kt_run(stax_kernel_EyeLike, STAX_OP_EyeLike, NULL, 0, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){0, 2}));
  kt_release_all(&out, 1);
  stax_tensor_release(x);
}

/* ---- OneHot ------------------------------------------------------------------------------- */

static void test_one_hot(void) {
  /* indices [2, 2] = {0, -1, 3, 7} (7 is past depth 4: all off), depth 4, values {off 5, on 9}. */
  stax_tensor_t* indices = kt_make_ints(2, (int64_t[]){2, 2}, (int64_t[]){0, -1, 3, 7});
  stax_tensor_t* depth = kt_scalar_int(4);
  stax_tensor_t* values = kt_make(STAX_DTYPE_INT32, 1, (int64_t[]){2}, (double[]){5, 9});
  stax_tensor_t* inputs[3] = {indices, depth, values};
  stax_tensor_t* out = NULL;
  int64_t normalized[4] = {0, 3, 3, -100};
  for (int64_t axis = -3; axis <= 2; axis++) {
    stax_node_attr_t attr = kt_attr_int("axis", axis);
    CHECK_OK(kt_run(stax_kernel_OneHot, STAX_OP_OneHot, &attr, 1, inputs, 3, &out, 1));
    int64_t a = axis < 0 ? axis + 3 : axis;
    int64_t dims[3];
    for (int k = 0; k < 3; k++) dims[k] = k == a ? 4 : 2; /* indices are [2, 2] */
    CHECK(kt_dims_are(out, 3, dims));
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
    kt_check_values(out, expected, 16, 0);
    kt_release_all(&out, 1);
  }
  /* Float depth and float indices, a float16 values tensor. */
  stax_tensor_t* findices = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){3}, (double[]){1.0, -3.0, 2.0});
  stax_tensor_t* fdepth = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){1}, (double[]){3});
  stax_tensor_t* hvalues = kt_make(STAX_DTYPE_FLOAT16, 1, (int64_t[]){2}, (double[]){0, 0.5});
  stax_tensor_t* finputs[3] = {findices, fdepth, hvalues};
  CHECK_OK(kt_run(stax_kernel_OneHot, STAX_OP_OneHot, NULL, 0, finputs, 3, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){3, 3}));
  kt_check_values(out, (double[]){0, 0.5, 0, 0.5, 0, 0, 0, 0, 0.5}, 9, 0);
  kt_release_all(&out, 1);
  /* Errors. */
  stax_tensor_t* zero = kt_scalar_int(0);
  inputs[1] = zero;
  CHECK_ERROR(kt_run(stax_kernel_OneHot, STAX_OP_OneHot, NULL, 0, inputs, 3, &out, 1), STAX_INVALID_ARGUMENT,
              "depth (input 1) is 0");
  inputs[1] = depth;
  stax_node_attr_t far = kt_attr_int("axis", 3);
  CHECK_ERROR(kt_run(stax_kernel_OneHot, STAX_OP_OneHot, &far, 1, inputs, 3, &out, 1), STAX_INVALID_ARGUMENT,
              "axis = 3");
  stax_tensor_t* three = kt_make(STAX_DTYPE_INT32, 1, (int64_t[]){3}, NULL);
  inputs[2] = three;
  CHECK_ERROR(kt_run(stax_kernel_OneHot, STAX_OP_OneHot, NULL, 0, inputs, 3, &out, 1), STAX_INVALID_ARGUMENT,
              "two elements");
  CHECK(out == NULL);
  stax_tensor_t* all[8] = {indices, depth, values, findices, fdepth, hvalues, zero, three};
  kt_release_all(all, 8);
}

/* ---- Trilu -------------------------------------------------------------------------------- */

static void test_trilu(void) {
  /* x [2, 3, 4] = 1 + i, batch of two matrices, strided. */
  double values[24];
  for (int i = 0; i < 24; i++) values[i] = i + 1;
  stax_tensor_t* x = kt_make_strided(STAX_DTYPE_FLOAT64, 3, (int64_t[]){2, 3, 4}, values);
  stax_tensor_t* out = NULL;
  for (int upper = 0; upper <= 1; upper++) {
    for (int64_t k = -4; k <= 5; k++) {
      stax_tensor_t* kt = kt_scalar_int(k);
      stax_tensor_t* inputs[2] = {x, kt};
      stax_node_attr_t attr = kt_attr_int("upper", upper);
      CHECK_OK(kt_run(stax_kernel_Trilu, STAX_OP_Trilu, &attr, 1, inputs, 2, &out, 1));
      double expected[24];
      for (int m = 0; m < 2; m++)
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 4; j++) {
            bool keep = upper ? j - i >= k : j - i <= k;
            int e = (m * 3 + i) * 4 + j;
            expected[e] = keep ? values[e] : 0;
          }
      kt_check_values(out, expected, 24, 0);
      kt_release_all(&out, 1);
      stax_tensor_release(kt);
    }
  }
  /* Defaults: upper, k = 0; int8 into a preallocated output. */
  stax_tensor_t* y = kt_make(STAX_DTYPE_INT8, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
  out = kt_make(STAX_DTYPE_INT8, 2, (int64_t[]){2, 2}, NULL);
  CHECK_OK(kt_run(stax_kernel_Trilu, STAX_OP_Trilu, NULL, 0, &y, 1, &out, 1));
  kt_check_values(out, (double[]){1, 2, 0, 4}, 4, 0);
  kt_release_all(&out, 1);
  /* Huge k does not overflow. */
  stax_tensor_t* huge = kt_scalar_int(INT64_MIN);
  stax_tensor_t* inputs[2] = {y, huge};
  CHECK_OK(kt_run(stax_kernel_Trilu, STAX_OP_Trilu, NULL, 0, inputs, 2, &out, 1));
  kt_check_values(out, (double[]){1, 2, 3, 4}, 4, 0);
  kt_release_all(&out, 1);
  stax_tensor_t* v = kt_make(STAX_DTYPE_INT8, 1, (int64_t[]){2}, NULL);
  CHECK_ERROR(kt_run(stax_kernel_Trilu, STAX_OP_Trilu, NULL, 0, &v, 1, &out, 1), STAX_INVALID_ARGUMENT,
              "rank >= 2");
  CHECK(out == NULL);
  stax_tensor_t* all[4] = {x, y, huge, v};
  kt_release_all(all, 4);
}

static void test_allocation_failures(void) {
  stax_tensor_t* indices = kt_make_ints(1, (int64_t[]){3}, (int64_t[]){0, 2, 1});
  stax_tensor_t* depth = kt_scalar_int(3);
  stax_tensor_t* values = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){2}, (double[]){0, 1});
  stax_tensor_t* inputs[3] = {indices, depth, values};
  kt_check_allocation_failures(stax_kernel_OneHot, STAX_OP_OneHot, NULL, 0, inputs, 3, 1);
  stax_tensor_t* m = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, NULL);
  kt_check_allocation_failures(stax_kernel_Trilu, STAX_OP_Trilu, NULL, 0, &m, 1, 1);
  kt_check_allocation_failures(stax_kernel_EyeLike, STAX_OP_EyeLike, NULL, 0, &m, 1, 1);
  stax_node_attr_t value = kt_attr_tensor("value", m);
  kt_check_allocation_failures(stax_kernel_Constant, STAX_OP_Constant, &value, 1, NULL, 0, 1);
  stax_tensor_t* shape = kt_vec(2, (int64_t[]){2, 2});
  kt_check_allocation_failures(stax_kernel_ConstantOfShape, STAX_OP_ConstantOfShape, NULL, 0, &shape, 1, 1);
  stax_tensor_t* all[5] = {indices, depth, values, m, shape};
  kt_release_all(all, 5);
}

STAX_TEST_MAIN(STAX_TEST(test_shape_and_size), STAX_TEST(test_constant_of_shape),
               STAX_TEST(test_range), STAX_TEST(test_constant), STAX_TEST(test_eye_like),
               STAX_TEST(test_one_hot), STAX_TEST(test_trilu),
               STAX_TEST(test_allocation_failures))
