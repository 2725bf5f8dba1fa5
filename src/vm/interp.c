/* The interpreter: execution contexts (create, destroy), stax_context_run (argument checks,
 * input guards, the dispatch loop, handing outputs to the caller, releasing the frame), the
 * profiling accessors, and the two instantiations of the dispatch loop (interp_loop.inc):
 * computed goto where the compiler supports labels-as-values, and a switch. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tensor_internal.h"
#include "vm/context.h"
#include "vm/jit_tier.h"

#if defined(__GNUC__) || defined(__clang__)
#define STAX_VM_HAVE_COMPUTED_GOTO 1
#else
#define STAX_VM_HAVE_COMPUTED_GOTO 0
#endif

#define STAX_VM_LOOP_FUNCTION stax_vm_run_switch
#define STAX_VM_LOOP_COMPUTED_GOTO 0
#include "vm/interp_loop.inc"
#undef STAX_VM_LOOP_FUNCTION
#undef STAX_VM_LOOP_COMPUTED_GOTO

#if STAX_VM_HAVE_COMPUTED_GOTO
#define STAX_VM_LOOP_FUNCTION stax_vm_run_goto
#define STAX_VM_LOOP_COMPUTED_GOTO 1
#include "vm/interp_loop.inc"
#undef STAX_VM_LOOP_FUNCTION
#undef STAX_VM_LOOP_COMPUTED_GOTO
#endif

/* ---- contexts ---------------------------------------------------------------------------- */

static bool stax_vm_memory_plan_env_off(void);

static stax_status_t stax_vm_context_array(stax_allocator_t allocator, int32_t count,
                                           size_t element_size, void** out) {
  return stax_allocator_calloc(allocator, (size_t)(count > 0 ? count : 1), element_size, out);
}

#define STAX_VM_CONTEXT_ARRAYS(X)                                          \
  X(registers, program->registers_count)                                   \
  X(dim_values, program->registers_count)                                  \
  X(symbols, ctx->symbol_slots)                                            \
  X(shape_stack, ctx->shape_stack_capacity)                                \
  X(loops, program->loops_count)                                           \
  X(outputs, program->outputs_count)                                       \
  X(call_inputs, ctx->call_capacity)                                       \
  X(call_outputs, ctx->call_capacity)                                      \
  X(call_previous, ctx->call_capacity)                                     \
  X(functions, program->functions_count)                                   \
  X(function_data, program->functions_count)                               \
  X(instruction_counts, program->instructions_count)                       \
  X(instruction_nanos, program->instructions_count)                        \
  X(segment_counts, program->segments_count)

static size_t stax_vm_array_bytes(int32_t count, size_t element_size) {
  return (size_t)(count > 0 ? count : 1) * element_size;
}

void stax_context_destroy(stax_context_t* ctx) {
  if (!ctx) return;
  const stax_program_t* program = ctx->program;
  if (ctx->registers) {
    for (int32_t r = 0; r < program->registers_count; r++)
      if (ctx->registers[r]) stax_tensor_release(ctx->registers[r]);
  }
  if (ctx->dim_values) {
    for (int32_t r = 0; r < program->registers_count; r++)
      if (ctx->dim_values[r]) stax_tensor_release(ctx->dim_values[r]);
  }
  if (ctx->outputs) {
    for (int32_t o = 0; o < program->outputs_count; o++)
      if (ctx->outputs[o]) stax_tensor_release(ctx->outputs[o]);
  }
  stax_vm_memory_frame_destroy(ctx, ctx->memory); /* after the registers: none holds it now */
  if (ctx->loops) {
    stax_vm_loops_reset(ctx);
    for (int32_t l = 0; l < program->loops_count; l++) {
      stax_vm_loop_state_t* state = &ctx->loops[l];
      if (!state->scans) continue;
      for (int32_t k = 0; k < program->loops[l].scan_count; k++)
        if (state->scans[k])
          stax_allocator_free(ctx->allocator, state->scans[k],
                              (size_t)state->scan_capacity * sizeof(stax_tensor_t*));
      stax_allocator_free(ctx->allocator, state->scans,
                          (size_t)program->loops[l].scan_count * sizeof(*state->scans));
    }
  }
#define STAX_VM_FREE_ARRAY(field, count) \
  if (ctx->field)                        \
    stax_allocator_free(ctx->allocator, ctx->field, stax_vm_array_bytes(count, sizeof(*ctx->field)));
  STAX_VM_CONTEXT_ARRAYS(STAX_VM_FREE_ARRAY)
#undef STAX_VM_FREE_ARRAY
  stax_vm_jit_frame_destroy(ctx);
  stax_vm_trace_release(ctx->trace);
  stax_program_t* owned = ctx->program;
  stax_allocator_free(ctx->allocator, ctx, sizeof(*ctx));
  stax_program_release(owned);
}

stax_status_t stax_context_create(stax_allocator_t allocator, stax_program_t* program,
                                  const stax_context_options_t* options,
                                  stax_context_t** out_context) {
  if (!out_context)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_create: out_context is NULL");
  *out_context = NULL;
  if (!program)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_create: program is NULL");
  if (!program->linked)
    return stax_status_make(STAX_FAILED_PRECONDITION,
                            "stax_context_create: the program was not finalized");
  if (options && (options->dispatch < STAX_DISPATCH_DEFAULT || options->dispatch > STAX_DISPATCH_GOTO))
    return stax_status_make(STAX_INVALID_ARGUMENT, "unknown dispatch mode %d", (int)options->dispatch);
  if (options && (options->jit < STAX_JIT_OFF || options->jit > STAX_JIT_SYNC))
    return stax_status_make(STAX_INVALID_ARGUMENT, "unknown jit mode %d", (int)options->jit);
  stax_context_t* ctx = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(allocator, 1, sizeof(*ctx), (void**)&ctx));
  ctx->allocator = allocator;
  stax_program_retain(program);
  ctx->program = program;
  if (options) ctx->options = *options;
  ctx->pool = ctx->options.pool ? ctx->options.pool : stax_threadpool_default();
  atomic_init(&ctx->running, false);
  ctx->symbol_slots = program->symbols_count > 0 ? program->symbols_count : 1;
  ctx->shape_stack_capacity = program->max_shape_stack > 0 ? program->max_shape_stack : 1;
  ctx->call_capacity = program->max_list_length > 0 ? program->max_list_length : 1;
  ctx->timing_instruction = -1;
  stax_status_t status = STAX_OK;
#define STAX_VM_ALLOC_ARRAY(field, count)                                                      \
  STAX_GOTO_IF_ERROR(status,                                                                   \
                     stax_vm_context_array(allocator, count, sizeof(*ctx->field),              \
                                           (void**)&ctx->field),                               \
                     fail);
  STAX_VM_CONTEXT_ARRAYS(STAX_VM_ALLOC_ARRAY)
#undef STAX_VM_ALLOC_ARRAY
  ctx->jit_function = -1;
  for (int32_t f = 0; f < program->functions_count; f++) {
    const char* name = stax_vm_program_string(program, program->functions[f]);
    if (strcmp(name, STAX_VM_JIT_FUNCTION) == 0) { /* bound to the tier, not the registry */
      ctx->jit_function = f;
      continue;
    }
    if (!stax_vm_lookup_function(name, &ctx->functions[f], &ctx->function_data[f])) {
      status = stax_status_make(STAX_FAILED_PRECONDITION,
                                "the program calls host function '%s', which is not registered",
                                name);
      goto fail;
    }
  }
  /* The JIT needs the guards at segment entries (inserted with the PROFILE_POINTs); without
   * them it stays off. */
  if (ctx->options.jit != STAX_JIT_OFF && ctx->jit_function >= 0)
    STAX_GOTO_IF_ERROR(status, stax_vm_jit_frame_create(ctx), fail);
  if (!ctx->options.disable_memory_plan && !stax_vm_memory_plan_env_off())
    STAX_GOTO_IF_ERROR(status, stax_vm_memory_frame_create(ctx, &ctx->memory), fail);
  if (ctx->options.trace)
    STAX_GOTO_IF_ERROR(status, stax_context_trace_start(ctx, ctx->options.trace_max_events), fail);
  *out_context = ctx;
  return STAX_OK;
fail:
  stax_context_destroy(ctx);
  return status;
}

/* STAX_MEMORY_PLAN=0 (or off/false) switches memory planning off for contexts created from
 * then on, for comparisons and tests; the context option does the same per context. */
static bool stax_vm_memory_plan_env_off(void) {
  const char* value = getenv("STAX_MEMORY_PLAN");
  return value && (strcmp(value, "0") == 0 || strcmp(value, "off") == 0 ||
                   strcmp(value, "false") == 0);
}

/* ---- running ----------------------------------------------------------------------------- */

static void stax_vm_declared_shape(const stax_program_t* program, const stax_vm_io_t* io, char* buf,
                                   size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < io->rank && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%s", d ? ", " : "",
                             stax_vm_program_string(program, program->io_dim_texts[io->dim_texts_first + d]));
  if (used < size) snprintf(buf + used, size - used, "]");
}

static stax_status_t stax_vm_check_arguments(const stax_context_t* ctx, int32_t input_count,
                                             stax_tensor_t* const* inputs, int32_t output_count,
                                             stax_tensor_t** out_outputs) {
  const stax_program_t* program = ctx->program;
  if (input_count != program->inputs_count)
    return stax_status_make(STAX_INVALID_ARGUMENT, "the program takes %d inputs, got %d",
                            program->inputs_count, input_count);
  if (output_count != program->outputs_count)
    return stax_status_make(STAX_INVALID_ARGUMENT, "the program has %d outputs, got room for %d",
                            program->outputs_count, output_count);
  if ((input_count > 0 && !inputs) || (output_count > 0 && !out_outputs))
    return stax_status_make(STAX_INVALID_ARGUMENT, "inputs or out_outputs is NULL");
  for (int32_t i = 0; i < input_count; i++) {
    const stax_vm_io_t* io = &program->inputs[i];
    const char* name = stax_vm_program_string(program, io->name);
    const stax_tensor_t* tensor = inputs[i];
    if (!tensor)
      return stax_status_make(STAX_INVALID_ARGUMENT, "input %d \"%s\" is NULL", i, name);
    bool sequence = stax_vm_register_is_sequence(program, io->reg);
    if (tensor->is_sequence != sequence) {
      if (sequence)
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "input \"%s\" is a %s tensor %s, but the model says a sequence of "
                                "%s tensors",
                                name, stax_dtype_name(tensor->dtype),
                                stax_dims_text(tensor->rank, tensor->dims).text,
                                stax_dtype_name((stax_dtype_t)io->dtype));
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "input \"%s\" is a sequence of %lld %s tensors, but the model says "
                              "a tensor",
                              name, (long long)tensor->length, stax_dtype_name(tensor->dtype));
    }
    if (sequence && (int32_t)tensor->dtype != io->dtype)
      return stax_status_make(STAX_DTYPE_MISMATCH,
                              "input \"%s\" is a sequence of %s tensors, but the model says %s",
                              name, stax_dtype_name(tensor->dtype),
                              stax_dtype_name((stax_dtype_t)io->dtype));
    if ((int32_t)tensor->dtype != io->dtype)
      return stax_status_make(STAX_DTYPE_MISMATCH, "input \"%s\" is %s, but the model says %s",
                              name, stax_dtype_name(tensor->dtype),
                              stax_dtype_name((stax_dtype_t)io->dtype));
    if (tensor->rank != io->rank) {
      char declared[256];
      stax_vm_declared_shape(program, io, declared, sizeof(declared));
      return stax_status_make(STAX_SHAPE_MISMATCH,
                              "input \"%s\" has rank %d (dims %s), but the model says rank %d %s",
                              name, tensor->rank, stax_dims_text(tensor->rank, tensor->dims).text,
                              io->rank, declared);
    }
  }
  return STAX_OK;
}

stax_status_t stax_context_run(stax_context_t* ctx, int32_t input_count,
                               stax_tensor_t* const* inputs, int32_t output_count,
                               stax_tensor_t** out_outputs) {
  if (out_outputs)
    for (int32_t i = 0; i < output_count; i++) out_outputs[i] = NULL;
  if (!ctx) return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_run: context is NULL");
  const stax_program_t* program = ctx->program;
  STAX_RETURN_IF_ERROR(stax_vm_check_arguments(ctx, input_count, inputs, output_count, out_outputs));
  if (atomic_exchange(&ctx->running, true))
    return stax_status_make(STAX_FAILED_PRECONDITION,
                            "the context is already running; use one context per thread");
  for (int32_t s = 0; s < ctx->symbol_slots; s++) ctx->symbols[s] = STAX_SYMBOL_UNBOUND;
  ctx->shape_stack_count = 0;
  ctx->timing_instruction = -1;
  ctx->inputs = inputs;
  memset(&ctx->memory_counters, 0, sizeof(ctx->memory_counters));
  ctx->plan_bypass = 0;
  /* Whether this call records is decided once: the dispatch loop reads ctx->timing once. */
  ctx->tracing = ctx->trace && stax_vm_trace_recording(ctx->trace);
  ctx->timing = ctx->options.profile_timing || ctx->tracing;
  uint64_t call_start = 0;
  if (ctx->tracing) {
    ctx->trace_tid = stax_vm_trace_thread_id();
    stax_vm_trace_name_thread(ctx->trace, ctx->trace_tid, "stax calls");
    call_start = stax_vm_trace_now();
  }
  stax_vm_jit_run_begin(ctx);
  stax_status_t status = stax_vm_run_guards(ctx);
  /* The layout needs the symbols the guards bind. */
  if (status == STAX_OK) status = stax_vm_memory_begin_call(ctx);
  if (status == STAX_OK) {
    bool use_goto = ctx->options.dispatch != STAX_DISPATCH_SWITCH && STAX_VM_HAVE_COMPUTED_GOTO;
#if STAX_VM_HAVE_COMPUTED_GOTO
    status = use_goto ? stax_vm_run_goto(ctx) : stax_vm_run_switch(ctx);
#else
    (void)use_goto;
    status = stax_vm_run_switch(ctx);
#endif
  }
  for (int32_t o = 0; o < program->outputs_count && status == STAX_OK; o++) {
    if (!ctx->outputs[o])
      status = stax_status_make(STAX_INTERNAL, "output %d \"%s\" was never stored", o,
                                stax_vm_program_string(program, program->outputs[o].name));
  }
  for (int32_t o = 0; o < program->outputs_count; o++) {
    if (status == STAX_OK) {
      out_outputs[o] = ctx->outputs[o];
    } else if (ctx->outputs[o]) {
      stax_tensor_release(ctx->outputs[o]);
    }
    ctx->outputs[o] = NULL;
  }
  /* The frame's bin: whatever a register still holds goes now. */
  for (int32_t r = 0; r < program->registers_count; r++) stax_vm_take_register(ctx, r, NULL);
  stax_vm_loops_reset(ctx);
  stax_status_t memory_status = stax_vm_memory_end_call(ctx);
  if (memory_status && status == STAX_OK) {
    for (int32_t o = 0; o < program->outputs_count; o++) {
      stax_tensor_release(out_outputs[o]);
      out_outputs[o] = NULL;
    }
    status = memory_status;
  } else {
    stax_status_free(memory_status);
  }
  ctx->memory_calls++;
  ctx->inputs = NULL;
  if (status == STAX_OK) stax_vm_jit_run_end(ctx);
  if (ctx->tracing) {
    stax_vm_trace_event_t event = {.start_ns = call_start,
                                   .duration_ns = stax_vm_trace_now() - call_start,
                                   .tid = ctx->trace_tid,
                                   .kind = STAX_VM_TRACE_CALL,
                                   .index = (int32_t)ctx->calls,
                                   .segment = -1,
                                   .group = -1};
    stax_vm_trace_add(ctx->trace, &event);
  }
  ctx->tracing = false;
  ctx->calls++;
  atomic_store(&ctx->running, false);
  return status;
}

/* ---- profiling --------------------------------------------------------------------------- */

int32_t stax_context_instruction_count(const stax_context_t* ctx) {
  return ctx ? ctx->program->instructions_count : 0;
}
const uint64_t* stax_context_instruction_counts(const stax_context_t* ctx) {
  return ctx ? ctx->instruction_counts : NULL;
}
const uint64_t* stax_context_instruction_nanos(const stax_context_t* ctx) {
  return ctx ? ctx->instruction_nanos : NULL;
}
int32_t stax_context_segment_count(const stax_context_t* ctx) {
  return ctx ? ctx->program->segments_count : 0;
}
const uint64_t* stax_context_segment_counts(const stax_context_t* ctx) {
  return ctx ? ctx->segment_counts : NULL;
}

stax_status_t stax_context_memory_stats(const stax_context_t* ctx, stax_memory_stats_t* out_stats) {
  if (!out_stats)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_memory_stats: out_stats is NULL");
  memset(out_stats, 0, sizeof(*out_stats));
  if (!ctx) return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_memory_stats: context is NULL");
  const stax_vm_memory_plan_t* plan = ctx->program->memory_plan;
  const stax_vm_memory_counters_t* c = &ctx->memory_counters;
  out_stats->planned = ctx->memory != NULL;
  out_stats->planned_values = plan ? plan->value_count : 0;
  out_stats->slots = plan ? plan->slot_count : 0;
  out_stats->inplace_values = plan ? plan->inplace_count : 0;
  out_stats->calls = ctx->memory_calls;
  out_stats->arena_bytes = ctx->memory ? c->arena_bytes : 0;
  out_stats->arena_peak_bytes = stax_vm_memory_peak_bytes(ctx->memory);
  out_stats->arena_capacity_bytes = stax_vm_memory_arena_capacity(ctx->memory);
  out_stats->temp_bytes = c->temp_bytes;
  out_stats->temp_allocations = c->temp_allocations;
  out_stats->output_allocations = c->output_allocations;
  out_stats->arena_grows = c->arena_grows;
  out_stats->fallbacks = c->fallbacks;
  out_stats->inplace = c->inplace;
  return STAX_OK;
}

stax_status_t stax_context_memory_stats_json(const stax_context_t* ctx, FILE* out) {
  stax_memory_stats_t s;
  STAX_RETURN_IF_ERROR(stax_context_memory_stats(ctx, &s));
  fprintf(out,
          "{\"planned\": %s, \"planned_values\": %d, \"slots\": %d, \"inplace_values\": %d, "
          "\"calls\": %llu, \"arena_bytes\": %llu, \"arena_peak_bytes\": %llu, "
          "\"arena_capacity_bytes\": %llu, \"temp_bytes\": %llu, \"temp_allocations\": %llu, "
          "\"output_allocations\": %llu, \"arena_grows\": %llu, \"fallbacks\": %llu, "
          "\"inplace\": %llu}",
          s.planned ? "true" : "false", s.planned_values, s.slots, s.inplace_values,
          (unsigned long long)s.calls, (unsigned long long)s.arena_bytes,
          (unsigned long long)s.arena_peak_bytes, (unsigned long long)s.arena_capacity_bytes,
          (unsigned long long)s.temp_bytes, (unsigned long long)s.temp_allocations,
          (unsigned long long)s.output_allocations, (unsigned long long)s.arena_grows,
          (unsigned long long)s.fallbacks, (unsigned long long)s.inplace);
  return STAX_OK;
}

/* ---- tracing ------------------------------------------------------------------------------ */

stax_status_t stax_context_trace_start(stax_context_t* ctx, int64_t max_events) {
  if (!ctx) return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_trace_start: no context");
  if (max_events < 0)
    return stax_status_make(STAX_INVALID_ARGUMENT, "trace: max_events is %lld, below 0",
                            (long long)max_events);
  /* A new trace each start: background compiles of the old one may still hold it. */
  stax_vm_trace_t* trace = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_trace_create(ctx->allocator, max_events, &trace));
  stax_vm_trace_release(ctx->trace);
  ctx->trace = trace;
  return STAX_OK;
}

void stax_context_trace_stop(stax_context_t* ctx) {
  if (ctx && ctx->trace) stax_vm_trace_set_recording(ctx->trace, false, false);
}

stax_status_t stax_context_trace_stats(const stax_context_t* ctx, stax_trace_stats_t* out_stats) {
  if (!out_stats)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_trace_stats: out_stats is NULL");
  memset(out_stats, 0, sizeof(*out_stats));
  if (!ctx) return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_trace_stats: no context");
  if (!ctx->trace) return STAX_OK;
  out_stats->recording = stax_vm_trace_recording(ctx->trace);
  stax_vm_trace_counts(ctx->trace, &out_stats->events, &out_stats->dropped,
                       &out_stats->max_events);
  return STAX_OK;
}

stax_status_t stax_context_trace_write(const stax_context_t* ctx, FILE* out) {
  if (!ctx || !out)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_trace_write: no context or file");
  if (!ctx->trace)
    return stax_status_make(STAX_FAILED_PRECONDITION,
                            "the context has no trace (stax_context_trace_start, or the trace "
                            "option)");
  return stax_vm_trace_write_json(ctx->trace, out);
}

stax_status_t stax_context_trace_save(const stax_context_t* ctx, const char* path) {
  if (!path) return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_trace_save: no path");
  if (ctx && !ctx->trace) return stax_context_trace_write(ctx, stdout); /* its error */
  FILE* f = fopen(path, "w");
  if (!f) return stax_status_make(STAX_IO_ERROR, "cannot write the trace to %s: %s", path,
                                  strerror(errno));
  stax_status_t status = stax_context_trace_write(ctx, f);
  if (fclose(f) != 0 && !status)
    status = stax_status_make(STAX_IO_ERROR, "cannot write the trace to %s", path);
  return status;
}
