/* Internal interfaces of the ONNX importer (src/onnx/), shared by its files:
 *   proto_io.c      files, the protobuf-c allocator adapter, the nesting check, unpacking
 *   tensor_proto.c  TensorProto -> stax tensor (raw, typed fields, external data)
 *   op_support.c    opset resolution, which ops stax can import, the unsupported-op report
 *   value_types.c   TypeProto -> dtype and symbolic dims
 *   attributes.c    AttributeProto -> stax_attr_t
 *   import_graph.c  graphs and subgraphs: scopes, initializers, inputs, node order, outputs
 *   node_convert.c  one ONNX node -> stax nodes, with the per-opset conversions
 *   legacy_ops.c    rewrites of ops whose form changed across opsets
 *   import.c        the public entry points */
#ifndef STAX_ONNX_ONNX_INTERNAL_H_
#define STAX_ONNX_ONNX_INTERNAL_H_

#include "base/arena.h"
#include "base/hash_map.h"
#include "onnx/onnx.pb-c.h"
#include "stax/graph.h"
#include "stax/onnx.h"

/* Message nesting the importer accepts (model -> graph -> node -> attribute -> graph ...).
 * protobuf-c and the importer recurse per level, so hostile files must not go deeper. */
#define STAX_ONNX_MAX_NESTING 100

/* ---- proto_io.c ------------------------------------------------------------------------- */

/* protobuf-c allocates through this, so its memory is counted (and can be failed) like the
 * rest of stax's. `failed` tells an out-of-memory unpack from a malformed file. */
typedef struct stax_onnx_proto_allocator_t {
  ProtobufCAllocator base;
  stax_allocator_t allocator;
  bool failed;
} stax_onnx_proto_allocator_t;

void stax_onnx_proto_allocator_init(stax_onnx_proto_allocator_t* proto_allocator,
                                    stax_allocator_t allocator);

/* Reads a whole file. Free *out_data with stax_allocator_free(allocator, data, size). */
STAX_MUST_USE stax_status_t stax_onnx_read_file(stax_allocator_t allocator, const char* path,
                                                void** out_data, size_t* out_size);

/* Unpacks a message after checking its framing and nesting depth; PARSE_ERROR names `name`
 * (a file name or "(memory)"). Free with protobuf_c_message_free_unpacked. */
STAX_MUST_USE stax_status_t stax_onnx_unpack(stax_onnx_proto_allocator_t* proto_allocator,
                                             const ProtobufCMessageDescriptor* descriptor,
                                             const void* data, size_t size, const char* name,
                                             ProtobufCMessage** out_message);

/* The directory part of a path ("." when there is none), in the arena. */
STAX_MUST_USE stax_status_t stax_onnx_directory_of(stax_arena_t* arena, const char* path,
                                                   const char** out_directory);

/* ---- tensor_proto.c --------------------------------------------------------------------- */

/* "FLOAT", "STRING", "COMPLEX64", ... or "UNKNOWN". */
const char* stax_onnx_data_type_name(int32_t onnx_code);

/* Converts a TensorProto. `what` names it in messages ("initializer 'w'"). External data is
 * read relative to external_directory; NULL refuses it. */
STAX_MUST_USE stax_status_t stax_onnx_tensor_from_proto(stax_allocator_t allocator,
                                                        const Onnx__TensorProto* proto,
                                                        const char* what,
                                                        const char* external_directory,
                                                        stax_tensor_t** out_tensor);

/* ---- op_support.c ------------------------------------------------------------------------ */

bool stax_onnx_is_default_domain(const char* domain);
/* The model's default-domain opset; errors when it imports none (IR >= 3) or an opset stax
 * does not support. */
STAX_MUST_USE stax_status_t stax_onnx_model_opset(const Onnx__ModelProto* model,
                                                  const char* name, int64_t* out_opset);
/* The model's opset for `domain` (0 when not imported). */
int64_t stax_onnx_domain_opset(const Onnx__ModelProto* model, const char* domain);
/* NULL when stax can import the node at this opset, else why not (a static string). Only
 * the node itself is checked, not its subgraphs. */
const char* stax_onnx_unsupported_reason(const Onnx__NodeProto* node, int64_t opset);
/* The stax op a default-domain op type maps to (Upsample -> Resize, Scatter ->
 * ScatterElements, the rest by name); STAX_OP_INVALID if none. */
stax_op_t stax_onnx_op_for_type(const char* op_type);
STAX_MUST_USE stax_status_t stax_onnx_op_report_build(stax_allocator_t allocator,
                                                      const Onnx__ModelProto* model,
                                                      stax_onnx_op_report_t** out_report);

/* ---- import state ----------------------------------------------------------------------- */

typedef struct stax_onnx_importer_t {
  stax_allocator_t allocator;
  const char* model_name;          /* for messages */
  const char* external_directory;  /* NULL: external data refused */
  const stax_onnx_import_options_t* options; /* never NULL (defaults when the caller's is) */
  int64_t opset;                   /* default-domain opset */
  stax_arena_t arena;              /* import-lifetime scratch: names, arrays */
  /* Set while reading a declared type (value_info, graph outputs): symbols first met there
   * may be 0 (a NonZero that keeps nothing), unlike graph-input dims, which default to >= 1. */
  bool reading_declaration;
} stax_onnx_importer_t;

/* One graph being built (the model's graph or a subgraph) and its name table. */
typedef struct stax_onnx_scope_s stax_onnx_scope_t;
struct stax_onnx_scope_s {
  stax_onnx_importer_t* importer;
  stax_graph_t* graph;
  const Onnx__GraphProto* proto;
  stax_onnx_scope_t* parent;
  int32_t depth;                   /* 0 for the model's graph */
  const char* what;                /* "graph 'main'", "Loop node 'l' attribute 'body'" */
  stax_hash_map_t* values;         /* ONNX name -> stax value id in `graph` */
  stax_hash_map_t* defined;        /* every name the GraphProto defines (avoid for new names) */
  stax_hash_map_t* value_info;     /* name -> const Onnx__ValueInfoProto* */
};

/* The value an ONNX name stands for in this scope, capturing it from enclosing graphs when it
 * is defined outside (through every graph in between). *out_value is STAX_VALUE_NONE when no
 * enclosing graph defines it. */
STAX_MUST_USE stax_status_t stax_onnx_scope_resolve(stax_onnx_scope_t* scope,
                                                    const char* name,
                                                    stax_value_id_t* out_value);
/* Records name -> value. */
STAX_MUST_USE stax_status_t stax_onnx_scope_bind(stax_onnx_scope_t* scope, const char* name,
                                                 stax_value_id_t value);
/* A value name not used by the graph nor by the ONNX graph: "<base>/<suffix>", then
 * "<base>/<suffix>_1", ... Allocated in the importer's arena. */
STAX_MUST_USE stax_status_t stax_onnx_scope_new_name(stax_onnx_scope_t* scope,
                                                     const char* base, const char* suffix,
                                                     const char** out_name);
/* Adds a constant tensor (retained by the graph) as an initializer with a new name. */
STAX_MUST_USE stax_status_t stax_onnx_scope_add_constant(stax_onnx_scope_t* scope,
                                                         const char* base, const char* suffix,
                                                         stax_tensor_t* tensor,
                                                         stax_value_id_t* out_value);

/* Hints for a subgraph's inputs when the model leaves their types out (a Loop body's inputs
 * follow from the Loop node's inputs). dtype INVALID / rank -1: no hint. */
typedef struct stax_onnx_input_hint_t {
  stax_dtype_t dtype;
  int32_t rank;
  bool is_sequence; /* a loop-carried sequence: dtype is its elements', rank unused */
} stax_onnx_input_hint_t;

/* Imports a GraphProto into `graph` (a fresh graph or subgraph) under `parent` (NULL for the
 * model's graph). */
STAX_MUST_USE stax_status_t stax_onnx_import_graph(stax_onnx_importer_t* importer,
                                                   stax_onnx_scope_t* parent,
                                                   const Onnx__GraphProto* proto,
                                                   const char* what, stax_graph_t* graph,
                                                   int32_t hint_count,
                                                   const stax_onnx_input_hint_t* hints);

/* ---- sequence_map.c --------------------------------------------------------------------- */

/* Converts a SequenceMap node into its ONNX function: a Loop over the first input's length
 * whose body reads each element with SequenceAt, runs the SequenceMap body and appends its
 * outputs with SequenceInsert. */
STAX_MUST_USE stax_status_t stax_onnx_convert_sequence_map(stax_onnx_scope_t* scope,
                                                           const Onnx__NodeProto* node,
                                                           int32_t index);

/* ---- value_types.c ---------------------------------------------------------------------- */

/* A ValueInfoProto's tensor type. Missing parts: *out_dtype INVALID (no elem_type), *out_rank
 * -1 (no shape). dims (room for STAX_MAX_RANK) get constants for dim_value, the options'
 * binding or a named symbol for dim_param. Dims that carry no information get a fresh symbol
 * when unknown_dims is NULL; otherwise they are left NULL and flagged in unknown_dims (for
 * declarations, where the inferred dim stands in). Non-tensor types are UNIMPLEMENTED. */
/* A ValueInfoProto's sequence type (sequence(tensor(dtype))): *out_is_sequence false when it
 * is not one. The element shape keeps only dim_values: a dim_param in an element type may
 * differ between elements (ONNX's own SequenceMap tests rely on that), so it is NULL like an
 * unknown dim; *out_elem_rank is -1 without a shape. Sequences of non-tensors are
 * UNIMPLEMENTED. */
STAX_MUST_USE stax_status_t stax_onnx_sequence_type(stax_shape_ctx_t* shape,
                                                    const Onnx__ValueInfoProto* info,
                                                    const char* what, bool* out_is_sequence,
                                                    stax_dtype_t* out_dtype,
                                                    int32_t* out_elem_rank,
                                                    const stax_dim_t** elem_dims);
STAX_MUST_USE stax_status_t stax_onnx_value_type(stax_onnx_importer_t* importer,
                                                 stax_shape_ctx_t* shape,
                                                 const Onnx__ValueInfoProto* info,
                                                 const char* what, stax_dtype_t* out_dtype,
                                                 int32_t* out_rank, const stax_dim_t** dims,
                                                 bool* unknown_dims);
/* A fresh symbol for an unknown dim (range per options). */
STAX_MUST_USE stax_status_t stax_onnx_fresh_dim(stax_onnx_importer_t* importer,
                                                stax_shape_ctx_t* shape, const char* origin,
                                                const stax_dim_t** out_dim);

/* ---- attributes.c ----------------------------------------------------------------------- */

/* A node's attributes as stax_attr_t. The list owns a reference to each TENSOR value and each
 * GRAPH value until the node is added (then the graph owns the subgraphs). */
typedef struct stax_onnx_attrs_t {
  int32_t count, capacity;
  stax_attr_t* items; /* in the importer arena */
} stax_onnx_attrs_t;

/* Converts every attribute of `node` (subgraphs imported under `scope`). */
STAX_MUST_USE stax_status_t stax_onnx_attrs_convert(stax_onnx_scope_t* scope,
                                                    const Onnx__NodeProto* node,
                                                    const char* node_name,
                                                    stax_op_t op,
                                                    const stax_value_id_t* inputs,
                                                    int32_t input_count,
                                                    stax_onnx_attrs_t* attrs);
/* After add_node succeeded: the graph owns the subgraphs; drop our tensor references. */
void stax_onnx_attrs_committed(stax_onnx_attrs_t* attrs);
/* After a failure: release tensors, destroy subgraphs. */
void stax_onnx_attrs_discard(stax_onnx_attrs_t* attrs);
const stax_attr_t* stax_onnx_attrs_find(const stax_onnx_attrs_t* attrs, const char* name);
/* Removes an attribute if present, releasing what it owns (returns whether it was). */
bool stax_onnx_attrs_remove(stax_onnx_attrs_t* attrs, const char* name);
/* Adds or replaces an attribute (INT, FLOAT, STRING, INTS, FLOATS; the name and payload are
 * copied into the importer arena). */
STAX_MUST_USE stax_status_t stax_onnx_attrs_set(stax_onnx_importer_t* importer,
                                                stax_onnx_attrs_t* attrs, stax_attr_t attr);

/* ---- node_convert.c / legacy_ops.c ------------------------------------------------------ */

/* One ONNX node on its way into the graph. */
typedef struct stax_onnx_node_t {
  stax_onnx_scope_t* scope;
  const Onnx__NodeProto* proto;
  const char* name;               /* the node's name or "<op_type>#<index>" */
  const char* op_type;
  stax_op_t op;
  int64_t opset;
  int32_t input_count, input_capacity;
  stax_value_id_t* inputs;        /* importer arena */
  int32_t output_count;
  const char** output_names;      /* importer arena; every entry set */
  stax_onnx_attrs_t attrs;
} stax_onnx_node_t;

/* Converts and adds one node (index is its position in its graph). */
STAX_MUST_USE stax_status_t stax_onnx_convert_node(stax_onnx_scope_t* scope,
                                                   const Onnx__NodeProto* proto,
                                                   int32_t index);
/* Sets input i (growing the list with STAX_VALUE_NONE as needed). */
STAX_MUST_USE stax_status_t stax_onnx_node_set_input(stax_onnx_node_t* node, int32_t i,
                                                     stax_value_id_t value);
/* Adds a stax node built from pieces, outputs named as given (NULL entries get new names);
 * the ONNX node's name with a suffix names it. */
STAX_MUST_USE stax_status_t stax_onnx_emit(stax_onnx_node_t* node, stax_op_t op,
                                           const char* suffix, int32_t input_count,
                                           const stax_value_id_t* inputs, int32_t output_count,
                                           const char* const* output_names, int32_t attr_count,
                                           const stax_attr_t* attrs,
                                           stax_value_id_t* out_outputs);
/* A constant int64 vector / scalar of the node's, as an initializer. */
STAX_MUST_USE stax_status_t stax_onnx_node_int64_constant(stax_onnx_node_t* node,
                                                          const char* suffix, bool scalar,
                                                          int32_t count, const int64_t* values,
                                                          stax_value_id_t* out_value);
/* A scalar of `dtype` holding `value` (converted), as an initializer. */
STAX_MUST_USE stax_status_t stax_onnx_node_scalar_constant(stax_onnx_node_t* node,
                                                           const char* suffix,
                                                           stax_dtype_t dtype, double value,
                                                           stax_value_id_t* out_value);

/* Rewrites a node of an older opset into the current form before it is added: moves
 * attributes into inputs, drops harmless legacy attributes, renames ops. Sets *out_done when
 * it emitted the node itself (multi-node rewrites). */
STAX_MUST_USE stax_status_t stax_onnx_legacy_convert(stax_onnx_node_t* node, bool* out_done);

#endif /* STAX_ONNX_ONNX_INTERNAL_H_ */
