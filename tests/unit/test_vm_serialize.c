/* Program files: save -> load round trips (outputs under several shapes and both dispatch
 * loops, disassembly, byte-identical re-serialization, files on disk), and loading hostile
 * input: every truncation is a clean error, every single-byte corruption is rejected by the
 * checksum, and with the checksum skipped every corruption either fails to load cleanly or
 * loads a program that runs on valid inputs without crashing (ASan/UBSan builds make "without
 * crashing" mean no memory error, no UB and no leak). Also the header checks, hostile counts,
 * and the verifier's structural rules that keep loaded programs safe. */
#include <unistd.h>

#include "test_vm_util.h"
#include "vm/program.h"

#if defined(__SANITIZE_ADDRESS__)
/* A corrupted program may ask for absurd allocations; they must come back as out-of-memory
 * statuses instead of ASan aborting the test, and ASan's shadow bookkeeping for a merely
 * huge (overcommitted, never touched) block would make the fuzz crawl. */
const char* __asan_default_options(void);
const char* __asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}
#endif

/* ---- programs -------------------------------------------------------------------------------- */

static stax_graph_t* new_graph(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  return g;
}

static stax_graph_t* subgraph(stax_graph_t* parent) {
  stax_graph_t* sub = NULL;
  CHECK_OK(stax_graph_create_subgraph(parent, &sub));
  return sub;
}

static stax_value_id_t capture(stax_graph_t* sub, stax_value_id_t outer) {
  stax_value_id_t local = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(sub, outer, &local));
  return local;
}

static stax_program_t* compile_and_destroy(stax_graph_t* g) {
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  return program;
}

/* x[B, S], y[S]: Gelu(LeakyRelu(x * y + c)), Concat(x, x) along S -> [B, 2S] (dim code
 * "2*S"), Transpose, and ConstantOfShape(Shape(x)) (a TENSOR attribute): attributes of every
 * kind the kernels read (INT, INTS, FLOAT, STRING, TENSOR). */
static stax_program_t* build_chain(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* xd[2] = {vm_symbol(g, "B", 1, 16), vm_symbol(g, "S", 1, 16)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, xd);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 1, xd + 1);
  float c_value = 0.25f;
  int64_t one[1] = {1};
  stax_value_id_t c = vm_initializer(g, "c", STAX_DTYPE_FLOAT32, 1, one, &c_value);
  stax_value_id_t sum = vm_binary(g, STAX_OP_Add, "add", vm_binary(g, STAX_OP_Mul, "mul", x, y), c);
  stax_attr_t alpha = stax_attr_float("alpha", 0.125f);
  stax_value_id_t leaky = vm_node(g, STAX_OP_LeakyRelu, "leaky", 1, &sum, 1, &alpha);
  stax_attr_t approximate = stax_attr_string("approximate", "tanh");
  vm_output(g, vm_node(g, STAX_OP_Gelu, "gelu", 1, &leaky, 1, &approximate));
  stax_value_id_t pair[2] = {x, leaky};
  stax_attr_t axis = stax_attr_int("axis", 1);
  stax_value_id_t wide = vm_node(g, STAX_OP_Concat, "concat", 2, pair, 1, &axis);
  int64_t perm[2] = {1, 0};
  stax_attr_t perm_attr = stax_attr_ints("perm", 2, perm);
  stax_value_id_t flipped = vm_node(g, STAX_OP_Transpose, "transpose", 1, &wide, 1, &perm_attr);
  vm_output(g, vm_unary(g, STAX_OP_Neg, "neg", flipped));
  float fill = 1.5f;
  stax_tensor_t* fill_tensor = vm_tensor(STAX_DTYPE_FLOAT32, 1, one, &fill);
  stax_attr_t value = stax_attr_tensor("value", fill_tensor);
  stax_value_id_t shape = vm_unary(g, STAX_OP_Shape, "shape", x);
  stax_value_id_t filled = vm_node(g, STAX_OP_ConstantOfShape, "fill", 1, &shape, 1, &value);
  stax_tensor_release(fill_tensor);
  vm_output(g, vm_binary(g, STAX_OP_Sub, "sub", filled, x));
  return compile_and_destroy(g);
}

static int32_t chain_inputs(vm_rng_t* rng, int round, stax_tensor_t** inputs) {
  int64_t b = 1 + round % 3, s = 1 + (round * 2) % 5;
  int64_t x_dims[2] = {b, s}, y_dims[1] = {s};
  inputs[0] = vm_random_f32(rng, 2, x_dims);
  inputs[1] = vm_random_f32(rng, 1, y_dims);
  return 2;
}

/* x[B, 4] @ w[4, 3] + bias[3]. */
static stax_program_t* build_matmul(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 32), vm_const(g, 4)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  float weights[12], bias[3] = {0.5f, -1.0f, 2.0f};
  for (int i = 0; i < 12; i++) weights[i] = (float)(i % 5) - 2.0f;
  int64_t w_dims[2] = {4, 3}, b_dims[1] = {3};
  stax_value_id_t w = vm_initializer(g, "w", STAX_DTYPE_FLOAT32, 2, w_dims, weights);
  stax_value_id_t b = vm_initializer(g, "bias", STAX_DTYPE_FLOAT32, 1, b_dims, bias);
  stax_value_id_t product = vm_binary(g, STAX_OP_MatMul, "matmul", x, w);
  vm_output(g, vm_binary(g, STAX_OP_Add, "bias_add", product, b));
  return compile_and_destroy(g);
}

static int32_t matmul_inputs(vm_rng_t* rng, int round, stax_tensor_t** inputs) {
  int64_t dims[2] = {1 + 2 * round, 4};
  inputs[0] = vm_random_f32(rng, 2, dims);
  return 1;
}

/* Reshape(x[B, S], Concat(Shape(x), [1])) -> [B, S, 1], doubled; and the shape itself. */
static stax_program_t* build_reshape(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 32), vm_symbol(g, "S", 1, 32)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t shape = vm_unary(g, STAX_OP_Shape, "shape", x);
  int64_t one[1] = {1}, one_dims[1] = {1};
  stax_value_id_t ones = vm_initializer(g, "one", STAX_DTYPE_INT64, 1, one_dims, one);
  stax_attr_t axis = stax_attr_int("axis", 0);
  stax_value_id_t concat_inputs[2] = {shape, ones};
  stax_value_id_t target = vm_node(g, STAX_OP_Concat, "concat", 2, concat_inputs, 1, &axis);
  stax_value_id_t reshape_inputs[2] = {x, target};
  stax_value_id_t r = vm_node(g, STAX_OP_Reshape, "reshape", 2, reshape_inputs, 0, NULL);
  vm_output(g, vm_binary(g, STAX_OP_Add, "double", r, r));
  vm_output(g, shape);
  return compile_and_destroy(g);
}

static int32_t reshape_inputs(vm_rng_t* rng, int round, stax_tensor_t** inputs) {
  int64_t dims[2] = {1 + round % 4, 1 + (round * 3) % 5};
  inputs[0] = vm_random_f32(rng, 2, dims);
  return 1;
}

/* NonZero(x[N]) (a data-dependent dim bound by SHAPE_VARIANT), then Add on it. */
static stax_program_t* build_nonzero(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  stax_value_id_t indices = vm_unary(g, STAX_OP_NonZero, "nonzero", x);
  vm_output(g, vm_binary(g, STAX_OP_Add, "twice", indices, indices));
  return compile_and_destroy(g);
}

static int32_t nonzero_inputs(vm_rng_t* rng, int round, stax_tensor_t** inputs) {
  int64_t dims[1] = {1 + round * 2};
  inputs[0] = vm_random_f32(rng, 1, dims);
  float* data = stax_tensor_data(inputs[0]);
  for (int64_t i = 0; i < dims[0]; i++)
    if (vm_rng_next(rng) % 3 == 0) data[i] = 0;
  return 1;
}

/* If cond: Concat(x, x) [2N] else x [N]; Relu after the join (a symbol bound after it). */
static stax_program_t* build_if(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t cond = vm_input(g, "cond", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  stax_graph_t* then_branch = subgraph(g);
  stax_value_id_t then_x = capture(then_branch, x);
  stax_value_id_t pair[2] = {then_x, then_x};
  stax_attr_t axis = stax_attr_int("axis", 0);
  vm_output(then_branch, vm_node(then_branch, STAX_OP_Concat, "twice", 2, pair, 1, &axis));
  stax_graph_t* else_branch = subgraph(g);
  stax_value_id_t else_x = capture(else_branch, x);
  vm_output(else_branch, vm_binary(else_branch, STAX_OP_Mul, "square", else_x, else_x));
  stax_attr_t branches[2] = {stax_attr_graph("then_branch", then_branch),
                             stax_attr_graph("else_branch", else_branch)};
  stax_value_id_t chosen = vm_node(g, STAX_OP_If, "if", 1, &cond, 2, branches);
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", chosen));
  return compile_and_destroy(g);
}

static int32_t if_inputs(vm_rng_t* rng, int round, stax_tensor_t** inputs) {
  uint8_t taken = (uint8_t)(round % 2);
  int64_t dims[1] = {1 + round};
  inputs[0] = vm_tensor(STAX_DTYPE_BOOL, 0, NULL, &taken);
  inputs[1] = vm_random_f32(rng, 1, dims);
  return 2;
}

/* Loop M times: acc = acc + x, scan acc * acc (carried values, scans stacked at exit). */
static stax_program_t* build_loop(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* n[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t m = vm_input(g, "M", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, n);
  uint8_t yes = 1;
  stax_value_id_t always = vm_initializer(g, "always", STAX_DTYPE_BOOL, 0, NULL, &yes);
  stax_graph_t* body = subgraph(g);
  vm_input(body, "iteration", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t cond_in = vm_input(body, "cond_in", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t acc = vm_input(body, "acc", STAX_DTYPE_FLOAT32, 1, n);
  stax_value_id_t next = vm_binary(body, STAX_OP_Add, "accumulate", acc, capture(body, x));
  vm_output(body, vm_unary(body, STAX_OP_Identity, "keep_going", cond_in));
  vm_output(body, next);
  vm_output(body, vm_binary(body, STAX_OP_Mul, "square", next, next));
  stax_value_id_t inputs[3] = {m, always, x};
  stax_value_id_t outputs[2];
  stax_attr_t attr = stax_attr_graph("body", body);
  stax_node_desc_t desc = {.op = STAX_OP_Loop, .name = "loop", .input_count = 3, .inputs = inputs,
                           .output_count = 2, .attr_count = 1, .attrs = &attr};
  CHECK_OK(stax_graph_add_node(g, &desc, outputs));
  vm_output(g, outputs[0]);
  vm_output(g, outputs[1]);
  return compile_and_destroy(g);
}

static int32_t loop_inputs(vm_rng_t* rng, int round, stax_tensor_t** inputs) {
  int64_t trips = round % 4, dims[1] = {1 + round % 3};
  inputs[0] = vm_tensor(STAX_DTYPE_INT64, 0, NULL, &trips);
  inputs[1] = vm_random_f32(rng, 1, dims);
  return 2;
}

/* a[N, K] * b[M, K] + a: broadcast dims (bcast(N, M), dim code BCAST) that the inputs make
 * 1 on either side or equal. */
static stax_program_t* build_bcast(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* k = vm_symbol(g, "K", 1, 8);
  const stax_dim_t* ad[2] = {vm_symbol(g, "N", 1, 8), k};
  const stax_dim_t* bd[2] = {vm_symbol(g, "M", 1, 8), k};
  stax_value_id_t a = vm_input(g, "a", STAX_DTYPE_FLOAT32, 2, ad);
  stax_value_id_t b = vm_input(g, "b", STAX_DTYPE_FLOAT32, 2, bd);
  stax_value_id_t product = vm_binary(g, STAX_OP_Mul, "mul", a, b);
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", vm_binary(g, STAX_OP_Add, "add", product, a)));
  return compile_and_destroy(g);
}

static int32_t bcast_inputs(vm_rng_t* rng, int round, stax_tensor_t** inputs) {
  int64_t n = 2 + round % 3, k = 1 + round % 4;
  int64_t a_dims[2] = {round % 3 == 1 ? 1 : n, k}, b_dims[2] = {round % 3 == 2 ? 1 : n, k};
  inputs[0] = vm_random_f32(rng, 2, a_dims);
  inputs[1] = vm_random_f32(rng, 2, b_dims);
  return 2;
}

typedef struct program_case_t {
  const char* name;
  stax_program_t* (*build)(void);
  int32_t (*inputs)(vm_rng_t* rng, int round, stax_tensor_t** inputs);
} program_case_t;

static const program_case_t cases[] = {
    {"chain", build_chain, chain_inputs},       {"matmul", build_matmul, matmul_inputs},
    {"reshape", build_reshape, reshape_inputs}, {"nonzero", build_nonzero, nonzero_inputs},
    {"if", build_if, if_inputs},                {"loop", build_loop, loop_inputs},
    {"bcast", build_bcast, bcast_inputs},
};
enum { CASE_COUNT = sizeof(cases) / sizeof(cases[0]), ROUNDS = 5, MAX_IO = 4 };

/* ---- helpers --------------------------------------------------------------------------------- */

static void release_all(stax_tensor_t** tensors, int32_t count) {
  for (int32_t i = 0; i < count; i++) {
    if (tensors[i]) stax_tensor_release(tensors[i]);
    tensors[i] = NULL;
  }
}

/* Same dtype, dims and element bytes in row-major order. */
static bool tensors_identical(const stax_tensor_t* a, const stax_tensor_t* b) {
  if (stax_tensor_dtype(a) != stax_tensor_dtype(b) || stax_tensor_rank(a) != stax_tensor_rank(b))
    return false;
  if (!vm_dims_equal(b, stax_tensor_rank(a), stax_tensor_dims(a))) return false;
  stax_tensor_t* copies[2] = {NULL, NULL};
  const stax_tensor_t* sources[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    CHECK_OK(stax_tensor_create(vm_alloc(), stax_tensor_dtype(a), stax_tensor_rank(a),
                                stax_tensor_dims(a), &copies[k]));
    if (copies[k]) CHECK_OK(stax_tensor_copy_into(sources[k], copies[k]));
  }
  size_t bytes = (size_t)stax_tensor_element_count(a) * stax_dtype_size(stax_tensor_dtype(a));
  bool same = copies[0] && copies[1] &&
              memcmp(stax_tensor_data(copies[0]), stax_tensor_data(copies[1]), bytes) == 0;
  release_all(copies, 2);
  return same;
}

static stax_status_t run_once(stax_program_t* program, stax_dispatch_mode_t mode,
                              int32_t input_count, stax_tensor_t** inputs,
                              stax_tensor_t** outputs) {
  stax_context_options_t options = {.dispatch = mode};
  stax_context_t* context = NULL;
  STAX_RETURN_IF_ERROR(stax_context_create(vm_alloc(), program, &options, &context));
  stax_status_t status = stax_context_run(context, input_count, inputs,
                                          stax_program_output_count(program), outputs);
  stax_context_destroy(context);
  return status;
}

static bool serialize(const stax_program_t* program, void** data, size_t* size) {
  stax_status_t status = stax_program_serialize(program, vm_alloc(), data, size);
  CHECK_OK(status);
  return *data != NULL;
}

static void free_file(void* data, size_t size) { stax_allocator_free(vm_alloc(), data, size); }

static stax_status_t load(const void* data, size_t size, bool skip_checksum, stax_program_t** out) {
  stax_load_options_t options = {.skip_checksum = skip_checksum};
  return stax_program_deserialize(vm_alloc(), data, size, &options, out);
}

/* ---- round trips ----------------------------------------------------------------------------- */

static void check_same_behaviour(const program_case_t* c, stax_program_t* original,
                                 stax_program_t* loaded) {
  vm_rng_t rng = {1234};
  for (int round = 0; round < ROUNDS; round++) {
    stax_tensor_t* inputs[MAX_IO] = {NULL};
    int32_t input_count = c->inputs(&rng, round, inputs);
    for (int mode = 0; mode < 2; mode++) {
      stax_tensor_t* expected[MAX_IO] = {NULL}, *got[MAX_IO] = {NULL};
      CHECK_OK(run_once(original, vm_dispatch_mode(mode), input_count, inputs, expected));
      CHECK_OK(run_once(loaded, vm_dispatch_mode(mode), input_count, inputs, got));
      for (int32_t o = 0; o < stax_program_output_count(original); o++) {
        bool same = expected[o] && got[o] && tensors_identical(expected[o], got[o]);
        if (!same) fprintf(stderr, "  %s round %d output %d differs\n", c->name, round, o);
        CHECK(same);
      }
      release_all(expected, MAX_IO);
      release_all(got, MAX_IO);
    }
    release_all(inputs, MAX_IO);
  }
}

static void test_round_trip(void) {
  for (int k = 0; k < CASE_COUNT; k++) {
    const program_case_t* c = &cases[k];
    stax_program_t* original = c->build();
    if (!original) continue;
    void* data = NULL;
    size_t size = 0;
    if (!serialize(original, &data, &size)) {
      stax_program_release(original);
      continue;
    }
    stax_program_t* loaded = NULL;
    CHECK_OK(load(data, size, false, &loaded));
    if (loaded) {
      char* before = vm_disassembly(original, STAX_DISASSEMBLE_EXTENDED | STAX_DISASSEMBLE_COMPACT);
      char* after = vm_disassembly(loaded, STAX_DISASSEMBLE_EXTENDED | STAX_DISASSEMBLE_COMPACT);
      CHECK_EQ_STR(before, after);
      free(before);
      free(after);
      check_same_behaviour(c, original, loaded);
      /* Every field survives: saving the loaded program gives the same bytes. */
      void* again = NULL;
      size_t again_size = 0;
      if (serialize(loaded, &again, &again_size)) {
        CHECK(again_size == size && memcmp(again, data, size) == 0);
        free_file(again, again_size);
      }
      CHECK_EQ_INT(stax_program_input_count(loaded), stax_program_input_count(original));
      for (int32_t i = 0; i < stax_program_input_count(loaded); i++) {
        CHECK_EQ_STR(stax_program_input_name(loaded, i), stax_program_input_name(original, i));
        for (int32_t d = 0; d < stax_program_input_rank(loaded, i); d++) {
          char a[64], b[64];
          stax_program_input_dim_text(original, i, d, a, sizeof(a));
          stax_program_input_dim_text(loaded, i, d, b, sizeof(b));
          CHECK_EQ_STR(a, b);
        }
      }
      stax_program_release(loaded);
    }
    printf("  %-8s %6zu bytes\n", c->name, size);
    free_file(data, size);
    stax_program_release(original);
  }
}

static void test_save_and_load_file(void) {
  stax_program_t* original = build_loop();
  if (!original) return;
  char path[] = "/tmp/stax_serialize_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) {
    stax_program_release(original);
    return;
  }
  close(fd);
  CHECK_OK(stax_program_save(original, path));
  stax_program_t* loaded = NULL;
  CHECK_OK(stax_program_load(vm_alloc(), path, &loaded));
  if (loaded) {
    check_same_behaviour(&cases[5], original, loaded);
    stax_program_release(loaded);
  }
  /* A file cut short on disk names the section where it ends. */
  FILE* file = fopen(path, "r+b");
  CHECK(file != NULL);
  if (file) {
    CHECK(ftruncate(fileno(file), 300) == 0);
    fclose(file);
    CHECK_ERROR(stax_program_load(vm_alloc(), path, &loaded), STAX_PARSE_ERROR,
                "program file truncated in section");
    CHECK(loaded == NULL);
  }
  unlink(path);
  CHECK_ERROR(stax_program_load(vm_alloc(), path, &loaded), STAX_IO_ERROR, "cannot open");
  CHECK_ERROR(stax_program_save(original, "/nonexistent-dir/x.stax"), STAX_IO_ERROR,
              "cannot create");
  CHECK_ERROR(stax_program_save(NULL, path), STAX_INVALID_ARGUMENT, NULL);
  stax_program_release(original);
}

/* The smallest program: no inputs, outputs, constants or operands (empty tables). */
static void test_empty_program(void) {
  stax_program_t* p = NULL;
  CHECK_OK(stax_vm_program_create(vm_alloc(), &p));
  if (!p) return;
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_RETURN, -1, NULL, 0, NULL));
  stax_vm_finalize_options_t options = {.insert_profile_points = false};
  CHECK_OK(stax_vm_program_finalize(p, &options));
  void* data = NULL;
  size_t size = 0;
  if (serialize(p, &data, &size)) {
    stax_program_t* loaded = NULL;
    CHECK_OK(load(data, size, false, &loaded));
    if (loaded) {
      CHECK_OK(run_once(loaded, STAX_DISPATCH_SWITCH, 0, NULL, NULL));
      stax_program_release(loaded);
    }
    free_file(data, size);
  }
  stax_program_release(p);
}

/* ---- hostile files --------------------------------------------------------------------------- */

static void test_truncation(void) {
  for (int k = 0; k < CASE_COUNT; k++) {
    stax_program_t* program = cases[k].build();
    void* data = NULL;
    size_t size = 0;
    if (!program || !serialize(program, &data, &size)) {
      if (program) stax_program_release(program);
      continue;
    }
    int failures = 0;
    for (size_t cut = 0; cut < size; cut++) {
      for (int skip = 0; skip < 2; skip++) {
        stax_program_t* loaded = NULL;
        stax_status_t status = load(data, cut, skip, &loaded);
        bool clean = status && loaded == NULL && stax_status_code(status) == STAX_PARSE_ERROR &&
                     strstr(stax_status_message(status), "program file truncated");
        if (!clean && failures++ < 3)
          fprintf(stderr, "  %s cut at %zu: %s\n", cases[k].name, cut,
                  status ? stax_status_message(status) : "loaded");
        CHECK(clean);
        stax_status_free(status);
        if (loaded) stax_program_release(loaded);
      }
    }
    free_file(data, size);
    stax_program_release(program);
  }
}

/* The byte patterns each position is corrupted with. */
static const int pattern_count = 4;
static uint8_t corrupt(uint8_t byte, int pattern) {
  switch (pattern) {
    case 0: return 0x00;
    case 1: return 0xff;
    case 2: return byte ^ 0x01;
    default: return byte ^ 0x80;
  }
}

static void test_checksum_rejects_every_flip(void) {
  stax_program_t* program = build_chain();
  void* data = NULL;
  size_t size = 0;
  if (!program || !serialize(program, &data, &size)) {
    if (program) stax_program_release(program);
    return;
  }
  uint8_t* bytes = data;
  for (size_t at = 0; at < size; at++) {
    uint8_t saved = bytes[at];
    for (int p = 0; p < pattern_count; p++) {
      if (corrupt(saved, p) == saved) continue;
      bytes[at] = corrupt(saved, p);
      stax_program_t* loaded = NULL;
      stax_status_t status = load(data, size, false, &loaded);
      CHECK(status != STAX_OK && loaded == NULL);
      if (at >= STAX_VM_FILE_HEADER_SIZE && status)
        CHECK(strstr(stax_status_message(status), "checksum mismatch") != NULL);
      stax_status_free(status);
      if (loaded) stax_program_release(loaded);
    }
    bytes[at] = saved;
  }
  free_file(data, size);
  stax_program_release(program);
}

/* With the checksum skipped, the loader and verifier alone face every corruption: a load
 * either fails cleanly or gives a program that runs (or fails cleanly) on valid inputs. */
static void fuzz_case(const program_case_t* c) {
  stax_program_t* program = c->build();
  void* data = NULL;
  size_t size = 0;
  if (!program || !serialize(program, &data, &size)) {
    if (program) stax_program_release(program);
    return;
  }
  vm_rng_t rng = {99};
  stax_tensor_t* inputs[MAX_IO] = {NULL};
  int32_t input_count = c->inputs(&rng, 3, inputs);
  uint8_t* bytes = data;
  int loads = 0, loaded_ok = 0, ran_ok = 0;
  for (size_t at = 0; at < size; at++) {
    uint8_t saved = bytes[at];
    for (int p = 0; p < pattern_count; p++) {
      if (corrupt(saved, p) == saved) continue;
      bytes[at] = corrupt(saved, p);
      stax_program_t* loaded = NULL;
      stax_status_t status = load(data, size, true, &loaded);
      loads++;
      if (status) {
        CHECK(loaded == NULL);
        stax_status_free(status);
        continue;
      }
      loaded_ok++;
      stax_tensor_t* outputs[MAX_IO] = {NULL};
      int32_t output_count = stax_program_output_count(loaded);
      CHECK(output_count <= MAX_IO);
      if (output_count <= MAX_IO) {
        status = run_once(loaded, vm_dispatch_mode((int)(at % 2)), input_count, inputs, outputs);
        if (status == STAX_OK) ran_ok++;
        stax_status_free(status);
        release_all(outputs, MAX_IO);
      }
      FILE* sink = fopen("/dev/null", "w");
      if (sink) {
        CHECK_OK(stax_program_disassemble(loaded, 0, sink));
        fclose(sink);
      }
      stax_program_release(loaded);
    }
    bytes[at] = saved;
  }
  printf("  %-8s %zu bytes, %d corrupted loads: %d loaded, %d ran\n", c->name, size, loads,
         loaded_ok, ran_ok);
  release_all(inputs, MAX_IO);
  free_file(data, size);
  stax_program_release(program);
}

static void test_fuzz_chain(void) { fuzz_case(&cases[0]); }
static void test_fuzz_matmul(void) { fuzz_case(&cases[1]); }
static void test_fuzz_reshape(void) { fuzz_case(&cases[2]); }
static void test_fuzz_nonzero(void) { fuzz_case(&cases[3]); }
static void test_fuzz_if(void) { fuzz_case(&cases[4]); }
static void test_fuzz_loop(void) { fuzz_case(&cases[5]); }
static void test_fuzz_bcast(void) { fuzz_case(&cases[6]); }

/* ---- header and section checks --------------------------------------------------------------- */

static void store_le(uint8_t* at, uint64_t value, int size) {
  for (int b = 0; b < size; b++) at[b] = (uint8_t)(value >> (8 * b));
}

static uint64_t load_le(const uint8_t* at, int size) {
  uint64_t value = 0;
  for (int b = 0; b < size; b++) value |= (uint64_t)at[b] << (8 * b);
  return value;
}

/* The offset of the body of the section holding table `name` (after tag and length). */
static size_t find_section(const uint8_t* bytes, size_t size, const char* name) {
  int32_t tag = -1;
  for (int32_t t = 0; t < stax_vm_file_table_count; t++)
    if (strcmp(stax_vm_file_tables[t].name, name) == 0) tag = t + 1;
  size_t at = STAX_VM_FILE_HEADER_SIZE;
  while (at + STAX_VM_FILE_SECTION_HEADER_SIZE <= size) {
    uint64_t length = load_le(bytes + at + 4, 8);
    if ((int32_t)load_le(bytes + at, 4) == tag) return at + STAX_VM_FILE_SECTION_HEADER_SIZE;
    at += STAX_VM_FILE_SECTION_HEADER_SIZE + length;
  }
  CHECK(false);
  return 0;
}

static void expect_load_error(const void* data, size_t size, bool skip, const char* needle) {
  stax_program_t* loaded = NULL;
  CHECK_ERROR(load(data, size, skip, &loaded), STAX_PARSE_ERROR, needle);
  CHECK(loaded == NULL);
}

static void test_header_errors(void) {
  stax_program_t* program = build_chain();
  void* data = NULL;
  size_t size = 0;
  if (!program || !serialize(program, &data, &size)) {
    if (program) stax_program_release(program);
    return;
  }
  uint8_t* bytes = data;
  CHECK(memcmp(bytes, "STAXPROG", 8) == 0);
  CHECK_EQ_INT(load_le(bytes + 12, 4), 0x01020304);
  CHECK(bytes[12] == 0x04 && bytes[15] == 0x01); /* little-endian on disk */
  CHECK_EQ_INT(load_le(bytes + 24, 8), size - STAX_VM_FILE_HEADER_SIZE);
  expect_load_error(data, 0, false, "truncated in the header at byte 0");
  expect_load_error("STAXPROX", 8, false, "not a stax program file");
  expect_load_error("ELF", 3, false, "not a stax program file");
  stax_program_t* loaded = NULL;
  CHECK_ERROR(stax_program_deserialize(vm_alloc(), NULL, 10, NULL, &loaded),
              STAX_INVALID_ARGUMENT, NULL);
  struct {
    size_t offset;
    int size;
    uint64_t value;
    const char* needle;
  } patches[] = {
      {8, 4, 1, "format version 1 is not supported"},
      {12, 4, 0x04030201, "byte-order marker 04030201"},
      {16, 8, 12345, "different instruction set"},
      {24, 8, size - STAX_VM_FILE_HEADER_SIZE + 1, "truncated: its header declares"},
      {24, 8, size - STAX_VM_FILE_HEADER_SIZE - 1, "follow the"},
      {32, 8, 0, "checksum mismatch"},
  };
  for (size_t k = 0; k < sizeof(patches) / sizeof(patches[0]); k++) {
    uint8_t saved[8];
    memcpy(saved, bytes + patches[k].offset, 8);
    store_le(bytes + patches[k].offset, patches[k].value, patches[k].size);
    expect_load_error(data, size, k == 3, patches[k].needle);
    memcpy(bytes + patches[k].offset, saved, 8);
  }
  /* A byte after the payload. */
  uint8_t* longer = malloc(size + 1);
  if (longer) {
    memcpy(longer, data, size);
    longer[size] = 0;
    expect_load_error(longer, size + 1, false, "1 bytes follow the");
    free(longer);
  }
  free_file(data, size);
  stax_program_release(program);
}

/* A file of format version 2 (before the BCAST dim-code op) still loads: the chain program
 * uses no broadcast dim, so its bytes are a version 2 file but for the header's version and
 * fingerprint. Version 2 with this build's fingerprint is refused. */
static void test_version_2_file_loads(void) {
  program_case_t c = cases[0];
  stax_program_t* program = c.build();
  void* data = NULL;
  size_t size = 0;
  if (!program || !serialize(program, &data, &size)) {
    if (program) stax_program_release(program);
    return;
  }
  uint8_t* bytes = data;
  CHECK_EQ_INT(load_le(bytes + 8, 4), STAX_VM_FILE_VERSION);
  CHECK(stax_vm_isa_fingerprint_for(2) != stax_vm_isa_fingerprint());
  store_le(bytes + 8, 2, 4);
  store_le(bytes + 32, stax_vm_file_checksum(bytes, bytes + STAX_VM_FILE_HEADER_SIZE,
                                             size - STAX_VM_FILE_HEADER_SIZE), 8);
  expect_load_error(data, size, false, "different instruction set");
  store_le(bytes + 16, stax_vm_isa_fingerprint_for(2), 8);
  store_le(bytes + 32, stax_vm_file_checksum(bytes, bytes + STAX_VM_FILE_HEADER_SIZE,
                                             size - STAX_VM_FILE_HEADER_SIZE), 8);
  stax_program_t* loaded = NULL;
  CHECK_OK(load(data, size, false, &loaded));
  if (loaded) {
    check_same_behaviour(&c, program, loaded);
    stax_program_release(loaded);
  }
  store_le(bytes + 8, STAX_VM_FILE_VERSION + 1, 4);
  expect_load_error(data, size, true, "versions 2 to 3");
  free_file(data, size);
  stax_program_release(program);
}

/* Counts and sizes that would make a careless loader allocate or read far too much. */
static void test_hostile_counts(void) {
  stax_program_t* program = build_loop();
  void* data = NULL;
  size_t size = 0;
  if (!program || !serialize(program, &data, &size)) {
    if (program) stax_program_release(program);
    return;
  }
  uint8_t* bytes = data;
  size_t instructions = find_section(bytes, size, "instructions");
  uint8_t saved[20]; /* tag, length, count, record size */
  memcpy(saved, bytes + instructions - 12, 20);
  store_le(bytes + instructions, 0x7fffffff, 4); /* count */
  expect_load_error(data, size, true, "2147483647 records of 24 bytes do not fill");
  memcpy(bytes + instructions - 12, saved, 20);
  store_le(bytes + instructions + 4, 20, 4); /* record size */
  expect_load_error(data, size, true, "records are 20 bytes, this version stores 24");
  memcpy(bytes + instructions - 12, saved, 20);
  store_le(bytes + instructions - 8, UINT64_MAX / 2, 8); /* section length */
  expect_load_error(data, size, true, "claims");
  memcpy(bytes + instructions - 12, saved, 20);
  store_le(bytes + instructions - 12, 99, 4); /* tag */
  expect_load_error(data, size, true, "expected section tag 2, found 99");
  memcpy(bytes + instructions - 12, saved, 20);

  /* Constants: the loop program's first constant is the bool scalar `always`. */
  size_t constants = find_section(bytes, size, "constants");
  CHECK_EQ_INT(load_le(bytes + constants + 4, 4), STAX_DTYPE_BOOL);
  uint8_t saved_constants[21]; /* count, dtype, rank, data size, the one byte */
  CHECK(size - constants >= sizeof(saved_constants));
  memcpy(saved_constants, bytes + constants, sizeof(saved_constants));
  store_le(bytes + constants, 0x10000000, 4);
  expect_load_error(data, size, true, "constants cannot fit");
  memcpy(bytes + constants, saved_constants, sizeof(saved_constants));
  store_le(bytes + constants + 4, 77, 4);
  expect_load_error(data, size, true, "constant 0 has invalid dtype 77");
  memcpy(bytes + constants, saved_constants, sizeof(saved_constants));
  store_le(bytes + constants + 8, 9, 4);
  expect_load_error(data, size, true, "constant 0 has rank 9");
  memcpy(bytes + constants, saved_constants, sizeof(saved_constants));
  store_le(bytes + constants + 12, 1u << 20, 8); /* data bytes of the scalar */
  expect_load_error(data, size, true, "constant 0 holds 1048576 data bytes; bool [] needs 1");
  memcpy(bytes + constants, saved_constants, sizeof(saved_constants));
  bytes[constants + 20] = 2; /* the bool's value */
  expect_load_error(data, size, true, "bool constant 0 element 0 is 2");
  memcpy(bytes + constants, saved_constants, sizeof(saved_constants));
  stax_program_t* loaded = NULL;
  CHECK_OK(load(data, size, false, &loaded));
  if (loaded) stax_program_release(loaded);
  free_file(data, size);
  stax_program_release(program);
}

/* Every allocation of serializing and loading may fail: OUT_OF_MEMORY, nothing leaked. */
static void test_allocation_faults(void) {
  stax_program_t* program = build_chain();
  void* data = NULL;
  size_t size = 0;
  if (!program || !serialize(program, &data, &size)) {
    if (program) stax_program_release(program);
    return;
  }
  for (int phase = 0; phase < 2; phase++) {
    bool done = false;
    for (uint64_t fail_at = 1; !done && fail_at < 10000; fail_at++) {
      stax_failing_allocator_t state;
      stax_failing_allocator_init(&state, vm_alloc(), fail_at);
      stax_allocator_t allocator = stax_failing_allocator(&state);
      stax_status_t status = STAX_OK;
      if (phase == 0) {
        void* copy = NULL;
        size_t copy_size = 0;
        status = stax_program_serialize(program, allocator, &copy, &copy_size);
        if (status == STAX_OK) {
          CHECK(copy_size == size && memcmp(copy, data, size) == 0);
          stax_allocator_free(allocator, copy, copy_size);
        }
      } else {
        stax_program_t* loaded = NULL;
        status = stax_program_deserialize(allocator, data, size, NULL, &loaded);
        if (status == STAX_OK) stax_program_release(loaded);
        else CHECK(loaded == NULL);
      }
      done = state.failed_count == 0;
      if (done) {
        CHECK_OK(status);
      } else {
        CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
        stax_status_free(status);
      }
      CHECK_EQ_INT(state.live_allocations, 0);
    }
    CHECK(done);
  }
  free_file(data, size);
  stax_program_release(program);
}

/* ---- compact form and verifier rules --------------------------------------------------------- */

static int32_t code_offset(const stax_program_t* p, int32_t instruction) {
  int32_t offset = 0;
  for (int32_t i = 0; i < instruction; i++)
    offset += STAX_VM_HEADER_WORDS + p->instructions[i].operand_count;
  return offset;
}

/* DYNAMIC_OUTPUT travels in the compact words; the verifier holds the two forms together. */
static void test_compact_dynamic_flag(void) {
  stax_program_t* p = build_nonzero();
  if (!p) return;
  int flagged = 0;
  for (int32_t i = 0; i < p->instructions_count; i++) {
    bool dynamic = (p->instructions[i].flags & STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT) != 0;
    const int32_t* words = p->code + code_offset(p, i);
    CHECK_EQ_INT(STAX_VM_CODE_INDEX(words), i);
    CHECK(STAX_VM_CODE_KERNEL_ALLOCATES(words) == dynamic);
    flagged += dynamic;
  }
  CHECK_EQ_INT(flagged, 1);
  for (int32_t i = 0; i < p->instructions_count; i++) {
    if (!stax_vm_opcode_is_compute(p->instructions[i].opcode)) continue;
    int32_t* words = p->code + code_offset(p, i);
    words[1] ^= STAX_VM_CODE_DYNAMIC_OUTPUT;
    CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "disagrees with the extended form");
    words[1] ^= STAX_VM_CODE_DYNAMIC_OUTPUT;
    p->instructions[i].flags ^= STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT;
    CHECK_OK(stax_vm_emit(p));
    CHECK_OK(stax_vm_verify(p)); /* consistent again, just different */
    p->instructions[i].flags ^= STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT;
    CHECK_OK(stax_vm_emit(p));
  }
  p->instructions[0].flags = 1u << 5;
  CHECK_OK(stax_vm_emit(p));
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "unknown flags");
  p->instructions[0].flags = STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT;
  CHECK_OK(stax_vm_emit(p));
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "have dynamic outputs");
  p->instructions[0].flags = 0;
  CHECK_OK(stax_vm_emit(p));
  CHECK_OK(stax_vm_verify(p));
  stax_program_release(p);
}

/* Rules that keep a loaded program's run memory-safe and finite. */
static void test_verifier_rules(void) {
  stax_program_t* p = build_chain();
  if (!p) return;
  int32_t compute = -1;
  for (int32_t i = 0; i < p->instructions_count && compute < 0; i++)
    if (stax_vm_opcode_is_compute(p->instructions[i].opcode)) compute = i;
  CHECK(compute >= 0);
  if (compute >= 0) {
    /* Operands: node, input list, output list. */
    const stax_vm_instruction_t* ins = &p->instructions[compute];
    int32_t* operands = p->operands + ins->operand_first;
    const stax_vm_node_t* node = &p->nodes[operands[0]];
    int32_t in_count = operands[1];
    int32_t* output = &operands[2 + in_count + 1];
    int32_t* node_output = &p->node_registers[node->outputs_first];
    int32_t saved = *output;
    *output = operands[2];
    CHECK_OK(stax_vm_emit(p));
    CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "but node");
    *node_output = operands[2];
    CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "is also input 0");
    *output = *node_output = saved;
    int32_t* input = &operands[2];
    int32_t* node_input = &p->node_registers[node->inputs_first];
    saved = *input;
    *input = *node_input = -1;
    CHECK_OK(stax_vm_emit(p));
    CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "required input 0");
    *input = *node_input = saved;
    /* An attribute outside the op's schema. */
    if (node->attr_count == 0) {
      for (int32_t n = 0; n < p->nodes_count; n++)
        if (p->nodes[n].attr_count > 0) node = &p->nodes[n];
    }
    stax_vm_attr_t* attr = &p->attrs[node->attrs_first];
    int32_t type = attr->type;
    attr->type = type == STAX_ATTR_INT ? STAX_ATTR_FLOAT : STAX_ATTR_INT;
    CHECK_OK(stax_vm_emit(p));
    CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "must be");
    attr->type = type;
  }
  /* A symbol said to be bound by an instruction past the end. */
  int32_t bound_by = p->symbols[0].bound_by;
  p->symbols[0].bound_by = p->instructions_count;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "is bound by instruction");
  p->symbols[0].bound_by = bound_by;
  CHECK_OK(stax_vm_emit(p));
  CHECK_OK(stax_vm_verify(p));
  stax_program_release(p);

  /* Only LOOP_END jumps back. */
  CHECK_OK(stax_vm_program_create(vm_alloc(), &p));
  if (!p) return;
  int32_t desc = -1, reg = -1;
  CHECK_OK(stax_vm_program_add_static_descriptor(p, STAX_DTYPE_FLOAT32, 0, NULL,
                                                 STAX_VM_LAYOUT_ANY, &desc));
  CHECK_OK(stax_vm_program_add_register(p, "x", desc, STAX_VM_REGISTER_INPUT, &reg));
  CHECK_OK(stax_vm_program_add_io(p, false, "x", STAX_DTYPE_FLOAT32, 0, NULL, reg, NULL));
  int32_t load_ops[2] = {reg, 0}, jump_ops[1] = {0};
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_LOAD_TENSOR, -1, load_ops, 2, NULL));
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_JUMP, -1, jump_ops, 1, NULL));
  stax_vm_finalize_options_t options = {.insert_profile_points = false};
  CHECK_ERROR(stax_vm_program_finalize(p, &options), STAX_INVALID_ARGUMENT,
              "jumps back to instruction 0");
  stax_program_release(p);
}

/* A loop body entered by a jump from outside, or left by one, is refused. */
static void test_verifier_loop_nesting(void) {
  stax_program_t* p = build_loop();
  if (!p) return;
  int32_t begin = -1, end = -1;
  for (int32_t i = 0; i < p->instructions_count; i++) {
    if (p->instructions[i].opcode == STAX_VM_OP_LOOP_BEGIN) begin = i;
    if (p->instructions[i].opcode == STAX_VM_OP_LOOP_END) end = i;
  }
  CHECK(begin >= 0 && end > begin + 1);
  if (begin >= 0 && end > begin + 1) {
    /* Jumps into the body (LOAD_CONST's two words become JUMP_IF_FALSE's) and out of it
     * (SHAPE_VARIANT's one word becomes JUMP's). */
    int32_t into = -1, out_of = -1;
    for (int32_t i = 0; i < begin; i++)
      if (p->instructions[i].opcode == STAX_VM_OP_LOAD_CONST) into = i;
    for (int32_t i = begin + 1; i < end; i++)
      if (p->instructions[i].opcode == STAX_VM_OP_SHAPE_VARIANT) out_of = i;
    CHECK(into >= 0 && out_of >= 0);
    struct {
      int32_t victim, opcode, target_operand, target;
      const char* needle;
    } edits[2] = {{into, STAX_VM_OP_JUMP_IF_FALSE, 1, begin + 1, "jumps into loop 0's body"},
                  {out_of, STAX_VM_OP_JUMP, 0, end + 1, "jumps out of loop 0's body"}};
    for (int e = 0; e < 2 && into >= 0 && out_of >= 0; e++) {
      stax_vm_instruction_t* ins = &p->instructions[edits[e].victim];
      stax_vm_instruction_t saved = *ins;
      int32_t* target = &p->operands[ins->operand_first + edits[e].target_operand];
      int32_t saved_target = *target;
      ins->opcode = edits[e].opcode;
      *target = edits[e].target;
      CHECK_OK(stax_vm_emit(p));
      CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, edits[e].needle);
      *ins = saved;
      *target = saved_target;
    }
    /* The LOOP_END's register lists must agree in type: make a carried output a bool. */
    const stax_vm_loop_t* loop = &p->loops[0];
    int32_t* body_out = &p->loop_registers[loop->lists_first + 2 * loop->carried_count];
    int32_t saved_reg = *body_out;
    *body_out = loop->cond_in_register;
    CHECK_OK(stax_vm_emit(p));
    CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "carried value 0");
    *body_out = saved_reg;
    CHECK_OK(stax_vm_emit(p));
    CHECK_OK(stax_vm_verify(p));
  }
  stax_program_release(p);
}

STAX_TEST_MAIN(STAX_TEST(test_round_trip), STAX_TEST(test_save_and_load_file),
               STAX_TEST(test_empty_program),
               STAX_TEST(test_truncation), STAX_TEST(test_checksum_rejects_every_flip),
               STAX_TEST(test_header_errors), STAX_TEST(test_hostile_counts),
               STAX_TEST(test_allocation_faults),
               STAX_TEST(test_compact_dynamic_flag), STAX_TEST(test_verifier_rules),
               STAX_TEST(test_verifier_loop_nesting), STAX_TEST(test_fuzz_chain),
               STAX_TEST(test_fuzz_matmul), STAX_TEST(test_fuzz_reshape),
               STAX_TEST(test_fuzz_nonzero), STAX_TEST(test_fuzz_if), STAX_TEST(test_fuzz_loop),
               STAX_TEST(test_fuzz_bcast), STAX_TEST(test_version_2_file_loads))
