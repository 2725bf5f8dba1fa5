/* `stax source MODEL --shape NAME=DIMxDIM...`: the LLVM IR (or assembly) the JIT generates for
 * each segment of MODEL at the given input shapes. */
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

#define STAX_CLI_SOURCE_MAX_SHAPES 256

static void print_source_help(FILE* f) {
  fprintf(f,
          "usage: stax source MODEL --shape NAME=DIMxDIM... [--shape ...] [--asm]\n"
          "\n"
          "Compiles every segment of MODEL (an .onnx file or a saved program) for the given\n"
          "input shapes and prints each kernel's optimized LLVM IR, or with --asm its\n"
          "assembly. Inputs are zero-filled tensors of the model's dtypes; a scalar is\n"
          "NAME= (nothing after '='). Segments the JIT cannot compile are listed as such\n"
          "(STAX_LOG=jit tells why).\n");
}

int stax_cli_source(int argc, char** argv) {
  const char* path = NULL;
  const char* shapes[STAX_CLI_SOURCE_MAX_SHAPES];
  int shape_count = 0;
  bool assembly = false;
  for (int i = 1; i < argc; i++) {
    if (stax_cli_is_help(argv[i])) {
      print_source_help(stdout);
      return STAX_CLI_OK;
    } else if (strcmp(argv[i], "--asm") == 0) {
      assembly = true;
    } else if (strcmp(argv[i], "--shape") == 0) {
      if (++i >= argc) return stax_cli_usage_error("source", "--shape needs NAME=DIMxDIM...");
      if (shape_count == STAX_CLI_SOURCE_MAX_SHAPES)
        return stax_cli_usage_error("source", "too many --shape options");
      shapes[shape_count++] = argv[i];
    } else if (argv[i][0] == '-') {
      return stax_cli_usage_error("source", "unknown option '%s'", argv[i]);
    } else if (path) {
      return stax_cli_usage_error("source", "more than one model given");
    } else {
      path = argv[i];
    }
  }
  if (!path) return stax_cli_usage_error("source", "no model given");
  stax_cli_model_t model;
  stax_context_t* context = NULL;
  stax_tensor_t** inputs = NULL;
  stax_tensor_t** outputs = NULL;
  int32_t input_count = 0, output_count = 0;
  stax_status_t status = stax_cli_model_open(path, &model);
  if (!status) status = stax_cli_model_compile(&model);
  if (status) return stax_cli_fail("source", status);
  input_count = stax_program_input_count(model.program);
  output_count = stax_program_output_count(model.program);
  inputs = calloc((size_t)input_count + 1, sizeof(*inputs));
  outputs = calloc((size_t)output_count + 1, sizeof(*outputs));
  if (!inputs || !outputs) {
    status = stax_status_make(STAX_OUT_OF_MEMORY, "stax source");
    goto cleanup;
  }
  for (int s = 0; s < shape_count; s++) {
    stax_cli_shape_spec_t spec;
    char why[256];
    if (!stax_cli_parse_shape_spec(shapes[s], false, &spec, why, sizeof(why))) {
      status = stax_status_make(STAX_INVALID_ARGUMENT, "--shape '%s': %s", shapes[s], why);
      goto cleanup;
    }
    int32_t index = stax_cli_find_input(model.program, spec.name, spec.name_length);
    if (index < 0 || inputs[index]) {
      status = stax_status_make(STAX_INVALID_ARGUMENT, "--shape '%s': %s", shapes[s],
                                index < 0 ? "the model has no such input" : "given twice");
      goto cleanup;
    }
    status = stax_tensor_create_zeros(stax_allocator_system(),
                                      stax_program_input_dtype(model.program, index), spec.rank,
                                      spec.lo, &inputs[index]);
    if (status) goto cleanup;
  }
  for (int32_t i = 0; i < input_count; i++) {
    if (!inputs[i]) {
      status = stax_status_make(STAX_INVALID_ARGUMENT, "input '%s' has no --shape",
                                stax_program_input_name(model.program, i));
      goto cleanup;
    }
  }
  /* Sync mode with threshold 1: every segment compiles during this one run. */
  stax_program_jit_keep_sources(model.program);
  stax_context_options_t options = {.jit = STAX_JIT_SYNC, .jit_threshold = 1};
  status = stax_context_create(stax_allocator_system(), model.program, &options, &context);
  if (!status) status = stax_context_run(context, input_count, inputs, output_count, outputs);
  if (!status) status = stax_program_jit_sources(model.program, assembly, stdout);
cleanup:
  for (int32_t i = 0; inputs && i < input_count; i++)
    if (inputs[i]) stax_tensor_release(inputs[i]);
  for (int32_t o = 0; outputs && o < output_count; o++)
    if (outputs[o]) stax_tensor_release(outputs[o]);
  free(inputs);
  free(outputs);
  if (context) stax_context_destroy(context);
  stax_cli_model_close(&model);
  if (status) return stax_cli_fail("source", status);
  return STAX_CLI_OK;
}
