/* Tests for the arena: alignment, chunking, large requests, copies and fault injection. */
#include "base/arena.h"
#include "test_harness.h"

static void test_alignment(void) {
  stax_arena_t arena;
  stax_arena_init(&arena, stax_allocator_system(), 256);
  const size_t alignments[] = {0, 1, 2, 8, 16, 32, 64, 128, 4096};
  for (int round = 0; round < 20; round++) {
    for (size_t i = 0; i < sizeof(alignments) / sizeof(alignments[0]); i++) {
      void* ptr = NULL;
      size_t size = (size_t)round * 3 + 1;
      CHECK_OK(stax_arena_alloc(&arena, size, alignments[i], &ptr));
      CHECK(ptr != NULL);
      size_t wanted = alignments[i] ? alignments[i] : 16;
      CHECK_EQ_INT((uintptr_t)ptr % wanted, 0);
      memset(ptr, 0xab, size); /* ASan flags any overrun of the chunk */
    }
  }
  stax_arena_deinit(&arena);
}

static void test_default_chunk_and_reuse(void) {
  stax_arena_t arena;
  stax_arena_init(&arena, stax_allocator_system(), 0);
  CHECK_EQ_INT(arena.chunk_size, 16 * 1024);
  CHECK(arena.head == NULL); /* lazy: nothing taken yet */
  void* a = NULL;
  void* b = NULL;
  CHECK_OK(stax_arena_alloc(&arena, 10, 0, &a));
  CHECK_OK(stax_arena_alloc(&arena, 10, 0, &b));
  CHECK(a != b);
  CHECK_EQ_INT((char*)b - (char*)a, 16); /* bumped within one chunk */
  CHECK_EQ_INT(arena.bytes_allocated, 20);
  stax_arena_deinit(&arena);
  CHECK(arena.head == NULL);
  CHECK_EQ_INT(arena.bytes_allocated, 0);
  /* Reusable after deinit. */
  CHECK_OK(stax_arena_alloc(&arena, 0, 0, &a)); /* zero size still gives a pointer */
  CHECK(a != NULL);
  stax_arena_deinit(&arena);
}

static void test_big_allocations(void) {
  stax_failing_allocator_t failing;
  stax_failing_allocator_init(&failing, stax_allocator_system(), 0);
  stax_arena_t arena;
  stax_arena_init(&arena, stax_failing_allocator(&failing), 1024);
  void* small = NULL;
  CHECK_OK(stax_arena_alloc(&arena, 8, 0, &small));
  CHECK_EQ_INT(failing.allocation_count, 1);
  void* big = NULL;
  CHECK_OK(stax_arena_alloc(&arena, 1 << 20, 4096, &big));
  CHECK_EQ_INT((uintptr_t)big % 4096, 0);
  memset(big, 1, 1 << 20);
  CHECK_EQ_INT(failing.allocation_count, 2);
  /* The big chunk went behind the head: the next small request still fits the first chunk. */
  void* small2 = NULL;
  CHECK_OK(stax_arena_alloc(&arena, 8, 0, &small2));
  CHECK_EQ_INT(failing.allocation_count, 2);
  CHECK_EQ_INT((char*)small2 - (char*)small, 16);
  /* Filling the chunk moves to a fresh one. */
  for (int i = 0; i < 200; i++) {
    void* p = NULL;
    CHECK_OK(stax_arena_alloc(&arena, 64, 0, &p));
  }
  CHECK(failing.allocation_count > 2);
  CHECK_EQ_INT(arena.bytes_allocated, 8 + (1 << 20) + 8 + 200 * 64);
  stax_arena_deinit(&arena);
  CHECK_EQ_INT(failing.live_allocations, 0);
  CHECK_EQ_INT(failing.live_bytes, 0);
}

static void test_bad_arguments(void) {
  stax_arena_t arena;
  stax_arena_init(&arena, stax_allocator_system(), 0);
  void* ptr = (void*)1;
  CHECK_ERROR(stax_arena_alloc(&arena, 8, 24, &ptr), STAX_INVALID_ARGUMENT, "alignment 24");
  CHECK(ptr == NULL);
  CHECK_ERROR(stax_arena_alloc(&arena, SIZE_MAX - 8, 64, &ptr), STAX_OUT_OF_MEMORY,
              "too large");
  CHECK(ptr == NULL);
  stax_arena_deinit(&arena);
}

static void test_strdup_memdup(void) {
  stax_arena_t arena;
  stax_arena_init(&arena, stax_allocator_system(), 64);
  const char* copy = NULL;
  char source[] = "a tensor name";
  CHECK_OK(stax_arena_strdup(&arena, source, &copy));
  CHECK(copy != source);
  source[0] = 'X';
  CHECK_EQ_STR(copy, "a tensor name");
  const char* null_copy = (const char*)1;
  CHECK_OK(stax_arena_strdup(&arena, NULL, &null_copy));
  CHECK(null_copy == NULL);
  int64_t dims[4] = {1, -2, 3, 1LL << 40};
  void* dims_copy = NULL;
  CHECK_OK(stax_arena_memdup(&arena, dims, sizeof(dims), &dims_copy));
  CHECK(memcmp(dims_copy, dims, sizeof(dims)) == 0);
  void* null_dup = (void*)1;
  CHECK_OK(stax_arena_memdup(&arena, NULL, 10, &null_dup));
  CHECK(null_dup == NULL);
  /* A string longer than the chunk size still copies whole. */
  char long_text[300];
  memset(long_text, 'q', sizeof(long_text) - 1);
  long_text[sizeof(long_text) - 1] = '\0';
  CHECK_OK(stax_arena_strdup(&arena, long_text, &copy));
  CHECK_EQ_STR(copy, long_text);
  stax_arena_deinit(&arena);
}

/* Fails each chunk allocation in turn; every failure must surface as OUT_OF_MEMORY and deinit
 * must return every byte. */
static void test_fault_injection(void) {
  for (uint64_t fail_at = 1; fail_at <= 6; fail_at++) {
    stax_failing_allocator_t failing;
    stax_failing_allocator_init(&failing, stax_allocator_system(), fail_at);
    stax_arena_t arena;
    stax_arena_init(&arena, stax_failing_allocator(&failing), 128);
    stax_status_t status = STAX_OK;
    int succeeded = 0;
    for (int i = 0; i < 40 && status == STAX_OK; i++) {
      const char* copy = NULL;
      status = stax_arena_strdup(&arena, "some node name that takes space", &copy);
      if (status == STAX_OK) succeeded++;
    }
    CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
    CHECK(strstr(stax_status_message(status), "bytes") != NULL);
    stax_status_free(status);
    CHECK_EQ_INT(failing.failed_count, 1);
    CHECK(succeeded < 40);
    stax_arena_deinit(&arena);
    CHECK_EQ_INT(failing.live_allocations, 0);
    CHECK_EQ_INT(failing.live_bytes, 0);
  }
}

STAX_TEST_MAIN(STAX_TEST(test_alignment), STAX_TEST(test_default_chunk_and_reuse),
               STAX_TEST(test_big_allocations), STAX_TEST(test_bad_arguments),
               STAX_TEST(test_strdup_memdup), STAX_TEST(test_fault_injection))
