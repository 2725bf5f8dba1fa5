/* Shape-chain folding and its neighbours (src/passes/shapefold.c, fill.c, gemmtrans.c, and
 * the compiler's DIM_VALUES in src/vm/compile_nodes.c), on graphs built with the C API the way
 * exporters write them:
 *   - Shape -> Gather -> Unsqueeze -> Concat chains feeding Range, Slice and ConstantOfShape:
 *     equal contents merged, the values computed from dims (DIM_VALUES), the chains' opcodes
 *     gone from the bytecode, ConstantOfShape a BROADCAST_TO; with the passes off they stay;
 *   - integer program outputs computed from dims (int64 with a negative entry, int32);
 *   - Gemm reading Transpose(A) and Transpose(B) through transA/transB;
 *   - what must stay (a ConstantOfShape that is a graph output or whose shape is unknown, a
 *     Gemm whose operand is not a 2-D axis swap);
 *   - the verifier rejecting corrupted DIM_VALUES instructions.
 * Every program is run against the same graph compiled with the passes off, bit for bit, over
 * shapes that include S = 0. */
#include "test_passes_util.h"
#include "vm/program.h"

static stax_graph_t* new_graph(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  return g;
}

/* Instructions of the program whose opcode is `name` (or name_STATIC). */
static int32_t count_opcode(const stax_program_t* program, const char* name) {
  int32_t count = 0;
  size_t length = strlen(name);
  for (int32_t i = 0; i < program->instructions_count; i++) {
    const char* opcode = stax_vm_opcode_name(program->instructions[i].opcode);
    if (strncmp(opcode, name, length) == 0 &&
        (opcode[length] == '\0' || strcmp(opcode + length, "_STATIC") == 0))
      count++;
  }
  return count;
}

static stax_value_id_t i64_scalar(stax_graph_t* g, const char* name, int64_t value) {
  return vm_initializer(g, name, STAX_DTYPE_INT64, 0, NULL, &value);
}

/* x.size(axis), as an int64 scalar: Gather(Shape(x), axis). */
static stax_value_id_t size_of(stax_graph_t* g, const char* name, stax_value_id_t x,
                               int64_t axis) {
  char shape_name[64], index_name[64];
  snprintf(shape_name, sizeof(shape_name), "%s_shape", name);
  snprintf(index_name, sizeof(index_name), "%s_index", name);
  stax_value_id_t shape = vm_unary(g, STAX_OP_Shape, shape_name, x);
  return vm_binary(g, STAX_OP_Gather, name, shape, i64_scalar(g, index_name, axis));
}

static stax_value_id_t unsqueeze0(stax_graph_t* g, const char* name, stax_value_id_t v) {
  const int64_t zero[1] = {0};
  char axes_name[64];
  snprintf(axes_name, sizeof(axes_name), "%s_axes", name);
  return vm_binary(g, STAX_OP_Unsqueeze, name, v, i64_vector(g, axes_name, 1, zero));
}

/* Runs both programs on `inputs`, comparing every output bit for bit. */
static void run_identical(stax_program_t* a, stax_program_t* b, int32_t input_count,
                          stax_tensor_t** inputs) {
  int32_t outputs = stax_program_output_count(b);
  CHECK_EQ_INT(stax_program_output_count(a), outputs);
  stax_tensor_t* got[4] = {NULL};
  stax_tensor_t* want[4] = {NULL};
  stax_context_t* ca = vm_context(a, STAX_DISPATCH_DEFAULT);
  stax_context_t* cb = vm_context(b, STAX_DISPATCH_DEFAULT);
  /* Twice: the second run reuses pooled and planned memory. */
  for (int32_t round = 0; round < 2; round++) {
    CHECK_OK(stax_context_run(ca, input_count, inputs, outputs, got));
    CHECK_OK(stax_context_run(cb, input_count, inputs, outputs, want));
    for (int32_t o = 0; o < outputs; o++) {
      stax_tensor_t* left = NULL;
      stax_tensor_t* right = NULL;
      CHECK_OK(stax_tensor_copy(vm_alloc(), got[o], &left));
      CHECK_OK(stax_tensor_copy(vm_alloc(), want[o], &right));
      CHECK_EQ_INT(stax_tensor_dtype(left), stax_tensor_dtype(right));
      CHECK(vm_dims_equal(left, stax_tensor_rank(right), stax_tensor_dims(right)));
      size_t bytes = (size_t)stax_tensor_element_count(right) *
                     stax_dtype_size(stax_tensor_dtype(right));
      bool same = bytes == 0 || memcmp(stax_tensor_data(left), stax_tensor_data(right), bytes) == 0;
      if (!same) fprintf(stderr, "output %d differs\n", o);
      CHECK(same);
      stax_tensor_release(left);
      stax_tensor_release(right);
      stax_tensor_release(got[o]);
      stax_tensor_release(want[o]);
      got[o] = want[o] = NULL;
    }
  }
  stax_context_destroy(ca);
  stax_context_destroy(cb);
}

/* ---- shape chains --------------------------------------------------------------------------- */

/* x[B, S, 8], S in [0, 40]:
 *   pos = Range(0, x.size(1), 1) -> Unsqueeze(1) -> Cast(float)      (position ids)
 *   rows = Slice(table[40, 8], [0], Unsqueeze(y.size(1)), [0])       (a mask-like slice; y is
 *          x + pos, so its size(1) is the same S through another chain)
 *   ones = ConstantOfShape(Concat(x.size(0), x.size(1)), 0.5) -> Unsqueeze(2)
 *   out = (x + pos + rows) * ones
 *   dims = Concat(x.size(1), [-1]) (int64, a program output), and Cast of it to int32. */
static stax_graph_t* build_chains(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 8), vm_symbol(g, "S", 0, 40), vm_const(g, 8)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims);
  stax_value_id_t seq = size_of(g, "seq", x, 1);
  stax_value_id_t range_in[3] = {i64_scalar(g, "start", 0), seq, i64_scalar(g, "delta", 1)};
  stax_value_id_t pos = vm_node(g, STAX_OP_Range, "range", 3, range_in, 0, NULL);
  const int64_t one[1] = {1};
  pos = vm_binary(g, STAX_OP_Unsqueeze, "pos_col", pos, i64_vector(g, "axis1", 1, one));
  stax_attr_t to_float = stax_attr_int("to", 1 /* FLOAT */);
  pos = vm_node(g, STAX_OP_Cast, "pos_f", 1, &pos, 1, &to_float);
  stax_value_id_t y = vm_binary(g, STAX_OP_Add, "y", x, pos);
  float table_values[40 * 8];
  for (int32_t k = 0; k < 40 * 8; k++) table_values[k] = (float)k * 0.25f - 7.0f;
  int64_t table_dims[2] = {40, 8};
  stax_value_id_t table =
      vm_initializer(g, "table", STAX_DTYPE_FLOAT32, 2, table_dims, table_values);
  const int64_t zero[1] = {0};
  stax_value_id_t slice_in[4] = {table, i64_vector(g, "starts", 1, zero),
                                 unsqueeze0(g, "ends", size_of(g, "seq_y", y, 1)),
                                 i64_vector(g, "slice_axes", 1, zero)};
  stax_value_id_t rows = vm_node(g, STAX_OP_Slice, "rows", 4, slice_in, 0, NULL);
  stax_value_id_t z = vm_binary(g, STAX_OP_Add, "z", y, rows);
  stax_value_id_t parts[2] = {unsqueeze0(g, "batch_1", size_of(g, "batch", x, 0)),
                              unsqueeze0(g, "seq_1", seq)};
  stax_attr_t axis0 = stax_attr_int("axis", 0);
  stax_value_id_t fill_shape = vm_node(g, STAX_OP_Concat, "fill_shape", 2, parts, 1, &axis0);
  float half = 0.5f;
  stax_tensor_t* half_tensor = vm_tensor(STAX_DTYPE_FLOAT32, 1, one, &half);
  stax_attr_t value = {.name = "value", .type = STAX_ATTR_TENSOR, .value.tensor = half_tensor};
  stax_value_id_t ones = vm_node(g, STAX_OP_ConstantOfShape, "ones", 1, &fill_shape, 1, &value);
  stax_tensor_release(half_tensor);
  const int64_t two[1] = {2};
  ones = vm_binary(g, STAX_OP_Unsqueeze, "ones_3d", ones, i64_vector(g, "axis2", 1, two));
  vm_output(g, vm_binary(g, STAX_OP_Mul, "out", z, ones));
  const int64_t minus_one[1] = {-1};
  stax_value_id_t dim_parts[2] = {unsqueeze0(g, "seq_2", seq),
                                  i64_vector(g, "minus_one", 1, minus_one)};
  stax_value_id_t dims_value = vm_node(g, STAX_OP_Concat, "dims", 2, dim_parts, 1, &axis0);
  vm_output(g, dims_value);
  stax_attr_t to_int32 = stax_attr_int("to", 6 /* INT32 */);
  vm_output(g, vm_node(g, STAX_OP_Cast, "dims32", 1, &dims_value, 1, &to_int32));
  return g;
}

static void test_shape_chains(void) {
  stax_graph_t* g = build_chains();
  stax_graph_t* r = build_chains();
  stax_graph_t* k = build_chains();
  const uint32_t ours = STAX_PASS_BIT(STAX_PASS_shapefold) | STAX_PASS_BIT(STAX_PASS_fill);
  stax_program_t* optimized = compile_with(g, 0);
  stax_program_t* reference = compile_with(r, STAX_PASSES_ALL);
  stax_program_t* kept = compile_with(k, ours); /* every other pass on */
  if (optimized && reference && kept) {
    CHECK(report_mentions(optimized, "shape values with equal contents merged"));
    CHECK(report_mentions(optimized, "1 ConstantOfShape turned into a broadcast fill"));
    CHECK_EQ_INT(count_op(g, STAX_OP_ConstantOfShape), 0);
    CHECK_EQ_INT(count_op(g, STAX_OP_Expand), 1);
    CHECK_EQ_INT(count_op(k, STAX_OP_ConstantOfShape), 1);
    /* No kernel runs on a shape tensor: the values come from dim code. */
    const char* chain_ops[] = {"Shape", "Gather", "Concat", "Unsqueeze", "ConstantOfShape",
                               "Cast"};
    for (size_t c = 0; c < sizeof(chain_ops) / sizeof(chain_ops[0]); c++) {
      int32_t found = count_opcode(optimized, chain_ops[c]);
      if (strcmp(chain_ops[c], "Cast") == 0) {
        CHECK_EQ_INT(found, 1); /* the float Cast of the position ids stays */
      } else {
        if (found) fprintf(stderr, "%s is still in the bytecode\n", chain_ops[c]);
        CHECK_EQ_INT(found, 0);
      }
    }
    /* [S] for Range, [S] for Slice's ends, [S, -1] and its int32 copy for the outputs. */
    CHECK_EQ_INT(count_opcode(optimized, "DIM_VALUES"), 4);
    CHECK_EQ_INT(count_opcode(optimized, "BROADCAST_TO"), 1);
    CHECK_EQ_INT(count_opcode(optimized, "Range"), 1);
    CHECK_EQ_INT(count_opcode(optimized, "Slice"), 1);
    char* text = vm_disassembly(optimized, STAX_DISASSEMBLE_EXTENDED);
    CHECK(text && strstr(text, "DIM_VALUES                 r") && strstr(text, ", [S, -1]"));
    free(text);
    /* With shapefold and fill off the chains run. */
    CHECK_EQ_INT(count_opcode(kept, "DIM_VALUES"), 0);
    CHECK(count_opcode(kept, "Shape") >= 1 && count_opcode(kept, "ConstantOfShape") == 1);
    CHECK(optimized->instructions_count < kept->instructions_count);
    const int64_t shapes[][2] = {{1, 1}, {2, 7}, {3, 0}, {8, 40}, {1, 17}};
    vm_rng_t rng = {11};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
      int64_t dims[3] = {shapes[s][0], shapes[s][1], 8};
      stax_tensor_t* x = vm_random_f32(&rng, 3, dims);
      run_identical(optimized, reference, 1, &x);
      run_identical(kept, reference, 1, &x);
      /* The dims output holds [S, -1] in both widths. */
      stax_tensor_t* outputs[3] = {NULL, NULL, NULL};
      stax_context_t* context = vm_context(optimized, STAX_DISPATCH_SWITCH);
      CHECK_OK(stax_context_run(context, 1, &x, 3, outputs));
      const int64_t* d64 = stax_tensor_data(outputs[1]);
      const int32_t* d32 = stax_tensor_data(outputs[2]);
      CHECK(d64[0] == shapes[s][1] && d64[1] == -1 && d32[0] == shapes[s][1] && d32[1] == -1);
      for (int32_t o = 0; o < 3; o++) stax_tensor_release(outputs[o]);
      stax_context_destroy(context);
      stax_tensor_release(x);
    }
  }
  if (optimized) stax_program_release(optimized);
  if (reference) stax_program_release(reference);
  if (kept) stax_program_release(kept);
  stax_graph_destroy(g);
  stax_graph_destroy(r);
  stax_graph_destroy(k);
}

/* A ConstantOfShape that is a graph output keeps its own buffer; one whose shape is a graph
 * input (contents unknown) keeps its kernel; without `value` it fills float32 zeros. */
static stax_graph_t* build_kept_fills(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 8), vm_const(g, 3)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t shape = vm_unary(g, STAX_OP_Shape, "shape", x);
  vm_output(g, vm_unary(g, STAX_OP_ConstantOfShape, "zeros", shape)); /* a graph output */
  stax_value_id_t zeros = vm_unary(g, STAX_OP_ConstantOfShape, "zeros2", shape);
  vm_output(g, vm_binary(g, STAX_OP_Add, "sum", x, zeros));
  const stax_dim_t* n = vm_const(g, 2);
  stax_value_id_t wanted = vm_input(g, "wanted", STAX_DTYPE_INT64, 1, &n);
  vm_output(g, vm_unary(g, STAX_OP_ConstantOfShape, "free", wanted));
  return g;
}

static void test_kept_fills(void) {
  stax_graph_t* g = build_kept_fills();
  stax_graph_t* r = build_kept_fills();
  stax_program_t* optimized = compile_with(g, 0);
  stax_program_t* reference = compile_with(r, STAX_PASSES_ALL);
  if (optimized && reference) {
    CHECK_EQ_INT(count_op(g, STAX_OP_ConstantOfShape), 2); /* the output and the free one */
    CHECK_EQ_INT(count_op(g, STAX_OP_Expand), 1);
    vm_rng_t rng = {5};
    for (int64_t b = 1; b <= 8; b += 3) {
      int64_t dims[2] = {b, 3};
      stax_tensor_t* inputs[2] = {vm_random_f32(&rng, 2, dims), NULL};
      int64_t two = 2, wanted[2] = {b, 4};
      inputs[1] = vm_tensor(STAX_DTYPE_INT64, 1, &two, wanted);
      run_identical(optimized, reference, 2, inputs);
      stax_tensor_release(inputs[0]);
      stax_tensor_release(inputs[1]);
    }
  }
  if (optimized) stax_program_release(optimized);
  if (reference) stax_program_release(reference);
  stax_graph_destroy(g);
  stax_graph_destroy(r);
}

/* ---- Gemm ------------------------------------------------------------------------------------ */

/* xt[8, B] and y[8, 6] (graph inputs, so nothing folds): Gemm(Transpose(xt), Transpose(y), c,
 * transB=1, alpha=0.5, beta=2) -> [B, 8]... -> with both absorbed: Gemm(xt, y, c, transA=1,
 * transB=0). A 3-D Transpose feeding a MatMul stays. */
static stax_graph_t* build_gemms(void) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* xt_dims[2] = {vm_const(g, 8), vm_symbol(g, "B", 1, 16)};
  stax_value_id_t xt = vm_input(g, "xt", STAX_DTYPE_FLOAT32, 2, xt_dims);
  const stax_dim_t* y_dims[2] = {vm_const(g, 8), vm_const(g, 6)};
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 2, y_dims);
  stax_value_id_t a = vm_unary(g, STAX_OP_Transpose, "a", xt);
  const int64_t swap[2] = {1, 0};
  stax_attr_t perm = stax_attr_ints("perm", 2, swap);
  stax_value_id_t b = vm_node(g, STAX_OP_Transpose, "b", 1, &y, 1, &perm);
  float c_values[6] = {1, -2, 3, -4, 5, -6};
  int64_t c_dims[1] = {6};
  stax_value_id_t c = vm_initializer(g, "c", STAX_DTYPE_FLOAT32, 1, c_dims, c_values);
  stax_value_id_t gemm_in[3] = {a, b, c};
  /* Transpose(y) is [6, 8]; transB=1 reads it as [8, 6]. */
  stax_attr_t attrs[3] = {stax_attr_int("transB", 1), stax_attr_float("alpha", 0.5f),
                          stax_attr_float("beta", 2.0f)};
  stax_value_id_t out = vm_node(g, STAX_OP_Gemm, "gemm", 3, gemm_in, 3, attrs);
  vm_output(g, out);
  vm_output(g, a); /* Transpose(xt) is also an output: it stays for that use */
  return g;
}

static void test_gemm_transposes(void) {
  stax_graph_t* g = build_gemms();
  stax_graph_t* r = build_gemms();
  stax_program_t* optimized = compile_with(g, 0);
  stax_program_t* reference = compile_with(r, STAX_PASS_BIT(STAX_PASS_gemmtrans));
  if (optimized && reference) {
    CHECK(report_mentions(optimized, "1 Transposes absorbed into Gemm's transA/transB"));
    CHECK_EQ_INT(count_op(g, STAX_OP_Transpose), 1); /* the output's */
    for (int32_t n = 0; n < stax_graph_node_count(g); n++) {
      if (stax_node_op(g, n) != STAX_OP_Gemm) continue;
      const stax_node_t* node = &g->nodes[n];
      int64_t ta = -1, tb = -1;
      CHECK_OK(stax_node_attr_int(node, "transA", 0, &ta));
      CHECK_OK(stax_node_attr_int(node, "transB", 0, &tb));
      CHECK(ta == 1 && tb == 0);
      float alpha = 0, beta = 0;
      CHECK_OK(stax_node_attr_float(node, "alpha", 1, &alpha));
      CHECK_OK(stax_node_attr_float(node, "beta", 1, &beta));
      CHECK(alpha == 0.5f && beta == 2.0f);
    }
    vm_rng_t rng = {9};
    for (int64_t batch = 1; batch <= 16; batch += 5) {
      int64_t xt_dims[2] = {8, batch}, y_dims[2] = {8, 6};
      stax_tensor_t* inputs[2] = {vm_random_f32(&rng, 2, xt_dims), vm_random_f32(&rng, 2, y_dims)};
      run_identical(optimized, reference, 2, inputs);
      stax_tensor_release(inputs[0]);
      stax_tensor_release(inputs[1]);
    }
  }
  if (optimized) stax_program_release(optimized);
  if (reference) stax_program_release(reference);
  stax_graph_destroy(g);
  stax_graph_destroy(r);
}

/* ---- the verifier ---------------------------------------------------------------------------- */

static void test_dim_values_verified(void) {
  stax_graph_t* g = build_chains();
  stax_program_t* p = compile_with(g, 0);
  if (p) {
    CHECK_OK(stax_vm_verify(p));
    int32_t at = -1;
    for (int32_t i = 0; i < p->instructions_count && at < 0; i++)
      if (p->instructions[i].opcode == STAX_VM_OP_DIM_VALUES) at = i;
    CHECK(at >= 0);
    if (at >= 0) {
      int32_t* words = &p->operands[p->instructions[at].operand_first];
      int32_t saved = words[2];
      words[2] = p->dim_codes_count + 5;
      CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "dim code");
      words[2] = saved;
      /* A float register cannot hold dim values. */
      int32_t float_reg = -1;
      for (int32_t r = 0; r < p->registers_count && float_reg < 0; r++)
        if (p->descriptors[p->registers[r].descriptor].dtype == STAX_DTYPE_FLOAT32) float_reg = r;
      saved = words[0];
      words[0] = float_reg;
      CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "dim values are int64 or int32");
      /* An int64 register of another length: find the [2] output's, give it the [S] codes. */
      int32_t long_reg = -1;
      for (int32_t r = 0; r < p->registers_count && long_reg < 0; r++) {
        const stax_vm_descriptor_t* d = &p->descriptors[p->registers[r].descriptor];
        if (d->dtype == STAX_DTYPE_INT64 && d->rank == 1 && p->dims[d->dims_first].value == 2)
          long_reg = r;
      }
      CHECK(long_reg >= 0);
      words[0] = long_reg;
      if (words[1] != 2)
        CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "do not fill register");
      words[0] = saved;
      CHECK_OK(stax_vm_verify(p));
    }
    stax_program_release(p);
  }
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_shape_chains), STAX_TEST(test_kept_fills),
               STAX_TEST(test_gemm_transposes), STAX_TEST(test_dim_values_verified))
