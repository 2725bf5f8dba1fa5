/* Arenas: bump allocation out of chunks taken from an allocator; everything is freed at once by
 * stax_arena_deinit. */
#include "base/arena.h"

#include <string.h>

#define STAX_ARENA_DEFAULT_CHUNK_SIZE ((size_t)16 * 1024)
#define STAX_ARENA_DEFAULT_ALIGNMENT ((size_t)16)

struct stax_arena_chunk_s {
  stax_arena_chunk_t* next;
  size_t capacity;    /* usable bytes after the header */
  size_t used;        /* bytes of the usable area handed out (including alignment padding) */
  size_t total_size;  /* header + capacity: what was asked of the allocator, needed to free */
};

/* The usable area starts after the header, rounded so that default-aligned requests need no
 * padding in a fresh chunk (the allocator returns at least 16-byte aligned memory). */
#define STAX_ARENA_HEADER_SIZE                                                            \
  ((sizeof(stax_arena_chunk_t) + STAX_ARENA_DEFAULT_ALIGNMENT - 1) &                      \
   ~(STAX_ARENA_DEFAULT_ALIGNMENT - 1))

static unsigned char* stax_arena_chunk_data(stax_arena_chunk_t* chunk) {
  return (unsigned char*)chunk + STAX_ARENA_HEADER_SIZE;
}

void stax_arena_init(stax_arena_t* arena, stax_allocator_t allocator, size_t chunk_size) {
  arena->allocator = allocator;
  arena->head = NULL;
  arena->chunk_size = chunk_size ? chunk_size : STAX_ARENA_DEFAULT_CHUNK_SIZE;
  arena->bytes_allocated = 0;
}

void stax_arena_deinit(stax_arena_t* arena) {
  stax_arena_chunk_t* chunk = arena->head;
  while (chunk) {
    stax_arena_chunk_t* next = chunk->next;
    stax_allocator_free(arena->allocator, chunk, chunk->total_size);
    chunk = next;
  }
  arena->head = NULL;
  arena->bytes_allocated = 0;
}

/* Returns the aligned pointer for `size` bytes in `chunk`, or NULL if they do not fit. */
static void* stax_arena_chunk_try_alloc(stax_arena_chunk_t* chunk, size_t size,
                                        size_t alignment) {
  uintptr_t start = (uintptr_t)stax_arena_chunk_data(chunk);
  uintptr_t cursor = start + chunk->used;
  uintptr_t aligned = (cursor + (alignment - 1)) & ~(uintptr_t)(alignment - 1);
  size_t offset = (size_t)(aligned - start);
  if (offset > chunk->capacity || chunk->capacity - offset < size) return NULL;
  chunk->used = offset + size;
  return (void*)aligned;
}

stax_status_t stax_arena_alloc(stax_arena_t* arena, size_t size, size_t alignment,
                               void** out_ptr) {
  *out_ptr = NULL;
  if (alignment == 0) alignment = STAX_ARENA_DEFAULT_ALIGNMENT;
  if ((alignment & (alignment - 1)) != 0) {
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "arena alignment %zu is not a power of two", alignment);
  }
  if (size == 0) size = 1; /* every allocation gets a distinct address */

  if (arena->head) {
    void* ptr = stax_arena_chunk_try_alloc(arena->head, size, alignment);
    if (ptr) {
      arena->bytes_allocated += size;
      *out_ptr = ptr;
      return STAX_OK;
    }
  }

  /* Worst-case padding is alignment - 1 beyond the default alignment the chunk already has. */
  size_t padding = alignment > STAX_ARENA_DEFAULT_ALIGNMENT ? alignment - 1 : 0;
  if (size > SIZE_MAX - padding - STAX_ARENA_HEADER_SIZE) {
    return stax_status_make(STAX_OUT_OF_MEMORY,
                            "arena allocation of %zu bytes (alignment %zu) is too large", size,
                            alignment);
  }
  size_t needed = size + padding;
  /* A request bigger than a quarter chunk gets a chunk of its own, placed behind the head so
   * the head's remaining space is not abandoned. */
  bool dedicated = needed > arena->chunk_size / 4;
  size_t capacity = dedicated ? needed : arena->chunk_size;
  if (capacity < needed) capacity = needed;

  void* memory = NULL;
  STAX_RETURN_IF_ERROR(
      stax_allocator_malloc(arena->allocator, STAX_ARENA_HEADER_SIZE + capacity, &memory),
      "arena chunk for a %zu-byte allocation", size);
  stax_arena_chunk_t* chunk = (stax_arena_chunk_t*)memory;
  chunk->capacity = capacity;
  chunk->used = 0;
  chunk->total_size = STAX_ARENA_HEADER_SIZE + capacity;
  if (dedicated && arena->head) {
    chunk->next = arena->head->next;
    arena->head->next = chunk;
  } else {
    chunk->next = arena->head;
    arena->head = chunk;
  }
  void* ptr = stax_arena_chunk_try_alloc(chunk, size, alignment);
  arena->bytes_allocated += size;
  *out_ptr = ptr;
  return STAX_OK;
}

stax_status_t stax_arena_memdup(stax_arena_t* arena, const void* data, size_t size,
                                void** out_copy) {
  *out_copy = NULL;
  if (data == NULL) return STAX_OK;
  void* copy = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_alloc(arena, size, 0, &copy));
  if (size) memcpy(copy, data, size);
  *out_copy = copy;
  return STAX_OK;
}

stax_status_t stax_arena_strdup(stax_arena_t* arena, const char* text, const char** out_text) {
  *out_text = NULL;
  if (text == NULL) return STAX_OK;
  void* copy = NULL;
  STAX_RETURN_IF_ERROR(stax_arena_memdup(arena, text, strlen(text) + 1, &copy));
  *out_text = (const char*)copy;
  return STAX_OK;
}
