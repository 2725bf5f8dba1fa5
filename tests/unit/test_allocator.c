/* Tests for the system allocator, the status-returning helpers and the failing allocator. */
#include <pthread.h>

#include "test_harness.h"

static void test_system_malloc_free(void) {
  stax_allocator_t system = stax_allocator_system();
  void* ptr = (void*)1;
  CHECK_OK(stax_allocator_malloc(system, 100, &ptr));
  CHECK(ptr != NULL);
  CHECK_EQ_INT((uintptr_t)ptr % 16, 0);
  memset(ptr, 7, 100);
  stax_allocator_free(system, ptr, 100);
  /* Zero size still gives two distinct, freeable pointers. */
  void* a = NULL;
  void* b = NULL;
  CHECK_OK(stax_allocator_malloc(system, 0, &a));
  CHECK_OK(stax_allocator_malloc(system, 0, &b));
  CHECK(a != NULL && b != NULL && a != b);
  stax_allocator_free(system, a, 0);
  stax_allocator_free(system, b, 0);
  stax_allocator_free(system, NULL, 10); /* no-op */
}

static void test_aligned(void) {
  stax_allocator_t system = stax_allocator_system();
  const size_t alignments[] = {1, 16, 32, 64, 4096};
  for (size_t i = 0; i < sizeof(alignments) / sizeof(alignments[0]); i++) {
    void* ptr = NULL;
    CHECK_OK(stax_allocator_malloc_aligned(system, 1000, alignments[i], &ptr));
    CHECK_EQ_INT((uintptr_t)ptr % alignments[i], 0);
    memset(ptr, 1, 1000);
    stax_allocator_free_aligned(system, ptr, 1000, alignments[i]);
  }
  void* ptr = (void*)1;
  CHECK_ERROR(stax_allocator_malloc_aligned(system, 8, 48, &ptr), STAX_INVALID_ARGUMENT,
              "alignment 48");
  CHECK(ptr == NULL);
  stax_allocator_t broken = {NULL, NULL};
  CHECK_ERROR(stax_allocator_malloc(broken, 8, &ptr), STAX_INVALID_ARGUMENT,
              "no allocation function");
  stax_allocator_free(broken, (void*)&ptr, 8); /* ignored rather than crashing */
}

static void test_realloc_keeps_content(void) {
  stax_allocator_t system = stax_allocator_system();
  unsigned char* ptr = NULL;
  void* memory = NULL;
  /* NULL input behaves like malloc. */
  CHECK_OK(stax_allocator_realloc(system, 0, 16, &memory));
  ptr = memory;
  for (int i = 0; i < 16; i++) ptr[i] = (unsigned char)i;
  CHECK_OK(stax_allocator_realloc(system, 16, 100000, &memory));
  ptr = memory;
  int wrong = 0;
  for (int i = 0; i < 16; i++) wrong += ptr[i] != i;
  CHECK_EQ_INT(wrong, 0);
  CHECK_OK(stax_allocator_realloc(system, 100000, 8, &memory)); /* shrink */
  ptr = memory;
  for (int i = 0; i < 8; i++) wrong += ptr[i] != i;
  CHECK_EQ_INT(wrong, 0);
  stax_allocator_free(system, memory, 8);

  /* Resizing over-aligned memory through the raw function keeps alignment and content. */
  void* aligned = NULL;
  CHECK_OK(stax_allocator_malloc_aligned(system, 64, 4096, &aligned));
  memset(aligned, 0x5a, 64);
  void* grown = system.fn(system.self, aligned, 64, 10000, 4096);
  CHECK(grown != NULL);
  CHECK_EQ_INT((uintptr_t)grown % 4096, 0);
  unsigned char* bytes = grown;
  for (int i = 0; i < 64; i++) wrong += bytes[i] != 0x5a;
  CHECK_EQ_INT(wrong, 0);
  void* shrunk = system.fn(system.self, grown, 10000, 32, 64);
  CHECK(shrunk != NULL);
  CHECK_EQ_INT((uintptr_t)shrunk % 64, 0);
  bytes = shrunk;
  for (int i = 0; i < 32; i++) wrong += bytes[i] != 0x5a;
  CHECK_EQ_INT(wrong, 0);
  stax_allocator_free_aligned(system, shrunk, 32, 64);
}

static void test_calloc(void) {
  stax_allocator_t system = stax_allocator_system();
  void* memory = NULL;
  CHECK_OK(stax_allocator_calloc(system, 100, sizeof(int64_t), &memory));
  int64_t* values = memory;
  int nonzero = 0;
  for (int i = 0; i < 100; i++) nonzero += values[i] != 0;
  CHECK_EQ_INT(nonzero, 0);
  stax_allocator_free(system, memory, 100 * sizeof(int64_t));
  memory = (void*)1;
  CHECK_ERROR(stax_allocator_calloc(system, SIZE_MAX / 2, 3, &memory), STAX_OUT_OF_MEMORY,
              "elements of 3 bytes overflows");
  CHECK(memory == NULL);
  CHECK_OK(stax_allocator_calloc(system, 0, 8, &memory));
  CHECK(memory != NULL);
  stax_allocator_free(system, memory, 0);
}

static void test_failing_allocator_fails_nth(void) {
  for (uint64_t fail_at = 1; fail_at <= 5; fail_at++) {
    stax_failing_allocator_t failing;
    stax_failing_allocator_init(&failing, stax_allocator_system(), fail_at);
    stax_allocator_t allocator = stax_failing_allocator(&failing);
    void* pointers[5] = {0};
    for (uint64_t i = 1; i <= 5; i++) {
      stax_status_t s = stax_allocator_malloc(allocator, 10 * i, &pointers[i - 1]);
      if (i == fail_at) {
        CHECK_EQ_INT(stax_status_code(s), STAX_OUT_OF_MEMORY);
        char expected[64];
        snprintf(expected, sizeof(expected), "%llu bytes", (unsigned long long)(10 * i));
        CHECK(strstr(stax_status_message(s), expected) != NULL);
        CHECK(pointers[i - 1] == NULL);
        stax_status_free(s);
      } else {
        CHECK(s == STAX_OK);
        CHECK(pointers[i - 1] != NULL);
      }
    }
    CHECK_EQ_INT(failing.allocation_count, 5);
    CHECK_EQ_INT(failing.failed_count, 1);
    CHECK_EQ_INT(failing.live_allocations, 4);
    CHECK_EQ_INT(failing.live_bytes, 150 - 10 * (int64_t)fail_at);
    for (int i = 0; i < 5; i++) stax_allocator_free(allocator, pointers[i], 10 * (size_t)(i + 1));
    CHECK_EQ_INT(failing.live_allocations, 0);
    CHECK_EQ_INT(failing.live_bytes, 0);
    CHECK_EQ_INT(failing.allocation_count, 5); /* frees are not allocations */
  }
}

static void test_failing_allocator_all_after(void) {
  stax_failing_allocator_t failing;
  stax_failing_allocator_init(&failing, stax_allocator_system(), 2);
  failing.fail_all_after = true;
  stax_allocator_t allocator = stax_failing_allocator(&failing);
  void* first = NULL;
  void* other = NULL;
  CHECK_OK(stax_allocator_malloc(allocator, 8, &first));
  for (int i = 0; i < 4; i++) {
    CHECK_ERROR(stax_allocator_malloc(allocator, 8, &other), STAX_OUT_OF_MEMORY, "8 bytes");
  }
  CHECK_EQ_INT(failing.allocation_count, 5);
  CHECK_EQ_INT(failing.failed_count, 4);
  stax_allocator_free(allocator, first, 8);
  CHECK_EQ_INT(failing.live_allocations, 0);
}

static void test_failing_allocator_never(void) {
  stax_failing_allocator_t failing;
  stax_failing_allocator_init(&failing, stax_allocator_system(), 0);
  stax_allocator_t allocator = stax_failing_allocator(&failing);
  void* ptrs[50];
  for (int i = 0; i < 50; i++) CHECK_OK(stax_allocator_malloc(allocator, 3, &ptrs[i]));
  CHECK_EQ_INT(failing.failed_count, 0);
  CHECK_EQ_INT(failing.live_allocations, 50);
  CHECK_EQ_INT(failing.live_bytes, 150);
  for (int i = 0; i < 50; i++) stax_allocator_free(allocator, ptrs[i], 3);
  CHECK_EQ_INT(failing.live_bytes, 0);
}

static void test_failing_allocator_resize(void) {
  stax_failing_allocator_t failing;
  stax_failing_allocator_init(&failing, stax_allocator_system(), 2);
  stax_allocator_t allocator = stax_failing_allocator(&failing);
  void* memory = NULL;
  CHECK_OK(stax_allocator_malloc(allocator, 10, &memory));
  memcpy(memory, "123456789", 10);
  void* before = memory;
  /* The resize is allocation 2 and fails: the old block stays owned and intact. */
  CHECK_ERROR(stax_allocator_realloc(allocator, 10, 1000, &memory), STAX_OUT_OF_MEMORY,
              "from 10 to 1000 bytes");
  CHECK(memory == before);
  CHECK_EQ_STR((const char*)memory, "123456789");
  CHECK_EQ_INT(failing.live_bytes, 10);
  CHECK_OK(stax_allocator_realloc(allocator, 10, 1000, &memory));
  CHECK_EQ_STR((const char*)memory, "123456789");
  CHECK_EQ_INT(failing.allocation_count, 3);
  CHECK_EQ_INT(failing.live_allocations, 1);
  CHECK_EQ_INT(failing.live_bytes, 1000);
  stax_allocator_free(allocator, memory, 1000);
  CHECK_EQ_INT(failing.live_allocations, 0);
  CHECK_EQ_INT(failing.live_bytes, 0);
}

static void test_failing_allocator_aligned(void) {
  stax_failing_allocator_t failing;
  stax_failing_allocator_init(&failing, stax_allocator_system(), 0);
  stax_allocator_t allocator = stax_failing_allocator(&failing);
  void* memory = NULL;
  CHECK_OK(stax_allocator_malloc_aligned(allocator, 200, 64, &memory));
  CHECK_EQ_INT((uintptr_t)memory % 64, 0);
  CHECK_EQ_INT(failing.live_bytes, 200);
  stax_allocator_free_aligned(allocator, memory, 200, 64);
  CHECK_EQ_INT(failing.live_bytes, 0);
}

/* Several threads share one failing allocator: counts must add up exactly. */
enum { THREADS = 4, PER_THREAD = 2000 };

static void* hammer(void* arg) {
  stax_allocator_t allocator = stax_failing_allocator((stax_failing_allocator_t*)arg);
  for (int i = 0; i < PER_THREAD; i++) {
    void* memory = NULL;
    stax_status_t s = stax_allocator_malloc(allocator, 16, &memory);
    if (s == STAX_OK) {
      stax_allocator_free(allocator, memory, 16);
    } else {
      stax_status_free(s);
    }
  }
  return NULL;
}

static void test_failing_allocator_threads(void) {
  stax_failing_allocator_t failing;
  stax_failing_allocator_init(&failing, stax_allocator_system(), 1000);
  failing.fail_all_after = true;
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, hammer, &failing);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  CHECK_EQ_INT(failing.allocation_count, THREADS * PER_THREAD);
  CHECK_EQ_INT(failing.failed_count, THREADS * PER_THREAD - 999);
  CHECK_EQ_INT(failing.live_allocations, 0);
  CHECK_EQ_INT(failing.live_bytes, 0);
}

STAX_TEST_MAIN(STAX_TEST(test_system_malloc_free), STAX_TEST(test_aligned),
               STAX_TEST(test_realloc_keeps_content), STAX_TEST(test_calloc),
               STAX_TEST(test_failing_allocator_fails_nth),
               STAX_TEST(test_failing_allocator_all_after),
               STAX_TEST(test_failing_allocator_never), STAX_TEST(test_failing_allocator_resize),
               STAX_TEST(test_failing_allocator_aligned),
               STAX_TEST(test_failing_allocator_threads))
