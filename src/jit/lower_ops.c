/* The semantics of every fusible elementwise op as kernel IR, written to match the generic
 * kernels (src/kernels/unary.c, binary.c, compare.c, variadic.c, where.c, cast.c) element for
 * element, including NaN behaviour: comparisons and selects are ordered the same way, Max /
 * Min propagate NaN, Relu is x < 0 ? 0 : x. The transcendental functions differ from libm
 * within the tolerances documented in llvm_internal.h.
 *
 * Lowering here is lazy: lower_elementwise_expr builds one output of one node from its inputs'
 * expressions at the current point (lower.c memoizes). lower_check_elementwise runs first,
 * once per node, and refuses (UNIMPLEMENTED) the dtypes and attributes not handled, so the
 * builders below can assume valid input. */
#include <math.h>
#include <string.h>

#include "jit/lower_internal.h"
#include "runtime/tensor_internal.h"

/* The elementwise ops of ops.def that lowering handles. */
/* clang-format off */
#define LOWERED_ELEMENTWISE_OPS(X)                                                         \
  X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(And) X(Or) X(Xor) X(Equal) X(Less) X(LessOrEqual)   \
  X(Greater) X(GreaterOrEqual) X(Max) X(Min) X(Sum) X(Mean) X(Where) X(PRelu) X(Relu)      \
  X(LeakyRelu) X(Elu) X(Selu) X(Celu) X(ThresholdedRelu) X(Gelu) X(Sigmoid) X(HardSigmoid) \
  X(HardSwish) X(Softsign) X(Softplus) X(Shrink) X(Tanh) X(Exp) X(Log) X(Sqrt)             \
  X(Reciprocal) X(Neg) X(Abs) X(Erf) X(Sin) X(Cos) X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh)  \
  X(Cosh) X(Asinh) X(Acosh) X(Atanh) X(Floor) X(Ceil) X(Round) X(Not) X(Sign) X(Clip)      \
  X(IsNaN) X(IsInf) X(Cast) X(CastLike) X(Dropout) X(Identity)
/* clang-format on */

bool lower_is_elementwise(stax_op_t op) {
  switch (op) {
#define STAX_CASE(name) case STAX_OP_##name:
    LOWERED_ELEMENTWISE_OPS(STAX_CASE)
#undef STAX_CASE
    return true;
    default: return false;
  }
}

stax_status_t lower_attr_float(const stax_jit_node_t* node, const char* name, float default_value,
                               double* out_value) {
  float value = default_value;
  STAX_RETURN_IF_ERROR(stax_node_attr_float(node->node, name, default_value, &value));
  *out_value = value;
  return STAX_OK;
}

static double attr_float(const stax_jit_node_t* node, const char* name, float default_value) {
  double value = default_value;
  stax_status_free(lower_attr_float(node, name, default_value, &value));
  return value;
}

static bool is_float_compute(stax_dtype_t dtype) {
  return dtype == STAX_DTYPE_FLOAT32 || dtype == STAX_DTYPE_FLOAT64;
}

/* Ops defined on floats only (activations and math). */
/* clang-format off */
#define FLOAT_ONLY_OPS(X)                                                                   \
  X(Pow) X(LeakyRelu) X(Elu) X(Selu) X(Celu) X(ThresholdedRelu) X(Gelu) X(Sigmoid)          \
  X(HardSigmoid) X(HardSwish) X(Softsign) X(Softplus) X(Shrink) X(Tanh) X(Exp) X(Log)       \
  X(Sqrt) X(Reciprocal) X(Erf) X(Sin) X(Cos) X(Tan) X(Asin) X(Acos) X(Atan) X(Sinh) X(Cosh) \
  X(Asinh) X(Acosh) X(Atanh) X(Floor) X(Ceil) X(Round) X(IsNaN) X(IsInf) X(Mean)
/* clang-format on */

static bool float_only(stax_op_t op) {
  switch (op) {
#define STAX_CASE(name) case STAX_OP_##name:
    FLOAT_ONLY_OPS(STAX_CASE)
#undef STAX_CASE
    return true;
    default: return false;
  }
}

/* Bound i (0: min, 1: max) of a Clip from before opset 11, whose bounds are the float
 * attributes 'min' and 'max' of a one-input node: *found false when there is none (a newer
 * Clip's bounds are inputs 1 and 2). An error when the attribute has another type. */
static stax_status_t clip_attribute(const stax_jit_node_t* node, int32_t i, bool* found,
                                    float* value) {
  const char* what = i == 0 ? "min" : "max";
  *found = node->input_count <= 1 && stax_node_attr_find(node->node, what) != NULL;
  return *found ? stax_node_attr_float(node->node, what, 0.0f, value) : STAX_OK;
}

stax_status_t lower_check_elementwise(const lower_t* L, const stax_jit_node_t* node) {
  stax_op_t op = node->node->op;
  const char* name = node->node->name ? node->node->name : "";
  /* float16/bfloat16 values compute in float32 (lower_value_expr), as the runtime's. */
  int32_t x = node->inputs[0];
  stax_dtype_t dtype = x >= 0 ? lower_compute_dtype(lower_value(L, x)->dtype) : STAX_DTYPE_FLOAT32;
  if (float_only(op) && !is_float_compute(dtype))
    return lower_refuse(L, "%s node '%s' on %s", stax_op_name(op), name, stax_dtype_name(dtype));
  switch (op) {
    case STAX_OP_Div:
      /* Integer division by zero is an error status in the interpreter; keep it there. */
      if (!is_float_compute(dtype)) return lower_refuse(L, "integer Div node '%s'", name);
      break;
    case STAX_OP_Pow: {
      stax_dtype_t exponent = lower_value(L, node->inputs[1])->dtype;
      if (exponent == STAX_DTYPE_BOOL)
        return lower_refuse(L, "Pow node '%s' with a bool exponent", name);
      break;
    }
    case STAX_OP_Clip:
      for (int32_t i = 0; i < 2; i++) {
        float value = 0.0f;
        bool found = false;
        STAX_RETURN_IF_ERROR(clip_attribute(node, i, &found, &value));
        if (found && !stax_dtype_is_float(dtype))
          return lower_refuse(L, "Clip node '%s' with a '%s' attribute on %s", name,
                              i == 0 ? "min" : "max", stax_dtype_name(dtype));
      }
      /* fall through */
    case STAX_OP_PRelu:
    case STAX_OP_Relu:
    case STAX_OP_Neg:
    case STAX_OP_Sign:
    case STAX_OP_Abs:
    case STAX_OP_Max:
    case STAX_OP_Min:
    case STAX_OP_Sum:
    case STAX_OP_Add:
    case STAX_OP_Sub:
    case STAX_OP_Mul:
      if (dtype == STAX_DTYPE_BOOL)
        return lower_refuse(L, "%s node '%s' on bool", stax_op_name(op), name);
      if (op == STAX_OP_Relu && stax_dtype_is_unsigned_int(dtype))
        return lower_refuse(L, "Relu node '%s' on %s", name, stax_dtype_name(dtype));
      break;
    case STAX_OP_Gelu: {
      const char* approximate = NULL;
      STAX_RETURN_IF_ERROR(stax_node_attr_string(node->node, "approximate", "none", &approximate));
      if (strcmp(approximate, "none") != 0 && strcmp(approximate, "tanh") != 0)
        return lower_refuse(L, "Gelu node '%s' with approximate='%s'", name, approximate);
      break;
    }
    case STAX_OP_Celu: {
      double alpha = 1;
      STAX_RETURN_IF_ERROR(lower_attr_float(node, "alpha", 1.0f, &alpha));
      if (alpha == 0) return lower_refuse(L, "Celu node '%s' with alpha 0", name);
      break;
    }
    case STAX_OP_Dropout:
      /* Inference only: the mask output and training mode stay with the interpreter. */
      if (node->output_count > 1 && node->outputs[1] >= 0)
        return lower_refuse(L, "Dropout node '%s' with a mask output", name);
      if (node->input_count > 2 && node->inputs[2] >= 0) {
        double training = 1;
        if (!lower_constant_scalar(L, node->inputs[2], &training) || training != 0)
          return lower_refuse(L, "Dropout node '%s' in training mode", name);
      }
      break;
    case STAX_OP_Not:
      if (dtype != STAX_DTYPE_BOOL)
        return lower_refuse(L, "Not node '%s' on %s", name, stax_dtype_name(dtype));
      break;
    default: break;
  }
  /* Every attribute read below must parse. */
  const char* float_attrs[] = {"alpha", "beta", "gamma", "bias", "lambd"};
  for (size_t i = 0; i < sizeof(float_attrs) / sizeof(float_attrs[0]); i++) {
    double ignored = 0;
    if (stax_node_attr_find(node->node, float_attrs[i]))
      STAX_RETURN_IF_ERROR(lower_attr_float(node, float_attrs[i], 0.0f, &ignored));
  }
  return STAX_OK;
}

/* ---- building blocks --------------------------------------------------------------------- */

typedef struct builder_t {
  lower_t* L;
  stax_kir_kernel_t* k;
  stax_dtype_t dtype; /* of the node's first input (the compute dtype of most ops) */
} builder_t;

static const stax_kir_expr_t* c(builder_t* b, double value) {
  return stax_dtype_is_float(b->dtype) ? stax_kir_float(b->k, b->dtype, value)
                                       : stax_kir_int(b->k, b->dtype, (int64_t)value);
}
static const stax_kir_expr_t* bin(builder_t* b, stax_kir_binary_op_t op, const stax_kir_expr_t* x,
                                  const stax_kir_expr_t* y) {
  return stax_kir_binary(b->k, op, x, y);
}
static const stax_kir_expr_t* un(builder_t* b, stax_kir_unary_op_t op, const stax_kir_expr_t* x) {
  return stax_kir_unary(b->k, op, x);
}
static const stax_kir_expr_t* sel(builder_t* b, const stax_kir_expr_t* condition,
                                  const stax_kir_expr_t* x, const stax_kir_expr_t* y) {
  return stax_kir_select(b->k, condition, x, y);
}

/* x < low ? low : x, then > high ? high : x: NaN passes both (unary.c's Clip). */
static const stax_kir_expr_t* clamp(builder_t* b, const stax_kir_expr_t* x,
                                    const stax_kir_expr_t* low, const stax_kir_expr_t* high) {
  if (low) x = sel(b, bin(b, STAX_KIR_LT, x, low), low, x);
  if (high) x = sel(b, bin(b, STAX_KIR_GT, x, high), high, x);
  return x;
}

static const stax_kir_expr_t* sigmoid(builder_t* b, const stax_kir_expr_t* x) {
  /* Both halves of unary.c's split at 0, sharing e = exp(-|x|). */
  const stax_kir_expr_t* e = un(b, STAX_KIR_EXP, un(b, STAX_KIR_NEG, un(b, STAX_KIR_ABS, x)));
  const stax_kir_expr_t* s = bin(b, STAX_KIR_DIV, c(b, 1), bin(b, STAX_KIR_ADD, c(b, 1), e));
  return sel(b, bin(b, STAX_KIR_GE, x, c(b, 0)), s, bin(b, STAX_KIR_MUL, e, s));
}

static const stax_kir_expr_t* power(builder_t* b, lower_t* L, int32_t exponent_value,
                                    const stax_kir_expr_t* x, const stax_kir_expr_t* y) {
  double exponent = 0;
  if (lower_constant_scalar(L, exponent_value, &exponent)) {
    /* Common exponents without a libm call per lane; pow(x, 2) == x*x exactly. */
    if (exponent == 1) return x;
    if (exponent == 2) return bin(b, STAX_KIR_MUL, x, x);
    if (exponent == 3) return bin(b, STAX_KIR_MUL, bin(b, STAX_KIR_MUL, x, x), x);
    if (exponent == 0.5) {
      /* pow(-0, 0.5) is +0 and pow(-inf, 0.5) is +inf, where sqrt gives -0 and NaN. */
      const stax_kir_expr_t* root = un(b, STAX_KIR_SQRT, x);
      root = sel(b, bin(b, STAX_KIR_EQ, x, c(b, 0)), c(b, 0), root);
      return sel(b, bin(b, STAX_KIR_EQ, x, c(b, -INFINITY)), c(b, INFINITY), root);
    }
  }
  return bin(b, STAX_KIR_POW, x, stax_kir_cast(b->k, b->dtype, y));
}

/* ---- the ops ----------------------------------------------------------------------------- */

const stax_kir_expr_t* lower_elementwise_expr(lower_t* L, const stax_jit_node_t* node, int32_t slot,
                                              lower_space_t space) {
  (void)slot;
  stax_op_t op = node->node->op;
  const stax_kir_expr_t* in[8] = {NULL};
  int32_t count = node->input_count < 8 ? node->input_count : 8;
  for (int32_t i = 0; i < count; i++)
    if (node->inputs[i] >= 0) in[i] = lower_value_expr(L, node->inputs[i], space);
  builder_t b = {L, L->kernel, in[0] ? in[0]->dtype : STAX_DTYPE_FLOAT32};
  const stax_kir_expr_t* x = in[0];

  switch (op) {
    case STAX_OP_Add: return bin(&b, STAX_KIR_ADD, x, in[1]);
    case STAX_OP_Sub: return bin(&b, STAX_KIR_SUB, x, in[1]);
    case STAX_OP_Mul: return bin(&b, STAX_KIR_MUL, x, in[1]);
    case STAX_OP_Div: return bin(&b, STAX_KIR_DIV, x, in[1]);
    case STAX_OP_Pow: return power(&b, L, node->inputs[1], x, in[1]);
    case STAX_OP_And: return bin(&b, STAX_KIR_AND, x, in[1]);
    case STAX_OP_Or: return bin(&b, STAX_KIR_OR, x, in[1]);
    case STAX_OP_Xor: return bin(&b, STAX_KIR_XOR, x, in[1]);
    case STAX_OP_Equal: return bin(&b, STAX_KIR_EQ, x, in[1]);
    case STAX_OP_Less: return bin(&b, STAX_KIR_LT, x, in[1]);
    case STAX_OP_LessOrEqual: return bin(&b, STAX_KIR_LE, x, in[1]);
    case STAX_OP_Greater: return bin(&b, STAX_KIR_GT, x, in[1]);
    case STAX_OP_GreaterOrEqual: return bin(&b, STAX_KIR_GE, x, in[1]);
    case STAX_OP_Max:
    case STAX_OP_Min:
    case STAX_OP_Sum:
    case STAX_OP_Mean: {
      stax_kir_binary_op_t fold = op == STAX_OP_Max   ? STAX_KIR_MAX
                                  : op == STAX_OP_Min ? STAX_KIR_MIN
                                                      : STAX_KIR_ADD;
      /* 16-bit outputs accumulate in their own dtype, one rounding per input (variadic.c). */
      stax_dtype_t out = node->outputs[0] >= 0 ? lower_value(L, node->outputs[0])->dtype
                                               : STAX_DTYPE_FLOAT32;
      bool round_each = stax_dtype_is_half(out);
      const stax_kir_expr_t* result = x;
      for (int32_t i = 1; i < count; i++) {
        result = bin(&b, fold, result, in[i]);
        if (round_each && (i + 1 < count || op == STAX_OP_Mean))
          result = lower_round_to(L, out, result);
      }
      if (op == STAX_OP_Mean) result = bin(&b, STAX_KIR_DIV, result, c(&b, count));
      return result;
    }
    case STAX_OP_Where: return sel(&b, x, in[1], in[2]);
    case STAX_OP_PRelu:
      return sel(&b, bin(&b, STAX_KIR_LT, x, c(&b, 0)), bin(&b, STAX_KIR_MUL, x, in[1]), x);
    case STAX_OP_Relu: return sel(&b, bin(&b, STAX_KIR_LT, x, c(&b, 0)), c(&b, 0), x);
    case STAX_OP_LeakyRelu: {
      double alpha = attr_float(node, "alpha", 0.01f);
      return sel(&b, bin(&b, STAX_KIR_LT, x, c(&b, 0)), bin(&b, STAX_KIR_MUL, c(&b, alpha), x), x);
    }
    case STAX_OP_Elu: {
      double alpha = attr_float(node, "alpha", 1.0f);
      return sel(&b, bin(&b, STAX_KIR_LT, x, c(&b, 0)),
                 bin(&b, STAX_KIR_MUL, c(&b, alpha), un(&b, STAX_KIR_EXPM1, x)), x);
    }
    case STAX_OP_Selu: {
      double alpha = attr_float(node, "alpha", 1.67326319217681884765625f);
      double gamma = attr_float(node, "gamma", 1.05070102214813232421875f);
      const stax_kir_expr_t* negative =
          bin(&b, STAX_KIR_MUL, c(&b, gamma),
              bin(&b, STAX_KIR_MUL, c(&b, alpha), un(&b, STAX_KIR_EXPM1, x)));
      return sel(&b, bin(&b, STAX_KIR_LE, x, c(&b, 0)), negative,
                 bin(&b, STAX_KIR_MUL, c(&b, gamma), x));
    }
    case STAX_OP_Celu: {
      double alpha = attr_float(node, "alpha", 1.0f);
      const stax_kir_expr_t* scaled =
          bin(&b, STAX_KIR_MUL, c(&b, alpha),
              un(&b, STAX_KIR_EXPM1, bin(&b, STAX_KIR_DIV, x, c(&b, alpha))));
      const stax_kir_expr_t* value = bin(&b, STAX_KIR_ADD, bin(&b, STAX_KIR_MAX, c(&b, 0), x),
                                         bin(&b, STAX_KIR_MIN, c(&b, 0), scaled));
      return sel(&b, un(&b, STAX_KIR_IS_NAN, x), x, value);
    }
    case STAX_OP_ThresholdedRelu: {
      double alpha = attr_float(node, "alpha", 1.0f);
      return sel(&b, bin(&b, STAX_KIR_GT, x, c(&b, alpha)), x, c(&b, 0));
    }
    case STAX_OP_Gelu: {
      const char* approximate = "none";
      stax_status_free(stax_node_attr_string(node->node, "approximate", "none", &approximate));
      const stax_kir_expr_t* inner;
      if (strcmp(approximate, "tanh") == 0) {
        const stax_kir_expr_t* cube = bin(&b, STAX_KIR_MUL, bin(&b, STAX_KIR_MUL, x, x), x);
        const stax_kir_expr_t* t =
            bin(&b, STAX_KIR_ADD, x, bin(&b, STAX_KIR_MUL, c(&b, 0.044715), cube));
        inner = un(&b, STAX_KIR_TANH, bin(&b, STAX_KIR_MUL, c(&b, 0.79788456080286535588), t));
      } else {
        /* 0.5 x erfc(-x / sqrt 2), not 0.5 x (1 + erf(x / sqrt 2)): in the negative tail 1 + erf
         * cancels, erfc keeps its relative accuracy (the generic kernel computes the same). */
        return bin(&b, STAX_KIR_MUL, bin(&b, STAX_KIR_MUL, c(&b, 0.5), x),
                   un(&b, STAX_KIR_ERFC, bin(&b, STAX_KIR_MUL, x, c(&b, -0.70710678118654752440))));
      }
      return bin(&b, STAX_KIR_MUL, bin(&b, STAX_KIR_MUL, c(&b, 0.5), x),
                 bin(&b, STAX_KIR_ADD, c(&b, 1), inner));
    }
    case STAX_OP_Sigmoid: return sigmoid(&b, x);
    case STAX_OP_HardSigmoid:
    case STAX_OP_HardSwish: {
      double alpha = op == STAX_OP_HardSwish ? 1.0 / 6.0 : attr_float(node, "alpha", 0.2f);
      double beta = op == STAX_OP_HardSwish ? 0.5 : attr_float(node, "beta", 0.5f);
      const stax_kir_expr_t* v =
          op == STAX_OP_HardSwish
              ? bin(&b, STAX_KIR_ADD, bin(&b, STAX_KIR_DIV, x, c(&b, 6)), c(&b, beta))
              : bin(&b, STAX_KIR_ADD, bin(&b, STAX_KIR_MUL, c(&b, alpha), x), c(&b, beta));
      v = clamp(&b, v, c(&b, 0), c(&b, 1));
      return op == STAX_OP_HardSwish ? bin(&b, STAX_KIR_MUL, x, v) : v;
    }
    case STAX_OP_Softsign:
      return bin(&b, STAX_KIR_DIV, x, bin(&b, STAX_KIR_ADD, c(&b, 1), un(&b, STAX_KIR_ABS, x)));
    case STAX_OP_Softplus: {
      /* x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)), i.e. max(x, 0) + log1p(exp(-|x|)). */
      const stax_kir_expr_t* tail = un(
          &b, STAX_KIR_LOG1P, un(&b, STAX_KIR_EXP, un(&b, STAX_KIR_NEG, un(&b, STAX_KIR_ABS, x))));
      return sel(&b, bin(&b, STAX_KIR_GT, x, c(&b, 0)), bin(&b, STAX_KIR_ADD, x, tail), tail);
    }
    case STAX_OP_Shrink: {
      double bias = attr_float(node, "bias", 0.0f), lambd = attr_float(node, "lambd", 0.5f);
      return sel(&b, bin(&b, STAX_KIR_LT, x, c(&b, -lambd)), bin(&b, STAX_KIR_ADD, x, c(&b, bias)),
                 sel(&b, bin(&b, STAX_KIR_GT, x, c(&b, lambd)),
                     bin(&b, STAX_KIR_SUB, x, c(&b, bias)), c(&b, 0)));
    }
    case STAX_OP_Tanh: return un(&b, STAX_KIR_TANH, x);
    case STAX_OP_Exp: return un(&b, STAX_KIR_EXP, x);
    case STAX_OP_Log: return un(&b, STAX_KIR_LOG, x);
    case STAX_OP_Sqrt: return un(&b, STAX_KIR_SQRT, x);
    case STAX_OP_Reciprocal: return bin(&b, STAX_KIR_DIV, c(&b, 1), x);
    case STAX_OP_Neg: return un(&b, STAX_KIR_NEG, x);
    case STAX_OP_Abs: return un(&b, STAX_KIR_ABS, x);
    case STAX_OP_Erf: return un(&b, STAX_KIR_ERF, x);
    case STAX_OP_Sin: return un(&b, STAX_KIR_SIN, x);
    case STAX_OP_Cos: return un(&b, STAX_KIR_COS, x);
    case STAX_OP_Tan: return un(&b, STAX_KIR_TAN, x);
    case STAX_OP_Asin: return un(&b, STAX_KIR_ASIN, x);
    case STAX_OP_Acos: return un(&b, STAX_KIR_ACOS, x);
    case STAX_OP_Atan: return un(&b, STAX_KIR_ATAN, x);
    case STAX_OP_Sinh: return un(&b, STAX_KIR_SINH, x);
    case STAX_OP_Cosh: return un(&b, STAX_KIR_COSH, x);
    case STAX_OP_Asinh: return un(&b, STAX_KIR_ASINH, x);
    case STAX_OP_Acosh: return un(&b, STAX_KIR_ACOSH, x);
    case STAX_OP_Atanh: return un(&b, STAX_KIR_ATANH, x);
    case STAX_OP_Floor: return un(&b, STAX_KIR_FLOOR, x);
    case STAX_OP_Ceil: return un(&b, STAX_KIR_CEIL, x);
    case STAX_OP_Round: return un(&b, STAX_KIR_ROUND, x);
    case STAX_OP_Not: return un(&b, STAX_KIR_NOT, x);
    case STAX_OP_Sign: {
      const stax_kir_expr_t* sign =
          sel(&b, bin(&b, STAX_KIR_GT, x, c(&b, 0)), c(&b, 1),
              sel(&b, bin(&b, STAX_KIR_LT, x, c(&b, 0)), c(&b, -1), c(&b, 0)));
      /* NaN stays NaN for floats. */
      return stax_dtype_is_float(b.dtype) ? sel(&b, un(&b, STAX_KIR_IS_NAN, x), x, sign) : sign;
    }
    case STAX_OP_Clip: {
      /* Before opset 11 the bounds are the float attributes 'min' and 'max' (the node has one
       * input); lower_check_elementwise took them for float dtypes only. */
      const stax_kir_expr_t* bounds[2] = {in[1], in[2]};
      for (int32_t i = 0; i < 2; i++) {
        float value = 0.0f;
        bool found = false;
        stax_status_t status = clip_attribute(node, i, &found, &value);
        bool read = status == STAX_OK;
        stax_status_free(status); /* lower_check_elementwise refused the group on an error */
        if (found && read) bounds[i] = c(&b, value);
      }
      return clamp(&b, x, bounds[0], bounds[1]);
    }
    case STAX_OP_IsNaN: return un(&b, STAX_KIR_IS_NAN, x);
    case STAX_OP_IsInf: {
      int64_t negative = 1, positive = 1;
      stax_status_free(stax_node_attr_int(node->node, "detect_negative", 1, &negative));
      stax_status_free(stax_node_attr_int(node->node, "detect_positive", 1, &positive));
      if (negative && positive) return un(&b, STAX_KIR_IS_INF, x);
      if (!negative && !positive) return stax_kir_int(b.k, STAX_DTYPE_BOOL, 0);
      return bin(&b, STAX_KIR_EQ, x, c(&b, positive ? INFINITY : -INFINITY));
    }
    case STAX_OP_Cast:
    case STAX_OP_CastLike: {
      int32_t output = node->outputs[0];
      return stax_kir_cast(b.k, lower_value(L, output)->dtype, x);
    }
    case STAX_OP_Dropout:
    case STAX_OP_Identity: return x;
    default: break;
  }
  stax_kir_kernel_fail(L->kernel,
                       stax_status_make(STAX_INTERNAL, "no lowering for %s", stax_op_name(op)));
  return NULL;
}
