/* The thread-local buffer pool: per thread, free blocks by power-of-two size class (64 B and
 * up), with a byte limit and least-recently-returned eviction. A pooled buffer goes back to
 * the pool of the thread that drops its last reference, so no locks are needed.
 *
 * A cached block keeps the layout of a live one (header, then data); while cached, its header
 * holds the list links below instead of the buffer struct. Each block sits on two lists: its
 * size class (newest first, so a hit reuses warm memory) and the thread's recency list
 * (eviction takes the oldest, so sizes a workload stopped using are the ones dropped).
 *
 * The byte limit is automatic unless set: the larger of 256 MiB and twice the most bytes of
 * pooled buffers ever live at once in the process (twice: a stream of shapes moves its
 * tensors between size classes, and the classes the next call needs must survive beside the
 * ones the last call used; with the peak alone, S2-like streams still evicted a block on most
 * misses). A workload whose calls hold more than 256 MiB at once (a BERT layer at 8 x 512:
 * two 96 MiB score tensors, the FFN's 48 MiB) otherwise frees its largest blocks at the end
 * of every call and maps them again on the next, and the fresh pages fault in: 6,000-7,000
 * faults (25-30 MiB) per large call of a stream of changing shapes, measured; ONNX Runtime's
 * arena keeps its high-water mark too. An explicit stax_pool_set_limit is a hard cap.
 *
 * Nothing is reported as leaked at exit: a pthread key destructor frees a thread's cache when
 * the thread ends, and an atexit handler frees the exiting thread's (the main thread does not
 * run key destructors). Buffers released after either simply free their block. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tensor_internal.h"

#define STAX_POOL_SMALLEST_CLASS_SHIFT 6 /* 64 bytes */
#define STAX_POOL_CLASS_COUNT 40         /* up to 64 B << 39 = 32 TiB */
#define STAX_POOL_DEFAULT_LIMIT (UINT64_C(256) << 20)
/* Requests of at least this capacity may take a cached block of the next class up. */
#define STAX_POOL_UP_CLASS_MIN ((size_t)1 << 20)

typedef struct stax_pool_block_s stax_pool_block_t;
struct stax_pool_block_s {
  stax_pool_block_t* class_newer;
  stax_pool_block_t* class_older;
  stax_pool_block_t* recency_newer;
  stax_pool_block_t* recency_older;
  size_t capacity;
  int32_t size_class;
};
_Static_assert(sizeof(stax_pool_block_t) <= STAX_BUFFER_HEADER_SIZE,
               "cached-block links must fit in the buffer header");

typedef struct stax_thread_cache_t {
  stax_pool_block_t* class_newest[STAX_POOL_CLASS_COUNT];
  stax_pool_block_t* newest;
  stax_pool_block_t* oldest;
  stax_pool_stats_t stats;
} stax_thread_cache_t;

typedef enum stax_thread_cache_state_e {
  STAX_THREAD_CACHE_NONE, /* not created yet */
  STAX_THREAD_CACHE_LIVE,
  STAX_THREAD_CACHE_GONE, /* thread or process exiting: never cache again */
} stax_thread_cache_state_t;

static _Thread_local stax_thread_cache_t* stax_thread_cache_ = NULL;
static _Thread_local stax_thread_cache_state_t stax_thread_cache_state_ = STAX_THREAD_CACHE_NONE;

static pthread_once_t stax_pool_once_ = PTHREAD_ONCE_INIT;
static pthread_key_t stax_pool_key_;
static bool stax_pool_key_ready_ = false;
/* STAX_POOL_LIMIT_AUTO, or the cap the user set. */
static _Atomic uint64_t stax_pool_limit_ = STAX_POOL_LIMIT_AUTO;
/* Capacity of pooled buffers handed out and not yet returned, over every thread, and its
 * high-water mark (what the automatic limit follows). */
static _Atomic uint64_t stax_pool_live_bytes_ = 0;
static _Atomic uint64_t stax_pool_peak_live_bytes_ = 0;

static uint64_t stax_pool_limit(void) {
  uint64_t limit = atomic_load_explicit(&stax_pool_limit_, memory_order_relaxed);
  if (limit != STAX_POOL_LIMIT_AUTO) return limit;
  uint64_t peak = atomic_load_explicit(&stax_pool_peak_live_bytes_, memory_order_relaxed);
  peak *= 2;
  return peak > STAX_POOL_DEFAULT_LIMIT ? peak : STAX_POOL_DEFAULT_LIMIT;
}

static void stax_pool_count_out(size_t capacity) {
  uint64_t live =
      atomic_fetch_add_explicit(&stax_pool_live_bytes_, capacity, memory_order_relaxed) +
      capacity;
  uint64_t peak = atomic_load_explicit(&stax_pool_peak_live_bytes_, memory_order_relaxed);
  while (live > peak && !atomic_compare_exchange_weak_explicit(&stax_pool_peak_live_bytes_,
                                                               &peak, live, memory_order_relaxed,
                                                               memory_order_relaxed)) {
  }
}

static stax_allocator_t stax_pool_allocator(void) { return stax_allocator_system(); }

static void stax_pool_free_block(void* block, size_t capacity) {
  stax_allocator_free_aligned(stax_pool_allocator(), block, STAX_BUFFER_HEADER_SIZE + capacity,
                              STAX_BUFFER_ALIGNMENT);
}

/* ---- the two lists ------------------------------------------------------------------------ */

static void stax_cache_push(stax_thread_cache_t* cache, stax_pool_block_t* block) {
  int32_t k = block->size_class;
  block->class_newer = NULL;
  block->class_older = cache->class_newest[k];
  if (block->class_older) block->class_older->class_newer = block;
  cache->class_newest[k] = block;
  block->recency_newer = NULL;
  block->recency_older = cache->newest;
  if (cache->newest) cache->newest->recency_newer = block;
  cache->newest = block;
  if (cache->oldest == NULL) cache->oldest = block;
  cache->stats.bytes_cached += block->capacity;
}

static void stax_cache_unlink(stax_thread_cache_t* cache, stax_pool_block_t* block) {
  int32_t k = block->size_class;
  if (block->class_newer) {
    block->class_newer->class_older = block->class_older;
  } else {
    cache->class_newest[k] = block->class_older;
  }
  if (block->class_older) block->class_older->class_newer = block->class_newer;
  if (block->recency_newer) {
    block->recency_newer->recency_older = block->recency_older;
  } else {
    cache->newest = block->recency_older;
  }
  if (block->recency_older) {
    block->recency_older->recency_newer = block->recency_newer;
  } else {
    cache->oldest = block->recency_newer;
  }
  cache->stats.bytes_cached -= block->capacity;
}

static void stax_cache_evict_oldest(stax_thread_cache_t* cache) {
  stax_pool_block_t* block = cache->oldest;
  stax_cache_unlink(cache, block);
  cache->stats.evictions++;
  stax_pool_free_block(block, block->capacity);
}

static void stax_cache_free_all(stax_thread_cache_t* cache) {
  while (cache->oldest) {
    stax_pool_block_t* block = cache->oldest;
    stax_cache_unlink(cache, block);
    stax_pool_free_block(block, block->capacity);
  }
}

/* ---- per-thread lifetime ------------------------------------------------------------------ */

static void stax_pool_retire_current_thread(void) {
  stax_thread_cache_t* cache = stax_thread_cache_;
  stax_thread_cache_ = NULL;
  stax_thread_cache_state_ = STAX_THREAD_CACHE_GONE;
  if (cache) {
    stax_cache_free_all(cache);
    stax_allocator_free(stax_pool_allocator(), cache, sizeof(*cache));
  }
}

static void stax_pool_thread_exit(void* value) {
  (void)value; /* the same pointer as stax_thread_cache_ on this thread */
  stax_pool_retire_current_thread();
}

static void stax_pool_process_exit(void) {
  if (stax_pool_key_ready_) pthread_setspecific(stax_pool_key_, NULL);
  stax_pool_retire_current_thread();
}

static void stax_pool_init_once(void) {
  if (pthread_key_create(&stax_pool_key_, stax_pool_thread_exit) != 0) return;
  stax_pool_key_ready_ = true;
  atexit(stax_pool_process_exit);
}

/* The calling thread's cache, created on first use; NULL when caching is off for this thread
 * (exiting, or the cache itself could not be allocated). */
static stax_thread_cache_t* stax_pool_current_cache(bool create) {
  if (stax_thread_cache_state_ == STAX_THREAD_CACHE_LIVE) return stax_thread_cache_;
  if (stax_thread_cache_state_ == STAX_THREAD_CACHE_GONE || !create) return NULL;
  pthread_once(&stax_pool_once_, stax_pool_init_once);
  if (!stax_pool_key_ready_) return NULL;
  /* The cache is process infrastructure with no creator to hand it an allocator, so it uses
   * the system one, like the pooled blocks. */
  void* memory = NULL;
  stax_status_t status =
      stax_allocator_calloc(stax_pool_allocator(), 1, sizeof(stax_thread_cache_t), &memory);
  if (status != STAX_OK) {
    stax_status_free(status);
    return NULL;
  }
  stax_thread_cache_t* cache = (stax_thread_cache_t*)memory;
  if (pthread_setspecific(stax_pool_key_, cache) != 0) {
    stax_allocator_free(stax_pool_allocator(), cache, sizeof(*cache));
    return NULL;
  }
  stax_thread_cache_ = cache;
  stax_thread_cache_state_ = STAX_THREAD_CACHE_LIVE;
  return cache;
}

/* ---- allocation and return -------------------------------------------------------------- */

static int32_t stax_pool_size_class(size_t size_bytes) {
  int32_t k = 0;
  while (k < STAX_POOL_CLASS_COUNT &&
         ((size_t)1 << (k + STAX_POOL_SMALLEST_CLASS_SHIFT)) < size_bytes) {
    k++;
  }
  return k; /* STAX_POOL_CLASS_COUNT when too large */
}

stax_status_t stax_buffer_allocate_pooled(size_t size_bytes, stax_buffer_t** out_buffer) {
  *out_buffer = NULL;
  int32_t k = stax_pool_size_class(size_bytes);
  if (k >= STAX_POOL_CLASS_COUNT) {
    return stax_status_make(STAX_OUT_OF_MEMORY,
                            "pooled buffer of %zu bytes is larger than the largest size class",
                            size_bytes);
  }
  size_t capacity = (size_t)1 << (k + STAX_POOL_SMALLEST_CLASS_SHIFT);
  stax_thread_cache_t* cache = stax_pool_current_cache(true);
  void* block = NULL;
  /* A large request may take a block of the next class up: a stream of changing shapes
   * moves its largest tensors between neighbouring classes from call to call, and a block
   * twice too large costs nothing that is not already resident, where a fresh one faults in
   * every page. */
  int32_t hit_class = -1;
  if (cache && cache->class_newest[k]) {
    hit_class = k;
  } else if (cache && capacity >= STAX_POOL_UP_CLASS_MIN && k + 1 < STAX_POOL_CLASS_COUNT &&
             cache->class_newest[k + 1]) {
    hit_class = k + 1;
  }
  if (hit_class >= 0) {
    stax_pool_block_t* cached = cache->class_newest[hit_class];
    capacity = cached->capacity;
    stax_cache_unlink(cache, cached);
    cache->stats.hits++;
    block = cached;
  } else {
    if (cache) cache->stats.misses++;
    stax_status_t status = stax_allocator_malloc_aligned(
        stax_pool_allocator(), STAX_BUFFER_HEADER_SIZE + capacity, STAX_BUFFER_ALIGNMENT, &block);
    if (status != STAX_OK && cache && cache->stats.bytes_cached > 0) {
      /* Memory parked in other size classes may be what the system is missing. */
      stax_status_free(status);
      stax_cache_free_all(cache);
      status = stax_allocator_malloc_aligned(
          stax_pool_allocator(), STAX_BUFFER_HEADER_SIZE + capacity, STAX_BUFFER_ALIGNMENT, &block);
    }
    STAX_RETURN_IF_ERROR(status, "while allocating a pooled buffer of %zu bytes", size_bytes);
  }
  stax_pool_count_out(capacity);
  stax_buffer_t* buffer = (stax_buffer_t*)block;
  stax_buffer_init_block(buffer, stax_pool_allocator(), size_bytes, capacity, true);
  *out_buffer = buffer;
  return STAX_OK;
}

void stax_pool_take_back(stax_buffer_t* buffer) {
  size_t capacity = buffer->capacity;
  void* block = buffer;
  atomic_fetch_sub_explicit(&stax_pool_live_bytes_, capacity, memory_order_relaxed);
  stax_thread_cache_t* cache = stax_pool_current_cache(true);
  if (cache == NULL) {
    stax_pool_free_block(block, capacity);
    return;
  }
  uint64_t limit = stax_pool_limit();
  if (capacity > limit) {
    cache->stats.evictions++;
    stax_pool_free_block(block, capacity);
    return;
  }
  while (cache->stats.bytes_cached + capacity > limit) stax_cache_evict_oldest(cache);
  stax_pool_block_t* cached = (stax_pool_block_t*)block;
  memset(cached, 0, sizeof(*cached));
  cached->capacity = capacity;
  cached->size_class = stax_pool_size_class(capacity);
  stax_cache_push(cache, cached);
  cache->stats.returns++;
}

/* ---- public controls ---------------------------------------------------------------------- */

stax_pool_stats_t stax_pool_stats(void) {
  stax_pool_stats_t stats;
  stax_thread_cache_t* cache = stax_pool_current_cache(false);
  if (cache) {
    stats = cache->stats;
  } else {
    memset(&stats, 0, sizeof(stats));
  }
  stats.live_bytes = atomic_load_explicit(&stax_pool_live_bytes_, memory_order_relaxed);
  stats.peak_live_bytes = atomic_load_explicit(&stax_pool_peak_live_bytes_, memory_order_relaxed);
  stats.limit = stax_pool_limit();
  return stats;
}

void stax_pool_trim(void) {
  stax_thread_cache_t* cache = stax_pool_current_cache(false);
  if (cache) stax_cache_free_all(cache);
}

void stax_pool_set_limit(uint64_t bytes) {
  atomic_store_explicit(&stax_pool_limit_, bytes, memory_order_relaxed);
  /* Other threads shrink on their next return; the caller's pool shrinks now. */
  uint64_t limit = stax_pool_limit();
  stax_thread_cache_t* cache = stax_pool_current_cache(false);
  if (cache) {
    while (cache->stats.bytes_cached > limit) stax_cache_evict_oldest(cache);
  }
}
