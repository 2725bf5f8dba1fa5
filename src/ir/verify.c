/* The graph verifier. add_node already enforces most invariants, so this is the check that
 * passes and importers run after rewriting a graph: it trusts nothing in the internal arrays
 * (counts, ids, pointers, producer links, subgraph links) and reports the first problem as a
 * status instead of crashing on it. */
#include <stdio.h>
#include <string.h>

#include "ir/graph_internal.h"

/* Deeper nesting than any real model has; beyond it a subgraph link loops back. */
#define STAX_VERIFY_MAX_DEPTH 64
/* How many nodes of a cycle the message lists before "...". */
#define STAX_VERIFY_CYCLE_NAMES 8

static const char* stax_verify_node_name(const stax_node_t* node) {
  return node->name ? node->name : "(unnamed)";
}

static const char* stax_verify_value_name(const stax_value_t* value) {
  return value->name ? value->name : "(unnamed)";
}

/* Counts, capacities and the arrays behind them. */
static stax_status_t stax_verify_tables(const stax_graph_t* graph) {
  struct {
    const char* what;
    int32_t count, capacity;
    const void* array;
  } tables[] = {
      {"value", graph->value_count, graph->value_capacity, graph->values},
      {"node", graph->node_count, graph->node_capacity, graph->nodes},
      {"input", graph->input_count, graph->input_capacity, graph->inputs},
      {"output", graph->output_count, graph->output_capacity, graph->outputs},
  };
  for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
    if (tables[i].count < 0 || tables[i].count > tables[i].capacity ||
        (tables[i].count > 0 && tables[i].array == NULL)) {
      return stax_status_make(STAX_INTERNAL, "graph %s table is corrupt (count %d, capacity %d)",
                              tables[i].what, tables[i].count, tables[i].capacity);
    }
  }
  if (graph->shape == NULL) return stax_status_make(STAX_INTERNAL, "graph has no shape context");
  return STAX_OK;
}

static stax_status_t stax_verify_arity(const stax_node_t* node, const char* noun, int32_t count,
                                       int32_t min, int32_t max) {
  if (count >= min && (max < 0 || count <= max)) return STAX_OK;
  char expected[64];
  const char* plural = min == 1 ? "" : "s";
  if (max < 0) {
    snprintf(expected, sizeof(expected), "at least %d %s%s", min, noun, plural);
  } else if (min == max) {
    snprintf(expected, sizeof(expected), "%d %s%s", min, noun, plural);
  } else {
    snprintf(expected, sizeof(expected), "%d to %d %ss", min, max, noun);
  }
  return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s': expects %s, has %d",
                          stax_op_name(node->op), stax_verify_node_name(node), expected, count);
}

/* A node's own shape: op, name, arity and the arrays behind the counts. */
static stax_status_t stax_verify_node_structure(const stax_graph_t* graph, stax_node_id_t n) {
  const stax_node_t* node = &graph->nodes[n];
  if (node->op < 0 || node->op >= STAX_OP_COUNT) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "node %d ('%s'): invalid op %d", n,
                            stax_verify_node_name(node), (int)node->op);
  }
  if (node->name == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s node %d has no name",
                            stax_op_name(node->op), n);
  }
  if ((node->input_count > 0 && node->inputs == NULL) ||
      (node->output_count > 0 && node->outputs == NULL) || node->attr_count < 0 ||
      (node->attr_count > 0 && node->attrs == NULL)) {
    return stax_status_make(STAX_INTERNAL, "%s node '%s': input, output or attribute array "
                            "is missing", stax_op_name(node->op), node->name);
  }
  STAX_RETURN_IF_ERROR(stax_verify_arity(node, "input", node->input_count,
                                         stax_op_min_inputs(node->op),
                                         stax_op_max_inputs(node->op)));
  STAX_RETURN_IF_ERROR(stax_verify_arity(node, "output", node->output_count,
                                         stax_op_min_outputs(node->op),
                                         stax_op_max_outputs(node->op)));
  return STAX_OK;
}

/* A value's dtype, shape, contents and where it comes from. */
static stax_status_t stax_verify_value(const stax_graph_t* graph, stax_value_id_t v) {
  const stax_value_t* value = &graph->values[v];
  const char* name = stax_verify_value_name(value);
  if (value->name == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "value %d has no name", v);
  }
  if (value->dtype < 0 || value->dtype >= STAX_DTYPE_COUNT) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "value '%s': invalid dtype %d", name,
                            (int)value->dtype);
  }
  if (value->rank < 0 || value->rank > STAX_MAX_RANK || (value->rank > 0 && value->dims == NULL)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "value '%s': invalid rank %d or no dims",
                            name, value->rank);
  }
  for (int32_t d = 0; d < value->rank; d++) {
    if (value->dims[d] == NULL) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "value '%s': dim %d is NULL", name, d);
    }
  }
  if (value->content_count < -1 || (value->content_count > 0 && value->content == NULL)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "value '%s': invalid content count %d", name,
                            value->content_count);
  }
  for (int32_t i = 0; i < value->content_count; i++) {
    if (value->content[i] == NULL) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "value '%s': content entry %d is NULL",
                              name, i);
    }
  }
  if ((value->flags & STAX_VALUE_IS_INITIALIZER) && value->constant == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "initializer '%s' has no tensor", name);
  }
  if (value->flags & STAX_VALUE_IS_CAPTURE) {
    const stax_graph_t* parent = graph->parent;
    if (parent == NULL || value->outer_value < 0 || value->outer_value >= parent->value_count) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "capture '%s': outer value id %d is not in the parent graph", name,
                              value->outer_value);
    }
  }
  if (value->producer == -1) {
    if (!(value->flags &
          (STAX_VALUE_IS_INPUT | STAX_VALUE_IS_INITIALIZER | STAX_VALUE_IS_CAPTURE |
           STAX_VALUE_IS_DEAD))) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "value '%s' has no producer and is not a graph input, initializer "
                              "or capture",
                              name);
    }
    return STAX_OK;
  }
  if (value->producer < 0 || value->producer >= graph->node_count) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "value '%s': producer node id %d is not in the graph (%d nodes)",
                            name, value->producer, graph->node_count);
  }
  const stax_node_t* producer = &graph->nodes[value->producer];
  if (value->producer_output < 0 || value->producer_output >= producer->output_count ||
      producer->outputs[value->producer_output] != v) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "value '%s' claims to be output %d of %s node '%s', which does not "
                            "produce it",
                            name, value->producer_output, stax_op_name(producer->op),
                            producer->name);
  }
  return STAX_OK;
}

/* The first producer of `n`'s inputs that is still unretired; every unretired node has one. */
static stax_node_id_t stax_verify_unretired_producer(const stax_graph_t* graph,
                                                     const bool* retired, stax_node_id_t n) {
  const stax_node_t* node = &graph->nodes[n];
  for (int32_t i = 0; i < node->input_count; i++) {
    if (node->inputs[i] == STAX_VALUE_NONE) continue;
    stax_node_id_t p = graph->values[node->inputs[i]].producer;
    if (p >= 0 && !retired[p]) return p;
  }
  return n;
}

/* After an ordering violation: either the nodes merely need reordering, or they depend on each
 * other in a cycle. Repeatedly retires nodes whose inputs are all available; what never
 * retires contains a cycle, which is then walked to name its nodes. */
static stax_status_t stax_verify_explain_order(const stax_graph_t* graph, stax_node_id_t user,
                                               int32_t input) {
  const stax_node_t* user_node = &graph->nodes[user];
  const stax_value_t* used = &graph->values[user_node->inputs[input]];
  const stax_node_t* later = &graph->nodes[used->producer];
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(
      stax_allocator_calloc(graph->allocator, (size_t)graph->node_count, sizeof(bool), &memory),
      "verifying node order");
  bool* retired = memory;
  bool progress = true;
  while (progress) {
    progress = false;
    for (stax_node_id_t n = 0; n < graph->node_count; n++) {
      if (retired[n]) continue;
      const stax_node_t* node = &graph->nodes[n];
      bool ready = true;
      for (int32_t i = 0; i < node->input_count && ready; i++) {
        if (node->inputs[i] == STAX_VALUE_NONE) continue;
        stax_node_id_t p = graph->values[node->inputs[i]].producer;
        if (p >= 0 && !retired[p]) ready = false;
      }
      if (ready) retired[n] = progress = true;
    }
  }
  stax_node_id_t stuck = -1;
  for (stax_node_id_t n = 0; n < graph->node_count && stuck < 0; n++) {
    if (!retired[n]) stuck = n;
  }
  stax_status_t status;
  if (stuck < 0) {
    status = stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s node '%s' input %d uses value '%s' before %s node '%s' "
                              "produces it (nodes are not in topological order)",
                              stax_op_name(user_node->op), user_node->name, input, used->name,
                              stax_op_name(later->op), later->name);
  } else {
    /* Stepping to an unretired producer node_count times lands on a cycle; the message starts
     * it at its lowest node id so it reads the same however it was found. */
    stax_node_id_t n = stuck;
    for (int32_t step = 0; step < graph->node_count; step++) {
      n = stax_verify_unretired_producer(graph, retired, n);
    }
    stax_node_id_t lowest = n;
    for (stax_node_id_t m = stax_verify_unretired_producer(graph, retired, n); m != n;
         m = stax_verify_unretired_producer(graph, retired, m)) {
      if (m < lowest) lowest = m;
    }
    n = lowest;
    char names[512];
    size_t used_chars = 0;
    names[0] = '\0';
    stax_node_id_t start = n;
    for (int32_t count = 0; count <= STAX_VERIFY_CYCLE_NAMES; count++) {
      const stax_node_t* node = &graph->nodes[n];
      int written = snprintf(names + used_chars, sizeof(names) - used_chars, "%s'%s'",
                             count ? " <- " : "", node->name);
      if (written < 0 || (size_t)written >= sizeof(names) - used_chars) break;
      used_chars += (size_t)written;
      if (count > 0 && n == start) break;
      if (count == STAX_VERIFY_CYCLE_NAMES) {
        snprintf(names + used_chars, sizeof(names) - used_chars, " <- ...");
        break;
      }
      n = stax_verify_unretired_producer(graph, retired, n);
    }
    status = stax_status_make(STAX_INVALID_ARGUMENT,
                              "nodes form a cycle (each uses the next one's output): %s", names);
  }
  stax_allocator_free(graph->allocator, retired, (size_t)graph->node_count * sizeof(bool));
  return status;
}

static stax_status_t stax_verify_graph(const stax_graph_t* graph, int32_t depth);

static stax_status_t stax_verify_attrs(const stax_graph_t* graph, const stax_node_t* node,
                                       int32_t depth) {
  for (int32_t a = 0; a < node->attr_count; a++) {
    const stax_node_attr_t* attr = &node->attrs[a];
    STAX_RETURN_IF_ERROR(stax_attr_check_schema(node->op, node->name, attr->name, attr->type));
    if (attr->type == STAX_ATTR_TENSOR && attr->value.tensor == NULL) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s node '%s': attribute '%s' has no "
                              "tensor", stax_op_name(node->op), node->name, attr->name);
    }
    if (attr->type != STAX_ATTR_GRAPH) continue;
    const stax_graph_t* subgraph = attr->value.graph;
    if (subgraph == NULL || subgraph == graph || subgraph->parent != graph) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s node '%s': attribute '%s' is not a subgraph of this graph",
                              stax_op_name(node->op), node->name, attr->name);
    }
    STAX_RETURN_IF_ERROR(stax_verify_graph(subgraph, depth + 1), "in attribute '%s' of %s node "
                         "'%s'", attr->name, stax_op_name(node->op), node->name);
  }
  return STAX_OK;
}

/* Uses: every input id in range and present where required; outputs linked back. */
static stax_status_t stax_verify_node_uses(const stax_graph_t* graph, stax_node_id_t n) {
  const stax_node_t* node = &graph->nodes[n];
  int32_t min_inputs = stax_op_min_inputs(node->op);
  for (int32_t i = 0; i < node->input_count; i++) {
    stax_value_id_t id = node->inputs[i];
    if (id == STAX_VALUE_NONE) {
      if (i < min_inputs && !(stax_op_flags(node->op) & STAX_OPF_OPTIONAL_SLOTS)) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s node '%s': input %d is required but missing",
                                stax_op_name(node->op), node->name, i);
      }
      continue;
    }
    if (id < 0 || id >= graph->value_count) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s node '%s': input %d is value id %d, which does not exist "
                              "(%d values)",
                              stax_op_name(node->op), node->name, i, id, graph->value_count);
    }
    if (graph->values[id].flags & STAX_VALUE_IS_DEAD) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s node '%s': input %d is value '%s', whose producer a pass "
                              "removed",
                              stax_op_name(node->op), node->name, i, graph->values[id].name);
    }
  }
  for (int32_t o = 0; o < node->output_count; o++) {
    stax_value_id_t id = node->outputs[o];
    if (id < 0 || id >= graph->value_count || graph->values[id].producer != n ||
        graph->values[id].producer_output != o) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s node '%s': output %d (value id %d) does not record this node "
                              "as its producer",
                              stax_op_name(node->op), node->name, o, id);
    }
  }
  return STAX_OK;
}

/* Runs after every node's ids were checked, so the explanation may follow any link. */
static stax_status_t stax_verify_node_order(const stax_graph_t* graph, stax_node_id_t n) {
  const stax_node_t* node = &graph->nodes[n];
  for (int32_t i = 0; i < node->input_count; i++) {
    stax_value_id_t id = node->inputs[i];
    if (id != STAX_VALUE_NONE && graph->values[id].producer >= n) {
      return stax_verify_explain_order(graph, n, i);
    }
  }
  return STAX_OK;
}

static stax_status_t stax_verify_graph(const stax_graph_t* graph, int32_t depth) {
  if (graph == NULL) return stax_status_make(STAX_INVALID_ARGUMENT, "graph is NULL");
  if (depth > STAX_VERIFY_MAX_DEPTH) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "subgraphs nest deeper than %d levels (a subgraph contains itself?)",
                            STAX_VERIFY_MAX_DEPTH);
  }
  STAX_RETURN_IF_ERROR(stax_verify_tables(graph));
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    STAX_RETURN_IF_ERROR(stax_verify_node_structure(graph, n));
  }
  for (stax_value_id_t v = 0; v < graph->value_count; v++) {
    STAX_RETURN_IF_ERROR(stax_verify_value(graph, v));
  }
  for (int32_t i = 0; i < graph->input_count; i++) {
    stax_value_id_t id = graph->inputs[i];
    if (id < 0 || id >= graph->value_count || !(graph->values[id].flags & STAX_VALUE_IS_INPUT)) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "graph input %d is value id %d, which is not a graph input value",
                              i, id);
    }
  }
  for (int32_t i = 0; i < graph->output_count; i++) {
    stax_value_id_t id = graph->outputs[i];
    if (id < 0 || id >= graph->value_count) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "graph output %d is value id %d, which does not exist (%d values)",
                              i, id, graph->value_count);
    }
  }
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    STAX_RETURN_IF_ERROR(stax_verify_node_uses(graph, n));
  }
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    STAX_RETURN_IF_ERROR(stax_verify_node_order(graph, n));
  }
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    STAX_RETURN_IF_ERROR(stax_verify_attrs(graph, &graph->nodes[n], depth));
  }
  return STAX_OK;
}

stax_status_t stax_graph_verify(const stax_graph_t* graph) { return stax_verify_graph(graph, 0); }
