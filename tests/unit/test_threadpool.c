/* Tests for the thread pool: parallel_for covers every index exactly once with chunks of at
 * least `grain`, concurrent callers share one pool, nested calls run inline, a one-thread pool
 * and a NULL pool run inline, creation errors, STAX_NUM_THREADS and the default pool. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "test_harness.h"

typedef struct sum_job_t {
  int64_t grain;
  int64_t count;
  _Atomic int64_t sum;
  _Atomic int64_t calls;
  _Atomic int64_t short_chunks; /* chunks below grain that are not the final one */
  _Atomic int64_t bad_ranges;
} sum_job_t;

static void sum_range(void* ctx, int64_t begin, int64_t end) {
  sum_job_t* job = (sum_job_t*)ctx;
  if (begin < 0 || end > job->count || begin >= end) atomic_fetch_add(&job->bad_ranges, 1);
  if (end - begin < job->grain && end != job->count) atomic_fetch_add(&job->short_chunks, 1);
  int64_t sum = 0;
  for (int64_t i = begin; i < end; i++) sum += i;
  atomic_fetch_add(&job->sum, sum);
  atomic_fetch_add(&job->calls, 1);
}

static void run_sum(stax_threadpool_t* pool, int64_t count, int64_t grain, sum_job_t* job) {
  memset(job, 0, sizeof(*job));
  job->grain = grain < 1 ? 1 : grain;
  job->count = count;
  stax_parallel_for(pool, count, grain, sum_range, job);
}

static void test_sum_with_grains(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(stax_allocator_system(), 4, &pool));
  CHECK_EQ_INT(stax_threadpool_thread_count(pool), 4);
  const int64_t n = 10 * 1000 * 1000;
  const int64_t grains[] = {1, 1000, 999983, n, 2 * n, 0, -5};
  for (size_t g = 0; g < sizeof(grains) / sizeof(grains[0]); g++) {
    sum_job_t job;
    run_sum(pool, n, grains[g], &job);
    CHECK_EQ_INT(atomic_load(&job.sum), n * (n - 1) / 2);
    CHECK_EQ_INT(atomic_load(&job.short_chunks), 0);
    CHECK_EQ_INT(atomic_load(&job.bad_ranges), 0);
    if (grains[g] >= n) CHECK_EQ_INT(atomic_load(&job.calls), 1);
    if (grains[g] == 1) CHECK(atomic_load(&job.calls) > 1);
  }
  sum_job_t empty;
  run_sum(pool, 0, 1, &empty);
  CHECK_EQ_INT(atomic_load(&empty.calls), 0);
  run_sum(pool, -3, 1, &empty);
  CHECK_EQ_INT(atomic_load(&empty.calls), 0);
  stax_threadpool_destroy(pool);
}

typedef struct visit_job_t {
  _Atomic uint8_t* visits;
} visit_job_t;

static void visit_range(void* ctx, int64_t begin, int64_t end) {
  visit_job_t* job = (visit_job_t*)ctx;
  for (int64_t i = begin; i < end; i++) atomic_fetch_add(&job->visits[i], 1);
}

static void test_every_index_once(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(stax_allocator_system(), 3, &pool));
  const int64_t n = 1000003;
  visit_job_t job;
  job.visits = (_Atomic uint8_t*)calloc((size_t)n, 1);
  stax_parallel_for(pool, n, 7, visit_range, &job);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i++) wrong += atomic_load(&job.visits[i]) != 1;
  CHECK_EQ_INT(wrong, 0);
  free((void*)job.visits);
  stax_threadpool_destroy(pool);
}

typedef struct caller_t {
  stax_threadpool_t* pool;
  int64_t count;
  int64_t wrong;
} caller_t;

static void* call_repeatedly(void* arg) {
  caller_t* caller = (caller_t*)arg;
  for (int round = 0; round < 50; round++) {
    sum_job_t job;
    run_sum(caller->pool, caller->count, 100, &job);
    if (atomic_load(&job.sum) != caller->count * (caller->count - 1) / 2) caller->wrong++;
  }
  return NULL;
}

static void test_concurrent_callers(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(stax_allocator_system(), 4, &pool));
  pthread_t threads[4];
  caller_t callers[4];
  for (int i = 0; i < 4; i++) {
    callers[i] = (caller_t){pool, 20000 + 1000 * i, 0};
    CHECK_EQ_INT(pthread_create(&threads[i], NULL, call_repeatedly, &callers[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(threads[i], NULL);
    CHECK_EQ_INT(callers[i].wrong, 0);
  }
  stax_threadpool_destroy(pool);
}

typedef struct nested_job_t {
  stax_threadpool_t* pool;
  _Atomic int64_t total;
  _Atomic int64_t inner_off_thread; /* inner chunks run on another thread than their caller */
} nested_job_t;

typedef struct inner_ctx_t {
  nested_job_t* outer;
  pthread_t caller;
} inner_ctx_t;

static void inner_range(void* ctx, int64_t begin, int64_t end) {
  inner_ctx_t* inner = (inner_ctx_t*)ctx;
  if (!pthread_equal(inner->caller, pthread_self())) {
    atomic_fetch_add(&inner->outer->inner_off_thread, 1);
  }
  atomic_fetch_add(&inner->outer->total, end - begin);
}

static void outer_range(void* ctx, int64_t begin, int64_t end) {
  nested_job_t* job = (nested_job_t*)ctx;
  for (int64_t i = begin; i < end; i++) {
    inner_ctx_t inner = {job, pthread_self()};
    stax_parallel_for(job->pool, 1000, 1, inner_range, &inner);
  }
}

static void test_nested_calls_run_inline(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(stax_allocator_system(), 4, &pool));
  nested_job_t job;
  memset(&job, 0, sizeof(job));
  job.pool = pool;
  stax_parallel_for(pool, 64, 1, outer_range, &job);
  CHECK_EQ_INT(atomic_load(&job.total), 64 * 1000);
  CHECK_EQ_INT(atomic_load(&job.inner_off_thread), 0);
  stax_threadpool_destroy(pool);
}

typedef struct inline_record_t {
  int calls;
  int64_t begin, end;
  pthread_t thread;
} inline_record_t;

static void record_call(void* ctx, int64_t begin, int64_t end) {
  inline_record_t* record = (inline_record_t*)ctx;
  record->calls++;
  record->begin = begin;
  record->end = end;
  record->thread = pthread_self();
}

static void test_single_thread_and_null_pool_inline(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(stax_allocator_system(), 1, &pool));
  CHECK_EQ_INT(stax_threadpool_thread_count(pool), 1);
  inline_record_t record = {0, 0, 0, pthread_self()};
  stax_parallel_for(pool, 12345, 1, record_call, &record);
  CHECK_EQ_INT(record.calls, 1);
  CHECK(record.begin == 0 && record.end == 12345);
  CHECK(pthread_equal(record.thread, pthread_self()));
  stax_threadpool_destroy(pool);
  memset(&record, 0, sizeof(record));
  stax_parallel_for(NULL, 10, 1, record_call, &record);
  CHECK(record.calls == 1 && record.end == 10);
  CHECK_EQ_INT(stax_threadpool_thread_count(NULL), 1);
  stax_parallel_for(NULL, 10, 1, NULL, NULL); /* no function: nothing to do */
  stax_threadpool_destroy(NULL);
}

static void test_create_errors_and_environment(void) {
  stax_threadpool_t* pool = (stax_threadpool_t*)1;
  CHECK_ERROR(stax_threadpool_create(stax_allocator_system(), -1, &pool), STAX_INVALID_ARGUMENT,
              "thread_count -1");
  CHECK(pool == NULL);
  CHECK_ERROR(stax_threadpool_create(stax_allocator_system(), 5000, &pool), STAX_INVALID_ARGUMENT,
              "thread_count 5000");
  setenv("STAX_NUM_THREADS", "3", 1);
  CHECK_OK(stax_threadpool_create(stax_allocator_system(), 0, &pool));
  CHECK_EQ_INT(stax_threadpool_thread_count(pool), 3);
  stax_threadpool_destroy(pool);
  setenv("STAX_NUM_THREADS", "lots", 1); /* ignored: falls back to the core count */
  CHECK_OK(stax_threadpool_create(stax_allocator_system(), 0, &pool));
  CHECK(stax_threadpool_thread_count(pool) >= 1);
  stax_threadpool_destroy(pool);
  unsetenv("STAX_NUM_THREADS");

  for (uint64_t fail_at = 1; fail_at <= 3; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), fail_at);
    stax_status_t status = stax_threadpool_create(stax_failing_allocator(&state), 2, &pool);
    if (state.failed_count == 0) {
      CHECK_OK(status);
      stax_threadpool_destroy(pool);
    } else {
      CHECK_ERROR(status, STAX_OUT_OF_MEMORY, "pool of 2 threads");
      CHECK(pool == NULL);
    }
    CHECK_EQ_INT(state.live_allocations, 0);
  }
}

static void test_default_pool(void) {
  CHECK(!stax_threadpool_set_default_threads(-2));
  CHECK(stax_threadpool_set_default_threads(2));
  stax_threadpool_t* pool = stax_threadpool_default();
  CHECK(pool != NULL);
  CHECK(pool == stax_threadpool_default());
  CHECK_EQ_INT(stax_threadpool_thread_count(pool), 2);
  CHECK(!stax_threadpool_set_default_threads(4)); /* too late */
  sum_job_t job;
  run_sum(pool, 100000, 10, &job);
  CHECK_EQ_INT(atomic_load(&job.sum), INT64_C(100000) * 99999 / 2);
  /* Destroyed by the atexit handler: the leak checker fails the run otherwise. */
}

STAX_TEST_MAIN(STAX_TEST(test_sum_with_grains), STAX_TEST(test_every_index_once),
               STAX_TEST(test_concurrent_callers), STAX_TEST(test_nested_calls_run_inline),
               STAX_TEST(test_single_thread_and_null_pool_inline),
               STAX_TEST(test_create_errors_and_environment), STAX_TEST(test_default_pool))
