/* stax runtime: element types, tensors (refcounted buffers + views), the buffer pool, the
 * thread pool and DLPack exchange. */
#ifndef STAX_RUNTIME_H_
#define STAX_RUNTIME_H_

#include "stax/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STAX_MAX_RANK 8
#define STAX_BUFFER_ALIGNMENT 64

/* ---------------------------------------------------------------------------------------- */
/* Element types                                                                            */
/* ---------------------------------------------------------------------------------------- */

typedef enum stax_dtype_e {
#define STAX_DTYPE(name, text, size, kind, onnx, dlpack, ctype) STAX_DTYPE_##name,
#include "stax/dtypes.def"
#undef STAX_DTYPE
  STAX_DTYPE_COUNT,
  STAX_DTYPE_INVALID = -1
} stax_dtype_t;

const char* stax_dtype_name(stax_dtype_t dtype);            /* "float32"; "invalid" if bad */
size_t stax_dtype_size(stax_dtype_t dtype);                 /* bytes per element; 0 if bad */
bool stax_dtype_is_float(stax_dtype_t dtype);
bool stax_dtype_is_signed_int(stax_dtype_t dtype);
bool stax_dtype_is_unsigned_int(stax_dtype_t dtype);
bool stax_dtype_is_integer(stax_dtype_t dtype);             /* signed or unsigned */
stax_dtype_t stax_dtype_from_name(const char* name);        /* also accepts "float", "double",
                                                               "half", fp32, fp64, fp16, bf16;
                                                               INVALID if unknown */
stax_dtype_t stax_dtype_from_onnx(int32_t onnx_code);       /* INVALID if unsupported */
int32_t stax_dtype_to_onnx(stax_dtype_t dtype);

/* IEEE half and bfloat16 conversions (round to nearest even; NaN and Inf preserved). */
float stax_f16_to_f32(uint16_t h);
uint16_t stax_f32_to_f16(float f);
float stax_bf16_to_f32(uint16_t b);
uint16_t stax_f32_to_bf16(float f);

/* Converts `count` contiguous elements between any two dtypes (ONNX Cast semantics: float to
 * int truncates toward zero, to bool is x != 0, bool to number is 0/1). */
void stax_convert_elements(stax_dtype_t src_dtype, const void* src, stax_dtype_t dst_dtype,
                           void* dst, size_t count);

/* ---------------------------------------------------------------------------------------- */
/* Buffers                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* A refcounted block of memory, 64-byte aligned when stax allocates it. */
typedef struct stax_buffer_s stax_buffer_t;

STAX_MUST_USE stax_status_t stax_buffer_allocate(stax_allocator_t allocator, size_t size_bytes,
                                                 stax_buffer_t** out_buffer);
/* Allocates through the calling thread's size-class pool (see stax_pool_*). */
STAX_MUST_USE stax_status_t stax_buffer_allocate_pooled(size_t size_bytes,
                                                        stax_buffer_t** out_buffer);
/* Wraps memory stax does not own; `release(release_ctx, data)` runs when the last reference
 * goes (may be NULL when the caller keeps the memory alive longer than the buffer). */
typedef void (*stax_buffer_release_fn)(void* release_ctx, void* data);
STAX_MUST_USE stax_status_t stax_buffer_wrap(stax_allocator_t allocator, void* data,
                                             size_t size_bytes, stax_buffer_release_fn release,
                                             void* release_ctx, stax_buffer_t** out_buffer);
void stax_buffer_retain(stax_buffer_t* buffer);
void stax_buffer_release(stax_buffer_t* buffer);
void* stax_buffer_data(const stax_buffer_t* buffer);
size_t stax_buffer_size(const stax_buffer_t* buffer);

/* ---------------------------------------------------------------------------------------- */
/* Tensors                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* A tensor is a view onto a buffer: dtype, rank, dims, strides (in elements; 0 for broadcast
 * dims, negative for reversed slices), and an element offset. Refcounted; views share the
 * buffer. */
typedef struct stax_tensor_s stax_tensor_t;

/* Contiguous (row-major), uninitialised. rank 0 is a scalar; dims may be 0. */
STAX_MUST_USE stax_status_t stax_tensor_create(stax_allocator_t allocator, stax_dtype_t dtype,
                                               int32_t rank, const int64_t* dims,
                                               stax_tensor_t** out_tensor);
STAX_MUST_USE stax_status_t stax_tensor_create_zeros(stax_allocator_t allocator,
                                                     stax_dtype_t dtype, int32_t rank,
                                                     const int64_t* dims,
                                                     stax_tensor_t** out_tensor);
/* A view over an existing buffer (retained). strides may be NULL for row-major. Fails if any
 * reachable element lies outside the buffer. */
STAX_MUST_USE stax_status_t stax_tensor_create_view(stax_allocator_t allocator,
                                                    stax_buffer_t* buffer, stax_dtype_t dtype,
                                                    int32_t rank, const int64_t* dims,
                                                    const int64_t* strides, int64_t offset,
                                                    stax_tensor_t** out_tensor);
/* Wraps user memory without copying; release as in stax_buffer_wrap. */
STAX_MUST_USE stax_status_t stax_tensor_wrap(stax_allocator_t allocator, void* data,
                                             stax_dtype_t dtype, int32_t rank,
                                             const int64_t* dims, const int64_t* strides,
                                             stax_buffer_release_fn release, void* release_ctx,
                                             stax_tensor_t** out_tensor);
void stax_tensor_retain(stax_tensor_t* tensor);
void stax_tensor_release(stax_tensor_t* tensor);

stax_dtype_t stax_tensor_dtype(const stax_tensor_t* tensor);
int32_t stax_tensor_rank(const stax_tensor_t* tensor);
const int64_t* stax_tensor_dims(const stax_tensor_t* tensor);
const int64_t* stax_tensor_strides(const stax_tensor_t* tensor);
int64_t stax_tensor_offset(const stax_tensor_t* tensor);
int64_t stax_tensor_element_count(const stax_tensor_t* tensor);
stax_buffer_t* stax_tensor_buffer(const stax_tensor_t* tensor); /* borrowed */
/* Address of the first element (buffer data + offset * element size). */
void* stax_tensor_data(const stax_tensor_t* tensor);
bool stax_tensor_is_contiguous(const stax_tensor_t* tensor);

/* Sequences (ONNX sequence values): an ordered, immutable list of tensors of one dtype, carried
 * by the same handle type as tensors so that stax_context_run takes and returns both. A
 * sequence handle has rank 0 and the elements' dtype; stax_tensor_data returns NULL for it, and
 * the tensor functions below refuse it (INVALID_ARGUMENT). Elements may differ in shape.
 * stax_sequence_create retains each element; every element must be a tensor (not a sequence)
 * of `dtype`, else INVALID_ARGUMENT / DTYPE_MISMATCH naming the element. length may be 0. */
STAX_MUST_USE stax_status_t stax_sequence_create(stax_allocator_t allocator, stax_dtype_t dtype,
                                                 int64_t length,
                                                 stax_tensor_t* const* elements,
                                                 stax_tensor_t** out_sequence);
bool stax_tensor_is_sequence(const stax_tensor_t* value);
/* The number of elements; -1 when `sequence` is a tensor. */
int64_t stax_sequence_length(const stax_tensor_t* sequence);
/* Element `index` (0 <= index < length; borrowed), or NULL when out of range or not a
 * sequence. */
stax_tensor_t* stax_sequence_at(const stax_tensor_t* sequence, int64_t index);

/* Views: metadata only, no data copied. Each returns a new tensor sharing the buffer.
 * reshape: one dim may be -1 (inferred), 0 copies the input dim (ONNX rule, unless
 * allow_zero). Fails with SHAPE_MISMATCH when element counts differ, and with
 * FAILED_PRECONDITION when the strides make a view impossible (use stax_tensor_reshape_copy). */
STAX_MUST_USE stax_status_t stax_tensor_reshape(stax_allocator_t allocator,
                                                stax_tensor_t* tensor, int32_t rank,
                                                const int64_t* dims, bool allow_zero,
                                                stax_tensor_t** out_tensor);
/* Like reshape, but copies into a fresh contiguous tensor when no view is possible. */
STAX_MUST_USE stax_status_t stax_tensor_reshape_copy(stax_allocator_t allocator,
                                                     stax_tensor_t* tensor, int32_t rank,
                                                     const int64_t* dims, bool allow_zero,
                                                     stax_tensor_t** out_tensor);
/* perm may be NULL (reverse the axes). */
STAX_MUST_USE stax_status_t stax_tensor_transpose(stax_allocator_t allocator,
                                                  stax_tensor_t* tensor, const int32_t* perm,
                                                  stax_tensor_t** out_tensor);
/* ONNX Slice semantics per axis (negative starts/ends count from the end, clamped; steps may
 * be negative, never 0). axes may be NULL for 0..count-1, steps NULL for all 1. */
STAX_MUST_USE stax_status_t stax_tensor_slice(stax_allocator_t allocator,
                                              stax_tensor_t* tensor, int32_t count,
                                              const int64_t* starts, const int64_t* ends,
                                              const int32_t* axes, const int64_t* steps,
                                              stax_tensor_t** out_tensor);
/* numpy broadcasting to `dims` (stride 0 on expanded dims). */
STAX_MUST_USE stax_status_t stax_tensor_broadcast(stax_allocator_t allocator,
                                                  stax_tensor_t* tensor, int32_t rank,
                                                  const int64_t* dims,
                                                  stax_tensor_t** out_tensor);
/* axes NULL squeezes every dim of size 1 (a non-NULL empty list squeezes nothing); negative
 * axes count from the end. */
STAX_MUST_USE stax_status_t stax_tensor_squeeze(stax_allocator_t allocator,
                                                stax_tensor_t* tensor, int32_t axis_count,
                                                const int32_t* axes, stax_tensor_t** out_tensor);
/* axes index the output rank; negative count from the end of the output. */
STAX_MUST_USE stax_status_t stax_tensor_unsqueeze(stax_allocator_t allocator,
                                                  stax_tensor_t* tensor, int32_t axis_count,
                                                  const int32_t* axes,
                                                  stax_tensor_t** out_tensor);
/* A fresh contiguous copy of any view. */
STAX_MUST_USE stax_status_t stax_tensor_copy(stax_allocator_t allocator,
                                             const stax_tensor_t* tensor,
                                             stax_tensor_t** out_tensor);
/* Copies elements of src into dst (same dims; dtypes may differ: converted). */
STAX_MUST_USE stax_status_t stax_tensor_copy_into(const stax_tensor_t* src, stax_tensor_t* dst);

/* ---------------------------------------------------------------------------------------- */
/* Buffer pool                                                                              */
/* ---------------------------------------------------------------------------------------- */

/* Each thread keeps free buffers by power-of-two size class; stax_buffer_allocate_pooled hits
 * it first. Statistics are per calling thread. */
typedef struct stax_pool_stats_t {
  uint64_t hits;
  uint64_t misses;
  uint64_t returns;       /* buffers given back to the pool */
  uint64_t evictions;     /* buffers freed because the pool was full */
  uint64_t bytes_cached;  /* bytes held in free lists now */
  /* Process-wide: capacity of pooled buffers in use now, its high-water mark, and the
   * limit in force (the automatic one follows the high-water mark). */
  uint64_t live_bytes;
  uint64_t peak_live_bytes;
  uint64_t limit;
} stax_pool_stats_t;

stax_pool_stats_t stax_pool_stats(void);
/* Frees every cached buffer of the calling thread. */
void stax_pool_trim(void);
/* Upper bound on bytes one thread's pool caches. By default (STAX_POOL_LIMIT_AUTO) it is the
 * larger of 256 MiB and the most bytes of pooled buffers ever live at once, so a workload's
 * largest call finds its buffers cached instead of mapping (and page-faulting) them again;
 * any other value is a hard cap (0: cache nothing). */
#define STAX_POOL_LIMIT_AUTO UINT64_MAX
void stax_pool_set_limit(uint64_t bytes);

/* ---------------------------------------------------------------------------------------- */
/* Instruction-set level                                                                    */
/* ---------------------------------------------------------------------------------------- */

/* The vector instruction sets stax's kernels have code for, lowest first. BASELINE is what
 * every CPU of the architecture has (SSE2 on x86-64); AVX2 includes FMA; AVX512 is F, BW, DQ
 * and VL. */
typedef enum stax_isa_t {
  STAX_ISA_BASELINE = 0,
  STAX_ISA_AVX2 = 1,
  STAX_ISA_AVX512 = 2,
} stax_isa_t;

/* The level the kernels use: the CPU's (detected at run time), lowered by the cap. The
 * generic kernels read it on every call; the JIT reads it once, when its backend starts
 * (its first compile), so a cap meant for the JIT must be set before that. */
stax_isa_t stax_isa(void);
/* The CPU's own level, whatever the cap. */
stax_isa_t stax_isa_detected(void);
/* "avx512", "avx2", "sse2" (x86) or "baseline". */
const char* stax_isa_name(stax_isa_t isa);
/* Caps the level at `name` ("avx512", "avx2", "sse2" or "baseline"; "native" or NULL: no
 * cap). A cap above the CPU's level changes nothing. The environment variable STAX_ISA sets
 * the same cap at start (an unknown value there is reported on stderr and ignored); this
 * call overrides it. STAX_INVALID_ARGUMENT for an unknown name. */
STAX_MUST_USE stax_status_t stax_set_isa_cap(const char* name);

/* ---------------------------------------------------------------------------------------- */
/* Thread pool                                                                              */
/* ---------------------------------------------------------------------------------------- */

typedef struct stax_threadpool_s stax_threadpool_t;

/* thread_count 0 = the number of online cores (or STAX_NUM_THREADS when set). The calling
 * thread participates, so thread_count 1 runs everything inline. */
STAX_MUST_USE stax_status_t stax_threadpool_create(stax_allocator_t allocator,
                                                   int32_t thread_count,
                                                   stax_threadpool_t** out_pool);
void stax_threadpool_destroy(stax_threadpool_t* pool);
int32_t stax_threadpool_thread_count(const stax_threadpool_t* pool);

/* Process-wide pool, created on first use (never fails: falls back to inline execution). */
stax_threadpool_t* stax_threadpool_default(void);
/* Sets the default pool's size for the next creation; returns false if it already exists. */
bool stax_threadpool_set_default_threads(int32_t thread_count);

/* Calls fn(ctx, begin, end) over [0, count) in chunks of at least `grain` items, across the
 * pool's threads, and returns when all are done. Safe to call from several threads at once
 * and from inside fn (nested calls run inline). pool may be NULL: runs inline. */
typedef void (*stax_parallel_fn)(void* ctx, int64_t begin, int64_t end);
void stax_parallel_for(stax_threadpool_t* pool, int64_t count, int64_t grain,
                       stax_parallel_fn fn, void* ctx);

/* ---------------------------------------------------------------------------------------- */
/* DLPack                                                                                   */
/* ---------------------------------------------------------------------------------------- */

struct DLManagedTensor;

/* Takes ownership of `managed` (its deleter runs when the tensor's buffer is released), zero
 * copy. Only CPU tensors of supported dtypes; on error ownership stays with the caller. */
STAX_MUST_USE stax_status_t stax_tensor_from_dlpack(stax_allocator_t allocator,
                                                    struct DLManagedTensor* managed,
                                                    stax_tensor_t** out_tensor);
/* Exports a view (retains the tensor until the consumer calls the deleter). */
STAX_MUST_USE stax_status_t stax_tensor_to_dlpack(stax_allocator_t allocator,
                                                  stax_tensor_t* tensor,
                                                  struct DLManagedTensor** out_managed);

#ifdef __cplusplus
}
#endif

#endif /* STAX_RUNTIME_H_ */
