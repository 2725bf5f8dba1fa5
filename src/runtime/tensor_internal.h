/* Internal layout of buffers and tensors, shared by the runtime and the kernels, plus the
 * runtime's internal helpers (dtype kinds, strided conversion, shape arithmetic, the pool's
 * hooks). Users see only the opaque handles of include/stax/runtime.h. */
#ifndef STAX_RUNTIME_TENSOR_INTERNAL_H_
#define STAX_RUNTIME_TENSOR_INTERNAL_H_

#include <stdatomic.h>

#include "stax/runtime.h"

/* Data computed from an immutable buffer's contents and kept with it (the GEMM core's packed
 * form of a constant weight), freed with the buffer. A list: one entry per key. */
typedef struct stax_buffer_derived_t {
  struct stax_buffer_derived_t* next;
  uint64_t key;
  size_t size;
  void* data; /* 64-byte aligned, from stax_allocator_system */
} stax_buffer_derived_t;

struct stax_buffer_s {
  atomic_int_fast32_t refcount;
  void* data;
  size_t size;                    /* bytes usable */
  size_t capacity;                /* bytes allocated (pool size class) */
  stax_allocator_t allocator;     /* frees the struct (and data when owned) */
  stax_buffer_release_fn release; /* for wrapped memory; NULL when stax owns data */
  void* release_ctx;
  uint8_t pooled; /* data returns to a thread's pool on release */
  uint8_t owns_data;
  /* Set by the owner of contents that never change again (a compiled program's constants):
   * kernels may then keep derived data (stax_buffer_derived_*). */
  uint8_t immutable;
  _Atomic(stax_buffer_derived_t*) derived;
};

/* Marks a buffer's contents as never changing again (only for buffers stax owns). */
void stax_buffer_set_immutable(stax_buffer_t* buffer);
/* The derived data stored under `key` with `size` bytes, or NULL. Thread-safe. */
const void* stax_buffer_derived_get(const stax_buffer_t* buffer, uint64_t key, size_t size);
/* Stores `data` (64-byte aligned, stax_allocator_system; ownership passes) under `key` and
 * returns what is stored under it now: `data`, or another thread's equal entry (then `data`
 * is freed). NULL when the buffer is not immutable (then `data` is freed too). */
const void* stax_buffer_derived_put(stax_buffer_t* buffer, uint64_t key, void* data, size_t size);

/* Buffers whose memory stax allocates are one block: this many header bytes (the struct,
 * padded so the data after it keeps the block's 64-byte alignment), then `capacity` bytes of
 * data. One allocation per buffer means one failure point and one cache miss. */
#define STAX_BUFFER_HEADER_SIZE 128

struct stax_tensor_s {
  atomic_int_fast32_t refcount;
  stax_allocator_t allocator;
  stax_buffer_t* buffer; /* retained */
  stax_dtype_t dtype;
  int32_t rank;
  int64_t offset; /* in elements */
  int64_t dims[STAX_MAX_RANK];
  /* In elements. 0 on broadcast dims; negative after a slice with a negative step (the
   * element at index 0 is then at `offset`, later ones lie before it). */
  int64_t strides[STAX_MAX_RANK];
  /* A sequence value (ONNX sequence(tensor)) rides in a tensor handle so that registers, the
   * run API and every refcounting path carry both kinds (src/runtime/sequence.c): then
   * `is_sequence` is set, buffer is NULL, rank 0, dtype the elements' dtype, and items[0,
   * length) are its elements, in a block (retained) that sequences made by appending share.
   * Sequences are immutable once made. */
  bool is_sequence;
  int64_t length;
  stax_tensor_t** items;
  struct stax_sequence_block_s* block;
};

/* ---- sequences (sequence.c) ------------------------------------------------------------- */

/* The most elements a sequence holds (bounds the item array a hostile model can ask for). */
#define STAX_SEQUENCE_MAX_LENGTH ((int64_t)1 << 24)
/* Drops a sequence handle's block (stax_tensor_release's last reference). */
void stax_sequence_destroy_items(stax_tensor_t* sequence);
/* A new sequence: `sequence` with `element` appended (retained). When nothing was appended
 * to `sequence`'s block after its last element, the new sequence shares the block, so a Loop
 * that appends one element per iteration costs amortized O(1) per append, not O(length). */
STAX_MUST_USE stax_status_t stax_sequence_append(stax_allocator_t allocator,
                                                 const stax_tensor_t* sequence,
                                                 stax_tensor_t* element,
                                                 stax_tensor_t** out_sequence);
/* INVALID_ARGUMENT "<what> is a sequence; a tensor is needed here" when `tensor` is a
 * sequence handle (public tensor functions refuse them), else OK. */
STAX_MUST_USE stax_status_t stax_tensor_require_tensor(const stax_tensor_t* tensor,
                                                       const char* what);

/* ---- dtypes (dtype.c) ------------------------------------------------------------------- */

bool stax_dtype_is_valid(stax_dtype_t dtype);
/* 'F' float, 'I' signed integer, 'U' unsigned integer, 'B' bool; 0 for an invalid dtype. */
char stax_dtype_kind(stax_dtype_t dtype);
/* DLPack type code (0 int, 1 uint, 2 float, 4 bfloat, 6 bool); -1 for an invalid dtype. */
int32_t stax_dtype_dlpack_code(stax_dtype_t dtype);
/* INVALID when no stax dtype has this code and bit width. */
stax_dtype_t stax_dtype_from_dlpack(int32_t code, int32_t bits);

/* ---- conversion (convert.c, half.c) ----------------------------------------------------- */

/* stax_convert_elements with byte strides on both sides (any sign, 0 allowed on the source).
 * Same semantics: see convert.c for the rules on NaN and out-of-range values. */
void stax_convert_strided(stax_dtype_t src_dtype, const void* src, int64_t src_stride_bytes,
                          stax_dtype_t dst_dtype, void* dst, int64_t dst_stride_bytes,
                          int64_t count);
/* Correctly rounded (nearest even) narrowing from double, without the double rounding that
 * going through float would add. */
uint16_t stax_f64_to_f16(double value);
/* float16 or bfloat16: stored in 16 bits, computed through float32 by the kernels and the
 * JIT. */
static inline bool stax_dtype_is_half(stax_dtype_t dtype) {
  return dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16;
}
uint16_t stax_f64_to_bf16(double value);

/* ---- shapes (tensor.c) ------------------------------------------------------------------ */

/* Checks rank (0..STAX_MAX_RANK), dims (non-negative; NULL only for rank 0) and that the
 * element count fits in int64; `what` names the tensor in the message. */
STAX_MUST_USE stax_status_t stax_shape_validate(const char* what, int32_t rank, const int64_t* dims,
                                                int64_t* out_count);
/* Row-major strides in elements. */
void stax_shape_contiguous_strides(int32_t rank, const int64_t* dims, int64_t* out_strides);
/* Lowest and highest element offsets (relative to the first element) a view reaches. False
 * when the view is empty or the arithmetic overflows int64. */
bool stax_shape_extent(int32_t rank, const int64_t* dims, const int64_t* strides,
                       int64_t* out_lowest, int64_t* out_highest);
/* Whether dims [0, lead) walk as one dim of rows: each dim of extent > 1 strides over the
 * next-inner one of extent > 1 (dims of extent 1 stride anyhow). *out_rows: their product;
 * *out_row_stride: the stride of the innermost one of extent > 1, 0 when there is none.
 * False when they do not, or the arithmetic overflows. (The JIT's rows-generic kernels take
 * `[B, S, 768]` as R = B*S rows of 768 this way.) */
bool stax_shape_lead_rows(int32_t lead, const int64_t* dims, const int64_t* strides,
                          int64_t* out_rows, int64_t* out_row_stride);

/* "[2, 3, 4]" for messages, by value so it can sit inside a printf argument list:
 *   stax_status_make(..., "dims %s", stax_dims_text(rank, dims).text) */
typedef struct stax_dims_text_t {
  char text[256];
} stax_dims_text_t;
stax_dims_text_t stax_dims_text(int32_t rank, const int64_t* dims);

/* A tensor over `buffer` (retained) with the given metadata, not checked against the buffer:
 * for view operations whose result is in bounds by construction. */
STAX_MUST_USE stax_status_t stax_tensor_make_view(stax_allocator_t allocator, stax_buffer_t* buffer,
                                                  stax_dtype_t dtype, int32_t rank,
                                                  const int64_t* dims, const int64_t* strides,
                                                  int64_t offset, stax_tensor_t** out_tensor);

/* ---- buffers and the pool (buffer.c, pool.c) ------------------------------------------- */

/* Fills in the header of a block stax allocated (see STAX_BUFFER_HEADER_SIZE); refcount 1. */
void stax_buffer_init_block(stax_buffer_t* buffer, stax_allocator_t allocator, size_t size,
                            size_t capacity, bool pooled);
/* Takes a pooled buffer whose last reference went: caches its block in the calling thread's
 * pool, or frees it when the pool is full or the thread is exiting. */
void stax_pool_take_back(stax_buffer_t* buffer);

#endif /* STAX_RUNTIME_TENSOR_INTERNAL_H_ */
