/* Emission: the extended form -> the compact form the interpreter fetches. One pass lays the
 * instructions out as int32 words (header, then operands in format order), turns jump
 * targets from instruction indices into word offsets, and carries the one instruction flag
 * the interpreter needs (DYNAMIC_OUTPUT) in word 1, so a run reads nothing but the compact
 * words. The compact form is never edited; to change a program, change the extended form and
 * emit again (the loader re-emits it from a file's extended form). */
#include <string.h>

#include "vm/program.h"

stax_status_t stax_vm_emit(stax_program_t* program) {
  int32_t n = program->instructions_count;
  stax_status_t status = STAX_OK;
  int32_t* offsets = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(program->allocator, ((size_t)n + 1) * sizeof(int32_t),
                                             (void**)&offsets));
  int64_t total = 0;
  for (int32_t i = 0; i < n; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    if (!stax_vm_opcode_valid(ins->opcode)) {
      status = stax_status_make(STAX_INVALID_ARGUMENT, "instruction %d has invalid opcode %d", i,
                                ins->opcode);
      goto cleanup;
    }
    if (ins->operand_count < 0 || ins->operand_first < 0 ||
        ins->operand_first > program->operands_count - ins->operand_count) {
      status = stax_status_make(STAX_INVALID_ARGUMENT,
                                "instruction %d (%s): operands [%d, +%d) lie outside the "
                                "operand table (%d words)",
                                i, stax_vm_opcode_name(ins->opcode), ins->operand_first,
                                ins->operand_count, program->operands_count);
      goto cleanup;
    }
    const int32_t* operands = STAX_VM_TABLE_AT(program->operands, ins->operand_first);
    int32_t expected =
        stax_vm_operand_words(stax_vm_opcode_format(ins->opcode), operands, ins->operand_count);
    if (expected != ins->operand_count) {
      status = stax_status_make(STAX_INVALID_ARGUMENT,
                                "instruction %d (%s): %d operand words do not match its "
                                "format \"%s\"",
                                i, stax_vm_opcode_name(ins->opcode), ins->operand_count,
                                stax_vm_opcode_format(ins->opcode));
      goto cleanup;
    }
    int32_t length = STAX_VM_HEADER_WORDS + ins->operand_count;
    if (length > STAX_VM_MAX_INSTRUCTION_WORDS) {
      status = stax_status_make(STAX_OUT_OF_RANGE,
                                "instruction %d (%s) needs %d words; at most %d fit",
                                i, stax_vm_opcode_name(ins->opcode), length,
                                STAX_VM_MAX_INSTRUCTION_WORDS);
      goto cleanup;
    }
    offsets[i] = (int32_t)total;
    total += length;
    if (total > INT32_MAX / 2) {
      status = stax_status_make(STAX_OUT_OF_RANGE, "program is too large (%lld words)",
                                (long long)total);
      goto cleanup;
    }
  }
  offsets[n] = (int32_t)total;
  program->code_count = 0;
  STAX_GOTO_IF_ERROR(status,
                     stax_vm_table_reserve(program->allocator, (void**)&program->code,
                                           &program->capacity.code, 0, (int32_t)total,
                                           sizeof(int32_t)),
                     cleanup);
  for (int32_t i = 0; i < n; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    int32_t* words = program->code + offsets[i];
    const int32_t* operands = STAX_VM_TABLE_AT(program->operands, ins->operand_first);
    int32_t length = STAX_VM_HEADER_WORDS + ins->operand_count;
    words[0] = ins->opcode | (length << STAX_VM_LENGTH_SHIFT);
    words[1] = i;
    if (ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT) words[1] |= STAX_VM_CODE_DYNAMIC_OUTPUT;
    if (ins->operand_count > 0) /* operands may be NULL in a program without any */
      memcpy(words + STAX_VM_HEADER_WORDS, operands, (size_t)ins->operand_count * sizeof(int32_t));
    /* Jump targets: instruction index -> word offset; a bad index stays bad (-1) for the
     * verifier to report. */
    int32_t at = 0;
    for (const char* kind = stax_vm_opcode_format(ins->opcode); *kind; kind++) {
      if (*kind == STAX_VM_OPERAND_REGISTER_LIST || *kind == STAX_VM_OPERAND_IMMEDIATE_LIST) {
        at += 1 + operands[at];
        continue;
      }
      if (*kind == STAX_VM_OPERAND_JUMP) {
        int32_t target = operands[at];
        words[STAX_VM_HEADER_WORDS + at] = target >= 0 && target < n ? offsets[target] : -1;
      }
      at++;
    }
  }
  program->code_count = (int32_t)total;
cleanup:
  stax_allocator_free(program->allocator, offsets, ((size_t)n + 1) * sizeof(int32_t));
  return status;
}
