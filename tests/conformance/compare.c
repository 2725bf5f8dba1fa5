/* Output comparison for the conformance runner: exact dtype and shape, tolerant float values
 * (NaN == NaN, matching infinities), exact integers and bools. Strided outputs are compared
 * through a contiguous copy. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runner.h"

void conformance_shape_text(int32_t rank, const int64_t* dims, char* buf, size_t size) {
  size_t used = 0;
  used += (size_t)snprintf(buf + used, size - used, "[");
  for (int32_t d = 0; d < rank && used < size; d++) {
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? ", " : "", dims[d]);
  }
  if (used < size) snprintf(buf + used, size - used, "]");
}

static double float_at(stax_dtype_t dtype, const void* data, int64_t i) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: return ((const float*)data)[i];
    case STAX_DTYPE_FLOAT64: return ((const double*)data)[i];
    case STAX_DTYPE_FLOAT16: return stax_f16_to_f32(((const uint16_t*)data)[i]);
    case STAX_DTYPE_BFLOAT16: return stax_bf16_to_f32(((const uint16_t*)data)[i]);
    default: return 0.0;
  }
}

/* Integers as int64 (uint64 values above INT64_MAX compare by bit pattern, which is exact). */
static int64_t int_at(stax_dtype_t dtype, const void* data, int64_t i) {
  switch (dtype) {
    case STAX_DTYPE_INT8: return ((const int8_t*)data)[i];
    case STAX_DTYPE_INT16: return ((const int16_t*)data)[i];
    case STAX_DTYPE_INT32: return ((const int32_t*)data)[i];
    case STAX_DTYPE_INT64: return ((const int64_t*)data)[i];
    case STAX_DTYPE_UINT8: return ((const uint8_t*)data)[i];
    case STAX_DTYPE_UINT16: return ((const uint16_t*)data)[i];
    case STAX_DTYPE_UINT32: return ((const uint32_t*)data)[i];
    case STAX_DTYPE_UINT64: return (int64_t)((const uint64_t*)data)[i];
    case STAX_DTYPE_BOOL: return ((const uint8_t*)data)[i] != 0;
    default: return 0;
  }
}

static bool float_close(double got, double want, double rtol, double atol) {
  if (isnan(want)) return isnan(got);
  if (isnan(got)) return false;
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Writes the multi-index of flat element `index` as "(1, 0, 2)". */
static void index_text(int32_t rank, const int64_t* dims, int64_t index, char* buf,
                       size_t size) {
  int64_t coords[STAX_MAX_RANK] = {0};
  for (int32_t d = rank - 1; d >= 0; d--) {
    coords[d] = dims[d] ? index % dims[d] : 0;
    index = dims[d] ? index / dims[d] : 0;
  }
  size_t used = (size_t)snprintf(buf, size, "(");
  for (int32_t d = 0; d < rank && used < size; d++) {
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? ", " : "", coords[d]);
  }
  if (used < size) snprintf(buf + used, size - used, ")");
}

bool conformance_compare(const stax_tensor_t* got, const stax_tensor_t* want, double rtol,
                         double atol, char* why, size_t why_size) {
  stax_dtype_t dtype = stax_tensor_dtype(want);
  if (stax_tensor_dtype(got) != dtype) {
    snprintf(why, why_size, "dtype %s, expected %s", stax_dtype_name(stax_tensor_dtype(got)),
             stax_dtype_name(dtype));
    return false;
  }
  int32_t rank = stax_tensor_rank(want);
  const int64_t* dims = stax_tensor_dims(want);
  bool same_shape = stax_tensor_rank(got) == rank;
  for (int32_t d = 0; same_shape && d < rank; d++) {
    same_shape = stax_tensor_dims(got)[d] == dims[d];
  }
  if (!same_shape) {
    char got_text[160], want_text[160];
    conformance_shape_text(stax_tensor_rank(got), stax_tensor_dims(got), got_text,
                           sizeof(got_text));
    conformance_shape_text(rank, dims, want_text, sizeof(want_text));
    snprintf(why, why_size, "shape %s, expected %s", got_text, want_text);
    return false;
  }
  int64_t count = stax_tensor_element_count(want);
  if (count == 0) return true;
  /* A contiguous copy of what the VM produced: outputs may be views with any strides. */
  stax_tensor_t* dense = NULL;
  stax_status_t status = stax_tensor_copy(stax_allocator_system(), got, &dense);
  if (status) {
    snprintf(why, why_size, "copying the output failed: %s", stax_status_message(status));
    stax_status_free(status);
    return false;
  }
  const void* g = stax_tensor_data(dense);
  const void* w = stax_tensor_data(want);
  bool is_float = stax_dtype_is_float(dtype);
  int64_t bad = 0, first = -1;
  double worst = 0.0;
  for (int64_t i = 0; i < count; i++) {
    bool ok;
    if (is_float) {
      double a = float_at(dtype, g, i), b = float_at(dtype, w, i);
      ok = float_close(a, b, rtol, atol);
      if (!ok && isfinite(a) && isfinite(b) && fabs(a - b) > worst) worst = fabs(a - b);
    } else {
      ok = int_at(dtype, g, i) == int_at(dtype, w, i);
    }
    if (!ok) {
      if (first < 0) first = i;
      bad++;
    }
  }
  if (bad) {
    char where[160];
    index_text(rank, dims, first, where, sizeof(where));
    if (is_float) {
      snprintf(why, why_size,
               "%" PRId64 " of %" PRId64 " values differ; first at %s: got %.9g, expected %.9g"
               " (rtol %g, atol %g; largest finite difference %.3g)",
               bad, count, where, float_at(dtype, g, first), float_at(dtype, w, first), rtol,
               atol, worst);
    } else {
      snprintf(why, why_size,
               "%" PRId64 " of %" PRId64 " values differ; first at %s: got %" PRId64
               ", expected %" PRId64,
               bad, count, where, int_at(dtype, g, first), int_at(dtype, w, first));
    }
  }
  stax_tensor_release(dense);
  return bad == 0;
}
