/* Symbolic dims, part 1: the shape context (its arena, error slot and hash-consing table), the
 * symbol table, interning of canonical nodes and the total order that makes forms canonical
 * (canonical form: src/ir/dim_internal.h). The algebra lives in dim_algebra.c; bounds,
 * evaluation and the printed text form ("3*B*S + 1", "floor((H + 1)/2) - 1", documented there)
 * in dim_eval.c; equalities in dim_unify.c; run-time guards in dim_guards.c. */
#include <stdio.h>
#include <string.h>

#include "ir/dim_internal.h"

/* ---- context ----------------------------------------------------------------------------- */

stax_status_t stax_shape_ctx_create(stax_allocator_t allocator, stax_shape_ctx_t** out_ctx) {
  if (!out_ctx) return stax_status_make(STAX_INVALID_ARGUMENT, "out_ctx must not be NULL");
  *out_ctx = NULL;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(allocator, 1, sizeof(stax_shape_ctx_t), &memory),
                       "while creating a shape context");
  stax_shape_ctx_t* ctx = memory;
  ctx->allocator = allocator;
  stax_arena_init(&ctx->arena, allocator, 0);
  stax_status_t status = STAX_OK;
  STAX_GOTO_IF_ERROR(status,
                     stax_hash_map_create(allocator, STAX_HASH_KEY_U64, &ctx->intern_table),
                     cleanup, "while creating a shape context");
  STAX_GOTO_IF_ERROR(status,
                     stax_hash_map_create(allocator, STAX_HASH_KEY_STRING, &ctx->symbol_names),
                     cleanup, "while creating a shape context");
  *out_ctx = ctx;
  return STAX_OK;
cleanup:
  stax_shape_ctx_destroy(ctx);
  return status;
}

void stax_shape_ctx_destroy(stax_shape_ctx_t* ctx) {
  if (!ctx) return;
  stax_status_free(ctx->error);
  stax_hash_map_destroy(ctx->intern_table);
  stax_hash_map_destroy(ctx->symbol_names);
  if (ctx->undo) {
    stax_allocator_free(ctx->allocator, ctx->undo,
                        ctx->undo_capacity * sizeof(stax_shape_undo_t));
  }
  if (ctx->symbols) {
    stax_allocator_free(ctx->allocator, ctx->symbols,
                        (size_t)ctx->symbol_capacity * sizeof(stax_symbol_info_t));
  }
  stax_arena_deinit(&ctx->arena);
  stax_allocator_t allocator = ctx->allocator;
  stax_allocator_free(allocator, ctx, sizeof(*ctx));
}

stax_status_t stax_shape_ctx_take_error(stax_shape_ctx_t* ctx) {
  if (!ctx) return STAX_OK;
  stax_status_t error = ctx->error;
  ctx->error = STAX_OK;
  return error;
}

void stax_shape_ctx_set_error(stax_shape_ctx_t* ctx, stax_status_t status) {
  if (status == STAX_OK) return;
  if (ctx->error == STAX_OK) {
    ctx->error = status;
  } else {
    stax_status_free(status); /* the first error is the one that explains the rest */
  }
}

void stax_shape_ctx_fail(stax_shape_ctx_t* ctx, stax_status_code_t code, const char* fmt, ...) {
  if (ctx->error != STAX_OK) return;
  va_list args;
  va_start(args, fmt);
  ctx->error = stax_status_makev(code, fmt, args);
  va_end(args);
}

const stax_dim_t* stax_dim_overflow(stax_shape_ctx_t* ctx) {
  stax_shape_ctx_fail(ctx, STAX_INVALID_ARGUMENT, "dim expression overflows int64");
  return NULL;
}

const char* stax_format_range(int64_t min, int64_t max, char* buf, size_t size) {
  if (max == STAX_DIM_MAX) {
    snprintf(buf, size, "[%lld, inf)", (long long)min);
  } else {
    snprintf(buf, size, "[%lld, %lld]", (long long)min, (long long)max);
  }
  return buf;
}

/* ---- checkpoints and the undo log ------------------------------------------------------- */

/* A log that outgrew this many entries is freed when the outermost checkpoint ends, so one
 * unusually large transaction does not pin its memory for the context's lifetime. */
#define STAX_SHAPE_UNDO_KEEP 1024

static stax_status_t stax_shape_undo_reserve(stax_shape_ctx_t* ctx) {
  if (ctx->undo_count < ctx->undo_capacity) return STAX_OK;
  /* undo_capacity already fits SIZE_MAX / sizeof(entry), so doubling it cannot wrap */
  size_t capacity = ctx->undo_capacity ? ctx->undo_capacity * 2 : 32;
  if (capacity > SIZE_MAX / sizeof(stax_shape_undo_t)) {
    return stax_status_make(STAX_OUT_OF_MEMORY, "shape context undo log is too large");
  }
  void* memory = ctx->undo;
  STAX_RETURN_IF_ERROR(
      stax_allocator_realloc(ctx->allocator, ctx->undo_capacity * sizeof(stax_shape_undo_t),
                             capacity * sizeof(stax_shape_undo_t), &memory),
      "while recording a change to the shape context");
  ctx->undo = memory;
  ctx->undo_capacity = capacity;
  return STAX_OK;
}

/* Appends `entry` when a checkpoint is outstanding; the caller writes only after success. */
static stax_status_t stax_shape_undo_push(stax_shape_ctx_t* ctx,
                                          const stax_shape_undo_t* entry) {
  if (ctx->checkpoint_depth == 0) return STAX_OK;
  STAX_RETURN_IF_ERROR(stax_shape_undo_reserve(ctx));
  ctx->undo[ctx->undo_count++] = *entry;
  return STAX_OK;
}

stax_status_t stax_shape_set_parent(stax_shape_ctx_t* ctx, stax_dim_t* node,
                                    stax_dim_t* parent) {
  if (node->class_parent == parent) return STAX_OK;
  stax_shape_undo_t entry = {
      .kind = STAX_SHAPE_UNDO_PARENT, .node = node, .old_parent = node->class_parent};
  STAX_RETURN_IF_ERROR(stax_shape_undo_push(ctx, &entry));
  node->class_parent = parent;
  return STAX_OK;
}

bool stax_shape_try_set_parent(stax_shape_ctx_t* ctx, stax_dim_t* node, stax_dim_t* parent) {
  stax_status_t status = stax_shape_set_parent(ctx, node, parent);
  if (status == STAX_OK) return true;
  stax_status_free(status); /* an optional change: the caller simply skips it */
  return false;
}

stax_status_t stax_shape_set_range(stax_shape_ctx_t* ctx, stax_symbol_id_t id, int64_t min,
                                   int64_t max) {
  stax_symbol_info_t* info = &ctx->symbols[id];
  if (info->min == min && info->max == max) return STAX_OK;
  stax_shape_undo_t entry = {.kind = STAX_SHAPE_UNDO_RANGE,
                             .symbol = id,
                             .old_min = info->min,
                             .old_max = info->max};
  STAX_RETURN_IF_ERROR(stax_shape_undo_push(ctx, &entry));
  info->min = min;
  info->max = max;
  return STAX_OK;
}

stax_status_t stax_shape_set_origin(stax_shape_ctx_t* ctx, stax_dim_t* node,
                                    const char* origin) {
  stax_shape_undo_t entry = {
      .kind = STAX_SHAPE_UNDO_ORIGIN, .node = node, .old_origin = node->origin};
  STAX_RETURN_IF_ERROR(stax_shape_undo_push(ctx, &entry));
  node->origin = origin;
  return STAX_OK;
}

void stax_shape_undo_to(stax_shape_ctx_t* ctx, size_t length) {
  while (ctx->undo_count > length) {
    const stax_shape_undo_t* entry = &ctx->undo[--ctx->undo_count];
    switch (entry->kind) {
      case STAX_SHAPE_UNDO_PARENT:
        entry->node->class_parent = entry->old_parent;
        break;
      case STAX_SHAPE_UNDO_RANGE:
        /* A symbol created after the entry's checkpoint may already be gone; its slot is still
         * inside the array (capacity never shrinks), and rollback drops it anyway. */
        ctx->symbols[entry->symbol].min = entry->old_min;
        ctx->symbols[entry->symbol].max = entry->old_max;
        break;
      case STAX_SHAPE_UNDO_ORIGIN:
        entry->node->origin = entry->old_origin;
        break;
    }
  }
}

stax_shape_checkpoint_t stax_shape_ctx_checkpoint(stax_shape_ctx_t* ctx) {
  stax_shape_checkpoint_t checkpoint = {0, 0, 0, 0};
  if (!ctx || ctx->checkpoint_depth == INT32_MAX) return checkpoint;
  checkpoint.depth = ++ctx->checkpoint_depth;
  checkpoint.symbol_count = ctx->symbol_count;
  checkpoint.fresh_counter = ctx->fresh_counter;
  checkpoint.undo_length = ctx->undo_count;
  return checkpoint;
}

/* A checkpoint that was already ended (or ended by ending an outer one) no longer describes
 * the context; ending it again must not touch anything. Detects every misuse except reusing a
 * checkpoint after a newer one took its depth, which the nesting rule forbids. */
static bool stax_shape_checkpoint_live(const stax_shape_ctx_t* ctx,
                                       const stax_shape_checkpoint_t* checkpoint) {
  return checkpoint->depth >= 1 && checkpoint->depth <= ctx->checkpoint_depth &&
         checkpoint->undo_length <= ctx->undo_count &&
         checkpoint->symbol_count <= ctx->symbol_count;
}

static void stax_shape_checkpoint_end(stax_shape_ctx_t* ctx, int32_t depth) {
  ctx->checkpoint_depth = depth - 1;
  if (ctx->checkpoint_depth > 0) return;
  /* Nothing can be rolled back any more: forget the log. */
  ctx->undo_count = 0;
  if (ctx->undo_capacity > STAX_SHAPE_UNDO_KEEP) {
    stax_allocator_free(ctx->allocator, ctx->undo,
                        ctx->undo_capacity * sizeof(stax_shape_undo_t));
    ctx->undo = NULL;
    ctx->undo_capacity = 0;
  }
}

void stax_shape_ctx_rollback(stax_shape_ctx_t* ctx, stax_shape_checkpoint_t checkpoint) {
  if (!ctx || !stax_shape_checkpoint_live(ctx, &checkpoint)) return;
  /* Links and ranges first: entries may name symbols that are about to be dropped. */
  stax_shape_undo_to(ctx, checkpoint.undo_length);
  while (ctx->symbol_count > checkpoint.symbol_count) {
    stax_symbol_id_t id = --ctx->symbol_count;
    (void)stax_hash_map_remove_string(ctx->symbol_names, ctx->symbols[id].name);
    /* The symbol's node stays interned; a later symbol with this id reuses it, which is
     * correct because the node carries nothing but the id (its links were just undone). */
    memset(&ctx->symbols[id], 0, sizeof(ctx->symbols[id]));
  }
  ctx->fresh_counter = checkpoint.fresh_counter;
  stax_shape_checkpoint_end(ctx, checkpoint.depth);
}

void stax_shape_ctx_commit(stax_shape_ctx_t* ctx, stax_shape_checkpoint_t checkpoint) {
  if (!ctx || !stax_shape_checkpoint_live(ctx, &checkpoint)) return;
  stax_shape_checkpoint_end(ctx, checkpoint.depth);
}

/* ---- interning --------------------------------------------------------------------------- */

static uint64_t stax_dim_structural_hash(const stax_dim_t* d) {
  uint64_t h = stax_hash_u64((uint64_t)d->kind + 1);
  h = stax_hash_combine(h, stax_hash_u64((uint64_t)d->value));
  switch (d->kind) {
    case STAX_DIM_KIND_FLOORDIV:
    case STAX_DIM_KIND_CEILDIV:
    case STAX_DIM_KIND_MIN:
    case STAX_DIM_KIND_MAX:
    case STAX_DIM_KIND_BCAST:
      h = stax_hash_combine(h, d->left->hash);
      h = stax_hash_combine(h, d->right->hash);
      break;
    case STAX_DIM_KIND_PRODUCT:
      for (int32_t i = 0; i < d->count; i++) {
        h = stax_hash_combine(h, d->factors[i].atom->hash);
        h = stax_hash_combine(h, stax_hash_u64((uint64_t)d->factors[i].exponent));
      }
      break;
    case STAX_DIM_KIND_SUM:
      for (int32_t i = 0; i < d->count; i++) {
        h = stax_hash_combine(h, d->terms[i].monomial->hash);
        h = stax_hash_combine(h, stax_hash_u64((uint64_t)d->terms[i].coefficient));
      }
      break;
    default:
      break;
  }
  return h;
}

/* Children are interned, so comparing them by pointer is structural comparison. */
static bool stax_dim_same_node(const stax_dim_t* a, const stax_dim_t* b) {
  if (a->kind != b->kind || a->value != b->value || a->count != b->count) return false;
  if (a->left != b->left || a->right != b->right) return false;
  for (int32_t i = 0; i < a->count; i++) {
    if (a->kind == STAX_DIM_KIND_PRODUCT) {
      if (a->factors[i].atom != b->factors[i].atom ||
          a->factors[i].exponent != b->factors[i].exponent)
        return false;
    } else if (a->terms[i].monomial != b->terms[i].monomial ||
               a->terms[i].coefficient != b->terms[i].coefficient) {
      return false;
    }
  }
  return true;
}

static const stax_dim_t* stax_dim_oom(stax_shape_ctx_t* ctx, stax_status_t status) {
  stax_shape_ctx_set_error(ctx, stax_status_annotate(status, "while building a dim expression"));
  return NULL;
}

const stax_dim_t* stax_dim_intern(stax_shape_ctx_t* ctx, const stax_dim_t* prototype) {
  uint64_t hash = stax_dim_structural_hash(prototype);
  uintptr_t head = 0;
  (void)stax_hash_map_get_u64(ctx->intern_table, hash, &head);
  for (stax_dim_t* node = (stax_dim_t*)head; node; node = node->hash_next) {
    if (node->hash == hash && stax_dim_same_node(node, prototype)) return node;
  }
  void* memory = NULL;
  stax_status_t status =
      stax_arena_alloc(&ctx->arena, sizeof(stax_dim_t), _Alignof(stax_dim_t), &memory);
  if (status) return stax_dim_oom(ctx, status);
  stax_dim_t* node = memory;
  *node = *prototype;
  node->hash = hash;
  node->hash_next = (stax_dim_t*)head;
  node->class_parent = NULL;
  node->origin = NULL;
  if (prototype->kind == STAX_DIM_KIND_PRODUCT) {
    status = stax_arena_memdup(&ctx->arena, prototype->factors,
                               (size_t)prototype->count * sizeof(stax_dim_factor_t), &memory);
    if (status) return stax_dim_oom(ctx, status);
    node->factors = memory;
  } else if (prototype->kind == STAX_DIM_KIND_SUM) {
    status = stax_arena_memdup(&ctx->arena, prototype->terms,
                               (size_t)prototype->count * sizeof(stax_dim_term_t), &memory);
    if (status) return stax_dim_oom(ctx, status);
    node->terms = memory;
  }
  status = stax_hash_map_put_u64(ctx->intern_table, hash, (uintptr_t)node);
  if (status) return stax_dim_oom(ctx, status);
  return node;
}

const stax_dim_t* stax_dim_const(stax_shape_ctx_t* ctx, int64_t value) {
  if (!ctx) return NULL;
  bool small = value >= STAX_DIM_SMALL_CONST_MIN && value <= STAX_DIM_SMALL_CONST_MAX;
  size_t slot = small ? (size_t)(value - STAX_DIM_SMALL_CONST_MIN) : 0;
  if (small && ctx->small_constants[slot]) return ctx->small_constants[slot];
  stax_dim_t prototype = {.kind = STAX_DIM_KIND_CONST, .value = value};
  const stax_dim_t* node = stax_dim_intern(ctx, &prototype);
  if (small) ctx->small_constants[slot] = node;
  return node;
}

/* ---- ordering ---------------------------------------------------------------------------- */

static int stax_compare_i64(int64_t a, int64_t b) { return a < b ? -1 : (a > b ? 1 : 0); }

int stax_dim_compare(const stax_dim_t* a, const stax_dim_t* b) {
  if (a == b) return 0;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  int c = 0;
  switch (a->kind) {
    case STAX_DIM_KIND_CONST:
    case STAX_DIM_KIND_SYMBOL:
      return stax_compare_i64(a->value, b->value);
    case STAX_DIM_KIND_FLOORDIV:
    case STAX_DIM_KIND_CEILDIV:
    case STAX_DIM_KIND_MIN:
    case STAX_DIM_KIND_MAX:
    case STAX_DIM_KIND_BCAST:
      c = stax_dim_compare(a->left, b->left);
      return c ? c : stax_dim_compare(a->right, b->right);
    case STAX_DIM_KIND_PRODUCT:
      for (int32_t i = 0; i < a->count && i < b->count; i++) {
        c = stax_dim_compare(a->factors[i].atom, b->factors[i].atom);
        if (c) return c;
        /* S^2 before S, like the degree-first order of terms */
        c = stax_compare_i64(b->factors[i].exponent, a->factors[i].exponent);
        if (c) return c;
      }
      return stax_compare_i64(a->count, b->count);
    case STAX_DIM_KIND_SUM:
      for (int32_t i = 0; i < a->count && i < b->count; i++) {
        c = stax_dim_monomial_order(a->terms[i].monomial, b->terms[i].monomial);
        if (c) return c;
        c = stax_compare_i64(a->terms[i].coefficient, b->terms[i].coefficient);
        if (c) return c;
      }
      c = stax_compare_i64(a->count, b->count);
      return c ? c : stax_compare_i64(a->value, b->value);
  }
  return 0;
}

int stax_dim_monomial_order(const stax_dim_t* a, const stax_dim_t* b) {
  if (a->degree != b->degree) return a->degree > b->degree ? -1 : 1;
  return stax_dim_compare(a, b);
}

bool stax_dim_is_atom(const stax_dim_t* d) {
  return d->kind >= STAX_DIM_KIND_SYMBOL && d->kind <= STAX_DIM_KIND_BCAST;
}

/* ---- symbols ----------------------------------------------------------------------------- */

static stax_status_t stax_symbol_check_range(const char* name, int64_t min, int64_t max) {
  if (min > max) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "symbol '%s': empty range [%lld, %lld]",
                            name, (long long)min, (long long)max);
  }
  return STAX_OK;
}

/* Registers a new symbol; `name` must not be in use. */
static stax_status_t stax_symbol_add(stax_shape_ctx_t* ctx, const char* name, int64_t min,
                                     int64_t max, const char* origin,
                                     const stax_dim_t** out_dim) {
  if (ctx->symbol_count == INT32_MAX) {
    return stax_status_make(STAX_OUT_OF_RANGE, "too many symbols");
  }
  if (ctx->symbol_count == ctx->symbol_capacity) {
    int32_t capacity = ctx->symbol_capacity ? ctx->symbol_capacity : 8;
    capacity = capacity > INT32_MAX / 2 ? INT32_MAX : capacity * 2;
    void* memory = ctx->symbols;
    STAX_RETURN_IF_ERROR(
        stax_allocator_realloc(ctx->allocator,
                               (size_t)ctx->symbol_capacity * sizeof(stax_symbol_info_t),
                               (size_t)capacity * sizeof(stax_symbol_info_t), &memory),
        "while adding symbol '%s'", name);
    ctx->symbols = memory;
    ctx->symbol_capacity = capacity;
  }
  stax_symbol_info_t info = {.min = min, .max = max};
  STAX_RETURN_IF_ERROR(stax_arena_strdup(&ctx->arena, name, &info.name),
                       "while adding symbol '%s'", name);
  STAX_RETURN_IF_ERROR(stax_arena_strdup(&ctx->arena, origin, &info.origin),
                       "while adding symbol '%s'", name);
  stax_symbol_id_t id = ctx->symbol_count;
  stax_dim_t prototype = {.kind = STAX_DIM_KIND_SYMBOL, .degree = 1, .value = id};
  info.dim = stax_dim_intern(ctx, &prototype);
  if (!info.dim) return stax_shape_ctx_take_error(ctx);
  STAX_RETURN_IF_ERROR(stax_hash_map_put_string(ctx->symbol_names, name, (uintptr_t)id),
                       "while adding symbol '%s'", name);
  ctx->symbols[id] = info;
  ctx->symbol_count++;
  *out_dim = info.dim;
  return STAX_OK;
}

stax_status_t stax_symbol_get(stax_shape_ctx_t* ctx, const char* name, int64_t min,
                              int64_t max, const stax_dim_t** out_dim) {
  if (!out_dim) return stax_status_make(STAX_INVALID_ARGUMENT, "out_dim must not be NULL");
  *out_dim = NULL;
  if (!ctx) return stax_status_make(STAX_INVALID_ARGUMENT, "shape context must not be NULL");
  if (!name || !name[0]) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "a symbol name must not be empty");
  }
  STAX_RETURN_IF_ERROR(stax_symbol_check_range(name, min, max));
  uintptr_t id = 0;
  if (!stax_hash_map_get_string(ctx->symbol_names, name, &id)) {
    return stax_symbol_add(ctx, name, min, max, NULL, out_dim);
  }
  STAX_RETURN_IF_ERROR(stax_symbol_narrow(ctx, (stax_symbol_id_t)id, min, max));
  *out_dim = ctx->symbols[id].dim;
  return STAX_OK;
}

stax_status_t stax_symbol_fresh(stax_shape_ctx_t* ctx, const char* prefix, int64_t min,
                                int64_t max, const char* origin, const stax_dim_t** out_dim) {
  if (!out_dim) return stax_status_make(STAX_INVALID_ARGUMENT, "out_dim must not be NULL");
  *out_dim = NULL;
  if (!ctx) return stax_status_make(STAX_INVALID_ARGUMENT, "shape context must not be NULL");
  if (!prefix || !prefix[0]) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "a symbol prefix must not be empty");
  }
  STAX_RETURN_IF_ERROR(stax_symbol_check_range(prefix, min, max));
  size_t size = strlen(prefix) + 24; /* "_" + up to 20 digits + NUL */
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(ctx->allocator, size, &memory),
                       "while creating a symbol named after '%s'", prefix);
  char* name = memory;
  /* A user may already have taken "prefix_N" by hand; skip such names. */
  do {
    snprintf(name, size, "%s_%llu", prefix, (unsigned long long)ctx->fresh_counter++);
  } while (stax_hash_map_get_string(ctx->symbol_names, name, NULL));
  stax_status_t status = stax_symbol_add(ctx, name, min, max, origin, out_dim);
  stax_allocator_free(ctx->allocator, memory, size);
  return status;
}

int32_t stax_shape_ctx_symbol_count(const stax_shape_ctx_t* ctx) {
  return ctx ? ctx->symbol_count : 0;
}

const char* stax_symbol_name(const stax_shape_ctx_t* ctx, stax_symbol_id_t id) {
  if (!ctx || id < 0 || id >= ctx->symbol_count) return NULL;
  return ctx->symbols[id].name;
}

void stax_symbol_range(const stax_shape_ctx_t* ctx, stax_symbol_id_t id, int64_t* out_min,
                       int64_t* out_max) {
  int64_t min = 0, max = STAX_DIM_MAX;
  if (ctx && id >= 0 && id < ctx->symbol_count) {
    min = ctx->symbols[id].min;
    max = ctx->symbols[id].max;
  }
  if (out_min) *out_min = min;
  if (out_max) *out_max = max;
}

const stax_dim_t* stax_symbol_dim(stax_shape_ctx_t* ctx, stax_symbol_id_t id) {
  if (!ctx) return NULL;
  if (id < 0 || id >= ctx->symbol_count) {
    stax_shape_ctx_fail(ctx, STAX_INVALID_ARGUMENT, "no symbol with id %d", (int)id);
    return NULL;
  }
  return ctx->symbols[id].dim;
}

stax_status_t stax_symbol_narrow(stax_shape_ctx_t* ctx, stax_symbol_id_t id, int64_t min,
                                 int64_t max) {
  stax_symbol_info_t* info = &ctx->symbols[id];
  int64_t new_min = info->min > min ? info->min : min;
  int64_t new_max = info->max < max ? info->max : max;
  bool empty = new_min > new_max;
  /* All members of a class are equal, so the class's symbol representative (the one guards
   * bind and range-check) must obey every member's range; a constant representative must lie
   * inside it. */
  const stax_dim_t* root = stax_dim_class_root(info->dim);
  stax_symbol_id_t root_id = -1;
  int64_t root_min = 0, root_max = 0;
  if (root->kind == STAX_DIM_KIND_SYMBOL && root != info->dim) {
    root_id = (stax_symbol_id_t)root->value;
    const stax_symbol_info_t* root_info = &ctx->symbols[root_id];
    root_min = root_info->min > min ? root_info->min : min;
    root_max = root_info->max < max ? root_info->max : max;
    empty |= root_min > root_max;
  } else if (root->kind == STAX_DIM_KIND_CONST) {
    empty |= root->value < min || root->value > max;
  }
  if (empty) {
    char old_range[64], new_range[64];
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "symbol '%s' has range %s, which does not intersect %s", info->name,
                            stax_format_range(info->min, info->max, old_range, sizeof(old_range)),
                            stax_format_range(min, max, new_range, sizeof(new_range)));
  }
  /* Two logged writes: undo the first if the second cannot be recorded. */
  size_t mark = stax_shape_undo_mark(ctx);
  STAX_RETURN_IF_ERROR(stax_shape_set_range(ctx, id, new_min, new_max),
                       "while narrowing symbol '%s'", info->name);
  if (root_id >= 0) {
    stax_status_t status = stax_shape_set_range(ctx, root_id, root_min, root_max);
    if (status != STAX_OK) {
      stax_shape_undo_to(ctx, mark);
      return stax_status_annotate(status, "while narrowing symbol '%s'", info->name);
    }
  }
  return STAX_OK;
}

/* ---- queries ----------------------------------------------------------------------------- */

bool stax_dim_is_const(const stax_dim_t* d) { return d && d->kind == STAX_DIM_KIND_CONST; }

int64_t stax_dim_const_value(const stax_dim_t* d) {
  return stax_dim_is_const(d) ? d->value : 0;
}

bool stax_dim_as_symbol(const stax_dim_t* d, stax_symbol_id_t* out_id) {
  if (out_id) *out_id = -1;
  if (!d || d->kind != STAX_DIM_KIND_SYMBOL) return false;
  if (out_id) *out_id = (stax_symbol_id_t)d->value;
  return true;
}

/* Calls visit(id) for every symbol occurrence in depth-first order; stops when it returns
 * false. */
typedef bool (*stax_symbol_visit_fn)(void* state, stax_symbol_id_t id);

static bool stax_dim_walk_symbols(const stax_dim_t* d, stax_symbol_visit_fn visit, void* state) {
  switch (d->kind) {
    case STAX_DIM_KIND_CONST:
      return true;
    case STAX_DIM_KIND_SYMBOL:
      return visit(state, (stax_symbol_id_t)d->value);
    case STAX_DIM_KIND_PRODUCT:
      for (int32_t i = 0; i < d->count; i++) {
        if (!stax_dim_walk_symbols(d->factors[i].atom, visit, state)) return false;
      }
      return true;
    case STAX_DIM_KIND_SUM:
      for (int32_t i = 0; i < d->count; i++) {
        if (!stax_dim_walk_symbols(d->terms[i].monomial, visit, state)) return false;
      }
      return true;
    default:
      return stax_dim_walk_symbols(d->left, visit, state) &&
             stax_dim_walk_symbols(d->right, visit, state);
  }
}

typedef struct stax_symbol_first_t {
  stax_symbol_id_t id;
  int64_t index;    /* occurrences seen so far */
  int64_t first;    /* index of the first occurrence of id */
} stax_symbol_first_t;

static bool stax_symbol_first_visit(void* state, stax_symbol_id_t id) {
  stax_symbol_first_t* s = state;
  if (id == s->id) {
    s->first = s->index;
    return false;
  }
  s->index++;
  return true;
}

typedef struct stax_symbol_collect_t {
  const stax_dim_t* root;
  stax_symbol_id_t* out_ids;
  int32_t capacity;
  int32_t written;
  int32_t total;
  int64_t index;
} stax_symbol_collect_t;

static bool stax_symbol_collect_visit(void* state, stax_symbol_id_t id) {
  stax_symbol_collect_t* s = state;
  int64_t index = s->index++;
  for (int32_t i = 0; i < s->written; i++) {
    if (s->out_ids[i] == id) return true;
  }
  if (s->written < s->capacity) {
    s->out_ids[s->written++] = id;
    s->total++;
    return true;
  }
  /* Past capacity there is nowhere to remember ids, so count an occurrence only when it is the
   * id's first: expressions are small, the rescan is cheap. */
  stax_symbol_first_t first = {.id = id, .first = -1};
  (void)stax_dim_walk_symbols(s->root, stax_symbol_first_visit, &first);
  if (first.first == index) s->total++;
  return true;
}

int32_t stax_dim_symbols(const stax_dim_t* d, stax_symbol_id_t* out_ids, int32_t capacity) {
  if (!d) return 0;
  if (!out_ids || capacity < 0) capacity = 0;
  stax_symbol_collect_t state = {.root = d, .out_ids = out_ids, .capacity = capacity};
  (void)stax_dim_walk_symbols(d, stax_symbol_collect_visit, &state);
  return state.total;
}
