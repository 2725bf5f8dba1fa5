/* kernels/fast_loops.h's variants: one C body (kernels/fast_loops_body.h) compiled per level
 * with GCC target attributes, so the baseline build carries AVX2 and AVX-512 code that only
 * runs where the CPU (and the ISA cap) allow it. */
#include "kernels/fast_loops.h"

/* The bodies pass vectors of the level's width between always-inlined helpers: no call
 * boundary, so GCC's note that a wider level changes their calling convention does not
 * apply. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#include <math.h>

#include "kernels/fast_math.h"
#include "kernels/gemm.h" /* STAX_KERNEL_OPTIMIZE */

#define STAX_FAST_LOOP_CONTRACT STAX_KERNEL_OPTIMIZE("fp-contract=fast")

#define FAST_LOOP(name) fast_##name##_baseline
#define FAST_LOOP_TARGET
#define FAST_LOOP_LANES 4
#include "kernels/fast_loops_body.h"
#undef FAST_LOOP
#undef FAST_LOOP_TARGET
#undef FAST_LOOP_LANES

static const stax_fast_loops_t kBaseline = {STAX_ISA_BASELINE, fast_erf_baseline,
                                            fast_gelu_baseline, fast_softmax_row_baseline,
                                            fast_layer_norm_row_baseline};

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define FAST_LOOPS_X86 1

#define FAST_LOOP(name) fast_##name##_avx2
#define FAST_LOOP_TARGET __attribute__((target("avx2,fma")))
#define FAST_LOOP_LANES 8
#include "kernels/fast_loops_body.h"
#undef FAST_LOOP
#undef FAST_LOOP_TARGET
#undef FAST_LOOP_LANES

static const stax_fast_loops_t kAvx2 = {STAX_ISA_AVX2, fast_erf_avx2, fast_gelu_avx2,
                                        fast_softmax_row_avx2, fast_layer_norm_row_avx2};

#define FAST_LOOP(name) fast_##name##_avx512
#define FAST_LOOP_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define FAST_LOOP_LANES 16
#include "kernels/fast_loops_body.h"
#undef FAST_LOOP
#undef FAST_LOOP_TARGET
#undef FAST_LOOP_LANES

static const stax_fast_loops_t kAvx512 = {STAX_ISA_AVX512, fast_erf_avx512, fast_gelu_avx512,
                                          fast_softmax_row_avx512, fast_layer_norm_row_avx512};
#else
#define FAST_LOOPS_X86 0
#endif

const stax_fast_loops_t* stax_fast_loops_for(stax_isa_t isa) {
  if (isa > stax_isa_detected()) return NULL;
#if FAST_LOOPS_X86
  if (isa == STAX_ISA_AVX512) return &kAvx512;
  if (isa == STAX_ISA_AVX2) return &kAvx2;
#endif
  return isa == STAX_ISA_BASELINE ? &kBaseline : NULL;
}

const stax_fast_loops_t* stax_fast_loops(void) {
  const stax_fast_loops_t* loops = stax_fast_loops_for(stax_isa());
  return loops ? loops : &kBaseline;
}
