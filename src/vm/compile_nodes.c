/* Lowering of graph nodes to extended-form instructions:
 *   - a kernel call, with outputs preallocated (ALLOC_TENSOR[_FAST]) when their dims are
 *     computable from symbols already bound, else allocated by the kernel and followed by a
 *     SHAPE_VARIANT that binds the new symbols; the static variant when every dim is constant;
 *   - DIM_VALUES for integer outputs whose contents are dim expressions of bound symbols;
 *   - metadata-only views for Identity, Transpose, Expand, Reshape, Flatten, Squeeze and
 *     Unsqueeze (falling back to the kernel when the target shape is not computable);
 *   - If as JUMP_IF_FALSE / MOVE / JUMP around the two branches compiled inline;
 *   - Loop as LOOP_BEGIN, the body compiled inline once, LOOP_END. */
#include <string.h>

#include "vm/compile.h"

bool stax_vm_node_is_folded(stax_graph_t* graph, const stax_node_t* node) {
  if (node->output_count == 0) return false;
  for (int32_t k = 0; k < node->output_count; k++) {
    if (node->outputs[k] == STAX_VALUE_NONE) return false;
    if (!stax_graph_value(graph, node->outputs[k])->constant) return false;
  }
  return true;
}

static bool stax_vm_descriptor_is_static(const stax_program_t* program, int32_t reg) {
  return (program->descriptors[program->registers[reg].descriptor].flags &
          STAX_VM_DESCRIPTOR_STATIC) != 0;
}

static void stax_vm_set_layout(stax_vm_compiler_t* c, int32_t reg, stax_vm_layout_t layout) {
  c->program->descriptors[c->program->registers[reg].descriptor].layout = layout;
}

static stax_status_t stax_vm_define_outputs(stax_vm_compiler_t* c, stax_graph_t* graph,
                                            const stax_node_t* node, stax_vm_layout_t layout,
                                            int32_t* registers) {
  for (int32_t k = 0; k < node->output_count; k++)
    STAX_RETURN_IF_ERROR(stax_vm_compiler_define(c, graph, node->outputs[k], layout, &registers[k]),
                         "%s node '%s' output %d", stax_op_name(node->op), node->name, k);
  return STAX_OK;
}

/* ---- kernels ---------------------------------------------------------------------------------- */

static stax_status_t stax_vm_compile_kernel(stax_vm_compiler_t* c, stax_graph_t* graph,
                                            stax_node_id_t node_id) {
  const stax_node_t* node = stax_graph_node(graph, node_id);
  int32_t in = node->input_count, out = node->output_count;
  int32_t words = 3 + in + out;
  int32_t* operands = NULL;
  stax_status_t status = STAX_OK;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(c->allocator, (size_t)words * sizeof(int32_t),
                                             (void**)&operands));
  int32_t* inputs = operands + 2;
  int32_t* outputs = operands + 3 + in;
  operands[1] = in;
  operands[2 + in] = out;
  for (int32_t k = 0; k < in; k++) {
    inputs[k] = -1;
    if (node->inputs[k] != STAX_VALUE_NONE)
      STAX_GOTO_IF_ERROR(status, stax_vm_compiler_use(c, graph, node->inputs[k], &inputs[k]),
                         cleanup, "%s node '%s' input %d", stax_op_name(node->op), node->name, k);
  }
  STAX_GOTO_IF_ERROR(status, stax_vm_define_outputs(c, graph, node, STAX_VM_LAYOUT_CONTIGUOUS, outputs),
                     cleanup);
  /* A view op falling back to its kernel had its outputs defined as views. */
  for (int32_t k = 0; k < out; k++) stax_vm_set_layout(c, outputs[k], STAX_VM_LAYOUT_CONTIGUOUS);
  int32_t index = -1;
  STAX_GOTO_IF_ERROR(status, stax_vm_compiler_copy_node(c, graph, node_id, &index), cleanup);
  operands[0] = index;
  /* Sequence ops allocate their outputs (a sequence register is never allocated): with
   * DYNAMIC_OUTPUT they are shape barriers, so the JIT never puts them in a segment. */
  bool computable = !(stax_op_flags(node->op) & STAX_OPF_SEQUENCE);
  bool all_static = c->static_variants;
  for (int32_t k = 0; k < out; k++) {
    computable = computable && stax_vm_compiler_computable(c, outputs[k]);
    all_static = all_static && stax_vm_descriptor_is_static(c->program, outputs[k]);
  }
  for (int32_t k = 0; k < in; k++)
    if (inputs[k] >= 0) all_static = all_static && stax_vm_descriptor_is_static(c->program, inputs[k]);
  if (computable) {
    for (int32_t k = 0; k < out; k++) {
      /* Program outputs outlive the run: plain allocation. Temporaries: the thread's pool. */
      bool is_output = (c->program->registers[outputs[k]].flags & STAX_VM_REGISTER_OUTPUT) != 0;
      int32_t alloc[2] = {outputs[k], c->program->registers[outputs[k]].descriptor};
      STAX_GOTO_IF_ERROR(status,
                         stax_vm_compiler_emit(c, is_output ? STAX_VM_OP_ALLOC_TENSOR
                                                            : STAX_VM_OP_ALLOC_TENSOR_FAST,
                                               index, alloc, 2, NULL),
                         cleanup);
    }
    STAX_GOTO_IF_ERROR(status,
                       stax_vm_compiler_emit(c, stax_vm_compute_opcode(node->op, all_static), index,
                                             operands, words, NULL),
                       cleanup);
  } else {
    int32_t emitted = -1;
    STAX_GOTO_IF_ERROR(status,
                       stax_vm_compiler_emit(c, stax_vm_compute_opcode(node->op, false), index,
                                             operands, words, &emitted),
                       cleanup);
    c->program->instructions[emitted].flags |= STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT;
    STAX_GOTO_IF_ERROR(status, stax_vm_compiler_shape_variant(c, index, out, outputs), cleanup);
  }
cleanup:
  stax_allocator_free(c->allocator, operands, (size_t)words * sizeof(int32_t));
  return status;
}

/* ---- views ------------------------------------------------------------------------------------ */

/* Lowers view ops to metadata-only instructions; *out_handled is false when the node must run
 * its kernel instead (its target shape is not computable before it runs). */
static stax_status_t stax_vm_compile_view(stax_vm_compiler_t* c, stax_graph_t* graph,
                                          stax_node_id_t node_id, bool* out_handled) {
  const stax_node_t* node = stax_graph_node(graph, node_id);
  *out_handled = false;
  stax_op_t op = node->op;
  if (op != STAX_OP_Identity && op != STAX_OP_Transpose && op != STAX_OP_Expand &&
      op != STAX_OP_Reshape && op != STAX_OP_Flatten && op != STAX_OP_Squeeze &&
      op != STAX_OP_Unsqueeze)
    return STAX_OK;
  if (node->input_count < 1 || node->output_count != 1 || node->inputs[0] == STAX_VALUE_NONE)
    return STAX_OK;
  int32_t src = -1, dst = -1, index = -1;
  STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, graph, node->inputs[0], &src),
                       "%s node '%s' input 0", stax_op_name(op), node->name);
  STAX_RETURN_IF_ERROR(stax_vm_define_outputs(c, graph, node, STAX_VM_LAYOUT_VIEW, &dst));
  bool computable = stax_vm_compiler_computable(c, dst);
  int32_t descriptor = c->program->registers[dst].descriptor;
  if (op == STAX_OP_Identity) {
    STAX_RETURN_IF_ERROR(stax_vm_compiler_copy_node(c, graph, node_id, &index));
    stax_vm_set_layout(c, dst, STAX_VM_LAYOUT_ANY);
    int32_t operands[2] = {dst, src};
    *out_handled = true;
    return stax_vm_compiler_emit(c, STAX_VM_OP_MOVE, index, operands, 2, NULL);
  }
  if (op == STAX_OP_Transpose) {
    int32_t rank = c->program->descriptors[descriptor].rank;
    int32_t count = -1;
    const int64_t* perm = NULL;
    STAX_RETURN_IF_ERROR(stax_node_attr_ints(node, "perm", &count, &perm));
    if (count >= 0 && count != rank) return STAX_OK; /* let the kernel report it */
    int32_t operands[3 + STAX_MAX_RANK] = {dst, src, rank};
    for (int32_t k = 0; k < rank; k++)
      operands[3 + k] = count >= 0 ? (int32_t)perm[k] : rank - 1 - k;
    for (int32_t k = 0; k < rank; k++)
      if (operands[3 + k] < 0 || operands[3 + k] >= rank) return STAX_OK;
    STAX_RETURN_IF_ERROR(stax_vm_compiler_copy_node(c, graph, node_id, &index));
    *out_handled = true;
    return stax_vm_compiler_emit(c, STAX_VM_OP_TRANSPOSE_VIEW, index, operands, 3 + rank, NULL);
  }
  if (op == STAX_OP_Expand) {
    if (!computable) return STAX_OK;
    STAX_RETURN_IF_ERROR(stax_vm_compiler_copy_node(c, graph, node_id, &index));
    stax_vm_set_layout(c, dst, STAX_VM_LAYOUT_BROADCAST);
    int32_t operands[3] = {dst, src, descriptor};
    *out_handled = true;
    return stax_vm_compiler_emit(c, STAX_VM_OP_BROADCAST_TO, index, operands, 3, NULL);
  }
  /* Reshape, Flatten, Squeeze, Unsqueeze. */
  if (computable) {
    STAX_RETURN_IF_ERROR(stax_vm_compiler_copy_node(c, graph, node_id, &index));
    int32_t operands[5] = {dst, src, descriptor, -1, 1};
    *out_handled = true;
    return stax_vm_compiler_emit(c, STAX_VM_OP_RESHAPE_VIEW, index, operands, 5, NULL);
  }
  if (op != STAX_OP_Reshape || node->input_count < 2 || node->inputs[1] == STAX_VALUE_NONE)
    return STAX_OK;
  /* A shape known only at run time: read it, reshape, then bind what it tells. */
  int32_t shape = -1, emitted = -1;
  int64_t allow_zero = 0;
  STAX_RETURN_IF_ERROR(stax_node_attr_int(node, "allowzero", 0, &allow_zero));
  STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, graph, node->inputs[1], &shape),
                       "Reshape node '%s' input 1", node->name);
  STAX_RETURN_IF_ERROR(stax_vm_compiler_copy_node(c, graph, node_id, &index));
  int32_t operands[5] = {dst, src, -1, shape, allow_zero != 0};
  STAX_RETURN_IF_ERROR(
      stax_vm_compiler_emit(c, STAX_VM_OP_RESHAPE_VIEW, index, operands, 5, &emitted));
  c->program->instructions[emitted].flags |= STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT;
  *out_handled = true;
  return stax_vm_compiler_shape_variant(c, index, 1, &dst);
}

/* ---- values computed from dims ------------------------------------------------------------- */

/* A node whose every output is an integer tensor with contents known as dim expressions over
 * bound symbols (Shape -> Gather -> Unsqueeze -> Concat, Sub of two dims, a Slice of a shape)
 * becomes one DIM_VALUES per output: its inputs are no longer read, so the chain that fed it
 * dies in the dead-instruction sweep. *out_handled is false when some output is not so known. */
static stax_status_t stax_vm_compile_dim_values(stax_vm_compiler_t* c, stax_graph_t* graph,
                                                stax_node_id_t node_id, bool* out_handled) {
  const stax_node_t* node = stax_graph_node(graph, node_id);
  *out_handled = false;
  if (c->disabled_passes & STAX_PASS_BIT(STAX_PASS_shapefold)) return STAX_OK;
  if (node->output_count < 1 || (stax_op_flags(node->op) & STAX_OPF_CONTROL)) return STAX_OK;
  int32_t counts[8];
  if (node->output_count > 8) return STAX_OK;
  int32_t codes[8][STAX_VM_DIM_VALUES_MAX];
  for (int32_t k = 0; k < node->output_count; k++) {
    if (node->outputs[k] == STAX_VALUE_NONE) return STAX_OK;
    STAX_RETURN_IF_ERROR(stax_vm_compiler_content_codes(
                             c, stax_graph_value(graph, node->outputs[k]), codes[k], &counts[k]),
                         "%s node '%s' output %d", stax_op_name(node->op), node->name, k);
    if (counts[k] < 0) return STAX_OK;
  }
  int32_t outputs[8], index = -1;
  STAX_RETURN_IF_ERROR(stax_vm_define_outputs(c, graph, node, STAX_VM_LAYOUT_CONTIGUOUS, outputs));
  STAX_RETURN_IF_ERROR(stax_vm_compiler_copy_node(c, graph, node_id, &index));
  for (int32_t k = 0; k < node->output_count; k++) {
    int32_t operands[2 + STAX_VM_DIM_VALUES_MAX] = {outputs[k], counts[k]};
    memcpy(operands + 2, codes[k], (size_t)counts[k] * sizeof(int32_t));
    STAX_RETURN_IF_ERROR(
        stax_vm_compiler_emit(c, STAX_VM_OP_DIM_VALUES, index, operands, 2 + counts[k], NULL));
  }
  *out_handled = true;
  return STAX_OK;
}

/* ---- control flow ------------------------------------------------------------------------------ */

static stax_status_t stax_vm_subgraph(const stax_node_t* node, const char* name,
                                      stax_graph_t** out_graph) {
  const stax_node_attr_t* attr = stax_node_attr_find(node, name);
  *out_graph = attr && attr->type == STAX_ATTR_GRAPH ? attr->value.graph : NULL;
  if (!*out_graph)
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s' has no '%s' graph",
                            stax_op_name(node->op), node->name, name);
  return STAX_OK;
}

typedef struct stax_vm_saved_bound_t {
  uint8_t* bound;
  int32_t count;
} stax_vm_saved_bound_t;

/* Symbols bound inside a branch or body are not bound after it (the other branch, or zero
 * iterations, never bound them). */
static stax_status_t stax_vm_save_bound(stax_vm_compiler_t* c, stax_vm_saved_bound_t* saved) {
  saved->count = c->symbol_count > 0 ? c->symbol_count : 1;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(c->allocator, (size_t)saved->count, (void**)&saved->bound));
  memcpy(saved->bound, c->bound, (size_t)saved->count);
  return STAX_OK;
}

static void stax_vm_restore_bound(stax_vm_compiler_t* c, const stax_vm_saved_bound_t* saved) {
  memcpy(c->bound, saved->bound, (size_t)saved->count);
}

static void stax_vm_free_bound(stax_vm_compiler_t* c, stax_vm_saved_bound_t* saved) {
  if (saved->bound) stax_allocator_free(c->allocator, saved->bound, (size_t)saved->count);
  saved->bound = NULL;
}

static stax_status_t stax_vm_compile_if(stax_vm_compiler_t* c, stax_graph_t* graph,
                                        stax_node_id_t node_id) {
  const stax_node_t* node = stax_graph_node(graph, node_id);
  stax_graph_t* branches[2];
  STAX_RETURN_IF_ERROR(stax_vm_subgraph(node, "then_branch", &branches[0]));
  STAX_RETURN_IF_ERROR(stax_vm_subgraph(node, "else_branch", &branches[1]));
  int32_t out = node->output_count;
  for (int32_t b = 0; b < 2; b++)
    if (stax_graph_output_count(branches[b]) != out)
      return stax_status_make(STAX_INVALID_ARGUMENT, "If node '%s': a branch has %d outputs, the node %d",
                              node->name, stax_graph_output_count(branches[b]), out);
  int32_t cond = -1, index = -1, branch_jump = -1, end_jump = -1;
  STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, graph, node->inputs[0], &cond),
                       "If node '%s' condition", node->name);
  int32_t* outputs = NULL;
  stax_vm_saved_bound_t saved = {0};
  stax_status_t status = STAX_OK;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(c->allocator, (size_t)(out > 0 ? out : 1) * sizeof(int32_t),
                                             (void**)&outputs));
  STAX_GOTO_IF_ERROR(status, stax_vm_define_outputs(c, graph, node, STAX_VM_LAYOUT_ANY, outputs), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_compiler_copy_node(c, graph, node_id, &index), cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_save_bound(c, &saved), cleanup);
  int32_t jump_if_false[2] = {cond, -1};
  STAX_GOTO_IF_ERROR(status,
                     stax_vm_compiler_emit(c, STAX_VM_OP_JUMP_IF_FALSE, index, jump_if_false, 2,
                                           &branch_jump),
                     cleanup);
  int32_t outer = c->current_scope;
  int32_t scopes[2] = {-1, -1};
  for (int32_t b = 0; b < 2; b++) {
    STAX_GOTO_IF_ERROR(status, stax_vm_compiler_new_scope(c, &scopes[b]), cleanup);
    c->current_scope = scopes[b];
    if (b == 1) stax_vm_compiler_patch(c, branch_jump, 1, c->program->instructions_count);
    STAX_GOTO_IF_ERROR(status, stax_vm_compile_graph_nodes(c, branches[b]), cleanup,
                       "in %s of If node '%s'", b ? "else_branch" : "then_branch", node->name);
    for (int32_t k = 0; k < out; k++) {
      int32_t move[2] = {outputs[k], -1};
      STAX_GOTO_IF_ERROR(status,
                         stax_vm_compiler_use(c, branches[b], stax_graph_output(branches[b], k),
                                              &move[1]),
                         cleanup);
      STAX_GOTO_IF_ERROR(status, stax_vm_compiler_emit(c, STAX_VM_OP_MOVE, index, move, 2, NULL),
                         cleanup);
    }
    if (b == 0) {
      int32_t jump = -1;
      STAX_GOTO_IF_ERROR(status, stax_vm_compiler_emit(c, STAX_VM_OP_JUMP, index, &jump, 1, &end_jump),
                         cleanup);
    }
    c->current_scope = outer;
    stax_vm_restore_bound(c, &saved);
  }
  int32_t end = c->program->instructions_count;
  stax_vm_compiler_patch(c, end_jump, 0, end);
  c->scopes[scopes[0]].exit = end;
  c->scopes[scopes[1]].exit = end;
  STAX_GOTO_IF_ERROR(status, stax_vm_compiler_shape_variant(c, index, out, outputs), cleanup);
cleanup:
  stax_vm_free_bound(c, &saved);
  stax_allocator_free(c->allocator, outputs, (size_t)(out > 0 ? out : 1) * sizeof(int32_t));
  return status;
}

/* Loop: node inputs (M, cond, initial...), body inputs (iteration, cond, carried...), body
 * outputs (cond, carried..., scans...), node outputs (carried..., scans...). */
static stax_status_t stax_vm_compile_loop(stax_vm_compiler_t* c, stax_graph_t* graph,
                                          stax_node_id_t node_id) {
  const stax_node_t* node = stax_graph_node(graph, node_id);
  stax_graph_t* body = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_subgraph(node, "body", &body));
  int32_t carried = node->input_count - 2;
  int32_t scans = stax_graph_output_count(body) - 1 - carried;
  if (carried < 0 || scans < 0 || stax_graph_input_count(body) != 2 + carried ||
      node->output_count != carried + scans)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "Loop node '%s': %d inputs, %d outputs, body with %d inputs and %d "
                            "outputs do not fit together",
                            node->name, node->input_count, node->output_count,
                            stax_graph_input_count(body), stax_graph_output_count(body));
  stax_program_t* program = c->program;
  stax_vm_loop_t loop = {.trip_register = -1, .cond_register = -1, .cond_out_register = -1,
                         .carried_count = carried, .scan_count = scans};
  if (node->inputs[0] != STAX_VALUE_NONE)
    STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, graph, node->inputs[0], &loop.trip_register));
  if (node->inputs[1] != STAX_VALUE_NONE)
    STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, graph, node->inputs[1], &loop.cond_register));
  int32_t list_size = stax_vm_loop_list_size(&loop);
  STAX_RETURN_IF_ERROR(STAX_VM_APPEND_N(program, loop_registers, NULL, list_size, &loop.lists_first));
  if (list_size == 0) loop.lists_first = program->loop_registers_count;
  /* Offsets of the six lists (see stax_vm_loop_t). */
  int32_t initial = loop.lists_first, body_in = initial + carried, body_out = body_in + carried;
  int32_t finals = body_out + carried, scan_body_out = finals + carried, scan_outputs = scan_body_out + scans;
  for (int32_t k = 0; k < carried; k++)
    STAX_RETURN_IF_ERROR(stax_vm_compiler_use(c, graph, node->inputs[2 + k],
                                              &program->loop_registers[initial + k]),
                         "Loop node '%s' input %d", node->name, 2 + k);
  for (int32_t k = 0; k < node->output_count; k++) {
    int32_t reg = -1;
    STAX_RETURN_IF_ERROR(stax_vm_compiler_define(c, graph, node->outputs[k],
                                                 k < carried ? STAX_VM_LAYOUT_ANY
                                                             : STAX_VM_LAYOUT_CONTIGUOUS,
                                                 &reg));
    program->loop_registers[k < carried ? finals + k : scan_outputs + (k - carried)] = reg;
  }
  STAX_RETURN_IF_ERROR(stax_vm_compiler_copy_node(c, graph, node_id, &loop.node));
  int32_t outer = c->current_scope, scope = -1;
  STAX_RETURN_IF_ERROR(stax_vm_compiler_new_scope(c, &scope));
  /* Body inputs are defined in the body's scope: they change every iteration. */
  c->current_scope = scope;
  for (int32_t k = 0; k < 2 + carried; k++) {
    int32_t reg = -1;
    STAX_RETURN_IF_ERROR(stax_vm_compiler_define(c, body, stax_graph_input(body, k),
                                                 STAX_VM_LAYOUT_ANY, &reg));
    if (k == 0) loop.iteration_register = reg;
    if (k == 1) loop.cond_in_register = reg;
    if (k >= 2) program->loop_registers[body_in + k - 2] = reg;
  }
  c->current_scope = outer;
  int32_t loop_index = -1, begin = -1;
  STAX_RETURN_IF_ERROR(STAX_VM_APPEND(program, loops, &loop, &loop_index));
  int32_t begin_operands[2] = {loop_index, -1};
  STAX_RETURN_IF_ERROR(
      stax_vm_compiler_emit(c, STAX_VM_OP_LOOP_BEGIN, loop.node, begin_operands, 2, &begin));
  stax_vm_saved_bound_t saved = {0};
  STAX_RETURN_IF_ERROR(stax_vm_save_bound(c, &saved));
  stax_status_t status = STAX_OK;
  int32_t* results = NULL;
  c->current_scope = scope;
  /* Carried values may change shape per iteration: bind their symbols at each body entry. */
  STAX_GOTO_IF_ERROR(status,
                     stax_vm_compiler_shape_variant(c, loop.node, carried,
                                                    program->loop_registers + body_in),
                     cleanup);
  STAX_GOTO_IF_ERROR(status, stax_vm_compile_graph_nodes(c, body), cleanup, "in the body of Loop node '%s'",
                     node->name);
  int32_t cond_out = -1;
  STAX_GOTO_IF_ERROR(status, stax_vm_compiler_use(c, body, stax_graph_output(body, 0), &cond_out),
                     cleanup);
  for (int32_t k = 0; k < carried + scans; k++) {
    int32_t reg = -1;
    STAX_GOTO_IF_ERROR(status, stax_vm_compiler_use(c, body, stax_graph_output(body, 1 + k), &reg),
                       cleanup);
    program->loop_registers[k < carried ? body_out + k : scan_body_out + (k - carried)] = reg;
  }
  program->loops[loop_index].cond_out_register = cond_out;
  int32_t end_operands[2] = {loop_index, begin + 1};
  STAX_GOTO_IF_ERROR(status,
                     stax_vm_compiler_emit(c, STAX_VM_OP_LOOP_END, loop.node, end_operands, 2, NULL),
                     cleanup);
  int32_t exit = program->instructions_count;
  stax_vm_compiler_patch(c, begin, 1, exit);
  c->scopes[scope].exit = exit;
  c->current_scope = outer;
  stax_vm_restore_bound(c, &saved);
  /* One SHAPE_VARIANT binds the dims of every Loop output. */
  STAX_GOTO_IF_ERROR(status,
                     stax_allocator_malloc(c->allocator,
                                           (size_t)(carried + scans + 1) * sizeof(int32_t),
                                           (void**)&results),
                     cleanup);
  for (int32_t k = 0; k < carried; k++) results[k] = program->loop_registers[finals + k];
  for (int32_t k = 0; k < scans; k++) results[carried + k] = program->loop_registers[scan_outputs + k];
  STAX_GOTO_IF_ERROR(status, stax_vm_compiler_shape_variant(c, loop.node, carried + scans, results),
                     cleanup);
cleanup:
  if (results)
    stax_allocator_free(c->allocator, results, (size_t)(carried + scans + 1) * sizeof(int32_t));
  c->current_scope = outer;
  stax_vm_free_bound(c, &saved);
  return status;
}

/* ---- per graph -------------------------------------------------------------------------------- */

stax_status_t stax_vm_compile_graph_nodes(stax_vm_compiler_t* c, stax_graph_t* graph) {
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    const stax_node_t* node = stax_graph_node(graph, n);
    if (stax_vm_node_is_folded(graph, node)) continue;
    if (node->op == STAX_OP_If) {
      STAX_RETURN_IF_ERROR(stax_vm_compile_if(c, graph, n));
      continue;
    }
    if (node->op == STAX_OP_Loop) {
      STAX_RETURN_IF_ERROR(stax_vm_compile_loop(c, graph, n));
      continue;
    }
    bool handled = false;
    STAX_RETURN_IF_ERROR(stax_vm_compile_dim_values(c, graph, n, &handled));
    if (!handled) STAX_RETURN_IF_ERROR(stax_vm_compile_view(c, graph, n, &handled));
    if (!handled) STAX_RETURN_IF_ERROR(stax_vm_compile_kernel(c, graph, n));
  }
  return STAX_OK;
}
