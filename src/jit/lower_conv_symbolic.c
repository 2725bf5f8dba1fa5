/* Conv over open spatial dims: one kernel for every image size (and batch) of a shape class,
 * float32, with the elementwise epilogue of lower_conv.c.
 *
 * The sizes that vary are kernel parameters: N and the output sizes O_i are read from Y (the
 * iteration space, lower_symbolic_space), the input sizes D_i from X, X's strides from X.
 * Channels, weights, kernel sizes, strides, dilations and pads stay compile-time constants
 * (auto_pad SAME only where it pads the same at every size: stride 1 on the open dims), so
 * the register tile, the reduction loops and the phase split are chosen statically, as for an
 * exact shape.
 *
 * The structure is lower_conv.c's: a first stage copies X into a zero-padded scratch (border
 * slabs zeroed, interior copied, the innermost dim split by phase when the conv strides it),
 * so every load is in bounds; it is skipped without pads, strides or a strided X. The padded
 * sizes and the scratch's strides are parameter expressions (D_i + pads, their products);
 * the phase split's per-phase counts are floor expressions of D. The compute walks batch,
 * group, the outer output rows, channel tiles (MR) and position tiles along the innermost
 * output dim. Position tiles are where the open size shows: a stage per tile width W
 * (two native vectors, one, halves down to 4 lanes, then 1), each run only while W <= O_last
 * < the next wider width, with floor(O_last / W) tiles and, when W does not divide O_last, one
 * more at O_last - W overlapping the one before it (its outputs are recomputed from the same
 * inputs in the same order: the same values; no code per tail, no recompiling; in the widest
 * stage a rest of at most half a tile takes a half-width tile at O_last - W/2). Stages whose
 * tiles are narrower than the widest take 2 x MR channels (more FMA chains in the same
 * registers, as lower_conv.c does for narrow rows); with one group, channels for two vectors
 * and a constant weight, the sizes under 3.5 native vectors (lower_conv_patch_below) take the
 * GEMM over patches (lower_conv_patch.c) instead of the narrower stages, the widest width the
 * sizes from there on. The parallel loop is fixed per kernel: the
 * first of a fixed batch, the groups, the outer output rows and the channel tiles that gives
 * every thread an iteration (an open outer dim always does), else an open batch. The host verifies every access at each new tuple of
 * sizes before running it (kernel_ir.h, symbolic kernels).
 *
 * MaxPool and AveragePool take the same path as depthwise windows without weights
 * (lower_pool.c hands them over): one channel per tile, the padded copy filled with -FLT_MAX
 * for a max (the generic kernel's start value, so padding never wins and the results are the
 * generic kernel's bit for bit), an average's float64 sum divided by its fixed tap count.
 *
 * An average that does not count its pads divides by the window's sum over a mask of the
 * padded plane (1 inside the input, 0 in the pads; one plane for every batch and channel,
 * filled in a stage of its own), counted in float64 like the generic kernel's count.
 *
 * With ceil_mode the copy also pads the stride - 1 positions the last window may reach past
 * the end pad (the lowest float for a max; for an average 0, and 0 in its mask: ONNX counts
 * no tap there, and a mask that counts the pads is 1 over the pads, 0 only there).
 *
 * auto_pad SAME with a stride S > 1 over an open size D pads by T(D) = S ceil(D / S) - D +
 * (K - S) for a window extent K >= S (K = 1 pads nothing at any size), begin floor(T / 2)
 * (SAME_UPPER) or ceil(T / 2) (SAME_LOWER): parameters of D, and the padded size
 * S ceil(D / S) + K - S too. Such a Conv zeroes each padded plane first and copies the input
 * in at the begin pad; along a phase-split innermost dim, input position S a + j goes to
 * phase (begin + j) % S at offset a + (begin + j) / S, a parameter per j. The compute reads
 * the padded plane at o S + tap as at any size, so tiles, taps and phases stay static.
 *
 * MaxPool takes the same path (its planes filled with its start value instead of zeros).
 *
 * Not done: auto_pad SAME with 1 < K < S over an open dim (T(D) is not quasi-linear there),
 * SAME strided AveragePool and ceil_mode MaxPool, a weight or bias read again in the
 * epilogue, float64 and halves. */
#include <float.h>
#include <string.h>

#include "jit/lower_internal.h"

/* Multiply-adds one parallel task should get at least (as lower_conv.c). */
#define SCONV_TASK_WORK 65536

typedef enum saxis_kind_e {
  SAXIS_BATCH,
  SAXIS_GROUP,
  SAXIS_OUTER,
  SAXIS_CHANNELS,
  SAXIS_POSITIONS
} saxis_kind_t;

typedef struct saxis_t {
  saxis_kind_t kind;
  int32_t dim;        /* SAXIS_OUTER: which spatial dim */
  lower_sym_t extent; /* coordinates */
  /* At the current point: the coordinate (full axes) or the tile's first coordinate, and the
   * tile's size. */
  stax_kir_index_t form;
  int32_t size;
} saxis_t;

typedef struct sconv_t {
  lower_t* L;
  stax_kir_kernel_t* k;
  const lower_conv_geometry_t* g;
  int32_t spatial, last;
  lower_sym_t in[STAX_MAX_RANK];        /* input spatial sizes D_i */
  lower_sym_t x_strides[STAX_MAX_RANK]; /* X's strides over [N, C, D..] */
  /* What the compute reads (the padded scratch or X) and its strides. */
  int32_t source;
  lower_sym_t src_strides[STAX_MAX_RANK];
  /* The innermost dim split by phase (stride S > 1): padded position q is stored at
   * (q % S) * phase_length + q / S. phases is S, or 1 without the split. */
  int64_t phases;
  lower_sym_t phase_length;
  /* Spatial dims with auto_pad SAME and a stride over an open size: their begin pad is the
   * parameter begin[d] (set for those dims only), and every padded plane is zeroed before the
   * input is copied in (zero_first). */
  bool same_open[STAX_MAX_RANK];
  bool zero_first;
  lower_sym_t begin[STAX_MAX_RANK];
  /* A counted average's mask of the padded plane (-1: none), and whether the pad functions
   * are writing it (1 inside the input, 0 in the pads) rather than the padded copy. */
  int32_t mask;
  bool filling_mask;
  int32_t native, nr, mr;
  saxis_t axes[STAX_MAX_RANK + 1];
  int32_t axis_count;
  int32_t order[STAX_MAX_RANK + 1]; /* emission order: the parallel axis first */
  bool parallel;
  int64_t grain;
  /* The stage being emitted: its tile width, channel tile and run condition on O_last. */
  int32_t width, stage_mr;
  int64_t when_lo, when_hi;
  int32_t tiles; /* counter for local names */
  /* A constant weight repacked into panels of MR channels (lower_conv_pack_weights), or -1. */
  int32_t packed_w;
  /* Sizes under `patch_below` take the GEMM over patches (when `patch`), reading
   * `patch_source`: X itself without pads (its scalar loads take any stride), else the
   * padded copy. */
  bool patch;
  int64_t patch_below;
  int32_t patch_source;
  lower_sym_t patch_strides[STAX_MAX_RANK];
  int64_t patch_phases;
} sconv_t;

/* The span of spatial dim d's window: dilation (kernel - 1) + 1. */
static int64_t window_extent(const stax_window_t* win, int32_t d) {
  return win->dilations[d] * (win->kernel[d] - 1) + 1;
}

static lower_sym_t value_stride(sconv_t* c, int32_t v, int32_t d) {
  int32_t p = c->k->buffers[c->L->buffer[v]]->stride_params[d];
  return p >= 0 ? lower_sym_param(p) : lower_sym_const(lower_value(c->L, v)->strides[d]);
}

/* ---- analysis ---------------------------------------------------------------------------- */

static stax_status_t analyze(sconv_t* c) {
  lower_t* L = c->L;
  const lower_conv_geometry_t* g = c->g;
  const stax_jit_value_t* x = lower_value(L, g->x);
  /* X may be read again by the epilogue (a residual of the conv's own input: then its dims
   * are Y's, and the host's per-size verification checks every such load); W and B not. */
  if ((g->w >= 0 && L->uses[g->w] != 1) || (g->bias >= 0 && L->uses[g->bias] != 1))
    return lower_refuse(L, "Conv node '%s': the weight or bias is read again in the group",
                        g->name);
  c->spatial = g->spatial;
  c->last = g->spatial - 1;
  for (int32_t i = 0; i < g->spatial; i++) {
    bool open = lower_dim_open(L, g->x, 2 + i) || lower_dim_open(L, g->out, 2 + i);
    const stax_window_t* win = &g->window;
    int64_t stride = win->strides[i], extent = window_extent(win, i);
    if (!open || win->auto_pad == STAX_AUTO_PAD_NOTSET || win->auto_pad == STAX_AUTO_PAD_VALID ||
        stride == 1 || extent == 1)
      continue; /* fixed pads at every size (a 1-wide window under SAME pads nothing) */
    /* A max pool pads with its start value like a conv with zeros (zero_fill picks it); an
     * average's count and ceil_mode's overhang would need the pads per size too. */
    bool windowed = g->op == LOWER_WINDOW_CONV || (g->op == LOWER_WINDOW_MAX && !win->ceil_mode);
    if (!windowed || extent < stride)
      return lower_refuse(L,
                          "%s node '%s': auto_pad SAME with stride %lld and window %lld pads "
                          "open spatial dim %d differently at each size",
                          g->op == LOWER_WINDOW_CONV ? "Conv" : "pool", g->name,
                          (long long)stride, (long long)extent, (int)(2 + i));
    c->same_open[i] = true;
    c->zero_first = true;
  }
  /* Y's open dims (N, O_i) become the space's parameters; X is tied by hand (its spatial
   * dims are not the space's). */
  int32_t skip[1] = {g->x};
  STAX_RETURN_IF_ERROR(lower_symbolic_space(L, L->rank, skip, 1));
  int32_t xb = L->buffer[g->x];
  if (lower_dim_open(L, g->x, 0)) {
    if (L->dim_params[0] < 0)
      return lower_refuse(L, "Conv node '%s': the batch is open in X only", g->name);
    stax_kir_buffer_dim_param(c->k, xb, 0, L->dim_params[0]);
  }
  for (int32_t i = 0; i < g->spatial; i++) {
    if (!lower_dim_open(L, g->x, 2 + i)) {
      c->in[i] = lower_sym_const(x->dims[2 + i]);
      continue;
    }
    char name[16];
    snprintf(name, sizeof(name), "in%d", (int)i);
    int32_t p = stax_kir_add_read_param(c->k, name, xb, 2 + i, false);
    stax_kir_buffer_dim_param(c->k, xb, 2 + i, p);
    c->in[i] = lower_sym_param(p);
  }
  for (int32_t d = 0; d < x->rank; d++) c->x_strides[d] = value_stride(c, g->x, d);
  return stax_kir_kernel_status(c->k);
}

static lower_sym_t space_dim(const sconv_t* c, int32_t e) {
  return c->L->dim_params[e] >= 0 ? lower_sym_param(c->L->dim_params[e])
                                  : lower_sym_const(c->L->dims[e]);
}

/* ---- the padded copy --------------------------------------------------------------------- */

/* A pool with ceil_mode: the stride - 1 positions past the end pad its last window may reach
 * (filled with the lowest float for a max, so they never win; 0 for an average, whose mask
 * is 0 there too: ONNX counts no tap there). */
static int64_t overhang(const sconv_t* c, int32_t d) {
  const stax_window_t* win = &c->g->window;
  return win->ceil_mode && c->g->op != LOWER_WINDOW_CONV ? win->strides[d] - 1 : 0;
}

/* The copy's padding after dim d's input: the window's end pad and the overhang. */
static int64_t end_pad(const sconv_t* c, int32_t d) {
  return c->g->window.pads[c->spatial + d] + overhang(c, d);
}

/* While filling the mask of an average that counts its pads, the pads are filled as input
 * (1) and only the overhang as padding (0): the pad functions' begin, input extent and end. */
static bool pads_as_input(const sconv_t* c) {
  return c->filling_mask && c->g->count_pads;
}

static int64_t begin_pad(const sconv_t* c, int32_t d) {
  return pads_as_input(c) ? 0 : c->g->window.pads[d];
}

static int64_t after_input(const sconv_t* c, int32_t d) {
  return pads_as_input(c) ? overhang(c, d) : end_pad(c, d);
}

static lower_sym_t input_extent(sconv_t* c, int32_t d) {
  if (!pads_as_input(c)) return c->in[d];
  const stax_window_t* win = &c->g->window;
  return lower_sym_derive(c->k, "counted", c->in[d], 1, 0, 1, 0, 0, 0,
                          win->pads[d] + win->pads[c->spatial + d]);
}

/* The buffer the pad functions write: the padded copy, or a counted average's mask. */
static int32_t fill_target(const sconv_t* c) {
  return c->filling_mask ? c->mask : c->source;
}

/* What lies inside the input at `from` (an index into X): X's value, or 1 in the mask. */
static const stax_kir_expr_t* interior_value(sconv_t* c, const stax_kir_index_t* from) {
  if (c->filling_mask) return stax_kir_float(c->k, STAX_DTYPE_FLOAT32, 1.0);
  return stax_kir_load(c->k, c->L->buffer[c->g->x], from);
}

/* target[base + z] = the pad value for z in [0, count): 0, or -FLT_MAX for a max pool (the
 * generic kernel's start value: padding never wins); 0 in a mask. */
static void zero_fill(sconv_t* c, stax_kir_block_t* block, const stax_kir_index_t* base,
                      lower_sym_t count) {
  if (count.p < 0 && count.c <= 0) return;
  stax_kir_loop_t* loop = lower_sym_loop(c->k, block, "z", count);
  if (!loop) return;
  loop->vector_width = c->native;
  stax_kir_index_t index = *base;
  stax_kir_index_add_term(c->k, &index, stax_kir_loop_id(c->k, loop), 1);
  double fill = !c->filling_mask && c->g->op == LOWER_WINDOW_MAX ? -FLT_MAX : 0.0;
  stax_kir_add_store(c->k, &loop->body, fill_target(c), &index,
                     stax_kir_float(c->k, STAX_DTYPE_FLOAT32, fill));
}

/* Zeroes count elements at base unless the plane was zeroed first. */
static void zero_pads(sconv_t* c, stax_kir_block_t* block, const stax_kir_index_t* base,
                      lower_sym_t count) {
  if (!c->zero_first) zero_fill(c, block, base, count);
}

/* A SAME-padded phase-split innermost dim over an open size (the plane already zeroed):
 * input positions S a + j (a < ceil((D - j) / S)) go to phase (begin + j) % S at offset
 * a + floor((begin + j) / S), the begin pad a parameter of D. */
static void copy_row_phases_same(sconv_t* c, stax_kir_block_t* block,
                                 const stax_kir_index_t* target, const stax_kir_index_t* source) {
  int32_t last = c->last;
  int64_t stride = c->phases;
  lower_sym_t begin = c->begin[last], input = c->in[last], x_stride = c->x_strides[2 + last];
  for (int64_t j = 0; j < stride; j++) {
    lower_sym_t count = lower_sym_derive(c->k, "same_count", input, 1, stride - 1 - j, stride, 0,
                                         0, 0, 0);
    lower_sym_t phase =
        lower_sym_derive(c->k, "same_phase", begin, 1, j, 1, -stride, j, stride, 0);
    lower_sym_t offset = lower_sym_derive(c->k, "same_offset", begin, 1, j, stride, 0, 0, 0, 0);
    stax_kir_loop_t* loop = lower_sym_loop(c->k, block, "cx", count);
    if (!loop) return;
    loop->vector_width = c->native;
    int32_t id = stax_kir_loop_id(c->k, loop);
    stax_kir_index_t to = *target, from = *source;
    lower_sym_index_add(c->k, &to, lower_sym_mul(c->k, phase, c->phase_length));
    lower_sym_index_add(c->k, &to, offset);
    stax_kir_index_add_term(c->k, &to, id, 1);
    lower_sym_index_add(c->k, &from, lower_sym_mul(c->k, lower_sym_const(j), x_stride));
    lower_sym_index_term(c->k, &from, id, lower_sym_mul(c->k, lower_sym_const(stride), x_stride));
    stax_kir_add_store(c->k, &loop->body, fill_target(c), &to, interior_value(c, &from));
  }
}

/* The innermost dim of a phase-split copy: per phase b, the positions q = S*a + b below the
 * begin pad (zeros: a constant count), inside the input (copied: every S-th input value) and
 * the rest of the phase (zeros), the last two floor expressions of D. */
static void pad_row_phases(sconv_t* c, stax_kir_block_t* block, const stax_kir_index_t* target,
                           const stax_kir_index_t* source) {
  int32_t last = c->last;
  if (c->same_open[last]) {
    copy_row_phases_same(c, block, target, source);
    return;
  }
  int64_t stride = c->phases, begin = begin_pad(c, last), end = after_input(c, last);
  lower_sym_t input = input_extent(c, last), x_stride = c->x_strides[2 + last];
  for (int64_t b = 0; b < stride; b++) {
    /* low = max(0, ceil((begin - b) / S)); high = ceil((begin + D - b) / S) >= low for D >= 1,
     * and <= phase_length = ceil((D + begin + end) / S). */
    int64_t low = stax_ceil_div(begin - b, stride);
    if (low < 0) low = 0;
    stax_kir_index_t base = *target;
    lower_sym_index_add(c->k, &base, lower_sym_mul(c->k, lower_sym_const(b), c->phase_length));
    zero_pads(c, block, &base, lower_sym_const(low));
    lower_sym_t copied = lower_sym_derive(c->k, "copied", input, 1, begin - b + stride - 1,
                                          stride, 0, 0, 0, -low);
    stax_kir_loop_t* loop = lower_sym_loop(c->k, block, "cx", copied);
    if (!loop) return;
    loop->vector_width = c->native;
    int32_t id = stax_kir_loop_id(c->k, loop);
    stax_kir_index_t to = base, from = *source;
    to.constant += low;
    stax_kir_index_add_term(c->k, &to, id, 1);
    lower_sym_index_add(c->k, &from, lower_sym_mul(c->k, lower_sym_const(stride * low + b - begin),
                                                   x_stride));
    lower_sym_index_term(c->k, &from, id, lower_sym_mul(c->k, lower_sym_const(stride), x_stride));
    stax_kir_add_store(c->k, &loop->body, fill_target(c), &to, interior_value(c, &from));
    /* The rest: phase_length - high. */
    stax_kir_index_t tail = base;
    lower_sym_index_add(c->k, &tail,
                        lower_sym_derive(c->k, "high", input, 1, begin - b + stride - 1, stride,
                                         0, 0, 0, 0));
    zero_pads(c, block, &tail,
              lower_sym_derive(c->k, "rest", input, 1, begin + end + stride - 1, stride, -1,
                               begin - b + stride - 1, stride, 0));
  }
}

/* Spatial dim d of one (n, c) plane: its begin-pad slabs, its interior (recursing inward, the
 * innermost dim copying a row), its end-pad slabs. */
static void pad_dim(sconv_t* c, stax_kir_block_t* block, int32_t d, const stax_kir_index_t* target,
                    const stax_kir_index_t* source) {
  if (d == c->last && c->phases > 1) {
    pad_row_phases(c, block, target, source);
    return;
  }
  lower_sym_t begin = c->same_open[d] ? c->begin[d] : lower_sym_const(begin_pad(c, d));
  int64_t end = after_input(c, d);
  lower_sym_t slab = c->src_strides[2 + d], input = input_extent(c, d);
  zero_pads(c, block, target, lower_sym_mul(c->k, begin, slab));
  stax_kir_loop_t* loop = lower_sym_loop(c->k, block, d == c->last ? "cx" : "cd", input);
  if (!loop) return;
  int32_t id = stax_kir_loop_id(c->k, loop);
  stax_kir_index_t inner_target = *target, inner_source = *source;
  lower_sym_index_add(c->k, &inner_target, lower_sym_mul(c->k, begin, slab));
  lower_sym_index_term(c->k, &inner_target, id, slab);
  lower_sym_index_term(c->k, &inner_source, id, c->x_strides[2 + d]);
  if (d == c->last) {
    loop->vector_width = c->native;
    stax_kir_add_store(c->k, &loop->body, fill_target(c), &inner_target,
                       interior_value(c, &inner_source));
  } else {
    pad_dim(c, &loop->body, d + 1, &inner_target, &inner_source);
  }
  if (c->zero_first) return; /* the end pads were zeroed with the plane */
  stax_kir_index_t tail = *target;
  lower_sym_index_add(c->k, &tail, lower_sym_mul(c->k, begin, slab));
  lower_sym_index_add(c->k, &tail, lower_sym_mul(c->k, input, slab));
  zero_fill(c, block, &tail, lower_sym_mul(c->k, lower_sym_const(end), slab));
}

/* The padded scratch [N, C, D_i + pads] (innermost S x phase_length), one flat buffer whose
 * size is a parameter, and the stage that fills it. */
static void emit_pad(sconv_t* c) {
  const lower_conv_geometry_t* g = c->g;
  const stax_window_t* win = &g->window;
  lower_sym_t padded[STAX_MAX_RANK];
  for (int32_t i = 0; i < c->spatial; i++) {
    if (!c->same_open[i]) {
      padded[i] = lower_sym_derive(c->k, "padded", c->in[i], 1, 0, 1, 0, 0, 0,
                                   win->pads[i] + end_pad(c, i));
      continue;
    }
    /* T = S ceil(D / S) - D + K - S; begin floor(T / 2) (SAME_UPPER) or ceil(T / 2). */
    int64_t stride = win->strides[i], extent = window_extent(win, i);
    lower_sym_t total = lower_sym_derive(c->k, "same_pads", c->in[i], stride, stride - 1, stride,
                                         -1, 0, 1, extent - stride);
    c->begin[i] = lower_sym_derive(c->k, "begin_pad", total, 1,
                                   win->auto_pad == STAX_AUTO_PAD_SAME_UPPER ? 0 : 1, 2, 0, 0, 0,
                                   0);
    padded[i] = lower_sym_derive(c->k, "padded", c->in[i], stride, stride - 1, stride, 0, 0, 0,
                                 extent - stride);
  }
  if (c->same_open[c->last])
    /* ceil((S ceil(D / S) + K - S) / S) = ceil(D / S) + ceil((K - S) / S). */
    c->phase_length = lower_sym_derive(
        c->k, "phase_length", c->in[c->last], 1, c->phases - 1, c->phases, 0, 0, 0,
        stax_ceil_div(window_extent(win, c->last) - c->phases, c->phases));
  else
    c->phase_length = lower_sym_derive(c->k, "phase_length", c->in[c->last], 1,
                                       win->pads[c->last] + end_pad(c, c->last) +
                                           c->phases - 1,
                                       c->phases, 0, 0, 0, 0);
  padded[c->last] = lower_sym_mul(c->k, lower_sym_const(c->phases), c->phase_length);
  lower_sym_t stride = lower_sym_const(1);
  for (int32_t i = c->last; i >= 0; i--) {
    c->src_strides[2 + i] = stride;
    stride = lower_sym_mul(c->k, stride, padded[i]);
  }
  c->src_strides[1] = stride;
  c->src_strides[0] = lower_sym_mul(c->k, stride, lower_sym_const(g->channels));
  lower_sym_t total = lower_sym_mul(c->k, c->src_strides[0], space_dim(c, 0));
  int64_t example = lower_sym_example(c->k, total);
  int64_t dims[1] = {example > 0 ? example : 1};
  c->source =
      stax_kir_add_buffer(c->k, "padded", STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  if (c->source < 0) return;
  if (total.p >= 0) stax_kir_buffer_dim_param(c->k, c->source, 0, lower_sym_plain(c->k, "span", total));
  if (g->channels == 0) return;
  /* Planes in parallel over the channels (fixed), the batch inside. */
  stax_kir_block_t* block = stax_kir_add_stage(c->k, "pad");
  stax_kir_loop_t* a = block ? lower_sym_loop(c->k, block, "pa", lower_sym_const(g->channels)) : NULL;
  stax_kir_loop_t* b = a ? lower_sym_loop(c->k, &a->body, "pb", space_dim(c, 0)) : NULL;
  if (!b) return;
  /* One task per channel when the plane's size is open (no example size in the kernel). */
  lower_sym_t plane = c->src_strides[1];
  a->parallel = g->channels > 1 && c->L->options->thread_count > 1;
  a->grain = plane.p >= 0 || plane.c >= SCONV_TASK_WORK ? 1 : SCONV_TASK_WORK / (plane.c + 1) + 1;
  int32_t n = stax_kir_loop_id(c->k, b), ch = stax_kir_loop_id(c->k, a);
  stax_kir_index_t target = stax_kir_index_constant(0), source = stax_kir_index_constant(0);
  lower_sym_index_term(c->k, &target, n, c->src_strides[0]);
  lower_sym_index_term(c->k, &target, ch, c->src_strides[1]);
  lower_sym_index_term(c->k, &source, n, c->x_strides[0]);
  lower_sym_index_term(c->k, &source, ch, c->x_strides[1]);
  if (c->zero_first) zero_fill(c, &b->body, &target, plane);
  pad_dim(c, &b->body, 0, &target, &source);
  if (!g->count_mask) return;
  /* The counted average's mask: one padded plane, the same for every batch and channel. */
  int64_t plane_example = lower_sym_example(c->k, plane);
  int64_t mask_dims[1] = {plane_example > 0 ? plane_example : 1};
  c->mask = stax_kir_add_buffer(c->k, "mask", STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32, 1,
                                mask_dims, NULL);
  stax_kir_block_t* mask_stage = c->mask >= 0 ? stax_kir_add_stage(c->k, "mask") : NULL;
  if (!mask_stage) return;
  if (plane.p >= 0) stax_kir_buffer_dim_param(c->k, c->mask, 0, lower_sym_plain(c->k, "plane", plane));
  stax_kir_index_t origin = stax_kir_index_constant(0);
  c->filling_mask = true;
  pad_dim(c, mask_stage, 0, &origin, &origin);
  c->filling_mask = false;
}

/* ---- the tile ---------------------------------------------------------------------------- */

static const saxis_t* find_axis(const sconv_t* c, saxis_kind_t kind, int32_t dim) {
  for (int32_t a = 0; a < c->axis_count; a++)
    if (c->axes[a].kind == kind && c->axes[a].dim == dim) return &c->axes[a];
  return NULL;
}

/* One tile at the axes' current forms. */
static void emit_tile(sconv_t* c, stax_kir_block_t* block) {
  lower_conv_tile_t t = {.g = c->g,
                         .source = c->source,
                         .phases = c->phases,
                         .phase_length = c->phase_length,
                         .batch = find_axis(c, SAXIS_BATCH, 0)->form,
                         .group = find_axis(c, SAXIS_GROUP, 0)->form,
                         .channels = find_axis(c, SAXIS_CHANNELS, 0)->form,
                         .positions = find_axis(c, SAXIS_POSITIONS, 0)->form,
                         .rows = find_axis(c, SAXIS_CHANNELS, 0)->size,
                         .lanes = find_axis(c, SAXIS_POSITIONS, 0)->size,
                         .tile = c->tiles++,
                         .mask = c->mask,
                         /* the panels hold tiles of MR channels (not the narrow
                          * stages' 2 x MR) */
                         .packed_w = c->stage_mr == c->mr ? c->packed_w : -1,
                         .packed_tile = c->mr};
  for (int32_t d = 0; d < 2 + c->spatial; d++) t.src_strides[d] = c->src_strides[d];
  for (int32_t i = 0; i < c->last; i++) t.outer[i] = find_axis(c, SAXIS_OUTER, i)->form;
  lower_conv_emit_tile(c->L, block, &t);
}

/* ---- the loop nest ----------------------------------------------------------------------- */

/* A stage of the compute, run while the stage's width condition holds on O_last. */
static stax_kir_block_t* add_stage(sconv_t* c, const char* name) {
  stax_kir_block_t* block = stax_kir_add_stage(c->k, name);
  if (block) lower_sym_stage_when(c->k, c->axes[c->axis_count - 1].extent, c->when_lo, c->when_hi);
  return block;
}

static void emit_axes(sconv_t* c, stax_kir_block_t* block, int32_t level) {
  if (!block) return;
  if (level == c->axis_count) {
    emit_tile(c, block);
    return;
  }
  stax_kir_kernel_t* k = c->k;
  saxis_t* a = &c->axes[c->order[level]];
  bool parallel = level == 0 && c->parallel;
  static const char* const names[] = {"n", "g", "o", "m", "p"};
  if (a->kind == SAXIS_CHANNELS) {
    int64_t mr = c->stage_mr, full = a->extent.c / mr, edge = a->extent.c % mr;
    if (full > 0) {
      a->size = (int32_t)mr;
      if (full == 1 && !parallel) {
        a->form = stax_kir_index_constant(0);
        emit_axes(c, block, level + 1);
      } else {
        stax_kir_loop_t* loop = lower_sym_loop(k, block, "m", lower_sym_const(full));
        if (!loop) return;
        loop->parallel = parallel;
        if (parallel) loop->grain = c->grain;
        a->form = stax_kir_index_constant(0);
        stax_kir_index_add_term(k, &a->form, stax_kir_loop_id(k, loop), mr);
        emit_axes(c, &loop->body, level + 1);
      }
    }
    if (edge > 0) {
      /* A parallel loop must be alone in its stage: the edge channels get their own. */
      stax_kir_block_t* edge_block = parallel && full > 0 ? add_stage(c, "conv_edge") : block;
      a->form = stax_kir_index_constant(full * mr);
      a->size = (int32_t)edge;
      emit_axes(c, edge_block, level + 1);
    }
    return;
  }
  if (a->kind == SAXIS_POSITIONS) {
    /* floor(O / W) tiles, then one at O - W when W does not divide O (overlapping). */
    int64_t width = c->width;
    a->size = (int32_t)width;
    lower_sym_t tiles = lower_sym_derive(k, "tiles", a->extent, 1, 0, width, 0, 0, 0, 0);
    stax_kir_loop_t* loop = lower_sym_loop(k, block, "p", tiles);
    if (!loop) return;
    a->form = stax_kir_index_constant(0);
    stax_kir_index_add_term(k, &a->form, stax_kir_loop_id(k, loop), width);
    emit_axes(c, &loop->body, level + 1);
    if (width == 1) return;
    /* The widest stage's rest r = O mod W: up to half a tile it takes a half-width tile at
     * O - W/2 (56 = 3 x 16 + 8: 8 lanes recomputed at most, where a full overlapping tile
     * computed 16 for 8; the half tile holds as many channels in half as many lanes, so it
     * costs about two thirds of a full one), more than half a full tile at O - W. Each is a
     * loop of 0 or 1 iterations. */
    int64_t half = width == c->nr && width / 2 >= 4 ? width / 2 : 0;
    for (int32_t piece = 0; piece < 2; piece++) {
      int64_t size = piece == 0 ? width : half;
      if (size == 0) continue;
      lower_sym_t count =
          half == 0 ? lower_sym_derive(k, "over", a->extent, 1, width - 1, width, -1, 0, width, 0)
          : piece == 0
              ? lower_sym_derive(k, "over", a->extent, 1, half - 1, width, -1, 0, width, 0)
              : lower_sym_derive(k, "over_half", a->extent, 1, width - 1, width, -1, half - 1,
                                 width, 0);
      if (count.p < 0 && count.c == 0) continue;
      stax_kir_loop_t* o = lower_sym_loop(k, block, "po", count);
      if (!o) return;
      a->size = (int32_t)size;
      a->form = stax_kir_index_constant(0);
      lower_sym_index_add(k, &a->form, lower_sym_derive(k, "last", a->extent, 1, 0, 1, 0, 0, 0, -size));
      emit_axes(c, &o->body, level + 1);
    }
    return;
  }
  /* A full axis. */
  a->size = 1;
  if (a->extent.p < 0 && a->extent.c == 1 && !parallel) {
    a->form = stax_kir_index_constant(0);
    emit_axes(c, block, level + 1);
    return;
  }
  stax_kir_loop_t* loop = lower_sym_loop(k, block, names[a->kind], a->extent);
  if (!loop) return;
  loop->parallel = parallel;
  if (parallel) loop->grain = c->grain;
  a->form = stax_kir_index_constant(0);
  stax_kir_index_add_term(k, &a->form, stax_kir_loop_id(k, loop), 1);
  emit_axes(c, &loop->body, level + 1);
}

static void plan_nest(sconv_t* c) {
  const lower_conv_geometry_t* g = c->g;
  int32_t count = 0;
  c->axes[count++] = (saxis_t){.kind = SAXIS_BATCH, .extent = space_dim(c, 0)};
  c->axes[count++] = (saxis_t){.kind = SAXIS_GROUP, .extent = lower_sym_const(g->group)};
  for (int32_t i = 0; i < c->last; i++)
    c->axes[count++] = (saxis_t){.kind = SAXIS_OUTER, .dim = i, .extent = space_dim(c, 2 + i)};
  c->axes[count++] = (saxis_t){.kind = SAXIS_CHANNELS, .extent = lower_sym_const(g->mg)};
  c->axes[count++] = (saxis_t){.kind = SAXIS_POSITIONS, .extent = space_dim(c, 2 + c->last)};
  c->axis_count = count;
  /* The parallel axis, the same for every size: the first of the batch (when fixed), the
   * groups, the outer output dims (an open one always: images large enough to vary have rows
   * enough) and the channel tiles that gives every thread an iteration, as lower_conv.c
   * chooses; many balanced iterations (output rows) before a few (5 channel tiles on 2
   * threads leave one idle 40% of the time). An open batch comes last: it is often 1. */
  int32_t threads = c->L->options->thread_count > 1 ? c->L->options->thread_count : 1;
  int32_t chosen = -1;
  for (int32_t a = 0; threads > 1 && chosen < 0 && a < count - 1; a++) {
    const saxis_t* axis = &c->axes[a];
    int64_t iterations = axis->kind == SAXIS_CHANNELS ? g->mg / c->mr : axis->extent.c;
    bool open = axis->extent.p >= 0;
    if (open ? axis->kind == SAXIS_OUTER : iterations >= threads) chosen = a;
  }
  if (threads > 1 && chosen < 0 && c->axes[0].extent.p >= 0) chosen = 0;
  c->parallel = chosen >= 0;
  if (chosen < 0) chosen = 0;
  c->order[0] = chosen;
  for (int32_t a = 0, at = 1; a < count; a++)
    if (a != chosen) c->order[at++] = a;
  /* Multiply-adds per iteration of the parallel loop. An open size in it gives one task per
   * iteration: the kernel (and its text, the object cache's key) must not depend on the
   * example's sizes, and an image large enough to vary is large enough to split. */
  double work = (double)g->cg * (double)g->out_channels;
  bool open_work = false;
  for (int32_t i = 0; i < c->spatial; i++) {
    lower_sym_t o = space_dim(c, 2 + i);
    work *= (double)g->window.kernel[i] * (double)(o.p < 0 ? o.c : 1);
    open_work = open_work || o.p >= 0;
  }
  const saxis_t* p = &c->axes[chosen];
  if (p->kind != SAXIS_BATCH) {
    lower_sym_t n = space_dim(c, 0);
    work *= (double)(n.p < 0 ? n.c : 1);
    open_work = open_work || n.p >= 0;
  }
  double iterations = p->kind == SAXIS_CHANNELS ? (double)(g->mg / c->mr)
                      : p->extent.p < 0         ? (double)p->extent.c
                                                : 1;
  work /= iterations > 0 ? iterations : 1;
  c->grain = open_work || work >= SCONV_TASK_WORK ? 1
                                                  : (int64_t)(SCONV_TASK_WORK / (work + 1)) + 1;
}

/* The compute: one stage per position tile width, each for the O_last it serves. */
static stax_status_t emit_compute(sconv_t* c) {
  lower_sym_t o_last = c->axes[c->axis_count - 1].extent;
  /* Rows narrower than the widest tile, with channels enough for vectors over them: a GEMM
   * over the plane's patches (lower_conv_patch.c) instead of the narrow stages. */
  int64_t below = c->patch_below;
  bool patch = c->patch;
  int64_t upper = INT64_MAX;
  for (int32_t width = c->nr; width >= 1; width = width > 4 ? width / 2 : width == 4 ? 1 : 0) {
    int64_t lo = width, hi = upper;
    upper = width - 1;
    /* With patches below `below`, the widest tiles take the rows from there on. */
    if (patch) {
      if (width < c->nr || hi < below) continue;
      if (lo < below) lo = below;
    }
    if (!lower_sym_possible(o_last, lo, hi)) continue;
    c->width = width;
    c->stage_mr = width < c->nr ? 2 * c->mr : c->mr;
    c->when_lo = lo;
    c->when_hi = hi;
    emit_axes(c, add_stage(c, "conv"), 0);
    STAX_RETURN_IF_ERROR(stax_kir_kernel_status(c->k));
  }
  if (!patch) return STAX_OK;
  lower_conv_patch_t p = {.g = c->g,
                          .source = c->patch_source,
                          .phases = c->patch_phases,
                          .phase_length = c->phase_length,
                          .batch = space_dim(c, 0),
                          .when = o_last,
                          .when_lo = 1,
                          .when_hi = below - 1};
  for (int32_t d = 0; d < 2 + c->spatial; d++) p.src_strides[d] = c->patch_strides[d];
  for (int32_t i = 0; i < c->spatial; i++) p.out[i] = space_dim(c, 2 + i);
  return lower_conv_patch(c->L, &p);
}

stax_status_t lower_conv_symbolic(lower_t* L, const lower_conv_geometry_t* g) {
  sconv_t c;
  memset(&c, 0, sizeof(c));
  c.L = L;
  c.k = L->kernel;
  c.g = g;
  c.mask = -1;
  STAX_RETURN_IF_ERROR(analyze(&c));
  c.k->compact_math = true;
  c.native = L->vector_lanes_f32;
  c.nr = 2 * c.native;
  c.mr = c.native >= 16 ? 12 : 6;
  const stax_window_t* win = &g->window;
  bool pads = false;
  for (int32_t i = 0; i < 2 * c.spatial; i++) pads = pads || win->pads[i] != 0;
  c.phases = win->strides[c.last];
  const lower_sym_t* xs = c.x_strides;
  bool unit_inner = xs[2 + c.last].p < 0 && xs[2 + c.last].c == 1;
  lower_sym_t o_last = space_dim(&c, 2 + c.last);
  c.patch_below = lower_conv_patch_below(L);
  c.patch = lower_sym_possible(o_last, 1, c.patch_below - 1) && lower_conv_patch_fits(L, g);
  bool direct_patches = c.patch && !pads && !c.zero_first;
  bool tiles = !c.patch || lower_sym_possible(o_last, c.patch_below, INT64_MAX);
  if ((pads || c.zero_first || c.phases > 1 || !unit_inner) && (tiles || !direct_patches)) {
    int32_t before = c.k->stage_count;
    emit_pad(&c);
    /* Only the position tiles read the copy: it runs only for their sizes. */
    if (direct_patches && c.k->stage_count > before)
      lower_sym_stage_when(c.k, o_last, c.patch_below, INT64_MAX);
  } else {
    c.source = L->buffer[g->x];
    c.phases = 1;
    for (int32_t d = 0; d < 2 + c.spatial; d++) c.src_strides[d] = xs[d];
  }
  STAX_RETURN_IF_ERROR(stax_kir_kernel_status(c.k));
  c.patch_source = direct_patches ? L->buffer[g->x] : c.source;
  c.patch_phases = direct_patches ? 1 : c.phases;
  for (int32_t d = 0; d < 2 + c.spatial; d++)
    c.patch_strides[d] = direct_patches ? xs[d] : c.src_strides[d];
  /* A constant weight is read from panels of MR channels, one sequential stream per tile
   * (W's own layout puts a tile's channels Cg * taps apart), packed once per weight. */
  c.packed_w = -1;
  if (g->op == LOWER_WINDOW_CONV && lower_value(L, g->w)->constant &&
      lower_sym_possible(o_last, c.patch ? c.patch_below : c.nr, INT64_MAX))
    c.packed_w = lower_conv_pack_weights(L, g, c.mr);
  plan_nest(&c);
  STAX_RETURN_IF_ERROR(emit_compute(&c));
  return stax_kir_kernel_status(c.k);
}
