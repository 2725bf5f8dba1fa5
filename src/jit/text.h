/* A growable text buffer for the JIT's printers (kernel IR, LLVM IR, assembly): appends never
 * fail loudly; an allocation failure is remembered and reported once by stax_jit_text_finish. */
#ifndef STAX_JIT_TEXT_H_
#define STAX_JIT_TEXT_H_

#include <stdarg.h>

#include "stax/base.h"

typedef struct stax_jit_text_t {
  stax_allocator_t allocator;
  char* data; /* NUL-terminated when non-NULL */
  size_t length;
  size_t capacity;
  bool failed;
} stax_jit_text_t;

void stax_jit_text_init(stax_jit_text_t* text, stax_allocator_t allocator);
void stax_jit_text_append(stax_jit_text_t* text, const char* piece);
void stax_jit_text_appendf(stax_jit_text_t* text, const char* fmt, ...) STAX_PRINTF(2, 3);
void stax_jit_text_appendv(stax_jit_text_t* text, const char* fmt, va_list args);
/* Hands the text over (*out_text: `length + 1` bytes from the allocator, free with
 * stax_jit_text_free_string) or returns OUT_OF_MEMORY; the buffer is reset either way. */
STAX_MUST_USE stax_status_t stax_jit_text_finish(stax_jit_text_t* text, char** out_text);
void stax_jit_text_reset(stax_jit_text_t* text);
/* Copies a C string with `allocator`; frees one made by this file. */
STAX_MUST_USE stax_status_t stax_jit_text_copy(stax_allocator_t allocator, const char* source,
                                               char** out_text);
void stax_jit_text_free_string(stax_allocator_t allocator, char* text);

#endif /* STAX_JIT_TEXT_H_ */
