/* The generic-kernel table: one entry per op in ops.def, indexed by stax_op_t. Generated from
 * the same X-macro as the op enum, so the two cannot drift apart. */
#include "kernels/kernel.h"

static const stax_kernel_fn kKernelTable[STAX_OP_COUNT] = {
#define STAX_OP(name, min_in, max_in, min_out, max_out, flags, family) \
  [STAX_OP_##name] = stax_kernel_##name,
#include "stax/ops.def"
#undef STAX_OP
};

stax_kernel_fn stax_kernel_for_op(stax_op_t op) {
  if ((int)op < 0 || (int)op >= STAX_OP_COUNT) return NULL;
  return kKernelTable[op];
}
