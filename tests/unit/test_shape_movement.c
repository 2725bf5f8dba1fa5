/* Shape inference for data movement: Reshape (with the classic exporter shape pattern),
 * Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, DepthToSpace, SpaceToDepth, Expand,
 * Tile, Pad and Resize, including every error path. */
#include "shape_test_util.h"

#define F32 STAX_DTYPE_FLOAT32
#define I64 STAX_DTYPE_INT64

/* ---- Reshape ----------------------------------------------------------------------------- */

/* x[B,S,768] -> Shape -> Gather(0), Gather(1) -> Unsqueeze -> Concat with [12, 64] -> Reshape. */
static void test_reshape_export_pattern(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,768");
  stax_value_id_t shape = shape_test_node1(g, STAX_OP_Shape, "shape", INPUTS(x), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, shape), "[3]");
  CHECK_EQ_STR(shape_test_content(g, shape), "[B, S, 768]");
  stax_value_id_t zero = shape_test_scalar(g, "zero", 0);
  stax_value_id_t one = shape_test_scalar(g, "one", 1);
  stax_value_id_t batch = shape_test_node1(g, STAX_OP_Gather, "g0", INPUTS(shape, zero),
                                           ATTRS(stax_attr_int("axis", 0)));
  stax_value_id_t seq = shape_test_node1(g, STAX_OP_Gather, "g1", INPUTS(shape, one), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, batch), "[]");
  CHECK_EQ_STR(shape_test_content(g, batch), "[B]");
  CHECK_EQ_STR(shape_test_content(g, seq), "[S]");
  stax_value_id_t axes = shape_test_ints(g, "axes0", 1, (int64_t[]){0});
  stax_value_id_t batch1 =
      shape_test_node1(g, STAX_OP_Unsqueeze, "u0", INPUTS(batch, axes), NO_ATTRS);
  stax_value_id_t seq1 = shape_test_node1(g, STAX_OP_Unsqueeze, "u1", INPUTS(seq, axes), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, batch1), "[1]");
  CHECK_EQ_STR(shape_test_content(g, seq1), "[S]");
  stax_value_id_t heads = shape_test_ints(g, "heads", 2, (int64_t[]){12, 64});
  stax_value_id_t target = shape_test_node1(g, STAX_OP_Concat, "cat", INPUTS(batch1, seq1, heads),
                                            ATTRS(stax_attr_int("axis", 0)));
  CHECK_EQ_STR(shape_test_shape(g, target), "[4]");
  CHECK_EQ_STR(shape_test_content(g, target), "[B, S, 12, 64]");
  stax_value_id_t y = shape_test_node1(g, STAX_OP_Reshape, "r", INPUTS(x, target), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, y), "[B, S, 12, 64]");
  CHECK_EQ_INT(stax_value_dtype(g, y), F32);
  /* And back: [B, S, -1] merges the heads, exactly 768. */
  stax_value_id_t back = shape_test_ints(g, "back", 3, (int64_t[]){0, 0, -1});
  stax_value_id_t z = shape_test_node1(g, STAX_OP_Reshape, "r2", INPUTS(y, back), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, z), "[B, S, 768]");
  stax_graph_destroy(g);
}

static void test_reshape_constant_and_minus_one(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "2,3,4");
  stax_value_id_t s1 = shape_test_ints(g, "s1", 2, (int64_t[]){-1, 4});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Reshape, "a", INPUTS(x, s1), NO_ATTRS)),
      "[6, 4]");
  stax_value_id_t s2 = shape_test_ints(g, "s2", 3, (int64_t[]){0, -1, 2});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Reshape, "b", INPUTS(x, s2), NO_ATTRS)),
      "[2, 6, 2]");
  /* Symbolic -1: (B*S*64) / 64. */
  stax_value_id_t y = shape_test_input(g, "y", F32, "B,S,64");
  stax_value_id_t s3 = shape_test_ints(g, "s3", 2, (int64_t[]){-1, 64});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Reshape, "c", INPUTS(y, s3), NO_ATTRS)),
      "[B*S, 64]");
  /* allowzero keeps a literal 0 (the input must then be empty). */
  stax_value_id_t empty = shape_test_input(g, "empty", F32, "0,5");
  stax_value_id_t s4 = shape_test_ints(g, "s4", 2, (int64_t[]){5, 0});
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Reshape, "d", INPUTS(empty, s4),
                                                    ATTRS(stax_attr_int("allowzero", 1)))),
               "[5, 0]");
  stax_graph_destroy(g);
}

static void test_reshape_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "2,3");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t bad = shape_test_ints(g, "bad", 2, (int64_t[]){4, 2});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "r", INPUTS(x, bad), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH,
              "Reshape node 'r': cannot reshape input 0 'x' of shape [2, 3] (6 elements) to "
              "[4, 2] (8 elements)");
  stax_value_id_t two = shape_test_ints(g, "two", 2, (int64_t[]){-1, -1});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "r", INPUTS(x, two), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "more than one -1 (entries 0 and 1)");
  stax_value_id_t indivisible = shape_test_ints(g, "indivisible", 2, (int64_t[]){4, -1});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "r", INPUTS(x, indivisible), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "multiply to 4, which does not divide 6");
  stax_value_id_t negative = shape_test_ints(g, "negative", 2, (int64_t[]){-2, 3});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "r", INPUTS(x, negative), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "entry 0 is -2");
  stax_value_id_t copy = shape_test_ints(g, "copy", 3, (int64_t[]){2, 3, 0});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "r", INPUTS(x, copy), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT,
              "entry 2 is 0 (copy the input dim), but input 0 'x' has rank 2");
  stax_value_id_t both = shape_test_ints(g, "both", 3, (int64_t[]){0, -1, 6});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "r", INPUTS(x, both),
                              ATTRS(stax_attr_int("allowzero", 1)), 1, &out),
              STAX_INVALID_ARGUMENT, "both 0 and -1");
  stax_value_id_t floats = shape_test_input(g, "floats", F32, "2");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "r", INPUTS(x, floats), NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 1 'floats' (shape) has dtype float32");
  stax_value_id_t matrix = shape_test_input(g, "matrix", I64, "2,1");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "r", INPUTS(x, matrix), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "must be a 1-D tensor, got rank 2");
  /* A symbolic element count that contradicts a constant one. */
  stax_value_id_t y = shape_test_input(g, "y", F32, "N,4");
  stax_value_id_t s = shape_test_ints(g, "s", 2, (int64_t[]){3, 5});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "r", INPUTS(y, s), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "element count");
  CHECK_EQ_INT(stax_graph_node_count(g), 0);
  stax_graph_destroy(g);
}

/* A target shape computed at run time: static length gives fresh dims, else UNIMPLEMENTED. */
static void test_reshape_unknown_target(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,6");
  stax_value_id_t runtime_shape = shape_test_input(g, "runtime_shape", I64, "3");
  stax_value_id_t y = shape_test_node1(g, STAX_OP_Reshape, "r", INPUTS(x, runtime_shape), NO_ATTRS);
  CHECK_EQ_INT(stax_value_rank(g, y), 3);
  for (int32_t k = 0; k < 3; k++) CHECK(!stax_dim_is_const(stax_value_dims(g, y)[k]));
  CHECK(stax_value_dims(g, y)[0] != stax_value_dims(g, y)[1]);
  stax_value_id_t unknown_length = shape_test_input(g, "unknown_length", I64, "R");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Reshape, "r2", INPUTS(x, unknown_length), NO_ATTRS, 1, &out),
      STAX_UNIMPLEMENTED, "Reshape node 'r2': input 1 'unknown_length' (shape) is not known");
  stax_graph_destroy(g);
}

/* ---- Flatten / Transpose ----------------------------------------------------------------- */

static void test_flatten(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,3,H,W");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Flatten, "f", INPUTS(x), NO_ATTRS)),
               "[B, 3*H*W]");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Flatten, "f0", INPUTS(x),
                                                    ATTRS(stax_attr_int("axis", 0)))),
               "[1, 3*B*H*W]");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Flatten, "f4", INPUTS(x),
                                                    ATTRS(stax_attr_int("axis", -2)))),
               "[3*B, H*W]");
  stax_value_id_t scalar = shape_test_input(g, "scalar", F32, "");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Flatten, "s", INPUTS(scalar),
                                                    ATTRS(stax_attr_int("axis", 0)))),
               "[1, 1]");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Flatten, "bad", INPUTS(x), ATTRS(stax_attr_int("axis", 5)),
                              1, &out),
              STAX_OUT_OF_RANGE, "Flatten node 'bad': axis 5 is out of range");
  stax_graph_destroy(g);
}

static void test_transpose(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,8");
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Transpose, "t", INPUTS(x), NO_ATTRS)),
      "[8, S, B]");
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Transpose, "p", INPUTS(x),
                                           ATTRS(stax_attr_ints("perm", 3, (int64_t[]){0, 2, 1})))),
      "[B, 8, S]");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Transpose, "short", INPUTS(x),
                              ATTRS(stax_attr_ints("perm", 2, (int64_t[]){0, 1})), 1, &out),
              STAX_INVALID_ARGUMENT, "'perm' has 2 entries but input 0 'x' has rank 3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Transpose, "range", INPUTS(x),
                              ATTRS(stax_attr_ints("perm", 3, (int64_t[]){0, 3, 1})), 1, &out),
              STAX_OUT_OF_RANGE, "perm[1] = 3 is out of range for rank 3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Transpose, "repeat", INPUTS(x),
                              ATTRS(stax_attr_ints("perm", 3, (int64_t[]){0, 1, 0})), 1, &out),
              STAX_INVALID_ARGUMENT, "perm[2] = 0 repeats an axis");
  stax_graph_destroy(g);
}

/* ---- Squeeze / Unsqueeze ----------------------------------------------------------------- */

static void test_squeeze_axes(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "1,B,1,4");
  stax_value_id_t axes = shape_test_ints(g, "axes", 2, (int64_t[]){0, -2});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Squeeze, "s", INPUTS(x, axes), NO_ATTRS)),
      "[B, 4]");
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Squeeze, "attr", INPUTS(x),
                                           ATTRS(stax_attr_ints("axes", 1, (int64_t[]){2})))),
      "[1, B, 4]");
  /* Squeezing a symbolic dim records that it is 1. */
  stax_value_id_t y = shape_test_input(g, "y", F32, "K,3");
  stax_value_id_t zero = shape_test_ints(g, "zero", 1, (int64_t[]){0});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Squeeze, "k", INPUTS(y, zero), NO_ATTRS)),
      "[3]");
  CHECK_EQ_STR(shape_test_shape(g, y), "[1, 3]");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t one = shape_test_ints(g, "one", 1, (int64_t[]){3});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Squeeze, "bad", INPUTS(x, one), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "cannot squeeze input 0 'x' dim 3: it is 4, not 1");
  stax_value_id_t far = shape_test_ints(g, "far", 1, (int64_t[]){4});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Squeeze, "far", INPUTS(x, far), NO_ATTRS, 1, &out),
              STAX_OUT_OF_RANGE, "axes[0] 4 is out of range for rank 4");
  stax_value_id_t twice = shape_test_ints(g, "twice", 2, (int64_t[]){0, -4});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Squeeze, "twice", INPUTS(x, twice), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "axes[1] = -4 repeats axis 0");
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "1");
  /* Axes known only at run time, of static length: the rank is known, the dims are fresh. */
  stax_value_id_t squeezed =
      shape_test_node1(g, STAX_OP_Squeeze, "rt", INPUTS(x, runtime), NO_ATTRS);
  CHECK_EQ_INT(stax_value_rank(g, squeezed), 3);
  CHECK(!stax_dim_is_const(stax_value_dims(g, squeezed)[2]));
  stax_value_id_t runtime3 = shape_test_input(g, "runtime3", I64, "5");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Squeeze, "rt3", INPUTS(x, runtime3), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "axes (input 1) has 5 entries but input 0 'x' has rank 4");
  stax_value_id_t unknown_length = shape_test_input(g, "unknown_length", I64, "L");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Squeeze, "rtl", INPUTS(x, unknown_length), NO_ATTRS, 1, &out),
      STAX_UNIMPLEMENTED, "input 1 'unknown_length' (axes) is not known");
  /* No axes: every 1 goes, but a symbolic dim that may be 1 makes the rank unknown. */
  CHECK_ERROR(shape_test_node(g, STAX_OP_Squeeze, "maybe", INPUTS(x), NO_ATTRS, 1, &out),
              STAX_UNIMPLEMENTED, "input 0 'x' dim 1 is B; without axes");
  const stax_dim_t* wide = NULL;
  CHECK_OK(stax_symbol_get(stax_graph_shape_ctx(g), "Wide", 2, 100, &wide));
  stax_value_id_t big = shape_test_input(g, "big", F32, "1,Wide,1");
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Squeeze, "auto", INPUTS(big), NO_ATTRS)),
      "[Wide]");
  stax_graph_destroy(g);
}

static void test_unsqueeze(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S");
  stax_value_id_t axes = shape_test_ints(g, "axes", 2, (int64_t[]){0, -1});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Unsqueeze, "u", INPUTS(x, axes), NO_ATTRS)),
      "[1, B, S, 1]");
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Unsqueeze, "attr", INPUTS(x),
                                           ATTRS(stax_attr_ints("axes", 1, (int64_t[]){1})))),
      "[B, 1, S]");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Unsqueeze, "none", INPUTS(x), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "Unsqueeze node 'none': needs axes");
  stax_value_id_t far = shape_test_ints(g, "far", 1, (int64_t[]){3});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Unsqueeze, "far", INPUTS(x, far), NO_ATTRS, 1, &out),
              STAX_OUT_OF_RANGE, "axes[0] 3 is out of range for rank 3");
  stax_value_id_t dup = shape_test_ints(g, "dup", 2, (int64_t[]){1, 1});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Unsqueeze, "dup", INPUTS(x, dup), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "repeats axis 1");
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "2");
  stax_value_id_t unsqueezed =
      shape_test_node1(g, STAX_OP_Unsqueeze, "rt", INPUTS(x, runtime), NO_ATTRS);
  CHECK_EQ_INT(stax_value_rank(g, unsqueezed), 4);
  CHECK(!stax_dim_is_const(stax_value_dims(g, unsqueezed)[0]));
  stax_value_id_t many = shape_test_ints(g, "many", 7, (int64_t[]){0, 1, 2, 3, 4, 5, 6});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Unsqueeze, "many", INPUTS(x, many), NO_ATTRS, 1, &out),
              STAX_UNIMPLEMENTED, "rank 9");
  stax_graph_destroy(g);
}

/* ---- Concat / Split ---------------------------------------------------------------------- */

static void test_concat(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t a = shape_test_input(g, "a", F32, "B,S,4");
  stax_value_id_t b = shape_test_input(g, "b", F32, "B,T,4");
  stax_value_id_t c = shape_test_input(g, "c", F32, "B,2,4");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Concat, "cat", INPUTS(a, b, c),
                                                    ATTRS(stax_attr_int("axis", -2)))),
               "[B, S + T + 2, 4]");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t d = shape_test_input(g, "d", F32, "B,S,5");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Concat, "m", INPUTS(a, d), ATTRS(stax_attr_int("axis", 1)),
                              1, &out),
              STAX_SHAPE_MISMATCH,
              "Concat node 'm': input 1 'd' dim 2 is 5 but input 0 'a' dim 2 is 4");
  /* Symbolic non-axis dims are unified; a contradiction names input and dim. */
  stax_value_id_t e = shape_test_input(g, "e", F32, "7,S,4");
  stax_value_id_t f = shape_test_input(g, "f", F32, "8,S,4");
  CHECK_OK(shape_test_node(g, STAX_OP_Concat, "pin", INPUTS(a, e), ATTRS(stax_attr_int("axis", 1)),
                           1, &out));
  CHECK_EQ_STR(shape_test_shape(g, a), "[7, S, 4]");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Concat, "clash", INPUTS(a, f),
                              ATTRS(stax_attr_int("axis", 1)), 1, &out),
              STAX_SHAPE_MISMATCH, "input 1 'f' dim 0 is 8 but input 0 'a' dim 0 is 7");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Concat, "axis", INPUTS(a, b),
                              ATTRS(stax_attr_int("axis", 3)), 1, &out),
              STAX_OUT_OF_RANGE, "axis 3 is out of range for rank 3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Concat, "noaxis", INPUTS(a, b), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "attribute 'axis' is required");
  stax_value_id_t r2 = shape_test_input(g, "r2", F32, "B,S");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Concat, "rank", INPUTS(a, r2),
                              ATTRS(stax_attr_int("axis", 0)), 1, &out),
              STAX_SHAPE_MISMATCH, "input 1 'r2' has rank 2 but input 0 'a' has rank 3");
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "B,S,4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Concat, "dtype", INPUTS(a, ints),
                              ATTRS(stax_attr_int("axis", 0)), 1, &out),
              STAX_DTYPE_MISMATCH,
              "input 1 'ints' has dtype int64 but input 0 'a' has dtype float32");
  stax_value_id_t scalar = shape_test_input(g, "scalar", F32, "");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Concat, "scalar", INPUTS(scalar),
                              ATTRS(stax_attr_int("axis", 0)), 1, &out),
              STAX_SHAPE_MISMATCH, "has rank 0");
  stax_graph_destroy(g);
}

static void test_split(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,12");
  stax_value_id_t outs[4];
  CHECK_OK(shape_test_node(g, STAX_OP_Split, "even", INPUTS(x), ATTRS(stax_attr_int("axis", 1)), 3,
                           outs));
  CHECK_EQ_STR(shape_test_shape(g, outs[2]), "[B, 4]");
  stax_value_id_t sizes = shape_test_ints(g, "sizes", 2, (int64_t[]){5, 7});
  CHECK_OK(shape_test_node(g, STAX_OP_Split, "given", INPUTS(x, sizes),
                           ATTRS(stax_attr_int("axis", -1)), 2, outs));
  CHECK_EQ_STR(shape_test_shape(g, outs[0]), "[B, 5]");
  CHECK_EQ_STR(shape_test_shape(g, outs[1]), "[B, 7]");
  /* Opset 18: 12 in 5 parts is 3, 3, 3, 3, 0; 3 * 4 = 12 leaves 0 for the last. */
  stax_value_id_t y = shape_test_input(g, "y", F32, "10");
  CHECK_OK(shape_test_node(g, STAX_OP_Split, "uneven", INPUTS(y),
                           ATTRS(stax_attr_int("num_outputs", 4)), 4, outs));
  CHECK_EQ_STR(shape_test_shape(g, outs[0]), "[3]");
  CHECK_EQ_STR(shape_test_shape(g, outs[3]), "[1]");
  /* Symbolic: 2*S in two halves is S each. */
  stax_value_id_t z = shape_test_input(g, "z", F32, "S");
  stax_value_id_t shape = shape_test_node1(g, STAX_OP_Shape, "shape", INPUTS(z), NO_ATTRS);
  stax_value_id_t twice = shape_test_node1(g, STAX_OP_Concat, "twice", INPUTS(shape, shape),
                                           ATTRS(stax_attr_int("axis", 0)));
  CHECK_OK(shape_test_node(g, STAX_OP_Split, "halves", INPUTS(twice), NO_ATTRS, 2, outs));
  CHECK_EQ_STR(shape_test_shape(g, outs[0]), "[1]");
  CHECK_EQ_STR(shape_test_content(g, outs[1]), "[S]");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Split, "odd", INPUTS(y), NO_ATTRS, 3, outs),
              STAX_SHAPE_MISMATCH,
              "input 0 'y' dim 0 is 10, which cannot be split into 3 equal parts");
  stax_value_id_t wrong_sum = shape_test_ints(g, "wrong_sum", 2, (int64_t[]){5, 6});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Split, "sum", INPUTS(x, wrong_sum),
                              ATTRS(stax_attr_int("axis", 1)), 2, outs),
              STAX_SHAPE_MISMATCH, "split sizes sum to 11 but input 0 'x' dim 1 is 12");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Split, "count", INPUTS(x, wrong_sum),
                              ATTRS(stax_attr_int("axis", 1)), 3, outs),
              STAX_INVALID_ARGUMENT, "'split' has 2 entries but the node has 3 outputs");
  stax_value_id_t negative = shape_test_ints(g, "negative", 2, (int64_t[]){13, -1});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Split, "neg", INPUTS(x, negative),
                              ATTRS(stax_attr_int("axis", 1)), 2, outs),
              STAX_INVALID_ARGUMENT, "split[1] is -1");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Split, "n", INPUTS(y),
                              ATTRS(stax_attr_int("num_outputs", 3)), 2, outs),
              STAX_INVALID_ARGUMENT, "'num_outputs' is 3 but the node has 2 outputs");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Split, "axis", INPUTS(y), ATTRS(stax_attr_int("axis", 1)),
                              2, outs),
              STAX_OUT_OF_RANGE, "axis 1 is out of range for rank 1");
  /* Run-time sizes of static count: fresh dims. */
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "2");
  CHECK_OK(shape_test_node(g, STAX_OP_Split, "rt", INPUTS(x, runtime),
                           ATTRS(stax_attr_int("axis", 1)), 2, outs));
  CHECK(!stax_dim_is_const(stax_value_dims(g, outs[0])[1]));
  (void)out;
  stax_graph_destroy(g);
}

/* ---- DepthToSpace / SpaceToDepth --------------------------------------------------------- */

static void test_depth_space(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,16,H,W");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_DepthToSpace, "d2s", INPUTS(x),
                                                    ATTRS(stax_attr_int("blocksize", 2)))),
               "[N, 4, 2*H, 2*W]");
  stax_value_id_t y = shape_test_input(g, "y", F32, "N,3,8,6");
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_SpaceToDepth, "s2d", INPUTS(y),
                                                    ATTRS(stax_attr_int("blocksize", 2)))),
               "[N, 12, 4, 3]");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_DepthToSpace, "c", INPUTS(y),
                              ATTRS(stax_attr_int("blocksize", 2)), 1, &out),
              STAX_SHAPE_MISMATCH, "input 0 'y' dim 1 is 3, not a multiple of 4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_SpaceToDepth, "w", INPUTS(y),
                              ATTRS(stax_attr_int("blocksize", 4)), 1, &out),
              STAX_SHAPE_MISMATCH, "dim 3 is 6, not a multiple of 4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_DepthToSpace, "nob", INPUTS(x), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "'blocksize' is required");
  CHECK_ERROR(shape_test_node(g, STAX_OP_DepthToSpace, "zero", INPUTS(x),
                              ATTRS(stax_attr_int("blocksize", 0)), 1, &out),
              STAX_INVALID_ARGUMENT, "got 0");
  CHECK_ERROR(shape_test_node(g, STAX_OP_DepthToSpace, "mode", INPUTS(x),
                              ATTRS(stax_attr_int("blocksize", 2), stax_attr_string("mode", "XYZ")),
                              1, &out),
              STAX_INVALID_ARGUMENT, "\"DCR\" or \"CRD\"");
  stax_value_id_t r3 = shape_test_input(g, "r3", F32, "1,2,3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_SpaceToDepth, "rank", INPUTS(r3),
                              ATTRS(stax_attr_int("blocksize", 2)), 1, &out),
              STAX_SHAPE_MISMATCH, "has rank 3, expected 4");
  stax_graph_destroy(g);
}

/* ---- Expand / Tile / Pad / Resize -------------------------------------------------------- */

static void test_expand(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "1,S,1");
  stax_value_id_t shape = shape_test_ints(g, "shape", 4, (int64_t[]){2, 3, 1, 5});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Expand, "e", INPUTS(x, shape), NO_ATTRS)),
      "[2, 3, S, 5]");
  /* The shape of another tensor (Shape(y)) expands symbolically. */
  stax_value_id_t y = shape_test_input(g, "y", F32, "B,S,D");
  stax_value_id_t y_shape = shape_test_node1(g, STAX_OP_Shape, "ys", INPUTS(y), NO_ATTRS);
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Expand, "e2", INPUTS(x, y_shape), NO_ATTRS)),
      "[B, S, D]");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t bad = shape_test_ints(g, "bad", 2, (int64_t[]){3, 4});
  stax_value_id_t z = shape_test_input(g, "z", F32, "2,1");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Expand, "bad", INPUTS(z, bad), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH,
              "cannot broadcast input 0 'z' dim 0 (2) with input 1 'bad' dim 0 (3)");
  stax_value_id_t negative = shape_test_ints(g, "negative", 1, (int64_t[]){-1});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Expand, "neg", INPUTS(z, negative), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "shape entry 0 is -1");
  /* Run-time shape of length 3: the constant 2 survives, the 1 becomes fresh. */
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "3");
  stax_value_id_t e3 = shape_test_node1(g, STAX_OP_Expand, "e3", INPUTS(z, runtime), NO_ATTRS);
  CHECK_EQ_INT(stax_value_rank(g, e3), 3);
  CHECK_EQ_INT(stax_dim_const_value(stax_value_dims(g, e3)[1]), 2);
  CHECK(!stax_dim_is_const(stax_value_dims(g, e3)[2]));
  stax_graph_destroy(g);
}

static void test_tile(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,3");
  stax_value_id_t repeats = shape_test_ints(g, "repeats", 2, (int64_t[]){2, 4});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Tile, "t", INPUTS(x, repeats), NO_ATTRS)),
      "[2*B, 12]");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t short_repeats = shape_test_ints(g, "short", 1, (int64_t[]){2});
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Tile, "short", INPUTS(x, short_repeats), NO_ATTRS, 1, &out),
      STAX_INVALID_ARGUMENT, "'repeats' has 1 entries but input 0 'x' has rank 2");
  stax_value_id_t negative = shape_test_ints(g, "negative", 2, (int64_t[]){1, -3});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Tile, "neg", INPUTS(x, negative), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "repeats[1] is -3");
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "2");
  stax_value_id_t t2 = shape_test_node1(g, STAX_OP_Tile, "rt", INPUTS(x, runtime), NO_ATTRS);
  CHECK(!stax_dim_is_const(stax_value_dims(g, t2)[1]));
  stax_graph_destroy(g);
}

static void test_pad(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,H,4");
  stax_value_id_t pads = shape_test_ints(g, "pads", 6, (int64_t[]){0, 1, 2, 0, 3, -1});
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Pad, "p", INPUTS(x, pads), NO_ATTRS)),
      "[B, H + 4, 5]");
  stax_value_id_t axes = shape_test_ints(g, "axes", 1, (int64_t[]){-1});
  stax_value_id_t two = shape_test_ints(g, "two", 2, (int64_t[]){1, 1});
  CHECK_EQ_STR(shape_test_shape(
                   g, shape_test_node1(g, STAX_OP_Pad, "pa", INPUTS(x, two, STAX_VALUE_NONE, axes),
                                       ATTRS(stax_attr_string("mode", "reflect")))),
               "[B, H, 6]");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Pad, "count", INPUTS(x, two), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "'pads' has 2 entries; 3 padded axes need 6");
  stax_value_id_t crop = shape_test_ints(g, "crop", 6, (int64_t[]){0, 0, -3, 0, 0, -2});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Pad, "crop", INPUTS(x, crop), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "pads make input 0 'x' dim 2 negative (-1)");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Pad, "mode", INPUTS(x, pads),
                              ATTRS(stax_attr_string("mode", "mirror")), 1, &out),
              STAX_INVALID_ARGUMENT, "got \"mirror\"");
  stax_value_id_t int_fill = shape_test_scalar(g, "int_fill", 0);
  CHECK_ERROR(shape_test_node(g, STAX_OP_Pad, "fill", INPUTS(x, pads, int_fill), NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 2 'int_fill' has dtype int64");
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "6");
  stax_value_id_t p2 = shape_test_node1(g, STAX_OP_Pad, "rt", INPUTS(x, runtime), NO_ATTRS);
  CHECK(!stax_dim_is_const(stax_value_dims(g, p2)[2]));
  stax_graph_destroy(g);
}

static void test_resize(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,3,H,10");
  float scale_values[4] = {1.0f, 1.0f, 2.0f, 0.5f};
  stax_value_id_t scales =
      shape_test_initializer(g, "scales", shape_test_tensor(F32, false, 4, scale_values));
  CHECK_EQ_STR(shape_test_shape(g, shape_test_node1(g, STAX_OP_Resize, "r",
                                                    INPUTS(x, STAX_VALUE_NONE, scales), NO_ATTRS)),
               "[N, 3, 2*H, 5]");
  float odd_values[4] = {1.0f, 1.0f, 1.5f, 0.3f};
  stax_value_id_t odd =
      shape_test_initializer(g, "odd", shape_test_tensor(F32, false, 4, odd_values));
  stax_value_id_t r2 = shape_test_node1(g, STAX_OP_Resize, "odd", INPUTS(x, odd), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, r2), "[N, 3, H + floor(H/2), 3]");
  stax_value_id_t sizes = shape_test_ints(g, "sizes", 2, (int64_t[]){32, 20});
  stax_value_id_t empty =
      shape_test_initializer(g, "empty", shape_test_tensor(F32, false, 0, NULL));
  CHECK_EQ_STR(
      shape_test_shape(
          g, shape_test_node1(g, STAX_OP_Resize, "sz", INPUTS(x, STAX_VALUE_NONE, empty, sizes),
                              ATTRS(stax_attr_ints("axes", 2, (int64_t[]){2, 3})))),
      "[N, 3, 32, 20]");
  stax_value_id_t y = shape_test_input(g, "y", F32, "1,3,20,10");
  CHECK_EQ_STR(
      shape_test_shape(
          g, shape_test_node1(g, STAX_OP_Resize, "keep",
                              INPUTS(y, STAX_VALUE_NONE, STAX_VALUE_NONE, sizes),
                              ATTRS(stax_attr_ints("axes", 2, (int64_t[]){2, 3}),
                                    stax_attr_string("keep_aspect_ratio_policy", "not_larger")))),
      "[1, 3, 32, 16]");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Resize, "none", INPUTS(x, STAX_VALUE_NONE, empty),
                              NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "needs scales (input 2) or sizes (input 3)");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Resize, "both", INPUTS(x, STAX_VALUE_NONE, scales, sizes),
                              ATTRS(stax_attr_ints("axes", 2, (int64_t[]){2, 3})), 1, &out),
              STAX_INVALID_ARGUMENT, "not both");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Resize, "count",
                      INPUTS(x, STAX_VALUE_NONE, STAX_VALUE_NONE, sizes), NO_ATTRS, 1, &out),
      STAX_INVALID_ARGUMENT, "'sizes' has 2 entries but 4 axes are resized");
  float negative_values[4] = {1.0f, 1.0f, -2.0f, 1.0f};
  stax_value_id_t negative =
      shape_test_initializer(g, "negative", shape_test_tensor(F32, false, 4, negative_values));
  CHECK_ERROR(shape_test_node(g, STAX_OP_Resize, "neg", INPUTS(x, STAX_VALUE_NONE, negative),
                              NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "scales[2] is -2");
  stax_value_id_t int_scales = shape_test_ints(g, "int_scales", 4, (int64_t[]){1, 1, 2, 2});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Resize, "int", INPUTS(x, STAX_VALUE_NONE, int_scales),
                              NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 2 'int_scales' has dtype int64");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Resize, "policy",
                              INPUTS(x, STAX_VALUE_NONE, STAX_VALUE_NONE, sizes),
                              ATTRS(stax_attr_ints("axes", 2, (int64_t[]){2, 3}),
                                    stax_attr_string("keep_aspect_ratio_policy", "fit")),
                              1, &out),
              STAX_INVALID_ARGUMENT, "got \"fit\"");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Resize, "axes", INPUTS(x, STAX_VALUE_NONE, STAX_VALUE_NONE, sizes),
                      ATTRS(stax_attr_ints("axes", 2, (int64_t[]){2, -2})), 1, &out),
      STAX_INVALID_ARGUMENT, "axes[1] = -2 repeats axis 2");
  /* Scales computed at run time: the resized dims are fresh. */
  stax_value_id_t runtime = shape_test_input(g, "runtime", F32, "4");
  stax_value_id_t r3 =
      shape_test_node1(g, STAX_OP_Resize, "rt", INPUTS(x, STAX_VALUE_NONE, runtime), NO_ATTRS);
  CHECK(!stax_dim_is_const(stax_value_dims(g, r3)[3]));
  stax_graph_destroy(g);
}

/* Limits and ambiguous cases that the paths above do not reach. */
static void test_movement_limits(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,N");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t nine = shape_test_ints(g, "nine", 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, -1});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Reshape, "deep", INPUTS(x, nine), NO_ATTRS, 1, &out),
              STAX_UNIMPLEMENTED, "the target shape has 9 entries; at most rank 8");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Expand, "deep", INPUTS(x, nine), NO_ATTRS, 1, &out),
              STAX_UNIMPLEMENTED, "the shape has 9 entries");
  /* -1 next to an entry that may be 0 is ambiguous: a fresh dim stands in. */
  stax_value_id_t z = shape_test_input(g, "z", F32, "T>=0");
  stax_value_id_t z_shape = shape_test_node1(g, STAX_OP_Shape, "zs", INPUTS(z), NO_ATTRS);
  stax_value_id_t minus_one = shape_test_ints(g, "minus_one", 1, (int64_t[]){-1});
  stax_value_id_t target = shape_test_node1(g, STAX_OP_Concat, "target", INPUTS(z_shape, minus_one),
                                            ATTRS(stax_attr_int("axis", 0)));
  stax_value_id_t y =
      shape_test_node1(g, STAX_OP_Reshape, "ambiguous", INPUTS(x, target), NO_ATTRS);
  CHECK(stax_value_dims(g, y)[0] == stax_value_dims(g, z)[0]);
  stax_symbol_id_t id = -1;
  CHECK(stax_dim_as_symbol(stax_value_dims(g, y)[1], &id));
  /* Squeezing a symbolic dim whose range excludes 1 contradicts it. */
  const stax_dim_t* wide = NULL;
  CHECK_OK(stax_symbol_get(stax_graph_shape_ctx(g), "Wide", 2, 100, &wide));
  stax_value_id_t w = shape_test_input(g, "w", F32, "Wide,3");
  stax_value_id_t zero = shape_test_ints(g, "zero", 1, (int64_t[]){0});
  CHECK_ERROR(shape_test_node(g, STAX_OP_Squeeze, "wide", INPUTS(w, zero), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "Squeeze node 'wide'");
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_reshape_export_pattern),
               STAX_TEST(test_reshape_constant_and_minus_one), STAX_TEST(test_reshape_errors),
               STAX_TEST(test_reshape_unknown_target), STAX_TEST(test_flatten),
               STAX_TEST(test_transpose), STAX_TEST(test_squeeze_axes), STAX_TEST(test_unsqueeze),
               STAX_TEST(test_concat), STAX_TEST(test_split), STAX_TEST(test_depth_space),
               STAX_TEST(test_expand), STAX_TEST(test_tile), STAX_TEST(test_pad),
               STAX_TEST(test_resize), STAX_TEST(test_movement_limits))
