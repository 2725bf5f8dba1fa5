/* The program object: lifetime (create, retain, release), the table builder, finalization
 * (segments, derivations, emission, link, verification), the link step that derives the
 * kernels' view of each node from the tables, and the public input/output accessors. */
#include <stdio.h>
#include <string.h>

#include "runtime/tensor_internal.h"
#include "passes/pipeline.h"
#include "vm/program.h"
#include "vm/memory_plan.h"
#include "vm/jit_tier.h"

/* ---- tables ----------------------------------------------------------------------------- */

stax_status_t stax_vm_table_reserve(stax_allocator_t allocator, void** data, int32_t* capacity,
                                    int32_t count, int32_t extra, size_t element_size) {
  if (extra < 0 || count > INT32_MAX - extra)
    return stax_status_make(STAX_OUT_OF_RANGE, "program table exceeds %d entries", INT32_MAX);
  int32_t needed = count + extra;
  if (needed <= *capacity) return STAX_OK;
  int64_t grown = *capacity > 0 ? (int64_t)*capacity * 2 : 16;
  if (grown < needed) grown = needed;
  if (grown > INT32_MAX) grown = INT32_MAX;
  if (*data == NULL) {
    STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, (size_t)grown * element_size, data));
  } else {
    STAX_RETURN_IF_ERROR(stax_allocator_realloc(allocator, (size_t)*capacity * element_size,
                                                (size_t)grown * element_size, data));
  }
  *capacity = (int32_t)grown;
  return STAX_OK;
}

stax_status_t stax_vm_table_append(stax_allocator_t allocator, void** data, int32_t* count,
                                   int32_t* capacity, size_t element_size, const void* items,
                                   int32_t n, int32_t* out_first) {
  if (out_first) *out_first = -1;
  STAX_RETURN_IF_ERROR(stax_vm_table_reserve(allocator, data, capacity, *count, n, element_size));
  if (n > 0 && items)
    memcpy((char*)*data + (size_t)*count * element_size, items, (size_t)n * element_size);
  else if (n > 0)
    memset((char*)*data + (size_t)*count * element_size, 0, (size_t)n * element_size);
  if (out_first) *out_first = *count;
  *count += n;
  return STAX_OK;
}

/* ---- lifetime --------------------------------------------------------------------------- */

stax_status_t stax_vm_program_create(stax_allocator_t allocator, stax_program_t** out_program) {
  *out_program = NULL;
  stax_program_t* program = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(allocator, 1, sizeof(*program), (void**)&program));
  atomic_init(&program->refcount, 1);
  program->allocator = allocator;
  stax_arena_init(&program->link_arena, allocator, 0);
  stax_status_t status =
      stax_hash_map_create(allocator, STAX_HASH_KEY_STRING, &program->string_index);
  if (status) {
    stax_program_release(program);
    return status;
  }
  *out_program = program;
  return STAX_OK;
}

void stax_program_retain(stax_program_t* program) {
  if (program) atomic_fetch_add(&program->refcount, 1);
}

void stax_program_release(stax_program_t* program) {
  if (!program || atomic_fetch_sub(&program->refcount, 1) != 1) return;
  stax_vm_jit_cache_destroy(program);
  for (int32_t i = 0; i < program->constants_count; i++)
    if (program->constants[i]) stax_tensor_release(program->constants[i]);
#define STAX_VM_TABLE_FREE(type, name)                                               \
  if (program->name)                                                                 \
    stax_allocator_free(program->allocator, program->name,                           \
                        (size_t)program->capacity.name * sizeof(*program->name));
  STAX_VM_PROGRAM_TABLES(STAX_VM_TABLE_FREE)
#undef STAX_VM_TABLE_FREE
  stax_arena_deinit(&program->link_arena);
  if (program->string_index) stax_hash_map_destroy(program->string_index);
  stax_pass_log_free(program->pass_log);
  stax_allocator_free(program->allocator, program, sizeof(*program));
}

int32_t stax_program_pass_report_count(const stax_program_t* program) {
  return program && program->pass_log ? program->pass_log->count : 0;
}

stax_status_t stax_program_pass_report(const stax_program_t* program, int32_t index,
                                       stax_pass_report_t* out_report) {
  if (!program || !out_report)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_program_pass_report: %s is NULL",
                            program ? "out_report" : "program");
  int32_t count = stax_program_pass_report_count(program);
  if (index < 0 || index >= count)
    return stax_status_make(STAX_OUT_OF_RANGE,
                            "pass report index %d is out of range (the program has %d)", index,
                            count);
  *out_report = program->pass_log->entries[index];
  return STAX_OK;
}

void stax_program_pass_totals(const stax_program_t* program, int32_t* out_nodes_before,
                              int32_t* out_nodes_after, int32_t* out_rounds,
                              int32_t* out_instructions_removed) {
  const stax_pass_log_t* log = program ? program->pass_log : NULL;
  if (out_instructions_removed) *out_instructions_removed = log ? log->instructions_removed : 0;
  if (out_nodes_before) *out_nodes_before = log ? log->nodes_before : -1;
  if (out_nodes_after) *out_nodes_after = log ? log->nodes_after : -1;
  if (out_rounds) *out_rounds = log ? log->rounds : 0;
}

/* ---- builder ---------------------------------------------------------------------------- */

stax_status_t stax_vm_program_add_string(stax_program_t* program, const char* text,
                                         int32_t* out_offset) {
  *out_offset = -1;
  if (!text) return STAX_OK;
  uintptr_t existing = 0;
  if (program->string_index && stax_hash_map_get_string(program->string_index, text, &existing)) {
    *out_offset = (int32_t)existing;
    return STAX_OK;
  }
  size_t length = strlen(text);
  if (length >= (size_t)INT32_MAX)
    return stax_status_make(STAX_OUT_OF_RANGE, "string of %zu bytes is too long", length);
  int32_t first = -1;
  STAX_RETURN_IF_ERROR(STAX_VM_APPEND_N(program, strings, text, (int32_t)length + 1, &first));
  if (program->string_index)
    STAX_RETURN_IF_ERROR(
        stax_hash_map_put_string(program->string_index, text, (uintptr_t)first));
  *out_offset = first;
  return STAX_OK;
}

const char* stax_vm_program_string(const stax_program_t* program, int32_t offset) {
  if (offset < 0 || offset >= program->strings_count) return "";
  return program->strings + offset;
}

stax_status_t stax_vm_program_add_descriptor(stax_program_t* program, stax_dtype_t dtype,
                                             int32_t rank, stax_vm_layout_t layout,
                                             const stax_vm_dim_t* dims,
                                             int32_t* out_descriptor) {
  *out_descriptor = -1;
  stax_vm_descriptor_t descriptor = {.dtype = dtype, .rank = rank, .layout = layout};
  descriptor.flags = STAX_VM_DESCRIPTOR_STATIC;
  for (int32_t d = 0; d < rank; d++)
    if (dims[d].kind != STAX_VM_DIM_CONSTANT) descriptor.flags &= ~STAX_VM_DESCRIPTOR_STATIC;
  STAX_RETURN_IF_ERROR(STAX_VM_APPEND_N(program, dims, dims, rank, &descriptor.dims_first));
  if (rank == 0) descriptor.dims_first = program->dims_count;
  return STAX_VM_APPEND(program, descriptors, &descriptor, out_descriptor);
}

stax_status_t stax_vm_program_add_static_descriptor(stax_program_t* program, stax_dtype_t dtype,
                                                    int32_t rank, const int64_t* dims,
                                                    stax_vm_layout_t layout,
                                                    int32_t* out_descriptor) {
  *out_descriptor = -1;
  if (rank < 0 || rank > STAX_MAX_RANK)
    return stax_status_make(STAX_INVALID_ARGUMENT, "descriptor rank %d is out of range", rank);
  stax_vm_dim_t entries[STAX_MAX_RANK];
  for (int32_t d = 0; d < rank; d++)
    entries[d] = (stax_vm_dim_t){.kind = STAX_VM_DIM_CONSTANT,
                                 .code = -1,
                                 .value = dims[d],
                                 .derivation = STAX_VM_DERIVED_FROM_GUARDS};
  return stax_vm_program_add_descriptor(program, dtype, rank, layout, entries, out_descriptor);
}

stax_status_t stax_vm_program_add_register(stax_program_t* program, const char* name,
                                           int32_t descriptor, uint32_t flags,
                                           int32_t* out_register) {
  *out_register = -1;
  stax_vm_register_t reg = {.descriptor = descriptor, .flags = flags};
  STAX_RETURN_IF_ERROR(stax_vm_program_add_string(program, name, &reg.name));
  return STAX_VM_APPEND(program, registers, &reg, out_register);
}

stax_status_t stax_vm_program_add_instruction(stax_program_t* program, int32_t opcode,
                                              int32_t node, const int32_t* operands,
                                              int32_t operand_count, int32_t* out_index) {
  if (out_index) *out_index = -1;
  stax_vm_instruction_t instruction = {
      .opcode = opcode, .node = node, .operand_count = operand_count, .segment = -1};
  STAX_RETURN_IF_ERROR(
      STAX_VM_APPEND_N(program, operands, operands, operand_count, &instruction.operand_first));
  if (operand_count == 0) instruction.operand_first = program->operands_count;
  return STAX_VM_APPEND(program, instructions, &instruction, out_index);
}

stax_status_t stax_vm_program_add_io(stax_program_t* program, bool is_output, const char* name,
                                     stax_dtype_t dtype, int32_t rank,
                                     const char* const* dim_texts, int32_t reg,
                                     int32_t* out_index) {
  if (out_index) *out_index = -1;
  stax_vm_io_t io = {.dtype = dtype, .rank = rank, .reg = reg};
  STAX_RETURN_IF_ERROR(stax_vm_program_add_string(program, name, &io.name));
  io.dim_texts_first = program->io_dim_texts_count;
  for (int32_t d = 0; d < rank; d++) {
    int32_t text = -1;
    STAX_RETURN_IF_ERROR(
        stax_vm_program_add_string(program, dim_texts && dim_texts[d] ? dim_texts[d] : "?", &text));
    STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, io_dim_texts, &text, NULL));
  }
  if (is_output) return STAX_VM_APPEND(program, outputs, &io, out_index);
  return STAX_VM_APPEND(program, inputs, &io, out_index);
}

stax_status_t stax_vm_program_add_constant(stax_program_t* program, stax_tensor_t* tensor,
                                           int32_t* out_index) {
  *out_index = -1;
  for (int32_t i = 0; i < program->constants_count; i++) {
    if (program->constants[i] == tensor) {
      *out_index = i;
      return STAX_OK;
    }
  }
  STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, constants, &tensor, out_index));
  stax_tensor_retain(tensor);
  return STAX_OK;
}

stax_status_t stax_vm_program_add_function(stax_program_t* program, const char* name,
                                           int32_t* out_index) {
  *out_index = -1;
  int32_t text = -1;
  STAX_RETURN_IF_ERROR(stax_vm_program_add_string(program, name, &text));
  for (int32_t i = 0; i < program->functions_count; i++) {
    if (program->functions[i] == text) {
      *out_index = i;
      return STAX_OK;
    }
  }
  return STAX_VM_APPEND(program, functions, &text, out_index);
}

stax_status_t stax_vm_program_add_signature(stax_program_t* program, int32_t count,
                                            const stax_vm_signature_entry_t* entries,
                                            const int64_t* const* values, int32_t* out_index) {
  *out_index = -1;
  stax_vm_signature_t signature = {.first = program->signature_entries_count, .count = count};
  for (int32_t k = 0; k < count; k++) {
    stax_vm_signature_entry_t entry = entries[k];
    if (entry.rank < 0 || entry.rank > STAX_MAX_RANK)
      return stax_status_make(STAX_INVALID_ARGUMENT, "signature entry %d has rank %d", k,
                              entry.rank);
    int32_t value_count =
        entry.rank * ((entry.flags & STAX_VM_SIGNATURE_CHECK_STRIDES) ? 2 : 1);
    STAX_RETURN_IF_ERROR(STAX_VM_APPEND_N(program, signature_values, values[k], value_count,
                                          &entry.values_first));
    if (value_count == 0) entry.values_first = program->signature_values_count;
    STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, signature_entries, &entry, NULL));
  }
  return STAX_VM_APPEND(program, signatures, &signature, out_index);
}

/* ---- finalize and link -------------------------------------------------------------------- */

void stax_vm_program_measure(stax_program_t* program) {
  int32_t longest = 0;
  for (int32_t i = 0; i < program->instructions_count; i++) {
    const stax_vm_instruction_t* ins = &program->instructions[i];
    const char* format = stax_vm_opcode_format(ins->opcode);
    int32_t at = ins->operand_first;
    for (const char* kind = format; *kind && at < ins->operand_first + ins->operand_count;
         kind++) {
      if (*kind == STAX_VM_OPERAND_REGISTER_LIST || *kind == STAX_VM_OPERAND_IMMEDIATE_LIST) {
        int32_t count = program->operands[at];
        if (count > longest) longest = count;
        at += 1 + (count > 0 ? count : 0);
      } else {
        at++;
      }
    }
  }
  for (int32_t l = 0; l < program->loops_count; l++) {
    const stax_vm_loop_t* loop = &program->loops[l];
    if (loop->carried_count > longest) longest = loop->carried_count;
    if (loop->scan_count > longest) longest = loop->scan_count;
  }
  program->max_list_length = longest;
  int32_t binds = 0;
  for (int32_t b = 0; b < program->shape_bindings_count; b++)
    if (program->shape_bindings[b].kind != STAX_VM_BINDING_CHECK) binds++;
  program->max_shape_stack = binds;
}

stax_status_t stax_vm_program_finalize(stax_program_t* program,
                                       const stax_vm_finalize_options_t* options) {
  bool profile = options ? options->insert_profile_points : true;
  STAX_RETURN_IF_ERROR(stax_vm_program_build_segments(program, profile));
  stax_vm_program_compute_derivations(program);
  stax_vm_program_measure(program);
  STAX_RETURN_IF_ERROR(stax_vm_emit(program));
  STAX_RETURN_IF_ERROR(stax_vm_verify(program), "verifying the compiled program");
  STAX_RETURN_IF_ERROR(stax_vm_program_link(program));
  if (program->string_index) {
    stax_hash_map_destroy(program->string_index);
    program->string_index = NULL;
  }
  return STAX_OK;
}

static stax_status_t stax_vm_link_attr(stax_program_t* program, const stax_vm_attr_t* attr,
                                       stax_node_attr_t* out) {
  memset(out, 0, sizeof(*out));
  out->name = stax_vm_program_string(program, attr->name);
  out->type = (stax_attr_type_t)attr->type;
  switch (attr->type) {
    case STAX_ATTR_INT: out->value.i = attr->i; break;
    case STAX_ATTR_FLOAT: out->value.f = attr->f; break;
    case STAX_ATTR_STRING: out->value.s = stax_vm_program_string(program, attr->first); break;
    case STAX_ATTR_INTS:
      out->value.ints.count = attr->count;
      out->value.ints.data = attr->count > 0 ? program->attr_ints + attr->first : NULL;
      break;
    case STAX_ATTR_FLOATS:
      out->value.floats.count = attr->count;
      out->value.floats.data = attr->count > 0 ? program->attr_floats + attr->first : NULL;
      break;
    case STAX_ATTR_STRINGS: {
      const char** texts = NULL;
      if (attr->count > 0) {
        STAX_RETURN_IF_ERROR(stax_arena_alloc(&program->link_arena,
                                              (size_t)attr->count * sizeof(*texts), 0,
                                              (void**)&texts));
        for (int32_t k = 0; k < attr->count; k++)
          texts[k] = stax_vm_program_string(program, program->attr_strings[attr->first + k]);
      }
      out->value.strings.count = attr->count;
      out->value.strings.data = texts;
      break;
    }
    case STAX_ATTR_TENSOR: out->value.tensor = program->constants[attr->first]; break;
    case STAX_ATTR_GRAPH: out->value.graph = NULL; break; /* compiled inline */
    default: break;
  }
  return STAX_OK;
}

stax_status_t stax_vm_program_link(stax_program_t* program) {
  /* A finished program's constants never change again: kernels may keep data derived from
   * them (the GEMM core's packed weights). */
  for (int32_t c = 0; c < program->constants_count; c++)
    if (program->constants[c]) stax_buffer_set_immutable(program->constants[c]->buffer);
  stax_arena_deinit(&program->link_arena);
  stax_arena_init(&program->link_arena, program->allocator, 0);
  program->kernel_nodes = NULL;
  program->memory_plan = NULL;
  program->linked = false;
  if (program->nodes_count == 0) {
    STAX_RETURN_IF_ERROR(stax_vm_memory_plan_build(program));
    program->linked = true;
    return STAX_OK;
  }
  stax_node_t* nodes = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(&program->link_arena,
                                        (size_t)program->nodes_count * sizeof(*nodes), 0,
                                        (void**)&nodes));
  for (int32_t n = 0; n < program->nodes_count; n++) {
    const stax_vm_node_t* source = &program->nodes[n];
    stax_node_t* node = &nodes[n];
    memset(node, 0, sizeof(*node));
    node->op = (stax_op_t)source->op;
    node->name = stax_vm_program_string(program, source->name);
    node->input_count = source->input_count;
    node->inputs = STAX_VM_TABLE_AT(program->node_registers, source->inputs_first);
    node->output_count = source->output_count;
    node->outputs = STAX_VM_TABLE_AT(program->node_registers, source->outputs_first);
    node->attr_count = source->attr_count;
    if (source->attr_count > 0) {
      STAX_RETURN_IF_ERROR(stax_arena_alloc(&program->link_arena,
                                            (size_t)source->attr_count * sizeof(*node->attrs),
                                            0, (void**)&node->attrs));
      for (int32_t a = 0; a < source->attr_count; a++)
        STAX_RETURN_IF_ERROR(stax_vm_link_attr(program, &program->attrs[source->attrs_first + a],
                                               &node->attrs[a]));
    }
  }
  program->kernel_nodes = nodes;
  STAX_RETURN_IF_ERROR(stax_vm_memory_plan_build(program));
  program->linked = true;
  return STAX_OK;
}

/* ---- public accessors ----------------------------------------------------------------- */

static const stax_vm_io_t* stax_vm_io(const stax_program_t* program, bool output, int32_t i) {
  if (!program) return NULL;
  if (output) return i >= 0 && i < program->outputs_count ? &program->outputs[i] : NULL;
  return i >= 0 && i < program->inputs_count ? &program->inputs[i] : NULL;
}

int32_t stax_program_input_count(const stax_program_t* program) {
  return program ? program->inputs_count : 0;
}
int32_t stax_program_output_count(const stax_program_t* program) {
  return program ? program->outputs_count : 0;
}
const char* stax_program_input_name(const stax_program_t* program, int32_t index) {
  const stax_vm_io_t* io = stax_vm_io(program, false, index);
  return io ? stax_vm_program_string(program, io->name) : NULL;
}
const char* stax_program_output_name(const stax_program_t* program, int32_t index) {
  const stax_vm_io_t* io = stax_vm_io(program, true, index);
  return io ? stax_vm_program_string(program, io->name) : NULL;
}
stax_dtype_t stax_program_input_dtype(const stax_program_t* program, int32_t index) {
  const stax_vm_io_t* io = stax_vm_io(program, false, index);
  return io ? (stax_dtype_t)io->dtype : STAX_DTYPE_INVALID;
}
stax_dtype_t stax_program_output_dtype(const stax_program_t* program, int32_t index) {
  const stax_vm_io_t* io = stax_vm_io(program, true, index);
  return io ? (stax_dtype_t)io->dtype : STAX_DTYPE_INVALID;
}
int32_t stax_program_input_rank(const stax_program_t* program, int32_t index) {
  const stax_vm_io_t* io = stax_vm_io(program, false, index);
  return io ? io->rank : -1;
}
int32_t stax_program_output_rank(const stax_program_t* program, int32_t index) {
  const stax_vm_io_t* io = stax_vm_io(program, true, index);
  return io ? io->rank : -1;
}
bool stax_program_input_is_sequence(const stax_program_t* program, int32_t index) {
  const stax_vm_io_t* io = stax_vm_io(program, false, index);
  return io && stax_vm_register_is_sequence(program, io->reg);
}
bool stax_program_output_is_sequence(const stax_program_t* program, int32_t index) {
  const stax_vm_io_t* io = stax_vm_io(program, true, index);
  return io && stax_vm_register_is_sequence(program, io->reg);
}

static int stax_vm_io_dim_text(const stax_program_t* program, bool output, int32_t index,
                               int32_t dim, char* buf, size_t size) {
  const stax_vm_io_t* io = stax_vm_io(program, output, index);
  if (buf && size) buf[0] = '\0';
  if (!io || dim < 0 || dim >= io->rank) return -1;
  const char* text = stax_vm_program_string(program, program->io_dim_texts[io->dim_texts_first + dim]);
  return snprintf(buf, buf ? size : 0, "%s", text);
}

int stax_program_input_dim_text(const stax_program_t* program, int32_t index, int32_t dim,
                                char* buf, size_t size) {
  return stax_vm_io_dim_text(program, false, index, dim, buf, size);
}
int stax_program_output_dim_text(const stax_program_t* program, int32_t index, int32_t dim,
                                 char* buf, size_t size) {
  return stax_vm_io_dim_text(program, true, index, dim, buf, size);
}
