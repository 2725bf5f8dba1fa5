/* float16 and bfloat16 <-> float32 conversions in straight-line integer IR, bit for bit those of
 * src/runtime/half.c (round to nearest even, subnormals kept, Inf stays Inf, NaN keeps its
 * sign and what fits of its payload, a vanishing payload becomes the quiet bit), scalar or
 * vector. LLVM's own fpext/fptrunc on `half`/`bfloat` would need F16C or AVX512-BF16, or
 * else call compiler-rt helpers (__extendhfsf2, __truncsfbf2...) that a process need not
 * have; VCVTNEPS2BF16 also flushes subnormals. Integer IR vectorizes on every x86 level and
 * gives the interpreter's bits everywhere. */
#include "jit/llvm_internal.h"

#if STAX_HAVE_LLVM

typedef struct {
  stax_llvm_emitter_t* em;
  LLVMBuilderRef b;
  LLVMTypeRef i32, i16, f32; /* at the value's lane count */
} half_ctx_t;

static half_ctx_t half_ctx(stax_llvm_emitter_t* em, int32_t lanes) {
  half_ctx_t h = {em, em->builder, stax_llvm_vector_type(em->i32, lanes),
                  stax_llvm_vector_type(em->i16, lanes), stax_llvm_vector_type(em->f32, lanes)};
  return h;
}

static LLVMValueRef u32(half_ctx_t* h, uint32_t value) {
  return stax_llvm_const_int(h->em, h->i32, (int64_t)value);
}

static LLVMValueRef and32(half_ctx_t* h, LLVMValueRef x, uint32_t mask) {
  return LLVMBuildAnd(h->b, x, u32(h, mask), "");
}

static LLVMValueRef shr32(half_ctx_t* h, LLVMValueRef x, uint32_t bits) {
  return LLVMBuildLShr(h->b, x, u32(h, bits), "");
}

static LLVMValueRef shl32(half_ctx_t* h, LLVMValueRef x, uint32_t bits) {
  return LLVMBuildShl(h->b, x, u32(h, bits), "");
}

static LLVMValueRef cmp32(half_ctx_t* h, LLVMIntPredicate predicate, LLVMValueRef x,
                          uint32_t value) {
  return LLVMBuildICmp(h->b, predicate, x, u32(h, value), "");
}

/* The 16 bits of `x` (half or bfloat, scalar or vector) zero-extended to i32 lanes. */
static LLVMValueRef bits16(half_ctx_t* h, LLVMValueRef x) {
  return LLVMBuildZExt(h->b, LLVMBuildBitCast(h->b, x, h->i16, ""), h->i32, "");
}

static LLVMValueRef from_bits16(half_ctx_t* h, LLVMValueRef bits, LLVMTypeRef scalar_type,
                                int32_t lanes) {
  LLVMValueRef narrow = LLVMBuildTrunc(h->b, bits, h->i16, "");
  return LLVMBuildBitCast(h->b, narrow, stax_llvm_vector_type(scalar_type, lanes), "");
}

LLVMValueRef stax_llvm_half_to_f32(stax_llvm_emitter_t* em, LLVMValueRef x, bool bfloat) {
  int32_t lanes = stax_llvm_lanes(x);
  half_ctx_t h = half_ctx(em, lanes);
  LLVMValueRef bits = bits16(&h, x);
  if (bfloat) return LLVMBuildBitCast(h.b, shl32(&h, bits, 16), h.f32, "");
  LLVMValueRef sign = shl32(&h, and32(&h, bits, 0x8000u), 16);
  LLVMValueRef exponent = and32(&h, shr32(&h, bits, 10), 0x1fu);
  LLVMValueRef mantissa = and32(&h, bits, 0x3ffu);
  /* Normal: rebias (127 - 15); Inf/NaN: all-ones exponent with the mantissa kept. */
  LLVMValueRef normal = LLVMBuildOr(
      h.b, shl32(&h, LLVMBuildAdd(h.b, exponent, u32(&h, 112u), ""), 23), shl32(&h, mantissa, 13),
      "");
  LLVMValueRef special = LLVMBuildOr(h.b, u32(&h, 0x7f800000u), shl32(&h, mantissa, 13), "");
  LLVMValueRef magnitude =
      LLVMBuildSelect(h.b, cmp32(&h, LLVMIntEQ, exponent, 0x1fu), special, normal, "");
  /* Zero and subnormals: mantissa * 2^-24 exactly (every half subnormal is a normal float). */
  LLVMValueRef tiny = LLVMBuildFMul(h.b, LLVMBuildUIToFP(h.b, mantissa, h.f32, ""),
                                    stax_llvm_const_float(em, h.f32, 0x1p-24), "");
  magnitude = LLVMBuildSelect(h.b, cmp32(&h, LLVMIntEQ, exponent, 0),
                              LLVMBuildBitCast(h.b, tiny, h.i32, ""), magnitude, "");
  return LLVMBuildBitCast(h.b, LLVMBuildOr(h.b, sign, magnitude, ""), h.f32, "");
}

LLVMValueRef stax_llvm_f32_to_half(stax_llvm_emitter_t* em, LLVMValueRef x, bool bfloat) {
  int32_t lanes = stax_llvm_lanes(x);
  half_ctx_t h = half_ctx(em, lanes);
  LLVMTypeRef scalar = bfloat ? em->bf16 : em->f16;
  LLVMValueRef bits = LLVMBuildBitCast(h.b, x, h.i32, "");
  LLVMValueRef magnitude = and32(&h, bits, 0x7fffffffu);
  LLVMValueRef nan = cmp32(&h, LLVMIntUGT, magnitude, 0x7f800000u);
  if (bfloat) {
    /* NaN: truncated, with the quiet bit when the kept payload would be empty. */
    LLVMValueRef truncated = shr32(&h, bits, 16);
    LLVMValueRef quiet = LLVMBuildSelect(h.b, cmp32(&h, LLVMIntEQ, and32(&h, truncated, 0x7fu), 0),
                                         LLVMBuildOr(h.b, truncated, u32(&h, 0x40u), ""),
                                         truncated, "");
    /* The top half of the float, rounded by one add (a carry lands exactly on Inf). */
    LLVMValueRef rounded = LLVMBuildAdd(
        h.b, LLVMBuildAdd(h.b, bits, u32(&h, 0x7fffu), ""), and32(&h, shr32(&h, bits, 16), 1u), "");
    LLVMValueRef result = LLVMBuildSelect(h.b, nan, quiet, shr32(&h, rounded, 16), "");
    return from_bits16(&h, result, scalar, lanes);
  }
  LLVMValueRef sign = and32(&h, shr32(&h, bits, 16), 0x8000u);
  LLVMValueRef payload = and32(&h, shr32(&h, magnitude, 13), 0x3ffu);
  LLVMValueRef nan_bits = LLVMBuildOr(
      h.b, u32(&h, 0x7c00u),
      LLVMBuildSelect(h.b, cmp32(&h, LLVMIntEQ, payload, 0), u32(&h, 0x200u), payload, ""), "");
  /* Normal halves: rebias and round the 13 dropped bits (a carry bumps the exponent). */
  LLVMValueRef rounded = LLVMBuildAdd(h.b, LLVMBuildAdd(h.b, magnitude, u32(&h, 0xfffu), ""),
                                      and32(&h, shr32(&h, magnitude, 13), 1u), "");
  LLVMValueRef normal = shr32(&h, LLVMBuildSub(h.b, rounded, u32(&h, 112u << 23), ""), 13);
  /* Subnormal halves (and everything that rounds to zero): |x| * 2^24 in units of the
   * smallest subnormal, rounded to nearest even by adding and removing 2^23 (exact for
   * values below 2^23 in the default rounding mode); 1024 lands on the smallest normal. */
  LLVMValueRef scaled = LLVMBuildFMul(h.b, LLVMBuildBitCast(h.b, magnitude, h.f32, ""),
                                      stax_llvm_const_float(em, h.f32, 0x1p24), "");
  LLVMValueRef magic = stax_llvm_const_float(em, h.f32, 0x1p23);
  LLVMValueRef whole = LLVMBuildFSub(h.b, LLVMBuildFAdd(h.b, scaled, magic, ""), magic, "");
  LLVMValueRef subnormal = LLVMBuildFPToUI(h.b, whole, h.i32, "");
  LLVMValueRef result = LLVMBuildSelect(h.b, cmp32(&h, LLVMIntUGE, magnitude, 0x38800000u), normal,
                                        subnormal, "");
  /* 65520 = 65504 + half an ulp ties to the odd mantissa 0x3ff, so it rounds up to Inf. */
  result = LLVMBuildSelect(h.b, cmp32(&h, LLVMIntUGE, magnitude, 0x477ff000u), u32(&h, 0x7c00u),
                           result, "");
  result = LLVMBuildSelect(h.b, nan, nan_bits, result, "");
  return from_bits16(&h, LLVMBuildOr(h.b, sign, result, ""), scalar, lanes);
}

LLVMValueRef stax_llvm_round_to_half(stax_llvm_emitter_t* em, LLVMValueRef x, bool bfloat) {
  int32_t lanes = stax_llvm_lanes(x);
  half_ctx_t h = half_ctx(em, lanes);
  LLVMValueRef bits = LLVMBuildBitCast(h.b, x, h.i32, "");
  LLVMValueRef magnitude = and32(&h, bits, 0x7fffffffu);
  LLVMValueRef nan = cmp32(&h, LLVMIntUGT, magnitude, 0x7f800000u);
  if (bfloat) {
    /* NaN: the kept payload, or the quiet bit when it would be empty; else rounded. */
    LLVMValueRef kept = and32(&h, bits, 0xffff0000u);
    LLVMValueRef quiet = LLVMBuildSelect(h.b, cmp32(&h, LLVMIntEQ, and32(&h, bits, 0x7f0000u), 0),
                                         LLVMBuildOr(h.b, kept, u32(&h, 0x400000u), ""), kept, "");
    LLVMValueRef rounded = LLVMBuildAdd(
        h.b, LLVMBuildAdd(h.b, bits, u32(&h, 0x7fffu), ""), and32(&h, shr32(&h, bits, 16), 1u), "");
    LLVMValueRef result = LLVMBuildSelect(h.b, nan, quiet, and32(&h, rounded, 0xffff0000u), "");
    return LLVMBuildBitCast(h.b, result, h.f32, "");
  }
  LLVMValueRef sign = and32(&h, bits, 0x80000000u);
  /* NaN: the 10 payload bits kept (the quiet bit when none are left), exponent all ones. */
  LLVMValueRef kept = and32(&h, bits, 0xffffe000u);
  LLVMValueRef nan_bits = LLVMBuildSelect(
      h.b, cmp32(&h, LLVMIntEQ, and32(&h, bits, 0x7fe000u), 0),
      LLVMBuildOr(h.b, kept, u32(&h, 0x400000u), ""), kept, "");
  /* Normal: round the 13 bits float16 drops, in place. */
  LLVMValueRef rounded = LLVMBuildAdd(h.b, LLVMBuildAdd(h.b, magnitude, u32(&h, 0xfffu), ""),
                                      and32(&h, shr32(&h, magnitude, 13), 1u), "");
  LLVMValueRef normal = and32(&h, rounded, 0xffffe000u);
  /* Subnormal (and zero): whole units of 2^-24, rounded to even, scaled back (exact). */
  LLVMValueRef scaled = LLVMBuildFMul(h.b, LLVMBuildBitCast(h.b, magnitude, h.f32, ""),
                                      stax_llvm_const_float(em, h.f32, 0x1p24), "");
  LLVMValueRef magic = stax_llvm_const_float(em, h.f32, 0x1p23);
  LLVMValueRef whole = LLVMBuildFSub(h.b, LLVMBuildFAdd(h.b, scaled, magic, ""), magic, "");
  LLVMValueRef tiny = LLVMBuildBitCast(
      h.b, LLVMBuildFMul(h.b, whole, stax_llvm_const_float(em, h.f32, 0x1p-24), ""), h.i32, "");
  LLVMValueRef result =
      LLVMBuildSelect(h.b, cmp32(&h, LLVMIntUGE, magnitude, 0x38800000u), normal, tiny, "");
  result = LLVMBuildSelect(h.b, cmp32(&h, LLVMIntUGE, magnitude, 0x477ff000u),
                           u32(&h, 0x7f800000u), result, "");
  result = LLVMBuildOr(h.b, sign, result, "");
  result = LLVMBuildSelect(h.b, nan, nan_bits, result, "");
  return LLVMBuildBitCast(h.b, result, h.f32, "");
}

#endif /* STAX_HAVE_LLVM */
