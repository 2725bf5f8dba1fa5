/* stax base layer: status objects, allocators, logging.
 *
 * Conventions used across the whole public API:
 *   - Every function that can fail returns stax_status_t. NULL (STAX_OK) means success and costs
 *     nothing; a non-NULL status is an owned object the caller must consume (return it upward,
 *     or free it with stax_status_free).
 *   - Out-parameters come last, are named out_*, and are set to NULL/0 on entry.
 *   - *_create / *_copy return owned objects; accessors borrow; refcounted objects use
 *     *_retain / *_release.
 *   - Every create takes a stax_allocator_t.
 */
#ifndef STAX_BASE_H_
#define STAX_BASE_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define STAX_MUST_USE __attribute__((warn_unused_result))
#define STAX_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#define STAX_LIKELY(x) __builtin_expect(!!(x), 1)
#define STAX_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define STAX_MUST_USE
#define STAX_PRINTF(fmt_index, first_arg)
#define STAX_LIKELY(x) (x)
#define STAX_UNLIKELY(x) (x)
#endif

/* ---------------------------------------------------------------------------------------- */
/* Status                                                                                   */
/* ---------------------------------------------------------------------------------------- */

typedef enum stax_status_code_e {
#define STAX_STATUS_CODE(name, text) STAX_##name,
#include "stax/status_codes.def"
#undef STAX_STATUS_CODE
  STAX_STATUS_CODE_COUNT
} stax_status_code_t;

/* Opaque; NULL is OK. */
typedef struct stax_status_s* stax_status_t;
#define STAX_OK ((stax_status_t)NULL)

/* Creates an error status with a printf-style message. code must not be STAX_OK_CODE. Never
 * fails: if memory for the message cannot be had, a static out-of-memory status is returned. */
STAX_MUST_USE stax_status_t stax_status_make(stax_status_code_t code, const char* fmt, ...)
    STAX_PRINTF(2, 3);
STAX_MUST_USE stax_status_t stax_status_makev(stax_status_code_t code, const char* fmt,
                                              va_list args);

/* Prepends context to an error as it travels up: "context: inner message". Returns the same
 * (possibly reallocated) status; STAX_OK and an empty format pass through unchanged. */
STAX_MUST_USE stax_status_t stax_status_annotate(stax_status_t status, const char* fmt, ...)
    STAX_PRINTF(2, 3);

stax_status_code_t stax_status_code(stax_status_t status); /* STAX_OK_CODE for NULL */
const char* stax_status_message(stax_status_t status);     /* "" for NULL; borrowed */
const char* stax_status_code_name(stax_status_code_t code);
void stax_status_free(stax_status_t status);
/* Frees the status and returns its code; handy in tests and at API boundaries. */
stax_status_code_t stax_status_consume_code(stax_status_t status);

/* The macros below pass "" when no context is given; the pragmas keep -Wformat-zero-length
 * (in -Wall) quiet about that in user code while the context's format stays checked. */
#if defined(__GNUC__)
#define STAX_NO_EMPTY_FORMAT_WARNING_BEGIN_ \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wformat-zero-length\"")
#define STAX_NO_EMPTY_FORMAT_WARNING_END_ _Pragma("GCC diagnostic pop")
#else
#define STAX_NO_EMPTY_FORMAT_WARNING_BEGIN_
#define STAX_NO_EMPTY_FORMAT_WARNING_END_
#endif

/* Propagates an error, adding optional printf-style context:
 *   STAX_RETURN_IF_ERROR(stax_graph_verify(g));
 *   STAX_RETURN_IF_ERROR(import_node(n), "while importing node '%s'", n->name); */
#define STAX_RETURN_IF_ERROR(expr, ...)                                   \
  do {                                                                    \
    stax_status_t stax_status_tmp_ = (expr);                              \
    STAX_NO_EMPTY_FORMAT_WARNING_BEGIN_                                   \
    if (STAX_UNLIKELY(stax_status_tmp_ != STAX_OK))                       \
      return stax_status_annotate(stax_status_tmp_, "" __VA_ARGS__);     \
    STAX_NO_EMPTY_FORMAT_WARNING_END_                                     \
  } while (0)

/* For functions that own resources: assigns to `status_var` and jumps to `label` on error. */
#define STAX_GOTO_IF_ERROR(status_var, expr, label, ...)                  \
  do {                                                                    \
    (status_var) = (expr);                                                \
    STAX_NO_EMPTY_FORMAT_WARNING_BEGIN_                                   \
    if (STAX_UNLIKELY((status_var) != STAX_OK)) {                         \
      (status_var) = stax_status_annotate((status_var), "" __VA_ARGS__); \
      goto label;                                                         \
    }                                                                     \
    STAX_NO_EMPTY_FORMAT_WARNING_END_                                     \
  } while (0)

/* ---------------------------------------------------------------------------------------- */
/* Allocators                                                                               */
/* ---------------------------------------------------------------------------------------- */

/* One function does everything, Lua-style:
 *   ptr == NULL, new_size > 0  -> allocate new_size bytes aligned to `alignment`
 *   ptr != NULL, new_size > 0  -> resize (contents up to min(old,new) kept, same alignment)
 *   ptr != NULL, new_size == 0 -> free; returns NULL
 * Returns NULL on failure. alignment is a power of two; 0 means the natural malloc alignment. */
typedef void* (*stax_alloc_fn)(void* self, void* ptr, size_t old_size, size_t new_size,
                               size_t alignment);

typedef struct stax_allocator_t {
  void* self;
  stax_alloc_fn fn;
} stax_allocator_t;

/* The process allocator (malloc / aligned_alloc). */
stax_allocator_t stax_allocator_system(void);

/* Status-returning helpers; *out_ptr is NULL on failure. A zero size allocates 1 byte so the
 * result is always a distinct, freeable pointer. */
STAX_MUST_USE stax_status_t stax_allocator_malloc(stax_allocator_t allocator, size_t size,
                                                  void** out_ptr);
STAX_MUST_USE stax_status_t stax_allocator_malloc_aligned(stax_allocator_t allocator,
                                                          size_t size, size_t alignment,
                                                          void** out_ptr);
/* Zero-filled. */
STAX_MUST_USE stax_status_t stax_allocator_calloc(stax_allocator_t allocator, size_t count,
                                                  size_t elem_size, void** out_ptr);
/* On failure *inout_ptr is left untouched (still owned by the caller). */
STAX_MUST_USE stax_status_t stax_allocator_realloc(stax_allocator_t allocator,
                                                   size_t old_size, size_t new_size,
                                                   void** inout_ptr);
void stax_allocator_free(stax_allocator_t allocator, void* ptr, size_t size);
void stax_allocator_free_aligned(stax_allocator_t allocator, void* ptr, size_t size,
                                 size_t alignment);

/* A test allocator that wraps another one, counts allocations and live bytes, and fails the
 * Nth allocation (1-based; 0 = never fail). Used by fault-injection tests to prove every error
 * path returns a status and leaks nothing. Thread-safe counters. */
typedef struct stax_failing_allocator_t {
  stax_allocator_t base;
  uint64_t fail_at;          /* fail the allocation with this 1-based index; 0 = never */
  bool fail_all_after;       /* also fail every allocation after fail_at */
  uint64_t allocation_count; /* allocations attempted so far (successful or failed) */
  uint64_t failed_count;
  int64_t live_allocations;
  int64_t live_bytes;
} stax_failing_allocator_t;

void stax_failing_allocator_init(stax_failing_allocator_t* state, stax_allocator_t base,
                                 uint64_t fail_at);
stax_allocator_t stax_failing_allocator(stax_failing_allocator_t* state);

/* ---------------------------------------------------------------------------------------- */
/* Logging                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* Channels are switched on by STAX_LOG, a comma-separated list (e.g. STAX_LOG=shape,jit, or
 * STAX_LOG=all). Messages go to stderr, prefixed with "[stax:<channel>]". */
typedef enum stax_log_channel_e {
#define STAX_LOG_CHANNEL(name, text) STAX_LOG_##name,
#include "stax/log_channels.def"
#undef STAX_LOG_CHANNEL
  STAX_LOG_CHANNEL_COUNT
} stax_log_channel_t;

bool stax_log_enabled(stax_log_channel_t channel);
void stax_log(stax_log_channel_t channel, const char* fmt, ...) STAX_PRINTF(2, 3);
/* Re-reads STAX_LOG (tests call this after setenv); a NULL spec reads the environment. */
void stax_log_configure(const char* spec);
const char* stax_log_channel_name(stax_log_channel_t channel);

#define STAX_LOG(channel, ...)                                   \
  do {                                                           \
    if (STAX_UNLIKELY(stax_log_enabled(STAX_LOG_##channel)))     \
      stax_log(STAX_LOG_##channel, __VA_ARGS__);                 \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif /* STAX_BASE_H_ */
