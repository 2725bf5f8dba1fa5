/* Constant folding. At build time (stax_graph_add_node calls stax_fold_node) a node whose
 * inputs are all constants is evaluated once with the generic kernels, the same code the
 * interpreter would run, so a folded value is bit for bit what the call would have computed;
 * an integer output whose contents shape inference already knows as constants (Shape of a
 * static tensor, Gather of such a shape) becomes that constant. Later shape functions then see
 * values: Reshape(x, Concat(..., Mod(2, 3))) infers statically.
 *
 * The fold pass then removes the nodes whose outputs are all constants; their outputs become
 * initializers, loaded once per program. */
#include <string.h>

#include "kernels/kernel.h"
#include "passes/pass.h"

/* A folded constant may grow the model only this much beyond its inputs, so Expand or
 * ConstantOfShape of a huge shape stays a node. */
#define STAX_FOLD_FREE_BYTES ((int64_t)1 << 20)
#define STAX_FOLD_MAX_BYTES ((int64_t)1 << 30)

/* The output's dims as integers, when every one is a constant. */
static bool stax_fold_static_dims(const stax_value_t* value, int64_t* dims, int64_t* out_count) {
  int64_t count = 1;
  for (int32_t d = 0; d < value->rank; d++) {
    if (!stax_dim_is_const(value->dims[d])) return false;
    dims[d] = stax_dim_const_value(value->dims[d]);
    if (dims[d] < 0) return false;
    if (dims[d] > 0 && count > INT64_MAX / dims[d]) return false;
    count *= dims[d];
  }
  *out_count = count;
  return true;
}

/* Integer outputs whose contents are all known constants. */
static bool stax_fold_from_contents(stax_graph_t* graph, stax_node_t* node) {
  for (int32_t k = 0; k < node->output_count; k++) {
    if (node->outputs[k] == STAX_VALUE_NONE) return false;
    const stax_value_t* value = &graph->values[node->outputs[k]];
    if (value->constant) continue;
    if (value->content_count < 0 || value->rank > 1) return false;
    if (value->dtype != STAX_DTYPE_INT64 && value->dtype != STAX_DTYPE_INT32) return false;
    int64_t dims[1] = {0}, count = 0;
    if (!stax_fold_static_dims(value, dims, &count) || count != value->content_count) return false;
    for (int32_t i = 0; i < value->content_count; i++)
      if (!stax_dim_is_const(value->content[i])) return false;
  }
  for (int32_t k = 0; k < node->output_count; k++) {
    stax_value_t* value = &graph->values[node->outputs[k]];
    if (value->constant) continue;
    int64_t dims[1] = {value->content_count};
    stax_tensor_t* tensor = NULL;
    stax_status_t status = stax_tensor_create(graph->allocator, value->dtype, value->rank, dims,
                                              &tensor);
    if (status != STAX_OK) {
      stax_status_free(status);
      return false;
    }
    unsigned char* data = stax_tensor_data(tensor);
    for (int32_t i = 0; i < value->content_count; i++) {
      int64_t number = stax_dim_const_value(value->content[i]);
      if (value->dtype == STAX_DTYPE_INT64) {
        memcpy(data + (size_t)i * 8, &number, 8);
      } else {
        int32_t narrow = (int32_t)number;
        memcpy(data + (size_t)i * 4, &narrow, 4);
      }
    }
    value->constant = tensor;
  }
  return true;
}

/* Evaluates the node with its kernel; every output must come back with its inferred dims. */
static bool stax_fold_evaluate(stax_graph_t* graph, stax_node_t* node) {
  enum { kMaxIO = 64 };
  if (node->input_count > kMaxIO || node->output_count > kMaxIO || node->output_count < 1)
    return false;
  stax_tensor_t* inputs[kMaxIO];
  stax_tensor_t* outputs[kMaxIO];
  int64_t input_bytes = 0, output_bytes = 0;
  int32_t present = 0;
  for (int32_t i = 0; i < node->input_count; i++) {
    inputs[i] = NULL;
    if (node->inputs[i] == STAX_VALUE_NONE) continue;
    const stax_value_t* value = &graph->values[node->inputs[i]];
    if (!value->constant) return false;
    inputs[i] = value->constant;
    input_bytes += stax_tensor_element_count(value->constant) *
                   (int64_t)stax_dtype_size(stax_tensor_dtype(value->constant));
    present++;
  }
  if (present == 0) return false; /* Constant and generators of attributes fold themselves */
  for (int32_t k = 0; k < node->output_count; k++) {
    outputs[k] = NULL;
    if (node->outputs[k] == STAX_VALUE_NONE) continue;
    const stax_value_t* value = &graph->values[node->outputs[k]];
    int64_t dims[STAX_MAX_RANK], count = 0;
    if (!stax_fold_static_dims(value, dims, &count)) return false;
    int64_t size = (int64_t)stax_dtype_size(value->dtype);
    if (size <= 0 || count > STAX_FOLD_MAX_BYTES / size) return false;
    output_bytes += count * size;
  }
  if (output_bytes > STAX_FOLD_MAX_BYTES ||
      output_bytes > 2 * input_bytes + STAX_FOLD_FREE_BYTES)
    return false;
  stax_kernel_fn kernel = stax_kernel_for_op(node->op);
  if (!kernel) return false;
  stax_kernel_call_t call = {.node = node,
                             .allocator = graph->allocator,
                             .pool = NULL,
                             .input_count = node->input_count,
                             .inputs = inputs,
                             .output_count = node->output_count,
                             .outputs = outputs};
  stax_status_t status = kernel(&call);
  if (status != STAX_OK) {
    /* The call would fail the same way at run time, where it reports with its inputs. */
    stax_status_free(status);
    return false;
  }
  bool agrees = true;
  stax_tensor_t* owned[kMaxIO];
  for (int32_t k = 0; k < node->output_count; k++) {
    owned[k] = NULL;
    if (node->outputs[k] == STAX_VALUE_NONE) continue;
    const stax_value_t* value = &graph->values[node->outputs[k]];
    stax_tensor_t* t = outputs[k];
    int64_t dims[STAX_MAX_RANK], count = 0;
    if (!agrees || !t || stax_tensor_dtype(t) != value->dtype ||
        stax_tensor_rank(t) != value->rank || !stax_fold_static_dims(value, dims, &count) ||
        memcmp(dims, stax_tensor_dims(t), (size_t)value->rank * sizeof(int64_t)) != 0) {
      agrees = false;
      continue;
    }
    /* A constant owns plain contiguous memory: the kernel's result may be a view of an input
     * or come from the per-thread pool. */
    status = stax_tensor_copy(graph->allocator, t, &owned[k]);
    if (status != STAX_OK) {
      stax_status_free(status);
      agrees = false;
    }
  }
  for (int32_t k = 0; k < node->output_count; k++)
    if (outputs[k]) stax_tensor_release(outputs[k]);
  if (!agrees) {
    for (int32_t k = 0; k < node->output_count; k++)
      if (owned[k]) stax_tensor_release(owned[k]);
    return false;
  }
  for (int32_t k = 0; k < node->output_count; k++) {
    if (!owned[k]) continue;
    stax_value_t* value = &graph->values[node->outputs[k]];
    if (value->constant) stax_tensor_release(value->constant);
    value->constant = owned[k];
  }
  return true;
}

bool stax_fold_node(stax_graph_t* graph, stax_node_id_t id) {
  stax_node_t* node = &graph->nodes[id];
  /* Sequence values are never constants (program constants are tensors). */
  if (stax_op_flags(node->op) & (STAX_OPF_CONTROL | STAX_OPF_SEQUENCE)) return false;
  for (int32_t k = 0; k < node->input_count; k++)
    if (node->inputs[k] != STAX_VALUE_NONE && graph->values[node->inputs[k]].is_sequence)
      return false;
  bool all_constant = node->output_count > 0;
  for (int32_t k = 0; k < node->output_count; k++)
    if (node->outputs[k] == STAX_VALUE_NONE || !graph->values[node->outputs[k]].constant)
      all_constant = false;
  if (all_constant) return true;
  if (!stax_fold_evaluate(graph, node) && !stax_fold_from_contents(graph, node)) return false;
  for (int32_t k = 0; k < node->output_count; k++) {
    stax_status_t status = stax_graph_set_constant_content(graph, node->outputs[k]);
    if (status != STAX_OK) stax_status_free(status); /* contents are an aid, not required */
  }
  return true;
}

stax_status_t stax_pass_run_fold(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    if (ctx->dead[n]) continue;
    /* Inputs may have become constants since the node was built (CSE, other folds). */
    if (!stax_fold_node(g, n)) continue;
    ctx->dead[n] = true;
    stax_pass_count(ctx, "nodes folded into constants");
  }
  return STAX_OK;
}
