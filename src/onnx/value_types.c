/* ValueInfoProto types -> stax dtype and symbolic dims. dim_value is a constant dim;
 * dim_param is a named symbol (the same name anywhere in the model is the same symbol) unless
 * the import options fix its value; a dim with neither becomes a fresh symbol. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static int64_t stax_onnx_symbol_min(const stax_onnx_importer_t* importer) {
  return importer->options->dims_may_be_zero || importer->reading_declaration ? 0 : 1;
}

stax_status_t stax_onnx_fresh_dim(stax_onnx_importer_t* importer, stax_shape_ctx_t* shape,
                                  const char* origin, const stax_dim_t** out_dim) {
  *out_dim = NULL;
  return stax_symbol_fresh(shape, "onnx_unk", stax_onnx_symbol_min(importer), STAX_DIM_MAX,
                           origin, out_dim);
}

/* A dim_param: a fixed binding from the options, or the named symbol. */
static stax_status_t stax_onnx_named_dim(stax_onnx_importer_t* importer, stax_shape_ctx_t* shape,
                                         const char* name, const char* what, int32_t dim,
                                         const stax_dim_t** out_dim) {
  *out_dim = NULL;
  const stax_onnx_import_options_t* options = importer->options;
  for (int32_t i = 0; i < options->symbol_binding_count; i++) {
    const stax_onnx_symbol_binding_t* binding = &options->symbol_bindings[i];
    if (binding->name == NULL || strcmp(binding->name, name) != 0) continue;
    if (binding->value < 0) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "import option binds dim_param '%s' to %lld; values must be >= 0",
                              name, (long long)binding->value);
    }
    *out_dim = stax_dim_const(shape, binding->value);
    if (*out_dim == NULL) {
      return stax_status_annotate(stax_shape_ctx_take_error(shape), "%s dim %d", what, dim);
    }
    return STAX_OK;
  }
  STAX_RETURN_IF_ERROR(
      stax_symbol_get(shape, name, stax_onnx_symbol_min(importer), STAX_DIM_MAX, out_dim),
      "%s dim %d (dim_param '%s')", what, dim, name);
  return STAX_OK;
}

static const char* stax_onnx_type_case_name(Onnx__TypeProto__ValueCase value_case) {
  switch (value_case) {
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: return "a sequence";
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: return "a map";
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: return "an optional";
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: return "a sparse tensor";
    default: return "of an unknown type kind";
  }
}

stax_status_t stax_onnx_sequence_type(stax_shape_ctx_t* shape, const Onnx__ValueInfoProto* info,
                                      const char* what, bool* out_is_sequence,
                                      stax_dtype_t* out_dtype, int32_t* out_elem_rank,
                                      const stax_dim_t** elem_dims) {
  *out_is_sequence = false;
  *out_dtype = STAX_DTYPE_INVALID;
  *out_elem_rank = -1;
  const Onnx__TypeProto* type = info ? info->type : NULL;
  if (type == NULL || type->value_case != ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) return STAX_OK;
  *out_is_sequence = true;
  const Onnx__TypeProto* elem = type->sequence_type ? type->sequence_type->elem_type : NULL;
  if (elem == NULL || elem->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return STAX_OK;
  if (elem->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    return stax_status_make(STAX_UNIMPLEMENTED,
                            "%s is a sequence whose elements are %s; stax supports sequences of "
                            "tensors only",
                            what, stax_onnx_type_case_name(elem->value_case));
  const Onnx__TypeProto__Tensor* tensor = elem->tensor_type;
  if (tensor == NULL) return STAX_OK;
  if (tensor->has_elem_type && tensor->elem_type != 0) {
    stax_dtype_t dtype = stax_dtype_from_onnx(tensor->elem_type);
    if (dtype == STAX_DTYPE_INVALID)
      return stax_status_make(STAX_UNIMPLEMENTED,
                              "%s is a sequence of %s (%d) tensors, which stax does not support",
                              what, stax_onnx_data_type_name(tensor->elem_type),
                              (int)tensor->elem_type);
    *out_dtype = dtype;
  }
  const Onnx__TensorShapeProto* shape_proto = tensor->shape;
  if (shape_proto == NULL) return STAX_OK;
  if (shape_proto->n_dim > STAX_MAX_RANK)
    return stax_status_make(STAX_UNIMPLEMENTED, "%s holds elements of rank %zu; stax supports up "
                            "to %d", what, shape_proto->n_dim, STAX_MAX_RANK);
  int32_t rank = (int32_t)shape_proto->n_dim;
  for (int32_t d = 0; d < rank; d++) {
    const Onnx__TensorShapeProto__Dimension* dim = shape_proto->dim[d];
    elem_dims[d] = NULL;
    if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
        dim->dim_value >= 0) {
      elem_dims[d] = stax_dim_const(shape, dim->dim_value);
      if (elem_dims[d] == NULL)
        return stax_status_annotate(stax_shape_ctx_take_error(shape), "%s element dim %d", what, d);
    }
  }
  *out_elem_rank = rank;
  return STAX_OK;
}

stax_status_t stax_onnx_value_type(stax_onnx_importer_t* importer, stax_shape_ctx_t* shape,
                                   const Onnx__ValueInfoProto* info, const char* what,
                                   stax_dtype_t* out_dtype, int32_t* out_rank,
                                   const stax_dim_t** dims, bool* unknown_dims) {
  *out_dtype = STAX_DTYPE_INVALID;
  *out_rank = -1;
  const Onnx__TypeProto* type = info ? info->type : NULL;
  if (type == NULL || type->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return STAX_OK;
  if (type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
    return stax_status_make(STAX_UNIMPLEMENTED, "%s is %s; stax supports tensors only", what,
                            stax_onnx_type_case_name(type->value_case));
  }
  const Onnx__TypeProto__Tensor* tensor = type->tensor_type;
  if (tensor == NULL) return STAX_OK;
  if (tensor->has_elem_type && tensor->elem_type != 0) {
    stax_dtype_t dtype = stax_dtype_from_onnx(tensor->elem_type);
    if (dtype == STAX_DTYPE_INVALID) {
      return stax_status_make(STAX_UNIMPLEMENTED,
                              "%s has data type %s (%d), which stax does not support", what,
                              stax_onnx_data_type_name(tensor->elem_type),
                              (int)tensor->elem_type);
    }
    *out_dtype = dtype;
  }
  const Onnx__TensorShapeProto* shape_proto = tensor->shape;
  if (shape_proto == NULL) return STAX_OK;
  if (shape_proto->n_dim > STAX_MAX_RANK) {
    return stax_status_make(STAX_UNIMPLEMENTED, "%s has rank %zu; stax supports up to %d", what,
                            shape_proto->n_dim, STAX_MAX_RANK);
  }
  int32_t rank = (int32_t)shape_proto->n_dim;
  for (int32_t d = 0; d < rank; d++) {
    const Onnx__TensorShapeProto__Dimension* dim = shape_proto->dim[d];
    bool unknown = false;
    if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
        dim->dim_value >= 0) {
      dims[d] = stax_dim_const(shape, dim->dim_value);
      if (dims[d] == NULL) {
        return stax_status_annotate(stax_shape_ctx_take_error(shape), "%s dim %d", what, d);
      }
    } else if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
               dim->dim_param && dim->dim_param[0]) {
      STAX_RETURN_IF_ERROR(stax_onnx_named_dim(importer, shape, dim->dim_param, what, d, &dims[d]));
    } else {
      /* No value, an empty name, or a negative dim_value (some exporters write -1 for
         "dynamic"): nothing is known about this dim. */
      unknown = true;
      dims[d] = NULL;
      if (unknown_dims == NULL) {
        char origin[256];
        snprintf(origin, sizeof(origin), "%s dim %d", what, d);
        STAX_RETURN_IF_ERROR(stax_onnx_fresh_dim(importer, shape, origin, &dims[d]));
      }
    }
    if (unknown_dims) unknown_dims[d] = unknown;
  }
  *out_rank = rank;
  return STAX_OK;
}
