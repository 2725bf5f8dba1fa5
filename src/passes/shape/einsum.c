/* Shape function for Einsum: parses the equation ("ij,jk->ik", "...ij,...jk", "bij->bji",
 * implicit outputs), checks every term against its input's rank, unifies the dims that share
 * a label and broadcasts the dims under "..." numpy-style.
 *
 * Dims with the same label must be equal (they are unified); unlike the dims under an
 * ellipsis they do not broadcast, so a label of size 1 against size 4 is an error. */
#include <stdio.h>
#include <string.h>

#include "passes/shape/shape_util.h"

#define EINSUM_LABEL_COUNT 52   /* A-Z then a-z, which is also their ASCII order */
#define EINSUM_TERM_MAX 64      /* labels in one term; more cannot match any supported rank */
#define EINSUM_ELLIPSIS (-1)

typedef struct einsum_term_t {
  int8_t entries[EINSUM_TERM_MAX]; /* label indices, EINSUM_ELLIPSIS for "..." */
  int32_t entry_count;
  int32_t label_count;             /* entries that are labels */
  int32_t ellipsis_at;             /* entry index of "...", -1 when absent */
} einsum_term_t;

typedef struct einsum_equation_t {
  einsum_term_t inputs[STAX_SHAPE_CONTENT_MAX];
  int32_t input_count;
  einsum_term_t output;
  bool explicit_output;
} einsum_equation_t;

static int label_index(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

static char label_char(int index) {
  return (char)(index < 26 ? 'A' + index : 'a' + (index - 26));
}

static stax_status_t parse_error(const stax_shape_infer_t* ic, const char* equation,
                                 size_t position, const char* reason) {
  return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                          "equation \"%s\": %s at position %zu", equation, reason, position);
}

static stax_status_t parse_equation(const stax_shape_infer_t* ic, const char* equation,
                                    einsum_equation_t* out) {
  memset(out, 0, sizeof(*out));
  out->input_count = 1;
  out->inputs[0].ellipsis_at = -1;
  out->output.ellipsis_at = -1;
  einsum_term_t* term = &out->inputs[0];
  for (size_t p = 0; equation[p] != '\0';) {
    char c = equation[p];
    if (c == ' ' || c == '\t') {
      p++;
    } else if (c == ',') {
      if (out->explicit_output) return parse_error(ic, equation, p, "',' after '->'");
      if (out->input_count == STAX_SHAPE_CONTENT_MAX) {
        return parse_error(ic, equation, p, "too many terms");
      }
      term = &out->inputs[out->input_count++];
      term->ellipsis_at = -1;
      p++;
    } else if (c == '-' && equation[p + 1] == '>') {
      if (out->explicit_output) return parse_error(ic, equation, p, "second '->'");
      out->explicit_output = true;
      term = &out->output;
      p += 2;
    } else if (c == '.') {
      if (equation[p + 1] != '.' || equation[p + 2] != '.') {
        return parse_error(ic, equation, p, "'.' that is not part of \"...\"");
      }
      if (term->ellipsis_at >= 0) return parse_error(ic, equation, p, "second \"...\" in a term");
      if (term->entry_count == EINSUM_TERM_MAX) {
        return parse_error(ic, equation, p, "term too long");
      }
      term->ellipsis_at = term->entry_count;
      term->entries[term->entry_count++] = EINSUM_ELLIPSIS;
      p += 3;
    } else if (label_index(c) >= 0) {
      if (term->entry_count == EINSUM_TERM_MAX) {
        return parse_error(ic, equation, p, "term too long");
      }
      term->entries[term->entry_count++] = (int8_t)label_index(c);
      term->label_count++;
      p++;
    } else {
      char reason[48];
      snprintf(reason, sizeof(reason), "unexpected character '%c'", c);
      return parse_error(ic, equation, p, reason);
    }
  }
  return STAX_OK;
}

/* Where each label's dim was first seen. */
typedef struct einsum_label_t {
  int32_t occurrences;
  int32_t input;
  int32_t axis;
  const stax_dim_t* dim;
} einsum_label_t;

/* Validates the output term before any dims are unified: every output label appears in an
 * input and only once, "..." is kept when the inputs' "..." covers dims, and the result rank
 * fits. The inputs' ranks have been checked against their terms. */
static stax_status_t check_output_term(const stax_shape_infer_t* ic, const char* equation,
                                       const einsum_equation_t* parsed,
                                       const stax_shape_operand_t* operands) {
  int32_t occurrences[EINSUM_LABEL_COUNT] = {0};
  int32_t ellipsis_rank = 0;
  for (int32_t i = 0; i < parsed->input_count; i++) {
    const einsum_term_t* term = &parsed->inputs[i];
    for (int32_t e = 0; e < term->entry_count; e++) {
      if (term->entries[e] != EINSUM_ELLIPSIS) occurrences[term->entries[e]]++;
    }
    int32_t covered = operands[i].rank - term->label_count;
    if (term->ellipsis_at >= 0 && covered > ellipsis_rank) ellipsis_rank = covered;
  }
  int32_t rank = 0;
  if (!parsed->explicit_output) {
    rank = ellipsis_rank;
    for (int label = 0; label < EINSUM_LABEL_COUNT; label++) rank += occurrences[label] == 1;
  } else {
    const einsum_term_t* output = &parsed->output;
    if (output->ellipsis_at < 0 && ellipsis_rank > 0) {
      return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                              "equation \"%s\": the inputs' \"...\" covers %d dims but the "
                              "output has no \"...\"",
                              equation, ellipsis_rank);
    }
    bool used[EINSUM_LABEL_COUNT] = {false};
    for (int32_t e = 0; e < output->entry_count; e++) {
      int label = output->entries[e];
      if (label == EINSUM_ELLIPSIS) {
        rank += ellipsis_rank;
        continue;
      }
      if (occurrences[label] == 0) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                                "equation \"%s\": output label '%c' does not appear in any "
                                "input",
                                equation, label_char(label));
      }
      if (used[label]) {
        return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                                "equation \"%s\": output label '%c' appears twice", equation,
                                label_char(label));
      }
      used[label] = true;
      rank++;
    }
  }
  if (rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED,
                            "equation \"%s\": the result would have rank %d; at most %d is "
                            "supported",
                            equation, rank, STAX_MAX_RANK);
  }
  return STAX_OK;
}

/* Records where each label is first seen and requires its other occurrences to equal it;
 * collects each input's "..." dims as an operand for broadcasting. With `unify` false only
 * constant conflicts are reported, so a node rejected for its last label has not already
 * recorded equalities for its first ones (the union-find cannot undo them). */
static stax_status_t match_labels(stax_shape_infer_t* ic, const einsum_equation_t* parsed,
                                  const stax_shape_operand_t* operands, bool unify,
                                  einsum_label_t* labels, stax_shape_operand_t* ellipses,
                                  int32_t* out_ellipsis_count) {
  memset(labels, 0, sizeof(labels[0]) * EINSUM_LABEL_COUNT);
  *out_ellipsis_count = 0;
  for (int32_t i = 0; i < parsed->input_count; i++) {
    const stax_shape_operand_t* x = &operands[i];
    const einsum_term_t* term = &parsed->inputs[i];
    int32_t ellipsis_rank = x->rank - term->label_count;
    for (int32_t e = 0, axis = 0; e < term->entry_count; e++) {
      int label = term->entries[e];
      if (label == EINSUM_ELLIPSIS) {
        stax_shape_operand_t* slice = &ellipses[(*out_ellipsis_count)++];
        *slice = *x;
        slice->dims = x->dims + axis;
        slice->rank = ellipsis_rank;
        slice->axis_offset = axis;
        axis += ellipsis_rank;
        continue;
      }
      einsum_label_t* seen = &labels[label];
      int64_t seen_value = 0, value = 0;
      bool seen_const = seen->occurrences > 0 && stax_shape_dim_const(ic, seen->dim, &seen_value);
      bool this_const = stax_shape_dim_const(ic, x->dims[axis], &value);
      if (seen->occurrences == 0 || (!unify && !seen_const && this_const)) {
        *seen = (einsum_label_t){seen->occurrences, i, axis, x->dims[axis]};
      } else if (unify || (seen_const && this_const && seen_value != value)) {
        char what[32];
        snprintf(what, sizeof(what), "label '%c'", label_char(label));
        STAX_RETURN_IF_ERROR(stax_shape_require_equal_dims(ic, what, &operands[seen->input],
                                                           seen->axis, x, axis));
      }
      seen->occurrences++;
      axis++;
    }
  }
  return STAX_OK;
}

stax_status_t stax_shape_einsum(stax_shape_infer_t* ic) {
  const char* equation = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(ic->node, "equation", NULL, &equation));
  if (!equation) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT, "attribute 'equation' is required");
  }
  einsum_equation_t parsed;
  STAX_RETURN_IF_ERROR(parse_equation(ic, equation, &parsed));
  int32_t input_count = ic->node->input_count;
  if (parsed.input_count != input_count) {
    return stax_infer_error(ic, STAX_INVALID_ARGUMENT,
                            "equation \"%s\" has %d input terms but the node has %d inputs",
                            equation, parsed.input_count, input_count);
  }

  stax_shape_operand_t operands[STAX_SHAPE_CONTENT_MAX];
  for (int32_t i = 0; i < input_count; i++) {
    stax_shape_operand_t* x = &operands[i];
    const einsum_term_t* term = &parsed.inputs[i];
    STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, i, x));
    if (i == 0) {
      STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, x, STAX_DTYPES_NUMERIC, "a number"));
    } else {
      STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &operands[0], x));
    }
    bool has_ellipsis = term->ellipsis_at >= 0;
    if (x->rank < term->label_count || (!has_ellipsis && x->rank != term->label_count)) {
      return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                              "term %d of equation \"%s\" has %d labels%s but input %d '%s' has "
                              "rank %d",
                              i, equation, term->label_count, has_ellipsis ? " and \"...\"" : "",
                              i, x->name, x->rank);
    }
  }
  STAX_RETURN_IF_ERROR(check_output_term(ic, equation, &parsed, operands));
  einsum_label_t labels[EINSUM_LABEL_COUNT];
  stax_shape_operand_t ellipses[STAX_SHAPE_CONTENT_MAX];
  int32_t ellipsis_count = 0;
  STAX_RETURN_IF_ERROR(match_labels(ic, &parsed, operands, false, labels, ellipses,
                                    &ellipsis_count));
  STAX_RETURN_IF_ERROR(match_labels(ic, &parsed, operands, true, labels, ellipses,
                                    &ellipsis_count));
  const stax_dim_t* ellipsis_dims[STAX_MAX_RANK];
  int32_t ellipsis_rank = 0;
  STAX_RETURN_IF_ERROR(
      stax_shape_broadcast(ic, ellipsis_count, ellipses, &ellipsis_rank, ellipsis_dims));

  /* check_output_term has bounded the rank by STAX_MAX_RANK. */
  const stax_dim_t* dims[STAX_MAX_RANK];
  int32_t rank = 0;
  if (!parsed.explicit_output) {
    /* Implicit output: the broadcast "..." dims, then every label used once, sorted. */
    for (int32_t k = 0; k < ellipsis_rank; k++) dims[rank++] = ellipsis_dims[k];
    for (int label = 0; label < EINSUM_LABEL_COUNT; label++) {
      if (labels[label].occurrences != 1) continue;
      dims[rank++] = stax_dim_resolve(ic->shape, labels[label].dim);
    }
  } else {
    for (int32_t e = 0; e < parsed.output.entry_count; e++) {
      int label = parsed.output.entries[e];
      if (label != EINSUM_ELLIPSIS) {
        dims[rank++] = stax_dim_resolve(ic->shape, labels[label].dim);
        continue;
      }
      for (int32_t k = 0; k < ellipsis_rank; k++) dims[rank++] = ellipsis_dims[k];
    }
  }
  return stax_shape_set_output(ic, 0, operands[0].dtype, rank, dims);
}
