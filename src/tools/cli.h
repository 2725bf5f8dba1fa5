/* Shared pieces of the stax command-line program: loading a model (ONNX file or saved
 * bytecode program), reading input tensors, reporting errors, and the verbs. */
#ifndef STAX_TOOLS_CLI_H_
#define STAX_TOOLS_CLI_H_

#include <stdio.h>

#include "stax/onnx.h"
#include "stax/stax.h"

/* Exit statuses: 0 success, 1 a stax error (bad model, bad input...), 2 bad usage. */
enum { STAX_CLI_OK = 0, STAX_CLI_ERROR = 1, STAX_CLI_USAGE = 2 };

/* Prints "stax <verb>: <message>" to stderr, frees the status and returns STAX_CLI_ERROR. */
int stax_cli_fail(const char* verb, stax_status_t status);
/* Prints a usage problem and returns STAX_CLI_USAGE. */
int stax_cli_usage_error(const char* verb, const char* fmt, ...) STAX_PRINTF(2, 3);
/* True when argv[i] is -h or --help. */
bool stax_cli_is_help(const char* arg);
/* The candidate closest to `word` by edit distance when it is close enough to be a typo of
 * it ("rnu" -> "run"), else NULL. */
const char* stax_cli_suggest(const char* word, const char* const* candidates, int count);

/* A model as the verbs see it: the program to run, and, for ONNX input, the graph too. */
typedef struct stax_cli_model_t {
  stax_graph_t* graph;     /* NULL for a saved program */
  stax_program_t* program; /* NULL until compiled (stax_cli_model_compile) */
} stax_cli_model_t;

/* What a model file holds, by content: a saved program (its magic), else ONNX to try. */
typedef enum { STAX_CLI_MODEL_ONNX, STAX_CLI_MODEL_PROGRAM } stax_cli_model_kind_t;
STAX_MUST_USE stax_status_t stax_cli_model_kind(const char* path,
                                                stax_cli_model_kind_t* out_kind);
/* Loads PATH, recognised by content: a saved stax program is loaded (and verified); anything
 * else is imported as an ONNX model (not yet compiled), and a file that is neither gets an
 * error naming it and what was expected. */
STAX_MUST_USE stax_status_t stax_cli_model_open(const char* path, stax_cli_model_t* out_model);
STAX_MUST_USE stax_status_t stax_cli_model_compile(stax_cli_model_t* model);
/* Parses `--disable-pass LIST` (or =LIST) at argv[*i], advancing *i past its value: -1 when
 * argv[*i] is another option, STAX_CLI_OK when taken, STAX_CLI_USAGE after printing why not. */
int stax_cli_pass_option(const char* verb, int argc, char** argv, int* i);
#define STAX_CLI_PASS_OPTION_HELP                                                          \
  "  --disable-pass LIST  switch graph passes off (comma-separated: fold, noop, simplify,\n" \
  "                       fuse, bnfold, widen, shapefold, fill, gemmtrans, cse, dce, or\n" \
  "                       all);\n" \
  "                       STAX_DISABLE_PASSES does the same\n"
void stax_cli_model_close(stax_cli_model_t* model);

/* Reads FILE (.npy, or .pb for an ONNX TensorProto). */
STAX_MUST_USE stax_status_t stax_cli_read_tensor(const char* path, stax_tensor_t** out_tensor);

/* ---- synthetic inputs (cli_inputs.c) ---- */

/* "NAME=2x3x64" (--shape) or, with ranges, "NAME=1..8x16..128x64" (--shape-range); "NAME="
 * is a scalar. name points into text (name_length bytes); lo == hi for a fixed dim. */
typedef struct stax_cli_shape_spec_t {
  const char* text;
  const char* name;
  size_t name_length;
  int32_t rank;
  int64_t lo[STAX_MAX_RANK], hi[STAX_MAX_RANK];
} stax_cli_shape_spec_t;
/* false with the reason in why (no name, a dim that is not a number, a range whose low end
 * is above its high end, more than STAX_MAX_RANK dims). */
bool stax_cli_parse_shape_spec(const char* text, bool ranges, stax_cli_shape_spec_t* out,
                               char* why, size_t why_size);
/* The program input named name[0..length), or -1. */
int32_t stax_cli_find_input(const stax_program_t* program, const char* name, size_t length);
/* "x: float32[B, S, 64]": an input as the model declares it, for messages. */
void stax_cli_input_signature(const stax_program_t* program, int32_t input, char* buf,
                              size_t size);

/* A seeded generator (xoshiro256**): the same seed gives the same shapes and values. */
typedef struct stax_cli_rng_t {
  uint64_t s[4];
} stax_cli_rng_t;
void stax_cli_rng_seed(stax_cli_rng_t* rng, uint64_t seed);
uint64_t stax_cli_rng_next(stax_cli_rng_t* rng);
int64_t stax_cli_rng_range(stax_cli_rng_t* rng, int64_t lo, int64_t hi); /* uniform, inclusive */

typedef enum { STAX_CLI_FILL_RANDOM, STAX_CLI_FILL_ZEROS } stax_cli_fill_t;
/* A tensor of these dims: zeros, or random values from `seed` (floats normal with mean 0 and
 * deviation 1; integers 0..9; bools false/true). */
STAX_MUST_USE stax_status_t stax_cli_synthetic_tensor(stax_dtype_t dtype, int32_t rank,
                                                      const int64_t* dims, stax_cli_fill_t fill,
                                                      uint64_t seed, stax_tensor_t** out_tensor);

/* ---- the timing report (cli_timing.c) ---- */

/* Every timed call: its time and the shapes it ran with ("x=2x3x64 mask=2x3"). */
typedef struct stax_cli_timings_t {
  double* times; /* seconds, in call order */
  int32_t* shape_of; /* per call: index into shapes, -1 when not recorded */
  size_t count, capacity;
  struct {
    char* key;
    size_t calls;
  }* shapes;
  size_t shape_count, shape_capacity;
  int32_t* table; /* open addressing over shapes by key */
  size_t table_size;
} stax_cli_timings_t;
/* shape_key may be NULL (no per-shape rows wanted). */
STAX_MUST_USE stax_status_t stax_cli_timings_add(stax_cli_timings_t* timings, double seconds,
                                                 const char* shape_key);
/* The nearest-rank percentile of `count` sorted times. */
double stax_cli_percentile(const double* sorted, size_t count, double percent);
/* Median, min, max; the first call and the median of the last half; p50/p90/p99/p99.9,
 * mean and calls per second; with per_shape, one row per shape (calls, p50, p99). */
STAX_MUST_USE stax_status_t stax_cli_timings_report(const stax_cli_timings_t* timings,
                                                    bool per_shape, FILE* out);
void stax_cli_timings_free(stax_cli_timings_t* timings);

/* ---- the per-call log of --stats-json (cli_call_log.c) ---- */

/* How one call ran (from the program's call counters before and after it) and which compiles
 * landed since the previous call ended (background) or during it (sync). */
typedef struct stax_cli_call_record_t {
  double start, seconds; /* start: seconds since the first call's */
  double compile_ms;     /* compile time of the compiles that landed */
  uint32_t compiles;     /* compiled versions that landed (failed compiles included) */
  uint8_t how;           /* 0 compiled, 1 partial, 2 interpreted */
  bool warmup;
} stax_cli_call_record_t;

typedef struct stax_cli_call_log_t {
  stax_cli_call_record_t* records;
  size_t count, capacity;
  uint64_t dropped; /* calls past STAX_CLI_CALL_LOG_MAX, counted only */
  stax_jit_call_stats_t calls; /* the counters after the last call */
  uint64_t compiles;
  double compile_ms, origin;
} stax_cli_call_log_t;

/* Reads the counters the first call will be compared with. */
STAX_MUST_USE stax_status_t stax_cli_call_log_begin(stax_cli_call_log_t* log,
                                                    const stax_program_t* program);
/* Records a call that started at `start` (now_seconds' clock) and took `seconds`. */
STAX_MUST_USE stax_status_t stax_cli_call_log_add(stax_cli_call_log_t* log,
                                                  const stax_program_t* program, double start,
                                                  double seconds, bool warmup);
/* The context's stats JSON (stax_context_stats_json) with the log added as "per_call". */
STAX_MUST_USE stax_status_t stax_cli_stats_json_with_calls(const stax_context_t* context,
                                                           const stax_cli_call_log_t* log,
                                                           FILE* out);
void stax_cli_call_log_free(stax_cli_call_log_t* log);

/* ---- progress on a terminal (cli_progress.c) ---- */

/* stderr is a terminal, or STAX_PROGRESS=1 forces progress lines (STAX_PROGRESS=0: never). */
bool stax_cli_progress_enabled(void);
/* The context's progress callback (data: the verb's name): a sync-mode compile still running
 * half a second after its start prints "stax run: compiling 11 kernels for segment 0 ...",
 * and " done in 1.20 s" when it ends. */
void stax_cli_progress_compile(void* data, const stax_progress_t* progress);
/* Stops the watcher thread the callback started (if it did). */
void stax_cli_progress_finish(void);
/* stax_program_jit_drain, saying on stderr (when progress) how many background compiles it
 * waits for. */
void stax_cli_jit_drain(const char* verb, const stax_program_t* program, bool progress);

int stax_cli_info(int argc, char** argv);
int stax_cli_run(int argc, char** argv);
int stax_cli_compile(int argc, char** argv);
int stax_cli_dis(int argc, char** argv);
int stax_cli_source(int argc, char** argv);
int stax_cli_report(int argc, char** argv);

#endif /* STAX_TOOLS_CLI_H_ */
