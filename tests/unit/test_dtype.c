/* Tests for element types: the dtype tables, float16/bfloat16 conversions (exhaustive round
 * trips and rounding cases) and element conversion between every pair of dtypes. */
#include <float.h>
#include <stdint.h>

#include "runtime/tensor_internal.h"
#include "test_harness.h"

static uint32_t float_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof(b));
  return b;
}
static float bits_float(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof(f));
  return f;
}

/* ---- tables ------------------------------------------------------------------------------- */

static const struct {
  stax_dtype_t dtype;
  const char* name;
  size_t size;
  char kind;
  int32_t onnx;
  int32_t dlpack;
} expected_dtypes[] = {
    {STAX_DTYPE_FLOAT32, "float32", 4, 'F', 1, 2},
    {STAX_DTYPE_FLOAT64, "float64", 8, 'F', 11, 2},
    {STAX_DTYPE_FLOAT16, "float16", 2, 'F', 10, 2},
    {STAX_DTYPE_BFLOAT16, "bfloat16", 2, 'F', 16, 4},
    {STAX_DTYPE_INT8, "int8", 1, 'I', 3, 0},
    {STAX_DTYPE_INT16, "int16", 2, 'I', 5, 0},
    {STAX_DTYPE_INT32, "int32", 4, 'I', 6, 0},
    {STAX_DTYPE_INT64, "int64", 8, 'I', 7, 0},
    {STAX_DTYPE_UINT8, "uint8", 1, 'U', 2, 1},
    {STAX_DTYPE_UINT16, "uint16", 2, 'U', 4, 1},
    {STAX_DTYPE_UINT32, "uint32", 4, 'U', 12, 1},
    {STAX_DTYPE_UINT64, "uint64", 8, 'U', 13, 1},
    {STAX_DTYPE_BOOL, "bool", 1, 'B', 9, 6},
};
#define EXPECTED_DTYPE_COUNT ((int)(sizeof(expected_dtypes) / sizeof(expected_dtypes[0])))

static void test_dtype_tables(void) {
  CHECK_EQ_INT(EXPECTED_DTYPE_COUNT, STAX_DTYPE_COUNT);
  for (int i = 0; i < EXPECTED_DTYPE_COUNT; i++) {
    stax_dtype_t d = expected_dtypes[i].dtype;
    CHECK_EQ_STR(stax_dtype_name(d), expected_dtypes[i].name);
    CHECK_EQ_INT(stax_dtype_size(d), expected_dtypes[i].size);
    CHECK_EQ_INT(stax_dtype_kind(d), expected_dtypes[i].kind);
    CHECK_EQ_INT(stax_dtype_to_onnx(d), expected_dtypes[i].onnx);
    CHECK_EQ_INT(stax_dtype_from_onnx(expected_dtypes[i].onnx), d);
    CHECK_EQ_INT(stax_dtype_dlpack_code(d), expected_dtypes[i].dlpack);
    CHECK_EQ_INT(
        stax_dtype_from_dlpack(expected_dtypes[i].dlpack, (int32_t)expected_dtypes[i].size * 8), d);
    CHECK_EQ_INT(stax_dtype_from_name(stax_dtype_name(d)), d);
    char kind = expected_dtypes[i].kind;
    CHECK(stax_dtype_is_float(d) == (kind == 'F'));
    CHECK(stax_dtype_is_signed_int(d) == (kind == 'I'));
    CHECK(stax_dtype_is_unsigned_int(d) == (kind == 'U'));
    CHECK(stax_dtype_is_integer(d) == (kind == 'I' || kind == 'U'));
    CHECK(stax_dtype_is_valid(d));
  }
}

static void test_dtype_invalid_and_aliases(void) {
  CHECK_EQ_INT(stax_dtype_from_name("float"), STAX_DTYPE_FLOAT32);
  CHECK_EQ_INT(stax_dtype_from_name("double"), STAX_DTYPE_FLOAT64);
  CHECK_EQ_INT(stax_dtype_from_name("half"), STAX_DTYPE_FLOAT16);
  CHECK_EQ_INT(stax_dtype_from_name("bf16"), STAX_DTYPE_BFLOAT16);
  CHECK_EQ_INT(stax_dtype_from_name("fp32"), STAX_DTYPE_FLOAT32);
  CHECK_EQ_INT(stax_dtype_from_name("int"), STAX_DTYPE_INVALID);
  CHECK_EQ_INT(stax_dtype_from_name("Float32"), STAX_DTYPE_INVALID);
  CHECK_EQ_INT(stax_dtype_from_name(""), STAX_DTYPE_INVALID);
  CHECK_EQ_INT(stax_dtype_from_name(NULL), STAX_DTYPE_INVALID);
  CHECK_EQ_STR(stax_dtype_name(STAX_DTYPE_INVALID), "invalid");
  CHECK_EQ_STR(stax_dtype_name(STAX_DTYPE_COUNT), "invalid");
  CHECK_EQ_INT(stax_dtype_size(STAX_DTYPE_INVALID), 0);
  CHECK_EQ_INT(stax_dtype_size((stax_dtype_t)99), 0);
  CHECK(!stax_dtype_is_float(STAX_DTYPE_INVALID));
  CHECK(!stax_dtype_is_integer(STAX_DTYPE_BOOL));
  CHECK(!stax_dtype_is_valid(STAX_DTYPE_COUNT));
  CHECK_EQ_INT(stax_dtype_from_onnx(0), STAX_DTYPE_INVALID);  /* UNDEFINED */
  CHECK_EQ_INT(stax_dtype_from_onnx(8), STAX_DTYPE_INVALID);  /* STRING */
  CHECK_EQ_INT(stax_dtype_from_onnx(14), STAX_DTYPE_INVALID); /* COMPLEX64 */
  CHECK_EQ_INT(stax_dtype_to_onnx(STAX_DTYPE_INVALID), 0);
  CHECK_EQ_INT(stax_dtype_from_dlpack(5, 64), STAX_DTYPE_INVALID); /* complex */
  CHECK_EQ_INT(stax_dtype_from_dlpack(2, 24), STAX_DTYPE_INVALID);
  CHECK_EQ_INT(stax_dtype_dlpack_code(STAX_DTYPE_INVALID), -1);
}

/* ---- float16 / bfloat16 ------------------------------------------------------------------- */

/* The value of a half bit pattern from the IEEE definition, independently of half.c. */
static double reference_f16_value(uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double magnitude = exponent == 0 ? ldexp(mantissa, -24) : ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}

static void test_f16_exhaustive_round_trip(void) {
  int failures = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = stax_f16_to_f32((uint16_t)h);
    uint16_t back = stax_f32_to_f16(f);
    bool is_nan = ((h >> 10) & 31) == 31 && (h & 1023) != 0;
    bool is_inf = ((h >> 10) & 31) == 31 && (h & 1023) == 0;
    if (back != h) failures++;
    if (is_nan) {
      if (!isnan(f) || (signbit(f) != 0) != ((h >> 15) != 0)) failures++;
    } else if (is_inf) {
      if (!isinf(f) || (f < 0) != ((h >> 15) != 0)) failures++;
    } else {
      if ((double)f != reference_f16_value((uint16_t)h)) failures++;
      if (signbit(f) != 0 && (h >> 15) == 0) failures++;
    }
  }
  CHECK_EQ_INT(failures, 0);
  CHECK(stax_f16_to_f32(0x3c00) == 1.0f);
  CHECK(stax_f16_to_f32(0x7bff) == 65504.0f);
  CHECK(stax_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
  CHECK(stax_f16_to_f32(0x0400) == ldexpf(1.0f, -14));
  CHECK(stax_f16_to_f32(0xc000) == -2.0f);
  CHECK(signbit(stax_f16_to_f32(0x8000)) && stax_f16_to_f32(0x8000) == 0.0f);
}

static void test_bf16_exhaustive_round_trip(void) {
  int failures = 0;
  for (uint32_t b = 0; b < 65536; b++) {
    float f = stax_bf16_to_f32((uint16_t)b);
    if (stax_f32_to_bf16(f) != b) failures++;
    if (float_bits(f) != b << 16) failures++;
  }
  CHECK_EQ_INT(failures, 0);
  CHECK(stax_bf16_to_f32(0x3f80) == 1.0f);
  CHECK(stax_bf16_to_f32(0xc040) == -3.0f);
}

/* Every midpoint between adjacent finite halves rounds to the even neighbour, and one float
 * ulp either side rounds to the nearer neighbour. */
static void test_f16_rounds_to_nearest_even(void) {
  int failures = 0;
  for (uint32_t h = 0; h < 0x7bff; h++) {
    float low = stax_f16_to_f32((uint16_t)h), high = stax_f16_to_f32((uint16_t)(h + 1));
    float middle = (float)(((double)low + (double)high) / 2); /* exact in float */
    uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
    if (stax_f32_to_f16(middle) != even) failures++;
    if (stax_f32_to_f16(nextafterf(middle, 0.0f)) != h) failures++;
    if (stax_f32_to_f16(nextafterf(middle, INFINITY)) != h + 1) failures++;
    if (stax_f32_to_f16(-middle) != (even | 0x8000)) failures++;
  }
  CHECK_EQ_INT(failures, 0);
  CHECK_EQ_INT(stax_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);     /* tie, even below */
  CHECK_EQ_INT(stax_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02); /* tie, even above */
  CHECK_EQ_INT(stax_f32_to_f16(65519.0f), 0x7bff);
  CHECK_EQ_INT(stax_f32_to_f16(65520.0f), 0x7c00); /* tie with Inf goes to Inf */
  CHECK_EQ_INT(stax_f32_to_f16(1e10f), 0x7c00);
  CHECK_EQ_INT(stax_f32_to_f16(-INFINITY), 0xfc00);
  CHECK_EQ_INT(stax_f32_to_f16(ldexpf(1, -25)), 0x0000); /* tie with 0 */
  CHECK_EQ_INT(stax_f32_to_f16(ldexpf(1, -25) * 1.0001f), 0x0001);
  CHECK_EQ_INT(stax_f32_to_f16(3 * ldexpf(1, -25)), 0x0002);
  CHECK_EQ_INT(stax_f32_to_f16(1023.5f * ldexpf(1, -24)), 0x0400); /* into the normals */
  CHECK_EQ_INT(stax_f32_to_f16(-1e-10f), 0x8000);
  CHECK_EQ_INT(stax_f32_to_f16(FLT_MIN), 0x0000);
  uint16_t nan = stax_f32_to_f16(NAN);
  CHECK((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0);
  uint16_t low_payload_nan = stax_f32_to_f16(bits_float(0xff800001u)); /* payload below half's */
  CHECK_EQ_INT(low_payload_nan, 0xfe00);
}

static void test_bf16_rounding(void) {
  CHECK_EQ_INT(stax_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);
  CHECK_EQ_INT(stax_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3f82);
  CHECK_EQ_INT(stax_f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)), 0x3f81);
  CHECK_EQ_INT(stax_f32_to_bf16(FLT_MAX), 0x7f80);
  CHECK_EQ_INT(stax_f32_to_bf16(-INFINITY), 0xff80);
  CHECK_EQ_INT(stax_f32_to_bf16(bits_float(0x00000001u)), 0x0000); /* tiny subnormal */
  CHECK_EQ_INT(stax_f32_to_bf16(bits_float(0x7f800001u)), 0x7fc0); /* payload lost: quiet */
  CHECK_EQ_INT(stax_f32_to_bf16(bits_float(0xffc12345u)), 0xffc1);
}

/* double -> 16-bit must round once: just above a tie, the answer is the upper neighbour even
 * though going through float would land exactly on the tie and round to even. */
static void test_f64_narrowing_rounds_once(void) {
  CHECK_EQ_INT(stax_f64_to_f16(1.0 + ldexp(1, -11) + ldexp(1, -40)), 0x3c01);
  CHECK_EQ_INT(stax_f64_to_f16(1.0 + ldexp(1, -11) - ldexp(1, -40)), 0x3c00);
  CHECK_EQ_INT(stax_f64_to_f16(-(1.0 + ldexp(1, -11) + ldexp(1, -40))), 0xbc01);
  CHECK_EQ_INT(stax_f64_to_f16(1.0 + ldexp(1, -11)), 0x3c00);
  CHECK_EQ_INT(stax_f64_to_f16(1e300), 0x7c00);
  CHECK_EQ_INT(stax_f64_to_f16(-1e-300), 0x8000);
  CHECK_EQ_INT(stax_f64_to_bf16(1.0 + ldexp(1, -8) + ldexp(1, -40)), 0x3f81);
  CHECK_EQ_INT(stax_f64_to_bf16(1e300), 0x7f80);
  CHECK_EQ_INT(stax_f64_to_bf16(1e-300), 0x0000);
  uint16_t nan = stax_f64_to_bf16(NAN);
  CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);
  /* Exhaustive over halves: every exact half value comes back unchanged through double. */
  int failures = 0;
  for (uint32_t h = 0; h < 0x7c00; h++) {
    if (stax_f64_to_f16(reference_f16_value((uint16_t)h)) != h) failures++;
  }
  CHECK_EQ_INT(failures, 0);
}

/* ---- conversion between all pairs --------------------------------------------------------- */

/* Samples as wide values; each source dtype takes the ones it can hold exactly. */
static const double float_samples[] = {0.0,    1.0,   -1.0,  2.5,   -2.5,     100.0,
                                       -100.0, 127.0, 200.0, 296.0, -296.0,   65536.0,
                                       -0.75,  1e10,  -1e10, NAN,   INFINITY, -INFINITY};
static const int64_t int_samples[] = {0,     1,      -1,           100,       -100,     127,
                                      -128,  200,    255,          256,       296,      -296,
                                      40000, -40000, 3000000000LL, INT64_MAX, INT64_MIN};

typedef struct wide_t {
  char kind; /* F, I, U */
  double f;
  int64_t i;
  uint64_t u;
} wide_t;

static bool sample_fits(stax_dtype_t dtype, wide_t w) {
  int bits = (int)stax_dtype_size(dtype) * 8;
  switch (stax_dtype_kind(dtype)) {
    case 'F':
      if (w.kind != 'F') return false;
      if (dtype == STAX_DTYPE_FLOAT16)
        return isnan(w.f) || (double)stax_f16_to_f32(stax_f32_to_f16((float)w.f)) == w.f;
      if (dtype == STAX_DTYPE_BFLOAT16)
        return isnan(w.f) || (double)stax_bf16_to_f32(stax_f32_to_bf16((float)w.f)) == w.f;
      if (dtype == STAX_DTYPE_FLOAT32) return isnan(w.f) || (double)(float)w.f == w.f;
      return true;
    case 'I':
      return w.kind == 'I' && (bits == 64 || (w.i >= -(INT64_C(1) << (bits - 1)) &&
                                              w.i < (INT64_C(1) << (bits - 1))));
    case 'U':
      return w.kind == 'I' && w.i >= 0 && (bits == 64 || w.i < (INT64_C(1) << bits));
    case 'B':
      return w.kind == 'I' && (w.i == 0 || w.i == 1);
  }
  return false;
}

static void store_sample(stax_dtype_t dtype, wide_t w, void* out) {
  int bits = (int)stax_dtype_size(dtype) * 8;
  uint64_t u = (uint64_t)w.i;
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: {
      float v = (float)w.f;
      memcpy(out, &v, 4);
      return;
    }
    case STAX_DTYPE_FLOAT64:
      memcpy(out, &w.f, 8);
      return;
    case STAX_DTYPE_FLOAT16: {
      uint16_t v = stax_f32_to_f16((float)w.f);
      memcpy(out, &v, 2);
      return;
    }
    case STAX_DTYPE_BFLOAT16: {
      uint16_t v = stax_f32_to_bf16((float)w.f);
      memcpy(out, &v, 2);
      return;
    }
    default:
      memcpy(out, &u, (size_t)bits / 8);
      return; /* little-endian low bytes */
  }
}

/* The expected destination bytes, computed from the documented rules. */
static void expected_value(stax_dtype_t dst, wide_t w, void* out) {
  int bits = (int)stax_dtype_size(dst) * 8;
  char kind = stax_dtype_kind(dst);
  double as_double = w.f;
  if (w.kind == 'I') as_double = (double)w.i;
  if (kind == 'F') {
    switch (dst) {
      case STAX_DTYPE_FLOAT32: {
        float v = (float)as_double;
        memcpy(out, &v, 4);
        return;
      }
      case STAX_DTYPE_FLOAT64:
        memcpy(out, &as_double, 8);
        return;
      /* Samples are exact in double and round once to float; the 16-bit results are then
       * what the f32 functions (tested above) give, except for the huge integers, which
       * overflow half anyway and are exact powers of two for bfloat16. */
      case STAX_DTYPE_FLOAT16: {
        uint16_t v = stax_f32_to_f16((float)as_double);
        memcpy(out, &v, 2);
        return;
      }
      case STAX_DTYPE_BFLOAT16: {
        uint16_t v = stax_f32_to_bf16((float)as_double);
        memcpy(out, &v, 2);
        return;
      }
      default:
        return;
    }
  }
  uint64_t result;
  if (kind == 'B') {
    result = w.kind == 'F' ? (w.f != 0) : (w.i != 0);
  } else if (w.kind == 'I') {
    result = (uint64_t)w.i; /* wraps: keep the low bytes */
  } else if (isnan(w.f)) {
    result = 0;
  } else if (kind == 'I') {
    double limit = ldexp(1, bits - 1);
    int64_t max = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
    result = (uint64_t)(w.f >= limit ? max : w.f <= -limit ? -max - 1 : (int64_t)trunc(w.f));
  } else {
    double limit = ldexp(1, bits);
    uint64_t max = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    result = w.f >= limit ? max : w.f <= 0 ? 0 : (uint64_t)trunc(w.f);
  }
  memcpy(out, &result, (size_t)bits / 8);
}

static void test_convert_all_pairs(void) {
  wide_t samples[64];
  int sample_count = 0;
  for (size_t i = 0; i < sizeof(float_samples) / sizeof(float_samples[0]); i++) {
    samples[sample_count++] = (wide_t){'F', float_samples[i], 0, 0};
  }
  for (size_t i = 0; i < sizeof(int_samples) / sizeof(int_samples[0]); i++) {
    samples[sample_count++] = (wide_t){'I', 0, int_samples[i], 0};
  }
  int pairs_checked = 0, failures = 0;
  for (int s = 0; s < STAX_DTYPE_COUNT; s++) {
    for (int d = 0; d < STAX_DTYPE_COUNT; d++) {
      for (int k = 0; k < sample_count; k++) {
        if (!sample_fits((stax_dtype_t)s, samples[k])) continue;
        uint8_t src[8] = {0}, got[8] = {0}, want[8] = {0};
        store_sample((stax_dtype_t)s, samples[k], src);
        stax_convert_elements((stax_dtype_t)s, src, (stax_dtype_t)d, got, 1);
        expected_value((stax_dtype_t)d, samples[k], want);
        size_t size = stax_dtype_size((stax_dtype_t)d);
        bool same = memcmp(got, want, size) == 0;
        /* NaN bit patterns may differ in payload; both must be NaN. */
        if (!same && isnan(samples[k].f) && stax_dtype_is_float((stax_dtype_t)d)) {
          double a = 0, b = 0;
          stax_convert_elements((stax_dtype_t)d, got, STAX_DTYPE_FLOAT64, &a, 1);
          stax_convert_elements((stax_dtype_t)d, want, STAX_DTYPE_FLOAT64, &b, 1);
          same = isnan(a) && isnan(b);
        }
        if (!same) {
          failures++;
          fprintf(stderr, "convert %s -> %s of sample %d (%g / %lld) wrong\n",
                  stax_dtype_name((stax_dtype_t)s), stax_dtype_name((stax_dtype_t)d), k,
                  samples[k].f, (long long)samples[k].i);
        }
      }
      pairs_checked++;
    }
  }
  CHECK_EQ_INT(pairs_checked, STAX_DTYPE_COUNT * STAX_DTYPE_COUNT);
  CHECK_EQ_INT(failures, 0);
}

static void test_convert_documented_edge_cases(void) {
  float f32[] = {-2.7f, 300.0f, -5.0f, NAN, 1e20f, -1e20f, -0.0f, 0.5f};
  int8_t i8[8];
  stax_convert_elements(STAX_DTYPE_FLOAT32, f32, STAX_DTYPE_INT8, i8, 8);
  CHECK_EQ_INT(i8[0], -2);  /* truncation toward zero */
  CHECK_EQ_INT(i8[1], 127); /* saturates */
  CHECK_EQ_INT(i8[2], -5);
  CHECK_EQ_INT(i8[3], 0); /* NaN -> 0 */
  CHECK_EQ_INT(i8[4], 127);
  CHECK_EQ_INT(i8[5], -128);
  CHECK_EQ_INT(i8[6], 0);
  CHECK_EQ_INT(i8[7], 0);
  uint8_t u8[8];
  stax_convert_elements(STAX_DTYPE_FLOAT32, f32, STAX_DTYPE_UINT8, u8, 8);
  CHECK_EQ_INT(u8[1], 255);
  CHECK_EQ_INT(u8[2], 0); /* negative -> 0 */
  CHECK_EQ_INT(u8[3], 0);
  int64_t i64[8];
  stax_convert_elements(STAX_DTYPE_FLOAT32, f32, STAX_DTYPE_INT64, i64, 8);
  CHECK(i64[4] == INT64_MAX && i64[5] == INT64_MIN && i64[3] == 0 && i64[0] == -2);
  uint8_t b[8];
  stax_convert_elements(STAX_DTYPE_FLOAT32, f32, STAX_DTYPE_BOOL, b, 8);
  CHECK(b[0] == 1 && b[3] == 1 && b[6] == 0 && b[7] == 1); /* NaN is true, -0 is false */

  int32_t i32[] = {300, -1, 65536, INT32_MIN};
  uint8_t wrapped_u8[4];
  uint16_t wrapped_u16[4];
  int8_t wrapped_i8[4];
  stax_convert_elements(STAX_DTYPE_INT32, i32, STAX_DTYPE_UINT8, wrapped_u8, 4);
  stax_convert_elements(STAX_DTYPE_INT32, i32, STAX_DTYPE_UINT16, wrapped_u16, 4);
  stax_convert_elements(STAX_DTYPE_INT32, i32, STAX_DTYPE_INT8, wrapped_i8, 4);
  CHECK(wrapped_u8[0] == 44 && wrapped_u8[1] == 255 && wrapped_u8[2] == 0);
  CHECK(wrapped_u16[1] == 65535 && wrapped_u16[2] == 0);
  CHECK(wrapped_i8[0] == 44 && wrapped_i8[1] == -1 && wrapped_i8[3] == 0);

  uint64_t big[] = {UINT64_MAX, UINT64_C(1) << 63};
  int8_t big_i8[2];
  float big_f32[2];
  stax_convert_elements(STAX_DTYPE_UINT64, big, STAX_DTYPE_INT8, big_i8, 2);
  stax_convert_elements(STAX_DTYPE_UINT64, big, STAX_DTYPE_FLOAT32, big_f32, 2);
  CHECK(big_i8[0] == -1 && big_i8[1] == 0);
  CHECK(big_f32[0] == 18446744073709551616.0f && big_f32[1] == 9223372036854775808.0f);

  uint8_t bools[] = {0, 1, 2}; /* any non-zero byte reads as true */
  float from_bool[3];
  stax_convert_elements(STAX_DTYPE_BOOL, bools, STAX_DTYPE_FLOAT32, from_bool, 3);
  CHECK(from_bool[0] == 0.0f && from_bool[1] == 1.0f && from_bool[2] == 1.0f);

  int64_t precise[] = {(INT64_C(1) << 53) + 1,
                       2049,
                       2051,
                       65519,
                       65520,
                       INT64_MAX,
                       INT64_MIN,
                       (INT64_C(1) << 24) + (INT64_C(1) << 16) + 1,
                       257,
                       259};
  double as_f64[10];
  uint16_t as_f16[10], as_bf16[10];
  stax_convert_elements(STAX_DTYPE_INT64, precise, STAX_DTYPE_FLOAT64, as_f64, 10);
  stax_convert_elements(STAX_DTYPE_INT64, precise, STAX_DTYPE_FLOAT16, as_f16, 10);
  stax_convert_elements(STAX_DTYPE_INT64, precise, STAX_DTYPE_BFLOAT16, as_bf16, 10);
  CHECK(as_f64[0] == 9007199254740992.0); /* ties to even */
  CHECK_EQ_INT(as_f16[1], 0x6800);        /* 2049 -> 2048 */
  CHECK_EQ_INT(as_f16[2], 0x6802);        /* 2051 -> 2052 */
  CHECK_EQ_INT(as_f16[3], 0x7bff);
  CHECK_EQ_INT(as_f16[4], 0x7c00);
  CHECK_EQ_INT(as_f16[5], 0x7c00);
  CHECK_EQ_INT(as_f16[6], 0xfc00);
  CHECK_EQ_INT(as_bf16[5], 0x5f00); /* 2^63 */
  CHECK_EQ_INT(as_bf16[6], 0xdf00);
  CHECK_EQ_INT(as_bf16[7], 0x4b81); /* rounded once: just above the tie goes up */
  CHECK_EQ_INT(as_bf16[8], 0x4380); /* 257 -> 256 */
  CHECK_EQ_INT(as_bf16[9], 0x4382); /* 259 -> 260 */
  uint64_t umax = UINT64_MAX;
  uint16_t umax_bf16 = 0, umax_f16 = 0;
  stax_convert_elements(STAX_DTYPE_UINT64, &umax, STAX_DTYPE_BFLOAT16, &umax_bf16, 1);
  stax_convert_elements(STAX_DTYPE_UINT64, &umax, STAX_DTYPE_FLOAT16, &umax_f16, 1);
  CHECK_EQ_INT(umax_bf16, 0x5f80);
  CHECK_EQ_INT(umax_f16, 0x7c00);

  double tenth = 0.1;
  float tenth_f32 = 0;
  stax_convert_elements(STAX_DTYPE_FLOAT64, &tenth, STAX_DTYPE_FLOAT32, &tenth_f32, 1);
  CHECK(tenth_f32 == 0.1f);
  uint16_t half_in[] = {0x3e00 /* 1.5 */, 0xbe00 /* -1.5 */, 0x7c00};
  int32_t half_out[3];
  uint16_t half_to_bf16[3];
  stax_convert_elements(STAX_DTYPE_FLOAT16, half_in, STAX_DTYPE_INT32, half_out, 3);
  stax_convert_elements(STAX_DTYPE_FLOAT16, half_in, STAX_DTYPE_BFLOAT16, half_to_bf16, 3);
  CHECK(half_out[0] == 1 && half_out[1] == -1 && half_out[2] == INT32_MAX);
  CHECK(half_to_bf16[0] == 0x3fc0 && half_to_bf16[1] == 0xbfc0 && half_to_bf16[2] == 0x7f80);

  /* Long runs cross the internal batch size; a zero count and invalid dtypes write nothing. */
  int32_t many[1000];
  double many_out[1000];
  for (int i = 0; i < 1000; i++) many[i] = i - 500;
  stax_convert_elements(STAX_DTYPE_INT32, many, STAX_DTYPE_FLOAT64, many_out, 1000);
  int wrong = 0;
  for (int i = 0; i < 1000; i++) wrong += many_out[i] != (double)(i - 500);
  CHECK_EQ_INT(wrong, 0);
  float untouched = 7.0f;
  stax_convert_elements(STAX_DTYPE_INT32, many, STAX_DTYPE_FLOAT32, &untouched, 0);
  stax_convert_elements(STAX_DTYPE_INVALID, many, STAX_DTYPE_FLOAT32, &untouched, 1);
  CHECK(untouched == 7.0f);

  /* Strided form: every other source element, written backwards. */
  int16_t strided_src[] = {1, -1, 2, -1, 3, -1};
  float strided_dst[3] = {0};
  stax_convert_strided(STAX_DTYPE_INT16, strided_src, 4, STAX_DTYPE_FLOAT32, strided_dst + 2, -4,
                       3);
  CHECK(strided_dst[0] == 3.0f && strided_dst[1] == 2.0f && strided_dst[2] == 1.0f);
  int16_t broadcast_src = 9;
  int16_t broadcast_dst[4] = {0};
  stax_convert_strided(STAX_DTYPE_INT16, &broadcast_src, 0, STAX_DTYPE_INT16, broadcast_dst, 2, 4);
  CHECK(broadcast_dst[0] == 9 && broadcast_dst[3] == 9);
}

STAX_TEST_MAIN(STAX_TEST(test_dtype_tables), STAX_TEST(test_dtype_invalid_and_aliases),
               STAX_TEST(test_f16_exhaustive_round_trip),
               STAX_TEST(test_bf16_exhaustive_round_trip),
               STAX_TEST(test_f16_rounds_to_nearest_even), STAX_TEST(test_bf16_rounding),
               STAX_TEST(test_f64_narrowing_rounds_once), STAX_TEST(test_convert_all_pairs),
               STAX_TEST(test_convert_documented_edge_cases))
