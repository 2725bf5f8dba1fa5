/* Tests for Resize (src/kernels/resize.c): the ONNX backend-test cases (nearest, linear,
 * align_corners, cubic, tf_crop_and_resize with extrapolation, nearest ceil), then every mode,
 * coordinate transformation and nearest rounding against an independent reference written
 * here (sample points weighted by distance), up- and downsampling, output length 1, 1-D to
 * 4-D, float16/bfloat16/integer dtypes, strided inputs, sizes with axes and
 * keep_aspect_ratio_policy, the opset 10 form, and every error path. */
#include <float.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "test_harness.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static inline stax_allocator_t allocator(void) { return stax_allocator_system(); }

/* Element i of a contiguous array of `dtype`, as a double, and the reverse (the runtime's
 * Cast conversions, tested on their own in test_dtype.c). */
static inline double load_double(stax_dtype_t dtype, const void* base, int64_t i) {
  double value = 0;
  stax_convert_elements(dtype, (const char*)base + i * (int64_t)stax_dtype_size(dtype),
                        STAX_DTYPE_FLOAT64, &value, 1);
  return value;
}

static inline void store_double(stax_dtype_t dtype, void* base, int64_t i, double v) {
  stax_convert_elements(STAX_DTYPE_FLOAT64, &v, dtype, (char*)base + i * (int64_t)stax_dtype_size(dtype), 1);
}

/* Element offset of row-major element i of any view. */
static inline int64_t view_offset(const stax_tensor_t* t, int64_t i) {
  int32_t rank = stax_tensor_rank(t);
  const int64_t* dims = stax_tensor_dims(t);
  const int64_t* strides = stax_tensor_strides(t);
  int64_t offset = stax_tensor_offset(t);
  for (int32_t d = rank - 1; d >= 0; d--) {
    offset += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return offset;
}

static inline double get(const stax_tensor_t* t, int64_t i) {
  return load_double(stax_tensor_dtype(t), stax_buffer_data(stax_tensor_buffer(t)), view_offset(t, i));
}

/* Exact read of an int64 tensor. */
static inline int64_t get_int(const stax_tensor_t* t, int64_t i) {
  return ((const int64_t*)stax_buffer_data(stax_tensor_buffer(t)))[view_offset(t, i)];
}

static inline stax_tensor_t* make(stax_dtype_t dtype, int32_t rank, const int64_t* dims, const double* values) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(allocator(), dtype, rank, dims, &t));
  if (!t) return NULL;
  int64_t n = stax_tensor_element_count(t);
  for (int64_t i = 0; i < n; i++) store_double(dtype, stax_tensor_data(t), i, values ? values[i] : 0);
  return t;
}

/* The same values as a non-contiguous view: every other element of a tensor twice as long on
 * the last axis (rank >= 1). */
static inline stax_tensor_t* make_strided(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                   const double* values) {
  int64_t wide[STAX_MAX_RANK];
  for (int32_t k = 0; k < rank; k++) wide[k] = dims[k];
  wide[rank - 1] = 2 * dims[rank - 1];
  stax_tensor_t* base = NULL;
  CHECK_OK(stax_tensor_create_zeros(allocator(), dtype, rank, wide, &base));
  if (!base) return NULL;
  int64_t n = 1;
  for (int32_t k = 0; k < rank; k++) n *= dims[k];
  int64_t last = dims[rank - 1];
  for (int64_t i = 0; i < n; i++)
    store_double(dtype, stax_tensor_data(base), (i / last) * 2 * last + (i % last) * 2, values[i]);
  int64_t start = 0, end = wide[rank - 1], step = 2;
  int32_t axis = rank - 1;
  stax_tensor_t* view = NULL;
  CHECK_OK(stax_tensor_slice(allocator(), base, 1, &start, &end, &axis, &step, &view));
  stax_tensor_release(base);
  CHECK(view && !stax_tensor_is_contiguous(view));
  return view;
}

static inline stax_tensor_t* make_ints(int32_t rank, const int64_t* dims, const int64_t* values) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(allocator(), STAX_DTYPE_INT64, rank, dims, &t));
  if (t && stax_tensor_element_count(t) > 0) {
    size_t bytes = sizeof(int64_t) * (size_t)stax_tensor_element_count(t);
    if (values) memcpy(stax_tensor_data(t), values, bytes);
    else memset(stax_tensor_data(t), 0, bytes);
  }
  return t;
}

static inline stax_tensor_t* vec(int64_t count, const int64_t* values) { return make_ints(1, &count, values); }

/* The pool and allocator kernels run with; tests of the parallel paths and of allocation
 * failures set them for a while. */
static stax_threadpool_t* test_pool = NULL;
static stax_allocator_t* test_allocator = NULL;

static inline stax_status_t run(stax_kernel_fn fn, stax_op_t op, const stax_node_attr_t* attrs,
                         int32_t attr_count, stax_tensor_t** inputs, int32_t input_count,
                         stax_tensor_t** outputs, int32_t output_count) {
  stax_node_t node;
  memset(&node, 0, sizeof(node));
  node.op = op;
  node.name = "node0";
  node.attr_count = attr_count;
  node.attrs = (stax_node_attr_t*)attrs;
  stax_kernel_call_t call;
  memset(&call, 0, sizeof(call));
  call.node = &node;
  call.allocator = test_allocator ? *test_allocator : allocator();
  call.pool = test_pool;
  call.input_count = input_count;
  call.inputs = inputs;
  call.output_count = output_count;
  call.outputs = outputs;
  return fn(&call);
}

static inline stax_node_attr_t attr_int(const char* name, int64_t value) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_INT;
  a.value.i = value;
  return a;
}

static inline stax_node_attr_t attr_ints(const char* name, int32_t count, const int64_t* values) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_INTS;
  a.value.ints.count = count;
  a.value.ints.data = values;
  return a;
}

static inline stax_node_attr_t attr_float(const char* name, float value) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_FLOAT;
  a.value.f = value;
  return a;
}

static inline stax_node_attr_t attr_string(const char* name, const char* value) {
  stax_node_attr_t a;
  memset(&a, 0, sizeof(a));
  a.name = name;
  a.type = STAX_ATTR_STRING;
  a.value.s = value;
  return a;
}

static inline void release_all(stax_tensor_t** tensors, int count) {
  for (int i = 0; i < count; i++) {
    if (tensors[i]) stax_tensor_release(tensors[i]);
    tensors[i] = NULL;
  }
}

static inline bool dims_are(const stax_tensor_t* t, int32_t rank, const int64_t* dims) {
  if (!t || stax_tensor_rank(t) != rank) return false;
  for (int32_t k = 0; k < rank; k++)
    if (stax_tensor_dims(t)[k] != dims[k]) return false;
  return true;
}

/* Runs a kernel with allocation number 1, 2, 3, ... failing until it succeeds: every failure
 * must be a status with no output left behind, and nothing may leak either way. */
static inline void check_allocation_failures(stax_kernel_fn fn, stax_op_t op,
                                             const stax_node_attr_t* attrs, int32_t attr_count,
                                             stax_tensor_t** inputs, int32_t input_count,
                                             int32_t output_count) {
  for (uint64_t fail_at = 1; fail_at < 1000; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, stax_allocator_system(), fail_at);
    stax_allocator_t failing = stax_failing_allocator(&state);
    stax_tensor_t* outputs[8] = {NULL};
    test_allocator = &failing;
    stax_status_t status = run(fn, op, attrs, attr_count, inputs, input_count, outputs, output_count);
    test_allocator = NULL;
    bool failed = status != STAX_OK;
    if (failed) CHECK_EQ_INT(stax_status_code(status), STAX_OUT_OF_MEMORY);
    stax_status_free(status);
    for (int32_t i = 0; failed && i < output_count; i++) CHECK(outputs[i] == NULL);
    release_all(outputs, output_count);
    CHECK_EQ_INT(state.live_allocations, 0);
    if (!failed) {
      CHECK(state.failed_count == 0);
      return;
    }
  }
  CHECK(false); /* never succeeded */
}

/* Checks every element of t (row-major, any view) against expected. */
static inline void check_values(const stax_tensor_t* t, const double* expected, int64_t count, double tolerance) {
  CHECK(t != NULL);
  if (!t) return;
  CHECK_EQ_INT(stax_tensor_element_count(t), count);
  if (stax_tensor_element_count(t) != count) return;
  for (int64_t i = 0; i < count; i++) {
    double value = get(t, i);
    if (!(fabs(value - expected[i]) <= tolerance)) {
      fprintf(stderr, "  element %lld: got %.9g, expected %.9g\n", (long long)i, value, expected[i]);
      CHECK_NEAR(value, expected[i], tolerance);
      return;
    }
  }
  CHECK(true);
}

static stax_tensor_t* floats(int64_t count, const double* values) {
  return make(STAX_DTYPE_FLOAT32, 1, &count, values);
}

/* Runs Resize(x, roi, scales, sizes) with string attributes given as name/value pairs. */
static stax_status_t resize(stax_tensor_t* x, stax_tensor_t* roi, stax_tensor_t* scales,
                            stax_tensor_t* sizes, const stax_node_attr_t* attrs, int32_t attr_count,
                            stax_tensor_t** out) {
  stax_tensor_t* inputs[4] = {x, roi, scales, sizes};
  return run(stax_kernel_Resize, STAX_OP_Resize, attrs, attr_count, inputs, 4, out, 1);
}

/* ---- an independent reference: per-axis sample points and weights by distance ------------- */

typedef struct reference_t {
  const char* mode;        /* nearest, linear, cubic */
  const char* coordinates; /* coordinate_transformation_mode */
  const char* nearest;     /* nearest_mode */
  double a;                /* cubic coefficient */
  bool exclude_outside;
  double extrapolation;
} reference_t;

/* The source coordinate, per the ONNX operator documentation's formulas. align_corners
 * measures the resized length as in * scale, unrounded (what ONNX's backend test data for
 * downsampling by 0.6 expects); with sizes, scale = out / in and the two agree. */
static double reference_source(const reference_t* r, double x, double in, double out, double scale,
                               double start, double end) {
  if (!strcmp(r->coordinates, "align_corners"))
    return out == 1 || in * scale <= 1 ? 0 : x * (in - 1) / (in * scale - 1);
  if (!strcmp(r->coordinates, "asymmetric")) return x / scale;
  if (!strcmp(r->coordinates, "pytorch_half_pixel")) return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
  if (!strcmp(r->coordinates, "tf_crop_and_resize"))
    return out > 1 ? start * (in - 1) + x * (end - start) * (in - 1) / (out - 1)
                   : 0.5 * (start + end) * (in - 1);
  return (x + 0.5) / scale - 0.5;
}

static double keys_kernel(double d, double a) {
  d = fabs(d);
  if (d <= 1) return (a + 2) * d * d * d - (a + 3) * d * d + 1;
  if (d < 2) return a * d * d * d - 5 * a * d * d + 8 * a * d - 4 * a;
  return 0;
}

/* Sample points along one axis: up to 4 (index, weight); returns the count, or -1 when the
 * coordinate is outside (tf_crop_and_resize). */
static int reference_points(const reference_t* r, double source, int64_t in, int64_t* index,
                            double* weight) {
  if (!strcmp(r->coordinates, "tf_crop_and_resize") && (source < 0 || source > in - 1)) return -1;
  if (!strcmp(r->mode, "nearest")) {
    double f = floor(source), v;
    if (!strcmp(r->nearest, "floor")) v = f;
    else if (!strcmp(r->nearest, "ceil")) v = ceil(source);
    else if (!strcmp(r->nearest, "round_prefer_ceil")) v = source - f >= 0.5 ? f + 1 : f;
    else v = source - f > 0.5 ? f + 1 : f;
    int64_t i = (int64_t)v;
    index[0] = i < 0 ? 0 : (i >= in ? in - 1 : i);
    weight[0] = 1;
    return 1;
  }
  int n = !strcmp(r->mode, "linear") ? 2 : 4;
  int64_t first = (int64_t)floor(source) - (n == 4 ? 1 : 0);
  double sum = 0;
  for (int k = 0; k < n; k++) {
    int64_t i = first + k;
    double d = source - (double)i;
    weight[k] = n == 2 ? 1 - fabs(d) : keys_kernel(d, r->a);
    if (r->exclude_outside && (i < 0 || i >= in)) weight[k] = 0;
    sum += weight[k];
    index[k] = i < 0 ? 0 : (i >= in ? in - 1 : i);
  }
  if (r->exclude_outside)
    for (int k = 0; k < n; k++) weight[k] /= sum;
  return n;
}

/* Resizes a contiguous [rank <= 4] array of doubles. */
static void reference_resize(const reference_t* r, int32_t rank, const int64_t* in_dims,
                             const double* data, const int64_t* out_dims, const double* scales,
                             const double* roi, double* out) {
  int64_t total = 1;
  for (int32_t k = 0; k < rank; k++) total *= out_dims[k];
  for (int64_t e = 0; e < total; e++) {
    int64_t position[4], rest = e;
    for (int32_t k = rank - 1; k >= 0; k--) {
      position[k] = rest % out_dims[k];
      rest /= out_dims[k];
    }
    int64_t index[4][4];
    double weight[4][4];
    int count[4];
    bool outside = false;
    for (int32_t k = 0; k < rank; k++) {
      double source = reference_source(r, (double)position[k], (double)in_dims[k], (double)out_dims[k],
                                       scales[k], roi ? roi[k] : 0, roi ? roi[rank + k] : 1);
      count[k] = reference_points(r, source, in_dims[k], index[k], weight[k]);
      if (count[k] < 0) outside = true;
    }
    if (outside) {
      out[e] = r->extrapolation;
      continue;
    }
    double sum = 0;
    int pick[4] = {0, 0, 0, 0};
    for (;;) {
      double w = 1;
      int64_t offset = 0;
      for (int32_t k = 0; k < rank; k++) {
        w *= weight[k][pick[k]];
        offset = offset * in_dims[k] + index[k][pick[k]];
      }
      sum += w * data[offset];
      int32_t k = rank - 1;
      while (k >= 0 && ++pick[k] == count[k]) pick[k--] = 0;
      if (k < 0) break;
    }
    out[e] = sum;
  }
}

/* ---- ONNX backend-test cases -------------------------------------------------------------- */

static void test_resize_onnx_examples(void) {
  stax_tensor_t* x = make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, (double[]){1, 2, 3, 4});
  stax_tensor_t* out = NULL;
  /* resize_upsample_scales_nearest */
  stax_tensor_t* scales = floats(4, (double[]){1, 1, 2, 3});
  CHECK_OK(resize(x, NULL, scales, NULL, NULL, 0, &out));
  CHECK(dims_are(out, 4, (int64_t[]){1, 1, 4, 6}));
  check_values(out, (double[]){1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4},
               24, 0);
  release_all(&out, 1);
  stax_tensor_release(scales);
  /* resize_upsample_scales_linear and _align_corners */
  scales = floats(4, (double[]){1, 1, 2, 2});
  stax_node_attr_t linear = attr_string("mode", "linear");
  CHECK_OK(resize(x, NULL, scales, NULL, &linear, 1, &out));
  check_values(out, (double[]){1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4},
               16, 1e-6);
  release_all(&out, 1);
  stax_node_attr_t corners[2] = {attr_string("mode", "linear"),
                                 attr_string("coordinate_transformation_mode", "align_corners")};
  CHECK_OK(resize(x, NULL, scales, NULL, corners, 2, &out));
  check_values(out,
               (double[]){1, 4.0 / 3, 5.0 / 3, 2, 5.0 / 3, 2, 7.0 / 3, 8.0 / 3, 7.0 / 3, 8.0 / 3, 3,
                          10.0 / 3, 3, 10.0 / 3, 11.0 / 3, 4},
               16, 1e-6);
  release_all(&out, 1);
  stax_tensor_release(scales);
  stax_tensor_release(x);
  /* resize_downsample_scales_nearest and _linear */
  x = make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 4}, (double[]){1, 2, 3, 4, 5, 6, 7, 8});
  scales = floats(4, (double[]){1, 1, 0.6, 0.6});
  CHECK_OK(resize(x, NULL, scales, NULL, NULL, 0, &out));
  CHECK(dims_are(out, 4, (int64_t[]){1, 1, 1, 2}));
  check_values(out, (double[]){1, 3}, 2, 0);
  release_all(&out, 1);
  CHECK_OK(resize(x, NULL, scales, NULL, &linear, 1, &out));
  check_values(out, (double[]){2.6666665, 4.3333331}, 2, 1e-5);
  release_all(&out, 1);
  stax_tensor_release(scales);
  stax_tensor_release(x);
  /* resize_upsample_scales_cubic: the first element worked out by hand is 0.47265625. */
  double sixteen[16];
  for (int i = 0; i < 16; i++) sixteen[i] = i + 1;
  x = make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, sixteen);
  scales = floats(4, (double[]){1, 1, 2, 2});
  stax_node_attr_t cubic = attr_string("mode", "cubic");
  CHECK_OK(resize(x, NULL, scales, NULL, &cubic, 1, &out));
  CHECK(dims_are(out, 4, (int64_t[]){1, 1, 8, 8}));
  CHECK(out && fabs(get(out, 0) - 0.47265625) < 1e-6);
  CHECK(out && fabs(get(out, 63) - 16.52734375) < 1e-5);
  release_all(&out, 1);
  stax_tensor_release(scales);
  /* resize_tf_crop_and_resize, with and without extrapolation. */
  stax_tensor_t* roi = floats(8, (double[]){0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8});
  stax_tensor_t* sizes = vec(4, (int64_t[]){1, 1, 3, 3});
  stax_node_attr_t crop[2] = {attr_string("mode", "linear"),
                              attr_string("coordinate_transformation_mode", "tf_crop_and_resize")};
  CHECK_OK(resize(x, roi, NULL, sizes, crop, 2, &out));
  check_values(out, (double[]){7.6, 7.9, 8.2, 8.8, 9.1, 9.4, 10.0, 10.3, 10.6}, 9, 1e-5);
  release_all(&out, 1);
  stax_tensor_release(roi);
  roi = floats(8, (double[]){0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7});
  stax_node_attr_t extrapolate[3] = {crop[0], crop[1], attr_float("extrapolation_value", 10)};
  CHECK_OK(resize(x, roi, NULL, sizes, extrapolate, 3, &out));
  check_values(out, (double[]){7.6, 10, 10, 12.4, 10, 10, 10, 10, 10}, 9, 1e-5);
  release_all(&out, 1);
  /* resize_upsample_sizes_nearest_ceil_half_pixel, first row. */
  stax_tensor_release(sizes);
  sizes = vec(4, (int64_t[]){1, 1, 8, 8});
  stax_node_attr_t ceil_mode = attr_string("nearest_mode", "ceil");
  CHECK_OK(resize(x, NULL, NULL, sizes, &ceil_mode, 1, &out));
  CHECK(dims_are(out, 4, (int64_t[]){1, 1, 8, 8}));
  double row[8] = {1, 2, 2, 3, 3, 4, 4, 4};
  for (int j = 0; j < 8; j++) CHECK(out && get(out, j) == row[j]);
  release_all(&out, 1);
  stax_tensor_t* all[3] = {x, roi, sizes};
  release_all(all, 3);
}

/* ---- every mode against the reference ----------------------------------------------------- */

static void check_against_reference(const reference_t* r, int32_t rank, const int64_t* in_dims,
                                    const int64_t* out_dims, const double* scale_values,
                                    bool use_sizes, const double* roi_values, stax_dtype_t dtype,
                                    bool strided) {
  double data[64];
  int64_t count = 1;
  for (int32_t k = 0; k < rank; k++) count *= in_dims[k];
  for (int64_t i = 0; i < count; i++) data[i] = (double)((i * 37) % 23) - 7 + (i % 3) * 0.25;
  if (!stax_dtype_is_float(dtype))
    for (int64_t i = 0; i < count; i++) data[i] = (double)((i * 37) % 23);
  stax_tensor_t* x = strided ? make_strided(dtype, rank, in_dims, data) : make(dtype, rank, in_dims, data);
  double expected[512];
  double scales[4];
  for (int32_t k = 0; k < rank; k++)
    scales[k] = use_sizes ? (double)out_dims[k] / (double)in_dims[k] : (double)(float)scale_values[k];
  /* The kernel sees the roi as float32, so the reference does too (0.1f + 0.4f is not 0.5). */
  double roi_rounded[8];
  for (int32_t k = 0; roi_values && k < 2 * rank; k++) roi_rounded[k] = (double)(float)roi_values[k];
  reference_resize(r, rank, in_dims, data, out_dims, scales, roi_values ? roi_rounded : NULL,
                   expected);
  int64_t out_count = 1;
  for (int32_t k = 0; k < rank; k++) out_count *= out_dims[k];
  if (!stax_dtype_is_float(dtype))
    for (int64_t i = 0; i < out_count; i++) expected[i] = round(expected[i]);
  stax_tensor_t* scales_tensor = use_sizes ? NULL : floats(rank, scale_values);
  stax_tensor_t* sizes_tensor = use_sizes ? vec(rank, out_dims) : NULL;
  stax_tensor_t* roi = roi_values ? floats(2 * rank, roi_values) : NULL;
  stax_node_attr_t attrs[6] = {attr_string("mode", r->mode),
                               attr_string("coordinate_transformation_mode", r->coordinates),
                               attr_string("nearest_mode", r->nearest),
                               attr_float("cubic_coeff_a", (float)r->a),
                               attr_int("exclude_outside", r->exclude_outside),
                               attr_float("extrapolation_value", (float)r->extrapolation)};
  stax_tensor_t* out = NULL;
  CHECK_OK(resize(x, roi, scales_tensor, sizes_tensor, attrs, 6, &out));
  CHECK(dims_are(out, rank, out_dims));
  double tolerance = dtype == STAX_DTYPE_FLOAT16 || dtype == STAX_DTYPE_BFLOAT16 ? 0.1 : 1e-4;
  if (!stax_dtype_is_float(dtype)) tolerance = 1.0; /* rounding of exact .5 cases may differ */
  int failures_before = stax_test_failures_;
  check_values(out, expected, out_count, tolerance);
  if (stax_test_failures_ != failures_before)
    fprintf(stderr, "  (mode %s, %s, %s, exclude_outside %d, %s, rank %d)\n", r->mode,
            r->coordinates, r->nearest, r->exclude_outside, stax_dtype_name(dtype), rank);
  release_all(&out, 1);
  stax_tensor_t* all[4] = {x, scales_tensor, sizes_tensor, roi};
  release_all(all, 4);
}

static void test_resize_modes(void) {
  const char* coordinates[6] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                "tf_crop_and_resize", "half_pixel"};
  const char* nearest[4] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char* modes[3] = {"nearest", "linear", "cubic"};
  double roi[6] = {0.1, 0.0, 0.2, 0.9, 1.0, 1.3};
  for (int m = 0; m < 3; m++) {
    for (int c = 0; c < 5; c++) {
      for (int n = 0; n < (m == 0 ? 4 : 1); n++) {
        for (int exclude = 0; exclude <= (m == 2 ? 1 : 0); exclude++) {
          reference_t r = {modes[m], coordinates[c], nearest[n], -0.5, exclude != 0, -1};
          bool crop = c == 4;
          /* Upsampling by sizes, 3-D (every axis resized). */
          check_against_reference(&r, 3, (int64_t[]){2, 3, 4}, (int64_t[]){3, 5, 7}, NULL, true,
                                  crop ? roi : NULL, STAX_DTYPE_FLOAT32, false);
          /* Downsampling by scales from a strided float64 input. */
          if (!crop)
            check_against_reference(&r, 2, (int64_t[]){5, 7}, (int64_t[]){2, 3},
                                    (double[]){0.5, 0.5}, false, NULL, STAX_DTYPE_FLOAT64, true);
          /* Output length 1 (the special cases of pytorch_half_pixel and align_corners). */
          check_against_reference(&r, 2, (int64_t[]){3, 4}, (int64_t[]){1, 6}, NULL, true,
                                  crop ? (double[]){0, 0, 1, 1} : NULL, STAX_DTYPE_FLOAT32, false);
        }
      }
    }
  }
  /* Other dtypes: half types, and integers (rounded to nearest). */
  reference_t bilinear = {"linear", "half_pixel", "round_prefer_floor", -0.75, false, 0};
  check_against_reference(&bilinear, 2, (int64_t[]){3, 3}, (int64_t[]){5, 4}, NULL, true, NULL,
                          STAX_DTYPE_FLOAT16, false);
  check_against_reference(&bilinear, 2, (int64_t[]){3, 3}, (int64_t[]){5, 4}, NULL, true, NULL,
                          STAX_DTYPE_BFLOAT16, true);
  check_against_reference(&bilinear, 2, (int64_t[]){3, 3}, (int64_t[]){5, 4}, NULL, true, NULL,
                          STAX_DTYPE_INT32, false);
  reference_t near = {"nearest", "asymmetric", "floor", -0.75, false, 0};
  check_against_reference(&near, 2, (int64_t[]){3, 3}, (int64_t[]){6, 2}, NULL, true, NULL,
                          STAX_DTYPE_INT64, true);
  check_against_reference(&near, 1, (int64_t[]){5}, (int64_t[]){9}, NULL, true, NULL,
                          STAX_DTYPE_UINT8, false);
  /* Trilinear over four axes (batch axis untouched). */
  reference_t trilinear = {"linear", "align_corners", "round_prefer_floor", -0.75, false, 0};
  check_against_reference(&trilinear, 4, (int64_t[]){2, 2, 3, 2}, (int64_t[]){2, 4, 5, 3}, NULL, true,
                          NULL, STAX_DTYPE_FLOAT32, false);
}

static void test_resize_uint8_rounding_and_nearest_bytes(void) {
  /* uint8 [0, 255] upsampled to 4 with half_pixel linear: 0, 63.75 -> 64, 191.25 -> 191, 255. */
  stax_tensor_t* x = make(STAX_DTYPE_UINT8, 2, (int64_t[]){1, 2}, (double[]){0, 255});
  stax_tensor_t* sizes = vec(2, (int64_t[]){1, 4});
  stax_node_attr_t linear = attr_string("mode", "linear");
  stax_tensor_t* out = NULL;
  CHECK_OK(resize(x, NULL, NULL, sizes, &linear, 1, &out));
  check_values(out, (double[]){0, 64, 191, 255}, 4, 0);
  release_all(&out, 1);
  stax_tensor_release(x);
  /* Nearest copies bytes: int64 values beyond 2^53 survive exactly. */
  int64_t big[2] = {((int64_t)1 << 60) + 3, -((int64_t)1 << 58) - 1};
  x = make_ints(2, (int64_t[]){1, 2}, big);
  CHECK_OK(resize(x, NULL, NULL, sizes, NULL, 0, &out));
  CHECK(out && get_int(out, 0) == big[0] && get_int(out, 3) == big[1]);
  release_all(&out, 1);
  stax_tensor_release(x);
  stax_tensor_release(sizes);
}

static void test_resize_sizes_axes_policy(void) {
  stax_tensor_t* x = make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, (double[]){1, 2, 3, 4});
  stax_tensor_t* out = NULL;
  /* axes (opset 18): sizes for the last two axes only. */
  int64_t axes[2] = {2, -1};
  stax_tensor_t* sizes = vec(2, (int64_t[]){7, 8});
  stax_node_attr_t attrs[2] = {attr_ints("axes", 2, axes), attr_string("keep_aspect_ratio_policy", "not_larger")};
  CHECK_OK(resize(x, NULL, NULL, sizes, attrs, 2, &out));
  /* not_larger: scale min(7/2, 8/2) = 3.5, so 7 x 7, sampled with that scale. */
  CHECK(dims_are(out, 4, (int64_t[]){1, 1, 7, 7}));
  reference_t r = {"nearest", "half_pixel", "round_prefer_floor", -0.75, false, 0};
  double expected[64];
  reference_resize(&r, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4}, (int64_t[]){7, 7},
                   (double[]){3.5, 3.5}, NULL, expected);
  check_values(out, expected, 49, 0);
  release_all(&out, 1);
  attrs[1] = attr_string("keep_aspect_ratio_policy", "not_smaller");
  CHECK_OK(resize(x, NULL, NULL, sizes, attrs, 2, &out));
  CHECK(dims_are(out, 4, (int64_t[]){1, 1, 8, 8}));
  release_all(&out, 1);
  /* Scales with axes, into a preallocated output. */
  stax_tensor_t* scales = floats(2, (double[]){2, 1});
  out = make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 2}, NULL);
  CHECK_OK(resize(x, NULL, scales, NULL, attrs, 1, &out));
  check_values(out, (double[]){1, 2, 1, 2, 3, 4, 3, 4}, 8, 0);
  release_all(&out, 1);
  /* Empty placeholder inputs (as exporters write them) count as absent. */
  stax_tensor_t* empty = floats(0, NULL);
  stax_tensor_t* full_sizes = vec(4, (int64_t[]){1, 1, 4, 4});
  CHECK_OK(resize(x, empty, empty, full_sizes, NULL, 0, &out));
  CHECK(dims_are(out, 4, (int64_t[]){1, 1, 4, 4}));
  release_all(&out, 1);
  /* The opset 10 form Resize(X, scales): asymmetric, floor. */
  stax_tensor_t* line = make(STAX_DTYPE_FLOAT32, 1, (int64_t[]){2}, (double[]){1, 2});
  stax_tensor_t* three = floats(1, (double[]){3});
  stax_tensor_t* pair[2] = {line, three};
  CHECK_OK(run(stax_kernel_Resize, STAX_OP_Resize, NULL, 0, pair, 2, &out, 1));
  check_values(out, (double[]){1, 1, 1, 2, 2, 2}, 6, 0);
  release_all(&out, 1);
  /* Zero-sized output. */
  stax_tensor_t* to_zero = vec(4, (int64_t[]){1, 1, 0, 3});
  CHECK_OK(resize(x, NULL, NULL, to_zero, NULL, 0, &out));
  CHECK(dims_are(out, 4, (int64_t[]){1, 1, 0, 3}));
  release_all(&out, 1);
  stax_tensor_t* all[8] = {x, sizes, scales, empty, full_sizes, line, three, to_zero};
  release_all(all, 8);
}

static void test_resize_errors(void) {
  stax_tensor_t* x = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, NULL);
  stax_tensor_t* scales = floats(2, (double[]){2, 2});
  stax_tensor_t* sizes = vec(2, (int64_t[]){4, 4});
  stax_tensor_t* out = NULL;
  CHECK_ERROR(resize(x, NULL, scales, sizes, NULL, 0, &out), STAX_INVALID_ARGUMENT, "not both");
  CHECK_ERROR(resize(x, NULL, NULL, NULL, NULL, 0, &out), STAX_INVALID_ARGUMENT, "needs scales");
  stax_node_attr_t bad = attr_string("mode", "bilinear");
  CHECK_ERROR(resize(x, NULL, scales, NULL, &bad, 1, &out), STAX_INVALID_ARGUMENT,
              "one of nearest, linear, cubic");
  bad = attr_string("coordinate_transformation_mode", "corners");
  CHECK_ERROR(resize(x, NULL, scales, NULL, &bad, 1, &out), STAX_INVALID_ARGUMENT, "corners");
  bad = attr_string("nearest_mode", "round");
  CHECK_ERROR(resize(x, NULL, scales, NULL, &bad, 1, &out), STAX_INVALID_ARGUMENT, "round");
  stax_node_attr_t antialias[2] = {attr_string("mode", "linear"), attr_int("antialias", 1)};
  CHECK_ERROR(resize(x, NULL, scales, NULL, antialias, 2, &out), STAX_UNIMPLEMENTED, "antialias");
  bad = attr_string("keep_aspect_ratio_policy", "fit");
  CHECK_ERROR(resize(x, NULL, NULL, sizes, &bad, 1, &out), STAX_INVALID_ARGUMENT, "fit");
  stax_tensor_t* three = floats(3, (double[]){1, 1, 1});
  CHECK_ERROR(resize(x, NULL, three, NULL, NULL, 0, &out), STAX_INVALID_ARGUMENT, "2 values are needed");
  stax_tensor_t* negative = floats(2, (double[]){1, -2});
  CHECK_ERROR(resize(x, NULL, negative, NULL, NULL, 0, &out), STAX_INVALID_ARGUMENT, "scales[1] is -2");
  stax_tensor_t* bad_sizes = vec(2, (int64_t[]){1, -1});
  CHECK_ERROR(resize(x, NULL, NULL, bad_sizes, NULL, 0, &out), STAX_INVALID_ARGUMENT, "sizes[1] is -1");
  stax_tensor_t* int_scales = vec(2, (int64_t[]){2, 2});
  CHECK_ERROR(resize(x, NULL, int_scales, NULL, NULL, 0, &out), STAX_DTYPE_MISMATCH, "float");
  stax_node_attr_t crop = attr_string("coordinate_transformation_mode", "tf_crop_and_resize");
  stax_tensor_t* short_roi = floats(2, (double[]){0, 1});
  CHECK_ERROR(resize(x, short_roi, scales, NULL, &crop, 1, &out), STAX_INVALID_ARGUMENT, "roi");
  stax_tensor_t* empty = make(STAX_DTYPE_FLOAT32, 2, (int64_t[]){0, 2}, NULL);
  CHECK_ERROR(resize(empty, NULL, NULL, sizes, NULL, 0, &out), STAX_INVALID_ARGUMENT,
              "dim 0 is 0, so it cannot be resized to 4");
  int64_t repeated[2] = {0, -2};
  stax_node_attr_t axes = attr_ints("axes", 2, repeated);
  CHECK_ERROR(resize(x, NULL, scales, NULL, &axes, 1, &out), STAX_INVALID_ARGUMENT, "repeats axis 0");
  CHECK(out == NULL);
  /* A wild roi must not crash (coordinates far outside become extrapolation). */
  stax_tensor_t* wild = floats(4, (double[]){-1e30, NAN, 1e30, 1e38});
  CHECK_OK(resize(x, wild, NULL, sizes, &crop, 1, &out));
  release_all(&out, 1);
  stax_tensor_t* all[11] = {x, scales, sizes, three, negative, bad_sizes, int_scales, short_roi, empty, wild};
  release_all(all, 10);
}

static void test_resize_parallel(void) {
  stax_threadpool_t* pool = NULL;
  CHECK_OK(stax_threadpool_create(allocator(), 4, &pool));
  test_pool = pool;
  enum { H = 40, W = 52, OH = 97, OW = 75 };
  static double data[H * W], expected[OH * OW];
  for (int i = 0; i < H * W; i++) data[i] = (i * 37) % 101 * 0.5;
  stax_tensor_t* x = make(STAX_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, H, W}, data);
  stax_tensor_t* sizes = vec(4, (int64_t[]){1, 1, OH, OW});
  const char* modes[2] = {"linear", "cubic"};
  for (int m = 0; m < 2; m++) {
    stax_node_attr_t mode = attr_string("mode", modes[m]);
    stax_tensor_t* out = NULL;
    CHECK_OK(resize(x, NULL, NULL, sizes, &mode, 1, &out));
    reference_t r = {modes[m], "half_pixel", "round_prefer_floor", -0.75, false, 0};
    reference_resize(&r, 2, (int64_t[]){H, W}, data, (int64_t[]){OH, OW},
                     (double[]){(double)OH / H, (double)OW / W}, NULL, expected);
    check_values(out, expected, OH * OW, 1e-3);
    release_all(&out, 1);
  }
  stax_tensor_release(sizes);
  stax_tensor_release(x);
  test_pool = NULL;
  stax_threadpool_destroy(pool);
}

static void test_allocation_failures(void) {
  /* Rank 6 cubic: 4^5 tap combinations per row, more than the stack buffer holds, so each
   * worker allocates and a failure there must surface as a status too. */
  int64_t dims[6] = {2, 2, 2, 2, 2, 2};
  stax_tensor_t* x = make(STAX_DTYPE_FLOAT32, 6, dims, NULL);
  stax_tensor_t* sizes = vec(6, (int64_t[]){3, 3, 3, 3, 3, 3});
  stax_tensor_t* inputs[4] = {x, NULL, NULL, sizes};
  stax_node_attr_t cubic = attr_string("mode", "cubic");
  check_allocation_failures(stax_kernel_Resize, STAX_OP_Resize, &cubic, 1, inputs, 4, 1);
  stax_node_attr_t linear = attr_string("mode", "linear");
  check_allocation_failures(stax_kernel_Resize, STAX_OP_Resize, &linear, 1, inputs, 4, 1);
  /* Constant input, constant output: the weights of every combination sum to one. */
  stax_tensor_t* ones = make(STAX_DTYPE_FLOAT64, 6, dims, NULL);
  for (int i = 0; i < 64; i++) ((double*)stax_tensor_data(ones))[i] = 2.5;
  inputs[0] = ones;
  stax_tensor_t* out = NULL;
  CHECK_OK(run(stax_kernel_Resize, STAX_OP_Resize, &cubic, 1, inputs, 4, &out, 1));
  bool all_equal = true;
  for (int i = 0; out && i < 729; i++) all_equal = all_equal && fabs(get(out, i) - 2.5) < 1e-12;
  CHECK(all_equal);
  release_all(&out, 1);
  stax_tensor_t* all[3] = {x, sizes, ones};
  release_all(all, 3);
}

STAX_TEST_MAIN(STAX_TEST(test_resize_onnx_examples), STAX_TEST(test_resize_modes),
               STAX_TEST(test_resize_uint8_rounding_and_nearest_bytes),
               STAX_TEST(test_resize_sizes_axes_policy), STAX_TEST(test_resize_errors),
               STAX_TEST(test_resize_parallel), STAX_TEST(test_allocation_failures))
