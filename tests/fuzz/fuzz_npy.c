/* libFuzzer harness: a .npy file from bytes (the format `stax run -i` reads). Every input must
 * end in a tensor or an error status. */
#include <stddef.h>
#include <stdint.h>

#include "stax/npy.h"
#include "stax/stax.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stax_tensor_t* tensor = NULL;
  stax_status_t status = stax_npy_parse(stax_allocator_system(), data, size, "fuzz.npy", &tensor);
  stax_status_free(status);
  if (tensor) stax_tensor_release(tensor);
  return 0;
}
