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
  stax_status_t status;
} verifier_t;

static void fail(verifier_t* v, const char* fmt, const char* a, const char* b) {
  if (v->status != STAX_OK) return;
  v->status = stax_status_make(STAX_INTERNAL, "kernel IR '%s', stage '%s': %s%s%s", v->kernel->name,
                               v->stage_name ? v->stage_name : "?", fmt, a ? a : "", b ? b : "");
}

/* Lowest and highest value of an index over the counters' ranges. False when some enclosing
 * loop has extent 0 (the access never happens) or the arithmetic overflows. */
static bool index_range(const stax_kir_kernel_t* kernel, const stax_kir_index_t* index,
                        bool* out_overflow, int64_t* out_low, int64_t* out_high) {
  *out_overflow = false;
  int64_t low = index->constant, high = index->constant;
  for (int32_t t = 0; t < index->term_count; t++) {
    int64_t extent = kernel->loops[index->loops[t]]->extent;
    if (extent == 0) return false;
    int64_t reach = 0;
    if (__builtin_mul_overflow(index->coefficients[t], extent - 1, &reach)) {
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
  for (int32_t t = 0; t < index->term_count; t++) {
    int32_t loop = index->loops[t];
    if (loop < 0 || loop >= kernel->loop_count || !v->loop_open[loop]) {
      fail(v, what, " indexes by a loop that does not enclose it: buffer ",
           kernel->buffers[buffer]->name);
      return;
    }
  }
  bool overflow = false;
  int64_t low = 0, high = 0;
  if (!index_range(kernel, index, &overflow, &low, &high)) {
    if (overflow) fail(v, what, " index overflows: buffer ", kernel->buffers[buffer]->name);
    return;
  }
  const stax_kir_buffer_t* b = kernel->buffers[buffer];
  if (low < b->lowest || high > b->highest) {
    if (v->status != STAX_OK) return;
    v->status = stax_status_make(
        STAX_INTERNAL,
        "kernel IR '%s', stage '%s': %s out of bounds of buffer %s (reaches %lld..%lld, "
        "buffer spans %lld..%lld)",
        kernel->name, v->stage_name ? v->stage_name : "?", what, b->name, (long long)low,
        (long long)high, (long long)b->lowest, (long long)b->highest);
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
  v->loop_open[id] = true;
  check_block(v, &loop->body, false);
  v->loop_open[id] = false;
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

stax_status_t stax_kir_verify(const stax_kir_kernel_t* kernel) {
  STAX_RETURN_IF_ERROR(stax_kir_kernel_status(kernel));
  verifier_t v;
  memset(&v, 0, sizeof(v));
  v.kernel = kernel;
  v.vector_loop = -1;
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
  for (size_t l = 0; l < locals; l++) v.local_depth[l] = -1;
  for (int32_t s = 0; s < kernel->stage_count && v.status == STAX_OK; s++) {
    v.stage_name = kernel->stages[s]->name;
    check_block(&v, &kernel->stages[s]->body, true);
  }
  status = v.status;
cleanup:
  stax_allocator_free(a, v.loop_seen, loops * sizeof(bool));
  stax_allocator_free(a, v.loop_open, loops * sizeof(bool));
  stax_allocator_free(a, v.local_depth, locals * sizeof(int32_t));
  stax_allocator_free(a, v.reduced_here, locals * sizeof(bool));
  stax_allocator_free(a, v.expr_stamp, exprs * sizeof(uint32_t));
  return status;
}
