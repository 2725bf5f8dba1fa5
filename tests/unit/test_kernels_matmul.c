/* Tests for the linear-algebra kernels (src/kernels/gemm_f32.c, matmul.c, einsum.c): the GEMM
 * core on odd sizes (1..67, across tile, block and panel edges) with every micro-kernel variant
 * this CPU has, strided/transposed/negative-stride operands, threads; MatMul with 1-D
 * promotion, batch broadcasting, every dtype, K = 0 and preallocated outputs; Gemm options and
 * C broadcasting; Einsum equations (matmul, implicit output, transpose, diagonal, trace,
 * outer product, ellipsis with broadcasting, three operands, integers, halves); and the error
 * paths. References are naive loops over logical indices read through each view's strides.
 * Values are multiples of 1/8 in [-4, 4], so float32 sums here are exact and results can be
 * compared tightly. */
#include <stdint.h>

#include "kernels/gemm.h"
#include "test_harness.h"
#include "kernel_test_util.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_random(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
/* Uniform on the 1/8 grid in [-4, 4). */
static double random_value(void) { return (double)(int64_t)(next_random() % 64) / 8.0 - 4.0; }
static int64_t random_int(int64_t low, int64_t high) {
  return low + (int64_t)(next_random() % (uint64_t)(high - low + 1));
}

/* The low bits of v read as an integer dtype: what wrap-around arithmetic leaves. */
static double wrap_to(stax_dtype_t dtype, uint64_t v) {
  switch (dtype) {
    case STAX_DTYPE_INT8:
      return (int8_t)v;
    case STAX_DTYPE_INT16:
      return (int16_t)v;
    case STAX_DTYPE_INT32:
      return (int32_t)v;
    case STAX_DTYPE_INT64:
      return (double)(int64_t)v;
    case STAX_DTYPE_UINT8:
      return (uint8_t)v;
    case STAX_DTYPE_UINT16:
      return (uint16_t)v;
    case STAX_DTYPE_UINT32:
      return (uint32_t)v;
    default:
      return (double)v;
  }
}

/* Contiguous tensor of random grid values (or `values` when given). */
static stax_tensor_t* make_tensor(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                  const double* values) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(kt_allocator(), dtype, rank, dims, &t));
  if (!t) return NULL;
  int64_t n = stax_tensor_element_count(t);
  for (int64_t i = 0; i < n; i++) {
    double v = values ? values[i] : random_value();
    if (!values && !stax_dtype_is_float(dtype)) v = (double)random_int(-5, 5);
    if (!values && stax_dtype_is_unsigned_int(dtype)) v = (double)random_int(0, 9);
    kt_store_codec(dtype, stax_tensor_data(t), i, v);
  }
  return t;
}

/* Element at row-major logical index i of any view. */
static double view_value(const stax_tensor_t* t, int64_t i) {
  int32_t rank = stax_tensor_rank(t);
  const int64_t* dims = stax_tensor_dims(t);
  const int64_t* strides = stax_tensor_strides(t);
  int64_t offset = 0;
  for (int32_t d = rank - 1; d >= 0; d--) {
    offset += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return kt_load_codec(stax_tensor_dtype(t), stax_tensor_data(t), offset);
}

static stax_status_t run_kernel(stax_op_t op, stax_node_attr_t* attrs, int32_t attr_count,
                                stax_tensor_t* const* inputs, int32_t input_count,
                                stax_threadpool_t* pool, stax_tensor_t** out) {
  stax_kernel_fn fn = op == STAX_OP_MatMul ? stax_kernel_MatMul
                      : op == STAX_OP_Gemm ? stax_kernel_Gemm
                                           : stax_kernel_Einsum;
  return kt_call_kernel(fn, op, "n", attrs, attr_count, inputs, input_count, out, 1,
                        kt_allocator(), pool);
}

/* ---- the GEMM core ----------------------------------------------------------------------- */

/* C = alpha*A*B + beta*C through the core on arrays with the given strides, vs a naive loop. */
static void check_core_f32(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                           double alpha, double beta, stax_threadpool_t* pool) {
  float* a = malloc(sizeof(float) * (size_t)(m * k + 1));
  float* b = malloc(sizeof(float) * (size_t)(k * n + 1));
  float* c = malloc(sizeof(float) * (size_t)(m * n + 1));
  double* expected = malloc(sizeof(double) * (size_t)(m * n + 1));
  for (int64_t i = 0; i < m * k; i++) a[i] = (float)random_value();
  for (int64_t i = 0; i < k * n; i++) b[i] = (float)random_value();
  for (int64_t i = 0; i < m * n; i++) c[i] = (float)random_value();
  stax_gemm_operand_t ao = {STAX_DTYPE_FLOAT32, a, trans_a ? 1 : k, trans_a ? m : 1};
  stax_gemm_operand_t bo = {STAX_DTYPE_FLOAT32, b, trans_b ? 1 : n, trans_b ? k : 1};
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double sum = 0;
      for (int64_t p = 0; p < k; p++)
        sum += (double)a[i * ao.row_stride + p * ao.col_stride] *
               b[p * bo.row_stride + j * bo.col_stride];
      expected[i * n + j] = alpha * sum + (beta != 0 ? beta * c[i * n + j] : 0);
    }
  }
  CHECK_OK(stax_gemm(kt_allocator(), STAX_DTYPE_FLOAT32, pool, m, n, k, alpha, &ao, &bo, beta, c, n, 1));
  int bad = 0;
  for (int64_t i = 0; i < m * n && bad < 3; i++) {
    if (fabs(c[i] - expected[i]) > 1e-3 * (1 + fabs(expected[i]))) {
      fprintf(stderr, "core %s m=%lld n=%lld k=%lld ta=%d tb=%d: [%lld] %g vs %g\n",
              stax_gemm_isa_name(), (long long)m, (long long)n, (long long)k, trans_a, trans_b,
              (long long)i, c[i], expected[i]);
      bad++;
    }
  }
  CHECK(bad == 0);
  free(a);
  free(b);
  free(c);
  free(expected);
}

/* The float64 tiles: C = A*B with A transposed in memory and a strided C, vs a naive loop. */
static void check_core_f64(int64_t m, int64_t n, int64_t k) {
  double* a = malloc(sizeof(double) * (size_t)(m * k + 1));
  double* b = malloc(sizeof(double) * (size_t)(k * n + 1));
  double* c = malloc(sizeof(double) * (size_t)(2 * m * n + 1));
  for (int64_t i = 0; i < m * k; i++) a[i] = random_value();
  for (int64_t i = 0; i < k * n; i++) b[i] = random_value();
  stax_gemm_operand_t ao = {STAX_DTYPE_FLOAT64, a, 1, m}, bo = {STAX_DTYPE_FLOAT64, b, n, 1};
  CHECK_OK(stax_gemm(kt_allocator(), STAX_DTYPE_FLOAT64, NULL, m, n, k, 1.0, &ao, &bo, 0.0, c, 2 * n, 2));
  int bad = 0;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double sum = 0;
      for (int64_t p = 0; p < k; p++) sum += a[i + p * m] * b[p * n + j];
      if (c[i * 2 * n + 2 * j] != sum && bad++ < 3)
        fprintf(stderr, "core f64 %s m=%lld n=%lld k=%lld: %g vs %g\n", stax_gemm_isa_name(),
                (long long)m, (long long)n, (long long)k, c[i * 2 * n + 2 * j], sum);
    }
  }
  CHECK(bad == 0);
  free(a);
  free(b);
  free(c);
}

static const char* const kIsas[] = {"generic", "generic-8x32", "avx2+fma", "avx512f"};

static void test_core_odd_sizes_every_isa(void) {
  static const int64_t sizes[] = {1, 2, 3, 5, 6, 7, 8, 9, 15, 16, 17, 24, 31, 33, 47, 64, 67};
  const int count = (int)(sizeof(sizes) / sizeof(sizes[0]));
  for (int v = 0; v < 4; v++) {
    if (!stax_gemm_set_isa(kIsas[v])) continue;
    for (int t = 0; t < 60; t++) {
      int64_t m = sizes[next_random() % count], n = sizes[next_random() % count];
      int64_t k = sizes[next_random() % count];
      check_core_f32(m, n, k, t % 2, (t / 2) % 2, 1.0, 0.0, NULL);
    }
    for (int t = 0; t < 12; t++)
      check_core_f64(sizes[next_random() % count], sizes[next_random() % count],
                     sizes[next_random() % count]);
    /* alpha and beta, and a C that already holds values. */
    check_core_f32(13, 29, 11, false, false, 0.5, 2.0, NULL);
    check_core_f32(6, 16, 3, true, true, -1.0, 1.0, NULL);
  }
  CHECK(stax_gemm_set_isa(NULL));
  CHECK(!stax_gemm_set_isa("no-such-isa"));
}

static void test_core_blocks_and_threads(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 3, &pool));
  check_core_f32(200, 150, 600, false, false, 1.0, 0.0, pool); /* K over KC, M over MC */
  check_core_f32(97, 130, 257, true, false, 1.0, 1.0, pool);   /* K one past a KC block */
  check_core_f32(5, 2100, 9, false, true, 1.0, 0.0, pool);     /* N over one NC panel */
  check_core_f32(1600, 3, 4, false, false, 1.0, 0.0, pool);    /* M over one MBIG chunk */
  check_core_f32(1, 300, 70, false, false, 1.0, 0.0, pool);    /* a row vector */
  check_core_f32(300, 1, 70, false, false, 1.0, 0.0, pool);    /* a column vector */
  stax_threadpool_destroy(pool);
}

static void test_core_halves_f64_and_k0(void) {
  /* float16 / bfloat16 operands widen while packing; float64 has its own tiles. */
  const int64_t m = 9, n = 21, k = 13;
  uint16_t a16[9 * 13], b16[13 * 21];
  double a64[9 * 13], b64[13 * 21], c64[9 * 21];
  float c32[9 * 21];
  for (int half = 0; half < 2; half++) {
    for (int64_t i = 0; i < m * k; i++) {
      a64[i] = random_value();
      a16[i] = half ? stax_f32_to_bf16((float)a64[i]) : stax_f32_to_f16((float)a64[i]);
    }
    for (int64_t i = 0; i < k * n; i++) {
      b64[i] = random_value();
      b16[i] = half ? stax_f32_to_bf16((float)b64[i]) : stax_f32_to_f16((float)b64[i]);
    }
    stax_dtype_t dtype = half ? STAX_DTYPE_BFLOAT16 : STAX_DTYPE_FLOAT16;
    stax_gemm_operand_t ao = {dtype, a16, k, 1}, bo = {dtype, b16, n, 1};
    CHECK_OK(stax_gemm(kt_allocator(), STAX_DTYPE_FLOAT32, NULL, m, n, k, 1.0, &ao, &bo, 0.0, c32, n, 1));
    stax_gemm_operand_t a8 = {STAX_DTYPE_FLOAT64, a64, k, 1}, b8 = {STAX_DTYPE_FLOAT64, b64, n, 1};
    CHECK_OK(stax_gemm(kt_allocator(), STAX_DTYPE_FLOAT64, NULL, m, n, k, 1.0, &a8, &b8, 0.0, c64, n, 1));
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < n; j++) {
        double sum = 0;
        for (int64_t p = 0; p < k; p++) sum += a64[i * k + p] * b64[p * n + j];
        CHECK_NEAR(c32[i * n + j], sum, 1e-9);
        CHECK_NEAR(c64[i * n + j], sum, 1e-12);
      }
    }
  }
  /* K = 0: C = beta * C, and beta = 0 clears C even when it held NaN. */
  float c[6] = {NAN, 1, 2, 3, 4, 5};
  stax_gemm_operand_t empty = {STAX_DTYPE_FLOAT32, c, 0, 0};
  CHECK_OK(stax_gemm(kt_allocator(), STAX_DTYPE_FLOAT32, NULL, 2, 3, 0, 1.0, &empty, &empty, 0.0, c, 3, 1));
  for (int i = 0; i < 6; i++) CHECK(c[i] == 0.0f);
  float d[4] = {1, 2, 3, 4};
  CHECK_OK(stax_gemm(kt_allocator(), STAX_DTYPE_FLOAT32, NULL, 2, 2, 0, 1.0, &empty, &empty, 2.0, d, 2, 1));
  CHECK(d[3] == 8.0f);
  /* Unsupported operand dtypes are an error, not a crash. */
  stax_gemm_operand_t ints = {STAX_DTYPE_INT32, c, 1, 1};
  CHECK_ERROR(stax_gemm(kt_allocator(), STAX_DTYPE_FLOAT32, NULL, 1, 1, 1, 1.0, &ints, &ints, 0.0, c, 1, 1),
              STAX_INTERNAL, "int32");
}

/* ---- MatMul ------------------------------------------------------------------------------ */

/* Checks out = matmul(a, b) on logical values, numpy rules, for views of any layout. */
static void check_matmul(const stax_tensor_t* a, const stax_tensor_t* b, const stax_tensor_t* out,
                         double tolerance) {
  int32_t ra = stax_tensor_rank(a), rb = stax_tensor_rank(b), ro = stax_tensor_rank(out);
  const int64_t *ad = stax_tensor_dims(a), *bd = stax_tensor_dims(b), *od = stax_tensor_dims(out);
  int64_t m = ra >= 2 ? ad[ra - 2] : 1, k = ad[ra - 1], n = rb >= 2 ? bd[rb - 1] : 1;
  int32_t batch_rank = ro - (ra >= 2) - (rb >= 2);
  int64_t batches = 1;
  for (int32_t d = 0; d < batch_rank; d++) batches *= od[d];
  int bad = 0;
  stax_dtype_t dtype = stax_tensor_dtype(out);
  for (int64_t batch = 0; batch < batches; batch++) {
    /* Batch index -> flat matrix indices of a and b (broadcast dims use index 0). */
    int64_t index[STAX_MAX_RANK], rest = batch;
    for (int32_t d = batch_rank - 1; d >= 0; d--) {
      index[d] = rest % od[d];
      rest /= od[d];
    }
    int64_t a_matrix = 0, b_matrix = 0;
    for (int32_t d = 0; d < ra - 2; d++) {
      int64_t i = index[batch_rank - (ra - 2) + d];
      a_matrix = a_matrix * ad[d] + (ad[d] == 1 ? 0 : i);
    }
    for (int32_t d = 0; d < rb - 2; d++) {
      int64_t i = index[batch_rank - (rb - 2) + d];
      b_matrix = b_matrix * bd[d] + (bd[d] == 1 ? 0 : i);
    }
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < n; j++) {
        double sum = 0;
        uint64_t wrapped = 0;
        for (int64_t p = 0; p < k; p++) {
          double x = view_value(a, a_matrix * m * k + i * k + p);
          double y = view_value(b, b_matrix * k * n + p * n + j);
          sum += x * y;
          wrapped += (uint64_t)(int64_t)x * (uint64_t)(int64_t)y;
        }
        double expected =
            stax_dtype_is_integer(dtype) ? wrap_to(dtype, wrapped) : kt_round_to(dtype, sum);
        double got = view_value(out, batch * m * n + i * n + j);
        if (fabs(got - expected) > tolerance && bad++ < 3)
          fprintf(stderr, "matmul %s [%lld,%lld,%lld]: %g vs %g\n", stax_dtype_name(dtype),
                  (long long)batch, (long long)i, (long long)j, got, expected);
      }
    }
  }
  CHECK(bad == 0);
}

static void matmul_case(stax_dtype_t dtype, int32_t ra, const int64_t* ad, int32_t rb,
                        const int64_t* bd, int32_t expected_rank, const int64_t* expected_dims,
                        stax_threadpool_t* pool) {
  stax_tensor_t* a = make_tensor(dtype, ra, ad, NULL);
  stax_tensor_t* b = make_tensor(dtype, rb, bd, NULL);
  stax_tensor_t* inputs[2] = {a, b};
  stax_tensor_t* out = NULL;
  CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, inputs, 2, pool, &out));
  if (out) {
    CHECK_EQ_INT(stax_tensor_rank(out), expected_rank);
    for (int32_t d = 0; d < expected_rank && d < stax_tensor_rank(out); d++)
      CHECK_EQ_INT(stax_tensor_dims(out)[d], expected_dims[d]);
    check_matmul(a, b, out, 1e-9);
  }
  kt_release(a);
  kt_release(b);
  kt_release(out);
}

static void test_matmul_shapes_and_broadcast(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  const stax_dtype_t f = STAX_DTYPE_FLOAT32;
  matmul_case(f, 2, (int64_t[]){7, 5}, 2, (int64_t[]){5, 3}, 2, (int64_t[]){7, 3}, NULL);
  matmul_case(f, 1, (int64_t[]){5}, 1, (int64_t[]){5}, 0, NULL, NULL); /* dot */
  matmul_case(f, 1, (int64_t[]){4}, 3, (int64_t[]){2, 4, 3}, 2, (int64_t[]){2, 3}, NULL);
  matmul_case(f, 3, (int64_t[]){5, 3, 4}, 1, (int64_t[]){4}, 2, (int64_t[]){5, 3}, NULL);
  matmul_case(f, 4, (int64_t[]){2, 1, 3, 4}, 3, (int64_t[]){3, 4, 5}, 4, (int64_t[]){2, 3, 3, 5},
              pool);
  matmul_case(f, 2, (int64_t[]){6, 4}, 4, (int64_t[]){2, 3, 4, 7}, 4, (int64_t[]){2, 3, 6, 7},
              pool);
  matmul_case(f, 3, (int64_t[]){40, 9, 11}, 3, (int64_t[]){1, 11, 10}, 3, (int64_t[]){40, 9, 10},
              pool); /* many small products: batches in parallel */
  matmul_case(f, 3, (int64_t[]){2, 67, 65}, 2, (int64_t[]){65, 66}, 3, (int64_t[]){2, 67, 66},
              pool);
  /* Zero-sized dims: empty batches, empty results, and K = 0 (all zeros). */
  matmul_case(f, 3, (int64_t[]){0, 3, 4}, 2, (int64_t[]){4, 5}, 3, (int64_t[]){0, 3, 5}, NULL);
  matmul_case(f, 2, (int64_t[]){3, 0}, 2, (int64_t[]){0, 4}, 2, (int64_t[]){3, 4}, NULL);
  matmul_case(f, 2, (int64_t[]){3, 0}, 1, (int64_t[]){0}, 1, (int64_t[]){3}, NULL);
  stax_threadpool_destroy(pool);
}

static void test_matmul_dtypes(void) {
  static const stax_dtype_t dtypes[] = {STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16,
                                        STAX_DTYPE_INT8,    STAX_DTYPE_INT16,   STAX_DTYPE_INT32,
                                        STAX_DTYPE_INT64,   STAX_DTYPE_UINT8,   STAX_DTYPE_UINT16,
                                        STAX_DTYPE_UINT32,  STAX_DTYPE_UINT64};
  for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
    matmul_case(dtypes[t], 3, (int64_t[]){2, 7, 19}, 2, (int64_t[]){19, 23}, 3,
                (int64_t[]){2, 7, 23}, NULL);
    matmul_case(dtypes[t], 1, (int64_t[]){3}, 2, (int64_t[]){3, 2}, 1, (int64_t[]){2}, NULL);
  }
  /* Integer overflow wraps modulo 2^bits. */
  const int64_t dims[2] = {1, 2};
  const int64_t column[2] = {2, 1};
  stax_tensor_t* a = make_tensor(STAX_DTYPE_INT32, 2, dims, (double[]){65536, 65536});
  stax_tensor_t* b = make_tensor(STAX_DTYPE_INT32, 2, column, (double[]){65536, 3});
  stax_tensor_t* inputs[2] = {a, b};
  stax_tensor_t* out = NULL;
  CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, inputs, 2, NULL, &out));
  if (out) CHECK_EQ_INT(((int32_t*)stax_tensor_data(out))[0], 196608); /* 2^32 wraps to 0 */
  kt_release(a);
  kt_release(b);
  kt_release(out);
  stax_tensor_t* ua = make_tensor(STAX_DTYPE_UINT64, 2, dims, NULL);
  stax_tensor_t* ub = make_tensor(STAX_DTYPE_UINT64, 2, column, NULL);
  ((uint64_t*)stax_tensor_data(ua))[0] = UINT64_MAX; /* -1 mod 2^64 */
  ((uint64_t*)stax_tensor_data(ua))[1] = 5;
  ((uint64_t*)stax_tensor_data(ub))[0] = 7;
  ((uint64_t*)stax_tensor_data(ub))[1] = 2;
  stax_tensor_t* u_inputs[2] = {ua, ub};
  out = NULL;
  CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, u_inputs, 2, NULL, &out));
  if (out) CHECK(((uint64_t*)stax_tensor_data(out))[0] == 3u); /* -7 + 10 */
  kt_release(ua);
  kt_release(ub);
  kt_release(out);
}

static void test_matmul_views(void) {
  /* Transposed, sliced with steps, negative steps and broadcast (stride 0) operands. */
  const int64_t base_dims[3] = {3, 17, 13};
  stax_tensor_t* base_a = make_tensor(STAX_DTYPE_FLOAT32, 3, base_dims, NULL);
  stax_tensor_t* base_b = make_tensor(STAX_DTYPE_FLOAT32, 3, base_dims, NULL);
  stax_tensor_t *a = NULL, *b = NULL, *out = NULL;
  const int32_t swap[3] = {0, 2, 1};
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base_a, swap, &a)); /* [3, 13, 17] */
  CHECK_OK(stax_tensor_slice(kt_allocator(), base_b, 2, (int64_t[]){-1, 0}, (int64_t[]){INT64_MIN, 17},
                             (int32_t[]){0, 1}, (int64_t[]){-1, 1}, &b)); /* [3, 17, 13] reversed */
  stax_tensor_t* inputs[2] = {a, b};
  CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, inputs, 2, NULL, &out));
  if (out) check_matmul(a, b, out, 1e-9);
  kt_release(out);
  out = NULL;
  stax_tensor_t *stepped = NULL, *wide = NULL;
  CHECK_OK(stax_tensor_slice(kt_allocator(), base_a, 1, (int64_t[]){0}, (int64_t[]){17}, (int32_t[]){1},
                             (int64_t[]){2}, &stepped)); /* [3, 9, 13], row stride doubled */
  const int64_t one_dims[2] = {1, 5};
  stax_tensor_t* row = make_tensor(STAX_DTYPE_FLOAT32, 2, one_dims, NULL);
  CHECK_OK(stax_tensor_broadcast(kt_allocator(), row, 2, (int64_t[]){13, 5}, &wide)); /* stride 0 rows */
  stax_tensor_t* inputs2[2] = {stepped, wide};
  CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, inputs2, 2, NULL, &out));
  if (out) check_matmul(stepped, wide, out, 1e-9);
  kt_release(out);
  kt_release(stepped);
  kt_release(wide);
  kt_release(row);
  kt_release(a);
  kt_release(b);
  kt_release(base_a);
  kt_release(base_b);
}

static void test_matmul_preallocated_and_errors(void) {
  stax_tensor_t* a = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
  stax_tensor_t* b = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, NULL);
  stax_tensor_t* c = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){4, 3}, NULL);
  stax_tensor_t* i32 = make_tensor(STAX_DTYPE_INT32, 2, (int64_t[]){3, 4}, NULL);
  stax_tensor_t* scalar = make_tensor(STAX_DTYPE_FLOAT32, 0, NULL, NULL);
  /* A preallocated output full of NaN is overwritten. */
  stax_tensor_t* out = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, NULL);
  for (int i = 0; i < 8; i++) ((float*)stax_tensor_data(out))[i] = NAN;
  stax_tensor_t* inputs[2] = {a, b};
  CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, inputs, 2, NULL, &out));
  check_matmul(a, b, out, 1e-9);
  kt_release(out);
  /* A preallocated output of the wrong shape is reported. */
  out = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 5}, NULL);
  CHECK_ERROR(run_kernel(STAX_OP_MatMul, NULL, 0, inputs, 2, NULL, &out), STAX_SHAPE_MISMATCH,
              "[2, 4]");
  kt_release(out);
  out = NULL;
  stax_tensor_t* mismatch[2] = {a, c};
  CHECK_ERROR(run_kernel(STAX_OP_MatMul, NULL, 0, mismatch, 2, NULL, &out), STAX_SHAPE_MISMATCH,
              "input 0 dim 1 is 3 but input 1 dim 0 is 4");
  CHECK(out == NULL);
  stax_tensor_t* dtypes[2] = {a, i32};
  CHECK_ERROR(run_kernel(STAX_OP_MatMul, NULL, 0, dtypes, 2, NULL, &out), STAX_DTYPE_MISMATCH,
              "int32");
  stax_tensor_t* scalars[2] = {scalar, b};
  CHECK_ERROR(run_kernel(STAX_OP_MatMul, NULL, 0, scalars, 2, NULL, &out), STAX_INVALID_ARGUMENT,
              "input 0");
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, NULL);
  stax_tensor_t* y = make_tensor(STAX_DTYPE_FLOAT32, 3, (int64_t[]){3, 4, 2}, NULL);
  stax_tensor_t* batches[2] = {x, y};
  CHECK_ERROR(run_kernel(STAX_OP_MatMul, NULL, 0, batches, 2, NULL, &out), STAX_SHAPE_MISMATCH,
              "batch dims");
  CHECK(out == NULL);
  kt_release(x);
  kt_release(y);
  kt_release(a);
  kt_release(b);
  kt_release(c);
  kt_release(i32);
  kt_release(scalar);
}

/* ---- Gemm -------------------------------------------------------------------------------- */

static void gemm_case(stax_dtype_t dtype, int64_t m, int64_t n, int64_t k, bool trans_a,
                      bool trans_b, float alpha, float beta, int32_t c_rank,
                      const int64_t* c_dims) {
  int64_t a_dims[2] = {trans_a ? k : m, trans_a ? m : k};
  int64_t b_dims[2] = {trans_b ? n : k, trans_b ? k : n};
  stax_tensor_t* a = make_tensor(dtype, 2, a_dims, NULL);
  stax_tensor_t* b = make_tensor(dtype, 2, b_dims, NULL);
  stax_tensor_t* c = c_rank >= 0 ? make_tensor(dtype, c_rank, c_dims, NULL) : NULL;
  stax_node_attr_t attrs[4] = {kt_attr_int("transA", trans_a), kt_attr_int("transB", trans_b),
                               kt_attr_float("alpha", alpha), kt_attr_float("beta", beta)};
  stax_tensor_t* inputs[3] = {a, b, c};
  stax_tensor_t* out = NULL;
  CHECK_OK(run_kernel(STAX_OP_Gemm, attrs, 4, inputs, c ? 3 : 2, NULL, &out));
  if (out) {
    CHECK_EQ_INT(stax_tensor_dims(out)[0], m);
    CHECK_EQ_INT(stax_tensor_dims(out)[1], n);
    int bad = 0;
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < n; j++) {
        double sum = 0;
        for (int64_t p = 0; p < k; p++) {
          double x = view_value(a, trans_a ? p * m + i : i * k + p);
          double y = view_value(b, trans_b ? j * k + p : p * n + j);
          sum += x * y;
        }
        double bias = 0;
        if (c) {
          int64_t ci = c_rank == 2 ? (c_dims[0] == 1 ? 0 : i) * c_dims[1] + (c_dims[1] == 1 ? 0 : j)
                       : c_rank == 1 ? (c_dims[0] == 1 ? 0 : j)
                                     : 0;
          bias = view_value(c, ci);
        }
        double expected = kt_round_to(dtype, alpha * sum + beta * bias);
        double got = view_value(out, i * n + j);
        if (fabs(got - expected) > 1e-6 * (1 + fabs(expected)) && bad++ < 3)
          fprintf(stderr, "gemm %s %lldx%lldx%lld ta=%d tb=%d [%lld,%lld]: %g vs %g\n",
                  stax_dtype_name(dtype), (long long)m, (long long)n, (long long)k, trans_a,
                  trans_b, (long long)i, (long long)j, got, expected);
      }
    }
    CHECK(bad == 0);
  }
  kt_release(a);
  kt_release(b);
  kt_release(c);
  kt_release(out);
}

static void test_gemm_options(void) {
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    gemm_case(STAX_DTYPE_FLOAT32, 11, 19, 7, ta, tb, 1.0f, 1.0f, 2, (int64_t[]){11, 19});
    gemm_case(STAX_DTYPE_FLOAT64, 5, 9, 4, ta, tb, 0.5f, 2.0f, 1, (int64_t[]){9});
    gemm_case(STAX_DTYPE_FLOAT16, 6, 7, 5, ta, tb, 1.0f, 1.0f, 2, (int64_t[]){6, 1});
  }
  gemm_case(STAX_DTYPE_FLOAT32, 4, 6, 3, false, false, 2.0f, -1.0f, 2, (int64_t[]){1, 6});
  gemm_case(STAX_DTYPE_FLOAT32, 4, 6, 3, false, false, 1.0f, 1.0f, 0, NULL); /* scalar C */
  gemm_case(STAX_DTYPE_FLOAT32, 4, 6, 3, false, false, 1.0f, 1.0f, 1, (int64_t[]){1});
  gemm_case(STAX_DTYPE_FLOAT32, 4, 6, 3, true, false, 0.25f, 0.0f, -1, NULL); /* no C */
  gemm_case(STAX_DTYPE_BFLOAT16, 3, 5, 8, false, true, 1.0f, 0.5f, 1, (int64_t[]){5});
  gemm_case(STAX_DTYPE_FLOAT32, 3, 4, 0, false, false, 1.0f, 3.0f, 2, (int64_t[]){3, 4}); /* K=0 */
  gemm_case(STAX_DTYPE_INT32, 5, 6, 7, false, true, 1.0f, 1.0f, 1, (int64_t[]){6});
  gemm_case(STAX_DTYPE_INT64, 5, 6, 7, true, false, 2.0f, 3.0f, 2, (int64_t[]){5, 6});
  gemm_case(STAX_DTYPE_UINT32, 4, 4, 4, false, false, 1.0f, 1.0f, -1, NULL);
  gemm_case(STAX_DTYPE_FLOAT32, 70, 90, 300, true, true, 1.0f, 1.0f, 1, (int64_t[]){90});
}

static void test_gemm_errors(void) {
  stax_tensor_t* a = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
  stax_tensor_t* b = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, NULL);
  stax_tensor_t* bad_c = make_tensor(STAX_DTYPE_FLOAT32, 1, (int64_t[]){3}, NULL);
  stax_tensor_t* vector = make_tensor(STAX_DTYPE_FLOAT32, 1, (int64_t[]){3}, NULL);
  stax_tensor_t* out = NULL;
  stax_tensor_t* with_c[3] = {a, b, bad_c};
  CHECK_ERROR(run_kernel(STAX_OP_Gemm, NULL, 0, with_c, 3, NULL, &out), STAX_SHAPE_MISMATCH,
              "input 2 (C) dim 0 is 3");
  stax_node_attr_t trans[1] = {kt_attr_int("transB", 1)};
  stax_tensor_t* plain[2] = {a, b};
  CHECK_ERROR(run_kernel(STAX_OP_Gemm, trans, 1, plain, 2, NULL, &out), STAX_SHAPE_MISMATCH,
              "input 0 dim 1 is 3 but input 1 dim 1 is 4");
  stax_tensor_t* one_d[2] = {vector, b};
  CHECK_ERROR(run_kernel(STAX_OP_Gemm, NULL, 0, one_d, 2, NULL, &out), STAX_INVALID_ARGUMENT,
              "2-D");
  stax_node_attr_t wrong_type[1] = {kt_attr_float("transA", 1.0f)};
  CHECK_ERROR(run_kernel(STAX_OP_Gemm, wrong_type, 1, plain, 2, NULL, &out), STAX_INVALID_ARGUMENT,
              "transA");
  CHECK(out == NULL);
  kt_release(a);
  kt_release(b);
  kt_release(bad_c);
  kt_release(vector);
}

/* ---- Einsum ------------------------------------------------------------------------------ */

static stax_status_t run_einsum(const char* equation, stax_tensor_t* const* inputs, int32_t count,
                                stax_threadpool_t* pool, stax_tensor_t** out) {
  stax_node_attr_t attrs[1] = {kt_attr_string("equation", equation)};
  return run_kernel(STAX_OP_Einsum, attrs, 1, inputs, count, pool, out);
}

static void check_values(const stax_tensor_t* out, const double* expected, int64_t count,
                         double tolerance, const char* what) {
  CHECK_EQ_INT(stax_tensor_element_count(out), count);
  int bad = 0;
  for (int64_t i = 0; i < count && i < stax_tensor_element_count(out); i++) {
    double got = view_value(out, i);
    if (fabs(got - expected[i]) > tolerance && bad++ < 3)
      fprintf(stderr, "%s [%lld]: %g vs %g\n", what, (long long)i, got, expected[i]);
  }
  CHECK(bad == 0);
}

static void test_einsum_two_operand(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  const int64_t I = 5, J = 7, K = 6, B = 3;
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){I, J}, NULL);
  stax_tensor_t* y = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){J, K}, NULL);
  stax_tensor_t* bx = make_tensor(STAX_DTYPE_FLOAT32, 3, (int64_t[]){B, I, J}, NULL);
  stax_tensor_t* by = make_tensor(STAX_DTYPE_FLOAT32, 3, (int64_t[]){B, J, K}, NULL);
  double expected[512];
  stax_tensor_t* out = NULL;
  stax_tensor_t* xy[2] = {x, y};
  /* Matrix product, explicit and implicit (labels once each, alphabetical: "ik"). */
  for (int64_t i = 0; i < I; i++)
    for (int64_t k = 0; k < K; k++) {
      double s = 0;
      for (int64_t j = 0; j < J; j++) s += view_value(x, i * J + j) * view_value(y, j * K + k);
      expected[i * K + k] = s;
    }
  CHECK_OK(run_einsum("ij,jk->ik", xy, 2, pool, &out));
  if (out) check_values(out, expected, I * K, 1e-9, "ij,jk->ik");
  kt_release(out);
  out = NULL;
  CHECK_OK(run_einsum("ij, jk", xy, 2, NULL, &out));
  if (out) check_values(out, expected, I * K, 1e-9, "ij,jk");
  kt_release(out);
  out = NULL;
  /* The transposed product: output order differs from the natural one. */
  CHECK_OK(run_einsum("ij,jk->ki", xy, 2, NULL, &out));
  for (int64_t k = 0; k < K; k++)
    for (int64_t i = 0; i < I; i++) {
      double s = 0;
      for (int64_t j = 0; j < J; j++) s += view_value(x, i * J + j) * view_value(y, j * K + k);
      expected[k * I + i] = s;
    }
  if (out) check_values(out, expected, I * K, 1e-9, "ij,jk->ki");
  kt_release(out);
  out = NULL;
  /* Batched, with the batch label moved last in the output. */
  stax_tensor_t* bxy[2] = {bx, by};
  CHECK_OK(run_einsum("bij,bjk->ikb", bxy, 2, pool, &out));
  for (int64_t i = 0; i < I; i++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t b = 0; b < B; b++) {
        double s = 0;
        for (int64_t j = 0; j < J; j++)
          s += view_value(bx, (b * I + i) * J + j) * view_value(by, (b * J + j) * K + k);
        expected[(i * K + k) * B + b] = s;
      }
  if (out) check_values(out, expected, I * K * B, 1e-9, "bij,bjk->ikb");
  kt_release(out);
  out = NULL;
  /* Outer product; then "ij,jk->k", where i is summed out of x alone before the product. */
  stax_tensor_t* u = make_tensor(STAX_DTYPE_FLOAT32, 1, (int64_t[]){4}, NULL);
  stax_tensor_t* v = make_tensor(STAX_DTYPE_FLOAT32, 1, (int64_t[]){3}, NULL);
  stax_tensor_t* uv[2] = {u, v};
  CHECK_OK(run_einsum("i,j->ij", uv, 2, NULL, &out));
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 3; j++) expected[i * 3 + j] = view_value(u, i) * view_value(v, j);
  if (out) check_values(out, expected, 12, 1e-9, "i,j->ij");
  kt_release(out);
  out = NULL;
  CHECK_OK(run_einsum("ij,jk->k", xy, 2, NULL, &out));
  for (int64_t k = 0; k < K; k++) {
    double s = 0;
    for (int64_t i = 0; i < I; i++)
      for (int64_t j = 0; j < J; j++) s += view_value(x, i * J + j) * view_value(y, j * K + k);
    expected[k] = s;
  }
  if (out) check_values(out, expected, K, 1e-9, "ij,jk->k");
  kt_release(out);
  out = NULL;
  /* Elementwise product (batch labels only) and a full contraction to a scalar. */
  stax_tensor_t* x2 = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){I, J}, NULL);
  stax_tensor_t* xx[2] = {x, x2};
  CHECK_OK(run_einsum("ij,ij->ij", xx, 2, NULL, &out));
  for (int64_t i = 0; i < I * J; i++) expected[i] = view_value(x, i) * view_value(x2, i);
  if (out) check_values(out, expected, I * J, 1e-9, "ij,ij->ij");
  kt_release(out);
  out = NULL;
  CHECK_OK(run_einsum("ij,ij", xx, 2, NULL, &out));
  double dot = 0;
  for (int64_t i = 0; i < I * J; i++) dot += view_value(x, i) * view_value(x2, i);
  if (out) check_values(out, &dot, 1, 1e-9, "ij,ij");
  kt_release(out);
  out = NULL;
  /* A transposed view as input: "ji" on x^T. */
  stax_tensor_t* xt = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), x, NULL, &xt));
  stax_tensor_t* xty[2] = {xt, y};
  CHECK_OK(run_einsum("ji,jk->ik", xty, 2, NULL, &out));
  for (int64_t i = 0; i < I; i++)
    for (int64_t k = 0; k < K; k++) {
      double s = 0;
      for (int64_t j = 0; j < J; j++) s += view_value(x, i * J + j) * view_value(y, j * K + k);
      expected[i * K + k] = s;
    }
  if (out) check_values(out, expected, I * K, 1e-9, "ji,jk->ik");
  kt_release(out);
  kt_release(xt);
  kt_release(x2);
  kt_release(u);
  kt_release(v);
  kt_release(x);
  kt_release(y);
  kt_release(bx);
  kt_release(by);
  stax_threadpool_destroy(pool);
}

static void test_einsum_single_operand(void) {
  const int64_t N = 5;
  stax_tensor_t* sq = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){N, N}, NULL);
  stax_tensor_t* cube = make_tensor(STAX_DTYPE_FLOAT64, 3, (int64_t[]){3, 4, 2}, NULL);
  double expected[64];
  stax_tensor_t* out = NULL;
  CHECK_OK(run_einsum("ii->i", &sq, 1, NULL, &out));
  for (int64_t i = 0; i < N; i++) expected[i] = view_value(sq, i * N + i);
  if (out) check_values(out, expected, N, 0, "ii->i");
  kt_release(out);
  out = NULL;
  CHECK_OK(run_einsum("ii", &sq, 1, NULL, &out)); /* trace */
  double trace = 0;
  for (int64_t i = 0; i < N; i++) trace += view_value(sq, i * N + i);
  if (out) {
    CHECK_EQ_INT(stax_tensor_rank(out), 0);
    check_values(out, &trace, 1, 1e-9, "ii");
  }
  kt_release(out);
  out = NULL;
  CHECK_OK(run_einsum("ij->ji", &sq, 1, NULL, &out));
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < N; j++) expected[j * N + i] = view_value(sq, i * N + j);
  if (out) check_values(out, expected, N * N, 0, "ij->ji");
  kt_release(out);
  out = NULL;
  CHECK_OK(run_einsum("abc->ca", &cube, 1, NULL, &out));
  for (int64_t c = 0; c < 2; c++)
    for (int64_t a = 0; a < 3; a++) {
      double s = 0;
      for (int64_t b = 0; b < 4; b++) s += view_value(cube, (a * 4 + b) * 2 + c);
      expected[c * 3 + a] = s;
    }
  if (out) check_values(out, expected, 6, 1e-12, "abc->ca");
  kt_release(out);
  out = NULL;
  CHECK_OK(run_einsum("abc->", &cube, 1, NULL, &out));
  double total = 0;
  for (int64_t i = 0; i < 24; i++) total += view_value(cube, i);
  if (out) check_values(out, &total, 1, 1e-12, "abc->");
  kt_release(out);
  kt_release(sq);
  kt_release(cube);
}

static void test_einsum_ellipsis_and_many(void) {
  /* "...ij,...jk->...ik" with the batch dims broadcasting (2,1) against (3). */
  stax_tensor_t* a = make_tensor(STAX_DTYPE_FLOAT32, 4, (int64_t[]){2, 1, 3, 4}, NULL);
  stax_tensor_t* b = make_tensor(STAX_DTYPE_FLOAT32, 3, (int64_t[]){3, 4, 5}, NULL);
  stax_tensor_t* ab[2] = {a, b};
  stax_tensor_t* out = NULL;
  static double expected[2 * 3 * 3 * 5];
  CHECK_OK(run_einsum("...ij,...jk->...ik", ab, 2, NULL, &out));
  for (int64_t p = 0; p < 2; p++)
    for (int64_t q = 0; q < 3; q++)
      for (int64_t i = 0; i < 3; i++)
        for (int64_t k = 0; k < 5; k++) {
          double s = 0;
          for (int64_t j = 0; j < 4; j++)
            s += view_value(a, (p * 3 + i) * 4 + j) * view_value(b, (q * 4 + j) * 5 + k);
          expected[((p * 3 + q) * 3 + i) * 5 + k] = s;
        }
  if (out) {
    CHECK_EQ_INT(stax_tensor_rank(out), 4);
    check_values(out, expected, 90, 1e-9, "...ij,...jk->...ik");
  }
  kt_release(out);
  out = NULL;
  /* Implicit output with "...": the ellipsis dims come first. "i...->..." sums i. */
  CHECK_OK(run_einsum("i...", &b, 1, NULL, &out)); /* implicit: "...i" */
  for (int64_t r = 0; r < 20; r++)
    for (int64_t i = 0; i < 3; i++) expected[r * 3 + i] = view_value(b, i * 20 + r);
  if (out) check_values(out, expected, 60, 0, "i...");
  kt_release(out);
  out = NULL;
  /* Three operands: abc,cd,de->abe. */
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, NULL);
  stax_tensor_t* y = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){4, 5}, NULL);
  stax_tensor_t* z = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){5, 2}, NULL);
  stax_tensor_t* xyz[3] = {x, y, z};
  CHECK_OK(run_einsum("abc,cd,de->abe", xyz, 3, NULL, &out));
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++)
      for (int64_t e = 0; e < 2; e++) {
        double s = 0;
        for (int64_t c = 0; c < 4; c++)
          for (int64_t d = 0; d < 5; d++)
            s += view_value(x, (i * 3 + j) * 4 + c) * view_value(y, c * 5 + d) *
                 view_value(z, d * 2 + e);
        expected[(i * 3 + j) * 2 + e] = s;
      }
  if (out) check_values(out, expected, 12, 1e-6, "abc,cd,de->abe");
  kt_release(out);
  out = NULL;
  /* Integers (computed in int64, wrapped back) and float16. */
  stax_tensor_t* p = make_tensor(STAX_DTYPE_INT32, 2, (int64_t[]){3, 4}, NULL);
  stax_tensor_t* q = make_tensor(STAX_DTYPE_INT32, 2, (int64_t[]){4, 2}, NULL);
  stax_tensor_t* pq[2] = {p, q};
  CHECK_OK(run_einsum("ij,jk->ik", pq, 2, NULL, &out));
  for (int64_t i = 0; i < 3; i++)
    for (int64_t k = 0; k < 2; k++) {
      double s = 0;
      for (int64_t j = 0; j < 4; j++) s += view_value(p, i * 4 + j) * view_value(q, j * 2 + k);
      expected[i * 2 + k] = s;
    }
  if (out) {
    CHECK(stax_tensor_dtype(out) == STAX_DTYPE_INT32);
    check_values(out, expected, 6, 0, "int32 ij,jk->ik");
  }
  kt_release(out);
  out = NULL;
  stax_tensor_t* h = make_tensor(STAX_DTYPE_FLOAT16, 2, (int64_t[]){4, 4}, NULL);
  CHECK_OK(run_einsum("ij->j", &h, 1, NULL, &out));
  for (int64_t j = 0; j < 4; j++) {
    double s = 0;
    for (int64_t i = 0; i < 4; i++) s += view_value(h, i * 4 + j);
    expected[j] = kt_round_to(STAX_DTYPE_FLOAT16, s);
  }
  if (out) check_values(out, expected, 4, 0, "float16 ij->j");
  kt_release(out);
  kt_release(h);
  kt_release(p);
  kt_release(q);
  kt_release(x);
  kt_release(y);
  kt_release(z);
  kt_release(a);
  kt_release(b);
}

static void test_einsum_errors(void) {
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
  stax_tensor_t* y = make_tensor(STAX_DTYPE_FLOAT32, 2, (int64_t[]){4, 5}, NULL);
  stax_tensor_t* xy[2] = {x, y};
  stax_tensor_t* out = NULL;
  CHECK_ERROR(run_einsum("ij,jk->ik", xy, 2, NULL, &out), STAX_SHAPE_MISMATCH, "label 'j'");
  CHECK_ERROR(run_einsum("ij,jk->ik,", xy, 2, NULL, &out), STAX_INVALID_ARGUMENT, "position 9");
  CHECK_ERROR(run_einsum("i.j", &x, 1, NULL, &out), STAX_INVALID_ARGUMENT, "'.'");
  CHECK_ERROR(run_einsum("ij#", &x, 1, NULL, &out), STAX_INVALID_ARGUMENT, "'#'");
  CHECK_ERROR(run_einsum("ij->i->j", &x, 1, NULL, &out), STAX_INVALID_ARGUMENT, "second '->'");
  CHECK_ERROR(run_einsum("ij", xy, 2, NULL, &out), STAX_INVALID_ARGUMENT, "1 input terms");
  CHECK_ERROR(run_einsum("ijk->i", &x, 1, NULL, &out), STAX_INVALID_ARGUMENT, "rank 2");
  CHECK_ERROR(run_einsum("ij->iz", &x, 1, NULL, &out), STAX_INVALID_ARGUMENT, "'z'");
  CHECK_ERROR(run_einsum("ij->ii", &x, 1, NULL, &out), STAX_INVALID_ARGUMENT, "twice");
  CHECK_ERROR(run_einsum("...->", &x, 1, NULL, &out), STAX_INVALID_ARGUMENT, "no \"...\"");
  CHECK_ERROR(run_einsum("ii->i", &x, 1, NULL, &out), STAX_SHAPE_MISMATCH, "label 'i'");
  CHECK(out == NULL);
  kt_release(x);
  kt_release(y);
}

/* ---- allocation failures ----------------------------------------------------------------- */

/* Fails each scratch allocation in turn: every failure must come back as OUT_OF_MEMORY with
 * no output set and nothing left allocated, and the sweep must end in a success. */
static void fault_sweep(stax_op_t op, stax_node_attr_t* attrs, int32_t attr_count,
                        stax_tensor_t* const* inputs, int32_t input_count) {
  bool succeeded = false;
  for (uint64_t fail_at = 1; fail_at < 64 && !succeeded; fail_at++) {
    stax_failing_allocator_t failing;
    stax_failing_allocator_init(&failing, kt_allocator(), fail_at);
    stax_node_t node = {.op = op, .name = "n", .attr_count = attr_count, .attrs = attrs};
    stax_tensor_t* out = NULL;
    stax_kernel_call_t call = {.node = &node,
                               .allocator = stax_failing_allocator(&failing),
                               .pool = NULL,
                               .input_count = input_count,
                               .inputs = inputs,
                               .output_count = 1,
                               .outputs = &out};
    stax_status_t status = op == STAX_OP_MatMul ? stax_kernel_MatMul(&call)
                           : op == STAX_OP_Gemm ? stax_kernel_Gemm(&call)
                                                : stax_kernel_Einsum(&call);
    if (status == STAX_OK) {
      succeeded = true;
      CHECK(out != NULL);
      kt_release(out);
    } else {
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      CHECK(out == NULL);
      stax_status_free(status);
    }
    CHECK_EQ_INT(failing.live_allocations, 0);
  }
  CHECK(succeeded);
}

static void test_allocation_failures(void) {
  stax_tensor_t* a = make_tensor(STAX_DTYPE_FLOAT16, 3, (int64_t[]){3, 9, 13}, NULL);
  stax_tensor_t* b = make_tensor(STAX_DTYPE_FLOAT16, 2, (int64_t[]){13, 7}, NULL);
  stax_tensor_t* ab[2] = {a, b};
  fault_sweep(STAX_OP_MatMul, NULL, 0, ab, 2);
  stax_tensor_t* c = make_tensor(STAX_DTYPE_FLOAT16, 1, (int64_t[]){7}, NULL);
  stax_tensor_t* x = make_tensor(STAX_DTYPE_FLOAT16, 2, (int64_t[]){9, 13}, NULL);
  stax_tensor_t* xbc[3] = {x, b, c};
  fault_sweep(STAX_OP_Gemm, NULL, 0, xbc, 3);
  stax_node_attr_t equation[1] = {kt_attr_string("equation", "bij,jk,k->bi")};
  stax_tensor_t* three[3] = {a, b, c};
  fault_sweep(STAX_OP_Einsum, equation, 1, three, 3);
  kt_release(a);
  kt_release(b);
  kt_release(c);
  kt_release(x);
}

/* ---- B packed once (constant weights) ------------------------------------------------------ */

/* stax_gemm_run_prepacked with B packed by stax_gemm_prepack_b gives exactly stax_gemm_run's
 * bits, for every variant, both layouts of B, K and N across the KC / NC blocks, float64. */
static void check_prepacked(stax_dtype_t dtype, int64_t m, int64_t n, int64_t k, bool trans_b,
                            stax_threadpool_t* pool) {
  size_t element = stax_dtype_size(dtype);
  char* a = malloc(element * (size_t)(m * k + 1));
  char* b = malloc(element * (size_t)(k * n + 1));
  char* c1 = malloc(element * (size_t)(m * n + 1));
  char* c2 = malloc(element * (size_t)(m * n + 1));
  for (int64_t i = 0; i < m * k; i++) {
    double v = random_value();
    if (dtype == STAX_DTYPE_FLOAT32) ((float*)a)[i] = (float)v;
    else ((double*)a)[i] = v;
  }
  for (int64_t i = 0; i < k * n; i++) {
    double v = random_value();
    if (dtype == STAX_DTYPE_FLOAT32) ((float*)b)[i] = (float)v;
    else ((double*)b)[i] = v;
  }
  stax_gemm_operand_t ao = {dtype, a, k, 1};
  stax_gemm_operand_t bo = {dtype, b, trans_b ? 1 : n, trans_b ? k : 1};
  size_t work = stax_gemm_workspace_size(dtype, m, n, k);
  size_t packed_size = stax_gemm_prepacked_b_size(dtype, n, k);
  void* workspace = NULL;
  void* packed = NULL;
  CHECK_OK(stax_allocator_malloc_aligned(kt_allocator(), work ? work : 64, 64, &workspace));
  CHECK_OK(stax_allocator_malloc_aligned(kt_allocator(), packed_size ? packed_size : 64, 64,
                                         &packed));
  stax_gemm_prepack_b(dtype, n, k, &bo, packed);
  stax_gemm_run(dtype, workspace, pool, m, n, k, 1.0, &ao, &bo, 0.0, c1, n, 1);
  stax_gemm_run_prepacked(dtype, workspace, pool, m, n, k, 1.0, &ao, &bo, packed, 0.0, c2, n, 1);
  CHECK(memcmp(c1, c2, element * (size_t)(m * n)) == 0);
  stax_allocator_free_aligned(kt_allocator(), workspace, work ? work : 64, 64);
  stax_allocator_free_aligned(kt_allocator(), packed, packed_size ? packed_size : 64, 64);
  free(a);
  free(b);
  free(c1);
  free(c2);
}

static void test_core_prepacked_b(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  for (int v = 0; v < 4; v++) {
    if (!stax_gemm_set_isa(kIsas[v])) continue;
    for (int t = 0; t < 2; t++) {
      check_prepacked(STAX_DTYPE_FLOAT32, 37, 53, 19, t, NULL);
      check_prepacked(STAX_DTYPE_FLOAT32, 70, 100, 600, t, pool);  /* K over KC */
      check_prepacked(STAX_DTYPE_FLOAT64, 9, 31, 300, t, NULL);
    }
  }
  CHECK(stax_gemm_set_isa(NULL));
  check_prepacked(STAX_DTYPE_FLOAT32, 20, 2100, 300, false, pool); /* N over NC, K over KC */
  stax_threadpool_destroy(pool);
}

/* The MatMul and Gemm kernels with a weight whose buffer is immutable (a program constant):
 * the first call packs it and keeps the packing with the buffer, later calls use it; every
 * result is bit-identical to the same product with a mutable weight. A transposed view of
 * the weight is another packing under another key. Released with the buffer
 * (LeakSanitizer). */
static void test_matmul_constant_weight(void) {
  int64_t ad[3] = {3, 40, 300}, bd[2] = {300, 70}, bt_dims[2] = {70, 300};
  stax_tensor_t* a = make_tensor(STAX_DTYPE_FLOAT32, 3, ad, NULL);
  stax_tensor_t* weight = make_tensor(STAX_DTYPE_FLOAT32, 2, bd, NULL);
  stax_tensor_t* plain = NULL;
  CHECK_OK(stax_tensor_copy(kt_allocator(), weight, &plain));
  stax_buffer_set_immutable(weight->buffer);
  stax_tensor_t* reference = NULL;
  stax_tensor_t* inputs[2] = {a, plain};
  CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, inputs, 2, NULL, &reference));
  for (int call = 0; call < 3; call++) {
    stax_tensor_t* out = NULL;
    stax_tensor_t* const_inputs[2] = {a, weight};
    CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, const_inputs, 2, NULL, &out));
    CHECK(out && reference &&
          memcmp(stax_tensor_data(out), stax_tensor_data(reference), 3 * 40 * 70 * 4) == 0);
    CHECK(atomic_load(&weight->buffer->derived) != NULL);
    kt_release(out);
  }
  /* A transposed view of another constant: its own packing. */
  stax_tensor_t* wt_base = make_tensor(STAX_DTYPE_FLOAT32, 2, bt_dims, NULL);
  stax_buffer_set_immutable(wt_base->buffer);
  stax_tensor_t* wt = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), wt_base, NULL, &wt));
  stax_tensor_t* wt_copy = NULL;
  CHECK_OK(stax_tensor_copy(kt_allocator(), wt, &wt_copy));
  stax_tensor_t* out1 = NULL;
  stax_tensor_t* out2 = NULL;
  stax_tensor_t* in1[2] = {a, wt};
  stax_tensor_t* in2[2] = {a, wt_copy};
  CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, in1, 2, NULL, &out1));
  CHECK_OK(run_kernel(STAX_OP_MatMul, NULL, 0, in2, 2, NULL, &out2));
  CHECK(out1 && out2 &&
        memcmp(stax_tensor_data(out1), stax_tensor_data(out2), 3 * 40 * 70 * 4) == 0);
  kt_release(out1);
  kt_release(out2);
  kt_release(wt);
  kt_release(wt_copy);
  kt_release(wt_base);
  /* Gemm with transB, alpha, beta and C, its weight constant: bit-identical to a mutable one. */
  for (int dtype = 0; dtype < 2; dtype++) {
    stax_dtype_t dt = dtype ? STAX_DTYPE_FLOAT64 : STAX_DTYPE_FLOAT32;
    size_t element = stax_dtype_size(dt);
    stax_tensor_t* ga = make_tensor(dt, 2, (int64_t[]){33, 300}, NULL);
    stax_tensor_t* gw = make_tensor(dt, 2, (int64_t[]){50, 300}, NULL);
    stax_tensor_t* gc = make_tensor(dt, 1, (int64_t[]){50}, NULL);
    stax_tensor_t* gw_plain = NULL;
    CHECK_OK(stax_tensor_copy(kt_allocator(), gw, &gw_plain));
    stax_buffer_set_immutable(gw->buffer);
    stax_node_attr_t attrs[3] = {kt_attr_int("transB", 1), kt_attr_float("alpha", 0.5f),
                                 kt_attr_float("beta", 2.0f)};
    stax_tensor_t* g_in_plain[3] = {ga, gw_plain, gc};
    stax_tensor_t* g_ref = NULL;
    CHECK_OK(run_kernel(STAX_OP_Gemm, attrs, 3, g_in_plain, 3, NULL, &g_ref));
    for (int call = 0; call < 2; call++) {
      stax_tensor_t* g_in[3] = {ga, gw, gc};
      stax_tensor_t* g_out = NULL;
      CHECK_OK(run_kernel(STAX_OP_Gemm, attrs, 3, g_in, 3, NULL, &g_out));
      CHECK(g_out && g_ref &&
            memcmp(stax_tensor_data(g_out), stax_tensor_data(g_ref), 33 * 50 * element) == 0);
      CHECK(atomic_load(&gw->buffer->derived) != NULL);
      kt_release(g_out);
    }
    kt_release(g_ref);
    kt_release(gw_plain);
    kt_release(gc);
    kt_release(gw);
    kt_release(ga);
  }
  kt_release(reference);
  kt_release(plain);
  kt_release(weight);
  kt_release(a);
}

/* The derived-data store: only immutable buffers keep entries, a key is stored once (the
 * second put gets the first entry back and its data is freed), and a recycled pooled block
 * starts mutable and empty. */
static void test_buffer_derived(void) {
  stax_allocator_t sys = stax_allocator_system();
  stax_buffer_t* buffer = NULL;
  CHECK_OK(stax_buffer_allocate(kt_allocator(), 64, &buffer));
  void* d1 = NULL;
  CHECK_OK(stax_allocator_malloc_aligned(sys, 128, 64, &d1));
  CHECK(stax_buffer_derived_put(buffer, 7, d1, 128) == NULL); /* mutable: refused, freed */
  CHECK(stax_buffer_derived_get(buffer, 7, 128) == NULL);
  stax_buffer_set_immutable(buffer);
  void* d2 = NULL;
  void* d3 = NULL;
  CHECK_OK(stax_allocator_malloc_aligned(sys, 128, 64, &d2));
  CHECK_OK(stax_allocator_malloc_aligned(sys, 128, 64, &d3));
  CHECK(stax_buffer_derived_put(buffer, 7, d2, 128) == d2);
  CHECK(stax_buffer_derived_put(buffer, 7, d3, 128) == d2); /* d3 freed */
  CHECK(stax_buffer_derived_get(buffer, 7, 128) == d2);
  CHECK(stax_buffer_derived_get(buffer, 8, 128) == NULL);
  CHECK(stax_buffer_derived_get(buffer, 7, 64) == NULL);
  stax_buffer_release(buffer); /* frees d2 */
  stax_buffer_t* pooled = NULL;
  CHECK_OK(stax_buffer_allocate_pooled(256, &pooled));
  stax_buffer_set_immutable(pooled);
  void* d4 = NULL;
  CHECK_OK(stax_allocator_malloc_aligned(sys, 64, 64, &d4));
  CHECK(stax_buffer_derived_put(pooled, 1, d4, 64) == d4);
  stax_buffer_release(pooled);
  CHECK_OK(stax_buffer_allocate_pooled(256, &pooled));
  CHECK(!pooled->immutable && atomic_load(&pooled->derived) == NULL);
  stax_buffer_release(pooled);
}

STAX_TEST_MAIN(STAX_TEST(test_allocation_failures), STAX_TEST(test_core_odd_sizes_every_isa),
               STAX_TEST(test_core_blocks_and_threads), STAX_TEST(test_core_halves_f64_and_k0),
               STAX_TEST(test_matmul_shapes_and_broadcast), STAX_TEST(test_matmul_dtypes),
               STAX_TEST(test_matmul_views), STAX_TEST(test_matmul_preallocated_and_errors),
               STAX_TEST(test_gemm_options), STAX_TEST(test_gemm_errors),
               STAX_TEST(test_einsum_two_operand), STAX_TEST(test_einsum_single_operand),
               STAX_TEST(test_einsum_ellipsis_and_many), STAX_TEST(test_einsum_errors),
               STAX_TEST(test_core_prepacked_b), STAX_TEST(test_matmul_constant_weight),
               STAX_TEST(test_buffer_derived))
