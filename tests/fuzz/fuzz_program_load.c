/* libFuzzer harness: a saved stax program from bytes. Load it with the checksum skipped, so
 * the bytecode verifier alone stands between a corrupted file and the interpreter, then
 * disassemble what was accepted. Every input must end in success or an error status. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stax/stax.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stax_load_options_t options = {.skip_checksum = true};
  stax_program_t* program = NULL;
  stax_status_t status =
      stax_program_deserialize(stax_allocator_system(), data, size, &options, &program);
  if (status == STAX_OK) {
    FILE* sink = fopen("/dev/null", "w");
    if (sink) {
      status = stax_program_disassemble(program,
                                        STAX_DISASSEMBLE_EXTENDED | STAX_DISASSEMBLE_COMPACT, sink);
      fclose(sink);
    }
  }
  stax_status_free(status);
  if (program) stax_program_release(program);
  return 0;
}
