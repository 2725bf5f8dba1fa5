/* The open-addressing hash map (linear probing, backward-shift deletion, so no tombstones pile
 * up in maps that churn) and the hash functions the rest of stax uses. */
#include "base/hash_map.h"

#include <string.h>

/* ---------------------------------------------------------------------------------------- */
/* Hashing                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/* Odd 64-bit constants with well-spread bits (golden ratio and finalizer multipliers). */
#define STAX_HASH_K0 0x9e3779b97f4a7c15ull
#define STAX_HASH_K1 0xbf58476d1ce4e5b9ull
#define STAX_HASH_K2 0x94d049bb133111ebull
#define STAX_HASH_K3 0xc2b2ae3d27d4eb4full

/* Full 64x64 -> 128-bit multiply folded back to 64 bits: every input bit reaches every output
 * bit in one step, which is what makes the block loop below cheap and well mixed. */
static uint64_t stax_hash_fold_multiply(uint64_t a, uint64_t b) {
#if defined(__SIZEOF_INT128__)
  unsigned __int128 product = (unsigned __int128)a * b;
  return (uint64_t)product ^ (uint64_t)(product >> 64);
#else
  uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32, b_lo = b & 0xffffffffu, b_hi = b >> 32;
  uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  uint64_t high = hi_hi + (hi_lo >> 32) + (cross >> 32);
  uint64_t low = (cross << 32) | (lo_lo & 0xffffffffu);
  return low ^ high;
#endif
}

/* Little-endian whatever the host, so hashes stored in files (program checksums) agree
 * across machines; compilers turn this into one load on little-endian hosts. */
static uint64_t stax_hash_read_le(const unsigned char* p, size_t count) {
  uint64_t value = 0;
  for (size_t i = 0; i < count; i++) value |= (uint64_t)p[i] << (8 * i);
  return value;
}

static uint64_t stax_hash_read64(const unsigned char* p) { return stax_hash_read_le(p, 8); }

uint64_t stax_hash_u64(uint64_t x) {
  /* A xor-shift-multiply finalizer: a bijection on 64 bits with full avalanche. */
  x ^= x >> 30;
  x *= STAX_HASH_K1;
  x ^= x >> 27;
  x *= STAX_HASH_K2;
  x ^= x >> 31;
  return x;
}

uint64_t stax_hash_bytes(const void* data, size_t size, uint64_t seed) {
  const unsigned char* p = (const unsigned char*)data;
  size_t remaining = size;
  uint64_t h = seed ^ stax_hash_u64((uint64_t)size ^ STAX_HASH_K0);
  while (remaining >= 16) {
    /* Mixing the running state in through an odd multiply keeps the chain injective, so a
     * block can never erase what earlier blocks contributed. */
    h = (h ^ stax_hash_fold_multiply(stax_hash_read64(p) ^ STAX_HASH_K1,
                                     stax_hash_read64(p + 8) ^ STAX_HASH_K2)) *
        STAX_HASH_K0;
    p += 16;
    remaining -= 16;
  }
  uint64_t a = 0, b = 0;
  if (remaining >= 8) {
    a = stax_hash_read64(p);
    p += 8;
    remaining -= 8;
  }
  if (remaining > 0) b = stax_hash_read_le(p, remaining);
  h = (h ^ stax_hash_fold_multiply(a ^ STAX_HASH_K1, b ^ STAX_HASH_K3)) * STAX_HASH_K0;
  return stax_hash_u64(h ^ (uint64_t)size);
}

/* ---------------------------------------------------------------------------------------- */
/* Map                                                                                      */
/* ---------------------------------------------------------------------------------------- */

#define STAX_HASH_MAP_INITIAL_CAPACITY ((size_t)16)

typedef struct stax_hash_map_entry_t {
  uint64_t hash;
  uint64_t key_u64;      /* u64 maps */
  char* key_string;      /* string maps: owned copy, key_length + 1 bytes */
  size_t key_length;
  uintptr_t value;
  bool occupied;
} stax_hash_map_entry_t;

struct stax_hash_map_s {
  stax_allocator_t allocator;
  stax_hash_key_kind_t kind;
  stax_hash_map_entry_t* entries; /* NULL until the first insert */
  size_t capacity;                /* a power of two, or 0 */
  size_t size;
};

stax_status_t stax_hash_map_create(stax_allocator_t allocator, stax_hash_key_kind_t kind,
                                   stax_hash_map_t** out_map) {
  *out_map = NULL;
  if (kind != STAX_HASH_KEY_STRING && kind != STAX_HASH_KEY_U64) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "unknown hash map key kind %d", (int)kind);
  }
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, sizeof(stax_hash_map_t), &memory),
                       "creating a hash map");
  stax_hash_map_t* map = (stax_hash_map_t*)memory;
  map->allocator = allocator;
  map->kind = kind;
  map->entries = NULL;
  map->capacity = 0;
  map->size = 0;
  *out_map = map;
  return STAX_OK;
}

void stax_hash_map_destroy(stax_hash_map_t* map) {
  if (map == NULL) return;
  if (map->kind == STAX_HASH_KEY_STRING) {
    for (size_t i = 0; i < map->capacity; i++) {
      stax_hash_map_entry_t* entry = &map->entries[i];
      if (entry->occupied) {
        stax_allocator_free(map->allocator, entry->key_string, entry->key_length + 1);
      }
    }
  }
  stax_allocator_free(map->allocator, map->entries, map->capacity * sizeof(*map->entries));
  stax_allocator_free(map->allocator, map, sizeof(*map));
}

size_t stax_hash_map_size(const stax_hash_map_t* map) { return map ? map->size : 0; }

static bool stax_hash_map_entry_matches(const stax_hash_map_t* map,
                                        const stax_hash_map_entry_t* entry, uint64_t hash,
                                        const char* key_string, size_t key_length,
                                        uint64_t key_u64) {
  if (entry->hash != hash) return false;
  if (map->kind == STAX_HASH_KEY_U64) return entry->key_u64 == key_u64;
  return entry->key_length == key_length &&
         memcmp(entry->key_string, key_string, key_length) == 0;
}

/* Returns the slot holding the key, or the empty slot where it would go. Requires capacity > 0
 * and at least one empty slot (the load factor guarantees it). */
static size_t stax_hash_map_probe(const stax_hash_map_t* map, uint64_t hash,
                                  const char* key_string, size_t key_length, uint64_t key_u64) {
  size_t mask = map->capacity - 1;
  size_t i = (size_t)hash & mask;
  while (map->entries[i].occupied &&
         !stax_hash_map_entry_matches(map, &map->entries[i], hash, key_string, key_length,
                                      key_u64)) {
    i = (i + 1) & mask;
  }
  return i;
}

static stax_status_t stax_hash_map_resize(stax_hash_map_t* map, size_t new_capacity) {
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(map->allocator, new_capacity,
                                             sizeof(stax_hash_map_entry_t), &memory),
                       "growing a hash map of %zu entries to %zu slots", map->size,
                       new_capacity);
  stax_hash_map_entry_t* fresh = (stax_hash_map_entry_t*)memory;
  size_t mask = new_capacity - 1;
  for (size_t i = 0; i < map->capacity; i++) {
    if (!map->entries[i].occupied) continue;
    size_t j = (size_t)map->entries[i].hash & mask;
    while (fresh[j].occupied) j = (j + 1) & mask;
    fresh[j] = map->entries[i];
  }
  stax_allocator_free(map->allocator, map->entries, map->capacity * sizeof(*map->entries));
  map->entries = fresh;
  map->capacity = new_capacity;
  return STAX_OK;
}

/* Keeps the load factor at or below 3/4 after one more insert. */
static stax_status_t stax_hash_map_reserve_one(stax_hash_map_t* map) {
  if (map->capacity == 0) return stax_hash_map_resize(map, STAX_HASH_MAP_INITIAL_CAPACITY);
  if ((map->size + 1) * 4 <= map->capacity * 3) return STAX_OK;
  if (map->capacity > SIZE_MAX / 2 / sizeof(stax_hash_map_entry_t)) {
    return stax_status_make(STAX_OUT_OF_MEMORY, "hash map of %zu entries cannot grow further",
                            map->size);
  }
  return stax_hash_map_resize(map, map->capacity * 2);
}

stax_status_t stax_hash_map_put_string(stax_hash_map_t* map, const char* key,
                                       uintptr_t value) {
  if (map == NULL || key == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "hash map put with a NULL %s",
                            map == NULL ? "map" : "key");
  }
  if (map->kind != STAX_HASH_KEY_STRING) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "string key '%s' used with an integer-keyed hash map", key);
  }
  size_t length = strlen(key);
  uint64_t hash = stax_hash_bytes(key, length, 0);
  if (map->capacity > 0) {
    size_t slot = stax_hash_map_probe(map, hash, key, length, 0);
    if (map->entries[slot].occupied) {
      map->entries[slot].value = value;
      return STAX_OK;
    }
  }
  /* Grow before copying the key so a failed key copy leaves nothing to undo. */
  STAX_RETURN_IF_ERROR(stax_hash_map_reserve_one(map), "inserting key '%s'", key);
  void* memory = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(map->allocator, length + 1, &memory),
                       "copying hash map key '%s'", key);
  char* copy = (char*)memory;
  memcpy(copy, key, length + 1);
  size_t slot = stax_hash_map_probe(map, hash, key, length, 0);
  stax_hash_map_entry_t* entry = &map->entries[slot];
  entry->hash = hash;
  entry->key_u64 = 0;
  entry->key_string = copy;
  entry->key_length = length;
  entry->value = value;
  entry->occupied = true;
  map->size++;
  return STAX_OK;
}

stax_status_t stax_hash_map_put_u64(stax_hash_map_t* map, uint64_t key, uintptr_t value) {
  if (map == NULL) {
    return stax_status_make(STAX_INVALID_ARGUMENT, "hash map put with a NULL map");
  }
  if (map->kind != STAX_HASH_KEY_U64) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "integer key %llu used with a string-keyed hash map",
                            (unsigned long long)key);
  }
  uint64_t hash = stax_hash_u64(key);
  if (map->capacity > 0) {
    size_t slot = stax_hash_map_probe(map, hash, NULL, 0, key);
    if (map->entries[slot].occupied) {
      map->entries[slot].value = value;
      return STAX_OK;
    }
  }
  STAX_RETURN_IF_ERROR(stax_hash_map_reserve_one(map), "inserting key %llu",
                       (unsigned long long)key);
  size_t slot = stax_hash_map_probe(map, hash, NULL, 0, key);
  stax_hash_map_entry_t* entry = &map->entries[slot];
  entry->hash = hash;
  entry->key_u64 = key;
  entry->key_string = NULL;
  entry->key_length = 0;
  entry->value = value;
  entry->occupied = true;
  map->size++;
  return STAX_OK;
}

/* Returns the slot index of the key, or SIZE_MAX when absent (or the kind does not match). */
static size_t stax_hash_map_find(const stax_hash_map_t* map, stax_hash_key_kind_t kind,
                                 const char* key_string, uint64_t key_u64) {
  if (map == NULL || map->kind != kind || map->capacity == 0) return SIZE_MAX;
  if (kind == STAX_HASH_KEY_STRING && key_string == NULL) return SIZE_MAX;
  size_t length = 0;
  uint64_t hash;
  if (kind == STAX_HASH_KEY_STRING) {
    length = strlen(key_string);
    hash = stax_hash_bytes(key_string, length, 0);
  } else {
    hash = stax_hash_u64(key_u64);
  }
  size_t slot = stax_hash_map_probe(map, hash, key_string, length, key_u64);
  return map->entries[slot].occupied ? slot : SIZE_MAX;
}

bool stax_hash_map_get_string(const stax_hash_map_t* map, const char* key,
                              uintptr_t* out_value) {
  size_t slot = stax_hash_map_find(map, STAX_HASH_KEY_STRING, key, 0);
  if (out_value) *out_value = slot == SIZE_MAX ? 0 : map->entries[slot].value;
  return slot != SIZE_MAX;
}

bool stax_hash_map_get_u64(const stax_hash_map_t* map, uint64_t key, uintptr_t* out_value) {
  size_t slot = stax_hash_map_find(map, STAX_HASH_KEY_U64, NULL, key);
  if (out_value) *out_value = slot == SIZE_MAX ? 0 : map->entries[slot].value;
  return slot != SIZE_MAX;
}

/* Backward-shift deletion: later entries of the same probe run move up into the hole when
 * their home slot allows it, so lookups never need tombstones. */
static void stax_hash_map_remove_slot(stax_hash_map_t* map, size_t hole) {
  stax_hash_map_entry_t* entries = map->entries;
  if (map->kind == STAX_HASH_KEY_STRING) {
    stax_allocator_free(map->allocator, entries[hole].key_string, entries[hole].key_length + 1);
  }
  size_t mask = map->capacity - 1;
  for (size_t j = (hole + 1) & mask; entries[j].occupied; j = (j + 1) & mask) {
    size_t home = (size_t)entries[j].hash & mask;
    /* The entry at j may move to the hole if the hole lies between its home and j. */
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      entries[hole] = entries[j];
      hole = j;
    }
  }
  memset(&entries[hole], 0, sizeof(entries[hole]));
  map->size--;
}

bool stax_hash_map_remove_string(stax_hash_map_t* map, const char* key) {
  size_t slot = stax_hash_map_find(map, STAX_HASH_KEY_STRING, key, 0);
  if (slot == SIZE_MAX) return false;
  stax_hash_map_remove_slot(map, slot);
  return true;
}

bool stax_hash_map_remove_u64(stax_hash_map_t* map, uint64_t key) {
  size_t slot = stax_hash_map_find(map, STAX_HASH_KEY_U64, NULL, key);
  if (slot == SIZE_MAX) return false;
  stax_hash_map_remove_slot(map, slot);
  return true;
}

/* The cursor is one past the last slot visited. Inserting or removing during iteration may
 * move entries, so callers must not modify the map while iterating. */
bool stax_hash_map_next(const stax_hash_map_t* map, size_t* inout_cursor,
                        const char** out_key_string, uint64_t* out_key_u64,
                        uintptr_t* out_value) {
  if (out_key_string) *out_key_string = NULL;
  if (out_key_u64) *out_key_u64 = 0;
  if (out_value) *out_value = 0;
  if (map == NULL) return false;
  for (size_t i = *inout_cursor; i < map->capacity; i++) {
    const stax_hash_map_entry_t* entry = &map->entries[i];
    if (!entry->occupied) continue;
    if (out_key_string) *out_key_string = entry->key_string;
    if (out_key_u64) *out_key_u64 = entry->key_u64;
    if (out_value) *out_value = entry->value;
    *inout_cursor = i + 1;
    return true;
  }
  *inout_cursor = map->capacity;
  return false;
}
