/* Elementwise groups: every output has the iteration shape (the group's broadcast shape) and
 * every value broadcasts into it. The loop nest walks that shape with
 *   - dims of extent 1 dropped (their index form is 0),
 *   - neighbouring dims merged when every buffer's strides agree (stride[outer] ==
 *     stride[inner] * extent[inner]): the merged loop counts through both and only the inner
 *     dim keeps a form, which gives the same addresses for every buffer; a contiguous tensor of
 *     any rank becomes one long loop,
 *   - the innermost loop vectorized (native width, unrolled twice when long),
 *   - the outermost loop parallel when there is enough work to split.
 * Each output is one store of its expression; intermediate values are never materialized.
 *
 * Symbolic groups (lower_elementwise_symbolic: values with open dims of their own that do not
 * walk as rows, `x[B, S, H] + pos[S, H]`, a mask `[B, 1, 1, S]` over `[B, H, S, S]`): the
 * open dims of the shape are parameters read from the arguments, open strides too; every dim
 * is a loop of its own (whether two merge depends on the sizes), the innermost vectorized
 * unless a value's stride along it is open (lanes need a constant step; the backend peels the
 * tail of an open extent), and the outermost loop is the largest fixed outer dim when there
 * is one (the example's sizes say nothing about a call's), else the first. */
#include "jit/lower_internal.h"

/* Fewest elements worth a parallel split, and the work one task should get. */
#define PARALLEL_MIN_ELEMENTS 65536
#define PARALLEL_TASK_ELEMENTS 32768

/* A buffer's stride along iteration dim e (0 where it broadcasts). */
static int64_t effective_stride(const lower_t* L, int32_t value, int32_t e) {
  const stax_jit_value_t* v = lower_value(L, value);
  int32_t d = e - (L->rank - v->rank);
  if (d < 0 || v->dims[d] == 1) return 0;
  return v->strides[d];
}

/* True when dims outer and inner (inner > outer, everything between of extent 1) can be walked
 * as one loop by every buffer. */
static bool mergeable(const lower_t* L, int32_t outer, int32_t inner) {
  const stax_jit_group_t* group = L->group;
  for (int32_t i = 0; i < group->input_count + group->output_count; i++) {
    int32_t v = i < group->input_count ? group->inputs[i] : group->outputs[i - group->input_count];
    if (effective_stride(L, v, outer) != effective_stride(L, v, inner) * L->dims[inner])
      return false;
  }
  return true;
}

stax_status_t lower_elementwise_group(lower_t* L) {
  const stax_jit_group_t* group = L->group;
  stax_kir_kernel_t* k = L->kernel;
  const stax_jit_value_t* first = lower_value(L, group->outputs[0]);
  L->rank = first->rank;
  int64_t total = 1;
  for (int32_t e = 0; e < L->rank; e++) {
    L->dims[e] = first->dims[e];
    total *= first->dims[e];
  }
  for (int32_t i = 0; i < group->output_count; i++) {
    const stax_jit_value_t* out = lower_value(L, group->outputs[i]);
    bool same = out->rank == L->rank;
    for (int32_t e = 0; same && e < L->rank; e++) same = out->dims[e] == L->dims[e];
    if (!same)
      return lower_refuse(L, "outputs of different shapes ('%s')",
                          lower_value_name(L, group->outputs[i]));
  }
  bool generic = group->rows_generic;
  for (int32_t v = 0; v < group->value_count; v++) {
    bool used = L->uses[v] > 0 || L->producer[v] >= 0;
    if (used && !lower_value_fits(L, v, 0, L->rank))
      return lower_refuse(L, "value '%s' does not broadcast into the output shape",
                          lower_value_name(L, v));
    if (used && !lower_rows_value_fits(L, v, L->rank))
      return lower_refuse(L, "value '%s' does not line up with the rows", lower_value_name(L, v));
  }
  for (int32_t i = 0; generic && i < group->output_count; i++)
    if (!lower_value(L, group->outputs[i])->rows)
      return lower_refuse(L, "output '%s' is not a rows value",
                          lower_value_name(L, group->outputs[i]));
  k->in_place_safe = true;

  stax_kir_block_t* block = stax_kir_add_stage(k, "elementwise");
  if (!block) return stax_kir_kernel_status(k);
  if (total == 0) return STAX_OK; /* nothing to compute */

  /* Group the dims of extent > 1 into loops (outermost first). */
  int32_t loop_inner[STAX_MAX_RANK]; /* innermost iteration dim of each loop */
  int64_t loop_extent[STAX_MAX_RANK];
  int32_t loops = 0;
  for (int32_t e = 0; e < L->rank; e++) {
    L->forms[e] = stax_kir_index_constant(0);
    if (L->dims[e] == 1) continue;
    /* Rows-generic: the row dim is a loop of its own, whose extent is R at run time. */
    bool row_dim = generic && loops == 1 && loop_inner[0] == 0;
    if (loops > 0 && !row_dim && mergeable(L, loop_inner[loops - 1], e)) {
      loop_inner[loops - 1] = e;
      loop_extent[loops - 1] *= L->dims[e];
    } else {
      loop_inner[loops] = e;
      loop_extent[loops] = L->dims[e];
      loops++;
    }
  }

  int32_t width = lower_vector_width(L);
  bool parallel = total >= PARALLEL_MIN_ELEMENTS && L->options->thread_count > 1 && loops > 0;
  if (generic) {
    /* Split over the rows whenever the pool has threads; the host runs it on the calling
     * thread while R rows are too little work (parallel_min_rows). */
    parallel = L->options->thread_count > 1;
    int64_t per_row = total / L->dims[0];
    k->stages[k->stage_count - 1]->parallel_min_rows =
        per_row > 0 ? (PARALLEL_MIN_ELEMENTS + per_row - 1) / per_row : 0;
  }
  static const char* const names[STAX_MAX_RANK] = {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"};
  for (int32_t l = 0; l < loops; l++) {
    stax_kir_loop_t* loop = stax_kir_add_loop(k, block, names[l], loop_extent[l]);
    if (!loop) return stax_kir_kernel_status(k);
    int32_t id = stax_kir_loop_id(k, loop);
    if (generic && l == 0) loop->extent_param = 0; /* R */
    stax_kir_index_add_term(k, &L->forms[loop_inner[l]], id, 1);
    bool innermost = l == loops - 1;
    if (innermost) {
      loop->vector_width = width;
      loop->unroll = loop_extent[l] >= 4 * width ? 2 : 1;
    }
    if (l == 0 && parallel) {
      loop->parallel = true;
      int64_t per_iteration = total / loop_extent[0];
      int64_t grain = (PARALLEL_TASK_ELEMENTS + per_iteration - 1) / per_iteration;
      /* A vector loop split at multiples of its width keeps every task on whole vectors. */
      if (innermost) grain = (grain + width - 1) / width * width;
      loop->grain = grain < 1 ? 1 : grain;
    }
    block = &loop->body;
  }
  lower_new_point(L);
  for (int32_t i = 0; i < group->output_count; i++)
    lower_store_value(L, block, group->outputs[i], LOWER_FULL, L->rank);
  return stax_kir_kernel_status(k);
}

stax_status_t lower_elementwise_symbolic(lower_t* L) {
  const stax_jit_group_t* group = L->group;
  stax_kir_kernel_t* k = L->kernel;
  const stax_jit_value_t* first = lower_value(L, group->outputs[0]);
  L->rank = first->rank;
  for (int32_t e = 0; e < L->rank; e++) L->dims[e] = first->dims[e];
  for (int32_t i = 0; i < group->output_count; i++) {
    const stax_jit_value_t* out = lower_value(L, group->outputs[i]);
    bool same = out->rank == L->rank && out->open_dims == first->open_dims;
    for (int32_t e = 0; same && e < L->rank; e++) same = out->dims[e] == L->dims[e];
    if (!same)
      return lower_refuse(L, "outputs of different shapes ('%s')",
                          lower_value_name(L, group->outputs[i]));
  }
  for (int32_t v = 0; v < group->value_count; v++) {
    bool used = L->uses[v] > 0 || L->producer[v] >= 0;
    if (used && !lower_value_fits(L, v, 0, L->rank))
      return lower_refuse(L, "value '%s' does not broadcast into the output shape",
                          lower_value_name(L, v));
  }
  STAX_RETURN_IF_ERROR(lower_symbolic_space(L, L->rank, NULL, 0));
  k->in_place_safe = true;
  stax_kir_block_t* block = stax_kir_add_stage(k, "elementwise");
  if (!block) return stax_kir_kernel_status(k);
  int32_t inner = L->rank - 1;
  /* Lanes need a constant step along the innermost dim in every buffer. */
  bool vector = inner >= 0;
  for (int32_t v = 0; vector && v < group->value_count; v++) {
    const stax_jit_value_t* value = lower_value(L, v);
    int32_t buffer = L->buffer[v];
    if (buffer < 0 || value->rank == 0 || !(L->uses[v] > 0 || L->producer[v] >= 0)) continue;
    vector = k->buffers[buffer]->stride_params[value->rank - 1] < 0;
  }
  int32_t order[STAX_MAX_RANK];
  int32_t count = inner > 0 ? lower_symbolic_order(L, inner, order) : 0;
  if (inner >= 0) order[count++] = inner;
  bool first_loop = true;
  for (int32_t i = 0; i < count; i++) {
    int32_t d = order[i];
    L->forms[d] = stax_kir_index_constant(0);
    bool open = L->dim_params[d] >= 0;
    if (L->dims[d] == 1 && !open) continue;
    char name[16];
    snprintf(name, sizeof(name), "e%d", (int)d);
    stax_kir_loop_t* loop = stax_kir_add_loop(k, block, name, open ? 0 : L->dims[d]);
    if (!loop) return stax_kir_kernel_status(k);
    if (open) loop->extent_param = L->dim_params[d];
    if (d == inner && vector) {
      loop->vector_width = lower_vector_width(L);
      loop->unroll = open || L->dims[d] >= 4 * loop->vector_width ? 2 : 1;
    }
    if (first_loop && d != inner && L->options->thread_count > 1) {
      loop->parallel = true;
      loop->grain = 1;
    }
    first_loop = false;
    stax_kir_index_add_term(k, &L->forms[d], stax_kir_loop_id(k, loop), 1);
    block = &loop->body;
  }
  lower_new_point(L);
  for (int32_t i = 0; i < group->output_count; i++)
    lower_store_value(L, block, group->outputs[i], LOWER_FULL, L->rank);
  return stax_kir_kernel_status(k);
}
