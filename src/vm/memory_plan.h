/* Memory planning (docs/memory.md): the program's plan, which places every temporary whose
 * size is a dim expression of the input-guard symbols in one per-call arena, and each
 * context's arena with the run-time side of the plan (placement, the safety checks, the
 * counters).
 *
 * The plan is derived data: stax_vm_program_link builds it from the verified extended form
 * (so compiled and loaded programs get the same plan and nothing of it is trusted from a
 * file), it is immutable afterwards and shared by every context. A plan entry names a
 * register, its descriptor, its slot and its live range; the slot sizes (the largest value a
 * slot holds) and the slot offsets (their 64-byte aligned prefix sums) are evaluated once per
 * call from the bound symbols, in the context. */
#ifndef STAX_VM_MEMORY_PLAN_H_
#define STAX_VM_MEMORY_PLAN_H_

#include "runtime/tensor_internal.h"
#include "vm/program.h"

/* Every planned tensor starts on this boundary (the buffer pool's alignment too). */
#define STAX_VM_PLAN_ALIGNMENT 64

typedef struct stax_vm_planned_value_t {
  int32_t reg;
  int32_t descriptor; /* the ALLOC_TENSOR_FAST's descriptor: contiguous, dims of guard symbols */
  int32_t slot;
  /* The planned value whose memory this one takes over at its defining elementwise op (that
   * value dies there), or -1. Both sit in the same slot. */
  int32_t inplace_of;
  /* The live range as extended instruction indices, inclusive: from the ALLOC to the last
   * reference of any register that may alias it (views, moves, loop lists), widened over any
   * loop that references it. Two values of one slot never have overlapping ranges, except an
   * in-place pair, which share `first` of the successor and `last` of the predecessor's op. */
  int32_t first, last;
} stax_vm_planned_value_t;

typedef struct stax_vm_memory_plan_s {
  int32_t value_count;
  stax_vm_planned_value_t* values; /* in ALLOC order */
  int32_t slot_count;
  int32_t inplace_count;
  int32_t* value_of_register; /* registers_count entries: the planned value, or -1 */
} stax_vm_memory_plan_t;

/* Builds program->memory_plan in the program's link arena (NULL when nothing is planned).
 * Called by stax_vm_program_link on a verified program. */
STAX_MUST_USE stax_status_t stax_vm_memory_plan_build(stax_program_t* program);

/* Sizes and offsets of a plan under concrete symbol values (STAX_SYMBOL_UNBOUND allowed):
 * out_value_bytes[v] is value v's size, or -1 when it cannot be computed (then it is not
 * placed); out_slot_offsets[s] and out_slot_bytes[s] the slot's place in the arena (64-byte
 * aligned); *out_arena_bytes the arena size. What each call evaluates, and what the plan
 * checker in tests replays. Arrays have value_count / slot_count entries. */
void stax_vm_memory_plan_layout(const stax_program_t* program, const int64_t* symbols,
                                int64_t* out_value_bytes, int64_t* out_slot_offsets,
                                int64_t* out_slot_bytes, int64_t* out_arena_bytes);

/* ---- the per-context side (memory_arena.c) ---------------------------------------------- */

typedef struct stax_vm_memory_frame_s stax_vm_memory_frame_t;

/* Counters of the last call (reset at its start), kept with or without a plan. */
typedef struct stax_vm_memory_counters_t {
  uint64_t temp_allocations;   /* ALLOC_TENSOR_FAST served by the pool instead of the arena */
  uint64_t output_allocations; /* ALLOC_TENSOR: program outputs, which outlive the call */
  uint64_t temp_bytes;         /* bytes of every ALLOC_TENSOR_FAST, planned or not */
  uint64_t arena_grows;        /* arena (re)allocations */
  uint64_t fallbacks;          /* planned values that took pool memory (JIT path, checks) */
  uint64_t inplace;            /* planned values placed over their dying input */
  uint64_t arena_bytes;        /* the arena size this call's symbols need */
} stax_vm_memory_counters_t;

/* The context's arena state; NULL result (and OK) when the program has no plan. */
STAX_MUST_USE stax_status_t stax_vm_memory_frame_create(stax_context_t* ctx,
                                                        stax_vm_memory_frame_t** out_frame);
void stax_vm_memory_frame_destroy(stax_context_t* ctx, stax_vm_memory_frame_t* frame);
/* After the input guards: starts a call. The plan's sizes and offsets are evaluated, and the
 * arena grown, at the call's first placement (none when every planned value runs compiled). */
STAX_MUST_USE stax_status_t stax_vm_memory_begin_call(stax_context_t* ctx);
/* After the frame's registers are released: every planned tensor must be unreferenced (a
 * reference left means a value escaped the plan's analysis; an internal error). */
STAX_MUST_USE stax_status_t stax_vm_memory_end_call(stax_context_t* ctx);
/* ALLOC_TENSOR_FAST of a planned register: *out_tensor (owned) over its arena range, or NULL
 * when it must come from the pool (not planned, the JIT path, or a check refused it). An error
 * only when this call's arena cannot be allocated. */
STAX_MUST_USE stax_status_t stax_vm_memory_place(stax_context_t* ctx, int32_t reg,
                                                 stax_dtype_t dtype, int32_t rank,
                                                 const int64_t* dims, size_t bytes,
                                                 stax_tensor_t** out_tensor);
/* The arena's size now, and the most any call of the context needed. */
uint64_t stax_vm_memory_arena_capacity(const stax_vm_memory_frame_t* frame);
uint64_t stax_vm_memory_peak_bytes(const stax_vm_memory_frame_t* frame);

#endif /* STAX_VM_MEMORY_PLAN_H_ */
