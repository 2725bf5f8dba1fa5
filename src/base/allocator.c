/* Allocators: the system allocator, the status-returning helpers every create uses, and the
 * failing allocator that fault-injection tests wrap around it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "stax/base.h"

/* malloc's own guarantee on the platforms we target; larger alignments need posix_memalign. */
#define STAX_NATURAL_ALIGNMENT 16

static bool stax_is_power_of_two(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

static void* stax_system_alloc(void* self, void* ptr, size_t old_size, size_t new_size,
                               size_t alignment) {
  (void)self;
  if (new_size == 0) {
    free(ptr); /* free() accepts posix_memalign memory too */
    return NULL;
  }
  if (alignment <= STAX_NATURAL_ALIGNMENT) {
    return ptr ? realloc(ptr, new_size) : malloc(new_size);
  }
  /* posix_memalign wants a multiple of sizeof(void*); any power of two above 16 is one. */
  void* fresh = NULL;
  if (posix_memalign(&fresh, alignment, new_size) != 0) return NULL;
  if (ptr) {
    /* realloc cannot keep an over-alignment, so move the contents by hand. */
    memcpy(fresh, ptr, old_size < new_size ? old_size : new_size);
    free(ptr);
  }
  return fresh;
}

stax_allocator_t stax_allocator_system(void) {
  stax_allocator_t allocator = {NULL, stax_system_alloc};
  return allocator;
}

/* The helpers promise a distinct pointer for a zero size; the same rounding is applied when
 * freeing so wrapping allocators (the failing one) see consistent sizes. */
static size_t stax_nonzero_size(size_t size) { return size ? size : 1; }

stax_status_t stax_allocator_malloc_aligned(stax_allocator_t allocator, size_t size,
                                            size_t alignment, void** out_ptr) {
  *out_ptr = NULL;
  if (alignment != 0 && !stax_is_power_of_two(alignment)) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "allocation alignment %zu is not a power of two", alignment);
  }
  if (allocator.fn == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "allocator has no allocation function");
  }
  size = stax_nonzero_size(size);
  void* ptr = allocator.fn(allocator.self, NULL, 0, size, alignment);
  if (ptr == NULL) {
    return stax_status_make(STAX_OUT_OF_MEMORY,
                            "out of memory allocating %zu bytes (alignment %zu)", size,
                            alignment);
  }
  *out_ptr = ptr;
  return STAX_OK;
}

stax_status_t stax_allocator_malloc(stax_allocator_t allocator, size_t size, void** out_ptr) {
  return stax_allocator_malloc_aligned(allocator, size, 0, out_ptr);
}

stax_status_t stax_allocator_calloc(stax_allocator_t allocator, size_t count, size_t elem_size,
                                    void** out_ptr) {
  *out_ptr = NULL;
  if (elem_size != 0 && count > SIZE_MAX / elem_size) {
    return stax_status_make(STAX_OUT_OF_MEMORY,
                            "allocation of %zu elements of %zu bytes overflows the address "
                            "space",
                            count, elem_size);
  }
  size_t size = count * elem_size;
  void* ptr = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, size, &ptr));
  memset(ptr, 0, stax_nonzero_size(size));
  *out_ptr = ptr;
  return STAX_OK;
}

stax_status_t stax_allocator_realloc(stax_allocator_t allocator, size_t old_size,
                                     size_t new_size, void** inout_ptr) {
  if (*inout_ptr == NULL) return stax_allocator_malloc(allocator, new_size, inout_ptr);
  if (allocator.fn == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "allocator has no allocation function");
  }
  old_size = stax_nonzero_size(old_size);
  new_size = stax_nonzero_size(new_size);
  void* ptr = allocator.fn(allocator.self, *inout_ptr, old_size, new_size, 0);
  if (ptr == NULL) {
    return stax_status_make(STAX_OUT_OF_MEMORY,
                            "out of memory resizing an allocation from %zu to %zu bytes",
                            old_size, new_size);
  }
  *inout_ptr = ptr;
  return STAX_OK;
}

void stax_allocator_free_aligned(stax_allocator_t allocator, void* ptr, size_t size,
                                 size_t alignment) {
  if (ptr == NULL || allocator.fn == NULL) return;
  allocator.fn(allocator.self, ptr, stax_nonzero_size(size), 0, alignment);
}

void stax_allocator_free(stax_allocator_t allocator, void* ptr, size_t size) {
  stax_allocator_free_aligned(allocator, ptr, size, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Failing allocator                                                                        */
/* ---------------------------------------------------------------------------------------- */

/* The header exposes the counters as plain integers so tests can read them directly, which
 * rules out _Atomic fields. One process-wide mutex guards every failing allocator's counters;
 * it is a test-only allocator, so the contention does not matter and the code stays portable. */
static pthread_mutex_t stax_failing_allocator_mutex_ = PTHREAD_MUTEX_INITIALIZER;

static void* stax_failing_alloc(void* self, void* ptr, size_t old_size, size_t new_size,
                                size_t alignment) {
  stax_failing_allocator_t* state = (stax_failing_allocator_t*)self;
  if (new_size == 0) {
    state->base.fn(state->base.self, ptr, old_size, 0, alignment);
    if (ptr) {
      pthread_mutex_lock(&stax_failing_allocator_mutex_);
      state->live_allocations--;
      state->live_bytes -= (int64_t)old_size;
      pthread_mutex_unlock(&stax_failing_allocator_mutex_);
    }
    return NULL;
  }

  /* A resize counts as an allocation attempt: it can fail just like a fresh one. */
  pthread_mutex_lock(&stax_failing_allocator_mutex_);
  uint64_t index = ++state->allocation_count;
  bool fail = state->fail_at != 0 &&
              (index == state->fail_at || (state->fail_all_after && index > state->fail_at));
  if (fail) state->failed_count++;
  pthread_mutex_unlock(&stax_failing_allocator_mutex_);
  if (fail) return NULL;

  void* result = state->base.fn(state->base.self, ptr, old_size, new_size, alignment);
  if (result == NULL) return NULL;
  pthread_mutex_lock(&stax_failing_allocator_mutex_);
  if (ptr == NULL) {
    state->live_allocations++;
    state->live_bytes += (int64_t)new_size;
  } else {
    state->live_bytes += (int64_t)new_size - (int64_t)old_size;
  }
  pthread_mutex_unlock(&stax_failing_allocator_mutex_);
  return result;
}

void stax_failing_allocator_init(stax_failing_allocator_t* state, stax_allocator_t base,
                                 uint64_t fail_at) {
  memset(state, 0, sizeof(*state));
  state->base = base;
  state->fail_at = fail_at;
}

stax_allocator_t stax_failing_allocator(stax_failing_allocator_t* state) {
  stax_allocator_t allocator = {state, stax_failing_alloc};
  return allocator;
}
