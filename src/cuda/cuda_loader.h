/* The CUDA driver API and NVRTC, loaded at run time with dlopen (never linked), so stax builds
 * and runs on machines without CUDA; what is missing becomes a status that names it. The few
 * types and entry points stax needs are declared here from their documented C signatures
 * (cuda.h and nvrtc.h are not included: the build must not need the toolkit).
 *
 * stax_cuda_driver_get / stax_cuda_nvrtc_get load once per process (pthread_once) and return
 * the same tables, or a copy of the same error, on every later call. The *_open functions do
 * one uncached attempt with an explicit library name; tests use them for the error paths. */
#ifndef STAX_CUDA_CUDA_LOADER_H_
#define STAX_CUDA_CUDA_LOADER_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stax/base.h"

typedef int stax_cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */
typedef int stax_cu_device_t; /* CUdevice */
typedef struct stax_cu_context_s* stax_cu_context_t;
typedef struct stax_cu_module_s* stax_cu_module_t;
typedef struct stax_cu_function_s* stax_cu_function_t;
typedef struct stax_cu_stream_s* stax_cu_stream_t;
typedef unsigned long long stax_cu_deviceptr_t; /* CUdeviceptr on 64-bit hosts */

typedef int stax_nvrtc_result_t; /* nvrtcResult: 0 is NVRTC_SUCCESS */
typedef struct stax_nvrtc_program_s* stax_nvrtc_program_t;

/* CUdevice_attribute values stax reads. */
#define STAX_CU_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define STAX_CU_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

#define STAX_CUDA_DRIVER_LIBRARY "libcuda.so.1"

typedef struct stax_cuda_driver_t {
  void* library; /* dlopen handle */
  stax_cu_result_t (*cuInit)(unsigned int flags);
  stax_cu_result_t (*cuDriverGetVersion)(int* version);
  stax_cu_result_t (*cuGetErrorString)(stax_cu_result_t error, const char** out_text);
  stax_cu_result_t (*cuDeviceGetCount)(int* count);
  stax_cu_result_t (*cuDeviceGet)(stax_cu_device_t* device, int ordinal);
  stax_cu_result_t (*cuDeviceGetAttribute)(int* value, int attribute, stax_cu_device_t device);
  stax_cu_result_t (*cuDeviceGetName)(char* name, int length, stax_cu_device_t device);
  stax_cu_result_t (*cuDevicePrimaryCtxRetain)(stax_cu_context_t* context,
                                               stax_cu_device_t device);
  stax_cu_result_t (*cuDevicePrimaryCtxRelease)(stax_cu_device_t device); /* _v2 */
  stax_cu_result_t (*cuCtxSetCurrent)(stax_cu_context_t context);
  stax_cu_result_t (*cuModuleLoadData)(stax_cu_module_t* module, const void* image);
  stax_cu_result_t (*cuModuleUnload)(stax_cu_module_t module);
  stax_cu_result_t (*cuModuleGetFunction)(stax_cu_function_t* function, stax_cu_module_t module,
                                          const char* name);
  stax_cu_result_t (*cuLaunchKernel)(stax_cu_function_t function, unsigned grid_x,
                                     unsigned grid_y, unsigned grid_z, unsigned block_x,
                                     unsigned block_y, unsigned block_z, unsigned shared_bytes,
                                     stax_cu_stream_t stream, void** params, void** extra);
  stax_cu_result_t (*cuMemAlloc)(stax_cu_deviceptr_t* pointer, size_t bytes);       /* _v2 */
  stax_cu_result_t (*cuMemFree)(stax_cu_deviceptr_t pointer);                       /* _v2 */
  stax_cu_result_t (*cuMemcpyHtoD)(stax_cu_deviceptr_t to, const void* from, size_t bytes);
  stax_cu_result_t (*cuMemcpyDtoH)(void* to, stax_cu_deviceptr_t from, size_t bytes);
  stax_cu_result_t (*cuStreamCreate)(stax_cu_stream_t* stream, unsigned int flags);
  stax_cu_result_t (*cuStreamSynchronize)(stax_cu_stream_t stream);
  stax_cu_result_t (*cuStreamDestroy)(stax_cu_stream_t stream); /* _v2 */
  /* Filled after cuInit. */
  int driver_version; /* 1000 * major + 10 * minor */
  int device_count;
  char device_name[128]; /* device 0 */
  int compute_major, compute_minor;
} stax_cuda_driver_t;

typedef struct stax_cuda_nvrtc_t {
  void* library;
  char path[512]; /* the name that loaded */
  stax_nvrtc_result_t (*nvrtcVersion)(int* major, int* minor);
  const char* (*nvrtcGetErrorString)(stax_nvrtc_result_t result);
  stax_nvrtc_result_t (*nvrtcCreateProgram)(stax_nvrtc_program_t* program, const char* source,
                                            const char* name, int header_count,
                                            const char* const* headers,
                                            const char* const* include_names);
  stax_nvrtc_result_t (*nvrtcCompileProgram)(stax_nvrtc_program_t program, int option_count,
                                             const char* const* options);
  stax_nvrtc_result_t (*nvrtcGetProgramLogSize)(stax_nvrtc_program_t program, size_t* size);
  stax_nvrtc_result_t (*nvrtcGetProgramLog)(stax_nvrtc_program_t program, char* log);
  stax_nvrtc_result_t (*nvrtcGetPTXSize)(stax_nvrtc_program_t program, size_t* size);
  stax_nvrtc_result_t (*nvrtcGetPTX)(stax_nvrtc_program_t program, char* ptx);
  stax_nvrtc_result_t (*nvrtcDestroyProgram)(stax_nvrtc_program_t* program);
  int major, minor;
} stax_cuda_nvrtc_t;

/* Loads `library` (NULL: libcuda.so.1), resolves every entry point, calls cuInit and reads
 * device 0. UNIMPLEMENTED naming what is missing: "CUDA driver not found (dlopen libcuda.so.1:
 * ...)", "libcuda.so.1 lacks cuLaunchKernel", "cuInit failed: ...", "no CUDA device
 * (cuDeviceGetCount returned 0)". On error nothing stays loaded. */
STAX_MUST_USE stax_status_t stax_cuda_driver_open(const char* library, stax_cuda_driver_t* out);
void stax_cuda_driver_close(stax_cuda_driver_t* driver);

/* Loads NVRTC: `path` when not NULL (STAX_NVRTC_PATH's value; then only that), else the first
 * of libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12 and the same in /usr/local/cuda/lib64 that
 * dlopen accepts. UNIMPLEMENTED "NVRTC not found (tried ...)" naming every attempt, or
 * "<path> lacks nvrtcGetPTX". */
STAX_MUST_USE stax_status_t stax_cuda_nvrtc_open(const char* path, stax_cuda_nvrtc_t* out);
void stax_cuda_nvrtc_close(stax_cuda_nvrtc_t* nvrtc);

/* The process-wide tables (loaded on first use; never unloaded). */
STAX_MUST_USE stax_status_t stax_cuda_driver_get(const stax_cuda_driver_t** out_driver);
STAX_MUST_USE stax_status_t stax_cuda_nvrtc_get(const stax_cuda_nvrtc_t** out_nvrtc);

/* "CUDA_ERROR_...: text" for a driver result (the code alone when the driver cannot say). */
const char* stax_cuda_error_text(const stax_cuda_driver_t* driver, stax_cu_result_t result,
                                 char* buffer, size_t size);

/* PTX for `source` compiled by NVRTC for compute capability major.minor
 * (--gpu-architecture=compute_<major><minor>). *out_ptx is allocated with `allocator` (size
 * *out_size + 1, NUL-terminated). A compile error is INTERNAL with NVRTC's log. */
STAX_MUST_USE stax_status_t stax_cuda_compile_ptx(const stax_cuda_nvrtc_t* nvrtc,
                                                  const char* source, const char* name,
                                                  int compute_major, int compute_minor,
                                                  stax_allocator_t allocator, char** out_ptx,
                                                  size_t* out_size);

/* What a CUDA target has on this machine, as one line for build info and errors: what is
 * missing (driver, device, NVRTC), or, when everything loads (*out_ready), what was found and
 * that the GPU execution path is not implemented yet (docs/gpu.md). */
void stax_cuda_describe(bool* out_ready, char* why, size_t why_size);

#endif /* STAX_CUDA_CUDA_LOADER_H_ */
