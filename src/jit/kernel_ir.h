/* Kernel IR ("kir"): the target-neutral, loop-level form every JIT backend consumes. Lowering
 * (src/jit/lower*.c) turns a fusion group with concrete shapes into it; the LLVM backend (and
 * later the CUDA backend) turns it into code. It holds no backend types.
 *
 * A kernel is:
 *   - buffers: the tensors it touches, each with a dtype and concrete dims/strides in elements.
 *     Inputs and outputs are the caller's tensors; scratch buffers (packed panels) are
 *     allocated by the host for one run. Every index is a flat element offset from the
 *     buffer's first element (which may be negative for reversed views).
 *   - stages, run one after another. A stage's body is a block of statements; when its only
 *     statement is a loop marked parallel, the host splits that loop's range over the thread
 *     pool (the backend's function takes [begin, end) of it).
 *   - statements: LOOP (counter 0..extent-1, optional vector width, unroll factor, parallel
 *     flag), STORE buffer[affine index] = expression, DECLARE / ASSIGN of a local, and REDUCE
 *     (local op= expression, op one of add, mul, max, min).
 *   - expressions: constants, loads at affine indices, locals, loop counters, unary and binary
 *     math (including compares, which give bool), select, fused multiply-add, casts.
 *
 * Loop counters always run 0..extent-1 with step 1: strides and tile offsets live in the
 * affine indices (i = 6*tile + row is the index {6*tile + row}), which is what keeps
 * vectorization and bounds checking simple. A loop with vector width W > 1 runs its body on W
 * consecutive counter values at once ("lanes"): every value depending on the counter is a
 * vector; loops nested inside run once for all lanes (used for register-tiled matmul, where
 * the lanes are the columns and the k loop sits inside). Locals declared inside a vector loop
 * are per lane; a local declared outside may only be REDUCEd inside it (the backend keeps
 * partial accumulators per lane and combines them when the loop ends). Vector loops do not
 * nest.
 *
 * Nodes live in the kernel's arena. Builders never fail loudly: on an error (out of memory, a
 * type mismatch that can only be a lowering bug) they record the first error in the kernel and
 * return a placeholder or NULL, and stax_kir_kernel_status reports it at the end, so lowering
 * code reads straight. stax_kir_verify checks scopes, the vector rules and that every load and
 * store stays inside its buffer for every counter value; backends run only verified kernels. */
#ifndef STAX_JIT_KERNEL_IR_H_
#define STAX_JIT_KERNEL_IR_H_

#include <stdio.h>

#include "base/arena.h"
#include "stax/runtime.h"

/* Terms of an affine index (sum of coefficient * loop counter, plus a constant). */
#define STAX_KIR_MAX_INDEX_TERMS 16
/* Widest vector a loop may ask for (lanes). */
#define STAX_KIR_MAX_VECTOR_WIDTH 64
/* Run-time parameters of a rows-generic or symbolic kernel (see "Rows-generic kernels" and
 * "Symbolic kernels" below). */
#define STAX_KIR_MAX_PARAMS 64
/* An index term whose "loop" is STAX_KIR_PARAM_TERM + p multiplies parameter p, not a loop
 * counter: the same term list then carries both, and merging terms needs no special case. */
#define STAX_KIR_PARAM_TERM (1 << 24)

/* A term is coefficients[t] * loop counter (or parameter) loops[t], times parameter
 * scales[t] - 1 when scales[t] > 0 (symbolic kernels: a stride known only at run time). */
typedef struct stax_kir_index_t {
  int64_t constant;
  int32_t term_count;
  int32_t loops[STAX_KIR_MAX_INDEX_TERMS];
  int64_t coefficients[STAX_KIR_MAX_INDEX_TERMS];
  int32_t scales[STAX_KIR_MAX_INDEX_TERMS];
} stax_kir_index_t;

/* ---- operators --------------------------------------------------------------------------- */

/* X(enum suffix, printed name). Float math ops take float operands; NOT takes bool; NEG, ABS
 * also integers; IS_NAN / IS_INF give bool. Ops named after a libm function compute what that
 * function computes. */
/* clang-format off */
#define STAX_KIR_UNARY_OPS(X)                                                               \
  X(NEG, "neg") X(ABS, "abs") X(NOT, "not") X(SQRT, "sqrt") X(EXP, "exp") X(EXPM1, "expm1") \
  X(LOG, "log") X(TANH, "tanh") X(ERF, "erf") X(FLOOR, "floor") X(CEIL, "ceil")             \
  X(ROUND, "round") X(SIN, "sin") X(COS, "cos") X(TAN, "tan") X(ASIN, "asin")               \
  X(ACOS, "acos") X(ATAN, "atan") X(SINH, "sinh") X(COSH, "cosh") X(ASINH, "asinh")         \
  X(ACOSH, "acosh") X(ATANH, "atanh") X(LOG1P, "log1p") X(IS_NAN, "isnan")                  \
  X(IS_INF, "isinf") X(ERFC, "erfc")
/* clang-format on */

/* MAX / MIN propagate NaN (numpy.maximum). Compares give bool; AND / OR / XOR take bool. */
/* clang-format off */
#define STAX_KIR_BINARY_OPS(X)                                                              \
  X(ADD, "+") X(SUB, "-") X(MUL, "*") X(DIV, "/") X(MAX, "max") X(MIN, "min") X(POW, "pow") \
  X(AND, "and") X(OR, "or") X(XOR, "xor") X(EQ, "==") X(NE, "!=") X(LT, "<") X(LE, "<=")    \
  X(GT, ">") X(GE, ">=")
/* clang-format on */

typedef enum stax_kir_unary_op_e {
#define STAX_KIR_ENUM(name, text) STAX_KIR_##name,
  STAX_KIR_UNARY_OPS(STAX_KIR_ENUM)
#undef STAX_KIR_ENUM
      STAX_KIR_UNARY_OP_COUNT
} stax_kir_unary_op_t;

typedef enum stax_kir_binary_op_e {
#define STAX_KIR_ENUM(name, text) STAX_KIR_##name,
  STAX_KIR_BINARY_OPS(STAX_KIR_ENUM)
#undef STAX_KIR_ENUM
      STAX_KIR_BINARY_OP_COUNT
} stax_kir_binary_op_t;

const char* stax_kir_unary_op_name(stax_kir_unary_op_t op);
const char* stax_kir_binary_op_name(stax_kir_binary_op_t op);
bool stax_kir_binary_op_is_compare(stax_kir_binary_op_t op);

/* ---- expressions ------------------------------------------------------------------------- */

typedef enum stax_kir_expr_kind_e {
  STAX_KIR_CONSTANT,
  STAX_KIR_LOAD,
  STAX_KIR_LOCAL,
  STAX_KIR_LOOP_INDEX, /* int64 */
  STAX_KIR_UNARY,
  STAX_KIR_BINARY,
  STAX_KIR_SELECT, /* operands: condition (bool), value if true, value if false */
  STAX_KIR_FMA,    /* operands a, b, c: a * b + c, rounded once */
  STAX_KIR_CAST,   /* ONNX Cast semantics: float to int truncates (saturating), to bool != 0 */
} stax_kir_expr_kind_t;

typedef struct stax_kir_expr_s {
  stax_kir_expr_kind_t kind;
  stax_dtype_t dtype;            /* of the result; BOOL for predicates */
  int32_t id;                    /* dense, per kernel: backends key caches by it */
  int32_t op;                    /* stax_kir_unary_op_t / stax_kir_binary_op_t */
  int32_t buffer;                /* LOAD */
  int32_t local;                 /* LOCAL */
  int32_t loop;                  /* LOOP_INDEX */
  double float_value;            /* CONSTANT of a float dtype */
  int64_t int_value;             /* CONSTANT of an integer or bool dtype */
  const stax_kir_index_t* index; /* LOAD */
  int32_t operand_count;
  const struct stax_kir_expr_s* operands[3];
} stax_kir_expr_t;

/* ---- statements -------------------------------------------------------------------------- */

typedef enum stax_kir_stmt_kind_e {
  STAX_KIR_STMT_LOOP,
  STAX_KIR_STMT_STORE,
  STAX_KIR_STMT_DECLARE, /* local = value, the local's scope is the enclosing block */
  STAX_KIR_STMT_ASSIGN,
  STAX_KIR_STMT_REDUCE, /* local = reduce_op(local, value) */
} stax_kir_stmt_kind_t;

typedef struct stax_kir_stmt_s stax_kir_stmt_t;

typedef struct stax_kir_block_t {
  stax_kir_stmt_t* first;
  stax_kir_stmt_t* last;
} stax_kir_block_t;

struct stax_kir_stmt_s {
  stax_kir_stmt_kind_t kind;
  stax_kir_stmt_t* next;
  int32_t loop;                   /* LOOP */
  int32_t buffer;                 /* STORE */
  const stax_kir_index_t* index;  /* STORE */
  int32_t local;                  /* DECLARE, ASSIGN, REDUCE */
  stax_kir_binary_op_t reduce_op; /* REDUCE: ADD, MUL, MAX or MIN */
  const stax_kir_expr_t* value;   /* STORE, DECLARE, ASSIGN, REDUCE */
};

typedef struct stax_kir_loop_t {
  const char* name;
  int64_t extent;       /* counter runs 0..extent-1 (the example's, when extent_param >= 0) */
  int32_t extent_param; /* >= 0: the extent is that run-time parameter's value; -1: `extent` */
  int32_t vector_width; /* 1: scalar */
  int32_t unroll;       /* body copies per iteration (the backend handles remainders) */
  bool parallel;        /* only on a stage's single top-level loop */
  int64_t grain;        /* parallel: fewest iterations one task should take */
  stax_kir_block_t body;
} stax_kir_loop_t;

/* ---- buffers, locals, stages, kernels ---------------------------------------------------- */

typedef enum stax_kir_buffer_role_e {
  STAX_KIR_BUFFER_INPUT,
  STAX_KIR_BUFFER_OUTPUT,
  STAX_KIR_BUFFER_SCRATCH, /* contiguous, uninitialised, `span` elements, host-allocated */
} stax_kir_buffer_role_t;

typedef struct stax_kir_buffer_t {
  const char* name;
  stax_kir_buffer_role_t role;
  stax_dtype_t dtype;
  int32_t rank;
  int64_t dims[STAX_MAX_RANK];
  int64_t strides[STAX_MAX_RANK];
  int64_t lowest, highest; /* element offsets reachable (from dims/strides); highest < lowest
                              for an empty buffer */
  /* Rows-generic kernels: dims[0] is the kernel's row count (parameter 0), whatever the
   * example's dims[0] was; strides[0] stays what it is for every row count. */
  bool rows;
  /* Symbolic kernels: dim / stride d is parameter dim_params[d] / stride_params[d] at run time
   * (-1: the value above, fixed); dims and strides above are the example's. */
  int32_t dim_params[STAX_MAX_RANK];
  int32_t stride_params[STAX_MAX_RANK];
} stax_kir_buffer_t;

typedef struct stax_kir_local_t {
  const char* name;
  stax_dtype_t dtype;
} stax_kir_local_t;

typedef struct stax_kir_stage_t {
  const char* name;
  stax_kir_block_t body;
  /* Set by lowering when the stage only fills scratch buffer `fills` from input buffer
   * `source`, and that input is a constant (a weight: the same contents on every run). The
   * host may then keep the filled buffer with the constant and skip the stage on later runs;
   * `fill_key` names the layout (everything but the source's data). -1: an ordinary stage. */
  int32_t fills;
  int32_t source;
  uint64_t fill_key;
  /* Rows-generic kernels: a parallel stage runs on the calling thread below this many rows
   * (too little work per task to wake the pool); 0: always split. */
  int64_t parallel_min_rows;
  /* Rows-generic kernels: the stage runs only for run_min_rows <= R <= run_max_rows (0 and
   * INT64_MAX by default), e.g. a matmul's whole-tile stages from MR rows on and a one-row
   * stage below. Both ends must lie below rows_min + 2 * the parameters' period (the
   * verifier's proof walks every R up to there). */
  int64_t run_min_rows, run_max_rows;
  /* Symbolic kernels: the stage runs only while every condition c with when_param[c] >= 0
   * holds: when_min[c] <= parameter when_param[c] <= when_max[c]. */
  int32_t when_param[2];
  int64_t when_min[2], when_max[2];
} stax_kir_stage_t;

/* A run-time parameter of a rows-generic kernel, a function of the row count R >= 0:
 *   value(R) = sum over t < STAX_KIR_PARAM_TERMS with div[t] > 0 of
 *              mul[t] * floor((R + add[t]) / div[t]) + offset
 * (add[t] >= 0, div[t] >= 1). Quasi-linear on purpose: value(R + P) - value(R) is the same for
 * every R when P is a multiple of every div, which is what lets the verifier prove a kernel's
 * accesses in bounds for every row count by checking a few (kernel_ir_verify.c). */
typedef enum stax_kir_param_kind_e {
  STAX_KIR_PARAM_ROWS = 0,   /* rows-generic: the formula below in R */
  STAX_KIR_PARAM_DIM,        /* symbolic: dim `dim` of the tensor passed as buffer `buffer` */
  STAX_KIR_PARAM_STRIDE,     /* symbolic: stride `dim` of that tensor */
  STAX_KIR_PARAM_DERIVED,    /* symbolic: the formula below in parameter `of`, times `times` */
} stax_kir_param_kind_t;

/* Three terms: the rows-generic matmul's overlapping rest tile where MR = 6 needs
 * floor((R + 1) / 2) - floor(R / 3) - floor((R + 2) / 6) (lower_matmul.c). */
#define STAX_KIR_PARAM_TERMS 3

typedef struct stax_kir_param_t {
  const char* name;
  int64_t mul[STAX_KIR_PARAM_TERMS], add[STAX_KIR_PARAM_TERMS], div[STAX_KIR_PARAM_TERMS];
  int64_t offset;
  stax_kir_param_kind_t kind;
  int32_t buffer, dim; /* DIM, STRIDE */
  int32_t of, times;   /* DERIVED: earlier parameters (times -1: no factor) */
} stax_kir_param_t;

typedef struct stax_kir_kernel_t {
  stax_allocator_t allocator;
  stax_arena_t arena;
  const char* name;
  stax_kir_buffer_t** buffers;
  int32_t buffer_count, buffer_capacity;
  stax_kir_loop_t** loops;
  int32_t loop_count, loop_capacity;
  stax_kir_local_t** locals;
  int32_t local_count, local_capacity;
  stax_kir_stage_t** stages;
  int32_t stage_count, stage_capacity;
  int32_t expr_count;
  /* Set by lowering when an output may be the very same view as an input (elementwise
   * kernels: each element is read before it is written, by the same iteration). */
  bool in_place_safe;
  /* Set by lowering when the same expressions are emitted many times (the matmul epilogue,
   * once per tile variant): the backend then calls transcendental functions (exp, erf,
   * tanh...) out of line instead of inlining their polynomials at every copy, which keeps
   * compile time and code size down at the cost of a call per vector in the epilogue. */
  bool compact_math;
  /* Rows-generic kernels (stax_kir_set_rows_generic): buffers marked `rows` have R rows at run
   * time, loops may take their extent from a parameter, indices may add parameter terms.
   * Parameter 0 is R itself. The kernel runs for rows_min <= R <= rows_max; rows_example is
   * the R the lowering saw (never printed: the text, and so the object cache key, is the same
   * for every R). */
  bool rows_generic;
  int64_t rows_min, rows_max, rows_example;
  /* Symbolic kernels (stax_kir_set_symbolic): parameters read from the arguments' dims and
   * strides at run time, and derived from those. The verifier checks the kernel at the
   * example (the buffers' dims and strides) and the host again at every new parameter tuple
   * before running it (stax_kir_verify_params). */
  bool symbolic;
  int32_t param_count;
  stax_kir_param_t params[STAX_KIR_MAX_PARAMS];
  stax_status_t status; /* first builder error, owned */
} stax_kir_kernel_t;

STAX_MUST_USE stax_status_t stax_kir_kernel_create(stax_allocator_t allocator, const char* name,
                                                   stax_kir_kernel_t** out_kernel);
void stax_kir_kernel_destroy(stax_kir_kernel_t* kernel);
/* The first error any builder hit (a copy the caller owns), or OK. */
STAX_MUST_USE stax_status_t stax_kir_kernel_status(const stax_kir_kernel_t* kernel);
/* Records an error (the first one wins; later ones are freed). Takes ownership. */
void stax_kir_kernel_fail(stax_kir_kernel_t* kernel, stax_status_t status);

/* Buffers: strides NULL means row-major. Returns the buffer's index, or -1 after an error. */
int32_t stax_kir_add_buffer(stax_kir_kernel_t* kernel, const char* name,
                            stax_kir_buffer_role_t role, stax_dtype_t dtype, int32_t rank,
                            const int64_t* dims, const int64_t* strides);
int32_t stax_kir_add_local(stax_kir_kernel_t* kernel, const char* name, stax_dtype_t dtype);
/* Returns the stage's body block, or NULL after an error. */
stax_kir_block_t* stax_kir_add_stage(stax_kir_kernel_t* kernel, const char* name);

/* Appends a loop to `block`; returns the loop (its body is where to add statements), or NULL
 * after an error. vector_width 1, unroll 1, not parallel. */
stax_kir_loop_t* stax_kir_add_loop(stax_kir_kernel_t* kernel, stax_kir_block_t* block,
                                   const char* name, int64_t extent);
/* The id of a loop made by stax_kir_add_loop (for indices and LOOP_INDEX). */
int32_t stax_kir_loop_id(const stax_kir_kernel_t* kernel, const stax_kir_loop_t* loop);

void stax_kir_add_store(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t buffer,
                        const stax_kir_index_t* index, const stax_kir_expr_t* value);
void stax_kir_add_declare(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t local,
                          const stax_kir_expr_t* value);
void stax_kir_add_assign(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t local,
                         const stax_kir_expr_t* value);
void stax_kir_add_reduce(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t local,
                         stax_kir_binary_op_t op, const stax_kir_expr_t* value);

/* ---- rows-generic kernels ----------------------------------------------------------------
 * A kernel whose outermost extent, the row count R (the product of the dims a model leaves
 * open: batch x sequence), is a run-time parameter: one compile serves every R of a shape
 * class. Lowering builds it at an example R and marks what depends on R: buffers (`rows`),
 * loop extents (`extent_param`) and index terms (stax_kir_index_add_param). */

/* Makes the kernel rows-generic (parameter 0 = R, named "rows"); call before adding params. */
void stax_kir_set_rows_generic(stax_kir_kernel_t* kernel, int64_t rows_example, int64_t rows_min);
/* Adds a parameter (see stax_kir_param_t; div 0 leaves a term out; the third term is
 * added by stax_kir_param_add_term). Returns its id, or -1 after an error. */
int32_t stax_kir_add_param(stax_kir_kernel_t* kernel, const char* name, int64_t mul0, int64_t add0,
                           int64_t div0, int64_t mul1, int64_t add1, int64_t div1, int64_t offset);
/* Gives rows parameter `param` its third term, mul * floor((R + add) / div) (add >= 0,
 * div >= 1); false (and the kernel failed) otherwise. */
bool stax_kir_param_add_term(stax_kir_kernel_t* kernel, int32_t param, int64_t mul, int64_t add,
                             int64_t div);
int64_t stax_kir_param_value(const stax_kir_param_t* param, int64_t rows);
/* index += coefficient * parameter */
void stax_kir_index_add_param(stax_kir_kernel_t* kernel, stax_kir_index_t* index, int32_t param,
                              int64_t coefficient);
/* Reach [lowest, highest] of a buffer when it has `rows` rows (its own when not a rows
 * buffer); false when it is then empty. */
bool stax_kir_buffer_reach(const stax_kir_buffer_t* buffer, int64_t rows, int64_t* out_lowest,
                           int64_t* out_highest);

/* ---- symbolic kernels ---------------------------------------------------------------------
 * A kernel any of whose extents, dims and strides may be run-time parameters, read from its
 * arguments (a batch, a sequence length, the strides of a view over them). Bounds cannot be
 * proven once for every value, so the host evaluates the parameters from the tensors, checks
 * every argument's dims and strides against them, and verifies the kernel at those values
 * (memoized) before it runs; a tuple that fails is declined and the group interpreted.
 * (kernel_ir_symbolic.c) */

void stax_kir_set_symbolic(stax_kir_kernel_t* kernel);
/* A parameter read from an argument: dim (stride when `stride`) d of buffer b's tensor. */
int32_t stax_kir_add_read_param(stax_kir_kernel_t* kernel, const char* name, int32_t buffer,
                                int32_t dim, bool stride);
/* mul0 * floor((of + add0) / div0) + mul1 * floor((of + add1) / div1) + offset (div 0 leaves
 * a term out; floor division rounds toward minus infinity). */
int32_t stax_kir_add_derived_param(stax_kir_kernel_t* kernel, const char* name, int32_t of,
                                   int64_t mul0, int64_t add0, int64_t div0, int64_t mul1,
                                   int64_t add1, int64_t div1, int64_t offset);
/* The parameter a * b (an existing one when already made). */
int32_t stax_kir_param_product(stax_kir_kernel_t* kernel, int32_t a, int32_t b);
/* Ties dim / stride d of buffer b to parameter p (the host checks the tensor has it). */
void stax_kir_buffer_dim_param(stax_kir_kernel_t* kernel, int32_t buffer, int32_t dim, int32_t p);
void stax_kir_buffer_stride_param(stax_kir_kernel_t* kernel, int32_t buffer, int32_t dim,
                                  int32_t p);
/* index += coefficient * loop * parameter p (p -1: a plain term). */
void stax_kir_index_add_term_scaled(stax_kir_kernel_t* kernel, stax_kir_index_t* index,
                                    int32_t loop, int64_t coefficient, int32_t p);
/* index += other * parameter p (p -1: index += other). */
void stax_kir_index_add_scaled_param(stax_kir_kernel_t* kernel, stax_kir_index_t* index,
                                     const stax_kir_index_t* other, int32_t p);
/* Restricts the stage added last to min <= parameter p <= max (two conditions at most). */
void stax_kir_stage_when(stax_kir_kernel_t* kernel, int32_t p, int64_t min, int64_t max);
/* Every parameter's value given each argument buffer's dims and strides (dims[b], strides[b]
 * for INPUT / OUTPUT buffers; NULL for the others): false when a read parameter names no
 * argument or the arithmetic overflows. */
bool stax_kir_params_evaluate(const stax_kir_kernel_t* kernel, const int64_t* const* dims,
                              const int64_t* const* strides, int64_t* out_values);
/* The same from the buffers' own (example) dims and strides. */
bool stax_kir_params_example(const stax_kir_kernel_t* kernel, int64_t* out_values);
/* Buffer b's dim / stride d at these parameter values. */
int64_t stax_kir_buffer_dim_at(const stax_kir_buffer_t* buffer, int32_t d, const int64_t* values);
int64_t stax_kir_buffer_stride_at(const stax_kir_buffer_t* buffer, int32_t d,
                                  const int64_t* values);
/* A symbolic kernel's accesses checked at these parameter values (INTERNAL when one leaves
 * its buffer, which the host treats as "decline"). */
STAX_MUST_USE stax_status_t stax_kir_verify_params(const stax_kir_kernel_t* kernel,
                                                   const int64_t* values);

/* Affine indices (by value; terms with the same loop merge, zero coefficients vanish). */
stax_kir_index_t stax_kir_index_constant(int64_t constant);
/* index += coefficient * loop; records an error when the terms run out. */
void stax_kir_index_add_term(stax_kir_kernel_t* kernel, stax_kir_index_t* index, int32_t loop,
                             int64_t coefficient);
/* index += scale * other */
void stax_kir_index_add_scaled(stax_kir_kernel_t* kernel, stax_kir_index_t* index,
                               const stax_kir_index_t* other, int64_t scale);
/* The coefficient of `loop` in index (0 when absent). */
int64_t stax_kir_index_coefficient(const stax_kir_index_t* index, int32_t loop);

/* Expressions. Each returns NULL (and records an error) on failure; NULL operands propagate. */
const stax_kir_expr_t* stax_kir_float(stax_kir_kernel_t* kernel, stax_dtype_t dtype, double value);
const stax_kir_expr_t* stax_kir_int(stax_kir_kernel_t* kernel, stax_dtype_t dtype, int64_t value);
const stax_kir_expr_t* stax_kir_load(stax_kir_kernel_t* kernel, int32_t buffer,
                                     const stax_kir_index_t* index);
const stax_kir_expr_t* stax_kir_local(stax_kir_kernel_t* kernel, int32_t local);
const stax_kir_expr_t* stax_kir_loop_index(stax_kir_kernel_t* kernel, int32_t loop);
const stax_kir_expr_t* stax_kir_unary(stax_kir_kernel_t* kernel, stax_kir_unary_op_t op,
                                      const stax_kir_expr_t* a);
const stax_kir_expr_t* stax_kir_binary(stax_kir_kernel_t* kernel, stax_kir_binary_op_t op,
                                       const stax_kir_expr_t* a, const stax_kir_expr_t* b);
const stax_kir_expr_t* stax_kir_select(stax_kir_kernel_t* kernel, const stax_kir_expr_t* condition,
                                       const stax_kir_expr_t* if_true,
                                       const stax_kir_expr_t* if_false);
const stax_kir_expr_t* stax_kir_fma(stax_kir_kernel_t* kernel, const stax_kir_expr_t* a,
                                    const stax_kir_expr_t* b, const stax_kir_expr_t* c);
/* A cast to the same dtype returns `a` itself. */
const stax_kir_expr_t* stax_kir_cast(stax_kir_kernel_t* kernel, stax_dtype_t dtype,
                                     const stax_kir_expr_t* a);

/* Checks the whole kernel (see the file comment); INTERNAL naming the stage and statement. */
STAX_MUST_USE stax_status_t stax_kir_verify(const stax_kir_kernel_t* kernel);

/* The text form, for `stax source` and tests:
 *   kernel add_relu
 *     buffer 0 x: float32[4, 8] strides [8, 1] input
 *     stage 0 main:
 *       parallel for i0 in 0..4 grain 1 {
 *         vector(8) for i1 in 0..8 {
 *           out[8*i0 + i1] = max(x[8*i0 + i1], 0f)
 *         }
 *       }
 * *out_text is allocated with `allocator` (size strlen + 1). */
STAX_MUST_USE stax_status_t stax_kir_print(const stax_kir_kernel_t* kernel,
                                           stax_allocator_t allocator, char** out_text);
STAX_MUST_USE stax_status_t stax_kir_print_to_file(const stax_kir_kernel_t* kernel, FILE* out);

#endif /* STAX_JIT_KERNEL_IR_H_ */
