/* Shape inference for MatMul (1-D promotion, batch broadcasting, K unification), Gemm
 * (transA/transB, bias broadcasting) and Einsum (explicit, implicit, ellipsis, diagonal). */
#include "shape_test_util.h"

#define F32 STAX_DTYPE_FLOAT32
#define I64 STAX_DTYPE_INT64

static stax_status_t matmul(stax_graph_t* g, const char* name, stax_value_id_t a,
                            stax_value_id_t b, stax_value_id_t* out) {
  stax_value_id_t in[2] = {a, b};
  return shape_test_node(g, STAX_OP_MatMul, name, 2, in, 0, NULL, 1, out);
}

static void test_matmul_shapes(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t x = shape_test_input(g, "x", F32, "B,S,64");
  stax_value_id_t w = shape_test_input(g, "w", F32, "64,N");
  stax_value_id_t vector = shape_test_input(g, "vector", F32, "64");
  stax_value_id_t matrix = shape_test_input(g, "matrix", F32, "M,64");
  stax_value_id_t batched_a = shape_test_input(g, "batched_a", F32, "B,1,M,64");
  stax_value_id_t batched_b = shape_test_input(g, "batched_b", F32, "H,64,N");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(matmul(g, "mm", x, w, &out));
  CHECK_VALUE(g, out, F32, "[B, S, N]");
  CHECK_OK(matmul(g, "vm", vector, w, &out));
  CHECK_VALUE(g, out, F32, "[N]");
  CHECK_OK(matmul(g, "mv", matrix, vector, &out));
  CHECK_VALUE(g, out, F32, "[M]");
  CHECK_OK(matmul(g, "vv", vector, vector, &out));
  CHECK_VALUE(g, out, F32, "[]");
  CHECK_OK(matmul(g, "bv", x, vector, &out));
  CHECK_VALUE(g, out, F32, "[B, S]");
  CHECK_OK(matmul(g, "batched", batched_a, batched_b, &out));
  CHECK_VALUE(g, out, F32, "[B, H, M, N]");
  stax_graph_destroy(g);
}

static void test_matmul_unifies_k(void) {
  stax_graph_t* g = shape_test_graph();
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  stax_value_id_t a = shape_test_input(g, "a", F32, "M,K");
  stax_value_id_t b = shape_test_input(g, "b", F32, "64,N");
  stax_value_id_t c = shape_test_input(g, "c", F32, "32,N");
  stax_value_id_t out = STAX_VALUE_NONE;
  CHECK_OK(matmul(g, "mm", a, b, &out));
  CHECK_VALUE(g, out, F32, "[M, N]");
  CHECK(stax_dim_known_equal(ctx, shape_test_dim(g, "K"), stax_dim_const(ctx, 64)));
  CHECK_ERROR(matmul(g, "mm2", a, c, NULL), STAX_SHAPE_MISMATCH,
              "MatMul node 'mm2': contraction dim mismatch: input 0 'a' dim 1 is 64 but input 1 "
              "'c' dim 0 is 32");
  stax_graph_destroy(g);
}

static void test_matmul_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t a = shape_test_input(g, "a", F32, "2,3");
  stax_value_id_t b = shape_test_input(g, "b", F32, "4,5");
  stax_value_id_t batch2 = shape_test_input(g, "batch2", F32, "2,M,8");
  stax_value_id_t batch3 = shape_test_input(g, "batch3", F32, "3,8,N");
  stax_value_id_t scalar = shape_test_input(g, "scalar", F32, "");
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "3,5");
  stax_value_id_t flags = shape_test_input(g, "flags", STAX_DTYPE_BOOL, "2,2");
  CHECK_ERROR(matmul(g, "e1", a, b, NULL), STAX_SHAPE_MISMATCH,
              "contraction dim mismatch: input 0 'a' dim 1 is 3 but input 1 'b' dim 0 is 4");
  CHECK_ERROR(matmul(g, "e2", batch2, batch3, NULL), STAX_SHAPE_MISMATCH,
              "cannot broadcast input 0 'batch2' dim 0 (2) with input 1 'batch3' dim 0 (3)");
  CHECK_ERROR(matmul(g, "e3", scalar, a, NULL), STAX_SHAPE_MISMATCH,
              "input 0 'scalar' has rank 0, expected 1 to 8");
  CHECK_ERROR(matmul(g, "e4", a, ints, NULL), STAX_DTYPE_MISMATCH,
              "input 0 'a' has dtype float32 but input 1 'ints' has dtype int64");
  CHECK_ERROR(matmul(g, "e5", flags, flags, NULL), STAX_DTYPE_MISMATCH,
              "has dtype bool, expected a number");
  stax_graph_destroy(g);
}

static stax_status_t gemm(stax_graph_t* g, const char* name, int32_t input_count,
                          const stax_value_id_t* in, bool trans_a, bool trans_b,
                          stax_value_id_t* out) {
  stax_attr_t attrs[2] = {stax_attr_int("transA", trans_a), stax_attr_int("transB", trans_b)};
  return shape_test_node(g, STAX_OP_Gemm, name, input_count, in, 2, attrs, 1, out);
}

static void test_gemm(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t a = shape_test_input(g, "a", F32, "M,K");
  stax_value_id_t a_t = shape_test_input(g, "a_t", F32, "K,M");
  stax_value_id_t b = shape_test_input(g, "b", F32, "K,N");
  stax_value_id_t b_t = shape_test_input(g, "b_t", F32, "N,K");
  stax_value_id_t bias_n = shape_test_input(g, "bias_n", F32, "N");
  stax_value_id_t bias_m1 = shape_test_input(g, "bias_m1", F32, "M,1");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t plain[3] = {a, b, bias_n};
  CHECK_OK(gemm(g, "g1", 3, plain, false, false, &out));
  CHECK_VALUE(g, out, F32, "[M, N]");
  stax_value_id_t transposed[3] = {a_t, b_t, bias_m1};
  CHECK_OK(gemm(g, "g2", 3, transposed, true, true, &out));
  CHECK_VALUE(g, out, F32, "[M, N]");
  CHECK_OK(gemm(g, "g3", 2, plain, false, false, &out));
  CHECK_VALUE(g, out, F32, "[M, N]");
  stax_graph_destroy(g);
}

static void test_gemm_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t a = shape_test_input(g, "a", F32, "2,3");
  stax_value_id_t b = shape_test_input(g, "b", F32, "3,4");
  stax_value_id_t bias3 = shape_test_input(g, "bias3", F32, "3");
  stax_value_id_t bias_rank3 = shape_test_input(g, "bias_rank3", F32, "1,2,4");
  stax_value_id_t cube = shape_test_input(g, "cube", F32, "2,3,4");
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "4");
  stax_value_id_t bad_bias[3] = {a, b, bias3};
  CHECK_ERROR(gemm(g, "e1", 3, bad_bias, false, false, NULL), STAX_SHAPE_MISMATCH,
              "bias dim N mismatch: input 2 'bias3' dim 0 is 3 but input 1 'b' dim 1 is 4");
  stax_value_id_t ab[2] = {a, b};
  CHECK_ERROR(gemm(g, "e2", 2, ab, true, false, NULL), STAX_SHAPE_MISMATCH,
              "contraction dim mismatch: input 0 'a' dim 0 is 2 but input 1 'b' dim 0 is 3");
  stax_value_id_t rank3_bias[3] = {a, b, bias_rank3};
  CHECK_ERROR(gemm(g, "e3", 3, rank3_bias, false, false, NULL), STAX_SHAPE_MISMATCH,
              "input 2 'bias_rank3' has rank 3, expected 0 to 2");
  stax_value_id_t cube_in[2] = {cube, b};
  CHECK_ERROR(gemm(g, "e4", 2, cube_in, false, false, NULL), STAX_SHAPE_MISMATCH,
              "input 0 'cube' has rank 3, expected 2");
  stax_value_id_t int_bias[3] = {a, b, ints};
  CHECK_ERROR(gemm(g, "e5", 3, int_bias, false, false, NULL), STAX_DTYPE_MISMATCH,
              "input 2 'ints' has dtype int64");
  stax_attr_t bad_flag = stax_attr_int("transA", 2);
  CHECK_ERROR(shape_test_node(g, STAX_OP_Gemm, "e6", 2, ab, 1, &bad_flag, 1, NULL),
              STAX_INVALID_ARGUMENT, "'transA' must be 0 or 1, got 2");
  stax_graph_destroy(g);
}

static stax_status_t einsum(stax_graph_t* g, const char* name, const char* equation,
                            int32_t input_count, const stax_value_id_t* in,
                            stax_value_id_t* out) {
  stax_attr_t attr = stax_attr_string("equation", equation);
  return shape_test_node(g, STAX_OP_Einsum, name, input_count, in, 1, &attr, 1, out);
}

static void test_einsum(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t a = shape_test_input(g, "a", F32, "M,K");
  stax_value_id_t b = shape_test_input(g, "b", F32, "K,N");
  stax_value_id_t batch_a = shape_test_input(g, "batch_a", F32, "B,H,M,K");
  stax_value_id_t batch_b = shape_test_input(g, "batch_b", F32, "H,K,N");
  stax_value_id_t square = shape_test_input(g, "square", F32, "D,D");
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_value_id_t ab[2] = {a, b};
  CHECK_OK(einsum(g, "mm", "ij,jk->ik", 2, ab, &out));
  CHECK_VALUE(g, out, F32, "[M, N]");
  CHECK_OK(einsum(g, "spaces", " ij , jk -> ki ", 2, ab, &out));
  CHECK_VALUE(g, out, F32, "[N, M]");
  CHECK_OK(einsum(g, "implicit", "ij,jk", 2, ab, &out));
  CHECK_VALUE(g, out, F32, "[M, N]");
  /* implicit output sorts labels: "ba" gives a then b, a transpose */
  CHECK_OK(einsum(g, "implicit_t", "ba", 1, &a, &out));
  CHECK_VALUE(g, out, F32, "[K, M]");
  CHECK_OK(einsum(g, "sum_all", "ij->", 1, &a, &out));
  CHECK_VALUE(g, out, F32, "[]");
  CHECK_OK(einsum(g, "diagonal", "ii->i", 1, &square, &out));
  CHECK_VALUE(g, out, F32, "[D]");
  stax_value_id_t batched[2] = {batch_a, batch_b};
  CHECK_OK(einsum(g, "ellipsis", "...ij,...jk->...ik", 2, batched, &out));
  CHECK_VALUE(g, out, F32, "[B, H, M, N]");
  CHECK_OK(einsum(g, "ellipsis_implicit", "...ij,...jk", 2, batched, &out));
  CHECK_VALUE(g, out, F32, "[B, H, M, N]");
  CHECK_OK(einsum(g, "ellipsis_middle", "b...j->j...b", 1, &batch_a, &out));
  CHECK_VALUE(g, out, F32, "[K, H, M, B]");
  stax_graph_destroy(g);
}

static void test_einsum_errors(void) {
  stax_graph_t* g = shape_test_graph();
  stax_value_id_t a = shape_test_input(g, "a", F32, "2,3");
  stax_value_id_t b = shape_test_input(g, "b", F32, "4,5");
  stax_value_id_t batched = shape_test_input(g, "batched", F32, "7,2,3");
  stax_value_id_t ints = shape_test_input(g, "ints", I64, "3,5");
  stax_value_id_t ab[2] = {a, b};
  CHECK_ERROR(einsum(g, "e1", "ij,jk->ik", 2, ab, NULL), STAX_SHAPE_MISMATCH,
              "Einsum node 'e1': label 'j' mismatch: input 0 'a' dim 1 is 3 but input 1 'b' dim "
              "0 is 4");
  CHECK_ERROR(einsum(g, "e2", "ij->ij", 2, ab, NULL), STAX_INVALID_ARGUMENT,
              "has 1 input terms but the node has 2 inputs");
  CHECK_ERROR(einsum(g, "e3", "ijk->i", 1, &a, NULL), STAX_SHAPE_MISMATCH,
              "term 0 of equation \"ijk->i\" has 3 labels but input 0 'a' has rank 2");
  CHECK_ERROR(einsum(g, "e4", "i1->i", 1, &a, NULL), STAX_INVALID_ARGUMENT,
              "unexpected character '1' at position 1");
  CHECK_ERROR(einsum(g, "e5", "ij->iz", 1, &a, NULL), STAX_INVALID_ARGUMENT,
              "output label 'z' does not appear in any input");
  CHECK_ERROR(einsum(g, "e6", "ij->ii", 1, &a, NULL), STAX_INVALID_ARGUMENT,
              "output label 'i' appears twice");
  CHECK_ERROR(einsum(g, "e7", "...ij->ij", 1, &batched, NULL), STAX_INVALID_ARGUMENT,
              "covers 1 dims but the output has no \"...\"");
  CHECK_ERROR(einsum(g, "e8", "i.j->ij", 1, &a, NULL), STAX_INVALID_ARGUMENT,
              "'.' that is not part of \"...\"");
  CHECK_ERROR(einsum(g, "e9", "ij->i->j", 1, &a, NULL), STAX_INVALID_ARGUMENT, "second '->'");
  CHECK_ERROR(einsum(g, "e10", "...i...j->ij", 1, &a, NULL), STAX_INVALID_ARGUMENT,
              "second \"...\" in a term");
  CHECK_ERROR(einsum(g, "e11", "ij->j,i", 1, &a, NULL), STAX_INVALID_ARGUMENT,
              "',' after '->'");
  stax_value_id_t mixed[2] = {a, ints};
  CHECK_ERROR(einsum(g, "e12", "ij,jk->ik", 2, mixed, NULL), STAX_DTYPE_MISMATCH,
              "input 1 'ints' has dtype int64");
  CHECK_ERROR(shape_test_node(g, STAX_OP_Einsum, "e13", 1, &a, 0, NULL, 1, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'equation' is required");
  /* limits */
  stax_value_id_t rank8 = shape_test_input(g, "rank8", F32, "1,1,1,1,1,1,1,1");
  stax_value_id_t eights[2] = {rank8, rank8};
  CHECK_ERROR(einsum(g, "e14", "abcdefgh,ijklmnop", 2, eights, NULL), STAX_UNIMPLEMENTED,
              "the result would have rank 16; at most 8 is supported");
  CHECK_ERROR(einsum(g, "e15", "abcdefgh,ijklmnop->abcdefghi", 2, eights, NULL),
              STAX_UNIMPLEMENTED, "rank 9");
  char long_term[80];
  memset(long_term, 'a', 70);
  long_term[70] = '\0';
  CHECK_ERROR(einsum(g, "e16", long_term, 1, &a, NULL), STAX_INVALID_ARGUMENT,
              "term too long at position 64");
  char many_terms[160];
  for (int k = 0; k < 70; k++) {
    many_terms[2 * k] = 'a';
    many_terms[2 * k + 1] = ',';
  }
  many_terms[139] = '\0';
  CHECK_ERROR(einsum(g, "e17", many_terms, 1, &a, NULL), STAX_INVALID_ARGUMENT,
              "too many terms");
  CHECK_EQ_INT(stax_graph_node_count(g), 0);
  stax_graph_destroy(g);
}

/* A later constant conflict rejects the node before any label is unified. */
static void test_einsum_rejection_records_nothing(void) {
  stax_graph_t* g = shape_test_graph();
  stax_shape_ctx_t* ctx = stax_graph_shape_ctx(g);
  stax_value_id_t a = shape_test_input(g, "a", F32, "S,3");
  stax_value_id_t b = shape_test_input(g, "b", F32, "4,5");
  stax_value_id_t ab[2] = {a, b};
  CHECK_ERROR(einsum(g, "e1", "ij,ij->ij", 2, ab, NULL), STAX_SHAPE_MISMATCH,
              "label 'j' mismatch: input 0 'a' dim 1 is 3 but input 1 'b' dim 1 is 5");
  CHECK(!stax_dim_known_equal(ctx, shape_test_dim(g, "S"), stax_dim_const(ctx, 4)));
  stax_graph_destroy(g);
}

STAX_TEST_MAIN(STAX_TEST(test_einsum_rejection_records_nothing), STAX_TEST(test_matmul_shapes),
               STAX_TEST(test_matmul_unifies_k), STAX_TEST(test_matmul_errors),
               STAX_TEST(test_gemm), STAX_TEST(test_gemm_errors), STAX_TEST(test_einsum),
               STAX_TEST(test_einsum_errors))
