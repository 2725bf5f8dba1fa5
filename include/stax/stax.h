/* stax umbrella header: the whole public C API. */
#ifndef STAX_STAX_H_
#define STAX_STAX_H_

#include "stax/base.h"
#include "stax/runtime.h"
#include "stax/shape.h"
#include "stax/graph.h"
#include "stax/vm.h"
#include "stax/npy.h"
#include "stax/onnx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library version, "MAJOR.MINOR.PATCH". */
const char* stax_version(void);

/* What this build and machine give programs: the ISA level, the generic GEMM's register tile,
 * the JIT (and why not, when it is unavailable), the JIT's kernel cache and the GPU. Strings
 * are static or borrowed for the process's life. Starts the JIT backend (LLVM) if it has not
 * started yet. */
typedef struct stax_build_info_t {
  const char* version;
  stax_isa_t isa;          /* in use (after STAX_ISA / stax_set_isa_cap) */
  stax_isa_t isa_detected; /* the CPU's */
  const char* gemm_variant;
  int32_t gemm_tile_rows, gemm_tile_cols;
  bool jit_available;
  const char* jit_backend;  /* "llvm", or NULL */
  const char* jit_cpu;      /* LLVM's name for the host CPU */
  int32_t jit_vector_bits;  /* 128, 256 or 512 */
  bool jit_fma;
  int32_t jit_matmul_tile_rows, jit_matmul_tile_cols;
  char jit_unavailable[256]; /* why the JIT is off ("" when available) */
  bool jit_cache;           /* kernels kept on disk across processes */
  char jit_cache_dir[1024];
  bool gpu_available;
  const char* gpu_unavailable; /* why no GPU target */
} stax_build_info_t;
void stax_build_info(stax_build_info_t* out_info);

#ifdef __cplusplus
}
#endif

#endif /* STAX_STAX_H_ */
