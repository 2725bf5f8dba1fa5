/* Per-opset conversions: stax ops follow the newest ONNX form (opset 13+ inputs instead of
 * attributes, opset 13 softmax semantics), so nodes of older opsets are rewritten here before
 * they are added:
 *   - attributes that became inputs: Slice < 10 (starts/ends/axes), Squeeze/Unsqueeze < 13
 *     (axes), Split < 13 (split), ReduceSum < 13 (axes), Clip < 11 (min/max), Pad < 11
 *     (pads/paddings, value), TopK < 10 (k), Reshape < 5 (shape), Upsample-7 (scales);
 *   - ops replaced by a generalization: Upsample and Resize-10 -> Resize with the asymmetric
 *     coordinates and floor rounding they were defined with; Scatter -> ScatterElements;
 *   - Softmax/LogSoftmax/Hardmax < 13 work on the input flattened to 2-D at `axis` (default
 *     1): unless axis is the last dim, Flatten + op(axis=-1) + Reshape back to Shape(x);
 *   - Dropout < 10 returned its mask in the input's type: a Cast follows;
 *   - BatchNormalization < 14 signalled training by asking for more outputs: training_mode;
 *   - legacy broadcasting (< 7, broadcast=1 with axis): B gets trailing 1-dims (Unsqueeze);
 *     so does PRelu < 7's per-channel slope [C] (applied along input dim 1);
 *   - RoiAlign < 16 sampled without the half-pixel shift: coordinate_transformation_mode
 *     output_half_pixel;
 *   - harmless legacy attributes are dropped (consumed_inputs, is_test, spatial=1, Gemm's
 *     broadcast), Cast < 6 names its target type by string, Concat < 4 defaults axis to 1.
 * Other reduce ops keep axes as attributes before opset 18: their kernels accept both. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static bool stax_onnx_is(const stax_onnx_node_t* node, const char* op_type) {
  return strcmp(node->op_type, op_type) == 0;
}

static stax_graph_t* stax_onnx_node_graph(const stax_onnx_node_t* node) {
  return node->scope->graph;
}

static stax_status_t stax_onnx_attr_type_error(const stax_onnx_node_t* node,
                                               const stax_attr_t* attr, const char* wanted) {
  return stax_status_make(STAX_INVALID_ARGUMENT,
                          "%s node '%s' (opset %lld): attribute '%s' is %s, expected %s",
                          node->op_type, node->name, (long long)node->opset, attr->name,
                          stax_attr_type_name(attr->type), wanted);
}

/* attribute `name` (INTS, or INT when scalar_ok) -> int64 constant at input `index`. Absent
 * attributes leave the input absent. */
static stax_status_t stax_onnx_ints_attr_to_input(stax_onnx_node_t* node, const char* name,
                                                  int32_t index, bool scalar_ok) {
  const stax_attr_t* attr = stax_onnx_attrs_find(&node->attrs, name);
  if (attr == NULL) return STAX_OK;
  if (index < node->input_count && node->inputs[index] != STAX_VALUE_NONE) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s' (opset %lld) has both attribute '%s' and input %d",
                            node->op_type, node->name, (long long)node->opset, name, index);
  }
  stax_value_id_t value = STAX_VALUE_NONE;
  if (attr->type == STAX_ATTR_INTS) {
    STAX_RETURN_IF_ERROR(stax_onnx_node_int64_constant(node, name, false, attr->value.ints.count,
                                                       attr->value.ints.data, &value));
  } else if (attr->type == STAX_ATTR_INT && scalar_ok) {
    STAX_RETURN_IF_ERROR(stax_onnx_node_int64_constant(node, name, false, 1, &attr->value.i,
                                                       &value));
  } else {
    return stax_onnx_attr_type_error(node, attr, scalar_ok ? "INT or INTS" : "INTS");
  }
  STAX_RETURN_IF_ERROR(stax_onnx_node_set_input(node, index, value));
  stax_onnx_attrs_remove(&node->attrs, name);
  return STAX_OK;
}

/* FLOAT attribute -> scalar constant of input 0's dtype at input `index`. */
static stax_status_t stax_onnx_float_attr_to_input(stax_onnx_node_t* node, const char* name,
                                                   int32_t index) {
  const stax_attr_t* attr = stax_onnx_attrs_find(&node->attrs, name);
  if (attr == NULL) return STAX_OK;
  if (attr->type != STAX_ATTR_FLOAT) return stax_onnx_attr_type_error(node, attr, "FLOAT");
  if (node->input_count < 1 || node->inputs[0] == STAX_VALUE_NONE) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s' has no input 0", node->op_type,
                            node->name);
  }
  stax_dtype_t dtype = stax_value_dtype(stax_onnx_node_graph(node), node->inputs[0]);
  stax_value_id_t value = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(
      stax_onnx_node_scalar_constant(node, name, dtype, (double)attr->value.f, &value));
  STAX_RETURN_IF_ERROR(stax_onnx_node_set_input(node, index, value));
  stax_onnx_attrs_remove(&node->attrs, name);
  return STAX_OK;
}

/* ---- Upsample / Resize-10 ---------------------------------------------------------------- */

static stax_status_t stax_onnx_legacy_resize(stax_onnx_node_t* node) {
  stax_onnx_importer_t* importer = node->scope->importer;
  stax_value_id_t scales = node->input_count > 1 ? node->inputs[1] : STAX_VALUE_NONE;
  const stax_attr_t* scales_attr = stax_onnx_attrs_find(&node->attrs, "scales");
  if (scales_attr != NULL) {
    if (scales_attr->type != STAX_ATTR_FLOATS) {
      return stax_onnx_attr_type_error(node, scales_attr, "FLOATS");
    }
    int64_t dims[1] = {scales_attr->value.floats.count};
    stax_tensor_t* tensor = NULL;
    STAX_RETURN_IF_ERROR(
        stax_tensor_create(importer->allocator, STAX_DTYPE_FLOAT32, 1, dims, &tensor));
    if (dims[0] > 0) {
      memcpy(stax_tensor_data(tensor), scales_attr->value.floats.data,
             (size_t)dims[0] * sizeof(float));
    }
    stax_status_t status =
        stax_onnx_scope_add_constant(node->scope, node->name, "scales", tensor, &scales);
    stax_tensor_release(tensor);
    STAX_RETURN_IF_ERROR(status);
    stax_onnx_attrs_remove(&node->attrs, "scales");
  }
  if (scales == STAX_VALUE_NONE) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s' (opset %lld) has no scales",
                            node->op_type, node->name, (long long)node->opset);
  }
  /* (X, scales) -> (X, roi, scales). */
  STAX_RETURN_IF_ERROR(stax_onnx_node_set_input(node, 2, scales));
  node->inputs[1] = STAX_VALUE_NONE;
  node->input_count = 3;
  const stax_attr_t* mode = stax_onnx_attrs_find(&node->attrs, "mode");
  const char* mode_text = mode && mode->type == STAX_ATTR_STRING ? mode->value.s : "nearest";
  if (strcmp(mode_text, "bilinear") == 0) mode_text = "linear"; /* Upsample-7's spelling */
  STAX_RETURN_IF_ERROR(
      stax_onnx_attrs_set(importer, &node->attrs, stax_attr_string("mode", mode_text)));
  STAX_RETURN_IF_ERROR(stax_onnx_attrs_set(
      importer, &node->attrs, stax_attr_string("coordinate_transformation_mode", "asymmetric")));
  if (strcmp(mode_text, "nearest") == 0) {
    STAX_RETURN_IF_ERROR(stax_onnx_attrs_set(importer, &node->attrs,
                                             stax_attr_string("nearest_mode", "floor")));
  }
  node->op = STAX_OP_Resize;
  return STAX_OK;
}

/* ---- Softmax family before opset 13 ------------------------------------------------------ */

static stax_status_t stax_onnx_legacy_softmax(stax_onnx_node_t* node, bool* out_done) {
  stax_onnx_importer_t* importer = node->scope->importer;
  stax_graph_t* graph = stax_onnx_node_graph(node);
  const stax_attr_t* axis_attr = stax_onnx_attrs_find(&node->attrs, "axis");
  int64_t axis = 1;
  if (axis_attr != NULL) {
    if (axis_attr->type != STAX_ATTR_INT) return stax_onnx_attr_type_error(node, axis_attr, "INT");
    axis = axis_attr->value.i;
  }
  if (node->input_count < 1 || node->inputs[0] == STAX_VALUE_NONE) return STAX_OK;
  stax_value_id_t input = node->inputs[0];
  int32_t rank = stax_value_rank(graph, input);
  if (rank <= 0) return STAX_OK;
  if (axis < -rank || axis >= rank) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s' (opset %lld): axis %lld is out of range for input "
                            "'%s' of rank %d",
                            node->op_type, node->name, (long long)node->opset, (long long)axis,
                            stax_value_name(graph, input), rank);
  }
  if (axis < 0) axis += rank;
  if (axis == rank - 1) {
    /* One trailing axis: the 2-D view and the opset-13 definition agree. */
    return stax_onnx_attrs_set(importer, &node->attrs, stax_attr_int("axis", -1));
  }
  stax_attr_t flatten_axis = stax_attr_int("axis", axis);
  stax_value_id_t flat = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_onnx_emit(node, STAX_OP_Flatten, "flatten", 1, &input, 1, NULL, 1,
                                      &flatten_axis, &flat));
  stax_attr_t last_axis = stax_attr_int("axis", -1);
  stax_value_id_t normalized = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_onnx_emit(node, node->op, "2d", 1, &flat, 1, NULL, 1, &last_axis,
                                      &normalized));
  stax_value_id_t shape = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_onnx_emit(node, STAX_OP_Shape, "shape", 1, &input, 1, NULL, 0, NULL,
                                      &shape));
  /* allowzero: a 0 in the shape is an empty dim of the input, not "copy this dim". */
  stax_attr_t allow_zero = stax_attr_int("allowzero", 1);
  stax_value_id_t reshape_inputs[2] = {normalized, shape};
  STAX_RETURN_IF_ERROR(stax_onnx_emit(node, STAX_OP_Reshape, "reshape", 2, reshape_inputs, 1,
                                      node->output_names, 1, &allow_zero, NULL));
  *out_done = true;
  return STAX_OK;
}

/* ---- Dropout, BatchNormalization ---------------------------------------------------------- */

static stax_status_t stax_onnx_legacy_dropout(stax_onnx_node_t* node, bool* out_done) {
  stax_onnx_attrs_remove(&node->attrs, "is_test");
  bool mask_used = node->output_count >= 2 && node->proto->n_output >= 2 &&
                   node->proto->output[1] && node->proto->output[1][0];
  if (node->opset >= 10 || !mask_used) return STAX_OK;
  /* Before opset 10 the mask had the input's type; stax's Dropout gives a bool mask. */
  const char* names[2] = {node->output_names[0], NULL};
  stax_value_id_t outputs[2] = {STAX_VALUE_NONE, STAX_VALUE_NONE};
  STAX_RETURN_IF_ERROR(stax_onnx_emit(node, STAX_OP_Dropout, NULL, node->input_count,
                                      node->inputs, 2, names, node->attrs.count,
                                      node->attrs.items, outputs));
  stax_dtype_t dtype = stax_value_dtype(stax_onnx_node_graph(node), node->inputs[0]);
  stax_attr_t to = stax_attr_int("to", stax_dtype_to_onnx(dtype));
  STAX_RETURN_IF_ERROR(stax_onnx_emit(node, STAX_OP_Cast, "mask_cast", 1, &outputs[1], 1,
                                      &node->output_names[1], 1, &to, NULL));
  *out_done = true;
  return STAX_OK;
}

static stax_status_t stax_onnx_legacy_batch_norm(stax_onnx_node_t* node) {
  stax_onnx_attrs_remove(&node->attrs, "is_test");
  stax_onnx_attrs_remove(&node->attrs, "spatial"); /* spatial=0 is refused as unsupported */
  if (node->opset >= 14 || node->output_count <= 1) return STAX_OK;
  /* Asking for the running mean and variance meant training mode before opset 14. */
  return stax_onnx_attrs_set(node->scope->importer, &node->attrs,
                             stax_attr_int("training_mode", 1));
}

/* ---- Cast < 6, Concat < 4 ---------------------------------------------------------------- */

static stax_status_t stax_onnx_legacy_cast(stax_onnx_node_t* node) {
  const stax_attr_t* to = stax_onnx_attrs_find(&node->attrs, "to");
  if (to == NULL || to->type != STAX_ATTR_STRING) return STAX_OK;
  for (int32_t code = 0; code < 32; code++) {
    if (strcmp(stax_onnx_data_type_name(code), to->value.s) == 0) {
      return stax_onnx_attrs_set(node->scope->importer, &node->attrs,
                                 stax_attr_int("to", code));
    }
  }
  return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s' (opset %lld): unknown type '%s'",
                          node->op_type, node->name, (long long)node->opset, to->value.s);
}

/* ---- legacy broadcasting (< 7) ----------------------------------------------------------- */

static bool stax_onnx_is_legacy_broadcast_op(const stax_onnx_node_t* node) {
  static const char* const ops[] = {"Add", "Sub",  "Mul",   "Div",  "Pow",     "And",
                                    "Or",  "Xor",  "Equal", "Less", "Greater"};
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    if (stax_onnx_is(node, ops[i])) return true;
  }
  return false;
}

/* broadcast=1 aligned B with A starting at `axis`; numpy aligns trailing dims. Unsqueezing B
 * with trailing 1-dims turns the first into the second. */
static stax_status_t stax_onnx_legacy_broadcast(stax_onnx_node_t* node) {
  const stax_attr_t* broadcast = stax_onnx_attrs_find(&node->attrs, "broadcast");
  const stax_attr_t* axis_attr = stax_onnx_attrs_find(&node->attrs, "axis");
  bool enabled = broadcast && broadcast->type == STAX_ATTR_INT && broadcast->value.i != 0;
  int64_t axis = axis_attr && axis_attr->type == STAX_ATTR_INT ? axis_attr->value.i : 0;
  bool has_axis = axis_attr != NULL;
  stax_onnx_attrs_remove(&node->attrs, "broadcast");
  stax_onnx_attrs_remove(&node->attrs, "axis");
  if (!enabled || !has_axis || node->input_count < 2 || node->inputs[0] == STAX_VALUE_NONE ||
      node->inputs[1] == STAX_VALUE_NONE) {
    return STAX_OK;
  }
  stax_graph_t* graph = stax_onnx_node_graph(node);
  int32_t rank_a = stax_value_rank(graph, node->inputs[0]);
  int32_t rank_b = stax_value_rank(graph, node->inputs[1]);
  if (axis < 0) axis += rank_a;
  if (axis < 0 || axis + rank_b > rank_a) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s node '%s' (opset %lld): broadcast axis %lld does not fit input "
                            "ranks %d and %d",
                            node->op_type, node->name, (long long)node->opset, (long long)axis,
                            rank_a, rank_b);
  }
  int32_t trailing = rank_a - (int32_t)axis - rank_b;
  if (trailing == 0) return STAX_OK;
  int64_t axes[STAX_MAX_RANK];
  for (int32_t k = 0; k < trailing; k++) axes[k] = rank_b + k;
  stax_value_id_t axes_value = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(
      stax_onnx_node_int64_constant(node, "broadcast_axes", false, trailing, axes, &axes_value));
  stax_value_id_t unsqueeze_inputs[2] = {node->inputs[1], axes_value};
  stax_value_id_t aligned = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_onnx_emit(node, STAX_OP_Unsqueeze, "broadcast", 2, unsqueeze_inputs,
                                      1, NULL, 0, NULL, &aligned));
  node->inputs[1] = aligned;
  return STAX_OK;
}

/* ---- PRelu < 7 ---------------------------------------------------------------------------- */

/* Before opset 7 a slope was one value or one per channel (input dim 1), not numpy-broadcast:
 * a [C] slope of an [N, C, D1, ...] input gets trailing 1-dims ([C, 1, ...]) so numpy
 * broadcasting applies it per channel. A slope of rank >= 2 is already laid out that way. */
static stax_status_t stax_onnx_legacy_prelu(stax_onnx_node_t* node) {
  if (node->input_count < 2 || node->inputs[0] == STAX_VALUE_NONE ||
      node->inputs[1] == STAX_VALUE_NONE) {
    return STAX_OK;
  }
  stax_graph_t* graph = stax_onnx_node_graph(node);
  int32_t rank_x = stax_value_rank(graph, node->inputs[0]);
  int32_t rank_slope = stax_value_rank(graph, node->inputs[1]);
  if (rank_slope != 1 || rank_x < 3) return STAX_OK;
  int32_t trailing = rank_x - 2;
  int64_t axes[STAX_MAX_RANK];
  for (int32_t k = 0; k < trailing; k++) axes[k] = 1 + k;
  stax_value_id_t axes_value = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(
      stax_onnx_node_int64_constant(node, "slope_axes", false, trailing, axes, &axes_value));
  stax_value_id_t unsqueeze_inputs[2] = {node->inputs[1], axes_value};
  stax_value_id_t per_channel = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_onnx_emit(node, STAX_OP_Unsqueeze, "slope_per_channel", 2,
                                      unsqueeze_inputs, 1, NULL, 0, NULL, &per_channel));
  node->inputs[1] = per_channel;
  return STAX_OK;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

stax_status_t stax_onnx_legacy_convert(stax_onnx_node_t* node, bool* out_done) {
  *out_done = false;
  int64_t opset = node->opset;
  if (opset < 7) stax_onnx_attrs_remove(&node->attrs, "consumed_inputs");

  if (stax_onnx_is(node, "Slice") && opset < 10) {
    STAX_RETURN_IF_ERROR(stax_onnx_ints_attr_to_input(node, "starts", 1, false));
    STAX_RETURN_IF_ERROR(stax_onnx_ints_attr_to_input(node, "ends", 2, false));
    return stax_onnx_ints_attr_to_input(node, "axes", 3, false);
  }
  if ((stax_onnx_is(node, "Squeeze") || stax_onnx_is(node, "Unsqueeze") ||
       stax_onnx_is(node, "ReduceSum")) &&
      opset < 13) {
    return stax_onnx_ints_attr_to_input(node, "axes", 1, false);
  }
  if (stax_onnx_is(node, "Split") && opset < 13) {
    return stax_onnx_ints_attr_to_input(node, "split", 1, false);
  }
  if (stax_onnx_is(node, "Clip") && opset < 11) {
    STAX_RETURN_IF_ERROR(stax_onnx_float_attr_to_input(node, "min", 1));
    return stax_onnx_float_attr_to_input(node, "max", 2);
  }
  if (stax_onnx_is(node, "Pad") && opset < 11) {
    STAX_RETURN_IF_ERROR(stax_onnx_ints_attr_to_input(node, "pads", 1, false));
    STAX_RETURN_IF_ERROR(stax_onnx_ints_attr_to_input(node, "paddings", 1, false));
    return stax_onnx_float_attr_to_input(node, "value", 2);
  }
  if (stax_onnx_is(node, "TopK") && opset < 10) {
    return stax_onnx_ints_attr_to_input(node, "k", 1, true);
  }
  if (stax_onnx_is(node, "Reshape") && opset < 5) {
    return stax_onnx_ints_attr_to_input(node, "shape", 1, false);
  }
  if (stax_onnx_is(node, "Upsample") || (stax_onnx_is(node, "Resize") && opset < 11)) {
    return stax_onnx_legacy_resize(node);
  }
  if ((stax_onnx_is(node, "Softmax") || stax_onnx_is(node, "LogSoftmax") ||
       stax_onnx_is(node, "Hardmax")) &&
      opset < 13) {
    return stax_onnx_legacy_softmax(node, out_done);
  }
  if (stax_onnx_is(node, "Dropout")) return stax_onnx_legacy_dropout(node, out_done);
  if (stax_onnx_is(node, "BatchNormalization")) return stax_onnx_legacy_batch_norm(node);
  if (stax_onnx_is(node, "Cast") && opset < 6) return stax_onnx_legacy_cast(node);
  if (stax_onnx_is(node, "Concat") && opset < 4 && !stax_onnx_attrs_find(&node->attrs, "axis")) {
    return stax_onnx_attrs_set(node->scope->importer, &node->attrs, stax_attr_int("axis", 1));
  }
  if (stax_onnx_is(node, "Gemm") && opset < 7) {
    stax_onnx_attrs_remove(&node->attrs, "broadcast");
    return STAX_OK;
  }
  if (stax_onnx_is(node, "PRelu") && opset < 7) return stax_onnx_legacy_prelu(node);
  if (stax_onnx_is(node, "RoiAlign") && opset < 16 &&
      !stax_onnx_attrs_find(&node->attrs, "coordinate_transformation_mode")) {
    /* RoiAlign-10 had no half-pixel shift: opset 16 calls that output_half_pixel. */
    return stax_onnx_attrs_set(node->scope->importer, &node->attrs,
                               stax_attr_string("coordinate_transformation_mode",
                                                "output_half_pixel"));
  }
  if (opset < 7 && stax_onnx_is_legacy_broadcast_op(node)) {
    return stax_onnx_legacy_broadcast(node);
  }
  return STAX_OK;
}
