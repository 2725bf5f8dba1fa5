/* The JIT's on-disk object cache (src/jit/object_cache.c and its use in llvm_jit.c): a kernel
 * compiled once is loaded, not compiled, the next time, with the same results; a damaged
 * file, another key or a second live copy of a kernel fall back to compiling; the cache can
 * be turned off. Runs in a private folder (STAX_JIT_CACHE_DIR) made for the test. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "jit/object_cache.h"
#include "test_harness.h"
#include "test_jit_util.h"

static char cache_dir[256];
static void ensure_setup(void);

static int count_files(void) {
  DIR* dir = opendir(cache_dir);
  if (!dir) return 0;
  int n = 0;
  for (struct dirent* e; (e = readdir(dir)) != NULL;)
    if (strstr(e->d_name, ".o") && !strstr(e->d_name, ".tmp")) n++;
  closedir(dir);
  return n;
}

/* The single cache file's path (the test keeps one kernel in the folder). */
static bool only_file(char* out, size_t size) {
  DIR* dir = opendir(cache_dir);
  if (!dir) return false;
  bool found = false;
  for (struct dirent* e; (e = readdir(dir)) != NULL;)
    if (strstr(e->d_name, ".o")) {
      snprintf(out, size, "%s/%s", cache_dir, e->d_name);
      found = true;
    }
  closedir(dir);
  return found;
}

static void clear_dir(void) {
  DIR* dir = opendir(cache_dir);
  if (!dir) return;
  char path[512];
  for (struct dirent* e; (e = readdir(dir)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "%s/%s", cache_dir, e->d_name);
    remove(path);
  }
  closedir(dir);
}

/* x * y + tanh(x) over [37, 53]: one elementwise kernel. */
static void build(test_group_t* tg) {
  tg_init(tg);
  int64_t dims[2] = {37, 53};
  int32_t x = tg_input(tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t y = tg_input(tg, "y", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t m = tg_node(tg, STAX_OP_Mul, 2, (int32_t[]){x, y}, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t t = tg_node(tg, STAX_OP_Tanh, 1, (int32_t[]){x}, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t s = tg_node(tg, STAX_OP_Add, 2, (int32_t[]){m, t}, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(tg, s);
}

/* Compiles the group (kept alive in *out_kernel when asked), checks its results, and returns
 * how many cache loads the compile made (0 or 1). */
static int compile_and_check(test_group_t* tg, stax_jit_kernel_t** out_kernel) {
  stax_jit_backend_t* backend = tg_backend();
  uint64_t loads = stax_jit_stats().cache_loads;
  stax_jit_kernel_t* kernel = NULL;
  stax_jit_compile_options_t options = {0};
  CHECK_OK(stax_jit_compile_group(backend, tg_group(tg, "cached"), &options, &kernel));
  if (!kernel) return -1;
  stax_tensor_t* expected[TG_MAX_VALUES] = {NULL};
  stax_tensor_t* actual[TG_MAX_VALUES] = {NULL};
  CHECK_OK(tg_reference(tg, expected));
  CHECK_OK(tg_run(tg, kernel, NULL, actual));
  CHECK_EQ_INT(tg_compare("cached", actual[0], expected[0], 1e-6, 1e-5), 0);
  stax_tensor_release(actual[0]);
  stax_tensor_release(expected[0]);
  if (out_kernel) *out_kernel = kernel;
  else stax_jit_kernel_release(kernel);
  return (int)(stax_jit_stats().cache_loads - loads);
}

static void test_store_then_load(void) {
  ensure_setup();
  if (!tg_backend()) return;
  if (stax_jit_build_identity() == 0) {
    printf("  (the build's file cannot be read: the cache is off)\n");
    return;
  }
  clear_dir();
  test_group_t tg;
  build(&tg);
  CHECK_EQ_INT(compile_and_check(&tg, NULL), 0); /* compiled and stored */
  CHECK_EQ_INT(count_files(), 1);
  CHECK_EQ_INT(compile_and_check(&tg, NULL), 1); /* loaded */
  CHECK_EQ_INT(compile_and_check(&tg, NULL), 1);
  CHECK_EQ_INT(count_files(), 1);

  /* Two live copies: the second cannot define the same symbols, so it is compiled under its
   * own name and leaves the cache alone; both run. */
  stax_jit_kernel_t* first = NULL;
  stax_jit_kernel_t* second = NULL;
  CHECK_EQ_INT(compile_and_check(&tg, &first), 1);
  CHECK_EQ_INT(compile_and_check(&tg, &second), 0);
  if (first) stax_jit_kernel_release(first);
  if (second) stax_jit_kernel_release(second);
  CHECK_EQ_INT(compile_and_check(&tg, NULL), 1);
  tg_free(&tg);
}

/* Damage every region of the file in turn (header, key, object, truncation): each is a
 * miss, the kernel is compiled again with right results, and the file is rewritten. */
static void test_damaged_files(void) {
  ensure_setup();
  if (!tg_backend() || stax_jit_build_identity() == 0) return;
  clear_dir();
  test_group_t tg;
  build(&tg);
  CHECK_EQ_INT(compile_and_check(&tg, NULL), 0);
  char path[512];
  CHECK(only_file(path, sizeof(path)));
  FILE* f = fopen(path, "rb");
  CHECK(f != NULL);
  if (!f) return;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  CHECK(size > 200);
  long offsets[5] = {3, 20, 40, size / 2, size - 5};
  for (int k = 0; k < 6; k++) {
    f = fopen(path, "r+b");
    if (!f) break;
    if (k < 5) {
      fseek(f, offsets[k], SEEK_SET);
      int c = fgetc(f);
      fseek(f, offsets[k], SEEK_SET);
      fputc(c ^ 0x5a, f);
      fclose(f);
    } else {
      fclose(f);
      CHECK(truncate(path, size - 100) == 0);
    }
    CHECK_EQ_INT(compile_and_check(&tg, NULL), 0); /* damaged: compiled again, rewritten */
    CHECK_EQ_INT(compile_and_check(&tg, NULL), 1); /* and the new file loads */
  }
  tg_free(&tg);
}

/* The file functions alone: round trip, another key of the same size, a missing folder is
 * created, a folder that cannot be made is a quiet failure. */
static void test_file_functions(void) {
  ensure_setup();
  char dir[320];
  snprintf(dir, sizeof(dir), "%s/sub/folder", cache_dir);
  const char key[] = "key one", other[] = "key two";
  const unsigned char object[5] = {1, 2, 3, 4, 5};
  CHECK(stax_jit_cache_store(dir, key, sizeof(key), object, sizeof(object)));
  void* loaded = NULL;
  size_t size = 0;
  CHECK(stax_jit_cache_load(dir, key, sizeof(key), &loaded, &size));
  CHECK_EQ_INT((int)size, 5);
  CHECK(loaded && memcmp(loaded, object, 5) == 0);
  free(loaded);
  CHECK(!stax_jit_cache_load(dir, other, sizeof(other), &loaded, &size));
  CHECK(loaded == NULL);
  CHECK(!stax_jit_cache_store("/proc/stax-cannot-be-here", key, sizeof(key), object, 5));
  CHECK(stax_jit_cache_key_hash(key, sizeof(key)) != stax_jit_cache_key_hash(other, sizeof(other)));
  /* The folder comes from the environment; STAX_JIT_CACHE=0 turns the cache off. */
  char got[512];
  CHECK(stax_jit_cache_dir(got, sizeof(got)) && strcmp(got, cache_dir) == 0);
  setenv("STAX_JIT_CACHE", "0", 1);
  CHECK(!stax_jit_cache_dir(got, sizeof(got)));
  unsetenv("STAX_JIT_CACHE");
}

/* The size bound: ten 1000-byte objects with increasing use times and a limit of 6000 bytes
 * leave the newest four (down to three quarters of the limit); a file that is not ours stays;
 * a load refreshes a file's use time. STAX_JIT_CACHE_MAX_MB sets the limit. */
static void test_trim(void) {
  ensure_setup();
  char dir[320];
  snprintf(dir, sizeof(dir), "%s/trim", cache_dir);
  static unsigned char object[1000];
  char keys[10][16], path[512];
  int64_t now = (int64_t)time(NULL);
  for (int i = 0; i < 10; i++) {
    snprintf(keys[i], sizeof(keys[i]), "trim key %d", i);
    CHECK(stax_jit_cache_store(dir, keys[i], strlen(keys[i]), object, sizeof(object)));
  }
  /* Use times: key i used at now - 100 + i; then key 0 is loaded (becomes the newest). */
  for (int i = 0; i < 10; i++) {
    snprintf(path, sizeof(path), "%s/%016llx.o", dir,
             (unsigned long long)stax_jit_cache_key_hash(keys[i], strlen(keys[i])));
    struct timeval times[2] = {{(time_t)(now - 100 + i), 0}, {(time_t)(now - 100 + i), 0}};
    CHECK(utimes(path, times) == 0);
  }
  void* loaded = NULL;
  size_t size = 0;
  CHECK(stax_jit_cache_load(dir, keys[0], strlen(keys[0]), &loaded, &size));
  free(loaded);
  snprintf(path, sizeof(path), "%s/not-ours.txt", dir);
  FILE* f = fopen(path, "w");
  if (f) {
    fputs("keep me", f);
    fclose(f);
  }
  stax_jit_cache_trim(dir, 6400); /* files of ~1042 bytes (header, key, object): keeps 4 */
  bool present[10];
  int kept = 0;
  for (int i = 0; i < 10; i++) {
    present[i] = stax_jit_cache_load(dir, keys[i], strlen(keys[i]), &loaded, &size);
    if (present[i]) free(loaded);
    kept += present[i];
  }
  CHECK_EQ_INT(kept, 4);
  CHECK(present[0] && present[9] && present[8] && present[7]);
  CHECK(!present[1] && !present[6]);
  f = fopen(path, "r");
  CHECK(f != NULL);
  if (f) fclose(f);
  remove(path);
  setenv("STAX_JIT_CACHE_MAX_MB", "3", 1);
  CHECK(stax_jit_cache_limit_bytes() == (uint64_t)3 << 20);
  unsetenv("STAX_JIT_CACHE_MAX_MB");
  CHECK(stax_jit_cache_limit_bytes() == (uint64_t)256 << 20);
  for (int i = 0; i < 10; i++) {
    snprintf(path, sizeof(path), "%s/%016llx.o", dir,
             (unsigned long long)stax_jit_cache_key_hash(keys[i], strlen(keys[i])));
    remove(path);
  }
  rmdir(dir);
}

/* Off: nothing is written, nothing is loaded. */
static void test_cache_off(void) {
  ensure_setup();
  if (!tg_backend()) return;
  clear_dir();
  setenv("STAX_JIT_CACHE", "0", 1);
  test_group_t tg;
  build(&tg);
  CHECK_EQ_INT(compile_and_check(&tg, NULL), 0);
  CHECK_EQ_INT(compile_and_check(&tg, NULL), 0);
  CHECK_EQ_INT(count_files(), 0);
  unsetenv("STAX_JIT_CACHE");
  tg_free(&tg);
}

/* A folder named in the compile options wins over the environment: "" keeps the cache off
 * although the environment has a folder, a folder uses the cache although STAX_JIT_CACHE=0. */
static void test_folder_from_options(void) {
  ensure_setup();
  if (!tg_backend() || stax_jit_build_identity() == 0) return;
  clear_dir();
  test_group_t tg;
  build(&tg);
  stax_jit_backend_t* backend = tg_backend();
  stax_jit_kernel_t* kernel = NULL;
  stax_jit_compile_options_t none = {.cache_dir = ""};
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "cached"), &none, &kernel));
  if (kernel) stax_jit_kernel_release(kernel);
  CHECK_EQ_INT(count_files(), 0);
  setenv("STAX_JIT_CACHE", "0", 1);
  stax_jit_compile_options_t named = {.cache_dir = cache_dir};
  kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "cached"), &named, &kernel));
  if (kernel) stax_jit_kernel_release(kernel);
  CHECK_EQ_INT(count_files(), 1);
  uint64_t loads = stax_jit_stats().cache_loads;
  kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "cached"), &named, &kernel));
  if (kernel) stax_jit_kernel_release(kernel);
  CHECK_EQ_INT((int)(stax_jit_stats().cache_loads - loads), 1);
  unsetenv("STAX_JIT_CACHE");
  tg_free(&tg);
}

static void setup(void) {
  snprintf(cache_dir, sizeof(cache_dir), "/tmp/stax-test-objcache-XXXXXX");
  if (!mkdtemp(cache_dir)) {
    perror("mkdtemp");
    exit(1);
  }
  setenv("STAX_JIT_CACHE_DIR", cache_dir, 1);
  unsetenv("STAX_JIT_CACHE");
}

static void teardown(void) {
  char sub[320];
  clear_dir();
  snprintf(sub, sizeof(sub), "%s/sub/folder", cache_dir);
  DIR* d = opendir(sub);
  if (d) {
    for (struct dirent* e; (e = readdir(d)) != NULL;) {
      if (e->d_name[0] == '.') continue;
      char path[700];
      snprintf(path, sizeof(path), "%s/%s", sub, e->d_name);
      remove(path);
    }
    closedir(d);
  }
  rmdir(sub);
  snprintf(sub, sizeof(sub), "%s/sub", cache_dir);
  rmdir(sub);
  rmdir(cache_dir);
}

/* Every test starts here: the private folder is made once and removed at exit. */
static void ensure_setup(void) {
  static bool done = false;
  if (done) return;
  done = true;
  setup();
  atexit(teardown);
}

STAX_TEST_MAIN(STAX_TEST(test_file_functions), STAX_TEST(test_store_then_load),
               STAX_TEST(test_damaged_files), STAX_TEST(test_trim), STAX_TEST(test_cache_off),
               STAX_TEST(test_folder_from_options))
