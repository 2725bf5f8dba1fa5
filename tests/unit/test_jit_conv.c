/* Tests for the JIT's Conv lowering (lower_conv.c): Conv + bias + activation + residual
 * epilogues as one kernel, compared with the generic kernels run node by node. Random shapes
 * over 1-D and 2-D (and one 3-D) convolutions: kernel sizes 1/3/5/7 (non-square too), strides
 * 1-3, dilations 1-2, explicit (asymmetric) pads and every auto_pad, group 1, 2 and
 * depthwise, with and without bias, Relu/Gelu/Sigmoid epilogues, residuals broadcast or full,
 * strided and reversed input views, three vector widths, the thread pool; odd sizes (1x1
 * images, rows narrower than a vector, channel counts off the tile), input channels in K
 * blocks (forced small, and the natural size), empty batches; the
 * refusals (other dtypes, a weight computed in the group, a Conv with a MatMul or a
 * reduction). Also prints (never asserts) a ResNet-like 3x3 conv's time, JIT against the
 * generic kernel, and the compile time. */
#include <stdlib.h>
#include <time.h>

#include "test_jit_util.h"

#define NO_ACTIVATION STAX_OP_COUNT

typedef struct conv_spec_t {
  int32_t spatial;
  int64_t n, c, m, group;
  int64_t input[3], kernel[3], strides[3], dilations[3], pads[6];
  const char* auto_pad; /* NULL: explicit pads */
  bool bias;
  bool channel_add;     /* + a [M, 1, .., 1] tensor (a bias Add node) */
  stax_op_t activation; /* NO_ACTIVATION for none */
  int32_t residual;     /* 0 none, 1 a full tensor, 2 a [M, 1, .., 1] broadcast, 3 X itself */
  bool conv_output;     /* the Conv's own result is an output too */
  int32_t x_layout;     /* tg_input_layout's layouts */
} conv_spec_t;

/* The output size the ONNX rules give (written out here independently of the kernels). */
static int64_t output_size(const conv_spec_t* s, int32_t i) {
  int64_t extent = s->dilations[i] * (s->kernel[i] - 1) + 1, in = s->input[i];
  int64_t stride = s->strides[i];
  if (!s->auto_pad) {
    int64_t span = in + s->pads[i] + s->pads[s->spatial + i] - extent;
    return span < 0 ? 0 : span / stride + 1;
  }
  if (strcmp(s->auto_pad, "VALID") == 0) {
    int64_t span = in - extent + 1;
    return span <= 0 ? 0 : (span + stride - 1) / stride;
  }
  return (in + stride - 1) / stride; /* SAME_UPPER / SAME_LOWER */
}

/* Builds the group for a spec (inputs filled on a 1/8 grid so the convolution sums are exact
 * in float32 and only the epilogue's math can differ). */
static void build_conv(test_group_t* tg, const conv_spec_t* s, int64_t* ints /* >= 24 */,
                       stax_dtype_t dtype) {
  int32_t rank = 2 + s->spatial;
  int64_t x_dims[5] = {s->n, s->c}, w_dims[5] = {s->m, s->group ? s->c / s->group : 0};
  int64_t y_dims[5] = {s->n, s->m}, channel_dims[4] = {s->m}, bias_dims[1] = {s->m};
  for (int32_t i = 0; i < s->spatial; i++) {
    x_dims[2 + i] = s->input[i];
    w_dims[2 + i] = s->kernel[i];
    y_dims[2 + i] = output_size(s, i);
    channel_dims[1 + i] = 1;
  }
  tg_grid = true;
  int32_t x = tg_input_layout(tg, "x", dtype, rank, x_dims, s->x_layout, -2, 2);
  int32_t w = tg_input_layout(tg, "w", dtype, rank, w_dims, 0, -2, 2);
  int32_t conv_inputs[3] = {x, w, -1};
  int32_t conv_input_count = 2;
  if (s->bias) {
    conv_inputs[2] = tg_input_layout(tg, "b", dtype, 1, bias_dims, 0, -2, 2);
    conv_input_count = 3;
  }
  tg_grid = false;
  stax_node_attr_t attrs[4];
  int32_t attr_count = 0;
  int64_t* strides = ints;
  int64_t* dilations = ints + 4;
  int64_t* pads = ints + 8;
  int64_t* kernel = ints + 16;
  bool dilated = false;
  for (int32_t i = 0; i < s->spatial; i++) {
    strides[i] = s->strides[i];
    dilations[i] = s->dilations[i];
    kernel[i] = s->kernel[i];
    dilated = dilated || s->dilations[i] != 1;
    pads[i] = s->pads[i];
    pads[s->spatial + i] = s->pads[s->spatial + i];
  }
  attrs[attr_count++] = tg_attr_ints("strides", s->spatial, strides);
  /* The harness takes four attributes: kernel_shape stands in for unit dilations. */
  attrs[attr_count++] = dilated ? tg_attr_ints("dilations", s->spatial, dilations)
                                : tg_attr_ints("kernel_shape", s->spatial, kernel);
  attrs[attr_count++] = s->auto_pad ? tg_attr_string("auto_pad", s->auto_pad)
                                    : tg_attr_ints("pads", 2 * s->spatial, pads);
  attrs[attr_count++] = tg_attr_int("group", s->group);
  int32_t y = tg_node(tg, STAX_OP_Conv, conv_input_count, conv_inputs, dtype, rank, y_dims,
                      attr_count, attrs);
  if (s->conv_output) tg_output(tg, y);
  int32_t value = y;
  if (s->channel_add) {
    int32_t cb = tg_input(tg, "channel_bias", dtype, rank - 1, channel_dims);
    int32_t operands[2] = {value, cb};
    value = tg_node(tg, STAX_OP_Add, 2, operands, dtype, rank, y_dims, 0, NULL);
  }
  if (s->activation != NO_ACTIVATION)
    value = tg_node(tg, s->activation, 1, &value, dtype, rank, y_dims, 0, NULL);
  if (s->residual) {
    int32_t r = s->residual == 3   ? x
                : s->residual == 1 ? tg_input_layout(tg, "residual", dtype, rank, y_dims, 0, -3, 3)
                                   : tg_input(tg, "residual", dtype, rank - 1, channel_dims);
    int32_t operands[2] = {value, r};
    value = tg_node(tg, STAX_OP_Add, 2, operands, dtype, rank, y_dims, 0, NULL);
  }
  if (value != y || !s->conv_output) tg_output(tg, value);
}

static int32_t cases_run = 0;

static void conv_case(const conv_spec_t* s, const stax_jit_compile_options_t* options,
                      stax_threadpool_t* pool, const char* label) {
  test_group_t tg;
  tg_init(&tg);
  int64_t ints[24];
  build_conv(&tg, s, ints, STAX_DTYPE_FLOAT32);
  char name[160];
  snprintf(name, sizeof(name),
           "%s_%dd_n%lld_c%lld_m%lld_g%lld_in%lldx%lld_k%lldx%lld_s%lldx%lld_d%lldx%lld_%s", label,
           (int)s->spatial, (long long)s->n, (long long)s->c, (long long)s->m, (long long)s->group,
           (long long)s->input[0], (long long)s->input[1], (long long)s->kernel[0],
           (long long)s->kernel[1], (long long)s->strides[0], (long long)s->strides[1],
           (long long)s->dilations[0], (long long)s->dilations[1],
           s->auto_pad ? s->auto_pad : "pads");
  int64_t depth = (s->group ? s->c / s->group : 0) * s->kernel[0] * s->kernel[1] * s->kernel[2];
  stax_status_code_t code = tg_check(&tg, name, options, pool, 1e-5 * (double)(depth + 1), 1e-4);
  if (code != STAX_OK_CODE) fprintf(stderr, "%s: compile status %d\n", name, (int)code);
  CHECK_EQ_INT(code, STAX_OK_CODE);
  cases_run++;
  tg_free(&tg);
}

/* Which compute a Conv with a constant weight takes (lower_conv.c, lower_conv_patch.c). */
typedef enum tile_kind_e {
  POSITION_TILES, /* vectors along an output row: input vectors x<tile>_<tap> */
  CHANNEL_TILES,  /* vectors over output channels, rows of at most half a 512-bit vector */
  PATCH_TILES,    /* a GEMM over the plane's patches: a "patch" scratch */
} tile_kind_t;

/* The kind the exact-shape lowering picks at an explicit vector width: channel tiles for rows
 * of at most half a native vector with a native vector of channels per group (512 bits
 * only); patches for other rows narrower than 3.5 native vectors (lower_conv_patch_below)
 * with one group and two native vectors of channels; else position tiles. */
static tile_kind_t expected_kind(const conv_spec_t* s, const stax_jit_compile_options_t* options) {
  int64_t lanes = options->vector_bits / 32, row = output_size(s, s->spatial - 1);
  int64_t mg = s->group ? s->m / s->group : 0;
  if (lanes >= 16 && row > 0 && 2 * row <= lanes && mg >= lanes) return CHANNEL_TILES;
  if (row > 0 && 2 * row < 7 * lanes && s->group == 1 && mg >= 2 * lanes) return PATCH_TILES;
  return POSITION_TILES;
}

/* conv_case with a constant weight (as a model's), at an explicit vector width: the weights
 * are repacked once into per-tile panels (a "pack_w" stage filling "wt" from the constant),
 * and the kernel's IR must show the tile kind expected_kind gives. Two runs: the second
 * reuses the repacked weights kept with the constant. */
static void conv_case_constant(const conv_spec_t* s, const stax_jit_compile_options_t* options,
                               stax_threadpool_t* pool, const char* label) {
  tile_kind_t want = expected_kind(s, options);
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  test_group_t tg;
  tg_init(&tg);
  int64_t ints[24];
  build_conv(&tg, s, ints, STAX_DTYPE_FLOAT32);
  int32_t w = 1; /* build_conv's second value */
  CHECK(tg.values[w].rank == 2 + s->spatial && tg.values[w].dims[0] == s->m);
  tg.values[w].constant = tg.tensors[w];
  stax_buffer_set_immutable(tg.tensors[w]->buffer);
  char name[96];
  snprintf(name, sizeof(name), "%s_c%lld_m%lld_g%lld_in%lldx%lld", label, (long long)s->c,
           (long long)s->m, (long long)s->group, (long long)s->input[0], (long long)s->input[1]);
  stax_jit_compile_options_t opts = options ? *options : (stax_jit_compile_options_t){0};
  opts.keep_kernel_ir = true;
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, name), &opts, &kernel));
  if (!kernel) {
    tg_free(&tg);
    return;
  }
  /* Every kind reads the weights repacked into panels; a channel tile names its per-tap
   * weight vectors w<tile>_<tap>, a position tile its input vectors x<tile>_<tap>, the patch
   * GEMM its scratch of patches. */
  const char* ir = stax_jit_kernel_ir_text(kernel);
  CHECK(ir && strstr(ir, "(fills wt from constant w)") != NULL);
  bool kinds[3] = {ir && strstr(ir, "x0_0") != NULL, ir && strstr(ir, "w0_0") != NULL,
                   ir && strstr(ir, "patch[") != NULL};
  for (int32_t kind = 0; kind < 3; kind++) {
    if (kinds[kind] != (kind == (int32_t)want))
      fprintf(stderr, "%s: tile kind %d %s, expected kind %d\n", name, (int)kind,
              kinds[kind] ? "present" : "absent", (int)want);
    CHECK(kinds[kind] == (kind == (int32_t)want));
  }
  stax_tensor_t* expected[TG_MAX_VALUES] = {NULL};
  CHECK_OK(tg_reference(&tg, expected));
  int64_t depth = (s->c / s->group) * s->kernel[0] * s->kernel[1] * s->kernel[2];
  for (int run = 0; run < 2; run++) {
    stax_tensor_t* actual[TG_MAX_VALUES] = {NULL};
    CHECK_OK(tg_run(&tg, kernel, run ? pool : NULL, actual));
    for (int32_t i = 0; i < tg.output_count; i++) {
      int64_t bad = tg_compare(name, actual[i], expected[i], 1e-5 * (double)(depth + 1), 1e-4);
      if (bad) fprintf(stderr, "%s: run %d output %d: %lld mismatches\n", name, run, (int)i,
                       (long long)bad);
      CHECK(bad == 0);
      stax_tensor_release(actual[i]);
    }
  }
  for (int32_t i = 0; i < tg.output_count; i++) stax_tensor_release(expected[i]);
  stax_jit_kernel_release(kernel);
  cases_run++;
  tg_free(&tg);
}

static conv_spec_t base_spec(int32_t spatial) {
  conv_spec_t s;
  memset(&s, 0, sizeof(s));
  s.spatial = spatial;
  s.n = 1;
  s.c = 3;
  s.m = 4;
  s.group = 1;
  for (int32_t i = 0; i < 3; i++) {
    s.input[i] = 1;
    s.kernel[i] = 1;
    s.strides[i] = 1;
    s.dilations[i] = 1;
  }
  s.activation = NO_ACTIVATION;
  return s;
}

/* A random spec: sizes small enough for quick references, large enough for full tiles. */
static conv_spec_t random_spec(int32_t index) {
  static const int64_t kernels[] = {1, 3, 5, 7};
  static const char* const auto_pads[] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
  static const stax_op_t activations[] = {STAX_OP_Relu, STAX_OP_Gelu, STAX_OP_Sigmoid,
                                          NO_ACTIVATION};
  conv_spec_t s = base_spec(index % 3 == 0 ? 1 : 2);
  s.n = tg_int(1, 3);
  int32_t grouping = (int32_t)tg_int(0, 2);
  if (grouping == 0) {
    s.c = tg_int(1, 9);
    s.m = tg_int(1, 15);
  } else if (grouping == 1) {
    s.group = 2;
    s.c = 2 * tg_int(1, 4);
    s.m = 2 * tg_int(1, 8);
  } else {
    s.c = tg_int(1, 12);
    s.group = s.c;
    s.m = s.c * tg_int(1, 2);
  }
  int32_t padding = (int32_t)tg_int(0, 5); /* 0-2 explicit, 3-5 auto_pad */
  if (padding >= 3) s.auto_pad = auto_pads[padding - 3];
  for (int32_t i = 0; i < s.spatial; i++) {
    s.kernel[i] = kernels[tg_int(0, 3)];
    s.strides[i] = tg_int(1, 3);
    s.dilations[i] = tg_int(1, 2);
    if (padding == 1 || padding == 2) {
      s.pads[i] = tg_int(0, 3);
      s.pads[s.spatial + i] = padding == 2 ? tg_int(0, 3) : s.pads[i];
    }
    int64_t extent = s.dilations[i] * (s.kernel[i] - 1) + 1;
    int64_t low = extent - s.pads[i] - s.pads[s.spatial + i];
    if (low < 1) low = 1;
    s.input[i] = low + tg_int(0, s.spatial == 1 ? 70 : 24);
  }
  s.bias = tg_int(0, 1);
  s.channel_add = tg_int(0, 3) == 0;
  s.activation = activations[tg_int(0, 3)];
  s.residual = (int32_t)tg_int(0, 2);
  s.conv_output = tg_int(0, 4) == 0;
  s.x_layout = (int32_t)tg_int(0, 5);
  if (s.x_layout == 1 || s.x_layout > 3) s.x_layout = s.x_layout == 1 ? 3 : 0;
  if (index % 11 == 5) s.x_layout = 1; /* swapped innermost dims (a transposed view) */
  return s;
}

static void test_random_convs(void) {
  stax_jit_compile_options_t widths[3] = {
      {.vector_bits = 128}, {.vector_bits = 256}, {.vector_bits = 512}};
  int32_t before = cases_run;
  for (int32_t i = 0; i < 72; i++) {
    conv_spec_t s = random_spec(i);
    conv_case(&s, &widths[i % 3], NULL, "random");
  }
  printf("  %d random convolutions\n", (int)(cases_run - before));
}

/* Sizes at the edges of the tiling: 1x1 images, rows narrower than a vector, channel counts
 * around MR, a 1x1 conv with a long channel loop, a 3-D conv. */
static void test_odd_sizes(void) {
  conv_spec_t s = base_spec(2);
  s.c = 5;
  s.m = 7;
  s.bias = true;
  s.activation = STAX_OP_Relu;
  conv_case(&s, NULL, NULL, "one_pixel"); /* 1x1 image, 1x1 kernel */
  s.kernel[0] = s.kernel[1] = 3;
  s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 1;
  conv_case(&s, NULL, NULL, "one_pixel_padded"); /* only the centre tap sees data */
  static const int64_t channel_counts[] = {1, 5, 6, 7, 12, 13, 25};
  for (size_t i = 0; i < sizeof(channel_counts) / sizeof(channel_counts[0]); i++) {
    s = base_spec(2);
    s.c = 4;
    s.m = channel_counts[i];
    s.input[0] = 5;
    s.input[1] = 3 + (int64_t)i * 6; /* 3 .. 39 wide: under one vector to several tiles */
    s.kernel[0] = s.kernel[1] = 3;
    s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 1;
    s.bias = i % 2 == 0;
    s.activation = STAX_OP_Gelu;
    s.residual = 1;
    conv_case(&s, NULL, NULL, "tiles");
  }
  s = base_spec(2);
  s.c = 37;
  s.m = 9;
  s.input[0] = 4;
  s.input[1] = 21;
  conv_case(&s, NULL, NULL, "pointwise_deep"); /* 1x1: the channel loop is unrolled */
  s = base_spec(3);
  s.c = 2;
  s.m = 3;
  s.input[0] = 4;
  s.input[1] = 5;
  s.input[2] = 9;
  s.kernel[0] = 3;
  s.kernel[1] = 1;
  s.kernel[2] = 3;
  s.pads[0] = s.pads[2] = s.pads[3] = s.pads[5] = 1;
  s.strides[2] = 2;
  s.bias = true;
  s.activation = STAX_OP_Sigmoid;
  conv_case(&s, NULL, NULL, "conv3d");
  /* The residual is X itself (same shape: C == M, stride 1, SAME padding). */
  s = base_spec(2);
  s.c = s.m = 8;
  s.input[0] = 9;
  s.input[1] = 19;
  s.kernel[0] = s.kernel[1] = 3;
  s.auto_pad = "SAME_UPPER";
  s.bias = true;
  s.residual = 3;
  s.activation = STAX_OP_Relu;
  s.conv_output = true;
  conv_case(&s, NULL, NULL, "identity_residual");
}

/* Narrow output rows (late CNN stages) at 512 bits: channel tiles over 7-wide rows and
 * narrower, stride 2 into 7 wide, dilations, pads, groups of 16 and more channels, channel
 * counts off the 32-channel tile (16, 40, 100), batches, 1-D, residuals and activations in
 * the epilogue, the thread pool; and the cases that keep position tiles (rows wider than 8,
 * fewer than 16 channels per group, 256-bit vectors). */
static void test_channel_tiles(void) {
  stax_jit_compile_options_t wide = {.vector_bits = 512}, narrow = {.vector_bits = 256};
  stax_threadpool_t* pool = stax_threadpool_default();
  int32_t before = cases_run;
  static const int64_t ms[] = {16, 32, 40, 100, 64};
  for (int32_t i = 0; i < 20; i++) {
    conv_spec_t s = base_spec(2);
    s.n = 1 + i % 2;
    s.c = i % 4 == 0 ? 3 : 8 + 8 * (i % 3);
    s.m = ms[i % 5];
    if (i % 7 == 3) {
      s.group = 2;
      s.c = 16;
      s.m = 2 * 16 * (1 + i % 2);
    }
    int64_t out_w = 1 + i % 8; /* 1 .. 8 outputs wide */
    s.kernel[0] = s.kernel[1] = i % 3 == 1 ? 1 : 3;
    s.strides[0] = s.strides[1] = i % 4 == 2 ? 2 : 1;
    s.dilations[1] = i % 5 == 4 ? 2 : 1;
    for (int32_t d = 0; d < 2; d++) {
      int64_t pad = s.kernel[d] == 3 && i % 2 == 0 ? 1 : 0;
      s.pads[d] = pad;
      s.pads[2 + d] = i % 6 == 5 ? 0 : pad;
      int64_t extent = s.dilations[d] * (s.kernel[d] - 1) + 1;
      int64_t want = d == 1 ? out_w : 3 + i % 6;
      s.input[d] = (want - 1) * s.strides[d] + extent - s.pads[d] - s.pads[2 + d];
    }
    s.bias = i % 3 != 2;
    s.activation = i % 2 ? STAX_OP_Relu : NO_ACTIVATION;
    s.residual = i % 4 == 1 ? 1 : 0;
    s.conv_output = i % 5 == 0;
    CHECK(expected_kind(&s, &wide) == CHANNEL_TILES);
    conv_case_constant(&s, &wide, i % 3 == 0 ? pool : NULL, "channel_tiles");
  }
  /* 1-D: rows of 5 outputs, 48 channels. */
  conv_spec_t s = base_spec(1);
  s.c = 12;
  s.m = 48;
  s.input[0] = 7;
  s.kernel[0] = 3;
  s.bias = true;
  conv_case_constant(&s, &wide, NULL, "channel_tiles_1d");
  /* Other kinds: rows of 9 (patches), 8 channels (position tiles), 256-bit vectors
   * (patches). */
  s = base_spec(2);
  s.c = 16;
  s.m = 32;
  s.input[0] = 9;
  s.input[1] = 9;
  s.kernel[0] = s.kernel[1] = 1;
  conv_case_constant(&s, &wide, NULL, "patches_wide_row");
  s.input[1] = 7;
  s.m = 8;
  CHECK(expected_kind(&s, &wide) == POSITION_TILES);
  conv_case_constant(&s, &wide, NULL, "position_tiles_few_channels");
  s.m = 32;
  CHECK(expected_kind(&s, &narrow) == PATCH_TILES);
  conv_case_constant(&s, &narrow, NULL, "patches_256");
  /* Random convolutions with constant weights at every width: packed position tiles (groups,
   * depthwise, strides into phase-split rows, dilations, channel counts off the tile), and
   * channel tiles where a 512-bit row is narrow enough. */
  stax_jit_compile_options_t widths[3] = {
      {.vector_bits = 128}, {.vector_bits = 256}, {.vector_bits = 512}};
  for (int32_t i = 0; i < 36; i++) {
    conv_spec_t r = random_spec(i);
    if (i % 4 == 0) r.m = 16 * (1 + i % 3) * r.group; /* enough channels for channel tiles */
    if (r.group > 1 && r.c % r.group != 0) continue;
    conv_case_constant(&r, &widths[i % 3], i % 5 == 0 ? pool : NULL, "random_constant");
  }
  printf("  %d convolutions with a constant weight\n", (int)(cases_run - before));
}

/* Rows narrower than 3.5 native vectors with one group and many channels: the GEMM over patches
 * (lower_conv_patch.c) at three widths, on one thread and four. Planes smaller than the
 * tile's positions (1x1, 1x2, 2x2) and around it, an edge panel of channels (M off two native
 * vectors), strides into phase-split rows, dilations, explicit and SAME pads, 1-D and 3-D,
 * batches, residuals (full, broadcast, X itself), the Conv's own output, transposed and
 * strided input views, activations. */
static void test_patches(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(tg_sys(), 4, &pool));
  static const int64_t bits[] = {128, 256, 512};
  static const int64_t channels[] = {1, 3, 8, 17, 32};
  static const int64_t kernels[] = {3, 1, 3, 5};
  static const stax_op_t activations[] = {STAX_OP_Relu, STAX_OP_Gelu, NO_ACTIVATION};
  int32_t before = cases_run;
  for (int32_t i = 0; i < 36; i++) {
    stax_jit_compile_options_t options = {.vector_bits = (int32_t)bits[i % 3],
                                          .thread_count = i % 4 == 1 ? 4 : 1};
    int64_t lanes = bits[i % 3] / 32;
    conv_spec_t s = base_spec(i % 10 == 4 ? 1 : i % 10 == 9 ? 3 : 2);
    s.n = 1 + i % 3;
    s.c = channels[i % 5];
    s.m = 2 * lanes * (1 + i % 2) + (i % 4 == 3 ? lanes / 2 : 0);
    bool same = i % 7 == 2;
    if (same) s.auto_pad = i % 2 ? "SAME_LOWER" : "SAME_UPPER";
    /* The innermost output size: under 3.5 native vectors (and, at 512 bits, wider than a
     * channel tile's row); the first cases are the smallest planes. */
    int64_t lo = lanes >= 16 ? lanes / 2 + 1 : 1, hi = 7 * lanes / 2 - 1;
    int64_t want_last = i < 9 ? lo + i % 3 : lo + (i * 7) % (hi - lo + 1);
    for (int32_t d = 0; d < s.spatial; d++) {
      bool last = d == s.spatial - 1;
      s.kernel[d] = kernels[(i + d) % 4];
      s.strides[d] = i % 5 == 2 ? 2 : 1;
      s.dilations[d] = i % 6 == 5 && s.kernel[d] > 1 ? 2 : 1;
      int64_t extent = s.dilations[d] * (s.kernel[d] - 1) + 1;
      int64_t want = last ? want_last : i < 9 ? 1 + i % 2 : 1 + (i * 5) % (s.spatial == 3 ? 3 : 9);
      if (same) {
        s.input[d] = want * s.strides[d] - (i % (int32_t)s.strides[d]);
        continue;
      }
      s.pads[d] = s.kernel[d] > 1 ? (i % 3 == 0 ? 0 : 1) : 0;
      s.pads[s.spatial + d] = s.kernel[d] > 1 && i % 8 != 3 ? s.pads[d] : 0;
      s.input[d] = (want - 1) * s.strides[d] + extent - s.pads[d] - s.pads[s.spatial + d];
    }
    s.bias = i % 3 != 1;
    s.channel_add = i % 9 == 4;
    s.activation = activations[i % 3];
    s.residual = (int32_t)(i % 3);
    if (i % 10 == 6) {
      /* X itself as the residual: same size out. */
      s.c = s.m;
      s.auto_pad = "SAME_UPPER";
      for (int32_t d = 0; d < s.spatial; d++) {
        s.strides[d] = s.dilations[d] = 1;
        s.pads[d] = s.pads[s.spatial + d] = 0;
        s.input[d] = d == s.spatial - 1 ? want_last : 3;
      }
      s.residual = 3;
    }
    s.conv_output = i % 5 == 1;
    s.x_layout = i % 11 == 5 ? 1 : i % 4 == 2 ? 3 : 0;
    if (expected_kind(&s, &options) != PATCH_TILES)
      fprintf(stderr, "patches case %d: expected kind %d\n", (int)i, (int)expected_kind(&s, &options));
    CHECK(expected_kind(&s, &options) == PATCH_TILES);
    conv_case_constant(&s, &options, options.thread_count > 1 ? pool : NULL, "patches");
  }
  /* Switched off: position tiles. */
  conv_spec_t s = base_spec(2);
  s.c = 16;
  s.m = 32;
  s.input[0] = s.input[1] = 7;
  s.kernel[0] = s.kernel[1] = 3;
  s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 1;
  stax_jit_compile_options_t avx2 = {.vector_bits = 256};
  CHECK(expected_kind(&s, &avx2) == PATCH_TILES);
  setenv("STAX_JIT_CONV_PATCH", "0", 1);
  test_group_t tg;
  tg_init(&tg);
  int64_t ints[24];
  build_conv(&tg, &s, ints, STAX_DTYPE_FLOAT32);
  tg.values[1].constant = tg.tensors[1];
  stax_buffer_set_immutable(tg.tensors[1]->buffer);
  stax_jit_compile_options_t opts = {.vector_bits = 256, .keep_kernel_ir = true};
  stax_jit_kernel_t* kernel = NULL;
  stax_jit_backend_t* backend = tg_backend();
  if (backend) {
    CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "patches_off"), &opts, &kernel));
    const char* ir = kernel ? stax_jit_kernel_ir_text(kernel) : NULL;
    CHECK(ir && strstr(ir, "patch[") == NULL && strstr(ir, "x0_0") != NULL);
    if (kernel) stax_jit_kernel_release(kernel);
  }
  tg_free(&tg);
  unsetenv("STAX_JIT_CONV_PATCH");
  stax_threadpool_destroy(pool);
  printf("  %d convolutions as GEMMs over patches\n", (int)(cases_run - before));
}

/* Whether a conv spec's kernel (constant weights, the options' width) cuts its input channels
 * into K blocks: its IR has the "partial" scratch that carries sums between them. */
static bool kernel_has_k_blocks(const conv_spec_t* s, const stax_jit_compile_options_t* options) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return false;
  test_group_t tg;
  tg_init(&tg);
  int64_t ints[24];
  build_conv(&tg, s, ints, STAX_DTYPE_FLOAT32);
  stax_jit_compile_options_t opts = options ? *options : (stax_jit_compile_options_t){0};
  opts.keep_kernel_ir = true;
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, "k_blocks_ir"), &opts, &kernel));
  const char* ir = kernel ? stax_jit_kernel_ir_text(kernel) : NULL;
  bool blocked = ir && strstr(ir, "partial[") != NULL;
  if (kernel) stax_jit_kernel_release(kernel);
  tg_free(&tg);
  return blocked;
}

/* Input channels in K blocks (lower_conv.c choose_k_blocks), forced small with
 * STAX_JIT_CONV_KC so small shapes take every part of the nest: the first block, the middle
 * loop, the last (with the epilogue), channel counts off the block (9 = 5 + 4, 17 = 6 + 6 + 5,
 * 37 in five blocks), a block of one channel, groups, depthwise (one channel per group: no
 * blocks), strides (phase-split rows), dilations, 1-D and 3-D, residuals (full, broadcast, X
 * itself), the Conv's own output stored too (partial sums must not leak into it), constant
 * weights (packed panels) at three widths, and the thread pool (rows, channel tiles or
 * positions in parallel with blocks inside). Then the natural block size: a 64-channel 3x3
 * conv over 20-wide rows blocks on its own, rows narrower than a vector or
 * STAX_JIT_CONV_K_BLOCKS=0 do not. */
static void test_k_blocks(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(tg_sys(), 4, &pool));
  stax_jit_compile_options_t widths[3] = {
      {.vector_bits = 128}, {.vector_bits = 256}, {.vector_bits = 512, .thread_count = 4}};
  int32_t before = cases_run, k_blocked = 0;
  static const int64_t channels[] = {9, 17, 37, 12};
  static const char* const block_sizes[] = {"4", "6", "8", "1"};
  for (int32_t i = 0; i < 24; i++) {
    setenv("STAX_JIT_CONV_KC", block_sizes[i % 4], 1);
    conv_spec_t s = base_spec(i % 8 == 7 ? 1 : 2);
    s.n = 1 + i % 2;
    s.c = channels[i % 4];
    s.m = 5 + 3 * (i % 5); /* 5 .. 17: full and edge channel tiles */
    if (i % 6 == 4) {
      s.group = 2;
      s.c = 2 * channels[i % 4];
      s.m = 2 * (4 + i % 3);
    }
    if (i % 6 == 5) s.group = s.m = s.c; /* depthwise: Cg = 1, never blocked */
    for (int32_t d = 0; d < s.spatial; d++) {
      s.kernel[d] = i % 5 == 3 ? 1 : 3;
      s.strides[d] = i % 4 == 2 && d == s.spatial - 1 ? 2 : 1;
      s.dilations[d] = i % 7 == 1 ? 2 : 1;
      s.pads[d] = s.pads[s.spatial + d] = s.kernel[d] == 3 ? 1 : 0;
      s.input[d] = d == s.spatial - 1 ? 9 + 5 * (i % 6) : 4 + i % 3; /* 9 .. 34 wide */
    }
    s.bias = i % 3 != 1;
    s.activation = i % 2 ? STAX_OP_Relu : STAX_OP_Gelu;
    s.residual = (int32_t)(i % 3);
    if (i % 8 == 6 && s.group == 1) {
      s.m = s.c; /* X itself as the residual: same size out */
      for (int32_t d = 0; d < s.spatial; d++) s.strides[d] = s.dilations[d] = 1;
      s.residual = 3;
    }
    s.conv_output = i % 4 == 1;
    s.x_layout = i % 5 == 0 ? 3 : 0;
    const stax_jit_compile_options_t* options = &widths[i % 3];
    stax_threadpool_t* run_pool = options->thread_count > 1 ? pool : NULL;
    conv_case(&s, options, run_pool, "k_blocks");
    /* Channel tiles (512 bits, rows of at most 8, 16 channels per group) take no blocks. */
    int64_t row = output_size(&s, s.spatial - 1);
    bool channel_tiles = expected_kind(&s, options) == CHANNEL_TILES;
    conv_case_constant(&s, options, run_pool, "k_blocks_constant");
    int64_t block = atoll(block_sizes[i % 4]), lanes = options->vector_bits / 32;
    bool blocked = !channel_tiles && row >= lanes && s.c / s.group > block;
    bool has = kernel_has_k_blocks(&s, options);
    if (has != blocked) fprintf(stderr, "k_blocks case %d: blocks expected %d\n", (int)i, (int)blocked);
    CHECK(has == blocked);
    k_blocked += blocked;
  }
  /* A 3-D conv and a 4-thread nest whose parallel loop is the channel tiles (1-D, N = 1). */
  setenv("STAX_JIT_CONV_KC", "3", 1);
  conv_spec_t s = base_spec(3);
  s.c = 10;
  s.m = 7;
  s.input[0] = 4;
  s.input[1] = 5;
  s.input[2] = 11;
  s.kernel[0] = s.kernel[1] = s.kernel[2] = 3;
  s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = s.pads[4] = s.pads[5] = 1;
  s.bias = true;
  s.activation = STAX_OP_Relu;
  s.residual = 1;
  conv_case(&s, NULL, NULL, "k_blocks_3d");
  s = base_spec(1);
  s.c = 11;
  s.m = 53;
  s.input[0] = 40;
  s.kernel[0] = 5;
  s.pads[0] = 2;
  s.pads[1] = 1;
  s.bias = true;
  s.activation = STAX_OP_Relu;
  stax_jit_compile_options_t four = {.thread_count = 4};
  conv_case(&s, &four, pool, "k_blocks_threads_channels");
  CHECK(kernel_has_k_blocks(&s, &four));
  setenv("STAX_JIT_CONV_K_BLOCKS", "0", 1);
  CHECK(!kernel_has_k_blocks(&s, &four));
  unsetenv("STAX_JIT_CONV_K_BLOCKS");
  unsetenv("STAX_JIT_CONV_KC");
  /* The natural block size: 64 input channels of 3x3 over 20-wide rows (3 x 22 padded floats
   * and a 6 x 9 weight panel per channel: blocks of about 40) block; rows of 3 do not. */
  s = base_spec(2);
  s.c = 64;
  s.m = 8;
  s.input[0] = 6;
  s.input[1] = 20;
  s.kernel[0] = s.kernel[1] = 3;
  s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 1;
  s.bias = true;
  s.activation = STAX_OP_Relu;
  s.residual = 1;
  stax_jit_compile_options_t avx2 = {.vector_bits = 256};
  CHECK(kernel_has_k_blocks(&s, &avx2));
  conv_case(&s, &avx2, NULL, "k_blocks_natural");
  conv_case_constant(&s, &avx2, pool, "k_blocks_natural_constant");
  s.input[1] = 3; /* narrower than a vector at any width */
  CHECK(!kernel_has_k_blocks(&s, &avx2));
  conv_case(&s, &avx2, NULL, "k_blocks_narrow_rows");
  stax_threadpool_destroy(pool);
  CHECK(k_blocked >= 8);
  printf("  %d convolutions around K blocks (%d random specs blocked)\n",
         (int)(cases_run - before), (int)k_blocked);
}

static void test_empty(void) {
  conv_spec_t s = base_spec(2);
  s.n = 0;
  s.input[0] = 6;
  s.input[1] = 7;
  s.kernel[0] = s.kernel[1] = 3;
  s.bias = true;
  s.activation = STAX_OP_Relu;
  conv_case(&s, NULL, NULL, "empty_batch");
  s = base_spec(1);
  s.n = 2;
  s.m = 0;
  s.input[0] = 12;
  s.kernel[0] = 3;
  conv_case(&s, NULL, NULL, "no_output_channels");
}

static void test_threads(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(tg_sys(), 4, &pool));
  stax_jit_compile_options_t four = {.thread_count = 4};
  /* Batch in parallel; rows in parallel; channel tiles in parallel (1-D, N = 1, their edge in
   * a stage of its own); position tiles in parallel (1-D, one channel tile). */
  conv_spec_t s = base_spec(2);
  s.n = 5;
  s.c = 6;
  s.m = 14;
  s.input[0] = 17;
  s.input[1] = 23;
  s.kernel[0] = s.kernel[1] = 3;
  s.auto_pad = "SAME_LOWER";
  s.bias = true;
  s.activation = STAX_OP_Gelu;
  s.residual = 1;
  conv_case(&s, &four, pool, "threads_batch");
  s.n = 1;
  s.strides[0] = 2;
  conv_case(&s, &four, pool, "threads_rows");
  s = base_spec(1);
  s.c = 8;
  s.m = 53;
  s.input[0] = 40;
  s.kernel[0] = 5;
  s.pads[0] = 2;
  s.pads[1] = 1;
  s.bias = true;
  s.activation = STAX_OP_Relu;
  conv_case(&s, &four, pool, "threads_channels");
  s.m = 3;
  s.input[0] = 700;
  s.dilations[0] = 2;
  conv_case(&s, &four, pool, "threads_positions");
  /* Depthwise with many channels. */
  s = base_spec(2);
  s.n = 2;
  s.c = s.m = s.group = 24;
  s.input[0] = 14;
  s.input[1] = 14;
  s.kernel[0] = s.kernel[1] = 3;
  s.strides[0] = s.strides[1] = 2;
  s.auto_pad = "SAME_UPPER";
  s.bias = true;
  s.activation = STAX_OP_Relu;
  conv_case(&s, &four, pool, "threads_depthwise");
  stax_threadpool_destroy(pool);
}

/* Compiles a group expecting UNIMPLEMENTED with `needle` in the message. */
static void check_refused(test_group_t* tg, const char* name, const char* needle) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  stax_jit_kernel_t* kernel = NULL;
  CHECK_ERROR(stax_jit_compile_group(backend, tg_group(tg, name), NULL, &kernel),
              STAX_UNIMPLEMENTED, needle);
  CHECK(kernel == NULL);
}

static void test_refusals(void) {
  conv_spec_t s = base_spec(2);
  s.input[0] = s.input[1] = 6;
  s.kernel[0] = s.kernel[1] = 3;
  s.activation = STAX_OP_Relu;
  int64_t ints[24];
  test_group_t tg;
  /* Other dtypes. */
  static const stax_dtype_t dtypes[] = {STAX_DTYPE_FLOAT64, STAX_DTYPE_INT32, STAX_DTYPE_FLOAT16};
  for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
    tg_init(&tg);
    conv_spec_t plain = s;
    plain.activation = dtypes[i] == STAX_DTYPE_FLOAT64 ? STAX_OP_Relu : NO_ACTIVATION;
    build_conv(&tg, &plain, ints, dtypes[i]);
    check_refused(&tg, "conv_dtype", "float32 only");
    tg_free(&tg);
  }
  /* A weight computed in the group. */
  tg_init(&tg);
  int64_t x_dims[4] = {1, 3, 6, 6}, w_dims[4] = {4, 3, 3, 3}, y_dims[4] = {1, 4, 4, 4};
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 4, x_dims);
  int32_t w0 = tg_input(&tg, "w0", STAX_DTYPE_FLOAT32, 4, w_dims);
  int32_t w = tg_node(&tg, STAX_OP_Neg, 1, &w0, STAX_DTYPE_FLOAT32, 4, w_dims, 0, NULL);
  int32_t xw[2] = {x, w};
  int32_t y = tg_node(&tg, STAX_OP_Conv, 2, xw, STAX_DTYPE_FLOAT32, 4, y_dims, 0, NULL);
  tg_output(&tg, y);
  check_refused(&tg, "conv_computed_weight", "computed in the group");
  tg_free(&tg);
  /* A Conv with a MatMul, and with a reduction. */
  for (int32_t variant = 0; variant < 2; variant++) {
    tg_init(&tg);
    x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 4, x_dims);
    w = tg_input(&tg, "w", STAX_DTYPE_FLOAT32, 4, w_dims);
    xw[0] = x;
    xw[1] = w;
    y = tg_node(&tg, STAX_OP_Conv, 2, xw, STAX_DTYPE_FLOAT32, 4, y_dims, 0, NULL);
    int32_t z;
    if (variant == 0) {
      int64_t square[2] = {4, 4};
      int32_t q = tg_input(&tg, "q", STAX_DTYPE_FLOAT32, 2, square);
      int32_t yq[2] = {y, q};
      z = tg_node(&tg, STAX_OP_MatMul, 2, yq, STAX_DTYPE_FLOAT32, 4, y_dims, 0, NULL);
    } else {
      z = tg_node(&tg, STAX_OP_Softmax, 1, &y, STAX_DTYPE_FLOAT32, 4, y_dims, 0, NULL);
    }
    tg_output(&tg, z);
    check_refused(&tg, "conv_mixed",
                  variant == 0 ? "a Conv and a MatMul" : "a Conv and a reduction");
    tg_free(&tg);
  }
  /* An epilogue value that does not fit the output. */
  tg_init(&tg);
  x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 4, x_dims);
  w = tg_input(&tg, "w", STAX_DTYPE_FLOAT32, 4, w_dims);
  xw[0] = x;
  xw[1] = w;
  y = tg_node(&tg, STAX_OP_Conv, 2, xw, STAX_DTYPE_FLOAT32, 4, y_dims, 0, NULL);
  int64_t big_dims[4] = {2, 4, 4, 4};
  int32_t big = tg_input(&tg, "big", STAX_DTYPE_FLOAT32, 4, big_dims);
  int32_t yb[2] = {y, big};
  int32_t z = tg_node(&tg, STAX_OP_Add, 2, yb, STAX_DTYPE_FLOAT32, 4, big_dims, 0, NULL);
  tg_output(&tg, z);
  check_refused(&tg, "conv_misfit", "does not fit the Conv output");
  tg_free(&tg);
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Measures, never asserts: a conv group, JIT against the generic kernels run node by node
 * (what the interpreter does) on the default pool; checks the measured kernel's result. */
static void time_conv(const conv_spec_t* s, const char* label) {
  stax_jit_backend_t* backend = tg_backend();
  if (!backend) return;
  test_group_t tg;
  tg_init(&tg);
  int64_t ints[24];
  build_conv(&tg, s, ints, STAX_DTYPE_FLOAT32);
  stax_threadpool_t* pool = stax_threadpool_default();
  stax_jit_kernel_t* kernel = NULL;
  CHECK_OK(stax_jit_compile_group(backend, tg_group(&tg, label), NULL, &kernel));
  if (!kernel) {
    tg_free(&tg);
    return;
  }
  stax_tensor_t* out[TG_MAX_VALUES] = {NULL};
  CHECK_OK(tg_run(&tg, kernel, pool, out)); /* warm up */
  stax_tensor_t* inputs[TG_MAX_VALUES];
  for (int32_t i = 0; i < tg.input_count; i++) inputs[i] = tg.tensors[tg.inputs[i]];
  double best = 1e30, generic = 1e30;
  for (int32_t r = 0; r < 10; r++) {
    double start = seconds_now();
    CHECK_OK(stax_jit_kernel_run(kernel, tg.input_count, inputs, tg.output_count, out, pool));
    double elapsed = seconds_now() - start;
    if (elapsed < best) best = elapsed;
    stax_tensor_t* result[TG_MAX_VALUES] = {NULL};
    start = seconds_now();
    CHECK_OK(tg_reference_on(&tg, pool, result));
    elapsed = seconds_now() - start;
    if (elapsed < generic) generic = elapsed;
    for (int32_t i = 0; i < tg.output_count; i++) stax_tensor_release(result[i]);
  }
  double flops = 2.0 * (double)s->n * (double)s->m * (double)(s->c / s->group);
  for (int32_t i = 0; i < s->spatial; i++)
    flops *= (double)s->kernel[i] * (double)output_size(s, i);
  printf(
      "  %s on %d threads: JIT %.3f ms (%.1f GFLOP/s), generic kernels %.3f ms (%.1f GFLOP/s); "
      "compile %.1f ms\n",
      label, (int)stax_threadpool_thread_count(pool), best * 1e3, flops / best * 1e-9,
      generic * 1e3, flops / generic * 1e-9,
      stax_jit_kernel_compile_ms(kernel) + stax_jit_kernel_lower_ms(kernel));
  stax_tensor_t* expected[TG_MAX_VALUES] = {NULL};
  CHECK_OK(tg_reference(&tg, expected));
  for (int32_t i = 0; i < tg.output_count; i++) {
    CHECK_EQ_INT(tg_compare(label, out[i], expected[i], 1e-3, 1e-4), 0);
    stax_tensor_release(expected[i]);
    stax_tensor_release(out[i]);
  }
  stax_jit_kernel_release(kernel);
  tg_free(&tg);
}

static void test_conv_performance(void) {
  conv_spec_t s = base_spec(2);
  s.c = s.m = 64;
  s.input[0] = s.input[1] = 56;
  s.kernel[0] = s.kernel[1] = 3;
  s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 1;
  s.bias = true;
  s.activation = STAX_OP_Relu;
  time_conv(&s, "conv3x3 1x64x56x56->64 +bias+relu");
  s.activation = STAX_OP_Gelu;
  s.residual = 1;
  time_conv(&s, "conv3x3 1x64x56x56->64 +bias+gelu+residual");
  s.activation = STAX_OP_Relu;
  s.residual = 0;
  s.strides[0] = s.strides[1] = 2;
  s.m = 128;
  time_conv(&s, "conv3x3/2 1x64x56x56->128 +bias+relu");
  s.strides[0] = s.strides[1] = 1;
  s.c = s.m = 256;
  s.input[0] = s.input[1] = 14;
  time_conv(&s, "conv3x3 1x256x14x14->256 +bias+relu");
  s.c = 64;
  s.input[0] = s.input[1] = 56;
  s.kernel[0] = s.kernel[1] = 1;
  s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 0;
  s.m = 256;
  time_conv(&s, "conv1x1 1x64x56x56->256 +bias+relu");
  s = base_spec(2);
  s.c = s.m = s.group = 128;
  s.input[0] = s.input[1] = 56;
  s.kernel[0] = s.kernel[1] = 3;
  s.pads[0] = s.pads[1] = s.pads[2] = s.pads[3] = 1;
  s.bias = true;
  s.activation = STAX_OP_Relu;
  time_conv(&s, "depthwise3x3 1x128x56x56 +bias+relu");
}

STAX_TEST_MAIN(STAX_TEST(test_random_convs), STAX_TEST(test_odd_sizes),
               STAX_TEST(test_channel_tiles), STAX_TEST(test_patches), STAX_TEST(test_k_blocks), STAX_TEST(test_empty),
               STAX_TEST(test_threads), STAX_TEST(test_refusals), STAX_TEST(test_conv_performance))
