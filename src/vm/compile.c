/* The compiler driver (stax_program_compile) and its bookkeeping: registers for graph values
 * (one per value; subgraph values share the frame; captures alias the outer register), shape
 * descriptors with dims compiled to dim code, the symbol table and the input guards, the
 * SHAPE_VARIANT tables that bind data-dependent symbols, and the copies of model nodes the
 * program keeps so the graph can be destroyed after compiling. */
#include <stdio.h>
#include <string.h>

#include "ir/dim_internal.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "vm/compile.h"

/* ---- graph maps and registers ------------------------------------------------------------------ */

stax_status_t stax_vm_compiler_map(stax_vm_compiler_t* c, stax_graph_t* graph,
                                   stax_vm_graph_map_t** out_map) {
  *out_map = NULL;
  for (stax_vm_graph_map_t* map = c->maps; map; map = map->next) {
    if (map->graph == graph) {
      *out_map = map;
      return STAX_OK;
    }
  }
  stax_vm_graph_map_t* map = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(c->allocator, 1, sizeof(*map), (void**)&map));
  map->graph = graph;
  map->value_count = stax_graph_value_count(graph);
  stax_status_t status = stax_allocator_malloc(
      c->allocator, (size_t)(map->value_count > 0 ? map->value_count : 1) * sizeof(int32_t),
      (void**)&map->registers);
  if (status) {
    stax_allocator_free(c->allocator, map, sizeof(*map));
    return status;
  }
  for (int32_t v = 0; v < map->value_count; v++) map->registers[v] = -1;
  map->next = c->maps;
  c->maps = map;
  *out_map = map;
  return STAX_OK;
}

stax_status_t stax_vm_compiler_use(stax_vm_compiler_t* c, stax_graph_t* graph,
                                   stax_value_id_t value, int32_t* out_register) {
  *out_register = -1;
  stax_vm_graph_map_t* map = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_compiler_map(c, graph, &map));
  if (value < 0 || value >= map->value_count)
    return stax_status_make(STAX_INVALID_ARGUMENT, "value id %d does not exist", value);
  if (map->registers[value] >= 0) {
    *out_register = map->registers[value];
    return STAX_OK;
  }
  const stax_value_t* info = stax_graph_value(graph, value);
  if ((info->flags & STAX_VALUE_IS_CAPTURE) && graph->parent) {
    int32_t outer = -1;
    STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, graph->parent, info->outer_value, &outer));
    map->registers[value] = outer;
    *out_register = outer;
    return STAX_OK;
  }
  return stax_status_make(STAX_INVALID_ARGUMENT,
                          "value '%s' is used before any node computes it", info->name);
}

static stax_status_t stax_vm_dim_code_index(stax_vm_compiler_t* c, const stax_dim_t* dim,
                                            int32_t* out_code) {
  *out_code = -1;
  uintptr_t cached = 0;
  if (stax_hash_map_get_u64(c->code_cache, (uint64_t)(uintptr_t)dim, &cached)) {
    *out_code = (int32_t)cached - 1;
    return STAX_OK;
  }
  stax_program_t* program = c->program;
  int32_t needed = stax_dim_emit_code(dim, NULL, 0);
  if (needed <= 0) return stax_status_make(STAX_INTERNAL, "a dim compiled to empty code");
  stax_vm_dim_code_ref_t ref = {.count = needed};
  STAX_RETURN_IF_ERROR(STAX_VM_APPEND_N(program, dim_code_words, NULL, needed, &ref.first));
  stax_dim_emit_code(dim, program->dim_code_words + ref.first, needed);
  char text[512];
  stax_dim_print(c->shape, dim, text, sizeof(text));
  STAX_RETURN_IF_ERROR(stax_vm_program_add_string(program, text, &ref.text));
  int32_t index = -1;
  STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, dim_codes, &ref, &index));
  STAX_RETURN_IF_ERROR(stax_vm_table_reserve(c->allocator, (void**)&c->code_dims,
                                             &c->code_dims_capacity, index, 1,
                                             sizeof(*c->code_dims)));
  c->code_dims[index] = dim;
  STAX_RETURN_IF_ERROR(
      stax_hash_map_put_u64(c->code_cache, (uint64_t)(uintptr_t)dim, (uintptr_t)index + 1));
  *out_code = index;
  return STAX_OK;
}

static stax_status_t stax_vm_resolve(stax_vm_compiler_t* c, const stax_dim_t* dim,
                                     const stax_dim_t** out) {
  *out = stax_dim_resolve(c->shape, dim);
  if (!*out) {
    stax_status_t status = stax_shape_ctx_take_error(c->shape);
    return status ? status : stax_status_make(STAX_INTERNAL, "a dim could not be resolved");
  }
  return STAX_OK;
}

static stax_status_t stax_vm_compile_descriptor(stax_vm_compiler_t* c, const stax_value_t* value,
                                                stax_vm_layout_t layout, int32_t* out_descriptor) {
  if (value->rank < 0 || value->rank > STAX_MAX_RANK)
    return stax_status_make(STAX_UNIMPLEMENTED, "value '%s' has rank %d; the VM handles up to %d",
                            value->name, value->rank, STAX_MAX_RANK);
  stax_vm_dim_t dims[STAX_MAX_RANK];
  for (int32_t d = 0; d < value->rank; d++) {
    const stax_dim_t* resolved = NULL;
    STAX_RETURN_IF_ERROR(stax_vm_resolve(c, value->dims[d], &resolved), "value '%s' dim %d",
                         value->name, d);
    dims[d] = (stax_vm_dim_t){.kind = STAX_VM_DIM_CONSTANT, .code = -1,
                              .derivation = STAX_VM_DERIVED_FROM_GUARDS};
    if (stax_dim_is_const(resolved)) {
      dims[d].value = stax_dim_const_value(resolved);
    } else {
      dims[d].kind = STAX_VM_DIM_CODE;
      STAX_RETURN_IF_ERROR(stax_vm_dim_code_index(c, resolved, &dims[d].code));
    }
  }
  STAX_RETURN_IF_ERROR(stax_vm_program_add_descriptor(c->program, value->dtype, value->rank,
                                                      layout, dims, out_descriptor));
  if (value->is_sequence)
    c->program->descriptors[*out_descriptor].flags |= STAX_VM_DESCRIPTOR_SEQUENCE;
  return STAX_OK;
}

static stax_status_t stax_vm_reserve_register_info(stax_vm_compiler_t* c, int32_t count) {
  return stax_vm_table_reserve(c->allocator, (void**)&c->register_info, &c->register_capacity, 0,
                               count, sizeof(*c->register_info));
}

stax_status_t stax_vm_compiler_define(stax_vm_compiler_t* c, stax_graph_t* graph,
                                      stax_value_id_t value, stax_vm_layout_t layout,
                                      int32_t* out_register) {
  *out_register = -1;
  stax_vm_graph_map_t* map = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_compiler_map(c, graph, &map));
  if (value < 0 || value >= map->value_count)
    return stax_status_make(STAX_INVALID_ARGUMENT, "value id %d does not exist", value);
  if (map->registers[value] >= 0) {
    *out_register = map->registers[value];
    return STAX_OK;
  }
  const stax_value_t* info = stax_graph_value(graph, value);
  int32_t descriptor = -1;
  STAX_RETURN_IF_ERROR(stax_vm_compile_descriptor(c, info, layout, &descriptor));
  uint32_t flags = 0;
  if (graph == c->root && (info->flags & STAX_VALUE_IS_INPUT)) flags |= STAX_VM_REGISTER_INPUT;
  if (graph == c->root && (info->flags & STAX_VALUE_IS_OUTPUT)) flags |= STAX_VM_REGISTER_OUTPUT;
  int32_t reg = -1;
  STAX_RETURN_IF_ERROR(stax_vm_program_add_register(c->program, info->name, descriptor, flags, &reg));
  STAX_RETURN_IF_ERROR(stax_vm_reserve_register_info(c, reg + 1));
  c->register_info[reg] = (stax_vm_register_info_t){.scope = c->current_scope, .no_free = flags != 0};
  map->registers[value] = reg;
  *out_register = reg;
  return STAX_OK;
}

/* A constant's register: loaded once at program start, never freed. */
static stax_status_t stax_vm_define_constant(stax_vm_compiler_t* c, stax_graph_t* graph,
                                             stax_value_id_t value) {
  stax_vm_graph_map_t* map = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_compiler_map(c, graph, &map));
  if (map->registers[value] >= 0) return STAX_OK;
  stax_value_t* info = stax_graph_value(graph, value);
  int32_t reg = -1, constant = -1;
  STAX_RETURN_IF_ERROR(stax_vm_compiler_define(c, graph, value, STAX_VM_LAYOUT_ANY, &reg));
  c->program->registers[reg].flags |= STAX_VM_REGISTER_CONSTANT;
  c->register_info[reg].no_free = true;
  STAX_RETURN_IF_ERROR(stax_vm_program_add_constant(c->program, info->constant, &constant));
  int32_t operands[2] = {reg, constant};
  return stax_vm_compiler_emit(c, STAX_VM_OP_LOAD_CONST, -1, operands, 2, NULL);
}

/* Loads every constant of a graph and its subgraphs: initializers and values folded at build
 * time (outputs of nodes that do not run). */
static stax_status_t stax_vm_load_constants(stax_vm_compiler_t* c, stax_graph_t* graph) {
  /* Only constants something uses: folding leaves the inputs it consumed behind. */
  int32_t* uses = NULL;
  size_t uses_size = (size_t)(graph->value_count > 0 ? graph->value_count : 1) * sizeof(int32_t);
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(c->allocator, uses_size, (void**)&uses));
  stax_graph_count_uses(graph, NULL, uses, NULL);
  stax_status_t status = STAX_OK;
  for (stax_value_id_t v = 0; v < graph->value_count && status == STAX_OK; v++) {
    const stax_value_t* value = &graph->values[v];
    if (!value->constant || (value->flags & (STAX_VALUE_IS_CAPTURE | STAX_VALUE_IS_INPUT))) continue;
    if (value->producer >= 0 && !stax_vm_node_is_folded(graph, &graph->nodes[value->producer]))
      continue;
    if (uses[v] == 0) continue;
    status = stax_vm_define_constant(c, graph, v);
  }
  stax_allocator_free(c->allocator, uses, uses_size);
  STAX_RETURN_IF_ERROR(status);
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    const stax_node_t* node = &graph->nodes[n];
    if (stax_vm_node_is_folded(graph, node)) continue;
    for (int32_t a = 0; a < node->attr_count; a++)
      if (node->attrs[a].type == STAX_ATTR_GRAPH && node->attrs[a].value.graph)
        STAX_RETURN_IF_ERROR(stax_vm_load_constants(c, node->attrs[a].value.graph));
  }
  return STAX_OK;
}

/* ---- instructions and scopes ------------------------------------------------------------------ */

stax_status_t stax_vm_compiler_emit(stax_vm_compiler_t* c, int32_t opcode, int32_t node,
                                    const int32_t* operands, int32_t operand_count,
                                    int32_t* out_index) {
  int32_t index = -1;
  STAX_RETURN_IF_ERROR(
      stax_vm_program_add_instruction(c->program, opcode, node, operands, operand_count, &index));
  STAX_RETURN_IF_ERROR(stax_vm_table_reserve(c->allocator, (void**)&c->instruction_scope,
                                             &c->instruction_capacity, index, 1, sizeof(int32_t)));
  c->instruction_scope[index] = c->current_scope;
  if (out_index) *out_index = index;
  return STAX_OK;
}

void stax_vm_compiler_patch(stax_vm_compiler_t* c, int32_t index, int32_t k, int32_t value) {
  const stax_vm_instruction_t* ins = &c->program->instructions[index];
  c->program->operands[ins->operand_first + k] = value;
}

stax_status_t stax_vm_compiler_new_scope(stax_vm_compiler_t* c, int32_t* out_scope) {
  STAX_RETURN_IF_ERROR(stax_vm_table_reserve(c->allocator, (void**)&c->scopes, &c->scope_capacity,
                                             c->scope_count, 1, sizeof(*c->scopes)));
  c->scopes[c->scope_count] = (stax_vm_scope_t){.parent = c->current_scope, .exit = -1};
  *out_scope = c->scope_count++;
  return STAX_OK;
}

/* ---- symbols and shape variants ------------------------------------------------------------- */

static bool stax_vm_dim_bound(const stax_vm_compiler_t* c, const stax_dim_t* dim) {
  stax_symbol_id_t ids[64];
  int32_t count = stax_dim_symbols(dim, ids, 64);
  if (count > 64) return false;
  for (int32_t k = 0; k < count; k++)
    if (ids[k] < 0 || ids[k] >= c->symbol_count || !c->bound[ids[k]]) return false;
  return true;
}

bool stax_vm_compiler_computable(const stax_vm_compiler_t* c, int32_t reg) {
  const stax_program_t* program = c->program;
  const stax_vm_descriptor_t* desc = &program->descriptors[program->registers[reg].descriptor];
  for (int32_t d = 0; d < desc->rank; d++) {
    const stax_vm_dim_t* dim = &program->dims[desc->dims_first + d];
    if (dim->kind == STAX_VM_DIM_CONSTANT) continue;
    const stax_vm_dim_code_ref_t* ref = &program->dim_codes[dim->code];
    for (int32_t w = 0; w < ref->count; w++) {
      const stax_dim_code_t* word = &program->dim_code_words[ref->first + w];
      if (word->op == STAX_DIM_CODE_SYMBOL &&
          (word->value < 0 || word->value >= c->symbol_count || !c->bound[word->value]))
        return false;
    }
  }
  return true;
}

stax_status_t stax_vm_compiler_content_codes(stax_vm_compiler_t* c, const stax_value_t* value,
                                             int32_t* codes, int32_t* out_count) {
  *out_count = -1;
  if (value->dtype != STAX_DTYPE_INT64 && value->dtype != STAX_DTYPE_INT32) return STAX_OK;
  int32_t count = value->content_count;
  if (!value->content || count < 0 || count > STAX_VM_DIM_VALUES_MAX || value->rank > 1)
    return STAX_OK;
  if (value->rank == 0 && count != 1) return STAX_OK;
  if (value->rank == 1) {
    const stax_dim_t* length = NULL;
    STAX_RETURN_IF_ERROR(stax_vm_resolve(c, value->dims[0], &length));
    if (!stax_dim_is_const(length) || stax_dim_const_value(length) != count) return STAX_OK;
  }
  const stax_dim_t* resolved[STAX_VM_DIM_VALUES_MAX];
  for (int32_t k = 0; k < count; k++) {
    if (!value->content[k]) return STAX_OK;
    STAX_RETURN_IF_ERROR(stax_vm_resolve(c, value->content[k], &resolved[k]));
    if (!stax_vm_dim_bound(c, resolved[k])) return STAX_OK;
  }
  for (int32_t k = 0; k < count; k++)
    STAX_RETURN_IF_ERROR(stax_vm_dim_code_index(c, resolved[k], &codes[k]));
  *out_count = count;
  return STAX_OK;
}

/* scale*S + offset with S a symbol (scale >= 1). */
static bool stax_vm_linear_symbol(const stax_dim_t* d, stax_symbol_id_t* out_symbol,
                                  int64_t* out_scale, int64_t* out_offset) {
  if (d->kind == STAX_DIM_KIND_SYMBOL) {
    *out_symbol = (stax_symbol_id_t)d->value;
    *out_scale = 1;
    *out_offset = 0;
    return true;
  }
  if (d->kind == STAX_DIM_KIND_SUM && d->count == 1 &&
      d->terms[0].monomial->kind == STAX_DIM_KIND_SYMBOL && d->terms[0].coefficient >= 1) {
    *out_symbol = (stax_symbol_id_t)d->terms[0].monomial->value;
    *out_scale = d->terms[0].coefficient;
    *out_offset = d->value;
    return true;
  }
  return false;
}

/* Symbols unified with an expression of bound symbols can be derived; adds one DERIVE entry
 * per such symbol through `add` (guards or shape bindings). */
typedef stax_status_t (*stax_vm_derive_fn)(stax_vm_compiler_t* c, int32_t symbol, int32_t code);

static stax_status_t stax_vm_derive_symbols(stax_vm_compiler_t* c, stax_vm_derive_fn add) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (int32_t s = 0; s < c->symbol_count; s++) {
      if (c->bound[s]) continue;
      const stax_dim_t* symbol = stax_symbol_dim(c->shape, s);
      if (!symbol) continue;
      const stax_dim_t* resolved = NULL;
      STAX_RETURN_IF_ERROR(stax_vm_resolve(c, symbol, &resolved));
      if (resolved == symbol || !stax_vm_dim_bound(c, resolved)) continue;
      int32_t code = -1;
      STAX_RETURN_IF_ERROR(stax_vm_dim_code_index(c, resolved, &code));
      STAX_RETURN_IF_ERROR(add(c, s, code));
      c->bound[s] = 1;
      changed = true;
    }
  }
  return STAX_OK;
}

static stax_status_t stax_vm_add_derive_binding(stax_vm_compiler_t* c, int32_t symbol, int32_t code) {
  stax_vm_shape_binding_t binding = {.kind = STAX_VM_BINDING_DERIVE, .reg = -1, .dim = -1,
                                     .symbol = symbol, .code = code};
  return STAX_VM_APPEND(c->program, shape_bindings, &binding, NULL);
}

static stax_status_t stax_vm_add_derive_guard(stax_vm_compiler_t* c, int32_t symbol, int32_t code) {
  stax_vm_guard_t guard = {.kind = STAX_VM_GUARD_DERIVE, .input = -1, .dim = -1,
                           .symbol = symbol, .code = code};
  return STAX_VM_APPEND(c->program, guards, &guard, NULL);
}

stax_status_t stax_vm_compiler_shape_variant(stax_vm_compiler_t* c, int32_t node, int32_t count,
                                             const int32_t* registers) {
  stax_program_t* program = c->program;
  int32_t first = program->shape_bindings_count;
  for (int32_t k = 0; k < count; k++) {
    int32_t reg = registers[k];
    if (reg < 0) continue;
    int32_t rank = program->descriptors[program->registers[reg].descriptor].rank;
    for (int32_t d = 0; d < rank; d++) {
      const stax_vm_descriptor_t* desc = &program->descriptors[program->registers[reg].descriptor];
      const stax_vm_dim_t dim = program->dims[desc->dims_first + d];
      const stax_dim_t* resolved = dim.kind == STAX_VM_DIM_CONSTANT
                                       ? stax_dim_const(c->shape, dim.value)
                                       : c->code_dims[dim.code];
      if (!resolved) return stax_shape_ctx_take_error(c->shape);
      stax_vm_shape_binding_t binding = {.kind = STAX_VM_BINDING_CHECK, .reg = reg, .dim = d,
                                         .symbol = -1, .code = -1, .scale = 1};
      stax_symbol_id_t symbol = -1;
      if (stax_vm_dim_bound(c, resolved)) {
        STAX_RETURN_IF_ERROR(stax_vm_dim_code_index(c, resolved, &binding.code));
      } else if (stax_vm_linear_symbol(resolved, &symbol, &binding.scale, &binding.offset) &&
                 symbol >= 0 && symbol < c->symbol_count) {
        binding.kind = STAX_VM_BINDING_BIND;
        binding.symbol = symbol;
        c->bound[symbol] = 1;
      } else {
        continue; /* not bindable from this dim: known only from the live tensor */
      }
      STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, shape_bindings, &binding, NULL));
    }
  }
  STAX_RETURN_IF_ERROR(stax_vm_derive_symbols(c, stax_vm_add_derive_binding));
  stax_vm_shape_variant_t variant = {.first = first, .count = program->shape_bindings_count - first};
  if (variant.count == 0) return STAX_OK;
  int32_t index = -1;
  STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, shape_variants, &variant, &index));
  return stax_vm_compiler_emit(c, STAX_VM_OP_SHAPE_VARIANT, node, &index, 1, NULL);
}

/* ---- node copies ---------------------------------------------------------------------------- */

static stax_status_t stax_vm_copy_attr(stax_vm_compiler_t* c, const stax_node_attr_t* source,
                                       stax_vm_attr_t* out) {
  stax_program_t* program = c->program;
  memset(out, 0, sizeof(*out));
  out->type = source->type;
  out->first = -1;
  STAX_RETURN_IF_ERROR(stax_vm_program_add_string(program, source->name, &out->name));
  switch (source->type) {
    case STAX_ATTR_INT: out->i = source->value.i; break;
    case STAX_ATTR_FLOAT: out->f = source->value.f; break;
    case STAX_ATTR_STRING:
      STAX_RETURN_IF_ERROR(stax_vm_program_add_string(program, source->value.s ? source->value.s : "",
                                                      &out->first));
      break;
    case STAX_ATTR_INTS:
      out->count = source->value.ints.count;
      STAX_RETURN_IF_ERROR(STAX_VM_APPEND_N(program, attr_ints, source->value.ints.data, out->count,
                                            &out->first));
      if (out->count == 0) out->first = program->attr_ints_count;
      break;
    case STAX_ATTR_FLOATS:
      out->count = source->value.floats.count;
      STAX_RETURN_IF_ERROR(STAX_VM_APPEND_N(program, attr_floats, source->value.floats.data,
                                            out->count, &out->first));
      if (out->count == 0) out->first = program->attr_floats_count;
      break;
    case STAX_ATTR_STRINGS:
      out->count = source->value.strings.count;
      out->first = program->attr_strings_count;
      for (int32_t k = 0; k < out->count; k++) {
        int32_t text = -1;
        STAX_RETURN_IF_ERROR(stax_vm_program_add_string(program, source->value.strings.data[k], &text));
        STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, attr_strings, &text, NULL));
      }
      break;
    case STAX_ATTR_TENSOR:
      if (!source->value.tensor)
        return stax_status_make(STAX_INVALID_ARGUMENT, "attribute '%s' has no tensor", source->name);
      STAX_RETURN_IF_ERROR(stax_vm_program_add_constant(program, source->value.tensor, &out->first));
      break;
    case STAX_ATTR_GRAPH: break; /* compiled inline, not kept */
  }
  return STAX_OK;
}

stax_status_t stax_vm_compiler_copy_node(stax_vm_compiler_t* c, stax_graph_t* graph,
                                         stax_node_id_t node_id, int32_t* out_index) {
  *out_index = -1;
  stax_program_t* program = c->program;
  const stax_node_t* node = stax_graph_node(graph, node_id);
  stax_vm_node_t copy = {.op = node->op, .input_count = node->input_count,
                         .output_count = node->output_count, .attr_count = node->attr_count};
  STAX_RETURN_IF_ERROR(stax_vm_program_add_string(program, node->name, &copy.name));
  copy.inputs_first = program->node_registers_count;
  for (int32_t k = 0; k < node->input_count; k++) {
    int32_t reg = -1;
    if (node->inputs[k] != STAX_VALUE_NONE)
      STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, graph, node->inputs[k], &reg));
    STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, node_registers, &reg, NULL));
  }
  copy.outputs_first = program->node_registers_count;
  for (int32_t k = 0; k < node->output_count; k++) {
    int32_t reg = -1;
    STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, graph, node->outputs[k], &reg));
    STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, node_registers, &reg, NULL));
  }
  copy.attrs_first = program->attrs_count;
  STAX_RETURN_IF_ERROR(STAX_VM_APPEND_N(program, attrs, NULL, node->attr_count, NULL));
  for (int32_t a = 0; a < node->attr_count; a++) {
    stax_vm_attr_t attr;
    STAX_RETURN_IF_ERROR(stax_vm_copy_attr(c, &node->attrs[a], &attr));
    program->attrs[copy.attrs_first + a] = attr;
  }
  return STAX_VM_APPEND(program, nodes, &copy, out_index);
}

/* ---- inputs, guards, outputs ------------------------------------------------------------------ */

static stax_status_t stax_vm_dim_texts(stax_vm_compiler_t* c, const stax_value_t* value,
                                       char (*texts)[128], const char** pointers) {
  for (int32_t d = 0; d < value->rank && d < STAX_MAX_RANK; d++) {
    stax_dim_print(c->shape, value->dims[d], texts[d], sizeof(texts[d]));
    pointers[d] = texts[d];
  }
  return STAX_OK;
}

static stax_status_t stax_vm_compile_inputs(stax_vm_compiler_t* c) {
  stax_graph_t* root = c->root;
  for (int32_t i = 0; i < root->input_count; i++) {
    stax_value_id_t id = root->inputs[i];
    const stax_value_t* value = stax_graph_value(root, id);
    int32_t reg = -1, index = -1;
    STAX_RETURN_IF_ERROR(stax_vm_compiler_define(c, root, id, STAX_VM_LAYOUT_ANY, &reg));
    char texts[STAX_MAX_RANK][128];
    const char* pointers[STAX_MAX_RANK];
    STAX_RETURN_IF_ERROR(stax_vm_dim_texts(c, value, texts, pointers));
    STAX_RETURN_IF_ERROR(stax_vm_program_add_io(c->program, false, value->name, value->dtype,
                                                value->rank, pointers, reg, &index));
    int32_t operands[2] = {reg, index};
    STAX_RETURN_IF_ERROR(stax_vm_compiler_emit(c, STAX_VM_OP_LOAD_TENSOR, -1, operands, 2, NULL));
  }
  return STAX_OK;
}

static stax_status_t stax_vm_compile_guards(stax_vm_compiler_t* c) {
  stax_graph_t* root = c->root;
  int32_t count = root->input_count;
  stax_shape_guard_input_t* inputs = NULL;
  stax_shape_guards_t* guards = NULL;
  stax_status_t status = STAX_OK;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(c->allocator, (size_t)(count > 0 ? count : 1),
                                             sizeof(*inputs), (void**)&inputs));
  for (int32_t i = 0; i < count; i++) {
    const stax_value_t* value = stax_graph_value(root, root->inputs[i]);
    inputs[i] = (stax_shape_guard_input_t){value->name, value->rank,
                                           (const stax_dim_t* const*)value->dims};
  }
  STAX_GOTO_IF_ERROR(status, stax_shape_guards_build(c->shape, count, inputs, &guards), cleanup,
                     "building the input guards");
  int32_t step_count = stax_shape_guards_step_count(guards);
  const stax_shape_guard_step_t* steps = stax_shape_guards_steps(guards);
  for (int32_t k = 0; k < step_count; k++) {
    const stax_shape_guard_step_t* step = &steps[k];
    stax_vm_guard_t guard = {.input = -1, .dim = -1, .symbol = -1, .code = -1, .scale = 1};
    switch (step->kind) {
      case STAX_GUARD_BIND: {
        guard.kind = STAX_VM_GUARD_BIND;
        guard.input = step->input;
        guard.dim = step->dim;
        guard.symbol = step->symbol;
        guard.scale = step->scale;
        guard.offset = step->offset;
        const stax_value_t* value = stax_graph_value(root, root->inputs[step->input]);
        const stax_dim_t* resolved = NULL;
        STAX_GOTO_IF_ERROR(status, stax_vm_resolve(c, value->dims[step->dim], &resolved), cleanup);
        STAX_GOTO_IF_ERROR(status, stax_vm_dim_code_index(c, resolved, &guard.code), cleanup);
        if (step->symbol >= 0 && step->symbol < c->symbol_count) c->bound[step->symbol] = 1;
        break;
      }
      case STAX_GUARD_CHECK:
        guard.kind = STAX_VM_GUARD_CHECK;
        guard.input = step->input;
        guard.dim = step->dim;
        STAX_GOTO_IF_ERROR(status, stax_vm_dim_code_index(c, step->expr, &guard.code), cleanup);
        break;
      case STAX_GUARD_RANGE:
        guard.kind = STAX_VM_GUARD_RANGE;
        guard.symbol = step->symbol;
        guard.min = step->min;
        guard.max = step->max;
        break;
    }
    STAX_GOTO_IF_ERROR(status, STAX_VM_APPEND(c->program, guards, &guard, NULL), cleanup);
  }
  STAX_GOTO_IF_ERROR(status, stax_vm_derive_symbols(c, stax_vm_add_derive_guard), cleanup);
cleanup:
  if (guards) stax_shape_guards_destroy(guards);
  stax_allocator_free(c->allocator, inputs, (size_t)(count > 0 ? count : 1) * sizeof(*inputs));
  return status;
}

static stax_status_t stax_vm_compile_outputs(stax_vm_compiler_t* c) {
  stax_graph_t* root = c->root;
  for (int32_t o = 0; o < root->output_count; o++) {
    stax_value_id_t id = root->outputs[o];
    const stax_value_t* value = stax_graph_value(root, id);
    int32_t reg = -1, index = -1;
    STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, root, id, &reg));
    c->register_info[reg].no_free = true;
    c->program->registers[reg].flags |= STAX_VM_REGISTER_OUTPUT;
    char texts[STAX_MAX_RANK][128];
    const char* pointers[STAX_MAX_RANK];
    STAX_RETURN_IF_ERROR(stax_vm_dim_texts(c, value, texts, pointers));
    STAX_RETURN_IF_ERROR(stax_vm_program_add_io(c->program, true, value->name, value->dtype,
                                                value->rank, pointers, reg, &index));
    int32_t operands[2] = {reg, index};
    STAX_RETURN_IF_ERROR(stax_vm_compiler_emit(c, STAX_VM_OP_STORE_TENSOR, -1, operands, 2, NULL));
  }
  return stax_vm_compiler_emit(c, STAX_VM_OP_RETURN, -1, NULL, 0, NULL);
}

static stax_status_t stax_vm_compile_symbols(stax_vm_compiler_t* c) {
  c->symbol_count = stax_shape_ctx_symbol_count(c->shape);
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(c->allocator,
                                             (size_t)(c->symbol_count > 0 ? c->symbol_count : 1),
                                             1, (void**)&c->bound));
  for (int32_t s = 0; s < c->symbol_count; s++) {
    stax_vm_symbol_t symbol = {.bound_by = STAX_VM_BOUND_NEVER, .guard_input = -1, .guard_dim = -1};
    stax_symbol_range(c->shape, s, &symbol.min, &symbol.max);
    STAX_RETURN_IF_ERROR(stax_vm_program_add_string(c->program, stax_symbol_name(c->shape, s),
                                                    &symbol.name));
    STAX_RETURN_IF_ERROR(STAX_VM_APPEND(c->program, symbols, &symbol, NULL));
  }
  return STAX_OK;
}

/* ---- the driver --------------------------------------------------------------------------------- */

static void stax_vm_compiler_deinit(stax_vm_compiler_t* c) {
  while (c->maps) {
    stax_vm_graph_map_t* next = c->maps->next;
    stax_allocator_free(c->allocator, c->maps->registers,
                        (size_t)(c->maps->value_count > 0 ? c->maps->value_count : 1) * sizeof(int32_t));
    stax_allocator_free(c->allocator, c->maps, sizeof(*c->maps));
    c->maps = next;
  }
  if (c->bound)
    stax_allocator_free(c->allocator, c->bound, (size_t)(c->symbol_count > 0 ? c->symbol_count : 1));
  if (c->register_info)
    stax_allocator_free(c->allocator, c->register_info,
                        (size_t)c->register_capacity * sizeof(*c->register_info));
  if (c->instruction_scope)
    stax_allocator_free(c->allocator, c->instruction_scope,
                        (size_t)c->instruction_capacity * sizeof(int32_t));
  if (c->scopes)
    stax_allocator_free(c->allocator, c->scopes, (size_t)c->scope_capacity * sizeof(*c->scopes));
  if (c->code_dims)
    stax_allocator_free(c->allocator, c->code_dims,
                        (size_t)c->code_dims_capacity * sizeof(*c->code_dims));
  if (c->code_cache) stax_hash_map_destroy(c->code_cache);
}

stax_status_t stax_program_compile(stax_allocator_t allocator, stax_graph_t* graph,
                                   const stax_compile_options_t* options,
                                   stax_program_t** out_program) {
  if (!out_program)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_program_compile: out_program is NULL");
  *out_program = NULL;
  if (!graph) return stax_status_make(STAX_INVALID_ARGUMENT, "stax_program_compile: graph is NULL");
  if (graph->parent)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "stax_program_compile: the graph is a subgraph; compile its top level");
  STAX_RETURN_IF_ERROR(stax_graph_verify(graph), "compiling the graph");
  stax_pass_log_t* pass_log = NULL;
  uint32_t disabled_passes = (options ? options->disable_passes : 0) | stax_pipeline_env_disabled();
  STAX_RETURN_IF_ERROR(stax_pipeline_run(allocator, graph, disabled_passes, &pass_log));
  stax_status_t verified = stax_graph_verify(graph);
  if (verified != STAX_OK) {
    stax_pass_log_free(pass_log);
    return stax_status_annotate(verified, "the graph after its passes (an internal error)");
  }
  stax_vm_compiler_t c = {.allocator = allocator, .root = graph, .shape = graph->shape};
  c.static_variants = !(options && options->disable_static_variants);
  c.disabled_passes = disabled_passes;
  stax_status_t status = STAX_OK;
  int32_t scope = -1;
  STAX_GOTO_IF_ERROR(status, stax_vm_program_create(allocator, &c.program), cleanup);
  c.program->pass_log = pass_log;
  pass_log = NULL;
  STAX_GOTO_IF_ERROR(status, stax_hash_map_create(allocator, STAX_HASH_KEY_U64, &c.code_cache),
                     cleanup);
  c.current_scope = -1;
  STAX_GOTO_IF_ERROR(status, stax_vm_compiler_new_scope(&c, &scope), cleanup);
  c.current_scope = scope;
  STAX_GOTO_IF_ERROR(status, stax_vm_compile_symbols(&c), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_compile_inputs(&c), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_compile_guards(&c), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_load_constants(&c, graph), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_compile_graph_nodes(&c, graph), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_compile_outputs(&c), cleanup);
  if (!(disabled_passes & STAX_PASS_BIT(STAX_PASS_dce))) {
    int32_t removed = 0;
    STAX_GOTO_IF_ERROR(status, stax_vm_compiler_remove_dead(&c, &removed), cleanup);
    if (c.program->pass_log) c.program->pass_log->instructions_removed = removed;
  }
  STAX_GOTO_IF_ERROR(status, stax_vm_compiler_insert_frees(&c), cleanup);
  stax_vm_finalize_options_t finalize = {
      .insert_profile_points = !(options && options->disable_profile_points)};
  STAX_GOTO_IF_ERROR(status, stax_vm_program_finalize(c.program, &finalize), cleanup);
  *out_program = c.program;
  c.program = NULL;
cleanup:
  stax_pass_log_free(pass_log);
  if (c.program) stax_program_release(c.program);
  stax_vm_compiler_deinit(&c);
  return status;
}
