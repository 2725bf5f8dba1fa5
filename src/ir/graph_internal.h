/* Internal view of the graph IR, shared by src/ir (graph, verifier, dump) and src/passes
 * (shape inference and later passes). Users see only include/stax/graph.h. */
#ifndef STAX_IR_GRAPH_INTERNAL_H_
#define STAX_IR_GRAPH_INTERNAL_H_

#include "base/arena.h"
#include "base/hash_map.h"
#include "stax/graph.h"

/* Attribute as stored in the graph: names, strings and arrays live in the graph's arena. */
typedef struct stax_node_attr_t {
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
    stax_tensor_t* tensor; /* retained */
    stax_graph_t* graph;   /* owned */
  } value;
} stax_node_attr_t;

typedef struct stax_node_t {
  stax_op_t op;
  const char* name;
  int32_t input_count;
  stax_value_id_t* inputs; /* STAX_VALUE_NONE for omitted optional inputs */
  int32_t output_count;
  stax_value_id_t* outputs;
  int32_t attr_count;
  stax_node_attr_t* attrs;
} stax_node_t;

enum {
  STAX_VALUE_IS_INPUT = 1u << 0,
  STAX_VALUE_IS_INITIALIZER = 1u << 1,
  STAX_VALUE_IS_OUTPUT = 1u << 2,
  STAX_VALUE_IS_CAPTURE = 1u << 3, /* a subgraph's stand-in for an outer value */
  STAX_VALUE_IS_DEAD = 1u << 4,    /* its producer was removed by a pass; nothing uses it */
};

/* elem_rank of a sequence whose elements' rank is not known (they may differ), and of one
 * known to be empty (SequenceEmpty): merging it with another sequence gives the other's. */
#define STAX_ELEM_RANK_UNKNOWN (-1)
#define STAX_ELEM_RANK_EMPTY (-2)

typedef struct stax_value_t {
  const char* name;
  stax_dtype_t dtype;
  int32_t rank;
  const stax_dim_t** dims; /* rank entries, in the graph arena */
  stax_node_id_t producer; /* -1 for inputs, initializers, captures */
  int32_t producer_output;
  uint32_t flags;
  stax_tensor_t* constant; /* initializer or value known at build time; retained; or NULL */
  /* Symbolic contents of a small integer tensor (rank 0 or 1), e.g. the output of Shape or
   * of Concat over shape pieces, so Reshape(x, Shape(y)) infers symbolically.
   * content_count is -1 when unknown. */
  int32_t content_count;
  const stax_dim_t** content;
  stax_value_id_t outer_value; /* for captures: the value in the parent graph */
  /* A sequence value (ONNX sequence(tensor)): dtype is the elements' dtype and rank 0, dims
   * NULL (the handle the VM holds, so tensor code sees a harmless scalar); elem_rank is the
   * elements' rank (-1: unknown, they may differ) and elem_dims their shared dims (NULL
   * entries where elements may differ). is_sequence false: elem_rank -1, elem_dims NULL. */
  bool is_sequence;
  int32_t elem_rank; /* or STAX_ELEM_RANK_UNKNOWN / STAX_ELEM_RANK_EMPTY */
  const stax_dim_t** elem_dims;
} stax_value_t;

struct stax_graph_s {
  stax_allocator_t allocator;
  stax_arena_t arena;           /* names, dims arrays, attribute payloads */
  stax_shape_ctx_t* shape;      /* owned by the top-level graph, shared by subgraphs */
  stax_graph_t* parent;
  stax_value_t* values;
  int32_t value_count, value_capacity;
  stax_node_t* nodes;
  int32_t node_count, node_capacity;
  stax_value_id_t* inputs;
  int32_t input_count, input_capacity;
  stax_value_id_t* outputs;
  int32_t output_count, output_capacity;
  stax_hash_map_t* names;       /* value name -> value id */
  int32_t next_auto_name;
};

static inline stax_value_t* stax_graph_value(stax_graph_t* g, stax_value_id_t v) {
  return &g->values[v];
}
static inline stax_node_t* stax_graph_node(stax_graph_t* g, stax_node_id_t n) {
  return &g->nodes[n];
}

/* ---- for shape functions ----------------------------------------------------------------- */

/* The inference context a shape function receives. Inputs that were omitted are NULL. */
typedef struct stax_shape_infer_t {
  stax_graph_t* graph;
  stax_node_t* node;
  stax_node_id_t node_id;
  stax_shape_ctx_t* shape;
} stax_shape_infer_t;

/* Input i's value, or NULL when the input is absent (omitted optional or beyond the count). */
const stax_value_t* stax_infer_input(const stax_shape_infer_t* ic, int32_t i);
/* Sets output i's dtype and shape (dims copied into the arena). */
STAX_MUST_USE stax_status_t stax_infer_set_output(stax_shape_infer_t* ic, int32_t i,
                                                  stax_dtype_t dtype, int32_t rank,
                                                  const stax_dim_t* const* dims);
/* Makes output i a sequence of `dtype` tensors whose elements have elem_rank (-1: unknown)
 * and share elem_dims (NULL, or elem_rank entries with NULL where they may differ). */
STAX_MUST_USE stax_status_t stax_infer_set_sequence_output(stax_shape_infer_t* ic, int32_t i,
                                                           stax_dtype_t dtype, int32_t elem_rank,
                                                           const stax_dim_t* const* elem_dims);
/* Merges what two sequences (or a sequence and a tensor to be inserted) say about their
 * elements: the rank when both agree (EMPTY gives way to the other), and each dim both know
 * equal, NULL otherwise; constants_only keeps symbolic dims out (loop-carried and branch
 * results, whose symbols may be bound per iteration or per branch). out_dims has
 * STAX_MAX_RANK entries. */
void stax_shape_merge_elements(stax_shape_ctx_t* shape, int32_t rank_a,
                               const stax_dim_t* const* dims_a, int32_t rank_b,
                               const stax_dim_t* const* dims_b, bool constants_only,
                               int32_t* out_rank, const stax_dim_t** out_dims);
/* Records symbolic contents of output i (small integer tensors). */
STAX_MUST_USE stax_status_t stax_infer_set_content(stax_shape_infer_t* ic, int32_t i,
                                                   int32_t count,
                                                   const stax_dim_t* const* content);
/* Records a constant value for output i (retained). */
void stax_infer_set_constant(stax_shape_infer_t* ic, int32_t i, stax_tensor_t* tensor);
/* An error status prefixed with "<Op> node '<name>': ". */
STAX_MUST_USE stax_status_t stax_infer_error(const stax_shape_infer_t* ic,
                                             stax_status_code_t code, const char* fmt, ...)
    STAX_PRINTF(3, 4);
/* The shape context's pending construction error (OOM, ...) annotated with the node, or OK. */
STAX_MUST_USE stax_status_t stax_infer_check_dims(const stax_shape_infer_t* ic);
/* Unifies two dims, naming the node and the input/dim positions in any contradiction. */
STAX_MUST_USE stax_status_t stax_infer_unify(stax_shape_infer_t* ic, const stax_dim_t* a,
                                             int32_t input_a, int32_t dim_a,
                                             const stax_dim_t* b, int32_t input_b,
                                             int32_t dim_b);

/* Attribute lookup on a node; NULL / the default when missing. The typed getters return
 * INVALID_ARGUMENT (naming node and attribute) when the attribute exists with another type. */
const stax_node_attr_t* stax_node_attr_find(const stax_node_t* node, const char* name);
STAX_MUST_USE stax_status_t stax_node_attr_int(const stax_node_t* node, const char* name,
                                               int64_t default_value, int64_t* out_value);
STAX_MUST_USE stax_status_t stax_node_attr_float(const stax_node_t* node, const char* name,
                                                 float default_value, float* out_value);
/* An INT attribute holding an ONNX type code (output_dtype, to, ...): *out_code its value (0
 * when missing), *out_dtype the stax dtype for it (INVALID when missing, 0, or a type stax has
 * no dtype for: the caller says which it needs). */
STAX_MUST_USE stax_status_t stax_node_attr_onnx_dtype(const stax_node_t* node, const char* name,
                                                      int64_t* out_code, stax_dtype_t* out_dtype);
/* *out_value borrows the node's string, or default_value. */
STAX_MUST_USE stax_status_t stax_node_attr_string(const stax_node_t* node, const char* name,
                                                  const char* default_value,
                                                  const char** out_value);
/* *out_count = -1 when the attribute is missing. */
STAX_MUST_USE stax_status_t stax_node_attr_ints(const stax_node_t* node, const char* name,
                                                int32_t* out_count, const int64_t** out_data);
STAX_MUST_USE stax_status_t stax_node_attr_floats(const stax_node_t* node, const char* name,
                                                  int32_t* out_count, const float** out_data);

/* ---- op table and attribute schema (src/ir/ops.c, src/ir/attrs.c) ----------------------- */

/* Whether operand k of an op must be a sequence value (STAX_OPF_SEQUENCE_IN/OUT), a tensor,
 * or may be either (Identity, If, Loop pass sequences through). */
typedef enum stax_operand_kind_e {
  STAX_OPERAND_TENSOR = 0,
  STAX_OPERAND_SEQUENCE = 1,
  STAX_OPERAND_ANY = 2,
} stax_operand_kind_t;
stax_operand_kind_t stax_op_input_kind(stax_op_t op, int32_t k);
stax_operand_kind_t stax_op_output_kind(stax_op_t op, int32_t k);
int32_t stax_op_min_inputs(stax_op_t op);
int32_t stax_op_max_inputs(stax_op_t op);   /* -1: variadic */
int32_t stax_op_min_outputs(stax_op_t op);
int32_t stax_op_max_outputs(stax_op_t op);  /* -1: variadic */
/* Checks one attribute against op_attrs.def; errors name the node, op and attribute. */
STAX_MUST_USE stax_status_t stax_attr_check_schema(stax_op_t op, const char* node_name,
                                                   const char* attr_name,
                                                   stax_attr_type_t type);
/* Validates and deep-copies attributes into the graph's arena (nothing retained yet). */
STAX_MUST_USE stax_status_t stax_node_attrs_copy(stax_graph_t* graph, stax_op_t op,
                                                 const char* node_name, int32_t count,
                                                 const stax_attr_t* attrs,
                                                 stax_node_attr_t** out_attrs);
/* Takes the references a committed node holds (tensor attributes). */
void stax_node_attrs_commit(stax_node_t* node);
/* Drops them: releases tensors, destroys owned subgraphs. */
void stax_node_attrs_release(stax_node_t* node);

/* Shape functions, one per family named in ops.def (src/passes/shape/). */
typedef stax_status_t (*stax_shape_fn)(stax_shape_infer_t* ic);
#define STAX_OP(name, min_in, max_in, min_out, max_out, flags, family) \
  STAX_MUST_USE stax_status_t stax_shape_##family(stax_shape_infer_t* ic);
#include "stax/ops.def"
#undef STAX_OP

/* The shape function of an op. */
stax_shape_fn stax_op_shape_fn(stax_op_t op);
/* Runs the op's shape function for a node already stored in the graph. */
STAX_MUST_USE stax_status_t stax_shape_infer_node(stax_graph_t* graph, stax_node_id_t node);

/* Build-time constant folding (src/passes/fold.c): when every input of a committed node is a
 * constant, or its integer outputs' contents are all known, evaluates it once with the generic
 * kernels and records the outputs as constants (with their contents), so later shape functions
 * see values. Best effort: a node the kernels refuse, or whose result would be large, stays as
 * it is and reports its error when it runs. Returns true when it folded the node. */
bool stax_fold_node(stax_graph_t* graph, stax_node_id_t node);
/* Records the small integer contents of a constant (int32/int64, rank <= 1) on its value. */
STAX_MUST_USE stax_status_t stax_graph_set_constant_content(stax_graph_t* graph,
                                                            stax_value_id_t value);

#endif /* STAX_IR_GRAPH_INTERNAL_H_ */
