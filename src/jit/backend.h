/* The contract between the backend-neutral JIT (jit.c: lowering, kernels, running) and a code
 * generator (the LLVM one in llvm_jit.c; a CUDA one later): a small vtable that compiles
 * verified kernel IR into one callable function per stage and frees it again. */
#ifndef STAX_JIT_BACKEND_H_
#define STAX_JIT_BACKEND_H_

#include "jit/jit.h"
#include "jit/kernel_ir.h"

/* A stage's entry point: buffers[i] is the first element of kernel buffer i; [begin, end) is
 * the part of the stage's parallel loop to run (ignored by stages without one, which the host
 * calls with 0, 1). */
typedef void (*stax_jit_stage_fn)(void* const* buffers, int64_t begin, int64_t end);

/* What a backend hands back for one kernel. Texts are allocated with the compile's allocator
 * (stax_jit_text_free_string) and may be NULL. */
typedef struct stax_jit_code_t {
  void* handle; /* the backend's (resource tracker, module...) */
  uint64_t cache_key; /* the backend's: the symbol's key when it came from / went to the
                       * object cache, else 0 */
  bool from_cache;    /* loaded from the object cache: no optimization or code generation */
  int32_t stage_count;
  stax_jit_stage_fn* stages; /* stage_count entries, allocated with the allocator */
  char* llvm_ir;
  char* llvm_ir_optimized;
  char* assembly;
} stax_jit_code_t;

typedef struct stax_jit_backend_vtable_t {
  const char* name;
  stax_jit_target_info_t (*target)(void* self);
  /* Compiles `kernel` (verified). On error nothing is left allocated. */
  stax_status_t (*compile)(void* self, const stax_kir_kernel_t* kernel,
                           const stax_jit_compile_options_t* options, stax_allocator_t allocator,
                           stax_jit_code_t* out_code);
  /* Frees the machine code and everything in `code`. */
  void (*release)(void* self, stax_jit_code_t* code, stax_allocator_t allocator);
} stax_jit_backend_vtable_t;

/* Starts the LLVM backend (once per process; later calls return the same one, or the same
 * error). UNIMPLEMENTED when built without LLVM. */
STAX_MUST_USE stax_status_t stax_llvm_backend_start(const stax_jit_backend_vtable_t** out_vtable,
                                                    void** out_self);

#endif /* STAX_JIT_BACKEND_H_ */
