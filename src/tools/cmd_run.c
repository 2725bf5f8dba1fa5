/* `stax run`: run a model on tensor files or synthetic inputs (--shape, --shape-range), time
 * the calls, and write the outputs as .npy. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tools/cli.h"

#define STAX_CLI_MAX_INPUTS 256
/* Input sets `stax run` cycles through (an input given several times). */
#define STAX_CLI_MAX_SETS 64
#define STAX_CLI_MAX_SOURCES (STAX_CLI_MAX_INPUTS * 4)

static void print_run_help(FILE* f) {
  fprintf(f,
          "usage: stax run MODEL [-i NAME=FILE | --shape NAME=DIMS | --shape-range NAME=RANGES]...\n"
          "                [-o OUTDIR] [options]\n"
          "\n"
          "Runs MODEL (an ONNX model or a program saved by 'stax compile', recognised by its\n"
          "content, whatever its name) on the given inputs and writes each output as\n"
          "OUTDIR/<output name>.npy (characters other than letters, digits, '.', '_' and '-'\n"
          "in a name become '_').\n"
          "\n"
          "Inputs (every model input needs one; an input given several times: calls cycle\n"
          "through them, to hop between shapes):\n"
          "  -i NAME=FILE     FILE is .npy (any dtype stax supports, C or Fortran order) or\n"
          "                   .pb (an ONNX TensorProto); with a single-input model NAME= may\n"
          "                   be left out\n"
          "  --shape NAME=DIMS  a synthetic input of these dims (2x3x64; NAME= for a scalar),\n"
          "                   filled as --fill says; the model's guards check the dims\n"
          "  --shape-range NAME=RANGES  a synthetic input whose dims each call draws uniformly\n"
          "                   from LO..HI (1..8x16..128x64: a fixed dim is a plain number);\n"
          "                   dims the model names alike (B, S) get one draw per call\n"
          "  --fill random|zeros  synthetic values: random (default: floats normal with mean\n"
          "                   0 and deviation 1, integers 0..9, bools false/true) or zeros\n"
          "  --seed N         seed of the random shapes and values (default 0): the same seed\n"
          "                   gives the same calls\n"
          "\n"
          "Timing:\n"
          "  --repeat N       run N timed calls (default 1)\n"
          "  --duration S     run timed calls until S seconds have passed (with --repeat too:\n"
          "                   whichever limit comes first)\n"
          "  --warmup N       run N calls first, untimed (they cycle and draw shapes as timed\n"
          "                   calls do; the timed calls start the cycle again)\n"
          "  With more than one timed call (or --duration, --warmup) stderr gets: the median,\n"
          "  min and max; the first call and the median of the last half of the calls; p50,\n"
          "  p90, p99, p99.9 (nearest rank), the mean and calls per second; and, when the\n"
          "  inputs cycle or come from --shape-range, a row per shape (calls, p50, p99; the 20\n"
          "  shapes with the most calls)\n"
          "  --threads N      the thread pool's size (as STAX_NUM_THREADS; default: one\n"
          "                   thread per core)\n"
          "\n"
          "Execution:\n"
          "  -o OUTDIR        where outputs go (created if missing); without it, outputs are\n"
          "                   summarised on stdout only (the last call's; on stderr when\n"
          "                   --stats-json writes to stdout, so stdout is the JSON alone)\n"
          "  --dispatch MODE  interpreter dispatch: goto (default) or switch\n"
          "  --jit MODE       on (default: compile hot segments in the background; compiles\n"
          "                   in flight at the end are finished, for the object cache), sync\n"
          "                   (compile inline) or off (interpret only); STAX_JIT_VERIFY=1\n"
          "                   also interprets each compiled segment and compares\n"
          "  --jit-threshold N  compile a segment's shape signature after N calls (default 2)\n"
          "  --jit-versions N   compiled versions kept per segment, LRU (default 32)\n"
          "  --jit-generic on|off  compile one shape-generic version per shape class first\n"
          "                   (default on; off: one version per exact shape, as\n"
          "                   STAX_JIT_GENERIC=0 does)\n"
          "  --stats-json FILE  write JIT statistics as JSON ('-' for stdout): per segment\n"
          "                   hits (full, partial), misses, compiles, compile time, evictions,\n"
          "                   generic and exact versions, groups left to the interpreter for\n"
          "                   their dtype (dtype_fallbacks); per call: compiled, partly\n"
          "                   compiled, interpreted; memory: the arena the last call\n"
          "                   needed, its peak, allocator calls of the last call\n"
          "                   (docs/memory.md; STAX_MEMORY_PLAN=0 switches planning off);\n"
          "                   per_call: every call's start, time, how it ran and the\n"
          "                   compiles that landed by its end ('stax report FILE' plots it)\n"
          "  --trace FILE     write a Chrome trace-event JSON file (chrome://tracing,\n"
          "                   ui.perfetto.dev) of the calls (warm-up ones too): every call,\n"
          "                   interpreted instruction (op, node), JIT kernel run (segment,\n"
          "                   group, generic or exact version) and compile (on the compiler\n"
          "                   thread's track when in the background)\n"
          "  --trace-max-events N  the trace's cap (default 500000 events, about 100 bytes\n"
          "                   each); later events are dropped, and the file says how many\n"
          STAX_CLI_PASS_OPTION_HELP
          "\n"
          "On a terminal (or with STAX_PROGRESS=1; STAX_PROGRESS=0: never) a --jit=sync compile\n"
          "that keeps a call waiting over half a second says so on stderr, and so does waiting\n"
          "at exit for background compiles.\n"
          "\n"
          "Exit status: 0 on success, 1 on any error (message on stderr), 2 on bad usage.\n");
}

/* The long options, for "did you mean" on a typo. */
static const char* const run_long_options[] = {
    "--input",    "--output",   "--shape",         "--shape-range",    "--fill",
    "--seed",     "--repeat",   "--duration",      "--warmup",         "--threads",
    "--dispatch", "--jit",      "--jit-threshold", "--jit-versions",   "--jit-generic",
    "--stats-json", "--disable-pass", "--trace", "--trace-max-events", "--help",
};

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void output_file_name(const char* name, char* buf, size_t size) {
  size_t n = 0;
  for (const char* p = name; *p && n + 1 < size; p++) {
    char c = *p;
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
    buf[n++] = safe ? c : '_';
  }
  buf[n] = '\0';
  if (n == 0 || strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0) snprintf(buf, size, "output");
}

/* mkdir -p: the output folder and any missing parents. */
static stax_status_t make_folders(const char* path) {
  char partial[4096];
  size_t length = strlen(path);
  if (length == 0 || length >= sizeof(partial))
    return stax_status_make(STAX_INVALID_ARGUMENT, "output folder '%s' is empty or too long", path);
  for (size_t i = 1; i <= length; i++) {
    if (path[i] != '/' && path[i] != '\0') continue;
    memcpy(partial, path, i);
    partial[i] = '\0';
    if (mkdir(partial, 0777) != 0 && errno != EEXIST)
      return stax_status_make(STAX_IO_ERROR, "cannot create %s: %s", partial, strerror(errno));
  }
  struct stat info;
  if (stat(path, &info) != 0 || !S_ISDIR(info.st_mode))
    return stax_status_make(STAX_IO_ERROR, "cannot write outputs into %s: not a folder", path);
  return STAX_OK;
}

static void summarise_tensor(FILE* out, const char* name, const stax_tensor_t* tensor) {
  fprintf(out, "%s: %s[", name, stax_dtype_name(stax_tensor_dtype(tensor)));
  for (int32_t d = 0; d < stax_tensor_rank(tensor); d++)
    fprintf(out, "%s%lld", d ? ", " : "", (long long)stax_tensor_dims(tensor)[d]);
  fprintf(out, "]\n");
}

/* ---- where each call's inputs come from ---------------------------------------------------- */

typedef enum { SOURCE_FILE, SOURCE_SHAPE, SOURCE_RANGE } run_source_kind_t;

typedef struct run_source_t {
  run_source_kind_t kind;
  const char* text;            /* the option's value, for messages */
  stax_cli_shape_spec_t shape; /* SHAPE, RANGE (for FILE only the name is set, if given) */
} run_source_t;

/* One model symbol's draw within an input set: the intersection of the ranges (and fixed
 * dims) given for it. */
typedef struct run_slot_t {
  int32_t set;
  char symbol[64];
  int64_t lo, hi;
  bool ranged;       /* some --shape-range dim takes it (else nothing is drawn) */
  int64_t value;     /* this call's draw */
  const char* first; /* the option that first gave it, for messages */
} run_slot_t;

typedef struct run_args_t {
  const char* path;
  const char* out_dir;
  run_source_t sources[STAX_CLI_MAX_SOURCES];
  int source_count;
  stax_cli_fill_t fill;
  uint64_t seed;
  long repeat;
  bool repeat_given;
  double duration; /* seconds; 0: not given */
  long warmup;
  long threads; /* 0: not given */
  stax_dispatch_mode_t dispatch;
  stax_jit_mode_t jit;
  long jit_threshold, jit_versions;
  stax_jit_generic_t jit_generic;
  const char* stats_path;
  const char* trace_path;
  long trace_max_events;
} run_args_t;

/* The inputs of a run: per set and input, a tensor made once (files, --shape) or a source
 * drawn per call (--shape-range). */
typedef struct run_inputs_t {
  const stax_program_t* program;
  int32_t input_count;
  int set_count;
  int32_t source_of[STAX_CLI_MAX_SETS][STAX_CLI_MAX_INPUTS];
  /* --shape-range inputs: per dim, the index of the shared draw it takes (dims the model
   * names with one symbol, in the same input set), or -1 for a draw of its own. */
  int32_t slot_of[STAX_CLI_MAX_SETS][STAX_CLI_MAX_INPUTS][STAX_MAX_RANK];
  stax_tensor_t* tensors[STAX_CLI_MAX_SETS][STAX_CLI_MAX_INPUTS];
  run_slot_t slots[STAX_CLI_MAX_SETS * 8];
  int32_t slot_count;
  bool any_range;
  stax_cli_rng_t shape_rng;
  /* This call's tensors (borrowed from tensors[], or drawn and owned: drawn[i]). */
  stax_tensor_t* call[STAX_CLI_MAX_INPUTS];
  bool drawn[STAX_CLI_MAX_INPUTS];
} run_inputs_t;

static uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t x = seed ^ (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  return x ^ (x >> 33);
}

/* A model dim that is one symbol ("B", "seq_len"), not a number or an expression. */
static bool is_symbol_text(const char* text) {
  if (!text[0] || (text[0] >= '0' && text[0] <= '9')) return false;
  for (const char* p = text; *p; p++)
    if (strchr(" +-*/()%", *p)) return false;
  return true;
}

/* The slot of (set, symbol), added when new. */
static stax_status_t slot_join(run_inputs_t* in, int32_t set, const char* symbol, int64_t lo,
                               int64_t hi, bool ranged, const char* option, int32_t* out_slot) {
  *out_slot = -1;
  if (strlen(symbol) >= sizeof(in->slots[0].symbol)) return STAX_OK; /* drawn on its own */
  int32_t s = 0;
  while (s < in->slot_count && !(in->slots[s].set == set && strcmp(in->slots[s].symbol, symbol) == 0))
    s++;
  if (s == in->slot_count) {
    if (in->slot_count == (int32_t)(sizeof(in->slots) / sizeof(in->slots[0]))) return STAX_OK;
    run_slot_t* slot = &in->slots[in->slot_count++];
    memset(slot, 0, sizeof(*slot));
    slot->set = set;
    memcpy(slot->symbol, symbol, strlen(symbol) + 1); /* shorter than symbol[]: checked above */
    slot->lo = lo;
    slot->hi = hi;
    slot->first = option;
  } else {
    run_slot_t* slot = &in->slots[s];
    if (lo > slot->lo) slot->lo = lo;
    if (hi < slot->hi) slot->hi = hi;
  }
  in->slots[s].ranged |= ranged;
  *out_slot = s;
  return STAX_OK;
}

/* Matches every source to a program input, reads the files, makes the fixed synthetic
 * tensors and links the ranged dims that share a model symbol. */
static stax_status_t run_inputs_setup(run_inputs_t* in, run_args_t* args) {
  const stax_program_t* program = in->program;
  in->set_count = 1;
  for (int set = 0; set < STAX_CLI_MAX_SETS; set++)
    for (int32_t i = 0; i < STAX_CLI_MAX_INPUTS; i++) in->source_of[set][i] = -1;
  for (int k = 0; k < args->source_count; k++) {
    run_source_t* source = &args->sources[k];
    int32_t index = -1;
    if (source->shape.name) {
      index = stax_cli_find_input(program, source->shape.name, source->shape.name_length);
      if (index < 0)
        return stax_status_make(STAX_INVALID_ARGUMENT, "the model has no input named '%.*s'",
                                (int)source->shape.name_length, source->shape.name);
    } else if (in->input_count == 1) {
      index = 0;
    } else {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "'-i %s' needs NAME=FILE: the model has %d inputs", source->text,
                              in->input_count);
    }
    int set = 0;
    while (set < STAX_CLI_MAX_SETS && in->source_of[set][index] >= 0) set++;
    if (set == STAX_CLI_MAX_SETS)
      return stax_status_make(STAX_INVALID_ARGUMENT, "input '%s' is given more than %d times",
                              stax_program_input_name(program, index), STAX_CLI_MAX_SETS);
    if (set + 1 > in->set_count) in->set_count = set + 1;
    in->source_of[set][index] = k;
    if (source->kind == SOURCE_RANGE) in->any_range = true;
  }
  for (int32_t i = 0; i < in->input_count; i++) {
    if (in->source_of[0][i] >= 0) continue;
    char signature[512];
    const char* name = stax_program_input_name(program, i);
    stax_cli_input_signature(program, i, signature, sizeof(signature));
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "input '%s' is missing (give -i %s=FILE, --shape %s=DIMS or "
                            "--shape-range %s=RANGES; the model says %s)",
                            name, name, name, name, signature);
  }
  /* An input given fewer times than another keeps its first source in the later sets. */
  for (int set = 1; set < in->set_count; set++)
    for (int32_t i = 0; i < in->input_count; i++)
      if (in->source_of[set][i] < 0) in->source_of[set][i] = in->source_of[0][i];
  /* Dims the model names with one symbol take one draw per call: fixed dims and ranges of
   * the same set narrow it to what they all allow. */
  for (int set = 0; set < in->set_count; set++) {
    for (int32_t i = 0; i < in->input_count; i++) {
      const run_source_t* source = &args->sources[in->source_of[set][i]];
      if (source->kind == SOURCE_FILE) continue;
      for (int32_t d = 0; d < STAX_MAX_RANK; d++) in->slot_of[set][i][d] = -1;
      int32_t rank = stax_program_input_rank(program, i);
      for (int32_t d = 0; d < source->shape.rank && d < rank; d++) {
        char text[128];
        stax_program_input_dim_text(program, i, d, text, sizeof(text));
        if (!is_symbol_text(text)) continue;
        int32_t slot = -1;
        STAX_RETURN_IF_ERROR(slot_join(in, set, text, source->shape.lo[d], source->shape.hi[d],
                                       source->kind == SOURCE_RANGE, source->text, &slot));
        if (source->kind == SOURCE_RANGE) in->slot_of[set][i][d] = slot;
      }
    }
  }
  for (int32_t s = 0; s < in->slot_count; s++) {
    const run_slot_t* slot = &in->slots[s];
    if (slot->ranged && slot->lo > slot->hi)
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "the model's %s has one value per call, but no value fits every "
                              "--shape/--shape-range that gives it (the first: '%s')",
                              slot->symbol, slot->first);
  }
  for (int set = 0; set < in->set_count; set++) {
    for (int32_t i = 0; i < in->input_count; i++) {
      int32_t k = in->source_of[set][i];
      const run_source_t* source = &args->sources[k];
      if (set > 0 && k == in->source_of[0][i] && in->tensors[0][i]) {
        in->tensors[set][i] = in->tensors[0][i];
        stax_tensor_retain(in->tensors[set][i]);
        continue;
      }
      stax_status_t status = STAX_OK;
      if (source->kind == SOURCE_FILE) {
        const char* eq = strchr(source->text, '=');
        status = stax_cli_read_tensor(eq ? eq + 1 : source->text, &in->tensors[set][i]);
      } else if (source->kind == SOURCE_SHAPE) {
        status = stax_cli_synthetic_tensor(stax_program_input_dtype(program, i),
                                           source->shape.rank, source->shape.lo, args->fill,
                                           mix_seed(args->seed, (uint64_t)set, (uint64_t)i),
                                           &in->tensors[set][i]);
      }
      if (status)
        return stax_status_annotate(status, "input '%s'", stax_program_input_name(program, i));
    }
  }
  stax_cli_rng_seed(&in->shape_rng, args->seed);
  return STAX_OK;
}

static void run_inputs_release_call(run_inputs_t* in) {
  for (int32_t i = 0; i < in->input_count; i++) {
    if (in->drawn[i] && in->call[i]) stax_tensor_release(in->call[i]);
    in->call[i] = NULL;
    in->drawn[i] = false;
  }
}

/* The inputs of call `k` (its set, and fresh draws for --shape-range) into in->call. */
static stax_status_t run_inputs_for_call(run_inputs_t* in, const run_args_t* args, long k,
                                         uint64_t draw) {
  run_inputs_release_call(in);
  int set = (int)(k % in->set_count);
  for (int32_t s = 0; s < in->slot_count; s++)
    if (in->slots[s].set == set && in->slots[s].ranged)
      in->slots[s].value = stax_cli_rng_range(&in->shape_rng, in->slots[s].lo, in->slots[s].hi);
  for (int32_t i = 0; i < in->input_count; i++) {
    const run_source_t* source = &args->sources[in->source_of[set][i]];
    if (source->kind != SOURCE_RANGE) {
      in->call[i] = in->tensors[set][i];
      continue;
    }
    int64_t dims[STAX_MAX_RANK];
    for (int32_t d = 0; d < source->shape.rank; d++)
      dims[d] = in->slot_of[set][i][d] >= 0
                    ? in->slots[in->slot_of[set][i][d]].value
                    : stax_cli_rng_range(&in->shape_rng, source->shape.lo[d], source->shape.hi[d]);
    stax_status_t status = stax_cli_synthetic_tensor(
        stax_program_input_dtype(in->program, i), source->shape.rank, dims, args->fill,
        mix_seed(args->seed, draw + STAX_CLI_MAX_SETS, (uint64_t)i), &in->call[i]);
    if (status)
      return stax_status_annotate(status, "input '%s'", stax_program_input_name(in->program, i));
    in->drawn[i] = true;
  }
  return STAX_OK;
}

/* "x=2x3x64 mask=2x3": the shapes of this call, the per-shape rows' key. */
static void run_inputs_shape_key(const run_inputs_t* in, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < in->input_count && used < size; i++) {
    const stax_tensor_t* t = in->call[i];
    used += (size_t)snprintf(buf + used, size - used, "%s%s=", i ? " " : "",
                             stax_program_input_name(in->program, i));
    for (int32_t d = 0; d < stax_tensor_rank(t) && used < size; d++)
      used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "x" : "",
                               (long long)stax_tensor_dims(t)[d]);
  }
}

static void run_inputs_free(run_inputs_t* in) {
  run_inputs_release_call(in);
  for (int set = 0; set < STAX_CLI_MAX_SETS; set++)
    for (int32_t i = 0; i < STAX_CLI_MAX_INPUTS; i++)
      if (in->tensors[set][i]) stax_tensor_release(in->tensors[set][i]);
}

/* ---- arguments ----------------------------------------------------------------------------- */

static int parse_count(const char* option, const char* text, long low, long high, long* out) {
  char* end = NULL;
  errno = 0;
  long value = text ? strtol(text, &end, 10) : 0;
  if (!text || !*text || *end || errno || value < low || value > high)
    return stax_cli_usage_error("run", "%s needs a count from %ld to %ld, got '%s'", option, low,
                                high, text ? text : "");
  *out = value;
  return STAX_CLI_OK;
}

/* The value of `--name VALUE` or `--name=VALUE` at argv[*i] (advancing *i), or NULL. */
static const char* option_value(const char* name, int argc, char** argv, int* i, bool* matched) {
  const char* arg = argv[*i];
  size_t n = strlen(name);
  *matched = false;
  if (strncmp(arg, name, n) != 0) return NULL;
  if (arg[n] == '=') {
    *matched = true;
    return arg + n + 1;
  }
  if (arg[n] != '\0') return NULL;
  *matched = true;
  return *i + 1 < argc ? argv[++*i] : NULL;
}

static int add_source(run_args_t* args, run_source_kind_t kind, const char* option,
                      const char* text) {
  if (!text) return stax_cli_usage_error("run", "%s needs a value", option);
  if (args->source_count == STAX_CLI_MAX_SOURCES)
    return stax_cli_usage_error("run", "too many inputs");
  run_source_t* source = &args->sources[args->source_count];
  memset(source, 0, sizeof(*source));
  source->kind = kind;
  source->text = text;
  if (kind == SOURCE_FILE) {
    const char* eq = strchr(text, '=');
    if (eq) {
      source->shape.name = text;
      source->shape.name_length = (size_t)(eq - text);
    }
  } else {
    char why[256];
    if (!stax_cli_parse_shape_spec(text, kind == SOURCE_RANGE, &source->shape, why, sizeof(why)))
      return stax_cli_usage_error("run", "%s '%s': %s", option, text, why);
  }
  args->source_count++;
  return STAX_CLI_OK;
}

/* Parses argv into *args: STAX_CLI_OK, or the exit status to return (help printed: -1). */
static int parse_run_args(int argc, char** argv, run_args_t* args) {
  memset(args, 0, sizeof(*args));
  args->repeat = 1;
  args->fill = STAX_CLI_FILL_RANDOM;
  args->jit = STAX_JIT_BACKGROUND;
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    int code = stax_cli_pass_option("run", argc, argv, &i);
    if (code == STAX_CLI_OK) continue;
    if (code > 0) return code;
    bool matched = false;
    const char* value = NULL;
    code = STAX_CLI_OK;
    if (stax_cli_is_help(arg)) {
      print_run_help(stdout);
      return -1;
    } else if (strcmp(arg, "-i") == 0 || strcmp(arg, "--input") == 0) {
      code = add_source(args, SOURCE_FILE, arg, ++i < argc ? argv[i] : NULL);
    } else if ((value = option_value("--shape", argc, argv, &i, &matched)) || matched) {
      code = add_source(args, SOURCE_SHAPE, "--shape", value);
    } else if ((value = option_value("--shape-range", argc, argv, &i, &matched)) || matched) {
      code = add_source(args, SOURCE_RANGE, "--shape-range", value);
    } else if ((value = option_value("--fill", argc, argv, &i, &matched)) || matched) {
      if (value && strcmp(value, "random") == 0) args->fill = STAX_CLI_FILL_RANDOM;
      else if (value && strcmp(value, "zeros") == 0) args->fill = STAX_CLI_FILL_ZEROS;
      else code = stax_cli_usage_error("run", "--fill needs random or zeros, got '%s'",
                                       value ? value : "");
    } else if ((value = option_value("--seed", argc, argv, &i, &matched)) || matched) {
      char* end = NULL;
      errno = 0;
      unsigned long long seed = value ? strtoull(value, &end, 10) : 0;
      if (!value || !*value || *end || errno || value[0] == '-')
        code = stax_cli_usage_error("run", "--seed needs a non-negative integer, got '%s'",
                                    value ? value : "");
      args->seed = seed;
    } else if ((value = option_value("--repeat", argc, argv, &i, &matched)) || matched) {
      code = parse_count("--repeat", value, 1, 100000000, &args->repeat);
      args->repeat_given = true;
    } else if ((value = option_value("--warmup", argc, argv, &i, &matched)) || matched) {
      code = parse_count("--warmup", value, 0, 100000000, &args->warmup);
    } else if ((value = option_value("--threads", argc, argv, &i, &matched)) || matched) {
      code = parse_count("--threads", value, 1, 1024, &args->threads);
    } else if ((value = option_value("--duration", argc, argv, &i, &matched)) || matched) {
      char* end = NULL;
      double seconds = value ? strtod(value, &end) : 0;
      /* !(x > 0) also refuses NaN. */
      if (!value || !*value || *end || !(seconds > 0) || seconds > 1e6)
        code = stax_cli_usage_error("run", "--duration needs seconds above 0 (at most 1e6), "
                                    "got '%s'", value ? value : "");
      args->duration = seconds;
    } else if ((value = option_value("--jit-threshold", argc, argv, &i, &matched)) || matched) {
      code = parse_count("--jit-threshold", value, 1, 1000000, &args->jit_threshold);
    } else if ((value = option_value("--jit-versions", argc, argv, &i, &matched)) || matched) {
      code = parse_count("--jit-versions", value, 1, 1000000, &args->jit_versions);
    } else if ((value = option_value("--jit-generic", argc, argv, &i, &matched)) || matched) {
      if (value && strcmp(value, "on") == 0) args->jit_generic = STAX_JIT_GENERIC_ON;
      else if (value && strcmp(value, "off") == 0) args->jit_generic = STAX_JIT_GENERIC_OFF;
      else code = stax_cli_usage_error("run", "--jit-generic needs on or off, got '%s'",
                                       value ? value : "");
    } else if ((value = option_value("--jit", argc, argv, &i, &matched)) || matched) {
      if (value && strcmp(value, "on") == 0) args->jit = STAX_JIT_BACKGROUND;
      else if (value && strcmp(value, "off") == 0) args->jit = STAX_JIT_OFF;
      else if (value && strcmp(value, "sync") == 0) args->jit = STAX_JIT_SYNC;
      else code = stax_cli_usage_error("run", "--jit needs on, off or sync, got '%s'",
                                       value ? value : "");
    } else if ((value = option_value("--stats-json", argc, argv, &i, &matched)) || matched) {
      if (!value) code = stax_cli_usage_error("run", "--stats-json needs a file");
      args->stats_path = value;
    } else if ((value = option_value("--trace-max-events", argc, argv, &i, &matched)) ||
               matched) {
      code = parse_count("--trace-max-events", value, 1, 100000000, &args->trace_max_events);
    } else if ((value = option_value("--trace", argc, argv, &i, &matched)) || matched) {
      if (!value || !*value) code = stax_cli_usage_error("run", "--trace needs a file");
      args->trace_path = value;
    } else if ((value = option_value("--dispatch", argc, argv, &i, &matched)) || matched) {
      if (value && strcmp(value, "goto") == 0) args->dispatch = STAX_DISPATCH_GOTO;
      else if (value && strcmp(value, "switch") == 0) args->dispatch = STAX_DISPATCH_SWITCH;
      else code = stax_cli_usage_error("run", "--dispatch needs goto or switch, got '%s'",
                                       value ? value : "");
    } else if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
      if (++i >= argc) return stax_cli_usage_error("run", "%s needs a directory", arg);
      args->out_dir = argv[i];
    } else if (arg[0] == '-' && arg[1] != '\0') {
      /* A typo of a long option gets the nearest one ("--shapes" -> "--shape"). */
      char name[64];
      snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg, "="), arg);
      const char* suggestion = strncmp(name, "--", 2) == 0
          ? stax_cli_suggest(name, run_long_options,
                             (int)(sizeof(run_long_options) / sizeof(run_long_options[0])))
          : NULL;
      if (suggestion)
        return stax_cli_usage_error("run", "unknown option '%s'; did you mean '%s'?", arg,
                                    suggestion);
      return stax_cli_usage_error("run", "unknown option '%s'", arg);
    } else if (args->path) {
      return stax_cli_usage_error("run", "more than one model given ('%s' and '%s')", args->path,
                                  arg);
    } else {
      args->path = arg;
    }
    if (code != STAX_CLI_OK) return code;
  }
  if (!args->path) return stax_cli_usage_error("run", "no model given");
  if (args->trace_max_events > 0 && !args->trace_path)
    return stax_cli_usage_error("run", "--trace-max-events needs --trace FILE");
  return STAX_CLI_OK;
}

/* ---- the run ------------------------------------------------------------------------------- */

int stax_cli_run(int argc, char** argv) {
  /* static: the argument and input tables are large (the CLI runs one verb per process). */
  static run_args_t args;
  static run_inputs_t in;
  int code = parse_run_args(argc, argv, &args);
  if (code < 0) return STAX_CLI_OK; /* --help */
  if (code != STAX_CLI_OK) return code;
  memset(&in, 0, sizeof(in));

  stax_cli_model_t model;
  memset(&model, 0, sizeof(model));
  stax_context_t* context = NULL;
  stax_threadpool_t* pool = NULL;
  stax_tensor_t* outputs[STAX_CLI_MAX_INPUTS] = {0};
  stax_cli_timings_t timings;
  memset(&timings, 0, sizeof(timings));
  stax_cli_call_log_t call_log;
  memset(&call_log, 0, sizeof(call_log));
  int32_t output_count = 0;
  stax_status_t status = STAX_OK;
  bool progress = stax_cli_progress_enabled();
  /* --threads sizes the process-wide pool before anything starts it (the graph passes may);
   * a pool already running gets a pool of the run's own instead. */
  if (args.threads > 0 && !stax_threadpool_set_default_threads((int32_t)args.threads))
    status = stax_threadpool_create(stax_allocator_system(), (int32_t)args.threads, &pool);
  if (!status) status = stax_cli_model_open(args.path, &model);
  if (!status) status = stax_cli_model_compile(&model);
  if (status) goto cleanup;
  in.program = model.program;
  in.input_count = stax_program_input_count(model.program);
  output_count = stax_program_output_count(model.program);
  if (in.input_count > STAX_CLI_MAX_INPUTS || output_count > STAX_CLI_MAX_INPUTS) {
    status = stax_status_make(STAX_UNIMPLEMENTED, "models with more than %d inputs or outputs",
                              STAX_CLI_MAX_INPUTS);
    goto cleanup;
  }
  status = run_inputs_setup(&in, &args);
  if (status) goto cleanup;
  stax_context_options_t options = {.dispatch = args.dispatch,
                                    .pool = pool,
                                    .jit = args.jit,
                                    .jit_threshold = (int32_t)args.jit_threshold,
                                    .jit_max_versions = (int32_t)args.jit_versions,
                                    .jit_generic = args.jit_generic,
                                    .trace = args.trace_path != NULL,
                                    .trace_max_events = args.trace_max_events,
                                    .progress = progress ? stax_cli_progress_compile : NULL,
                                    .progress_data = (void*)"run"};
  status = stax_context_create(stax_allocator_system(), model.program, &options, &context);
  if (status) goto cleanup;

  /* --stats-json: how every call ran, for `stax report`. */
  if (args.stats_path) status = stax_cli_call_log_begin(&call_log, model.program);
  if (status) goto cleanup;
  /* Shape rows are worth it when calls can differ in shape. */
  bool per_shape = in.set_count > 1 || in.any_range;
  long limit = args.repeat_given || args.duration <= 0 ? args.repeat : 100000000;
  uint64_t draws = 0;
  double deadline = 0;
  for (long k = 0; k < args.warmup + limit; k++) {
    bool timed = k >= args.warmup;
    long call = timed ? k - args.warmup : k; /* the timed calls start the cycle again */
    status = run_inputs_for_call(&in, &args, call, draws++);
    if (status) goto cleanup;
    for (int32_t o = 0; o < output_count; o++) {
      if (outputs[o]) stax_tensor_release(outputs[o]);
      outputs[o] = NULL;
    }
    if (timed && k == args.warmup && args.duration > 0) deadline = now_seconds() + args.duration;
    double start = now_seconds();
    status = stax_context_run(context, in.input_count, in.call, output_count, outputs);
    double end = now_seconds();
    if (status) goto cleanup;
    if (args.stats_path)
      status = stax_cli_call_log_add(&call_log, model.program, start, end - start, !timed);
    if (status) goto cleanup;
    if (timed) {
      char key[1024];
      if (per_shape) run_inputs_shape_key(&in, key, sizeof(key));
      status = stax_cli_timings_add(&timings, end - start, per_shape ? key : NULL);
      if (status) goto cleanup;
      if (args.duration > 0 && end >= deadline) break;
    }
  }
  if (timings.count > 1 || args.duration > 0 || args.warmup > 0) {
    if (args.warmup > 0) fprintf(stderr, "(after %ld untimed warm-up calls)\n", args.warmup);
    status = stax_cli_timings_report(&timings, per_shape, stderr);
    if (status) goto cleanup;
  }
  if (args.stats_path) {
    stax_cli_jit_drain("run", model.program, progress);
    FILE* f = strcmp(args.stats_path, "-") == 0 ? stdout : fopen(args.stats_path, "w");
    if (!f) {
      status = stax_status_make(STAX_IO_ERROR, "cannot write %s: %s", args.stats_path,
                                strerror(errno));
      goto cleanup;
    }
    status = stax_cli_stats_json_with_calls(context, &call_log, f);
    if (f != stdout && fclose(f) != 0 && !status)
      status = stax_status_make(STAX_IO_ERROR, "cannot write %s", args.stats_path);
    if (status) goto cleanup;
  }
  if (args.out_dir) {
    status = make_folders(args.out_dir);
    if (status) goto cleanup;
  }
  /* With --stats-json - stdout is the JSON alone (for a pipe into a JSON reader). */
  FILE* summary = args.stats_path && strcmp(args.stats_path, "-") == 0 ? stderr : stdout;
  for (int32_t o = 0; o < output_count; o++) {
    const char* name = stax_program_output_name(model.program, o);
    char file_name[256], file_path[4096];
    output_file_name(name, file_name, sizeof(file_name));
    if (stax_tensor_is_sequence(outputs[o])) {
      /* A sequence output: one line, and one file per element (<name>_<k>.npy). */
      int64_t length = stax_sequence_length(outputs[o]);
      fprintf(summary, "%s: a sequence of %lld %s tensors\n", name, (long long)length,
             stax_dtype_name(stax_tensor_dtype(outputs[o])));
      for (int64_t k = 0; k < length; k++) {
        char element_name[300];
        snprintf(element_name, sizeof(element_name), "%s[%lld]", name, (long long)k);
        summarise_tensor(summary, element_name, stax_sequence_at(outputs[o], k));
        if (!args.out_dir) continue;
        snprintf(file_path, sizeof(file_path), "%s/%s_%lld.npy", args.out_dir, file_name,
                 (long long)k);
        status = stax_npy_save(stax_sequence_at(outputs[o], k), file_path);
        if (status) goto cleanup;
      }
      continue;
    }
    summarise_tensor(summary, name, outputs[o]);
    if (!args.out_dir) continue;
    snprintf(file_path, sizeof(file_path), "%s/%s.npy", args.out_dir, file_name);
    status = stax_npy_save(outputs[o], file_path);
    if (status) goto cleanup;
  }
  /* Compiles still in flight finish before the program goes (after the outputs are out), so
   * their kernels reach the object cache and the next run with these shapes starts warm;
   * and so that their events are in the trace. */
  stax_cli_jit_drain("run", model.program, progress);
  if (args.trace_path) status = stax_context_trace_save(context, args.trace_path);
cleanup:
  stax_cli_progress_finish();
  stax_cli_timings_free(&timings);
  stax_cli_call_log_free(&call_log);
  run_inputs_free(&in);
  for (int32_t o = 0; o < STAX_CLI_MAX_INPUTS; o++)
    if (outputs[o]) stax_tensor_release(outputs[o]);
  if (context) stax_context_destroy(context);
  stax_cli_model_close(&model);
  if (pool) stax_threadpool_destroy(pool);
  if (status) return stax_cli_fail("run", status);
  return STAX_CLI_OK;
}
