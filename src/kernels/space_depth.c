/* DepthToSpace and SpaceToDepth. ONNX defines both as reshape -> transpose -> reshape over
 * NCHW; here the input's 6-D split-and-permuted form is built directly as a strided view
 * (splitting one dim is always a view, whatever the input's strides), and one strided copy
 * writes it into the output seen in the same 6-D shape. Bytes only, so every dtype works. */
#include <string.h>

#include "kernels/movement.h"

static stax_status_t read_blocksize(const stax_kernel_call_t* call, const stax_tensor_t* data,
                                    int64_t* out_blocksize) {
  if (data->rank != 4)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "input 0 must have rank 4 (N, C, H, W), got %d", data->rank);
  if (!stax_node_attr_find(call->node, "blocksize"))
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "attribute 'blocksize' is missing");
  STAX_RETURN_IF_ERROR(stax_node_attr_int(call->node, "blocksize", 0, out_blocksize));
  if (*out_blocksize < 1 || *out_blocksize > (int64_t)1 << 20)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT, "blocksize is %lld; it must be >= 1",
                             (long long)*out_blocksize);
  return STAX_OK;
}

/* Output := the 6-D input view (dims6, strides6) copied into the output seen as dims6. */
static stax_status_t copy_permuted(stax_kernel_call_t* call, stax_tensor_t* data,
                                   const int64_t* out_dims, const int64_t* dims6,
                                   const int64_t* strides6) {
  bool preallocated = call->output_count > 0 && call->outputs[0] != NULL;
  stax_tensor_t* out = NULL;
  STAX_RETURN_IF_ERROR(stax_kernel_output(call, 0, data->dtype, 4, out_dims, &out));
  if (stax_tensor_element_count(out) == 0) return STAX_OK;
  stax_tensor_t *source = NULL, *target = NULL;
  stax_status_t status = stax_tensor_make_view(call->allocator, data->buffer, data->dtype, 6, dims6,
                                               strides6, data->offset, &source);
  if (status == STAX_OK) status = stax_tensor_reshape(call->allocator, out, 6, dims6, true, &target);
  if (status == STAX_OK) status = stax_tensor_copy_into(source, target);
  if (source) stax_tensor_release(source);
  if (target) stax_tensor_release(target);
  status = stax_movement_annotate(call, status);
  if (status != STAX_OK) stax_movement_release_created(call, &preallocated, 1);
  return status;
}

/* The mode attribute: DCR (the default) or CRD; *out_dcr says which. */
static stax_status_t read_mode(stax_kernel_call_t* call, bool* out_dcr) {
  const char* mode = NULL;
  STAX_RETURN_IF_ERROR(stax_node_attr_string(call->node, "mode", "DCR", &mode));
  *out_dcr = strcmp(mode, "DCR") == 0;
  if (!*out_dcr && strcmp(mode, "CRD") != 0)
    return stax_kernel_error(call, STAX_INVALID_ARGUMENT,
                             "attribute 'mode' must be DCR or CRD, got \"%s\"", mode);
  return STAX_OK;
}

stax_status_t stax_kernel_DepthToSpace(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t b = 0;
  STAX_RETURN_IF_ERROR(read_blocksize(call, data, &b));
  bool dcr = true;
  STAX_RETURN_IF_ERROR(read_mode(call, &dcr));
  const int64_t* d = data->dims;
  const int64_t* s = data->strides;
  if (d[1] % (b * b) != 0)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 has %lld channels, not a multiple of blocksize^2 = %lld",
                             (long long)d[1], (long long)(b * b));
  int64_t channels = d[1] / (b * b);
  int64_t out_dims[4] = {d[0], channels, 0, 0};
  if (__builtin_mul_overflow(d[2], b, &out_dims[2]) || __builtin_mul_overflow(d[3], b, &out_dims[3]))
    return stax_kernel_error(call, STAX_OUT_OF_RANGE, "the output's spatial dims overflow");
  /* Output element (n, c, h, bh, w, bw) of [N, C', H, b, W, b] reads input channel
   * DCR: (bh * b + bw) * C' + c        CRD: (c * b + bh) * b + bw. */
  int64_t dims6[6] = {d[0], channels, d[2], b, d[3], b};
  int64_t strides6[6];
  strides6[0] = s[0];
  strides6[2] = s[2];
  strides6[4] = s[3];
  if (dcr) {
    strides6[1] = s[1];
    strides6[3] = b * channels * s[1];
    strides6[5] = channels * s[1];
  } else {
    strides6[1] = b * b * s[1];
    strides6[3] = b * s[1];
    strides6[5] = s[1];
  }
  return copy_permuted(call, data, out_dims, dims6, strides6);
}

stax_status_t stax_kernel_SpaceToDepth(stax_kernel_call_t* call) {
  stax_tensor_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_movement_require_input(call, 0, &data));
  int64_t b = 0;
  STAX_RETURN_IF_ERROR(read_blocksize(call, data, &b));
  bool dcr = true;
  STAX_RETURN_IF_ERROR(read_mode(call, &dcr));
  const int64_t* d = data->dims;
  const int64_t* s = data->strides;
  if (d[2] % b != 0 || d[3] % b != 0)
    return stax_kernel_error(call, STAX_SHAPE_MISMATCH,
                             "input 0 spatial dims %lld x %lld are not multiples of blocksize %lld",
                             (long long)d[2], (long long)d[3], (long long)b);
  int64_t out_dims[4] = {d[0], 0, d[2] / b, d[3] / b};
  if (__builtin_mul_overflow(d[1], b * b, &out_dims[1]))
    return stax_kernel_error(call, STAX_OUT_OF_RANGE, "the output's channel dim overflows");
  /* Output element (n, bh, bw, c, h, w) of [N, b, b, C, H/b, W/b] (DCR), or (n, c, bh, bw,
   * h, w) of [N, C, b, b, H/b, W/b] (CRD), reads input (n, c, h * b + bh, w * b + bw). */
  if (dcr) {
    int64_t dims6[6] = {d[0], b, b, d[1], d[2] / b, d[3] / b};
    int64_t strides6[6] = {s[0], s[2], s[3], s[1], b * s[2], b * s[3]};
    return copy_permuted(call, data, out_dims, dims6, strides6);
  }
  int64_t dims6[6] = {d[0], d[1], b, b, d[2] / b, d[3] / b};
  int64_t strides6[6] = {s[0], s[1], s[2], s[3], b * s[2], b * s[3]};
  return copy_permuted(call, data, out_dims, dims6, strides6);
}
