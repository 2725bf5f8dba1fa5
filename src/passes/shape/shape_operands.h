/* Helpers for the shape functions whose output shape is given by another input's *values*
 * (Reshape, Expand, Tile, Pad, Slice, Range, ConstantOfShape, Resize, OneHot, TopK, ...) and
 * for data-dependent and control-flow ops: reading such an input as a vector of dims,
 * fresh symbols for what is not known when the graph is built, bound-aware min/max, and
 * message helpers. Builds on shape_util.h (operands, dtype/rank checks, axes).
 *
 * Values unknown at build time. A shape-giving input whose contents are neither a constant
 * nor recorded symbolic contents still has a known *length* when its own dim 0 is constant;
 * then each unknown entry becomes a fresh symbol (stax_shape_fresh_dim). When even the length
 * is unknown, the output rank is unknown, which stax cannot represent: UNIMPLEMENTED. */
#ifndef STAX_PASSES_SHAPE_SHAPE_OPERANDS_H_
#define STAX_PASSES_SHAPE_SHAPE_OPERANDS_H_

#include "passes/shape/shape_util.h"

/* An integer vector input (rank 0 counts as one element). */
typedef struct stax_shape_vector_t {
  bool known;    /* entries[0..count) are valid */
  int64_t count; /* element count; -1 when unknown */
  const stax_dim_t* entries[STAX_SHAPE_CONTENT_MAX];
} stax_shape_vector_t;

/* Reads input i as an integer vector. DTYPE_MISMATCH unless an integer tensor, SHAPE_MISMATCH
 * unless rank 0 or 1; `role` names it in messages ("shape", "repeats"). The input must be
 * present. Never fails merely because the contents are unknown. */
STAX_MUST_USE stax_status_t stax_shape_read_vector(stax_shape_infer_t* ic, int32_t i,
                                                   const char* role,
                                                   stax_shape_vector_t* out_vector);
/* UNIMPLEMENTED naming the input when even the vector's length is unknown. */
STAX_MUST_USE stax_status_t stax_shape_require_vector_length(stax_shape_infer_t* ic, int32_t i,
                                                             const char* role,
                                                             const stax_shape_vector_t* vector);
/* True with the value when entry k is a known constant. */
bool stax_shape_vector_const(stax_shape_infer_t* ic, const stax_shape_vector_t* vector,
                             int64_t k, int64_t* out_value);

/* Reads a constant input's elements converted to float64 (Resize scales). *out_known is false
 * when the input is not constant; more than `capacity` elements is UNIMPLEMENTED. */
STAX_MUST_USE stax_status_t stax_shape_read_const_doubles(stax_shape_infer_t* ic, int32_t i,
                                                          const char* role, int32_t capacity,
                                                          double* out_values,
                                                          int32_t* out_count, bool* out_known);
/* Counts the nonzero elements among the first `limit` (row-major) of a constant tensor. */
STAX_MUST_USE stax_status_t stax_shape_count_nonzero(stax_shape_infer_t* ic,
                                                     const stax_tensor_t* tensor,
                                                     int64_t limit, int64_t* out_count);

/* A fresh symbol in [min, max] standing for output `output`'s dim `dim`; its origin names the
 * node ("NonZero node 'nz' output 0, dim 1") and its name derives from the op ("nonzero_3"). */
STAX_MUST_USE stax_status_t stax_shape_fresh_dim(stax_shape_infer_t* ic, int32_t output,
                                                 int32_t dim, int64_t min, int64_t max,
                                                 const stax_dim_t** out_dim);
/* The upper bound of a dim from its symbols' ranges (STAX_DIM_MAX when unbounded). */
int64_t stax_shape_dim_upper(stax_shape_infer_t* ic, const stax_dim_t* dim);

/* Product of dims (the constant 1 for none); NULL when construction failed. */
const stax_dim_t* stax_shape_product(stax_shape_infer_t* ic, int32_t count,
                                     const stax_dim_t* const* dims);
/* min/max that drop to one operand when the symbols' ranges decide the comparison, so
 * max(S - 1, 0) is S - 1 when S >= 1. */
const stax_dim_t* stax_shape_min(stax_shape_infer_t* ic, const stax_dim_t* a,
                                 const stax_dim_t* b);
const stax_dim_t* stax_shape_max(stax_shape_infer_t* ic, const stax_dim_t* a,
                                 const stax_dim_t* b);

/* "[B, S, 768]" into buf (always terminated, truncated when too small). */
const char* stax_shape_dims_text(stax_shape_infer_t* ic, int32_t rank,
                                 const stax_dim_t* const* dims, char* buf, size_t size);
/* Unifies a and b with free-form origins; a contradiction is prefixed with the node. */
STAX_MUST_USE stax_status_t stax_shape_unify_described(stax_shape_infer_t* ic,
                                                       const stax_dim_t* a,
                                                       const char* origin_a,
                                                       const stax_dim_t* b,
                                                       const char* origin_b);

/* Sets output i to a rank-0 (`scalar`) or rank-1 integer tensor with the given contents. */
STAX_MUST_USE stax_status_t stax_shape_set_vector_output(stax_shape_infer_t* ic, int32_t i,
                                                         stax_dtype_t dtype, bool scalar,
                                                         int32_t count,
                                                         const stax_dim_t* const* content);
/* Forwards the input's symbolic contents to output i when its values are unchanged in
 * row-major order (Reshape, Squeeze, Unsqueeze) and the output is rank 0 or 1. */
STAX_MUST_USE stax_status_t stax_shape_forward_content(stax_shape_infer_t* ic,
                                                       const stax_value_t* input, int32_t i,
                                                       int32_t output_rank);

#endif /* STAX_PASSES_SHAPE_SHAPE_OPERANDS_H_ */
