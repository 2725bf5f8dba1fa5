/* Conv over a small output plane as a GEMM over patches, float32, with the elementwise
 * epilogue of lower_conv.c. For the exact-shape and the shape-generic lowerings alike.
 *
 * Why: late CNN stages have planes of 7x7 or 14x14 outputs and hundreds of channels. A tile of
 * positions along a row of 7 or 14 fills a fraction of its vectors (a 7-lane vector is
 * legalized piece by piece on AVX2), and with the image size open the symbolic lowering's
 * narrow stages run 4- or 8-lane tiles. Measured on Zen 3, one thread, 3x3 + bias + Relu,
 * 7x7x512: 6.5 ms shape-generic, 4.1 ms exact, against ORT's 2.5. Vectors over output
 * channels fill every lane at any plane size, but a tile's positions must be consecutive in
 * something affine: the plane's positions are, once the windows are laid out as rows.
 *
 * Stages (each, in a symbolic kernel, only while `when` is in range; `source` is X itself
 * for a Conv without pads, else the padded copy the caller makes before):
 *  1. "patch": per image and output position p (the plane flattened, p = o_0 * O_1.. + ..),
 *     the row of its window's inputs, K = Cg * taps values [ci][taps] (im2col):
 *     patch[n][p][k], contiguous, each row written in order. Parallel over the first output
 *     dim.
 *  2. "gemm": tiles of R consecutive positions x V output channels (two native vectors; R = 6
 *     on AVX2 and SSE, 12 with 512-bit vectors: 2R accumulators and the operands fill the
 *     vector registers, as matmul's micro-kernel with the roles turned: the weights, repacked
 *     once into panels [K][V] (lower_conv_pack_weights), are the vectors; the patch values are
 *     broadcast). floor(P / R) tiles, then the last P mod R positions as one smaller tile (an
 *     open plane: one stage per rest size, run only for the planes that leave it). The raw
 *     sums go to sums[n][p][m], V lanes at a time. Parallel over the channel panels.
 *  3. "patch_out": per (n, m, o..), the sum read back (+ B, then the group's elementwise ops,
 *     lower_conv_store_epilogue), with affine forms over Y's own dims: the epilogue's other
 *     operands keep whatever strides and broadcasts they have. Vectors along the innermost
 *     output dim; parallel over the output channels.
 *
 * The patch costs K floats per output position written once and read once per channel panel
 * (7x7x512, 3x3: 0.9 MB); it pays where the rows are narrow and the channels many, which is
 * where callers use it (rows under lower_conv_patch_below: at 28 and more, position tiles
 * win once the patch leaves L2). K blocks (a loop over blocks of
 * the reduction around the tiles, so that a block's slice of the panel stays in L1, the sums
 * carried between blocks in `sums`) measured slower on Zen 3, one thread: blocks of 256
 * columns 3-6% and of 1024 no better at 7x7x512 and 14x14x256 (K 4608 and 2304), so the
 * reduction stays whole. Not done: groups (each group's patch would be its own GEMM),
 * vector stores into the patch. */
#include <stdlib.h>
#include <string.h>

#include "jit/lower_internal.h"

/* Multiply-adds one parallel task should get at least (as lower_conv.c). */
#define PATCH_TASK_WORK 65536

typedef struct patch_t {
  lower_t* L;
  stax_kir_kernel_t* k;
  const lower_conv_patch_t* in;
  const lower_conv_geometry_t* g;
  int32_t last, threads;
  int64_t taps, depth; /* taps per input channel; K = Cg * taps */
  lower_sym_t plane;   /* P, output positions per image */
  lower_sym_t position_steps[STAX_MAX_RANK]; /* p's step per output coordinate o_i */
  int32_t packed, patch, sums;
  int32_t lanes, rows; /* V and R */
  lower_sym_t rest;    /* P mod R */
} patch_t;

bool lower_conv_patch_fits(const lower_t* L, const lower_conv_geometry_t* g) {
  const char* flag = getenv("STAX_JIT_CONV_PATCH");
  if (flag && strcmp(flag, "0") == 0) return false;
  if (g->op != LOWER_WINDOW_CONV || g->group != 1 || g->w < 0) return false;
  const stax_jit_value_t* w = lower_value(L, g->w);
  if (!w->constant || L->uses[g->w] != 1 || (g->bias >= 0 && L->uses[g->bias] != 1)) return false;
  return g->mg >= 2 * (int64_t)L->vector_lanes_f32;
}

int64_t lower_conv_patch_below(const lower_t* L) {
  const char* forced = getenv("STAX_JIT_CONV_PATCH_BELOW");
  if (forced && atoll(forced) > 0) return atoll(forced);
  return 7 * (int64_t)L->vector_lanes_f32 / 2;
}

/* A stage of the pipeline, restricted to the caller's range of `when`. */
static stax_kir_block_t* add_stage(patch_t* c, const char* name) {
  stax_kir_block_t* block = stax_kir_add_stage(c->k, name);
  if (block) lower_sym_stage_when(c->k, c->in->when, c->in->when_lo, c->in->when_hi);
  return block;
}

/* A scratch buffer of `count` float32 elements (a parameter expression in a symbolic kernel). */
static int32_t add_scratch(patch_t* c, const char* name, lower_sym_t count) {
  int64_t example = lower_sym_example(c->k, count);
  int64_t dims[1] = {example > 0 ? example : 1};
  int32_t b = stax_kir_add_buffer(c->k, name, STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32, 1, dims,
                                  NULL);
  if (b >= 0 && count.p >= 0) stax_kir_buffer_dim_param(c->k, b, 0, lower_sym_plain(c->k, name, count));
  return b;
}

static stax_kir_index_t loop_index(patch_t* c, const stax_kir_loop_t* loop, int64_t scale) {
  stax_kir_index_t index = stax_kir_index_constant(0);
  stax_kir_index_add_term(c->k, &index, stax_kir_loop_id(c->k, loop), scale);
  return index;
}

/* ---- 1. the patches ---------------------------------------------------------------------- */

/* Each position's row written in order (channels, then taps): a loop over the channels
 * outside the positions wrote 36 bytes per row and pass, revisiting every line of a patch
 * larger than L2 once per channel (20x20x128 3x3: 11% of the kernel's time on one store). The
 * first output dim is the parallel loop (its rows split over the threads). */
static void emit_patches(patch_t* c) {
  stax_kir_kernel_t* k = c->k;
  const lower_conv_patch_t* in = c->in;
  const stax_window_t* win = &c->g->window;
  int32_t last = c->last;
  stax_kir_block_t* block = add_stage(c, "patch");
  if (!block) return;
  stax_kir_index_t target = stax_kir_index_constant(0), source = stax_kir_index_constant(0);
  stax_kir_block_t* body = block;
  for (int32_t i = 0; i <= last; i++) {
    stax_kir_loop_t* o = lower_sym_loop(k, body, "o", in->out[i]);
    if (!o) return;
    int32_t id = stax_kir_loop_id(k, o);
    if (i == 0 && c->threads > 1) {
      o->parallel = true;
      /* Taps per output row of one image: an open size is a large one. */
      int64_t per = c->depth;
      for (int32_t j = 1; j <= last; j++) per *= in->out[j].p < 0 ? 64 : in->out[j].c;
      o->grain = in->out[0].p >= 0 || per >= PATCH_TASK_WORK / 8 ? 1 : PATCH_TASK_WORK / 8 / (per + 1) + 1;
    }
    lower_sym_index_term(k, &target, id,
                         lower_sym_mul(k, c->position_steps[i], lower_sym_const(c->depth)));
    /* Next output position: S input positions on, or the next slot of a phase-split row. */
    lower_sym_t step = i == last && in->phases > 1
                           ? in->src_strides[2 + i]
                           : lower_sym_mul(k, lower_sym_const(win->strides[i]), in->src_strides[2 + i]);
    lower_sym_index_term(k, &source, id, step);
    body = &o->body;
    if (i == 0) {
      /* The images inside the first output dim (the parallel loop is the stage's top). */
      stax_kir_loop_t* n = lower_sym_loop(k, body, "n", in->batch);
      if (!n) return;
      int32_t n_id = stax_kir_loop_id(k, n);
      lower_sym_index_term(k, &target, n_id, lower_sym_mul(k, c->plane, lower_sym_const(c->depth)));
      lower_sym_index_term(k, &source, n_id, in->src_strides[0]);
      body = &n->body;
    }
  }
  stax_kir_loop_t* ci = lower_sym_loop(k, body, "ci", lower_sym_const(c->g->cg));
  if (!ci) return;
  int32_t ci_id = stax_kir_loop_id(k, ci);
  stax_kir_index_add_term(k, &target, ci_id, c->taps);
  lower_sym_index_term(k, &source, ci_id, in->src_strides[1]);
  body = &ci->body;
  /* The taps: loops over the kernel dims (a phase-split row's taps as statements at constant
   * offsets: phase reach % S, slot reach / S). */
  int64_t after = c->taps;
  int32_t loop_dims = in->phases > 1 ? last : c->g->spatial;
  for (int32_t d = 0; d < loop_dims; d++) {
    after /= win->kernel[d];
    if (win->kernel[d] == 1) continue;
    stax_kir_loop_t* loop = lower_sym_loop(k, body, "kk", lower_sym_const(win->kernel[d]));
    if (!loop) return;
    if (win->kernel[d] <= 4) loop->unroll = (int32_t)win->kernel[d]; /* (no LLVM unrolling) */
    int32_t id = stax_kir_loop_id(k, loop);
    stax_kir_index_add_term(k, &target, id, after);
    lower_sym_index_term(k, &source, id,
                         lower_sym_mul(k, lower_sym_const(win->dilations[d]), in->src_strides[2 + d]));
    body = &loop->body;
  }
  int64_t statement_taps = in->phases > 1 ? win->kernel[last] : 1;
  for (int64_t tap = 0; tap < statement_taps; tap++) {
    stax_kir_index_t to = target, from = source;
    if (in->phases > 1) {
      int64_t reach = tap * win->dilations[last];
      lower_sym_index_add(k, &from, lower_sym_mul(k, lower_sym_const(reach % in->phases),
                                                  in->phase_length));
      lower_sym_index_add(k, &from, lower_sym_mul(k, lower_sym_const(reach / in->phases),
                                                  in->src_strides[2 + last]));
      to.constant += tap;
    }
    stax_kir_add_store(k, body, c->patch, &to, stax_kir_load(k, in->source, &from));
  }
}

/* ---- 2. the products --------------------------------------------------------------------- */

/* One tile: `rows` positions from `first` (a position of image `n`) x `lanes` output channels
 * of the panel at `panel` (its first channel), all K reduced in registers, the sums stored. */
static void emit_tile(patch_t* c, stax_kir_block_t* block, const stax_kir_index_t* n,
                      const stax_kir_index_t* panel, const stax_kir_index_t* first, int32_t rows,
                      int32_t lanes) {
  stax_kir_kernel_t* k = c->k;
  stax_kir_loop_t* j = lower_sym_loop(k, block, "j", lower_sym_const(lanes));
  if (!j) return;
  j->vector_width = lanes;
  int32_t j_id = stax_kir_loop_id(k, j);
  int32_t accumulators[32];
  /* Locals named after the tile's vector loop: unique in the kernel. */
  lower_declare_accumulators(k, &j->body, j_id, rows, accumulators);
  /* sums[n][first + r][panel + lane] */
  int64_t m = c->g->mg;
  stax_kir_index_t s_index = *panel;
  lower_sym_index_add_scaled(k, &s_index, n, lower_sym_mul(k, c->plane, lower_sym_const(m)));
  stax_kir_index_add_scaled(k, &s_index, first, m);
  stax_kir_index_add_term(k, &s_index, j_id, 1);
  stax_kir_loop_t* kk = lower_sym_loop(k, &j->body, "k", lower_sym_const(c->depth));
  if (!kk) return;
  if (c->depth >= 8) kk->unroll = 4;
  int32_t k_id = stax_kir_loop_id(k, kk);
  /* packed[panel / V][k][lane]: the panel's first channel times K, k * V, the lane. */
  stax_kir_index_t w_index = *panel;
  for (int32_t t = 0; t < w_index.term_count; t++) w_index.coefficients[t] *= c->depth;
  w_index.constant *= c->depth;
  stax_kir_index_add_term(k, &w_index, k_id, c->lanes);
  stax_kir_index_add_term(k, &w_index, j_id, 1);
  char name[32];
  snprintf(name, sizeof(name), "pw%d", (int)k_id);
  int32_t weights = stax_kir_add_local(k, name, STAX_DTYPE_FLOAT32);
  stax_kir_add_declare(k, &kk->body, weights, stax_kir_load(k, c->packed, &w_index));
  /* patch[n][first + r][k] */
  stax_kir_index_t p_index = stax_kir_index_constant(0);
  lower_sym_index_add_scaled(k, &p_index, n, lower_sym_mul(k, c->plane, lower_sym_const(c->depth)));
  stax_kir_index_add_scaled(k, &p_index, first, c->depth);
  stax_kir_index_add_term(k, &p_index, k_id, 1);
  for (int32_t r = 0; r < rows; r++) {
    stax_kir_index_t at = p_index;
    at.constant += r * c->depth;
    stax_kir_add_assign(k, &kk->body, accumulators[r],
                        stax_kir_fma(k, stax_kir_load(k, c->patch, &at), stax_kir_local(k, weights),
                                     stax_kir_local(k, accumulators[r])));
  }
  for (int32_t r = 0; r < rows; r++) {
    stax_kir_index_t at = s_index;
    at.constant += r * m;
    stax_kir_add_store(k, &j->body, c->sums, &at, stax_kir_local(k, accumulators[r]));
  }
}

/* One image's tiles at the panel's forms: floor(P / R) tiles of R positions when `full`, and
 * the last `rest` positions (P - rest on) as one tile. */
static void emit_positions(patch_t* c, stax_kir_block_t* block, const stax_kir_index_t* n,
                           const stax_kir_index_t* panel, int32_t lanes, bool full, int32_t rest) {
  stax_kir_kernel_t* k = c->k;
  if (full) {
    lower_sym_t tiles = lower_sym_derive(k, "tiles", c->plane, 1, 0, c->rows, 0, 0, 0, 0);
    if (tiles.p >= 0 || tiles.c > 0) {
      stax_kir_loop_t* t = lower_sym_loop(k, block, "p", tiles);
      if (!t) return;
      stax_kir_index_t first = loop_index(c, t, c->rows);
      emit_tile(c, &t->body, n, panel, &first, c->rows, lanes);
    }
  }
  if (rest == 0) return;
  stax_kir_index_t first = stax_kir_index_constant(0);
  lower_sym_index_add(k, &first, lower_sym_derive(k, "rest_at", c->plane, 1, 0, 1, 0, 0, 0, -rest));
  emit_tile(c, block, n, panel, &first, rest, lanes);
}

/* A stage of products: the full panels (parallel) or the edge panel (Mg % V channels), over
 * every image's floor(P / R) tiles (`full`) and a rest tile of `rest` positions. */
static void emit_products(patch_t* c, bool edge_panel, bool full, int32_t rest,
                          int64_t rest_when) {
  stax_kir_kernel_t* k = c->k;
  int64_t panels = c->g->mg / c->lanes, edge = c->g->mg % c->lanes;
  if (edge_panel ? edge == 0 : panels == 0) return;
  stax_kir_block_t* block = add_stage(c, edge_panel ? "gemm_edge" : "gemm");
  if (!block) return;
  if (rest_when >= 0) lower_sym_stage_when(k, c->rest, rest_when, rest_when);
  stax_kir_index_t panel = stax_kir_index_constant(panels * c->lanes);
  if (!edge_panel) {
    stax_kir_loop_t* loop = lower_sym_loop(k, block, "m", lower_sym_const(panels));
    if (!loop) return;
    loop->parallel = c->threads > 1 && panels > 1;
    loop->grain = 1;
    panel = loop_index(c, loop, c->lanes);
    block = &loop->body;
  }
  stax_kir_loop_t* n = lower_sym_loop(k, block, "n", c->in->batch);
  if (!n) return;
  stax_kir_index_t n_form = loop_index(c, n, 1);
  emit_positions(c, &n->body, &n_form, &panel, edge_panel ? (int32_t)edge : c->lanes, full, rest);
}

/* Every product stage: a fixed plane's full tiles and rest together; an open plane's full
 * tiles, then one stage per rest size (P mod R = r, run only then). */
static void emit_all_products(patch_t* c) {
  for (int32_t edge_panel = 0; edge_panel < 2; edge_panel++) {
    if (c->plane.p < 0) {
      emit_products(c, edge_panel, true, (int32_t)(c->plane.c % c->rows), -1);
      continue;
    }
    emit_products(c, edge_panel, true, 0, -1);
    for (int32_t r = 1; r < c->rows; r++) emit_products(c, edge_panel, false, r, r);
  }
}

/* ---- 3. the epilogue --------------------------------------------------------------------- */

static void emit_out(patch_t* c) {
  lower_t* L = c->L;
  stax_kir_kernel_t* k = c->k;
  const lower_conv_patch_t* in = c->in;
  int64_t m = c->g->mg;
  stax_kir_block_t* block = add_stage(c, "patch_out");
  stax_kir_loop_t* channel = block ? lower_sym_loop(k, block, "m", lower_sym_const(m)) : NULL;
  if (!channel) return;
  channel->parallel = c->threads > 1 && m > 1;
  if (channel->parallel) {
    /* Outputs per channel; an open size takes a fixed grain (the text must not depend on the
     * example). */
    int64_t per = in->batch.p < 0 && c->plane.p < 0 ? in->batch.c * c->plane.c : -1;
    channel->grain = per < 0 ? 16 : per >= 4096 ? 1 : 4096 / (per + 1) + 1;
  }
  stax_kir_loop_t* n = lower_sym_loop(k, &channel->body, "n", in->batch);
  if (!n) return;
  L->forms[0] = loop_index(c, n, 1);
  L->forms[1] = loop_index(c, channel, 1);
  stax_kir_index_t s_index = L->forms[1];
  lower_sym_index_add_scaled(k, &s_index, &L->forms[0],
                             lower_sym_mul(k, c->plane, lower_sym_const(m)));
  stax_kir_block_t* body = &n->body;
  for (int32_t i = 0; i <= c->last; i++) {
    stax_kir_loop_t* o = lower_sym_loop(k, body, "o", in->out[i]);
    if (!o) return;
    /* (A fixed row of one output has no lanes to move along.) */
    if (i == c->last && (in->out[i].p >= 0 || in->out[i].c > 1))
      o->vector_width = L->vector_lanes_f32;
    L->forms[2 + i] = loop_index(c, o, 1);
    lower_sym_index_term(k, &s_index, stax_kir_loop_id(k, o),
                         lower_sym_mul(k, c->position_steps[i], lower_sym_const(m)));
    body = &o->body;
  }
  lower_new_point(L);
  lower_conv_store_epilogue(L, c->g, body, stax_kir_load(k, c->sums, &s_index));
}

stax_status_t lower_conv_patch(lower_t* L, const lower_conv_patch_t* in) {
  patch_t c;
  memset(&c, 0, sizeof(c));
  c.L = L;
  c.k = L->kernel;
  c.in = in;
  c.g = in->g;
  c.last = c.g->spatial - 1;
  c.threads = L->options->thread_count > 1 ? L->options->thread_count : 1;
  c.taps = 1;
  for (int32_t i = 0; i < c.g->spatial; i++) c.taps *= c.g->window.kernel[i];
  c.depth = c.g->cg * c.taps;
  int32_t native = L->vector_lanes_f32;
  c.lanes = 2 * native;
  c.rows = native >= 16 ? 12 : 6;
  /* P and the flattened position's step per output coordinate. */
  lower_sym_t step = lower_sym_const(1);
  for (int32_t i = c.last; i >= 0; i--) {
    c.position_steps[i] = step;
    step = lower_sym_mul(c.k, step, in->out[i]);
  }
  c.plane = step;
  c.packed = lower_conv_pack_weights(L, c.g, c.lanes);
  c.patch = add_scratch(&c, "patch", lower_sym_mul(c.k, lower_sym_mul(c.k, in->batch, c.plane),
                                                    lower_sym_const(c.depth)));
  c.sums = add_scratch(&c, "sums", lower_sym_mul(c.k, lower_sym_mul(c.k, in->batch, c.plane),
                                                  lower_sym_const(c.g->mg)));
  STAX_RETURN_IF_ERROR(stax_kir_kernel_status(c.k));
  emit_patches(&c);
  c.rest = lower_sym_derive(c.k, "rest", c.plane, 1, 0, 1, -c.rows, 0, c.rows, 0);
  emit_all_products(&c);
  emit_out(&c);
  return stax_kir_kernel_status(c.k);
}
