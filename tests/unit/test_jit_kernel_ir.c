/* Tests for the kernel IR (src/jit/kernel_ir*.c): building kernels, the exact text form,
 * affine index arithmetic, the builders' sticky type errors, every verifier rule (bounds,
 * scopes, vector rules, parallel placement), and out-of-memory at every allocation. */
#include <string.h>

#include "jit/kernel_ir.h"
#include "jit/text.h"
#include "test_harness.h"

static stax_allocator_t sys(void) {
  return stax_allocator_system();
}

/* out[i, j] = max(x[i, j] * 2 + b[j], 0) over [4, 10] with a parallel row loop and a vector
 * column loop. */
static stax_kir_kernel_t* build_bias_relu(stax_allocator_t allocator) {
  stax_kir_kernel_t* k = NULL;
  stax_status_t status = stax_kir_kernel_create(allocator, "bias_relu", &k);
  if (status != STAX_OK) {
    stax_status_free(status);
    return NULL;
  }
  int64_t dims[2] = {4, 10};
  int64_t bias_dims[1] = {10};
  int32_t x = stax_kir_add_buffer(k, "x", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT32, 2, dims, NULL);
  int32_t b =
      stax_kir_add_buffer(k, "b", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT32, 1, bias_dims, NULL);
  int32_t out =
      stax_kir_add_buffer(k, "out", STAX_KIR_BUFFER_OUTPUT, STAX_DTYPE_FLOAT32, 2, dims, NULL);
  stax_kir_block_t* stage = stax_kir_add_stage(k, "main");
  stax_kir_loop_t* rows = stax_kir_add_loop(k, stage, "i", 4);
  if (rows) {
    rows->parallel = true;
    rows->grain = 2;
  }
  stax_kir_loop_t* cols = stax_kir_add_loop(k, rows ? &rows->body : NULL, "j", 10);
  if (cols) {
    cols->vector_width = 8;
    cols->unroll = 2;
  }
  int32_t i = stax_kir_loop_id(k, rows), j = stax_kir_loop_id(k, cols);
  stax_kir_index_t at = stax_kir_index_constant(0);
  stax_kir_index_add_term(k, &at, i, 10);
  stax_kir_index_add_term(k, &at, j, 1);
  stax_kir_index_t bias_at = stax_kir_index_constant(0);
  stax_kir_index_add_term(k, &bias_at, j, 1);
  const stax_kir_expr_t* value =
      stax_kir_binary(k, STAX_KIR_ADD,
                      stax_kir_binary(k, STAX_KIR_MUL, stax_kir_load(k, x, &at),
                                      stax_kir_float(k, STAX_DTYPE_FLOAT32, 2.0)),
                      stax_kir_load(k, b, &bias_at));
  value = stax_kir_binary(k, STAX_KIR_MAX, value, stax_kir_float(k, STAX_DTYPE_FLOAT32, 0.0));
  stax_kir_add_store(k, cols ? &cols->body : NULL, out, &at, value);
  return k;
}

static void test_build_and_print(void) {
  stax_kir_kernel_t* k = build_bias_relu(sys());
  CHECK(k != NULL);
  if (!k) return;
  CHECK_OK(stax_kir_kernel_status(k));
  CHECK_OK(stax_kir_verify(k));
  char* text = NULL;
  CHECK_OK(stax_kir_print(k, sys(), &text));
  const char* expected =
      "kernel bias_relu\n"
      "  buffer 0 x: float32[4, 10] strides [10, 1] input\n"
      "  buffer 1 b: float32[10] strides [1] input\n"
      "  buffer 2 out: float32[4, 10] strides [10, 1] output\n"
      "  stage 0 main:\n"
      "    parallel for i in 0..4 grain 2 {\n"
      "      vector(8) for j in 0..10 unroll 2 {\n"
      "        out[10*i + j] = max(((x[10*i + j] * 2f) + b[j]), 0f)\n"
      "      }\n"
      "    }\n";
  CHECK_EQ_STR(text, expected);
  stax_jit_text_free_string(sys(), text);
  CHECK_EQ_INT(k->buffer_count, 3);
  CHECK_EQ_INT(k->loop_count, 2);
  CHECK_EQ_INT(k->buffers[2]->highest, 39);
  stax_kir_kernel_destroy(k);
}

static void test_index_terms(void) {
  stax_kir_kernel_t* k = NULL;
  CHECK_OK(stax_kir_kernel_create(sys(), "index", &k));
  stax_kir_index_t index = stax_kir_index_constant(5);
  stax_kir_index_add_term(k, &index, 0, 3);
  stax_kir_index_add_term(k, &index, 1, 4);
  stax_kir_index_add_term(k, &index, 0, -3); /* cancels: the term disappears */
  CHECK_EQ_INT(index.term_count, 1);
  CHECK_EQ_INT(stax_kir_index_coefficient(&index, 1), 4);
  CHECK_EQ_INT(stax_kir_index_coefficient(&index, 0), 0);
  stax_kir_index_t other = stax_kir_index_constant(2);
  stax_kir_index_add_term(k, &other, 1, 1);
  stax_kir_index_add_term(k, &other, 2, 7);
  stax_kir_index_add_scaled(k, &index, &other, 3);
  CHECK_EQ_INT(index.constant, 11);
  CHECK_EQ_INT(stax_kir_index_coefficient(&index, 1), 7);
  CHECK_EQ_INT(stax_kir_index_coefficient(&index, 2), 21);
  /* Running out of terms is recorded, not a crash. */
  stax_kir_index_t full = stax_kir_index_constant(0);
  for (int32_t t = 0; t <= STAX_KIR_MAX_INDEX_TERMS; t++) stax_kir_index_add_term(k, &full, t, 1);
  CHECK_ERROR(stax_kir_kernel_status(k), STAX_INTERNAL, "too many terms");
  stax_kir_kernel_destroy(k);
}

static void test_builder_type_errors(void) {
  stax_kir_kernel_t* k = NULL;
  CHECK_OK(stax_kir_kernel_create(sys(), "types", &k));
  const stax_kir_expr_t* f = stax_kir_float(k, STAX_DTYPE_FLOAT32, 1.0);
  const stax_kir_expr_t* i = stax_kir_int(k, STAX_DTYPE_INT32, 1);
  CHECK(stax_kir_binary(k, STAX_KIR_ADD, f, f) != NULL);
  CHECK(stax_kir_binary(k, STAX_KIR_LT, i, i)->dtype == STAX_DTYPE_BOOL);
  CHECK(stax_kir_cast(k, STAX_DTYPE_FLOAT32, f) == f);
  CHECK(stax_kir_binary(k, STAX_KIR_ADD, f, i) == NULL);
  /* The first error sticks; later builders return NULL. */
  CHECK_ERROR(stax_kir_kernel_status(k), STAX_INTERNAL, "float32");
  CHECK(stax_kir_unary(k, STAX_KIR_EXP, f) == NULL);
  stax_kir_kernel_destroy(k);

  CHECK_OK(stax_kir_kernel_create(sys(), "types", &k));
  CHECK(stax_kir_unary(k, STAX_KIR_EXP, stax_kir_int(k, STAX_DTYPE_INT32, 1)) == NULL);
  CHECK_ERROR(stax_kir_kernel_status(k), STAX_INTERNAL, "exp");
  stax_kir_kernel_destroy(k);

  CHECK_OK(stax_kir_kernel_create(sys(), "types", &k));
  int32_t local = stax_kir_add_local(k, "acc", STAX_DTYPE_FLOAT32);
  stax_kir_block_t* stage = stax_kir_add_stage(k, "s");
  stax_kir_add_reduce(k, stage, local, STAX_KIR_SUB, stax_kir_float(k, STAX_DTYPE_FLOAT32, 1));
  CHECK_ERROR(stax_kir_kernel_status(k), STAX_INTERNAL, "reduce");
  stax_kir_kernel_destroy(k);

  CHECK_OK(stax_kir_kernel_create(sys(), "types", &k));
  local = stax_kir_add_local(k, "acc", STAX_DTYPE_FLOAT64);
  stage = stax_kir_add_stage(k, "s");
  stax_kir_add_declare(k, stage, local, stax_kir_float(k, STAX_DTYPE_FLOAT32, 1));
  CHECK_ERROR(stax_kir_kernel_status(k), STAX_INTERNAL, "acc");
  stax_kir_kernel_destroy(k);
}

/* A one-stage kernel over a [8] input and output with a loop "i" of `extent`. */
typedef struct small_kernel_t {
  stax_kir_kernel_t* k;
  int32_t in, out;
  stax_kir_loop_t* loop;
  int32_t i;
  stax_kir_block_t* stage;
} small_kernel_t;

static small_kernel_t small_kernel(int64_t extent, int32_t width) {
  small_kernel_t s;
  memset(&s, 0, sizeof(s));
  CHECK_OK(stax_kir_kernel_create(sys(), "small", &s.k));
  int64_t dims[1] = {8};
  s.in = stax_kir_add_buffer(s.k, "in", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  s.out =
      stax_kir_add_buffer(s.k, "out", STAX_KIR_BUFFER_OUTPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  s.stage = stax_kir_add_stage(s.k, "s");
  s.loop = stax_kir_add_loop(s.k, s.stage, "i", extent);
  s.loop->vector_width = width;
  s.i = stax_kir_loop_id(s.k, s.loop);
  return s;
}

static stax_kir_index_t index_of(stax_kir_kernel_t* k, int32_t loop, int64_t coefficient,
                                 int64_t constant) {
  stax_kir_index_t index = stax_kir_index_constant(constant);
  stax_kir_index_add_term(k, &index, loop, coefficient);
  return index;
}

static void test_verify_bounds(void) {
  /* in[i + 1] for i < 8 reaches element 8. */
  small_kernel_t s = small_kernel(8, 1);
  stax_kir_index_t at = index_of(s.k, s.i, 1, 0), past = index_of(s.k, s.i, 1, 1);
  stax_kir_add_store(s.k, &s.loop->body, s.out, &at, stax_kir_load(s.k, s.in, &past));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "load out of bounds of buffer in");
  stax_kir_kernel_destroy(s.k);

  /* A negative reach. */
  s = small_kernel(8, 1);
  at = index_of(s.k, s.i, -1, 0);
  stax_kir_add_store(s.k, &s.loop->body, s.out, &at, stax_kir_float(s.k, STAX_DTYPE_FLOAT32, 0));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "reaches -7..0");
  stax_kir_kernel_destroy(s.k);

  /* A loop of extent 0 never runs: anything goes inside. */
  s = small_kernel(0, 1);
  at = index_of(s.k, s.i, 1, 100);
  stax_kir_add_store(s.k, &s.loop->body, s.out, &at, stax_kir_float(s.k, STAX_DTYPE_FLOAT32, 0));
  CHECK_OK(stax_kir_verify(s.k));
  stax_kir_kernel_destroy(s.k);

  /* Reversed view: strides -1 start at the last element, so offsets reach -7..0. */
  stax_kir_kernel_t* k = NULL;
  CHECK_OK(stax_kir_kernel_create(sys(), "reversed", &k));
  int64_t dims[1] = {8}, strides[1] = {-1};
  int32_t in =
      stax_kir_add_buffer(k, "in", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT32, 1, dims, strides);
  int32_t out =
      stax_kir_add_buffer(k, "out", STAX_KIR_BUFFER_OUTPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  stax_kir_loop_t* loop = stax_kir_add_loop(k, stax_kir_add_stage(k, "s"), "i", 8);
  int32_t i = stax_kir_loop_id(k, loop);
  stax_kir_index_t forward = index_of(k, i, 1, 0), backward = index_of(k, i, -1, 0);
  stax_kir_add_store(k, &loop->body, out, &forward, stax_kir_load(k, in, &backward));
  CHECK_OK(stax_kir_verify(k));
  stax_kir_kernel_destroy(k);
}

/* A rows-generic kernel over buffers of R rows of 4: out[4*r + c] = in[4*r + c] for r < rows
 * and c < 4 (or another row loop, another in index). */
typedef struct rows_kernel_t {
  stax_kir_kernel_t* k;
  int32_t in, out;
  stax_kir_loop_t *r, *c;
} rows_kernel_t;

static rows_kernel_t rows_kernel(int64_t rows_min) {
  rows_kernel_t s = {0};
  CHECK_OK(stax_kir_kernel_create(sys(), "rows", &s.k));
  stax_kir_set_rows_generic(s.k, 9, rows_min);
  int64_t dims[2] = {9, 4};
  s.in = stax_kir_add_buffer(s.k, "in", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT32, 2, dims, NULL);
  s.out = stax_kir_add_buffer(s.k, "out", STAX_KIR_BUFFER_OUTPUT, STAX_DTYPE_FLOAT32, 2, dims, NULL);
  s.k->buffers[s.in]->rows = s.k->buffers[s.out]->rows = true;
  s.r = stax_kir_add_loop(s.k, stax_kir_add_stage(s.k, "s"), "r", 9);
  s.r->extent_param = 0;
  s.c = stax_kir_add_loop(s.k, &s.r->body, "c", 4);
  return s;
}

static stax_kir_index_t row_index(rows_kernel_t* s, int64_t row_coefficient, int64_t constant) {
  stax_kir_index_t index = stax_kir_index_constant(constant);
  stax_kir_index_add_term(s->k, &index, stax_kir_loop_id(s->k, s->r), row_coefficient);
  stax_kir_index_add_term(s->k, &index, stax_kir_loop_id(s->k, s->c), 1);
  return index;
}

/* The verifier proves a rows-generic kernel for every row count, or names the access it
 * cannot: the right one passes; one reading two rows per row (its margin shrinks with R),
 * one reaching past the last row at every R, and a tile placed at R - 3 (out of bounds below
 * three rows) fail; with rows_min 3 the tile is proven; a parameter period past the limit is
 * refused; the text names no example row count. */
static void test_verify_rows_generic(void) {
  rows_kernel_t s = rows_kernel(0);
  stax_kir_index_t at = row_index(&s, 4, 0);
  stax_kir_add_store(s.k, &s.c->body, s.out, &at, stax_kir_load(s.k, s.in, &at));
  CHECK_OK(stax_kir_verify(s.k));
  char* text = NULL;
  CHECK_OK(stax_kir_print(s.k, sys(), &text));
  CHECK(text && strstr(text, "rows-generic: rows in 0..") != NULL);
  CHECK(text && strstr(text, "for r in 0..rows") != NULL && strstr(text, "[rows, 4]") != NULL);
  CHECK(text && strstr(text, "[9") == NULL && strstr(text, "0..9") == NULL);
  stax_jit_text_free_string(sys(), text);
  stax_kir_kernel_destroy(s.k);

  /* in[8*r + c]: the margin shrinks by 4 per row. */
  s = rows_kernel(0);
  at = row_index(&s, 4, 0);
  stax_kir_index_t twice = row_index(&s, 8, 0);
  stax_kir_add_store(s.k, &s.c->body, s.out, &at, stax_kir_load(s.k, s.in, &twice));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "load");
  stax_kir_kernel_destroy(s.k);

  /* in[4*r + c + 4]: one row past the end at every R. */
  s = rows_kernel(0);
  at = row_index(&s, 4, 0);
  stax_kir_index_t next = row_index(&s, 4, 4);
  stax_kir_add_store(s.k, &s.c->body, s.out, &at, stax_kir_load(s.k, s.in, &next));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "out of bounds of buffer in");
  stax_kir_kernel_destroy(s.k);

  /* A three-row tile at rows R - 3 .. R - 1 (as the matmul's last tile): out of bounds
   * below three rows, proven from three on. */
  for (int64_t rows_min = 0; rows_min <= 3; rows_min += 3) {
    stax_kir_kernel_t* k = NULL;
    CHECK_OK(stax_kir_kernel_create(sys(), "tile", &k));
    stax_kir_set_rows_generic(k, 9, rows_min);
    int32_t last = stax_kir_add_param(k, "last_row", 1, 0, 1, 0, 0, 0, -3);
    int64_t dims[2] = {9, 4};
    int32_t out = stax_kir_add_buffer(k, "out", STAX_KIR_BUFFER_OUTPUT, STAX_DTYPE_FLOAT32, 2,
                                      dims, NULL);
    k->buffers[out]->rows = true;
    stax_kir_loop_t* t = stax_kir_add_loop(k, stax_kir_add_stage(k, "s"), "t", 3);
    stax_kir_index_t index = stax_kir_index_constant(0);
    stax_kir_index_add_term(k, &index, stax_kir_loop_id(k, t), 4);
    stax_kir_index_add_param(k, &index, last, 4);
    stax_kir_add_store(k, &t->body, out, &index, stax_kir_float(k, STAX_DTYPE_FLOAT32, 0));
    if (rows_min == 0)
      CHECK_ERROR(stax_kir_verify(k), STAX_INTERNAL, "at rows");
    else
      CHECK_OK(stax_kir_verify(k));
    stax_kir_kernel_destroy(k);
  }

  /* A stage run condition past the proof's walks (rows_min + 2 periods) is refused; one
   * inside is honoured: a stage reading one row past the end runs only below 2 rows, where
   * it is out of bounds too, so it fails; the same stage is fine if it never runs there. */
  s = rows_kernel(0);
  at = row_index(&s, 4, 0);
  stax_kir_add_store(s.k, &s.c->body, s.out, &at, stax_kir_load(s.k, s.in, &at));
  s.k->stages[0]->run_max_rows = 1000;
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "which the proof cannot cover");
  stax_kir_kernel_destroy(s.k);
  for (int64_t max_rows = 0; max_rows <= 1; max_rows++) {
    s = rows_kernel(0);
    at = row_index(&s, 4, 0);
    stax_kir_index_t past = row_index(&s, 4, 4);
    stax_kir_add_store(s.k, &s.c->body, s.out, &at, stax_kir_load(s.k, s.in, &past));
    s.k->stages[0]->run_max_rows = max_rows; /* R = 0: no row runs; R = 1: row 0 reads row 1 */
    if (max_rows == 0)
      CHECK_OK(stax_kir_verify(s.k));
    else
      CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "out of bounds of buffer in");
    stax_kir_kernel_destroy(s.k);
  }

  /* A third term: the MR = 6 matmul's overlap count, 1 exactly when R % 6 is 1, 2, 3 or 5,
   * evaluated, printed and refused when malformed or added twice. */
  s = rows_kernel(0);
  int32_t overlap = stax_kir_add_param(s.k, "overlap", 1, 1, 2, -1, 0, 3, 0);
  CHECK(stax_kir_param_add_term(s.k, overlap, -1, 2, 6));
  for (int64_t rows = 0; rows < 60; rows++) {
    int64_t r = rows % 6;
    CHECK_EQ_INT(stax_kir_param_value(&s.k->params[overlap], rows),
                 r == 1 || r == 2 || r == 3 || r == 5);
  }
  text = NULL;
  CHECK_OK(stax_kir_print(s.k, sys(), &text));
  CHECK(text && strstr(text, "1*floor((rows + 1) / 2) + -1*floor((rows + 0) / 3) + "
                             "-1*floor((rows + 2) / 6) + 0") != NULL);
  stax_jit_text_free_string(sys(), text);
  CHECK(!stax_kir_param_add_term(s.k, overlap, 1, 0, 2)); /* a fourth term: refused */
  CHECK_ERROR(stax_kir_kernel_status(s.k), STAX_INTERNAL, "third parameter term");
  stax_kir_kernel_destroy(s.k);
  s = rows_kernel(0);
  overlap = stax_kir_add_param(s.k, "overlap", 1, 1, 2, 0, 0, 0, 0);
  CHECK(!stax_kir_param_add_term(s.k, overlap, 1, 0, 0)); /* division by zero */
  CHECK_ERROR(stax_kir_kernel_status(s.k), STAX_INTERNAL, "third parameter term");
  stax_kir_kernel_destroy(s.k);

  /* Divisors whose lcm passes the proof's limit. */
  s = rows_kernel(0);
  stax_kir_add_param(s.k, "a", 1, 0, 997, 1, 0, 991, 0);
  at = row_index(&s, 4, 0);
  stax_kir_add_store(s.k, &s.c->body, s.out, &at, stax_kir_load(s.k, s.in, &at));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "period");
  stax_kir_kernel_destroy(s.k);
}

static void test_verify_scopes(void) {
  /* Store into an input. */
  small_kernel_t s = small_kernel(8, 1);
  stax_kir_index_t at = index_of(s.k, s.i, 1, 0);
  stax_kir_add_store(s.k, &s.loop->body, s.in, &at, stax_kir_float(s.k, STAX_DTYPE_FLOAT32, 0));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "store into input");
  stax_kir_kernel_destroy(s.k);

  /* Counter read outside its loop. */
  s = small_kernel(8, 1);
  at = index_of(s.k, s.i, 1, 0);
  stax_kir_add_store(s.k, s.stage, s.out, &at, stax_kir_float(s.k, STAX_DTYPE_FLOAT32, 0));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "does not enclose");
  stax_kir_kernel_destroy(s.k);

  /* Local used outside its block, and declared twice. */
  s = small_kernel(8, 1);
  int32_t local = stax_kir_add_local(s.k, "t", STAX_DTYPE_FLOAT32);
  stax_kir_add_declare(s.k, &s.loop->body, local, stax_kir_float(s.k, STAX_DTYPE_FLOAT32, 1));
  stax_kir_index_t zero = stax_kir_index_constant(0);
  stax_kir_add_store(s.k, s.stage, s.out, &zero, stax_kir_local(s.k, local));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "outside its scope");
  stax_kir_kernel_destroy(s.k);

  s = small_kernel(8, 1);
  local = stax_kir_add_local(s.k, "t", STAX_DTYPE_FLOAT32);
  stax_kir_add_declare(s.k, &s.loop->body, local, stax_kir_float(s.k, STAX_DTYPE_FLOAT32, 1));
  stax_kir_add_declare(s.k, &s.loop->body, local, stax_kir_float(s.k, STAX_DTYPE_FLOAT32, 1));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "declared twice");
  stax_kir_kernel_destroy(s.k);

  /* Parallel loops only as a stage's single top-level statement. */
  s = small_kernel(8, 1);
  stax_kir_loop_t* inner = stax_kir_add_loop(s.k, &s.loop->body, "j", 2);
  inner->parallel = true;
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "parallel loop 'j'");
  stax_kir_kernel_destroy(s.k);
}

static void test_verify_vector_rules(void) {
  /* Nested vector loops. */
  small_kernel_t s = small_kernel(8, 4);
  stax_kir_loop_t* inner = stax_kir_add_loop(s.k, &s.loop->body, "j", 2);
  inner->vector_width = 2;
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "nests inside another vector loop");
  stax_kir_kernel_destroy(s.k);

  /* A store that does not move with the lanes. */
  s = small_kernel(8, 4);
  stax_kir_index_t zero = stax_kir_index_constant(0);
  stax_kir_add_store(s.k, &s.loop->body, s.out, &zero, stax_kir_float(s.k, STAX_DTYPE_FLOAT32, 0));
  CHECK_ERROR(stax_kir_verify(s.k), STAX_INTERNAL, "does not move with the vector lanes");
  stax_kir_kernel_destroy(s.k);

  /* An outer local may be reduced inside a vector loop, not assigned or read there. */
  for (int variant = 0; variant < 3; variant++) {
    stax_kir_kernel_t* k = NULL;
    CHECK_OK(stax_kir_kernel_create(sys(), "reduce", &k));
    int64_t dims[1] = {8};
    int32_t in =
        stax_kir_add_buffer(k, "in", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
    int32_t out =
        stax_kir_add_buffer(k, "out", STAX_KIR_BUFFER_OUTPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
    stax_kir_block_t* stage = stax_kir_add_stage(k, "s");
    int32_t sum = stax_kir_add_local(k, "sum", STAX_DTYPE_FLOAT32);
    stax_kir_add_declare(k, stage, sum, stax_kir_float(k, STAX_DTYPE_FLOAT32, 0));
    stax_kir_loop_t* loop = stax_kir_add_loop(k, stage, "i", 8);
    loop->vector_width = 4;
    int32_t i = stax_kir_loop_id(k, loop);
    stax_kir_index_t at = index_of(k, i, 1, 0);
    stax_kir_add_reduce(k, &loop->body, sum, STAX_KIR_ADD, stax_kir_load(k, in, &at));
    if (variant == 1) stax_kir_add_assign(k, &loop->body, sum, stax_kir_load(k, in, &at));
    if (variant == 2) stax_kir_add_store(k, &loop->body, out, &at, stax_kir_local(k, sum));
    stax_kir_index_t zero_index = stax_kir_index_constant(0);
    stax_kir_add_store(k, stage, out, &zero_index, stax_kir_local(k, sum));
    if (variant == 0) CHECK_OK(stax_kir_verify(k));
    if (variant == 1) CHECK_ERROR(stax_kir_verify(k), STAX_INTERNAL, "only REDUCE may");
    if (variant == 2)
      CHECK_ERROR(stax_kir_verify(k), STAX_INTERNAL, "inside the vector loop that reduces it");
    stax_kir_kernel_destroy(k);
  }
}

/* Every allocation of building, verifying and printing may fail: each failure is a status and
 * nothing leaks. */
static void test_out_of_memory(void) {
  for (uint64_t fail_at = 1; fail_at < 200; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, sys(), fail_at);
    stax_allocator_t allocator = stax_failing_allocator(&state);
    stax_kir_kernel_t* k = build_bias_relu(allocator);
    stax_status_t status =
        k ? stax_kir_kernel_status(k) : stax_status_make(STAX_OUT_OF_MEMORY, "create");
    if (status == STAX_OK) status = stax_kir_verify(k);
    char* text = NULL;
    if (status == STAX_OK) status = stax_kir_print(k, allocator, &text);
    if (text) stax_jit_text_free_string(allocator, text);
    stax_kir_kernel_destroy(k);
    CHECK_EQ_INT(state.live_allocations, 0);
    bool failed = status != STAX_OK;
    if (failed) CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
    stax_status_free(status);
    if (!failed && state.failed_count == 0) break; /* past the last allocation */
  }
}

STAX_TEST_MAIN(STAX_TEST(test_build_and_print), STAX_TEST(test_index_terms),
               STAX_TEST(test_verify_rows_generic),
               STAX_TEST(test_builder_type_errors), STAX_TEST(test_verify_bounds),
               STAX_TEST(test_verify_scopes), STAX_TEST(test_verify_vector_rules),
               STAX_TEST(test_out_of_memory))
