/* Shape functions for MatMul (numpy matmul: 1-D promotion, broadcast batch dims), its
 * quantized forms MatMulInteger and QLinearMatMul, and Gemm (2-D, transA/transB, C broadcast
 * into (M, N)). Einsum lives in einsum.c. The contraction
 * dims are unified, so a symbolic K on one side and 64 on the other pins K to 64. */
#include "passes/shape/shape_util.h"

/* The numpy matmul result shape of a and b: a 1-D a is a row vector [1, K] and a 1-D b a
 * column vector [K, 1]; the promoted dim is dropped from the result. Batch dims (all but the
 * last two) broadcast. */
static stax_status_t matmul_dims(stax_shape_infer_t* ic, const stax_shape_operand_t* a,
                                 const stax_shape_operand_t* b, int32_t* out_rank,
                                 const stax_dim_t** dims) {
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, a, 1, STAX_MAX_RANK));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, b, 1, STAX_MAX_RANK));
  int32_t a_k_axis = a->rank - 1;
  int32_t b_k_axis = b->rank == 1 ? 0 : b->rank - 2;
  STAX_RETURN_IF_ERROR(
      stax_shape_require_equal_dims(ic, "contraction dim", a, a_k_axis, b, b_k_axis));

  stax_shape_operand_t batches[2] = {*a, *b};
  batches[0].rank = a->rank > 2 ? a->rank - 2 : 0;
  batches[1].rank = b->rank > 2 ? b->rank - 2 : 0;
  int32_t rank = 0;
  STAX_RETURN_IF_ERROR(stax_shape_broadcast(ic, 2, batches, &rank, dims));
  if (a->rank >= 2) dims[rank++] = stax_dim_resolve(ic->shape, a->dims[a->rank - 2]);
  if (b->rank >= 2) dims[rank++] = stax_dim_resolve(ic->shape, b->dims[b->rank - 1]);
  if (rank > STAX_MAX_RANK) {
    return stax_infer_error(ic, STAX_UNIMPLEMENTED, "result rank %d exceeds %d", rank,
                            STAX_MAX_RANK);
  }
  *out_rank = rank;
  return STAX_OK;
}

/* MatMul(A, B), numpy's matmul. */
stax_status_t stax_shape_matmul(stax_shape_infer_t* ic) {
  stax_shape_operand_t a, b;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &a));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &b));
  STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &a, &b));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &a, STAX_DTYPES_NUMERIC, "a number"));
  const stax_dim_t* dims[STAX_MAX_RANK + 2];
  int32_t rank = 0;
  STAX_RETURN_IF_ERROR(matmul_dims(ic, &a, &b, &rank, dims));
  return stax_shape_set_output(ic, 0, a.dtype, rank, dims);
}

/* A zero point or scale of a quantized matmul operand: the matrix's dtype (zero points) or a
 * float (scales, dtype_like NULL); one element, 1-D of the matrix's M (rows) or N (columns),
 * or the matrix's rank with a 1 in the other matrix dim. Only constant dims are checked
 * here; the kernel checks the rest. */
static stax_status_t matmul_quant_param(stax_shape_infer_t* ic, int32_t index, bool required,
                                        const stax_shape_operand_t* dtype_like,
                                        const stax_shape_operand_t* matrix, bool rows) {
  stax_shape_operand_t p;
  bool present = false;
  STAX_RETURN_IF_ERROR(stax_shape_read_quant_param(ic, index, required, dtype_like, &p, &present));
  if (!present) return STAX_OK;
  if (p.rank > 1 && p.rank != matrix->rank) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input %d '%s' has rank %d; it must have one element, be 1-D (per "
                            "%s) or have the rank of input %d '%s' (%d)",
                            index, p.name, p.rank, rows ? "row" : "column", matrix->input_index,
                            matrix->name, matrix->rank);
  }
  int64_t length = 0, want = 0;
  int32_t axis = rows ? matrix->rank - 2 : matrix->rank - 1;
  if (p.rank == 1 && matrix->rank >= 2 && stax_shape_dim_const(ic, p.dims[0], &length) &&
      length != 1 && stax_shape_dim_const(ic, matrix->dims[axis], &want) && want != length) {
    return stax_infer_error(ic, STAX_SHAPE_MISMATCH,
                            "input %d '%s' dim 0 is %lld but input %d '%s' dim %d (%s) is %lld",
                            index, p.name, (long long)length, matrix->input_index, matrix->name,
                            axis, rows ? "M, the rows" : "N, the columns", (long long)want);
  }
  return STAX_OK;
}

/* MatMulInteger(A, B, a_zero_point?, b_zero_point?) -> int32, matmul's shape. */
stax_status_t stax_shape_matmul_integer(stax_shape_infer_t* ic) {
  stax_shape_operand_t a, b;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &a));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &b));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &a, STAX_DTYPES_QUANT_8BIT, "int8 or uint8"));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &b, STAX_DTYPES_QUANT_8BIT, "int8 or uint8"));
  STAX_RETURN_IF_ERROR(matmul_quant_param(ic, 2, false, &a, &a, true));
  STAX_RETURN_IF_ERROR(matmul_quant_param(ic, 3, false, &b, &b, false));
  const stax_dim_t* dims[STAX_MAX_RANK + 2];
  int32_t rank = 0;
  STAX_RETURN_IF_ERROR(matmul_dims(ic, &a, &b, &rank, dims));
  return stax_shape_set_output(ic, 0, STAX_DTYPE_INT32, rank, dims);
}

/* QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) -> y_zp's dtype. */
stax_status_t stax_shape_qlinear_matmul(stax_shape_infer_t* ic) {
  stax_shape_operand_t a, b, y_zero;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &a));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 3, &b));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 7, &y_zero));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &a, STAX_DTYPES_QUANT_8BIT, "int8 or uint8"));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &b, STAX_DTYPES_QUANT_8BIT, "int8 or uint8"));
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &y_zero, STAX_DTYPES_QUANT_8BIT, "int8 or uint8"));
  STAX_RETURN_IF_ERROR(matmul_quant_param(ic, 1, true, NULL, &a, true));
  STAX_RETURN_IF_ERROR(matmul_quant_param(ic, 2, true, &a, &a, true));
  STAX_RETURN_IF_ERROR(matmul_quant_param(ic, 4, true, NULL, &b, false));
  STAX_RETURN_IF_ERROR(matmul_quant_param(ic, 5, true, &b, &b, false));
  STAX_RETURN_IF_ERROR(matmul_quant_param(ic, 6, true, NULL, &a, true));
  const stax_dim_t* dims[STAX_MAX_RANK + 2];
  int32_t rank = 0;
  STAX_RETURN_IF_ERROR(matmul_dims(ic, &a, &b, &rank, dims));
  return stax_shape_set_output(ic, 0, y_zero.dtype, rank, dims);
}

/* Gemm(A, B, C?) = alpha * A' * B' + beta * C with A' (M, K), B' (K, N); C broadcasts
 * unidirectionally into (M, N). */
stax_status_t stax_shape_gemm(stax_shape_infer_t* ic) {
  stax_shape_operand_t a, b, c;
  bool has_c = false;
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 0, &a));
  STAX_RETURN_IF_ERROR(stax_shape_require_input(ic, 1, &b));
  stax_shape_read_input(ic, 2, &c, &has_c);
  STAX_RETURN_IF_ERROR(stax_shape_require_dtype(ic, &a, STAX_DTYPES_NUMERIC, "a number"));
  STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &a, &b));
  if (has_c) STAX_RETURN_IF_ERROR(stax_shape_require_same_dtype(ic, &a, &c));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &a, 2, 2));
  STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &b, 2, 2));
  bool trans_a = false, trans_b = false;
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "transA", false, &trans_a));
  STAX_RETURN_IF_ERROR(stax_shape_attr_flag(ic, "transB", false, &trans_b));
  int32_t m_axis = trans_a ? 1 : 0, a_k_axis = trans_a ? 0 : 1;
  int32_t b_k_axis = trans_b ? 1 : 0, n_axis = trans_b ? 0 : 1;
  STAX_RETURN_IF_ERROR(
      stax_shape_require_equal_dims(ic, "contraction dim", &a, a_k_axis, &b, b_k_axis));
  if (has_c) {
    STAX_RETURN_IF_ERROR(stax_shape_require_rank(ic, &c, 0, 2));
    /* C's last dim lines up with N (from B), the one before with M (from A). */
    for (int32_t axis = 0; axis < c.rank; axis++) {
      bool is_n = axis == c.rank - 1;
      if (stax_shape_dim_is_one(ic, c.dims[axis])) continue;
      STAX_RETURN_IF_ERROR(stax_shape_require_equal_dims(
          ic, is_n ? "bias dim N" : "bias dim M", &c, axis, is_n ? &b : &a,
          is_n ? n_axis : m_axis));
    }
  }
  const stax_dim_t* dims[2] = {stax_dim_resolve(ic->shape, a.dims[m_axis]),
                               stax_dim_resolve(ic->shape, b.dims[n_axis])};
  return stax_shape_set_output(ic, 0, a.dtype, 2, dims);
}
