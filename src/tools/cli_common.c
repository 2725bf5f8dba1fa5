/* Model loading, tensor files and error reporting shared by the stax verbs. */
#include <stdarg.h>
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

stax_status_t stax_cli_model_open(const char* path, stax_cli_model_t* out_model) {
  memset(out_model, 0, sizeof(*out_model));
  if (ends_with(path, ".onnx")) {
    return stax_onnx_import_file(stax_allocator_system(), path, NULL, &out_model->graph);
  }
  return stax_program_load(stax_allocator_system(), path, &out_model->program);
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
