/* The JIT tier (src/vm/jit_tier.c): differential runs of JIT and interpreter over random shape
 * sequences (alternating, growing, repeating) for each segment kind (elementwise chains, row
 * kernels, MatMul + epilogue, Conv + epilogue), LRU eviction with a version cap of 1 (kernels freed only when
 * unused: no leak, no use after free under ASan), compile-failure fallback, verify mode, and
 * four threads running while a background compiler works. Skipped without an LLVM backend. */
#include <pthread.h>
#include <stdlib.h>

#include "jit/jit.h"
#include "test_vm_jit_util.h"

/* ---- programs -------------------------------------------------------------------------------- */

/* Elementwise chain over broadcasting: Sigmoid(Relu(x[B, S] * y[S] + c)) - Tanh(x). */
static stax_program_t* build_elementwise(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 1, dims + 1);
  float c_value = 0.25f;
  int64_t one[1] = {1};
  stax_value_id_t c = vm_initializer(g, "c", STAX_DTYPE_FLOAT32, 1, one, &c_value);
  stax_value_id_t t = vm_binary(g, STAX_OP_Add, "add", vm_binary(g, STAX_OP_Mul, "mul", x, y), c);
  stax_value_id_t s = vm_unary(g, STAX_OP_Sigmoid, "sigmoid", vm_unary(g, STAX_OP_Relu, "relu", t));
  vm_output(g, vm_binary(g, STAX_OP_Sub, "sub", s, vm_unary(g, STAX_OP_Tanh, "tanh", x)));
  return finish(g);
}

/* Row kernels: Softmax(x[B, S] + 1) and LayerNormalization(z[B, 16]). */
static stax_program_t* build_rows(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64)};
  const stax_dim_t* zdims[2] = {dims[0], vm_const(g, 16)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t z = vm_input(g, "z", STAX_DTYPE_FLOAT32, 2, zdims);
  float one_value = 1.0f, gamma[16], beta[16];
  for (int i = 0; i < 16; i++) {
    gamma[i] = 1.0f + 0.05f * (float)i;
    beta[i] = 0.1f * (float)(i % 3);
  }
  int64_t one[1] = {1}, sixteen[1] = {16};
  stax_value_id_t c = vm_initializer(g, "one", STAX_DTYPE_FLOAT32, 1, one, &one_value);
  stax_value_id_t gv = vm_initializer(g, "gamma", STAX_DTYPE_FLOAT32, 1, sixteen, gamma);
  stax_value_id_t bv = vm_initializer(g, "beta", STAX_DTYPE_FLOAT32, 1, sixteen, beta);
  stax_attr_t axis = stax_attr_int("axis", -1);
  stax_value_id_t shifted = vm_binary(g, STAX_OP_Add, "shift", x, c);
  vm_output(g, vm_node(g, STAX_OP_Softmax, "softmax", 1, &shifted, 1, &axis));
  stax_attr_t ln_attrs[2] = {stax_attr_int("axis", -1), stax_attr_float("epsilon", 1e-5f)};
  stax_value_id_t ln_inputs[3] = {z, gv, bv};
  vm_output(g, vm_node(g, STAX_OP_LayerNormalization, "ln", 3, ln_inputs, 2, ln_attrs));
  return finish(g);
}

/* MatMul + bias + Relu: x[B, S, 8] @ w[8, 12] + b[12]. */
static stax_program_t* build_matmul(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64), vm_const(g, 8)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims);
  float w[96], b[12];
  for (int i = 0; i < 96; i++) w[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
  for (int i = 0; i < 12; i++) b[i] = 0.1f * (float)(i - 6);
  int64_t w_dims[2] = {8, 12}, b_dims[1] = {12};
  stax_value_id_t wv = vm_initializer(g, "w", STAX_DTYPE_FLOAT32, 2, w_dims, w);
  stax_value_id_t bv = vm_initializer(g, "b", STAX_DTYPE_FLOAT32, 1, b_dims, b);
  stax_value_id_t mm = vm_binary(g, STAX_OP_MatMul, "mm", x, wv);
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", vm_binary(g, STAX_OP_Add, "bias", mm, bv)));
  return finish(g);
}

/* Conv + bias + Relu, scaled per channel: Relu(Conv(x[N, 3, H, W], w[4, 3, 3, 3], b, pads 1))
 * * scale[4, 1, 1]. */
static stax_program_t* build_conv(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[4] = {vm_symbol(g, "N", 1, 8), vm_const(g, 3), vm_symbol(g, "H", 1, 64),
                               vm_symbol(g, "W", 1, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 4, dims);
  float w[108], b[4], scale[4];
  for (int i = 0; i < 108; i++) w[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
  for (int i = 0; i < 4; i++) {
    b[i] = 0.1f * (float)(i - 2);
    scale[i] = 0.5f + 0.25f * (float)i;
  }
  int64_t w_dims[4] = {4, 3, 3, 3}, b_dims[1] = {4}, s_dims[3] = {4, 1, 1};
  int64_t pads[4] = {1, 1, 1, 1};
  stax_value_id_t conv_in[3] = {x, vm_initializer(g, "w", STAX_DTYPE_FLOAT32, 4, w_dims, w),
                                vm_initializer(g, "b", STAX_DTYPE_FLOAT32, 1, b_dims, b)};
  stax_value_id_t sv = vm_initializer(g, "scale", STAX_DTYPE_FLOAT32, 3, s_dims, scale);
  stax_attr_t attrs[1] = {stax_attr_ints("pads", 4, pads)};
  stax_value_id_t c = vm_node(g, STAX_OP_Conv, "conv", 3, conv_in, 1, attrs);
  vm_output(g, vm_binary(g, STAX_OP_Mul, "scale", vm_unary(g, STAX_OP_Relu, "relu", c), sv));
  return finish(g);
}

typedef enum { KIND_EW, KIND_ROWS, KIND_MM, KIND_CONV } kind_t;

/* Inputs for (b, s) of a model kind; returns the input count. */
static int32_t make_inputs(kind_t kind, vm_rng_t* rng, int64_t b, int64_t s, stax_tensor_t** in) {
  if (kind == KIND_EW) {
    int64_t xd[2] = {b, s}, yd[1] = {s};
    in[0] = vm_random_f32(rng, 2, xd);
    in[1] = vm_random_f32(rng, 1, yd);
    return 2;
  }
  if (kind == KIND_ROWS) {
    int64_t xd[2] = {b, s}, zd[2] = {b, 16};
    in[0] = vm_random_f32(rng, 2, xd);
    in[1] = vm_random_f32(rng, 2, zd);
    return 2;
  }
  if (kind == KIND_CONV) {
    int64_t xd[4] = {1 + b % 3, 3, b, s};
    in[0] = vm_random_f32(rng, 4, xd);
    return 1;
  }
  int64_t xd[3] = {b, s, 8};
  in[0] = vm_random_f32(rng, 3, xd);
  return 1;
}

static stax_program_t* build(kind_t kind) {
  switch (kind) {
    case KIND_EW: return build_elementwise();
    case KIND_ROWS: return build_rows();
    case KIND_MM: return build_matmul();
    default: return build_conv();
  }
}

/* Shape-generic versions for the contexts jit_context makes (tests of the exact-shape policy
 * turn them off). */
static stax_jit_generic_t g_generic = STAX_JIT_GENERIC_DEFAULT;

static stax_context_t* jit_context(stax_program_t* program, stax_jit_mode_t mode,
                                   int32_t threshold, int32_t versions) {
  stax_context_options_t options = {.jit = mode, .jit_threshold = threshold,
                                    .jit_max_versions = versions, .jit_generic = g_generic};
  stax_context_t* context = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &context));
  return context;
}



/* ---- cases ----------------------------------------------------------------------------------- */

/* Shapes come from a small pool, so compiles stay few while sequences vary: alternating
 * between two, growing through the pool, repeating one, and random picks. */
static const int64_t pool_shapes[5][2] = {{3, 5}, {4, 17}, {1, 1}, {8, 33}, {2, 9}};

static void pick_shape(int round, int pattern, vm_rng_t* rng, int64_t* b, int64_t* s) {
  int index = 0;
  switch (pattern) {
    case 0: index = round % 2; break;                 /* alternating */
    case 1: index = (round / 10) % 5; break;          /* growing, with repeats */
    case 2: index = 3; break;                         /* repeating */
    default: index = (int)vm_rng_range(rng, 0, 4);    /* random */
  }
  *b = pool_shapes[index][0];
  *s = pool_shapes[index][1];
}

static void differential(kind_t kind) {
  stax_program_t* program = build(kind);
  /* The hook lives in the shared dispatch text: exercise both loops (rows: switch). */
  stax_context_options_t options = {.jit = STAX_JIT_SYNC, .jit_threshold = 2,
                                    .jit_max_versions = 8,
                                    .dispatch = kind == KIND_ROWS ? STAX_DISPATCH_SWITCH
                                                                  : STAX_DISPATCH_GOTO};
  stax_context_t* jit = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  int32_t n_out = stax_program_output_count(program);
  vm_rng_t rng = {0x1234567u + (uint64_t)kind};
  int mismatches = 0;
  for (int round = 0; round < 200; round++) {
    int64_t b = 0, s = 0;
    pick_shape(round, round / 50, &rng, &b, &s);
    stax_tensor_t* in[2] = {0};
    int32_t n_in = make_inputs(kind, &rng, b, s, in);
    if (!run_both(jit, interp, n_in, in, n_out)) mismatches++;
    for (int32_t i = 0; i < n_in; i++) stax_tensor_release(in[i]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK(total.compiles >= 1);
  /* The backend may refuse a degenerate shape (a softmax over a broadcast axis of 1): that
   * signature stays interpreted; the recurring others run kernels. */
  CHECK(total.failures <= 1);
  CHECK(total.hits > total.misses);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

static void test_differential_elementwise(void) {
  if (have_backend()) differential(KIND_EW);
}
static void test_differential_rows(void) {
  if (have_backend()) differential(KIND_ROWS);
}
static void test_differential_matmul(void) {
  if (have_backend()) differential(KIND_MM);
}
static void test_differential_conv(void) {
  if (have_backend()) differential(KIND_CONV);
}

/* Attention-like views between computes of one segment:
 * x[B, S, 64] @ w1 -> Reshape [B, S, 4, 16] -> Transpose -> Softmax -> Transpose -> Reshape
 * [B, S, 64] -> @ w2 + b. The views split the segment into groups with interpreted views
 * between them; the later groups' inputs are view layouts the kernels check at run time. */
static stax_program_t* build_views(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64), vm_const(g, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims);
  static float w1[64 * 64], w2[64 * 64], b[64];
  for (int i = 0; i < 64 * 64; i++) {
    w1[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    w2[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  }
  for (int i = 0; i < 64; i++) b[i] = 0.01f * (float)(i - 32);
  int64_t w_dims[2] = {64, 64}, b_dims[1] = {64}, four[1] = {4}, three[1] = {3};
  int64_t split[4] = {0, 0, 4, 16}, merge[3] = {0, 0, 64}, perm[4] = {0, 2, 1, 3};
  stax_value_id_t w1v = vm_initializer(g, "w1", STAX_DTYPE_FLOAT32, 2, w_dims, w1);
  stax_value_id_t w2v = vm_initializer(g, "w2", STAX_DTYPE_FLOAT32, 2, w_dims, w2);
  stax_value_id_t bv = vm_initializer(g, "b", STAX_DTYPE_FLOAT32, 1, b_dims, b);
  stax_value_id_t sv = vm_initializer(g, "split", STAX_DTYPE_INT64, 1, four, split);
  stax_value_id_t mv = vm_initializer(g, "merge", STAX_DTYPE_INT64, 1, three, merge);
  stax_attr_t perm_attr = stax_attr_ints("perm", 4, perm);
  stax_attr_t axis = stax_attr_int("axis", -1);
  stax_value_id_t t = vm_binary(g, STAX_OP_MatMul, "mm1", x, w1v);
  stax_value_id_t r_in[2] = {t, sv};
  t = vm_node(g, STAX_OP_Reshape, "split_heads", 2, r_in, 0, NULL);
  t = vm_node(g, STAX_OP_Transpose, "t1", 1, &t, 1, &perm_attr);
  t = vm_node(g, STAX_OP_Softmax, "softmax", 1, &t, 1, &axis);
  t = vm_node(g, STAX_OP_Transpose, "t2", 1, &t, 1, &perm_attr);
  stax_value_id_t m_in[2] = {t, mv};
  t = vm_node(g, STAX_OP_Reshape, "merge_heads", 2, m_in, 0, NULL);
  t = vm_binary(g, STAX_OP_MatMul, "mm2", t, w2v);
  vm_output(g, vm_binary(g, STAX_OP_Add, "bias", t, bv));
  return finish(g);
}

static void views_run(bool verify, stax_jit_mode_t mode) {
  stax_program_t* program = build_views();
  stax_context_options_t options = {.jit = mode, .jit_threshold = 2,
                                    .jit_max_versions = 8, .jit_verify = verify};
  stax_context_t* jit = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {0xabcdefu + (uint64_t)verify};
  int mismatches = 0, rounds = verify ? 24 : 120;
  for (int round = 0; round < rounds; round++) {
    int64_t b = 0, s = 0;
    pick_shape(round, (round * 4) / rounds, &rng, &b, &s);
    int64_t xd[3] = {b, s, 64};
    stax_tensor_t* in[1] = {vm_random_f32(&rng, 3, xd)};
    if (!run_both(jit, interp, 1, in, 1)) mismatches++;
    stax_tensor_release(in[0]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  if (mode == STAX_JIT_BACKGROUND) {
    /* Kernels land group by group while calls go on (partly compiled versions run their
     * other groups interpreted); once drained, the repeated shapes hit. */
    stax_program_jit_drain(program);
    uint64_t hits_before = 0;
    total_stats(program, &total);
    hits_before = total.hits;
    for (int round = 0; round < 6; round++) {
      int64_t xd[3] = {3, 5, 64};
      stax_tensor_t* in[1] = {vm_random_f32(&rng, 3, xd)};
      if (!run_both(jit, interp, 1, in, 1)) mismatches++;
      stax_tensor_release(in[0]);
      if (round == 1) stax_program_jit_drain(program);
    }
    CHECK_EQ_INT(mismatches, 0);
    total_stats(program, &total);
    CHECK(total.hits >= hits_before + 4);
  }
  total_stats(program, &total);
  CHECK(total.compiles >= 1);
  if (mode == STAX_JIT_SYNC) CHECK(total.hits > total.misses);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

static void test_views_between_groups(void) {
  if (have_backend()) views_run(false, STAX_JIT_SYNC);
}
static void test_views_between_groups_verify(void) {
  if (have_backend()) views_run(true, STAX_JIT_SYNC);
}
static void test_views_between_groups_background(void) {
  if (have_backend()) views_run(false, STAX_JIT_BACKGROUND);
}

/* Version cap 1, threshold 1, two alternating shapes: every call compiles and evicts the
 * previous version; a second context holding the same program keeps running. No kernel may
 * outlive the program (live_kernels returns to where it was). */
static void test_eviction(void) {
  if (!have_backend()) return;
  g_generic = STAX_JIT_GENERIC_OFF; /* exact versions, one per shape */
  uint64_t live_before = stax_jit_stats().live_kernels;
  stax_program_t* program = build(KIND_EW);
  stax_context_t* jit = jit_context(program, STAX_JIT_SYNC, 1, 1);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {99};
  int mismatches = 0;
  for (int round = 0; round < 6; round++) {
    stax_tensor_t* in[2] = {0};
    make_inputs(KIND_EW, &rng, pool_shapes[round % 2][0], pool_shapes[round % 2][1], in);
    if (!run_both(jit, interp, 2, in, 1)) mismatches++;
    stax_tensor_release(in[0]);
    stax_tensor_release(in[1]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK(total.evictions >= 4);
  CHECK(total.versions <= 1);
  CHECK(total.hits >= 6);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
  CHECK_EQ_INT((int)(stax_jit_stats().live_kernels - live_before), 0);
  g_generic = STAX_JIT_GENERIC_DEFAULT;
}

/* A segment holding a group the backend refuses (Concat) and one it compiles (an elementwise
 * chain): the version mixes a kernel with interpreted nodes. */
static void test_mixed_plan(void) {
  if (!have_backend()) return;
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 1, dims + 1);
  stax_value_id_t pair[2] = {x, x};
  stax_attr_t axis = stax_attr_int("axis", 1);
  vm_output(g, vm_node(g, STAX_OP_Concat, "concat", 2, pair, 1, &axis));
  vm_output(g, vm_unary(g, STAX_OP_Sigmoid, "sig", vm_binary(g, STAX_OP_Mul, "mul", x, y)));
  stax_program_t* program = finish(g);
  stax_context_t* jit = jit_context(program, STAX_JIT_SYNC, 1, 8);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {5};
  int mismatches = 0;
  for (int round = 0; round < 8; round++) {
    stax_tensor_t* in[2] = {0};
    make_inputs(KIND_EW, &rng, pool_shapes[round % 2][0], pool_shapes[round % 2][1], in);
    if (!run_both(jit, interp, 2, in, 2)) mismatches++;
    stax_tensor_release(in[0]);
    stax_tensor_release(in[1]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK(total.compiles >= 1); /* x[B, S] * y[S]: one symbolic class kernel, or exact ones */
  CHECK(total.hits >= 6);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

/* STAX_JIT_FAIL_COMPILE=1: every compile fails; results stay right, each signature fails once
 * and is not retried. */
static void test_compile_failure(void) {
  if (!have_backend()) return;
  setenv("STAX_JIT_FAIL_COMPILE", "1", 1);
  stax_program_t* program = build(KIND_MM);
  stax_context_t* jit = jit_context(program, STAX_JIT_SYNC, 1, 8);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {7};
  int mismatches = 0;
  for (int round = 0; round < 10; round++) {
    stax_tensor_t* in[1] = {0};
    make_inputs(KIND_MM, &rng, pool_shapes[round % 2][0], pool_shapes[round % 2][1], in);
    if (!run_both(jit, interp, 1, in, 1)) mismatches++;
    stax_tensor_release(in[0]);
  }
  unsetenv("STAX_JIT_FAIL_COMPILE");
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  /* The class version fails first, then one exact version per shape (the class version
   * lacks every group). */
  CHECK_EQ_INT((int)total.failures, 3);
  CHECK_EQ_INT((int)total.hits, 0);
  CHECK_EQ_INT((int)total.compiles, 0);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

/* Verify mode runs kernel and interpreter on the same inputs and agrees on correct kernels. */
static void test_verify_mode(void) {
  if (!have_backend()) return;
  stax_program_t* program = build(KIND_ROWS);
  stax_context_options_t options = {.jit = STAX_JIT_SYNC, .jit_threshold = 1, .jit_verify = true};
  stax_context_t* jit = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {11};
  int mismatches = 0;
  for (int round = 0; round < 6; round++) {
    stax_tensor_t* in[2] = {0};
    make_inputs(KIND_ROWS, &rng, pool_shapes[round % 2][0], pool_shapes[round % 2][1], in);
    if (!run_both(jit, interp, 2, in, 2)) mismatches++;
    stax_tensor_release(in[0]);
    stax_tensor_release(in[1]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK(total.hits >= 4);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

/* With a tolerance far below float32 rounding, the kernel's float32 exp and the interpreter's
 * double-precision libm path differ somewhere in a softmax: the first mismatch is an error
 * that names the segment, the signature, the output and the element. */
static void test_verify_mismatch(void) {
  if (!have_backend()) return;
  stax_program_t* program = build(KIND_ROWS);
  stax_context_options_t options = {.jit = STAX_JIT_SYNC, .jit_threshold = 1, .jit_verify = true,
                                    .jit_tolerance = 1e-30};
  stax_context_t* jit = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
  vm_rng_t rng = {13};
  stax_status_t failure = STAX_OK;
  for (int round = 0; round < 6 && !failure; round++) {
    stax_tensor_t* in[2] = {0};
    stax_tensor_t* out[2] = {0};
    make_inputs(KIND_ROWS, &rng, 8, 33, in);
    failure = stax_context_run(jit, 2, in, 2, out);
    for (int k = 0; k < 2; k++) {
      if (in[k]) stax_tensor_release(in[k]);
      if (out[k]) stax_tensor_release(out[k]);
    }
  }
  CHECK(failure != STAX_OK);
  if (failure) {
    const char* message = stax_status_message(failure);
    CHECK(strstr(message, "jit verify: segment 0, signature ") != NULL);
    CHECK(strstr(message, "element ") != NULL);
    CHECK(strstr(message, "output '") != NULL);
    stax_status_free(failure);
  }
  stax_context_destroy(jit);
  stax_program_release(program);
}

/* Four threads, each with a background-JIT context and an interpreter context on one shared
 * program, cycling through three shapes while the compiler thread works and evicts (cap 1):
 * kernels evicted while another thread runs them are freed only after it lets go. */
typedef struct thread_arg_t {
  stax_program_t* program;
  int index;
  int mismatches;
} thread_arg_t;

static void* thread_main(void* p) {
  thread_arg_t* arg = p;
  stax_context_t* jit = jit_context(arg->program, STAX_JIT_BACKGROUND, 1, 1);
  stax_context_t* interp = vm_context(arg->program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {1000u + (uint64_t)arg->index};
  for (int round = 0; round < 40; round++) {
    stax_tensor_t* in[1] = {0};
    int shape = (round + arg->index) % 3;
    make_inputs(KIND_MM, &rng, pool_shapes[shape][0], pool_shapes[shape][1], in);
    if (!run_both(jit, interp, 1, in, 1)) arg->mismatches++;
    stax_tensor_release(in[0]);
  }
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  return NULL;
}

/* Exact-shape versions only: every shape compiles, a cap of 1 evicts while others run. */
static void test_threads_background(void) {
  if (!have_backend()) return;
  g_generic = STAX_JIT_GENERIC_OFF;
  stax_program_t* program = build(KIND_MM);
  pthread_t threads[4];
  thread_arg_t args[4];
  for (int t = 0; t < 4; t++) {
    args[t] = (thread_arg_t){.program = program, .index = t};
    CHECK_EQ_INT(pthread_create(&threads[t], NULL, thread_main, &args[t]), 0);
  }
  for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
  stax_program_jit_drain(program);
  for (int t = 0; t < 4; t++) CHECK_EQ_INT(args[t].mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  /* Every signature was queued once at least (threshold 1); with a cap of 1, all but the last
   * compiled version were evicted. */
  CHECK(total.compiles >= 3);
  CHECK(total.evictions + 1 >= total.compiles);
  CHECK(total.versions <= 1);
  CHECK_EQ_INT((int)total.entries, 160);
  stax_program_release(program);
  g_generic = STAX_JIT_GENERIC_DEFAULT;
}

/* The JSON statistics name every segment and the totals. */
static void test_stats_json(void) {
  stax_program_t* program = build(KIND_EW);
  char* text = NULL;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  CHECK(out != NULL);
  if (out) {
    CHECK_OK(stax_program_jit_stats_json(program, out));
    fclose(out);
    CHECK(strstr(text, "\"segments\"") != NULL);
    CHECK(strstr(text, "\"hit_rate\"") != NULL);
    free(text);
  }
  stax_jit_segment_stats_t st;
  CHECK_ERROR(stax_program_jit_stats(program, -1, &st), STAX_INVALID_ARGUMENT, "segment");
  stax_program_release(program);
}

/* An op with no JIT lowering (LRN) between two elementwise ops is kept in a group of its
 * own: the groups before and after it still compile (two kernels per version), the LRN is
 * interpreted between them, and the results match the interpreter. */
static void unsupported_op_alone_run(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[4] = {vm_symbol(g, "N", 1, 8), vm_const(g, 3), vm_symbol(g, "H", 2, 64),
                               vm_symbol(g, "W", 2, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 4, dims);
  stax_attr_t lrn_attrs[1] = {stax_attr_int("size", 3)};
  stax_value_id_t t = vm_unary(g, STAX_OP_Sigmoid, "sigmoid", x);
  t = vm_node(g, STAX_OP_LRN, "lrn", 1, &t, 1, lrn_attrs);
  vm_output(g, vm_unary(g, STAX_OP_Tanh, "tanh", t));
  stax_program_t* program = finish(g);
  stax_context_t* jit = jit_context(program, STAX_JIT_SYNC, 1, 8);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {77};
  uint64_t compiled_before = stax_jit_stats().compiled;
  int mismatches = 0;
  for (int round = 0; round < 6; round++) {
    int64_t xd[4] = {1 + round % 2, 3, 6 + 2 * (round % 2), 10};
    stax_tensor_t* in[1] = {vm_random_f32(&rng, 4, xd)};
    if (!run_both(jit, interp, 1, in, 1)) mismatches++;
    stax_tensor_release(in[0]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  if (g_generic == STAX_JIT_GENERIC_OFF) {
    CHECK_EQ_INT((int)(stax_jit_stats().compiled - compiled_before), 4); /* 2 shapes x 2 */
    CHECK_EQ_INT(total.compiles, 2);
  } else {
    /* One shape-generic version serves both shapes: 2 kernels, compiled once. */
    CHECK_EQ_INT((int)(stax_jit_stats().compiled - compiled_before), 2);
    CHECK_EQ_INT(total.compiles, 1);
    CHECK_EQ_INT(total.generic_versions, 1);
    CHECK_EQ_INT(total.exact_versions, 0);
    CHECK_EQ_INT(total.full_hits, 6); /* the LRN has no lowering: not counted against */
  }
  CHECK_EQ_INT(total.failures, 0);
  CHECK_EQ_INT(total.hits, 6);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

/* A view between groups whose layout the tier mispredicts: Relu -> Transpose [B, 8, S] ->
 * Reshape [B, 2, 4, S] (a view of the transposed strides, predicted contiguous) -> Sigmoid.
 * The second kernel refuses its argument at run time: that call interprets the segment, the
 * version is dropped (a failure, not retried) and later calls interpret; every result
 * matches the interpreter and no kernel outlives the program. */
static void view_misprediction_run(void) {
  uint64_t live_before = stax_jit_stats().live_kernels;
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 2, 64), vm_const(g, 8)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims);
  int64_t perm[3] = {0, 2, 1}, shape[4] = {0, 2, 4, -1}, four[1] = {4};
  stax_attr_t perm_attr = stax_attr_ints("perm", 3, perm);
  stax_value_id_t sv = vm_initializer(g, "shape", STAX_DTYPE_INT64, 1, four, shape);
  stax_value_id_t t = vm_unary(g, STAX_OP_Relu, "relu", x);
  t = vm_node(g, STAX_OP_Transpose, "t", 1, &t, 1, &perm_attr);
  stax_value_id_t r_in[2] = {t, sv};
  t = vm_node(g, STAX_OP_Reshape, "split", 2, r_in, 0, NULL);
  vm_output(g, vm_unary(g, STAX_OP_Sigmoid, "sig", t));
  stax_program_t* program = finish(g);
  stax_context_t* jit = jit_context(program, STAX_JIT_SYNC, 1, 8);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {31};
  int mismatches = 0;
  for (int round = 0; round < 12; round++) {
    int64_t xd[3] = {round % 2 ? 2 : 3, round % 2 ? 7 : 5, 8};
    stax_tensor_t* in[1] = {vm_random_f32(&rng, 3, xd)};
    if (!run_both(jit, interp, 1, in, 1)) mismatches++;
    stax_tensor_release(in[0]);
  }
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  if (g_generic == STAX_JIT_GENERIC_OFF) {
    CHECK_EQ_INT(total.compiles, 2); /* one per signature, never retried */
    CHECK_EQ_INT(total.failures, 2); /* both dropped at their first run */
    CHECK_EQ_INT(total.versions, 0);
    CHECK_EQ_INT(total.hits, 2);     /* the calls that found the kernels, then interpreted */
    CHECK_EQ_INT(total.misses, 10);
  } else {
    /* The shape-generic version's second kernel declines the strided view on every call:
     * that group alone is interpreted, the first keeps running compiled, and the version
     * stays (a rows-generic kernel declining is not a misprediction of the class). */
    CHECK_EQ_INT(total.compiles, 1);
    CHECK_EQ_INT(total.failures, 0);
    CHECK_EQ_INT(total.versions, 1);
    CHECK_EQ_INT(total.hits, 12);
    CHECK_EQ_INT(total.partial_hits, 12);
    CHECK_EQ_INT(total.misses, 0);
  }
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
  CHECK_EQ_INT((int)(stax_jit_stats().live_kernels - live_before), 0);
}

/* Both policies: exact-shape versions only, and shape-generic first (the default). */
static void test_unsupported_op_alone(void) {
  if (!have_backend()) return;
  g_generic = STAX_JIT_GENERIC_OFF;
  unsupported_op_alone_run();
  g_generic = STAX_JIT_GENERIC_DEFAULT;
  unsupported_op_alone_run();
}

static void test_view_misprediction(void) {
  if (!have_backend()) return;
  g_generic = STAX_JIT_GENERIC_OFF;
  view_misprediction_run();
  g_generic = STAX_JIT_GENERIC_DEFAULT;
  view_misprediction_run();
}

/* Costly math before a row op of several passes is its own group (stored once, read back),
 * not recomputed in every pass: Gelu(x + b) -> LayerNormalization -> Softmax compiles to an
 * elementwise kernel and a row kernel, and a single-pass reduction after Gelu stays fused. */
static void test_costly_producer_cut(void) {
  if (!have_backend()) return;
  for (int variant = 0; variant < 2; variant++) {
    stax_graph_t* g = new_graph();
    const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 64), vm_const(g, 48)};
    stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
    float bias[48], gamma[48], beta[48];
    for (int i = 0; i < 48; i++) {
      bias[i] = 0.02f * (float)(i - 24);
      gamma[i] = 1.0f + 0.01f * (float)i;
      beta[i] = 0.05f * (float)(i % 5);
    }
    int64_t n48[1] = {48};
    stax_value_id_t t = vm_binary(g, STAX_OP_Add, "add", x,
                                  vm_initializer(g, "bias", STAX_DTYPE_FLOAT32, 1, n48, bias));
    t = vm_unary(g, STAX_OP_Gelu, "gelu", t);
    stax_attr_t axis = stax_attr_int("axis", -1);
    if (variant == 0) {
      stax_value_id_t ln_in[3] = {t, vm_initializer(g, "gamma", STAX_DTYPE_FLOAT32, 1, n48, gamma),
                                  vm_initializer(g, "beta", STAX_DTYPE_FLOAT32, 1, n48, beta)};
      stax_attr_t ln_attrs[2] = {stax_attr_int("axis", -1), stax_attr_float("epsilon", 1e-5f)};
      t = vm_node(g, STAX_OP_LayerNormalization, "ln", 3, ln_in, 2, ln_attrs);
      t = vm_node(g, STAX_OP_Softmax, "softmax", 1, &t, 1, &axis);
    } else {
      int64_t axes_value[1] = {-1}, one[1] = {1};
      stax_value_id_t axes = vm_initializer(g, "axes", STAX_DTYPE_INT64, 1, one, axes_value);
      stax_value_id_t r_in[2] = {t, axes};
      t = vm_node(g, STAX_OP_ReduceSum, "sum", 2, r_in, 0, NULL);
    }
    vm_output(g, t);
    stax_program_t* program = finish(g);
    CHECK_OK(stax_program_jit_set_cache_dir(program, ""));
    stax_context_options_t options = {.jit = STAX_JIT_SYNC, .jit_threshold = 1, .trace = true};
    stax_context_t* jit = NULL;
    CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
    stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
    vm_rng_t rng = {77u + (uint64_t)variant};
    int mismatches = 0;
    for (int round = 0; round < 12; round++) {
      int64_t xd[2] = {1 + round * 5, 48};
      stax_tensor_t* in[1] = {vm_random_f32(&rng, 2, xd)};
      if (!run_both(jit, interp, 1, in, 1)) mismatches++;
      stax_tensor_release(in[0]);
    }
    CHECK_EQ_INT(mismatches, 0);
    stax_jit_call_stats_t calls;
    CHECK_OK(stax_program_jit_call_stats(program, &calls));
    CHECK_EQ_INT((int)calls.compiled, 12);
    char* json = NULL;
    size_t size = 0;
    FILE* out = open_memstream(&json, &size);
    CHECK_OK(stax_context_trace_write(jit, out));
    fclose(out);
    CHECK(strstr(json, "\"compile seg0_g0_rows\"") != NULL);
    /* The cut: a second group only before the row op of several passes. */
    CHECK_EQ_INT(strstr(json, "\"compile seg0_g1_rows\"") != NULL, variant == 0);
    free(json);
    stax_context_destroy(jit);
    stax_context_destroy(interp);
    stax_program_release(program);
  }
}

/* Groups whose op the JIT has no kernel for at their dtype (a float64 MatMul, a float16
 * AveragePool: stax_jit_op_dtype_lowered) are counted as dtype_fallbacks once each and
 * interpreted, giving the interpreter's bits; a float32 group beside them still compiles. */
static void test_dtype_fallbacks(void) {
  if (!have_backend()) return;
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[4] = {vm_symbol(g, "B", 1, 16), vm_const(g, 2), vm_const(g, 4),
                               vm_const(g, 4)};
  stax_value_id_t x64 = vm_input(g, "x64", STAX_DTYPE_FLOAT64, 2, (const stax_dim_t*[]){dims[0], dims[2]});
  double w[12] = {1, -2, 3, 0.5, 4, -1, 2, 2, -3, 1, 0.25, 5};
  stax_value_id_t wv = vm_initializer(g, "w", STAX_DTYPE_FLOAT64, 2, (int64_t[]){4, 3}, w);
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu64", vm_binary(g, STAX_OP_MatMul, "mm64", x64, wv)));
  stax_value_id_t x16 = vm_input(g, "x16", STAX_DTYPE_FLOAT16, 4, dims);
  const int64_t kernel[2] = {2, 2};
  stax_attr_t attrs[1] = {stax_attr_ints("kernel_shape", 2, kernel)};
  vm_output(g, vm_node(g, STAX_OP_AveragePool, "avg16", 1, &x16, 1, attrs));
  stax_value_id_t x32 = vm_input(g, "x32", STAX_DTYPE_FLOAT32, 2, (const stax_dim_t*[]){dims[0], dims[2]});
  vm_output(g, vm_unary(g, STAX_OP_Sigmoid, "sig", vm_binary(g, STAX_OP_Mul, "sq", x32, x32)));
  stax_program_t* program = finish(g);
  stax_context_t* jit = jit_context(program, STAX_JIT_SYNC, 1, 8);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {41};
  for (int round = 0; round < 6; round++) {
    int64_t b = 1 + round * 3;
    stax_tensor_t* in[3] = {vm_tensor(STAX_DTYPE_FLOAT64, 2, (int64_t[]){b, 4}, NULL),
                            vm_tensor(STAX_DTYPE_FLOAT16, 4, (int64_t[]){b, 2, 4, 4}, NULL),
                            vm_random_f32(&rng, 2, (int64_t[]){b, 4})};
    double* d = stax_tensor_data(in[0]);
    uint16_t* h = stax_tensor_data(in[1]);
    for (int64_t i = 0; i < b * 4; i++) d[i] = vm_rng_float(&rng) * 3;
    for (int64_t i = 0; i < b * 32; i++) h[i] = (uint16_t)(0x3800 + vm_rng_range(&rng, 0, 0x7ff));
    stax_tensor_t* a[3] = {0};
    stax_tensor_t* r[3] = {0};
    CHECK_OK(stax_context_run(jit, 3, in, 3, a));
    CHECK_OK(stax_context_run(interp, 3, in, 3, r));
    for (int32_t o = 0; o < 2; o++) /* interpreted on both sides: the same bits */
      CHECK(a[o] && r[o] &&
            memcmp(stax_tensor_data(a[o]), stax_tensor_data(r[o]),
                   (size_t)stax_tensor_element_count(r[o]) * stax_dtype_size(stax_tensor_dtype(r[o]))) == 0);
    for (int64_t i = 0; a[2] && r[2] && i < b * 4; i++)
      CHECK(fabsf(vm_f32_at(a[2], i) - vm_f32_at(r[2], i)) <= 1e-6f);
    for (int32_t k = 0; k < 3; k++) {
      stax_tensor_release(in[k]);
      if (a[k]) stax_tensor_release(a[k]);
      if (r[k]) stax_tensor_release(r[k]);
    }
  }
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT((int)total.dtype_fallbacks, 2);
  CHECK(total.compiles >= 1); /* the float32 group */
  CHECK(total.hits >= 5);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_differential_elementwise), STAX_TEST(test_differential_rows),
               STAX_TEST(test_differential_matmul), STAX_TEST(test_differential_conv),
               STAX_TEST(test_eviction),
               STAX_TEST(test_mixed_plan), STAX_TEST(test_compile_failure), STAX_TEST(test_verify_mode), STAX_TEST(test_verify_mismatch),
               STAX_TEST(test_threads_background), STAX_TEST(test_stats_json),
               STAX_TEST(test_views_between_groups),
               STAX_TEST(test_views_between_groups_verify),
               STAX_TEST(test_views_between_groups_background),
               STAX_TEST(test_view_misprediction), STAX_TEST(test_unsupported_op_alone),
               STAX_TEST(test_costly_producer_cut), STAX_TEST(test_dtype_fallbacks))
