/* The LLVM backend's value helpers (constants, splats, intrinsic and libm calls) and its
 * vectorizable float32 math: exp, expm1, log, log1p, tanh and erf written as straight-line
 * IR over any number of lanes, because LLVM's llvm.exp & co. lower to one libm call per lane.
 *
 * Methods (all from the textbook; accuracy is stated in llvm_internal.h and tested):
 *   exp:   n = round(x / ln2), r = x - n*ln2 (two-part ln2), degree-7 Taylor polynomial on
 *          |r| <= ln2/2, scaled by two powers of two whose product is 2^n.
 *   expm1: Taylor series (degree 8) for |x| < 0.5, exp(x) - 1 elsewhere.
 *   log:   x = m * 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = 2*atanh(s), s = (m-1)/(m+1),
 *          odd series to s^9; denormals are scaled by 2^23 first.
 *   log1p: log(u) * x / (u - 1) with u = 1 + x (exact ratio correction; x when u == 1).
 *   tanh:  expm1(2|x|) / (expm1(2|x|) + 2), 1 beyond |x| > 9, sign restored.
 *   erf:   Maclaurin series (12 terms) for |x| < 1; Abramowitz & Stegun 7.1.26 elsewhere.
 * Special values are patched with selects at the end (NaN passes through). */
#if STAX_HAVE_LLVM

#include <math.h>
#include <string.h>

#include "jit/llvm_internal.h"

void stax_llvm_emitter_init(stax_llvm_emitter_t* em, LLVMContextRef context, LLVMModuleRef module,
                            LLVMBuilderRef builder) {
  em->context = context;
  em->module = module;
  em->builder = builder;
  em->i1 = LLVMInt1TypeInContext(context);
  em->i8 = LLVMInt8TypeInContext(context);
  em->i16 = LLVMInt16TypeInContext(context);
  em->i32 = LLVMInt32TypeInContext(context);
  em->i64 = LLVMInt64TypeInContext(context);
  em->f16 = LLVMHalfTypeInContext(context);
  em->bf16 = LLVMBFloatTypeInContext(context);
  em->f32 = LLVMFloatTypeInContext(context);
  em->f64 = LLVMDoubleTypeInContext(context);
  em->ptr = LLVMPointerTypeInContext(context, 0);
  em->void_type = LLVMVoidTypeInContext(context);
  em->avx512 = false;
}

int32_t stax_llvm_lanes(LLVMValueRef value) {
  LLVMTypeRef type = LLVMTypeOf(value);
  return LLVMGetTypeKind(type) == LLVMVectorTypeKind ? (int32_t)LLVMGetVectorSize(type) : 1;
}

LLVMTypeRef stax_llvm_vector_type(LLVMTypeRef scalar_type, int32_t lanes) {
  return lanes > 1 ? LLVMVectorType(scalar_type, (unsigned)lanes) : scalar_type;
}

static LLVMValueRef splat_constant(LLVMTypeRef type, LLVMValueRef scalar) {
  if (LLVMGetTypeKind(type) != LLVMVectorTypeKind) return scalar;
  unsigned lanes = LLVMGetVectorSize(type);
  LLVMValueRef elements[STAX_KIR_MAX_VECTOR_WIDTH];
  for (unsigned i = 0; i < lanes && i < STAX_KIR_MAX_VECTOR_WIDTH; i++) elements[i] = scalar;
  return LLVMConstVector(elements, lanes);
}

static LLVMTypeRef scalar_of(LLVMTypeRef type) {
  return LLVMGetTypeKind(type) == LLVMVectorTypeKind ? LLVMGetElementType(type) : type;
}

LLVMValueRef stax_llvm_const_float(stax_llvm_emitter_t* em, LLVMTypeRef type, double value) {
  (void)em;
  return splat_constant(type, LLVMConstReal(scalar_of(type), value));
}

LLVMValueRef stax_llvm_const_int(stax_llvm_emitter_t* em, LLVMTypeRef type, int64_t value) {
  (void)em;
  return splat_constant(type, LLVMConstInt(scalar_of(type), (unsigned long long)value, 1));
}

LLVMValueRef stax_llvm_splat(stax_llvm_emitter_t* em, LLVMValueRef value, int32_t lanes) {
  if (lanes <= 1 || stax_llvm_lanes(value) > 1) return value;
  LLVMTypeRef vector_type = LLVMVectorType(LLVMTypeOf(value), (unsigned)lanes);
  LLVMValueRef zero = LLVMConstInt(em->i32, 0, 0);
  LLVMValueRef one =
      LLVMBuildInsertElement(em->builder, LLVMGetPoison(vector_type), value, zero, "");
  LLVMValueRef mask = LLVMConstNull(LLVMVectorType(em->i32, (unsigned)lanes));
  return LLVMBuildShuffleVector(em->builder, one, LLVMGetPoison(vector_type), mask, "splat");
}

LLVMValueRef stax_llvm_intrinsic_overloaded(stax_llvm_emitter_t* em, const char* name,
                                            LLVMTypeRef* overloads, int32_t overload_count,
                                            LLVMValueRef* args, int32_t count) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef function =
      LLVMGetIntrinsicDeclaration(em->module, id, overloads, (size_t)overload_count);
  LLVMTypeRef function_type =
      LLVMIntrinsicGetType(em->context, id, overloads, (size_t)overload_count);
  return LLVMBuildCall2(em->builder, function_type, function, args, (unsigned)count, "");
}

LLVMValueRef stax_llvm_intrinsic(stax_llvm_emitter_t* em, const char* name, LLVMTypeRef overload,
                                 LLVMValueRef* args, int32_t count) {
  return stax_llvm_intrinsic_overloaded(em, name, &overload, 1, args, count);
}

LLVMValueRef stax_llvm_libm(stax_llvm_emitter_t* em, const char* name, LLVMValueRef a,
                            LLVMValueRef b) {
  LLVMTypeRef scalar = scalar_of(LLVMTypeOf(a));
  unsigned arity = b ? 2 : 1;
  LLVMTypeRef params[2] = {scalar, scalar};
  LLVMTypeRef function_type = LLVMFunctionType(scalar, params, arity, 0);
  LLVMValueRef function = LLVMGetNamedFunction(em->module, name);
  if (!function) {
    function = LLVMAddFunction(em->module, name, function_type);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(function, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(em->context, nounwind, 0));
  }
  int32_t lanes = stax_llvm_lanes(a);
  if (lanes == 1) {
    LLVMValueRef args[2] = {a, b};
    return LLVMBuildCall2(em->builder, function_type, function, args, arity, "");
  }
  b = b ? stax_llvm_splat(em, b, lanes) : NULL;
  LLVMValueRef result = LLVMGetPoison(LLVMTypeOf(a));
  for (int32_t lane = 0; lane < lanes; lane++) {
    LLVMValueRef index = LLVMConstInt(em->i32, (unsigned long long)lane, 0);
    LLVMValueRef args[2] = {LLVMBuildExtractElement(em->builder, a, index, ""),
                            b ? LLVMBuildExtractElement(em->builder, b, index, "") : NULL};
    LLVMValueRef value = LLVMBuildCall2(em->builder, function_type, function, args, arity, "");
    result = LLVMBuildInsertElement(em->builder, result, value, index, "");
  }
  return result;
}

/* ---- small float helpers (all lane-generic) ---------------------------------------------- */

static LLVMValueRef cf(stax_llvm_emitter_t* em, LLVMValueRef like, double value) {
  return stax_llvm_const_float(em, LLVMTypeOf(like), value);
}

static LLVMTypeRef int_type_like(stax_llvm_emitter_t* em, LLVMValueRef like) {
  return stax_llvm_vector_type(em->i32, stax_llvm_lanes(like));
}

static LLVMValueRef ci(stax_llvm_emitter_t* em, LLVMValueRef like, int64_t value) {
  return stax_llvm_const_int(em, int_type_like(em, like), value);
}

static LLVMValueRef ir_fadd(stax_llvm_emitter_t* em, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFAdd(em->builder, a, b, "");
}
static LLVMValueRef ir_fsub(stax_llvm_emitter_t* em, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFSub(em->builder, a, b, "");
}
static LLVMValueRef ir_fmul(stax_llvm_emitter_t* em, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFMul(em->builder, a, b, "");
}
static LLVMValueRef ir_fdiv(stax_llvm_emitter_t* em, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFDiv(em->builder, a, b, "");
}
/* a * b + c, fused where the target can. */
static LLVMValueRef ir_fmuladd(stax_llvm_emitter_t* em, LLVMValueRef a, LLVMValueRef b,
                               LLVMValueRef c) {
  LLVMValueRef args[3] = {a, b, c};
  return stax_llvm_intrinsic(em, "llvm.fmuladd", LLVMTypeOf(a), args, 3);
}
static LLVMValueRef unary_intrinsic(stax_llvm_emitter_t* em, const char* name, LLVMValueRef x) {
  return stax_llvm_intrinsic(em, name, LLVMTypeOf(x), &x, 1);
}
static LLVMValueRef binary_intrinsic(stax_llvm_emitter_t* em, const char* name, LLVMValueRef a,
                                     LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b};
  return stax_llvm_intrinsic(em, name, LLVMTypeOf(a), args, 2);
}
static LLVMValueRef ir_fcmp(stax_llvm_emitter_t* em, LLVMRealPredicate predicate, LLVMValueRef a,
                            LLVMValueRef b) {
  return LLVMBuildFCmp(em->builder, predicate, a, b, "");
}
static LLVMValueRef ir_select(stax_llvm_emitter_t* em, LLVMValueRef c, LLVMValueRef a,
                              LLVMValueRef b) {
  return LLVMBuildSelect(em->builder, c, a, b, "");
}
/* c[0] + c[1] x + ... + c[count - 1] x^(count - 1). Short ones by Horner; from five
 * coefficients on by Estrin's scheme (pairs c[i] + c[i+1] x, then pairs of pairs with x^2,
 * x^4, ...): the same operation count plus log2(count) squarings, but a dependency chain of
 * about log2(count) multiply-adds instead of count - 1. The math here runs in epilogues and
 * out-of-line helpers a tile or a vector at a time, where that chain, not the FMA rate, sets
 * the speed (erfc's 10-term fit and exp's 8 terms made a Gelu epilogue cost 40+ cycles per
 * vector). */
static LLVMValueRef ir_polynomial(stax_llvm_emitter_t* em, LLVMValueRef x, const double* c,
                                  int32_t count) {
  if (count < 5) {
    LLVMValueRef result = cf(em, x, c[count - 1]);
    for (int32_t i = count - 2; i >= 0; i--) result = ir_fmuladd(em, result, x, cf(em, x, c[i]));
    return result;
  }
  enum { MAX_TERMS = 16 };
  LLVMValueRef terms[MAX_TERMS / 2 + 1];
  int32_t n = 0;
  for (int32_t i = 0; i < count && i < MAX_TERMS; i += 2)
    terms[n++] = i + 1 < count ? ir_fmuladd(em, cf(em, x, c[i + 1]), x, cf(em, x, c[i]))
                               : cf(em, x, c[i]);
  LLVMValueRef power = ir_fmul(em, x, x);
  while (n > 1) {
    int32_t m = 0;
    for (int32_t i = 0; i < n; i += 2)
      terms[m++] = i + 1 < n ? ir_fmuladd(em, terms[i + 1], power, terms[i]) : terms[i];
    n = m;
    if (n > 1) power = ir_fmul(em, power, power);
  }
  return terms[0];
}
static LLVMValueRef ir_is_nan(stax_llvm_emitter_t* em, LLVMValueRef x) {
  return ir_fcmp(em, LLVMRealUNO, x, x);
}

/* ---- exp / expm1 ------------------------------------------------------------------------- */

LLVMValueRef stax_llvm_exp_f32(stax_llvm_emitter_t* em, LLVMValueRef x) {
  static const double taylor[8] = {1.0,      1.0,       1.0 / 2,   1.0 / 6,
                                   1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040};
  LLVMBuilderRef b = em->builder;
  /* Below -104 even the smallest subnormal rounds to 0; above 88.7228 the result overflows.
   * The clamp keeps n within [-150, 128]. */
  LLVMValueRef clamped = binary_intrinsic(em, "llvm.maxnum", x, cf(em, x, -104.0));
  clamped = binary_intrinsic(em, "llvm.minnum", clamped, cf(em, x, 88.7228));
  LLVMValueRef n = unary_intrinsic(em, "llvm.rint", ir_fmul(em, clamped, cf(em, x, M_LOG2E)));
  /* ln2 in two parts: the high part has few bits, so n * high is exact. */
  LLVMValueRef r = ir_fmuladd(em, n, cf(em, x, -0.693359375), clamped);
  r = ir_fmuladd(em, n, cf(em, x, 2.12194440054690583e-4), r);
  LLVMValueRef p = ir_polynomial(em, r, taylor, 8);
  if (em->avx512 && stax_llvm_lanes(x) == 16) {
    /* vscalefps: p * 2^n, correctly rounded into subnormals and to inf on overflow, in one
     * instruction instead of the integer exponent arithmetic and two multiplies below. */
    LLVMValueRef args[5] = {p, n, p, LLVMConstInt(em->i16, 0xffff, 0),
                            LLVMConstInt(em->i32, 4 /* the current rounding mode */, 0)};
    LLVMValueRef scaled =
        stax_llvm_intrinsic_overloaded(em, "llvm.x86.avx512.mask.scalef.ps.512", NULL, 0, args, 5);
    /* x was clamped to 88.7228, so overflow is set here as below. */
    scaled = ir_select(em, ir_fcmp(em, LLVMRealOGT, x, cf(em, x, 88.7228)), cf(em, x, INFINITY),
                       scaled);
    return ir_select(em, ir_is_nan(em, x), x, scaled);
  }
  /* 2^n as two normal powers of two, 2^(n/2) * 2^(n - n/2), so that neither overflows nor
   * underflows the exponent field and subnormal results round correctly. */
  LLVMValueRef n_int = LLVMBuildFPToSI(b, n, int_type_like(em, x), "");
  LLVMValueRef half = LLVMBuildAShr(b, n_int, ci(em, x, 1), "");
  LLVMValueRef rest = LLVMBuildSub(b, n_int, half, "");
  LLVMValueRef scale_half = LLVMBuildBitCast(
      b, LLVMBuildShl(b, LLVMBuildAdd(b, half, ci(em, x, 127), ""), ci(em, x, 23), ""),
      LLVMTypeOf(x), "");
  LLVMValueRef scale_rest = LLVMBuildBitCast(
      b, LLVMBuildShl(b, LLVMBuildAdd(b, rest, ci(em, x, 127), ""), ci(em, x, 23), ""),
      LLVMTypeOf(x), "");
  LLVMValueRef result = ir_fmul(em, ir_fmul(em, p, scale_half), scale_rest);
  result =
      ir_select(em, ir_fcmp(em, LLVMRealOGT, x, cf(em, x, 88.7228)), cf(em, x, INFINITY), result);
  return ir_select(em, ir_is_nan(em, x), x, result);
}

LLVMValueRef stax_llvm_expm1_f32(stax_llvm_emitter_t* em, LLVMValueRef x) {
  static const double taylor[8] = {1.0,       1.0 / 2,   1.0 / 6,    1.0 / 24,
                                   1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320};
  LLVMValueRef small = ir_fmul(em, x, ir_polynomial(em, x, taylor, 8));
  LLVMValueRef large = ir_fsub(em, stax_llvm_exp_f32(em, x), cf(em, x, 1.0));
  LLVMValueRef magnitude = unary_intrinsic(em, "llvm.fabs", x);
  return ir_select(em, ir_fcmp(em, LLVMRealOLT, magnitude, cf(em, x, 0.5)), small, large);
}

/* ---- log / log1p ------------------------------------------------------------------------- */

LLVMValueRef stax_llvm_log_f32(stax_llvm_emitter_t* em, LLVMValueRef x) {
  /* 2*atanh(s) = 2s * (1 + z/3 + z^2/5 + z^3/7 + z^4/9), z = s^2 */
  static const double series[5] = {1.0, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9};
  LLVMBuilderRef b = em->builder;
  LLVMTypeRef int_type = int_type_like(em, x);
  LLVMValueRef denormal = ir_fcmp(em, LLVMRealOLT, x, cf(em, x, 1.17549435e-38));
  LLVMValueRef scaled = ir_select(em, denormal, ir_fmul(em, x, cf(em, x, 8388608.0)), x);
  LLVMValueRef adjust = ir_select(em, denormal, ci(em, x, -23), ci(em, x, 0));
  LLVMValueRef bits = LLVMBuildBitCast(b, scaled, int_type, "");
  LLVMValueRef exponent =
      LLVMBuildSub(b, LLVMBuildLShr(b, bits, ci(em, x, 23), ""), ci(em, x, 127), "");
  exponent = LLVMBuildAdd(b, exponent, adjust, "");
  LLVMValueRef mantissa_bits =
      LLVMBuildOr(b, LLVMBuildAnd(b, bits, ci(em, x, 0x007fffff), ""), ci(em, x, 0x3f800000), "");
  LLVMValueRef m = LLVMBuildBitCast(b, mantissa_bits, LLVMTypeOf(x), "");
  LLVMValueRef big = ir_fcmp(em, LLVMRealOGT, m, cf(em, x, M_SQRT2));
  m = ir_select(em, big, ir_fmul(em, m, cf(em, x, 0.5)), m);
  exponent = ir_select(em, big, LLVMBuildAdd(b, exponent, ci(em, x, 1), ""), exponent);
  LLVMValueRef f = ir_fsub(em, m, cf(em, x, 1.0));
  LLVMValueRef s = ir_fdiv(em, f, ir_fadd(em, f, cf(em, x, 2.0)));
  LLVMValueRef z = ir_fmul(em, s, s);
  LLVMValueRef log_m = ir_fmul(em, ir_fmul(em, s, cf(em, x, 2.0)), ir_polynomial(em, z, series, 5));
  LLVMValueRef e = LLVMBuildSIToFP(b, exponent, LLVMTypeOf(x), "");
  /* e*ln2 in two parts (the high part times any exponent is exact). */
  LLVMValueRef result = ir_fmuladd(em, e, cf(em, x, -2.12194440054690583e-4), log_m);
  result = ir_fmuladd(em, e, cf(em, x, 0.693359375), result);
  result = ir_select(em, ir_fcmp(em, LLVMRealOEQ, x, cf(em, x, INFINITY)), x, result);
  result = ir_select(em, ir_fcmp(em, LLVMRealOEQ, x, cf(em, x, 0.0)), cf(em, x, -INFINITY), result);
  result = ir_select(em, ir_fcmp(em, LLVMRealOLT, x, cf(em, x, 0.0)), cf(em, x, NAN), result);
  return ir_select(em, ir_is_nan(em, x), x, result);
}

LLVMValueRef stax_llvm_log1p_f32(stax_llvm_emitter_t* em, LLVMValueRef x) {
  LLVMValueRef u = ir_fadd(em, x, cf(em, x, 1.0));
  LLVMValueRef denominator = ir_fsub(em, u, cf(em, x, 1.0));
  LLVMValueRef corrected = ir_fdiv(em, ir_fmul(em, stax_llvm_log_f32(em, u), x), denominator);
  LLVMValueRef exact_one = ir_fcmp(em, LLVMRealOEQ, denominator, cf(em, x, 0.0));
  LLVMValueRef result = ir_select(em, exact_one, x, corrected);
  /* u = inf: log(inf) * x / inf would be NaN. */
  return ir_select(em, ir_fcmp(em, LLVMRealOEQ, u, cf(em, x, INFINITY)), u, result);
}

/* ---- tanh / erf -------------------------------------------------------------------------- */

LLVMValueRef stax_llvm_tanh_f32(stax_llvm_emitter_t* em, LLVMValueRef x) {
  LLVMValueRef magnitude = unary_intrinsic(em, "llvm.fabs", x);
  LLVMValueRef e = stax_llvm_expm1_f32(em, ir_fmul(em, magnitude, cf(em, x, 2.0)));
  LLVMValueRef t = ir_fdiv(em, e, ir_fadd(em, e, cf(em, x, 2.0)));
  t = ir_select(em, ir_fcmp(em, LLVMRealOGT, magnitude, cf(em, x, 9.0)), cf(em, x, 1.0), t);
  return binary_intrinsic(em, "llvm.copysign", t, x);
}

LLVMValueRef stax_llvm_erf_f32(stax_llvm_emitter_t* em, LLVMValueRef x) {
  /* Maclaurin: erf(x) = 2/sqrt(pi) * sum (-1)^k x^(2k+1) / (k! (2k+1)); 12 terms leave
   * < 1e-10 for |x| < 1, where the terms stay small (no cancellation). */
  enum { TERMS = 12 };
  double maclaurin[TERMS];
  double factorial = 1.0;
  for (int k = 0; k < TERMS; k++) {
    if (k > 0) factorial *= k;
    maclaurin[k] = M_2_SQRTPI * (k % 2 ? -1.0 : 1.0) / (factorial * (2 * k + 1));
  }
  /* Abramowitz & Stegun 7.1.26: erf(a) = 1 - t*(a1 + t*(a2 + ...)) * exp(-a^2),
   * t = 1 / (1 + p*a), |error| <= 1.5e-7. */
  static const double stegun[5] = {0.254829592, -0.284496736, 1.421413741, -1.453152027,
                                   1.061405429};
  LLVMValueRef magnitude = unary_intrinsic(em, "llvm.fabs", x);
  LLVMValueRef small = ir_fmul(em, x, ir_polynomial(em, ir_fmul(em, x, x), maclaurin, TERMS));
  LLVMValueRef t =
      ir_fdiv(em, cf(em, x, 1.0), ir_fmuladd(em, magnitude, cf(em, x, 0.3275911), cf(em, x, 1.0)));
  LLVMValueRef tail =
      ir_fmul(em, ir_fmul(em, t, ir_polynomial(em, t, stegun, 5)),
              stax_llvm_exp_f32(em, LLVMBuildFNeg(em->builder, ir_fmul(em, x, x), "")));
  LLVMValueRef large = binary_intrinsic(em, "llvm.copysign", ir_fsub(em, cf(em, x, 1.0), tail), x);
  return ir_select(em, ir_fcmp(em, LLVMRealOLT, magnitude, cf(em, x, 1.0)), small, large);
}

/* erfc for any float32, with erfc's relative accuracy in the right tail where 1 - erf is all
 * cancellation: for a = |x|, t R(t) exp(-a^2) with t = 1/(1 + a/2) and R a degree-9 fit of
 * erfcx(a) / t over a in [0, 10.1] (2e-8 relative; src/kernels/fast_math.h has the details and
 * the generic kernels' Gelu uses the same form), and 2 - that for x < 0. t R(t) and exp(-a^2)
 * are independent chains, so the division and the polynomial overlap the exp instead of
 * preceding it. NaN stays NaN; +inf gives 0, -inf 2. */
LLVMValueRef stax_llvm_erfc_f32(stax_llvm_emitter_t* em, LLVMValueRef x) {
  static const double fit[10] = {0.282065212726593,   0.2828422486782074,  0.23877619206905365,
                                 0.22489315271377563, -0.09634821861982346, 0.41745102405548096,
                                 -0.6652616858482361, 0.42525020241737366, -0.12165003269910812,
                                 0.01198186632245779};
  LLVMValueRef a = unary_intrinsic(em, "llvm.fabs", x);
  LLVMValueRef t = ir_fdiv(em, cf(em, x, 1.0), ir_fmuladd(em, a, cf(em, x, 0.5), cf(em, x, 1.0)));
  LLVMValueRef scaled = ir_fmul(em, t, ir_polynomial(em, t, fit, 10));
  LLVMValueRef decay =
      stax_llvm_exp_f32(em, LLVMBuildFNeg(em->builder, ir_fmul(em, a, a), ""));
  LLVMValueRef right = ir_fmul(em, scaled, decay);
  /* a = inf: t = 0 and exp(-inf) = 0, so right is 0 without NaN (kept explicit). */
  right = ir_select(em, ir_fcmp(em, LLVMRealOEQ, a, cf(em, x, INFINITY)), cf(em, x, 0.0), right);
  LLVMValueRef result =
      ir_select(em, ir_fcmp(em, LLVMRealOLT, x, cf(em, x, 0.0)), ir_fsub(em, cf(em, x, 2.0), right),
                right);
  return ir_select(em, ir_is_nan(em, x), x, result);
}

#else
/* Built without LLVM: nothing here (llvm_jit.c provides the stub backend). */
typedef int stax_llvm_math_unused_t;
#endif /* STAX_HAVE_LLVM */
