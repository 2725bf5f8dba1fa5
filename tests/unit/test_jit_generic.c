/* Rows-generic kernels (src/jit, kernel_ir.h "rows-generic kernels"): one compile per group,
 * run on hundreds of row counts R — 0, 1, primes, around the register tile's height, large —
 * with the rows given as [R, ...] or as [B, S, ...] leading dims, each against the generic
 * kernels (the reference) on the same tensors (a matmul's rows below one tile run its one-row
 * stage). Also: what the class refuses at run time (leading dims that do not walk as rows,
 * arguments that disagree on R), what lowering refuses (Conv), and that the kernel's text
 * (the object cache key) names no example row count. */
#include "test_jit_util.h"

/* A group builder: rows values get dims lead[0..lead_rank) ++ tail; mark_rows marks them as
 * rows values (the compile's description) or not (a run's own tensors). */
typedef void (*build_fn)(test_group_t* tg, int32_t lead_rank, const int64_t* lead, bool mark);

static int32_t dims_with_lead(int32_t lead_rank, const int64_t* lead, int32_t tail_rank,
                              const int64_t* tail, int64_t* out) {
  for (int32_t d = 0; d < lead_rank; d++) out[d] = lead[d];
  for (int32_t d = 0; d < tail_rank; d++) out[lead_rank + d] = tail[d];
  return lead_rank + tail_rank;
}

static void mark_rows(test_group_t* tg, int32_t v, bool mark) {
  if (mark) tg->values[v].rows = true;
}

/* ---- groups --------------------------------------------------------------------------------- */

static int64_t g_c = 48;     /* elementwise / row length */
static int64_t g_k = 24;     /* matmul K */
static int32_t g_threads = 0; /* the compile's thread count (0: the default) */
static int64_t g_n = 40;     /* matmul N (an edge panel on every vector width) */
static bool g_const_weight;  /* the matmul weight carries its contents */

/* (x + bias) -> Gelu -> * y, and Where(x > 0, that, -x). */
static void build_elementwise(test_group_t* tg, int32_t lr, const int64_t* lead, bool mark) {
  int64_t tail[1] = {g_c}, dims[STAX_MAX_RANK];
  int32_t rank = dims_with_lead(lr, lead, 1, tail, dims);
  int32_t x = tg_input(tg, "x", STAX_DTYPE_FLOAT32, rank, dims);
  int32_t bias = tg_input(tg, "bias", STAX_DTYPE_FLOAT32, 1, tail);
  int32_t y = tg_input(tg, "y", STAX_DTYPE_FLOAT32, rank, dims);
  int32_t xb[2] = {x, bias};
  int32_t s = tg_node(tg, STAX_OP_Add, 2, xb, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
  int32_t g = tg_node(tg, STAX_OP_Gelu, 1, &s, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
  int32_t gy[2] = {g, y};
  int32_t p = tg_node(tg, STAX_OP_Mul, 2, gy, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
  int32_t zero_in = tg_input(tg, "zero", STAX_DTYPE_FLOAT32, 0, NULL);
  tg_fill(tg->tensors[zero_in], 0, 0);
  int32_t xz[2] = {x, zero_in};
  int32_t positive = tg_node(tg, STAX_OP_Greater, 2, xz, STAX_DTYPE_BOOL, rank, dims, 0, NULL);
  int32_t negated = tg_node(tg, STAX_OP_Neg, 1, &x, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
  int32_t where_in[3] = {positive, p, negated};
  int32_t w = tg_node(tg, STAX_OP_Where, 3, where_in, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
  tg_output(tg, p);
  tg_output(tg, w);
  int32_t rows_values[] = {x, y, s, g, p, positive, negated, w};
  for (size_t i = 0; i < sizeof(rows_values) / sizeof(rows_values[0]); i++)
    mark_rows(tg, rows_values[i], mark);
}

/* LayerNormalization(x + residual) with scale and bias over the last axis, then Softmax of
 * it, and ReduceMean of x without keepdims (one value per row). */
static void build_rows(test_group_t* tg, int32_t lr, const int64_t* lead, bool mark) {
  int64_t tail[1] = {g_c}, dims[STAX_MAX_RANK];
  int32_t rank = dims_with_lead(lr, lead, 1, tail, dims);
  int32_t x = tg_input(tg, "x", STAX_DTYPE_FLOAT32, rank, dims);
  int32_t r = tg_input(tg, "residual", STAX_DTYPE_FLOAT32, rank, dims);
  int32_t scale = tg_input(tg, "scale", STAX_DTYPE_FLOAT32, 1, tail);
  int32_t bias = tg_input(tg, "bias", STAX_DTYPE_FLOAT32, 1, tail);
  int32_t xr[2] = {x, r};
  int32_t s = tg_node(tg, STAX_OP_Add, 2, xr, STAX_DTYPE_FLOAT32, rank, dims, 0, NULL);
  int32_t ln_in[3] = {s, scale, bias};
  stax_node_attr_t axis = tg_attr_int("axis", -1);
  int32_t ln = tg_node(tg, STAX_OP_LayerNormalization, 3, ln_in, STAX_DTYPE_FLOAT32, rank, dims, 1,
                       &axis);
  int32_t sm = tg_node(tg, STAX_OP_Softmax, 1, &ln, STAX_DTYPE_FLOAT32, rank, dims, 1, &axis);
  tg_output(tg, sm);
  int32_t rows_values[] = {x, r, s, ln, sm};
  for (size_t i = 0; i < sizeof(rows_values) / sizeof(rows_values[0]); i++)
    mark_rows(tg, rows_values[i], mark);
}

static void build_reduce(test_group_t* tg, int32_t lr, const int64_t* lead, bool mark) {
  int64_t tail[1] = {g_c}, dims[STAX_MAX_RANK];
  int32_t rank = dims_with_lead(lr, lead, 1, tail, dims);
  int32_t x = tg_input(tg, "x", STAX_DTYPE_FLOAT32, rank, dims);
  static const int64_t axes[1] = {-1}; /* the attribute keeps a pointer to it */
  stax_node_attr_t attrs[2] = {tg_attr_ints("axes", 1, axes), tg_attr_int("keepdims", 0)};
  int32_t mean = tg_node(tg, STAX_OP_ReduceMean, 1, &x, STAX_DTYPE_FLOAT32, lr, lead, 2, attrs);
  int32_t e = tg_node(tg, STAX_OP_Exp, 1, &mean, STAX_DTYPE_FLOAT32, lr, lead, 0, NULL);
  tg_output(tg, e);
  int32_t rows_values[] = {x, mean, e};
  for (size_t i = 0; i < sizeof(rows_values) / sizeof(rows_values[0]); i++)
    mark_rows(tg, rows_values[i], mark);
}

/* x [rows, K] @ w [K, N] + bias -> Relu (+ residual). The weight's contents are fixed by a
 * seed so every run's weight equals the compile's (a constant weight is folded into the
 * kernel's packed panels). */
static int32_t weight_input(test_group_t* tg, int32_t rank, const int64_t* dims) {
  uint64_t saved = tg_rng;
  tg_rng = 0x9E3779B97F4A7C15ull;
  int32_t w = tg_input_layout(tg, "w", STAX_DTYPE_FLOAT32, rank, dims, 0, -2, 2);
  tg_rng = saved;
  if (g_const_weight) {
    tg->values[w].constant = tg->tensors[w];
    stax_buffer_set_immutable(tg->tensors[w]->buffer);
  }
  return w;
}

static void build_matmul(test_group_t* tg, int32_t lr, const int64_t* lead, bool mark) {
  int64_t k_tail[1] = {g_k}, n_tail[1] = {g_n}, w_dims[2] = {g_k, g_n};
  int64_t a_dims[STAX_MAX_RANK], out_dims[STAX_MAX_RANK];
  int32_t rank = dims_with_lead(lr, lead, 1, k_tail, a_dims);
  dims_with_lead(lr, lead, 1, n_tail, out_dims);
  tg_grid = true;
  int32_t a = tg_input_layout(tg, "a", STAX_DTYPE_FLOAT32, rank, a_dims, 0, -4, 4);
  int32_t w = weight_input(tg, 2, w_dims);
  int32_t bias = tg_input(tg, "bias", STAX_DTYPE_FLOAT32, 1, n_tail);
  int32_t res = tg_input(tg, "residual", STAX_DTYPE_FLOAT32, rank, out_dims);
  tg_grid = false;
  int32_t aw[2] = {a, w};
  int32_t y = tg_node(tg, STAX_OP_MatMul, 2, aw, STAX_DTYPE_FLOAT32, rank, out_dims, 0, NULL);
  int32_t yb[2] = {y, bias};
  int32_t z = tg_node(tg, STAX_OP_Add, 2, yb, STAX_DTYPE_FLOAT32, rank, out_dims, 0, NULL);
  int32_t act = tg_node(tg, STAX_OP_Relu, 1, &z, STAX_DTYPE_FLOAT32, rank, out_dims, 0, NULL);
  int32_t ar[2] = {act, res};
  int32_t out = tg_node(tg, STAX_OP_Add, 2, ar, STAX_DTYPE_FLOAT32, rank, out_dims, 0, NULL);
  tg_output(tg, out);
  int32_t rows_values[] = {a, res, y, z, act, out};
  for (size_t i = 0; i < sizeof(rows_values) / sizeof(rows_values[0]); i++)
    mark_rows(tg, rows_values[i], mark);
}

/* Gemm(x [rows, K], w [N, K], c [N]) with transB, alpha and beta. */
static void build_gemm(test_group_t* tg, int32_t lr, const int64_t* lead, bool mark) {
  (void)lr;
  int64_t a_dims[2] = {lead[0], g_k}, w_dims[2] = {g_n, g_k}, c_dims[1] = {g_n};
  int64_t out_dims[2] = {lead[0], g_n};
  tg_grid = true;
  int32_t a = tg_input_layout(tg, "a", STAX_DTYPE_FLOAT32, 2, a_dims, 0, -4, 4);
  int32_t w = weight_input(tg, 2, w_dims);
  int32_t c = tg_input(tg, "c", STAX_DTYPE_FLOAT32, 1, c_dims);
  tg_grid = false;
  int32_t in[3] = {a, w, c};
  stax_node_attr_t attrs[3] = {tg_attr_int("transB", 1), tg_attr_float("alpha", 0.5f),
                               tg_attr_float("beta", 2.0f)};
  int32_t y = tg_node(tg, STAX_OP_Gemm, 3, in, STAX_DTYPE_FLOAT32, 2, out_dims, 3, attrs);
  int32_t t = tg_node(tg, STAX_OP_Tanh, 1, &y, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
  tg_output(tg, t);
  mark_rows(tg, a, mark);
  mark_rows(tg, y, mark);
  mark_rows(tg, t, mark);
}

/* ---- the differential driver ------------------------------------------------------------- */

static int64_t next_prime(int64_t n) {
  for (;; n++) {
    bool prime = n >= 2;
    for (int64_t d = 2; d * d <= n && prime; d++) prime = n % d != 0;
    if (prime) return n;
  }
}

/* The i-th row count of a sweep: the edges first, then random ones of every size. */
static int64_t sweep_rows(int32_t i, int64_t tile) {
  /* 4, 5 and tile + 1..5: every case of the 4-row rest tiles (kept apart, overlapping). */
  const int64_t edges[] = {0,        1,        2,        3,        4,        5,
                           tile - 1, tile,     tile + 1, tile + 2, tile + 3, tile + 4,
                           tile + 5, 2 * tile, 2 * tile - 1, 2 * tile + 1, 97, 1031, 2053};
  int32_t n = (int32_t)(sizeof(edges) / sizeof(edges[0]));
  if (i < n) return edges[i] < 0 ? 0 : edges[i];
  switch (i % 4) {
    case 0: return next_prime(tg_int(2, 300));
    case 1: return tg_int(0, 64);
    case 2: return tg_int(tile, 8 * tile) / tile * tile; /* whole tiles */
    default: return tg_int(64, 1500);
  }
}

typedef struct generic_case_t {
  const char* name;
  build_fn build;
  int64_t rows_min; /* what the kernel must accept from */
  int32_t sweeps;
  double atol, rtol;
} generic_case_t;

/* Compiles the group once as rows-generic at `vector_bits`, then runs `sweeps` row counts,
 * alternating [R, ...] and [B, S, ...] leading dims, with and without the pool. */
static void run_generic_case(const generic_case_t* c, int32_t vector_bits) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  test_group_t compile_tg;
  tg_init(&compile_tg);
  int64_t example[1] = {37};
  c->build(&compile_tg, 1, example, true);
  const stax_jit_group_t* group = tg_group(&compile_tg, c->name);
  compile_tg.group.rows_generic = true;
  stax_jit_compile_options_t options = {.vector_bits = vector_bits, .keep_kernel_ir = true,
                                        .thread_count = g_threads};
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, group, &options, &kernel));
  if (!kernel) {
    tg_free(&compile_tg);
    return;
  }
  const char* text = stax_jit_kernel_ir_text(kernel);
  CHECK(text && strstr(text, "rows-generic") != NULL);
  /* The split one-row stage where it is due (g_threads = 2 over a large weight). */
  if (g_threads > 1 && g_k * g_n >= 2 * (1 << 20))
    CHECK(text && strstr(text, "matmul_rows1_rest") != NULL);
  /* The example row count (4093 inside lowering, 37 here) never reaches the text. */
  CHECK(text && strstr(text, "4093") == NULL && strstr(text, "[37") == NULL);
  stax_threadpool_t* pool = stax_threadpool_default();
  int64_t tile = vector_bits >= 512 ? 12 : 6;
  int32_t compared = 0, refused = 0;
  for (int32_t i = 0; i < c->sweeps; i++) {
    int64_t rows = sweep_rows(i, tile);
    test_group_t tg;
    tg_init(&tg);
    int64_t lead[2];
    int32_t lead_rank = 1;
    lead[0] = rows;
    if (i % 2 == 1 && rows > 0 && c->build != build_gemm) {
      /* [B, S, ...]: B a divisor of R. */
      int64_t b = 1;
      for (int64_t d = 2; d <= 8; d++)
        if (rows % d == 0) b = d;
      lead[0] = b;
      lead[1] = rows / b;
      lead_rank = 2;
    }
    c->build(&tg, lead_rank, lead, false);
    stax_tensor_t* expected[TG_MAX_VALUES] = {NULL};
    stax_tensor_t* actual[TG_MAX_VALUES] = {NULL};
    CHECK_OK(tg_reference(&tg, expected));
    stax_status_t status = tg_run(&tg, kernel, i % 3 == 0 ? NULL : pool, actual);
    if (rows < c->rows_min) {
      /* Below the class: refused, never run. */
      CHECK_EQ_INT(stax_status_code(status), STAX_FAILED_PRECONDITION);
      CHECK(status && strstr(stax_status_message(status), "rows") != NULL);
      stax_status_free(status);
      refused++;
    } else {
      CHECK_OK(status);
      for (int32_t o = 0; o < tg.output_count; o++) {
        char what[96];
        snprintf(what, sizeof(what), "%s rows %lld (%d-bit) output %d", c->name, (long long)rows,
                 (int)vector_bits, (int)o);
        CHECK_EQ_INT(tg_compare(what, actual[o], expected[o], c->atol, c->rtol), 0);
      }
      compared++;
    }
    for (int32_t o = 0; o < tg.output_count; o++) {
      stax_tensor_release(expected[o]);
      stax_tensor_release(actual[o]);
    }
    tg_free(&tg);
  }
  CHECK_EQ_INT(compared + refused, c->sweeps);
  CHECK(compared >= c->sweeps / 2);
  if (c->rows_min > 1) CHECK(refused > 0);
  stax_jit_kernel_release(kernel);
  tg_free(&compile_tg);
}

static const int32_t widths[] = {256, 512, 128};

static void test_generic_elementwise(void) {
  generic_case_t c = {"generic_elementwise", build_elementwise, 0, 300, 2e-6, 2e-6};
  int64_t lengths[] = {48, 1, 7, 768};
  for (int32_t w = 0; w < 3; w++) {
    g_c = lengths[w];
    run_generic_case(&c, widths[w]);
  }
  g_c = 768;
  c.sweeps = 40;
  run_generic_case(&c, 512);
  g_c = 48;
}

static void test_generic_rows(void) {
  generic_case_t c = {"generic_rows", build_rows, 0, 300, 1e-5, 1e-4};
  int64_t lengths[] = {48, 5, 768};
  for (int32_t w = 0; w < 3; w++) {
    g_c = lengths[w];
    c.sweeps = w == 2 ? 40 : 300;
    run_generic_case(&c, widths[w]);
  }
  g_c = 33;
  generic_case_t r = {"generic_reduce", build_reduce, 0, 300, 1e-5, 1e-5};
  run_generic_case(&r, 256);
  g_c = 48;
}

static void test_generic_matmul(void) {
  /* K and N: odd sizes and edge panels on every width; products on a 1/8 grid are exact.
   * N = 96 and 181 give the one-row tiles spans of panels, panels left over and (181) a
   * partial panel on every width. */
  const int64_t shapes[][2] = {{24, 40}, {7, 16}, {64, 96}, {3, 5}, {35, 181}};
  for (int32_t s = 0; s < 5; s++) {
    g_k = shapes[s][0];
    g_n = shapes[s][1];
    for (int32_t w = 0; w < 3; w++) {
      int32_t bits = widths[(s + w) % 3];
      int64_t tile = bits >= 512 ? 12 : 6;
      g_const_weight = (s + w) % 2 == 0;
      (void)tile; /* fewer rows than a tile run the one-row stage: every R runs */
      generic_case_t c = {"generic_matmul", build_matmul, 0, w == 0 ? 300 : 60, 1e-5, 1e-6};
      run_generic_case(&c, bits);
    }
  }
  /* A weight worth two tasks at 2 threads: one to three rows run the split one-row stage
   * (spans of panels in parallel, then the panels left over and the partial panel). */
  g_k = 1100;
  g_n = 1957;
  g_threads = 2;
  for (int32_t w = 0; w < 3; w++) {
    g_const_weight = w != 1;
    generic_case_t c = {"generic_matmul", build_matmul, 0, 14, 1e-4, 1e-5};
    run_generic_case(&c, widths[w]);
  }
  g_threads = 0;
  g_k = 24;
  g_n = 40;
  for (int32_t w = 0; w < 2; w++) {
    g_const_weight = w == 0;
    generic_case_t c = {"generic_gemm", build_gemm, 0, 300, 1e-5, 1e-5};
    run_generic_case(&c, widths[w]);
  }
  g_const_weight = false;
}

/* Arguments outside the class are refused: leading dims that do not walk as rows (a
 * transposed [S, B] view), and rows arguments that disagree on R. */
static void test_generic_refusals(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  g_c = 16;
  test_group_t compile_tg;
  tg_init(&compile_tg);
  int64_t example[1] = {10};
  build_elementwise(&compile_tg, 1, example, true);
  const stax_jit_group_t* group = tg_group(&compile_tg, "refusals");
  compile_tg.group.rows_generic = true;
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, group, NULL, &kernel));
  if (!kernel) return;
  /* x as a transposed view of its two leading dims: [3, 4, 16] with strides [16, 48, 1]. */
  stax_tensor_t* base = NULL;
  int64_t base_dims[3] = {4, 3, 16}, dims[3] = {3, 4, 16};
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 3, base_dims, &base));
  int32_t perm[3] = {1, 0, 2};
  stax_tensor_t* x = NULL;
  CHECK_OK(stax_tensor_transpose(tg_sys(), base, perm, &x));
  stax_tensor_t *y = NULL, *bias = NULL, *zero = NULL, *out0 = NULL, *out1 = NULL;
  int64_t bias_dims[1] = {16}, other[3] = {3, 5, 16};
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 3, dims, &y));
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 1, bias_dims, &bias));
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 0, NULL, &zero));
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 3, dims, &out0));
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 3, dims, &out1));
  stax_tensor_t* inputs[4] = {x, bias, y, zero};
  stax_tensor_t* outputs[2] = {out0, out1};
  stax_status_t status = stax_jit_kernel_run(kernel, 4, inputs, 2, outputs, NULL);
  CHECK_EQ_INT(stax_status_code(status), STAX_FAILED_PRECONDITION);
  CHECK(status && strstr(stax_status_message(status), "not rows of") != NULL);
  stax_status_free(status);
  /* y with 15 rows against x's 12. */
  stax_tensor_t* y15 = NULL;
  stax_tensor_t* x12 = NULL;
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 3, other, &y15));
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 3, dims, &x12));
  stax_tensor_t* mismatched[4] = {x12, bias, y15, zero};
  status = stax_jit_kernel_run(kernel, 4, mismatched, 2, outputs, NULL);
  CHECK_EQ_INT(stax_status_code(status), STAX_FAILED_PRECONDITION);
  CHECK(status && strstr(stax_status_message(status), "rows, an earlier argument") != NULL);
  stax_status_free(status);
  /* The unchecked hot path cannot know R: refused. */
  void* data[6] = {0};
  status = stax_jit_kernel_run_data(kernel, data, NULL);
  CHECK_EQ_INT(stax_status_code(status), STAX_INVALID_ARGUMENT);
  stax_status_free(status);
  stax_tensor_t* all[] = {base, x, y, bias, zero, out0, out1, y15, x12};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) stax_tensor_release(all[i]);
  stax_jit_kernel_release(kernel);
  tg_free(&compile_tg);
  g_c = 48;
}

/* What cannot be rows-generic is refused by lowering (the VM then compiles per shape). */
static void test_generic_lowering_refusals(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  /* A rows input whose output is not a rows value: no rows kernel. */
  test_group_t tg;
  tg_init(&tg);
  int64_t dims[2] = {5, 8};
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t r = tg_node(&tg, STAX_OP_Relu, 1, &x, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, r);
  tg.values[x].rows = true; /* the output is not marked */
  tg_group(&tg, "static_output");
  tg.group.rows_generic = true;
  stax_jit_kernel_t* kernel = NULL;
  stax_status_t status = stax_jit_compile_group(backend, &tg.group, NULL, &kernel);
  CHECK_EQ_INT(stax_status_code(status), STAX_UNIMPLEMENTED);
  CHECK(status && strstr(stax_status_message(status), "not fusible") != NULL);
  stax_status_free(status);
  tg_free(&tg);
  /* A Conv. */
  tg_init(&tg);
  int64_t x_dims[4] = {2, 3, 8, 8}, w_dims[4] = {4, 3, 3, 3}, y_dims[4] = {2, 4, 6, 6};
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 4, x_dims);
  int32_t w = tg_input(&tg, "w", STAX_DTYPE_FLOAT32, 4, w_dims);
  int32_t xw[2] = {x, w};
  int32_t y = tg_node(&tg, STAX_OP_Conv, 2, xw, STAX_DTYPE_FLOAT32, 4, y_dims, 0, NULL);
  tg_output(&tg, y);
  tg.values[x].rows = tg.values[y].rows = true;
  tg_group(&tg, "conv");
  tg.group.rows_generic = true;
  status = stax_jit_compile_group(backend, &tg.group, NULL, &kernel);
  CHECK_EQ_INT(stax_status_code(status), STAX_UNIMPLEMENTED);
  stax_status_free(status);
  /* A rows-generic group without any rows value is malformed. */
  tg.values[x].rows = tg.values[y].rows = false;
  status = stax_jit_compile_group(backend, &tg.group, NULL, &kernel);
  CHECK_EQ_INT(stax_status_code(status), STAX_INVALID_ARGUMENT);
  stax_status_free(status);
  tg_free(&tg);
}

STAX_TEST_MAIN({"generic_elementwise", test_generic_elementwise},
               {"generic_rows", test_generic_rows}, {"generic_matmul", test_generic_matmul},
               {"generic_refusals", test_generic_refusals},
               {"generic_lowering_refusals", test_generic_lowering_refusals})
