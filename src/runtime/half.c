/* IEEE binary16 (float16) and bfloat16 conversions, done on the bit patterns so the result
 * does not depend on the compiler, the FPU mode or F16C support. Narrowing rounds to nearest,
 * ties to even; Inf stays Inf; NaN stays NaN with its sign and as much payload as fits (a
 * payload that would vanish becomes the quiet bit, so NaN never turns into Inf). */
#include <string.h>

#include "runtime/tensor_internal.h"

static uint32_t stax_float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static float stax_bits_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

float stax_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return stax_bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return stax_bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return stax_bits_float(sign);
  /* Subnormal: shift the leading one up to the implicit-bit position; every half subnormal is
   * a normal float. */
  uint32_t float_exponent = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    float_exponent--;
  }
  return stax_bits_float(sign | (float_exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

uint16_t stax_f32_to_f16(float f) {
  uint32_t bits = stax_float_bits(f);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    uint16_t payload = (uint16_t)((magnitude >> 13) & 0x3ffu);
    return (uint16_t)(sign | 0x7c00u | (payload ? payload : 0x200u));
  }
  /* 65520 = 65504 + half an ulp: ties to the odd mantissa 0x3ff, so it rounds up to Inf. */
  if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (magnitude >= 0x38800000u) {
    /* Normal half: rebias the exponent (127 - 15 = 112) and round the 13 dropped bits; a carry
     * out of the mantissa correctly bumps the exponent. */
    uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - (112u << 23)) >> 13));
  }
  /* Below 2^-25 everything rounds to zero (2^-25 itself is a tie that goes to even zero). */
  if (magnitude < 0x33000000u) return sign;
  /* Subnormal half: units of 2^-24. The float is m * 2^(e - 150) with the implicit bit in m,
   * so the half mantissa is m >> (126 - e), rounded. */
  uint32_t exponent = magnitude >> 23;
  uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - exponent; /* 14..24 */
  uint32_t result = mantissa >> shift;
  uint32_t remainder = mantissa & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1u);
  if (remainder > halfway || (remainder == halfway && (result & 1u))) result++;
  return (uint16_t)(sign | result);
}

float stax_bf16_to_f32(uint16_t b) { return stax_bits_float((uint32_t)b << 16); }

uint16_t stax_f32_to_bf16(float f) {
  uint32_t bits = stax_float_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    uint16_t truncated = (uint16_t)(bits >> 16);
    return (truncated & 0x7fu) ? truncated : (uint16_t)(truncated | 0x40u);
  }
  /* bfloat16 is the top half of a float, so rounding is one add; overflow carries into the
   * exponent and lands exactly on Inf. */
  uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(rounded >> 16);
}

/* Narrowing a double in two steps (double -> float -> half) can round twice and miss the
 * nearest value. Rounding the first step to odd instead (truncate, then set the lowest bit if
 * anything was dropped) keeps the information the second rounding needs, because float has
 * more than two extra bits over either 16-bit format at every magnitude they can represent. */
static float stax_f64_to_f32_round_to_odd(double value) {
  float nearest = (float)value;
  if (value != value || (double)nearest == value) return nearest;
  uint32_t bits = stax_float_bits(nearest);
  /* Magnitudes only: step back toward zero when the nearest value overshot (this also turns
   * an overflowed Inf into FLT_MAX), which gives the truncated value. */
  if (((double)nearest > value) == (value > 0)) bits--;
  return stax_bits_float(bits | 1u);
}

uint16_t stax_f64_to_f16(double value) {
  return stax_f32_to_f16(stax_f64_to_f32_round_to_odd(value));
}

uint16_t stax_f64_to_bf16(double value) {
  return stax_f32_to_bf16(stax_f64_to_f32_round_to_odd(value));
}
