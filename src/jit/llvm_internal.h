/* Shared pieces of the LLVM backend (llvm_codegen.c, llvm_math.c, llvm_jit.c). Only these
 * files include LLVM's C headers; everything else sees jit.h and backend.h. */
#ifndef STAX_JIT_LLVM_INTERNAL_H_
#define STAX_JIT_LLVM_INTERNAL_H_

#include <llvm-c/Core.h>

#include "jit/backend.h"
#include "jit/kernel_ir.h"

/* What code generation needs to know about the target. */
typedef struct stax_llvm_target_t {
  const char* cpu;      /* for the "target-cpu" function attribute */
  const char* features; /* for "target-features" */
  int32_t vector_bits;
  bool has_fma;
} stax_llvm_target_t;

/* An IR builder with the types the backend uses. */
typedef struct stax_llvm_emitter_t {
  LLVMContextRef context;
  LLVMModuleRef module;
  LLVMBuilderRef builder;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, bf16, f32, f64, ptr, void_type;
  /* The target has AVX-512 (and the ISA cap allows it): 16-lane float32 math may use
   * vscalefps, which scales by 2^n with IEEE rounding, subnormals and overflow in one step. */
  bool avx512;
} stax_llvm_emitter_t;

void stax_llvm_emitter_init(stax_llvm_emitter_t* em, LLVMContextRef context, LLVMModuleRef module,
                            LLVMBuilderRef builder);

/* Lanes of a value's type (1 for scalars). */
int32_t stax_llvm_lanes(LLVMValueRef value);
/* `scalar_type` widened to `lanes` (itself for 1). */
LLVMTypeRef stax_llvm_vector_type(LLVMTypeRef scalar_type, int32_t lanes);
/* Constants of a scalar or vector type (splatted). */
LLVMValueRef stax_llvm_const_float(stax_llvm_emitter_t* em, LLVMTypeRef type, double value);
LLVMValueRef stax_llvm_const_int(stax_llvm_emitter_t* em, LLVMTypeRef type, int64_t value);
/* Broadcasts a scalar to `lanes` (a vector or lanes == 1 passes through). */
LLVMValueRef stax_llvm_splat(stax_llvm_emitter_t* em, LLVMValueRef value, int32_t lanes);
/* Calls an overloaded intrinsic ("llvm.fma") instantiated at `overload` (the value type). */
LLVMValueRef stax_llvm_intrinsic(stax_llvm_emitter_t* em, const char* name, LLVMTypeRef overload,
                                 LLVMValueRef* args, int32_t count);
/* The same for intrinsics overloaded on several types ("llvm.fptosi.sat": result, source). */
LLVMValueRef stax_llvm_intrinsic_overloaded(stax_llvm_emitter_t* em, const char* name,
                                            LLVMTypeRef* overloads, int32_t overload_count,
                                            LLVMValueRef* args, int32_t count);
/* Calls the scalar libm function `name` (float or double, one or two arguments) on every
 * lane. */
LLVMValueRef stax_llvm_libm(stax_llvm_emitter_t* em, const char* name, LLVMValueRef a,
                            LLVMValueRef b);

/* Vectorizable float32 approximations (scalar or vector operands), used instead of libm calls
 * that would scalarize. Accuracy (checked in tests/unit/test_jit_llvm.c against libm):
 *   exp, expm1, log: within 3 ulp (subnormal results included); log1p: within 4 ulp;
 *   tanh: within 6 ulp or 1e-9 absolute; erf: 3e-7 absolute (about 5 ulp near 1).
 * NaN in gives NaN out; infinities follow libm. */
LLVMValueRef stax_llvm_exp_f32(stax_llvm_emitter_t* em, LLVMValueRef x);
LLVMValueRef stax_llvm_expm1_f32(stax_llvm_emitter_t* em, LLVMValueRef x);
LLVMValueRef stax_llvm_log_f32(stax_llvm_emitter_t* em, LLVMValueRef x);
LLVMValueRef stax_llvm_log1p_f32(stax_llvm_emitter_t* em, LLVMValueRef x);
LLVMValueRef stax_llvm_tanh_f32(stax_llvm_emitter_t* em, LLVMValueRef x);
LLVMValueRef stax_llvm_erf_f32(stax_llvm_emitter_t* em, LLVMValueRef x);
LLVMValueRef stax_llvm_erfc_f32(stax_llvm_emitter_t* em, LLVMValueRef x);

/* float16 (bfloat false) or bfloat16 values <-> float32, scalar or vector, bit for bit
 * src/runtime/half.c's conversions (llvm_half.c). */
LLVMValueRef stax_llvm_half_to_f32(stax_llvm_emitter_t* em, LLVMValueRef x, bool bfloat);
LLVMValueRef stax_llvm_f32_to_half(stax_llvm_emitter_t* em, LLVMValueRef x, bool bfloat);
/* float32 values rounded to float16 (or bfloat16) and widened back, in one step: the bits of
 * stax_llvm_half_to_f32(stax_llvm_f32_to_half(x)). */
LLVMValueRef stax_llvm_round_to_half(stax_llvm_emitter_t* em, LLVMValueRef x, bool bfloat);

/* Builds the module for a verified kernel: one external function per stage, named
 * "<symbol>_stage<i>", with the signature of stax_jit_stage_fn. */
STAX_MUST_USE stax_status_t stax_llvm_emit_kernel(LLVMContextRef context,
                                                  const stax_kir_kernel_t* kernel,
                                                  const stax_llvm_target_t* target,
                                                  const char* symbol, LLVMModuleRef* out_module);

#endif /* STAX_JIT_LLVM_INTERNAL_H_ */
