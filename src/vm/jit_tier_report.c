/* The JIT tier's reporting side: verify mode (kernel vs interpreter on the same inputs),
 * per-segment statistics (C API and JSON) and kernel sources for `stax source`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tensor_internal.h"
#include "vm/jit_tier_internal.h"

/* ---- verify mode ---------------------------------------------------------------------------- */

/* Element i of a contiguous tensor as a double (float and integer dtypes), for comparing. */
static bool jit_element(const stax_tensor_t* t, int64_t i, double* out) {
  const void* data = stax_tensor_data(t);
  switch (t->dtype) {
    case STAX_DTYPE_FLOAT32: *out = ((const float*)data)[i]; return true;
    case STAX_DTYPE_FLOAT64: *out = ((const double*)data)[i]; return true;
    case STAX_DTYPE_FLOAT16: *out = stax_f16_to_f32(((const uint16_t*)data)[i]); return true;
    case STAX_DTYPE_BFLOAT16: *out = stax_bf16_to_f32(((const uint16_t*)data)[i]); return true;
    default: return false;
  }
}

/* Verify's tolerance for a dtype: the context's, but at least one unit in the last place of a
 * 16-bit float (kernels compute those in float32 as the interpreter does, but their float32
 * math may differ from its in the last bits, which can round the other way). */
static double jit_tolerance(const jit_frame* frame, stax_dtype_t dtype) {
  double ulp = dtype == STAX_DTYPE_FLOAT16 ? 0x1p-10 : dtype == STAX_DTYPE_BFLOAT16 ? 0x1p-7 : 0;
  return frame->tolerance > ulp ? frame->tolerance : ulp;
}

/* Runs the kernels (keeping every input alive), then interprets the segment on the same
 * inputs, and compares every kernel output still live after it. The registers end with the
 * interpreter's results. */
stax_status_t stax_vm_jit_verify_segment(stax_context_t* ctx, int32_t s, uint64_t hash,
                                        const jit_plan* plan, stax_jit_kernel_t** kernels,
                                        bool* out_ran) {
  jit_frame* frame = ctx->jit;
  STAX_RETURN_IF_ERROR(stax_vm_jit_run_kernels(ctx, plan, kernels, false, out_ran));
  if (!*out_ran) return STAX_OK;
  int32_t count = 0;
  for (int32_t g = 0; g < plan->group_count; g++) count += plan->groups[g].output_count;
  stax_tensor_t** results = calloc((size_t)(count ? count : 1), 2 * sizeof(*results));
  if (!results) return stax_status_make(STAX_OUT_OF_MEMORY, "jit verify");
  int32_t* regs = (int32_t*)(results + count);
  int32_t n = 0;
  for (int32_t g = 0; g < plan->group_count; g++) {
    const jit_group_plan* gp = &plan->groups[g];
    for (int32_t o = 0; o < gp->output_count; o++) {
      regs[n] = gp->value_regs[gp->outputs[o]];
      results[n] = ctx->registers[regs[n]];
      stax_tensor_retain(results[n]);
      n++;
    }
  }
  stax_status_t status = STAX_OK;
  const int32_t* code = ctx->program->code;
  for (int32_t w = plan->start_word; w < plan->next_word && !status;
       w += (int32_t)((uint32_t)code[w] >> STAX_VM_LENGTH_SHIFT)) {
    status = stax_vm_jit_exec_one(ctx, code + w);
  }
  for (int32_t k = 0; k < n && !status; k++) {
    const stax_tensor_t* want = ctx->registers[regs[k]];
    const stax_tensor_t* got = results[k];
    if (!want) continue; /* freed inside the segment: checked through its consumers */
    int64_t elements = stax_tensor_element_count(got);
    size_t size = stax_dtype_size(got->dtype);
    double tolerance = jit_tolerance(frame, got->dtype);
    for (int64_t i = 0; i < elements; i++) {
      double a = 0, b = 0;
      bool mismatch;
      if (jit_element(got, i, &a) && jit_element(want, i, &b))
        /* Equal values pass first: inf - inf is NaN, which no tolerance accepts. */
        mismatch = a != b && !(fabs(a - b) <= tolerance * (1 + fabs(b))) &&
                   !(isnan(a) && isnan(b));
      else
        mismatch = memcmp((const char*)stax_tensor_data(got) + (size_t)i * size,
                          (const char*)stax_tensor_data(want) + (size_t)i * size, size) != 0;
      if (mismatch) {
        status = stax_status_make(
            STAX_INTERNAL,
            "jit verify: segment %d, signature %016llx: output '%s' element %lld differs "
            "(kernel %g, interpreter %g, tolerance %g)",
            s, (unsigned long long)hash, stax_vm_register_name(ctx->program, regs[k]),
            (long long)i, a, b, tolerance);
        break;
      }
    }
  }
  for (int32_t k = 0; k < n; k++) stax_tensor_release(results[k]);
  free(results);
  return status;
}

/* ---- statistics and sources ----------------------------------------------------------------- */

int32_t stax_program_segment_count(const stax_program_t* program) {
  return program ? program->segments_count : 0;
}

stax_status_t stax_program_jit_stats(const stax_program_t* program, int32_t segment,
                                     stax_jit_segment_stats_t* out_stats) {
  if (!program || !out_stats)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_program_jit_stats: NULL argument");
  if (segment < 0 || segment >= program->segments_count)
    return stax_status_make(STAX_INVALID_ARGUMENT, "segment %d of %d", segment,
                            program->segments_count);
  memset(out_stats, 0, sizeof(*out_stats));
  jit_cache* cache = atomic_load(&((stax_program_t*)program)->jit_cache);
  if (!cache) return STAX_OK;
  pthread_mutex_lock(&cache->lock);
  *out_stats = cache->segments[segment].stats;
  pthread_mutex_unlock(&cache->lock);
  return STAX_OK;
}

stax_status_t stax_program_jit_call_stats(const stax_program_t* program,
                                          stax_jit_call_stats_t* out_stats) {
  if (!program || !out_stats)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_program_jit_call_stats: NULL argument");
  memset(out_stats, 0, sizeof(*out_stats));
  jit_cache* cache = atomic_load(&((stax_program_t*)program)->jit_cache);
  if (!cache) return STAX_OK;
  pthread_mutex_lock(&cache->lock);
  out_stats->compiled = cache->calls_compiled;
  out_stats->partial = cache->calls_partial;
  out_stats->interpreted = cache->calls_interpreted;
  pthread_mutex_unlock(&cache->lock);
  return STAX_OK;
}

static const char* version_state_name(int32_t state) {
  switch (state) {
    case VERSION_COUNTING: return "counting";
    case VERSION_QUEUED: return "compiling";
    case VERSION_READY: return "ready";
    case VERSION_RETIRED: return "retired";
    default: return "failed";
  }
}

/* The compiled (or compiling, or failed) versions of a segment: kind, state, compile time and
 * how many of its groups have a kernel. */
static void print_versions_json(const stax_program_t* program, int32_t s, FILE* out) {
  jit_cache* cache = atomic_load(&((stax_program_t*)program)->jit_cache);
  fprintf(out, "[");
  if (!cache) {
    fprintf(out, "]");
    return;
  }
  pthread_mutex_lock(&cache->lock);
  jit_segment* seg = &cache->segments[s];
  int32_t printed = 0;
  for (int32_t v = 0; v < seg->version_count; v++) {
    const jit_version* ver = &seg->versions[v];
    if (ver->state == VERSION_COUNTING) continue;
    int32_t kernels = 0;
    for (int32_t g = 0; ver->kernels && g < seg->plan.group_count; g++) kernels += ver->kernels[g] != NULL;
    fprintf(out,
            "%s{\"kind\": \"%s\", \"state\": \"%s\", \"compile_ms\": %.3f, \"kernels\": %d, "
            "\"groups\": %d, \"promoted\": %s, \"trial\": \"%s\"}",
            printed++ ? ", " : "", ver->generic ? "generic" : "exact",
            version_state_name(ver->state), ver->compile_ms, kernels, seg->plan.group_count,
            ver->promoted ? "true" : "false",
            !ver->promoted ? "none" : ver->trial_done ? "decided" : "running");
  }
  pthread_mutex_unlock(&cache->lock);
  fprintf(out, "]");
}

/* The program's JIT statistics; with a context, its memory statistics too. */
static stax_status_t jit_stats_json(const stax_program_t* program, const stax_context_t* ctx,
                                    FILE* out) {
  stax_jit_segment_stats_t total = {0};
  fprintf(out, "{\n  \"segments\": [");
  for (int32_t s = 0; s < stax_program_segment_count(program); s++) {
    stax_jit_segment_stats_t st;
    STAX_RETURN_IF_ERROR(stax_program_jit_stats(program, s, &st));
    fprintf(out,
            "%s\n    {\"segment\": %d, \"entries\": %llu, \"hits\": %llu, \"full_hits\": %llu, "
            "\"partial_hits\": %llu, \"misses\": %llu, "
            "\"compiles\": %llu, \"failures\": %llu, \"evictions\": %llu, "
            "\"compile_ms\": %.3f, \"versions\": %d, \"generic_versions\": %d, "
            "\"exact_versions\": %d, \"generic_compile_ms\": %.3f, \"exact_compile_ms\": %.3f, "
            "\"signatures\": %d, \"promotions\": %llu, \"promoted_groups_kept\": %llu, "
            "\"promoted_groups_dropped\": %llu, \"dtype_fallbacks\": %llu, \"version_list\": ",
            s ? "," : "", s, (unsigned long long)st.entries, (unsigned long long)st.hits,
            (unsigned long long)st.full_hits, (unsigned long long)st.partial_hits,
            (unsigned long long)st.misses, (unsigned long long)st.compiles,
            (unsigned long long)st.failures, (unsigned long long)st.evictions, st.compile_ms,
            st.versions, st.generic_versions, st.exact_versions, st.generic_compile_ms,
            st.exact_compile_ms, st.signatures, (unsigned long long)st.promotions,
            (unsigned long long)st.promoted_groups_kept,
            (unsigned long long)st.promoted_groups_dropped, (unsigned long long)st.dtype_fallbacks);
    print_versions_json(program, s, out);
    fprintf(out, "}");
    total.entries += st.entries;
    total.hits += st.hits;
    total.full_hits += st.full_hits;
    total.partial_hits += st.partial_hits;
    total.misses += st.misses;
    total.compiles += st.compiles;
    total.failures += st.failures;
    total.evictions += st.evictions;
    total.compile_ms += st.compile_ms;
    total.generic_versions += st.generic_versions;
    total.exact_versions += st.exact_versions;
    total.generic_compile_ms += st.generic_compile_ms;
    total.exact_compile_ms += st.exact_compile_ms;
    total.promotions += st.promotions;
    total.promoted_groups_kept += st.promoted_groups_kept;
    total.promoted_groups_dropped += st.promoted_groups_dropped;
    total.dtype_fallbacks += st.dtype_fallbacks;
  }
  stax_jit_call_stats_t calls;
  STAX_RETURN_IF_ERROR(stax_program_jit_call_stats(program, &calls));
  /* hit_rate counts only fully compiled entries: a partly compiled one interprets some of
   * its groups. */
  fprintf(out,
          "\n  ],\n  \"total\": {\"entries\": %llu, \"hits\": %llu, \"full_hits\": %llu, "
          "\"partial_hits\": %llu, \"misses\": %llu, "
          "\"hit_rate\": %.4f, \"compiles\": %llu, \"failures\": %llu, \"evictions\": %llu, "
          "\"compile_ms\": %.3f, \"generic_versions\": %d, \"exact_versions\": %d, "
          "\"generic_compile_ms\": %.3f, \"exact_compile_ms\": %.3f, \"promotions\": %llu, "
          "\"promoted_groups_kept\": %llu, \"promoted_groups_dropped\": %llu, "
          "\"dtype_fallbacks\": %llu},\n"
          "  \"calls\": {\"compiled\": %llu, \"partial\": %llu, \"interpreted\": %llu}",
          (unsigned long long)total.entries, (unsigned long long)total.hits,
          (unsigned long long)total.full_hits, (unsigned long long)total.partial_hits,
          (unsigned long long)total.misses,
          total.entries ? (double)total.full_hits / (double)total.entries : 0.0,
          (unsigned long long)total.compiles, (unsigned long long)total.failures,
          (unsigned long long)total.evictions, total.compile_ms, total.generic_versions,
          total.exact_versions, total.generic_compile_ms, total.exact_compile_ms,
          (unsigned long long)total.promotions, (unsigned long long)total.promoted_groups_kept,
          (unsigned long long)total.promoted_groups_dropped,
          (unsigned long long)total.dtype_fallbacks, (unsigned long long)calls.compiled,
          (unsigned long long)calls.partial, (unsigned long long)calls.interpreted);
  if (ctx) {
    fprintf(out, ",\n  \"memory\": ");
    STAX_RETURN_IF_ERROR(stax_context_memory_stats_json(ctx, out));
  }
  /* The buffer pool of the thread writing the statistics (the one that ran the calls, for
   * `stax run`); live and peak bytes are process-wide. */
  stax_pool_stats_t pool = stax_pool_stats();
  fprintf(out,
          ",\n  \"pool\": {\"hits\": %llu, \"misses\": %llu, \"returns\": %llu, "
          "\"evictions\": %llu, \"bytes_cached\": %llu, \"live_bytes\": %llu, "
          "\"peak_live_bytes\": %llu, \"limit\": %llu}",
          (unsigned long long)pool.hits, (unsigned long long)pool.misses,
          (unsigned long long)pool.returns, (unsigned long long)pool.evictions,
          (unsigned long long)pool.bytes_cached, (unsigned long long)pool.live_bytes,
          (unsigned long long)pool.peak_live_bytes, (unsigned long long)pool.limit);
  fprintf(out, "\n}\n");
  return STAX_OK;
}

stax_status_t stax_program_jit_stats_json(const stax_program_t* program, FILE* out) {
  return jit_stats_json(program, NULL, out);
}

stax_status_t stax_context_stats_json(const stax_context_t* context, FILE* out) {
  if (!context)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_context_stats_json: context is NULL");
  return jit_stats_json(context->program, context, out);
}

void stax_vm_jit_keep_texts(stax_program_t* program) {
  jit_cache* cache = stax_vm_jit_cache_get(program);
  if (!cache) return;
  pthread_mutex_lock(&cache->lock);
  cache->keep_texts = true;
  pthread_mutex_unlock(&cache->lock);
}

stax_status_t stax_vm_jit_set_cache_dir(stax_program_t* program, const char* dir) {
  if (dir && strlen(dir) >= STAX_VM_JIT_CACHE_DIR_MAX)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "jit cache folder \"%.64s...\" is %zu bytes long, over the %d "
                            "allowed", dir, strlen(dir), STAX_VM_JIT_CACHE_DIR_MAX - 1);
  jit_cache* cache = stax_vm_jit_cache_get(program);
  if (!cache) return stax_status_make(STAX_OUT_OF_MEMORY, "jit: program cache");
  pthread_mutex_lock(&cache->lock);
  cache->cache_dir_set = dir != NULL;
  snprintf(cache->cache_dir, sizeof(cache->cache_dir), "%s", dir ? dir : "");
  pthread_mutex_unlock(&cache->lock);
  return STAX_OK;
}

stax_status_t stax_vm_jit_print_sources(stax_program_t* program, bool assembly, FILE* out) {
  jit_cache* cache = atomic_load(&program->jit_cache);
  int32_t printed = 0;
  if (!cache) return stax_status_make(STAX_FAILED_PRECONDITION, "no segment was compiled");
  pthread_mutex_lock(&cache->lock);
  for (int32_t s = 0; s < cache->segment_count; s++) {
    jit_segment* seg = &cache->segments[s];
    if (seg->plan.state == PLAN_UNSUPPORTED)
      fprintf(out, "; segment %d: interpreted (views, moves or no compute)\n", s);
    for (int32_t v = 0; v < seg->version_count; v++) {
      jit_version* ver = &seg->versions[v];
      if (ver->state == VERSION_FAILED)
        fprintf(out, "; segment %d: not compiled (the backend refused it; STAX_LOG=jit says why)\n", s);
      if (ver->state != VERSION_READY) continue;
      fprintf(out, "; ==== segment %d: %s version ====\n", s,
              ver->generic ? "shape-generic (rows-generic kernels)" : "exact-shape");
      for (int32_t g = 0; g < seg->plan.group_count; g++) {
        if (!ver->kernels[g]) {
          fprintf(out, "; ---- segment %d, group %d of %d: interpreted (not fusible) ----\n", s,
                  g + 1, seg->plan.group_count);
          continue;
        }
        const char* text = assembly ? stax_jit_kernel_asm_text(ver->kernels[g])
                                    : stax_jit_kernel_llvm_ir_text(ver->kernels[g], true);
        fprintf(out, "; ---- segment %d, kernel %d of %d (%s) ----\n%s\n", s, g + 1,
                seg->plan.group_count, stax_jit_kernel_name(ver->kernels[g]),
                text ? text : "(no text kept)");
        printed++;
      }
    }
  }
  pthread_mutex_unlock(&cache->lock);
  if (!printed) fprintf(out, "; no kernel was compiled for these shapes\n");
  return STAX_OK;
}

/* ---- public wrappers (include/stax/vm.h) --------------------------------------------------- */

void stax_program_jit_keep_sources(stax_program_t* program) { stax_vm_jit_keep_texts(program); }

stax_status_t stax_program_jit_set_cache_dir(stax_program_t* program, const char* dir) {
  return stax_vm_jit_set_cache_dir(program, dir);
}

stax_status_t stax_program_jit_sources(stax_program_t* program, bool assembly, FILE* out) {
  return stax_vm_jit_print_sources(program, assembly, out);
}
