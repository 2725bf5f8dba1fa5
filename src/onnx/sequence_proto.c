/* SequenceProto files (the backend tests' input_N.pb / output_N.pb for sequence values). The
 * Debian onnx.proto that the parser is generated from has no SequenceProto (it lives in
 * onnx-data.proto), so this reads its wire format directly: field 1 name, 2 elem_type (1 =
 * tensors), 3 tensor_values (TensorProto, parsed by stax_onnx_parse_tensor). Sparse tensors,
 * nested sequences, maps and optionals are UNIMPLEMENTED; anything malformed is
 * INVALID_ARGUMENT naming the file and the byte offset. */
#include <string.h>

#include "onnx/onnx_internal.h"
#include "runtime/tensor_internal.h"

#define STAX_SEQUENCE_PROTO_TENSOR 1 /* SequenceProto.DataType.TENSOR */

typedef struct stax_wire_t {
  const uint8_t* data;
  size_t size, at;
  const char* name;
} stax_wire_t;

static stax_status_t stax_wire_error(const stax_wire_t* wire, const char* what) {
  return stax_status_make(STAX_INVALID_ARGUMENT, "'%s' is not a SequenceProto: %s at byte %zu",
                          wire->name, what, wire->at);
}

static stax_status_t stax_wire_varint(stax_wire_t* wire, uint64_t* out_value) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (wire->at >= wire->size) return stax_wire_error(wire, "a varint runs past the end");
    uint8_t byte = wire->data[wire->at++];
    value |= (uint64_t)(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      *out_value = value;
      return STAX_OK;
    }
  }
  return stax_wire_error(wire, "a varint is longer than 10 bytes");
}

static stax_status_t stax_wire_skip(stax_wire_t* wire, uint32_t wire_type, const uint8_t** out_bytes,
                                    size_t* out_length) {
  uint64_t value = 0;
  *out_bytes = NULL;
  *out_length = 0;
  switch (wire_type) {
    case 0: return stax_wire_varint(wire, &value);
    case 1:
    case 5: {
      size_t length = wire_type == 1 ? 8 : 4;
      if (wire->size - wire->at < length) return stax_wire_error(wire, "a fixed field runs past the end");
      wire->at += length;
      return STAX_OK;
    }
    case 2:
      STAX_RETURN_IF_ERROR(stax_wire_varint(wire, &value));
      if (value > wire->size - wire->at) return stax_wire_error(wire, "a field runs past the end");
      *out_bytes = wire->data + wire->at;
      *out_length = (size_t)value;
      wire->at += (size_t)value;
      return STAX_OK;
    default: return stax_wire_error(wire, "an unknown wire type");
  }
}

stax_status_t stax_onnx_parse_sequence(stax_allocator_t allocator, const void* data, size_t size,
                                       const char* name, stax_dtype_t empty_dtype,
                                       stax_tensor_t** out_sequence) {
  if (out_sequence == NULL)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_onnx_parse_sequence: out_sequence is NULL");
  *out_sequence = NULL;
  if (data == NULL && size > 0)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_onnx_parse_sequence: data is NULL");
  if (name == NULL) name = "(memory)";
  stax_wire_t wire = {data, size, 0, name};
  stax_tensor_t** items = NULL;
  int64_t count = 0, capacity = 0;
  stax_status_t status = STAX_OK;
  while (status == STAX_OK && wire.at < wire.size) {
    uint64_t tag = 0;
    status = stax_wire_varint(&wire, &tag);
    if (status != STAX_OK) break;
    uint32_t field = (uint32_t)(tag >> 3), wire_type = (uint32_t)(tag & 7);
    size_t at = wire.at;
    uint64_t elem_type = 0;
    if (field == 2 && wire_type == 0) {
      status = stax_wire_varint(&wire, &elem_type);
      if (status == STAX_OK && elem_type != 0 && elem_type != STAX_SEQUENCE_PROTO_TENSOR)
        status = stax_status_make(STAX_UNIMPLEMENTED,
                                  "'%s' holds a sequence of elem_type %llu; stax reads sequences "
                                  "of tensors only",
                                  name, (unsigned long long)elem_type);
      continue;
    }
    const uint8_t* bytes = NULL;
    size_t length = 0;
    status = stax_wire_skip(&wire, wire_type, &bytes, &length);
    if (status != STAX_OK) break;
    if (field >= 4 && field <= 7) {
      status = stax_status_make(STAX_UNIMPLEMENTED,
                                "'%s' holds sparse tensors, sequences, maps or optionals; stax "
                                "reads sequences of tensors only",
                                name);
    } else if (field == 3) {
      if (wire_type != 2) {
        wire.at = at;
        status = stax_wire_error(&wire, "tensor_values is not length-delimited");
        break;
      }
      if (count == STAX_SEQUENCE_MAX_LENGTH) {
        status = stax_status_make(STAX_OUT_OF_RANGE, "'%s' holds more than %lld tensors", name,
                                  (long long)STAX_SEQUENCE_MAX_LENGTH);
        break;
      }
      if (count == capacity) {
        int64_t grown = capacity ? capacity * 2 : 8;
        stax_tensor_t** bigger = NULL;
        status = stax_allocator_malloc(allocator, (size_t)grown * sizeof(*bigger), (void**)&bigger);
        if (status != STAX_OK) break;
        if (count) memcpy(bigger, items, (size_t)count * sizeof(*bigger));
        if (items) stax_allocator_free(allocator, items, (size_t)capacity * sizeof(*items));
        items = bigger;
        capacity = grown;
      }
      status = stax_onnx_parse_tensor(allocator, bytes, length, name, &items[count], NULL);
      if (status == STAX_OK) count++;
    }
  }
  if (status == STAX_OK) {
    stax_dtype_t dtype = count > 0 ? stax_tensor_dtype(items[0]) : empty_dtype;
    status = stax_sequence_create(allocator, dtype, count, items, out_sequence);
    if (status != STAX_OK) status = stax_status_annotate(status, "reading '%s'", name);
  }
  for (int64_t k = 0; k < count; k++) stax_tensor_release(items[k]);
  if (items) stax_allocator_free(allocator, items, (size_t)capacity * sizeof(*items));
  return status;
}

stax_status_t stax_onnx_load_sequence_file(stax_allocator_t allocator, const char* path,
                                           stax_dtype_t empty_dtype,
                                           stax_tensor_t** out_sequence) {
  if (out_sequence == NULL)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "stax_onnx_load_sequence_file: out_sequence is NULL");
  *out_sequence = NULL;
  void* data = NULL;
  size_t size = 0;
  STAX_RETURN_IF_ERROR(stax_onnx_read_file(allocator, path, &data, &size));
  stax_status_t status =
      stax_onnx_parse_sequence(allocator, data, size, path, empty_dtype, out_sequence);
  stax_allocator_free(allocator, data, size);
  return status;
}
