/* float16 and bfloat16 values in compiled kernels (docs/jit.md, "16-bit floats"): they load
 * widened to float32, each node's result rounds to its 16-bit dtype as the interpreter's
 * does, and stores narrow, all through the integer conversions of llvm_half.c.
 *  - Conversions: Cast kernels over every float16 and bfloat16 bit pattern, and over float32
 *    edge cases (NaN payloads, ties, subnormal boundaries, overflow to Inf) and a million
 *    random patterns, bit for bit src/runtime/half.c's, also rounded and widened back inside
 *    one kernel (the fused rounding); float64 narrows through round-to-odd.
 *  - Differential runs against the interpreter over random shapes: an elementwise chain with
 *    broadcasting in each 16-bit dtype, and Softmax + LayerNormalization rows, within one
 *    unit in the last place (most elements equal), every call fully compiled, verify mode on.
 * Also run under the avx2 and sse2 caps (ctest *_isa_*): the conversions need no F16C. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tensor_internal.h"
#include "test_vm_jit_util.h"

enum { ONNX_FLOAT = 1, ONNX_FLOAT16 = 10, ONNX_DOUBLE = 11, ONNX_BFLOAT16 = 16 };

static stax_context_t* sync_context(stax_program_t* program, bool verify) {
  stax_context_options_t options = {.jit = STAX_JIT_SYNC, .jit_threshold = 1, .jit_verify = verify};
  stax_context_t* ctx = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &ctx));
  return ctx;
}

/* One Cast node x[N] (from) -> y (to). */
static stax_program_t* build_cast(stax_dtype_t from, int64_t onnx_to) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 1 << 24)};
  stax_value_id_t x = vm_input(g, "x", from, 1, dims);
  stax_attr_t to = stax_attr_int("to", onnx_to);
  vm_output(g, vm_node(g, STAX_OP_Cast, "cast", 1, &x, 1, &to));
  return finish(g);
}

/* Cast x[N] float32 -> 16 bits -> float32 in one group: the fused rounding. */
static stax_program_t* build_round_trip(int64_t onnx_to) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 1 << 24)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  stax_attr_t to = stax_attr_int("to", onnx_to), back = stax_attr_int("to", ONNX_FLOAT);
  stax_value_id_t narrow = vm_node(g, STAX_OP_Cast, "narrow", 1, &x, 1, &to);
  vm_output(g, vm_node(g, STAX_OP_Cast, "widen", 1, &narrow, 1, &back));
  return finish(g);
}

/* Runs a one-input, one-output program compiled (sync) and returns its output; checks that
 * the call ran fully compiled. */
static stax_tensor_t* run_compiled(stax_program_t* program, stax_tensor_t* input) {
  stax_context_t* ctx = sync_context(program, false);
  stax_tensor_t* out[1] = {NULL};
  CHECK_OK(stax_context_run(ctx, 1, &input, 1, out));
  stax_jit_call_stats_t calls;
  CHECK_OK(stax_program_jit_call_stats(program, &calls));
  CHECK_EQ_INT((int)calls.compiled, 1);
  stax_context_destroy(ctx);
  return out[0];
}

static uint32_t f32_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

/* Every 16-bit pattern widened: the float32 bits equal the runtime's (NaNs included). */
static void widen_all(stax_dtype_t dtype) {
  stax_program_t* program = build_cast(dtype, ONNX_FLOAT);
  int64_t n = 65536;
  stax_tensor_t* x = vm_tensor(dtype, 1, &n, NULL);
  uint16_t* bits = stax_tensor_data(x);
  for (int64_t i = 0; i < n; i++) bits[i] = (uint16_t)i;
  stax_tensor_t* y = run_compiled(program, x);
  const float* got = stax_tensor_data(y);
  int wrong = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = dtype == STAX_DTYPE_FLOAT16 ? stax_f16_to_f32((uint16_t)i)
                                             : stax_bf16_to_f32((uint16_t)i);
    if (f32_bits(got[i]) != f32_bits(want) && wrong++ < 5)
      fprintf(stderr, "%s 0x%04x: kernel 0x%08x, runtime 0x%08x\n", stax_dtype_name(dtype),
              (unsigned)i, f32_bits(got[i]), f32_bits(want));
  }
  CHECK_EQ_INT(wrong, 0);
  stax_tensor_release(x);
  stax_tensor_release(y);
  stax_program_release(program);
}

static void test_widen_every_float16(void) {
  if (have_backend()) widen_all(STAX_DTYPE_FLOAT16);
}
static void test_widen_every_bfloat16(void) {
  if (have_backend()) widen_all(STAX_DTYPE_BFLOAT16);
}

/* float32 patterns narrowed: edge cases around every boundary of both formats, then random
 * bits; the 16-bit results equal the runtime's. */
static void narrow_f32(int64_t onnx_to) {
  stax_dtype_t dtype = onnx_to == ONNX_FLOAT16 ? STAX_DTYPE_FLOAT16 : STAX_DTYPE_BFLOAT16;
  static const uint32_t edges[] = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
      0x7f800001u, 0x7f802000u, 0x7fbfffffu, 0x7f80ffffu, 0x477fe000u, 0x477fefffu,
      0x477ff000u, 0x477ff001u, 0x47800000u, 0x38800000u, 0x387fffffu, 0x387ff000u,
      0x33000000u, 0x33000001u, 0x32ffffffu, 0x33800000u, 0x33c00000u, 0x3f800000u,
      0x3f801000u, 0x3f803000u, 0x3f808000u, 0x3f818000u, 0x3f7fffffu, 0x7f7fffffu,
      0x7f7f8000u, 0x7f7f7fffu, 0x00000001u, 0x00800000u, 0x3a800800u, 0x3a801800u};
  int64_t edge_count = (int64_t)(sizeof(edges) / sizeof(edges[0]));
  int64_t n = edge_count * 2 + (1 << 20);
  stax_program_t* program = build_cast(STAX_DTYPE_FLOAT32, onnx_to);
  stax_tensor_t* x = vm_tensor(STAX_DTYPE_FLOAT32, 1, &n, NULL);
  uint32_t* bits = stax_tensor_data(x);
  vm_rng_t rng = {0x4a1fu + (uint64_t)onnx_to};
  for (int64_t i = 0; i < n; i++) {
    if (i < edge_count) bits[i] = edges[i];
    else if (i < 2 * edge_count) bits[i] = edges[i - edge_count] ^ 0x80000000u;
    else bits[i] = (uint32_t)vm_rng_next(&rng);
  }
  stax_tensor_t* y = run_compiled(program, x);
  const uint16_t* got = stax_tensor_data(y);
  int wrong = 0;
  for (int64_t i = 0; i < n; i++) {
    float value;
    memcpy(&value, &bits[i], sizeof(value));
    uint16_t want = dtype == STAX_DTYPE_FLOAT16 ? stax_f32_to_f16(value) : stax_f32_to_bf16(value);
    if (got[i] != want && wrong++ < 5)
      fprintf(stderr, "float32 0x%08x -> %s: kernel 0x%04x, runtime 0x%04x\n", bits[i],
              stax_dtype_name(dtype), got[i], want);
  }
  CHECK_EQ_INT(wrong, 0);
  stax_tensor_release(y);
  stax_program_release(program);
  /* The same patterns rounded and widened back inside one kernel. */
  program = build_round_trip(onnx_to);
  y = run_compiled(program, x);
  const float* round_trip = stax_tensor_data(y);
  for (int64_t i = 0; i < n; i++) {
    float value;
    memcpy(&value, &bits[i], sizeof(value));
    float want = dtype == STAX_DTYPE_FLOAT16 ? stax_f16_to_f32(stax_f32_to_f16(value))
                                             : stax_bf16_to_f32(stax_f32_to_bf16(value));
    if (f32_bits(round_trip[i]) != f32_bits(want) && wrong++ < 5)
      fprintf(stderr, "float32 0x%08x through %s: kernel 0x%08x, runtime 0x%08x\n", bits[i],
              stax_dtype_name(dtype), f32_bits(round_trip[i]), f32_bits(want));
  }
  CHECK_EQ_INT(wrong, 0);
  stax_tensor_release(x);
  stax_tensor_release(y);
  stax_program_release(program);
}

static void test_narrow_float32_to_float16(void) {
  if (have_backend()) narrow_f32(ONNX_FLOAT16);
}
static void test_narrow_float32_to_bfloat16(void) {
  if (have_backend()) narrow_f32(ONNX_BFLOAT16);
}

/* float64 -> float16 needs the round-to-odd first step: values just above a float16 tie
 * whose nearest float32 is the tie itself. */
static void test_narrow_float64_to_float16(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_cast(STAX_DTYPE_FLOAT64, ONNX_FLOAT16);
  int64_t n = 4096;
  stax_tensor_t* x = vm_tensor(STAX_DTYPE_FLOAT64, 1, &n, NULL);
  double* values = stax_tensor_data(x);
  vm_rng_t rng = {0xd0b1eu};
  for (int64_t i = 0; i < n; i++) {
    /* A float16 tie (odd multiple of half a float16 ulp at 1), nudged by less than half a
     * float32 ulp, or a random double. */
    double tie = 1.0 + (double)(2 * vm_rng_range(&rng, 0, 1000) + 1) * 0x1p-11;
    double nudge = (double)vm_rng_range(&rng, -3, 3) * 0x1p-30;
    values[i] = i % 4 == 3 ? (double)vm_rng_float(&rng) * 70000.0 : tie + nudge;
  }
  stax_tensor_t* y = run_compiled(program, x);
  const uint16_t* got = stax_tensor_data(y);
  int wrong = 0;
  for (int64_t i = 0; i < n; i++)
    if (got[i] != stax_f64_to_f16(values[i]) && wrong++ < 5)
      fprintf(stderr, "float64 %.17g: kernel 0x%04x, runtime 0x%04x\n", values[i], got[i],
              stax_f64_to_f16(values[i]));
  CHECK_EQ_INT(wrong, 0);
  stax_tensor_release(x);
  stax_tensor_release(y);
  stax_program_release(program);
}

/* ---- differential runs -------------------------------------------------------------------- */

static stax_tensor_t* random_half(vm_rng_t* rng, stax_dtype_t dtype, int32_t rank,
                                  const int64_t* dims, float scale) {
  stax_tensor_t* t = vm_tensor(dtype, rank, dims, NULL);
  uint16_t* data = stax_tensor_data(t);
  for (int64_t i = 0; i < stax_tensor_element_count(t); i++) {
    float value = vm_rng_float(rng) * scale;
    data[i] = dtype == STAX_DTYPE_FLOAT16 ? stax_f32_to_f16(value) : stax_f32_to_bf16(value);
  }
  return t;
}

/* Sign-magnitude bits to a line where neighbours differ by one. */
static int32_t ordered(uint16_t bits) {
  return bits & 0x8000u ? -(int32_t)(bits & 0x7fffu) : (int32_t)bits;
}

/* The outputs agree within one unit in the last place; counts exactly equal elements. */
static void compare_half(const stax_tensor_t* a, const stax_tensor_t* b, int64_t* equal,
                         int64_t* total, int* off) {
  const uint16_t* x = stax_tensor_data(a);
  const uint16_t* y = stax_tensor_data(b);
  int64_t n = stax_tensor_element_count(b);
  CHECK_EQ_INT((int)stax_tensor_element_count(a), (int)n);
  for (int64_t i = 0; i < n; i++) {
    int32_t d = ordered(x[i]) - ordered(y[i]);
    if (d == 0) (*equal)++;
    if ((d > 1 || d < -1) && (*off)++ < 5)
      fprintf(stderr, "element %lld: kernel 0x%04x, interpreter 0x%04x\n", (long long)i, x[i],
              y[i]);
  }
  *total += n;
}

/* Sigmoid(Relu(x[B, S, 24] * y[24] + c)) - Tanh(x), in `dtype` throughout. */
static stax_program_t* build_chain(stax_dtype_t dtype) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 300),
                               vm_const(g, 24)};
  stax_value_id_t x = vm_input(g, "x", dtype, 3, dims);
  stax_value_id_t y = vm_input(g, "y", dtype, 1, dims + 2);
  uint16_t c_bits = dtype == STAX_DTYPE_FLOAT16 ? stax_f32_to_f16(0.3f) : stax_f32_to_bf16(0.3f);
  int64_t one[1] = {1};
  stax_value_id_t c = vm_initializer(g, "c", dtype, 1, one, &c_bits);
  stax_value_id_t t = vm_binary(g, STAX_OP_Add, "add", vm_binary(g, STAX_OP_Mul, "mul", x, y), c);
  stax_value_id_t s = vm_unary(g, STAX_OP_Sigmoid, "sigmoid", vm_unary(g, STAX_OP_Relu, "relu", t));
  vm_output(g, vm_binary(g, STAX_OP_Sub, "sub", s, vm_unary(g, STAX_OP_Tanh, "tanh", x)));
  return finish(g);
}

/* Softmax(x[B, S]) and LayerNormalization(z[B, 24], gamma, beta), float16. */
static stax_program_t* build_rows(stax_dtype_t dtype) {
  stax_graph_t* g = new_graph();
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 300)};
  const stax_dim_t* zdims[2] = {dims[0], vm_const(g, 24)};
  stax_value_id_t x = vm_input(g, "x", dtype, 2, dims);
  stax_value_id_t z = vm_input(g, "z", dtype, 2, zdims);
  uint16_t gamma[24], beta[24];
  for (int i = 0; i < 24; i++) {
    gamma[i] = stax_f32_to_f16(1.0f + 0.05f * (float)i);
    beta[i] = stax_f32_to_f16(0.1f * (float)(i % 3));
  }
  int64_t n24[1] = {24};
  stax_value_id_t ln_in[3] = {z, vm_initializer(g, "gamma", dtype, 1, n24, gamma),
                              vm_initializer(g, "beta", dtype, 1, n24, beta)};
  stax_attr_t axis = stax_attr_int("axis", -1);
  vm_output(g, vm_node(g, STAX_OP_Softmax, "softmax", 1, &x, 1, &axis));
  stax_attr_t ln_attrs[2] = {stax_attr_int("axis", -1), stax_attr_float("epsilon", 1e-5f)};
  vm_output(g, vm_node(g, STAX_OP_LayerNormalization, "ln", 3, ln_in, 2, ln_attrs));
  return finish(g);
}

static void differential(stax_program_t* program, stax_dtype_t dtype, bool rows, int rounds) {
  stax_context_t* jit = sync_context(program, true);
  stax_context_t* interp = vm_context(program, STAX_DISPATCH_DEFAULT);
  vm_rng_t rng = {0x4a1f5u + (uint64_t)rows * 7 + (uint64_t)dtype};
  int64_t equal = 0, total = 0;
  int off = 0;
  for (int round = 0; round < rounds; round++) {
    int64_t b = vm_rng_range(&rng, 1, round % 7 == 0 ? 64 : 6);
    int64_t s = round % 5 == 0 ? vm_rng_range(&rng, 1, 300) : vm_rng_range(&rng, 1, 40);
    int64_t xd[3] = {b, s, 24}, second[2] = {rows ? b : 24, 24};
    stax_tensor_t* in[2] = {random_half(&rng, dtype, rows ? 2 : 3, xd, rows ? 6.0f : 3.0f),
                            random_half(&rng, dtype, rows ? 2 : 1, second, 2.0f)};
    int32_t outputs = rows ? 2 : 1;
    stax_tensor_t* a[2] = {NULL, NULL};
    stax_tensor_t* r[2] = {NULL, NULL};
    CHECK_OK(stax_context_run(jit, 2, in, outputs, a));
    CHECK_OK(stax_context_run(interp, 2, in, outputs, r));
    for (int32_t o = 0; o < outputs; o++) {
      if (a[o] && r[o]) compare_half(a[o], r[o], &equal, &total, &off);
      if (a[o]) stax_tensor_release(a[o]);
      if (r[o]) stax_tensor_release(r[o]);
    }
    stax_tensor_release(in[0]);
    stax_tensor_release(in[1]);
  }
  CHECK_EQ_INT(off, 0);
  /* Rounding the other way is the exception (math that differs in float32's last bits). */
  CHECK(equal * 100 >= total * 99);
  stax_jit_call_stats_t calls;
  CHECK_OK(stax_program_jit_call_stats(program, &calls));
  CHECK_EQ_INT((int)calls.compiled, rounds);
  stax_context_destroy(jit);
  stax_context_destroy(interp);
}

static void test_chain_float16(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_chain(STAX_DTYPE_FLOAT16);
  differential(program, STAX_DTYPE_FLOAT16, false, 300);
  stax_program_release(program);
}

static void test_chain_bfloat16(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_chain(STAX_DTYPE_BFLOAT16);
  differential(program, STAX_DTYPE_BFLOAT16, false, 300);
  stax_program_release(program);
}

static void test_rows_float16(void) {
  if (!have_backend()) return;
  stax_program_t* program = build_rows(STAX_DTYPE_FLOAT16);
  differential(program, STAX_DTYPE_FLOAT16, true, 300);
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_widen_every_float16), STAX_TEST(test_widen_every_bfloat16),
               STAX_TEST(test_narrow_float32_to_float16), STAX_TEST(test_narrow_float32_to_bfloat16),
               STAX_TEST(test_narrow_float64_to_float16), STAX_TEST(test_chain_float16),
               STAX_TEST(test_chain_bfloat16), STAX_TEST(test_rows_float16))
