/* Tests for the JIT's pooling lowering (lower_pool.c): MaxPool, AveragePool, GlobalAveragePool
 * and GlobalMaxPool with elementwise epilogues, compared with the generic kernels. Windowed
 * pools must agree bit for bit (the lowering does the generic kernel's operations in its
 * order); global averages within a float32 rounding. Random specs over 1-D, 2-D and 3-D
 * windows: kernel sizes 1-5 (non-square), strides 1-3, dilations 1-2 (MaxPool), explicit
 * asymmetric pads, auto_pad, ceil_mode, count_include_pad, Relu / channel-bias epilogues,
 * strided, transposed and reversed input views; spatial sizes around and off the vector width
 * (tails) at 128-, 256- and 512-bit vectors and the native width (which STAX_ISA caps);
 * NaN, infinities and signed zeros in the windows; windows with no element in range; the
 * thread pool; empty batches; the refusals. */
#include "test_jit_util.h"

typedef struct pool_spec_t {
  stax_op_t op;
  int32_t spatial;
  int64_t n, c;
  int64_t input[4], kernel[4], strides[4], dilations[4], pads[8];
  const char* auto_pad; /* NULL: explicit pads */
  bool ceil_mode, count_include_pad;
  int32_t epilogue; /* 0 none, 1 Relu, 2 + a [C, 1, .., 1] bias */
  int32_t x_layout; /* tg_input_layout's layouts */
  bool specials;    /* NaN, infinities and signed zeros among the inputs */
} pool_spec_t;

static bool is_global(stax_op_t op) {
  return op == STAX_OP_GlobalAveragePool || op == STAX_OP_GlobalMaxPool;
}

/* The output size the ONNX rules give (written out here independently of the kernels). */
static int64_t output_size(const pool_spec_t* s, int32_t i) {
  if (is_global(s->op)) return 1;
  int64_t extent = s->dilations[i] * (s->kernel[i] - 1) + 1, in = s->input[i];
  int64_t stride = s->strides[i];
  if (s->auto_pad && strcmp(s->auto_pad, "VALID") == 0) return (in - extent + stride) / stride;
  if (s->auto_pad) return (in + stride - 1) / stride;
  int64_t span = in + s->pads[i] + s->pads[s->spatial + i] - extent;
  if (!s->ceil_mode) return span / stride + 1;
  int64_t size = (span + stride - 1) / stride + 1;
  if ((size - 1) * stride >= in + s->pads[i]) size--;
  return size;
}

/* Puts NaN, infinities and signed zeros at a few places of a contiguous-or-not tensor. */
static void add_specials(stax_tensor_t* t) {
  static const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, -NAN};
  int64_t count = stax_tensor_element_count(t);
  int32_t rank = stax_tensor_rank(t);
  for (int64_t k = 0; k < 12 && count > 0; k++) {
    int64_t i = (int64_t)(tg_next() % (uint64_t)count), rest = i, offset = 0;
    for (int32_t d = rank - 1; d >= 0; d--) {
      offset += (rest % stax_tensor_dims(t)[d]) * stax_tensor_strides(t)[d];
      rest /= stax_tensor_dims(t)[d];
    }
    ((float*)stax_tensor_data(t))[offset] = specials[k % 6];
  }
}

static void build_pool(test_group_t* tg, const pool_spec_t* s, int64_t* ints /* >= 24 */,
                       stax_dtype_t dtype) {
  int32_t rank = 2 + s->spatial;
  int64_t x_dims[6] = {s->n, s->c}, y_dims[6] = {s->n, s->c}, channel_dims[5] = {s->c};
  for (int32_t i = 0; i < s->spatial; i++) {
    x_dims[2 + i] = s->input[i];
    y_dims[2 + i] = output_size(s, i);
    channel_dims[1 + i] = 1;
  }
  int32_t x = tg_input_layout(tg, "x", dtype, rank, x_dims, s->x_layout, -3, 3);
  if (s->specials && tg->tensors[x] && dtype == STAX_DTYPE_FLOAT32) add_specials(tg->tensors[x]);
  stax_node_attr_t attrs[4];
  int32_t attr_count = 0;
  if (!is_global(s->op)) {
    int64_t* kernel = ints;
    int64_t* strides = ints + 4;
    int64_t* pads = ints + 8;
    int64_t* dilations = ints + 16;
    bool dilated = false;
    for (int32_t i = 0; i < s->spatial; i++) {
      kernel[i] = s->kernel[i];
      strides[i] = s->strides[i];
      dilations[i] = s->dilations[i];
      dilated = dilated || s->dilations[i] != 1;
      pads[i] = s->pads[i];
      pads[s->spatial + i] = s->pads[s->spatial + i];
    }
    attrs[attr_count++] = tg_attr_ints("kernel_shape", s->spatial, kernel);
    attrs[attr_count++] = tg_attr_ints("strides", s->spatial, strides);
    attrs[attr_count++] = s->auto_pad ? tg_attr_string("auto_pad", s->auto_pad)
                                      : tg_attr_ints("pads", 2 * s->spatial, pads);
    /* The harness takes four attributes: the fourth is the one this spec needs. */
    if (dilated)
      attrs[attr_count++] = tg_attr_ints("dilations", s->spatial, dilations);
    else if (s->op == STAX_OP_AveragePool && s->count_include_pad)
      attrs[attr_count++] = tg_attr_int("count_include_pad", 1);
    else if (s->ceil_mode)
      attrs[attr_count++] = tg_attr_int("ceil_mode", 1);
  }
  int32_t y = tg_node(tg, s->op, 1, &x, dtype, rank, y_dims, attr_count, attrs);
  int32_t value = y;
  if (s->epilogue == 1) value = tg_node(tg, STAX_OP_Relu, 1, &value, dtype, rank, y_dims, 0, NULL);
  if (s->epilogue == 2) {
    int32_t operands[2] = {value, tg_input(tg, "bias", dtype, rank - 1, channel_dims)};
    value = tg_node(tg, STAX_OP_Add, 2, operands, dtype, rank, y_dims, 0, NULL);
  }
  tg_output(tg, value);
}

static int32_t cases_run = 0;

static void pool_case(const pool_spec_t* s, const stax_jit_compile_options_t* options,
                      stax_threadpool_t* pool, const char* label) {
  test_group_t tg;
  tg_init(&tg);
  int64_t ints[24];
  build_pool(&tg, s, ints, STAX_DTYPE_FLOAT32);
  char name[200];
  snprintf(name, sizeof(name),
           "%s_%s_%dd_n%lld_c%lld_in%lldx%lld_k%lldx%lld_s%lldx%lld_d%lldx%lld_%s%s%s_v%d", label,
           stax_op_name(s->op), (int)s->spatial, (long long)s->n, (long long)s->c,
           (long long)s->input[0], (long long)s->input[1], (long long)s->kernel[0],
           (long long)s->kernel[1], (long long)s->strides[0], (long long)s->strides[1],
           (long long)s->dilations[0], (long long)s->dilations[1],
           s->auto_pad ? s->auto_pad : "pads", s->ceil_mode ? "_ceil" : "",
           s->count_include_pad ? "_include_pad" : "", options ? (int)options->vector_bits : 0);
  /* Windowed pools bit for bit; global averages within rounding. */
  double rtol = s->op == STAX_OP_GlobalAveragePool ? 1e-6 : 0;
  stax_status_code_t code = tg_check(&tg, name, options, pool, 0, rtol);
  if (code != STAX_OK_CODE) fprintf(stderr, "%s: compile status %d\n", name, (int)code);
  CHECK_EQ_INT(code, STAX_OK_CODE);
  cases_run++;
  tg_free(&tg);
}

static pool_spec_t base_spec(stax_op_t op, int32_t spatial) {
  pool_spec_t s;
  memset(&s, 0, sizeof(s));
  s.op = op;
  s.spatial = spatial;
  s.n = 1;
  s.c = 3;
  for (int32_t i = 0; i < 4; i++) {
    s.input[i] = 1;
    s.kernel[i] = 1;
    s.strides[i] = 1;
    s.dilations[i] = 1;
  }
  return s;
}

static pool_spec_t random_spec(int32_t index) {
  static const stax_op_t ops[] = {STAX_OP_MaxPool, STAX_OP_AveragePool, STAX_OP_MaxPool,
                                  STAX_OP_AveragePool, STAX_OP_GlobalAveragePool,
                                  STAX_OP_GlobalMaxPool};
  static const char* const auto_pads[] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
  int32_t spatial = index % 7 == 0 ? 1 : index % 7 == 1 ? 3 : 2;
  pool_spec_t s = base_spec(ops[index % 6], spatial);
  s.n = tg_int(0, 9) == 0 ? 0 : tg_int(1, 3);
  s.c = tg_int(1, 6);
  int32_t padding = (int32_t)tg_int(0, 5); /* 0-2 explicit, 3-5 auto_pad */
  if (padding >= 3 && !is_global(s.op)) s.auto_pad = auto_pads[padding - 3];
  s.ceil_mode = !s.auto_pad && tg_int(0, 2) == 0;
  s.count_include_pad = s.op == STAX_OP_AveragePool && tg_int(0, 1);
  for (int32_t i = 0; i < s.spatial; i++) {
    s.kernel[i] = tg_int(1, spatial == 3 ? 3 : 5);
    s.strides[i] = tg_int(1, 3);
    if (s.op == STAX_OP_MaxPool) s.dilations[i] = tg_int(1, 2);
    if (padding == 1 || padding == 2) {
      /* ONNX asks pads below the kernel; they may reach it here, which leaves windows with
       * nothing in range. */
      s.pads[i] = tg_int(0, s.kernel[i]);
      s.pads[s.spatial + i] = padding == 2 ? tg_int(0, s.kernel[i]) : s.pads[i];
    }
    int64_t extent = s.dilations[i] * (s.kernel[i] - 1) + 1;
    int64_t low = extent - s.pads[i] - s.pads[s.spatial + i];
    if (low < 1) low = 1;
    s.input[i] = low + tg_int(0, spatial == 1 ? 70 : spatial == 3 ? 6 : 40);
  }
  /* The harness's fourth attribute holds one of dilations, count_include_pad, ceil_mode. */
  bool dilated = false;
  for (int32_t i = 0; i < s.spatial; i++) dilated = dilated || s.dilations[i] != 1;
  if (dilated || s.count_include_pad) s.ceil_mode = false;
  s.epilogue = (int32_t)tg_int(0, 2);
  s.x_layout = (int32_t)tg_int(0, 5);
  if (s.x_layout > 3) s.x_layout = 0;
  s.specials = tg_int(0, 3) == 0;
  return s;
}

static void test_random_pools(void) {
  stax_jit_compile_options_t widths[4] = {
      {.vector_bits = 128}, {.vector_bits = 256}, {.vector_bits = 512}, {.vector_bits = 0}};
  int32_t before = cases_run;
  for (int32_t i = 0; i < 160; i++) {
    pool_spec_t s = random_spec(i);
    pool_case(&s, &widths[i % 4], NULL, "random");
  }
  printf("  %d random pools\n", (int)(cases_run - before));
}

/* ResNet's and the classifiers' pools, and rows whose widths sit around the vector width at
 * every width (the segments' vector loops end in tails). */
static void test_common_and_tails(void) {
  stax_jit_compile_options_t widths[4] = {
      {.vector_bits = 128}, {.vector_bits = 256}, {.vector_bits = 512}, {.vector_bits = 0}};
  static const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 56};
  for (size_t w = 0; w < 4; w++) {
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
      /* MaxPool 3x3 stride 2 pad 1 (ResNet's stem). */
      pool_spec_t s = base_spec(STAX_OP_MaxPool, 2);
      s.c = 2;
      s.input[0] = 2 + (int64_t)i % 3;
      s.input[1] = sizes[i];
      s.kernel[0] = s.kernel[1] = 3;
      s.strides[0] = s.strides[1] = 2;
      s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 1;
      s.epilogue = 1;
      pool_case(&s, &widths[w], NULL, "stem");
      /* MaxPool 2x2 stride 2 (VGG), AveragePool 3x3 stride 1 pad 1 with count_include_pad. */
      s = base_spec(STAX_OP_MaxPool, 2);
      s.input[0] = 4;
      s.input[1] = sizes[i] + 1;
      s.kernel[0] = s.kernel[1] = s.strides[0] = s.strides[1] = 2;
      s.ceil_mode = true;
      pool_case(&s, &widths[w], NULL, "vgg");
      s = base_spec(STAX_OP_AveragePool, 2);
      s.input[0] = 3;
      s.input[1] = sizes[i];
      s.kernel[0] = s.kernel[1] = 3;
      s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 1;
      s.count_include_pad = true;
      s.epilogue = 2;
      pool_case(&s, &widths[w], NULL, "inception");
      /* Global pools over H x W planes. */
      for (int32_t g = 0; g < 2; g++) {
        s = base_spec(g ? STAX_OP_GlobalMaxPool : STAX_OP_GlobalAveragePool, 2);
        s.n = 2;
        s.c = 5;
        s.input[0] = sizes[i] % 7 + 1;
        s.input[1] = sizes[i];
        s.specials = g == 1 && i % 2 == 0;
        pool_case(&s, &widths[w], NULL, "global");
      }
    }
  }
}

/* Windows over NaN-only, infinite and zero-signed data: the generic kernel's answers. */
static void test_special_values(void) {
  static const stax_op_t ops[] = {STAX_OP_MaxPool, STAX_OP_AveragePool, STAX_OP_GlobalMaxPool,
                                  STAX_OP_GlobalAveragePool};
  for (size_t o = 0; o < 4; o++) {
    for (int32_t layout = 0; layout < 4; layout++) {
      pool_spec_t s = base_spec(ops[o], 2);
      s.n = 2;
      s.c = 3;
      s.input[0] = 6;
      s.input[1] = 19;
      s.kernel[0] = 2;
      s.kernel[1] = 3;
      s.pads[1] = s.pads[3] = 1;
      s.x_layout = layout;
      s.specials = true;
      pool_case(&s, NULL, NULL, "specials");
    }
  }
}

/* Empty batches and channels, and every position's window outside the input (pads as large as
 * the kernel). */
static void test_edges(void) {
  pool_spec_t s = base_spec(STAX_OP_MaxPool, 2);
  s.n = 0;
  s.input[0] = s.input[1] = 5;
  s.kernel[0] = s.kernel[1] = 2;
  pool_case(&s, NULL, NULL, "empty_batch");
  s.n = 1;
  s.c = 0;
  pool_case(&s, NULL, NULL, "empty_channels");
  for (int32_t op = 0; op < 2; op++) {
    s = base_spec(op ? STAX_OP_AveragePool : STAX_OP_MaxPool, 2);
    s.input[0] = 1;
    s.input[1] = 2;
    s.kernel[0] = s.kernel[1] = 2;
    s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 2;
    for (int32_t include = 0; include < 2; include++) {
      s.count_include_pad = op == 1 && include;
      pool_case(&s, NULL, NULL, "outside");
    }
  }
}

static void test_threads(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(tg_sys(), 4, &pool));
  stax_jit_compile_options_t four = {.thread_count = 4};
  pool_spec_t s = base_spec(STAX_OP_MaxPool, 2);
  s.n = 3;
  s.c = 17;
  s.input[0] = 30;
  s.input[1] = 41;
  s.kernel[0] = s.kernel[1] = 3;
  s.strides[0] = s.strides[1] = 2;
  s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 1;
  s.epilogue = 2;
  pool_case(&s, &four, pool, "threads_max");
  s.op = STAX_OP_AveragePool;
  s.n = 9;
  s.c = 2;
  pool_case(&s, &four, pool, "threads_average");
  s = base_spec(STAX_OP_GlobalAveragePool, 2);
  s.n = 2;
  s.c = 64;
  s.input[0] = s.input[1] = 7;
  pool_case(&s, &four, pool, "threads_global");
  stax_threadpool_destroy(pool);
}

static void check_refused(test_group_t* tg, const char* name, const char* needle) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  stax_jit_kernel_t* kernel = NULL;
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(tg, name), NULL, &kernel),
              STAX_UNIMPLEMENTED, needle);
  CHECK(kernel == NULL);
}

static void test_refusals(void) {
  int64_t ints[24];
  test_group_t tg;
  /* Other dtypes. */
  static const stax_dtype_t dtypes[] = {STAX_DTYPE_FLOAT64, STAX_DTYPE_FLOAT16};
  for (size_t i = 0; i < 2; i++) {
    tg_init(&tg);
    pool_spec_t s = base_spec(i ? STAX_OP_AveragePool : STAX_OP_MaxPool, 2);
    s.input[0] = s.input[1] = 4;
    s.kernel[0] = s.kernel[1] = 2;
    build_pool(&tg, &s, ints, dtypes[i]);
    check_refused(&tg, "pool_dtype", "float32 only");
    tg_free(&tg);
  }
  /* MaxPool's Indices output. */
  tg_init(&tg);
  int64_t x_dims[4] = {1, 2, 4, 4}, y_dims[4] = {1, 2, 2, 2};
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 4, x_dims);
  int32_t outs[2] = {tg_value(&tg, STAX_DTYPE_FLOAT32, 4, y_dims),
                     tg_value(&tg, STAX_DTYPE_INT64, 4, y_dims)};
  int64_t two[2] = {2, 2};
  stax_node_attr_t attrs[2] = {tg_attr_ints("kernel_shape", 2, two),
                               tg_attr_ints("strides", 2, two)};
  tg_node_n(&tg, STAX_OP_MaxPool, 1, &x, 2, outs, 2, attrs);
  tg_output(&tg, outs[0]);
  tg_output(&tg, outs[1]);
  check_refused(&tg, "pool_indices", "Indices");
  tg_free(&tg);
  /* An input computed in the group, and a pool with a second pool. */
  for (int32_t variant = 0; variant < 2; variant++) {
    tg_init(&tg);
    x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 4, x_dims);
    int32_t in = variant == 0 ? tg_node(&tg, STAX_OP_Relu, 1, &x, STAX_DTYPE_FLOAT32, 4, x_dims, 0,
                                        NULL)
                              : x;
    int32_t y = tg_node(&tg, STAX_OP_MaxPool, 1, &in, STAX_DTYPE_FLOAT32, 4, y_dims, 2, attrs);
    if (variant == 1) {
      int64_t one[4] = {1, 2, 1, 1};
      y = tg_node(&tg, STAX_OP_GlobalMaxPool, 1, &y, STAX_DTYPE_FLOAT32, 4, one, 0, NULL);
    }
    tg_output(&tg, y);
    check_refused(&tg, "pool_mixed",
                  variant == 0 ? "computed in the group" : "more than one pooling node");
    tg_free(&tg);
  }
  /* Four spatial dims. */
  tg_init(&tg);
  pool_spec_t s = base_spec(STAX_OP_GlobalAveragePool, 3);
  s.spatial = 4;
  build_pool(&tg, &s, ints, STAX_DTYPE_FLOAT32);
  check_refused(&tg, "pool_rank", "spatial dims");
  tg_free(&tg);
}

STAX_TEST_MAIN(STAX_TEST(test_random_pools), STAX_TEST(test_common_and_tails),
               STAX_TEST(test_special_values), STAX_TEST(test_edges), STAX_TEST(test_threads),
               STAX_TEST(test_refusals))
