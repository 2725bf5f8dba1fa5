/* Shape functions of the sequence ops (ONNX sequence values; ops.def "sequences"). A sequence
 * value records its elements' dtype, their rank when every element has the same one, and the
 * dims every element shares (stax_value_t.elem_*); SequenceAt and ConcatFromSequence turn
 * that into a tensor shape, with fresh symbols (bound after the kernel runs) for what the
 * elements do not share. A sequence's length is never known at build time. */
#include <stdio.h>

#include "passes/shape/shape_operands.h"

void stax_shape_merge_elements(stax_shape_ctx_t* shape, int32_t rank_a,
                               const stax_dim_t* const* dims_a, int32_t rank_b,
                               const stax_dim_t* const* dims_b, bool constants_only,
                               int32_t* out_rank, const stax_dim_t** out_dims) {
  if (rank_a == STAX_ELEM_RANK_EMPTY) {
    rank_a = rank_b;
    dims_a = dims_b;
  } else if (rank_b == STAX_ELEM_RANK_EMPTY) {
    rank_b = rank_a;
    dims_b = dims_a;
  }
  if (rank_a != rank_b || rank_a < 0) {
    *out_rank = rank_a == rank_b ? rank_a : STAX_ELEM_RANK_UNKNOWN;
    return;
  }
  *out_rank = rank_a;
  for (int32_t d = 0; d < rank_a; d++) {
    const stax_dim_t* a = dims_a ? dims_a[d] : NULL;
    const stax_dim_t* b = dims_b ? dims_b[d] : NULL;
    bool keep = a && b && stax_dim_known_equal(shape, a, b);
    if (keep && constants_only) keep = stax_dim_is_const(stax_dim_resolve(shape, a));
    out_dims[d] = keep ? a : NULL;
  }
}

/* Input i, which the op checks is a sequence (stax_shape_infer_node did). */
static const stax_value_t* sequence_input(const stax_shape_infer_t* ic, int32_t i) {
  return stax_infer_input(ic, i);
}

/* A position input (int32/int64 scalar), when present. */
static stax_status_t check_position(stax_shape_infer_t* ic, int32_t i, const char* what) {
  stax_shape_operand_t position;
  bool present = false;
  stax_shape_read_input(ic, i, &position, &present);
  if (!present) return STAX_OK;
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &position, STAX_DTYPES_INDEX, "int32 or int64"));
  return stax_shape_require_scalar(ic, &position, what);
}

/* The element shape of a sequence as a tensor shape: shared dims, fresh symbols for the rest
 * (the SHAPE_VARIANT after the kernel binds them). */
static stax_status_t element_dims(stax_shape_infer_t* ic, const stax_value_t* sequence,
                                  const char* use, const stax_dim_t** out_dims) {
  if (sequence->elem_rank < 0)
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "the elements of input 0 '%s' have no known rank (%s); stax needs "
                            "it to %s (declare the sequence's element shape in the model)",
                            sequence->name,
                            sequence->elem_rank == STAX_ELEM_RANK_EMPTY ? "it is always empty"
                                                                        : "they may differ",
                            use);
  for (int32_t d = 0; d < sequence->elem_rank; d++) {
    const stax_dim_t* dim = sequence->elem_dims ? sequence->elem_dims[d] : NULL;
    if (dim) {
      out_dims[d] = dim;
    } else {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, d, 0, STAX_DIM_MAX, &out_dims[d]));
    }
  }
  return STAX_OK;
}

stax_status_t stax_shape_sequence_empty(stax_shape_infer_t* ic) {
  int64_t code = 0;
  stax_dtype_t dtype = STAX_DTYPE_INVALID;
  STAX_RETURN_IF_ERROR(stax_node_attr_onnx_dtype(ic->node, "dtype", &code, &dtype));
  if (code == 0) dtype = STAX_DTYPE_FLOAT32; /* ONNX's default */
  if (dtype == STAX_DTYPE_INVALID)
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "attribute 'dtype' is ONNX type %lld, which stax has no dtype for",
                            (long long)code);
  return stax_infer_set_sequence_output(ic, 0, dtype, STAX_ELEM_RANK_EMPTY, NULL);
}

stax_status_t stax_shape_sequence_construct(stax_shape_infer_t* ic) {
  stax_shape_operand_t first;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &first));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &first));
  int32_t rank = first.rank;
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t d = 0; d < rank; d++) dims[d] = first.dims[d];
  for (int32_t k = 1; k < ic->node->input_count; k++) {
    stax_shape_operand_t input;
    STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, k, &input));
    STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &first, &input));
    const stax_dim_t* merged[STAX_MAX_RANK];
    stax_shape_merge_elements(ic->shape, rank, dims, input.rank, input.dims, false, &rank, merged);
    for (int32_t d = 0; d < rank; d++) dims[d] = merged[d];
  }
  return stax_infer_set_sequence_output(ic, 0, first.dtype, rank, dims);
}

stax_status_t stax_shape_sequence_insert(stax_shape_infer_t* ic) {
  const stax_value_t* sequence = sequence_input(ic, 0);
  stax_shape_operand_t tensor;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &tensor));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &tensor));
  if (tensor.dtype != sequence->dtype)
    return stax_infer_error(ic, STAX_DTYPE_MISMATCH,
                            "input 1 '%s' is %s, but sequence input 0 '%s' holds %s tensors",
                            tensor.name, stax_dtype_name(tensor.dtype), sequence->name,
                            stax_dtype_name(sequence->dtype));
  STAX_RETURN_IF_ERROR(check_position(ic, 2, "position"));
  int32_t rank = 0;
  const stax_dim_t* dims[STAX_MAX_RANK];
  stax_shape_merge_elements(ic->shape, sequence->elem_rank,
                            (const stax_dim_t* const*)sequence->elem_dims, tensor.rank,
                            tensor.dims, false, &rank, dims);
  return stax_infer_set_sequence_output(ic, 0, sequence->dtype, rank, dims);
}

stax_status_t stax_shape_sequence_erase(stax_shape_infer_t* ic) {
  const stax_value_t* sequence = sequence_input(ic, 0);
  STAX_RETURN_IF_ERROR(check_position(ic, 1, "position"));
  return stax_infer_set_sequence_output(ic, 0, sequence->dtype, sequence->elem_rank,
                                        (const stax_dim_t* const*)sequence->elem_dims);
}

stax_status_t stax_shape_sequence_at(stax_shape_infer_t* ic) {
  const stax_value_t* sequence = sequence_input(ic, 0);
  stax_shape_operand_t position;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &position));
  STAX_RETURN_IF_ERROR(check_position(ic, 1, "position"));
  const stax_dim_t* dims[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(element_dims(ic, sequence, "give the element a shape", dims));
  return stax_infer_set_output(ic, 0, sequence->dtype, sequence->elem_rank, dims);
}

stax_status_t stax_shape_sequence_length(stax_shape_infer_t* ic) {
  return stax_infer_set_output(ic, 0, STAX_DTYPE_INT64, 0, NULL);
}

stax_status_t stax_shape_split_to_sequence(stax_shape_infer_t* ic) {
  stax_shape_operand_t input;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &input));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &input));
  if (input.rank < 1)
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 0 '%s' is a scalar; SplitToSequence needs rank >= 1",
                            input.name);
  int64_t axis_value = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_value));
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_value, input.rank, "axis", &axis));
  bool keepdims = true;
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "keepdims", true, &keepdims));
  stax_shape_operand_t split;
  bool has_split = false;
  stax_shape_read_input(ic, 1, &split, &has_split);
  if (has_split) {
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &split, STAX_DTYPES_INDEX, "int32 or int64"));
    STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &split, 0, 1));
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  for (int32_t d = 0; d < input.rank; d++) {
    if (d != axis) {
      dims[rank++] = input.dims[d];
    } else if (has_split) {
      dims[rank++] = NULL; /* chunk sizes differ (the last, or the given ones) */
    } else if (keepdims) {
      dims[rank++] = stax_dim_const(ic->shape, 1);
      STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
    }
  }
  return stax_infer_set_sequence_output(ic, 0, input.dtype, rank, dims);
}

stax_status_t stax_shape_concat_from_sequence(stax_shape_infer_t* ic) {
  const stax_value_t* sequence = sequence_input(ic, 0);
  bool new_axis = false;
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "new_axis", false, &new_axis));
  const stax_node_attr_t* axis_attr = stax_node_attr_find(ic->node, "axis");
  if (!axis_attr)
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'axis' is required");
  int64_t axis_value = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 0, &axis_value));
  const stax_dim_t* elem[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(element_dims(ic, sequence, "concatenate them", elem));
  int32_t elem_rank = sequence->elem_rank;
  int32_t rank = elem_rank + (new_axis ? 1 : 0);
  if (rank > STAX_MAX_RANK)
    return stax_infer_error(ic, STAX_UNIMPLEMENTED, "the output would have rank %d; at most %d",
                            rank, STAX_MAX_RANK);
  if (rank == 0)
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "the elements of input 0 '%s' are scalars; ConcatFromSequence needs "
                            "rank >= 1 or new_axis = 1",
                            sequence->name);
  int32_t axis = 0;
  STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axis_value, rank, "axis", &axis));
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t d = 0, e = 0; d < rank; d++) {
    if (d == axis) {
      /* The sequence's length (new_axis), or the sum of the elements' dims along it. */
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, d, 0, STAX_DIM_MAX, &dims[d]));
      if (!new_axis) e++;
    } else {
      dims[d] = elem[e++];
    }
  }
  return stax_infer_set_output(ic, 0, sequence->dtype, rank, dims);
}
