/* The per-call log `stax run --stats-json` adds to the library's statistics, for
 * `stax report` (python/stax/_report.py): every call's start and duration, how it ran
 * (compiled, partly, interpreted) and which compiles landed before it ended. The library keeps
 * only totals; the log is the difference of those totals around each call, so it costs two
 * counter reads per call, outside the timed region. */
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

/* Calls kept at most (32 bytes each); later calls are counted in "dropped". */
#define STAX_CLI_CALL_LOG_MAX (1u << 20)

static const char* const how_names[] = {"compiled", "partial", "interpreted"};

/* Compiles that landed so far (successful or not) and their compile time, over segments. */
static stax_status_t compile_totals(const stax_program_t* program, uint64_t* compiles,
                                    double* compile_ms) {
  *compiles = 0;
  *compile_ms = 0;
  for (int32_t s = 0; s < stax_program_segment_count(program); s++) {
    stax_jit_segment_stats_t st;
    STAX_RETURN_IF_ERROR(stax_program_jit_stats(program, s, &st), "segment %d", s);
    *compiles += st.compiles + st.failures;
    *compile_ms += st.compile_ms;
  }
  return STAX_OK;
}

stax_status_t stax_cli_call_log_begin(stax_cli_call_log_t* log, const stax_program_t* program) {
  memset(log, 0, sizeof(*log));
  log->origin = -1;
  STAX_RETURN_IF_ERROR(stax_program_jit_call_stats(program, &log->calls));
  return compile_totals(program, &log->compiles, &log->compile_ms);
}

stax_status_t stax_cli_call_log_add(stax_cli_call_log_t* log, const stax_program_t* program,
                                    double start, double seconds, bool warmup) {
  stax_jit_call_stats_t calls;
  uint64_t compiles;
  double compile_ms;
  STAX_RETURN_IF_ERROR(stax_program_jit_call_stats(program, &calls));
  STAX_RETURN_IF_ERROR(compile_totals(program, &compiles, &compile_ms));
  /* With the JIT off no counter moves: the call was interpreted. */
  uint8_t how = calls.compiled > log->calls.compiled  ? 0
                : calls.partial > log->calls.partial ? 1
                                                     : 2;
  stax_cli_call_record_t record = {.start = 0,
                                   .seconds = seconds,
                                   .compile_ms = compile_ms - log->compile_ms,
                                   .compiles = (uint32_t)(compiles - log->compiles),
                                   .how = how,
                                   .warmup = warmup};
  log->calls = calls;
  log->compiles = compiles;
  log->compile_ms = compile_ms;
  if (log->origin < 0) log->origin = start;
  record.start = start - log->origin;
  if (log->count >= STAX_CLI_CALL_LOG_MAX) {
    log->dropped++;
    return STAX_OK;
  }
  if (log->count == log->capacity) {
    size_t capacity = log->capacity ? log->capacity * 2 : 1024;
    stax_cli_call_record_t* grown = realloc(log->records, capacity * sizeof(*grown));
    if (!grown)
      return stax_status_make(STAX_OUT_OF_MEMORY, "the per-call log of %zu calls", capacity);
    log->records = grown;
    log->capacity = capacity;
  }
  log->records[log->count++] = record;
  return STAX_OK;
}

static void call_log_json(const stax_cli_call_log_t* log, FILE* out) {
  fprintf(out,
          "{\"calls\": %zu, \"dropped\": %llu, \"fields\": [\"start_s\", \"seconds\", \"ran\", "
          "\"compiles\", \"compile_ms\", \"warmup\"], \"records\": [",
          log->count, (unsigned long long)log->dropped);
  for (size_t i = 0; i < log->count; i++) {
    const stax_cli_call_record_t* r = &log->records[i];
    fprintf(out, "%s\n    [%.9f, %.9f, \"%s\", %u, %.3f, %s]", i ? "," : "", r->start, r->seconds,
            how_names[r->how], r->compiles, r->compile_ms, r->warmup ? "true" : "false");
  }
  fprintf(out, "%s]}", log->count ? "\n  " : "");
}

stax_status_t stax_cli_stats_json_with_calls(const stax_context_t* context,
                                             const stax_cli_call_log_t* log, FILE* out) {
  /* The library writes one JSON object ending in "\n}\n"; the log goes in before its brace. */
  char* text = NULL;
  size_t size = 0;
  FILE* memory = open_memstream(&text, &size);
  if (!memory) return stax_status_make(STAX_OUT_OF_MEMORY, "the statistics' text");
  stax_status_t status = stax_context_stats_json(context, memory);
  if (fclose(memory) != 0 && !status)
    status = stax_status_make(STAX_OUT_OF_MEMORY, "the statistics' text");
  if (!status && (size < 3 || strcmp(text + size - 3, "\n}\n") != 0))
    status = stax_status_make(STAX_INTERNAL, "the statistics do not end in a JSON object's '}'");
  if (!status) {
    fwrite(text, 1, size - 3, out);
    fprintf(out, ",\n  \"per_call\": ");
    call_log_json(log, out);
    fprintf(out, "\n}\n");
  }
  free(text);
  return status;
}

void stax_cli_call_log_free(stax_cli_call_log_t* log) {
  free(log->records);
  memset(log, 0, sizeof(*log));
}
