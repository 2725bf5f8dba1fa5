/* The GEMM core shared by MatMul, Gemm, Einsum, Conv and ConvTranspose: C = alpha*A*B + beta*C
 * in float32 (A, B float32/float16/bfloat16) or float64, over strided operands.
 *
 * Structure (the classic Goto/BLIS blocking):
 *   for each NC-wide column panel of B and KC-deep slice of K:
 *     pack B[KC x NC] into NR-wide slivers (row p of a sliver is NR contiguous values),
 *     for each chunk of at most MBIG rows of A:
 *       pack A[rows x KC] into MR-tall slivers (column p of a sliver is MR contiguous values),
 *       for each (row block of at most MC rows) x (group of B slivers), in parallel:
 *         for each B sliver, for each A sliver: the MR x NR micro-kernel.
 * Packing reads the operands through their strides, so transposed or broadcast operands cost
 * nothing extra, halves are widened once per element, and the micro-kernel always streams
 * contiguous, aligned panels. Edge slivers are zero-padded, so the micro-kernel always runs a
 * full tile and only its write-back is clipped.
 *
 * The micro-kernel keeps an MR x NR tile of accumulators in vector registers. It is written
 * with GCC/Clang vector extensions rather than intrinsics, so one C body serves every ISA;
 * plain arrays were tried first, but GCC 12's vectorizer spilled the accumulators to the stack
 * on every iteration. Variants are compiled per ISA with target attributes and chosen at run
 * time from the CPU's features (AVX-512F, AVX2+FMA, else a generic 128-bit tile), never
 * assumed at build time. fp-contract=fast on the micro-kernel turns a*b+c into FMA (ISO C
 * mode turns contraction off by default).
 *
 * Float32 products with M == 1 or N == 1 and a unit stride in the right place skip packing
 * and run as matrix-vector products (dot or axpy form), which are memory-bound anyway. */
#include <stdatomic.h>
#include <string.h>

#include "kernels/gemm.h"
#include "base/hash_map.h"

#if defined(__x86_64__) || defined(__i386__)
#define GEMM_X86 1
#else
#define GEMM_X86 0
#endif

/* Cache blocking, shared by every variant (multiples of every MR and NR used below). KC
 * values of one B sliver (KC * NR elements) stay in L1 while an MC x KC block of A stays in
 * L2; the KC x NC panel of B lives in L3. */
#define GEMM_KC 256
#define GEMM_MC 96
#define GEMM_NC 2048
#define GEMM_MBIG 1536
/* Workspace sizes round A rows and B columns up to these (lcm of the MRs, max of the NRs), so
 * a size computed before an ISA override still fits after it. */
#define GEMM_A_ROUND 24
#define GEMM_B_ROUND 32
/* Products below this many multiply-adds run on the calling thread. */
#define GEMM_PARALLEL_MIN_WORK (1 << 18)

/* alpha and beta travel in memory: passed in registers they would stay live across the
 * k loop and take a vector register from the accumulator tile. */
typedef struct gemm_scalars_t {
  double alpha, beta;
} gemm_scalars_t;

typedef void (*gemm_micro_fn)(int64_t kc, const void* a_panel, const void* b_panel, void* c,
                              int64_t c_row_stride, int64_t c_col_stride,
                              const gemm_scalars_t* scalars, int64_t m, int64_t n);

typedef struct gemm_kernel_t {
  int64_t mr, nr;
  size_t element_size;
  gemm_micro_fn micro;
} gemm_kernel_t;

/* Matrix-vector products for float32 (see "matrix-vector products" below). */
typedef void (*gemv_dot_fn)(int64_t rows, int64_t k, const float* matrix, int64_t row_stride,
                            const float* vector, float* out);
typedef void (*gemv_axpy_fn)(int64_t rows, int64_t k, const float* matrix, int64_t k_stride,
                             const float* vector, int64_t vector_stride, float* out);

typedef struct gemm_isa_t {
  const char* name;
  gemm_kernel_t f32;
  gemm_kernel_t f64;
  gemv_dot_fn dot;
  gemv_axpy_fn axpy;
} gemm_isa_t;

/* ---- micro-kernels ----------------------------------------------------------------------- */

/* The tile loops must be fully unrolled for the accumulators to live in registers; -O2 alone
 * does not unroll them. */
#define GEMM_UNROLL _Pragma("GCC unroll 16")
/* clang-format off */
#define GEMM_SPLAT2(x) {x, x}
#define GEMM_SPLAT4(x) {x, x, x, x}
#define GEMM_SPLAT8(x) {x, x, x, x, x, x, x, x}
#define GEMM_SPLAT16(x) {x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}
/* clang-format on */

/* An MR x (VW*NV) tile: a_panel holds kc columns of MR values, b_panel kc rows of VW*NV values.
 * The write-back to C is clipped to m x n and skips reading C when beta is 0. */
#define GEMM_MICRO_KERNEL(name, elem_t, vec_t, VW, MR, NV, SPLAT, attributes)                     \
  attributes static void name(int64_t kc, const void* a_panel, const void* b_panel, void* c_out,  \
                              int64_t rs, int64_t cs, const gemm_scalars_t* scalars, int64_t m,   \
                              int64_t n) {                                                        \
    const elem_t* restrict a = a_panel;                                                           \
    const elem_t* restrict b = b_panel;                                                           \
    elem_t* c = c_out;                                                                            \
    vec_t acc[MR][NV];                                                                            \
    GEMM_UNROLL for (int i = 0; i < MR; i++) {                                                    \
      GEMM_UNROLL for (int v = 0; v < NV; v++) acc[i][v] = (vec_t){0};                            \
    }                                                                                             \
    for (int64_t p = 0; p < kc; p++) {                                                            \
      vec_t bv[NV];                                                                               \
      GEMM_UNROLL for (int v = 0; v < NV; v++)                                                    \
          memcpy(&bv[v], b + p * (VW * NV) + v * VW, sizeof(vec_t));                              \
      GEMM_UNROLL for (int i = 0; i < MR; i++) {                                                  \
        const elem_t s = a[p * MR + i];                                                           \
        const vec_t ai = SPLAT(s);                                                                \
        GEMM_UNROLL for (int v = 0; v < NV; v++) acc[i][v] += ai * bv[v];                         \
      }                                                                                           \
    }                                                                                             \
    const elem_t alpha = (elem_t)scalars->alpha, beta = (elem_t)scalars->beta;                    \
    if (m == MR && n == VW * NV && cs == 1) {                                                     \
      const vec_t alpha_v = SPLAT(alpha), beta_v = SPLAT(beta);                                   \
      GEMM_UNROLL for (int i = 0; i < MR; i++) {                                                  \
        GEMM_UNROLL for (int v = 0; v < NV; v++) {                                                \
          elem_t* cp = c + i * rs + v * VW;                                                       \
          vec_t r = alpha_v * acc[i][v];                                                          \
          if (beta != 0) {                                                                        \
            vec_t old;                                                                            \
            memcpy(&old, cp, sizeof(vec_t));                                                      \
            r += beta_v * old;                                                                    \
          }                                                                                       \
          memcpy(cp, &r, sizeof(vec_t));                                                          \
        }                                                                                         \
      }                                                                                           \
      return;                                                                                     \
    }                                                                                             \
    elem_t tile[MR][VW * NV];                                                                     \
    memcpy(tile, acc, sizeof(tile));                                                              \
    for (int64_t i = 0; i < m; i++) {                                                             \
      for (int64_t j = 0; j < n; j++) {                                                           \
        elem_t* cp = c + i * rs + j * cs;                                                         \
        elem_t r = alpha * tile[i][j];                                                            \
        if (beta != 0) r += beta * *cp;                                                           \
        *cp = r;                                                                                  \
      }                                                                                           \
    }                                                                                             \
  }

/* Matrix-vector kernels (float32). dot: out[r] = sum_p matrix[r*row_stride + p] * vector[p]
 * over contiguous rows; axpy: out[r] = sum_p vector[p*vector_stride] * matrix[p*k_stride + r]
 * over contiguous columns. Two accumulators hide the FMA latency in dot. */
#define GEMV_KERNELS(suffix, vec_t, VW, SPLAT, attributes)                                        \
  attributes static void gemv_dot_##suffix(int64_t rows, int64_t k, const float* matrix,          \
                                           int64_t row_stride, const float* vector, float* out) { \
    for (int64_t r = 0; r < rows; r++) {                                                          \
      const float* row = matrix + r * row_stride;                                                 \
      vec_t s0 = {0}, s1 = {0};                                                                   \
      int64_t p = 0;                                                                              \
      for (; p + 2 * VW <= k; p += 2 * VW) {                                                      \
        vec_t a0, a1, b0, b1;                                                                     \
        memcpy(&a0, row + p, sizeof(vec_t));                                                      \
        memcpy(&a1, row + p + VW, sizeof(vec_t));                                                 \
        memcpy(&b0, vector + p, sizeof(vec_t));                                                   \
        memcpy(&b1, vector + p + VW, sizeof(vec_t));                                              \
        s0 += a0 * b0;                                                                            \
        s1 += a1 * b1;                                                                            \
      }                                                                                           \
      s0 += s1;                                                                                   \
      float sum = 0;                                                                              \
      for (int i = 0; i < VW; i++) sum += s0[i];                                                  \
      for (; p < k; p++) sum += row[p] * vector[p];                                               \
      out[r] = sum;                                                                               \
    }                                                                                             \
  }                                                                                               \
  attributes static void gemv_axpy_##suffix(int64_t rows, int64_t k, const float* matrix,         \
                                            int64_t k_stride, const float* vector,                \
                                            int64_t vector_stride, float* out) {                  \
    for (int64_t r = 0; r < rows; r++) out[r] = 0;                                                \
    for (int64_t p = 0; p < k; p++) {                                                             \
      const float s = vector[p * vector_stride];                                                  \
      const vec_t sv = SPLAT(s);                                                                  \
      const float* line = matrix + p * k_stride;                                                  \
      int64_t r = 0;                                                                              \
      for (; r + VW <= rows; r += VW) {                                                           \
        vec_t x, y;                                                                               \
        memcpy(&x, line + r, sizeof(vec_t));                                                      \
        memcpy(&y, out + r, sizeof(vec_t));                                                       \
        y += sv * x;                                                                              \
        memcpy(out + r, &y, sizeof(vec_t));                                                       \
      }                                                                                           \
      for (; r < rows; r++) out[r] += s * line[r];                                                \
    }                                                                                             \
  }

typedef float gemm_v4sf __attribute__((vector_size(16)));
typedef double gemm_v2df __attribute__((vector_size(16)));

#define GEMM_GENERIC_ATTRIBUTES STAX_KERNEL_OPTIMIZE("fp-contract=fast")
GEMM_MICRO_KERNEL(micro_f32_generic, float, gemm_v4sf, 4, 4, 2, GEMM_SPLAT4,
                  GEMM_GENERIC_ATTRIBUTES)
GEMM_MICRO_KERNEL(micro_f64_generic, double, gemm_v2df, 2, 4, 2, GEMM_SPLAT2,
                  GEMM_GENERIC_ATTRIBUTES)

GEMV_KERNELS(generic, gemm_v4sf, 4, GEMM_SPLAT4, GEMM_GENERIC_ATTRIBUTES)

static const gemm_isa_t kGemmGeneric = {"generic",
                                        {4, 8, sizeof(float), micro_f32_generic},
                                        {4, 4, sizeof(double), micro_f64_generic},
                                        gemv_dot_generic,
                                        gemv_axpy_generic};

typedef float gemm_v16sf __attribute__((vector_size(64)));
typedef double gemm_v8df __attribute__((vector_size(64)));

/* The AVX-512 tile geometry (8 x 32 / 8 x 16) compiled for the generic target: slow, but it
 * lets tests check the packing and edge handling of that geometry on any CPU. Only
 * stax_gemm_set_isa selects it. */
GEMM_MICRO_KERNEL(micro_f32_wide_generic, float, gemm_v16sf, 16, 8, 2, GEMM_SPLAT16,
                  GEMM_GENERIC_ATTRIBUTES)
GEMM_MICRO_KERNEL(micro_f64_wide_generic, double, gemm_v8df, 8, 8, 2, GEMM_SPLAT8,
                  GEMM_GENERIC_ATTRIBUTES)

static const gemm_isa_t kGemmWideGeneric = {"generic-8x32",
                                            {8, 32, sizeof(float), micro_f32_wide_generic},
                                            {8, 16, sizeof(double), micro_f64_wide_generic},
                                            gemv_dot_generic,
                                            gemv_axpy_generic};

#if GEMM_X86
typedef float gemm_v8sf __attribute__((vector_size(32)));
typedef double gemm_v4df __attribute__((vector_size(32)));

/* 6 x 16: 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers. */
#define GEMM_AVX2_ATTRIBUTES \
  __attribute__((target("avx2,fma"))) STAX_KERNEL_OPTIMIZE("fp-contract=fast")
GEMM_MICRO_KERNEL(micro_f32_avx2, float, gemm_v8sf, 8, 6, 2, GEMM_SPLAT8, GEMM_AVX2_ATTRIBUTES)
GEMM_MICRO_KERNEL(micro_f64_avx2, double, gemm_v4df, 4, 6, 2, GEMM_SPLAT4, GEMM_AVX2_ATTRIBUTES)

/* 8 x 32: 16 accumulators + 2 B vectors + 1 broadcast of the 32 zmm registers. */
#define GEMM_AVX512_ATTRIBUTES \
  __attribute__((target("avx512f"))) STAX_KERNEL_OPTIMIZE("fp-contract=fast")
GEMM_MICRO_KERNEL(micro_f32_avx512, float, gemm_v16sf, 16, 8, 2, GEMM_SPLAT16,
                  GEMM_AVX512_ATTRIBUTES)
GEMM_MICRO_KERNEL(micro_f64_avx512, double, gemm_v8df, 8, 8, 2, GEMM_SPLAT8, GEMM_AVX512_ATTRIBUTES)

/* Matrix-vector products are memory-bound: 256-bit vectors suffice on AVX-512 machines too. */
GEMV_KERNELS(avx2, gemm_v8sf, 8, GEMM_SPLAT8, GEMM_AVX2_ATTRIBUTES)

static const gemm_isa_t kGemmAvx2 = {"avx2+fma",
                                     {6, 16, sizeof(float), micro_f32_avx2},
                                     {6, 8, sizeof(double), micro_f64_avx2},
                                     gemv_dot_avx2,
                                     gemv_axpy_avx2};
static const gemm_isa_t kGemmAvx512 = {"avx512f",
                                       {8, 32, sizeof(float), micro_f32_avx512},
                                       {8, 16, sizeof(double), micro_f64_avx512},
                                       gemv_dot_avx2,
                                       gemv_axpy_avx2};
#endif

/* Set by stax_gemm_set_isa (tests); NULL picks from the CPU. */
static _Atomic(const gemm_isa_t*) gemm_isa_override = NULL;

/* The CPU's level under the cap (stax_isa, base/cpu.c). */
static const gemm_isa_t* gemm_best_isa(void) {
#if GEMM_X86
  stax_isa_t isa = stax_isa();
  if (isa >= STAX_ISA_AVX512) return &kGemmAvx512;
  if (isa >= STAX_ISA_AVX2) return &kGemmAvx2;
#endif
  return &kGemmGeneric;
}

static const gemm_isa_t* gemm_isa(void) {
  const gemm_isa_t* forced = atomic_load_explicit(&gemm_isa_override, memory_order_relaxed);
  return forced ? forced : gemm_best_isa();
}

const char* stax_gemm_isa_name(void) { return gemm_isa()->name; }

void stax_gemm_f32_tile(int32_t* mr, int32_t* nr) {
  const gemm_isa_t* isa = gemm_isa();
  *mr = (int32_t)isa->f32.mr;
  *nr = (int32_t)isa->f32.nr;
}

bool stax_gemm_set_isa(const char* name) {
  if (!name) {
    atomic_store(&gemm_isa_override, NULL);
    return true;
  }
  const gemm_isa_t* wanted = NULL;
  if (strcmp(name, kGemmGeneric.name) == 0) wanted = &kGemmGeneric;
  if (strcmp(name, kGemmWideGeneric.name) == 0) wanted = &kGemmWideGeneric;
#if GEMM_X86
  if (strcmp(name, kGemmAvx2.name) == 0 && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    wanted = &kGemmAvx2;
  if (strcmp(name, kGemmAvx512.name) == 0 && __builtin_cpu_supports("avx512f"))
    wanted = &kGemmAvx512;
#endif
  if (!wanted) return false;
  atomic_store(&gemm_isa_override, wanted);
  return true;
}

/* ---- packing ------------------------------------------------------------------------------ */

/* Packs one sliver: `valid` source vectors (rows of A or columns of B, `outer_stride` apart)
 * of kc elements (`k_stride` apart) into dst[p * width + r], zero-filling r >= valid. Loops
 * run along whichever source stride is unit, so both layouts read memory sequentially. */
typedef void (*gemm_pack_fn)(void* dst, const void* src, int64_t outer_stride, int64_t k_stride,
                             int64_t valid, int64_t width, int64_t kc);

/* -O2's "very cheap" vectorizer model skips loops with run-time trip counts; packing is a
 * plain copy that vectorizes well under the dynamic model. */
#define GEMM_VECTORIZE STAX_KERNEL_OPTIMIZE("vect-cost-model=dynamic")

#define GEMM_PACK(name, dst_t, src_t, CONVERT)                                                  \
  GEMM_VECTORIZE static void name(void* dst_out, const void* src_in, int64_t outer_stride,      \
                                  int64_t k_stride, int64_t valid, int64_t width, int64_t kc) { \
    dst_t* restrict dst = dst_out;                                                              \
    const src_t* src = src_in;                                                                  \
    if (valid < width) {                                                                        \
      for (int64_t p = 0; p < kc; p++)                                                          \
        for (int64_t r = valid; r < width; r++) dst[p * width + r] = 0;                         \
    }                                                                                           \
    if (k_stride == 1 && outer_stride != 1) {                                                   \
      for (int64_t r = 0; r < valid; r++) {                                                     \
        const src_t* line = src + r * outer_stride;                                             \
        for (int64_t p = 0; p < kc; p++) dst[p * width + r] = CONVERT(line[p]);                 \
      }                                                                                         \
    } else if (outer_stride == 1 && valid == width) {                                           \
      for (int64_t p = 0; p < kc; p++) {                                                        \
        const src_t* line = src + p * k_stride;                                                 \
        dst_t* out = dst + p * width;                                                           \
        for (int64_t r = 0; r < width; r++) out[r] = CONVERT(line[r]);                          \
      }                                                                                         \
    } else {                                                                                    \
      for (int64_t p = 0; p < kc; p++) {                                                        \
        const src_t* line = src + p * k_stride;                                                 \
        dst_t* out = dst + p * width;                                                           \
        for (int64_t r = 0; r < valid; r++) out[r] = CONVERT(line[r * outer_stride]);           \
      }                                                                                         \
    }                                                                                           \
  }

#define GEMM_SAME(x) (x)
GEMM_PACK(pack_f32_from_f32, float, float, GEMM_SAME)
GEMM_PACK(pack_f32_from_f16, float, uint16_t, stax_f16_to_f32)
GEMM_PACK(pack_f32_from_bf16, float, uint16_t, stax_bf16_to_f32)
GEMM_PACK(pack_f64_from_f64, double, double, GEMM_SAME)

static gemm_pack_fn gemm_pack_for(stax_dtype_t compute_dtype, stax_dtype_t operand_dtype) {
  if (compute_dtype == STAX_DTYPE_FLOAT32) {
    switch (operand_dtype) {
      case STAX_DTYPE_FLOAT32:
        return pack_f32_from_f32;
      case STAX_DTYPE_FLOAT16:
        return pack_f32_from_f16;
      case STAX_DTYPE_BFLOAT16:
        return pack_f32_from_bf16;
      default:
        return NULL;
    }
  }
  if (compute_dtype == STAX_DTYPE_FLOAT64 && operand_dtype == STAX_DTYPE_FLOAT64)
    return pack_f64_from_f64;
  return NULL;
}

bool stax_gemm_supports(stax_dtype_t compute_dtype, stax_dtype_t operand_dtype) {
  return gemm_pack_for(compute_dtype, operand_dtype) != NULL;
}

/* ---- the blocked driver ------------------------------------------------------------------ */

static int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Bytes of each packed panel, each a multiple of 64 so the second stays aligned. */
static size_t packed_a_bytes(size_t element_size, int64_t m, int64_t k) {
  int64_t rows = round_up(min64(m, GEMM_MBIG), GEMM_A_ROUND);
  return (size_t)round_up(rows * min64(k, GEMM_KC) * (int64_t)element_size, 64);
}

static size_t packed_b_bytes(size_t element_size, int64_t n, int64_t k) {
  int64_t cols = round_up(min64(n, GEMM_NC), GEMM_B_ROUND);
  return (size_t)round_up(cols * min64(k, GEMM_KC) * (int64_t)element_size, 64);
}

size_t stax_gemm_workspace_size(stax_dtype_t compute_dtype, int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  size_t element_size = stax_dtype_size(compute_dtype);
  return packed_a_bytes(element_size, m, k) + packed_b_bytes(element_size, n, k);
}

/* One (NC panel, KC slice, MBIG chunk) step, shared by the parallel callbacks. */
typedef struct gemm_step_t {
  const gemm_kernel_t* kernel;
  gemm_pack_fn pack_a, pack_b;
  const stax_gemm_operand_t* a;
  const stax_gemm_operand_t* b;
  size_t a_element_size, b_element_size;
  char* packed_a;
  char* packed_b;
  int64_t m_begin, m_count; /* rows of this chunk */
  int64_t n_begin, n_count; /* columns of this panel */
  int64_t k_begin, k_count;
  gemm_scalars_t scalars;
  char* c;
  int64_t c_row_stride, c_col_stride;
  int64_t m_blocks;          /* row blocks in the chunk */
  int64_t block_rows;        /* rows per block: a multiple of MR, at most MC */
  int64_t slivers_per_split; /* B slivers per compute task */
  int64_t n_slivers;
} gemm_step_t;

/* Rows of B packed per pass when B's rows are contiguous: every sliver takes these rows before
 * the next ones, so each source row is read front to back instead of NR values at a time
 * thousands of bytes apart. */
#define GEMM_PACK_ROWS 16

static void pack_b_slivers(void* opaque, int64_t begin, int64_t end) {
  const gemm_step_t* s = opaque;
  const int64_t nr = s->kernel->nr;
  if (s->b->col_stride == 1) {
    for (int64_t p0 = 0; p0 < s->k_count; p0 += GEMM_PACK_ROWS) {
      int64_t rows = min64(GEMM_PACK_ROWS, s->k_count - p0);
      for (int64_t sliver = begin; sliver < end; sliver++) {
        int64_t col = s->n_begin + sliver * nr;
        int64_t offset = (s->k_begin + p0) * s->b->row_stride + col;
        s->pack_b(
            s->packed_b + (size_t)(sliver * nr * s->k_count + p0 * nr) * s->kernel->element_size,
            (const char*)s->b->data + offset * (int64_t)s->b_element_size, 1, s->b->row_stride,
            min64(nr, s->n_begin + s->n_count - col), nr, rows);
      }
    }
    return;
  }
  for (int64_t sliver = begin; sliver < end; sliver++) {
    int64_t col = s->n_begin + sliver * nr;
    int64_t offset = s->k_begin * s->b->row_stride + col * s->b->col_stride;
    s->pack_b(s->packed_b + (size_t)(sliver * nr * s->k_count) * s->kernel->element_size,
              (const char*)s->b->data + offset * (int64_t)s->b_element_size, s->b->col_stride,
              s->b->row_stride, min64(nr, s->n_begin + s->n_count - col), nr, s->k_count);
  }
}

static void pack_a_slivers(void* opaque, int64_t begin, int64_t end) {
  const gemm_step_t* s = opaque;
  const int64_t mr = s->kernel->mr;
  for (int64_t sliver = begin; sliver < end; sliver++) {
    int64_t row = s->m_begin + sliver * mr;
    int64_t offset = row * s->a->row_stride + s->k_begin * s->a->col_stride;
    s->pack_a(s->packed_a + (size_t)(sliver * mr * s->k_count) * s->kernel->element_size,
              (const char*)s->a->data + offset * (int64_t)s->a_element_size, s->a->row_stride,
              s->a->col_stride, min64(mr, s->m_begin + s->m_count - row), mr, s->k_count);
  }
}

/* Task t covers row block (t % m_blocks) x B slivers of split (t / m_blocks). */
static void compute_tasks(void* opaque, int64_t begin, int64_t end) {
  const gemm_step_t* s = opaque;
  const gemm_kernel_t* kernel = s->kernel;
  const int64_t mr = kernel->mr, nr = kernel->nr, kc = s->k_count;
  const int64_t element_size = (int64_t)kernel->element_size;
  for (int64_t task = begin; task < end; task++) {
    int64_t block = task % s->m_blocks, split = task / s->m_blocks;
    int64_t row_begin = block * s->block_rows;
    int64_t row_end = min64(s->m_count, row_begin + s->block_rows);
    int64_t sliver_begin = split * s->slivers_per_split;
    int64_t sliver_end = min64(s->n_slivers, sliver_begin + s->slivers_per_split);
    for (int64_t jr = sliver_begin; jr < sliver_end; jr++) {
      int64_t col = jr * nr;
      const char* b_panel = s->packed_b + jr * nr * kc * element_size;
      int64_t n = min64(nr, s->n_count - col);
      for (int64_t row = row_begin; row < row_end; row += mr) {
        const char* a_panel = s->packed_a + row * kc * element_size;
        int64_t c_offset =
            (s->m_begin + row) * s->c_row_stride + (s->n_begin + col) * s->c_col_stride;
        kernel->micro(kc, a_panel, b_panel, s->c + c_offset * element_size, s->c_row_stride,
                      s->c_col_stride, &s->scalars, min64(mr, row_end - row), n);
      }
    }
  }
}

/* K == 0: C = beta * C (zero when beta is 0, whatever C held). */
static void scale_c(stax_dtype_t compute_dtype, int64_t m, int64_t n, double beta, void* c,
                    int64_t rs, int64_t cs) {
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      int64_t at = i * rs + j * cs;
      if (compute_dtype == STAX_DTYPE_FLOAT32) {
        float* p = (float*)c + at;
        *p = beta == 0 ? 0.0f : (float)beta * *p;
      } else {
        double* p = (double*)c + at;
        *p = beta == 0 ? 0.0 : beta * *p;
      }
    }
  }
}

/* ---- matrix-vector products --------------------------------------------------------------- */

/* With M == 1 or N == 1 the packed path would copy the whole matrix once more than it reads
 * it and run the micro-kernel on a tile that is mostly padding, so float32 products with a
 * unit stride in the right place go straight to the matrix-vector kernels. */
#define GEMV_BLOCK_MAX 4096

typedef struct gemv_job_t {
  const gemm_isa_t* isa;
  bool dot;
  int64_t block; /* outputs per task: the axpy form streams whole rows of this width */
  int64_t rows, k;
  const float* matrix;
  int64_t row_stride, k_stride; /* matrix (r, p) at r * row_stride + p * k_stride */
  const float* vector;
  int64_t vector_stride;
  float alpha, beta;
  float* y;
  int64_t y_stride;
} gemv_job_t;

static void gemv_blocks(void* opaque, int64_t begin, int64_t end) {
  const gemv_job_t* j = opaque;
  float out[GEMV_BLOCK_MAX];
  for (int64_t block = begin; block < end; block++) {
    int64_t r0 = block * j->block;
    int64_t rows = j->rows - r0 < j->block ? j->rows - r0 : j->block;
    if (j->dot) {
      j->isa->dot(rows, j->k, j->matrix + r0 * j->row_stride, j->row_stride, j->vector, out);
    } else {
      j->isa->axpy(rows, j->k, j->matrix + r0, j->k_stride, j->vector, j->vector_stride, out);
    }
    for (int64_t r = 0; r < rows; r++) {
      float* target = j->y + (r0 + r) * j->y_stride;
      float value = j->alpha * out[r];
      if (j->beta != 0) value += j->beta * *target;
      *target = value;
    }
  }
}

/* Runs C = alpha*A*B + beta*C as a matrix-vector product when the shapes and strides allow;
 * false otherwise. */
static bool gemv_try(stax_threadpool_t* pool, int64_t m, int64_t n, int64_t k, double alpha,
                     const stax_gemm_operand_t* a, const stax_gemm_operand_t* b, double beta,
                     float* c, int64_t c_row_stride, int64_t c_col_stride) {
  if (a->dtype != STAX_DTYPE_FLOAT32 || b->dtype != STAX_DTYPE_FLOAT32 || (m != 1 && n != 1))
    return false;
  gemv_job_t j = {gemm_isa(), false, 0, 0, k, NULL, 0, 0, NULL, 0, (float)alpha, (float)beta, c, 0};
  if (m == 1) { /* C row = a^T-row x B: matrix rows are B's columns */
    j.rows = n, j.matrix = b->data, j.row_stride = b->col_stride, j.k_stride = b->row_stride;
    j.vector = a->data, j.vector_stride = a->col_stride, j.y_stride = c_col_stride;
  } else { /* C column = A x b */
    j.rows = m, j.matrix = a->data, j.row_stride = a->row_stride, j.k_stride = a->col_stride;
    j.vector = b->data, j.vector_stride = b->row_stride, j.y_stride = c_row_stride;
  }
  if (j.k_stride == 1 && j.vector_stride == 1) {
    j.dot = true;
  } else if (j.row_stride != 1) {
    return false;
  }
  /* Wide blocks keep the axpy form's reads sequential (a row of B at a time); one per thread
   * when the product is worth splitting. */
  int64_t threads = pool && (double)j.rows * (double)k >= GEMM_PARALLEL_MIN_WORK
                        ? stax_threadpool_thread_count(pool)
                        : 1;
  j.block = round_up((j.rows + threads - 1) / threads, 64);
  if (j.block > GEMV_BLOCK_MAX) j.block = GEMV_BLOCK_MAX;
  stax_parallel_for(threads > 1 ? pool : NULL, (j.rows + j.block - 1) / j.block, 1, gemv_blocks,
                    &j);
  return true;
}

/* ---- B packed once (constant weights) ----------------------------------------------------- */

/* Bytes of one (NC panel, KC slice) block as pack_b_slivers lays it out, rounded to 64 so the
 * next block stays aligned. */
static size_t prepacked_block_bytes(const gemm_kernel_t* kernel, int64_t n_count, int64_t k_count) {
  int64_t slivers = (n_count + kernel->nr - 1) / kernel->nr;
  return (size_t)round_up(slivers * kernel->nr * k_count * (int64_t)kernel->element_size, 64);
}

static const gemm_kernel_t* gemm_kernel_for(stax_dtype_t compute_dtype) {
  const gemm_isa_t* isa = gemm_isa();
  return compute_dtype == STAX_DTYPE_FLOAT64 ? &isa->f64 : &isa->f32;
}

size_t stax_gemm_prepacked_b_size(stax_dtype_t compute_dtype, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) return 0;
  const gemm_kernel_t* kernel = gemm_kernel_for(compute_dtype);
  size_t total = 0;
  for (int64_t jc = 0; jc < n; jc += GEMM_NC)
    for (int64_t pc = 0; pc < k; pc += GEMM_KC)
      total += prepacked_block_bytes(kernel, min64(GEMM_NC, n - jc), min64(GEMM_KC, k - pc));
  return total;
}

uint64_t stax_gemm_prepacked_b_key(stax_dtype_t compute_dtype, int64_t n, int64_t k,
                                   const stax_gemm_operand_t* b, int64_t offset_bytes) {
  /* Everything the layout depends on: the micro-kernel (its NR and element size), the
   * operand's dtype, place and strides, and the sizes. */
  const gemm_kernel_t* kernel = gemm_kernel_for(compute_dtype);
  uint64_t words[8] = {(uint64_t)(uintptr_t)kernel, (uint64_t)compute_dtype, (uint64_t)b->dtype,
                       (uint64_t)offset_bytes, (uint64_t)b->row_stride, (uint64_t)b->col_stride,
                       (uint64_t)n, (uint64_t)k};
  uint64_t key = 0x9ac4edull;
  for (int i = 0; i < 8; i++) key = stax_hash_combine(key, words[i]);
  return key;
}

void stax_gemm_prepack_b(stax_dtype_t compute_dtype, int64_t n, int64_t k,
                         const stax_gemm_operand_t* b, void* out) {
  gemm_step_t s;
  memset(&s, 0, sizeof(s));
  s.kernel = gemm_kernel_for(compute_dtype);
  s.pack_b = gemm_pack_for(compute_dtype, b->dtype);
  s.b = b;
  s.b_element_size = stax_dtype_size(b->dtype);
  char* at = out;
  for (int64_t jc = 0; jc < n; jc += GEMM_NC) {
    s.n_begin = jc;
    s.n_count = min64(GEMM_NC, n - jc);
    s.n_slivers = (s.n_count + s.kernel->nr - 1) / s.kernel->nr;
    for (int64_t pc = 0; pc < k; pc += GEMM_KC) {
      s.k_begin = pc;
      s.k_count = min64(GEMM_KC, k - pc);
      s.packed_b = at;
      pack_b_slivers(&s, 0, s.n_slivers);
      at += prepacked_block_bytes(s.kernel, s.n_count, s.k_count);
    }
  }
}

static void gemm_run(stax_dtype_t compute_dtype, void* workspace, stax_threadpool_t* pool,
                     int64_t m, int64_t n, int64_t k, double alpha, const stax_gemm_operand_t* a,
                     const stax_gemm_operand_t* b, const void* prepacked_b, double beta, void* c,
                     int64_t c_row_stride, int64_t c_col_stride);

void stax_gemm_run(stax_dtype_t compute_dtype, void* workspace, stax_threadpool_t* pool, int64_t m,
                   int64_t n, int64_t k, double alpha, const stax_gemm_operand_t* a,
                   const stax_gemm_operand_t* b, double beta, void* c, int64_t c_row_stride,
                   int64_t c_col_stride) {
  gemm_run(compute_dtype, workspace, pool, m, n, k, alpha, a, b, NULL, beta, c, c_row_stride,
           c_col_stride);
}

void stax_gemm_run_prepacked(stax_dtype_t compute_dtype, void* workspace, stax_threadpool_t* pool,
                             int64_t m, int64_t n, int64_t k, double alpha,
                             const stax_gemm_operand_t* a, const stax_gemm_operand_t* b,
                             const void* prepacked_b, double beta, void* c, int64_t c_row_stride,
                             int64_t c_col_stride) {
  gemm_run(compute_dtype, workspace, pool, m, n, k, alpha, a, b, prepacked_b, beta, c,
           c_row_stride, c_col_stride);
}

static void gemm_run(stax_dtype_t compute_dtype, void* workspace, stax_threadpool_t* pool,
                     int64_t m, int64_t n, int64_t k, double alpha, const stax_gemm_operand_t* a,
                     const stax_gemm_operand_t* b, const void* prepacked_b, double beta, void* c,
                     int64_t c_row_stride, int64_t c_col_stride) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    scale_c(compute_dtype, m, n, beta, c, c_row_stride, c_col_stride);
    return;
  }
  if (compute_dtype == STAX_DTYPE_FLOAT32 &&
      gemv_try(pool, m, n, k, alpha, a, b, beta, c, c_row_stride, c_col_stride))
    return;
  const gemm_isa_t* isa = gemm_isa();
  gemm_step_t s;
  memset(&s, 0, sizeof(s));
  s.kernel = compute_dtype == STAX_DTYPE_FLOAT64 ? &isa->f64 : &isa->f32;
  s.pack_a = gemm_pack_for(compute_dtype, a->dtype);
  s.pack_b = gemm_pack_for(compute_dtype, b->dtype);
  s.a = a;
  s.b = b;
  s.a_element_size = stax_dtype_size(a->dtype);
  s.b_element_size = stax_dtype_size(b->dtype);
  s.packed_a = workspace;
  s.packed_b = (char*)workspace + packed_a_bytes(s.kernel->element_size, m, k);
  s.scalars.alpha = alpha;
  s.c = c;
  s.c_row_stride = c_row_stride;
  s.c_col_stride = c_col_stride;
  const int64_t mr = s.kernel->mr, nr = s.kernel->nr;
  /* m*n*k may overflow for absurd sizes; compare stepwise. */
  bool parallel = pool && stax_threadpool_thread_count(pool) > 1 &&
                  (double)m * (double)n * (double)k >= GEMM_PARALLEL_MIN_WORK;
  stax_threadpool_t* use_pool = parallel ? pool : NULL;
  int64_t threads = parallel ? stax_threadpool_thread_count(pool) : 1;

  for (int64_t jc = 0; jc < n; jc += GEMM_NC) {
    s.n_begin = jc;
    s.n_count = min64(GEMM_NC, n - jc);
    s.n_slivers = (s.n_count + nr - 1) / nr;
    for (int64_t pc = 0; pc < k; pc += GEMM_KC) {
      s.k_begin = pc;
      s.k_count = min64(GEMM_KC, k - pc);
      s.scalars.beta = pc == 0 ? beta : 1.0;
      if (prepacked_b) {
        /* Read-only: the block stax_gemm_prepack_b made for this (panel, slice). */
        s.packed_b = (char*)(uintptr_t)prepacked_b;
        prepacked_b = (const char*)prepacked_b + prepacked_block_bytes(s.kernel, s.n_count,
                                                                       s.k_count);
      } else {
        s.packed_b = (char*)workspace + packed_a_bytes(s.kernel->element_size, m, k);
        stax_parallel_for(use_pool, s.n_slivers, 4, pack_b_slivers, &s);
      }
      for (int64_t ic = 0; ic < m; ic += GEMM_MBIG) {
        s.m_begin = ic;
        s.m_count = min64(GEMM_MBIG, m - ic);
        int64_t m_slivers = (s.m_count + mr - 1) / mr;
        stax_parallel_for(use_pool, m_slivers, 4, pack_a_slivers, &s);
        /* Row blocks of at most MC rows, their count rounded up to a multiple of the thread
         * count so equal blocks spread evenly (11 blocks on 2 threads would idle one for a
         * twelfth of the time); then enough column splits for several tasks per thread. */
        s.m_blocks = (s.m_count + GEMM_MC - 1) / GEMM_MC;
        s.m_blocks = (s.m_blocks + threads - 1) / threads * threads;
        if (s.m_blocks > m_slivers) s.m_blocks = m_slivers;
        s.block_rows = (m_slivers + s.m_blocks - 1) / s.m_blocks * mr;
        s.m_blocks = (s.m_count + s.block_rows - 1) / s.block_rows;
        int64_t want_tasks = 4 * threads;
        int64_t splits = (want_tasks + s.m_blocks - 1) / s.m_blocks;
        if (splits > s.n_slivers) splits = s.n_slivers;
        if (splits < 1) splits = 1;
        s.slivers_per_split = (s.n_slivers + splits - 1) / splits;
        splits = (s.n_slivers + s.slivers_per_split - 1) / s.slivers_per_split;
        stax_parallel_for(use_pool, s.m_blocks * splits, 1, compute_tasks, &s);
      }
    }
  }
}

stax_status_t stax_gemm(stax_allocator_t allocator, stax_dtype_t compute_dtype,
                        stax_threadpool_t* pool, int64_t m, int64_t n, int64_t k, double alpha,
                        const stax_gemm_operand_t* a, const stax_gemm_operand_t* b, double beta,
                        void* c, int64_t c_row_stride, int64_t c_col_stride) {
  if (!stax_gemm_supports(compute_dtype, a->dtype) ||
      !stax_gemm_supports(compute_dtype, b->dtype)) {
    return stax_status_make(STAX_INTERNAL, "gemm: no %s core for %s x %s operands",
                            stax_dtype_name(compute_dtype), stax_dtype_name(a->dtype),
                            stax_dtype_name(b->dtype));
  }
  size_t bytes = stax_gemm_workspace_size(compute_dtype, m, n, k);
  void* workspace = NULL;
  if (bytes > 0) {
    STAX_RETURN_IF_ERROR(stax_allocator_malloc_aligned(allocator, bytes, 64, &workspace),
                         "gemm workspace of %zu bytes", bytes);
  }
  stax_gemm_run(compute_dtype, workspace, pool, m, n, k, alpha, a, b, beta, c, c_row_stride,
                c_col_stride);
  if (workspace) stax_allocator_free_aligned(allocator, workspace, bytes, 64);
  return STAX_OK;
}
