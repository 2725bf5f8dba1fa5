/* Shape function for Slice (opset 10+: data, starts, ends, axes?, steps?).
 *
 * ONNX semantics per sliced axis of size d, for step > 0:
 *   start = clamp(s < 0 ? s + d : s, 0, d), end = clamp(e < 0 ? e + d : e, 0, d),
 *   length = max(0, ceil((end - start) / step));
 * for step < 0: start is clamped to [0, d - 1], end to [-1, d - 1], and
 *   length = max(0, ceil((start - end) / -step)).
 * With a constant d this is evaluated exactly. With a symbolic d the clamps become min/max
 * dim expressions, simplified by these identities (each exact for every d >= 0):
 *   - an entry s >= 0 needs no clamp on the start side when step > 0: if s > d the end is
 *     <= d < s and max(end - s, 0) is 0 anyway; likewise an end e < 0 paired with a start
 *     s >= 0 may drop its max(., 0) (x[1:-1] of S is max(S - 2, 0));
 *   - s < 0 and e < 0: length max(0, min(e - s, e + d)); s < 0 with an open end: min(-s, d);
 *   - an entry at or past the end of every possible d (e >= the dim's upper bound, or
 *     |e| >= INT32_MAX, the "to the end" markers exporters write) is the open end itself.
 *     Assumption: real dims are below 2^31 - 1, so INT32_MAX acts as "past the end".
 * For step < 0 the start and end are handled shifted by one (start + 1 in [0, d], end + 1 in
 * [0, d]) so that x[::-1] of S is S whatever S's range.
 * Entries that are symbolic (contents such as Shape(y)[1]) are used when their sign is known
 * from their range; otherwise, and when starts/ends/steps are not known at build time, the
 * sliced dim becomes a fresh symbol in [0, d's upper bound]. */
#include <stdio.h>

#include "passes/shape/shape_operands.h"

#define SLICE_OPEN_MARKER INT32_MAX

typedef enum slice_entry_kind_e {
  SLICE_ENTRY_BEFORE_START, /* clamps to the beginning for every d */
  SLICE_ENTRY_PAST_END,     /* clamps to the end for every d */
  SLICE_ENTRY_NONNEGATIVE,
  SLICE_ENTRY_NEGATIVE,
  SLICE_ENTRY_UNKNOWN_SIGN,
} slice_entry_kind_t;

/* Classifies a start/end entry against a dim whose upper bound is `upper`. */
static slice_entry_kind_t classify_entry(stax_shape_infer_t* ic, const stax_dim_t* entry,
                                         int64_t upper) {
  int64_t value = 0;
  if (stax_shape_dim_const(ic, entry, &value)) {
    if (value >= SLICE_OPEN_MARKER || (upper != STAX_DIM_MAX && value >= upper)) {
      return SLICE_ENTRY_PAST_END;
    }
    /* value + d <= -1 for every d: before the beginning even for negative steps. */
    if (value <= -SLICE_OPEN_MARKER || (upper != STAX_DIM_MAX && value < -upper)) {
      return SLICE_ENTRY_BEFORE_START;
    }
    return value >= 0 ? SLICE_ENTRY_NONNEGATIVE : SLICE_ENTRY_NEGATIVE;
  }
  int64_t low = 0, high = 0;
  stax_dim_bounds(ic->shape, entry, &low, &high);
  if (low >= 0) return SLICE_ENTRY_NONNEGATIVE;
  if (high < 0) return SLICE_ENTRY_NEGATIVE;
  return SLICE_ENTRY_UNKNOWN_SIGN;
}

/* |step|, saturated: a step of INT64_MIN has no int64 magnitude, and every span a slice can
 * have (at most INT64_MAX) takes one element at most with either 2^63 or INT64_MAX. */
static int64_t slice_step_magnitude(int64_t step) {
  return step > 0 ? step : step == INT64_MIN ? INT64_MAX : -step;
}

/* ONNX's exact computation for constants; written as 1 + (span - 1) / |step| so a huge step
 * cannot overflow. */
static int64_t slice_length_const(int64_t d, int64_t s, int64_t e, int64_t step) {
  if (s < 0) s += d;
  if (e < 0) e += d;
  if (step > 0) {
    s = s < 0 ? 0 : (s > d ? d : s);
    e = e < 0 ? 0 : (e > d ? d : e);
    return e <= s ? 0 : (e - s - 1) / step + 1;
  }
  s = s < 0 ? 0 : (s > d - 1 ? d - 1 : s);
  e = e < -1 ? -1 : (e > d - 1 ? d - 1 : e);
  return s <= e ? 0 : (s - e - 1) / slice_step_magnitude(step) + 1;
}

/* The sliced length as a dim expression, or NULL with *out_unknown set when an entry's sign
 * is unknown. Construction failures surface through stax_infer_check_dims. */
static const stax_dim_t* slice_length(stax_shape_infer_t* ic, const stax_dim_t* d,
                                      const stax_dim_t* s, const stax_dim_t* e, int64_t step,
                                      bool* out_unknown) {
  *out_unknown = false;
  stax_shape_ctx_t* ctx = ic->shape;
  int64_t d_value = 0, s_value = 0, e_value = 0;
  if (stax_shape_dim_const(ic, d, &d_value) && stax_shape_dim_const(ic, s, &s_value) &&
      stax_shape_dim_const(ic, e, &e_value)) {
    return stax_dim_const(ctx, slice_length_const(d_value, s_value, e_value, step));
  }
  int64_t upper = stax_shape_dim_upper(ic, d);
  slice_entry_kind_t start_kind = classify_entry(ic, s, upper);
  slice_entry_kind_t end_kind = classify_entry(ic, e, upper);
  if (start_kind == SLICE_ENTRY_UNKNOWN_SIGN || end_kind == SLICE_ENTRY_UNKNOWN_SIGN) {
    *out_unknown = true;
    return NULL;
  }
  const stax_dim_t* zero = stax_dim_const(ctx, 0);
  const stax_dim_t* span = NULL; /* end - start before the max(., 0) */
  if (step > 0) {
    if (start_kind == SLICE_ENTRY_PAST_END || end_kind == SLICE_ENTRY_BEFORE_START) return zero;
    if (start_kind == SLICE_ENTRY_NEGATIVE && end_kind == SLICE_ENTRY_NEGATIVE) {
      span = stax_shape_min(ic, stax_dim_sub(ctx, e, s), stax_dim_add(ctx, e, d));
    } else if (start_kind == SLICE_ENTRY_NEGATIVE && end_kind == SLICE_ENTRY_PAST_END) {
      span = stax_shape_min(ic, stax_dim_mul_const(ctx, s, -1), d);
    } else {
      const stax_dim_t* start = start_kind == SLICE_ENTRY_BEFORE_START ? zero
                                : start_kind == SLICE_ENTRY_NONNEGATIVE
                                    ? s
                                    : stax_shape_max(ic, stax_dim_add(ctx, s, d), zero);
      const stax_dim_t* end = NULL;
      if (end_kind == SLICE_ENTRY_PAST_END) {
        end = d;
      } else if (end_kind == SLICE_ENTRY_NONNEGATIVE) {
        end = stax_shape_min(ic, e, d);
      } else if (start_kind != SLICE_ENTRY_NEGATIVE) {
        end = stax_dim_add(ctx, e, d); /* start >= 0: the clamp at 0 cannot matter */
      } else {
        end = stax_shape_max(ic, stax_dim_add(ctx, e, d), zero);
      }
      span = stax_dim_sub(ctx, end, start);
    }
  } else {
    /* Shifted by one: start + 1 and end + 1 both lie in [0, d]. */
    int64_t start_value = 0;
    bool start_is_last =
        stax_shape_dim_const(ic, s, &start_value) && start_value == -1;
    const stax_dim_t* start_shifted = NULL;
    if (start_kind == SLICE_ENTRY_PAST_END || start_is_last) {
      start_shifted = d;
    } else if (start_kind == SLICE_ENTRY_BEFORE_START) {
      start_shifted = stax_shape_min(ic, stax_dim_const(ctx, 1), d);
    } else if (start_kind == SLICE_ENTRY_NONNEGATIVE) {
      start_shifted = stax_shape_min(ic, stax_dim_add_const(ctx, s, 1), d);
    } else {
      const stax_dim_t* shifted = stax_dim_add_const(ctx, stax_dim_add(ctx, s, d), 1);
      start_shifted =
          stax_shape_min(ic, stax_shape_max(ic, shifted, stax_dim_const(ctx, 1)), d);
    }
    const stax_dim_t* end_shifted = NULL;
    if (end_kind == SLICE_ENTRY_BEFORE_START) {
      end_shifted = zero;
    } else if (end_kind == SLICE_ENTRY_PAST_END) {
      return zero;
    } else if (end_kind == SLICE_ENTRY_NONNEGATIVE) {
      end_shifted = stax_shape_min(ic, stax_dim_add_const(ctx, e, 1), d);
    } else {
      end_shifted =
          stax_shape_max(ic, stax_dim_add_const(ctx, stax_dim_add(ctx, e, d), 1), zero);
    }
    span = stax_dim_sub(ctx, start_shifted, end_shifted);
  }
  const stax_dim_t* clamped = stax_shape_max(ic, span, zero);
  int64_t magnitude = slice_step_magnitude(step);
  if (magnitude == 1) return clamped;
  int64_t low = 0, high = 0;
  stax_dim_bounds(ctx, clamped, &low, &high);
  /* A step at least as long as any span takes its first element only. */
  if (high <= magnitude) return stax_shape_min(ic, clamped, stax_dim_const(ctx, 1));
  return stax_dim_ceildiv(ctx, clamped, stax_dim_const(ctx, magnitude));
}

/* Contents of a sliced 1-D integer vector, when everything about axis 0 is constant. */
static stax_status_t slice_content(stax_shape_infer_t* ic, bool sliced, int64_t s, int64_t e,
                                   int64_t step) {
  const stax_value_t* input = stax_infer_input(ic, 0);
  const stax_dim_t* content[STAX_SHAPE_CONTENT_MAX];
  int32_t count = 0;
  if (input->rank != 1 || !stax_dtype_is_integer(input->dtype) ||
      !stax_shape_value_content(ic, input, STAX_SHAPE_CONTENT_MAX, content, &count)) {
    return stax_infer_check_dims(ic);
  }
  if (!sliced) return stax_infer_set_content(ic, 0, count, content);
  const stax_dim_t* result[STAX_SHAPE_CONTENT_MAX];
  int64_t length = slice_length_const(count, s, e, step);
  /* The first index the slice visits, after ONNX's clamping. */
  int64_t first = s < 0 ? s + count : s;
  if (step > 0) {
    first = first < 0 ? 0 : (first > count ? count : first);
  } else {
    first = first < 0 ? 0 : (first > count - 1 ? count - 1 : first);
  }
  for (int64_t k = 0; k < length; k++) result[k] = content[first + k * step];
  return stax_infer_set_content(ic, 0, (int32_t)length, result);
}

stax_status_t stax_shape_slice(stax_shape_infer_t* ic) {
  stax_shape_operand_t data;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &data));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &data, 1, STAX_MAX_RANK));
  stax_shape_vector_t starts, ends, axes, steps;
  STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 1, "starts", &starts));
  STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 2, "ends", &ends));
  bool has_axes = stax_infer_input(ic, 3) != NULL;
  bool has_steps = stax_infer_input(ic, 4) != NULL;
  axes.known = false;
  axes.count = -1;
  steps.known = false;
  steps.count = -1;
  if (has_axes) STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 3, "axes", &axes));
  if (has_steps) STAX_RETURN_IF_ERROR(stax_shape_read_vector(ic, 4, "steps", &steps));

  /* Every known length must agree. */
  int64_t count = -1;
  const stax_shape_vector_t* vectors[4] = {&starts, &ends, &axes, &steps};
  static const char* const names[4] = {"starts", "ends", "axes", "steps"};
  int32_t count_source = -1;
  for (int32_t v = 0; v < 4; v++) {
    if (vectors[v]->count < 0) continue;
    if (count >= 0 && vectors[v]->count != count) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "'%s' has %lld entries but '%s' has %lld", names[v],
                              (long long)vectors[v]->count, names[count_source],
                              (long long)count);
    }
    count = vectors[v]->count;
    count_source = v;
  }

  const stax_dim_t* dims[STAX_MAX_RANK];
  for (int32_t k = 0; k < data.rank; k++) dims[k] = data.dims[k];
  /* Which entry (if any) slices each axis. */
  int32_t entry_of_axis[STAX_MAX_RANK];
  for (int32_t k = 0; k < data.rank; k++) entry_of_axis[k] = -1;
  bool axes_known = true;
  if (has_axes) {
    for (int64_t k = 0; axes.known && k < axes.count; k++) {
      int64_t value = 0;
      if (!stax_shape_vector_const(ic, &axes, k, &value)) {
        axes_known = false;
        break;
      }
      char what[32];
      snprintf(what, sizeof(what), "axes[%d]", (int)k);
      int32_t axis = 0;
      STAX_RETURN_IF_ERROR(stax_shape_normalize_axis(ic, value, data.rank, what, &axis));
      if (entry_of_axis[axis] >= 0) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "axes[%d] = %lld repeats axis %d",
                                (int)k, (long long)value, axis);
      }
      entry_of_axis[axis] = (int32_t)k;
    }
    axes_known = axes_known && axes.known;
  } else if (count >= 0) {
    if (count > data.rank) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "%lld starts/ends for input 0 '%s' of rank %d",
                              (long long)count, data.name, data.rank);
    }
    for (int32_t k = 0; k < count; k++) entry_of_axis[k] = k;
  } else {
    axes_known = false;
  }

  for (int64_t k = 0; steps.known && k < steps.count; k++) {
    int64_t value = 0;
    if (stax_shape_vector_const(ic, &steps, k, &value) && value == 0) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "steps[%d] is 0", (int)k);
    }
  }

  bool content_sliced = false;
  bool content_const = true;
  int64_t content_start = 0, content_end = 0, content_step = 1;
  for (int32_t axis = 0; axis < data.rank; axis++) {
    int32_t entry = entry_of_axis[axis];
    if (axes_known && entry < 0) continue;
    int64_t upper = stax_shape_dim_upper(ic, data.dims[axis]);
    int64_t step = 1;
    bool step_known = !has_steps || stax_shape_vector_const(ic, &steps, entry, &step);
    bool unknown = !axes_known || !starts.known || !ends.known || !step_known;
    if (!unknown) {
      dims[axis] = slice_length(ic, data.dims[axis], starts.entries[entry], ends.entries[entry],
                                step, &unknown);
    }
    if (unknown) {
      STAX_RETURN_IF_ERROR(stax_shape_fresh_dim(ic, 0, axis, 0, upper, &dims[axis]));
      content_const = false;
      continue;
    }
    if (axis == 0) {
      content_sliced = true;
      content_step = step;
      content_const = stax_shape_vector_const(ic, &starts, entry, &content_start) &&
                      stax_shape_vector_const(ic, &ends, entry, &content_end);
    }
  }
  STAX_RETURN_IF_ERROR(stax_infer_check_dims(ic));
  STAX_RETURN_IF_ERROR(stax_infer_set_output(ic, 0, data.dtype, data.rank, dims));
  if (!content_const) return STAX_OK;
  return slice_content(ic, content_sliced, content_start, content_end, content_step);
}
