/* Sequence values: the runtime object (creation, refcounts, refusal by tensor functions), the
 * sequence ops compiled and run through the VM (values against plain C, positions negative,
 * default and out of range, dtype and kind errors, SplitToSequence / ConcatFromSequence modes,
 * empty sequences), sequences carried by Loop and returned by If, the memory plan keeping a
 * sequence's elements intact, the verifier rejecting sequence registers where tensors belong,
 * and a save/load round trip. Both dispatch loops. */
#include "runtime/tensor_internal.h"
#include "test_vm_util.h"
#include "vm/program.h"

static stax_tensor_t* vm_i64(int64_t value) { return vm_tensor(STAX_DTYPE_INT64, 0, NULL, &value); }

/* A float32 [n, 3] tensor with element (i, j) = base + 10 i + j. */
static stax_tensor_t* rows(int64_t n, float base) {
  int64_t dims[2] = {n, 3};
  stax_tensor_t* t = vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  float* data = stax_tensor_data(t);
  for (int64_t i = 0; i < n; i++)
    for (int j = 0; j < 3; j++) data[i * 3 + j] = base + 10.0f * (float)i + (float)j;
  return t;
}

static bool same_tensor(const stax_tensor_t* a, const stax_tensor_t* b) {
  if (!a || !b || stax_tensor_is_sequence(a) || stax_tensor_is_sequence(b)) return false;
  if (stax_tensor_rank(a) != stax_tensor_rank(b)) return false;
  for (int32_t d = 0; d < stax_tensor_rank(a); d++)
    if (stax_tensor_dims(a)[d] != stax_tensor_dims(b)[d]) return false;
  for (int64_t i = 0; i < stax_tensor_element_count(a); i++)
    if (vm_f32_at(a, i) != vm_f32_at(b, i)) return false;
  return true;
}

static stax_value_id_t seq_input(stax_graph_t* g, const char* name, int32_t elem_rank) {
  stax_value_id_t value = STAX_VALUE_NONE;
  const stax_dim_t* dims[2] = {NULL, vm_const(g, 3)};
  CHECK_OK(stax_graph_add_sequence_input(g, name, STAX_DTYPE_FLOAT32, elem_rank, dims, &value));
  return value;
}

/* ---- the runtime object ------------------------------------------------------------------- */

static void test_sequence_object(void) {
  stax_tensor_t* a = rows(2, 0);
  stax_tensor_t* b = rows(1, 100);
  stax_tensor_t* items[2] = {a, b};
  stax_tensor_t* s = NULL;
  CHECK_OK(stax_sequence_create(vm_alloc(), STAX_DTYPE_FLOAT32, 2, items, &s));
  stax_tensor_release(a); /* the sequence keeps its elements */
  stax_tensor_release(b);
  CHECK(stax_tensor_is_sequence(s));
  CHECK_EQ_INT(stax_sequence_length(s), 2);
  CHECK_EQ_INT(stax_tensor_dtype(s), STAX_DTYPE_FLOAT32);
  CHECK_EQ_INT(stax_tensor_rank(s), 0);
  CHECK(stax_tensor_data(s) == NULL);
  CHECK(stax_sequence_at(s, 1) && stax_tensor_dims(stax_sequence_at(s, 1))[0] == 1);
  CHECK_NEAR(vm_f32(stax_sequence_at(s, 1))[2], 102, 0);
  CHECK(stax_sequence_at(s, 2) == NULL && stax_sequence_at(s, -1) == NULL);
  CHECK_EQ_INT(stax_sequence_length(stax_sequence_at(s, 0)), -1);
  /* Tensor functions refuse a sequence. */
  stax_tensor_t* out = NULL;
  CHECK_ERROR(stax_tensor_copy(vm_alloc(), s, &out), STAX_INVALID_ARGUMENT,
              "is a sequence of 2 float32 tensors");
  int64_t dims[1] = {1};
  CHECK_ERROR(stax_tensor_reshape(vm_alloc(), s, 1, dims, false, &out), STAX_INVALID_ARGUMENT,
              "sequence");
  CHECK(out == NULL);
  /* Elements: one dtype, tensors only. */
  stax_tensor_t* c = vm_i64(3);
  stax_tensor_t* mixed[2] = {stax_sequence_at(s, 0), c};
  stax_tensor_t* bad = NULL;
  CHECK_ERROR(stax_sequence_create(vm_alloc(), STAX_DTYPE_FLOAT32, 2, mixed, &bad),
              STAX_DTYPE_MISMATCH, "element 1 is int64");
  stax_tensor_t* nested[1] = {s};
  CHECK_ERROR(stax_sequence_create(vm_alloc(), STAX_DTYPE_FLOAT32, 1, nested, &bad),
              STAX_INVALID_ARGUMENT, "element 0 is a sequence");
  CHECK_ERROR(stax_sequence_create(vm_alloc(), STAX_DTYPE_FLOAT32, -1, NULL, &bad),
              STAX_INVALID_ARGUMENT, "length -1");
  CHECK(bad == NULL);
  stax_tensor_t* empty = NULL;
  CHECK_OK(stax_sequence_create(vm_alloc(), STAX_DTYPE_INT64, 0, NULL, &empty));
  CHECK_EQ_INT(stax_sequence_length(empty), 0);
  stax_tensor_release(empty);
  stax_tensor_release(c);
  stax_tensor_release(s);
}

/* Appending shares the element block while nothing else appended after the last element; a
 * second append to the same sequence copies. Each sequence keeps its own elements. */
static void test_sequence_append_shares(void) {
  stax_tensor_t* t[4] = {rows(1, 0), rows(1, 10), rows(1, 20), rows(1, 30)};
  stax_tensor_t *s1 = NULL, *s2 = NULL, *s3 = NULL, *s4 = NULL, *s5 = NULL;
  CHECK_OK(stax_sequence_create(vm_alloc(), STAX_DTYPE_FLOAT32, 1, t, &s1));
  if (!s1) return;
  CHECK_OK(stax_sequence_append(vm_alloc(), s1, t[1], &s2)); /* s1's block is full: copies */
  CHECK_OK(stax_sequence_append(vm_alloc(), s2, t[2], &s3)); /* shares s2's block */
  CHECK_OK(stax_sequence_append(vm_alloc(), s2, t[3], &s4)); /* slot 2 is taken: copies */
  CHECK_OK(stax_sequence_append(vm_alloc(), s3, t[3], &s5)); /* shares again */
  if (!s2 || !s3 || !s4 || !s5) return;
  CHECK(s3->block == s2->block && s5->block == s2->block && s4->block != s2->block);
  CHECK_EQ_INT(stax_sequence_length(s1), 1);
  CHECK_EQ_INT(stax_sequence_length(s2), 2);
  CHECK_EQ_INT(stax_sequence_length(s5), 4);
  CHECK(stax_sequence_at(s3, 2) == t[2] && stax_sequence_at(s4, 2) == t[3]);
  CHECK(stax_sequence_at(s2, 2) == NULL);
  for (int k = 0; k < 4; k++) stax_tensor_release(t[k]);
  stax_tensor_release(s2); /* the shared block lives on in s3 and s5 */
  stax_tensor_release(s3);
  CHECK_NEAR(vm_f32(stax_sequence_at(s5, 3))[0], 30, 0);
  CHECK_NEAR(vm_f32(stax_sequence_at(s4, 1))[0], 10, 0);
  stax_tensor_release(s5);
  stax_tensor_release(s4);
  stax_tensor_release(s1);
}

/* ---- the ops ------------------------------------------------------------------------------ */

/* s = Construct(a, b); s2 = Insert(s, c, ins); e = Erase(s2, del); outputs: s2, At(s2, at),
 * Length(e), ConcatFromSequence(s2, axis 0), ConcatFromSequence(Construct(a, a), new_axis). */
static stax_program_t* build_ops_program(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* a_dims[2] = {vm_symbol(g, "A", 0, 64), vm_const(g, 3)};
  const stax_dim_t* b_dims[2] = {vm_symbol(g, "B", 0, 64), vm_const(g, 3)};
  const stax_dim_t* c_dims[2] = {vm_symbol(g, "C", 0, 64), vm_const(g, 3)};
  stax_value_id_t a = vm_input(g, "a", STAX_DTYPE_FLOAT32, 2, a_dims);
  stax_value_id_t b = vm_input(g, "b", STAX_DTYPE_FLOAT32, 2, b_dims);
  stax_value_id_t c = vm_input(g, "c", STAX_DTYPE_FLOAT32, 2, c_dims);
  stax_value_id_t ins = vm_input(g, "ins", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t at = vm_input(g, "at", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t del = vm_input(g, "del", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t ab[2] = {a, b};
  stax_value_id_t s = vm_node(g, STAX_OP_SequenceConstruct, "construct", 2, ab, 0, NULL);
  CHECK(stax_value_is_sequence(g, s));
  CHECK_EQ_INT(stax_value_elem_rank(g, s), 2);
  stax_value_id_t insert_inputs[3] = {s, c, ins};
  stax_value_id_t s2 = vm_node(g, STAX_OP_SequenceInsert, "insert", 3, insert_inputs, 0, NULL);
  stax_value_id_t erase_inputs[2] = {s2, del};
  stax_value_id_t e = vm_node(g, STAX_OP_SequenceErase, "erase", 2, erase_inputs, 0, NULL);
  stax_value_id_t at_inputs[2] = {s2, at};
  vm_output(g, s2);
  vm_output(g, vm_node(g, STAX_OP_SequenceAt, "at", 2, at_inputs, 0, NULL));
  vm_output(g, vm_unary(g, STAX_OP_SequenceLength, "length", e));
  stax_attr_t axis0 = stax_attr_int("axis", 0);
  vm_output(g, vm_node(g, STAX_OP_ConcatFromSequence, "concat", 1, &s2, 1, &axis0));
  stax_value_id_t aa[2] = {a, a};
  stax_value_id_t s3 = vm_node(g, STAX_OP_SequenceConstruct, "construct_aa", 2, aa, 0, NULL);
  stax_attr_t stack[2] = {stax_attr_int("axis", -1), stax_attr_int("new_axis", 1)};
  vm_output(g, vm_node(g, STAX_OP_ConcatFromSequence, "stack", 1, &s3, 2, stack));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  return program;
}

static void test_sequence_ops(void) {
  stax_program_t* program = build_ops_program();
  if (!program) return;
  CHECK(stax_program_output_is_sequence(program, 0));
  CHECK(!stax_program_output_is_sequence(program, 1));
  CHECK(!stax_program_input_is_sequence(program, 0));
  char* text = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
  CHECK(text && strstr(text, "seq(float32)") && strstr(text, "SequenceInsert"));
  free(text);
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    /* (insert position, at position, erase position) and the expected list order. */
    static const int64_t cases[][3] = {{2, 0, 0}, {0, -1, -3}, {-1, 1, 2}, {1, -3, -1}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
      stax_tensor_t* a = rows(2, 0);
      stax_tensor_t* b = rows(1, 100);
      stax_tensor_t* c = rows(3, 200);
      stax_tensor_t* inputs[6] = {a, b, c, vm_i64(cases[k][0]), vm_i64(cases[k][1]),
                                  vm_i64(cases[k][2])};
      stax_tensor_t* outputs[5] = {NULL};
      CHECK_OK(stax_context_run(context, 6, inputs, 5, outputs));
      /* The inserted list: [a, b] with c before position ins (ONNX: negative from the back). */
      int64_t ins = cases[k][0] < 0 ? cases[k][0] + 2 : cases[k][0];
      stax_tensor_t* want[3];
      for (int64_t i = 0, j = 0; i < 3; i++) want[i] = i == ins ? c : (j++ == 0 ? a : b);
      if (outputs[0]) {
        CHECK_EQ_INT(stax_sequence_length(outputs[0]), 3);
        for (int64_t i = 0; i < 3; i++) CHECK(same_tensor(stax_sequence_at(outputs[0], i), want[i]));
      }
      int64_t at = cases[k][1] < 0 ? cases[k][1] + 3 : cases[k][1];
      CHECK(same_tensor(outputs[1], want[at]));
      if (outputs[2]) CHECK_EQ_INT(*(const int64_t*)stax_tensor_data(outputs[2]), 2);
      if (outputs[3]) {
        CHECK_EQ_INT(stax_tensor_dims(outputs[3])[0], 6);
        int64_t row = 0;
        for (int i = 0; i < 3; i++)
          for (int64_t r = 0; r < stax_tensor_dims(want[i])[0]; r++, row++)
            for (int j = 0; j < 3; j++)
              CHECK_NEAR(vm_f32(outputs[3])[row * 3 + j], vm_f32(want[i])[r * 3 + j], 0);
      }
      if (outputs[4]) {
        int64_t dims[3] = {2, 3, 2};
        CHECK(vm_dims_equal(outputs[4], 3, dims));
        for (int64_t i = 0; i < 6; i++)
          for (int n = 0; n < 2; n++) CHECK_NEAR(vm_f32(outputs[4])[i * 2 + n], vm_f32(a)[i], 0);
      }
      for (int o = 0; o < 5; o++) stax_tensor_release(outputs[o]);
      for (int i = 0; i < 6; i++) stax_tensor_release(inputs[i]);
    }
    stax_context_destroy(context);
  }
  stax_program_release(program);
}

static void test_sequence_positions_out_of_range(void) {
  stax_program_t* program = build_ops_program();
  if (!program) return;
  stax_context_t* context = vm_context(program, STAX_DISPATCH_DEFAULT);
  /* ins 4 for a sequence of 2 (valid: -2..2); at 3 for 3 (valid: -3..2); erase -4. */
  static const struct {
    int64_t ins, at, del;
    const char* message;
  } cases[] = {
      {4, 0, 0, "node 'insert': input 2 'position' is 4, outside [-2, 2] for a sequence of length 2"},
      {-3, 0, 0, "input 2 'position' is -3, outside [-2, 2]"},
      {0, 3, 0, "node 'at': input 1 'position' is 3, outside [-3, 2] for a sequence of length 3"},
      {0, 0, -4, "node 'erase': input 1 'position' is -4, outside [-3, 2]"},
  };
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    stax_tensor_t* inputs[6] = {rows(2, 0), rows(1, 100), rows(3, 200), vm_i64(cases[k].ins),
                                vm_i64(cases[k].at), vm_i64(cases[k].del)};
    stax_tensor_t* outputs[5] = {NULL};
    CHECK_ERROR(stax_context_run(context, 6, inputs, 5, outputs), STAX_OUT_OF_RANGE,
                cases[k].message);
    for (int o = 0; o < 5; o++) CHECK(outputs[o] == NULL);
    for (int i = 0; i < 6; i++) stax_tensor_release(inputs[i]);
  }
  /* A sequence fed where a tensor is expected, a tensor where a sequence is: inputs named. */
  stax_tensor_t* a = rows(2, 0);
  stax_tensor_t* s = NULL;
  CHECK_OK(stax_sequence_create(vm_alloc(), STAX_DTYPE_FLOAT32, 1, &a, &s));
  stax_tensor_t* inputs[6] = {s, rows(1, 100), rows(3, 200), vm_i64(0), vm_i64(0), vm_i64(0)};
  stax_tensor_t* outputs[5] = {NULL};
  CHECK_ERROR(stax_context_run(context, 6, inputs, 5, outputs), STAX_INVALID_ARGUMENT,
              "input \"a\" is a sequence of 1 float32 tensors, but the model says a tensor");
  for (int i = 0; i < 6; i++) stax_tensor_release(inputs[i]);
  stax_tensor_release(a);
  stax_context_destroy(context);
  stax_program_release(program);
}

/* Errors when the graph is built: dtype mismatches and sequences where tensors belong. */
static void test_sequence_build_errors(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 64)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  stax_value_id_t i = vm_input(g, "i", STAX_DTYPE_INT64, 1, dims);
  stax_value_id_t s = seq_input(g, "s", 2);
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t insert[2] = {s, i};
  stax_node_desc_t desc = {.op = STAX_OP_SequenceInsert, .name = "bad_insert", .input_count = 2,
                           .inputs = insert, .output_count = 1};
  CHECK_ERROR(stax_graph_add_node(g, &desc, &out), STAX_DTYPE_MISMATCH,
              "SequenceInsert node 'bad_insert': input 1 'i' is int64, but sequence input 0 's' "
              "holds float32 tensors");
  stax_value_id_t xi[2] = {x, i};
  desc = (stax_node_desc_t){.op = STAX_OP_SequenceConstruct, .name = "mixed", .input_count = 2,
                            .inputs = xi, .output_count = 1};
  CHECK_ERROR(stax_graph_add_node(g, &desc, &out), STAX_DTYPE_MISMATCH, NULL);
  stax_value_id_t add[2] = {s, x};
  desc = (stax_node_desc_t){.op = STAX_OP_Add, .name = "add_seq", .input_count = 2,
                            .inputs = add, .output_count = 1};
  CHECK_ERROR(stax_graph_add_node(g, &desc, &out), STAX_INVALID_ARGUMENT,
              "Add node 'add_seq': input 0 's' is a sequence of float32 tensors; the op needs a "
              "tensor there");
  stax_value_id_t at[2] = {x, i};
  desc = (stax_node_desc_t){.op = STAX_OP_SequenceAt, .name = "at_tensor", .input_count = 2,
                            .inputs = at, .output_count = 1};
  CHECK_ERROR(stax_graph_add_node(g, &desc, &out), STAX_INVALID_ARGUMENT,
              "input 0 'x' is a float32 tensor; the op needs a sequence there");
  /* SequenceAt needs the elements' rank. */
  stax_value_id_t unknown = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_sequence_input(g, "u", STAX_DTYPE_FLOAT32, -1, NULL, &unknown));
  stax_value_id_t zero = vm_input(g, "zero", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t at_unknown[2] = {unknown, zero};
  desc = (stax_node_desc_t){.op = STAX_OP_SequenceAt, .name = "at_unknown", .input_count = 2,
                            .inputs = at_unknown, .output_count = 1};
  CHECK_ERROR(stax_graph_add_node(g, &desc, &out), STAX_UNIMPLEMENTED, "no known rank");
  stax_graph_destroy(g);
}

/* SplitToSequence without split (keepdims 0 and 1), with a chunk size and with sizes; an empty
 * input gives an empty sequence, which ConcatFromSequence refuses. */
static void test_split_to_sequence(void) {
  for (int variant = 0; variant < 4; variant++) {
    stax_graph_t* g = NULL;
    CHECK_OK(stax_graph_create(vm_alloc(), &g));
    const stax_dim_t* dims[2] = {vm_symbol(g, "N", 0, 64), vm_const(g, 3)};
    stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
    stax_value_id_t inputs[2] = {x, STAX_VALUE_NONE};
    int64_t chunk = 2, sizes[3] = {1, 0, 3};
    int64_t sizes_dims[1] = {3};
    if (variant == 2) inputs[1] = vm_initializer(g, "chunk", STAX_DTYPE_INT64, 0, NULL, &chunk);
    if (variant == 3) inputs[1] = vm_initializer(g, "sizes", STAX_DTYPE_INT64, 1, sizes_dims, sizes);
    stax_attr_t attrs[2] = {stax_attr_int("axis", -2), stax_attr_int("keepdims", variant == 0 ? 0 : 1)};
    stax_value_id_t s = vm_node(g, STAX_OP_SplitToSequence, "split", inputs[1] == STAX_VALUE_NONE ? 1 : 2,
                                inputs, 2, attrs);
    CHECK_EQ_INT(stax_value_elem_rank(g, s), variant == 0 ? 1 : 2);
    vm_output(g, s);
    stax_attr_t axis = stax_attr_int("axis", 0);
    vm_output(g, vm_node(g, STAX_OP_ConcatFromSequence, "concat", 1, &s, 1, &axis));
    stax_program_t* program = vm_compile(g);
    stax_graph_destroy(g);
    if (!program) continue;
    stax_context_t* context = vm_context(program, STAX_DISPATCH_DEFAULT);
    for (int64_t n = 0; n <= 4; n++) {
      if (variant == 3 && n != 4) continue; /* the sizes sum to 4 */
      stax_tensor_t* in = rows(n, 1);
      stax_tensor_t* outputs[2] = {NULL, NULL};
      stax_status_t status = stax_context_run(context, 1, &in, 2, outputs);
      if (n == 0) {
        CHECK_ERROR(status, STAX_INVALID_ARGUMENT, "empty sequence");
      } else {
        CHECK_OK(status);
      }
      if (outputs[0]) {
        int64_t expected_length = variant == 2 ? (n + 1) / 2 : variant == 3 ? 3 : n;
        CHECK_EQ_INT(stax_sequence_length(outputs[0]), expected_length);
        int64_t row = 0;
        for (int64_t k = 0; k < stax_sequence_length(outputs[0]); k++) {
          const stax_tensor_t* piece = stax_sequence_at(outputs[0], k);
          int64_t piece_rows = variant == 0 ? 1 : stax_tensor_dims(piece)[0];
          CHECK_EQ_INT(stax_tensor_rank(piece), variant == 0 ? 1 : 2);
          if (variant == 2) CHECK_EQ_INT(piece_rows, k + 1 < expected_length ? 2 : n - 2 * k);
          if (variant == 3) CHECK_EQ_INT(piece_rows, sizes[k]);
          for (int64_t i = 0; i < piece_rows * 3; i++)
            CHECK_NEAR(vm_f32(piece)[i], vm_f32(in)[row * 3 + i], 0);
          row += piece_rows;
        }
        CHECK_EQ_INT(row, n);
      }
      if (outputs[1]) CHECK(same_tensor(outputs[1], variant == 0 ? NULL : in) || variant == 0);
      for (int o = 0; o < 2; o++) stax_tensor_release(outputs[o]);
      stax_tensor_release(in);
    }
    stax_context_destroy(context);
    stax_program_release(program);
  }
}

/* A Loop that appends x * i to a carried sequence (SequenceEmpty first), an If whose branches
 * return sequences, and a program whose sequence elements come from planned temporaries
 * (arena slots reused later must not change them). */
static void test_sequence_loop_and_if(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[1] = {vm_const(g, 4)};
  stax_value_id_t m = vm_input(g, "m", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t flag = vm_input(g, "flag", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  stax_attr_t dtype = stax_attr_int("dtype", 1);
  stax_value_id_t empty = vm_node(g, STAX_OP_SequenceEmpty, "empty", 0, NULL, 1, &dtype);
  uint8_t yes = 1;
  stax_value_id_t always = vm_initializer(g, "always", STAX_DTYPE_BOOL, 0, NULL, &yes);
  stax_graph_t* body = NULL;
  CHECK_OK(stax_graph_create_subgraph(g, &body));
  stax_value_id_t iter = vm_input(body, "iter", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t cond_in = vm_input(body, "cond_in", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t acc = STAX_VALUE_NONE;
  /* Declared rank 1 (what the loop carries); an undeclared rank (-1) would stay unknown. */
  CHECK_OK(stax_graph_add_sequence_input(body, "acc", STAX_DTYPE_FLOAT32, 1, NULL, &acc));
  stax_value_id_t bx = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(body, x, &bx));
  stax_attr_t to_float = stax_attr_int("to", 1);
  stax_value_id_t fi = vm_node(body, STAX_OP_Cast, "cast", 1, &iter, 1, &to_float);
  stax_value_id_t scaled = vm_binary(body, STAX_OP_Mul, "scale", bx, fi);
  stax_value_id_t plus = vm_binary(body, STAX_OP_Add, "plus", scaled, bx); /* fusable chain */
  stax_value_id_t append[2] = {acc, plus};
  stax_value_id_t acc_out = vm_node(body, STAX_OP_SequenceInsert, "append", 2, append, 0, NULL);
  vm_output(body, vm_unary(body, STAX_OP_Identity, "cond_out", cond_in));
  vm_output(body, acc_out);
  stax_attr_t body_attr = stax_attr_graph("body", body);
  stax_value_id_t loop_inputs[3] = {m, always, empty};
  stax_value_id_t looped = vm_node(g, STAX_OP_Loop, "loop", 3, loop_inputs, 1, &body_attr);
  CHECK(stax_value_is_sequence(g, looped));
  CHECK_EQ_INT(stax_value_elem_rank(g, looped), 1);
  /* If: then the loop's sequence, else a one-element sequence of x. */
  stax_graph_t* then_branch = NULL, *else_branch = NULL;
  CHECK_OK(stax_graph_create_subgraph(g, &then_branch));
  CHECK_OK(stax_graph_create_subgraph(g, &else_branch));
  stax_value_id_t then_seq = STAX_VALUE_NONE, else_x = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(then_branch, looped, &then_seq));
  vm_output(then_branch, vm_unary(then_branch, STAX_OP_Identity, "then_id", then_seq));
  CHECK_OK(stax_graph_capture(else_branch, x, &else_x));
  vm_output(else_branch, vm_unary(else_branch, STAX_OP_SequenceConstruct, "else_seq", else_x));
  stax_attr_t branches[2] = {stax_attr_graph("then_branch", then_branch),
                             stax_attr_graph("else_branch", else_branch)};
  stax_value_id_t chosen = vm_node(g, STAX_OP_If, "if", 1, &flag, 2, branches);
  CHECK(stax_value_is_sequence(g, chosen));
  vm_output(g, chosen);
  /* Planned temporaries inside a sequence: t1 dies into the sequence, t2 and t3 come later. */
  stax_value_id_t t1 = vm_binary(g, STAX_OP_Add, "t1", x, x);
  stax_value_id_t kept = vm_unary(g, STAX_OP_SequenceConstruct, "keep", t1);
  stax_value_id_t t2 = vm_binary(g, STAX_OP_Mul, "t2", x, x);
  stax_value_id_t t3 = vm_binary(g, STAX_OP_Sub, "t3", t2, x);
  vm_output(g, t3);
  vm_output(g, kept);
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  for (int mode = 0; mode < 2; mode++) {
    stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
    for (int64_t trips = 0; trips <= 3; trips++) {
      for (int taken = 0; taken < 2; taken++) {
        int64_t x_dims[1] = {4};
        float xs[4] = {1, -2, 0.5f, 3};
        uint8_t flag_value = (uint8_t)taken;
        stax_tensor_t* inputs[3] = {vm_i64(trips), vm_tensor(STAX_DTYPE_BOOL, 0, NULL, &flag_value),
                                    vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs)};
        stax_tensor_t* outputs[3] = {NULL, NULL, NULL};
        CHECK_OK(stax_context_run(context, 3, inputs, 3, outputs));
        if (outputs[0]) {
          CHECK_EQ_INT(stax_sequence_length(outputs[0]), taken ? trips : 1);
          for (int64_t k = 0; k < stax_sequence_length(outputs[0]); k++)
            for (int i = 0; i < 4; i++)
              CHECK_NEAR(vm_f32(stax_sequence_at(outputs[0], k))[i],
                         taken ? xs[i] * (float)k + xs[i] : xs[i], 0);
        }
        if (outputs[1])
          for (int i = 0; i < 4; i++) CHECK_NEAR(vm_f32(outputs[1])[i], xs[i] * xs[i] - xs[i], 0);
        if (outputs[2]) {
          CHECK_EQ_INT(stax_sequence_length(outputs[2]), 1);
          for (int i = 0; i < 4; i++)
            CHECK_NEAR(vm_f32(stax_sequence_at(outputs[2], 0))[i], xs[i] + xs[i], 0);
        }
        for (int k = 0; k < 3; k++) {
          stax_tensor_release(outputs[k]);
          stax_tensor_release(inputs[k]);
        }
      }
    }
    stax_context_destroy(context);
  }
  /* Serialization keeps the sequence registers; the loaded program runs the same. */
  void* data = NULL;
  size_t size = 0;
  CHECK_OK(stax_program_serialize(program, vm_alloc(), &data, &size));
  stax_program_t* loaded = NULL;
  if (data) {
    CHECK_OK(stax_program_deserialize(vm_alloc(), data, size, NULL, &loaded));
    stax_allocator_free(vm_alloc(), data, size);
  }
  if (loaded) {
    CHECK(stax_program_output_is_sequence(loaded, 0) && stax_program_output_is_sequence(loaded, 2));
    char* before = vm_disassembly(program, STAX_DISASSEMBLE_EXTENDED);
    char* after = vm_disassembly(loaded, STAX_DISASSEMBLE_EXTENDED);
    CHECK(before && after && strcmp(before, after) == 0 && strstr(after, "seq(float32)"));
    free(before);
    free(after);
    stax_context_t* context = vm_context(loaded, STAX_DISPATCH_DEFAULT);
    int64_t x_dims[1] = {4};
    float xs[4] = {1, 2, 3, 4};
    uint8_t flag_value = 1;
    stax_tensor_t* inputs[3] = {vm_i64(2), vm_tensor(STAX_DTYPE_BOOL, 0, NULL, &flag_value),
                                vm_tensor(STAX_DTYPE_FLOAT32, 1, x_dims, xs)};
    stax_tensor_t* outputs[3] = {NULL, NULL, NULL};
    CHECK_OK(stax_context_run(context, 3, inputs, 3, outputs));
    if (outputs[0]) {
      CHECK_EQ_INT(stax_sequence_length(outputs[0]), 2);
      CHECK_NEAR(vm_f32(stax_sequence_at(outputs[0], 1))[3], 8, 0);
    }
    for (int k = 0; k < 3; k++) {
      stax_tensor_release(outputs[k]);
      stax_tensor_release(inputs[k]);
    }
    stax_context_destroy(context);
    stax_program_release(loaded);
  }
  stax_program_release(program);
}

/* The verifier keeps sequence registers out of tensor instructions. */
static void test_sequence_verifier(void) {
  stax_program_t* program = build_ops_program();
  if (!program) return;
  /* Every sequence register is rank 0 and flagged; a compute op reading a tensor register
   * flagged as a sequence is refused, and so is a sequence op that preallocates. */
  int32_t tensor_reg = -1, seq_reg = -1;
  for (int32_t r = 0; r < program->registers_count; r++) {
    if (stax_vm_register_is_sequence(program, r)) {
      if (seq_reg < 0) seq_reg = r;
    } else if (strcmp(stax_vm_program_string(program, program->registers[r].name), "a") == 0) {
      tensor_reg = r;
    }
  }
  CHECK(tensor_reg >= 0 && seq_reg >= 0);
  if (tensor_reg < 0 || seq_reg < 0) {
    stax_program_release(program);
    return;
  }
  stax_vm_descriptor_t* desc = &program->descriptors[program->registers[tensor_reg].descriptor];
  uint32_t saved = desc->flags;
  int32_t saved_rank = desc->rank;
  desc->flags |= STAX_VM_DESCRIPTOR_SEQUENCE;
  CHECK_ERROR(stax_vm_verify(program), STAX_INVALID_ARGUMENT, "sequences have rank 0");
  desc->rank = 0;
  desc->flags |= STAX_VM_DESCRIPTOR_STATIC;
  stax_status_t status = stax_vm_verify(program);
  CHECK(status != STAX_OK);
  stax_status_free(status);
  desc->flags = saved;
  desc->rank = saved_rank;
  CHECK_OK(stax_vm_verify(program));
  /* Clearing DYNAMIC_OUTPUT on the SequenceConstruct instruction. */
  for (int32_t i = 0; i < program->instructions_count; i++) {
    stax_vm_instruction_t* ins = &program->instructions[i];
    if (stax_vm_opcode_op(ins->opcode) != STAX_OP_SequenceConstruct) continue;
    ins->flags &= ~(uint32_t)STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT;
    CHECK_OK(stax_vm_emit(program));
    CHECK_ERROR(stax_vm_verify(program), STAX_INVALID_ARGUMENT, "not marked DYNAMIC_OUTPUT");
    ins->flags |= STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT;
    CHECK_OK(stax_vm_emit(program));
    /* A segment (what the JIT lowers) that takes in the sequence op. */
    stax_vm_segment_t segment = {i, 1};
    CHECK_OK(STAX_VM_APPEND(program, segments, &segment, NULL));
    CHECK_ERROR(stax_vm_verify(program), STAX_INVALID_ARGUMENT, "segments hold tensors only");
    program->segments_count--;
    break;
  }
  CHECK_OK(stax_vm_verify(program));
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_sequence_object), STAX_TEST(test_sequence_append_shares),
               STAX_TEST(test_sequence_ops),
               STAX_TEST(test_sequence_positions_out_of_range),
               STAX_TEST(test_sequence_build_errors), STAX_TEST(test_split_to_sequence),
               STAX_TEST(test_sequence_loop_and_if), STAX_TEST(test_sequence_verifier))
