/* ConstantOfShape as a fill. ConstantOfShape(shape) with its one-element `value` (float32 0
 * when absent) is Expand(value, shape) with the value as a rank-0 constant: both give
 * `shape` filled with the value (Expand broadcasts a scalar to any shape, dims of 0
 * included). The compiler lowers an Expand whose output dims it can compute from the bound
 * symbols to BROADCAST_TO, a stride-0 view of the constant with those dims: no kernel reads
 * the int64 shape tensor, no buffer is allocated or filled, and the chain that computed the
 * shape dies in the dead-instruction sweep. Where the dims are only known at run time the
 * Expand kernel fills a new tensor from the shape tensor, as ConstantOfShape did. Bit for
 * bit: every element is the value's bytes.
 *
 * Left alone: outputs the graph's user sees (a graph output or a subgraph capture keeps its
 * contiguous buffer) and a malformed `value` (the kernel reports it). */
#include <string.h>

#include "passes/pass.h"

/* The fill value as a new rank-0 tensor, or NULL when the attribute is malformed. */
static stax_status_t stax_fill_scalar(stax_pass_ctx_t* ctx, const stax_node_t* node,
                                      stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  const stax_node_attr_t* attr = stax_node_attr_find(node, "value");
  const stax_tensor_t* value = NULL;
  if (attr) {
    if (attr->type != STAX_ATTR_TENSOR || !attr->value.tensor ||
        stax_tensor_element_count(attr->value.tensor) != 1)
      return STAX_OK;
    value = attr->value.tensor;
  }
  stax_dtype_t dtype = value ? stax_tensor_dtype(value) : STAX_DTYPE_FLOAT32;
  if (stax_dtype_size(dtype) == 0) return STAX_OK;
  STAX_RETURN_IF_ERROR(stax_tensor_create(ctx->graph->allocator, dtype, 0, NULL, out_tensor));
  unsigned char* data = stax_tensor_data(*out_tensor);
  if (value)
    memcpy(data, stax_tensor_data(value), stax_dtype_size(dtype));
  else
    memset(data, 0, stax_dtype_size(dtype));
  return STAX_OK;
}

stax_status_t stax_pass_run_fill(stax_pass_ctx_t* ctx) {
  stax_graph_t* g = ctx->graph;
  for (stax_node_id_t n = 0; n < g->node_count; n++) {
    if (ctx->dead[n]) continue;
    stax_node_t* node = &g->nodes[n];
    if (node->op != STAX_OP_ConstantOfShape || node->input_count != 1 ||
        node->inputs[0] == STAX_VALUE_NONE || node->output_count != 1 ||
        node->outputs[0] == STAX_VALUE_NONE)
      continue;
    if (!ctx->uses_valid) STAX_RETURN_IF_ERROR(stax_pass_refresh_uses(ctx));
    if (ctx->pinned[node->outputs[0]] || g->values[node->outputs[0]].constant) continue;
    /* With the shape's contents unknown both ops give fresh dims, which never agree. */
    if (g->values[node->inputs[0]].content_count < 0) continue;
    stax_tensor_t* scalar = NULL;
    STAX_RETURN_IF_ERROR(stax_fill_scalar(ctx, node, &scalar));
    if (!scalar) continue;
    stax_value_id_t value = STAX_VALUE_NONE;
    stax_status_t status = stax_pass_add_constant(ctx, "fill_value", scalar, &value);
    stax_tensor_release(scalar);
    STAX_RETURN_IF_ERROR(status);
    node = &g->nodes[n]; /* adding a value does not move nodes, but keep the pointer fresh */
    stax_value_id_t inputs[2] = {value, node->inputs[0]};
    bool done = false;
    STAX_RETURN_IF_ERROR(stax_pass_rewrite_node(ctx, n, STAX_OP_Expand, 2, inputs, 0, NULL, &done));
    if (done) stax_pass_count(ctx, "ConstantOfShape turned into a broadcast fill");
  }
  return STAX_OK;
}
