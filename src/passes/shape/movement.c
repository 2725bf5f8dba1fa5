/* Shape functions for ops that rearrange elements without changing their count: Reshape,
 * Flatten, Transpose, Squeeze, Unsqueeze, DepthToSpace and SpaceToDepth.
 *
 * Reshape reads its target shape from the shape input's constant or symbolic contents, so
 * Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [12, 64])) infers [B, S, 12, 64].
 * Assumption: a *symbolic* entry of the target shape is taken as the size itself; ONNX would
 * read an entry that is 0 at run time as "copy the input dim" (unless allowzero). Entries
 * built from Shape() are real sizes, so this only matters for hand-made shape arithmetic. */
#include <stdio.h>
#include <string.h>

#include "passes/shape/shape_operands.h"

/* ---- Reshape ----------------------------------------------------------------------------- */

/* Resolves the -1 entry (at `inferred`) as input elements / product of the other entries. */
static stax_status_t reshape_infer_minus_one(stax_shape_infer_t* ic,
                                             const stax_shape_operand_t* data,
                                             const stax_dim_t* input_elements, int32_t rank,
                                             const stax_dim_t** dims, int32_t inferred,
                                             const stax_shape_vector_t* target) {
  const stax_dim_t* others = stax_dim_const(ic->shape, 1);
  for (int32_t k = 0; k < rank; k++) {
    if (k != inferred) others = stax_dim_mul(ic->shape, others, dims[k]);
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  int64_t input_count = 0, others_count = 0;
  bool input_const = stax_shape_dim_const(ic, input_elements, &input_count);
  bool others_const = stax_shape_dim_const(ic, others, &others_count);
  char input_text[256], target_text[256];
  if (input_const && others_const) {
    if (others_count == 0 || input_count % others_count != 0) {
      return stax_infer_error(
          ic, STAX_SHAPE_MISMATCH,
          "cannot reshape input 0 '%s' of shape %s (%lld elements) to %s: the other entries "
          "multiply to %lld, which does not divide %lld",
          data->name, stax_shape_dims_text(ic, data->rank, data->dims, input_text,
                                           sizeof(input_text)),
          (long long)input_count,
          stax_shape_dims_text(ic, (int32_t)target->count, target->entries, target_text,
                               sizeof(target_text)),
          (long long)others_count, (long long)input_count);
    }
    dims[inferred] = stax_dim_const(ic->shape, input_count / others_count);
    return stax_infer_check_dims(ic);
  }
  int64_t low = 0, high = 0;
  stax_dim_bounds(ic->shape, others, &low, &high);
  if (low >= 1) {
    /* Exact divisions simplify: (B*S*768) / (B*S*12) is 64. */
    dims[inferred] = stax_dim_floordiv(ic->shape, input_elements, others);
    return stax_infer_check_dims(ic);
  }
  /* The other entries may multiply to 0, where -1 is ambiguous: a fresh symbol stands in. */
  return stax_shape_fresh_dim(ic, 0, inferred, 0, STAX_DIM_MAX, &dims[inferred]);
}

stax_status_t stax_shape_reshape(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  bool allow_zero = false;
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "allowzero", false, &allow_zero));
  stax_shape_vector_t target;
  STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 1, "shape", &target));
  STAX_RETURN_IF_ERROR(stax_shape_require_vector_length(ic, 1, "shape", &target));
  if (target.count > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "the target shape has %lld entries; at most rank %d is supported",
                            (long long)target.count, STAX_MAX_RANK);
  }
  int32_t rank = (int32_t)target.count;
  const stax_dim_t* dims[STAX_MAX_RANK];
  if (!target.known) {
    for (int32_t k = 0; k < rank; k++) {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, k, 0, STAX_DIM_MAX, &dims[k]));
    }
    return stax_infer_set_output(ic, 0, data.dtype, rank, dims);
  }

  int32_t inferred = -1;
  bool has_zero = false;
  for (int32_t k = 0; k < rank; k++) {
    int64_t entry = 0;
    dims[k] = target.entries[k];
    if (!stax_shape_dim_const(ic, target.entries[k], &entry)) continue;
    if (entry == -1) {
      if (inferred >= 0) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                                "the target shape has more than one -1 (entries %d and %d)",
                                inferred, k);
      }
      inferred = k;
    } else if (entry == 0 && !allow_zero) {
      if (k >= data.rank) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                                "target shape entry %d is 0 (copy the input dim), but input 0 "
                                "'%s' has rank %d",
                                k, data.name, data.rank);
      }
      dims[k] = data.dims[k];
    } else if (entry < -1) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "target shape entry %d is %lld; entries must be >= -1", k,
                              (long long)entry);
    } else if (entry == 0) {
      has_zero = true;
    }
  }
  if (allow_zero && has_zero && inferred >= 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "with allowzero=1 the target shape cannot hold both 0 and -1");
  }

  const stax_dim_t* input_elements = stax_shape_product(ic, data.rank, data.dims);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  if (inferred >= 0) {
    STAX_RETURN_IF_ERROR(
        reshape_infer_minus_one(ic, &data, input_elements, rank, dims, inferred, &target));
  }
  const stax_dim_t* output_elements = stax_shape_product(ic, rank, dims);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  char input_text[256], output_text[256];
  stax_shape_dims_text(ic, data.rank, data.dims, input_text, sizeof(input_text));
  stax_shape_dims_text(ic, rank, dims, output_text, sizeof(output_text));
  int64_t input_count = 0, output_count = 0;
  if (stax_shape_dim_const(ic, input_elements, &input_count) &&
      stax_shape_dim_const(ic, output_elements, &output_count) && input_count != output_count) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "cannot reshape input 0 '%s' of shape %s (%lld elements) to %s "
                            "(%lld elements)",
                            data.name, input_text, (long long)input_count, output_text,
                            (long long)output_count);
  }
  char input_origin[320], output_origin[320];
  snprintf(input_origin, sizeof(input_origin), "element count of input 0 %s", input_text);
  snprintf(output_origin, sizeof(output_origin), "element count of the target shape %s",
           output_text);
  STAX_RETURN_IF_ERROR(stax_shape_unify_described(ic, input_elements, input_origin,
                                                  output_elements, output_origin));
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, data.dtype, rank, dims));
  return stax_shape_forward_content(ic, stax_infer_input(ic, 0), 0, rank);
}

/* ---- Flatten ----------------------------------------------------------------------------- */

stax_status_t stax_shape_flatten(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  int64_t axis_attr = 1;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "axis", 1, &axis_attr));
  /* The split point lies in [-rank, rank]: it may equal the rank (everything in the first
   * dim), and a negative one counts from the back (so -rank is 0). */
  if (axis_attr < -(int64_t)data.rank || axis_attr > data.rank) {
    return stax_infer_error(ic, STAX_OUT_OF_RANGE,
                            "axis %lld is out of range for rank %d (expected %d to %d)",
                            (long long)axis_attr, data.rank, -data.rank, data.rank);
  }
  int32_t axis = (int32_t)(axis_attr < 0 ? axis_attr + data.rank : axis_attr);
  const stax_dim_t* dims[2] = {
      stax_shape_product(ic, axis, data.dims),
      stax_shape_product(ic, data.rank - axis, axis < data.rank ? data.dims + axis : NULL),
  };
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_output(ic, 0, data.dtype, 2, dims);
}

/* ---- Transpose --------------------------------------------------------------------------- */

stax_status_t stax_shape_transpose(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &data));
  int32_t perm_count = -1;
  const int64_t* perm = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(ic->node, "perm", &perm_count, &perm));
  const stax_dim_t* dims[STAX_MAX_RANK];
  if (perm_count < 0) {
    for (int32_t k = 0; k < data.rank; k++) dims[k] = data.dims[data.rank - 1 - k];
    return stax_infer_set_output(ic, 0, data.dtype, data.rank, dims);
  }
  if (perm_count != data.rank) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'perm' has %d entries but input 0 '%s' has rank %d",
                            perm_count, data.name, data.rank);
  }
  bool used[STAX_MAX_RANK] = {false};
  for (int32_t k = 0; k < perm_count; k++) {
    if (perm[k] < 0 || perm[k] >= data.rank) {
      return stax_infer_error(ic, STAX_OUT_OF_RANGE,
                              "perm[%d] = %lld is out of range for rank %d (expected 0 to %d)",
                              k, (long long)perm[k], data.rank, data.rank - 1);
    }
    if (used[perm[k]]) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "perm[%d] = %lld repeats an axis; perm must be a permutation", k,
                              (long long)perm[k]);
    }
    used[perm[k]] = true;
    dims[k] = data.dims[perm[k]];
  }
  return stax_infer_set_output(ic, 0, data.dtype, data.rank, dims);
}

/* ---- Squeeze / Unsqueeze ----------------------------------------------------------------- */

/* The axes of Squeeze/Unsqueeze: input 1 (opset 13) or the "axes" attribute (older opsets).
 * *out_count is -1 when neither is given. When input 1 is only known at run time but has a
 * static length, *out_known is false and *out_count is that length. */
static stax_status_t read_axes(stax_shape_infer_t* ic, int64_t* out_axes, int32_t* out_count,
                               bool* out_known) {
  *out_count = -1;
  *out_known = true;
  if (stax_infer_input(ic, 1)) {
    stax_shape_vector_t axes;
    STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 1, "axes", &axes));
    STAX_RETURN_IF_ERROR(stax_shape_require_vector_length(ic, 1, "axes", &axes));
    if (axes.count > STAX_SHAPE_CONTENT_MAX) {
      return stax_infer_error(ic, STAX_UNIMPLEMENTED, "axes (input 1) has %lld entries",
                              (long long)axes.count);
    }
    *out_count = (int32_t)axes.count;
    for (int32_t k = 0; k < *out_count && *out_known; k++) {
      *out_known = stax_shape_vector_const(ic, &axes, k, &out_axes[k]);
    }
    return STAX_OK;
  }
  int32_t count = -1;
  const int64_t* axes = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_ints(ic->node, "axes", &count, &axes));
  if (count > STAX_SHAPE_CONTENT_MAX) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'axes' has %d entries", count);
  }
  for (int32_t k = 0; k < count; k++) out_axes[k] = axes[k];
  *out_count = count;
  return STAX_OK;
}

/* Output dims when the axes are known only at run time: the rank is known, but not which
 * dims move, so every dim is a fresh symbol bounded by the largest input dim (or 1). */
static stax_status_t fresh_dims_for_unknown_axes(stax_shape_infer_t* ic,
                                                 const stax_shape_operand_t* data, int32_t rank) {
  int64_t upper = 1;
  for (int32_t k = 0; k < data->rank; k++) {
    int64_t dim_upper = stax_shape_dim_upper(ic, data->dims[k]);
    if (dim_upper > upper) upper = dim_upper;
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < rank; k++) {
    STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, k, 0, upper, &dims[k]));
  }
  return stax_infer_set_output(ic, 0, data->dtype, rank, dims);
}

/* Normalizes axes against `rank` into a membership mask; repeats are errors. */
static stax_status_t axes_mask(stax_shape_infer_t* ic, const int64_t* axes, int32_t count,
                               int32_t rank, bool* mask) {
  for (int32_t k = 0; k < rank; k++) mask[k] = false;
  for (int32_t k = 0; k < count; k++) {
    char what[32];
    snprintf(what, sizeof(what), "axes[%d]", k);
    int32_t axis = 0;
    STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, axes[k], rank, what, &axis));
    if (mask[axis]) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "axes[%d] = %lld repeats axis %d", k,
                              (long long)axes[k], axis);
    }
    mask[axis] = true;
  }
  return STAX_OK;
}

stax_status_t stax_shape_squeeze(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank_limit(ic, &data));
  int64_t axes[STAX_SHAPE_CONTENT_MAX];
  int32_t axis_count = -1;
  bool axes_known = true;
  STAX_RETURN_IF_ERROR(read_axes(ic, axes, &axis_count, &axes_known));
  if (!axes_known) {
    if (axis_count > data.rank) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "axes (input 1) has %d entries but input 0 '%s' has rank %d",
                              axis_count, data.name, data.rank);
    }
    return fresh_dims_for_unknown_axes(ic, &data, data.rank - axis_count);
  }
  bool squeezed[STAX_MAX_RANK];
  if (axis_count >= 0) {
    STAX_RETURN_IF_ERROR(axes_mask(ic, axes, axis_count, data.rank, squeezed));
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  for (int32_t k = 0; k < data.rank; k++) {
    const stax_dim_t* dim = data.dims[k];
    int64_t value = 0;
    bool is_const = stax_shape_dim_const(ic, dim, &value);
    char dim_text[96];
    if (axis_count < 0) {
      /* No axes: squeeze every dim of size 1, which a symbolic dim must rule in or out. */
      int64_t low = 0, high = 0;
      stax_dim_bounds(ic->shape, dim, &low, &high);
      if (!is_const && low <= 1 && high >= 1) {
        return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                                "input 0 '%s' dim %d is %s; without axes the output rank "
                                "depends on whether it is 1",
                                data.name, k, stax_shape_dim_text(ic, dim, dim_text,
                                                                  sizeof(dim_text)));
      }
      if (!(is_const && value == 1)) dims[rank++] = dim;
      continue;
    }
    if (!squeezed[k]) {
      dims[rank++] = dim;
      continue;
    }
    if (is_const && value != 1) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "cannot squeeze input 0 '%s' dim %d: it is %lld, not 1",
                              data.name, k, (long long)value);
    }
    if (!is_const) {
      char origin[256];
      snprintf(origin, sizeof(origin), "Squeeze node '%s' input 0, dim %d", ic->node->name, k);
      STAX_RETURN_IF_ERROR(stax_shape_unify_described(ic, dim, origin,
                                                      stax_dim_const(ic->shape, 1),
                                                      "a squeezed dim, which must be 1"));
    }
  }
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, data.dtype, rank, dims));
  return stax_shape_forward_content(ic, stax_infer_input(ic, 0), 0, rank);
}

stax_status_t stax_shape_unsqueeze(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  int64_t axes[STAX_SHAPE_CONTENT_MAX];
  int32_t axis_count = -1;
  bool axes_known = true;
  STAX_RETURN_IF_ERROR(read_axes(ic, axes, &axis_count, &axes_known));
  if (axis_count < 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "needs axes (input 1, or the 'axes' attribute before opset 13)");
  }
  int32_t rank = data.rank + axis_count;
  if (rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "the output has rank %d; at most %d is supported", rank,
                            STAX_MAX_RANK);
  }
  if (!axes_known) return fresh_dims_for_unknown_axes(ic, &data, rank);
  bool inserted[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(axes_mask(ic, axes, axis_count, rank, inserted));
  const stax_dim_t* dims[STAX_MAX_RANK];
  const stax_dim_t* one = stax_dim_const(ic->shape, 1);
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  for (int32_t k = 0, next = 0; k < rank; k++) dims[k] = inserted[k] ? one : data.dims[next++];
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, data.dtype, rank, dims));
  return stax_shape_forward_content(ic, stax_infer_input(ic, 0), 0, rank);
}

/* ---- DepthToSpace / SpaceToDepth --------------------------------------------------------- */

static stax_status_t read_blocksize(stax_shape_infer_t* ic, int64_t* out_blocksize) {
  *out_blocksize = 0;
  if (!stax_node_attr_find(ic->node, "blocksize")) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'blocksize' is required");
  }
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "blocksize", 0, out_blocksize));
  if (*out_blocksize < 1 || *out_blocksize > (1 << 20)) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'blocksize' must be between 1 and %d, got %lld", 1 << 20,
                            (long long)*out_blocksize);
  }
  return STAX_OK;
}

/* SHAPE_MISMATCH when a constant dim is not a multiple of `divisor`. */
static stax_status_t require_divisible(stax_shape_infer_t* ic, const stax_shape_operand_t* data,
                                       int32_t axis, int64_t divisor) {
  int64_t value = 0;
  if (stax_shape_dim_const(ic, data->dims[axis], &value) && value % divisor != 0) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input 0 '%s' dim %d is %lld, not a multiple of %lld", data->name,
                            axis, (long long)value, (long long)divisor);
  }
  return STAX_OK;
}

/* DepthToSpace's mode, and SpaceToDepth's since opset 28: DCR (the default) or CRD. */
static stax_status_t check_block_mode(stax_shape_infer_t* ic) {
  const char* mode = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "mode", "DCR", &mode));
  if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'mode' must be \"DCR\" or \"CRD\", got \"%s\"", mode);
  }
  return STAX_OK;
}

/* What DepthToSpace and SpaceToDepth both check first: a rank-4 input, the blocksize, the
 * mode. */
static stax_status_t block_operand(stax_shape_infer_t* ic, stax_shape_operand_t* data,
                                   int64_t* blocksize) {
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, data, 4, 4));
  STAX_RETURN_IF_ERROR(read_blocksize(ic, blocksize));
  return check_block_mode(ic);
}

stax_status_t stax_shape_depth_to_space(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  int64_t blocksize = 0;
  STAX_RETURN_IF_ERROR(block_operand(ic, &data, &blocksize));
  STAX_RETURN_IF_ERROR(require_divisible(ic, &data, 1, blocksize * blocksize));
  /* A symbolic channel count is assumed divisible; the kernel checks it at run time. */
  const stax_dim_t* dims[4] = {
      data.dims[0],
      stax_dim_floordiv(ic->shape, data.dims[1],
                        stax_dim_const(ic->shape, blocksize * blocksize)),
      stax_dim_mul_const(ic->shape, data.dims[2], blocksize),
      stax_dim_mul_const(ic->shape, data.dims[3], blocksize),
  };
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_output(ic, 0, data.dtype, 4, dims);
}

stax_status_t stax_shape_space_to_depth(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  int64_t blocksize = 0;
  STAX_RETURN_IF_ERROR(block_operand(ic, &data, &blocksize));
  STAX_RETURN_IF_ERROR(require_divisible(ic, &data, 2, blocksize));
  STAX_RETURN_IF_ERROR(require_divisible(ic, &data, 3, blocksize));
  const stax_dim_t* block = stax_dim_const(ic->shape, blocksize);
  const stax_dim_t* dims[4] = {
      data.dims[0],
      stax_dim_mul_const(ic->shape, data.dims[1], blocksize * blocksize),
      stax_dim_floordiv(ic->shape, data.dims[2], block),
      stax_dim_floordiv(ic->shape, data.dims[3], block),
  };
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  return stax_infer_set_output(ic, 0, data.dtype, 4, dims);
}
