/* Reading and writing numpy .npy files. The header is a Python dict literal; we parse just the
 * three keys numpy writes (descr, fortran_order, shape) and reject anything else, since a file
 * is user input. */
#include <sys/stat.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stax/npy.h"

static const char stax_npy_magic[6] = {(char)0x93, 'N', 'U', 'M', 'P', 'Y'};

typedef struct npy_dtype_map_t {
  const char* descr; /* without the byte-order character */
  stax_dtype_t dtype;
} npy_dtype_map_t;

static const npy_dtype_map_t npy_dtypes[] = {
    {"f4", STAX_DTYPE_FLOAT32}, {"f8", STAX_DTYPE_FLOAT64}, {"f2", STAX_DTYPE_FLOAT16},
    {"i1", STAX_DTYPE_INT8},    {"i2", STAX_DTYPE_INT16},   {"i4", STAX_DTYPE_INT32},
    {"i8", STAX_DTYPE_INT64},   {"u1", STAX_DTYPE_UINT8},   {"u2", STAX_DTYPE_UINT16},
    {"u4", STAX_DTYPE_UINT32},  {"u8", STAX_DTYPE_UINT64},  {"b1", STAX_DTYPE_BOOL},
};

static stax_status_t npy_error(const char* name, const char* what) {
  return stax_status_make(STAX_PARSE_ERROR, "%s: not a valid .npy file: %s", name, what);
}

static const char* skip_space(const char* p, const char* end) {
  while (p < end && isspace((unsigned char)*p)) p++;
  return p;
}

/* Parses the header dict into dtype, order and shape. */
static stax_status_t npy_parse_header(const char* name, const char* text, size_t length,
                                      stax_dtype_t* out_dtype, bool* out_fortran,
                                      int32_t* out_rank, int64_t* out_dims) {
  const char* p = text;
  const char* end = text + length;
  bool have_descr = false, have_order = false, have_shape = false;
  p = skip_space(p, end);
  if (p >= end || *p != '{') return npy_error(name, "header is not a dict");
  p++;
  for (;;) {
    p = skip_space(p, end);
    if (p < end && *p == '}') break;
    if (p >= end || (*p != '\'' && *p != '"')) return npy_error(name, "expected a key in header");
    char quote = *p++;
    const char* key = p;
    while (p < end && *p != quote) p++;
    if (p >= end) return npy_error(name, "unterminated key in header");
    size_t key_length = (size_t)(p - key);
    p = skip_space(p + 1, end);
    if (p >= end || *p != ':') return npy_error(name, "expected ':' in header");
    p = skip_space(p + 1, end);
    if (key_length == 5 && memcmp(key, "descr", 5) == 0) {
      if (p >= end || (*p != '\'' && *p != '"')) return npy_error(name, "descr is not a string");
      char q = *p++;
      const char* value = p;
      while (p < end && *p != q) p++;
      if (p >= end) return npy_error(name, "unterminated descr");
      size_t n = (size_t)(p - value);
      p++;
      if (n < 2 || n > 3) return stax_status_make(STAX_UNIMPLEMENTED, "%s: unsupported .npy dtype '%.*s'", name, (int)n, value);
      char order = value[0];
      const char* code = value + 1;
      size_t code_length = n - 1;
      if (order != '<' && order != '|' && order != '=')
        return stax_status_make(STAX_UNIMPLEMENTED,
                                "%s: big-endian .npy data ('%.*s') is not supported", name,
                                (int)n, value);
      *out_dtype = STAX_DTYPE_INVALID;
      for (size_t i = 0; i < sizeof(npy_dtypes) / sizeof(npy_dtypes[0]); i++)
        if (strlen(npy_dtypes[i].descr) == code_length &&
            memcmp(npy_dtypes[i].descr, code, code_length) == 0)
          *out_dtype = npy_dtypes[i].dtype;
      if (*out_dtype == STAX_DTYPE_INVALID)
        return stax_status_make(STAX_UNIMPLEMENTED, "%s: unsupported .npy dtype '%.*s'", name,
                                (int)n, value);
      have_descr = true;
    } else if (key_length == 13 && memcmp(key, "fortran_order", 13) == 0) {
      if ((size_t)(end - p) >= 4 && memcmp(p, "True", 4) == 0) {
        *out_fortran = true;
        p += 4;
      } else if ((size_t)(end - p) >= 5 && memcmp(p, "False", 5) == 0) {
        *out_fortran = false;
        p += 5;
      } else {
        return npy_error(name, "fortran_order is not True or False");
      }
      have_order = true;
    } else if (key_length == 5 && memcmp(key, "shape", 5) == 0) {
      if (p >= end || *p != '(') return npy_error(name, "shape is not a tuple");
      p++;
      int32_t rank = 0;
      for (;;) {
        p = skip_space(p, end);
        if (p < end && *p == ')') {
          p++;
          break;
        }
        if (p >= end || !isdigit((unsigned char)*p)) return npy_error(name, "bad shape entry");
        int64_t value = 0;
        while (p < end && isdigit((unsigned char)*p)) {
          if (value > (INT64_MAX - 9) / 10) return npy_error(name, "shape entry too large");
          value = value * 10 + (*p - '0');
          p++;
        }
        if (p < end && *p == 'L') p++; /* Python 2 longs */
        if (rank >= STAX_MAX_RANK)
          return stax_status_make(STAX_UNIMPLEMENTED, "%s: rank above %d is not supported",
                                  name, STAX_MAX_RANK);
        out_dims[rank++] = value;
        p = skip_space(p, end);
        if (p < end && *p == ',') p++;
      }
      *out_rank = rank;
      have_shape = true;
    } else {
      return npy_error(name, "unknown key in header");
    }
    p = skip_space(p, end);
    if (p < end && *p == ',') p++;
  }
  if (!have_descr || !have_order || !have_shape)
    return npy_error(name, "header lacks descr, fortran_order or shape");
  return STAX_OK;
}

stax_status_t stax_npy_parse(stax_allocator_t allocator, const void* data, size_t size,
                             const char* name, stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  const unsigned char* bytes = data;
  if (size < 10 || memcmp(bytes, stax_npy_magic, 6) != 0) return npy_error(name, "bad magic");
  int major = bytes[6];
  size_t header_length, header_start;
  if (major == 1) {
    header_length = (size_t)bytes[8] | ((size_t)bytes[9] << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return npy_error(name, "truncated header");
    header_length = (size_t)bytes[8] | ((size_t)bytes[9] << 8) | ((size_t)bytes[10] << 16) |
                    ((size_t)bytes[11] << 24);
    header_start = 12;
  } else {
    return stax_status_make(STAX_UNIMPLEMENTED, "%s: .npy version %d is not supported", name,
                            major);
  }
  if (header_length > size - header_start) return npy_error(name, "truncated header");
  stax_dtype_t dtype = STAX_DTYPE_INVALID;
  bool fortran = false;
  int32_t rank = 0;
  int64_t dims[STAX_MAX_RANK];
  STAX_RETURN_IF_ERROR(npy_parse_header(name, (const char*)bytes + header_start, header_length,
                                        &dtype, &fortran, &rank, dims));
  size_t element_size = stax_dtype_size(dtype);
  uint64_t count = 1;
  for (int32_t i = 0; i < rank; i++) {
    if (dims[i] != 0 && count > UINT64_MAX / (uint64_t)dims[i] / element_size)
      return npy_error(name, "shape too large");
    count *= (uint64_t)dims[i];
  }
  size_t payload = (size_t)count * element_size;
  size_t data_start = header_start + header_length;
  if (size - data_start < payload)
    return stax_status_make(STAX_PARSE_ERROR,
                            "%s: .npy data is truncated: the shape needs %zu bytes, the file has "
                            "%zu",
                            name, payload, size - data_start);
  stax_tensor_t* tensor = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(allocator, dtype, rank, dims, &tensor),
                       "loading %s", name);
  if (!fortran || rank <= 1) {
    memcpy(stax_tensor_data(tensor), bytes + data_start, payload);
  } else {
    /* Fortran order: the file holds the transpose's C-order data; view it with column-major
     * strides and copy into the row-major result. */
    int64_t strides[STAX_MAX_RANK];
    int64_t stride = 1;
    for (int32_t i = 0; i < rank; i++) {
      strides[i] = stride;
      stride *= dims[i];
    }
    stax_tensor_t* view = NULL;
    stax_status_t status = stax_tensor_wrap(allocator, (void*)(bytes + data_start), dtype, rank,
                                            dims, strides, NULL, NULL, &view);
    if (!status) status = stax_tensor_copy_into(view, tensor);
    if (view) stax_tensor_release(view);
    if (status) {
      stax_tensor_release(tensor);
      return stax_status_annotate(status, "loading %s", name);
    }
  }
  *out_tensor = tensor;
  return STAX_OK;
}

stax_status_t stax_npy_load(stax_allocator_t allocator, const char* path,
                            stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  FILE* f = fopen(path, "rb");
  if (!f) return stax_status_make(STAX_IO_ERROR, "cannot open %s: %s", path, strerror(errno));
  stax_status_t status = STAX_OK;
  void* data = NULL;
  long size = 0;
  /* A folder opens, and its "size" is LONG_MAX: refuse anything but a regular file. */
  struct stat info;
  if (fstat(fileno(f), &info) != 0 || !S_ISREG(info.st_mode)) {
    status = stax_status_make(STAX_IO_ERROR, "cannot read %s: %s", path,
                              S_ISDIR(info.st_mode) ? "it is a folder" : "not a regular file");
    goto cleanup;
  }
  if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    status = stax_status_make(STAX_IO_ERROR, "cannot read %s: %s", path, strerror(errno));
    goto cleanup;
  }
  STAX_GOTO_IF_ERROR(status, stax_allocator_malloc(allocator, (size_t)size, &data), cleanup,
                     "reading %s", path);
  if (size > 0 && fread(data, 1, (size_t)size, f) != (size_t)size) {
    status = stax_status_make(STAX_IO_ERROR, "cannot read %s", path);
    goto cleanup;
  }
  status = stax_npy_parse(allocator, data, (size_t)size, path, out_tensor);
cleanup:
  if (data) stax_allocator_free(allocator, data, (size_t)size);
  fclose(f);
  return status;
}

stax_status_t stax_npy_save(const stax_tensor_t* tensor, const char* path) {
  if (stax_tensor_is_sequence(tensor))
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "cannot write %s: the value is a sequence (an .npy file holds one "
                            "array; write each element)",
                            path);
  stax_dtype_t dtype = stax_tensor_dtype(tensor);
  const char* code = NULL;
  for (size_t i = 0; i < sizeof(npy_dtypes) / sizeof(npy_dtypes[0]); i++)
    if (npy_dtypes[i].dtype == dtype) code = npy_dtypes[i].descr;
  if (!code)
    return stax_status_make(STAX_UNIMPLEMENTED, "cannot write %s: numpy has no %s dtype", path,
                            stax_dtype_name(dtype));
  char header[256];
  int rank = stax_tensor_rank(tensor);
  const int64_t* dims = stax_tensor_dims(tensor);
  int n = snprintf(header, sizeof(header), "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                   (code[1] == '1') ? '|' : '<', code);
  for (int i = 0; i < rank; i++)
    n += snprintf(header + n, sizeof(header) - (size_t)n, rank == 1 ? "%lld," : (i ? ", %lld" : "%lld"),
                  (long long)dims[i]);
  n += snprintf(header + n, sizeof(header) - (size_t)n, "), }");
  /* Pad with spaces so magic + length + header + newline is a multiple of 64 bytes. */
  int total = 10 + n + 1;
  int padding = (64 - total % 64) % 64;
  if (n + padding + 1 >= (int)sizeof(header)) return stax_status_make(STAX_INTERNAL, "npy header too long");
  memset(header + n, ' ', (size_t)padding);
  n += padding;
  header[n++] = '\n';

  stax_tensor_t* contiguous = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_copy(stax_allocator_system(), tensor, &contiguous),
                       "writing %s", path);
  FILE* f = fopen(path, "wb");
  if (!f) {
    stax_tensor_release(contiguous);
    return stax_status_make(STAX_IO_ERROR, "cannot create %s: %s", path, strerror(errno));
  }
  unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff),
                              (unsigned char)(n >> 8)};
  size_t payload = (size_t)stax_tensor_element_count(contiguous) * stax_dtype_size(dtype);
  bool ok = fwrite(prefix, 1, 10, f) == 10 && fwrite(header, 1, (size_t)n, f) == (size_t)n &&
            (payload == 0 || fwrite(stax_tensor_data(contiguous), 1, payload, f) == payload);
  ok = (fclose(f) == 0) && ok;
  stax_tensor_release(contiguous);
  if (!ok) return stax_status_make(STAX_IO_ERROR, "cannot write %s", path);
  return STAX_OK;
}
