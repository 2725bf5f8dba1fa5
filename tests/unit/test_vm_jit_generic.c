/* The JIT tier's shape classes (docs/jit.md, "Shape classes"): streams of hundreds of random
 * shapes through programs whose segments compile once as a shape-generic version, each call
 * checked against the interpreter; the statistics say how (one generic compile, no exact
 * ones, fully or partly compiled calls); segments mixing rows-generic groups with groups that
 * need exact versions (a Softmax over the open dim); a layout outside the class (a
 * transposed input) never running the class's kernels; verify mode; and threads running
 * while generic and exact versions compile, get evicted and swap. Skipped without LLVM. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_vm_jit_util.h"
#include "vm/jit_tier_internal.h" /* JIT_SUPPLEMENT_FACTOR, JIT_PROMOTE_FACTOR */

/* ---- programs -------------------------------------------------------------------------------- */

/* Relu(x[B, S, 8] @ w[8, 12] + b) + x2[B, S, 12]: a matmul whose epilogue reads a rows value. */
static stax_program_t* build_matmul_residual(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64), vm_const(g, 8)};
  const stax_dim_t* rdims[3] = {dims[0], dims[1], vm_const(g, 12)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims);
  stax_value_id_t x2 = vm_input(g, "x2", STAX_DTYPE_FLOAT32, 3, rdims);
  float w[96], b[12];
  for (int i = 0; i < 96; i++) w[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
  for (int i = 0; i < 12; i++) b[i] = 0.1f * (float)(i - 6);
  int64_t w_dims[2] = {8, 12}, b_dims[1] = {12};
  stax_value_id_t wv = vm_initializer(g, "w", STAX_DTYPE_FLOAT32, 2, w_dims, w);
  stax_value_id_t bv = vm_initializer(g, "b", STAX_DTYPE_FLOAT32, 1, b_dims, b);
  stax_value_id_t mm = vm_binary(g, STAX_OP_MatMul, "mm", x, wv);
  stax_value_id_t y = vm_unary(g, STAX_OP_Relu, "relu", vm_binary(g, STAX_OP_Add, "bias", mm, bv));
  vm_output(g, vm_binary(g, STAX_OP_Add, "residual", y, x2));
  return finish(g);
}

/* LayerNormalization(x[B, S, 16] + c) then Gelu: a row kernel and its consumer. */
static stax_program_t* build_layernorm(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64),
                               vm_const(g, 16)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims);
  float gamma[16], beta[16], c[16];
  for (int i = 0; i < 16; i++) {
    gamma[i] = 1.0f + 0.05f * (float)i;
    beta[i] = 0.1f * (float)(i % 3);
    c[i] = 0.01f * (float)i;
  }
  int64_t sixteen[1] = {16};
  stax_value_id_t cv = vm_initializer(g, "c", STAX_DTYPE_FLOAT32, 1, sixteen, c);
  stax_value_id_t ln_in[3] = {vm_binary(g, STAX_OP_Add, "shift", x, cv),
                              vm_initializer(g, "gamma", STAX_DTYPE_FLOAT32, 1, sixteen, gamma),
                              vm_initializer(g, "beta", STAX_DTYPE_FLOAT32, 1, sixteen, beta)};
  stax_attr_t attrs[2] = {stax_attr_int("axis", -1), stax_attr_float("epsilon", 1e-5f)};
  stax_value_id_t ln = vm_node(g, STAX_OP_LayerNormalization, "ln", 3, ln_in, 2, attrs);
  vm_output(g, vm_unary(g, STAX_OP_Gelu, "gelu", ln));
  return finish(g);
}

/* Softmax(x[B, S]) over the open dim S (no rows-generic kernel: exact versions) and
 * Sigmoid(x) (rows-generic) in one segment. */
static stax_program_t* build_mixed(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_attr_t axis = stax_attr_int("axis", -1);
  vm_output(g, vm_node(g, STAX_OP_Softmax, "softmax", 1, &x, 1, &axis));
  vm_output(g, vm_unary(g, STAX_OP_Sigmoid, "sigmoid", x));
  return finish(g);
}

/* Two Convs and a Sigmoid (rows-generic) of x[N, 3, H, W]. The Convs pad SAME with stride 3
 * and a 2-wide window (narrower than the stride), whose pads are no quasi-linear function of
 * the size: no shape-generic kernel, only exact ones. */
static stax_program_t* build_convs(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[4] = {vm_symbol(g, "N", 1, 8), vm_const(g, 3), vm_symbol(g, "H", 3, 64),
                               vm_symbol(g, "W", 3, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 4, dims);
  float w[48];
  for (int i = 0; i < 48; i++) w[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
  int64_t w_dims[4] = {4, 3, 2, 2};
  for (int c = 0; c < 2; c++) {
    stax_value_id_t in[2] = {x, vm_initializer(g, c ? "w2" : "w1", STAX_DTYPE_FLOAT32, 4, w_dims,
                                               w)};
    int64_t threes[2] = {3, 3};
    stax_attr_t attrs[2] = {stax_attr_string("auto_pad", "SAME_UPPER"),
                            stax_attr_ints("strides", 2, threes)};
    vm_output(g, vm_node(g, STAX_OP_Conv, c ? "conv2" : "conv1", 2, in, 2, attrs));
  }
  vm_output(g, vm_unary(g, STAX_OP_Sigmoid, "sigmoid", x));
  return finish(g);
}

/* Convs of x[N, 3, 9, 11] with only the batch open: padded with bias and Relu, strided,
 * grouped and dilated with a Sigmoid epilogue, and a residual Add of two convs. */
static stax_program_t* build_batch_convs(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[4] = {vm_symbol(g, "N", 1, 64), vm_const(g, 3), vm_const(g, 9),
                               vm_const(g, 11)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 4, dims);
  float w[216];
  for (int i = 0; i < 216; i++) w[i] = (float)((i * 7) % 17) / 17.0f - 0.5f;
  int64_t w1_dims[4] = {8, 3, 3, 3}, b_dims[1] = {8}, w2_dims[4] = {6, 3, 3, 3},
          w3_dims[4] = {6, 1, 3, 3};
  int64_t one_pads[4] = {1, 1, 1, 1}, two_pads[4] = {2, 2, 2, 2}, twos[2] = {2, 2};
  stax_value_id_t in1[3] = {x, vm_initializer(g, "w1", STAX_DTYPE_FLOAT32, 4, w1_dims, w),
                            vm_initializer(g, "b1", STAX_DTYPE_FLOAT32, 1, b_dims, w + 100)};
  stax_attr_t pads1 = stax_attr_ints("pads", 4, one_pads);
  stax_value_id_t c1 = vm_node(g, STAX_OP_Conv, "conv1", 3, in1, 1, &pads1);
  stax_value_id_t r1 = vm_unary(g, STAX_OP_Relu, "relu1", c1);
  vm_output(g, r1);
  stax_value_id_t in2[2] = {x, vm_initializer(g, "w2", STAX_DTYPE_FLOAT32, 4, w2_dims, w + 7)};
  stax_attr_t strides = stax_attr_ints("strides", 2, twos);
  vm_output(g, vm_node(g, STAX_OP_Conv, "conv2", 2, in2, 1, &strides));
  stax_value_id_t in3[2] = {x, vm_initializer(g, "w3", STAX_DTYPE_FLOAT32, 4, w3_dims, w + 50)};
  stax_attr_t attrs3[3] = {stax_attr_int("group", 3), stax_attr_ints("dilations", 2, twos),
                           stax_attr_ints("pads", 4, two_pads)};
  stax_value_id_t c3 = vm_node(g, STAX_OP_Conv, "conv3", 2, in3, 3, attrs3);
  vm_output(g, vm_unary(g, STAX_OP_Sigmoid, "sigmoid3", c3));
  /* r1 (8 channels) into a 1x1 conv with a residual: Conv(r1) + r1. */
  int64_t w4_dims[4] = {8, 8, 1, 1};
  stax_value_id_t in4[2] = {r1, vm_initializer(g, "w4", STAX_DTYPE_FLOAT32, 4, w4_dims, w + 3)};
  stax_value_id_t c4 = vm_node(g, STAX_OP_Conv, "conv4", 2, in4, 0, NULL);
  vm_output(g, vm_binary(g, STAX_OP_Add, "residual", c4, r1));
  return finish(g);
}

/* Convs of x[N, 4, H, W] with the image size open: pads + bias + Relu, then a residual of
 * its own input; strided (the phase-split copy) and dilated with asymmetric pads and groups;
 * a 1x1 read in place (no copy); a 7x7 stride-2 stem; and auto_pad SAME with strides, whose
 * pads change with the size's remainder: 3x3 stride 2 SAME_UPPER + bias + Relu, 5x5 stride 2
 * SAME_LOWER (begin pads of 1 or 2: as wide as the stride), 2x2 stride 2 (window
 * as wide as the stride), 1x1 stride 2 (pads nothing at any size), and kernel 3x4 with
 * strides 3 and 2, dilation 2 over H. */
static stax_program_t* build_image_convs(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[4] = {vm_symbol(g, "N", 1, 4), vm_const(g, 4), vm_symbol(g, "H", 7, 80),
                               vm_symbol(g, "W", 7, 80)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 4, dims);
  static float w[600];
  for (int i = 0; i < 600; i++) w[i] = (float)((i * 7) % 19) / 19.0f - 0.5f;
  int64_t w1_dims[4] = {4, 4, 3, 3}, b_dims[1] = {4}, w2_dims[4] = {6, 2, 3, 3},
          w3_dims[4] = {5, 4, 1, 1}, w4_dims[4] = {3, 4, 7, 7};
  int64_t ones[4] = {1, 1, 1, 1}, odd_pads[4] = {1, 2, 0, 1}, twos[2] = {2, 2},
          dil[2] = {1, 2}, threes[4] = {3, 3, 3, 3};
  /* Relu(Conv(x) + b) + x: the epilogue reads the conv's own input. */
  stax_value_id_t in1[3] = {x, vm_initializer(g, "w1", STAX_DTYPE_FLOAT32, 4, w1_dims, w),
                            vm_initializer(g, "b1", STAX_DTYPE_FLOAT32, 1, b_dims, w + 300)};
  stax_attr_t pads1 = stax_attr_ints("pads", 4, ones);
  stax_value_id_t c1 = vm_node(g, STAX_OP_Conv, "conv1", 3, in1, 1, &pads1);
  vm_output(g, vm_binary(g, STAX_OP_Add, "residual", vm_unary(g, STAX_OP_Relu, "relu1", c1), x));
  stax_value_id_t in2[2] = {x, vm_initializer(g, "w2", STAX_DTYPE_FLOAT32, 4, w2_dims, w + 11)};
  stax_attr_t attrs2[4] = {stax_attr_int("group", 2), stax_attr_ints("strides", 2, twos),
                           stax_attr_ints("dilations", 2, dil), stax_attr_ints("pads", 4, odd_pads)};
  vm_output(g, vm_node(g, STAX_OP_Conv, "conv2", 2, in2, 4, attrs2));
  stax_value_id_t in3[2] = {x, vm_initializer(g, "w3", STAX_DTYPE_FLOAT32, 4, w3_dims, w + 70)};
  vm_output(g, vm_unary(g, STAX_OP_Sigmoid, "sigmoid3",
                        vm_node(g, STAX_OP_Conv, "conv3", 2, in3, 0, NULL)));
  stax_value_id_t in4[2] = {x, vm_initializer(g, "w4", STAX_DTYPE_FLOAT32, 4, w4_dims, w + 5)};
  stax_attr_t attrs4[2] = {stax_attr_ints("strides", 2, twos), stax_attr_ints("pads", 4, threes)};
  vm_output(g, vm_node(g, STAX_OP_Conv, "conv4", 2, in4, 2, attrs4));
  /* auto_pad SAME with strides over the open sizes. */
  struct {
    const char* name;
    const char* auto_pad;
    int64_t kernel[2], strides[2], dilations[2], out_channels;
    bool bias_relu;
  } same[] = {{"same3x3", "SAME_UPPER", {3, 3}, {2, 2}, {1, 1}, 6, true},
              {"same5x5", "SAME_LOWER", {5, 5}, {2, 2}, {1, 1}, 3, false},
              {"same2x2", "SAME_UPPER", {2, 2}, {2, 2}, {1, 1}, 4, false},
              {"same1x1", "SAME_LOWER", {1, 1}, {2, 2}, {1, 1}, 5, false},
              {"same3x4", "SAME_UPPER", {3, 4}, {3, 2}, {2, 1}, 4, true}};
  for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
    char w_name[16], b_name[16];
    snprintf(w_name, sizeof(w_name), "w_%s", same[i].name);
    snprintf(b_name, sizeof(b_name), "b_%s", same[i].name);
    int64_t wd[4] = {same[i].out_channels, 4, same[i].kernel[0], same[i].kernel[1]};
    int64_t bd[1] = {same[i].out_channels};
    stax_value_id_t in[3] = {x, vm_initializer(g, w_name, STAX_DTYPE_FLOAT32, 4, wd, w + 13 * i),
                             vm_initializer(g, b_name, STAX_DTYPE_FLOAT32, 1, bd, w + 400 + i)};
    stax_attr_t attrs[3] = {stax_attr_string("auto_pad", same[i].auto_pad),
                            stax_attr_ints("strides", 2, same[i].strides),
                            stax_attr_ints("dilations", 2, same[i].dilations)};
    stax_value_id_t conv =
        vm_node(g, STAX_OP_Conv, same[i].name, same[i].bias_relu ? 3 : 2, in, 3, attrs);
    if (same[i].bias_relu) {
      char relu_name[24];
      snprintf(relu_name, sizeof(relu_name), "relu_%s", same[i].name);
      conv = vm_unary(g, STAX_OP_Relu, relu_name, conv);
    }
    vm_output(g, conv);
  }
  return finish(g);
}

/* Convs of x[N, 8, H, W] with the image size open and channels enough for the GEMM over
 * patches on rows narrower than 3.5 native vectors (lower_conv_patch.c; wider rows keep
 * position tiles): 3x3 pad 1 + bias + Relu to 40 channels (an edge panel at 256 bits) with a 1x1
 * conv's output added; 3x3 stride 2 (phase-split rows) to 48; 5x5 pad 2 to 64 + Sigmoid. */
static stax_program_t* build_patch_convs(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[4] = {vm_symbol(g, "N", 1, 3), vm_const(g, 8), vm_symbol(g, "H", 1, 40),
                               vm_symbol(g, "W", 1, 40)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 4, dims);
  static float w[20000];
  for (int i = 0; i < 20000; i++) w[i] = (float)((i * 7) % 23) / 23.0f - 0.5f;
  int64_t w1_dims[4] = {40, 8, 3, 3}, b1_dims[1] = {40}, w2_dims[4] = {48, 40, 3, 3},
          w3_dims[4] = {40, 8, 1, 1}, w4_dims[4] = {64, 8, 5, 5};
  int64_t ones[4] = {1, 1, 1, 1}, twos[2] = {2, 2}, pads2[4] = {2, 2, 2, 2};
  stax_value_id_t in1[3] = {x, vm_initializer(g, "w1", STAX_DTYPE_FLOAT32, 4, w1_dims, w),
                            vm_initializer(g, "b1", STAX_DTYPE_FLOAT32, 1, b1_dims, w + 500)};
  stax_attr_t pads1 = stax_attr_ints("pads", 4, ones);
  stax_value_id_t r1 = vm_unary(g, STAX_OP_Relu, "relu1", vm_node(g, STAX_OP_Conv, "conv1", 3, in1, 1, &pads1));
  stax_value_id_t in3[2] = {x, vm_initializer(g, "w3", STAX_DTYPE_FLOAT32, 4, w3_dims, w + 900)};
  vm_output(g, vm_binary(g, STAX_OP_Add, "sum", r1, vm_node(g, STAX_OP_Conv, "conv3", 2, in3, 0, NULL)));
  stax_value_id_t in2[2] = {r1, vm_initializer(g, "w2", STAX_DTYPE_FLOAT32, 4, w2_dims, w + 1300)};
  stax_attr_t attrs2[2] = {stax_attr_ints("strides", 2, twos), stax_attr_ints("pads", 4, ones)};
  vm_output(g, vm_node(g, STAX_OP_Conv, "conv2", 2, in2, 2, attrs2));
  stax_value_id_t in4[2] = {x, vm_initializer(g, "w4", STAX_DTYPE_FLOAT32, 4, w4_dims, w + 7)};
  stax_attr_t pads4 = stax_attr_ints("pads", 4, pads2);
  vm_output(g, vm_unary(g, STAX_OP_Sigmoid, "sigmoid4",
                        vm_node(g, STAX_OP_Conv, "conv4", 2, in4, 1, &pads4)));
  /* A 1x1 stride-2 downsample: no pads, so its patches read X itself at stride 2. */
  stax_value_id_t in5[2] = {x, vm_initializer(g, "w5", STAX_DTYPE_FLOAT32, 4, w3_dims, w + 77)};
  stax_attr_t strides5 = stax_attr_ints("strides", 2, twos);
  vm_output(g, vm_node(g, STAX_OP_Conv, "conv5", 2, in5, 1, &strides5));
  return finish(g);
}

/* Pools of x[N, 4, H, W] with the image size open: MaxPool 3x3 stride 2 pad 1 + Relu (ResNet's
 * stem), an AveragePool counting its pads, one without pads (stride 2), a dilated MaxPool, a
 * ceil_mode MaxPool whose last windows reach past the padding, an AveragePool not counting its
 * pads, two ceil_mode AveragePools (counting their pads, and without pads), two MaxPools
 * padding SAME with strides, GlobalAveragePool and GlobalMaxPool. */
static stax_program_t* build_image_pools(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[4] = {vm_symbol(g, "N", 1, 4), vm_const(g, 4), vm_symbol(g, "H", 7, 80),
                               vm_symbol(g, "W", 7, 80)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 4, dims);
  int64_t k33[2] = {3, 3}, k32[2] = {3, 2}, k22[2] = {2, 2}, k23[2] = {2, 3}, twos[2] = {2, 2},
          s12[2] = {1, 2}, d21[2] = {2, 1}, ones[4] = {1, 1, 1, 1}, odd[4] = {1, 0, 1, 1};
  stax_attr_t max1[3] = {stax_attr_ints("kernel_shape", 2, k33), stax_attr_ints("strides", 2, twos),
                         stax_attr_ints("pads", 4, ones)};
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", vm_node(g, STAX_OP_MaxPool, "max1", 1, &x, 3, max1)));
  stax_attr_t avg1[4] = {stax_attr_ints("kernel_shape", 2, k32), stax_attr_ints("strides", 2, s12),
                         stax_attr_ints("pads", 4, odd), stax_attr_int("count_include_pad", 1)};
  vm_output(g, vm_node(g, STAX_OP_AveragePool, "avg1", 1, &x, 4, avg1));
  stax_attr_t avg2[2] = {stax_attr_ints("kernel_shape", 2, k22), stax_attr_ints("strides", 2, twos)};
  vm_output(g, vm_node(g, STAX_OP_AveragePool, "avg2", 1, &x, 2, avg2));
  stax_attr_t max2[2] = {stax_attr_ints("kernel_shape", 2, k23), stax_attr_ints("dilations", 2, d21)};
  vm_output(g, vm_node(g, STAX_OP_MaxPool, "max2", 1, &x, 2, max2));
  int64_t s23[2] = {2, 3}, pads3[4] = {0, 1, 1, 0};
  stax_attr_t max3[4] = {stax_attr_ints("kernel_shape", 2, k23), stax_attr_ints("strides", 2, s23),
                         stax_attr_ints("pads", 4, pads3), stax_attr_int("ceil_mode", 1)};
  vm_output(g, vm_node(g, STAX_OP_MaxPool, "max3", 1, &x, 4, max3));
  /* An average over pads it does not count (count_include_pad 0, ONNX's default). */
  stax_attr_t avg3[3] = {stax_attr_ints("kernel_shape", 2, k33), stax_attr_ints("strides", 2, twos),
                         stax_attr_ints("pads", 4, odd)};
  vm_output(g, vm_node(g, STAX_OP_AveragePool, "avg3", 1, &x, 3, avg3));
  /* ceil_mode averages: the last windows reach past the end pad, where no tap counts; one
   * counting its pads (a mask of 1 over the pads), one without pads. */
  stax_attr_t avg4[5] = {stax_attr_ints("kernel_shape", 2, k32), stax_attr_ints("strides", 2, s23),
                         stax_attr_ints("pads", 4, odd), stax_attr_int("count_include_pad", 1),
                         stax_attr_int("ceil_mode", 1)};
  vm_output(g, vm_node(g, STAX_OP_AveragePool, "avg4", 1, &x, 5, avg4));
  stax_attr_t avg5[3] = {stax_attr_ints("kernel_shape", 2, k23), stax_attr_ints("strides", 2, s23),
                         stax_attr_int("ceil_mode", 1)};
  vm_output(g, vm_node(g, STAX_OP_AveragePool, "avg5", 1, &x, 3, avg5));
  /* MaxPool padding SAME with strides (TF-style): the pads change with the size's remainder. */
  stax_attr_t max4[3] = {stax_attr_ints("kernel_shape", 2, k33), stax_attr_ints("strides", 2, twos),
                         stax_attr_string("auto_pad", "SAME_UPPER")};
  vm_output(g, vm_node(g, STAX_OP_MaxPool, "max4", 1, &x, 3, max4));
  stax_attr_t max5[3] = {stax_attr_ints("kernel_shape", 2, k23), stax_attr_ints("strides", 2, s23),
                         stax_attr_string("auto_pad", "SAME_LOWER")};
  vm_output(g, vm_node(g, STAX_OP_MaxPool, "max5", 1, &x, 3, max5));
  vm_output(g, vm_node(g, STAX_OP_GlobalAveragePool, "gap", 1, &x, 0, NULL));
  vm_output(g, vm_node(g, STAX_OP_GlobalMaxPool, "gmp", 1, &x, 0, NULL));
  return finish(g);
}

static stax_context_t* generic_context(stax_program_t* program, stax_jit_mode_t mode,
                                       int32_t versions, bool verify) {
  stax_context_options_t options = {.jit = mode, .jit_threshold = 2, .jit_max_versions = versions,
                                    .jit_verify = verify, .jit_generic = STAX_JIT_GENERIC_ON};
  stax_context_t* context = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &context));
  return context;
}

/* Random (B, S): mostly small, some at the ends of the symbols' range [1, 64], primes. */
static void random_shape(vm_rng_t* rng, int round, int64_t* b, int64_t* s) {
  static const int64_t edges[][2] = {{1, 1}, {64, 64}, {1, 64}, {64, 1}, {1, 11}, {2, 5},
                                     {1, 12}, {1, 13}, {3, 4}, {7, 61}, {8, 53}, {5, 37}};
  int n = (int)(sizeof(edges) / sizeof(edges[0]));
  if (round < n) {
    *b = edges[round][0];
    *s = edges[round][1];
    return;
  }
  *b = vm_rng_range(rng, 1, 8);
  *s = round % 5 == 0 ? vm_rng_range(rng, 40, 64) : vm_rng_range(rng, 1, 40);
}

/* ---- streams --------------------------------------------------------------------------------- */

/* 300 random shapes; one shape-generic compile serves them all. */
static void stream(stax_program_t* program, int32_t inputs, const int64_t* tails) {
  stax_context_t* jit = generic_context(program, STAX_JIT_SYNC, 8, false);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {0xfeed};
  int mismatches = 0, small = 0;
  const int calls = 300;
  for (int round = 0; round < calls; round++) {
    int64_t b = 0, s = 0;
    random_shape(&rng, round, &b, &s);
    if (b * s < 12) small++;
    stax_tensor_t* in[2] = {0};
    for (int32_t i = 0; i < inputs; i++) {
      int64_t dims[3] = {b, s, tails[i]};
      in[i] = vm_random_f32(&rng, 3, dims);
    }
    if (!run_both(jit, interp, inputs, in, 1)) mismatches++;
    for (int32_t i = 0; i < inputs; i++) stax_tensor_release(in[i]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT(total.compiles, 1);
  CHECK_EQ_INT(total.generic_versions, 1);
  CHECK_EQ_INT(total.exact_versions, 0);
  CHECK_EQ_INT(total.failures, 0);
  CHECK_EQ_INT((int)(total.hits + total.misses), calls);
  /* Rows below a matmul tile run its one-row stage: every call fully compiled. */
  CHECK_EQ_INT((int)total.full_hits, calls);
  CHECK(small > 0); /* the stream had such calls */
  stax_jit_call_stats_t call_stats;
  CHECK_OK(stax_program_jit_call_stats(program, &call_stats));
  CHECK_EQ_INT((int)(call_stats.compiled + call_stats.partial + call_stats.interpreted), calls);
  CHECK_EQ_INT((int)call_stats.compiled, (int)total.full_hits);
  CHECK_EQ_INT((int)call_stats.partial, (int)total.partial_hits);
  CHECK_EQ_INT((int)call_stats.interpreted, (int)total.misses);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
}

static void test_stream_matmul(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_matmul_residual();
  int64_t tails[2] = {8, 12};
  stream(program, 2, tails);
  stax_program_release(program);
}

static void test_stream_layernorm(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_layernorm();
  int64_t tails[1] = {16};
  stream(program, 1, tails);
  stax_program_release(program);
}

/* A segment whose Softmax reduces over the open dim: not rows, so the class version runs it
 * as a symbolic kernel beside the rows-generic Sigmoid, and every call, every shape, runs
 * fully compiled from the first (sync mode), with no exact version at all. */
static void test_mixed_generic_exact(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_mixed();
  stax_context_t* jit = generic_context(program, STAX_JIT_SYNC, 8, false);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {42};
  int mismatches = 0;
  static const int64_t seqs[3] = {5, 17, 33};
  for (int round = 0; round < 300; round++) {
    /* Three shapes 50 times each, then random ones (mostly new). */
    int64_t dims[2] = {round < 150 ? 1 + round % 3 : vm_rng_range(&rng, 1, 8),
                       round < 150 ? seqs[round % 3] : vm_rng_range(&rng, 1, 64)};
    stax_tensor_t* in[1] = {vm_random_f32(&rng, 2, dims)};
    if (!run_both(jit, interp, 1, in, 2)) mismatches++;
    stax_tensor_release(in[0]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT(total.generic_versions, 1);
  CHECK_EQ_INT(total.exact_versions, 0);
  CHECK_EQ_INT(total.full_hits, 300);
  CHECK_EQ_INT(total.partial_hits, 0);
  CHECK_EQ_INT((int)total.misses, 0);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

/* 300 calls of a Conv program at the shapes `shape` picks, each against the interpreter:
 * one shape-generic compile serves them all, every call fully compiled from the first (sync
 * mode), no exact version. */
static void conv_stream(stax_program_t* program, int32_t outputs,
                        void (*shape)(vm_rng_t* rng, int round, int64_t* dims)) {
  stax_context_t* jit = generic_context(program, STAX_JIT_SYNC, 8, false);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {0xc0de};
  int mismatches = 0;
  const int calls = 300;
  for (int round = 0; round < calls; round++) {
    int64_t dims[4] = {0};
    shape(&rng, round, dims);
    stax_tensor_t* in[1] = {vm_random_f32(&rng, 4, dims)};
    if (!run_both(jit, interp, 1, in, outputs)) mismatches++;
    stax_tensor_release(in[0]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT(total.compiles, 1);
  CHECK_EQ_INT(total.generic_versions, 1);
  CHECK_EQ_INT(total.exact_versions, 0);
  CHECK_EQ_INT(total.failures, 0);
  CHECK_EQ_INT((int)total.full_hits, calls);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
}

/* Batch sizes 1 to 64: 1, primes, the range's end, mostly small. */
static void batch_shape(vm_rng_t* rng, int round, int64_t* dims) {
  static const int64_t edges[] = {1, 64, 2, 3, 13, 1, 31, 64};
  dims[0] = round < 8 ? edges[round] : round % 7 == 0 ? vm_rng_range(rng, 32, 64)
                                                      : vm_rng_range(rng, 1, 8);
  dims[1] = 3, dims[2] = 9, dims[3] = 11;
}

/* (N, 4, H, W): the range's ends, primes, sizes around every position tile width. */
static void image_shape(vm_rng_t* rng, int round, int64_t* dims) {
  static const int64_t edges[][3] = {{1, 7, 7}, {4, 80, 80}, {1, 7, 80}, {2, 80, 7}, {1, 8, 9},
                                     {1, 16, 17}, {3, 31, 33}, {1, 64, 65}, {2, 13, 15}};
  dims[1] = 4;
  if (round < 9) {
    dims[0] = edges[round][0], dims[2] = edges[round][1], dims[3] = edges[round][2];
    return;
  }
  dims[0] = vm_rng_range(rng, 1, 4);
  dims[2] = vm_rng_range(rng, 7, round % 10 == 0 ? 80 : 24);
  dims[3] = vm_rng_range(rng, 7, round % 10 == 0 ? 80 : 40);
}

/* Convs whose only open dim is the batch get one shape-generic kernel each. */
static void test_stream_conv_batch(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_batch_convs();
  conv_stream(program, 4, batch_shape);
  stax_program_release(program);
}

/* Convs over open image sizes get one shape-generic kernel each. */
static void test_stream_conv_image(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_image_convs();
  conv_stream(program, 9, image_shape);
  stax_program_release(program);
}

/* (N, 8, H, W) from 1x1 to 40x40: planes smaller than a patch tile, rows on both sides of
 * the patches' limit (28 on AVX2), primes. The first image is 1x1: the class's kernels must still
 * take every later size (x's channel stride is H * W, 1 in that example). */
static void patch_shape(vm_rng_t* rng, int round, int64_t* dims) {
  static const int64_t edges[][3] = {{1, 1, 1}, {3, 40, 40}, {2, 2, 2}, {1, 1, 7}, {1, 7, 7},
                                     {2, 14, 14}, {1, 15, 16}, {1, 3, 31}, {3, 5, 33}};
  dims[1] = 8;
  if (round < 9) {
    dims[0] = edges[round][0], dims[2] = edges[round][1], dims[3] = edges[round][2];
    return;
  }
  dims[0] = vm_rng_range(rng, 1, 3);
  dims[2] = vm_rng_range(rng, 1, round % 10 == 0 ? 40 : 16);
  dims[3] = vm_rng_range(rng, 1, round % 10 == 0 ? 40 : 20);
}

/* Convs with many channels over open image sizes (the GEMM over patches for narrow rows) get
 * one shape-generic kernel each. */
static void test_stream_conv_patches(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_patch_convs();
  conv_stream(program, 4, patch_shape);
  stax_program_release(program);
}

/* A kernel's scratch is bounded at each call's sizes (STAX_JIT_SCRATCH_MAX_MB, here 1): the
 * 5x5 conv's patches for 3 x 40 x 12 images (3 x 480 positions x 200 floats, 1.15 MB; rows
 * of 12 take patches at every width) decline and that group is interpreted, the other groups
 * still compiled; small images run fully compiled; every call matches the interpreter. */
static void test_scratch_limit(void) {
  if (!have_backend()) return;
  setenv("STAX_JIT_SCRATCH_MAX_MB", "1", 1);
  stax_program_t* program = build_patch_convs();
  stax_context_t* jit = generic_context(program, STAX_JIT_SYNC, 8, false);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {0x5c4a};
  static const int64_t shapes[][4] = {{3, 8, 40, 12}, {1, 8, 5, 6}, {3, 8, 40, 12}, {2, 8, 9, 9}};
  int mismatches = 0;
  for (int i = 0; i < 4; i++) {
    stax_tensor_t* in[1] = {vm_random_f32(&rng, 4, shapes[i])};
    if (!run_both(jit, interp, 1, in, 4)) mismatches++;
    stax_tensor_release(in[0]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT(total.compiles, 1);
  CHECK_EQ_INT((int)total.partial_hits, 2);
  CHECK_EQ_INT((int)total.full_hits, 2);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
  unsetenv("STAX_JIT_SCRATCH_MAX_MB");
}

/* Pools over open image sizes get one shape-generic kernel each. */
static void test_stream_pool_image(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_image_pools();
  conv_stream(program, 12, image_shape);
  stax_program_release(program);
}

/* A generic version that lacks most of the groups (the Convs) does not hold exact versions
 * back: they come at the plain threshold, so from the second call of a shape on (sync mode
 * compiles within that call) it runs fully compiled. */
static void test_mostly_exact_segment(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_convs();
  stax_context_t* jit = generic_context(program, STAX_JIT_SYNC, 8, false);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {3};
  int mismatches = 0;
  for (int round = 0; round < 6; round++) {
    int64_t dims[4] = {1 + round / 3, 3, 9, 11};
    stax_tensor_t* in[1] = {vm_random_f32(&rng, 4, dims)};
    if (!run_both(jit, interp, 1, in, 3)) mismatches++;
    stax_tensor_release(in[0]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT(total.generic_versions, 1);
  CHECK_EQ_INT(total.exact_versions, 2); /* one per shape, at its second call */
  CHECK_EQ_INT((int)total.full_hits, 4);  /* the second (sync: compiled first) and third */
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

/* An input whose open dims do not walk as rows (a transposed view of [S, B, 8]) has another
 * class signature: the contiguous class's kernels never see it; its own class's version
 * runs the matmul as a symbolic kernel over the view's strides. */
static void test_class_guard_layout(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_matmul_residual();
  stax_context_t* jit = generic_context(program, STAX_JIT_SYNC, 8, false);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {7};
  int mismatches = 0;
  for (int round = 0; round < 40; round++) {
    int64_t b = 2 + round % 3, s = 13;
    int64_t base_dims[3] = {s, b, 8}, dims[3] = {b, s, 8}, rdims[3] = {b, s, 12};
    stax_tensor_t* x = NULL;
    if (round % 2) {
      stax_tensor_t* base = vm_random_f32(&rng, 3, base_dims);
      int32_t perm[3] = {1, 0, 2};
      CHECK_OK(stax_tensor_transpose(vm_alloc(), base, perm, &x));
      stax_tensor_release(base);
    } else {
      x = vm_random_f32(&rng, 3, dims);
    }
    stax_tensor_t* in[2] = {x, vm_random_f32(&rng, 3, rdims)};
    if (!run_both(jit, interp, 2, in, 1)) mismatches++;
    stax_tensor_release(in[0]);
    stax_tensor_release(in[1]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT(total.generic_versions, 2); /* the contiguous class and the transposed one */
  CHECK_EQ_INT(total.failures, 0);
  CHECK_EQ_INT(total.exact_versions, 0);
  CHECK_EQ_INT((int)total.partial_hits, 0);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

/* Verify mode interprets every compiled segment too and compares: silent on right kernels. */
static void test_verify_generic(void) {
  if (!have_backend()) return;
  stax_program_t* programs[2] = {build_matmul_residual(), build_layernorm()};
  int64_t tails[2][2] = {{8, 12}, {16, 0}};
  for (int p = 0; p < 2; p++) {
    stax_context_t* jit = generic_context(programs[p], STAX_JIT_SYNC, 8, true);
    vm_rng_t rng = {99};
    for (int round = 0; round < 40; round++) {
      int64_t b = 0, s = 0;
      random_shape(&rng, round, &b, &s);
      stax_tensor_t* in[2] = {0};
      int32_t inputs = p == 0 ? 2 : 1;
      for (int32_t i = 0; i < inputs; i++) {
        int64_t dims[3] = {b, s, tails[p][i]};
        in[i] = vm_random_f32(&rng, 3, dims);
      }
      stax_tensor_t* out[1] = {NULL};
      CHECK_OK(stax_context_run(jit, inputs, in, 1, out));
      stax_tensor_release(out[0]);
      for (int32_t i = 0; i < inputs; i++) stax_tensor_release(in[i]);
    }
    stax_jit_segment_stats_t total;
    total_stats(programs[p], &total);
    CHECK_EQ_INT(total.generic_versions, 1);
    stax_context_destroy(jit);
    stax_program_release(programs[p]);
  }
}

/* ---- broadcast dims ---------------------------------------------------------------------------- */

/* relu(a[N, K] * 2 + b[M, K]) - a: N and M broadcast (bcast(N, M)). A stream alternating
 * N == M, N == 1 and M == 1 matches the interpreter (also in verify mode) and the N == M shapes
 * share one class version; a pair that does not broadcast is an error, also once versions
 * exist. */
static void test_broadcast_classes(void) {
  if (!have_backend()) return;
  stax_graph_t* g = new_graph();
  const stax_dim_t* k = vm_symbol(g, "K", 1, 64);
  const stax_dim_t* ad[2] = {vm_symbol(g, "N", 1, 64), k};
  const stax_dim_t* bd[2] = {vm_symbol(g, "M", 1, 64), k};
  stax_value_id_t a = vm_input(g, "a", STAX_DTYPE_FLOAT32, 2, ad);
  stax_value_id_t b = vm_input(g, "b", STAX_DTYPE_FLOAT32, 2, bd);
  float two = 2.0f;
  int64_t one[1] = {1};
  stax_value_id_t c = vm_initializer(g, "two", STAX_DTYPE_FLOAT32, 1, one, &two);
  stax_value_id_t t = vm_binary(g, STAX_OP_Add, "add", vm_binary(g, STAX_OP_Mul, "mul", a, c), b);
  vm_output(g, vm_binary(g, STAX_OP_Sub, "sub", vm_unary(g, STAX_OP_Relu, "relu", t), a));
  stax_program_t* program = finish(g);
  if (!program) return;
  stax_context_t* jit = generic_context(program, STAX_JIT_SYNC, 8, false);
  stax_context_t* verify = generic_context(program, STAX_JIT_SYNC, 8, true);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  static const int64_t shapes[][3] = {{4, 4, 5}, {1, 4, 5}, {4, 1, 5}, {6, 6, 3},
                                      {1, 6, 3}, {6, 1, 3}, {1, 1, 7}, {9, 9, 16}};
  int count = (int)(sizeof(shapes) / sizeof(shapes[0]));
  vm_rng_t rng = {7};
  for (int round = 0; round < 3 * count; round++) {
    const int64_t* shape = shapes[round % count];
    int64_t a_dims[2] = {shape[0], shape[2]}, b_dims[2] = {shape[1], shape[2]};
    stax_tensor_t* in[2] = {vm_random_f32(&rng, 2, a_dims), vm_random_f32(&rng, 2, b_dims)};
    CHECK(run_both(jit, interp, 2, in, 1));
    CHECK(run_both(verify, interp, 2, in, 1));
    stax_tensor_release(in[0]);
    stax_tensor_release(in[1]);
  }
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  /* N == M over every (N, K) is one rows-generic class version (a, b and the output are one
   * row space there), N == M == 1 another; N == 1 alone or M == 1 alone broadcasts a value
   * over the rows: a symbolic elementwise kernel, one class version each. No exact versions.
   * The verify context shares the program's cache. */
  CHECK_EQ_INT(total.generic_versions, 4);
  CHECK_EQ_INT(total.exact_versions, 0);
  CHECK((int)total.full_hits >= 2 * 3 * count - 2 * 4); /* every call after its class compiled */
  int64_t bad_a[2] = {3, 5}, bad_b[2] = {5, 5};
  stax_tensor_t* in[2] = {vm_random_f32(&rng, 2, bad_a), vm_random_f32(&rng, 2, bad_b)};
  stax_tensor_t* out = NULL;
  CHECK_ERROR(stax_context_run(jit, 2, in, 1, &out), STAX_SHAPE_MISMATCH,
              "Add 'add': cannot broadcast input 0 'mul:0' dim 0 (N = 3) with input 1 'b' dim 0 "
              "(M = 5)");
  CHECK(out == NULL);
  stax_tensor_release(in[0]);
  stax_tensor_release(in[1]);
  stax_context_destroy(interp);
  stax_context_destroy(verify);
  stax_context_destroy(jit);
  stax_program_release(program);
}

/* ---- threads --------------------------------------------------------------------------------- */

typedef struct mixed_thread_t {
  stax_program_t* program;
  int index;
  int mismatches;
} mixed_thread_t;

static void* mixed_thread_main(void* p) {
  mixed_thread_t* arg = p;
  stax_context_t* jit = generic_context(arg->program, STAX_JIT_BACKGROUND, 1, false);
  stax_context_t* interp = vm_context(arg->program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {500u + (uint64_t)arg->index};
  for (int round = 0; round < 60; round++) {
    int64_t dims[2] = {1 + (round + arg->index) % 4, 3 + 7 * ((round / 2 + arg->index) % 3)};
    stax_tensor_t* in[1] = {vm_random_f32(&rng, 2, dims)};
    if (!run_both(jit, interp, 1, in, 2)) arg->mismatches++;
    stax_tensor_release(in[0]);
  }
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  return NULL;
}

/* Four threads, background compiles, a cap of one exact version: the class version (the
 * Sigmoid) is shared by every shape and never evicted while exact versions (the Softmax)
 * come and go under the running calls; no kernel outlives the program. */
static void test_threads_generic_and_exact(void) {
  if (!have_backend()) return;
  uint64_t live_before = stax_jit_stats().live_kernels;
  stax_program_t* program = build_mixed();
  pthread_t threads[4];
  mixed_thread_t args[4];
  for (int t = 0; t < 4; t++) {
    args[t] = (mixed_thread_t){.program = program, .index = t};
    CHECK_EQ_INT(pthread_create(&threads[t], NULL, mixed_thread_main, &args[t]), 0);
  }
  for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
  stax_program_jit_drain(program);
  for (int t = 0; t < 4; t++) CHECK_EQ_INT(args[t].mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT(total.generic_versions, 1);
  CHECK(total.exact_versions <= 1);
  CHECK_EQ_INT((int)total.entries, 240);
  stax_program_release(program);
  CHECK_EQ_INT((int)(stax_jit_stats().live_kernels - live_before), 0);
}

/* Hot-shape promotion: one shape called again and again beside a stream of others. Once
 * the class version has every group, the hot signature gets an exact version of all of them
 * (after threshold x JIT_PROMOTE_FACTOR calls), its trial alternates and times both, and
 * every group ends either kept or back on the class kernel; every call, trial calls and the
 * other shapes' included, matches the interpreter, and no other shape ever gets an exact
 * version. With promote == false (STAX_JIT_PROMOTE=0) nothing is promoted. With retire
 * (STAX_JIT_PROMOTE_MARGIN=0: no exact kernel can win) the trial drops every kernel, the
 * version is retired (not held) and the signature is never promoted again. */
static void promotion_stream(bool promote, bool retire) {
  stax_program_t* program = build_matmul_residual();
  if (promote) unsetenv("STAX_JIT_PROMOTE");
  else setenv("STAX_JIT_PROMOTE", "0", 1);
  if (retire) setenv("STAX_JIT_PROMOTE_MARGIN", "0", 1);
  stax_context_t* jit = generic_context(program, STAX_JIT_SYNC, 8, false);
  unsetenv("STAX_JIT_PROMOTE");
  unsetenv("STAX_JIT_PROMOTE_MARGIN");
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {7};
  int mismatches = 0;
  /* Retired: long enough for a second promotion, were there one. */
  const int hot_calls =
      (retire ? 4 : 2) * JIT_PROMOTE_FACTOR + 2 * JIT_TRIAL_CALLS + 20;
  int calls = 0;
  for (int round = 0; round < hot_calls; round++) {
    /* The hot shape, and every third round a fresh one of the same class. */
    for (int extra = 0; extra < (round % 3 == 0 ? 2 : 1); extra++) {
      int64_t b = extra ? vm_rng_range(&rng, 1, 8) : 5;
      int64_t s = extra ? vm_rng_range(&rng, 1, 64) : 13;
      if (extra && b == 5 && s == 13) s = 14;
      int64_t xd[3] = {b, s, 8}, rd[3] = {b, s, 12};
      stax_tensor_t* in[2] = {vm_random_f32(&rng, 3, xd), vm_random_f32(&rng, 3, rd)};
      if (!run_both(jit, interp, 2, in, 1)) mismatches++;
      stax_tensor_release(in[0]);
      stax_tensor_release(in[1]);
      calls++;
    }
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT(total.generic_versions, 1);
  CHECK_EQ_INT((int)total.failures, 0);
  CHECK_EQ_INT((int)total.full_hits, calls);
  if (retire) {
    CHECK_EQ_INT((int)total.promotions, 1);
    CHECK_EQ_INT(total.compiles, 2);
    CHECK_EQ_INT((int)total.promoted_groups_kept, 0);
    CHECK((int)total.promoted_groups_dropped >= 1);
    CHECK_EQ_INT(total.exact_versions, 0);
    CHECK_EQ_INT(total.versions, 1); /* the class version alone */
  } else if (promote) {
    CHECK_EQ_INT((int)total.promotions, 1);
    CHECK_EQ_INT(total.compiles, 2);
    /* The trial decided for every group that compiled exact (the matmul group at least). A
     * version that kept no kernel is retired: no longer held. */
    CHECK((int)(total.promoted_groups_kept + total.promoted_groups_dropped) >= 1);
    CHECK_EQ_INT(total.exact_versions, total.promoted_groups_kept > 0 ? 1 : 0);
  } else {
    CHECK_EQ_INT((int)total.promotions, 0);
    CHECK_EQ_INT(total.exact_versions, 0);
    CHECK_EQ_INT(total.compiles, 1);
  }
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

static void test_promotion(void) {
  if (!have_backend()) return;
  promotion_stream(true, false);
}

static void test_promotion_retired(void) {
  if (!have_backend()) return;
  promotion_stream(true, true);
}

static void test_promotion_off(void) {
  if (!have_backend()) return;
  promotion_stream(false, false);
}

/* Background promotion waits for an idle core: a context whose pool leaves a core free
 * promotes its hot shape (the compile lands while the calls go on; every call still matches
 * the interpreter), one whose pool has a thread per core does not. */
static int promote_in_background(int32_t pool_threads) {
  stax_program_t* program = build_matmul_residual();
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(vm_alloc(), pool_threads, &pool));
  stax_context_options_t options = {.jit = STAX_JIT_BACKGROUND, .jit_threshold = 2, .pool = pool,
                                    .jit_generic = STAX_JIT_GENERIC_ON};
  stax_context_t* jit = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {11};
  int mismatches = 0;
  for (int round = 0; round < 2 * JIT_PROMOTE_FACTOR + 2 * JIT_TRIAL_CALLS + 40; round++) {
    int64_t xd[3] = {3, 9, 8}, rd[3] = {3, 9, 12};
    stax_tensor_t* in[2] = {vm_random_f32(&rng, 3, xd), vm_random_f32(&rng, 3, rd)};
    if (!run_both(jit, interp, 2, in, 1)) mismatches++;
    stax_tensor_release(in[0]);
    stax_tensor_release(in[1]);
    /* Let each compile land before the next calls (the test is about the policy). */
    if (round == 0 || round == 2 * JIT_PROMOTE_FACTOR + 4) stax_program_jit_drain(program);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_program_jit_drain(program);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_threadpool_destroy(pool);
  stax_program_release(program);
  return (int)total.promotions;
}

static void test_promotion_needs_idle_core(void) {
  if (!have_backend()) return;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  CHECK_EQ_INT(promote_in_background((int32_t)cores), 0);
  if (cores < 2) {
    printf("note: one core: no idle core to promote on, the promoting half is not run\n");
    return;
  }
  CHECK_EQ_INT(promote_in_background(1), 1);
}

STAX_TEST_MAIN(STAX_TEST(test_broadcast_classes), STAX_TEST(test_stream_matmul),
               STAX_TEST(test_stream_conv_batch), STAX_TEST(test_stream_conv_image),
               STAX_TEST(test_stream_conv_patches), STAX_TEST(test_scratch_limit),
               STAX_TEST(test_stream_pool_image),
               STAX_TEST(test_stream_layernorm),
               STAX_TEST(test_mixed_generic_exact), STAX_TEST(test_mostly_exact_segment),
               STAX_TEST(test_class_guard_layout),
               STAX_TEST(test_verify_generic), STAX_TEST(test_threads_generic_and_exact),
               STAX_TEST(test_promotion), STAX_TEST(test_promotion_retired),
               STAX_TEST(test_promotion_off),
               STAX_TEST(test_promotion_needs_idle_core))
