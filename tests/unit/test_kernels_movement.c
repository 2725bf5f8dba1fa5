/* Tests for the data-movement kernels (src/kernels/reshape.c, concat_split.c, slice_pad.c,
 * space_depth.c, control.c): Reshape (0, -1, allowzero), Flatten, Transpose, Squeeze,
 * Unsqueeze, Expand as views and into preallocated outputs, Concat, Split (sizes, attribute,
 * num_outputs with an uneven last part), Slice (negative steps, clamping), Pad in every mode
 * (negative pads, axes, constant_value), Tile, DepthToSpace / SpaceToDepth against ONNX's
 * definition, on several dtypes, strided and reversed inputs, zero-sized dims and scalars,
 * with every error path; and the If/Loop entries. */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* Runs fn(x, vector) with the int64 vector built here and released after. */
static stax_status_t run_vector(stax_kernel_fn fn, stax_op_t op, const stax_node_attr_t* attrs,
                                int32_t attr_count, stax_tensor_t* x, int64_t count,
                                const int64_t* values, stax_tensor_t** out) {
  stax_tensor_t* inputs[2] = {x, kt_vec(count, values)};
  stax_status_t status = kt_run(fn, op, attrs, attr_count, inputs, 2, out, 1);
  stax_tensor_release(inputs[1]);
  return status;
}

/* ---- Reshape ------------------------------------------------------------------------------ */

static void test_reshape_view_and_rules(void) {
  int64_t dims[2] = {2, 3};
  double values[6] = {1, 2, 3, 4, 5, 6};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, dims, values);
  /* -1 is inferred; the result is a view sharing x's buffer. */
  stax_tensor_t* shape = kt_vec(2, (int64_t[]){3, -1});
  stax_tensor_t* inputs[2] = {x, shape};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){3, 2}));
  CHECK(out && stax_tensor_buffer(out) == stax_tensor_buffer(x));
  kt_check_values(out, values, 6, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(shape);
  /* 0 copies the input dim. */
  shape = kt_vec(3, (int64_t[]){0, 3, 1});
  inputs[1] = shape;
  CHECK_OK(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 3, (int64_t[]){2, 3, 1}));
  kt_release_all(&out, 1);
  stax_tensor_release(shape);
  /* To a scalar and back needs one element. */
  shape = kt_vec(0, NULL);
  inputs[1] = shape;
  CHECK_ERROR(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, inputs, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "[2, 3]");
  CHECK(out == NULL);
  stax_tensor_release(shape);
  stax_tensor_release(x);
}

static void test_reshape_allowzero(void) {
  int64_t dims[2] = {0, 4};
  stax_tensor_t* x = kt_make(STAX_DTYPE_INT8, 2, dims, NULL);
  stax_tensor_t* shape = kt_vec(2, (int64_t[]){4, 0});
  stax_tensor_t* inputs[2] = {x, shape};
  stax_tensor_t* out = NULL;
  stax_node_attr_t allow = kt_attr_int("allowzero", 1);
  CHECK_OK(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, &allow, 1, inputs, 2, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){4, 0}));
  kt_release_all(&out, 1);
  /* Without allowzero the 0 copies input dim 1 (4): 16 elements, not 0. */
  CHECK_ERROR(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, inputs, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "[4, 4]");
  stax_tensor_release(shape);
  /* allowzero with -1 next to a 0 cannot be inferred. */
  shape = kt_vec(2, (int64_t[]){0, -1});
  inputs[1] = shape;
  CHECK_ERROR(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, &allow, 1, inputs, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "cannot be inferred");
  stax_tensor_release(shape);
  stax_tensor_release(x);
}

static void test_reshape_errors(void) {
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
  stax_tensor_t* out = NULL;
  CHECK_ERROR(run_vector(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, x, 2, (int64_t[]){4, 2}, &out),
              STAX_SHAPE_MISMATCH, "cannot reshape input 0 [2, 3] (6 elements) to [4, 2]");
  CHECK_ERROR(run_vector(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, x, 3, (int64_t[]){-1, -1, 6}, &out),
              STAX_INVALID_ARGUMENT, "at most one");
  CHECK_ERROR(run_vector(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, x, 2, (int64_t[]){-2, -3}, &out),
              STAX_INVALID_ARGUMENT, "Reshape node 'node0'");
  /* A float shape input and a missing one. */
  stax_tensor_t* shape = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){2}, (double[]){3, 2});
  stax_tensor_t* inputs[2] = {x, shape};
  CHECK_ERROR(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, inputs, 2, &out, 1),
              STAX_DTYPE_MISMATCH, "shape");
  CHECK_ERROR(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, inputs, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "missing");
  stax_tensor_release(shape);
  /* A preallocated output whose dims disagree stays with the caller. */
  out = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
  CHECK_ERROR(run_vector(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, x, 2, (int64_t[]){3, 2}, &out),
              STAX_SHAPE_MISMATCH, "output 0");
  CHECK(out != NULL);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
}

static void test_reshape_non_contiguous_and_preallocated(void) {
  /* A transposed input cannot be viewed as a flat vector: the kernel copies, in the row-major
   * order of the transposed view. */
  int64_t dims[2] = {2, 3};
  double values[6] = {1, 2, 3, 4, 5, 6};
  stax_tensor_t* base = kt_make(STAX_DTYPE_INT32, 2, dims, values);
  stax_tensor_t* xt = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &xt)); /* [3, 2]: 1 4 2 5 3 6 */
  stax_tensor_t* shape = kt_vec(1, (int64_t[]){6});
  stax_tensor_t* inputs[2] = {xt, shape};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, inputs, 2, &out, 1));
  double expected[6] = {1, 4, 2, 5, 3, 6};
  kt_check_values(out, expected, 6, 0);
  CHECK(out && stax_tensor_buffer(out) != stax_tensor_buffer(base));
  kt_release_all(&out, 1);
  /* Into a preallocated output. */
  out = kt_make(STAX_DTYPE_INT32, 1, (int64_t[]){6}, NULL);
  stax_tensor_t* kept = out;
  CHECK_OK(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, inputs, 2, &out, 1));
  CHECK(out == kept);
  kt_check_values(out, expected, 6, 0);
  kt_release_all(&out, 1);
  /* Strided input, every dtype size. */
  stax_dtype_t dtypes[4] = {STAX_DTYPE_BOOL, STAX_DTYPE_FLOAT16, STAX_DTYPE_UINT32, STAX_DTYPE_FLOAT64};
  double bits[6] = {1, 0, 1, 1, 0, 1};
  for (int d = 0; d < 4; d++) {
    stax_tensor_t* strided = kt_make_strided(dtypes[d], 2, dims, bits);
    stax_tensor_t* shape2 = kt_vec(2, (int64_t[]){3, 2});
    stax_tensor_t* in2[2] = {strided, shape2};
    CHECK_OK(kt_run(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, in2, 2, &out, 1));
    kt_check_values(out, bits, 6, 0);
    kt_release_all(&out, 1);
    stax_tensor_release(strided);
    stax_tensor_release(shape2);
  }
  stax_tensor_release(shape);
  stax_tensor_release(xt);
  stax_tensor_release(base);
}

/* ---- Flatten ------------------------------------------------------------------------------ */

static void test_flatten(void) {
  int64_t dims[3] = {2, 3, 4};
  double values[24];
  for (int i = 0; i < 24; i++) values[i] = i;
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 3, dims, values);
  stax_tensor_t* out = NULL;
  struct { int64_t axis; int64_t rows, cols; } cases[] = {{0, 1, 24}, {1, 2, 12}, {2, 6, 4}, {3, 24, 1}, {-1, 6, 4}, {-3, 1, 24}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    stax_node_attr_t axis = kt_attr_int("axis", cases[c].axis);
    CHECK_OK(kt_run(stax_kernel_Flatten, STAX_OP_Flatten, &axis, 1, &x, 1, &out, 1));
    CHECK(kt_dims_are(out, 2, (int64_t[]){cases[c].rows, cases[c].cols}));
    kt_check_values(out, values, 24, 0);
    kt_release_all(&out, 1);
  }
  /* Default axis 1. */
  CHECK_OK(kt_run(stax_kernel_Flatten, STAX_OP_Flatten, NULL, 0, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){2, 12}));
  kt_release_all(&out, 1);
  stax_node_attr_t bad = kt_attr_int("axis", 4);
  CHECK_ERROR(kt_run(stax_kernel_Flatten, STAX_OP_Flatten, &bad, 1, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "axis = 4");
  stax_tensor_release(x);
  /* A scalar flattens to [1, 1]. */
  double seven = 7;
  stax_tensor_t* s = kt_make(STAX_DTYPE_FLOAT64, 0, NULL, &seven);
  stax_node_attr_t zero = kt_attr_int("axis", 0);
  CHECK_OK(kt_run(stax_kernel_Flatten, STAX_OP_Flatten, &zero, 1, &s, 1, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){1, 1}));
  kt_check_values(out, &seven, 1, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(s);
}

/* ---- Transpose ---------------------------------------------------------------------------- */

static void test_transpose(void) {
  int64_t dims[3] = {2, 3, 4};
  double values[24];
  for (int i = 0; i < 24; i++) values[i] = i - 5;
  stax_tensor_t* x = kt_make(STAX_DTYPE_INT8, 3, dims, values);
  stax_tensor_t* out = NULL;
  /* Default: reverse the axes. out[k][j][i] = x[i][j][k]. */
  CHECK_OK(kt_run(stax_kernel_Transpose, STAX_OP_Transpose, NULL, 0, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 3, (int64_t[]){4, 3, 2}));
  double expected[24];
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 3; j++)
      for (int i = 0; i < 2; i++) expected[(k * 3 + j) * 2 + i] = values[(i * 3 + j) * 4 + k];
  kt_check_values(out, expected, 24, 0);
  kt_release_all(&out, 1);
  /* perm [1, 0, 2] into a preallocated output: out[j][i][k] = x[i][j][k]. */
  int64_t perm[3] = {1, 0, 2};
  stax_node_attr_t perm_attr = kt_attr_ints("perm", 3, perm);
  out = kt_make(STAX_DTYPE_INT8, 3, (int64_t[]){3, 2, 4}, NULL);
  CHECK_OK(kt_run(stax_kernel_Transpose, STAX_OP_Transpose, &perm_attr, 1, &x, 1, &out, 1));
  for (int j = 0; j < 3; j++)
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) expected[(j * 2 + i) * 4 + k] = values[(i * 3 + j) * 4 + k];
  kt_check_values(out, expected, 24, 0);
  CHECK(stax_tensor_is_contiguous(out));
  kt_release_all(&out, 1);
  /* Errors. */
  int64_t short_perm[2] = {1, 0};
  stax_node_attr_t bad = kt_attr_ints("perm", 2, short_perm);
  CHECK_ERROR(kt_run(stax_kernel_Transpose, STAX_OP_Transpose, &bad, 1, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "perm has 2 entries");
  int64_t repeat[3] = {0, 0, 1};
  bad = kt_attr_ints("perm", 3, repeat);
  CHECK_ERROR(kt_run(stax_kernel_Transpose, STAX_OP_Transpose, &bad, 1, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "repeats");
  int64_t range[3] = {0, 3, 1};
  bad = kt_attr_ints("perm", 3, range);
  CHECK_ERROR(kt_run(stax_kernel_Transpose, STAX_OP_Transpose, &bad, 1, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "perm[1] = 3");
  stax_tensor_release(x);
}

/* ---- Squeeze / Unsqueeze ------------------------------------------------------------------ */

static void test_squeeze(void) {
  double values[6] = {1, 2, 3, 4, 5, 6};
  stax_tensor_t* x = kt_make(STAX_DTYPE_UINT16, 4, (int64_t[]){1, 3, 1, 2}, values);
  stax_tensor_t* out = NULL;
  /* No axes, or an empty axes input: every size-1 dim. */
  CHECK_OK(kt_run(stax_kernel_Squeeze, STAX_OP_Squeeze, NULL, 0, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){3, 2}));
  kt_check_values(out, values, 6, 0);
  kt_release_all(&out, 1);
  CHECK_OK(run_vector(stax_kernel_Squeeze, STAX_OP_Squeeze, NULL, 0, x, 0, NULL, &out));
  CHECK(kt_dims_are(out, 2, (int64_t[]){3, 2}));
  kt_release_all(&out, 1);
  /* Axes as input (opset 13), negative; as attribute (older opsets). */
  CHECK_OK(run_vector(stax_kernel_Squeeze, STAX_OP_Squeeze, NULL, 0, x, 1, (int64_t[]){-2}, &out));
  CHECK(kt_dims_are(out, 3, (int64_t[]){1, 3, 2}));
  kt_release_all(&out, 1);
  stax_node_attr_t attr = kt_attr_ints("axes", 1, (int64_t[]){0});
  CHECK_OK(kt_run(stax_kernel_Squeeze, STAX_OP_Squeeze, &attr, 1, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 3, (int64_t[]){3, 1, 2}));
  kt_release_all(&out, 1);
  /* Errors: a dim that is not 1, an axis out of range, a repeat. */
  CHECK_ERROR(run_vector(stax_kernel_Squeeze, STAX_OP_Squeeze, NULL, 0, x, 1, (int64_t[]){1}, &out),
              STAX_INVALID_ARGUMENT, "its size is 3");
  CHECK_ERROR(run_vector(stax_kernel_Squeeze, STAX_OP_Squeeze, NULL, 0, x, 1, (int64_t[]){4}, &out),
              STAX_INVALID_ARGUMENT, "axes[0] = 4 is out of range for rank 4");
  CHECK_ERROR(run_vector(stax_kernel_Squeeze, STAX_OP_Squeeze, NULL, 0, x, 2, (int64_t[]){0, -4}, &out),
              STAX_INVALID_ARGUMENT, "repeats");
  /* Into a preallocated output (a copy). */
  out = kt_make(STAX_DTYPE_UINT16, 2, (int64_t[]){3, 2}, NULL);
  CHECK_OK(kt_run(stax_kernel_Squeeze, STAX_OP_Squeeze, NULL, 0, &x, 1, &out, 1));
  CHECK(stax_tensor_buffer(out) != stax_tensor_buffer(x));
  kt_check_values(out, values, 6, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(x);
}

static void test_unsqueeze(void) {
  double values[6] = {6, 5, 4, 3, 2, 1};
  stax_tensor_t* x = kt_make_strided(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, values);
  stax_tensor_t* out = NULL;
  CHECK_OK(run_vector(stax_kernel_Unsqueeze, STAX_OP_Unsqueeze, NULL, 0, x, 2, (int64_t[]){0, -1}, &out));
  CHECK(kt_dims_are(out, 4, (int64_t[]){1, 2, 3, 1}));
  kt_check_values(out, values, 6, 0);
  kt_release_all(&out, 1);
  stax_node_attr_t attr = kt_attr_ints("axes", 1, (int64_t[]){1});
  CHECK_OK(kt_run(stax_kernel_Unsqueeze, STAX_OP_Unsqueeze, &attr, 1, &x, 1, &out, 1));
  CHECK(kt_dims_are(out, 3, (int64_t[]){2, 1, 3}));
  kt_check_values(out, values, 6, 0);
  kt_release_all(&out, 1);
  CHECK_ERROR(kt_run(stax_kernel_Unsqueeze, STAX_OP_Unsqueeze, NULL, 0, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "needs axes");
  CHECK_ERROR(run_vector(stax_kernel_Unsqueeze, STAX_OP_Unsqueeze, NULL, 0, x, 2, (int64_t[]){1, 1}, &out),
              STAX_INVALID_ARGUMENT, "repeats");
  CHECK_ERROR(run_vector(stax_kernel_Unsqueeze, STAX_OP_Unsqueeze, NULL, 0, x, 1, (int64_t[]){3}, &out),
              STAX_INVALID_ARGUMENT, "out of range for rank 3");
  stax_tensor_release(x);
  /* A scalar gains a dim. */
  stax_tensor_t* s = kt_make(STAX_DTYPE_INT64, 0, NULL, (double[]){1});
  CHECK_OK(run_vector(stax_kernel_Unsqueeze, STAX_OP_Unsqueeze, NULL, 0, s, 1, (int64_t[]){0}, &out));
  CHECK(kt_dims_are(out, 1, (int64_t[]){1}));
  kt_release_all(&out, 1);
  stax_tensor_release(s);
}

/* ---- Expand ------------------------------------------------------------------------------- */

static void test_expand(void) {
  double values[3] = {1, 2, 3};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT64, 2, (int64_t[]){3, 1}, values);
  stax_tensor_t* out = NULL;
  CHECK_OK(run_vector(stax_kernel_Expand, STAX_OP_Expand, NULL, 0, x, 3, (int64_t[]){2, 1, 4}, &out));
  CHECK(kt_dims_are(out, 3, (int64_t[]){2, 3, 4}));
  double expected[24];
  for (int i = 0; i < 24; i++) expected[i] = values[(i / 4) % 3];
  kt_check_values(out, expected, 24, 0);
  CHECK(out && stax_tensor_buffer(out) == stax_tensor_buffer(x));
  kt_release_all(&out, 1);
  /* Preallocated: copied. */
  out = kt_make(STAX_DTYPE_FLOAT64, 3, (int64_t[]){2, 3, 4}, NULL);
  CHECK_OK(run_vector(stax_kernel_Expand, STAX_OP_Expand, NULL, 0, x, 3, (int64_t[]){2, 1, 4}, &out));
  kt_check_values(out, expected, 24, 0);
  kt_release_all(&out, 1);
  /* A shape shorter than the input keeps the input's dims. */
  CHECK_OK(run_vector(stax_kernel_Expand, STAX_OP_Expand, NULL, 0, x, 1, (int64_t[]){5}, &out));
  CHECK(kt_dims_are(out, 2, (int64_t[]){3, 5}));
  kt_release_all(&out, 1);
  CHECK_ERROR(run_vector(stax_kernel_Expand, STAX_OP_Expand, NULL, 0, x, 2, (int64_t[]){2, 4}, &out),
              STAX_SHAPE_MISMATCH, "does not broadcast");
  CHECK_ERROR(run_vector(stax_kernel_Expand, STAX_OP_Expand, NULL, 0, x, 2, (int64_t[]){-1, 4}, &out),
              STAX_INVALID_ARGUMENT, ">= 0");
  CHECK_ERROR(run_vector(stax_kernel_Expand, STAX_OP_Expand, NULL, 0, x, 2, (int64_t[]){0, 1}, &out),
              STAX_SHAPE_MISMATCH, "does not broadcast");
  stax_tensor_release(x);
}

/* ---- Concat ------------------------------------------------------------------------------- */

static void test_concat(void) {
  /* Three int16 inputs along axis 1: [2, 1], [2, 0] (empty), and a strided [2, 3]. */
  double a_values[2] = {1, 2};
  double c_values[6] = {10, 11, 12, 20, 21, 22};
  stax_tensor_t* a = kt_make(STAX_DTYPE_INT16, 2, (int64_t[]){2, 1}, a_values);
  stax_tensor_t* b = kt_make(STAX_DTYPE_INT16, 2, (int64_t[]){2, 0}, NULL);
  stax_tensor_t* c = kt_make_strided(STAX_DTYPE_INT16, 2, (int64_t[]){2, 3}, c_values);
  stax_tensor_t* inputs[3] = {a, b, c};
  stax_tensor_t* out = NULL;
  stax_node_attr_t axis = kt_attr_int("axis", -1);
  CHECK_OK(kt_run(stax_kernel_Concat, STAX_OP_Concat, &axis, 1, inputs, 3, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){2, 4}));
  double expected[8] = {1, 10, 11, 12, 2, 20, 21, 22};
  kt_check_values(out, expected, 8, 0);
  kt_release_all(&out, 1);
  /* Along axis 0 with a reversed input, into a preallocated output. */
  stax_tensor_t* r = kt_make_reversed(STAX_DTYPE_INT16, 2, (int64_t[]){2, 3}, c_values);
  stax_tensor_t* pair[2] = {c, r};
  axis = kt_attr_int("axis", 0);
  out = kt_make(STAX_DTYPE_INT16, 2, (int64_t[]){4, 3}, NULL);
  CHECK_OK(kt_run(stax_kernel_Concat, STAX_OP_Concat, &axis, 1, pair, 2, &out, 1));
  double expected0[12] = {10, 11, 12, 20, 21, 22, 10, 11, 12, 20, 21, 22};
  kt_check_values(out, expected0, 12, 0);
  kt_release_all(&out, 1);
  /* A single input is a copy. */
  CHECK_OK(kt_run(stax_kernel_Concat, STAX_OP_Concat, &axis, 1, &c, 1, &out, 1));
  kt_check_values(out, c_values, 6, 0);
  kt_release_all(&out, 1);
  /* Errors. */
  CHECK_ERROR(kt_run(stax_kernel_Concat, STAX_OP_Concat, &axis, 1, inputs, 3, &out, 1),
              STAX_SHAPE_MISMATCH, "input 1 [2, 0] differs from input 0 [2, 1] in dim 1");
  stax_tensor_t* f = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 1}, NULL);
  stax_tensor_t* mixed[2] = {a, f};
  CHECK_ERROR(kt_run(stax_kernel_Concat, STAX_OP_Concat, &axis, 1, mixed, 2, &out, 1),
              STAX_DTYPE_MISMATCH, "input 1 is float32");
  CHECK_ERROR(kt_run(stax_kernel_Concat, STAX_OP_Concat, NULL, 0, mixed, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "'axis' is missing");
  stax_node_attr_t far = kt_attr_int("axis", 2);
  CHECK_ERROR(kt_run(stax_kernel_Concat, STAX_OP_Concat, &far, 1, inputs, 3, &out, 1),
              STAX_INVALID_ARGUMENT, "axis = 2 is out of range");
  double one = 1;
  stax_tensor_t* s = kt_make(STAX_DTYPE_INT16, 0, NULL, &one);
  stax_tensor_t* scalars[2] = {s, s};
  CHECK_ERROR(kt_run(stax_kernel_Concat, STAX_OP_Concat, &axis, 1, scalars, 2, &out, 1),
              STAX_INVALID_ARGUMENT, "scalar");
  CHECK(out == NULL);
  stax_tensor_t* r3 = kt_make(STAX_DTYPE_INT16, 3, (int64_t[]){2, 1, 1}, NULL);
  stax_tensor_t* ranks[2] = {a, r3};
  CHECK_ERROR(kt_run(stax_kernel_Concat, STAX_OP_Concat, &axis, 1, ranks, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "rank 3");
  stax_tensor_t* everything[6] = {a, b, c, r, f, s};
  kt_release_all(everything, 6);
  stax_tensor_release(r3);
}

/* ---- Split -------------------------------------------------------------------------------- */

static void test_split(void) {
  double values[14];
  for (int i = 0; i < 14; i++) values[i] = i + 1;
  /* [2, 7] bool-like data as uint8 along axis 1 with num_outputs = 3: 3, 3, 1. */
  stax_tensor_t* x = kt_make(STAX_DTYPE_UINT8, 2, (int64_t[]){2, 7}, values);
  stax_tensor_t* outs[3] = {NULL, NULL, NULL};
  stax_node_attr_t attrs[2] = {kt_attr_int("axis", 1), kt_attr_int("num_outputs", 3)};
  CHECK_OK(kt_run(stax_kernel_Split, STAX_OP_Split, attrs, 2, &x, 1, outs, 3));
  CHECK(kt_dims_are(outs[0], 2, (int64_t[]){2, 3}));
  CHECK(kt_dims_are(outs[1], 2, (int64_t[]){2, 3}));
  CHECK(kt_dims_are(outs[2], 2, (int64_t[]){2, 1}));
  kt_check_values(outs[0], (double[]){1, 2, 3, 8, 9, 10}, 6, 0);
  kt_check_values(outs[1], (double[]){4, 5, 6, 11, 12, 13}, 6, 0);
  kt_check_values(outs[2], (double[]){7, 14}, 2, 0);
  kt_release_all(outs, 3);
  /* Split sizes as input 1, including an empty piece, one output preallocated. */
  stax_tensor_t* sizes = kt_vec(3, (int64_t[]){5, 0, 2});
  stax_tensor_t* inputs[2] = {x, sizes};
  outs[2] = kt_make(STAX_DTYPE_UINT8, 2, (int64_t[]){2, 2}, NULL);
  stax_tensor_t* kept = outs[2];
  CHECK_OK(kt_run(stax_kernel_Split, STAX_OP_Split, attrs, 1, inputs, 2, outs, 3));
  CHECK(kt_dims_are(outs[0], 2, (int64_t[]){2, 5}));
  CHECK(kt_dims_are(outs[1], 2, (int64_t[]){2, 0}));
  CHECK(outs[2] == kept);
  kt_check_values(outs[2], (double[]){6, 7, 13, 14}, 4, 0);
  kt_release_all(outs, 3);
  /* Split sizes as attribute on axis 0 of a strided input. */
  stax_tensor_t* strided = kt_make_strided(STAX_DTYPE_FLOAT16, 2, (int64_t[]){2, 7}, values);
  int64_t split[2] = {1, 1};
  stax_node_attr_t split_attr = kt_attr_ints("split", 2, split);
  CHECK_OK(kt_run(stax_kernel_Split, STAX_OP_Split, &split_attr, 1, &strided, 1, outs, 2));
  kt_check_values(outs[0], values, 7, 0);
  kt_check_values(outs[1], values + 7, 7, 0);
  kt_release_all(outs, 2);
  /* No sizes and no num_outputs: equal parts, which must divide evenly. */
  CHECK_OK(kt_run(stax_kernel_Split, STAX_OP_Split, NULL, 0, &strided, 1, outs, 2));
  CHECK(kt_dims_are(outs[0], 2, (int64_t[]){1, 7}));
  kt_release_all(outs, 2);
  CHECK_ERROR(kt_run(stax_kernel_Split, STAX_OP_Split, attrs, 1, &x, 1, outs, 2),
              STAX_SHAPE_MISMATCH, "cannot be split into 2 equal parts");
  CHECK(outs[0] == NULL && outs[1] == NULL);
  /* Errors on the sizes. */
  stax_tensor_release(sizes);
  sizes = kt_vec(2, (int64_t[]){3, 3});
  inputs[1] = sizes;
  CHECK_ERROR(kt_run(stax_kernel_Split, STAX_OP_Split, attrs, 1, inputs, 2, outs, 2),
              STAX_SHAPE_MISMATCH, "sum to 6 but input 0 dim 1 is 7");
  CHECK_ERROR(kt_run(stax_kernel_Split, STAX_OP_Split, attrs, 1, inputs, 2, outs, 3),
              STAX_INVALID_ARGUMENT, "2 entries but the node has 3 outputs");
  stax_tensor_release(sizes);
  sizes = kt_vec(2, (int64_t[]){8, -1});
  inputs[1] = sizes;
  CHECK_ERROR(kt_run(stax_kernel_Split, STAX_OP_Split, attrs, 1, inputs, 2, outs, 2),
              STAX_INVALID_ARGUMENT, "split[1] is -1");
  stax_node_attr_t wrong[2] = {kt_attr_int("axis", 1), kt_attr_int("num_outputs", 5)};
  CHECK_ERROR(kt_run(stax_kernel_Split, STAX_OP_Split, wrong, 2, &x, 1, outs, 3),
              STAX_INVALID_ARGUMENT, "num_outputs");
  /* 5 outputs of ceil(7/5) = 2 leave -1 for the last. */
  stax_tensor_t* five[5] = {NULL, NULL, NULL, NULL, NULL};
  CHECK_ERROR(kt_run(stax_kernel_Split, STAX_OP_Split, wrong, 2, &x, 1, five, 5),
              STAX_SHAPE_MISMATCH, "cannot be split into 5 parts");
  CHECK(five[0] == NULL && five[4] == NULL);
  /* 4 outputs: 2, 2, 2 and a last part of 1. */
  stax_node_attr_t four[2] = {kt_attr_int("axis", 1), kt_attr_int("num_outputs", 4)};
  CHECK_OK(kt_run(stax_kernel_Split, STAX_OP_Split, four, 2, &x, 1, five, 4));
  CHECK(kt_dims_are(five[3], 2, (int64_t[]){2, 1}));
  kt_check_values(five[3], (double[]){7, 14}, 2, 0);
  kt_release_all(five, 4);
  stax_tensor_release(sizes);
  stax_tensor_release(strided);
  stax_tensor_release(x);
}

/* ---- Slice -------------------------------------------------------------------------------- */

static void test_slice(void) {
  double values[20];
  for (int i = 0; i < 20; i++) values[i] = i;
  stax_tensor_t* x = kt_make(STAX_DTYPE_INT32, 2, (int64_t[]){4, 5}, values);
  /* x[1:3, ::-2]: rows 1, 2; columns 4, 2, 0. */
  stax_tensor_t* starts = kt_vec(2, (int64_t[]){1, -1});
  stax_tensor_t* ends = kt_vec(2, (int64_t[]){3, INT64_MIN});
  stax_tensor_t* axes = kt_vec(2, (int64_t[]){0, 1});
  stax_tensor_t* steps = kt_vec(2, (int64_t[]){1, -2});
  stax_tensor_t* inputs[5] = {x, starts, ends, axes, steps};
  stax_tensor_t* out = NULL;
  CHECK_OK(kt_run(stax_kernel_Slice, STAX_OP_Slice, NULL, 0, inputs, 5, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){2, 3}));
  kt_check_values(out, (double[]){9, 7, 5, 14, 12, 10}, 6, 0);
  CHECK(out && stax_tensor_buffer(out) == stax_tensor_buffer(x));
  kt_release_all(&out, 1);
  /* The same into a preallocated output. */
  out = kt_make(STAX_DTYPE_INT32, 2, (int64_t[]){2, 3}, NULL);
  CHECK_OK(kt_run(stax_kernel_Slice, STAX_OP_Slice, NULL, 0, inputs, 5, &out, 1));
  kt_check_values(out, (double[]){9, 7, 5, 14, 12, 10}, 6, 0);
  CHECK(stax_tensor_buffer(out) != stax_tensor_buffer(x));
  kt_release_all(&out, 1);
  stax_tensor_t* slice_inputs[9] = {starts, ends, axes, steps};
  kt_release_all(slice_inputs, 4);
  /* Steps at the ends of int64 (a hostile file's): INT64_MIN has no magnitude, INT64_MAX
   * overflows a naive ceil; each takes one element. x[3::INT64_MIN, 1::INT64_MAX]. */
  {
    stax_tensor_t* hs = kt_vec(2, (int64_t[]){3, 1});
    stax_tensor_t* he = kt_vec(2, (int64_t[]){INT64_MIN, INT64_MAX});
    stax_tensor_t* ha = kt_vec(2, (int64_t[]){0, 1});
    stax_tensor_t* hst = kt_vec(2, (int64_t[]){INT64_MIN, INT64_MAX});
    stax_tensor_t* hostile[5] = {x, hs, he, ha, hst};
    CHECK_OK(kt_run(stax_kernel_Slice, STAX_OP_Slice, NULL, 0, hostile, 5, &out, 1));
    CHECK(kt_dims_are(out, 2, (int64_t[]){1, 1}));
    kt_check_values(out, (double[]){16}, 1, 0);
    kt_release_all(&out, 1);
    stax_tensor_t* hostile_params[4] = {hs, he, ha, hst};
    kt_release_all(hostile_params, 4);
  }
  /* Clamping: ends past the dim, negative axis, no steps; then an empty slice. */
  starts = kt_vec(1, (int64_t[]){-100});
  ends = kt_vec(1, (int64_t[]){INT64_MAX});
  axes = kt_vec(1, (int64_t[]){-1});
  stax_tensor_t* in4[4] = {x, starts, ends, axes};
  CHECK_OK(kt_run(stax_kernel_Slice, STAX_OP_Slice, NULL, 0, in4, 4, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){4, 5}));
  kt_check_values(out, values, 20, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(starts);
  starts = kt_vec(1, (int64_t[]){3});
  in4[1] = starts;
  stax_tensor_release(ends);
  ends = kt_vec(1, (int64_t[]){2});
  in4[2] = ends;
  CHECK_OK(kt_run(stax_kernel_Slice, STAX_OP_Slice, NULL, 0, in4, 4, &out, 1));
  CHECK(kt_dims_are(out, 2, (int64_t[]){4, 0}));
  kt_release_all(&out, 1);
  /* Errors: step 0, repeated axis, axis out of range, length mismatches. */
  steps = kt_vec(1, (int64_t[]){0});
  stax_tensor_t* in5[5] = {x, starts, ends, axes, steps};
  CHECK_ERROR(kt_run(stax_kernel_Slice, STAX_OP_Slice, NULL, 0, in5, 5, &out, 1),
              STAX_INVALID_ARGUMENT, "steps[0] (axis 1) is 0");
  stax_tensor_release(axes);
  axes = kt_vec(1, (int64_t[]){2});
  in4[3] = axes;
  CHECK_ERROR(kt_run(stax_kernel_Slice, STAX_OP_Slice, NULL, 0, in4, 4, &out, 1),
              STAX_INVALID_ARGUMENT, "axes[0] = 2 is out of range for rank 2");
  stax_tensor_t* two = kt_vec(2, (int64_t[]){0, 0});
  stax_tensor_t* repeated = kt_vec(2, (int64_t[]){1, -1});
  stax_tensor_t* in_repeat[4] = {x, two, two, repeated};
  CHECK_ERROR(kt_run(stax_kernel_Slice, STAX_OP_Slice, NULL, 0, in_repeat, 4, &out, 1),
              STAX_INVALID_ARGUMENT, "repeats axis 1");
  stax_tensor_t* in_mismatch[3] = {x, two, ends};
  CHECK_ERROR(kt_run(stax_kernel_Slice, STAX_OP_Slice, NULL, 0, in_mismatch, 3, &out, 1),
              STAX_INVALID_ARGUMENT, "starts has 2 entries but ends has 1");
  CHECK(out == NULL);
  stax_tensor_t* rest[6] = {starts, ends, axes, steps, two, repeated};
  kt_release_all(rest, 6);
  stax_tensor_release(x);
}

/* ---- Pad ---------------------------------------------------------------------------------- */

static stax_status_t pad(stax_tensor_t* x, const char* mode, int64_t pad_count, const int64_t* pads,
                         stax_tensor_t* value, stax_tensor_t* axes, stax_tensor_t** out) {
  stax_tensor_t* p = kt_vec(pad_count, pads);
  stax_tensor_t* inputs[4] = {x, p, value, axes};
  stax_node_attr_t attr = kt_attr_string("mode", mode);
  stax_status_t status = kt_run(stax_kernel_Pad, STAX_OP_Pad, &attr, mode ? 1 : 0, inputs,
                             axes ? 4 : (value ? 3 : 2), out, 1);
  stax_tensor_release(p);
  return status;
}

static void test_pad_modes_1d(void) {
  double values[3] = {1, 2, 3};
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){3}, values);
  stax_tensor_t* out = NULL;
  int64_t pads[2] = {2, 2};
  /* numpy.pad results, written out. */
  CHECK_OK(pad(x, "constant", 2, pads, NULL, NULL, &out));
  kt_check_values(out, (double[]){0, 0, 1, 2, 3, 0, 0}, 7, 0);
  kt_release_all(&out, 1);
  CHECK_OK(pad(x, NULL, 2, pads, NULL, NULL, &out)); /* constant is the default */
  kt_check_values(out, (double[]){0, 0, 1, 2, 3, 0, 0}, 7, 0);
  kt_release_all(&out, 1);
  CHECK_OK(pad(x, "reflect", 2, pads, NULL, NULL, &out));
  kt_check_values(out, (double[]){3, 2, 1, 2, 3, 2, 1}, 7, 0);
  kt_release_all(&out, 1);
  CHECK_OK(pad(x, "edge", 2, pads, NULL, NULL, &out));
  kt_check_values(out, (double[]){1, 1, 1, 2, 3, 3, 3}, 7, 0);
  kt_release_all(&out, 1);
  CHECK_OK(pad(x, "wrap", 2, pads, NULL, NULL, &out));
  kt_check_values(out, (double[]){2, 3, 1, 2, 3, 1, 2}, 7, 0);
  kt_release_all(&out, 1);
  /* Pads longer than the dim keep reflecting / wrapping. */
  int64_t long_pads[2] = {5, 0};
  CHECK_OK(pad(x, "reflect", 2, long_pads, NULL, NULL, &out));
  kt_check_values(out, (double[]){2, 1, 2, 3, 2, 1, 2, 3}, 8, 0);
  kt_release_all(&out, 1);
  CHECK_OK(pad(x, "wrap", 2, long_pads, NULL, NULL, &out));
  kt_check_values(out, (double[]){2, 3, 1, 2, 3, 1, 2, 3}, 8, 0);
  kt_release_all(&out, 1);
  /* A constant value, and negative pads that crop. */
  double nine = 9.5;
  stax_tensor_t* value = kt_make(STAX_DTYPE_FLOAT32, 0, NULL, &nine);
  int64_t crop[2] = {-1, 2};
  CHECK_OK(pad(x, "constant", 2, crop, value, NULL, &out));
  kt_check_values(out, (double[]){2, 3, 9.5, 9.5}, 4, 0);
  kt_release_all(&out, 1);
  int64_t all_crop[2] = {-2, -1};
  CHECK_OK(pad(x, "reflect", 2, all_crop, NULL, NULL, &out));
  CHECK(kt_dims_are(out, 1, (int64_t[]){0}));
  kt_release_all(&out, 1);
  stax_tensor_release(value);
  stax_tensor_release(x);
}

static void test_pad_2d_axes_and_dtypes(void) {
  double values[4] = {1, 2, 3, 4};
  /* reflect by 1 on both axes of [[1, 2], [3, 4]], from a strided input. */
  stax_tensor_t* x = kt_make_strided(STAX_DTYPE_UINT8, 2, (int64_t[]){2, 2}, values);
  stax_tensor_t* out = NULL;
  int64_t pads[4] = {1, 1, 1, 1};
  CHECK_OK(pad(x, "reflect", 4, pads, NULL, NULL, &out));
  kt_check_values(out, (double[]){4, 3, 4, 3, 2, 1, 2, 1, 4, 3, 4, 3, 2, 1, 2, 1}, 16, 0);
  kt_release_all(&out, 1);
  /* axes input (opset 18): only axis -1, edge mode, float16 data. */
  stax_tensor_t* h = kt_make(STAX_DTYPE_FLOAT16, 2, (int64_t[]){2, 2}, values);
  stax_tensor_t* axes = kt_vec(1, (int64_t[]){-1});
  int64_t axis_pads[2] = {0, 2};
  CHECK_OK(pad(h, "edge", 2, axis_pads, NULL, axes, &out));
  CHECK(kt_dims_are(out, 2, (int64_t[]){2, 4}));
  kt_check_values(out, (double[]){1, 2, 2, 2, 3, 4, 4, 4}, 8, 0);
  kt_release_all(&out, 1);
  /* Constant int64 padding with a value, into a preallocated output. */
  stax_tensor_t* l = kt_make(STAX_DTYPE_INT64, 2, (int64_t[]){2, 2}, values);
  stax_tensor_t* value = kt_make_ints(0, NULL, (int64_t[]){-7});
  int64_t rows[4] = {1, 0, 0, 0};
  out = kt_make(STAX_DTYPE_INT64, 2, (int64_t[]){3, 2}, NULL);
  CHECK_OK(pad(l, "constant", 4, rows, value, NULL, &out));
  kt_check_values(out, (double[]){-7, -7, 1, 2, 3, 4}, 6, 0);
  kt_release_all(&out, 1);
  /* A scalar with no pads is a copy. */
  double five = 5;
  stax_tensor_t* s = kt_make(STAX_DTYPE_FLOAT64, 0, NULL, &five);
  CHECK_OK(pad(s, "constant", 0, NULL, NULL, NULL, &out));
  CHECK(kt_dims_are(out, 0, NULL));
  kt_check_values(out, &five, 1, 0);
  kt_release_all(&out, 1);
  /* Errors. */
  CHECK_ERROR(pad(x, "mirror", 4, pads, NULL, NULL, &out), STAX_INVALID_ARGUMENT, "mirror");
  CHECK_ERROR(pad(x, "constant", 2, pads, NULL, NULL, &out), STAX_INVALID_ARGUMENT,
              "pads has 2 entries; 2 padded axes need 4");
  int64_t too_negative[4] = {-2, 0, -1, 0};
  CHECK_ERROR(pad(x, "constant", 4, too_negative, NULL, NULL, &out), STAX_SHAPE_MISMATCH,
              "negative");
  stax_tensor_t* empty = kt_make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){0, 2}, NULL);
  CHECK_ERROR(pad(empty, "reflect", 4, pads, NULL, NULL, &out), STAX_INVALID_ARGUMENT,
              "cannot pad axis 0 of size 0");
  CHECK_OK(pad(empty, "constant", 4, pads, NULL, NULL, &out));
  kt_check_values(out, (double[]){0, 0, 0, 0, 0, 0, 0, 0}, 8, 0);
  kt_release_all(&out, 1);
  stax_tensor_t* bad_axes = kt_vec(2, (int64_t[]){0, 0});
  CHECK_ERROR(pad(x, "constant", 4, pads, NULL, bad_axes, &out), STAX_INVALID_ARGUMENT, "repeats");
  CHECK(out == NULL);
  stax_tensor_t* all[8] = {x, h, axes, l, value, s, empty, bad_axes};
  kt_release_all(all, 8);
}

/* ---- Tile --------------------------------------------------------------------------------- */

static void test_tile(void) {
  double values[6] = {1, 2, 3, 4, 5, 6};
  stax_tensor_t* x = kt_make_reversed(STAX_DTYPE_BFLOAT16, 2, (int64_t[]){2, 3}, values);
  stax_tensor_t* out = NULL;
  CHECK_OK(run_vector(stax_kernel_Tile, STAX_OP_Tile, NULL, 0, x, 2, (int64_t[]){2, 2}, &out));
  CHECK(kt_dims_are(out, 2, (int64_t[]){4, 6}));
  double expected[24];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) expected[i * 6 + j] = values[(i % 2) * 3 + j % 3];
  kt_check_values(out, expected, 24, 0);
  kt_release_all(&out, 1);
  CHECK_OK(run_vector(stax_kernel_Tile, STAX_OP_Tile, NULL, 0, x, 2, (int64_t[]){0, 3}, &out));
  CHECK(kt_dims_are(out, 2, (int64_t[]){0, 9}));
  kt_release_all(&out, 1);
  CHECK_ERROR(run_vector(stax_kernel_Tile, STAX_OP_Tile, NULL, 0, x, 2, (int64_t[]){1, -1}, &out),
              STAX_INVALID_ARGUMENT, "repeats[1] is -1");
  CHECK_ERROR(run_vector(stax_kernel_Tile, STAX_OP_Tile, NULL, 0, x, 1, (int64_t[]){2}, &out),
              STAX_INVALID_ARGUMENT, "repeats has 1 entries but input 0 has rank 2");
  stax_tensor_release(x);
  /* Scalar: no repeats. */
  stax_tensor_t* s = kt_make(STAX_DTYPE_INT32, 0, NULL, (double[]){2});
  CHECK_OK(run_vector(stax_kernel_Tile, STAX_OP_Tile, NULL, 0, s, 0, NULL, &out));
  kt_check_values(out, (double[]){2}, 1, 0);
  kt_release_all(&out, 1);
  stax_tensor_release(s);
}

/* ---- DepthToSpace / SpaceToDepth ---------------------------------------------------------- */

static void test_depth_space(void) {
  /* x [N=2, C=8, H=2, W=3], b = 2. */
  enum { N = 2, C = 8, H = 2, W = 3, B = 2 };
  double values[N * C * H * W];
  for (int i = 0; i < N * C * H * W; i++) values[i] = i;
  stax_tensor_t* x = kt_make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){N, C, H, W}, values);
  stax_tensor_t* out = NULL;
  const int Cp = C / (B * B);
  double expected[N * C * H * W];
  const char* modes[2] = {"DCR", "CRD"};
  for (int m = 0; m < 2; m++) {
    stax_node_attr_t attrs[2] = {kt_attr_int("blocksize", B), kt_attr_string("mode", modes[m])};
    CHECK_OK(kt_run(stax_kernel_DepthToSpace, STAX_OP_DepthToSpace, attrs, 2, &x, 1, &out, 1));
    CHECK(kt_dims_are(out, 4, (int64_t[]){N, Cp, H * B, W * B}));
    /* ONNX's definition: output (n, c, h*B + i, w*B + j) reads channel
     * DCR: (i*B + j)*C' + c, CRD: c*B*B + i*B + j. */
    for (int n = 0; n < N; n++)
      for (int c = 0; c < Cp; c++)
        for (int y = 0; y < H * B; y++)
          for (int z = 0; z < W * B; z++) {
            int i = y % B, j = z % B, h = y / B, w = z / B;
            int channel = m == 0 ? (i * B + j) * Cp + c : c * B * B + i * B + j;
            expected[((n * Cp + c) * H * B + y) * W * B + z] = values[((n * C + channel) * H + h) * W + w];
          }
    kt_check_values(out, expected, N * C * H * W, 0);
    /* SpaceToDepth inverts DCR. */
    if (m == 0) {
      stax_tensor_t* back = NULL;
      CHECK_OK(kt_run(stax_kernel_SpaceToDepth, STAX_OP_SpaceToDepth, attrs, 1, &out, 1, &back, 1));
      CHECK(kt_dims_are(back, 4, (int64_t[]){N, C, H, W}));
      kt_check_values(back, values, N * C * H * W, 0);
      kt_release_all(&back, 1);
    }
    kt_release_all(&out, 1);
  }
  /* SpaceToDepth of a strided input into a preallocated output. */
  double small[16];
  for (int i = 0; i < 16; i++) small[i] = i;
  stax_tensor_t* y = kt_make_strided(STAX_DTYPE_INT64, 4, (int64_t[]){1, 1, 4, 4}, small);
  stax_node_attr_t blocks = kt_attr_int("blocksize", 2);
  out = kt_make(STAX_DTYPE_INT64, 4, (int64_t[]){1, 4, 2, 2}, NULL);
  CHECK_OK(kt_run(stax_kernel_SpaceToDepth, STAX_OP_SpaceToDepth, &blocks, 1, &y, 1, &out, 1));
  /* Output channel i*2 + j holds x[h*2 + i][w*2 + j]. */
  double s2d[16];
  for (int ch = 0; ch < 4; ch++)
    for (int h = 0; h < 2; h++)
      for (int w = 0; w < 2; w++) s2d[(ch * 2 + h) * 2 + w] = small[(h * 2 + ch / 2) * 4 + w * 2 + ch % 2];
  kt_check_values(out, s2d, 16, 0);
  kt_release_all(&out, 1);
  /* Errors. */
  stax_node_attr_t three = kt_attr_int("blocksize", 3);
  CHECK_ERROR(kt_run(stax_kernel_DepthToSpace, STAX_OP_DepthToSpace, &three, 1, &x, 1, &out, 1),
              STAX_SHAPE_MISMATCH, "8 channels");
  CHECK_ERROR(kt_run(stax_kernel_SpaceToDepth, STAX_OP_SpaceToDepth, &three, 1, &x, 1, &out, 1),
              STAX_SHAPE_MISMATCH, "not multiples of blocksize 3");
  CHECK_ERROR(kt_run(stax_kernel_DepthToSpace, STAX_OP_DepthToSpace, NULL, 0, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "blocksize");
  stax_node_attr_t bad_mode[2] = {kt_attr_int("blocksize", 2), kt_attr_string("mode", "XYZ")};
  CHECK_ERROR(kt_run(stax_kernel_DepthToSpace, STAX_OP_DepthToSpace, bad_mode, 2, &x, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "DCR or CRD");
  stax_tensor_t* r3 = kt_make(STAX_DTYPE_FLOAT32, 3, (int64_t[]){4, 2, 2}, NULL);
  CHECK_ERROR(kt_run(stax_kernel_SpaceToDepth, STAX_OP_SpaceToDepth, &blocks, 1, &r3, 1, &out, 1),
              STAX_INVALID_ARGUMENT, "rank 4");
  CHECK(out == NULL);
  stax_tensor_release(r3);
  stax_tensor_release(y);
  stax_tensor_release(x);
}

/* ---- the parallel paths ------------------------------------------------------------------ */

static void test_parallel_pad_and_tile(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 4, &pool));
  kt_test_pool = pool;
  enum { R = 301, C = 257 };
  static double values[R * C];
  for (int i = 0; i < R * C; i++) values[i] = (i * 7919) % 1000;
  stax_tensor_t* x = kt_make_strided(STAX_DTYPE_FLOAT32, 2, (int64_t[]){R, C}, values);
  stax_tensor_t* out = NULL;
  int64_t pads[4] = {3, -2, 5, 4};
  CHECK_OK(pad(x, "wrap", 4, pads, NULL, NULL, &out));
  CHECK(kt_dims_are(out, 2, (int64_t[]){R + 8, C + 2}));
  bool all_equal = true;
  for (int64_t i = 0; out && i < R + 8; i++)
    for (int64_t j = 0; j < C + 2; j++) {
      int64_t si = ((i - 3) % R + R) % R, sj = ((j + 2) % C + C) % C;
      all_equal = all_equal && kt_get(out, i * (C + 2) + j) == values[si * C + sj];
    }
  CHECK(all_equal);
  kt_release_all(&out, 1);
  stax_tensor_t* repeats = kt_vec(2, (int64_t[]){2, 3});
  stax_tensor_t* inputs[2] = {x, repeats};
  CHECK_OK(kt_run(stax_kernel_Tile, STAX_OP_Tile, NULL, 0, inputs, 2, &out, 1));
  all_equal = true;
  for (int64_t i = 0; out && i < 2 * R; i++)
    for (int64_t j = 0; j < 3 * C; j++)
      all_equal = all_equal && kt_get(out, i * 3 * C + j) == values[(i % R) * C + j % C];
  CHECK(all_equal);
  kt_release_all(&out, 1);
  stax_tensor_release(repeats);
  stax_tensor_release(x);
  kt_test_pool = NULL;
  stax_threadpool_destroy(pool);
}

/* ---- registry and control ----------------------------------------------------------------- */

static void test_registry(void) {
  CHECK(stax_kernel_for_op(STAX_OP_Reshape) == stax_kernel_Reshape);
  CHECK(stax_kernel_for_op(STAX_OP_Resize) == stax_kernel_Resize);
  CHECK(stax_kernel_for_op(STAX_OP_Add) == stax_kernel_Add);
  CHECK(stax_kernel_for_op(STAX_OP_Loop) == stax_kernel_Loop);
  for (int op = 0; op < STAX_OP_COUNT; op++) CHECK(stax_kernel_for_op((stax_op_t)op) != NULL);
  CHECK(stax_kernel_for_op(STAX_OP_COUNT) == NULL);
  CHECK(stax_kernel_for_op(STAX_OP_INVALID) == NULL);
}

static void test_control_entries(void) {
  stax_tensor_t* out = NULL;
  CHECK_ERROR(kt_run(stax_kernel_If, STAX_OP_If, NULL, 0, NULL, 0, &out, 1), STAX_INTERNAL,
              "If is executed by the VM's control instructions, not as a kernel");
  CHECK_ERROR(kt_run(stax_kernel_Loop, STAX_OP_Loop, NULL, 0, NULL, 0, &out, 1), STAX_INTERNAL,
              "Loop is executed by the VM's control instructions");
}

static void test_allocation_failures(void) {
  double values[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  stax_tensor_t* x = kt_make_strided(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, values);
  stax_tensor_t* xt = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), x, NULL, &xt));
  stax_node_attr_t axis = kt_attr_int("axis", 1);
  stax_tensor_t* three[3] = {x, x, x};
  kt_check_allocation_failures(stax_kernel_Concat, STAX_OP_Concat, &axis, 1, three, 3, 1);
  stax_tensor_t* sizes = kt_vec(3, (int64_t[]){1, 1, 2});
  stax_tensor_t* split_inputs[2] = {x, sizes};
  kt_check_allocation_failures(stax_kernel_Split, STAX_OP_Split, &axis, 1, split_inputs, 2, 3);
  stax_tensor_t* shape = kt_vec(1, (int64_t[]){12});
  stax_tensor_t* reshape_inputs[2] = {xt, shape};
  kt_check_allocation_failures(stax_kernel_Reshape, STAX_OP_Reshape, NULL, 0, reshape_inputs, 2, 1);
  stax_tensor_t* pads = kt_vec(4, (int64_t[]){1, 2, 1, 2});
  stax_tensor_t* pad_inputs[2] = {x, pads};
  stax_node_attr_t reflect = kt_attr_string("mode", "reflect");
  kt_check_allocation_failures(stax_kernel_Pad, STAX_OP_Pad, &reflect, 1, pad_inputs, 2, 1);
  stax_tensor_t* d = kt_make(STAX_DTYPE_INT8, 4, (int64_t[]){1, 4, 2, 2}, NULL);
  stax_node_attr_t blocks = kt_attr_int("blocksize", 2);
  kt_check_allocation_failures(stax_kernel_DepthToSpace, STAX_OP_DepthToSpace, &blocks, 1, &d, 1, 1);
  stax_tensor_t* all[6] = {x, xt, sizes, shape, pads, d};
  kt_release_all(all, 6);
}

STAX_TEST_MAIN(STAX_TEST(test_reshape_view_and_rules), STAX_TEST(test_reshape_allowzero),
               STAX_TEST(test_reshape_errors), STAX_TEST(test_reshape_non_contiguous_and_preallocated),
               STAX_TEST(test_flatten), STAX_TEST(test_transpose), STAX_TEST(test_squeeze),
               STAX_TEST(test_unsqueeze), STAX_TEST(test_expand), STAX_TEST(test_concat),
               STAX_TEST(test_split), STAX_TEST(test_slice), STAX_TEST(test_pad_modes_1d),
               STAX_TEST(test_pad_2d_axes_and_dtypes), STAX_TEST(test_tile),
               STAX_TEST(test_depth_space), STAX_TEST(test_parallel_pad_and_tile),
               STAX_TEST(test_registry), STAX_TEST(test_control_entries),
               STAX_TEST(test_allocation_failures))
