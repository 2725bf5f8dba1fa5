/* The JIT tier: segment plans (fusion groups), shape signatures, the per-program kernel cache
 * with tiering and LRU eviction, the background compiler and the guarded hit path. Verify
 * mode, statistics and sources are in jit_tier_report.c. See docs/jit.md ("Tiering").
 *
 * Execution model of a hit: a segment holds compute instructions whose outputs the VM
 * allocates, ALLOC_TENSOR(_FAST), FREE_TENSOR, and views/moves/loads/stores (anything else
 * makes it "unsupported": always interpreted). No symbol changes inside a segment
 * (SHAPE_VARIANT is a barrier), so running the pre instructions (views of external values),
 * the needed ALLOCs, the groups' kernels in order, the post instructions, then every FREE
 * leaves the registers exactly as interpreting the segment would, except that values
 * internal to one group are never materialized. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/tensor_internal.h"
#include "vm/jit_tier_internal.h"

static double jit_now_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6;
}

static bool jit_grow(void** data, int32_t* capacity, int32_t need, size_t size) {
  if (need <= *capacity) return true;
  int32_t cap = *capacity ? *capacity : 8;
  while (cap < need) cap *= 2;
  void* grown = realloc(*data, (size_t)cap * size);
  if (!grown) return false;
  *data = grown;
  *capacity = cap;
  return true;
}

/* ---- plans ---------------------------------------------------------------------------------- */

static void jit_plan_free(jit_plan* plan) {
  for (int32_t g = 0; g < plan->group_count; g++) {
    jit_group_plan* gp = &plan->groups[g];
    free(gp->value_regs);
    free(gp->roles);
    free(gp->node_words);
    free(gp->inputs);
    free(gp->outputs);
    free(gp->value_leads);
  }
  free(plan->groups);
  free(plan->ext_regs);
  free(plan->ext_leads);
  free(plan->bcast_codes);
  free(plan->bcast_links);
  free(plan->bcast_pinned);
  free(plan->alloc_words);
  free(plan->alloc_group);
  free(plan->alloc_before);
  free(plan->free_regs);
  free(plan->free_after);
  free(plan->pre_words);
  free(plan->post_words);
  free(plan->post_after);
  memset(plan, 0, sizeof(*plan));
}

/* What a node may share a kernel with (the backend's stax_jit_op_class): one contraction
 * (MatMul, Gemm, Conv, a pool) with an elementwise epilogue, or row reductions with
 * elementwise producers and consumers. An op without any lowering (LRN, Concat...) is kept in
 * a group of its own, so its neighbours still compile. */
typedef enum { KIND_ELEMENTWISE, KIND_ROW, KIND_CONTRACTION, KIND_ALONE } jit_kind;
static jit_kind jit_node_kind(stax_op_t op) {
  switch (stax_jit_op_class(op)) {
    case STAX_JIT_OP_CONTRACTION: return KIND_CONTRACTION;
    case STAX_JIT_OP_ROW: return KIND_ROW;
    case STAX_JIT_OP_ELEMENTWISE: return KIND_ELEMENTWISE;
    default: return KIND_ALONE;
  }
}

static int32_t jit_find(const int32_t* list, int32_t count, int32_t value) {
  for (int32_t i = 0; i < count; i++)
    if (list[i] == value) return i;
  return -1;
}

#define JIT_PUSH(arr, count, cap, value)                                                 \
  do {                                                                                   \
    if (!jit_grow((void**)&(arr), &(cap), (count) + 1, sizeof(*(arr)))) goto oom;        \
    (arr)[(count)++] = (value);                                                          \
  } while (0)

/* Registers post instruction `w` (a STORE_TENSOR or a view/move) reads: a stored value, a
 * view's source and a reshape's shape register when it has one (not a descriptor). Returns
 * how many (at most 2). */
static int32_t jit_post_sources(const int32_t* code, int32_t w, int32_t out[2]) {
  int32_t opcode = code[w] & STAX_VM_OPCODE_MASK;
  if (opcode == STAX_VM_OP_STORE_TENSOR) {
    out[0] = code[w + STAX_VM_HEADER_WORDS];
    return 1;
  }
  out[0] = code[w + STAX_VM_HEADER_WORDS + 1];
  if (opcode == STAX_VM_OP_RESHAPE_VIEW && code[w + STAX_VM_HEADER_WORDS + 3] >= 0) {
    out[1] = code[w + STAX_VM_HEADER_WORDS + 3];
    return 2;
  }
  return 1;
}

/* alloc_before and free_after (jit_tier_internal.h). A register allocated or freed twice in
 * the segment (never emitted today) keeps the old schedule: every ALLOC first, every FREE
 * last. False when out of memory. */
static bool jit_plan_lifetimes(const int32_t* code, jit_plan* plan, const int32_t* written,
                               int32_t written_count) {
  int32_t last = plan->group_count - 1;
  plan->alloc_before = calloc((size_t)(plan->alloc_count > 0 ? plan->alloc_count : 1), sizeof(int32_t));
  plan->free_after = calloc((size_t)(plan->free_count > 0 ? plan->free_count : 1), sizeof(int32_t));
  if (!plan->alloc_before || !plan->free_after) return false;
  bool unique = true;
  for (int32_t a = 0; a < plan->alloc_count && unique; a++)
    for (int32_t b = 0; b < a && unique; b++)
      unique = code[plan->alloc_words[a] + STAX_VM_HEADER_WORDS] !=
               code[plan->alloc_words[b] + STAX_VM_HEADER_WORDS];
  for (int32_t f = 0; f < plan->free_count && unique; f++)
    unique = jit_find(plan->free_regs, f, plan->free_regs[f]) < 0;
  for (int32_t a = 0; a < plan->alloc_count; a++) {
    int32_t reg = code[plan->alloc_words[a] + STAX_VM_HEADER_WORDS];
    int32_t first = 0;
    for (int32_t g = 0; unique && g < plan->group_count; g++)
      if (jit_find(plan->groups[g].value_regs, plan->groups[g].value_count, reg) >= 0) {
        first = g;
        break;
      }
    plan->alloc_before[a] = first;
  }
  for (int32_t f = 0; f < plan->free_count; f++) {
    int32_t reg = plan->free_regs[f];
    plan->free_after[f] = last;
    if (!unique || jit_find(written, written_count, reg) < 0) continue;
    int32_t after = 0;
    for (int32_t g = 0; g < plan->group_count; g++)
      if (jit_find(plan->groups[g].value_regs, plan->groups[g].value_count, reg) >= 0) after = g;
    for (int32_t p = 0; p < plan->post_count; p++) {
      int32_t sources[2];
      int32_t n = jit_post_sources(code, plan->post_words[p], sources);
      /* The view that makes a register counts as a use too, so one nothing reads is freed
       * after it is made, not before. */
      int32_t w = plan->post_words[p];
      bool makes = (code[w] & STAX_VM_OPCODE_MASK) != STAX_VM_OP_STORE_TENSOR &&
                   code[w + STAX_VM_HEADER_WORDS] == reg;
      if (!makes && jit_find(sources, n, reg) < 0) continue;
      /* A view made after the last group runs at the end: so must the FREE. */
      int32_t at = plan->post_after[p] >= last ? last : plan->post_after[p];
      if (at > after) after = at;
    }
    plan->free_after[f] = after;
  }
  return true;
}

/* Builds the plan of a segment (under the cache lock, once). */
/* Said once per process and (op, dtype), on stderr whatever STAX_LOG says: such a model
 * runs, several times slower than it would compiled, and nothing else would tell. */
static void jit_warn_dtype_fallback(stax_op_t op, stax_dtype_t dtype) {
  static _Atomic uint64_t warned[STAX_OP_COUNT];
  if (op < 0 || op >= STAX_OP_COUNT || dtype < 0 || dtype >= 64) return;
  uint64_t bit = (uint64_t)1 << dtype;
  if (atomic_fetch_or(&warned[op], bit) & bit) return;
  fprintf(stderr,
          "stax: warning: the JIT has no %s kernel for %s; groups with such a node run "
          "interpreted (the JIT statistics count them as dtype_fallbacks; docs/jit.md)\n",
          stax_op_name(op), stax_dtype_name(dtype));
}

/* A group holding a node whose lowering does not compute its dtype (a float64 MatMul, a
 * float16 AveragePool) can have no kernel: counted in the plan, and the group is not
 * lowerable, so such calls say what they are in the statistics from the first one on. */
static bool jit_group_dtype_fallback(const stax_program_t* program, const jit_group_plan* gp,
                                     jit_plan* plan) {
  for (int32_t n = 0; n < gp->node_count; n++) {
    const int32_t* word = program->code + gp->node_words[n];
    stax_op_t op = program->kernel_nodes[STAX_VM_OPERAND(word, 0)].op;
    const int32_t* in_list = &STAX_VM_OPERAND(word, 1);
    const int32_t* out_list = in_list + 1 + in_list[0];
    if (out_list[0] < 1 || out_list[1] < 0) continue;
    const stax_vm_descriptor_t* desc =
        &program->descriptors[program->registers[out_list[1]].descriptor];
    stax_dtype_t dtype = (stax_dtype_t)desc->dtype;
    if (stax_jit_op_dtype_lowered(op, dtype)) continue;
    plan->dtype_fallbacks++;
    jit_warn_dtype_fallback(op, dtype);
    return true;
  }
  return false;
}

static void jit_plan_build(const stax_program_t* program, const int32_t* word_of, int32_t s,
                           jit_plan* plan) {
  const stax_vm_segment_t* seg = &program->segments[s];
  const int32_t* code = program->code;
  plan->start_word = word_of[seg->first];
  plan->next_word = word_of[seg->first + seg->count];
  int32_t* computes = NULL;
  int32_t compute_count = 0, compute_cap = 0;
  int32_t* written = NULL;
  int32_t written_count = 0, written_cap = 0;
  int32_t *group_of = NULL, ext_cap = 0, alloc_cap = 0, free_cap = 0, pre_cap = 0, post_cap = 0;
  int32_t* post_regs = NULL; /* results of post views */
  int32_t post_reg_count = 0, post_reg_cap = 0;
  int32_t* post_srcs = NULL; /* registers post instructions read: must be materialized */
  int32_t post_src_count = 0, post_src_cap = 0;
  int32_t* post_at = NULL; /* per post instruction: computes before it (-1: at the end) */
  int32_t post_at_cap = 0;
  uint8_t* cut = NULL; /* per compute: reads a view of a result (starts a new group) */
  int32_t cut_cap = 0, cut_count = 0;
  for (int32_t w = plan->start_word; w < plan->next_word;
       w += (int32_t)((uint32_t)code[w] >> STAX_VM_LENGTH_SHIFT)) {
    int32_t opcode = code[w] & STAX_VM_OPCODE_MASK;
    stax_vm_family_t family = stax_vm_opcode_family(opcode);
    if (opcode == STAX_VM_OP_PROFILE_POINT) continue;
    if (opcode == STAX_VM_OP_FREE_TENSOR) {
      JIT_PUSH(plan->free_regs, plan->free_count, free_cap, code[w + STAX_VM_HEADER_WORDS]);
    } else if (opcode == STAX_VM_OP_ALLOC_TENSOR || opcode == STAX_VM_OP_ALLOC_TENSOR_FAST) {
      JIT_PUSH(plan->alloc_words, plan->alloc_count, alloc_cap, w);
    } else if (opcode == STAX_VM_OP_LOAD_CONST || opcode == STAX_VM_OP_LOAD_TENSOR ||
               opcode == STAX_VM_OP_DIM_VALUES) {
      /* DIM_VALUES reads only symbols, which the segment's entry has bound. */
      JIT_PUSH(plan->pre_words, plan->pre_count, pre_cap, w);
    } else if (opcode == STAX_VM_OP_STORE_TENSOR) {
      int32_t at = plan->post_count, sources[2];
      JIT_PUSH(post_at, at, post_at_cap, -1);
      JIT_PUSH(plan->post_words, plan->post_count, post_cap, w);
      int32_t n = jit_post_sources(code, w, sources);
      for (int32_t i = 0; i < n; i++) JIT_PUSH(post_srcs, post_src_count, post_src_cap, sources[i]);
    } else if (opcode == STAX_VM_OP_MOVE || opcode == STAX_VM_OP_BROADCAST_TO ||
               opcode == STAX_VM_OP_RESHAPE_VIEW || opcode == STAX_VM_OP_TRANSPOSE_VIEW) {
      int32_t dst = code[w + STAX_VM_HEADER_WORDS], sources[2];
      /* A reshape's shape register (when not a descriptor) must be materialized too. */
      int32_t n = jit_post_sources(code, w, sources);
      bool of_result = false;
      for (int32_t i = 0; i < n; i++) of_result |= jit_find(written, written_count, sources[i]) >= 0;
      if (of_result) {
        int32_t at = plan->post_count;
        JIT_PUSH(post_at, at, post_at_cap, compute_count);
        JIT_PUSH(plan->post_words, plan->post_count, post_cap, w);
        for (int32_t i = 0; i < n; i++)
          JIT_PUSH(post_srcs, post_src_count, post_src_cap, sources[i]);
        JIT_PUSH(written, written_count, written_cap, dst);
        JIT_PUSH(post_regs, post_reg_count, post_reg_cap, dst);
      } else {
        JIT_PUSH(plan->pre_words, plan->pre_count, pre_cap, w);
      }
    } else if ((family == STAX_VM_FAMILY_COMPUTE || family == STAX_VM_FAMILY_COMPUTE_STATIC) &&
               !STAX_VM_CODE_KERNEL_ALLOCATES(code + w)) {
      const int32_t* in_list = &STAX_VM_OPERAND(code + w, 1);
      const int32_t* out_list = in_list + 1 + in_list[0];
      /* A compute that reads a view of a result starts a new group: the view runs
       * interpreted between the groups and is an input of the later one. */
      bool reads_view = false;
      for (int32_t k = 0; k < in_list[0]; k++)
        if (in_list[1 + k] >= 0 && jit_find(post_regs, post_reg_count, in_list[1 + k]) >= 0)
          reads_view = true;
      JIT_PUSH(cut, cut_count, cut_cap, (uint8_t)reads_view);
      for (int32_t k = 0; k < out_list[0]; k++)
        if (out_list[1 + k] >= 0) JIT_PUSH(written, written_count, written_cap, out_list[1 + k]);
      JIT_PUSH(computes, compute_count, compute_cap, w);
    } else {
      goto unsupported; /* views, moves, constants: interpreted (see docs/jit.md) */
    }
  }
  if (compute_count <= 0) goto unsupported;
  /* `written`: registers computed in the segment; reads of anything else are external
   * inputs (pre views' results included: they are live when the signature is taken). */
  /* Groups: a MatMul/Gemm starts a new group (the backend fuses epilogues, not prologues),
   * and so does a row op after a MatMul (one kernel does not hold both). */
  group_of = calloc((size_t)(uint32_t)compute_count, sizeof(int32_t));
  if (!group_of) goto oom;
  /* A node also starts a new group when it reads nothing the current group computes: unrelated
   * work has its own iteration space (other row length, other shape), which one kernel
   * cannot hold. */
  int32_t group = -1, group_start = 0;
  bool has_contraction = false, previous_alone = false, has_costly = false;
  for (int32_t c = 0; c < compute_count; c++) {
    const int32_t* ins = code + computes[c];
    const stax_node_t* node = &program->kernel_nodes[STAX_VM_OPERAND(ins, 0)];
    jit_kind kind = jit_node_kind(node->op);
    /* A row op of several passes after costly elementwise math: the math once, into memory,
     * then the row kernel reads it (stax_jit_op_costly). */
    bool costly_producer = kind == KIND_ROW && has_costly &&
                           stax_jit_op_walks_rows_repeatedly(node->op);
    bool connected = false;
    const int32_t* in_list = &STAX_VM_OPERAND(ins, 1);
    for (int32_t p = group_start; p < c && !connected; p++) {
      const int32_t* p_in = &STAX_VM_OPERAND(code + computes[p], 1);
      const int32_t* p_out = p_in + 1 + p_in[0];
      for (int32_t k = 0; k < in_list[0] && !connected; k++)
        connected = in_list[1 + k] >= 0 && jit_find(p_out + 1, p_out[0], in_list[1 + k]) >= 0;
    }
    if (group < 0 || !connected || cut[c] || kind == KIND_CONTRACTION || kind == KIND_ALONE ||
        previous_alone || (kind == KIND_ROW && has_contraction) || costly_producer) {
      group++;
      group_start = c;
      has_contraction = false;
      has_costly = false;
    }
    if (kind == KIND_CONTRACTION) has_contraction = true;
    if (stax_jit_op_costly(node->op)) has_costly = true;
    previous_alone = kind == KIND_ALONE;
    group_of[c] = group;
  }
  plan->group_count = group + 1;
  plan->groups = calloc((size_t)plan->group_count, sizeof(jit_group_plan));
  if (!plan->groups) goto oom;
  for (int32_t c = 0; c < compute_count; c++) {
    jit_group_plan* gp = &plan->groups[group_of[c]];
    int32_t node_cap = gp->node_count, value_cap = gp->value_count;
    JIT_PUSH(gp->node_words, gp->node_count, node_cap, computes[c]);
    const int32_t* in_list = &STAX_VM_OPERAND(code + computes[c], 1);
    const int32_t* out_list = in_list + 1 + in_list[0];
    for (int32_t side = 0; side < 2; side++) {
      const int32_t* list = side ? out_list : in_list;
      for (int32_t k = 0; k < list[0]; k++) {
        int32_t reg = list[1 + k];
        if (reg < 0 || jit_find(gp->value_regs, gp->value_count, reg) >= 0) continue;
        JIT_PUSH(gp->value_regs, gp->value_count, value_cap, reg);
        if (!side && jit_find(written, written_count, reg) < 0 &&
            jit_find(plan->ext_regs, plan->ext_count, reg) < 0)
          JIT_PUSH(plan->ext_regs, plan->ext_count, ext_cap, reg);
      }
    }
  }
  /* Roles: a value written by the group is an output when a later group reads it or it
   * outlives the segment (not freed in it); else a temporary. */
  for (int32_t g = 0; g < plan->group_count; g++) {
    jit_group_plan* gp = &plan->groups[g];
    gp->roles = calloc((size_t)gp->value_count, 1);
    gp->inputs = calloc((size_t)gp->value_count, sizeof(int32_t));
    gp->outputs = calloc((size_t)gp->value_count, sizeof(int32_t));
    if (!gp->roles || !gp->inputs || !gp->outputs) goto oom;
    for (int32_t v = 0; v < gp->value_count; v++) {
      int32_t reg = gp->value_regs[v];
      bool mine = false;
      for (int32_t n = 0; n < gp->node_count && !mine; n++) {
        const int32_t* in_list = &STAX_VM_OPERAND(code + gp->node_words[n], 1);
        const int32_t* out_list = in_list + 1 + in_list[0];
        mine = jit_find(out_list + 1, out_list[0], reg) >= 0;
      }
      if (!mine) {
        gp->roles[v] = JIT_ROLE_INPUT;
        gp->inputs[gp->input_count++] = v;
        continue;
      }
      bool later = jit_find(plan->free_regs, plan->free_count, reg) < 0 ||
                   jit_find(post_srcs, post_src_count, reg) >= 0;
      for (int32_t h = g + 1; h < plan->group_count && !later; h++)
        later = jit_find(plan->groups[h].value_regs, plan->groups[h].value_count, reg) >= 0;
      gp->roles[v] = later ? JIT_ROLE_OUTPUT : JIT_ROLE_TEMP;
      if (later) gp->outputs[gp->output_count++] = v;
    }
    stax_op_t op = program->kernel_nodes[STAX_VM_OPERAND(code + gp->node_words[0], 0)].op;
    gp->lowerable = !(gp->node_count == 1 && jit_node_kind(op) == KIND_ALONE) &&
                    !(gp->output_count < 1 && plan->group_count > 1);
    if (gp->lowerable && jit_group_dtype_fallback(program, gp, plan)) gp->lowerable = false;
    if (gp->lowerable) plan->lowerable_count++;
    /* Shape classes read every value's open lead dims (jit_tier_class.c): once, here. */
    gp->value_leads = calloc((size_t)gp->value_count + 1, sizeof(int32_t));
    if (!gp->value_leads) goto oom;
    for (int32_t v = 0; v < gp->value_count; v++)
      gp->value_leads[v] = stax_vm_jit_register_lead(program, gp->value_regs[v]);
  }
  plan->ext_leads = calloc((size_t)plan->ext_count + 1, sizeof(int32_t));
  if (!plan->ext_leads) goto oom;
  for (int32_t e = 0; e < plan->ext_count; e++)
    plan->ext_leads[e] = stax_vm_jit_register_lead(program, plan->ext_regs[e]);
  if (!stax_vm_jit_plan_bcast_codes(program, plan)) goto oom;
  /* Post instructions run after the group of the last compute before them (so a view runs
   * once its source is materialized and before any group that reads it); stores and views
   * after the last compute run at the end. */
  plan->post_after = calloc((size_t)(plan->post_count > 0 ? plan->post_count : 1), sizeof(int32_t));
  if (!plan->post_after) goto oom;
  for (int32_t p = 0; p < plan->post_count; p++)
    plan->post_after[p] = post_at[p] < 0 || post_at[p] >= compute_count
                              ? plan->group_count - 1
                              : (post_at[p] > 0 ? group_of[post_at[p] - 1] : 0);
  plan->alloc_group = calloc((size_t)(plan->alloc_count > 0 ? plan->alloc_count : 1), sizeof(int32_t));
  if (!plan->alloc_group) goto oom;
  for (int32_t a = 0; a < plan->alloc_count; a++) {
    int32_t reg = code[plan->alloc_words[a] + STAX_VM_HEADER_WORDS];
    plan->alloc_group[a] = -1;
    for (int32_t g = 0; g < plan->group_count; g++) {
      int32_t v = jit_find(plan->groups[g].value_regs, plan->groups[g].value_count, reg);
      if (v >= 0 && plan->groups[g].roles[v] == JIT_ROLE_TEMP) plan->alloc_group[a] = g;
    }
  }
  if (!jit_plan_lifetimes(code, plan, written, written_count)) goto oom;
  plan->state = PLAN_OK;
  free(computes);
  free(written);
  free(group_of);
  free(post_regs);
  free(post_srcs);
  free(post_at);
  free(cut);
  return;
oom:
unsupported:
  jit_plan_free(plan);
  plan->state = PLAN_UNSUPPORTED;
  free(computes);
  free(written);
  free(group_of);
  free(post_regs);
  free(post_srcs);
  free(post_at);
  free(cut);
}

/* ---- the cache ------------------------------------------------------------------------------ */

static void jit_desc_free(jit_desc* descs, int32_t count) {
  if (!descs) return;
  for (int32_t g = 0; g < count; g++) {
    free(descs[g].values);
    free(descs[g].symbolic_values);
    free(descs[g].nodes);
    free(descs[g].indices);
  }
  free(descs);
}

static void jit_job_free(jit_job* job) {
  stax_vm_trace_release(job->trace);
  stax_status_free(job->failure);
  free(job->order);
  jit_desc_free(job->descs, job->group_count);
  free(job->sig);
  free(job);
}

static void jit_version_drop_kernels(jit_version* v, int32_t group_count) {
  if (!v->kernels) return;
  for (int32_t g = 0; g < group_count; g++)
    if (v->kernels[g]) stax_jit_kernel_release(v->kernels[g]); /* deferred: users retained */
  free(v->kernels);
  v->kernels = NULL;
}

jit_cache* stax_vm_jit_cache_get(stax_program_t* program) {
  jit_cache* cache = atomic_load(&program->jit_cache);
  if (cache) return cache;
  cache = calloc(1, sizeof(*cache));
  if (!cache) return NULL;
  cache->segments = calloc((size_t)(program->segments_count ? program->segments_count : 1),
                           sizeof(jit_segment));
  if (!cache->segments) {
    free(cache);
    return NULL;
  }
  cache->program = program;
  cache->segment_count = program->segments_count;
  pthread_mutex_init(&cache->lock, NULL);
  pthread_cond_init(&cache->work, NULL);
  pthread_cond_init(&cache->idle, NULL);
  jit_cache* expected = NULL;
  if (!atomic_compare_exchange_strong(&program->jit_cache, &expected, cache)) {
    /* Another context created it first. */
    pthread_mutex_destroy(&cache->lock);
    pthread_cond_destroy(&cache->work);
    pthread_cond_destroy(&cache->idle);
    free(cache->segments);
    free(cache);
    return expected;
  }
  return cache;
}

void stax_vm_jit_cache_destroy(stax_program_t* program) {
  jit_cache* cache = atomic_load(&program->jit_cache);
  if (!cache) return;
  pthread_mutex_lock(&cache->lock);
  cache->stop = true;
  pthread_cond_broadcast(&cache->work);
  pthread_mutex_unlock(&cache->lock);
  for (int32_t t = 0; t < cache->thread_count; t++) pthread_join(cache->threads[t], NULL);
  while (cache->head) {
    jit_job* job = cache->head;
    cache->head = job->next;
    jit_job_free(job);
  }
  for (int32_t s = 0; s < cache->segment_count; s++) {
    jit_segment* seg = &cache->segments[s];
    for (int32_t v = 0; v < seg->version_count; v++) {
      jit_version_drop_kernels(&seg->versions[v], seg->plan.group_count);
      free(seg->versions[v].sig);
      free(seg->versions[v].trial_ns);
    }
    free(seg->versions);
    jit_plan_free(&seg->plan);
  }
  pthread_mutex_destroy(&cache->lock);
  pthread_cond_destroy(&cache->work);
  pthread_cond_destroy(&cache->idle);
  free(cache->segments);
  free(cache);
  atomic_store(&program->jit_cache, NULL);
}

/* Word offsets of every extended instruction (+ the end), for segment bounds. */
static int32_t* jit_word_offsets(const stax_program_t* program) {
  int32_t* word_of = calloc((size_t)program->instructions_count + 1, sizeof(int32_t));
  if (!word_of) return NULL;
  int32_t i = 0;
  for (int32_t w = 0; w < program->code_count && i < program->instructions_count;
       w += (int32_t)((uint32_t)program->code[w] >> STAX_VM_LENGTH_SHIFT))
    word_of[i++] = w;
  word_of[program->instructions_count] = program->code_count;
  return word_of;
}

static jit_plan* jit_plan_get(jit_cache* cache, int32_t s) {
  jit_plan* plan = &cache->segments[s].plan;
  if (plan->state != PLAN_UNANALYSED) return plan;
  int32_t* word_of = jit_word_offsets(cache->program);
  if (!word_of) return NULL; /* out of memory: try again next time */
  jit_plan_build(cache->program, word_of, s, plan);
  free(word_of);
  if (plan->state == PLAN_OK) cache->segments[s].stats.dtype_fallbacks = (uint64_t)plan->dtype_fallbacks;
  if (plan->state == PLAN_OK && plan->ext_count > cache->max_ext) cache->max_ext = plan->ext_count;
  return plan;
}

static jit_version* jit_version_find(jit_segment* seg, uint64_t hash, const int64_t* sig,
                                     int32_t count) {
  for (int32_t v = 0; v < seg->version_count; v++) {
    jit_version* ver = &seg->versions[v];
    if (ver->hash == hash && ver->sig_count == count &&
        memcmp(ver->sig, sig, (size_t)count * sizeof(int64_t)) == 0)
      return ver;
  }
  return NULL;
}

static void jit_version_remove(jit_segment* seg, int32_t index) {
  jit_version* ver = &seg->versions[index];
  if (ver->state == VERSION_READY) {
    seg->stats.evictions++;
    seg->stats.versions--;
    if (ver->generic) seg->stats.generic_versions--;
    else seg->stats.exact_versions--;
  }
  jit_version_drop_kernels(ver, seg->plan.group_count);
  free(ver->sig);
  free(ver->trial_ns);
  seg->versions[index] = seg->versions[--seg->version_count];
}

/* Counts a version that became READY (once), and a finished compile's time by kind. */
static void jit_count_version(jit_segment* seg, const jit_version* ver) {
  if (ver->generic)
    seg->stats.generic_versions++;
  else
    seg->stats.exact_versions++;
}

static void jit_count_compile_ms(jit_segment* seg, bool generic, double ms) {
  if (generic)
    seg->stats.generic_compile_ms += ms;
  else
    seg->stats.exact_compile_ms += ms;
}

/* Keeps at most max_versions READY versions (LRU) and a bounded table of tracked signatures,
 * so a model whose shapes never repeat cannot grow the cache without bound. */
static void jit_enforce_caps(jit_segment* seg, int32_t max_versions) {
  for (;;) {
    int32_t ready = 0, victim = -1;
    for (int32_t v = 0; v < seg->version_count; v++) {
      /* Class versions stay: one serves every shape of its class. */
      if (seg->versions[v].state != VERSION_READY || seg->versions[v].generic) continue;
      ready++;
      if (victim < 0 || seg->versions[v].last_use < seg->versions[victim].last_use) victim = v;
    }
    if (ready <= max_versions) break;
    STAX_LOG(JIT, "segment evicts a version (cap %d)", max_versions);
    jit_version_remove(seg, victim);
  }
  int32_t tracked_cap = 4 * max_versions + 16;
  while (seg->version_count > tracked_cap) {
    int32_t victim = -1;
    for (int32_t v = 0; v < seg->version_count; v++) {
      int32_t st = seg->versions[v].state;
      if (st == VERSION_READY || st == VERSION_QUEUED || seg->versions[v].generic) continue;
      if (victim < 0 || seg->versions[v].last_use < seg->versions[victim].last_use) victim = v;
    }
    if (victim < 0) break;
    jit_version_remove(seg, victim);
  }
}

/* ---- signatures ----------------------------------------------------------------------------- */

bool stax_vm_jit_input_header(const stax_context_t* ctx, int32_t reg, int64_t* out_word) {
  const stax_tensor_t* t = ctx->registers[reg];
  if (!t) return false;
  /* Data alignment: kernels load and store with the element's alignment and assume no more
   * (a wider one would split one shape into several versions, since numpy's arrays are
   * 16-byte aligned at best); data not aligned to its element (an odd DLPack import) is
   * interpreted. */
  size_t element = stax_dtype_size(t->dtype);
  if (element > 1 && (uintptr_t)stax_tensor_data(t) % element != 0) return false;
  bool constant = (ctx->program->registers[reg].flags & STAX_VM_REGISTER_CONSTANT) != 0;
  *out_word = (int64_t)t->dtype | (int64_t)t->rank << 8 | (int64_t)constant << 17;
  return true;
}

/* The guard: dtype, rank, constness, dims and strides of every external input (and that its
 * data is aligned to its element), written into the frame's scratch (no allocation, no
 * strings). false when an input register is empty or misaligned (interpret). */
static bool jit_signature(const stax_context_t* ctx, const jit_plan* plan, int64_t* sig,
                          int32_t* out_count, uint64_t* out_hash) {
  int32_t n = 0;
  uint64_t hash = 0x5157a7u;
  for (int32_t e = 0; e < plan->ext_count; e++) {
    int32_t reg = plan->ext_regs[e];
    const stax_tensor_t* t = ctx->registers[reg];
    if (!stax_vm_jit_input_header(ctx, reg, &sig[n++])) return false;
    for (int32_t d = 0; d < t->rank; d++) sig[n++] = t->dims[d];
    for (int32_t d = 0; d < t->rank; d++) sig[n++] = t->strides[d];
  }
  for (int32_t i = 0; i < n; i++) hash = stax_hash_combine(hash, (uint64_t)sig[i]);
  *out_count = n;
  *out_hash = hash;
  return true;
}

/* The layout a view between groups will have: a metadata-only replay of the segment's post
 * views on the layouts their sources will have (a compute's result is allocated contiguous
 * with its descriptor's dims). A prediction only: the kernel checks the real dims and
 * strides of every argument and refuses a mismatch (the segment is then interpreted). */
typedef struct jit_layout {
  int32_t reg, rank;
  int64_t dims[STAX_MAX_RANK], strides[STAX_MAX_RANK];
} jit_layout;

static void jit_contiguous(jit_layout* l) {
  int64_t stride = 1;
  for (int32_t k = l->rank - 1; k >= 0; k--) {
    l->strides[k] = stride;
    stride *= l->dims[k];
  }
}

static stax_status_t jit_register_layout(const stax_context_t* ctx, int32_t reg, jit_layout* l) {
  const stax_program_t* program = ctx->program;
  l->reg = reg;
  l->rank = program->descriptors[program->registers[reg].descriptor].rank;
  memset(l->dims, 0, sizeof(l->dims));
  STAX_RETURN_IF_ERROR(stax_vm_descriptor_dims(ctx, program->registers[reg].descriptor, l->dims));
  jit_contiguous(l);
  return STAX_OK;
}

static stax_status_t jit_view_layouts(const stax_context_t* ctx, const jit_plan* plan,
                                      jit_layout* layouts, int32_t* out_count) {
  const int32_t* code = ctx->program->code;
  int32_t count = 0;
  for (int32_t p = 0; p < plan->post_count; p++) {
    const int32_t* ins = code + plan->post_words[p];
    int32_t opcode = ins[0] & STAX_VM_OPCODE_MASK;
    if (opcode == STAX_VM_OP_STORE_TENSOR) continue;
    int32_t dst = STAX_VM_OPERAND(ins, 0), src = STAX_VM_OPERAND(ins, 1);
    jit_layout from;
    memset(&from, 0, sizeof(from));
    bool found = false;
    for (int32_t k = count - 1; k >= 0 && !found; k--)
      if (layouts[k].reg == src) {
        from = layouts[k];
        found = true;
      }
    if (!found) STAX_RETURN_IF_ERROR(jit_register_layout(ctx, src, &from));
    jit_layout* to = &layouts[count++];
    if (opcode == STAX_VM_OP_MOVE) {
      *to = from;
    } else if (opcode == STAX_VM_OP_TRANSPOSE_VIEW) {
      const int32_t* perm = &STAX_VM_OPERAND(ins, 2);
      if (perm[0] != from.rank)
        return stax_status_make(STAX_UNIMPLEMENTED, "jit: transpose rank mismatch");
      to->rank = from.rank;
      for (int32_t k = 0; k < from.rank; k++) {
        if (perm[1 + k] < 0 || perm[1 + k] >= from.rank)
          return stax_status_make(STAX_UNIMPLEMENTED, "jit: transpose permutation");
        to->dims[k] = from.dims[perm[1 + k]];
        to->strides[k] = from.strides[perm[1 + k]];
      }
    } else if (opcode == STAX_VM_OP_BROADCAST_TO) {
      STAX_RETURN_IF_ERROR(jit_register_layout(ctx, dst, to));
      for (int32_t k = 0; k < to->rank; k++) {
        int32_t sk = k - (to->rank - from.rank);
        to->strides[k] = sk < 0 || (from.dims[sk] == 1 && to->dims[k] != 1) ? 0 : from.strides[sk];
      }
    } else { /* RESHAPE_VIEW: contiguous unless the source is not (then a guess) */
      STAX_RETURN_IF_ERROR(jit_register_layout(ctx, dst, to));
    }
    to->reg = dst;
  }
  *out_count = count;
  return STAX_OK;
}

/* Group descriptions with the concrete dims of this context's registers. */
/* generic: rows-generic descriptions (groups that cannot be are marked skip); skip (NULL or
 * per group): groups left out of this version. */
/* STAX_JIT_SYMBOLIC=0 leaves the groups a rows-generic kernel cannot take (attention) to
 * exact versions, as before symbolic kernels: for measuring one against the other. */
static bool program_symbolic_ok(void) {
  const char* env = getenv("STAX_JIT_SYMBOLIC");
  return !(env && env[0] == '0');
}

static stax_status_t jit_describe(const stax_context_t* ctx, int32_t s, const jit_plan* plan,
                                  bool generic, const bool* skip, jit_desc** out_descs) {
  const stax_program_t* program = ctx->program;
  jit_desc* descs = calloc((size_t)plan->group_count, sizeof(jit_desc));
  if (!descs) return stax_status_make(STAX_OUT_OF_MEMORY, "jit: group descriptions");
  stax_status_t status = STAX_OK;
  int32_t layout_count = 0;
  int32_t* bcast_classes = NULL;
  jit_layout* layouts = calloc((size_t)(plan->post_count > 0 ? plan->post_count : 1), sizeof(jit_layout));
  if (!layouts) {
    free(descs);
    return stax_status_make(STAX_OUT_OF_MEMORY, "jit: view layouts");
  }
  status = jit_view_layouts(ctx, plan, layouts, &layout_count);
  if (status) goto fail;
  bcast_classes = generic ? stax_vm_jit_bcast_classes(ctx, plan) : NULL;
  for (int32_t g = 0; g < plan->group_count; g++) {
    const jit_group_plan* gp = &plan->groups[g];
    jit_desc* d = &descs[g];
    int32_t index_count = gp->input_count + gp->output_count;
    for (int32_t n = 0; n < gp->node_count; n++) {
      const int32_t* in_list = &STAX_VM_OPERAND(program->code + gp->node_words[n], 1);
      index_count += in_list[0] + in_list[1 + in_list[0]];
    }
    d->values = calloc((size_t)gp->value_count, sizeof(stax_jit_value_t));
    d->nodes = calloc((size_t)gp->node_count, sizeof(stax_jit_node_t));
    d->indices = calloc((size_t)(index_count ? index_count : 1), sizeof(int32_t));
    if (!d->values || !d->nodes || !d->indices) {
      status = stax_status_make(STAX_OUT_OF_MEMORY, "jit: group description");
      goto fail;
    }
    for (int32_t v = 0; v < gp->value_count; v++) {
      int32_t reg = gp->value_regs[v];
      stax_jit_value_t* value = &d->values[v];
      const stax_vm_descriptor_t* desc = &program->descriptors[program->registers[reg].descriptor];
      value->name = stax_vm_register_name(program, reg);
      value->role = gp->roles[v] == JIT_ROLE_INPUT    ? STAX_JIT_VALUE_INPUT
                    : gp->roles[v] == JIT_ROLE_OUTPUT ? STAX_JIT_VALUE_OUTPUT
                                                      : STAX_JIT_VALUE_TEMPORARY;
      const stax_tensor_t* live = jit_find(plan->ext_regs, plan->ext_count, reg) >= 0
                                      ? ctx->registers[reg] : NULL;
      const jit_layout* view = NULL;
      for (int32_t k = layout_count - 1; k >= 0 && !view && !live; k--)
        if (layouts[k].reg == reg) view = &layouts[k];
      if (view) {
        /* A view between groups: its source's dtype, the predicted layout. */
        value->dtype = (stax_dtype_t)desc->dtype;
        value->rank = view->rank;
        memcpy(value->dims, view->dims, sizeof(value->dims));
        memcpy(value->strides, view->strides, sizeof(value->strides));
      } else if (live) {
        value->dtype = live->dtype;
        value->rank = live->rank;
        memcpy(value->dims, live->dims, sizeof(value->dims));
        memcpy(value->strides, live->strides, sizeof(value->strides));
        if (program->registers[reg].flags & STAX_VM_REGISTER_CONSTANT) value->constant = live;
      } else {
        /* Written in the segment: allocated contiguous with the descriptor's dims. */
        value->dtype = (stax_dtype_t)desc->dtype;
        value->rank = desc->rank;
        status = stax_vm_descriptor_dims(ctx, program->registers[reg].descriptor, value->dims);
        if (status) goto fail;
        int64_t stride = 1;
        for (int32_t k = value->rank - 1; k >= 0; k--) {
          value->strides[k] = stride;
          stride *= value->dims[k];
        }
      }
    }
    int32_t* cursor = d->indices;
    for (int32_t n = 0; n < gp->node_count; n++) {
      const int32_t* ins = program->code + gp->node_words[n];
      const int32_t* in_list = &STAX_VM_OPERAND(ins, 1);
      const int32_t* out_list = in_list + 1 + in_list[0];
      stax_jit_node_t* node = &d->nodes[n];
      node->node = &program->kernel_nodes[STAX_VM_OPERAND(ins, 0)];
      node->input_count = in_list[0];
      node->inputs = cursor;
      for (int32_t k = 0; k < in_list[0]; k++)
        *cursor++ = in_list[1 + k] < 0 ? -1 : jit_find(gp->value_regs, gp->value_count, in_list[1 + k]);
      node->output_count = out_list[0];
      node->outputs = cursor;
      for (int32_t k = 0; k < out_list[0]; k++)
        *cursor++ = out_list[1 + k] < 0 ? -1 : jit_find(gp->value_regs, gp->value_count, out_list[1 + k]);
    }
    snprintf(d->name, sizeof(d->name), generic ? "seg%d_g%d_rows" : "seg%d_g%d", s, g);
    d->group.name = d->name;
    d->group.node_count = gp->node_count;
    d->group.nodes = d->nodes;
    d->group.value_count = gp->value_count;
    d->group.values = d->values;
    d->group.input_count = gp->input_count;
    d->group.inputs = gp->inputs;
    d->group.output_count = gp->output_count;
    d->group.outputs = gp->outputs;
    d->skip = skip && skip[g];
    if (generic && !d->skip) {
      /* Rows-generic where the group walks as rows, else (or when that lowering refuses)
       * symbolic over the dims and strides that vary. */
      stax_jit_value_t* alternative = NULL;
      if (program_symbolic_ok()) {
        alternative = malloc(sizeof(stax_jit_value_t) * (size_t)(gp->value_count + 1));
        if (!alternative) {
          status = stax_status_make(STAX_OUT_OF_MEMORY, "jit: group description");
          goto fail;
        }
        memcpy(alternative, d->values, sizeof(stax_jit_value_t) * (size_t)gp->value_count);
        if (!stax_vm_jit_make_symbolic(program, plan, gp, alternative)) {
          free(alternative);
          alternative = NULL;
        }
      }
      if (stax_vm_jit_make_rows_generic(program, plan, bcast_classes, gp, d)) {
        d->symbolic_values = alternative;
      } else if (alternative) {
        memcpy(d->values, alternative, sizeof(stax_jit_value_t) * (size_t)gp->value_count);
        free(alternative);
        d->group.symbolic = true;
      } else {
        d->skip = true;
      }
    }
  }
  free(layouts);
  free(bcast_classes);
  *out_descs = descs;
  return STAX_OK;
fail:
  free(layouts);
  free(bcast_classes);
  jit_desc_free(descs, plan->group_count);
  return status;
}

/* The program's object cache folder, copied (under the lock) into `buffer` for a compile that
 * runs unlocked: NULL for the environment's. */
static const char* jit_cache_dir_copy(const jit_cache* cache,
                                      char buffer[STAX_VM_JIT_CACHE_DIR_MAX]) {
  if (!cache->cache_dir_set) return NULL;
  memcpy(buffer, cache->cache_dir, STAX_VM_JIT_CACHE_DIR_MAX);
  return buffer;
}

/* Whether group g of a version gets a compile (not dead shape arithmetic, not left to
 * another version): what progress and the trace count as the version's kernels. */
static bool jit_group_compiles(const jit_desc* descs, int32_t count, int32_t g) {
  return !(descs[g].group.output_count < 1 && count > 1) && !descs[g].skip;
}

static int32_t jit_version_kernels(const jit_desc* descs, int32_t count) {
  int32_t n = 0;
  for (int32_t g = 0; g < count; g++) n += jit_group_compiles(descs, count, g);
  return n;
}

/* A compile's trace event (trace.h): kernel g of segment s's version, or (g < 0) the whole
 * version, on the compiling thread's track. */
static void jit_trace_compile(stax_vm_trace_t* trace, int32_t s, int32_t g, const jit_desc* descs,
                              int32_t count, bool generic, uint64_t start, const char* outcome) {
  if (!trace) return;
  stax_vm_trace_event_t event = {.start_ns = start,
                                 .duration_ns = stax_vm_trace_now() - start,
                                 .tid = stax_vm_trace_thread_id(),
                                 .kind = g >= 0 ? STAX_VM_TRACE_COMPILE : STAX_VM_TRACE_VERSION,
                                 .segment = s,
                                 .group = g >= 0 ? g : jit_version_kernels(descs, count),
                                 .version = generic ? "generic" : "exact",
                                 .outcome = outcome};
  if (g >= 0) snprintf(event.label, sizeof(event.label), "%s", descs[g].name);
  stax_vm_trace_add(trace, &event);
}

static const char* jit_compile_outcome(stax_status_t status, const stax_jit_kernel_t* kernel,
                                       bool cache_only) {
  if (status) return "failed";
  if (!kernel) return "interpreted";
  return cache_only ? "cache" : "compiled";
}

/* Compiles group g of a version into *out_kernel: NULL (and OK) when the group is left to
 * the interpreter: dead shape arithmetic, or not fusible while other groups may be. Runs
 * without the cache lock (compiles are slow; the backend serializes its own LLVM use). */
static stax_status_t jit_compile_group(stax_jit_backend_t* backend, const jit_desc* descs,
                                       int32_t count, int32_t g, bool keep_texts, bool cache_only,
                                       const char* cache_dir, stax_jit_kernel_t** out_kernel) {
  *out_kernel = NULL;
  /* Nothing it computes is used after it (dead shape arithmetic): interpreted. */
  if (descs[g].group.output_count < 1 && count > 1) return STAX_OK;
  if (descs[g].skip)
    return count > 1 ? STAX_OK
                     : stax_status_make(STAX_UNIMPLEMENTED, "group %s is left to another version",
                                        descs[g].name);
  stax_jit_compile_options_t options = {.keep_llvm_ir = keep_texts, .keep_assembly = keep_texts,
                                        .cache_only = cache_only, .cache_dir = cache_dir};
  stax_status_t status = stax_jit_compile_group(backend, &descs[g].group, &options, out_kernel);
  if (stax_status_code(status) == STAX_UNIMPLEMENTED && descs[g].symbolic_values) {
    /* The rows-generic lowering refused (a row kernel's reduced axis is open): symbolic. */
    jit_desc* d = (jit_desc*)&descs[g]; /* the descs belong to the one compile running */
    STAX_LOG(JIT, "group %s: %s; trying a symbolic kernel", d->name, stax_status_message(status));
    stax_status_free(status);
    memcpy(d->values, d->symbolic_values, sizeof(stax_jit_value_t) * (size_t)d->group.value_count);
    free(d->symbolic_values);
    d->symbolic_values = NULL;
    d->group.rows_generic = false;
    d->group.symbolic = true;
    status = stax_jit_compile_group(backend, &d->group, &options, out_kernel);
  }
  if (stax_status_code(status) == STAX_UNIMPLEMENTED && !descs[g].group.rows_generic &&
      !descs[g].group.symbolic)
    ((jit_desc*)descs)[g].refused = true; /* the descs belong to the one compile running */
  if (stax_status_code(status) == STAX_UNIMPLEMENTED && count > 1) {
    /* Not fusible: this group is interpreted inside an otherwise compiled segment. */
    STAX_LOG(JIT, "group %s interpreted: %s", descs[g].name, stax_status_message(status));
    stax_status_free(status);
    *out_kernel = NULL;
    return STAX_OK;
  }
  return status;
}

/* Groups an exact-shape lowering refused will never have a kernel: they no longer count
 * against "fully compiled". Under the lock. */
static void jit_note_refused(jit_plan* plan, const jit_desc* descs, int32_t count) {
  for (int32_t g = 0; g < count && g < plan->group_count; g++)
    if (descs[g].refused && plan->groups[g].lowerable) {
      plan->groups[g].lowerable = false;
      plan->lowerable_count--;
    }
}

static void jit_group_order(const jit_desc* descs, int32_t count, int32_t* order);

/* A sync-mode compile shared by the threads of the calling context's pool: each claims the
 * next group (largest first) until none is left or one failed. Progress is reported by the
 * calling thread only (stax_progress_fn's contract), as its own groups finish. */
typedef struct jit_sync_compile {
  stax_context_t* ctx;
  pthread_t caller;
  int32_t s;
  bool generic, keep_texts, cache_only;
  const char* cache_dir;
  stax_jit_backend_t* backend;
  const jit_desc* descs;
  int32_t count;
  const int32_t* order;
  stax_jit_kernel_t** kernels;
  stax_status_t* statuses; /* per group */
  stax_vm_trace_t* group_trace;
  stax_progress_fn progress;
  stax_progress_t* report;
  double start;
  atomic_int next, done;
  atomic_bool failed;
} jit_sync_compile;

static void jit_sync_worker(void* arg, int64_t begin, int64_t end) {
  (void)begin;
  (void)end;
  jit_sync_compile* c = arg;
  bool caller = pthread_equal(pthread_self(), c->caller);
  bool named = caller;
  for (;;) {
    int32_t i = atomic_fetch_add(&c->next, 1);
    if (i >= c->count || atomic_load(&c->failed)) return;
    int32_t g = c->order ? c->order[i] : i;
    if (c->group_trace && !named) {
      stax_vm_trace_name_thread(c->group_trace, stax_vm_trace_thread_id(),
                                "stax pool (sync compile)");
      named = true;
    }
    uint64_t group_start = c->group_trace ? stax_vm_trace_now() : 0;
    c->statuses[g] = jit_compile_group(c->backend, c->descs, c->count, g, c->keep_texts,
                                       c->cache_only, c->cache_dir, &c->kernels[g]);
    if (c->statuses[g]) atomic_store(&c->failed, true);
    if (!jit_group_compiles(c->descs, c->count, g)) continue;
    jit_trace_compile(c->group_trace, c->s, g, c->descs, c->count, c->generic, group_start,
                      jit_compile_outcome(c->statuses[g], c->kernels[g], c->cache_only));
    int32_t done = atomic_fetch_add(&c->done, 1) + 1;
    if (caller && c->progress) {
      c->report->kind = STAX_PROGRESS_COMPILE_KERNEL;
      c->report->done = done;
      c->report->elapsed_ms = jit_now_ms() - c->start;
      c->progress(c->ctx->options.progress_data, c->report);
    }
  }
}

/* Compiles every group of a version (sync mode) on the calling context's pool (the call
 * waits for it, so its threads are idle); on any failure nothing is kept.
 * cache_only: load every kernel from the object cache or fail (FAILED_PRECONDITION) having
 * compiled nothing. ctx (the calling context) gets progress reports and trace events. */
static stax_status_t jit_compile(stax_context_t* ctx, int32_t s, bool generic,
                                 const jit_desc* descs, int32_t count, bool keep_texts,
                                 bool cache_only, const char* cache_dir,
                                 stax_jit_kernel_t** kernels, double* out_ms) {
  double start = jit_now_ms();
  stax_vm_trace_t* trace = ctx->tracing ? ctx->trace : NULL;
  uint64_t trace_start = trace ? stax_vm_trace_now() : 0;
  /* Loads from the object cache take tenths of a millisecond: nothing to report. */
  stax_progress_fn progress = cache_only ? NULL : ctx->options.progress;
  stax_progress_t report = {.kind = STAX_PROGRESS_COMPILE_BEGIN,
                            .segment = s,
                            .kernels = jit_version_kernels(descs, count),
                            .generic = generic};
  if (progress) progress(ctx->options.progress_data, &report);
  stax_jit_backend_t* backend = NULL;
  stax_status_t status = stax_jit_backend_get(&backend);
  int32_t* order = status ? NULL : calloc((size_t)count + 1, sizeof(int32_t));
  stax_status_t* statuses = status ? NULL : calloc((size_t)count + 1, sizeof(stax_status_t));
  if (!status && (!order || !statuses))
    status = stax_status_make(STAX_OUT_OF_MEMORY, "jit: compile of segment %d", s);
  if (!status) {
    jit_group_order(descs, count, order);
    jit_sync_compile c = {.ctx = ctx,
                          .caller = pthread_self(),
                          .s = s,
                          .generic = generic,
                          .keep_texts = keep_texts,
                          .cache_only = cache_only,
                          .cache_dir = cache_dir,
                          .backend = backend,
                          .descs = descs,
                          .count = count,
                          /* Loads from the object cache: in group order (no work to share). */
                          .order = cache_only ? NULL : order,
                          .kernels = kernels,
                          .statuses = statuses,
                          /* A load from the object cache is one event, after it succeeded
                           * (a miss compiles later). */
                          .group_trace = cache_only ? NULL : trace,
                          .progress = progress,
                          .report = &report,
                          .start = start};
    int32_t threads = cache_only ? 1 : stax_threadpool_thread_count(ctx->pool);
    if (threads > count) threads = count;
    if (threads > 1) {
      stax_parallel_for(ctx->pool, threads, 1, jit_sync_worker, &c);
    } else {
      jit_sync_worker(&c, 0, 1);
    }
    report.done = atomic_load(&c.done);
    int32_t compiled = 0;
    for (int32_t g = 0; g < count; g++) {
      if (statuses[g] && !status) {
        status = statuses[g];
      } else {
        stax_status_free(statuses[g]);
      }
      if (kernels[g]) compiled++;
    }
    if (!status && compiled == 0)
      status = stax_status_make(STAX_UNIMPLEMENTED, "no group of the segment is fusible");
  }
  free(order);
  free(statuses);
  if (status) {
    for (int32_t g = 0; g < count; g++)
      if (kernels[g]) stax_jit_kernel_release(kernels[g]);
    memset(kernels, 0, (size_t)count * sizeof(*kernels));
  }
  *out_ms = jit_now_ms() - start;
  if (!cache_only || !status)
    jit_trace_compile(trace, s, -1, descs, count, generic, trace_start,
                      cache_only ? "cache" : status ? "failed" : "compiled");
  report.kind = STAX_PROGRESS_COMPILE_END;
  report.elapsed_ms = *out_ms;
  if (progress) progress(ctx->options.progress_data, &report);
  return status;
}

/* Records a compile's outcome in its version (under the lock). The version may have been
 * dropped meanwhile (caps): then the kernels are released. */
static void jit_finish(jit_cache* cache, int32_t s, uint64_t hash, const int64_t* sig,
                       int32_t sig_count, stax_jit_kernel_t** kernels, stax_status_t status,
                       double ms, int32_t max_versions) {
  jit_segment* seg = &cache->segments[s];
  jit_version* ver = jit_version_find(seg, hash, sig, sig_count);
  seg->stats.compile_ms += ms;
  if (ver) ver->complete = true;
  if (status) {
    seg->stats.failures++;
    STAX_LOG(JIT, "segment %d: compile failed after %.2f ms, staying interpreted: %s", s, ms,
             stax_status_message(status));
    stax_status_free(status);
    if (ver) ver->state = VERSION_FAILED;
    free(kernels);
    return;
  }
  seg->stats.compiles++;
  STAX_LOG(JIT, "segment %d: compiled (%d group(s)) in %.2f ms", s, seg->plan.group_count, ms);
  if (!ver) {
    jit_version tmp = {.kernels = kernels};
    jit_version_drop_kernels(&tmp, seg->plan.group_count);
    return;
  }
  ver->kernels = kernels;
  ver->state = VERSION_READY;
  ver->complete = true;
  ver->compile_ms = ms;
  ver->last_use = ++cache->clock;
  seg->stats.versions++;
  jit_count_version(seg, ver);
  jit_count_compile_ms(seg, ver->generic, ms);
  jit_enforce_caps(seg, max_versions);
}

/* ---- the background compiler ---------------------------------------------------------------- */

/* Publishes kernel g of a background job into its version as soon as it is compiled, so
 * calls pick up each group's kernel as it lands (the other groups interpret meanwhile: the
 * hit path treats a NULL kernel as "interpret this group"). The first kernel makes the
 * version READY. Under the lock. false when the version is gone (evicted, the tracked
 * signatures trimmed, or dropped) or the program is going away: the caller stops compiling. */
static bool jit_publish(jit_cache* cache, const jit_job* job, int32_t g, stax_jit_kernel_t* kernel) {
  jit_segment* seg = &cache->segments[job->segment];
  jit_version* ver = jit_version_find(seg, job->hash, job->sig, job->sig_count);
  if (ver && (ver->state == VERSION_FAILED || ver->state == VERSION_RETIRED)) ver = NULL;
  if (ver && !ver->kernels) ver->kernels = calloc((size_t)job->group_count, sizeof(*ver->kernels));
  if (cache->stop || !ver || !ver->kernels) {
    if (kernel) stax_jit_kernel_release(kernel);
    return false;
  }
  if (!kernel) return true;
  ver->kernels[g] = kernel;
  if (ver->state != VERSION_READY) {
    ver->state = VERSION_READY;
    ver->last_use = ++cache->clock;
    seg->stats.versions++;
    jit_count_version(seg, ver);
    jit_enforce_caps(seg, cache->max_versions);
  }
  return true;
}

/* A group's work per call, roughly (multiply-adds for contractions, elements otherwise), at
 * the shapes it is described with: the background compiler compiles a version's groups in
 * this order, largest first, so the kernels that matter most go live first (each goes live
 * as it lands). */
static double jit_group_cost(const jit_desc* d) {
  double cost = 0;
  for (int32_t n = 0; n < d->group.node_count; n++) {
    const stax_jit_node_t* node = &d->nodes[n];
    if (node->output_count < 1 || node->outputs[0] < 0) continue;
    const stax_jit_value_t* out = &d->values[node->outputs[0]];
    double elements = 1;
    for (int32_t k = 0; k < out->rank; k++) elements *= (double)out->dims[k];
    double per = 1;
    stax_op_t op = node->node->op;
    const stax_jit_value_t* in = node->input_count > 1 && node->inputs[0] >= 0 && node->inputs[1] >= 0
                                     ? &d->values[node->inputs[1]] : NULL;
    if ((op == STAX_OP_MatMul || op == STAX_OP_Gemm) && in && in->rank >= 2) {
      per = (double)d->values[node->inputs[0]].dims[d->values[node->inputs[0]].rank - 1];
    } else if (op == STAX_OP_Conv && in && in->rank >= 1 && in->dims[0] > 0) {
      double weight = 1;
      for (int32_t k = 0; k < in->rank; k++) weight *= (double)in->dims[k];
      per = weight / (double)in->dims[0];
    }
    cost += elements * per;
  }
  return cost;
}

static void jit_group_order(const jit_desc* descs, int32_t count, int32_t* order) {
  for (int32_t g = 0; g < count; g++) order[g] = g;
  for (int32_t i = 1; i < count; i++) { /* insertion sort: a few dozen groups at most */
    int32_t g = order[i];
    double cost = jit_group_cost(&descs[g]);
    int32_t j = i;
    while (j > 0 && jit_group_cost(&descs[order[j - 1]]) < cost) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = g;
  }
}

/* The compiler thread's priority for a job. Exact versions (hot shapes, a speed-up of calls
 * that already run) yield to the threads running calls: on a machine whose cores are all
 * busy running the model, a compile at normal priority takes a core from every call (BENCH.md
 * S2 on 2 cores, exact versions per shape: compiled calls ran 2x slower than on 1 thread), and
 * nice 10 leaves it the idle time. A generic version is different: until it lands every call
 * of its class interprets, and at nice 10 beside two busy threads it took 4 s instead of 1
 * (S2, 2 threads), so it runs at normal priority and takes its share. Raising the priority
 * back needs the privilege to; without it the thread stays at nice 10 (harmless). */
static void jit_set_priority(int* current, bool generic) {
  int wanted = generic ? 0 : 10;
  if (*current == wanted) return;
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), wanted) == 0) {
    *current = wanted;
  } else if (*current != 10 + 1000) {
    STAX_LOG(JIT, "compiler thread keeps its priority: %s", strerror(errno));
    if (!generic) *current = 10 + 1000; /* log once */
  }
}

/* Takes a job off the queue (it is the head: groups are claimed from the head only); from
 * then on it counts as busy until it closes. Under the lock. */
static void jit_job_dequeue(jit_cache* cache, jit_job* job) {
  if (job->queued_out) return;
  cache->head = job->next;
  if (!cache->head) cache->tail = NULL;
  job->queued_out = true;
  cache->busy++;
}

/* Closes a job none of whose groups is claimable or running any more: records its outcome
 * in the version and the statistics, and frees it. Under the lock. */
static void jit_job_close(jit_cache* cache, jit_job* job) {
  stax_status_t status = job->failure;
  job->failure = STAX_OK;
  if (status && job->compiled > 0) {
    /* A kernel landed after the first failure (another thread's group): keep what landed. */
    STAX_LOG(JIT, "segment %d: a group interpreted: %s", job->segment, stax_status_message(status));
    stax_status_free(status);
    status = STAX_OK;
  }
  if (!status && !job->gone && job->compiled == 0)
    status = stax_status_make(STAX_UNIMPLEMENTED, "no group of the segment is fusible");
  double ms = jit_now_ms() - job->start_ms;
  jit_trace_compile(job->trace, job->segment, -1, job->descs, job->group_count, job->generic,
                    job->trace_start, status ? "failed" : "compiled");
  jit_segment* seg = &cache->segments[job->segment];
  if (status) {
    jit_finish(cache, job->segment, job->hash, job->sig, job->sig_count, NULL, status, ms,
               cache->max_versions);
  } else {
    seg->stats.compile_ms += ms;
    jit_version* done = jit_version_find(seg, job->hash, job->sig, job->sig_count);
    jit_count_compile_ms(seg, job->generic, ms);
    if (done) {
      done->complete = true;
      done->compile_ms = ms;
    }
    if (!job->gone) {
      seg->stats.compiles++;
      STAX_LOG(JIT, "segment %d: compiled (%d group(s)) in %.2f ms", job->segment,
               seg->plan.group_count, ms);
    }
  }
  cache->busy--;
  jit_note_refused(&seg->plan, job->descs, job->group_count);
  jit_job_free(job);
  if (!cache->head && !cache->busy) pthread_cond_broadcast(&cache->idle);
}

/* A compiler thread: claims the next group of the queue's first job, compiles it without the
 * lock, publishes it (it goes live at once), and closes the job after its last group. With
 * several threads (jit_compiler_threads) a version's groups compile at once, largest first;
 * with one, in that order one after another. */
static void* jit_thread_main(void* arg) {
  jit_cache* cache = arg;
  int priority = 0;
  bool named = false;
  pthread_mutex_lock(&cache->lock);
  for (;;) {
    while (!cache->head && !cache->stop) pthread_cond_wait(&cache->work, &cache->lock);
    if (cache->stop) break;
    jit_job* job = cache->head;
    if (!job->order && !job->dead) {
      job->start_ms = jit_now_ms();
      job->trace_start = job->trace ? stax_vm_trace_now() : 0;
      job->order = calloc((size_t)job->group_count + 1, sizeof(int32_t));
      if (job->order) {
        jit_group_order(job->descs, job->group_count, job->order);
      } else {
        job->failure = stax_status_make(STAX_OUT_OF_MEMORY, "jit: group order");
        job->dead = true;
      }
    }
    if (job->dead || job->claimed >= job->group_count) {
      jit_job_dequeue(cache, job);
      if (job->running == 0) jit_job_close(cache, job);
      continue;
    }
    int32_t g = job->order[job->claimed++];
    job->running++;
    if (job->claimed == job->group_count) jit_job_dequeue(cache, job);
    bool keep_texts = cache->keep_texts; /* read under the lock; stax source / k.source */
    char dir_buffer[STAX_VM_JIT_CACHE_DIR_MAX];
    const char* cache_dir = jit_cache_dir_copy(cache, dir_buffer);
    pthread_mutex_unlock(&cache->lock);

    jit_set_priority(&priority, job->generic);
    if (job->trace && !named) {
      stax_vm_trace_name_thread(job->trace, stax_vm_trace_thread_id(), "stax jit compiler");
      named = true;
    }
    stax_jit_backend_t* backend = NULL;
    stax_status_t status = stax_jit_backend_get(&backend);
    stax_jit_kernel_t* kernel = NULL;
    uint64_t group_start = job->trace ? stax_vm_trace_now() : 0;
    if (!status)
      status = jit_compile_group(backend, job->descs, job->group_count, g, keep_texts, false,
                                 cache_dir, &kernel);
    if (jit_group_compiles(job->descs, job->group_count, g))
      jit_trace_compile(job->trace, job->segment, g, job->descs, job->group_count, job->generic,
                        group_start, jit_compile_outcome(status, kernel, false));

    pthread_mutex_lock(&cache->lock);
    job->running--;
    if (status) {
      if (job->compiled > 0 || job->failure) {
        /* Later groups failing keeps what landed: this one is interpreted. */
        STAX_LOG(JIT, "group %s interpreted: %s", job->descs[g].name, stax_status_message(status));
        stax_status_free(status);
      } else {
        job->failure = status; /* the version fails unless another group lands */
        job->dead = true;
      }
    } else if (job->gone) {
      if (kernel) stax_jit_kernel_release(kernel);
    } else if (!jit_publish(cache, job, g, kernel)) {
      job->gone = job->dead = true; /* jit_publish released the kernel */
    } else if (kernel) {
      job->compiled++;
    }
    if (job->dead) jit_job_dequeue(cache, job);
    if (job->queued_out && job->running == 0) jit_job_close(cache, job);
  }
  pthread_mutex_unlock(&cache->lock);
  return NULL;
}

int32_t stax_program_jit_pending(const stax_program_t* program) {
  jit_cache* cache = program ? atomic_load(&((stax_program_t*)program)->jit_cache) : NULL;
  if (!cache) return 0;
  pthread_mutex_lock(&cache->lock);
  int32_t pending = cache->busy;
  for (const jit_job* job = cache->head; job; job = job->next) pending++;
  pthread_mutex_unlock(&cache->lock);
  return pending;
}

void stax_program_jit_drain(const stax_program_t* program) {
  jit_cache* cache = program ? atomic_load(&((stax_program_t*)program)->jit_cache) : NULL;
  if (!cache) return;
  pthread_mutex_lock(&cache->lock);
  while ((cache->head || cache->busy) && cache->thread_count > 0)
    pthread_cond_wait(&cache->idle, &cache->lock);
  pthread_mutex_unlock(&cache->lock);
}

/* ---- the segment entry hook ----------------------------------------------------------------- */

/* STAX_LOG=jit: a new signature with the shapes of the inputs it guards. */
static void jit_log_signature(const stax_context_t* ctx, int32_t s, const jit_plan* plan,
                              uint64_t hash, bool generic) {
  char text[512];
  size_t used = 0;
  text[0] = '\0';
  for (int32_t e = 0; e < plan->ext_count && used + 1 < sizeof(text); e++) {
    int32_t reg = plan->ext_regs[e];
    const stax_tensor_t* t = ctx->registers[reg];
    if (ctx->program->registers[reg].flags & STAX_VM_REGISTER_CONSTANT) continue;
    int n = snprintf(text + used, sizeof(text) - used, "%s%s %s%s", used ? ", " : "",
                     stax_vm_register_name(ctx->program, reg), stax_dtype_name(t->dtype),
                     stax_dims_text(t->rank, t->dims).text);
    if (n < 0) break;
    used += (size_t)n;
    if (used >= sizeof(text)) used = sizeof(text) - 1;
  }
  stax_log(STAX_LOG_JIT, "segment %d: new %s %016llx: %s", s,
           generic ? "shape class" : "shape signature", (unsigned long long)hash, text);
}

stax_status_t stax_vm_jit_frame_create(stax_context_t* ctx) {
  jit_frame* frame = calloc(1, sizeof(*frame));
  if (!frame) return stax_status_make(STAX_OUT_OF_MEMORY, "jit: context state");
  frame->cache = stax_vm_jit_cache_get(ctx->program);
  if (!frame->cache) {
    free(frame);
    return stax_status_make(STAX_OUT_OF_MEMORY, "jit: program cache");
  }
  const char* env = getenv("STAX_JIT_VERIFY");
  frame->verify = ctx->options.jit_verify || (env && env[0] == '1');
  frame->tolerance = ctx->options.jit_tolerance > 0 ? ctx->options.jit_tolerance : 1e-4;
  const char* generic_env = getenv("STAX_JIT_GENERIC");
  frame->generic = ctx->options.jit_generic == STAX_JIT_GENERIC_ON ||
                   (ctx->options.jit_generic == STAX_JIT_GENERIC_DEFAULT &&
                    !(generic_env && generic_env[0] == '0'));
  /* Promotion compiles in the background only where a core is idle: with every core
   * running a call's threads, even a nice-10 compile stalls each parallel kernel on the
   * thread it preempts (BENCH S6 on 2 cores, 2 threads: the mix's calls went from 0.98x to
   * 1.10x ORT's latency while one ran). Sync mode compiles inline, so it promotes anyway. */
  const char* promote_env = getenv("STAX_JIT_PROMOTE");
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  bool idle_core = cores > (long)stax_threadpool_thread_count(ctx->pool);
  frame->promote = frame->generic && !(promote_env && promote_env[0] == '0') &&
                   (idle_core || ctx->options.jit == STAX_JIT_SYNC);
  const char* margin_env = getenv("STAX_JIT_PROMOTE_MARGIN");
  char* margin_end = NULL;
  double margin = margin_env ? strtod(margin_env, &margin_end) : 0;
  frame->promote_margin =
      margin_env && margin_end != margin_env && margin >= 0 ? margin : JIT_PROMOTE_MARGIN;
  frame->trial_side = -1;
  frame->pending_segment = -1;
  ctx->jit = frame;
  return STAX_OK;
}

/* Lets go of the kernels a guard matched (the call ran them, or never came). */
static void jit_release_pending(jit_frame* frame) {
  if (frame->pending_segment < 0) return;
  for (int32_t g = 0; g < frame->pending_groups; g++)
    if (frame->kernels[g]) stax_jit_kernel_release(frame->kernels[g]);
  frame->pending_segment = -1;
  frame->pending_groups = 0;
}

void stax_vm_jit_frame_destroy(stax_context_t* ctx) {
  jit_frame* frame = ctx->jit;
  if (!frame) return;
  jit_release_pending(frame);
  free(frame->sig);
  free(frame->class_sig);
  free(frame->args);
  free(frame->kernels);
  free(frame->group_ns);
  free(frame);
  ctx->jit = NULL;
}

/* Background mode: before queueing a compile, the version's kernels are looked up in the
 * object cache (a few tenths of a millisecond each); when every one is there the version is
 * ready now, so a new process whose shapes (or shape classes) an earlier one compiled runs
 * compiled from its first call. true when it took over (descs freed). Under the lock,
 * released meanwhile. */
static bool jit_request_from_cache(stax_context_t* ctx, jit_cache* cache, int32_t s,
                                   jit_version* ver, jit_desc* descs) {
  int32_t group_count = cache->segments[s].plan.group_count, sig_count = ver->sig_count;
  uint64_t hash = ver->hash;
  bool generic = ver->generic; /* ver may move once the lock is let go */
  int64_t* sig = malloc((size_t)(sig_count ? sig_count : 1) * sizeof(int64_t));
  stax_jit_kernel_t** kernels = calloc((size_t)group_count, sizeof(*kernels));
  if (!sig || !kernels) {
    free(sig);
    free(kernels);
    return false;
  }
  memcpy(sig, ver->sig, (size_t)sig_count * sizeof(int64_t));
  double ms = 0;
  char dir_buffer[STAX_VM_JIT_CACHE_DIR_MAX];
  const char* cache_dir = jit_cache_dir_copy(cache, dir_buffer);
  pthread_mutex_unlock(&cache->lock);
  stax_status_t status =
      jit_compile(ctx, s, generic, descs, group_count, false, true, cache_dir, kernels, &ms);
  pthread_mutex_lock(&cache->lock);
  bool loaded = status == STAX_OK;
  if (loaded) {
    STAX_LOG(JIT, "segment %d: version %016llx loaded from the object cache in %.2f ms", s,
             (unsigned long long)hash, ms);
    jit_finish(cache, s, hash, sig, sig_count, kernels, STAX_OK, ms, cache->max_versions);
    jit_note_refused(&cache->segments[s].plan, descs, group_count);
    jit_desc_free(descs, group_count);
  } else {
    stax_status_free(status);
    free(kernels); /* jit_compile released what it had */
  }
  free(sig);
  return loaded;
}

/* Compiler threads a context's background compiles want: STAX_JIT_COMPILER_THREADS when set
 * (1 to JIT_MAX_COMPILERS), else the cores its pool leaves idle, at least one and at most 8.
 * On 2 cores with a 2-thread pool that is the one thread the JIT always had: a second would
 * take a core from the calls; with 16 cores and 4 call threads a version's groups compile on
 * 8 at once (docs/jit.md, "Compile latency"). */
static int32_t jit_compiler_threads(const stax_context_t* ctx) {
  const char* env = getenv("STAX_JIT_COMPILER_THREADS");
  if (env && env[0]) {
    char* end = NULL;
    long n = strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= JIT_MAX_COMPILERS) return (int32_t)n;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  long idle = cores - (long)stax_threadpool_thread_count(ctx->pool);
  return idle < 1 ? 1 : idle > 8 ? 8 : (int32_t)idle;
}

/* Asks for a compile of (segment, signature): inline in sync mode, queued otherwise. A
 * generic version's groups are described rows-generic; skip (NULL or per group) leaves
 * groups out (an exact version skips what its class version has compiled). Called with the
 * lock held; returns with it held. */
static void jit_request(stax_context_t* ctx, jit_cache* cache, int32_t s, jit_version* ver,
                        const bool* skip) {
  const jit_plan* plan = &cache->segments[s].plan;
  jit_desc* descs = NULL;
  uint64_t hash = ver->hash;
  int32_t sig_count = ver->sig_count;
  bool generic = ver->generic;
  STAX_LOG(JIT, "segment %d: compiling the %s version %016llx", s, generic ? "generic" : "exact",
           (unsigned long long)hash);
  stax_status_t status = jit_describe(ctx, s, plan, generic, skip, &descs);
  if (status) {
    jit_finish(cache, s, hash, ver->sig, sig_count, NULL, status, 0, cache->max_versions);
    return;
  }
  ver->state = VERSION_QUEUED;
  if (ctx->options.jit == STAX_JIT_SYNC) {
    int64_t* sig = malloc((size_t)(sig_count ? sig_count : 1) * sizeof(int64_t));
    stax_jit_kernel_t** kernels = calloc((size_t)plan->group_count, sizeof(*kernels));
    double ms = 0;
    int32_t group_count = plan->group_count;
    if (sig) memcpy(sig, ver->sig, (size_t)sig_count * sizeof(int64_t));
    bool keep_texts = cache->keep_texts;
    char dir_buffer[STAX_VM_JIT_CACHE_DIR_MAX];
    const char* cache_dir = jit_cache_dir_copy(cache, dir_buffer);
    /* Unlocked while compiling: other contexts keep interpreting; ver may move. */
    pthread_mutex_unlock(&cache->lock);
    status = sig && kernels
                 ? jit_compile(ctx, s, generic, descs, group_count, keep_texts, false, cache_dir,
                               kernels, &ms)
                 : stax_status_make(STAX_OUT_OF_MEMORY, "jit: compile");
    pthread_mutex_lock(&cache->lock);
    if (sig) {
      jit_finish(cache, s, hash, sig, sig_count, kernels, status, ms, cache->max_versions);
    } else {
      stax_status_free(status);
      if (kernels) {
        jit_version tmp = {.kernels = kernels};
        jit_version_drop_kernels(&tmp, group_count);
      }
    }
    free(sig);
    jit_note_refused(&cache->segments[s].plan, descs, group_count);
    jit_desc_free(descs, group_count);
    return;
  }
  jit_job* job = calloc(1, sizeof(*job));
  if (job) job->sig = malloc((size_t)(sig_count ? sig_count : 1) * sizeof(int64_t));
  if (!job || !job->sig) {
    free(job);
    jit_desc_free(descs, plan->group_count);
    ver->state = VERSION_FAILED;
    return;
  }
  memcpy(job->sig, ver->sig, (size_t)sig_count * sizeof(int64_t));
  if (!cache->keep_texts) {
    if (jit_request_from_cache(ctx, cache, s, ver, descs)) {
      free(job->sig);
      free(job);
      return;
    }
    /* The lock was let go meanwhile: the version may have moved, or gone. */
    ver = jit_version_find(&cache->segments[s], hash, job->sig, sig_count);
    if (!ver || ver->state != VERSION_QUEUED) {
      jit_desc_free(descs, plan->group_count);
      free(job->sig);
      free(job);
      return;
    }
  }
  job->generic = generic;
  job->segment = s;
  job->hash = hash;
  job->sig_count = sig_count;
  job->group_count = plan->group_count;
  job->descs = descs;
  if (ctx->tracing) {
    job->trace = ctx->trace;
    stax_vm_trace_retain(job->trace);
  }
  if (cache->tail) cache->tail->next = job;
  else cache->head = job;
  cache->tail = job;
  int32_t want = jit_compiler_threads(ctx);
  if (want > cache->thread_want) cache->thread_want = want;
  /* Threads start as work needs them: up to the wanted count, and no more than this job's
   * groups beyond the ones already started. */
  int32_t target = cache->thread_want < job->group_count ? cache->thread_want : job->group_count;
  if (target < 1) target = 1;
  while (cache->thread_count < target &&
         pthread_create(&cache->threads[cache->thread_count], NULL, jit_thread_main, cache) == 0)
    cache->thread_count++;
  if (cache->thread_count == 0) {
    /* No thread: drop the queue; those signatures stay interpreted. */
    cache->head = cache->tail = NULL;
    ver->state = VERSION_FAILED;
    jit_job_free(job);
    return;
  }
  pthread_cond_broadcast(&cache->work);
}

/* One non-control instruction of a segment, with interpreter semantics. */
stax_status_t stax_vm_jit_exec_one(stax_context_t* ctx, const int32_t* ins) {
  stax_status_t status = STAX_OK;
  switch (ins[0] & STAX_VM_OPCODE_MASK) {
    case STAX_VM_OP_PROFILE_POINT: break;
    case STAX_VM_OP_FREE_TENSOR: stax_vm_take_register(ctx, STAX_VM_OPERAND(ins, 0), NULL); break;
    case STAX_VM_OP_ALLOC_TENSOR: status = stax_vm_exec_alloc(ctx, ins, false); break;
    case STAX_VM_OP_ALLOC_TENSOR_FAST: status = stax_vm_exec_alloc(ctx, ins, true); break;
    case STAX_VM_OP_LOAD_CONST: status = stax_vm_exec_load_const(ctx, ins); break;
    case STAX_VM_OP_LOAD_TENSOR: status = stax_vm_exec_load_tensor(ctx, ins); break;
    case STAX_VM_OP_STORE_TENSOR: status = stax_vm_exec_store_tensor(ctx, ins); break;
    case STAX_VM_OP_MOVE: status = stax_vm_exec_move(ctx, ins); break;
    case STAX_VM_OP_BROADCAST_TO: status = stax_vm_exec_broadcast_to(ctx, ins); break;
    case STAX_VM_OP_RESHAPE_VIEW: status = stax_vm_exec_reshape_view(ctx, ins); break;
    case STAX_VM_OP_TRANSPOSE_VIEW: status = stax_vm_exec_transpose_view(ctx, ins); break;
    case STAX_VM_OP_DIM_VALUES: status = stax_vm_exec_dim_values(ctx, ins); break;
    default: status = stax_vm_exec_compute(ctx, ins); break; /* the plan admits nothing else */
  }
  return status ? stax_vm_instruction_error(ctx, ins, status) : STAX_OK;
}

/* stax_vm_jit_exec_one, and its trace event when the call records one: the instructions of
 * groups without a kernel, interpreted inside a compiled segment. */
static stax_status_t jit_exec_traced(stax_context_t* ctx, const int32_t* ins) {
  if (!ctx->tracing) return stax_vm_jit_exec_one(ctx, ins);
  uint64_t start = stax_vm_trace_now();
  stax_status_t status = stax_vm_jit_exec_one(ctx, ins);
  stax_vm_trace_instruction(ctx, STAX_VM_CODE_INDEX(ins), start, stax_vm_trace_now(),
                            ctx->jit->pending_segment);
  return status;
}

/* Runs the version's kernels in place of the segment. false (with nothing to undo: the
 * interpreter re-runs the whole segment) when a kernel refuses its arguments. */
stax_status_t stax_vm_jit_run_kernels(stax_context_t* ctx, const jit_plan* plan,
                                     stax_jit_kernel_t** kernels, bool run_frees, bool* out_ran) {
  jit_frame* frame = ctx->jit;
  const int32_t* code = ctx->program->code;
  *out_ran = false;
  frame->last_kernels_ran = 0;
  int32_t post = 0;
  for (int32_t g = 0; g < plan->group_count; g++) {
    const jit_group_plan* gp = &plan->groups[g];
    if (g > 0) { /* views of earlier results that this or a later group reads */
      for (; post < plan->post_count && plan->post_after[post] < g; post++)
        STAX_RETURN_IF_ERROR(stax_vm_jit_exec_one(ctx, code + plan->post_words[post]));
      /* Values nothing reads from here on go back to the pool (docs/jit.md). */
      if (run_frees)
        for (int32_t f = 0; f < plan->free_count; f++)
          if (plan->free_after[f] == g - 1) stax_vm_take_register(ctx, plan->free_regs[f], NULL);
    }
    for (int32_t a = 0; a < plan->alloc_count; a++) {
      if (plan->alloc_before[a] != g) continue;
      /* Temporaries of compiled groups are never materialized. */
      if (plan->alloc_group[a] >= 0 && kernels[plan->alloc_group[a]]) continue;
      STAX_RETURN_IF_ERROR(stax_vm_jit_exec_one(ctx, code + plan->alloc_words[a]));
    }
    if (!kernels[g]) { /* the backend refused this group: interpret its nodes */
      for (int32_t n = 0; n < gp->node_count; n++)
        STAX_RETURN_IF_ERROR(jit_exec_traced(ctx, code + gp->node_words[n]));
      continue;
    }
    int32_t n = gp->input_count + gp->output_count;
    if (!jit_grow((void**)&frame->args, &frame->args_capacity, n, sizeof(*frame->args)))
      return stax_status_make(STAX_OUT_OF_MEMORY, "jit: kernel arguments");
    for (int32_t i = 0; i < gp->input_count; i++)
      frame->args[i] = ctx->registers[gp->value_regs[gp->inputs[i]]];
    for (int32_t o = 0; o < gp->output_count; o++)
      frame->args[gp->input_count + o] = ctx->registers[gp->value_regs[gp->outputs[o]]];
    for (int32_t i = 0; i < n; i++)
      if (!frame->args[i]) return STAX_OK;
    double start = frame->trial_side >= 0 ? jit_now_ms() : 0;
    uint64_t trace_start = ctx->tracing ? stax_vm_trace_now() : 0;
    stax_status_t status = stax_jit_kernel_run(kernels[g], gp->input_count, frame->args,
                                               gp->output_count, frame->args + gp->input_count,
                                               ctx->pool);
    if (ctx->tracing && status == STAX_OK) {
      stax_vm_trace_event_t event = {
          .start_ns = trace_start,
          .duration_ns = stax_vm_trace_now() - trace_start,
          .tid = ctx->trace_tid,
          .kind = STAX_VM_TRACE_KERNEL,
          .segment = frame->pending_segment,
          .group = g,
          .version = stax_jit_kernel_shape_generic(kernels[g]) ? "generic" : "exact"};
      snprintf(event.label, sizeof(event.label), "%s", stax_jit_kernel_name(kernels[g]));
      stax_vm_trace_add(ctx->trace, &event);
    }
    if (frame->trial_side >= 0 && status == STAX_OK)
      frame->group_ns[g] = (jit_now_ms() - start) * 1e6;
    if (status && stax_jit_kernel_shape_generic(kernels[g])) {
      /* Outside its class (leading dims that do not walk as rows, a view whose strides the
       * symbolic kernel did not expect): this group alone is interpreted, its temporaries
       * allocated now. */
      STAX_LOG(JIT, "shape-generic kernel declined, interpreting its group: %s",
               stax_status_message(status));
      stax_status_free(status);
      for (int32_t a = 0; a < plan->alloc_count; a++)
        if (plan->alloc_group[a] == g)
          STAX_RETURN_IF_ERROR(stax_vm_jit_exec_one(ctx, code + plan->alloc_words[a]));
      for (int32_t k = 0; k < gp->node_count; k++)
        STAX_RETURN_IF_ERROR(jit_exec_traced(ctx, code + gp->node_words[k]));
      continue;
    }
    if (status == STAX_OK) frame->last_kernels_ran++;
    if (status) {
      /* E.g. a view between groups got other strides than the kernel was compiled for (the
       * kernel checks every argument): nothing to undo, the interpreter re-runs the
       * segment from its start. */
      STAX_LOG(JIT, "kernel refused its arguments, interpreting: %s", stax_status_message(status));
      stax_status_free(status);
      return STAX_OK;
    }
  }
  for (int32_t p = post; p < plan->post_count; p++)
    STAX_RETURN_IF_ERROR(stax_vm_jit_exec_one(ctx, code + plan->post_words[p]));
  if (run_frees)
    for (int32_t f = 0; f < plan->free_count; f++)
      if (plan->free_after[f] == plan->group_count - 1)
        stax_vm_take_register(ctx, plan->free_regs[f], NULL);
  *out_ran = true;
  return STAX_OK;
}


/* The version of (segment, signature), created COUNTING when new (NULL when out of memory).
 * Under the lock. */
static jit_version* jit_version_track(const stax_context_t* ctx, int32_t s, jit_segment* seg,
                                      uint64_t hash, const int64_t* sig, int32_t count,
                                      bool generic) {
  jit_version* ver = jit_version_find(seg, hash, sig, count);
  if (ver) return ver;
  if (!jit_grow((void**)&seg->versions, &seg->version_capacity, seg->version_count + 1,
                sizeof(jit_version)))
    return NULL;
  int64_t* copy = malloc((size_t)(count ? count : 1) * sizeof(int64_t));
  if (!copy) return NULL;
  memcpy(copy, sig, (size_t)count * sizeof(int64_t));
  ver = &seg->versions[seg->version_count++];
  *ver = (jit_version){.hash = hash, .sig_count = count, .sig = copy, .generic = generic};
  seg->stats.signatures = seg->version_count;
  if (stax_log_enabled(STAX_LOG_JIT)) jit_log_signature(ctx, s, &seg->plan, hash, generic);
  return ver;
}

stax_status_t stax_vm_jit_segment_guard(stax_context_t* ctx, int32_t s, bool* out_unmatched) {
  jit_frame* frame = ctx->jit;
  jit_cache* cache = frame->cache;
  *out_unmatched = true;
  jit_release_pending(frame);
  pthread_mutex_lock(&cache->lock);
  cache->max_versions =
      ctx->options.jit_max_versions > 0 ? ctx->options.jit_max_versions : STAX_JIT_DEFAULT_VERSIONS;
  jit_segment* seg = &cache->segments[s];
  seg->stats.entries++;
  jit_plan* plan = jit_plan_get(cache, s);
  if (plan && plan->state == PLAN_OK) frame->run_groups += (uint64_t)plan->lowerable_count;
  int32_t need = cache->max_ext * JIT_SIG_WORDS_PER_INPUT;
  if (!plan || plan->state != PLAN_OK ||
      !jit_grow((void**)&frame->sig, &frame->sig_capacity, need > 0 ? need : 1, sizeof(int64_t)) ||
      !jit_grow((void**)&frame->class_sig, &frame->class_sig_capacity,
                need + 1 + plan->bcast_code_count, sizeof(int64_t))) {
    seg->stats.misses++;
    pthread_mutex_unlock(&cache->lock);
    return STAX_OK;
  }
  /* Outside the lock (the plan is immutable once built; the signature goes to this
   * context's scratch): views of external values first, so the signature sees the strides
   * the kernels will get (on a miss the interpreter runs them again: metadata only, same
   * result), then the signature. */
  pthread_mutex_unlock(&cache->lock);
  for (int32_t p = 0; p < plan->pre_count; p++)
    STAX_RETURN_IF_ERROR(stax_vm_jit_exec_one(ctx, ctx->program->code + plan->pre_words[p]));
  int32_t sig_count = 0, class_count = 0;
  uint64_t hash = 0, class_hash = 0;
  bool signed_ok = jit_signature(ctx, plan, frame->sig, &sig_count, &hash);
  bool classed = signed_ok && frame->generic &&
                 stax_vm_jit_class_signature(ctx, plan, frame->class_sig,
                                                          &class_count, &class_hash);
  pthread_mutex_lock(&cache->lock);
  if (!signed_ok) {
    seg->stats.misses++;
    pthread_mutex_unlock(&cache->lock);
    return STAX_OK;
  }
  int32_t threshold = ctx->options.jit_threshold > 0 ? ctx->options.jit_threshold : 2;
  /* The class version first: the first compile of a segment is its generic version, and
   * while it compiles no exact one is asked for. */
  jit_version* cls = classed ? jit_version_track(ctx, s, seg, class_hash, frame->class_sig,
                                                 class_count, true)
                             : NULL;
  /* On first sight: one compile serves the whole class, and with a warm object cache it
   * is only a load, so the first call runs compiled. */
  if (cls && cls->state == VERSION_COUNTING && ++cls->seen >= 1) {
    jit_request(ctx, cache, s, cls, NULL);
    cls = jit_version_find(seg, class_hash, frame->class_sig, class_count); /* may move */
  }
  bool class_ready = cls && cls->state == VERSION_READY && cls->kernels;
  /* Exact versions only for what the class version lacks, once it has finished: groups
   * that cannot be rows-generic (attention over S x S, Conv) or a segment without open
   * dims. */
  int32_t lacking = 0;
  if (class_ready && cls->complete)
    for (int32_t g = 0; g < plan->group_count; g++)
      lacking += plan->groups[g].lowerable && !cls->kernels[g];
  bool class_lacks = lacking > 0;
  bool exact_wanted = !cls || cls->state == VERSION_FAILED || (cls->complete && class_lacks);
  /* A class version with every group: an exact one only for a signature that stays hot,
   * and then it has to measure faster, group by group (the trial below). */
  bool promote = frame->promote && class_ready && cls->complete && !class_lacks &&
                 plan->lowerable_count > 0;
  jit_version* ver = jit_version_find(seg, hash, frame->sig, sig_count);
  if (!ver && (exact_wanted || !cls || promote)) {
    ver = jit_version_track(ctx, s, seg, hash, frame->sig, sig_count, false);
    /* The table may have grown (moved): find the class version again. */
    cls = classed ? jit_version_find(seg, class_hash, frame->class_sig, class_count) : NULL;
  }
  if (ver) ver->last_use = ++cache->clock;
  /* An exact version that only adds what the generic one lacks must earn its compile: the
   * generic version already runs the rest, and on 2 cores a compile takes time from the calls
   * (BENCH.md S2: exact supplements at the plain threshold cost 0.91x -> 0.67x ORT on 1
   * thread, 0.81x -> 0.41x on 2). Only a signature that stays hot gets one, unless the
   * generic version lacks most of the groups (a CNN whose convolutions have no
   * rows-generic lowering): then the exact version is most of the work, and comes at the
   * plain threshold. */
  bool mostly_generic = class_ready && 2 * lacking <= plan->lowerable_count;
  uint32_t exact_threshold = (uint32_t)threshold * (mostly_generic ? JIT_SUPPLEMENT_FACTOR : 1);
  if (promote && !exact_wanted) exact_threshold = (uint32_t)threshold * JIT_PROMOTE_FACTOR;
  if (ver && (exact_wanted || promote) && ver->state == VERSION_COUNTING &&
      ++ver->seen >= exact_threshold) {
    bool promoting = !exact_wanted;
    bool* skip = class_ready && !promoting ? calloc((size_t)plan->group_count, sizeof(bool))
                                           : NULL;
    for (int32_t g = 0; skip && g < plan->group_count; g++) skip[g] = cls->kernels[g] != NULL;
    if (promoting) {
      ver->promoted = true;
      seg->stats.promotions++;
    }
    jit_request(ctx, cache, s, ver, skip);
    free(skip);
    ver = jit_version_find(seg, hash, frame->sig, sig_count);
    cls = classed ? jit_version_find(seg, class_hash, frame->class_sig, class_count) : NULL;
  }
  bool exact_ready = ver && ver->state == VERSION_READY && ver->kernels;
  class_ready = cls && cls->state == VERSION_READY && cls->kernels;
  int32_t groups = plan->group_count;
  if ((!exact_ready && !class_ready) ||
      !jit_grow((void**)&frame->kernels, &frame->kernels_capacity, groups, sizeof(*frame->kernels))) {
    seg->stats.misses++;
    jit_enforce_caps(seg, cache->max_versions);
    seg->stats.signatures = seg->version_count;
    pthread_mutex_unlock(&cache->lock);
    return STAX_OK;
  }
  /* A promoted version on trial: calls alternate between its kernels and the class
   * version's, each group timed (stax_vm_jit_run_kernels), until the trial decides. */
  frame->trial_side = -1;
  if (exact_ready && class_ready && ver->promoted && ver->complete && !ver->trial_done &&
      jit_grow((void**)&frame->group_ns, &frame->group_ns_capacity, groups, sizeof(double))) {
    frame->trial_side = (int32_t)(ver->trial_turn++ & 1);
    for (int32_t g = 0; g < groups; g++) frame->group_ns[g] = -1;
  }
  /* Hit: per group the exact kernel, else the class one, else interpreted; held for this
   * call so an eviction meanwhile cannot free them. */
  int32_t have = 0;
  for (int32_t g = 0; g < groups; g++) {
    stax_jit_kernel_t* k = exact_ready && frame->trial_side != 0 ? ver->kernels[g] : NULL;
    if (!k && class_ready) k = cls->kernels[g];
    frame->kernels[g] = k;
    if (k) {
      stax_jit_kernel_retain(k);
      have++;
    }
  }
  if (have == 0) {
    seg->stats.misses++;
    pthread_mutex_unlock(&cache->lock);
    return STAX_OK;
  }
  if (cls) cls->last_use = ++cache->clock;
  seg->stats.hits++;
  pthread_mutex_unlock(&cache->lock);
  frame->pending_segment = s;
  frame->pending_groups = groups;
  frame->pending_hash = hash;
  frame->pending_sig_count = sig_count;
  *out_unmatched = false;
  return STAX_OK;
}

/* A promotion trial's call (under the lock): the fastest time per side and group so far;
 * after JIT_TRIAL_CALLS calls on each side, every group keeps its exact kernel only when
 * that beat the class kernel by JIT_PROMOTE_MARGIN, and the rest go back to the class
 * version's (released here; calls holding them keep them to their end). The fastest run,
 * not the mean: on a shared machine a preempted run says nothing about the code. */
static void jit_trial_record(jit_cache* cache, int32_t s, const jit_frame* frame) {
  jit_segment* seg = &cache->segments[s];
  jit_version* ver = jit_version_find(seg, frame->pending_hash, frame->sig,
                                      frame->pending_sig_count);
  int32_t groups = seg->plan.group_count, side = frame->trial_side;
  if (!ver || !ver->promoted || ver->trial_done || !ver->kernels) return;
  if (!ver->trial_ns) {
    ver->trial_ns = malloc(2 * (size_t)groups * sizeof(double));
    if (!ver->trial_ns) return;
    for (int32_t i = 0; i < 2 * groups; i++) ver->trial_ns[i] = -1;
  }
  for (int32_t g = 0; g < groups; g++) {
    double ns = frame->group_ns[g], *best = &ver->trial_ns[side * groups + g];
    if (ns >= 0 && (*best < 0 || ns < *best)) *best = ns;
  }
  ver->trial_runs[side]++;
  if (ver->trial_runs[0] < JIT_TRIAL_CALLS || ver->trial_runs[1] < JIT_TRIAL_CALLS) return;
  ver->trial_done = true;
  int32_t kept = 0, dropped = 0;
  for (int32_t g = 0; g < groups; g++) {
    if (!ver->kernels[g]) continue;
    double generic_ns = ver->trial_ns[g], exact_ns = ver->trial_ns[groups + g];
    /* No class time: the class kernel declined these shapes, the exact one is all there is. */
    bool faster =
        exact_ns >= 0 && (generic_ns < 0 || exact_ns < frame->promote_margin * generic_ns);
    STAX_LOG(JIT, "segment %d: signature %016llx group %d: exact %.1f us, generic %.1f us: %s",
             s, (unsigned long long)ver->hash, g, exact_ns / 1e3, generic_ns / 1e3,
             faster ? "exact kept" : "back to the generic kernel");
    if (faster) {
      kept++;
    } else {
      stax_jit_kernel_release(ver->kernels[g]);
      ver->kernels[g] = NULL;
      dropped++;
    }
  }
  seg->stats.promoted_groups_kept += (uint64_t)kept;
  seg->stats.promoted_groups_dropped += (uint64_t)dropped;
  free(ver->trial_ns);
  ver->trial_ns = NULL;
  if (kept == 0 && ver->state == VERSION_READY) {
    /* Every group is faster generic: nothing to hold. Calls find the signature retired and
     * run the class version; no second promotion. */
    jit_version_drop_kernels(ver, groups);
    ver->state = VERSION_RETIRED;
    seg->stats.versions--;
    seg->stats.exact_versions--;
  }
}

stax_status_t stax_vm_jit_segment_call(stax_context_t* ctx, int32_t* out_next) {
  jit_frame* frame = ctx->jit;
  *out_next = -1;
  if (!frame || frame->pending_segment < 0)
    return stax_status_make(STAX_FAILED_PRECONDITION,
                            "CALL_FUNC %s without a JIT guard that matched before it",
                            STAX_VM_JIT_FUNCTION);
  int32_t s = frame->pending_segment;
  /* The plan is immutable once built and lives as long as the cache. */
  const jit_plan* plan = &frame->cache->segments[s].plan;
  STAX_LOG(JIT, "segment %d: kernel hit, signature %016llx", s,
           (unsigned long long)frame->pending_hash);
  bool ran = false;
  stax_status_t status =
      frame->verify
          ? stax_vm_jit_verify_segment(ctx, s, frame->pending_hash, plan, frame->kernels, &ran)
          : stax_vm_jit_run_kernels(ctx, plan, frame->kernels, true, &ran);
  if (status == STAX_OK && ran) {
    jit_cache* cache = frame->cache;
    frame->run_kernels += (uint64_t)frame->last_kernels_ran;
    pthread_mutex_lock(&cache->lock);
    stax_jit_segment_stats_t* st = &cache->segments[s].stats;
    if (frame->last_kernels_ran == 0) {
      /* Every kernel declined (a matmul given fewer rows than its tile): interpreted. */
      st->hits--;
      st->misses++;
    } else if (frame->last_kernels_ran >= plan->lowerable_count) {
      st->full_hits++;
    } else {
      st->partial_hits++;
    }
    if (frame->trial_side >= 0) jit_trial_record(cache, s, frame);
    pthread_mutex_unlock(&cache->lock);
  }
  frame->trial_side = -1;
  if (status == STAX_OK && !ran) {
    /* A kernel refused its arguments: a view between groups got another layout than
     * predicted. It would on every call with this signature, so the version is dropped and
     * marked FAILED (interpreted from now on, never recompiled); this call interprets the
     * segment from its PROFILE_POINT. */
    jit_cache* cache = frame->cache;
    pthread_mutex_lock(&cache->lock);
    jit_segment* seg = &cache->segments[s];
    jit_version* ver = jit_version_find(seg, frame->pending_hash, frame->sig,
                                        frame->pending_sig_count);
    if (ver && ver->state == VERSION_READY) {
      jit_version_drop_kernels(ver, plan->group_count); /* freed when we release below */
      ver->state = VERSION_FAILED;
      seg->stats.versions--;
      seg->stats.failures++;
      STAX_LOG(JIT, "segment %d: signature %016llx: a kernel refused its arguments; version "
                    "dropped, interpreting", s, (unsigned long long)frame->pending_hash);
    }
    pthread_mutex_unlock(&cache->lock);
    *out_next = plan->start_word;
  }
  jit_release_pending(frame);
  return status;
}

/* ---- per-call statistics -------------------------------------------------------------------- */

void stax_vm_jit_run_begin(stax_context_t* ctx) {
  jit_frame* frame = ctx->jit;
  if (!frame) return;
  frame->run_groups = frame->run_kernels = 0;
}

void stax_vm_jit_run_end(stax_context_t* ctx) {
  jit_frame* frame = ctx->jit;
  if (!frame) return;
  jit_cache* cache = frame->cache;
  pthread_mutex_lock(&cache->lock);
  if (frame->run_kernels == 0)
    cache->calls_interpreted++;
  else if (frame->run_kernels >= frame->run_groups)
    cache->calls_compiled++;
  else
    cache->calls_partial++;
  pthread_mutex_unlock(&cache->lock);
}
