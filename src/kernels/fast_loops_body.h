/* The bodies of kernels/fast_loops.h's loops, included once per instruction-set level by
 * kernels/fast_loops.c, which defines FAST_LOOP(name) (the variant's function name),
 * FAST_LOOP_TARGET (its target attribute) and FAST_LOOP_LANES (float32 lanes of its native
 * vector) first. No include guard: including it again is the point. */

/* Polynomials contract to FMA where the level has it (ISO C turns contraction off). */
#define FAST_LOOP_MATH FAST_LOOP_TARGET STAX_FAST_LOOP_CONTRACT

/* The level's native vector (GCC and Clang vector extensions; wider types than the level
 * has are split lane by lane by GCC, so each level gets its own). */
typedef float FAST_LOOP(vf) __attribute__((vector_size(FAST_LOOP_LANES * 4)));
typedef int32_t FAST_LOOP(vi) __attribute__((vector_size(FAST_LOOP_LANES * 4)));
#define FAST_VF FAST_LOOP(vf)
#define FAST_VI FAST_LOOP(vi)

__attribute__((always_inline)) FAST_LOOP_MATH static inline FAST_VF FAST_LOOP(load)(const float* p) {
  FAST_VF v;
  memcpy(&v, p, sizeof(v)); /* unaligned: rows start anywhere */
  return v;
}

__attribute__((always_inline)) FAST_LOOP_MATH static inline void FAST_LOOP(store)(float* p,
                                                                                 FAST_VF v) {
  memcpy(p, &v, sizeof(v));
}

/* stax_exp_nonpositive_f32 (kernels/fast_math.h) on a vector: the same operations. */
__attribute__((always_inline)) FAST_LOOP_MATH static inline FAST_VF
FAST_LOOP(exp_nonpositive)(FAST_VF x) {
  const FAST_VF zero = {0};
  FAST_VI tiny = (FAST_VI)(x + 87.33f) >> 31;
  FAST_VF xc = (FAST_VF)(((FAST_VI)x & ~tiny) | ((FAST_VI)(zero - 87.33f) & tiny));
  FAST_VF n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  FAST_VF r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  FAST_VF z = r * r;
  FAST_VF p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  FAST_VI scale_bits = (__builtin_convertvector(n, FAST_VI) + 127) << 23;
  FAST_VF y = p * (FAST_VF)scale_bits;
  return (FAST_VF)((FAST_VI)y & ~tiny);
}

/* erf and gelu may run in place (out == in, docs/memory.md): no restrict. */
FAST_LOOP_MATH static void FAST_LOOP(erf)(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = stax_erf_f32(in[i]);
}

FAST_LOOP_MATH static void FAST_LOOP(gelu)(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = stax_gelu_f32(in[i]);
}

FAST_LOOP_MATH static void FAST_LOOP(softmax_row)(float* restrict out, const float* restrict in,
                                                  int64_t n) {
  /* Written in the level's vectors rather than loops over 16-element arrays: GCC reduced
   * the NaN flag across the lanes in every iteration and kept the exp sums on the stack,
   * which left this row at 2x ONNX Runtime's time on AVX2. Reductions keep one partial per
   * lane (the compiler may not reorder float sums or maxima itself), folded once per row. */
  enum { LANES = FAST_LOOP_LANES };
  const FAST_VF zero = {0};
  FAST_VF maxes = zero - INFINITY;
  FAST_VI nan_lanes = {0};
  int64_t k = 0;
  for (; k + LANES <= n; k += LANES) {
    FAST_VF v = FAST_LOOP(load)(in + k);
    FAST_VI greater = v > maxes;
    maxes = (FAST_VF)(((FAST_VI)v & greater) | ((FAST_VI)maxes & ~greater));
    nan_lanes |= v != v;
  }
  float max = -INFINITY;
  int32_t nans = 0;
  for (int32_t j = 0; j < LANES; j++) {
    max = maxes[j] > max ? maxes[j] : max;
    nans |= nan_lanes[j];
  }
  for (; k < n; k++) {
    max = in[k] > max ? in[k] : max;
    nans |= in[k] != in[k];
  }
  if (nans || isinf(max)) {
    /* inf - inf is NaN, and so is the sum: the whole row is NaN, as the double path has it. */
    for (k = 0; k < n; k++) out[k] = NAN;
    return;
  }
  /* exp and its sum in one pass, one float partial per lane: each adds at most n/4 terms in
   * [0, 1], so its rounding stays far below the 3e-6 the tests allow. */
  FAST_VF sums = zero;
  for (k = 0; k + LANES <= n; k += LANES) {
    FAST_VF e = FAST_LOOP(exp_nonpositive)(FAST_LOOP(load)(in + k) - max);
    FAST_LOOP(store)(out + k, e);
    sums += e;
  }
  float tail = 0.0f;
  for (; k < n; k++) {
    out[k] = stax_exp_nonpositive_f32(in[k] - max);
    tail += out[k];
  }
  /* Folded in halves (8+8, 4+4, ...). */
  float partial[LANES];
  memcpy(partial, &sums, sizeof(partial));
  for (int32_t width = LANES / 2; width >= 1; width /= 2)
    for (int32_t j = 0; j < width; j++) partial[j] += partial[j + width];
  double sum = (double)partial[0] + (double)tail;
  float inverse = (float)(1.0 / sum);
  for (k = 0; k + LANES <= n; k += LANES)
    FAST_LOOP(store)(out + k, FAST_LOOP(load)(out + k) * inverse);
  for (; k < n; k++) out[k] *= inverse;
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
#undef FAST_VF
#undef FAST_VI
