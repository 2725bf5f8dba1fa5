/* The text form of kernel IR (for `stax source`, STAX_LOG=jit and tests). Expressions print
 * inline; a node shared by several uses prints at each use, which keeps the text readable
 * without naming temporaries. Loop counters print by loop name, locals by local name, buffers
 * by buffer name, constants with a dtype suffix where it is not float32 ("2f", "2d", "2i64"). */
#include <inttypes.h>
#include <stdio.h>

#include "jit/kernel_ir.h"
#include "jit/text.h"

static const char* short_dtype(stax_dtype_t dtype) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: return "f";
    case STAX_DTYPE_FLOAT64: return "d";
    case STAX_DTYPE_INT8: return "i8";
    case STAX_DTYPE_INT16: return "i16";
    case STAX_DTYPE_INT32: return "i32";
    case STAX_DTYPE_INT64: return "i64";
    case STAX_DTYPE_UINT8: return "u8";
    case STAX_DTYPE_UINT16: return "u16";
    case STAX_DTYPE_UINT32: return "u32";
    case STAX_DTYPE_UINT64: return "u64";
    case STAX_DTYPE_BOOL: return "b";
    default: return stax_dtype_name(dtype);
  }
}

static void print_index(stax_jit_text_t* text, const stax_kir_kernel_t* kernel,
                        const stax_kir_index_t* index) {
  bool any = false;
  for (int32_t t = 0; t < index->term_count; t++) {
    int64_t c = index->coefficients[t];
    int32_t term = index->loops[t];
    const char* name = term >= STAX_KIR_PARAM_TERM
                           ? kernel->params[term - STAX_KIR_PARAM_TERM].name
                           : kernel->loops[term]->name;
    if (any)
      stax_jit_text_append(text, c < 0 ? " - " : " + ");
    else if (c < 0)
      stax_jit_text_append(text, "-");
    int64_t magnitude = c < 0 ? -c : c;
    if (magnitude == 1) {
      stax_jit_text_appendf(text, "%s", name);
    } else {
      stax_jit_text_appendf(text, "%" PRId64 "*%s", magnitude, name);
    }
    if (index->scales[t] > 0)
      stax_jit_text_appendf(text, "*%s", kernel->params[index->scales[t] - 1].name);
    any = true;
  }
  if (!any) {
    stax_jit_text_appendf(text, "%" PRId64, index->constant);
  } else if (index->constant != 0) {
    stax_jit_text_appendf(text, " %c %" PRId64, index->constant < 0 ? '-' : '+',
                          index->constant < 0 ? -index->constant : index->constant);
  }
}

static bool binary_is_infix(stax_kir_binary_op_t op) {
  return op == STAX_KIR_ADD || op == STAX_KIR_SUB || op == STAX_KIR_MUL || op == STAX_KIR_DIV ||
         stax_kir_binary_op_is_compare(op);
}

static void print_expr(stax_jit_text_t* text, const stax_kir_kernel_t* kernel,
                       const stax_kir_expr_t* expr) {
  if (!expr) {
    stax_jit_text_append(text, "<null>");
    return;
  }
  switch (expr->kind) {
    case STAX_KIR_CONSTANT:
      if (stax_dtype_is_float(expr->dtype)) {
        stax_jit_text_appendf(text, "%.9g%s", expr->float_value, short_dtype(expr->dtype));
      } else {
        stax_jit_text_appendf(text, "%" PRId64 "%s", expr->int_value, short_dtype(expr->dtype));
      }
      break;
    case STAX_KIR_LOAD:
      stax_jit_text_appendf(text, "%s[", kernel->buffers[expr->buffer]->name);
      print_index(text, kernel, expr->index);
      stax_jit_text_append(text, "]");
      break;
    case STAX_KIR_LOCAL: stax_jit_text_append(text, kernel->locals[expr->local]->name); break;
    case STAX_KIR_LOOP_INDEX: stax_jit_text_append(text, kernel->loops[expr->loop]->name); break;
    case STAX_KIR_UNARY:
      stax_jit_text_appendf(text, "%s(", stax_kir_unary_op_name(expr->op));
      print_expr(text, kernel, expr->operands[0]);
      stax_jit_text_append(text, ")");
      break;
    case STAX_KIR_BINARY:
      if (binary_is_infix(expr->op)) {
        stax_jit_text_append(text, "(");
        print_expr(text, kernel, expr->operands[0]);
        stax_jit_text_appendf(text, " %s ", stax_kir_binary_op_name(expr->op));
        print_expr(text, kernel, expr->operands[1]);
        stax_jit_text_append(text, ")");
      } else {
        stax_jit_text_appendf(text, "%s(", stax_kir_binary_op_name(expr->op));
        print_expr(text, kernel, expr->operands[0]);
        stax_jit_text_append(text, ", ");
        print_expr(text, kernel, expr->operands[1]);
        stax_jit_text_append(text, ")");
      }
      break;
    case STAX_KIR_SELECT:
    case STAX_KIR_FMA:
      stax_jit_text_append(text, expr->kind == STAX_KIR_SELECT ? "select(" : "fma(");
      for (int32_t i = 0; i < 3; i++) {
        if (i) stax_jit_text_append(text, ", ");
        print_expr(text, kernel, expr->operands[i]);
      }
      stax_jit_text_append(text, ")");
      break;
    case STAX_KIR_CAST:
      stax_jit_text_appendf(text, "%s(", stax_dtype_name(expr->dtype));
      print_expr(text, kernel, expr->operands[0]);
      stax_jit_text_append(text, ")");
      break;
  }
}

static void indent(stax_jit_text_t* text, int32_t depth) {
  for (int32_t i = 0; i < depth; i++) stax_jit_text_append(text, "  ");
}

static void print_block(stax_jit_text_t* text, const stax_kir_kernel_t* kernel,
                        const stax_kir_block_t* block, int32_t depth) {
  for (const stax_kir_stmt_t* s = block->first; s; s = s->next) {
    indent(text, depth);
    switch (s->kind) {
      case STAX_KIR_STMT_LOOP: {
        const stax_kir_loop_t* loop = kernel->loops[s->loop];
        if (loop->parallel) stax_jit_text_append(text, "parallel ");
        if (loop->vector_width > 1)
          stax_jit_text_appendf(text, "vector(%d) ", (int)loop->vector_width);
        if (loop->extent_param >= 0)
          stax_jit_text_appendf(text, "for %s in 0..%s", loop->name,
                                kernel->params[loop->extent_param].name);
        else
          stax_jit_text_appendf(text, "for %s in 0..%" PRId64, loop->name, loop->extent);
        if (loop->unroll > 1) stax_jit_text_appendf(text, " unroll %d", (int)loop->unroll);
        if (loop->parallel) stax_jit_text_appendf(text, " grain %" PRId64, loop->grain);
        stax_jit_text_append(text, " {\n");
        print_block(text, kernel, &loop->body, depth + 1);
        indent(text, depth);
        stax_jit_text_append(text, "}\n");
        break;
      }
      case STAX_KIR_STMT_STORE:
        stax_jit_text_appendf(text, "%s[", kernel->buffers[s->buffer]->name);
        print_index(text, kernel, s->index);
        stax_jit_text_append(text, "] = ");
        print_expr(text, kernel, s->value);
        stax_jit_text_append(text, "\n");
        break;
      case STAX_KIR_STMT_DECLARE:
        stax_jit_text_appendf(text, "%s %s = ", short_dtype(kernel->locals[s->local]->dtype),
                              kernel->locals[s->local]->name);
        print_expr(text, kernel, s->value);
        stax_jit_text_append(text, "\n");
        break;
      case STAX_KIR_STMT_ASSIGN:
        stax_jit_text_appendf(text, "%s = ", kernel->locals[s->local]->name);
        print_expr(text, kernel, s->value);
        stax_jit_text_append(text, "\n");
        break;
      case STAX_KIR_STMT_REDUCE:
        stax_jit_text_appendf(text, "%s %s= ", kernel->locals[s->local]->name,
                              stax_kir_binary_op_name(s->reduce_op));
        print_expr(text, kernel, s->value);
        stax_jit_text_append(text, "\n");
        break;
    }
  }
}

static const char* role_name(stax_kir_buffer_role_t role) {
  switch (role) {
    case STAX_KIR_BUFFER_INPUT: return "input";
    case STAX_KIR_BUFFER_OUTPUT: return "output";
    case STAX_KIR_BUFFER_SCRATCH: return "scratch";
  }
  return "?";
}

/* A rows-generic kernel's parameters ("rows" is R; the example R is never printed, so the
 * text is the same for every row count of the class). */
static void print_params(stax_jit_text_t* text, const stax_kir_kernel_t* kernel) {
  stax_jit_text_appendf(text, "  rows-generic: rows in %" PRId64 "..%" PRId64 "\n",
                        kernel->rows_min, kernel->rows_max);
  for (int32_t p = 1; p < kernel->param_count; p++) {
    const stax_kir_param_t* param = &kernel->params[p];
    stax_jit_text_appendf(text, "  param %s =", param->name);
    for (int32_t t = 0; t < STAX_KIR_PARAM_TERMS; t++)
      if (param->div[t] > 0)
        stax_jit_text_appendf(text, " %s%" PRId64 "*floor((rows + %" PRId64 ") / %" PRId64 ")",
                              t ? "+ " : "", param->mul[t], param->add[t], param->div[t]);
    stax_jit_text_appendf(text, " + %" PRId64 "\n", param->offset);
  }
}

/* A symbolic kernel's parameters: where each is read, or how it is derived (the example's
 * values are never printed: the text is the same for every shape of the class). */
static void print_symbolic_params(stax_jit_text_t* text, const stax_kir_kernel_t* kernel) {
  stax_jit_text_append(text, "  symbolic\n");
  for (int32_t q = 0; q < kernel->param_count; q++) {
    const stax_kir_param_t* p = &kernel->params[q];
    stax_jit_text_appendf(text, "  param %s = ", p->name);
    if (p->kind == STAX_KIR_PARAM_DIM || p->kind == STAX_KIR_PARAM_STRIDE) {
      stax_jit_text_appendf(text, "%s of %s[%d]\n", p->kind == STAX_KIR_PARAM_DIM ? "dim" : "stride",
                            kernel->buffers[p->buffer]->name, (int)p->dim);
      continue;
    }
    const char* of = kernel->params[p->of].name;
    for (int32_t t = 0; t < STAX_KIR_PARAM_TERMS; t++)
      if (p->div[t] > 0)
        stax_jit_text_appendf(text, "%s%" PRId64 "*floor((%s + %" PRId64 ") / %" PRId64 ")",
                              t ? " + " : "", p->mul[t], of, p->add[t], p->div[t]);
    stax_jit_text_appendf(text, " + %" PRId64, p->offset);
    if (p->times >= 0) stax_jit_text_appendf(text, " times %s", kernel->params[p->times].name);
    stax_jit_text_append(text, "\n");
  }
}

static void print_kernel(stax_jit_text_t* text, const stax_kir_kernel_t* kernel) {
  stax_jit_text_appendf(text, "kernel %s\n", kernel->name);
  if (kernel->rows_generic) print_params(text, kernel);
  if (kernel->symbolic) print_symbolic_params(text, kernel);
  for (int32_t b = 0; b < kernel->buffer_count; b++) {
    const stax_kir_buffer_t* buffer = kernel->buffers[b];
    stax_jit_text_appendf(text, "  buffer %d %s: %s[", (int)b, buffer->name,
                          stax_dtype_name(buffer->dtype));
    for (int32_t d = 0; d < buffer->rank; d++) {
      if (d == 0 && buffer->rows)
        stax_jit_text_append(text, "rows");
      else if (buffer->dim_params[d] >= 0)
        stax_jit_text_appendf(text, "%s%s", d ? ", " : "",
                              kernel->params[buffer->dim_params[d]].name);
      else
        stax_jit_text_appendf(text, "%s%" PRId64, d ? ", " : "", buffer->dims[d]);
    }
    stax_jit_text_append(text, "] strides [");
    for (int32_t d = 0; d < buffer->rank; d++) {
      if (buffer->stride_params[d] >= 0)
        stax_jit_text_appendf(text, "%s%s", d ? ", " : "",
                              kernel->params[buffer->stride_params[d]].name);
      else
        stax_jit_text_appendf(text, "%s%" PRId64, d ? ", " : "", buffer->strides[d]);
    }
    stax_jit_text_appendf(text, "] %s\n", role_name(buffer->role));
  }
  for (int32_t s = 0; s < kernel->stage_count; s++) {
    const stax_kir_stage_t* stage = kernel->stages[s];
    if (stage->fills >= 0)
      stax_jit_text_appendf(text, "  stage %d %s (fills %s from constant %s):\n", (int)s,
                            stage->name, kernel->buffers[stage->fills]->name,
                            kernel->buffers[stage->source]->name);
    else
      stax_jit_text_appendf(text, "  stage %d %s:\n", (int)s, stage->name);
    if (stage->run_min_rows > 0 || stage->run_max_rows != INT64_MAX)
      stax_jit_text_appendf(text, "    (runs for rows %" PRId64 "..%" PRId64 ")\n",
                            stage->run_min_rows, stage->run_max_rows);
    for (int32_t c = 0; c < 2; c++) {
      if (stage->when_param[c] < 0) continue;
      stax_jit_text_appendf(text, "    (runs for %s in %" PRId64 "..",
                            kernel->params[stage->when_param[c]].name, stage->when_min[c]);
      if (stage->when_max[c] == INT64_MAX)
        stax_jit_text_append(text, "inf)\n");
      else
        stax_jit_text_appendf(text, "%" PRId64 ")\n", stage->when_max[c]);
    }
    if (stage->parallel_min_rows > 0)
      stax_jit_text_appendf(text, "    (parallel from %" PRId64 " rows)\n",
                            stage->parallel_min_rows);
    print_block(text, kernel, &kernel->stages[s]->body, 2);
  }
}

stax_status_t stax_kir_print(const stax_kir_kernel_t* kernel, stax_allocator_t allocator,
                             char** out_text) {
  *out_text = NULL;
  stax_jit_text_t text;
  stax_jit_text_init(&text, allocator);
  print_kernel(&text, kernel);
  return stax_jit_text_finish(&text, out_text);
}

stax_status_t stax_kir_print_to_file(const stax_kir_kernel_t* kernel, FILE* out) {
  char* text = NULL;
  STAX_RETURN_IF_ERROR(stax_kir_print(kernel, stax_allocator_system(), &text));
  bool ok = fputs(text, out) >= 0;
  stax_jit_text_free_string(stax_allocator_system(), text);
  return ok ? STAX_OK : stax_status_make(STAX_IO_ERROR, "writing kernel IR text failed");
}
