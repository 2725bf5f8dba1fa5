/* The execution context: one frame of the VM (registers, symbol values, the shape stack, loop
 * state, profiling counters, scratch arrays) owned by one thread at a time, and the
 * instruction semantics the dispatch loop calls (exec.c, exec_shape.c, exec_loop.c).
 * Each exec function reads its operands from the compact words `ins` (header first). */
#ifndef STAX_VM_CONTEXT_H_
#define STAX_VM_CONTEXT_H_

#include <stdatomic.h>

#include "vm/functions.h"
#include "vm/memory_plan.h"
#include "vm/program.h"
#include "vm/trace.h"

typedef struct stax_vm_shape_stack_entry_t {
  int32_t symbol;
  int64_t old_value;
} stax_vm_shape_stack_entry_t;

typedef struct stax_vm_loop_state_t {
  int64_t trip_count;  /* INT64_MAX when M is absent */
  int64_t iteration;   /* iterations completed */
  int32_t stack_base;  /* shape stack height at LOOP_BEGIN */
  /* Scan outputs accumulated so far: scan_count arrays of `scan_length` retained tensors. */
  stax_tensor_t*** scans;
  int32_t scan_length;
  int32_t scan_capacity;
} stax_vm_loop_state_t;

struct stax_context_s {
  stax_allocator_t allocator;
  stax_program_t* program; /* retained */
  stax_context_options_t options;
  stax_threadpool_t* pool;
  atomic_bool running;     /* a context serves one run at a time */

  stax_tensor_t** registers; /* the frame; every register still held at exit is released */
  /* Per register: the tensor DIM_VALUES last filled, kept by the context and filled again
   * next time when nothing else holds it (so computing shape values allocates nothing in
   * steady state). */
  stax_tensor_t** dim_values;
  int64_t* symbols;          /* symbol values, STAX_SYMBOL_UNBOUND when unbound */
  int32_t symbol_slots;      /* max(1, program symbols) */
  stax_vm_shape_stack_entry_t* shape_stack;
  int32_t shape_stack_count;
  int32_t shape_stack_capacity;
  stax_vm_loop_state_t* loops;

  stax_tensor_t* const* inputs; /* borrowed for the duration of a run */
  stax_tensor_t** outputs;      /* output slots filled by STORE_TENSOR */

  /* Scratch for kernel and host calls, sized by the longest register list. */
  stax_tensor_t** call_inputs;
  stax_tensor_t** call_outputs;
  stax_tensor_t** call_previous;
  int32_t call_capacity;

  stax_vm_host_fn* functions; /* resolved from the registry at creation */
  void** function_data;
  int32_t jit_function; /* the program's STAX_VM_JIT_FUNCTION, -1 when it has none */

  uint64_t* instruction_counts;
  uint64_t* instruction_nanos;
  uint64_t* segment_counts;
  int32_t timing_instruction; /* the instruction being timed, -1 for none */
  uint64_t timing_start;
  /* This run times instructions: profile_timing, or a trace recording (the dispatch loop
   * takes one branch on it per instruction either way). */
  bool timing;
  /* The trace (trace.h) when one was started, and whether this run records into it. */
  struct stax_vm_trace_s* trace;
  bool tracing;
  int32_t trace_tid;
  uint64_t calls; /* stax_context_run calls so far (the trace's call numbers) */
  /* JIT tier scratch (signature words, kernel arguments); NULL when the JIT is off. */
  struct stax_vm_jit_frame_s* jit;

  /* The memory plan's arena (memory_arena.c); NULL without a plan or with it switched off. */
  stax_vm_memory_frame_t* memory;
  /* Non-zero while the JIT's segment path runs: its ALLOCs take pool memory. */
  int32_t plan_bypass;
  stax_vm_memory_counters_t memory_counters; /* the last call's */
  uint64_t memory_calls;
};

/* Operand access into the compact words. */
#define STAX_VM_OPERAND(ins, k) ((ins)[STAX_VM_HEADER_WORDS + (k)])

/* Assigns a register: retains `tensor` (may be NULL), then releases the old value. */
static inline void stax_vm_set_register(stax_context_t* ctx, int32_t reg, stax_tensor_t* tensor) {
  if (tensor) stax_tensor_retain(tensor);
  stax_tensor_t* old = ctx->registers[reg];
  ctx->registers[reg] = tensor;
  if (old) stax_tensor_release(old);
}
/* Stores an owned reference into a register (no retain). */
static inline void stax_vm_take_register(stax_context_t* ctx, int32_t reg, stax_tensor_t* tensor) {
  stax_tensor_t* old = ctx->registers[reg];
  ctx->registers[reg] = tensor;
  if (old) stax_tensor_release(old);
}

/* Adds context to an instruction's error: "instruction 7 (Add, node 'add_1'): ...". */
STAX_MUST_USE stax_status_t stax_vm_instruction_error(const stax_context_t* ctx,
                                                      const int32_t* ins, stax_status_t status);
/* Records time spent in the previous instruction (profile_timing). */
void stax_vm_profile_tick(stax_context_t* ctx, int32_t instruction);
void stax_vm_profile_stop(stax_context_t* ctx);
/* Records an interpreted instruction's event in ctx->trace (segment >= 0: run by the JIT's
 * segment call, for a group without a kernel). */
void stax_vm_trace_instruction(stax_context_t* ctx, int32_t instruction, uint64_t start,
                               uint64_t end, int32_t segment);

/* Evaluates a descriptor's dims under the current symbol values. */
STAX_MUST_USE stax_status_t stax_vm_descriptor_dims(const stax_context_t* ctx, int32_t descriptor,
                                                    int64_t* out_dims);
/* Reads a one-element tensor as a truth value / an integer; `what` names it in errors. */
STAX_MUST_USE stax_status_t stax_vm_read_scalar_bool(const stax_tensor_t* tensor, const char* what,
                                                     bool* out_value);
STAX_MUST_USE stax_status_t stax_vm_read_scalar_int(const stax_tensor_t* tensor, const char* what,
                                                    int64_t* out_value);
/* A register's name for messages ("x" or "r5"). */
const char* stax_vm_register_name(const stax_program_t* program, int32_t reg);

/* ---- instruction semantics ---------------------------------------------------------------- */

STAX_MUST_USE stax_status_t stax_vm_exec_load_tensor(stax_context_t* ctx, const int32_t* ins);
STAX_MUST_USE stax_status_t stax_vm_exec_load_const(stax_context_t* ctx, const int32_t* ins);
STAX_MUST_USE stax_status_t stax_vm_exec_store_tensor(stax_context_t* ctx, const int32_t* ins);
STAX_MUST_USE stax_status_t stax_vm_exec_alloc(stax_context_t* ctx, const int32_t* ins,
                                               bool pooled);
STAX_MUST_USE stax_status_t stax_vm_exec_move(stax_context_t* ctx, const int32_t* ins);
STAX_MUST_USE stax_status_t stax_vm_exec_compute(stax_context_t* ctx, const int32_t* ins);
/* *out_next: -1, or where to continue (the JIT's segment call, when its kernels refused the
 * arguments: the interpreted segment). */
STAX_MUST_USE stax_status_t stax_vm_exec_call_func(stax_context_t* ctx, const int32_t* ins,
                                                   int32_t* out_next);
STAX_MUST_USE stax_status_t stax_vm_exec_jump_if_false(stax_context_t* ctx, const int32_t* ins,
                                                       bool* out_jump);
STAX_MUST_USE stax_status_t stax_vm_exec_shape_unmatched(stax_context_t* ctx, const int32_t* ins,
                                                         bool* out_jump);

/* exec_shape.c */
STAX_MUST_USE stax_status_t stax_vm_run_guards(stax_context_t* ctx);
STAX_MUST_USE stax_status_t stax_vm_exec_shape_variant(stax_context_t* ctx, const int32_t* ins);
STAX_MUST_USE stax_status_t stax_vm_exec_broadcast_to(stax_context_t* ctx, const int32_t* ins);
STAX_MUST_USE stax_status_t stax_vm_exec_reshape_view(stax_context_t* ctx, const int32_t* ins);
STAX_MUST_USE stax_status_t stax_vm_exec_transpose_view(stax_context_t* ctx, const int32_t* ins);
STAX_MUST_USE stax_status_t stax_vm_exec_dim_values(stax_context_t* ctx, const int32_t* ins);
/* Restores symbol values pushed since `height`. */
void stax_vm_shape_stack_unwind(stax_context_t* ctx, int32_t height);

/* exec_loop.c */
STAX_MUST_USE stax_status_t stax_vm_exec_loop_begin(stax_context_t* ctx, const int32_t* ins,
                                                    bool* out_jump);
STAX_MUST_USE stax_status_t stax_vm_exec_loop_end(stax_context_t* ctx, const int32_t* ins,
                                                  bool* out_jump);
/* Releases accumulated scan outputs of every loop. */
void stax_vm_loops_reset(stax_context_t* ctx);

#endif /* STAX_VM_CONTEXT_H_ */
