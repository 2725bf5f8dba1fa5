/* Which ONNX ops stax can import: opset resolution, the per-node support rule (domain, opset
 * range, op type, the few attribute combinations no conversion handles), and the report that
 * lists every unsupported op of a model, subgraphs included, with the nodes that use it. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* STAX_ONNX_MAX_OPSET as text, for reasons that are string constants. */
#define STAX_ONNX_TEXT_OF(x) #x
#define STAX_ONNX_TEXT(x) STAX_ONNX_TEXT_OF(x)
#define STAX_ONNX_OPSET_TEXT STAX_ONNX_TEXT(STAX_ONNX_MAX_OPSET)

/* How many node names one report entry prints before "and N more". */
#define STAX_ONNX_REPORT_NAMES_SHOWN 8

bool stax_onnx_is_default_domain(const char* domain) {
  return domain == NULL || domain[0] == '\0' || strcmp(domain, "ai.onnx") == 0;
}

int64_t stax_onnx_domain_opset(const Onnx__ModelProto* model, const char* domain) {
  int64_t version = 0;
  bool want_default = stax_onnx_is_default_domain(domain);
  for (size_t i = 0; i < model->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto* entry = model->opset_import[i];
    if (entry == NULL) continue;
    bool match = want_default ? stax_onnx_is_default_domain(entry->domain)
                              : (entry->domain && strcmp(entry->domain, domain) == 0);
    if (match && entry->has_version && entry->version > version) version = entry->version;
  }
  return version;
}

/* The opset the default domain is imported at; models before IR version 3 had no
 * opset_import and meant opset 1. 0 when a newer model imports none. */
static int64_t stax_onnx_default_opset_lenient(const Onnx__ModelProto* model) {
  int64_t version = stax_onnx_domain_opset(model, "");
  if (version == 0 && (!model->has_ir_version || model->ir_version < 3)) version = 1;
  return version;
}

stax_status_t stax_onnx_model_opset(const Onnx__ModelProto* model, const char* name,
                                    int64_t* out_opset) {
  *out_opset = 0;
  int64_t version = stax_onnx_default_opset_lenient(model);
  if (version <= 0) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "model '%s' (IR version %lld) imports no opset of the default "
                            "domain",
                            name, (long long)model->ir_version);
  }
  if (version > STAX_ONNX_MAX_OPSET) {
    /* The onnx package converts opsets from Python only (there is no command line for it). */
    return stax_status_make(STAX_UNIMPLEMENTED,
                            "model '%s' uses default-domain opset %lld; stax supports opsets 1 "
                            "to %d: convert the model with the onnx package's Python API, "
                            "onnx.version_converter.convert_version(model, %d)",
                            name, (long long)version, STAX_ONNX_MAX_OPSET, STAX_ONNX_MAX_OPSET);
  }
  *out_opset = version;
  return STAX_OK;
}

stax_op_t stax_onnx_op_for_type(const char* op_type) {
  if (op_type == NULL) return STAX_OP_INVALID;
  /* Ops ONNX replaced with a generalization that has the same semantics. */
  if (strcmp(op_type, "Upsample") == 0) return STAX_OP_Resize;
  if (strcmp(op_type, "Scatter") == 0) return STAX_OP_ScatterElements;
  return stax_op_from_name(op_type);
}

static const Onnx__AttributeProto* stax_onnx_node_attribute(const Onnx__NodeProto* node,
                                                            const char* name) {
  for (size_t i = 0; i < node->n_attribute; i++) {
    const Onnx__AttributeProto* attribute = node->attribute[i];
    if (attribute && attribute->name && strcmp(attribute->name, name) == 0) return attribute;
  }
  return NULL;
}

static int32_t stax_onnx_present_outputs(const Onnx__NodeProto* node) {
  int32_t present = 0;
  for (size_t i = 0; i < node->n_output; i++) {
    if (node->output[i] && node->output[i][0]) present++;
  }
  return present;
}

const char* stax_onnx_unsupported_reason(const Onnx__NodeProto* node, int64_t opset) {
  if (!stax_onnx_is_default_domain(node->domain)) return "domain not supported";
  if (opset > STAX_ONNX_MAX_OPSET) {
    return "opset newer than stax supports (at most " STAX_ONNX_OPSET_TEXT
           "; onnx.version_converter.convert_version(model, " STAX_ONNX_OPSET_TEXT
           ") in Python converts a model)";
  }
  const char* op_type = node->op_type ? node->op_type : "";
  if (strcmp(op_type, "StringNormalizer") == 0) {
    return "string tensors are not supported: stax's dtypes are numbers and bool with a fixed "
           "element size (include/stax/dtypes.def), which strings do not have";
  }
  /* SequenceMap imports as its ONNX function (src/onnx/sequence_map.c). */
  if (strcmp(op_type, "SequenceMap") == 0) return opset < 17 ? "SequenceMap is opset 17" : NULL;
  if (stax_onnx_op_for_type(op_type) == STAX_OP_INVALID) return "not implemented";

  if (strcmp(op_type, "Upsample") == 0 && opset < 7) {
    return "Upsample-1 (height_scale/width_scale) not supported";
  }
  if (strcmp(op_type, "Tile") == 0 && opset < 6) return "Tile-1 (tiles/axis inputs) not supported";
  if (strcmp(op_type, "BatchNormalization") == 0) {
    const Onnx__AttributeProto* spatial = stax_onnx_node_attribute(node, "spatial");
    if (spatial && spatial->has_i && spatial->i == 0) return "attribute spatial=0 not supported";
    if (opset < 14 && stax_onnx_present_outputs(node) > 3) {
      return "training outputs saved_mean/saved_var not supported";
    }
  }
  if (strcmp(op_type, "Constant") == 0) {
    if (stax_onnx_node_attribute(node, "sparse_value")) return "sparse_value not supported";
    const Onnx__AttributeProto* value = stax_onnx_node_attribute(node, "value");
    if (value && value->t && value->t->has_data_type &&
        stax_dtype_from_onnx(value->t->data_type) == STAX_DTYPE_INVALID) {
      return "tensor data type not supported";
    }
    if (stax_onnx_node_attribute(node, "value_string") ||
        stax_onnx_node_attribute(node, "value_strings")) {
      return "string constants not supported";
    }
  }
  if (strcmp(op_type, "Cast") == 0 || strcmp(op_type, "EyeLike") == 0) {
    const Onnx__AttributeProto* to =
        stax_onnx_node_attribute(node, strcmp(op_type, "Cast") == 0 ? "to" : "dtype");
    if (to && to->has_i && stax_dtype_from_onnx((int32_t)to->i) == STAX_DTYPE_INVALID) {
      return "target data type not supported";
    }
  }
  return NULL;
}

/* ---- the report -------------------------------------------------------------------------- */

typedef struct stax_onnx_op_entry_t {
  const char* domain;
  const char* op_type;
  int64_t opset;
  const char* reason;
  int32_t node_count, node_capacity;
  const char** node_names;
} stax_onnx_op_entry_t;

struct stax_onnx_op_report_s {
  stax_allocator_t allocator;
  stax_arena_t arena;
  int32_t count, capacity;
  stax_onnx_op_entry_t* entries;
};

/* Grows an arena array by copying (the report is small; the old copy stays in the arena). */
static stax_status_t stax_onnx_arena_grow(stax_arena_t* arena, void** array, int32_t* capacity,
                                          int32_t needed, size_t element_size) {
  if (needed <= *capacity) return STAX_OK;
  int32_t new_capacity = *capacity ? *capacity * 2 : 8;
  while (new_capacity < needed) new_capacity *= 2;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(
      stax_arena_alloc(arena, (size_t)new_capacity * element_size, 0, &memory));
  if (*capacity) memcpy(memory, *array, (size_t)*capacity * element_size);
  *array = memory;
  *capacity = new_capacity;
  return STAX_OK;
}

static stax_status_t stax_onnx_report_add(stax_onnx_op_report_t* report,
                                          const Onnx__NodeProto* node, int32_t index,
                                          int64_t opset, const char* reason) {
  const char* domain = stax_onnx_is_default_domain(node->domain) ? "" : node->domain;
  const char* op_type = node->op_type ? node->op_type : "";
  stax_onnx_op_entry_t* entry = NULL;
  for (int32_t i = 0; i < report->count; i++) {
    stax_onnx_op_entry_t* candidate = &report->entries[i];
    if (strcmp(candidate->domain, domain) == 0 && strcmp(candidate->op_type, op_type) == 0 &&
        strcmp(candidate->reason, reason) == 0) {
      entry = candidate;
      break;
    }
  }
  if (entry == NULL) {
    void* entries = report->entries;
    STAX_RETURN_IF_ERROR(stax_onnx_arena_grow(&report->arena, &entries, &report->capacity,
                                              report->count + 1, sizeof(stax_onnx_op_entry_t)));
    report->entries = entries;
    entry = &report->entries[report->count];
    memset(entry, 0, sizeof(*entry));
    STAX_RETURN_IF_ERROR(stax_arena_strdup(&report->arena, domain, &entry->domain));
    STAX_RETURN_IF_ERROR(stax_arena_strdup(&report->arena, op_type, &entry->op_type));
    STAX_RETURN_IF_ERROR(stax_arena_strdup(&report->arena, reason, &entry->reason));
    entry->opset = opset;
    report->count++;
  }
  void* names = entry->node_names;
  STAX_RETURN_IF_ERROR(stax_onnx_arena_grow(&report->arena, &names, &entry->node_capacity,
                                            entry->node_count + 1, sizeof(const char*)));
  entry->node_names = names;
  const char* node_name = NULL;
  if (node->name && node->name[0]) {
    STAX_RETURN_IF_ERROR(stax_arena_strdup(&report->arena, node->name, &node_name));
  } else {
    char generated[32];
    snprintf(generated, sizeof(generated), "#%d", index);
    STAX_RETURN_IF_ERROR(stax_arena_strdup(&report->arena, generated, &node_name));
  }
  entry->node_names[entry->node_count++] = node_name;
  return STAX_OK;
}

/* The quantization ops name their quantized type by a zero point's element type or by
 * attribute output_dtype; float8, int4 and the other narrow types have no stax dtype. Writes
 * the reason, naming the type and where it comes from, and returns true for such a node. */
static bool stax_onnx_quant_type_reason(const Onnx__GraphProto* graph,
                                        const Onnx__NodeProto* node, char* buf, size_t size) {
  static const char* const quant_ops[] = {"QuantizeLinear", "DequantizeLinear", "QLinearMatMul",
                                          "QLinearConv",    "MatMulInteger",    "ConvInteger"};
  const char* op_type = node->op_type ? node->op_type : "";
  bool quant = false;
  for (size_t i = 0; i < sizeof(quant_ops) / sizeof(quant_ops[0]); i++) {
    quant = quant || strcmp(op_type, quant_ops[i]) == 0;
  }
  if (!quant || !stax_onnx_is_default_domain(node->domain)) return false;
  const Onnx__AttributeProto* output_dtype = stax_onnx_node_attribute(node, "output_dtype");
  if (output_dtype && output_dtype->has_i && output_dtype->i != 0 &&
      (output_dtype->i > INT32_MAX ||
       stax_dtype_from_onnx((int32_t)output_dtype->i) == STAX_DTYPE_INVALID)) {
    snprintf(buf, size,
             "output_dtype %s (%lld) not supported: stax quantizes to int8, uint8, int16 and "
             "uint16",
             stax_onnx_data_type_name(output_dtype->i > INT32_MAX ? -1 : (int32_t)output_dtype->i),
             (long long)output_dtype->i);
    return true;
  }
  /* Inputs that are initializers of this graph with a type stax lacks (graph inputs and
   * other values are refused with their own names when their types are read). */
  for (size_t i = 0; i < node->n_input && graph; i++) {
    const char* input = node->input[i];
    if (input == NULL || input[0] == '\0') continue;
    for (size_t t = 0; t < graph->n_initializer; t++) {
      const Onnx__TensorProto* init = graph->initializer[t];
      if (init == NULL || init->name == NULL || strcmp(init->name, input) != 0) continue;
      int32_t type = init->has_data_type ? init->data_type : 0;
      if (stax_dtype_from_onnx(type) != STAX_DTYPE_INVALID) break;
      snprintf(buf, size,
               "input %zu '%s' has type %s, not supported: stax quantizes to int8, uint8, int16 "
               "and uint16 (no float8, int4 or other narrow types)",
               i, input, stax_onnx_data_type_name(type));
      return true;
    }
  }
  return false;
}

/* Visits a graph's nodes and, through GRAPH/GRAPHS attributes, its subgraphs. The framing
 * check bounds the nesting, so the recursion is bounded too. */
static stax_status_t stax_onnx_report_graph(stax_onnx_op_report_t* report,
                                            const Onnx__ModelProto* model,
                                            const Onnx__GraphProto* graph, int64_t opset) {
  if (graph == NULL) return STAX_OK;
  for (size_t n = 0; n < graph->n_node; n++) {
    const Onnx__NodeProto* node = graph->node[n];
    if (node == NULL) continue;
    const char* reason = stax_onnx_unsupported_reason(node, opset);
    char quant_reason[256];
    if (reason == NULL && stax_onnx_quant_type_reason(graph, node, quant_reason,
                                                      sizeof(quant_reason))) {
      reason = quant_reason;
    }
    if (reason != NULL) {
      int64_t node_opset = stax_onnx_is_default_domain(node->domain)
                               ? opset
                               : stax_onnx_domain_opset(model, node->domain);
      STAX_RETURN_IF_ERROR(stax_onnx_report_add(report, node, (int32_t)n, node_opset, reason));
    }
    for (size_t a = 0; a < node->n_attribute; a++) {
      const Onnx__AttributeProto* attribute = node->attribute[a];
      if (attribute == NULL) continue;
      STAX_RETURN_IF_ERROR(stax_onnx_report_graph(report, model, attribute->g, opset));
      for (size_t g = 0; g < attribute->n_graphs; g++) {
        STAX_RETURN_IF_ERROR(stax_onnx_report_graph(report, model, attribute->graphs[g], opset));
      }
    }
  }
  return STAX_OK;
}

stax_status_t stax_onnx_op_report_build(stax_allocator_t allocator,
                                        const Onnx__ModelProto* model,
                                        stax_onnx_op_report_t** out_report) {
  *out_report = NULL;
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(
      stax_allocator_calloc(allocator, 1, sizeof(stax_onnx_op_report_t), &memory));
  stax_onnx_op_report_t* report = memory;
  report->allocator = allocator;
  stax_arena_init(&report->arena, allocator, 0);
  stax_status_t status =
      stax_onnx_report_graph(report, model, model->graph, stax_onnx_default_opset_lenient(model));
  if (status != STAX_OK) {
    stax_onnx_op_report_destroy(report);
    return status;
  }
  *out_report = report;
  return STAX_OK;
}

void stax_onnx_op_report_destroy(stax_onnx_op_report_t* report) {
  if (report == NULL) return;
  stax_arena_deinit(&report->arena);
  stax_allocator_free(report->allocator, report, sizeof(*report));
}

int32_t stax_onnx_op_report_count(const stax_onnx_op_report_t* report) {
  return report ? report->count : 0;
}

static const stax_onnx_op_entry_t* stax_onnx_report_entry(const stax_onnx_op_report_t* report,
                                                          int32_t i) {
  return report && i >= 0 && i < report->count ? &report->entries[i] : NULL;
}

const char* stax_onnx_op_report_domain(const stax_onnx_op_report_t* report, int32_t i) {
  const stax_onnx_op_entry_t* entry = stax_onnx_report_entry(report, i);
  return entry ? entry->domain : NULL;
}

const char* stax_onnx_op_report_op_type(const stax_onnx_op_report_t* report, int32_t i) {
  const stax_onnx_op_entry_t* entry = stax_onnx_report_entry(report, i);
  return entry ? entry->op_type : NULL;
}

int64_t stax_onnx_op_report_opset(const stax_onnx_op_report_t* report, int32_t i) {
  const stax_onnx_op_entry_t* entry = stax_onnx_report_entry(report, i);
  return entry ? entry->opset : 0;
}

const char* stax_onnx_op_report_reason(const stax_onnx_op_report_t* report, int32_t i) {
  const stax_onnx_op_entry_t* entry = stax_onnx_report_entry(report, i);
  return entry ? entry->reason : NULL;
}

int32_t stax_onnx_op_report_node_count(const stax_onnx_op_report_t* report, int32_t i) {
  const stax_onnx_op_entry_t* entry = stax_onnx_report_entry(report, i);
  return entry ? entry->node_count : 0;
}

const char* stax_onnx_op_report_node_name(const stax_onnx_op_report_t* report, int32_t i,
                                          int32_t node) {
  const stax_onnx_op_entry_t* entry = stax_onnx_report_entry(report, i);
  return entry && node >= 0 && node < entry->node_count ? entry->node_names[node] : NULL;
}

/* snprintf that keeps counting past the end of the buffer, like snprintf itself. */
static void stax_onnx_append(char* buf, size_t size, size_t* used, const char* fmt, ...)
    STAX_PRINTF(4, 5);
static void stax_onnx_append(char* buf, size_t size, size_t* used, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char* target = *used < size ? buf + *used : NULL;
  size_t room = *used < size ? size - *used : 0;
  int written = vsnprintf(target, room, fmt, args);
  va_end(args);
  if (written > 0) *used += (size_t)written;
}

int stax_onnx_op_report_print(const stax_onnx_op_report_t* report, char* buf, size_t size) {
  size_t used = 0;
  if (buf && size) buf[0] = '\0';
  if (buf == NULL) size = 0;
  int32_t count = stax_onnx_op_report_count(report);
  stax_onnx_append(buf, size, &used, "%d unsupported op%s: ", count, count == 1 ? "" : "s");
  for (int32_t i = 0; i < count; i++) {
    const stax_onnx_op_entry_t* entry = &report->entries[i];
    stax_onnx_append(buf, size, &used, "%s%s%s%s (%s, opset %lld; node%s ", i ? "; " : "",
                     entry->domain, entry->domain[0] ? "." : "", entry->op_type, entry->reason,
                     (long long)entry->opset, entry->node_count == 1 ? "" : "s");
    for (int32_t n = 0; n < entry->node_count && n < STAX_ONNX_REPORT_NAMES_SHOWN; n++) {
      stax_onnx_append(buf, size, &used, "%s'%s'", n ? ", " : "", entry->node_names[n]);
    }
    if (entry->node_count > STAX_ONNX_REPORT_NAMES_SHOWN) {
      stax_onnx_append(buf, size, &used, " and %d more",
                       entry->node_count - STAX_ONNX_REPORT_NAMES_SHOWN);
    }
    stax_onnx_append(buf, size, &used, ")");
  }
  return used > INT32_MAX ? INT32_MAX : (int)used;
}
