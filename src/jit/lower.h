/* Lowering of fusion groups (jit.h) to kernel IR (kernel_ir.h): the entry point and the
 * choices the backend passes down. The pieces live in lower_*.c around lower_internal.h. */
#ifndef STAX_JIT_LOWER_H_
#define STAX_JIT_LOWER_H_

#include "jit/jit.h"
#include "jit/kernel_ir.h"

typedef struct stax_jit_lower_options_t {
  int32_t vector_bits;  /* 128, 256 or 512 */
  int32_t thread_count; /* threads the kernel will run on (>= 1) */
  bool has_fma;
} stax_jit_lower_options_t;

/* Builds verified kernel IR for the group. Buffers 0..input_count-1 are the group's inputs in
 * order, then its outputs, then scratch. UNIMPLEMENTED (with the reason) when the group is
 * not something lowering knows how to fuse; INVALID_ARGUMENT when the description is
 * malformed (bad value indices, dims that do not match the ops). */
STAX_MUST_USE stax_status_t stax_jit_lower_group(const stax_jit_group_t* group,
                                                 const stax_jit_lower_options_t* options,
                                                 stax_allocator_t allocator,
                                                 stax_kir_kernel_t** out_kernel);

#endif /* STAX_JIT_LOWER_H_ */
