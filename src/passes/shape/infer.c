/* The shape-inference driver and the helpers every shape function uses: reading inputs,
 * setting output dtypes, shapes, contents and constants, unifying dims with origins that name
 * the node, input and dim, and building error messages with the node's prefix. */
#include <stdio.h>
#include <string.h>

#include "ir/graph_internal.h"

/* Room for "<Op> node '<name>' input <i> dim <d>"; longer node names are cut. */
#define STAX_ORIGIN_SIZE 192

const stax_value_t* stax_infer_input(const stax_shape_infer_t* ic, int32_t i) {
  const stax_node_t* node = ic->node;
  if (i < 0 || i >= node->input_count) return NULL;
  stax_value_id_t id = node->inputs[i];
  if (id < 0 || id >= ic->graph->value_count) return NULL;
  return &ic->graph->values[id];
}

stax_status_t stax_infer_error(const stax_shape_infer_t* ic, stax_status_code_t code,
                               const char* fmt, ...) {
  char message[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  return stax_status_make(code, "%s node '%s': %s", stax_op_name(ic->node->op), ic->node->name,
                          message);
}

stax_status_t stax_infer_check_dims(const stax_shape_infer_t* ic) {
  stax_status_t pending = stax_shape_ctx_take_error(ic->shape);
  if (pending == STAX_OK) return STAX_OK;
  return stax_status_annotate(pending, "%s node '%s'", stax_op_name(ic->node->op),
                              ic->node->name);
}

/* The output's value, or an INTERNAL error naming the node: a shape function addressing an
 * output the node does not have is a bug in the shape function, not in the user's model. */
static stax_status_t stax_infer_output_value(const stax_shape_infer_t* ic, int32_t i,
                                             stax_value_t** out_value) {
  *out_value = NULL;
  if (i < 0 || i >= ic->node->output_count) {
    return stax_infer_error(ic, STAX_INTERNAL, "shape function addressed output %d of %d", i,
                            ic->node->output_count);
  }
  *out_value = &ic->graph->values[ic->node->outputs[i]];
  return STAX_OK;
}

/* Copies dims into the arena after checking none is NULL; a NULL dim means a construction
 * failed, and the shape context holds the reason. */
static stax_status_t stax_infer_copy_dims(stax_shape_infer_t* ic, int32_t output,
                                          const char* what, int32_t count,
                                          const stax_dim_t* const* dims,
                                          const stax_dim_t*** out_dims) {
  *out_dims = NULL;
  if (count > 0 && dims == NULL) {
    return stax_infer_error(ic, STAX_INTERNAL, "output %d %s: %d entries but no array", output,
                            what, count);
  }
  for (int32_t d = 0; d < count; d++) {
    if (dims[d] != NULL) continue;
    stax_status_t pending = stax_infer_check_dims(ic);
    if (pending != STAX_OK) {
      return stax_status_annotate(pending, "output %d %s entry %d", output, what, d);
    }
    return stax_infer_error(ic, STAX_INTERNAL, "output %d %s entry %d is NULL", output, what, d);
  }
  if (count <= 0) return STAX_OK;
  void* copy = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_memdup(&ic->graph->arena, dims,
                                         (size_t)count * sizeof(dims[0]), &copy),
                       "%s node '%s' output %d", stax_op_name(ic->node->op), ic->node->name,
                       output);
  *out_dims = copy;
  return STAX_OK;
}

stax_status_t stax_infer_set_output(stax_shape_infer_t* ic, int32_t i, stax_dtype_t dtype,
                                    int32_t rank, const stax_dim_t* const* dims) {
  stax_value_t* value = NULL;
  STAX_RETURN_IF_ERROR(stax_infer_output_value(ic, i, &value));
  if (dtype < 0 || dtype >= STAX_DTYPE_COUNT) {
    return stax_infer_error(ic, STAX_INTERNAL, "output %d given invalid dtype %d", i, (int)dtype);
  }
  if (rank < 0 || rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH, "output %d would have rank %d (max %d)", i,
                            rank, STAX_MAX_RANK);
  }
  const stax_dim_t** copy = NULL;
  STAX_RETURN_IF_ERROR(stax_infer_copy_dims(ic, i, "dim", rank, dims, &copy));
  value->dtype = dtype;
  value->rank = rank;
  value->dims = copy;
  value->is_sequence = false;
  value->elem_rank = -1;
  value->elem_dims = NULL;
  return STAX_OK;
}

stax_status_t stax_infer_set_sequence_output(stax_shape_infer_t* ic, int32_t i,
                                             stax_dtype_t dtype, int32_t elem_rank,
                                             const stax_dim_t* const* elem_dims) {
  stax_value_t* value = NULL;
  STAX_RETURN_IF_ERROR(stax_infer_output_value(ic, i, &value));
  if (dtype < 0 || dtype >= STAX_DTYPE_COUNT) {
    return stax_infer_error(ic, STAX_INTERNAL, "output %d given invalid dtype %d", i, (int)dtype);
  }
  if (elem_rank < STAX_ELEM_RANK_EMPTY || elem_rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "output %d would hold elements of rank %d (max %d)", i, elem_rank,
                            STAX_MAX_RANK);
  }
  const stax_dim_t** copy = NULL;
  if (elem_rank > 0) {
    /* NULL entries are allowed here (dims the elements do not share). */
    const stax_dim_t* dims[STAX_MAX_RANK];
    for (int32_t d = 0; d < elem_rank; d++) dims[d] = elem_dims ? elem_dims[d] : NULL;
    void* memory = NULL;
    STAX_RETURN_IF_ERROR(stax_arena_memdup(&ic->graph->arena, dims,
                                           (size_t)elem_rank * sizeof(dims[0]), &memory),
                         "%s node '%s' output %d", stax_op_name(ic->node->op), ic->node->name, i);
    copy = memory;
  }
  value->dtype = dtype;
  value->rank = 0;
  value->dims = NULL;
  value->is_sequence = true;
  value->elem_rank = elem_rank;
  value->elem_dims = copy;
  return STAX_OK;
}

stax_status_t stax_infer_set_content(stax_shape_infer_t* ic, int32_t i, int32_t count,
                                     const stax_dim_t* const* content) {
  stax_value_t* value = NULL;
  STAX_RETURN_IF_ERROR(stax_infer_output_value(ic, i, &value));
  if (count < 0) {
    return stax_infer_error(ic, STAX_INTERNAL, "output %d given content count %d", i, count);
  }
  const stax_dim_t** copy = NULL;
  STAX_RETURN_IF_ERROR(stax_infer_copy_dims(ic, i, "content", count, content, &copy));
  value->content_count = count;
  value->content = copy;
  return STAX_OK;
}

void stax_infer_set_constant(stax_shape_infer_t* ic, int32_t i, stax_tensor_t* tensor) {
  if (i < 0 || i >= ic->node->output_count) return;
  stax_value_t* value = &ic->graph->values[ic->node->outputs[i]];
  if (tensor) stax_tensor_retain(tensor);
  if (value->constant) stax_tensor_release(value->constant);
  value->constant = tensor;
}

/* "Add node 'a' input 0 dim 2"; a negative input names the node alone ("... dim 2"), for dims
 * that come from attributes. */
static void stax_infer_origin(const stax_shape_infer_t* ic, int32_t input, int32_t dim,
                              char* buffer, size_t size) {
  int used = snprintf(buffer, size, "%s node '%s'", stax_op_name(ic->node->op), ic->node->name);
  if (used < 0 || (size_t)used >= size) return;
  if (input >= 0) {
    int more = snprintf(buffer + used, size - (size_t)used, " input %d", input);
    if (more < 0) return;
    used += more;
    if ((size_t)used >= size) return;
  }
  if (dim >= 0) snprintf(buffer + used, size - (size_t)used, " dim %d", dim);
}

stax_status_t stax_infer_unify(stax_shape_infer_t* ic, const stax_dim_t* a, int32_t input_a,
                               int32_t dim_a, const stax_dim_t* b, int32_t input_b,
                               int32_t dim_b) {
  char origin_a[STAX_ORIGIN_SIZE], origin_b[STAX_ORIGIN_SIZE];
  stax_infer_origin(ic, input_a, dim_a, origin_a, sizeof(origin_a));
  stax_infer_origin(ic, input_b, dim_b, origin_b, sizeof(origin_b));
  if (a == NULL || b == NULL) {
    stax_status_t pending = stax_infer_check_dims(ic);
    if (pending != STAX_OK) return pending;
    return stax_infer_error(ic, STAX_INTERNAL, "unifying a NULL dim (%s with %s)", origin_a,
                            origin_b);
  }
  /* The origins already name the node, so the unifier's message stands as it is. */
  return stax_dim_unify(ic->shape, a, origin_a, b, origin_b);
}

stax_status_t stax_shape_infer_node(stax_graph_t* graph, stax_node_id_t node_id) {
  if (graph == NULL || node_id < 0 || node_id >= graph->node_count) {
    return stax_status_make(STAX_INTERNAL, "shape inference: node id %d is not in the graph",
                            node_id);
  }
  stax_shape_infer_t ic = {graph, &graph->nodes[node_id], node_id, graph->shape};
  stax_shape_fn infer = stax_op_shape_fn(ic.node->op);
  if (infer == NULL) {
    return stax_status_make(STAX_INTERNAL, "node '%s': op %d has no shape function",
                            ic.node->name, (int)ic.node->op);
  }
  /* Sequence values go only where the op takes them (ops.def: SEQUENCE_IN / SEQUENCE_OUT). */
  stax_op_t op = ic.node->op;
  for (int32_t k = 0; k < ic.node->input_count; k++) {
    if (ic.node->inputs[k] == STAX_VALUE_NONE) continue;
    const stax_value_t* input = &graph->values[ic.node->inputs[k]];
    stax_operand_kind_t kind = stax_op_input_kind(op, k);
    if (kind == STAX_OPERAND_SEQUENCE && !input->is_sequence)
      return stax_infer_error(&ic, STAX_INVALID_ARGUMENT,
                              "input %d '%s' is a %s tensor; the op needs a sequence there", k,
                              input->name, stax_dtype_name(input->dtype));
    if (kind == STAX_OPERAND_TENSOR && input->is_sequence)
      return stax_infer_error(&ic, STAX_INVALID_ARGUMENT,
                              "input %d '%s' is a sequence of %s tensors; the op needs a tensor "
                              "there",
                              k, input->name, stax_dtype_name(input->dtype));
  }
  if (op == STAX_OP_Identity && ic.node->input_count == 1 && ic.node->output_count == 1 &&
      ic.node->inputs[0] != STAX_VALUE_NONE && graph->values[ic.node->inputs[0]].is_sequence) {
    const stax_value_t* input = &graph->values[ic.node->inputs[0]];
    STAX_RETURN_IF_ERROR(stax_infer_set_sequence_output(
        &ic, 0, input->dtype, input->elem_rank, (const stax_dim_t* const*)input->elem_dims));
  } else {
    STAX_RETURN_IF_ERROR(infer(&ic));
  }
  for (int32_t i = 0; i < ic.node->output_count; i++) {
    const stax_value_t* value = &graph->values[ic.node->outputs[i]];
    stax_operand_kind_t kind = stax_op_output_kind(op, i);
    if ((kind == STAX_OPERAND_SEQUENCE && !value->is_sequence) ||
        (kind == STAX_OPERAND_TENSOR && value->is_sequence))
      return stax_infer_error(&ic, STAX_INTERNAL, "shape function gave output %d ('%s') the "
                              "wrong kind (sequence or tensor)", i, value->name);
    if (value->dtype < 0 || value->dtype >= STAX_DTYPE_COUNT || value->rank < 0) {
      return stax_infer_error(&ic, STAX_INTERNAL,
                              "shape function left output %d ('%s') without a dtype and shape",
                              i, value->name);
    }
  }
  return STAX_OK;
}
