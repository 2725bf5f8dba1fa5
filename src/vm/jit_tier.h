/* The JIT tier (layer 6 integration): at each segment entry (PROFILE_POINT) the interpreter
 * asks the tier whether a compiled kernel exists for the live shapes; see docs/jit.md,
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

/* Called at the PROFILE_POINT opening `segment`. When a kernel ran the segment, *out_next is
 * the word offset of the instruction after it (the interpreter jumps there); otherwise -1
 * and the interpreter runs the segment. Errors only in verify mode (a mismatch) or when an
 * allocation the interpreter would also have made fails. */
STAX_MUST_USE stax_status_t stax_vm_jit_segment_enter(struct stax_context_s* ctx,
                                                      int32_t segment, int32_t* out_next);

/* Frees the program's cache (joins the background compiler). */
void stax_vm_jit_cache_destroy(struct stax_program_s* program);

/* For `stax source`: make later compiles keep their LLVM IR and assembly, then print every
 * compiled kernel's text (run the program in sync mode in between). */
void stax_vm_jit_keep_texts(struct stax_program_s* program);
STAX_MUST_USE stax_status_t stax_vm_jit_print_sources(struct stax_program_s* program,
                                                      bool assembly, FILE* out);

#endif /* STAX_VM_JIT_TIER_H_ */
