/* A minimal test harness for ctest executables: each test file defines test functions, lists
 * them with STAX_TEST_MAIN, and exits non-zero when any check fails. Checks print the file,
 * line and values so a failure explains itself. */
#ifndef STAX_TEST_HARNESS_H_
#define STAX_TEST_HARNESS_H_

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stax/stax.h"

/* Atomic: tests run checks on worker threads too (test_vm_threads, test_vm_jit). */
static _Atomic int stax_test_failures_ = 0;
static _Atomic int stax_test_checks_ = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    stax_test_checks_++;                                                     \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      stax_test_failures_++;                                                 \
    }                                                                        \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                   \
  do {                                                                       \
    long long a_ = (long long)(a), b_ = (long long)(b);                      \
    stax_test_checks_++;                                                     \
    if (a_ != b_) {                                                          \
      fprintf(stderr, "%s:%d: CHECK_EQ_INT failed: %s = %lld, %s = %lld\n", __FILE__, \
              __LINE__, #a, a_, #b, b_);                                     \
      stax_test_failures_++;                                                 \
    }                                                                        \
  } while (0)

#define CHECK_EQ_STR(a, b)                                                   \
  do {                                                                       \
    const char *a_ = (a), *b_ = (b);                                         \
    stax_test_checks_++;                                                     \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                 \
      fprintf(stderr, "%s:%d: CHECK_EQ_STR failed: %s = \"%s\", %s = \"%s\"\n", __FILE__, \
              __LINE__, #a, a_ ? a_ : "(null)", #b, b_ ? b_ : "(null)");     \
      stax_test_failures_++;                                                 \
    }                                                                        \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                \
  do {                                                                       \
    double a_ = (double)(a), b_ = (double)(b);                               \
    stax_test_checks_++;                                                     \
    if (!(fabs(a_ - b_) <= (tol))) {                                         \
      fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, %s = %.9g\n", __FILE__, \
              __LINE__, #a, a_, #b, b_);                                     \
      stax_test_failures_++;                                                 \
    }                                                                        \
  } while (0)

/* Expects OK; prints the status message otherwise and frees it. */
#define CHECK_OK(expr)                                                       \
  do {                                                                       \
    stax_status_t s_ = (expr);                                               \
    stax_test_checks_++;                                                     \
    if (s_ != STAX_OK) {                                                     \
      fprintf(stderr, "%s:%d: CHECK_OK failed: %s -> %s\n", __FILE__, __LINE__, #expr, \
              stax_status_message(s_));                                      \
      stax_status_free(s_);                                                  \
      stax_test_failures_++;                                                 \
    }                                                                        \
  } while (0)

/* Expects an error with `code` whose message contains `needle` (NULL: any message). */
#define CHECK_ERROR(expr, code, needle)                                      \
  do {                                                                       \
    stax_status_t s_ = (expr);                                               \
    const char* n_ = (needle);                                               \
    stax_test_checks_++;                                                     \
    if (s_ == STAX_OK) {                                                     \
      fprintf(stderr, "%s:%d: CHECK_ERROR failed: %s succeeded\n", __FILE__, __LINE__, #expr); \
      stax_test_failures_++;                                                 \
    } else if (stax_status_code(s_) != (code) ||                             \
               (n_ && !strstr(stax_status_message(s_), n_))) {               \
      fprintf(stderr, "%s:%d: CHECK_ERROR failed: %s -> [%s] %s (wanted [%s] containing '%s')\n", \
              __FILE__, __LINE__, #expr, stax_status_code_name(stax_status_code(s_)), \
              stax_status_message(s_), stax_status_code_name(code), n_ ? n_ : ""); \
      stax_test_failures_++;                                                 \
    }                                                                        \
    stax_status_free(s_);                                                    \
  } while (0)

typedef struct stax_test_case_t {
  const char* name;
  void (*fn)(void);
} stax_test_case_t;

#define STAX_TEST(name) {#name, name}

/* Runs every case, or only those named on the command line. Prints a summary line. */
#define STAX_TEST_MAIN(...)                                                  \
  int main(int argc, char** argv) {                                          \
    static const stax_test_case_t cases[] = {__VA_ARGS__};                   \
    int ran = 0;                                                             \
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {         \
      if (argc > 1) {                                                        \
        int wanted = 0;                                                      \
        for (int a = 1; a < argc; a++)                                       \
          if (strcmp(argv[a], cases[i].name) == 0) wanted = 1;               \
        if (!wanted) continue;                                               \
      }                                                                      \
      int before = stax_test_failures_;                                      \
      cases[i].fn();                                                         \
      ran++;                                                                 \
      printf("%s %s\n", stax_test_failures_ == before ? "ok  " : "FAIL", cases[i].name); \
    }                                                                        \
    printf("%d cases, %d checks, %d failures\n", ran, stax_test_checks_,     \
           stax_test_failures_);                                             \
    return stax_test_failures_ == 0 && ran > 0 ? 0 : 1;                      \
  }

#endif /* STAX_TEST_HARNESS_H_ */
