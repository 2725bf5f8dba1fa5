/* The conformance runner's shared pieces: comparing a produced tensor with an expected one
 * (compare.c) and the whole-program tests over random shapes and threads (chain.c). The
 * per-op cases and main() are in runner.c. */
#ifndef STAX_CONFORMANCE_RUNNER_H_
#define STAX_CONFORMANCE_RUNNER_H_

#include <stdbool.h>
#include <stddef.h>

#include "stax/stax.h"

/* Compares `got` with `want`: dtype and shape exactly, values within atol + rtol * |want| for
 * floats (NaN equals NaN, infinities must match), exactly otherwise. On a mismatch writes a
 * one-line explanation into `why` and returns false. */
bool conformance_compare(const stax_tensor_t* got, const stax_tensor_t* want, double rtol,
                         double atol, char* why, size_t why_size);

/* Formats a shape as "[2, 3]" into buf. */
void conformance_shape_text(int32_t rank, const int64_t* dims, char* buf, size_t size);

/* The end-to-end tests: one program (LayerNorm -> MatMul -> Add -> Gelu -> Softmax over
 * symbols B, S) compiled once and run with >= 100 random shapes in sequence under both
 * dispatch modes, then from 4 threads at once with a context each. Each returns the number
 * of failures and prints them. */
int conformance_chain_sequential(bool verbose);
int conformance_chain_threads(bool verbose);

#endif /* STAX_CONFORMANCE_RUNNER_H_ */
