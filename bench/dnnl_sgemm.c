/* S5's oneDNN peer (bench/s5.py builds it when Debian's libdnnl-dev is installed):
 *
 *   dnnl_sgemm M K N SECONDS
 *
 * times C[M, N] = A[M, K] . B[K, N] (row-major float32) through oneDNN's dnnl_sgemm on
 * random data, three warm-up calls, then calls until SECONDS have passed (at least five),
 * and prints {"median_ms": ..., "calls": ...} as s5.py's Python peers do. Threads: oneDNN's
 * OpenMP runtime, OMP_NUM_THREADS set by s5.py. dnnl_sgemm takes B as it comes on every
 * call (no prepacking), as numpy's BLAS does; stax and ONNX Runtime pack their constant B
 * once. */
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static float* random_matrix(int64_t count, uint64_t seed) {
  float* data = aligned_alloc(64, (size_t)((count * 4 + 63) / 64 * 64));
  if (!data) return NULL;
  for (int64_t i = 0; i < count; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    data[i] = (float)((double)(seed >> 40) / (double)(1ull << 24) - 0.5);
  }
  return data;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s M K N SECONDS\n", argv[0]);
    return 2;
  }
  int64_t m = atoll(argv[1]), k = atoll(argv[2]), n = atoll(argv[3]);
  double seconds = atof(argv[4]);
  if (m < 1 || k < 1 || n < 1) {
    fprintf(stderr, "M, K and N must be positive\n");
    return 2;
  }
  float* a = random_matrix(m * k, 1);
  float* b = random_matrix(k * n, 2);
  float* c = random_matrix(m * n, 3);
  enum { kMaxCalls = 1000000 };
  double* times = malloc(sizeof(double) * kMaxCalls);
  if (!a || !b || !c || !times) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (int i = 0; i < 3; i++) {
    dnnl_status_t status = dnnl_sgemm('N', 'N', m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    if (status != dnnl_success) {
      fprintf(stderr, "dnnl_sgemm failed: status %d\n", (int)status);
      return 1;
    }
  }
  int calls = 0;
  double start = now_s();
  while ((now_s() - start < seconds || calls < 5) && calls < kMaxCalls) {
    double t = now_s();
    dnnl_sgemm('N', 'N', m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    times[calls++] = now_s() - t;
  }
  qsort(times, (size_t)calls, sizeof(double), compare_doubles);
  double median = calls % 2 ? times[calls / 2] : 0.5 * (times[calls / 2 - 1] + times[calls / 2]);
  printf("{\"median_ms\": %.6f, \"calls\": %d}\n", median * 1e3, calls);
  free(a);
  free(b);
  free(c);
  free(times);
  return 0;
}
