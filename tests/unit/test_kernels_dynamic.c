/* Tests for the data-dependent kernels (src/kernels/dynamic.c): NonZero (-0 and NaN, scalars,
 * empty inputs), TopK (largest/smallest, ties by lower index, NaN and signed zeros, exact
 * 64-bit integers, k = 0), Unique (the ONNX examples sorted and unsorted, flattened and along
 * an axis, partial outputs) and Compress (with and without axis, short and long conditions),
 * with strided inputs, preallocated outputs and every error path. */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static void check_ints(const stax_tensor_t* t, const int64_t* expected, int64_t count) {
  CHECK(t != NULL && stax_tensor_dtype(t) == STAX_DTYPE_INT64);
  if (!t || stax_tensor_element_count(t) != count) {
    CHECK_EQ_INT(t ? stax_tensor_element_count(t) : -1, count);
    return;
  }
  for (int64_t i = 0; i < count; i++)
    if (kt_get_int(t, i) != expected[i]) {
      fprintf(stderr, "  element %lld\n", (long long)i);
      CHECK_EQ_INT(kt_get_int(t, i), expected[i]);
      return;
    }
  CHECK(true);
}

static stax_tensor_t* bools(int32_t rank, const int64_t* dims, const double* values) {
  return kt_make(STAX_DTYPE_BOOL, rank, dims, values);
}

/* ---- NonZero ------------------------------------------------------------------------------ */

static void test_nonzero(void) {
  /* -0.0 is zero, NaN is not. */
  stax_tensor_t* x = kt_make_strided(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3},
                                  (double[]){1, 0, 2, -0.0, NAN, 0});
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){2, 3}));
  check_ints(out, (int64_t[]){0, 0, 1, 0, 2, 1}, 6);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
  /* Bool 3-D, and a preallocated output. */
  x = bools(3, (int64_t[]){2, 1, 2}, (double[]){0, 1, 1, 0});
  out = kt_make_ints(2, (int64_t[]){3, 2}, NULL);
  CHECK_OK(kt_run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  check_ints(out, (int64_t[]){0, 1, 0, 0, 1, 0}, 6);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
  /* Scalars behave as 1-element vectors; an empty tensor has no entries. */
  x = kt_make(STAX_DTYPE_INT8, 0, NULL, (double[]){-3});
  CHECK_OK(kt_run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){1, 1}));
  check_ints(out, (int64_t[]){0}, 1);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_UINT64, 0, NULL, (double[]){0});
  CHECK_OK(kt_run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){1, 0}));
  kt_release_all(&out, 1);
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_FLOAT16, 2, (int64_t[]){0, 4}, NULL);
  CHECK_OK(kt_run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){2, 0}));
  kt_release_all(&out, 1);
  /* Preallocated with the wrong count. */
  out = kt_make_ints(2, (int64_t[]){2, 1}, NULL);
  CHECK_ERROR(kt_run(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, &out, 1), STAX_SHAPE_MISMATCH,
              "[2, 0]");
  kt_release_all(&out, 1);
  stax_tensor_release(x);
}

/* ---- TopK --------------------------------------------------------------------------------- */

static stax_status_t topk(stax_tensor_t* x, int64_t k, const stax_node_attr_t* attrs, int32_t attr_count,
                          stax_tensor_t** outs) {
  stax_tensor_t* kt = kt_vec(1, &k);
  stax_tensor_t* inputs[2] = {x, kt};
  stax_status_t status = kt_run(stax_kernel_TopK, STAX_OP_TopK, attrs, attr_count, inputs, 2, outs, 2);
  stax_tensor_release(kt);
  return status;
}

static void test_topk(void) {
  double values[12];
  for (int i = 0; i < 12; i++) values[i] = i;
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, values);
  stax_tensor_t* outs[2] = {NULL, NULL};
  /* The ONNX example: largest 3 along the last axis. */
  CHECK_OK(topk(x, 3, NULL, 0, outs));
  CHECK(kt_dims_are(outs[0], 2, (int64_t[]){3, 3}));
  kt_check_values(outs[0], (double[]){3, 2, 1, 7, 6, 5, 11, 10, 9}, 9, 0);
  check_ints(outs[1], (int64_t[]){3, 2, 1, 3, 2, 1, 3, 2, 1}, 9);
  kt_release_all(outs, 2);
  /* Smallest 2 along axis 0. */
  stax_node_attr_t attrs[2] = {kt_attr_int("axis", 0), kt_attr_int("largest", 0)};
  CHECK_OK(topk(x, 2, attrs, 2, outs));
  CHECK(kt_dims_are(outs[0], 2, (int64_t[]){2, 4}));
  kt_check_values(outs[0], (double[]){0, 1, 2, 3, 4, 5, 6, 7}, 8, 0);
  check_ints(outs[1], (int64_t[]){0, 0, 0, 0, 1, 1, 1, 1}, 8);
  kt_release_all(outs, 2);
  stax_tensor_release(x);
  /* Ties go to the lower index first; a reversed int16 input. */
  x = kt_make_reversed(STAX_DTYPE_INT16, 1, (int64_t[]){5}, (double[]){3, 1, 3, 2, 1});
  CHECK_OK(topk(x, 3, NULL, 0, outs));
  kt_check_values(outs[0], (double[]){3, 3, 2}, 3, 0);
  check_ints(outs[1], (int64_t[]){0, 2, 3}, 3);
  kt_release_all(outs, 2);
  attrs[0] = kt_attr_int("axis", -1);
  CHECK_OK(topk(x, 3, attrs, 2, outs));
  kt_check_values(outs[0], (double[]){1, 1, 2}, 3, 0);
  check_ints(outs[1], (int64_t[]){1, 4, 3}, 3);
  kt_release_all(outs, 2);
  stax_tensor_release(x);
  /* NaN sorts above everything; -0 ties with +0. */
  x = kt_make(STAX_DTYPE_FLOAT64, 1, (int64_t[]){5}, (double[]){-0.0, NAN, INFINITY, 0.0, -INFINITY});
  CHECK_OK(topk(x, 5, NULL, 0, outs));
  check_ints(outs[1], (int64_t[]){1, 2, 0, 3, 4}, 5);
  kt_release_all(outs, 2);
  stax_tensor_release(x);
  /* int64 beyond 2^53 and uint64 above 2^63 keep their exact order. */
  int64_t big[3] = {((int64_t)1 << 60) + 1, ((int64_t)1 << 60) + 2, ((int64_t)1 << 60)};
  x = kt_make_ints(1, (int64_t[]){3}, big);
  CHECK_OK(topk(x, 1, NULL, 0, outs));
  CHECK(outs[0] && kt_get_int(outs[0], 0) == big[1]);
  check_ints(outs[1], (int64_t[]){1}, 1);
  kt_release_all(outs, 2);
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_UINT64, 1, (int64_t[]){3}, NULL);
  uint64_t* u = stax_tensor_data(x);
  u[0] = UINT64_MAX;
  u[1] = 5;
  u[2] = ((uint64_t)1 << 63) + 7;
  CHECK_OK(topk(x, 3, attrs + 1, 1, outs));
  check_ints(outs[1], (int64_t[]){1, 2, 0}, 3);
  kt_release_all(outs, 2);
  stax_tensor_release(x);
  /* k = 0, and preallocated outputs. */
  x = kt_make(STAX_DTYPE_BFLOAT16, 2, (int64_t[]){2, 3}, (double[]){1, 5, 3, 4, 2, 6});
  CHECK_OK(topk(x, 0, NULL, 0, outs));
  CHECK(kt_dims_are(outs[0], 2, (int64_t[]){2, 0}) && kt_dims_are(outs[1], 2, (int64_t[]){2, 0}));
  kt_release_all(outs, 2);
  outs[0] = kt_make(STAX_DTYPE_BFLOAT16, 2, (int64_t[]){2, 1}, NULL);
  outs[1] = kt_make_ints(2, (int64_t[]){2, 1}, NULL);
  CHECK_OK(topk(x, 1, NULL, 0, outs));
  kt_check_values(outs[0], (double[]){5, 6}, 2, 0);
  check_ints(outs[1], (int64_t[]){1, 2}, 2);
  kt_release_all(outs, 2);
  /* Errors. */
  CHECK_ERROR(topk(x, 4, NULL, 0, outs), STAX_OUT_OF_RANGE,
              "k = 4 exceeds input 0 axis 1 of size 3 (valid range [0, 3])");
  CHECK_ERROR(topk(x, -1, NULL, 0, outs), STAX_INVALID_ARGUMENT, "k = -1");
  stax_node_attr_t far = kt_attr_int("axis", 2);
  CHECK_ERROR(topk(x, 1, &far, 1, outs), STAX_INVALID_ARGUMENT, "axis = 2");
  CHECK(outs[0] == NULL && outs[1] == NULL);
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_FLOAT32, 0, NULL, (double[]){1});
  CHECK_ERROR(topk(x, 1, NULL, 0, outs), STAX_INVALID_ARGUMENT, "scalar");
  stax_tensor_release(x);
}

/* ---- Unique ------------------------------------------------------------------------------- */

static void test_unique_flat(void) {
  stax_tensor_t* x = kt_make_strided(STAX_DTYPE_FLOAT32, 1, (int64_t[]){6}, (double[]){2, 1, 1, 3, 4, 3});
  stax_tensor_t* outs[4] = {NULL, NULL, NULL, NULL};
  /* The ONNX examples, unsorted and sorted. */
  stax_node_attr_t unsorted = kt_attr_int("sorted", 0);
  CHECK_OK(kt_run(stax_kernel_Unique, STAX_OP_Unique, &unsorted, 1, &x, 1, outs, 4));
  kt_check_values(outs[0], (double[]){2, 1, 3, 4}, 4, 0);
  check_ints(outs[1], (int64_t[]){0, 1, 3, 4}, 4);
  check_ints(outs[2], (int64_t[]){0, 1, 1, 2, 3, 2}, 6);
  check_ints(outs[3], (int64_t[]){1, 2, 2, 1}, 4);
  kt_release_all(outs, 4);
  CHECK_OK(kt_run(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, outs, 4));
  kt_check_values(outs[0], (double[]){1, 2, 3, 4}, 4, 0);
  check_ints(outs[1], (int64_t[]){1, 0, 3, 4}, 4);
  check_ints(outs[2], (int64_t[]){1, 0, 0, 2, 3, 2}, 6);
  check_ints(outs[3], (int64_t[]){2, 1, 2, 1}, 4);
  kt_release_all(outs, 4);
  stax_tensor_release(x);
  /* A 2-D input is flattened; -0 equals +0 (the first occurrence's bytes are kept); only Y
   * requested. */
  x = kt_make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){2, 2}, (double[]){0.0, -1, -0.0, -1});
  CHECK_OK(kt_run(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, outs, 1));
  CHECK(kt_dims_are(outs[0], 1, (int64_t[]){2}));
  kt_check_values(outs[0], (double[]){-1, 0}, 2, 0);
  CHECK(outs[0] && !signbit(kt_get(outs[0], 1)));
  kt_release_all(outs, 1);
  stax_tensor_release(x);
  /* Signed integers order below zero; an empty input has no unique values. */
  x = kt_make(STAX_DTYPE_INT8, 1, (int64_t[]){4}, (double[]){5, -128, 127, -128});
  CHECK_OK(kt_run(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, outs, 4));
  kt_check_values(outs[0], (double[]){-128, 5, 127}, 3, 0);
  check_ints(outs[3], (int64_t[]){2, 1, 1}, 3);
  kt_release_all(outs, 4);
  stax_tensor_release(x);
  x = kt_make(STAX_DTYPE_INT32, 1, (int64_t[]){0}, NULL);
  CHECK_OK(kt_run(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, outs, 4));
  CHECK(kt_dims_are(outs[0], 1, (int64_t[]){0}) && kt_dims_are(outs[2], 1, (int64_t[]){0}));
  kt_release_all(outs, 4);
  stax_tensor_release(x);
}

static void test_unique_axis(void) {
  /* ONNX example, axis 0. */
  stax_tensor_t* x = kt_make(STAX_DTYPE_INT64, 2, (int64_t[]){3, 3}, (double[]){1, 0, 0, 1, 0, 0, 2, 3, 4});
  stax_tensor_t* outs[4] = {NULL, NULL, NULL, NULL};
  stax_node_attr_t attrs[2] = {kt_attr_int("axis", 0), kt_attr_int("sorted", 1)};
  CHECK_OK(kt_run(stax_kernel_Unique, STAX_OP_Unique, attrs, 2, &x, 1, outs, 4));
  CHECK(kt_dims_are(outs[0], 2, (int64_t[]){2, 3}));
  kt_check_values(outs[0], (double[]){1, 0, 0, 2, 3, 4}, 6, 0);
  check_ints(outs[1], (int64_t[]){0, 2}, 2);
  check_ints(outs[2], (int64_t[]){0, 0, 1}, 3);
  check_ints(outs[3], (int64_t[]){2, 1}, 2);
  kt_release_all(outs, 4);
  stax_tensor_release(x);
  /* ONNX example, axis 1 of a [2, 4, 2] tensor (slices compared element by element). */
  double values[16] = {1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1};
  x = kt_make_strided(STAX_DTYPE_UINT8, 3, (int64_t[]){2, 4, 2}, values);
  attrs[0] = kt_attr_int("axis", -2);
  CHECK_OK(kt_run(stax_kernel_Unique, STAX_OP_Unique, attrs, 2, &x, 1, outs, 4));
  CHECK(kt_dims_are(outs[0], 3, (int64_t[]){2, 3, 2}));
  kt_check_values(outs[0], (double[]){0, 1, 1, 1, 2, 1, 0, 1, 1, 1, 2, 1}, 12, 0);
  check_ints(outs[1], (int64_t[]){1, 0, 2}, 3);
  check_ints(outs[2], (int64_t[]){1, 0, 2, 0}, 4);
  check_ints(outs[3], (int64_t[]){2, 1, 1}, 3);
  kt_release_all(outs, 4);
  /* Unsorted keeps first-occurrence order. */
  attrs[1] = kt_attr_int("sorted", 0);
  CHECK_OK(kt_run(stax_kernel_Unique, STAX_OP_Unique, attrs, 2, &x, 1, outs, 3));
  kt_check_values(outs[0], (double[]){1, 1, 0, 1, 2, 1, 1, 1, 0, 1, 2, 1}, 12, 0);
  check_ints(outs[1], (int64_t[]){0, 1, 2}, 3);
  check_ints(outs[2], (int64_t[]){0, 1, 2, 1}, 4);
  kt_release_all(outs, 3);
  stax_node_attr_t far = kt_attr_int("axis", 3);
  CHECK_ERROR(kt_run(stax_kernel_Unique, STAX_OP_Unique, &far, 1, &x, 1, outs, 4), STAX_INVALID_ARGUMENT,
              "axis = 3");
  CHECK(outs[0] == NULL);
  stax_tensor_release(x);
}

/* ---- Compress ----------------------------------------------------------------------------- */

static void test_compress(void) {
  double values[6] = {1, 2, 3, 4, 5, 6};
  stax_tensor_t* x = kt_make_strided(STAX_DTYPE_FLOAT16, 2, (int64_t[]){3, 2}, values);
  stax_tensor_t* condition = bools(1, (int64_t[]){3}, (double[]){0, 1, 1});
  stax_tensor_t* inputs[2] = {x, condition};
  stax_tensor_t* out = NULL;
  /* The ONNX examples. */
  stax_node_attr_t axis = kt_attr_int("axis", 0);
  CHECK_OK(kt_run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){2, 2}));
  kt_check_values(out, (double[]){3, 4, 5, 6}, 4, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(condition);
  condition = bools(1, (int64_t[]){2}, (double[]){0, 1});
  inputs[1] = condition;
  axis = kt_attr_int("axis", -1);
  CHECK_OK(kt_run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){3, 1}));
  kt_check_values(out, (double[]){2, 4, 6}, 3, 0);
  kt_release_all(&out, 1);
  /* Flattened, with a condition shorter than the input. */
  CHECK_OK(kt_run(stax_kernel_Compress, STAX_OP_Compress, NULL, 0, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 1, (int64_t[]){1}));
  kt_check_values(out, (double[]){2}, 1, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(condition);
  condition = bools(1, (int64_t[]){5}, (double[]){0, 1, 0, 0, 1});
  inputs[1] = condition;
  CHECK_OK(kt_run(stax_kernel_Compress, STAX_OP_Compress, NULL, 0, inputs, 2, &out, 1));
  kt_check_values(out, (double[]){2, 5}, 2, 0);
  kt_release_all(&out, 1);
  /* A longer condition is fine while its extra entries are false... */
  stax_tensor_release(condition);
  condition = bools(1, (int64_t[]){5}, (double[]){1, 0, 1, 0, 0});
  inputs[1] = condition;
  axis = kt_attr_int("axis", 0);
  CHECK_OK(kt_run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1));
  kt_check_values(out, (double[]){1, 2, 5, 6}, 4, 0);
  kt_release_all(&out, 1);
  /* ...and out of range when one is true. */
  stax_tensor_release(condition);
  condition = bools(1, (int64_t[]){5}, (double[]){1, 0, 0, 1, 0});
  inputs[1] = condition;
  CHECK_ERROR(kt_run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1),
              STAX_OUT_OF_RANGE, "entry 3 is true but input 0 has only 3 slices along the axis (valid positions [0, 2])");
  stax_tensor_release(condition);
  condition = bools(2, (int64_t[]){1, 3}, (double[]){1, 1, 1});
  inputs[1] = condition;
  CHECK_ERROR(kt_run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "rank 1");
  stax_tensor_release(condition);
  /* Nothing selected, into a preallocated empty output. */
  condition = bools(1, (int64_t[]){3}, (double[]){0, 0, 0});
  inputs[1] = condition;
  out = kt_make(STAX_DTYPE_FLOAT16, 2, (int64_t[]){0, 2}, NULL);
  CHECK_OK(kt_run(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, &out, 1));
  kt_release_all(&out, 1);
  stax_tensor_release(condition);
  stax_tensor_release(x);
}

static void test_allocation_failures(void) {
  stax_tensor_t* x = kt_make(STAX_DTYPE_INT32, 2, (int64_t[]){3, 4}, (double[]){3, 1, 3, 2, 0, 0, 5, 1, 2, 2, 2, 9});
  stax_tensor_t* k = kt_vec(1, (int64_t[]){2});
  stax_tensor_t* inputs[2] = {x, k};
  kt_check_allocation_failures(stax_kernel_TopK, STAX_OP_TopK, NULL, 0, inputs, 2, 2);
  kt_check_allocation_failures(stax_kernel_Unique, STAX_OP_Unique, NULL, 0, &x, 1, 4);
  stax_node_attr_t axis = kt_attr_int("axis", 1);
  kt_check_allocation_failures(stax_kernel_Unique, STAX_OP_Unique, &axis, 1, &x, 1, 4);
  kt_check_allocation_failures(stax_kernel_NonZero, STAX_OP_NonZero, NULL, 0, &x, 1, 1);
  stax_tensor_t* condition = bools(1, (int64_t[]){4}, (double[]){1, 0, 1, 1});
  inputs[1] = condition;
  kt_check_allocation_failures(stax_kernel_Compress, STAX_OP_Compress, &axis, 1, inputs, 2, 1);
  stax_tensor_t* all[3] = {x, k, condition};
  kt_release_all(all, 3);
}

STAX_TEST_MAIN(STAX_TEST(test_nonzero), STAX_TEST(test_topk), STAX_TEST(test_unique_flat),
               STAX_TEST(test_unique_axis), STAX_TEST(test_compress), STAX_TEST(test_allocation_failures))
