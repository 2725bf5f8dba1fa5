/* Shared shape-function helpers: operands, dtype and rank checks, numpy broadcasting, axis
 * normalization and reading small integer inputs. See shape_util.h for how symbolic dims
 * broadcast. */
#include "passes/shape/shape_util.h"

#include <stdio.h>
#include <string.h>

void stax_shape_read_input(const stax_shape_infer_t* ic, int32_t i,
                           stax_shape_operand_t* out_operand, bool* out_present) {
  memset(out_operand, 0, sizeof(*out_operand));
  out_operand->dtype = STAX_DTYPE_INVALID;
  out_operand->input_index = i;
  const stax_value_t* value = stax_infer_input(ic, i);
  *out_present = value != NULL;
  if (!value) return;
  out_operand->name = value->name ? value->name : "";
  out_operand->dtype = value->dtype;
  out_operand->rank = value->rank;
  out_operand->dims = value->dims;
}

stax_status_t stax_shape_require_input(const stax_shape_infer_t* ic, int32_t i,
                                       stax_shape_operand_t* out_operand) {
  bool present = false;
  stax_shape_read_input(ic, i, out_operand, &present);
  if (!present) return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "input %d is required", i);
  return STAX_OK;
}

/* ---- dtypes ------------------------------------------------------------------------------ */

static bool dtype_in_mask(stax_dtype_t dtype, stax_dtype_mask_t mask) {
  return dtype >= 0 && dtype < STAX_DTYPE_COUNT && (mask & STAX_DTYPE_BIT(dtype)) != 0;
}

stax_status_t stax_shape_require_dtype(const stax_shape_infer_t* ic,
                                       const stax_shape_operand_t* operand,
                                       stax_dtype_mask_t allowed, const char* what) {
  if (dtype_in_mask(operand->dtype, allowed)) return STAX_OK;
  return stax_infer_error(ic, STAX_DTYPE_MISMATCH, "input %d '%s' has dtype %s, expected %s",
                          operand->input_index, operand->name, stax_dtype_name(operand->dtype),
                          what);
}

stax_status_t stax_shape_require_same_dtype(const stax_shape_infer_t* ic,
                                            const stax_shape_operand_t* a,
                                            const stax_shape_operand_t* b) {
  if (a->dtype == b->dtype) return STAX_OK;
  return stax_infer_error(ic, STAX_DTYPE_MISMATCH,
                          "input %d '%s' has dtype %s but input %d '%s' has dtype %s; they "
                          "must match",
                          a->input_index, a->name, stax_dtype_name(a->dtype), b->input_index,
                          b->name, stax_dtype_name(b->dtype));
}

/* ---- ranks and dims ---------------------------------------------------------------------- */

stax_status_t stax_shape_require_rank(const stax_shape_infer_t* ic,
                                      const stax_shape_operand_t* operand, int32_t min_rank,
                                      int32_t max_rank) {
  if (operand->rank >= min_rank && (max_rank < 0 || operand->rank <= max_rank)) return STAX_OK;
  if (min_rank == max_rank) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH, "input %d '%s' has rank %d, expected %d",
                            operand->input_index, operand->name, operand->rank, min_rank);
  }
  if (max_rank < 0) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input %d '%s' has rank %d, expected at least %d",
                            operand->input_index, operand->name, operand->rank, min_rank);
  }
  return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                          "input %d '%s' has rank %d, expected %d to %d", operand->input_index,
                          operand->name, operand->rank, min_rank, max_rank);
}

stax_status_t stax_shape_require_rank_limit(const stax_shape_infer_t* ic,
                                            const stax_shape_operand_t* operand) {
  if (operand->rank <= STAX_MAX_RANK) return STAX_OK;
  return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                          "input %d '%s' has rank %d; at most %d is supported",
                          operand->input_index, operand->name, operand->rank, STAX_MAX_RANK);
}

stax_status_t stax_shape_require_scalar(const stax_shape_infer_t* ic,
                                        const stax_shape_operand_t* operand, const char* what) {
  if (operand->rank == 0 ||
      (operand->rank == 1 && stax_shape_dim_is_one(ic, operand->dims[0]))) {
    return STAX_OK;
  }
  return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                          "input %d '%s' (%s) must be a scalar, got rank %d",
                          operand->input_index, operand->name, what, operand->rank);
}

const char* stax_shape_dim_text(const stax_shape_infer_t* ic, const stax_dim_t* dim, char* buf,
                                size_t size) {
  if (size == 0) return buf;
  buf[0] = '\0';
  if (!dim) {
    snprintf(buf, size, "?");
    return buf;
  }
  (void)stax_dim_print(ic->shape, dim, buf, size);
  return buf;
}

bool stax_shape_dim_const(const stax_shape_infer_t* ic, const stax_dim_t* dim,
                          int64_t* out_value) {
  *out_value = 0;
  if (!dim) return false;
  const stax_dim_t* resolved = stax_dim_resolve(ic->shape, dim);
  if (resolved && stax_dim_is_const(resolved)) {
    *out_value = stax_dim_const_value(resolved);
    return true;
  }
  int64_t low = 0, high = 0;
  stax_dim_bounds(ic->shape, dim, &low, &high);
  if (low == high) {
    *out_value = low;
    return true;
  }
  return false;
}

bool stax_shape_dim_is_one(const stax_shape_infer_t* ic, const stax_dim_t* dim) {
  int64_t value = 0;
  return stax_shape_dim_const(ic, dim, &value) && value == 1;
}

stax_status_t stax_shape_match_dim(stax_shape_infer_t* ic, const stax_shape_operand_t* operand,
                                   int32_t axis, const stax_dim_t* expected,
                                   int32_t expected_input, int32_t expected_axis) {
  const stax_dim_t* actual = operand->dims[axis];
  if (actual == expected || stax_dim_known_equal(ic->shape, actual, expected)) return STAX_OK;
  return stax_infer_unify(ic, actual, operand->input_index, axis + operand->axis_offset,
                          expected, expected_input, expected_axis);
}

stax_status_t stax_shape_require_equal_dims(stax_shape_infer_t* ic, const char* what,
                                            const stax_shape_operand_t* a, int32_t axis_a,
                                            const stax_shape_operand_t* b, int32_t axis_b) {
  const stax_dim_t* dim_a = a->dims[axis_a];
  const stax_dim_t* dim_b = b->dims[axis_b];
  if (dim_a == dim_b || stax_dim_known_equal(ic->shape, dim_a, dim_b)) return STAX_OK;
  int64_t value_a = 0, value_b = 0;
  if (stax_shape_dim_const(ic, dim_a, &value_a) && stax_shape_dim_const(ic, dim_b, &value_b)) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "%s mismatch: input %d '%s' dim %d is %lld but input %d '%s' dim %d "
                            "is %lld",
                            what, a->input_index, a->name, axis_a + a->axis_offset,
                            (long long)value_a, b->input_index, b->name,
                            axis_b + b->axis_offset, (long long)value_b);
  }
  return stax_infer_unify(ic, dim_a, a->input_index, axis_a + a->axis_offset, dim_b,
                          b->input_index, axis_b + b->axis_offset);
}

/* ---- broadcasting ------------------------------------------------------------------------ */

/* Combines the dim chosen so far for one output axis with the next operand's dim. With
 * `unify` false only constant conflicts are reported: the broadcast helpers first run such a
 * dry pass over every axis, so a node rejected for a conflict in its last axis has not
 * already recorded equalities for its first ones (the union-find cannot undo them). */
typedef struct broadcast_pick_t {
  const stax_dim_t* dim; /* NULL until an operand covers this axis */
  bool is_one;
  int32_t operand;
  int32_t axis;
} broadcast_pick_t;

static stax_status_t broadcast_combine(stax_shape_infer_t* ic,
                                       const stax_shape_operand_t* operands, int32_t operand,
                                       int32_t axis, bool unify, broadcast_pick_t* pick) {
  const stax_dim_t* dim = operands[operand].dims[axis];
  bool is_one = stax_shape_dim_is_one(ic, dim);
  if (!pick->dim || (pick->is_one && !is_one)) {
    *pick = (broadcast_pick_t){dim, is_one, operand, axis};
    return STAX_OK;
  }
  if (is_one || stax_dim_known_equal(ic->shape, pick->dim, dim)) return STAX_OK;
  const stax_shape_operand_t* first = &operands[pick->operand];
  const stax_shape_operand_t* second = &operands[operand];
  int64_t first_value = 0, second_value = 0;
  if (stax_shape_dim_const(ic, pick->dim, &first_value) &&
      stax_shape_dim_const(ic, dim, &second_value)) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "cannot broadcast input %d '%s' dim %d (%lld) with input %d '%s' "
                            "dim %d (%lld)",
                            first->input_index, first->name, pick->axis + first->axis_offset,
                            (long long)first_value, second->input_index, second->name,
                            axis + second->axis_offset, (long long)second_value);
  }
  bool first_const = stax_shape_dim_const(ic, pick->dim, &first_value);
  bool second_const = stax_shape_dim_const(ic, dim, &second_value);
  /* Two computed dims either of which may be 1 at run time: the output is their broadcast,
   * and the equality it implies is checked whenever the broadcast is evaluated (docs/ir.md,
   * "Broadcasting"). A dim against a constant other than 1, or two dims that are both known
   * to be at least 2, must be equal: that is unified, and the input guards check it. */
  int64_t first_low = 0, second_low = 0, high = 0;
  stax_dim_bounds(ic->shape, pick->dim, &first_low, &high);
  stax_dim_bounds(ic->shape, dim, &second_low, &high);
  bool broadcast = !first_const && !second_const && (first_low < 2 || second_low < 2);
  if (!unify) {
    /* The dry pass keeps a constant once it sees one, so S, 4, 5 is caught before S == 4. */
    if (second_const) {
      *pick = (broadcast_pick_t){dim, false, operand, axis};
    }
    return STAX_OK;
  }
  if (broadcast) {
    const stax_dim_t* combined = stax_dim_bcast(ic->shape, pick->dim, dim);
    if (!combined) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "cannot broadcast input %d '%s' dim %d with input %d '%s' dim %d",
                              first->input_index, first->name, pick->axis + first->axis_offset,
                              second->input_index, second->name, axis + second->axis_offset);
    }
    pick->dim = combined;
    return STAX_OK;
  }
  return stax_infer_unify(ic, pick->dim, first->input_index, pick->axis + first->axis_offset,
                          dim, second->input_index, axis + second->axis_offset);
}

stax_status_t stax_shape_broadcast(stax_shape_infer_t* ic, int32_t operand_count,
                                   const stax_shape_operand_t* operands, int32_t* out_rank,
                                   const stax_dim_t** out_dims) {
  *out_rank = 0;
  int32_t rank = 0;
  for (int32_t k = 0; k < operand_count; k++) {
    if (operands[k].rank > rank) rank = operands[k].rank;
  }
  if (rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "broadcast result has rank %d; at most %d is supported", rank,
                            STAX_MAX_RANK);
  }
  for (int pass = 0; pass < 2; pass++) {
    bool unify = pass == 1;
    for (int32_t position = 0; position < rank; position++) {
      broadcast_pick_t pick = {NULL, false, -1, -1};
      for (int32_t k = 0; k < operand_count; k++) {
        int32_t offset = rank - operands[k].rank;
        if (position < offset) continue;
        STAX_RETURN_IF_ERROR(
            broadcast_combine(ic, operands, k, position - offset, unify, &pick));
      }
      if (unify) out_dims[position] = stax_dim_resolve(ic->shape, pick.dim);
    }
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  *out_rank = rank;
  return STAX_OK;
}

stax_status_t stax_shape_broadcast_to(stax_shape_infer_t* ic, const stax_shape_operand_t* source,
                                      const stax_shape_operand_t* target) {
  if (source->rank > target->rank) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input %d '%s' has rank %d and cannot broadcast to input %d '%s' "
                            "of rank %d",
                            source->input_index, source->name, source->rank,
                            target->input_index, target->name, target->rank);
  }
  int32_t offset = target->rank - source->rank;
  /* Constant conflicts first, then equalities (see broadcast_combine). */
  for (int32_t step = 0; step < 2 * source->rank; step++) {
    bool unify = step >= source->rank;
    int32_t axis = unify ? step - source->rank : step;
    const stax_dim_t* dim = source->dims[axis];
    const stax_dim_t* target_dim = target->dims[axis + offset];
    if (stax_shape_dim_is_one(ic, dim) || stax_dim_known_equal(ic->shape, dim, target_dim)) {
      continue;
    }
    int64_t value = 0, target_value = 0;
    if (stax_shape_dim_const(ic, dim, &value) &&
        stax_shape_dim_const(ic, target_dim, &target_value)) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "cannot broadcast input %d '%s' dim %d (%lld) to input %d '%s' "
                              "dim %d (%lld)",
                              source->input_index, source->name, axis + source->axis_offset,
                              (long long)value, target->input_index, target->name,
                              axis + offset + target->axis_offset, (long long)target_value);
    }
    if (!unify) continue;
    STAX_RETURN_IF_ERROR(stax_infer_unify(ic, dim, source->input_index,
                                          axis + source->axis_offset, target_dim,
                                          target->input_index,
                                          axis + offset + target->axis_offset));
  }
  return STAX_OK;
}

/* ---- axes -------------------------------------------------------------------------------- */

stax_status_t stax_shape_normalize_axis(const stax_shape_infer_t* ic, int64_t axis,
                                        int32_t rank, const char* what, int32_t* out_axis) {
  *out_axis = 0;
  if (axis < -(int64_t)rank || axis >= rank) {
    if (rank == 0) {
      return stax_infer_error(ic, STAX_OUT_OF_RANGE,
                              "%s %lld is out of range for rank 0 (the input has no axes)",
                              what, (long long)axis);
    }
    return stax_infer_error(ic, STAX_OUT_OF_RANGE,
                            "%s %lld is out of range for rank %d (expected %d to %d)", what,
                            (long long)axis, rank, -rank, rank - 1);
  }
  *out_axis = (int32_t)(axis < 0 ? axis + rank : axis);
  return STAX_OK;
}

/* ---- attributes -------------------------------------------------------------------------- */

stax_status_t stax_shape_attr_flag(const stax_shape_infer_t* ic, const char* name,
                                   bool default_value, bool* out_value) {
  *out_value = default_value;
  int64_t value = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, name, default_value ? 1 : 0, &value));
  if (value != 0 && value != 1) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute '%s' must be 0 or 1, got %lld",
                            name, (long long)value);
  }
  *out_value = value == 1;
  return STAX_OK;
}

/* ---- small integer inputs ---------------------------------------------------------------- */

bool stax_shape_value_content(const stax_shape_infer_t* ic, const stax_value_t* value,
                              int32_t capacity, const stax_dim_t** out_content,
                              int32_t* out_count) {
  *out_count = 0;
  if (!value || value->rank > 1) return false;
  if (value->content_count >= 0 && value->content) {
    if (value->content_count > capacity) return false;
    for (int32_t k = 0; k < value->content_count; k++) out_content[k] = value->content[k];
    *out_count = value->content_count;
    return true;
  }
  const stax_tensor_t* tensor = value->constant;
  if (!tensor) return false;
  stax_dtype_t dtype = stax_tensor_dtype(tensor);
  if (!stax_dtype_is_integer(dtype) || stax_tensor_rank(tensor) > 1) return false;
  int64_t count = stax_tensor_element_count(tensor);
  if (count > capacity) return false;
  /* Constants may be views: step through the buffer by the tensor's stride. */
  int64_t stride = stax_tensor_rank(tensor) == 1 ? stax_tensor_strides(tensor)[0] : 0;
  const char* data = (const char*)stax_tensor_data(tensor);
  size_t element_size = stax_dtype_size(dtype);
  for (int64_t k = 0; k < count; k++) {
    int64_t element = 0;
    stax_convert_elements(dtype, data + k * stride * (int64_t)element_size, STAX_DTYPE_INT64,
                          &element, 1);
    out_content[k] = stax_dim_const(ic->shape, element);
    if (!out_content[k]) return false;
  }
  *out_count = (int32_t)count;
  return true;
}

stax_status_t stax_shape_read_const_ints(const stax_shape_infer_t* ic, int32_t i,
                                         const char* what, int32_t capacity,
                                         int64_t* out_values, int32_t* out_count) {
  *out_count = 0;
  stax_shape_operand_t operand;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, i, &operand));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &operand, STAX_DTYPES_INT,
                                                "an integer type"));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &operand, 0, 1));
  int64_t length = 0;
  if (operand.rank == 1 && stax_shape_dim_const(ic, operand.dims[0], &length) &&
      length > capacity) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "%s (input %d '%s') has %lld elements; at most %d are supported",
                            what, i, operand.name, (long long)length, capacity);
  }
  const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
  int32_t count = 0;
  int32_t limit = capacity < STAX_SHAPE_CONTENT_MAX ? capacity : STAX_SHAPE_CONTENT_MAX;
  bool known = stax_shape_value_content(ic, stax_infer_input(ic, i), limit, content, &count);
  for (int32_t k = 0; known && k < count; k++) {
    known = stax_shape_dim_const(ic, content[k], &out_values[k]);
  }
  if (!known) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "%s (input %d '%s') must be constant when the graph is built",
                            what, i, operand.name);
  }
  *out_count = count;
  return STAX_OK;
}

/* ---- outputs ----------------------------------------------------------------------------- */

int32_t stax_shape_output_count(const stax_shape_infer_t* ic) {
  return ic->node->output_count;
}

bool stax_shape_output_requested(const stax_shape_infer_t* ic, int32_t i) {
  return i >= 0 && i < ic->node->output_count && ic->node->outputs &&
         ic->node->outputs[i] != STAX_VALUE_NONE;
}

stax_status_t stax_shape_set_output(stax_shape_infer_t* ic, int32_t i, stax_dtype_t dtype,
                                    int32_t rank, const stax_dim_t* const* dims) {
  if (!stax_shape_output_requested(ic, i)) return STAX_OK;
  return stax_infer_set_output(ic, i, dtype, rank, dims);
}
