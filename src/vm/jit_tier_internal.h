/* Internals of the JIT tier shared by jit_tier.c (plans, cache, compiles, the hit path) and
 * jit_tier_report.c (verify mode, statistics, kernel sources). Not a public interface. */
#ifndef STAX_VM_JIT_TIER_INTERNAL_H_
#define STAX_VM_JIT_TIER_INTERNAL_H_

#include <pthread.h>

#include "jit/jit.h"

/* Versions kept per segment unless the context says: about 100 KB of code each for a
 * transformer layer's dozen kernels, and enough for a stream of a few dozen recurring
 * shapes (8 thrashed on BENCH.md's S2, where 53 of 61 compiled shapes were evicted). */
#define STAX_JIT_DEFAULT_VERSIONS 32
#include "vm/context.h"
#include "vm/jit_tier.h"

enum { JIT_ROLE_INPUT, JIT_ROLE_OUTPUT, JIT_ROLE_TEMP };
enum { PLAN_UNANALYSED = 0, PLAN_OK, PLAN_UNSUPPORTED };
/* RETIRED: a promoted exact version whose trial kept none of its kernels. It holds nothing
 * and is not a held version; it stays tracked so the signature is not promoted again (until
 * the tracked signatures are trimmed, LRU). */
enum { VERSION_COUNTING = 0, VERSION_QUEUED, VERSION_READY, VERSION_FAILED, VERSION_RETIRED };
/* Words per external input in a signature: a header (dtype, rank, alignment, constant),
 * then rank dims and rank strides. */
#define JIT_SIG_WORDS_PER_INPUT (1 + 2 * STAX_MAX_RANK)
/* An exact version that supplements a generic one (groups it lacks) is compiled after this
 * many times the threshold's calls of its signature (docs/jit.md, "Shape classes"). */
#define JIT_SUPPLEMENT_FACTOR 8
/* Hot-shape promotion (docs/jit.md, "Promotion"): a signature whose class version has every
 * group gets an exact version of all of them after this many times the threshold's calls;
 * then JIT_TRIAL_CALLS calls alternate between its kernels and the class version's, timed
 * per group, and a group keeps its exact kernel only when its fastest run beats the class
 * kernel's fastest by JIT_PROMOTE_MARGIN. */
#define JIT_PROMOTE_FACTOR 32
#define JIT_TRIAL_CALLS 8
#define JIT_PROMOTE_MARGIN 0.97
/* The first word of a class signature (no exact signature starts with it: their first word
 * is a dtype/rank header, >= 0). */
#define JIT_CLASS_MARK (INT64_MIN + 7)

typedef struct jit_group_plan {
  int32_t value_count;
  int32_t* value_regs; /* registers of the group's values */
  int8_t* roles;
  int32_t node_count;
  int32_t* node_words; /* code offsets of its compute instructions */
  int32_t input_count, output_count;
  int32_t* inputs;  /* value indices, kernel argument order */
  int32_t* outputs;
  /* Whether some lowering may compile it: not an op without lowering kept alone, not dead
   * shape arithmetic, and not refused by an exact-shape lowering (cleared then, under the
   * cache lock). The statistics count a call as fully compiled when every such group ran a
   * kernel. */
  bool lowerable;
  int32_t* value_leads; /* per value: stax_vm_jit_register_lead of its register */
} jit_group_plan;

typedef struct jit_plan {
  int32_t state;
  int32_t start_word, next_word;
  int32_t ext_count;
  int32_t* ext_regs; /* registers read but not written in the segment: the guarded inputs */
  int32_t* ext_leads; /* per external input: stax_vm_jit_register_lead (class signatures) */
  int32_t alloc_count;
  int32_t* alloc_words; /* the segment's ALLOC instructions */
  /* Per ALLOC: the group whose temporary it allocates (a hit skips it unless that group is
   * interpreted), or -1 (always run). */
  int32_t* alloc_group;
  /* Per ALLOC: the first group that references its register (it runs just before that
   * group). Per FREE: the last group that reads its register, directly or through a view
   * made between groups (it runs before the next group, after the views between them;
   * group_count - 1: at the end; registers from outside the segment always at the end, so
   * an interpreter re-run from the segment's start still finds them). So a compiled call
   * holds only the values live at each group, and the buffer pool hands a freed,
   * cache-warm block to the next value of its class, instead of every value of the segment
   * being live, and mostly cold, for the whole call. */
  int32_t* alloc_before;
  int32_t free_count;
  int32_t* free_regs;
  int32_t* free_after;
  /* Views, moves and constant loads: run with interpreter semantics before the kernels (pre:
   * their source is not computed in the segment) or after them (post: they view a result and
   * no compute of the segment reads them). */
  int32_t pre_count, post_count;
  int32_t* pre_words;
  int32_t* post_words;
  /* Per post instruction: the group after which it runs (views of a result read by a later
   * group run between the groups, in bytecode order; the rest after the last group). */
  int32_t* post_after;
  int32_t group_count;
  jit_group_plan* groups;
  int32_t lowerable_count; /* groups with `lowerable` */
  /* Groups no lowering takes for a dtype (a float64 MatMul, a float16 AveragePool:
   * stax_jit_op_dtype_lowered); they are not `lowerable`. */
  int32_t dtype_fallbacks;
  /* When a value of the segment has a broadcast dim (bcast(N, M), docs/ir.md): the dim codes
   * of every computed dim of its values (ext inputs and group values), deduplicated. Those
   * that take part in a broadcast (contain one, or are a top-level operand of one: pinned) are
   * evaluated by the class signature (which also checks that the broadcasts hold), and whether
   * each is 1 is recorded, so a class version never runs a kernel compiled for N == M on a
   * call with N == 1. Empty for segments without broadcast dims: their classes are as before. */
  int32_t bcast_code_count;
  int32_t* bcast_codes;
  bool* bcast_pinned;
  /* Pairs (operand, broadcast), indices into bcast_codes: the broadcast dim's code has that
   * operand among its top-level operands. Within a class an operand that is not 1 equals the
   * broadcast (the signature pins which are 1 and checks the broadcasts), so rows-generic
   * groups may treat them as one lead (stax_vm_jit_bcast_classes). */
  int32_t bcast_link_count;
  int32_t* bcast_links;
} jit_plan;

/* A version is exact (keyed by the full signature: every dim and stride) or generic (keyed
 * by the class signature, stax_vm_jit_class_signature: one per shape class, its kernels
 * rows-generic). A call uses the exact version's kernel for a group where it has one, else
 * the class version's, else interprets the group. */
typedef struct jit_version {
  uint64_t hash;
  int32_t sig_count;
  int64_t* sig;
  int32_t state;
  uint32_t seen;
  uint64_t last_use;
  bool generic;
  bool complete;     /* its compile has finished (every group tried) */
  double compile_ms; /* of its compile */
  stax_jit_kernel_t** kernels; /* group_count, VERSION_READY */
  /* Promotion: an exact version of every group for a hot signature of a complete class
   * version. Until trial_done its calls alternate sides (0: the class kernels, 1: these),
   * and trial_ns keeps per side and group the fastest run seen (2 * group_count, < 0: none
   * yet); trial_runs counts the timed calls per side. */
  bool promoted, trial_done;
  uint32_t trial_turn;
  uint32_t trial_runs[2];
  double* trial_ns;
} jit_version;

typedef struct jit_segment {
  jit_plan plan;
  jit_version* versions;
  int32_t version_count, version_capacity;
  stax_jit_segment_stats_t stats;
} jit_segment;

/* A compile request: the group descriptions built from one context's live shapes. */
typedef struct jit_desc {
  stax_jit_group_t group;
  stax_jit_value_t* values;
  /* Generic versions: the values as a symbolic group, tried when the rows-generic lowering
   * refuses (a Softmax over an open last axis walks as rows but has no fixed row); NULL
   * when there is no such alternative. */
  stax_jit_value_t* symbolic_values;
  stax_jit_node_t* nodes;
  int32_t* indices;
  bool refused;  /* the backend found no lowering (UNIMPLEMENTED) */
  bool skip;     /* not compiled in this version (the class version has it, or it cannot be
                    rows-generic) */
  char name[32]; /* "seg<S>_g<G>" (exact) or "seg<S>_g<G>_rows" (generic) */
} jit_desc;

typedef struct jit_job {
  struct jit_job* next;
  bool generic;
  int32_t segment;
  uint64_t hash;
  int32_t sig_count;
  int64_t* sig;
  int32_t group_count;
  jit_desc* descs;
  /* The requesting context's trace while it was recording (retained), or NULL: the
   * compiler thread adds its compile events there. */
  struct stax_vm_trace_s* trace;
  /* Compiler threads claim the job's groups one at a time, in `order` (largest first), until
   * none is left or the job is dead (its version went away, or its first kernel failed);
   * the thread that finishes the last running group closes the job. Under the cache lock. */
  int32_t* order;
  int32_t claimed;  /* groups claimed so far: order[claimed] is the next */
  int32_t running;  /* groups being compiled now */
  int32_t compiled; /* kernels published */
  bool dead;       /* no more claims */
  bool gone;       /* its version went away (or the program is stopping) */
  bool queued_out; /* taken off the queue (counted in busy) */
  stax_status_t failure; /* the first failure while nothing had compiled */
  double start_ms;
  uint64_t trace_start;
} jit_job;

/* Compiler threads per program at most (STAX_JIT_COMPILER_THREADS up to this). */
#define JIT_MAX_COMPILERS 16

enum { STAX_VM_JIT_CACHE_DIR_MAX = 1024 };

typedef struct stax_vm_jit_cache_s {
  pthread_mutex_t lock;
  pthread_cond_t work, idle;
  stax_program_t* program; /* borrowed: the cache dies with it */
  jit_segment* segments;
  int32_t segment_count;
  uint64_t clock; /* LRU time: one tick per lookup */
  int32_t max_ext; /* largest ext_count analysed so far (sizes frames lazily) */
  int32_t max_versions; /* the cap of the latest requester (background jobs use it) */
  bool stop;
  /* Compiler threads started and wanted: as many as the cores the requesting contexts leave
   * idle (at least one), or STAX_JIT_COMPILER_THREADS (jit_compiler_threads). */
  int32_t thread_count, thread_want;
  bool keep_texts; /* `stax source`: compiles keep LLVM IR and assembly */
  /* The object cache folder the program's compiles use (stax_program_jit_set_cache_dir):
   * unset, the environment's; set and empty, none. */
  bool cache_dir_set;
  char cache_dir[STAX_VM_JIT_CACHE_DIR_MAX];
  int32_t busy; /* jobs taken off the queue and not yet closed */
  /* Calls (stax_context_run) by how they ran: every lowerable group a kernel, some, none. */
  uint64_t calls_compiled, calls_partial, calls_interpreted;
  pthread_t threads[JIT_MAX_COMPILERS];
  jit_job* head;
  jit_job* tail;
} jit_cache;

typedef struct stax_vm_jit_frame_s {
  jit_cache* cache;
  int64_t* sig;
  int32_t sig_capacity;
  stax_tensor_t** args; /* kernel arguments, sized by the largest group */
  int32_t args_capacity;
  stax_jit_kernel_t** kernels; /* the matched version's kernels, retained until the call */
  int32_t kernels_capacity;
  /* What the last guard matched, for the CALL_FUNC after it (-1: nothing pending). */
  int32_t pending_segment;
  int32_t pending_groups;
  int32_t pending_sig_count; /* its signature words are still in sig[] */
  uint64_t pending_hash;
  /* The class signature of the last guard (for the call's bookkeeping). */
  int64_t* class_sig;
  int32_t class_sig_capacity;
  /* This run's lowerable groups entered and those that ran a kernel (per-call statistics). */
  uint64_t run_groups, run_kernels;
  int32_t last_kernels_ran; /* by the latest stax_vm_jit_run_kernels */
  /* A promotion trial's call: which side's kernels the guard matched (-1: not a trial), and
   * the time of each group's kernel (ns, < 0: not run), sized by the largest group count. */
  int32_t trial_side;
  double* group_ns;
  int32_t group_ns_capacity;
  bool verify;
  bool generic; /* shape-generic versions on (options.jit_generic / STAX_JIT_GENERIC) */
  bool promote; /* hot-shape promotion on (STAX_JIT_PROMOTE, default on; needs generic) */
  /* An exact kernel is kept when its time < margin x the class kernel's (JIT_PROMOTE_MARGIN;
   * STAX_JIT_PROMOTE_MARGIN overrides it, for tests: 0 drops every exact kernel). */
  double promote_margin;
  double tolerance;
} jit_frame;

/* A signature's header word for an external input register (dtype, rank, constness); false
 * when the register is empty or its data is not aligned to its element (interpret). */
bool stax_vm_jit_input_header(const stax_context_t* ctx, int32_t reg, int64_t* out_word);

/* Shape classes (jit_tier_class.c). */
/* 1 + the index of the register's last dim that is not a model constant (0: all fixed). */
int32_t stax_vm_jit_register_lead(const stax_program_t* program, int32_t reg);
/* The class signature of the live inputs (JIT_CLASS_MARK, then per input its header, its
 * fixed dims, -1 for open ones, and its layout; then, for segments with broadcast dims, one
 * word per pinned plan->bcast_codes entry saying whether that dim is 1); false when no input has an open
 * dim, an input is empty or misaligned, or a broadcast dim does not evaluate (the interpreter
 * then reports it). sig needs 1 + ext_count * JIT_SIG_WORDS_PER_INPUT + bcast_code_count
 * words. */
bool stax_vm_jit_class_signature(const stax_context_t* ctx, const jit_plan* plan, int64_t* sig,
                                 int32_t* out_count, uint64_t* out_hash);
/* Fills plan->bcast_codes (see jit_plan); false when out of memory. */
bool stax_vm_jit_plan_bcast_codes(const stax_program_t* program, jit_plan* plan);
/* Rewrites group description d (built from live shapes) into a rows-generic one; false
 * when the group has no rows space, two different ones, or lead dims that do not walk as
 * rows (the group is then left to exact versions). Leads are one row space when their dims
 * are the same expressions, or (bcast_classes, may be NULL) equal over the class. */
bool stax_vm_jit_make_rows_generic(const stax_program_t* program, const jit_plan* plan,
                                   const int32_t* bcast_classes, const jit_group_plan* gp,
                                   jit_desc* d);
/* For a segment with broadcast dims: per bcast_codes entry, a class id such that two entries
 * with the same id are equal on every call of this call's shape class (a broadcast and its
 * operands that are not 1). NULL when the plan has no broadcast dims or out of memory (then
 * leads compare by expression only); free() it. */
int32_t* stax_vm_jit_bcast_classes(const stax_context_t* ctx, const jit_plan* plan);
/* The fallback for groups that are not rows-generic (attention: a Softmax over an open last
 * axis, a MatMul of two views with open M, N, K): marks the dims and strides of every value
 * that vary over the class, for a symbolic kernel (jit.h), in `values` (the group's, live
 * shapes). In a segment with broadcast dims a pinned dim (jit_plan) that is 1 stays fixed (the
 * class signature records which are 1), so it broadcasts. False when nothing is open. */
bool stax_vm_jit_make_symbolic(const stax_program_t* program, const jit_plan* plan,
                               const jit_group_plan* gp, stax_jit_value_t* values);

/* The program's cache, created on first use (NULL when out of memory). */
jit_cache* stax_vm_jit_cache_get(stax_program_t* program);
/* One instruction of a segment with interpreter semantics (errors name the instruction). */
STAX_MUST_USE stax_status_t stax_vm_jit_exec_one(stax_context_t* ctx, const int32_t* ins);
/* The hit path: needed ALLOCs, kernels (or interpreted groups), post instructions, and the
 * FREEs when run_frees. *out_ran false: a kernel refused its arguments (interpret). */
STAX_MUST_USE stax_status_t stax_vm_jit_run_kernels(stax_context_t* ctx, const jit_plan* plan,
                                                    stax_jit_kernel_t** kernels, bool run_frees,
                                                    bool* out_ran);
/* Verify mode: kernels, then the interpreter on the same inputs, compared. */
STAX_MUST_USE stax_status_t stax_vm_jit_verify_segment(stax_context_t* ctx, int32_t s,
                                                       uint64_t hash, const jit_plan* plan,
                                                       stax_jit_kernel_t** kernels,
                                                       bool* out_ran);

#endif /* STAX_VM_JIT_TIER_INTERNAL_H_ */
