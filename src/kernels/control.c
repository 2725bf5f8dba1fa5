/* Kernel-table entries for the control-flow ops. If and Loop run subgraphs, which the VM
 * compiles into its own control instructions (jumps, LOOP_BEGIN/LOOP_END); reaching one of
 * these entries means a program was built without lowering the op, so it is an internal
 * error rather than something a model can trigger. */
#include "kernels/kernel.h"

stax_status_t stax_kernel_If(stax_kernel_call_t* call) {
  return stax_kernel_error(call, STAX_INTERNAL,
                           "If is executed by the VM's control instructions, not as a kernel");
}

stax_status_t stax_kernel_Loop(stax_kernel_call_t* call) {
  return stax_kernel_error(call, STAX_INTERNAL,
                           "Loop is executed by the VM's control instructions, not as a kernel");
}
