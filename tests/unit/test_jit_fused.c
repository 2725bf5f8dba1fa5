/* Tests for the fused JIT kernels: row kernels (lower_rows.c: Softmax, LogSoftmax,
 * LayerNormalization, the Reduce* ops over the last axis, chains of reductions such as a
 * hand-written LayerNorm and RMSNorm, producers and consumers around them) and matmul
 * (lower_matmul.c: MatMul / Gemm with bias, activation and residual epilogues, odd M/N/K,
 * transposed and batched operands, the thread pool). Every result is compared with the
 * generic kernels. Also measures (and prints, never asserts) the JIT matmul's GFLOP/s at
 * 512^3 and the compile times. */
#include <time.h>

#include "test_jit_util.h"

static stax_op_t const row_ops[] = {STAX_OP_Softmax, STAX_OP_LogSoftmax};

/* ---- softmax family ---------------------------------------------------------------------- */

static void softmax_case(stax_op_t op, stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                         int32_t layout, stax_threadpool_t* pool) {
  test_group_t tg;
  tg_init(&tg);
  int32_t x = tg_input_layout(&tg, "x", dtype, rank, dims, layout, -4, 4);
  /* A producer (scale and bias) and a consumer (multiply by a row mask) around it. */
  int64_t row[1] = {dims[rank - 1]}, one[1] = {1};
  int32_t scale = tg_input(&tg, "scale", dtype, 0, one);
  int32_t mask = tg_input_layout(&tg, "mask", dtype, 1, row, 0, 0, 1);
  int32_t xs[2] = {x, scale};
  int32_t scaled = tg_node(&tg, STAX_OP_Mul, 2, xs, dtype, rank, dims, 0, NULL);
  stax_node_attr_t axis = tg_attr_int("axis", -1);
  int32_t soft = tg_node(&tg, op, 1, &scaled, dtype, rank, dims, 1, &axis);
  int32_t sm[2] = {soft, mask};
  int32_t masked = tg_node(&tg, STAX_OP_Mul, 2, sm, dtype, rank, dims, 0, NULL);
  tg_output(&tg, masked);
  tg_output(&tg, soft);
  stax_jit_compile_options_t options = {.thread_count = pool ? 4 : 1};
  double tolerance = dtype == STAX_DTYPE_FLOAT64 ? 1e-12 : 2e-6;
  char name[64];
  snprintf(name, sizeof(name), "%s_%d", stax_op_name(op), (int)dims[rank - 1]);
  CHECK_EQ_INT(tg_check(&tg, name, &options, pool, tolerance, 1e-5), STAX_OK_CODE);
  tg_free(&tg);
}

/* Softmax whose output nothing else in the group reads: the sum pass stores exp(x - max) into
 * the output and the final pass scales it in place, one exp per element (the kernel IR shows
 * one exp where the consumed softmax above has two). Checked against the generic kernel. */
static void softmax_stored_case(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                int32_t layout, stax_threadpool_t* pool) {
  test_group_t tg;
  tg_init(&tg);
  int32_t x = tg_input_layout(&tg, "x", dtype, rank, dims, layout, -4, 4);
  int64_t one[1] = {1};
  int32_t scale = tg_input(&tg, "scale", dtype, 0, one);
  int32_t xs[2] = {x, scale};
  int32_t scaled = tg_node(&tg, STAX_OP_Mul, 2, xs, dtype, rank, dims, 0, NULL);
  stax_node_attr_t axis = tg_attr_int("axis", -1);
  tg_output(&tg, tg_node(&tg, STAX_OP_Softmax, 1, &scaled, dtype, rank, dims, 1, &axis));
  stax_jit_compile_options_t options = {.thread_count = pool ? 4 : 1, .keep_kernel_ir = true};
  char name[64];
  snprintf(name, sizeof(name), "softmax_stored_%d", (int)dims[rank - 1]);
  CHECK_EQ_INT(tg_check(&tg, name, &options, pool, dtype == STAX_DTYPE_FLOAT64 ? 1e-12 : 2e-6,
                        1e-5),
               STAX_OK_CODE);
  stax_jit_backend_t* backend = tg_backend();
  stax_jit_kernel_t* kernel = NULL;
  if (backend) CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, name), &options, &kernel));
  const char* text = kernel ? stax_jit_kernel_ir_text(kernel) : NULL;
  if (text && dims[rank - 1] > 1) { /* a row of one is a per-row value, not a stored row */
    int exps = 0;
    for (const char* at = strstr(text, "exp("); at; at = strstr(at + 1, "exp(")) exps++;
    CHECK_EQ_INT(exps, 1);
  }
  stax_jit_kernel_release(kernel);
  tg_free(&tg);
}

static void test_softmax_rows(void) {
  int64_t shapes[][3] = {{1, 1, 1}, {2, 3, 5}, {3, 1, 17}, {1, 4, 64}, {2, 2, 1000}, {1, 7, 33}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
    for (size_t o = 0; o < 2; o++) {
      softmax_case(row_ops[o], STAX_DTYPE_FLOAT32, 3, shapes[s], (int32_t)(s % 4), NULL);
      softmax_case(row_ops[o], STAX_DTYPE_FLOAT64, 3, shapes[s], 0, NULL);
    }
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
    softmax_stored_case(STAX_DTYPE_FLOAT32, 3, shapes[s], (int32_t)(s % 4), NULL);
    softmax_stored_case(STAX_DTYPE_FLOAT64, 3, shapes[s], 0, NULL);
  }
  int64_t vector[1] = {301};
  softmax_case(STAX_OP_Softmax, STAX_DTYPE_FLOAT32, 1, vector, 0, NULL);
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(tg_sys(), 4, &pool));
  int64_t big[2] = {513, 129};
  softmax_case(STAX_OP_Softmax, STAX_DTYPE_FLOAT32, 2, big, 0, pool);
  softmax_case(STAX_OP_LogSoftmax, STAX_DTYPE_FLOAT32, 2, big, 1, pool);
  softmax_stored_case(STAX_DTYPE_FLOAT32, 2, big, 1, pool);
  stax_threadpool_destroy(pool);
}

/* ---- layer normalization ----------------------------------------------------------------- */

static void layernorm_case(int32_t rank, const int64_t* dims, bool with_bias, bool with_stats,
                           stax_threadpool_t* pool) {
  test_group_t tg;
  tg_init(&tg);
  int64_t row[1] = {dims[rank - 1]};
  int32_t x = tg_input_layout(&tg, "x", STAX_DTYPE_FLOAT32, rank, dims, 0, -3, 5);
  int32_t residual = tg_input(&tg, "residual", STAX_DTYPE_FLOAT32, rank, dims);
  int32_t scale = tg_input(&tg, "scale", STAX_DTYPE_FLOAT32, 1, row);
  int32_t bias = tg_input(&tg, "bias", STAX_DTYPE_FLOAT32, 1, row);
  int32_t xr[2] = {x, residual};
  int32_t sum = tg_node(&tg, STAX_OP_Add, 2, xr, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
  int64_t stat_dims[STAX_MAX_RANK];
  memcpy(stat_dims, dims, sizeof(int64_t) * (size_t)rank);
  stat_dims[rank - 1] = 1;
  int32_t y = tg_value(&tg, STAX_DTYPE_FLOAT32, rank, dims);
  int32_t mean = with_stats ? tg_value(&tg, STAX_DTYPE_FLOAT32, rank, stat_dims) : -1;
  int32_t inv = with_stats ? tg_value(&tg, STAX_DTYPE_FLOAT32, rank, stat_dims) : -1;
  int32_t inputs[3] = {sum, scale, bias};
  int32_t outputs[3] = {y, mean, inv};
  stax_node_attr_t attrs[2] = {tg_attr_int("axis", -1), tg_attr_float("epsilon", 1e-3f)};
  tg_node_n(&tg, STAX_OP_LayerNormalization, with_bias ? 3 : 2, inputs, with_stats ? 3 : 1, outputs,
            2, attrs);
  int32_t activated = tg_node(&tg, STAX_OP_Gelu, 1, &y, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
  tg_output(&tg, activated);
  tg_output(&tg, sum);
  if (with_stats) {
    tg_output(&tg, mean);
    tg_output(&tg, inv);
  }
  stax_jit_compile_options_t options = {.thread_count = pool ? 4 : 1};
  CHECK_EQ_INT(tg_check(&tg, "layernorm", &options, pool, 2e-5, 2e-5), STAX_OK_CODE);
  tg_free(&tg);
}

static void test_layernorm_rows(void) {
  int64_t shapes[][3] = {{1, 1, 1}, {2, 3, 7}, {1, 5, 64}, {3, 2, 768}, {1, 1, 1001}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
    layernorm_case(3, shapes[s], true, s % 2 == 0, NULL);
    layernorm_case(3, shapes[s], false, s % 2 == 1, NULL);
  }
  int64_t flat[1] = {77};
  layernorm_case(1, flat, true, true, NULL);
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(tg_sys(), 4, &pool));
  int64_t big[2] = {257, 384};
  layernorm_case(2, big, true, true, pool);
  stax_threadpool_destroy(pool);
}

/* ---- reductions -------------------------------------------------------------------------- */

static void test_reduce_rows(void) {
  static const stax_op_t ops[] = {
      STAX_OP_ReduceSum,    STAX_OP_ReduceMean,     STAX_OP_ReduceMax, STAX_OP_ReduceMin,
      STAX_OP_ReduceProd,   STAX_OP_ReduceL1,       STAX_OP_ReduceL2,  STAX_OP_ReduceSumSquare,
      STAX_OP_ReduceLogSum, STAX_OP_ReduceLogSumExp};
  int64_t dims[3] = {3, 4, 37};
  for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
    for (int32_t keep = 0; keep < 2; keep++) {
      for (int32_t axes_as_input = 0; axes_as_input < 2; axes_as_input++) {
        test_group_t tg;
        tg_init(&tg);
        double low = ops[o] == STAX_OP_ReduceProd ? 0.8 : 0.1;
        double high = ops[o] == STAX_OP_ReduceProd ? 1.2 : 3;
        int32_t x = tg_input_layout(&tg, "x", STAX_DTYPE_FLOAT32, 3, dims, keep ? 1 : 0, low, high);
        int64_t out_dims[3] = {3, 4, 1};
        int32_t out_rank = keep ? 3 : 2;
        int64_t minus_one = -1;
        stax_node_attr_t attrs[2] = {tg_attr_int("keepdims", keep),
                                     tg_attr_ints("axes", 1, &minus_one)};
        int32_t reduced;
        if (axes_as_input) {
          int64_t one[1] = {1};
          int32_t axes = tg_input(&tg, "axes", STAX_DTYPE_INT64, 1, one);
          *(int64_t*)stax_tensor_data(tg.tensors[axes]) = 2;
          tg.values[axes].constant = tg.tensors[axes];
          int32_t inputs[2] = {x, axes};
          reduced =
              tg_node(&tg, ops[o], 2, inputs, STAX_DTYPE_FLOAT32, out_rank, out_dims, 1, attrs);
        } else {
          reduced = tg_node(&tg, ops[o], 1, &x, STAX_DTYPE_FLOAT32, out_rank, out_dims, 2, attrs);
        }
        /* A consumer in the reduced space. */
        int32_t twice_inputs[2] = {reduced, reduced};
        int32_t twice = tg_node(&tg, STAX_OP_Add, 2, twice_inputs, STAX_DTYPE_FLOAT32, out_rank,
                                out_dims, 0, NULL);
        tg_output(&tg, reduced);
        tg_output(&tg, twice);
        char name[64];
        snprintf(name, sizeof(name), "%s_keep%d", stax_op_name(ops[o]), (int)keep);
        CHECK_EQ_INT(tg_check(&tg, name, NULL, NULL, 1e-5, 1e-5), STAX_OK_CODE);
        tg_free(&tg);
      }
    }
  }
}

/* LayerNorm and RMSNorm written with primitive ops: several reductions in one row kernel. */
static void test_reduction_chains(void) {
  int64_t dims[2] = {6, 45}, stat[2] = {6, 1}, row[1] = {45}, scalar[1] = {1};
  for (int32_t variant = 0; variant < 2; variant++) {
    test_group_t tg;
    tg_init(&tg);
    int32_t x = tg_input_layout(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims, 0, -2, 4);
    int32_t gamma = tg_input(&tg, "gamma", STAX_DTYPE_FLOAT32, 1, row);
    int32_t eps = tg_input(&tg, "eps", STAX_DTYPE_FLOAT32, 0, scalar);
    *(float*)stax_tensor_data(tg.tensors[eps]) = 1e-5f;
    int64_t last = -1;
    stax_node_attr_t attrs[2] = {tg_attr_ints("axes", 1, &last), tg_attr_int("keepdims", 1)};
    int32_t centered = x;
    if (variant == 0) {
      int32_t mean = tg_node(&tg, STAX_OP_ReduceMean, 1, &x, STAX_DTYPE_FLOAT32, 2, stat, 2, attrs);
      int32_t xm[2] = {x, mean};
      centered = tg_node(&tg, STAX_OP_Sub, 2, xm, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
    }
    int32_t cc[2] = {centered, centered};
    int32_t square = tg_node(&tg, STAX_OP_Mul, 2, cc, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
    int32_t variance =
        tg_node(&tg, STAX_OP_ReduceMean, 1, &square, STAX_DTYPE_FLOAT32, 2, stat, 2, attrs);
    int32_t ve[2] = {variance, eps};
    int32_t shifted = tg_node(&tg, STAX_OP_Add, 2, ve, STAX_DTYPE_FLOAT32, 2, stat, 0, NULL);
    int32_t root = tg_node(&tg, STAX_OP_Sqrt, 1, &shifted, STAX_DTYPE_FLOAT32, 2, stat, 0, NULL);
    int32_t cr[2] = {centered, root};
    int32_t normalized = tg_node(&tg, STAX_OP_Div, 2, cr, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
    int32_t ng[2] = {normalized, gamma};
    int32_t y = tg_node(&tg, STAX_OP_Mul, 2, ng, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
    tg_output(&tg, y);
    tg_output(&tg, root);
    CHECK_EQ_INT(tg_check(&tg, variant ? "rmsnorm" : "manual_layernorm", NULL, NULL, 1e-5, 1e-5),
                 STAX_OK_CODE);
    tg_free(&tg);
  }
}

static void test_rows_not_fusible(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  stax_jit_kernel_t* kernel = NULL;
  int64_t dims[2] = {4, 6}, reduced[2] = {1, 6};
  /* Softmax over the first axis. */
  test_group_t tg;
  tg_init(&tg);
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_node_attr_t axis = tg_attr_int("axis", 0);
  int32_t y = tg_node(&tg, STAX_OP_Softmax, 1, &x, STAX_DTYPE_FLOAT32, 2, dims, 1, &axis);
  tg_output(&tg, y);
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "axis0"), NULL, &kernel),
              STAX_UNIMPLEMENTED, "last axis");
  tg_free(&tg);
  /* ReduceSum over the first axis. */
  tg_init(&tg);
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int64_t zero = 0;
  stax_node_attr_t axes = tg_attr_ints("axes", 1, &zero);
  y = tg_node(&tg, STAX_OP_ReduceSum, 1, &x, STAX_DTYPE_FLOAT32, 2, reduced, 1, &axes);
  tg_output(&tg, y);
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(&tg, "sum0"), NULL, &kernel),
              STAX_UNIMPLEMENTED, "last axis");
  tg_free(&tg);
  CHECK(kernel == NULL);
}

/* ---- matmul ------------------------------------------------------------------------------ */

/* Y = act(A x B + bias) (+ residual), with A and B in the given layouts (1: transposed view). */
static void matmul_case(int64_t m, int64_t n, int64_t k, int32_t a_layout, int32_t b_layout,
                        stax_op_t activation, bool residual,
                        const stax_jit_compile_options_t* options, stax_threadpool_t* pool) {
  test_group_t tg;
  tg_init(&tg);
  tg_grid = true;
  int64_t a_dims[2] = {m, k}, b_dims[2] = {k, n}, out_dims[2] = {m, n}, bias_dims[1] = {n};
  int32_t a = tg_input_layout(&tg, "a", STAX_DTYPE_FLOAT32, 2, a_dims, a_layout, -4, 4);
  int32_t b = tg_input_layout(&tg, "b", STAX_DTYPE_FLOAT32, 2, b_dims, b_layout, -4, 4);
  int32_t bias = tg_input(&tg, "bias", STAX_DTYPE_FLOAT32, 1, bias_dims);
  int32_t ab[2] = {a, b};
  int32_t product = tg_node(&tg, STAX_OP_MatMul, 2, ab, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
  int32_t pb[2] = {product, bias};
  int32_t biased = tg_node(&tg, STAX_OP_Add, 2, pb, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
  int32_t y = tg_node(&tg, activation, 1, &biased, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
  if (residual) {
    int32_t r = tg_input(&tg, "residual", STAX_DTYPE_FLOAT32, 2, out_dims);
    int32_t yr[2] = {y, r};
    y = tg_node(&tg, STAX_OP_Add, 2, yr, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
  }
  tg_output(&tg, y);
  tg_grid = false;
  char name[96];
  snprintf(name, sizeof(name), "matmul_%lldx%lldx%lld_%s", (long long)m, (long long)n, (long long)k,
           stax_op_name(activation));
  CHECK_EQ_INT(tg_check(&tg, name, options, pool, 2e-5 * (double)(k + 1), 2e-5), STAX_OK_CODE);
  tg_free(&tg);
}

/* A constant weight (its value carries contents; its buffer immutable, as a program's
 * constants are): the kernel's B-packing stages are marked as filling the panels from a
 * constant, the first run packs B once and keeps the panels with the weight's buffer, later
 * runs (and a second kernel with the same layout) skip packing; every result is bit-identical
 * to the same kernel with a mutable weight, for both nests (unblocked and K-blocked), and
 * batch-broadcast B. */
static void constant_weight_case(int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_a) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  test_group_t tg;
  tg_init(&tg);
  int64_t a_dims[3] = {batch, m, k}, b_dims[2] = {k, n}, out_dims[3] = {batch, m, n};
  int32_t a = tg_input_layout(&tg, "a", STAX_DTYPE_FLOAT32, 3, a_dims, trans_a ? 1 : 0, -1, 1);
  int32_t b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 2, b_dims);
  int32_t ab[2] = {a, b};
  int32_t y = tg_node(&tg, STAX_OP_MatMul, 2, ab, STAX_DTYPE_FLOAT32, 3, out_dims, 0, NULL);
  int32_t r = tg_node(&tg, STAX_OP_Relu, 1, &y, STAX_DTYPE_FLOAT32, 3, out_dims, 0, NULL);
  tg_output(&tg, r);
  /* Mutable first: the reference. */
  stax_jit_kernel_t* plain = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "mm_plain"), NULL, &plain));
  stax_tensor_t* expected[1] = {NULL};
  if (plain) CHECK_OK(tg_run(&tg, plain, NULL, expected));
  /* Then constant and immutable. */
  tg.values[b].constant = tg.tensors[b];
  stax_buffer_set_immutable(tg.tensors[b]->buffer);
  stax_jit_compile_options_t options = {.keep_kernel_ir = true};
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "mm_const"), &options, &kernel));
  if (kernel && stax_jit_kernel_ir_text(kernel))
    CHECK(strstr(stax_jit_kernel_ir_text(kernel), "(fills panels from constant b)") != NULL);
  stax_threadpool_t* pool = stax_threadpool_default();
  for (int run = 0; run < 3 && kernel && expected[0]; run++) {
    stax_tensor_t* out[1] = {NULL};
    CHECK_OK(tg_run(&tg, kernel, run == 1 ? pool : NULL, out));
    CHECK(out[0] && memcmp(stax_tensor_data(out[0]), stax_tensor_data(expected[0]),
                           (size_t)(batch * m * n) * sizeof(float)) == 0);
    CHECK(atomic_load(&tg.tensors[b]->buffer->derived) != NULL);
    stax_tensor_release(out[0]);
  }
  if (expected[0]) stax_tensor_release(expected[0]);
  if (kernel) stax_jit_kernel_release(kernel);
  if (plain) stax_jit_kernel_release(plain);
  tg_free(&tg);
}

static void test_matmul_constant_weight(void) {
  constant_weight_case(1, 40, 70, 64, false);    /* unblocked nest */
  constant_weight_case(3, 7, 33, 300, false);    /* batch-broadcast B, edge panel */
  constant_weight_case(1, 40, 160, 700, true);   /* transposed A: the K-blocked nest */
  constant_weight_case(1, 1, 200, 64, false);    /* one row: spans of panels */
}

static void test_matmul_bias_activation(void) {
  static const int64_t sizes[][3] = {{1, 1, 1},    {5, 7, 3},    {6, 16, 8},   {7, 17, 9},
                                     {13, 33, 31}, {12, 32, 64}, {64, 48, 40}, {100, 37, 129},
                                     {3, 200, 5},  {45, 5, 17},  {2, 3, 0},    {31, 64, 1}};
  static const stax_op_t activations[] = {STAX_OP_Gelu, STAX_OP_Relu, STAX_OP_Sigmoid,
                                          STAX_OP_Tanh};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    stax_op_t activation = activations[s % 4];
    matmul_case(sizes[s][0], sizes[s][1], sizes[s][2], 0, 0, activation, s % 3 == 0, NULL, NULL);
    matmul_case(sizes[s][0], sizes[s][1], sizes[s][2], (int32_t)(s % 2), 1, STAX_OP_Gelu, false,
                NULL, NULL);
  }
  /* Other vector widths: other tile geometries and tails. */
  stax_jit_compile_options_t narrow = {.vector_bits = 128}, wide = {.vector_bits = 512};
  matmul_case(29, 45, 23, 0, 0, STAX_OP_Gelu, true, &narrow, NULL);
  matmul_case(29, 45, 23, 1, 0, STAX_OP_Gelu, true, &wide, NULL);
  /* The thread pool, both parallel orders. */
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(tg_sys(), 4, &pool));
  stax_jit_compile_options_t four = {.thread_count = 4};
  matmul_case(131, 77, 65, 0, 0, STAX_OP_Gelu, true, &four, pool);  /* panels in parallel */
  matmul_case(200, 20, 33, 0, 1, STAX_OP_Relu, false, &four, pool); /* row tiles in parallel */
  /* One row (a GEMV): one-row tiles over spans of panels (in parallel with the pool), the
   * panels left over and a partial panel, on every width. */
  matmul_case(1, 181, 37, 0, 0, STAX_OP_Gelu, true, NULL, NULL);
  matmul_case(1, 181, 37, 0, 1, STAX_OP_Relu, false, &four, pool);
  matmul_case(1, 181, 37, 1, 0, STAX_OP_Sigmoid, true, &narrow, NULL);
  matmul_case(1, 181, 37, 0, 0, STAX_OP_Tanh, false, &wide, NULL);
  matmul_case(1, 64, 300, 0, 0, STAX_OP_Relu, false, NULL, NULL); /* whole spans only */
  stax_threadpool_destroy(pool);
}

/* The blocked nest (lower_matmul.c's choose_blocking): K cut into blocks (the boundaries of
 * KC = 256 on AVX2, 128 on AVX-512, 512 on SSE crossed from both sides), a packed transposed
 * A, row blocks and their leftover rows, the parallel column blocks and the panels they leave,
 * epilogues run once after the last K block. A transposed A always takes the blocked nest once
 * there are three row tiles; a long K (a B panel past half of L2) or a large A does too. */
static void test_matmul_blocked(void) {
  stax_jit_compile_options_t one = {.thread_count = 1};
  static const int64_t depths[] = {1, 255, 256, 257, 1000, 3072};
  for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); d++) {
    /* Transposed A (packed), odd M and N: edge rows, edge lanes. */
    matmul_case(31, 37, depths[d], 1, 0, STAX_OP_Relu, d % 2 == 0, &one, NULL);
    matmul_case(20, 48, depths[d], 1, 1, STAX_OP_Gelu, false, &one, NULL);
  }
  /* A long K with a row-major A: the B panel past half of L2, unpacked A. */
  matmul_case(19, 33, 4500, 0, 0, STAX_OP_Tanh, true, &one, NULL);
  /* A large A (past 4 MB): several row blocks, their leftover rows, K blocks. */
  matmul_case(1100, 21, 1000, 0, 1, STAX_OP_Relu, true, &one, NULL);
  /* Wide N (3072) with a transposed A. */
  matmul_case(13, 3072, 300, 1, 0, STAX_OP_Sigmoid, false, &one, NULL);
  /* Other vector widths: other MR, NR and KC. */
  stax_jit_compile_options_t narrow = {.vector_bits = 128, .thread_count = 1};
  stax_jit_compile_options_t wide = {.vector_bits = 512, .thread_count = 1};
  matmul_case(40, 45, 1030, 1, 0, STAX_OP_Gelu, true, &narrow, NULL);
  matmul_case(40, 45, 513, 1, 0, STAX_OP_Gelu, true, &narrow, NULL);
  matmul_case(40, 70, 300, 1, 0, STAX_OP_Gelu, true, &wide, NULL);
  matmul_case(40, 70, 129, 1, 1, STAX_OP_Relu, false, &wide, NULL);
  /* Threads: the parallel column blocks, the panels they leave and the partial panel. */
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(tg_sys(), 4, &pool));
  stax_jit_compile_options_t two = {.thread_count = 2}, four = {.thread_count = 4};
  matmul_case(131, 77, 700, 1, 0, STAX_OP_Gelu, true, &two, pool);
  matmul_case(50, 300, 1000, 1, 1, STAX_OP_Relu, false, &four, pool);
  matmul_case(25, 3072, 257, 1, 0, STAX_OP_Relu, true, &four, pool);
  matmul_case(19, 100, 4500, 0, 0, STAX_OP_Relu, false, &two, pool);
  stax_threadpool_destroy(pool);
}

/* Gemm with alpha, beta * C and transA on the blocked nest: the epilogue applies alpha and
 * beta * C once, after the last K block; and batched MatMul with broadcasting, blocked. */
static void test_matmul_blocked_gemm_batched(void) {
  for (int32_t variant = 0; variant < 2; variant++) {
    test_group_t tg;
    tg_init(&tg);
    tg_grid = true;
    int64_t m = 29, n = 35, k = 600;
    int64_t a_dims[2] = {k, m}, b_dims[2] = {variant ? n : k, variant ? k : n};
    int64_t out_dims[2] = {m, n}, c_dims[2] = {1, n};
    int32_t a = tg_input(&tg, "a", STAX_DTYPE_FLOAT32, 2, a_dims);
    int32_t b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 2, b_dims);
    int32_t c = tg_input(&tg, "c", STAX_DTYPE_FLOAT32, 2, c_dims);
    tg_grid = false;
    stax_node_attr_t attrs[4] = {tg_attr_int("transA", 1), tg_attr_int("transB", variant),
                                 tg_attr_float("alpha", 0.5f), tg_attr_float("beta", -2.0f)};
    int32_t inputs[3] = {a, b, c};
    int32_t y = tg_node(&tg, STAX_OP_Gemm, 3, inputs, STAX_DTYPE_FLOAT32, 2, out_dims, 4, attrs);
    int32_t activated = tg_node(&tg, STAX_OP_Relu, 1, &y, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
    tg_output(&tg, y);
    tg_output(&tg, activated);
    stax_jit_compile_options_t options = {.thread_count = variant ? 2 : 1};
    CHECK_EQ_INT(tg_check(&tg, "gemm_blocked", &options, NULL, 1e-2, 1e-5), STAX_OK_CODE);
    tg_free(&tg);
  }
  /* Batched: A broadcast over the batch (packed once) and per batch point (not packed). */
  static const int64_t shapes[][2][2] = {{{1, 1}, {2, 3}}, {{2, 3}, {1, 3}}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
    test_group_t tg;
    tg_init(&tg);
    tg_grid = true;
    int64_t m = 20, n = 37, k = 700;
    int64_t a_dims[4] = {shapes[s][0][0], shapes[s][0][1], m, k};
    int64_t b_dims[4] = {shapes[s][1][0], shapes[s][1][1], k, n};
    int64_t out_dims[4] = {2, 3, m, n};
    int32_t a = tg_input_layout(&tg, "a", STAX_DTYPE_FLOAT32, 4, a_dims, 1, -4, 4);
    int32_t b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 4, b_dims);
    int32_t residual = tg_input(&tg, "residual", STAX_DTYPE_FLOAT32, 4, out_dims);
    tg_grid = false;
    int32_t ab[2] = {a, b};
    int32_t product = tg_node(&tg, STAX_OP_MatMul, 2, ab, STAX_DTYPE_FLOAT32, 4, out_dims, 0, NULL);
    int32_t pr[2] = {product, residual};
    int32_t y = tg_node(&tg, STAX_OP_Add, 2, pr, STAX_DTYPE_FLOAT32, 4, out_dims, 0, NULL);
    tg_output(&tg, y);
    stax_jit_compile_options_t options = {.thread_count = 2};
    CHECK_EQ_INT(tg_check(&tg, "batched_blocked", &options, NULL, 1e-2, 1e-5), STAX_OK_CODE);
    tg_free(&tg);
  }
}

static void test_gemm_options(void) {
  for (int32_t variant = 0; variant < 4; variant++) {
    test_group_t tg;
    tg_init(&tg);
    tg_grid = true;
    int64_t m = 23, n = 19, k = 11;
    bool trans_a = variant & 1, trans_b = variant & 2;
    int64_t a_dims[2] = {trans_a ? k : m, trans_a ? m : k};
    int64_t b_dims[2] = {trans_b ? n : k, trans_b ? k : n};
    int64_t out_dims[2] = {m, n}, c_dims[2] = {variant == 3 ? 1 : m, variant == 3 ? n : 1};
    int32_t a = tg_input(&tg, "a", STAX_DTYPE_FLOAT32, 2, a_dims);
    int32_t b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 2, b_dims);
    int32_t c = tg_input(&tg, "c", STAX_DTYPE_FLOAT32, 2, c_dims);
    tg_grid = false;
    stax_node_attr_t attrs[4] = {tg_attr_int("transA", trans_a), tg_attr_int("transB", trans_b),
                                 tg_attr_float("alpha", 0.5f),
                                 tg_attr_float("beta", variant == 2 ? 0.0f : -2.0f)};
    int32_t inputs[3] = {a, b, c};
    int32_t y = tg_node(&tg, STAX_OP_Gemm, 3, inputs, STAX_DTYPE_FLOAT32, 2, out_dims, 4, attrs);
    int32_t activated = tg_node(&tg, STAX_OP_Relu, 1, &y, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
    tg_output(&tg, y);
    tg_output(&tg, activated);
    CHECK_EQ_INT(tg_check(&tg, "gemm", NULL, NULL, 1e-4, 1e-5), STAX_OK_CODE);
    tg_free(&tg);
  }
}

static void test_batched_matmul(void) {
  /* (A batch, B batch) -> output batch, with broadcasting both ways. */
  static const int64_t shapes[][2][2] = {
      {{2, 3}, {2, 3}}, {{2, 1}, {1, 3}}, {{1, 1}, {4, 1}}, {{3, 2}, {1, 1}}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
    test_group_t tg;
    tg_init(&tg);
    tg_grid = true;
    int64_t m = 9, n = 21, k = 7;
    int64_t a_dims[4] = {shapes[s][0][0], shapes[s][0][1], m, k};
    int64_t b_dims[4] = {shapes[s][1][0], shapes[s][1][1], k, n};
    int64_t out_dims[4] = {a_dims[0] > b_dims[0] ? a_dims[0] : b_dims[0],
                           a_dims[1] > b_dims[1] ? a_dims[1] : b_dims[1], m, n};
    int32_t a = tg_input_layout(&tg, "a", STAX_DTYPE_FLOAT32, 4, a_dims, (int32_t)(s % 2), -4, 4);
    /* B of rank 3 when its leading batch dim is 1: right-aligned broadcasting. */
    int32_t b = b_dims[0] == 1 ? tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 3, b_dims + 1)
                               : tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 4, b_dims);
    int32_t residual = tg_input(&tg, "residual", STAX_DTYPE_FLOAT32, 4, out_dims);
    tg_grid = false;
    int32_t ab[2] = {a, b};
    int32_t product = tg_node(&tg, STAX_OP_MatMul, 2, ab, STAX_DTYPE_FLOAT32, 4, out_dims, 0, NULL);
    int32_t pr[2] = {product, residual};
    int32_t y = tg_node(&tg, STAX_OP_Add, 2, pr, STAX_DTYPE_FLOAT32, 4, out_dims, 0, NULL);
    tg_output(&tg, y);
    stax_jit_compile_options_t options = {.thread_count = 2};
    CHECK_EQ_INT(tg_check(&tg, "batched", &options, NULL, 1e-4, 1e-5), STAX_OK_CODE);
    tg_free(&tg);
  }
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double thread_seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Measures, never asserts: GFLOP/s of the JIT matmul and of the generic kernel at 512^3 on
 * the default thread pool, and the compile times. */
static void test_matmul_performance(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  int64_t size = 512;
  test_group_t tg;
  tg_init(&tg);
  int64_t dims[2] = {size, size}, bias_dims[1] = {size};
  int32_t a = tg_input(&tg, "a", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t bias = tg_input(&tg, "bias", STAX_DTYPE_FLOAT32, 1, bias_dims);
  int32_t ab[2] = {a, b};
  int32_t product = tg_node(&tg, STAX_OP_MatMul, 2, ab, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t pb[2] = {product, bias};
  int32_t biased = tg_node(&tg, STAX_OP_Add, 2, pb, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t y = tg_node(&tg, STAX_OP_Gelu, 1, &biased, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, y);
  stax_threadpool_t* pool = stax_threadpool_default();
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "matmul512"), NULL, &kernel));
  if (!kernel) {
    tg_free(&tg);
    return;
  }
  stax_tensor_t* out[1] = {NULL};
  CHECK_OK(tg_run(&tg, kernel, pool, out)); /* warm up */
  int32_t runs = 5;
  double best = 1e30;
  stax_tensor_t* inputs[3] = {tg.tensors[a], tg.tensors[b], tg.tensors[bias]};
  for (int32_t r = 0; r < runs; r++) {
    double start = seconds_now();
    CHECK_OK(stax_jit_kernel_run(kernel, 3, inputs, 1, out, pool));
    double elapsed = seconds_now() - start;
    if (elapsed < best) best = elapsed;
  }
  double flops = 2.0 * (double)size * (double)size * (double)size;
  /* The interpreter's path for the same group: the generic MatMul, Add and Gelu kernels, and
   * the generic MatMul alone. */
  double generic_best = 1e30, generic_matmul_best = 1e30;
  for (int32_t r = 0; r < runs; r++) {
    stax_tensor_t* result[1] = {NULL};
    double start = seconds_now();
    CHECK_OK(tg_reference_on(&tg, pool, result));
    double elapsed = seconds_now() - start;
    if (elapsed < generic_best) generic_best = elapsed;
    stax_tensor_release(result[0]);
    result[0] = NULL;
    stax_tensor_t* operands[2] = {tg.tensors[a], tg.tensors[b]};
    stax_kernel_call_t call = {.node = &tg.graph_nodes[0],
                               .allocator = tg_sys(),
                               .pool = pool,
                               .input_count = 2,
                               .inputs = operands,
                               .output_count = 1,
                               .outputs = result};
    start = seconds_now();
    CHECK_OK(stax_kernel_MatMul(&call));
    elapsed = seconds_now() - start;
    if (elapsed < generic_matmul_best) generic_matmul_best = elapsed;
    stax_tensor_release(result[0]);
  }
  printf(
      "  matmul+bias+gelu 512^3 on %d threads: JIT %.1f GFLOP/s (%.2f ms); generic kernels "
      "%.1f GFLOP/s (%.2f ms), generic MatMul alone %.1f GFLOP/s; compile %.1f ms\n",
      (int)stax_threadpool_thread_count(pool), flops / best * 1e-9, best * 1e3,
      flops / generic_best * 1e-9, generic_best * 1e3, flops / generic_matmul_best * 1e-9,
      stax_jit_kernel_compile_ms(kernel) + stax_jit_kernel_lower_ms(kernel));
  /* Correctness of the measured kernel too. */
  stax_tensor_t* expected[1] = {NULL};
  CHECK_OK(tg_reference(&tg, expected));
  CHECK_EQ_INT(tg_compare("matmul512", out[0], expected[0], 1e-3, 1e-4), 0);
  stax_tensor_release(expected[0]);
  stax_tensor_release(out[0]);
  stax_jit_kernel_release(kernel);
  tg_free(&tg);
}

/* Measures, never asserts: GFLOP/s of a plain MatMul [M, K] x [K, N] over shapes that stress
 * the blocking (long K, wide N, one-row and few-row products) on pools of 1 and 2 threads, and
 * each kernel's compile time. STAX_MATMUL_BENCH_RUNS raises the number of timed runs (best of
 * them is printed; the machine this runs on is shared and noisy). */
static void test_matmul_shapes_performance(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  /* M, N, K, and A's layout (1: a transposed view, as Gemm's transA reads it). */
  static const int64_t shapes[][4] = {{512, 512, 512, 0}, {128, 768, 3072, 0},
                                      {128, 3072, 768, 0}, {2048, 768, 768, 0},
                                      {1, 768, 3072, 0},   {8, 3072, 768, 0},
                                      {128, 768, 3072, 1}, {2048, 768, 768, 1}};
  const char* env = getenv("STAX_MATMUL_BENCH_RUNS");
  int32_t runs = env ? atoi(env) : 5;
  if (runs < 1) runs = 1;
  for (int32_t threads = 1; threads <= 2; threads++) {
    stax_threadpool_t* pool = NULL;
    CHECK_OK(stax_threadpool_create(tg_sys(), threads, &pool));
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
      int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
      test_group_t tg;
      tg_init(&tg);
      int64_t a_dims[2] = {m, k}, b_dims[2] = {k, n}, out_dims[2] = {m, n};
      int32_t a =
          tg_input_layout(&tg, "a", STAX_DTYPE_FLOAT32, 2, a_dims, (int32_t)shapes[s][3], -1, 1);
      int32_t b = tg_input_layout(&tg, "b", STAX_DTYPE_FLOAT32, 2, b_dims, 0, -1, 1);
      int32_t ab[2] = {a, b};
      int32_t y = tg_node(&tg, STAX_OP_MatMul, 2, ab, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
      tg_output(&tg, y);
      stax_jit_compile_options_t options = {.thread_count = threads};
      stax_jit_kernel_t* kernel = NULL;
      CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "matmul_shape"), &options, &kernel));
      if (!kernel) {
        tg_free(&tg);
        continue;
      }
      stax_tensor_t* out[1] = {NULL};
      CHECK_OK(tg_run(&tg, kernel, pool, out)); /* warm up */
      stax_tensor_t* inputs[2] = {tg.tensors[a], tg.tensors[b]};
      double flops = 2.0 * (double)m * (double)n * (double)k, best = 1e30, best_cpu = 1e30;
      /* Small products are repeated inside each timing so the clock's resolution and the
       * pool's wake-up do not dominate. */
      int32_t reps = (int32_t)(2e8 / flops) + 1;
      for (int32_t r = 0; r < runs; r++) {
        double start = seconds_now(), start_cpu = thread_seconds_now();
        for (int32_t rep = 0; rep < reps; rep++)
          CHECK_OK(stax_jit_kernel_run(kernel, 2, inputs, 1, out, pool));
        double elapsed = (seconds_now() - start) / reps;
        double elapsed_cpu = (thread_seconds_now() - start_cpu) / reps;
        if (elapsed < best) best = elapsed;
        if (elapsed_cpu < best_cpu) best_cpu = elapsed_cpu;
      }
      /* With one thread everything runs on this one, so its CPU time excludes the time the
       * shared machine took it away. */
      char cpu[64] = "";
      if (threads == 1) snprintf(cpu, sizeof(cpu), ", %.1f GFLOP/s of CPU time", flops / best_cpu * 1e-9);
      printf("  matmul M=%lld N=%lld K=%lld%s, %d thread%s: %.1f GFLOP/s (%.3f ms)%s, compile %.1f ms\n",
             (long long)m, (long long)n, (long long)k, shapes[s][3] ? " A^T" : "", (int)threads,
             threads > 1 ? "s" : "",
             flops / best * 1e-9, best * 1e3, cpu,
             stax_jit_kernel_compile_ms(kernel) + stax_jit_kernel_lower_ms(kernel));
      if (threads == 1) {
        /* The measured kernels are checked too. */
        stax_tensor_t* expected[1] = {NULL};
        CHECK_OK(tg_reference(&tg, expected));
        CHECK_EQ_INT(tg_compare("matmul_shape", out[0], expected[0], 1e-3, 1e-3), 0);
        stax_tensor_release(expected[0]);
      }
      stax_tensor_release(out[0]);
      stax_jit_kernel_release(kernel);
      tg_free(&tg);
    }
    stax_threadpool_destroy(pool);
  }
}

/* Measures, never asserts: a fused row kernel and elementwise chain against the generic kernels
 * run one after another (what the interpreter does), on the default pool. */
static double time_jit(test_group_t* tg, const char* name, stax_threadpool_t* pool) {
  stax_jit_backend_t* backend = tg_backend();
  stax_jit_kernel_t* kernel = NULL;
  if (backend) CHECK_OK(stax_jit_compile_group(backend, tg_group(tg, name), NULL, &kernel));
  if (!kernel) return 0;
  stax_tensor_t* out[TG_MAX_VALUES] = {NULL};
  CHECK_OK(tg_run(tg, kernel, pool, out));
  stax_tensor_t* inputs[TG_MAX_VALUES];
  for (int32_t i = 0; i < tg->input_count; i++) inputs[i] = tg->tensors[tg->inputs[i]];
  double best = 1e30;
  for (int32_t r = 0; r < 10; r++) {
    double start = seconds_now();
    CHECK_OK(stax_jit_kernel_run(kernel, tg->input_count, inputs, tg->output_count, out, pool));
    double elapsed = seconds_now() - start;
    if (elapsed < best) best = elapsed;
  }
  for (int32_t i = 0; i < tg->output_count; i++) stax_tensor_release(out[i]);
  stax_jit_kernel_release(kernel);
  return best;
}

static double time_generic(test_group_t* tg, stax_threadpool_t* pool) {
  double best = 1e30;
  for (int32_t r = 0; r < 10; r++) {
    stax_tensor_t* out[TG_MAX_VALUES] = {NULL};
    double start = seconds_now();
    CHECK_OK(tg_reference_on(tg, pool, out));
    double elapsed = seconds_now() - start;
    if (elapsed < best) best = elapsed;
    for (int32_t i = 0; i < tg->output_count; i++) stax_tensor_release(out[i]);
  }
  return best;
}

static void test_fusion_performance(void) {
  stax_threadpool_t* pool = stax_threadpool_default();
  int64_t dims[2] = {1024, 1024}, row[1] = {1024};
  test_group_t tg;
  tg_init(&tg);
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 1, row);
  int32_t c = tg_input(&tg, "c", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t xb[2] = {x, b};
  int32_t sum = tg_node(&tg, STAX_OP_Add, 2, xb, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t g = tg_node(&tg, STAX_OP_Gelu, 1, &sum, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t gc[2] = {g, c};
  int32_t y = tg_node(&tg, STAX_OP_Mul, 2, gc, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, y);
  double jit = time_jit(&tg, "add_gelu_mul", pool), generic = time_generic(&tg, pool);
  printf("  add+gelu+mul [1024, 1024]: JIT %.3f ms, generic kernels %.3f ms\n", jit * 1e3,
         generic * 1e3);
  tg_free(&tg);
  tg_init(&tg);
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t r = tg_input(&tg, "r", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t scale = tg_input(&tg, "scale", STAX_DTYPE_FLOAT32, 1, row);
  b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 1, row);
  int32_t xr[2] = {x, r};
  sum = tg_node(&tg, STAX_OP_Add, 2, xr, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t ln_inputs[3] = {sum, scale, b};
  y = tg_node(&tg, STAX_OP_LayerNormalization, 3, ln_inputs, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, y);
  jit = time_jit(&tg, "add_layernorm", pool);
  generic = time_generic(&tg, pool);
  printf("  add+layernorm [1024, 1024]: JIT %.3f ms, generic kernels %.3f ms\n", jit * 1e3,
         generic * 1e3);
  tg_free(&tg);
  tg_init(&tg);
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  y = tg_node(&tg, STAX_OP_Softmax, 1, &x, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, y);
  jit = time_jit(&tg, "softmax", pool);
  generic = time_generic(&tg, pool);
  printf("  softmax [1024, 1024]: JIT %.3f ms, generic kernel %.3f ms\n", jit * 1e3, generic * 1e3);
  tg_free(&tg);
}

/* Measures, never asserts: compile time (lowering + LLVM) of typical kernels. */
static double compile_ms(test_group_t* tg, const char* name) {
  stax_jit_backend_t* backend = tg_backend();
  stax_jit_kernel_t* kernel = NULL;
  if (!backend) return 0;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(tg, name), NULL, &kernel));
  double ms = kernel ? stax_jit_kernel_lower_ms(kernel) + stax_jit_kernel_compile_ms(kernel) : 0;
  stax_jit_kernel_release(kernel);
  return ms;
}

static void test_compile_times(void) {
  int64_t dims[2] = {64, 768}, row[1] = {768};
  test_group_t tg;
  /* Elementwise: (x + b) * c -> Gelu. */
  tg_init(&tg);
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 1, row);
  int32_t xb[2] = {x, b};
  int32_t sum = tg_node(&tg, STAX_OP_Add, 2, xb, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t y = tg_node(&tg, STAX_OP_Gelu, 1, &sum, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, y);
  double elementwise = compile_ms(&tg, "add_gelu");
  tg_free(&tg);
  /* Softmax row kernel. */
  tg_init(&tg);
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  y = tg_node(&tg, STAX_OP_Softmax, 1, &x, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, y);
  double softmax = compile_ms(&tg, "softmax");
  tg_free(&tg);
  /* LayerNormalization with a residual add. */
  tg_init(&tg);
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t r = tg_input(&tg, "r", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t scale = tg_input(&tg, "scale", STAX_DTYPE_FLOAT32, 1, row);
  b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 1, row);
  int32_t xr[2] = {x, r};
  sum = tg_node(&tg, STAX_OP_Add, 2, xr, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t ln_inputs[3] = {sum, scale, b};
  y = tg_node(&tg, STAX_OP_LayerNormalization, 3, ln_inputs, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, y);
  double layernorm = compile_ms(&tg, "layernorm");
  tg_free(&tg);
  /* MatMul + bias + Gelu, 64 x 768 x 768. */
  tg_init(&tg);
  int64_t weight[2] = {768, 768};
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t w = tg_input(&tg, "w", STAX_DTYPE_FLOAT32, 2, weight);
  b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 1, row);
  int32_t xw[2] = {x, w};
  int32_t product = tg_node(&tg, STAX_OP_MatMul, 2, xw, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t pb[2] = {product, b};
  sum = tg_node(&tg, STAX_OP_Add, 2, pb, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  y = tg_node(&tg, STAX_OP_Gelu, 1, &sum, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, y);
  double matmul = compile_ms(&tg, "matmul_bias_gelu");
  tg_free(&tg);
  printf("  compile ms: add+gelu %.1f, softmax %.1f, add+layernorm %.1f, matmul+bias+gelu %.1f\n",
         elementwise, softmax, layernorm, matmul);
}

STAX_TEST_MAIN(STAX_TEST(test_softmax_rows), STAX_TEST(test_layernorm_rows),
               STAX_TEST(test_reduce_rows), STAX_TEST(test_reduction_chains),
               STAX_TEST(test_rows_not_fusible), STAX_TEST(test_matmul_bias_activation),
               STAX_TEST(test_gemm_options), STAX_TEST(test_batched_matmul),
               STAX_TEST(test_matmul_blocked), STAX_TEST(test_matmul_blocked_gemm_batched),
               STAX_TEST(test_matmul_constant_weight),
               STAX_TEST(test_matmul_performance), STAX_TEST(test_matmul_shapes_performance),
               STAX_TEST(test_fusion_performance),
               STAX_TEST(test_compile_times))
