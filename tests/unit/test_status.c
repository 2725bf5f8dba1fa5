/* Tests for status objects and the propagation macros. */
#include "test_harness.h"

static stax_status_t fail_with(stax_status_code_t code, const char* what) {
  return stax_status_make(code, "bad %s", what);
}

static stax_status_t propagate_plain(stax_status_t inner) {
  STAX_RETURN_IF_ERROR(inner);
  return STAX_OK;
}

static stax_status_t propagate_with_context(stax_status_t inner, const char* node) {
  STAX_RETURN_IF_ERROR(inner, "while importing node '%s'", node);
  return STAX_OK;
}

/* Counts how often the cleanup label runs, to prove the goto path is taken exactly once. */
static int cleanup_runs = 0;
static int after_error_runs = 0;

static stax_status_t owns_resources(stax_status_t first, stax_status_t second) {
  stax_status_t status = STAX_OK;
  STAX_GOTO_IF_ERROR(status, first, cleanup);
  STAX_GOTO_IF_ERROR(status, second, cleanup, "in step %d", 2);
  after_error_runs++;
cleanup:
  cleanup_runs++;
  return status;
}

static void test_make_and_accessors(void) {
  stax_status_t s = stax_status_make(STAX_SHAPE_MISMATCH, "dim %d: %lld vs %lld", 1, 3LL, 4LL);
  CHECK(s != STAX_OK);
  CHECK_EQ_INT(stax_status_code(s), STAX_SHAPE_MISMATCH);
  CHECK_EQ_STR(stax_status_message(s), "dim 1: 3 vs 4");
  stax_status_free(s);
  /* An "error" made with the OK code still reports an error. */
  s = stax_status_make(STAX_OK_CODE, "oops");
  CHECK(s != STAX_OK);
  CHECK_EQ_INT(stax_status_code(s), STAX_INTERNAL);
  stax_status_free(s);
  /* Empty message. */
  s = stax_status_make(STAX_IO_ERROR, "%s", "");
  CHECK_EQ_STR(stax_status_message(s), "");
  CHECK_EQ_INT(stax_status_consume_code(s), STAX_IO_ERROR);
}

static void test_null_handling(void) {
  CHECK_EQ_INT(stax_status_code(STAX_OK), STAX_OK_CODE);
  CHECK_EQ_STR(stax_status_message(STAX_OK), "");
  CHECK(stax_status_annotate(STAX_OK, "context %d", 1) == STAX_OK);
  CHECK_EQ_INT(stax_status_consume_code(STAX_OK), STAX_OK_CODE);
  stax_status_free(STAX_OK);
}

static void test_annotate_chain(void) {
  stax_status_t s = stax_status_make(STAX_PARSE_ERROR, "inner");
  s = stax_status_annotate(s, "middle %d", 2);
  s = stax_status_annotate(s, "outer");
  CHECK_EQ_STR(stax_status_message(s), "outer: middle 2: inner");
  CHECK_EQ_INT(stax_status_code(s), STAX_PARSE_ERROR);
  /* An empty context leaves the message alone. */
  s = stax_status_annotate(s, "%s", "");
  CHECK_EQ_STR(stax_status_message(s), "outer: middle 2: inner");
  stax_status_free(s);
}

static void test_code_names(void) {
  CHECK_EQ_STR(stax_status_code_name(STAX_OK_CODE), "ok");
  CHECK_EQ_STR(stax_status_code_name(STAX_INVALID_ARGUMENT), "invalid argument");
  CHECK_EQ_STR(stax_status_code_name(STAX_OUT_OF_MEMORY), "out of memory");
  CHECK_EQ_STR(stax_status_code_name(STAX_INTERNAL), "internal error");
  CHECK_EQ_STR(stax_status_code_name(STAX_STATUS_CODE_COUNT), "unknown");
  CHECK_EQ_STR(stax_status_code_name((stax_status_code_t)-1), "unknown");
}

static void test_consume_code(void) {
  CHECK_EQ_INT(stax_status_consume_code(fail_with(STAX_OUT_OF_RANGE, "index")),
               STAX_OUT_OF_RANGE);
}

static void test_return_if_error(void) {
  CHECK_OK(propagate_plain(STAX_OK));
  CHECK_OK(propagate_with_context(STAX_OK, "conv1"));
  stax_status_t s = propagate_plain(fail_with(STAX_DTYPE_MISMATCH, "dtype"));
  CHECK_EQ_INT(stax_status_code(s), STAX_DTYPE_MISMATCH);
  CHECK_EQ_STR(stax_status_message(s), "bad dtype"); /* no context, no prefix */
  stax_status_free(s);
  s = propagate_with_context(fail_with(STAX_SHAPE_MISMATCH, "rank"), "conv1");
  CHECK_EQ_INT(stax_status_code(s), STAX_SHAPE_MISMATCH);
  CHECK_EQ_STR(stax_status_message(s), "while importing node 'conv1': bad rank");
  stax_status_free(s);
  /* Nested propagation builds the chain outermost first. */
  s = propagate_with_context(propagate_with_context(fail_with(STAX_INTERNAL, "x"), "inner"),
                             "outer");
  CHECK_EQ_STR(stax_status_message(s),
               "while importing node 'outer': while importing node 'inner': bad x");
  stax_status_free(s);
}

static void test_goto_if_error(void) {
  cleanup_runs = after_error_runs = 0;
  CHECK_OK(owns_resources(STAX_OK, STAX_OK));
  CHECK_EQ_INT(cleanup_runs, 1);
  CHECK_EQ_INT(after_error_runs, 1);

  cleanup_runs = after_error_runs = 0;
  CHECK_ERROR(owns_resources(fail_with(STAX_IO_ERROR, "file"), STAX_OK), STAX_IO_ERROR,
              "bad file");
  CHECK_EQ_INT(cleanup_runs, 1);
  CHECK_EQ_INT(after_error_runs, 0);

  cleanup_runs = after_error_runs = 0;
  stax_status_t s = owns_resources(STAX_OK, fail_with(STAX_UNIMPLEMENTED, "op"));
  CHECK_EQ_STR(stax_status_message(s), "in step 2: bad op");
  CHECK_EQ_INT(stax_status_consume_code(s), STAX_UNIMPLEMENTED);
  CHECK_EQ_INT(cleanup_runs, 1);
  CHECK_EQ_INT(after_error_runs, 0);
}

STAX_TEST_MAIN(STAX_TEST(test_make_and_accessors), STAX_TEST(test_null_handling),
               STAX_TEST(test_annotate_chain), STAX_TEST(test_code_names),
               STAX_TEST(test_consume_code), STAX_TEST(test_return_if_error),
               STAX_TEST(test_goto_if_error))
