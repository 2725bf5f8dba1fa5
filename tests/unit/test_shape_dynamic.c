/* Shape inference for generators (Shape, Size, Constant, ConstantOfShape, Range, EyeLike) and
 * data-dependent ops (NonZero, Compress, TopK, Unique), with every error path. */
#include "shape_test_util.h"

#define F32 STAX_DTYPE_FLOAT32
#define I64 STAX_DTYPE_INT64
#define BOOL STAX_DTYPE_BOOL

/* The symbol range of a dim that must be a bare fresh symbol. */
static void check_fresh_range(stax_graph_t* g, const stax_dim_t* dim, int64_t min, int64_t max) {
  stax_symbol_id_t id = -1;
  CHECK(stax_dim_as_symbol(dim, &id));
  int64_t low = -1, high = -1;
  if (id >= 0) stax_symbol_range(stax_graph_shape_ctx(g), id, &low, &high);
  CHECK_EQ_INT(low, min);
  CHECK_EQ_INT(high, max);
}

/* ---- Shape / Size ------------------------------------------------------------------------ */

static void test_shape_and_size(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,768");
  stax_value_id_t shape = shape_test_node1(g, STAX_OP_Shape, "shape", INPUTS(x), NO_ATTRS);
  CHECK_EQ_INT(stax_value_dtype(g, shape), I64);
  CHECK_EQ_STR(shape_test_content(g, shape), "[B, S, 768]");
  stax_value_id_t part =
      shape_test_node1(g, STAX_OP_Shape, "part", INPUTS(x),
                       ATTRS(stax_attr_int("start", 1), stax_attr_int("end", -1)));
  CHECK_EQ_STR(shape_test_shape(g, part), "[1]");
  CHECK_EQ_STR(shape_test_content(g, part), "[S]");
  stax_value_id_t clamped =
      shape_test_node1(g, STAX_OP_Shape, "clamped", INPUTS(x),
                       ATTRS(stax_attr_int("start", -10), stax_attr_int("end", 10)));
  CHECK_EQ_STR(shape_test_content(g, clamped), "[B, S, 768]");
  stax_value_id_t empty =
      shape_test_node1(g, STAX_OP_Shape, "empty", INPUTS(x),
                       ATTRS(stax_attr_int("start", 2), stax_attr_int("end", 1)));
  CHECK_EQ_STR(shape_test_shape(g, empty), "[0]");
  stax_value_id_t scalar = shape_test_input(g, "scalar", F32, "");
  stax_value_id_t scalar_shape =
      shape_test_node1(g, STAX_OP_Shape, "scalar_shape", INPUTS(scalar), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, scalar_shape), "[0]");
  CHECK_EQ_STR(shape_test_content(g, scalar_shape), "[]");
  CHECK_EQ_STR(shape_test_content(
                   g, shape_test_node1(g, STAX_OP_Size, "scalar_size", INPUTS(scalar), NO_ATTRS)),
               "[1]");
  stax_value_id_t size = shape_test_node1(g, STAX_OP_Size, "size", INPUTS(x), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, size), "[]");
  CHECK_EQ_STR(shape_test_content(g, size), "[768*B*S]");
  stax_graph_destroy(g);
}

/* ---- Constant / ConstantOfShape ---------------------------------------------------------- */

static void test_constant(void) {
  stax_graph_t* g = shape_test_graph();
  int64_t values[3] = {4, -1, 8};
  stax_tensor_t* tensor = shape_test_tensor(I64, false, 3, values);
  stax_value_id_t c =
      shape_test_node1(g, STAX_OP_Constant, "c", 0, NULL, ATTRS(stax_attr_tensor("value", tensor)));
  stax_tensor_release(tensor);
  CHECK_EQ_STR(shape_test_shape(g, c), "[3]");
  CHECK_EQ_STR(shape_test_content(g, c), "[4, -1, 8]");
  CHECK(stax_value_constant(g, c) != NULL);
  stax_value_id_t i =
      shape_test_node1(g, STAX_OP_Constant, "i", 0, NULL, ATTRS(stax_attr_int("value_int", 7)));
  CHECK_EQ_STR(shape_test_shape(g, i), "[]");
  CHECK_EQ_STR(shape_test_content(g, i), "[7]");
  stax_value_id_t is = shape_test_node1(g, STAX_OP_Constant, "is", 0, NULL,
                                        ATTRS(stax_attr_ints("value_ints", 2, (int64_t[]){2, 3})));
  CHECK_EQ_STR(shape_test_content(g, is), "[2, 3]");
  stax_value_id_t f = shape_test_node1(g, STAX_OP_Constant, "f", 0, NULL,
                                       ATTRS(stax_attr_float("value_float", 0.5f)));
  CHECK_EQ_INT(stax_value_dtype(g, f), F32);
  CHECK_EQ_STR(shape_test_content(g, f), "<unknown>");
  CHECK(*(const float*)stax_tensor_data(stax_value_constant(g, f)) == 0.5f);
  stax_value_id_t fs =
      shape_test_node1(g, STAX_OP_Constant, "fs", 0, NULL,
                       ATTRS(stax_attr_floats("value_floats", 3, (float[]){1.0f, 2.0f, 3.0f})));
  CHECK_EQ_STR(shape_test_shape(g, fs), "[3]");
  /* A Constant feeding Reshape works like an initializer. */
  stax_value_id_t x = shape_test_input(g, "x", F32, "2,16");
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Reshape, "r", INPUTS(x, c), NO_ATTRS)),
      "[4, 1, 8]");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Constant, "none", 0, NULL, NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "Constant node 'none': needs one of the attributes");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Constant, "two", 0, NULL,
                      ATTRS(stax_attr_int("value_int", 1), stax_attr_float("value_float", 1.0f)), 1,
                      &out),
      STAX_INVALID_ARGUMENT, "has both 'value_int' and 'value_float'");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Constant, "str", 0, NULL,
                              ATTRS(stax_attr_string("value_string", "hello")), 1, &out),
              STAX_UNIMPLEMENTED, "string constants are not supported");
  stax_graph_destroy(g);
}

static void test_constant_of_shape(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S");
  stax_value_id_t shape = shape_test_node1(g, STAX_OP_Shape, "shape", INPUTS(x), NO_ATTRS);
  stax_value_id_t zeros =
      shape_test_node1(g, STAX_OP_ConstantOfShape, "zeros", INPUTS(shape), NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, zeros), "[B, S]");
  CHECK_EQ_INT(stax_value_dtype(g, zeros), F32);
  /* ones([rank]) as int64: the Expand-shape idiom keeps contents. */
  stax_value_id_t rank = shape_test_node1(g, STAX_OP_Shape, "rank", INPUTS(shape), NO_ATTRS);
  int64_t one = 1;
  stax_tensor_t* one_tensor = shape_test_tensor(I64, false, 1, &one);
  stax_value_id_t ones = shape_test_node1(g, STAX_OP_ConstantOfShape, "ones", INPUTS(rank),
                                          ATTRS(stax_attr_tensor("value", one_tensor)));
  CHECK_EQ_STR(shape_test_shape(g, ones), "[2]");
  CHECK_EQ_STR(shape_test_content(g, ones), "[1, 1]");
  stax_value_id_t out = STAX_VALUE_NONE;
  int64_t two_values[2] = {1, 2};
  stax_tensor_t* two = shape_test_tensor(I64, false, 2, two_values);
  CHECK_ERROR(shape_test_node(g, STAX_OP_ConstantOfShape, "two", INPUTS(rank),
                              ATTRS(stax_attr_tensor("value", two)), 1, &out),
              STAX_INVALID_ARGUMENT, "must be a tensor with one element");
  stax_tensor_release(two);
  stax_tensor_release(one_tensor);
  stax_value_id_t negative = shape_test_ints(g, "negative", 2, (int64_t[]){3, -2});
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_ConstantOfShape, "neg", INPUTS(negative), NO_ATTRS, 1, &out),
      STAX_INVALID_ARGUMENT, "shape entry 1 is -2");
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "3");
  stax_value_id_t fresh =
      shape_test_node1(g, STAX_OP_ConstantOfShape, "rt", INPUTS(runtime), NO_ATTRS);
  CHECK_EQ_INT(stax_value_rank(g, fresh), 3);
  check_fresh_range(g, stax_value_dims(g, fresh)[2], 0, STAX_DIM_MAX);
  stax_value_id_t unknown = shape_test_input(g, "unknown", I64, "R");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_ConstantOfShape, "rank", INPUTS(unknown), NO_ATTRS, 1, &out),
      STAX_UNIMPLEMENTED, "its length (R) is not static");
  stax_graph_destroy(g);
}

/* ---- Range / EyeLike --------------------------------------------------------------------- */

static void test_range(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t r1 =
      shape_test_node1(g, STAX_OP_Range, "r1",
                       INPUTS(shape_test_scalar(g, "a", 1), shape_test_scalar(g, "b", 10),
                              shape_test_scalar(g, "c", 3)),
                       NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, r1), "[3]");
  CHECK_EQ_STR(shape_test_content(g, r1), "[1, 4, 7]");
  stax_value_id_t r2 =
      shape_test_node1(g, STAX_OP_Range, "r2",
                       INPUTS(shape_test_scalar(g, "d", 5), shape_test_scalar(g, "e", -2),
                              shape_test_scalar(g, "f", -2)),
                       NO_ATTRS);
  CHECK_EQ_STR(shape_test_content(g, r2), "[5, 3, 1, -1]");
  stax_value_id_t r3 =
      shape_test_node1(g, STAX_OP_Range, "r3",
                       INPUTS(shape_test_scalar(g, "h", 5), shape_test_scalar(g, "i", 1),
                              shape_test_scalar(g, "j", 1)),
                       NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, r3), "[0]");
  /* Position ids: Range(0, S, 1) with S from the input's shape. */
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S");
  stax_value_id_t shape = shape_test_node1(g, STAX_OP_Shape, "shape", INPUTS(x), NO_ATTRS);
  stax_value_id_t seq = shape_test_node1(g, STAX_OP_Gather, "seq",
                                         INPUTS(shape, shape_test_scalar(g, "k", 1)), NO_ATTRS);
  stax_value_id_t zero = shape_test_scalar(g, "zero", 0);
  stax_value_id_t one = shape_test_scalar(g, "one", 1);
  stax_value_id_t two = shape_test_scalar(g, "two", 2);
  CHECK_EQ_STR(shape_test_shape(
                   g, shape_test_node1(g, STAX_OP_Range, "pos", INPUTS(zero, seq, one), NO_ATTRS)),
               "[S]");
  CHECK_EQ_STR(shape_test_shape(
                   g, shape_test_node1(g, STAX_OP_Range, "even", INPUTS(zero, seq, two), NO_ATTRS)),
               "[floor((S + 1)/2)]");
  CHECK_EQ_STR(
      shape_test_shape(
          g, shape_test_node1(g, STAX_OP_Range, "down",
                              INPUTS(seq, zero, shape_test_scalar(g, "m1", -1)), NO_ATTRS)),
      "[S]");
  double fstart = 0.0, flimit = 1.0, fdelta = 0.3;
  stax_value_id_t fr = shape_test_node1(
      g, STAX_OP_Range, "floats",
      INPUTS(
          shape_test_initializer(g, "fs", shape_test_tensor(STAX_DTYPE_FLOAT64, true, 1, &fstart)),
          shape_test_initializer(g, "fl", shape_test_tensor(STAX_DTYPE_FLOAT64, true, 1, &flimit)),
          shape_test_initializer(g, "fd", shape_test_tensor(STAX_DTYPE_FLOAT64, true, 1, &fdelta))),
      NO_ATTRS);
  CHECK_EQ_STR(shape_test_shape(g, fr), "[4]");
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "");
  stax_value_id_t rt =
      shape_test_node1(g, STAX_OP_Range, "rt", INPUTS(zero, runtime, one), NO_ATTRS);
  check_fresh_range(g, stax_value_dims(g, rt)[0], 0, STAX_DIM_MAX);
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Range, "zero", INPUTS(one, two, zero), NO_ATTRS, 1, &out),
              STAX_INVALID_ARGUMENT, "Range node 'zero': delta (input 2) is 0");
  stax_value_id_t f =
      shape_test_initializer(g, "f1", shape_test_tensor(STAX_DTYPE_FLOAT64, true, 1, &flimit));
  CHECK_ERROR(shape_test_node(g, STAX_OP_Range, "mixed", INPUTS(zero, f, one), NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH,
              "input 1 'f1' has dtype float64 but input 0 'zero' has dtype int64");
  stax_value_id_t vector = shape_test_ints(g, "vector", 2, (int64_t[]){1, 2});
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_Range, "vector", INPUTS(zero, vector, one), NO_ATTRS, 1, &out),
      STAX_SHAPE_MISMATCH, "(limit) must be a scalar");
  stax_graph_destroy(g);
}

static void test_eye_like(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,M");
  stax_value_id_t e =
      shape_test_node1(g, STAX_OP_EyeLike, "e", INPUTS(x), ATTRS(stax_attr_int("dtype", 7)));
  CHECK_EQ_STR(shape_test_shape(g, e), "[N, M]");
  CHECK_EQ_INT(stax_value_dtype(g, e), I64);
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_ERROR(shape_test_node(g, STAX_OP_EyeLike, "bad", INPUTS(x),
                              ATTRS(stax_attr_int("dtype", 999)), 1, &out),
              STAX_INVALID_ARGUMENT, "'dtype' is 999");
  stax_value_id_t v = shape_test_input(g, "v", F32, "N");
  CHECK_ERROR(shape_test_node(g, STAX_OP_EyeLike, "rank", INPUTS(v), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "has rank 1, expected 2");
  stax_graph_destroy(g);
}

/* ---- data-dependent ---------------------------------------------------------------------- */

static void test_nonzero(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "3,S");
  stax_value_id_t nz = shape_test_node1(g, STAX_OP_NonZero, "nz", INPUTS(x), NO_ATTRS);
  CHECK_EQ_INT(stax_value_dtype(g, nz), I64);
  CHECK_EQ_INT(stax_value_rank(g, nz), 2);
  CHECK_EQ_INT(stax_dim_const_value(stax_value_dims(g, nz)[0]), 2);
  check_fresh_range(g, stax_value_dims(g, nz)[1], 0, STAX_DIM_MAX);
  stax_value_id_t y = shape_test_input(g, "y", F32, "4,5");
  stax_value_id_t nz2 = shape_test_node1(g, STAX_OP_NonZero, "nz2", INPUTS(y), NO_ATTRS);
  check_fresh_range(g, stax_value_dims(g, nz2)[1], 0, 20);
  /* Two NonZero nodes get distinct symbols. */
  stax_value_id_t nz3 = shape_test_node1(g, STAX_OP_NonZero, "nz3", INPUTS(y), NO_ATTRS);
  CHECK(stax_value_dims(g, nz3)[1] != stax_value_dims(g, nz2)[1]);
  /* A constant input gives the exact count. */
  float values[5] = {0.0f, 1.5f, 0.0f, -2.0f, 3.0f};
  stax_value_id_t c = shape_test_initializer(g, "c", shape_test_tensor(F32, false, 5, values));
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_NonZero, "nzc", INPUTS(c), NO_ATTRS)),
      "[1, 3]");
  stax_graph_destroy(g);
}

static void test_compress(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,6");
  stax_value_id_t condition = shape_test_input(g, "condition", BOOL, "6");
  stax_value_id_t along = shape_test_node1(g, STAX_OP_Compress, "along", INPUTS(x, condition),
                                           ATTRS(stax_attr_int("axis", 1)));
  CHECK_EQ_INT(stax_value_rank(g, along), 2);
  CHECK(stax_value_dims(g, along)[0] == stax_value_dims(g, x)[0]);
  check_fresh_range(g, stax_value_dims(g, along)[1], 0, 6);
  stax_value_id_t flat =
      shape_test_node1(g, STAX_OP_Compress, "flat", INPUTS(x, condition), NO_ATTRS);
  CHECK_EQ_INT(stax_value_rank(g, flat), 1);
  check_fresh_range(g, stax_value_dims(g, flat)[0], 0, 6);
  uint8_t mask[4] = {1, 0, 1, 1};
  stax_value_id_t constant =
      shape_test_initializer(g, "mask", shape_test_tensor(BOOL, false, 4, mask));
  CHECK_EQ_STR(
      shape_test_shape(g, shape_test_node1(g, STAX_OP_Compress, "fixed", INPUTS(x, constant),
                                           ATTRS(stax_attr_int("axis", 1)))),
      "[B, 3]");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "6");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Compress, "dtype", INPUTS(x, ints), NO_ATTRS, 1, &out),
              STAX_DTYPE_MISMATCH, "input 1 'ints' has dtype int64, expected bool");
  stax_value_id_t matrix = shape_test_input(g, "matrix", BOOL, "2,3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Compress, "rank", INPUTS(x, matrix), NO_ATTRS, 1, &out),
              STAX_SHAPE_MISMATCH, "input 1 'matrix' has rank 2, expected 1");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Compress, "axis", INPUTS(x, condition),
                              ATTRS(stax_attr_int("axis", 2)), 1, &out),
              STAX_OUT_OF_RANGE, "axis 2 is out of range for rank 2");
  stax_graph_destroy(g);
}

static void test_topk(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,50");
  stax_value_id_t outputs[2];
  CHECK_OK(shape_test_node(g, STAX_OP_TopK, "top",
                           INPUTS(x, shape_test_ints(g, "k", 1, (int64_t[]){5})), NO_ATTRS, 2,
                           outputs));
  CHECK_EQ_STR(shape_test_shape(g, outputs[0]), "[B, 5]");
  CHECK_EQ_STR(shape_test_shape(g, outputs[1]), "[B, 5]");
  CHECK_EQ_INT(stax_value_dtype(g, outputs[1]), I64);
  /* k known only at run time: a fresh dim bounded by the axis size. */
  stax_value_id_t runtime = shape_test_input(g, "runtime", I64, "1");
  CHECK_OK(shape_test_node(g, STAX_OP_TopK, "rt", INPUTS(x, runtime), NO_ATTRS, 2, outputs));
  check_fresh_range(g, stax_value_dims(g, outputs[0])[1], 0, 50);
  CHECK(stax_value_dims(g, outputs[0])[1] == stax_value_dims(g, outputs[1])[1]);
  /* k from a shape: symbolic. */
  stax_value_id_t y = shape_test_input(g, "y", F32, "K");
  stax_value_id_t k_shape = shape_test_node1(g, STAX_OP_Shape, "ks", INPUTS(y), NO_ATTRS);
  CHECK_OK(shape_test_node(g, STAX_OP_TopK, "sym", INPUTS(x, k_shape),
                           ATTRS(stax_attr_int("axis", 0)), 2, outputs));
  CHECK_EQ_STR(shape_test_shape(g, outputs[0]), "[K, 50]");
  CHECK_ERROR(shape_test_node(g, STAX_OP_TopK, "big",
                              INPUTS(x, shape_test_ints(g, "k60", 1, (int64_t[]){60})), NO_ATTRS, 2,
                              outputs),
              STAX_OUT_OF_RANGE, "k = 60 exceeds input 0 'x' dim 1 of size 50");
  CHECK_ERROR(shape_test_node(g, STAX_OP_TopK, "neg",
                              INPUTS(x, shape_test_ints(g, "kneg", 1, (int64_t[]){-1})), NO_ATTRS,
                              2, outputs),
              STAX_INVALID_ARGUMENT, "k is -1");
  CHECK_ERROR(shape_test_node(g, STAX_OP_TopK, "two",
                              INPUTS(x, shape_test_ints(g, "k2", 2, (int64_t[]){1, 2})), NO_ATTRS,
                              2, outputs),
              STAX_SHAPE_MISMATCH, "must hold exactly one element, got 2");
  CHECK_ERROR(shape_test_node(g, STAX_OP_TopK, "axis", INPUTS(x, runtime),
                              ATTRS(stax_attr_int("axis", 2)), 2, outputs),
              STAX_OUT_OF_RANGE, "axis 2 is out of range for rank 2");
  stax_graph_destroy(g);
}

static void test_unique(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "3,4");
  stax_value_id_t outputs[4];
  CHECK_OK(shape_test_node(g, STAX_OP_Unique, "u", INPUTS(x), NO_ATTRS, 4, outputs));
  const stax_dim_t* count = stax_value_dims(g, outputs[0])[0];
  check_fresh_range(g, count, 1, 12);
  CHECK_EQ_INT(stax_value_rank(g, outputs[0]), 1);
  CHECK(stax_value_dims(g, outputs[1])[0] == count);
  CHECK_EQ_STR(shape_test_shape(g, outputs[2]), "[12]");
  CHECK(stax_value_dims(g, outputs[3])[0] == count);
  CHECK_EQ_INT(stax_value_dtype(g, outputs[3]), I64);
  /* Along an axis: unique rows. */
  stax_value_id_t y = shape_test_input(g, "y", F32, "N,4");
  CHECK_OK(shape_test_node(g, STAX_OP_Unique, "rows", INPUTS(y), ATTRS(stax_attr_int("axis", 0)), 3,
                           outputs));
  CHECK_EQ_INT(stax_value_rank(g, outputs[0]), 2);
  check_fresh_range(g, stax_value_dims(g, outputs[0])[0], 1, STAX_DIM_MAX);
  CHECK_EQ_STR(shape_test_shape(g, outputs[2]), "[N]");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Unique, "axis", INPUTS(y),
                              ATTRS(stax_attr_int("axis", -3)), 1, outputs),
              STAX_OUT_OF_RANGE, "axis -3 is out of range for rank 2");
  stax_graph_destroy(g);
}

static void test_generator_limits(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t nine = shape_test_ints(g, "nine", 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1});
  CHECK_ERROR(shape_test_node(g, STAX_OP_ConstantOfShape, "deep", INPUTS(nine), NO_ATTRS, 1, &out),
              STAX_UNIMPLEMENTED, "the shape has 9 entries");
  CHECK_ERROR(shape_test_node(
                  g, STAX_OP_Range, "huge",
                  INPUTS(shape_test_scalar(g, "low", INT64_MIN),
                         shape_test_scalar(g, "high", INT64_MAX), shape_test_scalar(g, "step", 1)),
                  NO_ATTRS, 1, &out),
              STAX_OUT_OF_RANGE, "the range has 18446744073709551615 elements");
  double not_a_number = NAN, one = 1.0;
  CHECK_ERROR(
      shape_test_node(
          g, STAX_OP_Range, "nan",
          INPUTS(shape_test_initializer(
                     g, "nan", shape_test_tensor(STAX_DTYPE_FLOAT64, true, 1, &not_a_number)),
                 shape_test_initializer(g, "one",
                                        shape_test_tensor(STAX_DTYPE_FLOAT64, true, 1, &one)),
                 shape_test_initializer(g, "delta",
                                        shape_test_tensor(STAX_DTYPE_FLOAT64, true, 1, &one))),
          NO_ATTRS, 1, &out),
      STAX_OUT_OF_RANGE, "does not have a usable element count");
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_shape_and_size), STAX_TEST(test_constant),
               STAX_TEST(test_constant_of_shape), STAX_TEST(test_range), STAX_TEST(test_eye_like),
               STAX_TEST(test_nonzero), STAX_TEST(test_compress), STAX_TEST(test_topk),
               STAX_TEST(test_unique), STAX_TEST(test_generator_limits))
