/* Kernel IR -> CUDA C (see cuda_codegen.h for the mapping and what is refused). Every
 * expression becomes a `const T tN = ...;` temporary emitted just before the statement that
 * needs it (memoized per statement, like the LLVM backend's per-statement cache: a local's
 * value or a buffer's contents may change between statements). The operators follow
 * llvm_codegen.c exactly: NaN-propagating max/min, round half to even, saturating float to
 * integer casts, integers wrapping on overflow. */
#include "jit/cuda_codegen.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jit/text.h"

typedef struct cuda_cg_t {
  const stax_kir_kernel_t* kir;
  stax_allocator_t allocator;
  stax_jit_text_t text;
  stax_status_t status; /* first refusal */
  int32_t* cache;       /* per expression id: its temporary, valid while stamp matches */
  uint32_t* cache_stamp;
  uint32_t stamp;
  int32_t temp_count;
  int32_t depth; /* indentation */
  bool helper_used[4]; /* helpers[] */
  bool block_rows;     /* options: block-per-row stages where they apply */
  /* Block-per-row stages: per local, whether the row loop being emitted reduces it into a
   * per-thread partial (named p<local> instead of l<local>), and planning scratch. */
  bool* partial;
  bool* row_local;     /* declared directly in the row body */
  bool* reduced;       /* reduced by some distributed loop of the stage (shared array) */
  uint32_t* walk_stamp; /* per expression: visited by the current walk */
  uint32_t walk;
} cuda_cg_t;

static void refuse(cuda_cg_t* cg, const char* fmt, const char* detail) {
  if (cg->status != STAX_OK) return;
  char what[256];
  snprintf(what, sizeof(what), fmt, detail ? detail : "");
  cg->status = stax_status_make(STAX_UNIMPLEMENTED, "CUDA codegen of kernel '%s': %s",
                                cg->kir->name, what);
}

static void indent(cuda_cg_t* cg) {
  for (int32_t i = 0; i < cg->depth; i++) stax_jit_text_append(&cg->text, "  ");
}

/* ---- types ------------------------------------------------------------------------------- */

static bool is_float(stax_dtype_t dtype) {
  return dtype == STAX_DTYPE_FLOAT32 || dtype == STAX_DTYPE_FLOAT64;
}

/* The C type of a value in registers (bool: int 0 / 1). NULL: not handled. */
static const char* value_type(stax_dtype_t dtype) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: return "float";
    case STAX_DTYPE_FLOAT64: return "double";
    case STAX_DTYPE_INT8: return "signed char";
    case STAX_DTYPE_UINT8: return "unsigned char";
    case STAX_DTYPE_INT16: return "short";
    case STAX_DTYPE_UINT16: return "unsigned short";
    case STAX_DTYPE_INT32: return "int";
    case STAX_DTYPE_UINT32: return "unsigned int";
    case STAX_DTYPE_INT64: return "long long";
    case STAX_DTYPE_UINT64: return "unsigned long long";
    case STAX_DTYPE_BOOL: return "int";
    default: return NULL;
  }
}

/* In memory bool is one byte. */
static const char* memory_type(stax_dtype_t dtype) {
  return dtype == STAX_DTYPE_BOOL ? "unsigned char" : value_type(dtype);
}

/* The unsigned type integer arithmetic wraps in (no signed overflow, no promotion to int). */
static const char* wrap_type(stax_dtype_t dtype) {
  return stax_dtype_size(dtype) == 8 ? "unsigned long long" : "unsigned int";
}

static const char* checked_type(cuda_cg_t* cg, stax_dtype_t dtype) {
  const char* type = value_type(dtype);
  if (!type) {
    refuse(cg, "dtype %s is not handled", stax_dtype_name(dtype));
    return "float";
  }
  return type;
}

/* ---- literals ---------------------------------------------------------------------------- */

static void append_float(cuda_cg_t* cg, stax_dtype_t dtype, double value) {
  bool f32 = dtype == STAX_DTYPE_FLOAT32;
  if (isnan(value)) {
    stax_jit_text_append(&cg->text, f32 ? "STAX_NAN_F" : "STAX_NAN");
    return;
  }
  if (isinf(value)) {
    stax_jit_text_appendf(&cg->text, "%s%s", value < 0 ? "-" : "", f32 ? "STAX_INF_F" : "STAX_INF");
    return;
  }
  char digits[64];
  snprintf(digits, sizeof(digits), f32 ? "%.9g" : "%.17g", f32 ? (double)(float)value : value);
  bool has_point = strpbrk(digits, ".eE") != NULL;
  stax_jit_text_appendf(&cg->text, "%s%s%s", digits, has_point ? "" : ".0", f32 ? "f" : "");
}

static void append_int(cuda_cg_t* cg, stax_dtype_t dtype, int64_t value) {
  if (dtype == STAX_DTYPE_BOOL) {
    stax_jit_text_append(&cg->text, value ? "1" : "0");
  } else if (stax_dtype_is_unsigned_int(dtype)) {
    stax_jit_text_appendf(&cg->text, "(%s)%" PRIu64 "ULL", value_type(dtype), (uint64_t)value);
  } else if (value == INT64_MIN) {
    stax_jit_text_appendf(&cg->text, "(%s)(-9223372036854775807LL - 1)", value_type(dtype));
  } else {
    stax_jit_text_appendf(&cg->text, "(%s)%" PRId64 "LL", value_type(dtype), value);
  }
}

/* ---- indices ----------------------------------------------------------------------------- */

static void append_index(cuda_cg_t* cg, const stax_kir_index_t* index) {
  stax_jit_text_appendf(&cg->text, "(%" PRId64 "LL", index->constant);
  for (int32_t t = 0; t < index->term_count; t++) {
    if (index->loops[t] >= STAX_KIR_PARAM_TERM || index->scales[t] > 0) {
      refuse(cg, "%sindex terms with run-time parameters are not handled", NULL);
      continue;
    }
    stax_jit_text_appendf(&cg->text, " + %" PRId64 "LL * i%d", index->coefficients[t],
                          (int)index->loops[t]);
  }
  stax_jit_text_append(&cg->text, ")");
}

/* ---- operators --------------------------------------------------------------------------- */

/* Appends `a op b` for operands of `dtype` (names of temporaries or locals). */
static void append_binary(cuda_cg_t* cg, stax_kir_binary_op_t op, stax_dtype_t dtype,
                          const char* a, const char* b) {
  stax_jit_text_t* t = &cg->text;
  const char* type = checked_type(cg, dtype);
  bool f = is_float(dtype);
  bool f32 = dtype == STAX_DTYPE_FLOAT32;
  bool is_signed = stax_dtype_is_signed_int(dtype);
  static const char* const compare[] = {"==", "!=", "<", "<=", ">", ">="};
  switch (op) {
    case STAX_KIR_ADD:
    case STAX_KIR_SUB:
    case STAX_KIR_MUL: {
      const char* symbol = op == STAX_KIR_ADD ? "+" : op == STAX_KIR_SUB ? "-" : "*";
      if (f) {
        stax_jit_text_appendf(t, "%s %s %s", a, symbol, b);
      } else {
        const char* wide = wrap_type(dtype);
        stax_jit_text_appendf(t, "(%s)((%s)%s %s (%s)%s)", type, wide, a, symbol, wide, b);
      }
      return;
    }
    case STAX_KIR_DIV:
      if (f) {
        stax_jit_text_appendf(t, "%s / %s", a, b);
      } else if (is_signed) {
        /* x / 0 and MIN / -1 are undefined in C (and trap on x86): 0 and the wrapped value. */
        stax_jit_text_appendf(t, "(%s == 0 ? (%s)0 : %s == -1 ? (%s)(0u - (%s)%s) : (%s)(%s / %s))",
                              b, type, b, type, wrap_type(dtype), a, type, a, b);
      } else {
        stax_jit_text_appendf(t, "(%s == 0 ? (%s)0 : (%s)(%s / %s))", b, type, type, a, b);
      }
      return;
    case STAX_KIR_MAX:
    case STAX_KIR_MIN: {
      bool max = op == STAX_KIR_MAX;
      if (f) {
        cg->helper_used[(max ? 0 : 1) + (f32 ? 0 : 2)] = true;
        stax_jit_text_appendf(t, "stax_%s_%s(%s, %s)", max ? "max" : "min", f32 ? "f32" : "f64",
                              a, b);
      } else {
        stax_jit_text_appendf(t, "(%s %s %s ? %s : %s)", a, max ? ">" : "<", b, a, b);
      }
      return;
    }
    case STAX_KIR_POW:
      if (!f) break;
      stax_jit_text_appendf(t, "%s(%s, %s)", f32 ? "powf" : "pow", a, b);
      return;
    case STAX_KIR_AND:
    case STAX_KIR_OR:
    case STAX_KIR_XOR: {
      const char* symbol = op == STAX_KIR_AND ? "&" : op == STAX_KIR_OR ? "|" : "^";
      if (f) break;
      stax_jit_text_appendf(t, "(%s)(%s %s %s)", type, a, symbol, b);
      return;
    }
    case STAX_KIR_EQ:
    case STAX_KIR_NE:
    case STAX_KIR_LT:
    case STAX_KIR_LE:
    case STAX_KIR_GT:
    case STAX_KIR_GE:
      /* C's compares: ordered (false on NaN) except != (true on NaN), like the LLVM backend. */
      stax_jit_text_appendf(t, "(int)(%s %s %s)", a, compare[op - STAX_KIR_EQ], b);
      return;
    default: break;
  }
  char what[96];
  snprintf(what, sizeof(what), "%s on %s", stax_kir_binary_op_name(op), stax_dtype_name(dtype));
  refuse(cg, "binary operator %s is not handled", what);
  stax_jit_text_append(t, a);
}

static void append_unary(cuda_cg_t* cg, stax_kir_unary_op_t op, stax_dtype_t dtype,
                         const char* x) {
  stax_jit_text_t* t = &cg->text;
  const char* type = checked_type(cg, dtype);
  bool f = is_float(dtype);
  const char* suffix = dtype == STAX_DTYPE_FLOAT32 ? "f" : "";
  const char* libm = NULL;
  switch (op) {
    case STAX_KIR_NEG:
      if (f) {
        stax_jit_text_appendf(t, "-%s", x);
      } else {
        stax_jit_text_appendf(t, "(%s)(0u - (%s)%s)", type, wrap_type(dtype), x);
      }
      return;
    case STAX_KIR_ABS:
      if (f) {
        stax_jit_text_appendf(t, "fabs%s(%s)", suffix, x);
      } else if (stax_dtype_is_unsigned_int(dtype)) {
        stax_jit_text_append(t, x);
      } else {
        /* abs(MIN) wraps to MIN, as in the reference. */
        stax_jit_text_appendf(t, "(%s < 0 ? (%s)(0u - (%s)%s) : %s)", x, type, wrap_type(dtype), x,
                              x);
      }
      return;
    case STAX_KIR_NOT: stax_jit_text_appendf(t, "(int)!%s", x); return;
    case STAX_KIR_IS_NAN:
      if (!f) break;
      stax_jit_text_appendf(t, "(int)(%s != %s)", x, x);
      return;
    case STAX_KIR_IS_INF:
      if (!f) break;
      stax_jit_text_appendf(t, "(int)(%s == STAX_INF%s || %s == -STAX_INF%s)", x,
                            dtype == STAX_DTYPE_FLOAT32 ? "_F" : "", x,
                            dtype == STAX_DTYPE_FLOAT32 ? "_F" : "");
      return;
    case STAX_KIR_SQRT: libm = "sqrt"; break;
    case STAX_KIR_EXP: libm = "exp"; break;
    case STAX_KIR_EXPM1: libm = "expm1"; break;
    case STAX_KIR_LOG: libm = "log"; break;
    case STAX_KIR_LOG1P: libm = "log1p"; break;
    case STAX_KIR_TANH: libm = "tanh"; break;
    case STAX_KIR_ERF: libm = "erf"; break;
    case STAX_KIR_ERFC: libm = "erfc"; break;
    case STAX_KIR_FLOOR: libm = "floor"; break;
    case STAX_KIR_CEIL: libm = "ceil"; break;
    case STAX_KIR_ROUND: libm = "rint"; break; /* half to even in the default rounding mode */
    case STAX_KIR_SIN: libm = "sin"; break;
    case STAX_KIR_COS: libm = "cos"; break;
    case STAX_KIR_TAN: libm = "tan"; break;
    case STAX_KIR_ASIN: libm = "asin"; break;
    case STAX_KIR_ACOS: libm = "acos"; break;
    case STAX_KIR_ATAN: libm = "atan"; break;
    case STAX_KIR_SINH: libm = "sinh"; break;
    case STAX_KIR_COSH: libm = "cosh"; break;
    case STAX_KIR_ASINH: libm = "asinh"; break;
    case STAX_KIR_ACOSH: libm = "acosh"; break;
    case STAX_KIR_ATANH: libm = "atanh"; break;
    default: break;
  }
  if (libm && f) {
    stax_jit_text_appendf(t, "%s%s(%s)", libm, suffix, x);
    return;
  }
  char what[96];
  snprintf(what, sizeof(what), "%s on %s", stax_kir_unary_op_name(op), stax_dtype_name(dtype));
  refuse(cg, "unary operator %s is not handled", what);
  stax_jit_text_append(t, x);
}

/* ONNX Cast, as llvm_codegen.c's emit_cast: to bool is != 0; float to integer saturates and
 * NaN gives 0; integers convert modulo 2^bits. */
static void append_cast(cuda_cg_t* cg, stax_dtype_t from, stax_dtype_t to, const char* x) {
  stax_jit_text_t* t = &cg->text;
  const char* type = checked_type(cg, to);
  checked_type(cg, from);
  if (to == STAX_DTYPE_BOOL) {
    stax_jit_text_appendf(t, "(int)(%s != 0)", x);
    return;
  }
  if (!is_float(from) || is_float(to)) {
    stax_jit_text_appendf(t, "(%s)%s", type, x);
    return;
  }
  int bits = (int)stax_dtype_size(to) * 8;
  const char* low_text;
  const char* high_text;
  char low[64], high[64], min[64], max[64];
  if (stax_dtype_is_unsigned_int(to)) {
    snprintf(low, sizeof(low), "0.0");
    snprintf(high, sizeof(high), "%.1f", ldexp(1.0, bits));
    snprintf(min, sizeof(min), "(%s)0", type);
    snprintf(max, sizeof(max), "(%s)%" PRIu64 "ULL", type,
             bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1);
  } else {
    snprintf(low, sizeof(low), "%.1f", -ldexp(1.0, bits - 1));
    snprintf(high, sizeof(high), "%.1f", ldexp(1.0, bits - 1));
    if (bits == 64) {
      snprintf(min, sizeof(min), "(%s)(-9223372036854775807LL - 1)", type);
    } else {
      snprintf(min, sizeof(min), "(%s)%" PRId64 "LL", type, -((int64_t)1 << (bits - 1)));
    }
    snprintf(max, sizeof(max), "(%s)%" PRId64 "LL", type,
             (int64_t)(((uint64_t)1 << (bits - 1)) - 1));
  }
  low_text = low;
  high_text = high;
  stax_jit_text_appendf(t, "(%s != %s ? (%s)0 : (double)%s <= %s ? %s : (double)%s >= %s ? %s : (%s)%s)",
                        x, x, type, x, low_text, min, x, high_text, max, type, x);
}

/* ---- expressions ------------------------------------------------------------------------- */

/* Emits the temporaries `e` needs and returns the number of the one holding it (-1 after a
 * refusal). */
static int32_t emit_expr(cuda_cg_t* cg, const stax_kir_expr_t* e) {
  if (cg->status != STAX_OK) return -1;
  if (cg->cache_stamp[e->id] == cg->stamp) return cg->cache[e->id];
  int32_t operands[3] = {-1, -1, -1};
  for (int32_t i = 0; i < e->operand_count; i++) {
    operands[i] = emit_expr(cg, e->operands[i]);
    if (operands[i] < 0) return -1;
  }
  char names[3][16];
  for (int32_t i = 0; i < 3; i++) snprintf(names[i], sizeof(names[i]), "t%d", (int)operands[i]);
  const char* type = checked_type(cg, e->dtype);
  if (cg->status != STAX_OK) return -1;
  int32_t temp = cg->temp_count++;
  indent(cg);
  stax_jit_text_appendf(&cg->text, "const %s t%d = ", type, (int)temp);
  switch (e->kind) {
    case STAX_KIR_CONSTANT:
      if (is_float(e->dtype)) {
        append_float(cg, e->dtype, e->float_value);
      } else {
        append_int(cg, e->dtype, e->int_value);
      }
      break;
    case STAX_KIR_LOAD:
      stax_jit_text_appendf(&cg->text, e->dtype == STAX_DTYPE_BOOL ? "(int)(b%d[" : "b%d[",
                            (int)e->buffer);
      append_index(cg, e->index);
      stax_jit_text_append(&cg->text, e->dtype == STAX_DTYPE_BOOL ? "] != 0)" : "]");
      break;
    case STAX_KIR_LOCAL: stax_jit_text_appendf(&cg->text, "l%d", (int)e->local); break;
    case STAX_KIR_LOOP_INDEX: stax_jit_text_appendf(&cg->text, "i%d", (int)e->loop); break;
    case STAX_KIR_UNARY:
      append_unary(cg, (stax_kir_unary_op_t)e->op, e->operands[0]->dtype, names[0]);
      break;
    case STAX_KIR_BINARY:
      append_binary(cg, (stax_kir_binary_op_t)e->op, e->operands[0]->dtype, names[0], names[1]);
      break;
    case STAX_KIR_SELECT:
      stax_jit_text_appendf(&cg->text, "%s ? %s : %s", names[0], names[1], names[2]);
      break;
    case STAX_KIR_FMA:
      if (is_float(e->dtype)) {
        stax_jit_text_appendf(&cg->text, "%s(%s, %s, %s)",
                              e->dtype == STAX_DTYPE_FLOAT32 ? "fmaf" : "fma", names[0], names[1],
                              names[2]);
      } else {
        refuse(cg, "integer fma is not handled%s", NULL);
      }
      break;
    case STAX_KIR_CAST: append_cast(cg, e->operands[0]->dtype, e->dtype, names[0]); break;
    default: refuse(cg, "an expression kind is not handled%s", NULL); break;
  }
  stax_jit_text_append(&cg->text, ";\n");
  cg->cache[e->id] = temp;
  cg->cache_stamp[e->id] = cg->stamp;
  return cg->status == STAX_OK ? temp : -1;
}

/* ---- statements -------------------------------------------------------------------------- */

static void emit_block(cuda_cg_t* cg, const stax_kir_block_t* block);

static void emit_statement(cuda_cg_t* cg, const stax_kir_stmt_t* s) {
  cg->stamp++;
  switch (s->kind) {
    case STAX_KIR_STMT_LOOP: {
      const stax_kir_loop_t* loop = cg->kir->loops[s->loop];
      if (loop->extent_param >= 0) {
        refuse(cg, "loop %s has a run-time extent", loop->name);
        return;
      }
      indent(cg);
      stax_jit_text_appendf(&cg->text, "for (long long i%d = 0; i%d < %" PRId64 "LL; i%d++) {\n",
                            (int)s->loop, (int)s->loop, loop->extent, (int)s->loop);
      cg->depth++;
      emit_block(cg, &loop->body);
      cg->depth--;
      indent(cg);
      stax_jit_text_append(&cg->text, "}\n");
      return;
    }
    case STAX_KIR_STMT_STORE: {
      int32_t value = emit_expr(cg, s->value);
      if (value < 0) return;
      stax_dtype_t dtype = cg->kir->buffers[s->buffer]->dtype;
      indent(cg);
      stax_jit_text_appendf(&cg->text, "b%d[", (int)s->buffer);
      append_index(cg, s->index);
      if (dtype == STAX_DTYPE_BOOL) {
        stax_jit_text_appendf(&cg->text, "] = (unsigned char)(t%d != 0);\n", (int)value);
      } else {
        stax_jit_text_appendf(&cg->text, "] = t%d;\n", (int)value);
      }
      return;
    }
    case STAX_KIR_STMT_DECLARE:
    case STAX_KIR_STMT_ASSIGN:
    case STAX_KIR_STMT_REDUCE: {
      int32_t value = emit_expr(cg, s->value);
      if (value < 0) return;
      const stax_kir_local_t* local = cg->kir->locals[s->local];
      const char* type = checked_type(cg, local->dtype);
      indent(cg);
      if (s->kind == STAX_KIR_STMT_DECLARE) {
        stax_jit_text_appendf(&cg->text, "%s l%d = t%d; /* %s */\n", type, (int)s->local,
                              (int)value, local->name);
      } else if (s->kind == STAX_KIR_STMT_ASSIGN) {
        stax_jit_text_appendf(&cg->text, "l%d = t%d;\n", (int)s->local, (int)value);
      } else {
        char current[16], operand[16];
        char prefix = cg->partial && cg->partial[s->local] ? 'p' : 'l';
        snprintf(current, sizeof(current), "%c%d", prefix, (int)s->local);
        snprintf(operand, sizeof(operand), "t%d", (int)value);
        stax_jit_text_appendf(&cg->text, "%s = ", current);
        append_binary(cg, s->reduce_op, local->dtype, current, operand);
        stax_jit_text_append(&cg->text, ";\n");
      }
      return;
    }
  }
  refuse(cg, "a statement kind is not handled%s", NULL);
}

static void emit_block(cuda_cg_t* cg, const stax_kir_block_t* block) {
  for (const stax_kir_stmt_t* s = block->first; s && cg->status == STAX_OK; s = s->next)
    emit_statement(cg, s);
}

/* ---- stages ------------------------------------------------------------------------------ */

static const char prelude[] =
    "#ifdef __cplusplus\n"
    "#define STAX_EXTERN_C extern \"C\"\n"
    "#else\n"
    "#define STAX_EXTERN_C\n"
    "#endif\n"
    "#if defined(__CUDACC__) || defined(__CUDACC_RTC__)\n"
    "#define STAX_INF_F __int_as_float(0x7f800000)\n"
    "#define STAX_NAN_F __int_as_float(0x7fc00000)\n"
    "#define STAX_INF __longlong_as_double(0x7ff0000000000000LL)\n"
    "#define STAX_NAN __longlong_as_double(0x7ff8000000000000LL)\n"
    "#else /* plain C on the host (the tests' shim includes math.h) */\n"
    "#define STAX_INF_F INFINITY\n"
    "#define STAX_NAN_F NAN\n"
    "#define STAX_INF ((double)INFINITY)\n"
    "#define STAX_NAN ((double)NAN)\n"
    "#endif\n";

/* max / min as the CPU kernels (llvm.maximum / llvm.minimum): NaN propagates, +0 is above -0.
 * Emitted only when used (NVRTC warns about unused static functions). */
static const char* const helpers[4] = {
    "static __device__ __forceinline__ float stax_max_f32(float a, float b) {\n"
    "  return a != a || b != b ? a + b : a > b ? a : b > a ? b : signbit(a) ? b : a;\n"
    "}\n",
    "static __device__ __forceinline__ float stax_min_f32(float a, float b) {\n"
    "  return a != a || b != b ? a + b : a < b ? a : b < a ? b : signbit(a) ? a : b;\n"
    "}\n",
    "static __device__ __forceinline__ double stax_max_f64(double a, double b) {\n"
    "  return a != a || b != b ? a + b : a > b ? a : b > a ? b : signbit(a) ? b : a;\n"
    "}\n",
    "static __device__ __forceinline__ double stax_min_f64(double a, double b) {\n"
    "  return a != a || b != b ? a + b : a < b ? a : b < a ? b : signbit(a) ? a : b;\n"
    "}\n",
};

/* Letters, digits and _ only (kernel IR names come from model nodes). */
static void entry_name(const char* kernel_name, int32_t stage, char* out, size_t size) {
  int n = snprintf(out, size, "stax_");
  size_t at = n > 0 ? (size_t)n : 0;
  for (const char* c = kernel_name; c && *c && at + 16 < size; c++) {
    bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
    out[at++] = ok ? *c : '_';
  }
  snprintf(out + at, size - at, "_s%d", (int)stage);
}

/* ---- block-per-row stages ----------------------------------------------------------------
 * A row kernel's stage (lower_rows.c: per row, reductions over the row into locals, then loops
 * storing the row) runs one block per work item (row) when every statement of the row body is
 *   - a DECLARE / ASSIGN / REDUCE of a local, or a STORE, at row level: every thread computes
 *     the same values redundantly; thread 0 alone stores, then the block synchronizes;
 *   - a loop without nested loops whose statements only DECLARE its own locals, STORE, and
 *     REDUCE (add, mul, max, min) float row-level locals it never reads, storing only when it
 *     is a vector loop (its lanes are independent by the IR's rules): its iterations are spread
 *     over the block's threads (i = threadIdx.x; i += blockDim.x); each reduced local gets a
 *     per-thread partial starting at the operator's identity, combined by __shfl_xor_sync
 *     within each warp and through shared memory across warps, then folded into the local in
 *     every thread; a storing loop ends with __syncthreads so later loops see its stores.
 * and at least one loop reduces. Otherwise the stage keeps one thread per row. */

static bool walk_reads_partial(cuda_cg_t* cg, const stax_kir_expr_t* e) {
  if (cg->walk_stamp[e->id] == cg->walk) return false;
  cg->walk_stamp[e->id] = cg->walk;
  if (e->kind == STAX_KIR_LOCAL && cg->partial[e->local]) return true;
  for (int32_t i = 0; i < e->operand_count; i++)
    if (walk_reads_partial(cg, e->operands[i])) return true;
  return false;
}

/* Whether `loop` can be spread over a block; marks the locals it reduces in cg->partial (the
 * caller clears them). *out_reduces / *out_stores: what it does. */
static bool distributable(cuda_cg_t* cg, const stax_kir_loop_t* loop, bool* out_reduces,
                          bool* out_stores) {
  *out_reduces = *out_stores = false;
  for (const stax_kir_stmt_t* s = loop->body.first; s; s = s->next) {
    switch (s->kind) {
      case STAX_KIR_STMT_LOOP: return false;
      case STAX_KIR_STMT_STORE: *out_stores = true; break;
      case STAX_KIR_STMT_DECLARE:
        if (cg->row_local[s->local]) return false;
        break;
      case STAX_KIR_STMT_ASSIGN:
        if (cg->row_local[s->local]) return false;
        break;
      case STAX_KIR_STMT_REDUCE: {
        stax_dtype_t dtype = cg->kir->locals[s->local]->dtype;
        if (!cg->row_local[s->local] || !is_float(dtype)) return false;
        if (s->reduce_op != STAX_KIR_ADD && s->reduce_op != STAX_KIR_MUL &&
            s->reduce_op != STAX_KIR_MAX && s->reduce_op != STAX_KIR_MIN)
          return false;
        cg->partial[s->local] = true;
        *out_reduces = true;
        break;
      }
    }
  }
  if (*out_stores && loop->vector_width <= 1) return false;
  cg->walk++;
  for (const stax_kir_stmt_t* s = loop->body.first; s; s = s->next)
    if (s->value && walk_reads_partial(cg, s->value)) return false;
  return true;
}

static void clear_partials(cuda_cg_t* cg) {
  memset(cg->partial, 0, sizeof(bool) * (size_t)(cg->kir->local_count + 1));
}

/* True when the row body fits (see above); marks cg->reduced. */
static bool plan_block_rows(cuda_cg_t* cg, const stax_kir_block_t* row) {
  size_t locals = (size_t)cg->kir->local_count + 1;
  memset(cg->row_local, 0, sizeof(bool) * locals);
  memset(cg->reduced, 0, sizeof(bool) * locals);
  bool any_reduction = false;
  for (const stax_kir_stmt_t* s = row->first; s; s = s->next) {
    if (s->kind == STAX_KIR_STMT_DECLARE) cg->row_local[s->local] = true;
    if (s->kind != STAX_KIR_STMT_LOOP) continue;
    const stax_kir_loop_t* loop = cg->kir->loops[s->loop];
    bool reduces, stores;
    bool ok = loop->extent_param < 0 && distributable(cg, loop, &reduces, &stores);
    for (int32_t l = 0; l < cg->kir->local_count; l++)
      if (cg->partial[l]) cg->reduced[l] = true;
    clear_partials(cg);
    if (!ok) return false;
    any_reduction = any_reduction || reduces;
  }
  return any_reduction;
}

static const char* identity_text(stax_kir_binary_op_t op, bool f32) {
  switch (op) {
    case STAX_KIR_ADD: return f32 ? "-0.0f" : "-0.0";
    case STAX_KIR_MUL: return f32 ? "1.0f" : "1.0";
    case STAX_KIR_MAX: return f32 ? "-STAX_INF_F" : "-STAX_INF";
    default: return f32 ? "STAX_INF_F" : "STAX_INF";
  }
}

/* The reduce operator of `local` within `loop` (the first REDUCE into it). */
static stax_kir_binary_op_t reduce_op_of(const stax_kir_loop_t* loop, int32_t local) {
  for (const stax_kir_stmt_t* s = loop->body.first; s; s = s->next)
    if (s->kind == STAX_KIR_STMT_REDUCE && s->local == local) return s->reduce_op;
  return STAX_KIR_ADD;
}

static void emit_block_loop(cuda_cg_t* cg, int32_t id) {
  const stax_kir_loop_t* loop = cg->kir->loops[id];
  bool reduces, stores;
  if (!distributable(cg, loop, &reduces, &stores)) {
    refuse(cg, "loop %s cannot be spread over a block (planning bug)", loop->name);
    return;
  }
  int32_t local_count = cg->kir->local_count;
  for (int32_t l = 0; l < local_count; l++) {
    if (!cg->partial[l]) continue;
    const stax_kir_local_t* local = cg->kir->locals[l];
    indent(cg);
    stax_jit_text_appendf(&cg->text, "%s p%d = %s; /* this thread's part of %s */\n",
                          value_type(local->dtype), (int)l,
                          identity_text(reduce_op_of(loop, l), local->dtype == STAX_DTYPE_FLOAT32),
                          local->name);
  }
  indent(cg);
  stax_jit_text_appendf(&cg->text,
                        "for (long long i%d = threadIdx.x; i%d < %" PRId64 "LL; i%d += blockDim.x) {\n",
                        (int)id, (int)id, loop->extent, (int)id);
  cg->depth++;
  emit_block(cg, &loop->body);
  cg->depth--;
  indent(cg);
  stax_jit_text_append(&cg->text, "}\n");
  for (int32_t l = 0; l < local_count && cg->status == STAX_OK; l++) {
    if (!cg->partial[l]) continue;
    const stax_kir_local_t* local = cg->kir->locals[l];
    stax_kir_binary_op_t op = reduce_op_of(loop, l);
    bool f32 = local->dtype == STAX_DTYPE_FLOAT32;
    const char* type = value_type(local->dtype);
    char partial[16], mine[16], shared[48], folded[16];
    snprintf(partial, sizeof(partial), "p%d", (int)l);
    snprintf(mine, sizeof(mine), "l%d", (int)l);
    snprintf(shared, sizeof(shared), "stax_shared_l%d[stax_w]", (int)l);
    snprintf(folded, sizeof(folded), "stax_v");
    indent(cg);
    stax_jit_text_appendf(&cg->text, "{ /* %s over the block: warps by shuffles, then shared memory */\n",
                          local->name);
    cg->depth++;
    indent(cg);
    stax_jit_text_appendf(&cg->text, "%s stax_v = %s;\n", type, partial);
    indent(cg);
    stax_jit_text_append(&cg->text, "for (int stax_o = 16; stax_o > 0; stax_o >>= 1) stax_v = ");
    append_binary(cg, op, local->dtype, "stax_v", "__shfl_xor_sync(0xffffffffu, stax_v, stax_o)");
    stax_jit_text_append(&cg->text, ";\n");
    indent(cg);
    stax_jit_text_appendf(&cg->text,
                          "if ((threadIdx.x & 31u) == 0) stax_shared_l%d[threadIdx.x >> 5] = stax_v;\n",
                          (int)l);
    indent(cg);
    stax_jit_text_append(&cg->text, "__syncthreads();\n");
    indent(cg);
    stax_jit_text_appendf(&cg->text, "stax_v = %s;\n", identity_text(op, f32));
    indent(cg);
    stax_jit_text_append(&cg->text,
                         "for (unsigned stax_w = 0; stax_w < (blockDim.x >> 5); stax_w++) stax_v = ");
    append_binary(cg, op, local->dtype, "stax_v", shared);
    stax_jit_text_append(&cg->text, ";\n");
    indent(cg);
    stax_jit_text_append(&cg->text, "__syncthreads(); /* before the next row reuses it */\n");
    indent(cg);
    stax_jit_text_appendf(&cg->text, "%s = ", mine);
    append_binary(cg, op, local->dtype, mine, folded);
    stax_jit_text_append(&cg->text, ";\n");
    cg->depth--;
    indent(cg);
    stax_jit_text_append(&cg->text, "}\n");
  }
  clear_partials(cg);
  if (stores && !reduces) {
    indent(cg);
    stax_jit_text_append(&cg->text, "__syncthreads(); /* the stores above, for later loops */\n");
  }
}

static void emit_block_row(cuda_cg_t* cg, const stax_kir_block_t* row) {
  for (const stax_kir_stmt_t* s = row->first; s && cg->status == STAX_OK; s = s->next) {
    cg->stamp++;
    if (s->kind == STAX_KIR_STMT_LOOP) {
      emit_block_loop(cg, s->loop);
    } else if (s->kind == STAX_KIR_STMT_STORE) {
      indent(cg);
      stax_jit_text_append(&cg->text, "if (threadIdx.x == 0) {\n");
      cg->depth++;
      emit_statement(cg, s);
      cg->depth--;
      indent(cg);
      stax_jit_text_append(&cg->text, "}\n");
      indent(cg);
      stax_jit_text_append(&cg->text, "__syncthreads();\n");
    } else {
      emit_statement(cg, s);
    }
  }
}

static void emit_stage(cuda_cg_t* cg, int32_t index, stax_cuda_stage_launch_t* launch) {
  const stax_kir_kernel_t* kir = cg->kir;
  const stax_kir_stage_t* stage = kir->stages[index];
  entry_name(kir->name, index, launch->entry, sizeof(launch->entry));
  stax_jit_text_appendf(&cg->text, "\n/* stage %d: %s */\nSTAX_EXTERN_C __global__ void %s(",
                        (int)index, stage->name ? stage->name : "", launch->entry);
  for (int32_t b = 0; b < kir->buffer_count; b++) {
    const stax_kir_buffer_t* buffer = kir->buffers[b];
    stax_jit_text_appendf(&cg->text, "%s%s%s* b%d", b ? ", " : "",
                          buffer->role == STAX_KIR_BUFFER_INPUT ? "const " : "",
                          memory_type(buffer->dtype), (int)b);
  }
  stax_jit_text_append(&cg->text, ") {\n");
  cg->depth = 1;

  /* The perfect nest at the top of the stage is the parallel work. */
  const stax_kir_loop_t* nest[STAX_KIR_MAX_INDEX_TERMS];
  int32_t nest_ids[STAX_KIR_MAX_INDEX_TERMS];
  int32_t nest_count = 0;
  int64_t work = 1;
  const stax_kir_block_t* body = &stage->body;
  while (body->first && body->first == body->last && body->first->kind == STAX_KIR_STMT_LOOP &&
         nest_count < STAX_KIR_MAX_INDEX_TERMS) {
    const stax_kir_loop_t* loop = kir->loops[body->first->loop];
    if (loop->extent_param >= 0) {
      refuse(cg, "loop %s has a run-time extent", loop->name);
      return;
    }
    nest_ids[nest_count] = body->first->loop;
    nest[nest_count++] = loop;
    work = loop->extent > 0 && work > INT64_MAX / loop->extent ? INT64_MAX : work * loop->extent;
    body = &loop->body;
  }
  if (nest_count == 0) {
    launch->serial = true;
    launch->work_items = body->first ? 1 : 0;
    stax_jit_text_append(&cg->text,
                         "  if (blockIdx.x != 0 || threadIdx.x != 0) return; /* serial stage */\n");
    emit_block(cg, body);
  } else {
    launch->work_items = work;
    launch->block_per_item = cg->block_rows && plan_block_rows(cg, body);
    if (launch->block_per_item) {
      for (int32_t l = 0; l < kir->local_count; l++)
        if (cg->reduced[l])
          stax_jit_text_appendf(&cg->text, "  __shared__ %s stax_shared_l%d[32];\n",
                                value_type(kir->locals[l]->dtype), (int)l);
      stax_jit_text_appendf(&cg->text,
                            "  const long long stax_work = %" PRId64 "LL; /* one block per item */\n"
                            "  for (long long stax_item = blockIdx.x; stax_item < stax_work; "
                            "stax_item += gridDim.x) {\n",
                            work);
    } else {
      stax_jit_text_appendf(&cg->text,
                            "  const long long stax_work = %" PRId64 "LL;\n"
                            "  for (long long stax_item = (long long)blockIdx.x * blockDim.x + "
                            "threadIdx.x; stax_item < stax_work;\n"
                            "       stax_item += (long long)gridDim.x * blockDim.x) {\n",
                            work);
    }
    cg->depth = 2;
    if (nest_count == 1) {
      stax_jit_text_appendf(&cg->text, "    const long long i%d = stax_item; /* %s */\n",
                            (int)nest_ids[0], nest[0]->name);
    } else {
      stax_jit_text_append(&cg->text, "    long long stax_rest = stax_item;\n");
      for (int32_t l = nest_count - 1; l >= 0; l--) {
        if (l == 0) {
          stax_jit_text_appendf(&cg->text, "    const long long i%d = stax_rest; /* %s */\n",
                                (int)nest_ids[l], nest[l]->name);
        } else {
          stax_jit_text_appendf(&cg->text,
                                "    const long long i%d = stax_rest %% %" PRId64
                                "LL; /* %s */\n    stax_rest /= %" PRId64 "LL;\n",
                                (int)nest_ids[l], nest[l]->extent, nest[l]->name, nest[l]->extent);
        }
      }
    }
    if (launch->block_per_item) {
      emit_block_row(cg, body);
    } else {
      emit_block(cg, body);
    }
    stax_jit_text_append(&cg->text, "  }\n");
  }
  stax_jit_text_append(&cg->text, "}\n");
}

/* ---- entry points ------------------------------------------------------------------------ */

void stax_cuda_source_free(stax_cuda_source_t* source, stax_allocator_t allocator) {
  if (!source) return;
  if (source->text) stax_jit_text_free_string(allocator, source->text);
  memset(source, 0, sizeof(*source));
}

stax_status_t stax_cuda_codegen(const stax_kir_kernel_t* kernel,
                                const stax_cuda_codegen_options_t* options,
                                stax_allocator_t allocator, stax_cuda_source_t* out) {
  memset(out, 0, sizeof(*out));
  cuda_cg_t cg = {.kir = kernel, .allocator = allocator};
  cg.block_rows = options ? options->block_rows : true;
  if (kernel->rows_generic || kernel->symbolic)
    refuse(&cg, "%s kernels (run-time parameters) are not handled",
           kernel->rows_generic ? "rows-generic" : "symbolic");
  if (kernel->stage_count > STAX_CUDA_MAX_STAGES) refuse(&cg, "more than 32 stages%s", NULL);
  for (int32_t b = 0; b < kernel->buffer_count && cg.status == STAX_OK; b++) {
    const stax_kir_buffer_t* buffer = kernel->buffers[b];
    if (buffer->role == STAX_KIR_BUFFER_SCRATCH)
      refuse(&cg, "scratch buffer %s needs a device allocator (not implemented)", buffer->name);
    else if (!value_type(buffer->dtype))
      refuse(&cg, "buffer dtype %s is not handled", stax_dtype_name(buffer->dtype));
  }
  if (cg.status != STAX_OK) return cg.status;
  size_t exprs = (size_t)kernel->expr_count + 1;
  stax_status_t status = STAX_OK;
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(allocator, exprs, sizeof(int32_t),
                                                   (void**)&cg.cache),
                     cleanup);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(allocator, exprs, sizeof(uint32_t),
                                                   (void**)&cg.cache_stamp),
                     cleanup);
  STAX_GOTO_IF_ERROR(status, stax_allocator_calloc(allocator, exprs, sizeof(uint32_t),
                                                   (void**)&cg.walk_stamp),
                     cleanup);
  size_t locals = (size_t)kernel->local_count + 1;
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(allocator, locals, sizeof(bool), (void**)&cg.partial), cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(allocator, locals, sizeof(bool), (void**)&cg.row_local),
      cleanup);
  STAX_GOTO_IF_ERROR(
      status, stax_allocator_calloc(allocator, locals, sizeof(bool), (void**)&cg.reduced), cleanup);
  /* The stages first (they decide which helpers the prelude needs), then the whole text. */
  stax_jit_text_init(&cg.text, allocator);
  for (int32_t s = 0; s < kernel->stage_count && cg.status == STAX_OK; s++)
    emit_stage(&cg, s, &out->stages[s]);
  char* stages_text = NULL;
  if (cg.status != STAX_OK) {
    status = cg.status;
    cg.status = STAX_OK;
    stax_jit_text_reset(&cg.text);
    memset(out, 0, sizeof(*out));
    goto cleanup;
  }
  STAX_GOTO_IF_ERROR(status, stax_jit_text_finish(&cg.text, &stages_text), cleanup);
  stax_jit_text_init(&cg.text, allocator);
  stax_jit_text_appendf(&cg.text,
                        "/* CUDA C generated by stax (src/jit/cuda_codegen.c) from kernel IR "
                        "'%s'. */\n",
                        kernel->name);
  for (int32_t b = 0; b < kernel->buffer_count; b++) {
    const stax_kir_buffer_t* buffer = kernel->buffers[b];
    stax_jit_text_appendf(&cg.text, "/* b%d %s: %s[", (int)b, buffer->name,
                          stax_dtype_name(buffer->dtype));
    for (int32_t d = 0; d < buffer->rank; d++)
      stax_jit_text_appendf(&cg.text, "%s%" PRId64, d ? ", " : "", buffer->dims[d]);
    stax_jit_text_append(&cg.text, "] strides [");
    for (int32_t d = 0; d < buffer->rank; d++)
      stax_jit_text_appendf(&cg.text, "%s%" PRId64, d ? ", " : "", buffer->strides[d]);
    stax_jit_text_appendf(&cg.text, "] %s */\n",
                          buffer->role == STAX_KIR_BUFFER_INPUT ? "input" : "output");
  }
  stax_jit_text_append(&cg.text, prelude);
  for (int32_t h = 0; h < 4; h++)
    if (cg.helper_used[h]) stax_jit_text_append(&cg.text, helpers[h]);
  stax_jit_text_append(&cg.text, stages_text);
  stax_jit_text_free_string(allocator, stages_text);
  STAX_GOTO_IF_ERROR(status, stax_jit_text_finish(&cg.text, &out->text), cleanup);
  out->stage_count = kernel->stage_count;
  out->buffer_count = kernel->buffer_count;
cleanup:
  if (status != STAX_OK) memset(out, 0, sizeof(*out));
  stax_allocator_free(allocator, cg.cache, exprs * sizeof(int32_t));
  stax_allocator_free(allocator, cg.cache_stamp, exprs * sizeof(uint32_t));
  stax_allocator_free(allocator, cg.walk_stamp, exprs * sizeof(uint32_t));
  size_t local_bytes = sizeof(bool) * ((size_t)kernel->local_count + 1);
  stax_allocator_free(allocator, cg.partial, local_bytes);
  stax_allocator_free(allocator, cg.row_local, local_bytes);
  stax_allocator_free(allocator, cg.reduced, local_bytes);
  return status;
}
