/* Element type tables: names, sizes, kinds, ONNX and DLPack codes, all generated from
 * include/stax/dtypes.def so the lists cannot drift apart. */
#include <string.h>

#include "runtime/tensor_internal.h"

typedef struct stax_dtype_info_t {
  const char* name;
  size_t size;
  char kind;
  int32_t onnx_code;
  int32_t dlpack_code;
} stax_dtype_info_t;

static const stax_dtype_info_t stax_dtype_infos_[STAX_DTYPE_COUNT] = {
#define STAX_DTYPE(name, text, size, kind, onnx, dlpack, ctype) \
  [STAX_DTYPE_##name] = {text, size, #kind[0], onnx, dlpack},
#include "stax/dtypes.def"
#undef STAX_DTYPE
};

/* The C type column must agree with the size column. */
#define STAX_DTYPE(name, text, size, kind, onnx, dlpack, ctype) \
  _Static_assert(sizeof(ctype) == (size), "dtypes.def: C type size of " text);
#include "stax/dtypes.def"
#undef STAX_DTYPE

bool stax_dtype_is_valid(stax_dtype_t dtype) {
  return (int)dtype >= 0 && (int)dtype < STAX_DTYPE_COUNT;
}

const char* stax_dtype_name(stax_dtype_t dtype) {
  return stax_dtype_is_valid(dtype) ? stax_dtype_infos_[dtype].name : "invalid";
}

size_t stax_dtype_size(stax_dtype_t dtype) {
  return stax_dtype_is_valid(dtype) ? stax_dtype_infos_[dtype].size : 0;
}

char stax_dtype_kind(stax_dtype_t dtype) {
  return stax_dtype_is_valid(dtype) ? stax_dtype_infos_[dtype].kind : 0;
}

bool stax_dtype_is_float(stax_dtype_t dtype) { return stax_dtype_kind(dtype) == 'F'; }
bool stax_dtype_is_signed_int(stax_dtype_t dtype) { return stax_dtype_kind(dtype) == 'I'; }
bool stax_dtype_is_unsigned_int(stax_dtype_t dtype) { return stax_dtype_kind(dtype) == 'U'; }
bool stax_dtype_is_integer(stax_dtype_t dtype) {
  char kind = stax_dtype_kind(dtype);
  return kind == 'I' || kind == 'U';
}

/* Spellings other tools use for the same types: C ("float", "double"), numpy ("half") and the
 * short ML names. Deliberately no "int" or "long": their width differs between ecosystems. */
static const struct {
  const char* alias;
  stax_dtype_t dtype;
} stax_dtype_aliases_[] = {
    {"float", STAX_DTYPE_FLOAT32}, {"double", STAX_DTYPE_FLOAT64}, {"half", STAX_DTYPE_FLOAT16},
    {"fp32", STAX_DTYPE_FLOAT32},  {"fp64", STAX_DTYPE_FLOAT64},   {"fp16", STAX_DTYPE_FLOAT16},
    {"bf16", STAX_DTYPE_BFLOAT16},
};

stax_dtype_t stax_dtype_from_name(const char* name) {
  if (name == NULL) return STAX_DTYPE_INVALID;
  for (int i = 0; i < STAX_DTYPE_COUNT; i++) {
    if (strcmp(name, stax_dtype_infos_[i].name) == 0) return (stax_dtype_t)i;
  }
  for (size_t i = 0; i < sizeof(stax_dtype_aliases_) / sizeof(stax_dtype_aliases_[0]); i++) {
    if (strcmp(name, stax_dtype_aliases_[i].alias) == 0) return stax_dtype_aliases_[i].dtype;
  }
  return STAX_DTYPE_INVALID;
}

stax_dtype_t stax_dtype_from_onnx(int32_t onnx_code) {
  for (int i = 0; i < STAX_DTYPE_COUNT; i++) {
    if (stax_dtype_infos_[i].onnx_code == onnx_code) return (stax_dtype_t)i;
  }
  return STAX_DTYPE_INVALID;
}

/* 0 is ONNX's UNDEFINED. */
int32_t stax_dtype_to_onnx(stax_dtype_t dtype) {
  return stax_dtype_is_valid(dtype) ? stax_dtype_infos_[dtype].onnx_code : 0;
}

int32_t stax_dtype_dlpack_code(stax_dtype_t dtype) {
  return stax_dtype_is_valid(dtype) ? stax_dtype_infos_[dtype].dlpack_code : -1;
}

stax_dtype_t stax_dtype_from_dlpack(int32_t code, int32_t bits) {
  for (int i = 0; i < STAX_DTYPE_COUNT; i++) {
    if (stax_dtype_infos_[i].dlpack_code == code &&
        (int32_t)stax_dtype_infos_[i].size * 8 == bits) {
      return (stax_dtype_t)i;
    }
  }
  return STAX_DTYPE_INVALID;
}
