/* The bytecode verifier. A program runs only after this accepts it, so the interpreter's
 * dispatch loop can trust every operand: opcodes are valid, register / descriptor / node /
 * table indices are in range, jump targets land on instruction boundaries and go forward,
 * list lengths match the ops' arity, dim code is well formed, loops pair up and nest, dtypes
 * and ranks agree where they are statically known, attributes follow the ops' schemas, and
 * the compact form is exactly the encoding of the extended form. A program loaded from a file
 * (which may be hostile) goes through the same checks. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vm/program.h"

typedef struct stax_vm_verifier_t {
  const stax_program_t* program;
} stax_vm_verifier_t;

static stax_status_t stax_vm_reject(const stax_vm_verifier_t* v, int32_t instruction,
                                    const char* fmt, ...) STAX_PRINTF(3, 4);

static stax_status_t stax_vm_reject(const stax_vm_verifier_t* v, int32_t instruction,
                                    const char* fmt, ...) {
  char message[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  if (instruction < 0)
    return stax_status_make(STAX_INVALID_ARGUMENT, "bytecode verification failed: %s", message);
  const stax_vm_instruction_t* ins = &v->program->instructions[instruction];
  return stax_status_make(STAX_INVALID_ARGUMENT,
                          "bytecode verification failed at instruction %d (%s): %s",
                          instruction, stax_vm_opcode_name(ins->opcode), message);
}

static bool stax_vm_in_range(int32_t index, int32_t count) { return index >= 0 && index < count; }
static bool stax_vm_span_ok(int32_t first, int32_t count, int32_t total) {
  return count >= 0 && first >= 0 && first <= total - count;
}
static bool stax_vm_dtype_ok(int32_t dtype) { return dtype >= 0 && dtype < STAX_DTYPE_COUNT; }

static const stax_vm_descriptor_t* stax_vm_register_descriptor(const stax_program_t* program,
                                                               int32_t reg) {
  return &program->descriptors[program->registers[reg].descriptor];
}

/* ---- tables -------------------------------------------------------------------------------- */

static bool stax_vm_is_sequence(const stax_program_t* program, int32_t reg) {
  return reg >= 0 && (stax_vm_register_descriptor(program, reg)->flags & STAX_VM_DESCRIPTOR_SEQUENCE);
}

static stax_status_t stax_vm_verify_string(const stax_vm_verifier_t* v, int32_t offset,
                                           bool optional, const char* what) {
  if (optional && offset == -1) return STAX_OK;
  if (!stax_vm_in_range(offset, v->program->strings_count))
    return stax_vm_reject(v, -1, "%s names string %d of %d bytes", what, offset,
                          v->program->strings_count);
  return STAX_OK;
}

static stax_status_t stax_vm_verify_dim_code(const stax_vm_verifier_t* v, int32_t index) {
  const stax_program_t* program = v->program;
  const stax_vm_dim_code_ref_t* ref = &program->dim_codes[index];
  if (ref->count < 1 || !stax_vm_span_ok(ref->first, ref->count, program->dim_code_words_count))
    return stax_vm_reject(v, -1, "dim code %d spans [%d, +%d) of %d words", index, ref->first,
                          ref->count, program->dim_code_words_count);
  STAX_RETURN_IF_ERROR(stax_vm_verify_string(v, ref->text, true, "dim code text"));
  int32_t depth = 0;
  for (int32_t w = 0; w < ref->count; w++) {
    const stax_dim_code_t* word = &program->dim_code_words[ref->first + w];
    switch (word->op) {
      case STAX_DIM_CODE_CONST: depth++; break;
      case STAX_DIM_CODE_SYMBOL:
        if (word->value < 0 || word->value >= program->symbols_count)
          return stax_vm_reject(v, -1, "dim code %d names symbol %lld of %d", index,
                                (long long)word->value, program->symbols_count);
        depth++;
        break;
      case STAX_DIM_CODE_ADD: case STAX_DIM_CODE_MUL: case STAX_DIM_CODE_FLOORDIV:
      case STAX_DIM_CODE_CEILDIV: case STAX_DIM_CODE_MIN: case STAX_DIM_CODE_MAX:
      case STAX_DIM_CODE_BCAST:
        if (depth < 2)
          return stax_vm_reject(v, -1, "dim code %d underflows its stack at word %d", index, w);
        depth--;
        break;
      default:
        return stax_vm_reject(v, -1, "dim code %d word %d has bad op %d", index, w, word->op);
    }
    if (depth > 64) return stax_vm_reject(v, -1, "dim code %d needs over 64 stack entries", index);
  }
  if (depth != 1)
    return stax_vm_reject(v, -1, "dim code %d leaves %d values on its stack", index, depth);
  return STAX_OK;
}

static stax_status_t stax_vm_verify_descriptors(const stax_vm_verifier_t* v) {
  const stax_program_t* program = v->program;
  for (int32_t i = 0; i < program->dim_codes_count; i++)
    STAX_RETURN_IF_ERROR(stax_vm_verify_dim_code(v, i));
  for (int32_t i = 0; i < program->descriptors_count; i++) {
    const stax_vm_descriptor_t* desc = &program->descriptors[i];
    if (!stax_vm_dtype_ok(desc->dtype))
      return stax_vm_reject(v, -1, "descriptor %d has invalid dtype %d", i, desc->dtype);
    if (desc->rank < 0 || desc->rank > STAX_MAX_RANK)
      return stax_vm_reject(v, -1, "descriptor %d has rank %d (at most %d)", i, desc->rank,
                            STAX_MAX_RANK);
    if (desc->layout < STAX_VM_LAYOUT_CONTIGUOUS || desc->layout > STAX_VM_LAYOUT_ANY)
      return stax_vm_reject(v, -1, "descriptor %d has invalid layout %d", i, desc->layout);
    if (!stax_vm_span_ok(desc->dims_first, desc->rank, program->dims_count))
      return stax_vm_reject(v, -1, "descriptor %d dims lie outside the dim table", i);
    bool all_constant = true;
    for (int32_t d = 0; d < desc->rank; d++) {
      const stax_vm_dim_t* dim = &program->dims[desc->dims_first + d];
      if (dim->kind == STAX_VM_DIM_CONSTANT) {
        if (dim->value < 0)
          return stax_vm_reject(v, -1, "descriptor %d dim %d is negative (%lld)", i, d,
                                (long long)dim->value);
      } else if (dim->kind == STAX_VM_DIM_CODE) {
        all_constant = false;
        if (dim->derivation != STAX_VM_DERIVED_FROM_GUARDS &&
            dim->derivation != STAX_VM_DERIVED_UNRESOLVED &&
            !stax_vm_in_range(dim->derivation, program->instructions_count))
          return stax_vm_reject(v, -1, "descriptor %d dim %d is derived by instruction %d of %d",
                                i, d, dim->derivation, program->instructions_count);
        if (!stax_vm_in_range(dim->code, program->dim_codes_count))
          return stax_vm_reject(v, -1, "descriptor %d dim %d names dim code %d of %d", i, d,
                                dim->code, program->dim_codes_count);
      } else {
        return stax_vm_reject(v, -1, "descriptor %d dim %d has invalid kind %d", i, d,
                              dim->kind);
      }
    }
    if (desc->flags & ~(uint32_t)(STAX_VM_DESCRIPTOR_STATIC | STAX_VM_DESCRIPTOR_SEQUENCE))
      return stax_vm_reject(v, -1, "descriptor %d has unknown flags %#x", i, desc->flags);
    if ((desc->flags & STAX_VM_DESCRIPTOR_SEQUENCE) && desc->rank != 0)
      return stax_vm_reject(v, -1, "sequence descriptor %d has rank %d; sequences have rank 0",
                            i, desc->rank);
    if (all_constant != ((desc->flags & STAX_VM_DESCRIPTOR_STATIC) != 0))
      return stax_vm_reject(v, -1, "descriptor %d static flag disagrees with its dims", i);
  }
  for (int32_t r = 0; r < program->registers_count; r++) {
    if (!stax_vm_in_range(program->registers[r].descriptor, program->descriptors_count))
      return stax_vm_reject(v, -1, "register %d names descriptor %d of %d", r,
                            program->registers[r].descriptor, program->descriptors_count);
    STAX_RETURN_IF_ERROR(stax_vm_verify_string(v, program->registers[r].name, true, "register name"));
    uint32_t known = STAX_VM_REGISTER_INPUT | STAX_VM_REGISTER_CONSTANT | STAX_VM_REGISTER_OUTPUT;
    if (program->registers[r].flags & ~known)
      return stax_vm_reject(v, -1, "register %d has unknown flags %#x", r,
                            program->registers[r].flags);
  }
  return STAX_OK;
}

static stax_status_t stax_vm_verify_io(const stax_vm_verifier_t* v, bool output) {
  const stax_program_t* program = v->program;
  int32_t count = output ? program->outputs_count : program->inputs_count;
  const char* what = output ? "output" : "input";
  for (int32_t i = 0; i < count; i++) {
    const stax_vm_io_t* io = output ? &program->outputs[i] : &program->inputs[i];
    STAX_RETURN_IF_ERROR(stax_vm_verify_string(v, io->name, false, what));
    if (!stax_vm_dtype_ok(io->dtype) || io->rank < 0 || io->rank > STAX_MAX_RANK)
      return stax_vm_reject(v, -1, "%s %d has dtype %d rank %d", what, i, io->dtype, io->rank);
    if (!stax_vm_in_range(io->reg, program->registers_count))
      return stax_vm_reject(v, -1, "%s %d names register %d of %d", what, i, io->reg,
                            program->registers_count);
    const stax_vm_descriptor_t* desc = stax_vm_register_descriptor(program, io->reg);
    if (desc->dtype != io->dtype || desc->rank != io->rank)
      return stax_vm_reject(v, -1, "%s %d is %s rank %d but register %d is %s rank %d", what, i,
                            stax_dtype_name((stax_dtype_t)io->dtype), io->rank, io->reg,
                            stax_dtype_name((stax_dtype_t)desc->dtype), desc->rank);
    if (!stax_vm_span_ok(io->dim_texts_first, io->rank, program->io_dim_texts_count))
      return stax_vm_reject(v, -1, "%s %d dim texts lie outside their table", what, i);
    for (int32_t d = 0; d < io->rank; d++)
      STAX_RETURN_IF_ERROR(stax_vm_verify_string(
          v, program->io_dim_texts[io->dim_texts_first + d], false, "dim text"));
  }
  return STAX_OK;
}

static stax_status_t stax_vm_verify_shape_tables(const stax_vm_verifier_t* v) {
  const stax_program_t* program = v->program;
  for (int32_t s = 0; s < program->symbols_count; s++) {
    const stax_vm_symbol_t* symbol = &program->symbols[s];
    STAX_RETURN_IF_ERROR(stax_vm_verify_string(v, symbol->name, false, "symbol"));
    if (symbol->min > symbol->max)
      return stax_vm_reject(v, -1, "symbol %d has empty range [%lld, %lld]", s,
                            (long long)symbol->min, (long long)symbol->max);
    /* Messages follow these to say where a symbol was bound. */
    if (symbol->bound_by != STAX_VM_BOUND_BY_GUARD && symbol->bound_by != STAX_VM_BOUND_NEVER &&
        !stax_vm_in_range(symbol->bound_by, program->instructions_count))
      return stax_vm_reject(v, -1, "symbol %d is bound by instruction %d of %d", s,
                            symbol->bound_by, program->instructions_count);
    if (symbol->guard_input != -1 &&
        (!stax_vm_in_range(symbol->guard_input, program->inputs_count) ||
         !stax_vm_in_range(symbol->guard_dim, program->inputs[symbol->guard_input].rank)))
      return stax_vm_reject(v, -1, "symbol %d is bound by input %d dim %d", s,
                            symbol->guard_input, symbol->guard_dim);
  }
  for (int32_t g = 0; g < program->guards_count; g++) {
    const stax_vm_guard_t* guard = &program->guards[g];
    bool uses_input = guard->kind == STAX_VM_GUARD_BIND || guard->kind == STAX_VM_GUARD_CHECK;
    bool uses_symbol = guard->kind != STAX_VM_GUARD_CHECK;
    bool uses_code = guard->kind == STAX_VM_GUARD_CHECK || guard->kind == STAX_VM_GUARD_DERIVE;
    if (guard->kind < STAX_VM_GUARD_BIND || guard->kind > STAX_VM_GUARD_DERIVE)
      return stax_vm_reject(v, -1, "guard %d has invalid kind %d", g, guard->kind);
    if (uses_input && (!stax_vm_in_range(guard->input, program->inputs_count) ||
                       !stax_vm_in_range(guard->dim, program->inputs[guard->input].rank)))
      return stax_vm_reject(v, -1, "guard %d names input %d dim %d", g, guard->input, guard->dim);
    if (uses_symbol && !stax_vm_in_range(guard->symbol, program->symbols_count))
      return stax_vm_reject(v, -1, "guard %d names symbol %d of %d", g, guard->symbol,
                            program->symbols_count);
    if (uses_code && !stax_vm_in_range(guard->code, program->dim_codes_count))
      return stax_vm_reject(v, -1, "guard %d names dim code %d", g, guard->code);
    if (guard->kind == STAX_VM_GUARD_BIND && guard->code != -1 &&
        !stax_vm_in_range(guard->code, program->dim_codes_count))
      return stax_vm_reject(v, -1, "guard %d names dim code %d", g, guard->code);
    if (guard->kind == STAX_VM_GUARD_BIND && guard->scale < 1)
      return stax_vm_reject(v, -1, "guard %d has scale %lld", g, (long long)guard->scale);
  }
  for (int32_t i = 0; i < program->shape_variants_count; i++) {
    const stax_vm_shape_variant_t* variant = &program->shape_variants[i];
    if (!stax_vm_span_ok(variant->first, variant->count, program->shape_bindings_count))
      return stax_vm_reject(v, -1, "shape variant %d lies outside the binding table", i);
  }
  for (int32_t b = 0; b < program->shape_bindings_count; b++) {
    const stax_vm_shape_binding_t* binding = &program->shape_bindings[b];
    if (binding->kind < STAX_VM_BINDING_BIND || binding->kind > STAX_VM_BINDING_DERIVE)
      return stax_vm_reject(v, -1, "shape binding %d has invalid kind %d", b, binding->kind);
    if (binding->kind != STAX_VM_BINDING_DERIVE) {
      if (!stax_vm_in_range(binding->reg, program->registers_count))
        return stax_vm_reject(v, -1, "shape binding %d names register %d of %d", b,
                              binding->reg, program->registers_count);
      if (!stax_vm_in_range(binding->dim, stax_vm_register_descriptor(program, binding->reg)->rank))
        return stax_vm_reject(v, -1, "shape binding %d names dim %d of register %d", b,
                              binding->dim, binding->reg);
    }
    if (binding->kind != STAX_VM_BINDING_CHECK &&
        !stax_vm_in_range(binding->symbol, program->symbols_count))
      return stax_vm_reject(v, -1, "shape binding %d names symbol %d", b, binding->symbol);
    if (binding->kind != STAX_VM_BINDING_BIND &&
        !stax_vm_in_range(binding->code, program->dim_codes_count))
      return stax_vm_reject(v, -1, "shape binding %d names dim code %d", b, binding->code);
    if (binding->kind == STAX_VM_BINDING_BIND && binding->scale < 1)
      return stax_vm_reject(v, -1, "shape binding %d has scale %lld", b,
                            (long long)binding->scale);
  }
  return STAX_OK;
}

static stax_status_t stax_vm_verify_optional_register(const stax_vm_verifier_t* v, int32_t reg,
                                                      bool optional, const char* what,
                                                      int32_t index) {
  if (optional && reg == -1) return STAX_OK;
  if (!stax_vm_in_range(reg, v->program->registers_count))
    return stax_vm_reject(v, -1, "%s %d names register %d of %d", what, index, reg,
                          v->program->registers_count);
  return STAX_OK;
}

/* The loop moves values between its register lists and writes the iteration number (int64)
 * and condition (bool) itself, so the lists must agree in dtype and rank. */
static stax_status_t stax_vm_verify_loop_types(const stax_vm_verifier_t* v, int32_t l) {
  const stax_program_t* program = v->program;
  const stax_vm_loop_t* loop = &program->loops[l];
  const int32_t* lists = program->loop_registers + loop->lists_first;
  int32_t c = loop->carried_count, s = loop->scan_count;
  for (int32_t k = 0; k < c; k++) {
    const stax_vm_descriptor_t* initial = stax_vm_register_descriptor(program, lists[k]);
    for (int32_t list = 1; list < 4; list++) {
      const stax_vm_descriptor_t* other = stax_vm_register_descriptor(program, lists[list * c + k]);
      if (stax_vm_is_sequence(program, lists[list * c + k]) != stax_vm_is_sequence(program, lists[k]))
        return stax_vm_reject(v, -1, "loop %d carried value %d is a sequence in one list and a "
                              "tensor in another", l, k);
      if (other->dtype != initial->dtype || other->rank != initial->rank)
        return stax_vm_reject(v, -1, "loop %d carried value %d is %s rank %d in one list and "
                              "%s rank %d in another",
                              l, k, stax_dtype_name((stax_dtype_t)initial->dtype), initial->rank,
                              stax_dtype_name((stax_dtype_t)other->dtype), other->rank);
    }
  }
  for (int32_t k = 0; k < s; k++) {
    const stax_vm_descriptor_t* each = stax_vm_register_descriptor(program, lists[4 * c + k]);
    const stax_vm_descriptor_t* stacked =
        stax_vm_register_descriptor(program, lists[4 * c + s + k]);
    if (stax_vm_is_sequence(program, lists[4 * c + k]) ||
        stax_vm_is_sequence(program, lists[4 * c + s + k]))
      return stax_vm_reject(v, -1, "loop %d scan %d is a sequence; scans stack tensors", l, k);
    if (each->dtype != stacked->dtype || stacked->rank != each->rank + 1)
      return stax_vm_reject(v, -1, "loop %d scan %d stacks %s rank %d into %s rank %d", l, k,
                            stax_dtype_name((stax_dtype_t)each->dtype), each->rank,
                            stax_dtype_name((stax_dtype_t)stacked->dtype), stacked->rank);
  }
  const stax_vm_descriptor_t* iteration =
      stax_vm_register_descriptor(program, loop->iteration_register);
  const stax_vm_descriptor_t* cond = stax_vm_register_descriptor(program, loop->cond_in_register);
  if (stax_vm_is_sequence(program, loop->iteration_register) ||
      stax_vm_is_sequence(program, loop->cond_in_register) ||
      stax_vm_is_sequence(program, loop->cond_out_register) ||
      stax_vm_is_sequence(program, loop->trip_register) ||
      stax_vm_is_sequence(program, loop->cond_register))
    return stax_vm_reject(v, -1, "loop %d control registers must be tensors", l);
  if (iteration->dtype != STAX_DTYPE_INT64 || iteration->rank > 1 ||
      cond->dtype != STAX_DTYPE_BOOL || cond->rank > 1)
    return stax_vm_reject(v, -1, "loop %d iteration register must be an int64 scalar and its "
                          "condition register a bool scalar", l);
  return STAX_OK;
}

static stax_status_t stax_vm_verify_misc_tables(const stax_vm_verifier_t* v) {
  const stax_program_t* program = v->program;
  for (int32_t l = 0; l < program->loops_count; l++) {
    const stax_vm_loop_t* loop = &program->loops[l];
    if (!stax_vm_in_range(loop->node, program->nodes_count))
      return stax_vm_reject(v, -1, "loop %d names node %d", l, loop->node);
    STAX_RETURN_IF_ERROR(stax_vm_verify_optional_register(v, loop->trip_register, true, "loop", l));
    STAX_RETURN_IF_ERROR(stax_vm_verify_optional_register(v, loop->cond_register, true, "loop", l));
    STAX_RETURN_IF_ERROR(stax_vm_verify_optional_register(v, loop->iteration_register, false, "loop", l));
    STAX_RETURN_IF_ERROR(stax_vm_verify_optional_register(v, loop->cond_in_register, false, "loop", l));
    STAX_RETURN_IF_ERROR(stax_vm_verify_optional_register(v, loop->cond_out_register, false, "loop", l));
    if (loop->carried_count < 0 || loop->scan_count < 0 ||
        loop->carried_count > INT32_MAX / 8 || loop->scan_count > INT32_MAX / 8 ||
        !stax_vm_span_ok(loop->lists_first, stax_vm_loop_list_size(loop),
                         program->loop_registers_count))
      return stax_vm_reject(v, -1, "loop %d register lists lie outside their table", l);
    for (int32_t k = 0; k < stax_vm_loop_list_size(loop); k++)
      STAX_RETURN_IF_ERROR(stax_vm_verify_optional_register(
          v, program->loop_registers[loop->lists_first + k], false, "loop", l));
    STAX_RETURN_IF_ERROR(stax_vm_verify_loop_types(v, l));
  }
  for (int32_t s = 0; s < program->signatures_count; s++) {
    const stax_vm_signature_t* signature = &program->signatures[s];
    if (signature->count == STAX_VM_SIGNATURE_JIT) {
      if (!stax_vm_in_range(signature->first, program->segments_count))
        return stax_vm_reject(v, -1, "JIT signature %d names segment %d of %d", s,
                              signature->first, program->segments_count);
      continue;
    }
    if (!stax_vm_span_ok(signature->first, signature->count, program->signature_entries_count))
      return stax_vm_reject(v, -1, "signature %d lies outside its entry table", s);
  }
  for (int32_t e = 0; e < program->signature_entries_count; e++) {
    const stax_vm_signature_entry_t* entry = &program->signature_entries[e];
    STAX_RETURN_IF_ERROR(stax_vm_verify_optional_register(v, entry->reg, false, "signature entry", e));
    if (stax_vm_is_sequence(program, entry->reg))
      return stax_vm_reject(v, -1, "signature entry %d names sequence register %d", e, entry->reg);
    if (!stax_vm_dtype_ok(entry->dtype) || entry->rank < 0 || entry->rank > STAX_MAX_RANK)
      return stax_vm_reject(v, -1, "signature entry %d has dtype %d rank %d", e, entry->dtype,
                            entry->rank);
    if (entry->flags & ~(uint32_t)STAX_VM_SIGNATURE_CHECK_STRIDES)
      return stax_vm_reject(v, -1, "signature entry %d has unknown flags %#x", e, entry->flags);
    int32_t values = entry->rank * ((entry->flags & STAX_VM_SIGNATURE_CHECK_STRIDES) ? 2 : 1);
    if (!stax_vm_span_ok(entry->values_first, values, program->signature_values_count))
      return stax_vm_reject(v, -1, "signature entry %d values lie outside their table", e);
  }
  for (int32_t f = 0; f < program->functions_count; f++)
    STAX_RETURN_IF_ERROR(stax_vm_verify_string(v, program->functions[f], false, "function"));
  for (int32_t s = 0; s < program->segments_count; s++) {
    const stax_vm_segment_t* segment = &program->segments[s];
    if (segment->count < 1 ||
        !stax_vm_span_ok(segment->first, segment->count, program->instructions_count))
      return stax_vm_reject(v, -1, "segment %d spans [%d, +%d) of %d instructions", s,
                            segment->first, segment->count, program->instructions_count);
  }
  for (int32_t c = 0; c < program->constants_count; c++)
    if (!program->constants[c]) return stax_vm_reject(v, -1, "constant %d is missing", c);
  return STAX_OK;
}

static stax_status_t stax_vm_verify_nodes(const stax_vm_verifier_t* v) {
  const stax_program_t* program = v->program;
  for (int32_t n = 0; n < program->nodes_count; n++) {
    const stax_vm_node_t* node = &program->nodes[n];
    if (node->op < 0 || node->op >= STAX_OP_COUNT)
      return stax_vm_reject(v, -1, "node %d has invalid op %d", n, node->op);
    STAX_RETURN_IF_ERROR(stax_vm_verify_string(v, node->name, false, "node name"));
    if (!stax_vm_span_ok(node->inputs_first, node->input_count, program->node_registers_count) ||
        !stax_vm_span_ok(node->outputs_first, node->output_count, program->node_registers_count) ||
        !stax_vm_span_ok(node->attrs_first, node->attr_count, program->attrs_count))
      return stax_vm_reject(v, -1, "node %d operand or attribute lists lie outside their tables", n);
    for (int32_t k = 0; k < node->input_count; k++)
      STAX_RETURN_IF_ERROR(stax_vm_verify_optional_register(
          v, program->node_registers[node->inputs_first + k], true, "node", n));
    for (int32_t k = 0; k < node->output_count; k++)
      STAX_RETURN_IF_ERROR(stax_vm_verify_optional_register(
          v, program->node_registers[node->outputs_first + k], false, "node", n));
    for (int32_t a = 0; a < node->attr_count; a++) {
      const stax_vm_attr_t* attr = &program->attrs[node->attrs_first + a];
      STAX_RETURN_IF_ERROR(stax_vm_verify_string(v, attr->name, false, "attribute name"));
      bool ok = true;
      switch (attr->type) {
        case STAX_ATTR_INT: case STAX_ATTR_FLOAT: case STAX_ATTR_GRAPH: break;
        case STAX_ATTR_STRING: ok = stax_vm_in_range(attr->first, program->strings_count); break;
        case STAX_ATTR_INTS: ok = stax_vm_span_ok(attr->first, attr->count, program->attr_ints_count); break;
        case STAX_ATTR_FLOATS: ok = stax_vm_span_ok(attr->first, attr->count, program->attr_floats_count); break;
        case STAX_ATTR_STRINGS:
          ok = stax_vm_span_ok(attr->first, attr->count, program->attr_strings_count);
          for (int32_t k = 0; ok && k < attr->count; k++)
            ok = stax_vm_in_range(program->attr_strings[attr->first + k], program->strings_count);
          break;
        case STAX_ATTR_TENSOR: ok = stax_vm_in_range(attr->first, program->constants_count); break;
        default: ok = false;
      }
      if (!ok) return stax_vm_reject(v, -1, "node %d attribute %d is malformed", n, a);
      /* Kernels look attributes up by name and type: hold them to the op's schema. */
      stax_status_t schema = stax_attr_check_schema(
          (stax_op_t)node->op, stax_vm_program_string(program, node->name),
          stax_vm_program_string(program, attr->name), (stax_attr_type_t)attr->type);
      if (schema) {
        stax_status_t error = stax_vm_reject(v, -1, "node %d: %s", n, stax_status_message(schema));
        stax_status_free(schema);
        return error;
      }
    }
  }
  return STAX_OK;
}

/* ---- instructions --------------------------------------------------------------------------- */

/* What a compute op's first output's dtype is, where ops.def's shape family fixes it. */
typedef enum stax_vm_dtype_rule_e {
  STAX_VM_DTYPE_ANY,
  STAX_VM_DTYPE_INPUT0,
  STAX_VM_DTYPE_INPUT1,
  STAX_VM_DTYPE_BOOL,
  STAX_VM_DTYPE_INT64,
} stax_vm_dtype_rule_t;

static const char* const stax_vm_op_families[STAX_OP_COUNT] = {
#define STAX_OP(name, min_in, max_in, min_out, max_out, flags, family) #family,
#include "stax/ops.def"
#undef STAX_OP
};

static stax_vm_dtype_rule_t stax_vm_dtype_rule(stax_op_t op) {
  static const struct {
    const char* family;
    stax_vm_dtype_rule_t rule;
  } rules[] = {
      {"binary", STAX_VM_DTYPE_INPUT0},  {"variadic", STAX_VM_DTYPE_INPUT0},
      {"unary", STAX_VM_DTYPE_INPUT0},   {"same_shape", STAX_VM_DTYPE_INPUT0},
      {"reduce", STAX_VM_DTYPE_INPUT0},  {"matmul", STAX_VM_DTYPE_INPUT0},
      {"transpose", STAX_VM_DTYPE_INPUT0}, {"reshape", STAX_VM_DTYPE_INPUT0},
      {"flatten", STAX_VM_DTYPE_INPUT0}, {"squeeze", STAX_VM_DTYPE_INPUT0},
      {"unsqueeze", STAX_VM_DTYPE_INPUT0}, {"concat", STAX_VM_DTYPE_INPUT0},
      {"expand", STAX_VM_DTYPE_INPUT0},  {"where", STAX_VM_DTYPE_INPUT1},
      {"cast_like", STAX_VM_DTYPE_INPUT1}, {"compare", STAX_VM_DTYPE_BOOL},
      {"predicate", STAX_VM_DTYPE_BOOL}, {"shape_of", STAX_VM_DTYPE_INT64},
      {"size_of", STAX_VM_DTYPE_INT64},  {"nonzero", STAX_VM_DTYPE_INT64},
      {"arg_reduce", STAX_VM_DTYPE_INT64}, {"nms", STAX_VM_DTYPE_INT64},
      {"roi_align", STAX_VM_DTYPE_INPUT0},
  };
  if (op < 0 || op >= STAX_OP_COUNT) return STAX_VM_DTYPE_ANY;
  for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
    if (strcmp(rules[i].family, stax_vm_op_families[op]) == 0) return rules[i].rule;
  return STAX_VM_DTYPE_ANY;
}

typedef struct stax_vm_operands_t {
  int32_t values[8];  /* scalar operands in format order (lists excluded) */
  int32_t value_count;
  const int32_t* lists[2];
  int32_t list_counts[2];
  int32_t list_count;
} stax_vm_operands_t;

static stax_status_t stax_vm_verify_operand(const stax_vm_verifier_t* v, int32_t i, char kind,
                                            int32_t value) {
  const stax_program_t* program = v->program;
  int32_t limit = 0;
  bool optional = false;
  const char* what = "";
  switch (kind) {
    case STAX_VM_OPERAND_REGISTER: limit = program->registers_count; what = "register"; break;
    case STAX_VM_OPERAND_OPTIONAL_REGISTER:
      limit = program->registers_count; optional = true; what = "register"; break;
    case STAX_VM_OPERAND_DESCRIPTOR: limit = program->descriptors_count; what = "descriptor"; break;
    case STAX_VM_OPERAND_OPTIONAL_DESCRIPTOR:
      limit = program->descriptors_count; optional = true; what = "descriptor"; break;
    case STAX_VM_OPERAND_NODE: limit = program->nodes_count; what = "node"; break;
    case STAX_VM_OPERAND_INPUT: limit = program->inputs_count; what = "input"; break;
    case STAX_VM_OPERAND_OUTPUT: limit = program->outputs_count; what = "output"; break;
    case STAX_VM_OPERAND_CONSTANT: limit = program->constants_count; what = "constant"; break;
    case STAX_VM_OPERAND_JUMP: limit = program->instructions_count; what = "jump target"; break;
    case STAX_VM_OPERAND_LOOP: limit = program->loops_count; what = "loop"; break;
    case STAX_VM_OPERAND_SHAPE_VARIANT: limit = program->shape_variants_count; what = "shape variant"; break;
    case STAX_VM_OPERAND_SIGNATURE: limit = program->signatures_count; what = "signature"; break;
    case STAX_VM_OPERAND_FUNCTION: limit = program->functions_count; what = "function"; break;
    case STAX_VM_OPERAND_SEGMENT: limit = program->segments_count; what = "segment"; break;
    case STAX_VM_OPERAND_IMMEDIATE: return STAX_OK;
    default: return stax_vm_reject(v, i, "unknown operand kind '%c'", kind);
  }
  if (optional && value == -1) return STAX_OK;
  if (!stax_vm_in_range(value, limit))
    return stax_vm_reject(v, i, "%s %d is out of range (%d %ss)", what, value, limit, what);
  return STAX_OK;
}

static stax_status_t stax_vm_collect_operands(const stax_vm_verifier_t* v, int32_t i,
                                              stax_vm_operands_t* out) {
  const stax_program_t* program = v->program;
  const stax_vm_instruction_t* ins = &program->instructions[i];
  memset(out, 0, sizeof(*out));
  const int32_t* words = STAX_VM_TABLE_AT(program->operands, ins->operand_first);
  int32_t at = 0;
  for (const char* kind = stax_vm_opcode_format(ins->opcode); *kind; kind++) {
    if (*kind == STAX_VM_OPERAND_REGISTER_LIST || *kind == STAX_VM_OPERAND_IMMEDIATE_LIST) {
      int32_t count = words[at];
      if (*kind == STAX_VM_OPERAND_REGISTER_LIST) {
        for (int32_t k = 0; k < count; k++)
          STAX_RETURN_IF_ERROR(
              stax_vm_verify_operand(v, i, STAX_VM_OPERAND_OPTIONAL_REGISTER, words[at + 1 + k]));
        if (out->list_count < 2) {
          out->lists[out->list_count] = words + at + 1;
          out->list_counts[out->list_count++] = count;
        }
      } else if (out->list_count < 2) {
        out->lists[out->list_count] = words + at + 1;
        out->list_counts[out->list_count++] = count;
      }
      at += 1 + count;
      continue;
    }
    STAX_RETURN_IF_ERROR(stax_vm_verify_operand(v, i, *kind, words[at]));
    if (out->value_count < 8) out->values[out->value_count++] = words[at];
    at++;
  }
  return STAX_OK;
}

static stax_status_t stax_vm_same_type(const stax_vm_verifier_t* v, int32_t i, int32_t dst,
                                       int32_t src, bool same_rank) {
  const stax_vm_descriptor_t* a = stax_vm_register_descriptor(v->program, dst);
  const stax_vm_descriptor_t* b = stax_vm_register_descriptor(v->program, src);
  if (stax_vm_is_sequence(v->program, dst) != stax_vm_is_sequence(v->program, src))
    return stax_vm_reject(v, i, "register %d is a %s but register %d is a %s", dst,
                          stax_vm_is_sequence(v->program, dst) ? "sequence" : "tensor", src,
                          stax_vm_is_sequence(v->program, src) ? "sequence" : "tensor");
  if (a->dtype != b->dtype || (same_rank && a->rank != b->rank))
    return stax_vm_reject(v, i, "register %d is %s rank %d but register %d is %s rank %d", dst,
                          stax_dtype_name((stax_dtype_t)a->dtype), a->rank, src,
                          stax_dtype_name((stax_dtype_t)b->dtype), b->rank);
  return STAX_OK;
}

static stax_status_t stax_vm_verify_compute(const stax_vm_verifier_t* v, int32_t i,
                                            const stax_vm_operands_t* ops) {
  const stax_program_t* program = v->program;
  const stax_vm_instruction_t* ins = &program->instructions[i];
  int32_t node_index = ops->values[0];
  const stax_vm_node_t* node = &program->nodes[node_index];
  stax_op_t op = stax_vm_opcode_op(ins->opcode);
  const char* node_name = stax_vm_program_string(program, node->name);
  if (ins->node != node_index)
    return stax_vm_reject(v, i, "record names node %d but its operand names node %d", ins->node,
                          node_index);
  if (node->op != (int32_t)op)
    return stax_vm_reject(v, i, "runs %s but node '%s' is %s", stax_op_name(op), node_name,
                          stax_op_name((stax_op_t)node->op));
  if (stax_op_flags(op) & STAX_OPF_CONTROL)
    return stax_vm_reject(v, i, "%s is control flow; it has no kernel", stax_op_name(op));
  int32_t min_in = stax_op_min_inputs(op), max_in = stax_op_max_inputs(op);
  int32_t min_out = stax_op_min_outputs(op), max_out = stax_op_max_outputs(op);
  int32_t inputs = ops->list_counts[0], outputs = ops->list_counts[1];
  if (inputs < min_in || (max_in >= 0 && inputs > max_in) || outputs < min_out ||
      (max_out >= 0 && outputs > max_out))
    return stax_vm_reject(v, i, "node '%s' (%s) has %d inputs and %d outputs; the op takes "
                          "%d..%d inputs and %d..%d outputs",
                          node_name, stax_op_name(op), inputs, outputs, min_in, max_in, min_out,
                          max_out);
  if (inputs != node->input_count || outputs != node->output_count)
    return stax_vm_reject(v, i, "operand lists (%d, %d) disagree with node '%s' (%d, %d)",
                          inputs, outputs, node_name, node->input_count, node->output_count);
  /* Kernels see the node's registers (to tell which optional outputs are wanted) and the
   * instruction's values: they must be the same registers. */
  for (int32_t list = 0; list < 2; list++) {
    const int32_t* node_regs =
        STAX_VM_TABLE_AT(program->node_registers,
                         list ? node->outputs_first : node->inputs_first);
    for (int32_t k = 0; k < ops->list_counts[list]; k++)
      if (ops->lists[list][k] != node_regs[k])
        return stax_vm_reject(v, i, "%s %d is register %d but node '%s' says %d",
                              list ? "output" : "input", k, ops->lists[list][k], node_name,
                              node_regs[k]);
  }
  for (int32_t k = 0; k < min_in; k++)
    if (ops->lists[0][k] < 0)
      return stax_vm_reject(v, i, "required input %d of node '%s' has no register", k, node_name);
  /* Kernels get tensors where the op takes tensors and sequences where it takes sequences
   * (Identity and control flow pass either, but not through a kernel). A sequence output is
   * always made by the kernel: sequence registers are never allocated. */
  for (int32_t list = 0; list < 2; list++) {
    for (int32_t k = 0; k < ops->list_counts[list]; k++) {
      int32_t reg = ops->lists[list][k];
      if (reg < 0) continue;
      bool wants = (list ? stax_op_output_kind(op, k) : stax_op_input_kind(op, k)) ==
                   STAX_OPERAND_SEQUENCE;
      if (stax_vm_is_sequence(program, reg) != wants)
        return stax_vm_reject(v, i, "%s %d of node '%s' (%s) is register %d, a %s; the op "
                              "needs a %s",
                              list ? "output" : "input", k, node_name, stax_op_name(op), reg,
                              wants ? "tensor" : "sequence", wants ? "sequence" : "tensor");
      if (list == 1 && wants && !(ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT))
        return stax_vm_reject(v, i, "node '%s' (%s) makes a sequence but is not marked "
                              "DYNAMIC_OUTPUT", node_name, stax_op_name(op));
    }
  }
  /* Outputs are written: each is a register of its own, none of them an input, so writing
   * or releasing one can never pull a value from under the kernel. */
  for (int32_t k = 0; k < outputs; k++) {
    int32_t reg = ops->lists[1][k];
    if (reg < 0)
      return stax_vm_reject(v, i, "output %d of node '%s' has no register", k, node_name);
    for (int32_t j = 0; j < k; j++)
      if (ops->lists[1][j] == reg)
        return stax_vm_reject(v, i, "outputs %d and %d of node '%s' are both register %d", j, k,
                              node_name, reg);
    for (int32_t j = 0; j < inputs; j++)
      if (ops->lists[0][j] == reg)
        return stax_vm_reject(v, i, "output %d of node '%s' is also input %d (register %d)", k,
                              node_name, j, reg);
  }
  if (stax_vm_opcode_family(ins->opcode) == STAX_VM_FAMILY_COMPUTE_STATIC) {
    for (int32_t list = 0; list < 2; list++) {
      for (int32_t k = 0; k < ops->list_counts[list]; k++) {
        int32_t reg = ops->lists[list][k];
        if (reg < 0) continue;
        if (!(stax_vm_register_descriptor(program, reg)->flags & STAX_VM_DESCRIPTOR_STATIC))
          return stax_vm_reject(v, i, "static variant of node '%s' has %s %d (register %d) "
                                "with a dynamic shape",
                                node_name, list ? "output" : "input", k, reg);
      }
    }
  }
  stax_vm_dtype_rule_t rule = stax_vm_dtype_rule(op);
  int32_t out_dtype = stax_vm_register_descriptor(program, ops->lists[1][0])->dtype;
  int32_t expected = -1;
  if (rule == STAX_VM_DTYPE_BOOL) expected = STAX_DTYPE_BOOL;
  if (rule == STAX_VM_DTYPE_INT64) expected = STAX_DTYPE_INT64;
  if ((rule == STAX_VM_DTYPE_INPUT0 && inputs > 0 && ops->lists[0][0] >= 0) ||
      (rule == STAX_VM_DTYPE_INPUT1 && inputs > 1 && ops->lists[0][1] >= 0))
    expected = stax_vm_register_descriptor(
                   program, ops->lists[0][rule == STAX_VM_DTYPE_INPUT1 ? 1 : 0])->dtype;
  if (expected >= 0 && expected != out_dtype)
    return stax_vm_reject(v, i, "node '%s' (%s) produces %s, but output register %d is %s",
                          node_name, stax_op_name(op), stax_dtype_name((stax_dtype_t)expected),
                          ops->lists[1][0], stax_dtype_name((stax_dtype_t)out_dtype));
  /* Broadcasting elementwise ops produce the largest input rank; the others (Clip, CastLike,
   * Dropout: their extra inputs are bounds, a dtype donor or flags) produce input 0's. */
  if (stax_op_flags(op) & STAX_OPF_ELEMENTWISE) {
    int32_t rank = 0;
    int32_t considered = (stax_op_flags(op) & STAX_OPF_BROADCAST) ? inputs : 1;
    for (int32_t k = 0; k < considered && k < inputs; k++) {
      if (ops->lists[0][k] < 0) continue;
      int32_t input_rank = stax_vm_register_descriptor(program, ops->lists[0][k])->rank;
      if (input_rank > rank) rank = input_rank;
    }
    int32_t out_rank = stax_vm_register_descriptor(program, ops->lists[1][0])->rank;
    if (out_rank != rank)
      return stax_vm_reject(v, i, "node '%s' (%s) produces rank %d, but output register %d has "
                            "rank %d",
                            node_name, stax_op_name(op), rank, ops->lists[1][0], out_rank);
  }
  return STAX_OK;
}

static stax_status_t stax_vm_verify_instruction(const stax_vm_verifier_t* v, int32_t i,
                                                int32_t* loop_begin, int32_t* loop_end) {
  const stax_program_t* program = v->program;
  const stax_vm_instruction_t* ins = &program->instructions[i];
  if (!stax_vm_opcode_valid(ins->opcode))
    return stax_vm_reject(v, -1, "instruction %d has invalid opcode %d", i, ins->opcode);
  if (!stax_vm_span_ok(ins->operand_first, ins->operand_count, program->operands_count))
    return stax_vm_reject(v, i, "operands lie outside the operand table");
  if (stax_vm_operand_words(stax_vm_opcode_format(ins->opcode),
                            STAX_VM_TABLE_AT(program->operands, ins->operand_first),
                            ins->operand_count) != ins->operand_count)
    return stax_vm_reject(v, i, "%d operand words do not match format \"%s\"",
                          ins->operand_count, stax_vm_opcode_format(ins->opcode));
  if (ins->node != -1 && !stax_vm_in_range(ins->node, program->nodes_count))
    return stax_vm_reject(v, i, "record names node %d of %d", ins->node, program->nodes_count);
  if (ins->segment != -1 && !stax_vm_in_range(ins->segment, program->segments_count))
    return stax_vm_reject(v, i, "record names segment %d of %d", ins->segment,
                          program->segments_count);
  if (ins->flags & ~(uint32_t)STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT)
    return stax_vm_reject(v, i, "unknown flags %#x", ins->flags);
  if ((ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT) &&
      !stax_vm_opcode_is_compute(ins->opcode) && ins->opcode != STAX_VM_OP_RESHAPE_VIEW)
    return stax_vm_reject(v, i, "only compute and RESHAPE_VIEW instructions have dynamic outputs");
  stax_vm_operands_t ops;
  STAX_RETURN_IF_ERROR(stax_vm_collect_operands(v, i, &ops));
  const int32_t* val = ops.values;
  switch (ins->opcode) {
    case STAX_VM_OP_JUMP:
    case STAX_VM_OP_JUMP_IF_SHAPE_UNMATCHED:
    case STAX_VM_OP_JUMP_IF_FALSE: {
      /* Only LOOP_END goes back: without it, every instruction runs at most once per run. */
      int32_t target = val[ins->opcode == STAX_VM_OP_JUMP ? 0 : 1];
      if (target <= i)
        return stax_vm_reject(v, i, "jumps back to instruction %d; only LOOP_END jumps back",
                              target);
      if (ins->opcode == STAX_VM_OP_JUMP_IF_FALSE &&
          (stax_vm_register_descriptor(program, val[0])->rank > 1 ||
           stax_vm_is_sequence(program, val[0])))
        return stax_vm_reject(v, i, "condition register %d is not a scalar", val[0]);
      break;
    }
    case STAX_VM_OP_LOAD_TENSOR: {
      const stax_vm_io_t* io = &program->inputs[val[1]];
      const stax_vm_descriptor_t* desc = stax_vm_register_descriptor(program, val[0]);
      if (desc->dtype != io->dtype || desc->rank != io->rank)
        return stax_vm_reject(v, i, "input %d is %s rank %d but register %d is %s rank %d",
                              val[1], stax_dtype_name((stax_dtype_t)io->dtype), io->rank, val[0],
                              stax_dtype_name((stax_dtype_t)desc->dtype), desc->rank);
      break;
    }
    case STAX_VM_OP_LOAD_CONST: {
      const stax_tensor_t* constant = program->constants[val[1]];
      const stax_vm_descriptor_t* desc = stax_vm_register_descriptor(program, val[0]);
      if ((int32_t)stax_tensor_dtype(constant) != desc->dtype ||
          stax_tensor_rank(constant) != desc->rank || stax_tensor_is_sequence(constant) ||
          stax_vm_is_sequence(program, val[0]))
        return stax_vm_reject(v, i, "constant %d does not match register %d's type", val[1],
                              val[0]);
      break;
    }
    case STAX_VM_OP_STORE_TENSOR: {
      const stax_vm_io_t* io = &program->outputs[val[1]];
      const stax_vm_descriptor_t* desc = stax_vm_register_descriptor(program, val[0]);
      if (desc->dtype != io->dtype || desc->rank != io->rank)
        return stax_vm_reject(v, i, "output %d is %s rank %d but register %d is %s rank %d",
                              val[1], stax_dtype_name((stax_dtype_t)io->dtype), io->rank, val[0],
                              stax_dtype_name((stax_dtype_t)desc->dtype), desc->rank);
      break;
    }
    case STAX_VM_OP_ALLOC_TENSOR:
    case STAX_VM_OP_ALLOC_TENSOR_FAST: {
      const stax_vm_descriptor_t* desc = &program->descriptors[val[1]];
      const stax_vm_descriptor_t* reg = stax_vm_register_descriptor(program, val[0]);
      if (desc->dtype != reg->dtype || desc->rank != reg->rank ||
          (desc->flags & STAX_VM_DESCRIPTOR_SEQUENCE) || stax_vm_is_sequence(program, val[0]))
        return stax_vm_reject(v, i, "descriptor %d does not match register %d's type (or is a "
                              "sequence, which is never allocated)", val[1], val[0]);
      break;
    }
    case STAX_VM_OP_MOVE: STAX_RETURN_IF_ERROR(stax_vm_same_type(v, i, val[0], val[1], true)); break;
    case STAX_VM_OP_BROADCAST_TO: {
      STAX_RETURN_IF_ERROR(stax_vm_same_type(v, i, val[0], val[1], false));
      if (stax_vm_is_sequence(program, val[1]) ||
          (ins->opcode == STAX_VM_OP_RESHAPE_VIEW && stax_vm_is_sequence(program, val[3])))
        return stax_vm_reject(v, i, "views take tensors, not sequences");
      const stax_vm_descriptor_t* desc = &program->descriptors[val[2]];
      if (desc->rank < stax_vm_register_descriptor(program, val[1])->rank ||
          desc->rank != stax_vm_register_descriptor(program, val[0])->rank)
        return stax_vm_reject(v, i, "cannot broadcast register %d to descriptor %d's rank %d",
                              val[1], val[2], desc->rank);
      break;
    }
    case STAX_VM_OP_RESHAPE_VIEW: {
      STAX_RETURN_IF_ERROR(stax_vm_same_type(v, i, val[0], val[1], false));
      if (stax_vm_is_sequence(program, val[1]) ||
          (ins->opcode == STAX_VM_OP_RESHAPE_VIEW && stax_vm_is_sequence(program, val[3])))
        return stax_vm_reject(v, i, "views take tensors, not sequences");
      if (val[2] < 0 && val[3] < 0)
        return stax_vm_reject(v, i, "needs a descriptor or a shape register");
      if (val[2] >= 0 &&
          program->descriptors[val[2]].rank != stax_vm_register_descriptor(program, val[0])->rank)
        return stax_vm_reject(v, i, "descriptor %d's rank differs from register %d's", val[2],
                              val[0]);
      break;
    }
    case STAX_VM_OP_TRANSPOSE_VIEW: {
      STAX_RETURN_IF_ERROR(stax_vm_same_type(v, i, val[0], val[1], true));
      if (stax_vm_is_sequence(program, val[1]) ||
          (ins->opcode == STAX_VM_OP_RESHAPE_VIEW && stax_vm_is_sequence(program, val[3])))
        return stax_vm_reject(v, i, "views take tensors, not sequences");
      int32_t rank = stax_vm_register_descriptor(program, val[1])->rank;
      if (ops.list_counts[0] != rank)
        return stax_vm_reject(v, i, "permutation has %d entries for rank %d", ops.list_counts[0],
                              rank);
      uint32_t seen = 0;
      for (int32_t k = 0; k < rank; k++) {
        int32_t axis = ops.lists[0][k];
        if (axis < 0 || axis >= rank || (seen & (1u << axis)))
          return stax_vm_reject(v, i, "permutation entry %d (%d) is not a permutation of 0..%d",
                                k, axis, rank - 1);
        seen |= 1u << axis;
      }
      break;
    }
    case STAX_VM_OP_DIM_VALUES: {
      const stax_vm_descriptor_t* desc = stax_vm_register_descriptor(program, val[0]);
      int32_t count = ops.list_counts[0];
      if (desc->dtype != STAX_DTYPE_INT64 && desc->dtype != STAX_DTYPE_INT32)
        return stax_vm_reject(v, i, "register %d is %s; dim values are int64 or int32", val[0],
                              stax_dtype_name((stax_dtype_t)desc->dtype));
      bool fits = desc->rank == 0 ? count == 1
                  : desc->rank == 1 && (desc->flags & STAX_VM_DESCRIPTOR_STATIC) &&
                        program->dims[desc->dims_first].value == count;
      if (!fits || count > STAX_VM_DIM_VALUES_MAX)
        return stax_vm_reject(v, i, "%d dim values do not fill register %d (rank %d)", count,
                              val[0], desc->rank);
      for (int32_t k = 0; k < count; k++)
        if (!stax_vm_in_range(ops.lists[0][k], program->dim_codes_count))
          return stax_vm_reject(v, i, "dim code %d is out of range (%d dim codes)",
                                ops.lists[0][k], program->dim_codes_count);
      break;
    }
    case STAX_VM_OP_LOOP_BEGIN:
    case STAX_VM_OP_LOOP_END: {
      int32_t* seen = ins->opcode == STAX_VM_OP_LOOP_BEGIN ? loop_begin : loop_end;
      if (seen[val[0]] >= 0)
        return stax_vm_reject(v, i, "loop %d has a second %s at instruction %d", val[0],
                              stax_vm_opcode_name(ins->opcode), seen[val[0]]);
      seen[val[0]] = i;
      break;
    }
    case STAX_VM_OP_CALL_FUNC:
      for (int32_t k = 0; k < ops.list_counts[1]; k++)
        if (ops.lists[1][k] < 0) return stax_vm_reject(v, i, "output %d has no register", k);
      /* Host functions exchange tensors only. */
      for (int32_t list = 0; list < 2; list++)
        for (int32_t k = 0; k < ops.list_counts[list]; k++)
          if (stax_vm_is_sequence(program, ops.lists[list][k]))
            return stax_vm_reject(v, i, "%s %d is sequence register %d; host functions take "
                                  "tensors", list ? "output" : "input", k, ops.lists[list][k]);
      break;
    default:
      if (stax_vm_opcode_is_compute(ins->opcode))
        STAX_RETURN_IF_ERROR(stax_vm_verify_compute(v, i, &ops));
      break;
  }
  return STAX_OK;
}

static stax_status_t stax_vm_verify_loops(const stax_vm_verifier_t* v, const int32_t* begin,
                                          const int32_t* end) {
  const stax_program_t* program = v->program;
  for (int32_t l = 0; l < program->loops_count; l++) {
    if (begin[l] < 0 && end[l] < 0) continue;
    if (begin[l] < 0 || end[l] < 0 || end[l] <= begin[l])
      return stax_vm_reject(v, -1, "loop %d needs one LOOP_BEGIN before one LOOP_END", l);
    int32_t exit = program->operands[program->instructions[begin[l]].operand_first + 1];
    int32_t body = program->operands[program->instructions[end[l]].operand_first + 1];
    if (exit != end[l] + 1 || body != begin[l] + 1)
      return stax_vm_reject(v, begin[l],
                            "loop %d must exit right after its LOOP_END (%d, not %d) and repeat "
                            "right after its LOOP_BEGIN (%d, not %d)",
                            l, end[l] + 1, exit, begin[l] + 1, body);
  }
  return STAX_OK;
}

/* Loops nest (each LOOP_END closes the innermost open loop) and jumps stay inside the loop
 * body they start in: a run enters a body only through LOOP_BEGIN and leaves it only through
 * LOOP_END, so loop state and the shape stack unwind in order. `owner` (instructions_count
 * entries, `stack` loops_count + 1) is scratch: the innermost loop around each instruction. */
static stax_status_t stax_vm_verify_nesting(const stax_vm_verifier_t* v, int32_t* owner,
                                            int32_t* stack) {
  const stax_program_t* program = v->program;
  int32_t n = program->instructions_count, depth = 0;
  for (int32_t i = 0; i < n; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    int32_t loop = ins->opcode == STAX_VM_OP_LOOP_BEGIN || ins->opcode == STAX_VM_OP_LOOP_END
                       ? program->operands[ins->operand_first]
                       : -1;
    if (ins->opcode == STAX_VM_OP_LOOP_END) {
      if (depth == 0 || stack[depth - 1] != loop)
        return stax_vm_reject(v, i, "LOOP_END of loop %d does not close the innermost loop",
                              loop);
      depth--;
    }
    owner[i] = depth > 0 ? stack[depth - 1] : -1;
    if (ins->opcode == STAX_VM_OP_LOOP_BEGIN) {
      if (depth > program->loops_count)
        return stax_vm_reject(v, i, "loops nest deeper than there are loops");
      stack[depth++] = loop;
    }
  }
  if (depth != 0) return stax_vm_reject(v, -1, "loop %d is never closed", stack[depth - 1]);
  for (int32_t i = 0; i < n; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    if (ins->opcode != STAX_VM_OP_JUMP && ins->opcode != STAX_VM_OP_JUMP_IF_FALSE &&
        ins->opcode != STAX_VM_OP_JUMP_IF_SHAPE_UNMATCHED)
      continue;
    int32_t target =
        program->operands[ins->operand_first + (ins->opcode == STAX_VM_OP_JUMP ? 0 : 1)];
    /* Landing on the body's own LOOP_END is ending the iteration, not leaving the body. */
    bool own_end = owner[i] >= 0 && program->instructions[target].opcode == STAX_VM_OP_LOOP_END &&
                   program->operands[program->instructions[target].operand_first] == owner[i];
    if (owner[target] == owner[i] || own_end) continue;
    if (owner[target] < 0)
      return stax_vm_reject(v, i, "jumps out of loop %d's body (to instruction %d)", owner[i],
                            target);
    if (owner[i] < 0)
      return stax_vm_reject(v, i, "jumps into loop %d's body (to instruction %d)", owner[target],
                            target);
    return stax_vm_reject(v, i, "jumps from loop %d's body into loop %d's (instruction %d)",
                          owner[i], owner[target], target);
  }
  return STAX_OK;
}

/* ---- compact form ----------------------------------------------------------------------------- */

static stax_status_t stax_vm_verify_compact(const stax_vm_verifier_t* v, int32_t* offsets) {
  const stax_program_t* program = v->program;
  int32_t n = program->instructions_count;
  int64_t pc = 0;
  for (int32_t i = 0; i < n; i++) {
    offsets[i] = (int32_t)pc;
    pc += STAX_VM_HEADER_WORDS + program->instructions[i].operand_count;
  }
  if (pc != program->code_count)
    return stax_vm_reject(v, -1, "compact form has %d words; the extended form encodes to %lld",
                          program->code_count, (long long)pc);
  for (int32_t i = 0; i < n; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    const int32_t* words = program->code + offsets[i];
    int32_t opcode = words[0] & STAX_VM_OPCODE_MASK;
    int32_t length = (int32_t)((uint32_t)words[0] >> STAX_VM_LENGTH_SHIFT);
    if (!stax_vm_opcode_valid(opcode))
      return stax_vm_reject(v, -1, "compact word %d holds invalid opcode %d", offsets[i], opcode);
    int32_t index_word = i;
    if (ins->flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT) index_word |= STAX_VM_CODE_DYNAMIC_OUTPUT;
    if (opcode != ins->opcode || length != STAX_VM_HEADER_WORDS + ins->operand_count ||
        words[1] != index_word)
      return stax_vm_reject(v, i, "compact header at word %d (opcode %d, length %d, index word "
                            "%#x) disagrees with the extended form",
                            offsets[i], opcode, length, (unsigned)words[1]);
    const int32_t* operands = STAX_VM_TABLE_AT(program->operands, ins->operand_first);
    int32_t at = 0;
    for (const char* kind = stax_vm_opcode_format(opcode); *kind; kind++) {
      if (*kind == STAX_VM_OPERAND_REGISTER_LIST || *kind == STAX_VM_OPERAND_IMMEDIATE_LIST) {
        for (int32_t k = 0; k <= operands[at]; k++)
          if (words[STAX_VM_HEADER_WORDS + at + k] != operands[at + k])
            return stax_vm_reject(v, i, "compact operand word %d disagrees with the extended form",
                                  offsets[i] + STAX_VM_HEADER_WORDS + at + k);
        at += 1 + operands[at];
        continue;
      }
      int32_t expected = *kind == STAX_VM_OPERAND_JUMP ? offsets[operands[at]] : operands[at];
      if (words[STAX_VM_HEADER_WORDS + at] != expected)
        return stax_vm_reject(v, i, "compact operand word %d is %d, expected %d%s",
                              offsets[i] + STAX_VM_HEADER_WORDS + at,
                              words[STAX_VM_HEADER_WORDS + at], expected,
                              *kind == STAX_VM_OPERAND_JUMP ? " (a jump off an instruction "
                                                              "boundary)" : "");
      at++;
    }
  }
  return STAX_OK;
}

typedef struct stax_vm_sequence_use_t {
  const stax_program_t* program;
  int32_t reg; /* a sequence register found, or -1 */
} stax_vm_sequence_use_t;

static void stax_vm_find_sequence(void* ctx, int32_t reg, bool is_def) {
  (void)is_def;
  stax_vm_sequence_use_t* use = ctx;
  if (use->reg < 0 && stax_vm_is_sequence(use->program, reg)) use->reg = reg;
}

/* Segments are what the JIT lowers: they hold tensors only (a compiled program ends a segment
 * at any instruction that touches a sequence; a file must not say otherwise). */
static stax_status_t stax_vm_verify_segment_kinds(const stax_vm_verifier_t* v) {
  const stax_program_t* program = v->program;
  for (int32_t s = 0; s < program->segments_count; s++) {
    const stax_vm_segment_t* segment = &program->segments[s];
    for (int32_t i = segment->first; i < segment->first + segment->count; i++) {
      stax_vm_sequence_use_t use = {program, -1};
      stax_vm_instruction_registers(program, i, stax_vm_find_sequence, &use);
      if (use.reg >= 0)
        return stax_vm_reject(v, i, "segment %d holds sequence register %d; segments hold "
                              "tensors only", s, use.reg);
    }
  }
  return STAX_OK;
}

stax_status_t stax_vm_verify(const stax_program_t* program) {
  stax_vm_verifier_t v = {program};
  if (program->strings_count > 0 && program->strings[program->strings_count - 1] != '\0')
    return stax_vm_reject(&v, -1, "string table is not terminated");
  STAX_RETURN_IF_ERROR(stax_vm_verify_descriptors(&v));
  STAX_RETURN_IF_ERROR(stax_vm_verify_io(&v, false));
  STAX_RETURN_IF_ERROR(stax_vm_verify_io(&v, true));
  STAX_RETURN_IF_ERROR(stax_vm_verify_shape_tables(&v));
  STAX_RETURN_IF_ERROR(stax_vm_verify_misc_tables(&v));
  STAX_RETURN_IF_ERROR(stax_vm_verify_nodes(&v));
  int32_t n = program->instructions_count;
  if (n < 1) return stax_vm_reject(&v, -1, "the program has no instructions");
  stax_status_t status = STAX_OK;
  int32_t* scratch = NULL;
  size_t scratch_count = 2 * (size_t)n + 3 * (size_t)program->loops_count + 2;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(program->allocator, scratch_count * sizeof(int32_t),
                                             (void**)&scratch));
  int32_t* loop_begin = scratch;
  int32_t* loop_end = scratch + program->loops_count;
  int32_t* offsets = scratch + 2 * program->loops_count;
  for (int32_t l = 0; l < 2 * program->loops_count; l++) scratch[l] = -1;
  for (int32_t i = 0; i < n; i++)
    STAX_GOTO_IF_ERROR(status, stax_vm_verify_instruction(&v, i, loop_begin, loop_end), cleanup);
  if (!(stax_vm_opcode_flags(program->instructions[n - 1].opcode) & STAX_VM_OPF_TERMINATOR)) {
    status = stax_vm_reject(&v, n - 1, "the last instruction must be RETURN or JUMP");
    goto cleanup;
  }
  STAX_GOTO_IF_ERROR(status, stax_vm_verify_loops(&v, loop_begin, loop_end), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_verify_segment_kinds(&v), cleanup);
  STAX_GOTO_IF_ERROR(status,
                     stax_vm_verify_nesting(&v, offsets + n + 1, offsets + 2 * (size_t)n + 1),
                     cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_verify_compact(&v, offsets), cleanup);
cleanup:
  stax_allocator_free(program->allocator, scratch, scratch_count * sizeof(int32_t));
  return status;
}
