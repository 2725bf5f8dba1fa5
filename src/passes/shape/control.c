/* Shape functions for control flow: If and Loop. Their subgraphs (GRAPH attributes) share the
 * parent's shape context and were inferred when their nodes were added, so these functions
 * only read the subgraphs' inputs and outputs.
 *
 * If: with a constant condition the taken branch's outputs are the node's (contents and
 * constants included). Otherwise the branches must agree on dtype and rank; a dim provably
 * equal in both is kept, and a dim that differs becomes a fresh symbol covering both ranges.
 *
 * Loop: a loop-carried dim is *stable* when the body's output dim equals the initial dim or
 * the body's own input dim; then it holds the initial value at every iteration, so the body
 * input dim is unified with the initial dim and the final value keeps it. Any other carried
 * dim changes per iteration and the final value gets a fresh symbol. Scan outputs gain a
 * leading dim: the trip count M when it is known and the loop cannot stop early (no
 * condition input, or a constant true one the body keeps true), else a fresh symbol in
 * [0, M]. A scan dim that mentions a symbol that only exists inside the body
 * (one of a changing carried dim, or one made by a data-dependent op in the body) also becomes
 * fresh, since it may differ between iterations and means nothing outside. */
#include <stdio.h>

#include "passes/shape/shape_operands.h"

/* The GRAPH attribute `name`, required. */
static stax_status_t read_subgraph(stax_shape_infer_t* ic, const char* name,
                                   stax_graph_t** out_graph) {
  *out_graph = NULL;
  const stax_node_attr_t* attr = stax_node_attr_find(ic->node, name);
  if (!attr || attr->type != STAX_ATTR_GRAPH || !attr->value.graph) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute '%s' (a graph) is required",
                            name);
  }
  *out_graph = attr->value.graph;
  return STAX_OK;
}

/* A fresh symbol covering the ranges of dims a and b. */
static stax_status_t fresh_covering(stax_shape_infer_t* ic, int32_t output, int32_t dim,
                                    const stax_dim_t* a, const stax_dim_t* b,
                                    const stax_dim_t** out_dim) {
  int64_t a_low = 0, a_high = 0, b_low = 0, b_high = 0;
  stax_dim_bounds(ic->shape, a, &a_low, &a_high);
  stax_dim_bounds(ic->shape, b, &b_low, &b_high);
  int64_t low = a_low < b_low ? a_low : b_low;
  int64_t high = a_high > b_high ? a_high : b_high;
  return stax_shape_fresh_dim(ic, output, dim, low < 0 ? 0 : low, high, out_dim);
}

/* ---- If ---------------------------------------------------------------------------------- */

/* Output i := a branch value, with its contents and constant. */
static stax_status_t copy_branch_output(stax_shape_infer_t* ic, int32_t i,
                                        const stax_value_t* value) {
  if (value->is_sequence)
    return stax_infer_set_sequence_output(ic, i, value->dtype, value->elem_rank,
                                          (const stax_dim_t* const*)value->elem_dims);
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, i, value->dtype, value->rank,
                                             (const stax_dim_t* const*)value->dims));
  if (value->constant) stax_infer_set_constant(ic, i, value->constant);
  if (value->content_count >= 0 && value->content) {
    return stax_infer_set_content(ic, i, value->content_count,
                                  (const stax_dim_t* const*)value->content);
  }
  return STAX_OK;
}

/* Output i from two branch values that may differ. */
static stax_status_t merge_branch_outputs(stax_shape_infer_t* ic, int32_t i,
                                          const stax_value_t* then_value,
                                          const stax_value_t* else_value) {
  if (then_value->dtype != else_value->dtype) {
    return stax_infer_error(ic, STAX_DTYPE_MISMATCH,
                            "output %d: then_branch gives %s '%s' but else_branch gives %s '%s'",
                            i, stax_dtype_name(then_value->dtype), then_value->name,
                            stax_dtype_name(else_value->dtype), else_value->name);
  }
  if (then_value->is_sequence != else_value->is_sequence) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "output %d: then_branch gives a %s ('%s') but else_branch gives a "
                            "%s ('%s')",
                            i, then_value->is_sequence ? "sequence" : "tensor", then_value->name,
                            else_value->is_sequence ? "sequence" : "tensor", else_value->name);
  }
  if (then_value->is_sequence) {
    /* Only constant element dims survive: a symbol may be bound in one branch alone. */
    int32_t rank = 0;
    const stax_dim_t* dims[STAX_MAX_RANK];
    stax_shape_merge_elements(ic->shape, then_value->elem_rank,
                              (const stax_dim_t* const*)then_value->elem_dims,
                              else_value->elem_rank,
                              (const stax_dim_t* const*)else_value->elem_dims, true, &rank, dims);
    return stax_infer_set_sequence_output(ic, i, then_value->dtype, rank, dims);
  }
  if (then_value->rank != else_value->rank) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "output %d: then_branch gives rank %d ('%s') but else_branch gives "
                            "rank %d ('%s'); ranks must be static",
                            i, then_value->rank, then_value->name, else_value->rank,
                            else_value->name);
  }
  if (then_value->rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED, "output %d has rank %d; at most %d", i,
                            then_value->rank, STAX_MAX_RANK);
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < then_value->rank; k++) {
    const stax_dim_t* a = then_value->dims[k];
    const stax_dim_t* b = else_value->dims[k];
    if (stax_dim_known_equal(ic->shape, a, b)) {
      dims[k] = a;
    } else {
      STAX_RETURN_IF_ERROR(fresh_covering(ic, i, k, a, b, &dims[k]));
    }
  }
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, i, then_value->dtype, then_value->rank, dims));
  /* Contents survive only where both branches agree entry by entry. */
  if (then_value->content_count < 0 || then_value->content_count != else_value->content_count ||
      !then_value->content || !else_value->content) {
    return STAX_OK;
  }
  for (int32_t k = 0; k < then_value->content_count; k++) {
    if (!stax_dim_known_equal(ic->shape, then_value->content[k], else_value->content[k])) {
      return STAX_OK;
    }
  }
  return stax_infer_set_content(ic, i, then_value->content_count,
                                (const stax_dim_t* const*)then_value->content);
}

stax_status_t stax_shape_if(stax_shape_infer_t* ic) {
  stax_shape_operand_t condition;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &condition));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &condition, STAX_DTYPES_BOOL, "bool"));
  STAX_RETURN_IF_ERROR(stax_shape_require_scalar(ic, &condition, "cond"));
  stax_graph_t* branches[2];
  static const char* const branch_names[2] = {"then_branch", "else_branch"};
  int32_t output_count = ic->node->output_count;
  for (int32_t b = 0; b < 2; b++) {
    STAX_RETURN_IF_ERROR(read_subgraph(ic, branch_names[b], &branches[b]));
    int32_t count = stax_graph_output_count(branches[b]);
    if (count != output_count) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "%s has %d outputs but the node has %d", branch_names[b], count,
                              output_count);
    }
  }
  const stax_value_t* condition_value = stax_infer_input(ic, 0);
  int64_t taken = -1;
  if (condition_value->constant) {
    int64_t true_count = 0;
    STAX_RETURN_IF_ERROR(stax_shape_count_nonzero(ic, condition_value->constant, 1, &true_count));
    taken = true_count > 0 ? 0 : 1;
  }
  for (int32_t i = 0; i < output_count; i++) {
    const stax_value_t* outputs[2];
    for (int32_t b = 0; b < 2; b++) {
      outputs[b] = stax_graph_value(branches[b], stax_graph_output(branches[b], i));
    }
    if (taken >= 0) {
      STAX_RETURN_IF_ERROR(copy_branch_output(ic, i, outputs[taken]));
    } else {
      STAX_RETURN_IF_ERROR(merge_branch_outputs(ic, i, outputs[0], outputs[1]));
    }
  }
  return STAX_OK;
}

/* ---- Loop -------------------------------------------------------------------------------- */

/* Symbols whose values are the same at every iteration and meaningful outside the body. */
#define LOOP_SYMBOL_CAPACITY 256
typedef struct loop_symbols_t {
  stax_symbol_id_t ids[LOOP_SYMBOL_CAPACITY];
  int32_t count;
  bool overflow; /* too many to track: treat every symbolic scan dim as changing */
} loop_symbols_t;

static void loop_symbols_add(loop_symbols_t* set, const stax_dim_t* dim) {
  stax_symbol_id_t found[LOOP_SYMBOL_CAPACITY];
  int32_t count = stax_dim_symbols(dim, found, LOOP_SYMBOL_CAPACITY);
  if (count > LOOP_SYMBOL_CAPACITY) {
    set->overflow = true;
    return;
  }
  for (int32_t k = 0; k < count; k++) {
    bool present = false;
    for (int32_t j = 0; j < set->count && !present; j++) present = set->ids[j] == found[k];
    if (present) continue;
    if (set->count == LOOP_SYMBOL_CAPACITY) {
      set->overflow = true;
      return;
    }
    set->ids[set->count++] = found[k];
  }
}

static bool loop_symbols_cover(const loop_symbols_t* set, const stax_dim_t* dim) {
  stax_symbol_id_t found[LOOP_SYMBOL_CAPACITY];
  int32_t count = stax_dim_symbols(dim, found, LOOP_SYMBOL_CAPACITY);
  if (count == 0) return true;
  if (set->overflow || count > LOOP_SYMBOL_CAPACITY) return false;
  for (int32_t k = 0; k < count; k++) {
    bool present = false;
    for (int32_t j = 0; j < set->count && !present; j++) present = set->ids[j] == found[k];
    if (!present) return false;
  }
  return true;
}

/* Checks one loop-carried value and sets its final output (output `i`). */
static stax_status_t loop_carried(stax_shape_infer_t* ic, int32_t i, stax_graph_t* body,
                                  loop_symbols_t* stable) {
  stax_shape_operand_t initial;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 2 + i, &initial));
  const stax_value_t* body_input = stax_graph_value(body, stax_graph_input(body, 2 + i));
  const stax_value_t* body_output = stax_graph_value(body, stax_graph_output(body, 1 + i));
  if (body_input->dtype != initial.dtype || body_output->dtype != initial.dtype) {
    return stax_infer_error(ic, STAX_DTYPE_MISMATCH,
                            "loop-carried value %d: input %d '%s' is %s, body input '%s' is %s, "
                            "body output '%s' is %s; they must match",
                            i, 2 + i, initial.name, stax_dtype_name(initial.dtype),
                            body_input->name, stax_dtype_name(body_input->dtype),
                            body_output->name, stax_dtype_name(body_output->dtype));
  }
  const stax_value_t* initial_value = stax_infer_input(ic, 2 + i);
  if (body_input->is_sequence != initial_value->is_sequence ||
      body_output->is_sequence != initial_value->is_sequence) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "loop-carried value %d: input %d '%s' is a %s, body input '%s' a %s, "
                            "body output '%s' a %s; they must match",
                            i, 2 + i, initial.name, initial_value->is_sequence ? "sequence" : "tensor",
                            body_input->name, body_input->is_sequence ? "sequence" : "tensor",
                            body_output->name, body_output->is_sequence ? "sequence" : "tensor");
  }
  if (initial_value->is_sequence) {
    /* The elements may come from any iteration: only what every source says about them holds
     * (constant dims; body symbols are bound per iteration). */
    int32_t rank = 0, merged_rank = 0;
    const stax_dim_t* dims[STAX_MAX_RANK];
    const stax_dim_t* merged[STAX_MAX_RANK];
    stax_shape_merge_elements(ic->shape, initial_value->elem_rank,
                              (const stax_dim_t* const*)initial_value->elem_dims,
                              body_input->elem_rank,
                              (const stax_dim_t* const*)body_input->elem_dims, true, &rank, dims);
    stax_shape_merge_elements(ic->shape, rank, dims, body_output->elem_rank,
                              (const stax_dim_t* const*)body_output->elem_dims, true,
                              &merged_rank, merged);
    return stax_infer_set_sequence_output(ic, i, initial.dtype, merged_rank, merged);
  }
  if (body_input->rank != initial.rank || body_output->rank != initial.rank) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "loop-carried value %d: input %d '%s' has rank %d, body input '%s' "
                            "rank %d, body output '%s' rank %d; they must match",
                            i, 2 + i, initial.name, initial.rank, body_input->name,
                            body_input->rank, body_output->name, body_output->rank);
  }
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &initial));
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < initial.rank; k++) {
    const stax_dim_t* start = initial.dims[k];
    const stax_dim_t* in = body_input->dims[k];
    const stax_dim_t* out = body_output->dims[k];
    if (!stax_dim_known_equal(ic->shape, out, start) &&
        !stax_dim_known_equal(ic->shape, out, in)) {
      STAX_RETURN_IF_ERROR(fresh_covering(ic, i, k, start, out, &dims[k]));
      continue;
    }
    char initial_origin[256], body_origin[256];
    snprintf(initial_origin, sizeof(initial_origin), "Loop node '%s' input %d, dim %d",
             ic->node->name, 2 + i, k);
    snprintf(body_origin, sizeof(body_origin), "Loop node '%s' body input '%s', dim %d",
             ic->node->name, body_input->name, k);
    STAX_RETURN_IF_ERROR(stax_shape_unify_described(ic, in, body_origin, start, initial_origin));
    loop_symbols_add(stable, in);
    dims[k] = start;
  }
  return stax_infer_set_output(ic, i, initial.dtype, initial.rank, dims);
}

/* False when the loop surely runs all M iterations: no condition input, or a constant true
 * one that the body passes through unchanged or replaces by a constant true (the form
 * exporters give a plain for loop). */
static stax_status_t loop_may_stop_early(stax_shape_infer_t* ic, stax_graph_t* body,
                                         bool* out_may_stop) {
  *out_may_stop = true;
  const stax_value_t* condition = stax_infer_input(ic, 1);
  if (!condition) {
    *out_may_stop = false;
    return STAX_OK;
  }
  int64_t true_count = 0;
  if (!condition->constant) return STAX_OK;
  STAX_RETURN_IF_ERROR(stax_shape_count_nonzero(ic, condition->constant, 1, &true_count));
  if (true_count == 0) return STAX_OK;
  stax_value_id_t next = stax_graph_output(body, 0);
  const stax_value_t* next_value = stax_graph_value(body, next);
  if (next == stax_graph_input(body, 1)) {
    *out_may_stop = false;
  } else if (next_value->constant) {
    STAX_RETURN_IF_ERROR(stax_shape_count_nonzero(ic, next_value->constant, 1, &true_count));
    *out_may_stop = true_count == 0;
  }
  return STAX_OK;
}

/* The leading dim of scan outputs: the number of iterations. */
static stax_status_t loop_trip_count(stax_shape_infer_t* ic, stax_graph_t* body, int32_t output,
                                     const stax_dim_t** out_dim) {
  bool may_stop_early = true;
  STAX_RETURN_IF_ERROR(loop_may_stop_early(ic, body, &may_stop_early));
  int64_t upper = STAX_DIM_MAX;
  if (stax_infer_input(ic, 0)) {
    stax_shape_vector_t trips;
    STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 0, "M", &trips));
    if (trips.known && trips.count == 1) {
      int64_t low = 0, high = 0;
      stax_dim_bounds(ic->shape, trips.entries[0], &low, &high);
      if (!may_stop_early && low >= 0) {
        *out_dim = trips.entries[0];
        return STAX_OK;
      }
      upper = high < 0 ? 0 : high;
    }
  }
  return stax_shape_fresh_dim(ic, output, 0, 0, upper, out_dim);
}

static stax_status_t loop_scan_output(stax_shape_infer_t* ic, const stax_dim_t* trip_count,
                                      int32_t output, const stax_value_t* body_output,
                                      const loop_symbols_t* stable) {
  if (body_output->is_sequence) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "scan output %d '%s' is a sequence; scan outputs stack tensors",
                            output, body_output->name);
  }
  int32_t rank = body_output->rank + 1;
  if (rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "scan output %d has rank %d; at most %d is supported", output, rank,
                            STAX_MAX_RANK);
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  dims[0] = trip_count;
  for (int32_t k = 0; k < body_output->rank; k++) {
    const stax_dim_t* dim = body_output->dims[k];
    if (loop_symbols_cover(stable, dim)) {
      dims[k + 1] = dim;
      continue;
    }
    int64_t low = 0, high = 0;
    stax_dim_bounds(ic->shape, dim, &low, &high);
    STAX_RETURN_IF_ERROR(
        stax_shape_fresh_dim(ic, output, k + 1, low < 0 ? 0 : low, high, &dims[k + 1]));
  }
  return stax_infer_set_output(ic, output, body_output->dtype, rank, dims);
}

static stax_status_t loop_check_controls(stax_shape_infer_t* ic, stax_graph_t* body) {
  stax_shape_operand_t operand;
  bool present = false;
  stax_shape_read_input(ic, 0, &operand, &present);
  if (present) {
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &operand, STAX_DTYPES_INT, "an integer"));
    STAX_RETURN_IF_ERROR(stax_shape_require_scalar(ic, &operand, "M"));
  }
  stax_shape_read_input(ic, 1, &operand, &present);
  if (present) {
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &operand, STAX_DTYPES_BOOL, "bool"));
    STAX_RETURN_IF_ERROR(stax_shape_require_scalar(ic, &operand, "cond"));
  }
  const stax_value_t* condition = stax_graph_value(body, stax_graph_output(body, 0));
  if (condition->dtype != STAX_DTYPE_BOOL) {
    return stax_infer_error(ic, STAX_DTYPE_MISMATCH,
                            "body output 0 '%s' (the condition) is %s, expected bool",
                            condition->name, stax_dtype_name(condition->dtype));
  }
  return STAX_OK;
}

stax_status_t stax_shape_loop(stax_shape_infer_t* ic) {
  stax_graph_t* body = NULL;
  STAX_RETURN_IF_ERROR(read_subgraph(ic, "body", &body));
  int32_t carried = ic->node->input_count - 2;
  int32_t body_inputs = stax_graph_input_count(body);
  int32_t body_outputs = stax_graph_output_count(body);
  if (body_inputs != carried + 2) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "the body has %d inputs; with %d loop-carried values it needs %d "
                            "(iteration number, condition, carried values)",
                            body_inputs, carried, carried + 2);
  }
  int32_t scans = body_outputs - 1 - carried;
  if (scans < 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "the body has %d outputs; with %d loop-carried values it needs at "
                            "least %d (condition, carried values, scan outputs)",
                            body_outputs, carried, carried + 1);
  }
  if (ic->node->output_count != carried + scans) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "the node has %d outputs but the body gives %d loop-carried and %d "
                            "scan outputs",
                            ic->node->output_count, carried, scans);
  }
  STAX_RETURN_IF_ERROR(loop_check_controls(ic, body));
  /* Captured outer values keep their dims at every iteration. */
  loop_symbols_t stable = {.count = 0, .overflow = false};
  for (stax_value_id_t v = 0; v < stax_graph_value_count(body); v++) {
    const stax_value_t* value = stax_graph_value(body, v);
    if (!(value->flags & STAX_VALUE_IS_CAPTURE)) continue;
    for (int32_t k = 0; k < value->rank; k++) loop_symbols_add(&stable, value->dims[k]);
  }
  for (int32_t i = 0; i < carried; i++) {
    STAX_RETURN_IF_ERROR(loop_carried(ic, i, body, &stable));
  }
  /* Every scan output stacks one slice per iteration: one shared leading dim. */
  const stax_dim_t* trip_count = NULL;
  if (scans > 0) STAX_RETURN_IF_ERROR(loop_trip_count(ic, body, carried, &trip_count));
  for (int32_t k = 0; k < scans; k++) {
    const stax_value_t* body_output =
        stax_graph_value(body, stax_graph_output(body, 1 + carried + k));
    STAX_RETURN_IF_ERROR(loop_scan_output(ic, trip_count, carried + k, body_output, &stable));
  }
  return STAX_OK;
}
