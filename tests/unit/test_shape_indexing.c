/* Shape inference for Slice (constant and symbolic clamping, contents), Gather (contents),
 * GatherElements, GatherND, ScatterElements/ScatterND and OneHot, with every error path. */
#include "shape_test_util.h"

#define F32 STAX_DTYPE_FLOAT32
#define I64 STAX_DTYPE_INT64

/* Slices axis 0 of `x` with constant starts/ends/steps and returns the output's shape text. */
static const char* slice_1d(stax_graph_t* g, stax_value_id_t x, int64_t start, int64_t end,
                            int64_t step) {
  static int counter = 0;
  char names[4][32];
  for (int k = 0; k < 4; k++) snprintf(names[k], sizeof(names[k]), "c%d_%d", counter, k);
  counter++;
  stax_value_id_t s = shape_test_ints(g, names[0], 1, &start);
  stax_value_id_t e = shape_test_ints(g, names[1], 1, &end);
  stax_value_id_t a = shape_test_ints(g, names[2], 1, (int64_t[]){0});
  stax_value_id_t st = shape_test_ints(g, names[3], 1, &step);
  return shape_test_shape(
      g, shape_test_node1(g, STAX_OP_Slice, NULL, INPUTS(x, s, e, a, st), NO_ATTRS));
}

static void test_slice_constant_dims(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "10");
  CHECK_EQ_STR(slice_1d(g, x, 2, 7, 1), "[5]");
  CHECK_EQ_STR(slice_1d(g, x, 1, -1, 1), "[8]");
  CHECK_EQ_STR(slice_1d(g, x, -3, INT64_MAX, 1), "[3]");
  CHECK_EQ_STR(slice_1d(g, x, 0, 10, 3), "[4]");
  CHECK_EQ_STR(slice_1d(g, x, 8, 2, 1), "[0]");
  CHECK_EQ_STR(slice_1d(g, x, -1, INT64_MIN, -1), "[10]");
  CHECK_EQ_STR(slice_1d(g, x, 20, 2, -3), "[3]"); /* 9, 6, 3 */
  CHECK_EQ_STR(slice_1d(g, x, -100, 100, 1), "[10]");
  /* Steps at the ends of int64 (hostile files): one element each, no overflow. */
  CHECK_EQ_STR(slice_1d(g, x, -1, INT64_MIN, INT64_MIN), "[1]");
  CHECK_EQ_STR(slice_1d(g, x, 0, INT64_MAX, INT64_MAX), "[1]");
  stax_graph_destroy(g);
}

/* Symbolic dims: clamping becomes min/max expressions, simplified by S >= 1. */
static void test_slice_symbolic_dims(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "S");
  CHECK_EQ_STR(slice_1d(g, x, 1, -1, 1), "[max(0, S - 2)]");
  CHECK_EQ_STR(slice_1d(g, x, -3, INT64_MAX, 1), "[min(3, S)]");
  CHECK_EQ_STR(slice_1d(g, x, 0, 2, 1), "[min(2, S)]");
  CHECK_EQ_STR(slice_1d(g, x, 2, INT32_MAX, 1), "[max(0, S - 2)]");
  CHECK_EQ_STR(slice_1d(g, x, 0, INT64_MAX, 1), "[S]");
  CHECK_EQ_STR(slice_1d(g, x, -1, INT64_MIN, -1), "[S]");
  CHECK_EQ_STR(slice_1d(g, x, 0, INT64_MAX, 2), "[floor((S + 1)/2)]");
  CHECK_EQ_STR(slice_1d(g, x, -4, -1, 1), "[min(3, S - 1)]");
  CHECK_EQ_STR(slice_1d(g, x, 5, 5, 1), "[0]");
  CHECK_EQ_STR(slice_1d(g, x, INT64_MAX, 0, 1), "[0]");
  CHECK_EQ_STR(slice_1d(g, x, 0, INT64_MIN, 1), "[0]");
  /* Reverse from index 2: min(3, S) elements (2, 1, 0 when S >= 3). */
  CHECK_EQ_STR(slice_1d(g, x, 2, INT64_MIN, -1), "[min(3, S)]");
  CHECK_EQ_STR(slice_1d(g, x, -1, INT64_MIN, INT64_MIN), "[1]");
  /* A range that starts at 0 makes every clamp visible, and stays exact. */
  stax_value_id_t y = shape_test_input(g, "y", F32, "T>=0");
  CHECK_EQ_STR(slice_1d(g, y, -1, INT64_MIN, -1), "[T]");
  CHECK_EQ_STR(slice_1d(g, y, 1, -1, 1), "[max(0, T - 2)]");
  CHECK_EQ_STR(slice_1d(g, y, 0, -1, 1), "[max(0, T - 1)]");
  CHECK_EQ_STR(slice_1d(g, y, 0, INT64_MAX, 1), "[T]");
  CHECK_EQ_STR(slice_1d(g, y, -2, INT64_MIN, -1), "[min(T, max(1, T - 1))]"); /* 0, 1, 1, 2, ... */
  stax_graph_destroy(g);
}

static void test_slice_axes_steps_and_contents(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,D");
  stax_value_id_t starts = shape_test_ints(g, "starts", 2, (int64_t[]){1, 0});
  stax_value_id_t ends = shape_test_ints(g, "ends", 2, (int64_t[]){INT64_MAX, 4});
  stax_value_id_t axes = shape_test_ints(g, "axes", 2, (int64_t[]){-1, 1});
  stax_value_id_t steps = shape_test_ints(g, "steps", 2, (int64_t[]){2, 1});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Slice, "s",
                                           INPUTS(x, starts, ends, axes, steps), NO_ATTRS)),
      "[B, min(4, S), floor(D/2)]");
  /* Without axes the entries cover the leading axes. */
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Slice, "lead",
                                                    INPUTS(x, starts, ends), NO_ATTRS)),
               "[B - 1, min(4, S), D]");
  /* Contents: Shape(x)[1:] is [S, D], Shape(x)[-1:] is [D]. */
  stax_value_id_t shape = shape_test_node1(g, STAX_OP_Shape, "shape", INPUTS(x), NO_ATTRS);
  stax_value_id_t one = shape_test_ints(g, "one", 1, (int64_t[]){1});
  stax_value_id_t minus_one = shape_test_ints(g, "minus_one", 1, (int64_t[]){-1});
  stax_value_id_t big = shape_test_ints(g, "big", 1, (int64_t[]){INT64_MAX});
  stax_value_id_t tail =
      shape_test_node1(g, STAX_OP_Slice, "tail", INPUTS(shape, one, big), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, tail), "[2]");
  CHECK_EQ_STR(shape_test_content(g, tail), "[S, D]");
  stax_value_id_t last =
      shape_test_node1(g, STAX_OP_Slice, "last", INPUTS(shape, minus_one, big), NO_ATTRS);
  CHECK_EQ_STR(shape_test_content(g, last), "[D]");
  stax_value_id_t reversed = shape_test_node1(
      g, STAX_OP_Slice, "rev",
      INPUTS(shape, minus_one, shape_test_ints(g, "lowest", 1, (int64_t[]){INT64_MIN}),
             STAX_VALUE_NONE, minus_one),
      NO_ATTRS);
  CHECK_EQ_STR(shape_test_content(g, reversed), "[D, S, B]");
  /* An end taken from another tensor's shape: x[:, :T] with T = Shape(y)[0]. */
  stax_value_id_t y = shape_test_input(g, "y", F32, "T");
  stax_value_id_t y_shape = shape_test_node1(g, STAX_OP_Shape, "ys", INPUTS(y), NO_ATTRS);
  stax_value_id_t zero = shape_test_ints(g, "zero", 1, (int64_t[]){0});
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Slice, "prefix",
                                                    INPUTS(x, zero, y_shape, one), NO_ATTRS)),
               "[B, min(S, T), D]");
  stax_graph_destroy(g);
}

static void test_slice_unknown_and_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,8");
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "1");
  stax_value_id_t one = shape_test_ints(g, "one", 1, (int64_t[]){1});
  stax_value_id_t two = shape_test_ints(g, "two", 2, (int64_t[]){1, 2});
  /* Run-time start on axis 1: a fresh dim no larger than 8. */
  stax_value_id_t s =
      shape_test_node1(g, STAX_OP_Slice, "rt", INPUTS(x, runtime, one, one), NO_ATTRS);
  const stax_dim_t* fresh = stax_value_dims(g, s)[1];
  CHECK(!stax_dim_is_const(fresh));
  int64_t low = -1, high = -1;
  stax_dim_bounds(stax_graph_shape_ctx(g), fresh, &low, &high);
  CHECK_EQ_INT(low, 0);
  CHECK_EQ_INT(high, 8);
  CHECK_EQ_STR(shape_test_shape(g, x), "[B, 8]");
  CHECK(stax_value_dims(g, s)[0] == stax_value_dims(g, x)[0]);
  /* Run-time axes: every dim may change. */
  stax_value_id_t s2 =
      shape_test_node1(g, STAX_OP_Slice, "rta", INPUTS(x, one, one, runtime), NO_ATTRS);
  CHECK(stax_value_dims(g, s2)[0] != stax_value_dims(g, x)[0]);
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t zero_step = shape_test_ints(g, "zero_step", 1, (int64_t[]){0});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Slice, "step", INPUTS(x, one, one, one, zero_step),
                              NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "Slice node 'step': steps[0] is 0");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Slice, "count", INPUTS(x, one, two), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "'ends' has 2 entries but 'starts' has 1");
  stax_value_id_t far = shape_test_ints(g, "far", 1, (int64_t[]){2});
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Slice, "axis", INPUTS(x, one, one, far), NO_ATTRS, 1, &out),
      STAX_OUT_OF_RANGE, "axes[0] 2 is out of range for rank 2");
  stax_value_id_t same = shape_test_ints(g, "same", 2, (int64_t[]){1, -1});
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Slice, "same", INPUTS(x, two, two, same), NO_ATTRS, 1, &out),
      STAX_INVALID_ARGUMENT, "axes[1] = -1 repeats axis 1");
  stax_value_id_t three = shape_test_ints(g, "three", 3, (int64_t[]){0, 0, 0});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Slice, "many", INPUTS(x, three, three), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "3 starts/ends for input 0 'x' of rank 2");
  stax_value_id_t floats = shape_test_input(g, "floats", F32, "1");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Slice, "dtype", INPUTS(x, floats, one), NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 1 'floats' (starts) has dtype float32");
  stax_value_id_t scalar = shape_test_input(g, "scalar", F32, "");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Slice, "scalar", INPUTS(scalar, one, one), NO_ATTRS, 1, &out),
      STAX_SHAPE_MISMATCH, "has rank 0");
  stax_graph_destroy(g);
}

/* ---- Gather family ----------------------------------------------------------------------- */

static void test_gather(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "V,D");
  stax_value_id_t ids = shape_test_input(g, "ids", I64, "B,S");
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Gather, "emb", INPUTS(x, ids), NO_ATTRS)),
      "[B, S, D]");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Gather, "cols", INPUTS(x, ids),
                                                    ATTRS(stax_attr_int("axis", -1)))),
               "[V, B, S]");
  /* Contents of a shape vector gathered with a constant index list. */
  stax_value_id_t shape = shape_test_node1(g, STAX_OP_Shape, "shape", INPUTS(ids), NO_ATTRS);
  stax_value_id_t picks = shape_test_ints(g, "picks", 3, (int64_t[]){-1, 0, 1});
  stax_value_id_t picked =
      shape_test_node1(g, STAX_OP_Gather, "picked", INPUTS(shape, picks), NO_ATTRS);
  CHECK_EQ_STR(shape_test_content(g, picked), "[S, B, S]");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t two = shape_test_scalar(g, "two", 2);
  CHECK_ERROR(shape_test_node(g, STAX_OP_Gather, "range", INPUTS(shape, two), NO_ATTRS, 1, &out),
              STAX_OUT_OF_RANGE, "index 2 (input 1 'two' element 0) is out of range for input 0");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Gather, "axis", INPUTS(x, ids),
                              ATTRS(stax_attr_int("axis", 2)), 1, &out),
              STAX_OUT_OF_RANGE, "Gather node 'axis': axis 2 is out of range for rank 2");
  stax_value_id_t float_ids = shape_test_input(g, "float_ids", F32, "3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Gather, "dtype", INPUTS(x, float_ids), NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 1 'float_ids' has dtype float32");
  stax_graph_destroy(g);
}

static void test_gather_elements_and_nd(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,5,6");
  stax_value_id_t idx = shape_test_input(g, "idx", I64, "B,K,6");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_GatherElements, "ge", INPUTS(x, idx),
                                                    ATTRS(stax_attr_int("axis", 1)))),
               "[B, K, 6]");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t flat = shape_test_input(g, "flat", I64, "K");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_GatherElements, "rank", INPUTS(x, flat), NO_ATTRS, 1, &out),
      STAX_SHAPE_MISMATCH, "input 1 'flat' has rank 1, expected 3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_GatherElements, "axis", INPUTS(x, idx),
                              ATTRS(stax_attr_int("axis", -4)), 1, &out),
              STAX_OUT_OF_RANGE, "axis -4 is out of range");
  /* GatherND with one batch dim and index tuples of length 1: [B, K, 6]. */
  stax_value_id_t tuples = shape_test_input(g, "tuples", I64, "B,K,1");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_GatherND, "nd", INPUTS(x, tuples),
                                                    ATTRS(stax_attr_int("batch_dims", 1)))),
               "[B, K, 6]");
  stax_value_id_t pairs = shape_test_input(g, "pairs", I64, "N,2");
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_GatherND, "nd2", INPUTS(x, pairs), NO_ATTRS)),
      "[N, 6]");
  stax_value_id_t symbolic = shape_test_input(g, "symbolic", I64, "N,L");
  CHECK_ERROR(shape_test_node(g, STAX_OP_GatherND, "sym", INPUTS(x, symbolic), NO_ATTRS, 1, &out),
              STAX_UNIMPLEMENTED, "input 1 'symbolic' dim 1 is L; it must be static");
  stax_value_id_t long_tuples = shape_test_input(g, "long_tuples", I64, "N,4");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_GatherND, "long", INPUTS(x, long_tuples), NO_ATTRS, 1, &out),
      STAX_OUT_OF_RANGE, "indexes 4 dims of input 0 'x'");
  CHECK_ERROR(shape_test_node(g, STAX_OP_GatherND, "batch", INPUTS(x, pairs),
                              ATTRS(stax_attr_int("batch_dims", 2)), 1, &out),
              STAX_INVALID_ARGUMENT, "'batch_dims' is 2");
  stax_value_id_t other_batch = shape_test_input(g, "other_batch", I64, "3,1");
  stax_value_id_t y = shape_test_input(g, "y", F32, "4,5");
  CHECK_ERROR(shape_test_node(g, STAX_OP_GatherND, "mismatch", INPUTS(y, other_batch),
                              ATTRS(stax_attr_int("batch_dims", 1)), 1, &out),
              STAX_SHAPE_MISMATCH, NULL);
  stax_graph_destroy(g);
}

static void test_scatter(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,8");
  stax_value_id_t idx = shape_test_input(g, "idx", I64, "B,K");
  stax_value_id_t upd = shape_test_input(g, "upd", F32, "B,K");
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_ScatterElements, "se", INPUTS(x, idx, upd),
                                           ATTRS(stax_attr_int("axis", 1),
                                                 stax_attr_string("reduction", "add")))),
      "[B, 8]");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t short_upd = shape_test_input(g, "short_upd", F32, "B,3");
  stax_value_id_t idx4 = shape_test_input(g, "idx4", I64, "B,4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_ScatterElements, "dims", INPUTS(x, idx4, short_upd),
                              NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, NULL);
  stax_value_id_t int_upd = shape_test_input(g, "int_upd", I64, "B,K");
  CHECK_ERROR(shape_test_node(g, STAX_OP_ScatterElements, "dtype", INPUTS(x, idx, int_upd),
                              NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH,
              "input 2 'int_upd' has dtype int64 but input 0 'x' has dtype float32");
  CHECK_ERROR(shape_test_node(g, STAX_OP_ScatterElements, "red", INPUTS(x, idx, upd),
                              ATTRS(stax_attr_string("reduction", "avg")), 1, &out),
              STAX_INVALID_ARGUMENT, "got \"avg\"");
  /* ScatterND: indices [N, 1] into [B, 8] take updates [N, 8]. */
  stax_value_id_t rows = shape_test_input(g, "rows", I64, "N,1");
  stax_value_id_t row_updates = shape_test_input(g, "row_updates", F32, "N,8");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_ScatterND, "nd",
                                                    INPUTS(x, rows, row_updates), NO_ATTRS)),
               "[B, 8]");
  stax_value_id_t bad_updates = shape_test_input(g, "bad_updates", F32, "N,7");
  CHECK_ERROR(shape_test_node(g, STAX_OP_ScatterND, "nd_bad", INPUTS(x, rows, bad_updates),
                              NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, NULL);
  stax_value_id_t flat_updates = shape_test_input(g, "flat_updates", F32, "N");
  CHECK_ERROR(shape_test_node(g, STAX_OP_ScatterND, "nd_rank", INPUTS(x, rows, flat_updates),
                              NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "input 2 'flat_updates' has rank 1, expected 2");
  stax_graph_destroy(g);
}

static void test_one_hot(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t idx = shape_test_input(g, "idx", I64, "B,S");
  stax_value_id_t depth = shape_test_scalar(g, "depth", 10);
  float on_off[2] = {0.0f, 1.0f};
  stax_value_id_t values =
      shape_test_initializer(g, "values", shape_test_tensor(F32, false, 2, on_off));
  stax_value_id_t y =
      shape_test_node1(g, STAX_OP_OneHot, "oh", INPUTS(idx, depth, values), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, y), "[B, S, 10]");
  CHECK_EQ_INT(stax_value_dtype(g, y), F32);
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_OneHot, "front", INPUTS(idx, depth, values),
                                           ATTRS(stax_attr_int("axis", 0)))),
      "[10, B, S]");
  /* A depth taken from a shape is symbolic; a float depth is truncated. */
  stax_value_id_t classes = shape_test_input(g, "classes", F32, "C");
  stax_value_id_t shape = shape_test_node1(g, STAX_OP_Shape, "shape", INPUTS(classes), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_OneHot, "sym",
                                                    INPUTS(idx, shape, values), NO_ATTRS)),
               "[B, S, C]");
  float float_depth = 4.7f;
  stax_value_id_t fd =
      shape_test_initializer(g, "fd", shape_test_tensor(F32, true, 1, &float_depth));
  CHECK_EQ_STR(shape_test_shape(
                   g, shape_test_node1(g, STAX_OP_OneHot, "fd", INPUTS(idx, fd, values), NO_ATTRS)),
               "[B, S, 4]");
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "");
  stax_value_id_t r =
      shape_test_node1(g, STAX_OP_OneHot, "rt", INPUTS(idx, runtime, values), NO_ATTRS);
  CHECK(!stax_dim_is_const(stax_value_dims(g, r)[2]));
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t three =
      shape_test_initializer(g, "three", shape_test_tensor(F32, false, 2, on_off));
  stax_value_id_t bad_values = shape_test_input(g, "bad_values", F32, "3");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_OneHot, "vals", INPUTS(idx, depth, bad_values), NO_ATTRS, 1, &out),
      STAX_SHAPE_MISMATCH, "must hold 2 elements [off, on], got 3");
  stax_value_id_t zero = shape_test_scalar(g, "zero", 0);
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_OneHot, "zero", INPUTS(idx, zero, three), NO_ATTRS, 1, &out),
      STAX_INVALID_ARGUMENT, "depth is 0");
  CHECK_ERROR(shape_test_node(g, STAX_OP_OneHot, "axis", INPUTS(idx, depth, values),
                              ATTRS(stax_attr_int("axis", 3)), 1, &out),
              STAX_OUT_OF_RANGE, "axis 3 is out of range for rank 3");
  stax_value_id_t vector_depth = shape_test_ints(g, "vector_depth", 2, (int64_t[]){3, 4});
  CHECK_ERROR(shape_test_node(g, STAX_OP_OneHot, "vec", INPUTS(idx, vector_depth, values), NO_ATTRS,
                              1, &out),
              STAX_SHAPE_MISMATCH, "(depth) must be a scalar");
  stax_graph_destroy(g);
}

static void test_indexing_limits(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t x = shape_test_input(g, "x", F32, "2,3,4,5");
  stax_value_id_t deep_ids = shape_test_input(g, "deep_ids", I64, "1,1,1,1,1,1");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Gather, "deep", INPUTS(x, deep_ids), NO_ATTRS, 1, &out),
              STAX_UNIMPLEMENTED, "the output has rank 9");
  stax_value_id_t y = shape_test_input(g, "y", F32, "B,8");
  stax_value_id_t triples = shape_test_input(g, "triples", I64, "N,3");
  stax_value_id_t updates = shape_test_input(g, "updates", F32, "N");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_ScatterND, "long", INPUTS(y, triples, updates), NO_ATTRS, 1, &out),
      STAX_OUT_OF_RANGE, "indexes 3 dims of input 0 'y', which has rank 2");
  stax_value_id_t narrow = shape_test_input(g, "narrow", STAX_DTYPE_INT32, "N,2");
  CHECK_ERROR(shape_test_node(g, STAX_OP_ScatterND, "narrow", INPUTS(y, narrow, updates), NO_ATTRS,
                              1, &out),
              STAX_DTYPE_MISMATCH, "input 1 'narrow' has dtype int32, expected int64");
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_slice_constant_dims), STAX_TEST(test_slice_symbolic_dims),
               STAX_TEST(test_slice_axes_steps_and_contents),
               STAX_TEST(test_slice_unknown_and_errors), STAX_TEST(test_gather),
               STAX_TEST(test_gather_elements_and_nd), STAX_TEST(test_scatter),
               STAX_TEST(test_one_hot), STAX_TEST(test_indexing_limits))
