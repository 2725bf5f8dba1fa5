/* The opcode tables generated from src/vm/isa.def, and the walk over an operand layout that
 * every consumer of the bytecode (emitter, verifier, disassembler) shares. */
#include "vm/isa.h"

typedef struct stax_vm_opcode_info_t {
  const char* name;
  stax_vm_family_t family;
  const char* format;
  uint32_t flags;
  stax_op_t op;
} stax_vm_opcode_info_t;

static const stax_vm_opcode_info_t stax_vm_opcode_table[STAX_VM_OPCODE_COUNT] = {
#define STAX_OPCODE(name, family, handler, format, flags, op) \
  {#name, STAX_VM_FAMILY_##family, format, flags, op},
#include "vm/isa.def"
#undef STAX_OPCODE
};

/* Compute opcodes come in (generic, static) pairs in ops.def order; this finds them by op. */
static const int32_t stax_vm_generic_opcode_of_op[STAX_OP_COUNT] = {
#define STAX_OP(name, min_in, max_in, min_out, max_out, flags, family) STAX_VM_OP_##name,
#include "stax/ops.def"
#undef STAX_OP
};

bool stax_vm_opcode_valid(int32_t opcode) { return opcode >= 0 && opcode < STAX_VM_OPCODE_COUNT; }

const char* stax_vm_opcode_name(int32_t opcode) {
  return stax_vm_opcode_valid(opcode) ? stax_vm_opcode_table[opcode].name : "invalid";
}

stax_vm_family_t stax_vm_opcode_family(int32_t opcode) {
  return stax_vm_opcode_valid(opcode) ? stax_vm_opcode_table[opcode].family
                                      : STAX_VM_FAMILY_CALL;
}

const char* stax_vm_family_name(stax_vm_family_t family) {
  switch (family) {
    case STAX_VM_FAMILY_LIFETIME: return "lifetime";
    case STAX_VM_FAMILY_SHAPE: return "shape";
    case STAX_VM_FAMILY_COMPUTE: return "compute";
    case STAX_VM_FAMILY_COMPUTE_STATIC: return "compute-static";
    case STAX_VM_FAMILY_CONTROL: return "control";
    case STAX_VM_FAMILY_CALL: return "call";
  }
  return "invalid";
}

const char* stax_vm_opcode_format(int32_t opcode) {
  return stax_vm_opcode_valid(opcode) ? stax_vm_opcode_table[opcode].format : "";
}

uint32_t stax_vm_opcode_flags(int32_t opcode) {
  return stax_vm_opcode_valid(opcode) ? stax_vm_opcode_table[opcode].flags : 0;
}

stax_op_t stax_vm_opcode_op(int32_t opcode) {
  return stax_vm_opcode_valid(opcode) ? stax_vm_opcode_table[opcode].op : STAX_OP_INVALID;
}

bool stax_vm_opcode_is_compute(int32_t opcode) {
  stax_vm_family_t family = stax_vm_opcode_family(opcode);
  return stax_vm_opcode_valid(opcode) &&
         (family == STAX_VM_FAMILY_COMPUTE || family == STAX_VM_FAMILY_COMPUTE_STATIC);
}

int32_t stax_vm_compute_opcode(stax_op_t op, bool static_variant) {
  if (op < 0 || op >= STAX_OP_COUNT) return -1;
  return stax_vm_generic_opcode_of_op[op] + (static_variant ? 1 : 0);
}

int32_t stax_vm_operand_words(const char* format, const int32_t* operands, int32_t available) {
  int32_t used = 0;
  for (const char* kind = format; *kind; kind++) {
    if (used >= available) return -1;
    if (*kind == STAX_VM_OPERAND_REGISTER_LIST || *kind == STAX_VM_OPERAND_IMMEDIATE_LIST) {
      int32_t count = operands[used];
      if (count < 0 || count > available - used - 1) return -1;
      used += 1 + count;
    } else {
      used += 1;
    }
  }
  return used;
}
