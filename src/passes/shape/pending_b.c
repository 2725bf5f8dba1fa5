/* Shape functions not written yet (group B). Each family moves to its own file
 * under src/passes/shape/ as it is implemented; this file shrinks to nothing. */
#include "ir/graph_internal.h"

stax_status_t stax_shape_reshape(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_flatten(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_transpose(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_squeeze(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_unsqueeze(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_concat(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_split(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_slice(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_gather(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_gather_elements(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_gather_nd(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_scatter(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_expand(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_tile(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_pad(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_shape_of(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_size_of(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_constant_of_shape(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_range(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_constant(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_resize(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_one_hot(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_eye_like(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_depth_to_space(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_space_to_depth(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_compress(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_nonzero(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_topk(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_unique(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_if(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}

stax_status_t stax_shape_loop(stax_shape_infer_t* ic) {
  return stax_infer_error(ic, STAX_UNIMPLEMENTED, "shape inference not implemented yet");
}
