/* Tests for the ISA level and its cap (src/base/cpu.c) and for every variant of the generic
 * kernels' per-ISA float32 loops (src/kernels/fast_loops.c) the CPU can run: erf, Gelu,
 * Softmax rows and LayerNormalization rows against double references, over lengths around
 * the vector widths, random values, the tails where erf and Gelu lose accuracy, and NaN and
 * infinities; LayerNorm bit for bit equal across the variants (it computes the same double
 * expressions with the same partial sums). The GEMM's choice follows the cap. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fast_loops.h"
#include "kernels/gemm.h"
#include "test_harness.h"

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static double random_unit(void) { /* [0, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static const int64_t kLengths[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 127, 768, 1001};
#define LENGTH_COUNT ((int)(sizeof(kLengths) / sizeof(kLengths[0])))

static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

/* Relative error against a double reference, with an absolute floor for values near 0. */
static bool close_to(double got, double want, double relative, double absolute) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= relative * fabs(want) + absolute;
}

static int levels(const stax_fast_loops_t** out) {
  int n = 0;
  for (int isa = STAX_ISA_BASELINE; isa <= STAX_ISA_AVX512; isa++) {
    const stax_fast_loops_t* loops = stax_fast_loops_for((stax_isa_t)isa);
    if (loops) {
      CHECK(loops->isa == (stax_isa_t)isa);
      out[n++] = loops;
    } else {
      CHECK(isa > (int)stax_isa_detected());
    }
  }
  CHECK(n == (int)stax_isa_detected() + 1);
  return n;
}

static void test_isa_cap(void) {
  stax_isa_t detected = stax_isa_detected();
  fprintf(stderr, "  detected %s, running at %s, GEMM %s\n", stax_isa_name(detected),
          stax_isa_name(stax_isa()), stax_gemm_isa_name());
  const char* env = getenv("STAX_ISA");
  /* ctest runs this file under STAX_ISA caps too: the environment's cap is in force. */
  if (env && strcmp(env, "sse2") == 0) CHECK(stax_isa() == STAX_ISA_BASELINE);
  if (env && strcmp(env, "avx2") == 0)
    CHECK(stax_isa() == (detected < STAX_ISA_AVX2 ? detected : STAX_ISA_AVX2));
  if (!env) CHECK(stax_isa() == detected);
  CHECK_OK(stax_set_isa_cap("sse2"));
  CHECK(stax_isa() == STAX_ISA_BASELINE);
  CHECK(stax_fast_loops()->isa == STAX_ISA_BASELINE);
  CHECK_EQ_STR(stax_gemm_isa_name(), "generic");
  CHECK(stax_isa_detected() == detected); /* the cap never changes what was detected */
  CHECK_OK(stax_set_isa_cap("baseline"));
  CHECK(stax_isa() == STAX_ISA_BASELINE);
  CHECK_OK(stax_set_isa_cap("AVX2")); /* names are case-insensitive */
  CHECK(stax_isa() == (detected < STAX_ISA_AVX2 ? detected : STAX_ISA_AVX2));
  if (stax_isa() == STAX_ISA_AVX2) {
    CHECK_EQ_STR(stax_gemm_isa_name(), "avx2+fma");
    CHECK(stax_fast_loops()->isa == STAX_ISA_AVX2);
  }
  CHECK_OK(stax_set_isa_cap("avx512")); /* a cap above the CPU changes nothing */
  CHECK(stax_isa() == detected);
  CHECK_ERROR(stax_set_isa_cap("avx3"), STAX_INVALID_ARGUMENT, "'avx3' is not one of");
  CHECK(stax_isa() == detected); /* a refused cap leaves the old one */
  CHECK_OK(stax_set_isa_cap(NULL));
  CHECK(stax_isa() == detected);
  CHECK_OK(stax_set_isa_cap("native"));
  CHECK(stax_fast_loops()->isa == detected);
  CHECK_EQ_STR(stax_isa_name(STAX_ISA_AVX512), "avx512");
  CHECK_EQ_STR(stax_isa_name(STAX_ISA_AVX2), "avx2");
  /* Put back what STAX_ISA asked for, so the rest of this run (ctest runs it capped too)
   * tests the capped level. */
  if (env) CHECK_OK(stax_set_isa_cap(env));
}

static void test_erf_and_gelu(void) {
  const stax_fast_loops_t* variants[3];
  int count = levels(variants);
  float* x = malloc(1001 * sizeof(float));
  float* y = malloc(1002 * sizeof(float));
  for (int v = 0; v < count; v++) {
    double worst_erf = 0, worst_gelu = 0, worst_gelu_at = 0;
    for (int l = 0; l < LENGTH_COUNT; l++) {
      int64_t n = kLengths[l];
      for (int round = 0; round < 4; round++) {
        for (int64_t i = 0; i < n; i++) {
          double u = random_unit();
          /* round 0: [-9, 9]; 1: the negative tail; 2: near 0; 3: a grid with specials */
          x[i] = round == 0   ? (float)(18 * u - 9)
                 : round == 1 ? (float)(-9 * u)
                 : round == 2 ? (float)((u - 0.5) * 1e-3)
                              : (float)(-6 + 12.0 * (double)i / (double)(n > 1 ? n - 1 : 1));
        }
        if (round == 3 && n >= 8) {
          x[0] = NAN;
          x[1] = INFINITY;
          x[2] = -INFINITY;
          x[3] = 0.0f;
          x[4] = -0.0f;
          x[5] = 1e30f;
          x[6] = -1e30f;
          x[7] = 1e-40f; /* subnormal */
        }
        y[n] = 12345.0f; /* nothing past n is written */
        variants[v]->erf_row(y, x, n);
        CHECK(y[n] == 12345.0f);
        for (int64_t i = 0; i < n; i++) {
          double want = erf((double)x[i]);
          if (!close_to(y[i], want, 1e-6, 1e-12))
            fprintf(stderr, "  %s erf(%.9g) = %.9g, want %.9g\n", stax_isa_name(variants[v]->isa),
                    x[i], y[i], want);
          CHECK(close_to(y[i], want, 1e-6, 1e-12));
          if (isfinite(want) && want != 0)
            worst_erf = fmax(worst_erf, fabs(y[i] - want) / fabs(want));
        }
        variants[v]->gelu_row(y, x, n);
        CHECK(y[n] == 12345.0f);
        for (int64_t i = 0; i < n; i++) {
          double want = ref_gelu((double)x[i]);
          if (isinf(x[i]) && x[i] < 0) want = NAN; /* -inf * 0, as the ONNX formula gives */
          /* The bound stax_gelu_f32 documents: 1e-6 relative, plus the float32 rounding of
           * exp's argument (-x^2 / 2) in the negative tail, wherever the result is a normal
           * float32. */
          double bound = 1e-6 + (x[i] < 0 ? 1.2e-7 * 0.5 * (double)x[i] * x[i] : 0);
          if (!close_to(y[i], want, bound, 1e-37))
            fprintf(stderr, "  %s gelu(%.9g) = %.9g, want %.9g\n",
                    stax_isa_name(variants[v]->isa), x[i], y[i], want);
          CHECK(close_to(y[i], want, bound, 1e-37));
          if (isfinite(want) && fabs(want) > 1e-30 &&
              fabs(y[i] - want) / fabs(want) > worst_gelu) {
            worst_gelu = fabs(y[i] - want) / fabs(want);
            worst_gelu_at = x[i];
          }
        }
      }
    }
    fprintf(stderr, "  %s: worst relative error erf %.2g, gelu %.2g (at %.9g)\n",
            stax_isa_name(variants[v]->isa), worst_erf, worst_gelu, worst_gelu_at);
  }
  free(x);
  free(y);
}

static void test_softmax_rows(void) {
  const stax_fast_loops_t* variants[3];
  int count = levels(variants);
  float* x = malloc(1001 * sizeof(float));
  float* y = malloc(1002 * sizeof(float));
  double* e = malloc(1001 * sizeof(double));
  for (int v = 0; v < count; v++) {
    for (int l = 0; l < LENGTH_COUNT; l++) {
      int64_t n = kLengths[l];
      for (int round = 0; round < 5; round++) {
        for (int64_t i = 0; i < n; i++) x[i] = (float)(40 * random_unit() - 20);
        /* round 1: a row spanning past exp's float32 range; 2: a NaN; 3: +inf; 4: -inf */
        if (round == 1 && n >= 2) x[n - 1] = 120.0f;
        if (round == 2 && n >= 1) x[n / 2] = NAN;
        if (round == 3 && n >= 1) x[n / 3] = INFINITY;
        if (round == 4 && n >= 2) x[0] = -INFINITY;
        y[n] = 12345.0f;
        variants[v]->softmax_row(y, x, n);
        CHECK(y[n] == 12345.0f);
        double max = -INFINITY, sum = 0;
        bool nan = false;
        for (int64_t i = 0; i < n; i++) {
          nan |= isnan(x[i]);
          max = fmax(max, x[i]);
        }
        for (int64_t i = 0; i < n; i++) sum += e[i] = exp((double)x[i] - max);
        for (int64_t i = 0; i < n; i++) {
          if (nan || isinf(max)) {
            CHECK(isnan(y[i]));
            continue;
          }
          double want = e[i] / sum;
          if (!close_to(y[i], want, 3e-6, 1e-37))
            fprintf(stderr, "  %s softmax n=%lld [%lld] = %.9g, want %.9g\n",
                    stax_isa_name(variants[v]->isa), (long long)n, (long long)i, y[i], want);
          CHECK(close_to(y[i], want, 3e-6, 1e-37));
        }
      }
    }
  }
  free(x);
  free(y);
  free(e);
}

static void test_layer_norm_rows(void) {
  const stax_fast_loops_t* variants[3];
  int count = levels(variants);
  float* x = malloc(1001 * sizeof(float));
  float* y = malloc(1002 * sizeof(float));
  float* y0 = malloc(1002 * sizeof(float));
  double* scale = malloc(1001 * sizeof(double));
  double* bias = malloc(1001 * sizeof(double));
  for (int l = 1; l < LENGTH_COUNT; l++) { /* the kernel never passes an empty row */
    int64_t n = kLengths[l];
    for (int64_t i = 0; i < n; i++) {
      x[i] = (float)(6 * random_unit() - 3 + 100); /* an offset mean, as residual sums have */
      scale[i] = 2 * random_unit() - 1;
      bias[i] = random_unit();
    }
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; i++) sum += x[i];
    double mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++) squares += (x[i] - mean) * (x[i] - mean);
    double inv_std = 1.0 / sqrt(squares / (double)n + 1e-5);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      for (int v = 0; v < count; v++) {
        double got_mean = 0, got_inv_std = 0;
        y[n] = 12345.0f;
        variants[v]->layer_norm_row(y, x, n, 1e-5, scale, with_bias ? bias : NULL, &got_mean,
                                    &got_inv_std);
        CHECK(y[n] == 12345.0f);
        CHECK_NEAR(got_mean, mean, 1e-12 * fabs(mean));
        CHECK_NEAR(got_inv_std, inv_std, 1e-9 * inv_std);
        for (int64_t i = 0; i < n; i++) {
          double want = (x[i] - mean) * inv_std * scale[i] + (with_bias ? bias[i] : 0);
          CHECK_NEAR(y[i], want, 1e-6 * fabs(want) + 1e-6);
        }
        if (v == 0) memcpy(y0, y, (size_t)n * sizeof(float));
        else
          CHECK(memcmp(y, y0, (size_t)n * sizeof(float)) == 0);
      }
    }
  }
  free(x);
  free(y);
  free(y0);
  free(scale);
  free(bias);
}

STAX_TEST_MAIN(STAX_TEST(test_isa_cap), STAX_TEST(test_erf_and_gelu),
               STAX_TEST(test_softmax_rows), STAX_TEST(test_layer_norm_rows))
