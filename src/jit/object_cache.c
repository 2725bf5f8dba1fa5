/* The on-disk kernel cache: paths, keys, atomic writes, verified reads (see object_cache.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "jit/object_cache.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h> /* utimes */
#include <time.h>
#include <unistd.h>

#include "base/hash_map.h"

static const char kMagic[8] = {'S', 'T', 'A', 'X', 'O', 'B', 'J', '1'};
/* magic, key size, object size, object checksum (little-endian u64s): the checksum catches a
 * damaged object whose key still matches, which would otherwise be linked and run. */
enum { HEADER_SIZE = 8 + 8 + 8 + 8 };

static uint64_t object_checksum(const void* object, size_t size) {
  return stax_hash_bytes(object, size, 0xc0de5eedull);
}

bool stax_jit_cache_dir(char* out_dir, size_t size) {
  const char* off = getenv("STAX_JIT_CACHE");
  if (off && strcmp(off, "0") == 0) return false;
  const char* dir = getenv("STAX_JIT_CACHE_DIR");
  int n = -1;
  if (dir && dir[0]) {
    n = snprintf(out_dir, size, "%s", dir);
  } else if ((dir = getenv("XDG_CACHE_HOME")) && dir[0] == '/') {
    n = snprintf(out_dir, size, "%s/stax/jit", dir);
  } else if ((dir = getenv("HOME")) && dir[0] == '/') {
    n = snprintf(out_dir, size, "%s/.cache/stax/jit", dir);
  }
  return n > 0 && (size_t)n < size;
}

static uint64_t build_identity;
static pthread_once_t build_identity_once = PTHREAD_ONCE_INIT;

static void compute_build_identity(void) {
  Dl_info info;
  if (!dladdr((const void*)&stax_jit_build_identity, &info) || !info.dli_fname) return;
  FILE* file = fopen(info.dli_fname, "rb");
  if (!file) return;
  static unsigned char chunk[1 << 16];
  uint64_t hash = 0x57a8b11dull;
  size_t n;
  while ((n = fread(chunk, 1, sizeof(chunk), file)) > 0) hash = stax_hash_bytes(chunk, n, hash);
  bool ok = !ferror(file);
  fclose(file);
  build_identity = ok && hash ? hash : 0;
}

uint64_t stax_jit_build_identity(void) {
  pthread_once(&build_identity_once, compute_build_identity);
  return build_identity;
}

uint64_t stax_jit_cache_key_hash(const char* key, size_t key_size) {
  return stax_hash_bytes(key, key_size, 0x0b1ec7ull);
}

static void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static bool file_path(const char* dir, const char* key, size_t key_size, char* out, size_t size) {
  int n = snprintf(out, size, "%s/%016llx.o", dir,
                   (unsigned long long)stax_jit_cache_key_hash(key, key_size));
  return n > 0 && (size_t)n < size;
}

bool stax_jit_cache_load(const char* dir, const char* key, size_t key_size, void** out_object,
                         size_t* out_size) {
  *out_object = NULL;
  *out_size = 0;
  char path[4096];
  if (!file_path(dir, key, key_size, path, sizeof(path))) return false;
  FILE* file = fopen(path, "rb");
  if (!file) return false;
  bool ok = false;
  unsigned char header[HEADER_SIZE];
  char* stored_key = NULL;
  void* object = NULL;
  if (fread(header, 1, HEADER_SIZE, file) != HEADER_SIZE || memcmp(header, kMagic, 8) != 0)
    goto done;
  uint64_t stored_key_size = get_u64(header + 8), object_size = get_u64(header + 16);
  /* Sizes come from a file: bound them before allocating. */
  if (stored_key_size != key_size || object_size == 0 || object_size > ((uint64_t)1 << 30))
    goto done;
  stored_key = malloc(key_size ? key_size : 1);
  object = malloc((size_t)object_size);
  if (!stored_key || !object) goto done;
  if (fread(stored_key, 1, key_size, file) != key_size || memcmp(stored_key, key, key_size) != 0)
    goto done;
  if (fread(object, 1, (size_t)object_size, file) != object_size || fgetc(file) != EOF) goto done;
  ok = object_checksum(object, (size_t)object_size) == get_u64(header + 24);
done:
  fclose(file);
  free(stored_key);
  if (!ok) {
    free(object);
    STAX_LOG(JIT, "object cache: %s does not hold this kernel (other key, damaged or not ours)",
             path);
    return false;
  }
  /* A load marks the file as used (its modification time), which is what trimming goes by. */
  utimes(path, NULL);
  *out_object = object;
  *out_size = (size_t)object_size;
  return true;
}

/* ---- size bound ------------------------------------------------------------------------------ */

typedef struct cache_file_t {
  char name[64];
  off_t size;
  time_t used;
} cache_file_t;

static int by_use(const void* a, const void* b) {
  time_t x = ((const cache_file_t*)a)->used, y = ((const cache_file_t*)b)->used;
  return (x > y) - (x < y);
}

uint64_t stax_jit_cache_limit_bytes(void) {
  const char* text = getenv("STAX_JIT_CACHE_MAX_MB");
  long long mb = text && text[0] ? atoll(text) : 0;
  return (uint64_t)(mb > 0 ? mb : 256) << 20;
}

void stax_jit_cache_trim(const char* dir, uint64_t limit) {
  DIR* folder = opendir(dir);
  if (!folder) return;
  cache_file_t* files = NULL;
  size_t count = 0, capacity = 0;
  uint64_t total = 0;
  char path[4096];
  for (struct dirent* e; (e = readdir(folder)) != NULL;) {
    size_t length = strlen(e->d_name);
    /* Ours only: 16 hex digits and ".o" (temporary files of writers in flight are left). */
    if (length != 18 || strcmp(e->d_name + 16, ".o") != 0) continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    struct stat info;
    if (stat(path, &info) != 0) continue;
    if (count == capacity) {
      size_t grown = capacity ? 2 * capacity : 256;
      cache_file_t* bigger = realloc(files, grown * sizeof(*files));
      if (!bigger) break;
      files = bigger;
      capacity = grown;
    }
    memcpy(files[count].name, e->d_name, length + 1);
    files[count].size = info.st_size;
    files[count].used = info.st_mtime;
    total += (uint64_t)info.st_size;
    count++;
  }
  closedir(folder);
  if (total > limit) {
    /* Least recently used first, down to three quarters of the limit. */
    qsort(files, count, sizeof(*files), by_use);
    uint64_t target = limit / 4 * 3;
    size_t removed = 0;
    for (size_t i = 0; i < count && total > target; i++) {
      snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
      if (remove(path) == 0) {
        total -= (uint64_t)files[i].size;
        removed++;
      }
    }
    STAX_LOG(JIT, "object cache: %s held more than %llu MB; removed %zu least recently used "
                  "kernels", dir, (unsigned long long)(limit >> 20), removed);
  }
  free(files);
}

/* mkdir -p */
static bool make_dirs(const char* dir) {
  char path[4096];
  int n = snprintf(path, sizeof(path), "%s", dir);
  if (n <= 0 || (size_t)n >= sizeof(path)) return false;
  for (char* p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return false;
    *p = '/';
  }
  return mkdir(path, 0755) == 0 || errno == EEXIST;
}

bool stax_jit_cache_store(const char* dir, const char* key, size_t key_size, const void* object,
                          size_t object_size) {
  char path[4096], temp[4200];
  if (!file_path(dir, key, key_size, path, sizeof(path)) || !make_dirs(dir)) {
    STAX_LOG(JIT, "object cache: cannot use folder %s", dir);
    return false;
  }
  static unsigned long long serial;
  unsigned long long unique = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED);
  snprintf(temp, sizeof(temp), "%s.tmp.%ld.%llu", path, (long)getpid(), unique);
  FILE* file = fopen(temp, "wb");
  if (!file) {
    STAX_LOG(JIT, "object cache: cannot write %s", temp);
    return false;
  }
  unsigned char header[HEADER_SIZE];
  memcpy(header, kMagic, 8);
  put_u64(header + 8, key_size);
  put_u64(header + 16, object_size);
  put_u64(header + 24, object_checksum(object, object_size));
  bool ok = fwrite(header, 1, HEADER_SIZE, file) == HEADER_SIZE &&
            fwrite(key, 1, key_size, file) == key_size &&
            fwrite(object, 1, object_size, file) == object_size;
  ok = fclose(file) == 0 && ok;
  if (ok) ok = rename(temp, path) == 0;
  if (!ok) {
    remove(temp);
    STAX_LOG(JIT, "object cache: writing %s failed", path);
  }
  /* Keep the folder bounded: a scan now and then (the first store of a process, then every
   * 64th), not at every store. */
  if (ok && unique % 64 == 1) stax_jit_cache_trim(dir, stax_jit_cache_limit_bytes());
  return ok;
}
