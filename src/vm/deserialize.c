/* Loading programs: stax_program_deserialize and stax_program_load. A program file is input
 * from outside, possibly truncated, corrupted or hostile, so every read here is
 * bounds-checked through one reader that fails cleanly, every count is capped by the bytes
 * that remain before anything is allocated, and the header, section tags and sizes, record
 * layouts and constants (dtype, rank, dims, data size, bool bytes) are validated as they are
 * read. What the tables say (every index, dtype, rank, attribute, operand, jump, loop, ...) is
 * then checked by the verifier after the compact form is re-emitted, exactly as for a freshly
 * compiled program; only then is the program linked and handed out. */
#include <sys/stat.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/tensor_internal.h"
#include "vm/program.h"

/* ---- reader ---------------------------------------------------------------------------------- */

typedef struct stax_vm_reader_t {
  const uint8_t* data;
  size_t size;         /* bytes this reader may read */
  size_t at;
  size_t file_offset;  /* of data[0] in the file, for messages */
  const char* section; /* what is being read, for messages */
  bool file_truncated; /* the file is shorter than its header says */
} stax_vm_reader_t;

/* A read past the reader's end: the file ends early (only the payload reader can see that),
 * or a section's contents run past its declared length. */
static stax_status_t stax_vm_overrun(const stax_vm_reader_t* r, size_t needed) {
  if (r->file_truncated)
    return stax_status_make(STAX_PARSE_ERROR,
                            "program file truncated in section '%s' at byte %zu (%zu more "
                            "bytes needed)",
                            r->section, r->file_offset + r->at, needed - (r->size - r->at));
  return stax_status_make(STAX_PARSE_ERROR,
                          "program file is malformed: section '%s' ends at byte %zu, inside a "
                          "value %zu bytes long",
                          r->section, r->file_offset + r->size, needed);
}

static stax_status_t stax_vm_read_bytes(stax_vm_reader_t* r, size_t count,
                                        const uint8_t** out_bytes) {
  *out_bytes = NULL;
  if (count > r->size - r->at) return stax_vm_overrun(r, count);
  *out_bytes = r->data + r->at;
  r->at += count;
  return STAX_OK;
}

static uint64_t stax_vm_decode_le(const uint8_t* at, size_t size) {
  uint64_t value = 0;
  for (size_t b = 0; b < size; b++) value |= (uint64_t)at[b] << (8 * b);
  return value;
}

static stax_status_t stax_vm_read_le(stax_vm_reader_t* r, size_t size, uint64_t* out_value) {
  const uint8_t* at = NULL;
  *out_value = 0;
  STAX_RETURN_IF_ERROR(stax_vm_read_bytes(r, size, &at));
  *out_value = stax_vm_decode_le(at, size);
  return STAX_OK;
}

static stax_status_t stax_vm_read_u32(stax_vm_reader_t* r, uint32_t* out_value) {
  uint64_t value = 0;
  STAX_RETURN_IF_ERROR(stax_vm_read_le(r, 4, &value));
  *out_value = (uint32_t)value;
  return STAX_OK;
}

static stax_status_t stax_vm_malformed(const stax_vm_reader_t* r, const char* fmt, ...)
    STAX_PRINTF(2, 3);

static stax_status_t stax_vm_malformed(const stax_vm_reader_t* r, const char* fmt, ...) {
  char message[400];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  return stax_status_make(STAX_PARSE_ERROR,
                          "program file is malformed: section '%s' at byte %zu: %s", r->section,
                          r->file_offset + r->at, message);
}

/* Stores `size` bytes (1, 2, 4 or 8) of `value` in host order. */
static void stax_vm_store_host(void* target, uint64_t value, size_t size) {
  switch (size) {
    case 1: { uint8_t v = (uint8_t)value; memcpy(target, &v, 1); break; }
    case 2: { uint16_t v = (uint16_t)value; memcpy(target, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)value; memcpy(target, &v, 4); break; }
    default: memcpy(target, &value, 8); break;
  }
}

/* Copies `count` little-endian elements of `size` bytes into host order. */
static void stax_vm_decode_elements(const uint8_t* source, void* target, size_t count,
                                    size_t size) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (count > 0) memcpy(target, source, count * size);
#else
  for (size_t k = 0; k < count; k++)
    stax_vm_store_host((char*)target + k * size, stax_vm_decode_le(source + k * size, size), size);
#endif
}

/* ---- sections -------------------------------------------------------------------------------- */

/* Reads a section header and returns a reader over exactly its body. */
static stax_status_t stax_vm_open_section(stax_vm_reader_t* payload, int32_t tag, const char* name,
                                          stax_vm_reader_t* out_body) {
  payload->section = name;
  uint32_t found = 0;
  uint64_t length = 0;
  STAX_RETURN_IF_ERROR(stax_vm_read_u32(payload, &found));
  if (found != (uint32_t)tag) {
    payload->at -= 4;
    return stax_vm_malformed(payload, "expected section tag %d, found %u", tag, found);
  }
  STAX_RETURN_IF_ERROR(stax_vm_read_le(payload, 8, &length));
  const uint8_t* body = NULL;
  if (length > payload->size - payload->at) {
    if (!payload->file_truncated)
      return stax_vm_malformed(payload, "the section claims %llu bytes, %zu remain",
                               (unsigned long long)length, payload->size - payload->at);
    return stax_vm_overrun(payload, (size_t)length);
  }
  STAX_RETURN_IF_ERROR(stax_vm_read_bytes(payload, (size_t)length, &body));
  *out_body = (stax_vm_reader_t){.data = body,
                                 .size = (size_t)length,
                                 .file_offset = payload->file_offset + (payload->at - length),
                                 .section = name};
  return STAX_OK;
}

static stax_status_t stax_vm_read_records(stax_program_t* program,
                                          const stax_vm_file_table_t* table,
                                          stax_vm_reader_t* body) {
  uint32_t count = 0, record_size = 0;
  STAX_RETURN_IF_ERROR(stax_vm_read_u32(body, &count));
  STAX_RETURN_IF_ERROR(stax_vm_read_u32(body, &record_size));
  int32_t expected = stax_vm_file_record_size(table);
  if (record_size != (uint32_t)expected)
    return stax_vm_malformed(body, "records are %u bytes, this version stores %d", record_size,
                             expected);
  /* The count is trusted only as far as the bytes present can hold it. */
  size_t remaining = body->size - body->at;
  if ((uint64_t)count * record_size != remaining)
    return stax_vm_malformed(body, "%u records of %u bytes do not fill the %zu bytes left", count,
                             record_size, remaining);
  if (count > INT32_MAX) return stax_vm_malformed(body, "%u records is too many", count);
  if (count == 0) return STAX_OK;
  void* data = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(program->allocator, count, table->element_size, &data),
                       "loading section '%s' (%u records)", table->name, count);
  *(void**)((char*)program + table->data_offset) = data;
  *(int32_t*)((char*)program + table->capacity_offset) = (int32_t)count;
  *(int32_t*)((char*)program + table->count_offset) = (int32_t)count;
  const uint8_t* source = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_read_bytes(body, remaining, &source));
  if (table->field_count == 1 && table->fields[0].offset == 0 &&
      (size_t)table->fields[0].size == table->element_size) {
    stax_vm_decode_elements(source, data, count, table->element_size); /* a table of scalars */
    return STAX_OK;
  }
  for (uint32_t k = 0; k < count; k++) {
    char* record = (char*)data + (size_t)k * table->element_size;
    for (int32_t f = 0; f < table->field_count; f++) {
      const stax_vm_file_field_t* field = &table->fields[f];
      stax_vm_store_host(record + field->offset, stax_vm_decode_le(source, field->size),
                         field->size);
      source += field->size;
    }
  }
  return STAX_OK;
}

static stax_status_t stax_vm_read_constant(stax_program_t* program, stax_vm_reader_t* body,
                                           int32_t index, stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  uint32_t dtype = 0, rank = 0;
  STAX_RETURN_IF_ERROR(stax_vm_read_u32(body, &dtype));
  STAX_RETURN_IF_ERROR(stax_vm_read_u32(body, &rank));
  if (dtype >= STAX_DTYPE_COUNT)
    return stax_vm_malformed(body, "constant %d has invalid dtype %u", index, dtype);
  if (rank > STAX_MAX_RANK)
    return stax_vm_malformed(body, "constant %d has rank %u (at most %d)", index, rank,
                             STAX_MAX_RANK);
  int64_t dims[STAX_MAX_RANK];
  for (uint32_t d = 0; d < rank; d++) {
    uint64_t value = 0;
    STAX_RETURN_IF_ERROR(stax_vm_read_le(body, 8, &value));
    if (value > INT64_MAX)
      return stax_vm_malformed(body, "constant %d dim %u is negative", index, d);
    dims[d] = (int64_t)value;
  }
  int64_t count = 0;
  char what[48];
  snprintf(what, sizeof(what), "constant %d", index);
  stax_status_t status = stax_shape_validate(what, (int32_t)rank, dims, &count);
  if (status) {
    stax_status_t error = stax_vm_malformed(body, "%s", stax_status_message(status));
    stax_status_free(status);
    return error;
  }
  size_t element_size = stax_dtype_size((stax_dtype_t)dtype);
  uint64_t bytes = 0;
  STAX_RETURN_IF_ERROR(stax_vm_read_le(body, 8, &bytes));
  if ((uint64_t)count > UINT64_MAX / element_size || bytes != (uint64_t)count * element_size)
    return stax_vm_malformed(body, "constant %d holds %llu data bytes; %s %s needs %llu", index,
                             (unsigned long long)bytes, stax_dtype_name((stax_dtype_t)dtype),
                             stax_dims_text((int32_t)rank, dims).text,
                             (unsigned long long)((uint64_t)count * element_size));
  /* Check the bytes are there before allocating room for them. */
  if (bytes > body->size - body->at) return stax_vm_overrun(body, (size_t)bytes);
  const uint8_t* data = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_read_bytes(body, (size_t)bytes, &data));
  if (dtype == STAX_DTYPE_BOOL) {
    /* Kernels may read bool elements as C bool: only 0 and 1 are values. */
    for (uint64_t k = 0; k < bytes; k++)
      if (data[k] > 1)
        return stax_vm_malformed(body, "bool constant %d element %llu is %u (not 0 or 1)", index,
                                 (unsigned long long)k, data[k]);
  }
  stax_tensor_t* tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(program->allocator, (stax_dtype_t)dtype, (int32_t)rank,
                                          dims, &tensor),
                       "loading constant %d", index);
  stax_vm_decode_elements(data, stax_tensor_data(tensor), (size_t)count, element_size);
  *out_tensor = tensor;
  return STAX_OK;
}

static stax_status_t stax_vm_read_constants(stax_program_t* program, stax_vm_reader_t* body) {
  uint32_t count = 0;
  STAX_RETURN_IF_ERROR(stax_vm_read_u32(body, &count));
  /* Each constant takes at least 16 bytes (dtype, rank, data size). */
  if (count > (body->size - body->at) / 16)
    return stax_vm_malformed(body, "%u constants cannot fit in %zu bytes", count,
                             body->size - body->at);
  if (count == 0) return STAX_OK;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(program->allocator, count, sizeof(stax_tensor_t*),
                                             (void**)&program->constants),
                       "loading %u constants", count);
  /* The table owns whatever is loaded so far: release frees the non-NULL entries. */
  program->capacity.constants = (int32_t)count;
  program->constants_count = (int32_t)count;
  for (uint32_t c = 0; c < count; c++)
    STAX_RETURN_IF_ERROR(stax_vm_read_constant(program, body, (int32_t)c, &program->constants[c]));
  return STAX_OK;
}

static stax_status_t stax_vm_read_sections(stax_program_t* program, stax_vm_reader_t* payload) {
  for (int32_t t = 0; t < stax_vm_file_table_count; t++) {
    const stax_vm_file_table_t* table = &stax_vm_file_tables[t];
    if (table->storage == STAX_VM_FILE_NOT_STORED) continue;
    stax_vm_reader_t body;
    STAX_RETURN_IF_ERROR(stax_vm_open_section(payload, t + 1, table->name, &body));
    if (table->storage == STAX_VM_FILE_RECORDS)
      STAX_RETURN_IF_ERROR(stax_vm_read_records(program, table, &body));
    else
      STAX_RETURN_IF_ERROR(stax_vm_read_constants(program, &body));
    if (body.at != body.size)
      return stax_vm_malformed(&body, "%zu bytes left unread at the end of the section",
                               body.size - body.at);
  }
  payload->section = "end";
  if (payload->at != payload->size)
    return stax_vm_malformed(payload, "%zu bytes follow the last section",
                             payload->size - payload->at);
  return STAX_OK;
}

/* ---- header ---------------------------------------------------------------------------------- */

static stax_status_t stax_vm_check_header(const uint8_t* data, size_t size,
                                          const stax_load_options_t* options,
                                          size_t* out_payload_size, bool* out_truncated) {
  *out_payload_size = 0;
  *out_truncated = false;
  if (size < 8 || memcmp(data, STAX_VM_FILE_MAGIC, 8) != 0)
    return size < 8 && memcmp(data, STAX_VM_FILE_MAGIC, size) == 0
               ? stax_status_make(STAX_PARSE_ERROR,
                                  "program file truncated in the header at byte %zu (the header "
                                  "is %d bytes)",
                                  size, STAX_VM_FILE_HEADER_SIZE)
               : stax_status_make(STAX_PARSE_ERROR,
                                  "not a stax program file (it does not start with \"%s\")",
                                  STAX_VM_FILE_MAGIC);
  if (size < STAX_VM_FILE_HEADER_SIZE)
    return stax_status_make(STAX_PARSE_ERROR,
                            "program file truncated in the header at byte %zu (the header is "
                            "%d bytes)",
                            size, STAX_VM_FILE_HEADER_SIZE);
  uint32_t version = (uint32_t)stax_vm_decode_le(data + 8, 4);
  if (version < STAX_VM_FILE_OLDEST_VERSION || version > STAX_VM_FILE_VERSION)
    return stax_status_make(STAX_PARSE_ERROR,
                            "program file format version %u is not supported (this build reads "
                            "versions %u to %u); compile the model again",
                            version, STAX_VM_FILE_OLDEST_VERSION, STAX_VM_FILE_VERSION);
  uint32_t order = (uint32_t)stax_vm_decode_le(data + 12, 4);
  if (order != STAX_VM_FILE_BYTE_ORDER)
    return stax_status_make(STAX_PARSE_ERROR,
                            "program file has byte-order marker %08x, not %08x: it was not "
                            "written little-endian by stax",
                            order, STAX_VM_FILE_BYTE_ORDER);
  uint64_t fingerprint = stax_vm_decode_le(data + 16, 8);
  if (fingerprint != stax_vm_isa_fingerprint_for(version))
    return stax_status_make(STAX_PARSE_ERROR,
                            "program file was saved by a stax build with a different instruction "
                            "set (fingerprint %016llx, this build %016llx); compile the model "
                            "again",
                            (unsigned long long)fingerprint,
                            (unsigned long long)stax_vm_isa_fingerprint_for(version));
  uint64_t declared = stax_vm_decode_le(data + 24, 8);
  size_t present = size - STAX_VM_FILE_HEADER_SIZE;
  if (present > declared)
    return stax_status_make(STAX_PARSE_ERROR,
                            "program file is malformed: %llu bytes follow the %llu-byte payload "
                            "its header declares",
                            (unsigned long long)(present - declared),
                            (unsigned long long)declared);
  *out_truncated = present < declared;
  *out_payload_size = present;
  bool check = !(options && options->skip_checksum);
  if (check && !*out_truncated &&
      stax_vm_decode_le(data + 32, 8) !=
          stax_vm_file_checksum(data, data + STAX_VM_FILE_HEADER_SIZE, present))
    return stax_status_make(STAX_PARSE_ERROR, "corrupted program file (checksum mismatch)");
  return STAX_OK;
}

/* ---- public API ------------------------------------------------------------------------------ */

stax_status_t stax_program_deserialize(stax_allocator_t allocator, const void* data, size_t size,
                                       const stax_load_options_t* options,
                                       stax_program_t** out_program) {
  if (out_program) *out_program = NULL;
  if (!out_program || (!data && size > 0))
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "stax_program_deserialize: data or out_program is NULL");
  const uint8_t* bytes = data ? data : (const uint8_t*)"";
  size_t payload_size = 0;
  bool truncated = false;
  STAX_RETURN_IF_ERROR(stax_vm_check_header(bytes, size, options, &payload_size, &truncated));
  stax_program_t* program = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_program_create(allocator, &program));
  /* A loaded program is finalized: no builder state. */
  stax_hash_map_destroy(program->string_index);
  program->string_index = NULL;
  stax_vm_reader_t payload = {.data = bytes + STAX_VM_FILE_HEADER_SIZE,
                              .size = payload_size,
                              .file_offset = STAX_VM_FILE_HEADER_SIZE,
                              .section = "header",
                              .file_truncated = truncated};
  stax_status_t status = stax_vm_read_sections(program, &payload);
  if (status == STAX_OK && truncated)
    status = stax_status_make(STAX_PARSE_ERROR,
                              "program file truncated: its header declares %llu payload bytes, "
                              "the file has %zu",
                              (unsigned long long)stax_vm_decode_le(bytes + 24, 8), payload_size);
  if (status == STAX_OK) status = stax_vm_emit(program);
  if (status == STAX_OK) status = stax_vm_verify(program);
  if (status == STAX_OK) {
    stax_vm_program_measure(program);
    status = stax_vm_program_link(program);
  }
  if (status) {
    stax_program_release(program);
    return stax_status_annotate(status, "loading a program file");
  }
  *out_program = program;
  return STAX_OK;
}

stax_status_t stax_program_load(stax_allocator_t allocator, const char* path,
                                stax_program_t** out_program) {
  if (out_program) *out_program = NULL;
  if (!path || !out_program)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "stax_program_load: path or out_program is NULL");
  FILE* file = fopen(path, "rb");
  if (!file)
    return stax_status_make(STAX_IO_ERROR, "cannot open '%s': %s", path, strerror(errno));
  struct stat info;
  if (fstat(fileno(file), &info) == 0 && S_ISDIR(info.st_mode)) {
    fclose(file);
    return stax_status_make(STAX_IO_ERROR, "cannot read '%s': it is a folder", path);
  }
  stax_status_t status = STAX_OK;
  uint8_t* data = NULL;
  size_t size = 0, capacity = 0;
  for (;;) {
    if (size == capacity) {
      size_t grown = capacity ? capacity * 2 : 64 * 1024;
      if (grown < capacity) {
        status = stax_status_make(STAX_OUT_OF_RANGE, "'%s' is too large", path);
        break;
      }
      void* memory = data;
      status = data ? stax_allocator_realloc(allocator, capacity, grown, &memory)
                    : stax_allocator_malloc(allocator, grown, &memory);
      if (status) break;
      data = memory;
      capacity = grown;
    }
    size_t got = fread(data + size, 1, capacity - size, file);
    size += got;
    if (got == 0) {
      if (ferror(file))
        status = stax_status_make(STAX_IO_ERROR, "reading '%s' failed: %s", path, strerror(errno));
      break;
    }
  }
  fclose(file);
  if (status == STAX_OK)
    status = stax_program_deserialize(allocator, data, size, NULL, out_program);
  if (data) stax_allocator_free(allocator, data, capacity);
  STAX_RETURN_IF_ERROR(status, "loading '%s'", path);
  return STAX_OK;
}
