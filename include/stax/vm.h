/* stax VM: compile a graph to bytecode, save and load programs, run them with user tensors.
 *
 * A program is immutable once compiled and may be shared by any number of threads; each thread
 * runs it through its own execution context (registers, shape stack, counters). */
#ifndef STAX_VM_H_
#define STAX_VM_H_

#include <stdio.h>

#include "stax/base.h"
#include "stax/graph.h"
#include "stax/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stax_program_s stax_program_t;
typedef struct stax_context_s stax_context_t;

typedef enum stax_dispatch_mode_e {
  STAX_DISPATCH_DEFAULT = 0, /* computed goto where the compiler supports it */
  STAX_DISPATCH_SWITCH = 1,
  STAX_DISPATCH_GOTO = 2,
} stax_dispatch_mode_t;

/* The graph passes (include/stax/passes.def, docs/passes.md). */
typedef enum stax_pass_e {
#define STAX_PASS(name, summary) STAX_PASS_##name,
#include "stax/passes.def"
#undef STAX_PASS
  STAX_PASS_COUNT,
  STAX_PASS_INVALID = -1
} stax_pass_t;
#define STAX_PASS_BIT(pass) (1u << (pass))
#define STAX_PASSES_ALL ((1u << STAX_PASS_COUNT) - 1u)

const char* stax_pass_name(stax_pass_t pass);    /* "invalid" for a bad id */
const char* stax_pass_summary(stax_pass_t pass); /* one line: what the pass rewrites */
stax_pass_t stax_pass_from_name(const char* name); /* STAX_PASS_INVALID if unknown */
/* Parses a comma-separated list of pass names ("cse,fuse"; "all"; "" for none) into bits. */
STAX_MUST_USE stax_status_t stax_pass_parse_list(const char* list, uint32_t* out_bits);

typedef struct stax_compile_options_t {
  /* Emit static opcode variants where every shape is known at compile time (default on). */
  bool disable_static_variants;
  /* Insert PROFILE_POINT instructions at segment entries (default on; cheap counters). */
  bool disable_profile_points;
  /* Graph passes switched off: STAX_PASS_BIT(STAX_PASS_cse) | ...; STAX_PASSES_ALL for none.
   * Zero runs every pass. The environment variable STAX_DISABLE_PASSES (a list for
   * stax_pass_parse_list) switches off more. */
  uint32_t disable_passes;
} stax_compile_options_t;

/* Compiles a verified graph. The graph passes rewrite `graph` in place first (they keep its
 * inputs, outputs and their names; results are bit for bit the same, or within float32
 * rounding for the fusions, docs/passes.md); compile a graph once. The program keeps what it
 * needs (constants are retained), so the graph may be destroyed afterwards. options may be
 * NULL. */
STAX_MUST_USE stax_status_t stax_program_compile(stax_allocator_t allocator,
                                                 stax_graph_t* graph,
                                                 const stax_compile_options_t* options,
                                                 stax_program_t** out_program);

/* What the graph passes did during stax_program_compile: one entry per pass run that changed
 * the graph, in order (a loaded program has none). Strings are borrowed from the program. */
typedef struct stax_pass_report_t {
  stax_pass_t pass;
  int32_t round;        /* the pipeline round, from 1 */
  int32_t nodes_before; /* nodes in the top-level graph and its subgraphs */
  int32_t nodes_after;
  int32_t rewrites;     /* changes the run made */
  const char* detail;   /* what they were: "2 Gelu fused, 1 LayerNormalization fused" */
} stax_pass_report_t;
int32_t stax_program_pass_report_count(const stax_program_t* program);
STAX_MUST_USE stax_status_t stax_program_pass_report(const stax_program_t* program,
                                                     int32_t index,
                                                     stax_pass_report_t* out_report);
/* Node counts of the graph before the first pass and after the last (-1 when no pass ran),
 * how many rounds the pipeline took, and how many instructions the compiler then removed
 * because nothing reads what they compute (shape chains feeding views whose dims it knows;
 * part of dce). Any out pointer may be NULL. */
void stax_program_pass_totals(const stax_program_t* program, int32_t* out_nodes_before,
                              int32_t* out_nodes_after, int32_t* out_rounds,
                              int32_t* out_instructions_removed);

void stax_program_retain(stax_program_t* program);
void stax_program_release(stax_program_t* program);

int32_t stax_program_input_count(const stax_program_t* program);
int32_t stax_program_output_count(const stax_program_t* program);
const char* stax_program_input_name(const stax_program_t* program, int32_t index);
const char* stax_program_output_name(const stax_program_t* program, int32_t index);
stax_dtype_t stax_program_input_dtype(const stax_program_t* program, int32_t index);
stax_dtype_t stax_program_output_dtype(const stax_program_t* program, int32_t index);
int32_t stax_program_input_rank(const stax_program_t* program, int32_t index);
int32_t stax_program_output_rank(const stax_program_t* program, int32_t index);
/* Whether an input/output is a sequence value (a tensor handle made by
 * stax_sequence_create; its dtype is the elements'). */
bool stax_program_input_is_sequence(const stax_program_t* program, int32_t index);
bool stax_program_output_is_sequence(const stax_program_t* program, int32_t index);
/* The declared dims of an input/output, printed ("B", "64", "2*S + 1") into buf. */
int stax_program_input_dim_text(const stax_program_t* program, int32_t index, int32_t dim,
                                char* buf, size_t size);
int stax_program_output_dim_text(const stax_program_t* program, int32_t index, int32_t dim,
                                 char* buf, size_t size);

/* Saving and loading. A saved program is an input boundary like a model file: loading
 * verifies it and rejects a malformed, truncated or corrupted file with a clear error. */
STAX_MUST_USE stax_status_t stax_program_save(const stax_program_t* program, const char* path);
/* The bytes of a program file; free them with stax_allocator_free(allocator, data, size). */
STAX_MUST_USE stax_status_t stax_program_serialize(const stax_program_t* program,
                                                   stax_allocator_t allocator, void** out_data,
                                                   size_t* out_size);
STAX_MUST_USE stax_status_t stax_program_load(stax_allocator_t allocator, const char* path,
                                              stax_program_t** out_program);
typedef struct stax_load_options_t {
  /* Skip the whole-file checksum, so the verifier alone must catch corruption (for tests). */
  bool skip_checksum;
} stax_load_options_t;
STAX_MUST_USE stax_status_t stax_program_deserialize(stax_allocator_t allocator,
                                                     const void* data, size_t size,
                                                     const stax_load_options_t* options,
                                                     stax_program_t** out_program);

/* Disassembly: the extended form (records with shape descriptors and the shape derivation
 * chain), the compact form (the encoded words the interpreter fetches), or both. */
enum {
  STAX_DISASSEMBLE_EXTENDED = 1u << 0,
  STAX_DISASSEMBLE_COMPACT = 1u << 1,
};
STAX_MUST_USE stax_status_t stax_program_disassemble(const stax_program_t* program,
                                                     uint32_t forms, FILE* out);

/* ---- execution ---------------------------------------------------------------------------- */

typedef enum stax_jit_mode_e {
  STAX_JIT_OFF = 0,        /* interpret everything */
  STAX_JIT_BACKGROUND = 1, /* compile on a background thread; keep interpreting meanwhile */
  STAX_JIT_SYNC = 2,       /* compile inline on the calling thread (tests, benchmarks) */
} stax_jit_mode_t;

/* Whether the JIT tier compiles shape-generic versions (one per shape class, docs/jit.md
 * "Shape classes") before any exact-shape one. */
typedef enum stax_jit_generic_e {
  STAX_JIT_GENERIC_DEFAULT = 0, /* on, unless STAX_JIT_GENERIC=0 is set */
  STAX_JIT_GENERIC_ON = 1,
  STAX_JIT_GENERIC_OFF = 2,     /* exact-shape versions only (every new shape compiles) */
} stax_jit_generic_t;

/* Progress of work a call does besides running the model, for a terminal's "compiling ...":
 * a sync-mode compile (stax_context_options_t.jit = STAX_JIT_SYNC) of a segment's version
 * reports its start, each kernel, and its end. */
typedef enum stax_progress_kind_e {
  STAX_PROGRESS_COMPILE_BEGIN = 1,
  STAX_PROGRESS_COMPILE_KERNEL = 2, /* one more kernel compiled (or loaded, or refused) */
  STAX_PROGRESS_COMPILE_END = 3,
} stax_progress_kind_t;
typedef struct stax_progress_t {
  stax_progress_kind_t kind;
  int32_t segment;
  int32_t kernels;   /* kernels the version compiles */
  int32_t done;      /* of them, finished so far */
  bool generic;      /* a shape-generic version (else exact-shape) */
  double elapsed_ms; /* since BEGIN */
} stax_progress_t;
/* Called on the thread running the call, with no lock of stax's held. */
typedef void (*stax_progress_fn)(void* user_data, const stax_progress_t* progress);

typedef struct stax_context_options_t {
  stax_dispatch_mode_t dispatch;
  stax_threadpool_t* pool;  /* NULL: the process-wide default pool */
  bool profile_timing;      /* also time each instruction (counts are always kept) */
  /* JIT tier (docs/jit.md, "Tiering"). Zero-initialized options keep the JIT off so existing
   * callers see no change; `stax run` turns it on. */
  stax_jit_mode_t jit;
  int32_t jit_threshold;    /* compile a (segment, signature) seen this often; 0: 2 */
  int32_t jit_max_versions; /* compiled versions kept per segment (LRU); 0: 32 */
  bool jit_verify;          /* also interpret and compare (STAX_JIT_VERIFY=1 does the same) */
  double jit_tolerance;     /* verify: |a-b| <= tol * (1 + |b|); 0: 1e-4 */
  stax_jit_generic_t jit_generic;
  /* Switch the memory plan off (docs/memory.md): every temporary then comes from the
   * thread's buffer pool. STAX_MEMORY_PLAN=0 in the environment does the same. */
  bool disable_memory_plan;
  /* Record a trace from the first call, as stax_context_trace_start(ctx, trace_max_events)
   * would (docs/vm.md, "Tracing"). */
  bool trace;
  int64_t trace_max_events; /* 0: 500000 */
  stax_progress_fn progress; /* NULL: none */
  void* progress_data;
} stax_context_options_t;

STAX_MUST_USE stax_status_t stax_context_create(stax_allocator_t allocator,
                                                stax_program_t* program,
                                                const stax_context_options_t* options,
                                                stax_context_t** out_context);
void stax_context_destroy(stax_context_t* context);

/* Runs the program. inputs are borrowed (never copied; any strides); dtypes and ranks must
 * match the program, and dims must satisfy the model's shapes, else an error names the input,
 * the dim and both values. out_outputs receives output_count owned tensors. */
STAX_MUST_USE stax_status_t stax_context_run(stax_context_t* context, int32_t input_count,
                                             stax_tensor_t* const* inputs,
                                             int32_t output_count,
                                             stax_tensor_t** out_outputs);

/* Profiling: per instruction execution counts (and nanoseconds when profile_timing), and per
 * segment entry counts (what the JIT reads to find hot segments). Arrays are borrowed and
 * valid until the next run. */
int32_t stax_context_instruction_count(const stax_context_t* context);
const uint64_t* stax_context_instruction_counts(const stax_context_t* context);
const uint64_t* stax_context_instruction_nanos(const stax_context_t* context);
int32_t stax_context_segment_count(const stax_context_t* context);
const uint64_t* stax_context_segment_counts(const stax_context_t* context);

/* Tracing (docs/vm.md, "Tracing"): while recording, the context keeps in memory a timed event
 * for every call, every interpreted instruction (op or opcode, node), every JIT kernel run
 * (kernel, segment, group, generic or exact version) and every compile it asked for
 * (sync-mode compiles on the calling thread; background ones on the compiler thread's own
 * track), at most max_events of them (0: 500000, about 100 bytes each); later events are
 * dropped and counted, and the file says so. Off (the default) it costs one branch per
 * instruction, the one profile_timing already takes. */
/* Clears the context's trace and starts recording. */
STAX_MUST_USE stax_status_t stax_context_trace_start(stax_context_t* context, int64_t max_events);
/* Stops recording; the events stay for stax_context_trace_write. No-op when not tracing. */
void stax_context_trace_stop(stax_context_t* context);
typedef struct stax_trace_stats_t {
  bool recording;
  int64_t events;     /* kept */
  int64_t dropped;    /* past the cap */
  int64_t max_events; /* the cap; 0 when the context has no trace */
} stax_trace_stats_t;
STAX_MUST_USE stax_status_t stax_context_trace_stats(const stax_context_t* context,
                                                     stax_trace_stats_t* out_stats);
/* Writes the trace as Chrome trace-event JSON ({"traceEvents": [...]}: "ph": "X" events,
 * ts and dur in microseconds; chrome://tracing or ui.perfetto.dev open it).
 * FAILED_PRECONDITION when the context never traced. Compiles still running in the
 * background add their events when they finish: stax_program_jit_drain first for all. */
STAX_MUST_USE stax_status_t stax_context_trace_write(const stax_context_t* context, FILE* out);
STAX_MUST_USE stax_status_t stax_context_trace_save(const stax_context_t* context,
                                                    const char* path);

/* Memory statistics of a context (docs/memory.md). Counters are the last call's. */
typedef struct stax_memory_stats_t {
  bool planned;            /* the context places temporaries by the program's memory plan */
  int32_t planned_values;  /* temporaries the plan places (the rest come from the pool) */
  int32_t slots;           /* arena slots they share */
  int32_t inplace_values;  /* planned values that reuse their dying input's memory */
  uint64_t calls;          /* calls made through the context */
  uint64_t arena_bytes;    /* the arena the last call's shapes needed (0: it placed nothing) */
  uint64_t arena_peak_bytes; /* the most any call needed */
  uint64_t arena_capacity_bytes; /* the arena held now (grown when a call needs more) */
  uint64_t temp_bytes;     /* bytes of every temporary of the last call, planned or not: what
                            * separate buffers would take */
  /* Allocator calls of the last call: temporaries taken from the pool (not the arena), and
   * program outputs, which outlive the call; arena (re)allocations. A steady-state call of a
   * program whose temporaries all have sizes known from its input shapes has
   * temp_allocations == arena_grows == 0. Views' headers and kernels' own scratch are not
   * counted. */
  uint64_t temp_allocations;
  uint64_t output_allocations;
  uint64_t arena_grows;
  uint64_t fallbacks;      /* planned values that took pool memory instead (the JIT's path) */
  uint64_t inplace;        /* values placed over their dying input in the last call */
} stax_memory_stats_t;
STAX_MUST_USE stax_status_t stax_context_memory_stats(const stax_context_t* context,
                                                      stax_memory_stats_t* out_stats);
/* The same as one JSON object. */
STAX_MUST_USE stax_status_t stax_context_memory_stats_json(const stax_context_t* context,
                                                           FILE* out);

/* JIT statistics per segment, shared by every context of the program (the kernel cache
 * belongs to the program). Zeros when no context ran with the JIT on. */
typedef struct stax_jit_segment_stats_t {
  uint64_t entries;     /* segment entries seen by the JIT tier */
  uint64_t hits;        /* entries run by compiled kernels (fully or partly) */
  uint64_t full_hits;   /* of the hits: every lowerable group ran a kernel */
  uint64_t partial_hits; /* of the hits: some groups interpreted (no kernel, or declined) */
  uint64_t misses;      /* entries interpreted (no kernel for the signature yet, or none) */
  uint64_t compiles;    /* successful compiles */
  uint64_t failures;    /* failed or refused compiles (never retried for that signature) */
  uint64_t evictions;   /* kernels dropped by the per-segment version cap */
  double compile_ms;    /* total compile time */
  int32_t versions;     /* compiled versions held now */
  int32_t signatures;   /* distinct signatures (exact and class) tracked now */
  /* Of `versions`: shape-generic ones (one per shape class, rows-generic kernels) and exact
   * ones (one per exact signature, for groups the generic one lacks); compile time of each
   * kind. */
  int32_t generic_versions, exact_versions;
  double generic_compile_ms, exact_compile_ms;
  /* Hot-shape promotion (docs/jit.md): exact versions compiled for a hot signature whose
   * generic version had every group, and after their timed trial the groups that kept the
   * exact kernel (it measured faster) and those that went back to the generic one. */
  uint64_t promotions;
  uint64_t promoted_groups_kept, promoted_groups_dropped;
  /* Groups of the segment the JIT leaves to the interpreter for a dtype its lowering of one
   * of their ops does not compute (a float64 MatMul, a float16 AveragePool); a warning says
   * so once per process on stderr. */
  uint64_t dtype_fallbacks;
} stax_jit_segment_stats_t;

/* How a program's calls (stax_context_run with the JIT on) ran: every group that has a
 * lowering ran a compiled kernel, some did, or none did. */
typedef struct stax_jit_call_stats_t {
  uint64_t compiled, partial, interpreted;
} stax_jit_call_stats_t;
STAX_MUST_USE stax_status_t stax_program_jit_call_stats(const stax_program_t* program,
                                                        stax_jit_call_stats_t* out_stats);

int32_t stax_program_segment_count(const stax_program_t* program);
STAX_MUST_USE stax_status_t stax_program_jit_stats(const stax_program_t* program,
                                                   int32_t segment,
                                                   stax_jit_segment_stats_t* out_stats);
/* Waits until the background compiler's queue is empty (tests, benchmarks). */
void stax_program_jit_drain(const stax_program_t* program);
/* Background compiles queued or running now (what a drain would wait for). */
int32_t stax_program_jit_pending(const stax_program_t* program);
/* Writes every segment's statistics as JSON. */
STAX_MUST_USE stax_status_t stax_program_jit_stats_json(const stax_program_t* program, FILE* out);
/* The same for the context's program, plus "memory": the context's memory statistics
 * (stax_context_memory_stats_json). What `stax run --stats-json` writes. */
STAX_MUST_USE stax_status_t stax_context_stats_json(const stax_context_t* context, FILE* out);
/* Makes kernels compiled from now on keep their generated code for inspection. */
void stax_program_jit_keep_sources(stax_program_t* program);
/* The folder of the on-disk kernel cache (docs/jit.md, "Object cache") that this program's
 * compiles from now on use: NULL for the environment's (STAX_JIT_CACHE_DIR, STAX_JIT_CACHE=0,
 * else ~/.cache/stax/jit), "" for no on-disk cache. INVALID_ARGUMENT for a path of 1024
 * bytes or more. */
STAX_MUST_USE stax_status_t stax_program_jit_set_cache_dir(stax_program_t* program,
                                                           const char* dir);
/* Writes the generated code (LLVM IR, or assembly) of every kernel compiled since
 * stax_program_jit_keep_sources, segment by segment. */
STAX_MUST_USE stax_status_t stax_program_jit_sources(stax_program_t* program, bool assembly,
                                                     FILE* out);

#ifdef __cplusplus
}
#endif

#endif /* STAX_VM_H_ */
