/* The op conformance runner: reads the manifest written by tests/conformance/gen_cases.py,
 * builds a one-node graph per case through the public C API (run-time inputs declared with the
 * case's symbols or constants, constant-like inputs as initializers), compiles it, runs it
 * under both dispatch modes (and, for all-constant shapes, with and without static opcode
 * variants), feeds the inputs as the non-contiguous views the case asks for, and compares every
 * output with numpy's. A case may hold several runs (new shapes through the same program and
 * context) or expect an error (bad input must be rejected, not crash). Then the whole-program
 * tests of chain.c. Prints per-op counts and ends with "N passed, M failed"; exits 1 on any
 * failure, 2 on a malformed manifest.
 *
 *   stax_conformance [CASE_DIR] [--filter OP[,OP...]] [--verbose] [--no-chain]
 *
 * The manifest format is documented at the top of gen_cases.py. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

#define MAX_IO 16
#define MAX_ATTRS 16
#define MAX_SYMS 24
#define MAX_RUNS 6
#define WHY_SIZE 1024

typedef struct blob_ref_t {
  size_t offset;
  size_t size;
  bool bf16; /* a uint16 array holding bfloat16 bits */
} blob_ref_t;

typedef struct attr_spec_t {
  const char* name;
  stax_attr_type_t type;
  int64_t i;
  float f;
  const char* s;
  int32_t count;
  int64_t* ints;  /* owned */
  float* floats;  /* owned */
  blob_ref_t tensor;
} attr_spec_t;

typedef struct input_spec_t {
  char kind; /* 'n' none, 'i' initializer, 'f' fed at run time */
  blob_ref_t ref;
  char view;
  int32_t rank;
  int64_t shape[STAX_MAX_RANK];
  const char* dims[STAX_MAX_RANK];
} input_spec_t;

typedef struct output_spec_t {
  bool skip;
  blob_ref_t ref;
  double rtol, atol;
} output_spec_t;

/* One run of the case's program: its inputs (the first run's also declare the graph; later runs
 * list only the fed inputs) and expected outputs. */
typedef struct run_spec_t {
  int32_t input_count;
  input_spec_t inputs[MAX_IO];
  int32_t listed_outputs;
  output_spec_t outputs[MAX_IO];
} run_spec_t;

typedef struct case_spec_t {
  int line;
  const char* name;
  const char* op;
  int32_t output_count;
  bool is_static;
  bool expect_error; /* bad input: building, compiling or running must fail cleanly */
  int32_t sym_count;
  struct {
    const char* name;
    int64_t min, max;
  } syms[MAX_SYMS];
  int32_t attr_count;
  attr_spec_t attrs[MAX_ATTRS];
  int32_t run_count;
  run_spec_t runs[MAX_RUNS];
} case_spec_t;

typedef struct op_tally_t {
  char op[48];
  int passed, failed;
} op_tally_t;

typedef struct runner_t {
  const unsigned char* blob;
  size_t blob_size;
  bool verbose;
  const char* filter;
  op_tally_t tallies[STAX_OP_COUNT + 8];
  int tally_count;
  int passed, failed;
} runner_t;

static stax_allocator_t alloc(void) { return stax_allocator_system(); }

/* ---- files ---------------------------------------------------------------------------------- */

static char* read_file(const char* path, size_t* out_size) {
  *out_size = 0;
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  char* data = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long size = ftell(f);
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0) {
      data = malloc((size_t)size + 1);
      if (data && fread(data, 1, (size_t)size, f) == (size_t)size) {
        data[size] = '\0';
        *out_size = (size_t)size;
      } else {
        free(data);
        data = NULL;
      }
    }
  }
  fclose(f);
  return data;
}

/* ---- manifest parsing ----------------------------------------------------------------------- */

static bool parse_ref(const char* token, blob_ref_t* out) {
  unsigned long long offset = 0, size = 0;
  int used = 0;
  if (!token || sscanf(token, "@%llu:%llu%n", &offset, &size, &used) != 2) return false;
  out->offset = (size_t)offset;
  out->size = (size_t)size;
  out->bf16 = strcmp(token + used, ":bf16") == 0;
  return out->bf16 || token[used] == '\0';
}

static bool parse_int(const char* token, int64_t* out) {
  if (!token) return false;
  char* end = NULL;
  errno = 0;
  long long v = strtoll(token, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

/* Splits a comma list ("2,3,4" or "-" for none) in place. */
static int32_t split_list(char* text, char** out, int32_t capacity) {
  if (!text || strcmp(text, "-") == 0) return 0;
  int32_t count = 0;
  char* save = NULL;
  for (char* part = strtok_r(text, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
    if (count == capacity) return -1;
    out[count++] = part;
  }
  return count;
}

static void case_free(case_spec_t* c) {
  for (int32_t a = 0; a < c->attr_count; a++) {
    free(c->attrs[a].ints);
    free(c->attrs[a].floats);
  }
  memset(c, 0, sizeof(*c));
}

/* Parses one manifest line (already split into tokens) into the case. */
static bool parse_line(case_spec_t* c, char** tok, int32_t n) {
  const char* key = tok[0];
  if (strcmp(key, "sym") == 0) {
    if (n != 4 || c->sym_count == MAX_SYMS) return false;
    c->syms[c->sym_count].name = tok[1];
    if (!parse_int(tok[2], &c->syms[c->sym_count].min)) return false;
    if (strcmp(tok[3], "inf") == 0) {
      c->syms[c->sym_count].max = STAX_DIM_MAX;
    } else if (!parse_int(tok[3], &c->syms[c->sym_count].max)) {
      return false;
    }
    c->sym_count++;
    return true;
  }
  if (strcmp(key, "attr") == 0) {
    if (n < 4 || c->attr_count == MAX_ATTRS) return false;
    attr_spec_t* a = &c->attrs[c->attr_count++];
    a->name = tok[1];
    const char* kind = tok[2];
    if (strcmp(kind, "int") == 0) {
      a->type = STAX_ATTR_INT;
      return parse_int(tok[3], &a->i);
    }
    if (strcmp(kind, "float") == 0) {
      a->type = STAX_ATTR_FLOAT;
      a->f = strtof(tok[3], NULL);
      return true;
    }
    if (strcmp(kind, "string") == 0) {
      a->type = STAX_ATTR_STRING;
      a->s = tok[3];
      return true;
    }
    if (strcmp(kind, "tensor") == 0) {
      a->type = STAX_ATTR_TENSOR;
      return parse_ref(tok[3], &a->tensor);
    }
    int64_t count = 0;
    if (!parse_int(tok[3], &count) || count < 0 || count != n - 4) return false;
    a->count = (int32_t)count;
    if (strcmp(kind, "ints") == 0) {
      a->type = STAX_ATTR_INTS;
      a->ints = calloc((size_t)count + 1, sizeof(int64_t));
      if (!a->ints) return false;
      for (int64_t k = 0; k < count; k++) {
        if (!parse_int(tok[4 + k], &a->ints[k])) return false;
      }
      return true;
    }
    if (strcmp(kind, "floats") == 0) {
      a->type = STAX_ATTR_FLOATS;
      a->floats = calloc((size_t)count + 1, sizeof(float));
      if (!a->floats) return false;
      for (int64_t k = 0; k < count; k++) a->floats[k] = strtof(tok[4 + k], NULL);
      return true;
    }
    return false;
  }
  run_spec_t* run = &c->runs[c->run_count - 1];
  if (strcmp(key, "error") == 0) {
    c->expect_error = true;
    return n == 1;
  }
  if (strcmp(key, "again") == 0) {
    if (n != 1 || c->run_count == MAX_RUNS) return false;
    c->run_count++;
    return true;
  }
  if (strcmp(key, "in") == 0) {
    if (n < 2 || run->input_count == MAX_IO) return false;
    input_spec_t* in = &run->inputs[run->input_count++];
    if (strcmp(tok[1], "none") == 0) {
      in->kind = 'n';
      return n == 2;
    }
    if (strcmp(tok[1], "init") == 0) {
      in->kind = 'i';
      return n == 3 && parse_ref(tok[2], &in->ref);
    }
    if (strcmp(tok[1], "feed") != 0 || n != 6) return false;
    in->kind = 'f';
    if (!parse_ref(tok[2], &in->ref)) return false;
    in->view = tok[3][0];
    char* parts[STAX_MAX_RANK];
    int32_t rank = split_list(tok[4], parts, STAX_MAX_RANK);
    if (rank < 0) return false;
    in->rank = rank;
    for (int32_t d = 0; d < rank; d++) {
      if (!parse_int(parts[d], &in->shape[d])) return false;
    }
    int32_t decl = split_list(tok[5], parts, STAX_MAX_RANK);
    if (decl != rank) return false;
    for (int32_t d = 0; d < rank; d++) in->dims[d] = parts[d];
    return true;
  }
  if (strcmp(key, "out") == 0) {
    if (n < 2 || run->listed_outputs == MAX_IO) return false;
    output_spec_t* out = &run->outputs[run->listed_outputs++];
    if (strcmp(tok[1], "skip") == 0) {
      out->skip = true;
      return n == 2;
    }
    if (n != 4 || !parse_ref(tok[1], &out->ref)) return false;
    out->rtol = strtod(tok[2], NULL);
    out->atol = strtod(tok[3], NULL);
    return true;
  }
  return false;
}

/* ---- building and running one case ---------------------------------------------------------- */

static stax_status_t load_array(const runner_t* r, blob_ref_t ref, const char* name,
                                stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  if (ref.offset > r->blob_size || ref.size > r->blob_size - ref.offset) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "array %s lies outside arrays.bin", name);
  }
  stax_tensor_t* parsed = NULL;
  STAX_RETURN_IF_ERROR(stax_npy_parse(alloc(), r->blob + ref.offset, ref.size, name, &parsed));
  if (!ref.bf16) {
    *out_tensor = parsed;
    return STAX_OK;
  }
  /* numpy has no bfloat16: the array holds the bits as uint16; reinterpret them. */
  stax_status_t status = STAX_OK;
  if (stax_tensor_dtype(parsed) != STAX_DTYPE_UINT16) {
    status = stax_status_make(STAX_INVALID_ARGUMENT, "bfloat16 array %s is not uint16", name);
  } else {
    status = stax_tensor_create(alloc(), STAX_DTYPE_BFLOAT16, stax_tensor_rank(parsed),
                                stax_tensor_dims(parsed), out_tensor);
    if (!status) {
      memcpy(stax_tensor_data(*out_tensor), stax_tensor_data(parsed),
             (size_t)stax_tensor_element_count(parsed) * sizeof(uint16_t));
    }
  }
  stax_tensor_release(parsed);
  return status;
}

/* Turns the stored array into the logical input: a view with the strides the case asks for. */
static stax_status_t make_view(stax_tensor_t* stored, const input_spec_t* in,
                               stax_tensor_t** out_view) {
  *out_view = NULL;
  int32_t rank = stax_tensor_rank(stored);
  int64_t starts[STAX_MAX_RANK], ends[STAX_MAX_RANK], steps[STAX_MAX_RANK];
  switch (in->view) {
    case 'c':
      stax_tensor_retain(stored);
      *out_view = stored;
      return STAX_OK;
    case 't':
      return stax_tensor_transpose(alloc(), stored, NULL, out_view);
    case 's':
      for (int32_t d = 0; d < rank; d++) {
        starts[d] = 0;
        ends[d] = stax_tensor_dims(stored)[d];
        steps[d] = 2;
      }
      return stax_tensor_slice(alloc(), stored, rank, starts, ends, NULL, steps, out_view);
    case 'r':
      for (int32_t d = 0; d < rank; d++) {
        starts[d] = -1;
        ends[d] = INT64_MIN;
        steps[d] = -1;
      }
      return stax_tensor_slice(alloc(), stored, rank, starts, ends, NULL, steps, out_view);
    case 'b':
      return stax_tensor_broadcast(alloc(), stored, in->rank, in->shape, out_view);
    case 'x': {
      stax_tensor_t* transposed = NULL;
      STAX_RETURN_IF_ERROR(stax_tensor_transpose(alloc(), stored, NULL, &transposed));
      for (int32_t d = 0; d < rank; d++) {
        starts[d] = 0;
        ends[d] = stax_tensor_dims(transposed)[d];
        steps[d] = 2;
      }
      stax_status_t status =
          stax_tensor_slice(alloc(), transposed, rank, starts, ends, NULL, steps, out_view);
      stax_tensor_release(transposed);
      return status;
    }
    default:
      return stax_status_make(STAX_INVALID_ARGUMENT, "unknown view '%c'", in->view);
  }
}

static stax_status_t declare_dims(stax_graph_t* g, const case_spec_t* c, const input_spec_t* in,
                                  const stax_dim_t** dims) {
  stax_shape_ctx_t* shape = stax_graph_shape_ctx(g);
  for (int32_t d = 0; d < in->rank; d++) {
    int64_t value = 0;
    if (parse_int(in->dims[d], &value)) {
      dims[d] = stax_dim_const(shape, value);
      if (!dims[d]) return stax_shape_ctx_take_error(shape);
      continue;
    }
    int32_t s = 0;
    while (s < c->sym_count && strcmp(c->syms[s].name, in->dims[d]) != 0) s++;
    if (s == c->sym_count) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "symbol %s is not declared", in->dims[d]);
    }
    STAX_RETURN_IF_ERROR(
        stax_symbol_get(shape, c->syms[s].name, c->syms[s].min, c->syms[s].max, &dims[d]));
  }
  return STAX_OK;
}

typedef struct case_state_t {
  stax_graph_t* graph;
  stax_tensor_t* feeds[MAX_RUNS][MAX_IO];
  int32_t feed_count[MAX_RUNS];
  stax_tensor_t* attr_tensors[MAX_ATTRS];
  stax_tensor_t* expected[MAX_RUNS][MAX_IO];
  stax_program_t* programs[2];
} case_state_t;

static void case_state_free(case_state_t* s) {
  stax_graph_destroy(s->graph);
  for (int32_t r = 0; r < MAX_RUNS; r++) {
    for (int32_t i = 0; i < MAX_IO; i++) {
      if (s->feeds[r][i]) stax_tensor_release(s->feeds[r][i]);
      if (s->expected[r][i]) stax_tensor_release(s->expected[r][i]);
    }
  }
  for (int32_t i = 0; i < MAX_ATTRS; i++) {
    if (s->attr_tensors[i]) stax_tensor_release(s->attr_tensors[i]);
  }
  for (int32_t i = 0; i < 2; i++) {
    if (s->programs[i]) stax_program_release(s->programs[i]);
  }
}

/* Loads a fed input and makes the view the case asks for; checks the view's shape. */
static stax_status_t load_feed(const runner_t* r, const input_spec_t* in, const char* name,
                               stax_tensor_t** out_view) {
  *out_view = NULL;
  stax_tensor_t* stored = NULL;
  STAX_RETURN_IF_ERROR(load_array(r, in->ref, name, &stored));
  stax_status_t status = make_view(stored, in, out_view);
  stax_tensor_release(stored);
  STAX_RETURN_IF_ERROR(status, "making the '%c' view", in->view);
  bool same = stax_tensor_rank(*out_view) == in->rank;
  for (int32_t d = 0; same && d < in->rank; d++) {
    same = stax_tensor_dims(*out_view)[d] == in->shape[d];
  }
  if (!same) {
    stax_tensor_release(*out_view);
    *out_view = NULL;
    return stax_status_make(STAX_INTERNAL, "the '%c' view has the wrong shape", in->view);
  }
  return STAX_OK;
}

/* Builds the graph; "graph" failures are shape-inference or API rejections. */
static stax_status_t build_graph(const runner_t* r, const case_spec_t* c, case_state_t* s) {
  STAX_RETURN_IF_ERROR(stax_graph_create(alloc(), &s->graph));
  stax_op_t op = stax_op_from_name(c->op);
  if (op == STAX_OP_INVALID) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "unknown op %s", c->op);
  }
  stax_value_id_t ids[MAX_IO];
  const run_spec_t* first = &c->runs[0];
  for (int32_t i = 0; i < first->input_count; i++) {
    const input_spec_t* in = &first->inputs[i];
    char name[32];
    snprintf(name, sizeof(name), "x%d", i);
    ids[i] = STAX_VALUE_NONE;
    if (in->kind == 'n') continue;
    if (in->kind == 'i') {
      stax_tensor_t* stored = NULL;
      STAX_RETURN_IF_ERROR(load_array(r, in->ref, name, &stored), "input %d", i);
      stax_status_t status = stax_graph_add_initializer(s->graph, name, stored, &ids[i]);
      stax_tensor_release(stored);
      STAX_RETURN_IF_ERROR(status, "initializer %d", i);
      continue;
    }
    stax_tensor_t* view = NULL;
    STAX_RETURN_IF_ERROR(load_feed(r, in, name, &view), "input %d", i);
    s->feeds[0][s->feed_count[0]++] = view;
    const stax_dim_t* dims[STAX_MAX_RANK];
    STAX_RETURN_IF_ERROR(declare_dims(s->graph, c, in, dims), "input %d", i);
    STAX_RETURN_IF_ERROR(stax_graph_add_input(s->graph, name, stax_tensor_dtype(view), in->rank,
                                              dims, &ids[i]),
                         "input %d", i);
  }
  stax_attr_t attrs[MAX_ATTRS];
  for (int32_t a = 0; a < c->attr_count; a++) {
    const attr_spec_t* spec = &c->attrs[a];
    switch (spec->type) {
      case STAX_ATTR_INT: attrs[a] = stax_attr_int(spec->name, spec->i); break;
      case STAX_ATTR_FLOAT: attrs[a] = stax_attr_float(spec->name, spec->f); break;
      case STAX_ATTR_STRING: attrs[a] = stax_attr_string(spec->name, spec->s); break;
      case STAX_ATTR_INTS: attrs[a] = stax_attr_ints(spec->name, spec->count, spec->ints); break;
      case STAX_ATTR_FLOATS:
        attrs[a] = stax_attr_floats(spec->name, spec->count, spec->floats);
        break;
      default:
        STAX_RETURN_IF_ERROR(load_array(r, spec->tensor, spec->name, &s->attr_tensors[a]));
        attrs[a] = stax_attr_tensor(spec->name, s->attr_tensors[a]);
        break;
    }
  }
  stax_value_id_t outputs[MAX_IO];
  stax_node_desc_t desc = {.op = op,
                           .name = c->name,
                           .input_count = first->input_count,
                           .inputs = ids,
                           .output_count = c->output_count,
                           .attr_count = c->attr_count,
                           .attrs = attrs};
  STAX_RETURN_IF_ERROR(stax_graph_add_node(s->graph, &desc, outputs));
  for (int32_t o = 0; o < c->output_count; o++) {
    STAX_RETURN_IF_ERROR(stax_graph_add_output(s->graph, outputs[o]));
  }
  /* The later runs' inputs: one per fed input of the first run. */
  for (int32_t run = 1; run < c->run_count; run++) {
    const run_spec_t* spec = &c->runs[run];
    if (spec->input_count != s->feed_count[0]) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "run %d has %d inputs, the first has %d fed",
                              run, spec->input_count, s->feed_count[0]);
    }
    for (int32_t i = 0; i < spec->input_count; i++) {
      if (spec->inputs[i].kind != 'f') {
        return stax_status_make(STAX_INVALID_ARGUMENT, "run %d input %d is not fed", run, i);
      }
      STAX_RETURN_IF_ERROR(load_feed(r, &spec->inputs[i], "input", &s->feeds[run][i]),
                           "run %d input %d", run, i);
      s->feed_count[run]++;
    }
  }
  return STAX_OK;
}

/* --jit: every context runs the JIT tier in verify mode (sync, threshold 1), so each compiled
 * segment is also interpreted and compared, and every run is repeated so the second one runs
 * the kernels. */
static bool conformance_jit = false;

static const char* variant_name(int program, stax_dispatch_mode_t mode) {
  if (program == 0) return mode == STAX_DISPATCH_SWITCH ? "switch" : "goto";
  return mode == STAX_DISPATCH_SWITCH ? "switch, no static variants"
                                      : "goto, no static variants";
}

/* Runs one program under one dispatch mode (the switch loop twice, to catch state left over
 * from a previous run) and compares the outputs. */
static bool run_and_compare(const case_spec_t* c, case_state_t* s, int program,
                            stax_dispatch_mode_t mode, char* why, size_t why_size) {
  stax_context_options_t options = {.dispatch = mode};
  if (conformance_jit) {
    options.jit = STAX_JIT_SYNC;
    options.jit_threshold = 1;
    options.jit_verify = true;
  }
  stax_context_t* context = NULL;
  stax_status_t status = stax_context_create(alloc(), s->programs[program], &options, &context);
  if (status) {
    snprintf(why, why_size, "[context, %s] %s", variant_name(program, mode),
             stax_status_message(status));
    stax_status_free(status);
    return false;
  }
  bool ok = true;
  int repeats = mode == STAX_DISPATCH_SWITCH || conformance_jit ? 2 : 1;
  for (int step = 0; ok && step < repeats * c->run_count; step++) {
    int run = step % c->run_count;
    const run_spec_t* spec = &c->runs[run];
    char when[48] = "";
    if (c->run_count > 1) snprintf(when, sizeof(when), ", run %d", run);
    if (step >= c->run_count) snprintf(when + strlen(when), sizeof(when) - strlen(when),
                                       ", again");
    stax_tensor_t* outs[MAX_IO] = {NULL};
    status = stax_context_run(context, s->feed_count[run], s->feeds[run], c->output_count,
                              outs);
    if (status && c->expect_error) {
      snprintf(why, why_size, "[run, %s] %s", variant_name(program, mode),
               stax_status_message(status));
      stax_status_free(status);
      for (int32_t o = 0; o < c->output_count; o++) {
        if (outs[o]) stax_tensor_release(outs[o]);
      }
      stax_context_destroy(context);
      return true;
    }
    if (status) {
      snprintf(why, why_size, "[run, %s%s] %s", variant_name(program, mode), when,
               stax_status_message(status));
      stax_status_free(status);
      ok = false;
    }
    for (int32_t o = 0; ok && o < c->output_count; o++) {
      if (spec->outputs[o].skip) continue;
      if (!outs[o]) {
        snprintf(why, why_size, "[run, %s%s] output %d is missing", variant_name(program, mode),
                 when, o);
        ok = false;
        break;
      }
      char detail[WHY_SIZE / 2];
      if (!conformance_compare(outs[o], s->expected[run][o], spec->outputs[o].rtol,
                               spec->outputs[o].atol, detail, sizeof(detail))) {
        snprintf(why, why_size, "[output %d, %s%s] %s", o, variant_name(program, mode), when,
                 detail);
        ok = false;
      }
    }
    for (int32_t o = 0; o < c->output_count; o++) {
      if (outs[o]) stax_tensor_release(outs[o]);
    }
  }
  stax_context_destroy(context);
  if (ok && c->expect_error) {
    snprintf(why, why_size, "[run, %s] expected an error for this bad input; the run succeeded",
             variant_name(program, mode));
    return false;
  }
  return ok;
}

static bool run_case(const runner_t* r, const case_spec_t* c, char* why, size_t why_size) {
  case_state_t s;
  memset(&s, 0, sizeof(s));
  bool ok = false;
  for (int32_t run = 0; run < c->run_count; run++) {
    const run_spec_t* spec = &c->runs[run];
    if (spec->listed_outputs != c->output_count) {
      snprintf(why, why_size, "[manifest] run %d lists %d outputs, the case says %d", run,
               spec->listed_outputs, c->output_count);
      goto cleanup;
    }
    for (int32_t o = 0; o < c->output_count; o++) {
      if (spec->outputs[o].skip) continue;
      stax_status_t status = load_array(r, spec->outputs[o].ref, "expected", &s.expected[run][o]);
      if (status) {
        snprintf(why, why_size, "[load] %s", stax_status_message(status));
        stax_status_free(status);
        goto cleanup;
      }
    }
  }
  stax_status_t status = build_graph(r, c, &s);
  if (status) {
    snprintf(why, why_size, "[graph] %s", stax_status_message(status));
    ok = c->expect_error && stax_status_code(status) != STAX_INTERNAL;
    stax_status_free(status);
    goto cleanup;
  }
  int program_count = c->is_static ? 2 : 1;
  for (int p = 0; p < program_count; p++) {
    stax_compile_options_t options = {.disable_static_variants = p == 1};
    status = stax_program_compile(alloc(), s.graph, &options, &s.programs[p]);
    if (status) {
      snprintf(why, why_size, "[compile%s] %s", p ? ", no static variants" : "",
               stax_status_message(status));
      ok = c->expect_error;
      stax_status_free(status);
      goto cleanup;
    }
  }
  static const stax_dispatch_mode_t kModes[2] = {STAX_DISPATCH_SWITCH, STAX_DISPATCH_GOTO};
  for (int p = 0; p < program_count; p++) {
    for (int m = 0; m < 2; m++) {
      if (!run_and_compare(c, &s, p, kModes[m], why, why_size)) goto cleanup;
    }
  }
  ok = true;
cleanup:
  case_state_free(&s);
  return ok;
}

/* ---- driver --------------------------------------------------------------------------------- */

static op_tally_t* tally_for(runner_t* r, const char* op) {
  for (int i = 0; i < r->tally_count; i++) {
    if (strcmp(r->tallies[i].op, op) == 0) return &r->tallies[i];
  }
  if (r->tally_count == (int)(sizeof(r->tallies) / sizeof(r->tallies[0]))) {
    return &r->tallies[r->tally_count - 1];
  }
  op_tally_t* t = &r->tallies[r->tally_count++];
  snprintf(t->op, sizeof(t->op), "%s", op);
  return t;
}

static void record(runner_t* r, const char* op, const char* name, bool ok, const char* why) {
  op_tally_t* t = tally_for(r, op);
  if (ok) {
    t->passed++;
    r->passed++;
    if (r->verbose) printf("PASS %s%s%s\n", name, why[0] ? ": " : "", why);
  } else {
    t->failed++;
    r->failed++;
    printf("FAIL %s: %s\n", name, why);
  }
  fflush(stdout);
}

static bool op_selected(const char* filter, const char* op) {
  if (!filter) return true;
  size_t len = strlen(op);
  for (const char* p = filter; *p;) {
    const char* comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (n == len && strncmp(p, op, n) == 0) return true;
    if (!comma) break;
    p = comma + 1;
  }
  return false;
}

/* Streams the manifest: parses each case and runs it before reading the next. */
static int run_manifest(runner_t* r, const char* dir) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/arrays.bin", dir);
  size_t blob_size = 0;
  char* blob = read_file(path, &blob_size);
  if (!blob) {
    fprintf(stderr, "stax_conformance: cannot read %s\n", path);
    return -1;
  }
  snprintf(path, sizeof(path), "%s/manifest.txt", dir);
  size_t text_size = 0;
  char* text = read_file(path, &text_size);
  if (!text) {
    fprintf(stderr, "stax_conformance: cannot read %s\n", path);
    free(blob);
    return -1;
  }
  r->blob = (const unsigned char*)blob;
  r->blob_size = blob_size;
  case_spec_t* c = calloc(1, sizeof(case_spec_t));
  bool in_case = false, bad = false;
  int line_number = 0;
  char* save_line = NULL;
  for (char* line = strtok_r(text, "\n", &save_line); line && !bad;
       line = strtok_r(NULL, "\n", &save_line)) {
    line_number++;
    if (line[0] == '#' || line[0] == '\0') continue;
    char* tok[4 + 1024];
    int32_t n = 0;
    char* save_tok = NULL;
    for (char* t = strtok_r(line, " ", &save_tok); t && n < (int32_t)(sizeof(tok) / sizeof(tok[0]));
         t = strtok_r(NULL, " ", &save_tok)) {
      tok[n++] = t;
    }
    if (n == 0) continue;
    if (strcmp(tok[0], "case") == 0) {
      int64_t outputs = 0, is_static = 0;
      if (in_case || n != 5 || !parse_int(tok[3], &outputs) || !parse_int(tok[4], &is_static) ||
          outputs < 0 || outputs > MAX_IO) {
        bad = true;
        break;
      }
      in_case = true;
      c->line = line_number;
      c->name = tok[1];
      c->op = tok[2];
      c->output_count = (int32_t)outputs;
      c->is_static = is_static != 0;
      c->run_count = 1;
      continue;
    }
    if (!in_case) {
      bad = true;
      break;
    }
    if (strcmp(tok[0], "end") == 0) {
      if (op_selected(r->filter, c->op)) {
        char why[WHY_SIZE] = "";
        bool ok = run_case(r, c, why, sizeof(why));
        record(r, c->op, c->name, ok, why);
      }
      case_free(c);
      in_case = false;
      continue;
    }
    if (!parse_line(c, tok, n)) bad = true;
  }
  if (bad || in_case) {
    fprintf(stderr, "stax_conformance: %s: malformed manifest at line %d\n", path, line_number);
  }
  case_free(c);
  free(c);
  free(text);
  free(blob);
  r->blob = NULL;
  return bad || in_case ? -1 : 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: stax_conformance [CASE_DIR] [--filter OP[,OP...]] [--verbose] [--no-chain] "
          "[--jit]\n"
          "  CASE_DIR: the output folder of tests/conformance/gen_cases.py\n"
          "  --filter: only these ops ('chain' selects the whole-program tests)\n"
          "  --jit: run the JIT tier in verify mode (sync, threshold 1, every run twice)\n");
}

int main(int argc, char** argv) {
  runner_t* r = calloc(1, sizeof(runner_t));
  if (!r) return 2;
  const char* dir = NULL;
  bool chain = true;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
      r->verbose = true;
    } else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      r->filter = argv[++i];
    } else if (strcmp(argv[i], "--no-chain") == 0) {
      chain = false;
    } else if (strcmp(argv[i], "--jit") == 0) {
      conformance_jit = true;
    } else if (argv[i][0] == '-') {
      usage();
      free(r);
      return 2;
    } else {
      dir = argv[i];
    }
  }
  int status = 0;
  if (dir && run_manifest(r, dir) != 0) status = 2;
  if (chain && op_selected(r->filter, "chain")) {
    int failures = conformance_chain_sequential(r->verbose);
    record(r, "chain", "chain_random_shapes", failures == 0, failures ? "see above" : "");
    failures = conformance_chain_threads(r->verbose);
    record(r, "chain", "chain_threads", failures == 0, failures ? "see above" : "");
  }
  printf("\nper op:\n");
  for (int i = 0; i < r->tally_count; i++) {
    const op_tally_t* t = &r->tallies[i];
    printf("  %-28s %4d passed, %3d failed\n", t->op, t->passed, t->failed);
  }
  printf("%d passed, %d failed\n", r->passed, r->failed);
  if (status == 0 && r->failed) status = 1;
  if (r->passed + r->failed == 0 && status == 0) status = 1; /* nothing ran: a broken setup */
  free(r);
  return status;
}
