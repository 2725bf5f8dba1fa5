/* The bnfold pass (src/passes/bnfold.c): Conv -> BatchNormalization becomes one Conv with
 * folded weights, any other inference BatchNormalization with constant parameters becomes
 * Mul + Add. Checked on graphs built with the C API by what is left after compiling and by
 * running against the same graph compiled with bnfold off (within 1e-5 relative to 1 + |y|;
 * the fold rounds differently, see the pass's comment), over batches and heights; and the
 * rewrites that must not happen (training mode, parameters that are not constants, a used
 * running-statistics output, var + epsilon <= 0). */
#include "test_passes_util.h"

#define BN_TOLERANCE 1e-5

static stax_graph_t* new_graph(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  return g;
}

/* x[N, C, H, 9], N in [1, 8], H in [1, 32]. */
static stax_value_id_t image_input(stax_graph_t* g, int64_t channels) {
  const stax_dim_t* dims[4] = {vm_symbol(g, "N", 1, 8), vm_const(g, channels),
                               vm_symbol(g, "H", 1, 32), vm_const(g, 9)};
  return vm_input(g, "x", STAX_DTYPE_FLOAT32, 4, dims);
}

static stax_value_id_t random_vector(stax_graph_t* g, vm_rng_t* rng, const char* name,
                                     int64_t count, float low, float high) {
  float values[64];
  for (int64_t i = 0; i < count; i++)
    values[i] = low + (high - low) * 0.5f * (vm_rng_float(rng) + 1); /* in [low, high] */
  return vm_initializer(g, name, STAX_DTYPE_FLOAT32, 1, &count, values);
}

typedef struct bn_options_t {
  float var_low;      /* variances drawn from [var_low, var_low + 1) */
  int64_t training;   /* training_mode attribute (-1: absent) */
  bool scale_input;   /* scale is a graph input, not a constant */
} bn_options_t;

/* BatchNormalization(x) with random constant parameters over `channels`. */
static stax_value_id_t batch_norm(stax_graph_t* g, vm_rng_t* rng, const char* name,
                                  stax_value_id_t x, int64_t channels, const bn_options_t* o) {
  char names[4][64];
  for (int32_t k = 0; k < 4; k++) snprintf(names[k], sizeof(names[k]), "%s_p%d", name, (int)k);
  stax_value_id_t scale;
  if (o && o->scale_input) {
    const stax_dim_t* dims[1] = {vm_const(g, channels)};
    scale = vm_input(g, names[0], STAX_DTYPE_FLOAT32, 1, dims);
  } else {
    scale = random_vector(g, rng, names[0], channels, 0.5f, 1.5f);
  }
  float var_low = o ? o->var_low : 0.25f;
  stax_value_id_t inputs[5] = {x, scale, random_vector(g, rng, names[1], channels, -0.5f, 0.5f),
                               random_vector(g, rng, names[2], channels, -0.5f, 0.5f),
                               random_vector(g, rng, names[3], channels, var_low, var_low + 1)};
  stax_attr_t attrs[2] = {stax_attr_float("epsilon", 1e-3f),
                          stax_attr_int("training_mode", o ? o->training : 0)};
  int32_t attr_count = o && o->training >= 0 ? 2 : 1;
  return vm_node(g, STAX_OP_BatchNormalization, name, 5, inputs, attr_count, attrs);
}

static stax_value_id_t conv(stax_graph_t* g, vm_rng_t* rng, const char* name, stax_value_id_t x,
                            int64_t in_channels, int64_t out_channels, int64_t group,
                            bool bias) {
  int64_t w_dims[4] = {out_channels, in_channels / group, 3, 3};
  int64_t count = w_dims[0] * w_dims[1] * 9;
  float weights[64 * 64 * 9];
  for (int64_t i = 0; i < count; i++) weights[i] = vm_rng_float(rng);
  char w_name[64], b_name[64];
  snprintf(w_name, sizeof(w_name), "%s_w", name);
  snprintf(b_name, sizeof(b_name), "%s_b", name);
  stax_value_id_t inputs[3] = {x, vm_initializer(g, w_name, STAX_DTYPE_FLOAT32, 4, w_dims, weights),
                               bias ? random_vector(g, rng, b_name, out_channels, -1, 1)
                                    : STAX_VALUE_NONE};
  const int64_t pads[4] = {1, 1, 1, 1};
  stax_attr_t attrs[2] = {stax_attr_ints("pads", 4, pads), stax_attr_int("group", group)};
  return vm_node(g, STAX_OP_Conv, name, bias ? 3 : 2, inputs, 2, attrs);
}

/* Runs `a` and `b` on the same random x (and any further inputs: random of their own dims)
 * over a few (N, H) and compares every output. */
static void compare_programs(stax_program_t* a, stax_program_t* b, int64_t channels,
                             double tolerance) {
  const int64_t shapes[][2] = {{1, 1}, {1, 7}, {2, 5}, {3, 16}, {8, 32}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
    vm_rng_t rng = {s * 7919 + 17};
    int64_t dims[4] = {shapes[s][0], channels, shapes[s][1], 9};
    stax_tensor_t* inputs[2] = {vm_random_f32(&rng, 4, dims), NULL};
    int32_t input_count = stax_program_input_count(a);
    if (input_count > 1) inputs[1] = vm_random_f32(&rng, 1, &channels);
    int32_t output_count = stax_program_output_count(a);
    stax_tensor_t* got[2] = {NULL, NULL};
    stax_tensor_t* want[2] = {NULL, NULL};
    stax_context_t* ca = vm_context(a, STAX_DISPATCH_DEFAULT);
    stax_context_t* cb = vm_context(b, STAX_DISPATCH_DEFAULT);
    CHECK_OK(stax_context_run(ca, input_count, inputs, output_count, got));
    CHECK_OK(stax_context_run(cb, input_count, inputs, output_count, want));
    for (int32_t o = 0; o < output_count; o++) {
      if (!got[o] || !want[o]) continue;
      CHECK(vm_dims_equal(got[o], stax_tensor_rank(want[o]), stax_tensor_dims(want[o])));
      double worst = 0;
      for (int64_t i = 0; i < stax_tensor_element_count(want[o]); i++) {
        double x = vm_f32_at(got[o], i), y = vm_f32_at(want[o], i);
        double err = fabs(x - y) / (1 + fabs(y));
        if (!(err <= worst)) worst = err;
      }
      if (!(worst <= tolerance)) fprintf(stderr, "output %d: worst error %g\n", o, worst);
      CHECK(worst <= tolerance);
      stax_tensor_release(got[o]);
      stax_tensor_release(want[o]);
    }
    for (int32_t i = 0; i < 2; i++)
      if (inputs[i]) stax_tensor_release(inputs[i]);
    stax_context_destroy(ca);
    stax_context_destroy(cb);
  }
}

typedef stax_graph_t* (*build_fn)(int32_t variant);

/* Compiles build(variant) with every pass and with every pass but bnfold, compares them, and
 * returns the optimized graph (caller destroys) with the program's report checks done by the
 * caller through *out_program. */
static stax_graph_t* folded_and_compared(build_fn build, int32_t variant, int64_t channels,
                                         stax_program_t** out_program) {
  stax_graph_t* g = build(variant);
  stax_graph_t* r = build(variant);
  stax_compile_options_t on = {.disable_passes = 0};
  stax_compile_options_t off = {.disable_passes = STAX_PASS_BIT(STAX_PASS_bnfold)};
  stax_program_t* folded = NULL;
  stax_program_t* reference = NULL;
  CHECK_OK(stax_program_compile(vm_alloc(), g, &on, &folded));
  CHECK_OK(stax_program_compile(vm_alloc(), r, &off, &reference));
  if (folded && reference) compare_programs(folded, reference, channels, BN_TOLERANCE);
  CHECK_EQ_INT(count_op(r, STAX_OP_BatchNormalization) > 0, 1);
  if (reference) stax_program_release(reference);
  stax_graph_destroy(r);
  *out_program = folded;
  return g;
}

/* ---- Conv -> BatchNormalization ------------------------------------------------------------ */

/* variant bit 0: the Conv has a bias; bit 1: grouped (2 groups); bit 2: a Relu after. */
static stax_graph_t* build_conv_bn(int32_t variant) {
  stax_graph_t* g = new_graph();
  vm_rng_t rng = {(uint64_t)variant * 31 + 5};
  stax_value_id_t x = image_input(g, 4);
  stax_value_id_t c = conv(g, &rng, "conv", x, 4, 6, variant & 2 ? 2 : 1, variant & 1);
  stax_value_id_t y = batch_norm(g, &rng, "bn", c, 6, NULL);
  if (variant & 4) y = vm_unary(g, STAX_OP_Relu, "relu", y);
  vm_output(g, y);
  return g;
}

static void test_conv_bn(void) {
  for (int32_t variant = 0; variant < 8; variant++) {
    stax_program_t* program = NULL;
    stax_graph_t* g = folded_and_compared(build_conv_bn, variant, 4, &program);
    CHECK_EQ_INT(count_op(g, STAX_OP_BatchNormalization), 0);
    CHECK_EQ_INT(count_op(g, STAX_OP_Conv), 1);
    CHECK_EQ_INT(count_op(g, STAX_OP_Mul), 0);
    if (program) {
      CHECK(report_mentions(program, "1 BatchNormalization folded into Conv"));
      stax_program_release(program);
    }
    /* The graph output keeps its name. */
    CHECK_EQ_STR(stax_value_name(g, stax_graph_output(g, 0)), variant & 4 ? "relu:0" : "bn:0");
    stax_graph_destroy(g);
  }
}

/* ---- other BatchNormalizations --------------------------------------------------------------- */

/* variant 0: Relu -> BN -> Relu; 1: BN of the input itself; 2: Conv -> BN where the Conv's
 * output is also a graph output; 3: Conv -> BN where the Conv's output feeds a second node. */
static stax_graph_t* build_lone_bn(int32_t variant) {
  stax_graph_t* g = new_graph();
  vm_rng_t rng = {(uint64_t)variant * 17 + 3};
  stax_value_id_t x = image_input(g, 6);
  stax_value_id_t before = x;
  if (variant == 0) before = vm_unary(g, STAX_OP_Relu, "relu0", x);
  if (variant >= 2) before = conv(g, &rng, "conv", x, 6, 6, 1, true);
  stax_value_id_t y = batch_norm(g, &rng, "bn", before, 6, NULL);
  if (variant == 0) y = vm_unary(g, STAX_OP_Relu, "relu1", y);
  if (variant == 2) vm_output(g, before);
  if (variant == 3) y = vm_binary(g, STAX_OP_Add, "sum", y, before);
  vm_output(g, y);
  return g;
}

static void test_lone_bn(void) {
  for (int32_t variant = 0; variant < 4; variant++) {
    stax_program_t* program = NULL;
    stax_graph_t* g = folded_and_compared(build_lone_bn, variant, 6, &program);
    CHECK_EQ_INT(count_op(g, STAX_OP_BatchNormalization), 0);
    CHECK_EQ_INT(count_op(g, STAX_OP_Mul), 1);
    CHECK_EQ_INT(count_op(g, STAX_OP_Conv), variant >= 2 ? 1 : 0);
    if (program) {
      CHECK(report_mentions(program, "1 BatchNormalization into Mul + Add"));
      stax_program_release(program);
    }
    /* Topological order holds after the inserted Mul. */
    CHECK_OK(stax_graph_verify(g));
    stax_graph_destroy(g);
  }
}

/* ---- what stays ---------------------------------------------------------------------------- */

/* variant 0: training_mode = 1; 1: scale is a graph input; 2: var + epsilon <= 0 (the result is
 * NaN; folding would be too, but the pass leaves it to the kernel); 3: training_mode = 0
 * given explicitly, which folds. */
static stax_graph_t* build_kept_bn(int32_t variant) {
  stax_graph_t* g = new_graph();
  vm_rng_t rng = {(uint64_t)variant + 99};
  stax_value_id_t x = image_input(g, 3);
  stax_value_id_t c = conv(g, &rng, "conv", x, 3, 3, 1, true);
  bn_options_t o = {.var_low = variant == 2 ? -3.0f : 0.25f,
                    .training = variant == 0 ? 1 : variant == 3 ? 0 : -1,
                    .scale_input = variant == 1};
  vm_output(g, batch_norm(g, &rng, "bn", c, 3, &o));
  return g;
}

static void test_kept_bn(void) {
  for (int32_t variant = 0; variant < 4; variant++) {
    stax_graph_t* g = build_kept_bn(variant);
    stax_program_t* program = NULL;
    CHECK_OK(stax_program_compile(vm_alloc(), g, NULL, &program));
    CHECK_EQ_INT(count_op(g, STAX_OP_BatchNormalization), variant == 3 ? 0 : 1);
    if (program) stax_program_release(program);
    stax_graph_destroy(g);
  }
  /* Switched off, nothing changes. */
  stax_graph_t* g = build_conv_bn(5);
  stax_compile_options_t off = {.disable_passes = STAX_PASS_BIT(STAX_PASS_bnfold)};
  stax_program_t* program = NULL;
  CHECK_OK(stax_program_compile(vm_alloc(), g, &off, &program));
  CHECK_EQ_INT(count_op(g, STAX_OP_BatchNormalization), 1);
  if (program) {
    CHECK(!report_mentions(program, "BatchNormalization"));
    stax_program_release(program);
  }
  stax_graph_destroy(g);
  CHECK_EQ_STR(stax_pass_name(STAX_PASS_bnfold), "bnfold");
}

/* A running-statistics output that is used keeps the node (its value is the input mean). */
static void test_used_statistics(void) {
  stax_graph_t* g = new_graph();
  vm_rng_t rng = {7};
  stax_value_id_t x = image_input(g, 2);
  stax_value_id_t inputs[5] = {x, random_vector(g, &rng, "s", 2, 0.5f, 1.5f),
                               random_vector(g, &rng, "b", 2, -1, 1),
                               random_vector(g, &rng, "m", 2, -1, 1),
                               random_vector(g, &rng, "v", 2, 0.5f, 1.5f)};
  stax_value_id_t outputs[3] = {STAX_VALUE_NONE, STAX_VALUE_NONE, STAX_VALUE_NONE};
  stax_node_desc_t desc = {.op = STAX_OP_BatchNormalization, .name = "bn", .input_count = 5,
                           .inputs = inputs, .output_count = 3};
  CHECK_OK(stax_graph_add_node(g, &desc, outputs));
  vm_output(g, outputs[0]);
  vm_output(g, outputs[1]);
  stax_program_t* program = NULL;
  CHECK_OK(stax_program_compile(vm_alloc(), g, NULL, &program));
  CHECK_EQ_INT(count_op(g, STAX_OP_BatchNormalization), 1);
  if (program) stax_program_release(program);
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_conv_bn), STAX_TEST(test_lone_bn), STAX_TEST(test_kept_bn),
               STAX_TEST(test_used_statistics))
