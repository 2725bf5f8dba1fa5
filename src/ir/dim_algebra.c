/* Symbolic dims, part 2: the canonicalizing constructors. Sums and products are computed on a
 * scratch polynomial (constant + coefficient * monomial terms), then sorted, merged and interned
 * (see the canonical form in dim_internal.h). Division by a positive constant q splits the
 * numerator into q*P + R with every coefficient of R in [0, q), so floor(N/q) = P + floor(R/q)
 * holds for all integer symbol values; ceil(R/q) becomes floor((R + q - 1)/q). This makes
 * (4*S + 2)/2 = 2*S + 1, floor((2*S + 1)/2) = S and ceil(H/2) = floor((H + 1)/2) identical
 * nodes whatever the symbol ranges. All coefficient arithmetic is overflow-checked. */
#include <stdlib.h>
#include <string.h>

#include "ir/dim_internal.h"

/* ---- a read-only view of any dim as constant + terms ------------------------------------- */

typedef struct stax_dim_view_t {
  int64_t constant;
  int32_t count;
  const stax_dim_term_t* terms;
  stax_dim_term_t single; /* storage when the dim is a lone monomial */
} stax_dim_view_t;

static void stax_dim_view(const stax_dim_t* d, stax_dim_view_t* view) {
  view->constant = 0;
  view->count = 0;
  view->terms = NULL;
  if (d->kind == STAX_DIM_KIND_CONST) {
    view->constant = d->value;
  } else if (d->kind == STAX_DIM_KIND_SUM) {
    view->constant = d->value;
    view->count = d->count;
    view->terms = d->terms;
  } else {
    view->single.coefficient = 1;
    view->single.monomial = d;
    view->count = 1;
    view->terms = &view->single;
  }
}

/* ---- scratch polynomial ------------------------------------------------------------------ */

#define STAX_POLY_INLINE_TERMS 8

typedef struct stax_poly_t {
  stax_shape_ctx_t* ctx;
  int64_t constant;
  int32_t count;
  int32_t capacity;
  stax_dim_term_t* terms;
  stax_dim_term_t inline_terms[STAX_POLY_INLINE_TERMS];
} stax_poly_t;

static void stax_poly_init(stax_poly_t* p, stax_shape_ctx_t* ctx) {
  p->ctx = ctx;
  p->constant = 0;
  p->count = 0;
  p->capacity = STAX_POLY_INLINE_TERMS;
  p->terms = p->inline_terms;
}

static void stax_poly_deinit(stax_poly_t* p) {
  if (p->terms != p->inline_terms) {
    stax_allocator_free(p->ctx->allocator, p->terms,
                        (size_t)p->capacity * sizeof(stax_dim_term_t));
  }
}

static bool stax_poly_push(stax_poly_t* p, int64_t coefficient, const stax_dim_t* monomial) {
  if (coefficient == 0) return true;
  if (p->count == p->capacity) {
    if (p->capacity > INT32_MAX / 2) {
      stax_shape_ctx_fail(p->ctx, STAX_OUT_OF_RANGE, "dim expression has too many terms");
      return false;
    }
    size_t old_size = (size_t)p->capacity * sizeof(stax_dim_term_t);
    size_t new_size = old_size * 2;
    void* memory = NULL;
    stax_status_t status = STAX_OK;
    if (p->terms == p->inline_terms) {
      status = stax_allocator_malloc(p->ctx->allocator, new_size, &memory);
      if (!status) memcpy(memory, p->terms, old_size);
    } else {
      memory = p->terms;
      status = stax_allocator_realloc(p->ctx->allocator, old_size, new_size, &memory);
    }
    if (status) {
      stax_shape_ctx_set_error(
          p->ctx, stax_status_annotate(status, "while building a dim expression"));
      return false;
    }
    p->terms = memory;
    p->capacity *= 2;
  }
  p->terms[p->count].coefficient = coefficient;
  p->terms[p->count].monomial = monomial;
  p->count++;
  return true;
}

static bool stax_poly_add_constant(stax_poly_t* p, int64_t value) {
  if (!stax_i64_add(p->constant, value, &p->constant)) {
    (void)stax_dim_overflow(p->ctx);
    return false;
  }
  return true;
}

/* p += scale * d */
static bool stax_poly_load(stax_poly_t* p, const stax_dim_t* d, int64_t scale) {
  stax_dim_view_t view;
  stax_dim_view(d, &view);
  int64_t product = 0;
  if (!stax_i64_mul(view.constant, scale, &product)) return stax_dim_overflow(p->ctx) != NULL;
  if (!stax_poly_add_constant(p, product)) return false;
  for (int32_t i = 0; i < view.count; i++) {
    if (!stax_i64_mul(view.terms[i].coefficient, scale, &product)) {
      return stax_dim_overflow(p->ctx) != NULL;
    }
    if (!stax_poly_push(p, product, view.terms[i].monomial)) return false;
  }
  return true;
}

static int stax_term_order(const void* a, const void* b) {
  return stax_dim_monomial_order(((const stax_dim_term_t*)a)->monomial,
                                 ((const stax_dim_term_t*)b)->monomial);
}

/* Sorts, merges equal monomials (pointer-equal after interning) and drops zero terms. */
static bool stax_poly_normalize(stax_poly_t* p) {
  if (p->count > 1) qsort(p->terms, (size_t)p->count, sizeof(stax_dim_term_t), stax_term_order);
  int32_t out = 0;
  for (int32_t i = 0; i < p->count;) {
    stax_dim_term_t term = p->terms[i++];
    while (i < p->count && p->terms[i].monomial == term.monomial) {
      if (!stax_i64_add(term.coefficient, p->terms[i].coefficient, &term.coefficient)) {
        return stax_dim_overflow(p->ctx) != NULL;
      }
      i++;
    }
    if (term.coefficient != 0) p->terms[out++] = term;
  }
  p->count = out;
  return true;
}

/* The canonical dim for p; p stays owned by the caller. */
static const stax_dim_t* stax_poly_finish(stax_poly_t* p) {
  if (!stax_poly_normalize(p)) return NULL;
  if (p->count == 0) return stax_dim_const(p->ctx, p->constant);
  if (p->count == 1 && p->terms[0].coefficient == 1 && p->constant == 0) {
    return p->terms[0].monomial;
  }
  stax_dim_t prototype = {.kind = STAX_DIM_KIND_SUM,
                          .count = p->count,
                          .value = p->constant,
                          .terms = p->terms};
  int32_t degree = 0;
  for (int32_t i = 0; i < p->count; i++) {
    if (p->terms[i].monomial->degree > degree) degree = p->terms[i].monomial->degree;
  }
  prototype.degree = degree;
  return stax_dim_intern(p->ctx, &prototype);
}

/* ---- monomials --------------------------------------------------------------------------- */

typedef struct stax_factor_view_t {
  int32_t count;
  const stax_dim_factor_t* factors;
  stax_dim_factor_t single;
} stax_factor_view_t;

static void stax_factor_view(const stax_dim_t* m, stax_factor_view_t* view) {
  if (m->kind == STAX_DIM_KIND_PRODUCT) {
    view->count = m->count;
    view->factors = m->factors;
  } else {
    view->single.atom = m;
    view->single.exponent = 1;
    view->count = 1;
    view->factors = &view->single;
  }
}

#define STAX_FACTOR_INLINE 16

/* A factor buffer on the stack, or from the allocator when the monomial is large. */
typedef struct stax_factor_buffer_t {
  stax_dim_factor_t* factors;
  size_t capacity;
  stax_dim_factor_t inline_factors[STAX_FACTOR_INLINE];
} stax_factor_buffer_t;

static bool stax_factor_buffer_init(stax_shape_ctx_t* ctx, stax_factor_buffer_t* buffer,
                                    size_t capacity) {
  buffer->factors = buffer->inline_factors;
  buffer->capacity = capacity;
  if (capacity <= STAX_FACTOR_INLINE) return true;
  void* memory = NULL;
  stax_status_t status =
      stax_allocator_malloc(ctx->allocator, capacity * sizeof(stax_dim_factor_t), &memory);
  if (status) {
    stax_shape_ctx_set_error(ctx, stax_status_annotate(status, "while building a dim product"));
    return false;
  }
  buffer->factors = memory;
  return true;
}

static void stax_factor_buffer_deinit(stax_shape_ctx_t* ctx, stax_factor_buffer_t* buffer) {
  if (buffer->factors != buffer->inline_factors) {
    stax_allocator_free(ctx->allocator, buffer->factors,
                        buffer->capacity * sizeof(stax_dim_factor_t));
  }
}

/* The monomial with these sorted factors: the constant 1, a bare atom or a PRODUCT. */
static const stax_dim_t* stax_monomial_make(stax_shape_ctx_t* ctx,
                                            const stax_dim_factor_t* factors, int32_t count) {
  if (count == 0) return stax_dim_const(ctx, 1);
  if (count == 1 && factors[0].exponent == 1) return factors[0].atom;
  int64_t degree = 0;
  for (int32_t i = 0; i < count; i++) degree += factors[i].exponent;
  if (degree > INT32_MAX) return stax_dim_overflow(ctx);
  stax_dim_t prototype = {.kind = STAX_DIM_KIND_PRODUCT,
                          .count = count,
                          .degree = (int32_t)degree,
                          .factors = factors};
  return stax_dim_intern(ctx, &prototype);
}

static const stax_dim_t* stax_monomial_multiply(stax_shape_ctx_t* ctx, const stax_dim_t* x,
                                                const stax_dim_t* y) {
  stax_factor_view_t a, b;
  stax_factor_view(x, &a);
  stax_factor_view(y, &b);
  stax_factor_buffer_t buffer;
  if (!stax_factor_buffer_init(ctx, &buffer, (size_t)a.count + (size_t)b.count)) return NULL;
  int32_t i = 0, j = 0, count = 0;
  const stax_dim_t* result = NULL;
  while (i < a.count || j < b.count) {
    int c = i == a.count   ? 1
            : j == b.count ? -1
                           : stax_dim_compare(a.factors[i].atom, b.factors[j].atom);
    if (c < 0) {
      buffer.factors[count++] = a.factors[i++];
    } else if (c > 0) {
      buffer.factors[count++] = b.factors[j++];
    } else {
      stax_dim_factor_t factor = a.factors[i++];
      if (__builtin_add_overflow(factor.exponent, b.factors[j++].exponent, &factor.exponent)) {
        (void)stax_dim_overflow(ctx);
        goto cleanup;
      }
      buffer.factors[count++] = factor;
    }
  }
  result = stax_monomial_make(ctx, buffer.factors, count);
cleanup:
  stax_factor_buffer_deinit(ctx, &buffer);
  return result;
}

/* *out_quotient = t / m when every factor of m divides t, else NULL. False on an error. */
static bool stax_monomial_divide(stax_shape_ctx_t* ctx, const stax_dim_t* t, const stax_dim_t* m,
                                 const stax_dim_t** out_quotient) {
  *out_quotient = NULL;
  stax_factor_view_t a, b;
  stax_factor_view(t, &a);
  stax_factor_view(m, &b);
  if (b.count > a.count) return true;
  stax_factor_buffer_t buffer;
  if (!stax_factor_buffer_init(ctx, &buffer, (size_t)a.count)) return false;
  /* Both factor lists are sorted, so one merge pass finds every factor of m in t. */
  int32_t count = 0, j = 0;
  bool divisible = true;
  for (int32_t i = 0; i < a.count && divisible; i++) {
    stax_dim_factor_t factor = a.factors[i];
    if (j < b.count && b.factors[j].atom == factor.atom) {
      factor.exponent -= b.factors[j++].exponent;
      divisible = factor.exponent >= 0;
      if (factor.exponent <= 0) continue;
    }
    buffer.factors[count++] = factor;
  }
  bool ok = true;
  if (divisible && j == b.count) {
    *out_quotient = stax_monomial_make(ctx, buffer.factors, count);
    ok = *out_quotient != NULL;
  }
  stax_factor_buffer_deinit(ctx, &buffer);
  return ok;
}

const stax_dim_t* stax_dim_monomial_remove_factor(stax_shape_ctx_t* ctx, const stax_dim_t* m,
                                                  const stax_dim_t* atom) {
  const stax_dim_t* quotient = NULL;
  if (!stax_monomial_divide(ctx, m, atom, &quotient)) return NULL;
  return quotient;
}

/* ---- sums and products ------------------------------------------------------------------- */

/* a + scale * b */
static const stax_dim_t* stax_dim_add_scaled(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                             const stax_dim_t* b, int64_t scale) {
  if (!ctx || !a || !b) return NULL;
  stax_poly_t p;
  stax_poly_init(&p, ctx);
  const stax_dim_t* result = NULL;
  if (stax_poly_load(&p, a, 1) && stax_poly_load(&p, b, scale)) result = stax_poly_finish(&p);
  stax_poly_deinit(&p);
  return result;
}

const stax_dim_t* stax_dim_add(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b) {
  if (a && a->kind == STAX_DIM_KIND_CONST && a->value == 0) return b;
  if (b && b->kind == STAX_DIM_KIND_CONST && b->value == 0) return a;
  return stax_dim_add_scaled(ctx, a, b, 1);
}

const stax_dim_t* stax_dim_sub(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b) {
  if (ctx && a && a == b) return stax_dim_const(ctx, 0);
  if (b && b->kind == STAX_DIM_KIND_CONST && b->value == 0) return a;
  return stax_dim_add_scaled(ctx, a, b, -1);
}

const stax_dim_t* stax_dim_add_const(stax_shape_ctx_t* ctx, const stax_dim_t* a, int64_t c) {
  if (!ctx || !a) return NULL;
  if (c == 0) return a;
  return stax_dim_add(ctx, a, stax_dim_const(ctx, c));
}

const stax_dim_t* stax_dim_mul_const(stax_shape_ctx_t* ctx, const stax_dim_t* a, int64_t c) {
  if (!ctx || !a) return NULL;
  if (c == 0) return stax_dim_const(ctx, 0);
  if (c == 1) return a;
  stax_poly_t p;
  stax_poly_init(&p, ctx);
  const stax_dim_t* result = stax_poly_load(&p, a, c) ? stax_poly_finish(&p) : NULL;
  stax_poly_deinit(&p);
  return result;
}

const stax_dim_t* stax_dim_mul(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b) {
  if (!ctx || !a || !b) return NULL;
  if (a->kind == STAX_DIM_KIND_CONST) return stax_dim_mul_const(ctx, b, a->value);
  if (b->kind == STAX_DIM_KIND_CONST) return stax_dim_mul_const(ctx, a, b->value);
  stax_dim_view_t x, y;
  stax_dim_view(a, &x);
  stax_dim_view(b, &y);
  stax_poly_t p;
  stax_poly_init(&p, ctx);
  const stax_dim_t* result = NULL;
  int64_t coefficient = 0;
  /* (kx + sum xi)(ky + sum yj) expanded term by term */
  if (!stax_i64_mul(x.constant, y.constant, &p.constant)) goto overflow;
  for (int32_t i = 0; i < x.count; i++) {
    for (int32_t j = 0; j < y.count; j++) {
      if (!stax_i64_mul(x.terms[i].coefficient, y.terms[j].coefficient, &coefficient)) {
        goto overflow;
      }
      const stax_dim_t* m = stax_monomial_multiply(ctx, x.terms[i].monomial, y.terms[j].monomial);
      if (!m || !stax_poly_push(&p, coefficient, m)) goto cleanup;
    }
    if (!stax_i64_mul(x.terms[i].coefficient, y.constant, &coefficient)) goto overflow;
    if (!stax_poly_push(&p, coefficient, x.terms[i].monomial)) goto cleanup;
  }
  for (int32_t j = 0; j < y.count; j++) {
    if (!stax_i64_mul(x.constant, y.terms[j].coefficient, &coefficient)) goto overflow;
    if (!stax_poly_push(&p, coefficient, y.terms[j].monomial)) goto cleanup;
  }
  result = stax_poly_finish(&p);
  goto cleanup;
overflow:
  (void)stax_dim_overflow(ctx);
cleanup:
  stax_poly_deinit(&p);
  return result;
}

const stax_dim_t* stax_dim_power(stax_shape_ctx_t* ctx, const stax_dim_t* d, int32_t exponent) {
  if (!ctx || !d) return NULL;
  const stax_dim_t* result = stax_dim_const(ctx, 1);
  const stax_dim_t* base = d;
  /* square-and-multiply */
  while (exponent > 0 && result && base) {
    if (exponent & 1) result = stax_dim_mul(ctx, result, base);
    exponent >>= 1;
    if (exponent > 0) base = stax_dim_mul(ctx, base, base);
  }
  return base ? result : NULL;
}

/* ---- division ---------------------------------------------------------------------------- */

/* Divisors above this keep floor/ceil(N/q) as written (see stax_dim_div_by_const). */
#define STAX_DIM_SPLIT_LIMIT ((int64_t)1 << 32)

typedef enum stax_rounding_e { STAX_ROUND_FLOOR, STAX_ROUND_CEIL } stax_rounding_t;

static int64_t stax_gcd(int64_t a, int64_t b) {
  while (b != 0) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a < 0 ? -a : a;
}

/* Splits c = q * quotient + remainder with 0 <= remainder < q (q >= 1); never overflows. */
static void stax_split_by(int64_t c, int64_t q, int64_t* out_quotient, int64_t* out_remainder) {
  int64_t quotient = c / q, remainder = c % q;
  if (remainder < 0) {
    quotient--;
    remainder += q;
  }
  *out_quotient = quotient;
  *out_remainder = remainder;
}

static const stax_dim_t* stax_dim_div_atom(stax_shape_ctx_t* ctx, stax_dim_kind_t kind,
                                           const stax_dim_t* a, const stax_dim_t* b) {
  stax_dim_t prototype = {.kind = kind, .degree = 1, .left = a, .right = b};
  return stax_dim_intern(ctx, &prototype);
}

/* Floor or ceil of a / q for a constant q >= 2. */
static const stax_dim_t* stax_dim_div_by_const(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                               int64_t q, stax_rounding_t rounding) {
  int64_t folded = 0;
  if (a->kind == STAX_DIM_KIND_CONST) {
    if (rounding == STAX_ROUND_FLOOR) {
      (void)stax_i64_floordiv(a->value, q, &folded);
    } else {
      (void)stax_i64_ceildiv(a->value, q, &folded);
    }
    return stax_dim_const(ctx, folded);
  }
  stax_dim_view_t view;
  stax_dim_view(a, &view);
  stax_poly_t whole, rest; /* a = q * whole + rest, rest's coefficients in [0, q) */
  stax_poly_init(&whole, ctx);
  stax_poly_init(&rest, ctx);
  const stax_dim_t* result = NULL;
  int64_t quotient = 0, remainder = 0;
  for (int32_t i = 0; i < view.count; i++) {
    stax_split_by(view.terms[i].coefficient, q, &quotient, &remainder);
    if (!stax_poly_push(&whole, quotient, view.terms[i].monomial) ||
        !stax_poly_push(&rest, remainder, view.terms[i].monomial))
      goto cleanup;
  }
  stax_split_by(view.constant, q, &whole.constant, &rest.constant);
  if (rest.count == 0) {
    /* 0 <= rest.constant < q: floor adds nothing, ceil adds one unless exact */
    if (rounding == STAX_ROUND_CEIL && rest.constant > 0 && !stax_poly_add_constant(&whole, 1)) {
      goto cleanup;
    }
    result = stax_poly_finish(&whole);
    goto cleanup;
  }
  if (q > STAX_DIM_SPLIT_LIMIT) {
    /* With a huge divisor the rewritten numerator (coefficients up to q - 1, or + q - 1 for
     * ceil) could overflow where the original does not: keep the division as written. */
    stax_poly_deinit(&whole);
    stax_poly_init(&whole, ctx);
    const stax_dim_t* divisor = stax_dim_const(ctx, q);
    const stax_dim_t* atom = divisor ? stax_dim_div_atom(ctx,
                                                         rounding == STAX_ROUND_FLOOR
                                                             ? STAX_DIM_KIND_FLOORDIV
                                                             : STAX_DIM_KIND_CEILDIV,
                                                         a, divisor)
                                     : NULL;
    if (atom && stax_poly_push(&whole, 1, atom)) result = stax_poly_finish(&whole);
    goto cleanup;
  }
  if (rounding == STAX_ROUND_CEIL) {
    rest.constant += q - 1; /* < 2q, no overflow below the split limit */
    if (rest.constant >= q) {
      rest.constant -= q;
      if (!stax_poly_add_constant(&whole, 1)) goto cleanup;
    }
  }
  /* floor(g*R / (g*q')) = floor(R / q') */
  int64_t g = stax_gcd(q, rest.constant);
  for (int32_t i = 0; i < rest.count; i++) g = stax_gcd(g, rest.terms[i].coefficient);
  if (g > 1) {
    q /= g;
    rest.constant /= g;
    for (int32_t i = 0; i < rest.count; i++) rest.terms[i].coefficient /= g;
  }
  const stax_dim_t* numerator = stax_poly_finish(&rest);
  if (!numerator) goto cleanup;
  int64_t low = 0, high = 0, floor_low = 0, floor_high = 0;
  stax_dim_bounds(ctx, numerator, &low, &high);
  (void)stax_i64_floordiv(low, q, &floor_low);
  (void)stax_i64_floordiv(high, q, &floor_high);
  if (floor_low == floor_high) {
    if (!stax_poly_add_constant(&whole, floor_low)) goto cleanup;
  } else {
    const stax_dim_t* divisor = stax_dim_const(ctx, q);
    const stax_dim_t* atom =
        divisor ? stax_dim_div_atom(ctx, STAX_DIM_KIND_FLOORDIV, numerator, divisor) : NULL;
    if (!atom || !stax_poly_push(&whole, 1, atom)) goto cleanup;
  }
  result = stax_poly_finish(&whole);
cleanup:
  stax_poly_deinit(&whole);
  stax_poly_deinit(&rest);
  return result;
}

/* a / (c * m) for a monomial m >= 1 and c >= 1 when m divides every term of a (whose constant
 * is 0): the quotient's floor/ceil by c. *out_result stays NULL when the rule does not apply. */
static bool stax_dim_div_by_monomial(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                     const stax_dim_t* b, stax_rounding_t rounding,
                                     const stax_dim_t** out_result) {
  *out_result = NULL;
  stax_dim_view_t x, y;
  stax_dim_view(a, &x);
  stax_dim_view(b, &y);
  if (y.constant != 0 || y.count != 1 || y.terms[0].coefficient < 1 || x.constant != 0) {
    return true;
  }
  const stax_dim_t* m = y.terms[0].monomial;
  int64_t low = 0, high = 0;
  stax_dim_bounds(ctx, m, &low, &high);
  if (low < 1) return true; /* m*P/m = P needs m > 0 */
  stax_poly_t quotient;
  stax_poly_init(&quotient, ctx);
  bool ok = true;
  for (int32_t i = 0; i < x.count && ok; i++) {
    const stax_dim_t* part = NULL;
    ok = stax_monomial_divide(ctx, x.terms[i].monomial, m, &part);
    if (!ok || !part) goto cleanup;
    /* part may be the constant 1 when the term is exactly m */
    if (part->kind == STAX_DIM_KIND_CONST) {
      int64_t value = 0;
      ok = stax_i64_mul(x.terms[i].coefficient, part->value, &value);
      if (!ok) {
        (void)stax_dim_overflow(ctx);
        goto cleanup;
      }
      ok = stax_poly_add_constant(&quotient, value);
    } else {
      ok = stax_poly_push(&quotient, x.terms[i].coefficient, part);
    }
  }
  if (ok) {
    const stax_dim_t* exact = stax_poly_finish(&quotient);
    int64_t c = y.terms[0].coefficient;
    if (!exact) {
      ok = false;
    } else if (c == 1) {
      *out_result = exact;
    } else {
      *out_result = stax_dim_div_by_const(ctx, exact, c, rounding);
      ok = *out_result != NULL;
    }
  }
cleanup:
  stax_poly_deinit(&quotient);
  return ok;
}

static const stax_dim_t* stax_dim_divide(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                         const stax_dim_t* b, stax_rounding_t rounding) {
  if (!ctx || !a || !b) return NULL;
  char text[256];
  if (b->kind == STAX_DIM_KIND_CONST) {
    if (b->value <= 0) {
      (void)stax_dim_print(ctx, a, text, sizeof(text));
      stax_shape_ctx_fail(ctx, STAX_INVALID_ARGUMENT,
                          "cannot divide %s by %lld: the divisor must be positive", text,
                          (long long)b->value);
      return NULL;
    }
    if (b->value == 1) return a;
    return stax_dim_div_by_const(ctx, a, b->value, rounding);
  }
  int64_t divisor_low = 0, divisor_high = 0;
  stax_dim_bounds(ctx, b, &divisor_low, &divisor_high);
  if (divisor_high < 1) {
    char divisor_text[256], range[64];
    (void)stax_dim_print(ctx, a, text, sizeof(text));
    (void)stax_dim_print(ctx, b, divisor_text, sizeof(divisor_text));
    stax_shape_ctx_fail(ctx, STAX_INVALID_ARGUMENT,
                        "cannot divide %s by %s: the divisor is never positive (range %s)",
                        text, divisor_text,
                        stax_format_range(divisor_low, divisor_high, range, sizeof(range)));
    return NULL;
  }
  if (a->kind == STAX_DIM_KIND_CONST && a->value == 0) return a;
  const stax_dim_t* exact = NULL;
  if (!stax_dim_div_by_monomial(ctx, a, b, rounding, &exact)) return NULL;
  if (exact) return exact;
  /* Decide by ranges when every possible quotient is the same. A zero divisor fails at
   * evaluation, so only divisors >= 1 matter; negative ones make corners unreliable. */
  if (divisor_low >= 0) {
    if (divisor_low == 0) divisor_low = 1;
    int64_t low = 0, high = 0;
    stax_dim_bounds(ctx, a, &low, &high);
    int64_t corners[4];
    const int64_t numerators[2] = {low, high}, divisors[2] = {divisor_low, divisor_high};
    for (int i = 0; i < 4; i++) {
      if (rounding == STAX_ROUND_FLOOR) {
        (void)stax_i64_floordiv(numerators[i / 2], divisors[i % 2], &corners[i]);
      } else {
        (void)stax_i64_ceildiv(numerators[i / 2], divisors[i % 2], &corners[i]);
      }
    }
    if (corners[0] == corners[1] && corners[0] == corners[2] && corners[0] == corners[3]) {
      return stax_dim_const(ctx, corners[0]);
    }
  }
  return stax_dim_div_atom(
      ctx, rounding == STAX_ROUND_FLOOR ? STAX_DIM_KIND_FLOORDIV : STAX_DIM_KIND_CEILDIV, a, b);
}

const stax_dim_t* stax_dim_floordiv(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                    const stax_dim_t* b) {
  return stax_dim_divide(ctx, a, b, STAX_ROUND_FLOOR);
}

const stax_dim_t* stax_dim_ceildiv(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                   const stax_dim_t* b) {
  return stax_dim_divide(ctx, a, b, STAX_ROUND_CEIL);
}

/* ---- min / max --------------------------------------------------------------------------- */

static const stax_dim_t* stax_dim_min_max(stax_shape_ctx_t* ctx, const stax_dim_t* a,
                                          const stax_dim_t* b, bool is_max) {
  if (!ctx || !a || !b) return NULL;
  if (a == b) return a;
  if (a->kind == STAX_DIM_KIND_CONST && b->kind == STAX_DIM_KIND_CONST) {
    return (a->value < b->value) == is_max ? b : a;
  }
  /* When the ranges already order the operands, the answer is one of them: first from the
   * operands' own bounds, then from their difference (which sees S + 1 > S). */
  int64_t a_low = 0, a_high = 0, b_low = 0, b_high = 0;
  stax_dim_bounds(ctx, a, &a_low, &a_high);
  stax_dim_bounds(ctx, b, &b_low, &b_high);
  if (a_high <= b_low) return is_max ? b : a;
  if (b_high <= a_low) return is_max ? a : b;
  const stax_dim_t* difference = stax_dim_sub(ctx, a, b);
  if (!difference) return NULL;
  int64_t low = 0, high = 0;
  stax_dim_bounds(ctx, difference, &low, &high);
  if (high <= 0) return is_max ? b : a;
  if (low >= 0) return is_max ? a : b;
  if (stax_dim_compare(a, b) > 0) { /* min(a, b) and min(b, a) are one node */
    const stax_dim_t* t = a;
    a = b;
    b = t;
  }
  stax_dim_t prototype = {.kind = is_max ? STAX_DIM_KIND_MAX : STAX_DIM_KIND_MIN,
                          .degree = 1,
                          .left = a,
                          .right = b};
  return stax_dim_intern(ctx, &prototype);
}

const stax_dim_t* stax_dim_min(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b) {
  return stax_dim_min_max(ctx, a, b, false);
}

const stax_dim_t* stax_dim_max(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b) {
  return stax_dim_min_max(ctx, a, b, true);
}

/* ---- broadcasting ------------------------------------------------------------------------ */

/* A bcast chain's operands, at most this many (a node of a graph broadcasts a handful). */
#define STAX_BCAST_MAX_OPERANDS 64

static bool stax_bcast_collect(stax_shape_ctx_t* ctx, const stax_dim_t* d,
                               const stax_dim_t** operands, int32_t* count) {
  for (; d->kind == STAX_DIM_KIND_BCAST; d = d->right) {
    if (!stax_bcast_collect(ctx, d->left, operands, count)) return false;
  }
  if (d->kind == STAX_DIM_KIND_CONST && d->value == 1) return true; /* the identity */
  for (int32_t i = 0; i < *count; i++) {
    if (operands[i] == d) return true; /* bcast(a, a) = a */
  }
  if (*count == STAX_BCAST_MAX_OPERANDS) {
    stax_shape_ctx_fail(ctx, STAX_OUT_OF_RANGE, "a broadcast has more than %d distinct dims",
                        STAX_BCAST_MAX_OPERANDS);
    return false;
  }
  operands[(*count)++] = d;
  return true;
}

static int stax_bcast_order(const void* a, const void* b) {
  return stax_dim_compare(*(const stax_dim_t* const*)a, *(const stax_dim_t* const*)b);
}

const stax_dim_t* stax_dim_bcast(stax_shape_ctx_t* ctx, const stax_dim_t* a, const stax_dim_t* b) {
  if (!ctx || !a || !b) return NULL;
  if (a == b) return a;
  const stax_dim_t* operands[STAX_BCAST_MAX_OPERANDS];
  int32_t count = 0;
  if (!stax_bcast_collect(ctx, a, operands, &count) ||
      !stax_bcast_collect(ctx, b, operands, &count)) {
    return NULL;
  }
  if (count == 0) return stax_dim_const(ctx, 1);
  qsort(operands, (size_t)count, sizeof(operands[0]), stax_bcast_order);
  /* Constants sort first: two of them (neither 1) can never broadcast. */
  if (count >= 2 && operands[0]->kind == STAX_DIM_KIND_CONST &&
      operands[1]->kind == STAX_DIM_KIND_CONST) {
    stax_shape_ctx_fail(ctx, STAX_SHAPE_MISMATCH, "cannot broadcast %lld with %lld",
                        (long long)operands[0]->value, (long long)operands[1]->value);
    return NULL;
  }
  /* Right-nested from the last operand, so a chain's tail is itself a canonical chain. */
  const stax_dim_t* chain = operands[count - 1];
  for (int32_t i = count - 2; i >= 0 && chain; i--) {
    stax_dim_t prototype = {
        .kind = STAX_DIM_KIND_BCAST, .degree = 1, .left = operands[i], .right = chain};
    chain = stax_dim_intern(ctx, &prototype);
  }
  return chain;
}

bool stax_dim_has_bcast(const stax_dim_t* d) {
  if (!d) return false;
  switch (d->kind) {
    case STAX_DIM_KIND_CONST:
    case STAX_DIM_KIND_SYMBOL:
      return false;
    case STAX_DIM_KIND_BCAST:
      return true;
    case STAX_DIM_KIND_PRODUCT:
      for (int32_t i = 0; i < d->count; i++) {
        if (stax_dim_has_bcast(d->factors[i].atom)) return true;
      }
      return false;
    case STAX_DIM_KIND_SUM:
      for (int32_t i = 0; i < d->count; i++) {
        if (stax_dim_has_bcast(d->terms[i].monomial)) return true;
      }
      return false;
    default:
      return stax_dim_has_bcast(d->left) || stax_dim_has_bcast(d->right);
  }
}
