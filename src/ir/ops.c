/* The op tables generated from include/stax/ops.def: names, arity, flags and the shape
 * function of every op, plus name lookup. Everything here is read-only after start-up. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph_internal.h"

typedef struct stax_op_info_t {
  const char* name;
  int32_t min_inputs, max_inputs; /* max -1: variadic */
  int32_t min_outputs, max_outputs;
  uint32_t flags;
  stax_shape_fn shape_fn;
} stax_op_info_t;

static const stax_op_info_t stax_op_table[STAX_OP_COUNT] = {
#define STAX_OP(name, min_in, max_in, min_out, max_out, flags, family) \
  {#name, min_in, max_in, min_out, max_out, flags, stax_shape_##family},
#include "stax/ops.def"
#undef STAX_OP
};

static bool stax_op_valid(stax_op_t op) { return op >= 0 && op < STAX_OP_COUNT; }

const char* stax_op_name(stax_op_t op) {
  return stax_op_valid(op) ? stax_op_table[op].name : "invalid";
}

uint32_t stax_op_flags(stax_op_t op) { return stax_op_valid(op) ? stax_op_table[op].flags : 0; }

static bool stax_op_passes_sequences(stax_op_t op) {
  return op == STAX_OP_Identity || (stax_op_flags(op) & STAX_OPF_CONTROL);
}

stax_operand_kind_t stax_op_input_kind(stax_op_t op, int32_t k) {
  if (stax_op_passes_sequences(op) && !(op == STAX_OP_If && k == 0) &&
      !(op == STAX_OP_Loop && k < 2))
    return STAX_OPERAND_ANY;
  return k == 0 && (stax_op_flags(op) & STAX_OPF_SEQUENCE_IN) ? STAX_OPERAND_SEQUENCE
                                                               : STAX_OPERAND_TENSOR;
}

stax_operand_kind_t stax_op_output_kind(stax_op_t op, int32_t k) {
  if (stax_op_passes_sequences(op)) return STAX_OPERAND_ANY;
  return k == 0 && (stax_op_flags(op) & STAX_OPF_SEQUENCE_OUT) ? STAX_OPERAND_SEQUENCE
                                                                : STAX_OPERAND_TENSOR;
}

int32_t stax_op_min_inputs(stax_op_t op) {
  return stax_op_valid(op) ? stax_op_table[op].min_inputs : 0;
}
int32_t stax_op_max_inputs(stax_op_t op) {
  return stax_op_valid(op) ? stax_op_table[op].max_inputs : 0;
}
int32_t stax_op_min_outputs(stax_op_t op) {
  return stax_op_valid(op) ? stax_op_table[op].min_outputs : 0;
}
int32_t stax_op_max_outputs(stax_op_t op) {
  return stax_op_valid(op) ? stax_op_table[op].max_outputs : 0;
}
stax_shape_fn stax_op_shape_fn(stax_op_t op) {
  return stax_op_valid(op) ? stax_op_table[op].shape_fn : NULL;
}

/* Name lookup: the importer calls this once per ONNX node, so a binary search over op ids
 * sorted by name (built once, thread-safely) keeps it cheap without a hand-sorted list that
 * could drift from ops.def. */
static stax_op_t stax_ops_by_name[STAX_OP_COUNT];
static pthread_once_t stax_ops_by_name_once = PTHREAD_ONCE_INIT;

static int stax_compare_op_names(const void* a, const void* b) {
  return strcmp(stax_op_table[*(const stax_op_t*)a].name,
                stax_op_table[*(const stax_op_t*)b].name);
}

static void stax_build_ops_by_name(void) {
  for (int32_t i = 0; i < STAX_OP_COUNT; i++) stax_ops_by_name[i] = (stax_op_t)i;
  qsort(stax_ops_by_name, STAX_OP_COUNT, sizeof(stax_ops_by_name[0]), stax_compare_op_names);
}

stax_op_t stax_op_from_name(const char* name) {
  if (name == NULL) return STAX_OP_INVALID;
  pthread_once(&stax_ops_by_name_once, stax_build_ops_by_name);
  int32_t low = 0, high = STAX_OP_COUNT - 1;
  while (low <= high) {
    int32_t mid = low + (high - low) / 2;
    int cmp = strcmp(name, stax_op_table[stax_ops_by_name[mid]].name);
    if (cmp == 0) return stax_ops_by_name[mid];
    if (cmp < 0) {
      high = mid - 1;
    } else {
      low = mid + 1;
    }
  }
  return STAX_OP_INVALID;
}
