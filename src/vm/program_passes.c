/* Whole-program passes over the extended form that run after the compiler (or a hand builder,
 * or the JIT) has appended instructions: inserting instructions with jump retargeting,
 * splitting the bytecode into segments (with PROFILE_POINTs at their entries), and recording
 * the shape derivation chain (which instruction binds each symbol, and so each dynamic dim).
 * Also the per-instruction register visitor that liveness and the verifier share. */
#include <stdio.h>
#include <string.h>

#include "vm/program.h"

/* ---- operand walking ------------------------------------------------------------------------ */

/* Calls fn(ctx, word index) for each jump operand of an instruction (indices into operands[]). */
static void stax_vm_for_each_jump(const stax_program_t* program, const stax_vm_instruction_t* ins,
                                  void (*fn)(void* ctx, int32_t word), void* ctx) {
  const char* format = stax_vm_opcode_format(ins->opcode);
  int32_t at = ins->operand_first, end = ins->operand_first + ins->operand_count;
  for (const char* kind = format; *kind && at < end; kind++) {
    if (*kind == STAX_VM_OPERAND_REGISTER_LIST || *kind == STAX_VM_OPERAND_IMMEDIATE_LIST) {
      int32_t count = program->operands[at];
      at += 1 + (count > 0 ? count : 0);
    } else {
      if (*kind == STAX_VM_OPERAND_JUMP) fn(ctx, at);
      at++;
    }
  }
}

/* ---- insertion ------------------------------------------------------------------------------ */

typedef struct stax_vm_remap_t {
  int32_t* operands;
  const int32_t* map;
  int32_t old_count;
} stax_vm_remap_t;

static void stax_vm_remap_jump(void* ctx, int32_t word) {
  stax_vm_remap_t* remap = ctx;
  int32_t target = remap->operands[word];
  if (target >= 0 && target <= remap->old_count) remap->operands[word] = remap->map[target];
}

stax_status_t stax_vm_program_insert(stax_program_t* program, int32_t count,
                                     const int32_t* positions,
                                     const stax_vm_instruction_t* instructions,
                                     const int32_t* new_operands, int32_t* out_map) {
  int32_t old_count = program->instructions_count;
  for (int32_t k = 0; k < count; k++) {
    if (positions[k] < 0 || positions[k] > old_count || (k > 0 && positions[k] < positions[k - 1]))
      return stax_status_make(STAX_INTERNAL, "instruction insertion position %d is invalid",
                              positions[k]);
  }
  int32_t new_operand_words = 0;
  for (int32_t k = 0; k < count; k++) {
    int32_t end = instructions[k].operand_first + instructions[k].operand_count;
    if (end > new_operand_words) new_operand_words = end;
  }
  stax_status_t status = STAX_OK;
  int32_t* map = NULL;
  stax_vm_instruction_t* merged = NULL;
  int32_t merged_capacity = 0;
  STAX_GOTO_IF_ERROR(status,
                     stax_allocator_malloc(program->allocator,
                                           (size_t)(old_count + 1) * sizeof(*map), (void**)&map),
                     cleanup);
  STAX_GOTO_IF_ERROR(status,
                     stax_vm_table_reserve(program->allocator, (void**)&merged, &merged_capacity,
                                           0, old_count + count, sizeof(*merged)),
                     cleanup);
  int32_t operand_base = program->operands_count;
  STAX_GOTO_IF_ERROR(status,
                     STAX_VM_APPEND_N(program, operands, new_operands, new_operand_words, NULL),
                     cleanup);
  int32_t out = 0, k = 0;
  for (int32_t p = 0; p <= old_count; p++) {
    map[p] = out;
    while (k < count && positions[k] == p) {
      merged[out] = instructions[k];
      merged[out].operand_first += operand_base;
      out++, k++;
    }
    if (p < old_count) merged[out++] = program->instructions[p];
  }
  stax_vm_remap_t remap = {program->operands, map, old_count};
  for (int32_t i = 0; i < out; i++) stax_vm_for_each_jump(program, &merged[i], stax_vm_remap_jump, &remap);
  stax_allocator_free(program->allocator, program->instructions,
                      (size_t)program->capacity.instructions * sizeof(*program->instructions));
  program->instructions = merged;
  program->capacity.instructions = merged_capacity;
  program->instructions_count = out;
  merged = NULL;
  if (out_map) memcpy(out_map, map, (size_t)(old_count + 1) * sizeof(*map));
cleanup:
  if (map) stax_allocator_free(program->allocator, map, (size_t)(old_count + 1) * sizeof(*map));
  if (merged) stax_allocator_free(program->allocator, merged, (size_t)merged_capacity * sizeof(*merged));
  return status;
}

/* ---- removal --------------------------------------------------------------------------------- */

stax_status_t stax_vm_program_remove(stax_program_t* program, const bool* remove,
                                     int32_t* out_map) {
  int32_t old_count = program->instructions_count;
  int32_t* map = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(program->allocator,
                                             (size_t)(old_count + 1) * sizeof(*map), (void**)&map));
  /* A jump to a removed instruction lands on the next one kept. */
  int32_t out = 0;
  for (int32_t p = 0; p < old_count; p++) {
    map[p] = out;
    if (!remove[p]) program->instructions[out++] = program->instructions[p];
  }
  map[old_count] = out;
  program->instructions_count = out;
  stax_vm_remap_t remap = {program->operands, map, old_count};
  for (int32_t i = 0; i < out; i++)
    stax_vm_for_each_jump(program, &program->instructions[i], stax_vm_remap_jump, &remap);
  if (out_map) memcpy(out_map, map, (size_t)(old_count + 1) * sizeof(*map));
  stax_allocator_free(program->allocator, map, (size_t)(old_count + 1) * sizeof(*map));
  return STAX_OK;
}

/* ---- segments -------------------------------------------------------------------------------- */

typedef struct stax_vm_mark_t {
  const stax_program_t* program;
  uint8_t* is_target;
} stax_vm_mark_t;

static void stax_vm_mark_target(void* ctx, int32_t word) {
  stax_vm_mark_t* mark = ctx;
  int32_t target = mark->program->operands[word];
  if (target >= 0 && target < mark->program->instructions_count) mark->is_target[target] = 1;
}

typedef struct stax_vm_sequence_probe_t {
  const stax_program_t* program;
  bool touches;
} stax_vm_sequence_probe_t;

static void stax_vm_note_sequence(void* ctx, int32_t reg, bool is_def) {
  (void)is_def;
  stax_vm_sequence_probe_t* probe = ctx;
  if (reg >= 0 && reg < probe->program->registers_count &&
      stax_vm_register_is_sequence(probe->program, reg))
    probe->touches = true;
}

/* A shape barrier ends the segment before it and starts none. Anything touching a sequence
 * register is one too (a MOVE of an If join, FREE_TENSOR): segments hold tensors only, so the
 * JIT never sees a sequence. */
static bool stax_vm_is_barrier(const stax_program_t* program, int32_t index) {
  const stax_vm_instruction_t* ins = &program->instructions[index];
  if ((stax_vm_opcode_flags(ins->opcode) & STAX_VM_OPF_BARRIER) ||
      (ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT))
    return true;
  stax_vm_sequence_probe_t probe = {program, false};
  stax_vm_instruction_registers(program, index, stax_vm_note_sequence, &probe);
  return probe.touches;
}

/* Work worth specializing: compute and view instructions. */
static bool stax_vm_is_work(const stax_vm_instruction_t* ins) {
  stax_vm_family_t family = stax_vm_opcode_family(ins->opcode);
  return family == STAX_VM_FAMILY_COMPUTE || family == STAX_VM_FAMILY_COMPUTE_STATIC ||
         family == STAX_VM_FAMILY_SHAPE;
}

/* Splits the current list into segments (records them and instructions[].segment). Returns
 * the segment starts through starts (capacity instructions_count) when not NULL. */
static stax_status_t stax_vm_find_segments(stax_program_t* program, int32_t* starts,
                                           int32_t* out_start_count) {
  int32_t n = program->instructions_count;
  *out_start_count = 0;
  uint8_t* is_target = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(program->allocator, (size_t)n + 1, 1, (void**)&is_target));
  stax_vm_mark_t mark = {program, is_target};
  for (int32_t i = 0; i < n; i++)
    stax_vm_for_each_jump(program, &program->instructions[i], stax_vm_mark_target, &mark);
  program->segments_count = 0;
  stax_status_t status = STAX_OK;
  int32_t start = -1;
  bool has_work = false, forced = false;
  for (int32_t i = 0; i <= n; i++) {
    const stax_vm_instruction_t* ins = i < n ? &program->instructions[i] : NULL;
    bool is_profile = ins && ins->opcode == STAX_VM_OP_PROFILE_POINT;
    bool closes = !ins || is_target[i] || is_profile || stax_vm_is_barrier(program, i);
    if (closes && start >= 0) {
      if (has_work || forced) {
        stax_vm_segment_t segment = {start, i - start};
        int32_t index = -1;
        STAX_GOTO_IF_ERROR(status, STAX_VM_APPEND(program, segments, &segment, &index), cleanup);
        for (int32_t j = start; j < i; j++) program->instructions[j].segment = index;
        if (starts) starts[(*out_start_count)++] = start;
      } else {
        for (int32_t j = start; j < i; j++) program->instructions[j].segment = -1;
      }
      start = -1;
    }
    if (!ins) break;
    if (stax_vm_is_barrier(program, i)) {
      program->instructions[i].segment = -1;
      continue;
    }
    if (start < 0) {
      start = i;
      has_work = false;
      forced = is_profile;
    }
    if (stax_vm_is_work(ins)) has_work = true;
  }
cleanup:
  stax_allocator_free(program->allocator, is_target, (size_t)n + 1);
  return status;
}

/* One JIT guard per segment start (and the PROFILE_POINT when the segment lacks one): the
 * instructions to insert before old position `start`; jump targets are patched afterwards. */
static int32_t stax_vm_guard_words(stax_vm_instruction_t* out, int32_t* operands, int32_t at,
                                   int32_t signature, int32_t function, bool add_profile) {
  int32_t n = 0;
  operands[at + 0] = signature; /* JUMP_IF_SHAPE_UNMATCHED g, j (j patched) */
  operands[at + 1] = 0;
  out[n++] = (stax_vm_instruction_t){.opcode = STAX_VM_OP_JUMP_IF_SHAPE_UNMATCHED, .node = -1,
                                     .operand_first = at, .operand_count = 2, .segment = -1};
  operands[at + 2] = function; /* CALL_FUNC f, [], [] */
  operands[at + 3] = 0;
  operands[at + 4] = 0;
  out[n++] = (stax_vm_instruction_t){.opcode = STAX_VM_OP_CALL_FUNC, .node = -1,
                                     .operand_first = at + 2, .operand_count = 3, .segment = -1};
  operands[at + 5] = 0; /* JUMP j (patched) */
  out[n++] = (stax_vm_instruction_t){.opcode = STAX_VM_OP_JUMP, .node = -1,
                                     .operand_first = at + 5, .operand_count = 1, .segment = -1};
  if (add_profile) {
    operands[at + 6] = 0; /* PROFILE_POINT s (numbered below) */
    out[n++] = (stax_vm_instruction_t){.opcode = STAX_VM_OP_PROFILE_POINT, .node = -1,
                                       .operand_first = at + 6, .operand_count = 1, .segment = -1};
  }
  return n;
}

enum { STAX_VM_GUARD_OPERANDS = 7, STAX_VM_GUARD_INSTRUCTIONS = 4 };

/* Inserts the guards and PROFILE_POINTs before the segment starts, then patches the guards'
 * targets: the PROFILE_POINT after them, and the end of the segment it opens. */
static stax_status_t stax_vm_insert_guards(stax_program_t* program, const int32_t* starts,
                                           int32_t start_count) {
  stax_allocator_t allocator = program->allocator;
  int32_t function = -1;
  STAX_RETURN_IF_ERROR(stax_vm_program_add_function(program, STAX_VM_JIT_FUNCTION, &function));
  size_t ins_size = (size_t)start_count * STAX_VM_GUARD_INSTRUCTIONS;
  size_t op_size = (size_t)start_count * STAX_VM_GUARD_OPERANDS;
  int32_t old_count = program->instructions_count;
  stax_vm_instruction_t* inserted = NULL;
  int32_t *operands = NULL, *positions = NULL, *map = NULL;
  stax_status_t status = STAX_OK;
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(allocator, ins_size, sizeof(*inserted),
                                                   (void**)&inserted), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(allocator, op_size, sizeof(*operands),
                                                   (void**)&operands), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(allocator, ins_size, sizeof(*positions),
                                                   (void**)&positions), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(allocator, (size_t)old_count + 1,
                                                   sizeof(*map), (void**)&map), cleanup);
  int32_t count = 0;
  for (int32_t k = 0; k < start_count; k++) {
    /* The segment number is not known until segments are found again: the signature's
     * `first` is filled in below. */
    stax_vm_signature_t signature = {.first = 0, .count = STAX_VM_SIGNATURE_JIT};
    int32_t g = -1;
    STAX_GOTO_IF_ERROR(status, STAX_VM_APPEND(program, signatures, &signature, &g), cleanup);
    bool add_profile = program->instructions[starts[k]].opcode != STAX_VM_OP_PROFILE_POINT;
    int32_t n = stax_vm_guard_words(inserted + count, operands, k * STAX_VM_GUARD_OPERANDS, g,
                                    function, add_profile);
    for (int32_t i = 0; i < n; i++) positions[count + i] = starts[k];
    count += n;
  }
  STAX_GOTO_IF_ERROR(status, stax_vm_program_insert(program, count, positions, inserted, operands,
                                                    map), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_find_segments(program, NULL, &count), cleanup);
  for (int32_t k = 0; k < start_count; k++) {
    int32_t guard = map[starts[k]], profile = guard + 3;
    int32_t s = program->instructions[profile].segment;
    if (program->instructions[profile].opcode != STAX_VM_OP_PROFILE_POINT || s < 0) {
      status = stax_status_make(STAX_INTERNAL, "JIT guard %d does not open a segment", guard);
      goto cleanup;
    }
    const stax_vm_instruction_t* g_ins = &program->instructions[guard];
    program->signatures[program->operands[g_ins->operand_first]].first = s;
    program->operands[g_ins->operand_first + 1] = profile;
    program->operands[program->instructions[guard + 2].operand_first] =
        program->segments[s].first + program->segments[s].count;
  }
cleanup:
  if (map) stax_allocator_free(allocator, map, ((size_t)old_count + 1) * sizeof(*map));
  if (positions) stax_allocator_free(allocator, positions, ins_size * sizeof(*positions));
  if (operands) stax_allocator_free(allocator, operands, op_size * sizeof(*operands));
  if (inserted) stax_allocator_free(allocator, inserted, ins_size * sizeof(*inserted));
  return status;
}

stax_status_t stax_vm_program_build_segments(stax_program_t* program, bool insert_profile_points) {
  int32_t n = program->instructions_count;
  int32_t* starts = NULL;
  int32_t start_count = 0;
  stax_status_t status = STAX_OK;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(program->allocator, ((size_t)n + 1) * sizeof(int32_t),
                                             (void**)&starts));
  STAX_GOTO_IF_ERROR(status, stax_vm_find_segments(program, starts, &start_count), cleanup);
  if (insert_profile_points && start_count > 0)
    STAX_GOTO_IF_ERROR(status, stax_vm_insert_guards(program, starts, start_count), cleanup);
  /* Every PROFILE_POINT names the segment it opens. */
  for (int32_t i = 0; i < program->instructions_count; i++) {
    stax_vm_instruction_t* ins = &program->instructions[i];
    if (ins->opcode == STAX_VM_OP_PROFILE_POINT && ins->operand_count == 1)
      program->operands[ins->operand_first] = ins->segment;
  }
cleanup:
  stax_allocator_free(program->allocator, starts, ((size_t)n + 1) * sizeof(int32_t));
  return status;
}

/* ---- derivations ------------------------------------------------------------------------------- */

void stax_vm_program_compute_derivations(stax_program_t* program) {
  for (int32_t s = 0; s < program->symbols_count; s++) {
    program->symbols[s].bound_by = STAX_VM_BOUND_NEVER;
    program->symbols[s].guard_input = -1;
    program->symbols[s].guard_dim = -1;
  }
  for (int32_t g = 0; g < program->guards_count; g++) {
    const stax_vm_guard_t* guard = &program->guards[g];
    if (guard->kind != STAX_VM_GUARD_BIND && guard->kind != STAX_VM_GUARD_DERIVE) continue;
    if (guard->symbol < 0 || guard->symbol >= program->symbols_count) continue;
    stax_vm_symbol_t* symbol = &program->symbols[guard->symbol];
    if (symbol->bound_by != STAX_VM_BOUND_NEVER) continue;
    symbol->bound_by = STAX_VM_BOUND_BY_GUARD;
    symbol->guard_input = guard->kind == STAX_VM_GUARD_BIND ? guard->input : -1;
    symbol->guard_dim = guard->kind == STAX_VM_GUARD_BIND ? guard->dim : -1;
  }
  for (int32_t i = 0; i < program->instructions_count; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    if (ins->opcode != STAX_VM_OP_SHAPE_VARIANT || ins->operand_count < 1) continue;
    int32_t v = program->operands[ins->operand_first];
    if (v < 0 || v >= program->shape_variants_count) continue;
    const stax_vm_shape_variant_t* variant = &program->shape_variants[v];
    for (int32_t b = 0; b < variant->count; b++) {
      int32_t index = variant->first + b;
      if (index < 0 || index >= program->shape_bindings_count) break;
      const stax_vm_shape_binding_t* binding = &program->shape_bindings[index];
      if (binding->kind == STAX_VM_BINDING_CHECK) continue;
      if (binding->symbol < 0 || binding->symbol >= program->symbols_count) continue;
      if (program->symbols[binding->symbol].bound_by == STAX_VM_BOUND_NEVER)
        program->symbols[binding->symbol].bound_by = i;
    }
  }
  for (int32_t d = 0; d < program->dims_count; d++) {
    stax_vm_dim_t* dim = &program->dims[d];
    if (dim->kind != STAX_VM_DIM_CODE || dim->code < 0 || dim->code >= program->dim_codes_count) {
      dim->derivation = STAX_VM_DERIVED_FROM_GUARDS;
      continue;
    }
    const stax_vm_dim_code_ref_t* ref = &program->dim_codes[dim->code];
    int32_t derivation = STAX_VM_DERIVED_FROM_GUARDS;
    for (int32_t w = 0; w < ref->count; w++) {
      int32_t at = ref->first + w;
      if (at < 0 || at >= program->dim_code_words_count) break;
      const stax_dim_code_t* word = &program->dim_code_words[at];
      if (word->op != STAX_DIM_CODE_SYMBOL) continue;
      if (word->value < 0 || word->value >= program->symbols_count) continue;
      int32_t bound_by = program->symbols[word->value].bound_by;
      if (bound_by == STAX_VM_BOUND_NEVER) {
        derivation = STAX_VM_DERIVED_UNRESOLVED;
        break;
      }
      if (bound_by > derivation) derivation = bound_by;
    }
    dim->derivation = derivation;
  }
}

/* ---- registers an instruction references --------------------------------------------------- */

static void stax_vm_visit_loop(const stax_program_t* program, const stax_vm_loop_t* loop,
                               bool is_end, stax_vm_register_visit_fn fn, void* ctx) {
  int32_t size = stax_vm_loop_list_size(loop);
  if (loop->carried_count < 0 || loop->scan_count < 0 || loop->lists_first < 0 ||
      loop->lists_first > program->loop_registers_count - size)
    return;
  const int32_t* list = program->loop_registers + loop->lists_first;
  int32_t c = loop->carried_count, s = loop->scan_count;
  const int32_t* initial = list;
  const int32_t* body_in = list + c;
  const int32_t* body_out = list + 2 * c;
  const int32_t* outputs = list + 3 * c;
  const int32_t* scan_body_out = list + 4 * c;
  const int32_t* scan_outputs = list + 4 * c + s;
  if (!is_end) {
    if (loop->trip_register >= 0) fn(ctx, loop->trip_register, false);
    if (loop->cond_register >= 0) fn(ctx, loop->cond_register, false);
    for (int32_t k = 0; k < c; k++) fn(ctx, initial[k], false);
  } else {
    fn(ctx, loop->cond_out_register, false);
    for (int32_t k = 0; k < c; k++) fn(ctx, body_out[k], false);
    for (int32_t k = 0; k < s; k++) fn(ctx, scan_body_out[k], false);
  }
  fn(ctx, loop->iteration_register, true);
  fn(ctx, loop->cond_in_register, true);
  for (int32_t k = 0; k < c; k++) fn(ctx, body_in[k], true);
  for (int32_t k = 0; k < c; k++) fn(ctx, outputs[k], true);
  for (int32_t k = 0; k < s; k++) fn(ctx, scan_outputs[k], true);
}

void stax_vm_instruction_registers(const stax_program_t* program, int32_t instruction,
                                   stax_vm_register_visit_fn fn, void* ctx) {
  if (instruction < 0 || instruction >= program->instructions_count) return;
  const stax_vm_instruction_t* ins = &program->instructions[instruction];
  int32_t opcode = ins->opcode;
  const char* format = stax_vm_opcode_format(opcode);
  int32_t at = ins->operand_first, end = ins->operand_first + ins->operand_count;
  if (at < 0 || end > program->operands_count) return;
  /* The first register operand is written by these; every other register is read. */
  bool first_is_def = opcode == STAX_VM_OP_LOAD_TENSOR || opcode == STAX_VM_OP_LOAD_CONST ||
                      opcode == STAX_VM_OP_ALLOC_TENSOR || opcode == STAX_VM_OP_ALLOC_TENSOR_FAST ||
                      opcode == STAX_VM_OP_MOVE || opcode == STAX_VM_OP_BROADCAST_TO ||
                      opcode == STAX_VM_OP_RESHAPE_VIEW || opcode == STAX_VM_OP_TRANSPOSE_VIEW ||
                      opcode == STAX_VM_OP_DIM_VALUES;
  int32_t register_index = 0, list_index = 0;
  for (const char* kind = format; *kind && at < end; kind++) {
    if (*kind == STAX_VM_OPERAND_REGISTER_LIST || *kind == STAX_VM_OPERAND_IMMEDIATE_LIST) {
      int32_t count = program->operands[at];
      if (count < 0 || count > end - at - 1) return;
      if (*kind == STAX_VM_OPERAND_REGISTER_LIST) {
        /* Compute and CALL_FUNC: inputs, then outputs. */
        for (int32_t k = 0; k < count; k++) {
          int32_t reg = program->operands[at + 1 + k];
          if (reg >= 0) fn(ctx, reg, list_index == 1);
        }
        list_index++;
      }
      at += 1 + count;
      continue;
    }
    int32_t value = program->operands[at++];
    if (*kind == STAX_VM_OPERAND_REGISTER || *kind == STAX_VM_OPERAND_OPTIONAL_REGISTER) {
      if (value >= 0) fn(ctx, value, first_is_def && register_index == 0);
      register_index++;
    } else if (*kind == STAX_VM_OPERAND_SHAPE_VARIANT) {
      if (value < 0 || value >= program->shape_variants_count) continue;
      const stax_vm_shape_variant_t* variant = &program->shape_variants[value];
      for (int32_t b = 0; b < variant->count; b++) {
        int32_t index = variant->first + b;
        if (index < 0 || index >= program->shape_bindings_count) break;
        const stax_vm_shape_binding_t* binding = &program->shape_bindings[index];
        if (binding->kind != STAX_VM_BINDING_DERIVE) fn(ctx, binding->reg, false);
      }
    } else if (*kind == STAX_VM_OPERAND_SIGNATURE) {
      if (value < 0 || value >= program->signatures_count) continue;
      const stax_vm_signature_t* signature = &program->signatures[value];
      for (int32_t e = 0; e < signature->count; e++) {
        int32_t index = signature->first + e;
        if (index < 0 || index >= program->signature_entries_count) break;
        fn(ctx, program->signature_entries[index].reg, false);
      }
    } else if (*kind == STAX_VM_OPERAND_LOOP) {
      if (value < 0 || value >= program->loops_count) continue;
      stax_vm_visit_loop(program, &program->loops[value], opcode == STAX_VM_OP_LOOP_END, fn, ctx);
    }
  }
}

/* ---- descriptor text --------------------------------------------------------------------------- */

int stax_vm_descriptor_text(const stax_program_t* program, int32_t descriptor, char* buf,
                            size_t size) {
  if (descriptor < 0 || descriptor >= program->descriptors_count)
    return snprintf(buf, size, "<bad descriptor %d>", descriptor);
  const stax_vm_descriptor_t* desc = &program->descriptors[descriptor];
  if (desc->flags & STAX_VM_DESCRIPTOR_SEQUENCE)
    return snprintf(buf, size, "seq(%s)", stax_dtype_name((stax_dtype_t)desc->dtype));
  size_t used = 0;
  int written = snprintf(buf, size, "%s[", stax_dtype_name((stax_dtype_t)desc->dtype));
  if (written < 0) return written;
  used += (size_t)written;
  for (int32_t d = 0; d < desc->rank; d++) {
    int32_t index = desc->dims_first + d;
    const char* separator = d ? ", " : "";
    if (index < 0 || index >= program->dims_count) {
      written = snprintf(used < size ? buf + used : NULL, used < size ? size - used : 0, "%s?",
                         separator);
    } else if (program->dims[index].kind == STAX_VM_DIM_CONSTANT) {
      written = snprintf(used < size ? buf + used : NULL, used < size ? size - used : 0,
                         "%s%lld", separator, (long long)program->dims[index].value);
    } else {
      int32_t code = program->dims[index].code;
      const char* text = code >= 0 && code < program->dim_codes_count
                             ? stax_vm_program_string(program, program->dim_codes[code].text)
                             : "?";
      written = snprintf(used < size ? buf + used : NULL, used < size ? size - used : 0, "%s%s",
                         separator, text);
    }
    if (written < 0) return written;
    used += (size_t)written;
  }
  written = snprintf(used < size ? buf + used : NULL, used < size ? size - used : 0, "]");
  if (written < 0) return written;
  return (int)(used + (size_t)written);
}
