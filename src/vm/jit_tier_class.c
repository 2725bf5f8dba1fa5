/* Shape classes for the JIT tier: which dims of a register the model leaves open (its
 * "lead": every dim up to the last one that is not a constant in the model), the class
 * signature that keys a segment's shape-generic version (the open dims left out, their
 * layout kept), and the rewrite of a group description into a rows-generic one (rows values
 * [lead..., tail...] become [R, tail...], R = the product of the lead dims; jit.h,
 * stax_jit_group_t.rows_generic). See docs/jit.md, "Shape classes". */
#include <stdlib.h>
#include <string.h>

#include "base/hash_map.h"
#include "runtime/tensor_internal.h"
#include "vm/jit_tier_internal.h"

int32_t stax_vm_jit_register_lead(const stax_program_t* program, int32_t reg) {
  const stax_vm_descriptor_t* desc = &program->descriptors[program->registers[reg].descriptor];
  int32_t lead = 0;
  for (int32_t d = 0; d < desc->rank; d++)
    if (program->dims[desc->dims_first + d].kind != STAX_VM_DIM_CONSTANT) lead = d + 1;
  return lead;
}

/* True when dims [0, lead) walk as rows (stax_shape_lead_rows, what stax_jit_kernel_run
 * accepts). *out_row_stride: the stride of the innermost lead dim of extent > 1, or of dim
 * lead - 1 when none is. */
static bool lead_merges(int32_t lead, const int64_t* dims, const int64_t* strides,
                        int64_t* out_row_stride) {
  int64_t rows = 0;
  if (!stax_shape_lead_rows(lead, dims, strides, &rows, out_row_stride)) return false;
  if (*out_row_stride == 0) *out_row_stride = strides[lead - 1];
  return true;
}

bool stax_vm_jit_class_signature(const stax_context_t* ctx, const jit_plan* plan, int64_t* sig,
                                 int32_t* out_count, uint64_t* out_hash) {
  int32_t n = 0;
  bool any_open = false;
  sig[n++] = JIT_CLASS_MARK;
  for (int32_t e = 0; e < plan->ext_count; e++) {
    int32_t reg = plan->ext_regs[e];
    const stax_tensor_t* t = ctx->registers[reg];
    if (!stax_vm_jit_input_header(ctx, reg, &sig[n++])) return false;
    int32_t lead = plan->ext_leads[e];
    if (lead > t->rank) lead = t->rank;
    any_open |= lead > 0;
    /* Open dims are left out (one word that says so); fixed ones are kept. */
    for (int32_t d = 0; d < t->rank; d++) sig[n++] = d < lead ? -1 : t->dims[d];
    /* Strides: the fixed dims' as they are; the lead's as "walks as rows with row stride
     * s" (or not), which is what a rows-generic kernel checks. */
    int64_t row_stride = 0;
    bool merges = lead > 0 && lead_merges(lead, t->dims, t->strides, &row_stride);
    for (int32_t d = 0; d < t->rank; d++) {
      if (d >= lead)
        sig[n++] = t->strides[d];
      else if (d == lead - 1)
        sig[n++] = merges ? row_stride : INT64_MIN;
      else
        sig[n++] = merges ? -2 : INT64_MIN + 1;
    }
  }
  if (!any_open) return false; /* every dim fixed: the exact signature says it all */
  /* Broadcast dims: whether each computed dim is 1 decides which operands broadcast, so it is
   * part of the class (N == M and N == 1 are two versions; N == M over all values one). A
   * broadcast that fails here (N = 3, M = 5) gets no class version: the interpreter runs the
   * segment and reports it. */
  const stax_program_t* program = ctx->program;
  for (int32_t c = 0; c < plan->bcast_code_count; c++) {
    if (!plan->bcast_pinned[c]) continue;
    const stax_vm_dim_code_ref_t* ref = &program->dim_codes[plan->bcast_codes[c]];
    int64_t value = 0;
    stax_status_t status = stax_dim_code_eval(program->dim_code_words + ref->first, ref->count,
                                              ctx->symbols, program->symbols_count, &value);
    if (status) {
      stax_status_free(status);
      return false;
    }
    sig[n++] = value == 1;
  }
  uint64_t hash = 0xc1a55u;
  for (int32_t i = 0; i < n; i++) hash = stax_hash_combine(hash, (uint64_t)sig[i]);
  *out_count = n;
  *out_hash = hash;
  return true;
}

static bool code_has_bcast(const stax_program_t* program, int32_t code) {
  const stax_vm_dim_code_ref_t* ref = &program->dim_codes[code];
  for (int32_t w = 0; w < ref->count; w++)
    if (program->dim_code_words[ref->first + w].op == STAX_DIM_CODE_BCAST) return true;
  return false;
}

/* Appends reg's computed dims' codes to codes (deduplicated); *any_bcast when one broadcasts. */
static void collect_codes(const stax_program_t* program, int32_t reg, int32_t* codes,
                          int32_t* count, bool* any_bcast) {
  const stax_vm_descriptor_t* desc = &program->descriptors[program->registers[reg].descriptor];
  for (int32_t d = 0; d < desc->rank; d++) {
    const stax_vm_dim_t* dim = &program->dims[desc->dims_first + d];
    if (dim->kind != STAX_VM_DIM_CODE) continue;
    bool seen = false;
    for (int32_t i = 0; i < *count && !seen; i++) seen = codes[i] == dim->code;
    if (seen) continue;
    codes[(*count)++] = dim->code;
    *any_bcast |= code_has_bcast(program, dim->code);
  }
}

/* The entry of plan->bcast_codes whose words are words[first, first + count), or -1. */
static int32_t find_code(const stax_program_t* program, const jit_plan* plan,
                         const stax_dim_code_t* words, int32_t count) {
  for (int32_t c = 0; c < plan->bcast_code_count; c++) {
    const stax_vm_dim_code_ref_t* ref = &program->dim_codes[plan->bcast_codes[c]];
    if (ref->count != count) continue;
    bool same = true;
    for (int32_t w = 0; w < count && same; w++) {
      const stax_dim_code_t* x = &program->dim_code_words[ref->first + w];
      same = x->op == words[w].op && x->value == words[w].value;
    }
    if (same) return c;
  }
  return -1;
}

/* Dim code is postfix: start[i] is where the subexpression that ends at word i begins. A
 * BCAST word's operands end at i - 1 and just before that one's start; a chain of BCAST
 * words (bcast(N, M, K)) is flattened to its operands. */
static bool add_links(const stax_program_t* program, jit_plan* plan, int32_t bcast,
                      const stax_dim_code_t* words, const int32_t* start, int32_t end,
                      int32_t* capacity) {
  if (words[end].op == STAX_DIM_CODE_BCAST) {
    int32_t right_end = end - 1;
    int32_t left_end = start[right_end] - 1;
    if (left_end < 0) return true; /* malformed (the verifier rejects it): no links */
    return add_links(program, plan, bcast, words, start, left_end, capacity) &&
           add_links(program, plan, bcast, words, start, right_end, capacity);
  }
  int32_t operand = find_code(program, plan, words + start[end], end - start[end] + 1);
  if (operand < 0) return true; /* no value of the segment has that dim: nothing to compare */
  if (plan->bcast_link_count == *capacity) {
    int32_t grown = *capacity ? *capacity * 2 : 8;
    int32_t* links = realloc(plan->bcast_links, sizeof(int32_t) * 2 * (size_t)grown);
    if (!links) return false;
    plan->bcast_links = links;
    *capacity = grown;
  }
  plan->bcast_links[2 * plan->bcast_link_count] = operand;
  plan->bcast_links[2 * plan->bcast_link_count + 1] = bcast;
  plan->bcast_link_count++;
  return true;
}

static bool plan_bcast_links(const stax_program_t* program, jit_plan* plan) {
  int32_t capacity = 0;
  for (int32_t c = 0; c < plan->bcast_code_count; c++) {
    const stax_vm_dim_code_ref_t* ref = &program->dim_codes[plan->bcast_codes[c]];
    const stax_dim_code_t* words = program->dim_code_words + ref->first;
    if (ref->count < 1 || words[ref->count - 1].op != STAX_DIM_CODE_BCAST) continue;
    int32_t* start = malloc(sizeof(int32_t) * (size_t)ref->count);
    int32_t* stack = malloc(sizeof(int32_t) * (size_t)ref->count);
    bool ok = start && stack, wellformed = true;
    int32_t depth = 0;
    for (int32_t w = 0; ok && wellformed && w < ref->count; w++) {
      if (words[w].op == STAX_DIM_CODE_CONST || words[w].op == STAX_DIM_CODE_SYMBOL) {
        start[w] = w;
        stack[depth++] = w;
      } else if (depth >= 2) {
        depth--; /* the right operand; the left one's start is this one's */
        start[w] = start[stack[depth - 1]];
        stack[depth - 1] = w;
      } else {
        wellformed = false; /* the verifier rejects such code; no links then */
      }
    }
    if (ok && wellformed && depth == 1)
      ok = add_links(program, plan, c, words, start, ref->count - 1, &capacity);
    free(start);
    free(stack);
    if (!start || !stack || !ok) return false;
  }
  return true;
}

bool stax_vm_jit_plan_bcast_codes(const stax_program_t* program, jit_plan* plan) {
  plan->bcast_code_count = 0;
  plan->bcast_codes = NULL;
  plan->bcast_link_count = 0;
  plan->bcast_links = NULL;
  plan->bcast_pinned = NULL;
  size_t capacity = (size_t)plan->ext_count;
  for (int32_t g = 0; g < plan->group_count; g++) capacity += (size_t)plan->groups[g].value_count;
  int32_t* codes = calloc(capacity * STAX_MAX_RANK + 1, sizeof(int32_t));
  if (!codes) return false;
  int32_t count = 0;
  bool any_bcast = false;
  for (int32_t e = 0; e < plan->ext_count; e++)
    collect_codes(program, plan->ext_regs[e], codes, &count, &any_bcast);
  for (int32_t g = 0; g < plan->group_count; g++)
    for (int32_t v = 0; v < plan->groups[g].value_count; v++)
      collect_codes(program, plan->groups[g].value_regs[v], codes, &count, &any_bcast);
  if (!any_bcast) {
    free(codes);
    return true;
  }
  plan->bcast_codes = codes;
  plan->bcast_code_count = count;
  if (!plan_bcast_links(program, plan)) return false;
  /* Only these dims being 1 changes which values broadcast against which: two values whose
   * dims are one expression are 1 together, and two different expressions at one position of
   * a node's output make a broadcast of them (else they were unified into one). */
  plan->bcast_pinned = calloc((size_t)(count > 0 ? count : 1), sizeof(bool));
  if (!plan->bcast_pinned) return false;
  for (int32_t c = 0; c < count; c++) plan->bcast_pinned[c] = code_has_bcast(program, codes[c]);
  for (int32_t l = 0; l < plan->bcast_link_count; l++)
    plan->bcast_pinned[plan->bcast_links[2 * l]] = true;
  return true;
}

static int32_t class_find(int32_t* parent, int32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]]; /* path halving */
    x = parent[x];
  }
  return x;
}

int32_t* stax_vm_jit_bcast_classes(const stax_context_t* ctx, const jit_plan* plan) {
  if (plan->bcast_code_count == 0) return NULL;
  const stax_program_t* program = ctx->program;
  int32_t* parent = malloc(sizeof(int32_t) * (size_t)plan->bcast_code_count);
  if (!parent) return NULL;
  for (int32_t c = 0; c < plan->bcast_code_count; c++) parent[c] = c;
  for (int32_t l = 0; l < plan->bcast_link_count; l++) {
    int32_t operand = plan->bcast_links[2 * l], bcast = plan->bcast_links[2 * l + 1];
    int64_t values[2] = {0, 0};
    bool known = true;
    for (int32_t k = 0; k < 2 && known; k++) {
      const stax_vm_dim_code_ref_t* ref =
          &program->dim_codes[plan->bcast_codes[plan->bcast_links[2 * l + k]]];
      stax_status_t status = stax_dim_code_eval(program->dim_code_words + ref->first, ref->count,
                                                ctx->symbols, program->symbols_count, &values[k]);
      known = status == STAX_OK;
      stax_status_free(status);
    }
    /* An operand that is not 1 is the broadcast's value, and a broadcast that is 1 has only
     * operands of 1; which dims are 1 is part of the class signature, so either holds for the
     * whole class. */
    if (known && (values[0] != 1 || values[1] == 1))
      parent[class_find(parent, operand)] = class_find(parent, bcast);
  }
  for (int32_t c = 0; c < plan->bcast_code_count; c++) parent[c] = class_find(parent, c);
  return parent;
}

static int32_t code_entry(const jit_plan* plan, int32_t code) {
  for (int32_t c = 0; c < plan->bcast_code_count; c++)
    if (plan->bcast_codes[c] == code) return c;
  return -1;
}

/* Whether two registers' lead dims are the same expressions of the model's symbols, or equal
 * over the class by the broadcasts (bcast_classes). */
static bool same_lead(const stax_program_t* program, const jit_plan* plan,
                      const int32_t* bcast_classes, int32_t reg_a, int32_t reg_b, int32_t lead) {
  const stax_vm_descriptor_t* a = &program->descriptors[program->registers[reg_a].descriptor];
  const stax_vm_descriptor_t* b = &program->descriptors[program->registers[reg_b].descriptor];
  for (int32_t d = 0; d < lead; d++) {
    const stax_vm_dim_t* x = &program->dims[a->dims_first + d];
    const stax_vm_dim_t* y = &program->dims[b->dims_first + d];
    if (x->kind != y->kind) return false;
    if (x->kind == STAX_VM_DIM_CONSTANT) {
      if (x->value != y->value) return false;
    } else if (strcmp(stax_vm_program_string(program, program->dim_codes[x->code].text),
                      stax_vm_program_string(program, program->dim_codes[y->code].text)) != 0) {
      int32_t ex = bcast_classes ? code_entry(plan, x->code) : -1;
      int32_t ey = bcast_classes ? code_entry(plan, y->code) : -1;
      if (ex < 0 || ey < 0 || bcast_classes[ex] != bcast_classes[ey]) return false;
    }
  }
  return true;
}

bool stax_vm_jit_make_rows_generic(const stax_program_t* program, const jit_plan* plan,
                                   const int32_t* bcast_classes, const jit_group_plan* gp,
                                   jit_desc* d) {
  int32_t lead = 0, first = -1;
  for (int32_t v = 0; v < gp->value_count; v++) {
    int32_t l = gp->value_leads[v];
    if (l == 0) continue;
    if (first < 0) {
      first = v;
      lead = l;
    } else if (l != lead || !same_lead(program, plan, bcast_classes, gp->value_regs[first],
                                       gp->value_regs[v], lead)) {
      return false; /* two different row spaces */
    }
  }
  if (first < 0) return false;
  for (int32_t v = 0; v < gp->value_count; v++) {
    stax_jit_value_t* value = &d->values[v];
    if (gp->value_leads[v] == 0) continue;
    if (value->rank < lead) return false;
    int64_t row_stride = 0;
    if (!lead_merges(lead, value->dims, value->strides, &row_stride)) return false;
    int64_t rows = 1;
    for (int32_t k = 0; k < lead; k++) rows *= value->dims[k];
    int32_t tail = value->rank - lead;
    int64_t dims[STAX_MAX_RANK], strides[STAX_MAX_RANK];
    dims[0] = rows;
    strides[0] = row_stride;
    for (int32_t k = 0; k < tail; k++) {
      dims[1 + k] = value->dims[lead + k];
      strides[1 + k] = value->strides[lead + k];
    }
    value->rank = 1 + tail;
    memcpy(value->dims, dims, sizeof(int64_t) * (size_t)value->rank);
    memcpy(value->strides, strides, sizeof(int64_t) * (size_t)value->rank);
    value->rows = true;
  }
  d->group.rows_generic = true;
  return true;
}

/* A value's strides that may vary over the class. A contiguous register's stride d is a
 * product of the dims after d: open when one of them is. A view's strides come from the
 * tensor it views, which the program does not describe: open when any other dim of it is
 * open, except 0 and 1 (broadcast and unit steps are structural, and unit steps must stay
 * constants for vector loads). Not a unit step with open dims after it that are all 1 in the
 * example: that is what a contiguous tensor shows there (x [N, C, 1, 1]: C's stride H * W =
 * 1), and taken as fixed it would make every later call of the class, at any other size,
 * decline. A stride guessed fixed that does change within the class makes the kernel decline
 * that call (it checks every argument), never a wrong answer. */
static uint32_t open_strides(const stax_vm_descriptor_t* desc, uint32_t open_dims,
                             const stax_jit_value_t* value) {
  uint32_t open = 0;
  for (int32_t d = 0; d < value->rank; d++) {
    uint32_t later = open_dims & ~((2u << d) - 1u), others = open_dims & ~(1u << d);
    int64_t after = 1;
    for (int32_t e = d + 1; e < value->rank; e++) after *= value->dims[e];
    bool structural =
        value->strides[d] == 0 || (value->strides[d] == 1 && (later == 0 || after != 1));
    if (desc->layout == STAX_VM_LAYOUT_CONTIGUOUS ? later != 0 : others != 0 && !structural)
      open |= 1u << d;
  }
  return open;
}

bool stax_vm_jit_make_symbolic(const stax_program_t* program, const jit_plan* plan,
                               const jit_group_plan* gp, stax_jit_value_t* values) {
  bool any = false;
  for (int32_t v = 0; v < gp->value_count; v++) {
    stax_jit_value_t* value = &values[v];
    const stax_vm_descriptor_t* desc =
        &program->descriptors[program->registers[gp->value_regs[v]].descriptor];
    uint32_t dims = 0;
    for (int32_t k = 0; k < desc->rank && k < value->rank; k++) {
      const stax_vm_dim_t* dim = &program->dims[desc->dims_first + k];
      if (dim->kind == STAX_VM_DIM_CONSTANT) continue;
      int32_t entry = value->dims[k] == 1 ? code_entry(plan, dim->code) : -1;
      if (entry >= 0 && plan->bcast_pinned[entry]) continue; /* 1 over the class: broadcasts */
      dims |= 1u << k;
    }
    value->open_dims = dims;
    value->open_strides = value->role == STAX_JIT_VALUE_TEMPORARY ? 0 : open_strides(desc, dims, value);
    any |= dims != 0;
  }
  return any;
}
