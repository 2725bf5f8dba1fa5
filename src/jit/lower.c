/* Lowering's entry point and its value machinery: checks a group description, gives its
 * inputs and outputs kernel buffers, classifies the nodes (elementwise, row op, matmul, conv,
 * pooling, or not fusible) and hands the group to the family that lowers it; evaluates values
 * as expressions at the current point of the iteration space (see lower_internal.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jit/lower_internal.h"
#include "runtime/tensor_internal.h"

/* ---- small helpers ----------------------------------------------------------------------- */

const stax_jit_value_t* lower_value(const lower_t* L, int32_t value) {
  return &L->group->values[value];
}

const char* lower_value_name(const lower_t* L, int32_t value) {
  const char* name = L->group->values[value].name;
  return name && name[0] ? name : "(unnamed)";
}

static const char* group_name(const stax_jit_group_t* group) {
  return group->name && group->name[0] ? group->name : "group";
}

stax_status_t lower_refuse(const lower_t* L, const char* fmt, ...) {
  char reason[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(reason, sizeof(reason), fmt, args);
  va_end(args);
  return stax_status_make(STAX_UNIMPLEMENTED, "JIT group '%s' is not fusible: %s",
                          group_name(L->group), reason);
}

static stax_status_t malformed(const stax_jit_group_t* group, const char* fmt, ...)
    STAX_PRINTF(2, 3);
static stax_status_t malformed(const stax_jit_group_t* group, const char* fmt, ...) {
  char reason[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(reason, sizeof(reason), fmt, args);
  va_end(args);
  return stax_status_make(STAX_INVALID_ARGUMENT, "JIT group '%s': %s", group_name(group), reason);
}

int32_t lower_vector_width(const lower_t* L) {
  bool wide = false;
  for (int32_t v = 0; v < L->group->value_count; v++)
    if (stax_dtype_size(L->group->values[v].dtype) == 8) wide = true;
  int32_t lanes = L->options->vector_bits / (wide ? 64 : 32);
  return lanes < 2 ? 2 : lanes;
}

void lower_declare_accumulators(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t tile,
                                int32_t rows, int32_t* out_locals) {
  for (int32_t r = 0; r < rows; r++) {
    char name[32];
    snprintf(name, sizeof(name), "acc%d_%d", (int)tile, (int)r);
    out_locals[r] = stax_kir_add_local(kernel, name, STAX_DTYPE_FLOAT32);
    stax_kir_add_declare(kernel, block, out_locals[r], stax_kir_float(kernel, STAX_DTYPE_FLOAT32, 0));
  }
}

bool lower_constant_scalar(const lower_t* L, int32_t value, double* out_value) {
  const stax_tensor_t* constant = L->group->values[value].constant;
  if (!constant || stax_tensor_element_count(constant) != 1) return false;
  stax_convert_elements(stax_tensor_dtype(constant), stax_tensor_data(constant), STAX_DTYPE_FLOAT64,
                        out_value, 1);
  return true;
}

/* ---- values at the current point --------------------------------------------------------- */

void lower_new_point(lower_t* L) {
  L->stamp++;
}

bool lower_value_fits(const lower_t* L, int32_t value, int32_t offset, int32_t count) {
  const stax_jit_value_t* v = lower_value(L, value);
  if (v->rank > count) return false;
  for (int32_t d = 0; d < v->rank; d++) {
    int64_t dim = L->dims[offset + count - v->rank + d];
    if (v->dims[d] != dim && v->dims[d] != 1) return false;
  }
  return true;
}

bool lower_rows_value_fits(const lower_t* L, int32_t value, int32_t space_rank) {
  const stax_jit_value_t* v = lower_value(L, value);
  if (!L->group->rows_generic) return true;
  if (v->rows) return v->rank == space_rank;
  return v->rank < space_rank || v->dims[0] == 1;
}

bool lower_dim_open(const lower_t* L, int32_t value, int32_t d) {
  return L->group->symbolic && (L->group->values[value].open_dims >> d & 1u);
}

stax_kir_index_t lower_value_index(lower_t* L, int32_t value, int32_t space_rank) {
  const stax_jit_value_t* v = lower_value(L, value);
  stax_kir_index_t index = stax_kir_index_constant(0);
  int32_t buffer = L->buffer[value];
  for (int32_t d = 0; d < v->rank; d++) {
    /* Broadcast, or a single element: index 0 (an open dim is 1 only at this example). */
    if (v->dims[d] == 1 && !lower_dim_open(L, value, d)) continue;
    int32_t e = space_rank - v->rank + d;
    int32_t stride = buffer >= 0 ? L->kernel->buffers[buffer]->stride_params[d] : -1;
    if (stride >= 0)
      stax_kir_index_add_scaled_param(L->kernel, &index, &L->forms[e], stride);
    else
      stax_kir_index_add_scaled(L->kernel, &index, &L->forms[e], v->strides[d]);
  }
  return index;
}

int32_t lower_symbolic_order(const lower_t* L, int32_t count, int32_t* order) {
  int32_t first = -1, n = 0;
  int64_t best = 1;
  for (int32_t d = 0; d < count; d++)
    if (L->dim_params[d] < 0 && L->dims[d] > best) best = L->dims[d], first = d;
  for (int32_t d = 0; d < count && first < 0; d++)
    if (L->dim_params[d] >= 0) first = d;
  if (first >= 0) order[n++] = first;
  for (int32_t d = 0; d < count; d++)
    if (d != first) order[n++] = d;
  return n;
}

static bool skipped(int32_t v, const int32_t* skip, int32_t skip_count) {
  for (int32_t i = 0; i < skip_count; i++)
    if (skip[i] == v) return true;
  return false;
}

stax_status_t lower_symbolic_space(lower_t* L, int32_t space_rank, const int32_t* skip,
                                   int32_t skip_count) {
  const stax_jit_group_t* group = L->group;
  stax_kir_kernel_t* k = L->kernel;
  for (int32_t e = 0; e < space_rank; e++) {
    L->dim_params[e] = -1;
    for (int32_t v = 0; v < group->value_count && L->dim_params[e] < 0; v++) {
      const stax_jit_value_t* value = &group->values[v];
      if (L->buffer[v] < 0 || L->space[v] != LOWER_FULL || value->rank != space_rank ||
          !lower_dim_open(L, v, e) || skipped(v, skip, skip_count))
        continue;
      char name[32];
      snprintf(name, sizeof(name), "d%d", (int)e);
      L->dim_params[e] = stax_kir_add_read_param(k, name, L->buffer[v], e, false);
    }
  }
  for (int32_t v = 0; v < group->value_count; v++) {
    const stax_jit_value_t* value = &group->values[v];
    bool used = (L->uses[v] > 0 || L->producer[v] >= 0) && !skipped(v, skip, skip_count);
    int32_t rank = L->space[v] == LOWER_ROW ? space_rank - 1 : space_rank;
    for (int32_t d = 0; used && d < value->rank; d++) {
      if (!lower_dim_open(L, v, d)) continue;
      int32_t e = rank - value->rank + d;
      if (e < 0 || L->dim_params[e] < 0)
        return lower_refuse(L, "value '%s' dim %d varies where the kernel's space does not",
                            lower_value_name(L, v), (int)d);
      if (L->buffer[v] >= 0) stax_kir_buffer_dim_param(k, L->buffer[v], d, L->dim_params[e]);
    }
  }
  return stax_kir_kernel_status(k);
}

stax_dtype_t lower_compute_dtype(stax_dtype_t dtype) {
  return stax_dtype_is_half(dtype) ? STAX_DTYPE_FLOAT32 : dtype;
}

const stax_kir_expr_t* lower_round_to(lower_t* L, stax_dtype_t dtype, const stax_kir_expr_t* expr) {
  expr = stax_kir_cast(L->kernel, dtype, expr);
  return stax_dtype_is_half(dtype) ? stax_kir_cast(L->kernel, STAX_DTYPE_FLOAT32, expr) : expr;
}

static const stax_kir_expr_t* constant_expr(lower_t* L, int32_t value) {
  const stax_jit_value_t* v = lower_value(L, value);
  const stax_tensor_t* constant = v->constant;
  if (!constant || stax_tensor_element_count(constant) != 1 ||
      stax_tensor_dtype(constant) != v->dtype)
    return NULL;
  if (stax_dtype_is_float(v->dtype)) {
    double x = 0;
    stax_convert_elements(v->dtype, stax_tensor_data(constant), STAX_DTYPE_FLOAT64, &x, 1);
    return stax_kir_float(L->kernel, lower_compute_dtype(v->dtype), x);
  }
  int64_t x = 0;
  stax_convert_elements(v->dtype, stax_tensor_data(constant), STAX_DTYPE_INT64, &x, 1);
  return stax_kir_int(L->kernel, v->dtype, x);
}

const stax_kir_expr_t* lower_value_expr(lower_t* L, int32_t value, lower_space_t space) {
  if (L->fixed[value]) return L->fixed[value];
  if (L->memo_stamp[space][value] == L->stamp) return L->memo[space][value];
  const stax_kir_expr_t* expr = NULL;
  int32_t node = L->producer[value];
  if (node < 0) {
    expr = constant_expr(L, value);
    if (!expr) {
      int32_t space_rank = space == LOWER_ROW ? L->rank - 1 : L->rank;
      stax_kir_index_t index = lower_value_index(L, value, space_rank);
      expr = stax_kir_load(L->kernel, L->buffer[value], &index);
      if (expr && stax_dtype_is_half(expr->dtype)) expr = stax_kir_cast(L->kernel, STAX_DTYPE_FLOAT32, expr);
    }
  } else {
    const stax_jit_node_t* n = &L->group->nodes[node];
    stax_op_t op = n->node->op;
    if (lower_is_row_op(op)) {
      expr = lower_row_output_expr(L, node, L->producer_slot[value], space);
    } else if (lower_is_elementwise(op)) {
      expr = lower_elementwise_expr(L, n, L->producer_slot[value], space);
    } else {
      stax_kir_kernel_fail(L->kernel,
                           stax_status_make(STAX_INTERNAL, "value '%s' has no expression here",
                                            lower_value_name(L, value)));
    }
    stax_dtype_t dtype = lower_value(L, value)->dtype;
    if (expr && stax_dtype_is_half(dtype)) expr = lower_round_to(L, dtype, expr);
  }
  L->memo[space][value] = expr;
  L->memo_stamp[space][value] = L->stamp;
  return expr;
}

void lower_store_value(lower_t* L, stax_kir_block_t* block, int32_t value, lower_space_t space,
                       int32_t space_rank) {
  stax_kir_index_t index = lower_value_index(L, value, space_rank);
  const stax_kir_expr_t* expr = lower_value_expr(L, value, space);
  stax_dtype_t dtype = lower_value(L, value)->dtype;
  if (expr && stax_dtype_is_half(dtype)) {
    /* The rounded value itself (under the widening lower_value_expr put on it). */
    expr = expr->kind == STAX_KIR_CAST && expr->operands[0]->dtype == dtype
               ? expr->operands[0]
               : stax_kir_cast(L->kernel, dtype, expr);
  }
  stax_kir_add_store(L->kernel, block, L->buffer[value], &index, expr);
}

/* ---- checking the description ------------------------------------------------------------ */

static stax_status_t check_group(const stax_jit_group_t* group) {
  if (!group || group->node_count < 1 || group->value_count < 1 || group->output_count < 1 ||
      !group->nodes || !group->values || !group->outputs || (group->input_count && !group->inputs))
    return stax_status_make(STAX_INVALID_ARGUMENT, "JIT group: empty or incomplete description");
  for (int32_t v = 0; v < group->value_count; v++) {
    const stax_jit_value_t* value = &group->values[v];
    if (value->rank < 0 || value->rank > STAX_MAX_RANK || stax_dtype_size(value->dtype) == 0)
      return malformed(group, "value %d has a bad rank or dtype", (int)v);
    for (int32_t d = 0; d < value->rank; d++)
      if (value->dims[d] < 0) return malformed(group, "value %d has a negative dim", (int)v);
  }
  return STAX_OK;
}

static stax_status_t check_argument_list(const stax_jit_group_t* group, int32_t count,
                                         const int32_t* list, stax_jit_value_role_t role,
                                         int32_t* buffer, int32_t first_buffer) {
  for (int32_t i = 0; i < count; i++) {
    int32_t v = list[i];
    if (v < 0 || v >= group->value_count || group->values[v].role != role || buffer[v] >= 0)
      return malformed(group, "%s %d is not a distinct value of that role",
                       role == STAX_JIT_VALUE_INPUT ? "input" : "output", (int)i);
    buffer[v] = first_buffer + i;
  }
  return STAX_OK;
}

static stax_status_t check_nodes(lower_t* L) {
  const stax_jit_group_t* group = L->group;
  for (int32_t n = 0; n < group->node_count; n++) {
    const stax_jit_node_t* node = &group->nodes[n];
    if (!node->node || (node->input_count && !node->inputs) ||
        (node->output_count && !node->outputs))
      return malformed(group, "node %d is incomplete", (int)n);
    stax_op_t op = node->node->op;
    if ((unsigned)op >= STAX_OP_COUNT) return malformed(group, "node %d has a bad op", (int)n);
    int32_t max_inputs = stax_op_max_inputs(op), max_outputs = stax_op_max_outputs(op);
    if (node->input_count < stax_op_min_inputs(op) ||
        (max_inputs >= 0 && node->input_count > max_inputs) ||
        node->output_count < stax_op_min_outputs(op) ||
        (max_outputs >= 0 && node->output_count > max_outputs))
      return malformed(group, "%s node '%s' has the wrong number of inputs or outputs",
                       stax_op_name(op), node->node->name ? node->node->name : "");
    for (int32_t i = 0; i < node->input_count; i++) {
      int32_t v = node->inputs[i];
      if (v < -1 || v >= group->value_count)
        return malformed(group, "node %d input %d is out of range", (int)n, (int)i);
      if (v < 0) continue;
      bool ready = group->values[v].role == STAX_JIT_VALUE_INPUT || L->producer[v] >= 0;
      if (!ready)
        return malformed(group, "node %d reads value '%s' before it is produced", (int)n,
                         lower_value_name(L, v));
      if (group->values[v].role == STAX_JIT_VALUE_INPUT && L->buffer[v] < 0)
        return malformed(group, "input value '%s' is not in the group's input list",
                         lower_value_name(L, v));
      L->uses[v]++;
    }
    for (int32_t o = 0; o < node->output_count; o++) {
      int32_t v = node->outputs[o];
      if (v < -1 || v >= group->value_count)
        return malformed(group, "node %d output %d is out of range", (int)n, (int)o);
      if (v < 0) continue;
      if (L->producer[v] >= 0 || group->values[v].role == STAX_JIT_VALUE_INPUT)
        return malformed(group, "value '%s' is produced twice or is an input",
                         lower_value_name(L, v));
      L->producer[v] = n;
      L->producer_slot[v] = o;
    }
  }
  for (int32_t i = 0; i < group->output_count; i++)
    if (L->producer[group->outputs[i]] < 0)
      return malformed(group, "output '%s' is not produced by any node",
                       lower_value_name(L, group->outputs[i]));
  return STAX_OK;
}

/* ---- the entry point --------------------------------------------------------------------- */

static stax_status_t lower_allocate(lower_t* L) {
  size_t n = (size_t)L->group->value_count + 1;
  stax_allocator_t a = L->allocator;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, n, sizeof(int32_t), (void**)&L->buffer));
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, n, sizeof(int32_t), (void**)&L->producer));
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, n, sizeof(int32_t), (void**)&L->producer_slot));
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, n, sizeof(int32_t), (void**)&L->uses));
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, n, sizeof(lower_space_t), (void**)&L->space));
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, n, sizeof(void*), (void**)&L->fixed));
  for (int32_t s = 0; s < 2; s++) {
    STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, n, sizeof(void*), (void**)&L->memo[s]));
    STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, n, sizeof(uint32_t), (void**)&L->memo_stamp[s]));
  }
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, (size_t)L->group->node_count + 1, sizeof(void*),
                                             (void**)&L->node_data));
  for (size_t v = 0; v < n; v++) L->buffer[v] = L->producer[v] = -1;
  L->stamp = 1;
  return STAX_OK;
}

static void lower_free(lower_t* L) {
  size_t n = (size_t)L->group->value_count + 1;
  stax_allocator_t a = L->allocator;
  stax_allocator_free(a, L->buffer, n * sizeof(int32_t));
  stax_allocator_free(a, L->producer, n * sizeof(int32_t));
  stax_allocator_free(a, L->producer_slot, n * sizeof(int32_t));
  stax_allocator_free(a, L->uses, n * sizeof(int32_t));
  stax_allocator_free(a, L->space, n * sizeof(lower_space_t));
  stax_allocator_free(a, L->fixed, n * sizeof(void*));
  for (int32_t s = 0; s < 2; s++) {
    stax_allocator_free(a, L->memo[s], n * sizeof(void*));
    stax_allocator_free(a, L->memo_stamp[s], n * sizeof(uint32_t));
  }
  stax_allocator_free(a, L->node_data, ((size_t)L->group->node_count + 1) * sizeof(void*));
}

static stax_status_t add_buffers(lower_t* L) {
  const stax_jit_group_t* group = L->group;
  for (int32_t i = 0; i < group->input_count + group->output_count; i++) {
    bool input = i < group->input_count;
    int32_t v = input ? group->inputs[i] : group->outputs[i - group->input_count];
    const stax_jit_value_t* value = &group->values[v];
    char name[64];
    if (value->name && value->name[0]) {
      snprintf(name, sizeof(name), "%s", value->name);
    } else {
      snprintf(name, sizeof(name), "%s%d", input ? "in" : "out",
               (int)(input ? i : i - group->input_count));
    }
    /* Kernel IR names print and become LLVM names: keep them to identifier characters. */
    for (char* c = name; *c; c++)
      if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
        *c = '_';
    int32_t b =
        stax_kir_add_buffer(L->kernel, name, input ? STAX_KIR_BUFFER_INPUT : STAX_KIR_BUFFER_OUTPUT,
                            value->dtype, value->rank, value->dims, value->strides);
    if (b >= 0 && value->rows) L->kernel->buffers[b]->rows = true;
    /* Symbolic groups: open strides are read from the argument at run time. */
    for (int32_t d = 0; b >= 0 && group->symbolic && d < value->rank; d++) {
      if (!(value->open_strides >> d & 1u)) continue;
      snprintf(name, sizeof(name), "s%d_%d", (int)b, (int)d);
      stax_kir_buffer_stride_param(L->kernel, b, d, stax_kir_add_read_param(L->kernel, name, b, d, true));
    }
  }
  return stax_kir_kernel_status(L->kernel);
}

/* Which family lowers the group, and its contraction node (MatMul/Gemm or Conv) when it has one;
 * UNIMPLEMENTED for anything else. */
typedef enum lower_family_e {
  FAMILY_ELEMENTWISE,
  FAMILY_ROWS,
  FAMILY_MATMUL,
  FAMILY_CONV,
  FAMILY_POOL,
} lower_family_t;

static stax_status_t classify(lower_t* L, lower_family_t* out_family, int32_t* out_node) {
  int32_t matmul = -1, conv = -1, pool = -1, rows = 0;
  for (int32_t n = 0; n < L->group->node_count; n++) {
    const stax_jit_node_t* node = &L->group->nodes[n];
    stax_op_t op = node->node->op;
    if (lower_is_matmul_op(op)) {
      if (matmul >= 0) return lower_refuse(L, "more than one MatMul/Gemm");
      matmul = n;
    } else if (lower_is_conv_op(op)) {
      if (conv >= 0) return lower_refuse(L, "more than one Conv");
      conv = n;
    } else if (lower_is_pool_op(op)) {
      if (pool >= 0) return lower_refuse(L, "more than one pooling node");
      pool = n;
    } else if (lower_is_row_op(op)) {
      rows++;
    } else if (lower_is_elementwise(op)) {
      STAX_RETURN_IF_ERROR(lower_check_elementwise(L, node));
    } else {
      return lower_refuse(L, "op %s (node '%s') has no JIT lowering", stax_op_name(op),
                          node->node->name ? node->node->name : "");
    }
  }
  /* One contraction per kernel: its epilogue is elementwise, in the contraction's space. */
  if (matmul >= 0 && conv >= 0) return lower_refuse(L, "a Conv and a MatMul/Gemm in one group");
  if (matmul >= 0 && rows > 0) return lower_refuse(L, "a MatMul and a reduction in one group");
  if (conv >= 0 && rows > 0) return lower_refuse(L, "a Conv and a reduction in one group");
  if (pool >= 0 && (matmul >= 0 || conv >= 0 || rows > 0))
    return lower_refuse(L, "a pooling node with a contraction or a reduction in one group");
  *out_node = matmul >= 0 ? matmul : conv >= 0 ? conv : pool;
  *out_family = matmul >= 0 ? FAMILY_MATMUL
                : conv >= 0 ? FAMILY_CONV
                : pool >= 0 ? FAMILY_POOL
                : rows > 0  ? FAMILY_ROWS
                            : FAMILY_ELEMENTWISE;
  return STAX_OK;
}

stax_jit_op_class_t stax_jit_op_class(stax_op_t op) {
  /* Pools head a group as a contraction does: an elementwise epilogue, no prologue. */
  if (lower_is_matmul_op(op) || lower_is_conv_op(op) || lower_is_pool_op(op))
    return STAX_JIT_OP_CONTRACTION;
  if (lower_is_row_op(op)) return STAX_JIT_OP_ROW;
  if (lower_is_elementwise(op)) return STAX_JIT_OP_ELEMENTWISE;
  return STAX_JIT_OP_UNSUPPORTED;
}

bool stax_jit_op_dtype_lowered(stax_op_t op, stax_dtype_t dtype) {
  if (stax_jit_op_class(op) == STAX_JIT_OP_CONTRACTION) return dtype == STAX_DTYPE_FLOAT32;
  return true;
}

bool stax_jit_op_walks_rows_repeatedly(stax_op_t op) {
  return op == STAX_OP_Softmax || op == STAX_OP_LogSoftmax || op == STAX_OP_LayerNormalization ||
         op == STAX_OP_ReduceLogSumExp;
}

bool stax_jit_op_costly(stax_op_t op) {
  switch (op) {
    case STAX_OP_Exp: case STAX_OP_Log: case STAX_OP_Tanh: case STAX_OP_Erf: case STAX_OP_Gelu:
    case STAX_OP_Sigmoid: case STAX_OP_Softplus: case STAX_OP_Elu: case STAX_OP_Selu:
    case STAX_OP_Celu: case STAX_OP_Pow: case STAX_OP_Sin: case STAX_OP_Cos: case STAX_OP_Tan:
    case STAX_OP_Asin: case STAX_OP_Acos: case STAX_OP_Atan: case STAX_OP_Sinh:
    case STAX_OP_Cosh: case STAX_OP_Asinh: case STAX_OP_Acosh: case STAX_OP_Atanh:
      return true;
    default: return false;
  }
}

/* The example row count a rows-generic group is lowered at. */
#define ROWS_EXAMPLE 4093

/* Checks a rows-generic group's rows values (rank >= 1; not temporaries only) and gives
 * every one the example row count; *out_values is a copy the caller frees. */
static stax_status_t rows_generic_values(const stax_jit_group_t* group, stax_allocator_t allocator,
                                         stax_jit_value_t** out_values) {
  *out_values = NULL;
  bool any = false;
  for (int32_t v = 0; v < group->value_count; v++) {
    const stax_jit_value_t* value = &group->values[v];
    if (!value->rows) continue;
    if (value->rank < 1)
      return malformed(group, "rows value %d has rank 0", (int)v);
    any = true;
  }
  if (!any) return malformed(group, "rows-generic group without a rows value");
  stax_jit_value_t* values = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(allocator, (size_t)group->value_count,
                                             sizeof(*values), (void**)&values));
  for (int32_t v = 0; v < group->value_count; v++) {
    values[v] = group->values[v];
    if (values[v].rows) values[v].dims[0] = ROWS_EXAMPLE;
  }
  *out_values = values;
  return STAX_OK;
}

static stax_status_t lower_group_checked(const stax_jit_group_t* group,
                                         const stax_jit_lower_options_t* options,
                                         stax_allocator_t allocator,
                                         stax_kir_kernel_t** out_kernel);

stax_status_t stax_jit_lower_group(const stax_jit_group_t* group,
                                   const stax_jit_lower_options_t* options,
                                   stax_allocator_t allocator, stax_kir_kernel_t** out_kernel) {
  *out_kernel = NULL;
  if (!group->rows_generic) return lower_group_checked(group, options, allocator, out_kernel);
  STAX_RETURN_IF_ERROR(check_group(group));
  stax_jit_value_t* values = NULL;
  STAX_RETURN_IF_ERROR(rows_generic_values(group, allocator, &values));
  stax_jit_group_t example = *group;
  example.values = values;
  stax_status_t status = lower_group_checked(&example, options, allocator, out_kernel);
  stax_allocator_free(allocator, values, sizeof(*values) * (size_t)group->value_count);
  return status;
}

static stax_status_t lower_group_checked(const stax_jit_group_t* group,
                                         const stax_jit_lower_options_t* options,
                                         stax_allocator_t allocator,
                                         stax_kir_kernel_t** out_kernel) {
  *out_kernel = NULL;
  STAX_RETURN_IF_ERROR(check_group(group));
  lower_t L;
  memset(&L, 0, sizeof(L));
  L.group = group;
  L.options = options;
  L.allocator = allocator;
  L.vector_lanes_f32 = options->vector_bits / 32 < 2 ? 2 : options->vector_bits / 32;
  stax_status_t status = lower_allocate(&L);
  if (status == STAX_OK)
    status = check_argument_list(group, group->input_count, group->inputs, STAX_JIT_VALUE_INPUT,
                                 L.buffer, 0);
  if (status == STAX_OK)
    status = check_argument_list(group, group->output_count, group->outputs, STAX_JIT_VALUE_OUTPUT,
                                 L.buffer, group->input_count);
  if (status == STAX_OK) status = check_nodes(&L);
  lower_family_t family = FAMILY_ELEMENTWISE;
  int32_t contraction = -1;
  if (status == STAX_OK) status = classify(&L, &family, &contraction);
  if (status == STAX_OK) status = stax_kir_kernel_create(allocator, group_name(group), &L.kernel);
  if (status == STAX_OK && group->rows_generic) {
    if (family == FAMILY_CONV || family == FAMILY_POOL)
      status = lower_refuse(&L, "%s has no rows-generic lowering",
                            family == FAMILY_CONV ? "Conv" : "pooling");
    else
      stax_kir_set_rows_generic(L.kernel, ROWS_EXAMPLE, 0);
  }
  if (status == STAX_OK && group->symbolic) {
    if (group->rows_generic)
      status = lower_refuse(&L, "a group cannot be both rows-generic and symbolic");
    else
      stax_kir_set_symbolic(L.kernel);
    if (status == STAX_OK) status = add_buffers(&L);
    if (status == STAX_OK && family == FAMILY_ELEMENTWISE)
      status = lower_elementwise_symbolic(&L);
    else if (status == STAX_OK && family == FAMILY_MATMUL)
      status = lower_matmul_symbolic(&L, contraction);
    else if (status == STAX_OK && family == FAMILY_CONV)
      status = lower_conv_group(&L, contraction);
    else if (status == STAX_OK && family == FAMILY_POOL)
      status = lower_pool_group(&L, contraction);
    else if (status == STAX_OK)
      status = lower_row_group(&L);
  } else if (status == STAX_OK) {
    status = add_buffers(&L);
  }
  if (status == STAX_OK && !group->symbolic) {
    switch (family) {
      case FAMILY_MATMUL: status = lower_matmul_group(&L, contraction); break;
      case FAMILY_CONV: status = lower_conv_group(&L, contraction); break;
      case FAMILY_POOL: status = lower_pool_group(&L, contraction); break;
      case FAMILY_ROWS: status = lower_row_group(&L); break;
      case FAMILY_ELEMENTWISE: status = lower_elementwise_group(&L); break;
    }
  }
  if (status == STAX_OK) status = stax_kir_kernel_status(L.kernel);
  if (status == STAX_OK) {
    status = stax_kir_verify(L.kernel);
    /* A lowering bug: the log gets the kernel the verifier refused. */
    if (status != STAX_OK && stax_log_enabled(STAX_LOG_JIT)) {
      fprintf(stderr, "[stax:jit] kernel IR refused by the verifier:\n");
      stax_status_free(stax_kir_print_to_file(L.kernel, stderr));
    }
  }
  lower_free(&L);
  if (status != STAX_OK) {
    stax_kir_kernel_destroy(L.kernel);
    return status;
  }
  *out_kernel = L.kernel;
  return STAX_OK;
}
