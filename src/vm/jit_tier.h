/* The JIT tier (layer 6 integration): at each segment entry a JIT guard in the bytecode asks
 * the tier whether a compiled version exists for the live shapes, and a CALL_FUNC runs it; see docs/jit.md,
 * "Tiering". The backend (src/jit/jit.h) compiles and runs the kernels; this layer decides
 * what to compile (fusion groups from a segment's compute instructions), guards calls with a
 * shape signature, caches versions per segment with LRU eviction, compiles in the background
 * or inline, and falls back to the interpreter on any failure. */
#ifndef STAX_VM_JIT_TIER_H_
#define STAX_VM_JIT_TIER_H_

#include "stax/vm.h"

struct stax_context_s;
struct stax_program_s;

/* Per-context scratch; created by stax_context_create when options ask for the JIT. */
STAX_MUST_USE stax_status_t stax_vm_jit_frame_create(struct stax_context_s* ctx);
void stax_vm_jit_frame_destroy(struct stax_context_s* ctx);

/* The JIT guard before `segment` (JUMP_IF_SHAPE_UNMATCHED with a STAX_VM_SIGNATURE_JIT
 * signature): counts the entry and the live shape signature (tiering: queues or runs a
 * compile once it recurs), and matches it against the segment's compiled versions.
 * *out_unmatched false: a version matched; its kernels are held for the CALL_FUNC that
 * follows. Errors only when an allocation the interpreter would also make fails. */
STAX_MUST_USE stax_status_t stax_vm_jit_segment_guard(struct stax_context_s* ctx, int32_t segment,
                                                      bool* out_unmatched);
/* The CALL_FUNC of STAX_VM_JIT_FUNCTION after a guard: runs the matched version in place of
 * the segment. *out_next is -1 when it ran (the interpreter goes on to the JUMP past the
 * segment), else the segment's first word (a kernel refused its arguments: interpret).
 * Errors in verify mode (a mismatch), or when no guard matched before it. */
STAX_MUST_USE stax_status_t stax_vm_jit_segment_call(struct stax_context_s* ctx,
                                                     int32_t* out_next);

/* Frees the program's cache (joins the background compiler). */
void stax_vm_jit_cache_destroy(struct stax_program_s* program);
/* Around each stax_context_run: classify the call (every lowerable group ran a kernel,
 * some did, none did) in the program's statistics. No-ops without the JIT. */
void stax_vm_jit_run_begin(struct stax_context_s* ctx);
void stax_vm_jit_run_end(struct stax_context_s* ctx);

/* For `stax source`: make later compiles keep their LLVM IR and assembly, then print every
 * compiled kernel's text (run the program in sync mode in between). */
void stax_vm_jit_keep_texts(struct stax_program_s* program);
stax_status_t stax_vm_jit_set_cache_dir(struct stax_program_s* program, const char* dir);
STAX_MUST_USE stax_status_t stax_vm_jit_print_sources(struct stax_program_s* program,
                                                      bool assembly, FILE* out);

#endif /* STAX_VM_JIT_TIER_H_ */
