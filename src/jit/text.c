/* The JIT's growable text buffer (see text.h). Strings handed out carry no size header, so
 * they are freed with strlen + 1 as the size, which is what the allocator interface wants. */
#include "jit/text.h"

#include <stdio.h>
#include <string.h>

void stax_jit_text_init(stax_jit_text_t* text, stax_allocator_t allocator) {
  memset(text, 0, sizeof(*text));
  text->allocator = allocator;
}

static bool text_reserve(stax_jit_text_t* text, size_t extra) {
  if (text->failed) return false;
  size_t needed = text->length + extra + 1;
  if (needed <= text->capacity) return true;
  size_t capacity = text->capacity ? text->capacity : 256;
  while (capacity < needed) capacity *= 2;
  void* data = text->allocator.fn(text->allocator.self, text->data, text->capacity, capacity, 0);
  if (!data) {
    text->failed = true;
    return false;
  }
  text->data = data;
  text->capacity = capacity;
  return true;
}

void stax_jit_text_append(stax_jit_text_t* text, const char* piece) {
  size_t n = strlen(piece);
  if (!text_reserve(text, n)) return;
  memcpy(text->data + text->length, piece, n + 1);
  text->length += n;
}

void stax_jit_text_appendv(stax_jit_text_t* text, const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0 || !text_reserve(text, (size_t)n)) return;
  vsnprintf(text->data + text->length, (size_t)n + 1, fmt, args);
  text->length += (size_t)n;
}

void stax_jit_text_appendf(stax_jit_text_t* text, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  stax_jit_text_appendv(text, fmt, args);
  va_end(args);
}

void stax_jit_text_reset(stax_jit_text_t* text) {
  if (text->data) text->allocator.fn(text->allocator.self, text->data, text->capacity, 0, 0);
  stax_allocator_t allocator = text->allocator;
  stax_jit_text_init(text, allocator);
}

stax_status_t stax_jit_text_finish(stax_jit_text_t* text, char** out_text) {
  *out_text = NULL;
  if (text->failed) {
    stax_jit_text_reset(text);
    return stax_status_make(STAX_OUT_OF_MEMORY, "out of memory building JIT text");
  }
  /* Copy at the exact size so the string can be freed knowing only strlen. */
  stax_status_t status =
      stax_jit_text_copy(text->allocator, text->data ? text->data : "", out_text);
  stax_jit_text_reset(text);
  return status;
}

stax_status_t stax_jit_text_copy(stax_allocator_t allocator, const char* source, char** out_text) {
  *out_text = NULL;
  size_t n = strlen(source);
  void* data = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, n + 1, &data));
  memcpy(data, source, n + 1);
  *out_text = data;
  return STAX_OK;
}

void stax_jit_text_free_string(stax_allocator_t allocator, char* text) {
  if (text) stax_allocator_free(allocator, text, strlen(text) + 1);
}
