/* Dead instructions: after the whole program is emitted, an instruction that only computes
 * registers nothing reads is removed, until none is left. This is where shape chains die:
 * Shape -> Gather -> Concat feeding a Reshape whose dims the compiler computes from symbols
 * (a RESHAPE_VIEW with a descriptor, which never reads the shape tensor) are kernels whose
 * results nobody reads, so a call no longer runs them. Graph-level DCE cannot see this: the
 * Reshape node does use its shape input; only the compiler knows it will not read it.
 *
 * Only instructions without effects go: kernel calls, allocations, constant loads, moves,
 * views and DIM_VALUES. An instruction whose output binds symbols is read by its SHAPE_VARIANT and stays. */
#include <string.h>

#include "vm/compile.h"

typedef struct stax_vm_dead_scan_t {
  bool* read;
  int32_t defs, unread_defs;
  bool count_defs;
} stax_vm_dead_scan_t;

static void stax_vm_dead_mark_reads(void* ctx, int32_t reg, bool is_def) {
  stax_vm_dead_scan_t* scan = ctx;
  if (!is_def) scan->read[reg] = true;
}

static void stax_vm_dead_count_defs(void* ctx, int32_t reg, bool is_def) {
  stax_vm_dead_scan_t* scan = ctx;
  if (!is_def) return;
  scan->defs++;
  if (!scan->read[reg]) scan->unread_defs++;
}

static bool stax_vm_dead_removable(const stax_vm_instruction_t* ins) {
  if (ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT) return false;
  switch (stax_vm_opcode_family(ins->opcode)) {
    case STAX_VM_FAMILY_COMPUTE:
    case STAX_VM_FAMILY_COMPUTE_STATIC:
      return true;
    default:
      break;
  }
  switch (ins->opcode) {
    case STAX_VM_OP_LOAD_CONST:
    case STAX_VM_OP_ALLOC_TENSOR:
    case STAX_VM_OP_ALLOC_TENSOR_FAST:
    case STAX_VM_OP_MOVE:
    case STAX_VM_OP_BROADCAST_TO:
    case STAX_VM_OP_RESHAPE_VIEW:
    case STAX_VM_OP_TRANSPOSE_VIEW:
    case STAX_VM_OP_DIM_VALUES:
      return true;
    default:
      return false;
  }
}

stax_status_t stax_vm_compiler_remove_dead(stax_vm_compiler_t* c, int32_t* out_removed) {
  stax_program_t* program = c->program;
  int32_t n = program->instructions_count, registers = program->registers_count;
  *out_removed = 0;
  if (n == 0 || registers == 0) return STAX_OK;
  stax_status_t status = STAX_OK;
  bool* read = NULL;
  bool* dead = NULL;
  int32_t* map = NULL;
  STAX_GOTO_IF_ERROR(status,
                     stax_allocator_calloc(c->allocator, (size_t)registers, 1, (void**)&read),
                     cleanup);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(c->allocator, (size_t)n, 1, (void**)&dead),
                     cleanup);
  stax_vm_dead_scan_t scan = {.read = read};
  int32_t removed = 0;
  for (bool changed = true; changed;) {
    changed = false;
    memset(read, 0, (size_t)registers);
    for (int32_t i = 0; i < n; i++)
      if (!dead[i]) stax_vm_instruction_registers(program, i, stax_vm_dead_mark_reads, &scan);
    for (int32_t i = 0; i < n; i++) {
      if (dead[i] || !stax_vm_dead_removable(&program->instructions[i])) continue;
      scan.defs = scan.unread_defs = 0;
      stax_vm_instruction_registers(program, i, stax_vm_dead_count_defs, &scan);
      if (scan.defs == 0 || scan.unread_defs != scan.defs) continue;
      dead[i] = true;
      removed++;
      changed = true;
    }
  }
  if (removed == 0) goto cleanup;
  STAX_GOTO_IF_ERROR(status, stax_allocator_malloc(c->allocator, (size_t)(n + 1) * sizeof(int32_t),
                                                   (void**)&map),
                     cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_program_remove(program, dead, map), cleanup);
  for (int32_t i = 0; i < n; i++)
    if (!dead[i]) c->instruction_scope[map[i]] = c->instruction_scope[i];
  for (int32_t s = 0; s < c->scope_count; s++)
    if (c->scopes[s].exit >= 0 && c->scopes[s].exit <= n)
      c->scopes[s].exit = map[c->scopes[s].exit];
  *out_removed = removed;
cleanup:
  if (map) stax_allocator_free(c->allocator, map, (size_t)(n + 1) * sizeof(int32_t));
  if (dead) stax_allocator_free(c->allocator, dead, (size_t)n);
  if (read) stax_allocator_free(c->allocator, read, (size_t)registers);
  return status;
}
