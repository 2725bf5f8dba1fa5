/* MatMul / Gemm with an elementwise epilogue, float32: a register-tiled micro-kernel.
 *
 * The output is cut into MR x NR tiles (NR = two native vectors of columns, MR rows: 6 x 16
 * for AVX2, 12 x 32 for AVX-512, 6 x 8 for SSE, which keeps MR*2 accumulators plus the
 * operands in the 16 / 32 vector registers). A tile is a vector loop over its NR columns
 * holding MR accumulator locals (one NR-lane vector each, so LLVM splits them over two
 * registers); inside, the k loop broadcasts A[i, k] for each row and fuses it into the
 * accumulators with one load of B's row k (k unrolled by 4). The epilogue runs on the
 * accumulators while they are still in registers: alpha * acc + beta * C, then the group's
 * elementwise ops (bias, activation, residual...), and each output is stored once.
 *
 * B is packed first (its own stage) into panels of NR columns, k-major, so the k loop reads
 * one contiguous stream: that also turns a transposed or strided B into unit-stride loads.
 * Packing is skipped when M fits one tile row and B's columns are already contiguous.
 * Edge tiles (M % MR rows, N % NR columns) are the same code with fewer rows / lanes; the
 * backend gives an odd lane count its own vector type.
 *
 * Parallelism: over the batch when there is one; otherwise over column panels (each thread
 * keeps its B panel in cache while walking the rows) when there are enough panels for the
 * threads, else over row tiles. Not done: K blocking (very long K runs out of L2 with the
 * panel), packing A, float64. */
#include <string.h>

#include "jit/lower_internal.h"

typedef struct matmul_t {
  lower_t* L;
  stax_kir_kernel_t* k;
  int32_t node;
  int32_t a, b, c, out;
  double alpha, beta;
  int64_t m, n, kdim;
  int64_t a_row, a_depth; /* strides of A along i and k */
  int64_t b_depth, b_col; /* strides of B along k and j */
  int32_t batch_rank;     /* the output's batch dims */
  int64_t batch_dims[STAX_MAX_RANK];
  int64_t a_batch[STAX_MAX_RANK], b_batch[STAX_MAX_RANK], packed_batch[STAX_MAX_RANK];
  int32_t mr, nr; /* tile rows, tile columns */
  bool packed;
  int32_t panel_buffer;
  int64_t panels; /* ceil(N / NR) */
  int32_t tiles;  /* counter for local names */
  /* Forms of the current batch point (over the batch loops). */
  stax_kir_index_t batch_a, batch_b, batch_packed;
  stax_kir_index_t batch_forms[STAX_MAX_RANK];
} matmul_t;

bool lower_is_matmul_op(stax_op_t op) {
  return op == STAX_OP_MatMul || op == STAX_OP_Gemm;
}

/* ---- analysis ---------------------------------------------------------------------------- */

static stax_status_t analyze(matmul_t* m) {
  lower_t* L = m->L;
  const stax_jit_node_t* node = &L->group->nodes[m->node];
  const char* name = node->node->name ? node->node->name : "";
  m->a = node->inputs[0];
  m->b = node->inputs[1];
  m->c = node->node->op == STAX_OP_Gemm && node->input_count > 2 ? node->inputs[2] : -1;
  m->out = node->outputs[0];
  m->alpha = 1;
  m->beta = 1;
  const stax_jit_value_t* a = lower_value(L, m->a);
  const stax_jit_value_t* b = lower_value(L, m->b);
  const stax_jit_value_t* out = lower_value(L, m->out);
  if (a->dtype != STAX_DTYPE_FLOAT32 || b->dtype != STAX_DTYPE_FLOAT32 ||
      out->dtype != STAX_DTYPE_FLOAT32)
    return lower_refuse(L, "%s node '%s' on %s (float32 only)", stax_op_name(node->node->op), name,
                        stax_dtype_name(a->dtype));
  if (L->producer[m->a] >= 0 || L->producer[m->b] >= 0)
    return lower_refuse(L, "an operand of %s node '%s' is computed in the group",
                        stax_op_name(node->node->op), name);
  if (a->rank < 2 || b->rank < 2)
    return lower_refuse(L, "%s node '%s' with a vector operand", stax_op_name(node->node->op),
                        name);
  bool trans_a = false, trans_b = false;
  if (node->node->op == STAX_OP_Gemm) {
    int64_t ta = 0, tb = 0;
    STAX_RETURN_IF_ERROR(stax_node_attr_int(node->node, "transA", 0, &ta));
    STAX_RETURN_IF_ERROR(stax_node_attr_int(node->node, "transB", 0, &tb));
    STAX_RETURN_IF_ERROR(lower_attr_float(node, "alpha", 1.0f, &m->alpha));
    STAX_RETURN_IF_ERROR(lower_attr_float(node, "beta", 1.0f, &m->beta));
    trans_a = ta != 0;
    trans_b = tb != 0;
    if (a->rank != 2 || b->rank != 2) return lower_refuse(L, "Gemm node '%s' is not 2-D", name);
  }
  int32_t ar = a->rank, br = b->rank;
  m->m = trans_a ? a->dims[ar - 1] : a->dims[ar - 2];
  m->kdim = trans_a ? a->dims[ar - 2] : a->dims[ar - 1];
  m->a_row = trans_a ? a->strides[ar - 1] : a->strides[ar - 2];
  m->a_depth = trans_a ? a->strides[ar - 2] : a->strides[ar - 1];
  int64_t b_k = trans_b ? b->dims[br - 1] : b->dims[br - 2];
  m->n = trans_b ? b->dims[br - 2] : b->dims[br - 1];
  m->b_depth = trans_b ? b->strides[br - 1] : b->strides[br - 2];
  m->b_col = trans_b ? b->strides[br - 2] : b->strides[br - 1];
  if (b_k != m->kdim)
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s': inner dims %lld and %lld differ",
                            stax_op_name(node->node->op), name, (long long)m->kdim, (long long)b_k);
  /* Batch dims: the output's leading dims; A's and B's right-aligned with stride 0 where they
   * broadcast. */
  m->batch_rank = out->rank - 2;
  bool shape_ok = out->rank >= 2 && out->dims[out->rank - 2] == m->m &&
                  out->dims[out->rank - 1] == m->n && ar - 2 <= m->batch_rank &&
                  br - 2 <= m->batch_rank;
  for (int32_t e = 0; shape_ok && e < m->batch_rank; e++) {
    m->batch_dims[e] = out->dims[e];
    int32_t da = e - (m->batch_rank - (ar - 2)), db = e - (m->batch_rank - (br - 2));
    int64_t a_dim = da >= 0 ? a->dims[da] : 1, b_dim = db >= 0 ? b->dims[db] : 1;
    if ((a_dim != 1 && a_dim != out->dims[e]) || (b_dim != 1 && b_dim != out->dims[e]))
      shape_ok = false;
    m->a_batch[e] = a_dim == 1 ? 0 : a->strides[da];
    m->b_batch[e] = b_dim == 1 ? 0 : b->strides[db];
  }
  if (!shape_ok)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s': output dims do not match the "
                            "operands",
                            stax_op_name(node->node->op), name);

  /* The epilogue runs in the output's space. */
  L->rank = out->rank;
  memcpy(L->dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
  for (int32_t v = 0; v < L->group->value_count; v++) {
    /* The operands need not fit unless the epilogue reads them too. */
    if ((v == m->a || v == m->b) && L->uses[v] == 1) continue;
    bool used = L->uses[v] > 0 || L->producer[v] >= 0;
    if (used && !lower_value_fits(L, v, 0, L->rank))
      return lower_refuse(L, "value '%s' does not fit the %s output", lower_value_name(L, v),
                          stax_op_name(node->node->op));
  }
  for (int32_t i = 0; i < L->group->output_count; i++) {
    const stax_jit_value_t* o = lower_value(L, L->group->outputs[i]);
    bool same =
        o->rank == out->rank && memcmp(o->dims, out->dims, sizeof(int64_t) * (size_t)o->rank) == 0;
    if (!same)
      return lower_refuse(L, "output '%s' is not %s-shaped",
                          lower_value_name(L, L->group->outputs[i]), stax_op_name(node->node->op));
  }
  return STAX_OK;
}

/* ---- emission ---------------------------------------------------------------------------- */

static stax_kir_index_t form_of(matmul_t* m, int32_t loop, int64_t coefficient, int64_t constant) {
  stax_kir_index_t index = stax_kir_index_constant(constant);
  stax_kir_index_add_term(m->k, &index, loop, coefficient);
  return index;
}

static stax_kir_loop_t* add_loop(matmul_t* m, stax_kir_block_t* block, const char* base,
                                 int64_t extent) {
  char name[32];
  snprintf(name, sizeof(name), "%s%d", base, (int)m->k->loop_count);
  return stax_kir_add_loop(m->k, block, name, extent);
}

/* B's panels: packed[batch][panel][k][j] = B[batch][k][panel*NR + j], NR columns per panel
 * (the last one may hold fewer; its other lanes are never read). */
static void pack_nest(matmul_t* m, stax_kir_block_t* block, const stax_kir_index_t* source_batch,
                      const stax_kir_index_t* target_batch, const stax_kir_index_t* panel,
                      int32_t lanes) {
  stax_kir_kernel_t* k = m->k;
  stax_kir_loop_t* depth = add_loop(m, block, "pk", m->kdim);
  stax_kir_loop_t* columns = depth ? add_loop(m, &depth->body, "pj", lanes) : NULL;
  if (!columns) return;
  columns->vector_width = lanes;
  int32_t kk = stax_kir_loop_id(k, depth), j = stax_kir_loop_id(k, columns);
  stax_kir_index_t source = *source_batch;
  stax_kir_index_add_term(k, &source, kk, m->b_depth);
  stax_kir_index_add_scaled(k, &source, panel, (int64_t)m->nr * m->b_col);
  stax_kir_index_add_term(k, &source, j, m->b_col);
  stax_kir_index_t target = *target_batch;
  stax_kir_index_add_scaled(k, &target, panel, m->kdim * m->nr);
  stax_kir_index_add_term(k, &target, kk, m->nr);
  stax_kir_index_add_term(k, &target, j, 1);
  stax_kir_add_store(k, &columns->body, m->panel_buffer, &target,
                     stax_kir_load(k, m->L->buffer[m->b], &source));
}

static void emit_pack(matmul_t* m) {
  stax_kir_kernel_t* k = m->k;
  const stax_jit_value_t* b = lower_value(m->L, m->b);
  int32_t batch_rank = b->rank - 2;
  int64_t panel_size = m->kdim * m->nr, batch_count = 1;
  for (int32_t d = 0; d < batch_rank; d++) batch_count *= b->dims[d];
  int64_t total = batch_count * m->panels * panel_size;
  int64_t dims[1] = {total > 0 ? total : 1};
  m->panel_buffer =
      stax_kir_add_buffer(k, "panels", STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  stax_kir_block_t* block = stax_kir_add_stage(k, "pack");
  stax_kir_index_t source = stax_kir_index_constant(0), target = stax_kir_index_constant(0);
  bool batched = false;
  int64_t after = batch_count;
  for (int32_t d = 0; d < batch_rank && block; d++) {
    after /= b->dims[d];
    if (b->dims[d] == 1) continue;
    stax_kir_loop_t* loop = add_loop(m, block, "pb", b->dims[d]);
    if (!loop) return;
    loop->parallel = !batched;
    batched = true;
    int32_t id = stax_kir_loop_id(k, loop);
    stax_kir_index_add_term(k, &source, id, b->strides[d]);
    stax_kir_index_add_term(k, &target, id, after * m->panels * panel_size);
    block = &loop->body;
  }
  int64_t full = m->n / m->nr, edge = m->n % m->nr;
  if (full > 0) {
    stax_kir_loop_t* panels = add_loop(m, block, "pp", full);
    if (!panels) return;
    panels->parallel = !batched;
    int64_t grain = 4096 / (panel_size > 0 ? panel_size : 1);
    panels->grain = grain < 1 ? 1 : grain;
    stax_kir_index_t panel = form_of(m, stax_kir_loop_id(k, panels), 1, 0);
    pack_nest(m, &panels->body, &source, &target, &panel, m->nr);
  }
  if (edge > 0) {
    /* Without batch loops the full panels' loop is the stage's one parallel statement. */
    stax_kir_block_t* edge_block =
        batched || full == 0 ? block : stax_kir_add_stage(k, "pack_edge");
    stax_kir_index_t panel = stax_kir_index_constant(full);
    pack_nest(m, edge_block, &source, &target, &panel, (int32_t)edge);
  }
}

/* One tile: `rows` x `lanes` outputs at (row_base, col_base) of the current batch point. */
static void emit_tile(matmul_t* m, stax_kir_block_t* block, const stax_kir_index_t* row_base,
                      const stax_kir_index_t* col_base, const stax_kir_index_t* panel, int32_t rows,
                      int32_t lanes) {
  lower_t* L = m->L;
  stax_kir_kernel_t* k = m->k;
  int32_t tile = m->tiles++;
  char name[32];
  stax_kir_loop_t* columns = add_loop(m, block, "j", lanes);
  if (!columns) return;
  columns->vector_width = lanes;
  int32_t j = stax_kir_loop_id(k, columns);
  int32_t accumulators[32];
  for (int32_t r = 0; r < rows; r++) {
    snprintf(name, sizeof(name), "acc%d_%d", (int)tile, (int)r);
    accumulators[r] = stax_kir_add_local(k, name, STAX_DTYPE_FLOAT32);
    stax_kir_add_declare(k, &columns->body, accumulators[r],
                         stax_kir_float(k, STAX_DTYPE_FLOAT32, 0));
  }
  stax_kir_loop_t* depth = add_loop(m, &columns->body, "k", m->kdim);
  if (!depth) return;
  depth->unroll = 4;
  int32_t kk = stax_kir_loop_id(k, depth);
  stax_kir_index_t b_index;
  int32_t b_buffer;
  if (m->packed) {
    b_buffer = m->panel_buffer;
    b_index = m->batch_packed;
    stax_kir_index_add_scaled(k, &b_index, panel, m->kdim * m->nr);
    stax_kir_index_add_term(k, &b_index, kk, m->nr);
    stax_kir_index_add_term(k, &b_index, j, 1);
  } else {
    b_buffer = L->buffer[m->b];
    b_index = m->batch_b;
    stax_kir_index_add_term(k, &b_index, kk, m->b_depth);
    stax_kir_index_add_scaled(k, &b_index, col_base, m->b_col);
    stax_kir_index_add_term(k, &b_index, j, m->b_col);
  }
  snprintf(name, sizeof(name), "b%d", (int)tile);
  int32_t b_local = stax_kir_add_local(k, name, STAX_DTYPE_FLOAT32);
  stax_kir_add_declare(k, &depth->body, b_local, stax_kir_load(k, b_buffer, &b_index));
  for (int32_t r = 0; r < rows; r++) {
    stax_kir_index_t a_index = m->batch_a;
    stax_kir_index_add_scaled(k, &a_index, row_base, m->a_row);
    a_index.constant += r * m->a_row;
    stax_kir_index_add_term(k, &a_index, kk, m->a_depth);
    const stax_kir_expr_t* product =
        stax_kir_fma(k, stax_kir_load(k, L->buffer[m->a], &a_index), stax_kir_local(k, b_local),
                     stax_kir_local(k, accumulators[r]));
    stax_kir_add_assign(k, &depth->body, accumulators[r], product);
  }
  /* The epilogue, row by row, at the tile's output points. */
  for (int32_t r = 0; r < rows; r++) {
    for (int32_t e = 0; e < m->batch_rank; e++) L->forms[e] = m->batch_forms[e];
    L->forms[L->rank - 2] = *row_base;
    L->forms[L->rank - 2].constant += r;
    L->forms[L->rank - 1] = *col_base;
    stax_kir_index_add_term(k, &L->forms[L->rank - 1], j, 1);
    lower_new_point(L);
    const stax_kir_expr_t* value = stax_kir_local(k, accumulators[r]);
    if (m->alpha != 1)
      value =
          stax_kir_binary(k, STAX_KIR_MUL, value, stax_kir_float(k, STAX_DTYPE_FLOAT32, m->alpha));
    if (m->c >= 0 && m->beta != 0) {
      const stax_kir_expr_t* c = lower_value_expr(L, m->c, LOWER_FULL);
      if (m->beta != 1)
        c = stax_kir_binary(k, STAX_KIR_MUL, c, stax_kir_float(k, STAX_DTYPE_FLOAT32, m->beta));
      value = stax_kir_binary(k, STAX_KIR_ADD, value, c);
    }
    L->fixed[m->out] = value;
    for (int32_t i = 0; i < L->group->output_count; i++)
      lower_store_value(L, &columns->body, L->group->outputs[i], LOWER_FULL, L->rank);
    L->fixed[m->out] = NULL;
  }
}

/* Tiles of `rows` x `lanes` over a loop (or one constant position) of rows and of panels. */
typedef struct tile_axis_t {
  int32_t loop;  /* loop id, or -1 for the constant position */
  int64_t first; /* the constant tile index when loop < 0 */
} tile_axis_t;

static void emit_tile_at(matmul_t* m, stax_kir_block_t* block, tile_axis_t row_tile,
                         tile_axis_t panel, int32_t rows, int32_t lanes) {
  stax_kir_index_t row_base = row_tile.loop >= 0 ? form_of(m, row_tile.loop, m->mr, 0)
                                                 : stax_kir_index_constant(row_tile.first * m->mr);
  stax_kir_index_t panel_index =
      panel.loop >= 0 ? form_of(m, panel.loop, 1, 0) : stax_kir_index_constant(panel.first);
  stax_kir_index_t col_base = stax_kir_index_constant(0);
  stax_kir_index_add_scaled(m->k, &col_base, &panel_index, m->nr);
  emit_tile(m, block, &row_base, &col_base, &panel_index, rows, lanes);
}

/* A loop over `count` tiles (parallel when asked), or NULL when count is 0. */
static stax_kir_loop_t* tile_loop(matmul_t* m, stax_kir_block_t* block, const char* name,
                                  int64_t count, bool parallel) {
  if (count <= 0 || !block) return NULL;
  stax_kir_loop_t* loop = add_loop(m, block, name, count);
  if (loop) loop->parallel = parallel;
  return loop;
}

static void emit_compute(matmul_t* m) {
  lower_t* L = m->L;
  stax_kir_kernel_t* k = m->k;
  int64_t row_tiles = m->m / m->mr, panels = m->n / m->nr;
  int32_t edge_rows = (int32_t)(m->m % m->mr), edge_lanes = (int32_t)(m->n % m->nr);
  stax_kir_block_t* block = stax_kir_add_stage(k, "matmul");
  m->batch_a = m->batch_b = m->batch_packed = stax_kir_index_constant(0);
  bool batched = false;
  for (int32_t e = 0; e < m->batch_rank && block; e++) {
    m->batch_forms[e] = stax_kir_index_constant(0);
    if (m->batch_dims[e] == 1) continue;
    stax_kir_loop_t* loop = add_loop(m, block, "batch", m->batch_dims[e]);
    if (!loop) return;
    loop->parallel = !batched;
    batched = true;
    int32_t id = stax_kir_loop_id(k, loop);
    stax_kir_index_add_term(k, &m->batch_forms[e], id, 1);
    stax_kir_index_add_term(k, &m->batch_a, id, m->a_batch[e]);
    stax_kir_index_add_term(k, &m->batch_b, id, m->b_batch[e]);
    stax_kir_index_add_term(k, &m->batch_packed, id, m->packed_batch[e]);
    block = &loop->body;
  }
  tile_axis_t edge_row = {-1, row_tiles}, edge_panel = {-1, panels};
  if (batched) {
    /* Everything sequential inside the parallel batch loop. */
    stax_kir_loop_t* p = tile_loop(m, block, "p", panels, false);
    if (p) {
      tile_axis_t panel = {stax_kir_loop_id(k, p), 0};
      stax_kir_loop_t* i = tile_loop(m, &p->body, "i", row_tiles, false);
      if (i)
        emit_tile_at(m, &i->body, (tile_axis_t){stax_kir_loop_id(k, i), 0}, panel, m->mr, m->nr);
      if (edge_rows) emit_tile_at(m, &p->body, edge_row, panel, edge_rows, m->nr);
    }
    if (edge_lanes) {
      stax_kir_loop_t* i = tile_loop(m, block, "i", row_tiles, false);
      if (i)
        emit_tile_at(m, &i->body, (tile_axis_t){stax_kir_loop_id(k, i), 0}, edge_panel, m->mr,
                     edge_lanes);
      if (edge_rows) emit_tile_at(m, block, edge_row, edge_panel, edge_rows, edge_lanes);
    }
    return;
  }
  /* Column panels in parallel when there are enough of them, else row tiles; the other edge
   * and the corner get stages of their own (a parallel loop must be alone in its stage). */
  bool panels_outer = panels >= L->options->thread_count || row_tiles < 2 * panels;
  if (panels_outer) {
    stax_kir_loop_t* p = tile_loop(m, block, "p", panels, true);
    if (p) {
      tile_axis_t panel = {stax_kir_loop_id(k, p), 0};
      stax_kir_loop_t* i = tile_loop(m, &p->body, "i", row_tiles, false);
      if (i)
        emit_tile_at(m, &i->body, (tile_axis_t){stax_kir_loop_id(k, i), 0}, panel, m->mr, m->nr);
      if (edge_rows) emit_tile_at(m, &p->body, edge_row, panel, edge_rows, m->nr);
    }
    if (edge_lanes && row_tiles > 0) {
      stax_kir_loop_t* i = tile_loop(m, stax_kir_add_stage(k, "matmul_edge"), "i", row_tiles, true);
      if (i)
        emit_tile_at(m, &i->body, (tile_axis_t){stax_kir_loop_id(k, i), 0}, edge_panel, m->mr,
                     edge_lanes);
    }
  } else {
    stax_kir_loop_t* i = tile_loop(m, block, "i", row_tiles, true);
    if (i) {
      tile_axis_t row = {stax_kir_loop_id(k, i), 0};
      stax_kir_loop_t* p = tile_loop(m, &i->body, "p", panels, false);
      if (p) emit_tile_at(m, &p->body, row, (tile_axis_t){stax_kir_loop_id(k, p), 0}, m->mr, m->nr);
      if (edge_lanes) emit_tile_at(m, &i->body, row, edge_panel, m->mr, edge_lanes);
    }
    if (edge_rows && panels > 0) {
      stax_kir_loop_t* p = tile_loop(m, stax_kir_add_stage(k, "matmul_edge"), "p", panels, true);
      if (p)
        emit_tile_at(m, &p->body, edge_row, (tile_axis_t){stax_kir_loop_id(k, p), 0}, edge_rows,
                     m->nr);
    }
  }
  /* The corner both edges leave. */
  if (edge_rows && edge_lanes)
    emit_tile_at(m, stax_kir_add_stage(k, "matmul_corner"), edge_row, edge_panel, edge_rows,
                 edge_lanes);
}

stax_status_t lower_matmul_group(lower_t* L, int32_t node) {
  matmul_t m;
  memset(&m, 0, sizeof(m));
  m.L = L;
  m.k = L->kernel;
  m.node = node;
  STAX_RETURN_IF_ERROR(analyze(&m));
  int32_t lanes = L->vector_lanes_f32;
  m.nr = 2 * lanes;
  m.mr = lanes >= 16 ? 12 : 6;
  m.panels = (m.n + m.nr - 1) / m.nr;
  m.packed = m.m > m.mr || m.b_col != 1;
  if (m.m == 0 || m.n == 0) {
    stax_kir_add_stage(m.k, "empty");
    return stax_kir_kernel_status(m.k);
  }
  if (m.packed) {
    /* Where batch point e's panels start: B's own batch layout, 0 where B broadcasts. */
    const stax_jit_value_t* b = lower_value(L, m.b);
    int32_t b_batch_rank = b->rank - 2;
    int64_t after = 1;
    for (int32_t d = b_batch_rank - 1; d >= 0; d--) {
      int32_t e = m.batch_rank - b_batch_rank + d;
      m.packed_batch[e] = b->dims[d] == 1 ? 0 : after * m.panels * m.kdim * m.nr;
      after *= b->dims[d];
    }
    emit_pack(&m);
  }
  emit_compute(&m);
  return stax_kir_kernel_status(m.k);
}
