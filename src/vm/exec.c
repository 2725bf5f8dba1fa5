/* Instruction semantics for the lifetime, compute, call and jump instructions, plus the small
 * helpers they share (dim evaluation, scalar reads, error context, timing). The dispatch loop
 * (interp_loop.inc) stays a list of calls into these. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kernels/kernel.h"
#include "runtime/tensor_internal.h"
#include "vm/context.h"
#include "vm/jit_tier.h"

/* ---- shared helpers ------------------------------------------------------------------------ */

const char* stax_vm_register_name(const stax_program_t* program, int32_t reg) {
  if (reg < 0 || reg >= program->registers_count) return "?";
  const char* name = stax_vm_program_string(program, program->registers[reg].name);
  return name[0] ? name : "(unnamed)";
}

stax_status_t stax_vm_instruction_error(const stax_context_t* ctx, const int32_t* ins,
                                        stax_status_t status) {
  const stax_program_t* program = ctx->program;
  int32_t index = STAX_VM_CODE_INDEX(ins);
  const stax_vm_instruction_t* record = &program->instructions[index];
  if (record->node >= 0) {
    const stax_vm_node_t* node = &program->nodes[record->node];
    return stax_status_annotate(status, "instruction %d (%s) from %s node '%s'", index,
                                stax_vm_opcode_name(record->opcode),
                                stax_op_name((stax_op_t)node->op),
                                stax_vm_program_string(program, node->name));
  }
  return stax_status_annotate(status, "instruction %d (%s)", index,
                              stax_vm_opcode_name(record->opcode));
}

/* An interpreted instruction's trace event. segment >= 0: interpreted inside a compiled
 * segment's call. */
void stax_vm_trace_instruction(stax_context_t* ctx, int32_t instruction, uint64_t start,
                               uint64_t end, int32_t segment) {
  const stax_program_t* program = ctx->program;
  const stax_vm_instruction_t* record = &program->instructions[instruction];
  stax_vm_trace_event_t event = {.start_ns = start,
                                 .duration_ns = end - start,
                                 .tid = ctx->trace_tid,
                                 .kind = STAX_VM_TRACE_INSTRUCTION,
                                 .index = instruction,
                                 .segment = segment,
                                 .group = -1,
                                 .opcode = stax_vm_opcode_name(record->opcode)};
  event.name = event.opcode;
  if (record->node >= 0) {
    /* A compute instruction is its op ("MatMul"); the others a node gave (its outputs'
     * ALLOC, the views it became) keep their opcode and name the node. */
    const stax_vm_node_t* node = &program->nodes[record->node];
    stax_vm_family_t family = stax_vm_opcode_family(record->opcode);
    if (family == STAX_VM_FAMILY_COMPUTE || family == STAX_VM_FAMILY_COMPUTE_STATIC)
      event.name = stax_op_name((stax_op_t)node->op);
    event.node = stax_vm_program_string(program, node->name);
  }
  stax_vm_trace_add(ctx->trace, &event);
}

void stax_vm_profile_tick(stax_context_t* ctx, int32_t instruction) {
  uint64_t now = stax_vm_trace_now();
  if (ctx->timing_instruction >= 0) {
    if (ctx->options.profile_timing)
      ctx->instruction_nanos[ctx->timing_instruction] += now - ctx->timing_start;
    if (ctx->tracing) stax_vm_trace_instruction(ctx, ctx->timing_instruction, ctx->timing_start, now, -1);
  }
  ctx->timing_instruction = instruction;
  ctx->timing_start = now;
}

void stax_vm_profile_stop(stax_context_t* ctx) {
  if (ctx->timing_instruction >= 0) stax_vm_profile_tick(ctx, -1);
  ctx->timing_instruction = -1;
}

stax_status_t stax_vm_descriptor_dims(const stax_context_t* ctx, int32_t descriptor,
                                      int64_t* out_dims) {
  const stax_program_t* program = ctx->program;
  const stax_vm_descriptor_t* desc = &program->descriptors[descriptor];
  for (int32_t d = 0; d < desc->rank; d++) {
    const stax_vm_dim_t* dim = &program->dims[desc->dims_first + d];
    if (dim->kind == STAX_VM_DIM_CONSTANT) {
      out_dims[d] = dim->value;
      continue;
    }
    const stax_vm_dim_code_ref_t* ref = &program->dim_codes[dim->code];
    stax_status_t status =
        stax_dim_code_eval(program->dim_code_words + ref->first, ref->count, ctx->symbols,
                           program->symbols_count, &out_dims[d]);
    if (status) {
      char text[256];
      stax_vm_descriptor_text(program, descriptor, text, sizeof(text));
      return stax_status_annotate(status, "computing dim %d (%s) of %s", d,
                                  stax_vm_program_string(program, ref->text), text);
    }
    if (out_dims[d] < 0) {
      char text[256];
      stax_vm_descriptor_text(program, descriptor, text, sizeof(text));
      return stax_status_make(STAX_SHAPE_MISMATCH, "dim %d (%s) of %s is negative (%lld)", d,
                              stax_vm_program_string(program, ref->text), text,
                              (long long)out_dims[d]);
    }
  }
  return STAX_OK;
}

stax_status_t stax_vm_read_scalar_bool(const stax_tensor_t* tensor, const char* what,
                                       bool* out_value) {
  *out_value = false;
  if (!tensor) return stax_status_make(STAX_FAILED_PRECONDITION, "%s has no value", what);
  if (stax_tensor_element_count(tensor) != 1)
    return stax_status_make(STAX_SHAPE_MISMATCH, "%s must hold one element, it has %lld (dims %s)",
                            what, (long long)stax_tensor_element_count(tensor),
                            stax_dims_text(tensor->rank, tensor->dims).text);
  uint8_t value = 0;
  stax_convert_elements(tensor->dtype, stax_tensor_data(tensor), STAX_DTYPE_BOOL, &value, 1);
  *out_value = value != 0;
  return STAX_OK;
}

stax_status_t stax_vm_read_scalar_int(const stax_tensor_t* tensor, const char* what,
                                      int64_t* out_value) {
  *out_value = 0;
  if (!tensor) return stax_status_make(STAX_FAILED_PRECONDITION, "%s has no value", what);
  if (!stax_dtype_is_integer(tensor->dtype))
    return stax_status_make(STAX_DTYPE_MISMATCH, "%s must be an integer, it is %s", what,
                            stax_dtype_name(tensor->dtype));
  if (stax_tensor_element_count(tensor) != 1)
    return stax_status_make(STAX_SHAPE_MISMATCH, "%s must hold one element, it has %lld (dims %s)",
                            what, (long long)stax_tensor_element_count(tensor),
                            stax_dims_text(tensor->rank, tensor->dims).text);
  stax_convert_elements(tensor->dtype, stax_tensor_data(tensor), STAX_DTYPE_INT64, out_value, 1);
  return STAX_OK;
}

/* ---- lifetime ------------------------------------------------------------------------------- */

stax_status_t stax_vm_exec_load_tensor(stax_context_t* ctx, const int32_t* ins) {
  stax_vm_set_register(ctx, STAX_VM_OPERAND(ins, 0), ctx->inputs[STAX_VM_OPERAND(ins, 1)]);
  return STAX_OK;
}

stax_status_t stax_vm_exec_load_const(stax_context_t* ctx, const int32_t* ins) {
  stax_vm_set_register(ctx, STAX_VM_OPERAND(ins, 0),
                       ctx->program->constants[STAX_VM_OPERAND(ins, 1)]);
  return STAX_OK;
}

stax_status_t stax_vm_exec_store_tensor(stax_context_t* ctx, const int32_t* ins) {
  int32_t reg = STAX_VM_OPERAND(ins, 0), output = STAX_VM_OPERAND(ins, 1);
  stax_tensor_t* tensor = ctx->registers[reg];
  if (!tensor)
    return stax_status_make(STAX_INTERNAL, "output %d '%s' (register %d) has no value", output,
                            stax_vm_program_string(ctx->program, ctx->program->outputs[output].name),
                            reg);
  /* Callers get the dtype and rank the program declares, whatever the program file said. */
  const stax_vm_io_t* io = &ctx->program->outputs[output];
  if (tensor->is_sequence != stax_vm_register_is_sequence(ctx->program, reg))
    return stax_status_make(STAX_SHAPE_MISMATCH, "output %d '%s' is a %s, but the program says a %s",
                            output, stax_vm_program_string(ctx->program, io->name),
                            tensor->is_sequence ? "sequence" : "tensor",
                            tensor->is_sequence ? "tensor" : "sequence");
  if ((int32_t)tensor->dtype != io->dtype || tensor->rank != io->rank)
    return stax_status_make(STAX_SHAPE_MISMATCH, "output %d '%s' is %s %s, but the program says "
                            "%s rank %d", output, stax_vm_program_string(ctx->program, io->name),
                            stax_dtype_name(tensor->dtype),
                            stax_dims_text(tensor->rank, tensor->dims).text,
                            stax_dtype_name((stax_dtype_t)io->dtype), io->rank);
  stax_tensor_retain(tensor);
  if (ctx->outputs[output]) stax_tensor_release(ctx->outputs[output]);
  ctx->outputs[output] = tensor;
  return STAX_OK;
}

/* "N = 3" for a dim the model computes, "3" for a constant one. */
static void stax_vm_input_dim_text(const stax_context_t* ctx, int32_t reg, int32_t d,
                                   int64_t value, char* buf, size_t size) {
  const stax_program_t* program = ctx->program;
  const stax_vm_descriptor_t* desc = &program->descriptors[program->registers[reg].descriptor];
  if (d < desc->rank && program->dims[desc->dims_first + d].kind == STAX_VM_DIM_CODE) {
    const stax_vm_dim_code_ref_t* ref = &program->dim_codes[program->dims[desc->dims_first + d].code];
    snprintf(buf, size, "%s = %lld", stax_vm_program_string(program, ref->text), (long long)value);
  } else {
    snprintf(buf, size, "%lld", (long long)value);
  }
}

/* A broadcast dim of an output (bcast(N, M), docs/ir.md) fails to evaluate when the inputs
 * do not broadcast at run time. The dim code only knows the two values; the node's live
 * inputs say which inputs they came from, so the message is reworded from them: "Add 'add0':
 * cannot broadcast input 0 'a' dim 0 (N = 3) with input 1 'b' dim 0 (M = 5)". Only an output
 * dim whose code broadcasts and fails is explained, from the input dims aligned with it (right
 * to left, as numpy and MatMul's batch dims align); anything else returns `status` as is. */
static stax_status_t stax_vm_broadcast_fault(const stax_context_t* ctx, const int32_t* ins,
                                             int32_t descriptor, stax_status_t status) {
  const stax_program_t* program = ctx->program;
  if (stax_status_code(status) != STAX_SHAPE_MISMATCH) return status;
  int32_t node_index = program->instructions[STAX_VM_CODE_INDEX(ins)].node;
  if (node_index < 0 || node_index >= program->nodes_count) return status;
  const stax_vm_node_t* node = &program->nodes[node_index];
  const stax_vm_descriptor_t* desc = &program->descriptors[descriptor];
  for (int32_t position = 0; position < desc->rank; position++) {
    const stax_vm_dim_t* dim = &program->dims[desc->dims_first + position];
    if (dim->kind != STAX_VM_DIM_CODE) continue;
    const stax_vm_dim_code_ref_t* ref = &program->dim_codes[dim->code];
    bool broadcasts = false;
    for (int32_t w = 0; w < ref->count && !broadcasts; w++)
      broadcasts = program->dim_code_words[ref->first + w].op == STAX_DIM_CODE_BCAST;
    int64_t value = 0;
    stax_status_t failed =
        broadcasts ? stax_dim_code_eval(program->dim_code_words + ref->first, ref->count,
                                        ctx->symbols, program->symbols_count, &value)
                   : STAX_OK;
    if (failed == STAX_OK) continue;
    stax_status_free(failed);
    int32_t first = -1, first_axis = -1;
    int64_t first_value = 1;
    for (int32_t k = 0; k < node->input_count; k++) {
      int32_t reg = program->node_registers[node->inputs_first + k];
      const stax_tensor_t* t = reg >= 0 ? ctx->registers[reg] : NULL;
      int32_t axis = t ? position - (desc->rank - t->rank) : -1;
      if (axis < 0 || t->dims[axis] == 1) continue;
      if (first < 0) {
        first = k;
        first_axis = axis;
        first_value = t->dims[axis];
        continue;
      }
      if (t->dims[axis] == first_value) continue;
      int32_t first_reg = program->node_registers[node->inputs_first + first];
      char a[320], b[320];
      stax_vm_input_dim_text(ctx, first_reg, first_axis, first_value, a, sizeof(a));
      stax_vm_input_dim_text(ctx, reg, axis, t->dims[axis], b, sizeof(b));
      stax_status_t reworded = stax_status_make(
          STAX_SHAPE_MISMATCH, "%s '%s': cannot broadcast input %d '%s' dim %d (%s) with input %d "
          "'%s' dim %d (%s)",
          stax_op_name((stax_op_t)node->op), stax_vm_program_string(program, node->name), first,
          stax_vm_register_name(program, first_reg), first_axis, a, k,
          stax_vm_register_name(program, reg), axis, b);
      stax_status_free(status);
      return reworded;
    }
  }
  return status;
}

stax_status_t stax_vm_exec_alloc(stax_context_t* ctx, const int32_t* ins, bool pooled) {
  const stax_program_t* program = ctx->program;
  int32_t reg = STAX_VM_OPERAND(ins, 0), descriptor = STAX_VM_OPERAND(ins, 1);
  const stax_vm_descriptor_t* desc = &program->descriptors[descriptor];
  int64_t dims[STAX_MAX_RANK];
  stax_status_t dims_status = stax_vm_descriptor_dims(ctx, descriptor, dims);
  if (dims_status) {
    return stax_status_annotate(stax_vm_broadcast_fault(ctx, ins, descriptor, dims_status),
                                "allocating register %d '%s'", reg,
                                stax_vm_register_name(program, reg));
  }
  stax_tensor_t* tensor = NULL;
  stax_dtype_t dtype = (stax_dtype_t)desc->dtype;
  if (!pooled) {
    ctx->memory_counters.output_allocations++;
    STAX_RETURN_IF_ERROR(stax_tensor_create(ctx->allocator, dtype, desc->rank, dims, &tensor),
                         "allocating register %d '%s'", reg, stax_vm_register_name(program, reg));
  } else {
    int64_t count = 0;
    STAX_RETURN_IF_ERROR(
        stax_shape_validate(stax_vm_register_name(program, reg), desc->rank, dims, &count));
    size_t element_size = stax_dtype_size(dtype);
    if (count > INT64_MAX / (int64_t)element_size)
      return stax_status_make(STAX_OUT_OF_RANGE, "register %d '%s' with dims %s is too large", reg,
                              stax_vm_register_name(program, reg),
                              stax_dims_text(desc->rank, dims).text);
    ctx->memory_counters.temp_bytes += (uint64_t)count * element_size;
    STAX_RETURN_IF_ERROR(stax_vm_memory_place(ctx, reg, dtype, desc->rank, dims,
                                              (size_t)count * element_size, &tensor),
                         "allocating register %d '%s'", reg, stax_vm_register_name(program, reg));
    if (tensor) {
      ctx->registers[reg] = tensor; /* placing emptied the register */
      return STAX_OK;
    }
    ctx->memory_counters.temp_allocations++;
    stax_buffer_t* buffer = NULL;
    STAX_RETURN_IF_ERROR(stax_buffer_allocate_pooled((size_t)count * element_size, &buffer),
                         "allocating register %d '%s' with dims %s", reg,
                         stax_vm_register_name(program, reg), stax_dims_text(desc->rank, dims).text);
    int64_t strides[STAX_MAX_RANK];
    stax_shape_contiguous_strides(desc->rank, dims, strides);
    stax_status_t status = stax_tensor_make_view(ctx->allocator, buffer, dtype, desc->rank, dims,
                                                 strides, 0, &tensor);
    stax_buffer_release(buffer); /* the tensor holds its own reference */
    STAX_RETURN_IF_ERROR(status);
  }
  stax_vm_take_register(ctx, reg, tensor);
  return STAX_OK;
}

stax_status_t stax_vm_exec_move(stax_context_t* ctx, const int32_t* ins) {
  int32_t dst = STAX_VM_OPERAND(ins, 0), src = STAX_VM_OPERAND(ins, 1);
  if (!ctx->registers[src])
    return stax_status_make(STAX_INTERNAL, "register %d '%s' has no value to move", src,
                            stax_vm_register_name(ctx->program, src));
  stax_vm_set_register(ctx, dst, ctx->registers[src]);
  return STAX_OK;
}

/* ---- compute -------------------------------------------------------------------------------- */

/* A preallocated output is written in place, so it must be contiguous and held by nobody
 * else: always true of what ALLOC_TENSOR made, but a hostile program could name a register
 * holding a view of an input or a constant. */
static bool stax_vm_writable(const stax_tensor_t* tensor) {
  return atomic_load(&tensor->refcount) == 1 && atomic_load(&tensor->buffer->refcount) == 1 &&
         stax_tensor_is_contiguous(tensor);
}

/* Values a kernel or host function produced have their register's dtype and rank, so every
 * live register agrees with its descriptor (what the view and shape instructions rely on). */
static stax_status_t stax_vm_check_produced(const stax_context_t* ctx, int32_t reg) {
  const stax_program_t* program = ctx->program;
  const stax_tensor_t* tensor = ctx->registers[reg];
  const stax_vm_descriptor_t* desc = &program->descriptors[program->registers[reg].descriptor];
  bool sequence = (desc->flags & STAX_VM_DESCRIPTOR_SEQUENCE) != 0;
  if (tensor->is_sequence != sequence)
    return stax_status_make(STAX_SHAPE_MISMATCH, "produced a %s for register %d '%s', which holds "
                            "%ss", tensor->is_sequence ? "sequence" : "tensor", reg,
                            stax_vm_register_name(program, reg), sequence ? "sequence" : "tensor");
  if ((int32_t)tensor->dtype == desc->dtype && tensor->rank == desc->rank) return STAX_OK;
  return stax_status_make(STAX_SHAPE_MISMATCH,
                          "produced %s %s for register %d '%s', but the program says %s rank %d",
                          stax_dtype_name(tensor->dtype),
                          stax_dims_text(tensor->rank, tensor->dims).text, reg,
                          stax_vm_register_name(program, reg),
                          stax_dtype_name((stax_dtype_t)desc->dtype), desc->rank);
}

stax_status_t stax_vm_exec_compute(stax_context_t* ctx, const int32_t* ins) {
  const stax_program_t* program = ctx->program;
  int32_t node_index = STAX_VM_OPERAND(ins, 0);
  const int32_t* input_list = &STAX_VM_OPERAND(ins, 1);
  int32_t input_count = input_list[0];
  const int32_t* output_list = input_list + 1 + input_count;
  int32_t output_count = output_list[0];
  const stax_node_t* node = &program->kernel_nodes[node_index];
  stax_kernel_fn kernel = stax_kernel_for_op(node->op);
  if (!kernel)
    return stax_status_make(STAX_UNIMPLEMENTED, "no kernel for %s", stax_op_name(node->op));
  bool kernel_allocates = STAX_VM_CODE_KERNEL_ALLOCATES(ins);
  int32_t required = stax_op_min_inputs(node->op);
  for (int32_t k = 0; k < input_count; k++) {
    int32_t reg = input_list[1 + k];
    ctx->call_inputs[k] = reg >= 0 ? ctx->registers[reg] : NULL;
    if (k < required && !ctx->call_inputs[k])
      return stax_status_make(STAX_INTERNAL, "input %d (register %d '%s') has no value", k, reg,
                              stax_vm_register_name(program, reg));
  }
  for (int32_t k = 0; k < output_count; k++) {
    int32_t reg = output_list[1 + k];
    if (kernel_allocates) stax_vm_take_register(ctx, reg, NULL);
    if (ctx->registers[reg] && !stax_vm_writable(ctx->registers[reg]))
      return stax_status_make(STAX_INTERNAL,
                              "output %d (register %d '%s') holds a shared or strided value; the "
                              "kernel cannot write into it",
                              k, reg, stax_vm_register_name(program, reg));
  }
  /* Preallocated outputs get an extra reference for the call: a kernel that fails may release
   * whatever is in its output array, and the register must stay valid either way. */
  for (int32_t k = 0; k < output_count; k++) {
    stax_tensor_t* previous = ctx->registers[output_list[1 + k]];
    if (previous) stax_tensor_retain(previous);
    ctx->call_previous[k] = previous;
    ctx->call_outputs[k] = previous;
  }
  stax_kernel_call_t call = {
      .node = node,
      .allocator = ctx->allocator,
      .pool = ctx->pool,
      .input_count = input_count,
      .inputs = ctx->call_inputs,
      .output_count = output_count,
      .outputs = ctx->call_outputs,
  };
  stax_status_t status = kernel(&call);
  for (int32_t k = 0; k < output_count; k++) {
    stax_tensor_t* previous = ctx->call_previous[k];
    stax_tensor_t* produced = ctx->call_outputs[k];
    if (status == STAX_OK) {
      if (produced != previous) {
        if (previous) stax_tensor_release(previous);
        stax_vm_take_register(ctx, output_list[1 + k], produced);
      } else if (previous) {
        stax_tensor_release(previous);
      }
    } else {
      if (produced) stax_tensor_release(produced);
      if (produced != previous && previous) stax_tensor_release(previous);
    }
  }
  STAX_RETURN_IF_ERROR(status);
  for (int32_t k = 0; k < output_count; k++) {
    int32_t reg = output_list[1 + k];
    if (!ctx->registers[reg])
      return stax_status_make(STAX_INTERNAL, "the %s kernel did not set output %d",
                              stax_op_name(node->op), k);
    STAX_RETURN_IF_ERROR(stax_vm_check_produced(ctx, reg), "%s kernel output %d",
                         stax_op_name(node->op), k);
  }
  return STAX_OK;
}

stax_status_t stax_vm_exec_call_func(stax_context_t* ctx, const int32_t* ins, int32_t* out_next) {
  const stax_program_t* program = ctx->program;
  int32_t function = STAX_VM_OPERAND(ins, 0);
  *out_next = -1;
  if (function == ctx->jit_function) {
    /* A compiled segment allocates its outputs before its kernels and frees after them, an
     * order the memory plan's live ranges do not model: its values take pool memory. */
    ctx->plan_bypass++;
    stax_status_t status = stax_vm_jit_segment_call(ctx, out_next);
    ctx->plan_bypass--;
    return status;
  }
  const int32_t* input_list = &STAX_VM_OPERAND(ins, 1);
  int32_t input_count = input_list[0];
  const int32_t* output_list = input_list + 1 + input_count;
  int32_t output_count = output_list[0];
  for (int32_t k = 0; k < input_count; k++) {
    int32_t reg = input_list[1 + k];
    ctx->call_inputs[k] = reg >= 0 ? ctx->registers[reg] : NULL;
  }
  for (int32_t k = 0; k < output_count; k++) ctx->call_outputs[k] = NULL;
  const char* name = stax_vm_program_string(program, program->functions[function]);
  stax_status_t status = ctx->functions[function](ctx->function_data[function], input_count,
                                                  ctx->call_inputs, output_count,
                                                  ctx->call_outputs);
  for (int32_t k = 0; k < output_count && status == STAX_OK; k++) {
    if (!ctx->call_outputs[k])
      status = stax_status_make(STAX_INTERNAL, "host function '%s' did not set output %d", name, k);
  }
  for (int32_t k = 0; k < output_count; k++) {
    stax_tensor_t* produced = ctx->call_outputs[k];
    ctx->call_outputs[k] = NULL;
    if (status) {
      if (produced) stax_tensor_release(produced);
    } else {
      stax_vm_take_register(ctx, output_list[1 + k], produced);
    }
  }
  for (int32_t k = 0; k < output_count && status == STAX_OK; k++)
    status = stax_vm_check_produced(ctx, output_list[1 + k]);
  STAX_RETURN_IF_ERROR(status, "host function '%s'", name);
  return STAX_OK;
}

/* ---- jumps -------------------------------------------------------------------------------- */

stax_status_t stax_vm_exec_jump_if_false(stax_context_t* ctx, const int32_t* ins, bool* out_jump) {
  int32_t reg = STAX_VM_OPERAND(ins, 0);
  bool value = false;
  char what[128];
  snprintf(what, sizeof(what), "condition register %d '%s'", reg,
           stax_vm_register_name(ctx->program, reg));
  STAX_RETURN_IF_ERROR(stax_vm_read_scalar_bool(ctx->registers[reg], what, &value));
  *out_jump = !value;
  return STAX_OK;
}

stax_status_t stax_vm_exec_shape_unmatched(stax_context_t* ctx, const int32_t* ins,
                                           bool* out_jump) {
  const stax_program_t* program = ctx->program;
  const stax_vm_signature_t* signature = &program->signatures[STAX_VM_OPERAND(ins, 0)];
  *out_jump = false;
  if (signature->count == STAX_VM_SIGNATURE_JIT) {
    if (!ctx->jit) {
      *out_jump = true;
      return STAX_OK;
    }
    return stax_vm_jit_segment_guard(ctx, signature->first, out_jump);
  }
  for (int32_t e = 0; e < signature->count; e++) {
    const stax_vm_signature_entry_t* entry = &program->signature_entries[signature->first + e];
    const stax_tensor_t* tensor = ctx->registers[entry->reg];
    if (!tensor || (int32_t)tensor->dtype != entry->dtype || tensor->rank != entry->rank) {
      *out_jump = true;
      return STAX_OK;
    }
    const int64_t* values = program->signature_values + entry->values_first;
    for (int32_t d = 0; d < entry->rank; d++) {
      if (tensor->dims[d] != values[d] ||
          ((entry->flags & STAX_VM_SIGNATURE_CHECK_STRIDES) &&
           tensor->strides[d] != values[entry->rank + d])) {
        *out_jump = true;
        return STAX_OK;
      }
    }
  }
  return STAX_OK;
}
