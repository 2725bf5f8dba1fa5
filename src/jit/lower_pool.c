/* MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool with an elementwise epilogue,
 * float32, 1 to 3 spatial dims, X [N, C, D1..Ds] of any strides.
 *
 * Windowed pools. The verifier proves every load in bounds and loads cannot be masked, so
 * instead of a padded copy each spatial dim's output positions are cut into segments whose
 * windows keep the same taps inside the input: a run of interior positions (every tap in
 * range) and the few positions near each edge where the padding clips the window (their own
 * tap range; with ceil_mode also the last window that runs past the end pad). A segment of
 * several positions is a loop (a vector loop over the innermost dim: the tails of rows that
 * are not a multiple of the vector are the backend's), a single position a constant. Per
 * output point the window is a nest of tap loops over the segment's tap range, in the generic
 * kernel's order (src/kernels/pool.c):
 *   - MaxPool keeps `best = v > best ? v : best` from the lowest finite float, so NaN never
 *     wins and, among equal values, the first one stays: the generic kernel's result, bit for
 *     bit (x86's maxps is exactly this select);
 *   - AveragePool sums in double and divides in double by the taps inside the input
 *     (count_include_pad = 0) or inside the explicitly padded input (= 1; the positions
 *     ceil_mode adds past the end pad never count), rounding once: the same operations in the
 *     same order as the generic kernel, so also bit for bit. A window with nothing in range
 *     gives the generic kernel's constant (the lowest float; NaN or 0 for the average).
 * Global pools reduce the whole plane: the innermost dim as a vector reduction (double sums for
 * the average; for the max, NaN replaced by the lowest float first). Lanes add in another
 * order than the generic kernel's serial sum (double sums, rounded once: within a float32
 * rounding), and a plane holding both -0 and +0 as its maximum may give the other zero.
 *
 * The planes (N x C) are the parallel loop, over the larger of N and C. The epilogue (the
 * group's elementwise ops over the pool's output) runs on the pooled value before the single
 * store. Refused (UNIMPLEMENTED, the group is interpreted): other dtypes, MaxPool's Indices
 * output, more than 3 spatial dims, an operand computed in the group, a window cut into more
 * than POOL_MAX_SEGMENTS segments per dim.
 *
 * Symbolic groups (the shape-generic tier, open batch or image sizes): a windowed pool becomes
 * a depthwise window without weights for lower_conv_symbolic.c where its tap count is fixed
 * (lower_pool_symbolic); a global pool loops over X's dims as parameters (global_symbolic). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "jit/lower_internal.h"
#include "kernels/gemm.h"
#include "runtime/tensor_internal.h"

#define POOL_MAX_SPATIAL 3
#define POOL_MAX_SEGMENTS 16
/* Window taps one parallel task should get at least. */
#define POOL_TASK_WORK 16384

/* Output positions [first, first + count) of one dim whose windows all have taps
 * [tap_lo, tap_hi) inside the input, and `padded` taps inside the padded input. */
typedef struct pool_segment_t {
  int64_t first, count;
  int64_t tap_lo, tap_hi;
  int64_t padded;
} pool_segment_t;

typedef struct pool_t {
  lower_t* L;
  stax_kir_kernel_t* k;
  const stax_jit_node_t* node;
  const char* name;
  stax_op_t op;
  int32_t x, out;
  int32_t spatial;
  bool is_max, global, count_include_pad;
  stax_window_t window;
  pool_segment_t segments[POOL_MAX_SPATIAL][POOL_MAX_SEGMENTS];
  int32_t segment_count[POOL_MAX_SPATIAL];
  /* The current point: the plane's forms and, per spatial dim, the output position's form and
   * its segment. */
  stax_kir_index_t n_form, c_form;
  stax_kir_index_t position[POOL_MAX_SPATIAL];
  const pool_segment_t* segment[POOL_MAX_SPATIAL];
  int32_t points; /* counter for local names */
} pool_t;

bool lower_is_pool_op(stax_op_t op) {
  return op == STAX_OP_MaxPool || op == STAX_OP_AveragePool || op == STAX_OP_GlobalAveragePool ||
         op == STAX_OP_GlobalMaxPool;
}

/* ---- analysis ---------------------------------------------------------------------------- */

/* The window through the generic kernel's attribute rules (a descriptor with X's rank and dims
 * stands in for the tensor). */
static stax_status_t read_window(pool_t* p) {
  const stax_jit_node_t* node = p->node;
  const stax_jit_value_t* x = lower_value(p->L, p->x);
  stax_window_t* w = &p->window;
  if (p->global) {
    memset(w, 0, sizeof(*w));
    w->spatial = p->spatial;
    for (int32_t i = 0; i < p->spatial; i++) {
      w->input[i] = x->dims[2 + i];
      w->kernel[i] = x->dims[2 + i];
      w->strides[i] = w->dilations[i] = 1;
      w->output[i] = 1;
    }
    return STAX_OK;
  }
  stax_tensor_t shape = {.dtype = x->dtype, .rank = x->rank};
  memcpy(shape.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  stax_kernel_call_t call = {.node = node->node};
  STAX_RETURN_IF_ERROR(stax_window_read(&call, &shape, w));
  if (!stax_node_attr_find(node->node, "kernel_shape"))
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s': attribute 'kernel_shape' is "
                            "required", stax_op_name(p->op), p->name);
  STAX_RETURN_IF_ERROR(stax_window_read_ints(&call, "kernel_shape", w->spatial, 1, 1, w->kernel,
                                             NULL));
  STAX_RETURN_IF_ERROR(stax_window_read_flag(&call, "ceil_mode", &w->ceil_mode));
  if (!p->is_max)
    STAX_RETURN_IF_ERROR(stax_window_read_flag(&call, "count_include_pad", &p->count_include_pad));
  return stax_window_forward(&call, w);
}

/* Cuts dim d's output positions into segments of equal tap ranges. */
static stax_status_t plan_segments(pool_t* p, int32_t d) {
  const stax_window_t* w = &p->window;
  int64_t stride = w->strides[d], dilation = w->dilations[d], kernel = w->kernel[d];
  int64_t input = w->input[d], begin = w->pads[d], end = w->pads[p->spatial + d];
  int32_t count = 0;
  for (int64_t o = 0; o < w->output[d]; o++) {
    int64_t start = o * stride - begin;
    int64_t lo = stax_ceil_div(-start, dilation);
    int64_t hi = stax_floor_div(input - 1 - start, dilation) + 1;
    lo = lo < 0 ? 0 : lo;
    hi = hi > kernel ? kernel : hi;
    if (hi < lo) hi = lo;
    int64_t padded_lo = stax_ceil_div(-begin - start, dilation);
    int64_t padded_hi = stax_floor_div(input + end - 1 - start, dilation) + 1;
    padded_lo = padded_lo < 0 ? 0 : padded_lo;
    padded_hi = padded_hi > kernel ? kernel : padded_hi;
    int64_t padded = padded_hi > padded_lo ? padded_hi - padded_lo : 0;
    pool_segment_t* last = count ? &p->segments[d][count - 1] : NULL;
    if (last && last->tap_lo == lo && last->tap_hi == hi && last->padded == padded) {
      last->count++;
      continue;
    }
    if (count == POOL_MAX_SEGMENTS)
      return lower_refuse(p->L, "%s node '%s': more than %d window shapes along dim %d",
                          stax_op_name(p->op), p->name, POOL_MAX_SEGMENTS, 2 + d);
    p->segments[d][count++] =
        (pool_segment_t){.first = o, .count = 1, .tap_lo = lo, .tap_hi = hi, .padded = padded};
  }
  p->segment_count[d] = count;
  return STAX_OK;
}

static stax_status_t analyze(pool_t* p, int32_t node_index) {
  lower_t* L = p->L;
  const stax_jit_node_t* node = &L->group->nodes[node_index];
  p->node = node;
  p->op = node->node->op;
  p->name = node->node->name ? node->node->name : "";
  p->is_max = p->op == STAX_OP_MaxPool || p->op == STAX_OP_GlobalMaxPool;
  p->global = p->op == STAX_OP_GlobalAveragePool || p->op == STAX_OP_GlobalMaxPool;
  p->x = node->input_count > 0 ? node->inputs[0] : -1;
  p->out = node->output_count > 0 ? node->outputs[0] : -1;
  if (p->x < 0 || p->out < 0)
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s' lacks X or Y",
                            stax_op_name(p->op), p->name);
  if (node->output_count > 1 && node->outputs[1] >= 0)
    return lower_refuse(L, "MaxPool node '%s' with its Indices output", p->name);
  const stax_jit_value_t* x = lower_value(L, p->x);
  const stax_jit_value_t* out = lower_value(L, p->out);
  if (!stax_jit_op_dtype_lowered(p->op, x->dtype) || out->dtype != x->dtype)
    return lower_refuse(L, "%s node '%s' on %s (float32 only)", stax_op_name(p->op), p->name,
                        stax_dtype_name(x->dtype));
  if (L->producer[p->x] >= 0)
    return lower_refuse(L, "the input of %s node '%s' is computed in the group",
                        stax_op_name(p->op), p->name);
  if (x->rank < 3 || x->rank - 2 > POOL_MAX_SPATIAL)
    return lower_refuse(L, "%s node '%s' with %d spatial dims (1 to %d supported)",
                        stax_op_name(p->op), p->name, (int)(x->rank - 2), POOL_MAX_SPATIAL);
  p->spatial = x->rank - 2;
  STAX_RETURN_IF_ERROR(read_window(p));
  int64_t dims[STAX_MAX_RANK] = {x->dims[0], x->dims[1]};
  for (int32_t i = 0; i < p->spatial; i++) dims[2 + i] = p->window.output[i];
  if (out->rank != x->rank || memcmp(out->dims, dims, sizeof(int64_t) * (size_t)x->rank) != 0)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s': output '%s' dims do not match the window",
                            stax_op_name(p->op), p->name, lower_value_name(L, p->out));
  /* The epilogue runs in the output's space. */
  L->rank = out->rank;
  memcpy(L->dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
  for (int32_t v = 0; v < L->group->value_count; v++) {
    if (v == p->x && L->uses[v] == 1) continue;
    bool used = L->uses[v] > 0 || L->producer[v] >= 0;
    if (used && !lower_value_fits(L, v, 0, L->rank))
      return lower_refuse(L, "value '%s' does not fit the %s output", lower_value_name(L, v),
                          stax_op_name(p->op));
  }
  for (int32_t i = 0; i < L->group->output_count; i++) {
    const stax_jit_value_t* o = lower_value(L, L->group->outputs[i]);
    if (o->rank != out->rank || memcmp(o->dims, out->dims, sizeof(int64_t) * (size_t)o->rank))
      return lower_refuse(L, "output '%s' is not %s-shaped",
                          lower_value_name(L, L->group->outputs[i]), stax_op_name(p->op));
  }
  if (!p->global && !L->group->symbolic)
    for (int32_t d = 0; d < p->spatial; d++) STAX_RETURN_IF_ERROR(plan_segments(p, d));
  return STAX_OK;
}

/* Symbolic groups: a windowed pool over open dims becomes a depthwise window without weights
 * for the symbolic Conv lowering: any MaxPool (ceil_mode's overhang is padded with the lowest
 * float), any AveragePool (one whose tap count varies, not counting its pads or with
 * ceil_mode, divides by a mask's count), so the result is the generic kernel's at every size. */
static stax_status_t global_symbolic(pool_t* p);

static stax_status_t lower_pool_symbolic(pool_t* p) {
  lower_t* L = p->L;
  if (p->global) return global_symbolic(p);
  bool pads = false;
  for (int32_t i = 0; i < 2 * p->spatial; i++) pads = pads || p->window.pads[i] != 0;
  const stax_jit_value_t* x = lower_value(L, p->x);
  lower_conv_geometry_t g = {.node = (int32_t)(p->node - L->group->nodes),
                             .name = p->name,
                             .x = p->x,
                             .w = -1,
                             .bias = -1,
                             .out = p->out,
                             .spatial = p->spatial,
                             .batch = x->dims[0],
                             .channels = x->dims[1],
                             .out_channels = x->dims[1],
                             .group = x->dims[1],
                             .cg = 1,
                             .mg = 1,
                             .window = p->window,
                             .op = p->is_max ? LOWER_WINDOW_MAX : LOWER_WINDOW_AVERAGE,
                             .divisor = 1,
                             /* ceil_mode's overhang never counts: a mask then too. */
                             .count_mask = !p->is_max && ((pads && !p->count_include_pad) ||
                                                          p->window.ceil_mode),
                             .count_pads = p->count_include_pad};
  for (int32_t i = 0; i < p->spatial; i++) g.divisor *= (double)p->window.kernel[i];
  if (lower_dim_open(L, p->x, 1))
    return lower_refuse(L, "%s node '%s' with open channels", stax_op_name(p->op), p->name);
  return lower_conv_symbolic(L, &g);
}

/* ---- helpers ----------------------------------------------------------------------------- */

static stax_kir_loop_t* add_loop(pool_t* p, stax_kir_block_t* block, const char* base,
                                 int64_t extent) {
  char name[32];
  snprintf(name, sizeof(name), "%s%d", base, (int)p->k->loop_count);
  return stax_kir_add_loop(p->k, block, name, extent);
}

static int32_t add_local(pool_t* p, const char* base, stax_dtype_t dtype) {
  char name[32];
  snprintf(name, sizeof(name), "%s%d", base, (int)p->k->local_count);
  return stax_kir_add_local(p->k, name, dtype);
}

/* X's plane at the current point: n * stride0 + c * stride1. */
static stax_kir_index_t plane_index(pool_t* p) {
  const stax_jit_value_t* x = lower_value(p->L, p->x);
  stax_kir_index_t index = stax_kir_index_constant(0);
  stax_kir_index_add_scaled(p->k, &index, &p->n_form, x->strides[0]);
  stax_kir_index_add_scaled(p->k, &index, &p->c_form, x->strides[1]);
  return index;
}

/* The epilogue at the current point: `value` is the pool's output there; every group output
 * is stored. */
static void emit_store(pool_t* p, stax_kir_block_t* block, const stax_kir_expr_t* value) {
  lower_t* L = p->L;
  L->forms[0] = p->n_form;
  L->forms[1] = p->c_form;
  for (int32_t d = 0; d < p->spatial; d++) L->forms[2 + d] = p->position[d];
  lower_new_point(L);
  L->fixed[p->out] = value;
  for (int32_t i = 0; i < L->group->output_count; i++)
    lower_store_value(L, block, L->group->outputs[i], LOWER_FULL, L->rank);
  L->fixed[p->out] = NULL;
}

/* ---- windowed pools ---------------------------------------------------------------------- */

/* The window at the current point (every dim's position and segment set). */
static void emit_window(pool_t* p, stax_kir_block_t* block) {
  stax_kir_kernel_t* k = p->k;
  const stax_jit_value_t* x = lower_value(p->L, p->x);
  const stax_window_t* w = &p->window;
  int64_t valid = 1, padded = 1;
  for (int32_t d = 0; d < p->spatial; d++) {
    valid *= p->segment[d]->tap_hi - p->segment[d]->tap_lo;
    padded *= p->segment[d]->padded;
  }
  if (valid == 0) {
    /* Nothing in range: the generic kernel's constants. */
    double constant = p->is_max ? -FLT_MAX : p->count_include_pad && padded > 0 ? 0.0 : NAN;
    emit_store(p, block, stax_kir_float(k, STAX_DTYPE_FLOAT32, constant));
    return;
  }
  stax_dtype_t sum_dtype = p->is_max ? STAX_DTYPE_FLOAT32 : STAX_DTYPE_FLOAT64;
  int32_t acc = add_local(p, p->is_max ? "best" : "sum", sum_dtype);
  stax_kir_add_declare(k, block, acc, stax_kir_float(k, sum_dtype, p->is_max ? -FLT_MAX : 0.0));
  /* X at (n, c, o_d * S_d - P_d + (lo_d + k_d) * D_d): tap loops k_d, outermost dim first. */
  stax_kir_index_t index = plane_index(p);
  stax_kir_block_t* body = block;
  for (int32_t d = 0; d < p->spatial; d++) {
    const pool_segment_t* s = p->segment[d];
    int64_t step = x->strides[2 + d];
    stax_kir_index_add_scaled(k, &index, &p->position[d], w->strides[d] * step);
    index.constant += (s->tap_lo * w->dilations[d] - w->pads[d]) * step;
    int64_t taps = s->tap_hi - s->tap_lo;
    if (taps == 1) continue;
    stax_kir_loop_t* loop = add_loop(p, body, "k", taps);
    if (!loop) return;
    stax_kir_index_add_term(k, &index, stax_kir_loop_id(k, loop), w->dilations[d] * step);
    body = &loop->body;
  }
  const stax_kir_expr_t* load = stax_kir_load(k, p->L->buffer[p->x], &index);
  if (p->is_max) {
    int32_t v = add_local(p, "v", STAX_DTYPE_FLOAT32);
    stax_kir_add_declare(k, body, v, load);
    const stax_kir_expr_t* value = stax_kir_local(k, v);
    const stax_kir_expr_t* best = stax_kir_local(k, acc);
    stax_kir_add_assign(k, body, acc,
                        stax_kir_select(k, stax_kir_binary(k, STAX_KIR_GT, value, best), value,
                                        best));
    emit_store(p, block, stax_kir_local(k, acc));
    return;
  }
  stax_kir_add_assign(k, body, acc,
                      stax_kir_binary(k, STAX_KIR_ADD, stax_kir_local(k, acc),
                                      stax_kir_cast(k, STAX_DTYPE_FLOAT64, load)));
  double divisor = (double)(p->count_include_pad ? padded : valid);
  const stax_kir_expr_t* average =
      divisor > 0 ? stax_kir_binary(k, STAX_KIR_DIV, stax_kir_local(k, acc),
                                    stax_kir_float(k, STAX_DTYPE_FLOAT64, divisor))
                  : stax_kir_float(k, STAX_DTYPE_FLOAT64, NAN);
  emit_store(p, block, stax_kir_cast(k, STAX_DTYPE_FLOAT32, average));
}

/* Spatial dim d and inward: every segment, as a loop (the innermost dim's a vector loop) or a
 * constant position. */
static void emit_dim(pool_t* p, stax_kir_block_t* block, int32_t d) {
  if (!block) return;
  if (d == p->spatial) {
    emit_window(p, block);
    return;
  }
  bool innermost = d == p->spatial - 1;
  for (int32_t s = 0; s < p->segment_count[d]; s++) {
    const pool_segment_t* segment = &p->segments[d][s];
    p->segment[d] = segment;
    p->position[d] = stax_kir_index_constant(segment->first);
    if (segment->count == 1) {
      emit_dim(p, block, d + 1);
      continue;
    }
    stax_kir_loop_t* loop = add_loop(p, block, innermost ? "j" : "o", segment->count);
    if (!loop) return;
    if (innermost) loop->vector_width = p->L->vector_lanes_f32;
    stax_kir_index_add_term(p->k, &p->position[d], stax_kir_loop_id(p->k, loop), 1);
    emit_dim(p, &loop->body, d + 1);
  }
}

/* A global pool at the current plane: X's spatial dims `dims` and strides `strides` (over
 * [N, C, D..]; parameters in a symbolic group). The innermost dim is a vector reduction
 * (double sums for the average; for the max, NaN replaced by the lowest float first). The
 * average divides by the plane's size, or, when that is a parameter, by a count of the taps
 * summed alongside (exact in float64). */
static void emit_global(pool_t* p, stax_kir_block_t* block, const lower_sym_t* dims,
                        const lower_sym_t* strides) {
  stax_kir_kernel_t* k = p->k;
  for (int32_t d = 0; d < p->spatial; d++) p->position[d] = stax_kir_index_constant(0);
  bool fixed = true;
  int64_t plane = 1;
  for (int32_t d = 0; d < p->spatial; d++) {
    fixed = fixed && dims[2 + d].p < 0;
    plane *= dims[2 + d].p < 0 ? dims[2 + d].c : 1;
  }
  if (fixed && plane == 0) {
    double constant = p->is_max ? -FLT_MAX : NAN;
    emit_store(p, block, stax_kir_float(k, STAX_DTYPE_FLOAT32, constant));
    return;
  }
  stax_dtype_t sum_dtype = p->is_max ? STAX_DTYPE_FLOAT32 : STAX_DTYPE_FLOAT64;
  int32_t acc = add_local(p, p->is_max ? "best" : "sum", sum_dtype);
  stax_kir_add_declare(k, block, acc, stax_kir_float(k, sum_dtype, p->is_max ? -FLT_MAX : 0.0));
  int32_t count = p->is_max || fixed ? -1 : add_local(p, "count", STAX_DTYPE_FLOAT64);
  if (count >= 0) stax_kir_add_declare(k, block, count, stax_kir_float(k, STAX_DTYPE_FLOAT64, 0.0));
  stax_kir_index_t index = stax_kir_index_constant(0);
  lower_sym_index_add_scaled(k, &index, &p->n_form, strides[0]);
  lower_sym_index_add_scaled(k, &index, &p->c_form, strides[1]);
  stax_kir_block_t* body = block;
  for (int32_t d = 0; d < p->spatial; d++) {
    lower_sym_t extent = dims[2 + d];
    if (extent.p < 0 && extent.c == 1) continue;
    bool innermost = d == p->spatial - 1;
    stax_kir_loop_t* loop = lower_sym_loop(k, body, innermost ? "j" : "h", extent);
    if (!loop) return;
    /* Lanes need a constant step: a run-time innermost stride sums one element at a time. */
    if (innermost && strides[2 + d].p < 0) {
      loop->vector_width = p->L->vector_lanes_f32;
      if (extent.p < 0 && extent.c >= 4 * p->L->vector_lanes_f32) loop->unroll = 2;
    }
    lower_sym_index_term(k, &index, stax_kir_loop_id(k, loop), strides[2 + d]);
    body = &loop->body;
  }
  const stax_kir_expr_t* load = stax_kir_load(k, p->L->buffer[p->x], &index);
  if (p->is_max) {
    /* NaN never wins: it becomes the floor the maximum starts from. */
    const stax_kir_expr_t* lowest = stax_kir_float(k, STAX_DTYPE_FLOAT32, -FLT_MAX);
    stax_kir_add_reduce(k, body, acc, STAX_KIR_MAX,
                        stax_kir_select(k, stax_kir_unary(k, STAX_KIR_IS_NAN, load), lowest, load));
    emit_store(p, block, stax_kir_local(k, acc));
    return;
  }
  stax_kir_add_reduce(k, body, acc, STAX_KIR_ADD, stax_kir_cast(k, STAX_DTYPE_FLOAT64, load));
  if (count >= 0)
    stax_kir_add_reduce(k, body, count, STAX_KIR_ADD, stax_kir_float(k, STAX_DTYPE_FLOAT64, 1.0));
  const stax_kir_expr_t* divisor = count >= 0
                                       ? stax_kir_local(k, count)
                                       : stax_kir_float(k, STAX_DTYPE_FLOAT64, (double)plane);
  const stax_kir_expr_t* average = stax_kir_binary(k, STAX_KIR_DIV, stax_kir_local(k, acc), divisor);
  emit_store(p, block, stax_kir_cast(k, STAX_DTYPE_FLOAT32, average));
}

/* A global pool over open dims: the plane's loops take their extents from X's dims, and the
 * average divides by a count of the taps summed alongside (exact in float64), so the result
 * is what emit_global computes at each size. Parallel over the channels (fixed). */
static stax_status_t global_symbolic(pool_t* p) {
  lower_t* L = p->L;
  stax_kir_kernel_t* k = p->k;
  const stax_jit_value_t* x = lower_value(L, p->x);
  if (L->uses[p->x] != 1 || lower_dim_open(L, p->x, 1))
    return lower_refuse(L, "%s node '%s': its input is read again, or has open channels",
                        stax_op_name(p->op), p->name);
  int32_t skip[1] = {p->x};
  STAX_RETURN_IF_ERROR(lower_symbolic_space(L, L->rank, skip, 1));
  int32_t xb = L->buffer[p->x];
  lower_sym_t dims[STAX_MAX_RANK], strides[STAX_MAX_RANK];
  for (int32_t d = 0; d < x->rank; d++) {
    dims[d] = lower_sym_const(x->dims[d]);
    int32_t sp = k->buffers[xb]->stride_params[d];
    strides[d] = sp >= 0 ? lower_sym_param(sp) : lower_sym_const(x->strides[d]);
    if (!lower_dim_open(L, p->x, d)) continue;
    int32_t param = L->dim_params[0];
    if (d > 0) {
      char name[16];
      snprintf(name, sizeof(name), "in%d", (int)d);
      param = stax_kir_add_read_param(k, name, xb, d, false);
    }
    if (param < 0)
      return lower_refuse(L, "%s node '%s': the batch is open in X only", stax_op_name(p->op),
                          p->name);
    stax_kir_buffer_dim_param(k, xb, d, param);
    dims[d] = lower_sym_param(param);
  }
  stax_kir_block_t* stage = stax_kir_add_stage(k, "global_pool");
  stax_kir_loop_t* a = stage ? lower_sym_loop(k, stage, "c", dims[1]) : NULL;
  stax_kir_loop_t* b = a ? lower_sym_loop(k, &a->body, "n", dims[0]) : NULL;
  if (!b) return stax_kir_kernel_status(k);
  a->parallel = x->dims[1] > 1 && L->options->thread_count > 1;
  p->c_form = stax_kir_index_constant(0);
  p->n_form = stax_kir_index_constant(0);
  stax_kir_index_add_term(k, &p->c_form, stax_kir_loop_id(k, a), 1);
  stax_kir_index_add_term(k, &p->n_form, stax_kir_loop_id(k, b), 1);
  emit_global(p, &b->body, dims, strides);
  return stax_kir_kernel_status(k);
}

/* ---- the planes -------------------------------------------------------------------------- */

stax_status_t lower_pool_group(lower_t* L, int32_t node) {
  pool_t p;
  memset(&p, 0, sizeof(p));
  p.L = L;
  p.k = L->kernel;
  STAX_RETURN_IF_ERROR(analyze(&p, node));
  if (L->group->symbolic) return lower_pool_symbolic(&p);
  const stax_jit_value_t* x = lower_value(L, p.x);
  int64_t batch = x->dims[0], channels = x->dims[1];
  int64_t outputs = batch * channels;
  for (int32_t d = 0; d < p.spatial; d++) outputs *= p.window.output[d];
  stax_kir_block_t* stage = stax_kir_add_stage(p.k, p.global ? "global_pool" : "pool");
  if (!stage || outputs == 0) return stax_kir_kernel_status(p.k);
  /* Planes in parallel over the longer of N and C. */
  bool channels_first = channels >= batch;
  int64_t outer = channels_first ? channels : batch, inner = channels_first ? batch : channels;
  stax_kir_loop_t* a = add_loop(&p, stage, channels_first ? "c" : "n", outer);
  stax_kir_loop_t* b = a ? add_loop(&p, &a->body, channels_first ? "n" : "c", inner) : NULL;
  if (!b) return stax_kir_kernel_status(p.k);
  int64_t work = inner;
  for (int32_t d = 0; d < p.spatial; d++) work *= p.window.output[d] * p.window.kernel[d];
  a->parallel = outer > 1;
  a->grain = work >= POOL_TASK_WORK ? 1 : POOL_TASK_WORK / (work + 1) + 1;
  p.n_form = stax_kir_index_constant(0);
  p.c_form = stax_kir_index_constant(0);
  stax_kir_index_add_term(p.k, channels_first ? &p.c_form : &p.n_form, stax_kir_loop_id(p.k, a),
                          1);
  stax_kir_index_add_term(p.k, channels_first ? &p.n_form : &p.c_form, stax_kir_loop_id(p.k, b),
                          1);
  if (p.global) {
    lower_sym_t x_dims[STAX_MAX_RANK], x_strides[STAX_MAX_RANK];
    for (int32_t d = 0; d < x->rank; d++) {
      x_dims[d] = lower_sym_const(x->dims[d]);
      x_strides[d] = lower_sym_const(x->strides[d]);
    }
    emit_global(&p, &b->body, x_dims, x_strides);
  } else {
    emit_dim(&p, &b->body, 0);
  }
  return stax_kir_kernel_status(p.k);
}
