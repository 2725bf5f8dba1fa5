/* Run-time loading of the CUDA driver (libcuda.so.1) and NVRTC (libnvrtc.so*) with dlopen:
 * symbol tables, one-time process-wide initialisation, the NVRTC compile to PTX, and the
 * one-line description of what a CUDA target has on this machine (build info, errors). */
#include "cuda/cuda_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RTLD_NODELETE: a close (the *_open error paths, the tests) drops the handle but never unmaps
 * the library: libnvrtc keeps heap state from its static initializers that unloading would
 * orphan (LeakSanitizer reports it), and neither library promises to survive dlclose. */
#define LOAD_FLAGS (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)

/* ---- symbol tables ----------------------------------------------------------------------- */

typedef struct symbol_t {
  const char* name; /* exported name (the _v2 one where the API has one) */
  size_t offset;    /* of the function pointer in the table */
} symbol_t;

#define DRIVER_SYMBOL(field, exported) {exported, offsetof(stax_cuda_driver_t, field)}
static const symbol_t driver_symbols[] = {
    DRIVER_SYMBOL(cuInit, "cuInit"),
    DRIVER_SYMBOL(cuDriverGetVersion, "cuDriverGetVersion"),
    DRIVER_SYMBOL(cuGetErrorString, "cuGetErrorString"),
    DRIVER_SYMBOL(cuDeviceGetCount, "cuDeviceGetCount"),
    DRIVER_SYMBOL(cuDeviceGet, "cuDeviceGet"),
    DRIVER_SYMBOL(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    DRIVER_SYMBOL(cuDeviceGetName, "cuDeviceGetName"),
    DRIVER_SYMBOL(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    DRIVER_SYMBOL(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    DRIVER_SYMBOL(cuCtxSetCurrent, "cuCtxSetCurrent"),
    DRIVER_SYMBOL(cuModuleLoadData, "cuModuleLoadData"),
    DRIVER_SYMBOL(cuModuleUnload, "cuModuleUnload"),
    DRIVER_SYMBOL(cuModuleGetFunction, "cuModuleGetFunction"),
    DRIVER_SYMBOL(cuLaunchKernel, "cuLaunchKernel"),
    DRIVER_SYMBOL(cuMemAlloc, "cuMemAlloc_v2"),
    DRIVER_SYMBOL(cuMemFree, "cuMemFree_v2"),
    DRIVER_SYMBOL(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
    DRIVER_SYMBOL(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
    DRIVER_SYMBOL(cuStreamCreate, "cuStreamCreate"),
    DRIVER_SYMBOL(cuStreamSynchronize, "cuStreamSynchronize"),
    DRIVER_SYMBOL(cuStreamDestroy, "cuStreamDestroy_v2"),
};

#define NVRTC_SYMBOL(field) {#field, offsetof(stax_cuda_nvrtc_t, field)}
static const symbol_t nvrtc_symbols[] = {
    NVRTC_SYMBOL(nvrtcVersion),           NVRTC_SYMBOL(nvrtcGetErrorString),
    NVRTC_SYMBOL(nvrtcCreateProgram),     NVRTC_SYMBOL(nvrtcCompileProgram),
    NVRTC_SYMBOL(nvrtcGetProgramLogSize), NVRTC_SYMBOL(nvrtcGetProgramLog),
    NVRTC_SYMBOL(nvrtcGetPTXSize),        NVRTC_SYMBOL(nvrtcGetPTX),
    NVRTC_SYMBOL(nvrtcDestroyProgram),
};

/* Fills the table's function pointers from `library`; the name of the first missing one, or
 * NULL when all resolve. (POSIX guarantees a data pointer from dlsym converts to a function
 * pointer; memcpy keeps ISO C quiet about it.) */
static const char* resolve(void* library, void* table, const symbol_t* symbols, size_t count) {
  for (size_t i = 0; i < count; i++) {
    void* address = dlsym(library, symbols[i].name);
    if (!address) return symbols[i].name;
    memcpy((char*)table + symbols[i].offset, &address, sizeof(address));
  }
  return NULL;
}

/* ---- the driver -------------------------------------------------------------------------- */

const char* stax_cuda_error_text(const stax_cuda_driver_t* driver, stax_cu_result_t result,
                                 char* buffer, size_t size) {
  const char* text = NULL;
  if (driver && driver->cuGetErrorString && driver->cuGetErrorString(result, &text) != 0)
    text = NULL;
  if (text) {
    snprintf(buffer, size, "%s (CUresult %d)", text, result);
  } else {
    snprintf(buffer, size, "CUresult %d", result);
  }
  return buffer;
}

void stax_cuda_driver_close(stax_cuda_driver_t* driver) {
  if (!driver) return;
  if (driver->library) dlclose(driver->library);
  memset(driver, 0, sizeof(*driver));
}

stax_status_t stax_cuda_driver_open(const char* library, stax_cuda_driver_t* out) {
  memset(out, 0, sizeof(*out));
  const char* name = library ? library : STAX_CUDA_DRIVER_LIBRARY;
  out->library = dlopen(name, LOAD_FLAGS);
  if (!out->library) {
    const char* why = dlerror();
    return stax_status_make(STAX_UNIMPLEMENTED, "CUDA driver not found (dlopen %s: %s)", name,
                            why ? why : "unknown error");
  }
  stax_status_t status = STAX_OK;
  char text[256];
  const char* missing =
      resolve(out->library, out, driver_symbols, sizeof(driver_symbols) / sizeof(symbol_t));
  if (missing) {
    status = stax_status_make(STAX_UNIMPLEMENTED, "%s lacks %s (not a usable CUDA driver)", name,
                              missing);
    goto cleanup;
  }
  stax_cu_result_t result = out->cuInit(0);
  if (result != 0) {
    status = stax_status_make(STAX_UNIMPLEMENTED, "CUDA driver %s: cuInit failed: %s", name,
                              stax_cuda_error_text(out, result, text, sizeof(text)));
    goto cleanup;
  }
  if (out->cuDriverGetVersion(&out->driver_version) != 0) out->driver_version = 0;
  result = out->cuDeviceGetCount(&out->device_count);
  if (result != 0) {
    status = stax_status_make(STAX_UNIMPLEMENTED, "no CUDA device (cuDeviceGetCount failed: %s)",
                              stax_cuda_error_text(out, result, text, sizeof(text)));
    goto cleanup;
  }
  if (out->device_count <= 0) {
    status = stax_status_make(STAX_UNIMPLEMENTED, "no CUDA device (cuDeviceGetCount returned %d)",
                              out->device_count);
    goto cleanup;
  }
  stax_cu_device_t device = 0;
  result = out->cuDeviceGet(&device, 0);
  if (result == 0) result = out->cuDeviceGetName(out->device_name, sizeof(out->device_name), device);
  if (result == 0)
    result = out->cuDeviceGetAttribute(&out->compute_major,
                                       STAX_CU_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  if (result == 0)
    result = out->cuDeviceGetAttribute(&out->compute_minor,
                                       STAX_CU_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  if (result != 0) {
    status = stax_status_make(STAX_UNIMPLEMENTED, "CUDA device 0 cannot be queried: %s",
                              stax_cuda_error_text(out, result, text, sizeof(text)));
    goto cleanup;
  }
  out->device_name[sizeof(out->device_name) - 1] = '\0';
cleanup:
  if (status != STAX_OK) stax_cuda_driver_close(out);
  return status;
}

/* ---- NVRTC ------------------------------------------------------------------------------- */

void stax_cuda_nvrtc_close(stax_cuda_nvrtc_t* nvrtc) {
  if (!nvrtc) return;
  if (nvrtc->library) dlclose(nvrtc->library);
  memset(nvrtc, 0, sizeof(*nvrtc));
}

static const char* const nvrtc_names[] = {
    "libnvrtc.so",
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "/usr/local/cuda/lib64/libnvrtc.so",
    "/usr/local/cuda/lib64/libnvrtc.so.13",
    "/usr/local/cuda/lib64/libnvrtc.so.12",
};

stax_status_t stax_cuda_nvrtc_open(const char* path, stax_cuda_nvrtc_t* out) {
  memset(out, 0, sizeof(*out));
  char tried[1536];
  size_t used = 0;
  tried[0] = '\0';
  const char* const* names = path ? &path : nvrtc_names;
  size_t count = path ? 1 : sizeof(nvrtc_names) / sizeof(nvrtc_names[0]);
  for (size_t i = 0; i < count && !out->library; i++) {
    out->library = dlopen(names[i], LOAD_FLAGS);
    if (out->library) {
      snprintf(out->path, sizeof(out->path), "%s", names[i]);
    } else if (used < sizeof(tried)) {
      /* dlerror already names the file; keep only its reason after the name. */
      const char* why = dlerror();
      int n = snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? "; " : "",
                       why ? why : names[i]);
      if (n > 0) used += (size_t)n;
    }
  }
  if (!out->library)
    return stax_status_make(STAX_UNIMPLEMENTED, "NVRTC not found (tried %s%s)",
                            path ? "STAX_NVRTC_PATH: " : "", tried);
  const char* missing =
      resolve(out->library, out, nvrtc_symbols, sizeof(nvrtc_symbols) / sizeof(symbol_t));
  if (missing) {
    stax_status_t status = stax_status_make(STAX_UNIMPLEMENTED, "%s lacks %s (not NVRTC)",
                                            out->path, missing);
    stax_cuda_nvrtc_close(out);
    return status;
  }
  if (out->nvrtcVersion(&out->major, &out->minor) != 0) out->major = out->minor = 0;
  return STAX_OK;
}

stax_status_t stax_cuda_compile_ptx(const stax_cuda_nvrtc_t* nvrtc, const char* source,
                                    const char* name, int compute_major, int compute_minor,
                                    stax_allocator_t allocator, char** out_ptx,
                                    size_t* out_size) {
  *out_ptx = NULL;
  *out_size = 0;
  stax_nvrtc_program_t program = NULL;
  char* log = NULL;
  size_t log_size = 0;
  stax_status_t status = STAX_OK;
  stax_nvrtc_result_t result =
      nvrtc->nvrtcCreateProgram(&program, source, name, 0, NULL, NULL);
  if (result != 0)
    return stax_status_make(STAX_INTERNAL, "nvrtcCreateProgram(%s): %s", name,
                            nvrtc->nvrtcGetErrorString(result));
  char architecture[64];
  snprintf(architecture, sizeof(architecture), "--gpu-architecture=compute_%d%d", compute_major,
           compute_minor);
  /* No fast math: the kernels keep IEEE division, square root and denormals like the CPU's. */
  const char* options[] = {architecture, "--std=c++17"};
  result = nvrtc->nvrtcCompileProgram(program, 2, options);
  if (result != 0) {
    if (nvrtc->nvrtcGetProgramLogSize(program, &log_size) == 0 && log_size > 0 &&
        stax_allocator_malloc(allocator, log_size + 1, (void**)&log) == STAX_OK &&
        nvrtc->nvrtcGetProgramLog(program, log) == 0) {
      log[log_size] = '\0';
    } else if (log) {
      log[0] = '\0';
    }
    status = stax_status_make(STAX_INTERNAL, "NVRTC compile of %s for %s failed: %s\n%s", name,
                              architecture, nvrtc->nvrtcGetErrorString(result), log ? log : "");
    goto cleanup;
  }
  size_t size = 0;
  result = nvrtc->nvrtcGetPTXSize(program, &size);
  if (result != 0) {
    status = stax_status_make(STAX_INTERNAL, "nvrtcGetPTXSize(%s): %s", name,
                              nvrtc->nvrtcGetErrorString(result));
    goto cleanup;
  }
  STAX_GOTO_IF_ERROR(status, stax_allocator_malloc(allocator, size + 1, (void**)out_ptx), cleanup);
  result = nvrtc->nvrtcGetPTX(program, *out_ptx);
  if (result != 0) {
    status = stax_status_make(STAX_INTERNAL, "nvrtcGetPTX(%s): %s", name,
                              nvrtc->nvrtcGetErrorString(result));
    stax_allocator_free(allocator, *out_ptx, size + 1);
    *out_ptx = NULL;
    goto cleanup;
  }
  /* NVRTC counts the terminating NUL in the size. */
  (*out_ptx)[size] = '\0';
  size_t length = strlen(*out_ptx);
  if (length != size) {
    /* Shrink so the buffer is length + 1 bytes, as the header promises. */
    void* shrunk = *out_ptx;
    status = stax_allocator_realloc(allocator, size + 1, length + 1, &shrunk);
    if (status != STAX_OK) {
      stax_allocator_free(allocator, *out_ptx, size + 1);
      *out_ptx = NULL;
      goto cleanup;
    }
    *out_ptx = shrunk;
  }
  *out_size = length;
cleanup:
  if (log) stax_allocator_free(allocator, log, log_size + 1);
  nvrtc->nvrtcDestroyProgram(&program);
  return status;
}

/* ---- process-wide tables ----------------------------------------------------------------- */

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static stax_cuda_driver_t driver_table;
static stax_status_t driver_status;

static void driver_load(void) {
  driver_status = stax_cuda_driver_open(NULL, &driver_table);
}

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static stax_cuda_nvrtc_t nvrtc_table;
static stax_status_t nvrtc_status;

static void nvrtc_load(void) {
  const char* path = getenv("STAX_NVRTC_PATH");
  nvrtc_status = stax_cuda_nvrtc_open(path && path[0] ? path : NULL, &nvrtc_table);
}

/* A copy of a cached error (callers own and free what they get). */
static stax_status_t copy_status(stax_status_t status) {
  if (status == STAX_OK) return STAX_OK;
  return stax_status_make(stax_status_code(status), "%s", stax_status_message(status));
}

stax_status_t stax_cuda_driver_get(const stax_cuda_driver_t** out_driver) {
  *out_driver = NULL;
  pthread_once(&driver_once, driver_load);
  if (driver_status != STAX_OK) return copy_status(driver_status);
  *out_driver = &driver_table;
  return STAX_OK;
}

stax_status_t stax_cuda_nvrtc_get(const stax_cuda_nvrtc_t** out_nvrtc) {
  *out_nvrtc = NULL;
  pthread_once(&nvrtc_once, nvrtc_load);
  if (nvrtc_status != STAX_OK) return copy_status(nvrtc_status);
  *out_nvrtc = &nvrtc_table;
  return STAX_OK;
}

void stax_cuda_describe(bool* out_ready, char* why, size_t why_size) {
  const stax_cuda_driver_t* driver = NULL;
  const stax_cuda_nvrtc_t* nvrtc = NULL;
  stax_status_t driver_error = stax_cuda_driver_get(&driver);
  stax_status_t nvrtc_error = stax_cuda_nvrtc_get(&nvrtc);
  char nvrtc_text[640];
  if (nvrtc) {
    snprintf(nvrtc_text, sizeof(nvrtc_text), "NVRTC %d.%d found (%s)", nvrtc->major, nvrtc->minor,
             nvrtc->path);
  } else {
    snprintf(nvrtc_text, sizeof(nvrtc_text), "%s", stax_status_message(nvrtc_error));
  }
  if (driver && nvrtc) {
    snprintf(why, why_size,
             "CUDA driver %d.%d, %d device(s), device 0 %s (compute capability %d.%d), %s; "
             "but the GPU execution path is not implemented yet (stax generates CUDA C and "
             "compiles it to PTX, nothing runs on the GPU: see docs/gpu.md)",
             driver->driver_version / 1000, driver->driver_version % 1000 / 10,
             driver->device_count, driver->device_name, driver->compute_major,
             driver->compute_minor, nvrtc_text);
  } else if (driver) {
    snprintf(why, why_size, "CUDA driver %d.%d with %d device(s) (device 0 %s), but %s",
             driver->driver_version / 1000, driver->driver_version % 1000 / 10,
             driver->device_count, driver->device_name, nvrtc_text);
  } else {
    snprintf(why, why_size, "%s; %s", stax_status_message(driver_error), nvrtc_text);
  }
  *out_ready = driver != NULL && nvrtc != NULL;
  stax_status_free(driver_error);
  stax_status_free(nvrtc_error);
}
