/* Binary arithmetic kernels (Add, Sub, Mul, Div, Pow, Mod, BitShift, PRelu) and the shared
 * elementwise machinery the other elementwise files (compare.c, variadic.c, where.c, unary.c,
 * unary_math.c, cast.c) reuse:
 *
 *   stax_elementwise_iterate     walks an index space for up to STAX_ND_MAX_OPERANDS strided
 *                                operands: drops size-1 dims, merges dims that are contiguous
 *                                for every operand, and runs one flat parallel loop when that
 *                                leaves one dim, else row by row over the thread pool.
 *   stax_binary_elementwise_run  out = fn(a, b) with numpy broadcasting; converts blocks of
 *                                operands whose dtype differs from the row function's compute
 *                                dtype (float16/bfloat16 through float32, mixed Pow types).
 *
 * These two are declared again in each file that uses them because kernels/ has no internal
 * header for them (reported to the owner of kernel.h; they belong next to
 * stax_nd_for_each_row).
 *
 * Typed row functions are generated per dtype by macros; the contiguous and scalar-operand
 * cases are separate loops so the compiler vectorizes them. An output may be the very same
 * memory as an input (in-place, docs/memory.md); partial overlap is not supported. The
 * pointers are not restrict, since exact overlap would break that promise; GCC's run-time
 * alias check still takes the vector loop for it (distance 0).
 * Integer Add/Sub/Mul wrap modulo 2^bits through unsigned arithmetic; integer division or
 * remainder by zero is an error naming the node, never a trap. */
#include <stdatomic.h>
#include <string.h>
#include <tgmath.h>

#include "kernels/elementwise.h"

/* ---- shared elementwise machinery -------------------------------------------------------- */


/* Elements per parallel chunk on the flat path: large enough that scheduling costs vanish. */
#define STAX_ELEMENTWISE_GRAIN 16384
/* Elements converted at a time when an operand's dtype differs from the compute dtype. */
#define STAX_ELEMENTWISE_BLOCK 256

typedef struct flat_loop_t {
  int32_t operand_count;
  const int64_t* base_offsets;
  const int64_t* inner;
  stax_nd_row_fn row;
  void* ctx;
} flat_loop_t;

static void flat_loop_chunk(void* opaque, int64_t begin, int64_t end) {
  const flat_loop_t* loop = opaque;
  int64_t offsets[STAX_ND_MAX_OPERANDS];
  for (int32_t k = 0; k < loop->operand_count; k++)
    offsets[k] = loop->base_offsets[k] + begin * loop->inner[k];
  loop->row(loop->ctx, offsets, end - begin);
}

void stax_elementwise_iterate(stax_threadpool_t* pool, int32_t rank, const int64_t* dims,
                              int32_t operand_count,
                              const int64_t (*strides)[STAX_MAX_RANK],
                              const int64_t* base_offsets, int64_t* out_inner_strides,
                              stax_nd_row_fn row, void* ctx) {
  int64_t merged_dims[STAX_MAX_RANK];
  int64_t merged_strides[STAX_ND_MAX_OPERANDS][STAX_MAX_RANK];
  int32_t merged_rank = 0;
  for (int32_t d = 0; d < rank; d++) {
    if (dims[d] == 0) return;
    if (dims[d] == 1) continue; /* never advances any operand */
    bool mergeable = merged_rank > 0;
    for (int32_t k = 0; mergeable && k < operand_count; k++)
      mergeable = merged_strides[k][merged_rank - 1] == strides[k][d] * dims[d];
    if (mergeable) {
      merged_dims[merged_rank - 1] *= dims[d];
      for (int32_t k = 0; k < operand_count; k++)
        merged_strides[k][merged_rank - 1] = strides[k][d];
      continue;
    }
    merged_dims[merged_rank] = dims[d];
    for (int32_t k = 0; k < operand_count; k++) merged_strides[k][merged_rank] = strides[k][d];
    merged_rank++;
  }
  if (merged_rank <= 1) {
    /* One run of elements: split it by elements, not rows, so one long row still threads. */
    int64_t count = merged_rank ? merged_dims[0] : 1;
    for (int32_t k = 0; k < operand_count; k++)
      out_inner_strides[k] = merged_rank ? merged_strides[k][0] : 0;
    flat_loop_t loop = {operand_count, base_offsets, out_inner_strides, row, ctx};
    if (!pool || count <= STAX_ELEMENTWISE_GRAIN) {
      flat_loop_chunk(&loop, 0, count);
    } else {
      stax_parallel_for(pool, count, STAX_ELEMENTWISE_GRAIN, flat_loop_chunk, &loop);
    }
    return;
  }
  const int64_t* stride_rows[STAX_ND_MAX_OPERANDS];
  for (int32_t k = 0; k < operand_count; k++) {
    out_inner_strides[k] = merged_strides[k][merged_rank - 1];
    stride_rows[k] = merged_strides[k];
  }
  stax_nd_for_each_row_parallel(pool, merged_rank, merged_dims, operand_count, stride_rows,
                                base_offsets, 1, row, ctx);
}

/* Operand 0 is the output, 1 and 2 the inputs. */
typedef struct binary_engine_t {
  stax_binary_row_fn fn;
  stax_dtype_t dtypes[3];
  stax_dtype_t compute[3];
  int64_t sizes[3];
  int64_t compute_sizes[3];
  char* data[3];
  int64_t inner[3];
  bool direct; /* every operand already has its compute dtype */
  atomic_bool fault;
} binary_engine_t;

typedef union elementwise_scratch_t {
  double f64[STAX_ELEMENTWISE_BLOCK];
  uint64_t u64[STAX_ELEMENTWISE_BLOCK];
} elementwise_scratch_t;

static void binary_engine_row(void* opaque, const int64_t* offsets, int64_t count) {
  binary_engine_t* engine = opaque;
  char* rows[3];
  for (int32_t k = 0; k < 3; k++) rows[k] = engine->data[k] + offsets[k] * engine->sizes[k];
  bool fault = false;
  if (engine->direct) {
    fault = engine->fn(rows[0], engine->inner[0], rows[1], engine->inner[1], rows[2],
                       engine->inner[2], count);
  } else {
    elementwise_scratch_t scratch[3];
    for (int64_t done = 0; done < count; done += STAX_ELEMENTWISE_BLOCK) {
      int64_t n = count - done < STAX_ELEMENTWISE_BLOCK ? count - done : STAX_ELEMENTWISE_BLOCK;
      void* args[3];
      int64_t arg_strides[3];
      for (int32_t k = 0; k < 3; k++) {
        char* at = rows[k] + done * engine->inner[k] * engine->sizes[k];
        if (engine->dtypes[k] == engine->compute[k]) {
          args[k] = at;
          arg_strides[k] = engine->inner[k];
        } else if (k == 0) {
          args[k] = &scratch[k];
          arg_strides[k] = 1;
        } else {
          /* A broadcast input needs converting once, not once per element. */
          int64_t convert_count = engine->inner[k] == 0 ? 1 : n;
          stax_convert_strided(engine->dtypes[k], at, engine->inner[k] * engine->sizes[k],
                               engine->compute[k], &scratch[k], engine->compute_sizes[k],
                               convert_count);
          args[k] = &scratch[k];
          arg_strides[k] = engine->inner[k] == 0 ? 0 : 1;
        }
      }
      fault |= engine->fn(args[0], arg_strides[0], args[1], arg_strides[1], args[2],
                          arg_strides[2], n);
      if (engine->dtypes[0] != engine->compute[0]) {
        stax_convert_strided(engine->compute[0], &scratch[0], engine->compute_sizes[0],
                             engine->dtypes[0],
                             rows[0] + done * engine->inner[0] * engine->sizes[0],
                             engine->inner[0] * engine->sizes[0], n);
      }
    }
  }
  if (fault) atomic_store_explicit(&engine->fault, true, memory_order_relaxed);
}

bool stax_binary_elementwise_run(stax_threadpool_t* pool, const stax_tensor_t* a,
                                 const stax_tensor_t* b, stax_tensor_t* out,
                                 stax_binary_row_fn fn, stax_dtype_t compute_in,
                                 stax_dtype_t compute_out) {
  const stax_tensor_t* tensors[3] = {out, a, b};
  binary_engine_t engine;
  engine.fn = fn;
  engine.direct = true;
  atomic_init(&engine.fault, false);
  int64_t strides[3][STAX_MAX_RANK];
  int64_t base_offsets[3];
  for (int32_t k = 0; k < 3; k++) {
    const stax_tensor_t* t = tensors[k];
    engine.dtypes[k] = t->dtype;
    engine.compute[k] = k == 0 ? compute_out : compute_in;
    engine.sizes[k] = (int64_t)stax_dtype_size(t->dtype);
    engine.compute_sizes[k] = (int64_t)stax_dtype_size(engine.compute[k]);
    engine.data[k] = stax_buffer_data(t->buffer);
    engine.direct = engine.direct && engine.dtypes[k] == engine.compute[k];
    stax_kernel_broadcast_strides(t, out->rank, out->dims, strides[k]);
    base_offsets[k] = t->offset;
  }
  stax_elementwise_iterate(pool, out->rank, out->dims, 3, (const int64_t(*)[STAX_MAX_RANK])strides,
                           base_offsets, engine.inner, binary_engine_row, &engine);
  return atomic_load(&engine.fault);
}

/* ---- typed row functions ----------------------------------------------------------------- */

/* The body of a binary row function. Inside EXPR, x and y are the operands, T their type, U
 * the unsigned type integer arithmetic wraps in, and `fault` may be set. */
#define BINARY_ROW(name, TA, UA, TOUT, EXPR)                                                \
  static bool name(void* out_, int64_t out_stride, const void* a_, int64_t a_stride,       \
                   const void* b_, int64_t b_stride, int64_t count) {                      \
    typedef TA T;                                                                          \
    typedef UA U;                                                                          \
    TOUT* out = out_;                                                                      \
    const T* a = a_;                                                                       \
    const T* b = b_;                                                                       \
    bool fault = false;                                                                    \
    (void)sizeof(U);                                                                       \
    STAX_BINARY_ROW_LOOPS(EXPR)                                                            \
    return fault;                                                                          \
  }

/* Type lists: X(dtype suffix, C type, unsigned arithmetic type, op, EXPR). The arithmetic
 * type is at least 32 bits so small types never promote to (overflowing) signed int. */
#define FLOAT_TYPES(X, op, ...) \
  X(FLOAT32, float, uint32_t, op, __VA_ARGS__) X(FLOAT64, double, uint64_t, op, __VA_ARGS__)
#define SIGNED_TYPES(X, op, ...)                                                            \
  X(INT8, int8_t, uint32_t, op, __VA_ARGS__) X(INT16, int16_t, uint32_t, op, __VA_ARGS__)  \
  X(INT32, int32_t, uint32_t, op, __VA_ARGS__) X(INT64, int64_t, uint64_t, op, __VA_ARGS__)
#define UNSIGNED_TYPES(X, op, ...)                                                          \
  X(UINT8, uint8_t, uint32_t, op, __VA_ARGS__) X(UINT16, uint16_t, uint32_t, op, __VA_ARGS__) \
  X(UINT32, uint32_t, uint32_t, op, __VA_ARGS__) X(UINT64, uint64_t, uint64_t, op, __VA_ARGS__)

#define DEFINE_SAME(dtype, ctype, utype, op, ...) \
  BINARY_ROW(binary_##op##_##dtype, ctype, utype, ctype, __VA_ARGS__)
#define CASE_FN(dtype, ctype, utype, op, ...) \
  case STAX_DTYPE_##dtype:                    \
    return binary_##op##_##dtype;

/* Python-style remainder (sign of the divisor) for y not 0 or -1. */
static inline int64_t floor_mod_i64(int64_t x, int64_t y) {
  int64_t r = x % y;
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}

/* Python-style remainder for floats (numpy's mod); see ModFloor below. */
static inline float floor_mod_f32(float x, float y) {
  float r = fmodf(x, y);
  if (r == 0) return copysignf(0.0f, y);
  return (r < 0) != (y < 0) ? r + y : r;
}
static inline double floor_mod_f64(double x, double y) {
  double r = fmod(x, y);
  if (r == 0) return copysign(0.0, y);
  return (r < 0) != (y < 0) ? r + y : r;
}
#define floor_mod_float(x, y) _Generic((x), float: floor_mod_f32, double: floor_mod_f64)(x, y)

/* x^e for integers, wrapping modulo 2^64 (the caller truncates to its width, which gives the
 * same result as wrapping at that width). Negative exponents give the truncated true value:
 * 1, +-1 for base -1, 0 otherwise; 0 to a negative power is a fault. */
static inline int64_t integer_power(int64_t base, int64_t exponent, bool* fault) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent & 1) ? -1 : 1;
    if (base == 0) *fault = true;
    return 0;
  }
  uint64_t result = 1, factor = (uint64_t)base, e = (uint64_t)exponent;
  while (e) {
    if (e & 1) result *= factor;
    factor *= factor;
    e >>= 1;
  }
  return (int64_t)result;
}

/* Add, Sub, Mul */
FLOAT_TYPES(DEFINE_SAME, Add, x + y)
SIGNED_TYPES(DEFINE_SAME, Add, (U)x + (U)y)
UNSIGNED_TYPES(DEFINE_SAME, Add, (U)x + (U)y)
FLOAT_TYPES(DEFINE_SAME, Sub, x - y)
SIGNED_TYPES(DEFINE_SAME, Sub, (U)x - (U)y)
UNSIGNED_TYPES(DEFINE_SAME, Sub, (U)x - (U)y)
FLOAT_TYPES(DEFINE_SAME, Mul, x * y)
SIGNED_TYPES(DEFINE_SAME, Mul, (U)x * (U)y)
UNSIGNED_TYPES(DEFINE_SAME, Mul, (U)x * (U)y)

/* Div: integers truncate toward zero (ONNX, C); MIN / -1 wraps to MIN instead of trapping. */
FLOAT_TYPES(DEFINE_SAME, Div, x / y)
SIGNED_TYPES(DEFINE_SAME, Div,
             y == 0 ? (fault = true, (T)0) : y == -1 ? (T)((U)0 - (U)x) : (T)(x / y))
UNSIGNED_TYPES(DEFINE_SAME, Div, y == 0 ? (fault = true, (T)0) : (T)(x / y))

/* Mod with fmod = 0: the result takes the divisor's sign. Floats (allowed since opset 28):
 * a zero result is a zero with y's sign, and fmod's NaN for x = inf or y = 0 stays NaN. */
FLOAT_TYPES(DEFINE_SAME, ModFloor, floor_mod_float(x, y))
SIGNED_TYPES(DEFINE_SAME, ModFloor,
             y == 0 ? (fault = true, (T)0) : y == -1 ? (T)0 : (T)floor_mod_i64(x, y))
UNSIGNED_TYPES(DEFINE_SAME, ModFloor, y == 0 ? (fault = true, (T)0) : (T)(x % y))
/* Mod with fmod = 1: the result takes the dividend's sign (C's % and fmod). */
FLOAT_TYPES(DEFINE_SAME, ModTrunc, fmod(x, y))
SIGNED_TYPES(DEFINE_SAME, ModTrunc,
             y == 0 ? (fault = true, (T)0) : y == -1 ? (T)0 : (T)((int64_t)x % (int64_t)y))
UNSIGNED_TYPES(DEFINE_SAME, ModTrunc, y == 0 ? (fault = true, (T)0) : (T)(x % y))

/* Pow: floats natively; integer bases with integer exponents in int64 (see stax_kernel_Pow). */
FLOAT_TYPES(DEFINE_SAME, Pow, pow(x, y))
BINARY_ROW(binary_Pow_INT64, int64_t, uint64_t, int64_t, integer_power(x, y, &fault))

/* BitShift: shifting by the width or more gives 0 (numpy) instead of C's undefined shift.
 * Signed types (opset 28): left shifts wrap through the unsigned type; right shifts are
 * arithmetic, written with ~ so no negative value is shifted (implementation-defined in C);
 * a negative or too wide count leaves only the sign fill, -1 or 0. */
UNSIGNED_TYPES(DEFINE_SAME, ShiftLeft, y >= sizeof(T) * 8 ? (T)0 : (T)((U)x << y))
UNSIGNED_TYPES(DEFINE_SAME, ShiftRight, y >= sizeof(T) * 8 ? (T)0 : (T)(x >> y))
SIGNED_TYPES(DEFINE_SAME, ShiftLeft,
             y < 0 || (int64_t)y >= (int64_t)sizeof(T) * 8 ? (T)0 : (T)((U)x << y))
SIGNED_TYPES(DEFINE_SAME, ShiftRight,
             y < 0 || (int64_t)y >= (int64_t)sizeof(T) * 8 ? (x < 0 ? (T)-1 : (T)0)
             : x < 0                                        ? (T)~(~x >> y)
                                                            : (T)(x >> y))

/* PRelu: slope * x where x < 0; unsigned x is never negative. */
FLOAT_TYPES(DEFINE_SAME, PRelu, x < 0 ? x * y : x)
SIGNED_TYPES(DEFINE_SAME, PRelu, x < 0 ? (T)((U)x * (U)y) : x)
UNSIGNED_TYPES(DEFINE_SAME, PRelu, ((void)y, x))

typedef enum binary_kind_e {
  BINARY_ADD,
  BINARY_SUB,
  BINARY_MUL,
  BINARY_DIV,
  BINARY_MOD_FLOOR,
  BINARY_MOD_TRUNC,
  BINARY_SHIFT_LEFT,
  BINARY_SHIFT_RIGHT,
  BINARY_PRELU,
} binary_kind_t;

/* The row function for an op on a natively handled dtype, or NULL. */
static stax_binary_row_fn binary_row_for(binary_kind_t kind, stax_dtype_t dtype) {
#define ANY_NUMBER(op)                                                      \
  switch (dtype) {                                                          \
    FLOAT_TYPES(CASE_FN, op) SIGNED_TYPES(CASE_FN, op) UNSIGNED_TYPES(CASE_FN, op) \
    default: return NULL;                                                   \
  }
#define INTEGER(op)                                                         \
  switch (dtype) {                                                          \
    SIGNED_TYPES(CASE_FN, op) UNSIGNED_TYPES(CASE_FN, op)                   \
    default: return NULL;                                                   \
  }
  switch (kind) {
    case BINARY_ADD: ANY_NUMBER(Add)
    case BINARY_SUB: ANY_NUMBER(Sub)
    case BINARY_MUL: ANY_NUMBER(Mul)
    case BINARY_DIV: ANY_NUMBER(Div)
    case BINARY_MOD_TRUNC: ANY_NUMBER(ModTrunc)
    case BINARY_PRELU: ANY_NUMBER(PRelu)
    case BINARY_MOD_FLOOR: ANY_NUMBER(ModFloor)
    case BINARY_SHIFT_LEFT: INTEGER(ShiftLeft)
    case BINARY_SHIFT_RIGHT: INTEGER(ShiftRight)
  }
#undef ANY_NUMBER
#undef INTEGER
  return NULL;
}

/* ---- kernels ----------------------------------------------------------------------------- */

/* Reads inputs 0 and 1, which must be present. */
static stax_status_t binary_inputs(const stax_kernel_call_t* call, stax_tensor_t** out_a,
                                   stax_tensor_t** out_b) {
  *out_a = stax_kernel_input(call, 0);
  *out_b = stax_kernel_input(call, 1);
  if (!*out_a || !*out_b)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing", *out_a ? 1 : 0);
  return STAX_OK;
}

static stax_status_t require_same_dtype(const stax_kernel_call_t* call, const stax_tensor_t* a,
                                        const stax_tensor_t* b) {
  if (a->dtype == b->dtype) return STAX_OK;
  return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 1 is %s but input 0 is %s",
                           stax_dtype_name(b->dtype), stax_dtype_name(a->dtype));
}

/* Allocates (or checks) output 0 with `dtype` and the given dims, runs fn, and turns a fault
 * into an error; releases an output it allocated when anything fails. */
static stax_status_t run_binary(stax_kernel_call_t* call, stax_tensor_t* a, stax_tensor_t* b,
                                stax_dtype_t out_dtype, int32_t rank, const int64_t* dims,
                                stax_binary_row_fn fn, stax_dtype_t compute_in,
                                stax_dtype_t compute_out, const char* fault_message) {
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, out_dtype, rank, dims, &out));
  if (!stax_binary_elementwise_run(call->pool, a, b, out, fn, compute_in, compute_out))
    return STAX_OK;
  if (!preallocated) {
    stax_tensor_release(out);
    call->outputs[0] = NULL;
  }
  return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "%s",
                           fault_message ? fault_message : "an element faulted");
}

static stax_status_t binary_kernel(stax_kernel_call_t* call, binary_kind_t kind,
                                   const char* fault_message) {
  stax_tensor_t *a = NULL, *b = NULL;
  STAX_RETURN_IF_ERROR(binary_inputs(call, &a, &b));
  STAX_RETURN_IF_ERROR(require_same_dtype(call, a, b));
  stax_dtype_t compute = stax_dtype_is_half(a->dtype) ? STAX_DTYPE_FLOAT32 : a->dtype;
  stax_binary_row_fn fn = binary_row_for(kind, compute);
  if (!fn)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input dtype %s is not supported",
                             stax_dtype_name(a->dtype));
  int32_t rank = 0;
  int64_t dims[STAX_MAX_RANK];
  stax_tensor_t* operands[2] = {a, b};
  STAX_RETURN_IF_ERROR(stax_kernel_broadcast_shape(call, 2, operands, &rank, dims));
  return run_binary(call, a, b, a->dtype, rank, dims, fn, compute, compute, fault_message);
}

stax_status_t stax_kernel_Add(stax_kernel_call_t* call) {
  return binary_kernel(call, BINARY_ADD, NULL);
}
stax_status_t stax_kernel_Sub(stax_kernel_call_t* call) {
  return binary_kernel(call, BINARY_SUB, NULL);
}
stax_status_t stax_kernel_Mul(stax_kernel_call_t* call) {
  return binary_kernel(call, BINARY_MUL, NULL);
}
stax_status_t stax_kernel_Div(stax_kernel_call_t* call) {
  return binary_kernel(call, BINARY_DIV, "integer division by zero (input 1 holds a 0)");
}

stax_status_t stax_kernel_Mod(stax_kernel_call_t* call) {
  int64_t fmod_flag = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "fmod", 0, &fmod_flag));
  if (fmod_flag != 0 && fmod_flag != 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'fmod' must be 0 or 1, got %lld", (long long)fmod_flag);
  return binary_kernel(call, fmod_flag ? BINARY_MOD_TRUNC : BINARY_MOD_FLOOR,
                       "integer modulo by zero (input 1 holds a 0)");
}

stax_status_t stax_kernel_BitShift(stax_kernel_call_t* call) {
  const char* direction = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "direction", NULL, &direction));
  bool left = direction && strcmp(direction, "LEFT") == 0;
  bool right = direction && strcmp(direction, "RIGHT") == 0;
  if (!left && !right)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'direction' must be \"LEFT\" or \"RIGHT\", got %s",
                             direction ? direction : "none");
  return binary_kernel(call, left ? BINARY_SHIFT_LEFT : BINARY_SHIFT_RIGHT, NULL);
}

/* Pow lets the exponent's dtype differ from the base's; the output has the base's dtype.
 * Floats compute in float32 when both sides fit it exactly enough, else float64; an integer
 * base with an integer exponent computes exactly in int64 (wrapping), and with a float
 * exponent in float64, truncated back like a Cast. */
stax_status_t stax_kernel_Pow(stax_kernel_call_t* call) {
  stax_tensor_t *a = NULL, *b = NULL;
  STAX_RETURN_IF_ERROR(binary_inputs(call, &a, &b));
  for (int32_t i = 0; i < 2; i++) {
    stax_dtype_t dtype = i ? b->dtype : a->dtype;
    if (dtype == STAX_DTYPE_BOOL || !stax_dtype_is_valid(dtype))
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input %d dtype %s is not a number", i,
                               stax_dtype_name(dtype));
  }
  stax_dtype_t compute;
  if (stax_dtype_is_float(a->dtype)) {
    bool narrow_base = a->dtype != STAX_DTYPE_FLOAT64;
    bool narrow_exponent = b->dtype == STAX_DTYPE_FLOAT32 || stax_dtype_is_half(b->dtype) ||
                           (stax_dtype_is_integer(b->dtype) && stax_dtype_size(b->dtype) <= 2);
    compute = narrow_base && narrow_exponent ? STAX_DTYPE_FLOAT32 : STAX_DTYPE_FLOAT64;
  } else {
    compute = stax_dtype_is_integer(b->dtype) ? STAX_DTYPE_INT64 : STAX_DTYPE_FLOAT64;
  }
  stax_binary_row_fn fn = compute == STAX_DTYPE_FLOAT32   ? binary_Pow_FLOAT32
                          : compute == STAX_DTYPE_FLOAT64 ? binary_Pow_FLOAT64
                                                          : binary_Pow_INT64;
  int32_t rank = 0;
  int64_t dims[STAX_MAX_RANK];
  stax_tensor_t* operands[2] = {a, b};
  STAX_RETURN_IF_ERROR(stax_kernel_broadcast_shape(call, 2, operands, &rank, dims));
  return run_binary(call, a, b, a->dtype, rank, dims, fn, compute, compute,
                    "integer 0 raised to a negative power");
}

/* PRelu's slope broadcasts into X (unidirectionally); the output has X's shape. */
stax_status_t stax_kernel_PRelu(stax_kernel_call_t* call) {
  stax_tensor_t *x = NULL, *slope = NULL;
  STAX_RETURN_IF_ERROR(binary_inputs(call, &x, &slope));
  STAX_RETURN_IF_ERROR(require_same_dtype(call, x, slope));
  stax_dtype_t compute = stax_dtype_is_half(x->dtype) ? STAX_DTYPE_FLOAT32 : x->dtype;
  stax_binary_row_fn fn = binary_row_for(BINARY_PRELU, compute);
  if (!fn)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input dtype %s is not supported",
                             stax_dtype_name(x->dtype));
  int32_t rank = 0;
  int64_t dims[STAX_MAX_RANK];
  stax_tensor_t* operands[2] = {x, slope};
  STAX_RETURN_IF_ERROR(stax_kernel_broadcast_shape(call, 2, operands, &rank, dims));
  bool same = rank == x->rank;
  for (int32_t d = 0; same && d < rank; d++) same = dims[d] == x->dims[d];
  if (!same)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "slope (input 1) dims %s do not broadcast to X (input 0) dims %s",
                             stax_dims_text(slope->rank, slope->dims).text,
                             stax_dims_text(x->rank, x->dims).text);
  return run_binary(call, x, slope, x->dtype, x->rank, x->dims, fn, compute, compute, NULL);
}
