/* stax graph IR: values with a dtype and a symbolic shape, nodes with an op and attributes,
 * graph inputs, outputs and initializers. The C builder API.
 *
 * Adding a node runs its shape function at once, so a bad node (wrong arity, bad attribute,
 * dtype mismatch, shapes that cannot broadcast) is rejected when it is added, with a message
 * naming the node, the input and the dim. Ranks are always static; dims are symbolic. */
#ifndef STAX_GRAPH_H_
#define STAX_GRAPH_H_

#include <stdio.h>

#include "stax/base.h"
#include "stax/runtime.h"
#include "stax/shape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ops --------------------------------------------------------------------------------- */

typedef enum stax_op_e {
#define STAX_OP(name, min_in, max_in, min_out, max_out, flags, family) STAX_OP_##name,
#include "stax/ops.def"
#undef STAX_OP
  STAX_OP_COUNT,
  STAX_OP_INVALID = -1
} stax_op_t;

enum {
  STAX_OPF_ELEMENTWISE = 1u << 0,    /* output element i depends on input element i */
  STAX_OPF_BROADCAST = 1u << 1,      /* inputs broadcast numpy-style */
  STAX_OPF_REDUCTION = 1u << 2,      /* reduces or normalizes along axes */
  STAX_OPF_VIEW = 1u << 3,           /* can be a metadata-only view */
  STAX_OPF_DATA_DEPENDENT = 1u << 4, /* output shape depends on input values */
  STAX_OPF_CONTROL = 1u << 5,        /* has subgraphs */
  STAX_OPF_SHAPE_ONLY = 1u << 6,     /* reads only its input's shape */
  STAX_OPF_OPTIONAL_SLOTS = 1u << 7, /* even the first min_inputs may be omitted (Loop's M and
                                        cond): the slots must exist, the values need not */
  STAX_OPF_SEQUENCE_IN = 1u << 8,    /* input 0 is a sequence value (the rest are tensors) */
  STAX_OPF_SEQUENCE_OUT = 1u << 9,   /* output 0 is a sequence value */
};
#define STAX_OPF_SEQUENCE (STAX_OPF_SEQUENCE_IN | STAX_OPF_SEQUENCE_OUT)

const char* stax_op_name(stax_op_t op);          /* "invalid" for a bad op */
stax_op_t stax_op_from_name(const char* name);   /* STAX_OP_INVALID if unknown */
uint32_t stax_op_flags(stax_op_t op);

/* ---- attributes -------------------------------------------------------------------------- */

typedef struct stax_graph_s stax_graph_t;

typedef enum stax_attr_type_e {
  STAX_ATTR_INT,
  STAX_ATTR_FLOAT,
  STAX_ATTR_STRING,
  STAX_ATTR_INTS,
  STAX_ATTR_FLOATS,
  STAX_ATTR_STRINGS,
  STAX_ATTR_TENSOR,
  STAX_ATTR_GRAPH,
} stax_attr_type_t;

/* An attribute as passed to stax_graph_add_node: the graph copies names, strings and arrays;
 * it retains a TENSOR and takes ownership of a GRAPH (a subgraph made with
 * stax_graph_create_subgraph) when the node is added successfully. */
typedef struct stax_attr_t {
  const char* name;
  stax_attr_type_t type;
  union {
    int64_t i;
    float f;
    const char* s;
    struct {
      int32_t count;
      const int64_t* data;
    } ints;
    struct {
      int32_t count;
      const float* data;
    } floats;
    struct {
      int32_t count;
      const char* const* data;
    } strings;
    stax_tensor_t* tensor;
    stax_graph_t* graph;
  } value;
} stax_attr_t;

stax_attr_t stax_attr_int(const char* name, int64_t value);
stax_attr_t stax_attr_float(const char* name, float value);
stax_attr_t stax_attr_string(const char* name, const char* value);
stax_attr_t stax_attr_ints(const char* name, int32_t count, const int64_t* values);
stax_attr_t stax_attr_floats(const char* name, int32_t count, const float* values);
stax_attr_t stax_attr_strings(const char* name, int32_t count, const char* const* values);
stax_attr_t stax_attr_tensor(const char* name, stax_tensor_t* tensor);
stax_attr_t stax_attr_graph(const char* name, stax_graph_t* subgraph);
const char* stax_attr_type_name(stax_attr_type_t type);

/* ---- graphs ------------------------------------------------------------------------------ */

typedef int32_t stax_value_id_t;
typedef int32_t stax_node_id_t;
#define STAX_VALUE_NONE ((stax_value_id_t)-1)

STAX_MUST_USE stax_status_t stax_graph_create(stax_allocator_t allocator,
                                              stax_graph_t** out_graph);
/* A subgraph (If branch, Loop body) sharing the parent's shape context; it may use parent
 * values through stax_graph_capture. Owned by the caller until passed as a GRAPH attribute. */
STAX_MUST_USE stax_status_t stax_graph_create_subgraph(stax_graph_t* parent,
                                                       stax_graph_t** out_subgraph);
void stax_graph_destroy(stax_graph_t* graph);

stax_shape_ctx_t* stax_graph_shape_ctx(stax_graph_t* graph);
stax_graph_t* stax_graph_parent(const stax_graph_t* graph); /* NULL for a top-level graph */

/* A graph input; dims are expressions of the graph's shape context. */
STAX_MUST_USE stax_status_t stax_graph_add_input(stax_graph_t* graph, const char* name,
                                                 stax_dtype_t dtype, int32_t rank,
                                                 const stax_dim_t* const* dims,
                                                 stax_value_id_t* out_value);
/* A graph input holding a sequence of tensors (ONNX sequence(tensor(dtype))). elem_rank is
 * the rank every element has, or -1 when unknown (elements may then differ in rank);
 * elem_dims (NULL, or elem_rank entries) gives dims every element shares, NULL entries for
 * dims that may differ between elements. A sequence value has rank 0 as a tensor (the
 * handle); stax_value_is_sequence tells them apart. */
STAX_MUST_USE stax_status_t stax_graph_add_sequence_input(stax_graph_t* graph, const char* name,
                                                          stax_dtype_t dtype, int32_t elem_rank,
                                                          const stax_dim_t* const* elem_dims,
                                                          stax_value_id_t* out_value);
/* A constant (weights); the graph retains the tensor. */
STAX_MUST_USE stax_status_t stax_graph_add_initializer(stax_graph_t* graph, const char* name,
                                                       stax_tensor_t* tensor,
                                                       stax_value_id_t* out_value);
/* Makes a value of the parent graph (or an ancestor) usable inside a subgraph; returns the
 * local value that stands for it (the same local value for repeated captures). */
STAX_MUST_USE stax_status_t stax_graph_capture(stax_graph_t* subgraph,
                                               stax_value_id_t outer_value,
                                               stax_value_id_t* out_local_value);

typedef struct stax_node_desc_t {
  stax_op_t op;
  const char* name;                /* NULL: a unique name is made ("Add_3") */
  int32_t input_count;
  const stax_value_id_t* inputs;   /* STAX_VALUE_NONE for an omitted optional input */
  int32_t output_count;
  const char* const* output_names; /* NULL, or entries NULL: names are made ("<node>:0") */
  int32_t attr_count;
  const stax_attr_t* attrs;
} stax_node_desc_t;

/* Adds a node, checks arity and attributes against the op's schema, and infers its outputs'
 * dtypes and shapes. out_outputs receives output_count value ids. On error nothing is added
 * and ownership of GRAPH attributes stays with the caller. */
STAX_MUST_USE stax_status_t stax_graph_add_node(stax_graph_t* graph,
                                                const stax_node_desc_t* desc,
                                                stax_value_id_t* out_outputs);
STAX_MUST_USE stax_status_t stax_graph_add_output(stax_graph_t* graph, stax_value_id_t value);

/* Unifies a value's inferred shape with a declared one (ONNX value_info / graph outputs);
 * dtype and rank must match; dims are unified (contradictions are errors naming the value). */
STAX_MUST_USE stax_status_t stax_graph_declare_shape(stax_graph_t* graph,
                                                     stax_value_id_t value,
                                                     stax_dtype_t dtype, int32_t rank,
                                                     const stax_dim_t* const* dims);

/* ---- inspection -------------------------------------------------------------------------- */

int32_t stax_graph_value_count(const stax_graph_t* graph);
int32_t stax_graph_node_count(const stax_graph_t* graph);
int32_t stax_graph_input_count(const stax_graph_t* graph);
int32_t stax_graph_output_count(const stax_graph_t* graph);
stax_value_id_t stax_graph_input(const stax_graph_t* graph, int32_t index);
stax_value_id_t stax_graph_output(const stax_graph_t* graph, int32_t index);
/* STAX_VALUE_NONE if no value has that name. */
stax_value_id_t stax_graph_find_value(const stax_graph_t* graph, const char* name);

const char* stax_value_name(const stax_graph_t* graph, stax_value_id_t value);
stax_dtype_t stax_value_dtype(const stax_graph_t* graph, stax_value_id_t value);
int32_t stax_value_rank(const stax_graph_t* graph, stax_value_id_t value);
const stax_dim_t* const* stax_value_dims(const stax_graph_t* graph, stax_value_id_t value);
/* Sequence values: is_sequence, and the elements' rank (-1: unknown or not a sequence) and
 * shared dims (elem_rank entries, NULL where elements may differ). */
bool stax_value_is_sequence(const stax_graph_t* graph, stax_value_id_t value);
int32_t stax_value_elem_rank(const stax_graph_t* graph, stax_value_id_t value);
const stax_dim_t* const* stax_value_elem_dims(const stax_graph_t* graph, stax_value_id_t value);
/* The constant tensor of an initializer or a value known at build time; NULL otherwise. */
stax_tensor_t* stax_value_constant(const stax_graph_t* graph, stax_value_id_t value);
/* The producing node, or -1 for inputs, initializers and captures. */
stax_node_id_t stax_value_producer(const stax_graph_t* graph, stax_value_id_t value);

stax_op_t stax_node_op(const stax_graph_t* graph, stax_node_id_t node);
const char* stax_node_name(const stax_graph_t* graph, stax_node_id_t node);
int32_t stax_node_input_count(const stax_graph_t* graph, stax_node_id_t node);
stax_value_id_t stax_node_input(const stax_graph_t* graph, stax_node_id_t node, int32_t i);
int32_t stax_node_output_count(const stax_graph_t* graph, stax_node_id_t node);
stax_value_id_t stax_node_output(const stax_graph_t* graph, stax_node_id_t node, int32_t i);

/* Checks the whole graph: every input produced before use (no cycles), arity, attribute types,
 * output ids valid, subgraphs recursively. */
STAX_MUST_USE stax_status_t stax_graph_verify(const stax_graph_t* graph);
/* A readable text dump: inputs with symbolic shapes, one line per node, outputs. */
STAX_MUST_USE stax_status_t stax_graph_dump(const stax_graph_t* graph, FILE* out);

#ifdef __cplusplus
}
#endif

#endif /* STAX_GRAPH_H_ */
