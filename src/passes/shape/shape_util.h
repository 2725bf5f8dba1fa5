/* Helpers shared by the shape functions under src/passes/shape/: reading inputs into stable
 * operand records, dtype checks with messages that name the input, numpy broadcasting
 * (bidirectional and unidirectional), axis normalization, reading small integer inputs
 * (constant tensors or symbolic contents) and setting several outputs at once.
 *
 * Broadcasting of symbolic dims (documented here once, relied on everywhere; docs/ir.md): two
 * dims broadcast when they are equal or one of them is known to be 1 (a constant 1, or a
 * symbol whose range is exactly [1, 1]). Two dims that are both computed (not constants) and
 * not both known to be >= 2 give bcast(N, M): N when M == 1, M when N == 1, their value when
 * equal, and a run-time error otherwise, checked wherever the dim is evaluated. A dim against a
 * constant other than 1 (S with 4), and two dims that are both >= 2, must be equal: that is
 * recorded in the union-find (S == 4) and checked by the input guards. Unidirectional
 * broadcasting (stax_shape_broadcast_to: PRelu's slope, normalization scales) keeps unifying
 * symbolic dims, as its output has the target's dims and nothing would check the broadcast. A
 * contradiction with an earlier equality is an error that names the node, inputs and dims. */
#ifndef STAX_PASSES_SHAPE_SHAPE_UTIL_H_
#define STAX_PASSES_SHAPE_SHAPE_UTIL_H_

#include "ir/graph_internal.h"

/* Most contents/constant elements read from a small integer input (axes, pads, shapes). */
#define STAX_SHAPE_CONTENT_MAX 64

/* A node input copied out of the value table, so it stays valid while outputs are created.
 * dims and content point into the graph arena. */
typedef struct stax_shape_operand_t {
  const char* name;
  stax_dtype_t dtype;
  int32_t rank;
  const stax_dim_t* const* dims;
  int32_t input_index; /* node input position, named in messages; -1 for a derived shape */
  int32_t axis_offset; /* for a slice of an input's dims: added to dim positions in messages */
} stax_shape_operand_t;

/* Reads input i; *out_present is false (and *out_operand zeroed) when the input is absent. */
void stax_shape_read_input(const stax_shape_infer_t* ic, int32_t i,
                           stax_shape_operand_t* out_operand, bool* out_present);
/* Reads input i, failing with INVALID_ARGUMENT ("input 1 is required") when it is absent. */
STAX_MUST_USE stax_status_t stax_shape_require_input(const stax_shape_infer_t* ic, int32_t i,
                                                     stax_shape_operand_t* out_operand);

/* A quantized op's zero point or scale, input `index` (shape/quantize.c): absent is fine
 * unless `required`; its dtype is dtype_like's (a zero point) or a float (a scale, dtype_like
 * NULL). The caller checks its shape against the operand it quantizes. */
STAX_MUST_USE stax_status_t stax_shape_read_quant_param(stax_shape_infer_t* ic, int32_t index,
                                                        bool required,
                                                        const stax_shape_operand_t* dtype_like,
                                                        stax_shape_operand_t* out_param,
                                                        bool* out_present);

/* ---- dtypes ----------------------------------------------------------------------------- */

typedef uint32_t stax_dtype_mask_t;
#define STAX_DTYPE_BIT(dtype) ((stax_dtype_mask_t)1u << (dtype))
#define STAX_DTYPES_FLOAT                                                          \
  (STAX_DTYPE_BIT(STAX_DTYPE_FLOAT32) | STAX_DTYPE_BIT(STAX_DTYPE_FLOAT64) |        \
   STAX_DTYPE_BIT(STAX_DTYPE_FLOAT16) | STAX_DTYPE_BIT(STAX_DTYPE_BFLOAT16))
#define STAX_DTYPES_SIGNED_INT                                                     \
  (STAX_DTYPE_BIT(STAX_DTYPE_INT8) | STAX_DTYPE_BIT(STAX_DTYPE_INT16) |             \
   STAX_DTYPE_BIT(STAX_DTYPE_INT32) | STAX_DTYPE_BIT(STAX_DTYPE_INT64))
#define STAX_DTYPES_UNSIGNED_INT                                                   \
  (STAX_DTYPE_BIT(STAX_DTYPE_UINT8) | STAX_DTYPE_BIT(STAX_DTYPE_UINT16) |           \
   STAX_DTYPE_BIT(STAX_DTYPE_UINT32) | STAX_DTYPE_BIT(STAX_DTYPE_UINT64))
#define STAX_DTYPES_INT (STAX_DTYPES_SIGNED_INT | STAX_DTYPES_UNSIGNED_INT)
#define STAX_DTYPES_NUMERIC (STAX_DTYPES_FLOAT | STAX_DTYPES_INT)
#define STAX_DTYPES_BOOL STAX_DTYPE_BIT(STAX_DTYPE_BOOL)
#define STAX_DTYPES_ALL (STAX_DTYPES_NUMERIC | STAX_DTYPES_BOOL)
#define STAX_DTYPES_INDEX (STAX_DTYPE_BIT(STAX_DTYPE_INT32) | STAX_DTYPE_BIT(STAX_DTYPE_INT64))
#define STAX_DTYPES_QUANT_8BIT (STAX_DTYPE_BIT(STAX_DTYPE_INT8) | STAX_DTYPE_BIT(STAX_DTYPE_UINT8))

/* DTYPE_MISMATCH unless the operand's dtype is in `allowed`: "input 0 'x' has dtype float32,
 * expected <what>" (what: e.g. "bool", "a floating-point type"). */
STAX_MUST_USE stax_status_t stax_shape_require_dtype(const stax_shape_infer_t* ic,
                                                     const stax_shape_operand_t* operand,
                                                     stax_dtype_mask_t allowed,
                                                     const char* what);
/* DTYPE_MISMATCH naming both inputs and both dtypes when they differ. */
STAX_MUST_USE stax_status_t stax_shape_require_same_dtype(const stax_shape_infer_t* ic,
                                                          const stax_shape_operand_t* a,
                                                          const stax_shape_operand_t* b);

/* ---- ranks and dims --------------------------------------------------------------------- */

/* SHAPE_MISMATCH unless min_rank <= rank <= max_rank (max_rank -1: no upper bound), e.g.
 * "input 1 'w' has rank 2, expected 4". */
STAX_MUST_USE stax_status_t stax_shape_require_rank(const stax_shape_infer_t* ic,
                                                    const stax_shape_operand_t* operand,
                                                    int32_t min_rank, int32_t max_rank);
/* UNIMPLEMENTED when the operand's rank exceeds STAX_MAX_RANK (fixed-size scratch arrays). */
STAX_MUST_USE stax_status_t stax_shape_require_rank_limit(const stax_shape_infer_t* ic,
                                                          const stax_shape_operand_t* operand);
/* SHAPE_MISMATCH unless the operand is a scalar: rank 0, or rank 1 with one element. `what`
 * names its role ("min", "axis"). */
STAX_MUST_USE stax_status_t stax_shape_require_scalar(const stax_shape_infer_t* ic,
                                                      const stax_shape_operand_t* operand,
                                                      const char* what);
/* A readable form of a dim for messages, into buf (always terminated). */
const char* stax_shape_dim_text(const stax_shape_infer_t* ic, const stax_dim_t* dim, char* buf,
                                size_t size);
/* True when the dim is known to be 1 (after resolving equalities, or by its range). */
bool stax_shape_dim_is_one(const stax_shape_infer_t* ic, const stax_dim_t* dim);
/* True with the value when the dim is known to be a constant (after resolving). */
bool stax_shape_dim_const(const stax_shape_infer_t* ic, const stax_dim_t* dim,
                          int64_t* out_value);
/* Requires a dim to equal an expected one: unifies them, naming (operand, axis) and
 * (expected_input, expected_axis) on a contradiction. */
STAX_MUST_USE stax_status_t stax_shape_match_dim(stax_shape_infer_t* ic,
                                                 const stax_shape_operand_t* operand,
                                                 int32_t axis, const stax_dim_t* expected,
                                                 int32_t expected_input,
                                                 int32_t expected_axis);

/* Requires two operands' dims to be equal: a constant mismatch is SHAPE_MISMATCH naming
 * `what` ("contraction dim"), both inputs, dims and values; otherwise the dims are unified. */
STAX_MUST_USE stax_status_t stax_shape_require_equal_dims(stax_shape_infer_t* ic,
                                                          const char* what,
                                                          const stax_shape_operand_t* a,
                                                          int32_t axis_a,
                                                          const stax_shape_operand_t* b,
                                                          int32_t axis_b);

/* ---- broadcasting ----------------------------------------------------------------------- */

/* numpy broadcasting of all operands (right-aligned; see the rule above). out_dims has
 * room for STAX_MAX_RANK dims; a result rank above that is UNIMPLEMENTED. Incompatible
 * constant dims are SHAPE_MISMATCH naming both inputs, their dims and values, e.g.
 * "cannot broadcast input 0 'a' dim 0 (3) with input 1 'b' dim 0 (4)". */
STAX_MUST_USE stax_status_t stax_shape_broadcast(stax_shape_infer_t* ic, int32_t operand_count,
                                                 const stax_shape_operand_t* operands,
                                                 int32_t* out_rank,
                                                 const stax_dim_t** out_dims);
/* Unidirectional broadcasting: `source` must broadcast to `target` without changing it
 * (rank(source) <= rank(target); each source dim is 1 or equal to the aligned target dim). */
STAX_MUST_USE stax_status_t stax_shape_broadcast_to(stax_shape_infer_t* ic,
                                                    const stax_shape_operand_t* source,
                                                    const stax_shape_operand_t* target);

/* ---- axes ------------------------------------------------------------------------------- */

/* Maps axis in [-rank, rank) to [0, rank); OUT_OF_RANGE otherwise, naming what ("axis",
 * "axes[1]"), the value and the rank. */
STAX_MUST_USE stax_status_t stax_shape_normalize_axis(const stax_shape_infer_t* ic,
                                                      int64_t axis, int32_t rank,
                                                      const char* what, int32_t* out_axis);

/* ---- attributes ------------------------------------------------------------------------- */

/* A 0/1 integer attribute (keepdims, ceil_mode, ...); INVALID_ARGUMENT for other values. */
STAX_MUST_USE stax_status_t stax_shape_attr_flag(const stax_shape_infer_t* ic, const char* name,
                                                 bool default_value, bool* out_value);

/* ---- small integer inputs --------------------------------------------------------------- */

/* The symbolic contents of a small integer value (rank 0 or 1): its recorded contents, or the
 * elements of its constant tensor as constant dims. Returns false when unknown, not an
 * integer tensor, or longer than `capacity`. */
bool stax_shape_value_content(const stax_shape_infer_t* ic, const stax_value_t* value,
                              int32_t capacity, const stax_dim_t** out_content,
                              int32_t* out_count);
/* Input i's contents as integers, each required to be a known constant. Fails with
 * UNIMPLEMENTED ("<what> must be constant") when they are not known at build time, and with
 * DTYPE_MISMATCH / SHAPE_MISMATCH when the input is not a rank-0/1 integer tensor. */
STAX_MUST_USE stax_status_t stax_shape_read_const_ints(const stax_shape_infer_t* ic, int32_t i,
                                                       const char* what, int32_t capacity,
                                                       int64_t* out_values,
                                                       int32_t* out_count);

/* ---- outputs ---------------------------------------------------------------------------- */

/* Number of outputs the node asked for (optional trailing outputs may be missing). */
int32_t stax_shape_output_count(const stax_shape_infer_t* ic);
/* True when output i was requested (exists and is not an omitted optional output). */
bool stax_shape_output_requested(const stax_shape_infer_t* ic, int32_t i);
/* Sets output i when requested; OK and nothing done otherwise. */
STAX_MUST_USE stax_status_t stax_shape_set_output(stax_shape_infer_t* ic, int32_t i,
                                                  stax_dtype_t dtype, int32_t rank,
                                                  const stax_dim_t* const* dims);

#endif /* STAX_PASSES_SHAPE_SHAPE_UTIL_H_ */
