/* The smallest stax program in C, built against an installed stax (examples/c/README.md):
 * y = softmax(x . w) for x[B, 4] with B known only at run time, compiled once and run at two
 * batch sizes with the JIT on. Prints each row's sum (1 up to rounding) and exits non-zero on
 * any error, with stax's message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stax/stax.h>

static int fail(stax_status_t status) {
  fprintf(stderr, "hello: %s\n", stax_status_message(status));
  stax_status_free(status);
  return 1;
}

static stax_status_t build(stax_graph_t* g) {
  const stax_dim_t* batch = NULL;
  STAX_RETURN_IF_ERROR(stax_symbol_get(stax_graph_shape_ctx(g), "B", 1, STAX_DIM_MAX, &batch));
  const stax_dim_t* dims[2] = {batch, stax_dim_const(stax_graph_shape_ctx(g), 4)};
  stax_value_id_t x = STAX_VALUE_NONE, w = STAX_VALUE_NONE;
  STAX_RETURN_IF_ERROR(stax_graph_add_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims, &x));
  int64_t w_dims[2] = {4, 3};
  stax_tensor_t* weights = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(stax_allocator_system(), STAX_DTYPE_FLOAT32, 2, w_dims,
                                          &weights));
  float* data = stax_tensor_data(weights);
  for (int i = 0; i < 12; i++) data[i] = 0.25f * (float)(i % 5) - 0.5f;
  stax_status_t status = stax_graph_add_initializer(g, "w", weights, &w);
  stax_tensor_release(weights);
  STAX_RETURN_IF_ERROR(status);
  stax_value_id_t product = STAX_VALUE_NONE, y = STAX_VALUE_NONE;
  stax_value_id_t operands[2] = {x, w};
  stax_node_desc_t matmul = {.op = STAX_OP_MatMul, .input_count = 2, .inputs = operands,
                             .output_count = 1};
  STAX_RETURN_IF_ERROR(stax_graph_add_node(g, &matmul, &product));
  stax_attr_t axis = stax_attr_int("axis", -1);
  stax_node_desc_t softmax = {.op = STAX_OP_Softmax, .input_count = 1, .inputs = &product,
                              .output_count = 1, .attr_count = 1, .attrs = &axis};
  STAX_RETURN_IF_ERROR(stax_graph_add_node(g, &softmax, &y));
  return stax_graph_add_output(g, y);
}

int main(void) {
  stax_graph_t* g = NULL;
  stax_status_t status = stax_graph_create(stax_allocator_system(), &g);
  if (!status) status = build(g);
  stax_program_t* program = NULL;
  if (!status) status = stax_program_compile(stax_allocator_system(), g, NULL, &program);
  stax_graph_destroy(g);
  if (status) return fail(status);
  /* Zeroed context options interpret only; ask for the JIT (compiled inline here). */
  stax_context_options_t options = {.jit = STAX_JIT_SYNC};
  stax_context_t* context = NULL;
  status = stax_context_create(stax_allocator_system(), program, &options, &context);
  for (int64_t batch = 2; !status && batch <= 5; batch += 3) {
    int64_t dims[2] = {batch, 4};
    stax_tensor_t* x = NULL;
    stax_tensor_t* y = NULL;
    status = stax_tensor_create(stax_allocator_system(), STAX_DTYPE_FLOAT32, 2, dims, &x);
    if (!status) {
      float* values = stax_tensor_data(x);
      for (int64_t i = 0; i < batch * 4; i++) values[i] = (float)i / 7.0f;
      status = stax_context_run(context, 1, &x, 1, &y);
    }
    if (!status) {
      const float* rows = stax_tensor_data(y);
      for (int64_t r = 0; r < batch; r++) {
        float sum = rows[r * 3] + rows[r * 3 + 1] + rows[r * 3 + 2];
        printf("B=%lld row %lld: sum %.6f\n", (long long)batch, (long long)r, sum);
        if (fabsf(sum - 1.0f) > 1e-5f)
          status = stax_status_make(STAX_INTERNAL, "row %lld sums to %g", (long long)r, sum);
      }
    }
    if (x) stax_tensor_release(x);
    if (y) stax_tensor_release(y);
  }
  if (context) stax_context_destroy(context);
  stax_program_release(program);
  if (status) return fail(status);
  printf("hello: ok (stax %s)\n", stax_version());
  return 0;
}
