/* Conv with an elementwise epilogue, float32: a direct convolution as a register-tiled
 * micro-kernel.
 *
 * Conv: X [N, C, D1..Ds], W [M, C/G, K1..Ks], optional B [M] -> Y [N, M, O1..Os], G groups
 * (output channel m reads the input channels of group m / (M/G)). The output is cut into
 * tiles of MR output channels (of one group) x NR positions along the innermost spatial dim
 * (NR = two native vectors, MR = 6, or 12 with 512-bit vectors, as the matmul micro-kernel: the
 * MR accumulators and the operands fill the vector registers). A tile is a vector loop over its
 * NR positions holding MR accumulator locals; inside, the reduction loops walk (input channel
 * of the group, K1, .., Ks): each step loads NR input values once (one unit-stride vector
 * load) and fuses them with MR broadcast weights. The epilogue then
 * runs on the accumulators while they are still in registers: + B, then the group's
 * elementwise ops (bias Add, activation, residual Add...), and each output is stored once.
 *
 * Padding: the kernel IR's verifier proves every load in bounds, and loads cannot be masked,
 * so a first stage copies X into a zero-padded scratch tensor [N, C, D1+pads, ..]; the compute
 * then reads padded coordinates o*stride + k*dilation, always in range. Each scratch element
 * is written once (border slabs zeroed, interior copied). The copy also makes a strided input
 * contiguous, and when the conv strides the innermost dim (S > 1) it stores each padded row
 * split by phase (position q at (q % S) * ceil(row / S) + q / S): the inputs a tap needs for
 * consecutive outputs are then consecutive, so the compute's loads stay unit-stride vector
 * loads instead of gathers (the row's taps become statements with constant offsets). Without
 * padding, with unit conv stride and a unit-stride innermost dim, X is read directly.
 *
 * Output sizes and the auto_pad pads come from the generic kernel's window rules
 * (stax_window_read / stax_window_forward in src/kernels/conv.c), so both tiers agree on every
 * attribute combination.
 *
 * Loop nest (outer to inner): batch, group, the outer spatial dims, channel tiles, position
 * tiles, then the tile. The parallel loop is the first of these with enough iterations for the
 * threads (else the one with the most), moved to the front; when it is a tiled axis, its edge
 * tile gets a stage of its own (a parallel loop must be alone in its stage). Edge tiles
 * (M/G % MR channels, Os % NR positions) are the same code with fewer rows / lanes; an edge of
 * positions wider than one native vector is cut into whole vectors and the rest (see
 * emit_axes), and rows narrower than NR (7 or 14 wide) get 2 * MR channels per tile. Rows
 * under 3.5 native vectors (lower_conv_patch_below) with one group, channels for two vectors
 * and a constant weight take the GEMM over patches instead (lower_conv_patch.c), as do those
 * of the shape-generic lowering.
 *
 * K blocks (choose_k_blocks): with many input channels per group the reduction is cut into
 * blocks of input channels, a loop just outside the channel tiles, so that a block's input
 * rows and weights stay in L1 while the tiles pass over them. Sums go between blocks through
 * a scratch shaped as the output (stored by every block but the last, loaded by every block
 * but the first); only the last block runs the epilogue, so the group's elementwise ops still
 * see each output once, complete.
 *
 * Symbolic groups (the shape-generic tier): the batch N may be open, a run-time parameter
 * (`batch_param`) of one kernel for every batch size; channels, spatial sizes, weights and
 * the window stay compile-time constants, so tiles and unrolling are chosen as for an exact
 * shape. The batch loops (copy and compute) take their extent from the parameter, and the
 * parallel loop is chosen among the fixed axes (the example's batch says nothing of the
 * class's); the host verifies every access for each new batch size before running it.
 *
 * Not done: open spatial dims (an image size that varies: the padded copy's slabs and the
 * position tiles' tails would need parameter offsets), float64 and halves, a weight computed
 * in the group, more than 4 spatial dims, packing W for wider channel tiles, K blocks for
 * channel tiles and for rows narrower than a vector, K blocks in the shape-generic lowering
 * (lower_conv_symbolic.c; measured no faster there over ResNet-18, see docs/jit.md). */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash_map.h"
#include "jit/lower_internal.h"
#include "kernels/gemm.h"
#include "runtime/tensor_internal.h"

/* Spatial dims supported: keeps every affine index within STAX_KIR_MAX_INDEX_TERMS. */
#define CONV_MAX_SPATIAL 4
/* Multiply-adds one parallel task should get at least. */
#define CONV_TASK_WORK 65536

/* One axis of the loop nest around the tile. Full axes walk every coordinate; tiled axes
 * (channels within a group, innermost positions) walk tiles of `tile` coordinates. */
typedef enum axis_kind_e {
  AXIS_BATCH,
  AXIS_GROUP,
  AXIS_OUTER,
  AXIS_CHANNELS,
  AXIS_POSITIONS,
  AXIS_KBLOCK /* blocks of input channels (a reduction: never parallel) */
} axis_kind_t;

typedef struct axis_t {
  axis_kind_t kind;
  int32_t dim;    /* AXIS_OUTER: which spatial dim */
  int64_t extent; /* coordinates (the example's when open) */
  int64_t tile;   /* 0 for full axes */
  int32_t extent_param; /* >= 0: an open full axis, its extent this kernel parameter */
  /* At the current point: the coordinate (full) or the tile's first coordinate (tiled), and
   * the tile's size. */
  stax_kir_index_t form;
  int32_t size;
} axis_t;

typedef struct conv_t {
  lower_t* L;
  stax_kir_kernel_t* k;
  lower_conv_geometry_t g;
  int32_t batch_param; /* symbolic groups: N is this kernel parameter; -1: N is fixed */
  /* What the compute reads: the padded scratch copy or X itself, strides over [N, C, D..]. */
  bool padded;
  int32_t source;
  /* The copy's innermost dim split by phase when the conv strides it (stride S > 1): padded
   * position q is stored at (q % S) * phase_length + q / S, so the taps of one output row are
   * unit-stride runs. phases is S, or 1 without the split. */
  int64_t phases, phase_length;
  int64_t source_strides[STAX_MAX_RANK];
  int32_t mr, nr;
  axis_t axes[STAX_MAX_RANK + 1];
  int32_t axis_count;
  int32_t order[STAX_MAX_RANK + 1]; /* emission order (the parallel axis first) */
  bool parallel;
  int64_t grain;
  int32_t tiles; /* counter for local names */
  /* Narrow output rows (channel_tile): vectors over output channels instead of positions,
   * reading the weights repacked channel-innermost into packed_w; outer_rows output rows of
   * the innermost outer dim per tile. */
  bool channel_vectors;
  int32_t packed_w;
  int64_t outer_rows;
  bool weights_outer; /* channel tiles outside the output rows (plan_nest) */
  /* K blocks (choose_k_blocks): the group's Cg input channels in k_blocks blocks of kc (the
   * last one Cg - (k_blocks - 1) * kc), sums carried between them in `partial`, a scratch
   * shaped as the output. k_blocks 1: no blocking. At the current point (emit_axes): the
   * block's first channel, size and place. */
  int64_t kc, k_blocks;
  int32_t partial;
  int64_t partial_strides[STAX_MAX_RANK];
  stax_kir_index_t ci_begin;
  int64_t ci_count;
  bool ci_last;
  int32_t ci_first_loop;
} conv_t;

/* An environment switch that is on unless set to "0" (tests compare both tile kinds). */
static bool getenv_flag_off(const char* name) {
  const char* value = getenv(name);
  return value && strcmp(value, "0") == 0;
}

bool lower_is_conv_op(stax_op_t op) {
  return op == STAX_OP_Conv;
}

/* ---- analysis ---------------------------------------------------------------------------- */

static bool same_dims(const stax_jit_value_t* a, int32_t rank, const int64_t* dims) {
  return a->rank == rank && memcmp(a->dims, dims, sizeof(int64_t) * (size_t)rank) == 0;
}

/* The window geometry, through the generic kernel's attribute rules: they read the input's
 * rank and dims from a tensor, so a descriptor with only those set stands in for X. */
static stax_status_t read_window(const lower_t* L, lower_conv_geometry_t* g) {
  const stax_jit_node_t* node = &L->group->nodes[g->node];
  const stax_jit_value_t* x = lower_value(L, g->x);
  const stax_jit_value_t* w = lower_value(L, g->w);
  stax_tensor_t shape = {.dtype = x->dtype, .rank = x->rank};
  memcpy(shape.dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  stax_kernel_call_t call = {.node = node->node};
  STAX_RETURN_IF_ERROR(stax_window_read(&call, &shape, &g->window));
  const int64_t* kernel_shape = NULL;
  int32_t given = -1;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(node->node, "kernel_shape", &given, &kernel_shape));
  for (int32_t i = 0; i < g->spatial; i++) {
    if (w->dims[2 + i] < 1 ||
        (given >= 0 && (given != g->spatial || kernel_shape[i] != w->dims[2 + i])))
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "Conv node '%s': weight dim %d (%lld) does not match kernel_shape",
                              g->name, 2 + i, (long long)w->dims[2 + i]);
    g->window.kernel[i] = w->dims[2 + i];
  }
  return stax_window_forward(&call, &g->window);
}

stax_status_t lower_conv_geometry(lower_t* L, int32_t node_index, lower_conv_geometry_t* g) {
  memset(g, 0, sizeof(*g));
  g->node = node_index;
  const stax_jit_node_t* node = &L->group->nodes[node_index];
  g->name = node->node->name ? node->node->name : "";
  g->x = node->inputs[0];
  g->w = node->inputs[1];
  g->bias = node->input_count > 2 ? node->inputs[2] : -1;
  g->out = node->outputs[0];
  if (g->x < 0 || g->w < 0 || g->out < 0)
    return stax_status_make(STAX_INVALID_ARGUMENT, "Conv node '%s' lacks X, W or Y", g->name);
  const stax_jit_value_t* x = lower_value(L, g->x);
  const stax_jit_value_t* w = lower_value(L, g->w);
  const stax_jit_value_t* out = lower_value(L, g->out);
  const stax_jit_value_t* b = g->bias >= 0 ? lower_value(L, g->bias) : NULL;
  if (!stax_jit_op_dtype_lowered(STAX_OP_Conv, x->dtype) || w->dtype != x->dtype ||
      out->dtype != x->dtype || (b && b->dtype != x->dtype))
    return lower_refuse(L, "Conv node '%s' on %s (float32 only)", g->name,
                        stax_dtype_name(x->dtype));
  if (L->producer[g->x] >= 0 || L->producer[g->w] >= 0 ||
      (g->bias >= 0 && L->producer[g->bias] >= 0))
    return lower_refuse(L, "an operand of Conv node '%s' is computed in the group", g->name);
  if (x->rank < 3 || x->rank - 2 > CONV_MAX_SPATIAL)
    return lower_refuse(L, "Conv node '%s' with %d spatial dims (1 to %d supported)", g->name,
                        (int)(x->rank - 2), CONV_MAX_SPATIAL);
  g->spatial = x->rank - 2;
  int64_t group = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(node->node, "group", 1, &group));
  g->batch = x->dims[0];
  g->channels = x->dims[1];
  g->out_channels = w->rank == x->rank ? w->dims[0] : -1;
  g->group = group;
  if (group < 1 || w->rank != x->rank || w->dims[1] * group != g->channels ||
      g->out_channels % group != 0 || (b && (b->rank != 1 || b->dims[0] != g->out_channels)))
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "Conv node '%s': weight %s, bias or group %lld do not match input '%s'",
                            g->name, lower_value_name(L, g->w), (long long)group,
                            lower_value_name(L, g->x));
  g->cg = g->channels / group;
  g->mg = g->out_channels / group;
  STAX_RETURN_IF_ERROR(read_window(L, g));
  int64_t dims[STAX_MAX_RANK] = {g->batch, g->out_channels};
  for (int32_t i = 0; i < g->spatial; i++) dims[2 + i] = g->window.output[i];
  if (!same_dims(out, x->rank, dims))
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "Conv node '%s': output '%s' dims do not match the window", g->name,
                            lower_value_name(L, g->out));

  if (L->group->symbolic && (w->open_dims || (b && b->open_dims) || (x->open_dims & 2u) ||
                             (out->open_dims & 2u)))
    return lower_refuse(L, "Conv node '%s' with open channels or weights", g->name);
  /* The epilogue runs in the output's space. */
  L->rank = out->rank;
  memcpy(L->dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
  for (int32_t v = 0; v < L->group->value_count; v++) {
    /* The operands need not fit unless the epilogue reads them too. */
    if ((v == g->x || v == g->w || v == g->bias) && L->uses[v] == 1) continue;
    bool used = L->uses[v] > 0 || L->producer[v] >= 0;
    if (used && !lower_value_fits(L, v, 0, L->rank))
      return lower_refuse(L, "value '%s' does not fit the Conv output", lower_value_name(L, v));
  }
  for (int32_t i = 0; i < L->group->output_count; i++) {
    int32_t o = L->group->outputs[i];
    if (!same_dims(lower_value(L, o), out->rank, out->dims))
      return lower_refuse(L, "output '%s' is not Conv-shaped", lower_value_name(L, o));
  }
  return STAX_OK;
}

/* The exact-shape kernel's analysis; in a symbolic group (only the batch open) the batch's
 * parameter. */
static stax_status_t analyze(conv_t* c) {
  lower_t* L = c->L;
  STAX_RETURN_IF_ERROR(lower_conv_geometry(L, c->g.node, &c->g));
  c->batch_param = -1;
  if (!L->group->symbolic) return STAX_OK;
  const stax_jit_value_t* x = lower_value(L, c->g.x);
  const stax_jit_value_t* out = lower_value(L, c->g.out);
  if ((x->open_dims & ~1u) || x->open_dims != out->open_dims)
    return lower_refuse(L, "Conv node '%s': a symbolic kernel here takes an open batch only",
                        c->g.name);
  STAX_RETURN_IF_ERROR(lower_symbolic_space(L, L->rank, NULL, 0));
  for (int32_t e = 1; e < L->rank; e++)
    if (L->dim_params[e] >= 0)
      return lower_refuse(L, "Conv node '%s': the epilogue varies in dim %d", c->g.name, (int)e);
  c->batch_param = L->dim_params[0];
  return STAX_OK;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static stax_kir_loop_t* add_loop(conv_t* c, stax_kir_block_t* block, const char* base,
                                 int64_t extent) {
  char name[32];
  snprintf(name, sizeof(name), "%s%d", base, (int)c->k->loop_count);
  return stax_kir_add_loop(c->k, block, name, extent);
}

static stax_kir_index_t loop_form(conv_t* c, const stax_kir_loop_t* loop, int64_t scale) {
  stax_kir_index_t index = stax_kir_index_constant(0);
  stax_kir_index_add_term(c->k, &index, stax_kir_loop_id(c->k, loop), scale);
  return index;
}

/* ---- the padded copy --------------------------------------------------------------------- */

/* buffer[base + z] = 0 for z in [0, count). */
static void zero_fill(conv_t* c, stax_kir_block_t* block, const stax_kir_index_t* base,
                      int64_t count) {
  if (count <= 0) return;
  stax_kir_loop_t* loop = add_loop(c, block, "z", count);
  if (!loop) return;
  loop->vector_width = c->L->vector_lanes_f32;
  stax_kir_index_t index = *base;
  stax_kir_index_add_term(c->k, &index, stax_kir_loop_id(c->k, loop), 1);
  stax_kir_add_store(c->k, &loop->body, c->source, &index,
                     stax_kir_float(c->k, STAX_DTYPE_FLOAT32, 0));
}

/* Spatial dim d of one (n, c) plane: its begin-pad slabs, its interior (recursing inward, the
 * innermost dim copying a row), its end-pad slabs. `target` / `source` point at the current
 * position of the dims before d. */
/* The innermost dim of a phase-split copy: per phase b, the positions q = S*a + b below the
 * begin pad (zeros), inside the input (copied, a gather of every S-th input value), and the
 * rest of the phase (zeros). */
static void pad_row_phases(conv_t* c, stax_kir_block_t* block, const stax_kir_index_t* target,
                           const stax_kir_index_t* source) {
  const stax_jit_value_t* x = lower_value(c->L, c->g.x);
  int32_t last = c->g.spatial - 1;
  int64_t stride = c->phases, length = c->phase_length, begin = c->g.window.pads[last];
  int64_t input = c->g.window.input[last], x_stride = x->strides[2 + last];
  for (int64_t b = 0; b < stride; b++) {
    int64_t low = stax_ceil_div(begin - b, stride), high = stax_ceil_div(begin + input - b, stride);
    low = low < 0 ? 0 : low > length ? length : low;
    high = high < low ? low : high > length ? length : high;
    stax_kir_index_t base = *target;
    base.constant += b * length;
    zero_fill(c, block, &base, low);
    if (high > low) {
      stax_kir_loop_t* loop = add_loop(c, block, "cx", high - low);
      if (!loop) return;
      loop->vector_width = c->L->vector_lanes_f32;
      int32_t id = stax_kir_loop_id(c->k, loop);
      stax_kir_index_t to = base, from = *source;
      to.constant += low;
      stax_kir_index_add_term(c->k, &to, id, 1);
      from.constant += (stride * low + b - begin) * x_stride;
      stax_kir_index_add_term(c->k, &from, id, stride * x_stride);
      stax_kir_add_store(c->k, &loop->body, c->source, &to,
                         stax_kir_load(c->k, c->L->buffer[c->g.x], &from));
    }
    stax_kir_index_t tail = base;
    tail.constant += high;
    zero_fill(c, block, &tail, length - high);
  }
}

static void pad_dim(conv_t* c, stax_kir_block_t* block, int32_t d, const stax_kir_index_t* target,
                    const stax_kir_index_t* source) {
  if (d == c->g.spatial - 1 && c->phases > 1) {
    pad_row_phases(c, block, target, source);
    return;
  }
  const stax_window_t* win = &c->g.window;
  const stax_jit_value_t* x = lower_value(c->L, c->g.x);
  int64_t begin = win->pads[d], end = win->pads[c->g.spatial + d], input = win->input[d];
  int64_t slab = c->source_strides[2 + d];
  zero_fill(c, block, target, begin * slab);
  if (input > 0) {
    stax_kir_loop_t* loop = add_loop(c, block, d == c->g.spatial - 1 ? "cx" : "cd", input);
    if (!loop) return;
    int32_t id = stax_kir_loop_id(c->k, loop);
    stax_kir_index_t inner_target = *target, inner_source = *source;
    inner_target.constant += begin * slab;
    stax_kir_index_add_term(c->k, &inner_target, id, slab);
    stax_kir_index_add_term(c->k, &inner_source, id, x->strides[2 + d]);
    if (d == c->g.spatial - 1) {
      loop->vector_width = c->L->vector_lanes_f32;
      stax_kir_add_store(c->k, &loop->body, c->source, &inner_target,
                         stax_kir_load(c->k, c->L->buffer[c->g.x], &inner_source));
    } else {
      pad_dim(c, &loop->body, d + 1, &inner_target, &inner_source);
    }
  }
  stax_kir_index_t tail = *target;
  tail.constant += (begin + input) * slab;
  zero_fill(c, block, &tail, end * slab);
}

static void emit_pad(conv_t* c) {
  const stax_jit_value_t* x = lower_value(c->L, c->g.x);
  int64_t dims[STAX_MAX_RANK] = {c->g.batch, c->g.channels};
  for (int32_t i = 0; i < c->g.spatial; i++)
    dims[2 + i] = c->g.window.input[i] + c->g.window.pads[i] + c->g.window.pads[c->g.spatial + i];
  c->phase_length = stax_ceil_div(dims[x->rank - 1], c->phases);
  dims[x->rank - 1] = c->phases * c->phase_length;
  c->source = stax_kir_add_buffer(c->k, "padded", STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32,
                                  x->rank, dims, NULL);
  if (c->batch_param >= 0 && c->source >= 0)
    stax_kir_buffer_dim_param(c->k, c->source, 0, c->batch_param);
  stax_shape_contiguous_strides(x->rank, dims, c->source_strides);
  bool open = c->batch_param >= 0;
  if ((!open && c->g.batch == 0) || c->g.channels == 0) return;
  /* Planes in parallel over the longer of N and C; over C when N is open (any N, one
   * kernel: the channels are what is known). */
  stax_kir_block_t* block = stax_kir_add_stage(c->k, "pad");
  bool channels_first = open || c->g.channels > c->g.batch;
  int64_t outer = channels_first ? c->g.channels : c->g.batch;
  int64_t inner = channels_first ? c->g.batch : c->g.channels;
  if (open) inner = 1; /* for the grain: per batch image */
  stax_kir_loop_t* a = block ? add_loop(c, block, "pa", outer) : NULL;
  stax_kir_loop_t* b = a ? add_loop(c, &a->body, "pb", inner) : NULL;
  if (!b) return;
  if (open) b->extent_param = c->batch_param;
  int64_t plane = c->source_strides[1];
  a->parallel = outer > 1;
  a->grain = plane * inner >= CONV_TASK_WORK ? 1 : CONV_TASK_WORK / (plane * inner + 1) + 1;
  int32_t n = stax_kir_loop_id(c->k, channels_first ? b : a);
  int32_t ch = stax_kir_loop_id(c->k, channels_first ? a : b);
  stax_kir_index_t target = stax_kir_index_constant(0), source = stax_kir_index_constant(0);
  stax_kir_index_add_term(c->k, &target, n, c->source_strides[0]);
  stax_kir_index_add_term(c->k, &target, ch, c->source_strides[1]);
  stax_kir_index_add_term(c->k, &source, n, x->strides[0]);
  stax_kir_index_add_term(c->k, &source, ch, x->strides[1]);
  pad_dim(c, &b->body, 0, &target, &source);
}

/* ---- the tile ---------------------------------------------------------------------------- */

static const axis_t* find_axis(const conv_t* c, axis_kind_t kind, int32_t dim) {
  for (int32_t a = 0; a < c->axis_count; a++)
    if (c->axes[a].kind == kind && c->axes[a].dim == dim) return &c->axes[a];
  return NULL;
}

/* One register tile (see lower_internal.h), for both lowerings: `rows` output channels x
 * `lanes` positions from the tile's forms. */
/* Where a tile's weights start in lower_conv_pack_weights' panels [G][tile][Cg][taps][T]: at group
 * `group`, the panel of the tile whose first channel (within the group) is `channels`, input
 * channel 0, tap 0. A full tile's form is a loop counter times T (its panel, T*Cg*taps on);
 * an edge piece's is a constant, possibly past a tile boundary by whole vectors (emit_axes
 * cuts edges), so it splits into panel and lane. */
static stax_kir_index_t packed_weight_index(stax_kir_kernel_t* k, const lower_conv_geometry_t* g,
                                            const stax_kir_index_t* group,
                                            const stax_kir_index_t* channels, int64_t tile,
                                            int64_t taps) {
  int64_t panel = g->cg * taps * tile, tiles = (g->mg + tile - 1) / tile;
  stax_kir_index_t index = *channels;
  for (int32_t i = 0; i < index.term_count; i++) index.coefficients[i] *= g->cg * taps;
  index.constant = (channels->constant / tile) * panel + channels->constant % tile;
  stax_kir_index_add_scaled(k, &index, group, tiles * panel);
  return index;
}

/* A tile's epilogue at the current output point (L->forms): `value` (the accumulated sum,
 * averaged for a pool) + B at the point's channel, as the Conv's output, then every group
 * output stored (the group's elementwise ops read it). */
void lower_conv_store_epilogue(lower_t* L, const lower_conv_geometry_t* g, stax_kir_block_t* block,
                           const stax_kir_expr_t* value) {
  stax_kir_kernel_t* k = L->kernel;
  if (g->bias >= 0) {
    const stax_jit_value_t* b = lower_value(L, g->bias);
    stax_kir_index_t bias_index = stax_kir_index_constant(0);
    stax_kir_index_add_scaled(k, &bias_index, &L->forms[1], b->strides[0]);
    value = stax_kir_binary(k, STAX_KIR_ADD, value,
                            stax_kir_load(k, L->buffer[g->bias], &bias_index));
  }
  L->fixed[g->out] = value;
  for (int32_t i = 0; i < L->group->output_count; i++)
    lower_store_value(L, block, L->group->outputs[i], LOWER_FULL, L->rank);
  L->fixed[g->out] = NULL;
}

void lower_conv_emit_tile(lower_t* L, stax_kir_block_t* block, const lower_conv_tile_t* t) {
  stax_kir_kernel_t* k = L->kernel;
  const lower_conv_geometry_t* g = t->g;
  const stax_window_t* win = &g->window;
  bool pool = g->op != LOWER_WINDOW_CONV;
  const stax_jit_value_t* w = pool ? NULL : lower_value(L, g->w);
  int32_t rows = t->rows, lanes = t->lanes, last = g->spatial - 1;
  char name[32];
  stax_kir_loop_t* columns = lower_sym_loop(k, block, "j", lower_sym_const(lanes));
  if (!columns) return;
  columns->vector_width = lanes;
  int32_t j = stax_kir_loop_id(k, columns);
  int32_t accumulators[64];
  if (pool) {
    /* One channel: the largest tap so far (from -FLT_MAX, as the generic kernel), or the
     * float64 sum. */
    snprintf(name, sizeof(name), "acc%d_0", (int)t->tile);
    stax_dtype_t sum = g->op == LOWER_WINDOW_MAX ? STAX_DTYPE_FLOAT32 : STAX_DTYPE_FLOAT64;
    accumulators[0] = stax_kir_add_local(k, name, sum);
    stax_kir_add_declare(k, &columns->body, accumulators[0],
                         stax_kir_float(k, sum, g->op == LOWER_WINDOW_MAX ? -FLT_MAX : 0.0));
  } else {
    lower_declare_accumulators(k, &columns->body, t->tile, rows, accumulators);
  }
  /* The first output channel of the tile: g * (M/G) + tile base. */
  stax_kir_index_t channel = t->channels;
  stax_kir_index_add_scaled(k, &channel, &t->group, g->mg);
  /* Where row r's sums of earlier K blocks are (partial's element at the tile's first
   * position of channel r is this + r * partial_strides[1]). */
  stax_kir_index_t partial_index = stax_kir_index_constant(0);
  if (t->ci_count > 0) {
    const lower_sym_t* ps = t->partial_strides;
    lower_sym_index_add_scaled(k, &partial_index, &t->batch, ps[0]);
    lower_sym_index_add_scaled(k, &partial_index, &channel, ps[1]);
    for (int32_t i = 0; i < last; i++)
      lower_sym_index_add_scaled(k, &partial_index, &t->outer[i], ps[2 + i]);
    lower_sym_index_add_scaled(k, &partial_index, &t->positions, ps[2 + last]);
    lower_sym_index_term(k, &partial_index, j, ps[2 + last]);
    /* In the loop over the blocks before the last, its first iteration starts from 0 (the
     * scratch holds nothing yet: whatever it reads there is discarded). */
    const stax_kir_expr_t* first =
        t->ci_first_loop >= 0
            ? stax_kir_binary(k, STAX_KIR_EQ, stax_kir_loop_index(k, t->ci_first_loop),
                              stax_kir_int(k, STAX_DTYPE_INT64, 0))
            : NULL;
    for (int32_t r = 0; r < rows; r++) {
      stax_kir_index_t at = partial_index;
      lower_sym_index_add(k, &at, lower_sym_mul(k, lower_sym_const(r), ps[1]));
      const stax_kir_expr_t* sums = stax_kir_load(k, t->partial, &at);
      if (first) sums = stax_kir_select(k, first, stax_kir_float(k, STAX_DTYPE_FLOAT32, 0), sums);
      stax_kir_add_assign(k, &columns->body, accumulators[r], sums);
    }
  }
  /* X at (n, g*Cg + ci, o_i*stride_i + k_i*dilation_i, ..): the reduction loops add ci, k_i. */
  /* The spatial part first (a counted average's mask is indexed by it alone). */
  stax_kir_index_t x_index = stax_kir_index_constant(0);
  for (int32_t i = 0; i < last; i++)
    lower_sym_index_add_scaled(
        k, &x_index, &t->outer[i],
        lower_sym_mul(k, lower_sym_const(win->strides[i]), t->src_strides[2 + i]));
  /* Next output position: S input positions on, or the next slot of a phase-split row (the
   * innermost stride of what the compute reads is constant). */
  int64_t lane_step = t->src_strides[2 + last].c * (t->phases > 1 ? 1 : win->strides[last]);
  stax_kir_index_add_scaled(k, &x_index, &t->positions, lane_step);
  stax_kir_index_add_term(k, &x_index, j, lane_step);
  stax_kir_index_t m_index = x_index;
  lower_sym_index_add_scaled(k, &x_index, &t->batch, t->src_strides[0]);
  lower_sym_index_add_scaled(k, &x_index, &t->group,
                             lower_sym_mul(k, lower_sym_const(g->cg), t->src_strides[1]));
  int32_t counted = -1;
  if (g->count_mask) {
    snprintf(name, sizeof(name), "count%d", (int)t->tile);
    counted = stax_kir_add_local(k, name, STAX_DTYPE_FLOAT64);
    stax_kir_add_declare(k, &columns->body, counted, stax_kir_float(k, STAX_DTYPE_FLOAT64, 0.0));
  }
  /* W's index at (tile channel 0, ci 0, taps 0), and its steps per ci, kernel dim and row:
   * W's strides, or a panel's (packed_w: the tile's panel, then [Cg][taps][T]). */
  int64_t kernel_taps = 1;
  for (int32_t i = 0; i < g->spatial; i++) kernel_taps *= win->kernel[i];
  bool packed = w && t->packed_w >= 0;
  int64_t w_ci = w ? w->strides[1] : 0, w_row = w ? w->strides[0] : 0;
  int64_t w_dim[STAX_MAX_RANK] = {0};
  for (int32_t i = 0; w && i < g->spatial; i++) w_dim[i] = w->strides[2 + i];
  stax_kir_index_t w_index = stax_kir_index_constant(0);
  if (packed) {
    int64_t tile_rows = t->packed_tile;
    w_index = packed_weight_index(k, g, &t->group, &t->channels, tile_rows, kernel_taps);
    w_ci = kernel_taps * tile_rows;
    w_row = 1;
    int64_t after = kernel_taps;
    for (int32_t i = 0; i < g->spatial; i++) {
      after /= win->kernel[i];
      w_dim[i] = after * tile_rows;
    }
  } else if (w) {
    stax_kir_index_add_scaled(k, &w_index, &channel, w->strides[0]);
  }
  /* A K block starts at its first input channel; its loop then walks ci_count of them. */
  bool blocked = t->ci_count > 0;
  if (blocked) {
    lower_sym_index_add_scaled(k, &x_index, &t->ci_begin, t->src_strides[1]);
    if (w) stax_kir_index_add_scaled(k, &w_index, &t->ci_begin, w_ci);
  }
  /* Reduction loops over (ci, K1, .., Ks), extent-1 ones left out; the innermost is unrolled
   * when long (a 1x1 conv's channel loop), short kernel loops LLVM unrolls by itself. */
  stax_kir_block_t* body = &columns->body;
  stax_kir_loop_t* innermost = NULL;
  int32_t loop_dims = t->phases > 1 ? last : g->spatial;
  for (int32_t d = -1; d < loop_dims; d++) {
    int64_t extent = d < 0 ? (blocked ? t->ci_count : g->cg) : win->kernel[d];
    if (extent == 1) continue;
    stax_kir_loop_t* loop = lower_sym_loop(k, body, d < 0 ? "ci" : "kk", lower_sym_const(extent));
    if (!loop) return;
    int32_t id = stax_kir_loop_id(k, loop);
    if (d < 0) {
      lower_sym_index_term(k, &x_index, id, t->src_strides[1]);
      if (w) stax_kir_index_add_term(k, &w_index, id, w_ci);
    } else {
      lower_sym_t step = lower_sym_mul(k, lower_sym_const(win->dilations[d]), t->src_strides[2 + d]);
      lower_sym_index_term(k, &x_index, id, step);
      lower_sym_index_term(k, &m_index, id, step);
      if (w) stax_kir_index_add_term(k, &w_index, id, w_dim[d]);
    }
    /* A short kernel loop is unrolled whole: shape-generic kernels get no LLVM unrolling
     * (llvm_jit.c's short pipeline), and a 3-tap loop's branch costs as much as its FMAs.
     * Not 7 taps (a 7x7 stem's rows of 7 phase-split taps each: 49 tap bodies measured
     * twice as slow). */
    if (d >= 0 && extent <= 4) loop->unroll = (int32_t)extent;
    body = &loop->body;
    innermost = loop;
  }
  if (innermost && innermost->extent > 8) innermost->unroll = 4;
  /* A phase-split row's taps sit at constant offsets (tap * dilation in phase and slot): one
   * statement group per tap instead of a loop. */
  int64_t taps = t->phases > 1 ? win->kernel[last] : 1;
  for (int64_t tap = 0; tap < taps; tap++) {
    stax_kir_index_t x_tap = x_index, w_tap = w_index, m_tap = m_index;
    if (t->phases > 1) {
      int64_t reach = tap * win->dilations[last];
      lower_sym_t offset = lower_sym_mul(k, lower_sym_const(reach % t->phases), t->phase_length);
      lower_sym_index_add(k, &x_tap, offset);
      lower_sym_index_add(k, &m_tap, offset);
      x_tap.constant += reach / t->phases;
      m_tap.constant += reach / t->phases;
      if (w) w_tap.constant += tap * w_dim[last];
    }
    snprintf(name, sizeof(name), "x%d_%d", (int)t->tile, (int)tap);
    int32_t x_local = stax_kir_add_local(k, name, STAX_DTYPE_FLOAT32);
    stax_kir_add_declare(k, body, x_local, stax_kir_load(k, t->source, &x_tap));
    if (pool) {
      const stax_kir_expr_t* v = stax_kir_local(k, x_local);
      const stax_kir_expr_t* acc = stax_kir_local(k, accumulators[0]);
      stax_kir_add_assign(
          k, body, accumulators[0],
          g->op == LOWER_WINDOW_MAX
              ? stax_kir_select(k, stax_kir_binary(k, STAX_KIR_GT, v, acc), v, acc)
              : stax_kir_binary(k, STAX_KIR_ADD, acc, stax_kir_cast(k, STAX_DTYPE_FLOAT64, v)));
      if (counted >= 0)
        stax_kir_add_assign(
            k, body, counted,
            stax_kir_binary(k, STAX_KIR_ADD, stax_kir_local(k, counted),
                            stax_kir_cast(k, STAX_DTYPE_FLOAT64, stax_kir_load(k, t->mask, &m_tap))));
      continue;
    }
    for (int32_t r = 0; r < rows; r++) {
      stax_kir_index_t weight = w_tap;
      weight.constant += r * w_row;
      const stax_kir_expr_t* product = stax_kir_fma(
          k, stax_kir_load(k, packed ? t->packed_w : L->buffer[g->w], &weight),
          stax_kir_local(k, x_local), stax_kir_local(k, accumulators[r]));
      stax_kir_add_assign(k, body, accumulators[r], product);
    }
  }
  /* A K block before the last leaves its sums for the next one. */
  if (t->ci_count > 0 && !t->ci_last) {
    for (int32_t r = 0; r < rows; r++) {
      stax_kir_index_t at = partial_index;
      lower_sym_index_add(k, &at, lower_sym_mul(k, lower_sym_const(r), t->partial_strides[1]));
      stax_kir_add_store(k, &columns->body, t->partial, &at, stax_kir_local(k, accumulators[r]));
    }
    return;
  }
  /* The epilogue, channel by channel, at the tile's output points. */
  for (int32_t r = 0; r < rows; r++) {
    L->forms[0] = t->batch;
    L->forms[1] = channel;
    L->forms[1].constant += r;
    for (int32_t i = 0; i < last; i++) L->forms[2 + i] = t->outer[i];
    L->forms[2 + last] = t->positions;
    stax_kir_index_add_term(k, &L->forms[2 + last], j, 1);
    lower_new_point(L);
    const stax_kir_expr_t* value = stax_kir_local(k, accumulators[r]);
    if (g->op == LOWER_WINDOW_AVERAGE)
      value = stax_kir_cast(
          k, STAX_DTYPE_FLOAT32,
          stax_kir_binary(k, STAX_KIR_DIV, value,
                          counted >= 0 ? stax_kir_local(k, counted)
                                       : stax_kir_float(k, STAX_DTYPE_FLOAT64, g->divisor)));
    lower_conv_store_epilogue(L, g, &columns->body, value);
  }
}

static void emit_channel_tile(conv_t* c, stax_kir_block_t* block);

/* One tile at the axes' current forms. */
static void emit_tile(conv_t* c, stax_kir_block_t* block) {
  if (c->channel_vectors) {
    emit_channel_tile(c, block);
    return;
  }
  lower_conv_tile_t t = {.g = &c->g,
                         .source = c->source,
                         .phases = c->phases,
                         .phase_length = lower_sym_const(c->phase_length),
                         .batch = find_axis(c, AXIS_BATCH, 0)->form,
                         .group = find_axis(c, AXIS_GROUP, 0)->form,
                         .channels = find_axis(c, AXIS_CHANNELS, 0)->form,
                         .positions = find_axis(c, AXIS_POSITIONS, 0)->form,
                         .rows = find_axis(c, AXIS_CHANNELS, 0)->size,
                         .lanes = find_axis(c, AXIS_POSITIONS, 0)->size,
                         .tile = c->tiles++,
                         .mask = -1,
                         .packed_w = c->packed_w,
                         .packed_tile = c->mr,
                         .ci_begin = c->ci_begin,
                         .ci_count = c->k_blocks > 1 ? c->ci_count : 0,
                         .ci_last = c->ci_last,
                         .ci_first_loop = c->ci_first_loop,
                         .partial = c->partial};
  for (int32_t d = 0; d < 2 + c->g.spatial; d++)
    t.partial_strides[d] = lower_sym_const(c->partial_strides[d]);
  for (int32_t d = 0; d < 2 + c->g.spatial; d++) t.src_strides[d] = lower_sym_const(c->source_strides[d]);
  for (int32_t i = 0; i + 1 < c->g.spatial; i++) t.outer[i] = find_axis(c, AXIS_OUTER, i)->form;
  lower_conv_emit_tile(c->L, block, &t);
}

/* ---- narrow rows: vectors over output channels -------------------------------------------- */

/* The weights repacked for channel tiles: per group, per tile of T = mr output channels, a
 * panel [Cg][taps][T] (the last tile's lanes past Mg unused), so a tile's weights are one
 * sequential stream of T-lane vectors, as matmul's B panels (W's own layout puts the channels
 * Cg*taps apart, and even channel-innermost, one tap's T lanes every Mg floats, the
 * prefetchers cannot follow across pages). The stage only turns the constant W into that
 * layout: the host runs it once per weight and keeps the result with it. */
int32_t lower_conv_pack_weights(lower_t* L, const lower_conv_geometry_t* g, int64_t tile) {
  stax_kir_kernel_t* k = L->kernel;
  const stax_jit_value_t* w = lower_value(L, g->w);
  int64_t taps = 1;
  for (int32_t i = 0; i < g->spatial; i++) taps *= g->window.kernel[i];
  int64_t tiles = (g->mg + tile - 1) / tile, panel = g->cg * taps * tile;
  int64_t dims[1] = {g->group * tiles * panel};
  int32_t packed = stax_kir_add_buffer(k, "wt", STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32, 1,
                                       dims, NULL);
  stax_kir_block_t* block = stax_kir_add_stage(k, "pack_w");
  if (packed < 0 || !block) return -1;
  int32_t stage = k->stage_count - 1;
  int64_t full = g->mg / tile, edge = g->mg % tile;
  /* Full tiles (a loop), then the edge tile (a constant tile index). */
  for (int32_t part = 0; part < 2; part++) {
    int64_t count = part == 0 ? full : (edge > 0 ? 1 : 0), lanes = part == 0 ? tile : edge;
    if (count == 0) continue;
    stax_kir_index_t source = stax_kir_index_constant(0), target = stax_kir_index_constant(0);
    stax_kir_loop_t* loop = lower_sym_loop(k, block, "wg", lower_sym_const(g->group));
    if (!loop) return -1;
    stax_kir_index_add_term(k, &source, stax_kir_loop_id(k, loop), g->mg * w->strides[0]);
    stax_kir_index_add_term(k, &target, stax_kir_loop_id(k, loop), tiles * panel);
    if (part == 0) {
      loop = lower_sym_loop(k, &loop->body, "wt", lower_sym_const(full));
      if (!loop) return -1;
      stax_kir_index_add_term(k, &source, stax_kir_loop_id(k, loop), tile * w->strides[0]);
      stax_kir_index_add_term(k, &target, stax_kir_loop_id(k, loop), panel);
    } else {
      source.constant += full * tile * w->strides[0];
      target.constant += full * panel;
    }
    loop = lower_sym_loop(k, &loop->body, "wc", lower_sym_const(g->cg));
    if (!loop) return -1;
    stax_kir_index_add_term(k, &source, stax_kir_loop_id(k, loop), w->strides[1]);
    stax_kir_index_add_term(k, &target, stax_kir_loop_id(k, loop), taps * tile);
    int64_t after = taps;
    for (int32_t i = 0; i < g->spatial; i++) {
      after /= g->window.kernel[i];
      loop = lower_sym_loop(k, &loop->body, "wk", lower_sym_const(g->window.kernel[i]));
      if (!loop) return -1;
      stax_kir_index_add_term(k, &source, stax_kir_loop_id(k, loop), w->strides[2 + i]);
      stax_kir_index_add_term(k, &target, stax_kir_loop_id(k, loop), after * tile);
    }
    loop = lower_sym_loop(k, &loop->body, "wm", lower_sym_const(lanes));
    if (!loop) return -1;
    stax_kir_index_add_term(k, &source, stax_kir_loop_id(k, loop), w->strides[0]);
    stax_kir_index_add_term(k, &target, stax_kir_loop_id(k, loop), 1);
    stax_kir_add_store(k, &loop->body, packed, &target,
                       stax_kir_load(k, L->buffer[g->w], &source));
  }
  uint64_t key = stax_hash_combine(0xc0a7e17ull, (uint64_t)g->group);
  key = stax_hash_combine(key, (uint64_t)g->cg);
  key = stax_hash_combine(key, (uint64_t)g->mg);
  key = stax_hash_combine(key, (uint64_t)tile);
  for (int32_t d = 0; d < w->rank; d++) {
    key = stax_hash_combine(key, (uint64_t)w->dims[d]);
    key = stax_hash_combine(key, (uint64_t)w->strides[d]);
  }
  k->stages[stage]->fills = packed;
  k->stages[stage]->source = L->buffer[g->w];
  k->stages[stage]->fill_key = key;
  return packed;
}

/* A channel tile: a vector loop over `size` output channels of the channel axis, holding one
 * accumulator per output position of the tile (outer_rows rows of the innermost outer dim x
 * the whole innermost row), so a row of 7 fills every lane where a position vector would
 * hold 7 of 16. Per (input channel, tap): one vector of repacked weights, and per position
 * one broadcast input value into its accumulator. The epilogue stores each position's
 * channels (a store of `size` lanes, H*W apart: once per output, after Cg*taps FMAs). */
static void emit_channel_tile(conv_t* c, stax_kir_block_t* block) {
  lower_t* L = c->L;
  stax_kir_kernel_t* k = c->k;
  const lower_conv_geometry_t* g = &c->g;
  const stax_window_t* win = &g->window;
  int32_t last = g->spatial - 1, tile = c->tiles++;
  const axis_t* channels = find_axis(c, AXIS_CHANNELS, 0);
  const axis_t* positions = find_axis(c, AXIS_POSITIONS, 0);
  const axis_t* rows_axis = last > 0 ? find_axis(c, AXIS_OUTER, last - 1) : NULL;
  const stax_kir_index_t* batch = &find_axis(c, AXIS_BATCH, 0)->form;
  const stax_kir_index_t* group = &find_axis(c, AXIS_GROUP, 0)->form;
  int32_t cols = positions->size, nrows = rows_axis ? rows_axis->size : 1;
  int32_t count = cols * nrows;
  if (count > 64) return;
  int64_t taps = 1;
  for (int32_t i = 0; i < g->spatial; i++) taps *= win->kernel[i];
  stax_kir_loop_t* lanes = add_loop(c, block, "j", channels->size);
  if (!lanes) return;
  lanes->vector_width = channels->size;
  int32_t j = stax_kir_loop_id(k, lanes);
  int32_t accumulators[64];
  lower_declare_accumulators(k, &lanes->body, tile, count, accumulators);
  /* Weights at (g, the tile's panel, ci = 0, tap 0, lane j). */
  int64_t tile_lanes = c->mr;
  stax_kir_index_t w_index =
      packed_weight_index(k, g, group, &channels->form, tile_lanes, taps);
  stax_kir_index_add_term(k, &w_index, j, 1);
  stax_kir_index_t x_index = stax_kir_index_constant(0);
  stax_kir_index_add_scaled(k, &x_index, batch, c->source_strides[0]);
  stax_kir_index_add_scaled(k, &x_index, group, g->cg * c->source_strides[1]);
  for (int32_t i = 0; i < last; i++)
    stax_kir_index_add_scaled(k, &x_index, &find_axis(c, AXIS_OUTER, i)->form,
                              win->strides[i] * c->source_strides[2 + i]);
  /* Next output position along the row: S input positions on, or the next slot of a
   * phase-split row. */
  int64_t col_step = c->source_strides[2 + last] * (c->phases > 1 ? 1 : win->strides[last]);
  stax_kir_index_add_scaled(k, &x_index, &positions->form, col_step);
  int64_t row_step = last > 0 ? win->strides[last - 1] * c->source_strides[1 + last] : 0;
  /* Reductions over ci and the kernel dims; a phase-split innermost dim's taps are
   * statements at constant offsets instead of a loop. */
  stax_kir_block_t* body = &lanes->body;
  int64_t after = taps;
  int32_t loop_dims = c->phases > 1 ? last : g->spatial;
  for (int32_t d = -1; d < loop_dims; d++) {
    int64_t extent = d < 0 ? g->cg : win->kernel[d];
    if (d >= 0) after /= win->kernel[d];
    if (extent == 1) continue;
    stax_kir_loop_t* loop = add_loop(c, body, d < 0 ? "ci" : "kk", extent);
    if (!loop) return;
    int32_t id = stax_kir_loop_id(k, loop);
    stax_kir_index_add_term(k, &x_index, id,
                            d < 0 ? c->source_strides[1]
                                  : win->dilations[d] * c->source_strides[2 + d]);
    stax_kir_index_add_term(k, &w_index, id, d < 0 ? taps * tile_lanes : after * tile_lanes);
    body = &loop->body;
  }
  int64_t statement_taps = c->phases > 1 ? win->kernel[last] : 1;
  for (int64_t tap = 0; tap < statement_taps; tap++) {
    int64_t reach = tap * win->dilations[last];
    stax_kir_index_t w_tap = w_index, x_tap = x_index;
    if (c->phases > 1) {
      w_tap.constant += tap * tile_lanes;
      x_tap.constant += (reach % c->phases) * c->phase_length + reach / c->phases;
    }
    char name[32];
    snprintf(name, sizeof(name), "w%d_%d", (int)tile, (int)tap);
    int32_t weights = stax_kir_add_local(k, name, STAX_DTYPE_FLOAT32);
    stax_kir_add_declare(k, body, weights, stax_kir_load(k, c->packed_w, &w_tap));
    for (int32_t p = 0; p < count; p++) {
      stax_kir_index_t at = x_tap;
      at.constant += (p / cols) * row_step + (p % cols) * col_step;
      stax_kir_add_assign(k, body, accumulators[p],
                          stax_kir_fma(k, stax_kir_load(k, c->source, &at),
                                       stax_kir_local(k, weights),
                                       stax_kir_local(k, accumulators[p])));
    }
  }
  /* The epilogue, position by position, at the tile's channels. */
  for (int32_t p = 0; p < count; p++) {
    L->forms[0] = *batch;
    L->forms[1] = channels->form;
    stax_kir_index_add_scaled(k, &L->forms[1], group, g->mg);
    stax_kir_index_add_term(k, &L->forms[1], j, 1);
    for (int32_t i = 0; i < last; i++) L->forms[2 + i] = find_axis(c, AXIS_OUTER, i)->form;
    if (last > 0) L->forms[1 + last].constant += p / cols;
    L->forms[2 + last] = positions->form;
    L->forms[2 + last].constant += p % cols;
    lower_new_point(L);
    const stax_kir_expr_t* value = stax_kir_local(k, accumulators[p]);
    lower_conv_store_epilogue(L, g, &lanes->body, value);
  }
}

/* ---- the loop nest ----------------------------------------------------------------------- */

/* Tiles of a tiled axis, or coordinates of a full one; the count a parallel split sees. */
static int64_t axis_count(const axis_t* a) {
  return a->tile ? a->extent / a->tile : a->extent;
}

static void emit_axes(conv_t* c, stax_kir_block_t* block, int32_t level);

/* The K blocks at `level`: a loop over the blocks before the last (the first from 0, the
 * others from `partial`; sums back to `partial`), then the last (from `partial`, then the
 * epilogue). Two copies of the nest inside: matmul's K blocks give the first block a copy of
 * its own (sums from 0), which measured no faster here, and every copy adds compile time. */
static void emit_k_blocks(conv_t* c, stax_kir_block_t* block, int32_t level) {
  int64_t last_base = (c->k_blocks - 1) * c->kc;
  stax_kir_loop_t* loop = add_loop(c, block, "kb", c->k_blocks - 1);
  if (!loop) return;
  c->ci_last = false;
  c->ci_first_loop = stax_kir_loop_id(c->k, loop);
  c->ci_begin = loop_form(c, loop, c->kc);
  c->ci_count = c->kc;
  emit_axes(c, &loop->body, level + 1);
  c->ci_last = true;
  c->ci_first_loop = -1;
  c->ci_begin = stax_kir_index_constant(last_base);
  c->ci_count = c->g.cg - last_base;
  emit_axes(c, block, level + 1);
}

static void emit_axes(conv_t* c, stax_kir_block_t* block, int32_t level) {
  if (!block) return;
  if (level == c->axis_count) {
    emit_tile(c, block);
    return;
  }
  axis_t* a = &c->axes[c->order[level]];
  if (a->kind == AXIS_KBLOCK) {
    emit_k_blocks(c, block, level);
    return;
  }
  bool parallel = level == 0 && c->parallel;
  int64_t step = a->tile ? a->tile : 1;
  int64_t full = axis_count(a), edge = a->tile ? a->extent % a->tile : 0;
  if (a->extent_param >= 0) {
    /* An open batch: a loop over the parameter, whatever the example's extent. */
    stax_kir_loop_t* loop = add_loop(c, block, "n", 0);
    if (!loop) return;
    loop->extent_param = a->extent_param;
    loop->parallel = parallel;
    if (parallel) loop->grain = c->grain;
    a->size = 1;
    a->form = loop_form(c, loop, 1);
    emit_axes(c, &loop->body, level + 1);
    return;
  }
  if (full > 0) {
    a->size = (int32_t)step;
    if (full == 1 && !parallel) {
      a->form = stax_kir_index_constant(0);
      emit_axes(c, block, level + 1);
    } else {
      static const char* const names[] = {"n", "g", "o", "m", "p"};
      stax_kir_loop_t* loop = add_loop(c, block, names[a->kind], full);
      if (!loop) return;
      loop->parallel = parallel;
      if (parallel) loop->grain = c->grain;
      a->form = loop_form(c, loop, step);
      emit_axes(c, &loop->body, level + 1);
    }
  }
  if (edge > 0) {
    /* A parallel loop must be alone in its stage: the edge tile gets its own. */
    stax_kir_block_t* edge_block =
        parallel && full > 0 ? stax_kir_add_stage(c->k, "conv_edge") : block;
    /* An edge of positions wider than one native vector but not a multiple of it is cut into
     * whole vectors and the rest: LLVM legalizes such vectors (12 or 14 lanes on AVX2)
     * element by element through the stack, several times slower than the two pieces. */
    int64_t lanes = c->L->vector_lanes_f32;
    axis_kind_t vector_axis = c->channel_vectors ? AXIS_CHANNELS : AXIS_POSITIONS;
    int64_t first = a->kind == vector_axis && edge > lanes ? edge - edge % lanes : edge;
    for (int64_t offset = 0; offset < edge; offset += first, first = edge - first) {
      a->form = stax_kir_index_constant(full * step + offset);
      a->size = (int32_t)first;
      emit_axes(c, edge_block, level + 1);
    }
  }
}

/* K blocks: the reduction over a group's input channels cut into blocks of about
 * CONV_K_BLOCK_BYTES / (band + panel) channels, `band` the bytes of input rows one output row
 * reads per input channel and `panel` a channel tile's weights per input channel, so a block's
 * rows (rows outside the channel tiles) or its slice of the tile's weights (channel tiles
 * outside the rows) stay in L1 while the tiles within pass over them; without blocks a tile
 * walks all Cg channels' rows and weights (64 x 3 x 58 floats at 56x56: 44 KB, 28 KB of
 * weights) and L1 (32 KB on Zen 3) holds neither across tiles. Measured on Zen 3, one thread,
 * 3x3 + bias + Relu: 56x56x64 2.64 -> 2.50 ms, 28x28x128 3.35 -> 3.18, 14x14x256 3.57 ->
 * 3.39, 16x16x512 15.4 -> 12.3. Not for rows narrower than a native vector: every tile is
 * then an odd-width vector, whose partial sums LLVM loads and stores piece by piece (7x7x512:
 * 3.84 -> 4.13 ms); nor for channel tiles. STAX_JIT_CONV_K_BLOCKS=0 switches blocking off,
 * STAX_JIT_CONV_KC=n asks for blocks of n channels (tests, tuning). */
#define CONV_K_BLOCK_BYTES 20480

/* The input channels per block for `band` and `panel` bytes per input channel; 0 when
 * blocking is switched off. */
static int64_t k_block_target(int64_t band, int64_t panel) {
  if (getenv_flag_off("STAX_JIT_CONV_K_BLOCKS")) return 0;
  const char* forced = getenv("STAX_JIT_CONV_KC");
  if (forced && atoll(forced) > 0) return atoll(forced);
  int64_t target = CONV_K_BLOCK_BYTES / (band + panel > 0 ? band + panel : 1);
  return target < 8 ? 8 : target;
}

static void choose_k_blocks(conv_t* c) {
  c->k_blocks = 1;
  c->kc = c->g.cg;
  c->partial = -1;
  c->ci_first_loop = -1;
  const lower_conv_geometry_t* g = &c->g;
  int32_t last = g->spatial - 1;
  if (c->channel_vectors || g->window.output[last] < c->L->vector_lanes_f32) return;
  int64_t taps = 1, rows = 1;
  for (int32_t i = 0; i < g->spatial; i++) taps *= g->window.kernel[i];
  for (int32_t i = 0; i < last; i++) rows *= (g->window.kernel[i] - 1) * g->window.dilations[i] + 1;
  int64_t target = k_block_target(rows * c->source_strides[1 + last] * 4,
                                  (int64_t)c->mr * taps * 4);
  if (target <= 0 || g->cg <= target) return;
  /* Nearly equal blocks (the last one at most kc). */
  c->k_blocks = (g->cg + target - 1) / target;
  c->kc = (g->cg + c->k_blocks - 1) / c->k_blocks;
  c->k_blocks = (g->cg + c->kc - 1) / c->kc;
  const stax_jit_value_t* out = lower_value(c->L, g->out);
  c->partial = stax_kir_add_buffer(c->k, "partial", STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32,
                                   out->rank, out->dims, NULL);
  if (c->batch_param >= 0 && c->partial >= 0)
    stax_kir_buffer_dim_param(c->k, c->partial, 0, c->batch_param);
  stax_shape_contiguous_strides(out->rank, out->dims, c->partial_strides);
}

static void plan_nest(conv_t* c) {
  int32_t count = 0;
  bool open = c->batch_param >= 0;
  c->axes[count++] =
      (axis_t){.kind = AXIS_BATCH, .extent = c->g.batch, .extent_param = c->batch_param};
  c->axes[count++] = (axis_t){.kind = AXIS_GROUP, .extent = c->g.group, .extent_param = -1};
  /* K blocks just outside the channel tiles: a block's input rows (rows outside) or its
   * slice of a tile's weights (channel tiles outside) stay in L1 over the tiles within. */
  axis_t k_blocks = {.kind = AXIS_KBLOCK, .extent = c->k_blocks, .extent_param = -1};
  /* Channel tiles outside the rows when the weights are the larger operand (late CNN stages:
   * 512 x 512 x 3 x 3 is 9.4 MB against a 7x7 image's 100 KB): a tile's slice of them stays
   * in L2 over every row, where rows outside re-read all of them from memory per row. */
  if (c->weights_outer) {
    if (c->k_blocks > 1) c->axes[count++] = k_blocks;
    c->axes[count++] =
        (axis_t){.kind = AXIS_CHANNELS, .extent = c->g.mg, .tile = c->mr, .extent_param = -1};
  }
  for (int32_t i = 0; i + 1 < c->g.spatial; i++)
    c->axes[count++] = (axis_t){.kind = AXIS_OUTER,
                                .dim = i,
                                .extent = c->g.window.output[i],
                                /* channel tiles cover outer_rows rows of the innermost one */
                                .tile = c->channel_vectors && i + 2 == c->g.spatial
                                            ? c->outer_rows : 0,
                                .extent_param = -1};
  if (!c->weights_outer) {
    if (c->k_blocks > 1) c->axes[count++] = k_blocks;
    c->axes[count++] =
        (axis_t){.kind = AXIS_CHANNELS, .extent = c->g.mg, .tile = c->mr, .extent_param = -1};
  }
  c->axes[count++] = (axis_t){.kind = AXIS_POSITIONS,
                              .extent = c->g.window.output[c->g.spatial - 1],
                              .tile = c->nr,
                              .extent_param = -1};
  c->axis_count = count;
  /* The parallel axis: the first with an iteration per thread, else the one with the most.
   * An open batch is chosen only when no fixed axis has more than one iteration (its
   * example extent says nothing of the calls the kernel will serve). */
  int32_t threads = c->L->options->thread_count > 1 ? c->L->options->thread_count : 1;
  int32_t chosen = -1, widest = open ? 1 : 0;
  for (int32_t a = 0; a < count; a++) {
    if ((open && a == 0) || c->axes[a].kind == AXIS_KBLOCK) continue;
    if (chosen < 0 && axis_count(&c->axes[a]) >= threads) chosen = a;
    if (axis_count(&c->axes[a]) > axis_count(&c->axes[widest])) widest = a;
  }
  if (chosen < 0) chosen = open && axis_count(&c->axes[widest]) <= 1 ? 0 : widest;
  c->order[0] = chosen;
  for (int32_t a = 0, at = 1; a < count; a++)
    if (a != chosen) c->order[at++] = a;
  int64_t iterations = axis_count(&c->axes[chosen]);
  c->parallel = iterations > 1 || c->axes[chosen].extent_param >= 0;
  /* Multiply-adds per iteration of the parallel loop (per batch image when N is open). */
  double work =
      (double)c->g.cg * (double)c->g.out_channels * (double)(open ? 1 : c->g.batch);
  for (int32_t i = 0; i < c->g.spatial; i++)
    work *= (double)c->g.window.kernel[i] * (double)c->g.window.output[i];
  work /= (double)(iterations > 0 ? iterations : 1);
  c->grain = work >= CONV_TASK_WORK ? 1 : (int64_t)(CONV_TASK_WORK / (work + 1)) + 1;
}

stax_status_t lower_conv_group(lower_t* L, int32_t node) {
  conv_t c;
  memset(&c, 0, sizeof(c));
  c.L = L;
  c.k = L->kernel;
  c.g.node = node;
  if (L->group->symbolic) {
    /* Open spatial dims (an image size that varies) take the symbolic lowering; an open
     * batch alone keeps this one's tiles. */
    lower_conv_geometry_t g;
    STAX_RETURN_IF_ERROR(lower_conv_geometry(L, node, &g));
    if ((lower_value(L, g.x)->open_dims | lower_value(L, g.out)->open_dims) & ~1u)
      return lower_conv_symbolic(L, &g);
  }
  STAX_RETURN_IF_ERROR(analyze(&c));
  /* The epilogue is emitted once per tile variant: keep its math out of line. */
  c.k->compact_math = true;
  int32_t lanes = L->vector_lanes_f32;
  c.nr = 2 * lanes;
  c.mr = lanes >= 16 ? 12 : 6;
  /* Rows narrower than a tile (late CNN stages: 7 or 14 wide) leave one vector per
   * accumulator: twice the channels keep as many FMA chains in flight in the same registers. */
  int64_t row = c.g.window.output[c.g.spatial - 1];
  if (row < c.nr) c.mr *= 2;
  /* Rows of at most half a native vector (7 wide on AVX-512) would leave most lanes empty:
   * vectors over two native vectors of output channels instead, one accumulator per position
   * (up to 14: 28 accumulator registers of 32), the weights repacked once. */
  const stax_jit_value_t* weight = lower_value(L, c.g.w);
  /* (Channel tiles over wider rows measured the same as position tiles: 56x56x64 3x3, 1.84
   * against 1.91 ms on one thread; ResNet-18 at 224 33.6 against 33.0 ms.) */
  if (lanes >= 16 && row > 0 && 2 * row <= lanes && c.g.mg >= lanes && weight->constant &&
      !getenv_flag_off("STAX_JIT_CONV_CHANNEL_TILES")) {
    /* Up to 12 positions (whole rows) x two channel vectors: at most 24 accumulators, as the
     * matmul tile (28 spilled). Rows of 7 take 7 positions x 32 channels, rows of 4 three rows
     * x 32. (Three vectors, 48 lanes, LLVM legalizes lane by lane: 6x slower.) */
    c.channel_vectors = true;
    int64_t outer = c.g.spatial > 1 ? c.g.window.output[c.g.spatial - 2] : 1;
    int64_t cols = row < 12 ? row : 12;
    int64_t rows = 12 / cols;
    c.outer_rows = rows < 1 ? 1 : rows > outer ? outer : rows;
    int64_t positions = c.outer_rows * cols, vectors = 24 / positions;
    if (vectors > 2) vectors = 2;
    while (vectors > 1 && c.g.mg < vectors * lanes) vectors--;
    c.mr = (int32_t)(vectors * lanes);
    c.nr = (int32_t)cols;
  }
  /* An empty output: a kernel that does nothing (for a fixed shape; an open batch may be 0 at
   * run time, which the loops handle). */
  int64_t total = 1;
  for (int32_t d = c.batch_param >= 0 ? 1 : 0; d < L->rank; d++) total *= L->dims[d];
  if (total == 0) {
    stax_kir_add_stage(c.k, "empty");
    return stax_kir_kernel_status(c.k);
  }
  const stax_jit_value_t* x = lower_value(L, c.g.x);
  bool pads = false;
  for (int32_t i = 0; i < 2 * c.g.spatial; i++) pads = pads || c.g.window.pads[i] != 0;
  /* A strided innermost dim is copied too: the compute's loads then move by the conv stride
   * only (unit-stride vector loads at stride 1). */
  c.phases = c.g.window.strides[c.g.spatial - 1];
  c.padded = pads || c.phases > 1 || (x->strides[x->rank - 1] != 1 && x->dims[x->rank - 1] > 1);
  /* Rows under lower_conv_patch_below, with channels enough for vectors over them: a GEMM
   * over the plane's patches (lower_conv_patch.c) fills every lane. Its patch copy reads X as
   * it is (scalar loads at any stride) unless there are pads to read. */
  bool patches =
      !c.channel_vectors && row < lower_conv_patch_below(L) && lower_conv_patch_fits(L, &c.g);
  {
    /* Not where the patches would outgrow memory (taps x the input; an open batch is
     * bounded per call instead, jit.c's scratch limit). */
    double bytes = 4.0 * (double)c.g.cg * (double)(c.batch_param >= 0 ? 1 : c.g.batch);
    for (int32_t i = 0; i < c.g.spatial; i++)
      bytes *= (double)c.g.window.kernel[i] * (double)c.g.window.output[i];
    patches = patches && bytes <= (double)LOWER_CONV_PATCH_MAX_BYTES;
  }
  if (patches && !pads) {
    c.padded = false;
    c.phases = 1;
  }
  if (c.padded) {
    emit_pad(&c);
  } else {
    c.source = L->buffer[c.g.x];
    memcpy(c.source_strides, x->strides, sizeof(int64_t) * (size_t)x->rank);
  }
  if (patches) {
    lower_conv_patch_t patch = {.g = &c.g,
                                .source = c.source,
                                .phases = c.phases,
                                .phase_length = lower_sym_const(c.phase_length),
                                .batch = c.batch_param >= 0 ? lower_sym_param(c.batch_param)
                                                            : lower_sym_const(c.g.batch),
                                .when = lower_sym_const(0)};
    for (int32_t d = 0; d < 2 + c.g.spatial; d++)
      patch.src_strides[d] = lower_sym_const(c.source_strides[d]);
    for (int32_t i = 0; i < c.g.spatial; i++)
      patch.out[i] = lower_sym_const(c.g.window.output[i]);
    return lower_conv_patch(L, &patch);
  }
  /* The loop order: weights (per group) larger than one image's input plane set -> channel
   * tiles outermost. */
  {
    const stax_jit_value_t* xv = lower_value(L, c.g.x);
    double w_bytes = (double)c.g.mg * (double)c.g.cg * 4.0, x_bytes = (double)c.g.cg * 4.0;
    for (int32_t i = 0; i < c.g.spatial; i++) {
      w_bytes *= (double)c.g.window.kernel[i];
      x_bytes *= (double)xv->dims[2 + i];
    }
    c.weights_outer = w_bytes > x_bytes && !getenv_flag_off("STAX_JIT_CONV_WEIGHTS_OUTER");
  }
  /* Constant weights go into per-tile panels (lower_conv_pack_weights) for either tile kind: a
   * position tile's rows then read one sequential stream of MR-channel runs instead of
   * scalars Cg*taps apart. */
  c.packed_w = -1;
  if (weight->constant &&
      (c.channel_vectors || !getenv_flag_off("STAX_JIT_CONV_PACK_WEIGHTS")))
    c.packed_w = lower_conv_pack_weights(L, &c.g, c.mr);
  choose_k_blocks(&c);
  plan_nest(&c);
  emit_axes(&c, stax_kir_add_stage(c.k, "conv"), 0);
  return stax_kir_kernel_status(c.k);
}
