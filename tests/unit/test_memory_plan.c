/* Memory planning (src/vm/memory_plan.c, memory_arena.c, docs/memory.md):
 *   - a plan checker: for several symbol bindings (0, 1, small, large) it replays every
 *     planned value's live range over the layout and checks no two values live at the same
 *     time share a byte (except an in-place pair at its op), that every offset is 64-byte
 *     aligned and inside the arena;
 *   - in-place pairs are legal: an elementwise op, same dtype and dims, the source dying at
 *     that op and not read through another operand;
 *   - differential runs with the plan on and off over random shapes (an MLP, a chain of
 *     views, a model with NonZero whose later values fall back to the pool, a Loop);
 *   - a steady-state call allocates nothing for its temporaries. */
#include <stdlib.h>

#include "test_vm_util.h"
#include "vm/memory_plan.h"

/* ---- the plan checker ------------------------------------------------------------------- */

/* Returns how many pairs of values overlap illegally. */
static int plan_overlaps(const stax_program_t* program, const int64_t* symbols) {
  const stax_vm_memory_plan_t* plan = program->memory_plan;
  int overlaps = 0;
  if (!plan) return 0;
  int32_t n = plan->value_count, slots = plan->slot_count;
  int64_t* bytes = calloc((size_t)n, sizeof(int64_t));
  int64_t* offsets = calloc((size_t)slots, sizeof(int64_t));
  int64_t* slot_bytes = calloc((size_t)slots, sizeof(int64_t));
  int64_t arena = 0;
  stax_vm_memory_plan_layout(program, symbols, bytes, offsets, slot_bytes, &arena);
  for (int32_t s = 0; s < slots; s++) {
    CHECK_EQ_INT(offsets[s] % STAX_VM_PLAN_ALIGNMENT, 0);
    CHECK_EQ_INT(slot_bytes[s] % STAX_VM_PLAN_ALIGNMENT, 0);
    CHECK(offsets[s] + slot_bytes[s] <= arena);
  }
  for (int32_t a = 0; a < n; a++) {
    const stax_vm_planned_value_t* x = &plan->values[a];
    CHECK(x->first <= x->last);
    CHECK(x->slot >= 0 && x->slot < slots);
    if (bytes[a] < 0) continue;
    int64_t x_begin = offsets[x->slot], x_end = x_begin + bytes[a];
    CHECK(x_end <= offsets[x->slot] + slot_bytes[x->slot]);
    for (int32_t b = a + 1; b < n; b++) {
      const stax_vm_planned_value_t* y = &plan->values[b];
      if (bytes[b] < 0) continue;
      int64_t y_begin = offsets[y->slot], y_end = y_begin + bytes[b];
      bool share_bytes = x_begin < y_end && y_begin < x_end && bytes[a] > 0 && bytes[b] > 0;
      bool live_together = x->first <= y->last && y->first <= x->last;
      if (!share_bytes || !live_together) continue;
      /* The one allowed overlap: y takes over x's memory at the op where x dies. */
      bool inplace = y->inplace_of == a && y->first <= x->last && x->last < y->last;
      if (!inplace) overlaps++;
    }
  }
  free(bytes);
  free(offsets);
  free(slot_bytes);
  return overlaps;
}

/* Every in-place pair: an elementwise op writes the successor reading the source, whose
 * dtype and dims equal it; after that op nothing but FREE_TENSOR names the source. */
static void check_inplace_legal(const stax_program_t* program) {
  const stax_vm_memory_plan_t* plan = program->memory_plan;
  if (!plan) return;
  for (int32_t v = 0; v < plan->value_count; v++) {
    const stax_vm_planned_value_t* value = &plan->values[v];
    if (value->inplace_of < 0) continue;
    const stax_vm_planned_value_t* source = &plan->values[value->inplace_of];
    CHECK_EQ_INT(value->slot, source->slot);
    const stax_vm_descriptor_t* a = &program->descriptors[value->descriptor];
    const stax_vm_descriptor_t* b = &program->descriptors[source->descriptor];
    CHECK_EQ_INT(a->dtype, b->dtype);
    CHECK_EQ_INT(a->rank, b->rank);
    /* The op: the first compute after the value's ALLOC. */
    int32_t op_at = -1;
    for (int32_t i = value->first; i < program->instructions_count && op_at < 0; i++)
      if (stax_vm_opcode_is_compute(program->instructions[i].opcode)) op_at = i;
    CHECK(op_at >= 0);
    if (op_at < 0) continue;
    const stax_vm_instruction_t* ins = &program->instructions[op_at];
    const int32_t* words = program->operands + ins->operand_first;
    stax_op_t op = (stax_op_t)program->nodes[words[0]].op;
    CHECK(stax_op_flags(op) & STAX_OPF_ELEMENTWISE);
    CHECK(op != STAX_OP_Softmax && op != STAX_OP_MatMul);
    bool reads_source = false;
    for (int32_t k = 0; k < words[1]; k++) reads_source |= words[2 + k] == source->reg;
    CHECK(reads_source);
    CHECK_EQ_INT(words[3 + words[1]], value->reg);
    for (int32_t i = op_at + 1; i < program->instructions_count; i++) {
      const stax_vm_instruction_t* later = &program->instructions[i];
      const int32_t* lw = program->operands + later->operand_first;
      if (later->opcode == STAX_VM_OP_FREE_TENSOR) continue;
      /* Any other instruction naming the source (as a plain register operand) is a read
       * after its memory was overwritten. */
      if (later->opcode == STAX_VM_OP_MOVE || later->opcode == STAX_VM_OP_RESHAPE_VIEW ||
          later->opcode == STAX_VM_OP_TRANSPOSE_VIEW || later->opcode == STAX_VM_OP_BROADCAST_TO)
        CHECK(lw[1] != source->reg);
      if (stax_vm_opcode_is_compute(later->opcode))
        for (int32_t k = 0; k < lw[1]; k++) CHECK(lw[2 + k] != source->reg);
    }
  }
}

static void check_plan(const stax_program_t* program) {
  int32_t count = program->symbols_count > 0 ? program->symbols_count : 1;
  int64_t* symbols = calloc((size_t)count, sizeof(int64_t));
  const int64_t samples[] = {0, 1, 3, 17, 100000};
  for (size_t k = 0; k < sizeof(samples) / sizeof(samples[0]); k++) {
    for (int32_t s = 0; s < program->symbols_count; s++) symbols[s] = samples[k] + s;
    CHECK_EQ_INT(plan_overlaps(program, symbols), 0);
  }
  /* An unbound symbol: values sized by it are not placed, the rest still checked. */
  for (int32_t s = 0; s < program->symbols_count; s++) symbols[s] = STAX_SYMBOL_UNBOUND;
  CHECK_EQ_INT(plan_overlaps(program, symbols), 0);
  free(symbols);
  check_inplace_legal(program);
}

/* The planned value of node `name`'s first output, -1 when it is not planned. */
static int32_t planned_value(const stax_program_t* program, const char* name) {
  const stax_vm_memory_plan_t* plan = program->memory_plan;
  size_t length = strlen(name);
  for (int32_t r = 0; r < program->registers_count; r++) {
    const char* text = stax_vm_program_string(program, program->registers[r].name);
    if (strncmp(text, name, length) == 0 && strcmp(text + length, ":0") == 0) /* "node:0" */
      return plan ? plan->value_of_register[r] : -1;
  }
  CHECK(!"no such register");
  return -1;
}

/* ---- running with and without the plan -------------------------------------------------- */

static stax_context_t* plan_context(stax_program_t* program, bool planned) {
  stax_context_options_t options = {.disable_memory_plan = !planned};
  stax_context_t* context = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &context));
  return context;
}

static bool tensors_equal(const stax_tensor_t* a, const stax_tensor_t* b) {
  if (stax_tensor_dtype(a) != stax_tensor_dtype(b) || stax_tensor_rank(a) != stax_tensor_rank(b))
    return false;
  for (int32_t d = 0; d < stax_tensor_rank(a); d++)
    if (stax_tensor_dims(a)[d] != stax_tensor_dims(b)[d]) return false;
  int64_t count = stax_tensor_element_count(a);
  if (stax_tensor_dtype(a) == STAX_DTYPE_FLOAT32) {
    for (int64_t i = 0; i < count; i++)
      if (vm_f32_at(a, i) != vm_f32_at(b, i)) return false;
    return true;
  }
  size_t size = stax_dtype_size(stax_tensor_dtype(a));
  return memcmp(stax_tensor_data(a), stax_tensor_data(b), (size_t)count * size) == 0;
}

/* Runs both contexts on the inputs and checks the outputs are bit-identical (the plan
 * changes where values live, never what is computed). */
static void run_both(stax_context_t* on, stax_context_t* off, int32_t input_count,
                     stax_tensor_t* const* inputs, int32_t output_count) {
  stax_tensor_t* a[4] = {0};
  stax_tensor_t* b[4] = {0};
  CHECK_OK(stax_context_run(on, input_count, inputs, output_count, a));
  CHECK_OK(stax_context_run(off, input_count, inputs, output_count, b));
  for (int32_t o = 0; o < output_count; o++) {
    if (a[o] && b[o]) CHECK(tensors_equal(a[o], b[o]));
    if (a[o]) stax_tensor_release(a[o]);
    if (b[o]) stax_tensor_release(b[o]);
  }
}

static stax_memory_stats_t memory_stats(const stax_context_t* context) {
  stax_memory_stats_t stats;
  CHECK_OK(stax_context_memory_stats(context, &stats));
  return stats;
}

/* x[B, 16] -> MatMul -> Add -> Relu -> MatMul -> Add -> Tanh: every temporary is sized by B. */
static stax_program_t* build_mlp(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 0, 1 << 20), vm_const(g, 16)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  vm_rng_t rng = {12345};
  float w1[16 * 32], b1[32], w2[32 * 8], b2[8];
  for (int i = 0; i < 16 * 32; i++) w1[i] = vm_rng_float(&rng);
  for (int i = 0; i < 32; i++) b1[i] = vm_rng_float(&rng);
  for (int i = 0; i < 32 * 8; i++) w2[i] = vm_rng_float(&rng);
  for (int i = 0; i < 8; i++) b2[i] = vm_rng_float(&rng);
  int64_t w1_dims[2] = {16, 32}, b1_dims[1] = {32}, w2_dims[2] = {32, 8}, b2_dims[1] = {8};
  stax_value_id_t h = vm_binary(g, STAX_OP_MatMul, "mm1", x,
                                vm_initializer(g, "w1", STAX_DTYPE_FLOAT32, 2, w1_dims, w1));
  h = vm_binary(g, STAX_OP_Add, "bias1", h, vm_initializer(g, "b1", STAX_DTYPE_FLOAT32, 1, b1_dims, b1));
  h = vm_unary(g, STAX_OP_Relu, "relu", h);
  h = vm_binary(g, STAX_OP_MatMul, "mm2", h,
                vm_initializer(g, "w2", STAX_DTYPE_FLOAT32, 2, w2_dims, w2));
  h = vm_binary(g, STAX_OP_Add, "bias2", h, vm_initializer(g, "b2", STAX_DTYPE_FLOAT32, 1, b2_dims, b2));
  /* Add(h, h): both operands are the dying input, written in place over itself. */
  stax_value_id_t twice = vm_binary(g, STAX_OP_Add, "twice", h, h);
  vm_output(g, vm_unary(g, STAX_OP_Tanh, "tanh", twice));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  return program;
}

static void test_mlp(void) {
  stax_program_t* program = build_mlp();
  if (!program) return;
  CHECK(program->memory_plan != NULL);
  if (!program->memory_plan) return;
  CHECK(program->memory_plan->value_count >= 4);
  CHECK(program->memory_plan->inplace_count >= 2);
  check_plan(program);
  stax_context_t* on = plan_context(program, true);
  stax_context_t* off = plan_context(program, false);
  vm_rng_t rng = {777};
  for (int trial = 0; trial < 12; trial++) {
    int64_t dims[2] = {trial == 0 ? 0 : vm_rng_range(&rng, 1, trial < 10 ? 9 : 3000), 16};
    stax_tensor_t* x = vm_random_f32(&rng, 2, dims);
    run_both(on, off, 1, &x, 1);
    stax_tensor_release(x);
  }
  /* Steady state: the same shape again allocates nothing for temporaries. */
  int64_t dims[2] = {37, 16};
  stax_tensor_t* x = vm_random_f32(&rng, 2, dims);
  for (int k = 0; k < 3; k++) run_both(on, off, 1, &x, 1);
  stax_memory_stats_t s = memory_stats(on);
  CHECK(s.planned);
  CHECK_EQ_INT(s.temp_allocations, 0);
  CHECK_EQ_INT(s.arena_grows, 0);
  CHECK_EQ_INT(s.fallbacks, 0);
  CHECK_EQ_INT(s.output_allocations, 1);
  CHECK(s.inplace >= 2);
  CHECK(s.arena_bytes > 0 && s.arena_bytes < s.temp_bytes);
  CHECK(s.arena_peak_bytes >= s.arena_bytes);
  CHECK(s.arena_capacity_bytes >= s.arena_peak_bytes);
  stax_memory_stats_t t = memory_stats(off);
  CHECK(!t.planned);
  CHECK_EQ_INT(t.arena_bytes, 0);
  CHECK_EQ_INT(t.temp_allocations, (uint64_t)program->memory_plan->value_count);
  CHECK_EQ_INT(t.temp_bytes, s.temp_bytes);
  stax_tensor_release(x);
  /* The environment switch: a context created with STAX_MEMORY_PLAN=0 does not plan. */
  setenv("STAX_MEMORY_PLAN", "0", 1);
  stax_context_t* env_off = plan_context(program, true);
  unsetenv("STAX_MEMORY_PLAN");
  CHECK(!memory_stats(env_off).planned);
  stax_context_destroy(env_off);
  stax_context_destroy(on);
  stax_context_destroy(off);
  stax_program_release(program);
}

/* Views of a planned value keep it alive: y = 2x is read through a reshape, a transpose and a
 * slice long after its own register is freed; the values placed meanwhile must not reuse it. */
static void test_view_chain(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[3] = {vm_symbol(g, "B", 1, 64), vm_symbol(g, "S", 1, 64), vm_const(g, 8)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims);
  float two = 2;
  stax_value_id_t y = vm_binary(g, STAX_OP_Mul, "double", x,
                                vm_initializer(g, "two", STAX_DTYPE_FLOAT32, 0, NULL, &two));
  int64_t shape[2] = {0, -1}, shape_dims[1] = {2};
  stax_value_id_t flat = vm_binary(g, STAX_OP_Reshape, "flat", y,
                                   vm_initializer(g, "shape", STAX_DTYPE_INT64, 1, shape_dims, shape));
  int64_t perm[3] = {0, 2, 1};
  stax_attr_t perm_attr = stax_attr_ints("perm", 3, perm);
  stax_value_id_t transposed = vm_node(g, STAX_OP_Transpose, "transpose", 1, &y, 1, &perm_attr);
  /* Temporaries made while y is only reachable through its views. */
  stax_value_id_t e = vm_unary(g, STAX_OP_Exp, "exp", x);
  stax_value_id_t f = vm_unary(g, STAX_OP_Neg, "neg", e);
  int64_t starts[1] = {1}, ends[1] = {5}, axes[1] = {2}, one_dims[1] = {1};
  stax_value_id_t slice_inputs[4] = {
      y, vm_initializer(g, "starts", STAX_DTYPE_INT64, 1, one_dims, starts),
      vm_initializer(g, "ends", STAX_DTYPE_INT64, 1, one_dims, ends),
      vm_initializer(g, "axes", STAX_DTYPE_INT64, 1, one_dims, axes)};
  stax_value_id_t sliced = vm_node(g, STAX_OP_Slice, "slice", 4, slice_inputs, 0, NULL);
  stax_value_id_t t2 = vm_unary(g, STAX_OP_Abs, "abs", transposed);
  vm_output(g, vm_binary(g, STAX_OP_Sub, "flat_minus", flat, vm_unary(g, STAX_OP_Sigmoid, "sig", flat)));
  vm_output(g, vm_binary(g, STAX_OP_Add, "t_plus", t2, transposed));
  vm_output(g, vm_binary(g, STAX_OP_Mul, "slice_times", sliced, sliced));
  vm_output(g, f);
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  CHECK(program->memory_plan != NULL);
  check_plan(program);
  /* y is planned and lives as long as its views: through the last read of t2's operand. */
  int32_t y_value = planned_value(program, "double");
  CHECK(y_value >= 0);
  CHECK(planned_value(program, "exp") >= 0);
  if (y_value >= 0 && planned_value(program, "exp") >= 0) {
    const stax_vm_planned_value_t* yv = &program->memory_plan->values[y_value];
    const stax_vm_planned_value_t* ev = &program->memory_plan->values[planned_value(program, "exp")];
    CHECK(yv->first <= ev->last && ev->first <= yv->last); /* live together */
    CHECK(yv->slot != ev->slot);
    /* The checker itself: the same plan with exp moved into y's slot must be caught. */
    int64_t symbols[2] = {3, 5};
    stax_vm_planned_value_t* moved = &program->memory_plan->values[planned_value(program, "exp")];
    int32_t slot = moved->slot;
    moved->slot = yv->slot;
    CHECK(plan_overlaps(program, symbols) > 0);
    moved->slot = slot;
    CHECK_EQ_INT(plan_overlaps(program, symbols), 0);
  }
  stax_context_t* on = plan_context(program, true);
  stax_context_t* off = plan_context(program, false);
  vm_rng_t rng = {4242};
  for (int trial = 0; trial < 10; trial++) {
    int64_t in_dims[3] = {vm_rng_range(&rng, 1, 5), vm_rng_range(&rng, 1, 40), 8};
    stax_tensor_t* input = vm_random_f32(&rng, 3, in_dims);
    run_both(on, off, 1, &input, 4);
    stax_tensor_release(input);
  }
  CHECK_EQ_INT(memory_stats(on).fallbacks, 0);
  stax_context_destroy(on);
  stax_context_destroy(off);
  stax_program_release(program);
}

/* NonZero's output size depends on the data: what follows it is sized by a symbol bound at
 * run time and comes from the pool, while the values before it are planned. */
static void test_data_dependent_fallback(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[1] = {vm_symbol(g, "N", 1, 4096)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 1, dims);
  float zero = 0;
  stax_value_id_t scaled = vm_unary(g, STAX_OP_Sigmoid, "sig", x);
  stax_value_id_t shifted = vm_binary(g, STAX_OP_Sub, "shift", x,
                                      vm_initializer(g, "zero", STAX_DTYPE_FLOAT32, 0, NULL, &zero));
  stax_value_id_t mask = vm_binary(g, STAX_OP_Greater, "positive", shifted,
                                   vm_initializer(g, "zero2", STAX_DTYPE_FLOAT32, 0, NULL, &zero));
  stax_value_id_t where = vm_unary(g, STAX_OP_NonZero, "nonzero", mask);
  int64_t axes[1] = {0}, axes_dims[1] = {1};
  stax_value_id_t squeeze_inputs[2] = {
      where, vm_initializer(g, "axes", STAX_DTYPE_INT64, 1, axes_dims, axes)};
  stax_value_id_t indices = vm_node(g, STAX_OP_Squeeze, "squeeze", 2, squeeze_inputs, 0, NULL);
  stax_value_id_t picked = vm_binary(g, STAX_OP_Gather, "gather", scaled, indices);
  stax_value_id_t doubled = vm_binary(g, STAX_OP_Add, "double", picked, picked);
  vm_output(g, vm_unary(g, STAX_OP_Exp, "exp", doubled));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  CHECK(program->memory_plan != NULL);
  check_plan(program);
  CHECK(planned_value(program, "sig") >= 0);
  CHECK(planned_value(program, "double") < 0); /* sized by the symbol NonZero binds */
  CHECK(planned_value(program, "nonzero") < 0);
  stax_context_t* on = plan_context(program, true);
  stax_context_t* off = plan_context(program, false);
  vm_rng_t rng = {99};
  for (int trial = 0; trial < 10; trial++) {
    int64_t in_dims[1] = {vm_rng_range(&rng, 1, 300)};
    stax_tensor_t* input = vm_random_f32(&rng, 1, in_dims);
    run_both(on, off, 1, &input, 1);
    stax_tensor_release(input);
  }
  stax_memory_stats_t s = memory_stats(on);
  CHECK(s.planned);
  CHECK(s.temp_allocations > 0); /* after NonZero: the pool */
  CHECK(s.temp_allocations < memory_stats(off).temp_allocations);
  CHECK_EQ_INT(s.fallbacks, 0);
  stax_context_destroy(on);
  stax_context_destroy(off);
  stax_program_release(program);
}

/* A value read inside a Loop body stays placed for the whole loop; values the body makes
 * are allocated every iteration and come from the pool. */
static void test_loop(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 64), vm_const(g, 4)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t m = vm_input(g, "m", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t always = vm_input(g, "cond", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t base = vm_unary(g, STAX_OP_Tanh, "base", x);
  stax_value_id_t start = vm_unary(g, STAX_OP_Neg, "start", x);
  stax_graph_t* body = NULL;
  CHECK_OK(stax_graph_create_subgraph(g, &body));
  vm_input(body, "iteration", STAX_DTYPE_INT64, 0, NULL);
  stax_value_id_t cond_in = vm_input(body, "cond_in", STAX_DTYPE_BOOL, 0, NULL);
  stax_value_id_t acc = vm_input(body, "acc", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t captured = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_capture(body, base, &captured));
  stax_value_id_t next = vm_binary(body, STAX_OP_Add, "accumulate", acc, captured);
  vm_output(body, vm_unary(body, STAX_OP_Identity, "keep_going", cond_in));
  vm_output(body, vm_unary(body, STAX_OP_Sin, "wave", next));
  stax_value_id_t loop_inputs[3] = {m, always, start};
  stax_value_id_t loop_output = STAX_VALUE_NONE;
  stax_attr_t body_attr = stax_attr_graph("body", body);
  stax_node_desc_t desc = {.op = STAX_OP_Loop, .name = "loop", .input_count = 3,
                           .inputs = loop_inputs, .output_count = 1, .attr_count = 1,
                           .attrs = &body_attr};
  CHECK_OK(stax_graph_add_node(g, &desc, &loop_output));
  vm_output(g, vm_binary(g, STAX_OP_Mul, "scale", loop_output, base));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  check_plan(program);
  CHECK(planned_value(program, "base") >= 0);
  CHECK(planned_value(program, "accumulate") < 0); /* allocated every iteration */
  if (planned_value(program, "base") >= 0) {
    /* Read in the body: live over the whole loop. */
    const stax_vm_planned_value_t* b = &program->memory_plan->values[planned_value(program, "base")];
    for (int32_t i = b->first; i < program->instructions_count; i++)
      if (program->instructions[i].opcode == STAX_VM_OP_LOOP_END) CHECK(b->last > i);
  }
  stax_context_t* on = plan_context(program, true);
  stax_context_t* off = plan_context(program, false);
  vm_rng_t rng = {5};
  for (int trial = 0; trial < 6; trial++) {
    int64_t in_dims[2] = {vm_rng_range(&rng, 1, 20), 4};
    int64_t trips = trial;
    uint8_t yes = 1;
    stax_tensor_t* inputs[3] = {vm_random_f32(&rng, 2, in_dims),
                                vm_tensor(STAX_DTYPE_INT64, 0, NULL, &trips),
                                vm_tensor(STAX_DTYPE_BOOL, 0, NULL, &yes)};
    run_both(on, off, 3, inputs, 1);
    for (int k = 0; k < 3; k++) stax_tensor_release(inputs[k]);
  }
  CHECK_EQ_INT(memory_stats(on).fallbacks, 0);
  stax_context_destroy(on);
  stax_context_destroy(off);
  stax_program_release(program);
}

/* A loaded program derives the same plan (it is rebuilt at link, never read from a file). */
static void test_serialized_plan(void) {
  stax_program_t* program = build_mlp();
  if (!program) return;
  void* data = NULL;
  size_t size = 0;
  CHECK_OK(stax_program_serialize(program, vm_alloc(), &data, &size));
  stax_program_t* loaded = NULL;
  CHECK_OK(stax_program_deserialize(vm_alloc(), data, size, NULL, &loaded));
  stax_allocator_free(vm_alloc(), data, size);
  if (loaded && program->memory_plan && loaded->memory_plan) {
    const stax_vm_memory_plan_t* a = program->memory_plan;
    const stax_vm_memory_plan_t* b = loaded->memory_plan;
    CHECK_EQ_INT(a->value_count, b->value_count);
    CHECK_EQ_INT(a->slot_count, b->slot_count);
    for (int32_t v = 0; v < a->value_count && v < b->value_count; v++) {
      CHECK_EQ_INT(a->values[v].reg, b->values[v].reg);
      CHECK_EQ_INT(a->values[v].slot, b->values[v].slot);
      CHECK_EQ_INT(a->values[v].inplace_of, b->values[v].inplace_of);
    }
    char* text = vm_disassembly(loaded, STAX_DISASSEMBLE_EXTENDED);
    CHECK(text && strstr(text, "memory plan: ") && strstr(text, "[planned: slot"));
    free(text);
  } else {
    CHECK(loaded && loaded->memory_plan);
  }
  stax_program_release(loaded);
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_mlp), STAX_TEST(test_view_chain),
               STAX_TEST(test_data_dependent_fallback), STAX_TEST(test_loop),
               STAX_TEST(test_serialized_plan))
