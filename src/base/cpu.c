/* The instruction-set level of the CPU stax runs on, and the cap that lowers it.
 *
 * Every kernel that has per-ISA code asks stax_isa() which level to use: the generic kernels'
 * GEMM micro-kernels and float32 loops (kernels/fast_loops.c) on every call, the LLVM
 * backend once when it starts (its target features and vector width). Detection is at run
 * time, never assumed at build time; the cap (STAX_ISA, or stax_set_isa_cap) exists so every
 * path below the machine's own can be run and tested on it: an AVX-512 machine runs the AVX2
 * and SSE2 code as an older CPU would. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "stax/runtime.h"

#if defined(__x86_64__) || defined(__i386__)
#define CPU_X86 1
#else
#define CPU_X86 0
#endif

/* -1: no cap; else the highest stax_isa_t allowed. */
static atomic_int isa_cap = -1;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static stax_isa_t isa_detected = STAX_ISA_BASELINE;

const char* stax_isa_name(stax_isa_t isa) {
  switch (isa) {
    case STAX_ISA_AVX512: return "avx512";
    case STAX_ISA_AVX2: return "avx2";
    case STAX_ISA_BASELINE: return CPU_X86 ? "sse2" : "baseline";
  }
  return "unknown";
}

/* "native" (or an empty name) means no cap: *out = -1. */
static bool parse_isa(const char* name, int* out) {
  static const struct {
    const char* name;
    int isa;
  } kNames[] = {{"native", -1},   {"", -1},       {"avx512", STAX_ISA_AVX512},
                {"avx2", STAX_ISA_AVX2}, {"sse2", STAX_ISA_BASELINE},
                {"baseline", STAX_ISA_BASELINE}};
  for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); i++)
    if (strcasecmp(name, kNames[i].name) == 0) {
      *out = kNames[i].isa;
      return true;
    }
  return false;
}

static void isa_init(void) {
#if CPU_X86
  __builtin_cpu_init();
  /* AVX-512 here means the F/BW/DQ/VL set of every AVX-512 CPU since Skylake-SP: the generic
   * kernels' AVX-512 code is compiled for it. libgcc's checks include the OS's XSAVE state. */
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    isa_detected = STAX_ISA_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
      isa_detected = STAX_ISA_AVX512;
  }
#endif
  const char* env = getenv("STAX_ISA");
  if (env) {
    int cap = -1;
    if (parse_isa(env, &cap))
      atomic_store(&isa_cap, cap);
    else /* a typo in an environment variable should not stop a program: say so, run native */
      fprintf(stderr, "[stax] STAX_ISA=%s is not one of avx512, avx2, sse2, native; ignored\n",
              env);
  }
}

stax_isa_t stax_isa_detected(void) {
  pthread_once(&isa_once, isa_init);
  return isa_detected;
}

stax_isa_t stax_isa(void) {
  stax_isa_t detected = stax_isa_detected();
  int cap = atomic_load_explicit(&isa_cap, memory_order_relaxed);
  return cap >= 0 && cap < (int)detected ? (stax_isa_t)cap : detected;
}

stax_status_t stax_set_isa_cap(const char* name) {
  stax_isa_detected(); /* STAX_ISA is read first, so this call wins over it */
  int cap = -1;
  if (!parse_isa(name ? name : "native", &cap))
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "ISA cap '%s' is not one of avx512, avx2, sse2 (or baseline), native",
                            name);
  atomic_store(&isa_cap, cap);
  return STAX_OK;
}
