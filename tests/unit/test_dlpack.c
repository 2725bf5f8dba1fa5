/* Tests for DLPack exchange: export fields, export -> import round trips (contiguous,
 * transposed and negative-stride views), the producer's deleter running exactly once and only
 * when the last view goes, byte_offset, dtype codes, and the rejected inputs. */
#include <dlpack/dlpack.h>

#include "runtime/tensor_internal.h"
#include "test_harness.h"

static stax_allocator_t sys(void) { return stax_allocator_system(); }

static stax_tensor_t* make_iota(int32_t rank, const int64_t* dims) {
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_create(sys(), STAX_DTYPE_FLOAT32, rank, dims, &t));
  float* data = (float*)stax_tensor_data(t);
  for (int64_t i = 0; i < stax_tensor_element_count(t); i++) data[i] = (float)i;
  return t;
}

/* A producer-side managed tensor whose deleter counts its calls. */
typedef struct producer_t {
  DLManagedTensor managed;
  int64_t shape[STAX_MAX_RANK];
  int64_t strides[STAX_MAX_RANK];
  float storage[64];
  int deleter_calls;
} producer_t;

static void count_deleter(DLManagedTensor* managed) {
  ((producer_t*)managed->manager_ctx)->deleter_calls++;
}

static void producer_init(producer_t* p, int ndim, const int64_t* shape, const int64_t* strides) {
  memset(p, 0, sizeof(*p));
  for (int i = 0; i < 64; i++) p->storage[i] = (float)i;
  for (int k = 0; k < ndim; k++) {
    p->shape[k] = shape[k];
    if (strides) p->strides[k] = strides[k];
  }
  DLTensor* dl = &p->managed.dl_tensor;
  dl->data = p->storage;
  dl->device.device_type = kDLCPU;
  dl->ndim = ndim;
  dl->dtype.code = kDLFloat;
  dl->dtype.bits = 32;
  dl->dtype.lanes = 1;
  dl->shape = p->shape;
  dl->strides = strides ? p->strides : NULL;
  p->managed.manager_ctx = p;
  p->managed.deleter = count_deleter;
}

static float element(const stax_tensor_t* t, const int64_t* index) {
  const float* data = (const float*)stax_tensor_data(t);
  int64_t offset = 0;
  for (int32_t k = 0; k < stax_tensor_rank(t); k++) offset += index[k] * stax_tensor_strides(t)[k];
  return data[offset];
}

static void test_export_fields(void) {
  int64_t dims[2] = {2, 3};
  stax_tensor_t* t = make_iota(2, dims);
  DLManagedTensor* managed = NULL;
  CHECK_OK(stax_tensor_to_dlpack(sys(), t, &managed));
  DLTensor* dl = &managed->dl_tensor;
  CHECK(dl->data == stax_tensor_data(t));
  CHECK_EQ_INT(dl->device.device_type, kDLCPU);
  CHECK_EQ_INT(dl->ndim, 2);
  CHECK(dl->shape[0] == 2 && dl->shape[1] == 3);
  CHECK(dl->strides[0] == 3 && dl->strides[1] == 1);
  CHECK_EQ_INT(dl->dtype.code, kDLFloat);
  CHECK_EQ_INT(dl->dtype.bits, 32);
  CHECK_EQ_INT(dl->dtype.lanes, 1);
  CHECK_EQ_INT(dl->byte_offset, 0);
  /* The export keeps the tensor alive on its own. */
  stax_tensor_release(t);
  CHECK(((float*)dl->data)[5] == 5.0f);
  managed->deleter(managed);

  stax_tensor_t* flags = NULL;
  CHECK_OK(stax_tensor_create_zeros(sys(), STAX_DTYPE_BOOL, 1, dims, &flags));
  CHECK_OK(stax_tensor_to_dlpack(sys(), flags, &managed));
  CHECK_EQ_INT(managed->dl_tensor.dtype.code, 6); /* kDLBool, newer than DLPack 0.6 */
  CHECK_EQ_INT(managed->dl_tensor.dtype.bits, 8);
  managed->deleter(managed);
  stax_tensor_release(flags);

  stax_tensor_t* brain = NULL;
  CHECK_OK(stax_tensor_create_zeros(sys(), STAX_DTYPE_BFLOAT16, 0, NULL, &brain));
  CHECK_OK(stax_tensor_to_dlpack(sys(), brain, &managed));
  CHECK_EQ_INT(managed->dl_tensor.dtype.code, kDLBfloat);
  CHECK_EQ_INT(managed->dl_tensor.dtype.bits, 16);
  CHECK_EQ_INT(managed->dl_tensor.ndim, 0);
  managed->deleter(managed);
  stax_tensor_release(brain);

  CHECK_ERROR(stax_tensor_to_dlpack(sys(), NULL, &managed), STAX_INVALID_ARGUMENT, "NULL");
  CHECK(managed == NULL);
}

/* Wraps an export's deleter to count its calls. */
static void (*original_deleter)(DLManagedTensor*) = NULL;
static int export_deleter_calls = 0;
static void counting_export_deleter(DLManagedTensor* managed) {
  export_deleter_calls++;
  original_deleter(managed);
}

/* Export a view, import it back: same memory, dims and strides; dropping the imported tensor
 * runs the export's deleter, which drops the last reference to the original. */
static void round_trip(stax_tensor_t* view) {
  DLManagedTensor* managed = NULL;
  CHECK_OK(stax_tensor_to_dlpack(sys(), view, &managed));
  original_deleter = managed->deleter;
  managed->deleter = counting_export_deleter;
  export_deleter_calls = 0;
  stax_tensor_t* back = NULL;
  CHECK_OK(stax_tensor_from_dlpack(sys(), managed, &back));
  CHECK(stax_tensor_data(back) == stax_tensor_data(view));
  CHECK_EQ_INT(stax_tensor_rank(back), stax_tensor_rank(view));
  CHECK_EQ_INT(stax_tensor_dtype(back), stax_tensor_dtype(view));
  for (int32_t k = 0; k < stax_tensor_rank(view); k++) {
    CHECK_EQ_INT(stax_tensor_dims(back)[k], stax_tensor_dims(view)[k]);
    CHECK_EQ_INT(stax_tensor_strides(back)[k], stax_tensor_strides(view)[k]);
  }
  /* Every element reads the same through both. */
  stax_tensor_t* a = NULL;
  stax_tensor_t* b = NULL;
  CHECK_OK(stax_tensor_copy(sys(), view, &a));
  CHECK_OK(stax_tensor_copy(sys(), back, &b));
  size_t bytes = (size_t)stax_tensor_element_count(view) * stax_dtype_size(stax_tensor_dtype(view));
  CHECK(memcmp(stax_tensor_data(a), stax_tensor_data(b), bytes) == 0);
  stax_tensor_release(a);
  stax_tensor_release(b);
  stax_tensor_release(view);
  CHECK_EQ_INT(export_deleter_calls, 0);
  stax_tensor_release(back); /* runs the deleter, which releases the last reference */
  CHECK_EQ_INT(export_deleter_calls, 1);
}

static void test_round_trips(void) {
  int64_t dims[2] = {3, 4};
  round_trip(make_iota(2, dims));

  stax_tensor_t* t = make_iota(2, dims);
  stax_tensor_t* transposed = NULL;
  CHECK_OK(stax_tensor_transpose(sys(), t, NULL, &transposed));
  stax_tensor_release(t);
  round_trip(transposed); /* strides [1, 4] */

  t = make_iota(2, dims);
  stax_tensor_t* reversed = NULL;
  int64_t starts[2] = {-1, 1}, ends[2] = {INT64_MIN, 4}, steps[2] = {-1, 2};
  CHECK_OK(stax_tensor_slice(sys(), t, 2, starts, ends, NULL, steps, &reversed));
  stax_tensor_release(t);
  CHECK(stax_tensor_strides(reversed)[0] == -4 && stax_tensor_strides(reversed)[1] == 2);
  round_trip(reversed); /* negative strides */

  t = make_iota(2, dims);
  int64_t wide[3] = {2, 3, 4};
  stax_tensor_t* broadcast = NULL;
  CHECK_OK(stax_tensor_broadcast(sys(), t, 3, wide, &broadcast));
  stax_tensor_release(t);
  round_trip(broadcast); /* stride 0 */

  int64_t empty_dims[2] = {0, 4};
  round_trip(make_iota(2, empty_dims));
}

static void test_import_deleter_once(void) {
  producer_t p;
  int64_t shape[2] = {4, 6};
  producer_init(&p, 2, shape, NULL);
  stax_tensor_t* t = NULL;
  CHECK_OK(stax_tensor_from_dlpack(sys(), &p.managed, &t));
  CHECK(stax_tensor_data(t) == p.storage);
  CHECK(stax_tensor_is_contiguous(t));
  stax_tensor_t* view = NULL;
  int64_t flat[1] = {24};
  CHECK_OK(stax_tensor_reshape(sys(), t, 1, flat, false, &view));
  stax_tensor_release(t);
  CHECK_EQ_INT(p.deleter_calls, 0); /* the view still uses the memory */
  p.storage[23] = -1.0f;            /* zero copy */
  int64_t last[1] = {23};
  CHECK(element(view, last) == -1.0f);
  stax_tensor_release(view);
  CHECK_EQ_INT(p.deleter_calls, 1);

  /* Strides, byte_offset and negative strides from the producer. */
  int64_t strides[2] = {-6, 2};
  producer_init(&p, 2, shape, strides);
  p.managed.dl_tensor.byte_offset = 18 * sizeof(float); /* first element is storage[18] */
  CHECK_OK(stax_tensor_from_dlpack(sys(), &p.managed, &t));
  int64_t index[2] = {3, 5}; /* storage[18 - 18 + 10] */
  CHECK(element(t, index) == 10.0f);
  int64_t origin[2] = {0, 0};
  CHECK(element(t, origin) == 18.0f);
  CHECK(stax_tensor_strides(t)[0] == -6 && stax_tensor_strides(t)[1] == 2);
  stax_tensor_release(t);
  CHECK_EQ_INT(p.deleter_calls, 1);

  /* A NULL deleter is allowed: nothing to call. */
  producer_init(&p, 2, shape, NULL);
  p.managed.deleter = NULL;
  CHECK_OK(stax_tensor_from_dlpack(sys(), &p.managed, &t));
  stax_tensor_release(t);
  CHECK_EQ_INT(p.deleter_calls, 0);
}

static void test_import_rejects(void) {
  producer_t p;
  int64_t shape[2] = {4, 6};
  stax_tensor_t* t = (stax_tensor_t*)1;

  producer_init(&p, 2, shape, NULL);
  p.managed.dl_tensor.device.device_type = kDLCUDA;
  p.managed.dl_tensor.device.device_id = 1;
  CHECK_ERROR(stax_tensor_from_dlpack(sys(), &p.managed, &t), STAX_INVALID_ARGUMENT,
              "device type 2 (CUDA), id 1; only CPU");
  CHECK(t == NULL);
  producer_init(&p, 2, shape, NULL);
  p.managed.dl_tensor.dtype.lanes = 4;
  CHECK_ERROR(stax_tensor_from_dlpack(sys(), &p.managed, &t), STAX_INVALID_ARGUMENT, "4 lanes");
  producer_init(&p, 2, shape, NULL);
  p.managed.dl_tensor.dtype.code = kDLComplex;
  p.managed.dl_tensor.dtype.bits = 64;
  CHECK_ERROR(stax_tensor_from_dlpack(sys(), &p.managed, &t), STAX_INVALID_ARGUMENT,
              "code 5 with 64 bits");
  producer_init(&p, 2, shape, NULL);
  p.managed.dl_tensor.ndim = 9;
  CHECK_ERROR(stax_tensor_from_dlpack(sys(), &p.managed, &t), STAX_INVALID_ARGUMENT, "rank 9");
  int64_t negative[2] = {4, -6};
  producer_init(&p, 2, negative, NULL);
  CHECK_ERROR(stax_tensor_from_dlpack(sys(), &p.managed, &t), STAX_INVALID_ARGUMENT, "negative");
  producer_init(&p, 2, shape, NULL);
  p.managed.dl_tensor.data = NULL;
  CHECK_ERROR(stax_tensor_from_dlpack(sys(), &p.managed, &t), STAX_INVALID_ARGUMENT,
              "data is NULL");
  CHECK_ERROR(stax_tensor_from_dlpack(sys(), NULL, &t), STAX_INVALID_ARGUMENT, "NULL");
  /* Data off its element's alignment (a byte_offset of 2 into float32 data). */
  producer_init(&p, 2, shape, NULL);
  p.managed.dl_tensor.byte_offset = 2;
  CHECK_ERROR(stax_tensor_from_dlpack(sys(), &p.managed, &t), STAX_INVALID_ARGUMENT,
              "byte_offset 2) is not aligned to its 4-byte float32 elements");
  /* On error ownership stays with the caller: the deleter never ran. */
  CHECK_EQ_INT(p.deleter_calls, 0);

  /* Other dtypes map by code and bits. */
  producer_init(&p, 2, shape, NULL);
  p.managed.dl_tensor.dtype.code = kDLUInt;
  p.managed.dl_tensor.dtype.bits = 16;
  CHECK_OK(stax_tensor_from_dlpack(sys(), &p.managed, &t));
  CHECK_EQ_INT(stax_tensor_dtype(t), STAX_DTYPE_UINT16);
  stax_tensor_release(t);
  p.managed.dl_tensor.dtype.code = 6;
  p.managed.dl_tensor.dtype.bits = 8;
  CHECK_OK(stax_tensor_from_dlpack(sys(), &p.managed, &t));
  CHECK_EQ_INT(stax_tensor_dtype(t), STAX_DTYPE_BOOL);
  stax_tensor_release(t);
  CHECK_EQ_INT(p.deleter_calls, 2);
}

static void test_fault_injection(void) {
  for (uint64_t fail_at = 1; fail_at <= 4; fail_at++) {
    stax_failing_allocator_t state;
    stax_failing_allocator_init(&state, sys(), fail_at);
    stax_allocator_t failing = stax_failing_allocator(&state);
    producer_t p;
    int64_t shape[2] = {4, 6};
    producer_init(&p, 2, shape, NULL);
    stax_tensor_t* t = NULL;
    stax_status_t status = stax_tensor_from_dlpack(failing, &p.managed, &t);
    if (status == STAX_OK) {
      stax_tensor_release(t);
      CHECK_EQ_INT(p.deleter_calls, 1);
    } else {
      CHECK_ERROR(status, STAX_OUT_OF_MEMORY, NULL);
      CHECK_EQ_INT(p.deleter_calls, 0);
    }
    stax_tensor_t* source = NULL;
    CHECK_OK(stax_tensor_create_zeros(sys(), STAX_DTYPE_INT8, 2, shape, &source));
    DLManagedTensor* managed = NULL;
    status = stax_tensor_to_dlpack(failing, source, &managed);
    if (status == STAX_OK) {
      managed->deleter(managed);
    } else {
      CHECK_ERROR(status, STAX_OUT_OF_MEMORY, "exporting a int8 tensor [4, 6]");
      CHECK(managed == NULL);
    }
    stax_tensor_release(source);
    CHECK_EQ_INT(state.live_allocations, 0);
  }
}

STAX_TEST_MAIN(STAX_TEST(test_export_fields), STAX_TEST(test_round_trips),
               STAX_TEST(test_import_deleter_once), STAX_TEST(test_import_rejects),
               STAX_TEST(test_fault_injection))
