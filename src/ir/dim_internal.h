/* Internal representation of symbolic dims (include/stax/shape.h): the hash-consed expression
 * node, the shape context that owns the nodes, and helpers shared by dim.c (context, symbols,
 * interning, ordering), dim_algebra.c (canonicalizing construction), dim_eval.c (bounds,
 * evaluation, printing, dim code), dim_unify.c (union-find) and dim_guards.c (run-time guards).
 *
 * Canonical form. Every dim is one of:
 *   CONST              an integer;
 *   SYMBOL             a named symbol (value = its id);
 *   FLOORDIV, CEILDIV,
 *   MIN, MAX           an opaque nonlinear "atom" over two canonical operands;
 *   BCAST              numpy broadcasting of dims that may be 1 at run time (an atom too):
 *                      left is an operand that is neither BCAST nor the constant 1, right is
 *                      the next operand or a BCAST chain of the rest; the operands of a chain
 *                      are distinct and sorted by stax_dim_compare, so bcast is commutative,
 *                      associative and idempotent by construction (dim_algebra.c);
 *   PRODUCT            a monomial: >= 2 factors, or one factor with exponent >= 2, each factor an
 *                      atom (SYMBOL or one of the four above) with a positive exponent, sorted by
 *                      stax_dim_compare and never repeated;
 *   SUM                constant + sum of coefficient * monomial (monomial = atom or PRODUCT),
 *                      terms sorted by stax_dim_monomial_order, coefficients nonzero, and never a
 *                      single term with coefficient 1 and constant 0 (that is the monomial).
 * Nodes are interned, so structural equality is pointer equality. */
#ifndef STAX_IR_DIM_INTERNAL_H_
#define STAX_IR_DIM_INTERNAL_H_

#include "base/arena.h"
#include "base/hash_map.h"
#include "stax/shape.h"

/* The enum order is the first key of stax_dim_compare. (STAX_DIM_MAX is taken by shape.h.) */
typedef enum stax_dim_kind_e {
  STAX_DIM_KIND_CONST = 0,
  STAX_DIM_KIND_SYMBOL,
  STAX_DIM_KIND_FLOORDIV,
  STAX_DIM_KIND_CEILDIV,
  STAX_DIM_KIND_MIN,
  STAX_DIM_KIND_MAX,
  STAX_DIM_KIND_BCAST,
  STAX_DIM_KIND_PRODUCT,
  STAX_DIM_KIND_SUM,
} stax_dim_kind_t;

typedef struct stax_dim_factor_t {
  const stax_dim_t* atom;
  int32_t exponent; /* >= 1 */
} stax_dim_factor_t;

typedef struct stax_dim_term_t {
  int64_t coefficient; /* nonzero */
  const stax_dim_t* monomial; /* an atom or a PRODUCT */
} stax_dim_term_t;

struct stax_dim_s {
  stax_dim_kind_t kind;
  int32_t count;  /* PRODUCT: factors; SUM: terms */
  int32_t degree; /* as a monomial: 0 for CONST, 1 for atoms, sum of exponents for PRODUCT */
  uint64_t hash;  /* structural, from the children's hashes: stable across runs */
  int64_t value;  /* CONST: the value; SYMBOL: the id; SUM: the constant term */
  const stax_dim_t* left;  /* FLOORDIV/CEILDIV: numerator; MIN/MAX: the smaller operand;
                              BCAST: the first operand */
  const stax_dim_t* right; /* FLOORDIV/CEILDIV: divisor;   MIN/MAX: the larger operand;
                              BCAST: the second operand or the chain of the rest */
  const stax_dim_factor_t* factors; /* PRODUCT */
  const stax_dim_term_t* terms;     /* SUM */
  /* Mutable bookkeeping; nodes live in the context's arena and are never const there. */
  stax_dim_t* hash_next;    /* next node with the same hash (collision chain) */
  stax_dim_t* class_parent; /* union-find parent; NULL for a class root */
  const char* origin;       /* where the dim was first unified (arena copy), or NULL */
};

typedef struct stax_symbol_info_t {
  const char* name;   /* arena copy */
  const char* origin; /* arena copy or NULL (stax_symbol_fresh) */
  int64_t min, max;
  const stax_dim_t* dim;
} stax_symbol_info_t;

/* One undone change: the undo log records the old value before each change to union-find
 * links, symbol ranges and dim origins while a checkpoint is outstanding, so rolling back can
 * restore them newest first. Symbol creation needs no entries: a checkpoint remembers the symbol
 * count, and symbols are only ever appended. */
typedef enum stax_shape_undo_kind_e {
  STAX_SHAPE_UNDO_PARENT, /* node->class_parent was old_parent */
  STAX_SHAPE_UNDO_RANGE,  /* symbols[symbol] had range [old_min, old_max] */
  STAX_SHAPE_UNDO_ORIGIN, /* node->origin was old_origin */
} stax_shape_undo_kind_t;

typedef struct stax_shape_undo_t {
  stax_shape_undo_kind_t kind;
  stax_symbol_id_t symbol;  /* RANGE */
  stax_dim_t* node;         /* PARENT, ORIGIN */
  stax_dim_t* old_parent;   /* PARENT */
  const char* old_origin;   /* ORIGIN */
  int64_t old_min, old_max; /* RANGE */
} stax_shape_undo_t;

/* Constants in this range are cached in the context: no hashing on the common path. */
#define STAX_DIM_SMALL_CONST_MIN (-16)
#define STAX_DIM_SMALL_CONST_MAX 255

struct stax_shape_ctx_s {
  stax_allocator_t allocator;
  stax_arena_t arena;            /* every node, name and origin */
  stax_hash_map_t* intern_table; /* node hash -> head of the collision chain */
  stax_hash_map_t* symbol_names; /* name -> symbol id */
  stax_symbol_info_t* symbols;
  int32_t symbol_count;
  int32_t symbol_capacity;
  uint64_t fresh_counter;
  stax_status_t error; /* the first construction error not yet taken */
  /* Outstanding checkpoints; changes are logged only while it is positive, and the log empties
   * when the outermost one commits, so a long-lived context does not accumulate entries. */
  int32_t checkpoint_depth;
  stax_shape_undo_t* undo;
  size_t undo_count;
  size_t undo_capacity;
  const stax_dim_t* small_constants[STAX_DIM_SMALL_CONST_MAX - STAX_DIM_SMALL_CONST_MIN + 1];
};

/* ---- dim.c ------------------------------------------------------------------------------- */

/* Keeps the first error; later ones are freed. Takes ownership of `status`. */
void stax_shape_ctx_set_error(stax_shape_ctx_t* ctx, stax_status_t status);
void stax_shape_ctx_fail(stax_shape_ctx_t* ctx, stax_status_code_t code, const char* fmt, ...)
    STAX_PRINTF(3, 4);
/* Sets the standard overflow error and returns NULL, for `return stax_dim_overflow(ctx);`. */
const stax_dim_t* stax_dim_overflow(stax_shape_ctx_t* ctx);
/* Returns the interned node equal to `prototype` (whose arrays may point at scratch memory),
 * creating it in the arena. NULL (ctx error set) when memory runs out. */
const stax_dim_t* stax_dim_intern(stax_shape_ctx_t* ctx, const stax_dim_t* prototype);
/* A total order over canonical dims (stable across runs: symbols compare by id). */
int stax_dim_compare(const stax_dim_t* a, const stax_dim_t* b);
/* The order of terms in a SUM: higher degree first, then stax_dim_compare. */
int stax_dim_monomial_order(const stax_dim_t* a, const stax_dim_t* b);
bool stax_dim_is_atom(const stax_dim_t* d);
/* Narrows a symbol's range (and the range of the symbol representing its class). Fails with no
 * change when the intersection is empty (INVALID_ARGUMENT naming both ranges) or when the undo
 * log cannot grow (OUT_OF_MEMORY). */
STAX_MUST_USE stax_status_t stax_symbol_narrow(stax_shape_ctx_t* ctx, stax_symbol_id_t id,
                                               int64_t min, int64_t max);

/* Logged writes: each records the old value first when a checkpoint is outstanding, and fails
 * with no change when the log cannot grow. Every change to class links, symbol ranges and dim
 * origins goes through them so that rolling back is complete. */
STAX_MUST_USE stax_status_t stax_shape_set_parent(stax_shape_ctx_t* ctx, stax_dim_t* node,
                                                  stax_dim_t* parent);
STAX_MUST_USE stax_status_t stax_shape_set_range(stax_shape_ctx_t* ctx, stax_symbol_id_t id,
                                                 int64_t min, int64_t max);
STAX_MUST_USE stax_status_t stax_shape_set_origin(stax_shape_ctx_t* ctx, stax_dim_t* node,
                                                  const char* origin);
/* Like stax_shape_set_parent for optional changes (path compression): returns false, changing
 * nothing and discarding the error, when the change cannot be logged. */
bool stax_shape_try_set_parent(stax_shape_ctx_t* ctx, stax_dim_t* node, stax_dim_t* parent);
/* The current log length, and undoing every entry past `length` (newest first). An operation
 * that makes several logged writes takes the mark first and undoes to it when a later write
 * fails, so it either completes or changes nothing. */
static inline size_t stax_shape_undo_mark(const stax_shape_ctx_t* ctx) { return ctx->undo_count; }
void stax_shape_undo_to(stax_shape_ctx_t* ctx, size_t length);
/* "[1, 64]" or "[1, inf)"; buf of at least 48 bytes. */
const char* stax_format_range(int64_t min, int64_t max, char* buf, size_t size);

/* ---- dim_algebra.c ----------------------------------------------------------------------- */

/* Monomial m with one power of `atom` removed (the constant 1 if nothing is left); NULL when m
 * does not contain atom. */
const stax_dim_t* stax_dim_monomial_remove_factor(stax_shape_ctx_t* ctx, const stax_dim_t* m,
                                                  const stax_dim_t* atom);
/* d raised to a positive power. */
const stax_dim_t* stax_dim_power(stax_shape_ctx_t* ctx, const stax_dim_t* d, int32_t exponent);

/* ---- dim_unify.c ------------------------------------------------------------------------- */

/* The union-find root of d's class (no substitution). */
const stax_dim_t* stax_dim_class_root(const stax_dim_t* d);

/* ---- checked integer arithmetic (shared by folding and evaluation) ---------------------- */

static inline bool stax_i64_add(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool stax_i64_mul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
/* Floor / ceil division for any signs; false on division by zero or INT64_MIN / -1. */
static inline bool stax_i64_floordiv(int64_t x, int64_t y, int64_t* out) {
  if (y == 0 || (x == INT64_MIN && y == -1)) return false;
  int64_t q = x / y, r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) q--;
  *out = q;
  return true;
}
static inline bool stax_i64_ceildiv(int64_t x, int64_t y, int64_t* out) {
  if (y == 0 || (x == INT64_MIN && y == -1)) return false;
  int64_t q = x / y, r = x % y;
  if (r != 0 && ((r < 0) == (y < 0))) q++;
  *out = q;
  return true;
}

#endif /* STAX_IR_DIM_INTERNAL_H_ */
