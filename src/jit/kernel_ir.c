/* Kernel IR construction: the kernel object, its tables, statements, affine indices and typed
 * expression builders with sticky errors (see kernel_ir.h). Verification is in
 * kernel_ir_verify.c, the text form in kernel_ir_print.c. */
#include "jit/kernel_ir.h"

#include <string.h>

#include "runtime/tensor_internal.h"

/* ---- names of operators ------------------------------------------------------------------ */

const char* stax_kir_unary_op_name(stax_kir_unary_op_t op) {
  static const char* const names[] = {
#define STAX_KIR_NAME(name, text) text,
      STAX_KIR_UNARY_OPS(STAX_KIR_NAME)
#undef STAX_KIR_NAME
  };
  return (unsigned)op < STAX_KIR_UNARY_OP_COUNT ? names[op] : "?";
}

const char* stax_kir_binary_op_name(stax_kir_binary_op_t op) {
  static const char* const names[] = {
#define STAX_KIR_NAME(name, text) text,
      STAX_KIR_BINARY_OPS(STAX_KIR_NAME)
#undef STAX_KIR_NAME
  };
  return (unsigned)op < STAX_KIR_BINARY_OP_COUNT ? names[op] : "?";
}

bool stax_kir_binary_op_is_compare(stax_kir_binary_op_t op) {
  return op == STAX_KIR_EQ || op == STAX_KIR_NE || op == STAX_KIR_LT || op == STAX_KIR_LE ||
         op == STAX_KIR_GT || op == STAX_KIR_GE;
}

/* ---- the kernel -------------------------------------------------------------------------- */

stax_status_t stax_kir_kernel_create(stax_allocator_t allocator, const char* name,
                                     stax_kir_kernel_t** out_kernel) {
  *out_kernel = NULL;
  stax_kir_kernel_t* kernel = NULL;
  STAX_RETURN_IF_ERROR(
      stax_allocator_calloc(allocator, 1, sizeof(stax_kir_kernel_t), (void**)&kernel));
  kernel->allocator = allocator;
  stax_arena_init(&kernel->arena, allocator, 0);
  stax_status_t status = stax_arena_strdup(&kernel->arena, name ? name : "kernel", &kernel->name);
  if (status != STAX_OK) {
    stax_kir_kernel_destroy(kernel);
    return status;
  }
  *out_kernel = kernel;
  return STAX_OK;
}

void stax_kir_kernel_destroy(stax_kir_kernel_t* kernel) {
  if (!kernel) return;
  stax_status_free(kernel->status);
  stax_arena_deinit(&kernel->arena);
  stax_allocator_free(kernel->allocator, kernel, sizeof(*kernel));
}

void stax_kir_kernel_fail(stax_kir_kernel_t* kernel, stax_status_t status) {
  if (status == STAX_OK) return;
  if (kernel->status == STAX_OK) {
    kernel->status = status;
  } else {
    stax_status_free(status);
  }
}

stax_status_t stax_kir_kernel_status(const stax_kir_kernel_t* kernel) {
  if (kernel->status == STAX_OK) return STAX_OK;
  return stax_status_make(stax_status_code(kernel->status), "%s",
                          stax_status_message(kernel->status));
}

static bool kernel_failed(const stax_kir_kernel_t* kernel) {
  return kernel->status != STAX_OK;
}

static void* kernel_alloc(stax_kir_kernel_t* kernel, size_t size) {
  void* memory = NULL;
  stax_status_t status = stax_arena_alloc(&kernel->arena, size, 0, &memory);
  if (status != STAX_OK) {
    stax_kir_kernel_fail(kernel, status);
    return NULL;
  }
  memset(memory, 0, size);
  return memory;
}

static const char* kernel_strdup(stax_kir_kernel_t* kernel, const char* text) {
  const char* copy = NULL;
  stax_status_t status = stax_arena_strdup(&kernel->arena, text ? text : "", &copy);
  if (status != STAX_OK) stax_kir_kernel_fail(kernel, status);
  return copy;
}

/* Appends `item` to a pointer table kept in the arena (doubling; old copies stay in the arena
 * until the kernel goes, a small price for never invalidating the items themselves). */
static int32_t table_push(stax_kir_kernel_t* kernel, void*** table, int32_t* count,
                          int32_t* capacity, void* item) {
  if (!item) return -1;
  if (*count == *capacity) {
    int32_t grown = *capacity ? *capacity * 2 : 8;
    void** bigger = kernel_alloc(kernel, sizeof(void*) * (size_t)grown);
    if (!bigger) return -1;
    if (*count) memcpy(bigger, *table, sizeof(void*) * (size_t)*count);
    *table = bigger;
    *capacity = grown;
  }
  (*table)[*count] = item;
  return (*count)++;
}

static void internal_error(stax_kir_kernel_t* kernel, const char* fmt, const char* detail) {
  stax_kir_kernel_fail(kernel, stax_status_make(STAX_INTERNAL, "kernel IR '%s': %s %s",
                                                kernel->name, fmt, detail ? detail : ""));
}

int32_t stax_kir_add_buffer(stax_kir_kernel_t* kernel, const char* name,
                            stax_kir_buffer_role_t role, stax_dtype_t dtype, int32_t rank,
                            const int64_t* dims, const int64_t* strides) {
  if (kernel_failed(kernel)) return -1;
  if (rank < 0 || rank > STAX_MAX_RANK || stax_dtype_size(dtype) == 0) {
    internal_error(kernel, "bad buffer", name);
    return -1;
  }
  stax_kir_buffer_t* buffer = kernel_alloc(kernel, sizeof(*buffer));
  if (!buffer) return -1;
  buffer->name = kernel_strdup(kernel, name);
  buffer->role = role;
  buffer->dtype = dtype;
  buffer->rank = rank;
  for (int32_t d = 0; d < rank; d++) buffer->dims[d] = dims[d];
  for (int32_t d = 0; d < STAX_MAX_RANK; d++) buffer->dim_params[d] = buffer->stride_params[d] = -1;
  if (strides) {
    for (int32_t d = 0; d < rank; d++) buffer->strides[d] = strides[d];
  } else {
    stax_shape_contiguous_strides(rank, buffer->dims, buffer->strides);
  }
  if (!stax_shape_extent(rank, buffer->dims, buffer->strides, &buffer->lowest, &buffer->highest)) {
    buffer->lowest = 0;
    buffer->highest = -1; /* empty: nothing may be touched */
  }
  return table_push(kernel, (void***)&kernel->buffers, &kernel->buffer_count,
                    &kernel->buffer_capacity, buffer);
}

int32_t stax_kir_add_local(stax_kir_kernel_t* kernel, const char* name, stax_dtype_t dtype) {
  if (kernel_failed(kernel)) return -1;
  stax_kir_local_t* local = kernel_alloc(kernel, sizeof(*local));
  if (!local) return -1;
  local->name = kernel_strdup(kernel, name);
  local->dtype = dtype;
  return table_push(kernel, (void***)&kernel->locals, &kernel->local_count, &kernel->local_capacity,
                    local);
}

stax_kir_block_t* stax_kir_add_stage(stax_kir_kernel_t* kernel, const char* name) {
  if (kernel_failed(kernel)) return NULL;
  stax_kir_stage_t* stage = kernel_alloc(kernel, sizeof(*stage));
  if (!stage) return NULL;
  stage->name = kernel_strdup(kernel, name);
  stage->fills = stage->source = -1;
  stage->run_max_rows = INT64_MAX;
  stage->when_param[0] = stage->when_param[1] = -1;
  if (table_push(kernel, (void***)&kernel->stages, &kernel->stage_count, &kernel->stage_capacity,
                 stage) < 0)
    return NULL;
  return &stage->body;
}

/* ---- statements -------------------------------------------------------------------------- */

static stax_kir_stmt_t* append_stmt(stax_kir_kernel_t* kernel, stax_kir_block_t* block,
                                    stax_kir_stmt_kind_t kind) {
  if (kernel_failed(kernel) || !block) return NULL;
  stax_kir_stmt_t* stmt = kernel_alloc(kernel, sizeof(*stmt));
  if (!stmt) return NULL;
  stmt->kind = kind;
  stmt->loop = stmt->buffer = stmt->local = -1;
  if (block->last) {
    block->last->next = stmt;
  } else {
    block->first = stmt;
  }
  block->last = stmt;
  return stmt;
}

stax_kir_loop_t* stax_kir_add_loop(stax_kir_kernel_t* kernel, stax_kir_block_t* block,
                                   const char* name, int64_t extent) {
  if (kernel_failed(kernel) || !block) return NULL;
  if (extent < 0) {
    internal_error(kernel, "negative loop extent", name);
    return NULL;
  }
  stax_kir_loop_t* loop = kernel_alloc(kernel, sizeof(*loop));
  if (!loop) return NULL;
  loop->name = kernel_strdup(kernel, name);
  loop->extent = extent;
  loop->vector_width = 1;
  loop->unroll = 1;
  loop->grain = 1;
  loop->extent_param = -1;
  int32_t id = table_push(kernel, (void***)&kernel->loops, &kernel->loop_count,
                          &kernel->loop_capacity, loop);
  if (id < 0) return NULL;
  stax_kir_stmt_t* stmt = append_stmt(kernel, block, STAX_KIR_STMT_LOOP);
  if (!stmt) return NULL;
  stmt->loop = id;
  return loop;
}

int32_t stax_kir_loop_id(const stax_kir_kernel_t* kernel, const stax_kir_loop_t* loop) {
  if (!loop) return -1;
  for (int32_t i = kernel->loop_count - 1; i >= 0; i--)
    if (kernel->loops[i] == loop) return i;
  return -1;
}

static stax_kir_index_t* copy_index(stax_kir_kernel_t* kernel, const stax_kir_index_t* index) {
  stax_kir_index_t* copy = kernel_alloc(kernel, sizeof(*copy));
  if (copy && index) *copy = *index;
  return copy;
}

void stax_kir_add_store(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t buffer,
                        const stax_kir_index_t* index, const stax_kir_expr_t* value) {
  if (kernel_failed(kernel)) return;
  if (!value || buffer < 0 || buffer >= kernel->buffer_count) {
    internal_error(kernel, "bad store", NULL);
    return;
  }
  if (kernel->buffers[buffer]->dtype != value->dtype) {
    internal_error(kernel, "store of a different dtype into", kernel->buffers[buffer]->name);
    return;
  }
  stax_kir_stmt_t* stmt = append_stmt(kernel, block, STAX_KIR_STMT_STORE);
  if (!stmt) return;
  stmt->buffer = buffer;
  stmt->index = copy_index(kernel, index);
  stmt->value = value;
}

static void add_local_stmt(stax_kir_kernel_t* kernel, stax_kir_block_t* block,
                           stax_kir_stmt_kind_t kind, int32_t local, stax_kir_binary_op_t op,
                           const stax_kir_expr_t* value) {
  if (kernel_failed(kernel)) return;
  if (!value || local < 0 || local >= kernel->local_count) {
    internal_error(kernel, "bad local statement", NULL);
    return;
  }
  if (kernel->locals[local]->dtype != value->dtype) {
    internal_error(kernel, "value of a different dtype for local", kernel->locals[local]->name);
    return;
  }
  stax_kir_stmt_t* stmt = append_stmt(kernel, block, kind);
  if (!stmt) return;
  stmt->local = local;
  stmt->reduce_op = op;
  stmt->value = value;
}

void stax_kir_add_declare(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t local,
                          const stax_kir_expr_t* value) {
  add_local_stmt(kernel, block, STAX_KIR_STMT_DECLARE, local, STAX_KIR_ADD, value);
}

void stax_kir_add_assign(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t local,
                         const stax_kir_expr_t* value) {
  add_local_stmt(kernel, block, STAX_KIR_STMT_ASSIGN, local, STAX_KIR_ADD, value);
}

void stax_kir_add_reduce(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t local,
                         stax_kir_binary_op_t op, const stax_kir_expr_t* value) {
  if (op != STAX_KIR_ADD && op != STAX_KIR_MUL && op != STAX_KIR_MAX && op != STAX_KIR_MIN) {
    internal_error(kernel, "reduce with operator", stax_kir_binary_op_name(op));
    return;
  }
  add_local_stmt(kernel, block, STAX_KIR_STMT_REDUCE, local, op, value);
}

/* ---- affine indices ---------------------------------------------------------------------- */

stax_kir_index_t stax_kir_index_constant(int64_t constant) {
  stax_kir_index_t index;
  memset(&index, 0, sizeof(index));
  index.constant = constant;
  return index;
}

void stax_kir_index_add_term(stax_kir_kernel_t* kernel, stax_kir_index_t* index, int32_t loop,
                             int64_t coefficient) {
  stax_kir_index_add_term_scaled(kernel, index, loop, coefficient, -1);
}

void stax_kir_index_add_term_scaled(stax_kir_kernel_t* kernel, stax_kir_index_t* index,
                                    int32_t loop, int64_t coefficient, int32_t p) {
  if (coefficient == 0 || loop < 0) return;
  int32_t scale = p < 0 ? 0 : p + 1;
  if (p >= kernel->param_count || (p >= 0 && !kernel->symbolic)) {
    internal_error(kernel, "index term scaled by an unknown parameter", NULL);
    return;
  }
  for (int32_t t = 0; t < index->term_count; t++) {
    if (index->loops[t] != loop || index->scales[t] != scale) continue;
    index->coefficients[t] += coefficient;
    if (index->coefficients[t] == 0) {
      /* Keep terms dense: move the last one into the hole. */
      index->term_count--;
      index->loops[t] = index->loops[index->term_count];
      index->coefficients[t] = index->coefficients[index->term_count];
      index->scales[t] = index->scales[index->term_count];
    }
    return;
  }
  if (index->term_count == STAX_KIR_MAX_INDEX_TERMS) {
    internal_error(kernel, "too many terms in an index", NULL);
    return;
  }
  index->loops[index->term_count] = loop;
  index->coefficients[index->term_count] = coefficient;
  index->scales[index->term_count] = scale;
  index->term_count++;
}

void stax_kir_index_add_scaled(stax_kir_kernel_t* kernel, stax_kir_index_t* index,
                               const stax_kir_index_t* other, int64_t scale) {
  if (scale == 0) return;
  index->constant += other->constant * scale;
  for (int32_t t = 0; t < other->term_count; t++)
    stax_kir_index_add_term_scaled(kernel, index, other->loops[t], other->coefficients[t] * scale,
                                   other->scales[t] - 1);
}

int64_t stax_kir_index_coefficient(const stax_kir_index_t* index, int32_t loop) {
  for (int32_t t = 0; t < index->term_count; t++)
    if (index->loops[t] == loop) return index->coefficients[t];
  return 0;
}

/* ---- rows-generic kernels ---------------------------------------------------------------- */

/* Row counts past this are refused at run time: it keeps every index computation (row stride
 * times rows, plus the tail) far from int64 overflow, which the verifier checks at this R. */
#define ROWS_MAX ((int64_t)1 << 32)

void stax_kir_set_rows_generic(stax_kir_kernel_t* kernel, int64_t rows_example, int64_t rows_min) {
  if (kernel_failed(kernel)) return;
  if (kernel->param_count != 0 || rows_example < 0 || rows_min < 0) {
    internal_error(kernel, "rows-generic set twice or with a negative row count", NULL);
    return;
  }
  kernel->rows_generic = true;
  kernel->rows_example = rows_example;
  kernel->rows_min = rows_min;
  kernel->rows_max = ROWS_MAX;
  stax_kir_add_param(kernel, "rows", 1, 0, 1, 0, 0, 0, 0);
}

int32_t stax_kir_add_param(stax_kir_kernel_t* kernel, const char* name, int64_t mul0, int64_t add0,
                           int64_t div0, int64_t mul1, int64_t add1, int64_t div1, int64_t offset) {
  if (kernel_failed(kernel)) return -1;
  if (!kernel->rows_generic || kernel->param_count == STAX_KIR_MAX_PARAMS || div0 < 0 ||
      div1 < 0 || add0 < 0 || add1 < 0) {
    internal_error(kernel, "bad parameter", name);
    return -1;
  }
  stax_kir_param_t* p = &kernel->params[kernel->param_count];
  p->name = kernel_strdup(kernel, name);
  p->mul[0] = mul0, p->add[0] = add0, p->div[0] = div0;
  p->mul[1] = mul1, p->add[1] = add1, p->div[1] = div1;
  for (int32_t t = 2; t < STAX_KIR_PARAM_TERMS; t++) p->mul[t] = p->add[t] = p->div[t] = 0;
  p->offset = offset;
  p->kind = STAX_KIR_PARAM_ROWS;
  p->buffer = p->dim = p->of = p->times = -1;
  return kernel->param_count++;
}

bool stax_kir_param_add_term(stax_kir_kernel_t* kernel, int32_t param, int64_t mul, int64_t add,
                             int64_t div) {
  if (kernel_failed(kernel)) return false;
  stax_kir_param_t* p = param >= 0 && param < kernel->param_count ? &kernel->params[param] : NULL;
  if (!p || p->kind != STAX_KIR_PARAM_ROWS || p->div[2] != 0 || div < 1 || add < 0) {
    internal_error(kernel, "bad third parameter term", p ? p->name : NULL);
    return false;
  }
  p->mul[2] = mul, p->add[2] = add, p->div[2] = div;
  return true;
}

int64_t stax_kir_param_value(const stax_kir_param_t* param, int64_t rows) {
  int64_t value = param->offset;
  for (int32_t t = 0; t < STAX_KIR_PARAM_TERMS; t++)
    if (param->div[t] > 0) value += param->mul[t] * ((rows + param->add[t]) / param->div[t]);
  return value;
}

void stax_kir_index_add_param(stax_kir_kernel_t* kernel, stax_kir_index_t* index, int32_t param,
                              int64_t coefficient) {
  if (param < 0 || param >= kernel->param_count) {
    internal_error(kernel, "index term of an unknown parameter", NULL);
    return;
  }
  stax_kir_index_add_term(kernel, index, STAX_KIR_PARAM_TERM + param, coefficient);
}

bool stax_kir_buffer_reach(const stax_kir_buffer_t* buffer, int64_t rows, int64_t* out_lowest,
                           int64_t* out_highest) {
  if (!buffer->rows) {
    *out_lowest = buffer->lowest;
    *out_highest = buffer->highest;
    return buffer->highest >= buffer->lowest;
  }
  int64_t dims[STAX_MAX_RANK];
  for (int32_t d = 0; d < buffer->rank; d++) dims[d] = buffer->dims[d];
  dims[0] = rows;
  return stax_shape_extent(buffer->rank, dims, buffer->strides, out_lowest, out_highest);
}

/* ---- symbolic kernels -------------------------------------------------------------------- */

void stax_kir_set_symbolic(stax_kir_kernel_t* kernel) {
  if (kernel_failed(kernel)) return;
  if (kernel->rows_generic || kernel->param_count != 0) {
    internal_error(kernel, "symbolic after rows-generic or parameters", NULL);
    return;
  }
  kernel->symbolic = true;
}

static stax_kir_param_t* new_param(stax_kir_kernel_t* kernel, const char* name) {
  if (kernel_failed(kernel)) return NULL;
  if (!kernel->symbolic || kernel->param_count == STAX_KIR_MAX_PARAMS) {
    internal_error(kernel, "bad or one too many symbolic parameters:", name);
    return NULL;
  }
  stax_kir_param_t* p = &kernel->params[kernel->param_count];
  memset(p, 0, sizeof(*p));
  p->name = kernel_strdup(kernel, name);
  p->buffer = p->dim = p->of = p->times = -1;
  return p;
}

int32_t stax_kir_add_read_param(stax_kir_kernel_t* kernel, const char* name, int32_t buffer,
                                int32_t dim, bool stride) {
  bool ok = buffer >= 0 && buffer < kernel->buffer_count && dim >= 0 &&
            dim < kernel->buffers[buffer]->rank &&
            kernel->buffers[buffer]->role != STAX_KIR_BUFFER_SCRATCH;
  if (!ok && !kernel_failed(kernel)) {
    internal_error(kernel, "parameter read from a bad buffer dim:", name);
    return -1;
  }
  /* The same read twice is the same parameter. */
  stax_kir_param_kind_t kind = stride ? STAX_KIR_PARAM_STRIDE : STAX_KIR_PARAM_DIM;
  for (int32_t q = 0; q < kernel->param_count; q++)
    if (kernel->params[q].kind == kind && kernel->params[q].buffer == buffer &&
        kernel->params[q].dim == dim)
      return q;
  stax_kir_param_t* p = new_param(kernel, name);
  if (!p) return -1;
  p->kind = kind;
  p->buffer = buffer;
  p->dim = dim;
  return kernel->param_count++;
}

int32_t stax_kir_add_derived_param(stax_kir_kernel_t* kernel, const char* name, int32_t of,
                                   int64_t mul0, int64_t add0, int64_t div0, int64_t mul1,
                                   int64_t add1, int64_t div1, int64_t offset) {
  if (!kernel_failed(kernel) && (of < 0 || of >= kernel->param_count || div0 < 0 || div1 < 0)) {
    internal_error(kernel, "bad derived parameter", name);
    return -1;
  }
  stax_kir_param_t* p = new_param(kernel, name);
  if (!p) return -1;
  p->kind = STAX_KIR_PARAM_DERIVED;
  p->of = of;
  p->mul[0] = mul0, p->add[0] = add0, p->div[0] = div0;
  p->mul[1] = mul1, p->add[1] = add1, p->div[1] = div1;
  p->offset = offset;
  return kernel->param_count++;
}

int32_t stax_kir_param_product(stax_kir_kernel_t* kernel, int32_t a, int32_t b) {
  if (kernel_failed(kernel)) return -1;
  if (a < 0 || b < 0 || a >= kernel->param_count || b >= kernel->param_count) {
    internal_error(kernel, "product of unknown parameters", NULL);
    return -1;
  }
  if (a > b) {
    int32_t t = a;
    a = b;
    b = t;
  }
  for (int32_t q = 0; q < kernel->param_count; q++) {
    const stax_kir_param_t* p = &kernel->params[q];
    if (p->kind == STAX_KIR_PARAM_DERIVED && p->of == a && p->times == b && p->mul[0] == 1 &&
        p->add[0] == 0 && p->div[0] == 1 && p->div[1] == 0 && p->offset == 0)
      return q;
  }
  char name[64];
  snprintf(name, sizeof(name), "%s_x_%s", kernel->params[a].name, kernel->params[b].name);
  int32_t q = stax_kir_add_derived_param(kernel, name, a, 1, 0, 1, 0, 0, 0, 0);
  if (q >= 0) kernel->params[q].times = b;
  return q;
}

static bool buffer_dim_ok(stax_kir_kernel_t* kernel, int32_t buffer, int32_t dim, int32_t p) {
  if (kernel_failed(kernel)) return false;
  if (!kernel->symbolic || buffer < 0 || buffer >= kernel->buffer_count || dim < 0 ||
      dim >= kernel->buffers[buffer]->rank || p < 0 || p >= kernel->param_count) {
    internal_error(kernel, "bad buffer parameter", NULL);
    return false;
  }
  return true;
}

void stax_kir_buffer_dim_param(stax_kir_kernel_t* kernel, int32_t buffer, int32_t dim, int32_t p) {
  if (buffer_dim_ok(kernel, buffer, dim, p)) kernel->buffers[buffer]->dim_params[dim] = p;
}

void stax_kir_buffer_stride_param(stax_kir_kernel_t* kernel, int32_t buffer, int32_t dim,
                                  int32_t p) {
  if (buffer_dim_ok(kernel, buffer, dim, p)) kernel->buffers[buffer]->stride_params[dim] = p;
}

void stax_kir_index_add_scaled_param(stax_kir_kernel_t* kernel, stax_kir_index_t* index,
                                     const stax_kir_index_t* other, int32_t p) {
  if (p < 0) {
    stax_kir_index_add_scaled(kernel, index, other, 1);
    return;
  }
  stax_kir_index_t copy = *other;
  if (copy.constant) stax_kir_index_add_param(kernel, index, p, copy.constant);
  for (int32_t t = 0; t < copy.term_count; t++) {
    int32_t loop = copy.loops[t], scale = copy.scales[t] - 1;
    if (loop >= STAX_KIR_PARAM_TERM) {
      /* param * coefficient * p: a product parameter (times the old scale, if any). */
      int32_t q = stax_kir_param_product(kernel, loop - STAX_KIR_PARAM_TERM, p);
      if (scale >= 0) q = stax_kir_param_product(kernel, q, scale);
      if (q >= 0) stax_kir_index_add_param(kernel, index, q, copy.coefficients[t]);
      continue;
    }
    int32_t q = scale >= 0 ? stax_kir_param_product(kernel, scale, p) : p;
    stax_kir_index_add_term_scaled(kernel, index, loop, copy.coefficients[t], q);
  }
}

void stax_kir_stage_when(stax_kir_kernel_t* kernel, int32_t p, int64_t min, int64_t max) {
  if (kernel_failed(kernel)) return;
  stax_kir_stage_t* stage = kernel->stage_count ? kernel->stages[kernel->stage_count - 1] : NULL;
  int32_t c = stage && stage->when_param[0] >= 0 ? 1 : 0;
  if (!stage || !kernel->symbolic || p < 0 || p >= kernel->param_count || stage->when_param[c] >= 0) {
    internal_error(kernel, "bad stage condition", NULL);
    return;
  }
  stage->when_param[c] = p;
  stage->when_min[c] = min;
  stage->when_max[c] = max;
}

static bool floor_div(int64_t a, int64_t b, int64_t* out) {
  if (b <= 0) return false;
  int64_t q = a / b;
  if ((a % b != 0) && (a < 0)) q--;
  *out = q;
  return true;
}

static bool params_from(const stax_kir_kernel_t* kernel, const int64_t* const* dims,
                        const int64_t* const* strides, bool example, int64_t* values) {
  for (int32_t q = 0; q < kernel->param_count; q++) {
    const stax_kir_param_t* p = &kernel->params[q];
    int64_t value = 0;
    switch (p->kind) {
      case STAX_KIR_PARAM_DIM:
      case STAX_KIR_PARAM_STRIDE: {
        const stax_kir_buffer_t* b = kernel->buffers[p->buffer];
        const int64_t* source = example ? (p->kind == STAX_KIR_PARAM_DIM ? b->dims : b->strides)
                                        : (p->kind == STAX_KIR_PARAM_DIM ? dims[p->buffer]
                                                                         : strides[p->buffer]);
        if (!source) return false;
        value = source[p->dim];
        break;
      }
      case STAX_KIR_PARAM_DERIVED: {
        int64_t x = values[p->of];
        value = p->offset;
        for (int32_t t = 0; t < STAX_KIR_PARAM_TERMS; t++) {
          if (p->div[t] == 0) continue;
          int64_t sum = 0, quotient = 0, term = 0;
          if (__builtin_add_overflow(x, p->add[t], &sum) || !floor_div(sum, p->div[t], &quotient) ||
              __builtin_mul_overflow(p->mul[t], quotient, &term) ||
              __builtin_add_overflow(value, term, &value))
            return false;
        }
        if (p->times >= 0 && __builtin_mul_overflow(value, values[p->times], &value)) return false;
        break;
      }
      case STAX_KIR_PARAM_ROWS: return false;
    }
    values[q] = value;
  }
  return true;
}

bool stax_kir_params_evaluate(const stax_kir_kernel_t* kernel, const int64_t* const* dims,
                              const int64_t* const* strides, int64_t* out_values) {
  return kernel->symbolic && params_from(kernel, dims, strides, false, out_values);
}

bool stax_kir_params_example(const stax_kir_kernel_t* kernel, int64_t* out_values) {
  return kernel->symbolic && params_from(kernel, NULL, NULL, true, out_values);
}

int64_t stax_kir_buffer_dim_at(const stax_kir_buffer_t* buffer, int32_t d, const int64_t* values) {
  return buffer->dim_params[d] >= 0 && values ? values[buffer->dim_params[d]] : buffer->dims[d];
}

int64_t stax_kir_buffer_stride_at(const stax_kir_buffer_t* buffer, int32_t d,
                                  const int64_t* values) {
  return buffer->stride_params[d] >= 0 && values ? values[buffer->stride_params[d]]
                                                 : buffer->strides[d];
}

/* ---- expressions ------------------------------------------------------------------------- */

static stax_kir_expr_t* new_expr(stax_kir_kernel_t* kernel, stax_kir_expr_kind_t kind,
                                 stax_dtype_t dtype) {
  if (kernel_failed(kernel)) return NULL;
  stax_kir_expr_t* expr = kernel_alloc(kernel, sizeof(*expr));
  if (!expr) return NULL;
  expr->kind = kind;
  expr->dtype = dtype;
  expr->id = kernel->expr_count++;
  expr->buffer = expr->local = expr->loop = -1;
  return expr;
}

const stax_kir_expr_t* stax_kir_float(stax_kir_kernel_t* kernel, stax_dtype_t dtype, double value) {
  if (!stax_dtype_is_float(dtype)) {
    internal_error(kernel, "float constant of dtype", stax_dtype_name(dtype));
    return NULL;
  }
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_CONSTANT, dtype);
  if (expr) expr->float_value = value;
  return expr;
}

const stax_kir_expr_t* stax_kir_int(stax_kir_kernel_t* kernel, stax_dtype_t dtype, int64_t value) {
  if (stax_dtype_is_float(dtype)) return stax_kir_float(kernel, dtype, (double)value);
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_CONSTANT, dtype);
  if (expr) expr->int_value = dtype == STAX_DTYPE_BOOL ? value != 0 : value;
  return expr;
}

const stax_kir_expr_t* stax_kir_load(stax_kir_kernel_t* kernel, int32_t buffer,
                                     const stax_kir_index_t* index) {
  if (kernel_failed(kernel)) return NULL;
  if (buffer < 0 || buffer >= kernel->buffer_count || !index) {
    internal_error(kernel, "load from a bad buffer", NULL);
    return NULL;
  }
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_LOAD, kernel->buffers[buffer]->dtype);
  if (!expr) return NULL;
  expr->buffer = buffer;
  expr->index = copy_index(kernel, index);
  return expr->index ? expr : NULL;
}

const stax_kir_expr_t* stax_kir_local(stax_kir_kernel_t* kernel, int32_t local) {
  if (kernel_failed(kernel)) return NULL;
  if (local < 0 || local >= kernel->local_count) {
    internal_error(kernel, "read of a bad local", NULL);
    return NULL;
  }
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_LOCAL, kernel->locals[local]->dtype);
  if (expr) expr->local = local;
  return expr;
}

const stax_kir_expr_t* stax_kir_loop_index(stax_kir_kernel_t* kernel, int32_t loop) {
  if (kernel_failed(kernel)) return NULL;
  if (loop < 0 || loop >= kernel->loop_count) {
    internal_error(kernel, "counter of a bad loop", NULL);
    return NULL;
  }
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_LOOP_INDEX, STAX_DTYPE_INT64);
  if (expr) expr->loop = loop;
  return expr;
}

/* The dtypes expressions compute in: float32/float64, integers and bool. float16/bfloat16
 * appear only in buffers and are converted by casts. */
static bool is_compute_dtype(stax_dtype_t dtype) {
  return dtype != STAX_DTYPE_FLOAT16 && dtype != STAX_DTYPE_BFLOAT16 && stax_dtype_size(dtype) != 0;
}

static bool unary_accepts(stax_kir_unary_op_t op, stax_dtype_t dtype) {
  switch (op) {
    case STAX_KIR_NOT: return dtype == STAX_DTYPE_BOOL;
    case STAX_KIR_NEG:
    case STAX_KIR_ABS: return dtype != STAX_DTYPE_BOOL;
    default: return dtype == STAX_DTYPE_FLOAT32 || dtype == STAX_DTYPE_FLOAT64;
  }
}

const stax_kir_expr_t* stax_kir_unary(stax_kir_kernel_t* kernel, stax_kir_unary_op_t op,
                                      const stax_kir_expr_t* a) {
  if (!a || kernel_failed(kernel)) return NULL;
  if ((unsigned)op >= STAX_KIR_UNARY_OP_COUNT || !unary_accepts(op, a->dtype) ||
      !is_compute_dtype(a->dtype)) {
    internal_error(kernel, stax_kir_unary_op_name(op), stax_dtype_name(a->dtype));
    return NULL;
  }
  bool predicate = op == STAX_KIR_IS_NAN || op == STAX_KIR_IS_INF;
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_UNARY, predicate ? STAX_DTYPE_BOOL : a->dtype);
  if (!expr) return NULL;
  expr->op = op;
  expr->operand_count = 1;
  expr->operands[0] = a;
  return expr;
}

static bool binary_accepts(stax_kir_binary_op_t op, stax_dtype_t dtype) {
  switch (op) {
    case STAX_KIR_AND:
    case STAX_KIR_OR:
    case STAX_KIR_XOR: return dtype == STAX_DTYPE_BOOL;
    case STAX_KIR_POW: return dtype == STAX_DTYPE_FLOAT32 || dtype == STAX_DTYPE_FLOAT64;
    case STAX_KIR_EQ:
    case STAX_KIR_NE: return true;
    default: return dtype != STAX_DTYPE_BOOL;
  }
}

const stax_kir_expr_t* stax_kir_binary(stax_kir_kernel_t* kernel, stax_kir_binary_op_t op,
                                       const stax_kir_expr_t* a, const stax_kir_expr_t* b) {
  if (!a || !b || kernel_failed(kernel)) return NULL;
  if ((unsigned)op >= STAX_KIR_BINARY_OP_COUNT || a->dtype != b->dtype ||
      !binary_accepts(op, a->dtype) || !is_compute_dtype(a->dtype)) {
    internal_error(kernel, stax_kir_binary_op_name(op), stax_dtype_name(a->dtype));
    return NULL;
  }
  stax_dtype_t dtype = stax_kir_binary_op_is_compare(op) ? STAX_DTYPE_BOOL : a->dtype;
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_BINARY, dtype);
  if (!expr) return NULL;
  expr->op = op;
  expr->operand_count = 2;
  expr->operands[0] = a;
  expr->operands[1] = b;
  return expr;
}

const stax_kir_expr_t* stax_kir_select(stax_kir_kernel_t* kernel, const stax_kir_expr_t* condition,
                                       const stax_kir_expr_t* if_true,
                                       const stax_kir_expr_t* if_false) {
  if (!condition || !if_true || !if_false || kernel_failed(kernel)) return NULL;
  if (condition->dtype != STAX_DTYPE_BOOL || if_true->dtype != if_false->dtype) {
    internal_error(kernel, "select of", stax_dtype_name(if_true->dtype));
    return NULL;
  }
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_SELECT, if_true->dtype);
  if (!expr) return NULL;
  expr->operand_count = 3;
  expr->operands[0] = condition;
  expr->operands[1] = if_true;
  expr->operands[2] = if_false;
  return expr;
}

const stax_kir_expr_t* stax_kir_fma(stax_kir_kernel_t* kernel, const stax_kir_expr_t* a,
                                    const stax_kir_expr_t* b, const stax_kir_expr_t* c) {
  if (!a || !b || !c || kernel_failed(kernel)) return NULL;
  if (a->dtype != b->dtype || a->dtype != c->dtype ||
      (a->dtype != STAX_DTYPE_FLOAT32 && a->dtype != STAX_DTYPE_FLOAT64)) {
    internal_error(kernel, "fma of", stax_dtype_name(a->dtype));
    return NULL;
  }
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_FMA, a->dtype);
  if (!expr) return NULL;
  expr->operand_count = 3;
  expr->operands[0] = a;
  expr->operands[1] = b;
  expr->operands[2] = c;
  return expr;
}

const stax_kir_expr_t* stax_kir_cast(stax_kir_kernel_t* kernel, stax_dtype_t dtype,
                                     const stax_kir_expr_t* a) {
  if (!a || kernel_failed(kernel)) return NULL;
  if (a->dtype == dtype) return a;
  if (stax_dtype_size(dtype) == 0) {
    internal_error(kernel, "cast to", stax_dtype_name(dtype));
    return NULL;
  }
  stax_kir_expr_t* expr = new_expr(kernel, STAX_KIR_CAST, dtype);
  if (!expr) return NULL;
  expr->operand_count = 1;
  expr->operands[0] = a;
  return expr;
}
