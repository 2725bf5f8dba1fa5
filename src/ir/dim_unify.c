/* Symbolic dims, part 4: equalities. A union-find over interned dims records which dims are
 * known to be equal; each class's root is its simplest member (a constant if it has one, else a
 * symbol, else the fewest terms). Resolving a dim takes its class root and substitutes every
 * symbol by its own class root when that is a constant or a symbol, so S ~ T makes 2*S and 2*T
 * resolve to the same node, and a symbol pinned to 3 disappears from every formula.
 *
 * Unifying compares the two resolved forms: their difference must be 0, or a linear form
 * c*S + k in one symbol (which pins S = -k/c, checked for integrality and against S's range),
 * or at least able to be 0 given the symbol ranges; otherwise it is a contradiction reported as
 * SHAPE_MISMATCH naming both dims and where they came from. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/dim_internal.h"

/* ---- union-find -------------------------------------------------------------------------- */

const stax_dim_t* stax_dim_class_root(const stax_dim_t* d) {
  while (d->class_parent) d = d->class_parent;
  return d;
}

/* Nodes live in the context's arena as mutable memory; only the public API hands out const
 * pointers, so writing the union-find links through a cast is well defined. */
static stax_dim_t* stax_dim_find(stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  stax_dim_t* root = (stax_dim_t*)stax_dim_class_root(d);
  stax_dim_t* node = (stax_dim_t*)d;
  while (node != root) { /* path compression */
    stax_dim_t* next = node->class_parent;
    /* Compression must be logged like any link (a rollback that unlinks the old root would
     * otherwise leave compressed members in the wrong class); it is only an optimization, so
     * when the log cannot grow it stops and the chain stays correct, just longer. */
    if (!stax_shape_try_set_parent(ctx, node, root)) break;
    node = next;
  }
  return root;
}

static int stax_dim_simplicity_rank(const stax_dim_t* d) {
  switch (d->kind) {
    case STAX_DIM_KIND_CONST: return 0;
    case STAX_DIM_KIND_SYMBOL: return 1;
    case STAX_DIM_KIND_PRODUCT: return 3;
    case STAX_DIM_KIND_SUM: return 4;
    default: return 2;
  }
}

/* < 0 when a is the better class representative */
static int stax_dim_simplicity_compare(const stax_dim_t* a, const stax_dim_t* b) {
  int ra = stax_dim_simplicity_rank(a), rb = stax_dim_simplicity_rank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  if (a->kind == STAX_DIM_KIND_SUM && a->count != b->count) return a->count < b->count ? -1 : 1;
  return stax_dim_compare(a, b);
}

/* ---- substitution and resolution --------------------------------------------------------- */

static const stax_dim_t* stax_dim_substitute(stax_shape_ctx_t* ctx, const stax_dim_t* d);

static const stax_dim_t* stax_symbol_substitute(stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  const stax_dim_t* root = stax_dim_find(ctx, d);
  if (root->kind == STAX_DIM_KIND_CONST) return root;
  if (root->kind != STAX_DIM_KIND_SYMBOL) root = d; /* never happens: symbols outrank */
  const stax_symbol_info_t* info = &ctx->symbols[root->value];
  if (info->min == info->max) return stax_dim_const(ctx, info->min);
  return root;
}

/* A read-only walk, so resolving a dim with nothing to substitute builds nothing. */
static bool stax_dim_needs_substitution(const stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  switch (d->kind) {
    case STAX_DIM_KIND_CONST:
      return false;
    case STAX_DIM_KIND_SYMBOL:
      return d->class_parent != NULL || ctx->symbols[d->value].min == ctx->symbols[d->value].max;
    case STAX_DIM_KIND_PRODUCT:
      for (int32_t i = 0; i < d->count; i++) {
        if (stax_dim_needs_substitution(ctx, d->factors[i].atom)) return true;
      }
      return false;
    case STAX_DIM_KIND_SUM:
      for (int32_t i = 0; i < d->count; i++) {
        if (stax_dim_needs_substitution(ctx, d->terms[i].monomial)) return true;
      }
      return false;
    default:
      return stax_dim_needs_substitution(ctx, d->left) ||
             stax_dim_needs_substitution(ctx, d->right);
  }
}

static const stax_dim_t* stax_dim_substitute(stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  if (!stax_dim_needs_substitution(ctx, d)) return d;
  switch (d->kind) {
    case STAX_DIM_KIND_CONST:
      return d;
    case STAX_DIM_KIND_SYMBOL:
      return stax_symbol_substitute(ctx, d);
    case STAX_DIM_KIND_FLOORDIV:
    case STAX_DIM_KIND_CEILDIV:
    case STAX_DIM_KIND_MIN:
    case STAX_DIM_KIND_MAX:
    case STAX_DIM_KIND_BCAST: {
      const stax_dim_t* left = stax_dim_substitute(ctx, d->left);
      const stax_dim_t* right = left ? stax_dim_substitute(ctx, d->right) : NULL;
      if (!right) return NULL;
      if (left == d->left && right == d->right) return d;
      switch (d->kind) {
        case STAX_DIM_KIND_FLOORDIV: return stax_dim_floordiv(ctx, left, right);
        case STAX_DIM_KIND_CEILDIV: return stax_dim_ceildiv(ctx, left, right);
        case STAX_DIM_KIND_MIN: return stax_dim_min(ctx, left, right);
        case STAX_DIM_KIND_BCAST: return stax_dim_bcast(ctx, left, right);
        default: return stax_dim_max(ctx, left, right);
      }
    }
    case STAX_DIM_KIND_PRODUCT: {
      const stax_dim_t* result = stax_dim_const(ctx, 1);
      bool changed = false;
      for (int32_t i = 0; i < d->count && result; i++) {
        const stax_dim_t* atom = stax_dim_substitute(ctx, d->factors[i].atom);
        changed |= atom != d->factors[i].atom;
        result = stax_dim_mul(ctx, result, stax_dim_power(ctx, atom, d->factors[i].exponent));
      }
      return changed || !result ? result : d;
    }
    case STAX_DIM_KIND_SUM: {
      const stax_dim_t* result = stax_dim_const(ctx, d->value);
      bool changed = false;
      for (int32_t i = 0; i < d->count && result; i++) {
        const stax_dim_t* m = stax_dim_substitute(ctx, d->terms[i].monomial);
        changed |= m != d->terms[i].monomial;
        result = stax_dim_add(ctx, result, stax_dim_mul_const(ctx, m, d->terms[i].coefficient));
      }
      return changed || !result ? result : d;
    }
  }
  return d;
}

const stax_dim_t* stax_dim_resolve(stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  if (!ctx || !d) return NULL;
  const stax_dim_t* current = stax_dim_find(ctx, d);
  /* Substituting can land in another class whose root needs substituting again; each round
   * only simplifies, and a handful of rounds reaches the fixed point in practice. */
  for (int round = 0; round < 8; round++) {
    const stax_dim_t* substituted = stax_dim_substitute(ctx, current);
    if (!substituted) return NULL;
    const stax_dim_t* next = stax_dim_find(ctx, substituted);
    if (next == current) break;
    current = next;
  }
  return current;
}

bool stax_dim_known_equal(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b) {
  if (!ctx || !a || !b) return false;
  if (a == b) return true;
  const stax_dim_t* ra = stax_dim_resolve(ctx, a);
  const stax_dim_t* rb = ra ? stax_dim_resolve(ctx, b) : NULL;
  return ra && ra == rb;
}

/* ---- unification ------------------------------------------------------------------------- */

typedef struct stax_unify_side_t {
  const stax_dim_t* dim;      /* as the caller gave it */
  const char* origin;         /* the caller's origin, else the node's recorded one */
  const stax_dim_t* resolved; /* NULL until known */
} stax_unify_side_t;

static void stax_describe_side(const stax_shape_ctx_t* ctx, const stax_unify_side_t* side,
                               char* buf, size_t size) {
  char text[256], resolved[256];
  (void)stax_dim_print(ctx, side->dim, text, sizeof(text));
  int n = snprintf(buf, size, "dim %s", text);
  if (n < 0 || (size_t)n >= size) return;
  if (side->origin) {
    n += snprintf(buf + n, size - (size_t)n, " (from %s)", side->origin);
    if (n < 0 || (size_t)n >= size) return;
  }
  if (side->resolved && side->resolved != side->dim) {
    (void)stax_dim_print(ctx, side->resolved, resolved, sizeof(resolved));
    snprintf(buf + n, size - (size_t)n, ", known to equal %s,", resolved);
  }
}

static stax_status_t stax_contradiction(const stax_shape_ctx_t* ctx,
                                        const stax_unify_side_t* a, const stax_unify_side_t* b,
                                        const char* reason_fmt, ...) STAX_PRINTF(4, 5);

static stax_status_t stax_contradiction(const stax_shape_ctx_t* ctx,
                                        const stax_unify_side_t* a, const stax_unify_side_t* b,
                                        const char* reason_fmt, ...) {
  char left[1024], right[1024], reason[512] = "";
  stax_describe_side(ctx, a, left, sizeof(left));
  stax_describe_side(ctx, b, right, sizeof(right));
  if (reason_fmt) {
    va_list args;
    va_start(args, reason_fmt);
    vsnprintf(reason, sizeof(reason), reason_fmt, args);
    va_end(args);
  }
  /* "dim 3 (from X) cannot equal dim 4 (from Y)[: reason]"; a "known to equal" clause ends in
   * a comma, which the right side does not want. */
  size_t right_length = strlen(right);
  if (right_length && right[right_length - 1] == ',') right[right_length - 1] = '\0';
  return stax_status_make(STAX_SHAPE_MISMATCH, "%s cannot equal %s%s%s", left, right,
                          reason[0] ? ": " : "", reason);
}

/* Joins two classes under the simpler root; two symbol roots share the tighter range. Fails
 * only when a checkpoint is outstanding and the undo log cannot grow; the caller then undoes to
 * its mark, since the range may already have changed. */
static stax_status_t stax_dim_link(stax_shape_ctx_t* ctx, const stax_dim_t* x,
                                   const stax_dim_t* y) {
  stax_dim_t* rx = stax_dim_find(ctx, x);
  stax_dim_t* ry = stax_dim_find(ctx, y);
  if (rx == ry) return STAX_OK;
  if (stax_dim_simplicity_compare(ry, rx) < 0) {
    stax_dim_t* t = rx;
    rx = ry;
    ry = t;
  }
  if (rx->kind == STAX_DIM_KIND_SYMBOL && ry->kind == STAX_DIM_KIND_SYMBOL) {
    const stax_symbol_info_t* winner = &ctx->symbols[rx->value];
    const stax_symbol_info_t* loser = &ctx->symbols[ry->value];
    /* callers checked (through the difference's bounds) that the ranges overlap */
    int64_t min = loser->min > winner->min ? loser->min : winner->min;
    int64_t max = loser->max < winner->max ? loser->max : winner->max;
    STAX_RETURN_IF_ERROR(stax_shape_set_range(ctx, (stax_symbol_id_t)rx->value, min, max));
  }
  return stax_shape_set_parent(ctx, ry, rx);
}

/* diff = c*S + k for one symbol S: returns true and fills the parts. */
static bool stax_dim_as_linear(const stax_dim_t* diff, const stax_dim_t** out_symbol,
                               int64_t* out_coefficient, int64_t* out_constant) {
  if (diff->kind == STAX_DIM_KIND_SYMBOL) {
    *out_symbol = diff;
    *out_coefficient = 1;
    *out_constant = 0;
    return true;
  }
  if (diff->kind == STAX_DIM_KIND_SUM && diff->count == 1 &&
      diff->terms[0].monomial->kind == STAX_DIM_KIND_SYMBOL) {
    *out_symbol = diff->terms[0].monomial;
    *out_coefficient = diff->terms[0].coefficient;
    *out_constant = diff->value;
    return true;
  }
  return false;
}

static stax_status_t stax_unify_resolved(stax_shape_ctx_t* ctx, stax_unify_side_t* a,
                                         stax_unify_side_t* b) {
  const stax_dim_t* diff = stax_dim_sub(ctx, a->resolved, b->resolved);
  if (!diff) return stax_shape_ctx_take_error(ctx);
  if (diff->kind == STAX_DIM_KIND_CONST) return stax_contradiction(ctx, a, b, NULL);
  char text[256], range[64];
  const stax_dim_t* symbol = NULL;
  int64_t coefficient = 0, constant = 0;
  if (stax_dim_as_linear(diff, &symbol, &coefficient, &constant)) {
    stax_symbol_info_t* info = &ctx->symbols[symbol->value];
    int64_t quotient = 0, value = 0;
    if (constant % coefficient != 0) {
      (void)stax_dim_print(ctx, diff, text, sizeof(text));
      return stax_contradiction(ctx, a, b, "forces %s = 0, which has no integer solution", text);
    }
    if (!stax_i64_floordiv(constant, coefficient, &quotient) || quotient == INT64_MIN) {
      return stax_contradiction(ctx, a, b, "forces %s beyond int64", info->name);
    }
    value = -quotient;
    if (value < info->min || value > info->max) {
      return stax_contradiction(ctx, a, b, "forces %s = %lld, outside its range %s", info->name,
                                (long long)value,
                                stax_format_range(info->min, info->max, range, sizeof(range)));
    }
    const stax_dim_t* pinned = stax_dim_const(ctx, value);
    if (!pinned) return stax_shape_ctx_take_error(ctx);
    STAX_RETURN_IF_ERROR(stax_shape_set_range(ctx, (stax_symbol_id_t)symbol->value, value, value));
    return stax_dim_link(ctx, symbol, pinned);
  }
  int64_t low = 0, high = 0;
  stax_dim_bounds(ctx, diff, &low, &high);
  if (low > 0 || high < 0) {
    (void)stax_dim_print(ctx, diff, text, sizeof(text));
    return stax_contradiction(ctx, a, b, "their difference %s is always in %s", text,
                              stax_format_range(low, high, range, sizeof(range)));
  }
  return STAX_OK; /* not decidable here; the classes merge and run-time guards check it */
}

static stax_status_t stax_record_origin(stax_shape_ctx_t* ctx, const stax_dim_t* d,
                                        const char* origin) {
  if (!origin || d->origin) return STAX_OK;
  const char* copy = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_strdup(&ctx->arena, origin, &copy),
                       "while recording a dim's origin");
  return stax_shape_set_origin(ctx, (stax_dim_t*)d, copy);
}

static stax_status_t stax_dim_unify_marked(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                           const char* origin_a, const stax_dim_t* b,
                                           const char* origin_b);

/* An equality between a broadcast dim and anything else would have to be checked at run time
 * against the value the broadcast picks (bcast(N, M) == K holds for N == 1, M == K but not for
 * M == 1, N != K), and nothing checks equalities between computed dims. So such an equality
 * falls back to the plain assumption: every broadcast in either side has equal operands
 * (N == M), which the input guards do check, and the broadcast then resolves to its operand. */
static stax_status_t stax_unify_collapse_bcast(stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  switch (d->kind) {
    case STAX_DIM_KIND_CONST:
    case STAX_DIM_KIND_SYMBOL:
      return STAX_OK;
    case STAX_DIM_KIND_BCAST:
      for (const stax_dim_t* link = d; link->kind == STAX_DIM_KIND_BCAST; link = link->right) {
        const stax_dim_t* next =
            link->right->kind == STAX_DIM_KIND_BCAST ? link->right->left : link->right;
        STAX_RETURN_IF_ERROR(stax_dim_unify_marked(ctx, link->left, NULL, next, NULL));
      }
      return STAX_OK;
    case STAX_DIM_KIND_PRODUCT:
      for (int32_t i = 0; i < d->count; i++) {
        STAX_RETURN_IF_ERROR(stax_unify_collapse_bcast(ctx, d->factors[i].atom));
      }
      return STAX_OK;
    case STAX_DIM_KIND_SUM:
      for (int32_t i = 0; i < d->count; i++) {
        STAX_RETURN_IF_ERROR(stax_unify_collapse_bcast(ctx, d->terms[i].monomial));
      }
      return STAX_OK;
    default:
      STAX_RETURN_IF_ERROR(stax_unify_collapse_bcast(ctx, d->left));
      return stax_unify_collapse_bcast(ctx, d->right);
  }
}

static stax_status_t stax_dim_unify_marked(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                           const char* origin_a, const stax_dim_t* b,
                                           const char* origin_b) {
  STAX_RETURN_IF_ERROR(stax_record_origin(ctx, a, origin_a));
  STAX_RETURN_IF_ERROR(stax_record_origin(ctx, b, origin_b));
  stax_unify_side_t side_a = {a, origin_a ? origin_a : a->origin, NULL};
  stax_unify_side_t side_b = {b, origin_b ? origin_b : b->origin, NULL};
  if (stax_dim_find(ctx, a) == stax_dim_find(ctx, b)) return STAX_OK;
  if (stax_dim_has_bcast(a) || stax_dim_has_bcast(b)) {
    const stax_dim_t* ra = stax_dim_resolve(ctx, a);
    const stax_dim_t* rb = ra ? stax_dim_resolve(ctx, b) : NULL;
    if (!rb) return stax_shape_ctx_take_error(ctx);
    STAX_RETURN_IF_ERROR(stax_unify_collapse_bcast(ctx, ra));
    STAX_RETURN_IF_ERROR(stax_unify_collapse_bcast(ctx, rb));
  }
  side_a.resolved = stax_dim_resolve(ctx, a);
  side_b.resolved = side_a.resolved ? stax_dim_resolve(ctx, b) : NULL;
  if (!side_b.resolved) return stax_shape_ctx_take_error(ctx);
  if (side_a.resolved != side_b.resolved) {
    STAX_RETURN_IF_ERROR(stax_unify_resolved(ctx, &side_a, &side_b));
  }
  /* The resolved forms are equal to the originals, so they join the class too: later finds
   * then skip the substitution work. */
  STAX_RETURN_IF_ERROR(stax_dim_link(ctx, a, side_a.resolved));
  STAX_RETURN_IF_ERROR(stax_dim_link(ctx, b, side_b.resolved));
  return stax_dim_link(ctx, a, b);
}

stax_status_t stax_dim_unify(stax_shape_ctx_t* ctx, const stax_dim_t* a, const char* origin_a,
                             const stax_dim_t* b, const char* origin_b) {
  if (!ctx) return stax_status_make(STAX_INVALID_ARGUMENT, "shape context must not be NULL");
  if (!a || !b) {
    stax_status_t pending = stax_shape_ctx_take_error(ctx);
    if (pending) return pending;
    return stax_status_make(STAX_INVALID_ARGUMENT, "cannot unify a NULL dim (from %s)",
                            !a ? (origin_a ? origin_a : "?") : (origin_b ? origin_b : "?"));
  }
  /* A contradiction is found before anything but the origins changes, and keeps them, as
   * messages about later equations want them. Any other failure (memory, overflow) may strike
   * after pinning or linking; under a checkpoint every such change was logged, so undo them
   * all: the equation then either holds completely or left the classes as they were. */
  size_t mark = stax_shape_undo_mark(ctx);
  stax_status_t status = stax_dim_unify_marked(ctx, a, origin_a, b, origin_b);
  if (status != STAX_OK && stax_status_code(status) != STAX_SHAPE_MISMATCH) {
    stax_shape_undo_to(ctx, mark);
  }
  return status;
}
