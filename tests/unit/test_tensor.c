/* Tests for tensors: creation, views sharing data, every view operation and its error paths,
 * copies with arbitrary strides and dtype conversion, wrapping user memory, and fault
 * injection over create/view sequences. */
#include <dlpack/dlpack.h>

#include "runtime/tensor_internal.h"
#include "test_harness.h"

static stax_allocator_t sys(void) { return stax_allocator_system(); }

/* A float32 tensor [rank, dims] filled with 0, 1, 2, ... in row-major order. */
static stax_tensor_t* make_iota(int32_t rank, const int64_t* dims) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(sys(), STAX_DTYPE_FLOAT32, rank, dims, &t));
  float* data = (float*)stax_tensor_data(t);
  for (int64_t i = 0; i < stax_tensor_element_count(t); i++) data[i] = (float)i;
  return t;
}

/* Element at a multi-index of a float32 view, read through its strides. */
static float at(const stax_tensor_t* t, const int64_t* index) {
  const float* data = (const float*)stax_tensor_data(t);
  int64_t offset = 0;
  for (int32_t k = 0; k < stax_tensor_rank(t); k++) offset += index[k] * stax_tensor_strides(t)[k];
  return data[offset];
}
static float at2(const stax_tensor_t* t, int64_t i, int64_t j) {
  int64_t index[2] = {i, j};
  return at(t, index);
}

static bool dims_are(const stax_tensor_t* t, int32_t rank, const int64_t* dims) {
  if (stax_tensor_rank(t) != rank) return false;
  for (int32_t k = 0; k < rank; k++) {
    if (stax_tensor_dims(t)[k] != dims[k]) return false;
  }
  return true;
}
static bool strides_are(const stax_tensor_t* t, const int64_t* strides) {
  for (int32_t k = 0; k < stax_tensor_rank(t); k++) {
    if (stax_tensor_strides(t)[k] != strides[k]) return false;
  }
  return true;
}

/* ---- creation ----------------------------------------------------------------------------- */

static void test_create(void) {
  int64_t dims[3] = {2, 3, 4};
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(sys(), STAX_DTYPE_INT16, 3, dims, &t));
  CHECK_EQ_INT(stax_tensor_dtype(t), STAX_DTYPE_INT16);
  CHECK_EQ_INT(stax_tensor_rank(t), 3);
  CHECK(dims_are(t, 3, dims));
  int64_t strides[3] = {12, 4, 1};
  CHECK(strides_are(t, strides));
  CHECK_EQ_INT(stax_tensor_offset(t), 0);
  CHECK_EQ_INT(stax_tensor_element_count(t), 24);
  CHECK(stax_tensor_is_contiguous(t));
  CHECK_EQ_INT((uintptr_t)stax_tensor_data(t) % STAX_BUFFER_ALIGNMENT, 0);
  CHECK_EQ_INT(stax_buffer_size(stax_tensor_buffer(t)), 48);
  CHECK(stax_buffer_data(stax_tensor_buffer(t)) == stax_tensor_data(t));
  stax_tensor_release(t);

  stax_tensor_t* scalar = NULL;
  CHECK_OK(stax_tensor_create_zeros(sys(), STAX_DTYPE_FLOAT64, 0, NULL, &scalar));
  CHECK_EQ_INT(stax_tensor_element_count(scalar), 1);
  CHECK(*(double*)stax_tensor_data(scalar) == 0.0);
  CHECK(stax_tensor_is_contiguous(scalar));
  stax_tensor_release(scalar);

  int64_t empty_dims[2] = {0, 5};
  stax_tensor_t* empty = NULL;
  CHECK_OK(stax_tensor_create(sys(), STAX_DTYPE_UINT8, 2, empty_dims, &empty));
  CHECK_EQ_INT(stax_tensor_element_count(empty), 0);
  CHECK(stax_tensor_is_contiguous(empty));
  stax_tensor_release(empty);

  int64_t zero_dims[2] = {3, 5};
  stax_tensor_t* zeros = NULL;
  CHECK_OK(stax_tensor_create_zeros(sys(), STAX_DTYPE_INT32, 2, zero_dims, &zeros));
  int nonzero = 0;
  for (int i = 0; i < 15; i++) nonzero += ((int32_t*)stax_tensor_data(zeros))[i] != 0;
  CHECK_EQ_INT(nonzero, 0);
  stax_tensor_retain(zeros);
  stax_tensor_release(zeros);
  CHECK_EQ_INT(stax_tensor_element_count(zeros), 15); /* still alive after retain+release */
  stax_tensor_release(zeros);
}

static void test_create_errors(void) {
  int64_t dims[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  stax_tensor_t* t = (stax_tensor_t*)1;
  CHECK_ERROR(stax_tensor_create(sys(), STAX_DTYPE_INVALID, 1, dims, &t), STAX_INVALID_ARGUMENT,
              "invalid dtype");
  CHECK(t == NULL);
  CHECK_ERROR(stax_tensor_create(sys(), STAX_DTYPE_FLOAT32, 9, dims, &t), STAX_INVALID_ARGUMENT,
              "rank 9");
  CHECK_ERROR(stax_tensor_create(sys(), STAX_DTYPE_FLOAT32, -1, dims, &t), STAX_INVALID_ARGUMENT,
              "rank -1");
  CHECK_ERROR(stax_tensor_create(sys(), STAX_DTYPE_FLOAT32, 2, NULL, &t), STAX_INVALID_ARGUMENT,
              "no dims");
  int64_t negative[2] = {2, -3};
  CHECK_ERROR(stax_tensor_create(sys(), STAX_DTYPE_FLOAT32, 2, negative, &t), STAX_INVALID_ARGUMENT,
              "dim 1 of [2, -3] is negative");
  int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
  CHECK_ERROR(stax_tensor_create(sys(), STAX_DTYPE_FLOAT32, 2, huge, &t), STAX_OUT_OF_RANGE,
              "overflows");
  int64_t too_many_bytes[1] = {INT64_C(1) << 62};
  CHECK_ERROR(stax_tensor_create(sys(), STAX_DTYPE_FLOAT64, 1, too_many_bytes, &t),
              STAX_OUT_OF_MEMORY, "too large");
  CHECK_ERROR(stax_tensor_create_zeros(sys(), STAX_DTYPE_FLOAT32, 2, negative, &t),
              STAX_INVALID_ARGUMENT, "negative");
}

static void test_create_view_bounds(void) {
  stax_buffer_t* buffer = NULL;
  CHECK_OK(stax_buffer_allocate(sys(), 48, &buffer)); /* 12 floats */
  CHECK_EQ_INT((uintptr_t)stax_buffer_data(buffer) % 64, 0);
  float* data = (float*)stax_buffer_data(buffer);
  for (int i = 0; i < 12; i++) data[i] = (float)i;
  int64_t dims[2] = {3, 4};
  stax_tensor_t* view = NULL;
  CHECK_OK(stax_tensor_create_view(sys(), buffer, STAX_DTYPE_FLOAT32, 2, dims, NULL, 0, &view));
  CHECK(at2(view, 2, 3) == 11.0f);
  stax_tensor_release(view);
  int64_t small[2] = {2, 2};
  int64_t strides[2] = {4, 2};
  CHECK_OK(stax_tensor_create_view(sys(), buffer, STAX_DTYPE_FLOAT32, 2, small, strides, 5, &view));
  CHECK(at2(view, 1, 1) == 11.0f);
  stax_tensor_release(view);
  /* Negative strides: the first element is the highest address. */
  int64_t backward[1] = {-1};
  int64_t four[1] = {4};
  CHECK_OK(stax_tensor_create_view(sys(), buffer, STAX_DTYPE_FLOAT32, 1, four, backward, 3, &view));
  int64_t index[1] = {3};
  CHECK(at(view, index) == 0.0f);
  stax_tensor_release(view);

  stax_tensor_t* bad = (stax_tensor_t*)1;
  CHECK_ERROR(stax_tensor_create_view(sys(), buffer, STAX_DTYPE_FLOAT32, 2, dims, NULL, 1, &bad),
              STAX_OUT_OF_RANGE, "48-byte buffer");
  CHECK(bad == NULL);
  CHECK_ERROR(stax_tensor_create_view(sys(), buffer, STAX_DTYPE_FLOAT64, 2, dims, NULL, 0, &bad),
              STAX_OUT_OF_RANGE, "float64 view [3, 4]");
  CHECK_ERROR(
      stax_tensor_create_view(sys(), buffer, STAX_DTYPE_FLOAT32, 1, four, backward, 2, &bad),
      STAX_OUT_OF_RANGE, "strides [-1]");
  CHECK_ERROR(stax_tensor_create_view(sys(), buffer, STAX_DTYPE_FLOAT32, 2, dims, NULL, -1, &bad),
              STAX_OUT_OF_RANGE, "offset -1");
  int64_t huge_strides[2] = {INT64_MAX / 2, 1};
  CHECK_ERROR(
      stax_tensor_create_view(sys(), buffer, STAX_DTYPE_FLOAT32, 2, dims, huge_strides, 0, &bad),
      STAX_OUT_OF_RANGE, NULL);
  CHECK_ERROR(stax_tensor_create_view(sys(), NULL, STAX_DTYPE_FLOAT32, 2, dims, NULL, 0, &bad),
              STAX_INVALID_ARGUMENT, "buffer is NULL");
  CHECK_ERROR(stax_tensor_create_view(sys(), buffer, (stax_dtype_t)42, 2, dims, NULL, 0, &bad),
              STAX_INVALID_ARGUMENT, "dtype 42");
  /* An empty view reaches nothing, so any offset inside the buffer is fine. */
  int64_t empty[2] = {0, 100};
  CHECK_OK(stax_tensor_create_view(sys(), buffer, STAX_DTYPE_FLOAT32, 2, empty, NULL, 7, &view));
  stax_tensor_release(view);
  stax_buffer_release(buffer);
}

typedef struct release_record_t {
  int calls;
  void* data;
} release_record_t;

static void record_release(void* ctx, void* data) {
  release_record_t* record = (release_record_t*)ctx;
  record->calls++;
  record->data = data;
}

static void test_wrap(void) {
  float storage[6] = {0, 1, 2, 3, 4, 5};
  release_record_t record = {0, NULL};
  int64_t dims[2] = {3, 2};
  int64_t strides[2] = {1, 3}; /* column-major */
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_wrap(sys(), storage, STAX_DTYPE_FLOAT32, 2, dims, strides, record_release,
                            &record, &t));
  CHECK(stax_tensor_data(t) == storage);
  CHECK(at2(t, 2, 1) == 5.0f && at2(t, 1, 0) == 1.0f);
  CHECK(!stax_tensor_is_contiguous(t));
  CHECK_EQ_INT(stax_buffer_size(stax_tensor_buffer(t)), 24);
  stax_tensor_t* view = NULL;
  CHECK_OK(stax_tensor_transpose(sys(), t, NULL, &view));
  CHECK(stax_tensor_is_contiguous(view));
  stax_tensor_release(t);
  CHECK_EQ_INT(record.calls, 0); /* the view still holds the buffer */
  storage[0] = 42.0f;            /* no copy was made */
  CHECK(at2(view, 0, 0) == 42.0f);
  stax_tensor_release(view);
  CHECK_EQ_INT(record.calls, 1);
  CHECK(record.data == storage);

  stax_tensor_t* bad = NULL;
  int64_t negative[2] = {-2, 1};
  CHECK_ERROR(stax_tensor_wrap(sys(), storage, STAX_DTYPE_FLOAT32, 2, dims, negative,
                               record_release, &record, &bad),
              STAX_INVALID_ARGUMENT, "stride 0 is negative");
  CHECK_ERROR(stax_tensor_wrap(sys(), NULL, STAX_DTYPE_FLOAT32, 2, dims, NULL, record_release,
                               &record, &bad),
              STAX_INVALID_ARGUMENT, "data is NULL");
  CHECK_ERROR(stax_tensor_wrap(sys(), storage, STAX_DTYPE_COUNT, 2, dims, NULL, NULL, NULL, &bad),
              STAX_INVALID_ARGUMENT, "dtype");
  CHECK_EQ_INT(record.calls, 1); /* errors never run the release callback */
  /* No callback: the caller keeps the memory. */
  CHECK_OK(stax_tensor_wrap(sys(), storage, STAX_DTYPE_FLOAT32, 2, dims, NULL, NULL, NULL, &t));
  stax_tensor_release(t);
  stax_buffer_t* buffer = NULL;
  CHECK_ERROR(stax_buffer_wrap(sys(), NULL, 4, NULL, NULL, &buffer), STAX_INVALID_ARGUMENT,
              "NULL pointer");
}

/* ---- views -------------------------------------------------------------------------------- */

static void test_views_share_data(void) {
  int64_t dims[2] = {2, 3};
  stax_tensor_t* t = make_iota(2, dims);
  int64_t flat[1] = {6};
  stax_tensor_t* r = NULL;
  CHECK_OK(stax_tensor_reshape(sys(), t, 1, flat, false, &r));
  CHECK(stax_tensor_data(r) == stax_tensor_data(t));
  CHECK(stax_tensor_buffer(r) == stax_tensor_buffer(t));
  ((float*)stax_tensor_data(r))[4] = 99.0f;
  CHECK(at2(t, 1, 1) == 99.0f);
  stax_tensor_release(t); /* the view keeps the buffer alive */
  CHECK(((float*)stax_tensor_data(r))[5] == 5.0f);
  stax_tensor_release(r);
}

static void test_reshape(void) {
  int64_t dims[2] = {2, 3};
  stax_tensor_t* t = make_iota(2, dims);
  stax_tensor_t* r = NULL;
  int64_t to32[2] = {3, 2};
  CHECK_OK(stax_tensor_reshape(sys(), t, 2, to32, false, &r));
  int64_t s32[2] = {2, 1};
  CHECK(dims_are(r, 2, to32) && strides_are(r, s32) && at2(r, 2, 1) == 5.0f);
  stax_tensor_release(r);

  int64_t infer[3] = {-1, 1, 2};
  CHECK_OK(stax_tensor_reshape(sys(), t, 3, infer, false, &r));
  int64_t inferred[3] = {3, 1, 2};
  CHECK(dims_are(r, 3, inferred));
  stax_tensor_release(r);

  int64_t copy_dim[3] = {0, 3, 1}; /* 0 copies input dim 0 */
  CHECK_OK(stax_tensor_reshape(sys(), t, 3, copy_dim, false, &r));
  int64_t copied[3] = {2, 3, 1};
  CHECK(dims_are(r, 3, copied));
  stax_tensor_release(r);

  int64_t scalar_dims[1] = {1};
  stax_tensor_t* one = make_iota(1, scalar_dims);
  CHECK_OK(stax_tensor_reshape(sys(), one, 0, NULL, false, &r));
  CHECK_EQ_INT(stax_tensor_rank(r), 0);
  stax_tensor_release(r);
  stax_tensor_release(one);

  int64_t bad[2] = {4, 2};
  CHECK_ERROR(stax_tensor_reshape(sys(), t, 2, bad, false, &r), STAX_SHAPE_MISMATCH,
              "cannot reshape [2, 3] (6 elements) to [4, 2] (8 elements)");
  int64_t indivisible[2] = {-1, 4};
  CHECK_ERROR(stax_tensor_reshape(sys(), t, 2, indivisible, false, &r), STAX_SHAPE_MISMATCH,
              "not a multiple of 4");
  int64_t two_inferred[2] = {-1, -1};
  CHECK_ERROR(stax_tensor_reshape(sys(), t, 2, two_inferred, false, &r), STAX_INVALID_ARGUMENT,
              "both -1");
  int64_t below[2] = {-2, 3};
  CHECK_ERROR(stax_tensor_reshape(sys(), t, 2, below, false, &r), STAX_INVALID_ARGUMENT,
              "dim 0 of [-2, 3] is -2");
  int64_t zero_past_rank[3] = {2, 3, 0};
  CHECK_ERROR(stax_tensor_reshape(sys(), t, 3, zero_past_rank, false, &r), STAX_INVALID_ARGUMENT,
              "has rank 2");
  int64_t zero_and_infer[2] = {0, -1};
  CHECK_ERROR(stax_tensor_reshape(sys(), t, 2, zero_and_infer, true, &r), STAX_INVALID_ARGUMENT,
              "cannot infer");
  /* allow_zero: 0 is a real 0, so [2, 3] -> [0, 3] is a count mismatch. */
  int64_t literal_zero[2] = {0, 3};
  CHECK_ERROR(stax_tensor_reshape(sys(), t, 2, literal_zero, true, &r), STAX_SHAPE_MISMATCH,
              "(0 elements)");
  CHECK_ERROR(stax_tensor_reshape(sys(), t, 9, bad, false, &r), STAX_INVALID_ARGUMENT, "rank 9");
  CHECK_ERROR(stax_tensor_reshape(sys(), NULL, 2, bad, false, &r), STAX_INVALID_ARGUMENT,
              "tensor is NULL");
  stax_tensor_release(t);

  /* Empty tensors: allow_zero keeps zeros, -1 is inferred against the other dims. */
  int64_t empty_dims[2] = {0, 3};
  stax_tensor_t* empty = make_iota(2, empty_dims);
  int64_t to_empty[3] = {3, 0, 5};
  CHECK_OK(stax_tensor_reshape(sys(), empty, 3, to_empty, true, &r));
  CHECK(dims_are(r, 3, to_empty));
  stax_tensor_release(r);
  int64_t infer_empty[2] = {-1, 3};
  CHECK_OK(stax_tensor_reshape(sys(), empty, 2, infer_empty, false, &r));
  CHECK(dims_are(r, 2, empty_dims));
  stax_tensor_release(r);
  stax_tensor_release(empty);
}

static void test_reshape_non_contiguous(void) {
  int64_t dims[2] = {2, 3};
  stax_tensor_t* t = make_iota(2, dims);
  stax_tensor_t* tr = NULL;
  CHECK_OK(stax_tensor_transpose(sys(), t, NULL, &tr)); /* [3, 2], strides [1, 3] */
  CHECK(!stax_tensor_is_contiguous(tr));
  stax_tensor_t* r = NULL;
  int64_t flat[1] = {6};
  CHECK_ERROR(stax_tensor_reshape(sys(), tr, 1, flat, false, &r), STAX_FAILED_PRECONDITION,
              "[3, 2] with strides [1, 3] cannot be viewed as [6]");
  CHECK(r == NULL);
  /* Splitting off size-1 dims is still a view. */
  int64_t with_ones[4] = {1, 3, 1, 2};
  CHECK_OK(stax_tensor_reshape(sys(), tr, 4, with_ones, false, &r));
  CHECK(stax_tensor_buffer(r) == stax_tensor_buffer(t));
  int64_t index[4] = {0, 2, 0, 1};
  CHECK(at(r, index) == 5.0f);
  stax_tensor_release(r);
  /* reshape_copy falls back to a contiguous copy in the transposed order. */
  CHECK_OK(stax_tensor_reshape_copy(sys(), tr, 1, flat, false, &r));
  CHECK(stax_tensor_buffer(r) != stax_tensor_buffer(t));
  const float* values = (const float*)stax_tensor_data(r);
  float expected[6] = {0, 3, 1, 4, 2, 5};
  CHECK(memcmp(values, expected, sizeof(expected)) == 0);
  stax_tensor_release(r);
  /* ... and stays a view when one is possible. */
  CHECK_OK(stax_tensor_reshape_copy(sys(), t, 1, flat, false, &r));
  CHECK(stax_tensor_buffer(r) == stax_tensor_buffer(t));
  stax_tensor_release(r);
  stax_tensor_release(tr);

  /* Every other column of [4, 6]: strides [6, 2]. Splitting rows is a view, merging is not. */
  int64_t big[2] = {4, 6};
  stax_tensor_t* b = make_iota(2, big);
  int64_t starts[1] = {0}, ends[1] = {6}, steps[1] = {2};
  int32_t axes[1] = {1};
  stax_tensor_t* cols = NULL;
  CHECK_OK(stax_tensor_slice(sys(), b, 1, starts, ends, axes, steps, &cols));
  int64_t split[3] = {2, 2, 3};
  CHECK_OK(stax_tensor_reshape(sys(), cols, 3, split, false, &r));
  int64_t split_strides[3] = {12, 6, 2};
  CHECK(strides_are(r, split_strides));
  int64_t split_index[3] = {1, 1, 2};
  CHECK(at(r, split_index) == 22.0f);
  stax_tensor_release(r);
  /* Every other column of rows of 6 is one line with stride 2, so it even flattens... */
  int64_t merged[1] = {12};
  CHECK_OK(stax_tensor_reshape(sys(), cols, 1, merged, false, &r));
  int64_t stride_two[1] = {2};
  CHECK(strides_are(r, stride_two));
  stax_tensor_release(r);
  /* ...but the first 3 columns of rows of 6 do not. */
  stax_tensor_t* left = NULL;
  int64_t left_end[1] = {3};
  CHECK_OK(stax_tensor_slice(sys(), b, 1, starts, left_end, axes, NULL, &left));
  CHECK_ERROR(stax_tensor_reshape(sys(), left, 1, merged, false, &r), STAX_FAILED_PRECONDITION,
              "[4, 3] with strides [6, 1] cannot be viewed as [12]");
  int64_t left_split[3] = {2, 2, 3};
  CHECK_OK(stax_tensor_reshape(sys(), left, 3, left_split, false, &r));
  stax_tensor_release(r);
  stax_tensor_release(left);
  /* A broadcast row cannot be flattened without a copy either. */
  int64_t row_dims[1] = {3};
  stax_tensor_t* row = make_iota(1, row_dims);
  int64_t wide[2] = {4, 3};
  stax_tensor_t* bc = NULL;
  CHECK_OK(stax_tensor_broadcast(sys(), row, 2, wide, &bc));
  CHECK_ERROR(stax_tensor_reshape(sys(), bc, 1, merged, false, &r), STAX_FAILED_PRECONDITION, NULL);
  int64_t bc_split[3] = {2, 2, 3}; /* splitting the broadcast dim keeps stride 0 */
  CHECK_OK(stax_tensor_reshape(sys(), bc, 3, bc_split, false, &r));
  int64_t bc_strides[3] = {0, 0, 1};
  CHECK(strides_are(r, bc_strides));
  stax_tensor_release(r);
  stax_tensor_release(bc);
  stax_tensor_release(row);
  stax_tensor_release(cols);
  stax_tensor_release(b);
  stax_tensor_release(t);
}

static void test_transpose(void) {
  int64_t dims[3] = {2, 3, 4};
  stax_tensor_t* t = make_iota(3, dims);
  stax_tensor_t* tr = NULL;
  int32_t perm[3] = {1, 2, 0};
  CHECK_OK(stax_tensor_transpose(sys(), t, perm, &tr));
  int64_t tr_dims[3] = {3, 4, 2};
  int64_t tr_strides[3] = {4, 1, 12};
  CHECK(dims_are(tr, 3, tr_dims) && strides_are(tr, tr_strides));
  int64_t index[3] = {2, 1, 1}; /* = t[1, 2, 1] */
  CHECK(at(tr, index) == 21.0f);
  stax_tensor_release(tr);
  CHECK_OK(stax_tensor_transpose(sys(), t, NULL, &tr));
  int64_t reversed[3] = {4, 3, 2};
  CHECK(dims_are(tr, 3, reversed));
  stax_tensor_release(tr);
  int32_t out_of_range[3] = {0, 3, 1};
  CHECK_ERROR(stax_tensor_transpose(sys(), t, out_of_range, &tr), STAX_INVALID_ARGUMENT,
              "perm[1] = 3 is out of range for rank 3");
  int32_t negative[3] = {0, -1, 1};
  CHECK_ERROR(stax_tensor_transpose(sys(), t, negative, &tr), STAX_INVALID_ARGUMENT,
              "perm[1] = -1");
  int32_t repeated[3] = {0, 1, 0};
  CHECK_ERROR(stax_tensor_transpose(sys(), t, repeated, &tr), STAX_INVALID_ARGUMENT,
              "perm[2] = 0 repeats");
  CHECK_ERROR(stax_tensor_transpose(sys(), NULL, perm, &tr), STAX_INVALID_ARGUMENT, NULL);
  stax_tensor_release(t);
}

static void test_slice(void) {
  int64_t dims[2] = {4, 5};
  stax_tensor_t* t = make_iota(2, dims);
  stax_tensor_t* s = NULL;
  /* rows 1..3, columns -3.. (i.e. 2..4) */
  int64_t starts[2] = {1, -3}, ends[2] = {3, INT64_MAX};
  CHECK_OK(stax_tensor_slice(sys(), t, 2, starts, ends, NULL, NULL, &s));
  int64_t s_dims[2] = {2, 3};
  CHECK(dims_are(s, 2, s_dims));
  CHECK_EQ_INT(stax_tensor_offset(s), 7);
  CHECK(at2(s, 0, 0) == 7.0f && at2(s, 1, 2) == 14.0f);
  CHECK(stax_tensor_buffer(s) == stax_tensor_buffer(t));
  stax_tensor_release(s);

  /* Negative step: the whole of axis 1 reversed, and every other row from the end. */
  int64_t rev_starts[2] = {-1, INT64_MAX}, rev_ends[2] = {INT64_MIN, INT64_MIN};
  int64_t rev_steps[2] = {-2, -1};
  int32_t axes[2] = {0, -1};
  CHECK_OK(stax_tensor_slice(sys(), t, 2, rev_starts, rev_ends, axes, rev_steps, &s));
  int64_t rev_dims[2] = {2, 5};
  int64_t rev_strides[2] = {-10, -1};
  CHECK(dims_are(s, 2, rev_dims) && strides_are(s, rev_strides));
  CHECK(at2(s, 0, 0) == 19.0f && at2(s, 0, 4) == 15.0f && at2(s, 1, 0) == 9.0f);
  stax_tensor_t* copy = NULL;
  CHECK_OK(stax_tensor_copy(sys(), s, &copy));
  float expected[10] = {19, 18, 17, 16, 15, 9, 8, 7, 6, 5};
  CHECK(memcmp(stax_tensor_data(copy), expected, sizeof(expected)) == 0);
  stax_tensor_release(copy);
  stax_tensor_release(s);

  /* Step larger than the dim, clamped starts/ends, empty results. */
  int64_t one_start[1] = {-100}, one_end[1] = {100}, big_step[1] = {INT64_MAX};
  int32_t axis1[1] = {1};
  CHECK_OK(stax_tensor_slice(sys(), t, 1, one_start, one_end, axis1, big_step, &s));
  int64_t single[2] = {4, 1};
  CHECK(dims_are(s, 2, single) && at2(s, 3, 0) == 15.0f);
  stax_tensor_release(s);
  int64_t empty_start[1] = {3}, empty_end[1] = {1};
  CHECK_OK(stax_tensor_slice(sys(), t, 1, empty_start, empty_end, NULL, NULL, &s));
  CHECK_EQ_INT(stax_tensor_dims(s)[0], 0);
  CHECK_EQ_INT(stax_tensor_element_count(s), 0);
  stax_tensor_release(s);
  int64_t back_step[1] = {-1}, past_start[1] = {10}, past_end[1] = {-10};
  CHECK_OK(stax_tensor_slice(sys(), t, 1, past_start, past_end, NULL, back_step, &s));
  CHECK_EQ_INT(stax_tensor_dims(s)[0], 4); /* clamped to [3 .. -1) backwards */
  CHECK(at2(s, 0, 0) == 15.0f);
  stax_tensor_release(s);

  int64_t zero_step[1] = {0};
  CHECK_ERROR(stax_tensor_slice(sys(), t, 1, starts, ends, NULL, zero_step, &s),
              STAX_INVALID_ARGUMENT, "steps[0] (axis 0) is 0");
  int32_t bad_axis[1] = {2};
  CHECK_ERROR(stax_tensor_slice(sys(), t, 1, starts, ends, bad_axis, NULL, &s),
              STAX_INVALID_ARGUMENT, "axes[0] = 2 is out of range for rank 2");
  int32_t twice[2] = {1, -1};
  CHECK_ERROR(stax_tensor_slice(sys(), t, 2, starts, ends, twice, NULL, &s), STAX_INVALID_ARGUMENT,
              "axis 1 is sliced twice");
  CHECK_ERROR(stax_tensor_slice(sys(), t, 3, starts, ends, NULL, NULL, &s), STAX_INVALID_ARGUMENT,
              "3 axes given for a tensor of rank 2");
  CHECK_ERROR(stax_tensor_slice(sys(), t, 1, NULL, ends, NULL, NULL, &s), STAX_INVALID_ARGUMENT,
              "required");
  stax_tensor_release(t);
}

static void test_broadcast(void) {
  int64_t dims[1] = {3};
  stax_tensor_t* t = make_iota(1, dims);
  stax_tensor_t* b = NULL;
  int64_t target[2] = {2, 3};
  CHECK_OK(stax_tensor_broadcast(sys(), t, 2, target, &b));
  int64_t b_strides[2] = {0, 1};
  CHECK(dims_are(b, 2, target) && strides_are(b, b_strides));
  CHECK(at2(b, 1, 2) == 2.0f);
  CHECK(!stax_tensor_is_contiguous(b));
  stax_tensor_t* column = NULL;
  int64_t col_dims[2] = {3, 1};
  CHECK_OK(stax_tensor_reshape(sys(), t, 2, col_dims, false, &column));
  stax_tensor_t* square = NULL;
  int64_t sq[3] = {2, 3, 4};
  CHECK_OK(stax_tensor_broadcast(sys(), column, 3, sq, &square));
  int64_t sq_strides[3] = {0, 1, 0};
  CHECK(strides_are(square, sq_strides));
  stax_tensor_t* copy = NULL;
  CHECK_OK(stax_tensor_copy(sys(), square, &copy));
  const float* values = (const float*)stax_tensor_data(copy);
  CHECK(values[0] == 0.0f && values[5] == 1.0f && values[23] == 2.0f);
  stax_tensor_release(copy);
  stax_tensor_t* bad = NULL;
  int64_t four[1] = {4};
  CHECK_ERROR(stax_tensor_broadcast(sys(), t, 1, four, &bad), STAX_SHAPE_MISMATCH,
              "cannot broadcast [3] to [4]: dim 0 is 3, target dim 0 is 4");
  CHECK_ERROR(stax_tensor_broadcast(sys(), square, 2, target, &bad), STAX_SHAPE_MISMATCH,
              "lower rank");
  int64_t negative[2] = {-1, 3};
  CHECK_ERROR(stax_tensor_broadcast(sys(), t, 2, negative, &bad), STAX_INVALID_ARGUMENT,
              "negative");
  stax_tensor_release(square);
  stax_tensor_release(column);
  stax_tensor_release(b);
  stax_tensor_release(t);
}

static void test_squeeze_unsqueeze(void) {
  int64_t dims[4] = {1, 3, 1, 2};
  stax_tensor_t* t = make_iota(4, dims);
  stax_tensor_t* s = NULL;
  CHECK_OK(stax_tensor_squeeze(sys(), t, 0, NULL, &s));
  int64_t all[2] = {3, 2};
  CHECK(dims_are(s, 2, all) && stax_tensor_is_contiguous(s));
  stax_tensor_release(s);
  int32_t axes[1] = {-2};
  CHECK_OK(stax_tensor_squeeze(sys(), t, 1, axes, &s));
  int64_t one[3] = {1, 3, 2};
  CHECK(dims_are(s, 3, one));
  stax_tensor_release(s);
  int32_t non_one[1] = {1};
  CHECK_ERROR(stax_tensor_squeeze(sys(), t, 1, non_one, &s), STAX_INVALID_ARGUMENT,
              "cannot squeeze axis 1 of [1, 3, 1, 2]: its size is 3");
  int32_t out_of_range[1] = {4};
  CHECK_ERROR(stax_tensor_squeeze(sys(), t, 1, out_of_range, &s), STAX_INVALID_ARGUMENT,
              "axes[0] = 4");
  int32_t twice[2] = {0, -4};
  CHECK_ERROR(stax_tensor_squeeze(sys(), t, 2, twice, &s), STAX_INVALID_ARGUMENT, "listed twice");
  CHECK_ERROR(stax_tensor_squeeze(sys(), t, 5, twice, &s), STAX_INVALID_ARGUMENT, "5 axes");

  int64_t base_dims[2] = {3, 2};
  stax_tensor_t* base = make_iota(2, base_dims);
  stax_tensor_t* u = NULL;
  int32_t unsq[2] = {0, -1};
  CHECK_OK(stax_tensor_unsqueeze(sys(), base, 2, unsq, &u));
  int64_t u_dims[4] = {1, 3, 2, 1};
  CHECK(dims_are(u, 4, u_dims) && stax_tensor_is_contiguous(u));
  int64_t index[4] = {0, 2, 1, 0};
  CHECK(at(u, index) == 5.0f);
  stax_tensor_release(u);
  int32_t middle[1] = {1};
  CHECK_OK(stax_tensor_unsqueeze(sys(), base, 1, middle, &u));
  int64_t m_dims[3] = {3, 1, 2};
  CHECK(dims_are(u, 3, m_dims));
  stax_tensor_release(u);
  int32_t bad[1] = {3};
  CHECK_ERROR(stax_tensor_unsqueeze(sys(), base, 1, bad, &u), STAX_INVALID_ARGUMENT,
              "axes[0] = 3 is out of range for output rank 3");
  int32_t dup[2] = {1, -3};
  CHECK_ERROR(stax_tensor_unsqueeze(sys(), base, 2, dup, &u), STAX_INVALID_ARGUMENT,
              "listed twice");
  int32_t many[7] = {0, 1, 2, 3, 4, 5, 6};
  CHECK_ERROR(stax_tensor_unsqueeze(sys(), base, 7, many, &u), STAX_INVALID_ARGUMENT,
              "exceeds the maximum rank 8");
  CHECK_ERROR(stax_tensor_unsqueeze(sys(), base, 1, NULL, &u), STAX_INVALID_ARGUMENT, NULL);
  stax_tensor_release(base);
  stax_tensor_release(t);
}

/* ---- copies ------------------------------------------------------------------------------- */

static void test_copy_into_with_conversion(void) {
  int64_t dims[2] = {2, 3};
  stax_tensor_t* t = make_iota(2, dims);
  ((float*)stax_tensor_data(t))[5] = -7.9f;
  stax_tensor_t* tr = NULL;
  CHECK_OK(stax_tensor_transpose(sys(), t, NULL, &tr));
  int64_t tr_dims[2] = {3, 2};
  stax_tensor_t* ints = NULL;
  CHECK_OK(stax_tensor_create(sys(), STAX_DTYPE_INT32, 2, tr_dims, &ints));
  CHECK_OK(stax_tensor_copy_into(tr, ints));
  int32_t expected[6] = {0, 3, 1, 4, 2, -7};
  CHECK(memcmp(stax_tensor_data(ints), expected, sizeof(expected)) == 0);

  /* Into a strided destination: the transposed view of a fresh float16 tensor. */
  stax_tensor_t* halves = NULL;
  CHECK_OK(stax_tensor_create_zeros(sys(), STAX_DTYPE_FLOAT16, 2, dims, &halves));
  stax_tensor_t* halves_tr = NULL;
  CHECK_OK(stax_tensor_transpose(sys(), halves, NULL, &halves_tr));
  CHECK_OK(stax_tensor_copy_into(ints, halves_tr));
  const uint16_t* h = (const uint16_t*)stax_tensor_data(halves);
  CHECK(stax_f16_to_f32(h[1]) == 1.0f && stax_f16_to_f32(h[4]) == 4.0f &&
        stax_f16_to_f32(h[5]) == -7.0f);

  stax_tensor_t* wrong = NULL;
  CHECK_OK(stax_tensor_create(sys(), STAX_DTYPE_INT32, 2, dims, &wrong));
  CHECK_ERROR(stax_tensor_copy_into(tr, wrong), STAX_SHAPE_MISMATCH,
              "source dims [3, 2] differ from destination dims [2, 3]");
  CHECK_ERROR(stax_tensor_copy_into(NULL, wrong), STAX_INVALID_ARGUMENT, "source");
  int64_t row_dims[1] = {3};
  stax_tensor_t* row = make_iota(1, row_dims);
  stax_tensor_t* broadcast = NULL;
  CHECK_OK(stax_tensor_broadcast(sys(), row, 2, dims, &broadcast));
  CHECK_ERROR(stax_tensor_copy_into(t, broadcast), STAX_INVALID_ARGUMENT,
              "destination dim 0 (size 2) is broadcast");
  CHECK_OK(stax_tensor_copy_into(broadcast, wrong)); /* broadcast sources are fine */
  int32_t rows[6] = {0, 1, 2, 0, 1, 2};
  CHECK(memcmp(stax_tensor_data(wrong), rows, sizeof(rows)) == 0);
  CHECK_OK(stax_tensor_copy_into(t, t)); /* same view: nothing to do */
  stax_tensor_release(broadcast);
  stax_tensor_release(row);
  stax_tensor_release(wrong);
  stax_tensor_release(halves_tr);
  stax_tensor_release(halves);
  stax_tensor_release(ints);
  stax_tensor_release(tr);
  stax_tensor_release(t);
}

/* Overlapping views of one buffer copy as if through a temporary. */
static void test_copy_into_overlapping(void) {
  int64_t dims[1] = {8};
  stax_tensor_t* t = make_iota(1, dims);
  int64_t a_start[1] = {0}, a_end[1] = {6}, b_start[1] = {2}, b_end[1] = {8};
  stax_tensor_t *a = NULL, *b = NULL;
  CHECK_OK(stax_tensor_slice(sys(), t, 1, a_start, a_end, NULL, NULL, &a));
  CHECK_OK(stax_tensor_slice(sys(), t, 1, b_start, b_end, NULL, NULL, &b));
  CHECK_OK(stax_tensor_copy_into(a, b)); /* shift right by 2 */
  float shifted[8] = {0, 1, 0, 1, 2, 3, 4, 5};
  CHECK(memcmp(stax_tensor_data(t), shifted, sizeof(shifted)) == 0);
  stax_tensor_t* reversed = NULL;
  int64_t r_start[1] = {-1}, r_end[1] = {INT64_MIN}, r_step[1] = {-1};
  CHECK_OK(stax_tensor_slice(sys(), t, 1, r_start, r_end, NULL, r_step, &reversed));
  CHECK_OK(stax_tensor_copy_into(reversed, t)); /* in-place reversal */
  float flipped[8] = {5, 4, 3, 2, 1, 0, 1, 0};
  CHECK(memcmp(stax_tensor_data(t), flipped, sizeof(flipped)) == 0);
  stax_tensor_release(reversed);
  stax_tensor_release(a);
  stax_tensor_release(b);
  stax_tensor_release(t);
}

/* Big enough to take the parallel path; checks every element of a transposed copy. */
static void test_copy_large_transposed(void) {
  int64_t dims[2] = {384, 1024};
  stax_tensor_t* t = make_iota(2, dims);
  stax_tensor_t* tr = NULL;
  CHECK_OK(stax_tensor_transpose(sys(), t, NULL, &tr));
  stax_tensor_t* copy = NULL;
  CHECK_OK(stax_tensor_copy(sys(), tr, &copy));
  const float* values = (const float*)stax_tensor_data(copy);
  int64_t wrong = 0;
  for (int64_t i = 0; i < 1024; i++) {
    for (int64_t j = 0; j < 384; j++) wrong += values[i * 384 + j] != (float)(j * 1024 + i);
  }
  CHECK_EQ_INT(wrong, 0);
  stax_tensor_release(copy);
  stax_tensor_release(tr);
  stax_tensor_release(t);
}

/* ---- fault injection ---------------------------------------------------------------------- */

/* A sequence of creates and views; stops at the first error and releases everything. */
static stax_status_t create_and_view(stax_allocator_t allocator) {
  stax_tensor_t* made[12] = {NULL};
  int n = 0;
  stax_status_t status = STAX_OK;
  int64_t dims[3] = {2, 3, 4};
  int64_t flat[2] = {6, -1};
  int32_t perm[3] = {2, 0, 1};
  int64_t starts[1] = {1}, ends[1] = {3}, wide[4] = {5, 2, 3, 4};
  int32_t axes[1] = {0};
  int64_t plain[1] = {24};
  float storage[4] = {0};
  int64_t storage_dims[1] = {4};
  DLManagedTensor* exported = NULL;
  STAX_GOTO_IF_ERROR(
      status, stax_tensor_create_zeros(allocator, STAX_DTYPE_FLOAT32, 3, dims, &made[n]), done);
  n++;
  STAX_GOTO_IF_ERROR(status, stax_tensor_reshape(allocator, made[0], 2, flat, false, &made[n]),
                     done);
  n++;
  STAX_GOTO_IF_ERROR(status, stax_tensor_transpose(allocator, made[0], perm, &made[n]), done);
  n++;
  STAX_GOTO_IF_ERROR(
      status, stax_tensor_slice(allocator, made[0], 1, starts, ends, NULL, NULL, &made[n]), done);
  n++;
  STAX_GOTO_IF_ERROR(status, stax_tensor_broadcast(allocator, made[0], 4, wide, &made[n]), done);
  n++;
  STAX_GOTO_IF_ERROR(status, stax_tensor_unsqueeze(allocator, made[0], 1, axes, &made[n]), done);
  n++;
  STAX_GOTO_IF_ERROR(status, stax_tensor_squeeze(allocator, made[n - 1], 1, axes, &made[n]), done);
  n++;
  STAX_GOTO_IF_ERROR(status, stax_tensor_copy(allocator, made[2], &made[n]), done);
  n++;
  STAX_GOTO_IF_ERROR(status,
                     stax_tensor_reshape_copy(allocator, made[2], 1, plain, false, &made[n]), done);
  n++;
  STAX_GOTO_IF_ERROR(status,
                     stax_tensor_wrap(allocator, storage, STAX_DTYPE_FLOAT32, 1, storage_dims, NULL,
                                      NULL, NULL, &made[n]),
                     done);
  n++;
  STAX_GOTO_IF_ERROR(status, stax_tensor_to_dlpack(allocator, made[2], &exported), done);
  STAX_GOTO_IF_ERROR(status, stax_tensor_from_dlpack(allocator, exported, &made[n]), done);
  exported = NULL; /* owned by made[n] now */
  n++;
done:
  if (exported) exported->deleter(exported);
  for (int i = 0; i < n; i++) stax_tensor_release(made[i]);
  return status;
}

static void test_fault_injection(void) {
  int failing_runs = 0;
  for (uint64_t fail_at = 1; fail_at < 100; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, sys(), fail_at);
    stax_status_t status = create_and_view(stax_failing_allocator(&state));
    CHECK_EQ_INT(state.live_allocations, 0);
    CHECK_EQ_INT(state.live_bytes, 0);
    if (state.failed_count == 0) {
      CHECK_OK(status);
      break;
    }
    failing_runs++;
    CHECK_ERROR(status, STAX_OUT_OF_MEMORY, NULL);
  }
  CHECK(failing_runs >= 12); /* one failure point per allocation in the sequence */
}

/* stax_shape_lead_rows: which leading dims walk as rows, how many, and their row stride. */
static void test_lead_rows(void) {
  int64_t rows = -1, stride = -1;
  /* Contiguous [4, 5, 768]: 20 rows of stride 768. */
  int64_t dims[3] = {4, 5, 768}, contiguous[3] = {3840, 768, 1};
  CHECK(stax_shape_lead_rows(2, dims, contiguous, &rows, &stride));
  CHECK_EQ_INT(rows, 20);
  CHECK_EQ_INT(stride, 768);
  /* Transposed leads ([5, 4] swapped): no. */
  int64_t swapped[3] = {768, 3072, 1};
  CHECK(!stax_shape_lead_rows(2, dims, swapped, &rows, &stride));
  /* Dims of extent 1 stride anyhow; none of extent > 1: stride 0. */
  int64_t ones[3] = {1, 1, 768}, odd[3] = {7, 99, 1};
  CHECK(stax_shape_lead_rows(2, ones, odd, &rows, &stride));
  CHECK_EQ_INT(rows, 1);
  CHECK_EQ_INT(stride, 0);
  int64_t one_inner[3] = {4, 1, 768}, padded[3] = {1000, 5, 1};
  CHECK(stax_shape_lead_rows(2, one_inner, padded, &rows, &stride));
  CHECK_EQ_INT(rows, 4);
  CHECK_EQ_INT(stride, 1000);
  /* A broadcast lead (stride 0) is not rows; zero rows are. */
  int64_t broadcast[3] = {0, 768, 1};
  CHECK(!stax_shape_lead_rows(2, dims, broadcast, &rows, &stride));
  int64_t empty[3] = {0, 5, 768};
  CHECK(stax_shape_lead_rows(2, empty, contiguous, &rows, &stride));
  CHECK_EQ_INT(rows, 0);
  /* Overflow of the row count. */
  int64_t huge[2] = {INT64_MAX / 2, 4}, huge_strides[2] = {4, 1};
  CHECK(!stax_shape_lead_rows(2, huge, huge_strides, &rows, &stride));
}

STAX_TEST_MAIN(STAX_TEST(test_create), STAX_TEST(test_create_errors), STAX_TEST(test_lead_rows),
               STAX_TEST(test_create_view_bounds), STAX_TEST(test_wrap),
               STAX_TEST(test_views_share_data), STAX_TEST(test_reshape),
               STAX_TEST(test_reshape_non_contiguous), STAX_TEST(test_transpose),
               STAX_TEST(test_slice), STAX_TEST(test_broadcast), STAX_TEST(test_squeeze_unsqueeze),
               STAX_TEST(test_copy_into_with_conversion), STAX_TEST(test_copy_into_overlapping),
               STAX_TEST(test_copy_large_transposed), STAX_TEST(test_fault_injection))
