/* The JIT tier on CNN programs: Conv -> BatchNormalization -> Relu -> MaxPool -> AveragePool ->
 * BatchNormalization -> GlobalAveragePool / GlobalMaxPool over x[N, 3, H, W] with N, H and W
 * open. The graph passes fold the first BatchNormalization into the Conv and turn the second
 * into Mul + Add; the pools compile (lower_pool.c) with their epilogues. 80 calls over
 * alternating, growing and random shapes (odd sizes, rows off the vector width, 1x1 images
 * after pooling) in sync mode, each against the interpreter; then a program of pools alone.
 * Both check that every call ran fully compiled on the class version (expect_class_version). */
#include "test_vm_jit_util.h"

static stax_value_id_t channel_vector(stax_graph_t* g, const char* name, int64_t count,
                                      float base, float step) {
  float values[16];
  for (int64_t i = 0; i < count; i++) values[i] = base + step * (float)i;
  return vm_initializer(g, name, STAX_DTYPE_FLOAT32, 1, &count, values);
}

static stax_value_id_t batch_norm(stax_graph_t* g, const char* name, stax_value_id_t x,
                                  int64_t channels) {
  char names[4][32];
  for (int32_t k = 0; k < 4; k++) snprintf(names[k], sizeof(names[k]), "%s_%d", name, (int)k);
  stax_value_id_t inputs[5] = {x, channel_vector(g, names[0], channels, 0.5f, 0.125f),
                               channel_vector(g, names[1], channels, -0.25f, 0.0625f),
                               channel_vector(g, names[2], channels, 0.125f, -0.03125f),
                               channel_vector(g, names[3], channels, 0.75f, 0.25f)};
  return vm_node(g, STAX_OP_BatchNormalization, name, 5, inputs, 0, NULL);
}

static stax_program_t* build_cnn(bool pools_only) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[4] = {vm_symbol(g, "N", 1, 8), vm_const(g, 3), vm_symbol(g, "H", 1, 64),
                               vm_symbol(g, "W", 1, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 4, dims);
  int64_t channels = 3;
  stax_value_id_t y = x;
  if (!pools_only) {
    float w[8 * 27];
    for (int i = 0; i < 8 * 27; i++) w[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
    int64_t w_dims[4] = {8, 3, 3, 3}, pads[4] = {1, 1, 1, 1};
    stax_value_id_t conv_in[2] = {x, vm_initializer(g, "w", STAX_DTYPE_FLOAT32, 4, w_dims, w)};
    stax_attr_t attrs[1] = {stax_attr_ints("pads", 4, pads)};
    y = vm_node(g, STAX_OP_Conv, "conv", 2, conv_in, 1, attrs);
    y = vm_unary(g, STAX_OP_Relu, "relu", batch_norm(g, "bn1", y, 8));
    channels = 8;
  }
  int64_t three[2] = {3, 3}, two[2] = {2, 2}, one[2] = {1, 1}, pads[4] = {1, 1, 1, 1};
  stax_attr_t max_attrs[3] = {stax_attr_ints("kernel_shape", 2, three),
                              stax_attr_ints("strides", 2, two), stax_attr_ints("pads", 4, pads)};
  y = vm_node(g, STAX_OP_MaxPool, "maxpool", 1, &y, 3, max_attrs);
  int64_t end_pads[4] = {0, 0, 1, 1};
  stax_attr_t average_attrs[4] = {stax_attr_ints("kernel_shape", 2, two),
                                  stax_attr_ints("strides", 2, one),
                                  stax_attr_ints("pads", 4, end_pads),
                                  stax_attr_int("ceil_mode", 1)};
  y = vm_node(g, STAX_OP_AveragePool, "avgpool", 1, &y, 4, average_attrs);
  if (!pools_only) y = batch_norm(g, "bn2", y, channels);
  vm_output(g, vm_unary(g, STAX_OP_GlobalAveragePool, "gap", y));
  vm_output(g, vm_unary(g, STAX_OP_Relu, "gmp_relu", vm_unary(g, STAX_OP_GlobalMaxPool, "gmp", y)));
  return finish(g);
}

static const int64_t shapes[6][3] = {{1, 7, 7}, {2, 16, 17}, {1, 1, 1}, {3, 33, 9},
                                     {1, 56, 56}, {2, 2, 40}};

static void run_calls(stax_program_t* program, int32_t calls, stax_jit_call_stats_t* out) {
  stax_context_options_t options = {.jit = STAX_JIT_SYNC, .jit_threshold = 1};
  stax_context_t* jit = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {0xC0FFEEu};
  int32_t mismatches = 0;
  for (int32_t call = 0; call < calls; call++) {
    int32_t pattern = call / 20, index = 0;
    if (pattern == 0) index = call % 2;
    else if (pattern == 1) index = (call / 3) % 6;
    else index = (int32_t)vm_rng_range(&rng, 0, 5);
    int64_t dims[4] = {shapes[index][0], 3, shapes[index][1], shapes[index][2]};
    stax_tensor_t* in = vm_random_f32(&rng, 4, dims);
    if (!run_both(jit, interp, 1, &in, 2)) {
      fprintf(stderr, "call %d: shape %lldx3x%lldx%lld differs\n", (int)call, (long long)dims[0],
              (long long)dims[2], (long long)dims[3]);
      mismatches++;
    }
    stax_tensor_release(in);
  }
  CHECK_EQ_INT(mismatches, 0);
  CHECK_OK(stax_program_jit_call_stats(program, out));
  stax_context_destroy(jit);
  stax_context_destroy(interp);
}

/* The shape-class version holds kernels for every group: the Conv, the MaxPool, the ceil_mode
 * AveragePool (whose tap count varies by position: a mask of the padded plane counts them)
 * and the global pools (open N, H, W: lower_conv_symbolic.c, lower_pool.c), so every call
 * runs fully compiled and no exact version is needed for it. */
static void expect_class_version(stax_program_t* program, const stax_jit_call_stats_t* calls,
                                 int32_t count) {
  CHECK_EQ_INT((int)calls->compiled, count);
  CHECK_EQ_INT((int)calls->partial, 0);
  CHECK_EQ_INT((int)calls->interpreted, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT(total.generic_versions, 1);
  CHECK_EQ_INT((int)total.failures, 0);
}

static void test_cnn_against_interpreter(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_cnn(false);
  stax_jit_call_stats_t calls;
  run_calls(program, 80, &calls);
  expect_class_version(program, &calls, 80);
  stax_program_release(program);
}

static void test_pools_compile(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_cnn(true);
  stax_jit_call_stats_t calls;
  run_calls(program, 40, &calls);
  expect_class_version(program, &calls, 40);
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_cnn_against_interpreter), STAX_TEST(test_pools_compile))
