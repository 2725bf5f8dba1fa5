/* The host-function registry CALL_FUNC resolves names through: a small fixed table guarded by
 * a mutex. Programs store function names (so they serialize); contexts resolve them once at
 * creation, so the dispatch loop calls through a plain pointer. A fixed table allocates
 * nothing, so there is nothing to leak or to fail. */
#include <pthread.h>
#include <string.h>

#include "vm/functions.h"
#include "vm/program.h" /* STAX_VM_JIT_FUNCTION */

#define STAX_VM_FUNCTION_SLOTS 128
#define STAX_VM_FUNCTION_NAME_MAX 64

typedef struct stax_vm_function_slot_t {
  char name[STAX_VM_FUNCTION_NAME_MAX];
  stax_vm_host_fn fn;
  void* user_data;
} stax_vm_function_slot_t;

static stax_vm_function_slot_t stax_vm_function_slots[STAX_VM_FUNCTION_SLOTS];
static pthread_mutex_t stax_vm_function_lock = PTHREAD_MUTEX_INITIALIZER;

static stax_vm_function_slot_t* stax_vm_function_find(const char* name) {
  for (int32_t i = 0; i < STAX_VM_FUNCTION_SLOTS; i++)
    if (stax_vm_function_slots[i].fn && strcmp(stax_vm_function_slots[i].name, name) == 0)
      return &stax_vm_function_slots[i];
  return NULL;
}

stax_status_t stax_vm_register_function(const char* name, stax_vm_host_fn fn, void* user_data) {
  if (!name || !name[0] || !fn)
    return stax_status_make(STAX_INVALID_ARGUMENT, "a host function needs a name and a pointer");
  if (strlen(name) >= STAX_VM_FUNCTION_NAME_MAX)
    return stax_status_make(STAX_INVALID_ARGUMENT, "host function name '%s' is longer than %d bytes",
                            name, STAX_VM_FUNCTION_NAME_MAX - 1);
  if (strcmp(name, STAX_VM_JIT_FUNCTION) == 0)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "host function name '%s' is reserved for the JIT's segment calls", name);
  pthread_mutex_lock(&stax_vm_function_lock);
  stax_vm_function_slot_t* slot = stax_vm_function_find(name);
  for (int32_t i = 0; !slot && i < STAX_VM_FUNCTION_SLOTS; i++)
    if (!stax_vm_function_slots[i].fn) slot = &stax_vm_function_slots[i];
  if (slot) {
    strcpy(slot->name, name);
    slot->fn = fn;
    slot->user_data = user_data;
  }
  pthread_mutex_unlock(&stax_vm_function_lock);
  if (!slot)
    return stax_status_make(STAX_OUT_OF_RANGE, "no room for host function '%s' (%d registered)",
                            name, STAX_VM_FUNCTION_SLOTS);
  return STAX_OK;
}

void stax_vm_unregister_function(const char* name) {
  if (!name) return;
  pthread_mutex_lock(&stax_vm_function_lock);
  stax_vm_function_slot_t* slot = stax_vm_function_find(name);
  if (slot) memset(slot, 0, sizeof(*slot));
  pthread_mutex_unlock(&stax_vm_function_lock);
}

bool stax_vm_lookup_function(const char* name, stax_vm_host_fn* out_fn, void** out_user_data) {
  *out_fn = NULL;
  *out_user_data = NULL;
  if (!name) return false;
  pthread_mutex_lock(&stax_vm_function_lock);
  stax_vm_function_slot_t* slot = stax_vm_function_find(name);
  if (slot) {
    *out_fn = slot->fn;
    *out_user_data = slot->user_data;
  }
  pthread_mutex_unlock(&stax_vm_function_lock);
  return slot != NULL;
}
