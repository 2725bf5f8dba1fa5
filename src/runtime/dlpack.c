/* DLPack exchange (the 0.6 ABI from Debian's libdlpack-dev), zero copy both ways. Import wraps
 * the producer's memory in a buffer whose release runs the producer's deleter; export hands
 * out a DLManagedTensor that keeps the stax tensor alive until the consumer's deleter call.
 * Strides are in elements on both sides, so they carry over as they are. */
#include <dlpack/dlpack.h>
#include <string.h>

#include "runtime/tensor_internal.h"

/* The dtype table names DLPack type codes by number; DLPack 0.6 predates kDLBool (6). */
_Static_assert(DLPACK_VERSION >= 60, "stax needs DLPack 0.6 or later");

static const char* stax_dlpack_device_name(int32_t device_type) {
  switch (device_type) {
    case kDLCPU:
      return "CPU";
    case kDLCUDA:
      return "CUDA";
    case kDLCUDAHost:
      return "CUDA host";
    case kDLOpenCL:
      return "OpenCL";
    case kDLVulkan:
      return "Vulkan";
    case kDLMetal:
      return "Metal";
    case kDLVPI:
      return "VPI";
    case kDLROCM:
      return "ROCm";
    case kDLROCMHost:
      return "ROCm host";
    case kDLExtDev:
      return "external";
    case kDLCUDAManaged:
      return "CUDA managed";
    default:
      return "unknown";
  }
}

/* ---- import ------------------------------------------------------------------------------- */

static void stax_dlpack_release_managed(void* release_ctx, void* data) {
  (void)data;
  DLManagedTensor* managed = (DLManagedTensor*)release_ctx;
  if (managed->deleter) managed->deleter(managed);
}

stax_status_t stax_tensor_from_dlpack(stax_allocator_t allocator, DLManagedTensor* managed,
                                      stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  if (managed == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "from_dlpack: managed tensor is NULL");
  }
  const DLTensor* dl = &managed->dl_tensor;
  if (dl->device.device_type != kDLCPU) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "from_dlpack: tensor lives on device type %d (%s), id %d; only CPU "
                            "tensors can be imported",
                            (int)dl->device.device_type,
                            stax_dlpack_device_name((int32_t)dl->device.device_type),
                            (int)dl->device.device_id);
  }
  if (dl->dtype.lanes != 1) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "from_dlpack: vector dtype (code %u, %u bits, %u lanes) is not "
                            "supported; only 1 lane",
                            (unsigned)dl->dtype.code, (unsigned)dl->dtype.bits,
                            (unsigned)dl->dtype.lanes);
  }
  stax_dtype_t dtype = stax_dtype_from_dlpack(dl->dtype.code, dl->dtype.bits);
  if (dtype == STAX_DTYPE_INVALID) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "from_dlpack: dtype code %u with %u bits is not supported",
                            (unsigned)dl->dtype.code, (unsigned)dl->dtype.bits);
  }
  int64_t count = 0;
  STAX_RETURN_IF_ERROR(stax_shape_validate("from_dlpack", (int32_t)dl->ndim, dl->shape, &count));
  int32_t rank = (int32_t)dl->ndim;
  int64_t strides[STAX_MAX_RANK];
  if (dl->strides) {
    memcpy(strides, dl->strides, sizeof(int64_t) * (size_t)rank);
  } else {
    stax_shape_contiguous_strides(rank, dl->shape, strides);
  }
  int64_t element_size = (int64_t)stax_dtype_size(dtype);
  char* first = (char*)dl->data + dl->byte_offset;
  /* The buffer spans exactly the bytes the view reaches; with negative strides it starts
   * before the first element, which the tensor offset accounts for. */
  int64_t lowest = 0, highest = 0, size_bytes = 0;
  if (count > 0) {
    if (dl->data == NULL) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "from_dlpack: data is NULL for a non-empty tensor %s",
                              stax_dims_text(rank, dl->shape).text);
    }
    /* Kernels read elements through typed pointers (and the JIT with element alignment):
     * data off its element's alignment would be undefined behaviour, so it is refused. */
    if ((uintptr_t)first % (uintptr_t)element_size != 0) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "from_dlpack: data at %p (byte_offset %llu) is not aligned to "
                              "its %lld-byte %s elements",
                              dl->data, (unsigned long long)dl->byte_offset,
                              (long long)element_size, stax_dtype_name(dtype));
    }
    if (!stax_shape_extent(rank, dl->shape, strides, &lowest, &highest) ||
        __builtin_mul_overflow(highest - lowest + 1, element_size, &size_bytes)) {
      return stax_status_make(STAX_OUT_OF_RANGE,
                              "from_dlpack: tensor %s with strides %s spans more than int64 "
                              "bytes",
                              stax_dims_text(rank, dl->shape).text,
                              stax_dims_text(rank, strides).text);
    }
  }
  stax_buffer_t* buffer = NULL;
  /* The deleter is attached only once nothing can fail: on error the caller still owns
   * `managed`, as documented. */
  STAX_RETURN_IF_ERROR(
      stax_buffer_wrap(allocator, count > 0 ? first + lowest * element_size : first,
                       (size_t)size_bytes, NULL, NULL, &buffer),
      "in from_dlpack");
  stax_status_t status = stax_tensor_make_view(allocator, buffer, dtype, rank, dl->shape, strides,
                                               -lowest, out_tensor);
  if (status == STAX_OK) {
    buffer->release = stax_dlpack_release_managed;
    buffer->release_ctx = managed;
  }
  stax_buffer_release(buffer);
  return status;
}

/* ---- export ------------------------------------------------------------------------------- */

/* One allocation holds the managed tensor and the shape and strides it points into. */
typedef struct stax_dlpack_export_t {
  DLManagedTensor managed; /* first, so the deleter's argument is the block */
  stax_allocator_t allocator;
  stax_tensor_t* tensor; /* retained */
  int64_t shape[STAX_MAX_RANK];
  int64_t strides[STAX_MAX_RANK];
} stax_dlpack_export_t;

static void stax_dlpack_export_deleter(DLManagedTensor* managed) {
  stax_dlpack_export_t* block = (stax_dlpack_export_t*)managed->manager_ctx;
  stax_tensor_release(block->tensor);
  stax_allocator_free(block->allocator, block, sizeof(*block));
}

stax_status_t stax_tensor_to_dlpack(stax_allocator_t allocator, stax_tensor_t* tensor,
                                    DLManagedTensor** out_managed) {
  *out_managed = NULL;
  if (tensor == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "to_dlpack: tensor is NULL");
  }
  STAX_RETURN_IF_ERROR(stax_tensor_require_tensor(tensor, "to_dlpack: the value"));
  stax_dlpack_export_t* block = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(allocator, 1, sizeof(*block), (void**)&block),
                       "while exporting a %s tensor %s to DLPack", stax_dtype_name(tensor->dtype),
                       stax_dims_text(tensor->rank, tensor->dims).text);
  block->allocator = allocator;
  block->tensor = tensor;
  stax_tensor_retain(tensor);
  memcpy(block->shape, tensor->dims, sizeof(int64_t) * (size_t)tensor->rank);
  memcpy(block->strides, tensor->strides, sizeof(int64_t) * (size_t)tensor->rank);
  DLTensor* dl = &block->managed.dl_tensor;
  /* The first element's address with byte_offset 0: the form numpy and PyTorch produce and
   * the one consumers that ignore byte_offset still read correctly. */
  dl->data = stax_tensor_data(tensor);
  dl->device.device_type = kDLCPU;
  dl->device.device_id = 0;
  dl->ndim = tensor->rank;
  dl->dtype.code = (uint8_t)stax_dtype_dlpack_code(tensor->dtype);
  dl->dtype.bits = (uint8_t)(stax_dtype_size(tensor->dtype) * 8);
  dl->dtype.lanes = 1;
  dl->shape = block->shape;
  dl->strides = block->strides;
  dl->byte_offset = 0;
  block->managed.manager_ctx = block;
  block->managed.deleter = stax_dlpack_export_deleter;
  *out_managed = &block->managed;
  return STAX_OK;
}
