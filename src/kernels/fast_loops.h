/* The generic kernels' hottest float32 loops, compiled once per instruction-set level
 * (baseline, AVX2 + FMA, AVX-512) from one C body (kernels/fast_loops_body.h) and picked at
 * run time by stax_isa(): the baseline x86-64 build has only SSE2's four lanes and no FMA,
 * which left interpreted Softmax, LayerNorm and Erf at 2.5-4x ONNX Runtime's time on an AVX2
 * machine. Every variant computes the same formulas; with FMA the polynomials round once
 * per multiply-add instead of twice, so the variants may differ in the last bits (well
 * inside what float32 carries; tests compare every variant against double references). */
#ifndef STAX_KERNELS_FAST_LOOPS_H_
#define STAX_KERNELS_FAST_LOOPS_H_

#include <stdint.h>

#include "stax/runtime.h"

typedef struct stax_fast_loops_t {
  stax_isa_t isa;
  /* out[i] = erf(in[i]) (kernels/fast_math.h's stax_erf_f32), contiguous. */
  void (*erf_row)(float* out, const float* in, int64_t n);
  /* out[i] = 0.5 in[i] (1 + erf(in[i] / sqrt 2)): Gelu with approximate = "none"
   * (stax_gelu_f32, accurate in the negative tail too). */
  void (*gelu_row)(float* out, const float* in, int64_t n);
  /* Softmax of one contiguous row: NaN everywhere when the row holds a NaN or its maximum
   * is infinite (as the double path computes it); exp in float32, the sum in double. */
  void (*softmax_row)(float* out, const float* in, int64_t n);
  /* LayerNormalization of one contiguous row in double arithmetic: y = (x - mean) * inv_std
   * * scale + bias (bias may be NULL); writes the row's mean and 1 / sqrt(var + epsilon). */
  void (*layer_norm_row)(float* y, const float* x, int64_t n, double epsilon,
                         const double* scale, const double* bias, double* mean,
                         double* inv_std);
} stax_fast_loops_t;

/* The loops of the current level (stax_isa(), which a cap may lower). */
const stax_fast_loops_t* stax_fast_loops(void);
/* The loops of one level, for tests; NULL when the CPU lacks it. */
const stax_fast_loops_t* stax_fast_loops_for(stax_isa_t isa);

#endif /* STAX_KERNELS_FAST_LOOPS_H_ */
