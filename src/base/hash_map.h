/* An open-addressing hash map with string or 64-bit integer keys and pointer-sized values.
 * String keys are copied into the map. Used for name tables and caches. */
#ifndef STAX_BASE_HASH_MAP_H_
#define STAX_BASE_HASH_MAP_H_

#include "stax/base.h"

typedef struct stax_hash_map_s stax_hash_map_t;

typedef enum stax_hash_key_kind_e {
  STAX_HASH_KEY_STRING,
  STAX_HASH_KEY_U64,
} stax_hash_key_kind_t;

STAX_MUST_USE stax_status_t stax_hash_map_create(stax_allocator_t allocator,
                                                 stax_hash_key_kind_t kind,
                                                 stax_hash_map_t** out_map);
void stax_hash_map_destroy(stax_hash_map_t* map);
size_t stax_hash_map_size(const stax_hash_map_t* map);

/* Insert or overwrite. */
STAX_MUST_USE stax_status_t stax_hash_map_put_string(stax_hash_map_t* map, const char* key,
                                                     uintptr_t value);
STAX_MUST_USE stax_status_t stax_hash_map_put_u64(stax_hash_map_t* map, uint64_t key,
                                                  uintptr_t value);
bool stax_hash_map_get_string(const stax_hash_map_t* map, const char* key,
                              uintptr_t* out_value);
bool stax_hash_map_get_u64(const stax_hash_map_t* map, uint64_t key, uintptr_t* out_value);
bool stax_hash_map_remove_string(stax_hash_map_t* map, const char* key);
bool stax_hash_map_remove_u64(stax_hash_map_t* map, uint64_t key);

/* Iteration: *inout_cursor starts at 0; returns false at the end. key_string is NULL for
 * integer maps, key_u64 is 0 for string maps. */
bool stax_hash_map_next(const stax_hash_map_t* map, size_t* inout_cursor,
                        const char** out_key_string, uint64_t* out_key_u64,
                        uintptr_t* out_value);

/* Hashing used by the map and elsewhere (e.g. shape signatures, hash-consing). */
uint64_t stax_hash_bytes(const void* data, size_t size, uint64_t seed);
uint64_t stax_hash_u64(uint64_t x);
static inline uint64_t stax_hash_combine(uint64_t h, uint64_t x) {
  return (h ^ (x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
}

#endif /* STAX_BASE_HASH_MAP_H_ */
