/* The kernel IR verifier: the contract between lowering and the backends. A kernel that passes
 * has every loop used once and in scope where its counter is read, every local declared before
 * use, the vector rules kept (no nested vector loops; outer locals only REDUCEd inside a
 * vector loop and not read there; stores that move with the lanes), parallel loops only at a
 * stage's top, and every load and store inside its buffer for every counter value, so
 * generated code cannot touch memory outside the tensors it was given. Failures are INTERNAL
 * (a lowering bug), naming the kernel, stage and what broke. */
#include <stdio.h>
#include <string.h>

#include "jit/kernel_ir.h"
#include "runtime/tensor_internal.h"

typedef struct verifier_t {
  const stax_kir_kernel_t* kernel;
  const char* stage_name;
  bool* loop_seen;      /* per loop: already placed somewhere */
  bool* loop_open;      /* per loop: encloses the current statement */
  int32_t* local_depth; /* per local: block depth of its declaration, -1 when not in scope */
  bool* reduced_here;   /* per local: REDUCEd inside the current vector loop */
  uint32_t* expr_stamp; /* per expression: the statement that last checked it */
  uint32_t stamp;
  int32_t depth;        /* current block depth */
  int32_t vector_loop;  /* enclosing vector loop, or -1 */
  int32_t vector_depth; /* block depth of the vector loop's body */
  /* Rows-generic kernels: the row count this walk checks (-1: the kernel's own extents) and
   * the parameters' values at it. Each walk visits the accesses in the same order; `margins`
   * (when set) records, per access, how far it stays inside its buffer (low side, high side;
   * INT64_MIN when it does not happen), and `previous` is the walk one period earlier. */
  int64_t rows;
  int64_t params[STAX_KIR_MAX_PARAMS];
  int64_t access;
  int64_t access_count;
  int64_t* margins;
  const int64_t* previous;
  bool inactive; /* the current stage does not run at this row count: no access happens */
  bool params_set; /* params[] hold this walk's values (rows-generic at `rows`, symbolic) */
  int32_t dead;    /* enclosing loops that run zero times here: their accesses never happen */
  stax_status_t status;
} verifier_t;

static void fail(verifier_t* v, const char* fmt, const char* a, const char* b) {
  if (v->status != STAX_OK) return;
  v->status = stax_status_make(STAX_INTERNAL, "kernel IR '%s', stage '%s': %s%s%s", v->kernel->name,
                               v->stage_name ? v->stage_name : "?", fmt, a ? a : "", b ? b : "");
}

/* Lowest and highest value of an index over the counters' ranges. False when some enclosing
 * loop has extent 0 (the access never happens) or the arithmetic overflows. */
static int64_t loop_extent(const verifier_t* v, int32_t loop) {
  const stax_kir_loop_t* l = v->kernel->loops[loop];
  return v->params_set && l->extent_param >= 0 ? v->params[l->extent_param] : l->extent;
}

static bool index_range(const verifier_t* v, const stax_kir_index_t* index,
                        bool* out_overflow, int64_t* out_low, int64_t* out_high) {
  *out_overflow = false;
  int64_t low = index->constant, high = index->constant;
  for (int32_t t = 0; t < index->term_count; t++) {
    int32_t loop = index->loops[t];
    if (loop >= STAX_KIR_PARAM_TERM) {
      /* A parameter term: one value at this row count (the example's for a plain walk). */
      int64_t value = v->params_set ? v->params[loop - STAX_KIR_PARAM_TERM] : 0;
      int64_t term = 0, factor = index->coefficients[t];
      if ((index->scales[t] > 0 &&
           __builtin_mul_overflow(factor, v->params[index->scales[t] - 1], &factor)) ||
          __builtin_mul_overflow(factor, value, &term) ||
          __builtin_add_overflow(low, term, &low) || __builtin_add_overflow(high, term, &high)) {
        *out_overflow = true;
        return false;
      }
      continue;
    }
    int64_t extent = loop_extent(v, loop);
    if (extent <= 0) return false;
    int64_t reach = 0, coefficient = index->coefficients[t];
    if ((index->scales[t] > 0 &&
         __builtin_mul_overflow(coefficient, v->params[index->scales[t] - 1], &coefficient)) ||
        __builtin_mul_overflow(coefficient, extent - 1, &reach)) {
      *out_overflow = true;
      return false;
    }
    bool overflow = reach < 0 ? __builtin_add_overflow(low, reach, &low)
                              : __builtin_add_overflow(high, reach, &high);
    if (overflow) {
      *out_overflow = true;
      return false;
    }
  }
  *out_low = low;
  *out_high = high;
  return true;
}

static void check_index(verifier_t* v, int32_t buffer, const stax_kir_index_t* index,
                        const char* what) {
  const stax_kir_kernel_t* kernel = v->kernel;
  if (buffer < 0 || buffer >= kernel->buffer_count || !index) {
    fail(v, what, " of a bad buffer", NULL);
    return;
  }
  int64_t access = v->access++;
  for (int32_t t = 0; t < index->term_count; t++) {
    int32_t loop = index->loops[t];
    if (index->scales[t] < 0 || index->scales[t] > kernel->param_count ||
        (index->scales[t] > 0 && !kernel->symbolic)) {
      fail(v, what, " scales a term by an unknown parameter: buffer ",
           kernel->buffers[buffer]->name);
      return;
    }
    if (index->scales[t] > 0 && loop == v->vector_loop) {
      fail(v, what, " steps by a run-time stride along the vector lanes: buffer ",
           kernel->buffers[buffer]->name);
      return;
    }
    if (loop >= STAX_KIR_PARAM_TERM) {
      if (!(kernel->rows_generic || kernel->symbolic) ||
          loop - STAX_KIR_PARAM_TERM >= kernel->param_count) {
        fail(v, what, " indexes by an unknown parameter: buffer ", kernel->buffers[buffer]->name);
        return;
      }
      continue;
    }
    if (loop < 0 || loop >= kernel->loop_count || !v->loop_open[loop]) {
      fail(v, what, " indexes by a loop that does not enclose it: buffer ",
           kernel->buffers[buffer]->name);
      return;
    }
  }
  bool overflow = false;
  int64_t low = 0, high = 0;
  if (v->inactive || v->dead) return;
  if (!index_range(v, index, &overflow, &low, &high)) {
    if (overflow) fail(v, what, " index overflows: buffer ", kernel->buffers[buffer]->name);
    return;
  }
  const stax_kir_buffer_t* b = kernel->buffers[buffer];
  int64_t lowest = b->lowest, highest = b->highest;
  if (v->rows >= 0 && !stax_kir_buffer_reach(b, v->rows, &lowest, &highest)) highest = lowest - 1;
  if (kernel->symbolic) {
    int64_t dims[STAX_MAX_RANK], strides[STAX_MAX_RANK];
    for (int32_t d = 0; d < b->rank; d++) {
      dims[d] = stax_kir_buffer_dim_at(b, d, v->params);
      strides[d] = stax_kir_buffer_stride_at(b, d, v->params);
    }
    if (!stax_shape_extent(b->rank, dims, strides, &lowest, &highest)) highest = lowest - 1;
  }
  if (v->margins && access < v->access_count) {
    int64_t* m = &v->margins[2 * access];
    m[0] = low - lowest;
    m[1] = highest - high;
    /* One period earlier this access must have happened too and stayed at least as far
     * inside: margins change linearly per period (quasi-linear parameters), so a margin that
     * does not shrink over one period never does. */
    const int64_t* before = v->previous ? &v->previous[2 * access] : NULL;
    if (before && (before[0] == INT64_MIN || m[0] < before[0] || m[1] < before[1])) {
      if (v->status != STAX_OK) return;
      v->status = stax_status_make(
          STAX_INTERNAL,
          "kernel IR '%s', stage '%s': %s of buffer %s cannot be proven in bounds for every "
          "row count (its margin shrinks from rows %lld on)",
          kernel->name, v->stage_name ? v->stage_name : "?", what, b->name,
          (long long)v->rows);
      return;
    }
  }
  if (low < lowest || high > highest) {
    if (v->status != STAX_OK) return;
    v->status = stax_status_make(
        STAX_INTERNAL,
        "kernel IR '%s', stage '%s': %s out of bounds of buffer %s (reaches %lld..%lld, "
        "buffer spans %lld..%lld%s%lld)",
        kernel->name, v->stage_name ? v->stage_name : "?", what, b->name, (long long)low,
        (long long)high, (long long)lowest, (long long)highest,
        v->rows >= 0 ? " at rows " : "", (long long)(v->rows >= 0 ? v->rows : 0));
  }
}

static void check_expr(verifier_t* v, const stax_kir_expr_t* expr) {
  if (v->status != STAX_OK) return;
  if (!expr) {
    fail(v, "missing expression", NULL, NULL);
    return;
  }
  if (v->expr_stamp[expr->id] == v->stamp) return; /* shared node, already checked here */
  v->expr_stamp[expr->id] = v->stamp;
  const stax_kir_kernel_t* kernel = v->kernel;
  switch (expr->kind) {
    case STAX_KIR_LOAD: check_index(v, expr->buffer, expr->index, "load"); break;
    case STAX_KIR_LOCAL: {
      int32_t local = expr->local;
      if (v->local_depth[local] < 0) {
        fail(v, "read of local '", kernel->locals[local]->name, "' outside its scope");
      } else if (v->vector_loop >= 0 && v->local_depth[local] < v->vector_depth &&
                 v->reduced_here[local]) {
        fail(v, "local '", kernel->locals[local]->name,
             "' is read inside the vector loop that reduces it");
      }
      break;
    }
    case STAX_KIR_LOOP_INDEX:
      if (!v->loop_open[expr->loop])
        fail(v, "counter of loop '", kernel->loops[expr->loop]->name, "' read outside it");
      break;
    default: break;
  }
  for (int32_t i = 0; i < expr->operand_count; i++) check_expr(v, expr->operands[i]);
}

static void check_block(verifier_t* v, const stax_kir_block_t* block, bool top_level);

/* Marks the outer locals REDUCEd anywhere inside a vector loop's body. */
static void mark_reduced(verifier_t* v, const stax_kir_block_t* block, bool mark) {
  for (const stax_kir_stmt_t* s = block->first; s; s = s->next) {
    if (s->kind == STAX_KIR_STMT_REDUCE) v->reduced_here[s->local] = mark;
    if (s->kind == STAX_KIR_STMT_LOOP) mark_reduced(v, &v->kernel->loops[s->loop]->body, mark);
  }
}

static void check_loop(verifier_t* v, int32_t id, bool top_level, bool only_statement) {
  const stax_kir_kernel_t* kernel = v->kernel;
  if (id < 0 || id >= kernel->loop_count) {
    fail(v, "bad loop", NULL, NULL);
    return;
  }
  const stax_kir_loop_t* loop = kernel->loops[id];
  if (v->loop_seen[id]) {
    fail(v, "loop '", loop->name, "' appears twice");
    return;
  }
  v->loop_seen[id] = true;
  if (loop->parallel && !(top_level && only_statement))
    fail(v, "parallel loop '", loop->name, "' is not its stage's only top-level statement");
  if (loop->unroll < 1 || loop->grain < 1) fail(v, "loop '", loop->name, "' unroll/grain < 1");
  if (loop->extent_param >= 0 && loop->extent_param >= kernel->param_count)
    fail(v, "loop '", loop->name, "' takes its extent from an unknown parameter");
  else if (loop_extent(v, id) < 0)
    fail(v, "loop '", loop->name, "' has a negative extent at some row count");
  if (loop->vector_width < 1 || loop->vector_width > STAX_KIR_MAX_VECTOR_WIDTH)
    fail(v, "loop '", loop->name, "' has a bad vector width");
  bool vector = loop->vector_width > 1;
  if (vector && v->vector_loop >= 0)
    fail(v, "vector loop '", loop->name, "' nests inside another vector loop");
  if (v->status != STAX_OK) return;

  int32_t saved_vector = v->vector_loop, saved_vector_depth = v->vector_depth;
  if (vector) {
    v->vector_loop = id;
    v->vector_depth = v->depth + 1;
    mark_reduced(v, &loop->body, true);
  }
  /* A loop that runs zero times at these extents (an overlapping last tile that is not
   * needed) holds accesses that never happen, whatever their indices. */
  bool dead = loop_extent(v, id) <= 0;
  v->dead += dead;
  v->loop_open[id] = true;
  check_block(v, &loop->body, false);
  v->loop_open[id] = false;
  v->dead -= dead;
  if (vector) {
    mark_reduced(v, &loop->body, false);
    v->vector_loop = saved_vector;
    v->vector_depth = saved_vector_depth;
  }
}

static void check_block(verifier_t* v, const stax_kir_block_t* block, bool top_level) {
  const stax_kir_kernel_t* kernel = v->kernel;
  v->depth++;
  bool only = block->first && !block->first->next;
  for (const stax_kir_stmt_t* s = block->first; s && v->status == STAX_OK; s = s->next) {
    v->stamp++;
    switch (s->kind) {
      case STAX_KIR_STMT_LOOP: check_loop(v, s->loop, top_level, only); break;
      case STAX_KIR_STMT_STORE:
        check_expr(v, s->value);
        check_index(v, s->buffer, s->index, "store");
        if (v->status == STAX_OK && kernel->buffers[s->buffer]->role == STAX_KIR_BUFFER_INPUT)
          fail(v, "store into input buffer ", kernel->buffers[s->buffer]->name, NULL);
        if (v->status == STAX_OK && v->vector_loop >= 0 &&
            stax_kir_index_coefficient(s->index, v->vector_loop) == 0)
          fail(v, "store into ", kernel->buffers[s->buffer]->name,
               " does not move with the vector lanes");
        break;
      case STAX_KIR_STMT_DECLARE:
        check_expr(v, s->value);
        if (v->local_depth[s->local] >= 0)
          fail(v, "local '", kernel->locals[s->local]->name, "' declared twice");
        v->local_depth[s->local] = v->depth;
        break;
      case STAX_KIR_STMT_ASSIGN:
      case STAX_KIR_STMT_REDUCE: {
        check_expr(v, s->value);
        int32_t depth = v->local_depth[s->local];
        if (depth < 0) {
          fail(v, "update of local '", kernel->locals[s->local]->name, "' outside its scope");
        } else if (s->kind == STAX_KIR_STMT_ASSIGN && v->vector_loop >= 0 &&
                   depth < v->vector_depth) {
          fail(v, "local '", kernel->locals[s->local]->name,
               "' from outside a vector loop is assigned inside it (only REDUCE may)");
        }
        break;
      }
    }
  }
  /* Locals declared in this block go out of scope. */
  for (int32_t l = 0; l < kernel->local_count; l++)
    if (v->local_depth[l] == v->depth) v->local_depth[l] = -1;
  v->depth--;
}

/* One walk over every stage at row count `rows` (-1: the kernel's own extents). */
static stax_status_t verify_walk(verifier_t* v, int64_t rows) {
  const stax_kir_kernel_t* kernel = v->kernel;
  size_t loops = (size_t)kernel->loop_count + 1, locals = (size_t)kernel->local_count + 1;
  memset(v->loop_seen, 0, loops * sizeof(bool));
  memset(v->loop_open, 0, loops * sizeof(bool));
  memset(v->reduced_here, 0, locals * sizeof(bool));
  for (size_t l = 0; l < locals; l++) v->local_depth[l] = -1;
  v->depth = 0;
  v->dead = 0;
  v->vector_loop = -1;
  v->access = 0;
  v->rows = rows;
  if (!kernel->symbolic) {
    v->params_set = rows >= 0;
    for (int32_t p = 0; p < kernel->param_count && rows >= 0; p++)
      v->params[p] = stax_kir_param_value(&kernel->params[p], rows);
  }
  if (v->margins)
    for (int64_t a = 0; a < 2 * v->access_count; a++) v->margins[a] = INT64_MIN;
  for (int32_t s = 0; s < kernel->stage_count && v->status == STAX_OK; s++) {
    const stax_kir_stage_t* stage = kernel->stages[s];
    v->stage_name = stage->name;
    v->inactive = rows >= 0 && (rows < stage->run_min_rows || rows > stage->run_max_rows);
    for (int32_t c = 0; c < 2 && kernel->symbolic; c++) {
      int32_t p = stage->when_param[c];
      if (p >= kernel->param_count) {
        v->status = stax_status_make(STAX_INTERNAL, "kernel IR '%s', stage '%s': condition on "
                                     "an unknown parameter", kernel->name, stage->name);
        break;
      }
      if (p >= 0 && (v->params[p] < stage->when_min[c] || v->params[p] > stage->when_max[c]))
        v->inactive = true;
    }
    check_block(v, &stage->body, true);
  }
  v->inactive = false;
  stax_status_t status = v->status;
  v->status = STAX_OK;
  return status;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Periods longer than this are refused: the proof walks the kernel 4 x period times. */
#define MAX_PERIOD 1024

/* A rows-generic kernel's accesses, proven in bounds for every R in [rows_min, rows_max]:
 * every parameter is quasi-linear in R with a period P (the lcm of the divisors), so for R
 * in one residue class mod P each access's margins to its buffer's ends move by the same
 * amount every period. The walks at R = rows_min + j + k*P, k = 0..3, check every access
 * in bounds, and that from k = 2 to k = 3 no margin shrinks: then none ever does (k = 0, 1
 * are checked on their own, before extents that start at zero have become positive). A walk
 * at rows_max checks the arithmetic does not overflow there. */
static stax_status_t verify_rows_generic(verifier_t* v) {
  const stax_kir_kernel_t* kernel = v->kernel;
  int64_t period = 1;
  for (int32_t p = 0; p < kernel->param_count; p++)
    for (int32_t t = 0; t < STAX_KIR_PARAM_TERMS; t++) {
      int64_t d = kernel->params[p].div[t];
      if (d <= 0) continue;
      period = period / gcd64(period, d) * d;
      if (period > MAX_PERIOD)
        return stax_status_make(STAX_INTERNAL, "kernel IR '%s': parameter period over %d",
                                kernel->name, MAX_PERIOD);
    }
  for (int32_t b = 0; b < kernel->buffer_count; b++)
    if (kernel->buffers[b]->rows && kernel->buffers[b]->role == STAX_KIR_BUFFER_SCRATCH)
      return stax_status_make(STAX_INTERNAL, "kernel IR '%s': scratch buffer %s has rows",
                              kernel->name, kernel->buffers[b]->name);
  if (kernel->rows_min > kernel->rows_max)
    return stax_status_make(STAX_INTERNAL, "kernel IR '%s': no row count to run at",
                            kernel->name);
  /* Stage run conditions must switch below the walks that check margins (k = 2, 3). */
  int64_t settled = kernel->rows_min + 2 * period;
  for (int32_t s = 0; s < kernel->stage_count; s++) {
    const stax_kir_stage_t* stage = kernel->stages[s];
    if (stage->run_min_rows > settled ||
        (stage->run_max_rows != INT64_MAX && stage->run_max_rows >= settled))
      return stax_status_make(STAX_INTERNAL,
                              "kernel IR '%s', stage '%s': runs for rows %lld..%lld, which the "
                              "proof cannot cover (below %lld)",
                              kernel->name, stage->name, (long long)stage->run_min_rows,
                              (long long)stage->run_max_rows, (long long)settled);
  }
  STAX_RETURN_IF_ERROR(verify_walk(v, kernel->rows_example));
  int64_t count = v->access;
  stax_allocator_t a = kernel->allocator;
  int64_t* margins = NULL;
  size_t bytes = sizeof(int64_t) * 2 * (size_t)(count + 1) * 2;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(a, bytes, (void**)&margins));
  int64_t* earlier = margins + 2 * (count + 1);
  stax_status_t status = STAX_OK;
  v->access_count = count;
  for (int64_t j = 0; j < period && status == STAX_OK; j++) {
    for (int64_t k = 0; k < 4 && status == STAX_OK; k++) {
      int64_t rows = kernel->rows_min + j + k * period;
      if (rows > kernel->rows_max) break;
      v->margins = k == 2 ? earlier : k == 3 ? margins : NULL;
      v->previous = k == 3 ? earlier : NULL;
      status = verify_walk(v, rows);
    }
  }
  v->margins = NULL;
  v->previous = NULL;
  if (status == STAX_OK) status = verify_walk(v, kernel->rows_max);
  stax_allocator_free(a, margins, bytes);
  return status;
}

static stax_status_t verify_with(const stax_kir_kernel_t* kernel, const int64_t* values);

stax_status_t stax_kir_verify(const stax_kir_kernel_t* kernel) {
  if (kernel->symbolic) {
    int64_t values[STAX_KIR_MAX_PARAMS];
    if (!stax_kir_params_example(kernel, values))
      return stax_status_make(STAX_INTERNAL, "kernel IR '%s': parameters do not evaluate at "
                              "the example", kernel->name);
    return verify_with(kernel, values);
  }
  return verify_with(kernel, NULL);
}

stax_status_t stax_kir_verify_params(const stax_kir_kernel_t* kernel, const int64_t* values) {
  if (!kernel->symbolic)
    return stax_status_make(STAX_INTERNAL, "kernel IR '%s' is not symbolic", kernel->name);
  return verify_with(kernel, values);
}

/* values: a symbolic kernel's parameter values to check at (NULL for other kernels). */
static stax_status_t verify_with(const stax_kir_kernel_t* kernel, const int64_t* values) {
  STAX_RETURN_IF_ERROR(stax_kir_kernel_status(kernel));
  verifier_t v;
  memset(&v, 0, sizeof(v));
  v.kernel = kernel;
  v.vector_loop = -1;
  v.rows = -1;
  if (kernel->symbolic) {
    memcpy(v.params, values, sizeof(int64_t) * (size_t)kernel->param_count);
    v.params_set = true;
  }
  size_t loops = (size_t)kernel->loop_count + 1, locals = (size_t)kernel->local_count + 1;
  size_t exprs = (size_t)kernel->expr_count + 1;
  stax_allocator_t a = kernel->allocator;
  stax_status_t status = STAX_OK;
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(a, loops, sizeof(bool), (void**)&v.loop_seen),
                     cleanup);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(a, loops, sizeof(bool), (void**)&v.loop_open),
                     cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(a, locals, sizeof(int32_t), (void**)&v.local_depth), cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(a, locals, sizeof(bool), (void**)&v.reduced_here), cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(a, exprs, sizeof(uint32_t), (void**)&v.expr_stamp), cleanup);
  status = kernel->rows_generic ? verify_rows_generic(&v) : verify_walk(&v, -1);
cleanup:
  stax_allocator_free(a, v.loop_seen, loops * sizeof(bool));
  stax_allocator_free(a, v.loop_open, loops * sizeof(bool));
  stax_allocator_free(a, v.local_depth, locals * sizeof(int32_t));
  stax_allocator_free(a, v.reduced_here, locals * sizeof(bool));
  stax_allocator_free(a, v.expr_stamp, exprs * sizeof(uint32_t));
  return status;
}
