/* The host-function registry CALL_FUNC resolves names through (functions.c): an internal API
 * for embedders and, later, the JIT. Programs store function names, so they serialize;
 * contexts resolve the names once, at creation. */
#ifndef STAX_VM_FUNCTIONS_H_
#define STAX_VM_FUNCTIONS_H_

#include "stax/runtime.h"

/* A host function CALL_FUNC can call. It must set every output (owned references); inputs are
 * borrowed. */
typedef stax_status_t (*stax_vm_host_fn)(void* user_data, int32_t input_count,
                                         stax_tensor_t* const* inputs, int32_t output_count,
                                         stax_tensor_t** outputs);
/* Registers (or replaces) a function by name in the process-wide registry (a small fixed
 * table; names up to 63 bytes). Thread-safe. */
STAX_MUST_USE stax_status_t stax_vm_register_function(const char* name, stax_vm_host_fn fn,
                                                      void* user_data);
void stax_vm_unregister_function(const char* name);
bool stax_vm_lookup_function(const char* name, stax_vm_host_fn* out_fn, void** out_user_data);

#endif /* STAX_VM_FUNCTIONS_H_ */
