/* The trace buffer and its Chrome trace-event writer (trace.h). Events go into fixed-size
 * chunks allocated as needed (no copy when the buffer grows, nothing reserved up front),
 * under one mutex: the calling thread and the compiler thread both append. */
#include "vm/trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stax/stax.h"

#define TRACE_CHUNK_EVENTS 4096
#define TRACE_MAX_THREADS 64

struct stax_vm_trace_s {
  stax_allocator_t allocator;
  atomic_int refs;
  pthread_mutex_t lock;
  uint64_t epoch_ns; /* ts 0 in the file */
  int64_t max_events;
  int64_t count;
  int64_t dropped;
  uint64_t first_drop_ns;
  int32_t first_drop_tid;
  bool recording;
  stax_vm_trace_event_t** chunks;
  int64_t chunk_count, chunk_capacity;
  struct {
    int32_t tid;
    char name[48];
  } threads[TRACE_MAX_THREADS];
  int32_t thread_count;
};

uint64_t stax_vm_trace_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

int32_t stax_vm_trace_thread_id(void) { return (int32_t)syscall(SYS_gettid); }

stax_status_t stax_vm_trace_create(stax_allocator_t allocator, int64_t max_events,
                                   stax_vm_trace_t** out_trace) {
  *out_trace = NULL;
  stax_vm_trace_t* trace = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(allocator, 1, sizeof(*trace), (void**)&trace));
  trace->allocator = allocator;
  atomic_init(&trace->refs, 1);
  if (pthread_mutex_init(&trace->lock, NULL) != 0) {
    stax_allocator_free(allocator, trace, sizeof(*trace));
    return stax_status_make(STAX_INTERNAL, "trace: cannot create a mutex");
  }
  trace->epoch_ns = stax_vm_trace_now();
  trace->max_events = max_events > 0 ? max_events : STAX_VM_TRACE_DEFAULT_MAX_EVENTS;
  trace->recording = true;
  *out_trace = trace;
  return STAX_OK;
}

void stax_vm_trace_retain(stax_vm_trace_t* trace) {
  if (trace) atomic_fetch_add(&trace->refs, 1);
}

static void trace_free_chunks(stax_vm_trace_t* trace) {
  for (int64_t c = 0; c < trace->chunk_count; c++)
    stax_allocator_free(trace->allocator, trace->chunks[c],
                        TRACE_CHUNK_EVENTS * sizeof(stax_vm_trace_event_t));
  if (trace->chunks)
    stax_allocator_free(trace->allocator, trace->chunks,
                        (size_t)trace->chunk_capacity * sizeof(*trace->chunks));
  trace->chunks = NULL;
  trace->chunk_count = trace->chunk_capacity = 0;
}

void stax_vm_trace_release(stax_vm_trace_t* trace) {
  if (!trace || atomic_fetch_sub(&trace->refs, 1) != 1) return;
  trace_free_chunks(trace);
  pthread_mutex_destroy(&trace->lock);
  stax_allocator_free(trace->allocator, trace, sizeof(*trace));
}

/* Room for one more event (under the lock): false when out of memory. */
static bool trace_reserve(stax_vm_trace_t* trace) {
  if (trace->count < trace->chunk_count * TRACE_CHUNK_EVENTS) return true;
  if (trace->chunk_count == trace->chunk_capacity) {
    int64_t capacity = trace->chunk_capacity ? trace->chunk_capacity * 2 : 16;
    stax_vm_trace_event_t** chunks = NULL;
    stax_status_t status = stax_allocator_calloc(trace->allocator, (size_t)capacity,
                                                 sizeof(*chunks), (void**)&chunks);
    if (status) {
      stax_status_free(status);
      return false;
    }
    if (trace->chunks) {
      memcpy(chunks, trace->chunks, (size_t)trace->chunk_count * sizeof(*chunks));
      stax_allocator_free(trace->allocator, trace->chunks,
                          (size_t)trace->chunk_capacity * sizeof(*chunks));
    }
    trace->chunks = chunks;
    trace->chunk_capacity = capacity;
  }
  stax_vm_trace_event_t* chunk = NULL;
  stax_status_t status = stax_allocator_malloc(
      trace->allocator, TRACE_CHUNK_EVENTS * sizeof(stax_vm_trace_event_t), (void**)&chunk);
  if (status) {
    stax_status_free(status);
    return false;
  }
  trace->chunks[trace->chunk_count++] = chunk;
  return true;
}

void stax_vm_trace_add(stax_vm_trace_t* trace, const stax_vm_trace_event_t* event) {
  pthread_mutex_lock(&trace->lock);
  if (!trace->recording) {
    pthread_mutex_unlock(&trace->lock);
    return;
  }
  /* Out of memory counts as the cap: the trace is a diagnostic, never a reason to fail. */
  if (trace->count >= trace->max_events || !trace_reserve(trace)) {
    if (trace->dropped++ == 0) {
      trace->first_drop_ns = event->start_ns;
      trace->first_drop_tid = event->tid;
    }
  } else {
    trace->chunks[trace->count / TRACE_CHUNK_EVENTS][trace->count % TRACE_CHUNK_EVENTS] = *event;
    trace->count++;
  }
  pthread_mutex_unlock(&trace->lock);
}

void stax_vm_trace_name_thread(stax_vm_trace_t* trace, int32_t tid, const char* name) {
  pthread_mutex_lock(&trace->lock);
  int32_t t = 0;
  while (t < trace->thread_count && trace->threads[t].tid != tid) t++;
  if (t == trace->thread_count && t < TRACE_MAX_THREADS) {
    trace->threads[t].tid = tid;
    snprintf(trace->threads[t].name, sizeof(trace->threads[t].name), "%s", name);
    trace->thread_count++;
  }
  pthread_mutex_unlock(&trace->lock);
}

void stax_vm_trace_set_recording(stax_vm_trace_t* trace, bool recording, bool clear) {
  pthread_mutex_lock(&trace->lock);
  trace->recording = recording;
  if (clear) {
    trace_free_chunks(trace);
    trace->count = trace->dropped = 0;
    trace->thread_count = 0;
    trace->epoch_ns = stax_vm_trace_now();
  }
  pthread_mutex_unlock(&trace->lock);
}

bool stax_vm_trace_recording(const stax_vm_trace_t* trace) {
  stax_vm_trace_t* t = (stax_vm_trace_t*)trace; /* the lock is not part of the value */
  pthread_mutex_lock(&t->lock);
  bool recording = t->recording;
  pthread_mutex_unlock(&t->lock);
  return recording;
}

void stax_vm_trace_counts(const stax_vm_trace_t* trace, int64_t* out_events, int64_t* out_dropped,
                          int64_t* out_max_events) {
  stax_vm_trace_t* t = (stax_vm_trace_t*)trace;
  pthread_mutex_lock(&t->lock);
  if (out_events) *out_events = t->count;
  if (out_dropped) *out_dropped = t->dropped;
  if (out_max_events) *out_max_events = t->max_events;
  pthread_mutex_unlock(&t->lock);
}

/* ---- the JSON ------------------------------------------------------------------------------ */

/* A JSON string: quotes, backslashes and control characters escaped (node names come from
 * model files and may hold anything); bytes >= 0x80 pass through (UTF-8 stays UTF-8). */
static void json_string(FILE* out, const char* text) {
  fputc('"', out);
  for (const unsigned char* p = (const unsigned char*)(text ? text : ""); *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
    else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
    else fputc(*p, out);
  }
  fputc('"', out);
}

/* ns since the epoch as microseconds with nanosecond digits (the format's unit is us). */
static void json_micros(FILE* out, uint64_t ns) {
  fprintf(out, "%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
}

static const char* const trace_categories[STAX_VM_TRACE_KIND_COUNT] = {
    "call", "interpreter", "kernel", "compile", "compile"};

static void write_event(const stax_vm_trace_t* trace, const stax_vm_trace_event_t* e, int pid,
                        FILE* out) {
  fputs("{\"name\": ", out);
  char name[96];
  switch (e->kind) {
    case STAX_VM_TRACE_CALL: snprintf(name, sizeof(name), "run"); break;
    case STAX_VM_TRACE_INSTRUCTION: snprintf(name, sizeof(name), "%s", e->name); break;
    case STAX_VM_TRACE_KERNEL: snprintf(name, sizeof(name), "%s", e->label); break;
    case STAX_VM_TRACE_COMPILE: snprintf(name, sizeof(name), "compile %s", e->label); break;
    default:
      snprintf(name, sizeof(name), "compile segment %d (%s version)", e->segment,
               e->version ? e->version : "");
      break;
  }
  json_string(out, name);
  fprintf(out, ", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": ",
          trace_categories[e->kind >= 0 && e->kind < STAX_VM_TRACE_KIND_COUNT ? e->kind : 0]);
  json_micros(out, e->start_ns >= trace->epoch_ns ? e->start_ns - trace->epoch_ns : 0);
  fputs(", \"dur\": ", out);
  json_micros(out, e->duration_ns);
  fprintf(out, ", \"pid\": %d, \"tid\": %d, \"args\": {", pid, (int)e->tid);
  switch (e->kind) {
    case STAX_VM_TRACE_CALL: fprintf(out, "\"call\": %d", (int)e->index); break;
    case STAX_VM_TRACE_INSTRUCTION:
      fprintf(out, "\"instruction\": %d, \"opcode\": ", (int)e->index);
      json_string(out, e->opcode);
      if (e->node) {
        fputs(", \"node\": ", out);
        json_string(out, e->node);
      }
      if (e->segment >= 0) fprintf(out, ", \"segment\": %d, \"in_compiled_segment\": true",
                                   (int)e->segment);
      break;
    case STAX_VM_TRACE_KERNEL:
    case STAX_VM_TRACE_COMPILE:
      fprintf(out, "\"segment\": %d, \"group\": %d, \"version\": ", (int)e->segment, (int)e->group);
      json_string(out, e->version);
      if (e->kind == STAX_VM_TRACE_COMPILE) {
        fputs(", \"outcome\": ", out);
        json_string(out, e->outcome);
        fprintf(out, ", \"ms\": %.3f", (double)e->duration_ns * 1e-6);
      }
      break;
    default:
      fprintf(out, "\"segment\": %d, \"version\": ", (int)e->segment);
      json_string(out, e->version);
      fprintf(out, ", \"kernels\": %d, \"outcome\": ", (int)e->group);
      json_string(out, e->outcome);
      fprintf(out, ", \"ms\": %.3f", (double)e->duration_ns * 1e-6);
      break;
  }
  fputs("}}", out);
}

stax_status_t stax_vm_trace_write_json(const stax_vm_trace_t* trace, FILE* out) {
  if (!trace || !out)
    return stax_status_make(STAX_INVALID_ARGUMENT, "trace write: no trace or no file");
  stax_vm_trace_t* t = (stax_vm_trace_t*)trace;
  pthread_mutex_lock(&t->lock);
  int pid = (int)getpid();
  fputs("{\"traceEvents\": [\n", out);
  bool first = true;
  for (int32_t k = 0; k < t->thread_count; k++) {
    fprintf(out, "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                 "\"args\": {\"name\": ", first ? "" : ",\n", pid, (int)t->threads[k].tid);
    json_string(out, t->threads[k].name);
    fputs("}}", out);
    first = false;
  }
  for (int64_t i = 0; i < t->count; i++) {
    if (!first) fputs(",\n", out);
    write_event(t, &t->chunks[i / TRACE_CHUNK_EVENTS][i % TRACE_CHUNK_EVENTS], pid, out);
    first = false;
  }
  if (t->dropped > 0) {
    fprintf(out, "%s{\"name\": \"trace cap reached\", \"cat\": \"trace\", \"ph\": \"i\", "
                 "\"s\": \"g\", \"ts\": ", first ? "" : ",\n");
    json_micros(out, t->first_drop_ns >= t->epoch_ns ? t->first_drop_ns - t->epoch_ns : 0);
    fprintf(out, ", \"pid\": %d, \"tid\": %d, \"args\": {\"dropped_events\": %lld}}", pid,
            (int)t->first_drop_tid, (long long)t->dropped);
  }
  fprintf(out, "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"producer\": \"stax %s\", "
               "\"events\": %lld, \"max_events\": %lld, \"dropped_events\": %lld",
          stax_version(), (long long)t->count, (long long)t->max_events, (long long)t->dropped);
  if (t->dropped > 0)
    fprintf(out, ", \"note\": \"the trace reached its cap of %lld events: the %lld events after "
                 "that were dropped (a larger cap: stax_context_trace_start's max_events)\"",
            (long long)t->max_events, (long long)t->dropped);
  fputs("}}\n", out);
  bool failed = ferror(out) != 0;
  pthread_mutex_unlock(&t->lock);
  return failed ? stax_status_make(STAX_IO_ERROR, "trace write: the file could not be written")
                : STAX_OK;
}
