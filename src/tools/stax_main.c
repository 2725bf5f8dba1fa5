/* The stax command-line program: verb dispatch and the top-level help. */
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"

typedef struct stax_cli_verb_t {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
} stax_cli_verb_t;

static const stax_cli_verb_t stax_cli_verbs[] = {
    {"run", stax_cli_run, "run a model (ONNX or compiled program) on .npy/.pb or synthetic inputs"},
    {"compile", stax_cli_compile, "compile an ONNX model to a bytecode program file"},
    {"info", stax_cli_info, "print inputs, outputs, symbolic shapes and the op histogram"},
    {"dis", stax_cli_dis, "disassemble the bytecode (extended and compact forms)"},
    {"source", stax_cli_source, "print the JIT's LLVM IR or assembly per segment for given shapes"},
    {"report", stax_cli_report, "plot a --stats-json file: latency per call, compiles, hit/miss\n"
                                "              (Python package: pip install, then stax report)"},
};

static void print_usage(FILE* f) {
  fprintf(f,
          "usage: stax <command> [options]\n"
          "\n"
          "commands:\n");
  for (size_t i = 0; i < sizeof(stax_cli_verbs) / sizeof(stax_cli_verbs[0]); i++)
    fprintf(f, "  %-10s  %s\n", stax_cli_verbs[i].name, stax_cli_verbs[i].summary);
  fprintf(f,
          "  %-10s  %s\n"
          "  %-10s  %s\n"
          "\n"
          "Run 'stax <command> --help' for a command's options.\n"
          "Environment: STAX_LOG=channel,... (general, alloc, shape, ir, pass, vm, jit, onnx,\n"
          "pool, or all) switches logging on; STAX_NUM_THREADS sets the thread count\n"
          "(idle threads spin STAX_SPIN_MICROS, default 50, before sleeping; 0: never);\n"
          "STAX_JIT_CACHE_DIR sets the folder of compiled JIT kernels kept across runs\n"
          "(default ~/.cache/stax/jit, at most STAX_JIT_CACHE_MAX_MB, default 256),\n"
          "STAX_JIT_CACHE=0 turns that cache off; STAX_JIT_SYMBOLIC=0 leaves attention-\n"
          "like groups (no row structure) to exact-shape kernels instead of symbolic ones;\n"
          "STAX_JIT_BACKEND=none runs without the JIT backend, as a build without LLVM\n"
          "does (a warning says so once);\n"
          "STAX_JIT_PROMOTE=0 gives a hot shape no exact-shape version of its own (by\n"
          "default one is compiled and timed against the shape-generic kernels);\n"
          "STAX_ISA=avx512|avx2|sse2 caps the vector instructions the kernels and the JIT\n"
          "use (default: the CPU's best); STAX_DISABLE_PASSES=cse,fuse,... (or all)\n"
          "switches graph passes off (fold, noop, simplify, fuse, bnfold, widen, shapefold,\n"
          "fill, gemmtrans, cse, dce);\n"
          "STAX_MEMORY_PLAN=0 switches memory planning off (every temporary from the\n"
          "buffer pool instead of the per-call arena); STAX_PROGRESS=1 prints progress\n"
          "lines (long sync compiles, waiting for background ones) even when stderr is not\n"
          "a terminal, STAX_PROGRESS=0 never; STAX_NVRTC_PATH names the NVRTC library to\n"
          "load. stax runs on the CPU only: the CUDA driver and NVRTC are only probed\n"
          "(`stax version --verbose`; docs/gpu.md).\n",
          "version", "print the stax version (--verbose: ISA, JIT, cache, CUDA, NVRTC)", "help",
          "print this text");
}

/* `stax version --verbose`: what this build and machine give the kernels. */
static void print_build_info(void) {
  stax_build_info_t info;
  stax_build_info(&info);
  printf("isa: %s (the CPU's: %s; STAX_ISA caps it)\n", stax_isa_name(info.isa),
         stax_isa_name(info.isa_detected));
  printf("generic gemm: %s, float32 tile %d x %d\n", info.gemm_variant, (int)info.gemm_tile_rows,
         (int)info.gemm_tile_cols);
  if (info.jit_available)
    printf("jit: %s, cpu %s, %d-bit vectors%s, matmul tile %d x %d\n", info.jit_backend,
           info.jit_cpu, (int)info.jit_vector_bits, info.jit_fma ? ", fma" : "",
           (int)info.jit_matmul_tile_rows, (int)info.jit_matmul_tile_cols);
  else
    printf("jit: unavailable (%s); models run interpreted\n", info.jit_unavailable);
  printf("jit cache: %s\n", info.jit_cache ? info.jit_cache_dir : "off");
  if (info.cuda_driver)
    printf("cuda driver: %d.%d, %d device(s), device 0 %s, compute capability %d.%d\n",
           (int)info.cuda_driver_version / 1000, (int)info.cuda_driver_version % 1000 / 10,
           (int)info.cuda_device_count, info.cuda_device_name, (int)info.cuda_compute_major,
           (int)info.cuda_compute_minor);
  else
    printf("cuda driver: none: %s\n", info.cuda_driver_unavailable);
  if (info.cuda_nvrtc)
    printf("nvrtc: %d.%d (%s)\n", (int)info.cuda_nvrtc_major, (int)info.cuda_nvrtc_minor,
           info.cuda_nvrtc_path);
  else
    printf("nvrtc: none: %s\n", info.cuda_nvrtc_unavailable);
  printf("gpu: none: %s\n", info.gpu_unavailable);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return STAX_CLI_USAGE;
  }
  const char* verb = argv[1];
  if (strcmp(verb, "help") == 0 || stax_cli_is_help(verb)) {
    print_usage(stdout);
    return STAX_CLI_OK;
  }
  if (strcmp(verb, "version") == 0 || strcmp(verb, "--version") == 0) {
    printf("stax %s\n", stax_version());
    if (argc > 2 && (strcmp(argv[2], "--verbose") == 0 || strcmp(argv[2], "-v") == 0))
      print_build_info();
    return STAX_CLI_OK;
  }
  for (size_t i = 0; i < sizeof(stax_cli_verbs) / sizeof(stax_cli_verbs[0]); i++)
    if (strcmp(verb, stax_cli_verbs[i].name) == 0) return stax_cli_verbs[i].run(argc - 1, argv + 1);
  const char* names[sizeof(stax_cli_verbs) / sizeof(stax_cli_verbs[0]) + 2];
  int name_count = 0;
  for (size_t i = 0; i < sizeof(stax_cli_verbs) / sizeof(stax_cli_verbs[0]); i++)
    names[name_count++] = stax_cli_verbs[i].name;
  names[name_count++] = "version";
  names[name_count++] = "help";
  const char* suggestion = stax_cli_suggest(verb, names, name_count);
  if (suggestion)
    fprintf(stderr, "stax: unknown command '%s'; did you mean '%s'? (see 'stax --help')\n", verb,
            suggestion);
  else
    fprintf(stderr, "stax: unknown command '%s' (see 'stax --help')\n", verb);
  return STAX_CLI_USAGE;
}
