/* The graph -> extended-form compiler's shared state, split over compile.c (driver, registers,
 * shape descriptors, guards, SHAPE_VARIANT tables, node copies), compile_nodes.c (lowering of
 * each node: kernels, views, If, Loop) and compile_liveness.c (FREE_TENSOR insertion). */
#ifndef STAX_VM_COMPILE_H_
#define STAX_VM_COMPILE_H_

#include "vm/program.h"

/* Register map of one graph (the root or a subgraph): value id -> register, -1 until defined. */
typedef struct stax_vm_graph_map_t {
  stax_graph_t* graph;
  int32_t* registers;
  int32_t value_count;
  struct stax_vm_graph_map_t* next;
} stax_vm_graph_map_t;

/* Scopes: the top level (0), each If branch, each Loop body. A use of a register inside a
 * scope nested deeper than the register's definition extends its life to that construct's
 * exit (the If's join, the instruction after LOOP_END). */
typedef struct stax_vm_scope_t {
  int32_t parent; /* -1 for the top level */
  int32_t exit;   /* instruction index where control leaves the construct */
} stax_vm_scope_t;

typedef struct stax_vm_register_info_t {
  int32_t scope; /* where it is defined */
  bool no_free;  /* inputs, constants, program outputs: never freed by FREE_TENSOR */
} stax_vm_register_info_t;

typedef struct stax_vm_compiler_t {
  stax_allocator_t allocator;
  stax_program_t* program;
  stax_graph_t* root;
  stax_shape_ctx_t* shape;
  bool static_variants;
  uint32_t disabled_passes; /* STAX_PASS_BIT set: `shapefold` gates DIM_VALUES, `dce` the sweep */
  stax_vm_graph_map_t* maps;

  int32_t symbol_count;
  uint8_t* bound; /* per symbol: bound at the current point of compilation */

  /* Per register (grown with the program's register table). */
  stax_vm_register_info_t* register_info;
  int32_t register_capacity;

  /* Per extended instruction. */
  int32_t* instruction_scope;
  int32_t instruction_capacity;

  stax_vm_scope_t* scopes;
  int32_t scope_count;
  int32_t scope_capacity;
  int32_t current_scope;

  stax_hash_map_t* code_cache; /* resolved dim pointer -> dim code index + 1 */
  const stax_dim_t** code_dims; /* dim code index -> the resolved dim it computes */
  int32_t code_dims_capacity;
} stax_vm_compiler_t;

/* ---- compile.c ---------------------------------------------------------------------------- */

STAX_MUST_USE stax_status_t stax_vm_compiler_map(stax_vm_compiler_t* c, stax_graph_t* graph,
                                                 stax_vm_graph_map_t** out_map);
/* The register holding a value that is already defined (captures resolve to the outer one). */
STAX_MUST_USE stax_status_t stax_vm_compiler_use(stax_vm_compiler_t* c, stax_graph_t* graph,
                                                 stax_value_id_t value, int32_t* out_register);
/* Gives a value its register (descriptor from its dtype and resolved dims), defined in the
 * current scope. */
STAX_MUST_USE stax_status_t stax_vm_compiler_define(stax_vm_compiler_t* c, stax_graph_t* graph,
                                                    stax_value_id_t value,
                                                    stax_vm_layout_t layout,
                                                    int32_t* out_register);
/* Appends an instruction recorded in the current scope. */
STAX_MUST_USE stax_status_t stax_vm_compiler_emit(stax_vm_compiler_t* c, int32_t opcode,
                                                  int32_t node, const int32_t* operands,
                                                  int32_t operand_count, int32_t* out_index);
/* Sets operand `k` (a word index within the instruction's operands) of instruction `index`. */
void stax_vm_compiler_patch(stax_vm_compiler_t* c, int32_t index, int32_t k, int32_t value);
STAX_MUST_USE stax_status_t stax_vm_compiler_new_scope(stax_vm_compiler_t* c, int32_t* out_scope);

/* The dim codes computing an integer value (int64/int32, rank 0 or static rank 1, at most
 * STAX_VM_DIM_VALUES_MAX elements) from its symbolic contents, when shape inference knows every
 * element and each uses only symbols bound at this point; *out_count = -1 otherwise. */
STAX_MUST_USE stax_status_t stax_vm_compiler_content_codes(stax_vm_compiler_t* c,
                                                           const stax_value_t* value,
                                                           int32_t* codes, int32_t* out_count);
/* True when every dim of the register's descriptor is computable from bound symbols. */
bool stax_vm_compiler_computable(const stax_vm_compiler_t* c, int32_t reg);
/* Emits a SHAPE_VARIANT for registers whose values a kernel or control flow just produced:
 * binds symbols not bound yet, checks the others. Nothing is emitted when there is nothing
 * to bind or check. */
STAX_MUST_USE stax_status_t stax_vm_compiler_shape_variant(stax_vm_compiler_t* c, int32_t node,
                                                           int32_t count, const int32_t* registers);
/* Copies a node (attributes deep-copied into the program's tables) with registers for its
 * operands; returns its program node index. */
STAX_MUST_USE stax_status_t stax_vm_compiler_copy_node(stax_vm_compiler_t* c, stax_graph_t* graph,
                                                       stax_node_id_t node, int32_t* out_index);

/* ---- compile_nodes.c --------------------------------------------------------------------- */

/* Compiles every node of `graph` in order into the current scope. */
STAX_MUST_USE stax_status_t stax_vm_compile_graph_nodes(stax_vm_compiler_t* c, stax_graph_t* graph);
/* True when every output of the node is a constant known at compile time (it is not run). */
bool stax_vm_node_is_folded(stax_graph_t* graph, const stax_node_t* node);

/* ---- compile_liveness.c ------------------------------------------------------------------- */

STAX_MUST_USE stax_status_t stax_vm_compiler_insert_frees(stax_vm_compiler_t* c);
/* Removes instructions without effects whose results nothing reads (compile_dead.c). */
STAX_MUST_USE stax_status_t stax_vm_compiler_remove_dead(stax_vm_compiler_t* c,
                                                         int32_t* out_removed);

#endif /* STAX_VM_COMPILE_H_ */
