/* Unary elementwise kernels: activations (Relu, LeakyRelu, Elu, Selu, Celu, ThresholdedRelu,
 * Gelu, Sigmoid, HardSigmoid, HardSwish, Softsign, Softplus, Shrink), math (Tanh, Exp, Log,
 * Sqrt, Reciprocal, Neg, Abs, Erf, trigonometric and hyperbolic functions, Floor, Ceil,
 * Round, Sign), Not, Clip, IsNaN, IsInf, Identity and Dropout (inference).
 *
 * Row functions are generated per dtype by macros (tgmath picks the float or double libm
 * function); the contiguous case is its own loop. An output may be the very same memory as
 * its input (the memory plan's in-place reuse, docs/memory.md): each element is read before
 * it is written, so the row loops take no restrict pointers (GCC's run-time alias check
 * still vectorizes exact overlap, whose distance is 0). float16/bfloat16
 * compute through float32 in blocks; integer Shrink computes through float64 and truncates
 * like a Cast. Integer Neg/Abs wrap (Neg(INT_MIN) == INT_MIN, as numpy) through unsigned
 * arithmetic instead of overflowing. NaN inputs give NaN for every float op except the ones
 * defined to pick a constant (ThresholdedRelu, Shrink) and the predicates. */
#include <string.h>
#include <tgmath.h>

#include "kernels/elementwise.h"
#include "kernels/fast_loops.h"
#include "kernels/fast_math.h"

/* Attributes and bounds a row function may read; bounds are stored in the compute dtype. */
typedef struct unary_params_t {
  double alpha, beta, gamma;
  bool detect_negative, detect_positive;
  _Alignas(8) unsigned char low[8];
  _Alignas(8) unsigned char high[8];
} unary_params_t;

typedef void (*unary_row_fn)(void* out, int64_t out_stride, const void* in, int64_t in_stride,
                             int64_t count, const unary_params_t* p);

/* ---- the engine -------------------------------------------------------------------------- */

#define UNARY_BLOCK 256

/* Operand 0 is the output, 1 the input. */
typedef struct unary_engine_t {
  unary_row_fn fn;
  const unary_params_t* params;
  stax_dtype_t dtypes[2];
  stax_dtype_t compute[2];
  int64_t sizes[2];
  int64_t compute_sizes[2];
  char* data[2];
  int64_t inner[2];
  bool direct;
} unary_engine_t;

static void unary_engine_row(void* ctx, const int64_t* offsets, int64_t count) {
  const unary_engine_t* engine = ctx;
  char* out = engine->data[0] + offsets[0] * engine->sizes[0];
  char* in = engine->data[1] + offsets[1] * engine->sizes[1];
  if (engine->direct) {
    engine->fn(out, engine->inner[0], in, engine->inner[1], count, engine->params);
    return;
  }
  double in_block[UNARY_BLOCK], out_block[UNARY_BLOCK];
  int64_t out_step = engine->inner[0] * engine->sizes[0];
  int64_t in_step = engine->inner[1] * engine->sizes[1];
  bool convert_in = engine->dtypes[1] != engine->compute[1];
  bool convert_out = engine->dtypes[0] != engine->compute[0];
  for (int64_t done = 0; done < count; done += UNARY_BLOCK) {
    int64_t n = count - done < UNARY_BLOCK ? count - done : UNARY_BLOCK;
    const void* source = in + done * in_step;
    int64_t source_stride = engine->inner[1];
    if (convert_in) {
      stax_convert_strided(engine->dtypes[1], source, in_step, engine->compute[1], in_block,
                           engine->compute_sizes[1], n);
      source = in_block;
      source_stride = 1;
    }
    void* target = convert_out ? (void*)out_block : (void*)(out + done * out_step);
    engine->fn(target, convert_out ? 1 : engine->inner[0], source, source_stride, n,
               engine->params);
    if (convert_out)
      stax_convert_strided(engine->compute[0], out_block, engine->compute_sizes[0],
                           engine->dtypes[0], out + done * out_step, out_step, n);
  }
}

static void unary_run(stax_threadpool_t* pool, const stax_tensor_t* in, stax_tensor_t* out,
                      unary_row_fn fn, const unary_params_t* params, stax_dtype_t compute_in,
                      stax_dtype_t compute_out) {
  const stax_tensor_t* tensors[2] = {out, in};
  unary_engine_t engine;
  engine.fn = fn;
  engine.params = params;
  int64_t strides[2][STAX_MAX_RANK];
  int64_t base_offsets[2];
  for (int32_t k = 0; k < 2; k++) {
    engine.dtypes[k] = tensors[k]->dtype;
    engine.compute[k] = k == 0 ? compute_out : compute_in;
    engine.sizes[k] = (int64_t)stax_dtype_size(tensors[k]->dtype);
    engine.compute_sizes[k] = (int64_t)stax_dtype_size(engine.compute[k]);
    engine.data[k] = stax_buffer_data(tensors[k]->buffer);
    stax_kernel_broadcast_strides(tensors[k], out->rank, out->dims, strides[k]);
    base_offsets[k] = tensors[k]->offset;
  }
  engine.direct = engine.dtypes[0] == compute_out && engine.dtypes[1] == compute_in;
  stax_elementwise_iterate(pool, out->rank, out->dims, 2,
                           (const int64_t(*)[STAX_MAX_RANK])strides, base_offsets, engine.inner,
                           unary_engine_row, &engine);
}

/* ---- typed row functions ----------------------------------------------------------------- */

/* Inside EXPR: x is the element, T its type, U the unsigned arithmetic type, p the params. */
#define UNARY_ROW(name, TIN, UIN, TOUT, EXPR)                                                \
  static void name(void* out_, int64_t out_stride, const void* in_, int64_t in_stride,      \
                   int64_t count, const unary_params_t* p) {                                \
    typedef TIN T;                                                                          \
    typedef UIN U;                                                                          \
    TOUT* out = out_;                                                                       \
    const T* in = in_;                                                                      \
    (void)p;                                                                                \
    (void)sizeof(U);                                                                        \
    if (out_stride == 1 && in_stride == 1) {                                                \
      for (int64_t i = 0; i < count; i++) {                                                 \
        T x = in[i];                                                                        \
        out[i] = (TOUT)(EXPR);                                                              \
      }                                                                                     \
    } else {                                                                                \
      for (int64_t i = 0; i < count; i++) {                                                 \
        T x = in[i * in_stride];                                                            \
        out[i * out_stride] = (TOUT)(EXPR);                                                 \
      }                                                                                     \
    }                                                                                       \
  }

#define FLOAT_TYPES(X, op, ...) \
  X(FLOAT32, float, uint32_t, op, __VA_ARGS__) X(FLOAT64, double, uint64_t, op, __VA_ARGS__)
#define SIGNED_TYPES(X, op, ...)                                                            \
  X(INT8, int8_t, uint32_t, op, __VA_ARGS__) X(INT16, int16_t, uint32_t, op, __VA_ARGS__)  \
  X(INT32, int32_t, uint32_t, op, __VA_ARGS__) X(INT64, int64_t, uint64_t, op, __VA_ARGS__)
#define UNSIGNED_TYPES(X, op, ...)                                                          \
  X(UINT8, uint8_t, uint32_t, op, __VA_ARGS__) X(UINT16, uint16_t, uint32_t, op, __VA_ARGS__) \
  X(UINT32, uint32_t, uint32_t, op, __VA_ARGS__) X(UINT64, uint64_t, uint64_t, op, __VA_ARGS__)

#define DEFINE_SAME(dtype, ctype, utype, op, ...) \
  UNARY_ROW(unary_##op##_##dtype, ctype, utype, ctype, __VA_ARGS__)
#define DEFINE_PREDICATE(dtype, ctype, utype, op, ...) \
  UNARY_ROW(unary_##op##_##dtype, ctype, utype, uint8_t, __VA_ARGS__)
#define CASE_FN(dtype, ctype, utype, op, ...) \
  case STAX_DTYPE_##dtype:                    \
    return unary_##op##_##dtype;

/* Activations (floats; Relu also signed integers). */
FLOAT_TYPES(DEFINE_SAME, Relu, x < 0 ? (T)0 : x)
SIGNED_TYPES(DEFINE_SAME, Relu, x < 0 ? (T)0 : x)
FLOAT_TYPES(DEFINE_SAME, LeakyRelu, x < 0 ? (T)p->alpha * x : x)
FLOAT_TYPES(DEFINE_SAME, Elu, x < 0 ? (T)p->alpha * expm1(x) : x)
FLOAT_TYPES(DEFINE_SAME, Selu, x <= 0 ? (T)p->gamma * ((T)p->alpha * expm1(x)) : (T)p->gamma * x)
FLOAT_TYPES(DEFINE_SAME, Celu,
            x != x ? x : fmax((T)0, x) + fmin((T)0, (T)p->alpha * expm1(x / (T)p->alpha)))
FLOAT_TYPES(DEFINE_SAME, ThresholdedRelu, x > (T)p->alpha ? x : (T)0)
/* float32 Gelu and Erf: contiguous rows run kernels/fast_loops.h's loops (per ISA level, the
 * polynomials of kernels/fast_math.h: relative error below 1e-6, which is what float32
 * carries, and about 10x faster than libm's erff per element, a BERT layer's GELU
 * interpreted); strided ones the same functions element by element; float64: libm. */
#define FAST_LOOP_ROW(name, loop, EXPR)                                                      \
  static void name(void* out_, int64_t out_stride, const void* in_, int64_t in_stride,      \
                   int64_t count, const unary_params_t* p) {                                \
    (void)p;                                                                                \
    float* out = out_;                                                                      \
    const float* in = in_;                                                                  \
    if (out_stride == 1 && in_stride == 1) {                                                \
      stax_fast_loops()->loop(out, in, count);                                              \
      return;                                                                               \
    }                                                                                       \
    for (int64_t i = 0; i < count; i++) {                                                  \
      float x = in[i * in_stride];                                                          \
      out[i * out_stride] = (EXPR);                                                         \
    }                                                                                       \
  }
FAST_LOOP_ROW(unary_Gelu_FLOAT32, gelu_row, stax_gelu_f32(x))
DEFINE_SAME(FLOAT64, double, uint64_t, Gelu, 0.5 * x * (1.0 + erf(x * 0.70710678118654752440)))
FLOAT_TYPES(DEFINE_SAME, GeluTanh,
            (T)0.5 * x *
                ((T)1 + tanh((T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x))))
/* Split at 0 so exp never overflows: both halves are exact forms of 1 / (1 + e^-x). */
FLOAT_TYPES(DEFINE_SAME, Sigmoid, x >= 0 ? (T)1 / ((T)1 + exp(-x)) : exp(x) / ((T)1 + exp(x)))
FLOAT_TYPES(DEFINE_SAME, HardSigmoid,
            ((T)p->alpha * x + (T)p->beta) < 0   ? (T)0
            : ((T)p->alpha * x + (T)p->beta) > 1 ? (T)1
                                                 : (T)p->alpha * x + (T)p->beta)
FLOAT_TYPES(DEFINE_SAME, HardSwish,
            x * ((x / (T)6 + (T)0.5) < 0   ? (T)0
                 : (x / (T)6 + (T)0.5) > 1 ? (T)1
                                           : x / (T)6 + (T)0.5))
FLOAT_TYPES(DEFINE_SAME, Softsign, x / ((T)1 + fabs(x)))
/* log(1 + e^x) without overflow for large x. */
FLOAT_TYPES(DEFINE_SAME, Softplus, x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)))
FLOAT_TYPES(DEFINE_SAME, Shrink,
            x < -(T)p->beta ? x + (T)p->alpha : x > (T)p->beta ? x - (T)p->alpha : (T)0)

/* Math (floats; Neg, Abs and Sign also integers). */
FLOAT_TYPES(DEFINE_SAME, Tanh, tanh(x))
FLOAT_TYPES(DEFINE_SAME, Exp, exp(x))
FLOAT_TYPES(DEFINE_SAME, Log, log(x))
FLOAT_TYPES(DEFINE_SAME, Sqrt, sqrt(x))
FLOAT_TYPES(DEFINE_SAME, Reciprocal, (T)1 / x)
FLOAT_TYPES(DEFINE_SAME, Neg, -x)
SIGNED_TYPES(DEFINE_SAME, Neg, (U)0 - (U)x)
FLOAT_TYPES(DEFINE_SAME, Abs, fabs(x))
SIGNED_TYPES(DEFINE_SAME, Abs, x < 0 ? (T)((U)0 - (U)x) : x)
UNSIGNED_TYPES(DEFINE_SAME, Abs, x)
/* float32 (and the half types, computed in it): as Gelu above. */
FAST_LOOP_ROW(unary_Erf_FLOAT32, erf_row, stax_erf_f32(x))
DEFINE_SAME(FLOAT64, double, uint64_t, Erf, erf(x))
FLOAT_TYPES(DEFINE_SAME, Sin, sin(x))
FLOAT_TYPES(DEFINE_SAME, Cos, cos(x))
FLOAT_TYPES(DEFINE_SAME, Tan, tan(x))
FLOAT_TYPES(DEFINE_SAME, Asin, asin(x))
FLOAT_TYPES(DEFINE_SAME, Acos, acos(x))
FLOAT_TYPES(DEFINE_SAME, Atan, atan(x))
FLOAT_TYPES(DEFINE_SAME, Sinh, sinh(x))
FLOAT_TYPES(DEFINE_SAME, Cosh, cosh(x))
FLOAT_TYPES(DEFINE_SAME, Asinh, asinh(x))
FLOAT_TYPES(DEFINE_SAME, Acosh, acosh(x))
FLOAT_TYPES(DEFINE_SAME, Atanh, atanh(x))
FLOAT_TYPES(DEFINE_SAME, Floor, floor(x))
FLOAT_TYPES(DEFINE_SAME, Ceil, ceil(x))
/* rint rounds halves to even in the default rounding mode, as ONNX Round requires. */
FLOAT_TYPES(DEFINE_SAME, Round, rint(x))
FLOAT_TYPES(DEFINE_SAME, Sign, x > 0 ? (T)1 : x < 0 ? (T)-1 : x == x ? (T)0 : x)
SIGNED_TYPES(DEFINE_SAME, Sign, (x > 0) - (x < 0))
UNSIGNED_TYPES(DEFINE_SAME, Sign, x != 0)

/* Clip: bounds are in the compute dtype; a missing one is the dtype's extreme (see
 * clip_params). NaN passes through both comparisons. */
#define DEFINE_CLIP(dtype, ctype, utype, op, ...)                                          \
  static void unary_Clip_##dtype(void* out_, int64_t out_stride, const void* in_,          \
                                 int64_t in_stride, int64_t count, const unary_params_t* p) { \
    ctype* out = out_;                                                                     \
    const ctype* in = in_;                                                                 \
    ctype low, high;                                                                       \
    memcpy(&low, p->low, sizeof(low));                                                     \
    memcpy(&high, p->high, sizeof(high));                                                  \
    if (out_stride == 1 && in_stride == 1) {                                               \
      for (int64_t i = 0; i < count; i++) {                                                \
        ctype x = in[i] < low ? low : in[i];                                               \
        out[i] = x > high ? high : x;                                                      \
      }                                                                                    \
    } else {                                                                               \
      for (int64_t i = 0; i < count; i++) {                                                \
        ctype x = in[i * in_stride] < low ? low : in[i * in_stride];                       \
        out[i * out_stride] = x > high ? high : x;                                         \
      }                                                                                    \
    }                                                                                      \
  }
FLOAT_TYPES(DEFINE_CLIP, Clip)
SIGNED_TYPES(DEFINE_CLIP, Clip)
UNSIGNED_TYPES(DEFINE_CLIP, Clip)

/* Predicates (float in, bool out) and Not. */
FLOAT_TYPES(DEFINE_PREDICATE, IsNaN, x != x)
FLOAT_TYPES(DEFINE_PREDICATE, IsInf,
            (p->detect_positive && x == (T)INFINITY) || (p->detect_negative && x == -(T)INFINITY))
UNARY_ROW(unary_Not_BOOL, uint8_t, uint32_t, uint8_t, x == 0)

/* ---- dispatch ---------------------------------------------------------------------------- */

/* The row function for op on a compute dtype, or NULL when the op does not take it. */
static unary_row_fn unary_row_for(stax_op_t op, bool gelu_tanh, stax_dtype_t dtype) {
#define FLOAT_ONLY(op)                                      \
  switch (dtype) {                                          \
    FLOAT_TYPES(CASE_FN, op)                                \
    default: return NULL;                                   \
  }
#define FLOAT_OR_SIGNED(op)                                 \
  switch (dtype) {                                          \
    FLOAT_TYPES(CASE_FN, op)                                \
    SIGNED_TYPES(CASE_FN, op)                               \
    default: return NULL;                                   \
  }
#define ANY_NUMBER(op)                                      \
  switch (dtype) {                                          \
    FLOAT_TYPES(CASE_FN, op)                                \
    SIGNED_TYPES(CASE_FN, op)                               \
    UNSIGNED_TYPES(CASE_FN, op)                             \
    default: return NULL;                                   \
  }
  switch (op) {
    case STAX_OP_Relu: FLOAT_OR_SIGNED(Relu)
    case STAX_OP_LeakyRelu: FLOAT_ONLY(LeakyRelu)
    case STAX_OP_Elu: FLOAT_ONLY(Elu)
    case STAX_OP_Selu: FLOAT_ONLY(Selu)
    case STAX_OP_Celu: FLOAT_ONLY(Celu)
    case STAX_OP_ThresholdedRelu: FLOAT_ONLY(ThresholdedRelu)
    case STAX_OP_Gelu:
      if (gelu_tanh) FLOAT_ONLY(GeluTanh)
      FLOAT_ONLY(Gelu)
    case STAX_OP_Sigmoid: FLOAT_ONLY(Sigmoid)
    case STAX_OP_HardSigmoid: FLOAT_ONLY(HardSigmoid)
    case STAX_OP_HardSwish: FLOAT_ONLY(HardSwish)
    case STAX_OP_Softsign: FLOAT_ONLY(Softsign)
    case STAX_OP_Softplus: FLOAT_ONLY(Softplus)
    case STAX_OP_Shrink: FLOAT_ONLY(Shrink)
    case STAX_OP_Tanh: FLOAT_ONLY(Tanh)
    case STAX_OP_Exp: FLOAT_ONLY(Exp)
    case STAX_OP_Log: FLOAT_ONLY(Log)
    case STAX_OP_Sqrt: FLOAT_ONLY(Sqrt)
    case STAX_OP_Reciprocal: FLOAT_ONLY(Reciprocal)
    case STAX_OP_Neg: FLOAT_OR_SIGNED(Neg)
    case STAX_OP_Abs: ANY_NUMBER(Abs)
    case STAX_OP_Erf: FLOAT_ONLY(Erf)
    case STAX_OP_Sin: FLOAT_ONLY(Sin)
    case STAX_OP_Cos: FLOAT_ONLY(Cos)
    case STAX_OP_Tan: FLOAT_ONLY(Tan)
    case STAX_OP_Asin: FLOAT_ONLY(Asin)
    case STAX_OP_Acos: FLOAT_ONLY(Acos)
    case STAX_OP_Atan: FLOAT_ONLY(Atan)
    case STAX_OP_Sinh: FLOAT_ONLY(Sinh)
    case STAX_OP_Cosh: FLOAT_ONLY(Cosh)
    case STAX_OP_Asinh: FLOAT_ONLY(Asinh)
    case STAX_OP_Acosh: FLOAT_ONLY(Acosh)
    case STAX_OP_Atanh: FLOAT_ONLY(Atanh)
    case STAX_OP_Floor: FLOAT_ONLY(Floor)
    case STAX_OP_Ceil: FLOAT_ONLY(Ceil)
    case STAX_OP_Round: FLOAT_ONLY(Round)
    case STAX_OP_Sign: ANY_NUMBER(Sign)
    case STAX_OP_Clip: ANY_NUMBER(Clip)
    case STAX_OP_IsNaN: FLOAT_ONLY(IsNaN)
    case STAX_OP_IsInf: FLOAT_ONLY(IsInf)
    case STAX_OP_Not: return dtype == STAX_DTYPE_BOOL ? unary_Not_BOOL : NULL;
    default: return NULL;
  }
#undef FLOAT_ONLY
#undef FLOAT_OR_SIGNED
#undef ANY_NUMBER
}

/* ---- kernels ----------------------------------------------------------------------------- */

static stax_status_t read_float_attribute(const stax_kernel_call_t* call, const char* name,
                                          float default_value, double* out_value) {
  float value = default_value;
  STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, name, default_value, &value));
  *out_value = value;
  return STAX_OK;
}

/* Attributes of the op (ONNX defaults). Shrink keeps bias in alpha and lambd in beta. */
static stax_status_t unary_params(const stax_kernel_call_t* call, unary_params_t* params,
                                  bool* out_gelu_tanh) {
  memset(params, 0, sizeof(*params));
  *out_gelu_tanh = false;
  switch (call->node->op) {
    case STAX_OP_LeakyRelu: return read_float_attribute(call, "alpha", 0.01f, &params->alpha);
    case STAX_OP_Elu:
    case STAX_OP_ThresholdedRelu: return read_float_attribute(call, "alpha", 1.0f, &params->alpha);
    case STAX_OP_Celu:
      STAX_RETURN_IF_ERROR(read_float_attribute(call, "alpha", 1.0f, &params->alpha));
      if (params->alpha == 0.0)
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'alpha' must not be 0");
      return STAX_OK;
    case STAX_OP_Selu:
      STAX_RETURN_IF_ERROR(
          read_float_attribute(call, "alpha", 1.67326319217681884765625f, &params->alpha));
      return read_float_attribute(call, "gamma", 1.05070102214813232421875f, &params->gamma);
    case STAX_OP_HardSigmoid:
      STAX_RETURN_IF_ERROR(read_float_attribute(call, "alpha", 0.2f, &params->alpha));
      return read_float_attribute(call, "beta", 0.5f, &params->beta);
    case STAX_OP_Shrink:
      STAX_RETURN_IF_ERROR(read_float_attribute(call, "bias", 0.0f, &params->alpha));
      return read_float_attribute(call, "lambd", 0.5f, &params->beta);
    case STAX_OP_IsInf: {
      int64_t negative = 1, positive = 1;
      STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "detect_negative", 1, &negative));
      STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "detect_positive", 1, &positive));
      params->detect_negative = negative != 0;
      params->detect_positive = positive != 0;
      return STAX_OK;
    }
    case STAX_OP_Gelu: {
      const char* approximate = NULL;
      STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "approximate", "none", &approximate));
      if (strcmp(approximate, "tanh") == 0) {
        *out_gelu_tanh = true;
      } else if (strcmp(approximate, "none") != 0) {
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "attribute 'approximate' must be \"none\" or \"tanh\", got \"%s\"",
                                 approximate);
      }
      return STAX_OK;
    }
    default: return STAX_OK;
  }
}

static stax_status_t require_input(const stax_kernel_call_t* call, int32_t i,
                                   stax_tensor_t** out_tensor) {
  *out_tensor = stax_kernel_input(call, i);
  if (!*out_tensor) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing", i);
  return STAX_OK;
}

/* Runs op's row function over input 0 into output 0 (input 0's dims). */
static stax_status_t unary_apply(stax_kernel_call_t* call, const unary_params_t* params,
                                 bool gelu_tanh) {
  stax_tensor_t* x = NULL;
  STAX_RETURN_IF_ERROR(require_input(call, 0, &x));
  stax_op_t op = call->node->op;
  stax_dtype_t compute = x->dtype;
  if (stax_dtype_is_half(x->dtype)) compute = STAX_DTYPE_FLOAT32;
  /* Shrink's thresholds are floats: integers go through float64 and truncate back. */
  if (op == STAX_OP_Shrink && stax_dtype_is_integer(x->dtype)) compute = STAX_DTYPE_FLOAT64;
  unary_row_fn fn = unary_row_for(op, gelu_tanh, compute);
  if (!fn)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input dtype %s is not supported",
                             stax_dtype_name(x->dtype));
  bool predicate = op == STAX_OP_IsNaN || op == STAX_OP_IsInf;
  stax_dtype_t out_dtype = predicate ? STAX_DTYPE_BOOL : x->dtype;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, out_dtype, x->rank, x->dims, &out));
  unary_run(call->pool, x, out, fn, params, compute, predicate ? STAX_DTYPE_BOOL : compute);
  return STAX_OK;
}

static stax_status_t unary_kernel(stax_kernel_call_t* call) {
  unary_params_t params;
  bool gelu_tanh = false;
  STAX_RETURN_IF_ERROR(unary_params(call, &params, &gelu_tanh));
  return unary_apply(call, &params, gelu_tanh);
}

#define UNARY_KERNEL(name) \
  stax_status_t stax_kernel_##name(stax_kernel_call_t* call) { return unary_kernel(call); }
UNARY_KERNEL(Relu)
UNARY_KERNEL(LeakyRelu)
UNARY_KERNEL(Elu)
UNARY_KERNEL(Selu)
UNARY_KERNEL(Celu)
UNARY_KERNEL(ThresholdedRelu)
UNARY_KERNEL(Gelu)
UNARY_KERNEL(Sigmoid)
UNARY_KERNEL(HardSigmoid)
UNARY_KERNEL(HardSwish)
UNARY_KERNEL(Softsign)
UNARY_KERNEL(Softplus)
UNARY_KERNEL(Shrink)
UNARY_KERNEL(Tanh)
UNARY_KERNEL(Exp)
UNARY_KERNEL(Log)
UNARY_KERNEL(Sqrt)
UNARY_KERNEL(Reciprocal)
UNARY_KERNEL(Neg)
UNARY_KERNEL(Abs)
UNARY_KERNEL(Erf)
UNARY_KERNEL(Sin)
UNARY_KERNEL(Cos)
UNARY_KERNEL(Tan)
UNARY_KERNEL(Asin)
UNARY_KERNEL(Acos)
UNARY_KERNEL(Atan)
UNARY_KERNEL(Sinh)
UNARY_KERNEL(Cosh)
UNARY_KERNEL(Asinh)
UNARY_KERNEL(Acosh)
UNARY_KERNEL(Atanh)
UNARY_KERNEL(Floor)
UNARY_KERNEL(Ceil)
UNARY_KERNEL(Round)
UNARY_KERNEL(Not)
UNARY_KERNEL(Sign)
UNARY_KERNEL(IsNaN)
UNARY_KERNEL(IsInf)

/* Clip(x, min?, max?): bounds come from inputs 1 and 2 (opset 11+; each a one-element tensor of
 * x's dtype, possibly omitted) or, for older models with one input, from the float attributes
 * 'min' and 'max'. A missing bound is the compute dtype's extreme: converting -inf/+inf with
 * the saturating Cast rules gives exactly that for every dtype. */
stax_status_t stax_kernel_Clip(stax_kernel_call_t* call) {
  stax_tensor_t* x = NULL;
  STAX_RETURN_IF_ERROR(require_input(call, 0, &x));
  stax_dtype_t compute = stax_dtype_is_half(x->dtype) ? STAX_DTYPE_FLOAT32 : x->dtype;
  unary_params_t params;
  memset(&params, 0, sizeof(params));
  const double infinity = (double)INFINITY;
  const double extremes[2] = {-infinity, infinity};
  for (int32_t i = 1; i <= 2; i++) {
    unsigned char* bound = i == 1 ? params.low : params.high;
    const char* what = i == 1 ? "min" : "max";
    stax_tensor_t* input = stax_kernel_input(call, i);
    if (input) {
      if (input->dtype != x->dtype)
        return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input %d (%s) is %s but input 0 is %s",
                                 i, what, stax_dtype_name(input->dtype),
                                 stax_dtype_name(x->dtype));
      if (stax_tensor_element_count(input) != 1)
        return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                                 "input %d (%s) must be a scalar, got dims %s", i, what,
                                 stax_dims_text(input->rank, input->dims).text);
      stax_convert_elements(input->dtype, stax_tensor_data(input), compute, bound, 1);
      continue;
    }
    const stax_node_attr_t* attribute =
        call->input_count <= 1 ? stax_node_attr_find(call->node, what) : NULL;
    double value = extremes[i - 1];
    if (attribute) {
      float attribute_value = 0.0f;
      STAX_RETURN_IF_ERROR(stax_node_attr_float(call->node, what, 0.0f, &attribute_value));
      value = attribute_value;
    }
    stax_convert_elements(STAX_DTYPE_FLOAT64, &value, compute, bound, 1);
  }
  return unary_apply(call, &params, false);
}

/* Identity with no preallocated output returns a view of its input (the op is flagged VIEW:
 * no bytes move); into a preallocated output it copies. */
stax_status_t stax_kernel_Identity(stax_kernel_call_t* call) {
  stax_tensor_t* x = NULL;
  STAX_RETURN_IF_ERROR(require_input(call, 0, &x));
  if (call->output_count < 1)
    return stax_kernel_error(call, STAX_INTERNAL, "output 0 requested, node has %d",
                             call->output_count);
  if (!call->outputs[0]) {
    STAX_RETURN_IF_ERROR(stax_tensor_make_view(call->allocator, x->buffer, x->dtype, x->rank,
                                               x->dims, x->strides, x->offset, &call->outputs[0]),
                         "Identity node '%s'", call->node->name ? call->node->name : "?");
    return STAX_OK;
  }
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, x->dtype, x->rank, x->dims, &out));
  STAX_RETURN_IF_ERROR(stax_tensor_copy_into(x, out), "Identity node '%s'",
                       call->node->name ? call->node->name : "?");
  return STAX_OK;
}

typedef struct fill_true_t {
  uint8_t* data;
  int64_t inner[1];
} fill_true_t;

static void fill_true_row(void* ctx, const int64_t* offsets, int64_t count) {
  const fill_true_t* fill = ctx;
  uint8_t* row = fill->data + offsets[0];
  if (fill->inner[0] == 1) {
    memset(row, 1, (size_t)count);
  } else {
    for (int64_t i = 0; i < count; i++) row[i * fill->inner[0]] = 1;
  }
}

/* Dropout(data, ratio?, training_mode?) -> output, mask?. Inference only: the output equals
 * the input and the mask is all true. Training mode with a non-zero ratio would need random
 * masks, which nothing here provides, so it is refused rather than silently ignored. */
stax_status_t stax_kernel_Dropout(stax_kernel_call_t* call) {
  stax_tensor_t* x = NULL;
  STAX_RETURN_IF_ERROR(require_input(call, 0, &x));
  if (!stax_dtype_is_float(x->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 0 must be floating point, got %s",
                             stax_dtype_name(x->dtype));
  double ratio = 0.5;
  stax_tensor_t* ratio_tensor = stax_kernel_input(call, 1);
  if (ratio_tensor) {
    if (!stax_dtype_is_float(ratio_tensor->dtype) || stax_tensor_element_count(ratio_tensor) != 1)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "input 1 (ratio) must be a floating-point scalar, got %s %s",
                               stax_dtype_name(ratio_tensor->dtype),
                               stax_dims_text(ratio_tensor->rank, ratio_tensor->dims).text);
    stax_convert_elements(ratio_tensor->dtype, stax_tensor_data(ratio_tensor),
                          STAX_DTYPE_FLOAT64, &ratio, 1);
    if (!(ratio >= 0.0 && ratio < 1.0))
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "input 1 (ratio) must be in [0, 1), got %g", ratio);
  }
  stax_tensor_t* training = stax_kernel_input(call, 2);
  if (training) {
    if (training->dtype != STAX_DTYPE_BOOL || stax_tensor_element_count(training) != 1)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                               "input 2 (training_mode) must be a bool scalar, got %s %s",
                               stax_dtype_name(training->dtype),
                               stax_dims_text(training->rank, training->dims).text);
    if (*(const uint8_t*)stax_tensor_data(training) && ratio > 0.0)
      return stax_kernel_error(call, STAX_UNIMPLEMENTED,
                               "training mode with ratio %g is not supported (inference only)",
                               ratio);
  }
  bool preallocated[2] = {false, false};
  for (int32_t i = 0; i < call->output_count && i < 2; i++)
    preallocated[i] = call->outputs[i] != NULL;
  stax_tensor_t* out = NULL;
  stax_status_t status = stax_kernel_output(call, 0, x->dtype, x->rank, x->dims, &out);
  if (!status) {
    status = stax_tensor_copy_into(x, out);
    if (status)
      status = stax_status_annotate(status, "Dropout node '%s'",
                                    call->node->name ? call->node->name : "?");
  }
  if (!status && call->output_count > 1) {
    stax_tensor_t* mask = NULL;
    status = stax_kernel_output(call, 1, STAX_DTYPE_BOOL, x->rank, x->dims, &mask);
    if (!status) {
      fill_true_t fill = {stax_buffer_data(mask->buffer), {0}};
      int64_t strides[1][STAX_MAX_RANK];
      stax_kernel_broadcast_strides(mask, mask->rank, mask->dims, strides[0]);
      stax_elementwise_iterate(call->pool, mask->rank, mask->dims, 1,
                               (const int64_t(*)[STAX_MAX_RANK])strides, &mask->offset,
                               fill.inner, fill_true_row, &fill);
    }
  }
  if (status) {
    for (int32_t i = 0; i < call->output_count && i < 2; i++) {
      if (!preallocated[i] && call->outputs[i]) {
        stax_tensor_release(call->outputs[i]);
        call->outputs[i] = NULL;
      }
    }
    return status;
  }
  return STAX_OK;
}
