/* The timing report of `stax run`: the time of every timed call, with the input shapes it
 * ran with, summarised as percentiles overall and per shape. */
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

/* Rows of the per-shape table at most: a --shape-range stream may see a new shape every call,
 * and the most frequent shapes are the ones whose figures mean something. */
#define STAX_CLI_SHAPE_ROWS 20

static uint64_t hash_text(const char* text) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const unsigned char* p = (const unsigned char*)text; *p; p++) h = (h ^ *p) * 1099511628211ull;
  return h;
}

/* Index of the shape key (added when new) in t->shapes; -1 when out of memory. */
static int32_t shape_index(stax_cli_timings_t* t, const char* key) {
  if (t->shape_count * 2 >= t->table_size) { /* keep the open-addressing table half empty */
    size_t size = t->table_size ? t->table_size * 2 : 64;
    int32_t* table = malloc(size * sizeof(*table));
    if (!table) return -1;
    for (size_t i = 0; i < size; i++) table[i] = -1;
    for (size_t s = 0; s < t->shape_count; s++) {
      size_t slot = hash_text(t->shapes[s].key) & (size - 1);
      while (table[slot] >= 0) slot = (slot + 1) & (size - 1);
      table[slot] = (int32_t)s;
    }
    free(t->table);
    t->table = table;
    t->table_size = size;
  }
  size_t slot = hash_text(key) & (t->table_size - 1);
  while (t->table[slot] >= 0) {
    if (strcmp(t->shapes[t->table[slot]].key, key) == 0) return t->table[slot];
    slot = (slot + 1) & (t->table_size - 1);
  }
  if (t->shape_count == t->shape_capacity) {
    size_t capacity = t->shape_capacity ? t->shape_capacity * 2 : 16;
    void* grown = realloc(t->shapes, capacity * sizeof(*t->shapes));
    if (!grown) return -1;
    t->shapes = grown;
    t->shape_capacity = capacity;
  }
  char* copy = strdup(key);
  if (!copy) return -1;
  t->shapes[t->shape_count].key = copy;
  t->shapes[t->shape_count].calls = 0;
  t->table[slot] = (int32_t)t->shape_count;
  return (int32_t)t->shape_count++;
}

stax_status_t stax_cli_timings_add(stax_cli_timings_t* t, double seconds, const char* shape_key) {
  if (t->count == t->capacity) {
    size_t capacity = t->capacity ? t->capacity * 2 : 1024;
    double* times = realloc(t->times, capacity * sizeof(*times));
    if (times) t->times = times;
    int32_t* shape_of = times ? realloc(t->shape_of, capacity * sizeof(*shape_of)) : NULL;
    if (!times || !shape_of)
      return stax_status_make(STAX_OUT_OF_MEMORY, "no memory for %zu timings", capacity);
    t->shape_of = shape_of;
    t->capacity = capacity;
  }
  int32_t shape = -1;
  if (shape_key) {
    shape = shape_index(t, shape_key);
    if (shape < 0) return stax_status_make(STAX_OUT_OF_MEMORY, "no memory for shape '%s'", shape_key);
    t->shapes[shape].calls++;
  }
  t->times[t->count] = seconds;
  t->shape_of[t->count] = shape;
  t->count++;
  return STAX_OK;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double stax_cli_percentile(const double* sorted, size_t count, double percent) {
  /* Nearest rank: the smallest time that at least `percent` of the calls did not exceed. */
  if (count == 0) return 0;
  double rank = percent / 100.0 * (double)count;
  size_t index = (size_t)rank;
  if ((double)index < rank) index++; /* ceil */
  if (index > 0) index--;
  return sorted[index < count ? index : count - 1];
}

/* Shapes by calls, most first; ties in order of first appearance. */
static const stax_cli_timings_t* g_sort_timings;
static int compare_shapes(const void* a, const void* b) {
  int32_t x = *(const int32_t*)a, y = *(const int32_t*)b;
  size_t cx = g_sort_timings->shapes[x].calls, cy = g_sort_timings->shapes[y].calls;
  if (cx != cy) return cx > cy ? -1 : 1;
  return (x > y) - (x < y);
}

stax_status_t stax_cli_timings_report(const stax_cli_timings_t* t, bool per_shape, FILE* f) {
  size_t n = t->count;
  if (n == 0) return STAX_OK;
  double* sorted = malloc(n * sizeof(double));
  if (!sorted) return stax_status_make(STAX_OUT_OF_MEMORY, "no memory for the timing report");
  memcpy(sorted, t->times, n * sizeof(double));
  /* The first two lines are what bench/s1.py, bench/s6.py and scripts/demo.py read: keep
   * their wording. The first call pays for first-touch work (and, with --jit=sync, the
   * compiles); the last half runs once the background compiler is done (when the run is long
   * enough for it). The median is the upper middle call (sorted[n / 2]) as it always was. */
  size_t half = n / 2, tail = n - half;
  qsort(sorted + half, tail, sizeof(double), compare_doubles);
  double steady = sorted[half + tail / 2];
  memcpy(sorted, t->times, n * sizeof(double));
  qsort(sorted, n, sizeof(double), compare_doubles);
  double total = 0;
  for (size_t i = 0; i < n; i++) total += t->times[i];
  fprintf(f, "%zu calls: median %.3f ms, min %.3f ms, max %.3f ms\n", n, sorted[n / 2] * 1e3,
          sorted[0] * 1e3, sorted[n - 1] * 1e3);
  fprintf(f, "first call %.3f ms; last %zu calls: median %.3f ms\n", t->times[0] * 1e3, tail,
          steady * 1e3);
  fprintf(f, "p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, p99.9 %.3f ms; mean %.3f ms; %.1f calls/s\n",
          stax_cli_percentile(sorted, n, 50) * 1e3, stax_cli_percentile(sorted, n, 90) * 1e3,
          stax_cli_percentile(sorted, n, 99) * 1e3, stax_cli_percentile(sorted, n, 99.9) * 1e3,
          total / (double)n * 1e3, total > 0 ? (double)n / total : 0.0);
  stax_status_t status = STAX_OK;
  if (per_shape && t->shape_count > 0) {
    int32_t* order = malloc(t->shape_count * sizeof(int32_t));
    double* times = malloc(n * sizeof(double));
    if (!order || !times) {
      status = stax_status_make(STAX_OUT_OF_MEMORY, "no memory for the timing report");
      goto done_shapes;
    }
    for (size_t s = 0; s < t->shape_count; s++) order[s] = (int32_t)s;
    g_sort_timings = t;
    qsort(order, t->shape_count, sizeof(int32_t), compare_shapes);
    size_t width = 5;
    size_t rows = t->shape_count < STAX_CLI_SHAPE_ROWS ? t->shape_count : STAX_CLI_SHAPE_ROWS;
    for (size_t r = 0; r < rows; r++)
      if (strlen(t->shapes[order[r]].key) > width) width = strlen(t->shapes[order[r]].key);
    fprintf(f, "%zu shape%s:\n  %-*s %8s %10s %10s\n", t->shape_count,
            t->shape_count == 1 ? "" : "s", (int)width, "shape", "calls", "p50 ms", "p99 ms");
    for (size_t r = 0; r < rows; r++) {
      int32_t s = order[r];
      size_t m = 0;
      for (size_t i = 0; i < n; i++)
        if (t->shape_of[i] == s) times[m++] = t->times[i];
      qsort(times, m, sizeof(double), compare_doubles);
      fprintf(f, "  %-*s %8zu %10.3f %10.3f\n", (int)width, t->shapes[s].key, m,
              stax_cli_percentile(times, m, 50) * 1e3, stax_cli_percentile(times, m, 99) * 1e3);
    }
    if (rows < t->shape_count) {
      size_t rest = 0;
      for (size_t r = rows; r < t->shape_count; r++) rest += t->shapes[order[r]].calls;
      fprintf(f, "  ... %zu more shapes (%zu calls)\n", t->shape_count - rows, rest);
    }
  done_shapes:
    free(order);
    free(times);
  }
  free(sorted);
  return status;
}

void stax_cli_timings_free(stax_cli_timings_t* t) {
  for (size_t s = 0; s < t->shape_count; s++) free(t->shapes[s].key);
  free(t->shapes);
  free(t->table);
  free(t->times);
  free(t->shape_of);
  memset(t, 0, sizeof(*t));
}
