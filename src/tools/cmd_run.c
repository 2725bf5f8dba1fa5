/* `stax run` (run a model on tensor files, write the outputs as .npy) and `stax compile`
 * (save the compiled bytecode program). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tools/cli.h"

#define STAX_CLI_MAX_INPUTS 256
/* Input sets `stax run` cycles through (an input given several times). */
#define STAX_CLI_MAX_SETS 16

static void print_run_help(FILE* f) {
  fprintf(f,
          "usage: stax run MODEL -i NAME=FILE [-i NAME=FILE ...] [-o OUTDIR] [options]\n"
          "\n"
          "Runs MODEL (an .onnx file, or a program saved by 'stax compile') on the given\n"
          "inputs and writes each output as OUTDIR/<output name>.npy (characters other than\n"
          "letters, digits, '.', '_' and '-' in a name become '_').\n"
          "\n"
          "  -i NAME=FILE     an input: FILE is .npy (any dtype stax supports, C or Fortran\n"
          "                   order) or .pb (an ONNX TensorProto); with a single-input model\n"
          "                   NAME= may be left out\n"
          "                   an input given several times: calls cycle through its files\n"
          "                   (to hop between shapes with --repeat)\n"
          "  -o OUTDIR        where outputs go (created if missing); without it, outputs are\n"
          "                   summarised on stdout only\n"
          "  --repeat N       run the inputs N times and report time per call (median, min,\n"
          "                   max; the first call; the median of the last half of the calls)\n"
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
          "                   generic and exact versions; per call: compiled, partly\n"
          "                   compiled, interpreted; memory: the arena the last call\n"
          "                   needed, its peak, allocator calls of the last call\n"
          "                   (docs/memory.md; STAX_MEMORY_PLAN=0 switches planning off)\n"
          STAX_CLI_PASS_OPTION_HELP
          "\n"
          "Exit status: 0 on success, 1 on any error (message on stderr), 2 on bad usage.\n");
}

static void print_compile_help(FILE* f) {
  fprintf(f,
          "usage: stax compile MODEL.onnx -o FILE [--disable-pass LIST]\n"
          "\n"
          "Imports and compiles an ONNX model and saves the bytecode program to FILE. 'stax\n"
          "run FILE' loads it back (through the bytecode verifier) and runs it.\n"
          "\n" STAX_CLI_PASS_OPTION_HELP);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
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

static void summarise_tensor(const char* name, const stax_tensor_t* tensor) {
  printf("%s: %s[", name, stax_dtype_name(stax_tensor_dtype(tensor)));
  for (int32_t d = 0; d < stax_tensor_rank(tensor); d++)
    printf("%s%lld", d ? ", " : "", (long long)stax_tensor_dims(tensor)[d]);
  printf("]\n");
}

int stax_cli_run(int argc, char** argv) {
  const char* path = NULL;
  const char* out_dir = NULL;
  const char* input_specs[STAX_CLI_MAX_INPUTS * 4];
  int input_spec_count = 0;
  long repeat = 1;
  stax_dispatch_mode_t dispatch = STAX_DISPATCH_DEFAULT;
  stax_jit_mode_t jit = STAX_JIT_BACKGROUND;
  long jit_threshold = 0, jit_versions = 0;
  stax_jit_generic_t jit_generic = STAX_JIT_GENERIC_DEFAULT;
  const char* stats_path = NULL;
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    int taken = stax_cli_pass_option("run", argc, argv, &i);
    if (taken == STAX_CLI_OK) continue;
    if (taken > 0) return taken;
    if (stax_cli_is_help(arg)) {
      print_run_help(stdout);
      return STAX_CLI_OK;
    } else if (strcmp(arg, "-i") == 0 || strcmp(arg, "--input") == 0) {
      if (++i >= argc) return stax_cli_usage_error("run", "%s needs NAME=FILE", arg);
      if (input_spec_count >= STAX_CLI_MAX_INPUTS * 4)
        return stax_cli_usage_error("run", "too many inputs");
      input_specs[input_spec_count++] = argv[i];
    } else if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
      if (++i >= argc) return stax_cli_usage_error("run", "%s needs a directory", arg);
      out_dir = argv[i];
    } else if (strcmp(arg, "--repeat") == 0) {
      char* end = NULL;
      if (++i >= argc) return stax_cli_usage_error("run", "--repeat needs a count");
      repeat = strtol(argv[i], &end, 10);
      if (!end || *end || repeat < 1 || repeat > 1000000)
        return stax_cli_usage_error("run", "--repeat needs a count from 1 to 1000000, got '%s'",
                                    argv[i]);
    } else if (strcmp(arg, "--jit") == 0 || strncmp(arg, "--jit=", 6) == 0) {
      const char* mode = arg[5] == '=' ? arg + 6 : (++i < argc ? argv[i] : NULL);
      if (!mode) return stax_cli_usage_error("run", "--jit needs on, off or sync");
      if (strcmp(mode, "on") == 0) jit = STAX_JIT_BACKGROUND;
      else if (strcmp(mode, "off") == 0) jit = STAX_JIT_OFF;
      else if (strcmp(mode, "sync") == 0) jit = STAX_JIT_SYNC;
      else return stax_cli_usage_error("run", "--jit needs on, off or sync, got '%s'", mode);
    } else if (strcmp(arg, "--jit-threshold") == 0 || strcmp(arg, "--jit-versions") == 0) {
      char* end = NULL;
      if (++i >= argc) return stax_cli_usage_error("run", "%s needs a count", arg);
      long value = strtol(argv[i], &end, 10);
      if (!end || *end || value < 1 || value > 1000000)
        return stax_cli_usage_error("run", "%s needs a count from 1 to 1000000, got '%s'", arg,
                                    argv[i]);
      if (arg[6] == 't') jit_threshold = value;
      else jit_versions = value;
    } else if (strcmp(arg, "--jit-generic") == 0 || strncmp(arg, "--jit-generic=", 14) == 0) {
      const char* mode = arg[13] == '=' ? arg + 14 : (++i < argc ? argv[i] : NULL);
      if (mode && strcmp(mode, "on") == 0) jit_generic = STAX_JIT_GENERIC_ON;
      else if (mode && strcmp(mode, "off") == 0) jit_generic = STAX_JIT_GENERIC_OFF;
      else return stax_cli_usage_error("run", "--jit-generic needs on or off, got '%s'",
                                       mode ? mode : "");
    } else if (strcmp(arg, "--stats-json") == 0) {
      if (++i >= argc) return stax_cli_usage_error("run", "--stats-json needs a file");
      stats_path = argv[i];
    } else if (strcmp(arg, "--dispatch") == 0) {
      if (++i >= argc) return stax_cli_usage_error("run", "--dispatch needs goto or switch");
      if (strcmp(argv[i], "goto") == 0)
        dispatch = STAX_DISPATCH_GOTO;
      else if (strcmp(argv[i], "switch") == 0)
        dispatch = STAX_DISPATCH_SWITCH;
      else
        return stax_cli_usage_error("run", "--dispatch needs goto or switch, got '%s'", argv[i]);
    } else if (arg[0] == '-') {
      return stax_cli_usage_error("run", "unknown option '%s'", arg);
    } else if (path) {
      return stax_cli_usage_error("run", "more than one model given ('%s' and '%s')", path, arg);
    } else {
      path = arg;
    }
  }
  if (!path) return stax_cli_usage_error("run", "no model given");

  stax_cli_model_t model;
  stax_context_t* context = NULL;
  /* static: 32 KiB of pointers is better kept off the stack (the CLI runs one verb). */
  static stax_tensor_t* input_sets[STAX_CLI_MAX_SETS][STAX_CLI_MAX_INPUTS];
  memset(input_sets, 0, sizeof(input_sets));
  stax_tensor_t** inputs = input_sets[0];
  int set_count = 1;
  stax_tensor_t* outputs[STAX_CLI_MAX_INPUTS] = {0};
  double* times = NULL;
  int32_t input_count = 0, output_count = 0;
  stax_status_t status = stax_cli_model_open(path, &model);
  if (!status) status = stax_cli_model_compile(&model);
  if (status) goto cleanup;
  input_count = stax_program_input_count(model.program);
  output_count = stax_program_output_count(model.program);
  if (input_count > STAX_CLI_MAX_INPUTS || output_count > STAX_CLI_MAX_INPUTS) {
    status = stax_status_make(STAX_UNIMPLEMENTED, "models with more than %d inputs or outputs",
                              STAX_CLI_MAX_INPUTS);
    goto cleanup;
  }
  /* Match each -i to a program input by name. */
  for (int s = 0; s < input_spec_count; s++) {
    const char* spec = input_specs[s];
    const char* eq = strchr(spec, '=');
    const char* file = eq ? eq + 1 : spec;
    int32_t index = -1;
    if (eq) {
      for (int32_t i = 0; i < input_count; i++) {
        const char* name = stax_program_input_name(model.program, i);
        if (strlen(name) == (size_t)(eq - spec) && strncmp(name, spec, (size_t)(eq - spec)) == 0)
          index = i;
      }
      if (index < 0) {
        status = stax_status_make(STAX_INVALID_ARGUMENT, "the model has no input named '%.*s'",
                                  (int)(eq - spec), spec);
        goto cleanup;
      }
    } else if (input_count == 1) {
      index = 0;
    } else {
      status = stax_status_make(STAX_INVALID_ARGUMENT,
                                "'-i %s' needs NAME=FILE: the model has %d inputs", spec,
                                input_count);
      goto cleanup;
    }
    int set = 0;
    while (set < STAX_CLI_MAX_SETS && input_sets[set][index]) set++;
    if (set == STAX_CLI_MAX_SETS) {
      status = stax_status_make(STAX_INVALID_ARGUMENT, "input '%s' is given more than %d times",
                                stax_program_input_name(model.program, index), STAX_CLI_MAX_SETS);
      goto cleanup;
    }
    if (set + 1 > set_count) set_count = set + 1;
    status = stax_cli_read_tensor(file, &input_sets[set][index]);
    if (status) {
      status = stax_status_annotate(status, "input '%s'",
                                    stax_program_input_name(model.program, index));
      goto cleanup;
    }
  }
  for (int32_t i = 0; i < input_count; i++) {
    if (!inputs[i]) {
      status = stax_status_make(STAX_INVALID_ARGUMENT, "input '%s' is missing (give -i %s=FILE)",
                                stax_program_input_name(model.program, i),
                                stax_program_input_name(model.program, i));
      goto cleanup;
    }
  }
  /* An input given fewer times than another keeps its first file in the later sets. */
  for (int set = 1; set < set_count; set++)
    for (int32_t i = 0; i < input_count; i++)
      if (!input_sets[set][i]) {
        input_sets[set][i] = input_sets[0][i];
        stax_tensor_retain(input_sets[set][i]);
      }
  stax_context_options_t options = {.dispatch = dispatch,
                                    .jit = jit,
                                    .jit_threshold = (int32_t)jit_threshold,
                                    .jit_max_versions = (int32_t)jit_versions,
                                    .jit_generic = jit_generic};
  status = stax_context_create(stax_allocator_system(), model.program, &options, &context);
  if (status) goto cleanup;
  times = calloc((size_t)repeat, sizeof(double));
  if (!times) {
    status = stax_status_make(STAX_OUT_OF_MEMORY, "no memory for %ld timings", repeat);
    goto cleanup;
  }
  for (long r = 0; r < repeat; r++) {
    for (int32_t o = 0; o < output_count; o++) {
      if (outputs[o]) stax_tensor_release(outputs[o]);
      outputs[o] = NULL;
    }
    double start = now_seconds();
    status = stax_context_run(context, input_count, input_sets[r % set_count], output_count,
                              outputs);
    times[r] = now_seconds() - start;
    if (status) goto cleanup;
  }
  if (repeat > 1) {
    /* Warm-up and steady state apart: the first call pays for first-touch work (and, with
     * --jit=sync, the compiles); the second half runs once the background compiler is done
     * (when the run is long enough for it). */
    double first = times[0];
    long half = repeat / 2, tail = repeat - half;
    qsort(times + half, (size_t)tail, sizeof(double), compare_doubles);
    double steady = times[half + tail / 2];
    qsort(times, (size_t)repeat, sizeof(double), compare_doubles);
    fprintf(stderr, "%ld calls: median %.3f ms, min %.3f ms, max %.3f ms\n", repeat,
            times[repeat / 2] * 1e3, times[0] * 1e3, times[repeat - 1] * 1e3);
    fprintf(stderr, "first call %.3f ms; last %ld calls: median %.3f ms\n", first * 1e3, tail,
            steady * 1e3);
  }
  if (stats_path) {
    stax_program_jit_drain(model.program);
    FILE* f = strcmp(stats_path, "-") == 0 ? stdout : fopen(stats_path, "w");
    if (!f) {
      status = stax_status_make(STAX_IO_ERROR, "cannot write %s: %s", stats_path, strerror(errno));
      goto cleanup;
    }
    status = stax_context_stats_json(context, f);
    if (f != stdout && fclose(f) != 0 && !status)
      status = stax_status_make(STAX_IO_ERROR, "cannot write %s", stats_path);
    if (status) goto cleanup;
  }
  if (out_dir) {
    status = make_folders(out_dir);
    if (status) goto cleanup;
  }
  for (int32_t o = 0; o < output_count; o++) {
    const char* name = stax_program_output_name(model.program, o);
    summarise_tensor(name, outputs[o]);
    if (!out_dir) continue;
    char file_name[256], file_path[4096];
    output_file_name(name, file_name, sizeof(file_name));
    snprintf(file_path, sizeof(file_path), "%s/%s.npy", out_dir, file_name);
    status = stax_npy_save(outputs[o], file_path);
    if (status) goto cleanup;
  }
  /* Compiles still in flight finish before the program goes (after the outputs are out), so
   * their kernels reach the object cache and the next run with these shapes starts warm. */
  stax_program_jit_drain(model.program);
cleanup:
  free(times);
  for (int32_t i = 0; i < STAX_CLI_MAX_INPUTS; i++) {
    for (int set = 0; set < STAX_CLI_MAX_SETS; set++)
      if (input_sets[set][i]) stax_tensor_release(input_sets[set][i]);
    if (outputs[i]) stax_tensor_release(outputs[i]);
  }
  if (context) stax_context_destroy(context);
  stax_cli_model_close(&model);
  if (status) return stax_cli_fail("run", status);
  return STAX_CLI_OK;
}

int stax_cli_compile(int argc, char** argv) {
  const char* path = NULL;
  const char* out_path = NULL;
  for (int i = 1; i < argc; i++) {
    int taken = stax_cli_pass_option("compile", argc, argv, &i);
    if (taken == STAX_CLI_OK) continue;
    if (taken > 0) return taken;
    if (stax_cli_is_help(argv[i])) {
      print_compile_help(stdout);
      return STAX_CLI_OK;
    } else if (strcmp(argv[i], "-o") == 0) {
      if (++i >= argc) return stax_cli_usage_error("compile", "-o needs a file");
      out_path = argv[i];
    } else if (argv[i][0] == '-') {
      return stax_cli_usage_error("compile", "unknown option '%s'", argv[i]);
    } else if (path) {
      return stax_cli_usage_error("compile", "more than one model given");
    } else {
      path = argv[i];
    }
  }
  if (!path) return stax_cli_usage_error("compile", "no model given");
  if (!out_path) return stax_cli_usage_error("compile", "no output file given (-o FILE)");
  stax_cli_model_t model;
  stax_status_t status = stax_cli_model_open(path, &model);
  if (!status && !model.graph)
    status = stax_status_make(STAX_INVALID_ARGUMENT, "%s is already a compiled program", path);
  if (!status) status = stax_cli_model_compile(&model);
  if (!status) status = stax_program_save(model.program, out_path);
  stax_cli_model_close(&model);
  if (status) return stax_cli_fail("compile", status);
  return STAX_CLI_OK;
}
