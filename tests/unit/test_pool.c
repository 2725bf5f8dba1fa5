/* Tests for the thread-local buffer pool: hit/miss/return statistics, size classes, the byte
 * limit and its eviction order, the automatic limit and next-class hits, trimming, cross-thread returns, and clean thread exit (the
 * leak checker fails this executable if cached blocks outlive their thread or the process). */
#include <pthread.h>

#include "runtime/tensor_internal.h"
#include "test_harness.h"

static stax_buffer_t* pooled(size_t size) {
  stax_buffer_t* buffer = NULL;
  CHECK_OK(stax_buffer_allocate_pooled(size, &buffer));
  return buffer;
}

static void test_hits_misses_returns(void) {
  stax_pool_set_limit(UINT64_C(1) << 20);
  stax_pool_trim();
  stax_pool_stats_t before = stax_pool_stats();
  CHECK_EQ_INT(before.bytes_cached, 0);

  stax_buffer_t* a = pooled(100);
  CHECK_EQ_INT(stax_buffer_size(a), 100);
  CHECK_EQ_INT(a->capacity, 128);
  CHECK_EQ_INT((uintptr_t)stax_buffer_data(a) % STAX_BUFFER_ALIGNMENT, 0);
  memset(stax_buffer_data(a), 0xab, 100);
  void* first_data = stax_buffer_data(a);
  stax_pool_stats_t s = stax_pool_stats();
  CHECK_EQ_INT(s.misses - before.misses, 1);
  CHECK_EQ_INT(s.hits - before.hits, 0);

  stax_buffer_retain(a);
  stax_buffer_release(a);
  CHECK_EQ_INT(stax_pool_stats().returns - before.returns, 0); /* still referenced */
  stax_buffer_release(a);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.returns - before.returns, 1);
  CHECK_EQ_INT(s.bytes_cached, 128);

  stax_buffer_t* b = pooled(120); /* same 128-byte class: reuses the block */
  s = stax_pool_stats();
  CHECK_EQ_INT(s.hits - before.hits, 1);
  CHECK_EQ_INT(s.bytes_cached, 0);
  CHECK(stax_buffer_data(b) == first_data);
  CHECK_EQ_INT(stax_buffer_size(b), 120);
  stax_buffer_t* c = pooled(129); /* next class up */
  CHECK_EQ_INT(c->capacity, 256);
  stax_buffer_t* zero = pooled(0);
  CHECK_EQ_INT(zero->capacity, 64);
  CHECK(stax_buffer_data(zero) != NULL);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.misses - before.misses, 3);
  stax_buffer_release(b);
  stax_buffer_release(c);
  stax_buffer_release(zero);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.returns - before.returns, 4);
  CHECK_EQ_INT(s.bytes_cached, 128 + 256 + 64);
  stax_pool_trim();
  CHECK_EQ_INT(stax_pool_stats().bytes_cached, 0);
  stax_buffer_t* after_trim = pooled(100);
  CHECK_EQ_INT(stax_pool_stats().misses - before.misses, 4);
  stax_buffer_release(after_trim);
  stax_pool_trim();
}

static void test_limit_eviction(void) {
  stax_pool_trim();
  stax_pool_set_limit(1024);
  stax_pool_stats_t before = stax_pool_stats();
  stax_buffer_t* quarter[4];
  for (int i = 0; i < 4; i++) quarter[i] = pooled(256);
  void* oldest_data = stax_buffer_data(quarter[0]);
  void* newest_data = stax_buffer_data(quarter[3]);
  for (int i = 0; i < 4; i++) stax_buffer_release(quarter[i]);
  stax_pool_stats_t s = stax_pool_stats();
  CHECK_EQ_INT(s.bytes_cached, 1024);
  CHECK_EQ_INT(s.evictions - before.evictions, 0);

  /* A 512-byte block needs room: the two least recently returned 256s go. */
  stax_buffer_t* half = pooled(512);
  stax_buffer_release(half);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.evictions - before.evictions, 2);
  CHECK_EQ_INT(s.bytes_cached, 1024);
  /* The survivors are the most recent ones; the newest comes back first. */
  stax_buffer_t* again = pooled(200);
  CHECK(stax_buffer_data(again) == newest_data);
  CHECK(stax_buffer_data(again) != oldest_data);
  stax_buffer_release(again);

  /* A block larger than the whole limit is freed at once. */
  stax_buffer_t* big = pooled(2000);
  stax_buffer_release(big);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.evictions - before.evictions, 3);
  CHECK_EQ_INT(s.bytes_cached, 1024);

  /* Lowering the limit shrinks the caller's pool immediately. */
  stax_pool_set_limit(256);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.bytes_cached, 256);
  /* Oldest first: the 256 returned before the 512, then the 512; the reused 256 stays. */
  CHECK_EQ_INT(s.evictions - before.evictions, 5);
  stax_pool_set_limit(0);
  CHECK_EQ_INT(stax_pool_stats().bytes_cached, 0);
  stax_buffer_t* uncached = pooled(64);
  stax_buffer_release(uncached);
  CHECK_EQ_INT(stax_pool_stats().bytes_cached, 0);
  stax_pool_set_limit(STAX_POOL_LIMIT_AUTO);
}

static void test_too_large(void) {
  stax_buffer_t* buffer = (stax_buffer_t*)1;
  CHECK_ERROR(stax_buffer_allocate_pooled(SIZE_MAX, &buffer), STAX_OUT_OF_MEMORY,
              "larger than the largest size class");
  CHECK(buffer == NULL);
  CHECK_ERROR(stax_buffer_allocate(stax_allocator_system(), SIZE_MAX - 8, &buffer),
              STAX_OUT_OF_MEMORY, NULL);
}

typedef struct thread_result_t {
  stax_buffer_t* to_release;
  stax_pool_stats_t stats;
} thread_result_t;

/* Releases a buffer another thread allocated, then caches a block of its own and exits with
 * it still cached: the thread's key destructor must free both. */
static void* release_on_other_thread(void* arg) {
  thread_result_t* result = (thread_result_t*)arg;
  stax_buffer_release(result->to_release);
  stax_buffer_t* own = NULL;
  stax_status_t status = stax_buffer_allocate_pooled(4096, &own);
  if (status == STAX_OK) stax_buffer_release(own);
  stax_status_free(status);
  result->stats = stax_pool_stats();
  return NULL;
}

static void test_cross_thread_return(void) {
  stax_pool_trim();
  stax_pool_stats_t before = stax_pool_stats();
  thread_result_t result;
  memset(&result, 0, sizeof(result));
  result.to_release = pooled(1000);
  pthread_t thread;
  CHECK_EQ_INT(pthread_create(&thread, NULL, release_on_other_thread, &result), 0);
  pthread_join(thread, NULL);
  /* The block went to the releasing thread's pool, not ours. */
  CHECK_EQ_INT(result.stats.returns, 2);
  CHECK_EQ_INT(result.stats.misses, 1);
  CHECK_EQ_INT(result.stats.bytes_cached, 1024 + 4096);
  stax_pool_stats_t after = stax_pool_stats();
  CHECK_EQ_INT(after.returns - before.returns, 0);
  CHECK_EQ_INT(after.bytes_cached, 0);
}

/* The automatic limit is the larger of 256 MiB and twice the most bytes ever live at once;
 * blocks are only reserved address space until written, so these large ones cost nothing. */
static void test_auto_limit_follows_peak(void) {
  stax_pool_set_limit(STAX_POOL_LIMIT_AUTO);
  stax_pool_trim();
  const uint64_t mib = UINT64_C(1) << 20;
  stax_pool_stats_t s = stax_pool_stats();
  CHECK_EQ_INT(s.live_bytes, 0);
  uint64_t expected = 2 * s.peak_live_bytes > 256 * mib ? 2 * s.peak_live_bytes : 256 * mib;
  CHECK_EQ_INT(s.limit, expected);

  /* A call holding 384 MiB at once: above the 256 MiB floor. */
  stax_buffer_t* big[3];
  for (int i = 0; i < 3; i++) big[i] = pooled(128 * mib);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.live_bytes, 384 * mib);
  CHECK(s.peak_live_bytes >= 384 * mib);
  CHECK_EQ_INT(s.limit, 2 * s.peak_live_bytes);
  stax_pool_stats_t before = s;
  for (int i = 0; i < 3; i++) stax_buffer_release(big[i]);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.live_bytes, 0);
  /* All three stay cached (a fixed 256 MiB cap would have freed them), so the next call of
   * that size maps nothing. */
  CHECK_EQ_INT(s.evictions - before.evictions, 0);
  CHECK_EQ_INT(s.bytes_cached, 384 * mib);
  for (int i = 0; i < 3; i++) big[i] = pooled(128 * mib - 100);
  CHECK_EQ_INT(stax_pool_stats().hits - s.hits, 3);
  CHECK_EQ_INT(stax_pool_stats().misses - s.misses, 0);
  for (int i = 0; i < 3; i++) stax_buffer_release(big[i]);

  /* An explicit limit is a hard cap again, whatever the peak. */
  stax_pool_set_limit(64 * mib);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.limit, 64 * mib);
  CHECK(s.bytes_cached <= 64 * mib);
  stax_pool_set_limit(STAX_POOL_LIMIT_AUTO);
  stax_pool_trim();
}

/* From 1 MiB up a request may take a cached block of the next class; smaller ones never. */
static void test_next_class_up(void) {
  stax_pool_set_limit(STAX_POOL_LIMIT_AUTO);
  stax_pool_trim();
  const size_t mib = (size_t)1 << 20;
  stax_buffer_t* four = pooled(3 * mib); /* the 4 MiB class */
  void* data = stax_buffer_data(four);
  stax_buffer_release(four);
  stax_pool_stats_t before = stax_pool_stats();
  stax_buffer_t* two = pooled(2 * mib - 5); /* the 2 MiB class, empty: takes the 4 MiB block */
  stax_pool_stats_t s = stax_pool_stats();
  CHECK_EQ_INT(s.hits - before.hits, 1);
  CHECK_EQ_INT(s.misses - before.misses, 0);
  CHECK(stax_buffer_data(two) == data);
  CHECK_EQ_INT(two->capacity, 4 * mib);
  CHECK_EQ_INT(stax_buffer_size(two), 2 * mib - 5);
  stax_buffer_release(two);
  s = stax_pool_stats();
  CHECK_EQ_INT(s.bytes_cached, 4 * mib); /* back in its own (4 MiB) class */
  /* Two classes up is too wasteful: a 1 MiB request misses. */
  stax_buffer_t* one = pooled(mib);
  CHECK_EQ_INT(stax_pool_stats().misses - s.misses, 1);
  CHECK_EQ_INT(one->capacity, mib);
  stax_buffer_release(one);
  /* Small requests keep their class: a cached 256-byte block does not serve 100 bytes. */
  stax_pool_trim();
  stax_buffer_release(pooled(200));
  s = stax_pool_stats();
  stax_buffer_t* small = pooled(100);
  CHECK_EQ_INT(stax_pool_stats().misses - s.misses, 1);
  CHECK_EQ_INT(small->capacity, 128);
  stax_buffer_release(small);
  stax_pool_trim();
}

/* Pooled buffers back tensors like any other. */
static void test_pooled_tensor(void) {
  stax_buffer_t* buffer = pooled(6 * sizeof(float));
  int64_t dims[2] = {2, 3};
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create_view(stax_allocator_system(), buffer, STAX_DTYPE_FLOAT32, 2, dims,
                                   NULL, 0, &t));
  stax_buffer_release(buffer);
  ((float*)stax_tensor_data(t))[5] = 3.0f;
  uint64_t returns = stax_pool_stats().returns;
  stax_tensor_release(t);
  CHECK_EQ_INT(stax_pool_stats().returns, returns + 1);
  /* Left cached on purpose: the atexit handler must free the main thread's pool. */
}

STAX_TEST_MAIN(STAX_TEST(test_hits_misses_returns), STAX_TEST(test_limit_eviction),
               STAX_TEST(test_too_large), STAX_TEST(test_cross_thread_return),
               STAX_TEST(test_auto_limit_follows_peak), STAX_TEST(test_next_class_up),
               STAX_TEST(test_pooled_tensor))
