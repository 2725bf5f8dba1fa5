/* The LLVM backend's process-wide state and its vtable: one ORC LLJIT for the process, created
 * on first use, with target machines for the host CPU as detected at run time
 * (LLVMGetHostCPUName / LLVMGetHostCPUFeatures), a generator that resolves libm and other
 * process symbols in JIT'd code, and a mutex over what compiles share (the JIT's symbol table
 * and linker, the live cache keys, the spare target machines).
 *
 * A compile: kernel IR -> module (llvm_codegen.c) in a fresh thread-safe context -> verifier
 * -> the new pass manager (O3, or a short pipeline for shape-generic kernels: pipeline())
 * -> (optionally) assembly from a clone, since code generation rewrites the IR it is given
 * -> an object in memory (stored in the object cache when there is a key), all with a target
 * machine of the compile's own and without the mutex, so compiler threads work at once ->
 * under the mutex, the object goes to the LLJIT under its own resource tracker (removing that
 * tracker frees just this kernel's code) and the stage symbols are looked up, which links it.
 * Every failure returns INTERNAL with LLVM's message; nothing is fatal.
 *
 * The LLJIT and target machines are disposed at exit (atexit), after every kernel should have
 * been released; a kernel still held then must not run afterwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/backend.h"
#include "jit/object_cache.h"
#include "jit/text.h"

#if STAX_HAVE_LLVM

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "jit/llvm_internal.h"

/* Target machines kept for reuse: one per compile that may run at once (compiler threads). */
#define STAX_LLVM_SPARE_MACHINES 16

typedef struct llvm_backend_t {
  pthread_mutex_t mutex;
  LLVMOrcLLJITRef jit;
  LLVMTargetRef llvm_target;
  /* Target machines not in use by a compile (machine_take), the first made at start. */
  LLVMTargetMachineRef spare[STAX_LLVM_SPARE_MACHINES];
  int32_t spare_count;
  char* triple;
  char* data_layout; /* the JIT's, for modules */
  char* jit_triple;  /* the JIT's, for modules */
  char* cpu;
  char* features;
  stax_llvm_target_t target;
  atomic_uint_fast64_t next_symbol;
  /* Object cache: keys whose symbols are defined in the JIT now (one definition per name;
   * a second live copy of the same kernel gets a serial name and skips the cache). */
  uint64_t* live_keys;
  int32_t live_key_count, live_key_capacity;
} llvm_backend_t;

static llvm_backend_t backend_state = {.mutex = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t backend_once = PTHREAD_ONCE_INIT;
static stax_status_t backend_start_status = STAX_OK; /* kept for later callers */

/* Consumes an LLVM error into an INTERNAL status. */
static stax_status_t status_from_error(LLVMErrorRef error, const char* what) {
  char* message = LLVMGetErrorMessage(error);
  stax_status_t status = stax_status_make(STAX_INTERNAL, "LLVM %s failed: %s", what,
                                          message ? message : "(no message)");
  LLVMDisposeErrorMessage(message);
  return status;
}

static void backend_dispose(void) {
  llvm_backend_t* b = &backend_state;
  pthread_mutex_lock(&b->mutex);
  if (b->jit) {
    LLVMErrorRef error = LLVMOrcDisposeLLJIT(b->jit);
    if (error) LLVMConsumeError(error);
    b->jit = NULL;
  }
  for (int32_t i = 0; i < b->spare_count; i++) LLVMDisposeTargetMachine(b->spare[i]);
  b->spare_count = 0;
  LLVMDisposeMessage(b->triple);
  free(b->data_layout);
  free(b->jit_triple);
  b->data_layout = b->jit_triple = NULL;
  LLVMDisposeMessage(b->cpu);
  LLVMDisposeMessage(b->features);
  b->triple = b->cpu = b->features = NULL;
  free(b->live_keys);
  b->live_keys = NULL;
  b->live_key_count = b->live_key_capacity = 0;
  pthread_mutex_unlock(&b->mutex);
}

static bool has_feature(const char* features, const char* name) {
  size_t n = strlen(name);
  for (const char* p = features; p && (p = strstr(p, name)) != NULL; p += n) {
    bool starts = p == features || p[-1] == ',';
    bool ends = p[n] == ',' || p[n] == '\0';
    if (starts && ends) return true;
  }
  return false;
}

/* The host's features under the ISA cap (stax_isa): "-avx512f" turns off every AVX-512
 * extension and "-avx" everything from AVX up (LLVM clears the features that imply one it
 * turns off), so the JIT emits only what a CPU of the capped level has. The result is part
 * of the object cache's key, so capped and native code never mix. Takes `host` (an LLVM
 * message) and returns another, NULL when out of memory. */
static char* capped_features(char* host) {
  stax_isa_t isa = stax_isa();
  const char* off = isa >= STAX_ISA_AVX512 ? NULL : isa >= STAX_ISA_AVX2 ? ",-avx512f" : ",-avx";
  if (!off || !host) return host;
  size_t n = strlen(host), m = strlen(off);
  char* text = malloc(n + m + 1);
  if (!text) {
    LLVMDisposeMessage(host);
    return NULL;
  }
  memcpy(text, host, n);
  memcpy(text + n, off, m + 1);
  LLVMDisposeMessage(host);
  char* capped = LLVMCreateMessage(text);
  free(text);
  return capped;
}

static LLVMTargetMachineRef create_machine(llvm_backend_t* b, LLVMTargetRef target) {
  return LLVMCreateTargetMachine(target, b->triple, b->cpu, b->features, LLVMCodeGenLevelAggressive,
                                 LLVMRelocPIC, LLVMCodeModelJITDefault);
}

static stax_status_t backend_create(llvm_backend_t* b) {
  if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
    return stax_status_make(STAX_INTERNAL, "LLVM has no native target for this host");
  b->triple = LLVMGetDefaultTargetTriple();
  b->cpu = LLVMGetHostCPUName();
  b->features = capped_features(LLVMGetHostCPUFeatures());
  if (!b->features) return stax_status_make(STAX_OUT_OF_MEMORY, "LLVM target features");
  LLVMTargetRef target = NULL;
  char* message = NULL;
  if (LLVMGetTargetFromTriple(b->triple, &target, &message)) {
    stax_status_t status = stax_status_make(STAX_INTERNAL, "LLVM target for %s: %s", b->triple,
                                            message ? message : "");
    LLVMDisposeMessage(message);
    return status;
  }
  b->llvm_target = target;
  LLVMTargetMachineRef machine = create_machine(b, target);
  if (machine) b->spare[b->spare_count++] = machine;
  /* The JIT gets its own machine (the builder takes ownership) with the same settings, so
   * the objects compiles make and the printed assembly are the JIT's code. */
  LLVMTargetMachineRef jit_machine = create_machine(b, target);
  if (!machine || !jit_machine) {
    if (jit_machine) LLVMDisposeTargetMachine(jit_machine);
    return stax_status_make(STAX_INTERNAL, "LLVM could not create a target machine for %s/%s",
                            b->triple, b->cpu);
  }
  LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
      builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jit_machine));
  LLVMErrorRef error = LLVMOrcCreateLLJIT(&b->jit, builder);
  if (error) return status_from_error(error, "LLJIT creation");
  b->data_layout = strdup(LLVMOrcLLJITGetDataLayoutStr(b->jit));
  b->jit_triple = strdup(LLVMOrcLLJITGetTripleString(b->jit));
  if (!b->data_layout || !b->jit_triple) return stax_status_make(STAX_OUT_OF_MEMORY, "LLVM data layout");
  LLVMOrcDefinitionGeneratorRef generator = NULL;
  error = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
      &generator, LLVMOrcLLJITGetGlobalPrefix(b->jit), NULL, NULL);
  if (error) return status_from_error(error, "process symbol generator");
  LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(b->jit), generator);

  /* The features' last word on each name wins (the cap appends "-avx512f" or "-avx"). */
  stax_isa_t isa = stax_isa();
  bool avx512 = isa >= STAX_ISA_AVX512 && has_feature(b->features, "+avx512f");
  bool avx = isa >= STAX_ISA_AVX2 &&
             (has_feature(b->features, "+avx2") || has_feature(b->features, "+avx"));
  b->target.cpu = b->cpu;
  b->target.features = b->features;
  b->target.vector_bits = avx512 ? 512 : avx ? 256 : 128;
  b->target.has_fma = isa >= STAX_ISA_AVX2 && has_feature(b->features, "+fma");
  STAX_LOG(JIT, "LLVM backend: %s, cpu %s, %d-bit vectors%s (ISA %s of %s)", b->triple, b->cpu,
           (int)b->target.vector_bits, b->target.has_fma ? ", fma" : "", stax_isa_name(isa),
           stax_isa_name(stax_isa_detected()));
  return STAX_OK;
}

static void backend_start_once(void) {
  backend_start_status = backend_create(&backend_state);
  atexit(backend_dispose);
}

static stax_jit_target_info_t llvm_target(void* self) {
  llvm_backend_t* b = self;
  stax_jit_target_info_t info = {.name = "llvm",
                                 .cpu = b->cpu,
                                 .features = b->features,
                                 .vector_bits = b->target.vector_bits,
                                 .has_fma = b->target.has_fma};
  return info;
}

static stax_status_t copy_llvm_string(stax_allocator_t allocator, char* llvm_string,
                                      char** out_text) {
  stax_status_t status = stax_jit_text_copy(allocator, llvm_string ? llvm_string : "", out_text);
  LLVMDisposeMessage(llvm_string);
  return status;
}

static stax_status_t emit_assembly(LLVMTargetMachineRef machine, LLVMModuleRef module,
                                   stax_allocator_t allocator, char** out_text) {
  LLVMModuleRef clone = LLVMCloneModule(module);
  char* message = NULL;
  LLVMMemoryBufferRef buffer = NULL;
  bool failed =
      LLVMTargetMachineEmitToMemoryBuffer(machine, clone, LLVMAssemblyFile, &message, &buffer);
  LLVMDisposeModule(clone);
  if (failed) {
    stax_status_t status = stax_status_make(STAX_INTERNAL, "LLVM assembly emission failed: %s",
                                            message ? message : "");
    LLVMDisposeMessage(message);
    return status;
  }
  size_t size = LLVMGetBufferSize(buffer);
  stax_status_t status = stax_allocator_malloc(allocator, size + 1, (void**)out_text);
  if (status == STAX_OK) {
    memcpy(*out_text, LLVMGetBufferStart(buffer), size);
    (*out_text)[size] = '\0';
  }
  LLVMDisposeMemoryBuffer(buffer);
  return status;
}

static void free_code_texts(stax_jit_code_t* code, stax_allocator_t allocator) {
  stax_jit_text_free_string(allocator, code->llvm_ir);
  stax_jit_text_free_string(allocator, code->llvm_ir_optimized);
  stax_jit_text_free_string(allocator, code->assembly);
  code->llvm_ir = code->llvm_ir_optimized = code->assembly = NULL;
}

static bool failure_requested(const stax_jit_compile_options_t* options) {
  if (options && options->inject_failure) return true;
  const char* env = getenv("STAX_JIT_FAIL_COMPILE");
  return env && env[0] && strcmp(env, "0") != 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- object cache (object_cache.h) --------------------------------------------------------- */

static bool live_key_find(const llvm_backend_t* b, uint64_t key, int32_t* out_index) {
  for (int32_t i = 0; i < b->live_key_count; i++)
    if (b->live_keys[i] == key) {
      if (out_index) *out_index = i;
      return true;
    }
  return false;
}

static bool live_key_add(llvm_backend_t* b, uint64_t key) {
  if (b->live_key_count == b->live_key_capacity) {
    int32_t capacity = b->live_key_capacity ? 2 * b->live_key_capacity : 16;
    uint64_t* grown = realloc(b->live_keys, (size_t)capacity * sizeof(*grown));
    if (!grown) return false;
    b->live_keys = grown;
    b->live_key_capacity = capacity;
  }
  b->live_keys[b->live_key_count++] = key;
  return true;
}

static void live_key_remove(llvm_backend_t* b, uint64_t key) {
  int32_t i = -1;
  if (live_key_find(b, key, &i)) b->live_keys[i] = b->live_keys[--b->live_key_count];
}

/* The optimization pipeline. Exact-shape kernels (hot shapes, compiled while calls already
 * run compiled) get O3. Shape-generic kernels (the first tier: one compile per shape class,
 * which the calls of a new class wait for) get a short function pipeline: the lowering
 * already writes explicit vector loops and register tiles, so what the code needs is the
 * stack slots turned into registers (sroa), redundant address arithmetic and loads folded
 * (early-cse, instcombine, gvn), loop-invariant code hoisted (licm) and the control flow
 * tidied; O2's unrolling, vectorizers and inliner find nothing to add. Measured on the BERT
 * layer's generic version (docs/jit.md "Compile time"): the IR passes 0.6-0.8 s -> 0.1 s,
 * the whole compile 1.2 s -> 0.36 s, with the matmuls' inner loops the same instruction for
 * instruction and the same instruction count per call. */
#define STAX_JIT_GENERIC_PIPELINE                                                          \
  "function(sroa,early-cse<memssa>,instcombine,simplifycfg,loop-mssa(licm),gvn,instcombine," \
  "simplifycfg)"
static const char* pipeline(const stax_kir_kernel_t* kernel) {
  return kernel->rows_generic || kernel->symbolic ? STAX_JIT_GENERIC_PIPELINE : "default<O3>";
}

/* The object cache's folder for a compile: the one its options name ("" for none), else the
 * environment's. */
static bool cache_folder(const stax_jit_compile_options_t* options, char* dir, size_t size) {
  if (!options || !options->cache_dir) return stax_jit_cache_dir(dir, size);
  int n = snprintf(dir, size, "%s", options->cache_dir);
  return n > 0 && (size_t)n < size;
}

/* The cache key: everything the machine code depends on, spelled out (object_cache.h). NULL
 * when the cache is off or unusable for this compile (texts asked for: they need the IR;
 * an injected failure; an unknown build). */
static char* cache_key(const llvm_backend_t* b, const stax_kir_kernel_t* kernel,
                       const stax_jit_compile_options_t* options, char* dir, size_t dir_size) {
  if ((options && (options->keep_llvm_ir || options->keep_assembly)) ||
      !cache_folder(options, dir, dir_size) || stax_jit_build_identity() == 0)
    return NULL;
  char* ir = NULL;
  stax_status_t printed = stax_kir_print(kernel, stax_allocator_system(), &ir);
  if (printed != STAX_OK) {
    stax_status_free(printed);
    return NULL;
  }
  unsigned major = 0, minor = 0, patch = 0;
  LLVMGetVersion(&major, &minor, &patch);
  stax_jit_text_t text;
  stax_jit_text_init(&text, stax_allocator_system());
  stax_jit_text_appendf(&text,
                        "stax jit object v1\nbuild %016llx\nllvm %u.%u.%u\n%s\n%s\n%s\n%s\n%s",
                        (unsigned long long)stax_jit_build_identity(), major, minor, patch,
                        b->triple, b->cpu, b->features, pipeline(kernel), ir);
  stax_jit_text_free_string(stax_allocator_system(), ir);
  char* key = NULL;
  stax_status_t status = stax_jit_text_finish(&text, &key);
  if (status != STAX_OK) {
    stax_status_free(status);
    return NULL;
  }
  return key;
}

/* ---- one compile ------------------------------------------------------------------------- */

/* Target machines for compiles in flight: a TargetMachine is used by one thread at a time, so
 * each compile takes one (made on demand, with the settings of the JIT's own) and gives it
 * back for the next. Several compiles then optimize and generate code at once; only linking
 * into the JIT and the live-key table need the mutex. */
static LLVMTargetMachineRef machine_take(llvm_backend_t* b) {
  pthread_mutex_lock(&b->mutex);
  LLVMTargetMachineRef machine = b->spare_count > 0 ? b->spare[--b->spare_count] : NULL;
  pthread_mutex_unlock(&b->mutex);
  return machine ? machine : create_machine(b, b->llvm_target);
}

static void machine_give(llvm_backend_t* b, LLVMTargetMachineRef machine) {
  if (!machine) return;
  pthread_mutex_lock(&b->mutex);
  if (b->jit && b->spare_count < STAX_LLVM_SPARE_MACHINES) {
    b->spare[b->spare_count++] = machine;
    machine = NULL;
  }
  pthread_mutex_unlock(&b->mutex);
  if (machine) LLVMDisposeTargetMachine(machine);
}

/* Kernel IR -> verified, optimized module -> object code in memory, without the mutex (the
 * module lives in a context of its own). Keeps the texts the options ask for; with a key,
 * stores the object in the cache, so what runs is exactly what later processes load. */
static stax_status_t compile_object(llvm_backend_t* b, const stax_kir_kernel_t* kernel,
                                    const stax_jit_compile_options_t* options,
                                    stax_allocator_t allocator, const char* symbol,
                                    const char* key, const char* dir, stax_jit_code_t* code,
                                    LLVMMemoryBufferRef* out_object) {
  bool keep_ir = options && options->keep_llvm_ir;
  bool keep_asm = options && options->keep_assembly;
  double start = now_ms();
  LLVMOrcThreadSafeContextRef thread_context = LLVMOrcCreateNewThreadSafeContext();
  LLVMContextRef context = LLVMOrcThreadSafeContextGetContext(thread_context);
  LLVMModuleRef module = NULL;
  LLVMTargetMachineRef machine = machine_take(b);
  stax_status_t status = machine ? STAX_OK
                                 : stax_status_make(STAX_INTERNAL,
                                                    "LLVM could not create a target machine");
  if (status == STAX_OK)
    status = stax_llvm_emit_kernel(context, kernel, &b->target, symbol, &module);
  double emitted = now_ms(), optimized = emitted;
  if (status != STAX_OK) goto done;
  LLVMSetTarget(module, b->jit_triple);
  LLVMSetDataLayout(module, b->data_layout);

  char* message = NULL;
  if (LLVMVerifyModule(module, LLVMReturnStatusAction, &message)) {
    status = stax_status_make(STAX_INTERNAL, "LLVM IR of kernel '%s' does not verify: %s",
                              kernel->name, message ? message : "");
    LLVMDisposeMessage(message);
    goto done;
  }
  LLVMDisposeMessage(message);
  if (keep_ir) {
    status = copy_llvm_string(allocator, LLVMPrintModuleToString(module), &code->llvm_ir);
    if (status != STAX_OK) goto done;
  }
  LLVMPassBuilderOptionsRef pass_options = LLVMCreatePassBuilderOptions();
  LLVMErrorRef error = LLVMRunPasses(module, pipeline(kernel), machine, pass_options);
  LLVMDisposePassBuilderOptions(pass_options);
  optimized = now_ms();
  if (error) {
    status = status_from_error(error, "optimization");
    goto done;
  }
  if (keep_ir) {
    status = copy_llvm_string(allocator, LLVMPrintModuleToString(module), &code->llvm_ir_optimized);
    if (status != STAX_OK) goto done;
  }
  if (keep_asm) {
    status = emit_assembly(machine, module, allocator, &code->assembly);
    if (status != STAX_OK) goto done;
  }
  if (failure_requested(options)) {
    status = stax_status_make(STAX_INTERNAL, "LLVM compile of kernel '%s' failed (injected)",
                              kernel->name);
    goto done;
  }
  message = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(machine, module, LLVMObjectFile, &message, out_object)) {
    status = stax_status_make(STAX_INTERNAL, "LLVM code generation of kernel '%s' failed: %s",
                              kernel->name, message ? message : "");
    LLVMDisposeMessage(message);
    *out_object = NULL;
    goto done;
  }
  LLVMDisposeMessage(message);
  if (key)
    stax_jit_cache_store(dir, key, strlen(key), LLVMGetBufferStart(*out_object),
                         LLVMGetBufferSize(*out_object));
  STAX_LOG(JIT, "kernel '%s' as %s: IR %.2f ms, passes %.2f ms, machine code %.2f ms%s",
           kernel->name, symbol, emitted - start, optimized - emitted, now_ms() - optimized,
           key ? " (stored in the object cache)" : "");
done:
  if (module) LLVMDisposeModule(module);
  LLVMOrcDisposeThreadSafeContext(thread_context);
  machine_give(b, machine);
  return status;
}

/* Links `object` (consumed) into the JIT under a new resource tracker and looks up the stage
 * symbols (when the linker resolves and places the code). Under the mutex. */
static stax_status_t link_locked(llvm_backend_t* b, const stax_kir_kernel_t* kernel,
                                 const char* symbol, LLVMMemoryBufferRef object,
                                 stax_jit_code_t* code) {
  if (!b->jit) {
    LLVMDisposeMemoryBuffer(object);
    return stax_status_make(STAX_INTERNAL, "the LLVM JIT was shut down");
  }
  LLVMOrcResourceTrackerRef tracker =
      LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(b->jit));
  LLVMErrorRef error = LLVMOrcLLJITAddObjectFileWithRT(b->jit, tracker, object);
  stax_status_t status = error ? status_from_error(error, "adding the object") : STAX_OK;
  for (int32_t s = 0; s < kernel->stage_count && status == STAX_OK; s++) {
    char name[128];
    snprintf(name, sizeof(name), "%s_stage%d", symbol, (int)s);
    LLVMOrcExecutorAddress address = 0;
    error = LLVMOrcLLJITLookup(b->jit, &address, name);
    if (error) {
      status = status_from_error(error, "machine code generation");
    } else {
      /* The only way from an executor address to a callable pointer. */
      code->stages[s] = (stax_jit_stage_fn)(uintptr_t)address;
    }
  }
  if (status != STAX_OK) {
    LLVMErrorRef remove_error = LLVMOrcResourceTrackerRemove(tracker);
    if (remove_error) LLVMConsumeError(remove_error);
    LLVMOrcReleaseResourceTracker(tracker);
    return status;
  }
  code->handle = tracker;
  return STAX_OK;
}

static stax_status_t llvm_compile(void* self, const stax_kir_kernel_t* kernel,
                                  const stax_jit_compile_options_t* options,
                                  stax_allocator_t allocator, stax_jit_code_t* code) {
  llvm_backend_t* b = self;
  memset(code, 0, sizeof(*code));
  /* With the object cache, the symbols are named by the key (the same in every process that
   * loads the object); without it, or while another copy of this kernel is live, by a
   * serial number. */
  char dir[4096];
  char* key = failure_requested(options) ? NULL : cache_key(b, kernel, options, dir, sizeof(dir));
  size_t key_size = key ? strlen(key) : 0;
  uint64_t key_hash = key ? stax_jit_cache_key_hash(key, key_size) : 0;
  pthread_mutex_lock(&b->mutex);
  bool alive = b->jit != NULL;
  if (key && (!alive || key_hash == 0 || live_key_find(b, key_hash, NULL) ||
              !live_key_add(b, key_hash))) {
    stax_jit_text_free_string(stax_allocator_system(), key);
    key = NULL;
  }
  pthread_mutex_unlock(&b->mutex);
  if (!alive) return stax_status_make(STAX_INTERNAL, "the LLVM JIT was shut down");
  char symbol[96];
  if (key) {
    snprintf(symbol, sizeof(symbol), "stax_c%016llx", (unsigned long long)key_hash);
  } else {
    unsigned long long serial = (unsigned long long)atomic_fetch_add(&b->next_symbol, 1);
    snprintf(symbol, sizeof(symbol), "stax_k%llu", serial);
  }
  stax_status_t status = stax_allocator_calloc(allocator, (size_t)kernel->stage_count + 1,
                                               sizeof(stax_jit_stage_fn), (void**)&code->stages);
  if (status != STAX_OK) goto fail;
  code->stage_count = kernel->stage_count;

  double start = now_ms();
  void* cached = NULL;
  size_t cached_size = 0;
  if (key && stax_jit_cache_load(dir, key, key_size, &cached, &cached_size)) {
    LLVMMemoryBufferRef object =
        LLVMCreateMemoryBufferWithMemoryRangeCopy(cached, cached_size, symbol);
    free(cached);
    pthread_mutex_lock(&b->mutex);
    status = link_locked(b, kernel, symbol, object, code);
    pthread_mutex_unlock(&b->mutex);
    if (status == STAX_OK) {
      code->from_cache = true;
      STAX_LOG(JIT, "kernel '%s' as %s: loaded from the object cache in %.2f ms", kernel->name,
               symbol, now_ms() - start);
      goto done;
    }
    STAX_LOG(JIT, "object cache: %s; compiling instead", stax_status_message(status));
    stax_status_free(status);
  }
  if (options && options->cache_only) {
    status = stax_status_make(STAX_FAILED_PRECONDITION, "kernel '%s' is not in the object cache",
                              kernel->name);
    goto fail;
  }
  LLVMMemoryBufferRef object = NULL;
  status = compile_object(b, kernel, options, allocator, symbol, key, dir, code, &object);
  if (status != STAX_OK) goto fail;
  pthread_mutex_lock(&b->mutex);
  status = link_locked(b, kernel, symbol, object, code);
  pthread_mutex_unlock(&b->mutex);
  if (status != STAX_OK) goto fail;
done:
  code->cache_key = key ? key_hash : 0;
  stax_jit_text_free_string(stax_allocator_system(), key);
  return STAX_OK;

fail:
  if (key) {
    pthread_mutex_lock(&b->mutex);
    live_key_remove(b, key_hash);
    pthread_mutex_unlock(&b->mutex);
  }
  stax_jit_text_free_string(stax_allocator_system(), key);
  code->from_cache = false;
  free_code_texts(code, allocator);
  stax_allocator_free(allocator, code->stages,
                      ((size_t)kernel->stage_count + 1) * sizeof(stax_jit_stage_fn));
  code->stages = NULL;
  code->stage_count = 0;
  return status;
}

static void llvm_release(void* self, stax_jit_code_t* code, stax_allocator_t allocator) {
  llvm_backend_t* b = self;
  if (code->handle) {
    pthread_mutex_lock(&b->mutex);
    if (code->cache_key) live_key_remove(b, code->cache_key);
    /* After exit-time disposal the code is gone with the JIT already. */
    if (b->jit) {
      LLVMErrorRef error = LLVMOrcResourceTrackerRemove(code->handle);
      if (error) {
        stax_status_t status = status_from_error(error, "freeing kernel code");
        STAX_LOG(JIT, "%s", stax_status_message(status));
        stax_status_free(status);
      }
      LLVMOrcReleaseResourceTracker(code->handle);
    }
    pthread_mutex_unlock(&b->mutex);
  }
  free_code_texts(code, allocator);
  stax_allocator_free(allocator, code->stages,
                      ((size_t)code->stage_count + 1) * sizeof(stax_jit_stage_fn));
  memset(code, 0, sizeof(*code));
}

static const stax_jit_backend_vtable_t llvm_vtable = {
    .name = "llvm",
    .target = llvm_target,
    .compile = llvm_compile,
    .release = llvm_release,
};

stax_status_t stax_llvm_backend_start(const stax_jit_backend_vtable_t** out_vtable,
                                      void** out_self) {
  *out_vtable = NULL;
  *out_self = NULL;
  pthread_once(&backend_once, backend_start_once);
  if (backend_start_status != STAX_OK)
    return stax_status_make(stax_status_code(backend_start_status), "%s",
                            stax_status_message(backend_start_status));
  *out_vtable = &llvm_vtable;
  *out_self = &backend_state;
  return STAX_OK;
}

#else /* !STAX_HAVE_LLVM */

stax_status_t stax_llvm_backend_start(const stax_jit_backend_vtable_t** out_vtable,
                                      void** out_self) {
  *out_vtable = NULL;
  *out_self = NULL;
  return stax_status_make(STAX_UNIMPLEMENTED, "stax was built without LLVM: no JIT backend");
}

#endif /* STAX_HAVE_LLVM */
