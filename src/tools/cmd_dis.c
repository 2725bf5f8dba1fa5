/* `stax dis MODEL`: the bytecode in its extended and compact forms. */
#include <string.h>

#include "tools/cli.h"

static void print_dis_help(FILE* f) {
  fprintf(f,
          "usage: stax dis MODEL [--extended | --compact] [--disable-pass LIST]\n"
          "\n"
          "Compiles MODEL (an .onnx file; a saved program is loaded as is) and prints its\n"
          "bytecode: the extended form (records with shape descriptors and the derivation of\n"
          "every dynamic dim) and the compact form the interpreter fetches. By default both.\n"
          "\n" STAX_CLI_PASS_OPTION_HELP);
}

int stax_cli_dis(int argc, char** argv) {
  const char* path = NULL;
  uint32_t forms = 0;
  for (int i = 1; i < argc; i++) {
    int taken = stax_cli_pass_option("dis", argc, argv, &i);
    if (taken == STAX_CLI_OK) continue;
    if (taken > 0) return taken;
    if (stax_cli_is_help(argv[i])) {
      print_dis_help(stdout);
      return STAX_CLI_OK;
    } else if (strcmp(argv[i], "--extended") == 0) {
      forms |= STAX_DISASSEMBLE_EXTENDED;
    } else if (strcmp(argv[i], "--compact") == 0) {
      forms |= STAX_DISASSEMBLE_COMPACT;
    } else if (argv[i][0] == '-') {
      return stax_cli_usage_error("dis", "unknown option '%s'", argv[i]);
    } else if (path) {
      return stax_cli_usage_error("dis", "more than one model given");
    } else {
      path = argv[i];
    }
  }
  if (!path) return stax_cli_usage_error("dis", "no model given");
  if (!forms) forms = STAX_DISASSEMBLE_EXTENDED | STAX_DISASSEMBLE_COMPACT;
  stax_cli_model_t model;
  stax_status_t status = stax_cli_model_open(path, &model);
  if (!status) status = stax_cli_model_compile(&model);
  if (!status) status = stax_program_disassemble(model.program, forms, stdout);
  stax_cli_model_close(&model);
  if (status) return stax_cli_fail("dis", status);
  return STAX_CLI_OK;
}
