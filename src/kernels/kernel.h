/* The generic-kernel interface: one function per op in ops.def, any shape, any strides, every
 * dtype the op allows. The VM calls them; they are also the reference the JIT is checked
 * against, so correctness beats speed here (but MatMul/Gemm/Conv are blocked and threaded).
 *
 * Calling convention:
 *   - inputs[i] may be any view (non-contiguous, broadcast strides of 0, offset); NULL for an
 *     omitted optional input.
 *   - outputs[i] on entry is either NULL — the kernel computes the shape and allocates (through
 *     stax_kernel_output) — or a preallocated contiguous tensor whose dtype and dims the VM
 *     derived from the symbolic shapes; the kernel must check it agrees with its inputs
 *     (stax_kernel_output does) and write into it. On return every requested output is set
 *     (an owned reference). On error, outputs the kernel allocated are released and reset.
 *   - Every kernel computes its output dims from its inputs (and attributes / input values)
 *     and passes them to stax_kernel_output, which allocates or validates; so every kernel
 *     works both with and without preallocated outputs.
 *   - Errors are statuses prefixed "<Op> node '<name>': " (stax_kernel_error) naming the input
 *     and dim; an index out of range (Gather, Scatter, OneHot, ...) is OUT_OF_RANGE naming the
 *     index value and the position. Nothing reads or writes out of bounds on bad input. */
#ifndef STAX_KERNELS_KERNEL_H_
#define STAX_KERNELS_KERNEL_H_

#include "ir/graph_internal.h"
#include "runtime/tensor_internal.h"
#include "stax/runtime.h"

typedef struct stax_kernel_call_t {
  const stax_node_t* node;  /* op, name and attributes */
  stax_allocator_t allocator; /* scratch memory */
  stax_threadpool_t* pool;  /* may be NULL: run inline */
  int32_t input_count;
  stax_tensor_t* const* inputs;
  int32_t output_count;
  stax_tensor_t** outputs;
  uint32_t kernel_set_outputs; /* bit i: the kernel (not the caller) set outputs[i] */
} stax_kernel_call_t;

typedef stax_status_t (*stax_kernel_fn)(stax_kernel_call_t* call);

/* One kernel per op, named after the op: stax_kernel_Add, stax_kernel_MatMul, ... Control ops
 * (If, Loop) are executed by VM instructions; their entries report that. */
#define STAX_OP(name, min_in, max_in, min_out, max_out, flags, family) \
  STAX_MUST_USE stax_status_t stax_kernel_##name(stax_kernel_call_t* call);
#include "stax/ops.def"
#undef STAX_OP

/* RoiAlign's most sample points along one axis of one roi (output bins x sampling grid): a
 * roi that is huge against its bins with sampling_ratio 0 (adaptive), or a huge
 * sampling_ratio, would otherwise ask for unbounded tables and time. Shape inference refuses
 * output_height / output_width above it. */
#define STAX_ROI_ALIGN_MAX_SAMPLES_PER_AXIS ((int64_t)1 << 24)

/* The kernel table, indexed by stax_op_t. */
stax_kernel_fn stax_kernel_for_op(stax_op_t op);

/* ---- helpers (src/kernels/kernel_util.c) ------------------------------------------------- */

/* Error prefixed with "<Op> node '<name>': ". */
STAX_MUST_USE stax_status_t stax_kernel_error(const stax_kernel_call_t* call,
                                              stax_status_code_t code, const char* fmt, ...)
    STAX_PRINTF(3, 4);
/* Input i, or NULL when absent. */
static inline stax_tensor_t* stax_kernel_input(const stax_kernel_call_t* call, int32_t i) {
  return i < call->input_count ? call->inputs[i] : NULL;
}
/* Gets output i with this dtype and shape: checks a preallocated one matches (SHAPE_MISMATCH
 * naming the output and both shapes otherwise), or allocates a contiguous pooled tensor. The
 * result is borrowed from call->outputs[i]. */
STAX_MUST_USE stax_status_t stax_kernel_output(stax_kernel_call_t* call, int32_t i,
                                               stax_dtype_t dtype, int32_t rank,
                                               const int64_t* dims, stax_tensor_t** out_tensor);
/* Stores a tensor the kernel made (e.g. a view of an input) as output i, taking over the
 * caller's reference. Only for outputs that were NULL on entry. */
void stax_kernel_set_output(stax_kernel_call_t* call, int32_t i, stax_tensor_t* tensor);
/* Releases and clears the outputs the kernel itself set (for error paths); preallocated
 * outputs stay with the caller. */
void stax_kernel_release_outputs(stax_kernel_call_t* call);

/* True when dims [first, rank) of t can be walked with one stride (size-1 dims ignored);
 * *out_stride receives it (1 when every such dim is 1). */
bool stax_kernel_merge_trailing(const stax_tensor_t* t, int32_t first, int64_t* out_stride);

/* numpy broadcasting of `count` shapes; SHAPE_MISMATCH names the inputs and dims. */
STAX_MUST_USE stax_status_t stax_kernel_broadcast_shape(const stax_kernel_call_t* call,
                                                        int32_t count,
                                                        stax_tensor_t* const* tensors,
                                                        int32_t* out_rank, int64_t* out_dims);
/* Strides of `tensor` as seen when broadcast to (rank, dims): 0 on broadcast dims, leading
 * dims added. The shapes must be compatible. */
void stax_kernel_broadcast_strides(const stax_tensor_t* tensor, int32_t rank,
                                   const int64_t* dims, int64_t* out_strides);

/* Walks an N-d index space row by row: for each combination of the outer rank-1 indices,
 * calls row(ctx, offsets, count) where offsets[k] is operand k's element offset of the row's
 * first element (from strides[k]) and count = dims[rank-1] (1 for rank 0). The innermost
 * stride of operand k is strides[k][rank-1]. Up to STAX_ND_MAX_OPERANDS operands. Zero-sized
 * spaces call nothing. */
#define STAX_ND_MAX_OPERANDS 6
typedef void (*stax_nd_row_fn)(void* ctx, const int64_t* offsets, int64_t count);
void stax_nd_for_each_row(int32_t rank, const int64_t* dims, int32_t operand_count,
                          const int64_t* const* strides, const int64_t* base_offsets,
                          stax_nd_row_fn row, void* ctx);
/* The same, split over the thread pool by outer rows (rows must be independent).
 * point_cost is the elements of work behind each index point: 1 for elementwise spaces, the
 * axis length where each point is a whole slice (Softmax, ArgMax, CumSum), so the split
 * sees the real work: a [4, 12, 128] space of 128-long softmax rows is 786k elements, not
 * 6k, and must not stay on one thread. */
void stax_nd_for_each_row_parallel(stax_threadpool_t* pool, int32_t rank, const int64_t* dims,
                                   int32_t operand_count, const int64_t* const* strides,
                                   const int64_t* base_offsets, int64_t point_cost,
                                   stax_nd_row_fn row, void* ctx);

/* Scalar access through double for generic, any-dtype code paths (exact for every integer
 * up to 2^53; int64/uint64 kernels that need all 64 bits use the typed paths). */
double stax_load_as_f64(stax_dtype_t dtype, const void* base, int64_t index);
void stax_store_from_f64(stax_dtype_t dtype, void* base, int64_t index, double value);
/* A strided row (stride in elements) of any dtype to / from contiguous doubles, through the
 * runtime's converter (direct loops for float32 and float64). */
static inline void stax_kernel_load_f64_row(stax_dtype_t dtype, const void* source,
                                            int64_t stride, int64_t count, double* out) {
  stax_convert_strided(dtype, source, stride * (int64_t)stax_dtype_size(dtype),
                       STAX_DTYPE_FLOAT64, out, (int64_t)sizeof(double), count);
}
static inline void stax_kernel_store_f64_row(stax_dtype_t dtype, const double* values,
                                             int64_t count, void* target, int64_t stride) {
  stax_convert_strided(STAX_DTYPE_FLOAT64, values, (int64_t)sizeof(double), dtype, target,
                       stride * (int64_t)stax_dtype_size(dtype), count);
}
/* Exact integer access for index tensors (int32/int64) and shape inputs. */
int64_t stax_load_as_i64(stax_dtype_t dtype, const void* base, int64_t index);

/* Reads a rank-0/1 integer tensor (any strides) into out_values (at most capacity; returns
 * INVALID_ARGUMENT naming `what` when it is not an integer vector or too long). */
STAX_MUST_USE stax_status_t stax_kernel_read_ints(const stax_kernel_call_t* call,
                                                  const stax_tensor_t* tensor, const char* what,
                                                  int64_t capacity, int64_t* out_values,
                                                  int64_t* out_count);

#endif /* STAX_KERNELS_KERNEL_H_ */
