/* Memory planning, the context side (docs/memory.md): the per-context arena, the per-call
 * layout, placing planned values in it, and the checks that keep a wrong plan from ever
 * corrupting memory.
 *
 * Each planned value has one tensor header and one buffer header owned by the frame, reused
 * every call, so placing a value allocates nothing: a steady-state call of a program without
 * data-dependent sizes makes no allocator call for its temporaries. The headers' allocator
 * frees nothing; when a header's last reference goes it simply becomes reusable.
 *
 * Placement is refused (the value then comes from the pool, as without a plan) when:
 *   - the value runs on the JIT's segment path (ctx->plan_bypass): a compiled segment
 *     allocates its outputs up front and frees at its end, an order the plan does not model;
 *   - its size this call exceeds what the layout evaluated at the start of the call (a
 *     program that rebinds a guard symbol);
 *   - its headers are still referenced, or the value its slot held before is (a view or a
 *     move outlived the range the plan computed), unless that is the value it takes over
 *     in place.
 * None of these happens for a compiled program; the counters report them (fallbacks). */
#include <stdlib.h>
#include <string.h>

#include "vm/context.h"

#if defined(__SANITIZE_ADDRESS__)
#define STAX_VM_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STAX_VM_ARENA_ASAN 1
#endif
#endif
#ifdef STAX_VM_ARENA_ASAN
#include <sanitizer/asan_interface.h>
/* A dead value's bytes are poisoned until the next value of its slot is placed, so a read
 * through a stale pointer, or an overlap the plan should not have allowed, is reported. */
#define STAX_VM_ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define STAX_VM_ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define STAX_VM_ARENA_POISON(p, n) ((void)(p), (void)(n))
#define STAX_VM_ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

typedef struct stax_vm_arena_owner_t {
  stax_vm_memory_frame_t* frame;
  int32_t value;
} stax_vm_arena_owner_t;

struct stax_vm_memory_frame_s {
  const stax_vm_memory_plan_t* plan;
  char* arena;
  size_t capacity;
  int64_t* value_bytes;  /* this call; -1: not placed */
  int64_t* slot_offsets;
  int64_t* slot_bytes;
  int32_t* slot_occupant; /* the value placed in the slot last this call, -1 */
  struct stax_tensor_s* tensors;
  struct stax_buffer_s* buffers;
  stax_vm_arena_owner_t* owners;
  uint64_t peak_bytes;
  bool broken;    /* a value escaped once: never place again in this context */
  bool laid_out;  /* this call's layout is evaluated (stax_vm_memory_lay_out) */
};

/* Headers the frame owns are never freed through their allocator. */
static void* stax_vm_arena_header_fn(void* self, void* ptr, size_t old_size, size_t new_size,
                                     size_t alignment) {
  (void)self, (void)ptr, (void)old_size, (void)new_size, (void)alignment;
  return NULL;
}
static const stax_allocator_t stax_vm_arena_headers = {NULL, stax_vm_arena_header_fn};

/* The buffer's last reference went: its bytes are dead until the slot's next value. */
static void stax_vm_arena_release(void* opaque, void* data) {
  stax_vm_arena_owner_t* owner = opaque;
  stax_vm_memory_frame_t* frame = owner->frame;
  int32_t v = owner->value;
  /* An in-place successor may already live in these bytes. */
  if (frame->slot_occupant[frame->plan->values[v].slot] == v)
    STAX_VM_ARENA_POISON(data, frame->buffers[v].size);
  (void)data;
}

#define STAX_VM_FRAME_ARRAYS(X)                          \
  X(value_bytes, plan->value_count)                      \
  X(slot_offsets, plan->slot_count)                      \
  X(slot_bytes, plan->slot_count)                        \
  X(slot_occupant, plan->slot_count)                     \
  X(tensors, plan->value_count)                          \
  X(buffers, plan->value_count)                          \
  X(owners, plan->value_count)

void stax_vm_memory_frame_destroy(stax_context_t* ctx, stax_vm_memory_frame_t* frame) {
  if (!frame) return;
  const stax_vm_memory_plan_t* plan = frame->plan;
  if (frame->arena) {
    STAX_VM_ARENA_UNPOISON(frame->arena, frame->capacity);
    stax_allocator_free_aligned(ctx->allocator, frame->arena, frame->capacity,
                                STAX_VM_PLAN_ALIGNMENT);
  }
#define STAX_VM_FRAME_FREE(field, count)                                                       \
  if (frame->field)                                                                            \
    stax_allocator_free(ctx->allocator, frame->field,                                          \
                        (size_t)((count) > 0 ? (count) : 1) * sizeof(*frame->field));
  STAX_VM_FRAME_ARRAYS(STAX_VM_FRAME_FREE)
#undef STAX_VM_FRAME_FREE
  stax_allocator_free(ctx->allocator, frame, sizeof(*frame));
}

stax_status_t stax_vm_memory_frame_create(stax_context_t* ctx, stax_vm_memory_frame_t** out_frame) {
  *out_frame = NULL;
  const stax_vm_memory_plan_t* plan = ctx->program->memory_plan;
  if (!plan || plan->value_count == 0) return STAX_OK;
  stax_vm_memory_frame_t* frame = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(ctx->allocator, 1, sizeof(*frame), (void**)&frame),
                       "memory plan arena");
  frame->plan = plan;
  stax_status_t status = STAX_OK;
#define STAX_VM_FRAME_ALLOC(field, count)                                                      \
  STAX_GOTO_IF_ERROR(status,                                                                   \
                     stax_allocator_calloc(ctx->allocator, (size_t)((count) > 0 ? (count) : 1), \
                                           sizeof(*frame->field), (void**)&frame->field),      \
                     fail);
  STAX_VM_FRAME_ARRAYS(STAX_VM_FRAME_ALLOC)
#undef STAX_VM_FRAME_ALLOC
  for (int32_t v = 0; v < plan->value_count; v++) {
    atomic_init(&frame->tensors[v].refcount, 0);
    atomic_init(&frame->buffers[v].refcount, 0);
    atomic_init(&frame->buffers[v].derived, NULL);
    frame->owners[v] = (stax_vm_arena_owner_t){frame, v};
  }
  *out_frame = frame;
  return STAX_OK;
fail:
  stax_vm_memory_frame_destroy(ctx, frame);
  return status;
}

/* The layout of this call: slot sizes and offsets from the symbols the guards bound, and an
 * arena large enough. Evaluated at the call's first placement rather than at its start, so a
 * call whose planned values all run on the JIT's path (every segment compiled) evaluates no
 * layout and touches no arena. */
static stax_status_t stax_vm_memory_lay_out(stax_context_t* ctx, stax_vm_memory_frame_t* frame) {
  if (frame->laid_out) return STAX_OK;
  const stax_vm_memory_plan_t* plan = frame->plan;
  int64_t need = 0;
  stax_vm_memory_plan_layout(ctx->program, ctx->symbols, frame->value_bytes, frame->slot_offsets,
                             frame->slot_bytes, &need);
  for (int32_t s = 0; s < plan->slot_count; s++) frame->slot_occupant[s] = -1;
  ctx->memory_counters.arena_bytes = (uint64_t)need;
  if ((uint64_t)need > frame->peak_bytes) frame->peak_bytes = (uint64_t)need;
  if ((size_t)need > frame->capacity || !frame->arena) {
    /* Every planned value of the last call is dead (stax_vm_memory_end_call checked), so the
     * old arena goes without copying. Rounded to whole pages so shapes that differ a little
     * do not grow it every call. */
    size_t capacity = ((size_t)need + 4095) & ~(size_t)4095;
    if (capacity == 0) capacity = 4096;
    if (frame->arena) {
      STAX_VM_ARENA_UNPOISON(frame->arena, frame->capacity);
      stax_allocator_free_aligned(ctx->allocator, frame->arena, frame->capacity,
                                  STAX_VM_PLAN_ALIGNMENT);
      frame->arena = NULL;
      frame->capacity = 0;
    }
    void* arena = NULL;
    STAX_RETURN_IF_ERROR(stax_allocator_malloc_aligned(ctx->allocator, capacity,
                                                       STAX_VM_PLAN_ALIGNMENT, &arena),
                         "memory plan: the arena for this call's shapes (%zu bytes)", capacity);
    frame->arena = arena;
    frame->capacity = capacity;
    ctx->memory_counters.arena_grows++;
  }
  STAX_VM_ARENA_POISON(frame->arena, frame->capacity);
  frame->laid_out = true;
  return STAX_OK;
}

stax_status_t stax_vm_memory_begin_call(stax_context_t* ctx) {
  stax_vm_memory_frame_t* frame = ctx->memory;
  if (frame) frame->laid_out = false;
  return STAX_OK;
}

stax_status_t stax_vm_memory_end_call(stax_context_t* ctx) {
  stax_vm_memory_frame_t* frame = ctx->memory;
  if (!frame) return STAX_OK;
  const stax_vm_memory_plan_t* plan = frame->plan;
  for (int32_t v = 0; v < plan->value_count; v++) {
    if (atomic_load(&frame->tensors[v].refcount) == 0 &&
        atomic_load(&frame->buffers[v].refcount) == 0)
      continue;
    /* Something outside the frame holds arena memory: the plan's analysis missed an alias.
     * Placing again could overwrite it, so this context stops using the plan. */
    frame->broken = true;
    int32_t reg = plan->values[v].reg;
    return stax_status_make(STAX_INTERNAL,
                            "memory plan: register %d '%s' is still referenced after the run "
                            "(it escaped the plan)",
                            reg, stax_vm_register_name(ctx->program, reg));
  }
  return STAX_OK;
}

stax_status_t stax_vm_memory_place(stax_context_t* ctx, int32_t reg, stax_dtype_t dtype,
                                   int32_t rank, const int64_t* dims, size_t bytes,
                                   stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  stax_vm_memory_frame_t* frame = ctx->memory;
  if (!frame || frame->broken) return STAX_OK;
  const stax_vm_memory_plan_t* plan = frame->plan;
  int32_t v = plan->value_of_register[reg];
  if (v < 0) return STAX_OK;
  const stax_vm_planned_value_t* value = &plan->values[v];
  if (ctx->plan_bypass > 0) {
    ctx->memory_counters.fallbacks++;
    return STAX_OK;
  }
  STAX_RETURN_IF_ERROR(stax_vm_memory_lay_out(ctx, frame));
  /* What the register held goes now rather than after this allocation (no difference to
   * the program), so a header it holds can be reused. */
  stax_vm_take_register(ctx, reg, NULL);
  struct stax_tensor_s* tensor = &frame->tensors[v];
  struct stax_buffer_s* buffer = &frame->buffers[v];
  int32_t occupant = frame->slot_occupant[value->slot];
  bool refused = frame->value_bytes[v] < 0 ||
                 bytes > (uint64_t)frame->value_bytes[v] ||
                 atomic_load(&tensor->refcount) != 0 || atomic_load(&buffer->refcount) != 0;
  bool inplace = occupant >= 0 && occupant == value->inplace_of &&
                 atomic_load(&frame->buffers[occupant].refcount) != 0;
  if (!refused && occupant >= 0 && occupant != v && !inplace &&
      atomic_load(&frame->buffers[occupant].refcount) != 0)
    refused = true;
  if (refused) {
    ctx->memory_counters.fallbacks++;
    return STAX_OK;
  }
  if (inplace) ctx->memory_counters.inplace++;
  char* data = frame->arena + frame->slot_offsets[value->slot];
  STAX_VM_ARENA_UNPOISON(data, bytes);
  memset(buffer, 0, sizeof(*buffer));
  atomic_init(&buffer->refcount, 1);
  atomic_init(&buffer->derived, NULL);
  buffer->data = data;
  buffer->size = bytes;
  buffer->capacity = (size_t)frame->slot_bytes[value->slot];
  buffer->allocator = stax_vm_arena_headers;
  buffer->release = stax_vm_arena_release;
  buffer->release_ctx = &frame->owners[v];
  memset(tensor, 0, sizeof(*tensor));
  atomic_init(&tensor->refcount, 1);
  tensor->allocator = stax_vm_arena_headers;
  tensor->buffer = buffer; /* the tensor holds the buffer's one reference */
  tensor->dtype = dtype;
  tensor->rank = rank;
  for (int32_t d = 0; d < rank; d++) tensor->dims[d] = dims[d];
  stax_shape_contiguous_strides(rank, dims, tensor->strides);
  frame->slot_occupant[value->slot] = v;
  *out_tensor = tensor;
  return STAX_OK;
}

uint64_t stax_vm_memory_arena_capacity(const stax_vm_memory_frame_t* frame) {
  return frame ? frame->capacity : 0;
}

uint64_t stax_vm_memory_peak_bytes(const stax_vm_memory_frame_t* frame) {
  return frame ? frame->peak_bytes : 0;
}
