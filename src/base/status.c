/* Status objects: an error code plus a message that grows context as it travels up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stax/base.h"

struct stax_status_s {
  stax_status_code_t code;
  bool is_static; /* the out-of-memory fallback below: never freed, never annotated */
  size_t length;
  char* message; /* NUL-terminated; points just past the struct, in the same block */
};

/* Returned when the message itself cannot be allocated, so making a status never fails. */
static char stax_oom_text_[] = "out of memory while reporting an error";
static struct stax_status_s stax_oom_status_ = {STAX_OUT_OF_MEMORY, true,
                                                sizeof(stax_oom_text_) - 1, stax_oom_text_};

static const char* const stax_status_code_names_[] = {
#define STAX_STATUS_CODE(name, text) text,
#include "stax/status_codes.def"
#undef STAX_STATUS_CODE
};

const char* stax_status_code_name(stax_status_code_t code) {
  if ((int)code < 0 || code >= STAX_STATUS_CODE_COUNT) return "unknown";
  return stax_status_code_names_[code];
}

stax_status_t stax_status_makev(stax_status_code_t code, const char* fmt, va_list args) {
  if (code == STAX_OK_CODE) code = STAX_INTERNAL; /* an error status always reports an error */
  va_list copy;
  va_copy(copy, args);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0) n = 0;
  struct stax_status_s* s = malloc(sizeof(*s) + (size_t)n + 1);
  if (!s) return &stax_oom_status_;
  s->code = code;
  s->is_static = false;
  s->length = (size_t)n;
  s->message = (char*)(s + 1);
  vsnprintf(s->message, (size_t)n + 1, fmt, args);
  return s;
}

stax_status_t stax_status_make(stax_status_code_t code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  stax_status_t s = stax_status_makev(code, fmt, args);
  va_end(args);
  return s;
}

stax_status_t stax_status_annotate(stax_status_t status, const char* fmt, ...) {
  if (status == STAX_OK || fmt == NULL || fmt[0] == '\0' || status->is_static) return status;
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(NULL, 0, fmt, args);
  va_end(args);
  if (n <= 0) return status;
  size_t total = (size_t)n + 2 + status->length;
  struct stax_status_s* s = malloc(sizeof(*s) + total + 1);
  if (!s) return status; /* keep the inner message rather than lose it */
  s->code = status->code;
  s->is_static = false;
  s->length = total;
  s->message = (char*)(s + 1);
  va_start(args, fmt);
  vsnprintf(s->message, (size_t)n + 1, fmt, args);
  va_end(args);
  memcpy(s->message + n, ": ", 2);
  memcpy(s->message + n + 2, status->message, status->length + 1);
  free(status);
  return s;
}

stax_status_code_t stax_status_code(stax_status_t status) {
  return status ? status->code : STAX_OK_CODE;
}

const char* stax_status_message(stax_status_t status) {
  return status ? status->message : "";
}

void stax_status_free(stax_status_t status) {
  if (status && !status->is_static) free(status);
}

stax_status_code_t stax_status_consume_code(stax_status_t status) {
  stax_status_code_t code = stax_status_code(status);
  stax_status_free(status);
  return code;
}
