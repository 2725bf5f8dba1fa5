/* `stax compile`: import and compile an ONNX model and save the bytecode program. */
#include <string.h>

#include "tools/cli.h"

static void print_compile_help(FILE* f) {
  fprintf(f,
          "usage: stax compile MODEL.onnx -o FILE [--disable-pass LIST]\n"
          "\n"
          "Imports and compiles an ONNX model and saves the bytecode program to FILE. 'stax\n"
          "run FILE' loads it back (through the bytecode verifier) and runs it.\n"
          "\n" STAX_CLI_PASS_OPTION_HELP);
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
