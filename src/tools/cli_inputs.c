/* Synthetic inputs for `stax run` and `stax source`: the NAME=DIMS and NAME=RANGES texts of
 * --shape and --shape-range, a seeded random generator, and tensors filled with zeros or
 * deterministic random values, so a model runs without any .npy file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

/* Parses one dim ("64") or, with ranges, "LO..HI" at *p. */
static bool parse_dim(const char** p, bool ranges, int64_t* out_lo, int64_t* out_hi, char* why,
                      size_t why_size) {
  const char* start = *p;
  char* end = NULL;
  if (**p < '0' || **p > '9') {
    snprintf(why, why_size, "'%s' does not start with a dim (a number)", start);
    return false;
  }
  long long lo = strtoll(*p, &end, 10);
  long long hi = lo;
  if (ranges && end[0] == '.' && end[1] == '.') {
    const char* next = end + 2;
    if (*next < '0' || *next > '9') {
      snprintf(why, why_size, "'%.*s' needs a number after '..'", (int)(next - start), start);
      return false;
    }
    hi = strtoll(next, &end, 10);
  }
  /* No tensor has a dim of 2^40 (strtoll saturates far above it, at LLONG_MAX). */
  if (lo > ((long long)1 << 40) || hi > ((long long)1 << 40)) {
    snprintf(why, why_size, "dim '%.*s' is too large", (int)(end - start), start);
    return false;
  }
  if (lo > hi) {
    snprintf(why, why_size, "range %lld..%lld is empty (its low end is above its high end)", lo,
             hi);
    return false;
  }
  *out_lo = lo;
  *out_hi = hi;
  *p = end;
  return true;
}

bool stax_cli_parse_shape_spec(const char* spec, bool ranges, stax_cli_shape_spec_t* out,
                               char* why, size_t why_size) {
  memset(out, 0, sizeof(*out));
  out->text = spec;
  const char* eq = strchr(spec, '=');
  if (!eq || eq == spec) {
    snprintf(why, why_size, "expected NAME=%s", ranges ? "LO..HIxLO..HI... (or a fixed dim)"
                                                       : "DIMxDIM...");
    return false;
  }
  out->name = spec;
  out->name_length = (size_t)(eq - spec);
  const char* p = eq + 1;
  while (*p) { /* nothing after '=': a scalar */
    if (out->rank == STAX_MAX_RANK) {
      snprintf(why, why_size, "more than %d dims", STAX_MAX_RANK);
      return false;
    }
    if (!parse_dim(&p, ranges, &out->lo[out->rank], &out->hi[out->rank], why, why_size))
      return false;
    out->rank++;
    if (*p == 'x') {
      p++;
      if (!*p) {
        snprintf(why, why_size, "'%s' ends with 'x'", eq + 1);
        return false;
      }
    } else if (*p) {
      snprintf(why, why_size, "unexpected '%c' after dim %d (dims are separated by 'x')", *p,
               out->rank - 1);
      return false;
    }
  }
  return true;
}

int32_t stax_cli_find_input(const stax_program_t* program, const char* name, size_t length) {
  for (int32_t i = 0; i < stax_program_input_count(program); i++) {
    const char* candidate = stax_program_input_name(program, i);
    if (strlen(candidate) == length && strncmp(candidate, name, length) == 0) return i;
  }
  return -1;
}

void stax_cli_input_signature(const stax_program_t* program, int32_t input, char* buf,
                              size_t size) {
  size_t used = (size_t)snprintf(buf, size, "%s: %s[", stax_program_input_name(program, input),
                                 stax_dtype_name(stax_program_input_dtype(program, input)));
  for (int32_t d = 0; d < stax_program_input_rank(program, input) && used < size; d++) {
    char dim[128];
    stax_program_input_dim_text(program, input, d, dim, sizeof(dim));
    used += (size_t)snprintf(buf + used, size - used, "%s%s", d ? ", " : "", dim);
  }
  if (used < size) snprintf(buf + used, size - used, "]");
}

/* ---- random numbers: splitmix64 (seeding) and xoshiro256** (the stream) ------------------ */

static uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void stax_cli_rng_seed(stax_cli_rng_t* rng, uint64_t seed) {
  /* splitmix64 spreads any seed (0 included) over the four words, as xoshiro's authors
   * advise: xoshiro must not start from all zeros. */
  for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t stax_cli_rng_next(stax_cli_rng_t* rng) {
  uint64_t* s = rng->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

int64_t stax_cli_rng_range(stax_cli_rng_t* rng, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)(hi - lo) + 1; /* no overflow: 0 <= lo <= hi <= 2^40 */
  /* Rejection keeps every value equally likely (a plain modulo favours the low ones). */
  uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t x;
  do x = stax_cli_rng_next(rng);
  while (x >= limit);
  return lo + (int64_t)(x % span);
}

/* Uniform in (0, 1]: 53 random bits, never 0 (Box-Muller takes its logarithm). */
static double rng_unit(stax_cli_rng_t* rng) {
  return ((double)(stax_cli_rng_next(rng) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

/* ---- tensors ------------------------------------------------------------------------------ */

stax_status_t stax_cli_synthetic_tensor(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                        stax_cli_fill_t fill, uint64_t seed,
                                        stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  if (fill == STAX_CLI_FILL_ZEROS)
    return stax_tensor_create_zeros(stax_allocator_system(), dtype, rank, dims, out_tensor);
  stax_tensor_t* tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(stax_allocator_system(), dtype, rank, dims, &tensor));
  stax_cli_rng_t rng;
  stax_cli_rng_seed(&rng, seed);
  int64_t count = stax_tensor_element_count(tensor);
  size_t element = stax_dtype_size(dtype);
  char* data = stax_tensor_data(tensor);
  /* Values are made in chunks of float32 (normal, mean 0, deviation 1) or int64 (0..9: small
   * enough to index any table, as token ids or positions often do) and converted to the
   * input's dtype, so every dtype gets the same values a float32 or int64 input would. */
  enum { CHUNK = 1024 };
  float floats[CHUNK];
  int64_t ints[CHUNK];
  bool is_float = stax_dtype_is_float(dtype);
  for (int64_t done = 0; done < count; done += CHUNK) {
    size_t n = (size_t)(count - done < CHUNK ? count - done : CHUNK);
    if (is_float) {
      for (size_t i = 0; i < n; i += 2) {
        /* Box-Muller: two normal values per pair of uniform ones. */
        double radius = sqrt(-2.0 * log(rng_unit(&rng)));
        double angle = 6.283185307179586 * rng_unit(&rng);
        floats[i] = (float)(radius * cos(angle));
        if (i + 1 < n) floats[i + 1] = (float)(radius * sin(angle));
      }
      stax_convert_elements(STAX_DTYPE_FLOAT32, floats, dtype, data + (size_t)done * element, n);
    } else {
      int64_t top = dtype == STAX_DTYPE_BOOL ? 1 : 9;
      for (size_t i = 0; i < n; i++) ints[i] = stax_cli_rng_range(&rng, 0, top);
      stax_convert_elements(STAX_DTYPE_INT64, ints, dtype, data + (size_t)done * element, n);
    }
  }
  *out_tensor = tensor;
  return STAX_OK;
}
