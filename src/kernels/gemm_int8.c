/* The integer GEMM core behind MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv:
 * C (int32) = (A - a_zero) x (B - b_zero) for 8-bit operands (or int16 ones).
 *
 * Both operands are packed once, zero points subtracted, into int16 panels whose k runs in
 * pairs: an A panel of MR rows is [ceil(K/2)][MR][2], a B panel of NR columns is
 * [ceil(K/2)][NR][2], padded with zeros. That is the operand layout of the x86 pairwise
 * multiply-add instructions (pmaddwd: two int16 products summed into an int32 lane; the
 * VNNI forms vpdpwssd also accumulate), so the AVX2 micro-kernel is one broadcast of an A pair
 * and two multiply-adds per row and k pair. Differences of 8-bit values and 8-bit zero points
 * fit int16 and each pair sum fits int32, so only the accumulation can overflow, and it wraps
 * (explicitly: unsigned in the generic kernel, by the instructions' definition on x86), which
 * is the ONNX rule ("accumulation may overflow if and only if in 32 bits"). Every variant
 * computes the same sum modulo 2^32, so results are bit-identical across ISAs.
 *
 * Each MR x NR tile of C is one task over the whole K (no K blocking: a pair of panels is
 * 4 * NR * K bytes for B and 4 * MR * K for A, L2-sized for the K of real models); tiles run
 * column-panel-major so a thread's consecutive tiles reuse its B panel. */
#include <stdatomic.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#define GEMM_INT_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define GEMM_INT_X86 0
#endif

#define INT_MR 4
#define INT_NR 16
/* Multiply-adds per task at least. */
#define INT_TASK_WORK (1 << 18)

typedef void (*int_micro_fn)(int64_t pairs, const int16_t* a, const int16_t* b,
                             int32_t* tile /* INT_MR x INT_NR */);

/* Plain C: the reference every vector variant must match bit for bit. */
STAX_KERNEL_OPTIMIZE("vect-cost-model=dynamic")
static void micro_generic(int64_t pairs, const int16_t* a, const int16_t* b, int32_t* tile) {
  uint32_t acc[INT_MR][INT_NR];
  memset(acc, 0, sizeof(acc));
  for (int64_t p = 0; p < pairs; p++) {
    const int16_t* ap = a + p * INT_MR * 2;
    const int16_t* bp = b + p * INT_NR * 2;
    for (int32_t i = 0; i < INT_MR; i++) {
      int32_t a0 = ap[2 * i], a1 = ap[2 * i + 1];
      for (int32_t j = 0; j < INT_NR; j++) {
        acc[i][j] += (uint32_t)(a0 * bp[2 * j] + a1 * bp[2 * j + 1]);
      }
    }
  }
  for (int32_t i = 0; i < INT_MR; i++) {
    for (int32_t j = 0; j < INT_NR; j++) {
      uint32_t v = acc[i][j];
      /* The int32 with this bit pattern, without an implementation-defined conversion. */
      tile[i * INT_NR + j] = v <= INT32_MAX ? (int32_t)v : -(int32_t)(~v) - 1;
    }
  }
}

#if GEMM_INT_X86
/* One micro-kernel body per x86 variant; MADD(acc, a, b) adds the pairwise products. */
#define INT_MICRO_X86(name, attributes, MADD)                                          \
  attributes static void name(int64_t pairs, const int16_t* a, const int16_t* b,      \
                              int32_t* tile) {                                         \
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, \
            c21 = c00, c30 = c00, c31 = c00;                                           \
    for (int64_t p = 0; p < pairs; p++) {                                              \
      const int16_t* bp = b + p * INT_NR * 2;                                          \
      __m256i b0 = _mm256_loadu_si256((const __m256i*)bp);                             \
      __m256i b1 = _mm256_loadu_si256((const __m256i*)(bp + 16));                      \
      const int16_t* ap = a + p * INT_MR * 2;                                          \
      int32_t pair;                                                                    \
      memcpy(&pair, ap, 4);                                                            \
      __m256i a0 = _mm256_set1_epi32(pair);                                            \
      c00 = MADD(c00, a0, b0);                                                         \
      c01 = MADD(c01, a0, b1);                                                         \
      memcpy(&pair, ap + 2, 4);                                                        \
      __m256i a1 = _mm256_set1_epi32(pair);                                            \
      c10 = MADD(c10, a1, b0);                                                         \
      c11 = MADD(c11, a1, b1);                                                         \
      memcpy(&pair, ap + 4, 4);                                                        \
      __m256i a2 = _mm256_set1_epi32(pair);                                            \
      c20 = MADD(c20, a2, b0);                                                         \
      c21 = MADD(c21, a2, b1);                                                         \
      memcpy(&pair, ap + 6, 4);                                                        \
      __m256i a3 = _mm256_set1_epi32(pair);                                            \
      c30 = MADD(c30, a3, b0);                                                         \
      c31 = MADD(c31, a3, b1);                                                         \
    }                                                                                  \
    _mm256_storeu_si256((__m256i*)(tile + 0), c00);                                    \
    _mm256_storeu_si256((__m256i*)(tile + 8), c01);                                    \
    _mm256_storeu_si256((__m256i*)(tile + 16), c10);                                   \
    _mm256_storeu_si256((__m256i*)(tile + 24), c11);                                   \
    _mm256_storeu_si256((__m256i*)(tile + 32), c20);                                   \
    _mm256_storeu_si256((__m256i*)(tile + 40), c21);                                   \
    _mm256_storeu_si256((__m256i*)(tile + 48), c30);                                   \
    _mm256_storeu_si256((__m256i*)(tile + 56), c31);                                   \
  }

#define INT_MADD_AVX2(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#define INT_MADD_AVXVNNI(acc, a, b) _mm256_dpwssd_avx_epi32(acc, a, b)
#define INT_MADD_AVX512VNNI(acc, a, b) _mm256_dpwssd_epi32(acc, a, b)

INT_MICRO_X86(micro_avx2, __attribute__((target("avx2"))), INT_MADD_AVX2)
INT_MICRO_X86(micro_avxvnni, __attribute__((target("avx2,avxvnni"))), INT_MADD_AVXVNNI)
INT_MICRO_X86(micro_avx512vnni, __attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))),
              INT_MADD_AVX512VNNI)
#endif

typedef struct int_isa_t {
  const char* name;
  int_micro_fn micro;
} int_isa_t;

static const int_isa_t kIntGeneric = {"generic", micro_generic};
#if GEMM_INT_X86
static const int_isa_t kIntAvx2 = {"avx2", micro_avx2};
static const int_isa_t kIntAvxVnni = {"avxvnni", micro_avxvnni};
static const int_isa_t kIntAvx512Vnni = {"avx512vnni", micro_avx512vnni};
#endif

static _Atomic(const int_isa_t*) int_isa_override = NULL;

#if GEMM_INT_X86
/* AVX-VNNI (the VEX-encoded dot products): CPUID leaf 7 subleaf 1, EAX bit 4. Read directly:
 * not every compiler's __builtin_cpu_supports knows the name (clang 14 does not). Callers
 * check the AVX2 level first, which includes the OS's AVX state. */
static bool int_has_avx_vnni(void) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return (a >> 4) & 1u;
}
#endif

/* The best variant under the ISA cap (stax_isa): VNNI is an extension of the AVX2 / AVX-512
 * levels, detected here. */
static const int_isa_t* int_best_isa(void) {
#if GEMM_INT_X86
  stax_isa_t isa = stax_isa();
  if (isa >= STAX_ISA_AVX512 && __builtin_cpu_supports("avx512vnni")) return &kIntAvx512Vnni;
  if (isa >= STAX_ISA_AVX2 && int_has_avx_vnni()) return &kIntAvxVnni;
  if (isa >= STAX_ISA_AVX2) return &kIntAvx2;
#endif
  return &kIntGeneric;
}

static const int_isa_t* int_isa(void) {
  const int_isa_t* forced = atomic_load_explicit(&int_isa_override, memory_order_relaxed);
  return forced ? forced : int_best_isa();
}

const char* stax_gemm_int_isa_name(void) { return int_isa()->name; }

bool stax_gemm_int_set_isa(const char* name) {
  if (name == NULL) {
    atomic_store(&int_isa_override, NULL);
    return true;
  }
  const int_isa_t* wanted = NULL;
  if (strcmp(name, "generic") == 0) wanted = &kIntGeneric;
#if GEMM_INT_X86
  __builtin_cpu_init();
  if (strcmp(name, "avx2") == 0 && __builtin_cpu_supports("avx2")) wanted = &kIntAvx2;
  if (strcmp(name, "avxvnni") == 0 && __builtin_cpu_supports("avx2") && int_has_avx_vnni())
    wanted = &kIntAvxVnni;
  if (strcmp(name, "avx512vnni") == 0 && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("avx512vl")) {
    wanted = &kIntAvx512Vnni;
  }
#endif
  if (wanted == NULL) return false;
  atomic_store(&int_isa_override, wanted);
  return true;
}

/* ---- packing ---------------------------------------------------------------------------- */

static inline int32_t load_int(stax_dtype_t dtype, const void* data, int64_t index) {
  switch (dtype) {
    case STAX_DTYPE_INT8: return ((const int8_t*)data)[index];
    case STAX_DTYPE_UINT8: return ((const uint8_t*)data)[index];
    case STAX_DTYPE_INT16: return ((const int16_t*)data)[index];
    default: return 0;
  }
}

typedef struct int_gemm_job_t {
  const int_isa_t* isa;
  int64_t m, n, k, pairs;
  int64_t row_panels, col_panels;
  const stax_gemm_int_operand_t* a;
  const stax_gemm_int_operand_t* b;
  const int32_t* a_zero;
  const int32_t* b_zero;
  int16_t* packed_a; /* row_panels x pairs x MR x 2 */
  int16_t* packed_b; /* col_panels x pairs x NR x 2 */
  int32_t* c;
  int64_t c_row_stride;
} int_gemm_job_t;

static void pack_a_task(void* ctx, int64_t begin, int64_t end) {
  const int_gemm_job_t* j = ctx;
  for (int64_t panel = begin; panel < end; panel++) {
    int16_t* out = j->packed_a + panel * j->pairs * INT_MR * 2;
    for (int32_t i = 0; i < INT_MR; i++) {
      int64_t row = panel * INT_MR + i;
      int32_t zero = row < j->m && j->a_zero ? j->a_zero[row] : 0;
      const stax_gemm_int_operand_t* a = j->a;
      for (int64_t kk = 0; kk < 2 * j->pairs; kk++) {
        int32_t v = 0; /* padding rows and the odd k's partner */
        if (row < j->m && kk < j->k) {
          v = load_int(a->dtype, a->data, row * a->row_stride + kk * a->col_stride) - zero;
        }
        out[(kk >> 1) * INT_MR * 2 + 2 * i + (kk & 1)] = (int16_t)v;
      }
    }
  }
}

static void pack_b_task(void* ctx, int64_t begin, int64_t end) {
  const int_gemm_job_t* j = ctx;
  const stax_gemm_int_operand_t* b = j->b;
  for (int64_t panel = begin; panel < end; panel++) {
    int16_t* out = j->packed_b + panel * j->pairs * INT_NR * 2;
    for (int64_t kk = 0; kk < 2 * j->pairs; kk++) {
      int16_t* line = out + (kk >> 1) * INT_NR * 2 + (kk & 1);
      for (int32_t jj = 0; jj < INT_NR; jj++) {
        int64_t col = panel * INT_NR + jj;
        int32_t v = 0;
        if (col < j->n && kk < j->k) {
          v = load_int(b->dtype, b->data, kk * b->row_stride + col * b->col_stride) -
              (j->b_zero ? j->b_zero[col] : 0);
        }
        line[2 * jj] = (int16_t)v;
      }
    }
  }
}

static void tile_task(void* ctx, int64_t begin, int64_t end) {
  const int_gemm_job_t* j = ctx;
  int32_t tile[INT_MR * INT_NR];
  for (int64_t t = begin; t < end; t++) {
    int64_t col_panel = t / j->row_panels, row_panel = t % j->row_panels;
    j->isa->micro(j->pairs, j->packed_a + row_panel * j->pairs * INT_MR * 2,
                  j->packed_b + col_panel * j->pairs * INT_NR * 2, tile);
    int64_t row0 = row_panel * INT_MR, col0 = col_panel * INT_NR;
    int64_t rows = j->m - row0 < INT_MR ? j->m - row0 : INT_MR;
    int64_t cols = j->n - col0 < INT_NR ? j->n - col0 : INT_NR;
    for (int64_t i = 0; i < rows; i++) {
      memcpy(j->c + (row0 + i) * j->c_row_stride + col0, tile + i * INT_NR,
             (size_t)cols * sizeof(int32_t));
    }
  }
}

stax_status_t stax_gemm_int(stax_allocator_t allocator, stax_threadpool_t* pool, int64_t m,
                            int64_t n, int64_t k, const stax_gemm_int_operand_t* a,
                            const int32_t* a_zero, const stax_gemm_int_operand_t* b,
                            const int32_t* b_zero, int32_t* c, int64_t c_row_stride) {
  if (m <= 0 || n <= 0) return STAX_OK;
  int_gemm_job_t j = {
      .isa = int_isa(),
      .m = m,
      .n = n,
      .k = k,
      .pairs = (k + 1) / 2,
      .row_panels = (m + INT_MR - 1) / INT_MR,
      .col_panels = (n + INT_NR - 1) / INT_NR,
      .a = a,
      .b = b,
      .a_zero = a_zero,
      .b_zero = b_zero,
      .c = c,
      .c_row_stride = c_row_stride,
  };
  if (k <= 0) {
    for (int64_t i = 0; i < m; i++) memset(c + i * c_row_stride, 0, (size_t)n * sizeof(int32_t));
    return STAX_OK;
  }
  /* Bounded by the operands' own sizes (about 2x each), which exist in memory. */
  size_t a_bytes = (size_t)j.row_panels * (size_t)j.pairs * INT_MR * 2 * sizeof(int16_t);
  size_t b_bytes = (size_t)j.col_panels * (size_t)j.pairs * INT_NR * 2 * sizeof(int16_t);
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc_aligned(allocator, a_bytes + b_bytes, 64, &memory));
  j.packed_a = memory;
  j.packed_b = (int16_t*)((char*)memory + a_bytes);
  int64_t panel_grain_a = INT_TASK_WORK / (INT_MR * k * INT_NR) + 1;
  stax_parallel_for(pool, j.row_panels, panel_grain_a, pack_a_task, &j);
  stax_parallel_for(pool, j.col_panels, panel_grain_a, pack_b_task, &j);
  int64_t tile_work = INT_MR * INT_NR * k;
  stax_parallel_for(pool, j.row_panels * j.col_panels, INT_TASK_WORK / tile_work + 1, tile_task,
                    &j);
  stax_allocator_free_aligned(allocator, memory, a_bytes + b_bytes, 64);
  return STAX_OK;
}
