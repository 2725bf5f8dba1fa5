/* libFuzzer harness: an ONNX model from bytes. Import it (parse, check every node, infer
 * shapes, fold constants) and, when that succeeds, compile it to bytecode (graph passes, the
 * compiler, the bytecode verifier). Every input must end in success or an error status: a
 * crash, a sanitizer report, a leak or a hang is a bug. */
#include <stddef.h>
#include <stdint.h>

#include "stax/onnx.h"
#include "stax/stax.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stax_graph_t* graph = NULL;
  stax_status_t status =
      stax_onnx_import_memory(stax_allocator_system(), data, size, "fuzz.onnx", NULL, &graph);
  if (status == STAX_OK) {
    stax_program_t* program = NULL;
    status = stax_program_compile(stax_allocator_system(), graph, NULL, &program);
    if (program) stax_program_release(program);
  }
  stax_status_free(status);
  stax_graph_destroy(graph);
  return 0;
}
