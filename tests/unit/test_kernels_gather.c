/* Tests for the indexing kernels (src/kernels/gather_scatter.c): Gather, GatherElements,
 * GatherND (batch_dims), ScatterElements and ScatterND with every reduction, against the ONNX
 * operator examples and values computed here; negative indices, int32 and int64 indices,
 * strided and reversed data, several dtypes, preallocated outputs, integer wrap-around, and
 * every error path (an index out of range names its value, position and valid range). */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- Gather ------------------------------------------------------------------------------- */

static void test_gather_axes(void) {
  /* data [3, 4] = 10*i + j. */
  double values[12];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) values[i * 4 + j] = 10 * i + j;
  stax_tensor_t* data = kt_make_strided(STAX_DTYPE_FLOAT16, 2, (int64_t[]){3, 4}, values);
  /* axis 0, indices [2, 2] with negatives: out[a][b][:] = data[idx[a][b]][:]. */
  int64_t idx[4] = {2, -3, -1, 0};
  stax_tensor_t* indices = kt_make_ints(2, (int64_t[]){2, 2}, idx);
  stax_tensor_t* inputs[2] = {data, indices};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 3, (int64_t[]){2, 2, 4}));
  double expected[16];
  for (int k = 0; k < 4; k++) {
    int64_t row = idx[k] < 0 ? idx[k] + 3 : idx[k];
    for (int j = 0; j < 4; j++) expected[k * 4 + j] = values[row * 4 + j];
  }
  kt_check_values(out, expected, 16, 0);
  kt_release_all(&out, 1);
  /* axis 1 with int32 indices [3]: out[i][k] = data[i][idx[k]]. */
  double idx32[3] = {3, 0, -1};
  stax_tensor_t* indices32 = kt_make(STAX_DTYPE_INT32, 1, (int64_t[]){3}, idx32);
  inputs[1] = indices32;
  stax_node_attr_t axis = kt_attr_int("axis", -1);
  CHECK_OK(kt_run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){3, 3}));
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) expected[i * 3 + k] = values[i * 4 + (k == 0 ? 3 : (k == 1 ? 0 : 3))];
  kt_check_values(out, expected, 9, 0);
  kt_release_all(&out, 1);
  /* A scalar index drops the axis; into a preallocated output. */
  stax_tensor_t* one = kt_scalar_int(1);
  inputs[1] = one;
  out = kt_make(STAX_DTYPE_FLOAT16, 1, (int64_t[]){3}, NULL);
  CHECK_OK(kt_run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1));
  kt_check_values(out, (double[]){1, 11, 21}, 3, 0);
  kt_release_all(&out, 1);
  /* No indices: an empty output. */
  stax_tensor_t* none = kt_vec(0, NULL);
  inputs[1] = none;
  CHECK_OK(kt_run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){0, 4}));
  kt_release_all(&out, 1);
  stax_tensor_t* all[5] = {data, indices, indices32, one, none};
  kt_release_all(all, 5);
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
    stax_tensor_t* data = kt_make_reversed(dtypes[d], 3, (int64_t[]){2, 3, 4}, values);
    int64_t idx[2] = {2, 0};
    stax_tensor_t* indices = kt_vec(2, idx);
    stax_tensor_t* inputs[2] = {data, indices};
    stax_node_attr_t axis = kt_attr_int("axis", 1);
    stax_tensor_t* out = NULL;
    CHECK_OK(kt_run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1));
    CHECK(kt_dims_are(out, 3, (int64_t[]){2, 2, 4}));
    double expected[16];
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++)
        for (int c = 0; c < 4; c++) expected[(a * 2 + b) * 4 + c] = values[(a * 3 + idx[b]) * 4 + c];
    kt_check_values(out, expected, 16, 0);
    kt_release_all(&out, 1);
    stax_tensor_release(indices);
    stax_tensor_release(data);
  }
}

static void test_gather_errors(void) {
  stax_tensor_t* data = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, NULL);
  stax_tensor_t* indices = kt_make_ints(2, (int64_t[]){2, 2}, (int64_t[]){0, 1, 2, 3});
  stax_tensor_t* inputs[2] = {data, indices};
  stax_tensor_t* out = NULL;
  CHECK_ERROR(kt_run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1), STAX_OUT_OF_RANGE,
              "indices (input 1) value 3 at position [1, 1] is out of range for input 0 axis 0 of "
              "size 3 (valid range [-3, 2])");
  CHECK(out == NULL);
  stax_tensor_release(indices);
  indices = kt_vec(1, (int64_t[]){-4});
  inputs[1] = indices;
  CHECK_ERROR(kt_run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1), STAX_OUT_OF_RANGE,
              "value -4 at position [0]");
  /* A preallocated output stays untouched on error and with the caller. */
  out = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){1, 2}, (double[]){5, 6});
  CHECK_ERROR(kt_run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1), STAX_OUT_OF_RANGE,
              "value -4");
  kt_check_values(out, (double[]){5, 6}, 2, 0);
  kt_release_all(&out, 1);
  stax_node_attr_t axis = kt_attr_int("axis", 2);
  CHECK_ERROR(kt_run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "axis = 2 is out of range for rank 2");
  stax_tensor_release(indices);
  indices = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){1}, (double[]){0});
  inputs[1] = indices;
  CHECK_ERROR(kt_run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, &out, 1), STAX_DTYPE_MISMATCH,
              "float32");
  stax_tensor_release(indices);
  /* An empty axis has no valid index at all. */
  stax_tensor_t* empty = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){0, 2}, NULL);
  indices = kt_vec(1, (int64_t[]){0});
  stax_tensor_t* in2[2] = {empty, indices};
  CHECK_ERROR(kt_run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, in2, 2, &out, 1), STAX_OUT_OF_RANGE,
              "size 0");
  /* Rank overflow of the output. */
  stax_tensor_t* deep = kt_make_ints(7, (int64_t[]){1, 1, 1, 1, 1, 1, 1}, (int64_t[]){0});
  stax_tensor_t* wide = kt_make(STAX_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 1}, NULL);
  stax_tensor_t* in3[2] = {wide, deep};
  CHECK_ERROR(kt_run(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, in3, 2, &out, 1), STAX_INVALID_ARGUMENT,
              "rank 9");
  stax_tensor_t* all[5] = {data, indices, empty, deep, wide};
  kt_release_all(all, 5);
}

/* ---- GatherElements ----------------------------------------------------------------------- */

static void test_gather_elements(void) {
  /* ONNX examples. */
  stax_tensor_t* data = kt_make(STAX_DTYPE_INT32, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
  stax_tensor_t* indices = kt_make_ints(2, (int64_t[]){2, 2}, (int64_t[]){0, 0, 1, 0});
  stax_tensor_t* inputs[2] = {data, indices};
  stax_node_attr_t axis = kt_attr_int("axis", 1);
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_GatherElements, STAX_OP_GatherElements, &axis, 1, inputs, 2, &out, 1));
  kt_check_values(out, (double[]){1, 1, 4, 3}, 4, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(data);
  stax_tensor_release(indices);
  double nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  data = kt_make_strided(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, nine);
  indices = kt_make_ints(2, (int64_t[]){2, 3}, (int64_t[]){1, 2, 0, 2, 0, -3});
  inputs[0] = data;
  inputs[1] = indices;
  CHECK_OK(kt_run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){2, 3}));
  kt_check_values(out, (double[]){4, 8, 3, 7, 2, 3}, 6, 0);
  kt_release_all(&out, 1);
  /* Errors: the value, its position and the range; indices larger than data off the axis. */
  stax_tensor_release(indices);
  indices = kt_make_ints(2, (int64_t[]){2, 1}, (int64_t[]){0, 3});
  inputs[1] = indices;
  CHECK_ERROR(kt_run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1),
              STAX_OUT_OF_RANGE, "value 3 at position [1, 0] is out of range for input 0 axis 0 of size 3");
  stax_tensor_release(indices);
  indices = kt_make_ints(2, (int64_t[]){1, 4}, (int64_t[]){0, 0, 0, 0});
  inputs[1] = indices;
  CHECK_ERROR(kt_run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "exceeds input 0 [3, 3] on axis 1");
  stax_tensor_release(indices);
  indices = kt_vec(1, (int64_t[]){0});
  inputs[1] = indices;
  CHECK_ERROR(kt_run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1),
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
  stax_tensor_t* data = kt_make(STAX_DTYPE_INT64, data_rank, data_dims, values);
  stax_tensor_t* indices = kt_make_ints(index_rank, index_dims, index_values);
  stax_tensor_t* inputs[2] = {data, indices};
  stax_node_attr_t batch = kt_attr_int("batch_dims", batch_dims);
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_GatherND, STAX_OP_GatherND, &batch, 1, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, out_rank, out_dims));
  kt_check_values(out, expected, expected_count, 0);
  kt_release_all(&out, 1);
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
  stax_tensor_t* data = kt_make(STAX_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, NULL);
  stax_tensor_t* indices = kt_make_ints(2, (int64_t[]){2, 2}, (int64_t[]){1, 2, 0, 3});
  stax_tensor_t* inputs[2] = {data, indices};
  stax_tensor_t* out = NULL;
  CHECK_ERROR(kt_run(stax_kernel_GatherND, STAX_OP_GatherND, NULL, 0, inputs, 2, &out, 1),
              STAX_OUT_OF_RANGE, "value 3 at position [1, 1] is out of range for input 0 axis 1 of size 3");
  stax_tensor_release(indices);
  indices = kt_make_ints(2, (int64_t[]){1, 4}, (int64_t[]){0, 0, 0, 0});
  inputs[1] = indices;
  CHECK_ERROR(kt_run(stax_kernel_GatherND, STAX_OP_GatherND, NULL, 0, inputs, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "last dim is 4");
  stax_tensor_release(indices);
  indices = kt_make_ints(2, (int64_t[]){1, 1}, (int64_t[]){0});
  inputs[1] = indices;
  stax_node_attr_t batch = kt_attr_int("batch_dims", 1);
  CHECK_ERROR(kt_run(stax_kernel_GatherND, STAX_OP_GatherND, &batch, 1, inputs, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "batch dim 0 differs");
  batch = kt_attr_int("batch_dims", 3);
  CHECK_ERROR(kt_run(stax_kernel_GatherND, STAX_OP_GatherND, &batch, 1, inputs, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "batch_dims = 3");
  CHECK(out == NULL);
  stax_tensor_release(indices);
  stax_tensor_release(data);
}

/* ---- ScatterElements ---------------------------------------------------------------------- */

static void test_scatter_elements(void) {
  /* ONNX example, axis 0. */
  stax_tensor_t* data = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, NULL);
  stax_tensor_t* indices = kt_make_ints(2, (int64_t[]){2, 3}, (int64_t[]){1, 0, 2, 0, 2, 1});
  stax_tensor_t* updates =
      kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, (double[]){1.0, 1.1, 1.2, 2.0, 2.1, 2.2});
  stax_tensor_t* inputs[3] = {data, indices, updates};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, NULL, 0, inputs, 3, &out, 1));
  double expected[9] = {2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2};
  kt_check_values(out, expected, 9, 1e-6);
  kt_release_all(&out, 1);
  stax_tensor_t* all[3] = {data, indices, updates};
  kt_release_all(all, 3);
  /* axis 1 with duplicate indices under every reduction (data is not modified). */
  data = kt_make_strided(STAX_DTYPE_FLOAT64, 2, (int64_t[]){1, 5}, (double[]){1, 2, 3, 4, 5});
  indices = kt_make_ints(2, (int64_t[]){1, 2}, (int64_t[]){1, -4});
  updates = kt_make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){1, 2}, (double[]){1.1, 2.1});
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  const char* reductions[5] = {"none", "add", "mul", "max", "min"};
  double at_one[5] = {2.1, 2 + 1.1 + 2.1, 2 * 1.1 * 2.1, 2.1, 1.1};
  for (int r = 0; r < 5; r++) {
    stax_node_attr_t attrs[2] = {kt_attr_int("axis", 1), kt_attr_string("reduction", reductions[r])};
    CHECK_OK(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, attrs, 2, inputs, 3, &out, 1));
    kt_check_values(out, (double[]){1, at_one[r], 3, 4, 5}, 5, 1e-12);
    kt_release_all(&out, 1);
  }
  kt_check_values(data, (double[]){1, 2, 3, 4, 5}, 5, 0);
  /* Errors. */
  stax_node_attr_t bad[2] = {kt_attr_int("axis", 1), kt_attr_string("reduction", "sum")};
  CHECK_ERROR(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, bad, 2, inputs, 3, &out, 1),
              STAX_INVALID_ARGUMENT, "none, add, mul, max or min");
  stax_node_attr_t axis1 = kt_attr_int("axis", 1);
  stax_tensor_release(indices);
  indices = kt_make_ints(2, (int64_t[]){1, 2}, (int64_t[]){0, 5});
  inputs[1] = indices;
  CHECK_ERROR(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &axis1, 1, inputs, 3, &out, 1),
              STAX_OUT_OF_RANGE, "value 5 at position [0, 1] is out of range for input 0 axis 1 of size 5 (valid range [-5, 4])");
  stax_tensor_release(updates);
  updates = kt_make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){1, 1}, NULL);
  inputs[2] = updates;
  CHECK_ERROR(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &axis1, 1, inputs, 3, &out, 1),
              STAX_SHAPE_MISMATCH, "must have the shape of indices");
  stax_tensor_release(updates);
  updates = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){1, 2}, NULL);
  inputs[2] = updates;
  CHECK_ERROR(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &axis1, 1, inputs, 3, &out, 1),
              STAX_DTYPE_MISMATCH, "updates (input 2) is float32");
  CHECK(out == NULL);
  kt_release_all(all, 0);
  stax_tensor_t* rest[3] = {data, indices, updates};
  kt_release_all(rest, 3);
}

static void test_scatter_integer_reductions(void) {
  /* int32 add wraps around instead of overflowing; uint8 mul wraps; max/min are exact for int64. */
  stax_tensor_t* data = kt_make(STAX_DTYPE_INT32, 1, (int64_t[]){2}, (double[]){2147483647.0, -5});
  stax_tensor_t* indices = kt_vec(2, (int64_t[]){0, 1});
  stax_tensor_t* updates = kt_make(STAX_DTYPE_INT32, 1, (int64_t[]){2}, (double[]){1, 7});
  stax_tensor_t* inputs[3] = {data, indices, updates};
  stax_node_attr_t add = kt_attr_string("reduction", "add");
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &add, 1, inputs, 3, &out, 1));
  kt_check_values(out, (double[]){-2147483648.0, 2}, 2, 0);
  kt_release_all(&out, 1);
  stax_tensor_t* all[3] = {data, indices, updates};
  kt_release_all(all, 3);
  data = kt_make(STAX_DTYPE_UINT8, 1, (int64_t[]){1}, (double[]){200});
  indices = kt_vec(1, (int64_t[]){0});
  updates = kt_make(STAX_DTYPE_UINT8, 1, (int64_t[]){1}, (double[]){3});
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  stax_node_attr_t mul = kt_attr_string("reduction", "mul");
  CHECK_OK(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &mul, 1, inputs, 3, &out, 1));
  kt_check_values(out, (double[]){600 % 256}, 1, 0);
  kt_release_all(&out, 1);
  kt_release_all(all, 0);
  stax_tensor_t* rest[3] = {data, indices, updates};
  kt_release_all(rest, 3);
  /* int64 max near the top of the range, where doubles would round. */
  int64_t big = INT64_MAX - 1;
  data = kt_make_ints(1, (int64_t[]){1}, &big);
  indices = kt_vec(1, (int64_t[]){0});
  int64_t bigger = INT64_MAX;
  updates = kt_make_ints(1, (int64_t[]){1}, &bigger);
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  stax_node_attr_t max = kt_attr_string("reduction", "max");
  CHECK_OK(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &max, 1, inputs, 3, &out, 1));
  CHECK(out && kt_get_int(out, 0) == INT64_MAX);
  kt_release_all(&out, 1);
  stax_node_attr_t min = kt_attr_string("reduction", "min");
  CHECK_OK(kt_run(stax_kernel_ScatterElements, STAX_OP_ScatterElements, &min, 1, inputs, 3, &out, 1));
  CHECK(out && kt_get_int(out, 0) == INT64_MAX - 1);
  kt_release_all(&out, 1);
  stax_tensor_t* last[3] = {data, indices, updates};
  kt_release_all(last, 3);
}

/* ---- ScatterND ---------------------------------------------------------------------------- */

static void test_scatter_nd(void) {
  /* ONNX example 1. */
  double eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  stax_tensor_t* data = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){8}, eight);
  stax_tensor_t* indices = kt_make_ints(2, (int64_t[]){4, 1}, (int64_t[]){4, 3, 1, 7});
  stax_tensor_t* updates = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){4}, (double[]){9, 10, 11, 12});
  stax_tensor_t* inputs[3] = {data, indices, updates};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_ScatterND, STAX_OP_ScatterND, NULL, 0, inputs, 3, &out, 1));
  kt_check_values(out, (double[]){1, 11, 3, 10, 9, 6, 7, 12}, 8, 0);
  kt_release_all(&out, 1);
  stax_tensor_t* all[3] = {data, indices, updates};
  kt_release_all(all, 3);
  /* Slab updates: data [3, 2, 2], indices [[0], [-1]], strided updates [2, 2, 2]. */
  double zeros[12] = {0};
  data = kt_make(STAX_DTYPE_INT16, 3, (int64_t[]){3, 2, 2}, zeros);
  indices = kt_make_ints(2, (int64_t[]){2, 1}, (int64_t[]){0, -1});
  double slabs[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  updates = kt_make_strided(STAX_DTYPE_INT16, 3, (int64_t[]){2, 2, 2}, slabs);
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  CHECK_OK(kt_run(stax_kernel_ScatterND, STAX_OP_ScatterND, NULL, 0, inputs, 3, &out, 1));
  kt_check_values(out, (double[]){1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8}, 12, 0);
  kt_release_all(&out, 1);
  /* Duplicates with add and mul on element tuples. */
  stax_tensor_release(indices);
  stax_tensor_release(updates);
  stax_tensor_release(data);
  data = kt_make(STAX_DTYPE_INT16, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
  indices = kt_make_ints(2, (int64_t[]){3, 2}, (int64_t[]){1, 1, 1, 1, 0, 0});
  updates = kt_make(STAX_DTYPE_INT16, 1, (int64_t[]){3}, (double[]){10, 20, 5});
  inputs[0] = data;
  inputs[1] = indices;
  inputs[2] = updates;
  stax_node_attr_t add = kt_attr_string("reduction", "add");
  CHECK_OK(kt_run(stax_kernel_ScatterND, STAX_OP_ScatterND, &add, 1, inputs, 3, &out, 1));
  kt_check_values(out, (double[]){6, 2, 3, 34}, 4, 0);
  kt_release_all(&out, 1);
  stax_node_attr_t mul = kt_attr_string("reduction", "mul");
  out = kt_make(STAX_DTYPE_INT16, 2, (int64_t[]){2, 2}, NULL);
  CHECK_OK(kt_run(stax_kernel_ScatterND, STAX_OP_ScatterND, &mul, 1, inputs, 3, &out, 1));
  kt_check_values(out, (double[]){5, 2, 3, 800}, 4, 0);
  kt_release_all(&out, 1);
  /* Errors. */
  stax_tensor_release(indices);
  indices = kt_make_ints(2, (int64_t[]){3, 2}, (int64_t[]){1, 1, 2, 0, 0, 0});
  inputs[1] = indices;
  CHECK_ERROR(kt_run(stax_kernel_ScatterND, STAX_OP_ScatterND, NULL, 0, inputs, 3, &out, 1),
              STAX_OUT_OF_RANGE, "value 2 at position [1, 0] is out of range for input 0 axis 0 of size 2");
  stax_tensor_release(updates);
  updates = kt_make(STAX_DTYPE_INT16, 1, (int64_t[]){2}, NULL);
  inputs[2] = updates;
  CHECK_ERROR(kt_run(stax_kernel_ScatterND, STAX_OP_ScatterND, NULL, 0, inputs, 3, &out, 1),
              STAX_SHAPE_MISMATCH, "need [3]");
  CHECK(out == NULL);
  stax_tensor_t* rest[3] = {data, indices, updates};
  kt_release_all(rest, 3);
}

/* ---- the parallel paths ------------------------------------------------------------------ */

static void test_parallel_gathers(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  kt_test_pool = pool;
  enum { R = 97, C = 613, K = 400 };
  static double values[R * C];
  for (int i = 0; i < R * C; i++) values[i] = i % 4093;
  stax_tensor_t* data = kt_make(STAX_DTYPE_INT32, 2, (int64_t[]){R, C}, values);
  static int64_t idx[K];
  for (int k = 0; k < K; k++) idx[k] = (k * 31) % C - (k % 2 ? C : 0);
  stax_tensor_t* indices = kt_vec(K, idx);
  stax_tensor_t* inputs[2] = {data, indices};
  stax_node_attr_t axis = kt_attr_int("axis", 1);
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_Gather, STAX_OP_Gather, &axis, 1, inputs, 2, &out, 1));
  bool all_equal = true;
  for (int64_t i = 0; out && i < R; i++)
    for (int64_t k = 0; k < K; k++) {
      int64_t j = idx[k] < 0 ? idx[k] + C : idx[k];
      all_equal = all_equal && kt_get(out, i * K + k) == values[i * C + j];
    }
  CHECK(all_equal);
  kt_release_all(&out, 1);
  /* GatherElements over the whole tensor along axis 0. */
  static int64_t rows[R * C];
  for (int i = 0; i < R * C; i++) rows[i] = (i * 13) % R;
  stax_tensor_t* row_indices = kt_make_ints(2, (int64_t[]){R, C}, rows);
  inputs[1] = row_indices;
  CHECK_OK(kt_run(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0, inputs, 2, &out, 1));
  all_equal = true;
  for (int64_t e = 0; out && e < R * C; e++)
    all_equal = all_equal && kt_get(out, e) == values[rows[e] * C + e % C];
  CHECK(all_equal);
  kt_release_all(&out, 1);
  stax_tensor_t* all[3] = {data, indices, row_indices};
  kt_release_all(all, 3);
  kt_test_pool = NULL;
  stax_threadpool_destroy(pool);
}

static void test_allocation_failures(void) {
  double values[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  stax_tensor_t* data = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, values);
  stax_tensor_t* indices = kt_make_ints(2, (int64_t[]){2, 1}, (int64_t[]){2, -1});
  stax_tensor_t* inputs[3] = {data, indices, NULL};
  kt_check_allocation_failures(stax_kernel_Gather, STAX_OP_Gather, NULL, 0, inputs, 2, 1);
  kt_check_allocation_failures(stax_kernel_GatherND, STAX_OP_GatherND, NULL, 0, inputs, 2, 1);
  stax_tensor_t* updates = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, NULL);
  inputs[2] = updates;
  stax_node_attr_t add = kt_attr_string("reduction", "add");
  kt_check_allocation_failures(stax_kernel_ScatterND, STAX_OP_ScatterND, &add, 1, inputs, 3, 1);
  stax_tensor_t* element_indices = kt_make_ints(2, (int64_t[]){1, 4}, (int64_t[]){0, 1, 2, 0});
  stax_tensor_t* element_updates = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){1, 4}, NULL);
  stax_tensor_t* element_inputs[3] = {data, element_indices, element_updates};
  kt_check_allocation_failures(stax_kernel_ScatterElements, STAX_OP_ScatterElements, NULL, 0,
                            element_inputs, 3, 1);
  kt_check_allocation_failures(stax_kernel_GatherElements, STAX_OP_GatherElements, NULL, 0,
                            element_inputs, 2, 1);
  stax_tensor_t* all[5] = {data, indices, updates, element_indices, element_updates};
  kt_release_all(all, 5);
}

STAX_TEST_MAIN(STAX_TEST(test_gather_axes), STAX_TEST(test_gather_dtypes_and_layouts),
               STAX_TEST(test_gather_errors), STAX_TEST(test_gather_elements),
               STAX_TEST(test_gather_nd), STAX_TEST(test_gather_nd_errors),
               STAX_TEST(test_scatter_elements), STAX_TEST(test_scatter_integer_reductions),
               STAX_TEST(test_scatter_nd), STAX_TEST(test_parallel_gathers),
               STAX_TEST(test_allocation_failures))
