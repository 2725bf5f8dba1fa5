/* stax_peak: this machine's physical limits, for the benchmarks to report fractions of them
 * (BENCH.md): float32 FMA throughput per core at each vector width the CPU runs, and a
 * STREAM-like triad (a[i] = b[i] + s * c[i]) for memory bandwidth; on 1 thread and on every
 * core.
 *
 * The FMA loop is inline assembly: ACCUMULATORS independent registers, each updated by one
 * fused multiply-add per iteration from different start values, so no compiler can merge
 * them or drop the work (a loop whose accumulators start equal, written in C, reports about
 * twice the true peak after the compiler folds them). The loop body is exactly ACCUMULATORS
 * FMAs, a decrement and a branch: `objdump -d build/stax_peak` shows it (bench/README.md).
 *
 *   stax_peak [--seconds S] [--threads N] [--json]
 *
 * Prints GFLOP/s per width (sse: mul + add, 4 lanes; avx2: 8-lane FMA; avx512: 16-lane FMA)
 * for 1 thread and N threads (default: every online core), the triad's GB/s for both, and
 * which widths the CPU lacks. x86-64 only; elsewhere it says so and exits 0. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)

/* Twelve accumulators: two FMA pipes of four-cycle latency need eight in flight; twelve leave
 * room for a five-cycle latency. Registers 0..11; 12..13 hold the multiplier and addend. */
#define ACCUMULATORS 12

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Each kernel runs `iterations` loop trips. */
typedef void (*fma_kernel_fn)(uint64_t iterations);

#define FMA12(op, r)                                                                        \
  op " %%" r "13, %%" r "12, %%" r "0\n\t" op " %%" r "13, %%" r "12, %%" r "1\n\t" op        \
     " %%" r "12, %%" r "13, %%" r "2\n\t" op " %%" r "13, %%" r "12, %%" r "3\n\t" op        \
     " %%" r "12, %%" r "13, %%" r "4\n\t" op " %%" r "13, %%" r "12, %%" r "5\n\t" op        \
     " %%" r "12, %%" r "13, %%" r "6\n\t" op " %%" r "13, %%" r "12, %%" r "7\n\t" op        \
     " %%" r "12, %%" r "13, %%" r "8\n\t" op " %%" r "13, %%" r "12, %%" r "9\n\t" op        \
     " %%" r "12, %%" r "13, %%" r "10\n\t" op " %%" r "13, %%" r "12, %%" r "11\n\t"

/* Different start values per accumulator (the index), multiplier just under 1 and a small
 * addend: the values stay finite and normal for any iteration count. */
#define SEED_ACCUMULATORS(set, r)                                                           \
  set(0, r "0") set(1, r "1") set(2, r "2") set(3, r "3") set(4, r "4") set(5, r "5")         \
      set(6, r "6") set(7, r "7") set(8, r "8") set(9, r "9") set(10, r "10") set(11, r "11")

/* One FMA kernel per vector register file: `reg` is ymm or zmm. */
#define SET_VECTOR(i, reg) "vbroadcastss " #i "*4(%[start]), %%" reg "\n\t"
#define DEFINE_FMA_KERNEL(name, isa, reg)                                                         \
  __attribute__((target(isa), noinline)) static void name(uint64_t iterations) {              \
    float start[ACCUMULATORS], mul = 0.9999999f, add = 1e-7f;                                  \
    for (int i = 0; i < ACCUMULATORS; i++) start[i] = (float)(i + 1);                          \
    __asm__ volatile(SEED_ACCUMULATORS(SET_VECTOR, reg) "vbroadcastss %[mul], %%" reg "12\n\t" \
                     "vbroadcastss %[add], %%" reg "13\n\t"                                    \
                     ".p2align 5\n"                                                            \
                     "1:\n\t" FMA12("vfmadd213ps", reg) "dec %[n]\n\t"                         \
                     "jnz 1b\n\t"                                                             \
                     "vzeroupper\n\t"                                                         \
                     : [n] "+r"(iterations)                                                   \
                     : [start] "r"(start), [mul] "m"(mul), [add] "m"(add)                     \
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "memory", "cc");          \
  }

DEFINE_FMA_KERNEL(fma_avx2, "avx2,fma", "ymm")
DEFINE_FMA_KERNEL(fma_avx512, "avx512f", "zmm")

/* SSE has no FMA: a multiply and an add per accumulator (2 flops per lane, two
 * instructions), the peak of code that cannot use FMA: twelve chains, each a mulps then an
 * addps per iteration. */
#define SSE12(op, r)                                                                        \
  op " %%" r ", %%xmm0\n\t" op " %%" r ", %%xmm1\n\t" op " %%" r ", %%xmm2\n\t" op " %%" r   \
     ", %%xmm3\n\t" op " %%" r ", %%xmm4\n\t" op " %%" r ", %%xmm5\n\t" op " %%" r             \
     ", %%xmm6\n\t" op " %%" r ", %%xmm7\n\t" op " %%" r ", %%xmm8\n\t" op " %%" r             \
     ", %%xmm9\n\t" op " %%" r ", %%xmm10\n\t" op " %%" r ", %%xmm11\n\t"

__attribute__((noinline)) static void fma_sse(uint64_t iterations) {
  float start[ACCUMULATORS], mul = 0.9999999f, add = 1e-7f;
  for (int i = 0; i < ACCUMULATORS; i++) start[i] = (float)(i + 1);
#define SET_XMM(i, reg) "movss " #i "*4(%[start]), %%" reg "\n\tshufps $0, %%" reg ", %%" reg "\n\t"
  __asm__ volatile(SEED_ACCUMULATORS(SET_XMM, "xmm")
                   "movss %[mul], %%xmm12\n\tshufps $0, %%xmm12, %%xmm12\n\t"
                   "movss %[add], %%xmm13\n\tshufps $0, %%xmm13, %%xmm13\n\t"
                   ".p2align 5\n"
                   "1:\n\t" SSE12("mulps", "xmm12") SSE12("addps", "xmm13") "dec %[n]\n\t"
                   "jnz 1b\n\t"
                   : [n] "+r"(iterations)
                   : [start] "r"(start), [mul] "m"(mul), [add] "m"(add)
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                     "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "memory", "cc");
#undef SET_XMM
}

typedef struct width_t {
  const char* name;
  const char* feature; /* __builtin_cpu_supports name, NULL: always */
  fma_kernel_fn kernel;
  double flops_per_iteration;
} width_t;

static const width_t widths[] = {
    {"sse", NULL, fma_sse, ACCUMULATORS * 4 * 2},
    {"avx2", "fma", fma_avx2, ACCUMULATORS * 8 * 2},
    {"avx512", "avx512f", fma_avx512, ACCUMULATORS * 16 * 2},
};

static bool width_supported(const width_t* w) {
  if (!w->feature) return true;
  __builtin_cpu_init();
  if (strcmp(w->feature, "fma") == 0)
    return __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  return __builtin_cpu_supports("avx512f");
}

/* ---- threads ----------------------------------------------------------------------------- */

typedef struct job_t {
  const width_t* width;
  uint64_t iterations;
  /* triad */
  float *a, *b, *c;
  size_t from, to;
  int repeats;
  pthread_barrier_t* barrier;
  double seconds;
} job_t;

static void* fma_thread(void* opaque) {
  job_t* job = opaque;
  job->width->kernel(job->iterations / 64 + 1); /* warm the core's clocks */
  pthread_barrier_wait(job->barrier);
  double t0 = now_seconds();
  job->width->kernel(job->iterations);
  job->seconds = now_seconds() - t0;
  return NULL;
}

static void* triad_thread(void* opaque) {
  job_t* job = opaque;
  const float s = 3.0f;
  /* First touch by the thread that will stream the range (pages land near it). */
  for (size_t i = job->from; i < job->to; i++) job->a[i] = job->b[i] = 1.0f, job->c[i] = 2.0f;
  pthread_barrier_wait(job->barrier);
  double best = 1e30;
  for (int r = 0; r < job->repeats; r++) {
    double t0 = now_seconds();
    for (size_t i = job->from; i < job->to; i++) job->a[i] = job->b[i] + s * job->c[i];
    __asm__ volatile("" ::"r"(job->a) : "memory");
    double t = now_seconds() - t0;
    if (t < best) best = t;
    pthread_barrier_wait(job->barrier);
  }
  job->seconds = best;
  return NULL;
}

/* Runs `threads` copies; returns the slowest thread's time (all work counts). */
static double run_threads(int threads, void* (*fn)(void*), job_t* jobs) {
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, (unsigned)threads);
  pthread_t* ids = calloc((size_t)threads, sizeof(pthread_t));
  for (int t = 0; t < threads; t++) {
    jobs[t].barrier = &barrier;
    pthread_create(&ids[t], NULL, fn, &jobs[t]);
  }
  double slowest = 0;
  for (int t = 0; t < threads; t++) {
    pthread_join(ids[t], NULL);
    if (jobs[t].seconds > slowest) slowest = jobs[t].seconds;
  }
  free(ids);
  pthread_barrier_destroy(&barrier);
  return slowest;
}

/* GFLOP/s of `width` on `threads` threads, best of 3 runs of about `seconds` each. */
static double measure_fma(const width_t* width, int threads, double seconds) {
  /* Calibrate: iterations per second on one thread. */
  uint64_t probe = 1u << 20;
  double t0 = now_seconds();
  width->kernel(probe);
  double rate = (double)probe / (now_seconds() - t0);
  uint64_t iterations = (uint64_t)(rate * seconds) + 1;
  job_t* jobs = calloc((size_t)threads, sizeof(job_t));
  double best = 0;
  for (int run = 0; run < 3; run++) {
    for (int t = 0; t < threads; t++) jobs[t] = (job_t){.width = width, .iterations = iterations};
    double t = run_threads(threads, fma_thread, jobs);
    double gflops = width->flops_per_iteration * (double)iterations * threads / t * 1e-9;
    if (gflops > best) best = gflops;
  }
  free(jobs);
  return best;
}

/* Triad GB/s (3 arrays of `floats` each: two reads, one write counted; write-allocate traffic
 * not counted, as STREAM does). */
static double measure_triad(int threads, size_t floats) {
  float* a = aligned_alloc(64, floats * sizeof(float));
  float* b = aligned_alloc(64, floats * sizeof(float));
  float* c = aligned_alloc(64, floats * sizeof(float));
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return 0;
  }
  job_t* jobs = calloc((size_t)threads, sizeof(job_t));
  for (int t = 0; t < threads; t++)
    jobs[t] = (job_t){.a = a, .b = b, .c = c, .from = floats * (size_t)t / (size_t)threads,
                      .to = floats * (size_t)(t + 1) / (size_t)threads, .repeats = 5};
  double t = run_threads(threads, triad_thread, jobs);
  free(jobs);
  free(a), free(b), free(c);
  return 3.0 * (double)floats * sizeof(float) / t * 1e-9;
}

static int usage(FILE* out, int code) {
  fprintf(out,
          "usage: stax_peak [--seconds S] [--threads N] [--json]\n\n"
          "Measures this machine's float32 FMA peak per vector width (sse: mul+add, avx2 and\n"
          "avx512: FMA; 12 independent accumulators in inline assembly, best of 3 runs of S\n"
          "seconds, default 0.3) on 1 thread and on N (default: every online core), and a\n"
          "STREAM-like triad a = b + s*c over 3 x 64 MiB (GB/s, best of 5). --json prints one\n"
          "JSON object instead of the table.\n");
  return code;
}

int main(int argc, char** argv) {
  double seconds = 0.3;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cores > 0 ? (int)cores : 1;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = atof(argv[++i]);
      if (!(seconds > 0 && seconds <= 60)) {
        fprintf(stderr, "stax_peak: --seconds takes a number in (0, 60], not '%s'\n", argv[i]);
        return 2;
      }
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = atoi(argv[++i]);
      if (threads < 1 || threads > 1024) {
        fprintf(stderr, "stax_peak: --threads takes 1..1024, not '%s'\n", argv[i]);
        return 2;
      }
    } else if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      return usage(stdout, 0);
    } else {
      fprintf(stderr, "stax_peak: unknown argument '%s'\n", argv[i]);
      return usage(stderr, 2);
    }
  }
  int counts[2] = {1, threads};
  int count_n = threads > 1 ? 2 : 1;
  size_t floats = (size_t)64 << 18; /* 64 MiB per array */
  if (json) printf("{\"threads\": %d, \"fma_gflops\": {", threads);
  else printf("%-8s %12s %12s   (GFLOP/s, float32)\n", "width", "1 thread", "all threads");
  bool first = true;
  for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
    const width_t* width = &widths[w];
    if (!width_supported(width)) {
      if (!json) printf("%-8s %12s\n", width->name, "not on this CPU");
      continue;
    }
    double g[2] = {0, 0};
    for (int c = 0; c < count_n; c++) g[c] = measure_fma(width, counts[c], seconds);
    if (json) {
      printf("%s\"%s\": [%.1f, %.1f]", first ? "" : ", ", width->name, g[0], count_n > 1 ? g[1] : g[0]);
    } else {
      printf("%-8s %12.1f %12.1f\n", width->name, g[0], count_n > 1 ? g[1] : g[0]);
    }
    first = false;
  }
  double bw[2] = {0, 0};
  for (int c = 0; c < count_n; c++) bw[c] = measure_triad(counts[c], floats);
  if (json)
    printf("}, \"triad_gbs\": [%.1f, %.1f]}\n", bw[0], count_n > 1 ? bw[1] : bw[0]);
  else
    printf("%-8s %12.1f %12.1f   (GB/s, a = b + s*c over 3 x 64 MiB)\n"
           "threads: 1 and %d; FMA loop: %d independent accumulators per iteration\n",
           "triad", bw[0], count_n > 1 ? bw[1] : bw[0], threads, ACCUMULATORS);
  return 0;
}

#else
int main(void) {
  printf("stax_peak: x86-64 only (this build is for another architecture)\n");
  return 0;
}
#endif
