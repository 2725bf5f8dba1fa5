/* stax symbolic shapes: dim expressions in canonical form, symbols with ranges, a union-find
 * of dims known to be equal, evaluation under a binding, and run-time guards.
 *
 * A dim expression is built from integer constants and named symbols with +, -, *, floor and
 * ceil division, min and max. Expressions are hash-consed in canonical form inside a shape
 * context, so two expressions are structurally equal exactly when their pointers are equal:
 * S-S is the constant 0, 2*S+S is 3*S, (B*S*H)/H is B*S.
 *
 * Construction functions return NULL when memory runs out or an operation is invalid (e.g.
 * division by a constant <= 0); NULL operands propagate, so a whole formula can be built and
 * checked once. stax_shape_ctx_take_error then returns the reason as a status. */
#ifndef STAX_SHAPE_H_
#define STAX_SHAPE_H_

#include "stax/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STAX_DIM_MAX INT64_MAX /* "no upper bound" in symbol ranges */

typedef struct stax_shape_ctx_s stax_shape_ctx_t;
typedef struct stax_dim_s stax_dim_t;
typedef int32_t stax_symbol_id_t;

STAX_MUST_USE stax_status_t stax_shape_ctx_create(stax_allocator_t allocator,
                                                  stax_shape_ctx_t** out_ctx);
void stax_shape_ctx_destroy(stax_shape_ctx_t* ctx);
/* The first construction error since the last call (OUT_OF_MEMORY, INVALID_ARGUMENT, ...), or
 * STAX_OK. Ownership passes to the caller. */
STAX_MUST_USE stax_status_t stax_shape_ctx_take_error(stax_shape_ctx_t* ctx);

/* ---- checkpoints ------------------------------------------------------------------------- */

/* A point the context can return to: after stax_shape_ctx_rollback the union-find classes,
 * symbol ranges, pinned values and the symbol table are exactly as they were when the checkpoint
 * was taken (symbols created since are gone, also by name). Expression nodes built since stay
 * valid, as they are immutable. Checkpoints nest and must be ended in reverse order, each by
 * exactly one rollback or commit; ending an outer one also ends those taken after it. Changes
 * are recorded only while a checkpoint is outstanding and the record is dropped when the
 * outermost one commits, so contexts that never checkpoint pay nothing. While recording, an
 * operation that cannot record a change fails with OUT_OF_MEMORY and changes nothing. */
typedef struct stax_shape_checkpoint_t {
  int32_t depth;          /* 1 for the outermost checkpoint; 0 for none (NULL context) */
  int32_t symbol_count;   /* symbols that existed */
  uint64_t fresh_counter; /* so names of fresh symbols repeat after a rollback */
  size_t undo_length;     /* undo log entries that predate the checkpoint */
} stax_shape_checkpoint_t;

stax_shape_checkpoint_t stax_shape_ctx_checkpoint(stax_shape_ctx_t* ctx);
/* Undoes every change since `checkpoint` and ends it. */
void stax_shape_ctx_rollback(stax_shape_ctx_t* ctx, stax_shape_checkpoint_t checkpoint);
/* Keeps the changes since `checkpoint` and ends it; an enclosing checkpoint can still undo them. */
void stax_shape_ctx_commit(stax_shape_ctx_t* ctx, stax_shape_checkpoint_t checkpoint);

/* ---- symbols ---------------------------------------------------------------------------- */

/* Returns the symbol named `name`, creating it with range [min, max] (max may be
 * STAX_DIM_MAX) the first time; a later call with the same name returns the same symbol and
 * narrows its range to the intersection (an empty intersection is an error naming both
 * ranges). */
STAX_MUST_USE stax_status_t stax_symbol_get(stax_shape_ctx_t* ctx, const char* name,
                                            int64_t min, int64_t max,
                                            const stax_dim_t** out_dim);
/* A new symbol with a unique name derived from `prefix` (e.g. "nonzero_0"), for data-dependent
 * dims. `origin` says where it came from ("NonZero node 'nz' output 0, dim 1") for messages. */
STAX_MUST_USE stax_status_t stax_symbol_fresh(stax_shape_ctx_t* ctx, const char* prefix,
                                              int64_t min, int64_t max, const char* origin,
                                              const stax_dim_t** out_dim);
int32_t stax_shape_ctx_symbol_count(const stax_shape_ctx_t* ctx);
const char* stax_symbol_name(const stax_shape_ctx_t* ctx, stax_symbol_id_t id);
void stax_symbol_range(const stax_shape_ctx_t* ctx, stax_symbol_id_t id, int64_t* out_min,
                       int64_t* out_max);
/* The symbol's dim expression (a bare symbol). */
const stax_dim_t* stax_symbol_dim(stax_shape_ctx_t* ctx, stax_symbol_id_t id);

/* ---- construction (canonicalizing, hash-consed) ------------------------------------------ */

const stax_dim_t* stax_dim_const(stax_shape_ctx_t* ctx, int64_t value);
const stax_dim_t* stax_dim_add(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b);
const stax_dim_t* stax_dim_sub(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b);
const stax_dim_t* stax_dim_mul(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b);
const stax_dim_t* stax_dim_add_const(stax_shape_ctx_t* ctx, const stax_dim_t* a, int64_t c);
const stax_dim_t* stax_dim_mul_const(stax_shape_ctx_t* ctx, const stax_dim_t* a, int64_t c);
/* Floor / ceil division. A constant divisor must be positive; a symbolic one must be able to
 * be positive (a zero divisor is caught at evaluation). Exact divisions simplify ((B*S*H)/H is B*S, (4*S+2)/2 is 2*S+1). */
const stax_dim_t* stax_dim_floordiv(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                    const stax_dim_t* b);
const stax_dim_t* stax_dim_ceildiv(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                   const stax_dim_t* b);
const stax_dim_t* stax_dim_min(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b);
const stax_dim_t* stax_dim_max(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b);
/* numpy broadcasting of two dims either of which may be 1 at run time: bcast(a, b) is a when
 * b == 1, b when a == 1, their value when a == b, and any other pair is an error when it is
 * evaluated. Canonical: bcast(a, a) = a, bcast(a, 1) = a, bcast(bcast(a, b), a) = bcast(a, b)
 * (operands are flattened, deduplicated and sorted); two different constants other than 1 are
 * an error at once (SHAPE_MISMATCH). Nothing is simplified from symbol ranges: bcast(N, M) with
 * N >= 2 always equals N, but only the node still checks M at run time. Printed
 * "bcast(N, M)". */
const stax_dim_t* stax_dim_bcast(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b);
/* True when d contains a bcast node. */
bool stax_dim_has_bcast(const stax_dim_t* d);

/* ---- queries ----------------------------------------------------------------------------- */

bool stax_dim_is_const(const stax_dim_t* d);
int64_t stax_dim_const_value(const stax_dim_t* d); /* only when stax_dim_is_const */
/* A bare symbol: returns true and its id. */
bool stax_dim_as_symbol(const stax_dim_t* d, stax_symbol_id_t* out_id);
/* Conservative bounds from symbol ranges (interval arithmetic). */
void stax_dim_bounds(const stax_shape_ctx_t* ctx, const stax_dim_t* d, int64_t* out_min,
                     int64_t* out_max);
/* Writes a readable form ("2*B*S + 1", "floor((H + 1)/2) - 1", "min(S, H)") into buf; returns
 * the length it needed (snprintf-style). */
int stax_dim_print(const stax_shape_ctx_t* ctx, const stax_dim_t* d, char* buf, size_t size);
/* Appends the symbol ids the expression uses to out_ids (deduplicated), returns their count;
 * at most `capacity` are written. */
int32_t stax_dim_symbols(const stax_dim_t* d, stax_symbol_id_t* out_ids, int32_t capacity);

/* ---- evaluation -------------------------------------------------------------------------- */

#define STAX_SYMBOL_UNBOUND INT64_MIN
/* values[id] is each symbol's value, STAX_SYMBOL_UNBOUND if not bound. Fails (naming the
 * symbol) when one is unbound, on division by zero, or on overflow; a bcast whose operands do
 * not broadcast is SHAPE_MISMATCH naming both operands and their values. */
STAX_MUST_USE stax_status_t stax_dim_eval(const stax_shape_ctx_t* ctx, const stax_dim_t* d,
                                          const int64_t* values, int64_t* out_value);

/* ---- equalities (union-find) ------------------------------------------------------------- */

/* Records a == b. Contradictions are errors (SHAPE_MISMATCH) that name both origins, e.g.
 * "dim 3 (MatMul node 'mm' input 0, dim 1) cannot equal 4 (MatMul node 'mm' input 1, dim 0)":
 *   - two different constants;
 *   - an equation that solves a symbol to a value outside its range or to a non-integer
 *     (S0 = S1 and S0 = 2*S1 with S1 >= 1 forces S1 = 0);
 * When an equation pins a symbol to a constant, the symbol's range narrows to that value.
 * origin_a / origin_b may be NULL. */
STAX_MUST_USE stax_status_t stax_dim_unify(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                           const char* origin_a, const stax_dim_t* b,
                                           const char* origin_b);
/* The class representative: a constant if the class has one, else the simplest member. */
const stax_dim_t* stax_dim_resolve(stax_shape_ctx_t* ctx, const stax_dim_t* d);
/* True when a and b are provably equal (same canonical form after resolving). */
bool stax_dim_known_equal(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b);

/* ---- guards ------------------------------------------------------------------------------ */

/* A graph input's declared shape, as the guard builder sees it. */
typedef struct stax_shape_guard_input_t {
  const char* name;
  int32_t rank;
  const stax_dim_t* const* dims;
} stax_shape_guard_input_t;

/* The minimal list of checks a concrete set of input shapes must pass: bind each symbol from
 * the first input dim that determines it, then check every other dim that is not implied by
 * earlier bindings, and check each bound symbol's range once. */
typedef struct stax_shape_guards_s stax_shape_guards_t;

/* Uses the context's allocator; the guards borrow ctx, which must outlive them. */
STAX_MUST_USE stax_status_t stax_shape_guards_build(stax_shape_ctx_t* ctx,
                                                    int32_t input_count,
                                                    const stax_shape_guard_input_t* inputs,
                                                    stax_shape_guards_t** out_guards);
void stax_shape_guards_destroy(stax_shape_guards_t* guards);
/* Number of run-time comparisons (bindings excluded); tests use it to prove minimality. */
int32_t stax_shape_guards_check_count(const stax_shape_guards_t* guards);
/* Prints one guard per line into buf (snprintf-style). */
int stax_shape_guards_print(const stax_shape_guards_t* guards, char* buf, size_t size);
/* ranks[i] and dims[i] are input i's concrete shape. On success, out_values (sized
 * stax_shape_ctx_symbol_count) receives every symbol value the inputs determine
 * (STAX_SYMBOL_UNBOUND for the rest). On failure: SHAPE_MISMATCH naming the input, the dim,
 * the expected expression with the values bound so far, and the value seen. */
STAX_MUST_USE stax_status_t stax_shape_guards_check(const stax_shape_guards_t* guards,
                                                    const int32_t* ranks,
                                                    const int64_t* const* dims,
                                                    int64_t* out_values);

/* The steps, for consumers that compile guards into their own form (the VM). */
typedef enum stax_shape_guard_kind_e {
  STAX_GUARD_BIND,  /* symbol := (value - offset) / scale; value - offset must divide evenly */
  STAX_GUARD_CHECK, /* input dim must equal expr evaluated under the symbols bound so far */
  STAX_GUARD_RANGE, /* min <= symbol <= max */
} stax_shape_guard_kind_t;

typedef struct stax_shape_guard_step_t {
  stax_shape_guard_kind_t kind;
  int32_t input;            /* the input dim the step reads (RANGE: where the symbol was bound) */
  int32_t dim;
  stax_symbol_id_t symbol;  /* BIND, RANGE */
  int64_t scale, offset;    /* BIND (scale >= 1) */
  const stax_dim_t* expr;   /* CHECK: the expected dim; BIND: the input's declared dim */
  int64_t min, max;         /* RANGE */
} stax_shape_guard_step_t;

int32_t stax_shape_guards_step_count(const stax_shape_guards_t* guards);
const stax_shape_guard_step_t* stax_shape_guards_steps(const stax_shape_guards_t* guards);

/* ---- dim code: a serializable postfix form for run-time evaluation ------------------------ */

typedef enum stax_dim_code_op_e {
  STAX_DIM_CODE_CONST,    /* push value */
  STAX_DIM_CODE_SYMBOL,   /* push values[symbol id] (value holds the id) */
  STAX_DIM_CODE_ADD,      /* pop b, pop a, push a + b */
  STAX_DIM_CODE_MUL,
  STAX_DIM_CODE_FLOORDIV,
  STAX_DIM_CODE_CEILDIV,
  STAX_DIM_CODE_MIN,
  STAX_DIM_CODE_MAX,
  STAX_DIM_CODE_BCAST,    /* pop b, pop a, push bcast(a, b); an incompatible pair fails */
  STAX_DIM_CODE_OP_COUNT
} stax_dim_code_op_t;

typedef struct stax_dim_code_t {
  int32_t op;    /* stax_dim_code_op_t */
  int64_t value; /* CONST: the constant; SYMBOL: the symbol id */
} stax_dim_code_t;

/* Writes the postfix code of d into out (at most capacity entries) and returns the number of
 * entries it needs; call with capacity 0 to size. */
int32_t stax_dim_emit_code(const stax_dim_t* d, stax_dim_code_t* out, int32_t capacity);
/* Evaluates dim code robustly (it may come from a file): a malformed program (stack underflow,
 * leftover values, bad op, symbol id >= symbol_count) is INVALID_ARGUMENT; an unbound symbol,
 * division by zero or overflow is an error naming it; a BCAST of two values that do not
 * broadcast (neither is 1 and they differ) is SHAPE_MISMATCH naming both. */
STAX_MUST_USE stax_status_t stax_dim_code_eval(const stax_dim_code_t* code, int32_t count,
                                               const int64_t* values, int32_t symbol_count,
                                               int64_t* out_value);

#ifdef __cplusplus
}
#endif

#endif /* STAX_SHAPE_H_ */
