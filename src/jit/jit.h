/* The JIT backend's interface to the VM (internal): describe a fusion group with concrete
 * shapes, compile it to a kernel, run the kernel on tensors, inspect its source, release it.
 *
 *   stax_jit_backend_t* backend = NULL;
 *   STAX_RETURN_IF_ERROR(stax_jit_backend_get(&backend));      // lazily started, process-wide
 *   stax_jit_kernel_t* kernel = NULL;
 *   stax_status_t s = stax_jit_compile_group(backend, &group, &options, &kernel);
 *   if (s) { ...UNIMPLEMENTED: not fusible; anything else: keep interpreting... }
 *   STAX_RETURN_IF_ERROR(stax_jit_kernel_run(kernel, n_in, inputs, n_out, outputs, pool));
 *   stax_jit_kernel_release(kernel);  // when no frame can still be running it
 *
 * A group is a list of graph nodes (op + attributes, in topological order) over values with
 * CONCRETE dims and strides: the group's external inputs, its external outputs and internal
 * temporaries (never materialized). Lowering (lower*.c) turns it into kernel IR
 * (kernel_ir.h); a backend (the LLVM one: llvm_*.c) turns that into machine code specialized
 * for exactly those dims, strides and dtypes. The VM guards calls with its shape signature;
 * stax_jit_kernel_run checks again (cheaply) and refuses tensors that differ.
 *
 * What fuses (anything else is UNIMPLEMENTED, and the VM keeps interpreting):
 *   - elementwise chains with numpy broadcasting (unary, binary, compare, logical, Where,
 *     Cast, Clip, the activations), float32/float64, integers where the op allows, bool;
 *   - row kernels: Softmax / LogSoftmax / LayerNormalization over the last axis and
 *     ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2/LogSum/LogSumExp over the last axis, with
 *     elementwise producers and consumers around them (several reductions may chain: a
 *     hand-written LayerNorm or RMSNorm becomes one kernel);
 *   - one MatMul (rank >= 2, batch broadcasting) or Gemm, float32, with an elementwise
 *     epilogue (bias, activation, residual add...), as a register-tiled micro-kernel over
 *     packed panels of B.
 *
 * Thread safety: compiles are serialized inside the backend (one LLVM JIT per process) and
 * may come from any thread; a kernel may run on several threads at once. */
#ifndef STAX_JIT_JIT_H_
#define STAX_JIT_JIT_H_

#include "ir/graph_internal.h"
#include "stax/runtime.h"

/* ---- fusion groups ----------------------------------------------------------------------- */

typedef enum stax_jit_value_role_e {
  STAX_JIT_VALUE_INPUT,     /* a tensor the kernel reads (an argument) */
  STAX_JIT_VALUE_OUTPUT,    /* a tensor the kernel writes (an argument); later nodes of the
                               group may read it too */
  STAX_JIT_VALUE_TEMPORARY, /* produced and consumed inside the group; never stored */
} stax_jit_value_role_t;

typedef struct stax_jit_value_t {
  const char* name; /* for messages and the printed IR; NULL: "v<index>" */
  stax_jit_value_role_t role;
  stax_dtype_t dtype;
  int32_t rank;
  int64_t dims[STAX_MAX_RANK];
  /* In elements, as the tensor will have them at run time (0 on broadcast dims, negative for
   * reversed views). Ignored for temporaries. */
  int64_t strides[STAX_MAX_RANK];
  /* Contents known at compile time (initializers, small constant operands such as axes or
   * Clip bounds), or NULL. Lowering may fold them; a folded input is still passed at run
   * time but not read. Borrowed for the duration of the compile. */
  const stax_tensor_t* constant;
  /* Rows-generic groups: dims[0] is the group's row count R, a run-time parameter of the
   * kernel (dims[0] here is only an example; strides[0] is the row stride for every R). */
  bool rows;
  /* Symbolic groups: bit d set when dim d / stride d varies over the class (the kernel reads
   * it at run time); dims and strides here are one example. */
  uint32_t open_dims, open_strides;
} stax_jit_value_t;

typedef struct stax_jit_node_t {
  /* Op, name and attributes (borrowed for the compile); node->inputs and node->outputs are
   * graph value ids and are ignored here. */
  const stax_node_t* node;
  int32_t input_count;
  const int32_t* inputs; /* indices into the group's values; -1 for an omitted input */
  int32_t output_count;
  const int32_t* outputs; /* -1 for an omitted optional output */
} stax_jit_node_t;

typedef struct stax_jit_group_t {
  const char* name; /* for symbols and messages; NULL: "group" */
  int32_t node_count;
  const stax_jit_node_t* nodes; /* topological order */
  int32_t value_count;
  const stax_jit_value_t* values;
  /* Kernel arguments, in the order stax_jit_kernel_run takes them. */
  int32_t input_count;
  const int32_t* inputs;
  int32_t output_count;
  const int32_t* outputs;
  /* One kernel for every row count: the values marked `rows` share a leading dim R that the
   * kernel reads at run time (from its arguments' leading dims, which it accepts flattened:
   * a [B, S, 768] tensor is R = B*S rows of [768] when its leading dims are contiguous over
   * each other); every other value and dim is fixed. Lowerings that cannot make such a
   * kernel (Conv) refuse with UNIMPLEMENTED. */
  bool rows_generic;
  /* One kernel for the shapes whose open dims and strides (stax_jit_value_t.open_dims and
   * open_strides) take any value: a symbolic kernel (kernel_ir.h), which checks each new
   * tuple of them at run time. Lowered by the batched MatMul (attention's QK^T and P.V) and
   * the row kernels (Softmax over an open last axis); others refuse with UNIMPLEMENTED. */
  bool symbolic;
} stax_jit_group_t;

/* ---- the backend ------------------------------------------------------------------------- */

typedef struct stax_jit_backend_s stax_jit_backend_t;

typedef struct stax_jit_target_info_t {
  const char* name;     /* "llvm" */
  const char* cpu;      /* host CPU name, e.g. "znver3" */
  const char* features; /* "+avx2,+fma,..." */
  int32_t vector_bits;  /* 128, 256 or 512: the widest vector the kernels use */
  bool has_fma;
} stax_jit_target_info_t;

/* The process-wide backend, started on first use (thread-safe). UNIMPLEMENTED when stax was
 * built without LLVM, INTERNAL when LLVM cannot start; the VM treats both as "no JIT". */
STAX_MUST_USE stax_status_t stax_jit_backend_get(stax_jit_backend_t** out_backend);
stax_jit_target_info_t stax_jit_backend_target(const stax_jit_backend_t* backend);
/* The rows of the matmul lowerings' register tile for vectors of `vector_lanes_f32` float32
 * lanes (their columns are one or two such vectors): 12 with 512-bit vectors, else 6. */
int32_t stax_jit_matmul_tile_rows(int32_t vector_lanes_f32);

/* ---- compiling --------------------------------------------------------------------------- */

typedef struct stax_jit_compile_options_t {
  /* Threads the kernel will be split over (picks loop orders and grains); 0: the default
   * pool's size. Correctness never depends on it. */
  int32_t thread_count;
  /* Vector width override in bits (128/256/512; 0: the host's). Kernels stay correct at any
   * width; tests use it to exercise other tails. */
  int32_t vector_bits;
  /* Keep texts for `stax source`: the kernel IR, LLVM IR before and after optimization, and
   * the assembly (which costs one more code generation). */
  bool keep_kernel_ir;
  bool keep_llvm_ir;
  bool keep_assembly;
  /* Test hook: make the backend fail as if LLVM had (INTERNAL). The environment variable
   * STAX_JIT_FAIL_COMPILE=1 does the same for every compile. */
  bool inject_failure;
  /* Only load the kernel from the on-disk object cache (object_cache.h): FAILED_PRECONDITION
   * when it is not there, with nothing compiled (the VM tier probes so before queueing a
   * background compile, so a new process starts compiled when its kernels are cached). */
  bool cache_only;
  /* The on-disk object cache's folder for this compile: NULL for the environment's
   * (STAX_JIT_CACHE_DIR, STAX_JIT_CACHE=0, else ~/.cache/stax/jit), "" for no cache. */
  const char* cache_dir;
} stax_jit_compile_options_t;

typedef struct stax_jit_kernel_s stax_jit_kernel_t;

/* Lowers and compiles a group. options may be NULL. Errors: UNIMPLEMENTED (not fusible: the
 * message says why), INVALID_ARGUMENT (a malformed group description), INTERNAL (the backend
 * failed: never fatal, the interpreter's path stands), OUT_OF_MEMORY. */
STAX_MUST_USE stax_status_t stax_jit_compile_group(stax_jit_backend_t* backend,
                                                   const stax_jit_group_t* group,
                                                   const stax_jit_compile_options_t* options,
                                                   stax_jit_kernel_t** out_kernel);

struct stax_kir_kernel_t;
/* Compiles hand-built kernel IR (tests, other front ends). Inputs/outputs are the kernel's
 * INPUT/OUTPUT buffers in order; the kernel IR is not kept (only its text if asked). */
STAX_MUST_USE stax_status_t stax_jit_compile_kernel_ir(stax_jit_backend_t* backend,
                                                       const struct stax_kir_kernel_t* kir,
                                                       const stax_jit_compile_options_t* options,
                                                       stax_jit_kernel_t** out_kernel);

/* ---- running ----------------------------------------------------------------------------- */

/* Runs on tensors whose dtype, dims and strides equal the compiled ones (FAILED_PRECONDITION
 * naming the tensor otherwise). Outputs are preallocated by the caller. An output may be the
 * very same view as an input of an elementwise kernel (in place); any other overlap between
 * an output and another argument is refused. pool may be NULL: runs on the calling thread. */
STAX_MUST_USE stax_status_t stax_jit_kernel_run(stax_jit_kernel_t* kernel, int32_t input_count,
                                                stax_tensor_t* const* inputs, int32_t output_count,
                                                stax_tensor_t* const* outputs,
                                                stax_threadpool_t* pool);
/* The hot path for a caller that already guarded the shapes: data[i] is the address of the
 * first element of argument i (inputs, then outputs). Only scratch allocation can fail. */
STAX_MUST_USE stax_status_t stax_jit_kernel_run_data(stax_jit_kernel_t* kernel, void* const* data,
                                                     stax_threadpool_t* pool);

/* ---- what lowering accepts ---------------------------------------------------------------- */

/* How the lowering can use an op, for whoever forms fusion groups (the VM tier): an
 * ELEMENTWISE op joins any group, a ROW op (a reduction over the last axis, Softmax,
 * LayerNormalization) joins elementwise neighbours, a CONTRACTION (MatMul, Gemm, Conv, the
 * pools) starts a group that takes an elementwise epilogue; UNSUPPORTED ops have no lowering at all, so a
 * group holding one is refused whole (better: keep them alone). Dtypes and attributes may
 * still make a group refused. */
typedef enum stax_jit_op_class_e {
  STAX_JIT_OP_UNSUPPORTED = 0,
  STAX_JIT_OP_ELEMENTWISE,
  STAX_JIT_OP_ROW,
  STAX_JIT_OP_CONTRACTION,
} stax_jit_op_class_t;
stax_jit_op_class_t stax_jit_op_class(stax_op_t op);
/* A row kernel walks each row once per pass and recomputes its elementwise producers in every
 * pass (lower_rows.c). For a ROW op of several passes (Softmax, LogSoftmax,
 * LayerNormalization, ReduceLogSumExp) and a COSTLY producer (transcendental math: Exp, Erf,
 * Gelu, Tanh...), storing the producer's result once and reading it back is cheaper, so the
 * group former cuts there (measured in docs/jit.md, "Row kernels"). */
/* Whether the lowering of `op` computes values of `dtype`: the contractions (MatMul/Gemm,
 * Conv, the pools) are float32 only (16-bit ones reach them widened to float32 by the `widen`
 * graph pass), so a group holding one over another dtype is interpreted. Their lowerings check
 * their operands with it; the tier counts and reports such groups (docs/jit.md). */
bool stax_jit_op_dtype_lowered(stax_op_t op, stax_dtype_t dtype);
bool stax_jit_op_walks_rows_repeatedly(stax_op_t op);
bool stax_jit_op_costly(stax_op_t op);

/* ---- inspection and lifetime ------------------------------------------------------------- */

void stax_jit_kernel_retain(stax_jit_kernel_t* kernel);
/* Frees the machine code (its own resource tracker) when the last reference goes. */
void stax_jit_kernel_release(stax_jit_kernel_t* kernel);

const char* stax_jit_kernel_name(const stax_jit_kernel_t* kernel);
/* True for a rows-generic kernel (stax_jit_group_t.rows_generic). */
bool stax_jit_kernel_rows_generic(const stax_jit_kernel_t* kernel);
/* True for a rows-generic or symbolic kernel: one that serves a class of shapes and may
 * decline some of them (the caller then interprets the group). */
bool stax_jit_kernel_shape_generic(const stax_jit_kernel_t* kernel);
int32_t stax_jit_kernel_input_count(const stax_jit_kernel_t* kernel);
int32_t stax_jit_kernel_output_count(const stax_jit_kernel_t* kernel);
/* Texts kept when the options asked for them; NULL otherwise. Borrowed. */
const char* stax_jit_kernel_ir_text(const stax_jit_kernel_t* kernel);
const char* stax_jit_kernel_llvm_ir_text(const stax_jit_kernel_t* kernel, bool optimized);
const char* stax_jit_kernel_asm_text(const stax_jit_kernel_t* kernel);
/* Wall time of the compile, milliseconds: lowering, then LLVM (IR, passes, machine code). */
double stax_jit_kernel_lower_ms(const stax_jit_kernel_t* kernel);
double stax_jit_kernel_compile_ms(const stax_jit_kernel_t* kernel);

/* Process-wide counters (for `stax` cache statistics and tests). */
typedef struct stax_jit_stats_t {
  uint64_t compiled;     /* kernels compiled successfully */
  uint64_t not_fusible;  /* groups refused with UNIMPLEMENTED */
  uint64_t failed;       /* other compile failures */
  uint64_t live_kernels; /* compiled and not yet freed */
  double total_compile_ms;
  uint64_t cache_loads;  /* of the compiled ones: loaded from the object cache */
} stax_jit_stats_t;
stax_jit_stats_t stax_jit_stats(void);

#endif /* STAX_JIT_JIT_H_ */
