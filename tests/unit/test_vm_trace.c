/* Execution traces: the trace writer (Chrome trace-event JSON, escaping, microsecond
 * formatting, the cap and its note, thread names, appends from several threads at once),
 * and traces of real calls through the context API: interpreted instructions, calls, start
 * / stop / restart, and, where the JIT is available, kernel runs and compiles in sync and
 * background mode; plus the progress callback of sync-mode compiles. */
#include <pthread.h>

#include "test_vm_util.h"
#include "vm/trace.h"

/* The JSON of a trace, malloc'd (caller frees). */
static char* trace_json(const stax_vm_trace_t* trace) {
  char* text = NULL;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  if (!out) return NULL;
  CHECK_OK(stax_vm_trace_write_json(trace, out));
  fclose(out);
  return text;
}

static char* context_json(const stax_context_t* context) {
  char* text = NULL;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  if (!out) return NULL;
  CHECK_OK(stax_context_trace_write(context, out));
  fclose(out);
  return text;
}

static int count_of(const char* text, const char* needle) {
  int n = 0;
  for (const char* p = text; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static void test_writer_format_escaping_and_cap(void) {
  stax_vm_trace_t* trace = NULL;
  CHECK_OK(stax_vm_trace_create(vm_alloc(), 3, &trace));
  if (!trace) return;
  uint64_t t0 = stax_vm_trace_now();
  stax_vm_trace_name_thread(trace, 11, "stax \"calls\"");
  stax_vm_trace_name_thread(trace, 11, "renamed"); /* the first name stays */
  stax_vm_trace_name_thread(trace, 12, "stax jit compiler");
  stax_vm_trace_event_t instruction = {.start_ns = t0 + 1000, .duration_ns = 2500, .tid = 11,
                                       .kind = STAX_VM_TRACE_INSTRUCTION, .index = 7,
                                       .segment = -1, .group = -1, .name = "MatMul",
                                       .opcode = "MatMul", .node = "a\"b\\c\nd"};
  stax_vm_trace_add(trace, &instruction);
  stax_vm_trace_event_t kernel = {.start_ns = t0 + 4000, .duration_ns = 1234567, .tid = 11,
                                  .kind = STAX_VM_TRACE_KERNEL, .segment = 2, .group = 3,
                                  .version = "generic"};
  snprintf(kernel.label, sizeof(kernel.label), "seg2_g3_rows");
  stax_vm_trace_add(trace, &kernel);
  stax_vm_trace_event_t compile = {.start_ns = t0, .duration_ns = 5000000, .tid = 12,
                                   .kind = STAX_VM_TRACE_COMPILE, .segment = 2, .group = 3,
                                   .version = "exact", .outcome = "compiled"};
  snprintf(compile.label, sizeof(compile.label), "seg2_g3");
  stax_vm_trace_add(trace, &compile);
  stax_vm_trace_event_t call = {.start_ns = t0, .duration_ns = 1, .tid = 11,
                                .kind = STAX_VM_TRACE_CALL};
  stax_vm_trace_add(trace, &call); /* over the cap of 3 */
  stax_vm_trace_add(trace, &call);
  int64_t events = 0, dropped = 0, cap = 0;
  stax_vm_trace_counts(trace, &events, &dropped, &cap);
  CHECK_EQ_INT(events, 3);
  CHECK_EQ_INT(dropped, 2);
  CHECK_EQ_INT(cap, 3);
  char* json = trace_json(trace);
  CHECK(json && strncmp(json, "{\"traceEvents\": [\n", 18) == 0);
  if (json) {
    CHECK_EQ_INT(count_of(json, "\"ph\": \"X\""), 3);
    CHECK_EQ_INT(count_of(json, "\"ph\": \"M\""), 2);
    CHECK(strstr(json, "\"args\": {\"name\": \"stax \\\"calls\\\"\"}") != NULL);
    CHECK(strstr(json, "renamed") == NULL);
    /* Quotes, backslashes and control characters escaped. */
    CHECK(strstr(json, "\"node\": \"a\\\"b\\\\c\\u000ad\"") != NULL);
    CHECK(strstr(json, "\"name\": \"MatMul\", \"cat\": \"interpreter\", \"ph\": \"X\"") != NULL);
    CHECK(strstr(json, "\"args\": {\"instruction\": 7, \"opcode\": \"MatMul\"") != NULL);
    /* Microseconds with three decimals. */
    CHECK(strstr(json, "\"dur\": 2.500, \"pid\": ") != NULL);
    CHECK(strstr(json, "\"dur\": 1234.567, \"pid\": ") != NULL);
    CHECK(strstr(json, "\"name\": \"seg2_g3_rows\", \"cat\": \"kernel\"") != NULL);
    CHECK(strstr(json, "\"segment\": 2, \"group\": 3, \"version\": \"generic\"") != NULL);
    CHECK(strstr(json, "\"name\": \"compile seg2_g3\", \"cat\": \"compile\"") != NULL);
    CHECK(strstr(json, "\"outcome\": \"compiled\", \"ms\": 5.000") != NULL);
    CHECK(strstr(json, "\"tid\": 12, \"args\": {\"segment\": 2") != NULL);
    /* The cap: an instant event at the first drop and a note. */
    CHECK(strstr(json, "\"name\": \"trace cap reached\", \"cat\": \"trace\", \"ph\": \"i\"") != NULL);
    CHECK(strstr(json, "\"args\": {\"dropped_events\": 2}") != NULL);
    CHECK(strstr(json, "\"events\": 3, \"max_events\": 3, \"dropped_events\": 2") != NULL);
    CHECK(strstr(json, "the trace reached its cap of 3 events") != NULL);
    CHECK(strstr(json, "\"displayTimeUnit\": \"ms\"") != NULL);
    size_t n = strlen(json);
    CHECK(n > 3 && strcmp(json + n - 3, "}}\n") == 0);
  }
  free(json);
  /* Not recording: dropped without counting; clear empties it. */
  stax_vm_trace_set_recording(trace, false, false);
  stax_vm_trace_add(trace, &call);
  stax_vm_trace_counts(trace, &events, &dropped, NULL);
  CHECK_EQ_INT(events, 3);
  CHECK_EQ_INT(dropped, 2);
  CHECK(!stax_vm_trace_recording(trace));
  stax_vm_trace_set_recording(trace, true, true);
  stax_vm_trace_counts(trace, &events, &dropped, NULL);
  CHECK_EQ_INT(events, 0);
  CHECK_EQ_INT(dropped, 0);
  json = trace_json(trace);
  CHECK(json && strstr(json, "{\"traceEvents\": [\n\n],") != NULL); /* empty, still valid */
  free(json);
  stax_vm_trace_release(trace);
}

typedef struct {
  stax_vm_trace_t* trace;
  int32_t tid;
} adder_arg_t;

static void* add_many(void* arg) {
  adder_arg_t* a = arg;
  for (int i = 0; i < 5000; i++) {
    stax_vm_trace_event_t e = {.start_ns = stax_vm_trace_now(), .duration_ns = (uint64_t)i,
                               .tid = a->tid, .kind = STAX_VM_TRACE_CALL, .index = i};
    stax_vm_trace_add(a->trace, &e);
  }
  return NULL;
}

/* The calling thread and the compiler thread append at once: every event is kept (across
 * several chunks) or counted as dropped. */
static void test_writer_threads(void) {
  for (int capped = 0; capped < 2; capped++) {
    stax_vm_trace_t* trace = NULL;
    CHECK_OK(stax_vm_trace_create(vm_alloc(), capped ? 7000 : 0, &trace));
    if (!trace) return;
    pthread_t threads[4];
    adder_arg_t args[4];
    for (int t = 0; t < 4; t++) {
      args[t] = (adder_arg_t){trace, 100 + t};
      CHECK(pthread_create(&threads[t], NULL, add_many, &args[t]) == 0);
    }
    for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
    int64_t events = 0, dropped = 0, cap = 0;
    stax_vm_trace_counts(trace, &events, &dropped, &cap);
    CHECK_EQ_INT(events, capped ? 7000 : 20000);
    CHECK_EQ_INT(dropped, capped ? 13000 : 0);
    CHECK_EQ_INT(cap, capped ? 7000 : STAX_VM_TRACE_DEFAULT_MAX_EVENTS);
    char* json = trace_json(trace);
    CHECK(json && count_of(json, "\"cat\": \"call\"") == (capped ? 7000 : 20000));
    free(json);
    stax_vm_trace_release(trace);
  }
}

/* out = Relu((x + y) * x), x and y: float32[B, 4]. */
static stax_program_t* add_mul_relu(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  if (!g) return NULL;
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 64), vm_const(g, 4)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t sum = vm_binary(g, STAX_OP_Add, "add", x, y);
  stax_value_id_t product = vm_binary(g, STAX_OP_Mul, "mul", sum, x);
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", product));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  return program;
}

static void run_once(stax_context_t* context, int64_t rows) {
  int64_t dims[2] = {rows, 4};
  float data[256];
  for (int i = 0; i < rows * 4; i++) data[i] = (float)(i % 7) - 3.0f;
  stax_tensor_t* inputs[2] = {vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, data),
                              vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, data)};
  stax_tensor_t* output = NULL;
  CHECK_OK(stax_context_run(context, 2, inputs, 1, &output));
  if (output) {
    CHECK(vm_dims_equal(output, 2, dims));
    for (int i = 0; i < rows * 4; i++) {
      float x = data[i];
      CHECK_NEAR(vm_f32_at(output, i), (x + x) * x > 0 ? (x + x) * x : 0, 1e-6);
    }
    stax_tensor_release(output);
  }
  stax_tensor_release(inputs[0]);
  stax_tensor_release(inputs[1]);
}

static void test_context_trace_interpreter(void) {
  stax_program_t* program = add_mul_relu();
  if (!program) return;
  stax_context_t* plain = vm_context(program, STAX_DISPATCH_GOTO);
  if (plain) {
    CHECK_ERROR(stax_context_trace_write(plain, stdout), STAX_FAILED_PRECONDITION, "no trace");
    stax_trace_stats_t stats;
    CHECK_OK(stax_context_trace_stats(plain, &stats));
    CHECK(!stats.recording && stats.events == 0 && stats.max_events == 0);
    stax_context_destroy(plain);
  }
  for (int mode = 0; mode < 2; mode++) {
    stax_context_options_t options = {.dispatch = vm_dispatch_mode(mode), .trace = true};
    stax_context_t* context = NULL;
    CHECK_OK(stax_context_create(vm_alloc(), program, &options, &context));
    if (!context) continue;
    run_once(context, 3);
    run_once(context, 5);
    char* json = context_json(context);
    CHECK(json != NULL);
    if (json) {
      CHECK_EQ_INT(count_of(json, "\"cat\": \"call\""), 2);
      CHECK(strstr(json, "\"args\": {\"call\": 0}") && strstr(json, "\"args\": {\"call\": 1}"));
      /* Every compute instruction once per call, named by op with its node. */
      CHECK_EQ_INT(count_of(json, "\"name\": \"Relu\", \"cat\": \"interpreter\""), 2);
      CHECK_EQ_INT(count_of(json, "\"node\": \"relu\""), count_of(json, "\"node\": \"add\""));
      CHECK(count_of(json, "\"opcode\": \"RETURN\"") == 2);
      CHECK(strstr(json, "\"args\": {\"name\": \"stax calls\"}") != NULL);
      CHECK(strstr(json, "\"dropped_events\": 0") != NULL);
      CHECK(strstr(json, "\"cat\": \"kernel\"") == NULL); /* the JIT is off */
    }
    /* profile_timing stays off: tracing does not fill the per-instruction nanoseconds. */
    const uint64_t* nanos = stax_context_instruction_nanos(context);
    uint64_t total = 0;
    for (int32_t i = 0; i < stax_context_instruction_count(context); i++) total += nanos[i];
    CHECK_EQ_INT(total, 0);
    stax_trace_stats_t stats;
    CHECK_OK(stax_context_trace_stats(context, &stats));
    CHECK(stats.recording && stats.events > 10 && stats.dropped == 0);
    int64_t before = stats.events;
    stax_context_trace_stop(context);
    run_once(context, 2);
    CHECK_OK(stax_context_trace_stats(context, &stats));
    CHECK(!stats.recording && stats.events == before);
    /* A restart clears; a small cap drops and says so. */
    CHECK_ERROR(stax_context_trace_start(context, -1), STAX_INVALID_ARGUMENT, "max_events");
    CHECK_OK(stax_context_trace_start(context, 5));
    run_once(context, 2);
    CHECK_OK(stax_context_trace_stats(context, &stats));
    CHECK(stats.recording && stats.events == 5 && stats.dropped > 0 && stats.max_events == 5);
    free(json);
    json = context_json(context);
    CHECK(json && strstr(json, "trace cap reached") && count_of(json, "\"ph\": \"X\"") == 5);
    free(json);
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

typedef struct {
  int begins, kernels, ends;
  int32_t announced_kernels, last_done;
  bool ordered;
} progress_log_t;

static void record_progress(void* data, const stax_progress_t* p) {
  progress_log_t* log = data;
  if (p->kind == STAX_PROGRESS_COMPILE_BEGIN) {
    log->begins++;
    log->announced_kernels = p->kernels;
    log->ordered &= p->done == 0;
  } else if (p->kind == STAX_PROGRESS_COMPILE_KERNEL) {
    log->kernels++;
    log->ordered &= p->done == log->last_done + 1 && p->elapsed_ms >= 0;
    log->last_done = p->done;
  } else {
    log->ends++;
    log->ordered &= p->done == log->announced_kernels;
    log->last_done = 0;
  }
}

static void test_context_trace_jit(void) {
  stax_build_info_t info;
  stax_build_info(&info);
  if (!info.jit_available) {
    printf("skipped: the JIT is unavailable (%s)\n", info.jit_unavailable);
    return;
  }
  stax_program_t* program = add_mul_relu();
  if (!program) return;
  CHECK_OK(stax_program_jit_set_cache_dir(program, "")); /* compile, not load */
  progress_log_t log = {.ordered = true};
  stax_context_options_t options = {.jit = STAX_JIT_SYNC, .jit_threshold = 1, .trace = true,
                                    .progress = record_progress, .progress_data = &log};
  stax_context_t* context = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &context));
  if (context) {
    for (int call = 0; call < 4; call++) run_once(context, call + 2);
    char* json = context_json(context);
    if (json) {
      CHECK(count_of(json, "\"cat\": \"kernel\"") >= 3);
      CHECK(strstr(json, "\"version\": \"generic\"") != NULL);
      CHECK(strstr(json, "\"cat\": \"compile\"") != NULL);
      CHECK(strstr(json, "\"outcome\": \"compiled\"") != NULL);
      CHECK(strstr(json, "compile segment 0 (generic version)") != NULL);
      /* Sync compiles are on the calling thread: one track. */
      CHECK_EQ_INT(count_of(json, "\"ph\": \"M\""), 1);
    }
    free(json);
    CHECK(log.begins >= 1 && log.ends == log.begins && log.kernels >= log.begins);
    CHECK(log.ordered);
    stax_context_destroy(context);
  }
  stax_program_release(program);

  /* Background: the compiler thread's events land in the trace, on its own track. */
  program = add_mul_relu();
  if (!program) return;
  CHECK_OK(stax_program_jit_set_cache_dir(program, ""));
  stax_context_options_t background = {.jit = STAX_JIT_BACKGROUND, .trace = true,
                                       .progress = record_progress, .progress_data = &log};
  log = (progress_log_t){.ordered = true};
  CHECK_OK(stax_context_create(vm_alloc(), program, &background, &context));
  if (context) {
    run_once(context, 3);
    stax_program_jit_drain(program);
    CHECK_EQ_INT(stax_program_jit_pending(program), 0);
    for (int call = 0; call < 3; call++) run_once(context, 4);
    char* json = context_json(context);
    if (json) {
      CHECK(strstr(json, "\"args\": {\"name\": \"stax jit compiler\"}") != NULL);
      CHECK_EQ_INT(count_of(json, "\"ph\": \"M\""), 2);
      CHECK(strstr(json, "\"cat\": \"compile\"") != NULL);
      CHECK(strstr(json, "\"cat\": \"kernel\"") != NULL);
    }
    free(json);
    CHECK_EQ_INT(log.begins, 0); /* progress reports sync compiles only */
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_writer_format_escaping_and_cap), STAX_TEST(test_writer_threads),
               STAX_TEST(test_context_trace_interpreter), STAX_TEST(test_context_trace_jit))
