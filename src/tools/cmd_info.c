/* `stax info MODEL`: inputs and outputs with symbolic shapes, the op histogram and any
 * unsupported ops; with --passes, what the graph passes did. */
#include <string.h>

#include "jit/jit.h"
#include "passes/pass.h"
#include "tools/cli.h"

static void print_info_help(FILE* f) {
  fprintf(f,
          "usage: stax info MODEL [--passes] [--disable-pass LIST]\n"
          "\n"
          "Prints a model's inputs and outputs with their dtypes and symbolic shapes, a\n"
          "histogram of its ops, and every op stax does not support (with node names and\n"
          "opset). MODEL is an .onnx file or a program saved by 'stax compile'.\n"
          "\n"
          "  --passes            compile the model and print what each graph pass did (per\n"
          "                      run: nodes before and after, rewrites), then the op\n"
          "                      histogram after the passes\n"
          STAX_CLI_PASS_OPTION_HELP
          "\n"
          "Exit status: 0 when the model is fully supported, 1 otherwise.\n");
}

static void print_graph_value(stax_graph_t* graph, stax_value_id_t value) {
  char dim_text[128];
  printf("  %s: %s[", stax_value_name(graph, value),
         stax_dtype_name(stax_value_dtype(graph, value)));
  const stax_dim_t* const* dims = stax_value_dims(graph, value);
  for (int32_t d = 0; d < stax_value_rank(graph, value); d++) {
    stax_dim_print(stax_graph_shape_ctx(graph), dims[d], dim_text, sizeof(dim_text));
    printf("%s%s", d ? ", " : "", dim_text);
  }
  printf("]\n");
}


/* A 16-bit node the JIT leaves to the interpreter (docs/jit.md, "16-bit floats"): an op whose
 * lowering is float32 only (stax_jit_op_dtype_lowered) that the widen pass does not compute in
 * float32 (an average's kernel rounds once from double), and a BatchNormalization, which the
 * JIT never lowers and bnfold folds in 16 bits only after a Conv (widened with it). */
static bool half_interprets(const stax_graph_t* graph, int32_t n) {
  stax_op_t op = stax_node_op(graph, n);
  if (op == STAX_OP_BatchNormalization) {
    stax_node_id_t producer = stax_value_producer(graph, stax_node_input(graph, n, 0));
    return producer < 0 || stax_node_op(graph, producer) != STAX_OP_Conv;
  }
  return !stax_jit_op_dtype_lowered(op, STAX_DTYPE_FLOAT16) && !stax_pass_widens_op(op);
}

static void print_graph_info(stax_graph_t* graph) {
  printf("inputs:\n");
  for (int32_t i = 0; i < stax_graph_input_count(graph); i++)
    print_graph_value(graph, stax_graph_input(graph, i));
  printf("outputs:\n");
  for (int32_t i = 0; i < stax_graph_output_count(graph); i++)
    print_graph_value(graph, stax_graph_output(graph, i));
  int32_t counts[STAX_OP_COUNT];
  memset(counts, 0, sizeof(counts));
  int32_t half_nodes = 0, half_interpreted = 0;
  int32_t half_counts[STAX_OP_COUNT];
  memset(half_counts, 0, sizeof(half_counts));
  for (int32_t n = 0; n < stax_graph_node_count(graph); n++) {
    stax_op_t op = stax_node_op(graph, n);
    if (op >= 0 && op < STAX_OP_COUNT) counts[op]++;
    for (int32_t o = 0; o < stax_node_output_count(graph, n); o++) {
      stax_dtype_t dtype = stax_value_dtype(graph, stax_node_output(graph, n, o));
      if (dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16) {
        half_nodes++;
        if (half_interprets(graph, n)) {
          half_interpreted++;
          half_counts[op]++;
        }
        break;
      }
    }
  }
  printf("ops (%d nodes):\n", stax_graph_node_count(graph));
  /* Most frequent first; ties in op-table order. */
  for (;;) {
    int32_t best = -1;
    for (int32_t op = 0; op < STAX_OP_COUNT; op++)
      if (counts[op] > 0 && (best < 0 || counts[op] > counts[best])) best = op;
    if (best < 0) break;
    printf("  %-28s %d\n", stax_op_name((stax_op_t)best), counts[best]);
    counts[best] = 0;
  }
  /* Said here because nothing else would: such nodes run, only slowly. */
  if (half_nodes > 0) {
    printf("note: %d of %d nodes compute float16/bfloat16 values (in float32, each result "
           "rounded to 16 bits)",
           half_nodes, stax_graph_node_count(graph));
    if (half_interpreted > 0) {
      printf("; %d %s no 16-bit compiled kernel and run%s interpreted:", half_interpreted,
             half_interpreted == 1 ? "has" : "have", half_interpreted == 1 ? "s" : "");
      for (int32_t op = 0; op < STAX_OP_COUNT; op++)
        if (half_counts[op] > 0) printf(" %s x%d", stax_op_name((stax_op_t)op), half_counts[op]);
      printf(" (docs/jit.md)");
    }
    printf("\n");
  }
}

static void print_program_value(const stax_program_t* program, bool input, int32_t i) {
  char dim_text[128];
  if (input ? stax_program_input_is_sequence(program, i) : stax_program_output_is_sequence(program, i)) {
    printf("  %s: seq(%s)\n",
           input ? stax_program_input_name(program, i) : stax_program_output_name(program, i),
           stax_dtype_name(input ? stax_program_input_dtype(program, i)
                                 : stax_program_output_dtype(program, i)));
    return;
  }
  printf("  %s: %s[",
         input ? stax_program_input_name(program, i) : stax_program_output_name(program, i),
         stax_dtype_name(input ? stax_program_input_dtype(program, i)
                               : stax_program_output_dtype(program, i)));
  int32_t rank = input ? stax_program_input_rank(program, i) : stax_program_output_rank(program, i);
  for (int32_t d = 0; d < rank; d++) {
    if (input)
      stax_program_input_dim_text(program, i, d, dim_text, sizeof(dim_text));
    else
      stax_program_output_dim_text(program, i, d, dim_text, sizeof(dim_text));
    printf("%s%s", d ? ", " : "", dim_text);
  }
  printf("]\n");
}

static void print_pass_report(const stax_program_t* program) {
  int32_t before = 0, after = 0, rounds = 0, removed = 0;
  stax_program_pass_totals(program, &before, &after, &rounds, &removed);
  printf("graph passes (%d nodes before, %d after, %d round%s):\n", before, after, rounds,
         rounds == 1 ? "" : "s");
  int32_t count = stax_program_pass_report_count(program);
  if (count == 0) printf("  nothing to rewrite\n");
  for (int32_t k = 0; k < count; k++) {
    stax_pass_report_t report;
    stax_status_t status = stax_program_pass_report(program, k, &report);
    if (status) {
      stax_status_free(status);
      continue;
    }
    printf("  round %d %-9s %5d -> %-5d %s\n", report.round, stax_pass_name(report.pass),
           report.nodes_before, report.nodes_after, report.detail);
  }
  if (removed > 0)
    printf("  compiler: %d instructions removed (their results are never read: shape chains\n"
           "  feeding views whose dims are known)\n", removed);
}

int stax_cli_info(int argc, char** argv) {
  const char* path = NULL;
  bool passes = false;
  for (int i = 1; i < argc; i++) {
    int taken = stax_cli_pass_option("info", argc, argv, &i);
    if (taken == STAX_CLI_OK) continue;
    if (taken > 0) return taken;
    if (stax_cli_is_help(argv[i])) {
      print_info_help(stdout);
      return STAX_CLI_OK;
    }
    if (strcmp(argv[i], "--passes") == 0) {
      passes = true;
      continue;
    }
    if (argv[i][0] == '-') return stax_cli_usage_error("info", "unknown option '%s'", argv[i]);
    if (path) return stax_cli_usage_error("info", "more than one model given");
    path = argv[i];
  }
  if (!path) return stax_cli_usage_error("info", "no model given");

  stax_cli_model_kind_t kind;
  stax_status_t kind_status = stax_cli_model_kind(path, &kind);
  if (kind_status) return stax_cli_fail("info", kind_status);
  int exit_code = STAX_CLI_OK;
  if (kind == STAX_CLI_MODEL_ONNX) {
    /* Unsupported ops are listed from the proto before importing (the import stops at
     * them). A file that does not parse is left to stax_cli_model_open, which says what
     * was expected. */
    stax_onnx_op_report_t* report = NULL;
    stax_status_t status = stax_onnx_check_ops_file(stax_allocator_system(), path, &report);
    if (stax_status_code(status) == STAX_PARSE_ERROR) {
      stax_status_free(status);
    } else if (status) {
      return stax_cli_fail("info", status);
    }
    int32_t unsupported = stax_onnx_op_report_count(report);
    if (unsupported > 0) {
      printf("unsupported ops:\n");
      for (int32_t i = 0; i < unsupported; i++) {
        const char* domain = stax_onnx_op_report_domain(report, i);
        printf("  %s%s%s (opset %lld, %s):", domain && domain[0] ? domain : "",
               domain && domain[0] ? "." : "", stax_onnx_op_report_op_type(report, i),
               (long long)stax_onnx_op_report_opset(report, i),
               stax_onnx_op_report_reason(report, i));
        for (int32_t n = 0; n < stax_onnx_op_report_node_count(report, i); n++)
          printf(" '%s'", stax_onnx_op_report_node_name(report, i, n));
        printf("\n");
      }
      exit_code = STAX_CLI_ERROR;
    }
    stax_onnx_op_report_destroy(report);
    if (unsupported > 0) return exit_code;
  }
  stax_cli_model_t model;
  stax_status_t status = stax_cli_model_open(path, &model);
  if (status) return stax_cli_fail("info", status);
  if (model.graph && passes) {
    status = stax_cli_model_compile(&model);
    if (status) {
      stax_cli_model_close(&model);
      return stax_cli_fail("info", status);
    }
    print_graph_info(model.graph); /* the graph as the passes left it */
    print_pass_report(model.program);
  } else if (model.graph) {
    print_graph_info(model.graph);
  } else {
    if (passes) printf("(a saved program keeps no record of its graph passes)\n");
    printf("inputs:\n");
    for (int32_t i = 0; i < stax_program_input_count(model.program); i++)
      print_program_value(model.program, true, i);
    printf("outputs:\n");
    for (int32_t i = 0; i < stax_program_output_count(model.program); i++)
      print_program_value(model.program, false, i);
  }
  stax_cli_model_close(&model);
  return exit_code;
}
