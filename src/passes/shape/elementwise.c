/* Shape functions for elementwise ops: binary arithmetic, comparisons and logic, variadic
 * Max/Min/Sum/Mean, Where, unary math, IsNaN/IsInf, Cast/CastLike and Dropout.
 *
 * Outputs take the numpy broadcast of the inputs' shapes (shape_util.c). Integer arithmetic
 * on small shape-carrying tensors (the output of Shape, Concat of shape pieces) also
 * propagates symbolic contents, so Reshape(x, Shape(y) * 2) still infers symbolically. */
#include <string.h>

#include "passes/shape/shape_util.h"

/* ---- symbolic contents ------------------------------------------------------------------- */

typedef enum content_op_e {
  CONTENT_ADD,
  CONTENT_SUB,
  CONTENT_MUL,
  CONTENT_DIV,
  CONTENT_MAX,
  CONTENT_MIN,
} content_op_t;

static const stax_dim_t* content_apply(stax_shape_infer_t* ic, content_op_t op,
                                       const stax_dim_t* a, const stax_dim_t* b) {
  switch (op) {
    case CONTENT_ADD: return stax_dim_add(ic->shape, a, b);
    case CONTENT_SUB: return stax_dim_sub(ic->shape, a, b);
    case CONTENT_MUL: return stax_dim_mul(ic->shape, a, b);
    case CONTENT_MAX: return stax_dim_max(ic->shape, a, b);
    case CONTENT_MIN: return stax_dim_min(ic->shape, a, b);
    case CONTENT_DIV: {
      /* ONNX integer Div truncates; it equals floor division only for a non-negative
       * dividend and a positive divisor, so other cases stay unknown. */
      int64_t divisor = 0, low = 0, high = 0;
      if (!stax_shape_dim_const(ic, b, &divisor) || divisor <= 0) return NULL;
      stax_dim_bounds(ic->shape, a, &low, &high);
      if (low < 0) return NULL;
      return stax_dim_floordiv(ic->shape, a, b);
    }
  }
  return NULL;
}

/* Folds the contents of `count` integer inputs elementwise (with scalar broadcasting) into
 * output 0's contents. Silently does nothing when any content is unknown. */
static stax_status_t propagate_content(stax_shape_infer_t* ic, content_op_t op, int32_t count,
                                       int32_t output_rank) {
  if (output_rank > 1) return STAX_OK;
  const stax_dim_t* result[STAX_SHAPE_CONTENT_MAX];
  const stax_dim_t* next[STAX_SHAPE_CONTENT_MAX];
  const stax_dim_t* combined_content[STAX_SHAPE_CONTENT_MAX];
  int32_t result_count = 0;
  for (int32_t i = 0; i < count; i++) {
    const stax_value_t* value = stax_infer_input(ic, i);
    int32_t next_count = 0;
    if (!value || !stax_dtype_is_integer(value->dtype) ||
        !stax_shape_value_content(ic, value, STAX_SHAPE_CONTENT_MAX, next, &next_count)) {
      return STAX_OK;
    }
    if (i == 0) {
      memcpy(result, next, sizeof(result[0]) * (size_t)next_count);
      result_count = next_count;
      continue;
    }
    if (next_count != result_count && next_count != 1 && result_count != 1) return STAX_OK;
    /* numpy rules: a single element broadcasts, so [0] with [1] stays empty. */
    int32_t combined = result_count == 1 ? next_count : result_count;
    for (int32_t k = 0; k < combined; k++) {
      const stax_dim_t* a = result[result_count == 1 ? 0 : k];
      const stax_dim_t* b = next[next_count == 1 ? 0 : k];
      combined_content[k] = content_apply(ic, op, a, b);
      if (!combined_content[k]) {
        /* A refused division is not an error; drop any construction error it left. */
        stax_status_free(stax_shape_ctx_take_error(ic->shape));
        return STAX_OK;
      }
    }
    memcpy(result, combined_content, sizeof(result[0]) * (size_t)combined);
    result_count = combined;
  }
  return stax_infer_set_content(ic, 0, result_count, result);
}

/* Copies input 0's contents (and constant) to output 0 for ops that do not change values. */
static stax_status_t forward_content(stax_shape_infer_t* ic, bool forward_constant) {
  const stax_value_t* value = stax_infer_input(ic, 0);
  if (!value) return STAX_OK;
  if (forward_constant && value->constant) stax_infer_set_constant(ic, 0, value->constant);
  if (value->content_count >= 0 && value->content) {
    return stax_infer_set_content(ic, 0, value->content_count, value->content);
  }
  return STAX_OK;
}

/* ---- binary arithmetic ------------------------------------------------------------------- */

static stax_status_t check_binary_dtypes(stax_shape_infer_t* ic, const stax_shape_operand_t* a,
                                         const stax_shape_operand_t* b) {
  switch (ic->node->op) {
    case STAX_OP_Pow:
      /* Pow alone lets the exponent's type differ from the base's. */
      STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, a, STAX_DTYPES_NUMERIC, "a number"));
      return stax_shape_require_dtype(ic, b, STAX_DTYPES_NUMERIC, "a number");
    case STAX_OP_BitShift: {
      /* Signed types since opset 28 (arithmetic right shift). */
      STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, a, STAX_DTYPES_INT,
                                                    "an integer type"));
      STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, a, b));
      const char* direction = NULL;
      STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "direction", NULL, &direction));
      if (!direction || (strcmp(direction, "LEFT") != 0 && strcmp(direction, "RIGHT") != 0)) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                                "attribute 'direction' must be \"LEFT\" or \"RIGHT\", got %s%s%s",
                                direction ? "\"" : "", direction ? direction : "none",
                                direction ? "\"" : "");
      }
      return STAX_OK;
    }
    case STAX_OP_Mod: {
      STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, a, STAX_DTYPES_NUMERIC, "a number"));
      STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, a, b));
      int64_t fmod = 0;
      STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "fmod", 0, &fmod));
      if (fmod != 0 && fmod != 1) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                                "attribute 'fmod' must be 0 or 1, got %lld", (long long)fmod);
      }
      /* fmod = 0 on floats: numpy's mod, which opset 28 defines (earlier opsets left it
       * undefined, so accepting it there changes no valid model). */
      return STAX_OK;
    }
    default:
      STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, a, b));
      return stax_shape_require_dtype(ic, a, STAX_DTYPES_NUMERIC, "a number");
  }
}

stax_status_t stax_shape_binary(stax_shape_infer_t* ic) {
  stax_shape_operand_t operands[2];
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &operands[0]));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &operands[1]));
  STAX_RETURN_IF_ERROR(check_binary_dtypes(ic, &operands[0], &operands[1]));
  if (ic->node->op == STAX_OP_PRelu) {
    /* The slope broadcasts into X; the output keeps X's shape. */
    STAX_RETURN_IF_ERROR(stax_shape_broadcast_to(ic, &operands[1], &operands[0]));
    return stax_shape_set_output(ic, 0, operands[0].dtype, operands[0].rank, operands[0].dims);
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  STAX_RETURN_IF_ERROR(stax_shape_broadcast(ic, 2, operands, &rank, dims));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, operands[0].dtype, rank, dims));
  switch (ic->node->op) {
    case STAX_OP_Add: return propagate_content(ic, CONTENT_ADD, 2, rank);
    case STAX_OP_Sub: return propagate_content(ic, CONTENT_SUB, 2, rank);
    case STAX_OP_Mul: return propagate_content(ic, CONTENT_MUL, 2, rank);
    case STAX_OP_Div: return propagate_content(ic, CONTENT_DIV, 2, rank);
    default: return STAX_OK;
  }
}

/* ---- comparisons and logic --------------------------------------------------------------- */

stax_status_t stax_shape_compare(stax_shape_infer_t* ic) {
  stax_shape_operand_t operands[2];
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &operands[0]));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &operands[1]));
  switch (ic->node->op) {
    case STAX_OP_And:
    case STAX_OP_Or:
    case STAX_OP_Xor:
      STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &operands[0], STAX_DTYPES_BOOL, "bool"));
      STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &operands[1], STAX_DTYPES_BOOL, "bool"));
      break;
    case STAX_OP_Equal:
      STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &operands[0], &operands[1]));
      break;
    default:
      STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &operands[0], &operands[1]));
      STAX_RETURN_IF_ERROR(
          stax_shape_require_dtype(ic, &operands[0], STAX_DTYPES_NUMERIC, "a number"));
      break;
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  STAX_RETURN_IF_ERROR(stax_shape_broadcast(ic, 2, operands, &rank, dims));
  return stax_shape_set_output(ic, 0, STAX_DTYPE_BOOL, rank, dims);
}

/* ---- variadic and Where ------------------------------------------------------------------ */

stax_status_t stax_shape_variadic(stax_shape_infer_t* ic) {
  int32_t count = ic->node->input_count;
  if (count < 1) return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "needs at least one input");
  /* The operand records live on the stack; models stay far below this. */
  if (count > STAX_SHAPE_CONTENT_MAX) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED, "%d inputs; at most %d are supported",
                            count, STAX_SHAPE_CONTENT_MAX);
  }
  stax_shape_operand_t operands[STAX_SHAPE_CONTENT_MAX];
  bool float_only = ic->node->op == STAX_OP_Sum || ic->node->op == STAX_OP_Mean;
  for (int32_t i = 0; i < count; i++) {
    STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, i, &operands[i]));
    if (i == 0) {
      STAX_RETURN_IF_ERROR(stax_shape_require_dtype(
          ic, &operands[0], float_only ? STAX_DTYPES_FLOAT : STAX_DTYPES_NUMERIC,
          float_only ? "a floating-point type" : "a number"));
    } else {
      STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &operands[0], &operands[i]));
    }
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  STAX_RETURN_IF_ERROR(stax_shape_broadcast(ic, count, operands, &rank, dims));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, operands[0].dtype, rank, dims));
  if (ic->node->op == STAX_OP_Max) return propagate_content(ic, CONTENT_MAX, count, rank);
  if (ic->node->op == STAX_OP_Min) return propagate_content(ic, CONTENT_MIN, count, rank);
  return STAX_OK;
}

stax_status_t stax_shape_where(stax_shape_infer_t* ic) {
  stax_shape_operand_t operands[3];
  for (int32_t i = 0; i < 3; i++) {
    STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, i, &operands[i]));
  }
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &operands[0], STAX_DTYPES_BOOL, "bool"));
  STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &operands[1], &operands[2]));
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  STAX_RETURN_IF_ERROR(stax_shape_broadcast(ic, 3, operands, &rank, dims));
  return stax_shape_set_output(ic, 0, operands[1].dtype, rank, dims);
}

/* ---- unary ------------------------------------------------------------------------------- */

/* The dtypes each unary op accepts (ONNX type constraints). */
static stax_dtype_mask_t unary_allowed_dtypes(stax_op_t op, const char** out_what) {
  switch (op) {
    case STAX_OP_Identity:
      *out_what = "any type";
      return STAX_DTYPES_ALL;
    case STAX_OP_Not:
      *out_what = "bool";
      return STAX_DTYPES_BOOL;
    case STAX_OP_Relu:
    case STAX_OP_Neg:
      *out_what = "a floating-point or signed integer type";
      return STAX_DTYPES_FLOAT | STAX_DTYPES_SIGNED_INT;
    case STAX_OP_Abs:
    case STAX_OP_Sign:
    case STAX_OP_Erf:
    case STAX_OP_Shrink:
    case STAX_OP_Clip:
      *out_what = "a number";
      return STAX_DTYPES_NUMERIC;
    default:
      *out_what = "a floating-point type";
      return STAX_DTYPES_FLOAT;
  }
}

static stax_status_t check_unary_attributes(stax_shape_infer_t* ic) {
  if (ic->node->op == STAX_OP_Gelu) {
    const char* approximate = NULL;
    STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "approximate", "none", &approximate));
    if (strcmp(approximate, "none") != 0 && strcmp(approximate, "tanh") != 0) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "attribute 'approximate' must be \"none\" or \"tanh\", got \"%s\"",
                              approximate);
    }
  } else if (ic->node->op == STAX_OP_Celu) {
    float alpha = 1.0f;
    STAX_RETURN_IF_ERROR(stax_node_attr_float(ic->node, "alpha", 1.0f, &alpha));
    if (alpha == 0.0f) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'alpha' must not be 0");
    }
  }
  return STAX_OK;
}

/* Clip's optional min and max inputs: scalars of the input's dtype. */
static stax_status_t check_clip_bounds(stax_shape_infer_t* ic, const stax_shape_operand_t* x) {
  for (int32_t i = 1; i < ic->node->input_count && i < 3; i++) {
    stax_shape_operand_t bound;
    bool present = false;
    stax_shape_read_input(ic, i, &bound, &present);
    if (!present) continue;
    STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, x, &bound));
    STAX_RETURN_IF_ERROR(stax_shape_require_scalar(ic, &bound, i == 1 ? "min" : "max"));
  }
  return STAX_OK;
}

stax_status_t stax_shape_unary(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  const char* what = NULL;
  stax_dtype_mask_t allowed = unary_allowed_dtypes(ic->node->op, &what);
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &x, allowed, what));
  STAX_RETURN_IF_ERROR(check_unary_attributes(ic));
  if (ic->node->op == STAX_OP_Clip) STAX_RETURN_IF_ERROR(check_clip_bounds(ic, &x));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, x.dtype, x.rank, x.dims));
  if (ic->node->op == STAX_OP_Identity) return forward_content(ic, true);
  if (ic->node->op == STAX_OP_Neg && stax_dtype_is_integer(x.dtype)) {
    const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
    int32_t count = 0;
    if (!stax_shape_value_content(ic, stax_infer_input(ic, 0), STAX_SHAPE_CONTENT_MAX, content,
                                  &count)) {
      return STAX_OK;
    }
    for (int32_t k = 0; k < count; k++) content[k] = stax_dim_mul_const(ic->shape, content[k], -1);
    STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
    return stax_infer_set_content(ic, 0, count, content);
  }
  return STAX_OK;
}

stax_status_t stax_shape_predicate(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &x, STAX_DTYPES_FLOAT,
                                                "a floating-point type"));
  if (ic->node->op == STAX_OP_IsInf) {
    bool detect = false;
    STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "detect_negative", true, &detect));
    STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "detect_positive", true, &detect));
  }
  return stax_shape_set_output(ic, 0, STAX_DTYPE_BOOL, x.rank, x.dims);
}

/* ---- casts ------------------------------------------------------------------------------- */

/* Integer-to-integer casts keep symbolic contents when the target is wide enough for dims. */
static stax_status_t cast_forward_content(stax_shape_infer_t* ic, stax_dtype_t from,
                                          stax_dtype_t to) {
  if (!stax_dtype_is_integer(from) || (to != STAX_DTYPE_INT64 && to != STAX_DTYPE_INT32)) {
    return STAX_OK;
  }
  return forward_content(ic, false);
}

stax_status_t stax_shape_cast(stax_shape_infer_t* ic) {
  stax_shape_operand_t x;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  if (!stax_node_attr_find(ic->node, "to")) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'to' is required");
  }
  int64_t to = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(ic->node, "to", 0, &to));
  stax_dtype_t dtype = to >= INT32_MIN && to <= INT32_MAX ? stax_dtype_from_onnx((int32_t)to)
                                                         : STAX_DTYPE_INVALID;
  if (dtype == STAX_DTYPE_INVALID) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "attribute 'to' = %lld is not a supported dtype (ONNX type code)",
                            (long long)to);
  }
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, dtype, x.rank, x.dims));
  return cast_forward_content(ic, x.dtype, dtype);
}

stax_status_t stax_shape_cast_like(stax_shape_infer_t* ic) {
  stax_shape_operand_t x, like;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &x));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &like));
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, like.dtype, x.rank, x.dims));
  return cast_forward_content(ic, x.dtype, like.dtype);
}

/* ---- Dropout ----------------------------------------------------------------------------- */

/* Dropout(data, ratio?, training_mode?) -> output, mask?. A constant ratio must lie in
 * [0, 1); an unknown one is checked by the kernel. */
stax_status_t stax_shape_dropout(stax_shape_infer_t* ic) {
  stax_shape_operand_t data, ratio, training;
  bool has_ratio = false, has_training = false;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &data, STAX_DTYPES_FLOAT,
                                                "a floating-point type"));
  stax_shape_read_input(ic, 1, &ratio, &has_ratio);
  stax_shape_read_input(ic, 2, &training, &has_training);
  if (has_ratio) {
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &ratio, STAX_DTYPES_FLOAT,
                                                  "a floating-point type"));
    STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &ratio, 0, 0));
    const stax_tensor_t* constant = stax_infer_input(ic, 1)->constant;
    if (constant && stax_tensor_element_count(constant) == 1) {
      double value = 0.0;
      stax_convert_elements(stax_tensor_dtype(constant), stax_tensor_data(constant),
                            STAX_DTYPE_FLOAT64, &value, 1);
      if (!(value >= 0.0 && value < 1.0)) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                                "input 1 '%s' (ratio) must be in [0, 1), got %g", ratio.name,
                                value);
      }
    }
  }
  if (has_training) {
    STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &training, STAX_DTYPES_BOOL, "bool"));
    STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &training, 0, 0));
  }
  STAX_RETURN_IF_ERROR(stax_shape_set_output(ic, 0, data.dtype, data.rank, data.dims));
  return stax_shape_set_output(ic, 1, STAX_DTYPE_BOOL, data.rank, data.dims);
}
