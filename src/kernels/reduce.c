/* Generic kernels for the Reduce* family: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum and ReduceLogSumExp.
 *
 * Semantics (ONNX, every opset): axes come from the 'axes' attribute (older opsets) or from
 * the optional input 1 (ReduceSum from opset 13, the others from 18); negative axes count from
 * the end; no axes reduces everything unless noop_with_empty_axes is set, in which case every
 * element is reduced on its own (so ReduceL1 gives |x|, ReduceSumSquare x*x, as the ONNX
 * reference does). A reduction over an empty set gives the identity: 0 for the sums, 1 for
 * Prod, -inf / +inf for Max / Min on floats and the dtype's lowest / highest value on integers,
 * NaN for the float Mean (0/0, as numpy), -inf for LogSum and LogSumExp.
 *
 * Accuracy: floating-point inputs (float16, bfloat16, float32, float64) are accumulated in
 * double with four independent lanes per row, so float32 sums are exact to float32 precision
 * for any practical length, and float64 sums carry the usual O(n * eps) bound (lanes and
 * per-thread partial sums reduce it in practice). Integer inputs are accumulated exactly in
 * 64-bit wrapping arithmetic, which gives the same bits as the dtype's own wrapping arithmetic
 * after the final narrowing; Mean divides the exact sum and truncates toward zero, L2 and
 * LogSum take sqrt / log of the exact sum in double. LogSumExp subtracts the per-output
 * maximum first (a max pass, then a sum-of-exp pass) so it never overflows.
 *
 * Speed: the input's dims are reordered by stride (largest outer) and mergeable neighbours are
 * fused, so the innermost loop walks memory in order. That loop either folds a run into one
 * accumulator (reducing the inner axis) or adds a run into a run of accumulators (keeping it);
 * both are tight loops over a converted double / int64 chunk. Large tensors are split over a
 * kept dim across the thread pool, or, when almost nothing is kept (a full reduction), over a
 * reduced dim into per-chunk partial results combined at the end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"

typedef enum reduce_kind_e {
  REDUCE_SUM,
  REDUCE_MEAN,
  REDUCE_MAX,
  REDUCE_MIN,
  REDUCE_PROD,
  REDUCE_L1,
  REDUCE_L2,
  REDUCE_SUM_SQUARE,
  REDUCE_LOG_SUM,
  REDUCE_LOG_SUM_EXP,
} reduce_kind_t;

/* Applied to each element before it is combined. */
typedef enum reduce_transform_e {
  TRANSFORM_NONE,
  TRANSFORM_ABS,
  TRANSFORM_SQUARE,
  TRANSFORM_EXP_SHIFTED, /* exp(x - shift[output]) for LogSumExp's second pass */
} reduce_transform_t;

/* How transformed elements fold into an accumulator. */
typedef enum reduce_combine_e {
  COMBINE_ADD,
  COMBINE_MUL,
  COMBINE_MAX,
  COMBINE_MIN,
} reduce_combine_t;

/* Elements are converted in chunks of this many into a stack buffer. */
#define REDUCE_CHUNK 256
/* Below this many input elements everything runs on the calling thread. */
#define REDUCE_PARALLEL_MIN_ELEMENTS 65536
/* Work (input elements) one parallel task should at least cover. */
#define REDUCE_GRAIN_ELEMENTS 32768

/* The input's index space after dropping size-1 dims, sorting by stride and merging. */
typedef struct reduce_nest_t {
  int32_t rank; /* >= 1 */
  int64_t dims[STAX_MAX_RANK];
  int64_t in_strides[STAX_MAX_RANK];  /* input elements */
  int64_t out_strides[STAX_MAX_RANK]; /* accumulator elements; 0 on reduced dims */
} reduce_nest_t;

/* One pass over the input into an accumulator array. */
typedef struct reduce_pass_t {
  const reduce_nest_t* nest;
  const char* input; /* first element */
  stax_dtype_t input_dtype;
  size_t input_size;
  bool integer;        /* accumulate in uint64 bits (wrapping) rather than double */
  bool is_signed;      /* integer accumulators compare as int64 */
  reduce_transform_t transform;
  reduce_combine_t combine;
  const double* shift; /* TRANSFORM_EXP_SHIFTED: per-output maxima */
  int32_t split_dim;   /* the dim parallel tasks divide */
} reduce_pass_t;

/* ---- element operations ------------------------------------------------------------------ */

static inline double float_combine(reduce_combine_t combine, double a, double b) {
  switch (combine) {
    case COMBINE_ADD: return a + b;
    case COMBINE_MUL: return a * b;
    /* NaN wins in both directions, as numpy and ONNX Runtime propagate it. */
    case COMBINE_MAX: return (b > a || b != b) ? b : a;
    case COMBINE_MIN: return (b < a || b != b) ? b : a;
  }
  return a;
}

static inline uint64_t integer_combine(reduce_combine_t combine, bool is_signed, uint64_t a,
                                       uint64_t b) {
  switch (combine) {
    case COMBINE_ADD: return a + b;
    case COMBINE_MUL: return a * b;
    case COMBINE_MAX: return (is_signed ? (int64_t)b > (int64_t)a : b > a) ? b : a;
    case COMBINE_MIN: return (is_signed ? (int64_t)b < (int64_t)a : b < a) ? b : a;
  }
  return a;
}

/* A value finite for the shift: -inf (all elements -inf, or none) and +inf / NaN maxima must
 * not turn exp(x - shift) into NaN; shifting by 0 keeps -inf -> 0, +inf -> inf, NaN -> NaN. */
static inline double finite_shift(double shift) { return isfinite(shift) ? shift : 0.0; }

static void float_transform(const reduce_pass_t* p, double* values, int64_t count,
                            int64_t out_offset, int64_t out_stride) {
  switch (p->transform) {
    case TRANSFORM_NONE: return;
    case TRANSFORM_ABS:
      for (int64_t k = 0; k < count; k++) values[k] = fabs(values[k]);
      return;
    case TRANSFORM_SQUARE:
      for (int64_t k = 0; k < count; k++) values[k] *= values[k];
      return;
    case TRANSFORM_EXP_SHIFTED:
      for (int64_t k = 0; k < count; k++)
        values[k] = exp(values[k] - finite_shift(p->shift[out_offset + k * out_stride]));
      return;
  }
}

static void integer_transform(const reduce_pass_t* p, uint64_t* values, int64_t count) {
  switch (p->transform) {
    case TRANSFORM_NONE:
    case TRANSFORM_EXP_SHIFTED: /* never used with integer accumulators */
      return;
    case TRANSFORM_ABS:
      if (p->is_signed)
        for (int64_t k = 0; k < count; k++)
          values[k] = (int64_t)values[k] < 0 ? (uint64_t)0 - values[k] : values[k];
      return;
    case TRANSFORM_SQUARE:
      for (int64_t k = 0; k < count; k++) values[k] *= values[k];
      return;
  }
}

/* Folds `count` values into `accumulator` with four independent lanes (shorter dependency
 * chains, and pairwise-like rounding for sums). */
static double float_fold(reduce_combine_t combine, double accumulator, const double* values,
                         int64_t count) {
  if (count < 8) {
    for (int64_t k = 0; k < count; k++) accumulator = float_combine(combine, accumulator, values[k]);
    return accumulator;
  }
  double lane[4] = {values[0], values[1], values[2], values[3]};
  int64_t k = 4;
  switch (combine) {
    case COMBINE_ADD:
      for (; k + 4 <= count; k += 4) {
        lane[0] += values[k];
        lane[1] += values[k + 1];
        lane[2] += values[k + 2];
        lane[3] += values[k + 3];
      }
      break;
    case COMBINE_MUL:
      for (; k + 4 <= count; k += 4) {
        lane[0] *= values[k];
        lane[1] *= values[k + 1];
        lane[2] *= values[k + 2];
        lane[3] *= values[k + 3];
      }
      break;
    case COMBINE_MAX:
    case COMBINE_MIN:
      for (; k + 4 <= count; k += 4)
        for (int j = 0; j < 4; j++) lane[j] = float_combine(combine, lane[j], values[k + j]);
      break;
  }
  for (; k < count; k++) lane[0] = float_combine(combine, lane[0], values[k]);
  double folded = float_combine(combine, float_combine(combine, lane[0], lane[1]),
                                float_combine(combine, lane[2], lane[3]));
  return float_combine(combine, accumulator, folded);
}

static uint64_t integer_fold(reduce_combine_t combine, bool is_signed, uint64_t accumulator,
                             const uint64_t* values, int64_t count) {
  switch (combine) {
    case COMBINE_ADD:
      for (int64_t k = 0; k < count; k++) accumulator += values[k];
      return accumulator;
    case COMBINE_MUL:
      for (int64_t k = 0; k < count; k++) accumulator *= values[k];
      return accumulator;
    default:
      for (int64_t k = 0; k < count; k++)
        accumulator = integer_combine(combine, is_signed, accumulator, values[k]);
      return accumulator;
  }
}

/* ---- the loop nest ------------------------------------------------------------------------ */

/* The innermost run: `length` elements from input offset `in_offset` into accumulators at
 * `out_offset` (all the same one when the inner dim is reduced). */
static void reduce_inner(const reduce_pass_t* p, void* accumulators, int64_t in_offset,
                         int64_t out_offset, int64_t length) {
  const reduce_nest_t* n = p->nest;
  int64_t in_stride = n->in_strides[n->rank - 1];
  int64_t out_stride = n->out_strides[n->rank - 1];
  int64_t in_stride_bytes = in_stride * (int64_t)p->input_size;
  for (int64_t start = 0; start < length; start += REDUCE_CHUNK) {
    int64_t count = length - start < REDUCE_CHUNK ? length - start : REDUCE_CHUNK;
    const char* source = p->input + (in_offset + start * in_stride) * (int64_t)p->input_size;
    int64_t out_at = out_offset + start * out_stride;
    if (!p->integer) {
      double values[REDUCE_CHUNK];
      double* acc = accumulators;
      stax_kernel_load_f64_row(p->input_dtype, source, in_stride, count, values);
      float_transform(p, values, count, out_at, out_stride);
      if (out_stride == 0) {
        acc[out_at] = float_fold(p->combine, acc[out_at], values, count);
      } else {
        for (int64_t k = 0; k < count; k++) {
          double* a = &acc[out_at + k * out_stride];
          *a = float_combine(p->combine, *a, values[k]);
        }
      }
    } else {
      uint64_t values[REDUCE_CHUNK];
      uint64_t* acc = accumulators;
      /* Integer-to-integer conversion wraps, so unsigned 64-bit values keep their bits. */
      stax_convert_strided(p->input_dtype, source, in_stride_bytes,
                           p->is_signed ? STAX_DTYPE_INT64 : STAX_DTYPE_UINT64, values,
                           sizeof(uint64_t), count);
      integer_transform(p, values, count);
      if (out_stride == 0) {
        acc[out_at] = integer_fold(p->combine, p->is_signed, acc[out_at], values, count);
      } else {
        for (int64_t k = 0; k < count; k++) {
          uint64_t* a = &acc[out_at + k * out_stride];
          *a = integer_combine(p->combine, p->is_signed, *a, values[k]);
        }
      }
    }
  }
}

/* Runs the whole nest with dim p->split_dim restricted to [begin, end). */
static void reduce_run_range(const reduce_pass_t* p, void* accumulators, int64_t begin,
                             int64_t end) {
  const reduce_nest_t* n = p->nest;
  int32_t inner = n->rank - 1;
  int64_t low[STAX_MAX_RANK], high[STAX_MAX_RANK], index[STAX_MAX_RANK];
  for (int32_t d = 0; d < n->rank; d++) {
    low[d] = 0;
    high[d] = n->dims[d];
  }
  low[p->split_dim] = begin;
  high[p->split_dim] = end;
  for (int32_t d = 0; d < n->rank; d++)
    if (low[d] >= high[d]) return;
  int64_t in_offset = low[inner] * n->in_strides[inner];
  int64_t out_offset = low[inner] * n->out_strides[inner];
  for (int32_t d = 0; d < inner; d++) {
    index[d] = low[d];
    in_offset += low[d] * n->in_strides[d];
    out_offset += low[d] * n->out_strides[d];
  }
  int64_t length = high[inner] - low[inner];
  for (;;) {
    reduce_inner(p, accumulators, in_offset, out_offset, length);
    int32_t d = inner - 1;
    for (; d >= 0; d--) {
      index[d]++;
      in_offset += n->in_strides[d];
      out_offset += n->out_strides[d];
      if (index[d] < high[d]) break;
      in_offset -= (index[d] - low[d]) * n->in_strides[d];
      out_offset -= (index[d] - low[d]) * n->out_strides[d];
      index[d] = low[d];
    }
    if (d < 0) return;
  }
}

typedef struct reduce_task_t {
  const reduce_pass_t* pass;
  void* accumulators;
  /* Partial mode: task k reduces slice k of the split dim into partials[k]. */
  int64_t part_count;
  int64_t out_count;
  void* partials;
} reduce_task_t;

static void reduce_task_kept(void* opaque, int64_t begin, int64_t end) {
  reduce_task_t* task = opaque;
  reduce_run_range(task->pass, task->accumulators, begin, end);
}

static void reduce_task_partial(void* opaque, int64_t begin, int64_t end) {
  reduce_task_t* task = opaque;
  int64_t extent = task->pass->nest->dims[task->pass->split_dim];
  for (int64_t part = begin; part < end; part++) {
    char* partial = (char*)task->partials + part * task->out_count * 8;
    reduce_run_range(task->pass, partial, extent * part / task->part_count,
                     extent * (part + 1) / task->part_count);
  }
}

static void fill_identity(const reduce_pass_t* p, void* accumulators, int64_t count,
                          double float_identity, uint64_t integer_identity) {
  if (p->integer) {
    uint64_t* acc = accumulators;
    for (int64_t k = 0; k < count; k++) acc[k] = integer_identity;
  } else {
    double* acc = accumulators;
    for (int64_t k = 0; k < count; k++) acc[k] = float_identity;
  }
}

/* Runs one pass into `accumulators` (already holding the identity), in parallel when large.
 * Never fails: when the partial results cannot be allocated it runs on this thread. */
static void reduce_execute(stax_kernel_call_t* call, reduce_pass_t* p, void* accumulators,
                           int64_t out_count, double float_identity,
                           uint64_t integer_identity) {
  const reduce_nest_t* n = p->nest;
  int64_t total = 1;
  for (int32_t d = 0; d < n->rank; d++) total *= n->dims[d];
  int32_t threads = call->pool ? stax_threadpool_thread_count(call->pool) : 1;
  p->split_dim = 0;
  if (threads <= 1 || total < REDUCE_PARALLEL_MIN_ELEMENTS) {
    reduce_run_range(p, accumulators, 0, n->dims[0]);
    return;
  }
  int32_t kept_dim = -1, reduced_dim = -1;
  for (int32_t d = 0; d < n->rank; d++) {
    if (n->out_strides[d] != 0) {
      if (kept_dim < 0 || n->dims[d] > n->dims[kept_dim]) kept_dim = d;
    } else if (reduced_dim < 0 || n->dims[d] > n->dims[reduced_dim]) {
      reduced_dim = d;
    }
  }
  reduce_task_t task = {.pass = p, .accumulators = accumulators, .out_count = out_count};
  bool few_kept = kept_dim < 0 || n->dims[kept_dim] < 2 * (int64_t)threads;
  if (kept_dim >= 0 && (!few_kept || reduced_dim < 0 || out_count > REDUCE_GRAIN_ELEMENTS)) {
    /* Tasks own disjoint slices of a kept dim, hence disjoint accumulators. */
    p->split_dim = kept_dim;
    int64_t per_index = total / n->dims[kept_dim];
    int64_t grain = per_index >= REDUCE_GRAIN_ELEMENTS ? 1 : REDUCE_GRAIN_ELEMENTS / per_index;
    stax_parallel_for(call->pool, n->dims[kept_dim], grain, reduce_task_kept, &task);
    return;
  }
  /* A (nearly) full reduction: partial results per slice of the largest reduced dim, combined
   * in slice order so the result does not depend on scheduling. */
  p->split_dim = reduced_dim;
  int64_t parts = 4 * (int64_t)threads;
  if (parts > n->dims[reduced_dim]) parts = n->dims[reduced_dim];
  if (parts > total / REDUCE_GRAIN_ELEMENTS) parts = total / REDUCE_GRAIN_ELEMENTS;
  size_t bytes = (size_t)(parts * out_count * 8);
  void* partials = NULL;
  stax_status_t scratch = parts >= 2 ? stax_allocator_malloc(call->allocator, bytes, &partials)
                                     : STAX_OK;
  if (parts < 2 || scratch != STAX_OK) {
    /* Without scratch for partials one thread still gives the right answer. */
    stax_status_free(scratch);
    reduce_run_range(p, accumulators, 0, n->dims[reduced_dim]);
    return;
  }
  fill_identity(p, partials, parts * out_count, float_identity, integer_identity);
  task.part_count = parts;
  task.partials = partials;
  stax_parallel_for(call->pool, parts, 1, reduce_task_partial, &task);
  for (int64_t part = 0; part < parts; part++) {
    if (p->integer) {
      uint64_t* acc = accumulators;
      const uint64_t* partial = (const uint64_t*)partials + part * out_count;
      for (int64_t k = 0; k < out_count; k++)
        acc[k] = integer_combine(p->combine, p->is_signed, acc[k], partial[k]);
    } else {
      double* acc = accumulators;
      const double* partial = (const double*)partials + part * out_count;
      for (int64_t k = 0; k < out_count; k++) acc[k] = float_combine(p->combine, acc[k], partial[k]);
    }
  }
  stax_allocator_free(call->allocator, partials, bytes);
}

/* Builds the nest: size-1 dims dropped, outer dims first by decreasing |input stride|, and
 * neighbours merged when both strides continue each other. */
static void reduce_build_nest(const stax_tensor_t* x, const bool* reduced,
                              const int64_t* out_strides_by_axis, reduce_nest_t* nest) {
  int32_t order[STAX_MAX_RANK];
  int32_t count = 0;
  for (int32_t d = 0; d < x->rank; d++)
    if (x->dims[d] != 1) order[count++] = d;
  /* Insertion sort, stable, by decreasing |stride|: ties keep the logical order. */
  for (int32_t i = 1; i < count; i++) {
    int32_t axis = order[i];
    int64_t key = llabs((long long)x->strides[axis]);
    int32_t j = i - 1;
    while (j >= 0 && llabs((long long)x->strides[order[j]]) < key) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = axis;
  }
  nest->rank = 0;
  for (int32_t i = 0; i < count; i++) {
    int32_t axis = order[i];
    int64_t in_stride = x->strides[axis];
    int64_t out_stride = reduced[axis] ? 0 : out_strides_by_axis[axis];
    if (nest->rank > 0) {
      int32_t last = nest->rank - 1;
      if (nest->in_strides[last] == in_stride * x->dims[axis] &&
          nest->out_strides[last] == out_stride * x->dims[axis]) {
        nest->dims[last] *= x->dims[axis];
        nest->in_strides[last] = in_stride;
        nest->out_strides[last] = out_stride;
        continue;
      }
    }
    nest->dims[nest->rank] = x->dims[axis];
    nest->in_strides[nest->rank] = in_stride;
    nest->out_strides[nest->rank] = out_stride;
    nest->rank++;
  }
  if (nest->rank == 0) { /* a single element */
    nest->rank = 1;
    nest->dims[0] = 1;
    nest->in_strides[0] = 0;
    nest->out_strides[0] = 0;
  }
}

/* ---- the kernel ---------------------------------------------------------------------------- */

static bool reduce_dtype_allowed(reduce_kind_t kind, stax_dtype_t dtype) {
  if (stax_dtype_is_float(dtype) || stax_dtype_is_integer(dtype)) return true;
  /* ReduceMax / ReduceMin take bool from opset 20 (logical or / and). */
  return dtype == STAX_DTYPE_BOOL && (kind == REDUCE_MAX || kind == REDUCE_MIN);
}

/* Lowest and highest value of an integer dtype (as the uint64 bits the accumulators use). */
static void integer_limits(stax_dtype_t dtype, uint64_t* out_lowest, uint64_t* out_highest) {
  int bits = (int)stax_dtype_size(dtype) * 8;
  if (dtype == STAX_DTYPE_BOOL) {
    *out_lowest = 0;
    *out_highest = 1;
  } else if (stax_dtype_is_signed_int(dtype)) {
    int64_t highest = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
    *out_highest = (uint64_t)highest;
    *out_lowest = (uint64_t)(-highest - 1);
  } else {
    *out_lowest = 0;
    *out_highest = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
  }
}

/* Reads the axes (input 1 or the attribute) into `reduced`; *out_empty when none were given. */
static stax_status_t reduce_read_axes(stax_kernel_call_t* call, int32_t rank, bool* reduced,
                                      bool* out_empty) {
  int64_t values[2 * STAX_MAX_RANK];
  int64_t count = 0;
  int32_t attribute_count = -1;
  const int64_t* attribute_values = NULL;
  STAX_RETURN_IF_ERROR(
      stax_node_attr_ints(call->node, "axes", &attribute_count, &attribute_values));
  const stax_tensor_t* axes_input = stax_kernel_input(call, 1);
  if (axes_input && attribute_count >= 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "axes given both as an attribute and as input 1");
  if (axes_input) {
    STAX_RETURN_IF_ERROR(stax_kernel_read_ints(call, axes_input, "input 1 (axes)",
                                               2 * STAX_MAX_RANK, values, &count));
  } else if (attribute_count > 0) {
    if (attribute_count > 2 * STAX_MAX_RANK)
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "%d axes given for rank %d",
                               attribute_count, rank);
    memcpy(values, attribute_values, sizeof(int64_t) * (size_t)attribute_count);
    count = attribute_count;
  }
  *out_empty = count == 0;
  for (int64_t k = 0; k < count; k++) {
    int64_t axis = values[k];
    if (axis < -(int64_t)rank || axis >= rank)
      return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                               "axes[%lld] = %lld is out of range for input 0 of rank %d",
                               (long long)k, (long long)axis, rank);
    if (axis < 0) axis += rank;
    if (reduced[axis])
      return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "axes[%lld] = %lld repeats axis %lld",
                               (long long)k, (long long)values[k], (long long)axis);
    reduced[axis] = true;
  }
  return STAX_OK;
}

static stax_status_t reduce_kernel(stax_kernel_call_t* call, reduce_kind_t kind) {
  const stax_tensor_t* x = stax_kernel_input(call, 0);
  if (!x) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input 0 is missing");
  if (!reduce_dtype_allowed(kind, x->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 0 has unsupported dtype %s",
                             stax_dtype_name(x->dtype));
  int64_t keepdims = 1, noop_with_empty_axes = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "keepdims", 1, &keepdims));
  STAX_RETURN_IF_ERROR(
      stax_node_attr_int(call->node, "noop_with_empty_axes", 0, &noop_with_empty_axes));
  bool reduced[STAX_MAX_RANK] = {false};
  bool empty_axes = false;
  STAX_RETURN_IF_ERROR(reduce_read_axes(call, x->rank, reduced, &empty_axes));
  if (empty_axes && !noop_with_empty_axes)
    for (int32_t d = 0; d < x->rank; d++) reduced[d] = true;

  /* Output dims, accumulator strides of the kept axes (row-major over kept axes), and the
   * number of elements each output reduces. */
  int64_t out_dims[STAX_MAX_RANK];
  int32_t out_rank = 0;
  int64_t out_strides_by_axis[STAX_MAX_RANK];
  int64_t out_count = 1, reduce_count = 1;
  for (int32_t d = x->rank - 1; d >= 0; d--) {
    if (reduced[d]) {
      out_strides_by_axis[d] = 0;
      reduce_count *= x->dims[d];
    } else {
      out_strides_by_axis[d] = out_count;
      out_count *= x->dims[d];
    }
  }
  for (int32_t d = 0; d < x->rank; d++) {
    if (!reduced[d]) out_dims[out_rank++] = x->dims[d];
    else if (keepdims) out_dims[out_rank++] = 1;
  }
  if (out_count == 0) {
    stax_tensor_t* empty = NULL;
    return stax_kernel_output(call, 0, x->dtype, out_rank, out_dims, &empty);
  }

  reduce_pass_t pass = {
      .input = (const char*)stax_buffer_data(x->buffer) +
               x->offset * (int64_t)stax_dtype_size(x->dtype),
      .input_dtype = x->dtype,
      .input_size = stax_dtype_size(x->dtype),
      .integer = !stax_dtype_is_float(x->dtype) && kind != REDUCE_LOG_SUM_EXP,
      .is_signed = stax_dtype_is_signed_int(x->dtype),
      .transform = TRANSFORM_NONE,
      .combine = COMBINE_ADD,
  };
  switch (kind) {
    case REDUCE_MAX: pass.combine = COMBINE_MAX; break;
    case REDUCE_MIN: pass.combine = COMBINE_MIN; break;
    case REDUCE_PROD: pass.combine = COMBINE_MUL; break;
    case REDUCE_L1: pass.transform = TRANSFORM_ABS; break;
    case REDUCE_L2:
    case REDUCE_SUM_SQUARE: pass.transform = TRANSFORM_SQUARE; break;
    case REDUCE_LOG_SUM_EXP: pass.combine = COMBINE_MAX; break; /* first pass: the maxima */
    default: break;
  }
  double float_identity = 0.0;
  uint64_t integer_identity = 0, lowest = 0, highest = 0;
  if (pass.integer) integer_limits(x->dtype, &lowest, &highest);
  if (pass.combine == COMBINE_MUL) {
    float_identity = 1.0;
    integer_identity = 1;
  } else if (pass.combine == COMBINE_MAX) {
    float_identity = -INFINITY;
    integer_identity = lowest;
  } else if (pass.combine == COMBINE_MIN) {
    float_identity = INFINITY;
    integer_identity = highest;
  }

  /* Scratch first, so nothing after the output is created can fail. LogSumExp keeps the
   * maxima and the sums of exponentials side by side. */
  bool two_pass = kind == REDUCE_LOG_SUM_EXP;
  size_t bytes = (size_t)out_count * 8 * (two_pass ? 2 : 1);
  void* accumulators = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(call->allocator, bytes, &accumulators),
                       "%s node '%s': accumulators", stax_op_name(call->node->op),
                       call->node->name);
  stax_tensor_t* y = NULL;
  stax_status_t status = stax_kernel_output(call, 0, x->dtype, out_rank, out_dims, &y);
  if (status == STAX_OK && !stax_tensor_is_contiguous(y))
    status = stax_kernel_error(call, STAX_INTERNAL, "preallocated output 0 is not contiguous");
  if (status != STAX_OK) {
    stax_allocator_free(call->allocator, accumulators, bytes);
    return status;
  }

  reduce_nest_t nest;
  reduce_build_nest(x, reduced, out_strides_by_axis, &nest);
  pass.nest = &nest;
  bool input_empty = reduce_count == 0;
  fill_identity(&pass, accumulators, out_count, float_identity, integer_identity);
  if (!input_empty)
    reduce_execute(call, &pass, accumulators, out_count, float_identity, integer_identity);
  double* maxima = accumulators;
  double* sums = maxima + (two_pass ? out_count : 0);
  if (two_pass) {
    pass.transform = TRANSFORM_EXP_SHIFTED;
    pass.combine = COMBINE_ADD;
    pass.shift = maxima;
    for (int64_t k = 0; k < out_count; k++) sums[k] = 0.0;
    if (!input_empty) reduce_execute(call, &pass, sums, out_count, 0.0, 0);
  }

  /* Finish each output in place, then narrow into the output dtype. */
  void* out_data =
      (char*)stax_buffer_data(y->buffer) + y->offset * (int64_t)stax_dtype_size(y->dtype);
  if (!pass.integer) {
    double* acc = accumulators;
    for (int64_t k = 0; k < out_count; k++) {
      switch (kind) {
        case REDUCE_MEAN: acc[k] /= (double)reduce_count; break;
        case REDUCE_L2: acc[k] = sqrt(acc[k]); break;
        case REDUCE_LOG_SUM: acc[k] = log(acc[k]); break;
        case REDUCE_LOG_SUM_EXP: acc[k] = finite_shift(maxima[k]) + log(sums[k]); break;
        default: break;
      }
    }
    stax_convert_elements(STAX_DTYPE_FLOAT64, acc, y->dtype, out_data, (size_t)out_count);
  } else if (kind == REDUCE_L2 || kind == REDUCE_LOG_SUM) {
    /* Each double result overwrites the integer it came from (memcpy: no aliasing). */
    uint64_t* acc = accumulators;
    for (int64_t k = 0; k < out_count; k++) {
      double sum = pass.is_signed ? (double)(int64_t)acc[k] : (double)acc[k];
      double result = kind == REDUCE_L2 ? sqrt(sum) : log(sum);
      memcpy(&acc[k], &result, sizeof(result));
    }
    stax_convert_elements(STAX_DTYPE_FLOAT64, acc, y->dtype, out_data, (size_t)out_count);
  } else {
    uint64_t* acc = accumulators;
    if (kind == REDUCE_MEAN) {
      for (int64_t k = 0; k < out_count; k++) {
        if (reduce_count == 0) acc[k] = 0;
        else if (pass.is_signed) acc[k] = (uint64_t)((int64_t)acc[k] / reduce_count);
        else acc[k] /= (uint64_t)reduce_count;
      }
    }
    stax_convert_elements(pass.is_signed ? STAX_DTYPE_INT64 : STAX_DTYPE_UINT64, acc, y->dtype,
                          out_data, (size_t)out_count);
  }
  stax_allocator_free(call->allocator, accumulators, bytes);
  return STAX_OK;
}

stax_status_t stax_kernel_ReduceSum(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_SUM);
}
stax_status_t stax_kernel_ReduceMean(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_MEAN);
}
stax_status_t stax_kernel_ReduceMax(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_MAX);
}
stax_status_t stax_kernel_ReduceMin(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_MIN);
}
stax_status_t stax_kernel_ReduceProd(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_PROD);
}
stax_status_t stax_kernel_ReduceL1(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_L1);
}
stax_status_t stax_kernel_ReduceL2(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_L2);
}
stax_status_t stax_kernel_ReduceSumSquare(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_SUM_SQUARE);
}
stax_status_t stax_kernel_ReduceLogSum(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_LOG_SUM);
}
stax_status_t stax_kernel_ReduceLogSumExp(stax_kernel_call_t* call) {
  return reduce_kernel(call, REDUCE_LOG_SUM_EXP);
}
