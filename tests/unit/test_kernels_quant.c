/* Tests for the quantization kernels (src/kernels/quantize.c, matmul_integer.c,
 * conv_integer.c) and the integer GEMM core (gemm_int8.c): every micro-kernel variant the CPU
 * has against a reference computed here (edge tiles, odd K, strided and transposed operands,
 * zero points, int32 wrap-around, the thread pool), QuantizeLinear / DequantizeLinear values
 * on views, the kernels' error statuses, and the allocation-failure sweep. */
#include <math.h>

#include "kernel_test_util.h"
#include "kernels/quant.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static int32_t random_int(int32_t low, int32_t high) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return low + (int32_t)((rng_state >> 33) % (uint64_t)(high - low + 1));
}

static int32_t element(stax_dtype_t dtype, const void* data, int64_t i) {
  switch (dtype) {
    case STAX_DTYPE_INT8: return ((const int8_t*)data)[i];
    case STAX_DTYPE_UINT8: return ((const uint8_t*)data)[i];
    default: return ((const int16_t*)data)[i];
  }
}

static void test_gemm_int_variants(void) {
  static const char* const variants[] = {"generic", "avx2", "avxvnni", "avx512vnni"};
  static const int64_t sizes[][3] = {{1, 1, 1},   {3, 17, 5},  {4, 16, 2},  {37, 61, 29},
                                     {9, 33, 130}, {5, 1, 7},  {2, 40, 1}};
  static const stax_dtype_t a_types[] = {STAX_DTYPE_INT8, STAX_DTYPE_UINT8};
  static const stax_dtype_t b_types[] = {STAX_DTYPE_INT8, STAX_DTYPE_UINT8, STAX_DTYPE_INT16};
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 3, &pool));
  int ran = 0;
  for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
    if (!stax_gemm_int_set_isa(variants[v])) continue;
    ran++;
    CHECK_EQ_STR(stax_gemm_int_isa_name(), variants[v]);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
      int64_t m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
      for (size_t ta = 0; ta < 2; ta++) {
        for (size_t tb = 0; tb < 3; tb++) {
          stax_dtype_t at = a_types[ta], bt = b_types[tb];
          /* A strided (every other column), B transposed: col stride k. */
          static uint8_t a_bytes[2 * 37 * 130], b_bytes[2 * 130 * 61 * 2];
          int32_t a_zero[37], b_zero[61], c[37 * 61];
          int64_t a_row = 2 * k, a_col = 2, b_row = 1, b_col = k;
          int32_t a_low = at == STAX_DTYPE_INT8 ? -128 : 0, a_high = a_low + 255;
          int32_t b_low = bt == STAX_DTYPE_UINT8 ? 0 : -128, b_high = b_low + 255;
          for (int64_t i = 0; i < m * 2 * k; i++) {
            int32_t value = random_int(a_low, a_high);
            if (at == STAX_DTYPE_INT8) ((int8_t*)a_bytes)[i] = (int8_t)value;
            else a_bytes[i] = (uint8_t)value;
          }
          for (int64_t i = 0; i < n * k; i++) {
            int32_t value = random_int(b_low, b_high);
            if (bt == STAX_DTYPE_INT8) ((int8_t*)b_bytes)[i] = (int8_t)value;
            else if (bt == STAX_DTYPE_UINT8) b_bytes[i] = (uint8_t)value;
            else ((int16_t*)b_bytes)[i] = (int16_t)value;
          }
          for (int64_t i = 0; i < m; i++) a_zero[i] = random_int(a_low, a_high);
          for (int64_t j = 0; j < n; j++) {
            b_zero[j] = bt == STAX_DTYPE_INT16 ? 0 : random_int(b_low, b_high);
          }
          stax_gemm_int_operand_t a = {at, a_bytes, a_row, a_col};
          stax_gemm_int_operand_t b = {bt, b_bytes, b_row, b_col};
          bool zeros = (s % 2) == 0;
          CHECK_OK(stax_gemm_int(kt_allocator(), s % 3 ? pool : NULL, m, n, k, &a,
                                 zeros ? a_zero : NULL, &b, zeros ? b_zero : NULL, c, n));
          for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < n; j++) {
              int64_t want = 0;
              for (int64_t p = 0; p < k; p++) {
                int64_t x = element(at, a_bytes, i * a_row + p * a_col) - (zeros ? a_zero[i] : 0);
                int64_t y = element(bt, b_bytes, p * b_row + j * b_col) - (zeros ? b_zero[j] : 0);
                want += x * y;
              }
              CHECK_EQ_INT(c[i * n + j], want);
            }
          }
        }
      }
    }
    /* int32 wrap-around: 255 * -128 summed 70000 times. */
    enum { K = 70000 };
    static uint8_t ones[K];
    static int8_t lows[K];
    memset(ones, 255, sizeof(ones));
    memset(lows, 0x80, sizeof(lows));
    int32_t c1 = 0;
    stax_gemm_int_operand_t a = {STAX_DTYPE_UINT8, ones, K, 1};
    stax_gemm_int_operand_t b = {STAX_DTYPE_INT8, lows, 1, 0};
    CHECK_OK(stax_gemm_int(kt_allocator(), pool, 1, 1, K, &a, NULL, &b, NULL, &c1, 1));
    uint32_t wrapped = (uint32_t)(-(int64_t)255 * 128 * K);
    CHECK_EQ_INT((int64_t)c1, (int64_t)(wrapped <= INT32_MAX ? (int64_t)wrapped
                                                             : (int64_t)wrapped - 4294967296ll));
  }
  CHECK(stax_gemm_int_set_isa(NULL));
  CHECK(ran >= 1);
  CHECK(!stax_gemm_int_set_isa("no-such-isa"));
  stax_threadpool_destroy(pool);
}

/* QuantizeLinear per axis on a strided x, then DequantizeLinear back. */
static void test_quantize_roundtrip(void) {
  const int64_t dims[] = {2, 3, 4};
  double values[24];
  for (int i = 0; i < 24; i++) values[i] = (i - 11) * 0.37;
  stax_tensor_t* x = kt_make_strided(STAX_DTYPE_FLOAT32, 3, dims, values);
  const int64_t three = 3;
  const double scale_values[] = {0.1, 0.25, 0.05}, zero_values[] = {-3, 0, 7};
  stax_tensor_t* scale = kt_make(STAX_DTYPE_FLOAT32, 1, &three, scale_values);
  stax_tensor_t* zero = kt_make(STAX_DTYPE_INT8, 1, &three, zero_values);
  stax_tensor_t* inputs[3] = {x, scale, zero};
  stax_node_attr_t axis = kt_attr_int("axis", -2);
  stax_tensor_t* q = NULL;
  CHECK_OK(kt_run(stax_kernel_QuantizeLinear, STAX_OP_QuantizeLinear, &axis, 1, inputs, 3, &q,
                  1));
  stax_tensor_t* dq = NULL;
  if (q) {
    CHECK(stax_tensor_dtype(q) == STAX_DTYPE_INT8);
    for (int i = 0; i < 24; i++) {
      int c = (i / 4) % 3;
      double v = nearbyint((double)((float)values[i] / (float)scale_values[c])) + zero_values[c];
      v = v < -128 ? -128 : v > 127 ? 127 : v;
      CHECK_EQ_INT((int64_t)kt_get(q, i), (int64_t)v);
    }
    stax_tensor_t* back_inputs[3] = {q, scale, zero};
    CHECK_OK(kt_run(stax_kernel_DequantizeLinear, STAX_OP_DequantizeLinear, &axis, 1,
                    back_inputs, 3, &dq, 1));
    for (int i = 0; dq && i < 24; i++) {
      int c = (i / 4) % 3;
      CHECK_NEAR(kt_get(dq, i),
                 (double)((float)(kt_get(q, i) - zero_values[c]) * (float)scale_values[c]), 0);
    }
    kt_check_allocation_failures(stax_kernel_QuantizeLinear, STAX_OP_QuantizeLinear, &axis, 1,
                                 inputs, 3, 1);
    kt_check_allocation_failures(stax_kernel_DequantizeLinear, STAX_OP_DequantizeLinear, &axis,
                                 1, back_inputs, 3, 1);
  }
  kt_release(dq);
  kt_release(q);
  stax_tensor_release(x);
  stax_tensor_release(scale);
  stax_tensor_release(zero);
}

static void test_errors_and_allocation_failures(void) {
  const int64_t dims[] = {2, 3}, four = 4, one = 1;
  stax_tensor_t* x8 = kt_make(STAX_DTYPE_INT8, 2, dims, NULL);
  stax_tensor_t* scale4 = kt_make(STAX_DTYPE_FLOAT32, 1, &four, NULL);
  stax_tensor_t* scale1 = kt_make(STAX_DTYPE_FLOAT32, 1, &one, NULL);
  stax_tensor_t* zero_u8 = kt_make(STAX_DTYPE_UINT8, 1, &one, NULL);
  stax_tensor_t* out = NULL;
  stax_tensor_t* wrong_zero[3] = {x8, scale1, zero_u8};
  CHECK_ERROR(kt_run(stax_kernel_DequantizeLinear, STAX_OP_DequantizeLinear, NULL, 0, wrong_zero,
                     3, &out, 1),
              STAX_DTYPE_MISMATCH, "node 'node0': input 2 (x_zero_point) has dtype uint8");
  stax_tensor_t* wrong_length[2] = {x8, scale4};
  CHECK_ERROR(kt_run(stax_kernel_DequantizeLinear, STAX_OP_DequantizeLinear, NULL, 0,
                     wrong_length, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "input 1 (x_scale) dim 0 is 4 but input 0 (x) dim 1");
  stax_node_attr_t block[2] = {kt_attr_int("axis", 1), kt_attr_int("block_size", 2)};
  const int64_t blocked_dims[] = {2, 1};
  stax_tensor_t* blocked = kt_make(STAX_DTYPE_FLOAT32, 2, blocked_dims, NULL);
  stax_tensor_t* wrong_blocks[2] = {x8, blocked};
  CHECK_ERROR(kt_run(stax_kernel_DequantizeLinear, STAX_OP_DequantizeLinear, block, 2,
                     wrong_blocks, 2, &out, 1),
              STAX_SHAPE_MISMATCH, "in blocks of 2 needs 2");
  CHECK(out == NULL);

  /* MatMulInteger, ConvInteger and QLinearConv: values checked in the Python and
   * conformance suites; here their allocation-failure paths. */
  const int64_t a_dims[] = {3, 5}, b_dims[] = {5, 2};
  double a_values[15], b_values[10];
  for (int i = 0; i < 15; i++) a_values[i] = i * 7 % 200;
  for (int i = 0; i < 10; i++) b_values[i] = i * 13 % 100 - 50;
  stax_tensor_t* a = kt_make(STAX_DTYPE_UINT8, 2, a_dims, a_values);
  stax_tensor_t* b = kt_make(STAX_DTYPE_INT8, 2, b_dims, b_values);
  stax_tensor_t* mm_inputs[2] = {a, b};
  kt_check_allocation_failures(stax_kernel_MatMulInteger, STAX_OP_MatMulInteger, NULL, 0,
                               mm_inputs, 2, 1);
  const int64_t x_dims[] = {1, 2, 4, 4}, w_dims[] = {3, 2, 3, 3};
  double x_values[32], w_values[54];
  for (int i = 0; i < 32; i++) x_values[i] = i * 11 % 256;
  for (int i = 0; i < 54; i++) w_values[i] = i * 5 % 100 - 50;
  stax_tensor_t* x = kt_make(STAX_DTYPE_UINT8, 4, x_dims, x_values);
  stax_tensor_t* w = kt_make(STAX_DTYPE_INT8, 4, w_dims, w_values);
  stax_tensor_t* conv_inputs[2] = {x, w};
  stax_node_attr_t pads = kt_attr_ints("pads", 4, (const int64_t[]){1, 1, 1, 1});
  kt_check_allocation_failures(stax_kernel_ConvInteger, STAX_OP_ConvInteger, &pads, 1,
                               conv_inputs, 2, 1);
  stax_tensor_t* f = kt_make(STAX_DTYPE_FLOAT32, 0, NULL, (const double[]){0.05});
  stax_tensor_t* zx = kt_make(STAX_DTYPE_UINT8, 0, NULL, (const double[]){128});
  stax_tensor_t* zw = kt_make(STAX_DTYPE_INT8, 0, NULL, (const double[]){0});
  const int64_t three = 3, two = 2;
  stax_tensor_t* bias = kt_make(STAX_DTYPE_INT32, 1, &three, (const double[]){-5, 0, 9});
  stax_tensor_t* short_bias = kt_make(STAX_DTYPE_INT32, 1, &two, (const double[]){1, 2});
  stax_tensor_t* q_inputs[9] = {x, f, zx, w, f, zw, f, zx, bias};
  kt_check_allocation_failures(stax_kernel_QLinearConv, STAX_OP_QLinearConv, &pads, 1,
                               q_inputs, 9, 1);
  q_inputs[8] = short_bias;
  CHECK_ERROR(kt_run(stax_kernel_QLinearConv, STAX_OP_QLinearConv, &pads, 1, q_inputs, 9, &out,
                     1),
              STAX_SHAPE_MISMATCH, "input 8 (B) is int32 [2]; it must be int32 [M] = [3]");
  CHECK(out == NULL);
  stax_tensor_t* tensors[] = {x8, scale4, scale1, zero_u8, blocked, a, b, x, w, f, zx, zw,
                              bias, short_bias};
  kt_release_all(tensors, (int)(sizeof(tensors) / sizeof(tensors[0])));
}

STAX_TEST_MAIN(STAX_TEST(test_gemm_int_variants), STAX_TEST(test_quantize_roundtrip),
               STAX_TEST(test_errors_and_allocation_failures))
