/* Getting protobuf messages into memory safely: whole-file reads, a protobuf-c allocator that
 * goes through a stax allocator, and a framing/nesting check that runs before protobuf-c's
 * recursive unpacker, so a hostile file cannot exhaust the stack. */
#include <sys/stat.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ---- protobuf-c allocator ---------------------------------------------------------------- */

/* protobuf-c frees without a size, stax allocators want one: keep it in a header. 16 bytes
 * keep the payload as aligned as malloc's. */
#define STAX_ONNX_ALLOC_HEADER 16

static void* stax_onnx_proto_alloc(void* self, size_t size) {
  stax_onnx_proto_allocator_t* proto_allocator = self;
  if (size > SIZE_MAX - STAX_ONNX_ALLOC_HEADER) {
    proto_allocator->failed = true;
    return NULL;
  }
  size_t total = size + STAX_ONNX_ALLOC_HEADER;
  void* memory = NULL;
  stax_status_t status = stax_allocator_malloc_aligned(proto_allocator->allocator, total,
                                                       STAX_ONNX_ALLOC_HEADER, &memory);
  if (status != STAX_OK) {
    stax_status_free(status);
    proto_allocator->failed = true;
    return NULL;
  }
  memcpy(memory, &total, sizeof(total));
  return (unsigned char*)memory + STAX_ONNX_ALLOC_HEADER;
}

static void stax_onnx_proto_free(void* self, void* pointer) {
  if (pointer == NULL) return;
  stax_onnx_proto_allocator_t* proto_allocator = self;
  unsigned char* memory = (unsigned char*)pointer - STAX_ONNX_ALLOC_HEADER;
  size_t total = 0;
  memcpy(&total, memory, sizeof(total));
  stax_allocator_free_aligned(proto_allocator->allocator, memory, total,
                              STAX_ONNX_ALLOC_HEADER);
}

void stax_onnx_proto_allocator_init(stax_onnx_proto_allocator_t* proto_allocator,
                                    stax_allocator_t allocator) {
  memset(proto_allocator, 0, sizeof(*proto_allocator));
  proto_allocator->allocator = allocator;
  proto_allocator->base.alloc = stax_onnx_proto_alloc;
  proto_allocator->base.free = stax_onnx_proto_free;
  proto_allocator->base.allocator_data = proto_allocator;
}

/* ---- files ------------------------------------------------------------------------------- */

stax_status_t stax_onnx_read_file(stax_allocator_t allocator, const char* path,
                                  void** out_data, size_t* out_size) {
  *out_data = NULL;
  *out_size = 0;
  if (path == NULL) return stax_status_make(STAX_INVALID_ARGUMENT, "file path is NULL");
  FILE* file = fopen(path, "rb");
  if (file == NULL) {
    return stax_status_make(STAX_IO_ERROR, "cannot open '%s': %s", path, strerror(errno));
  }
  struct stat info;
  if (fstat(fileno(file), &info) == 0 && S_ISDIR(info.st_mode)) {
    fclose(file);
    return stax_status_make(STAX_IO_ERROR, "cannot read '%s': it is a folder", path);
  }
  stax_status_t status = STAX_OK;
  void* data = NULL;
  size_t capacity = 0;
  size_t size = 0;
  /* Reading in growing steps handles pipes and files that change size while we read. */
  for (;;) {
    if (size == capacity) {
      size_t new_capacity = capacity ? capacity * 2 : 64 * 1024;
      if (new_capacity < capacity) {
        status = stax_status_make(STAX_OUT_OF_MEMORY, "'%s' is too large to read", path);
        break;
      }
      void* grown = data;
      status = stax_allocator_realloc(allocator, capacity, new_capacity, &grown);
      if (status != STAX_OK) break;
      data = grown;
      capacity = new_capacity;
    }
    size_t got = fread((unsigned char*)data + size, 1, capacity - size, file);
    size += got;
    if (got == 0) {
      if (ferror(file)) {
        status = stax_status_make(STAX_IO_ERROR, "error reading '%s': %s", path,
                                  strerror(errno));
      }
      break;
    }
  }
  fclose(file);
  if (status == STAX_OK && size != capacity) {
    void* shrunk = data;
    status = stax_allocator_realloc(allocator, capacity, size, &shrunk);
    if (status == STAX_OK) {
      data = shrunk;
      capacity = size;
    }
  }
  if (status != STAX_OK) {
    stax_allocator_free(allocator, data, capacity);
    return status;
  }
  *out_data = data;
  *out_size = size;
  return STAX_OK;
}

stax_status_t stax_onnx_directory_of(stax_arena_t* arena, const char* path,
                                     const char** out_directory) {
  *out_directory = NULL;
  const char* slash = strrchr(path, '/');
  if (slash == NULL) return stax_arena_strdup(arena, ".", out_directory);
  size_t length = slash == path ? 1 : (size_t)(slash - path);
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(arena, length + 1, 1, &memory));
  memcpy(memory, path, length);
  ((char*)memory)[length] = '\0';
  *out_directory = memory;
  return STAX_OK;
}

/* ---- framing and nesting check ----------------------------------------------------------- */

/* Reads a varint within [*pos, end); false when it runs past end or over 10 bytes. */
static bool stax_onnx_read_varint(const uint8_t* data, size_t end, size_t* pos,
                                  uint64_t* out_value) {
  uint64_t value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*pos >= end) return false;
    uint8_t byte = data[(*pos)++];
    value |= (uint64_t)(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *out_value = value;
      return true;
    }
  }
  return false;
}

typedef struct stax_onnx_frame_t {
  const ProtobufCMessageDescriptor* descriptor;
  size_t end;
} stax_onnx_frame_t;

/* Walks the wire format with an explicit stack: every length-delimited field must fit in its
 * enclosing message, and sub-messages may nest at most STAX_ONNX_MAX_NESTING deep. */
static stax_status_t stax_onnx_check_framing(const ProtobufCMessageDescriptor* descriptor,
                                             const uint8_t* data, size_t size,
                                             const char* name) {
  stax_onnx_frame_t stack[STAX_ONNX_MAX_NESTING + 1];
  int32_t depth = 0;
  stack[0].descriptor = descriptor;
  stack[0].end = size;
  size_t pos = 0;
  for (;;) {
    if (pos == stack[depth].end) {
      if (depth == 0) return STAX_OK;
      depth--;
      continue;
    }
    size_t field_start = pos;
    size_t end = stack[depth].end;
    uint64_t tag = 0;
    if (!stax_onnx_read_varint(data, end, &pos, &tag)) {
      return stax_status_make(STAX_PARSE_ERROR,
                              "'%s' is not a valid %s: truncated field tag at byte %zu", name,
                              descriptor->short_name, field_start);
    }
    uint32_t wire_type = (uint32_t)(tag & 7);
    uint64_t field_number = tag >> 3;
    uint64_t skip = 0;
    switch (wire_type) {
      case 0: {
        uint64_t ignored = 0;
        if (!stax_onnx_read_varint(data, end, &pos, &ignored)) {
          return stax_status_make(STAX_PARSE_ERROR,
                                  "'%s' is not a valid %s: truncated varint at byte %zu", name,
                                  descriptor->short_name, field_start);
        }
        continue;
      }
      case 1: skip = 8; break;
      case 5: skip = 4; break;
      case 2:
        if (!stax_onnx_read_varint(data, end, &pos, &skip)) {
          return stax_status_make(STAX_PARSE_ERROR,
                                  "'%s' is not a valid %s: truncated length at byte %zu", name,
                                  descriptor->short_name, field_start);
        }
        break;
      default:
        return stax_status_make(STAX_PARSE_ERROR,
                                "'%s' is not a valid %s: field %llu at byte %zu has wire type "
                                "%u",
                                name, descriptor->short_name, (unsigned long long)field_number,
                                field_start, wire_type);
    }
    if (skip > end - pos) {
      return stax_status_make(STAX_PARSE_ERROR,
                              "'%s' is not a valid %s (truncated?): field %llu at byte %zu "
                              "needs %llu bytes, %zu remain",
                              name, descriptor->short_name, (unsigned long long)field_number,
                              field_start, (unsigned long long)skip, end - pos);
    }
    const ProtobufCFieldDescriptor* field =
        wire_type == 2 && field_number <= UINT32_MAX
            ? protobuf_c_message_descriptor_get_field(stack[depth].descriptor,
                                                      (unsigned)field_number)
            : NULL;
    if (field != NULL && field->type == PROTOBUF_C_TYPE_MESSAGE) {
      if (depth + 1 > STAX_ONNX_MAX_NESTING) {
        return stax_status_make(STAX_PARSE_ERROR,
                                "'%s': messages nest deeper than %d levels at byte %zu", name,
                                STAX_ONNX_MAX_NESTING, field_start);
      }
      depth++;
      stack[depth].descriptor = field->descriptor;
      stack[depth].end = pos + (size_t)skip;
      continue;
    }
    pos += (size_t)skip;
  }
}

stax_status_t stax_onnx_unpack(stax_onnx_proto_allocator_t* proto_allocator,
                               const ProtobufCMessageDescriptor* descriptor, const void* data,
                               size_t size, const char* name, ProtobufCMessage** out_message) {
  *out_message = NULL;
  if (data == NULL && size > 0) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "'%s': data is NULL", name);
  }
  STAX_RETURN_IF_ERROR(stax_onnx_check_framing(descriptor, data, size, name));
  proto_allocator->failed = false;
  ProtobufCMessage* message =
      protobuf_c_message_unpack(descriptor, &proto_allocator->base, size, data);
  if (message == NULL) {
    if (proto_allocator->failed) {
      return stax_status_make(STAX_OUT_OF_MEMORY, "out of memory while parsing '%s'", name);
    }
    return stax_status_make(STAX_PARSE_ERROR,
                            "'%s' is not a valid %s (protobuf decoding failed: bad field "
                            "encoding or invalid UTF-8 in a string)",
                            name, descriptor->short_name);
  }
  *out_message = message;
  return STAX_OK;
}
