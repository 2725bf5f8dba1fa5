/* The widen pass (src/passes/widen.c): float16/bfloat16 MatMul, Gemm, Conv and MaxPool become
 * the float32 op between Casts, a 16-bit Conv with the BatchNormalization after it becomes a
 * float32 pair that bnfold then folds. Checked on graphs built with the C API: what is left
 * after compiling, and the interpreter's answers against the same graph compiled with widen
 * off: the same bits for the products and pools (the kernels compute them in float32 and round
 * once, as the rewrite does), within 16-bit rounding for Conv + BatchNormalization. And what
 * must stay: AveragePool, MaxPool with Indices, mixed dtypes, float32 models. */
#include <math.h>

#include "runtime/tensor_internal.h"
#include "test_passes_util.h"

static stax_graph_t* new_graph(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  return g;
}

/* A constant of `dtype` (16-bit) from random floats in [-scale, scale]. */
static stax_value_id_t half_constant(stax_graph_t* g, vm_rng_t* rng, stax_dtype_t dtype,
                                     const char* name, int32_t rank, const int64_t* dims,
                                     float scale) {
  int64_t count = 1;
  for (int32_t d = 0; d < rank; d++) count *= dims[d];
  float values[4096];
  uint16_t bits[4096];
  CHECK(count <= 4096);
  for (int64_t i = 0; i < count; i++) values[i] = scale * vm_rng_float(rng);
  stax_convert_elements(STAX_DTYPE_FLOAT32, values, dtype, bits, count);
  return vm_initializer(g, name, dtype, rank, dims, bits);
}

static stax_tensor_t* random_half(vm_rng_t* rng, stax_dtype_t dtype, int32_t rank,
                                  const int64_t* dims) {
  stax_tensor_t* wide = vm_random_f32(rng, rank, dims);
  stax_tensor_t* t = vm_tensor(dtype, rank, dims, NULL);
  stax_convert_elements(STAX_DTYPE_FLOAT32, stax_tensor_data(wide), dtype, stax_tensor_data(t),
                        stax_tensor_element_count(t));
  stax_tensor_release(wide);
  return t;
}

/* Nodes of `op` whose first output has `dtype`. */
static int32_t count_op_dtype(const stax_graph_t* g, stax_op_t op, stax_dtype_t dtype) {
  int32_t count = 0;
  for (int32_t n = 0; n < stax_graph_node_count(g); n++)
    if (stax_node_op(g, n) == op && stax_value_dtype(g, stax_node_output(g, n, 0)) == dtype)
      count++;
  return count;
}

/* Runs both programs on the same random 16-bit inputs of `dims` (dim 0 swept over `batches`)
 * and compares the outputs element by element: |a - b| <= ulps * (16-bit ulp of 1 + |b|), the
 * scale of the terms a folded BatchNormalization moves (0: the same bits). */
static void compare_half(stax_program_t* a, stax_program_t* b, stax_dtype_t dtype, int32_t rank,
                         const int64_t* dims, int32_t ulps) {
  const int64_t batches[] = {1, 2, 5};
  double unit = dtype == STAX_DTYPE_FLOAT16 ? 1.0 / 1024 : 1.0 / 128;
  for (size_t s = 0; s < sizeof(batches) / sizeof(batches[0]); s++) {
    vm_rng_t rng = {s * 7919 + 17};
    int64_t shape[STAX_MAX_RANK];
    for (int32_t d = 0; d < rank; d++) shape[d] = d == 0 ? batches[s] : dims[d];
    stax_tensor_t* input = random_half(&rng, dtype, rank, shape);
    int32_t outputs = stax_program_output_count(a);
    stax_tensor_t* got[2] = {NULL, NULL};
    stax_tensor_t* want[2] = {NULL, NULL};
    stax_context_t* ca = vm_context(a, STAX_DISPATCH_DEFAULT);
    stax_context_t* cb = vm_context(b, STAX_DISPATCH_DEFAULT);
    CHECK_OK(stax_context_run(ca, 1, &input, outputs, got));
    CHECK_OK(stax_context_run(cb, 1, &input, outputs, want));
    for (int32_t o = 0; o < outputs; o++) {
      if (!got[o] || !want[o]) continue;
      CHECK_EQ_INT(stax_tensor_dtype(got[o]), stax_tensor_dtype(want[o]));
      CHECK(vm_dims_equal(got[o], stax_tensor_rank(want[o]), stax_tensor_dims(want[o])));
      int64_t count = stax_tensor_element_count(want[o]);
      float x[4096], y[4096];
      CHECK(count <= 4096);
      stax_convert_elements(stax_tensor_dtype(got[o]), stax_tensor_data(got[o]),
                            STAX_DTYPE_FLOAT32, x, count);
      stax_convert_elements(stax_tensor_dtype(want[o]), stax_tensor_data(want[o]),
                            STAX_DTYPE_FLOAT32, y, count);
      int64_t bad = 0;
      for (int64_t i = 0; i < count; i++) {
        double limit = ulps * unit * (1 + fabs(y[i]));
        if (!(fabs((double)x[i] - y[i]) <= limit)) {
          if (bad++ < 3) fprintf(stderr, "output %d [%lld]: %g vs %g\n", o, (long long)i, x[i], y[i]);
        }
      }
      CHECK_EQ_INT(bad, 0);
      stax_tensor_release(got[o]);
      stax_tensor_release(want[o]);
    }
    stax_tensor_release(input);
    stax_context_destroy(ca);
    stax_context_destroy(cb);
  }
}

/* One graph compiled with every pass (`g`, `widened`) and the same graph with widen off
 * (`r`, `reference`). */
typedef struct widen_pair_t {
  stax_graph_t *g, *r;
  stax_program_t *widened, *reference;
} widen_pair_t;

static widen_pair_t widen_pair(stax_graph_t* (*build)(stax_dtype_t), stax_dtype_t dtype) {
  widen_pair_t p = {build(dtype), build(dtype), NULL, NULL};
  p.widened = compile_with(p.g, 0);
  p.reference = compile_with(p.r, STAX_PASS_BIT(STAX_PASS_widen));
  return p;
}

static void widen_pair_release(widen_pair_t* p) {
  if (p->widened) stax_program_release(p->widened);
  if (p->reference) stax_program_release(p->reference);
  stax_graph_destroy(p->g);
  stax_graph_destroy(p->r);
}

/* x[N, 8] -> MatMul(x, W[8, 12]) + b -> Relu, and Gemm(Relu, W2[8, 12] transposed, C) with alpha
 * and beta: products with constant and with computed operands. */
static stax_graph_t* products(stax_dtype_t dtype) {
  stax_graph_t* g = new_graph();
  vm_rng_t rng = {99};
  const stax_dim_t* x_dims[2] = {vm_symbol(g, "N", 1, 8), vm_const(g, 8)};
  stax_value_id_t x = vm_input(g, "x", dtype, 2, x_dims);
  int64_t w_dims[2] = {8, 12}, w2_dims[2] = {8, 12}, b_dims[1] = {12};
  stax_value_id_t w = half_constant(g, &rng, dtype, "w", 2, w_dims, 0.5f);
  stax_value_id_t b = half_constant(g, &rng, dtype, "b", 1, b_dims, 1.0f);
  stax_value_id_t m = vm_binary(g, STAX_OP_MatMul, "mm", x, w);
  stax_value_id_t y = vm_unary(g, STAX_OP_Relu, "relu", vm_binary(g, STAX_OP_Add, "bias", m, b));
  vm_output(g, y);
  /* Gemm over a computed A (the Relu) and a constant B read transposed. */
  stax_value_id_t inputs[3] = {y, half_constant(g, &rng, dtype, "w2", 2, w2_dims, 0.5f),
                               half_constant(g, &rng, dtype, "c", 1, (int64_t[]){1}, 1.0f)};
  stax_attr_t attrs[3] = {stax_attr_int("transB", 1), stax_attr_float("alpha", 0.5f),
                          stax_attr_float("beta", 2.0f)};
  vm_output(g, vm_node(g, STAX_OP_Gemm, "gemm", 3, inputs, 3, attrs));
  return g;
}

static void test_products(void) {
  stax_dtype_t dtypes[2] = {STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16};
  for (int32_t k = 0; k < 2; k++) {
    widen_pair_t p = widen_pair(products, dtypes[k]);
    stax_graph_t *g = p.g, *r = p.r;
    CHECK_EQ_INT(count_op_dtype(g, STAX_OP_MatMul, STAX_DTYPE_FLOAT32), 1);
    CHECK_EQ_INT(count_op_dtype(g, STAX_OP_Gemm, STAX_DTYPE_FLOAT32), 1);
    CHECK_EQ_INT(count_op_dtype(g, STAX_OP_MatMul, dtypes[k]), 0);
    CHECK_EQ_INT(count_op_dtype(g, STAX_OP_Gemm, dtypes[k]), 0);
    /* x and the Relu widened; the constants folded (no Cast of them left); two back. */
    CHECK_EQ_INT(count_op_dtype(g, STAX_OP_Cast, STAX_DTYPE_FLOAT32), 2);
    CHECK_EQ_INT(count_op_dtype(g, STAX_OP_Cast, dtypes[k]), 2);
    CHECK_EQ_INT(count_op_dtype(r, STAX_OP_MatMul, dtypes[k]), 1);
    CHECK(report_mentions(p.widened, "2 16-bit products computed in float32 between Casts"));
    compare_half(p.widened, p.reference, dtypes[k], 2, (int64_t[]){1, 8}, 0);
    widen_pair_release(&p);
  }
}

/* x[N, 4, 6, 7] -> Conv 3x3 (8 channels, bias) -> BatchNormalization -> Relu -> MaxPool 2x2,
 * and a second Conv (grouped, no bias) whose output is a graph output. */
static stax_graph_t* convolutions(stax_dtype_t dtype) {
  stax_graph_t* g = new_graph();
  vm_rng_t rng = {7};
  const stax_dim_t* x_dims[4] = {vm_symbol(g, "N", 1, 8), vm_const(g, 4), vm_const(g, 6),
                                 vm_const(g, 7)};
  stax_value_id_t x = vm_input(g, "x", dtype, 4, x_dims);
  int64_t w_dims[4] = {8, 4, 3, 3}, c_dims[1] = {8}, w2_dims[4] = {4, 2, 3, 3};
  const int64_t pads[4] = {1, 1, 1, 1};
  stax_attr_t conv_attrs[2] = {stax_attr_ints("pads", 4, pads), stax_attr_int("group", 1)};
  stax_value_id_t conv_in[3] = {x, half_constant(g, &rng, dtype, "w", 4, w_dims, 0.3f),
                                half_constant(g, &rng, dtype, "b", 1, c_dims, 0.5f)};
  stax_value_id_t y = vm_node(g, STAX_OP_Conv, "conv", 3, conv_in, 2, conv_attrs);
  float var[8];
  uint16_t var_bits[8];
  for (int32_t i = 0; i < 8; i++) var[i] = 0.5f + 0.25f * (vm_rng_float(&rng) + 1);
  stax_convert_elements(STAX_DTYPE_FLOAT32, var, dtype, var_bits, 8);
  stax_value_id_t bn_in[5] = {y, half_constant(g, &rng, dtype, "scale", 1, c_dims, 1.0f),
                              half_constant(g, &rng, dtype, "shift", 1, c_dims, 0.5f),
                              half_constant(g, &rng, dtype, "mean", 1, c_dims, 0.5f),
                              vm_initializer(g, "var", dtype, 1, c_dims, var_bits)};
  stax_attr_t eps = stax_attr_float("epsilon", 1e-3f);
  y = vm_node(g, STAX_OP_BatchNormalization, "bn", 5, bn_in, 1, &eps);
  y = vm_unary(g, STAX_OP_Relu, "relu", y);
  const int64_t kernel[2] = {2, 2};
  stax_attr_t pool_attrs[2] = {stax_attr_ints("kernel_shape", 2, kernel),
                               stax_attr_ints("strides", 2, kernel)};
  stax_value_id_t pool_in[1] = {y};
  vm_output(g, vm_node(g, STAX_OP_MaxPool, "pool", 1, pool_in, 2, pool_attrs));
  stax_attr_t grouped[2] = {stax_attr_ints("pads", 4, pads), stax_attr_int("group", 2)};
  stax_value_id_t conv2_in[2] = {x, half_constant(g, &rng, dtype, "w2", 4, w2_dims, 0.3f)};
  vm_output(g, vm_node(g, STAX_OP_Conv, "conv2", 2, conv2_in, 2, grouped));
  return g;
}

static void test_convolutions(void) {
  stax_dtype_t dtypes[2] = {STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16};
  for (int32_t k = 0; k < 2; k++) {
    widen_pair_t p = widen_pair(convolutions, dtypes[k]);
    stax_graph_t *g = p.g, *r = p.r;
    CHECK_EQ_INT(count_op_dtype(g, STAX_OP_Conv, STAX_DTYPE_FLOAT32), 2);
    CHECK_EQ_INT(count_op_dtype(g, STAX_OP_MaxPool, STAX_DTYPE_FLOAT32), 1);
    CHECK_EQ_INT(count_op(g, STAX_OP_BatchNormalization), 0); /* folded into the float32 Conv */
    CHECK_EQ_INT(count_op(r, STAX_OP_BatchNormalization), 1); /* bnfold leaves 16-bit ones */
    CHECK(report_mentions(p.widened, "16-bit Conv + BatchNormalization computed in float32"));
    CHECK(report_mentions(p.widened, "BatchNormalization folded into Conv"));
    /* The BatchNormalization now acts on the unrounded Conv output, folded into its weights:
     * about one 16-bit rounding of the terms apart. */
    compare_half(p.widened, p.reference, dtypes[k], 4, (int64_t[]){1, 4, 6, 7}, 2);
    widen_pair_release(&p);
  }
}

/* Left alone: AveragePool (its kernel rounds from double once), MaxPool with an Indices
 * output, a product of float32 values. */
static void test_left_alone(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* x_dims[4] = {vm_symbol(g, "N", 1, 8), vm_const(g, 2), vm_const(g, 4),
                                 vm_const(g, 4)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT16, 4, x_dims);
  const int64_t kernel[2] = {2, 2};
  stax_attr_t attrs[1] = {stax_attr_ints("kernel_shape", 2, kernel)};
  stax_value_id_t in[1] = {x};
  vm_output(g, vm_node(g, STAX_OP_AveragePool, "avg", 1, in, 1, attrs));
  stax_value_id_t outs[2];
  const char* names[2] = {"max", "indices"};
  stax_node_desc_t desc = {.op = STAX_OP_MaxPool, .name = "maxi", .input_count = 1, .inputs = in,
                           .output_count = 2, .output_names = names, .attr_count = 1,
                           .attrs = attrs};
  CHECK_OK(stax_graph_add_node(g, &desc, outs));
  vm_output(g, outs[0]);
  vm_output(g, outs[1]);
  const stax_dim_t* f_dims[2] = {vm_symbol(g, "M", 1, 8), vm_const(g, 3)};
  stax_value_id_t f = vm_input(g, "f", STAX_DTYPE_FLOAT32, 2, f_dims);
  float w[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  vm_output(g, vm_binary(g, STAX_OP_MatMul, "mm32", f,
                         vm_initializer(g, "w", STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, w)));
  stax_program_t* program = compile_with(g, 0);
  CHECK_EQ_INT(count_op_dtype(g, STAX_OP_AveragePool, STAX_DTYPE_FLOAT16), 1);
  CHECK_EQ_INT(count_op_dtype(g, STAX_OP_MaxPool, STAX_DTYPE_FLOAT16), 1);
  CHECK_EQ_INT(count_op(g, STAX_OP_Cast), 0);
  CHECK(!report_mentions(program, "16-bit"));
  stax_program_release(program);
  stax_graph_destroy(g);
}

static void test_pass_name(void) {
  CHECK_EQ_STR(stax_pass_name(STAX_PASS_widen), "widen");
  CHECK_EQ_INT(stax_pass_from_name("widen"), STAX_PASS_widen);
}

STAX_TEST_MAIN(STAX_TEST(test_products), STAX_TEST(test_convolutions), STAX_TEST(test_left_alone),
               STAX_TEST(test_pass_name))
