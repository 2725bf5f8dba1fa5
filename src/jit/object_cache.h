/* The JIT's on-disk cache of compiled kernels (object_cache.c): machine code for a kernel is
 * stored under a key that spells out everything it depends on — the kernel IR text, the
 * target (triple, CPU, features), the LLVM version and the identity of the stax build that
 * generated it — so a later process (or a later compile of the same kernel) loads the object
 * instead of running LLVM's optimizer and code generator again.
 *
 * Files are `<dir>/<16 hex digits>.o` holding a header (with a checksum of the object), the
 * full key and the object; a load compares the whole key and the checksum, so a hash
 * collision or a stale or damaged file is a miss, never wrong code. Writes go to a temporary name and are renamed into place, so concurrent
 * processes never read half a file. Every I/O problem is a miss (logged with STAX_LOG=jit),
 * never an error.
 *
 * Location: STAX_JIT_CACHE_DIR, else $XDG_CACHE_HOME/stax/jit, else $HOME/.cache/stax/jit;
 * STAX_JIT_CACHE=0 turns the cache off. The folder is kept under STAX_JIT_CACHE_MAX_MB
 * (default 256): stores trim it now and then, least recently used (loaded or stored) files
 * first. Backend-neutral (bytes in, bytes out); the LLVM backend uses it. */
#ifndef STAX_JIT_OBJECT_CACHE_H_
#define STAX_JIT_OBJECT_CACHE_H_

#include <stddef.h>
#include <stdint.h>

#include "stax/base.h"

/* The folder to use now (from the environment), or false when the cache is off. */
bool stax_jit_cache_dir(char* out_dir, size_t size);

/* An identity of the running stax build: a hash of the library or executable file that holds
 * this code (computed once). 0 when it cannot be read: the cache is then not used, since
 * objects made by another build of the code generator could differ. */
uint64_t stax_jit_build_identity(void);

/* The key's hash (names the file). */
uint64_t stax_jit_cache_key_hash(const char* key, size_t key_size);

/* Reads the object stored for `key` into a malloc'ed buffer (*out_object, *out_size); false
 * on a miss (no file, other key, truncated, unreadable). */
bool stax_jit_cache_load(const char* dir, const char* key, size_t key_size, void** out_object,
                         size_t* out_size);

/* Stores the object for `key` (atomically: temporary file, then rename). false when it could
 * not (the caller just goes on). */
bool stax_jit_cache_store(const char* dir, const char* key, size_t key_size, const void* object,
                          size_t object_size);

/* The size bound from STAX_JIT_CACHE_MAX_MB (default 256 MB). */
uint64_t stax_jit_cache_limit_bytes(void);
/* When the cache files in `dir` take more than `limit` bytes, removes the least recently used
 * (by modification time: loads touch it) down to three quarters of it. */
void stax_jit_cache_trim(const char* dir, uint64_t limit);

#endif /* STAX_JIT_OBJECT_CACHE_H_ */
