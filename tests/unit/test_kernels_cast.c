/* Tests for Cast and CastLike (src/kernels/cast.c): every one of the 169 dtype pairs on values
 * each dtype holds exactly, then the ONNX edge cases checked against values worked out by
 * hand (truncation toward zero, saturation and NaN to integers, integer wrap-around, x != 0
 * for bool, round-to-nearest-even into the narrow floats), views, preallocated outputs,
 * thread pool runs and the attribute errors. */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"
#include "kernel_test_util.h"

static const stax_dtype_t kAllDtypes[] = {
    STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16, STAX_DTYPE_BFLOAT16,
    STAX_DTYPE_INT8,    STAX_DTYPE_INT16,   STAX_DTYPE_INT32,   STAX_DTYPE_INT64,
    STAX_DTYPE_UINT8,   STAX_DTYPE_UINT16,  STAX_DTYPE_UINT32,  STAX_DTYPE_UINT64,
    STAX_DTYPE_BOOL};
#define ALL_DTYPE_COUNT ((int)(sizeof(kAllDtypes) / sizeof(kAllDtypes[0])))

/* Runs Cast/CastLike through a node named "cast0" with one output. */
static stax_status_t run_kernel(stax_kernel_fn fn, stax_op_t op, const stax_node_attr_t* attrs,
                                int32_t attr_count, stax_tensor_t** inputs, int32_t input_count,
                                stax_tensor_t** out, stax_threadpool_t* pool) {
  return kt_call_kernel(fn, op, "cast0", attrs, attr_count, inputs, input_count, out, 1,
                        kt_allocator(), pool);
}

static stax_status_t cast(stax_tensor_t* x, stax_dtype_t to, stax_tensor_t** out,
                          stax_threadpool_t* pool) {
  stax_node_attr_t attr = kt_attr_int("to", stax_dtype_to_onnx(to));
  return run_kernel(stax_kernel_Cast, STAX_OP_Cast, &attr, 1, &x, 1, out, pool);
}

/* Casts `count` raw source values and compares the output's bytes with `expected` bytes. */
static void check_bytes(stax_dtype_t from, const void* source, stax_dtype_t to,
                        const void* expected, int64_t count, int line) {
  stax_tensor_t* x = kt_make_raw(from, 1, &count, source);
  stax_tensor_t* out = NULL;
  CHECK_OK(cast(x, to, &out, NULL));
  if (out) {
    size_t size = stax_dtype_size(to);
    for (int64_t i = 0; i < count; i++) {
      const char* got = (const char*)stax_tensor_data(out) + (size_t)i * size;
      const char* want = (const char*)expected + (size_t)i * size;
      if (memcmp(got, want, size) != 0)
        fprintf(stderr, "line %d: %s -> %s element %lld differs\n", line, stax_dtype_name(from),
                stax_dtype_name(to), (long long)i);
      CHECK(memcmp(got, want, size) == 0);
    }
    stax_tensor_release(out);
  }
  stax_tensor_release(x);
}
#define CHECK_CAST(from, source, to, expected)                                               \
  check_bytes(from, source, to, expected, (int64_t)(sizeof(source) / stax_dtype_size(from)), \
              __LINE__)

/* ---- every pair -------------------------------------------------------------------------- */

static bool holds_negatives(stax_dtype_t dtype) {
  return stax_dtype_is_float(dtype) || stax_dtype_is_signed_int(dtype);
}

static void test_every_pair(void) {
  const double positives[5] = {0, 1, 7, 100, 64};
  const double negatives[2] = {-3, -100};
  for (int f = 0; f < ALL_DTYPE_COUNT; f++) {
    for (int t = 0; t < ALL_DTYPE_COUNT; t++) {
      stax_dtype_t from = kAllDtypes[f], to = kAllDtypes[t];
      double values[7];
      int count = 0;
      for (int i = 0; i < 5; i++) values[count++] = positives[i];
      if (holds_negatives(from) && holds_negatives(to))
        for (int i = 0; i < 2; i++) values[count++] = negatives[i];
      if (from == STAX_DTYPE_BOOL) count = 2; /* 0 and 1 */
      const int64_t dims[1] = {count};
      stax_tensor_t* x = kt_make_codec(from, 1, dims, values);
      stax_tensor_t* out = NULL;
      CHECK_OK(cast(x, to, &out, NULL));
      CHECK(out && stax_tensor_dtype(out) == to);
      for (int i = 0; out && i < count; i++) {
        double expected = to == STAX_DTYPE_BOOL ? values[i] != 0 : values[i];
        if (kt_get_codec(out, i) != expected)
          fprintf(stderr, "%s -> %s: %g gave %g\n", stax_dtype_name(from), stax_dtype_name(to),
                  values[i], kt_get_codec(out, i));
        CHECK_NEAR(kt_get_codec(out, i), expected, 0);
      }
      kt_release_all((stax_tensor_t*[]){x, out}, 2);
    }
  }
}

/* ---- float to integer -------------------------------------------------------------------- */

static void test_float_to_integer(void) {
  const float f[8] = {2.7f, -2.7f, NAN, 300.5f, -300.0f, INFINITY, -INFINITY, -0.9f};
  const int8_t to_int8[8] = {2, -2, 0, 127, -128, 127, -128, 0};
  CHECK_CAST(STAX_DTYPE_FLOAT32, f, STAX_DTYPE_INT8, to_int8);
  const uint8_t to_uint8[8] = {2, 0, 0, 255, 0, 255, 0, 0};
  CHECK_CAST(STAX_DTYPE_FLOAT32, f, STAX_DTYPE_UINT8, to_uint8);
  const int32_t to_int32[8] = {2, -2, 0, 300, -300, INT32_MAX, INT32_MIN, 0};
  CHECK_CAST(STAX_DTYPE_FLOAT32, f, STAX_DTYPE_INT32, to_int32);
  const double d[4] = {1e20, -1e20, 9007199254740993.0, 18446744073709551615.0};
  const int64_t to_int64[4] = {INT64_MAX, INT64_MIN, INT64_C(9007199254740992), INT64_MAX};
  CHECK_CAST(STAX_DTYPE_FLOAT64, d, STAX_DTYPE_INT64, to_int64);
  const uint64_t to_uint64[4] = {UINT64_MAX, 0, UINT64_C(9007199254740992), UINT64_MAX};
  CHECK_CAST(STAX_DTYPE_FLOAT64, d, STAX_DTYPE_UINT64, to_uint64);
  /* float16 sources decode exactly first: 0x4170 is 2.71875, 0xFC00 is -inf */
  const uint16_t h[2] = {0x4170, 0xFC00};
  const int16_t h_to_int16[2] = {2, INT16_MIN};
  CHECK_CAST(STAX_DTYPE_FLOAT16, h, STAX_DTYPE_INT16, h_to_int16);
}

/* ---- integer to integer, bool ------------------------------------------------------------ */

static void test_integer_wrap_and_bool(void) {
  const int32_t i32[4] = {300, -1, 65536 + 7, INT32_MIN};
  const uint8_t to_uint8[4] = {44, 255, 7, 0};
  CHECK_CAST(STAX_DTYPE_INT32, i32, STAX_DTYPE_UINT8, to_uint8);
  const uint16_t to_uint16[4] = {300, 65535, 7, 0};
  CHECK_CAST(STAX_DTYPE_INT32, i32, STAX_DTYPE_UINT16, to_uint16);
  const int64_t to_int64[4] = {300, -1, 65543, INT32_MIN};
  CHECK_CAST(STAX_DTYPE_INT32, i32, STAX_DTYPE_INT64, to_int64);
  const uint64_t u64[3] = {UINT64_MAX, (UINT64_C(1) << 32) + 5, UINT64_C(1) << 63};
  const int8_t u64_to_int8[3] = {-1, 5, 0};
  CHECK_CAST(STAX_DTYPE_UINT64, u64, STAX_DTYPE_INT8, u64_to_int8);
  const int64_t u64_to_int64[3] = {-1, (INT64_C(1) << 32) + 5, INT64_MIN};
  CHECK_CAST(STAX_DTYPE_UINT64, u64, STAX_DTYPE_INT64, u64_to_int64);
  /* to bool is x != 0 (256 does not wrap to false, NaN and -0.0 as IEEE says) */
  const int32_t wide[3] = {256, 0, -1};
  const uint8_t wide_to_bool[3] = {1, 0, 1};
  CHECK_CAST(STAX_DTYPE_INT32, wide, STAX_DTYPE_BOOL, wide_to_bool);
  const double specials[4] = {NAN, -0.0, 1e-300, 0.0};
  const uint8_t specials_to_bool[4] = {1, 0, 1, 0};
  CHECK_CAST(STAX_DTYPE_FLOAT64, specials, STAX_DTYPE_BOOL, specials_to_bool);
  /* bool bytes other than 0/1 read as true */
  const uint8_t flags[3] = {2, 0, 255};
  const int32_t flags_to_int32[3] = {1, 0, 1};
  CHECK_CAST(STAX_DTYPE_BOOL, flags, STAX_DTYPE_INT32, flags_to_int32);
  const float flags_to_float[3] = {1, 0, 1};
  CHECK_CAST(STAX_DTYPE_BOOL, flags, STAX_DTYPE_FLOAT32, flags_to_float);
}

/* ---- rounding into floats ---------------------------------------------------------------- */

static void test_float_rounding(void) {
  /* float16: 65520 overflows to inf; 1 + 2^-11 ties to even (1.0); 1 + 3*2^-11 ties up */
  const float f[4] = {65520.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f};
  const uint16_t to_f16[4] = {0x7C00, 0x3C00, 0x3C02, 0x7BFF};
  CHECK_CAST(STAX_DTYPE_FLOAT32, f, STAX_DTYPE_FLOAT16, to_f16);
  /* int64 straight to float16, rounded once: 2049 -> 2048, 2051 -> 2052, 70000 -> inf */
  const int64_t ints[4] = {2049, 2051, 70000, -2049};
  const uint16_t ints_to_f16[4] = {0x6800, 0x6802, 0x7C00, 0xE800};
  CHECK_CAST(STAX_DTYPE_INT64, ints, STAX_DTYPE_FLOAT16, ints_to_f16);
  /* bfloat16: 1 + 2^-8 ties to even, 1 + 3*2^-8 ties up */
  const float g[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  const uint16_t to_bf16[2] = {0x3F80, 0x3F82};
  CHECK_CAST(STAX_DTYPE_FLOAT32, g, STAX_DTYPE_BFLOAT16, to_bf16);
  /* wide integers to float32/float64 round to nearest even */
  const int64_t big[2] = {(INT64_C(1) << 53) + 1, 16777217};
  const double big_to_f64[2] = {9007199254740992.0, 16777217.0};
  CHECK_CAST(STAX_DTYPE_INT64, big, STAX_DTYPE_FLOAT64, big_to_f64);
  const float big_to_f32[2] = {9007199254740992.0f, 16777216.0f};
  CHECK_CAST(STAX_DTYPE_INT64, big, STAX_DTYPE_FLOAT32, big_to_f32);
  const uint64_t huge[1] = {UINT64_MAX};
  const float huge_to_f32[1] = {18446744073709551616.0f};
  CHECK_CAST(STAX_DTYPE_UINT64, huge, STAX_DTYPE_FLOAT32, huge_to_f32);
  /* float64 0.1 to float32 is the nearest float */
  const double tenth[1] = {0.1};
  const float tenth_f32[1] = {0.1f};
  CHECK_CAST(STAX_DTYPE_FLOAT64, tenth, STAX_DTYPE_FLOAT32, tenth_f32);
  /* specials survive between float types */
  const uint16_t half_specials[2] = {0x7E00, 0xFC00}; /* NaN, -inf */
  stax_tensor_t* x = kt_make_raw(STAX_DTYPE_FLOAT16, 1, (int64_t[]){2}, half_specials);
  stax_tensor_t* out = NULL;
  CHECK_OK(cast(x, STAX_DTYPE_FLOAT64, &out, NULL));
  CHECK(isnan(kt_get_codec(out, 0)));
  CHECK(isinf(kt_get_codec(out, 1)) && kt_get_codec(out, 1) < 0);
  kt_release_all((stax_tensor_t*[]){x, out}, 2);
}

/* ---- views, outputs, CastLike, threads, errors ------------------------------------------ */

static void test_views_and_outputs(void) {
  const int64_t dims[3] = {3, 4, 5};
  double values[60];
  for (int i = 0; i < 60; i++) values[i] = i - 30;
  stax_tensor_t* base = kt_make_codec(STAX_DTYPE_INT32, 3, dims, values);
  stax_tensor_t* transposed = NULL, *sliced = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), base, NULL, &transposed)); /* [5, 4, 3] */
  const int64_t starts[2] = {4, 0}, ends[2] = {-100, 4}, steps[2] = {-2, 3};
  CHECK_OK(stax_tensor_slice(kt_allocator(), transposed, 2, starts, ends, NULL, steps, &sliced));
  stax_tensor_t* views[2] = {transposed, sliced};
  for (int v = 0; v < 2; v++) {
    stax_tensor_t* out = NULL;
    CHECK_OK(cast(views[v], STAX_DTYPE_FLOAT32, &out, NULL));
    CHECK(out && stax_tensor_is_contiguous(out));
    int64_t n = stax_tensor_element_count(views[v]);
    for (int64_t i = 0; out && i < n; i++) CHECK_NEAR(kt_get_codec(out, i), kt_get_codec(views[v], i), 0);
    if (out) stax_tensor_release(out);
  }
  /* a 1-D view with a stride of -3 (the flat path with a non-unit stride) */
  stax_tensor_t* flat = NULL;
  const int64_t flat_dims[1] = {60};
  CHECK_OK(stax_tensor_reshape(kt_allocator(), base, 1, flat_dims, false, &flat));
  stax_tensor_t* strided = NULL;
  const int64_t flat_start[1] = {59}, flat_end[1] = {-100}, flat_step[1] = {-3};
  CHECK_OK(
      stax_tensor_slice(kt_allocator(), flat, 1, flat_start, flat_end, NULL, flat_step, &strided));
  stax_tensor_t* strided_out = NULL;
  CHECK_OK(cast(strided, STAX_DTYPE_FLOAT64, &strided_out, NULL));
  CHECK(strided_out && stax_tensor_element_count(strided_out) == 20);
  for (int64_t i = 0; strided_out && i < 20; i++) CHECK_NEAR(kt_get_codec(strided_out, i), 29 - 3 * i, 0);
  kt_release_all((stax_tensor_t*[]){flat, strided, strided_out}, 3);
  /* CastLike takes input 1's dtype; the values of input 1 do not matter */
  const int64_t one[1] = {1};
  stax_tensor_t* like = kt_make_codec(STAX_DTYPE_FLOAT16, 1, one, NULL);
  stax_tensor_t* inputs[2] = {transposed, like};
  stax_tensor_t* out = NULL;
  CHECK_OK(run_kernel(stax_kernel_CastLike, STAX_OP_CastLike, NULL, 0, inputs, 2, &out, NULL));
  CHECK(out && stax_tensor_dtype(out) == STAX_DTYPE_FLOAT16 && stax_tensor_rank(out) == 3);
  for (int64_t i = 0; out && i < 60; i++) CHECK_NEAR(kt_get_codec(out, i), kt_get_codec(transposed, i), 0);
  if (out) stax_tensor_release(out);
  /* preallocated outputs: right, wrong dims, wrong dtype */
  const int64_t t_dims[3] = {5, 4, 3};
  stax_tensor_t* preallocated = kt_make_codec(STAX_DTYPE_UINT8, 3, t_dims, NULL);
  out = preallocated;
  CHECK_OK(cast(transposed, STAX_DTYPE_UINT8, &out, NULL));
  CHECK(out == preallocated);
  for (int64_t i = 0; i < 60; i++)
    CHECK_NEAR(kt_get_codec(preallocated, i), (double)(uint8_t)(int32_t)kt_get_codec(transposed, i), 0);
  stax_tensor_t* wrong_dims = kt_make_codec(STAX_DTYPE_UINT8, 3, dims, NULL);
  out = wrong_dims;
  CHECK_ERROR(cast(transposed, STAX_DTYPE_UINT8, &out, NULL), STAX_SHAPE_MISMATCH,
              "Cast node 'cast0': output 0");
  out = preallocated;
  CHECK_ERROR(cast(transposed, STAX_DTYPE_INT8, &out, NULL), STAX_SHAPE_MISMATCH, "uint8");
  /* same dtype is a copy; zero-sized and rank-0 tensors */
  out = NULL;
  CHECK_OK(cast(sliced, STAX_DTYPE_INT32, &out, NULL));
  for (int64_t i = 0; out && i < stax_tensor_element_count(sliced); i++)
    CHECK_NEAR(kt_get_codec(out, i), kt_get_codec(sliced, i), 0);
  if (out) stax_tensor_release(out);
  const int64_t empty_dims[2] = {0, 4};
  stax_tensor_t* empty = kt_make_codec(STAX_DTYPE_FLOAT64, 2, empty_dims, NULL);
  out = NULL;
  CHECK_OK(cast(empty, STAX_DTYPE_BOOL, &out, NULL));
  CHECK(out && stax_tensor_element_count(out) == 0 && stax_tensor_rank(out) == 2);
  if (out) stax_tensor_release(out);
  stax_tensor_t* scalar = kt_make_codec(STAX_DTYPE_FLOAT64, 0, NULL, (double[]){-7.9});
  out = NULL;
  CHECK_OK(cast(scalar, STAX_DTYPE_INT16, &out, NULL));
  CHECK(out && stax_tensor_rank(out) == 0 && kt_get_codec(out, 0) == -7);
  if (out) stax_tensor_release(out);
  kt_release_all((stax_tensor_t*[]){base, transposed, sliced, like, preallocated, wrong_dims, empty,
                                 scalar},
              8);
}

static void test_thread_pool(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(kt_allocator(), 2, &pool));
  const int64_t dims[2] = {211, 1009};
  int64_t n = dims[0] * dims[1];
  double* values = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) values[i] = (double)(i % 1000) * 0.75 - 300;
  stax_tensor_t* x = kt_make_codec(STAX_DTYPE_FLOAT32, 2, dims, values);
  stax_tensor_t* xt = NULL;
  CHECK_OK(stax_tensor_transpose(kt_allocator(), x, NULL, &xt));
  stax_tensor_t* sources[2] = {x, xt};
  for (int s = 0; s < 2; s++) {
    stax_tensor_t* out = NULL;
    CHECK_OK(cast(sources[s], STAX_DTYPE_INT16, &out, pool));
    int64_t mismatches = 0;
    for (int64_t i = 0; out && i < n; i++)
      if (kt_get_codec(out, i) != trunc(kt_get_codec(sources[s], i))) mismatches++;
    CHECK_EQ_INT(mismatches, 0);
    if (out) stax_tensor_release(out);
  }
  free(values);
  kt_release_all((stax_tensor_t*[]){x, xt}, 2);
  stax_threadpool_destroy(pool);
}

static void test_errors(void) {
  const int64_t one[1] = {1};
  stax_tensor_t* x = kt_make_codec(STAX_DTYPE_FLOAT32, 1, one, (double[]){1});
  stax_tensor_t* out = NULL;
  CHECK_ERROR(run_kernel(stax_kernel_Cast, STAX_OP_Cast, NULL, 0, &x, 1, &out, NULL),
              STAX_INVALID_ARGUMENT, "Cast node 'cast0': attribute 'to' is required");
  stax_node_attr_t string_type = kt_attr_int("to", 8); /* ONNX STRING */
  CHECK_ERROR(run_kernel(stax_kernel_Cast, STAX_OP_Cast, &string_type, 1, &x, 1, &out, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'to' = 8 is not a supported dtype");
  stax_node_attr_t huge = kt_attr_int("to", INT64_C(1) << 40);
  CHECK_ERROR(run_kernel(stax_kernel_Cast, STAX_OP_Cast, &huge, 1, &x, 1, &out, NULL),
              STAX_INVALID_ARGUMENT, "not a supported dtype");
  stax_node_attr_t wrong_type;
  memset(&wrong_type, 0, sizeof(wrong_type));
  wrong_type.name = "to";
  wrong_type.type = STAX_ATTR_FLOAT;
  wrong_type.value.f = 1.0f;
  CHECK_ERROR(run_kernel(stax_kernel_Cast, STAX_OP_Cast, &wrong_type, 1, &x, 1, &out, NULL),
              STAX_INVALID_ARGUMENT, "attribute 'to' must be INT");
  stax_tensor_t* only_x[2] = {x, NULL};
  CHECK_ERROR(run_kernel(stax_kernel_CastLike, STAX_OP_CastLike, NULL, 0, only_x, 2, &out, NULL),
              STAX_INVALID_ARGUMENT, "CastLike node 'cast0': input 1 is missing");
  stax_tensor_t* missing[1] = {NULL};
  stax_node_attr_t to_int = kt_attr_int("to", 6);
  CHECK_ERROR(run_kernel(stax_kernel_Cast, STAX_OP_Cast, &to_int, 1, missing, 1, &out, NULL),
              STAX_INVALID_ARGUMENT, "input 0 is missing");
  CHECK(out == NULL);
  stax_tensor_release(x);
}

STAX_TEST_MAIN(STAX_TEST(test_every_pair), STAX_TEST(test_float_to_integer),
               STAX_TEST(test_integer_wrap_and_bool), STAX_TEST(test_float_rounding),
               STAX_TEST(test_views_and_outputs), STAX_TEST(test_thread_pool),
               STAX_TEST(test_errors))
