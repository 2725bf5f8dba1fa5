/* Memory planning, the program side (docs/memory.md): which temporaries the plan places, their
 * live ranges with view aliasing, the slots (greedy interval colouring in instruction order)
 * and in-place reuse for elementwise ops; plus the layout evaluation each call runs.
 *
 * Why it works on the final instruction list: every jump but LOOP_END goes forward (the
 * verifier checks it), so a run visits instruction indices in increasing order except inside
 * loops. A value is therefore live only between the first and the last index that reference
 * it or any register that may share its buffer, and a reference inside a loop stands for the
 * whole loop. Two values whose widened ranges do not overlap are never live together, on any
 * path, whatever the If branches do. */
#include <math.h>
#include <string.h>

#include "vm/memory_plan.h"

/* The symbol values slot choice is judged at: small, medium and large shapes. Only the
 * placement quality depends on them, never soundness. */
static const int64_t stax_vm_plan_samples[] = {1, 32, 1024};
#define STAX_VM_PLAN_SAMPLE_COUNT 3

typedef struct plan_scan_t {
  const stax_program_t* program;
  int32_t instruction;
  int32_t opcode;
  bool dynamic_output;
  const int32_t* loop_first; /* per instruction: the outermost enclosing loop's span, or -1 */
  const int32_t* loop_last;
  int32_t* first_ref;   /* per register, widened over loops */
  int32_t* last_ref;
  uint8_t* last_is_free; /* the last reference is a FREE_TENSOR (else it lives to the end) */
  int32_t* fast_allocs;
  int32_t* alloc_at;
  uint8_t* other_def;
} plan_scan_t;

static void plan_visit(void* opaque, int32_t reg, bool is_def) {
  plan_scan_t* scan = opaque;
  if (reg < 0 || reg >= scan->program->registers_count) return;
  int32_t i = scan->instruction;
  int32_t lo = scan->loop_first[i] >= 0 ? scan->loop_first[i] : i;
  int32_t hi = scan->loop_first[i] >= 0 ? scan->loop_last[i] : i;
  if (lo < scan->first_ref[reg]) scan->first_ref[reg] = lo;
  if (hi >= scan->last_ref[reg]) {
    /* Inside a loop the FREE does not end the life: the loop may come back to it. */
    scan->last_is_free[reg] = scan->opcode == STAX_VM_OP_FREE_TENSOR && hi == i;
    scan->last_ref[reg] = hi;
  }
  if (!is_def) return;
  if (scan->opcode == STAX_VM_OP_ALLOC_TENSOR_FAST) {
    scan->fast_allocs[reg]++;
    scan->alloc_at[reg] = i;
  } else if (!(stax_vm_opcode_is_compute(scan->opcode) && !scan->dynamic_output)) {
    /* A compute op writing a preallocated output keeps the ALLOC's memory; anything else
     * that sets the register (a kernel's own output, a view, a move, a loop) replaces it. */
    scan->other_def[reg] = 1;
  }
}

static int32_t plan_find(int32_t* parent, int32_t r) {
  while (parent[r] != r) {
    parent[r] = parent[parent[r]];
    r = parent[r];
  }
  return r;
}

static void plan_union(int32_t* parent, int32_t a, int32_t b, int32_t count) {
  if (a < 0 || b < 0 || a >= count || b >= count) return;
  a = plan_find(parent, a);
  b = plan_find(parent, b);
  if (a != b) parent[a < b ? b : a] = a < b ? a : b;
}

/* The register lists of a compute or CALL_FUNC instruction ("nLL" / "fLL"). */
static void plan_lists(const stax_program_t* program, const stax_vm_instruction_t* ins,
                       const int32_t** out_inputs, int32_t* out_input_count,
                       const int32_t** out_outputs, int32_t* out_output_count) {
  const int32_t* words = program->operands + ins->operand_first;
  *out_input_count = words[1];
  *out_inputs = words + 2;
  *out_output_count = words[2 + words[1]];
  *out_outputs = words + 3 + words[1];
}

/* Every dim is a constant or dim code over symbols the input guards bind: computable before
 * the first instruction, so the call's layout can be evaluated up front. */
static bool plan_descriptor_sized_by_guards(const stax_program_t* program, int32_t descriptor) {
  const stax_vm_descriptor_t* desc = &program->descriptors[descriptor];
  if (desc->layout != STAX_VM_LAYOUT_CONTIGUOUS) return false;
  for (int32_t d = 0; d < desc->rank; d++) {
    const stax_vm_dim_t* dim = &program->dims[desc->dims_first + d];
    if (dim->kind == STAX_VM_DIM_CONSTANT) continue;
    const stax_vm_dim_code_ref_t* ref = &program->dim_codes[dim->code];
    for (int32_t w = 0; w < ref->count; w++) {
      const stax_dim_code_t* word = &program->dim_code_words[ref->first + w];
      if (word->op != STAX_DIM_CODE_SYMBOL) continue;
      if (word->value < 0 || word->value >= program->symbols_count) return false;
      if (program->symbols[word->value].bound_by != STAX_VM_BOUND_BY_GUARD) return false;
    }
  }
  return true;
}

static bool plan_same_dims(const stax_program_t* program, int32_t a, int32_t b) {
  const stax_vm_descriptor_t* x = &program->descriptors[a];
  const stax_vm_descriptor_t* y = &program->descriptors[b];
  if (x->dtype != y->dtype || x->rank != y->rank) return false;
  for (int32_t d = 0; d < x->rank; d++) {
    const stax_vm_dim_t* p = &program->dims[x->dims_first + d];
    const stax_vm_dim_t* q = &program->dims[y->dims_first + d];
    if (p->kind != q->kind) return false;
    if (p->kind == STAX_VM_DIM_CONSTANT ? p->value != q->value : p->code != q->code) return false;
  }
  return true;
}

/* Bytes of a descriptor under `symbols`, -1 when a dim cannot be computed or it overflows. */
static int64_t plan_descriptor_bytes(const stax_program_t* program, int32_t descriptor,
                                     const int64_t* symbols) {
  const stax_vm_descriptor_t* desc = &program->descriptors[descriptor];
  int64_t bytes = (int64_t)stax_dtype_size((stax_dtype_t)desc->dtype);
  for (int32_t d = 0; d < desc->rank; d++) {
    const stax_vm_dim_t* dim = &program->dims[desc->dims_first + d];
    int64_t value = dim->value;
    if (dim->kind != STAX_VM_DIM_CONSTANT) {
      const stax_vm_dim_code_ref_t* ref = &program->dim_codes[dim->code];
      stax_status_t status = stax_dim_code_eval(program->dim_code_words + ref->first, ref->count,
                                                symbols, program->symbols_count, &value);
      if (status) {
        stax_status_free(status);
        return -1;
      }
    }
    if (value < 0 || __builtin_mul_overflow(bytes, value, &bytes)) return -1;
  }
  return bytes;
}

/* Ops whose generic kernels may write their output over an input of the same dims and dtype
 * (src/kernels/unary.c, binary.c: each element is read before the same element is written,
 * rows never overlap across threads, and the row loops take no restrict pointers), and which
 * inputs may be that input. Others (Softmax, LayerNorm, MatMul, reductions, anything that
 * reads an element after writing another) never run in place. */
static int32_t plan_inplace_inputs(stax_op_t op) {
  switch (op) {
    case STAX_OP_Add: case STAX_OP_Sub: case STAX_OP_Mul: case STAX_OP_Div:
      return 2;
    case STAX_OP_Relu: case STAX_OP_LeakyRelu: case STAX_OP_Elu: case STAX_OP_Selu:
    case STAX_OP_Celu: case STAX_OP_ThresholdedRelu: case STAX_OP_Gelu: case STAX_OP_Sigmoid:
    case STAX_OP_HardSigmoid: case STAX_OP_HardSwish: case STAX_OP_Softsign:
    case STAX_OP_Softplus: case STAX_OP_Tanh: case STAX_OP_Exp: case STAX_OP_Log:
    case STAX_OP_Sqrt: case STAX_OP_Reciprocal: case STAX_OP_Neg: case STAX_OP_Abs:
    case STAX_OP_Erf: case STAX_OP_Sin: case STAX_OP_Cos: case STAX_OP_Tan: case STAX_OP_Floor:
    case STAX_OP_Ceil: case STAX_OP_Round: case STAX_OP_Sign: case STAX_OP_Clip:
      return 1;
    default:
      return 0;
  }
}

typedef struct plan_state_t {
  stax_program_t* program;
  int32_t registers;
  int32_t n;
  int32_t* loop_first;
  int32_t* loop_last;
  int32_t* first_ref;
  int32_t* last_ref;
  uint8_t* last_is_free;
  int32_t* fast_allocs;
  int32_t* alloc_at;
  uint8_t* other_def;
  int32_t* parent;
  int32_t* class_first;
  int32_t* class_last;
  uint8_t* class_escapes;
  int32_t* candidates;
  double* estimates;   /* per candidate x sample: bytes, normalized per sample */
  double* slot_max;    /* per slot x sample */
  int32_t* slot_end;   /* per slot: the last index of its latest value */
  int32_t* slot_value; /* per slot: its latest value */
  uint8_t* taken_over; /* per value: an in-place successor took its memory */
} plan_state_t;

static void plan_state_free(plan_state_t* s) {
  stax_allocator_t a = s->program->allocator;
  size_t r = (size_t)(s->registers > 0 ? s->registers : 1);
  size_t n = (size_t)(s->n > 0 ? s->n : 1);
  stax_allocator_free(a, s->loop_first, n * sizeof(int32_t));
  stax_allocator_free(a, s->loop_last, n * sizeof(int32_t));
  stax_allocator_free(a, s->first_ref, r * sizeof(int32_t));
  stax_allocator_free(a, s->last_ref, r * sizeof(int32_t));
  stax_allocator_free(a, s->last_is_free, r);
  stax_allocator_free(a, s->fast_allocs, r * sizeof(int32_t));
  stax_allocator_free(a, s->alloc_at, r * sizeof(int32_t));
  stax_allocator_free(a, s->other_def, r);
  stax_allocator_free(a, s->parent, r * sizeof(int32_t));
  stax_allocator_free(a, s->class_first, r * sizeof(int32_t));
  stax_allocator_free(a, s->class_last, r * sizeof(int32_t));
  stax_allocator_free(a, s->class_escapes, r);
  stax_allocator_free(a, s->candidates, r * sizeof(int32_t));
  stax_allocator_free(a, s->estimates, r * STAX_VM_PLAN_SAMPLE_COUNT * sizeof(double));
  stax_allocator_free(a, s->slot_max, r * STAX_VM_PLAN_SAMPLE_COUNT * sizeof(double));
  stax_allocator_free(a, s->slot_end, r * sizeof(int32_t));
  stax_allocator_free(a, s->slot_value, r * sizeof(int32_t));
  stax_allocator_free(a, s->taken_over, r);
}

static stax_status_t plan_state_alloc(plan_state_t* s) {
  stax_allocator_t a = s->program->allocator;
  size_t r = (size_t)(s->registers > 0 ? s->registers : 1);
  size_t n = (size_t)(s->n > 0 ? s->n : 1);
#define PLAN_ARRAY(field, count, size) \
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, count, size, (void**)&s->field), "memory plan")
  PLAN_ARRAY(loop_first, n, sizeof(int32_t));
  PLAN_ARRAY(loop_last, n, sizeof(int32_t));
  PLAN_ARRAY(first_ref, r, sizeof(int32_t));
  PLAN_ARRAY(last_ref, r, sizeof(int32_t));
  PLAN_ARRAY(last_is_free, r, 1);
  PLAN_ARRAY(fast_allocs, r, sizeof(int32_t));
  PLAN_ARRAY(alloc_at, r, sizeof(int32_t));
  PLAN_ARRAY(other_def, r, 1);
  PLAN_ARRAY(parent, r, sizeof(int32_t));
  PLAN_ARRAY(class_first, r, sizeof(int32_t));
  PLAN_ARRAY(class_last, r, sizeof(int32_t));
  PLAN_ARRAY(class_escapes, r, 1);
  PLAN_ARRAY(candidates, r, sizeof(int32_t));
  PLAN_ARRAY(estimates, r * STAX_VM_PLAN_SAMPLE_COUNT, sizeof(double));
  PLAN_ARRAY(slot_max, r * STAX_VM_PLAN_SAMPLE_COUNT, sizeof(double));
  PLAN_ARRAY(slot_end, r, sizeof(int32_t));
  PLAN_ARRAY(slot_value, r, sizeof(int32_t));
  PLAN_ARRAY(taken_over, r, 1);
#undef PLAN_ARRAY
  return STAX_OK;
}

/* Live ranges of every register (widened over loops) and how each is defined. */
static void plan_scan(plan_state_t* s) {
  const stax_program_t* program = s->program;
  for (int32_t i = 0; i < s->n; i++) s->loop_first[i] = s->loop_last[i] = -1;
  for (int32_t b = 0; b < s->n; b++) {
    const stax_vm_instruction_t* ins = &program->instructions[b];
    if (ins->opcode != STAX_VM_OP_LOOP_BEGIN) continue;
    int32_t end = program->operands[ins->operand_first + 1] - 1; /* exit = LOOP_END + 1 */
    for (int32_t i = b; i <= end && i < s->n; i++) {
      if (s->loop_first[i] < 0 || b < s->loop_first[i]) {
        s->loop_first[i] = b;
        s->loop_last[i] = end;
      }
    }
  }
  for (int32_t r = 0; r < s->registers; r++) {
    s->first_ref[r] = INT32_MAX;
    s->last_ref[r] = -1;
    s->alloc_at[r] = -1;
    s->parent[r] = r;
  }
  plan_scan_t scan = {program, 0, 0, false, s->loop_first, s->loop_last, s->first_ref,
                      s->last_ref, s->last_is_free, s->fast_allocs, s->alloc_at, s->other_def};
  for (int32_t i = 0; i < s->n; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    scan.instruction = i;
    scan.opcode = ins->opcode;
    scan.dynamic_output = (ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT) != 0;
    stax_vm_instruction_registers(program, i, plan_visit, &scan);
  }
}

/* Registers that may share a buffer, and whether such a group escapes the call. */
static void plan_alias_classes(plan_state_t* s) {
  const stax_program_t* program = s->program;
  int32_t count = s->registers;
  for (int32_t i = 0; i < s->n; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    const int32_t* words = program->operands + ins->operand_first;
    switch (ins->opcode) {
      case STAX_VM_OP_MOVE:
      case STAX_VM_OP_BROADCAST_TO:
      case STAX_VM_OP_RESHAPE_VIEW: /* a view when the strides allow (else a copy) */
      case STAX_VM_OP_TRANSPOSE_VIEW:
        plan_union(s->parent, words[0], words[1], count);
        break;
      default:
        break;
    }
    if (ins->opcode == STAX_VM_OP_CALL_FUNC ||
        (stax_vm_opcode_is_compute(ins->opcode) &&
         (ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT))) {
      /* A kernel that allocates its outputs may return views of its inputs (Identity,
       * Reshape, Slice); a host function may return or keep anything. */
      const int32_t *inputs, *outputs;
      int32_t input_count, output_count;
      plan_lists(program, ins, &inputs, &input_count, &outputs, &output_count);
      for (int32_t o = 0; o < output_count; o++)
        for (int32_t k = 0; k < input_count; k++)
          plan_union(s->parent, outputs[o], inputs[k], count);
      if (ins->opcode == STAX_VM_OP_CALL_FUNC) {
        for (int32_t k = 0; k < input_count; k++)
          if (inputs[k] >= 0) s->class_escapes[inputs[k]] = 1;
        for (int32_t o = 0; o < output_count; o++)
          if (outputs[o] >= 0) s->class_escapes[outputs[o]] = 1;
      }
    }
  }
  for (int32_t l = 0; l < program->loops_count; l++) {
    const stax_vm_loop_t* loop = &program->loops[l];
    const int32_t* lists = program->loop_registers + loop->lists_first;
    int32_t c = loop->carried_count;
    for (int32_t k = 0; k < c; k++) {
      plan_union(s->parent, lists[k], lists[c + k], count);
      plan_union(s->parent, lists[k], lists[2 * c + k], count);
      plan_union(s->parent, lists[k], lists[3 * c + k], count);
    }
    for (int32_t k = 0; k < loop->scan_count; k++)
      plan_union(s->parent, lists[4 * c + k], lists[4 * c + loop->scan_count + k], count);
  }
  for (int32_t r = 0; r < count; r++) {
    s->class_first[r] = INT32_MAX;
    s->class_last[r] = -1;
  }
  for (int32_t r = 0; r < count; r++) {
    int32_t root = plan_find(s->parent, r);
    uint32_t flags = program->registers[r].flags;
    /* A sequence keeps its elements for as long as it lives, which the live ranges of the
     * registers the elements came from do not say: the whole class stays unplanned. */
    if (stax_vm_register_is_sequence(program, r)) s->class_escapes[root] = 1;
    if (flags & (STAX_VM_REGISTER_INPUT | STAX_VM_REGISTER_CONSTANT | STAX_VM_REGISTER_OUTPUT))
      s->class_escapes[root] = 1;
    if (s->class_escapes[r]) s->class_escapes[root] = 1;
    if (s->last_ref[r] < 0) continue; /* never referenced */
    if (s->first_ref[r] < s->class_first[root]) s->class_first[root] = s->first_ref[r];
    /* Not freed after its last reference: held until the run's end. */
    int32_t last = s->last_is_free[r] ? s->last_ref[r] : s->n;
    if (last > s->class_last[root]) s->class_last[root] = last;
  }
}

static double plan_cost(const plan_state_t* s, int32_t candidate, int32_t slot, double* waste) {
  double growth = 0;
  *waste = 0;
  for (int32_t b = 0; b < STAX_VM_PLAN_SAMPLE_COUNT; b++) {
    double size = s->estimates[candidate * STAX_VM_PLAN_SAMPLE_COUNT + b];
    double held = s->slot_max[slot * STAX_VM_PLAN_SAMPLE_COUNT + b];
    growth += size > held ? size - held : 0;
    *waste += fabs(held - size);
  }
  return growth;
}

static void plan_slot_take(plan_state_t* s, int32_t candidate, int32_t slot, int32_t value,
                           int32_t last) {
  for (int32_t b = 0; b < STAX_VM_PLAN_SAMPLE_COUNT; b++) {
    double size = s->estimates[candidate * STAX_VM_PLAN_SAMPLE_COUNT + b];
    double* held = &s->slot_max[slot * STAX_VM_PLAN_SAMPLE_COUNT + b];
    if (size > *held) *held = size;
  }
  s->slot_end[slot] = last;
  s->slot_value[slot] = value;
}

/* The compute instruction that writes value `reg` allocated at `alloc`: the first one after
 * it naming reg as an output (the compiler emits a node's ALLOCs right before it). */
static int32_t plan_writer(const plan_state_t* s, int32_t reg, int32_t alloc) {
  const stax_program_t* program = s->program;
  for (int32_t i = alloc + 1; i < s->n && i <= alloc + 16; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    if (ins->opcode == STAX_VM_OP_ALLOC_TENSOR || ins->opcode == STAX_VM_OP_ALLOC_TENSOR_FAST)
      continue;
    if (!stax_vm_opcode_is_compute(ins->opcode)) return -1;
    const int32_t *inputs, *outputs;
    int32_t input_count, output_count;
    plan_lists(program, ins, &inputs, &input_count, &outputs, &output_count);
    for (int32_t o = 0; o < output_count; o++)
      if (outputs[o] == reg) return i;
    return -1;
  }
  return -1;
}

/* The planned value whose memory `value` (written by instruction k) may take over, or -1:
 * an input of an in-place-capable op with the same dtype and dims, planned, dying at k (only
 * FREEs reference it or anything sharing its buffer after k) and not read through another
 * operand of k (a broadcast view of it would be read after being overwritten). */
static int32_t plan_inplace_source(const plan_state_t* s, const stax_vm_memory_plan_t* plan,
                                   int32_t value, int32_t k) {
  const stax_program_t* program = s->program;
  const stax_vm_instruction_t* ins = &program->instructions[k];
  if (ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT) return -1;
  stax_op_t op = (stax_op_t)program->nodes[program->operands[ins->operand_first]].op;
  int32_t allowed = plan_inplace_inputs(op);
  if (allowed == 0) return -1;
  const int32_t *inputs, *outputs;
  int32_t input_count, output_count;
  plan_lists(program, ins, &inputs, &input_count, &outputs, &output_count);
  if (output_count != 1) return -1;
  const stax_vm_planned_value_t* v = &plan->values[value];
  if (s->class_first[plan_find(s->parent, v->reg)] < s->alloc_at[v->reg]) return -1;
  int32_t free_end = k;
  while (free_end + 1 < s->n && program->instructions[free_end + 1].opcode == STAX_VM_OP_FREE_TENSOR)
    free_end++;
  for (int32_t p = 0; p < allowed && p < input_count; p++) {
    int32_t reg = inputs[p];
    if (reg < 0) continue;
    int32_t source = plan->value_of_register[reg];
    if (source < 0 || source >= value || s->taken_over[source]) continue;
    const stax_vm_planned_value_t* u = &plan->values[source];
    if (!plan_same_dims(program, u->descriptor, v->descriptor)) continue;
    if (u->last > free_end || u->last < k || s->slot_value[u->slot] != source) continue;
    int32_t root = plan_find(s->parent, reg);
    bool aliased = false;
    for (int32_t q = 0; q < input_count; q++)
      if (inputs[q] >= 0 && inputs[q] != reg && plan_find(s->parent, inputs[q]) == root)
        aliased = true;
    if (!aliased) return source;
  }
  return -1;
}

static stax_status_t plan_assign(plan_state_t* s, stax_vm_memory_plan_t* plan) {
  stax_program_t* program = s->program;
  /* Normalize each sample's sizes by the sample's total so every shape weighs the same. */
  int64_t* sample_symbols = NULL;
  size_t symbol_bytes = (size_t)(program->symbols_count > 0 ? program->symbols_count : 1) *
                        sizeof(int64_t);
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(program->allocator, symbol_bytes,
                                             (void**)&sample_symbols), "memory plan");
  for (int32_t b = 0; b < STAX_VM_PLAN_SAMPLE_COUNT; b++) {
    for (int32_t y = 0; y < program->symbols_count; y++) {
      int64_t value = stax_vm_plan_samples[b];
      if (value < program->symbols[y].min) value = program->symbols[y].min;
      if (value > program->symbols[y].max) value = program->symbols[y].max;
      sample_symbols[y] = value;
    }
    double total = 0;
    for (int32_t v = 0; v < plan->value_count; v++) {
      int64_t bytes = plan_descriptor_bytes(program, plan->values[v].descriptor, sample_symbols);
      double size = bytes < 0 ? 1e18 : (double)bytes;
      s->estimates[v * STAX_VM_PLAN_SAMPLE_COUNT + b] = size;
      total += size;
    }
    for (int32_t v = 0; v < plan->value_count && total > 0; v++)
      s->estimates[v * STAX_VM_PLAN_SAMPLE_COUNT + b] /= total;
  }
  stax_allocator_free(program->allocator, sample_symbols, symbol_bytes);
  for (int32_t v = 0; v < plan->value_count; v++) {
    stax_vm_planned_value_t* value = &plan->values[v];
    int32_t writer = plan_writer(s, value->reg, s->alloc_at[value->reg]);
    int32_t source = writer >= 0 ? plan_inplace_source(s, plan, v, writer) : -1;
    if (source >= 0) {
      value->slot = plan->values[source].slot;
      value->inplace_of = source;
      s->taken_over[source] = 1;
      plan->inplace_count++;
      plan_slot_take(s, v, value->slot, v, value->last);
      continue;
    }
    /* Greedy colouring: of the slots whose latest value is dead before this one starts,
     * the one it grows least (at the sample shapes), then the closest in size. */
    int32_t best = -1;
    double best_growth = 0, best_waste = 0;
    for (int32_t slot = 0; slot < plan->slot_count; slot++) {
      if (s->slot_end[slot] >= value->first) continue;
      double waste = 0;
      double growth = plan_cost(s, v, slot, &waste);
      if (best < 0 || growth < best_growth || (growth == best_growth && waste < best_waste)) {
        best = slot;
        best_growth = growth;
        best_waste = waste;
      }
    }
    if (best < 0) best = plan->slot_count++;
    value->slot = best;
    plan_slot_take(s, v, best, v, value->last);
  }
  return STAX_OK;
}

stax_status_t stax_vm_memory_plan_build(stax_program_t* program) {
  program->memory_plan = NULL;
  if (program->registers_count == 0 || program->instructions_count == 0) return STAX_OK;
  plan_state_t s;
  memset(&s, 0, sizeof(s));
  s.program = program;
  s.registers = program->registers_count;
  s.n = program->instructions_count;
  stax_status_t status = plan_state_alloc(&s);
  if (status) goto cleanup;
  plan_scan(&s);
  plan_alias_classes(&s);
  int32_t count = 0;
  for (int32_t r = 0; r < s.registers; r++) {
    if (program->registers[r].flags != 0 || s.fast_allocs[r] != 1 || s.other_def[r]) continue;
    int32_t at = s.alloc_at[r];
    if (s.loop_first[at] >= 0) continue; /* allocated again every iteration */
    int32_t root = plan_find(s.parent, r);
    if (s.class_escapes[root]) continue;
    int32_t descriptor = program->operands[program->instructions[at].operand_first + 1];
    if (!plan_descriptor_sized_by_guards(program, descriptor)) continue;
    s.candidates[count++] = r;
  }
  if (count == 0) goto cleanup;
  /* In ALLOC order (the scan above is by register; registers follow definition order in
   * compiled programs but not necessarily in hand-built ones). */
  for (int32_t a = 1; a < count; a++) {
    int32_t r = s.candidates[a], b = a;
    while (b > 0 && s.alloc_at[s.candidates[b - 1]] > s.alloc_at[r]) {
      s.candidates[b] = s.candidates[b - 1];
      b--;
    }
    s.candidates[b] = r;
  }
  stax_vm_memory_plan_t* plan = NULL;
  status = stax_arena_alloc(&program->link_arena, sizeof(*plan), 0, (void**)&plan);
  if (status == STAX_OK)
    status = stax_arena_alloc(&program->link_arena, (size_t)count * sizeof(*plan->values), 0,
                              (void**)&plan->values);
  if (status == STAX_OK)
    status = stax_arena_alloc(&program->link_arena, (size_t)s.registers * sizeof(int32_t), 0,
                              (void**)&plan->value_of_register);
  if (status) goto cleanup;
  plan->value_count = count;
  plan->slot_count = 0;
  plan->inplace_count = 0;
  for (int32_t r = 0; r < s.registers; r++) plan->value_of_register[r] = -1;
  for (int32_t v = 0; v < count; v++) {
    int32_t r = s.candidates[v];
    int32_t root = plan_find(s.parent, r);
    int32_t at = s.alloc_at[r];
    plan->values[v] = (stax_vm_planned_value_t){
        .reg = r,
        .descriptor = program->operands[program->instructions[at].operand_first + 1],
        .slot = -1,
        .inplace_of = -1,
        .first = s.class_first[root] < at ? s.class_first[root] : at,
        .last = s.class_last[root] > at ? s.class_last[root] : at,
    };
    plan->value_of_register[r] = v;
  }
  status = plan_assign(&s, plan);
  if (status == STAX_OK) program->memory_plan = plan;
cleanup:
  plan_state_free(&s);
  return status;
}

/* ---- per-call layout ------------------------------------------------------------------- */

void stax_vm_memory_plan_layout(const stax_program_t* program, const int64_t* symbols,
                                int64_t* out_value_bytes, int64_t* out_slot_offsets,
                                int64_t* out_slot_bytes, int64_t* out_arena_bytes) {
  const stax_vm_memory_plan_t* plan = program->memory_plan;
  *out_arena_bytes = 0;
  if (!plan) return;
  for (int32_t s = 0; s < plan->slot_count; s++) out_slot_bytes[s] = 0;
  for (int32_t v = 0; v < plan->value_count; v++) {
    int64_t bytes = plan_descriptor_bytes(program, plan->values[v].descriptor, symbols);
    /* Rounded up to the alignment here so a slot's size is too; a size this large cannot be
     * placed (nor allocated). */
    if (bytes > INT64_MAX / 2) bytes = -1;
    out_value_bytes[v] = bytes;
    if (bytes < 0) continue;
    int64_t aligned = (bytes + STAX_VM_PLAN_ALIGNMENT - 1) / STAX_VM_PLAN_ALIGNMENT *
                      STAX_VM_PLAN_ALIGNMENT;
    int32_t slot = plan->values[v].slot;
    if (aligned > out_slot_bytes[slot]) out_slot_bytes[slot] = aligned;
  }
  int64_t offset = 0;
  for (int32_t s = 0; s < plan->slot_count; s++) {
    out_slot_offsets[s] = offset;
    if (offset > INT64_MAX / 2 - out_slot_bytes[s]) {
      /* The arena would not be addressable: nothing past here is placed this call. */
      for (int32_t v = 0; v < plan->value_count; v++)
        if (plan->values[v].slot >= s) out_value_bytes[v] = -1;
      for (int32_t t = s; t < plan->slot_count; t++) out_slot_offsets[t] = offset;
      break;
    }
    offset += out_slot_bytes[s];
  }
  *out_arena_bytes = offset;
}
