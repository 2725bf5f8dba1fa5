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

/* A model as the verbs see it: the program to run, and, for ONNX input, the graph too. */
typedef struct stax_cli_model_t {
  stax_graph_t* graph;     /* NULL for a saved program */
  stax_program_t* program; /* NULL until compiled (stax_cli_model_compile) */
} stax_cli_model_t;

/* Loads PATH: a ".onnx" file is imported (and not yet compiled); anything else is loaded as a
 * saved stax program. */
STAX_MUST_USE stax_status_t stax_cli_model_open(const char* path, stax_cli_model_t* out_model);
STAX_MUST_USE stax_status_t stax_cli_model_compile(stax_cli_model_t* model);
/* Parses `--disable-pass LIST` (or =LIST) at argv[*i], advancing *i past its value: -1 when
 * argv[*i] is another option, STAX_CLI_OK when taken, STAX_CLI_USAGE after printing why not. */
int stax_cli_pass_option(const char* verb, int argc, char** argv, int* i);
#define STAX_CLI_PASS_OPTION_HELP                                                          \
  "  --disable-pass LIST  switch graph passes off (comma-separated: fold, noop, simplify,\n" \
  "                       fuse, cse, dce, or all); STAX_DISABLE_PASSES does the same\n"
void stax_cli_model_close(stax_cli_model_t* model);

/* Reads FILE (.npy, or .pb for an ONNX TensorProto). */
STAX_MUST_USE stax_status_t stax_cli_read_tensor(const char* path, stax_tensor_t** out_tensor);

int stax_cli_info(int argc, char** argv);
int stax_cli_run(int argc, char** argv);
int stax_cli_compile(int argc, char** argv);
int stax_cli_dis(int argc, char** argv);
int stax_cli_source(int argc, char** argv);

#endif /* STAX_TOOLS_CLI_H_ */
