/* The thread pool and parallel_for. A parallel_for call is a job on the caller's stack: it is
 * queued, workers and the caller claim chunks of it with an atomic counter, and the caller
 * waits until every participant has left the job before returning (so the job never outlives
 * its stack frame). Several callers can have jobs queued at once; workers serve the oldest.
 * Calls made from inside a chunk run inline, which keeps nesting deadlock-free.
 *
 * Between jobs a worker spins for a short while (STAX_SPIN_MICROS, default 50 us) before it
 * sleeps on the condition variable, and a caller spins before it waits for its last
 * participant: a model's kernels come back to back, many of them a fraction of a millisecond
 * (attention's at short sequences), and a futex wake-up per kernel and thread (tens of
 * microseconds on a virtual machine) took a second thread's whole gain on those. Spinning
 * ends at the deadline, so an idle pool sleeps; STAX_SPIN_MICROS=0 never spins.
 *
 * The default pool is created on first use (pthread_once) and destroyed by an atexit handler,
 * so its threads are joined and nothing is left for the leak checker. */
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/tensor_internal.h"

#define STAX_THREADPOOL_MAX_THREADS 1024
/* Chunks per thread: more than one so uneven chunks balance out, few enough that claiming
 * them costs nothing next to the work. */
#define STAX_CHUNKS_PER_THREAD 4
/* How long a worker looks for the next job, and a caller for its last participant, before
 * sleeping (STAX_SPIN_MICROS overrides it). */
#define STAX_SPIN_MICROS_DEFAULT 50

typedef struct stax_parallel_job_s stax_parallel_job_t;
struct stax_parallel_job_s {
  stax_parallel_job_t* next; /* queue link, guarded by the pool mutex */
  stax_parallel_fn fn;
  void* ctx;
  int64_t count;
  int64_t chunk_size;
  int64_t chunk_count;
  atomic_int_fast64_t next_chunk;
  /* Threads inside the job: changed under the pool mutex, read without it by a spinning
   * owner. A participant's decrement is its last access to the job. */
  atomic_int participants;
  bool queued;
};

struct stax_threadpool_s {
  stax_allocator_t allocator;
  int32_t thread_count; /* including the calling thread */
  int32_t worker_count; /* workers started */
  pthread_t* workers;
  pthread_mutex_t mutex;
  pthread_cond_t work_available;
  pthread_cond_t participant_left;
  stax_parallel_job_t* queue_head;
  stax_parallel_job_t* queue_tail;
  atomic_bool has_work; /* queue_head != NULL, for spinning workers */
  int32_t sleepers;     /* workers waiting on work_available, guarded by the mutex */
  int64_t spin_micros;
  bool shutting_down;
};

static int64_t stax_now_micros(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

static inline void stax_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Spins until done(arg) or `micros` have passed; true when done. */
static bool stax_spin_until(bool (*done)(const void*), const void* arg, int64_t micros) {
  if (micros <= 0) return done(arg);
  int64_t deadline = 0;
  for (int32_t i = 0;; i++) {
    if (done(arg)) return true;
    if ((i & 63) == 0) {
      int64_t now = stax_now_micros();
      if (deadline == 0) deadline = now + micros;
      if (now >= deadline) return done(arg);
    }
    stax_cpu_relax();
  }
}

static bool stax_pool_has_work(const void* pool) {
  return atomic_load_explicit(&((const stax_threadpool_t*)pool)->has_work, memory_order_acquire);
}

static bool stax_job_empty(const void* job) {
  return atomic_load_explicit(&((const stax_parallel_job_t*)job)->participants,
                              memory_order_acquire) == 0;
}

/* Non-zero while this thread runs chunks (always, on workers): parallel_for then runs inline. */
static _Thread_local int32_t stax_parallel_depth_ = 0;

/* ---- jobs --------------------------------------------------------------------------------- */

static void stax_job_run_chunks(stax_parallel_job_t* job) {
  for (;;) {
    int64_t chunk = atomic_fetch_add_explicit(&job->next_chunk, 1, memory_order_relaxed);
    if (chunk >= job->chunk_count) return;
    int64_t begin = chunk * job->chunk_size;
    int64_t end = job->count - begin > job->chunk_size ? begin + job->chunk_size : job->count;
    job->fn(job->ctx, begin, end);
  }
}

/* Caller holds the mutex. */
static void stax_queue_remove(stax_threadpool_t* pool, stax_parallel_job_t* job) {
  if (!job->queued) return;
  stax_parallel_job_t* previous = NULL;
  for (stax_parallel_job_t* it = pool->queue_head; it; previous = it, it = it->next) {
    if (it != job) continue;
    if (previous) {
      previous->next = job->next;
    } else {
      pool->queue_head = job->next;
    }
    if (pool->queue_tail == job) pool->queue_tail = previous;
    break;
  }
  job->next = NULL;
  job->queued = false;
  atomic_store_explicit(&pool->has_work, pool->queue_head != NULL, memory_order_release);
}

/* Caller holds the mutex. Every chunk has been claimed when a participant leaves, so the job
 * comes off the queue then; the last one out wakes the owner. */
static void stax_job_leave(stax_threadpool_t* pool, stax_parallel_job_t* job) {
  stax_queue_remove(pool, job);
  if (atomic_fetch_sub_explicit(&job->participants, 1, memory_order_acq_rel) == 1)
    pthread_cond_broadcast(&pool->participant_left);
}

static void* stax_worker_main(void* arg) {
  stax_threadpool_t* pool = (stax_threadpool_t*)arg;
  stax_parallel_depth_ = 1;
  pthread_mutex_lock(&pool->mutex);
  for (;;) {
    if (!pool->shutting_down && pool->queue_head == NULL && pool->spin_micros > 0) {
      /* The next kernel usually comes within microseconds: look before sleeping. */
      pthread_mutex_unlock(&pool->mutex);
      stax_spin_until(stax_pool_has_work, pool, pool->spin_micros);
      pthread_mutex_lock(&pool->mutex);
    }
    while (!pool->shutting_down && pool->queue_head == NULL) {
      pool->sleepers++;
      pthread_cond_wait(&pool->work_available, &pool->mutex);
      pool->sleepers--;
    }
    stax_parallel_job_t* job = pool->queue_head;
    if (job == NULL) break; /* shutting down with nothing left to do */
    atomic_fetch_add_explicit(&job->participants, 1, memory_order_relaxed);
    pthread_mutex_unlock(&pool->mutex);
    stax_job_run_chunks(job);
    pthread_mutex_lock(&pool->mutex);
    stax_job_leave(pool, job);
  }
  pthread_mutex_unlock(&pool->mutex);
  return NULL;
}

/* ---- pools -------------------------------------------------------------------------------- */

static int32_t stax_threads_from_environment(void) {
  const char* text = getenv("STAX_NUM_THREADS");
  if (text && *text) {
    char* end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno == 0 && *end == '\0' && value > 0 && value <= STAX_THREADPOOL_MAX_THREADS) {
      return (int32_t)value;
    }
    /* A bad value is ignored rather than fatal: the pool still works with the core count. */
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) return 1;
  return cores > STAX_THREADPOOL_MAX_THREADS ? STAX_THREADPOOL_MAX_THREADS : (int32_t)cores;
}

static void stax_threadpool_stop_workers(stax_threadpool_t* pool) {
  pthread_mutex_lock(&pool->mutex);
  pool->shutting_down = true;
  pthread_cond_broadcast(&pool->work_available);
  pthread_mutex_unlock(&pool->mutex);
  for (int32_t i = 0; i < pool->worker_count; i++) pthread_join(pool->workers[i], NULL);
  pool->worker_count = 0;
}

static void stax_threadpool_free(stax_threadpool_t* pool) {
  pthread_cond_destroy(&pool->participant_left);
  pthread_cond_destroy(&pool->work_available);
  pthread_mutex_destroy(&pool->mutex);
  stax_allocator_free(pool->allocator, pool->workers,
                      sizeof(pthread_t) * (size_t)(pool->thread_count - 1));
  stax_allocator_free(pool->allocator, pool, sizeof(*pool));
}

stax_status_t stax_threadpool_create(stax_allocator_t allocator, int32_t thread_count,
                                     stax_threadpool_t** out_pool) {
  *out_pool = NULL;
  if (thread_count < 0 || thread_count > STAX_THREADPOOL_MAX_THREADS) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "threadpool_create: thread_count %d is outside 0..%d",
                            (int)thread_count, STAX_THREADPOOL_MAX_THREADS);
  }
  if (thread_count == 0) thread_count = stax_threads_from_environment();
  stax_threadpool_t* pool = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(allocator, 1, sizeof(*pool), (void**)&pool),
                       "while creating a pool of %d threads", (int)thread_count);
  pool->allocator = allocator;
  pool->thread_count = thread_count;
  pool->spin_micros = STAX_SPIN_MICROS_DEFAULT;
  const char* spin = getenv("STAX_SPIN_MICROS");
  if (spin && *spin) {
    char* end = NULL;
    long value = strtol(spin, &end, 10);
    if (*end == '\0' && value >= 0 && value <= 1000000) pool->spin_micros = value;
  }
  stax_status_t status = stax_allocator_calloc(allocator, (size_t)(thread_count - 1),
                                               sizeof(pthread_t), (void**)&pool->workers);
  if (status != STAX_OK) {
    stax_allocator_free(allocator, pool, sizeof(*pool));
    return stax_status_annotate(status, "while creating a pool of %d threads", (int)thread_count);
  }
  pthread_mutex_init(&pool->mutex, NULL);
  pthread_cond_init(&pool->work_available, NULL);
  pthread_cond_init(&pool->participant_left, NULL);
  for (int32_t i = 0; i < thread_count - 1; i++) {
    int error = pthread_create(&pool->workers[i], NULL, stax_worker_main, pool);
    if (error != 0) {
      stax_threadpool_stop_workers(pool);
      stax_threadpool_free(pool);
      return stax_status_make(STAX_INTERNAL,
                              "threadpool_create: could not start worker %d of %d: %s", (int)i + 1,
                              (int)thread_count - 1, strerror(error));
    }
    pool->worker_count++;
  }
  *out_pool = pool;
  return STAX_OK;
}

void stax_threadpool_destroy(stax_threadpool_t* pool) {
  if (pool == NULL) return;
  stax_threadpool_stop_workers(pool);
  stax_threadpool_free(pool);
}

int32_t stax_threadpool_thread_count(const stax_threadpool_t* pool) {
  return pool ? pool->thread_count : 1;
}

/* ---- parallel_for ------------------------------------------------------------------------- */

void stax_parallel_for(stax_threadpool_t* pool, int64_t count, int64_t grain, stax_parallel_fn fn,
                       void* ctx) {
  if (count <= 0 || fn == NULL) return;
  if (grain < 1) grain = 1;
  int64_t chunk_size = 0, chunk_count = 1;
  if (pool && pool->thread_count > 1 && stax_parallel_depth_ == 0) {
    int64_t target_chunks = (int64_t)pool->thread_count * STAX_CHUNKS_PER_THREAD;
    chunk_size = count / target_chunks + (count % target_chunks != 0);
    if (chunk_size < grain) chunk_size = grain;
    chunk_count = count / chunk_size + (count % chunk_size != 0);
  }
  if (chunk_count <= 1) {
    fn(ctx, 0, count);
    return;
  }

  stax_parallel_job_t job;
  memset(&job, 0, sizeof(job));
  job.fn = fn;
  job.ctx = ctx;
  job.count = count;
  job.chunk_size = chunk_size;
  job.chunk_count = chunk_count;
  atomic_init(&job.next_chunk, 0);
  atomic_init(&job.participants, 1); /* this thread */
  job.queued = true;

  pthread_mutex_lock(&pool->mutex);
  if (pool->queue_tail) {
    pool->queue_tail->next = &job;
  } else {
    pool->queue_head = &job;
  }
  pool->queue_tail = &job;
  atomic_store_explicit(&pool->has_work, true, memory_order_release);
  /* Spinning workers see the job by themselves; wake only as many sleepers as there are
   * chunks for besides our own. */
  if (pool->sleepers > 0) {
    if (chunk_count - 1 >= pool->worker_count) {
      pthread_cond_broadcast(&pool->work_available);
    } else {
      for (int64_t i = 0; i < chunk_count - 1; i++) pthread_cond_signal(&pool->work_available);
    }
  }
  pthread_mutex_unlock(&pool->mutex);

  stax_parallel_depth_++;
  stax_job_run_chunks(&job);
  stax_parallel_depth_--;

  pthread_mutex_lock(&pool->mutex);
  stax_job_leave(pool, &job);
  if (atomic_load(&job.participants) > 0 && pool->spin_micros > 0) {
    /* A worker is finishing its last chunk: usually a matter of microseconds. */
    pthread_mutex_unlock(&pool->mutex);
    stax_spin_until(stax_job_empty, &job, pool->spin_micros);
    pthread_mutex_lock(&pool->mutex);
  }
  while (atomic_load(&job.participants) > 0)
    pthread_cond_wait(&pool->participant_left, &pool->mutex);
  pthread_mutex_unlock(&pool->mutex);
}

/* ---- the default pool --------------------------------------------------------------------- */

static pthread_once_t stax_default_pool_once_ = PTHREAD_ONCE_INIT;
static pthread_mutex_t stax_default_pool_mutex_ = PTHREAD_MUTEX_INITIALIZER;
static int32_t stax_default_pool_requested_threads_ = 0; /* 0: environment or cores */
static bool stax_default_pool_started_ = false;
static _Atomic(stax_threadpool_t*) stax_default_pool_ = NULL;

static void stax_default_pool_destroy(void) {
  stax_threadpool_destroy(atomic_exchange(&stax_default_pool_, NULL));
}

static void stax_default_pool_create(void) {
  pthread_mutex_lock(&stax_default_pool_mutex_);
  stax_default_pool_started_ = true;
  int32_t thread_count = stax_default_pool_requested_threads_;
  pthread_mutex_unlock(&stax_default_pool_mutex_);
  stax_threadpool_t* pool = NULL;
  stax_status_t status = stax_threadpool_create(stax_allocator_system(), thread_count, &pool);
  if (status != STAX_OK) {
    /* Documented fallback: without a pool, parallel_for runs inline. */
    stax_status_free(status);
    return;
  }
  atomic_store(&stax_default_pool_, pool);
  /* If registration fails the pool simply lives until the process ends. */
  atexit(stax_default_pool_destroy);
}

stax_threadpool_t* stax_threadpool_default(void) {
  pthread_once(&stax_default_pool_once_, stax_default_pool_create);
  return atomic_load(&stax_default_pool_);
}

bool stax_threadpool_set_default_threads(int32_t thread_count) {
  if (thread_count < 0 || thread_count > STAX_THREADPOOL_MAX_THREADS) return false;
  pthread_mutex_lock(&stax_default_pool_mutex_);
  bool accepted = !stax_default_pool_started_;
  if (accepted) stax_default_pool_requested_threads_ = thread_count;
  pthread_mutex_unlock(&stax_default_pool_mutex_);
  return accepted;
}
