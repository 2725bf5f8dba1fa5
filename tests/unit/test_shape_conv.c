/* Shape inference for Conv, ConvTranspose, MaxPool/AveragePool and the global pools:
 * symbolic output sizes for every auto_pad mode, strides, dilations, pads, ceil_mode,
 * output_padding/output_shape, groups, and every attribute and shape error. */
#include "shape_test_util.h"

#define F32 STAX_DTYPE_FLOAT32

static stax_status_t conv(stax_graph_t* g, stax_op_t op, const char* name, int32_t input_count,
                          const stax_value_id_t* in, int32_t attr_count, const stax_attr_t* attrs,
                          stax_value_id_t* out) {
  return shape_test_node(g, op, name, input_count, in, attr_count, attrs, 1, out);
}

static void test_conv_symbolic(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,3,H,W");
  stax_value_id_t w = shape_test_input(g, "w", F32, "16,3,3,3");
  stax_value_id_t bias = shape_test_input(g, "bias", F32, "16");
  stax_value_id_t out = STAX_VALUE_NONE;
  int64_t pads[4] = {1, 1, 1, 1}, strides[2] = {2, 2};
  stax_attr_t attrs[2] = {stax_attr_ints("pads", 4, pads), stax_attr_ints("strides", 2, strides)};
  stax_value_id_t in[3] = {x, w, bias};
  CHECK_OK(conv(g, STAX_OP_Conv, "conv", 3, in, 2, attrs, &out));
  /* floor((H + 2 - 3)/2) + 1 in canonical form; equal to ceil(H/2) */
  CHECK_VALUE(g, out, F32, "[N, 16, floor((H + 1)/2), floor((W + 1)/2)]");
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  const stax_dim_t* h = shape_test_dim(g, "H");
  CHECK(stax_dim_known_equal(ctx, stax_value_dims(g, out)[2],
                             stax_dim_ceildiv(ctx, h, stax_dim_const(ctx, 2))));
  /* stride 1 with pads 1 keeps the size */
  CHECK_OK(conv(g, STAX_OP_Conv, "same_size", 2, in, 1, attrs, &out));
  CHECK_VALUE(g, out, F32, "[N, 16, H, W]");
  stax_attr_t same[2] = {stax_attr_string("auto_pad", "SAME_UPPER"),
                         stax_attr_ints("strides", 2, strides)};
  CHECK_OK(conv(g, STAX_OP_Conv, "same", 2, in, 2, same, &out));
  CHECK_VALUE(g, out, F32, "[N, 16, floor((H + 1)/2), floor((W + 1)/2)]");
  stax_attr_t same_lower = stax_attr_string("auto_pad", "SAME_LOWER");
  CHECK_OK(conv(g, STAX_OP_Conv, "same_lower", 2, in, 1, &same_lower, &out));
  CHECK_VALUE(g, out, F32, "[N, 16, H, W]");
  stax_attr_t valid[2] = {stax_attr_string("auto_pad", "VALID"),
                          stax_attr_ints("strides", 2, strides)};
  CHECK_OK(conv(g, STAX_OP_Conv, "valid", 2, in, 2, valid, &out));
  CHECK_VALUE(g, out, F32, "[N, 16, floor((H + 1)/2) - 1, floor((W + 1)/2) - 1]");
  stax_graph_destroy(g);
}

static void test_conv_constant(void) {
  stax_graph_t* g = shape_test_graph();
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  stax_value_id_t x = shape_test_input(g, "x", F32, "1,C,32,32");
  stax_value_id_t w = shape_test_input(g, "w", F32, "8,3,5,5");
  stax_value_id_t x1 = shape_test_input(g, "x1", F32, "2,4,L");
  stax_value_id_t w1 = shape_test_input(g, "w1", F32, "6,4,3");
  stax_value_id_t x3 = shape_test_input(g, "x3", F32, "1,2,9,9,9");
  stax_value_id_t w3 = shape_test_input(g, "w3", F32, "4,2,3,3,3");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t in[2] = {x, w};
  CHECK_OK(conv(g, STAX_OP_Conv, "plain", 2, in, 0, NULL, &out));
  CHECK_VALUE(g, out, F32, "[1, 8, 28, 28]");
  /* the symbolic channel count was pinned by the weights */
  CHECK(stax_dim_known_equal(ctx, shape_test_dim(g, "C"), stax_dim_const(ctx, 3)));
  int64_t dilations[2] = {2, 2};
  stax_attr_t dilated = stax_attr_ints("dilations", 2, dilations);
  CHECK_OK(conv(g, STAX_OP_Conv, "dilated", 2, in, 1, &dilated, &out));
  CHECK_VALUE(g, out, F32, "[1, 8, 24, 24]");
  int64_t kernel[2] = {5, 5};
  stax_attr_t kernel_shape = stax_attr_ints("kernel_shape", 2, kernel);
  CHECK_OK(conv(g, STAX_OP_Conv, "kernel", 2, in, 1, &kernel_shape, &out));
  CHECK_VALUE(g, out, F32, "[1, 8, 28, 28]");
  /* 1-D and 3-D */
  stax_value_id_t in1[2] = {x1, w1};
  CHECK_OK(conv(g, STAX_OP_Conv, "conv1d", 2, in1, 0, NULL, &out));
  CHECK_VALUE(g, out, F32, "[2, 6, L - 2]");
  stax_value_id_t in3[2] = {x3, w3};
  int64_t strides3[3] = {2, 2, 2};
  stax_attr_t stride3 = stax_attr_ints("strides", 3, strides3);
  CHECK_OK(conv(g, STAX_OP_Conv, "conv3d", 2, in3, 1, &stride3, &out));
  CHECK_VALUE(g, out, F32, "[1, 4, 4, 4, 4]");
  stax_graph_destroy(g);
}

static void test_conv_groups(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,4,H,W");
  stax_value_id_t w = shape_test_input(g, "w", F32, "8,2,3,3");
  stax_value_id_t x8 = shape_test_input(g, "x8", F32, "N,8,H,W");
  stax_value_id_t w6 = shape_test_input(g, "w6", F32, "6,2,3,3");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t in[2] = {x, w};
  stax_attr_t group2 = stax_attr_int("group", 2);
  CHECK_OK(conv(g, STAX_OP_Conv, "grouped", 2, in, 1, &group2, &out));
  CHECK_VALUE(g, out, F32, "[N, 8, H - 2, W - 2]");
  stax_value_id_t w_six = shape_test_input(g, "w_six", F32, "6,2,3,3");
  stax_value_id_t six_in[2] = {x, w_six};
  stax_attr_t group3 = stax_attr_int("group", 3);
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e1", 2, six_in, 1, &group3, NULL), STAX_SHAPE_MISMATCH,
              "Conv node 'e1': input 0 'x' has 4 channels (dim 1) but input 1 'w_six' dim 1 (2) "
              "x group 3 = 6");
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e1b", 2, in, 1, &group3, NULL), STAX_SHAPE_MISMATCH,
              "input 1 'w' dim 0 (8) is not divisible by group 3");
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e2", 2, in, 0, NULL, NULL), STAX_SHAPE_MISMATCH,
              "input 0 'x' has 4 channels (dim 1) but input 1 'w' dim 1 (2) x group 1 = 2");
  stax_value_id_t in6[2] = {x8, w6};
  stax_attr_t group4 = stax_attr_int("group", 4);
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e3", 2, in6, 1, &group4, NULL), STAX_SHAPE_MISMATCH,
              "input 1 'w6' dim 0 (6) is not divisible by group 4");
  stax_attr_t group0 = stax_attr_int("group", 0);
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e4", 2, in, 1, &group0, NULL), STAX_INVALID_ARGUMENT,
              "attribute 'group' = 0 must be >= 1");
  stax_graph_destroy(g);
}

static void test_conv_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,3,H,W");
  stax_value_id_t w = shape_test_input(g, "w", F32, "16,3,3,3");
  stax_value_id_t small = shape_test_input(g, "small", F32, "1,3,2,2");
  stax_value_id_t flat = shape_test_input(g, "flat", F32, "N,3");
  stax_value_id_t w3 = shape_test_input(g, "w3", F32, "16,3,3");
  stax_value_id_t bias8 = shape_test_input(g, "bias8", F32, "8");
  stax_value_id_t ints = shape_test_input(g, "ints", STAX_DTYPE_INT64, "N,3,H,W");
  stax_value_id_t in[3] = {x, w, bias8};
  int64_t one[1] = {1}, zeros[2] = {0, 0}, minus[4] = {0, -1, 0, 0}, ones4[4] = {1, 1, 1, 1};
  int64_t kernel5[2] = {5, 5};
  stax_attr_t strides1 = stax_attr_ints("strides", 1, one);
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e1", 2, in, 1, &strides1, NULL), STAX_INVALID_ARGUMENT,
              "attribute 'strides' has 1 values, expected 2");
  stax_attr_t strides0 = stax_attr_ints("strides", 2, zeros);
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e2", 2, in, 1, &strides0, NULL), STAX_INVALID_ARGUMENT,
              "attribute 'strides'[0] = 0 must be at least 1");
  stax_attr_t negative_pads = stax_attr_ints("pads", 4, minus);
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e3", 2, in, 1, &negative_pads, NULL), STAX_INVALID_ARGUMENT,
              "attribute 'pads'[1] = -1 must be at least 0");
  stax_attr_t bogus = stax_attr_string("auto_pad", "SAME");
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e4", 2, in, 1, &bogus, NULL), STAX_INVALID_ARGUMENT,
              "got \"SAME\"");
  stax_attr_t pads_and_same[2] = {stax_attr_string("auto_pad", "SAME_UPPER"),
                                  stax_attr_ints("pads", 4, ones4)};
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e5", 2, in, 2, pads_and_same, NULL), STAX_INVALID_ARGUMENT,
              "attribute 'pads' cannot be combined with auto_pad \"SAME_UPPER\"");
  stax_attr_t kernel_shape = stax_attr_ints("kernel_shape", 2, kernel5);
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e6", 2, in, 1, &kernel_shape, NULL), STAX_SHAPE_MISMATCH,
              "attribute 'kernel_shape'[0] = 5 but input 1 'w' dim 2 is 3");
  stax_value_id_t small_in[2] = {small, w};
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e7", 2, small_in, 0, NULL, NULL), STAX_SHAPE_MISMATCH,
              "input 0 'small' dim 2 (2) is too small for the window: the output size 0 is less "
              "than 1");
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e8", 3, in, 0, NULL, NULL), STAX_SHAPE_MISMATCH,
              "Conv node 'e8'");
  stax_value_id_t flat_in[2] = {flat, w};
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e9", 2, flat_in, 0, NULL, NULL), STAX_SHAPE_MISMATCH,
              "input 0 'flat' has rank 2, expected 3 to 8");
  stax_value_id_t w3_in[2] = {x, w3};
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e10", 2, w3_in, 0, NULL, NULL), STAX_SHAPE_MISMATCH,
              "input 1 'w3' has rank 3, expected 4");
  stax_value_id_t int_in[2] = {ints, w};
  CHECK_ERROR(conv(g, STAX_OP_Conv, "e11", 2, int_in, 0, NULL, NULL), STAX_DTYPE_MISMATCH,
              "input 0 'ints' has dtype int64, expected a floating-point type");
  CHECK_EQ_INT(stax_graph_node_count(g), 0);
  stax_graph_destroy(g);
}

static void test_conv_transpose(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,16,H,W");
  stax_value_id_t w = shape_test_input(g, "w", F32, "16,4,3,3");
  stax_value_id_t bias = shape_test_input(g, "bias", F32, "8");
  stax_value_id_t small = shape_test_input(g, "small", F32, "1,4,5,5");
  stax_value_id_t small_w = shape_test_input(g, "small_w", F32, "4,2,3,3");
  stax_value_id_t out = STAX_VALUE_NONE;
  int64_t strides[2] = {2, 2}, pads[4] = {1, 1, 1, 1}, output_padding[2] = {1, 1};
  stax_attr_t upsample[4] = {stax_attr_ints("strides", 2, strides), stax_attr_ints("pads", 4, pads),
                             stax_attr_ints("output_padding", 2, output_padding),
                             stax_attr_int("group", 2)};
  stax_value_id_t in[3] = {x, w, bias};
  CHECK_OK(conv(g, STAX_OP_ConvTranspose, "up", 3, in, 4, upsample, &out));
  CHECK_VALUE(g, out, F32, "[N, 8, 2*H, 2*W]");
  stax_attr_t same[2] = {stax_attr_string("auto_pad", "SAME_UPPER"),
                         stax_attr_ints("strides", 2, strides)};
  CHECK_OK(conv(g, STAX_OP_ConvTranspose, "same", 2, in, 2, same, &out));
  CHECK_VALUE(g, out, F32, "[N, 4, 2*H, 2*W]");
  int64_t shape2[2] = {10, 12}, shape4[4] = {1, 4, 10, 12};
  stax_attr_t output_shape = stax_attr_ints("output_shape", 2, shape2);
  CHECK_OK(conv(g, STAX_OP_ConvTranspose, "shaped", 2, in, 1, &output_shape, &out));
  CHECK_VALUE(g, out, F32, "[N, 4, 10, 12]");
  stax_attr_t output_shape4 = stax_attr_ints("output_shape", 4, shape4);
  CHECK_OK(conv(g, STAX_OP_ConvTranspose, "shaped4", 2, in, 1, &output_shape4, &out));
  CHECK_VALUE(g, out, F32, "[N, 4, 10, 12]");
  stax_value_id_t small_in[2] = {small, small_w};
  CHECK_OK(conv(g, STAX_OP_ConvTranspose, "plain", 2, small_in, 0, NULL, &out));
  CHECK_VALUE(g, out, F32, "[1, 2, 7, 7]");
  stax_attr_t valid = stax_attr_string("auto_pad", "VALID");
  CHECK_OK(conv(g, STAX_OP_ConvTranspose, "valid", 2, small_in, 1, &valid, &out));
  CHECK_VALUE(g, out, F32, "[1, 2, 7, 7]");

  /* errors */
  int64_t big_padding[2] = {2, 2}, bad_shape[3] = {1, 2, 3};
  stax_attr_t too_much[2] = {stax_attr_ints("strides", 2, strides),
                             stax_attr_ints("output_padding", 2, big_padding)};
  CHECK_ERROR(conv(g, STAX_OP_ConvTranspose, "e1", 2, in, 2, too_much, NULL),
              STAX_INVALID_ARGUMENT,
              "attribute 'output_padding'[0] = 2 must be less than the stride (2) or the "
              "dilation (1)");
  stax_attr_t wrong_shape = stax_attr_ints("output_shape", 3, bad_shape);
  CHECK_ERROR(conv(g, STAX_OP_ConvTranspose, "e2", 2, in, 1, &wrong_shape, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'output_shape' has 3 values, expected 2");
  stax_value_id_t mismatched[2] = {small, w};
  CHECK_ERROR(conv(g, STAX_OP_ConvTranspose, "e3", 2, mismatched, 0, NULL, NULL),
              STAX_SHAPE_MISMATCH,
              "input 0 'small' has 4 channels (dim 1) but input 1 'w' dim 0 (16)");
  stax_attr_t group3 = stax_attr_int("group", 3);
  CHECK_ERROR(conv(g, STAX_OP_ConvTranspose, "e4", 2, in, 1, &group3, NULL),
              STAX_SHAPE_MISMATCH, "input 0 'x' dim 1 (16) is not divisible by group 3");
  CHECK_ERROR(conv(g, STAX_OP_ConvTranspose, "e5", 3, in, 0, NULL, NULL), STAX_SHAPE_MISMATCH,
              "ConvTranspose node 'e5'");
  int64_t big_pads[4] = {5, 5, 5, 5};
  stax_attr_t crop = stax_attr_ints("pads", 4, big_pads);
  CHECK_ERROR(conv(g, STAX_OP_ConvTranspose, "e6", 2, small_in, 1, &crop, NULL),
              STAX_SHAPE_MISMATCH, "the output size -3 is less than 1");
  stax_graph_destroy(g);
}

static void test_pools(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,C,H,W");
  stax_value_id_t five = shape_test_input(g, "five", F32, "1,1,5,5");
  stax_value_id_t six = shape_test_input(g, "six", F32, "1,1,6");
  stax_value_id_t bytes = shape_test_input(g, "bytes", STAX_DTYPE_INT8, "1,1,4,4");
  stax_value_id_t outs[2] = {STAX_VALUE_NONE, STAX_VALUE_NONE};
  int64_t kernel2[2] = {2, 2}, strides2[2] = {2, 2}, kernel3[2] = {3, 3}, pads1[4] = {1, 1, 1, 1};
  stax_attr_t halve[2] = {stax_attr_ints("kernel_shape", 2, kernel2),
                          stax_attr_ints("strides", 2, strides2)};
  CHECK_OK(shape_test_node(g, STAX_OP_MaxPool, "max", 1, &x, 2, halve, 2, outs));
  CHECK_VALUE(g, outs[0], F32, "[N, C, floor(H/2), floor(W/2)]");
  CHECK_VALUE(g, outs[1], STAX_DTYPE_INT64, "[N, C, floor(H/2), floor(W/2)]");
  stax_attr_t padded[2] = {stax_attr_ints("kernel_shape", 2, kernel3),
                           stax_attr_ints("pads", 4, pads1)};
  CHECK_OK(shape_test_node(g, STAX_OP_AveragePool, "avg", 1, &x, 2, padded, 1, outs));
  CHECK_VALUE(g, outs[0], F32, "[N, C, H, W]");
  stax_attr_t floor_mode[2] = {stax_attr_ints("kernel_shape", 2, kernel2),
                               stax_attr_ints("strides", 2, strides2)};
  CHECK_OK(shape_test_node(g, STAX_OP_MaxPool, "floor5", 1, &five, 2, floor_mode, 1, outs));
  CHECK_VALUE(g, outs[0], F32, "[1, 1, 2, 2]");
  stax_attr_t ceil_mode[3] = {stax_attr_ints("kernel_shape", 2, kernel2),
                              stax_attr_ints("strides", 2, strides2),
                              stax_attr_int("ceil_mode", 1)};
  CHECK_OK(shape_test_node(g, STAX_OP_MaxPool, "ceil5", 1, &five, 3, ceil_mode, 1, outs));
  CHECK_VALUE(g, outs[0], F32, "[1, 1, 3, 3]");
  /* ceil_mode drops a last window that would start in the end padding */
  int64_t kernel1[1] = {1}, stride2[1] = {2}, end_pad[2] = {0, 1};
  stax_attr_t drop_last[4] = {stax_attr_ints("kernel_shape", 1, kernel1),
                              stax_attr_ints("strides", 1, stride2),
                              stax_attr_ints("pads", 2, end_pad), stax_attr_int("ceil_mode", 1)};
  CHECK_OK(shape_test_node(g, STAX_OP_AveragePool, "drop_last", 1, &six, 4, drop_last, 1, outs));
  CHECK_VALUE(g, outs[0], F32, "[1, 1, 3]");
  CHECK_OK(shape_test_node(g, STAX_OP_MaxPool, "bytes", 1, &bytes, 2, halve, 1, outs));
  CHECK_VALUE(g, outs[0], STAX_DTYPE_INT8, "[1, 1, 2, 2]");
  stax_attr_t same[3] = {stax_attr_ints("kernel_shape", 2, kernel3),
                         stax_attr_ints("strides", 2, strides2),
                         stax_attr_string("auto_pad", "SAME_LOWER")};
  CHECK_OK(shape_test_node(g, STAX_OP_AveragePool, "same", 1, &x, 3, same, 1, outs));
  CHECK_VALUE(g, outs[0], F32, "[N, C, floor((H + 1)/2), floor((W + 1)/2)]");
  stax_graph_destroy(g);
}

static void test_pool_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,C,H,W");
  stax_value_id_t bytes = shape_test_input(g, "bytes", STAX_DTYPE_INT8, "1,1,4,4");
  stax_value_id_t tiny = shape_test_input(g, "tiny", F32, "1,1,2,2");
  stax_value_id_t flat = shape_test_input(g, "flat", F32, "N,C");
  int64_t kernel2[2] = {2, 2}, kernel1[1] = {1}, kernel3[2] = {3, 3};
  CHECK_ERROR(shape_test_node(g, STAX_OP_MaxPool, "e1", 1, &x, 0, NULL, 1, NULL),
              STAX_INVALID_ARGUMENT, "MaxPool node 'e1': attribute 'kernel_shape' is required");
  stax_attr_t short_kernel = stax_attr_ints("kernel_shape", 1, kernel1);
  CHECK_ERROR(shape_test_node(g, STAX_OP_AveragePool, "e2", 1, &x, 1, &short_kernel, 1, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'kernel_shape' has 1 values, expected 2");
  stax_attr_t storage[2] = {stax_attr_ints("kernel_shape", 2, kernel2),
                            stax_attr_int("storage_order", 2)};
  CHECK_ERROR(shape_test_node(g, STAX_OP_MaxPool, "e3", 1, &x, 2, storage, 1, NULL),
              STAX_INVALID_ARGUMENT, "'storage_order' must be 0 or 1");
  stax_attr_t count_pad[2] = {stax_attr_ints("kernel_shape", 2, kernel2),
                              stax_attr_int("count_include_pad", 5)};
  CHECK_ERROR(shape_test_node(g, STAX_OP_AveragePool, "e4", 1, &x, 2, count_pad, 1, NULL),
              STAX_INVALID_ARGUMENT, "'count_include_pad' must be 0 or 1, got 5");
  stax_attr_t kernel = stax_attr_ints("kernel_shape", 2, kernel2);
  CHECK_ERROR(shape_test_node(g, STAX_OP_AveragePool, "e5", 1, &bytes, 1, &kernel, 1, NULL),
              STAX_DTYPE_MISMATCH,
              "input 0 'bytes' has dtype int8, expected a floating-point type");
  stax_attr_t big_kernel = stax_attr_ints("kernel_shape", 2, kernel3);
  CHECK_ERROR(shape_test_node(g, STAX_OP_MaxPool, "e6", 1, &tiny, 1, &big_kernel, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 0 'tiny' dim 2 (2) is too small for the window");
  stax_attr_t ceil_bad[2] = {stax_attr_ints("kernel_shape", 2, kernel2),
                             stax_attr_int("ceil_mode", 4)};
  CHECK_ERROR(shape_test_node(g, STAX_OP_MaxPool, "e7", 1, &x, 2, ceil_bad, 1, NULL),
              STAX_INVALID_ARGUMENT, "'ceil_mode' must be 0 or 1, got 4");
  CHECK_ERROR(shape_test_node(g, STAX_OP_MaxPool, "e8", 1, &flat, 1, &kernel, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 0 'flat' has rank 2, expected 3 to 8");
  CHECK_EQ_INT(stax_graph_node_count(g), 0);
  stax_graph_destroy(g);
}

static void test_global_pools(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,C,H,W");
  stax_value_id_t x1 = shape_test_input(g, "x1", STAX_DTYPE_FLOAT64, "N,C,L");
  stax_value_id_t flat = shape_test_input(g, "flat", F32, "N,C");
  stax_value_id_t ints = shape_test_input(g, "ints", STAX_DTYPE_INT32, "N,C,L");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(shape_test_node(g, STAX_OP_GlobalAveragePool, "gap", 1, &x, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, F32, "[N, C, 1, 1]");
  CHECK_OK(shape_test_node(g, STAX_OP_GlobalMaxPool, "gmp", 1, &x1, 0, NULL, 1, &out));
  CHECK_VALUE(g, out, STAX_DTYPE_FLOAT64, "[N, C, 1]");
  CHECK_ERROR(shape_test_node(g, STAX_OP_GlobalMaxPool, "e1", 1, &flat, 0, NULL, 1, NULL),
              STAX_SHAPE_MISMATCH, "input 0 'flat' has rank 2");
  CHECK_ERROR(shape_test_node(g, STAX_OP_GlobalAveragePool, "e2", 1, &ints, 0, NULL, 1, NULL),
              STAX_DTYPE_MISMATCH, "input 0 'ints' has dtype int32");
  stax_graph_destroy(g);
}

/* Weights that are graph inputs: the kernel size is symbolic too. */
static void test_conv_symbolic_kernel(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "N,C,H,W");
  stax_value_id_t w = shape_test_input(g, "w", F32, "M,C,K,K");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t in[2] = {x, w};
  int64_t dilations[2] = {2, 2};
  stax_attr_t dilated = stax_attr_ints("dilations", 2, dilations);
  CHECK_OK(conv(g, STAX_OP_Conv, "conv", 2, in, 1, &dilated, &out));
  CHECK_VALUE(g, out, F32, "[N, M, H - 2*K + 2, W - 2*K + 2]");
  stax_value_id_t w2 = shape_test_input(g, "w2", F32, "C,P,K,K");
  stax_value_id_t in2[2] = {x, w2};
  CHECK_OK(conv(g, STAX_OP_ConvTranspose, "deconv", 2, in2, 0, NULL, &out));
  CHECK_VALUE(g, out, F32, "[N, P, H + K - 1, W + K - 1]");
  int64_t zero_shape[2] = {0, 4};
  stax_attr_t output_shape = stax_attr_ints("output_shape", 2, zero_shape);
  CHECK_ERROR(conv(g, STAX_OP_ConvTranspose, "e1", 2, in2, 1, &output_shape, NULL),
              STAX_INVALID_ARGUMENT,
              "attribute 'output_shape' value 0 for spatial dim 0 must be at least 1");
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_conv_symbolic), STAX_TEST(test_conv_constant),
               STAX_TEST(test_conv_symbolic_kernel), STAX_TEST(test_conv_groups),
               STAX_TEST(test_conv_errors), STAX_TEST(test_conv_transpose),
               STAX_TEST(test_pools), STAX_TEST(test_pool_errors), STAX_TEST(test_global_pools))
