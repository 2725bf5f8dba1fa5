/* The disassembler: prints the extended form (tables, registers with shape descriptors and
 * the derivation of every dynamic dim, guards, instructions with decoded operands, segments)
 * and the compact form (the words the interpreter fetches, one instruction per line). Operand
 * printing is driven by the isa.def formats, so new opcodes print without changes here. */
#include <stdio.h>
#include <string.h>

#include "vm/memory_plan.h"
#include "vm/program.h"

static const char* stax_vm_layout_name(int32_t layout) {
  switch (layout) {
    case STAX_VM_LAYOUT_CONTIGUOUS: return "contiguous";
    case STAX_VM_LAYOUT_VIEW: return "view";
    case STAX_VM_LAYOUT_BROADCAST: return "broadcast";
    case STAX_VM_LAYOUT_ANY: return "any strides";
  }
  return "?";
}

static const char* stax_vm_name(const stax_program_t* program, int32_t offset) {
  return stax_vm_program_string(program, offset);
}

static void stax_vm_print_range(FILE* out, int64_t min, int64_t max) {
  if (max == STAX_DIM_MAX)
    fprintf(out, "[%lld, inf)", (long long)min);
  else
    fprintf(out, "[%lld, %lld]", (long long)min, (long long)max);
}

static void stax_vm_print_binder(FILE* out, const stax_program_t* program, int32_t bound_by,
                                 int32_t guard_input, int32_t guard_dim) {
  if (bound_by == STAX_VM_BOUND_BY_GUARD) {
    if (guard_input >= 0 && guard_input < program->inputs_count)
      fprintf(out, "input \"%s\" dim %d", stax_vm_name(program, program->inputs[guard_input].name),
              guard_dim);
    else
      fprintf(out, "the input guards");
  } else if (bound_by >= 0 && bound_by < program->instructions_count) {
    int32_t node = program->instructions[bound_by].node;
    fprintf(out, "instruction %d (%s", bound_by,
            stax_vm_opcode_name(program->instructions[bound_by].opcode));
    if (node >= 0 && node < program->nodes_count)
      fprintf(out, " after node '%s'", stax_vm_name(program, program->nodes[node].name));
    fprintf(out, ")");
  } else {
    fprintf(out, "nothing (known only from live tensors)");
  }
}

static const char* stax_vm_code_text(const stax_program_t* program, int32_t code) {
  if (code < 0 || code >= program->dim_codes_count) return "?";
  return stax_vm_name(program, program->dim_codes[code].text);
}

static void stax_vm_print_descriptor(FILE* out, const stax_program_t* program, int32_t descriptor) {
  char text[512];
  stax_vm_descriptor_text(program, descriptor, text, sizeof(text));
  fputs(text, out);
}

static void stax_vm_print_binding(FILE* out, const stax_program_t* program,
                                  const stax_vm_shape_binding_t* binding) {
  const char* symbol = binding->symbol >= 0 && binding->symbol < program->symbols_count
                           ? stax_vm_name(program, program->symbols[binding->symbol].name)
                           : "?";
  switch (binding->kind) {
    case STAX_VM_BINDING_BIND:
      if (binding->scale == 1 && binding->offset == 0)
        fprintf(out, "bind %s := r%d dim %d", symbol, binding->reg, binding->dim);
      else
        fprintf(out, "bind %s := (r%d dim %d - %lld) / %lld", symbol, binding->reg, binding->dim,
                (long long)binding->offset, (long long)binding->scale);
      break;
    case STAX_VM_BINDING_CHECK:
      fprintf(out, "check r%d dim %d == %s", binding->reg, binding->dim,
              stax_vm_code_text(program, binding->code));
      break;
    case STAX_VM_BINDING_DERIVE:
      fprintf(out, "derive %s := %s", symbol, stax_vm_code_text(program, binding->code));
      break;
  }
}

/* Prints one instruction's operands, decoded by its format. */
static void stax_vm_print_operands(FILE* out, const stax_program_t* program,
                                   const stax_vm_instruction_t* ins) {
  const int32_t* words = STAX_VM_TABLE_AT(program->operands, ins->operand_first);
  int32_t at = 0, end = ins->operand_count;
  bool first = true;
  for (const char* kind = stax_vm_opcode_format(ins->opcode); *kind && at < end; kind++) {
    if (!first) fputs(", ", out);
    first = false;
    int32_t value = words[at];
    if (*kind == STAX_VM_OPERAND_REGISTER_LIST || *kind == STAX_VM_OPERAND_IMMEDIATE_LIST) {
      bool registers = *kind == STAX_VM_OPERAND_REGISTER_LIST;
      fputc(registers ? '(' : '[', out);
      for (int32_t k = 0; k < value && at + 1 + k < end; k++) {
        int32_t item = words[at + 1 + k];
        if (k) fputs(", ", out);
        if (!registers && ins->opcode == STAX_VM_OP_DIM_VALUES)
          fputs(stax_vm_code_text(program, item), out); /* the dim code's expression */
        else if (!registers)
          fprintf(out, "%d", item);
        else if (item < 0)
          fputc('-', out);
        else
          fprintf(out, "r%d", item);
      }
      fputc(registers ? ')' : ']', out);
      at += 1 + (value > 0 ? value : 0);
      continue;
    }
    at++;
    switch (*kind) {
      case STAX_VM_OPERAND_REGISTER: fprintf(out, "r%d", value); break;
      case STAX_VM_OPERAND_OPTIONAL_REGISTER:
        if (value < 0) fputc('-', out); else fprintf(out, "r%d", value);
        break;
      case STAX_VM_OPERAND_DESCRIPTOR:
      case STAX_VM_OPERAND_OPTIONAL_DESCRIPTOR:
        if (value < 0) fputc('-', out); else stax_vm_print_descriptor(out, program, value);
        break;
      case STAX_VM_OPERAND_NODE:
        if (value >= 0 && value < program->nodes_count)
          fprintf(out, "node '%s'", stax_vm_name(program, program->nodes[value].name));
        else
          fprintf(out, "node %d?", value);
        break;
      case STAX_VM_OPERAND_INPUT:
        fprintf(out, "input %d \"%s\"", value,
                value >= 0 && value < program->inputs_count ? stax_vm_name(program, program->inputs[value].name) : "?");
        break;
      case STAX_VM_OPERAND_OUTPUT:
        fprintf(out, "output %d \"%s\"", value,
                value >= 0 && value < program->outputs_count ? stax_vm_name(program, program->outputs[value].name) : "?");
        break;
      case STAX_VM_OPERAND_CONSTANT: fprintf(out, "constant %d", value); break;
      case STAX_VM_OPERAND_JUMP: fprintf(out, "-> %d", value); break;
      case STAX_VM_OPERAND_LOOP: fprintf(out, "loop %d", value); break;
      case STAX_VM_OPERAND_SIGNATURE:
        if (value >= 0 && value < program->signatures_count &&
            program->signatures[value].count == STAX_VM_SIGNATURE_JIT)
          fprintf(out, "jit versions of segment %d", program->signatures[value].first);
        else
          fprintf(out, "signature %d", value);
        break;
      case STAX_VM_OPERAND_SEGMENT: fprintf(out, "segment %d", value); break;
      case STAX_VM_OPERAND_FUNCTION:
        fprintf(out, "function \"%s\"",
                value >= 0 && value < program->functions_count ? stax_vm_name(program, program->functions[value]) : "?");
        break;
      case STAX_VM_OPERAND_SHAPE_VARIANT:
        if (value >= 0 && value < program->shape_variants_count) {
          const stax_vm_shape_variant_t* variant = &program->shape_variants[value];
          for (int32_t b = 0; b < variant->count; b++) {
            if (b) fputs("; ", out);
            int32_t index = variant->first + b;
            if (index >= 0 && index < program->shape_bindings_count)
              stax_vm_print_binding(out, program, &program->shape_bindings[index]);
          }
        } else {
          fprintf(out, "variant %d?", value);
        }
        break;
      default: fprintf(out, "%d", value); break;
    }
  }
}

static void stax_vm_print_tables(FILE* out, const stax_program_t* program) {
  fprintf(out, "program: %d instructions, %d registers, %d symbols, %d segments, %d constants\n",
          program->instructions_count, program->registers_count, program->symbols_count,
          program->segments_count, program->constants_count);
  fprintf(out, "inputs:\n");
  for (int32_t i = 0; i < program->inputs_count; i++) {
    const stax_vm_io_t* io = &program->inputs[i];
    fprintf(out, "  %d \"%s\": ", i, stax_vm_name(program, io->name));
    stax_vm_print_descriptor(out, program, program->registers[io->reg].descriptor);
    fprintf(out, " -> r%d\n", io->reg);
  }
  fprintf(out, "outputs:\n");
  for (int32_t i = 0; i < program->outputs_count; i++) {
    const stax_vm_io_t* io = &program->outputs[i];
    fprintf(out, "  %d \"%s\": ", i, stax_vm_name(program, io->name));
    stax_vm_print_descriptor(out, program, program->registers[io->reg].descriptor);
    fprintf(out, " <- r%d\n", io->reg);
  }
  fprintf(out, "symbols:\n");
  for (int32_t s = 0; s < program->symbols_count; s++) {
    const stax_vm_symbol_t* symbol = &program->symbols[s];
    fprintf(out, "  %s in ", stax_vm_name(program, symbol->name));
    stax_vm_print_range(out, symbol->min, symbol->max);
    fprintf(out, ", bound by ");
    stax_vm_print_binder(out, program, symbol->bound_by, symbol->guard_input, symbol->guard_dim);
    fputc('\n', out);
  }
  fprintf(out, "guards:\n");
  for (int32_t g = 0; g < program->guards_count; g++) {
    const stax_vm_guard_t* guard = &program->guards[g];
    const char* input = guard->input >= 0 && guard->input < program->inputs_count
                            ? stax_vm_name(program, program->inputs[guard->input].name) : "?";
    const char* symbol = guard->symbol >= 0 && guard->symbol < program->symbols_count
                             ? stax_vm_name(program, program->symbols[guard->symbol].name) : "?";
    switch (guard->kind) {
      case STAX_VM_GUARD_BIND:
        if (guard->scale == 1 && guard->offset == 0)
          fprintf(out, "  bind %s := input \"%s\" dim %d\n", symbol, input, guard->dim);
        else
          fprintf(out, "  bind %s := (input \"%s\" dim %d - %lld) / %lld\n", symbol, input,
                  guard->dim, (long long)guard->offset, (long long)guard->scale);
        break;
      case STAX_VM_GUARD_CHECK:
        fprintf(out, "  check input \"%s\" dim %d == %s\n", input, guard->dim,
                stax_vm_code_text(program, guard->code));
        break;
      case STAX_VM_GUARD_RANGE:
        fprintf(out, "  range %s in ", symbol);
        stax_vm_print_range(out, guard->min, guard->max);
        fputc('\n', out);
        break;
      case STAX_VM_GUARD_DERIVE:
        fprintf(out, "  derive %s := %s\n", symbol, stax_vm_code_text(program, guard->code));
        break;
    }
  }
  fprintf(out, "registers:\n");
  for (int32_t r = 0; r < program->registers_count; r++) {
    const stax_vm_register_t* reg = &program->registers[r];
    fprintf(out, "  r%-4d %-16s ", r, stax_vm_name(program, reg->name));
    if (reg->descriptor < 0 || reg->descriptor >= program->descriptors_count) {
      fprintf(out, "<bad descriptor %d>\n", reg->descriptor);
      continue;
    }
    const stax_vm_descriptor_t* desc = &program->descriptors[reg->descriptor];
    stax_vm_print_descriptor(out, program, reg->descriptor);
    fprintf(out, " %s%s%s%s%s", stax_vm_layout_name(desc->layout),
            (desc->flags & STAX_VM_DESCRIPTOR_SEQUENCE) ? ", sequence"
            : (desc->flags & STAX_VM_DESCRIPTOR_STATIC) ? ", static" : "",
            (reg->flags & STAX_VM_REGISTER_INPUT) ? ", input" : "",
            (reg->flags & STAX_VM_REGISTER_CONSTANT) ? ", constant" : "",
            (reg->flags & STAX_VM_REGISTER_OUTPUT) ? ", output" : "");
    for (int32_t d = 0; d < desc->rank; d++) {
      int32_t index = desc->dims_first + d;
      if (index < 0 || index >= program->dims_count) break;
      const stax_vm_dim_t* dim = &program->dims[index];
      if (dim->kind != STAX_VM_DIM_CODE) continue;
      fprintf(out, "; dim %d %s from ", d, stax_vm_code_text(program, dim->code));
      if (dim->derivation == STAX_VM_DERIVED_FROM_GUARDS)
        fprintf(out, "input guards");
      else if (dim->derivation == STAX_VM_DERIVED_UNRESOLVED)
        fprintf(out, "the live tensor only");
      else
        stax_vm_print_binder(out, program, dim->derivation, -1, -1);
    }
    fputc('\n', out);
  }
}

/* The memory plan (docs/memory.md): each slot's size (the largest of its values, 64-byte
 * aligned) and offset (the sum of the slots before it), both evaluated once per call. */
static void stax_vm_print_memory_plan(FILE* out, const stax_program_t* program) {
  const stax_vm_memory_plan_t* plan = program->memory_plan;
  if (!plan) {
    fprintf(out, "memory plan: none (every temporary comes from the buffer pool)\n");
    return;
  }
  fprintf(out, "memory plan: %d values in %d slots (%d in place), 64-byte aligned\n",
          plan->value_count, plan->slot_count, plan->inplace_count);
  for (int32_t s = 0; s < plan->slot_count; s++) {
    fprintf(out, "  slot %d at %s", s, s == 0 ? "0" : "");
    for (int32_t t = 0; t < s; t++) fprintf(out, "%sslot%d", t ? " + " : "", t);
    fprintf(out, ": size max(");
    bool first = true;
    for (int32_t v = 0; v < plan->value_count; v++) {
      if (plan->values[v].slot != s) continue;
      char text[256];
      stax_vm_descriptor_text(program, plan->values[v].descriptor, text, sizeof(text));
      fprintf(out, "%sr%d %s", first ? "" : ", ", plan->values[v].reg, text);
      first = false;
    }
    fprintf(out, ")\n");
  }
  for (int32_t v = 0; v < plan->value_count; v++) {
    const stax_vm_planned_value_t* value = &plan->values[v];
    fprintf(out, "  r%-4d slot %d, live %d..%d", value->reg, value->slot, value->first,
            value->last);
    if (value->inplace_of >= 0) fprintf(out, ", in place of r%d", plan->values[value->inplace_of].reg);
    fputc('\n', out);
  }
}

static void stax_vm_print_extended(FILE* out, const stax_program_t* program) {
  stax_vm_print_tables(out, program);
  fprintf(out, "instructions (extended form):\n");
  for (int32_t i = 0; i < program->instructions_count; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    if (ins->operand_count == 0)
      fprintf(out, "  %5d  %s", i, stax_vm_opcode_name(ins->opcode));
    else
      fprintf(out, "  %5d  %-26s ", i, stax_vm_opcode_name(ins->opcode));
    if (ins->operand_first >= 0 && ins->operand_count >= 0 &&
        ins->operand_first <= program->operands_count - ins->operand_count)
      stax_vm_print_operands(out, program, ins);
    else
      fputs("<operands out of range>", out);
    bool comment = ins->node >= 0 || ins->segment >= 0 || ins->flags;
    if (comment) fputs("    ;", out);
    if (ins->node >= 0 && ins->node < program->nodes_count)
      fprintf(out, " %s node '%s'", stax_op_name((stax_op_t)program->nodes[ins->node].op),
              stax_vm_name(program, program->nodes[ins->node].name));
    if (ins->segment >= 0) fprintf(out, " [segment %d]", ins->segment);
    if (ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT) fputs(" [shape barrier]", out);
    const stax_vm_memory_plan_t* plan = program->memory_plan;
    if (plan && ins->opcode == STAX_VM_OP_ALLOC_TENSOR_FAST) {
      int32_t reg = program->operands[ins->operand_first];
      int32_t v = reg >= 0 && reg < program->registers_count ? plan->value_of_register[reg] : -1;
      if (v >= 0) {
        fprintf(out, " [planned: slot %d", plan->values[v].slot);
        if (plan->values[v].inplace_of >= 0)
          fprintf(out, ", in place of r%d", plan->values[plan->values[v].inplace_of].reg);
        fputc(']', out);
      }
    }
    fputc('\n', out);
  }
  fprintf(out, "segments:\n");
  for (int32_t s = 0; s < program->segments_count; s++) {
    const stax_vm_segment_t* segment = &program->segments[s];
    fprintf(out, "  %d: instructions %d..%d\n", s, segment->first, segment->first + segment->count - 1);
  }
  stax_vm_print_memory_plan(out, program);
  fprintf(out, "loops:\n");
  for (int32_t l = 0; l < program->loops_count; l++) {
    const stax_vm_loop_t* loop = &program->loops[l];
    fprintf(out, "  %d: node '%s', %d carried, %d scans, M r%d, cond r%d, iteration r%d\n", l,
            loop->node >= 0 && loop->node < program->nodes_count
                ? stax_vm_name(program, program->nodes[loop->node].name) : "?",
            loop->carried_count, loop->scan_count, loop->trip_register, loop->cond_register,
            loop->iteration_register);
  }
}

static void stax_vm_print_compact(FILE* out, const stax_program_t* program) {
  fprintf(out, "compact form: %d words\n", program->code_count);
  int32_t pc = 0;
  while (pc < program->code_count) {
    int32_t header = program->code[pc];
    int32_t opcode = header & STAX_VM_OPCODE_MASK;
    int32_t length = (int32_t)((uint32_t)header >> STAX_VM_LENGTH_SHIFT);
    fprintf(out, "  %6d:", pc);
    if (length < STAX_VM_HEADER_WORDS || pc + length > program->code_count) {
      fprintf(out, " %08x  <malformed>\n", (unsigned)header);
      return;
    }
    for (int32_t k = 0; k < length; k++) fprintf(out, " %08x", (unsigned)program->code[pc + k]);
    fprintf(out, "   ; %s\n", stax_vm_opcode_name(opcode));
    pc += length;
  }
}

stax_status_t stax_program_disassemble(const stax_program_t* program, uint32_t forms, FILE* out) {
  if (!program || !out)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_program_disassemble: program or file is NULL");
  if (forms == 0) forms = STAX_DISASSEMBLE_EXTENDED | STAX_DISASSEMBLE_COMPACT;
  if (forms & STAX_DISASSEMBLE_EXTENDED) stax_vm_print_extended(out, program);
  if (forms & STAX_DISASSEMBLE_COMPACT) stax_vm_print_compact(out, program);
  if (ferror(out)) return stax_status_make(STAX_IO_ERROR, "writing the disassembly failed");
  return STAX_OK;
}
