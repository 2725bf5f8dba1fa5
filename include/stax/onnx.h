/* stax ONNX import: ONNX models (ModelProto files) to stax graphs, the list of ops a model
 * uses that stax cannot import, and TensorProto files (the backend tests' input_0.pb).
 *
 * Supported: the default domain ("" or "ai.onnx") at opsets 1 to 28. Nodes of older opsets
 * are converted to the current form where attributes became inputs or semantics changed
 * (Slice, Squeeze, Unsqueeze, Split, ReduceSum, Clip, Pad, TopK, Reshape, Upsample, Resize-10,
 * Softmax/LogSoftmax/Hardmax before 13, Dropout, BatchNormalization, legacy broadcasting,
 * PRelu's per-channel slope before 7).
 * Tensors of every stax dtype, stored in raw_data, the typed fields, or external files next to
 * the model. A model file is user input: a malformed, truncated or hostile file gets an error
 * status naming the file and the problem, never a crash. */
#ifndef STAX_ONNX_H_
#define STAX_ONNX_H_

#include "stax/base.h"
#include "stax/graph.h"
#include "stax/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The newest default-domain opset stax imports. */
#define STAX_ONNX_MAX_OPSET 28

/* Fixes a dim_param to a value: every dim named `name` becomes the constant `value`. */
typedef struct stax_onnx_symbol_binding_t {
  const char* name;
  int64_t value;
} stax_onnx_symbol_binding_t;

typedef struct stax_onnx_import_options_t {
  int32_t symbol_binding_count;
  const stax_onnx_symbol_binding_t* symbol_bindings;
  /* Symbols made for dim_params and unnamed dims of graph inputs have the range [1, max]
   * unless this is set, then [0, max] (models that run with empty batches). Symbols first met
   * in value_info or graph outputs are [0, max] either way (e.g. NonZero keeping nothing). */
  bool dims_may_be_zero;
  /* Where external tensor data lives for stax_onnx_import_memory (NULL: external data is
   * refused). stax_onnx_import_file always uses the model file's directory. */
  const char* external_data_directory;
} stax_onnx_import_options_t;

/* Imports a model into a new graph. options may be NULL. Errors:
 *   PARSE_ERROR      the file is not a valid ModelProto (names the file);
 *   UNIMPLEMENTED    one error listing every unsupported op with its node names and opset,
 *                    an unsupported dtype (names the tensor), opset newer than supported;
 *   INVALID_ARGUMENT a node input nobody produces, a cycle, an initializer whose data size
 *                    disagrees with its dims, a path that escapes the model's directory, ...;
 *   SHAPE_MISMATCH / DTYPE_MISMATCH  value_info or graph outputs that contradict inference. */
STAX_MUST_USE stax_status_t stax_onnx_import_file(stax_allocator_t allocator, const char* path,
                                                  const stax_onnx_import_options_t* options,
                                                  stax_graph_t** out_graph);
/* The same from bytes in memory; `name` is used in messages (may be NULL). */
STAX_MUST_USE stax_status_t stax_onnx_import_memory(stax_allocator_t allocator,
                                                    const void* data, size_t size,
                                                    const char* name,
                                                    const stax_onnx_import_options_t* options,
                                                    stax_graph_t** out_graph);

/* ---- unsupported ops ---------------------------------------------------------------------- */

/* Every op a model uses (subgraphs included) that stax cannot import, grouped by domain, op
 * type and reason, each with the names of the nodes that use it. Unnamed nodes are listed as
 * "#<index>" (their position in their graph). Empty when the whole model is supported. */
typedef struct stax_onnx_op_report_s stax_onnx_op_report_t;

STAX_MUST_USE stax_status_t stax_onnx_check_ops_file(stax_allocator_t allocator,
                                                     const char* path,
                                                     stax_onnx_op_report_t** out_report);
STAX_MUST_USE stax_status_t stax_onnx_check_ops_memory(stax_allocator_t allocator,
                                                       const void* data, size_t size,
                                                       const char* name,
                                                       stax_onnx_op_report_t** out_report);
void stax_onnx_op_report_destroy(stax_onnx_op_report_t* report);

int32_t stax_onnx_op_report_count(const stax_onnx_op_report_t* report);
/* Accessors for entry i (borrowed strings; NULL / 0 for a bad index). */
const char* stax_onnx_op_report_domain(const stax_onnx_op_report_t* report, int32_t i);
const char* stax_onnx_op_report_op_type(const stax_onnx_op_report_t* report, int32_t i);
/* The model's opset for the op's domain (0 when the model imports none). */
int64_t stax_onnx_op_report_opset(const stax_onnx_op_report_t* report, int32_t i);
/* Why: "not implemented", "domain 'ai.onnx.ml' is not supported", "attribute spatial=0". */
const char* stax_onnx_op_report_reason(const stax_onnx_op_report_t* report, int32_t i);
int32_t stax_onnx_op_report_node_count(const stax_onnx_op_report_t* report, int32_t i);
const char* stax_onnx_op_report_node_name(const stax_onnx_op_report_t* report, int32_t i,
                                          int32_t node);
/* The report as one line (the text of the import error), snprintf-style. */
int stax_onnx_op_report_print(const stax_onnx_op_report_t* report, char* buf, size_t size);

/* ---- TensorProto files -------------------------------------------------------------------- */

/* Loads a serialized TensorProto (e.g. test_data_set_0/input_0.pb) into a new contiguous
 * tensor. Strings, sparse or external data are refused. out_name (may be NULL) receives the
 * tensor's name ("" when it has none), owned by the caller: free with stax_onnx_string_free. */
STAX_MUST_USE stax_status_t stax_onnx_load_tensor_file(stax_allocator_t allocator,
                                                       const char* path,
                                                       stax_tensor_t** out_tensor,
                                                       char** out_name);
STAX_MUST_USE stax_status_t stax_onnx_parse_tensor(stax_allocator_t allocator, const void* data,
                                                   size_t size, const char* name,
                                                   stax_tensor_t** out_tensor,
                                                   char** out_tensor_name);
void stax_onnx_string_free(stax_allocator_t allocator, char* string);

/* Loads a serialized SequenceProto of tensors (a sequence value's test data) into a new
 * sequence (stax_sequence_create). The proto does not record the dtype of an empty sequence:
 * it gets empty_dtype. Sparse tensors, nested sequences, maps and optionals are UNIMPLEMENTED;
 * a malformed file is INVALID_ARGUMENT naming the byte offset. */
STAX_MUST_USE stax_status_t stax_onnx_load_sequence_file(stax_allocator_t allocator,
                                                         const char* path,
                                                         stax_dtype_t empty_dtype,
                                                         stax_tensor_t** out_sequence);
STAX_MUST_USE stax_status_t stax_onnx_parse_sequence(stax_allocator_t allocator,
                                                     const void* data, size_t size,
                                                     const char* name, stax_dtype_t empty_dtype,
                                                     stax_tensor_t** out_sequence);

#ifdef __cplusplus
}
#endif

#endif /* STAX_ONNX_H_ */
