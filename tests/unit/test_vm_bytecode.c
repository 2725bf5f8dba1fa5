/* Hand-built bytecode through the internal builder (src/vm/program.h): JUMP_IF_SHAPE_UNMATCHED
 * choosing between two host functions by the live shape (the guard the JIT will put in front
 * of specialized code), CALL_FUNC and the host-function registry, per-instruction counters,
 * and the verifier rejecting hand-corrupted programs. */
#include "test_vm_util.h"
#include "vm/functions.h"
#include "vm/program.h"

/* ---- host functions ------------------------------------------------------------------------ */

/* Returns a float32 scalar holding *(float*)user_data. */
static stax_status_t host_constant(void* user_data, int32_t input_count,
                                   stax_tensor_t* const* inputs, int32_t output_count,
                                   stax_tensor_t** outputs) {
  (void)inputs;
  if (input_count != 1 || output_count != 1)
    return stax_status_make(STAX_INVALID_ARGUMENT, "wants 1 input and 1 output");
  STAX_RETURN_IF_ERROR(stax_tensor_create(vm_alloc(), STAX_DTYPE_FLOAT32, 0, NULL, &outputs[0]));
  *(float*)stax_tensor_data(outputs[0]) = *(const float*)user_data;
  return STAX_OK;
}

static stax_status_t host_fail(void* user_data, int32_t input_count, stax_tensor_t* const* inputs,
                               int32_t output_count, stax_tensor_t** outputs) {
  (void)user_data, (void)input_count, (void)inputs, (void)output_count, (void)outputs;
  return stax_status_make(STAX_OUT_OF_RANGE, "the host says no");
}

/* Runs the same context again from inside a run (a caller bug the API must report). */
static stax_status_t host_reenter(void* user_data, int32_t input_count,
                                  stax_tensor_t* const* inputs, int32_t output_count,
                                  stax_tensor_t** outputs) {
  stax_context_t* context = *(stax_context_t**)user_data;
  stax_tensor_t* result = NULL;
  (void)output_count, (void)outputs;
  return stax_context_run(context, input_count, inputs, 1, &result);
}

static float fast_value = 1.0f, slow_value = 2.0f;

/* ---- a hand-built program -------------------------------------------------------------------- */

enum { JUMP_INSTRUCTION = 3, FAST_CALL = 2, SLOW_CALL = 4 };

/*   0 LOAD_TENSOR r0, input 0
 *   1 JUMP_IF_SHAPE_UNMATCHED signature 0, -> 4
 *   2 CALL_FUNC fast (r0) -> (r1)
 *   3 JUMP -> 5
 *   4 CALL_FUNC slow (r0) -> (r1)
 *   5 STORE_TENSOR r1, output 0
 *   6 RETURN
 * The signature is float32[2, 3] (with strides [3, 1] when check_strides). */
static stax_program_t* build_dispatch_program(bool check_strides, const char* fast_name) {
  stax_program_t* p = NULL;
  CHECK_OK(stax_vm_program_create(vm_alloc(), &p));
  if (!p) return NULL;
  int64_t x_dims[2] = {2, 3};
  int32_t x_desc = -1, out_desc = -1, x = -1, out = -1, signature = -1, fast = -1, slow = -1;
  CHECK_OK(stax_vm_program_add_static_descriptor(p, STAX_DTYPE_FLOAT32, 2, x_dims,
                                                 STAX_VM_LAYOUT_ANY, &x_desc));
  CHECK_OK(stax_vm_program_add_static_descriptor(p, STAX_DTYPE_FLOAT32, 0, NULL,
                                                 STAX_VM_LAYOUT_CONTIGUOUS, &out_desc));
  CHECK_OK(stax_vm_program_add_register(p, "x", x_desc, STAX_VM_REGISTER_INPUT, &x));
  CHECK_OK(stax_vm_program_add_register(p, "result", out_desc, STAX_VM_REGISTER_OUTPUT, &out));
  const char* texts[2] = {"R", "C"};
  CHECK_OK(stax_vm_program_add_io(p, false, "x", STAX_DTYPE_FLOAT32, 2, texts, x, NULL));
  CHECK_OK(stax_vm_program_add_io(p, true, "result", STAX_DTYPE_FLOAT32, 0, NULL, out, NULL));
  stax_vm_signature_entry_t entry = {.reg = x, .dtype = STAX_DTYPE_FLOAT32, .rank = 2,
                                     .flags = check_strides ? STAX_VM_SIGNATURE_CHECK_STRIDES : 0};
  int64_t values[4] = {2, 3, 3, 1};
  const int64_t* value_lists[1] = {values};
  CHECK_OK(stax_vm_program_add_signature(p, 1, &entry, value_lists, &signature));
  CHECK_OK(stax_vm_program_add_function(p, fast_name, &fast));
  CHECK_OK(stax_vm_program_add_function(p, "test.slow", &slow));
  int32_t load[2] = {x, 0}, guard[2] = {signature, SLOW_CALL}, call_fast[5] = {fast, 1, x, 1, out};
  int32_t jump[1] = {5}, call_slow[5] = {slow, 1, x, 1, out}, store[2] = {out, 0};
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_LOAD_TENSOR, -1, load, 2, NULL));
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_JUMP_IF_SHAPE_UNMATCHED, -1, guard, 2, NULL));
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_CALL_FUNC, -1, call_fast, 5, NULL));
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_JUMP, -1, jump, 1, NULL));
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_CALL_FUNC, -1, call_slow, 5, NULL));
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_STORE_TENSOR, -1, store, 2, NULL));
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_RETURN, -1, NULL, 0, NULL));
  stax_vm_finalize_options_t options = {.insert_profile_points = false};
  stax_status_t status = stax_vm_program_finalize(p, &options);
  if (status) {
    CHECK_OK(status);
    stax_program_release(p);
    return NULL;
  }
  return p;
}

static float run_value(stax_context_t* context, stax_tensor_t* input) {
  stax_tensor_t* output = NULL;
  stax_status_t status = stax_context_run(context, 1, &input, 1, &output);
  CHECK_OK(status);
  float value = output ? *(const float*)stax_tensor_data(output) : -1.0f;
  if (output) stax_tensor_release(output);
  return value;
}

static void test_jump_if_shape_unmatched(void) {
  CHECK_OK(stax_vm_register_function("test.fast", host_constant, &fast_value));
  CHECK_OK(stax_vm_register_function("test.slow", host_constant, &slow_value));
  int64_t matching[2] = {2, 3}, other[2] = {3, 3}, swapped[2] = {3, 2};
  stax_tensor_t* match = vm_tensor(STAX_DTYPE_FLOAT32, 2, matching, NULL);
  stax_tensor_t* mismatch = vm_tensor(STAX_DTYPE_FLOAT32, 2, other, NULL);
  stax_tensor_t* base = vm_tensor(STAX_DTYPE_FLOAT32, 2, swapped, NULL);
  stax_tensor_t* transposed = NULL; /* [2, 3] with strides [1, 2] */
  CHECK_OK(stax_tensor_transpose(vm_alloc(), base, NULL, &transposed));
  for (int strides = 0; strides < 2; strides++) {
    stax_program_t* program = build_dispatch_program(strides == 1, "test.fast");
    if (!program) continue;
    for (int mode = 0; mode < 2; mode++) {
      stax_context_t* context = vm_context(program, vm_dispatch_mode(mode));
      if (!context) continue;
      CHECK_NEAR(run_value(context, match), fast_value, 0);
      CHECK_NEAR(run_value(context, mismatch), slow_value, 0);
      CHECK_NEAR(run_value(context, transposed), strides ? slow_value : fast_value, 0);
      CHECK_NEAR(run_value(context, match), fast_value, 0);
      const uint64_t* counts = stax_context_instruction_counts(context);
      CHECK_EQ_INT(stax_context_instruction_count(context), 7);
      CHECK_EQ_INT(counts[0], 4);
      CHECK_EQ_INT(counts[1], 4);
      CHECK_EQ_INT(counts[FAST_CALL], strides ? 2 : 3);
      CHECK_EQ_INT(counts[JUMP_INSTRUCTION], strides ? 2 : 3);
      CHECK_EQ_INT(counts[SLOW_CALL], strides ? 2 : 1);
      CHECK_EQ_INT(counts[6], 4);
      stax_context_destroy(context);
    }
    stax_program_release(program);
  }
  stax_tensor_release(transposed);
  stax_tensor_release(base);
  stax_tensor_release(match);
  stax_tensor_release(mismatch);
  stax_vm_unregister_function("test.fast");
  stax_vm_unregister_function("test.slow");
}

static void test_profile_timing(void) {
  CHECK_OK(stax_vm_register_function("test.fast", host_constant, &fast_value));
  CHECK_OK(stax_vm_register_function("test.slow", host_constant, &slow_value));
  stax_program_t* program = build_dispatch_program(false, "test.fast");
  if (!program) return;
  stax_context_options_t options = {.profile_timing = true};
  stax_context_t* context = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &context));
  int64_t dims[2] = {2, 3};
  stax_tensor_t* input = vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  if (context) {
    CHECK_NEAR(run_value(context, input), fast_value, 0);
    /* Instructions that never ran have no time; counts are kept as without timing. */
    CHECK_EQ_INT(stax_context_instruction_nanos(context)[SLOW_CALL], 0);
    CHECK_EQ_INT(stax_context_instruction_counts(context)[FAST_CALL], 1);
    stax_context_destroy(context);
  }
  stax_tensor_release(input);
  stax_program_release(program);
  stax_vm_unregister_function("test.fast");
  stax_vm_unregister_function("test.slow");
}

static void test_host_function_errors(void) {
  CHECK_OK(stax_vm_register_function("test.slow", host_constant, &slow_value));
  stax_program_t* program = build_dispatch_program(false, "test.fail");
  if (!program) return;
  stax_context_t* context = NULL;
  CHECK_ERROR(stax_context_create(vm_alloc(), program, NULL, &context), STAX_FAILED_PRECONDITION,
              "host function 'test.fail', which is not registered");
  CHECK(context == NULL);
  CHECK_OK(stax_vm_register_function("test.fail", host_fail, NULL));
  context = vm_context(program, STAX_DISPATCH_SWITCH);
  int64_t dims[2] = {2, 3};
  stax_tensor_t* input = vm_tensor(STAX_DTYPE_FLOAT32, 2, dims, NULL);
  stax_tensor_t* output = NULL;
  CHECK_ERROR(stax_context_run(context, 1, &input, 1, &output), STAX_OUT_OF_RANGE,
              "instruction 2 (CALL_FUNC): host function 'test.fail': the host says no");
  CHECK(output == NULL);
  stax_context_destroy(context);
  /* Re-entering a running context is refused. */
  stax_context_t* reentered = NULL;
  CHECK_OK(stax_vm_register_function("test.fail", host_reenter, &reentered));
  reentered = vm_context(program, STAX_DISPATCH_GOTO);
  CHECK_ERROR(stax_context_run(reentered, 1, &input, 1, &output), STAX_FAILED_PRECONDITION,
              "already running");
  stax_context_destroy(reentered);
  CHECK_ERROR(stax_vm_register_function("", host_fail, NULL), STAX_INVALID_ARGUMENT, NULL);
  stax_vm_unregister_function("test.fail");
  stax_vm_unregister_function("test.slow");
  stax_tensor_release(input);
  stax_program_release(program);
}

/* ---- verifier -------------------------------------------------------------------------------- */

static int32_t* operand_of(stax_program_t* p, int32_t instruction, int32_t k) {
  return &p->operands[p->instructions[instruction].operand_first + k];
}

static void test_verifier_rejects_corruption(void) {
  stax_program_t* p = build_dispatch_program(false, "test.fast");
  if (!p) return;
  CHECK_OK(stax_vm_verify(p));
  /* Compact form: a bad opcode word. */
  int32_t saved = p->code[0];
  p->code[0] = (saved & ~STAX_VM_OPCODE_MASK) | 0x7ff0;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "invalid opcode");
  p->code[0] = saved;
  /* Extended form: a register out of range. */
  int32_t* reg = operand_of(p, 0, 0);
  saved = *reg;
  *reg = 99;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "register 99 is out of range (2 registers)");
  *reg = saved;
  /* A jump past the end. */
  int32_t* target = operand_of(p, JUMP_INSTRUCTION, 0);
  saved = *target;
  *target = 1000;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "jump target 1000 is out of range");
  *target = -1;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "jump target -1 is out of range");
  *target = saved;
  /* A compact jump into the middle of an instruction. */
  int32_t jump_word = 0;
  for (int32_t i = 0; i < JUMP_INSTRUCTION; i++)
    jump_word += STAX_VM_HEADER_WORDS + p->instructions[i].operand_count;
  jump_word += STAX_VM_HEADER_WORDS;
  p->code[jump_word] += 1;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "off an instruction boundary");
  p->code[jump_word] -= 1;
  /* A compact header whose length disagrees. */
  saved = p->code[0];
  p->code[0] = saved + (1 << STAX_VM_LENGTH_SHIFT);
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "disagrees with the extended form");
  p->code[0] = saved;
  /* An extended opcode out of range. */
  saved = p->instructions[1].opcode;
  p->instructions[1].opcode = STAX_VM_OPCODE_COUNT + 3;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "invalid opcode");
  p->instructions[1].opcode = saved;
  /* A register list count running past the instruction. */
  int32_t* count = operand_of(p, FAST_CALL, 1);
  saved = *count;
  *count = 40;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "do not match format");
  *count = saved;
  /* A signature naming a register that does not exist. */
  saved = p->signature_entries[0].reg;
  p->signature_entries[0].reg = 7;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "signature entry 0 names register 7");
  p->signature_entries[0].reg = saved;
  /* A descriptor with a bad dtype. */
  saved = p->descriptors[0].dtype;
  p->descriptors[0].dtype = 99;
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, "invalid dtype");
  p->descriptors[0].dtype = saved;
  /* A program that can fall off its end. */
  saved = p->instructions[6].opcode;
  p->instructions[6].opcode = STAX_VM_OP_JUMP_IF_SHAPE_UNMATCHED; /* needs operands: rejected */
  CHECK_ERROR(stax_vm_verify(p), STAX_INVALID_ARGUMENT, NULL);
  p->instructions[6].opcode = saved;
  CHECK_OK(stax_vm_verify(p)); /* every corruption was undone */
  stax_program_release(p);
}

/* Compute instructions are checked against the op's arity and dtype rule and the node. */
static stax_status_t build_compute(int32_t input_count, stax_dtype_t output_dtype, bool static_opcode,
                                   bool dynamic_input, int32_t output_rank) {
  stax_program_t* p = NULL;
  STAX_RETURN_IF_ERROR(stax_vm_program_create(vm_alloc(), &p));
  int64_t dims[1] = {4};
  int32_t in_desc = -1, out_desc = -1, a = -1, b = -1, out = -1, name = -1, node = -1;
  stax_status_t status = STAX_OK;
  STAX_GOTO_IF_ERROR(status, stax_vm_program_add_static_descriptor(p, STAX_DTYPE_FLOAT32, 1, dims,
                                                                   STAX_VM_LAYOUT_ANY, &in_desc), done);
  if (dynamic_input) {
    stax_dim_code_t word = {STAX_DIM_CODE_CONST, 4};
    stax_vm_dim_code_ref_t ref = {.first = 0, .count = 1, .text = -1};
    STAX_GOTO_IF_ERROR(status, STAX_VM_APPEND(p, dim_code_words, &word, NULL), done);
    STAX_GOTO_IF_ERROR(status, STAX_VM_APPEND(p, dim_codes, &ref, NULL), done);
    stax_vm_dim_t dim = {.kind = STAX_VM_DIM_CODE, .code = 0};
    STAX_GOTO_IF_ERROR(status, stax_vm_program_add_descriptor(p, STAX_DTYPE_FLOAT32, 1,
                                                              STAX_VM_LAYOUT_ANY, &dim, &in_desc), done);
  }
  int64_t out_dims[2] = {4, 1};
  STAX_GOTO_IF_ERROR(status, stax_vm_program_add_static_descriptor(p, output_dtype, output_rank, out_dims,
                                                                   STAX_VM_LAYOUT_CONTIGUOUS, &out_desc), done);
  STAX_GOTO_IF_ERROR(status, stax_vm_program_add_register(p, "a", in_desc, 0, &a), done);
  STAX_GOTO_IF_ERROR(status, stax_vm_program_add_register(p, "b", in_desc, 0, &b), done);
  STAX_GOTO_IF_ERROR(status, stax_vm_program_add_register(p, "out", out_desc, 0, &out), done);
  STAX_GOTO_IF_ERROR(status, stax_vm_program_add_string(p, "add", &name), done);
  int32_t registers[3] = {a, b, out};
  stax_vm_node_t copy = {.op = STAX_OP_Add, .name = name, .inputs_first = 0,
                         .input_count = input_count, .outputs_first = 2, .output_count = 1,
                         .attrs_first = 0};
  if (input_count == 1) registers[1] = out, copy.outputs_first = 1;
  STAX_GOTO_IF_ERROR(status, STAX_VM_APPEND_N(p, node_registers, registers, 3, NULL), done);
  STAX_GOTO_IF_ERROR(status, STAX_VM_APPEND(p, nodes, &copy, &node), done);
  int32_t operands[6] = {node, input_count, a, b, 1, out};
  if (input_count == 1) operands[3] = 1, operands[4] = out;
  STAX_GOTO_IF_ERROR(status,
                     stax_vm_program_add_instruction(p, stax_vm_compute_opcode(STAX_OP_Add, static_opcode),
                                                     node, operands, 3 + input_count + 1, NULL),
                     done);
  STAX_GOTO_IF_ERROR(status, stax_vm_program_add_instruction(p, STAX_VM_OP_RETURN, -1, NULL, 0, NULL),
                     done);
  status = stax_vm_program_finalize(p, NULL);
done:
  stax_program_release(p);
  return status;
}

static void test_verifier_compute_rules(void) {
  CHECK_OK(build_compute(2, STAX_DTYPE_FLOAT32, true, false, 1));
  CHECK_OK(build_compute(2, STAX_DTYPE_FLOAT32, false, true, 1));
  CHECK_ERROR(build_compute(1, STAX_DTYPE_FLOAT32, false, false, 1), STAX_INVALID_ARGUMENT,
              "node 'add' (Add) has 1 inputs and 1 outputs; the op takes 2..2 inputs");
  CHECK_ERROR(build_compute(2, STAX_DTYPE_BOOL, false, false, 1), STAX_INVALID_ARGUMENT,
              "node 'add' (Add) produces float32, but output register 2 is bool");
  CHECK_ERROR(build_compute(2, STAX_DTYPE_FLOAT32, false, false, 2), STAX_INVALID_ARGUMENT,
              "node 'add' (Add) produces rank 1, but output register 2 has rank 2");
  CHECK_ERROR(build_compute(2, STAX_DTYPE_FLOAT32, true, true, 1), STAX_INVALID_ARGUMENT,
              "static variant of node 'add' has input 0 (register 0) with a dynamic shape");
}

/* A context cannot run a program that was never finalized (and so never verified). */
static void test_unfinalized_program(void) {
  stax_program_t* p = NULL;
  CHECK_OK(stax_vm_program_create(vm_alloc(), &p));
  if (!p) return;
  CHECK_OK(stax_vm_program_add_instruction(p, STAX_VM_OP_RETURN, -1, NULL, 0, NULL));
  stax_context_t* context = NULL;
  CHECK_ERROR(stax_context_create(vm_alloc(), p, NULL, &context), STAX_FAILED_PRECONDITION,
              "not finalized");
  stax_program_release(p);
}

/* The JIT's segment-call name is reserved: embedders cannot register it, and a program
 * that calls it without a JIT guard matching first (a hand-built or corrupted one) gets an
 * error, in JIT-off and JIT-on contexts alike. */
static void test_reserved_jit_function(void) {
  CHECK_ERROR(stax_vm_register_function(STAX_VM_JIT_FUNCTION, host_constant, &fast_value),
              STAX_INVALID_ARGUMENT, "reserved");
  CHECK_OK(stax_vm_register_function("test.slow", host_constant, &slow_value));
  stax_program_t* program = build_dispatch_program(false, STAX_VM_JIT_FUNCTION);
  if (!program) return;
  int64_t matching[2] = {2, 3};
  stax_tensor_t* match = vm_tensor(STAX_DTYPE_FLOAT32, 2, matching, NULL);
  for (int jit = 0; jit < 2; jit++) {
    stax_context_options_t options = {.jit = jit ? STAX_JIT_SYNC : STAX_JIT_OFF};
    stax_context_t* context = NULL;
    CHECK_OK(stax_context_create(vm_alloc(), program, &options, &context));
    if (!context) continue;
    stax_tensor_t* output = NULL;
    CHECK_ERROR(stax_context_run(context, 1, &match, 1, &output), STAX_FAILED_PRECONDITION,
                "without a JIT guard that matched");
    CHECK(output == NULL);
    stax_context_destroy(context);
  }
  stax_tensor_release(match);
  stax_program_release(program);
  stax_vm_unregister_function("test.slow");
}

STAX_TEST_MAIN(STAX_TEST(test_jump_if_shape_unmatched), STAX_TEST(test_profile_timing),
               STAX_TEST(test_host_function_errors), STAX_TEST(test_verifier_rejects_corruption),
               STAX_TEST(test_verifier_compute_rules), STAX_TEST(test_unfinalized_program),
               STAX_TEST(test_reserved_jit_function))
