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
  /* GPU: always false for now; gpu_unavailable names what is missing on this machine (the
   * CUDA driver, a device, NVRTC) or, when all of it is there, says that the execution path
   * is not implemented yet (docs/gpu.md). */
  bool gpu_available;
  char gpu_unavailable[1024];
  /* CUDA, loaded at run time (never linked): the driver (libcuda.so.1, cuInit, device 0)... */
  bool cuda_driver;
  int32_t cuda_driver_version; /* 1000 * major + 10 * minor */
  int32_t cuda_device_count;
  char cuda_device_name[128];
  int32_t cuda_compute_major, cuda_compute_minor;
  char cuda_driver_unavailable[512]; /* why not ("" when found) */
  /* ... and NVRTC (STAX_NVRTC_PATH, else libnvrtc.so, .so.13, .so.12, /usr/local/cuda/lib64). */
  bool cuda_nvrtc;
  int32_t cuda_nvrtc_major, cuda_nvrtc_minor;
  char cuda_nvrtc_path[512];
  char cuda_nvrtc_unavailable[1024];
} stax_build_info_t;
void stax_build_info(stax_build_info_t* out_info);

/* Whether programs can be compiled for `target`: OK for "cpu"; UNIMPLEMENTED for "cuda" with a
 * message naming what this machine lacks (driver, device, NVRTC), or saying that the GPU
 * execution path is not implemented yet when nothing is missing; INVALID_ARGUMENT for other
 * names. */
STAX_MUST_USE stax_status_t stax_target_check(const char* target);

#ifdef __cplusplus
}
#endif

#endif /* STAX_STAX_H_ */
