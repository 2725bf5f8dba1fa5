/* Symbolic dims, part 5: run-time guards. From the inputs' declared dims (resolved through the
 * union-find, so equal dims share one symbol) this builds the short program that validates a
 * set of concrete input shapes and recovers every symbol's value:
 *   BIND   symbol := (input dim - offset) / scale   at the first dim of the form scale*S + offset
 *          (scale >= 1, offset constant) whose symbol is still unbound;
 *   CHECK  input dim == expression                  for every other dim, once all the symbols it
 *          uses are bound (a dim whose symbols never get bound is not checkable and is skipped);
 *   RANGE  min <= symbol <= max                     once per bound symbol, unless the binding
 *          already implies it (a bare S from a dim >= 0 with range [0, inf)).
 * Each (input, dim) yields at most one step plus its range check, so no dim is checked twice.
 * Symbols that are not bound directly but resolve to bound ones (S unified with T, or pinned to
 * a constant) get their values derived after the steps run.
 *
 * The guards borrow the shape context: it must outlive them. */
#include <stdio.h>
#include <string.h>

#include "ir/dim_internal.h"

struct stax_shape_guards_s {
  stax_allocator_t allocator;
  const stax_shape_ctx_t* ctx;
  stax_arena_t arena; /* everything below */
  int32_t input_count;
  const char** input_names; /* NULL entries for unnamed inputs */
  int32_t* ranks;
  stax_shape_guard_step_t* steps;
  int32_t step_count;
  int32_t check_count;
  int32_t symbol_count; /* symbols that existed when the guards were built */
  int32_t derived_count;
  stax_symbol_id_t* derived_symbols;
  const stax_dim_t** derived_values;
};

/* "input 'x'" or "input 2" for messages; "x" or "input2" for the printed program. */
static void stax_guard_input_label(const stax_shape_guards_t* guards, int32_t input,
                                   bool quoted, char* buf, size_t size) {
  const char* name = guards->input_names[input];
  if (quoted) {
    if (name) {
      snprintf(buf, size, "input '%s'", name);
    } else {
      snprintf(buf, size, "input %d", (int)input);
    }
  } else if (name) {
    snprintf(buf, size, "%s", name);
  } else {
    snprintf(buf, size, "input%d", (int)input);
  }
}

/* ---- building ---------------------------------------------------------------------------- */

typedef struct stax_guard_builder_t {
  stax_shape_ctx_t* ctx;
  stax_shape_guards_t* guards;
  bool* bound; /* per symbol id */
} stax_guard_builder_t;

static stax_shape_guard_step_t* stax_guard_push(stax_guard_builder_t* b,
                                                stax_shape_guard_kind_t kind, int32_t input,
                                                int32_t dim) {
  stax_shape_guard_step_t* step = &b->guards->steps[b->guards->step_count++];
  memset(step, 0, sizeof(*step));
  step->kind = kind;
  step->input = input;
  step->dim = dim;
  step->symbol = -1;
  if (kind != STAX_GUARD_BIND) b->guards->check_count++;
  return step;
}

/* r = scale*S + offset with S unbound, scale >= 1 and offset constant. */
static bool stax_guard_linear_form(const stax_guard_builder_t* b, const stax_dim_t* r,
                                   stax_symbol_id_t* out_symbol, int64_t* out_scale,
                                   int64_t* out_offset) {
  const stax_dim_t* symbol = NULL;
  if (r->kind == STAX_DIM_KIND_SYMBOL) {
    symbol = r;
    *out_scale = 1;
    *out_offset = 0;
  } else if (r->kind == STAX_DIM_KIND_SUM && r->count == 1 &&
             r->terms[0].monomial->kind == STAX_DIM_KIND_SYMBOL &&
             r->terms[0].coefficient >= 1) {
    symbol = r->terms[0].monomial;
    *out_scale = r->terms[0].coefficient;
    *out_offset = r->value;
  } else {
    return false;
  }
  *out_symbol = (stax_symbol_id_t)symbol->value;
  return !b->bound[symbol->value];
}

static bool stax_guard_all_bound(const stax_guard_builder_t* b, const stax_dim_t* r) {
  stax_symbol_id_t ids[64];
  int32_t count = stax_dim_symbols(r, ids, 64);
  if (count > 64) return false; /* a dim over more symbols than this stays unchecked */
  for (int32_t i = 0; i < count; i++) {
    if (ids[i] >= b->guards->symbol_count || !b->bound[ids[i]]) return false;
  }
  return true;
}

/* Emits the step(s) for one resolved dim; false when it must wait for more bindings. */
static bool stax_guard_place(stax_guard_builder_t* b, int32_t input, int32_t dim,
                             const stax_dim_t* r) {
  if (stax_guard_all_bound(b, r)) {
    stax_guard_push(b, STAX_GUARD_CHECK, input, dim)->expr = r;
    return true;
  }
  stax_symbol_id_t symbol = -1;
  int64_t scale = 1, offset = 0;
  if (!stax_guard_linear_form(b, r, &symbol, &scale, &offset)) return false;
  stax_shape_guard_step_t* bind = stax_guard_push(b, STAX_GUARD_BIND, input, dim);
  bind->symbol = symbol;
  bind->scale = scale;
  bind->offset = offset;
  bind->expr = r; /* for messages */
  b->bound[symbol] = true;
  /* A dim is >= 0 (checked before the steps run), so S >= ceil(-offset/scale) comes free. */
  int64_t min = 0, max = 0, implied_min = 0;
  stax_symbol_range(b->ctx, symbol, &min, &max);
  bool implied = offset != INT64_MIN && stax_i64_ceildiv(-offset, scale, &implied_min) &&
                 implied_min >= min && max == STAX_DIM_MAX;
  if (!implied) {
    stax_shape_guard_step_t* range = stax_guard_push(b, STAX_GUARD_RANGE, input, dim);
    range->symbol = symbol;
    range->min = min;
    range->max = max;
  }
  return true;
}

static stax_status_t stax_guards_copy_inputs(stax_shape_guards_t* guards, int32_t input_count,
                                             const stax_shape_guard_input_t* inputs,
                                             int64_t* out_total_dims) {
  void* memory = NULL;
  size_t count = input_count > 0 ? (size_t)input_count : 1;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&guards->arena, count * sizeof(char*), 0, &memory));
  guards->input_names = memory;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&guards->arena, count * sizeof(int32_t), 0, &memory));
  guards->ranks = memory;
  int64_t total = 0;
  for (int32_t i = 0; i < input_count; i++) {
    const stax_shape_guard_input_t* input = &inputs[i];
    STAX_RETURN_IF_ERROR(stax_arena_strdup(&guards->arena, input->name, &guards->input_names[i]));
    char label[160];
    stax_guard_input_label(guards, i, true, label, sizeof(label));
    if (input->rank < 0 || (input->rank > 0 && !input->dims)) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s: rank %d with %s dims", label,
                              (int)input->rank, input->dims ? "some" : "no");
    }
    guards->ranks[i] = input->rank;
    total += input->rank;
  }
  *out_total_dims = total;
  return STAX_OK;
}

static stax_status_t stax_guards_build_steps(stax_guard_builder_t* b, int32_t input_count,
                                             const stax_shape_guard_input_t* inputs,
                                             int64_t total_dims) {
  stax_shape_guards_t* guards = b->guards;
  void* memory = NULL;
  size_t slots = (size_t)total_dims * 2 + 1; /* a BIND and its RANGE at most per dim */
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&guards->arena,
                                        slots * sizeof(stax_shape_guard_step_t), 0, &memory));
  guards->steps = memory;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&guards->arena,
                                        (size_t)guards->symbol_count + 1, 0, &memory));
  b->bound = memory;
  memset(b->bound, 0, (size_t)guards->symbol_count + 1);
  /* dims that must wait for later bindings: (input, dim, resolved) */
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&guards->arena,
                                        ((size_t)total_dims + 1) * sizeof(int32_t) * 2, 0,
                                        &memory));
  int32_t* waiting_at = memory;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&guards->arena,
                                        ((size_t)total_dims + 1) * sizeof(stax_dim_t*), 0,
                                        &memory));
  const stax_dim_t** waiting = memory;
  int32_t waiting_count = 0;
  for (int32_t i = 0; i < input_count; i++) {
    for (int32_t d = 0; d < inputs[i].rank; d++) {
      const stax_dim_t* resolved = stax_dim_resolve(b->ctx, inputs[i].dims[d]);
      if (!resolved) {
        char label[160];
        stax_guard_input_label(guards, i, true, label, sizeof(label));
        stax_status_t pending = stax_shape_ctx_take_error(b->ctx);
        if (!pending) {
          return stax_status_make(STAX_INVALID_ARGUMENT, "%s dim %d is NULL", label, (int)d);
        }
        return stax_status_annotate(pending, "%s dim %d", label, (int)d);
      }
      if (!stax_guard_place(b, i, d, resolved)) {
        waiting_at[2 * waiting_count] = i;
        waiting_at[2 * waiting_count + 1] = d;
        waiting[waiting_count++] = resolved;
      }
    }
  }
  /* Later dims may have bound what earlier ones needed; repeat until nothing moves. */
  for (bool progress = true; progress && waiting_count > 0;) {
    progress = false;
    int32_t kept = 0;
    for (int32_t k = 0; k < waiting_count; k++) {
      if (stax_guard_place(b, waiting_at[2 * k], waiting_at[2 * k + 1], waiting[k])) {
        progress = true;
      } else {
        waiting_at[2 * kept] = waiting_at[2 * k];
        waiting_at[2 * kept + 1] = waiting_at[2 * k + 1];
        waiting[kept++] = waiting[k];
      }
    }
    waiting_count = kept;
  }
  return STAX_OK;
}

static stax_status_t stax_guards_find_derived(stax_guard_builder_t* b) {
  stax_shape_guards_t* guards = b->guards;
  size_t count = (size_t)guards->symbol_count + 1;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(
      stax_arena_alloc(&guards->arena, count * sizeof(stax_symbol_id_t), 0, &memory));
  guards->derived_symbols = memory;
  STAX_RETURN_IF_ERROR(
      stax_arena_alloc(&guards->arena, count * sizeof(stax_dim_t*), 0, &memory));
  guards->derived_values = memory;
  for (stax_symbol_id_t s = 0; s < guards->symbol_count; s++) {
    if (b->bound[s]) continue;
    const stax_dim_t* resolved = stax_dim_resolve(b->ctx, stax_symbol_dim(b->ctx, s));
    if (!resolved) return stax_shape_ctx_take_error(b->ctx);
    stax_symbol_id_t self = -1;
    if (stax_dim_as_symbol(resolved, &self) && self == s) continue;
    if (!stax_guard_all_bound(b, resolved)) continue;
    guards->derived_symbols[guards->derived_count] = s;
    guards->derived_values[guards->derived_count++] = resolved;
  }
  return STAX_OK;
}

stax_status_t stax_shape_guards_build(stax_shape_ctx_t* ctx, int32_t input_count,
                                      const stax_shape_guard_input_t* inputs,
                                      stax_shape_guards_t** out_guards) {
  if (!out_guards) return stax_status_make(STAX_INVALID_ARGUMENT, "out_guards must not be NULL");
  *out_guards = NULL;
  if (!ctx) return stax_status_make(STAX_INVALID_ARGUMENT, "shape context must not be NULL");
  if (input_count < 0 || (input_count > 0 && !inputs)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "bad guard inputs: count %d, inputs %s",
                            (int)input_count, inputs ? "given" : "NULL");
  }
  stax_status_t status = stax_shape_ctx_take_error(ctx);
  if (status) return stax_status_annotate(status, "pending dim error before building guards");
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(ctx->allocator, 1, sizeof(stax_shape_guards_t),
                                             &memory),
                       "while building shape guards");
  stax_shape_guards_t* guards = memory;
  guards->allocator = ctx->allocator;
  guards->ctx = ctx;
  guards->input_count = input_count;
  guards->symbol_count = ctx->symbol_count;
  stax_arena_init(&guards->arena, ctx->allocator, 0);
  stax_guard_builder_t builder = {ctx, guards, NULL};
  int64_t total_dims = 0;
  STAX_GOTO_IF_ERROR(status, stax_guards_copy_inputs(guards, input_count, inputs, &total_dims),
                     cleanup, "while building shape guards");
  if (total_dims > INT32_MAX / 4) {
    status = stax_status_make(STAX_INVALID_ARGUMENT, "too many input dims (%lld) for guards",
                              (long long)total_dims);
    goto cleanup;
  }
  STAX_GOTO_IF_ERROR(status, stax_guards_build_steps(&builder, input_count, inputs, total_dims),
                     cleanup, "while building shape guards");
  STAX_GOTO_IF_ERROR(status, stax_guards_find_derived(&builder), cleanup,
                     "while building shape guards");
  *out_guards = guards;
  return STAX_OK;
cleanup:
  stax_shape_guards_destroy(guards);
  return status;
}

void stax_shape_guards_destroy(stax_shape_guards_t* guards) {
  if (!guards) return;
  stax_arena_deinit(&guards->arena);
  stax_allocator_free(guards->allocator, guards, sizeof(*guards));
}

int32_t stax_shape_guards_check_count(const stax_shape_guards_t* guards) {
  return guards ? guards->check_count : 0;
}

int32_t stax_shape_guards_step_count(const stax_shape_guards_t* guards) {
  return guards ? guards->step_count : 0;
}

const stax_shape_guard_step_t* stax_shape_guards_steps(const stax_shape_guards_t* guards) {
  return guards ? guards->steps : NULL;
}

/* ---- printing ---------------------------------------------------------------------------- */

int stax_shape_guards_print(const stax_shape_guards_t* guards, char* buf, size_t size) {
  size_t length = 0;
  if (buf && size > 0) buf[0] = '\0';
  if (!guards) return 0;
  for (int32_t k = 0; k < guards->step_count; k++) {
    const stax_shape_guard_step_t* step = &guards->steps[k];
    char line[768], place[200], label[160], text[256], range[64];
    if (step->kind != STAX_GUARD_RANGE) {
      stax_guard_input_label(guards, step->input, false, label, sizeof(label));
      snprintf(place, sizeof(place), "%s[%d]", label, (int)step->dim);
    }
    const char* symbol = stax_symbol_name(guards->ctx, step->symbol);
    switch (step->kind) {
      case STAX_GUARD_BIND: {
        char value[240];
        if (step->offset > 0) {
          snprintf(value, sizeof(value), "%s - %lld", place, (long long)step->offset);
        } else if (step->offset < 0) {
          snprintf(value, sizeof(value), "%s + %llu", place,
                   (unsigned long long)(-(step->offset + 1)) + 1);
        } else {
          snprintf(value, sizeof(value), "%s", place);
        }
        if (step->scale != 1) {
          snprintf(line, sizeof(line), step->offset ? "bind %s := (%s)/%lld" : "bind %s := %s/%lld",
                   symbol, value, (long long)step->scale);
        } else {
          snprintf(line, sizeof(line), "bind %s := %s", symbol, value);
        }
        break;
      }
      case STAX_GUARD_CHECK:
        (void)stax_dim_print(guards->ctx, step->expr, text, sizeof(text));
        snprintf(line, sizeof(line), "check %s == %s", place, text);
        break;
      case STAX_GUARD_RANGE:
        snprintf(line, sizeof(line), "check %s in %s", symbol,
                 stax_format_range(step->min, step->max, range, sizeof(range)));
        break;
    }
    int n = snprintf(buf && length < size ? buf + length : NULL,
                     buf && length < size ? size - length : 0, "%s\n", line);
    if (n > 0) length += (size_t)n;
  }
  return length > (size_t)INT32_MAX ? INT32_MAX : (int)length;
}

/* ---- checking ---------------------------------------------------------------------------- */

static stax_status_t stax_guard_run_step(const stax_shape_guards_t* guards,
                                         const stax_shape_guard_step_t* step,
                                         const int64_t* const* dims, int64_t* values) {
  char label[160], text[256], range[64];
  const stax_shape_ctx_t* ctx = guards->ctx;
  if (step->kind == STAX_GUARD_RANGE) {
    int64_t value = values[step->symbol];
    if (value >= step->min && value <= step->max) return STAX_OK;
    stax_guard_input_label(guards, step->input, true, label, sizeof(label));
    return stax_status_make(STAX_SHAPE_MISMATCH, "symbol %s = %lld (from %s dim %d) is outside its range %s",
                            stax_symbol_name(ctx, step->symbol), (long long)value, label,
                            (int)step->dim,
                            stax_format_range(step->min, step->max, range, sizeof(range)));
  }
  int64_t seen = dims[step->input][step->dim];
  if (step->kind == STAX_GUARD_BIND) {
    int64_t shifted = 0;
    if (!__builtin_sub_overflow(seen, step->offset, &shifted) && shifted % step->scale == 0) {
      values[step->symbol] = shifted / step->scale;
      return STAX_OK;
    }
    stax_guard_input_label(guards, step->input, true, label, sizeof(label));
    (void)stax_dim_print(ctx, step->expr, text, sizeof(text));
    return stax_status_make(STAX_SHAPE_MISMATCH,
                            "%s dim %d is %lld, which is not %s for any integer %s", label,
                            (int)step->dim, (long long)seen, text,
                            stax_symbol_name(ctx, step->symbol));
  }
  int64_t expected = 0;
  stax_status_t status = stax_dim_eval(ctx, step->expr, values, &expected);
  if (status) {
    stax_guard_input_label(guards, step->input, true, label, sizeof(label));
    return stax_status_annotate(status, "while checking %s dim %d", label, (int)step->dim);
  }
  if (expected == seen) return STAX_OK;
  stax_guard_input_label(guards, step->input, true, label, sizeof(label));
  (void)stax_dim_print(ctx, step->expr, text, sizeof(text));
  char value[48] = "";
  if (!stax_dim_is_const(step->expr)) {
    snprintf(value, sizeof(value), " (= %lld)", (long long)expected);
  }
  return stax_status_make(STAX_SHAPE_MISMATCH, "%s dim %d is %lld, but it must equal %s%s",
                          label, (int)step->dim, (long long)seen, text, value);
}

stax_status_t stax_shape_guards_check(const stax_shape_guards_t* guards, const int32_t* ranks,
                                      const int64_t* const* dims, int64_t* out_values) {
  if (!guards) return stax_status_make(STAX_INVALID_ARGUMENT, "guards must not be NULL");
  if (guards->input_count > 0 && (!ranks || !dims)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "input ranks and dims must not be NULL");
  }
  if (guards->symbol_count > 0 && !out_values) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "out_values must not be NULL");
  }
  for (int32_t s = 0; s < guards->symbol_count; s++) out_values[s] = STAX_SYMBOL_UNBOUND;
  char label[160];
  for (int32_t i = 0; i < guards->input_count; i++) {
    if (ranks[i] != guards->ranks[i]) {
      stax_guard_input_label(guards, i, true, label, sizeof(label));
      return stax_status_make(STAX_SHAPE_MISMATCH, "%s has rank %d, but rank %d was declared",
                              label, (int)ranks[i], (int)guards->ranks[i]);
    }
    if (ranks[i] > 0 && !dims[i]) {
      stax_guard_input_label(guards, i, true, label, sizeof(label));
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s has no dims", label);
    }
    for (int32_t d = 0; d < ranks[i]; d++) {
      if (dims[i][d] < 0) {
        stax_guard_input_label(guards, i, true, label, sizeof(label));
        return stax_status_make(STAX_SHAPE_MISMATCH, "%s dim %d is %lld; dims cannot be negative",
                                label, (int)d, (long long)dims[i][d]);
      }
    }
  }
  for (int32_t k = 0; k < guards->step_count; k++) {
    STAX_RETURN_IF_ERROR(stax_guard_run_step(guards, &guards->steps[k], dims, out_values));
  }
  for (int32_t k = 0; k < guards->derived_count; k++) {
    int64_t value = 0;
    STAX_RETURN_IF_ERROR(stax_dim_eval(guards->ctx, guards->derived_values[k], out_values, &value),
                         "while deriving symbol %s",
                         stax_symbol_name(guards->ctx, guards->derived_symbols[k]));
    out_values[guards->derived_symbols[k]] = value;
  }
  return STAX_OK;
}
