/* The readable text form of a graph, for `stax dump`, logs and tests:
 *
 *   graph(x: float32[B, S, 64], w: float32[64, 256] = initializer) {
 *     %h = MatMul(x, w)                      # float32[B, S, 256]
 *     %y = Softmax(%h) {axis=-1}             # float32[B, S, 256]
 *   } -> (%y)
 *
 * Values made by nodes are written %name, graph-level values (inputs, initializers, captures)
 * by their bare name, an omitted optional input as _. Subgraph attributes follow their node's
 * line, indented. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph_internal.h"

/* Where the "# type" comments start, so a dump reads as two columns. */
#define STAX_DUMP_COMMENT_COLUMN 40

typedef struct stax_dump_writer_t {
  FILE* out;
  stax_allocator_t allocator;
  int column; /* characters written since the last newline */
  bool failed;
} stax_dump_writer_t;

static void stax_dump_printf(stax_dump_writer_t* writer, const char* fmt, ...) STAX_PRINTF(2, 3);
static void stax_dump_printf(stax_dump_writer_t* writer, const char* fmt, ...) {
  if (writer->failed) return;
  va_list args;
  va_start(args, fmt);
  int written = vfprintf(writer->out, fmt, args);
  va_end(args);
  if (written < 0) {
    writer->failed = true;
    return;
  }
  writer->column += written;
}

static void stax_dump_newline(stax_dump_writer_t* writer) {
  stax_dump_printf(writer, "\n");
  writer->column = 0;
}

static void stax_dump_indent(stax_dump_writer_t* writer, int depth) {
  stax_dump_printf(writer, "%*s", depth * 2, "");
}

/* Dims print into a stack buffer, or a heap one when the expression is long. */
static stax_status_t stax_dump_dim(stax_dump_writer_t* writer, const stax_shape_ctx_t* ctx,
                                   const stax_dim_t* dim) {
  if (dim == NULL) {
    stax_dump_printf(writer, "?");
    return STAX_OK;
  }
  char small[128];
  int needed = stax_dim_print(ctx, dim, small, sizeof(small));
  if (needed < 0) {
    stax_dump_printf(writer, "?");
    return STAX_OK;
  }
  if ((size_t)needed < sizeof(small)) {
    stax_dump_printf(writer, "%s", small);
    return STAX_OK;
  }
  void* memory = NULL;
  size_t size = (size_t)needed + 1;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(writer->allocator, size, &memory),
                       "printing a dim expression");
  stax_dim_print(ctx, dim, memory, size);
  stax_dump_printf(writer, "%s", (const char*)memory);
  stax_allocator_free(writer->allocator, memory, size);
  return STAX_OK;
}

/* "float32[B, S, 64]"; "?" for a value whose type is not known (only in corrupt graphs). */
static stax_status_t stax_dump_type(stax_dump_writer_t* writer, const stax_graph_t* graph,
                                    const stax_value_t* value) {
  if (value->dtype < 0 || value->dtype >= STAX_DTYPE_COUNT || value->rank < 0 ||
      value->rank > STAX_MAX_RANK) {
    stax_dump_printf(writer, "?");
    return STAX_OK;
  }
  if (value->is_sequence) {
    /* "seq(float32[?, 3])": the shape every element has; "seq(float32)" when unknown. */
    stax_dump_printf(writer, "seq(%s", stax_dtype_name(value->dtype));
    if (value->elem_rank >= 0 && value->elem_rank <= STAX_MAX_RANK) {
      stax_dump_printf(writer, "[");
      for (int32_t d = 0; d < value->elem_rank; d++) {
        if (d) stax_dump_printf(writer, ", ");
        STAX_RETURN_IF_ERROR(stax_dump_dim(writer, graph->shape,
                                           value->elem_dims ? value->elem_dims[d] : NULL));
      }
      stax_dump_printf(writer, "]");
    }
    stax_dump_printf(writer, ")");
    return STAX_OK;
  }
  stax_dump_printf(writer, "%s[", stax_dtype_name(value->dtype));
  for (int32_t d = 0; d < value->rank; d++) {
    if (d) stax_dump_printf(writer, ", ");
    STAX_RETURN_IF_ERROR(stax_dump_dim(writer, graph->shape, value->dims ? value->dims[d] : NULL));
  }
  stax_dump_printf(writer, "]");
  return STAX_OK;
}

static void stax_dump_value_ref(stax_dump_writer_t* writer, const stax_graph_t* graph,
                                stax_value_id_t id) {
  if (id == STAX_VALUE_NONE) {
    stax_dump_printf(writer, "_");
  } else if (id < 0 || id >= graph->value_count) {
    stax_dump_printf(writer, "<bad value %d>", id);
  } else {
    const stax_value_t* value = &graph->values[id];
    stax_dump_printf(writer, "%s%s", value->producer >= 0 ? "%" : "",
                     value->name ? value->name : "?");
  }
}

static void stax_dump_quoted(stax_dump_writer_t* writer, const char* text) {
  stax_dump_printf(writer, "\"");
  for (const unsigned char* c = (const unsigned char*)text; *c; c++) {
    if (*c == '"' || *c == '\\') {
      stax_dump_printf(writer, "\\%c", *c);
    } else if (*c == '\n') {
      stax_dump_printf(writer, "\\n");
    } else if (*c == '\t') {
      stax_dump_printf(writer, "\\t");
    } else if (*c < 0x20 || *c == 0x7f) {
      stax_dump_printf(writer, "\\x%02x", *c);
    } else {
      stax_dump_printf(writer, "%c", *c);
    }
  }
  stax_dump_printf(writer, "\"");
}

/* Scalar and array attributes inline: {axis=1, pads=[1, 1], mode="constant"}. Subgraphs are
 * written on their own lines afterwards. */
static void stax_dump_inline_attrs(stax_dump_writer_t* writer, const stax_node_t* node) {
  int32_t written = 0;
  for (int32_t a = 0; a < node->attr_count; a++) {
    const stax_node_attr_t* attr = &node->attrs[a];
    if (attr->type == STAX_ATTR_GRAPH) continue;
    stax_dump_printf(writer, "%s%s=", written++ ? ", " : " {", attr->name ? attr->name : "?");
    switch (attr->type) {
      case STAX_ATTR_INT:
        stax_dump_printf(writer, "%lld", (long long)attr->value.i);
        break;
      case STAX_ATTR_FLOAT:
        stax_dump_printf(writer, "%g", (double)attr->value.f);
        break;
      case STAX_ATTR_STRING:
        stax_dump_quoted(writer, attr->value.s ? attr->value.s : "");
        break;
      case STAX_ATTR_INTS:
        stax_dump_printf(writer, "[");
        for (int32_t i = 0; i < attr->value.ints.count; i++) {
          stax_dump_printf(writer, "%s%lld", i ? ", " : "", (long long)attr->value.ints.data[i]);
        }
        stax_dump_printf(writer, "]");
        break;
      case STAX_ATTR_FLOATS:
        stax_dump_printf(writer, "[");
        for (int32_t i = 0; i < attr->value.floats.count; i++) {
          stax_dump_printf(writer, "%s%g", i ? ", " : "", (double)attr->value.floats.data[i]);
        }
        stax_dump_printf(writer, "]");
        break;
      case STAX_ATTR_STRINGS:
        stax_dump_printf(writer, "[");
        for (int32_t i = 0; i < attr->value.strings.count; i++) {
          if (i) stax_dump_printf(writer, ", ");
          stax_dump_quoted(writer, attr->value.strings.data[i]);
        }
        stax_dump_printf(writer, "]");
        break;
      case STAX_ATTR_TENSOR: {
        const stax_tensor_t* tensor = attr->value.tensor;
        if (tensor == NULL) {
          stax_dump_printf(writer, "tensor(?)");
          break;
        }
        stax_dump_printf(writer, "tensor(%s[", stax_dtype_name(stax_tensor_dtype(tensor)));
        const int64_t* dims = stax_tensor_dims(tensor);
        for (int32_t d = 0; d < stax_tensor_rank(tensor); d++) {
          stax_dump_printf(writer, "%s%lld", d ? ", " : "", (long long)dims[d]);
        }
        stax_dump_printf(writer, "])");
        break;
      }
      case STAX_ATTR_GRAPH:
        break;
    }
  }
  if (written) stax_dump_printf(writer, "}");
}

static stax_status_t stax_dump_graph(stax_dump_writer_t* writer, const stax_graph_t* graph,
                                     int depth);

static stax_status_t stax_dump_node(stax_dump_writer_t* writer, const stax_graph_t* graph,
                                    const stax_node_t* node, int depth) {
  stax_dump_indent(writer, depth + 1);
  for (int32_t o = 0; o < node->output_count; o++) {
    if (o) stax_dump_printf(writer, ", ");
    stax_dump_value_ref(writer, graph, node->outputs[o]);
  }
  stax_dump_printf(writer, " = %s(", stax_op_name(node->op));
  for (int32_t i = 0; i < node->input_count; i++) {
    if (i) stax_dump_printf(writer, ", ");
    stax_dump_value_ref(writer, graph, node->inputs[i]);
  }
  stax_dump_printf(writer, ")");
  stax_dump_inline_attrs(writer, node);
  int pad = STAX_DUMP_COMMENT_COLUMN - writer->column;
  stax_dump_printf(writer, "%*s# ", pad > 1 ? pad : 1, "");
  for (int32_t o = 0; o < node->output_count; o++) {
    if (o) stax_dump_printf(writer, ", ");
    stax_value_id_t id = node->outputs[o];
    if (id < 0 || id >= graph->value_count) {
      stax_dump_printf(writer, "?");
    } else {
      STAX_RETURN_IF_ERROR(stax_dump_type(writer, graph, &graph->values[id]));
    }
  }
  stax_dump_newline(writer);
  for (int32_t a = 0; a < node->attr_count; a++) {
    const stax_node_attr_t* attr = &node->attrs[a];
    if (attr->type != STAX_ATTR_GRAPH) continue;
    stax_dump_indent(writer, depth + 2);
    stax_dump_printf(writer, "%s = ", attr->name ? attr->name : "?");
    if (attr->value.graph == NULL) {
      stax_dump_printf(writer, "(no graph)");
      stax_dump_newline(writer);
      continue;
    }
    STAX_RETURN_IF_ERROR(stax_dump_graph(writer, attr->value.graph, depth + 2));
  }
  return STAX_OK;
}

/* Writes "graph(params) {" ... "} -> (outputs)" and a newline; the caller has written the
 * indentation of the first line. */
static stax_status_t stax_dump_graph(stax_dump_writer_t* writer, const stax_graph_t* graph,
                                     int depth) {
  stax_dump_printf(writer, "graph(");
  int32_t params = 0;
  for (stax_value_id_t v = 0; v < graph->value_count; v++) {
    const stax_value_t* value = &graph->values[v];
    if (value->producer >= 0) continue;
    stax_dump_printf(writer, "%s%s: ", params++ ? ", " : "", value->name ? value->name : "?");
    STAX_RETURN_IF_ERROR(stax_dump_type(writer, graph, value));
    if (value->flags & STAX_VALUE_IS_INITIALIZER) stax_dump_printf(writer, " = initializer");
    if (value->flags & STAX_VALUE_IS_CAPTURE) stax_dump_printf(writer, " = capture");
  }
  stax_dump_printf(writer, ") {");
  stax_dump_newline(writer);
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    STAX_RETURN_IF_ERROR(stax_dump_node(writer, graph, &graph->nodes[n], depth));
  }
  stax_dump_indent(writer, depth);
  stax_dump_printf(writer, "} -> (");
  for (int32_t i = 0; i < graph->output_count; i++) {
    if (i) stax_dump_printf(writer, ", ");
    stax_dump_value_ref(writer, graph, graph->outputs[i]);
  }
  stax_dump_printf(writer, ")");
  stax_dump_newline(writer);
  return STAX_OK;
}

stax_status_t stax_graph_dump(const stax_graph_t* graph, FILE* out) {
  if (graph == NULL || out == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_graph_dump: %s is NULL",
                            graph == NULL ? "graph" : "output file");
  }
  stax_dump_writer_t writer = {out, graph->allocator, 0, false};
  STAX_RETURN_IF_ERROR(stax_dump_graph(&writer, graph, 0));
  if (writer.failed || ferror(out)) {
    return stax_status_make(STAX_IO_ERROR, "writing the graph dump failed");
  }
  return STAX_OK;
}
