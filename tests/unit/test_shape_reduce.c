/* Shape inference for reductions, arg-reductions, same-shape ops (Softmax, CumSum,
 * InstanceNormalization, Trilu), losses and normalizations (LayerNorm, BatchNorm, LRN). */
#include "ir/graph_internal.h"
#include "shape_test_util.h"

#define F32 STAX_DTYPE_FLOAT32
#define I64 STAX_DTYPE_INT64

static void test_reduce_axes_input(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,4");
  int64_t one[1] = {1}, last[1] = {-1}, first_last[2] = {0, -1};
  stax_value_id_t axis1 = shape_test_ints(g, "axis1", 1, one);
  stax_value_id_t axis_last = shape_test_ints(g, "axis_last", 1, last);
  stax_value_id_t axes_fl = shape_test_ints(g, "axes_fl", 2, first_last);
  stax_value_id_t empty = shape_test_ints(g, "empty", 0, NULL);
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_attr_t drop = stax_attr_int("keepdims", 0);
  stax_attr_t noop = stax_attr_int("noop_with_empty_axes", 1);

  stax_value_id_t in[2] = {x, axis1};
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceSum, "sum", 2, in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, 1, 4]");
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceMax, "max", 2, in, 1, &drop, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, 4]");
  in[1] = axis_last;
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceMean, "mean", 2, in, 1, &drop, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, S]");
  in[1] = axes_fl;
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceL2, "l2", 2, in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[1, S, 1]");
  /* no axes: everything, unless noop_with_empty_axes */
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceProd, "all", 1, in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[1, 1, 1]");
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceMin, "all2", 1, in, 1, &drop, 1, &out));
  CHECK_VALUE(g, out, F32, "[]");
  in[1] = empty;
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceSum, "empty", 2, in, 1, &drop, 1, &out));
  CHECK_VALUE(g, out, F32, "[]");
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceSum, "noop", 2, in, 1, &noop, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, S, 4]");
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceLogSumExp, "noop2", 1, in, 1, &noop, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, S, 4]");
  stax_graph_destroy(g);
}

static void test_reduce_axes_attribute(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,4");
  int64_t axes_values[2] = {0, 2};
  stax_attr_t axes = stax_attr_ints("axes", 2, axes_values);
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceMean, "mean", 1, &x, 1, &axes, 1, &out));
  CHECK_VALUE(g, out, F32, "[1, S, 1]");
  stax_value_id_t axes_input = shape_test_ints(g, "axes_input", 2, axes_values);
  stax_value_id_t in[2] = {x, axes_input};
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceMean, "both", 2, in, 1, &axes, 1, NULL),
              STAX_INVALID_ARGUMENT, "axes given both as an attribute and as input 1");
  stax_graph_destroy(g);
}

static void test_reduce_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,4");
  stax_value_id_t flags = shape_test_input(g, "flags", STAX_DTYPE_BOOL, "3");
  stax_value_id_t dynamic_axes = shape_test_input(g, "dynamic_axes", I64, "1");
  stax_value_id_t float_axes = shape_test_input(g, "float_axes", F32, "1");
  int64_t three[1] = {3}, minus_four[1] = {-4}, repeated[2] = {1, -2};
  stax_value_id_t axis3 = shape_test_ints(g, "axis3", 1, three);
  stax_value_id_t axis_m4 = shape_test_ints(g, "axis_m4", 1, minus_four);
  stax_value_id_t axes_rep = shape_test_ints(g, "axes_rep", 2, repeated);
  stax_value_id_t in[2] = {x, axis3};
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceSum, "r1", 2, in, 0, NULL, 1, NULL),
              STAX_OUT_OF_RANGE,
              "ReduceSum node 'r1': axes[0] 3 is out of range for rank 3 (expected -3 to 2)");
  in[1] = axis_m4;
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceSum, "r2", 2, in, 0, NULL, 1, NULL),
              STAX_OUT_OF_RANGE, "axes[0] -4 is out of range for rank 3");
  in[1] = axes_rep;
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceSum, "r3", 2, in, 0, NULL, 1, NULL),
              STAX_INVALID_ARGUMENT, "axes[1] = -2 repeats axis 1");
  /* Axes known only at run time are accepted (tested below); a dynamic length is not. */
  stax_value_id_t unsized_axes = shape_test_input(g, "unsized_axes", I64, "N");
  in[1] = unsized_axes;
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceSum, "r4", 2, in, 0, NULL, 1, NULL),
              STAX_UNIMPLEMENTED, "axes (input 1) must be a 1-D tensor of static length");
  in[1] = float_axes;
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceSum, "r5", 2, in, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 1 'float_axes' has dtype float32");
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceSum, "r6", 1, &flags, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 0 'flags' has dtype bool, expected a number");
  stax_attr_t keepdims = stax_attr_int("keepdims", 2);
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceSum, "r7", 1, &x, 1, &keepdims, 1, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'keepdims' must be 0 or 1, got 2");
  stax_attr_t bad_axes = stax_attr_ints("axes", 1, three);
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceL1, "r8", 1, &x, 1, &bad_axes, 1, NULL),
              STAX_OUT_OF_RANGE, "axes[0] 3 is out of range");
  int64_t many[65] = {0};
  stax_attr_t too_many_axes = stax_attr_ints("axes", 65, many);
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceL1, "r9", 1, &x, 1, &too_many_axes, 1, NULL),
              STAX_INVALID_ARGUMENT, "65 axes for rank 3");
  stax_value_id_t many_input = shape_test_ints(g, "many_input", 65, many);
  stax_value_id_t many_in[2] = {x, many_input};
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceL1, "r10", 2, many_in, 0, NULL, 1, NULL),
              STAX_UNIMPLEMENTED, "axes (input 1 'many_input') has 65 elements; at most 64");
  stax_value_id_t matrix_axes = shape_test_input(g, "matrix_axes", I64, "1,1");
  stax_value_id_t matrix_in[2] = {x, matrix_axes};
  CHECK_ERROR(shape_test_node(g, STAX_OP_ReduceL1, "r11", 2, matrix_in, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 1 'matrix_axes' has rank 2, expected 0 to 1");
  CHECK_EQ_INT(stax_graph_node_count(g), 0);
  /* Run-time axes: static rank, fresh dims bounded by the largest input dim. */
  in[1] = dynamic_axes;
  stax_value_id_t kept = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceSum, "r12", 2, in, 0, NULL, 1, &kept));
  CHECK_EQ_INT(stax_value_rank(g, kept), 3);
  stax_attr_t no_keep = stax_attr_int("keepdims", 0);
  stax_value_id_t dropped = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceSum, "r13", 2, in, 1, &no_keep, 1, &dropped));
  CHECK_EQ_INT(stax_value_rank(g, dropped), 2);
  stax_symbol_id_t fresh = -1;
  CHECK(stax_dim_as_symbol(stax_value_dims(g, dropped)[0], &fresh));
  stax_graph_destroy(g);
}

/* ReduceProd / ReduceSum over a shape vector keep symbolic contents (element counts). */
static void test_reduce_content(void) {
  stax_graph_t* g = shape_test_graph();
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  const stax_dim_t* b = shape_test_dim(g, "B");
  const stax_dim_t* s = shape_test_dim(g, "S");
  stax_value_id_t shape = shape_test_input(g, "shape", I64, "2");
  static const stax_dim_t* content[2];
  content[0] = b;
  content[1] = s;
  stax_graph_value(g, shape)->content = content;
  stax_graph_value(g, shape)->content_count = 2;
  stax_attr_t drop = stax_attr_int("keepdims", 0);
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceProd, "numel", 1, &shape, 1, &drop, 1, &out));
  CHECK_VALUE(g, out, I64, "[]");
  const stax_value_t* product = stax_graph_value(g, out);
  CHECK_EQ_INT(product->content_count, 1);
  if (product->content_count == 1) CHECK(product->content[0] == stax_dim_mul(ctx, b, s));
  CHECK_OK(shape_test_node(g, STAX_OP_ReduceSum, "total", 1, &shape, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, I64, "[1]");
  const stax_value_t* sum = stax_graph_value(g, out);
  CHECK_EQ_INT(sum->content_count, 1);
  if (sum->content_count == 1) CHECK(sum->content[0] == stax_dim_add(ctx, b, s));
  stax_graph_destroy(g);
}

static void test_arg_reduce(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,4");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_attr_t attrs[2] = {stax_attr_int("axis", 1), stax_attr_int("keepdims", 0)};
  CHECK_OK(shape_test_node(g, STAX_OP_ArgMax, "argmax", 1, &x, 2, attrs, 1, &out));
  CHECK_VALUE(g, out, I64, "[B, 4]");
  stax_attr_t last = stax_attr_int("axis", -1);
  CHECK_OK(shape_test_node(g, STAX_OP_ArgMin, "argmin", 1, &x, 1, &last, 1, &out));
  CHECK_VALUE(g, out, I64, "[B, S, 1]");
  CHECK_OK(shape_test_node(g, STAX_OP_ArgMin, "argmin0", 1, &x, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, I64, "[1, S, 4]");
  stax_attr_t far = stax_attr_int("axis", 5);
  CHECK_ERROR(shape_test_node(g, STAX_OP_ArgMax, "argmax2", 1, &x, 1, &far, 1, NULL),
              STAX_OUT_OF_RANGE, "axis 5 is out of range for rank 3");
  stax_attr_t select = stax_attr_int("select_last_index", 2);
  CHECK_ERROR(shape_test_node(g, STAX_OP_ArgMax, "argmax3", 1, &x, 1, &select, 1, NULL),
              STAX_INVALID_ARGUMENT, "'select_last_index' must be 0 or 1");
  stax_graph_destroy(g);
}

static void test_same_shape_ops(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,4");
  stax_value_id_t i = shape_test_input(g, "i", I64, "B,S");
  stax_value_id_t dynamic_axis = shape_test_input(g, "dynamic_axis", I64, "");
  stax_value_id_t float_axis = shape_test_input(g, "float_axis", F32, "");
  stax_value_id_t int32_k = shape_test_input(g, "int32_k", STAX_DTYPE_INT32, "");
  int64_t zero_value = 0, five_value = 5, pair[2] = {0, 1};
  stax_value_id_t zero = shape_test_scalar(g, "zero", zero_value);
  stax_value_id_t five = shape_test_scalar(g, "five", five_value);
  stax_value_id_t two_axes = shape_test_ints(g, "two_axes", 2, pair);
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_Softmax, "softmax", 1, &x, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, S, 4]");
  stax_attr_t axis3 = stax_attr_int("axis", 3);
  CHECK_ERROR(shape_test_node(g, STAX_OP_LogSoftmax, "lsm", 1, &x, 1, &axis3, 1, NULL),
              STAX_OUT_OF_RANGE, "LogSoftmax node 'lsm': axis 3 is out of range for rank 3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Hardmax, "hm", 1, &i, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "expected a floating-point type");
  /* CumSum */
  stax_value_id_t cum[2] = {i, zero};
  CHECK_OK(shape_test_node(g, STAX_OP_CumSum, "cumsum", 2, cum, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, I64, "[B, S]");
  cum[1] = dynamic_axis;
  CHECK_OK(shape_test_node(g, STAX_OP_CumSum, "cumsum_dyn", 2, cum, 0, NULL, 1, &out));
  cum[1] = five;
  CHECK_ERROR(shape_test_node(g, STAX_OP_CumSum, "cumsum2", 2, cum, 0, NULL, 1, NULL),
              STAX_OUT_OF_RANGE, "axis 5 is out of range for rank 2");
  cum[1] = float_axis;
  CHECK_ERROR(shape_test_node(g, STAX_OP_CumSum, "cumsum3", 2, cum, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 1 'float_axis' has dtype float32");
  cum[1] = two_axes;
  CHECK_ERROR(shape_test_node(g, STAX_OP_CumSum, "cumsum4", 2, cum, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 1 'two_axes' (axis) must be a scalar");
  /* Trilu */
  stax_value_id_t tri[2] = {x, zero};
  CHECK_OK(shape_test_node(g, STAX_OP_Trilu, "trilu", 2, tri, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[B, S, 4]");
  tri[1] = int32_k;
  CHECK_ERROR(shape_test_node(g, STAX_OP_Trilu, "trilu2", 2, tri, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "expected int64");
  stax_value_id_t vector = shape_test_input(g, "vector", F32, "4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Trilu, "trilu3", 1, &vector, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 0 'vector' has rank 1, expected at least 2");
  stax_graph_destroy(g);
}

static void test_instance_norm(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,C,H");
  stax_value_id_t x4 = shape_test_input(g, "x4", F32, "N,4,H");
  stax_value_id_t scale = shape_test_input(g, "scale", F32, "C");
  stax_value_id_t bias = shape_test_input(g, "bias", F32, "C");
  stax_value_id_t three = shape_test_input(g, "three", F32, "3");
  stax_value_id_t flat = shape_test_input(g, "flat", F32, "N,C");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t in[3] = {x, scale, bias};
  CHECK_OK(shape_test_node(g, STAX_OP_InstanceNormalization, "in", 3, in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[N, C, H]");
  stax_value_id_t bad[3] = {x4, three, three};
  CHECK_ERROR(shape_test_node(g, STAX_OP_InstanceNormalization, "in2", 3, bad, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "InstanceNormalization node 'in2'");
  stax_value_id_t low_rank[3] = {flat, scale, bias};
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_InstanceNormalization, "in3", 3, low_rank, 0, NULL, 1, NULL),
      STAX_SHAPE_MISMATCH, "input 0 'flat' has rank 2, expected at least 3");
  stax_graph_destroy(g);
}

static void test_lrn(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,C,H,W");
  stax_value_id_t x3 = shape_test_input(g, "x3", F32, "N,96,S");
  stax_value_id_t flat = shape_test_input(g, "flat", F32, "N,C");
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "N,C,H");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_attr_t five = stax_attr_int("size", 5);
  CHECK_OK(shape_test_node(g, STAX_OP_LRN, "lrn", 1, &x, 1, &five, 1, &out));
  CHECK_VALUE(g, out, F32, "[N, C, H, W]");
  stax_attr_t all[4] = {stax_attr_int("size", 2), stax_attr_float("alpha", 0.5f),
                        stax_attr_float("beta", 1.0f), stax_attr_float("bias", 2.0f)};
  CHECK_OK(shape_test_node(g, STAX_OP_LRN, "lrn3", 1, &x3, 4, all, 1, &out));
  CHECK_VALUE(g, out, F32, "[N, 96, S]");
  /* Errors name the node, the input and the channel dim. */
  CHECK_ERROR(shape_test_node(g, STAX_OP_LRN, "e1", 1, &x, 0, NULL, 1, NULL),
              STAX_INVALID_ARGUMENT,
              "LRN node 'e1': attribute 'size' (how many channels of input 0 'x' dim 1 to sum "
              "over) is required");
  stax_attr_t zero = stax_attr_int("size", 0);
  CHECK_ERROR(shape_test_node(g, STAX_OP_LRN, "e2", 1, &x, 1, &zero, 1, NULL),
              STAX_INVALID_ARGUMENT,
              "LRN node 'e2': attribute 'size' is 0; it counts channels of input 0 'x' dim 1 and "
              "must be positive");
  CHECK_ERROR(shape_test_node(g, STAX_OP_LRN, "e3", 1, &flat, 1, &five, 1, NULL),
              STAX_SHAPE_MISMATCH,
              "LRN node 'e3': input 0 'flat' has rank 2; LRN needs (N, C, D1, ...), rank >= 3");
  CHECK_ERROR(shape_test_node(g, STAX_OP_LRN, "e4", 1, &ints, 1, &five, 1, NULL),
              STAX_DTYPE_MISMATCH, "LRN node 'e4'");
  /* A float size is the wrong attribute type: add_node refuses it by the schema. */
  stax_attr_t float_size = stax_attr_float("size", 3.0f);
  CHECK_ERROR(shape_test_node(g, STAX_OP_LRN, "e5", 1, &x, 1, &float_size, 1, NULL),
              STAX_INVALID_ARGUMENT, "size");
  stax_graph_destroy(g);
}

static void test_losses(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t scores = shape_test_input(g, "scores", F32, "N,C,D");
  stax_value_id_t target = shape_test_input(g, "target", I64, "N,D");
  stax_value_id_t weight = shape_test_input(g, "weight", F32, "C");
  stax_value_id_t fixed = shape_test_input(g, "fixed", F32, "3,5,7");
  stax_value_id_t wrong_target = shape_test_input(g, "wrong_target", I64, "3,8");
  stax_value_id_t float_target = shape_test_input(g, "float_target", F32, "N,D");
  stax_value_id_t flat_target = shape_test_input(g, "flat_target", I64, "N");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_attr_t none = stax_attr_string("reduction", "none");
  stax_value_id_t in[3] = {scores, target, weight};
  CHECK_OK(shape_test_node(g, STAX_OP_NegativeLogLikelihoodLoss, "nll", 3, in, 1, &none, 1, &out));
  CHECK_VALUE(g, out, F32, "[N, D]");
  CHECK_OK(
      shape_test_node(g, STAX_OP_NegativeLogLikelihoodLoss, "nll_mean", 2, in, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[]");
  stax_value_id_t outs[2] = {STAX_VALUE_NONE, STAX_VALUE_NONE};
  CHECK_OK(shape_test_node(g, STAX_OP_SoftmaxCrossEntropyLoss, "sce", 3, in, 1, &none, 2, outs));
  CHECK_VALUE(g, outs[0], F32, "[N, D]");
  CHECK_VALUE(g, outs[1], F32, "[N, C, D]");
  stax_attr_t sum = stax_attr_string("reduction", "sum");
  CHECK_OK(shape_test_node(g, STAX_OP_SoftmaxCrossEntropyLoss, "sce2", 2, in, 1, &sum, 1, outs));
  CHECK_VALUE(g, outs[0], F32, "[]");

  stax_attr_t bogus = stax_attr_string("reduction", "avg");
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_NegativeLogLikelihoodLoss, "e1", 2, in, 1, &bogus, 1, NULL),
      STAX_INVALID_ARGUMENT, "got \"avg\"");
  stax_value_id_t bad_target[2] = {fixed, wrong_target};
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_NegativeLogLikelihoodLoss, "e2", 2, bad_target, 0, NULL, 1, NULL),
      STAX_SHAPE_MISMATCH, "NegativeLogLikelihoodLoss node 'e2'");
  stax_value_id_t float_in[2] = {scores, float_target};
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_NegativeLogLikelihoodLoss, "e3", 2, float_in, 0, NULL, 1, NULL),
      STAX_DTYPE_MISMATCH, "input 1 'float_target' has dtype float32, expected int32 or int64");
  stax_value_id_t flat_in[2] = {scores, flat_target};
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_SoftmaxCrossEntropyLoss, "e4", 2, flat_in, 0, NULL, 1, NULL),
      STAX_SHAPE_MISMATCH, "input 1 'flat_target' has rank 1, expected 2");
  stax_value_id_t bad_weight[3] = {scores, target, target};
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_SoftmaxCrossEntropyLoss, "e5", 3, bad_weight, 0, NULL, 1, NULL),
      STAX_DTYPE_MISMATCH, "input 2 'target' has dtype int64");
  stax_graph_destroy(g);
}

static void test_layer_norm(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", STAX_DTYPE_FLOAT16, "B,S,64");
  stax_value_id_t scale = shape_test_input(g, "scale", STAX_DTYPE_FLOAT16, "64");
  stax_value_id_t bias = shape_test_input(g, "bias", STAX_DTYPE_FLOAT16, "64");
  stax_value_id_t plane = shape_test_input(g, "plane", STAX_DTYPE_FLOAT16, "S,64");
  stax_value_id_t wrong = shape_test_input(g, "wrong", STAX_DTYPE_FLOAT16, "32");
  stax_value_id_t f32 = shape_test_input(g, "f32", F32, "64");
  stax_value_id_t outs[3] = {STAX_VALUE_NONE, STAX_VALUE_NONE, STAX_VALUE_NONE};
  stax_value_id_t in[3] = {x, scale, bias};
  CHECK_OK(shape_test_node(g, STAX_OP_LayerNormalization, "ln", 3, in, 0, NULL, 3, outs));
  CHECK_VALUE(g, outs[0], STAX_DTYPE_FLOAT16, "[B, S, 64]");
  CHECK_VALUE(g, outs[1], F32, "[B, S, 1]");
  CHECK_VALUE(g, outs[2], F32, "[B, S, 1]");
  stax_attr_t axis1 = stax_attr_int("axis", 1);
  stax_value_id_t plane_in[2] = {x, plane};
  CHECK_OK(shape_test_node(g, STAX_OP_LayerNormalization, "ln2", 2, plane_in, 1, &axis1, 2, outs));
  CHECK_VALUE(g, outs[1], F32, "[B, 1, 1]");
  stax_attr_t stash = stax_attr_int("stash_type", 11);
  CHECK_OK(shape_test_node(g, STAX_OP_LayerNormalization, "ln3", 2, in, 1, &stash, 2, outs));
  CHECK_VALUE(g, outs[1], STAX_DTYPE_FLOAT64, "[B, S, 1]");

  CHECK_ERROR(shape_test_node(g, STAX_OP_LayerNormalization, "e1", 2, plane_in, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 1 'plane' has rank 2, more than the 1 normalized dims");
  stax_value_id_t wrong_in[2] = {x, wrong};
  CHECK_ERROR(shape_test_node(g, STAX_OP_LayerNormalization, "e2", 2, wrong_in, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 1 'wrong' dim 0 (32) to input 0 'x' dim 2 (64)");
  stax_value_id_t f32_in[2] = {x, f32};
  CHECK_ERROR(shape_test_node(g, STAX_OP_LayerNormalization, "e3", 2, f32_in, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 1 'f32' has dtype float32");
  stax_attr_t int_stash = stax_attr_int("stash_type", 7);
  CHECK_ERROR(shape_test_node(g, STAX_OP_LayerNormalization, "e4", 2, in, 1, &int_stash, 1, NULL),
              STAX_INVALID_ARGUMENT, "'stash_type' = 7 is not a floating-point dtype");
  stax_attr_t axis3 = stax_attr_int("axis", 3);
  CHECK_ERROR(shape_test_node(g, STAX_OP_LayerNormalization, "e5", 2, in, 1, &axis3, 1, NULL),
              STAX_OUT_OF_RANGE, "axis 3 is out of range for rank 3");
  stax_value_id_t no_scale[2] = {x, STAX_VALUE_NONE};
  CHECK_ERROR(shape_test_node(g, STAX_OP_LayerNormalization, "e6", 2, no_scale, 0, NULL, 1, NULL),
              STAX_INVALID_ARGUMENT, "LayerNormalization node 'e6': input 1 is required");
  stax_graph_destroy(g);
}

static void test_batch_norm(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,C,H,W");
  stax_value_id_t c = shape_test_input(g, "c", F32, "C");
  stax_value_id_t x8 = shape_test_input(g, "x8", F32, "N,8,H,W");
  stax_value_id_t four = shape_test_input(g, "four", F32, "4");
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "N,C");
  stax_value_id_t vector = shape_test_input(g, "vector", F32, "C");
  stax_value_id_t outs[3] = {STAX_VALUE_NONE, STAX_VALUE_NONE, STAX_VALUE_NONE};
  stax_value_id_t in[5] = {x, c, c, c, c};
  stax_attr_t training = stax_attr_int("training_mode", 1);
  CHECK_OK(shape_test_node(g, STAX_OP_BatchNormalization, "bn", 5, in, 1, &training, 3, outs));
  CHECK_VALUE(g, outs[0], F32, "[N, C, H, W]");
  CHECK_VALUE(g, outs[1], F32, "[C]");
  CHECK_VALUE(g, outs[2], F32, "[C]");
  CHECK_OK(shape_test_node(g, STAX_OP_BatchNormalization, "bn1", 5, in, 0, NULL, 1, outs));
  CHECK_VALUE(g, outs[0], F32, "[N, C, H, W]");
  stax_value_id_t bad[5] = {x8, four, four, four, four};
  CHECK_ERROR(shape_test_node(g, STAX_OP_BatchNormalization, "e1", 5, bad, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "BatchNormalization node 'e1'");
  stax_value_id_t int_in[5] = {ints, c, c, c, c};
  CHECK_ERROR(shape_test_node(g, STAX_OP_BatchNormalization, "e2", 5, int_in, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 0 'ints' has dtype int64");
  stax_value_id_t rank1[5] = {vector, c, c, c, c};
  CHECK_ERROR(shape_test_node(g, STAX_OP_BatchNormalization, "e3", 5, rank1, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 0 'vector' has rank 1, expected at least 2");
  stax_attr_t bad_training = stax_attr_int("training_mode", 3);
  CHECK_ERROR(
      shape_test_node(g, STAX_OP_BatchNormalization, "e4", 5, in, 1, &bad_training, 1, NULL),
      STAX_INVALID_ARGUMENT, "'training_mode' must be 0 or 1");
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_reduce_axes_input), STAX_TEST(test_reduce_axes_attribute),
               STAX_TEST(test_reduce_errors), STAX_TEST(test_reduce_content),
               STAX_TEST(test_arg_reduce), STAX_TEST(test_same_shape_ops),
               STAX_TEST(test_instance_norm), STAX_TEST(test_lrn), STAX_TEST(test_losses),
               STAX_TEST(test_layer_norm), STAX_TEST(test_batch_norm))
