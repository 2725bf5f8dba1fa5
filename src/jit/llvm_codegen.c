/* Kernel IR -> LLVM IR. One external function per stage,
 *
 *   void <symbol>_stage<i>(void* const* buffers, int64_t begin, int64_t end)
 *
 * which loads the buffer pointers and calls an internal body function taking them as noalias
 * parameters (so LLVM knows the tensors do not overlap; O3 inlines it back).
 *
 * Vector loops are emitted explicitly, not left to LLVM's vectorizer: the body is generated
 * once per lane count. A loop of width W, unroll U and trip count C becomes
 *   - a main loop doing U copies of the body on W lanes each (C / (W*U) iterations),
 *   - a loop of single W-lane copies for what remains of whole vectors (when U > 1),
 *   - the tail: with a constant trip count, one copy on C % W lanes (an odd-sized LLVM vector,
 *     which the code generator legalizes without touching memory beyond the last lane); with a
 *     runtime trip count (a parallel loop's [begin, end)), a scalar loop.
 * Every value is a scalar while it does not depend on the vector loop's counter ("uniform")
 * and is splatted where it meets a lane-varying one, so loads that do not move with the lanes
 * stay scalar loads. A load whose index moves by 1 per lane is one vector load, by another
 * stride a gather of scalar loads. Locals are allocas (SROA turns them into registers); a
 * local reduced inside a vector loop gets U partial vector accumulators, combined with a
 * horizontal reduction when the vector part ends and before the tail adds its lanes.
 * Scalar loops with unroll U emit U copies per iteration plus the constant remainder. */
#if STAX_HAVE_LLVM

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jit/llvm_internal.h"
#include "runtime/tensor_internal.h"

#define MAX_UNROLL 8
/* Buffers whose parameter lists fit on the stack (more go to the heap). */
#define MAX_STACK_PARAMS 64

typedef struct codegen_t {
  stax_llvm_emitter_t em;
  stax_allocator_t allocator;
  const stax_kir_kernel_t* kir;
  const stax_llvm_target_t* target;
  LLVMBuilderRef alloca_builder; /* inserts allocas at the top of the entry block */
  LLVMValueRef begin, end;       /* the stage's parallel range */
  LLVMValueRef params[STAX_KIR_MAX_PARAMS]; /* rows-generic: parameter values, loaded once */
  LLVMValueRef* buffers;         /* per buffer: its pointer */
  LLVMValueRef* counters;        /* per loop: its counter (the first lane's, in a vector loop) */
  LLVMValueRef* local_slots;     /* per local: its alloca in the current emission */
  LLVMTypeRef* local_types;      /* per local: the alloca's type */
  LLVMValueRef* partials;        /* per local: MAX_UNROLL partial accumulators, or NULLs */
  LLVMTypeRef* partial_types;
  int32_t vector_loop; /* the enclosing vector loop, or -1 */
  int32_t lanes;       /* lanes of the current emission (1: scalar) */
  int32_t copy;        /* which partial accumulator this copy of the body uses */
  bool use_partials;   /* REDUCE of an outer local goes to the partials */
  LLVMValueRef* cache; /* per expression: its value in the current statement */
  uint32_t* cache_stamp;
  uint32_t stamp;
  stax_status_t status;
} codegen_t;

static void codegen_fail(codegen_t* cg, const char* what, const char* detail) {
  if (cg->status != STAX_OK) return;
  cg->status = stax_status_make(STAX_INTERNAL, "LLVM codegen of kernel '%s': %s %s", cg->kir->name,
                                what, detail ? detail : "");
}

/* ---- types ------------------------------------------------------------------------------- */

static LLVMTypeRef value_type(codegen_t* cg, stax_dtype_t dtype) {
  stax_llvm_emitter_t* em = &cg->em;
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: return em->f32;
    case STAX_DTYPE_FLOAT64: return em->f64;
    case STAX_DTYPE_FLOAT16: return em->f16;
    case STAX_DTYPE_BFLOAT16: return em->bf16;
    case STAX_DTYPE_INT8:
    case STAX_DTYPE_UINT8: return em->i8;
    case STAX_DTYPE_INT16:
    case STAX_DTYPE_UINT16: return em->i16;
    case STAX_DTYPE_INT32:
    case STAX_DTYPE_UINT32: return em->i32;
    case STAX_DTYPE_INT64:
    case STAX_DTYPE_UINT64: return em->i64;
    case STAX_DTYPE_BOOL: return em->i1;
    default: return em->f32;
  }
}

/* Bool is i1 in registers and one byte in memory. */
static LLVMTypeRef memory_type(codegen_t* cg, stax_dtype_t dtype) {
  return dtype == STAX_DTYPE_BOOL ? cg->em.i8 : value_type(cg, dtype);
}

static bool is_float(stax_dtype_t dtype) {
  return dtype == STAX_DTYPE_FLOAT32 || dtype == STAX_DTYPE_FLOAT64 ||
         dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16;
}

static LLVMValueRef i64_constant(codegen_t* cg, int64_t value) {
  return LLVMConstInt(cg->em.i64, (unsigned long long)value, 1);
}

static bool constant_value(LLVMValueRef value, int64_t* out) {
  if (!LLVMIsAConstantInt(value)) return false;
  *out = LLVMConstIntGetSExtValue(value);
  return true;
}

/* a + b on i64, folding constants so constant trip counts stay visible. */
static LLVMValueRef add_i64(codegen_t* cg, LLVMValueRef a, LLVMValueRef b) {
  int64_t x, y;
  if (constant_value(b, &y) && y == 0) return a;
  if (constant_value(a, &x) && constant_value(b, &y)) return i64_constant(cg, x + y);
  return LLVMBuildAdd(cg->em.builder, a, b, "");
}

static LLVMValueRef mul_i64(codegen_t* cg, LLVMValueRef a, int64_t b) {
  int64_t x;
  if (b == 1) return a;
  if (constant_value(a, &x)) return i64_constant(cg, x * b);
  return LLVMBuildMul(cg->em.builder, a, i64_constant(cg, b), "");
}

/* ---- operators on values ----------------------------------------------------------------- */

/* Brings two operands to the same lane count (a uniform scalar meets a vector). */
static void match_lanes(codegen_t* cg, LLVMValueRef* a, LLVMValueRef* b) {
  int32_t la = stax_llvm_lanes(*a), lb = stax_llvm_lanes(*b);
  if (la == lb) return;
  if (la == 1) *a = stax_llvm_splat(&cg->em, *a, lb);
  if (lb == 1) *b = stax_llvm_splat(&cg->em, *b, la);
}

static LLVMValueRef emit_binary_op(codegen_t* cg, stax_kir_binary_op_t op, stax_dtype_t dtype,
                                   LLVMValueRef a, LLVMValueRef b) {
  match_lanes(cg, &a, &b);
  LLVMBuilderRef builder = cg->em.builder;
  bool f = is_float(dtype);
  bool is_unsigned = stax_dtype_is_unsigned_int(dtype) || dtype == STAX_DTYPE_BOOL;
  LLVMTypeRef type = LLVMTypeOf(a);
  LLVMValueRef args[2] = {a, b};
  switch (op) {
    case STAX_KIR_ADD:
      return f ? LLVMBuildFAdd(builder, a, b, "") : LLVMBuildAdd(builder, a, b, "");
    case STAX_KIR_SUB:
      return f ? LLVMBuildFSub(builder, a, b, "") : LLVMBuildSub(builder, a, b, "");
    case STAX_KIR_MUL:
      return f ? LLVMBuildFMul(builder, a, b, "") : LLVMBuildMul(builder, a, b, "");
    case STAX_KIR_DIV:
      if (f) return LLVMBuildFDiv(builder, a, b, "");
      return is_unsigned ? LLVMBuildUDiv(builder, a, b, "") : LLVMBuildSDiv(builder, a, b, "");
    case STAX_KIR_MAX:
      if (f) return stax_llvm_intrinsic(&cg->em, "llvm.maximum", type, args, 2);
      return stax_llvm_intrinsic(&cg->em, is_unsigned ? "llvm.umax" : "llvm.smax", type, args, 2);
    case STAX_KIR_MIN:
      if (f) return stax_llvm_intrinsic(&cg->em, "llvm.minimum", type, args, 2);
      return stax_llvm_intrinsic(&cg->em, is_unsigned ? "llvm.umin" : "llvm.smin", type, args, 2);
    case STAX_KIR_POW:
      return stax_llvm_libm(&cg->em, dtype == STAX_DTYPE_FLOAT64 ? "pow" : "powf", a, b);
    case STAX_KIR_AND: return LLVMBuildAnd(builder, a, b, "");
    case STAX_KIR_OR: return LLVMBuildOr(builder, a, b, "");
    case STAX_KIR_XOR: return LLVMBuildXor(builder, a, b, "");
    case STAX_KIR_EQ:
    case STAX_KIR_NE:
    case STAX_KIR_LT:
    case STAX_KIR_LE:
    case STAX_KIR_GT:
    case STAX_KIR_GE: {
      if (f) {
        /* Ordered compares are false on NaN; != is true on NaN (as in C). */
        static const LLVMRealPredicate real[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                                 LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
        return LLVMBuildFCmp(builder, real[op - STAX_KIR_EQ], a, b, "");
      }
      static const LLVMIntPredicate sign[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntSLT,
                                              LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
      static const LLVMIntPredicate unsign[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntULT,
                                                LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
      return LLVMBuildICmp(builder, (is_unsigned ? unsign : sign)[op - STAX_KIR_EQ], a, b, "");
    }
    default: break;
  }
  codegen_fail(cg, "binary operator", stax_kir_binary_op_name(op));
  return a;
}

static const char* libm_name(stax_kir_unary_op_t op, bool f64) {
  switch (op) {
    case STAX_KIR_EXP: return f64 ? "exp" : "expf";
    case STAX_KIR_EXPM1: return f64 ? "expm1" : "expm1f";
    case STAX_KIR_LOG: return f64 ? "log" : "logf";
    case STAX_KIR_LOG1P: return f64 ? "log1p" : "log1pf";
    case STAX_KIR_TANH: return f64 ? "tanh" : "tanhf";
    case STAX_KIR_ERF: return f64 ? "erf" : "erff";
    case STAX_KIR_ERFC: return f64 ? "erfc" : "erfcf";
    case STAX_KIR_SIN: return f64 ? "sin" : "sinf";
    case STAX_KIR_COS: return f64 ? "cos" : "cosf";
    case STAX_KIR_TAN: return f64 ? "tan" : "tanf";
    case STAX_KIR_ASIN: return f64 ? "asin" : "asinf";
    case STAX_KIR_ACOS: return f64 ? "acos" : "acosf";
    case STAX_KIR_ATAN: return f64 ? "atan" : "atanf";
    case STAX_KIR_SINH: return f64 ? "sinh" : "sinhf";
    case STAX_KIR_COSH: return f64 ? "cosh" : "coshf";
    case STAX_KIR_ASINH: return f64 ? "asinh" : "asinhf";
    case STAX_KIR_ACOSH: return f64 ? "acosh" : "acoshf";
    case STAX_KIR_ATANH: return f64 ? "atanh" : "atanhf";
    default: return NULL;
  }
}

static void add_target_attributes(codegen_t* cg, LLVMValueRef function);
static void add_enum_attribute(codegen_t* cg, LLVMValueRef function, LLVMAttributeIndex index,
                               const char* name);

typedef LLVMValueRef (*math_emitter_fn)(stax_llvm_emitter_t* em, LLVMValueRef x);

/* kir->compact_math: one internal, never-inlined function per (function, vector type) in the
 * module, "stax_math_erf_8", called wherever the kernel needs it. */
static LLVMValueRef emit_math_call(codegen_t* cg, const char* what, math_emitter_fn emit,
                                   LLVMValueRef x) {
  stax_llvm_emitter_t* em = &cg->em;
  if (!cg->kir->compact_math) return emit(em, x);
  LLVMTypeRef type = LLVMTypeOf(x);
  char name[64];
  snprintf(name, sizeof(name), "stax_math_%s_%d", what, (int)stax_llvm_lanes(x));
  LLVMTypeRef fn_type = LLVMFunctionType(type, &type, 1, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(em->module, name);
  if (!fn) {
    fn = LLVMAddFunction(em->module, name, fn_type);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    add_target_attributes(cg, fn);
    add_enum_attribute(cg, fn, LLVMAttributeFunctionIndex, "noinline");
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(em->context, fn, "entry");
    LLVMBuilderRef saved = em->builder;
    LLVMBuilderRef body = LLVMCreateBuilderInContext(em->context);
    LLVMPositionBuilderAtEnd(body, entry);
    em->builder = body;
    LLVMBuildRet(body, emit(em, LLVMGetParam(fn, 0)));
    em->builder = saved;
    LLVMDisposeBuilder(body);
  }
  return LLVMBuildCall2(em->builder, fn_type, fn, &x, 1, "");
}

static LLVMValueRef emit_unary_op(codegen_t* cg, stax_kir_unary_op_t op, stax_dtype_t dtype,
                                  LLVMValueRef x) {
  stax_llvm_emitter_t* em = &cg->em;
  LLVMBuilderRef builder = em->builder;
  LLVMTypeRef type = LLVMTypeOf(x);
  bool f32 = dtype == STAX_DTYPE_FLOAT32;
  switch (op) {
    case STAX_KIR_NEG:
      return is_float(dtype) ? LLVMBuildFNeg(builder, x, "") : LLVMBuildNeg(builder, x, "");
    case STAX_KIR_ABS:
      if (is_float(dtype)) return stax_llvm_intrinsic(em, "llvm.fabs", type, &x, 1);
      if (stax_dtype_is_unsigned_int(dtype)) return x;
      {
        /* is_int_min_poison = false: abs(INT_MIN) wraps to INT_MIN like the reference. */
        LLVMValueRef args[2] = {x, LLVMConstInt(em->i1, 0, 0)};
        return stax_llvm_intrinsic(em, "llvm.abs", type, args, 2);
      }
    case STAX_KIR_NOT: return LLVMBuildNot(builder, x, "");
    case STAX_KIR_SQRT: return stax_llvm_intrinsic(em, "llvm.sqrt", type, &x, 1);
    case STAX_KIR_FLOOR: return stax_llvm_intrinsic(em, "llvm.floor", type, &x, 1);
    case STAX_KIR_CEIL: return stax_llvm_intrinsic(em, "llvm.ceil", type, &x, 1);
    case STAX_KIR_ROUND: return stax_llvm_intrinsic(em, "llvm.roundeven", type, &x, 1);
    case STAX_KIR_IS_NAN: return LLVMBuildFCmp(builder, LLVMRealUNO, x, x, "");
    case STAX_KIR_IS_INF: {
      LLVMValueRef magnitude = stax_llvm_intrinsic(em, "llvm.fabs", type, &x, 1);
      return LLVMBuildFCmp(builder, LLVMRealOEQ, magnitude,
                           stax_llvm_const_float(em, type, INFINITY), "");
    }
    case STAX_KIR_EXP:
      if (f32) return emit_math_call(cg, "exp", stax_llvm_exp_f32, x);
      break;
    case STAX_KIR_EXPM1:
      if (f32) return emit_math_call(cg, "expm1", stax_llvm_expm1_f32, x);
      break;
    case STAX_KIR_LOG:
      if (f32) return emit_math_call(cg, "log", stax_llvm_log_f32, x);
      break;
    case STAX_KIR_LOG1P:
      if (f32) return emit_math_call(cg, "log1p", stax_llvm_log1p_f32, x);
      break;
    case STAX_KIR_TANH:
      if (f32) return emit_math_call(cg, "tanh", stax_llvm_tanh_f32, x);
      break;
    case STAX_KIR_ERF:
      if (f32) return emit_math_call(cg, "erf", stax_llvm_erf_f32, x);
      break;
    case STAX_KIR_ERFC:
      if (f32) return emit_math_call(cg, "erfc", stax_llvm_erfc_f32, x);
      break;
    default: break;
  }
  const char* name = libm_name(op, dtype == STAX_DTYPE_FLOAT64);
  if (name) return stax_llvm_libm(em, name, x, NULL);
  codegen_fail(cg, "unary operator", stax_kir_unary_op_name(op));
  return x;
}

/* float64 -> float32 rounded to odd (truncated, the lowest bit set when anything was
 * dropped), half.c's first step of a double's narrowing to 16 bits: the nearest float,
 * stepped back toward zero when it overshot, then or 1 when inexact. NaN passes. */
static LLVMValueRef f64_to_f32_round_to_odd(codegen_t* cg, LLVMValueRef x) {
  LLVMBuilderRef b = cg->em.builder;
  int32_t lanes = stax_llvm_lanes(x);
  LLVMTypeRef f32 = stax_llvm_vector_type(cg->em.f32, lanes);
  LLVMTypeRef i32 = stax_llvm_vector_type(cg->em.i32, lanes);
  LLVMValueRef nearest = LLVMBuildFPTrunc(b, x, f32, "");
  LLVMValueRef back = LLVMBuildFPExt(b, nearest, LLVMTypeOf(x), "");
  LLVMValueRef inexact = LLVMBuildFCmp(b, LLVMRealONE, back, x, "");
  LLVMValueRef overshot = LLVMBuildICmp(
      b, LLVMIntEQ, LLVMBuildFCmp(b, LLVMRealOGT, back, x, ""),
      LLVMBuildFCmp(b, LLVMRealOGT, x, stax_llvm_const_float(&cg->em, LLVMTypeOf(x), 0), ""), "");
  LLVMValueRef bits = LLVMBuildBitCast(b, nearest, i32, "");
  LLVMValueRef stepped = LLVMBuildSelect(
      b, overshot, LLVMBuildSub(b, bits, stax_llvm_const_int(&cg->em, i32, 1), ""), bits, "");
  LLVMValueRef odd = LLVMBuildOr(b, stepped, stax_llvm_const_int(&cg->em, i32, 1), "");
  return LLVMBuildBitCast(b, LLVMBuildSelect(b, inexact, odd, bits, ""), f32, "");
}

static LLVMValueRef emit_cast(codegen_t* cg, stax_dtype_t from, stax_dtype_t to, LLVMValueRef x) {
  LLVMBuilderRef builder = cg->em.builder;
  int32_t lanes = stax_llvm_lanes(x);
  LLVMTypeRef target = stax_llvm_vector_type(value_type(cg, to), lanes);
  if (to == STAX_DTYPE_BOOL) {
    if (is_float(from))
      return LLVMBuildFCmp(builder, LLVMRealUNE, x,
                           stax_llvm_const_float(&cg->em, LLVMTypeOf(x), 0), "");
    return LLVMBuildICmp(builder, LLVMIntNE, x, LLVMConstNull(LLVMTypeOf(x)), "");
  }
  bool from_unsigned = stax_dtype_is_unsigned_int(from) || from == STAX_DTYPE_BOOL;
  /* 16-bit floats go through float32 in integer IR (llvm_half.c): no F16C, AVX512-BF16 or
   * compiler-rt needed, and the runtime's bits on every ISA level. */
  if (stax_dtype_is_half(from)) {
    x = stax_llvm_half_to_f32(&cg->em, x, from == STAX_DTYPE_BFLOAT16);
    if (to == STAX_DTYPE_FLOAT32) return x;
    return emit_cast(cg, STAX_DTYPE_FLOAT32, to, x);
  }
  if (stax_dtype_is_half(to)) {
    /* float64 narrows through float32 rounded to odd, as the runtime does, so that the
     * second rounding finds the nearest value. */
    if (from == STAX_DTYPE_FLOAT64) {
      x = f64_to_f32_round_to_odd(cg, x);
    } else if (from != STAX_DTYPE_FLOAT32) {
      x = emit_cast(cg, from, STAX_DTYPE_FLOAT32, x);
    }
    return stax_llvm_f32_to_half(&cg->em, x, to == STAX_DTYPE_BFLOAT16);
  }
  if (is_float(from) && is_float(to)) {
    size_t from_size = stax_dtype_size(from), to_size = stax_dtype_size(to);
    if (from_size < to_size) return LLVMBuildFPExt(builder, x, target, "");
    return LLVMBuildFPTrunc(builder, x, target, "");
  }
  if (!is_float(from) && is_float(to))
    return from_unsigned ? LLVMBuildUIToFP(builder, x, target, "")
                         : LLVMBuildSIToFP(builder, x, target, "");
  if (is_float(from)) {
    /* Saturating: out-of-range values clamp, NaN gives 0 (runtime/convert.c's rules). */
    LLVMTypeRef overloads[2] = {target, LLVMTypeOf(x)};
    return stax_llvm_intrinsic_overloaded(
        &cg->em, stax_dtype_is_unsigned_int(to) ? "llvm.fptoui.sat" : "llvm.fptosi.sat", overloads,
        2, &x, 1);
  }
  return LLVMBuildIntCast2(builder, x, target, from_unsigned ? 0 : 1, "");
}

/* ---- expressions ------------------------------------------------------------------------- */

/* The scalar i64 value of an index at the current counters (the first lane's in a vector
 * loop), and the index's step per lane. */
static LLVMValueRef emit_index(codegen_t* cg, const stax_kir_index_t* index,
                               int64_t* out_lane_step) {
  *out_lane_step = 0;
  LLVMValueRef value = i64_constant(cg, index->constant);
  for (int32_t t = 0; t < index->term_count; t++) {
    int32_t loop = index->loops[t];
    LLVMValueRef factor = loop >= STAX_KIR_PARAM_TERM ? cg->params[loop - STAX_KIR_PARAM_TERM]
                                                      : cg->counters[loop];
    /* A symbolic kernel's run-time stride (never on the vector loop: the verifier says so). */
    if (index->scales[t] > 0)
      factor = LLVMBuildMul(cg->em.builder, factor, cg->params[index->scales[t] - 1], "");
    if (loop < STAX_KIR_PARAM_TERM && loop == cg->vector_loop && cg->lanes > 1)
      *out_lane_step = index->coefficients[t];
    value = add_i64(cg, value, mul_i64(cg, factor, index->coefficients[t]));
  }
  return value;
}

static LLVMValueRef element_pointer(codegen_t* cg, int32_t buffer, LLVMValueRef index) {
  LLVMTypeRef type = memory_type(cg, cg->kir->buffers[buffer]->dtype);
  return LLVMBuildGEP2(cg->em.builder, type, cg->buffers[buffer], &index, 1, "");
}

static LLVMValueRef emit_load(codegen_t* cg, const stax_kir_expr_t* e) {
  LLVMBuilderRef builder = cg->em.builder;
  stax_dtype_t dtype = cg->kir->buffers[e->buffer]->dtype;
  LLVMTypeRef element = memory_type(cg, dtype);
  unsigned alignment = (unsigned)stax_dtype_size(dtype);
  int64_t lane_step = 0;
  LLVMValueRef index = emit_index(cg, e->index, &lane_step);
  LLVMValueRef value;
  if (lane_step == 0) {
    value = LLVMBuildLoad2(builder, element, element_pointer(cg, e->buffer, index), "");
    LLVMSetAlignment(value, alignment);
  } else if (lane_step == 1) {
    value = LLVMBuildLoad2(builder, LLVMVectorType(element, (unsigned)cg->lanes),
                           element_pointer(cg, e->buffer, index), "");
    LLVMSetAlignment(value, alignment);
  } else {
    value = LLVMGetPoison(LLVMVectorType(element, (unsigned)cg->lanes));
    for (int32_t lane = 0; lane < cg->lanes; lane++) {
      LLVMValueRef at = add_i64(cg, index, i64_constant(cg, lane * lane_step));
      LLVMValueRef scalar =
          LLVMBuildLoad2(builder, element, element_pointer(cg, e->buffer, at), "");
      LLVMSetAlignment(scalar, alignment);
      value = LLVMBuildInsertElement(builder, value, scalar,
                                     LLVMConstInt(cg->em.i32, (unsigned long long)lane, 0), "");
    }
  }
  if (dtype == STAX_DTYPE_BOOL)
    value = LLVMBuildICmp(builder, LLVMIntNE, value, LLVMConstNull(LLVMTypeOf(value)), "");
  return value;
}

static LLVMValueRef emit_expr(codegen_t* cg, const stax_kir_expr_t* e);

static LLVMValueRef emit_expr_uncached(codegen_t* cg, const stax_kir_expr_t* e) {
  stax_llvm_emitter_t* em = &cg->em;
  switch (e->kind) {
    case STAX_KIR_CONSTANT:
      if (is_float(e->dtype)) return LLVMConstReal(value_type(cg, e->dtype), e->float_value);
      return LLVMConstInt(value_type(cg, e->dtype), (unsigned long long)e->int_value, 1);
    case STAX_KIR_LOAD: return emit_load(cg, e);
    case STAX_KIR_LOCAL:
      if (!cg->local_slots[e->local]) {
        codegen_fail(cg, "read of an unallocated local", cg->kir->locals[e->local]->name);
        return LLVMConstNull(value_type(cg, e->dtype));
      }
      return LLVMBuildLoad2(em->builder, cg->local_types[e->local], cg->local_slots[e->local],
                            cg->kir->locals[e->local]->name);
    case STAX_KIR_LOOP_INDEX: {
      LLVMValueRef counter = cg->counters[e->loop];
      if (e->loop != cg->vector_loop || cg->lanes == 1) return counter;
      LLVMValueRef steps[STAX_KIR_MAX_VECTOR_WIDTH];
      for (int32_t lane = 0; lane < cg->lanes; lane++) steps[lane] = i64_constant(cg, lane);
      return LLVMBuildAdd(em->builder, stax_llvm_splat(em, counter, cg->lanes),
                          LLVMConstVector(steps, (unsigned)cg->lanes), "");
    }
    case STAX_KIR_UNARY:
      return emit_unary_op(cg, e->op, e->operands[0]->dtype, emit_expr(cg, e->operands[0]));
    case STAX_KIR_BINARY:
      return emit_binary_op(cg, e->op, e->operands[0]->dtype, emit_expr(cg, e->operands[0]),
                            emit_expr(cg, e->operands[1]));
    case STAX_KIR_SELECT:
    case STAX_KIR_FMA: {
      LLVMValueRef v[3];
      int32_t lanes = 1;
      for (int32_t i = 0; i < 3; i++) {
        v[i] = emit_expr(cg, e->operands[i]);
        if (stax_llvm_lanes(v[i]) > lanes) lanes = stax_llvm_lanes(v[i]);
      }
      for (int32_t i = 0; i < 3; i++) v[i] = stax_llvm_splat(em, v[i], lanes);
      if (e->kind == STAX_KIR_SELECT) return LLVMBuildSelect(em->builder, v[0], v[1], v[2], "");
      return stax_llvm_intrinsic(em, "llvm.fmuladd", LLVMTypeOf(v[0]), v, 3);
    }
    case STAX_KIR_CAST: {
      const stax_kir_expr_t* inner = e->operands[0];
      /* float32 -> 16 bits -> float32 (the lowering's rounding of a 16-bit value): one
       * rounding in the float32 domain, with the same bits. */
      if (e->dtype == STAX_DTYPE_FLOAT32 && inner->kind == STAX_KIR_CAST &&
          stax_dtype_is_half(inner->dtype) && inner->operands[0]->dtype == STAX_DTYPE_FLOAT32)
        return stax_llvm_round_to_half(&cg->em, emit_expr(cg, inner->operands[0]),
                                       inner->dtype == STAX_DTYPE_BFLOAT16);
      return emit_cast(cg, inner->dtype, e->dtype, emit_expr(cg, inner));
    }
  }
  codegen_fail(cg, "expression kind", NULL);
  return LLVMConstNull(value_type(cg, e->dtype));
}

static LLVMValueRef emit_expr(codegen_t* cg, const stax_kir_expr_t* e) {
  if (cg->cache_stamp[e->id] == cg->stamp) return cg->cache[e->id];
  LLVMValueRef value = emit_expr_uncached(cg, e);
  cg->cache[e->id] = value;
  cg->cache_stamp[e->id] = cg->stamp;
  return value;
}

/* ---- reductions -------------------------------------------------------------------------- */

static LLVMValueRef reduce_identity(codegen_t* cg, stax_kir_binary_op_t op, stax_dtype_t dtype,
                                    LLVMTypeRef type) {
  stax_llvm_emitter_t* em = &cg->em;
  if (is_float(dtype)) {
    /* -0.0 is the exact identity of float addition (x + -0.0 == x, also for x = -0.0). */
    double value = op == STAX_KIR_ADD   ? -0.0
                   : op == STAX_KIR_MUL ? 1.0
                   : op == STAX_KIR_MAX ? -INFINITY
                                        : INFINITY;
    return stax_llvm_const_float(em, type, value);
  }
  int bits = (int)stax_dtype_size(dtype) * 8;
  bool is_unsigned = stax_dtype_is_unsigned_int(dtype);
  int64_t value = 0;
  if (op == STAX_KIR_MUL) value = 1;
  if (op == STAX_KIR_MAX) value = is_unsigned ? 0 : (int64_t)((uint64_t)1 << (bits - 1));
  if (op == STAX_KIR_MIN) value = is_unsigned ? -1 : (int64_t)(((uint64_t)1 << (bits - 1)) - 1);
  return stax_llvm_const_int(em, type, value);
}

static LLVMValueRef horizontal_reduce(codegen_t* cg, stax_kir_binary_op_t op, stax_dtype_t dtype,
                                      LLVMValueRef vector) {
  if (stax_llvm_lanes(vector) == 1) return vector;
  stax_llvm_emitter_t* em = &cg->em;
  LLVMTypeRef type = LLVMTypeOf(vector);
  if (is_float(dtype)) {
    if (op == STAX_KIR_ADD || op == STAX_KIR_MUL) {
      LLVMValueRef args[2] = {reduce_identity(cg, op, dtype, LLVMGetElementType(type)), vector};
      LLVMValueRef sum = stax_llvm_intrinsic(
          em, op == STAX_KIR_ADD ? "llvm.vector.reduce.fadd" : "llvm.vector.reduce.fmul", type,
          args, 2);
      /* Reassociation lets it combine lanes as a tree, the order the partials already use. */
      LLVMSetFastMathFlags(sum, LLVMFastMathAllowReassoc);
      return sum;
    }
    return stax_llvm_intrinsic(
        em, op == STAX_KIR_MAX ? "llvm.vector.reduce.fmaximum" : "llvm.vector.reduce.fminimum",
        type, &vector, 1);
  }
  bool is_unsigned = stax_dtype_is_unsigned_int(dtype);
  const char* name = op == STAX_KIR_ADD   ? "llvm.vector.reduce.add"
                     : op == STAX_KIR_MUL ? "llvm.vector.reduce.mul"
                     : op == STAX_KIR_MAX
                         ? (is_unsigned ? "llvm.vector.reduce.umax" : "llvm.vector.reduce.smax")
                         : (is_unsigned ? "llvm.vector.reduce.umin" : "llvm.vector.reduce.smin");
  return stax_llvm_intrinsic(em, name, type, &vector, 1);
}

/* ---- statements -------------------------------------------------------------------------- */

static LLVMValueRef new_slot(codegen_t* cg, LLVMTypeRef type, const char* name) {
  return LLVMBuildAlloca(cg->alloca_builder, type, name);
}

static void emit_block(codegen_t* cg, const stax_kir_block_t* block);

static void emit_store(codegen_t* cg, const stax_kir_stmt_t* s) {
  LLVMBuilderRef builder = cg->em.builder;
  stax_dtype_t dtype = cg->kir->buffers[s->buffer]->dtype;
  LLVMValueRef value = emit_expr(cg, s->value);
  int64_t lane_step = 0;
  LLVMValueRef index = emit_index(cg, s->index, &lane_step);
  unsigned alignment = (unsigned)stax_dtype_size(dtype);
  if (lane_step != 0) value = stax_llvm_splat(&cg->em, value, cg->lanes);
  if (dtype == STAX_DTYPE_BOOL)
    value =
        LLVMBuildZExt(builder, value, stax_llvm_vector_type(cg->em.i8, stax_llvm_lanes(value)), "");
  if (lane_step == 0 || lane_step == 1) {
    LLVMValueRef store = LLVMBuildStore(builder, value, element_pointer(cg, s->buffer, index));
    LLVMSetAlignment(store, alignment);
    return;
  }
  for (int32_t lane = 0; lane < cg->lanes; lane++) {
    LLVMValueRef scalar = LLVMBuildExtractElement(
        builder, value, LLVMConstInt(cg->em.i32, (unsigned long long)lane, 0), "");
    LLVMValueRef at = add_i64(cg, index, i64_constant(cg, lane * lane_step));
    LLVMValueRef store = LLVMBuildStore(builder, scalar, element_pointer(cg, s->buffer, at));
    LLVMSetAlignment(store, alignment);
  }
}

static void emit_local_statement(codegen_t* cg, const stax_kir_stmt_t* s) {
  LLVMBuilderRef builder = cg->em.builder;
  const stax_kir_local_t* local = cg->kir->locals[s->local];
  LLVMValueRef value = emit_expr(cg, s->value);
  if (s->kind == STAX_KIR_STMT_DECLARE) {
    /* Inside a vector loop a local is per lane. */
    int32_t lanes = cg->vector_loop >= 0 ? cg->lanes : 1;
    LLVMTypeRef type = stax_llvm_vector_type(value_type(cg, local->dtype), lanes);
    cg->local_slots[s->local] = new_slot(cg, type, local->name);
    cg->local_types[s->local] = type;
    LLVMBuildStore(builder, stax_llvm_splat(&cg->em, value, lanes), cg->local_slots[s->local]);
    return;
  }
  LLVMValueRef slot = cg->local_slots[s->local];
  LLVMTypeRef type = cg->local_types[s->local];
  if (!slot) {
    codegen_fail(cg, "update of an unallocated local", local->name);
    return;
  }
  int32_t slot_lanes =
      LLVMGetTypeKind(type) == LLVMVectorTypeKind ? (int32_t)LLVMGetVectorSize(type) : 1;
  if (s->kind == STAX_KIR_STMT_ASSIGN) {
    LLVMBuildStore(builder, stax_llvm_splat(&cg->em, value, slot_lanes), slot);
    return;
  }
  /* REDUCE */
  LLVMValueRef* partials = &cg->partials[(size_t)s->local * MAX_UNROLL];
  if (cg->use_partials && partials[0]) {
    LLVMTypeRef partial_type = cg->partial_types[s->local];
    LLVMValueRef slot_partial = partials[cg->copy];
    LLVMValueRef current = LLVMBuildLoad2(builder, partial_type, slot_partial, "");
    LLVMValueRef updated = emit_binary_op(cg, s->reduce_op, local->dtype, current,
                                          stax_llvm_splat(&cg->em, value, cg->lanes));
    LLVMBuildStore(builder, updated, slot_partial);
    return;
  }
  /* Inside a vector step a value that does not vary along the loop (a stride-0 view: one
   * element broadcast over the row) still stands for `lanes` elements: a sum must add it
   * `lanes` times, not once (the conformance suite's LayerNormalization of a broadcast row). */
  if (slot_lanes == 1 && stax_llvm_lanes(value) == 1 && cg->lanes > 1)
    value = stax_llvm_splat(&cg->em, value, cg->lanes);
  if (slot_lanes == 1 && stax_llvm_lanes(value) > 1)
    value = horizontal_reduce(cg, s->reduce_op, local->dtype, value);
  LLVMValueRef current = LLVMBuildLoad2(builder, type, slot, "");
  LLVMBuildStore(builder, emit_binary_op(cg, s->reduce_op, local->dtype, current, value), slot);
}

/* A counted loop: counter = start + t*step for t in [0, trip). Constant trips of 0 and 1 emit
 * nothing / the body once, without a loop. */
typedef void (*body_fn)(codegen_t* cg, LLVMValueRef counter, void* context);

static void emit_for(codegen_t* cg, LLVMValueRef start, LLVMValueRef trip, int64_t step,
                     body_fn body, void* context) {
  int64_t constant_trip = -1;
  bool is_constant = constant_value(trip, &constant_trip);
  if (is_constant && constant_trip <= 0) return;
  if (is_constant && constant_trip == 1) {
    body(cg, start, context);
    return;
  }
  LLVMBuilderRef builder = cg->em.builder;
  LLVMValueRef function = LLVMGetBasicBlockParent(LLVMGetInsertBlock(builder));
  LLVMBasicBlockRef before = LLVMGetInsertBlock(builder);
  LLVMBasicBlockRef loop_block = LLVMAppendBasicBlockInContext(cg->em.context, function, "loop");
  LLVMBasicBlockRef exit_block = LLVMAppendBasicBlockInContext(cg->em.context, function, "exit");
  if (is_constant) {
    LLVMBuildBr(builder, loop_block);
  } else {
    LLVMValueRef any = LLVMBuildICmp(builder, LLVMIntSGT, trip, i64_constant(cg, 0), "");
    LLVMBuildCondBr(builder, any, loop_block, exit_block);
  }
  LLVMPositionBuilderAtEnd(builder, loop_block);
  LLVMValueRef t = LLVMBuildPhi(builder, cg->em.i64, "t");
  LLVMValueRef counter = add_i64(cg, start, mul_i64(cg, t, step));
  body(cg, counter, context);
  LLVMValueRef next = LLVMBuildAdd(builder, t, i64_constant(cg, 1), "");
  LLVMSetNUW(next, 1);
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(builder);
  LLVMBuildCondBr(builder, LLVMBuildICmp(builder, LLVMIntSLT, next, trip, ""), loop_block,
                  exit_block);
  LLVMValueRef zero = i64_constant(cg, 0);
  LLVMAddIncoming(t, &zero, &before, 1);
  LLVMAddIncoming(t, &next, &latch, 1);
  LLVMPositionBuilderAtEnd(builder, exit_block);
}

typedef struct copies_t {
  int32_t loop;
  int32_t lanes;
  int32_t copies;
  int64_t copy_step; /* counter distance between copies */
  bool use_partials;
} copies_t;

static void emit_copies(codegen_t* cg, LLVMValueRef base, void* context) {
  const copies_t* c = context;
  for (int32_t k = 0; k < c->copies && cg->status == STAX_OK; k++) {
    cg->counters[c->loop] = add_i64(cg, base, i64_constant(cg, k * c->copy_step));
    cg->lanes = c->lanes;
    cg->copy = k;
    cg->use_partials = c->use_partials;
    emit_block(cg, &cg->kir->loops[c->loop]->body);
  }
}

/* Locals REDUCEd in `block` (at any depth) but not declared there: the vector loop's
 * accumulators. */
static void find_reduced_outer_locals(const stax_kir_kernel_t* kir, const stax_kir_block_t* block,
                                      uint8_t* reduce_ops, bool* declared) {
  for (const stax_kir_stmt_t* s = block->first; s; s = s->next) {
    /* The op of the first REDUCE decides the identity; lowering never mixes ops on one
     * local inside one vector loop. */
    if (s->kind == STAX_KIR_STMT_REDUCE && !reduce_ops[s->local])
      reduce_ops[s->local] = (uint8_t)(s->reduce_op + 1);
    if (s->kind == STAX_KIR_STMT_DECLARE) declared[s->local] = true;
    if (s->kind == STAX_KIR_STMT_LOOP)
      find_reduced_outer_locals(kir, &kir->loops[s->loop]->body, reduce_ops, declared);
  }
}

static void emit_vector_loop(codegen_t* cg, int32_t id, LLVMValueRef start, LLVMValueRef count) {
  const stax_kir_loop_t* loop = cg->kir->loops[id];
  LLVMBuilderRef builder = cg->em.builder;
  int32_t width = loop->vector_width;
  int32_t unroll = loop->unroll < 1 ? 1 : loop->unroll > MAX_UNROLL ? MAX_UNROLL : loop->unroll;
  int32_t local_count = cg->kir->local_count;

  /* Partial accumulators for outer locals reduced inside. reduce_ops[l] is the op + 1 for
   * such a local, 0 otherwise. */
  size_t table_size = ((size_t)local_count + 1) * (sizeof(uint8_t) + sizeof(bool));
  uint8_t* reduce_ops = NULL;
  if (stax_allocator_calloc(cg->allocator, 1, table_size, (void**)&reduce_ops) != STAX_OK) {
    codegen_fail(cg, "out of memory", NULL);
    return;
  }
  bool* declared = (bool*)(reduce_ops + local_count + 1);
  find_reduced_outer_locals(cg->kir, &loop->body, reduce_ops, declared);
  for (int32_t l = 0; l < local_count; l++) {
    if (declared[l]) reduce_ops[l] = 0;
    if (!reduce_ops[l]) continue;
    stax_dtype_t dtype = cg->kir->locals[l]->dtype;
    stax_kir_binary_op_t op = (stax_kir_binary_op_t)(reduce_ops[l] - 1);
    LLVMTypeRef type = LLVMVectorType(value_type(cg, dtype), (unsigned)width);
    cg->partial_types[l] = type;
    for (int32_t k = 0; k < unroll; k++) {
      LLVMValueRef slot = new_slot(cg, type, "partial");
      LLVMBuildStore(builder, reduce_identity(cg, op, dtype, type), slot);
      cg->partials[(size_t)l * MAX_UNROLL + k] = slot;
    }
  }

  int32_t saved_vector = cg->vector_loop, saved_lanes = cg->lanes, saved_copy = cg->copy;
  bool saved_use = cg->use_partials;
  cg->vector_loop = id;
  int64_t chunk = (int64_t)width * unroll;
  int64_t constant_count = 0;
  bool is_constant = constant_value(count, &constant_count);
  LLVMValueRef main_trips = is_constant
                                ? i64_constant(cg, constant_count / chunk)
                                : LLVMBuildSDiv(builder, count, i64_constant(cg, chunk), "");
  copies_t main_copies = {id, width, unroll, width, true};
  emit_for(cg, start, main_trips, chunk, emit_copies, &main_copies);
  LLVMValueRef whole =
      is_constant ? i64_constant(cg, constant_count / width * width)
                  : mul_i64(cg, LLVMBuildSDiv(builder, count, i64_constant(cg, width), ""), width);
  if (unroll > 1) {
    LLVMValueRef done = mul_i64(cg, main_trips, chunk);
    LLVMValueRef rest_trips = is_constant
                                  ? i64_constant(cg, (constant_count % chunk) / width)
                                  : LLVMBuildSDiv(builder, LLVMBuildSub(builder, whole, done, ""),
                                                  i64_constant(cg, width), "");
    copies_t rest = {id, width, 1, width, true};
    emit_for(cg, add_i64(cg, start, done), rest_trips, width, emit_copies, &rest);
  }
  /* Fold the partials into their locals before the tail adds its lanes. */
  for (int32_t l = 0; l < local_count && cg->status == STAX_OK; l++) {
    if (!reduce_ops[l]) continue;
    stax_dtype_t dtype = cg->kir->locals[l]->dtype;
    stax_kir_binary_op_t op = (stax_kir_binary_op_t)(reduce_ops[l] - 1);
    LLVMValueRef* slots = &cg->partials[(size_t)l * MAX_UNROLL];
    LLVMValueRef combined = LLVMBuildLoad2(builder, cg->partial_types[l], slots[0], "");
    for (int32_t k = 1; k < unroll; k++)
      combined = emit_binary_op(cg, op, dtype, combined,
                                LLVMBuildLoad2(builder, cg->partial_types[l], slots[k], ""));
    LLVMValueRef total = horizontal_reduce(cg, op, dtype, combined);
    LLVMValueRef current = LLVMBuildLoad2(builder, cg->local_types[l], cg->local_slots[l], "");
    LLVMBuildStore(builder, emit_binary_op(cg, op, dtype, current, total), cg->local_slots[l]);
    for (int32_t k = 0; k < MAX_UNROLL; k++) slots[k] = NULL;
  }
  stax_allocator_free(cg->allocator, reduce_ops, table_size);

  LLVMValueRef tail_start = add_i64(cg, start, whole);
  if (is_constant) {
    int32_t tail = (int32_t)(constant_count % width);
    if (tail > 0) {
      copies_t once = {id, tail, 1, 0, false};
      emit_copies(cg, tail_start, &once);
    }
  } else {
    copies_t scalar = {id, 1, 1, 1, false};
    LLVMValueRef tail_trips = LLVMBuildSub(builder, count, whole, "");
    emit_for(cg, tail_start, tail_trips, 1, emit_copies, &scalar);
  }
  cg->vector_loop = saved_vector;
  cg->lanes = saved_lanes;
  cg->copy = saved_copy;
  cg->use_partials = saved_use;
}

static void emit_scalar_copies(codegen_t* cg, LLVMValueRef base, void* context) {
  const copies_t* c = context;
  for (int32_t k = 0; k < c->copies && cg->status == STAX_OK; k++) {
    cg->counters[c->loop] = add_i64(cg, base, i64_constant(cg, k));
    emit_block(cg, &cg->kir->loops[c->loop]->body);
  }
}

static void emit_loop(codegen_t* cg, int32_t id) {
  const stax_kir_loop_t* loop = cg->kir->loops[id];
  if (loop->extent == 0 && loop->extent_param < 0) return;
  LLVMValueRef start = i64_constant(cg, 0);
  LLVMValueRef count = loop->extent_param >= 0 ? cg->params[loop->extent_param]
                                               : i64_constant(cg, loop->extent);
  if (loop->parallel) {
    start = cg->begin;
    count = LLVMBuildSub(cg->em.builder, cg->end, cg->begin, "count");
  }
  if (loop->vector_width > 1) {
    emit_vector_loop(cg, id, start, count);
    return;
  }
  int64_t unroll = loop->unroll < 1 ? 1 : loop->unroll > MAX_UNROLL ? MAX_UNROLL : loop->unroll;
  int64_t constant_count = 0;
  if (!constant_value(count, &constant_count)) unroll = 1; /* runtime bounds: no remainder code */
  copies_t main_copies = {id, cg->lanes, (int32_t)unroll, 1, cg->use_partials};
  emit_for(cg, start, unroll > 1 ? i64_constant(cg, constant_count / unroll) : count, unroll,
           emit_scalar_copies, &main_copies);
  if (unroll > 1 && constant_count % unroll) {
    copies_t rest = {id, cg->lanes, (int32_t)(constant_count % unroll), 1, cg->use_partials};
    emit_scalar_copies(cg, add_i64(cg, start, i64_constant(cg, constant_count / unroll * unroll)),
                       &rest);
  }
}

static void emit_block(codegen_t* cg, const stax_kir_block_t* block) {
  for (const stax_kir_stmt_t* s = block->first; s && cg->status == STAX_OK; s = s->next) {
    cg->stamp++;
    switch (s->kind) {
      case STAX_KIR_STMT_LOOP: emit_loop(cg, s->loop); break;
      case STAX_KIR_STMT_STORE: emit_store(cg, s); break;
      case STAX_KIR_STMT_DECLARE:
      case STAX_KIR_STMT_ASSIGN:
      case STAX_KIR_STMT_REDUCE: emit_local_statement(cg, s); break;
    }
  }
}

/* ---- functions --------------------------------------------------------------------------- */

static void add_string_attribute(codegen_t* cg, LLVMValueRef function, const char* key,
                                 const char* value) {
  LLVMAttributeRef attribute = LLVMCreateStringAttribute(cg->em.context, key, (unsigned)strlen(key),
                                                         value, (unsigned)strlen(value));
  LLVMAddAttributeAtIndex(function, LLVMAttributeFunctionIndex, attribute);
}

static void add_enum_attribute(codegen_t* cg, LLVMValueRef function, LLVMAttributeIndex index,
                               const char* name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(function, index, LLVMCreateEnumAttribute(cg->em.context, kind, 0));
}

static void add_target_attributes(codegen_t* cg, LLVMValueRef function) {
  if (cg->target->cpu && cg->target->cpu[0])
    add_string_attribute(cg, function, "target-cpu", cg->target->cpu);
  if (cg->target->features && cg->target->features[0])
    add_string_attribute(cg, function, "target-features", cg->target->features);
  if (cg->target->vector_bits >= 512) {
    /* Without these, LLVM splits 512-bit vectors in two on CPUs it tunes for 256 bits. */
    add_string_attribute(cg, function, "prefer-vector-width", "512");
    add_string_attribute(cg, function, "min-legal-vector-width", "512");
  }
  add_enum_attribute(cg, function, LLVMAttributeFunctionIndex, "nounwind");
}

static void emit_stage(codegen_t* cg, int32_t stage_index, const char* symbol) {
  stax_llvm_emitter_t* em = &cg->em;
  const stax_kir_kernel_t* kir = cg->kir;
  int32_t buffer_count = kir->buffer_count;
  char name[256];

  /* The body: (ptr noalias b0, ..., i64 begin, i64 end[, ptr params]). A rows-generic
   * kernel's parameter values come in the slot after the buffers' in the entry point's array
   * and are loaded once, at the body's start. */
  int32_t extra = kir->rows_generic || kir->symbolic ? 3 : 2;
  LLVMTypeRef params[MAX_STACK_PARAMS];
  LLVMTypeRef* body_params = params;
  LLVMTypeRef* heap_params = NULL;
  if (buffer_count + 3 > MAX_STACK_PARAMS) {
    if (stax_allocator_malloc(cg->allocator, sizeof(LLVMTypeRef) * (size_t)(buffer_count + 3),
                              (void**)&heap_params) != STAX_OK) {
      codegen_fail(cg, "out of memory", NULL);
      return;
    }
    body_params = heap_params;
  }
  for (int32_t b = 0; b < buffer_count; b++) body_params[b] = em->ptr;
  body_params[buffer_count] = em->i64;
  body_params[buffer_count + 1] = em->i64;
  body_params[buffer_count + 2] = em->ptr;
  LLVMTypeRef body_type =
      LLVMFunctionType(em->void_type, body_params, (unsigned)(buffer_count + extra), 0);
  snprintf(name, sizeof(name), "%s_stage%d.body", symbol, (int)stage_index);
  LLVMValueRef body = LLVMAddFunction(em->module, name, body_type);
  LLVMSetLinkage(body, LLVMInternalLinkage);
  add_target_attributes(cg, body);
  for (int32_t b = 0; b < buffer_count; b++) {
    add_enum_attribute(cg, body, (LLVMAttributeIndex)(b + 1), "noalias");
    LLVMValueRef param = LLVMGetParam(body, (unsigned)b);
    LLVMSetValueName2(param, kir->buffers[b]->name, strlen(kir->buffers[b]->name));
    cg->buffers[b] = param;
  }
  cg->begin = LLVMGetParam(body, (unsigned)buffer_count);
  cg->end = LLVMGetParam(body, (unsigned)buffer_count + 1);
  LLVMSetValueName2(cg->begin, "begin", 5);
  LLVMSetValueName2(cg->end, "end", 3);

  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(em->context, body, "entry");
  LLVMBasicBlockRef start = LLVMAppendBasicBlockInContext(em->context, body, "start");
  LLVMPositionBuilderAtEnd(em->builder, entry);
  LLVMValueRef jump = LLVMBuildBr(em->builder, start);
  LLVMPositionBuilderBefore(cg->alloca_builder, jump);
  LLVMPositionBuilderAtEnd(em->builder, start);
  if (kir->rows_generic || kir->symbolic) {
    LLVMValueRef array = LLVMGetParam(body, (unsigned)buffer_count + 2);
    for (int32_t p = 0; p < kir->param_count; p++) {
      LLVMValueRef index = i64_constant(cg, p);
      LLVMValueRef slot = LLVMBuildGEP2(em->builder, em->i64, array, &index, 1, "");
      cg->params[p] = LLVMBuildLoad2(em->builder, em->i64, slot, kir->params[p].name);
    }
  }
  cg->vector_loop = -1;
  cg->lanes = 1;
  cg->copy = 0;
  cg->use_partials = false;
  for (int32_t l = 0; l < kir->local_count; l++) cg->local_slots[l] = NULL;
  emit_block(cg, &kir->stages[stage_index]->body);
  LLVMBuildRetVoid(em->builder);

  /* The entry point: loads the buffer pointers from the array and calls the body. */
  LLVMTypeRef entry_params[3] = {em->ptr, em->i64, em->i64};
  LLVMTypeRef entry_type = LLVMFunctionType(em->void_type, entry_params, 3, 0);
  snprintf(name, sizeof(name), "%s_stage%d", symbol, (int)stage_index);
  LLVMValueRef function = LLVMAddFunction(em->module, name, entry_type);
  add_target_attributes(cg, function);
  LLVMPositionBuilderAtEnd(em->builder,
                           LLVMAppendBasicBlockInContext(em->context, function, "entry"));
  LLVMValueRef args_stack[MAX_STACK_PARAMS];
  LLVMValueRef* args = args_stack;
  LLVMValueRef* heap_args = NULL;
  if (body_params == heap_params) {
    if (stax_allocator_malloc(cg->allocator, sizeof(LLVMValueRef) * (size_t)(buffer_count + 3),
                              (void**)&heap_args) != STAX_OK) {
      codegen_fail(cg, "out of memory", NULL);
      stax_allocator_free(cg->allocator, heap_params,
                          sizeof(LLVMTypeRef) * (size_t)(buffer_count + 3));
      return;
    }
    args = heap_args;
  }
  LLVMValueRef array = LLVMGetParam(function, 0);
  for (int32_t b = 0; b < buffer_count; b++) {
    LLVMValueRef index = i64_constant(cg, b);
    LLVMValueRef slot = LLVMBuildGEP2(em->builder, em->ptr, array, &index, 1, "");
    args[b] = LLVMBuildLoad2(em->builder, em->ptr, slot, kir->buffers[b]->name);
  }
  args[buffer_count] = LLVMGetParam(function, 1);
  args[buffer_count + 1] = LLVMGetParam(function, 2);
  if (kir->rows_generic || kir->symbolic) {
    LLVMValueRef index = i64_constant(cg, buffer_count);
    LLVMValueRef slot = LLVMBuildGEP2(em->builder, em->ptr, array, &index, 1, "");
    args[buffer_count + 2] = LLVMBuildLoad2(em->builder, em->ptr, slot, "params");
  }
  LLVMBuildCall2(em->builder, body_type, body, args, (unsigned)(buffer_count + extra), "");
  LLVMBuildRetVoid(em->builder);
  stax_allocator_free(cg->allocator, heap_params, sizeof(LLVMTypeRef) * (size_t)(buffer_count + 3));
  stax_allocator_free(cg->allocator, heap_args, sizeof(LLVMValueRef) * (size_t)(buffer_count + 3));
}

stax_status_t stax_llvm_emit_kernel(LLVMContextRef context, const stax_kir_kernel_t* kernel,
                                    const stax_llvm_target_t* target, const char* symbol,
                                    LLVMModuleRef* out_module) {
  *out_module = NULL;
  codegen_t cg;
  memset(&cg, 0, sizeof(cg));
  cg.allocator = stax_allocator_system();
  cg.kir = kernel;
  cg.target = target;
  LLVMModuleRef module = LLVMModuleCreateWithNameInContext(symbol, context);
  LLVMBuilderRef builder = LLVMCreateBuilderInContext(context);
  cg.alloca_builder = LLVMCreateBuilderInContext(context);
  stax_llvm_emitter_init(&cg.em, context, module, builder);
  cg.em.avx512 = target && target->vector_bits >= 512; /* 512-bit vectors: avx512f, not capped */

  size_t buffers = (size_t)kernel->buffer_count + 1, loops = (size_t)kernel->loop_count + 1;
  size_t locals = (size_t)kernel->local_count + 1, exprs = (size_t)kernel->expr_count + 1;
  stax_allocator_t a = cg.allocator;
  stax_status_t status = STAX_OK;
  STAX_GOTO_IF_ERROR(status,
                     stax_allocator_calloc(a, buffers, sizeof(LLVMValueRef), (void**)&cg.buffers),
                     cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(a, loops, sizeof(LLVMValueRef), (void**)&cg.counters), cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(a, locals, sizeof(LLVMValueRef), (void**)&cg.local_slots),
      cleanup);
  STAX_GOTO_IF_ERROR(status,
                     stax_allocator_calloc(a, locals, sizeof(LLVMTypeRef), (void**)&cg.local_types),
                     cleanup);
  STAX_GOTO_IF_ERROR(
      status,
      stax_allocator_calloc(a, locals * MAX_UNROLL, sizeof(LLVMValueRef), (void**)&cg.partials),
      cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(a, locals, sizeof(LLVMTypeRef), (void**)&cg.partial_types),
      cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(a, exprs, sizeof(LLVMValueRef), (void**)&cg.cache), cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(a, exprs, sizeof(uint32_t), (void**)&cg.cache_stamp), cleanup);

  for (int32_t s = 0; s < kernel->stage_count && cg.status == STAX_OK; s++)
    emit_stage(&cg, s, symbol);
  status = cg.status;
  cg.status = STAX_OK;

cleanup:
  stax_allocator_free(a, cg.buffers, buffers * sizeof(LLVMValueRef));
  stax_allocator_free(a, cg.counters, loops * sizeof(LLVMValueRef));
  stax_allocator_free(a, cg.local_slots, locals * sizeof(LLVMValueRef));
  stax_allocator_free(a, cg.local_types, locals * sizeof(LLVMTypeRef));
  stax_allocator_free(a, cg.partials, locals * MAX_UNROLL * sizeof(LLVMValueRef));
  stax_allocator_free(a, cg.partial_types, locals * sizeof(LLVMTypeRef));
  stax_allocator_free(a, cg.cache, exprs * sizeof(LLVMValueRef));
  stax_allocator_free(a, cg.cache_stamp, exprs * sizeof(uint32_t));
  LLVMDisposeBuilder(builder);
  LLVMDisposeBuilder(cg.alloca_builder);
  if (status != STAX_OK) {
    LLVMDisposeModule(module);
    return status;
  }
  *out_module = module;
  return STAX_OK;
}

#else
typedef int stax_llvm_codegen_unused_t;
#endif /* STAX_HAVE_LLVM */
