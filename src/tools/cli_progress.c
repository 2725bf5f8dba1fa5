/* Progress lines on a terminal: a sync-mode compile that keeps a call waiting for more than
 * half a second says what it compiles, and waiting at exit for background compiles says
 * so. Only when stderr is a terminal (pipes, logs and tests stay clean), or when
 * STAX_PROGRESS=1 forces it (STAX_PROGRESS=0 silences a terminal).
 *
 * The compile reports its start and end through the context's progress callback, but a
 * single kernel may take seconds, so the announcement cannot wait for the next report: a
 * watcher thread sleeps until half a second after the start and announces the compile if it
 * is still running then. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"

/* How long a compile may keep a call waiting before it is announced: long enough that the
 * usual compiles (tenths of a second) stay silent. STAX_PROGRESS_DELAY_MS changes it (tests
 * set 0, so that any compile is announced). */
static long progress_delay_ns(void) {
  const char* text = getenv("STAX_PROGRESS_DELAY_MS");
  char* end = NULL;
  long ms = text ? strtol(text, &end, 10) : 500;
  if (!text || end == text || *end || ms < 0 || ms > 100000) ms = 500;
  return ms * 1000000L;
}

static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  pthread_t thread;
  bool thread_started, stop;
  bool active, announced;
  struct timespec begin;
  int32_t segment, kernels;
  bool generic;
  const char* verb;
} g_progress = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool stax_cli_progress_enabled(void) {
  const char* forced = getenv("STAX_PROGRESS");
  if (forced && forced[0]) return strcmp(forced, "0") != 0;
  return isatty(STDERR_FILENO) != 0;
}

static double seconds_between(const struct timespec* a, const struct timespec* b) {
  return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

static void* watcher_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_progress.lock);
  while (!g_progress.stop) {
    if (!g_progress.active || g_progress.announced) {
      pthread_cond_wait(&g_progress.changed, &g_progress.lock);
      continue;
    }
    struct timespec deadline = g_progress.begin;
    long delay = progress_delay_ns();
    deadline.tv_sec += delay / 1000000000L;
    deadline.tv_nsec += delay % 1000000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (seconds_between(&now, &deadline) > 0) {
      pthread_cond_timedwait(&g_progress.changed, &g_progress.lock, &deadline);
      continue; /* woken early (the compile ended) or on time: look again */
    }
    fprintf(stderr, "stax %s: compiling %d kernel%s for segment %d (%s version) ...",
            g_progress.verb, (int)g_progress.kernels, g_progress.kernels == 1 ? "" : "s",
            (int)g_progress.segment, g_progress.generic ? "shape-generic" : "exact-shape");
    fflush(stderr);
    g_progress.announced = true;
  }
  pthread_mutex_unlock(&g_progress.lock);
  return NULL;
}

void stax_cli_progress_compile(void* data, const stax_progress_t* progress) {
  pthread_mutex_lock(&g_progress.lock);
  g_progress.verb = data ? (const char*)data : "run";
  if (progress->kind == STAX_PROGRESS_COMPILE_BEGIN) {
    clock_gettime(CLOCK_MONOTONIC, &g_progress.begin);
    g_progress.active = true;
    g_progress.announced = false;
    g_progress.segment = progress->segment;
    g_progress.kernels = progress->kernels;
    g_progress.generic = progress->generic;
    if (!g_progress.thread_started) {
      /* The watcher's timed waits run on the monotonic clock, like `begin`. */
      pthread_condattr_t attributes;
      pthread_condattr_init(&attributes);
      pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
      pthread_cond_init(&g_progress.changed, &attributes);
      pthread_condattr_destroy(&attributes);
      /* No thread, no announcements: the run goes on as it would without a terminal. */
      g_progress.thread_started = pthread_create(&g_progress.thread, NULL, watcher_main, NULL) == 0;
      if (!g_progress.thread_started) pthread_cond_destroy(&g_progress.changed);
    }
  } else if (progress->kind == STAX_PROGRESS_COMPILE_END) {
    if (g_progress.announced) fprintf(stderr, " done in %.2f s\n", progress->elapsed_ms * 1e-3);
    g_progress.active = g_progress.announced = false;
  }
  if (g_progress.thread_started) pthread_cond_signal(&g_progress.changed);
  pthread_mutex_unlock(&g_progress.lock);
}

void stax_cli_progress_finish(void) {
  pthread_mutex_lock(&g_progress.lock);
  bool started = g_progress.thread_started;
  g_progress.stop = true;
  if (started) pthread_cond_signal(&g_progress.changed);
  pthread_mutex_unlock(&g_progress.lock);
  if (!started) return;
  pthread_join(g_progress.thread, NULL);
  pthread_cond_destroy(&g_progress.changed);
  g_progress.thread_started = false;
}

void stax_cli_jit_drain(const char* verb, const stax_program_t* program, bool progress) {
  int32_t pending = progress ? stax_program_jit_pending(program) : 0;
  struct timespec begin, end;
  clock_gettime(CLOCK_MONOTONIC, &begin);
  if (pending > 0) {
    fprintf(stderr, "stax %s: waiting for %d background compile%s to finish ...", verb,
            (int)pending, pending == 1 ? "" : "s");
    fflush(stderr);
  }
  stax_program_jit_drain(program);
  clock_gettime(CLOCK_MONOTONIC, &end);
  if (pending > 0) fprintf(stderr, " done in %.2f s\n", seconds_between(&begin, &end));
}
