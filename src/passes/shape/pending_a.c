/* Shape functions not written yet (group A). Each family moves to its own file
 * under src/passes/shape/ as it is implemented; this file shrinks to nothing. */
#include "ir/graph_internal.h"

stax_status_t stax_shape_binary(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_compare(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_variadic(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_where(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_unary(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_predicate(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_cast(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_cast_like(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_dropout(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_reduce(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_arg_reduce(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_same_shape(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_nll_loss(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_softmax_ce_loss(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_layer_norm(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_batch_norm(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_matmul(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_gemm(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_einsum(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_conv(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_conv_transpose(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_pool(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_global_pool(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}
