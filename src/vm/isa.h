/* The VM instruction set as C: the opcode enum and the per-opcode tables generated from
 * src/vm/isa.def (names, families, operand formats, flags, the op a compute opcode runs), and
 * the compact encoding's layout. Shared by the compiler, emitter, verifier, disassembler and
 * interpreter (and later the serializer and the JIT). */
#ifndef STAX_VM_ISA_H_
#define STAX_VM_ISA_H_

#include "stax/graph.h"

typedef enum stax_vm_opcode_e {
#define STAX_OPCODE(name, family, handler, format, flags, op) STAX_VM_OP_##name,
#include "vm/isa.def"
#undef STAX_OPCODE
  STAX_VM_OPCODE_COUNT
} stax_vm_opcode_t;

typedef enum stax_vm_family_e {
  STAX_VM_FAMILY_LIFETIME,
  STAX_VM_FAMILY_SHAPE,
  STAX_VM_FAMILY_COMPUTE,
  STAX_VM_FAMILY_COMPUTE_STATIC,
  STAX_VM_FAMILY_CONTROL,
  STAX_VM_FAMILY_CALL,
} stax_vm_family_t;

enum {
  STAX_VM_OPF_BARRIER = 1u << 0,
  STAX_VM_OPF_TERMINATOR = 1u << 1,
};

/* Operand kinds, the characters of an isa.def format string. */
enum {
  STAX_VM_OPERAND_REGISTER = 'r',
  STAX_VM_OPERAND_OPTIONAL_REGISTER = 'o',
  STAX_VM_OPERAND_REGISTER_LIST = 'L',
  STAX_VM_OPERAND_IMMEDIATE_LIST = 'K',
  STAX_VM_OPERAND_IMMEDIATE = 'k',
  STAX_VM_OPERAND_DESCRIPTOR = 'd',
  STAX_VM_OPERAND_OPTIONAL_DESCRIPTOR = 'D',
  STAX_VM_OPERAND_NODE = 'n',
  STAX_VM_OPERAND_INPUT = 'i',
  STAX_VM_OPERAND_OUTPUT = 'u',
  STAX_VM_OPERAND_CONSTANT = 'c',
  STAX_VM_OPERAND_JUMP = 'j',
  STAX_VM_OPERAND_LOOP = 'p',
  STAX_VM_OPERAND_SHAPE_VARIANT = 'v',
  STAX_VM_OPERAND_SIGNATURE = 'g',
  STAX_VM_OPERAND_FUNCTION = 'f',
  STAX_VM_OPERAND_SEGMENT = 's',
};

/* Compact encoding. Each instruction is
 *   word 0: opcode | (length in words << 16)
 *   word 1: bits 0-30 the instruction's index in the extended form (profiling counters,
 *           messages); bit 31 DYNAMIC_OUTPUT (the kernel allocates its outputs)
 *   words 2..: operands, laid out as the format says
 * The verifier checks every field before a program can run. */
#define STAX_VM_HEADER_WORDS 2
#define STAX_VM_OPCODE_MASK 0xffff
#define STAX_VM_LENGTH_SHIFT 16
#define STAX_VM_MAX_INSTRUCTION_WORDS 0x7fff

const char* stax_vm_opcode_name(int32_t opcode); /* "invalid" when out of range */
stax_vm_family_t stax_vm_opcode_family(int32_t opcode);
const char* stax_vm_family_name(stax_vm_family_t family);
const char* stax_vm_opcode_format(int32_t opcode);
uint32_t stax_vm_opcode_flags(int32_t opcode);
/* The op a compute opcode runs; STAX_OP_INVALID for other opcodes. */
stax_op_t stax_vm_opcode_op(int32_t opcode);
bool stax_vm_opcode_valid(int32_t opcode);
bool stax_vm_opcode_is_compute(int32_t opcode);
/* The generic and static compute opcodes of an op. */
int32_t stax_vm_compute_opcode(stax_op_t op, bool static_variant);

/* Walks an operand array laid out by `format`; returns the number of int32 words it spans,
 * or -1 when a list count is negative or the operands run past `available` words. */
int32_t stax_vm_operand_words(const char* format, const int32_t* operands, int32_t available);

#endif /* STAX_VM_ISA_H_ */
