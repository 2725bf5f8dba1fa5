/* Shape semantics at run time: the input guards that bind the model's symbols from the
 * caller's tensors, SHAPE_VARIANT (binding, checking and deriving symbols after data-dependent
 * results, with the shape stack for unwinding), the metadata-only views (BROADCAST_TO,
 * RESHAPE_VIEW, TRANSPOSE_VIEW) and DIM_VALUES (an integer tensor computed from dim code). Messages name the input or register, the dim, the expected
 * expression with its value, and where the symbols in it were bound. */
#include <stdio.h>
#include <string.h>

#include "runtime/tensor_internal.h"
#include "vm/context.h"

/* ---- messages ------------------------------------------------------------------------------ */

/* Appends " (bound by input "x" dim 0)" for a bare symbol, or " (B = 4 from input "x" dim 0,
 * ...)" for an expression, so a mismatch says where the expected value came from. */
static void stax_vm_explain_code(const stax_context_t* ctx, int32_t code, char* buf, size_t size) {
  const stax_program_t* program = ctx->program;
  const stax_vm_dim_code_ref_t* ref = &program->dim_codes[code];
  buf[0] = '\0';
  bool bare = ref->count == 1 && program->dim_code_words[ref->first].op == STAX_DIM_CODE_SYMBOL;
  size_t used = 0;
  int32_t explained = 0;
  for (int32_t w = 0; w < ref->count && used < size; w++) {
    const stax_dim_code_t* word = &program->dim_code_words[ref->first + w];
    if (word->op != STAX_DIM_CODE_SYMBOL) continue;
    const stax_vm_symbol_t* symbol = &program->symbols[word->value];
    char origin[160];
    if (symbol->bound_by == STAX_VM_BOUND_BY_GUARD && symbol->guard_input >= 0) {
      snprintf(origin, sizeof(origin), "input \"%s\" dim %d",
               stax_vm_program_string(program, program->inputs[symbol->guard_input].name),
               symbol->guard_dim);
    } else if (symbol->bound_by >= 0) {
      const stax_vm_instruction_t* binder = &program->instructions[symbol->bound_by];
      snprintf(origin, sizeof(origin), "instruction %d%s%s%s", symbol->bound_by,
               binder->node >= 0 ? " after node '" : "",
               binder->node >= 0 ? stax_vm_program_string(program, program->nodes[binder->node].name) : "",
               binder->node >= 0 ? "'" : "");
    } else {
      snprintf(origin, sizeof(origin), "the input guards");
    }
    const char* separator = explained ? ", " : " (";
    int written;
    if (bare) {
      written = snprintf(buf + used, size - used, " (bound by %s", origin);
    } else {
      written = snprintf(buf + used, size - used, "%s%s = %lld from %s", separator,
                         stax_vm_program_string(program, symbol->name),
                         (long long)ctx->symbols[word->value], origin);
    }
    if (written < 0) break;
    used += (size_t)written;
    explained++;
  }
  if (explained && used < size) snprintf(buf + used, size - used, ")");
}

static stax_status_t stax_vm_eval_code(const stax_context_t* ctx, int32_t code, int64_t* out_value) {
  const stax_program_t* program = ctx->program;
  const stax_vm_dim_code_ref_t* ref = &program->dim_codes[code];
  STAX_RETURN_IF_ERROR(stax_dim_code_eval(program->dim_code_words + ref->first, ref->count,
                                          ctx->symbols, program->symbols_count, out_value),
                       "evaluating %s", stax_vm_program_string(program, ref->text));
  return STAX_OK;
}

/* "the model says B = 4 (bound by input "x" dim 0)" or "the model says 64". */
static void stax_vm_expected_text(const stax_context_t* ctx, int32_t code, int64_t expected,
                                  char* buf, size_t size) {
  const stax_program_t* program = ctx->program;
  const stax_vm_dim_code_ref_t* ref = &program->dim_codes[code];
  bool constant = ref->count == 1 && program->dim_code_words[ref->first].op == STAX_DIM_CODE_CONST;
  if (constant) {
    snprintf(buf, size, "%lld", (long long)expected);
    return;
  }
  char origin[400];
  stax_vm_explain_code(ctx, code, origin, sizeof(origin));
  snprintf(buf, size, "%s = %lld%s", stax_vm_program_string(program, ref->text),
           (long long)expected, origin);
}

static stax_status_t stax_vm_check_range(const stax_context_t* ctx, int32_t symbol_id,
                                         int64_t value, const char* where) {
  const stax_vm_symbol_t* symbol = &ctx->program->symbols[symbol_id];
  if (value >= symbol->min && value <= symbol->max) return STAX_OK;
  char max_text[32];
  if (symbol->max == STAX_DIM_MAX)
    snprintf(max_text, sizeof(max_text), "inf)");
  else
    snprintf(max_text, sizeof(max_text), "%lld]", (long long)symbol->max);
  return stax_status_make(STAX_SHAPE_MISMATCH, "%s gives %s = %lld, outside its range [%lld, %s",
                          where, stax_vm_program_string(ctx->program, symbol->name),
                          (long long)value, (long long)symbol->min, max_text);
}

/* ---- shape stack --------------------------------------------------------------------------- */

static stax_status_t stax_vm_bind_symbol(stax_context_t* ctx, int32_t symbol, int64_t value) {
  if (ctx->shape_stack_count >= ctx->shape_stack_capacity)
    return stax_status_make(STAX_INTERNAL, "shape stack overflow (%d entries)",
                            ctx->shape_stack_capacity);
  ctx->shape_stack[ctx->shape_stack_count++] =
      (stax_vm_shape_stack_entry_t){.symbol = symbol, .old_value = ctx->symbols[symbol]};
  ctx->symbols[symbol] = value;
  return STAX_OK;
}

void stax_vm_shape_stack_unwind(stax_context_t* ctx, int32_t height) {
  while (ctx->shape_stack_count > height) {
    const stax_vm_shape_stack_entry_t* entry = &ctx->shape_stack[--ctx->shape_stack_count];
    ctx->symbols[entry->symbol] = entry->old_value;
  }
}

/* ---- input guards -------------------------------------------------------------------------- */

/* Where a BIND/CHECK guard reads ('input "x" dim 0'), formatted only for error messages so
 * passing guards cost no string work. */
static const char* stax_vm_guard_where(const stax_program_t* program, const stax_vm_guard_t* guard,
                                       char* buf, size_t size) {
  snprintf(buf, size, "input \"%s\" dim %d",
           stax_vm_program_string(program, program->inputs[guard->input].name), guard->dim);
  return buf;
}
#define GUARD_WHERE() stax_vm_guard_where(program, guard, where, sizeof(where))

static stax_status_t stax_vm_run_guard(stax_context_t* ctx, const stax_vm_guard_t* guard) {
  const stax_program_t* program = ctx->program;
  char where[200]; /* filled only on the way to an error */
  int64_t seen = 0;
  if (guard->kind == STAX_VM_GUARD_BIND || guard->kind == STAX_VM_GUARD_CHECK)
    seen = stax_tensor_dims(ctx->inputs[guard->input])[guard->dim];
  switch (guard->kind) {
    case STAX_VM_GUARD_BIND: {
      int64_t shifted = 0;
      if (__builtin_sub_overflow(seen, guard->offset, &shifted))
        return stax_status_make(STAX_SHAPE_MISMATCH, "%s is %lld, which overflows minus %lld",
                                GUARD_WHERE(), (long long)seen, (long long)guard->offset);
      if (shifted % guard->scale != 0) {
        const char* text = guard->code >= 0
                               ? stax_vm_program_string(program, program->dim_codes[guard->code].text)
                               : stax_vm_program_string(program, program->symbols[guard->symbol].name);
        return stax_status_make(STAX_SHAPE_MISMATCH,
                                "%s is %lld, but the model says %s, which cannot equal %lld for "
                                "any integer %s",
                                GUARD_WHERE(), (long long)seen, text, (long long)seen,
                                stax_vm_program_string(program, program->symbols[guard->symbol].name));
      }
      int64_t value = shifted / guard->scale;
      int64_t bound = ctx->symbols[guard->symbol];
      if (bound != STAX_SYMBOL_UNBOUND && bound != value)
        return stax_status_make(STAX_SHAPE_MISMATCH, "%s is %lld, but the model says %s = %lld",
                                GUARD_WHERE(), (long long)seen,
                                stax_vm_program_string(program, program->symbols[guard->symbol].name),
                                (long long)bound);
      ctx->symbols[guard->symbol] = value;
      return STAX_OK;
    }
    case STAX_VM_GUARD_CHECK: {
      int64_t expected = 0;
      STAX_RETURN_IF_ERROR(stax_vm_eval_code(ctx, guard->code, &expected), "checking %s", GUARD_WHERE());
      if (expected == seen) return STAX_OK;
      char text[600];
      stax_vm_expected_text(ctx, guard->code, expected, text, sizeof(text));
      return stax_status_make(STAX_SHAPE_MISMATCH, "%s is %lld, but the model says %s", GUARD_WHERE(),
                              (long long)seen, text);
    }
    case STAX_VM_GUARD_RANGE: {
      const stax_vm_symbol_t* symbol = &program->symbols[guard->symbol];
      int64_t value = ctx->symbols[guard->symbol];
      if (value == STAX_SYMBOL_UNBOUND) return STAX_OK;
      if (value >= guard->min && value <= guard->max) return STAX_OK;
      if (symbol->guard_input >= 0)
        snprintf(where, sizeof(where), "input \"%s\" dim %d",
                 stax_vm_program_string(program, program->inputs[symbol->guard_input].name),
                 symbol->guard_dim);
      else
        snprintf(where, sizeof(where), "the inputs");
      char max_text[32];
      if (guard->max == STAX_DIM_MAX)
        snprintf(max_text, sizeof(max_text), "inf)");
      else
        snprintf(max_text, sizeof(max_text), "%lld]", (long long)guard->max);
      return stax_status_make(STAX_SHAPE_MISMATCH, "%s gives %s = %lld, outside its range [%lld, %s",
                              where, stax_vm_program_string(program, symbol->name),
                              (long long)value, (long long)guard->min, max_text);
    }
    case STAX_VM_GUARD_DERIVE: {
      if (ctx->symbols[guard->symbol] != STAX_SYMBOL_UNBOUND) return STAX_OK;
      int64_t value = 0;
      STAX_RETURN_IF_ERROR(stax_vm_eval_code(ctx, guard->code, &value));
      ctx->symbols[guard->symbol] = value;
      return STAX_OK;
    }
  }
  return stax_status_make(STAX_INTERNAL, "guard kind %d", guard->kind);
}
#undef GUARD_WHERE

stax_status_t stax_vm_run_guards(stax_context_t* ctx) {
  const stax_program_t* program = ctx->program;
  for (int32_t g = 0; g < program->guards_count; g++)
    STAX_RETURN_IF_ERROR(stax_vm_run_guard(ctx, &program->guards[g]));
  return STAX_OK;
}

/* ---- SHAPE_VARIANT ------------------------------------------------------------------------------ */

/* Where a SHAPE_VARIANT binding reads, formatted only for error messages. */
static const char* stax_vm_binding_where(const stax_program_t* program,
                                         const stax_vm_shape_binding_t* binding, char* buf,
                                         size_t size) {
  snprintf(buf, size, "'%s' (register %d) dim %d", stax_vm_register_name(program, binding->reg),
           binding->reg, binding->dim);
  return buf;
}
#define BINDING_WHERE() stax_vm_binding_where(program, binding, where, sizeof(where))

stax_status_t stax_vm_exec_shape_variant(stax_context_t* ctx, const int32_t* ins) {
  const stax_program_t* program = ctx->program;
  const stax_vm_shape_variant_t* variant = &program->shape_variants[STAX_VM_OPERAND(ins, 0)];
  for (int32_t b = 0; b < variant->count; b++) {
    const stax_vm_shape_binding_t* binding = &program->shape_bindings[variant->first + b];
    char where[200]; /* filled only on the way to an error */
    int64_t seen = 0;
    if (binding->kind != STAX_VM_BINDING_DERIVE) {
      const stax_tensor_t* tensor = ctx->registers[binding->reg];
      if (!tensor)
        return stax_status_make(STAX_INTERNAL, "register %d '%s' has no value", binding->reg,
                                stax_vm_register_name(program, binding->reg));
      if (binding->dim >= tensor->rank)
        return stax_status_make(STAX_INTERNAL, "register %d '%s' has rank %d, no dim %d",
                                binding->reg, stax_vm_register_name(program, binding->reg),
                                tensor->rank, binding->dim);
      seen = tensor->dims[binding->dim];
    }
    switch (binding->kind) {
      case STAX_VM_BINDING_BIND: {
        const char* name = stax_vm_program_string(program, program->symbols[binding->symbol].name);
        int64_t shifted = 0;
        if (__builtin_sub_overflow(seen, binding->offset, &shifted))
          return stax_status_make(STAX_SHAPE_MISMATCH, "%s is %lld, which overflows minus %lld",
                                  BINDING_WHERE(), (long long)seen, (long long)binding->offset);
        if (shifted % binding->scale != 0)
          return stax_status_make(STAX_SHAPE_MISMATCH,
                                  "%s is %lld, which is not %lld*%s + %lld for any integer %s",
                                  BINDING_WHERE(), (long long)seen, (long long)binding->scale, name,
                                  (long long)binding->offset, name);
        int64_t value = shifted / binding->scale;
        STAX_RETURN_IF_ERROR(stax_vm_check_range(ctx, binding->symbol, value, BINDING_WHERE()));
        STAX_RETURN_IF_ERROR(stax_vm_bind_symbol(ctx, binding->symbol, value));
        break;
      }
      case STAX_VM_BINDING_CHECK: {
        int64_t expected = 0;
        STAX_RETURN_IF_ERROR(stax_vm_eval_code(ctx, binding->code, &expected), "checking %s", BINDING_WHERE());
        if (expected != seen) {
          char text[600];
          stax_vm_expected_text(ctx, binding->code, expected, text, sizeof(text));
          return stax_status_make(STAX_SHAPE_MISMATCH, "%s is %lld, but the model says %s", BINDING_WHERE(),
                                  (long long)seen, text);
        }
        break;
      }
      case STAX_VM_BINDING_DERIVE: {
        int64_t value = 0;
        STAX_RETURN_IF_ERROR(stax_vm_eval_code(ctx, binding->code, &value));
        STAX_RETURN_IF_ERROR(stax_vm_bind_symbol(ctx, binding->symbol, value));
        break;
      }
    }
  }
  return STAX_OK;
}
#undef BINDING_WHERE

/* ---- views ---------------------------------------------------------------------------------- */

static stax_status_t stax_vm_source(const stax_context_t* ctx, int32_t reg, stax_tensor_t** out) {
  *out = ctx->registers[reg];
  if (!*out)
    return stax_status_make(STAX_INTERNAL, "register %d '%s' has no value", reg,
                            stax_vm_register_name(ctx->program, reg));
  return STAX_OK;
}

stax_status_t stax_vm_exec_broadcast_to(stax_context_t* ctx, const int32_t* ins) {
  int32_t dst = STAX_VM_OPERAND(ins, 0), src = STAX_VM_OPERAND(ins, 1);
  int32_t descriptor = STAX_VM_OPERAND(ins, 2);
  stax_tensor_t* source = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_source(ctx, src, &source));
  int64_t dims[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(stax_vm_descriptor_dims(ctx, descriptor, dims));
  int32_t rank = ctx->program->descriptors[descriptor].rank;
  stax_tensor_t* view = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_broadcast(ctx->allocator, source, rank, dims, &view),
                       "broadcasting '%s' %s to %s", stax_vm_register_name(ctx->program, src),
                       stax_dims_text(source->rank, source->dims).text,
                       stax_dims_text(rank, dims).text);
  stax_vm_take_register(ctx, dst, view);
  return STAX_OK;
}

/* Reads a rank-0/1 integer tensor (any strides) as reshape dims. */
static stax_status_t stax_vm_read_shape(const stax_context_t* ctx, int32_t reg, int32_t* out_rank,
                                        int64_t* out_dims) {
  stax_tensor_t* shape = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_source(ctx, reg, &shape));
  const char* name = stax_vm_register_name(ctx->program, reg);
  if (!stax_dtype_is_integer(shape->dtype) || shape->rank > 1)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "shape '%s' must be an integer vector; it is %s with dims %s", name,
                            stax_dtype_name(shape->dtype),
                            stax_dims_text(shape->rank, shape->dims).text);
  int64_t count = shape->rank == 0 ? 1 : shape->dims[0];
  if (count > STAX_MAX_RANK)
    return stax_status_make(STAX_UNIMPLEMENTED, "shape '%s' has %lld entries; at most %d dims",
                            name, (long long)count, STAX_MAX_RANK);
  const char* base = stax_tensor_data(shape);
  int64_t stride = shape->rank == 0 ? 0 : shape->strides[0];
  size_t element_size = stax_dtype_size(shape->dtype);
  for (int64_t k = 0; k < count; k++)
    stax_convert_elements(shape->dtype, base + k * stride * (int64_t)element_size,
                          STAX_DTYPE_INT64, &out_dims[k], 1);
  *out_rank = (int32_t)count;
  return STAX_OK;
}

stax_status_t stax_vm_exec_reshape_view(stax_context_t* ctx, const int32_t* ins) {
  const stax_program_t* program = ctx->program;
  int32_t dst = STAX_VM_OPERAND(ins, 0), src = STAX_VM_OPERAND(ins, 1);
  int32_t descriptor = STAX_VM_OPERAND(ins, 2), shape_reg = STAX_VM_OPERAND(ins, 3);
  bool allow_zero = STAX_VM_OPERAND(ins, 4) != 0;
  stax_tensor_t* source = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_source(ctx, src, &source));
  int64_t dims[STAX_MAX_RANK];
  int32_t rank = 0;
  if (descriptor >= 0) {
    STAX_RETURN_IF_ERROR(stax_vm_descriptor_dims(ctx, descriptor, dims));
    rank = program->descriptors[descriptor].rank;
    allow_zero = true; /* descriptor dims are exact: 0 means 0 */
  } else {
    STAX_RETURN_IF_ERROR(stax_vm_read_shape(ctx, shape_reg, &rank, dims));
    int32_t expected = program->descriptors[program->registers[dst].descriptor].rank;
    if (rank != expected)
      return stax_status_make(STAX_SHAPE_MISMATCH,
                              "shape '%s' has %d entries, but the model says '%s' has rank %d",
                              stax_vm_register_name(program, shape_reg), rank,
                              stax_vm_register_name(program, dst), expected);
  }
  /* A view when the strides allow one, else a contiguous copy (attention's Transpose ->
   * Reshape): one call, no error built and dropped on the hot path. */
  stax_tensor_t* view = NULL;
  stax_status_t status =
      stax_tensor_reshape_copy(ctx->allocator, source, rank, dims, allow_zero, &view);
  STAX_RETURN_IF_ERROR(status, "reshaping '%s' %s to %s", stax_vm_register_name(program, src),
                       stax_dims_text(source->rank, source->dims).text,
                       stax_dims_text(rank, dims).text);
  stax_vm_take_register(ctx, dst, view);
  return STAX_OK;
}

stax_status_t stax_vm_exec_transpose_view(stax_context_t* ctx, const int32_t* ins) {
  int32_t dst = STAX_VM_OPERAND(ins, 0), src = STAX_VM_OPERAND(ins, 1);
  const int32_t* perm = &STAX_VM_OPERAND(ins, 2);
  stax_tensor_t* source = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_source(ctx, src, &source));
  if (source->rank != perm[0])
    return stax_status_make(STAX_INTERNAL, "register %d '%s' has rank %d; the permutation has %d",
                            src, stax_vm_register_name(ctx->program, src), source->rank, perm[0]);
  stax_tensor_t* view = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_transpose(ctx->allocator, source, perm + 1, &view));
  stax_vm_take_register(ctx, dst, view);
  return STAX_OK;
}

/* ---- dim values ------------------------------------------------------------------------------ */

/* The context's tensor for DIM_VALUES into `reg`, when only the context holds it (and perhaps
 * the register itself: the JIT's segment entry ran this instruction before the interpreter
 * runs the segment again, with the same symbols). A view or a value kept from an earlier
 * iteration or run would see the new values, so then a new tensor is made. */
static stax_tensor_t* stax_vm_dim_values_reusable(const stax_context_t* ctx, int32_t reg) {
  stax_tensor_t* kept = ctx->dim_values[reg];
  if (!kept) return NULL;
  int_fast32_t holders = 1 + (ctx->registers[reg] == kept);
  if (atomic_load(&kept->refcount) != holders || atomic_load(&kept->buffer->refcount) != 1)
    return NULL;
  return kept;
}

stax_status_t stax_vm_exec_dim_values(stax_context_t* ctx, const int32_t* ins) {
  const stax_program_t* program = ctx->program;
  int32_t reg = STAX_VM_OPERAND(ins, 0);
  const int32_t* codes = &STAX_VM_OPERAND(ins, 1); /* count, then the dim codes */
  int32_t count = codes[0];
  const stax_vm_descriptor_t* desc = &program->descriptors[program->registers[reg].descriptor];
  stax_dtype_t dtype = (stax_dtype_t)desc->dtype;
  int64_t values[STAX_VM_DIM_VALUES_MAX];
  for (int32_t k = 0; k < count; k++)
    STAX_RETURN_IF_ERROR(stax_vm_eval_code(ctx, codes[1 + k], &values[k]),
                         "computing element %d of register %d '%s'", k, reg,
                         stax_vm_register_name(program, reg));
  bool is_output = (program->registers[reg].flags & STAX_VM_REGISTER_OUTPUT) != 0;
  stax_tensor_t* tensor = is_output ? NULL : stax_vm_dim_values_reusable(ctx, reg);
  if (tensor) {
    stax_tensor_retain(tensor);
  } else {
    int64_t dims[1] = {count};
    STAX_RETURN_IF_ERROR(stax_tensor_create(ctx->allocator, dtype, desc->rank, dims, &tensor),
                         "allocating register %d '%s'", reg, stax_vm_register_name(program, reg));
    if (is_output) {
      ctx->memory_counters.output_allocations++; /* the caller keeps it */
    } else {
      ctx->memory_counters.temp_allocations++;
      if (ctx->dim_values[reg]) stax_tensor_release(ctx->dim_values[reg]);
      ctx->dim_values[reg] = tensor;
      stax_tensor_retain(tensor);
    }
  }
  unsigned char* data = stax_tensor_data(tensor);
  for (int32_t k = 0; k < count; k++) {
    if (dtype == STAX_DTYPE_INT64) {
      memcpy(data + (size_t)k * 8, &values[k], 8);
    } else { /* int32: the verifier admits nothing else; wraps as Cast does */
      int32_t narrow = (int32_t)(uint32_t)(uint64_t)values[k];
      memcpy(data + (size_t)k * 4, &narrow, 4);
    }
  }
  stax_vm_take_register(ctx, reg, tensor);
  return STAX_OK;
}
