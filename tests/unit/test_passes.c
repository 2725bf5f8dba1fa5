/* Graph passes (src/passes): each rewrite is checked on graphs built with the C API, by what
 * the graph holds after compiling (ops left, the pass report) and by running the program
 * against the same graph compiled with every pass off, over many shapes: bit for bit for
 * fold, noop, simplify, cse and dce (including the compiler's dead-instruction sweep), within
 * float32 rounding for the fusions. Also: build-time folding feeding shape inference, folds
 * that must not happen (results too large, kernels that fail), rewrites that must not happen
 * (graph outputs, broadcasts that grow, +0.0, near-miss patterns), subgraphs, pass lists and
 * STAX_DISABLE_PASSES, and 300 random graphs. */
#include "test_passes_util.h"

typedef stax_graph_t* (*build_fn)(uint64_t seed);

static bool tensors_identical(const stax_tensor_t* a, const stax_tensor_t* b) {
  if (!a || !b || stax_tensor_dtype(a) != stax_tensor_dtype(b) ||
      stax_tensor_rank(a) != stax_tensor_rank(b))
    return false;
  if (!vm_dims_equal(b, stax_tensor_rank(a), stax_tensor_dims(a))) return false;
  if (!stax_tensor_is_contiguous(a) || !stax_tensor_is_contiguous(b)) return false;
  size_t bytes = (size_t)stax_tensor_element_count(a) * stax_dtype_size(stax_tensor_dtype(a));
  return bytes == 0 || memcmp(stax_tensor_data(a), stax_tensor_data(b), bytes) == 0;
}

/* Runs both programs on the same float32 inputs (first input dims `dims`, others from
 * `other_dims`), comparing every output: bit for bit when tol < 0, else within tol*(1+|b|). */
static void run_and_compare(stax_program_t* optimized, stax_program_t* reference, int32_t rank,
                            const int64_t* dims, uint64_t seed, double tol) {
  if (!optimized || !reference) return;
  vm_rng_t rng = {seed * 2654435761u + 1};
  int32_t inputs_count = stax_program_input_count(reference);
  stax_tensor_t* inputs[4] = {NULL, NULL, NULL, NULL};
  for (int32_t i = 0; i < inputs_count && i < 4; i++) {
    if (stax_program_input_dtype(reference, i) == STAX_DTYPE_BOOL) {
      uint8_t flag = (uint8_t)(seed & 1);
      inputs[i] = vm_tensor(STAX_DTYPE_BOOL, 0, NULL, &flag);
    } else {
      inputs[i] = vm_random_f32(&rng, rank, dims);
    }
  }
  int32_t outputs_count = stax_program_output_count(reference);
  CHECK_EQ_INT(stax_program_output_count(optimized), outputs_count);
  stax_tensor_t* got[8] = {NULL};
  stax_tensor_t* want[8] = {NULL};
  stax_context_t* a = vm_context(optimized, STAX_DISPATCH_DEFAULT);
  stax_context_t* b = vm_context(reference, STAX_DISPATCH_DEFAULT);
  CHECK_OK(stax_context_run(a, inputs_count, inputs, outputs_count, got));
  CHECK_OK(stax_context_run(b, inputs_count, inputs, outputs_count, want));
  for (int32_t o = 0; o < outputs_count; o++) {
    if (!got[o] || !want[o]) continue;
    if (tol < 0) {
      stax_tensor_t* left = NULL;
      stax_tensor_t* right = NULL;
      CHECK_OK(stax_tensor_copy(vm_alloc(), got[o], &left));
      CHECK_OK(stax_tensor_copy(vm_alloc(), want[o], &right));
      bool same = tensors_identical(left, right);
      if (!same) fprintf(stderr, "output %d differs (seed %llu)\n", o, (unsigned long long)seed);
      CHECK(same);
      stax_tensor_release(left);
      stax_tensor_release(right);
    } else {
      CHECK(vm_dims_equal(got[o], stax_tensor_rank(want[o]), stax_tensor_dims(want[o])));
      int64_t count = stax_tensor_element_count(want[o]);
      double worst = 0;
      for (int64_t i = 0; i < count; i++) {
        double x = vm_f32_at(got[o], i), y = vm_f32_at(want[o], i);
        double err = fabs(x - y) / (1 + fabs(y));
        if (err > worst) worst = err;
      }
      CHECK(worst <= tol);
      if (worst > tol) fprintf(stderr, "output %d: worst error %g\n", o, worst);
    }
    stax_tensor_release(got[o]);
    stax_tensor_release(want[o]);
  }
  for (int32_t i = 0; i < inputs_count && i < 4; i++) stax_tensor_release(inputs[i]);
  stax_context_destroy(a);
  stax_context_destroy(b);
}

/* Builds twice, compiles with all passes and with none, and compares on `shapes` batches of
 * x[B, rest...]. Returns the optimized program and graph (caller releases both). */
static stax_program_t* differential(build_fn build, uint64_t seed, int32_t rank,
                                    const int64_t* rest, double tol, stax_graph_t** out_graph) {
  stax_graph_t* g = build(seed);
  stax_graph_t* r = build(seed);
  stax_program_t* optimized = g ? compile_with(g, 0) : NULL;
  stax_program_t* reference = r ? compile_with(r, STAX_PASSES_ALL) : NULL;
  const int64_t batches[] = {1, 2, 3, 7, 16};
  for (size_t k = 0; k < sizeof(batches) / sizeof(batches[0]); k++) {
    int64_t dims[STAX_MAX_RANK];
    dims[0] = batches[k];
    for (int32_t d = 1; d < rank; d++) dims[d] = rest[d - 1];
    run_and_compare(optimized, reference, rank, dims, seed + k, tol);
  }
  if (reference) stax_program_release(reference);
  if (r) stax_graph_destroy(r);
  *out_graph = g;
  return optimized;
}

static stax_value_id_t scalar_f32(stax_graph_t* g, const char* name, float value) {
  return vm_initializer(g, name, STAX_DTYPE_FLOAT32, 0, NULL, &value);
}

static stax_value_id_t input_b(stax_graph_t* g, const char* name, int32_t rank,
                               const int64_t* rest) {
  const stax_dim_t* dims[STAX_MAX_RANK];
  dims[0] = vm_symbol(g, "B", 1, 64);
  for (int32_t d = 1; d < rank; d++) dims[d] = vm_const(g, rest[d - 1]);
  return vm_input(g, name, STAX_DTYPE_FLOAT32, rank, dims);
}

static stax_graph_t* new_graph(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  return g;
}

/* ---- fold ------------------------------------------------------------------------------------ */

/* Reshape(x, Concat(Slice(Shape(x), [0], Reshape(Mod(2, 3), [1])), [2, 2])): the slice end is a
 * Mod of constants, folded at build time, so the target shape's length is static. */
static stax_graph_t* build_fold_shape(uint64_t seed) {
  (void)seed;
  stax_graph_t* g = new_graph();
  const int64_t rest[2] = {6, 4};
  stax_value_id_t x = input_b(g, "x", 3, rest);
  int64_t two = 2, three = 3;
  stax_value_id_t a = vm_initializer(g, "two", STAX_DTYPE_INT64, 0, NULL, &two);
  stax_value_id_t b = vm_initializer(g, "three", STAX_DTYPE_INT64, 0, NULL, &three);
  stax_value_id_t mod = vm_binary(g, STAX_OP_Mod, "mod", a, b);
  const int64_t one[1] = {1};
  stax_value_id_t end = vm_binary(g, STAX_OP_Reshape, "end", mod, i64_vector(g, "one", 1, one));
  const int64_t zero[1] = {0};
  stax_value_id_t slice_in[3] = {vm_unary(g, STAX_OP_Shape, "shape", x),
                                 i64_vector(g, "start", 1, zero), end};
  stax_value_id_t head = vm_node(g, STAX_OP_Slice, "slice", 3, slice_in, 0, NULL);
  const int64_t tail[2] = {2, 2};
  stax_value_id_t concat_in[2] = {head, i64_vector(g, "tail", 2, tail)};
  stax_attr_t axis = stax_attr_int("axis", 0);
  stax_value_id_t shape = vm_node(g, STAX_OP_Concat, "concat", 2, concat_in, 1, &axis);
  vm_output(g, vm_binary(g, STAX_OP_Reshape, "reshape", x, shape));
  return g;
}

static void test_fold_feeds_shape_inference(void) {
  stax_graph_t* g = build_fold_shape(0);
  stax_value_id_t mod = stax_graph_find_value(g, "mod:0");
  if (mod == STAX_VALUE_NONE) mod = stax_node_output(g, 0, 0);
  stax_tensor_t* folded = stax_value_constant(g, stax_graph_find_value(g, "end:0"));
  CHECK(folded != NULL);
  if (folded) CHECK_EQ_INT(((const int64_t*)stax_tensor_data(folded))[0], 2);
  stax_value_id_t out = stax_graph_output(g, 0);
  CHECK_EQ_INT(stax_value_rank(g, out), 4); /* static length: [B, 6, 2, 2] */
  stax_graph_destroy(g);
  const int64_t rest[2] = {6, 4};
  stax_program_t* program = differential(build_fold_shape, 1, 3, rest, -1, &g);
  if (program) {
    CHECK(report_mentions(program, "folded"));
    /* Mod and its Reshape ran at build time; Shape, Slice and Concat of the symbolic shape
     * remain as nodes, but the compiler knows the Reshape's dims, so they never run. */
    CHECK_EQ_INT(count_op(g, STAX_OP_Mod), 0);
    CHECK_EQ_INT(count_op(g, STAX_OP_Reshape), 1);
    int32_t removed = 0;
    stax_program_pass_totals(program, NULL, NULL, NULL, &removed);
    CHECK(removed >= 3);
    stax_program_release(program);
  }
  stax_graph_destroy(g);
}

static void test_fold_limits(void) {
  stax_graph_t* g = new_graph();
  /* A 64 MiB result from an 16-byte shape stays a node: folding must not bloat the model. */
  const int64_t big[2] = {4096, 4096};
  stax_value_id_t shape = i64_vector(g, "big", 2, big);
  stax_value_id_t filled = vm_unary(g, STAX_OP_ConstantOfShape, "fill", shape);
  CHECK(stax_value_constant(g, filled) == NULL);
  /* A small one folds. */
  const int64_t small[2] = {2, 3};
  stax_value_id_t small_fill = vm_unary(g, STAX_OP_ConstantOfShape, "small_fill",
                                        i64_vector(g, "small", 2, small));
  CHECK(stax_value_constant(g, small_fill) != NULL);
  /* A kernel that fails on its constants is left to fail at run time, with its message. */
  const int64_t data[3] = {10, 20, 30};
  const int64_t bad_index[1] = {5};
  stax_value_id_t gather_in[2] = {i64_vector(g, "data", 3, data),
                                  i64_vector(g, "index", 1, bad_index)};
  stax_value_id_t gathered = STAX_VALUE_NONE;
  stax_node_desc_t desc = {.op = STAX_OP_Gather, .name = "gather", .input_count = 2,
                           .inputs = gather_in, .output_count = 1};
  stax_status_t status = stax_graph_add_node(g, &desc, &gathered);
  if (status == STAX_OK) {
    CHECK(stax_value_constant(g, gathered) == NULL);
    vm_output(g, gathered);
    stax_program_t* program = compile_with(g, 0);
    if (program) {
      stax_context_t* context = vm_context(program, STAX_DISPATCH_DEFAULT);
      stax_tensor_t* out = NULL;
      CHECK_ERROR(stax_context_run(context, 0, NULL, 1, &out), STAX_OUT_OF_RANGE, "gather");
      stax_context_destroy(context);
      stax_program_release(program);
    }
  } else {
    /* Shape inference may refuse the constant index itself: also a clear error. */
    CHECK(strstr(stax_status_message(status), "gather") != NULL);
    stax_status_free(status);
  }
  stax_graph_destroy(g);
}

/* ---- noop ------------------------------------------------------------------------------------ */

static stax_graph_t* build_noops(uint64_t seed) {
  (void)seed;
  stax_graph_t* g = new_graph();
  const int64_t rest[2] = {3, 5};
  stax_value_id_t x = input_b(g, "x", 3, rest);
  stax_value_id_t v = vm_unary(g, STAX_OP_Identity, "id", x);
  stax_value_id_t dropout = vm_unary(g, STAX_OP_Dropout, "dropout", v);
  stax_attr_t to = stax_attr_int("to", 1); /* ONNX FLOAT */
  stax_value_id_t cast = vm_node(g, STAX_OP_Cast, "cast", 1, &dropout, 1, &to);
  stax_value_id_t relu = vm_unary(g, STAX_OP_Relu, "relu", cast);
  const int64_t same[3] = {0, 3, 5};
  stax_value_id_t reshaped = vm_binary(g, STAX_OP_Reshape, "reshape", relu,
                                       i64_vector(g, "same", 3, same));
  const int64_t perm[3] = {0, 1, 2};
  stax_attr_t identity_perm = stax_attr_ints("perm", 3, perm);
  stax_value_id_t transposed = vm_node(g, STAX_OP_Transpose, "transpose", 1, &reshaped, 1,
                                       &identity_perm);
  stax_value_id_t sum = vm_binary(g, STAX_OP_Add, "add", transposed, x);
  /* An Identity that is a graph output keeps its name: it stays. */
  vm_output(g, vm_unary(g, STAX_OP_Identity, "out", sum));
  return g;
}

static void test_noop(void) {
  const int64_t rest[2] = {3, 5};
  stax_graph_t* g = NULL;
  stax_program_t* program = differential(build_noops, 2, 3, rest, -1, &g);
  if (program) {
    CHECK(report_mentions(program, "Identity removed"));
    CHECK(report_mentions(program, "Dropout removed"));
    CHECK(report_mentions(program, "Cast to the same type removed"));
    CHECK(report_mentions(program, "identity Transpose removed"));
    CHECK(report_mentions(program, "shape-keeping view removed"));
    CHECK_EQ_INT(stax_graph_node_count(g), 3); /* Relu, Add, the output Identity */
    CHECK_EQ_INT(count_op(g, STAX_OP_Identity), 1);
    CHECK_EQ_STR(stax_value_name(g, stax_graph_output(g, 0)), "out:0");
    stax_program_release(program);
  }
  stax_graph_destroy(g);
}

/* ---- simplify -------------------------------------------------------------------------------- */

static stax_graph_t* build_identities(uint64_t seed) {
  (void)seed;
  stax_graph_t* g = new_graph();
  const int64_t rest[2] = {4, 6};
  stax_value_id_t x = input_b(g, "x", 3, rest);
  stax_value_id_t v = vm_binary(g, STAX_OP_Mul, "mul1", x, scalar_f32(g, "one", 1.0f));
  v = vm_binary(g, STAX_OP_Mul, "one_mul", scalar_f32(g, "one_b", 1.0f), v);
  v = vm_binary(g, STAX_OP_Div, "div1", v, scalar_f32(g, "one_c", 1.0f));
  v = vm_binary(g, STAX_OP_Add, "add_neg0", v, scalar_f32(g, "neg_zero", -0.0f));
  v = vm_binary(g, STAX_OP_Sub, "sub0", v, scalar_f32(g, "zero", 0.0f));
  v = vm_unary(g, STAX_OP_Neg, "neg_a", vm_unary(g, STAX_OP_Neg, "neg_b", v));
  const int64_t p[3] = {0, 2, 1}, q[3] = {2, 0, 1}, back[3] = {0, 2, 1};
  stax_attr_t pa = stax_attr_ints("perm", 3, p), qa = stax_attr_ints("perm", 3, q);
  stax_attr_t ba = stax_attr_ints("perm", 3, back);
  stax_value_id_t t1 = vm_node(g, STAX_OP_Transpose, "t1", 1, &v, 1, &pa);
  stax_value_id_t t2 = vm_node(g, STAX_OP_Transpose, "t2", 1, &t1, 1, &ba); /* back to v */
  stax_value_id_t t3 = vm_node(g, STAX_OP_Transpose, "t3", 1, &t2, 1, &pa);
  stax_value_id_t t4 = vm_node(g, STAX_OP_Transpose, "t4", 1, &t3, 1, &qa); /* merged */
  /* x + 0.0 must stay: for x = -0.0 it is +0.0. */
  stax_value_id_t plus_zero = vm_binary(g, STAX_OP_Add, "add_pos0", x, scalar_f32(g, "pz", 0.0f));
  /* A Mul by ones that broadcasts to a larger shape is not an identity. */
  const int64_t grow_dims[4] = {2, 1, 1, 1};
  float ones[2] = {1.0f, 1.0f};
  stax_value_id_t grown = vm_binary(g, STAX_OP_Mul, "grow", x,
                                    vm_initializer(g, "ones", STAX_DTYPE_FLOAT32, 4, grow_dims,
                                                   ones));
  /* Unsqueeze then Squeeze the same axis: x again; Reshape of a Reshape: one Reshape. */
  const int64_t axis1[1] = {1};
  stax_value_id_t axes = i64_vector(g, "axes", 1, axis1);
  stax_value_id_t un = vm_binary(g, STAX_OP_Unsqueeze, "unsq", v, axes);
  stax_value_id_t sq = vm_binary(g, STAX_OP_Squeeze, "sq", un, axes);
  const int64_t flat[2] = {-1, 24}, cube[4] = {-1, 2, 2, 6};
  stax_value_id_t r1 = vm_binary(g, STAX_OP_Reshape, "r1", sq, i64_vector(g, "flat", 2, flat));
  stax_value_id_t r2 = vm_binary(g, STAX_OP_Reshape, "r2", r1, i64_vector(g, "cube", 4, cube));
  vm_output(g, t4);
  vm_output(g, plus_zero);
  vm_output(g, grown);
  vm_output(g, r2);
  return g;
}

static void test_simplify(void) {
  const int64_t rest[2] = {4, 6};
  stax_graph_t* g = NULL;
  stax_program_t* program = differential(build_identities, 3, 3, rest, -1, &g);
  if (program) {
    CHECK(report_mentions(program, "arithmetic identity removed"));
    CHECK(report_mentions(program, "Neg of Neg removed"));
    CHECK(report_mentions(program, "Transpose pair removed"));
    CHECK(report_mentions(program, "Transpose pair merged"));
    CHECK(report_mentions(program, "view round trip removed"));
    CHECK(report_mentions(program, "Reshape of a reshape merged"));
    CHECK_EQ_INT(count_op(g, STAX_OP_Neg), 0);
    CHECK_EQ_INT(count_op(g, STAX_OP_Transpose), 1);
    CHECK_EQ_INT(count_op(g, STAX_OP_Div), 0);
    CHECK_EQ_INT(count_op(g, STAX_OP_Sub), 0);
    CHECK_EQ_INT(count_op(g, STAX_OP_Add), 1); /* x + 0.0 stays */
    CHECK_EQ_INT(count_op(g, STAX_OP_Mul), 1); /* the growing Mul stays */
    CHECK_EQ_INT(count_op(g, STAX_OP_Reshape), 1);
    /* The sign of zero: x + 0.0 of -0.0 is +0.0, as without passes. */
    stax_context_t* context = vm_context(program, STAX_DISPATCH_DEFAULT);
    int64_t dims[3] = {1, 4, 6};
    float data[24];
    for (int i = 0; i < 24; i++) data[i] = -0.0f;
    stax_tensor_t* input = vm_tensor(STAX_DTYPE_FLOAT32, 3, dims, data);
    stax_tensor_t* outs[4] = {NULL};
    CHECK_OK(stax_context_run(context, 1, &input, 4, outs));
    if (outs[1]) CHECK(!signbit(vm_f32(outs[1])[0]));
    if (outs[0]) CHECK(signbit(vm_f32_at(outs[0], 0))); /* -0.0 through exact identities */
    for (int k = 0; k < 4; k++)
      if (outs[k]) stax_tensor_release(outs[k]);
    stax_tensor_release(input);
    stax_context_destroy(context);
    stax_program_release(program);
  }
  stax_graph_destroy(g);
}

/* ---- fuse ------------------------------------------------------------------------------------ */

/* Four GELUs as exporters write them, summed, plus near misses that must stay chains. */
static stax_graph_t* build_gelus(uint64_t seed) {
  (void)seed;
  stax_graph_t* g = new_graph();
  const int64_t rest[2] = {5, 8};
  stax_value_id_t x = input_b(g, "x", 3, rest);
  stax_value_id_t half = scalar_f32(g, "half", 0.5f), one = scalar_f32(g, "one", 1.0f);
  stax_value_id_t sqrt2 = scalar_f32(g, "sqrt2", 1.4142135f);
  stax_value_id_t inv_sqrt2 = scalar_f32(g, "inv_sqrt2", 0.70710678f);
  /* torch: (x * (erf(x / sqrt2) + 1)) * 0.5 */
  stax_value_id_t e1 = vm_binary(g, STAX_OP_Add, "e1_add",
                                 vm_unary(g, STAX_OP_Erf, "e1_erf",
                                          vm_binary(g, STAX_OP_Div, "e1_div", x, sqrt2)),
                                 one);
  stax_value_id_t g1 = vm_binary(g, STAX_OP_Mul, "g1", vm_binary(g, STAX_OP_Mul, "g1_x", x, e1),
                                 half);
  /* (0.5 * x) * (1 + erf(x * 0.7071)) */
  stax_value_id_t e2 = vm_binary(g, STAX_OP_Add, "e2_add", one,
                                 vm_unary(g, STAX_OP_Erf, "e2_erf",
                                          vm_binary(g, STAX_OP_Mul, "e2_mul", x, inv_sqrt2)));
  stax_value_id_t g2 = vm_binary(g, STAX_OP_Mul, "g2",
                                 vm_binary(g, STAX_OP_Mul, "g2_half", half, x), e2);
  /* tanh form with Pow(x, 3) */
  stax_value_id_t c1 = scalar_f32(g, "c1", 0.7978845608f), c2 = scalar_f32(g, "c2", 0.044715f);
  stax_value_id_t cube = vm_binary(g, STAX_OP_Pow, "t_pow", x, scalar_f32(g, "three", 3.0f));
  stax_value_id_t inner = vm_binary(g, STAX_OP_Add, "t_inner", x,
                                    vm_binary(g, STAX_OP_Mul, "t_c2", c2, cube));
  stax_value_id_t th = vm_unary(g, STAX_OP_Tanh, "t_tanh",
                                vm_binary(g, STAX_OP_Mul, "t_c1", inner, c1));
  stax_value_id_t g3 = vm_binary(g, STAX_OP_Mul, "g3",
                                 vm_binary(g, STAX_OP_Mul, "g3_x", x,
                                           vm_binary(g, STAX_OP_Add, "t_add", th, one)),
                                 half);
  /* tanh form with x*x*x */
  stax_value_id_t xx = vm_binary(g, STAX_OP_Mul, "u_xx", x, x);
  stax_value_id_t xxx = vm_binary(g, STAX_OP_Mul, "u_xxx", xx, x);
  stax_value_id_t inner2 = vm_binary(g, STAX_OP_Add, "u_inner",
                                     vm_binary(g, STAX_OP_Mul, "u_c2", xxx, c2), x);
  stax_value_id_t th2 = vm_unary(g, STAX_OP_Tanh, "u_tanh",
                                 vm_binary(g, STAX_OP_Mul, "u_c1", c1, inner2));
  stax_value_id_t g4 = vm_binary(g, STAX_OP_Mul, "g4", half,
                                 vm_binary(g, STAX_OP_Mul, "g4_x",
                                           vm_binary(g, STAX_OP_Add, "u_add", one, th2), x));
  /* Near miss: 0.6 instead of 0.5 stays a chain. */
  stax_value_id_t miss = vm_binary(g, STAX_OP_Mul, "miss",
                                   vm_binary(g, STAX_OP_Mul, "miss_x", x,
                                             vm_binary(g, STAX_OP_Add, "miss_add",
                                                       vm_unary(g, STAX_OP_Erf, "miss_erf",
                                                                vm_binary(g, STAX_OP_Div,
                                                                          "miss_div", x, sqrt2)),
                                                       one)),
                                   scalar_f32(g, "not_half", 0.6f));
  vm_output(g, g1);
  vm_output(g, g2);
  vm_output(g, g3);
  vm_output(g, g4);
  vm_output(g, miss);
  return g;
}

static void test_fuse_gelu(void) {
  const int64_t rest[2] = {5, 8};
  stax_graph_t* g = NULL;
  stax_program_t* program = differential(build_gelus, 4, 3, rest, 2e-6, &g);
  if (program) {
    CHECK(report_mentions(program, "2 GELU fused into Gelu"));
    CHECK(report_mentions(program, "2 tanh GELU fused into Gelu"));
    CHECK_EQ_INT(count_op(g, STAX_OP_Gelu), 4);
    CHECK_EQ_INT(count_op(g, STAX_OP_Erf), 1); /* the near miss */
    CHECK_EQ_INT(count_op(g, STAX_OP_Tanh), 0);
    CHECK_EQ_STR(stax_value_name(g, stax_graph_output(g, 0)), "g1:0");
    stax_program_release(program);
  }
  stax_graph_destroy(g);
}

/* The pre-opset-17 LayerNorm chain, with beta (axes attribute) and without (axes input). */
static stax_graph_t* build_layer_norms(uint64_t seed) {
  (void)seed;
  stax_graph_t* g = new_graph();
  const int64_t rest[2] = {3, 16};
  stax_value_id_t x = input_b(g, "x", 3, rest);
  float gamma[16], beta[16];
  for (int i = 0; i < 16; i++) gamma[i] = 0.5f + 0.1f * (float)i, beta[i] = 0.25f * (float)(i - 8);
  const int64_t c[1] = {16};
  stax_value_id_t gv = vm_initializer(g, "gamma", STAX_DTYPE_FLOAT32, 1, c, gamma);
  stax_value_id_t bv = vm_initializer(g, "beta", STAX_DTYPE_FLOAT32, 1, c, beta);
  const int64_t last[1] = {-1};
  stax_attr_t axes = stax_attr_ints("axes", 1, last);
  stax_value_id_t mean = vm_node(g, STAX_OP_ReduceMean, "mean", 1, &x, 1, &axes);
  stax_value_id_t d = vm_binary(g, STAX_OP_Sub, "d", x, mean);
  stax_value_id_t sq = vm_binary(g, STAX_OP_Pow, "sq", d, scalar_f32(g, "two", 2.0f));
  stax_value_id_t var = vm_node(g, STAX_OP_ReduceMean, "var", 1, &sq, 1, &axes);
  stax_value_id_t s = vm_unary(g, STAX_OP_Sqrt, "s",
                               vm_binary(g, STAX_OP_Add, "veps", var, scalar_f32(g, "eps", 1e-5f)));
  stax_value_id_t n = vm_binary(g, STAX_OP_Div, "n", d, s);
  stax_value_id_t y = vm_binary(g, STAX_OP_Add, "ln1", vm_binary(g, STAX_OP_Mul, "ln1_g", n, gv), bv);
  /* Second one, on y, reading its axes from an input and squaring by d*d; no beta. */
  stax_value_id_t axes_in = i64_vector(g, "axes2", 1, last);
  stax_value_id_t m_in[2] = {y, axes_in};
  stax_value_id_t mean2 = vm_node(g, STAX_OP_ReduceMean, "mean2", 2, m_in, 0, NULL);
  stax_value_id_t d2 = vm_binary(g, STAX_OP_Sub, "d2", y, mean2);
  stax_value_id_t sq_in[2] = {vm_binary(g, STAX_OP_Mul, "sq2", d2, d2), axes_in};
  stax_value_id_t var2 = vm_node(g, STAX_OP_ReduceMean, "var2", 2, sq_in, 0, NULL);
  stax_value_id_t s2 = vm_unary(g, STAX_OP_Sqrt, "s2",
                                vm_binary(g, STAX_OP_Add, "veps2", scalar_f32(g, "eps2", 1e-3f), var2));
  stax_value_id_t out = vm_binary(g, STAX_OP_Mul, "ln2", gv, vm_binary(g, STAX_OP_Div, "n2", d2, s2));
  /* Over axis 1, not the last: stays a chain. */
  const int64_t middle[1] = {1};
  stax_attr_t axes_mid = stax_attr_ints("axes", 1, middle);
  stax_value_id_t mean3 = vm_node(g, STAX_OP_ReduceMean, "mean3", 1, &x, 1, &axes_mid);
  stax_value_id_t d3 = vm_binary(g, STAX_OP_Sub, "d3", x, mean3);
  stax_value_id_t sq3 = vm_binary(g, STAX_OP_Pow, "sq3", d3, scalar_f32(g, "two3", 2.0f));
  stax_value_id_t var3 = vm_node(g, STAX_OP_ReduceMean, "var3", 1, &sq3, 1, &axes_mid);
  stax_value_id_t s3 = vm_unary(g, STAX_OP_Sqrt, "s3",
                                vm_binary(g, STAX_OP_Add, "veps3", var3, scalar_f32(g, "eps3", 1e-5f)));
  stax_value_id_t mid = vm_binary(g, STAX_OP_Mul, "ln3", vm_binary(g, STAX_OP_Div, "n3", d3, s3), gv);
  vm_output(g, out);
  vm_output(g, mid);
  return g;
}

static void test_fuse_layer_norm(void) {
  const int64_t rest[2] = {3, 16};
  stax_graph_t* g = NULL;
  stax_program_t* program = differential(build_layer_norms, 5, 3, rest, 2e-5, &g);
  if (program) {
    CHECK(report_mentions(program, "2 LayerNorm chain fused into LayerNormalization"));
    CHECK_EQ_INT(count_op(g, STAX_OP_LayerNormalization), 2);
    CHECK_EQ_INT(count_op(g, STAX_OP_ReduceMean), 2); /* the axis-1 chain */
    stax_program_release(program);
  }
  stax_graph_destroy(g);
}

/* ---- cse and dce ----------------------------------------------------------------------------- */

static stax_graph_t* build_common(uint64_t seed) {
  (void)seed;
  stax_graph_t* g = new_graph();
  const int64_t rest[1] = {9};
  stax_value_id_t x = input_b(g, "x", 2, rest);
  stax_value_id_t a = vm_binary(g, STAX_OP_Mul, "a", x, scalar_f32(g, "k1", 3.0f));
  stax_value_id_t b = vm_binary(g, STAX_OP_Mul, "b", x, scalar_f32(g, "k2", 3.0f)); /* equal */
  stax_value_id_t s1 = vm_unary(g, STAX_OP_Softmax, "s1", a);
  stax_attr_t axis0 = stax_attr_int("axis", 0);
  stax_value_id_t s2 = vm_node(g, STAX_OP_Softmax, "s2", 1, &b, 1, &axis0); /* other attrs */
  stax_value_id_t s3 = vm_unary(g, STAX_OP_Softmax, "s3", b);               /* equal to s1 */
  stax_value_id_t sum = vm_binary(g, STAX_OP_Add, "sum", vm_binary(g, STAX_OP_Add, "p", s1, s2), s3);
  /* Two equal nodes that are both graph outputs keep their names. */
  stax_value_id_t o1 = vm_unary(g, STAX_OP_Exp, "o1", sum);
  stax_value_id_t o2 = vm_unary(g, STAX_OP_Exp, "o2", sum);
  vm_unary(g, STAX_OP_Sigmoid, "unused", x); /* dead */
  vm_output(g, o1);
  vm_output(g, o2);
  return g;
}

static void test_cse_dce(void) {
  const int64_t rest[1] = {9};
  stax_graph_t* g = NULL;
  stax_program_t* program = differential(build_common, 6, 2, rest, -1, &g);
  if (program) {
    CHECK(report_mentions(program, "equal constants merged"));
    CHECK(report_mentions(program, "equal nodes merged"));
    CHECK(report_mentions(program, "dead nodes removed"));
    CHECK_EQ_INT(count_op(g, STAX_OP_Mul), 1);
    CHECK_EQ_INT(count_op(g, STAX_OP_Softmax), 2);
    CHECK_EQ_INT(count_op(g, STAX_OP_Exp), 2);
    CHECK_EQ_INT(count_op(g, STAX_OP_Sigmoid), 0);
    stax_program_release(program);
  }
  stax_graph_destroy(g);
}

/* Shape -> Gather -> Concat -> Reshape with symbolic dims: the compiler computes the target
 * dims, so the chain's kernels are never read and the dead-instruction sweep drops them. */
static stax_graph_t* build_shape_chain(uint64_t seed) {
  (void)seed;
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64), vm_const(g, 8)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims);
  stax_value_id_t shape = vm_unary(g, STAX_OP_Shape, "shape", x);
  int64_t zero = 0, one = 1;
  stax_value_id_t b = vm_binary(g, STAX_OP_Gather, "gb", shape,
                                vm_initializer(g, "i0", STAX_DTYPE_INT64, 0, NULL, &zero));
  stax_value_id_t s = vm_binary(g, STAX_OP_Gather, "gs", shape,
                                vm_initializer(g, "i1", STAX_DTYPE_INT64, 0, NULL, &one));
  const int64_t ax[1] = {0};
  stax_value_id_t axes = i64_vector(g, "ax", 1, ax);
  stax_value_id_t parts[4] = {vm_binary(g, STAX_OP_Unsqueeze, "ub", b, axes),
                              vm_binary(g, STAX_OP_Unsqueeze, "us", s, axes), STAX_VALUE_NONE,
                              STAX_VALUE_NONE};
  const int64_t tail[2] = {2, 4};
  parts[2] = i64_vector(g, "tail", 2, tail);
  stax_attr_t axis = stax_attr_int("axis", 0);
  stax_value_id_t target = vm_node(g, STAX_OP_Concat, "concat", 3, parts, 1, &axis);
  stax_value_id_t r = vm_binary(g, STAX_OP_Reshape, "split", x, target);
  vm_output(g, vm_unary(g, STAX_OP_Relu, "relu", r));
  return g;
}

static void test_dead_instructions(void) {
  stax_graph_t* g = build_shape_chain(0);
  stax_graph_t* r = build_shape_chain(0);
  stax_program_t* optimized = compile_with(g, 0);
  stax_program_t* kept = compile_with(r, STAX_PASS_BIT(STAX_PASS_dce));
  if (optimized && kept) {
    int32_t removed = 0;
    stax_program_pass_totals(optimized, NULL, NULL, NULL, &removed);
    CHECK(removed >= 6);
    char* text = vm_disassembly(optimized, STAX_DISASSEMBLE_EXTENDED);
    CHECK(text && !strstr(text, "Gather node") && !strstr(text, "Concat node") &&
          !strstr(text, "Shape node"));
    free(text);
    text = vm_disassembly(kept, STAX_DISASSEMBLE_EXTENDED);
    CHECK(text && strstr(text, "Concat node"));
    free(text);
    for (int64_t bsz = 1; bsz <= 5; bsz += 2) {
      for (int64_t seq = 1; seq <= 9; seq += 4) {
        int64_t dims[3] = {bsz, seq, 8};
        run_and_compare(optimized, kept, 3, dims, (uint64_t)(bsz * 10 + seq), -1);
      }
    }
  }
  if (optimized) stax_program_release(optimized);
  if (kept) stax_program_release(kept);
  stax_graph_destroy(g);
  stax_graph_destroy(r);
}

/* ---- subgraphs ------------------------------------------------------------------------------- */

static stax_graph_t* build_if(uint64_t seed) {
  (void)seed;
  stax_graph_t* g = new_graph();
  const int64_t rest[1] = {4};
  stax_value_id_t x = input_b(g, "x", 2, rest);
  stax_value_id_t cond = vm_input(g, "cond", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t doubled = vm_binary(g, STAX_OP_Add, "doubled", x, x);
  stax_graph_t* then_branch = NULL;
  stax_graph_t* else_branch = NULL;
  CHECK_OK(stax_graph_create_subgraph(g, &then_branch));
  CHECK_OK(stax_graph_create_subgraph(g, &else_branch));
  stax_value_id_t tx = STAX_VALUE_NONE, ex = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(then_branch, doubled, &tx));
  CHECK_OK(stax_graph_capture(else_branch, x, &ex));
  stax_value_id_t t = vm_binary(then_branch, STAX_OP_Mul, "t_mul", tx, scalar_f32(then_branch, "t1", 1.0f));
  vm_output(then_branch, vm_unary(then_branch, STAX_OP_Exp, "t_exp",
                                  vm_unary(then_branch, STAX_OP_Identity, "t_id", t)));
  stax_value_id_t e = vm_unary(else_branch, STAX_OP_Neg, "e_neg1",
                               vm_unary(else_branch, STAX_OP_Neg, "e_neg2", ex));
  vm_output(else_branch, vm_unary(else_branch, STAX_OP_Sigmoid, "e_sig", e));
  stax_attr_t attrs[2] = {stax_attr_graph("then_branch", then_branch),
                          stax_attr_graph("else_branch", else_branch)};
  vm_output(g, vm_node(g, STAX_OP_If, "if", 1, &cond, 2, attrs));
  return g;
}

static void test_subgraphs(void) {
  stax_graph_t* g = build_if(0);
  stax_graph_t* r = build_if(0);
  stax_program_t* optimized = compile_with(g, 0);
  stax_program_t* reference = compile_with(r, STAX_PASSES_ALL);
  if (optimized && reference) {
    CHECK(report_mentions(optimized, "Neg of Neg removed"));
    CHECK(report_mentions(optimized, "Identity removed"));
    CHECK(report_mentions(optimized, "arithmetic identity removed"));
    int32_t before = 0, after = 0;
    stax_program_pass_totals(optimized, &before, &after, NULL, NULL);
    CHECK(after < before);
    /* The captured Add stays: the branch reads it. */
    CHECK_EQ_INT(count_op(g, STAX_OP_Add), 1);
    for (uint64_t seed = 0; seed < 6; seed++) {
      int64_t dims[2] = {(int64_t)seed + 1, 4};
      /* run_and_compare gives every non-bool input dims, the bool one seed & 1. */
      run_and_compare(optimized, reference, 2, dims, seed, -1);
    }
  }
  if (optimized) stax_program_release(optimized);
  if (reference) stax_program_release(reference);
  stax_graph_destroy(g);
  stax_graph_destroy(r);
}

/* ---- switches -------------------------------------------------------------------------------- */

static void test_pass_lists(void) {
  uint32_t bits = 0;
  CHECK_OK(stax_pass_parse_list("cse, fuse", &bits));
  CHECK_EQ_INT(bits, STAX_PASS_BIT(STAX_PASS_cse) | STAX_PASS_BIT(STAX_PASS_fuse));
  CHECK_OK(stax_pass_parse_list("all", &bits));
  CHECK_EQ_INT(bits, STAX_PASSES_ALL);
  CHECK_OK(stax_pass_parse_list("", &bits));
  CHECK_EQ_INT(bits, 0);
  CHECK_ERROR(stax_pass_parse_list("fold,bogus", &bits), STAX_INVALID_ARGUMENT,
              "unknown graph pass 'bogus' (the passes are fold, noop, simplify, fuse, bnfold, widen, "
              "shapefold, fill, gemmtrans, cse, dce");
  CHECK_EQ_STR(stax_pass_name(STAX_PASS_fuse), "fuse");
  CHECK_EQ_INT(stax_pass_from_name("dce"), STAX_PASS_dce);
  CHECK_EQ_INT(stax_pass_from_name("nope"), STAX_PASS_INVALID);
  CHECK_EQ_STR(stax_pass_name((stax_pass_t)99), "invalid");
  CHECK(strlen(stax_pass_summary(STAX_PASS_fold)) > 10);

  /* Off by option: the chain stays; off by environment: the same. */
  stax_graph_t* g = build_gelus(0);
  stax_program_t* program = compile_with(g, STAX_PASS_BIT(STAX_PASS_fuse));
  CHECK_EQ_INT(count_op(g, STAX_OP_Gelu), 0);
  CHECK(!report_mentions(program, "GELU"));
  stax_program_release(program);
  stax_graph_destroy(g);
  setenv("STAX_DISABLE_PASSES", "fuse,dce", 1);
  g = build_gelus(0);
  program = compile_with(g, 0);
  CHECK_EQ_INT(count_op(g, STAX_OP_Gelu), 0);
  int32_t removed = -1;
  stax_program_pass_totals(program, NULL, NULL, NULL, &removed);
  CHECK_EQ_INT(removed, 0);
  stax_program_release(program);
  stax_graph_destroy(g);
  unsetenv("STAX_DISABLE_PASSES");

  stax_pass_report_t report;
  g = build_noops(0);
  program = compile_with(g, 0);
  CHECK_ERROR(stax_program_pass_report(program, 99, &report), STAX_OUT_OF_RANGE, "out of range");
  CHECK_ERROR(stax_program_pass_report(program, 0, NULL), STAX_INVALID_ARGUMENT, "NULL");
  stax_program_release(program);
  stax_graph_destroy(g);
}

/* ---- random graphs --------------------------------------------------------------------------- */

/* Chains of exact rewrites' raw material (identities, duplicates, views, dead branches) mixed
 * with real work; compared bit for bit with the passes off. */
static stax_graph_t* build_random(uint64_t seed) {
  vm_rng_t rng = {seed * 0x9e3779b97f4a7c15ull + 7};
  stax_graph_t* g = new_graph();
  const int64_t rest[2] = {4, 6};
  stax_value_id_t pool[48];
  int32_t count = 0;
  pool[count++] = input_b(g, "x", 3, rest);
  char name[32];
  int32_t steps = (int32_t)vm_rng_range(&rng, 4, 20);
  for (int32_t s = 0; s < steps && count < 46; s++) {
    stax_value_id_t a = pool[vm_rng_range(&rng, 0, count - 1)];
    stax_value_id_t b = pool[vm_rng_range(&rng, 0, count - 1)];
    snprintf(name, sizeof(name), "n%d", s);
    stax_value_id_t out = STAX_VALUE_NONE;
    char cname[40];
    snprintf(cname, sizeof(cname), "c%d", s);
    switch (vm_rng_range(&rng, 0, 11)) {
      case 0: out = vm_unary(g, STAX_OP_Identity, name, a); break;
      case 1: out = vm_unary(g, STAX_OP_Neg, name, a); break;
      case 2: out = vm_binary(g, STAX_OP_Mul, name, a, scalar_f32(g, cname, 1.0f)); break;
      case 3: out = vm_binary(g, STAX_OP_Add, name, a, b); break;
      case 4: out = vm_binary(g, STAX_OP_Mul, name, a, scalar_f32(g, cname, 0.75f)); break;
      case 5: out = vm_unary(g, STAX_OP_Tanh, name, a); break;
      case 6: {
        const int64_t perm[3] = {0, 2, 1};
        stax_attr_t attr = stax_attr_ints("perm", 3, perm);
        /* Transposes come in pairs so every value keeps [B, 4, 6]. */
        stax_value_id_t t = vm_node(g, STAX_OP_Transpose, name, 1, &a, 1, &attr);
        snprintf(name, sizeof(name), "n%d_back", s);
        out = vm_node(g, STAX_OP_Transpose, name, 1, &t, 1, &attr);
        break;
      }
      case 7: {
        const int64_t flat[2] = {0, 24};
        stax_value_id_t f = vm_binary(g, STAX_OP_Reshape, name, a, i64_vector(g, cname, 2, flat));
        const int64_t back[3] = {-1, 4, 6};
        snprintf(name, sizeof(name), "n%d_back", s);
        snprintf(cname, sizeof(cname), "c%d_back", s);
        out = vm_binary(g, STAX_OP_Reshape, name, f, i64_vector(g, cname, 3, back));
        break;
      }
      case 8: out = vm_binary(g, STAX_OP_Sub, name, a, scalar_f32(g, cname, 0.0f)); break;
      case 9: out = vm_unary(g, STAX_OP_Softmax, name, a); break;
      case 10: out = vm_binary(g, STAX_OP_Add, name, a, scalar_f32(g, cname, 0.0f)); break;
      default: {
        /* A duplicate of an earlier node's computation for CSE. */
        out = vm_binary(g, STAX_OP_Mul, name, a, b);
        snprintf(name, sizeof(name), "n%d_dup", s);
        pool[count++] = vm_binary(g, STAX_OP_Mul, name, a, b);
        break;
      }
    }
    if (out != STAX_VALUE_NONE) pool[count++] = out;
  }
  vm_output(g, pool[count - 1]);
  if (count > 2) vm_output(g, pool[vm_rng_range(&rng, 1, count - 2)]);
  return g;
}

static void test_random_graphs(void) {
  const int64_t rest[2] = {4, 6};
  int32_t changed = 0;
  for (uint64_t seed = 1; seed <= 300; seed++) {
    stax_graph_t* g = NULL;
    stax_program_t* program = differential(build_random, seed, 3, rest, -1, &g);
    if (program) {
      if (stax_program_pass_report_count(program) > 0) changed++;
      stax_program_release(program);
    }
    stax_graph_destroy(g);
  }
  CHECK(changed > 200); /* the generator mostly makes graphs the passes rewrite */
}

STAX_TEST_MAIN(STAX_TEST(test_fold_feeds_shape_inference), STAX_TEST(test_fold_limits),
               STAX_TEST(test_noop), STAX_TEST(test_simplify), STAX_TEST(test_fuse_gelu),
               STAX_TEST(test_fuse_layer_norm), STAX_TEST(test_cse_dce),
               STAX_TEST(test_dead_instructions), STAX_TEST(test_subgraphs),
               STAX_TEST(test_pass_lists), STAX_TEST(test_random_graphs))
