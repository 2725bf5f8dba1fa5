/* Liveness: after the whole program is emitted, each register that may be freed (not an
 * input, a constant or a program output) gets a FREE_TENSOR right after its last use. A use
 * inside a construct nested deeper than the register's definition (an If branch, a Loop body)
 * counts as a use at that construct's exit, so a value a loop body reads stays alive for
 * every iteration and a value one branch reads is freed where the branches join. Freeing a
 * register that is already empty is a no-op, so a FREE that also runs on a path where the
 * register was never set is harmless. */
#include <stdlib.h>
#include <string.h>

#include "vm/compile.h"

typedef struct stax_vm_liveness_t {
  stax_vm_compiler_t* compiler;
  int32_t instruction;
  int32_t* free_position; /* per register: insert FREE before this index; 0 = none */
} stax_vm_liveness_t;

/* Where a reference from `scope` to a register defined in `def_scope` ends its life, or -1
 * when the definition's scope does not enclose the reference (LOOP_BEGIN writing the body's
 * registers). */
static int32_t stax_vm_lifted_position(const stax_vm_compiler_t* c, int32_t scope,
                                       int32_t def_scope, int32_t instruction) {
  if (scope == def_scope) return instruction + 1;
  int32_t child = scope;
  while (child >= 0 && c->scopes[child].parent != def_scope) child = c->scopes[child].parent;
  if (child < 0) return -1;
  return c->scopes[child].exit;
}

static void stax_vm_liveness_visit(void* ctx, int32_t reg, bool is_def) {
  (void)is_def;
  stax_vm_liveness_t* live = ctx;
  stax_vm_compiler_t* c = live->compiler;
  if (reg < 0 || reg >= c->program->registers_count || c->register_info[reg].no_free) return;
  int32_t position = stax_vm_lifted_position(c, c->instruction_scope[live->instruction],
                                             c->register_info[reg].scope, live->instruction);
  if (position > live->free_position[reg]) live->free_position[reg] = position;
}

typedef struct stax_vm_free_t {
  int32_t position;
  int32_t reg;
} stax_vm_free_t;

static int stax_vm_compare_frees(const void* a, const void* b) {
  const stax_vm_free_t* x = a;
  const stax_vm_free_t* y = b;
  if (x->position != y->position) return x->position < y->position ? -1 : 1;
  return (x->reg > y->reg) - (x->reg < y->reg);
}

stax_status_t stax_vm_compiler_insert_frees(stax_vm_compiler_t* c) {
  stax_program_t* program = c->program;
  int32_t registers = program->registers_count;
  int32_t n = program->instructions_count;
  if (registers == 0) return STAX_OK;
  stax_status_t status = STAX_OK;
  int32_t* free_position = NULL;
  stax_vm_free_t* frees = NULL;
  stax_vm_instruction_t* inserted = NULL;
  int32_t* positions = NULL;
  int32_t* operands = NULL;
  int32_t count = 0;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(c->allocator, (size_t)registers, sizeof(int32_t),
                                             (void**)&free_position));
  stax_vm_liveness_t live = {c, 0, free_position};
  for (int32_t i = 0; i < n; i++) {
    live.instruction = i;
    stax_vm_instruction_registers(program, i, stax_vm_liveness_visit, &live);
  }
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(c->allocator, (size_t)registers, sizeof(*frees),
                                                   (void**)&frees), cleanup);
  for (int32_t r = 0; r < registers; r++)
    if (free_position[r] > 0 && free_position[r] <= n) frees[count++] = (stax_vm_free_t){free_position[r], r};
  if (count == 0) goto cleanup;
  qsort(frees, (size_t)count, sizeof(*frees), stax_vm_compare_frees);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(c->allocator, (size_t)count, sizeof(*inserted),
                                                   (void**)&inserted), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(c->allocator, (size_t)count, sizeof(int32_t),
                                                   (void**)&positions), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(c->allocator, (size_t)count, sizeof(int32_t),
                                                   (void**)&operands), cleanup);
  for (int32_t k = 0; k < count; k++) {
    positions[k] = frees[k].position;
    operands[k] = frees[k].reg;
    inserted[k] = (stax_vm_instruction_t){.opcode = STAX_VM_OP_FREE_TENSOR, .node = -1,
                                          .operand_first = k, .operand_count = 1, .segment = -1};
  }
  STAX_GOTO_IF_ERROR(status, stax_vm_program_insert(program, count, positions, inserted, operands, NULL),
                     cleanup);
cleanup:
  if (operands) stax_allocator_free(c->allocator, operands, (size_t)count * sizeof(int32_t));
  if (positions) stax_allocator_free(c->allocator, positions, (size_t)count * sizeof(int32_t));
  if (inserted) stax_allocator_free(c->allocator, inserted, (size_t)count * sizeof(*inserted));
  if (frees) stax_allocator_free(c->allocator, frees, (size_t)registers * sizeof(*frees));
  stax_allocator_free(c->allocator, free_position, (size_t)registers * sizeof(int32_t));
  return status;
}
