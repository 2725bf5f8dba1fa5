/* Execution traces (docs/vm.md, "Tracing"): a bounded, thread-safe in-memory buffer of timed
 * events — calls, interpreted instructions, JIT kernel runs, compiles — written out in the
 * Chrome trace-event format (chrome://tracing, Perfetto). A context owns one while tracing;
 * the background compiles it asks for hold a reference too, so the compiler thread's events
 * land in the trace of the context that wanted them. */
#ifndef STAX_VM_TRACE_H_
#define STAX_VM_TRACE_H_

#include <stdio.h>

#include "stax/base.h"

/* Events kept when the caller gives no cap: about 100 bytes each, so at most ~50 MB. */
#define STAX_VM_TRACE_DEFAULT_MAX_EVENTS 500000

typedef enum stax_vm_trace_kind_e {
  STAX_VM_TRACE_CALL = 0,    /* one stax_context_run */
  STAX_VM_TRACE_INSTRUCTION, /* an interpreted instruction */
  STAX_VM_TRACE_KERNEL,      /* a JIT kernel run */
  STAX_VM_TRACE_COMPILE,     /* a kernel's compile (or load from the object cache) */
  STAX_VM_TRACE_VERSION,     /* a version's compile: all of its kernels */
  STAX_VM_TRACE_KIND_COUNT
} stax_vm_trace_kind_t;

typedef struct stax_vm_trace_event_t {
  uint64_t start_ns; /* stax_vm_trace_now() */
  uint64_t duration_ns;
  int32_t tid;
  int32_t kind;        /* stax_vm_trace_kind_t */
  int32_t index;       /* INSTRUCTION: the instruction; CALL: the context's call number */
  int32_t segment;     /* KERNEL, COMPILE, VERSION (-1: none) */
  int32_t group;       /* KERNEL, COMPILE; VERSION: the kernels it compiles */
  /* Texts that outlive the trace's readers: static strings, or the program's (its string
   * table lives as long as the program, which the trace's owner keeps alive). */
  const char* name;    /* INSTRUCTION: the node's op, or the opcode; others: NULL (label) */
  const char* opcode;  /* INSTRUCTION */
  const char* node;    /* INSTRUCTION: the model node's name, or NULL */
  const char* version; /* KERNEL, COMPILE, VERSION: "generic" or "exact" */
  /* COMPILE: "compiled", "interpreted" (no lowering: the group stays interpreted), "failed";
   * VERSION: "compiled", "failed", or "cache" (every kernel loaded from the object cache). */
  const char* outcome;
  char label[40];      /* KERNEL, COMPILE: the kernel's name (copied: descriptions die) */
} stax_vm_trace_event_t;

typedef struct stax_vm_trace_s stax_vm_trace_t;

/* max_events <= 0: STAX_VM_TRACE_DEFAULT_MAX_EVENTS. Recording from the start. */
STAX_MUST_USE stax_status_t stax_vm_trace_create(stax_allocator_t allocator, int64_t max_events,
                                                 stax_vm_trace_t** out_trace);
void stax_vm_trace_retain(stax_vm_trace_t* trace);
void stax_vm_trace_release(stax_vm_trace_t* trace);

/* The clock of every event (CLOCK_MONOTONIC, ns) and the calling thread's id. */
uint64_t stax_vm_trace_now(void);
int32_t stax_vm_trace_thread_id(void);

/* Appends a copy of *event (thread-safe). Past the cap, or while not recording, the event is
 * dropped (counted, and the first drop's time noted in the file). */
void stax_vm_trace_add(stax_vm_trace_t* trace, const stax_vm_trace_event_t* event);
/* Names a thread's track ("stax calls", "stax jit compiler"); the first name given stays. */
void stax_vm_trace_name_thread(stax_vm_trace_t* trace, int32_t tid, const char* name);
/* Stops or resumes recording; clear drops every event (and the counts) too. */
void stax_vm_trace_set_recording(stax_vm_trace_t* trace, bool recording, bool clear);
bool stax_vm_trace_recording(const stax_vm_trace_t* trace);
void stax_vm_trace_counts(const stax_vm_trace_t* trace, int64_t* out_events,
                          int64_t* out_dropped, int64_t* out_max_events);

/* {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}: one "ph": "X"
 * complete event per event (ts and dur in microseconds from the trace's creation), a
 * thread_name metadata event per named thread, and, when events were dropped, an instant
 * event at the first drop and a note in otherData. */
STAX_MUST_USE stax_status_t stax_vm_trace_write_json(const stax_vm_trace_t* trace, FILE* out);

#endif /* STAX_VM_TRACE_H_ */
