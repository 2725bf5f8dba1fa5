/* Kernel IR -> CUDA C (src/jit/cuda_codegen.c) for fusion groups lowered by the JIT's own
 * lowering (elementwise chains with broadcasting, strided and reversed views, Gelu, Softmax,
 * LayerNorm, a Where over a compare, a saturating Cast):
 *   - NVRTC compiles every source to PTX for compute_80 and compute_90, and the PTX holds an
 *     `.entry` for every stage (skipped, with the reason printed, when NVRTC cannot load);
 *   - nothing can run on a GPU here, so the same source is also compiled as plain C on the
 *     host through a shim that emulates CUDA's execution model (a pthread per GPU thread,
 *     blocks one after another, __syncthreads as a barrier, __shfl_xor_sync through memory),
 *     launched on a grid smaller than the work (the grid-stride loops go round), and its
 *     outputs are compared with the generic CPU kernels for random inputs, for row kernels
 *     both one thread per row and one block per row (skipped with the reason when the host C
 *     compiler cannot be run);
 *   - what the codegen refuses, it refuses with UNIMPLEMENTED naming why. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_loader.h"
#include "jit/cuda_codegen.h"
#include "jit/lower.h"
#include "test_jit_util.h"

#ifndef STAX_TEST_HOST_CC
#define STAX_TEST_HOST_CC "cc"
#endif

/* ---- NVRTC ------------------------------------------------------------------------------- */

static const stax_cuda_nvrtc_t* test_nvrtc(void) {
  static bool noted = false;
  const stax_cuda_nvrtc_t* nvrtc = NULL;
  stax_status_t status = stax_cuda_nvrtc_get(&nvrtc);
  if (status != STAX_OK) {
    if (!noted) printf("  (skipping NVRTC compiles: %s)\n", stax_status_message(status));
    noted = true;
    stax_status_free(status);
    return NULL;
  }
  return nvrtc;
}

static void check_ptx(const stax_cuda_source_t* source, const char* name) {
  const stax_cuda_nvrtc_t* nvrtc = test_nvrtc();
  if (!nvrtc) return;
  static const int architectures[][2] = {{8, 0}, {9, 0}};
  for (size_t a = 0; a < 2; a++) {
    char* ptx = NULL;
    size_t size = 0;
    stax_status_t status =
        stax_cuda_compile_ptx(nvrtc, source->text, name, architectures[a][0], architectures[a][1],
                              tg_sys(), &ptx, &size);
    if (status != STAX_OK) {
      fprintf(stderr, "%s: %s\nsource:\n%s\n", name, stax_status_message(status), source->text);
      stax_status_free(status);
      CHECK(false);
      continue;
    }
    CHECK(size > 0 && strlen(ptx) == size);
    char target[32];
    snprintf(target, sizeof(target), ".target sm_%d%d", architectures[a][0], architectures[a][1]);
    CHECK(strstr(ptx, target) != NULL);
    for (int32_t s = 0; s < source->stage_count; s++) {
      char entry[160];
      snprintf(entry, sizeof(entry), ".entry %s(", source->stages[s].entry);
      if (!strstr(ptx, entry)) fprintf(stderr, "%s: no '%s' in the PTX\n", name, entry);
      CHECK(strstr(ptx, entry) != NULL);
    }
    stax_allocator_free(tg_sys(), ptx, size + 1);
  }
}

/* ---- the host shim ----------------------------------------------------------------------- */

/* The host shim: CUDA's execution model in C. Every thread of a block is a pthread (its
 * threadIdx / blockIdx thread-local); blocks run one after another, so function-static
 * "__shared__" arrays are the block's shared memory; __syncthreads is a barrier of the block;
 * __shfl_xor_sync exchanges through a slot per thread between two barriers (every thread of
 * the block calls it together, as the generated reductions do). */
static const char shim[] =
    "#define _POSIX_C_SOURCE 200809L /* pthread barriers under -std=c11 */\n"
    "#include <math.h>\n"
    "#include <pthread.h>\n"
    "#define __global__\n"
    "#define __device__\n"
    "#define __forceinline__ inline\n"
    "#define __shared__ static\n"
    "typedef struct { unsigned int x, y, z; } stax_shim_dim3;\n"
    "_Thread_local stax_shim_dim3 threadIdx, blockIdx;\n"
    "stax_shim_dim3 blockDim, gridDim;\n"
    "static pthread_barrier_t stax_shim_barrier;\n"
    "static void __syncthreads(void) { pthread_barrier_wait(&stax_shim_barrier); }\n"
    "static float stax_shim_slots_f32[1024];\n"
    "static double stax_shim_slots_f64[1024];\n"
    "static float stax_shim_shfl_f32(unsigned mask, float v, int lanes) {\n"
    "  (void)mask; stax_shim_slots_f32[threadIdx.x] = v; __syncthreads();\n"
    "  float r = stax_shim_slots_f32[threadIdx.x ^ (unsigned)lanes]; __syncthreads(); return r;\n"
    "}\n"
    "static double stax_shim_shfl_f64(unsigned mask, double v, int lanes) {\n"
    "  (void)mask; stax_shim_slots_f64[threadIdx.x] = v; __syncthreads();\n"
    "  double r = stax_shim_slots_f64[threadIdx.x ^ (unsigned)lanes]; __syncthreads(); return r;\n"
    "}\n"
    "#define __shfl_xor_sync(mask, v, lanes) \\\n"
    "  _Generic((v), float: stax_shim_shfl_f32, double: stax_shim_shfl_f64)(mask, v, lanes)\n"
    "typedef void (*stax_shim_body_fn)(void* context);\n"
    "typedef struct { stax_shim_body_fn body; void* context; unsigned block, thread; } "
    "stax_shim_thread_t;\n"
    "static void* stax_shim_thread_main(void* arg) {\n"
    "  stax_shim_thread_t* t = (stax_shim_thread_t*)arg;\n"
    "  blockIdx.x = t->block; blockIdx.y = blockIdx.z = 0;\n"
    "  threadIdx.x = t->thread; threadIdx.y = threadIdx.z = 0;\n"
    "  t->body(t->context);\n"
    "  return 0;\n"
    "}\n"
    "int stax_shim_launch(stax_shim_body_fn body, void* context, unsigned blocks, unsigned threads) {\n"
    "  static stax_shim_thread_t args[1024];\n"
    "  static pthread_t ids[1024];\n"
    "  if (threads == 0 || threads > 1024) return -1;\n"
    "  gridDim.x = blocks; gridDim.y = gridDim.z = 1;\n"
    "  blockDim.x = threads; blockDim.y = blockDim.z = 1;\n"
    "  if (pthread_barrier_init(&stax_shim_barrier, 0, threads) != 0) return -1;\n"
    "  int failed = 0;\n"
    "  for (unsigned b = 0; b < blocks; b++) {\n"
    "    unsigned started = 0;\n"
    "    for (unsigned t = 0; t < threads; t++, started++) {\n"
    "      args[t].body = body; args[t].context = context; args[t].block = b; args[t].thread = t;\n"
    "      if (pthread_create(&ids[t], 0, stax_shim_thread_main, &args[t]) != 0) { failed = 1; break; }\n"
    "    }\n"
    "    for (unsigned t = 0; t < started; t++) pthread_join(ids[t], 0);\n"
    "    if (failed) break;\n"
    "  }\n"
    "  pthread_barrier_destroy(&stax_shim_barrier);\n"
    "  return failed ? -1 : 0;\n"
    "}\n";

typedef void (*shim_body_fn)(void* context);
typedef int (*shim_launch_fn)(shim_body_fn body, void* context, unsigned blocks, unsigned threads);

typedef void (*entry1_fn)(void*);
typedef void (*entry2_fn)(void*, void*);
typedef void (*entry3_fn)(void*, void*, void*);
typedef void (*entry4_fn)(void*, void*, void*, void*);
typedef void (*entry5_fn)(void*, void*, void*, void*, void*);
typedef void (*entry6_fn)(void*, void*, void*, void*, void*, void*);
typedef void (*entry7_fn)(void*, void*, void*, void*, void*, void*, void*);
typedef void (*entry8_fn)(void*, void*, void*, void*, void*, void*, void*, void*);

typedef struct entry_call_t {
  void* entry;
  int32_t count;
  void** buffers;
} entry_call_t;

/* Runs on every emulated GPU thread. */
static void call_entry(void* context) {
  const entry_call_t* call = context;
  void* entry = call->entry;
  void** b = call->buffers;
  switch (call->count) {
    case 1: ((entry1_fn)entry)(b[0]); break;
    case 2: ((entry2_fn)entry)(b[0], b[1]); break;
    case 3: ((entry3_fn)entry)(b[0], b[1], b[2]); break;
    case 4: ((entry4_fn)entry)(b[0], b[1], b[2], b[3]); break;
    case 5: ((entry5_fn)entry)(b[0], b[1], b[2], b[3], b[4]); break;
    case 6: ((entry6_fn)entry)(b[0], b[1], b[2], b[3], b[4], b[5]); break;
    case 7: ((entry7_fn)entry)(b[0], b[1], b[2], b[3], b[4], b[5], b[6]); break;
    case 8: ((entry8_fn)entry)(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]); break;
    default: break;
  }
}

static bool host_cc_broken = false;

/* Compiles the source as C into a shared object and opens it; NULL (with the reason printed
 * once) when the host compiler cannot. */
static void* host_compile(const stax_cuda_source_t* source, const char* name, char* dir,
                          size_t dir_size) {
  if (host_cc_broken) return NULL;
  snprintf(dir, dir_size, "/tmp/stax_cuda_shim_XXXXXX");
  if (!mkdtemp(dir)) {
    printf("  (skipping host runs: mkdtemp failed)\n");
    host_cc_broken = true;
    return NULL;
  }
  char c_path[512], so_path[512], command[2048];
  snprintf(c_path, sizeof(c_path), "%s/%s.c", dir, name);
  snprintf(so_path, sizeof(so_path), "%s/%s.so", dir, name);
  FILE* file = fopen(c_path, "w");
  CHECK(file != NULL);
  if (!file) return NULL;
  fputs(shim, file);
  fputs(source->text, file);
  fclose(file);
  /* -fno-builtin-...: none needed; -ffp-contract=off keeps a * b + c unfused like the CPU. */
  snprintf(command, sizeof(command),
           "%s -std=c11 -O1 -ffp-contract=off -fPIC -shared -pthread -w -o %s %s -lm 2>%s/cc.log",
           STAX_TEST_HOST_CC, so_path, c_path, dir);
  int rc = system(command);
  if (rc != 0) {
    /* The compiler itself missing is a skip; a compile error in generated code is a bug. */
    if (system(STAX_TEST_HOST_CC " --version >/dev/null 2>&1") != 0) {
      printf("  (skipping host runs: %s cannot run)\n", STAX_TEST_HOST_CC);
      host_cc_broken = true;
    } else {
      char log_command[600];
      snprintf(log_command, sizeof(log_command), "cat %s/cc.log >&2", dir);
      fprintf(stderr, "%s: the host shim does not compile:\n", name);
      if (system(log_command) != 0) fprintf(stderr, "(no log)\n");
      CHECK(false);
    }
    return NULL;
  }
  void* library = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  if (!library) fprintf(stderr, "%s: dlopen: %s\n", name, dlerror());
  CHECK(library != NULL);
  return library;
}

static void host_cleanup(const char* dir, const char* name) {
  char path[600];
  snprintf(path, sizeof(path), "%s/%s.c", dir, name);
  unlink(path);
  snprintf(path, sizeof(path), "%s/%s.so", dir, name);
  unlink(path);
  snprintf(path, sizeof(path), "%s/cc.log", dir);
  unlink(path);
  rmdir(dir);
}

/* Runs every stage on an emulated grid of `blocks` x `threads` (one thread after another:
 * the stages use no shared memory and no barriers) and compares with the generic kernels. */
static void host_run_and_compare(test_group_t* tg, const stax_cuda_source_t* source,
                                 const char* name, double atol, double rtol) {
  char dir[256];
  void* library = host_compile(source, name, dir, sizeof(dir));
  if (!library) {
    if (!host_cc_broken) host_cleanup(dir, name);
    return;
  }
  shim_launch_fn launch = (shim_launch_fn)dlsym(library, "stax_shim_launch");
  CHECK(launch != NULL);
  stax_tensor_t* expected[TG_MAX_VALUES] = {NULL};
  stax_tensor_t* actual[TG_MAX_VALUES] = {NULL};
  CHECK_OK(tg_reference(tg, expected));
  void* buffers[16];
  int32_t count = tg->input_count + tg->output_count;
  CHECK_EQ_INT(count, source->buffer_count);
  for (int32_t i = 0; i < tg->input_count; i++)
    buffers[i] = stax_tensor_data(tg->tensors[tg->inputs[i]]);
  for (int32_t i = 0; i < tg->output_count; i++) {
    const stax_jit_value_t* v = &tg->values[tg->outputs[i]];
    CHECK_OK(stax_tensor_create(tg_sys(), v->dtype, v->rank, v->dims, &actual[i]));
    memset(stax_tensor_data(actual[i]), 0xA5,
           (size_t)stax_tensor_element_count(actual[i]) * stax_dtype_size(v->dtype));
    buffers[tg->input_count + i] = stax_tensor_data(actual[i]);
  }
  for (int32_t s = 0; s < source->stage_count && launch; s++) {
    entry_call_t call = {.entry = dlsym(library, source->stages[s].entry),
                         .count = count,
                         .buffers = buffers};
    CHECK(call.entry != NULL && count <= 8);
    if (!call.entry || count > 8) break;
    /* Fewer threads than work, so the grid-stride loops go round; a block-per-row stage gets
     * two warps (its launch rule: a multiple of 32). */
    unsigned blocks = 3, threads = source->stages[s].block_per_item ? 64 : 5;
    CHECK_EQ_INT(launch(call_entry, &call, blocks, threads), 0);
  }
  for (int32_t i = 0; i < tg->output_count; i++) {
    int64_t bad = tg_compare(name, actual[i], expected[i], atol, rtol);
    if (bad) fprintf(stderr, "%s: output %d: %lld mismatches\nsource:\n%s\n", name, (int)i,
                     (long long)bad, source->text);
    CHECK(bad == 0);
    stax_tensor_release(actual[i]);
    stax_tensor_release(expected[i]);
  }
  dlclose(library);
  host_cleanup(dir, name);
}

/* ---- cases ------------------------------------------------------------------------------- */

/* Lowers the group, generates CUDA C, compiles it with NVRTC and runs it through the shim.
 * Returns the stage count (0 after a failure). */
static int32_t cuda_case_mode(test_group_t* tg, const char* name, double atol, double rtol,
                              bool block_rows, int32_t* out_block_stages) {
  stax_jit_lower_options_t options = {.vector_bits = 256, .thread_count = 1, .has_fma = true};
  stax_kir_kernel_t* kernel = NULL;
  *out_block_stages = 0;
  CHECK_OK(stax_jit_lower_group(tg_group(tg, name), &options, tg_sys(), &kernel));
  if (!kernel) return 0;
  stax_cuda_source_t source;
  stax_cuda_codegen_options_t codegen = {.block_rows = block_rows};
  stax_status_t status = stax_cuda_codegen(kernel, &codegen, tg_sys(), &source);
  if (status != STAX_OK) {
    fprintf(stderr, "%s: %s\n", name, stax_status_message(status));
    stax_status_free(stax_kir_print_to_file(kernel, stderr));
    stax_status_free(status);
    stax_kir_kernel_destroy(kernel);
    CHECK(false);
    return 0;
  }
  CHECK(strstr(source.text, "STAX_EXTERN_C __global__ void stax_") != NULL);
  CHECK(strstr(source.text, "extern \"C\"") != NULL);
  CHECK_EQ_INT(source.stage_count, kernel->stage_count);
  for (int32_t st = 0; st < source.stage_count; st++) {
    *out_block_stages += source.stages[st].block_per_item;
    if (source.stages[st].block_per_item) {
      CHECK(block_rows);
      CHECK(strstr(source.text, "__shfl_xor_sync(0xffffffffu") != NULL);
      CHECK(strstr(source.text, "__syncthreads()") != NULL);
    }
  }
  check_ptx(&source, name);
  host_run_and_compare(tg, &source, name, atol, rtol);
  int32_t stages = source.stage_count;
  if (getenv("STAX_TEST_PRINT_CUDA")) printf("%s\n", source.text);
  stax_cuda_source_free(&source, tg_sys());
  stax_kir_kernel_destroy(kernel);
  return stages;
}

/* Both ways: one thread per row and, where it applies, one block per row. Returns the stage
 * count; *out_block_stages: how many stages got a block per row. */
static int32_t cuda_case_blocks(test_group_t* tg, const char* name, double atol, double rtol,
                                int32_t* out_block_stages) {
  int32_t none = 0;
  int32_t stages = cuda_case_mode(tg, name, atol, rtol, false, &none);
  CHECK_EQ_INT(none, 0);
  CHECK_EQ_INT(cuda_case_mode(tg, name, atol, rtol, true, out_block_stages), stages);
  return stages;
}

static int32_t cuda_case(test_group_t* tg, const char* name, double atol, double rtol) {
  int32_t block_stages = 0;
  return cuda_case_blocks(tg, name, atol, rtol, &block_stages);
}

static void test_add_relu(void) {
  int64_t shapes[][3] = {{2, 3, 5}, {1, 1, 1}, {4, 8, 33}, {3, 1, 130}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
    for (int32_t layout = 0; layout < 4; layout++) {
      test_group_t tg;
      tg_init(&tg);
      int32_t a = tg_input_layout(&tg, "a", STAX_DTYPE_FLOAT32, 3, shapes[s], layout, -3, 3);
      int32_t b = tg_input(&tg, "b", STAX_DTYPE_FLOAT32, 3, shapes[s]);
      int32_t ab[2] = {a, b};
      int32_t sum = tg_node(&tg, STAX_OP_Add, 2, ab, STAX_DTYPE_FLOAT32, 3, shapes[s], 0, NULL);
      int32_t relu = tg_node(&tg, STAX_OP_Relu, 1, &sum, STAX_DTYPE_FLOAT32, 3, shapes[s], 0, NULL);
      tg_output(&tg, relu);
      int32_t block_stages = -1;
      CHECK_EQ_INT(cuda_case_blocks(&tg, "add_relu", 0, 0, &block_stages), 1);
      CHECK_EQ_INT(block_stages, 0); /* no reductions: one thread per element */
      tg_free(&tg);
    }
}

/* x[N, C, H] * scale[C, 1] + bias[H]: broadcasting on both sides, float64 too. */
static void test_broadcast_mul(void) {
  stax_dtype_t dtypes[2] = {STAX_DTYPE_FLOAT32, STAX_DTYPE_FLOAT64};
  for (int32_t d = 0; d < 2; d++) {
    test_group_t tg;
    tg_init(&tg);
    int64_t dims[3] = {3, 4, 37}, scale_dims[2] = {4, 1}, bias_dims[1] = {37};
    int32_t x = tg_input(&tg, "x", dtypes[d], 3, dims);
    int32_t scale = tg_input(&tg, "scale", dtypes[d], 2, scale_dims);
    int32_t bias = tg_input(&tg, "bias", dtypes[d], 1, bias_dims);
    int32_t xs[2] = {x, scale};
    int32_t product = tg_node(&tg, STAX_OP_Mul, 2, xs, dtypes[d], 3, dims, 0, NULL);
    int32_t pb[2] = {product, bias};
    int32_t sum = tg_node(&tg, STAX_OP_Add, 2, pb, dtypes[d], 3, dims, 0, NULL);
    int32_t maxed = tg_node(&tg, STAX_OP_Max, 2, pb, dtypes[d], 3, dims, 0, NULL);
    tg_output(&tg, sum);
    tg_output(&tg, maxed);
    CHECK_EQ_INT(cuda_case(&tg, "broadcast_mul", 0, 0), 1);
    tg_free(&tg);
  }
}

static void test_gelu_tanh_erf(void) {
  test_group_t tg;
  tg_init(&tg);
  int64_t dims[2] = {7, 129};
  int32_t x = tg_input(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t gelu = tg_node(&tg, STAX_OP_Gelu, 1, &x, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  stax_node_attr_t tanh_approx = tg_attr_string("approximate", "tanh");
  int32_t gelu_tanh =
      tg_node(&tg, STAX_OP_Gelu, 1, &x, STAX_DTYPE_FLOAT32, 2, dims, 1, &tanh_approx);
  int32_t sig = tg_node(&tg, STAX_OP_Sigmoid, 1, &gelu, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  tg_output(&tg, gelu);
  tg_output(&tg, gelu_tanh);
  tg_output(&tg, sig);
  CHECK_EQ_INT(cuda_case(&tg, "gelu", 2e-6, 2e-6), 1);
  tg_free(&tg);
}

/* Where(x > y, x, -y), a bool output, and a saturating float -> int32 Cast. */
static void test_where_compare_cast(void) {
  test_group_t tg;
  tg_init(&tg);
  int64_t dims[2] = {5, 19};
  int32_t x = tg_input_layout(&tg, "x", STAX_DTYPE_FLOAT32, 2, dims, 0, -3e9, 3e9);
  int32_t y = tg_input(&tg, "y", STAX_DTYPE_FLOAT32, 2, dims);
  int32_t xy[2] = {x, y};
  int32_t greater = tg_node(&tg, STAX_OP_Greater, 2, xy, STAX_DTYPE_BOOL, 2, dims, 0, NULL);
  int32_t negative = tg_node(&tg, STAX_OP_Neg, 1, &y, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  int32_t where_in[3] = {greater, x, negative};
  int32_t where = tg_node(&tg, STAX_OP_Where, 3, where_in, STAX_DTYPE_FLOAT32, 2, dims, 0, NULL);
  stax_node_attr_t to = tg_attr_int("to", 6); /* ONNX INT32 */
  int32_t cast = tg_node(&tg, STAX_OP_Cast, 1, &x, STAX_DTYPE_INT32, 2, dims, 1, &to);
  tg_output(&tg, where);
  tg_output(&tg, greater);
  tg_output(&tg, cast);
  CHECK_EQ_INT(cuda_case(&tg, "where_cast", 0, 0), 1);
  tg_free(&tg);
}

static void test_softmax(void) {
  int64_t shapes[][3] = {{2, 3, 5}, {1, 4, 64}, {2, 2, 1000}, {3, 1, 1}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
    for (int32_t log = 0; log < 2; log++) {
      test_group_t tg;
      tg_init(&tg);
      int32_t x = tg_input_layout(&tg, "x", STAX_DTYPE_FLOAT32, 3, shapes[s], (int32_t)s % 4, -4, 4);
      stax_node_attr_t axis = tg_attr_int("axis", -1);
      int32_t soft = tg_node(&tg, log ? STAX_OP_LogSoftmax : STAX_OP_Softmax, 1, &x,
                             STAX_DTYPE_FLOAT32, 3, shapes[s], 1, &axis);
      tg_output(&tg, soft);
      int32_t block_stages = 0;
      CHECK(cuda_case_blocks(&tg, log ? "log_softmax" : "softmax", 2e-6, 1e-5, &block_stages) >= 1);
      CHECK(block_stages >= 1); /* the row reductions run over a block */
      tg_free(&tg);
    }
}

static void test_layernorm_gelu(void) {
  int64_t dims[3] = {2, 3, 48}, row[1] = {48};
  test_group_t tg;
  tg_init(&tg);
  int32_t x = tg_input_layout(&tg, "x", STAX_DTYPE_FLOAT32, 3, dims, 0, -3, 5);
  int32_t scale = tg_input(&tg, "scale", STAX_DTYPE_FLOAT32, 1, row);
  int32_t bias = tg_input(&tg, "bias", STAX_DTYPE_FLOAT32, 1, row);
  int32_t y = tg_value(&tg, STAX_DTYPE_FLOAT32, 3, dims);
  int32_t inputs[3] = {x, scale, bias};
  stax_node_attr_t attrs[2] = {tg_attr_int("axis", -1), tg_attr_float("epsilon", 1e-3f)};
  tg_node_n(&tg, STAX_OP_LayerNormalization, 3, inputs, 1, &y, 2, attrs);
  int32_t activated = tg_node(&tg, STAX_OP_Gelu, 1, &y, STAX_DTYPE_FLOAT32, 3, dims, 0, NULL);
  tg_output(&tg, activated);
  int32_t block_stages = 0;
  CHECK(cuda_case_blocks(&tg, "layernorm_gelu", 2e-5, 2e-5, &block_stages) >= 1);
  CHECK(block_stages >= 1);
  tg_free(&tg);
}

/* What the codegen does not handle is refused with the reason, never emitted. */
static void test_refusals(void) {
  stax_kir_kernel_t* kernel = NULL;
  CHECK_OK(stax_kir_kernel_create(tg_sys(), "halves", &kernel));
  int64_t dims[1] = {8};
  int32_t in = stax_kir_add_buffer(kernel, "x", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT16, 1, dims,
                                   NULL);
  int32_t out = stax_kir_add_buffer(kernel, "y", STAX_KIR_BUFFER_OUTPUT, STAX_DTYPE_FLOAT16, 1,
                                    dims, NULL);
  stax_kir_block_t* block = stax_kir_add_stage(kernel, "main");
  stax_kir_loop_t* loop = stax_kir_add_loop(kernel, block, "i", 8);
  stax_kir_index_t index = stax_kir_index_constant(0);
  stax_kir_index_add_term(kernel, &index, stax_kir_loop_id(kernel, loop), 1);
  stax_kir_add_store(kernel, &loop->body, out, &index, stax_kir_load(kernel, in, &index));
  CHECK_OK(stax_kir_kernel_status(kernel));
  stax_cuda_source_t source;
  CHECK_ERROR(stax_cuda_codegen(kernel, NULL, tg_sys(), &source), STAX_UNIMPLEMENTED,
              "dtype float16 is not handled");
  CHECK(source.text == NULL && source.stage_count == 0);
  stax_kir_kernel_destroy(kernel);

  /* A scratch buffer (matmul's packed panels) needs a device allocator. */
  kernel = NULL;
  CHECK_OK(stax_kir_kernel_create(tg_sys(), "scratch", &kernel));
  stax_kir_add_buffer(kernel, "x", STAX_KIR_BUFFER_INPUT, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  stax_kir_add_buffer(kernel, "panel", STAX_KIR_BUFFER_SCRATCH, STAX_DTYPE_FLOAT32, 1, dims, NULL);
  CHECK_ERROR(stax_cuda_codegen(kernel, NULL, tg_sys(), &source), STAX_UNIMPLEMENTED,
              "scratch buffer panel needs a device allocator");
  stax_kir_kernel_destroy(kernel);

  /* A rows-generic kernel (run-time row count). */
  kernel = NULL;
  CHECK_OK(stax_kir_kernel_create(tg_sys(), "rows", &kernel));
  stax_kir_set_rows_generic(kernel, 4, 1);
  CHECK_ERROR(stax_cuda_codegen(kernel, NULL, tg_sys(), &source), STAX_UNIMPLEMENTED,
              "rows-generic kernels (run-time parameters) are not handled");
  stax_kir_kernel_destroy(kernel);
}

/* A failing NVRTC compile reports NVRTC's log. */
static void test_nvrtc_error_log(void) {
  const stax_cuda_nvrtc_t* nvrtc = test_nvrtc();
  if (!nvrtc) return;
  char* ptx = NULL;
  size_t size = 0;
  CHECK_ERROR(stax_cuda_compile_ptx(nvrtc, "extern \"C\" __global__ void k() { undeclared_x = 1; }",
                                    "broken.cu", 9, 0, tg_sys(), &ptx, &size),
              STAX_INTERNAL, "undeclared_x");
  CHECK(ptx == NULL && size == 0);
}

STAX_TEST_MAIN(STAX_TEST(test_add_relu), STAX_TEST(test_broadcast_mul),
               STAX_TEST(test_gelu_tanh_erf), STAX_TEST(test_where_compare_cast),
               STAX_TEST(test_softmax), STAX_TEST(test_layernorm_gelu), STAX_TEST(test_refusals),
               STAX_TEST(test_nvrtc_error_log))
