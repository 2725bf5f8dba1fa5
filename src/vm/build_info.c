/* stax_build_info: one place that says what this build and machine give programs, for
 * `stax version --verbose`, Python's stax.build_info() and C users. */
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_loader.h"
#include "jit/jit.h"
#include "jit/object_cache.h"
#include "kernels/gemm.h"
#include "stax/stax.h"

void stax_build_info(stax_build_info_t* out) {
  if (!out) return;
  memset(out, 0, sizeof(*out));
  out->version = stax_version();
  out->isa = stax_isa();
  out->isa_detected = stax_isa_detected();
  out->gemm_variant = stax_gemm_isa_name();
  stax_gemm_f32_tile(&out->gemm_tile_rows, &out->gemm_tile_cols);
  stax_jit_backend_t* backend = NULL;
  stax_status_t status = stax_jit_backend_get(&backend);
  if (status == STAX_OK) {
    stax_jit_target_info_t target = stax_jit_backend_target(backend);
    int32_t lanes = target.vector_bits / 32;
    out->jit_available = true;
    out->jit_backend = target.name;
    out->jit_cpu = target.cpu;
    out->jit_vector_bits = target.vector_bits;
    out->jit_fma = target.has_fma;
    out->jit_matmul_tile_rows = stax_jit_matmul_tile_rows(lanes);
    out->jit_matmul_tile_cols = 2 * lanes;
  } else {
    snprintf(out->jit_unavailable, sizeof(out->jit_unavailable), "%s",
             stax_status_message(status));
    stax_status_free(status);
  }
  out->jit_cache = stax_jit_cache_dir(out->jit_cache_dir, sizeof(out->jit_cache_dir));
  if (!out->jit_cache) out->jit_cache_dir[0] = '\0';
  const stax_cuda_driver_t* driver = NULL;
  status = stax_cuda_driver_get(&driver);
  if (status == STAX_OK) {
    out->cuda_driver = true;
    out->cuda_driver_version = driver->driver_version;
    out->cuda_device_count = driver->device_count;
    snprintf(out->cuda_device_name, sizeof(out->cuda_device_name), "%s", driver->device_name);
    out->cuda_compute_major = driver->compute_major;
    out->cuda_compute_minor = driver->compute_minor;
  } else {
    snprintf(out->cuda_driver_unavailable, sizeof(out->cuda_driver_unavailable), "%s",
             stax_status_message(status));
    stax_status_free(status);
  }
  const stax_cuda_nvrtc_t* nvrtc = NULL;
  status = stax_cuda_nvrtc_get(&nvrtc);
  if (status == STAX_OK) {
    out->cuda_nvrtc = true;
    out->cuda_nvrtc_major = nvrtc->major;
    out->cuda_nvrtc_minor = nvrtc->minor;
    snprintf(out->cuda_nvrtc_path, sizeof(out->cuda_nvrtc_path), "%s", nvrtc->path);
  } else {
    snprintf(out->cuda_nvrtc_unavailable, sizeof(out->cuda_nvrtc_unavailable), "%s",
             stax_status_message(status));
    stax_status_free(status);
  }
  /* No GPU execution path yet, whatever loads. */
  bool ready = false;
  out->gpu_available = false;
  stax_cuda_describe(&ready, out->gpu_unavailable, sizeof(out->gpu_unavailable));
}

stax_status_t stax_target_check(const char* target) {
  if (!target) return stax_status_make(STAX_INVALID_ARGUMENT, "target is NULL");
  if (strcmp(target, "cpu") == 0) return STAX_OK;
  if (strcmp(target, "cuda") == 0 || strcmp(target, "gpu") == 0) {
    bool ready = false;
    char why[1024];
    stax_cuda_describe(&ready, why, sizeof(why));
    if (ready)
      return stax_status_make(STAX_UNIMPLEMENTED, "target '%s' is not available yet: %s", target,
                              why);
    return stax_status_make(STAX_UNIMPLEMENTED, "target '%s' is not available on this machine: %s",
                            target, why);
  }
  return stax_status_make(STAX_INVALID_ARGUMENT, "unknown target '%s' (targets: cpu, cuda)",
                          target);
}
