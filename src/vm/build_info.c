/* stax_build_info: one place that says what this build and machine give programs, for
 * `stax version --verbose`, Python's stax.build_info() and C users. */
#include <stdio.h>
#include <string.h>

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
  out->gpu_available = false;
  out->gpu_unavailable = "stax runs on the cpu for now (no GPU backend yet)";
}
