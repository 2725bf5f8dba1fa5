/* The graph-pass framework shared by the files of src/passes: a pass context over one graph
 * (the top level or a subgraph), use counts, value replacement, in-place node rewrites checked by
 * shape inference, dead-node marking and compaction, and the tally a pass reports.
 *
 * A pass never renames or removes what the graph's user sees: graph inputs, graph outputs and
 * values a subgraph captures are pinned, so a rewrite that would replace one is skipped. */
#ifndef STAX_PASSES_PASS_H_
#define STAX_PASSES_PASS_H_

#include "ir/graph_internal.h"
#include "stax/vm.h"

#define STAX_PASS_TALLY_MAX 8

typedef struct stax_pass_tally_t {
  const char* label[STAX_PASS_TALLY_MAX]; /* static strings: "Gelu fused" */
  int32_t count[STAX_PASS_TALLY_MAX];
} stax_pass_tally_t;

typedef struct stax_pass_ctx_t {
  stax_graph_t* graph;
  int32_t* uses;   /* per value: node inputs, graph outputs and subgraph captures */
  bool* pinned;    /* per value: graph output or captured by a subgraph */
  bool* dead;      /* per node: removed at the next compaction */
  int32_t value_capacity, node_capacity;
  bool uses_valid;
  int32_t changes; /* rewrites in the current pass run */
  stax_pass_tally_t tally;
} stax_pass_ctx_t;

STAX_MUST_USE stax_status_t stax_pass_ctx_init(stax_pass_ctx_t* ctx, stax_graph_t* graph);
void stax_pass_ctx_deinit(stax_pass_ctx_t* ctx);

/* Counts uses (recomputed after a change). */
STAX_MUST_USE stax_status_t stax_pass_refresh_uses(stax_pass_ctx_t* ctx);
/* Fills uses[value_count] for a graph: node inputs (live nodes only when dead != NULL), graph
 * outputs, captures by direct subgraphs. Also used by the compiler to skip unused constants. */
void stax_graph_count_uses(const stax_graph_t* graph, const bool* dead, int32_t* uses,
                           bool* pinned);

/* Adds `count` under `label` (a static string); labels past STAX_PASS_TALLY_MAX are dropped
 * from the detail text, not from the change count. */
void stax_pass_tally_add(stax_pass_tally_t* tally, const char* label, int32_t count);
/* Records one rewrite under `label`. */
void stax_pass_count(stax_pass_ctx_t* ctx, const char* label);

/* The node producing v (live), or NULL for inputs, constants and dead producers. */
stax_node_t* stax_pass_producer(stax_pass_ctx_t* ctx, stax_value_id_t v);
/* The producer of v when it is `op`, else NULL. */
stax_node_t* stax_pass_producer_op(stax_pass_ctx_t* ctx, stax_value_id_t v, stax_op_t op);
/* True when a and b have the same dtype, rank and dims (symbolically equal). */
bool stax_pass_same_type(stax_pass_ctx_t* ctx, stax_value_id_t a, stax_value_id_t b);
/* The single element of a constant floating-point or integer tensor, as double; false when v
 * is not a constant of one element. */
bool stax_pass_scalar(stax_pass_ctx_t* ctx, stax_value_id_t v, double* out_value);
/* True when v is a constant whose every element equals `value` (any element count). */
bool stax_pass_constant_all(stax_pass_ctx_t* ctx, stax_value_id_t v, double value,
                            bool match_sign_of_zero);

/* A Transpose node's permutation for an input of `rank` dims (the default reverses them);
 * false when the attribute is malformed. */
bool stax_pass_transpose_perm(const stax_node_t* node, int32_t rank, int64_t* out_perm);

/* Replaces every use of `from` by `to` in live nodes. Refused (false, nothing changed) when
 * `from` is pinned or the two differ in dtype, rank or dims. */
bool stax_pass_replace_value(stax_pass_ctx_t* ctx, stax_value_id_t from, stax_value_id_t to);

/* Rewrites node `id` in place into (op, inputs, attrs), keeping its outputs. The new form is
 * checked by its shape function: it must give every output the dtype and dims it had, or the
 * node is restored and false returned. Errors only for allocation failure. */
STAX_MUST_USE stax_status_t stax_pass_rewrite_node(stax_pass_ctx_t* ctx, stax_node_id_t id,
                                                   stax_op_t op, int32_t input_count,
                                                   const stax_value_id_t* inputs,
                                                   int32_t attr_count, const stax_attr_t* attrs,
                                                   bool* out_done);

/* A node's attributes in the builder's form (stax_attr_t, pointing into the node's own
 * storage), for re-adding the node with other inputs; false when it has more than `capacity`
 * or one of a kind other than INT, FLOAT, STRING or INTS. */
bool stax_pass_builder_attrs(const stax_node_t* node, stax_attr_t* out_attrs, int32_t capacity,
                             int32_t* out_count);

/* Element values of a constant tensor of any layout, converted to double (count = its element
 * count); false for dtypes that do not convert. */
bool stax_pass_read_doubles(const stax_tensor_t* t, double* out, int64_t count);

/* ---- growing the graph ----------------------------------------------------------------------
 * Most rewrites happen in place; a few need a new constant or node (BatchNormalization folded
 * into new Conv weights, or split into Mul + Add). These keep the context's per-value and
 * per-node arrays in step with the graph. */

/* Adds `tensor` as an initializer named after `base_name` (a suffix makes it unique); the graph
 * retains the tensor, the caller keeps its own reference. */
STAX_MUST_USE stax_status_t stax_pass_add_constant(stax_pass_ctx_t* ctx, const char* base_name,
                                                   stax_tensor_t* tensor,
                                                   stax_value_id_t* out_value);
/* Adds a node (desc's output names are ignored: one output, named after `base_name`) and moves
 * it to position `before`, so the nodes stay in topological order: its inputs must be produced
 * before that position. Nodes from `before` on move up by one. */
STAX_MUST_USE stax_status_t stax_pass_insert_node(stax_pass_ctx_t* ctx, stax_node_id_t before,
                                                  const stax_node_desc_t* desc,
                                                  const char* base_name,
                                                  stax_value_id_t* out_output);

/* Marks nodes dead and removes them from the graph, renumbering the rest. Outputs of removed
 * nodes that hold a constant become initializers; the others are marked STAX_VALUE_IS_DEAD
 * (nothing may use them). */
void stax_pass_compact(stax_pass_ctx_t* ctx);

/* The ops `widen` computes in float32 between Casts when their values are 16-bit (widen.c;
 * `stax info` asks it too). */
bool stax_pass_widens_op(stax_op_t op);

/* ---- the passes (one file each) ------------------------------------------------------------ */

#define STAX_PASS(name, summary) \
  STAX_MUST_USE stax_status_t stax_pass_run_##name(stax_pass_ctx_t* ctx);
#include "stax/passes.def"
#undef STAX_PASS

#endif /* STAX_PASSES_PASS_H_ */
