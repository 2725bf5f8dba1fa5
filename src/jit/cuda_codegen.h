/* Kernel IR -> CUDA C: one `extern "C" __global__` function per stage, the source NVRTC
 * compiles to PTX (src/cuda/cuda_loader.h). No GPU execution path uses it yet (docs/gpu.md);
 * tests compile it with NVRTC and, through a small host shim, as plain C on the CPU.
 *
 * Mapping: a stage whose body is one loop takes the perfect nest of loops at its top (each
 * loop's body exactly one loop, down to the first body that is not) as its parallel work:
 * the product of their extents is the number of work items, walked by a grid-stride loop
 * over blockIdx.x * blockDim.x + threadIdx.x, each item decoding its counters with / and %.
 * Everything inside runs sequentially in its thread, vector loops as scalar loops (lanes one
 * after another), so REDUCE into a local declared outside a vector loop is a plain running
 * reduction. A stage whose body is not a single loop runs on thread 0 of block 0. Any launch
 * shape is correct; the stage's work item count is what a host would size the grid by.
 * Row kernels (reductions over a row) instead run one block per row where their structure
 * allows: the row's loops spread over the block's threads, reductions combined with warp
 * shuffles and shared memory (cuda_codegen.c, "Block-per-row stages").
 *
 * Refused (UNIMPLEMENTED naming the reason), never approximated: rows-generic and symbolic
 * kernels (run-time parameters), scratch buffers (no device allocator), float16 / bfloat16,
 * integer pow, and anything else the emitter does not know. */
#ifndef STAX_JIT_CUDA_CODEGEN_H_
#define STAX_JIT_CUDA_CODEGEN_H_

#include "jit/kernel_ir.h"

#define STAX_CUDA_MAX_STAGES 32

typedef struct stax_cuda_stage_launch_t {
  char entry[128];    /* the stage's __global__ function */
  int64_t work_items; /* grid-stride iterations (1 for a serial stage, 0: nothing to do) */
  bool serial;        /* the stage runs on one thread */
  /* One block per work item (a row kernel's row: see "Block-per-row stages" in the .c file):
   * blockDim.x must be a multiple of 32 and at most 1024; grid-stride over blockIdx.x. */
  bool block_per_item;
} stax_cuda_stage_launch_t;

typedef struct stax_cuda_codegen_options_t {
  /* Row kernels one block per row (warp-shuffle + shared memory reductions) where their
   * structure allows, instead of one thread per row. Default (options NULL): true. */
  bool block_rows;
} stax_cuda_codegen_options_t;

typedef struct stax_cuda_source_t {
  char* text; /* NUL-terminated, allocated with the allocator (stax_jit_text_free_string) */
  int32_t stage_count;
  stax_cuda_stage_launch_t stages[STAX_CUDA_MAX_STAGES];
  /* Every entry takes one pointer per kernel buffer, in buffer order: inputs `const T*`,
   * outputs `T*` (bool is one byte: unsigned char). */
  int32_t buffer_count;
} stax_cuda_source_t;

/* The CUDA C for a verified kernel (options may be NULL). On error *out is left empty. */
STAX_MUST_USE stax_status_t stax_cuda_codegen(const stax_kir_kernel_t* kernel,
                                              const stax_cuda_codegen_options_t* options,
                                              stax_allocator_t allocator,
                                              stax_cuda_source_t* out);
void stax_cuda_source_free(stax_cuda_source_t* source, stax_allocator_t allocator);

#endif /* STAX_JIT_CUDA_CODEGEN_H_ */
