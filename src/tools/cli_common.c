/* Model loading (recognised by content), tensor files, error reporting and "did you mean"
 * suggestions shared by the stax verbs. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

int stax_cli_fail(const char* verb, stax_status_t status) {
  fprintf(stderr, "stax %s: %s\n", verb, stax_status_message(status));
  stax_status_free(status);
  return STAX_CLI_ERROR;
}

int stax_cli_usage_error(const char* verb, const char* fmt, ...) {
  fprintf(stderr, "stax %s: ", verb);
  va_list args;
  va_start(args, fmt);
  vfprintf(stderr, fmt, args);
  va_end(args);
  fprintf(stderr, " (see 'stax %s --help')\n", verb);
  return STAX_CLI_USAGE;
}

bool stax_cli_is_help(const char* arg) {
  return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

static bool ends_with(const char* text, const char* suffix) {
  size_t n = strlen(text), m = strlen(suffix);
  return n >= m && strcmp(text + n - m, suffix) == 0;
}

/* What a saved program starts with (src/vm/program.h, STAX_VM_FILE_MAGIC). */
static const char stax_cli_program_magic[8] = {'S', 'T', 'A', 'X', 'P', 'R', 'O', 'G'};

stax_status_t stax_cli_model_kind(const char* path, stax_cli_model_kind_t* out_kind) {
  *out_kind = STAX_CLI_MODEL_ONNX;
  FILE* f = fopen(path, "rb");
  if (!f) return stax_status_make(STAX_IO_ERROR, "cannot open '%s': %s", path, strerror(errno));
  char head[sizeof(stax_cli_program_magic)];
  size_t n = fread(head, 1, sizeof(head), f);
  fclose(f);
  /* The magic decides for programs; every other file is offered to the ONNX parser, whatever
   * its name (exporters write .onnx, .pb, .bin, or no extension at all). */
  if (n == sizeof(head) && memcmp(head, stax_cli_program_magic, sizeof(head)) == 0)
    *out_kind = STAX_CLI_MODEL_PROGRAM;
  return STAX_OK;
}

stax_status_t stax_cli_model_open(const char* path, stax_cli_model_t* out_model) {
  memset(out_model, 0, sizeof(*out_model));
  stax_cli_model_kind_t kind;
  STAX_RETURN_IF_ERROR(stax_cli_model_kind(path, &kind));
  if (kind == STAX_CLI_MODEL_PROGRAM)
    return stax_program_load(stax_allocator_system(), path, &out_model->program);
  stax_status_t status =
      stax_onnx_import_file(stax_allocator_system(), path, NULL, &out_model->graph);
  /* A file named .onnx is meant as ONNX: the parser's message says what is wrong with it.
   * Anything else that does not parse may be any file at all: say what was expected. */
  if (stax_status_code(status) == STAX_PARSE_ERROR && !ends_with(path, ".onnx")) {
    stax_status_t plain = stax_status_make(
        STAX_PARSE_ERROR,
        "'%s' is not a model: expected an ONNX model (a ModelProto; as one it fails: %s) or a "
        "program saved by 'stax compile' (it starts with \"STAXPROG\")",
        path, stax_status_message(status));
    stax_status_free(status);
    return plain;
  }
  return status;
}

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions, so "rnu" is
 * one edit from "run"), over short words. */
static size_t edit_distance(const char* a, const char* b) {
  enum { MAX = 64 };
  size_t n = strlen(a), m = strlen(b);
  if (n >= MAX || m >= MAX) return (size_t)-1;
  size_t d[MAX + 1][MAX + 1];
  for (size_t i = 0; i <= n; i++) d[i][0] = i;
  for (size_t j = 0; j <= m; j++) d[0][j] = j;
  for (size_t i = 1; i <= n; i++) {
    for (size_t j = 1; j <= m; j++) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  }
  return d[n][m];
}

const char* stax_cli_suggest(const char* word, const char* const* candidates, int count) {
  /* Close enough to be a typo, not a different word: one edit for short words, two for
   * longer ones, and never more edits than half the word. */
  size_t length = strlen(word);
  size_t limit = length <= 4 ? 1 : 2;
  if (limit > length / 2) limit = length / 2;
  const char* best = NULL;
  size_t best_distance = limit + 1;
  for (int i = 0; i < count; i++) {
    size_t distance = edit_distance(word, candidates[i]);
    if (distance < best_distance) {
      best = candidates[i];
      best_distance = distance;
    }
  }
  return best;
}

/* Set by --disable-pass; applies to every compile the verb makes. */
static uint32_t g_disabled_passes;

int stax_cli_pass_option(const char* verb, int argc, char** argv, int* i) {
  const char* arg = argv[*i];
  const char* list = NULL;
  if (strncmp(arg, "--disable-pass=", 15) == 0) {
    list = arg + 15;
  } else if (strcmp(arg, "--disable-pass") == 0) {
    if (*i + 1 >= argc) return stax_cli_usage_error(verb, "--disable-pass needs a list of passes");
    list = argv[++*i];
  } else {
    return -1;
  }
  uint32_t bits = 0;
  stax_status_t status = stax_pass_parse_list(list, &bits);
  if (status) {
    int code = stax_cli_usage_error(verb, "%s", stax_status_message(status));
    stax_status_free(status);
    return code;
  }
  g_disabled_passes |= bits;
  return STAX_CLI_OK;
}

stax_status_t stax_cli_model_compile(stax_cli_model_t* model) {
  if (model->program) return STAX_OK;
  stax_compile_options_t options = {.disable_passes = g_disabled_passes};
  return stax_program_compile(stax_allocator_system(), model->graph, &options, &model->program);
}

void stax_cli_model_close(stax_cli_model_t* model) {
  if (model->program) stax_program_release(model->program);
  if (model->graph) stax_graph_destroy(model->graph);
  memset(model, 0, sizeof(*model));
}

stax_status_t stax_cli_read_tensor(const char* path, stax_tensor_t** out_tensor) {
  if (ends_with(path, ".pb"))
    return stax_onnx_load_tensor_file(stax_allocator_system(), path, out_tensor, NULL);
  return stax_npy_load(stax_allocator_system(), path, out_tensor);
}
