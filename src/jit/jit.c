/* The backend-neutral JIT: the process-wide backend handle, compiling (lower, verify, hand to
 * the backend, keep what running needs), running stages over the thread pool, kernel
 * lifetime and statistics. See jit.h for the contract. */
#include "jit/jit.h"
#include "base/hash_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "jit/backend.h"
#include "jit/kernel_ir.h"
#include "jit/lower.h"
#include "jit/text.h"
#include "runtime/tensor_internal.h"

struct stax_jit_backend_s {
  const stax_jit_backend_vtable_t* vtable;
  void* self;
  stax_jit_target_info_t target;
};

/* What running needs to know about one kernel IR buffer. */
typedef struct kernel_buffer_t {
  stax_kir_buffer_role_t role;
  stax_dtype_t dtype;
  int32_t rank;
  int64_t dims[STAX_MAX_RANK];
  int64_t strides[STAX_MAX_RANK];
  int64_t lowest, highest;
  bool rows; /* rows-generic: dims[0] is the row count */
  const char* name; /* in the kernel's name block */
} kernel_buffer_t;

typedef struct kernel_stage_t {
  bool parallel;
  int64_t extent;
  int64_t grain;
  int32_t fills, source; /* a stage filling scratch `fills` from constant input `source` */
  uint64_t fill_key;
  int32_t extent_param;      /* rows-generic: the parallel extent is this parameter, or -1 */
  int64_t parallel_min_rows; /* rows-generic: serial below this many rows */
  int64_t run_min_rows, run_max_rows; /* rows-generic: runs only for these row counts */
  int32_t when_param[2];              /* symbolic: runs only while these conditions hold */
  int64_t when_min[2], when_max[2];
} kernel_stage_t;

/* Symbolic kernels: parameter tuples already verified (or refused), direct-mapped by the
 * tuple's hash. A stream of shapes cycles through more tuples than a small ring holds (58
 * small BERT shapes walked the IR again on every call, about 40 us of a 1-4 ms call). */
#define VERIFIED_SLOTS 256

struct stax_jit_kernel_s {
  atomic_int refcount;
  stax_allocator_t allocator;
  stax_jit_backend_t* backend;
  char* name;
  stax_jit_code_t code;
  int32_t input_count, output_count, scratch_count;
  int32_t buffer_count;
  kernel_buffer_t* buffers;
  int32_t stage_count;
  kernel_stage_t* stages;
  bool in_place_safe;
  /* Rows-generic kernels: the row count R comes from the `rows` arguments at run time; the
   * parameters are functions of it (kernel_ir.h). */
  bool rows_generic;
  int64_t rows_min, rows_max;
  int32_t param_count;
  stax_kir_param_t params[STAX_KIR_MAX_PARAMS];
  /* Symbolic kernels: the kernel IR is kept, to evaluate parameters and verify each new
   * tuple of them before running it (kernel_ir.h); `verified` holds VERIFIED_SLOTS tuples of
   * param_count values (slot = hash of the tuple), `verdict` whether each passed, `filled`
   * whether the slot holds one. */
  bool symbolic;
  stax_kir_kernel_t* kir;
  pthread_mutex_t verified_lock;
  int64_t* verified;
  bool verdict[VERIFIED_SLOTS];
  bool filled[VERIFIED_SLOTS];
  char* kernel_ir_text;
  double lower_ms, compile_ms;
};

/* ---- statistics -------------------------------------------------------------------------- */

static atomic_uint_fast64_t stats_compiled, stats_not_fusible, stats_failed, stats_live;
static atomic_uint_fast64_t stats_compile_micros, stats_cache_loads;

stax_jit_stats_t stax_jit_stats(void) {
  stax_jit_stats_t stats = {
      .compiled = atomic_load(&stats_compiled),
      .not_fusible = atomic_load(&stats_not_fusible),
      .failed = atomic_load(&stats_failed),
      .live_kernels = atomic_load(&stats_live),
      .total_compile_ms = (double)atomic_load(&stats_compile_micros) / 1000.0,
      .cache_loads = atomic_load(&stats_cache_loads),
  };
  return stats;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the backend ------------------------------------------------------------------------- */

static struct stax_jit_backend_s the_backend;
static pthread_once_t backend_once = PTHREAD_ONCE_INIT;
static stax_status_t backend_status = STAX_OK;

/* Runs once, when something first wants the JIT (a context with the JIT on compiling, build
 * info). Without a backend every call interprets, several times slower: that is said once on
 * stderr rather than left for the user to discover. STAX_JIT_BACKEND=none switches the
 * backend off as a build without LLVM has it (tests of that path, comparisons). */
static void backend_start(void) {
  const char* wanted = getenv("STAX_JIT_BACKEND");
  if (wanted && strcmp(wanted, "none") == 0) {
    backend_status = stax_status_make(STAX_UNIMPLEMENTED,
                                      "the JIT backend is switched off (STAX_JIT_BACKEND=none)");
  } else {
    backend_status = stax_llvm_backend_start(&the_backend.vtable, &the_backend.self);
  }
  if (backend_status == STAX_OK) {
    the_backend.target = the_backend.vtable->target(the_backend.self);
  } else {
    fprintf(stderr, "stax: warning: the JIT is unavailable, so every call is interpreted: %s\n",
            stax_status_message(backend_status));
  }
}

stax_status_t stax_jit_backend_get(stax_jit_backend_t** out_backend) {
  *out_backend = NULL;
  pthread_once(&backend_once, backend_start);
  if (backend_status != STAX_OK)
    return stax_status_make(stax_status_code(backend_status), "%s",
                            stax_status_message(backend_status));
  *out_backend = &the_backend;
  return STAX_OK;
}

stax_jit_target_info_t stax_jit_backend_target(const stax_jit_backend_t* backend) {
  return backend->target;
}

/* ---- compiling --------------------------------------------------------------------------- */

static void kernel_free(stax_jit_kernel_t* kernel) {
  stax_allocator_t a = kernel->allocator;
  if (kernel->code.handle || kernel->code.stages)
    kernel->backend->vtable->release(kernel->backend->self, &kernel->code, a);
  for (int32_t b = 0; b < kernel->buffer_count; b++)
    stax_jit_text_free_string(a, (char*)kernel->buffers[b].name);
  stax_allocator_free(a, kernel->buffers,
                      sizeof(kernel_buffer_t) * (size_t)(kernel->buffer_count + 1));
  stax_allocator_free(a, kernel->stages,
                      sizeof(kernel_stage_t) * (size_t)(kernel->stage_count + 1));
  stax_jit_text_free_string(a, kernel->name);
  stax_jit_text_free_string(a, kernel->kernel_ir_text);
  if (kernel->symbolic) {
    stax_kir_kernel_destroy(kernel->kir);
    stax_allocator_free(a, kernel->verified,
                        sizeof(int64_t) * VERIFIED_SLOTS * (size_t)(kernel->param_count + 1));
    pthread_mutex_destroy(&kernel->verified_lock);
  }
  stax_allocator_free(a, kernel, sizeof(*kernel));
}

/* Copies what running needs out of the kernel IR (which is not kept). */
static stax_status_t kernel_describe(stax_jit_kernel_t* kernel, const stax_kir_kernel_t* kir) {
  stax_allocator_t a = kernel->allocator;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, (size_t)kir->buffer_count + 1,
                                             sizeof(kernel_buffer_t), (void**)&kernel->buffers));
  kernel->buffer_count = kir->buffer_count;
  for (int32_t b = 0; b < kir->buffer_count; b++) {
    const stax_kir_buffer_t* source = kir->buffers[b];
    kernel_buffer_t* target = &kernel->buffers[b];
    target->role = source->role;
    target->dtype = source->dtype;
    target->rank = source->rank;
    memcpy(target->dims, source->dims, sizeof(target->dims));
    memcpy(target->strides, source->strides, sizeof(target->strides));
    target->lowest = source->lowest;
    target->highest = source->highest;
    target->rows = source->rows;
    char* name = NULL;
    STAX_RETURN_IF_ERROR(stax_jit_text_copy(a, source->name, &name));
    target->name = name;
    if (source->role == STAX_KIR_BUFFER_INPUT) kernel->input_count++;
    if (source->role == STAX_KIR_BUFFER_OUTPUT) kernel->output_count++;
    if (source->role == STAX_KIR_BUFFER_SCRATCH) kernel->scratch_count++;
    /* Inputs, then outputs, then scratch (the roles' order): the run functions index
     * arguments so. */
    if (b > 0 && source->role < kir->buffers[b - 1]->role)
      return stax_status_make(STAX_INVALID_ARGUMENT,
                              "kernel '%s': buffers must be inputs, then outputs, then scratch",
                              kir->name);
  }
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, (size_t)kir->stage_count + 1,
                                             sizeof(kernel_stage_t), (void**)&kernel->stages));
  kernel->stage_count = kir->stage_count;
  for (int32_t s = 0; s < kir->stage_count; s++) {
    kernel->stages[s].fills = kir->stages[s]->fills;
    kernel->stages[s].source = kir->stages[s]->source;
    kernel->stages[s].fill_key = kir->stages[s]->fill_key;
    kernel->stages[s].extent_param = -1;
    kernel->stages[s].parallel_min_rows = kir->stages[s]->parallel_min_rows;
    kernel->stages[s].run_min_rows = kir->stages[s]->run_min_rows;
    kernel->stages[s].run_max_rows = kir->stages[s]->run_max_rows;
    for (int32_t c = 0; c < 2; c++) {
      kernel->stages[s].when_param[c] = kir->stages[s]->when_param[c];
      kernel->stages[s].when_min[c] = kir->stages[s]->when_min[c];
      kernel->stages[s].when_max[c] = kir->stages[s]->when_max[c];
    }
    const stax_kir_stmt_t* first = kir->stages[s]->body.first;
    if (first && !first->next && first->kind == STAX_KIR_STMT_LOOP &&
        kir->loops[first->loop]->parallel) {
      kernel->stages[s].parallel = true;
      kernel->stages[s].extent = kir->loops[first->loop]->extent;
      kernel->stages[s].extent_param = kir->loops[first->loop]->extent_param;
      kernel->stages[s].grain = kir->loops[first->loop]->grain;
    }
  }
  kernel->in_place_safe = kir->in_place_safe;
  kernel->rows_generic = kir->rows_generic;
  kernel->rows_min = kir->rows_min;
  kernel->rows_max = kir->rows_max;
  kernel->param_count = kir->param_count;
  memcpy(kernel->params, kir->params, sizeof(kernel->params));
  for (int32_t p = 0; p < kir->param_count; p++) kernel->params[p].name = NULL; /* arena's */
  return STAX_OK;
}

static stax_status_t compile_verified(stax_jit_backend_t* backend, const stax_kir_kernel_t* kir,
                                      const stax_jit_compile_options_t* options, double lower_ms,
                                      stax_jit_kernel_t** out_kernel) {
  stax_allocator_t a = stax_allocator_system();
  stax_jit_kernel_t* kernel = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_calloc(a, 1, sizeof(*kernel), (void**)&kernel));
  atomic_init(&kernel->refcount, 1);
  kernel->allocator = a;
  kernel->backend = backend;
  kernel->lower_ms = lower_ms;
  stax_status_t status = STAX_OK;
  STAX_GOTO_IF_ERROR(status, stax_jit_text_copy(a, kir->name, &kernel->name), fail);
  STAX_GOTO_IF_ERROR(status, kernel_describe(kernel, kir), fail);
  if (options && options->keep_kernel_ir)
    STAX_GOTO_IF_ERROR(status, stax_kir_print(kir, a, &kernel->kernel_ir_text), fail);
  double start = now_ms();
  STAX_GOTO_IF_ERROR(status,
                     backend->vtable->compile(backend->self, kir, options, a, &kernel->code), fail,
                     "while compiling kernel '%s'", kir->name);
  kernel->compile_ms = now_ms() - start;
  if (kernel->code.stage_count != kir->stage_count) {
    status = stax_status_make(STAX_INTERNAL, "backend returned %d stages for %d",
                              (int)kernel->code.stage_count, (int)kir->stage_count);
    goto fail;
  }
  atomic_fetch_add(&stats_compiled, 1);
  if (kernel->code.from_cache) atomic_fetch_add(&stats_cache_loads, 1);
  atomic_fetch_add(&stats_live, 1);
  atomic_fetch_add(&stats_compile_micros,
                   (uint_fast64_t)((kernel->compile_ms + lower_ms) * 1000.0));
  STAX_LOG(JIT, "compiled kernel '%s': lower %.2f ms, LLVM %.2f ms", kir->name, lower_ms,
           kernel->compile_ms);
  *out_kernel = kernel;
  return STAX_OK;
fail:
  kernel_free(kernel);
  return status;
}

static void default_options(const stax_jit_compile_options_t* options,
                            stax_jit_compile_options_t* out) {
  memset(out, 0, sizeof(*out));
  if (options) *out = *options;
}

stax_status_t stax_jit_compile_kernel_ir(stax_jit_backend_t* backend, const stax_kir_kernel_t* kir,
                                         const stax_jit_compile_options_t* options,
                                         stax_jit_kernel_t** out_kernel) {
  *out_kernel = NULL;
  if (kir->symbolic)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "kernel IR '%s' is symbolic: compile it from a group (the kernel "
                            "keeps its IR to check each new shape)", kir->name);
  stax_status_t status = stax_kir_verify(kir);
  if (status == STAX_OK) status = compile_verified(backend, kir, options, 0.0, out_kernel);
  if (status != STAX_OK) atomic_fetch_add(&stats_failed, 1);
  return status;
}

stax_status_t stax_jit_compile_group(stax_jit_backend_t* backend, const stax_jit_group_t* group,
                                     const stax_jit_compile_options_t* options,
                                     stax_jit_kernel_t** out_kernel) {
  *out_kernel = NULL;
  stax_jit_compile_options_t opts;
  default_options(options, &opts);
  stax_jit_lower_options_t lower_options = {
      .vector_bits = opts.vector_bits ? opts.vector_bits : backend->target.vector_bits,
      .thread_count = opts.thread_count ? opts.thread_count
                                        : stax_threadpool_thread_count(stax_threadpool_default()),
      .has_fma = backend->target.has_fma,
  };
  if (lower_options.thread_count < 1) lower_options.thread_count = 1;
  double start = now_ms();
  stax_kir_kernel_t* kir = NULL;
  stax_status_t status = stax_jit_lower_group(group, &lower_options, stax_allocator_system(), &kir);
  double lower_ms = now_ms() - start;
  if (status != STAX_OK) {
    if (stax_status_code(status) == STAX_UNIMPLEMENTED) {
      atomic_fetch_add(&stats_not_fusible, 1);
      STAX_LOG(JIT, "not fusible: %s", stax_status_message(status));
    } else {
      atomic_fetch_add(&stats_failed, 1);
    }
    return status;
  }
  status = compile_verified(backend, kir, &opts, lower_ms, out_kernel);
  if (status != STAX_OK && !opts.cache_only) { /* a cache probe that missed did not fail */
    atomic_fetch_add(&stats_failed, 1);
    STAX_LOG(JIT, "compile failed: %s", stax_status_message(status));
  }
  if (status == STAX_OK && kir->symbolic) {
    stax_jit_kernel_t* kernel = *out_kernel;
    stax_allocator_t a = kernel->allocator;
    status = stax_allocator_calloc(a, VERIFIED_SLOTS * (size_t)(kir->param_count + 1),
                                   sizeof(int64_t), (void**)&kernel->verified);
    if (status == STAX_OK) {
      pthread_mutex_init(&kernel->verified_lock, NULL);
      kernel->symbolic = true;
      kernel->kir = kir; /* kept: see the struct */
      return STAX_OK;
    }
    stax_jit_kernel_release(kernel);
    *out_kernel = NULL;
  }
  stax_kir_kernel_destroy(kir);
  return status;
}

/* ---- running ----------------------------------------------------------------------------- */

typedef struct stage_call_t {
  stax_jit_stage_fn fn;
  void* const* buffers;
} stage_call_t;

static void stage_range(void* context, int64_t begin, int64_t end) {
  const stage_call_t* call = context;
  call->fn(call->buffers, begin, end);
}

/* Scratch buffers are the kernel IR's contiguous temporaries (packed panels), one pooled
 * allocation per run. */
#define MAX_STACK_BUFFERS 32
/* The most a symbolic kernel's scratch buffer may take at a call's sizes (kernel_run): 1 GiB,
 * or STAX_JIT_SCRATCH_MAX_MB. */
#define JIT_SCRATCH_MAX_BYTES ((size_t)1 << 30)

static size_t scratch_limit(void) {
  const char* text = getenv("STAX_JIT_SCRATCH_MAX_MB");
  long long mb = text ? atoll(text) : 0;
  return mb > 0 ? (size_t)mb << 20 : JIT_SCRATCH_MAX_BYTES;
}

/* Runs the kernel. prefilled (NULL, or per buffer): scratch buffers already filled (a packed
 * constant weight kept with it): they are used as they are and the stages filling them are
 * skipped. only_fill >= 0: run just the stages filling that buffer (into prefilled's).
 * values: a symbolic kernel's parameters (checked and verified), NULL otherwise. */
static stax_status_t kernel_run(stax_jit_kernel_t* kernel, void* const* data,
                                void* const* prefilled, int32_t only_fill, int64_t rows,
                                const int64_t* values, stax_threadpool_t* pool) {
  int32_t count = kernel->buffer_count;
  int32_t arguments = kernel->input_count + kernel->output_count;
  /* One slot more than the buffers: a rows-generic kernel finds its parameters there. */
  void* stack[MAX_STACK_BUFFERS + 1];
  void** buffers = stack;
  stax_buffer_t* scratch_stack[MAX_STACK_BUFFERS + 1];
  stax_buffer_t** scratch = scratch_stack;
  stax_status_t status = STAX_OK;
  if (count > MAX_STACK_BUFFERS) {
    STAX_RETURN_IF_ERROR(stax_allocator_calloc(kernel->allocator, (size_t)count + 1,
                                               sizeof(void*) + sizeof(stax_buffer_t*),
                                               (void**)&buffers));
    scratch = (stax_buffer_t**)(buffers + count + 1);
  }
  for (int32_t b = 0; b < count; b++) {
    scratch[b] = NULL;
    buffers[b] = b < arguments ? data[b] : NULL;
  }
  int64_t params[STAX_KIR_MAX_PARAMS] = {0};
  for (int32_t p = 0; p < kernel->param_count; p++)
    params[p] = values ? values[p] : stax_kir_param_value(&kernel->params[p], rows);
  buffers[count] = params;
  for (int32_t b = arguments; b < count && status == STAX_OK; b++) {
    if (prefilled && prefilled[b]) {
      buffers[b] = prefilled[b];
      continue;
    }
    if (only_fill >= 0) continue; /* the fill stages touch only their buffer */
    const kernel_buffer_t* info = &kernel->buffers[b];
    size_t bytes = (size_t)(info->highest + 1) * stax_dtype_size(info->dtype);
    if (values) { /* contiguous, of the size its parameters give */
      const stax_kir_buffer_t* source = kernel->kir->buffers[b];
      int64_t elements = 1;
      for (int32_t d = 0; d < source->rank; d++)
        elements *= stax_kir_buffer_dim_at(source, d, values);
      bytes = (size_t)elements * stax_dtype_size(info->dtype);
      /* A scratch that grows with the sizes (a conv's patches: taps x the input) is bounded:
       * past the bound the call declines and its group is interpreted. */
      size_t limit = bytes > ((size_t)1 << 20) ? scratch_limit() : bytes;
      if (bytes > limit) {
        status = stax_status_make(STAX_FAILED_PRECONDITION,
                                  "JIT kernel '%s': scratch '%s' would take %zu bytes at these "
                                  "sizes (more than %zu MiB)",
                                  kernel->name, info->name, bytes, limit >> 20);
        break;
      }
    }
    status = stax_buffer_allocate_pooled(bytes ? bytes : 1, &scratch[b]);
    if (status == STAX_OK) buffers[b] = stax_buffer_data(scratch[b]);
  }
  for (int32_t s = 0; s < kernel->code.stage_count && status == STAX_OK; s++) {
    const kernel_stage_t* stage = &kernel->stages[s];
    if (only_fill >= 0 ? stage->fills != only_fill
                       : stage->fills >= 0 && prefilled && prefilled[stage->fills])
      continue;
    if (kernel->rows_generic && (rows < stage->run_min_rows || rows > stage->run_max_rows))
      continue;
    bool skip = false;
    for (int32_t c = 0; c < 2 && values; c++) {
      int32_t p = stage->when_param[c];
      if (p >= 0 && (values[p] < stage->when_min[c] || values[p] > stage->when_max[c])) skip = true;
    }
    if (skip) continue;
    stage_call_t call = {kernel->code.stages[s], buffers};
    if (stage->parallel) {
      int64_t extent = stage->extent_param >= 0 ? params[stage->extent_param] : stage->extent;
      if (extent > 0 && !values && rows < stage->parallel_min_rows)
        call.fn(buffers, 0, extent); /* too little work to wake the pool */
      else if (extent > 0)
        stax_parallel_for(pool, extent, stage->grain, stage_range, &call);
    } else {
      call.fn(buffers, 0, 1);
    }
  }
  for (int32_t b = arguments; b < count; b++)
    if (scratch[b]) stax_buffer_release(scratch[b]);
  if (buffers != stack)
    stax_allocator_free(kernel->allocator, buffers,
                        ((size_t)count + 1) * (sizeof(void*) + sizeof(stax_buffer_t*)));
  return status;
}

stax_status_t stax_jit_kernel_run_data(stax_jit_kernel_t* kernel, void* const* data,
                                       stax_threadpool_t* pool) {
  if (kernel->rows_generic)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "JIT kernel '%s' is rows-generic: run it with stax_jit_kernel_run",
                            kernel->name);
  if (kernel->symbolic)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "JIT kernel '%s' is symbolic: run it with stax_jit_kernel_run",
                            kernel->name);
  return kernel_run(kernel, data, NULL, -1, 0, NULL, pool);
}

/* The filled form of scratch buffer `b` for this run's constant source, kept with the
 * constant's buffer (shared by every kernel version with the same layout: a weight is packed
 * once per program, not once per shape); NULL when the source is not an immutable buffer or
 * memory is short (the run then fills a scratch copy as usual). */
static const void* kernel_prefill(stax_jit_kernel_t* kernel, int32_t b, const kernel_stage_t* stage,
                                  stax_tensor_t* const* inputs, void* const* data, int64_t rows,
                                  stax_threadpool_t* pool) {
  const stax_tensor_t* source = inputs[stage->source];
  stax_buffer_t* owner = source->buffer;
  if (!owner || !owner->immutable || kernel->buffer_count > MAX_STACK_BUFFERS) return NULL;
  const kernel_buffer_t* info = &kernel->buffers[b];
  size_t bytes = (size_t)(info->highest + 1) * stax_dtype_size(info->dtype);
  if (bytes == 0) return NULL;
  uint64_t offset = (uint64_t)((const char*)data[stage->source] - (const char*)owner->data);
  uint64_t key = stax_hash_combine(stage->fill_key, offset);
  const void* kept = stax_buffer_derived_get(owner, key, bytes);
  if (kept) return kept;
  void* fresh = NULL;
  stax_status_t status = stax_allocator_malloc_aligned(stax_allocator_system(), bytes, 64, &fresh);
  if (status == STAX_OK) {
    void* prefilled[MAX_STACK_BUFFERS] = {0};
    prefilled[b] = fresh;
    status = kernel_run(kernel, data, prefilled, b, rows, NULL, pool);
    if (status != STAX_OK) stax_allocator_free_aligned(stax_allocator_system(), fresh, bytes, 64);
  }
  if (status != STAX_OK) {
    stax_status_free(status);
    return NULL;
  }
  return stax_buffer_derived_put(owner, key, fresh, bytes);
}

/* Runs the kernel with its constant-filled scratch (packed weights) made once and kept with
 * the constant, the other stages as usual; `values`: a symbolic kernel's parameters. */
static stax_status_t run_prefilled(stax_jit_kernel_t* kernel, stax_tensor_t* const* inputs,
                                   void* const* data, int64_t rows, const int64_t* values,
                                   stax_threadpool_t* pool) {
  void* prefilled[MAX_STACK_BUFFERS];
  bool any = false;
  if (kernel->buffer_count <= MAX_STACK_BUFFERS) {
    for (int32_t b = 0; b < kernel->buffer_count; b++) prefilled[b] = NULL;
    for (int32_t s = 0; s < kernel->stage_count; s++) {
      const kernel_stage_t* stage = &kernel->stages[s];
      if (stage->fills < 0 || prefilled[stage->fills]) continue;
      prefilled[stage->fills] =
          (void*)(uintptr_t)kernel_prefill(kernel, stage->fills, stage, inputs, data, rows, pool);
      any = any || prefilled[stage->fills];
    }
  }
  return kernel_run(kernel, data, any ? prefilled : NULL, -1, rows, values, pool);
}

/* A rows argument of a rows-generic kernel: the tensor's leading dims (all but the buffer's
 * last rank - 1) must walk as one row dim with the compiled row stride (each outer one
 * strides over the next; size-1 dims stride anyhow), and the rest must be the compiled dims
 * and strides. *out_rows: the product of the leading dims. */
static bool rows_tensor_fits(const kernel_buffer_t* info, const stax_tensor_t* tensor,
                             int64_t* out_rows) {
  int32_t tail = info->rank - 1;
  int32_t lead = tensor->rank - tail;
  if (tensor->dtype != info->dtype || lead < 1) return false;
  int64_t rows = 1, row_stride = 0;
  if (!stax_shape_lead_rows(lead, tensor->dims, tensor->strides, &rows, &row_stride) ||
      (row_stride != 0 && row_stride != info->strides[0]))
    return false;
  bool empty = rows == 0;
  for (int32_t d = 0; d < tail; d++) {
    int64_t dim = tensor->dims[lead + d];
    if (dim != info->dims[1 + d]) return false;
    if (dim == 0) empty = true;
  }
  for (int32_t d = 0; d < tail && !empty; d++)
    if (info->dims[1 + d] > 1 && tensor->strides[lead + d] != info->strides[1 + d]) return false;
  *out_rows = rows;
  return true;
}

static stax_status_t check_tensor(const stax_jit_kernel_t* kernel, int32_t index,
                                  const stax_tensor_t* tensor, int64_t* inout_rows) {
  const kernel_buffer_t* info = &kernel->buffers[index];
  const char* what = info->role == STAX_KIR_BUFFER_INPUT ? "input" : "output";
  int32_t position = info->role == STAX_KIR_BUFFER_INPUT ? index : index - kernel->input_count;
  if (!tensor)
    return stax_status_make(STAX_INVALID_ARGUMENT, "JIT kernel '%s': %s %d ('%s') is missing",
                            kernel->name, what, (int)position, info->name);
  if (info->rows) {
    int64_t rows = -1;
    if (!rows_tensor_fits(info, tensor, &rows))
      return stax_status_make(
          STAX_FAILED_PRECONDITION,
          "JIT kernel '%s': %s %d ('%s') is %s%s, which is not rows of %s%s with the compiled "
          "strides",
          kernel->name, what, (int)position, info->name, stax_dtype_name(tensor->dtype),
          stax_dims_text(tensor->rank, tensor->dims).text, stax_dtype_name(info->dtype),
          stax_dims_text(info->rank - 1, info->dims + 1).text);
    if (*inout_rows >= 0 && rows != *inout_rows)
      return stax_status_make(STAX_FAILED_PRECONDITION,
                              "JIT kernel '%s': %s %d ('%s') has %lld rows, an earlier argument "
                              "%lld",
                              kernel->name, what, (int)position, info->name, (long long)rows,
                              (long long)*inout_rows);
    *inout_rows = rows;
    return STAX_OK;
  }
  bool same = tensor->dtype == info->dtype && tensor->rank == info->rank;
  for (int32_t d = 0; same && d < info->rank; d++) {
    same = tensor->dims[d] == info->dims[d];
    /* A stride on a dim of size 1 (or in an empty tensor) is never used. */
    if (same && info->dims[d] > 1 && info->highest >= info->lowest)
      same = tensor->strides[d] == info->strides[d];
  }
  if (same) return STAX_OK;
  return stax_status_make(
      STAX_FAILED_PRECONDITION,
      "JIT kernel '%s': %s %d ('%s') is %s%s, compiled for %s%s with other "
      "strides or dims",
      kernel->name, what, (int)position, info->name, stax_dtype_name(tensor->dtype),
      stax_dims_text(tensor->rank, tensor->dims).text, stax_dtype_name(info->dtype),
      stax_dims_text(info->rank, info->dims).text);
}

/* Byte range [low, high) an argument touches (with `rows` rows when it is a rows buffer);
 * empty when the view is empty. */
static void byte_range(const kernel_buffer_t* info, const void* data, int64_t rows,
                       uintptr_t* low, uintptr_t* high) {
  int64_t lowest = info->lowest, highest = info->highest;
  if (info->rows) {
    int64_t dims[STAX_MAX_RANK];
    memcpy(dims, info->dims, sizeof(dims));
    dims[0] = rows;
    if (!stax_shape_extent(info->rank, dims, info->strides, &lowest, &highest)) highest = lowest - 1;
  }
  if (highest < lowest) {
    *low = *high = 0;
    return;
  }
  uintptr_t base = (uintptr_t)data;
  intptr_t size = (intptr_t)stax_dtype_size(info->dtype);
  *low = base + (uintptr_t)(lowest * size);
  *high = base + (uintptr_t)((highest + 1) * size);
}

/* Whether a symbolic kernel's accesses stay inside its buffers at these parameter values:
 * verified once per tuple (kernel_ir_verify.c), then remembered. */
static stax_status_t symbolic_verified(stax_jit_kernel_t* kernel, const int64_t* values) {
  int32_t n = kernel->param_count;
  size_t row = (size_t)n + 1;
  size_t slot =
      (size_t)(stax_hash_bytes(values, sizeof(int64_t) * (size_t)n, 0x5eedull) % VERIFIED_SLOTS);
  int64_t* held = &kernel->verified[slot * row];
  pthread_mutex_lock(&kernel->verified_lock);
  if (kernel->filled[slot] && memcmp(held, values, sizeof(int64_t) * (size_t)n) == 0) {
    bool ok = kernel->verdict[slot];
    pthread_mutex_unlock(&kernel->verified_lock);
    return ok ? STAX_OK
              : stax_status_make(STAX_FAILED_PRECONDITION,
                                 "JIT kernel '%s' declined these shapes (their accesses could "
                                 "not be verified in bounds)",
                                 kernel->name);
  }
  pthread_mutex_unlock(&kernel->verified_lock);
  stax_status_t status = stax_kir_verify_params(kernel->kir, values);
  pthread_mutex_lock(&kernel->verified_lock);
  memcpy(held, values, sizeof(int64_t) * (size_t)n);
  kernel->verdict[slot] = status == STAX_OK;
  kernel->filled[slot] = true;
  pthread_mutex_unlock(&kernel->verified_lock);
  if (status == STAX_OK) return STAX_OK;
  STAX_LOG(JIT, "symbolic kernel '%s' declines a shape: %s", kernel->name,
           stax_status_message(status));
  stax_status_t declined = stax_status_make(STAX_FAILED_PRECONDITION,
                                            "JIT kernel '%s' declined these shapes: %s",
                                            kernel->name, stax_status_message(status));
  stax_status_free(status);
  return declined;
}

/* A symbolic kernel's run: the parameters come from the arguments' dims and strides; every
 * argument must then have the dims and strides they imply (and the fixed ones compiled), and
 * the tuple must verify. */
static stax_status_t symbolic_run(stax_jit_kernel_t* kernel, stax_tensor_t* const* inputs,
                                  stax_tensor_t* const* outputs, stax_threadpool_t* pool) {
  const stax_kir_kernel_t* kir = kernel->kir;
  int32_t arguments = kernel->input_count + kernel->output_count;
  if (arguments > MAX_STACK_BUFFERS)
    return stax_status_make(STAX_FAILED_PRECONDITION, "JIT kernel '%s': too many arguments",
                            kernel->name);
  const stax_tensor_t* tensors[MAX_STACK_BUFFERS];
  const int64_t* dims[MAX_STACK_BUFFERS + 1];
  const int64_t* strides[MAX_STACK_BUFFERS + 1];
  void* data[MAX_STACK_BUFFERS];
  for (int32_t b = 0; b <= MAX_STACK_BUFFERS; b++) dims[b] = strides[b] = NULL;
  for (int32_t i = 0; i < arguments; i++) {
    const stax_tensor_t* t = i < kernel->input_count ? inputs[i] : outputs[i - kernel->input_count];
    const kernel_buffer_t* info = &kernel->buffers[i];
    if (!t || t->dtype != info->dtype || t->rank != info->rank)
      return stax_status_make(STAX_FAILED_PRECONDITION,
                              "JIT kernel '%s': argument %d ('%s') is missing or not %s of rank "
                              "%d",
                              kernel->name, (int)i, info->name, stax_dtype_name(info->dtype),
                              (int)info->rank);
    tensors[i] = t;
    dims[i] = t->dims;
    strides[i] = t->strides;
    data[i] = stax_tensor_data(t);
  }
  int64_t values[STAX_KIR_MAX_PARAMS];
  if (!stax_kir_params_evaluate(kir, dims, strides, values))
    return stax_status_make(STAX_FAILED_PRECONDITION,
                            "JIT kernel '%s': its parameters overflow at these shapes",
                            kernel->name);
  for (int32_t i = 0; i < arguments; i++) {
    const stax_kir_buffer_t* b = kir->buffers[i];
    const stax_tensor_t* t = tensors[i];
    bool empty = stax_tensor_element_count(t) == 0;
    for (int32_t d = 0; d < b->rank; d++) {
      int64_t dim = stax_kir_buffer_dim_at(b, d, values);
      bool stride_ok = t->dims[d] <= 1 || empty || t->strides[d] == stax_kir_buffer_stride_at(b, d, values);
      if (t->dims[d] != dim || !stride_ok)
        return stax_status_make(
            STAX_FAILED_PRECONDITION,
            "JIT kernel '%s': argument %d ('%s') dim %d is %lld with stride %lld; its "
            "class has %lld with stride %lld",
            kernel->name, (int)i, b->name, (int)d, (long long)t->dims[d],
            (long long)t->strides[d], (long long)dim,
            (long long)stax_kir_buffer_stride_at(b, d, values));
    }
  }
  STAX_RETURN_IF_ERROR(symbolic_verified(kernel, values));
  /* Outputs must not overlap other arguments (an elementwise kernel may write in place over
   * the very same view of an input). */
  for (int32_t o = kernel->input_count; o < arguments; o++) {
    int64_t olow = 0, ohigh = -1;
    if (!stax_shape_extent(tensors[o]->rank, tensors[o]->dims, tensors[o]->strides, &olow, &ohigh))
      continue;
    size_t size = stax_dtype_size(tensors[o]->dtype);
    uintptr_t obase = (uintptr_t)data[o];
    for (int32_t i = 0; i < arguments; i++) {
      int64_t low = 0, high = -1;
      if (i == o ||
          !stax_shape_extent(tensors[i]->rank, tensors[i]->dims, tensors[i]->strides, &low, &high))
        continue;
      uintptr_t base = (uintptr_t)data[i];
      size_t isize = stax_dtype_size(tensors[i]->dtype);
      if (base + (uintptr_t)(low * (int64_t)isize) >= obase + (uintptr_t)((ohigh + 1) * (int64_t)size) ||
          obase + (uintptr_t)(olow * (int64_t)size) >= base + (uintptr_t)((high + 1) * (int64_t)isize))
        continue;
      const stax_tensor_t* a = tensors[o];
      const stax_tensor_t* c = tensors[i];
      bool same_view = data[i] == data[o] && a->dtype == c->dtype && a->rank == c->rank &&
                       memcmp(a->dims, c->dims, sizeof(int64_t) * (size_t)a->rank) == 0 &&
                       memcmp(a->strides, c->strides, sizeof(int64_t) * (size_t)a->rank) == 0;
      if (!(kernel->in_place_safe && i < kernel->input_count && same_view))
        return stax_status_make(STAX_FAILED_PRECONDITION,
                                "JIT kernel '%s': output '%s' overlaps argument '%s'",
                                kernel->name, kernel->buffers[o].name, kernel->buffers[i].name);
    }
  }
  return run_prefilled(kernel, inputs, data, 0, values, pool);
}

stax_status_t stax_jit_kernel_run(stax_jit_kernel_t* kernel, int32_t input_count,
                                  stax_tensor_t* const* inputs, int32_t output_count,
                                  stax_tensor_t* const* outputs, stax_threadpool_t* pool) {
  if (input_count != kernel->input_count || output_count != kernel->output_count)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "JIT kernel '%s' takes %d inputs and %d outputs, got %d and %d",
                            kernel->name, (int)kernel->input_count, (int)kernel->output_count,
                            (int)input_count, (int)output_count);
  if (kernel->symbolic) return symbolic_run(kernel, inputs, outputs, pool);
  int32_t arguments = input_count + output_count;
  void* stack[MAX_STACK_BUFFERS];
  void** data = stack;
  if (arguments > MAX_STACK_BUFFERS)
    STAX_RETURN_IF_ERROR(
        stax_allocator_calloc(kernel->allocator, (size_t)arguments, sizeof(void*), (void**)&data));
  stax_status_t status = STAX_OK;
  int64_t rows = -1;
  for (int32_t i = 0; i < arguments && status == STAX_OK; i++) {
    const stax_tensor_t* tensor = i < input_count ? inputs[i] : outputs[i - input_count];
    status = check_tensor(kernel, i, tensor, &rows);
    if (status == STAX_OK) data[i] = stax_tensor_data(tensor);
  }
  /* The class a rows-generic kernel was proven for (kernel_ir_verify.c). */
  if (status == STAX_OK && kernel->rows_generic &&
      (rows < kernel->rows_min || rows > kernel->rows_max))
    status = stax_status_make(STAX_FAILED_PRECONDITION,
                              "JIT kernel '%s' runs %lld..%lld rows, not %lld", kernel->name,
                              (long long)kernel->rows_min, (long long)kernel->rows_max,
                              (long long)rows);
  if (rows < 0) rows = 0;
  /* Outputs must not overlap other arguments, except an elementwise kernel writing in place
   * over the very same view of an input. */
  for (int32_t o = input_count; o < arguments && status == STAX_OK; o++) {
    uintptr_t olow, ohigh;
    byte_range(&kernel->buffers[o], data[o], rows, &olow, &ohigh);
    for (int32_t i = 0; i < arguments && status == STAX_OK; i++) {
      if (i == o) continue;
      uintptr_t low, high;
      byte_range(&kernel->buffers[i], data[i], rows, &low, &high);
      if (low >= ohigh || olow >= high) continue;
      const stax_tensor_t* a = outputs[o - input_count];
      const stax_tensor_t* b = i < input_count ? inputs[i] : outputs[i - input_count];
      bool same_view = data[i] == data[o] && a && b && a->dtype == b->dtype && a->rank == b->rank &&
                       memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0 &&
                       memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->rank) == 0;
      if (!(kernel->in_place_safe && i < input_count && same_view))
        status = stax_status_make(
            STAX_FAILED_PRECONDITION, "JIT kernel '%s': output %d ('%s') overlaps %s %d ('%s')",
            kernel->name, (int)(o - input_count), kernel->buffers[o].name,
            i < input_count ? "input" : "output", (int)(i < input_count ? i : i - input_count),
            kernel->buffers[i].name);
    }
  }
  if (status == STAX_OK) status = run_prefilled(kernel, inputs, data, rows, NULL, pool);
  if (data != stack)
    stax_allocator_free(kernel->allocator, data, sizeof(void*) * (size_t)arguments);
  return status;
}

/* ---- inspection and lifetime ------------------------------------------------------------- */

void stax_jit_kernel_retain(stax_jit_kernel_t* kernel) {
  if (kernel) atomic_fetch_add(&kernel->refcount, 1);
}

void stax_jit_kernel_release(stax_jit_kernel_t* kernel) {
  if (!kernel || atomic_fetch_sub(&kernel->refcount, 1) != 1) return;
  atomic_fetch_sub(&stats_live, 1);
  kernel_free(kernel);
}

bool stax_jit_kernel_rows_generic(const stax_jit_kernel_t* kernel) {
  return kernel->rows_generic;
}
bool stax_jit_kernel_shape_generic(const stax_jit_kernel_t* kernel) {
  return kernel->rows_generic || kernel->symbolic;
}
const char* stax_jit_kernel_name(const stax_jit_kernel_t* kernel) {
  return kernel->name;
}
int32_t stax_jit_kernel_input_count(const stax_jit_kernel_t* kernel) {
  return kernel->input_count;
}
int32_t stax_jit_kernel_output_count(const stax_jit_kernel_t* kernel) {
  return kernel->output_count;
}
const char* stax_jit_kernel_ir_text(const stax_jit_kernel_t* kernel) {
  return kernel->kernel_ir_text;
}
const char* stax_jit_kernel_llvm_ir_text(const stax_jit_kernel_t* kernel, bool optimized) {
  return optimized ? kernel->code.llvm_ir_optimized : kernel->code.llvm_ir;
}
const char* stax_jit_kernel_asm_text(const stax_jit_kernel_t* kernel) {
  return kernel->code.assembly;
}
double stax_jit_kernel_lower_ms(const stax_jit_kernel_t* kernel) {
  return kernel->lower_ms;
}
double stax_jit_kernel_compile_ms(const stax_jit_kernel_t* kernel) {
  return kernel->compile_ms;
}
