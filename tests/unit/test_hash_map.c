/* Tests for the hash map (string and u64 keys, growth, removal, iteration, fault injection)
 * and the hash functions. */
#include "base/hash_map.h"
#include "test_harness.h"

static void test_string_map(void) {
  stax_hash_map_t* map = NULL;
  CHECK_OK(stax_hash_map_create(stax_allocator_system(), STAX_HASH_KEY_STRING, &map));
  CHECK_EQ_INT(stax_hash_map_size(map), 0);
  uintptr_t value = 99;
  CHECK(!stax_hash_map_get_string(map, "missing", &value)); /* empty map, no table yet */
  CHECK_EQ_INT(value, 0);
  char key[16] = "conv1";
  CHECK_OK(stax_hash_map_put_string(map, key, 1));
  key[0] = 'X'; /* the map holds its own copy */
  CHECK_OK(stax_hash_map_put_string(map, "relu", 2));
  CHECK_OK(stax_hash_map_put_string(map, "", 3)); /* empty string is a valid key */
  CHECK_EQ_INT(stax_hash_map_size(map), 3);
  CHECK(stax_hash_map_get_string(map, "conv1", &value));
  CHECK_EQ_INT(value, 1);
  CHECK(!stax_hash_map_get_string(map, "Xonv1", NULL));
  CHECK(stax_hash_map_get_string(map, "", &value));
  CHECK_EQ_INT(value, 3);
  /* Overwrite keeps the size. */
  CHECK_OK(stax_hash_map_put_string(map, "relu", 20));
  CHECK_EQ_INT(stax_hash_map_size(map), 3);
  CHECK(stax_hash_map_get_string(map, "relu", &value));
  CHECK_EQ_INT(value, 20);
  /* Remove. */
  CHECK(stax_hash_map_remove_string(map, "relu"));
  CHECK(!stax_hash_map_remove_string(map, "relu"));
  CHECK(!stax_hash_map_get_string(map, "relu", NULL));
  CHECK_EQ_INT(stax_hash_map_size(map), 2);
  CHECK(stax_hash_map_get_string(map, "conv1", NULL));
  /* Wrong kind and NULL inputs. */
  CHECK_ERROR(stax_hash_map_put_u64(map, 7, 1), STAX_INVALID_ARGUMENT, "integer key 7");
  CHECK_ERROR(stax_hash_map_put_string(map, NULL, 1), STAX_INVALID_ARGUMENT, "NULL key");
  CHECK_ERROR(stax_hash_map_put_string(NULL, "a", 1), STAX_INVALID_ARGUMENT, "NULL map");
  CHECK(!stax_hash_map_get_u64(map, 7, NULL));
  CHECK(!stax_hash_map_get_string(map, NULL, NULL));
  CHECK(!stax_hash_map_remove_u64(map, 7));
  stax_hash_map_destroy(map);
  stax_hash_map_destroy(NULL);
}

static void test_u64_map(void) {
  stax_hash_map_t* map = NULL;
  CHECK_OK(stax_hash_map_create(stax_allocator_system(), STAX_HASH_KEY_U64, &map));
  CHECK_OK(stax_hash_map_put_u64(map, 0, 10));
  CHECK_OK(stax_hash_map_put_u64(map, UINT64_MAX, 11));
  CHECK_OK(stax_hash_map_put_u64(map, 0, 12));
  CHECK_EQ_INT(stax_hash_map_size(map), 2);
  uintptr_t value = 0;
  CHECK(stax_hash_map_get_u64(map, 0, &value));
  CHECK_EQ_INT(value, 12);
  CHECK(stax_hash_map_get_u64(map, UINT64_MAX, &value));
  CHECK_EQ_INT(value, 11);
  CHECK(!stax_hash_map_get_u64(map, 1, NULL));
  CHECK(stax_hash_map_remove_u64(map, 0));
  CHECK_EQ_INT(stax_hash_map_size(map), 1);
  CHECK_ERROR(stax_hash_map_put_string(map, "shape", 1), STAX_INVALID_ARGUMENT,
              "string key 'shape'");
  CHECK(!stax_hash_map_get_string(map, "shape", NULL));
  CHECK(!stax_hash_map_remove_string(map, "shape"));
  CHECK_ERROR(stax_hash_map_put_u64(NULL, 1, 1), STAX_INVALID_ARGUMENT, "NULL map");
  stax_hash_map_destroy(map);
}

static void test_create_errors(void) {
  stax_hash_map_t* map = (stax_hash_map_t*)1;
  CHECK_ERROR(stax_hash_map_create(stax_allocator_system(), (stax_hash_key_kind_t)7, &map),
              STAX_INVALID_ARGUMENT, "key kind 7");
  CHECK(map == NULL);
  stax_failing_allocator_t failing;
  stax_failing_allocator_init(&failing, stax_allocator_system(), 1);
  CHECK_ERROR(stax_hash_map_create(stax_failing_allocator(&failing), STAX_HASH_KEY_U64, &map),
              STAX_OUT_OF_MEMORY, "creating a hash map");
  CHECK(map == NULL);
  CHECK_EQ_INT(failing.live_allocations, 0);
}

/* Growth to 100k entries, removal of every other one (exercising backward shift across long
 * probe runs), then full verification. */
static void test_growth_and_removal(void) {
  enum { COUNT = 100000 };
  stax_hash_map_t* ints = NULL;
  stax_hash_map_t* strings = NULL;
  CHECK_OK(stax_hash_map_create(stax_allocator_system(), STAX_HASH_KEY_U64, &ints));
  CHECK_OK(stax_hash_map_create(stax_allocator_system(), STAX_HASH_KEY_STRING, &strings));
  char key[32];
  for (uint64_t i = 0; i < COUNT; i++) {
    CHECK_OK(stax_hash_map_put_u64(ints, i * 4096, (uintptr_t)i));  /* poorly spread keys */
    snprintf(key, sizeof(key), "node_%llu", (unsigned long long)i);
    CHECK_OK(stax_hash_map_put_string(strings, key, (uintptr_t)i));
  }
  CHECK_EQ_INT(stax_hash_map_size(ints), COUNT);
  CHECK_EQ_INT(stax_hash_map_size(strings), COUNT);
  for (uint64_t i = 0; i < COUNT; i += 2) {
    CHECK(stax_hash_map_remove_u64(ints, i * 4096));
    snprintf(key, sizeof(key), "node_%llu", (unsigned long long)i);
    CHECK(stax_hash_map_remove_string(strings, key));
  }
  CHECK_EQ_INT(stax_hash_map_size(ints), COUNT / 2);
  int wrong = 0;
  for (uint64_t i = 0; i < COUNT; i++) {
    uintptr_t value = 0;
    bool found = stax_hash_map_get_u64(ints, i * 4096, &value);
    if (found != (i % 2 == 1) || (found && value != i)) wrong++;
    snprintf(key, sizeof(key), "node_%llu", (unsigned long long)i);
    found = stax_hash_map_get_string(strings, key, &value);
    if (found != (i % 2 == 1) || (found && value != i)) wrong++;
  }
  CHECK_EQ_INT(wrong, 0);
  stax_hash_map_destroy(ints);
  stax_hash_map_destroy(strings);
}

static void test_iteration(void) {
  enum { COUNT = 1000 };
  stax_hash_map_t* map = NULL;
  CHECK_OK(stax_hash_map_create(stax_allocator_system(), STAX_HASH_KEY_STRING, &map));
  size_t cursor = 0;
  CHECK(!stax_hash_map_next(map, &cursor, NULL, NULL, NULL)); /* empty */
  char key[32];
  for (int i = 0; i < COUNT; i++) {
    snprintf(key, sizeof(key), "k%d", i);
    CHECK_OK(stax_hash_map_put_string(map, key, (uintptr_t)i));
  }
  static int seen[COUNT];
  memset(seen, 0, sizeof(seen));
  cursor = 0;
  const char* key_string = NULL;
  uint64_t key_u64 = 1;
  uintptr_t value = 0;
  int visits = 0, mismatched = 0;
  while (stax_hash_map_next(map, &cursor, &key_string, &key_u64, &value)) {
    visits++;
    if (value >= COUNT || key_u64 != 0) {
      mismatched++;
      continue;
    }
    seen[value]++;
    snprintf(key, sizeof(key), "k%d", (int)value);
    if (strcmp(key, key_string) != 0) mismatched++;
  }
  CHECK(!stax_hash_map_next(map, &cursor, &key_string, NULL, NULL)); /* stays at the end */
  CHECK(key_string == NULL);
  CHECK_EQ_INT(visits, COUNT);
  CHECK_EQ_INT(mismatched, 0);
  int not_once = 0;
  for (int i = 0; i < COUNT; i++) not_once += seen[i] != 1;
  CHECK_EQ_INT(not_once, 0);
  stax_hash_map_destroy(map);

  /* Integer maps report key_string as NULL. */
  CHECK_OK(stax_hash_map_create(stax_allocator_system(), STAX_HASH_KEY_U64, &map));
  CHECK_OK(stax_hash_map_put_u64(map, 42, 7));
  cursor = 0;
  CHECK(stax_hash_map_next(map, &cursor, &key_string, &key_u64, &value));
  CHECK(key_string == NULL);
  CHECK_EQ_INT(key_u64, 42);
  CHECK_EQ_INT(value, 7);
  CHECK(!stax_hash_map_next(map, &cursor, NULL, NULL, NULL));
  stax_hash_map_destroy(map);
}

/* Runs a fixed insert sequence failing allocation N for every N until the sequence succeeds;
 * each failure must come back as a status, the map must stay consistent, and nothing leaks. */
static void test_fault_injection(void) {
  enum { COUNT = 60 };
  bool completed = false;
  for (uint64_t fail_at = 1; !completed && fail_at < 1000; fail_at++) {
    stax_failing_allocator_t failing;
    stax_failing_allocator_init(&failing, stax_allocator_system(), fail_at);
    stax_hash_map_t* map = NULL;
    stax_status_t status =
        stax_hash_map_create(stax_failing_allocator(&failing), STAX_HASH_KEY_STRING, &map);
    int inserted = 0;
    char key[32];
    for (int i = 0; i < COUNT && status == STAX_OK; i++) {
      snprintf(key, sizeof(key), "value_%d", i);
      status = stax_hash_map_put_string(map, key, (uintptr_t)i);
      if (status == STAX_OK) inserted++;
    }
    if (status == STAX_OK) {
      completed = true;
      CHECK_EQ_INT(failing.failed_count, 0);
    } else {
      CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
      CHECK(strstr(stax_status_message(status), "bytes") != NULL);
      CHECK_EQ_INT(failing.failed_count, 1);
    }
    stax_status_free(status);
    /* Whatever was inserted before the failure is still there. */
    CHECK_EQ_INT(stax_hash_map_size(map), inserted);
    for (int i = 0; i < inserted; i++) {
      uintptr_t value = 0;
      snprintf(key, sizeof(key), "value_%d", i);
      if (!stax_hash_map_get_string(map, key, &value) || value != (uintptr_t)i) {
        CHECK(false);
        break;
      }
    }
    stax_hash_map_destroy(map);
    CHECK_EQ_INT(failing.live_allocations, 0);
    CHECK_EQ_INT(failing.live_bytes, 0);
  }
  CHECK(completed);
}

static void test_hash_functions(void) {
  /* Deterministic, seed-sensitive, length-sensitive. */
  CHECK(stax_hash_bytes("abc", 3, 0) == stax_hash_bytes("abc", 3, 0));
  CHECK(stax_hash_bytes("abc", 3, 0) != stax_hash_bytes("abc", 3, 1));
  CHECK(stax_hash_bytes("abc", 3, 0) != stax_hash_bytes("abd", 3, 0));
  CHECK(stax_hash_bytes("", 0, 0) != stax_hash_bytes("\0", 1, 0));
  CHECK(stax_hash_bytes("\0", 1, 0) != stax_hash_bytes("\0\0", 2, 0));
  CHECK(stax_hash_u64(0) != stax_hash_u64(1));
  /* Avalanche: flipping one input bit flips roughly half the output bits, for every length
   * class (tail only, 8-byte block, 16-byte blocks). */
  unsigned char buffer[40];
  for (size_t i = 0; i < sizeof(buffer); i++) buffer[i] = (unsigned char)(i * 37 + 11);
  const size_t lengths[] = {3, 8, 12, 16, 31, 40};
  for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++) {
    size_t length = lengths[l];
    uint64_t base = stax_hash_bytes(buffer, length, 0);
    long total_flips = 0;
    int worst = 64;
    for (size_t bit = 0; bit < length * 8; bit++) {
      buffer[bit / 8] ^= (unsigned char)(1u << (bit % 8));
      uint64_t flipped = stax_hash_bytes(buffer, length, 0);
      buffer[bit / 8] ^= (unsigned char)(1u << (bit % 8));
      int flips = __builtin_popcountll(base ^ flipped);
      total_flips += flips;
      if (flips < worst) worst = flips;
    }
    double average = (double)total_flips / (double)(length * 8);
    CHECK(average > 26.0 && average < 38.0);
    CHECK(worst >= 8);
  }
  long total_flips = 0;
  for (int bit = 0; bit < 64; bit++) {
    total_flips += __builtin_popcountll(stax_hash_u64(12345) ^ stax_hash_u64(12345ull ^ (1ull << bit)));
  }
  CHECK(total_flips / 64 > 26 && total_flips / 64 < 38);
  /* No collisions among 100k small integers or short strings. */
  stax_hash_map_t* seen = NULL;
  CHECK_OK(stax_hash_map_create(stax_allocator_system(), STAX_HASH_KEY_U64, &seen));
  char key[32];
  int collisions = 0;
  for (int i = 0; i < 100000; i++) {
    snprintf(key, sizeof(key), "n%d", i);
    uint64_t h = stax_hash_bytes(key, strlen(key), 0);
    if (stax_hash_map_get_u64(seen, h, NULL)) collisions++;
    CHECK_OK(stax_hash_map_put_u64(seen, h, 1));
  }
  CHECK_EQ_INT(collisions, 0);
  stax_hash_map_destroy(seen);
  /* stax_hash_combine is order-sensitive. */
  CHECK(stax_hash_combine(stax_hash_combine(0, 1), 2) !=
        stax_hash_combine(stax_hash_combine(0, 2), 1));
}

STAX_TEST_MAIN(STAX_TEST(test_string_map), STAX_TEST(test_u64_map),
               STAX_TEST(test_create_errors), STAX_TEST(test_growth_and_removal),
               STAX_TEST(test_iteration), STAX_TEST(test_fault_injection),
               STAX_TEST(test_hash_functions))
