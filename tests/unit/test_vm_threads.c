/* One program, four threads, each with its own context, running random shapes at the same time
 * and checking every output element; the program is immutable and shared. */
#include <pthread.h>
#include <stdatomic.h>

#include "test_vm_util.h"

typedef struct worker_t {
  stax_program_t* program;
  uint64_t seed;
  int rounds;
  int failures; /* mismatches and errors seen by this thread */
  int runs;
} worker_t;

/* out = Relu(x * y + x) - y, x: [B, S], y: [S]. */
static float expected_value(float x, float y) {
  float value = x * y + x;
  return (value < 0 ? 0.0f : value) - y;
}

static void* worker_main(void* arg) {
  worker_t* worker = arg;
  vm_rng_t rng = {worker->seed};
  stax_context_options_t options = {.dispatch = worker->seed % 2 ? STAX_DISPATCH_SWITCH
                                                                 : STAX_DISPATCH_GOTO};
  stax_context_t* context = NULL;
  stax_status_t status = stax_context_create(vm_alloc(), worker->program, &options, &context);
  if (status) {
    stax_status_free(status);
    worker->failures++;
    return NULL;
  }
  for (int round = 0; round < worker->rounds; round++) {
    int64_t dims[2] = {vm_rng_range(&rng, 1, 12), vm_rng_range(&rng, 1, 12)};
    stax_tensor_t* inputs[2] = {vm_random_f32(&rng, 2, dims), vm_random_f32(&rng, 1, dims + 1)};
    stax_tensor_t* output = NULL;
    status = stax_context_run(context, 2, inputs, 1, &output);
    if (status) {
      stax_status_free(status);
      worker->failures++;
    } else {
      worker->runs++;
      if (!vm_dims_equal(output, 2, dims)) worker->failures++;
      const float* xs = vm_f32(inputs[0]);
      const float* ys = vm_f32(inputs[1]);
      for (int64_t i = 0; i < dims[0] * dims[1]; i++)
        if (vm_f32(output)[i] != expected_value(xs[i], ys[i % dims[1]])) worker->failures++;
      stax_tensor_release(output);
    }
    stax_tensor_release(inputs[0]);
    stax_tensor_release(inputs[1]);
  }
  stax_context_destroy(context);
  return NULL;
}

static void test_four_threads(void) {
  stax_graph_t* g = NULL;
  CHECK_OK(stax_graph_create(vm_alloc(), &g));
  const stax_dim_t* dims[2] = {vm_symbol(g, "B", 1, 12), vm_symbol(g, "S", 1, 12)};
  stax_value_id_t x = vm_input(g, "x", STAX_DTYPE_FLOAT32, 2, dims);
  stax_value_id_t y = vm_input(g, "y", STAX_DTYPE_FLOAT32, 1, dims + 1);
  stax_value_id_t product = vm_binary(g, STAX_OP_Mul, "mul", x, y);
  stax_value_id_t sum = vm_binary(g, STAX_OP_Add, "add", product, x);
  stax_value_id_t relu = vm_unary(g, STAX_OP_Relu, "relu", sum);
  vm_output(g, vm_binary(g, STAX_OP_Sub, "sub", relu, y));
  stax_program_t* program = vm_compile(g);
  stax_graph_destroy(g);
  if (!program) return;
  worker_t workers[4];
  pthread_t threads[4];
  for (int t = 0; t < 4; t++) {
    workers[t] = (worker_t){.program = program, .seed = 1000 + (uint64_t)t * 7919, .rounds = 60};
    CHECK_EQ_INT(pthread_create(&threads[t], NULL, worker_main, &workers[t]), 0);
  }
  for (int t = 0; t < 4; t++) {
    pthread_join(threads[t], NULL);
    CHECK_EQ_INT(workers[t].failures, 0);
    CHECK_EQ_INT(workers[t].runs, 60);
  }
  stax_program_release(program);
}

STAX_TEST_MAIN(STAX_TEST(test_four_threads))
