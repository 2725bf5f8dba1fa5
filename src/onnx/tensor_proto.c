/* TensorProto -> stax tensor: dtype and dims checks, data from raw_data, from the typed
 * repeated fields (float_data, int32_data for every type narrower than 32 bits, int64_data,
 * double_data, uint64_data), or from an external file next to the model (location / offset /
 * length), refusing paths that leave the model's directory. Every size is checked against the
 * dims before anything is allocated, so a hostile header cannot request huge buffers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx_internal.h"

/* raw_data and external files are little-endian; stax only targets little-endian hosts. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX importer assumes a little-endian host"
#endif

const char* stax_onnx_data_type_name(int32_t onnx_code) {
  static const char* const names[] = {
      "UNDEFINED",  "FLOAT",       "UINT8",          "INT8",       "UINT16",
      "INT16",      "INT32",       "INT64",          "STRING",     "BOOL",
      "FLOAT16",    "DOUBLE",      "UINT32",         "UINT64",     "COMPLEX64",
      "COMPLEX128", "BFLOAT16",    "FLOAT8E4M3FN",   "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
      "FLOAT8E5M2FNUZ", "UINT4",   "INT4",           "FLOAT4E2M1", "FLOAT8E8M0",
      "UINT2",      "INT2",        "FLOAT6E2M3",     "FLOAT6E3M2"};
  if (onnx_code < 0 || onnx_code >= (int32_t)(sizeof(names) / sizeof(names[0]))) {
    return "UNKNOWN";
  }
  return names[onnx_code];
}

/* "[2, 3, 4]" into buf. */
static void stax_onnx_dims_text(int32_t rank, const int64_t* dims, char* buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < rank && used < size; d++) {
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "",
                             (long long)dims[d]);
  }
  if (used < size) snprintf(buf + used, size - used, "]");
}

/* ---- external data ----------------------------------------------------------------------- */

/* A non-negative decimal integer that fits in int64; false otherwise. */
static bool stax_onnx_parse_offset(const char* text, int64_t* out_value) {
  if (text == NULL || text[0] == '\0') return false;
  int64_t value = 0;
  for (const char* p = text; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    int digit = *p - '0';
    if (value > (INT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out_value = value;
  return true;
}

/* A relative path with no ".." component: it cannot name anything above the model's
 * directory except through symlinks, which the realpath check catches. */
static bool stax_onnx_location_is_relative_and_inside(const char* location) {
  if (location[0] == '\0' || location[0] == '/') return false;
  const char* component = location;
  for (;;) {
    const char* slash = strchr(component, '/');
    size_t length = slash ? (size_t)(slash - component) : strlen(component);
    if (length == 2 && component[0] == '.' && component[1] == '.') return false;
    if (slash == NULL) return true;
    component = slash + 1;
  }
}

typedef struct stax_onnx_external_t {
  const char* location;
  int64_t offset;
  int64_t length; /* -1: to the end of the file */
} stax_onnx_external_t;

static stax_status_t stax_onnx_external_entries(const Onnx__TensorProto* proto,
                                                const char* what,
                                                stax_onnx_external_t* out_external) {
  out_external->location = NULL;
  out_external->offset = 0;
  out_external->length = -1;
  for (size_t i = 0; i < proto->n_external_data; i++) {
    const Onnx__StringStringEntryProto* entry = proto->external_data[i];
    const char* key = entry && entry->key ? entry->key : "";
    const char* value = entry && entry->value ? entry->value : "";
    if (strcmp(key, "location") == 0) {
      out_external->location = value;
    } else if (strcmp(key, "offset") == 0) {
      if (!stax_onnx_parse_offset(value, &out_external->offset)) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s: external data offset '%s' is not a non-negative integer",
                                what, value);
      }
    } else if (strcmp(key, "length") == 0) {
      if (!stax_onnx_parse_offset(value, &out_external->length)) {
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "%s: external data length '%s' is not a non-negative integer",
                                what, value);
      }
    }
    /* "checksum" and unknown keys carry nothing stax needs. */
  }
  if (out_external->location == NULL || out_external->location[0] == '\0') {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s: external data has no 'location' entry", what);
  }
  return STAX_OK;
}

/* Resolves directory/location and checks the result stays inside the directory after
 * symlinks are followed. *out_path is malloc'd by realpath and freed by the caller. */
static stax_status_t stax_onnx_external_path(const char* directory, const char* location,
                                             const char* what, char** out_path) {
  *out_path = NULL;
  if (!stax_onnx_location_is_relative_and_inside(location)) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s: external data location '%s' must be a relative path inside "
                            "the model's directory",
                            what, location);
  }
  char joined[PATH_MAX];
  int length = snprintf(joined, sizeof(joined), "%s/%s", directory, location);
  if (length < 0 || (size_t)length >= sizeof(joined)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s: external data path '%s/%s' is too long",
                            what, directory, location);
  }
  char* real_directory = realpath(directory, NULL);
  if (real_directory == NULL) {
    return stax_status_make(STAX_IO_ERROR, "%s: cannot resolve the model directory '%s': %s",
                            what, directory, strerror(errno));
  }
  char* real_file = realpath(joined, NULL);
  if (real_file == NULL) {
    stax_status_t status = stax_status_make(STAX_IO_ERROR,
                                            "%s: cannot open external data file '%s': %s", what,
                                            joined, strerror(errno));
    free(real_directory);
    return status;
  }
  size_t directory_length = strlen(real_directory);
  bool inside = strncmp(real_file, real_directory, directory_length) == 0 &&
                (real_file[directory_length] == '/' ||
                 (directory_length == 1 && real_directory[0] == '/'));
  free(real_directory);
  if (!inside) {
    stax_status_t status = stax_status_make(STAX_INVALID_ARGUMENT,
                                            "%s: external data location '%s' resolves to '%s', "
                                            "outside the model's directory",
                                            what, location, real_file);
    free(real_file);
    return status;
  }
  *out_path = real_file;
  return STAX_OK;
}

/* Opens and checks the external data (a regular file, long enough, of the size the dims
 * need) and only then creates the tensor and reads into it, so a hostile size is refused
 * for what it is (a missing or short file) instead of being allocated first. */
static stax_status_t stax_onnx_read_external(const Onnx__TensorProto* proto, const char* what,
                                             const char* directory, size_t expected_bytes,
                                             stax_allocator_t allocator, stax_dtype_t dtype,
                                             int32_t rank, const int64_t* dims,
                                             stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  if (directory == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "%s uses external data, but the model was loaded from memory "
                            "without an external data directory",
                            what);
  }
  stax_onnx_external_t external;
  STAX_RETURN_IF_ERROR(stax_onnx_external_entries(proto, what, &external));
  char* path = NULL;
  STAX_RETURN_IF_ERROR(stax_onnx_external_path(directory, external.location, what, &path));
  stax_status_t status = STAX_OK;
  /* O_NONBLOCK: opening a FIFO for reading would wait for a writer; this way the fstat below
   * sees it and refuses it. Reads from a regular file ignore the flag. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    status = stax_status_make(STAX_IO_ERROR, "%s: cannot open external data file '%s': %s",
                              what, path, strerror(errno));
    goto cleanup;
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    status = stax_status_make(STAX_IO_ERROR, "%s: external data '%s' is not a regular file",
                              what, path);
    goto cleanup;
  }
  int64_t file_size = (int64_t)info.st_size;
  if (external.offset > file_size) {
    status = stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s: external data offset %lld is past the end of '%s' (%lld "
                              "bytes)",
                              what, (long long)external.offset, path, (long long)file_size);
    goto cleanup;
  }
  int64_t available = file_size - external.offset;
  int64_t length = external.length >= 0 ? external.length : available;
  if (length > available) {
    status = stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s: external data needs %lld bytes at offset %lld of '%s', which "
                              "has %lld",
                              what, (long long)length, (long long)external.offset, path,
                              (long long)file_size);
    goto cleanup;
  }
  if ((uint64_t)length != (uint64_t)expected_bytes) {
    status = stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s: external data in '%s' has %lld bytes, its dims need %zu", what,
                              path, (long long)length, expected_bytes);
    goto cleanup;
  }
  STAX_GOTO_IF_ERROR(status, stax_tensor_create(allocator, dtype, rank, dims, out_tensor), cleanup,
                     "%s", what);
  unsigned char* destination = stax_tensor_data(*out_tensor);
  size_t done = 0;
  while (done < expected_bytes) {
    ssize_t got = pread(fd, destination + done, expected_bytes - done,
                        (off_t)(external.offset + (int64_t)done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      status = stax_status_make(STAX_IO_ERROR, "%s: reading external data from '%s' failed: %s",
                                what, path, got < 0 ? strerror(errno) : "unexpected end of file");
      goto cleanup;
    }
    done += (size_t)got;
  }

cleanup:
  if (status != STAX_OK && *out_tensor) {
    stax_tensor_release(*out_tensor);
    *out_tensor = NULL;
  }
  if (fd >= 0) close(fd);
  free(path);
  return status;
}

/* ---- typed fields ------------------------------------------------------------------------ */

/* The typed field a dtype's values live in, and how many values it has. */
static const char* stax_onnx_typed_field(const Onnx__TensorProto* proto, stax_dtype_t dtype,
                                         size_t* out_count) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: *out_count = proto->n_float_data; return "float_data";
    case STAX_DTYPE_FLOAT64: *out_count = proto->n_double_data; return "double_data";
    case STAX_DTYPE_INT64: *out_count = proto->n_int64_data; return "int64_data";
    case STAX_DTYPE_UINT32:
    case STAX_DTYPE_UINT64: *out_count = proto->n_uint64_data; return "uint64_data";
    default: *out_count = proto->n_int32_data; return "int32_data";
  }
}

static void stax_onnx_copy_typed(const Onnx__TensorProto* proto, stax_dtype_t dtype,
                                 size_t count, void* destination) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: memcpy(destination, proto->float_data, count * sizeof(float)); return;
    case STAX_DTYPE_FLOAT64: memcpy(destination, proto->double_data, count * sizeof(double)); return;
    case STAX_DTYPE_INT64: memcpy(destination, proto->int64_data, count * sizeof(int64_t)); return;
    case STAX_DTYPE_UINT64: memcpy(destination, proto->uint64_data, count * sizeof(uint64_t)); return;
    case STAX_DTYPE_INT32: memcpy(destination, proto->int32_data, count * sizeof(int32_t)); return;
    default: break;
  }
  for (size_t i = 0; i < count; i++) {
    /* Narrow types are stored one per int32 (half types as their bit patterns); the cast
     * keeps the low bits, which is the stored value for well-formed files. */
    switch (dtype) {
      case STAX_DTYPE_UINT32: ((uint32_t*)destination)[i] = (uint32_t)proto->uint64_data[i]; break;
      case STAX_DTYPE_INT16: ((int16_t*)destination)[i] = (int16_t)proto->int32_data[i]; break;
      case STAX_DTYPE_INT8: ((int8_t*)destination)[i] = (int8_t)proto->int32_data[i]; break;
      case STAX_DTYPE_UINT16:
      case STAX_DTYPE_FLOAT16:
      case STAX_DTYPE_BFLOAT16:
        ((uint16_t*)destination)[i] = (uint16_t)proto->int32_data[i];
        break;
      case STAX_DTYPE_UINT8: ((uint8_t*)destination)[i] = (uint8_t)proto->int32_data[i]; break;
      case STAX_DTYPE_BOOL: ((uint8_t*)destination)[i] = proto->int32_data[i] != 0; break;
      default: break;
    }
  }
}

/* Names the non-empty typed fields other than `expected`, for a helpful message. */
static void stax_onnx_other_fields(const Onnx__TensorProto* proto, const char* expected,
                                   char* buf, size_t size) {
  struct {
    const char* name;
    size_t count;
  } fields[] = {{"float_data", proto->n_float_data},   {"int32_data", proto->n_int32_data},
                {"int64_data", proto->n_int64_data},   {"double_data", proto->n_double_data},
                {"uint64_data", proto->n_uint64_data}, {"string_data", proto->n_string_data}};
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]) && used < size; i++) {
    if (fields[i].count == 0 || strcmp(fields[i].name, expected) == 0) continue;
    used += (size_t)snprintf(buf + used, size - used, "; it has %zu values in %s",
                             fields[i].count, fields[i].name);
  }
}

/* ---- conversion -------------------------------------------------------------------------- */

stax_status_t stax_onnx_tensor_from_proto(stax_allocator_t allocator,
                                          const Onnx__TensorProto* proto, const char* what,
                                          const char* external_directory,
                                          stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  int32_t onnx_type = proto->has_data_type ? proto->data_type : 0;
  stax_dtype_t dtype = stax_dtype_from_onnx(onnx_type);
  if (dtype == STAX_DTYPE_INVALID) {
    return stax_status_make(STAX_UNIMPLEMENTED,
                            "%s has data type %s (%d), which stax does not support", what,
                            stax_onnx_data_type_name(onnx_type), (int)onnx_type);
  }
  if (proto->n_dims > STAX_MAX_RANK) {
    return stax_status_make(STAX_UNIMPLEMENTED, "%s has rank %zu; stax supports up to %d", what,
                            proto->n_dims, STAX_MAX_RANK);
  }
  if (proto->segment != NULL) {
    return stax_status_make(STAX_UNIMPLEMENTED, "%s is a segment of a larger tensor, which "
                            "stax does not support", what);
  }
  int32_t rank = (int32_t)proto->n_dims;
  int64_t dims[STAX_MAX_RANK];
  size_t element_size = stax_dtype_size(dtype);
  uint64_t count = 1;
  bool overflow = false;
  for (int32_t d = 0; d < rank; d++) {
    dims[d] = proto->dims[d];
    if (dims[d] < 0) {
      return stax_status_make(STAX_INVALID_ARGUMENT, "%s has a negative dim %lld (dim %d)", what,
                              (long long)dims[d], d);
    }
    if (dims[d] != 0 && count > (uint64_t)INT64_MAX / (uint64_t)dims[d]) overflow = true;
    count *= (uint64_t)dims[d];
  }
  char dims_text[160];
  stax_onnx_dims_text(rank, dims, dims_text, sizeof(dims_text));
  /* Zero-sized dims make the product 0 even after an "overflowing" step. */
  if (count != 0 && (overflow || count > SIZE_MAX / element_size)) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "%s: dims %s hold too many elements", what,
                            dims_text);
  }
  size_t bytes = (size_t)count * element_size;
  bool external = (proto->has_data_location &&
                   proto->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
                  proto->n_external_data > 0;

  /* Check the data's size before allocating room for it. */
  size_t typed_count = 0;
  const char* typed_field = NULL;
  if (!external && proto->has_raw_data) {
    if (proto->raw_data.len != bytes) {
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s: raw_data has %zu bytes but dims %s of %s need %zu bytes",
                              what, proto->raw_data.len, dims_text, stax_dtype_name(dtype),
                              bytes);
    }
  } else if (!external) {
    typed_field = stax_onnx_typed_field(proto, dtype, &typed_count);
    if (typed_count != count) {
      char others[200];
      stax_onnx_other_fields(proto, typed_field, others, sizeof(others));
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "%s: %s has %zu values but dims %s need %llu%s", what,
                              typed_field, typed_count, dims_text, (unsigned long long)count,
                              others);
    }
  }

  stax_tensor_t* tensor = NULL;
  if (external) {
    STAX_RETURN_IF_ERROR(stax_onnx_read_external(proto, what, external_directory, bytes,
                                                 allocator, dtype, rank, dims, &tensor));
  } else {
    STAX_RETURN_IF_ERROR(stax_tensor_create(allocator, dtype, rank, dims, &tensor), "%s", what);
    void* data = stax_tensor_data(tensor);
    if (proto->has_raw_data) {
      if (bytes > 0) memcpy(data, proto->raw_data.data, bytes);
    } else if (count > 0) {
      stax_onnx_copy_typed(proto, dtype, (size_t)count, data);
    }
  }
  *out_tensor = tensor;
  return STAX_OK;
}
