/* ONNX Loop at run time. The body is compiled inline between LOOP_BEGIN and LOOP_END; this
 * file moves loop-carried values in and out, keeps the iteration number and condition
 * registers, accumulates scan outputs and stacks them at exit, and unwinds each iteration's
 * shape bindings so carried values may change shape from one iteration to the next. */
#include <stdio.h>
#include <string.h>

#include "runtime/tensor_internal.h"
#include "vm/context.h"

typedef struct stax_vm_loop_lists_t {
  const int32_t* initial;
  const int32_t* body_in;
  const int32_t* body_out;
  const int32_t* outputs;
  const int32_t* scan_body_out;
  const int32_t* scan_outputs;
} stax_vm_loop_lists_t;

static stax_vm_loop_lists_t stax_vm_loop_lists(const stax_program_t* program,
                                               const stax_vm_loop_t* loop) {
  const int32_t* base = program->loop_registers + loop->lists_first;
  int32_t c = loop->carried_count, s = loop->scan_count;
  return (stax_vm_loop_lists_t){base, base + c, base + 2 * c, base + 3 * c, base + 4 * c,
                                base + 4 * c + s};
}

static const char* stax_vm_loop_name(const stax_program_t* program, const stax_vm_loop_t* loop) {
  return stax_vm_program_string(program, program->nodes[loop->node].name);
}

static stax_status_t stax_vm_scalar_tensor(stax_context_t* ctx, stax_dtype_t dtype, int64_t value,
                                           stax_tensor_t** out) {
  STAX_RETURN_IF_ERROR(stax_tensor_create(ctx->allocator, dtype, 0, NULL, out));
  stax_convert_elements(STAX_DTYPE_INT64, &value, dtype, stax_tensor_data(*out), 1);
  return STAX_OK;
}

/* Sets the body's iteration-number and condition inputs for the next iteration. */
static stax_status_t stax_vm_loop_set_counters(stax_context_t* ctx, const stax_vm_loop_t* loop,
                                               int64_t iteration, bool cond) {
  stax_tensor_t* tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_scalar_tensor(ctx, STAX_DTYPE_INT64, iteration, &tensor));
  stax_vm_take_register(ctx, loop->iteration_register, tensor);
  STAX_RETURN_IF_ERROR(stax_vm_scalar_tensor(ctx, STAX_DTYPE_BOOL, cond ? 1 : 0, &tensor));
  stax_vm_take_register(ctx, loop->cond_in_register, tensor);
  return STAX_OK;
}

static void stax_vm_loop_clear_scans(stax_vm_loop_state_t* state, int32_t scan_count) {
  if (!state->scans) return;
  for (int32_t k = 0; k < scan_count; k++) {
    for (int32_t i = 0; i < state->scan_length; i++)
      if (state->scans[k][i]) stax_tensor_release(state->scans[k][i]);
  }
  state->scan_length = 0;
}

void stax_vm_loops_reset(stax_context_t* ctx) {
  const stax_program_t* program = ctx->program;
  for (int32_t l = 0; l < program->loops_count; l++)
    stax_vm_loop_clear_scans(&ctx->loops[l], program->loops[l].scan_count);
}

static stax_status_t stax_vm_loop_append_scans(stax_context_t* ctx, const stax_vm_loop_t* loop,
                                               stax_vm_loop_state_t* state,
                                               const stax_vm_loop_lists_t* lists) {
  int32_t scan_count = loop->scan_count;
  if (scan_count == 0) return STAX_OK;
  if (!state->scans)
    STAX_RETURN_IF_ERROR(stax_allocator_calloc(ctx->allocator, (size_t)scan_count,
                                               sizeof(*state->scans), (void**)&state->scans));
  if (state->scan_length == state->scan_capacity) {
    if (state->scan_capacity > INT32_MAX / 2)
      return stax_status_make(STAX_OUT_OF_RANGE, "Loop node '%s' ran too many iterations",
                              stax_vm_loop_name(ctx->program, loop));
    int32_t grown = state->scan_capacity ? state->scan_capacity * 2 : 8;
    for (int32_t k = 0; k < scan_count; k++) {
      void* data = state->scans[k];
      if (data) {
        STAX_RETURN_IF_ERROR(stax_allocator_realloc(
            ctx->allocator, (size_t)state->scan_capacity * sizeof(stax_tensor_t*),
            (size_t)grown * sizeof(stax_tensor_t*), &data));
      } else {
        STAX_RETURN_IF_ERROR(
            stax_allocator_malloc(ctx->allocator, (size_t)grown * sizeof(stax_tensor_t*), &data));
      }
      state->scans[k] = data;
    }
    state->scan_capacity = grown;
  }
  for (int32_t k = 0; k < scan_count; k++) {
    stax_tensor_t* value = ctx->registers[lists->scan_body_out[k]];
    if (!value)
      return stax_status_make(STAX_INTERNAL, "Loop node '%s' scan output %d has no value",
                              stax_vm_loop_name(ctx->program, loop), k);
    stax_tensor_retain(value);
    state->scans[k][state->scan_length] = value;
  }
  state->scan_length++;
  return STAX_OK;
}

/* Stacks scan output k's per-iteration values along a new leading axis. */
static stax_status_t stax_vm_loop_stack_scan(stax_context_t* ctx, const stax_vm_loop_t* loop,
                                             const stax_vm_loop_state_t* state,
                                             const stax_vm_loop_lists_t* lists, int32_t k,
                                             stax_tensor_t** out) {
  const stax_program_t* program = ctx->program;
  *out = NULL;
  int32_t count = state->scan_length;
  const stax_vm_descriptor_t* desc =
      &program->descriptors[program->registers[lists->scan_outputs[k]].descriptor];
  int64_t dims[STAX_MAX_RANK];
  if (count == 0) {
    /* No iteration ran: an empty stack. Per-iteration dims come from the model where its
     * symbols are bound (constants, outer symbols); a dim only an iteration could bind is 0. */
    dims[0] = 0;
    for (int32_t d = 1; d < desc->rank; d++) {
      const stax_vm_dim_t* dim = &program->dims[desc->dims_first + d];
      dims[d] = 0;
      if (dim->kind == STAX_VM_DIM_CONSTANT) {
        dims[d] = dim->value;
        continue;
      }
      const stax_vm_dim_code_ref_t* ref = &program->dim_codes[dim->code];
      int64_t value = 0;
      stax_status_t status = stax_dim_code_eval(program->dim_code_words + ref->first, ref->count,
                                                ctx->symbols, program->symbols_count, &value);
      if (status == STAX_OK && value >= 0) dims[d] = value;
      stax_status_free(status);
    }
    return stax_tensor_create(ctx->allocator, (stax_dtype_t)desc->dtype, desc->rank, dims, out);
  }
  const stax_tensor_t* first = state->scans[k][0];
  if (first->rank + 1 != desc->rank || (int32_t)first->dtype != desc->dtype)
    return stax_status_make(STAX_SHAPE_MISMATCH,
                            "Loop node '%s' scan output %d is %s rank %d, but the model says %s "
                            "rank %d per iteration",
                            stax_vm_loop_name(program, loop), k, stax_dtype_name(first->dtype),
                            first->rank, stax_dtype_name((stax_dtype_t)desc->dtype),
                            desc->rank - 1);
  for (int32_t i = 1; i < count; i++) {
    const stax_tensor_t* value = state->scans[k][i];
    bool same = value->dtype == first->dtype && value->rank == first->rank;
    for (int32_t d = 0; same && d < first->rank; d++) same = value->dims[d] == first->dims[d];
    if (!same)
      return stax_status_make(STAX_SHAPE_MISMATCH,
                              "Loop node '%s' scan output %d has dims %s at iteration %d but %s "
                              "at iteration 0; scan outputs cannot be stacked",
                              stax_vm_loop_name(program, loop), k,
                              stax_dims_text(value->rank, value->dims).text, i,
                              stax_dims_text(first->rank, first->dims).text);
  }
  dims[0] = count;
  for (int32_t d = 0; d < first->rank; d++) dims[d + 1] = first->dims[d];
  stax_tensor_t* stacked = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(ctx->allocator, first->dtype, desc->rank, dims, &stacked));
  int64_t element_count = stax_tensor_element_count(first);
  for (int32_t i = 0; i < count && element_count > 0; i++) {
    stax_tensor_t* slot = NULL;
    stax_status_t status = stax_tensor_create_view(ctx->allocator, stax_tensor_buffer(stacked),
                                                   first->dtype, first->rank, first->dims, NULL,
                                                   (int64_t)i * element_count, &slot);
    if (status == STAX_OK) {
      status = stax_tensor_copy_into(state->scans[k][i], slot);
      stax_tensor_release(slot);
    }
    if (status) {
      stax_tensor_release(stacked);
      return status;
    }
  }
  *out = stacked;
  return STAX_OK;
}

/* The loop is over: its outputs are the current carried values and the stacked scans. */
static stax_status_t stax_vm_loop_finish(stax_context_t* ctx, const stax_vm_loop_t* loop,
                                         stax_vm_loop_state_t* state,
                                         const stax_vm_loop_lists_t* lists) {
  for (int32_t k = 0; k < loop->carried_count; k++)
    stax_vm_set_register(ctx, lists->outputs[k], ctx->registers[lists->body_in[k]]);
  stax_status_t status = STAX_OK;
  for (int32_t k = 0; k < loop->scan_count && status == STAX_OK; k++) {
    stax_tensor_t* stacked = NULL;
    status = stax_vm_loop_stack_scan(ctx, loop, state, lists, k, &stacked);
    if (status == STAX_OK) stax_vm_take_register(ctx, lists->scan_outputs[k], stacked);
  }
  stax_vm_loop_clear_scans(state, loop->scan_count);
  return status;
}

stax_status_t stax_vm_exec_loop_begin(stax_context_t* ctx, const int32_t* ins, bool* out_jump) {
  const stax_program_t* program = ctx->program;
  int32_t index = STAX_VM_OPERAND(ins, 0);
  const stax_vm_loop_t* loop = &program->loops[index];
  stax_vm_loop_state_t* state = &ctx->loops[index];
  stax_vm_loop_lists_t lists = stax_vm_loop_lists(program, loop);
  const char* name = stax_vm_loop_name(program, loop);
  *out_jump = false;
  char what[160];
  int64_t trip_count = INT64_MAX;
  if (loop->trip_register >= 0) {
    snprintf(what, sizeof(what), "Loop node '%s' trip count M", name);
    STAX_RETURN_IF_ERROR(stax_vm_read_scalar_int(ctx->registers[loop->trip_register], what,
                                                 &trip_count));
  }
  bool cond = true;
  if (loop->cond_register >= 0) {
    snprintf(what, sizeof(what), "Loop node '%s' condition", name);
    STAX_RETURN_IF_ERROR(stax_vm_read_scalar_bool(ctx->registers[loop->cond_register], what, &cond));
  }
  stax_vm_loop_clear_scans(state, loop->scan_count);
  state->trip_count = trip_count;
  state->iteration = 0;
  state->stack_base = ctx->shape_stack_count;
  for (int32_t k = 0; k < loop->carried_count; k++) {
    if (!ctx->registers[lists.initial[k]])
      return stax_status_make(STAX_INTERNAL, "Loop node '%s' initial value %d has no value", name, k);
    stax_vm_set_register(ctx, lists.body_in[k], ctx->registers[lists.initial[k]]);
  }
  if (trip_count <= 0 || !cond) {
    *out_jump = true;
    return stax_vm_loop_finish(ctx, loop, state, &lists);
  }
  return stax_vm_loop_set_counters(ctx, loop, 0, cond);
}

stax_status_t stax_vm_exec_loop_end(stax_context_t* ctx, const int32_t* ins, bool* out_jump) {
  const stax_program_t* program = ctx->program;
  int32_t index = STAX_VM_OPERAND(ins, 0);
  const stax_vm_loop_t* loop = &program->loops[index];
  stax_vm_loop_state_t* state = &ctx->loops[index];
  stax_vm_loop_lists_t lists = stax_vm_loop_lists(program, loop);
  const char* name = stax_vm_loop_name(program, loop);
  *out_jump = false;
  char what[160];
  snprintf(what, sizeof(what), "Loop node '%s' body condition output", name);
  bool cond = false;
  STAX_RETURN_IF_ERROR(stax_vm_read_scalar_bool(ctx->registers[loop->cond_out_register], what, &cond));
  /* Carried outputs become the next inputs all at once: a body may swap two carried values. */
  for (int32_t k = 0; k < loop->carried_count; k++) {
    stax_tensor_t* value = ctx->registers[lists.body_out[k]];
    if (!value)
      return stax_status_make(STAX_INTERNAL, "Loop node '%s' carried output %d has no value", name, k);
    stax_tensor_retain(value);
    ctx->call_previous[k] = value;
  }
  for (int32_t k = 0; k < loop->carried_count; k++)
    stax_vm_take_register(ctx, lists.body_in[k], ctx->call_previous[k]);
  STAX_RETURN_IF_ERROR(stax_vm_loop_append_scans(ctx, loop, state, &lists));
  state->iteration++;
  /* Symbols bound inside the body belong to this iteration. */
  stax_vm_shape_stack_unwind(ctx, state->stack_base);
  if (state->iteration < state->trip_count && cond) {
    *out_jump = true;
    return stax_vm_loop_set_counters(ctx, loop, state->iteration, cond);
  }
  return stax_vm_loop_finish(ctx, loop, state, &lists);
}
