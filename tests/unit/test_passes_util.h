/* Helpers shared by the graph-pass tests (test_passes.c, test_passes_shapes.c,
 * test_passes_bnfold.c): compiling a graph with some passes off, counting a graph's ops, and
 * searching the pass report. */
#ifndef STAX_TEST_PASSES_UTIL_H_
#define STAX_TEST_PASSES_UTIL_H_

#include <string.h>

#include "test_vm_util.h"

/* The graph compiled with the passes in `disabled` (bits of passes.def) off. */
static inline stax_program_t* compile_with(stax_graph_t* g, uint32_t disabled) {
  stax_compile_options_t options = {.disable_passes = disabled};
  stax_program_t* program = NULL;
  CHECK_OK(stax_program_compile(vm_alloc(), g, &options, &program));
  return program;
}

/* Nodes of op `op` in the graph (after compiling: what the passes left). */
static inline int32_t count_op(const stax_graph_t* g, stax_op_t op) {
  int32_t count = 0;
  for (int32_t n = 0; n < stax_graph_node_count(g); n++)
    if (stax_node_op(g, n) == op) count++;
  return count;
}

/* A constant int64 vector of `count` values. */
static inline stax_value_id_t i64_vector(stax_graph_t* g, const char* name, int32_t count,
                                         const int64_t* values) {
  int64_t dims[1] = {count};
  return vm_initializer(g, name, STAX_DTYPE_INT64, 1, dims, values);
}

/* True when some pass run's detail mentions `needle`. */
static inline bool report_mentions(const stax_program_t* program, const char* needle) {
  for (int32_t k = 0; k < stax_program_pass_report_count(program); k++) {
    stax_pass_report_t report;
    CHECK_OK(stax_program_pass_report(program, k, &report));
    if (strstr(report.detail, needle)) return true;
  }
  return false;
}

#endif /* STAX_TEST_PASSES_UTIL_H_ */
