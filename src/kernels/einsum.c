/* Einsum: parses the equation (explicit or implicit output, "...", repeated labels) and
 * evaluates it as a chain of pairwise contractions, each a batched matmul on the GEMM core.
 *
 *   1. Every input becomes an operand: a strided view with one label per axis. A label
 *      repeated within a term becomes one diagonal axis (the strides add up: no copy), and
 *      "..." dims become extra labels that broadcast numpy-style (size 1 -> stride 0).
 *   2. Operands are contracted left to right. Before each contraction, labels that only one
 *      side has and nothing later needs are summed out (a plain summation loop); the rest
 *      split into batch (both sides, needed later), contracted (both sides, not needed), left
 *      and right labels, which are merged into the B x M x K and B x K x N matrices of one
 *      batched matmul. When an operand's strides do not allow merging, it is first copied
 *      into that order.
 *   3. The last operand has labels the output lacks summed out and is written (permuted and
 *      converted) into the output.
 * Intermediates are float32 for float32/float16/bfloat16 inputs, float64 for float64 and
 * int64 for every integer type (wrapping, so narrowing at the end gives the wrapped result).
 * Labels must agree in size everywhere; only "..." dims broadcast (as the shape function
 * says). */
#include <string.h>

#include "kernels/gemm.h"

#define EINSUM_LETTERS 52 /* A-Z then a-z: ASCII order, which the implicit output uses */
#define EINSUM_LABELS (EINSUM_LETTERS + STAX_MAX_RANK) /* + one per "..." dim */
#define EINSUM_TERM_MAX 64
#define EINSUM_INPUT_MAX 32
#define EINSUM_AXES_MAX 24 /* axes of one operand, intermediates included */
#define EINSUM_ELLIPSIS (-1)

typedef struct einsum_term_t {
  int8_t entries[EINSUM_TERM_MAX]; /* label index, or EINSUM_ELLIPSIS */
  int32_t entry_count;
  int32_t letter_count;
  int32_t ellipsis_at; /* -1 when absent */
} einsum_term_t;

/* A strided view with a label per axis; `owned` is scratch to free with it (or NULL). */
typedef struct einsum_operand_t {
  char* data;
  int32_t rank;
  int8_t labels[EINSUM_AXES_MAX];
  int64_t dims[EINSUM_AXES_MAX];
  int64_t strides[EINSUM_AXES_MAX];
  void* owned;
  size_t owned_bytes;
} einsum_operand_t;

typedef struct einsum_t {
  stax_kernel_call_t* call;
  const char* equation;
  stax_dtype_t dtype; /* of the intermediates */
  size_t element_size;
  int32_t input_count;
  einsum_term_t inputs[EINSUM_INPUT_MAX];
  einsum_term_t output;
  bool explicit_output;
  int32_t ellipsis_rank;
  int64_t label_dims[EINSUM_LABELS]; /* -1: label unused */
  int32_t label_uses[EINSUM_LABELS]; /* occurrences over all input terms */
  int8_t output_labels[STAX_MAX_RANK];
  int32_t output_rank;
  einsum_operand_t operands[EINSUM_INPUT_MAX];
} einsum_t;

static int label_of_letter(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

static char letter_of_label(int label) {
  return (char)(label < 26 ? 'A' + label : 'a' + (label - 26));
}

/* ---- parsing ----------------------------------------------------------------------------- */

static stax_status_t parse_error(const einsum_t* e, size_t position, const char* reason) {
  return stax_kernel_error(e->call, STAX_INVALID_ARGUMENT, "equation \"%s\": %s at position %zu",
                           e->equation, reason, position);
}

static stax_status_t parse_equation(einsum_t* e) {
  int32_t term_count = 1;
  einsum_term_t* term = &e->inputs[0];
  term->ellipsis_at = -1;
  e->output.ellipsis_at = -1;
  const char* text = e->equation;
  for (size_t p = 0; text[p] != '\0';) {
    char c = text[p];
    if (c == ' ' || c == '\t') {
      p++;
    } else if (c == ',') {
      if (e->explicit_output) return parse_error(e, p, "',' after '->'");
      if (term_count == EINSUM_INPUT_MAX) return parse_error(e, p, "too many terms");
      term = &e->inputs[term_count++];
      term->ellipsis_at = -1;
      p++;
    } else if (c == '-' && text[p + 1] == '>') {
      if (e->explicit_output) return parse_error(e, p, "second '->'");
      e->explicit_output = true;
      term = &e->output;
      p += 2;
    } else if (c == '.') {
      if (text[p + 1] != '.' || text[p + 2] != '.')
        return parse_error(e, p, "'.' that is not part of \"...\"");
      if (term->ellipsis_at >= 0) return parse_error(e, p, "second \"...\" in a term");
      if (term->entry_count == EINSUM_TERM_MAX) return parse_error(e, p, "term too long");
      term->ellipsis_at = term->entry_count;
      term->entries[term->entry_count++] = EINSUM_ELLIPSIS;
      p += 3;
    } else if (label_of_letter(c) >= 0) {
      if (term->entry_count == EINSUM_TERM_MAX) return parse_error(e, p, "term too long");
      term->entries[term->entry_count++] = (int8_t)label_of_letter(c);
      term->letter_count++;
      p++;
    } else {
      char reason[40];
      snprintf(reason, sizeof(reason), "unexpected character '%c'", c);
      return parse_error(e, p, reason);
    }
  }
  if (term_count != e->input_count) {
    return stax_kernel_error(e->call, STAX_INVALID_ARGUMENT,
                             "equation \"%s\" has %d input terms but the node has %d inputs",
                             e->equation, term_count, e->input_count);
  }
  return STAX_OK;
}

/* Checks every input against its term, sizes every label and builds the output label list. */
static stax_status_t resolve_labels(einsum_t* e) {
  for (int32_t l = 0; l < EINSUM_LABELS; l++) e->label_dims[l] = -1;
  int32_t where_input[EINSUM_LETTERS], where_axis[EINSUM_LETTERS];
  for (int32_t i = 0; i < e->input_count; i++) {
    const stax_tensor_t* x = e->call->inputs[i];
    const einsum_term_t* term = &e->inputs[i];
    bool has_ellipsis = term->ellipsis_at >= 0;
    if (has_ellipsis ? x->rank < term->letter_count : x->rank != term->letter_count) {
      return stax_kernel_error(e->call, STAX_INVALID_ARGUMENT,
                               "equation \"%s\": term %d has %d labels%s but input %d has rank %d",
                               e->equation, i, term->letter_count,
                               has_ellipsis ? " and \"...\"" : "", i, x->rank);
    }
    int32_t covered = x->rank - term->letter_count;
    if (has_ellipsis && covered > e->ellipsis_rank) e->ellipsis_rank = covered;
  }
  for (int32_t i = 0; i < e->input_count; i++) {
    const stax_tensor_t* x = e->call->inputs[i];
    const einsum_term_t* term = &e->inputs[i];
    int32_t covered = x->rank - term->letter_count;
    for (int32_t entry = 0, axis = 0; entry < term->entry_count; entry++) {
      int label = term->entries[entry];
      if (label == EINSUM_ELLIPSIS) {
        for (int32_t t = 0; t < covered; t++, axis++) {
          int32_t ellipsis_label = EINSUM_LETTERS + e->ellipsis_rank - covered + t;
          int64_t dim = x->dims[axis], *seen = &e->label_dims[ellipsis_label];
          if (*seen < 0 || *seen == 1) {
            *seen = dim;
          } else if (dim != 1 && dim != *seen) {
            return stax_kernel_error(e->call, STAX_SHAPE_MISMATCH,
                                     "equation \"%s\": input %d dim %d (%lld) under \"...\" does "
                                     "not broadcast with %lld",
                                     e->equation, i, axis, (long long)dim, (long long)*seen);
          }
        }
        continue;
      }
      if (e->label_dims[label] < 0) {
        e->label_dims[label] = x->dims[axis];
        where_input[label] = i;
        where_axis[label] = axis;
      } else if (e->label_dims[label] != x->dims[axis]) {
        return stax_kernel_error(e->call, STAX_SHAPE_MISMATCH,
                                 "equation \"%s\": label '%c' is %lld in input %d dim %d but "
                                 "%lld in input %d dim %d",
                                 e->equation, letter_of_label(label),
                                 (long long)e->label_dims[label], where_input[label],
                                 where_axis[label], (long long)x->dims[axis], i, axis);
      }
      e->label_uses[label]++;
      axis++;
    }
  }
  e->output_rank = 0;
  if (!e->explicit_output) {
    for (int32_t t = 0; t < e->ellipsis_rank; t++)
      e->output_labels[e->output_rank++] = (int8_t)(EINSUM_LETTERS + t);
    for (int label = 0; label < EINSUM_LETTERS; label++) {
      if (e->label_uses[label] != 1) continue;
      if (e->output_rank == STAX_MAX_RANK) goto too_big;
      e->output_labels[e->output_rank++] = (int8_t)label;
    }
    return STAX_OK;
  }
  if (e->output.ellipsis_at < 0 && e->ellipsis_rank > 0) {
    return stax_kernel_error(e->call, STAX_INVALID_ARGUMENT,
                             "equation \"%s\": the inputs' \"...\" covers %d dims but the output "
                             "has no \"...\"",
                             e->equation, e->ellipsis_rank);
  }
  bool used[EINSUM_LETTERS] = {false};
  for (int32_t entry = 0; entry < e->output.entry_count; entry++) {
    int label = e->output.entries[entry];
    if (label == EINSUM_ELLIPSIS) {
      for (int32_t t = 0; t < e->ellipsis_rank; t++) {
        if (e->output_rank == STAX_MAX_RANK) goto too_big;
        e->output_labels[e->output_rank++] = (int8_t)(EINSUM_LETTERS + t);
      }
      continue;
    }
    if (e->label_uses[label] == 0) {
      return stax_kernel_error(e->call, STAX_INVALID_ARGUMENT,
                               "equation \"%s\": output label '%c' does not appear in any input",
                               e->equation, letter_of_label(label));
    }
    if (used[label]) {
      return stax_kernel_error(e->call, STAX_INVALID_ARGUMENT,
                               "equation \"%s\": output label '%c' appears twice", e->equation,
                               letter_of_label(label));
    }
    used[label] = true;
    if (e->output_rank == STAX_MAX_RANK) goto too_big;
    e->output_labels[e->output_rank++] = (int8_t)label;
  }
  return STAX_OK;
too_big:
  return stax_kernel_error(e->call, STAX_UNIMPLEMENTED,
                           "equation \"%s\": the result would have rank above %d", e->equation,
                           STAX_MAX_RANK);
}

/* ---- operands ---------------------------------------------------------------------------- */

static void operand_free(einsum_t* e, einsum_operand_t* op) {
  if (op->owned) stax_allocator_free_aligned(e->call->allocator, op->owned, op->owned_bytes, 64);
  memset(op, 0, sizeof(*op));
}

static int32_t operand_axis(const einsum_operand_t* op, int label) {
  for (int32_t a = 0; a < op->rank; a++)
    if (op->labels[a] == label) return a;
  return -1;
}

/* A contiguous operand over `rank` labels, uninitialised. */
static stax_status_t operand_allocate(einsum_t* e, int32_t rank, const int8_t* labels,
                                      einsum_operand_t* out) {
  memset(out, 0, sizeof(*out));
  if (rank > EINSUM_AXES_MAX) {
    return stax_kernel_error(e->call, STAX_UNIMPLEMENTED,
                             "equation \"%s\": an intermediate would have %d axes; at most %d "
                             "are supported",
                             e->equation, rank, EINSUM_AXES_MAX);
  }
  int64_t count = 1;
  for (int32_t a = 0; a < rank; a++) {
    int64_t dim = e->label_dims[labels[a]];
    if (dim != 0 && count > INT64_MAX / 16 / dim) {
      return stax_kernel_error(e->call, STAX_OUT_OF_RANGE,
                               "equation \"%s\": an intermediate would be too large", e->equation);
    }
    count *= dim;
  }
  out->rank = rank;
  int64_t stride = 1;
  for (int32_t a = rank - 1; a >= 0; a--) {
    out->labels[a] = labels[a];
    out->dims[a] = e->label_dims[labels[a]];
    out->strides[a] = stride;
    stride *= out->dims[a];
  }
  out->owned_bytes = (size_t)count * e->element_size;
  if (out->owned_bytes == 0) out->owned_bytes = e->element_size;
  STAX_RETURN_IF_ERROR(
      stax_allocator_malloc_aligned(e->call->allocator, out->owned_bytes, 64, &out->owned),
      "%s node '%s': einsum scratch", stax_op_name(e->call->node->op), e->call->node->name);
  out->data = out->owned;
  return STAX_OK;
}

typedef struct copy_rows_t {
  stax_dtype_t src_dtype, dst_dtype;
  const char* src;
  char* dst;
  int64_t src_stride, dst_stride; /* innermost, in elements */
} copy_rows_t;

static void copy_row(void* opaque, const int64_t* offsets, int64_t count) {
  const copy_rows_t* c = opaque;
  size_t src_size = stax_dtype_size(c->src_dtype), dst_size = stax_dtype_size(c->dst_dtype);
  stax_convert_strided(c->src_dtype, c->src + offsets[0] * (int64_t)src_size,
                       c->src_stride * (int64_t)src_size, c->dst_dtype,
                       c->dst + offsets[1] * (int64_t)dst_size, c->dst_stride * (int64_t)dst_size,
                       count);
}

/* Copies (and converts) an N-d strided view into another. */
static void copy_view(stax_threadpool_t* pool, int32_t rank, const int64_t* dims,
                      stax_dtype_t src_dtype, const void* src, const int64_t* src_strides,
                      stax_dtype_t dst_dtype, void* dst, const int64_t* dst_strides) {
  copy_rows_t c = {src_dtype,
                   dst_dtype,
                   src,
                   dst,
                   rank ? src_strides[rank - 1] : 0,
                   rank ? dst_strides[rank - 1] : 0};
  const int64_t* strides[2] = {src_strides, dst_strides};
  stax_nd_for_each_row_parallel(pool, rank, dims, 2, strides, NULL, 1, copy_row, &c);
}

/* Makes input i an operand: converted to the intermediate dtype when needed, repeated labels
 * folded into diagonals, "..." dims labelled and broadcast. */
static stax_status_t operand_from_input(einsum_t* e, int32_t i, einsum_operand_t* op) {
  const stax_tensor_t* x = e->call->inputs[i];
  const einsum_term_t* term = &e->inputs[i];
  memset(op, 0, sizeof(*op));
  int8_t labels[STAX_MAX_RANK];
  int32_t covered = x->rank - term->letter_count;
  for (int32_t entry = 0, axis = 0; entry < term->entry_count; entry++) {
    if (term->entries[entry] != EINSUM_ELLIPSIS) {
      labels[axis++] = term->entries[entry];
      continue;
    }
    for (int32_t t = 0; t < covered; t++)
      labels[axis++] = (int8_t)(EINSUM_LETTERS + e->ellipsis_rank - covered + t);
  }
  char* data = (char*)stax_buffer_data(x->buffer) + x->offset * (int64_t)stax_dtype_size(x->dtype);
  if (x->dtype == e->dtype) {
    op->data = data;
    op->rank = x->rank;
    for (int32_t a = 0; a < x->rank; a++) {
      op->labels[a] = labels[a];
      op->dims[a] = x->dims[a];
      op->strides[a] = x->strides[a];
    }
  } else {
    /* Labels here are only used for sizes; the ellipsis ones may still be 1 in this input. */
    int64_t saved[STAX_MAX_RANK];
    for (int32_t a = 0; a < x->rank; a++) {
      saved[a] = e->label_dims[labels[a]];
      e->label_dims[labels[a]] = x->dims[a];
    }
    stax_status_t status = operand_allocate(e, x->rank, labels, op);
    for (int32_t a = x->rank - 1; a >= 0; a--) e->label_dims[labels[a]] = saved[a];
    STAX_RETURN_IF_ERROR(status);
    copy_view(e->call->pool, x->rank, x->dims, x->dtype, data, x->strides, e->dtype, op->data,
              op->strides);
  }
  /* Fold repeated labels: the diagonal of axes a and b has stride s_a + s_b. */
  for (int32_t a = 0; a < op->rank; a++) {
    for (int32_t b = a + 1; b < op->rank;) {
      if (op->labels[b] != op->labels[a]) {
        b++;
        continue;
      }
      op->strides[a] += op->strides[b];
      for (int32_t c = b; c + 1 < op->rank; c++) {
        op->labels[c] = op->labels[c + 1];
        op->dims[c] = op->dims[c + 1];
        op->strides[c] = op->strides[c + 1];
      }
      op->rank--;
    }
  }
  for (int32_t a = 0; a < op->rank; a++) {
    int64_t size = e->label_dims[op->labels[a]];
    if (op->dims[a] != size) { /* a "..." dim of 1 against a larger one */
      op->dims[a] = size;
      op->strides[a] = 0;
    }
  }
  return STAX_OK;
}

/* ---- summing labels out ------------------------------------------------------------------ */

typedef struct odometer_t {
  int32_t rank;
  int64_t dims[EINSUM_AXES_MAX];
  int64_t strides[EINSUM_AXES_MAX];
  int64_t index[EINSUM_AXES_MAX];
  int64_t offset;
} odometer_t;

static void odometer_step(odometer_t* o) {
  for (int32_t d = o->rank - 1; d >= 0; d--) {
    o->offset += o->strides[d];
    if (++o->index[d] < o->dims[d]) return;
    o->offset -= o->index[d] * o->strides[d];
    o->index[d] = 0;
  }
}

/* Replaces *op by the sum over its labels with keep[label] false. */
static stax_status_t operand_reduce(einsum_t* e, einsum_operand_t* op, const bool* keep) {
  int8_t kept[EINSUM_AXES_MAX];
  int32_t kept_count = 0;
  odometer_t outer = {0}, inner = {0};
  int64_t outer_count = 1, inner_count = 1;
  for (int32_t a = 0; a < op->rank; a++) {
    odometer_t* o = keep[op->labels[a]] ? &outer : &inner;
    if (keep[op->labels[a]]) {
      kept[kept_count++] = op->labels[a];
      outer_count *= op->dims[a];
    } else {
      inner_count *= op->dims[a];
    }
    o->dims[o->rank] = op->dims[a];
    o->strides[o->rank++] = op->strides[a];
  }
  if (inner.rank == 0) return STAX_OK;
  einsum_operand_t result;
  STAX_RETURN_IF_ERROR(operand_allocate(e, kept_count, kept, &result));
  for (int64_t o = 0; o < outer_count; o++, odometer_step(&outer)) {
    memset(inner.index, 0, sizeof(inner.index));
    inner.offset = outer.offset;
    switch (e->dtype) {
      case STAX_DTYPE_FLOAT32: {
        double sum = 0; /* float32 sums accumulate in double: one rounding at the end */
        for (int64_t r = 0; r < inner_count; r++, odometer_step(&inner))
          sum += ((const float*)op->data)[inner.offset];
        ((float*)result.data)[o] = (float)sum;
        break;
      }
      case STAX_DTYPE_FLOAT64: {
        double sum = 0;
        for (int64_t r = 0; r < inner_count; r++, odometer_step(&inner))
          sum += ((const double*)op->data)[inner.offset];
        ((double*)result.data)[o] = sum;
        break;
      }
      default: {
        uint64_t sum = 0;
        for (int64_t r = 0; r < inner_count; r++, odometer_step(&inner))
          sum += (uint64_t)((const int64_t*)op->data)[inner.offset];
        ((int64_t*)result.data)[o] = (int64_t)sum;
        break;
      }
    }
  }
  operand_free(e, op);
  *op = result;
  return STAX_OK;
}

/* ---- pairwise contraction ---------------------------------------------------------------- */

/* Merges `count` axes (in this order) into one dim and stride when the view allows it. */
static bool merge_axes(const einsum_operand_t* op, const int32_t* axes, int32_t count,
                       int64_t* out_dim, int64_t* out_stride) {
  int64_t dim = 1, stride = 0;
  bool first = true;
  for (int32_t k = count - 1; k >= 0; k--) {
    int64_t d = op->dims[axes[k]], s = op->strides[axes[k]];
    if (d == 1) continue;
    if (first) {
      stride = s;
      first = false;
    } else if (s != stride * dim) {
      return false;
    }
    dim *= d;
  }
  if (dim == 0) stride = 0;
  *out_dim = dim;
  *out_stride = stride;
  return true;
}

/* Rewrites *op as a contiguous copy with its axes in `order`. */
static stax_status_t operand_permute_copy(einsum_t* e, einsum_operand_t* op, const int32_t* order) {
  int8_t labels[EINSUM_AXES_MAX];
  int64_t dims[EINSUM_AXES_MAX], strides[EINSUM_AXES_MAX];
  for (int32_t k = 0; k < op->rank; k++) {
    labels[k] = op->labels[order[k]];
    dims[k] = op->dims[order[k]];
    strides[k] = op->strides[order[k]];
  }
  einsum_operand_t copy;
  STAX_RETURN_IF_ERROR(operand_allocate(e, op->rank, labels, &copy));
  copy_view(e->call->pool, op->rank, dims, e->dtype, op->data, strides, e->dtype, copy.data,
            copy.strides);
  operand_free(e, op);
  *op = copy;
  return STAX_OK;
}

/* Axes of `op` whose label satisfies the class, in op's order. */
typedef enum label_class_e { CLASS_BATCH, CLASS_LEFT_OR_RIGHT, CLASS_CONTRACTED } label_class_t;

static label_class_t classify(int label, const einsum_operand_t* other, const bool* needed) {
  if (operand_axis(other, label) < 0) return CLASS_LEFT_OR_RIGHT;
  return needed[label] ? CLASS_BATCH : CLASS_CONTRACTED;
}

/* *x = contraction of *x and *y (y is freed); `needed` marks labels used after this step. */
static stax_status_t contract_pair(einsum_t* e, einsum_operand_t* x, einsum_operand_t* y,
                                   const bool* needed) {
  bool keep[EINSUM_LABELS];
  for (int32_t l = 0; l < EINSUM_LABELS; l++) keep[l] = needed[l] || operand_axis(y, l) >= 0;
  STAX_RETURN_IF_ERROR(operand_reduce(e, x, keep));
  for (int32_t l = 0; l < EINSUM_LABELS; l++) keep[l] = needed[l] || operand_axis(x, l) >= 0;
  STAX_RETURN_IF_ERROR(operand_reduce(e, y, keep));

  /* Axis lists: x as [batch, left, contracted], y as [batch, contracted, right]; batch and
   * contracted labels keep x's order on both sides. */
  int32_t x_batch[EINSUM_AXES_MAX], x_left[EINSUM_AXES_MAX], x_con[EINSUM_AXES_MAX];
  int32_t y_batch[EINSUM_AXES_MAX], y_con[EINSUM_AXES_MAX], y_right[EINSUM_AXES_MAX];
  int32_t batch_count = 0, left_count = 0, con_count = 0, right_count = 0;
  for (int32_t a = 0; a < x->rank; a++) {
    switch (classify(x->labels[a], y, needed)) {
      case CLASS_BATCH:
        y_batch[batch_count] = operand_axis(y, x->labels[a]);
        x_batch[batch_count++] = a;
        break;
      case CLASS_CONTRACTED:
        y_con[con_count] = operand_axis(y, x->labels[a]);
        x_con[con_count++] = a;
        break;
      case CLASS_LEFT_OR_RIGHT:
        x_left[left_count++] = a;
        break;
    }
  }
  for (int32_t a = 0; a < y->rank; a++)
    if (operand_axis(x, y->labels[a]) < 0) y_right[right_count++] = a;

  int64_t m = 1, n = 1, k = 1, x_row = 0, x_col = 0, y_row = 0, y_col = 0;
  bool x_ok =
      merge_axes(x, x_left, left_count, &m, &x_row) && merge_axes(x, x_con, con_count, &k, &x_col);
  bool y_ok = merge_axes(y, y_con, con_count, &k, &y_row) &&
              merge_axes(y, y_right, right_count, &n, &y_col);
  int64_t x_batch_dim = 1, x_batch_stride = 0, y_batch_dim = 1, y_batch_stride = 0;
  bool batch_merges = merge_axes(x, x_batch, batch_count, &x_batch_dim, &x_batch_stride) &&
                      merge_axes(y, y_batch, batch_count, &y_batch_dim, &y_batch_stride);
  if (!batch_merges && batch_count > STAX_MAX_RANK) x_ok = y_ok = false;
  if (!x_ok) {
    int32_t order[EINSUM_AXES_MAX], count = 0;
    for (int32_t t = 0; t < batch_count; t++) order[count++] = x_batch[t];
    for (int32_t t = 0; t < left_count; t++) order[count++] = x_left[t];
    for (int32_t t = 0; t < con_count; t++) order[count++] = x_con[t];
    STAX_RETURN_IF_ERROR(operand_permute_copy(e, x, order));
    for (int32_t t = 0; t < count; t++) {
      if (t < batch_count)
        x_batch[t] = t;
      else if (t < batch_count + left_count)
        x_left[t - batch_count] = t;
      else
        x_con[t - batch_count - left_count] = t;
    }
    merge_axes(x, x_left, left_count, &m, &x_row);
    merge_axes(x, x_con, con_count, &k, &x_col);
  }
  if (!y_ok) {
    int32_t order[EINSUM_AXES_MAX], count = 0;
    for (int32_t t = 0; t < batch_count; t++) order[count++] = y_batch[t];
    for (int32_t t = 0; t < con_count; t++) order[count++] = y_con[t];
    for (int32_t t = 0; t < right_count; t++) order[count++] = y_right[t];
    STAX_RETURN_IF_ERROR(operand_permute_copy(e, y, order));
    for (int32_t t = 0; t < count; t++) {
      if (t < batch_count)
        y_batch[t] = t;
      else if (t < batch_count + con_count)
        y_con[t - batch_count] = t;
      else
        y_right[t - batch_count - con_count] = t;
    }
    merge_axes(y, y_con, con_count, &k, &y_row);
    merge_axes(y, y_right, right_count, &n, &y_col);
  }
  batch_merges = merge_axes(x, x_batch, batch_count, &x_batch_dim, &x_batch_stride) &&
                 merge_axes(y, y_batch, batch_count, &y_batch_dim, &y_batch_stride);

  /* The result: [batch, left, right], contiguous. */
  int8_t labels[EINSUM_AXES_MAX];
  int32_t rank = 0;
  for (int32_t t = 0; t < batch_count; t++) labels[rank++] = x->labels[x_batch[t]];
  for (int32_t t = 0; t < left_count; t++) labels[rank++] = x->labels[x_left[t]];
  for (int32_t t = 0; t < right_count; t++) labels[rank++] = y->labels[y_right[t]];
  einsum_operand_t result;
  STAX_RETURN_IF_ERROR(operand_allocate(e, rank, labels, &result));

  stax_matrix_batch_t a = {e->dtype, x->data, 0};
  stax_matrix_batch_t b = {e->dtype, y->data, 0};
  stax_matrix_batch_t c = {e->dtype, result.data, 0};
  a.rows = m, a.cols = k, a.row_stride = x_row, a.col_stride = x_col;
  b.rows = k, b.cols = n, b.row_stride = y_row, b.col_stride = y_col;
  c.rows = m, c.cols = n, c.row_stride = n, c.col_stride = 1;
  if (batch_merges) {
    int32_t r = batch_count > 0 ? 1 : 0;
    a.batch_rank = b.batch_rank = c.batch_rank = r;
    a.batch_dims[0] = b.batch_dims[0] = c.batch_dims[0] = x_batch_dim;
    a.batch_strides[0] = x_batch_stride;
    b.batch_strides[0] = y_batch_stride;
    c.batch_strides[0] = m * n;
  } else {
    a.batch_rank = b.batch_rank = c.batch_rank = batch_count;
    for (int32_t t = 0; t < batch_count; t++) {
      a.batch_dims[t] = b.batch_dims[t] = c.batch_dims[t] = x->dims[x_batch[t]];
      a.batch_strides[t] = x->strides[x_batch[t]];
      b.batch_strides[t] = y->strides[y_batch[t]];
      c.batch_strides[t] = result.strides[t];
    }
  }
  stax_status_t status = stax_matmul_batched(e->call, &a, &b, &c);
  if (status) {
    operand_free(e, &result);
    return status;
  }
  operand_free(e, x);
  operand_free(e, y);
  *x = result;
  return STAX_OK;
}

/* ---- the kernel -------------------------------------------------------------------------- */

static stax_dtype_t intermediate_dtype(stax_dtype_t dtype) {
  if (dtype == STAX_DTYPE_FLOAT64) return STAX_DTYPE_FLOAT64;
  if (stax_dtype_is_float(dtype)) return STAX_DTYPE_FLOAT32;
  return STAX_DTYPE_INT64;
}

static stax_status_t einsum_run(einsum_t* e) {
  stax_kernel_call_t* call = e->call;
  STAX_RETURN_IF_ERROR(parse_equation(e));
  STAX_RETURN_IF_ERROR(resolve_labels(e));
  int64_t out_dims[STAX_MAX_RANK];
  for (int32_t d = 0; d < e->output_rank; d++) out_dims[d] = e->label_dims[e->output_labels[d]];
  stax_tensor_t* y = NULL;
  STAX_RETURN_IF_ERROR(
      stax_kernel_output(call, 0, call->inputs[0]->dtype, e->output_rank, out_dims, &y));
  if (stax_tensor_element_count(y) == 0) return STAX_OK;

  bool needed[EINSUM_LABELS] = {false};
  for (int32_t d = 0; d < e->output_rank; d++) needed[e->output_labels[d]] = true;
  for (int32_t i = 0; i < e->input_count; i++)
    STAX_RETURN_IF_ERROR(operand_from_input(e, i, &e->operands[i]));
  for (int32_t i = 1; i < e->input_count; i++) {
    bool later[EINSUM_LABELS];
    memcpy(later, needed, sizeof(later));
    for (int32_t j = i + 1; j < e->input_count; j++)
      for (int32_t a = 0; a < e->operands[j].rank; a++) later[e->operands[j].labels[a]] = true;
    STAX_RETURN_IF_ERROR(contract_pair(e, &e->operands[0], &e->operands[i], later));
  }
  einsum_operand_t* last = &e->operands[0];
  STAX_RETURN_IF_ERROR(operand_reduce(e, last, needed));
  int64_t src_strides[STAX_MAX_RANK];
  for (int32_t d = 0; d < e->output_rank; d++)
    src_strides[d] = last->strides[operand_axis(last, e->output_labels[d])];
  copy_view(call->pool, e->output_rank, out_dims, e->dtype, last->data, src_strides, y->dtype,
            stax_tensor_data(y), y->strides);
  return STAX_OK;
}

stax_status_t stax_kernel_Einsum(stax_kernel_call_t* call) {
  if (call->input_count < 1)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "needs at least one input");
  if (call->input_count > EINSUM_INPUT_MAX) {
    return stax_kernel_error(call, STAX_UNIMPLEMENTED, "%d inputs; at most %d are supported",
                             call->input_count, EINSUM_INPUT_MAX);
  }
  for (int32_t i = 0; i < call->input_count; i++) {
    const stax_tensor_t* x = call->inputs[i];
    if (!x) return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing", i);
    if (x->dtype != call->inputs[0]->dtype) {
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 0 is %s but input %d is %s",
                               stax_dtype_name(call->inputs[0]->dtype), i,
                               stax_dtype_name(x->dtype));
    }
  }
  stax_dtype_t dtype = call->inputs[0]->dtype;
  if (!stax_dtype_is_float(dtype) && !stax_dtype_is_integer(dtype)) {
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "inputs must be numbers, got %s",
                             stax_dtype_name(dtype));
  }
  const char* equation = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "equation", NULL, &equation));
  if (!equation)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'equation' is required");

  stax_status_t status = STAX_OK;
  einsum_t* e = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(call->allocator, 1, sizeof(*e), (void**)&e),
                       "%s node '%s'", stax_op_name(call->node->op), call->node->name);
  e->call = call;
  e->equation = equation;
  e->dtype = intermediate_dtype(dtype);
  e->element_size = stax_dtype_size(e->dtype);
  e->input_count = call->input_count;
  status = einsum_run(e);
  for (int32_t i = 0; i < e->input_count; i++) operand_free(e, &e->operands[i]);
  stax_allocator_free(call->allocator, e, sizeof(*e));
  if (status) stax_kernel_release_outputs(call);
  return status;
}
