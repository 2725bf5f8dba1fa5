/* Symbolic MatMul: a batched float32 MatMul (with an elementwise epilogue) whose batch dims,
 * M, N and K may each be open: run-time parameters of one kernel for the whole shape class.
 * This is attention's pair, QK^T ([B, H, S, d] x [B, H, d, S]: M = N = S) and P.V
 * ([B, H, S, S] x [B, H, S, d]: K = S), over the strided views the heads' Transposes leave.
 *
 * The micro-kernel is the register tile of lower_matmul.c (NR lanes by MR rows, below), with
 * the sums in registers over the whole of K. The tails need no code of their
 * own: floor(M / MR) row tiles and then, when M % MR != 0, one more at rows M - MR .. M - 1,
 * overlapping the one before; the same over columns (a last panel at N - NR). Overlapped
 * outputs are computed twice from the same inputs in the same order, so they get the same
 * values. That takes M >= MR and N >= NR; smaller products (a handful of tokens) run 1 x 1
 * tiles over every output, in their own stages (stage conditions pick by the parameters).
 *
 * B is packed into k-major panels first (its own stage): K's transposed view strides over
 * columns, which would make every vector load a gather, and V's rows lie a view's stride
 * apart. The register tile is MR rows by one or two native vectors of columns (two for a
 * fixed N that wide, and for an open N from four vectors on where MR = 6: see the choice in
 * lower_matmul_symbolic).
 * The batch loops run outside, split over the threads by the largest fixed batch dim (the
 * heads: B may be 1) or else the first. Bounds are checked by the host for every new tuple of
 * parameters (kernel_ir.h, symbolic kernels). Not done: K blocking (attention's K is a head
 * dim or a sequence), Gemm, float64. */
#include <string.h>

#include "jit/lower_internal.h"

typedef struct smm_t {
  lower_t* L;
  stax_kir_kernel_t* k;
  int32_t a, b, out;
  int32_t rank, batch_rank; /* the output's */
  lower_sym_t m, n, kd;
  lower_sym_t a_row, a_depth, b_depth, b_col;
  lower_sym_t batch[STAX_MAX_RANK], a_batch[STAX_MAX_RANK], b_batch[STAX_MAX_RANK];
  lower_sym_t packed_batch[STAX_MAX_RANK];
  int32_t mr, nr;
  int64_t n_lo, n_hi;  /* the N range the current panels' stages run for */
  const char* suffix;  /* of the current panels' parameter and stage names */
  bool packed;
  int32_t panel_buffer;
  lower_sym_t panel_stride;                       /* one panel: K x NR */
  lower_sym_t panel_size;                         /* a batch point's panels: ceil(N / NR) panels */
  lower_sym_t tiles_m, over_m, last_m;            /* floor(M / MR), 1 when M % MR, M - MR */
  lower_sym_t tiles_n, over_n, last_n, panels_n;  /* the same over N; ceil(N / NR) */
  int32_t tile_count;
  /* The current batch point. */
  stax_kir_index_t batch_forms[STAX_MAX_RANK];
  stax_kir_index_t batch_a, batch_b, batch_packed;
} smm_t;

/* A buffer value's stride d: its run-time parameter when open. */
static lower_sym_t value_stride(smm_t* m, int32_t v, int32_t d) {
  int32_t p = m->k->buffers[m->L->buffer[v]]->stride_params[d];
  return p >= 0 ? lower_sym_param(p) : lower_sym_const(lower_value(m->L, v)->strides[d]);
}

/* ---- analysis ---------------------------------------------------------------------------- */

/* Ties an operand's dim to the extent `s` (open dims must meet an open extent, fixed dims an
 * equal fixed one). */
static stax_status_t tie(smm_t* m, int32_t v, int32_t d, lower_sym_t s, const char* what) {
  lower_t* L = m->L;
  const stax_jit_value_t* value = lower_value(L, v);
  bool open = lower_dim_open(L, v, d);
  if (open && s.p >= 0 && s.c == 1) {
    stax_kir_buffer_dim_param(m->k, L->buffer[v], d, s.p);
    return STAX_OK;
  }
  if (!open && s.p < 0 && value->dims[d] == s.c) return STAX_OK;
  return lower_refuse(L, "MatMul operand '%s' dim %d (%s) is %s where the product's is %s",
                      lower_value_name(L, v), (int)d, what, open ? "open" : "fixed",
                      s.p >= 0 ? "open" : "fixed");
}

static stax_status_t analyze(smm_t* m, int32_t node_index) {
  lower_t* L = m->L;
  const stax_jit_node_t* node = &L->group->nodes[node_index];
  const char* name = node->node->name ? node->node->name : "";
  if (node->node->op != STAX_OP_MatMul)
    return lower_refuse(L, "symbolic %s node '%s' (MatMul only)", stax_op_name(node->node->op),
                        name);
  m->a = node->inputs[0];
  m->b = node->inputs[1];
  m->out = node->outputs[0];
  const stax_jit_value_t* a = lower_value(L, m->a);
  const stax_jit_value_t* b = lower_value(L, m->b);
  const stax_jit_value_t* out = lower_value(L, m->out);
  if (!stax_jit_op_dtype_lowered(STAX_OP_MatMul, a->dtype) || b->dtype != a->dtype ||
      out->dtype != a->dtype)
    return lower_refuse(L, "symbolic MatMul node '%s' on %s (float32 only)", name,
                        stax_dtype_name(a->dtype));
  if (L->producer[m->a] >= 0 || L->producer[m->b] >= 0 || L->uses[m->a] != 1 ||
      L->uses[m->b] != 1 || m->a == m->b)
    return lower_refuse(L, "an operand of MatMul node '%s' is computed or read again in the group",
                        name);
  if (a->rank < 2 || b->rank < 2 || out->rank < 2 || a->rank > out->rank || b->rank > out->rank)
    return lower_refuse(L, "symbolic MatMul node '%s' with a vector operand", name);
  m->rank = out->rank;
  m->batch_rank = out->rank - 2;
  /* The iteration space is the output's; its open dims come from the group's out-shaped
   * values (never A or B, whose last dims are not the output's). */
  L->rank = out->rank;
  memcpy(L->dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
  int32_t skip[2] = {m->a, m->b};
  for (int32_t v = 0; v < L->group->value_count; v++) {
    if (v == m->a || v == m->b) continue;
    bool used = L->uses[v] > 0 || L->producer[v] >= 0;
    if (used && !lower_value_fits(L, v, 0, L->rank))
      return lower_refuse(L, "value '%s' does not fit the MatMul output", lower_value_name(L, v));
  }
  for (int32_t i = 0; i < L->group->output_count; i++) {
    const stax_jit_value_t* o = lower_value(L, L->group->outputs[i]);
    if (o->rank != out->rank ||
        memcmp(o->dims, out->dims, sizeof(int64_t) * (size_t)o->rank) != 0 ||
        o->open_dims != out->open_dims)
      return lower_refuse(L, "output '%s' is not MatMul-shaped",
                          lower_value_name(L, L->group->outputs[i]));
  }
  STAX_RETURN_IF_ERROR(lower_symbolic_space(L, L->rank, skip, 2));
  lower_sym_t space[STAX_MAX_RANK];
  for (int32_t e = 0; e < L->rank; e++)
    space[e] = L->dim_params[e] >= 0 ? lower_sym_param(L->dim_params[e])
                                     : lower_sym_const(L->dims[e]);
  int32_t ar = a->rank, br = b->rank;
  m->m = space[m->rank - 2];
  m->n = space[m->rank - 1];
  STAX_RETURN_IF_ERROR(tie(m, m->a, ar - 2, m->m, "M"));
  STAX_RETURN_IF_ERROR(tie(m, m->b, br - 1, m->n, "N"));
  if (lower_dim_open(L, m->a, ar - 1))
    m->kd = lower_sym_param(stax_kir_add_read_param(m->k, "kdim", L->buffer[m->a], ar - 1, false));
  else
    m->kd = lower_sym_const(a->dims[ar - 1]);
  STAX_RETURN_IF_ERROR(tie(m, m->a, ar - 1, m->kd, "K"));
  STAX_RETURN_IF_ERROR(tie(m, m->b, br - 2, m->kd, "K"));
  m->a_row = value_stride(m, m->a, ar - 2);
  m->a_depth = value_stride(m, m->a, ar - 1);
  m->b_depth = value_stride(m, m->b, br - 2);
  m->b_col = value_stride(m, m->b, br - 1);
  /* Batch dims: A's and B's right-aligned to the output's; a fixed 1 broadcasts (stride 0). */
  for (int32_t e = 0; e < m->batch_rank; e++) {
    m->batch[e] = space[e];
    int32_t da = e - (m->batch_rank - (ar - 2)), db = e - (m->batch_rank - (br - 2));
    m->a_batch[e] = m->b_batch[e] = lower_sym_const(0);
    if (da >= 0 && (lower_dim_open(L, m->a, da) || a->dims[da] != 1)) {
      STAX_RETURN_IF_ERROR(tie(m, m->a, da, space[e], "batch"));
      m->a_batch[e] = value_stride(m, m->a, da);
    }
    if (db >= 0 && (lower_dim_open(L, m->b, db) || b->dims[db] != 1)) {
      STAX_RETURN_IF_ERROR(tie(m, m->b, db, space[e], "batch"));
      m->b_batch[e] = value_stride(m, m->b, db);
    }
  }
  return stax_kir_kernel_status(m->k);
}

/* ---- emission ---------------------------------------------------------------------------- */

/* The batch loops of a stage (the parallel one first); the batch point's forms and operand
 * offsets are set; returns the innermost block. */
static stax_kir_block_t* batch_nest(smm_t* m, stax_kir_block_t* block) {
  int32_t parallel = -1;
  int64_t best = 1;
  for (int32_t e = 0; e < m->batch_rank; e++)
    if (m->batch[e].p < 0 && m->batch[e].c > best) best = m->batch[e].c, parallel = e;
  if (parallel < 0 && m->batch_rank > 0) parallel = 0;
  int32_t order[STAX_MAX_RANK], count = 0;
  if (parallel >= 0) order[count++] = parallel;
  for (int32_t e = 0; e < m->batch_rank; e++)
    if (e != parallel) order[count++] = e;
  for (int32_t i = 0; i < count && block; i++) {
    int32_t e = order[i];
    m->batch_forms[e] = stax_kir_index_constant(0);
    if (m->batch[e].p < 0 && m->batch[e].c == 1) continue;
    stax_kir_loop_t* loop = lower_sym_loop(m->k, block, "g", m->batch[e]);
    if (!loop) return NULL;
    loop->parallel = i == 0 && m->L->options->thread_count > 1;
    stax_kir_index_add_term(m->k, &m->batch_forms[e], stax_kir_loop_id(m->k, loop), 1);
    block = &loop->body;
  }
  m->batch_a = m->batch_b = m->batch_packed = stax_kir_index_constant(0);
  for (int32_t e = 0; e < m->batch_rank; e++) {
    lower_sym_index_add_scaled(m->k, &m->batch_a, &m->batch_forms[e], m->a_batch[e]);
    lower_sym_index_add_scaled(m->k, &m->batch_b, &m->batch_forms[e], m->b_batch[e]);
    if (m->packed)
      lower_sym_index_add_scaled(m->k, &m->batch_packed, &m->batch_forms[e], m->packed_batch[e]);
  }
  return block;
}

/* panels[batch][panel][k][j] = B[batch][k][col_base + j]: NR columns from col_base. */
static void pack_panel(smm_t* m, stax_kir_block_t* block, const stax_kir_index_t* panel,
                       const stax_kir_index_t* col_base) {
  stax_kir_kernel_t* k = m->k;
  stax_kir_loop_t* depth = lower_sym_loop(m->k, block, "pk", m->kd);
  stax_kir_loop_t* columns =
      depth ? lower_sym_loop(m->k, &depth->body, "pj", lower_sym_const(m->nr)) : NULL;
  if (!columns) return;
  /* Lanes need a fixed stride; a run-time column stride packs one element at a time. */
  columns->vector_width = m->b_col.p < 0 ? m->nr : 1;
  int32_t kk = stax_kir_loop_id(k, depth), j = stax_kir_loop_id(k, columns);
  stax_kir_index_t source = m->batch_b;
  lower_sym_index_term(m->k, &source, kk, m->b_depth);
  lower_sym_index_add_scaled(m->k, &source, col_base, m->b_col);
  lower_sym_index_term(m->k, &source, j, m->b_col);
  stax_kir_index_t target = m->batch_packed;
  lower_sym_index_add_scaled(m->k, &target, panel, m->panel_stride);
  stax_kir_index_add_term(k, &target, kk, m->nr);
  stax_kir_index_add_term(k, &target, j, 1);
  stax_kir_add_store(k, &columns->body, m->panel_buffer, &target,
                     stax_kir_load(k, m->L->buffer[m->b], &source));
}

/* `rows` x `lanes` outputs at (row_base, col_base); B from panel `panel` when packed. */
static void emit_tile(smm_t* m, stax_kir_block_t* block, const stax_kir_index_t* row_base,
                      const stax_kir_index_t* col_base, const stax_kir_index_t* panel,
                      int32_t rows, int32_t lanes, bool packed) {
  lower_t* L = m->L;
  stax_kir_kernel_t* k = m->k;
  int32_t tile = m->tile_count++;
  char name[32];
  stax_kir_loop_t* columns = lower_sym_loop(m->k, block, "j", lower_sym_const(lanes));
  if (!columns) return;
  columns->vector_width = lanes;
  int32_t j = stax_kir_loop_id(k, columns);
  int32_t accumulators[32];
  lower_declare_accumulators(k, &columns->body, tile, rows, accumulators);
  stax_kir_loop_t* depth = lower_sym_loop(m->k, &columns->body, "k", m->kd);
  if (!depth) return;
  depth->unroll = 4;
  int32_t kk = stax_kir_loop_id(k, depth);
  stax_kir_index_t b_index;
  int32_t b_buffer;
  if (packed) {
    b_buffer = m->panel_buffer;
    b_index = m->batch_packed;
    lower_sym_index_add_scaled(m->k, &b_index, panel, m->panel_stride);
    stax_kir_index_add_term(k, &b_index, kk, m->nr);
    stax_kir_index_add_term(k, &b_index, j, 1);
  } else {
    b_buffer = L->buffer[m->b];
    b_index = m->batch_b;
    lower_sym_index_term(m->k, &b_index, kk, m->b_depth);
    lower_sym_index_add_scaled(m->k, &b_index, col_base, m->b_col);
    lower_sym_index_term(m->k, &b_index, j, m->b_col);
  }
  snprintf(name, sizeof(name), "b%d", (int)tile);
  int32_t b_local = stax_kir_add_local(k, name, STAX_DTYPE_FLOAT32);
  stax_kir_add_declare(k, &depth->body, b_local, stax_kir_load(k, b_buffer, &b_index));
  for (int32_t r = 0; r < rows; r++) {
    stax_kir_index_t a_index = m->batch_a;
    stax_kir_index_t row = *row_base;
    row.constant += r;
    lower_sym_index_add_scaled(m->k, &a_index, &row, m->a_row);
    lower_sym_index_term(m->k, &a_index, kk, m->a_depth);
    const stax_kir_expr_t* product =
        stax_kir_fma(k, stax_kir_load(k, L->buffer[m->a], &a_index), stax_kir_local(k, b_local),
                     stax_kir_local(k, accumulators[r]));
    stax_kir_add_assign(k, &depth->body, accumulators[r], product);
  }
  /* The epilogue, row by row, at the tile's output points. */
  for (int32_t r = 0; r < rows; r++) {
    for (int32_t e = 0; e < m->batch_rank; e++) L->forms[e] = m->batch_forms[e];
    L->forms[m->rank - 2] = *row_base;
    L->forms[m->rank - 2].constant += r;
    L->forms[m->rank - 1] = *col_base;
    stax_kir_index_add_term(k, &L->forms[m->rank - 1], j, 1);
    lower_new_point(L);
    L->fixed[m->out] = stax_kir_local(k, accumulators[r]);
    for (int32_t i = 0; i < L->group->output_count; i++)
      lower_store_value(L, &columns->body, L->group->outputs[i], LOWER_FULL, L->rank);
    L->fixed[m->out] = NULL;
  }
}

/* Every panel (and the overlapping last one) against MR rows from row_base. */
static void emit_row_of_tiles(smm_t* m, stax_kir_block_t* block, const stax_kir_index_t* row_base) {
  stax_kir_kernel_t* k = m->k;
  stax_kir_loop_t* p = lower_sym_loop(m->k, block, "p", m->tiles_n);
  if (p) {
    int32_t id = stax_kir_loop_id(k, p);
    stax_kir_index_t panel = stax_kir_index_constant(0), col = stax_kir_index_constant(0);
    stax_kir_index_add_term(k, &panel, id, 1);
    stax_kir_index_add_term(k, &col, id, m->nr);
    emit_tile(m, &p->body, row_base, &col, &panel, m->mr, m->nr, m->packed);
  }
  stax_kir_loop_t* o = lower_sym_loop(m->k, block, "po", m->over_n);
  if (o) {
    stax_kir_index_t panel = stax_kir_index_constant(0), col = stax_kir_index_constant(0);
    lower_sym_index_add(m->k, &panel, m->tiles_n);
    lower_sym_index_add(m->k, &col, m->last_n);
    emit_tile(m, &o->body, row_base, &col, &panel, m->mr, m->nr, m->packed);
  }
}

/* A stage that runs for M >= MR and N in the current panels' range (n_lo..n_hi, n_lo >= NR;
 * none when that cannot hold): the block inside its batch loops, or NULL. */
static stax_kir_block_t* tiled_stage(smm_t* m, const char* name) {
  if (!lower_sym_possible(m->m, m->mr, INT64_MAX) || !lower_sym_possible(m->n, m->n_lo, m->n_hi))
    return NULL;
  char stage_name[32];
  snprintf(stage_name, sizeof(stage_name), "%s%s", name, m->suffix);
  stax_kir_block_t* block = stax_kir_add_stage(m->k, stage_name);
  if (!block) return NULL;
  lower_sym_stage_when(m->k, m->m, m->mr, INT64_MAX);
  lower_sym_stage_when(m->k, m->n, m->n_lo, m->n_hi);
  return batch_nest(m, block);
}

/* The stage for M >= MR and N in range: whole tiles, then the overlapping last row of tiles. */
static void emit_tiled(smm_t* m) {
  stax_kir_kernel_t* k = m->k;
  stax_kir_block_t* block = tiled_stage(m, "matmul");
  stax_kir_loop_t* i = block ? lower_sym_loop(m->k, block, "i", m->tiles_m) : NULL;
  if (!i) return;
  stax_kir_index_t row = stax_kir_index_constant(0);
  stax_kir_index_add_term(k, &row, stax_kir_loop_id(k, i), m->mr);
  emit_row_of_tiles(m, &i->body, &row);
  stax_kir_loop_t* o = lower_sym_loop(m->k, block, "io", m->over_m);
  if (!o) return;
  stax_kir_index_t last = stax_kir_index_constant(0);
  lower_sym_index_add(m->k, &last, m->last_m);
  emit_row_of_tiles(m, &o->body, &last);
}

/* A stage of 1 x 1 tiles over every output, for products under one tile (lo..hi on M, and
 * N in n_lo..n_hi). */
static void emit_small(smm_t* m, const char* name, int64_t lo, int64_t hi, int64_t n_lo,
                       int64_t n_hi) {
  stax_kir_kernel_t* k = m->k;
  if (!lower_sym_possible(m->m, lo, hi) || !lower_sym_possible(m->n, n_lo, n_hi)) return;
  stax_kir_block_t* block = stax_kir_add_stage(k, name);
  if (!block) return;
  lower_sym_stage_when(m->k, m->m, lo, hi);
  if (n_lo > 0 || n_hi < INT64_MAX) lower_sym_stage_when(m->k, m->n, n_lo, n_hi);
  block = batch_nest(m, block);
  stax_kir_loop_t* r = block ? lower_sym_loop(m->k, block, "r", m->m) : NULL;
  stax_kir_loop_t* c = r ? lower_sym_loop(m->k, &r->body, "c", m->n) : NULL;
  if (!c) return;
  stax_kir_index_t row = stax_kir_index_constant(0), col = stax_kir_index_constant(0);
  stax_kir_index_add_term(k, &row, stax_kir_loop_id(k, r), 1);
  stax_kir_index_add_term(k, &col, stax_kir_loop_id(k, c), 1);
  stax_kir_index_t panel = stax_kir_index_constant(0);
  emit_tile(m, &c->body, &row, &col, &panel, 1, 1, false);
}

/* Panels of `nr` columns for the stages of N in n_lo..n_hi: their parameters (tile counts
 * over N, the overlapping last panel, the panels' layout), named with `suffix`. Returns the
 * panels' total size over the batch points. */
static lower_sym_t use_panels(smm_t* m, int32_t nr, int64_t n_lo, int64_t n_hi,
                              const char* suffix) {
  stax_kir_kernel_t* k = m->k;
  char name[4][32];
  const char* base[4] = {"tiles_n", "over_n", "last_n", "panels_n"};
  for (int32_t i = 0; i < 4; i++) snprintf(name[i], sizeof(name[i]), "%s%s", base[i], suffix);
  m->nr = nr;
  m->n_lo = n_lo;
  m->n_hi = n_hi;
  m->suffix = suffix;
  m->tiles_n = lower_sym_derive(k, name[0], m->n, 1, 0, nr, 0, 0, 0, 0);
  m->over_n = lower_sym_derive(k, name[1], m->n, 1, nr - 1, nr, -1, 0, nr, 0);
  m->last_n = lower_sym_derive(k, name[2], m->n, 1, 0, 1, 0, 0, 0, -nr);
  m->panels_n = lower_sym_derive(k, name[3], m->n, 1, nr - 1, nr, 0, 0, 0, 0);
  /* The batch points' panels, packed_batch apart (innermost batch dim last). */
  m->panel_stride = lower_sym_mul(k, m->kd, lower_sym_const(nr));
  m->panel_size = lower_sym_mul(k, m->panels_n, m->panel_stride);
  lower_sym_t total = m->panel_size;
  for (int32_t e = m->batch_rank - 1; e >= 0; e--) {
    m->packed_batch[e] = total;
    total = lower_sym_mul(k, total, m->batch[e]);
  }
  return total;
}

/* The scratch buffer every configuration's panels share, `total` floats (the widest's). */
static void add_panel_buffer(smm_t* m, lower_sym_t total) {
  stax_kir_kernel_t* k = m->k;
  int64_t example = lower_sym_example(k, total);
  int64_t dims[1] = {example > 0 ? example : 1};
  m->panel_buffer =
      stax_kir_add_buffer(k, "panels", STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  if (total.p >= 0 && m->panel_buffer >= 0)
    stax_kir_buffer_dim_param(k, m->panel_buffer, 0, lower_sym_plain(k, "panel_total", total));
}

static void emit_pack(smm_t* m) {
  stax_kir_kernel_t* k = m->k;
  stax_kir_block_t* block = tiled_stage(m, "pack");
  stax_kir_loop_t* p = block ? lower_sym_loop(m->k, block, "pp", m->tiles_n) : NULL;
  if (!p) return;
  int32_t id = stax_kir_loop_id(k, p);
  stax_kir_index_t panel = stax_kir_index_constant(0), col = stax_kir_index_constant(0);
  stax_kir_index_add_term(k, &panel, id, 1);
  stax_kir_index_add_term(k, &col, id, m->nr);
  pack_panel(m, &p->body, &panel, &col);
  stax_kir_loop_t* o = lower_sym_loop(m->k, block, "po", m->over_n);
  if (!o) return;
  panel = stax_kir_index_constant(0);
  col = stax_kir_index_constant(0);
  lower_sym_index_add(m->k, &panel, m->tiles_n);
  lower_sym_index_add(m->k, &col, m->last_n);
  pack_panel(m, &o->body, &panel, &col);
}

stax_status_t lower_matmul_symbolic(lower_t* L, int32_t node) {
  smm_t m;
  memset(&m, 0, sizeof(m));
  m.L = L;
  m.k = L->kernel;
  STAX_RETURN_IF_ERROR(analyze(&m, node));
  m.k->compact_math = true;
  int32_t native = L->vector_lanes_f32;
  m.mr = stax_jit_matmul_tile_rows(native);
  m.tiles_m = lower_sym_derive(m.k, "tiles_m", m.m, 1, 0, m.mr, 0, 0, 0, 0);
  m.over_m = lower_sym_derive(m.k, "over_m", m.m, 1, m.mr - 1, m.mr, -1, 0, m.mr, 0);
  m.last_m = lower_sym_derive(m.k, "last_m", m.m, 1, 0, 1, 0, 0, 0, -m.mr);
  /* B is packed for the tiled stages (M >= MR: every row tile reads the panels again, and a
   * panel is one contiguous stream, where B's own rows may lie a view's stride apart);
   * measured on P.V at S = 384, reading a contiguous-column B in place was 1.34x slower. */
  m.packed = true;
  /* Panel widths. A fixed N (P.V's head dim) takes two native vectors when that wide: twice
   * the sums per loaded operand. An open N (QK^T's S) takes two vectors from N >= 4 native
   * vectors on and one below, where the overlapping last panel would recompute too much
   * (at most NR - 1 columns: at N = 32 on AVX2 the wide panels compute 32, at N = 17 the
   * narrow ones 24 instead of 32). Two vectors matter where MR rows of one vector leave the
   * FMA pipes idle: MR = 6 on AVX2 and SSE gives 6 independent sums, and two pipes of
   * 4-cycle FMAs need 8; the 6 x 16 tile has 12 (QK^T at S = 512 on Zen 3: 8.2 ms
   * generic against 5.2 ms for the exact kernel's 6 x 16 tiles before). AVX-512's 12 rows
   * of one vector already have 12 sums and keep one panel width. */
  bool open_n = m.n.p >= 0;
  if (!open_n || native > 8) {
    int32_t nr = !open_n && m.n.c >= 2 * native ? 2 * native : native;
    add_panel_buffer(&m, use_panels(&m, nr, nr, INT64_MAX, ""));
    emit_pack(&m);
    emit_tiled(&m);
  } else {
    int64_t wide_from = 4 * native;
    add_panel_buffer(&m, use_panels(&m, 2 * native, wide_from, INT64_MAX, "_wide"));
    emit_pack(&m);
    emit_tiled(&m);
    use_panels(&m, native, native, wide_from - 1, "");
    emit_pack(&m);
    emit_tiled(&m);
  }
  /* Products under one tile: M < MR, or N under one native vector. */
  emit_small(&m, "matmul_small", 0, m.mr - 1, 0, INT64_MAX);
  emit_small(&m, "matmul_narrow", m.mr, INT64_MAX, 0, native - 1);
  return stax_kir_kernel_status(m.k);
}
