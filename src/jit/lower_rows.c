/* Row kernels: groups whose reductions all run over the last axis of the iteration space
 * (Softmax, LogSoftmax, LayerNormalization, and the Reduce* ops), with elementwise producers
 * and consumers around them. One kernel walks the rows (the outer dims, split over the thread
 * pool) and, for each row:
 *   - runs the passes of each reduction node in order, each a vector loop over the row that
 *     REDUCEs an expression of the node's input into a local (Softmax: max, then sum of
 *     exp(x - max); LayerNormalization: sum, then sum of squared deviations; ...), and
 *     derives the node's per-row results (1/sum, mean, 1/sqrt(var + eps)) in scalar locals,
 *   - stores the per-row outputs (reductions, LayerNormalization's Mean and InvStdDev, and
 *     what is computed from them),
 *   - runs one final vector pass storing the outputs that span the row.
 * A reduction's input may use earlier reductions' results, so a hand-written LayerNorm or
 * RMSNorm (ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt, Div...) is one kernel that reads each
 * row a few times and writes it once. Producers are recomputed in each pass rather than
 * stored: cheaper than a round trip through memory for the elementwise chains that occur.
 * The exception is exp: a Softmax whose output no other node of the group reads stores
 * exp(x - max) into that output during its sum pass, and the final pass scales it in place
 * (one exp per element instead of two; exp is the costly part of the row).
 *
 * Values are FULL (aligned to every iteration dim) or ROW (the output of a reduction without
 * keepdims and what is computed from it: aligned to the dims before the reduced one); see
 * lower_internal.h. Floating-point inputs only (accumulation is in the input's dtype). */
#include <math.h>
#include <string.h>

#include "jit/lower_internal.h"
#include "runtime/tensor_internal.h"

#define PARALLEL_MIN_ELEMENTS 32768
#define PARALLEL_TASK_ELEMENTS 16384

/* Per row node: what it reduces and the locals holding its per-row results. */
typedef struct row_node_t {
  bool used;     /* the node is a row op */
  int32_t input; /* X */
  bool keepdims;
  double epsilon; /* LayerNormalization */
  int32_t first;  /* local: max (softmax family, LogSumExp) or sum */
  int32_t second; /* local: sum of exp / squared deviations */
  int32_t result; /* local: the node's per-row result (1/sum, mean, the reduction) */
  int32_t extra;  /* local: LayerNormalization's 1/sqrt(var + eps) */
  int32_t stored; /* Softmax: the output value whose buffer holds exp(x - max), or -1 */
} row_node_t;

/* The ops a row kernel reduces with. */
/* clang-format off */
#define ROW_OPS(X)                                                                       \
  X(Softmax) X(LogSoftmax) X(LayerNormalization) X(ReduceSum) X(ReduceMean) X(ReduceMax) \
  X(ReduceMin) X(ReduceProd) X(ReduceL1) X(ReduceL2) X(ReduceSumSquare) X(ReduceLogSum)  \
  X(ReduceLogSumExp)
/* clang-format on */

bool lower_is_row_op(stax_op_t op) {
  switch (op) {
#define STAX_CASE(name) case STAX_OP_##name:
    ROW_OPS(STAX_CASE)
#undef STAX_CASE
    return true;
    default: return false;
  }
}

static bool is_reduce(stax_op_t op) {
  return lower_is_row_op(op) && op != STAX_OP_Softmax && op != STAX_OP_LogSoftmax &&
         op != STAX_OP_LayerNormalization;
}

static const char* node_name(const stax_jit_node_t* node) {
  return node->node->name ? node->node->name : "";
}

/* ---- analysis ---------------------------------------------------------------------------- */

/* Checks that node reduces the last axis of its input; fills keepdims and epsilon. */
static stax_status_t check_axis(lower_t* L, const stax_jit_node_t* node, row_node_t* row) {
  stax_op_t op = node->node->op;
  const stax_jit_value_t* x = lower_value(L, row->input);
  int32_t rank = x->rank;
  if (rank < 1)
    return lower_refuse(L, "%s node '%s' on a scalar", stax_op_name(op), node_name(node));
  if (!is_reduce(op)) {
    int64_t axis = -1;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(node->node, "axis", -1, &axis));
    if (axis != -1 && axis != rank - 1)
      return lower_refuse(L, "%s node '%s' over axis %lld (only the last axis fuses)",
                          stax_op_name(op), node_name(node), (long long)axis);
    if (op == STAX_OP_LayerNormalization) {
      STAX_RETURN_IF_ERROR(lower_attr_float(node, "epsilon", 1e-5f, &row->epsilon));
    }
    row->keepdims = true;
    return STAX_OK;
  }
  int64_t keepdims = 1, noop = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(node->node, "keepdims", 1, &keepdims));
  STAX_RETURN_IF_ERROR(stax_node_attr_int(node->node, "noop_with_empty_axes", 0, &noop));
  row->keepdims = keepdims != 0;
  int32_t count = -1;
  const int64_t* axes = NULL;
  int64_t from_input[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(node->node, "axes", &count, &axes));
  if (node->input_count > 1 && node->inputs[1] >= 0) {
    const stax_tensor_t* constant = lower_value(L, node->inputs[1])->constant;
    int64_t n = constant ? stax_tensor_element_count(constant) : -1;
    if (!constant || n > STAX_MAX_RANK || stax_tensor_rank(constant) > 1)
      return lower_refuse(L, "%s node '%s' with axes not known at compile time", stax_op_name(op),
                          node_name(node));
    stax_convert_elements(stax_tensor_dtype(constant), stax_tensor_data(constant), STAX_DTYPE_INT64,
                          from_input, (size_t)n);
    count = (int32_t)n;
    axes = from_input;
  }
  bool all = count <= 0; /* no axes: every axis, unless noop */
  if (all && noop)
    return lower_refuse(L, "%s node '%s' with noop_with_empty_axes", stax_op_name(op),
                        node_name(node));
  bool last_only = all ? rank == 1 : count == 1 && (axes[0] == -1 || axes[0] == rank - 1);
  if (!last_only)
    return lower_refuse(L, "%s node '%s' does not reduce just the last axis", stax_op_name(op),
                        node_name(node));
  return STAX_OK;
}

/* Spaces of the node outputs, the iteration shape, and every value fitting it. */
static stax_status_t analyze(lower_t* L, row_node_t* rows) {
  const stax_jit_group_t* group = L->group;
  /* The iteration shape: the broadcast of the FULL values (node outputs in FULL space and the
   * reductions' inputs). */
  for (int32_t n = 0; n < group->node_count; n++) {
    const stax_jit_node_t* node = &group->nodes[n];
    stax_op_t op = node->node->op;
    lower_space_t space = LOWER_FULL;
    if (lower_is_row_op(op)) {
      space = is_reduce(op) && !rows[n].keepdims ? LOWER_ROW : LOWER_FULL;
    } else {
      for (int32_t i = 0; i < node->input_count; i++) {
        int32_t v = node->inputs[i];
        if (v >= 0 && L->producer[v] >= 0 && L->space[v] == LOWER_ROW) space = LOWER_ROW;
      }
    }
    for (int32_t o = 0; o < node->output_count; o++)
      if (node->outputs[o] >= 0) L->space[node->outputs[o]] = space;
  }
  int32_t rank = 0;
  int64_t dims[STAX_MAX_RANK];
  for (int32_t v = 0; v < group->value_count; v++) {
    bool full_value = (L->producer[v] >= 0 && L->space[v] == LOWER_FULL);
    for (int32_t n = 0; n < group->node_count; n++)
      if (rows[n].used && rows[n].input == v) full_value = true;
    if (!full_value) continue;
    const stax_jit_value_t* value = lower_value(L, v);
    if (value->rank > rank) {
      int32_t shift = value->rank - rank;
      for (int32_t d = rank - 1; d >= 0; d--) dims[d + shift] = dims[d];
      for (int32_t d = 0; d < shift; d++) dims[d] = 1;
      rank = value->rank;
    }
    for (int32_t d = 0; d < value->rank; d++) {
      int64_t* target = &dims[rank - value->rank + d];
      if (*target == 1) *target = value->dims[d];
    }
  }
  L->rank = rank;
  memcpy(L->dims, dims, sizeof(int64_t) * (size_t)rank);
  if (rank < 1 || dims[rank - 1] < 1) return lower_refuse(L, "rows of length 0 (or no row axis)");

  /* Every value must fit its space; external inputs the spaces of their readers. */
  for (int32_t n = 0; n < group->node_count; n++) {
    const stax_jit_node_t* node = &group->nodes[n];
    lower_space_t space =
        node->output_count && node->outputs[0] >= 0 ? L->space[node->outputs[0]] : LOWER_FULL;
    if (rows[n].used) space = LOWER_FULL; /* a reduction reads its input in FULL space */
    for (int32_t i = 0; i < node->input_count; i++) {
      int32_t v = node->inputs[i];
      if (v < 0 || (rows[n].used && is_reduce(node->node->op) && i > 0)) continue; /* axes */
      bool row_value = L->producer[v] >= 0 && L->space[v] == LOWER_ROW;
      if (space == LOWER_FULL && row_value)
        return lower_refuse(L,
                            "node '%s' broadcasts a reduced value (keepdims=0) against the "
                            "rows",
                            node_name(node));
      bool fits = space == LOWER_FULL ? lower_value_fits(L, v, 0, rank)
                                      : lower_value_fits(L, v, 0, rank - 1);
      if (!fits)
        return lower_refuse(L, "value '%s' does not fit the row space", lower_value_name(L, v));
    }
    if (rows[n].used) {
      const stax_jit_value_t* x = lower_value(L, rows[n].input);
      if (x->dims[x->rank - 1] != dims[rank - 1])
        return lower_refuse(L, "%s node '%s' reduces a broadcast axis",
                            stax_op_name(node->node->op), node_name(node));
      if (x->dtype != STAX_DTYPE_FLOAT32 && x->dtype != STAX_DTYPE_FLOAT64 &&
          !stax_dtype_is_half(x->dtype))
        return lower_refuse(L, "%s node '%s' on %s", stax_op_name(node->node->op), node_name(node),
                            stax_dtype_name(x->dtype));
    }
  }
  /* Outputs: whole rows, or one element per row, never broadcast over rows. */
  for (int32_t i = 0; i < group->output_count; i++) {
    const stax_jit_value_t* out = lower_value(L, group->outputs[i]);
    bool row_space = L->space[group->outputs[i]] == LOWER_ROW;
    int32_t want_rank = row_space ? rank - 1 : rank;
    bool ok = out->rank == want_rank;
    for (int32_t d = 0; ok && d < want_rank; d++)
      ok = out->dims[d] == dims[d] || (!row_space && d == rank - 1 && out->dims[d] == 1);
    if (!ok)
      return lower_refuse(L, "output '%s' does not cover the rows",
                          lower_value_name(L, group->outputs[i]));
  }
  return STAX_OK;
}

/* ---- emission ---------------------------------------------------------------------------- */

typedef struct row_emitter_t {
  lower_t* L;
  stax_kir_kernel_t* k;
  stax_kir_block_t* body; /* the per-row block */
  int32_t width;
  int32_t pass; /* for loop names */
} row_emitter_t;

static const stax_kir_expr_t* fc(row_emitter_t* e, stax_dtype_t dtype, double value) {
  return stax_kir_float(e->k, dtype, value);
}

/* Per-row (scalar) context: the row dim's form is 0, for values constant along the row. */
static void scalar_point(row_emitter_t* e) {
  e->L->forms[e->L->rank - 1] = stax_kir_index_constant(0);
  lower_new_point(e->L);
}

/* A vector loop over the row; the current point moves into it. */
static stax_kir_block_t* row_pass(row_emitter_t* e, int32_t max_unroll) {
  char name[16];
  snprintf(name, sizeof(name), "k%d", (int)e->pass++);
  int64_t length = e->L->dims[e->L->rank - 1];
  int32_t length_param = e->L->group->symbolic ? e->L->dim_params[e->L->rank - 1] : -1;
  stax_kir_loop_t* loop =
      stax_kir_add_loop(e->k, e->body, name, length_param >= 0 ? 0 : length);
  if (!loop) return NULL;
  loop->vector_width = e->width;
  loop->unroll = length >= 8 * e->width ? max_unroll : length >= 4 * e->width ? 2 : 1;
  if (length_param >= 0) {
    loop->extent_param = length_param; /* any length: the backend peels the tail */
    loop->unroll = 2;
  }
  e->L->forms[e->L->rank - 1] = stax_kir_index_constant(0);
  stax_kir_index_add_term(e->k, &e->L->forms[e->L->rank - 1], stax_kir_loop_id(e->k, loop), 1);
  lower_new_point(e->L);
  return &loop->body;
}

static int32_t new_local(row_emitter_t* e, const char* what, int32_t node, stax_dtype_t dtype) {
  char name[32];
  snprintf(name, sizeof(name), "%s%d", what, (int)node);
  return stax_kir_add_local(e->k, name, dtype);
}

/* One REDUCE pass: local (declared with `init`) op= f(X) over the row. */
typedef enum transform_e {
  T_NONE,
  T_SQUARE,
  T_ABS,
  T_EXP_SHIFTED
} transform_t;

static int32_t reduce_pass(row_emitter_t* e, int32_t node, const char* what, row_node_t* row,
                           stax_kir_binary_op_t op, double init, transform_t transform,
                           int32_t shift_local) {
  stax_dtype_t dtype = lower_compute_dtype(lower_value(e->L, row->input)->dtype);
  int32_t local = new_local(e, what, node, dtype);
  scalar_point(e);
  stax_kir_add_declare(e->k, e->body, local, fc(e, dtype, init));
  stax_kir_block_t* block = row_pass(e, 4);
  const stax_kir_expr_t* x = lower_value_expr(e->L, row->input, LOWER_FULL);
  const stax_kir_expr_t* shift = shift_local >= 0 ? stax_kir_local(e->k, shift_local) : NULL;
  switch (transform) {
    case T_NONE: break;
    case T_SQUARE: x = stax_kir_binary(e->k, STAX_KIR_MUL, x, x); break;
    case T_ABS: x = stax_kir_unary(e->k, STAX_KIR_ABS, x); break;
    case T_EXP_SHIFTED:
      x = stax_kir_unary(e->k, STAX_KIR_EXP, stax_kir_binary(e->k, STAX_KIR_SUB, x, shift));
      break;
  }
  stax_kir_add_reduce(e->k, block, local, op, x);
  return local;
}

/* Declares local = value in the row body (scalar context). */
static int32_t derive(row_emitter_t* e, const char* what, int32_t node,
                      const stax_kir_expr_t* value) {
  if (!value) return -1;
  int32_t local = new_local(e, what, node, value->dtype);
  stax_kir_add_declare(e->k, e->body, local, value);
  return local;
}

static const stax_kir_expr_t* read(row_emitter_t* e, int32_t local) {
  return stax_kir_local(e->k, local);
}

static bool spans_row(const lower_t* L, int32_t v, int64_t length);

/* A Softmax whose output is a group output spanning the row and read by no other node of the
 * group: its sum pass can store exp(x - max) into that output, so the final pass only scales
 * (one exp per element instead of two). */
static int32_t softmax_exp_target(lower_t* L, const stax_jit_node_t* node, int64_t length) {
  if (node->output_count < 1) return -1;
  int32_t v = node->outputs[0];
  if (v < 0 || L->uses[v] != 0 || L->buffer[v] < 0 || L->space[v] == LOWER_ROW) return -1;
  if (lower_value(L, v)->role != STAX_JIT_VALUE_OUTPUT || !spans_row(L, v, length)) return -1;
  /* A 16-bit output would round the exps before the scaling (softmax.c parks them only in
   * float32/float64 outputs). */
  if (stax_dtype_is_half(lower_value(L, v)->dtype)) return -1;
  return v;
}

/* The sum of exp(x - max) over the row, each exp also stored into output `target`. */
static int32_t exp_sum_store_pass(row_emitter_t* e, int32_t node, row_node_t* row,
                                  int32_t target) {
  stax_kir_kernel_t* k = e->k;
  stax_dtype_t dtype = lower_compute_dtype(lower_value(e->L, row->input)->dtype);
  int32_t sum = new_local(e, "sum", node, dtype);
  scalar_point(e);
  stax_kir_add_declare(k, e->body, sum, fc(e, dtype, 0));
  stax_kir_block_t* block = row_pass(e, 4);
  const stax_kir_expr_t* x = lower_value_expr(e->L, row->input, LOWER_FULL);
  int32_t value = new_local(e, "exp", node, dtype);
  stax_kir_add_declare(
      k, block, value,
      stax_kir_unary(k, STAX_KIR_EXP, stax_kir_binary(k, STAX_KIR_SUB, x, read(e, row->first))));
  stax_kir_index_t index = lower_value_index(e->L, target, e->L->rank);
  stax_kir_add_store(k, block, e->L->buffer[target], &index,
                     stax_kir_cast(k, lower_value(e->L, target)->dtype, read(e, value)));
  stax_kir_add_reduce(k, block, sum, STAX_KIR_ADD, read(e, value));
  row->stored = target;
  return sum;
}

static void emit_row_node(row_emitter_t* e, int32_t n, row_node_t* row) {
  lower_t* L = e->L;
  stax_kir_kernel_t* k = e->k;
  const stax_jit_node_t* node = &L->group->nodes[n];
  stax_op_t op = node->node->op;
  stax_dtype_t dtype = lower_compute_dtype(lower_value(L, row->input)->dtype);
  double length = (double)L->dims[L->rank - 1];
  switch (op) {
    case STAX_OP_Softmax:
    case STAX_OP_LogSoftmax:
    case STAX_OP_ReduceLogSumExp: {
      row->first = reduce_pass(e, n, "max", row, STAX_KIR_MAX, -INFINITY, T_NONE, -1);
      scalar_point(e);
      int32_t shift = row->first;
      if (op == STAX_OP_ReduceLogSumExp) {
        /* reduce.c's shift: the max when finite, else 0 (all -inf stays -inf, NaN stays). */
        const stax_kir_expr_t* m = read(e, row->first);
        const stax_kir_expr_t* finite =
            stax_kir_unary(k, STAX_KIR_NOT,
                           stax_kir_binary(k, STAX_KIR_OR, stax_kir_unary(k, STAX_KIR_IS_INF, m),
                                           stax_kir_unary(k, STAX_KIR_IS_NAN, m)));
        shift = derive(e, "shift", n, stax_kir_select(k, finite, m, fc(e, dtype, 0)));
      }
      int32_t target = op == STAX_OP_Softmax ? softmax_exp_target(L, node, L->dims[L->rank - 1]) : -1;
      row->second = target >= 0 ? exp_sum_store_pass(e, n, row, target)
                                : reduce_pass(e, n, "sum", row, STAX_KIR_ADD, 0, T_EXP_SHIFTED, shift);
      scalar_point(e);
      const stax_kir_expr_t* sum = read(e, row->second);
      if (op == STAX_OP_Softmax) {
        row->result =
            derive(e, "inverse", n, stax_kir_binary(k, STAX_KIR_DIV, fc(e, dtype, 1), sum));
      } else if (op == STAX_OP_LogSoftmax) {
        /* (x - max) - log(sum): in float32, x - (max + log(sum)) rounds log(sum) to the row's
         * magnitude (the node suite's test_logsoftmax_large_number, rows near 1e4, lost 2.4e-4
         * that way; the generic kernel, softmax.c, works in double and can fold them). */
        row->result = derive(e, "logsum", n, stax_kir_unary(k, STAX_KIR_LOG, sum));
      } else {
        row->result = derive(
            e, "logsum", n,
            stax_kir_binary(k, STAX_KIR_ADD, read(e, shift), stax_kir_unary(k, STAX_KIR_LOG, sum)));
      }
      break;
    }
    case STAX_OP_LayerNormalization: {
      row->first = reduce_pass(e, n, "sum", row, STAX_KIR_ADD, 0, T_NONE, -1);
      scalar_point(e);
      int32_t rough = derive(e, "rough_mean", n,
                             stax_kir_binary(k, STAX_KIR_DIV, read(e, row->first),
                                             fc(e, dtype, length)));
      /* The corrected two-pass variance: one pass sums d = x - rough_mean and d^2, then
       * mean = rough_mean + sum(d)/n and variance = sum(d^2)/n - (sum(d)/n)^2. In float32 the
       * first pass's sum of a row far from zero (1000 +- 1) is off by ulps of the sum, which
       * the plain mean carried into every output (2e-4 against the generic kernel's double);
       * sum(d) measures and removes that error. */
      int32_t deviations = new_local(e, "deviations", n, dtype);
      row->second = new_local(e, "squares", n, dtype);
      scalar_point(e);
      stax_kir_add_declare(k, e->body, deviations, fc(e, dtype, 0));
      stax_kir_add_declare(k, e->body, row->second, fc(e, dtype, 0));
      stax_kir_block_t* block = row_pass(e, 4);
      const stax_kir_expr_t* d = stax_kir_binary(
          k, STAX_KIR_SUB, lower_value_expr(L, row->input, LOWER_FULL), read(e, rough));
      stax_kir_add_reduce(k, block, deviations, STAX_KIR_ADD, d);
      stax_kir_add_reduce(k, block, row->second, STAX_KIR_ADD, stax_kir_binary(k, STAX_KIR_MUL, d, d));
      scalar_point(e);
      int32_t correction = derive(e, "correction", n,
                                  stax_kir_binary(k, STAX_KIR_DIV, read(e, deviations),
                                                  fc(e, dtype, length)));
      row->result = derive(e, "mean", n,
                           stax_kir_binary(k, STAX_KIR_ADD, read(e, rough), read(e, correction)));
      const stax_kir_expr_t* variance = stax_kir_binary(
          k, STAX_KIR_SUB,
          stax_kir_binary(k, STAX_KIR_DIV, read(e, row->second), fc(e, dtype, length)),
          stax_kir_binary(k, STAX_KIR_MUL, read(e, correction), read(e, correction)));
      row->extra =
          derive(e, "inverse_std", n,
                 stax_kir_binary(k, STAX_KIR_DIV, fc(e, dtype, 1),
                                 stax_kir_unary(k, STAX_KIR_SQRT,
                                                stax_kir_binary(k, STAX_KIR_ADD, variance,
                                                                fc(e, dtype, row->epsilon)))));
      break;
    }
    default: {
      stax_kir_binary_op_t reduce_op = STAX_KIR_ADD;
      double init = 0;
      transform_t transform = T_NONE;
      if (op == STAX_OP_ReduceMax) reduce_op = STAX_KIR_MAX, init = -INFINITY;
      if (op == STAX_OP_ReduceMin) reduce_op = STAX_KIR_MIN, init = INFINITY;
      if (op == STAX_OP_ReduceProd) reduce_op = STAX_KIR_MUL, init = 1;
      if (op == STAX_OP_ReduceL1) transform = T_ABS;
      if (op == STAX_OP_ReduceL2 || op == STAX_OP_ReduceSumSquare) transform = T_SQUARE;
      row->first = reduce_pass(e, n, "acc", row, reduce_op, init, transform, -1);
      scalar_point(e);
      const stax_kir_expr_t* accumulated = read(e, row->first);
      const stax_kir_expr_t* value = accumulated;
      if (op == STAX_OP_ReduceMean)
        value = stax_kir_binary(k, STAX_KIR_DIV, value, fc(e, dtype, length));
      if (op == STAX_OP_ReduceL2) value = stax_kir_unary(k, STAX_KIR_SQRT, value);
      if (op == STAX_OP_ReduceLogSum) value = stax_kir_unary(k, STAX_KIR_LOG, value);
      row->result = value == accumulated ? row->first : derive(e, "result", n, value);
      break;
    }
  }
  /* Results that are plain per-row values become fixed expressions for their readers. */
  if (is_reduce(op) && node->outputs[0] >= 0) {
    int32_t out = node->outputs[0];
    L->fixed[out] = lower_round_to(L, lower_value(L, out)->dtype, read(e, row->result));
  }
  if (op == STAX_OP_LayerNormalization) {
    if (node->output_count > 1 && node->outputs[1] >= 0)
      L->fixed[node->outputs[1]] =
          lower_round_to(L, lower_value(L, node->outputs[1])->dtype, read(e, row->result));
    if (node->output_count > 2 && node->outputs[2] >= 0)
      L->fixed[node->outputs[2]] =
          lower_round_to(L, lower_value(L, node->outputs[2])->dtype, read(e, row->extra));
  }
}

const stax_kir_expr_t* lower_row_output_expr(lower_t* L, int32_t n, int32_t slot,
                                             lower_space_t space) {
  (void)space;
  row_node_t* row = L->node_data[n];
  const stax_jit_node_t* node = &L->group->nodes[n];
  stax_kir_kernel_t* k = L->kernel;
  if (!row || slot != 0) {
    stax_kir_kernel_fail(k, stax_status_make(STAX_INTERNAL,
                                             "row node %d output %d has no "
                                             "expression here",
                                             (int)n, (int)slot));
    return NULL;
  }
  if (node->node->op == STAX_OP_Softmax && row->stored >= 0) {
    /* The sum pass left exp(x - max) in the output; scale it in place. */
    stax_kir_index_t index = lower_value_index(L, row->stored, L->rank);
    return stax_kir_binary(k, STAX_KIR_MUL, stax_kir_load(k, L->buffer[row->stored], &index),
                           stax_kir_local(k, row->result));
  }
  const stax_kir_expr_t* x = lower_value_expr(L, row->input, LOWER_FULL);
  switch (node->node->op) {
    case STAX_OP_Softmax:
      return stax_kir_binary(
          k, STAX_KIR_MUL,
          stax_kir_unary(k, STAX_KIR_EXP,
                         stax_kir_binary(k, STAX_KIR_SUB, x, stax_kir_local(k, row->first))),
          stax_kir_local(k, row->result));
    case STAX_OP_LogSoftmax:
      return stax_kir_binary(
          k, STAX_KIR_SUB, stax_kir_binary(k, STAX_KIR_SUB, x, stax_kir_local(k, row->first)),
          stax_kir_local(k, row->result));
    case STAX_OP_LayerNormalization: {
      const stax_kir_expr_t* y = stax_kir_binary(
          k, STAX_KIR_MUL, stax_kir_binary(k, STAX_KIR_SUB, x, stax_kir_local(k, row->result)),
          stax_kir_local(k, row->extra));
      y = stax_kir_binary(k, STAX_KIR_MUL, y, lower_value_expr(L, node->inputs[1], LOWER_FULL));
      if (node->input_count > 2 && node->inputs[2] >= 0)
        y = stax_kir_binary(k, STAX_KIR_ADD, y, lower_value_expr(L, node->inputs[2], LOWER_FULL));
      return y;
    }
    default: return stax_kir_local(k, row->result);
  }
}

/* Whether output v spans the row (stored in the final pass) rather than being constant
 * along it. */
static bool spans_row(const lower_t* L, int32_t v, int64_t length) {
  const stax_jit_value_t* out = lower_value(L, v);
  if (L->group->symbolic && L->dim_params[L->rank - 1] >= 0)
    return lower_dim_open(L, v, out->rank - 1);
  return out->dims[out->rank - 1] == length && length > 1;
}

stax_status_t lower_row_group(lower_t* L) {
  const stax_jit_group_t* group = L->group;
  stax_kir_kernel_t* k = L->kernel;
  stax_status_t status = STAX_OK;
  row_node_t* storage = NULL;
  size_t storage_size = sizeof(row_node_t) * (size_t)(group->node_count + 1);
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(L->allocator, 1, storage_size, (void**)&storage));
  row_node_t* rows = storage;
  for (int32_t n = 0; n < group->node_count && status == STAX_OK; n++) {
    if (!lower_is_row_op(group->nodes[n].node->op)) continue;
    L->node_data[n] = &rows[n];
    rows[n].used = true;
    rows[n].input = group->nodes[n].inputs[0];
    rows[n].first = rows[n].second = rows[n].result = rows[n].extra = -1;
    rows[n].stored = -1;
    status = check_axis(L, &group->nodes[n], &rows[n]);
    if (status == STAX_OK && group->nodes[n].node->op == STAX_OP_LayerNormalization &&
        group->nodes[n].inputs[1] < 0)
      status = lower_refuse(L, "LayerNormalization without a scale");
  }
  if (status == STAX_OK) status = analyze(L, rows);
  if (status != STAX_OK) goto done;

  /* Rows-generic: dim 0 is R; the reduced axis must be a fixed one after it. */
  bool generic = group->rows_generic;
  if (generic) {
    if (L->rank < 2) {
      status = lower_refuse(L, "rows-generic row kernel without a fixed row axis");
      goto done;
    }
    for (int32_t v = 0; v < group->value_count && status == STAX_OK; v++) {
      bool used = L->uses[v] > 0 || L->producer[v] >= 0;
      int32_t space_rank = L->space[v] == LOWER_ROW ? L->rank - 1 : L->rank;
      if (used && !lower_rows_value_fits(L, v, space_rank))
        status = lower_refuse(L, "value '%s' does not line up with the rows",
                              lower_value_name(L, v));
    }
    for (int32_t i = 0; i < group->output_count && status == STAX_OK; i++)
      if (!lower_value(L, group->outputs[i])->rows)
        status = lower_refuse(L, "output '%s' is not a rows value",
                              lower_value_name(L, group->outputs[i]));
    if (status != STAX_OK) goto done;
  }
  if (group->symbolic) {
    status = lower_symbolic_space(L, L->rank, NULL, 0);
    if (status != STAX_OK) goto done;
  }
  /* The row loops: every outer dim of extent > 1, the first one parallel when worthwhile. */
  stax_kir_block_t* block = stax_kir_add_stage(k, "rows");
  int64_t length = L->dims[L->rank - 1], row_count = 1;
  for (int32_t d = 0; d + 1 < L->rank; d++) row_count *= L->dims[d];
  bool parallel =
      row_count > 1 && L->options->thread_count > 1 && row_count * length >= PARALLEL_MIN_ELEMENTS;
  if (generic && block) {
    parallel = L->options->thread_count > 1;
    int64_t per_row = row_count / L->dims[0] * length;
    k->stages[k->stage_count - 1]->parallel_min_rows =
        per_row > 0 ? (PARALLEL_MIN_ELEMENTS + per_row - 1) / per_row : 0;
  }
  /* Symbolic: the example's sizes say nothing about a call's; split over the largest fixed
   * outer dim (attention's heads: the batch may be 1), else the first, outermost. */
  int32_t order[STAX_MAX_RANK], order_count = 0;
  if (group->symbolic) {
    parallel = L->options->thread_count > 1;
    order_count = lower_symbolic_order(L, L->rank - 1, order);
  } else {
    for (int32_t d = 0; d + 1 < L->rank; d++) order[order_count++] = d;
  }
  bool first_loop = true;
  int64_t rows_inside = row_count;
  for (int32_t i = 0; i < order_count && block; i++) {
    int32_t d = order[i];
    L->forms[d] = stax_kir_index_constant(0);
    bool open = group->symbolic && L->dim_params[d] >= 0;
    if (L->dims[d] == 1 && !open) continue;
    char name[16];
    snprintf(name, sizeof(name), "r%d", (int)d);
    stax_kir_loop_t* loop = stax_kir_add_loop(k, block, name, open ? 0 : L->dims[d]);
    if (!loop) break;
    if (generic && d == 0) loop->extent_param = 0; /* R */
    if (open) loop->extent_param = L->dim_params[d];
    rows_inside /= L->dims[d] > 0 ? L->dims[d] : 1;
    if (first_loop && parallel) {
      loop->parallel = true;
      int64_t per_iteration = rows_inside * length;
      loop->grain = group->symbolic || per_iteration <= 0
                        ? 1
                        : (PARALLEL_TASK_ELEMENTS + per_iteration - 1) / per_iteration;
    }
    first_loop = false;
    stax_kir_index_add_term(k, &L->forms[d], stax_kir_loop_id(k, loop), 1);
    block = &loop->body;
  }
  if (!block) goto done;
  row_emitter_t e = {L, k, block, lower_vector_width(L), 0};
  for (int32_t n = 0; n < group->node_count; n++)
    if (rows[n].used) emit_row_node(&e, n, &rows[n]);

  /* Per-row outputs first (scalar context), then one pass for the outputs spanning rows. */
  scalar_point(&e);
  bool any_full = false;
  for (int32_t i = 0; i < group->output_count; i++) {
    int32_t v = group->outputs[i];
    bool row_space = L->space[v] == LOWER_ROW;
    if (!row_space && spans_row(L, v, length)) {
      any_full = true;
      continue;
    }
    lower_store_value(L, block, v, row_space ? LOWER_ROW : LOWER_FULL,
                      row_space ? L->rank - 1 : L->rank);
  }
  if (any_full) {
    stax_kir_block_t* pass = row_pass(&e, 2);
    for (int32_t i = 0; i < group->output_count; i++) {
      int32_t v = group->outputs[i];
      if (L->space[v] == LOWER_ROW || !spans_row(L, v, length)) continue;
      lower_store_value(L, pass, v, LOWER_FULL, L->rank);
    }
  }
  status = stax_kir_kernel_status(k);
done:
  for (int32_t n = 0; n < group->node_count; n++) L->node_data[n] = NULL;
  stax_allocator_free(L->allocator, storage, storage_size);
  return status;
}
