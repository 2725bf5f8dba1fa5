/* The bodies of kernels/fast_loops.h's loops, included once per instruction-set level by
 * kernels/fast_loops.c, which defines FAST_LOOP(name) (the variant's function name) and
 * FAST_LOOP_TARGET (its target attribute) first. No include guard: including it again is the
 * point. */

/* Polynomials contract to FMA where the level has it (ISO C turns contraction off). */
#define FAST_LOOP_MATH FAST_LOOP_TARGET STAX_FAST_LOOP_CONTRACT

/* erf and gelu may run in place (out == in, docs/memory.md): no restrict. */
FAST_LOOP_MATH static void FAST_LOOP(erf)(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = stax_erf_f32(in[i]);
}

FAST_LOOP_MATH static void FAST_LOOP(gelu)(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = stax_gelu_f32(in[i]);
}

FAST_LOOP_MATH static void FAST_LOOP(softmax_row)(float* restrict out, const float* restrict in,
                                                  int64_t n) {
  /* Reductions keep 16 independent partials (the compiler may not reorder float sums or
   * maxima itself), so every loop runs a full vector wide. */
  /* Partials are folded in halves (8+8, 4+4, ...), which the compiler turns into a few
   * shuffles; a serial fold of 16 partials costs as much as the whole row at n = 128. */
  float maxes[16];
  for (int32_t j = 0; j < 16; j++) maxes[j] = -INFINITY;
  int32_t nans = 0;
  int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int32_t j = 0; j < 16; j++) {
      maxes[j] = in[k + j] > maxes[j] ? in[k + j] : maxes[j];
      nans |= in[k + j] != in[k + j];
    }
  for (; k < n; k++) {
    maxes[0] = in[k] > maxes[0] ? in[k] : maxes[0];
    nans |= in[k] != in[k];
  }
  for (int32_t width = 8; width >= 1; width /= 2)
    for (int32_t j = 0; j < width; j++)
      maxes[j] = maxes[j + width] > maxes[j] ? maxes[j + width] : maxes[j];
  float max = maxes[0];
  if (nans || isinf(max)) {
    /* inf - inf is NaN, and so is the sum: the whole row is NaN, as the double path has it. */
    for (k = 0; k < n; k++) out[k] = NAN;
    return;
  }
  /* exp and its sum in one pass, into 16 float partials (one vector on AVX-512, two on AVX2):
   * each partial adds at most n/16 terms in [0, 1], so its rounding stays far below the
   * 3e-6 the tests allow. */
  float sums[16] = {0};
  for (k = 0; k + 16 <= n; k += 16)
    for (int32_t j = 0; j < 16; j++) {
      float e = stax_exp_nonpositive_f32(in[k + j] - max);
      out[k + j] = e;
      sums[j] += e;
    }
  for (; k < n; k++) {
    out[k] = stax_exp_nonpositive_f32(in[k] - max);
    sums[0] += out[k];
  }
  for (int32_t width = 8; width >= 1; width /= 2)
    for (int32_t j = 0; j < width; j++) sums[j] += sums[j + width];
  double sum = (double)sums[0];
  float inverse = (float)(1.0 / sum);
  for (k = 0; k < n; k++) out[k] *= inverse;
}

/* No contraction here: the general LayerNorm path computes the same double expressions
 * without it, and the two agree to the last bit. Eight partial sums let the loops run wide. */
FAST_LOOP_TARGET static void FAST_LOOP(layer_norm_row)(float* restrict y,
                                                       const float* restrict x, int64_t n,
                                                       double epsilon,
                                                       const double* restrict scale,
                                                       const double* restrict bias,
                                                       double* mean_out, double* inv_std_out) {
  int64_t k = 0;
  double sums[8] = {0};
  for (; k + 8 <= n; k += 8)
    for (int32_t j = 0; j < 8; j++) sums[j] += (double)x[k + j];
  for (; k < n; k++) sums[0] += (double)x[k];
  double sum = 0.0;
  for (int32_t j = 0; j < 8; j++) sum += sums[j];
  double mean = sum / (double)n;
  double squares[8] = {0};
  for (k = 0; k + 8 <= n; k += 8)
    for (int32_t j = 0; j < 8; j++) {
      double d = (double)x[k + j] - mean;
      squares[j] += d * d;
    }
  for (; k < n; k++) squares[0] += ((double)x[k] - mean) * ((double)x[k] - mean);
  double total = 0.0;
  for (int32_t j = 0; j < 8; j++) total += squares[j];
  double inv_std = 1.0 / sqrt(total / (double)n + epsilon);
  if (bias) {
    for (k = 0; k < n; k++) y[k] = (float)(((double)x[k] - mean) * inv_std * scale[k] + bias[k]);
  } else {
    for (k = 0; k < n; k++) y[k] = (float)(((double)x[k] - mean) * inv_std * scale[k]);
  }
  *mean_out = mean;
  *inv_std_out = inv_std;
}

#undef FAST_LOOP_MATH
