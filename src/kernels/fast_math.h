/* Float32 math for the generic kernels' fast paths: straight-line code (bit masks instead of
 * branches or selects, which GCC treats as control flow without -ffinite-math-only), so the
 * loops calling it vectorize (always inlined: GCC would keep erf out of line, and a call
 * per element does not vectorize). The results are what float32 needs, not libm's double
 * precision: each function says its error. */
#ifndef STAX_KERNELS_FAST_MATH_H_
#define STAX_KERNELS_FAST_MATH_H_

#include <stdint.h>
#include <string.h>

static inline int32_t stax_f32_bits(float x) {
  int32_t bits;
  memcpy(&bits, &x, sizeof(bits));
  return bits;
}

static inline float stax_f32_from_bits(int32_t bits) {
  float x;
  memcpy(&x, &bits, sizeof(x));
  return x;
}

/* exp for x <= 0 and not NaN (x - max in a softmax row without NaN), straight-line so loops
 * over it vectorize: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by Cephes' degree-6 polynomial,
 * 2^n through the exponent bits; x < -87.33 (past float32's normal range) gives 0. */
__attribute__((always_inline)) static inline float stax_exp_nonpositive_f32(float x) {
  /* x < -87.33 is found from the sign of x + 87.33 and handled with bit masks, not selects
   * (a select is control flow to GCC without -ffinite-math-only, and blocks vectorizing). */
  float t = x + 87.33f;
  int32_t t_bits;
  memcpy(&t_bits, &t, sizeof(t_bits));
  int32_t tiny = t_bits >> 31; /* all ones when x < -87.33 (or x is -inf) */
  /* xc = tiny ? -87.33 : x, as a bit select (arithmetic would make -inf NaN). */
  const float floor_value = -87.33f;
  int32_t x_bits, floor_bits;
  memcpy(&x_bits, &x, sizeof(x_bits));
  memcpy(&floor_bits, &floor_value, sizeof(floor_bits));
  int32_t xc_bits = (x_bits & ~tiny) | (floor_bits & tiny);
  float xc;
  memcpy(&xc, &xc_bits, sizeof(xc));
  /* Round to nearest by adding and subtracting 1.5 * 2^23 (no call: SSE2 has no round). */
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float z = r * r;
  float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
              4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  uint32_t scale_bits = (uint32_t)((int32_t)n + 127) << 23; /* n in [-126, 0] */
  float scale;
  memcpy(&scale, &scale_bits, sizeof(scale));
  float y = p * scale;
  int32_t y_bits;
  memcpy(&y_bits, &y, sizeof(y_bits));
  y_bits &= ~tiny;
  memcpy(&y, &y_bits, sizeof(y));
  return y;
}

/* erf for any float32 (NaN stays NaN, +-inf give +-1): the Maclaurin series (12 terms) for
 * |x| < 1, where its terms stay small, and Abramowitz & Stegun 7.1.26 (absolute error below
 * 1.5e-7) with the exp above elsewhere; the JIT's erf (llvm_math.c) is the same. Measured
 * against double erf over [-6, 6]: relative error below 1e-6. */
__attribute__((always_inline)) static inline float stax_erf_f32(float x) {
  int32_t x_bits = stax_f32_bits(x);
  int32_t a_bits = x_bits & 0x7fffffff;
  float a = stax_f32_from_bits(a_bits);
  int32_t nan_mask = -(int32_t)(a_bits > 0x7f800000);
  /* x^2, 0 for a NaN x (whose result is x itself): no NaN may reach exp's float-to-int step. */
  float z = stax_f32_from_bits(stax_f32_bits(x * x) & ~nan_mask);
  /* 2/sqrt(pi) * (-1)^k / (k! (2k + 1)), k = 11 down to 0, by Horner in x^2 */
  float s = -1.2290555302e-09f;
  s = s * z + 1.4807192816e-08f;
  s = s * z - 1.6365844691e-07f;
  s = s * z + 1.6462114366e-06f;
  s = s * z - 1.4925650358e-05f;
  s = s * z + 1.2055332982e-04f;
  s = s * z - 8.5483270235e-04f;
  s = s * z + 5.2239776254e-03f;
  s = s * z - 2.6866170645e-02f;
  s = s * z + 1.1283791671e-01f;
  s = s * z - 3.7612638903e-01f;
  s = s * z + 1.1283791671e+00f;
  float small = x * s;
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
                0.254829592f) * t;
  float large = 1.0f - poly * stax_exp_nonpositive_f32(-z);
  int32_t large_bits = (stax_f32_bits(large) & 0x7fffffff) | (x_bits & INT32_MIN);
  int32_t small_mask = -(int32_t)(a_bits < 0x3f800000);
  int32_t bits = (stax_f32_bits(small) & small_mask) | (large_bits & ~small_mask);
  bits = (x_bits & nan_mask) | (bits & ~nan_mask);
  return stax_f32_from_bits(bits);
}

/* erfc for a >= 0, given a and a^2 (a NaN must be masked to 0 by the caller: no NaN may reach
 * exp's float-to-int step): t R(t) exp(-a^2) with t = 1 / (1 + a/2), where R(t) is a degree-9
 * polynomial fitted (weighted least squares toward minimax, relative error) to
 * erfcx(a) / t = erfc(a) exp(a^2) / t over a in [0, 10.1], 2e-8 relative in double. Unlike
 * 1 - erf(a), it keeps its relative accuracy in the tail, where erfc is tiny; measured against
 * double erfc in float32 arithmetic: 4e-7 relative on [0, 1], 6e-7 on [1, 3], and from there
 * the float32 rounding of a^2, which exp turns into about 6e-8 a^2 relative (4e-6 at a = 10,
 * where erfc is 2e-45). The two factors are independent: t R(t) (the division, then the
 * polynomial by Estrin's scheme) and exp(-a^2) run side by side, where the previous form,
 * t exp(P(t) - a^2), waited for the division and the polynomial before its exp could start:
 * the loops that evaluate it are bound by that chain, not by the FMA rate (the vectorized
 * Gelu over [512, 3072] on Zen 3, one thread: 2.42 -> 2.0 ms, and the same in the JIT). Beyond a = 10.1, exp(-a^2) underflows to 0 by
 * a = 10.2. */
__attribute__((always_inline)) static inline float stax_erfc_nonnegative_f32(float a,
                                                                              float a_squared) {
  float t = 1.0f / (1.0f + 0.5f * a);
  float t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
  float r01 = 0.28284225f * t + 0.28206521f, r23 = 0.22489315f * t + 0.23877619f;
  float r45 = 0.41745102f * t - 0.09634822f, r67 = 0.42525020f * t - 0.66526169f;
  float r89 = 0.01198187f * t - 0.12165003f;
  float r = (r01 + r23 * t2) + (r45 + r67 * t2) * t4 + r89 * t8;
  return (t * r) * stax_exp_nonpositive_f32(-a_squared);
}

/* Gelu (approximate = "none") for any float32: 0.5 x (1 + erf(x / sqrt 2)) written as
 * 0.5 x erfc(-x / sqrt 2), with erfc(-z) = 2 - erfc(z) for x >= 0, so the negative tail, where
 * 1 + erf cancels (at x = -3 that lost 4e-5 of the result, 1.7e-7 absolute), keeps its
 * relative accuracy: measured against double, below 1e-6 for x >= 0 and below
 * 1e-6 + 1.2e-7 x^2 / 2 for x < 0 (the float32 rounding of exp's argument; 3.7e-6 at
 * x = -8.3, where the result is 1e-16). NaN stays NaN, +inf gives +inf, -inf NaN (-inf * 0, as the
 * formula gives). */
__attribute__((always_inline)) static inline float stax_gelu_f32(float x) {
  int32_t x_bits = stax_f32_bits(x);
  int32_t a_bits = x_bits & 0x7fffffff;
  int32_t nan_mask = -(int32_t)(a_bits > 0x7f800000);
  float ax = stax_f32_from_bits(a_bits & ~nan_mask);
  /* a^2 as x^2 / 2: one rounding instead of (x / sqrt 2)'s two, which the exp amplifies */
  float e = stax_erfc_nonnegative_f32(ax * 0.70710678118654752440f, 0.5f * (ax * ax));
  int32_t negative = x_bits >> 31; /* all ones for x < 0 (and -0, where both forms agree) */
  float f = stax_f32_from_bits((stax_f32_bits(e) & negative) |
                               (stax_f32_bits(2.0f - e) & ~negative));
  return 0.5f * x * f;
}

#endif /* STAX_KERNELS_FAST_MATH_H_ */
