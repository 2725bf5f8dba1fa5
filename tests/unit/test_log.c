/* Tests for logging: channel selection from a spec or STAX_LOG, and the printed format. */
#include <unistd.h>

#include "test_harness.h"

/* Captures what `fn` writes to stderr (file descriptor 2) into `buffer`. */
static void capture_stderr(void (*fn)(void), char* buffer, size_t capacity) {
  buffer[0] = '\0';
  FILE* temp = tmpfile();
  CHECK(temp != NULL);
  if (!temp) return;
  fflush(stderr);
  int saved = dup(2);
  CHECK(saved >= 0);
  dup2(fileno(temp), 2);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(temp);
  size_t n = fread(buffer, 1, capacity - 1, temp);
  buffer[n] = '\0';
  fclose(temp);
}

static int count_enabled(void) {
  int count = 0;
  for (int i = 0; i < STAX_LOG_CHANNEL_COUNT; i++) count += stax_log_enabled((stax_log_channel_t)i);
  return count;
}

/* Must run first: nothing has configured logging yet, so the first query reads STAX_LOG. */
static void test_lazy_environment(void) {
  setenv("STAX_LOG", "ir,pool", 1);
  CHECK(stax_log_enabled(STAX_LOG_IR));
  CHECK(stax_log_enabled(STAX_LOG_POOL));
  CHECK_EQ_INT(count_enabled(), 2);
  unsetenv("STAX_LOG");
}

static void test_configure(void) {
  stax_log_configure("shape,jit");
  CHECK(stax_log_enabled(STAX_LOG_SHAPE));
  CHECK(stax_log_enabled(STAX_LOG_JIT));
  CHECK_EQ_INT(count_enabled(), 2);
  stax_log_configure("all");
  CHECK_EQ_INT(count_enabled(), STAX_LOG_CHANNEL_COUNT);
  stax_log_configure("");
  CHECK_EQ_INT(count_enabled(), 0);
  stax_log_configure(" vm , ,ALLOC,");
  CHECK(stax_log_enabled(STAX_LOG_VM));
  CHECK(stax_log_enabled(STAX_LOG_ALLOC));
  CHECK_EQ_INT(count_enabled(), 2);
  /* Out-of-range channels are never enabled. */
  stax_log_configure("all");
  CHECK(!stax_log_enabled(STAX_LOG_CHANNEL_COUNT));
  CHECK(!stax_log_enabled((stax_log_channel_t)-1));
  stax_log_configure("");
}

static void test_configure_from_environment(void) {
  setenv("STAX_LOG", "onnx", 1);
  stax_log_configure(NULL);
  CHECK(stax_log_enabled(STAX_LOG_ONNX));
  CHECK_EQ_INT(count_enabled(), 1);
  unsetenv("STAX_LOG");
  stax_log_configure(NULL);
  CHECK_EQ_INT(count_enabled(), 0);
}

static void configure_with_unknown_names(void) { stax_log_configure("bogus,shape,nope"); }

static void test_unknown_names_warn_once(void) {
  char output[1024];
  capture_stderr(configure_with_unknown_names, output, sizeof(output));
  CHECK(stax_log_enabled(STAX_LOG_SHAPE));
  CHECK_EQ_INT(count_enabled(), 1);
  CHECK(strstr(output, "'bogus'") != NULL);
  CHECK(strstr(output, "'nope'") != NULL);
  CHECK(strstr(output, "known: all, general") != NULL);
  const char* newline = strchr(output, '\n');
  CHECK(newline != NULL && newline[1] == '\0'); /* exactly one line */
  stax_log_configure("");
}

static void log_some_lines(void) {
  stax_log(STAX_LOG_JIT, "compiled segment %d", 3);
  STAX_LOG(SHAPE, "dim %s = %lld", "N", 7LL);
  STAX_LOG(VM, "not enabled, not printed");
  stax_log(STAX_LOG_IR, "not enabled either");
}

static void test_printed_format(void) {
  stax_log_configure("jit,shape");
  char output[1024];
  capture_stderr(log_some_lines, output, sizeof(output));
  CHECK_EQ_STR(output, "[stax:jit] compiled segment 3\n[stax:shape] dim N = 7\n");
  stax_log_configure("");
  capture_stderr(log_some_lines, output, sizeof(output));
  CHECK_EQ_STR(output, "");
}

static void test_channel_names(void) {
  CHECK_EQ_STR(stax_log_channel_name(STAX_LOG_GENERAL), "general");
  CHECK_EQ_STR(stax_log_channel_name(STAX_LOG_SHAPE), "shape");
  CHECK_EQ_STR(stax_log_channel_name(STAX_LOG_POOL), "pool");
  CHECK_EQ_STR(stax_log_channel_name(STAX_LOG_CHANNEL_COUNT), "unknown");
  CHECK_EQ_STR(stax_log_channel_name((stax_log_channel_t)-3), "unknown");
}

STAX_TEST_MAIN(STAX_TEST(test_lazy_environment), STAX_TEST(test_configure),
               STAX_TEST(test_configure_from_environment),
               STAX_TEST(test_unknown_names_warn_once), STAX_TEST(test_printed_format),
               STAX_TEST(test_channel_names))
