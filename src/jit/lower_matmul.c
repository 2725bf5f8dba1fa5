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
 * threads, else over row tiles.
 *
 * The blocked nest (choose_blocking says when): K is cut into blocks of KC, the rows into
 * blocks of MC, and the loops run GotoBLAS's order: row block, K block, panel, row tile, so a
 * KC x NR slice of B stays in L1 across a row block's tiles and the block's MC x KC slice of
 * A stays in L2 across the panels. Tiles carry their sums between K blocks in a partial
 * buffer (the first block starts from zero, the last one adds the partial sums and runs the
 * epilogue), so the epilogue still sees each finished value exactly once. A transposed or
 * strided A is first copied into k-major MR-row micro-panels. Threads take contiguous ranges
 * of panels (column blocks) and every row over them; the panels left over and the partial
 * panel are a last stage. Not done: NC blocking for one thread, float64. */
#include <string.h>

#include "base/hash_map.h"
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
  /* Blocking (see choose_blocking). */
  bool blocked;           /* the row-block nest instead of the unblocked one */
  int64_t kc, k_blocks;   /* K in k_blocks blocks of kc (the last one may be shorter) */
  int64_t block_tiles;    /* row tiles per row block (MC = block_tiles * MR rows) */
  int64_t row_blocks;     /* full row blocks; the rows after them are the "rest" */
  int64_t column_blocks;  /* the parallel loop's ranges of panels (1: no such loop) */
  int32_t partial_buffer; /* sums between K blocks: [batch][panel][M][NR] */
  int64_t partial_batch[STAX_MAX_RANK];
  bool pack_a;            /* A copied into k-major MR-row micro-panels first */
  int32_t a_panel_buffer;
  /* Forms of the current batch point (over the batch loops). */
  stax_kir_index_t batch_a, batch_b, batch_packed, batch_partial;
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
  if (!stax_jit_op_dtype_lowered(node->node->op, a->dtype) || b->dtype != a->dtype ||
      out->dtype != a->dtype)
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

static void emit_pack_stages(matmul_t* m);

/* B's panels: when B is a constant (a weight), the pack stages only turn that constant into
 * panels, so they are marked for the host to run once per weight and keep the result with it
 * (jit.c); the key names the layout. */
static void emit_pack(matmul_t* m) {
  stax_kir_kernel_t* k = m->k;
  int32_t first_stage = k->stage_count;
  emit_pack_stages(m);
  const stax_jit_value_t* b = lower_value(m->L, m->b);
  if (!b->constant || k->status) return;
  uint64_t key = stax_hash_combine(0x6a17a9e15ull, (uint64_t)m->nr);
  key = stax_hash_combine(key, (uint64_t)m->kdim);
  key = stax_hash_combine(key, (uint64_t)m->n);
  key = stax_hash_combine(key, (uint64_t)b->dtype);
  key = stax_hash_combine(key, (uint64_t)b->rank);
  for (int32_t d = 0; d < b->rank; d++) {
    key = stax_hash_combine(key, (uint64_t)b->dims[d]);
    key = stax_hash_combine(key, (uint64_t)b->strides[d]);
  }
  key = stax_hash_combine(key, (uint64_t)m->b_depth);
  key = stax_hash_combine(key, (uint64_t)m->b_col);
  for (int32_t s = first_stage; s < k->stage_count; s++) {
    k->stages[s]->fills = m->panel_buffer;
    k->stages[s]->source = m->L->buffer[m->b];
    k->stages[s]->fill_key = key;
  }
}

static void emit_pack_stages(matmul_t* m) {
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
    if (loop->parallel) { /* at least 16K floats copied per task */
      int64_t per_item = after * m->panels * panel_size;
      loop->grain = per_item >= 16384 ? 1 : 16384 / (per_item + 1) + 1;
    }
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
    int64_t grain = 16384 / (panel_size > 0 ? panel_size : 1);
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

/* Which share of K a tile computes, and what it does with its sums. WHOLE: all of K, then
 * the epilogue. With K blocking: FIRST starts from zero and leaves its sums in the partial
 * buffer, MIDDLE adds a block to them, LAST adds the last block and runs the epilogue, so the
 * epilogue (alpha, beta * C, the group's ops) sees every product exactly once. */
typedef enum part_kind_e { PART_WHOLE, PART_FIRST, PART_MIDDLE, PART_LAST } part_kind_t;

typedef struct k_part_t {
  part_kind_t kind;
  stax_kir_index_t base; /* the block's first k */
  int64_t extent;        /* its length */
} k_part_t;

/* One tile: `rows` x `lanes` outputs at (row_base, col_base) of the current batch point, over
 * the k range of `part`; with span > 1 (whole panels, all of K), `span` adjacent panels side
 * by side, `rows` x span * NR outputs: a one-row tile holds only NR / native-vector sums, too
 * few to cover the FMA latency (a GEMV at M = 1 ran at a quarter of the FMA rate, below what
 * reading B allows), and more panels give it more independent sums while every output still
 * adds its products in k order, as every other tile does. */
static void emit_tile_span(matmul_t* m, stax_kir_block_t* block, const stax_kir_index_t* row_base,
                           const stax_kir_index_t* col_base, const stax_kir_index_t* panel,
                           int32_t rows, int32_t lanes, const k_part_t* part, int32_t span) {
  lower_t* L = m->L;
  stax_kir_kernel_t* k = m->k;
  int32_t tile = m->tiles++;
  char name[32];
  stax_kir_loop_t* columns = add_loop(m, block, "j", lanes);
  if (!columns) return;
  /* An edge tile of 9..15 columns (on 8-lane vectors) as one odd-sized vector is legalized
   * element by element through the stack by LLVM; whole native vectors plus a tail copy of
   * the tile run several times faster. */
  int32_t native = m->nr / 2;
  columns->vector_width = lanes > native && lanes % native != 0 ? native : lanes;
  int32_t j = stax_kir_loop_id(k, columns);
  /* partial[batch][panel][row][NR]: where a K-blocked tile keeps its sums between blocks.
   * Panel-major, so a tile's sums are MR * NR contiguous floats and the tiles of a panel
   * follow each other: one stream the prefetcher follows, not MR rows N apart. */
  stax_kir_index_t partial = m->batch_partial;
  stax_kir_index_add_scaled(k, &partial, panel, m->m * m->nr);
  stax_kir_index_add_scaled(k, &partial, row_base, m->nr);
  stax_kir_index_add_term(k, &partial, j, 1);
  bool resume = part->kind == PART_MIDDLE || part->kind == PART_LAST;
  /* Callers pass span > 1 only for one-row tiles of whole panels over all of K (the partial
   * buffer holds one panel's sums per tile); rows * span stays within 12 x 1 or 1 x 4. */
  enum { kMaxSums = 32 };
  int32_t accumulators[kMaxSums]; /* [row][panel of the span] */
  for (int32_t r = 0; r < rows; r++) {
    for (int32_t q = 0; q < span; q++) {
      snprintf(name, sizeof(name), "acc%d_%d_%d", (int)tile, (int)r, (int)q);
      accumulators[r * span + q] = stax_kir_add_local(k, name, STAX_DTYPE_FLOAT32);
      stax_kir_index_t at = partial;
      at.constant += r * m->nr;
      stax_kir_add_declare(k, &columns->body, accumulators[r * span + q],
                           resume ? stax_kir_load(k, m->partial_buffer, &at)
                                  : stax_kir_float(k, STAX_DTYPE_FLOAT32, 0));
    }
  }
  stax_kir_loop_t* depth = add_loop(m, &columns->body, "k", part->extent);
  if (!depth) return;
  depth->unroll = 4;
  int32_t kk = stax_kir_loop_id(k, depth);
  stax_kir_index_t k_at = part->base; /* the k this iteration reads */
  stax_kir_index_add_term(k, &k_at, kk, 1);
  stax_kir_index_t b_index;
  int32_t b_buffer;
  if (m->packed) {
    b_buffer = m->panel_buffer;
    b_index = m->batch_packed;
    stax_kir_index_add_scaled(k, &b_index, panel, m->kdim * m->nr);
    stax_kir_index_add_scaled(k, &b_index, &k_at, m->nr);
    stax_kir_index_add_term(k, &b_index, j, 1);
  } else {
    b_buffer = L->buffer[m->b];
    b_index = m->batch_b;
    stax_kir_index_add_scaled(k, &b_index, &k_at, m->b_depth);
    stax_kir_index_add_scaled(k, &b_index, col_base, m->b_col);
    stax_kir_index_add_term(k, &b_index, j, m->b_col);
  }
  int32_t b_locals[kMaxSums];
  for (int32_t q = 0; q < span; q++) {
    snprintf(name, sizeof(name), "b%d_%d", (int)tile, (int)q);
    b_locals[q] = stax_kir_add_local(k, name, STAX_DTYPE_FLOAT32);
    stax_kir_index_t at = b_index; /* panel q of the span: the next panel, or NR columns on */
    at.constant += q * (m->packed ? m->kdim * m->nr : m->nr * m->b_col);
    stax_kir_add_declare(k, &depth->body, b_locals[q], stax_kir_load(k, b_buffer, &at));
  }
  for (int32_t r = 0; r < rows; r++) {
    stax_kir_index_t a_index;
    int32_t a_buffer;
    if (m->pack_a) {
      /* The tile's k-major micro-panel: row_base is a multiple of MR, so row_base * K is
       * where tile row_base / MR starts. */
      a_buffer = m->a_panel_buffer;
      a_index = stax_kir_index_constant(r);
      stax_kir_index_add_scaled(k, &a_index, row_base, m->kdim);
      stax_kir_index_add_scaled(k, &a_index, &k_at, m->mr);
    } else {
      a_buffer = L->buffer[m->a];
      a_index = m->batch_a;
      stax_kir_index_add_scaled(k, &a_index, row_base, m->a_row);
      a_index.constant += r * m->a_row;
      stax_kir_index_add_scaled(k, &a_index, &k_at, m->a_depth);
    }
    /* A[row, k] for each panel of the span: one load after LLVM's CSE. */
    for (int32_t q = 0; q < span; q++) {
      const stax_kir_expr_t* product =
          stax_kir_fma(k, stax_kir_load(k, a_buffer, &a_index), stax_kir_local(k, b_locals[q]),
                       stax_kir_local(k, accumulators[r * span + q]));
      stax_kir_add_assign(k, &depth->body, accumulators[r * span + q], product);
    }
  }
  if (part->kind == PART_FIRST || part->kind == PART_MIDDLE) {
    for (int32_t r = 0; r < rows; r++) {
      stax_kir_index_t at = partial;
      at.constant += r * m->nr;
      stax_kir_add_store(k, &columns->body, m->partial_buffer, &at,
                         stax_kir_local(k, accumulators[r]));
    }
    return;
  }
  /* The epilogue, row by row (and panel by panel of the span), at the tile's output points. */
  for (int32_t r = 0; r < rows * span; r++) {
    for (int32_t e = 0; e < m->batch_rank; e++) L->forms[e] = m->batch_forms[e];
    L->forms[L->rank - 2] = *row_base;
    L->forms[L->rank - 2].constant += r / span;
    L->forms[L->rank - 1] = *col_base;
    L->forms[L->rank - 1].constant += (r % span) * m->nr;
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

static void emit_tile(matmul_t* m, stax_kir_block_t* block, const stax_kir_index_t* row_base,
                      const stax_kir_index_t* col_base, const stax_kir_index_t* panel, int32_t rows,
                      int32_t lanes, const k_part_t* part) {
  emit_tile_span(m, block, row_base, col_base, panel, rows, lanes, part, 1);
}

/* Panels a one-row tile takes at once: 4 x 2 native vectors of independent sums, enough to
 * cover the FMA latency on two pipes (a one-panel row tile has 2). */
#define ROW_TILE_SPAN 4

/* Tiles of `rows` x `lanes` over a loop (or one constant position) of rows and of panels. */
typedef struct tile_axis_t {
  int32_t loop;  /* loop id, or -1 for the constant position */
  int64_t first; /* the constant tile index when loop < 0, else added to the loop's */
} tile_axis_t;

static void emit_tile_at(matmul_t* m, stax_kir_block_t* block, tile_axis_t row_tile,
                         tile_axis_t panel, int32_t rows, int32_t lanes, const k_part_t* part) {
  stax_kir_index_t row_base = row_tile.loop >= 0
                                  ? form_of(m, row_tile.loop, m->mr, row_tile.first * m->mr)
                                  : stax_kir_index_constant(row_tile.first * m->mr);
  stax_kir_index_t panel_index = panel.loop >= 0 ? form_of(m, panel.loop, 1, panel.first)
                                                 : stax_kir_index_constant(panel.first);
  stax_kir_index_t col_base = stax_kir_index_constant(0);
  stax_kir_index_add_scaled(m->k, &col_base, &panel_index, m->nr);
  emit_tile(m, block, &row_base, &col_base, &panel_index, rows, lanes, part);
}

/* Multiply-adds one parallel task should get at least (about 10 us of work): waking a pool
 * thread costs several microseconds on a busy machine, so smaller matmuls (a few tokens
 * through a transformer layer) run on the calling thread. */
#define MATMUL_TASK_WORK (1 << 20)

static int64_t task_grain(int64_t macs_per_item) {
  return macs_per_item >= MATMUL_TASK_WORK ? 1 : MATMUL_TASK_WORK / (macs_per_item + 1) + 1;
}

/* A loop over `count` tiles (parallel when asked, each item `macs` multiply-adds), or NULL
 * when count is 0. */
static stax_kir_loop_t* tile_loop(matmul_t* m, stax_kir_block_t* block, const char* name,
                                  int64_t count, bool parallel, int64_t macs) {
  if (count <= 0 || !block) return NULL;
  stax_kir_loop_t* loop = add_loop(m, block, name, count);
  if (loop) {
    loop->parallel = parallel;
    if (parallel) loop->grain = task_grain(macs);
  }
  return loop;
}

/* A loop of `count` tiles of `span` whole panels each (emit_tile_span), the first at panel
 * `first`, `rows` rows from row_base; parallel when asked (`macs` per tile). */
static void emit_panel_loop(matmul_t* m, stax_kir_block_t* block, const char* name,
                            const stax_kir_index_t* row_base, int64_t first, int64_t count,
                            int32_t rows, int32_t span, bool parallel, const k_part_t* part) {
  stax_kir_loop_t* loop =
      tile_loop(m, block, name, count, parallel, (int64_t)rows * span * m->nr * m->kdim);
  if (!loop) return;
  int32_t id = stax_kir_loop_id(m->k, loop);
  stax_kir_index_t panel = form_of(m, id, span, first);
  stax_kir_index_t col_base = form_of(m, id, span * m->nr, first * m->nr);
  emit_tile_span(m, &loop->body, row_base, &col_base, &panel, rows, m->nr, part, span);
}

static const k_part_t whole_k = {PART_WHOLE, {0, 0, {0}, {0}}, 0};

/* The original, unblocked nest: every tile runs all of K. Used when there are few row tiles
 * (nothing to block for) and K is short. */
static void emit_compute_unblocked(matmul_t* m, stax_kir_block_t* block, bool batched) {
  lower_t* L = m->L;
  stax_kir_kernel_t* k = m->k;
  int64_t row_tiles = m->m / m->mr, panels = m->n / m->nr;
  int32_t edge_rows = (int32_t)(m->m % m->mr), edge_lanes = (int32_t)(m->n % m->nr);
  k_part_t all = whole_k;
  all.extent = m->kdim;
  const k_part_t* part = &all;
  tile_axis_t edge_row = {-1, row_tiles}, edge_panel = {-1, panels};
  if (batched) {
    /* Everything sequential inside the parallel batch loop. */
    stax_kir_loop_t* p = tile_loop(m, block, "p", panels, false, 0);
    if (p) {
      tile_axis_t panel = {stax_kir_loop_id(k, p), 0};
      stax_kir_loop_t* i = tile_loop(m, &p->body, "i", row_tiles, false, 0);
      if (i)
        emit_tile_at(m, &i->body, (tile_axis_t){stax_kir_loop_id(k, i), 0}, panel, m->mr, m->nr,
                     part);
      if (edge_rows) emit_tile_at(m, &p->body, edge_row, panel, edge_rows, m->nr, part);
    }
    if (edge_lanes) {
      stax_kir_loop_t* i = tile_loop(m, block, "i", row_tiles, false, 0);
      if (i)
        emit_tile_at(m, &i->body, (tile_axis_t){stax_kir_loop_id(k, i), 0}, edge_panel, m->mr,
                     edge_lanes, part);
      if (edge_rows) emit_tile_at(m, block, edge_row, edge_panel, edge_rows, edge_lanes, part);
    }
    return;
  }
  /* Column panels in parallel when there are enough of them, else row tiles; the other edge
   * and the corner get stages of their own (a parallel loop must be alone in its stage). */
  bool panels_outer = panels >= L->options->thread_count || row_tiles < 2 * panels;
  if (panels_outer && row_tiles == 0 && edge_rows == 1 && panels >= ROW_TILE_SPAN) {
    /* One row (a GEMV): spans of panels in parallel (emit_tile_span), the panels left over
     * and the partial panel serial after them. */
    int64_t spans = panels / ROW_TILE_SPAN, rest = panels % ROW_TILE_SPAN;
    stax_kir_index_t row_base = stax_kir_index_constant(0);
    emit_panel_loop(m, block, "p", &row_base, 0, spans, 1, ROW_TILE_SPAN, true, part);
    if (rest || edge_lanes) {
      stax_kir_block_t* tail = stax_kir_add_stage(k, "matmul_rest");
      emit_panel_loop(m, tail, "pr", &row_base, spans * ROW_TILE_SPAN, rest, 1, 1, false, part);
      if (edge_lanes) emit_tile_at(m, tail, edge_row, edge_panel, 1, edge_lanes, part);
    }
    return;
  }
  if (panels_outer) {
    stax_kir_loop_t* p = tile_loop(m, block, "p", panels, true, m->m * m->nr * m->kdim);
    if (p) {
      tile_axis_t panel = {stax_kir_loop_id(k, p), 0};
      stax_kir_loop_t* i = tile_loop(m, &p->body, "i", row_tiles, false, 0);
      if (i)
        emit_tile_at(m, &i->body, (tile_axis_t){stax_kir_loop_id(k, i), 0}, panel, m->mr, m->nr,
                     part);
      if (edge_rows) emit_tile_at(m, &p->body, edge_row, panel, edge_rows, m->nr, part);
    }
    if (edge_lanes && row_tiles > 0) {
      stax_kir_loop_t* i = tile_loop(m, stax_kir_add_stage(k, "matmul_edge"), "i", row_tiles, true,
                                     m->mr * edge_lanes * m->kdim);
      if (i)
        emit_tile_at(m, &i->body, (tile_axis_t){stax_kir_loop_id(k, i), 0}, edge_panel, m->mr,
                     edge_lanes, part);
    }
  } else {
    stax_kir_loop_t* i = tile_loop(m, block, "i", row_tiles, true, m->mr * m->n * m->kdim);
    if (i) {
      tile_axis_t row = {stax_kir_loop_id(k, i), 0};
      stax_kir_loop_t* p = tile_loop(m, &i->body, "p", panels, false, 0);
      if (p)
        emit_tile_at(m, &p->body, row, (tile_axis_t){stax_kir_loop_id(k, p), 0}, m->mr, m->nr,
                     part);
      if (edge_lanes) emit_tile_at(m, &i->body, row, edge_panel, m->mr, edge_lanes, part);
    }
    if (edge_rows && panels > 0) {
      stax_kir_loop_t* p = tile_loop(m, stax_kir_add_stage(k, "matmul_edge"), "p", panels, true,
                                     edge_rows * m->nr * m->kdim);
      if (p)
        emit_tile_at(m, &p->body, edge_row, (tile_axis_t){stax_kir_loop_id(k, p), 0}, edge_rows,
                     m->nr, part);
    }
  }
  /* The corner both edges leave. */
  if (edge_rows && edge_lanes)
    emit_tile_at(m, stax_kir_add_stage(k, "matmul_corner"), edge_row, edge_panel, edge_rows,
                 edge_lanes, part);
}

/* A region of the output for the blocked nest: `tiles` full row tiles from row tile
 * `row.first` (+ row.loop * tiles inside the row-block loop), then `edge_rows` rows of a
 * partial tile; against `panels` full panels from panel `col.first` (+ col.loop * panels
 * inside the parallel column-block loop), then the partial panel when `edge_panel`. */
typedef struct region_t {
  tile_axis_t row;
  int64_t tiles;
  int32_t edge_rows;
  tile_axis_t col;
  int64_t panels;
  bool edge_panel;
} region_t;

/* The region's row tiles (the full ones in a loop, then the edge) against one panel. */
static void emit_region_panel(matmul_t* m, stax_kir_block_t* block, const region_t* region,
                              const stax_kir_index_t* panel_index, int32_t lanes,
                              const k_part_t* part) {
  stax_kir_kernel_t* k = m->k;
  tile_axis_t row = region->row;
  stax_kir_index_t col_base = stax_kir_index_constant(0);
  stax_kir_index_add_scaled(k, &col_base, panel_index, m->nr);
  if (region->tiles > 0) {
    stax_kir_index_t tile_index = row.loop >= 0 ? form_of(m, row.loop, region->tiles, row.first)
                                                : stax_kir_index_constant(row.first);
    stax_kir_block_t* body = block;
    if (region->tiles > 1) {
      stax_kir_loop_t* i = add_loop(m, block, "i", region->tiles);
      if (!i) return;
      stax_kir_index_add_term(k, &tile_index, stax_kir_loop_id(k, i), 1);
      body = &i->body;
    }
    stax_kir_index_t row_base = stax_kir_index_constant(0);
    stax_kir_index_add_scaled(k, &row_base, &tile_index, m->mr);
    emit_tile(m, body, &row_base, &col_base, panel_index, m->mr, lanes, part);
  }
  if (region->edge_rows > 0) {
    /* Only a region outside the row-block loop has edge rows. */
    stax_kir_index_t row_base = stax_kir_index_constant((row.first + region->tiles) * m->mr);
    emit_tile(m, block, &row_base, &col_base, panel_index, region->edge_rows, lanes, part);
  }
}

static void emit_region_part(matmul_t* m, stax_kir_block_t* block, const region_t* region,
                             const k_part_t* part) {
  stax_kir_kernel_t* k = m->k;
  if (region->panels > 0) {
    stax_kir_index_t panel = region->col.loop >= 0
                                 ? form_of(m, region->col.loop, region->panels, region->col.first)
                                 : stax_kir_index_constant(region->col.first);
    stax_kir_block_t* body = block;
    if (region->panels > 1) {
      stax_kir_loop_t* p = add_loop(m, block, "p", region->panels);
      if (!p) return;
      stax_kir_index_add_term(k, &panel, stax_kir_loop_id(k, p), 1);
      body = &p->body;
    }
    emit_region_panel(m, body, region, &panel, m->nr, part);
  }
  if (region->edge_panel && m->n % m->nr) {
    /* Only a region outside the column-block loop has the partial panel. */
    stax_kir_index_t panel = stax_kir_index_constant(m->n / m->nr);
    emit_region_panel(m, block, region, &panel, (int32_t)(m->n % m->nr), part);
  }
}

/* The region over every K block in order: FIRST, the MIDDLE ones (a loop), LAST. Within a
 * K block the panels are outside the row tiles, so the KC x NR slice of B stays in L1 while
 * the region's rows pass over it, and the region's MC x KC slice of A stays in L2 for all the
 * panels. */
static void emit_region(matmul_t* m, stax_kir_block_t* block, const region_t* region) {
  if (!block) return;
  if (m->k_blocks <= 1) {
    k_part_t all = whole_k;
    all.extent = m->kdim;
    emit_region_part(m, block, region, &all);
    return;
  }
  k_part_t first = {PART_FIRST, stax_kir_index_constant(0), m->kc};
  emit_region_part(m, block, region, &first);
  if (m->k_blocks > 2) {
    stax_kir_loop_t* kb = add_loop(m, block, "kb", m->k_blocks - 2);
    if (!kb) return;
    k_part_t middle = {PART_MIDDLE, form_of(m, stax_kir_loop_id(m->k, kb), m->kc, m->kc), m->kc};
    emit_region_part(m, &kb->body, region, &middle);
  }
  int64_t last_base = (m->k_blocks - 1) * m->kc;
  k_part_t last = {PART_LAST, stax_kir_index_constant(last_base), m->kdim - last_base};
  emit_region_part(m, block, region, &last);
}

/* Every row of a column range: the row blocks (MC rows each) in a loop, then the rows left
 * over with the edge rows. */
static void emit_rows(matmul_t* m, stax_kir_block_t* block, tile_axis_t col, int64_t panels,
                      bool edge_panel) {
  if (!block) return;
  int64_t row_tiles = m->m / m->mr;
  int64_t rest = row_tiles - m->row_blocks * m->block_tiles;
  if (m->row_blocks > 0) {
    stax_kir_loop_t* ib = add_loop(m, block, "ib", m->row_blocks);
    if (!ib) return;
    region_t region = {{stax_kir_loop_id(m->k, ib), 0}, m->block_tiles, 0, col, panels,
                       edge_panel};
    emit_region(m, &ib->body, &region);
  }
  int32_t edge_rows = (int32_t)(m->m % m->mr);
  if (rest > 0 || edge_rows > 0) {
    region_t region = {{-1, m->row_blocks * m->block_tiles}, rest, edge_rows, col, panels,
                       edge_panel};
    emit_region(m, block, &region);
  }
}

/* The blocked nest (GotoBLAS's loop order, with the column blocks as the parallel loop): each
 * thread takes a contiguous range of panels and walks every row block over it, so a row
 * block's A slice is reused across that thread's panels and the edges of rows need no stage
 * of their own. The panels the column blocks leave over and the partial panel are the last
 * stage. */
static void emit_compute_blocked(matmul_t* m, stax_kir_block_t* block, bool batched) {
  stax_kir_kernel_t* k = m->k;
  int64_t panels = m->n / m->nr;
  int64_t column_blocks = batched ? 1 : m->column_blocks;
  if (column_blocks <= 1) {
    emit_rows(m, block, (tile_axis_t){-1, 0}, panels, true);
    return;
  }
  int64_t per_block = panels / column_blocks;
  stax_kir_loop_t* jc = tile_loop(m, block, "jc", column_blocks, true, 0);
  if (!jc) return;
  jc->grain = 1;
  emit_rows(m, &jc->body, (tile_axis_t){stax_kir_loop_id(k, jc), 0}, per_block, false);
  int64_t left = panels - column_blocks * per_block;
  if (left > 0 || m->n % m->nr)
    emit_rows(m, stax_kir_add_stage(k, "matmul_rest"),
              (tile_axis_t){-1, column_blocks * per_block}, left, true);
}

static void emit_compute(matmul_t* m) {
  stax_kir_kernel_t* k = m->k;
  stax_kir_block_t* block = stax_kir_add_stage(k, "matmul");
  m->batch_a = m->batch_b = m->batch_packed = m->batch_partial = stax_kir_index_constant(0);
  bool batched = false;
  for (int32_t e = 0; e < m->batch_rank && block; e++) {
    m->batch_forms[e] = stax_kir_index_constant(0);
    if (m->batch_dims[e] == 1) continue;
    stax_kir_loop_t* loop = add_loop(m, block, "batch", m->batch_dims[e]);
    if (!loop) return;
    loop->parallel = !batched;
    if (loop->parallel) {
      int64_t per_item = m->m * m->n * m->kdim;
      for (int32_t f = e + 1; f < m->batch_rank; f++) per_item *= m->batch_dims[f];
      loop->grain = task_grain(per_item);
    }
    batched = true;
    int32_t id = stax_kir_loop_id(k, loop);
    stax_kir_index_add_term(k, &m->batch_forms[e], id, 1);
    stax_kir_index_add_term(k, &m->batch_a, id, m->a_batch[e]);
    stax_kir_index_add_term(k, &m->batch_b, id, m->b_batch[e]);
    stax_kir_index_add_term(k, &m->batch_packed, id, m->packed_batch[e]);
    stax_kir_index_add_term(k, &m->batch_partial, id, m->partial_batch[e]);
    block = &loop->body;
  }
  if (!block) return;
  if (m->blocked)
    emit_compute_blocked(m, block, batched);
  else
    emit_compute_unblocked(m, block, batched);
}

/* A's micro-panels: a_panels[t][k][r] = A[t*MR + r][k] for row tile t (the edge tile holds
 * only its rows; the micro-kernel reads no others). Only when A does not vary over the batch,
 * so one copy serves every batch point. */
static void pack_a_nest(matmul_t* m, stax_kir_block_t* block, const stax_kir_index_t* tile,
                        int32_t rows) {
  stax_kir_kernel_t* k = m->k;
  stax_kir_index_t source = stax_kir_index_constant(0), target = stax_kir_index_constant(0);
  stax_kir_index_add_scaled(k, &source, tile, m->mr * m->a_row);
  stax_kir_index_add_scaled(k, &target, tile, m->mr * m->kdim);
  if (m->a_depth == 1 && m->a_row != 1) {
    /* Rows contiguous along k: read them with vectors, scatter into the micro-panel. */
    stax_kir_loop_t* r = add_loop(m, block, "ar", rows);
    stax_kir_loop_t* depth = r ? add_loop(m, &r->body, "ak", m->kdim) : NULL;
    if (!depth) return;
    depth->vector_width = m->L->vector_lanes_f32;
    int32_t rr = stax_kir_loop_id(k, r), kk = stax_kir_loop_id(k, depth);
    stax_kir_index_add_term(k, &source, rr, m->a_row);
    stax_kir_index_add_term(k, &source, kk, 1);
    stax_kir_index_add_term(k, &target, kk, m->mr);
    stax_kir_index_add_term(k, &target, rr, 1);
    stax_kir_add_store(k, &depth->body, m->a_panel_buffer, &target,
                       stax_kir_load(k, m->L->buffer[m->a], &source));
    return;
  }
  /* Columns contiguous (transposed A) or neither: one k at a time, the tile's rows as lanes. */
  stax_kir_loop_t* depth = add_loop(m, block, "ak", m->kdim);
  stax_kir_loop_t* r = depth ? add_loop(m, &depth->body, "ar", rows) : NULL;
  if (!r) return;
  r->vector_width = rows;
  int32_t rr = stax_kir_loop_id(k, r), kk = stax_kir_loop_id(k, depth);
  stax_kir_index_add_term(k, &source, rr, m->a_row);
  stax_kir_index_add_term(k, &source, kk, m->a_depth);
  stax_kir_index_add_term(k, &target, kk, m->mr);
  stax_kir_index_add_term(k, &target, rr, 1);
  stax_kir_add_store(k, &r->body, m->a_panel_buffer, &target,
                     stax_kir_load(k, m->L->buffer[m->a], &source));
}

static void emit_pack_a(matmul_t* m) {
  stax_kir_kernel_t* k = m->k;
  int64_t row_tiles = m->m / m->mr;
  int32_t edge_rows = (int32_t)(m->m % m->mr);
  int64_t total = (row_tiles + (edge_rows > 0)) * m->mr * m->kdim;
  int64_t dims[1] = {total > 0 ? total : 1};
  m->a_panel_buffer =
      stax_kir_add_buffer(k, "a_panels", STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  stax_kir_block_t* block = stax_kir_add_stage(k, "pack_a");
  if (row_tiles > 0) {
    stax_kir_loop_t* t = tile_loop(m, block, "at", row_tiles, true, 0);
    if (!t) return;
    int64_t per_tile = m->mr * m->kdim;
    int64_t grain = 4096 / (per_tile > 0 ? per_tile : 1);
    t->grain = grain < 1 ? 1 : grain;
    stax_kir_index_t tile = form_of(m, stax_kir_loop_id(k, t), 1, 0);
    pack_a_nest(m, &t->body, &tile, m->mr);
  }
  if (edge_rows > 0) {
    stax_kir_index_t tile = stax_kir_index_constant(row_tiles);
    pack_a_nest(m, row_tiles > 0 ? stax_kir_add_stage(k, "pack_a_edge") : block, &tile, edge_rows);
  }
}

/* Cache blocking, from the sizes of a typical core's caches (32 KB L1D, 512 KB - 1 MB L2):
 *   - KC: the KC x NR slice of packed B a tile streams takes half of L1 (16 KB: KC = 256 for
 *     AVX2's NR = 16, 128 for AVX-512, 512 for SSE), so it stays there while a row block's
 *     tiles pass over it. K is cut into ceil(K / KC) nearly equal blocks (K = 1000 is 4 x 250,
 *     not 3 x 256 + 232), sums carried between blocks in a partial buffer.
 *   - MC: a row block's MC x KC slice of A is about 192 KB, so it stays in L2 while the block
 *     walks every panel of its thread (32 tiles of 6 rows on AVX2).
 * When it is used (measured on Zen 3, 512 KB L2): the unblocked nest already keeps a K x NR
 * panel of B in L2 and streams A well while A's rows are contiguous, and the partial sums
 * cost a few percent, so blocking is for (a) a transposed or strided A, which is then packed
 * (1.4-2.2x), (b) a panel past half of L2 (K > 4096 on AVX2), (c) an A past 4 MB, where the
 * unblocked nest re-reads it from L3 or memory for every panel. One or two row tiles have
 * nothing to block; columns must give every thread at least two panels. */
static void choose_blocking(matmul_t* m) {
  int64_t row_tiles = m->m / m->mr, panels = m->n / m->nr;
  int64_t kc_target = 16384 / (m->nr * 4);
  m->k_blocks = m->kdim > kc_target ? (m->kdim + kc_target - 1) / kc_target : 1;
  m->kc = m->k_blocks > 1 ? (m->kdim + m->k_blocks - 1) / m->k_blocks : m->kdim;
  int64_t tiles_target = 196608 / (m->mr * (m->kc > 0 ? m->kc : 1) * 4);
  if (tiles_target < 2) tiles_target = 2;
  bool batched = false, a_batched = false;
  for (int32_t e = 0; e < m->batch_rank; e++) {
    batched |= m->batch_dims[e] > 1;
    a_batched |= m->a_batch[e] != 0;
  }
  int64_t threads = m->L->options->thread_count;
  m->column_blocks = batched || threads <= 1 ? 1 : threads;
  bool strided_a = m->a_depth != 1;
  bool long_panel = m->kdim * m->nr * 4 > 256 * 1024;
  bool large_a = m->m * m->kdim * 4 > 4 * 1024 * 1024;
  m->blocked = row_tiles >= 3 && (strided_a || long_panel || large_a) &&
               (m->column_blocks == 1 || panels >= 2 * m->column_blocks);
  if (!m->blocked) {
    m->k_blocks = 1;
    m->kc = m->kdim;
    return;
  }
  m->pack_a = strided_a && !a_batched;
  m->row_blocks = (row_tiles + tiles_target - 1) / tiles_target;
  m->block_tiles = row_tiles / m->row_blocks;
}


/* ---- rows-generic matmul ------------------------------------------------------------------
 * M is the kernel's row count R, a run-time parameter (kernel_ir.h): A is [R, K] row-major
 * (its row stride fixed), B is not a rows value (a weight, usually a constant), the output
 * and any rows value of the epilogue are [R, N]. The full row tiles run in a loop of
 * floor(R / MR) iterations; the R % MR rows left over run as 4-row tiles (h = 3 where MR is
 * not a multiple of 4) and one more small tile placed at
 * rows R - h .. R - 1, overlapping the tile before it. The overlapped rows are computed
 * twice, from the same inputs in the same order, so they get the same values, and the tail
 * needs no code of its own (no tile of each possible height, no recompiling). That takes
 * R >= h; one to h - 1 rows (a token or three) run one-row tiles (stage run conditions pick
 * the stages by R). The nest is the
 * unblocked one with B packed (once per weight when B is a constant): panels in parallel
 * when there are enough for the threads, else row tiles. */
static void emit_rows_tiles(matmul_t* m, stax_kir_block_t* block, const stax_kir_index_t* row_base,
                            bool all_panels, int64_t panels, int32_t edge_lanes,
                            const k_part_t* part) {
  if (all_panels && panels > 0) {
    /* One-row tiles take ROW_TILE_SPAN panels at once (emit_tile_span), the panels left
     * over one at a time. */
    int32_t span = m->mr == 1 && part->kind == PART_WHOLE ? ROW_TILE_SPAN : 1;
    int64_t spans = panels / span;
    emit_panel_loop(m, block, "p", row_base, 0, spans, m->mr, span, false, part);
    emit_panel_loop(m, block, "pr", row_base, spans * span, panels % span, m->mr, 1, false, part);
  }
  if (edge_lanes) {
    stax_kir_index_t panel = stax_kir_index_constant(panels);
    stax_kir_index_t col_base = stax_kir_index_constant(panels * m->nr);
    emit_tile(m, block, row_base, &col_base, &panel, m->mr, edge_lanes, part);
  }
}

/* A stage for rows_from..rows_to rows: floor(R / h) tiles of h rows, then one overlapping
 * tile at R - h for the rest (h > 1), each against every panel; serial. */
static void emit_rows_serial(matmul_t* m, int32_t h, int64_t rows_from, int64_t rows_to,
                             int64_t panels, int32_t edge_lanes, const k_part_t* part) {
  stax_kir_kernel_t* k = m->k;
  char name[32];
  snprintf(name, sizeof(name), "matmul_rows%d", (int)h);
  stax_kir_block_t* block = stax_kir_add_stage(k, name);
  if (!block) return;
  k->stages[k->stage_count - 1]->run_min_rows = rows_from;
  k->stages[k->stage_count - 1]->run_max_rows = rows_to;
  int32_t saved_mr = m->mr;
  m->mr = h; /* emit_rows_tiles makes tiles of MR rows */
  snprintf(name, sizeof(name), "tiles%d", (int)h);
  int32_t tiles = h == 1 ? 0 : stax_kir_add_param(k, name, 1, 0, h, 0, 0, 0, 0);
  stax_kir_loop_t* i = add_loop(m, block, "i", 0);
  if (i && tiles >= 0) {
    i->extent_param = tiles;
    stax_kir_index_t row_base = form_of(m, stax_kir_loop_id(k, i), h, 0);
    emit_rows_tiles(m, &i->body, &row_base, true, panels, edge_lanes, part);
  }
  if (h > 1) {
    snprintf(name, sizeof(name), "last_tile%d", (int)h);
    int32_t overlap = stax_kir_add_param(k, name, 1, h - 1, h, -1, 0, h, 0);
    snprintf(name, sizeof(name), "last_row%d", (int)h);
    int32_t last_row = stax_kir_add_param(k, name, 1, 0, 1, 0, 0, 0, -h);
    stax_kir_loop_t* o = overlap >= 0 && last_row >= 0 ? add_loop(m, block, "o", 0) : NULL;
    if (o) {
      o->extent_param = overlap;
      stax_kir_index_t last = stax_kir_index_constant(0);
      stax_kir_index_add_param(k, &last, last_row, 1);
      emit_rows_tiles(m, &o->body, &last, true, panels, edge_lanes, part);
    }
  }
  m->mr = saved_mr;
}

/* The rows after the whole MR-row tiles (R >= MR; r = R % MR of them): tiles of h = 4 rows,
 * then one 4-row tile overlapping at R - 4 when 4 does not divide r. Fewer rows computed
 * twice than with one overlapping MR-row tile (at most 3 instead of MR - 1: at R = 40 on
 * AVX-512, 40 rows instead of 48). Four rows, not fewer, because a tile needs 2 x 4 = 8
 * independent accumulators to cover the FMA latency on two pipes: where MR = 6 (AVX2, SSE)
 * an earlier 3-row rest tile ran at about 3/4 of the FMA rate, which made the shape-generic
 * FFN of a BERT layer 16-20% slower than its exact kernel at 8..32 tokens.
 *   - 4 divides MR (AVX-512: 12): floor(r / 4) tiles, and the overlap iff r % 4 != 0.
 *   - MR = 6: at most one 4-row tile, [r >= 4] = floor((R + 2) / 6) - floor(R / 6), and the
 *     overlap iff r is 1, 2, 3 or 5: floor((R + 1) / 2) - floor(R / 3) - floor((R + 2) / 6)
 *     (three terms of the quasi-linear form, kernel_ir.h; no two-term form exists, and two
 *     overlap loops would compile the 4-row tile a third time). */
enum { REST_TILE_ROWS = 4 };

typedef struct rest_rows_t {
  int32_t count;    /* parameter: the 4-row tiles from base on */
  int32_t base;     /* parameter: MR * floor(R / MR) */
  int32_t overlap;  /* parameter: 1 when an overlapping tile at R - 4 is needed */
  int32_t last_row; /* parameter: R - 4 */
} rest_rows_t;

static bool rest_rows_params(matmul_t* m, rest_rows_t* r) {
  stax_kir_kernel_t* k = m->k;
  int32_t mr = m->mr;
  if (mr % 4 == 0) {
    r->count = stax_kir_add_param(k, "rest_tiles", 1, 0, 4, -(mr / 4), 0, mr, 0);
    r->overlap = stax_kir_add_param(k, "last_tile", 1, 3, 4, -1, 0, 4, 0);
  } else {
    /* MR = 6 (stax_jit_matmul_tile_rows gives 6 or 12): see above. */
    r->count = stax_kir_add_param(k, "rest_tiles", 1, 2, 6, -1, 0, 6, 0);
    r->overlap = stax_kir_add_param(k, "last_tile", 1, 1, 2, -1, 0, 3, 0);
    if (!stax_kir_param_add_term(k, r->overlap, -1, 2, 6)) return false; /* failed: in the kernel */
  }
  r->base = stax_kir_add_param(k, "rest_row", mr, 0, mr, 0, 0, 0, 0);
  r->last_row = stax_kir_add_param(k, "last_row", 1, 0, 1, 0, 0, 0, -REST_TILE_ROWS);
  return r->count >= 0 && r->base >= 0 && r->overlap >= 0 && r->last_row >= 0;
}

/* The rest rows against one panel (col_base, panel given), or against every panel
 * (col_base NULL: the `panels` whole ones when `whole_panels`, and the edge one, which
 * follows them: its columns start at panels * NR either way). */
static void emit_rest_rows(matmul_t* m, stax_kir_block_t* block, const rest_rows_t* r,
                           bool every_panel, const stax_kir_index_t* col_base,
                           const stax_kir_index_t* panel, bool whole_panels, int64_t panels,
                           int32_t edge_lanes, const k_part_t* part) {
  stax_kir_kernel_t* k = m->k;
  stax_kir_loop_t* q = add_loop(m, block, "q", 0);
  stax_kir_loop_t* o = q ? add_loop(m, block, "o", 0) : NULL;
  if (!o) return;
  q->extent_param = r->count;
  o->extent_param = r->overlap;
  stax_kir_index_t row = form_of(m, stax_kir_loop_id(k, q), REST_TILE_ROWS, 0);
  stax_kir_index_add_param(k, &row, r->base, 1);
  stax_kir_index_t last = stax_kir_index_constant(0);
  stax_kir_index_add_param(k, &last, r->last_row, 1);
  if (!every_panel) {
    emit_tile(m, &q->body, &row, col_base, panel, REST_TILE_ROWS, m->nr, part);
    emit_tile(m, &o->body, &last, col_base, panel, REST_TILE_ROWS, m->nr, part);
    return;
  }
  int32_t saved_mr = m->mr;
  m->mr = REST_TILE_ROWS; /* emit_rows_tiles makes tiles of MR rows */
  emit_rows_tiles(m, &q->body, &row, whole_panels && panels > 0, panels, edge_lanes, part);
  emit_rows_tiles(m, &o->body, &last, whole_panels && panels > 0, panels, edge_lanes, part);
  m->mr = saved_mr;
}

/* Fewer rows than the rest tiles (1 to REST_TILE_ROWS - 1: decoding a token or three) over a
 * weight large enough for two tasks: panels outer in spans, split over the threads, rows
 * inside, one-row tiles; then the panels left over and the partial panel, serial, in a stage
 * of their own (a parallel loop is alone in its stage). Reading B dominates such a product,
 * and two cores read it faster than one (768 x 3072 at M = 1 on Zen 3: 37 GFLOP/s on one
 * thread's serial stage, ~50 split). */
static void emit_rows_split(matmul_t* m, int64_t panels, int32_t edge_lanes, const k_part_t* part) {
  stax_kir_kernel_t* k = m->k;
  int64_t spans = panels / ROW_TILE_SPAN, rest = panels % ROW_TILE_SPAN;
  stax_kir_block_t* block = stax_kir_add_stage(k, "matmul_rows1");
  if (!block) return;
  k->stages[k->stage_count - 1]->run_max_rows = REST_TILE_ROWS - 1;
  int32_t saved_mr = m->mr;
  m->mr = 1;
  stax_kir_loop_t* p = tile_loop(m, block, "p", spans, true, ROW_TILE_SPAN * m->nr * m->kdim);
  if (p) {
    stax_kir_loop_t* i = add_loop(m, &p->body, "i", 0);
    if (i) {
      i->extent_param = 0; /* R */
      stax_kir_index_t row_base = form_of(m, stax_kir_loop_id(k, i), 1, 0);
      stax_kir_index_t panel = form_of(m, stax_kir_loop_id(k, p), ROW_TILE_SPAN, 0);
      stax_kir_index_t col_base = form_of(m, stax_kir_loop_id(k, p), ROW_TILE_SPAN * m->nr, 0);
      emit_tile_span(m, &i->body, &row_base, &col_base, &panel, 1, m->nr, part, ROW_TILE_SPAN);
    }
  }
  if (rest || edge_lanes) {
    stax_kir_block_t* tail = stax_kir_add_stage(k, "matmul_rows1_rest");
    if (tail) {
      k->stages[k->stage_count - 1]->run_max_rows = REST_TILE_ROWS - 1;
      stax_kir_loop_t* i = add_loop(m, tail, "i", 0);
      if (i) {
        i->extent_param = 0;
        stax_kir_index_t row_base = form_of(m, stax_kir_loop_id(k, i), 1, 0);
        emit_panel_loop(m, &i->body, "pr", &row_base, spans * ROW_TILE_SPAN, rest, 1, 1, false,
                        part);
        if (edge_lanes) {
          stax_kir_index_t panel = stax_kir_index_constant(panels);
          stax_kir_index_t col_base = stax_kir_index_constant(panels * m->nr);
          emit_tile(m, &i->body, &row_base, &col_base, &panel, 1, edge_lanes, part);
        }
      }
    }
  }
  m->mr = saved_mr;
}

static void emit_compute_rows_generic(matmul_t* m) {
  lower_t* L = m->L;
  stax_kir_kernel_t* k = m->k;
  int64_t panels = m->n / m->nr;
  int32_t edge_lanes = (int32_t)(m->n % m->nr);
  k_part_t all = whole_k;
  all.extent = m->kdim;
  m->batch_a = m->batch_b = m->batch_packed = m->batch_partial = stax_kir_index_constant(0);
  int32_t tiles = stax_kir_add_param(k, "row_tiles", 1, 0, m->mr, 0, 0, 0, 0);
  rest_rows_t rest;
  if (tiles < 0 || !rest_rows_params(m, &rest)) return;
  /* Run on the calling thread while the whole product is under two tasks' work. */
  int64_t per_row = m->n * m->kdim > 0 ? m->n * m->kdim : 1;
  int64_t min_rows = 2 * MATMUL_TASK_WORK / per_row + 1;
  int64_t threads = L->options->thread_count;
  bool panels_outer = panels >= 2 * threads || threads <= 1;
  stax_kir_block_t* block = stax_kir_add_stage(k, "matmul");
  if (!block) return;
  k->stages[k->stage_count - 1]->parallel_min_rows = min_rows;
  k->stages[k->stage_count - 1]->run_min_rows = REST_TILE_ROWS;
  if (panels_outer) {
    /* Every row against one panel per task: the panel stays in cache over the rows. */
    if (panels > 0) {
      stax_kir_loop_t* p = tile_loop(m, block, "p", panels, threads > 1, 0);
      if (!p) return;
      p->grain = 1;
      int32_t pid = stax_kir_loop_id(k, p);
      stax_kir_index_t panel = form_of(m, pid, 1, 0);
      stax_kir_index_t col_base = form_of(m, pid, m->nr, 0);
      stax_kir_loop_t* i = add_loop(m, &p->body, "i", 0);
      if (!i) return;
      i->extent_param = tiles;
      stax_kir_index_t row_base = form_of(m, stax_kir_loop_id(k, i), m->mr, 0);
      emit_tile(m, &i->body, &row_base, &col_base, &panel, m->mr, m->nr, &all);
      emit_rest_rows(m, &p->body, &rest, false, &col_base, &panel, true, panels, edge_lanes,
                     &all);
    }
    if (edge_lanes) {
      stax_kir_block_t* edge = stax_kir_add_stage(k, "matmul_edge");
      if (!edge) return;
      k->stages[k->stage_count - 1]->parallel_min_rows = min_rows;
      k->stages[k->stage_count - 1]->run_min_rows = REST_TILE_ROWS;
      stax_kir_loop_t* i = add_loop(m, edge, "i", 0);
      if (!i) return;
      i->extent_param = tiles;
      i->parallel = threads > 1;
      i->grain = task_grain(m->mr * edge_lanes * m->kdim);
      stax_kir_index_t row_base = form_of(m, stax_kir_loop_id(k, i), m->mr, 0);
      emit_rows_tiles(m, &i->body, &row_base, false, panels, edge_lanes, &all);
    }
  } else {
    /* Few panels: row tiles in parallel, each over every panel. */
    stax_kir_loop_t* i = add_loop(m, block, "i", 0);
    if (!i) return;
    i->extent_param = tiles;
    i->parallel = true;
    i->grain = task_grain(m->mr * m->n * m->kdim);
    stax_kir_index_t row_base = form_of(m, stax_kir_loop_id(k, i), m->mr, 0);
    emit_rows_tiles(m, &i->body, &row_base, true, panels, edge_lanes, &all);
  }
  /* The overlapping last tile of the edge panel (panels outer) or of every panel. */
  if (!panels_outer || edge_lanes) {
    stax_kir_block_t* last_block = stax_kir_add_stage(k, "matmul_last");
    if (!last_block) return;
    k->stages[k->stage_count - 1]->run_min_rows = REST_TILE_ROWS;
    /* Panels outer: the whole panels' rest rows ran inside the panel loop; only the edge
     * panel's are left, at column panels * NR (not at 0: that left them unwritten). */
    emit_rest_rows(m, last_block, &rest, true, NULL, NULL, !panels_outer, panels, edge_lanes,
                   &all);
  }
  /* Fewer rows than one small tile (R = 1 when decoding one token): one-row tiles, on the
   * calling thread. From h rows on the stages above cover every R (no whole MR tile below
   * MR rows, the small tiles do it all), so no stage of their own is needed for R < MR: one
   * tile variant fewer to compile. */
  if (threads > 1 && m->n * m->kdim >= 2 * MATMUL_TASK_WORK && panels >= 2 * ROW_TILE_SPAN)
    emit_rows_split(m, panels, edge_lanes, &all);
  else
    emit_rows_serial(m, 1, 0, REST_TILE_ROWS - 1, panels, edge_lanes, &all);
}

/* The checks a rows-generic matmul needs (see above); UNIMPLEMENTED otherwise. */
static stax_status_t check_rows_generic(matmul_t* m) {
  lower_t* L = m->L;
  const stax_jit_value_t* a = lower_value(L, m->a);
  const stax_jit_value_t* b = lower_value(L, m->b);
  const stax_jit_value_t* out = lower_value(L, m->out);
  if (!a->rows || a->rank != 2 || b->rows || !out->rows || out->rank != 2 || m->batch_rank != 0)
    return lower_refuse(L, "rows-generic matmul needs A [rows, K], a B without rows and a "
                           "[rows, N] output");
  if (m->a_depth != 1 || m->a_row != a->strides[0])
    return lower_refuse(L, "rows-generic matmul needs a row-major A");
  for (int32_t v = 0; v < L->group->value_count; v++) {
    if ((v == m->a || v == m->b) && L->uses[v] == 1) continue;
    bool used = L->uses[v] > 0 || L->producer[v] >= 0;
    if (used && !lower_rows_value_fits(L, v, L->rank))
      return lower_refuse(L, "value '%s' does not line up with the rows", lower_value_name(L, v));
  }
  for (int32_t i = 0; i < L->group->output_count; i++)
    if (!lower_value(L, L->group->outputs[i])->rows)
      return lower_refuse(L, "output '%s' is not a rows value",
                          lower_value_name(L, L->group->outputs[i]));
  return STAX_OK;
}

stax_status_t lower_matmul_group(lower_t* L, int32_t node) {
  matmul_t m;
  memset(&m, 0, sizeof(m));
  m.L = L;
  m.k = L->kernel;
  m.node = node;
  STAX_RETURN_IF_ERROR(analyze(&m));
  /* The epilogue is emitted once per tile variant (and K block): keep its math out of line. */
  m.k->compact_math = true;
  int32_t lanes = L->vector_lanes_f32;
  m.nr = 2 * lanes;
  m.mr = stax_jit_matmul_tile_rows(lanes);
  m.panels = (m.n + m.nr - 1) / m.nr;
  if (L->group->rows_generic) {
    STAX_RETURN_IF_ERROR(check_rows_generic(&m));
    if (m.n == 0) {
      stax_kir_add_stage(m.k, "empty");
      return stax_kir_kernel_status(m.k);
    }
    m.packed = true;
    emit_pack(&m);
    emit_compute_rows_generic(&m);
    return stax_kir_kernel_status(m.k);
  }
  if (m.m == 0 || m.n == 0) {
    stax_kir_add_stage(m.k, "empty");
    return stax_kir_kernel_status(m.k);
  }
  choose_blocking(&m);
  /* A constant B is packed whatever M: the host packs it once per weight and keeps the
   * panels (jit.c), so later runs skip the copy, and every M (every ISA's tile height) takes
   * the same nest over the same panels. */
  m.packed = m.m > m.mr || m.b_col != 1 || lower_value(L, m.b)->constant != NULL;
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
  /* A is packed when the micro-kernel's reads of it would be strided (a transposed or strided
   * A: every k a new cache line for every tile), as long as one copy serves all batch points.
   * A row-major A is not: measured, its copy costs more than the contiguous reads gain. */
  if (m.pack_a) emit_pack_a(&m);
  if (m.k_blocks > 1) {
    int64_t after = m.panels * m.m * m.nr;
    for (int32_t e = m.batch_rank - 1; e >= 0; e--) {
      m.partial_batch[e] = after;
      after *= m.batch_dims[e];
    }
    int64_t dims[1] = {after};
    m.partial_buffer = stax_kir_add_buffer(m.k, "partial", STAX_KIR_BUFFER_SCRATCH,
                                           STAX_DTYPE_FLOAT32, 1, dims, NULL);
  }
  emit_compute(&m);
  return stax_kir_kernel_status(m.k);
}

/* MR rows of two-vector accumulators plus the operands fill the register file (see the file
 * comment): 12 x 2 of AVX-512's 32 vectors, 6 x 2 of AVX2's (and SSE's) 16. */
int32_t stax_jit_matmul_tile_rows(int32_t vector_lanes_f32) {
  return vector_lanes_f32 >= 16 ? 12 : 6;
}
