/* The pass pipeline's entry point for stax_program_compile, and the log it leaves on the
 * program (read through stax_program_pass_report). */
#ifndef STAX_PASSES_PIPELINE_H_
#define STAX_PASSES_PIPELINE_H_

#include "ir/graph_internal.h"
#include "stax/vm.h"

typedef struct stax_pass_log_t {
  stax_allocator_t allocator;
  stax_pass_report_t* entries; /* details owned by the log */
  int32_t count, capacity;
  int32_t nodes_before, nodes_after, rounds;
  int32_t instructions_removed; /* by the compiler's dead-instruction sweep (with dce) */
} stax_pass_log_t;

/* The passes STAX_DISABLE_PASSES switches off (a bad list is reported once on stderr and
 * ignored). */
uint32_t stax_pipeline_env_disabled(void);
/* Runs every pass not in `disabled` (STAX_PASS_BIT bits) over
 * the graph in place until a round changes nothing. *out_log (from `allocator`) receives what
 * each run did. */
STAX_MUST_USE stax_status_t stax_pipeline_run(stax_allocator_t allocator, stax_graph_t* graph,
                                              uint32_t disabled, stax_pass_log_t** out_log);
void stax_pass_log_free(stax_pass_log_t* log);

#endif /* STAX_PASSES_PIPELINE_H_ */
