/* Arenas: bump allocation in chunks taken from an allocator, freed all at once. Used for IR
 * (names, dim arrays, attribute payloads) and pass scratch, where lifetimes end together. */
#ifndef STAX_BASE_ARENA_H_
#define STAX_BASE_ARENA_H_

#include "stax/base.h"

typedef struct stax_arena_chunk_s stax_arena_chunk_t;

typedef struct stax_arena_t {
  stax_allocator_t allocator;
  stax_arena_chunk_t* head;  /* newest chunk first */
  size_t chunk_size;         /* default size of new chunks */
  size_t bytes_allocated;    /* total bytes handed out (statistics) */
} stax_arena_t;

/* chunk_size 0 picks a default (16 KiB). No memory is taken until the first allocation. */
void stax_arena_init(stax_arena_t* arena, stax_allocator_t allocator, size_t chunk_size);
/* Frees every chunk; the arena can be reused afterwards. */
void stax_arena_deinit(stax_arena_t* arena);
/* Aligned to `alignment` (power of two, 0 = 16). Large requests get a chunk of their own. */
STAX_MUST_USE stax_status_t stax_arena_alloc(stax_arena_t* arena, size_t size, size_t alignment,
                                             void** out_ptr);
/* Copies: NULL input gives NULL output and OK. */
STAX_MUST_USE stax_status_t stax_arena_strdup(stax_arena_t* arena, const char* text,
                                              const char** out_text);
STAX_MUST_USE stax_status_t stax_arena_memdup(stax_arena_t* arena, const void* data,
                                              size_t size, void** out_copy);

#endif /* STAX_BASE_ARENA_H_ */
