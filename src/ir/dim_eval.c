/* Symbolic dims, part 3: what can be computed from a canonical dim without building new ones:
 * interval bounds from symbol ranges, evaluation under concrete symbol values, the readable
 * text form, and the postfix "dim code" the VM stores.
 *
 * Text form (pinned by tests/unit/test_dim.c): terms in canonical order (higher degree first),
 * constant last, joined by " + " / " - "; coefficients as "3*B*S"; powers as "S^2"; atoms as
 * "floor(N/D)", "ceil(N/D)", "min(A, B)", "max(A, B)", "bcast(A, B, C)", with a sum numerator or a sum/product
 * divisor in parentheses. Examples: "3*B*S + 1", "2*B - S - 4", "floor((H + 1)/2) + 1".
 * Division by a constant is always shown as floor (see dim_algebra.c). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/dim_internal.h"

/* ---- bounds ------------------------------------------------------------------------------ */

/* INT64_MIN and INT64_MAX stand for -inf and +inf: they absorb finite addends and keep their
 * sign through products, so a bound that saturated once stays conservative. */
static int64_t stax_saturating_add(int64_t a, int64_t b, bool upper) {
  /* inf + -inf: the infinity on the side being bounded wins, which stays conservative */
  int64_t near = upper ? INT64_MAX : INT64_MIN, far = upper ? INT64_MIN : INT64_MAX;
  if (a == near || b == near) return near;
  if (a == far || b == far) return far;
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

static int64_t stax_saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  bool negative = (a < 0) != (b < 0);
  bool infinite = a == INT64_MAX || a == INT64_MIN || b == INT64_MAX || b == INT64_MIN;
  int64_t r = 0;
  if (infinite || __builtin_mul_overflow(a, b, &r)) return negative ? INT64_MIN : INT64_MAX;
  return r;
}

typedef struct stax_interval_t {
  int64_t low, high;
} stax_interval_t;

static const stax_interval_t stax_interval_all = {INT64_MIN, INT64_MAX};

static stax_interval_t stax_interval_mul(stax_interval_t x, stax_interval_t y) {
  int64_t corners[4] = {stax_saturating_mul(x.low, y.low), stax_saturating_mul(x.low, y.high),
                        stax_saturating_mul(x.high, y.low), stax_saturating_mul(x.high, y.high)};
  stax_interval_t r = {corners[0], corners[0]};
  for (int i = 1; i < 4; i++) {
    if (corners[i] < r.low) r.low = corners[i];
    if (corners[i] > r.high) r.high = corners[i];
  }
  return r;
}

static int64_t stax_saturating_power(int64_t base, int32_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = stax_saturating_mul(result, base);
    exponent >>= 1;
    if (exponent > 0) base = stax_saturating_mul(base, base);
  }
  return result;
}

static stax_interval_t stax_interval_power(stax_interval_t x, int32_t exponent) {
  int64_t at_low = stax_saturating_power(x.low, exponent);
  int64_t at_high = stax_saturating_power(x.high, exponent);
  if (exponent % 2 == 1 || x.low >= 0) return (stax_interval_t){at_low, at_high};
  if (x.high <= 0) return (stax_interval_t){at_high, at_low};
  return (stax_interval_t){0, at_low > at_high ? at_low : at_high}; /* even power across 0 */
}

static stax_interval_t stax_dim_interval(const stax_shape_ctx_t* ctx, const stax_dim_t* d);

static stax_interval_t stax_division_interval(const stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  stax_interval_t numerator = stax_dim_interval(ctx, d->left);
  stax_interval_t divisor = stax_dim_interval(ctx, d->right);
  /* A zero divisor fails at evaluation, so only divisors >= 1 count; with possibly negative
   * divisors nothing useful is known. */
  if (divisor.low < 0 || divisor.high < 1) return stax_interval_all;
  if (divisor.low == 0) divisor.low = 1;
  bool floor = d->kind == STAX_DIM_KIND_FLOORDIV;
  int64_t corners[4];
  const int64_t numerators[2] = {numerator.low, numerator.high};
  const int64_t divisors[2] = {divisor.low, divisor.high};
  for (int i = 0; i < 4; i++) {
    if (floor) {
      (void)stax_i64_floordiv(numerators[i / 2], divisors[i % 2], &corners[i]);
    } else {
      (void)stax_i64_ceildiv(numerators[i / 2], divisors[i % 2], &corners[i]);
    }
  }
  stax_interval_t r = {corners[0], corners[0]};
  for (int i = 1; i < 4; i++) {
    if (corners[i] < r.low) r.low = corners[i];
    if (corners[i] > r.high) r.high = corners[i];
  }
  /* an unbounded numerator stays unbounded */
  if (numerator.high == INT64_MAX) r.high = INT64_MAX;
  if (numerator.low == INT64_MIN) r.low = INT64_MIN;
  return r;
}

static stax_interval_t stax_dim_interval(const stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  switch (d->kind) {
    case STAX_DIM_KIND_CONST:
      return (stax_interval_t){d->value, d->value};
    case STAX_DIM_KIND_SYMBOL: {
      stax_interval_t r = stax_interval_all;
      if (ctx && d->value < ctx->symbol_count) {
        r.low = ctx->symbols[d->value].min;
        r.high = ctx->symbols[d->value].max;
      }
      return r;
    }
    case STAX_DIM_KIND_FLOORDIV:
    case STAX_DIM_KIND_CEILDIV:
      return stax_division_interval(ctx, d);
    case STAX_DIM_KIND_MIN:
    case STAX_DIM_KIND_MAX: {
      stax_interval_t a = stax_dim_interval(ctx, d->left), b = stax_dim_interval(ctx, d->right);
      if (d->kind == STAX_DIM_KIND_MIN) {
        return (stax_interval_t){a.low < b.low ? a.low : b.low, a.high < b.high ? a.high : b.high};
      }
      return (stax_interval_t){a.low > b.low ? a.low : b.low, a.high > b.high ? a.high : b.high};
    }
    case STAX_DIM_KIND_BCAST: {
      /* The value is one of the operands (when it evaluates at all), and an operand that is
       * at least 2 is the value: the other is 1 or equal to it. */
      stax_interval_t a = stax_dim_interval(ctx, d->left), b = stax_dim_interval(ctx, d->right);
      if (a.low >= 2 && b.low >= 2) {
        return (stax_interval_t){a.low > b.low ? a.low : b.low, a.high < b.high ? a.high : b.high};
      }
      if (a.low >= 2) return a;
      if (b.low >= 2) return b;
      return (stax_interval_t){a.low < b.low ? a.low : b.low, a.high > b.high ? a.high : b.high};
    }
    case STAX_DIM_KIND_PRODUCT: {
      stax_interval_t r = {1, 1};
      for (int32_t i = 0; i < d->count; i++) {
        stax_interval_t factor = stax_dim_interval(ctx, d->factors[i].atom);
        r = stax_interval_mul(r, stax_interval_power(factor, d->factors[i].exponent));
      }
      return r;
    }
    case STAX_DIM_KIND_SUM: {
      stax_interval_t r = {d->value, d->value};
      for (int32_t i = 0; i < d->count; i++) {
        stax_interval_t term = stax_dim_interval(ctx, d->terms[i].monomial);
        int64_t c = d->terms[i].coefficient;
        int64_t a = stax_saturating_mul(term.low, c), b = stax_saturating_mul(term.high, c);
        r.low = stax_saturating_add(r.low, a < b ? a : b, false);
        r.high = stax_saturating_add(r.high, a < b ? b : a, true);
      }
      return r;
    }
  }
  return stax_interval_all;
}

void stax_dim_bounds(const stax_shape_ctx_t* ctx, const stax_dim_t* d, int64_t* out_min,
                     int64_t* out_max) {
  stax_interval_t r = d ? stax_dim_interval(ctx, d) : stax_interval_all;
  if (out_min) *out_min = r.low;
  if (out_max) *out_max = r.high;
}

/* ---- printing ---------------------------------------------------------------------------- */

typedef struct stax_writer_t {
  char* buf;
  size_t size;
  size_t length; /* what the whole text needs, even past size */
} stax_writer_t;

static void stax_writer_printf(stax_writer_t* w, const char* fmt, ...) STAX_PRINTF(2, 3);

static void stax_writer_printf(stax_writer_t* w, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char* at = w->length < w->size ? w->buf + w->length : NULL;
  size_t room = w->length < w->size ? w->size - w->length : 0;
  int n = vsnprintf(at, room, fmt, args);
  va_end(args);
  if (n > 0) w->length += (size_t)n;
}

static void stax_print_dim(stax_writer_t* w, const stax_shape_ctx_t* ctx, const stax_dim_t* d);

static void stax_print_wrapped(stax_writer_t* w, const stax_shape_ctx_t* ctx,
                               const stax_dim_t* d, bool wrap) {
  if (wrap) stax_writer_printf(w, "(");
  stax_print_dim(w, ctx, d);
  if (wrap) stax_writer_printf(w, ")");
}

static void stax_print_monomial(stax_writer_t* w, const stax_shape_ctx_t* ctx,
                                const stax_dim_t* m) {
  if (m->kind != STAX_DIM_KIND_PRODUCT) {
    stax_print_dim(w, ctx, m);
    return;
  }
  for (int32_t i = 0; i < m->count; i++) {
    if (i > 0) stax_writer_printf(w, "*");
    stax_print_dim(w, ctx, m->factors[i].atom);
    if (m->factors[i].exponent != 1) stax_writer_printf(w, "^%d", (int)m->factors[i].exponent);
  }
}

/* |c| without overflow for INT64_MIN */
static unsigned long long stax_magnitude(int64_t c) {
  return c < 0 ? (unsigned long long)(-(c + 1)) + 1 : (unsigned long long)c;
}

static void stax_print_dim(stax_writer_t* w, const stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  switch (d->kind) {
    case STAX_DIM_KIND_CONST:
      stax_writer_printf(w, "%lld", (long long)d->value);
      return;
    case STAX_DIM_KIND_SYMBOL: {
      const char* name = stax_symbol_name(ctx, (stax_symbol_id_t)d->value);
      if (name) {
        stax_writer_printf(w, "%s", name);
      } else {
        stax_writer_printf(w, "#%lld", (long long)d->value);
      }
      return;
    }
    case STAX_DIM_KIND_FLOORDIV:
    case STAX_DIM_KIND_CEILDIV:
      stax_writer_printf(w, d->kind == STAX_DIM_KIND_FLOORDIV ? "floor(" : "ceil(");
      stax_print_wrapped(w, ctx, d->left, d->left->kind == STAX_DIM_KIND_SUM);
      stax_writer_printf(w, "/");
      stax_print_wrapped(w, ctx, d->right,
                         d->right->kind == STAX_DIM_KIND_SUM ||
                             d->right->kind == STAX_DIM_KIND_PRODUCT);
      stax_writer_printf(w, ")");
      return;
    case STAX_DIM_KIND_BCAST:
      /* A chain prints flat: bcast(A, B, C). */
      stax_writer_printf(w, "bcast(");
      for (; d->kind == STAX_DIM_KIND_BCAST; d = d->right) {
        stax_print_dim(w, ctx, d->left);
        stax_writer_printf(w, ", ");
      }
      stax_print_dim(w, ctx, d);
      stax_writer_printf(w, ")");
      return;
    case STAX_DIM_KIND_MIN:
    case STAX_DIM_KIND_MAX:
      stax_writer_printf(w, d->kind == STAX_DIM_KIND_MIN ? "min(" : "max(");
      stax_print_dim(w, ctx, d->left);
      stax_writer_printf(w, ", ");
      stax_print_dim(w, ctx, d->right);
      stax_writer_printf(w, ")");
      return;
    case STAX_DIM_KIND_PRODUCT:
      stax_print_monomial(w, ctx, d);
      return;
    case STAX_DIM_KIND_SUM:
      for (int32_t i = 0; i < d->count; i++) {
        int64_t c = d->terms[i].coefficient;
        unsigned long long magnitude = stax_magnitude(c);
        if (i == 0) {
          if (c < 0) stax_writer_printf(w, "-");
        } else {
          stax_writer_printf(w, c < 0 ? " - " : " + ");
        }
        if (magnitude != 1) stax_writer_printf(w, "%llu*", magnitude);
        stax_print_monomial(w, ctx, d->terms[i].monomial);
      }
      if (d->value != 0) {
        stax_writer_printf(w, d->value < 0 ? " - %llu" : " + %llu", stax_magnitude(d->value));
      }
      return;
  }
}

int stax_dim_print(const stax_shape_ctx_t* ctx, const stax_dim_t* d, char* buf, size_t size) {
  stax_writer_t w = {buf, buf ? size : 0, 0};
  if (w.size > 0) buf[0] = '\0';
  if (!d) {
    stax_writer_printf(&w, "(null)");
  } else {
    stax_print_dim(&w, ctx, d);
  }
  return w.length > (size_t)INT32_MAX ? INT32_MAX : (int)w.length;
}

/* ---- evaluation -------------------------------------------------------------------------- */

static stax_status_t stax_eval_overflow(const stax_shape_ctx_t* ctx, const stax_dim_t* d) {
  char text[256];
  (void)stax_dim_print(ctx, d, text, sizeof(text));
  return stax_status_make(STAX_INVALID_ARGUMENT, "dim expression %s overflows int64", text);
}

static stax_status_t stax_eval_power(const stax_shape_ctx_t* ctx, const stax_dim_t* d,
                                     int64_t base, int32_t exponent, int64_t* out_value) {
  int64_t result = 1;
  for (int32_t i = 0; i < exponent; i++) {
    if (!stax_i64_mul(result, base, &result)) return stax_eval_overflow(ctx, d);
    if (result == 0 || result == 1) break; /* stays put: no need to loop a huge exponent */
  }
  *out_value = result;
  return STAX_OK;
}

static stax_status_t stax_eval(const stax_shape_ctx_t* ctx, const stax_dim_t* d,
                               const int64_t* values, int64_t* out_value) {
  int64_t a = 0, b = 0;
  switch (d->kind) {
    case STAX_DIM_KIND_CONST:
      *out_value = d->value;
      return STAX_OK;
    case STAX_DIM_KIND_SYMBOL: {
      int64_t value = values ? values[d->value] : STAX_SYMBOL_UNBOUND;
      if (value == STAX_SYMBOL_UNBOUND) {
        const char* name = stax_symbol_name(ctx, (stax_symbol_id_t)d->value);
        const char* origin = ctx && name ? ctx->symbols[d->value].origin : NULL;
        return stax_status_make(STAX_FAILED_PRECONDITION, "symbol %s is unbound%s%s%s",
                                name ? name : "?", origin ? " (" : "", origin ? origin : "",
                                origin ? ")" : "");
      }
      *out_value = value;
      return STAX_OK;
    }
    case STAX_DIM_KIND_FLOORDIV:
    case STAX_DIM_KIND_CEILDIV:
    case STAX_DIM_KIND_MIN:
    case STAX_DIM_KIND_MAX:
      STAX_RETURN_IF_ERROR(stax_eval(ctx, d->left, values, &a));
      STAX_RETURN_IF_ERROR(stax_eval(ctx, d->right, values, &b));
      if (d->kind == STAX_DIM_KIND_MIN || d->kind == STAX_DIM_KIND_MAX) {
        *out_value = (a < b) == (d->kind == STAX_DIM_KIND_MIN) ? a : b;
        return STAX_OK;
      }
      if (b == 0) {
        char text[256];
        (void)stax_dim_print(ctx, d, text, sizeof(text));
        return stax_status_make(STAX_INVALID_ARGUMENT, "division by zero in %s", text);
      }
      if (!(d->kind == STAX_DIM_KIND_FLOORDIV ? stax_i64_floordiv(a, b, out_value)
                                              : stax_i64_ceildiv(a, b, out_value))) {
        return stax_eval_overflow(ctx, d);
      }
      return STAX_OK;
    case STAX_DIM_KIND_BCAST:
      STAX_RETURN_IF_ERROR(stax_eval(ctx, d->left, values, &a));
      STAX_RETURN_IF_ERROR(stax_eval(ctx, d->right, values, &b));
      if (a == b || b == 1) {
        *out_value = a;
      } else if (a == 1) {
        *out_value = b;
      } else {
        char left[256], right[256];
        (void)stax_dim_print(ctx, d->left, left, sizeof(left));
        (void)stax_dim_print(ctx, d->right, right, sizeof(right));
        return stax_status_make(STAX_SHAPE_MISMATCH, "cannot broadcast %s = %lld with %s = %lld",
                                left, (long long)a, right, (long long)b);
      }
      return STAX_OK;
    case STAX_DIM_KIND_PRODUCT:
      a = 1;
      for (int32_t i = 0; i < d->count; i++) {
        STAX_RETURN_IF_ERROR(stax_eval(ctx, d->factors[i].atom, values, &b));
        STAX_RETURN_IF_ERROR(stax_eval_power(ctx, d, b, d->factors[i].exponent, &b));
        if (!stax_i64_mul(a, b, &a)) return stax_eval_overflow(ctx, d);
      }
      *out_value = a;
      return STAX_OK;
    case STAX_DIM_KIND_SUM:
      a = d->value;
      for (int32_t i = 0; i < d->count; i++) {
        STAX_RETURN_IF_ERROR(stax_eval(ctx, d->terms[i].monomial, values, &b));
        if (!stax_i64_mul(b, d->terms[i].coefficient, &b) || !stax_i64_add(a, b, &a)) {
          return stax_eval_overflow(ctx, d);
        }
      }
      *out_value = a;
      return STAX_OK;
  }
  return stax_status_make(STAX_INTERNAL, "corrupt dim node");
}

stax_status_t stax_dim_eval(const stax_shape_ctx_t* ctx, const stax_dim_t* d,
                            const int64_t* values, int64_t* out_value) {
  if (!out_value) return stax_status_make(STAX_INVALID_ARGUMENT, "out_value must not be NULL");
  *out_value = 0;
  if (!d) return stax_status_make(STAX_INVALID_ARGUMENT, "cannot evaluate a NULL dim");
  return stax_eval(ctx, d, values, out_value);
}

/* ---- dim code ---------------------------------------------------------------------------- */

typedef struct stax_code_writer_t {
  stax_dim_code_t* out;
  int32_t capacity;
  int64_t count;
} stax_code_writer_t;

static void stax_code_put(stax_code_writer_t* w, stax_dim_code_op_t op, int64_t value) {
  if (w->count < w->capacity) {
    w->out[w->count].op = (int32_t)op;
    w->out[w->count].value = value;
  }
  w->count++;
}

static void stax_code_emit(stax_code_writer_t* w, const stax_dim_t* d) {
  switch (d->kind) {
    case STAX_DIM_KIND_CONST:
      stax_code_put(w, STAX_DIM_CODE_CONST, d->value);
      return;
    case STAX_DIM_KIND_SYMBOL:
      stax_code_put(w, STAX_DIM_CODE_SYMBOL, d->value);
      return;
    case STAX_DIM_KIND_FLOORDIV:
    case STAX_DIM_KIND_CEILDIV:
    case STAX_DIM_KIND_MIN:
    case STAX_DIM_KIND_MAX:
    case STAX_DIM_KIND_BCAST: {
      static const stax_dim_code_op_t ops[] = {STAX_DIM_CODE_FLOORDIV, STAX_DIM_CODE_CEILDIV,
                                               STAX_DIM_CODE_MIN, STAX_DIM_CODE_MAX,
                                               STAX_DIM_CODE_BCAST};
      stax_code_emit(w, d->left);
      stax_code_emit(w, d->right);
      stax_code_put(w, ops[d->kind - STAX_DIM_KIND_FLOORDIV], 0);
      return;
    }
    case STAX_DIM_KIND_PRODUCT: {
      bool first = true;
      for (int32_t i = 0; i < d->count; i++) {
        for (int32_t e = 0; e < d->factors[i].exponent; e++) {
          stax_code_emit(w, d->factors[i].atom);
          if (!first) stax_code_put(w, STAX_DIM_CODE_MUL, 0);
          first = false;
        }
      }
      return;
    }
    case STAX_DIM_KIND_SUM:
      for (int32_t i = 0; i < d->count; i++) {
        stax_code_emit(w, d->terms[i].monomial);
        if (d->terms[i].coefficient != 1) {
          stax_code_put(w, STAX_DIM_CODE_CONST, d->terms[i].coefficient);
          stax_code_put(w, STAX_DIM_CODE_MUL, 0);
        }
        if (i > 0) stax_code_put(w, STAX_DIM_CODE_ADD, 0);
      }
      if (d->value != 0) {
        stax_code_put(w, STAX_DIM_CODE_CONST, d->value);
        stax_code_put(w, STAX_DIM_CODE_ADD, 0);
      }
      return;
  }
}

int32_t stax_dim_emit_code(const stax_dim_t* d, stax_dim_code_t* out, int32_t capacity) {
  if (!d) return 0;
  stax_code_writer_t w = {out, out && capacity > 0 ? capacity : 0, 0};
  stax_code_emit(&w, d);
  return w.count > INT32_MAX ? INT32_MAX : (int32_t)w.count;
}

#define STAX_DIM_CODE_STACK 64

static const char* const stax_dim_code_op_names[] = {"const", "symbol", "add", "mul",
                                                      "floordiv", "ceildiv", "min", "max",
                                                      "bcast"};

stax_status_t stax_dim_code_eval(const stax_dim_code_t* code, int32_t count,
                                 const int64_t* values, int32_t symbol_count,
                                 int64_t* out_value) {
  if (!out_value) return stax_status_make(STAX_INVALID_ARGUMENT, "out_value must not be NULL");
  *out_value = 0;
  if (count <= 0 || !code) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "dim code is empty");
  }
  int64_t stack[STAX_DIM_CODE_STACK];
  int32_t depth = 0;
  for (int32_t pc = 0; pc < count; pc++) {
    int32_t op = code[pc].op;
    int64_t value = code[pc].value;
    if (op < 0 || op >= STAX_DIM_CODE_OP_COUNT) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "dim code entry %d has bad op %d", (int)pc,
                              (int)op);
    }
    if (op == STAX_DIM_CODE_CONST || op == STAX_DIM_CODE_SYMBOL) {
      if (depth == STAX_DIM_CODE_STACK) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "dim code needs more than %d stack entries (entry %d)",
                                STAX_DIM_CODE_STACK, (int)pc);
      }
      if (op == STAX_DIM_CODE_SYMBOL) {
        if (value < 0 || value >= symbol_count) {
          return stax_status_make(STAX_INVALID_ARGUMENT,
                                  "dim code entry %d names symbol %lld of %d", (int)pc,
                                  (long long)value, (int)symbol_count);
        }
        if (!values || values[value] == STAX_SYMBOL_UNBOUND) {
          return stax_status_make(STAX_FAILED_PRECONDITION, "symbol #%lld is unbound",
                                  (long long)value);
        }
        value = values[value];
      }
      stack[depth++] = value;
      continue;
    }
    if (depth < 2) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "dim code entry %d (%s) underflows the stack",
                              (int)pc, stax_dim_code_op_names[op]);
    }
    int64_t b = stack[--depth];
    int64_t a = stack[depth - 1];
    int64_t r = 0;
    bool ok = true;
    switch (op) {
      case STAX_DIM_CODE_ADD: ok = stax_i64_add(a, b, &r); break;
      case STAX_DIM_CODE_MUL: ok = stax_i64_mul(a, b, &r); break;
      case STAX_DIM_CODE_MIN: r = a < b ? a : b; break;
      case STAX_DIM_CODE_MAX: r = a > b ? a : b; break;
      case STAX_DIM_CODE_BCAST:
        if (a != b && a != 1 && b != 1) {
          return stax_status_make(STAX_SHAPE_MISMATCH, "cannot broadcast %lld with %lld",
                                  (long long)a, (long long)b);
        }
        r = a == 1 ? b : a;
        break;
      default:
        if (b == 0) {
          return stax_status_make(STAX_INVALID_ARGUMENT, "division by zero in dim code entry %d",
                                  (int)pc);
        }
        ok = op == STAX_DIM_CODE_FLOORDIV ? stax_i64_floordiv(a, b, &r)
                                          : stax_i64_ceildiv(a, b, &r);
        break;
    }
    if (!ok) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "dim code entry %d (%s) overflows int64",
                              (int)pc, stax_dim_code_op_names[op]);
    }
    stack[depth - 1] = r;
  }
  if (depth != 1) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "dim code leaves %d values on the stack",
                            (int)depth);
  }
  *out_value = stack[0];
  return STAX_OK;
}
