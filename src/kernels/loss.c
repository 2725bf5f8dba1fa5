/* Generic kernels for the classification losses NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss.
 *
 * Inputs: scores / log-probabilities (N, C, d1..dk) of a float dtype, integer targets
 * (N, d1..dk) (int32 or int64), optional per-class weights (C). Attributes: 'reduction'
 * ("mean" by default, "sum" or "none") and 'ignore_index' (no default: when absent every
 * target must be a class). For each position:
 *   loss = -logp[n, t, d...] * w[t]     (w = 1 without weights; 0 and no weight if t ignored)
 * "none" gives the per-position losses with the target's shape; "sum" their sum; "mean" their
 * sum divided by the sum of the weights of the positions not ignored (NaN when that is 0, as in
 * the ONNX reference and PyTorch). SoftmaxCrossEntropyLoss first takes logp = LogSoftmax over
 * the class axis (stable: max subtracted) and can also return it as output 1.
 *
 * Every target is checked before anything is written: a target outside [0, C) that is not the
 * ignore_index is OUT_OF_RANGE naming the value and its position. All arithmetic is double.
 * Positions are walked on the calling thread (losses are small next to what produces them). */
#include <math.h>
#include <string.h>

#include "kernels/kernel.h"

#define LOSS_CHUNK 256

/* An odometer over the target's dims that also tracks the matching offsets in the scores
 * (class index 0), the target and output 0 ("none" only). */
typedef struct loss_walk_t {
  int32_t rank;
  int64_t dims[STAX_MAX_RANK];
  int64_t index[STAX_MAX_RANK];
  int64_t strides[3][STAX_MAX_RANK]; /* scores, target, loss output */
  int64_t offsets[3];
} loss_walk_t;

static void loss_walk_init(loss_walk_t* walk, const stax_tensor_t* scores,
                           const stax_tensor_t* target, const stax_tensor_t* loss_per_position) {
  memset(walk, 0, sizeof(*walk));
  walk->rank = target->rank;
  for (int32_t d = 0; d < target->rank; d++) {
    walk->dims[d] = target->dims[d];
    walk->strides[0][d] = scores->strides[d == 0 ? 0 : d + 1];
    walk->strides[1][d] = target->strides[d];
    walk->strides[2][d] = loss_per_position ? loss_per_position->strides[d] : 0;
  }
  walk->offsets[0] = scores->offset;
  walk->offsets[1] = target->offset;
  walk->offsets[2] = loss_per_position ? loss_per_position->offset : 0;
}

static void loss_walk_next(loss_walk_t* walk) {
  for (int32_t d = walk->rank - 1; d >= 0; d--) {
    walk->index[d]++;
    for (int k = 0; k < 3; k++) walk->offsets[k] += walk->strides[k][d];
    if (walk->index[d] < walk->dims[d]) return;
    for (int k = 0; k < 3; k++) walk->offsets[k] -= walk->dims[d] * walk->strides[k][d];
    walk->index[d] = 0;
  }
}

/* One element of any dtype as double (float16 / bfloat16 decoded). */
static double load_f64(const stax_tensor_t* t, int64_t offset) {
  double value = 0.0;
  size_t size = stax_dtype_size(t->dtype);
  stax_convert_strided(t->dtype, (const char*)stax_buffer_data(t->buffer) + offset * (int64_t)size,
                       0, STAX_DTYPE_FLOAT64, &value, sizeof(double), 1);
  return value;
}

static void store_f64(const stax_tensor_t* t, int64_t offset, double value) {
  size_t size = stax_dtype_size(t->dtype);
  stax_convert_strided(STAX_DTYPE_FLOAT64, &value, sizeof(double), t->dtype,
                       (char*)stax_buffer_data(t->buffer) + offset * (int64_t)size, 0, 1);
}

/* Output i is requested unless the node marks it omitted. */
static bool output_wanted(const stax_kernel_call_t* call, int32_t i) {
  if (i >= call->output_count) return false;
  const stax_node_t* node = call->node;
  if (node && node->outputs && i < node->output_count) return node->outputs[i] != STAX_VALUE_NONE;
  return true;
}

/* log(sum(exp(scores[n, :, d...]))) for the class run at `offset`. */
static double log_sum_exp_classes(const stax_tensor_t* scores, int64_t offset, int64_t classes) {
  double values[LOSS_CHUNK];
  int64_t stride = scores->strides[1];
  int64_t size = (int64_t)stax_dtype_size(scores->dtype);
  const char* base = stax_buffer_data(scores->buffer);
  double max = -INFINITY, sum = 0.0;
  for (int pass = 0; pass < 2; pass++) {
    for (int64_t start = 0; start < classes; start += LOSS_CHUNK) {
      int64_t n = classes - start < LOSS_CHUNK ? classes - start : LOSS_CHUNK;
      stax_convert_strided(scores->dtype, base + (offset + start * stride) * size, stride * size,
                           STAX_DTYPE_FLOAT64, values, sizeof(double), n);
      for (int64_t k = 0; k < n; k++) {
        if (pass == 0) max = (values[k] > max || values[k] != values[k]) ? values[k] : max;
        else sum += exp(values[k] - max);
      }
    }
    /* All -inf (or +inf) maxima would make x - max NaN; 0 keeps the infinities meaningful. */
    if (pass == 0 && isinf(max)) max = 0.0;
  }
  return max + log(sum);
}

static stax_status_t loss_kernel(stax_kernel_call_t* call, bool with_softmax) {
  const stax_tensor_t* scores = stax_kernel_input(call, 0);
  const stax_tensor_t* target = stax_kernel_input(call, 1);
  const stax_tensor_t* weights = stax_kernel_input(call, 2);
  if (!scores || !target)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "input %d is missing", scores ? 1 : 0);
  if (!stax_dtype_is_float(scores->dtype))
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                             "input 0 must be a floating-point tensor, got %s",
                             stax_dtype_name(scores->dtype));
  if (target->dtype != STAX_DTYPE_INT32 && target->dtype != STAX_DTYPE_INT64)
    return stax_kernel_error(call, STAX_DTYPE_MISMATCH, "input 1 must be int32 or int64, got %s",
                             stax_dtype_name(target->dtype));
  if (scores->rank < 2)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 must have rank >= 2 (N, C, ...), got rank %d",
                             scores->rank);
  if (target->rank != scores->rank - 1)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 1 has rank %d, expected %d (input 0's rank minus the class "
                             "dim)",
                             target->rank, scores->rank - 1);
  for (int32_t d = 0; d < target->rank; d++) {
    int32_t scores_dim = d == 0 ? 0 : d + 1;
    if (target->dims[d] != scores->dims[scores_dim])
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 1 dim %d is %lld but input 0 dim %d is %lld", d,
                               (long long)target->dims[d], scores_dim,
                               (long long)scores->dims[scores_dim]);
  }
  int64_t classes = scores->dims[1];
  if (weights) {
    if (!stax_dtype_is_float(weights->dtype))
      return stax_kernel_error(call, STAX_DTYPE_MISMATCH,
                               "input 2 (weights) must be a floating-point tensor, got %s",
                               stax_dtype_name(weights->dtype));
    if (weights->rank != 1 || weights->dims[0] != classes)
      return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                               "input 2 (weights) has dims %s, expected [%lld] (the classes)",
                               stax_dims_text(weights->rank, weights->dims).text,
                               (long long)classes);
  }
  const char* reduction = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "reduction", "mean", &reduction));
  bool none = strcmp(reduction, "none") == 0, mean = strcmp(reduction, "mean") == 0;
  if (!none && !mean && strcmp(reduction, "sum") != 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'reduction' must be \"none\", \"sum\" or \"mean\", got "
                             "\"%s\"",
                             reduction);
  bool has_ignore = stax_node_attr_find(call->node, "ignore_index") != NULL;
  int64_t ignore_index = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "ignore_index", 0, &ignore_index));

  /* Every target is checked before any output exists. */
  loss_walk_t walk;
  int64_t positions = 1;
  for (int32_t d = 0; d < target->rank; d++) positions *= target->dims[d];
  loss_walk_init(&walk, scores, target, NULL);
  const void* target_data = stax_buffer_data(target->buffer);
  for (int64_t p = 0; p < positions; p++, loss_walk_next(&walk)) {
    int64_t label = stax_load_as_i64(target->dtype, target_data, walk.offsets[1]);
    if ((has_ignore && label == ignore_index) || (label >= 0 && label < classes)) continue;
    return stax_kernel_error(call, STAX_OUT_OF_RANGE,
                             "input 1 (target) value %lld at position %s is out of range "
                             "[0, %lld)",
                             (long long)label, stax_dims_text(walk.rank, walk.index).text,
                             (long long)classes);
  }

  bool loss_preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* loss = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, scores->dtype, none ? target->rank : 0,
                                          target->dims, &loss));
  stax_tensor_t* log_prob = NULL;
  if (with_softmax && output_wanted(call, 1)) {
    stax_status_t status =
        stax_kernel_output(call, 1, scores->dtype, scores->rank, scores->dims, &log_prob);
    if (status != STAX_OK) {
      /* Output 0 may be ours or the VM's; release only what this call created. */
      if (!loss_preallocated) {
        stax_tensor_release(call->outputs[0]);
        call->outputs[0] = NULL;
      }
      return status;
    }
  }

  loss_walk_init(&walk, scores, target, none ? loss : NULL);
  double total = 0.0, weight_total = 0.0;
  for (int64_t p = 0; p < positions; p++, loss_walk_next(&walk)) {
    int64_t label = stax_load_as_i64(target->dtype, target_data, walk.offsets[1]);
    double lse = 0.0;
    if (with_softmax) {
      lse = log_sum_exp_classes(scores, walk.offsets[0], classes);
      if (log_prob) {
        /* log_prob has the scores' dims; its offsets follow the walk's index. */
        int64_t out_offset = log_prob->offset;
        for (int32_t d = 0; d < walk.rank; d++)
          out_offset += walk.index[d] * log_prob->strides[d == 0 ? 0 : d + 1];
        for (int64_t c = 0; c < classes; c++)
          store_f64(log_prob, out_offset + c * log_prob->strides[1],
                    load_f64(scores, walk.offsets[0] + c * scores->strides[1]) - lse);
      }
    }
    double value = 0.0, weight = 0.0;
    if (!(has_ignore && label == ignore_index)) {
      weight = weights ? load_f64(weights, weights->offset + label * weights->strides[0]) : 1.0;
      double logp = load_f64(scores, walk.offsets[0] + label * scores->strides[1]) - lse;
      value = -logp * weight;
    }
    if (none) {
      store_f64(loss, walk.offsets[2], value);
    } else {
      total += value;
      weight_total += weight;
    }
  }
  if (!none) store_f64(loss, loss->offset, mean ? total / weight_total : total);
  return STAX_OK;
}

stax_status_t stax_kernel_NegativeLogLikelihoodLoss(stax_kernel_call_t* call) {
  return loss_kernel(call, false);
}

stax_status_t stax_kernel_SoftmaxCrossEntropyLoss(stax_kernel_call_t* call) {
  return loss_kernel(call, true);
}
