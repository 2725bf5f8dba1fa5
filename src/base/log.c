/* Logging: which channels are on (from STAX_LOG, or stax_log_configure in tests) and the one
 * function that prints a line. Checking a channel must be cheap because STAX_LOG sits on hot
 * paths: it is a single atomic load of a bitmask. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "stax/base.h"

static const char* const stax_log_channel_names_[] = {
#define STAX_LOG_CHANNEL(name, text) text,
#include "stax/log_channels.def"
#undef STAX_LOG_CHANNEL
};

_Static_assert(STAX_LOG_CHANNEL_COUNT < 32, "log channels must fit the 32-bit mask");

/* Bit 31 says the mask has been set, so the fast path needs no separate flag. */
#define STAX_LOG_CONFIGURED_BIT (1u << 31)
#define STAX_LOG_ALL_CHANNELS ((1u << STAX_LOG_CHANNEL_COUNT) - 1u)

static atomic_uint stax_log_mask_ = 0;
static pthread_once_t stax_log_once_ = PTHREAD_ONCE_INIT;

const char* stax_log_channel_name(stax_log_channel_t channel) {
  if ((int)channel < 0 || channel >= STAX_LOG_CHANNEL_COUNT) return "unknown";
  return stax_log_channel_names_[channel];
}

static bool stax_log_is_separator(char c) { return c == ',' || c == ' ' || c == '\t'; }

/* Parses a comma-separated channel list into a mask. Unknown names are reported on one
 * stderr line (rather than failing) because a typo in an environment variable should not stop
 * a program. */
static unsigned stax_log_parse(const char* spec) {
  unsigned mask = 0;
  bool warned = false;
  const char* p = spec;
  while (*p) {
    while (*p && stax_log_is_separator(*p)) p++;
    const char* start = p;
    while (*p && !stax_log_is_separator(*p)) p++;
    size_t length = (size_t)(p - start);
    if (length == 0) continue;
    if (length == 3 && strncasecmp(start, "all", 3) == 0) {
      mask |= STAX_LOG_ALL_CHANNELS;
      continue;
    }
    bool known = false;
    for (int i = 0; i < STAX_LOG_CHANNEL_COUNT; i++) {
      const char* name = stax_log_channel_names_[i];
      if (strlen(name) == length && strncasecmp(start, name, length) == 0) {
        mask |= 1u << i;
        known = true;
        break;
      }
    }
    if (!known) {
      if (!warned) {
        flockfile(stderr);
        fputs("[stax:general] STAX_LOG: ignoring unknown channel(s):", stderr);
        warned = true;
      }
      fprintf(stderr, " '%.*s'", (int)length, start);
    }
  }
  if (warned) {
    fputs(" (known: all", stderr);
    for (int i = 0; i < STAX_LOG_CHANNEL_COUNT; i++) {
      fprintf(stderr, ", %s", stax_log_channel_names_[i]);
    }
    fputs(")\n", stderr);
    funlockfile(stderr);
  }
  return mask;
}

static void stax_log_init_from_environment(void) {
  const char* spec = getenv("STAX_LOG");
  unsigned mask = spec ? stax_log_parse(spec) : 0;
  /* A configure() that raced ahead of this first lazy read wins: never overwrite it. */
  unsigned expected = 0;
  atomic_compare_exchange_strong(&stax_log_mask_, &expected, mask | STAX_LOG_CONFIGURED_BIT);
}

bool stax_log_enabled(stax_log_channel_t channel) {
  unsigned mask = atomic_load_explicit(&stax_log_mask_, memory_order_relaxed);
  if (STAX_UNLIKELY(!(mask & STAX_LOG_CONFIGURED_BIT))) {
    pthread_once(&stax_log_once_, stax_log_init_from_environment);
    mask = atomic_load_explicit(&stax_log_mask_, memory_order_relaxed);
  }
  if ((int)channel < 0 || channel >= STAX_LOG_CHANNEL_COUNT) return false;
  return (mask >> channel) & 1u;
}

void stax_log_configure(const char* spec) {
  if (spec == NULL) spec = getenv("STAX_LOG");
  unsigned mask = spec ? stax_log_parse(spec) : 0;
  atomic_store(&stax_log_mask_, mask | STAX_LOG_CONFIGURED_BIT);
}

void stax_log(stax_log_channel_t channel, const char* fmt, ...) {
  if (!stax_log_enabled(channel)) return;
  va_list args;
  va_start(args, fmt);
  /* Locked so lines from different threads never interleave. */
  flockfile(stderr);
  fprintf(stderr, "[stax:%s] ", stax_log_channel_name(channel));
  vfprintf(stderr, fmt, args);
  fputc('\n', stderr);
  funlockfile(stderr);
  va_end(args);
}
