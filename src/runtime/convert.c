/* Element conversion between every pair of dtypes (ONNX Cast semantics).
 *
 * Each element is loaded into one of three wide forms — double for floats (exact for every
 * float dtype), int64 for signed integers, uint64 for unsigned integers and bool — and stored
 * from it, so 13 loaders and 13 x 3 storers cover all 169 pairs. Work goes through a small
 * stack batch so the loops stay tight.
 *
 * The rules, including the cases ONNX leaves undefined:
 *   - float -> integer truncates toward zero; NaN becomes 0; values beyond the target's range
 *     saturate to its minimum or maximum (deterministic everywhere, and what LLVM's
 *     fptosi.sat / fptoui.sat give the JIT). Negative values to unsigned saturate to 0.
 *   - integer -> integer wraps modulo 2^bits (two's complement), as C, numpy and ONNX
 *     Runtime do.
 *   - anything -> float rounds to nearest even (Inf on overflow); float16/bfloat16 targets
 *     are rounded once, directly from the exact source value.
 *   - anything -> bool is x != 0 (NaN is true); bool -> number is 0 or 1 (any non-zero byte
 *     reads as true).
 *
 * The common float pairs (float32 <-> float64, float16/bfloat16 <-> float32) skip the wide
 * batch and run as direct typed loops; they give bit-identical results to the general path
 * (see stax_convert_float_fast), and same-dtype conversion is a plain byte copy. */
#include <math.h>
#include <string.h>

#include "runtime/tensor_internal.h"

typedef union stax_wide_t {
  double f;
  int64_t i;
  uint64_t u;
} stax_wide_t;

typedef enum stax_wide_kind_e {
  STAX_WIDE_FLOAT,
  STAX_WIDE_SIGNED,
  STAX_WIDE_UNSIGNED
} stax_wide_kind_t;

#define STAX_CONVERT_BATCH 256

/* ---- float decoding and encoding -------------------------------------------------------- */

static double stax_decode_FLOAT32(float v) { return v; }
static double stax_decode_FLOAT64(double v) { return v; }
static double stax_decode_FLOAT16(uint16_t v) { return stax_f16_to_f32(v); }
static double stax_decode_BFLOAT16(uint16_t v) { return stax_bf16_to_f32(v); }

/* Rounds an integer magnitude to a float format with `mantissa_bits` stored bits and the given
 * largest exponent, nearest even; used for 16-bit targets where converting through float or
 * double could round twice. Returns the bit pattern without sign. */
static uint16_t stax_round_integer_to_small_float(uint64_t magnitude, int mantissa_bits,
                                                  int exponent_bias, int max_exponent) {
  if (magnitude == 0) return 0;
  int top = 63 - __builtin_clzll(magnitude); /* value = 1.xxx * 2^top */
  uint64_t mantissa;
  if (top <= mantissa_bits) {
    mantissa = magnitude << (mantissa_bits - top);
  } else {
    int drop = top - mantissa_bits;
    mantissa = magnitude >> drop;
    uint64_t remainder = magnitude & ((UINT64_C(1) << drop) - 1);
    uint64_t halfway = UINT64_C(1) << (drop - 1);
    if (remainder > halfway || (remainder == halfway && (mantissa & 1))) mantissa++;
    if (mantissa >> (mantissa_bits + 1)) { /* carried into a new leading bit */
      mantissa >>= 1;
      top++;
    }
  }
  if (top > max_exponent) return (uint16_t)(((1u << (15 - mantissa_bits)) - 1) << mantissa_bits);
  uint64_t stored = mantissa & ((UINT64_C(1) << mantissa_bits) - 1);
  return (uint16_t)(((uint64_t)(top + exponent_bias) << mantissa_bits) | stored);
}

static uint16_t stax_int_to_f16(bool negative, uint64_t magnitude) {
  return (uint16_t)((negative ? 0x8000u : 0u) |
                    stax_round_integer_to_small_float(magnitude, 10, 15, 15));
}
static uint16_t stax_int_to_bf16(bool negative, uint64_t magnitude) {
  return (uint16_t)((negative ? 0x8000u : 0u) |
                    stax_round_integer_to_small_float(magnitude, 7, 127, 127));
}
/* Magnitude of an int64 without overflowing on INT64_MIN. */
static uint64_t stax_abs_i64(int64_t v) { return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v; }

static float stax_encode_FLOAT32_from_f(double v) { return (float)v; }
static float stax_encode_FLOAT32_from_i(int64_t v) { return (float)v; }
static float stax_encode_FLOAT32_from_u(uint64_t v) { return (float)v; }
static double stax_encode_FLOAT64_from_f(double v) { return v; }
static double stax_encode_FLOAT64_from_i(int64_t v) { return (double)v; }
static double stax_encode_FLOAT64_from_u(uint64_t v) { return (double)v; }
static uint16_t stax_encode_FLOAT16_from_f(double v) { return stax_f64_to_f16(v); }
static uint16_t stax_encode_FLOAT16_from_i(int64_t v) {
  return stax_int_to_f16(v < 0, stax_abs_i64(v));
}
static uint16_t stax_encode_FLOAT16_from_u(uint64_t v) { return stax_int_to_f16(false, v); }
static uint16_t stax_encode_BFLOAT16_from_f(double v) { return stax_f64_to_bf16(v); }
static uint16_t stax_encode_BFLOAT16_from_i(int64_t v) {
  return stax_int_to_bf16(v < 0, stax_abs_i64(v));
}
static uint16_t stax_encode_BFLOAT16_from_u(uint64_t v) { return stax_int_to_bf16(false, v); }

/* ---- saturating float -> integer -------------------------------------------------------- */

static int64_t stax_saturate_to_signed(double v, int bits) {
  if (v != v) return 0;
  double limit = ldexp(1.0, bits - 1); /* 2^(bits-1), exact */
  int64_t max = (int64_t)((UINT64_C(1) << (bits - 1)) - 1);
  if (v >= limit) return max;
  if (v <= -limit) return -max - 1;
  return (int64_t)v;
}

static uint64_t stax_saturate_to_unsigned(double v, int bits) {
  if (v != v || v <= 0) return 0;
  double limit = ldexp(1.0, bits);
  if (v >= limit) return bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
  return (uint64_t)v;
}

/* ---- loaders and storers, generated from dtypes.def ------------------------------------- */

#define STAX_LOAD_F(name, ctype)      \
  do {                                \
    ctype v;                          \
    memcpy(&v, p, sizeof(v));         \
    out[n].f = stax_decode_##name(v); \
  } while (0)
#define STAX_LOAD_I(name, ctype) \
  do {                           \
    ctype v;                     \
    memcpy(&v, p, sizeof(v));    \
    out[n].i = (int64_t)v;       \
  } while (0)
#define STAX_LOAD_U(name, ctype) \
  do {                           \
    ctype v;                     \
    memcpy(&v, p, sizeof(v));    \
    out[n].u = (uint64_t)v;      \
  } while (0)
#define STAX_LOAD_B(name, ctype) \
  do {                           \
    ctype v;                     \
    memcpy(&v, p, sizeof(v));    \
    out[n].u = v != 0;           \
  } while (0)

#define STAX_DTYPE(name, text, size, kind, onnx, dlpack, ctype)                                  \
  static void stax_load_##name(const char* p, int64_t stride, stax_wide_t* out, int64_t count) { \
    for (int64_t n = 0; n < count; n++, p += stride) STAX_LOAD_##kind(name, ctype);              \
  }
#include "stax/dtypes.def"
#undef STAX_DTYPE

/* Storers per target kind; `from` is f, i or u (the wide form). */
#define STAX_STORE_F_f(name, ctype, w) stax_encode_##name##_from_f((w).f)
#define STAX_STORE_F_i(name, ctype, w) stax_encode_##name##_from_i((w).i)
#define STAX_STORE_F_u(name, ctype, w) stax_encode_##name##_from_u((w).u)
#define STAX_STORE_I_f(name, ctype, w) \
  (ctype) stax_saturate_to_signed((w).f, (int)sizeof(ctype) * 8)
#define STAX_STORE_I_i(name, ctype, w) (ctype)(w).i
#define STAX_STORE_I_u(name, ctype, w) (ctype)(w).u
#define STAX_STORE_U_f(name, ctype, w) \
  (ctype) stax_saturate_to_unsigned((w).f, (int)sizeof(ctype) * 8)
#define STAX_STORE_U_i(name, ctype, w) (ctype)(uint64_t)(w).i
#define STAX_STORE_U_u(name, ctype, w) (ctype)(w).u
#define STAX_STORE_B_f(name, ctype, w) (ctype)((w).f != 0)
#define STAX_STORE_B_i(name, ctype, w) (ctype)((w).i != 0)
#define STAX_STORE_B_u(name, ctype, w) (ctype)((w).u != 0)

#define STAX_DEFINE_STORE(name, kind, ctype, from)                                       \
  static void stax_store_##name##_##from(const stax_wide_t* in, char* p, int64_t stride, \
                                         int64_t count) {                                \
    for (int64_t n = 0; n < count; n++, p += stride) {                                   \
      ctype v = STAX_STORE_##kind##_##from(name, ctype, in[n]);                          \
      memcpy(p, &v, sizeof(v));                                                          \
    }                                                                                    \
  }
#define STAX_DTYPE(name, text, size, kind, onnx, dlpack, ctype) \
  STAX_DEFINE_STORE(name, kind, ctype, f)                       \
  STAX_DEFINE_STORE(name, kind, ctype, i)                       \
  STAX_DEFINE_STORE(name, kind, ctype, u)
#include "stax/dtypes.def"
#undef STAX_DTYPE

typedef void (*stax_load_fn)(const char*, int64_t, stax_wide_t*, int64_t);
typedef void (*stax_store_fn)(const stax_wide_t*, char*, int64_t, int64_t);

#define STAX_WIDE_OF_F STAX_WIDE_FLOAT
#define STAX_WIDE_OF_I STAX_WIDE_SIGNED
#define STAX_WIDE_OF_U STAX_WIDE_UNSIGNED
#define STAX_WIDE_OF_B STAX_WIDE_UNSIGNED

static const struct {
  stax_load_fn load;
  stax_wide_kind_t wide;
  stax_store_fn store[3]; /* indexed by the source's wide kind */
} stax_converters_[STAX_DTYPE_COUNT] = {
#define STAX_DTYPE(name, text, size, kind, onnx, dlpack, ctype) \
  [STAX_DTYPE_##name] = {stax_load_##name,                      \
                         STAX_WIDE_OF_##kind,                   \
                         {stax_store_##name##_f, stax_store_##name##_i, stax_store_##name##_u}},
#include "stax/dtypes.def"
#undef STAX_DTYPE
};

/* Same dtype: a byte copy (bool keeps its bytes as they are, like a memcpy would). Contiguous
 * data is one memmove rather than memcpy because converting in place (src == dst) is allowed;
 * for distinct buffers it is as fast, and in place there is nothing to do at all. */
static void stax_copy_strided(size_t size, const char* src, int64_t src_stride, char* dst,
                              int64_t dst_stride, int64_t count) {
  if (src_stride == (int64_t)size && dst_stride == (int64_t)size) {
    if (src != dst) memmove(dst, src, (size_t)count * size);
    return;
  }
  /* A constant size per loop lets each memcpy become a single load and store. */
#define STAX_COPY_LOOP(bytes)                                                 \
  for (int64_t n = 0; n < count; n++, src += src_stride, dst += dst_stride) { \
    memcpy(dst, src, bytes);                                                  \
  }
  switch (size) {
    case 1:
      STAX_COPY_LOOP(1);
      break;
    case 2:
      STAX_COPY_LOOP(2);
      break;
    case 4:
      STAX_COPY_LOOP(4);
      break;
    case 8:
      STAX_COPY_LOOP(8);
      break;
    default:
      STAX_COPY_LOOP(size);
      break;
  }
#undef STAX_COPY_LOOP
}

/* ---- direct loops for the common float pairs -------------------------------------------- */

/* The general path widens every float to double and narrows it back. For a NaN that round trip
 * is not the identity: the hardware conversion quiets a signaling NaN (keeping its payload).
 * The fast loops reproduce exactly that, so a NaN comes out with the same bits either way;
 * volatile keeps the compiler from folding the round trip away (it assumes no signaling NaNs). */
static float stax_quiet_as_widened(float v) {
  volatile double wide = v;
  return (float)wide;
}

/* float -> float16 / bfloat16 through double is the same as directly from float for every
 * number (widening is exact, so the round-to-odd step in stax_f64_to_f16 changes nothing);
 * only a NaN takes the general path's route, for its quieting. */
static uint16_t stax_f32_to_f16_as_general(float v) {
  return v == v ? stax_f32_to_f16(v) : stax_f64_to_f16((double)v);
}
static uint16_t stax_f32_to_bf16_as_general(float v) {
  return v == v ? stax_f32_to_bf16(v) : stax_f64_to_bf16((double)v);
}
static float stax_f16_to_f32_as_general(uint16_t v) {
  float f = stax_f16_to_f32(v);
  return f == f ? f : stax_quiet_as_widened(f);
}
static float stax_bf16_to_f32_as_general(uint16_t v) {
  float f = stax_bf16_to_f32(v);
  return f == f ? f : stax_quiet_as_widened(f);
}

/* One element at a time, forward, like the batches of the general path when dst narrows in
 * place over src. The contiguous loop indexes with constant strides so the compiler can
 * vectorize it; memcpy keeps unaligned and strided accesses well defined. */
#define STAX_FAST_LOOP(src_type, dst_type, convert)                                 \
  do {                                                                              \
    const int64_t src_size = (int64_t)sizeof(src_type);                             \
    const int64_t dst_size = (int64_t)sizeof(dst_type);                             \
    if (src_stride == src_size && dst_stride == dst_size) {                         \
      for (int64_t n = 0; n < count; n++) {                                         \
        src_type v;                                                                 \
        memcpy(&v, from + n * src_size, sizeof(v));                                 \
        dst_type r = convert(v);                                                    \
        memcpy(to + n * dst_size, &r, sizeof(r));                                   \
      }                                                                             \
    } else {                                                                        \
      for (int64_t n = 0; n < count; n++, from += src_stride, to += dst_stride) {   \
        src_type v;                                                                 \
        memcpy(&v, from, sizeof(v));                                                \
        dst_type r = convert(v);                                                    \
        memcpy(to, &r, sizeof(r));                                                  \
      }                                                                             \
    }                                                                               \
    return true;                                                                    \
  } while (0)

#define STAX_WIDEN_F32(v) ((double)(v))
#define STAX_NARROW_F64(v) ((float)(v))

/* Returns false when the pair has no direct loop. */
static bool stax_convert_float_fast(stax_dtype_t src_dtype, const char* from, int64_t src_stride,
                                    stax_dtype_t dst_dtype, char* to, int64_t dst_stride,
                                    int64_t count) {
  if (src_dtype == STAX_DTYPE_FLOAT32) {
    switch (dst_dtype) {
      case STAX_DTYPE_FLOAT64: STAX_FAST_LOOP(float, double, STAX_WIDEN_F32);
      case STAX_DTYPE_FLOAT16: STAX_FAST_LOOP(float, uint16_t, stax_f32_to_f16_as_general);
      case STAX_DTYPE_BFLOAT16: STAX_FAST_LOOP(float, uint16_t, stax_f32_to_bf16_as_general);
      default: return false;
    }
  }
  if (dst_dtype != STAX_DTYPE_FLOAT32) return false;
  switch (src_dtype) {
    case STAX_DTYPE_FLOAT64: STAX_FAST_LOOP(double, float, STAX_NARROW_F64);
    case STAX_DTYPE_FLOAT16: STAX_FAST_LOOP(uint16_t, float, stax_f16_to_f32_as_general);
    case STAX_DTYPE_BFLOAT16: STAX_FAST_LOOP(uint16_t, float, stax_bf16_to_f32_as_general);
    default: return false;
  }
}

#undef STAX_FAST_LOOP
#undef STAX_WIDEN_F32
#undef STAX_NARROW_F64

void stax_convert_strided(stax_dtype_t src_dtype, const void* src, int64_t src_stride_bytes,
                          stax_dtype_t dst_dtype, void* dst, int64_t dst_stride_bytes,
                          int64_t count) {
  if (count <= 0 || !stax_dtype_is_valid(src_dtype) || !stax_dtype_is_valid(dst_dtype)) return;
  const char* from = (const char*)src;
  char* to = (char*)dst;
  if (src_dtype == dst_dtype) {
    stax_copy_strided(stax_dtype_size(src_dtype), from, src_stride_bytes, to, dst_stride_bytes,
                      count);
    return;
  }
  if (stax_convert_float_fast(src_dtype, from, src_stride_bytes, dst_dtype, to, dst_stride_bytes,
                              count)) {
    return;
  }
  stax_load_fn load = stax_converters_[src_dtype].load;
  stax_store_fn store = stax_converters_[dst_dtype].store[stax_converters_[src_dtype].wide];
  stax_wide_t batch[STAX_CONVERT_BATCH];
  while (count > 0) {
    int64_t n = count < STAX_CONVERT_BATCH ? count : STAX_CONVERT_BATCH;
    load(from, src_stride_bytes, batch, n);
    store(batch, to, dst_stride_bytes, n);
    from += n * src_stride_bytes;
    to += n * dst_stride_bytes;
    count -= n;
  }
}

void stax_convert_elements(stax_dtype_t src_dtype, const void* src, stax_dtype_t dst_dtype,
                           void* dst, size_t count) {
  if (count > (size_t)INT64_MAX) return;
  stax_convert_strided(src_dtype, src, (int64_t)stax_dtype_size(src_dtype), dst_dtype, dst,
                       (int64_t)stax_dtype_size(dst_dtype), (int64_t)count);
}
