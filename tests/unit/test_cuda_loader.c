/* The CUDA loader's error paths (src/cuda/cuda_loader.c), which run on every machine: a
 * missing driver, a library that is not the driver, NVRTC at a path that does not exist or
 * that is not NVRTC, and what build info and stax_target_check("cuda") say about them. On a
 * machine with CUDA the same checks assert what was found instead. */
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_loader.h"
#include "test_harness.h"

/* The messages a failing driver load may give, each naming what is missing. */
static bool driver_message_names_cause(const char* message) {
  return strstr(message, "CUDA driver not found (dlopen libcuda.so.1: ") == message ||
         strstr(message, "libcuda.so.1 lacks ") == message ||
         strstr(message, "CUDA driver libcuda.so.1: cuInit failed: ") == message ||
         strstr(message, "no CUDA device (cuDeviceGetCount ") == message ||
         strstr(message, "CUDA device 0 cannot be queried: ") == message;
}

static void test_driver_missing(void) {
  stax_cuda_driver_t driver;
  stax_status_t status = stax_cuda_driver_open(NULL, &driver);
  if (status == STAX_OK) {
    printf("  (a CUDA driver is here: %d device(s), device 0 %s, compute %d.%d)\n",
           driver.device_count, driver.device_name, driver.compute_major, driver.compute_minor);
    CHECK(driver.device_count > 0 && driver.compute_major > 0 && driver.cuLaunchKernel);
    stax_cuda_driver_close(&driver);
  } else {
    printf("  (no CUDA driver: %s)\n", stax_status_message(status));
    CHECK_EQ_INT(stax_status_code(status), STAX_UNIMPLEMENTED);
    CHECK(strstr(stax_status_message(status), "libcuda.so.1") != NULL);
    CHECK(driver_message_names_cause(stax_status_message(status)));
    CHECK(driver.library == NULL && driver.cuInit == NULL); /* nothing left loaded */
    stax_status_free(status);
  }
  CHECK_ERROR(stax_cuda_driver_open("libstax-no-such-driver.so.1", &driver), STAX_UNIMPLEMENTED,
              "CUDA driver not found (dlopen libstax-no-such-driver.so.1: ");
  /* A library that loads but is not the driver: the first missing entry point is named. */
  CHECK_ERROR(stax_cuda_driver_open("libm.so.6", &driver), STAX_UNIMPLEMENTED,
              "libm.so.6 lacks cuInit");
  CHECK(driver.library == NULL);
}

static void test_process_driver_is_cached(void) {
  const stax_cuda_driver_t* first = NULL;
  const stax_cuda_driver_t* second = NULL;
  stax_status_t a = stax_cuda_driver_get(&first);
  stax_status_t b = stax_cuda_driver_get(&second);
  CHECK(first == second);
  CHECK_EQ_INT(stax_status_code(a), stax_status_code(b));
  CHECK_EQ_STR(stax_status_message(a), stax_status_message(b));
  CHECK(a != b || a == STAX_OK); /* each caller owns its copy of the error */
  stax_status_free(a);
  stax_status_free(b);
}

static void test_nvrtc_paths(void) {
  stax_cuda_nvrtc_t nvrtc;
  CHECK_ERROR(stax_cuda_nvrtc_open("/nonexistent/stax/libnvrtc.so", &nvrtc), STAX_UNIMPLEMENTED,
              "NVRTC not found (tried ");
  CHECK_ERROR(stax_cuda_nvrtc_open("/nonexistent/stax/libnvrtc.so", &nvrtc), STAX_UNIMPLEMENTED,
              "/nonexistent/stax/libnvrtc.so");
  CHECK_ERROR(stax_cuda_nvrtc_open("libm.so.6", &nvrtc), STAX_UNIMPLEMENTED,
              "libm.so.6 lacks nvrtcVersion");
  CHECK(nvrtc.library == NULL);
  stax_status_t status = stax_cuda_nvrtc_open(NULL, &nvrtc);
  if (status == STAX_OK) {
    printf("  (NVRTC %d.%d from %s)\n", nvrtc.major, nvrtc.minor, nvrtc.path);
    CHECK(nvrtc.major >= 11 && nvrtc.nvrtcGetPTX != NULL);
    stax_cuda_nvrtc_close(&nvrtc);
  } else {
    /* Every name of the search list is in the message. */
    printf("  (no NVRTC: %s)\n", stax_status_message(status));
    CHECK(strstr(stax_status_message(status), "libnvrtc.so.12") != NULL);
    CHECK(strstr(stax_status_message(status), "/usr/local/cuda/lib64/libnvrtc.so") != NULL);
    stax_status_free(status);
  }
}

static void test_build_info_and_target(void) {
  stax_build_info_t info;
  stax_build_info(&info);
  CHECK(!info.gpu_available);
  CHECK(info.gpu_unavailable[0] != '\0');
  if (!info.cuda_driver) {
    CHECK(strstr(info.cuda_driver_unavailable, "libcuda.so.1") != NULL);
    CHECK(strstr(info.gpu_unavailable, info.cuda_driver_unavailable) != NULL);
  } else {
    CHECK(info.cuda_device_count > 0 && info.cuda_device_name[0] != '\0');
    CHECK(info.cuda_driver_unavailable[0] == '\0');
  }
  if (info.cuda_nvrtc) {
    CHECK(info.cuda_nvrtc_major >= 11 && info.cuda_nvrtc_path[0] != '\0');
    CHECK(strstr(info.gpu_unavailable, "NVRTC") != NULL);
  } else {
    CHECK(strstr(info.cuda_nvrtc_unavailable, "NVRTC not found") != NULL);
  }
  if (info.cuda_driver && info.cuda_nvrtc)
    CHECK(strstr(info.gpu_unavailable, "not implemented yet") != NULL);

  CHECK_OK(stax_target_check("cpu"));
  CHECK_ERROR(stax_target_check("tpu"), STAX_INVALID_ARGUMENT, "unknown target 'tpu'");
  CHECK_ERROR(stax_target_check(NULL), STAX_INVALID_ARGUMENT, NULL);
  stax_status_t status = stax_target_check("cuda");
  CHECK_EQ_INT(stax_status_code(status), STAX_UNIMPLEMENTED);
  const char* message = stax_status_message(status);
  printf("  (target cuda: %s)\n", message);
  CHECK(strstr(message, "target 'cuda'") != NULL);
  CHECK(strstr(message, info.gpu_unavailable) != NULL);
  if (!info.cuda_driver) CHECK(strstr(message, "libcuda.so.1") != NULL);
  stax_status_free(status);
}

STAX_TEST_MAIN(STAX_TEST(test_driver_missing), STAX_TEST(test_process_driver_is_cached),
               STAX_TEST(test_nvrtc_paths), STAX_TEST(test_build_info_and_target))
