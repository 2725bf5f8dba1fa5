/* Compiling one version's groups on several threads at once (docs/jit.md, "Compile latency"):
 * the background compiler with STAX_JIT_COMPILER_THREADS compiler threads, and sync mode on
 * the calling context's pool. A segment of eight groups (four MatMuls and four Softmaxes with
 * views between them) is compiled while calls run; every call is checked against the
 * interpreter, the version must end with every group compiled (calls fully compiled), and
 * the trace must show compiles on more than one thread. A failing compile on several threads
 * keeps results right and leaks nothing (ASan). Also run under TSan (scripts/tsan.sh). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_vm_jit_util.h"

enum { WIDTH = 64, BLOCKS = 4 };

/* x[B, S, 64] -> BLOCKS x (MatMul w_k -> Reshape [B, S, 4, 16] -> Transpose -> Softmax ->
 * Transpose -> Reshape [B, S, 64]) -> + b. */
static stax_program_t* build_blocks(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64),
                               vm_const(g, WIDTH)};
  stax_value_id_t t = vm_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims);
  static float w[BLOCKS][WIDTH * WIDTH], b[WIDTH];
  for (int k = 0; k < BLOCKS; k++)
    for (int i = 0; i < WIDTH * WIDTH; i++)
      w[k][i] = (float)((i * (7 + 2 * k)) % 13) / 13.0f - 0.5f;
  for (int i = 0; i < WIDTH; i++) b[i] = 0.01f * (float)(i - 32);
  int64_t w_dims[2] = {WIDTH, WIDTH}, b_dims[1] = {WIDTH}, four[1] = {4}, three[1] = {3};
  int64_t split[4] = {0, 0, 4, 16}, merge[3] = {0, 0, WIDTH}, perm[4] = {0, 2, 1, 3};
  stax_value_id_t sv = vm_initializer(g, "split", STAX_DTYPE_INT64, 1, four, split);
  stax_value_id_t mv = vm_initializer(g, "merge", STAX_DTYPE_INT64, 1, three, merge);
  stax_attr_t perm_attr = stax_attr_ints("perm", 4, perm);
  stax_attr_t axis = stax_attr_int("axis", -1);
  for (int k = 0; k < BLOCKS; k++) {
    char name[32];
    snprintf(name, sizeof(name), "w%d", k);
    stax_value_id_t wv = vm_initializer(g, name, STAX_DTYPE_FLOAT32, 2, w_dims, w[k]);
    snprintf(name, sizeof(name), "mm%d", k);
    t = vm_binary(g, STAX_OP_MatMul, name, t, wv);
    stax_value_id_t r_in[2] = {t, sv};
    snprintf(name, sizeof(name), "split%d", k);
    t = vm_node(g, STAX_OP_Reshape, name, 2, r_in, 0, NULL);
    snprintf(name, sizeof(name), "ta%d", k);
    t = vm_node(g, STAX_OP_Transpose, name, 1, &t, 1, &perm_attr);
    snprintf(name, sizeof(name), "softmax%d", k);
    t = vm_node(g, STAX_OP_Softmax, name, 1, &t, 1, &axis);
    snprintf(name, sizeof(name), "tb%d", k);
    t = vm_node(g, STAX_OP_Transpose, name, 1, &t, 1, &perm_attr);
    stax_value_id_t m_in[2] = {t, mv};
    snprintf(name, sizeof(name), "merge%d", k);
    t = vm_node(g, STAX_OP_Reshape, name, 2, m_in, 0, NULL);
  }
  stax_value_id_t bv = vm_initializer(g, "b", STAX_DTYPE_FLOAT32, 1, b_dims, b);
  vm_output(g, vm_binary(g, STAX_OP_Add, "bias", t, bv));
  stax_program_t* program = finish(g);
  /* Compile, never load: the object cache would make every compile a load. */
  CHECK_OK(stax_program_jit_set_cache_dir(program, ""));
  return program;
}

static const int64_t shapes[][2] = {{3, 5}, {2, 17}, {1, 1}, {4, 9}, {7, 3}, {2, 33}};
enum { SHAPE_COUNT = sizeof(shapes) / sizeof(shapes[0]) };

static int run_shape(stax_context_t* jit, stax_context_t* interp, vm_rng_t* rng, int index) {
  int64_t xd[3] = {shapes[index % SHAPE_COUNT][0], shapes[index % SHAPE_COUNT][1], WIDTH};
  stax_tensor_t* in[1] = {vm_random_f32(rng, 3, xd)};
  int mismatch = run_both(jit, interp, 1, in, 1) ? 0 : 1;
  stax_tensor_release(in[0]);
  return mismatch;
}

/* Distinct threads that compiled a kernel, from the context's trace (Chrome JSON). */
static int compile_threads(const stax_context_t* ctx) {
  char* json = NULL;
  size_t size = 0;
  FILE* out = open_memstream(&json, &size);
  CHECK(out != NULL);
  CHECK_OK(stax_context_trace_write(ctx, out));
  fclose(out);
  long tids[64];
  int count = 0;
  for (const char* p = json; (p = strstr(p, "\"cat\": \"compile\"")) != NULL; p++) {
    const char* tid = strstr(p, "\"tid\": ");
    if (!tid) break;
    long value = strtol(tid + 7, NULL, 10);
    bool seen = false;
    for (int i = 0; i < count; i++) seen = seen || tids[i] == value;
    if (!seen && count < 64) tids[count++] = value;
  }
  free(json);
  return count;
}

/* Background mode, four compiler threads, threshold 1: the class version's eight groups
 * compile at once while calls of six shapes run (those before it lands interpret, partly
 * compiled ones mix); once drained, every call is fully compiled. */
static void test_background_compiler_threads(void) {
  if (!have_backend()) return;
  setenv("STAX_JIT_COMPILER_THREADS", "4", 1);
  stax_program_t* program = build_blocks();
  stax_context_options_t options = {.jit = STAX_JIT_BACKGROUND, .jit_threshold = 1,
                                    .trace = true};
  stax_context_t* jit = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {0x5eed1u};
  int mismatches = 0;
  for (int i = 0; i < 24; i++) mismatches += run_shape(jit, interp, &rng, i);
  stax_program_jit_drain(program);
  stax_jit_call_stats_t before;
  CHECK_OK(stax_program_jit_call_stats(program, &before));
  for (int i = 0; i < 2 * SHAPE_COUNT; i++) mismatches += run_shape(jit, interp, &rng, i);
  stax_jit_call_stats_t after;
  CHECK_OK(stax_program_jit_call_stats(program, &after));
  CHECK_EQ_INT(mismatches, 0);
  /* One class version with every group: each later call ran fully compiled. */
  CHECK_EQ_INT((int)(after.compiled - before.compiled), 2 * SHAPE_COUNT);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT((int)total.generic_versions, 1);
  CHECK_EQ_INT((int)total.failures, 0);
  CHECK(compile_threads(jit) >= 2);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
  unsetenv("STAX_JIT_COMPILER_THREADS");
}

typedef struct progress_log_t {
  pthread_t caller;
  int begins, kernels, ends, other_thread, last_done, kernel_total;
} progress_log_t;

static void on_progress(void* data, const stax_progress_t* p) {
  progress_log_t* log = data;
  if (!pthread_equal(pthread_self(), log->caller)) log->other_thread++;
  if (p->kind == STAX_PROGRESS_COMPILE_BEGIN) log->begins++, log->kernel_total = p->kernels;
  if (p->kind == STAX_PROGRESS_COMPILE_KERNEL) log->kernels++;
  if (p->kind == STAX_PROGRESS_COMPILE_END) log->ends++, log->last_done = p->done;
}

/* Sync mode on a pool of four: the first call compiles every group on the pool's threads
 * and runs fully compiled; progress comes on the calling thread only, and counts every
 * kernel by the end. */
static void test_sync_compile_on_pool(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_blocks();
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(vm_alloc(), 4, &pool));
  progress_log_t log = {.caller = pthread_self()};
  stax_context_options_t options = {.jit = STAX_JIT_SYNC, .jit_threshold = 1, .pool = pool,
                                    .trace = true, .progress = on_progress,
                                    .progress_data = &log};
  stax_context_t* jit = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {0x5eed2u};
  int mismatches = 0;
  for (int i = 0; i < 2 * SHAPE_COUNT; i++) mismatches += run_shape(jit, interp, &rng, i);
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_call_stats_t calls;
  CHECK_OK(stax_program_jit_call_stats(program, &calls));
  CHECK_EQ_INT((int)calls.compiled, 2 * SHAPE_COUNT);
  CHECK_EQ_INT(log.begins, 1);
  CHECK_EQ_INT(log.ends, 1);
  CHECK_EQ_INT(log.other_thread, 0);
  CHECK(log.kernel_total >= 2 * BLOCKS);
  CHECK_EQ_INT(log.last_done, log.kernel_total);
  CHECK(log.kernels >= 1 && log.kernels <= log.kernel_total);
  CHECK(compile_threads(jit) >= 2);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_threadpool_destroy(pool);
  stax_program_release(program);
}

/* Every compile fails (STAX_JIT_FAIL_COMPILE) on four compiler threads: the class version
 * fails once, calls stay right and interpreted, nothing leaks. */
static void test_failure_on_compiler_threads(void) {
  if (!have_backend()) return;
  setenv("STAX_JIT_COMPILER_THREADS", "4", 1);
  setenv("STAX_JIT_FAIL_COMPILE", "1", 1);
  stax_program_t* program = build_blocks();
  stax_context_options_t options = {.jit = STAX_JIT_BACKGROUND, .jit_threshold = 1};
  stax_context_t* jit = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {0x5eed3u};
  int mismatches = 0;
  for (int i = 0; i < 8; i++) mismatches += run_shape(jit, interp, &rng, i);
  stax_program_jit_drain(program);
  for (int i = 0; i < 4; i++) mismatches += run_shape(jit, interp, &rng, i);
  CHECK_EQ_INT(mismatches, 0);
  stax_jit_segment_stats_t total;
  total_stats(program, &total);
  CHECK_EQ_INT((int)total.compiles, 0);
  CHECK_EQ_INT((int)total.hits, 0);
  CHECK(total.failures >= 1);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
  stax_program_release(program);
  unsetenv("STAX_JIT_FAIL_COMPILE");
  unsetenv("STAX_JIT_COMPILER_THREADS");
}

/* A program released while its compiler threads are mid-job: they stop after the group in
 * hand; nothing leaks or runs after the release (ASan/TSan). */
static void test_release_while_compiling(void) {
  if (!have_backend()) return;
  setenv("STAX_JIT_COMPILER_THREADS", "3", 1);
  for (int round = 0; round < 3; round++) {
    stax_program_t* program = build_blocks();
    stax_context_options_t options = {.jit = STAX_JIT_BACKGROUND, .jit_threshold = 1};
    stax_context_t* jit = NULL;
    CHECK_OK(stax_context_create(vm_alloc(), program, &options, &jit));
    stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
    vm_rng_t rng = {0x5eed4u + (uint64_t)round};
    CHECK_EQ_INT(run_shape(jit, interp, &rng, round), 0);
    stax_context_destroy(jit);
    stax_context_destroy(interp);
    stax_program_release(program);
  }
  unsetenv("STAX_JIT_COMPILER_THREADS");
}

STAX_TEST_MAIN(STAX_TEST(test_background_compiler_threads), STAX_TEST(test_sync_compile_on_pool),
               STAX_TEST(test_failure_on_compiler_threads), STAX_TEST(test_release_while_compiling))
