/* Helpers shared by the JIT tier tests (test_vm_jit.c, test_vm_jit_generic.c): graphs to
 * programs, running a JIT context and an interpreter context on the same inputs. */
#ifndef STAX_TEST_VM_JIT_UTIL_H_
#define STAX_TEST_VM_JIT_UTIL_H_

#include "jit/jit.h"
#include "test_vm_util.h"

static inline stax_graph_t* new_graph(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  return g;
}

static inline stax_program_t* finish(stax_graph_t* g) {
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  return program;
}

/* Runs both contexts on the same inputs (up to 12 outputs); true when every output agrees. */
static inline bool run_both(stax_context_t* jit, stax_context_t* interp, int32_t n_in,
                     stax_tensor_t** in, int32_t n_out) {
  stax_tensor_t* a[12] = {0};
  stax_tensor_t* b[12] = {0};
  bool same = true;
  stax_status_t sa = stax_context_run(jit, n_in, in, n_out, a);
  stax_status_t sb = stax_context_run(interp, n_in, in, n_out, b);
  CHECK_OK(sa);
  CHECK_OK(sb);
  for (int32_t o = 0; o < n_out && a[o] && b[o]; o++) {
    int64_t n = stax_tensor_element_count(b[o]);
    same = same && stax_tensor_element_count(a[o]) == n;
    for (int64_t i = 0; same && i < n; i++) {
      float x = vm_f32_at(a[o], i), y = vm_f32_at(b[o], i);
      if (!(fabsf(x - y) <= 1e-4f * (1.0f + fabsf(y)))) {
        fprintf(stderr, "output %d element %lld: jit %g, interpreter %g\n", o, (long long)i, x, y);
        same = false;
      }
    }
  }
  for (int32_t o = 0; o < n_out; o++) {
    if (a[o]) stax_tensor_release(a[o]);
    if (b[o]) stax_tensor_release(b[o]);
  }
  return same;
}

static inline bool have_backend(void) {
  stax_jit_backend_t* backend = NULL;
  stax_status_t status = stax_jit_backend_get(&backend);
  if (!status) return true;
  fprintf(stderr, "skipped: no JIT backend (%s)\n", stax_status_message(status));
  stax_status_free(status);
  return false;
}
/* The JIT statistics summed over every segment of a program. */
static inline void total_stats(const stax_program_t* program, stax_jit_segment_stats_t* total) {
  memset(total, 0, sizeof(*total));
  for (int32_t s = 0; s < stax_program_segment_count(program); s++) {
    stax_jit_segment_stats_t st;
    CHECK_OK(stax_program_jit_stats(program, s, &st));
    total->entries += st.entries;
    total->hits += st.hits;
    total->misses += st.misses;
    total->compiles += st.compiles;
    total->failures += st.failures;
    total->evictions += st.evictions;
    total->versions += st.versions;
    total->full_hits += st.full_hits;
    total->partial_hits += st.partial_hits;
    total->generic_versions += st.generic_versions;
    total->exact_versions += st.exact_versions;
    total->promotions += st.promotions;
    total->promoted_groups_kept += st.promoted_groups_kept;
    total->promoted_groups_dropped += st.promoted_groups_dropped;
    total->dtype_fallbacks += st.dtype_fallbacks;
  }
}

#endif /* STAX_TEST_VM_JIT_UTIL_H_ */
