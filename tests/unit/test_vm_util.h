/* Helpers shared by the VM tests (tests/unit/test_vm_*.c): building graphs through the C API
 * in one line per node, making and reading float tensors, a small deterministic random
 * generator, and compiling + running with a given dispatch mode. */
#ifndef STAX_TEST_VM_UTIL_H_
#define STAX_TEST_VM_UTIL_H_

#include <string.h>

#include "test_harness.h"

static inline stax_allocator_t vm_alloc(void) { return stax_allocator_system(); }

/* A symbol dim with range [min, max]. */
static inline const stax_dim_t* vm_symbol(stax_graph_t* g, const char* name, int64_t min,
                                          int64_t max) {
  const stax_dim_t* dim = NULL;
  CHECK_OK(stax_symbol_get(stax_graph_shape_ctx(g), name, min, max, &dim));
  return dim;
}

static inline const stax_dim_t* vm_const(stax_graph_t* g, int64_t value) {
  return stax_dim_const(stax_graph_shape_ctx(g), value);
}

static inline stax_value_id_t vm_input(stax_graph_t* g, const char* name, stax_dtype_t dtype,
                                       int32_t rank, const stax_dim_t* const* dims) {
  stax_value_id_t value = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_input(g, name, dtype, rank, dims, &value));
  return value;
}

/* Adds a node with one output; attrs may be NULL. */
static inline stax_value_id_t vm_node(stax_graph_t* g, stax_op_t op, const char* name,
                                      int32_t input_count, const stax_value_id_t* inputs,
                                      int32_t attr_count, const stax_attr_t* attrs) {
  stax_value_id_t out = STAX_VALUE_NONE;
  stax_node_desc_t desc = {.op = op, .name = name, .input_count = input_count, .inputs = inputs,
                           .output_count = 1, .attr_count = attr_count, .attrs = attrs};
  CHECK_OK(stax_graph_add_node(g, &desc, &out));
  return out;
}

static inline stax_value_id_t vm_binary(stax_graph_t* g, stax_op_t op, const char* name,
                                        stax_value_id_t a, stax_value_id_t b) {
  stax_value_id_t inputs[2] = {a, b};
  return vm_node(g, op, name, 2, inputs, 0, NULL);
}

static inline stax_value_id_t vm_unary(stax_graph_t* g, stax_op_t op, const char* name,
                                       stax_value_id_t a) {
  return vm_node(g, op, name, 1, &a, 0, NULL);
}

static inline stax_tensor_t* vm_tensor(stax_dtype_t dtype, int32_t rank, const int64_t* dims,
                                       const void* data) {
  stax_tensor_t* tensor = NULL;
  CHECK_OK(stax_tensor_create(vm_alloc(), dtype, rank, dims, &tensor));
  if (tensor && data)
    memcpy(stax_tensor_data(tensor), data,
           (size_t)stax_tensor_element_count(tensor) * stax_dtype_size(dtype));
  return tensor;
}

static inline stax_value_id_t vm_initializer(stax_graph_t* g, const char* name,
                                             stax_dtype_t dtype, int32_t rank,
                                             const int64_t* dims, const void* data) {
  stax_tensor_t* tensor = vm_tensor(dtype, rank, dims, data);
  stax_value_id_t value = STAX_VALUE_NONE;
  CHECK_OK(stax_graph_add_initializer(g, name, tensor, &value));
  stax_tensor_release(tensor);
  return value;
}

static inline void vm_output(stax_graph_t* g, stax_value_id_t value) {
  CHECK_OK(stax_graph_add_output(g, value));
}

/* Deterministic xorshift generator. */
typedef struct vm_rng_t {
  uint64_t state;
} vm_rng_t;

static inline uint64_t vm_rng_next(vm_rng_t* rng) {
  uint64_t x = rng->state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  rng->state = x;
  return x;
}

static inline int64_t vm_rng_range(vm_rng_t* rng, int64_t low, int64_t high) {
  return low + (int64_t)(vm_rng_next(rng) % (uint64_t)(high - low + 1));
}

static inline float vm_rng_float(vm_rng_t* rng) {
  return (float)((double)(vm_rng_next(rng) % 2001) / 1000.0 - 1.0);
}

static inline stax_tensor_t* vm_random_f32(vm_rng_t* rng, int32_t rank, const int64_t* dims) {
  stax_tensor_t* tensor = vm_tensor(STAX_DTYPE_FLOAT32, rank, dims, NULL);
  if (!tensor) return NULL;
  float* data = stax_tensor_data(tensor);
  for (int64_t i = 0; i < stax_tensor_element_count(tensor); i++) data[i] = vm_rng_float(rng);
  return tensor;
}

static inline const float* vm_f32(const stax_tensor_t* tensor) {
  return (const float*)stax_tensor_data(tensor);
}

/* Element i of a tensor in row-major order, honouring strides (float32). */
static inline float vm_f32_at(const stax_tensor_t* tensor, int64_t index) {
  int32_t rank = stax_tensor_rank(tensor);
  const int64_t* dims = stax_tensor_dims(tensor);
  const int64_t* strides = stax_tensor_strides(tensor);
  int64_t offset = 0;
  for (int32_t d = rank - 1; d >= 0; d--) {
    offset += (index % dims[d]) * strides[d];
    index /= dims[d];
  }
  return ((const float*)stax_tensor_data(tensor))[offset];
}

static inline bool vm_dims_equal(const stax_tensor_t* tensor, int32_t rank, const int64_t* dims) {
  if (stax_tensor_rank(tensor) != rank) return false;
  for (int32_t d = 0; d < rank; d++)
    if (stax_tensor_dims(tensor)[d] != dims[d]) return false;
  return true;
}

static inline stax_program_t* vm_compile(stax_graph_t* g) {
  stax_program_t* program = NULL;
  CHECK_OK(stax_program_compile(vm_alloc(), g, NULL, &program));
  return program;
}

static inline stax_context_t* vm_context(stax_program_t* program, stax_dispatch_mode_t mode) {
  stax_context_options_t options = {.dispatch = mode};
  stax_context_t* context = NULL;
  CHECK_OK(stax_context_create(vm_alloc(), program, &options, &context));
  return context;
}

/* Writes the disassembly into a malloc'd string (caller frees). */
static inline char* vm_disassembly(const stax_program_t* program, uint32_t forms) {
  char* text = NULL;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  if (!out) return NULL;
  CHECK_OK(stax_program_disassemble(program, forms, out));
  fclose(out);
  return text;
}

/* Tests run every program under both dispatch loops: mode 0 is the switch, 1 computed goto. */
static inline stax_dispatch_mode_t vm_dispatch_mode(int index) {
  return index == 0 ? STAX_DISPATCH_SWITCH : STAX_DISPATCH_GOTO;
}

#endif /* STAX_TEST_VM_UTIL_H_ */
