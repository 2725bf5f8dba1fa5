/* Symbolic kernels (kernel_ir.h "symbolic kernels"): one compile of attention's groups — QK^T
 * and P.V over the heads' transposed views, the scaled Softmax over an open last axis — and a
 * plain MatMul with open M, N and K, each run on hundreds of (batch, sequence) shapes against
 * the generic kernels (the reference): lengths 0, 1, primes, around the register tile, and
 * long ones, batches of 1 (the heads carry the threads) and more, on every vector width. Also:
 * the kernel text (the object cache key) names no example size, arguments outside the class
 * (another view layout) are declined, hand-built kernel IR that leaves its buffer at some
 * parameters is refused at those and only those, and symbolic IR cannot be compiled without
 * its group. */
#include <ctype.h>

#include "test_jit_util.h"

#include "jit/kernel_ir.h"

#define HEADS 3
#define HEAD_DIM 24

/* An input value over a tensor made by the caller (a view); values on the 1/8 grid. */
static int32_t view_input(test_group_t* tg, const char* name, stax_tensor_t* t) {
  int32_t v = tg->value_count++;
  tg->tensors[v] = t;
  tg_grid = true;
  tg_fill(t, -2, 2);
  tg_grid = false;
  stax_jit_value_t* value = &tg->values[v];
  value->name = name;
  value->role = STAX_JIT_VALUE_INPUT;
  value->dtype = stax_tensor_dtype(t);
  value->rank = stax_tensor_rank(t);
  for (int32_t d = 0; d < value->rank; d++) {
    value->dims[d] = stax_tensor_dims(t)[d];
    value->strides[d] = stax_tensor_strides(t)[d];
  }
  tg->inputs[tg->input_count++] = v;
  return v;
}

/* [B, S, H, d] transposed by perm (the heads' views). */
static stax_tensor_t* heads_view(int64_t b, int64_t s, const int32_t* perm) {
  int64_t dims[4] = {b, s, HEADS, HEAD_DIM};
  stax_tensor_t* base = NULL;
  stax_tensor_t* view = NULL;
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 4, dims, &base));
  CHECK_OK(stax_tensor_transpose(tg_sys(), base, perm, &view));
  stax_tensor_release(base);
  return view;
}

static void mark(test_group_t* tg, int32_t v, uint32_t dims, uint32_t strides) {
  tg->values[v].open_dims = dims;
  tg->values[v].open_strides = strides;
}

static const int32_t q_perm[4] = {0, 2, 1, 3}, k_perm[4] = {0, 2, 3, 1};

typedef void (*build_fn)(test_group_t* tg, int64_t b, int64_t s);

/* (q [B, H, S, d] @ k [B, H, d, S]) * scale: the scores. */
static void build_qk(test_group_t* tg, int64_t b, int64_t s) {
  int32_t q = view_input(tg, "q", heads_view(b, s, q_perm));
  int32_t k = view_input(tg, "k", heads_view(b, s, k_perm));
  int32_t scale = tg_input(tg, "scale", STAX_DTYPE_FLOAT32, 0, NULL);
  tg_fill(tg->tensors[scale], 0.125, 0.125);
  int64_t dims[4] = {b, HEADS, s, s};
  int32_t qk[2] = {q, k};
  int32_t y = tg_node(tg, STAX_OP_MatMul, 2, qk, STAX_DTYPE_FLOAT32, 4, dims, 0, NULL);
  int32_t ys[2] = {y, scale};
  int32_t out = tg_node(tg, STAX_OP_Mul, 2, ys, STAX_DTYPE_FLOAT32, 4, dims, 0, NULL);
  tg_output(tg, out);
  mark(tg, q, 0x5, 0x1);
  mark(tg, k, 0x9, 0x1);
  mark(tg, y, 0xd, 0x7);
  mark(tg, out, 0xd, 0x7);
}

/* p [B, H, S, S] @ v [B, H, S, d] (+ a bias over d). */
static void build_pv(test_group_t* tg, int64_t b, int64_t s) {
  int64_t p_dims[4] = {b, HEADS, s, s}, dims[4] = {b, HEADS, s, HEAD_DIM}, bias_dims[1] = {HEAD_DIM};
  tg_grid = true;
  int32_t p = tg_input_layout(tg, "p", STAX_DTYPE_FLOAT32, 4, p_dims, 0, -2, 2);
  tg_grid = false;
  int32_t v = view_input(tg, "v", heads_view(b, s, q_perm));
  int32_t bias = tg_input(tg, "bias", STAX_DTYPE_FLOAT32, 1, bias_dims);
  int32_t pv[2] = {p, v};
  int32_t y = tg_node(tg, STAX_OP_MatMul, 2, pv, STAX_DTYPE_FLOAT32, 4, dims, 0, NULL);
  int32_t yb[2] = {y, bias};
  int32_t out = tg_node(tg, STAX_OP_Add, 2, yb, STAX_DTYPE_FLOAT32, 4, dims, 0, NULL);
  tg_output(tg, out);
  mark(tg, p, 0xd, 0x7);
  mark(tg, v, 0x5, 0x1);
  mark(tg, y, 0x5, 0x3);
  mark(tg, out, 0x5, 0x3);
}

/* Softmax(x * scale) over the open last axis of [B, H, S, S]. */
static void build_softmax(test_group_t* tg, int64_t b, int64_t s) {
  int64_t dims[4] = {b, HEADS, s, s};
  int32_t x = tg_input(tg, "x", STAX_DTYPE_FLOAT32, 4, dims);
  int32_t scale = tg_input(tg, "scale", STAX_DTYPE_FLOAT32, 0, NULL);
  int32_t xs[2] = {x, scale};
  int32_t y = tg_node(tg, STAX_OP_Mul, 2, xs, STAX_DTYPE_FLOAT32, 4, dims, 0, NULL);
  stax_node_attr_t axis = tg_attr_int("axis", -1);
  int32_t out = tg_node(tg, STAX_OP_Softmax, 1, &y, STAX_DTYPE_FLOAT32, 4, dims, 1, &axis);
  tg_output(tg, out);
  mark(tg, x, 0xd, 0x7);
  mark(tg, y, 0xd, 0x7);
  mark(tg, out, 0xd, 0x7);
}

/* a [M, K] @ b [K, N] with M = s, N = s + b, K = 2s + 1: three open extents, B transposed. */
static void build_plain(test_group_t* tg, int64_t b, int64_t s) {
  int64_t m = s, n = s + b, kd = 2 * s + 1;
  int64_t a_dims[2] = {m, kd}, b_dims[2] = {kd, n}, out_dims[2] = {m, n};
  tg_grid = true;
  int32_t a = tg_input_layout(tg, "a", STAX_DTYPE_FLOAT32, 2, a_dims, 0, -2, 2);
  int32_t w = tg_input_layout(tg, "w", STAX_DTYPE_FLOAT32, 2, b_dims, 1, -2, 2);
  tg_grid = false;
  int32_t aw[2] = {a, w};
  int32_t y = tg_node(tg, STAX_OP_MatMul, 2, aw, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
  int32_t out = tg_node(tg, STAX_OP_Tanh, 1, &y, STAX_DTYPE_FLOAT32, 2, out_dims, 0, NULL);
  tg_output(tg, out);
  mark(tg, a, 0x3, 0x1);
  mark(tg, w, 0x3, 0x2); /* transposed: the column stride is K */
  mark(tg, y, 0x3, 0x1);
  mark(tg, out, 0x3, 0x1);
}

/* Elementwise over open dims of its own (no rows walk): scores [B, H, S, S] * scale + a mask
 * [B, 1, 1, S] broadcast over the heads and query rows, then Exp (a Softmax's producers split
 * off). */
static void build_masked(test_group_t* tg, int64_t b, int64_t s) {
  int64_t dims[4] = {b, HEADS, s, s}, mask_dims[4] = {b, 1, 1, s};
  int32_t x = tg_input(tg, "x", STAX_DTYPE_FLOAT32, 4, dims);
  int32_t scale = tg_input(tg, "scale", STAX_DTYPE_FLOAT32, 0, NULL);
  int32_t mask = tg_input(tg, "mask", STAX_DTYPE_FLOAT32, 4, mask_dims);
  int32_t xs[2] = {x, scale};
  int32_t y = tg_node(tg, STAX_OP_Mul, 2, xs, STAX_DTYPE_FLOAT32, 4, dims, 0, NULL);
  int32_t ym[2] = {y, mask};
  int32_t z = tg_node(tg, STAX_OP_Add, 2, ym, STAX_DTYPE_FLOAT32, 4, dims, 0, NULL);
  int32_t out = tg_node(tg, STAX_OP_Exp, 1, &z, STAX_DTYPE_FLOAT32, 4, dims, 0, NULL);
  tg_output(tg, out);
  mark(tg, x, 0xd, 0x7);
  mark(tg, mask, 0x9, 0x7); /* the size-1 dims stride S too */
  mark(tg, y, 0xd, 0x7);
  mark(tg, z, 0xd, 0x7);
  mark(tg, out, 0xd, 0x7);
}

/* x [B, S, H] + pos [S, H] (a position table sliced to S), and a second output x * pos over
 * q's heads view [B, S, H, d] read through its open strides: the innermost dim stays a
 * vector loop where every stride along it is fixed. */
static void build_positions(test_group_t* tg, int64_t b, int64_t s) {
  int64_t dims[3] = {b, s, HEAD_DIM}, pos_dims[2] = {s, HEAD_DIM};
  int32_t x = tg_input(tg, "x", STAX_DTYPE_FLOAT32, 3, dims);
  int32_t pos = tg_input(tg, "pos", STAX_DTYPE_FLOAT32, 2, pos_dims);
  int32_t xp[2] = {x, pos};
  int32_t sum = tg_node(tg, STAX_OP_Add, 2, xp, STAX_DTYPE_FLOAT32, 3, dims, 0, NULL);
  int32_t out = tg_node(tg, STAX_OP_Sigmoid, 1, &sum, STAX_DTYPE_FLOAT32, 3, dims, 0, NULL);
  tg_output(tg, out);
  mark(tg, x, 0x3, 0x1);
  mark(tg, pos, 0x1, 0x0);
  mark(tg, sum, 0x3, 0x1);
  mark(tg, out, 0x3, 0x1);
}

/* q's heads view [B, H, S, d] (open strides over B, H and S) times a bias over d, into a
 * contiguous [B, H, S, d]. */
static void build_view_scale(test_group_t* tg, int64_t b, int64_t s) {
  int64_t dims[4] = {b, HEADS, s, HEAD_DIM}, bias_dims[1] = {HEAD_DIM};
  int32_t q = view_input(tg, "q", heads_view(b, s, q_perm));
  int32_t bias = tg_input(tg, "bias", STAX_DTYPE_FLOAT32, 1, bias_dims);
  int32_t qb[2] = {q, bias};
  int32_t out = tg_node(tg, STAX_OP_Mul, 2, qb, STAX_DTYPE_FLOAT32, 4, dims, 0, NULL);
  tg_output(tg, out);
  mark(tg, q, 0x5, 0x1);
  mark(tg, out, 0x5, 0x3);
}

static int64_t next_prime(int64_t n) {
  for (;; n++) {
    bool prime = n >= 2;
    for (int64_t d = 2; d * d <= n && prime; d++) prime = n % d != 0;
    if (prime) return n;
  }
}

/* The i-th sequence length: edges of the tiles first, then random ones. */
/* Whether `text` holds `number` as a number of its own: not part of a longer number or of a
 * name (loop counters are named k37, g33 and so on). */
static bool mentions_number(const char* text, const char* number) {
  size_t n = strlen(number);
  for (const char* at = strstr(text, number); at; at = strstr(at + 1, number)) {
    bool before = at > text && (isalnum((unsigned char)at[-1]) || at[-1] == '_');
    bool after = isalnum((unsigned char)at[n]) || at[n] == '_';
    if (!before && !after) return true;
  }
  return false;
}

static int64_t sweep_length(int32_t i, int64_t tile, int64_t max) {
  /* 15..17 and 31..33: where SSE and AVX2 change panel widths over an open N. */
  const int64_t edges[] = {1, 2, 3, 0, tile - 1, tile, tile + 1, 2 * tile - 1, 15, 16, 17, 31, 32, 33,
                           2 * tile + 1, 64, 97};
  int32_t n = (int32_t)(sizeof(edges) / sizeof(edges[0]));
  if (i < n) return edges[i] > max ? max : edges[i];
  switch (i % 3) {
    case 0: return next_prime(tg_int(2, max));
    case 1: return tg_int(1, 48);
    default: return tg_int(1, max);
  }
}

typedef struct symbolic_case_t {
  const char* name;
  build_fn build;
  int32_t sweeps;
  int64_t max_length;
  double atol, rtol;
} symbolic_case_t;

static void run_symbolic_case(const symbolic_case_t* c, int32_t vector_bits) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  test_group_t compile_tg;
  tg_init(&compile_tg);
  c->build(&compile_tg, 3, 37);
  const stax_jit_group_t* group = tg_group(&compile_tg, c->name);
  compile_tg.group.symbolic = true;
  stax_jit_compile_options_t options = {.vector_bits = vector_bits, .keep_kernel_ir = true,
                                        .thread_count = 2};
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, group, &options, &kernel));
  tg_free(&compile_tg);
  if (!kernel) return;
  CHECK(stax_jit_kernel_shape_generic(kernel));
  const char* text = stax_jit_kernel_ir_text(kernel);
  if (getenv("STAX_TEST_PRINT_IR")) printf("%s\n", text ? text : "");
  CHECK(text && strstr(text, "symbolic") != NULL);
  /* The example's sizes (B = 3, S = 37 and what follows from them) never reach the text. */
  CHECK(text && !mentions_number(text, "37") && !mentions_number(text, "111"));
  stax_threadpool_t* pool = stax_threadpool_default();
  int64_t tile = vector_bits >= 512 ? 12 : 6;
  for (int32_t i = 0; i < c->sweeps; i++) {
    int64_t s = sweep_length(i, tile, c->max_length);
    int64_t b = i % 5 == 0 ? 1 : tg_int(1, 4);
    test_group_t tg;
    tg_init(&tg);
    c->build(&tg, b, s);
    stax_tensor_t* expected[TG_MAX_VALUES] = {NULL};
    stax_tensor_t* actual[TG_MAX_VALUES] = {NULL};
    CHECK_OK(tg_reference(&tg, expected));
    CHECK_OK(tg_run(&tg, kernel, i % 3 == 0 ? NULL : pool, actual));
    for (int32_t o = 0; o < tg.output_count; o++) {
      char what[96];
      snprintf(what, sizeof(what), "%s B %lld S %lld (%d-bit)", c->name, (long long)b,
               (long long)s, (int)vector_bits);
      CHECK_EQ_INT(tg_compare(what, actual[o], expected[o], c->atol, c->rtol), 0);
      stax_tensor_release(expected[o]);
      stax_tensor_release(actual[o]);
    }
    tg_free(&tg);
  }
  stax_jit_kernel_release(kernel);
}

static const int32_t widths[] = {512, 256, 128};

static void test_symbolic_attention(void) {
  symbolic_case_t cases[] = {
      {"sym_qk", build_qk, 300, 160, 1e-6, 1e-6},
      {"sym_pv", build_pv, 300, 160, 1e-6, 1e-6},
      {"sym_softmax", build_softmax, 300, 200, 1e-6, 1e-5},
  };
  for (int32_t c = 0; c < 3; c++)
    for (int32_t w = 0; w < 3; w++) {
      symbolic_case_t one = cases[c];
      if (w > 0) one.sweeps = 60;
      run_symbolic_case(&one, widths[w]);
    }
}

static void test_symbolic_elementwise(void) {
  symbolic_case_t cases[] = {
      {"sym_masked", build_masked, 300, 120, 1e-6, 1e-6},
      {"sym_positions", build_positions, 300, 200, 1e-6, 1e-6},
      {"sym_view_scale", build_view_scale, 300, 200, 0, 0},
  };
  for (int32_t c = 0; c < 3; c++)
    for (int32_t w = 0; w < 3; w++) {
      symbolic_case_t one = cases[c];
      if (w > 0) one.sweeps = 60;
      run_symbolic_case(&one, widths[w]);
    }
}

static void test_symbolic_plain(void) {
  symbolic_case_t c = {"sym_plain", build_plain, 300, 90, 1e-5, 1e-5};
  for (int32_t w = 0; w < 3; w++) {
    if (w > 0) c.sweeps = 60;
    run_symbolic_case(&c, widths[w]);
  }
}

/* Arguments outside the class are declined with the dim named: q contiguous [B, H, S, d]
 * (not the heads' view the kernel's fixed strides describe). */
static void test_symbolic_declines(void) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  test_group_t compile_tg;
  tg_init(&compile_tg);
  build_qk(&compile_tg, 2, 20);
  compile_tg.group.symbolic = true;
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&compile_tg, "declines"), NULL, &kernel));
  tg_free(&compile_tg);
  if (!kernel) return;
  test_group_t tg;
  tg_init(&tg);
  build_qk(&tg, 2, 30);
  const int32_t identity[4] = {0, 1, 2, 3};
  int64_t dims[4] = {2, HEADS, 30, HEAD_DIM};
  stax_tensor_t* base = NULL;
  CHECK_OK(stax_tensor_create(tg_sys(), STAX_DTYPE_FLOAT32, 4, dims, &base));
  stax_tensor_t* q = NULL;
  CHECK_OK(stax_tensor_transpose(tg_sys(), base, identity, &q));
  stax_tensor_release(base);
  stax_tensor_release(tg.tensors[tg.inputs[0]]);
  tg.tensors[tg.inputs[0]] = q;
  stax_tensor_t* actual[TG_MAX_VALUES] = {NULL};
  stax_status_t status = tg_run(&tg, kernel, NULL, actual);
  CHECK_EQ_INT(stax_status_code(status), STAX_FAILED_PRECONDITION);
  CHECK(status && strstr(stax_status_message(status), "('q') dim 1") != NULL);
  stax_status_free(status);
  stax_tensor_release(actual[0]);
  tg_free(&tg);
  stax_jit_kernel_release(kernel);
}

/* Hand-built symbolic IR: out[i] = x[i] for i < 3 * floor(n / 2), n = x's length. In bounds
 * at n = 1 (the example) and n = 4; out of bounds at n = 5. verify_params says which; the
 * backend refuses to compile symbolic IR that is not tied to a group. */
static void test_symbolic_verify(void) {
  stax_kir_kernel_t* k = NULL;
  CHECK_OK(stax_kir_kernel_create(tg_sys(), "sym_verify", &k));
  stax_kir_set_symbolic(k);
  int64_t dims[1] = {1};
  int32_t x = stax_kir_add_buffer(k, "x", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  int32_t out =
      stax_kir_add_buffer(k, "out", STAX_KIR_BUFFER_OUTPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  int32_t n = stax_kir_add_read_param(k, "n", x, 0, false);
  CHECK_EQ_INT(stax_kir_add_read_param(k, "n_again", x, 0, false), n); /* the same read */
  stax_kir_buffer_dim_param(k, x, 0, n);
  stax_kir_buffer_dim_param(k, out, 0, n);
  int32_t count = stax_kir_add_derived_param(k, "count", n, 3, 0, 2, 0, 0, 0, 0);
  stax_kir_block_t* stage = stax_kir_add_stage(k, "copy");
  stax_kir_loop_t* loop = stax_kir_add_loop(k, stage, "i", 0);
  loop->extent_param = count;
  stax_kir_index_t at = stax_kir_index_constant(0);
  stax_kir_index_add_term(k, &at, stax_kir_loop_id(k, loop), 1);
  stax_kir_add_store(k, &loop->body, out, &at, stax_kir_load(k, x, &at));
  CHECK_OK(stax_kir_verify(k));
  int64_t values[STAX_KIR_MAX_PARAMS];
  for (int64_t length = 0; length <= 9; length++) {
    const int64_t len[1] = {length}, stride[1] = {1};
    const int64_t* all_dims[2] = {len, len};
    const int64_t* all_strides[2] = {stride, stride};
    CHECK(stax_kir_params_evaluate(k, all_dims, all_strides, values));
    CHECK_EQ_INT(values[count], 3 * (length / 2));
    stax_status_t status = stax_kir_verify_params(k, values);
    bool fits = 3 * (length / 2) <= length;
    CHECK_EQ_INT(status == STAX_OK, fits);
    if (!fits) CHECK(strstr(stax_status_message(status), "out of bounds") != NULL);
    stax_status_free(status);
  }
  /* floor division rounds toward minus infinity: a derived n - 7 over 4 at n = 1 is -2. */
  int32_t below = stax_kir_add_derived_param(k, "below", n, 1, -7, 4, 0, 0, 0, 0);
  CHECK(stax_kir_params_example(k, values));
  CHECK_EQ_INT(values[below], -2);
  stax_jit_backend_t* backend = tg_backend();
  if (backend) {
    stax_jit_kernel_t* kernel = NULL;
    stax_status_t status = stax_jit_compile_kernel_ir(backend, k, NULL, &kernel);
    CHECK_EQ_INT(stax_status_code(status), STAX_INVALID_ARGUMENT);
    stax_status_free(status);
  }
  stax_kir_kernel_destroy(k);
}

STAX_TEST_MAIN({"symbolic_verify", test_symbolic_verify},
               {"symbolic_declines", test_symbolic_declines},
               {"symbolic_attention", test_symbolic_attention},
               {"symbolic_plain", test_symbolic_plain},
               {"symbolic_elementwise", test_symbolic_elementwise})
