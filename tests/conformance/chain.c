/* Whole-program conformance: one program with symbolic dims, compiled once, run over many
 * random shapes in sequence and from several threads at once, every output checked against a
 * float64 reference computed here.
 *
 *   x: float32[B, S, 16] -> LayerNormalization(gamma, beta) -> MatMul(W[16, 8]) -> Add(b[8])
 *     -> Gelu -> Softmax(axis 1, over S)
 *
 * Outputs: the Gelu activations and the softmax. Some inputs are fed as strided views. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

enum { kD = 16, kE = 8, kSequentialShapes = 120, kThreads = 4, kThreadShapes = 40 };

typedef struct chain_t {
  stax_program_t* program;
  float gamma[kD], beta[kD], weight[kD * kE], bias[kE];
} chain_t;

static stax_allocator_t alloc(void) { return stax_allocator_system(); }

static uint64_t rng_next(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

static float rng_float(uint64_t* state) {
  return (float)((double)(rng_next(state) % 20001) / 10000.0 - 1.0);
}

static void report_status(const char* what, stax_status_t status) {
  printf("FAIL chain: %s: %s\n", what, stax_status_message(status));
  stax_status_free(status);
}

static stax_status_t add_const(stax_graph_t* g, const char* name, int32_t rank,
                               const int64_t* dims, const float* data, stax_value_id_t* out) {
  stax_tensor_t* t = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(alloc(), STAX_DTYPE_FLOAT32, rank, dims, &t));
  memcpy(stax_tensor_data(t), data, (size_t)stax_tensor_element_count(t) * sizeof(float));
  stax_status_t status = stax_graph_add_initializer(g, name, t, out);
  stax_tensor_release(t);
  return status;
}

static stax_status_t add_node(stax_graph_t* g, stax_op_t op, const char* name, int32_t n,
                              const stax_value_id_t* inputs, int32_t attr_count,
                              const stax_attr_t* attrs, stax_value_id_t* out) {
  stax_node_desc_t desc = {.op = op, .name = name, .input_count = n, .inputs = inputs,
                           .output_count = 1, .attr_count = attr_count, .attrs = attrs};
  return stax_graph_add_node(g, &desc, out);
}

static stax_status_t build_chain(chain_t* chain, stax_graph_t* g) {
  stax_shape_ctx_t* shape = stax_graph_shape_ctx(g);
  const stax_dim_t* dims[3];
  STAX_RETURN_IF_ERROR(stax_symbol_get(shape, "B", 0, 64, &dims[0]));
  STAX_RETURN_IF_ERROR(stax_symbol_get(shape, "S", 0, 1024, &dims[1]));
  dims[2] = stax_dim_const(shape, kD);
  stax_value_id_t x, gamma, beta, weight, bias, v[5];
  STAX_RETURN_IF_ERROR(stax_graph_add_input(g, "x", STAX_DTYPE_FLOAT32, 3, dims, &x));
  int64_t d_dims[1] = {kD}, w_dims[2] = {kD, kE}, e_dims[1] = {kE};
  STAX_RETURN_IF_ERROR(add_const(g, "gamma", 1, d_dims, chain->gamma, &gamma));
  STAX_RETURN_IF_ERROR(add_const(g, "beta", 1, d_dims, chain->beta, &beta));
  STAX_RETURN_IF_ERROR(add_const(g, "W", 2, w_dims, chain->weight, &weight));
  STAX_RETURN_IF_ERROR(add_const(g, "b", 1, e_dims, chain->bias, &bias));
  stax_attr_t ln_attrs[2] = {stax_attr_int("axis", -1), stax_attr_float("epsilon", 1e-5f)};
  stax_value_id_t ln_in[3] = {x, gamma, beta};
  STAX_RETURN_IF_ERROR(add_node(g, STAX_OP_LayerNormalization, "ln", 3, ln_in, 2, ln_attrs, &v[0]));
  stax_value_id_t mm_in[2] = {v[0], weight};
  STAX_RETURN_IF_ERROR(add_node(g, STAX_OP_MatMul, "mm", 2, mm_in, 0, NULL, &v[1]));
  stax_value_id_t add_in[2] = {v[1], bias};
  STAX_RETURN_IF_ERROR(add_node(g, STAX_OP_Add, "add", 2, add_in, 0, NULL, &v[2]));
  STAX_RETURN_IF_ERROR(add_node(g, STAX_OP_Gelu, "gelu", 1, &v[2], 0, NULL, &v[3]));
  stax_attr_t sm_attr = stax_attr_int("axis", 1);
  STAX_RETURN_IF_ERROR(add_node(g, STAX_OP_Softmax, "softmax", 1, &v[3], 1, &sm_attr, &v[4]));
  STAX_RETURN_IF_ERROR(stax_graph_add_output(g, v[3]));
  return stax_graph_add_output(g, v[4]);
}

static bool chain_init(chain_t* chain) {
  memset(chain, 0, sizeof(*chain));
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < kD; i++) {
    chain->gamma[i] = 1.0f + 0.5f * rng_float(&seed);
    chain->beta[i] = 0.3f * rng_float(&seed);
  }
  for (int i = 0; i < kD * kE; i++) chain->weight[i] = 0.4f * rng_float(&seed);
  for (int i = 0; i < kE; i++) chain->bias[i] = 0.2f * rng_float(&seed);
  stax_graph_t* g = NULL;
  stax_status_t status = stax_graph_create(alloc(), &g);
  if (!status) status = build_chain(chain, g);
  if (!status) status = stax_program_compile(alloc(), g, NULL, &chain->program);
  stax_graph_destroy(g);
  if (status) {
    report_status("building the program", status);
    return false;
  }
  return true;
}

/* The reference, in float64: gelu[B, S, E] and softmax over S. x is contiguous [B, S, D]. */
static void chain_reference(const chain_t* chain, int64_t batch, int64_t seq, const float* x,
                            double* gelu, double* softmax) {
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t s = 0; s < seq; s++) {
      const float* row = x + (b * seq + s) * kD;
      double mean = 0, var = 0, normed[kD];
      for (int d = 0; d < kD; d++) mean += row[d];
      mean /= kD;
      for (int d = 0; d < kD; d++) var += (row[d] - mean) * (row[d] - mean);
      var /= kD;
      double inv = 1.0 / sqrt(var + (double)1e-5f);
      for (int d = 0; d < kD; d++) {
        normed[d] = (row[d] - mean) * inv * chain->gamma[d] + chain->beta[d];
      }
      for (int e = 0; e < kE; e++) {
        double acc = chain->bias[e];
        for (int d = 0; d < kD; d++) acc += normed[d] * chain->weight[d * kE + e];
        gelu[(b * seq + s) * kE + e] = 0.5 * acc * (1.0 + erf(acc / sqrt(2.0)));
      }
    }
    for (int e = 0; e < kE; e++) {
      double peak = -INFINITY, total = 0;
      for (int64_t s = 0; s < seq; s++) peak = fmax(peak, gelu[(b * seq + s) * kE + e]);
      for (int64_t s = 0; s < seq; s++) total += exp(gelu[(b * seq + s) * kE + e] - peak);
      for (int64_t s = 0; s < seq; s++) {
        softmax[(b * seq + s) * kE + e] = exp(gelu[(b * seq + s) * kE + e] - peak) / total;
      }
    }
  }
}

/* Compares a float32 output (any strides) with the reference; returns the mismatch count. */
static int64_t check_output(const stax_tensor_t* out, int64_t batch, int64_t seq,
                            const double* want, const char* what, int64_t iteration) {
  const int64_t expect_dims[3] = {batch, seq, kE};
  if (stax_tensor_rank(out) != 3 || stax_tensor_dtype(out) != STAX_DTYPE_FLOAT32 ||
      memcmp(stax_tensor_dims(out), expect_dims, sizeof(expect_dims)) != 0) {
    char text[96];
    conformance_shape_text(stax_tensor_rank(out), stax_tensor_dims(out), text, sizeof(text));
    printf("FAIL chain: shape %" PRId64 " (B=%" PRId64 ", S=%" PRId64 ") %s: got %s %s\n",
           iteration, batch, seq, what, stax_dtype_name(stax_tensor_dtype(out)), text);
    return 1;
  }
  const int64_t* strides = stax_tensor_strides(out);
  const float* data = stax_tensor_data(out);
  int64_t bad = 0;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t s = 0; s < seq; s++) {
      for (int e = 0; e < kE; e++) {
        double got = data[b * strides[0] + s * strides[1] + e * strides[2]];
        double ref = want[(b * seq + s) * kE + e];
        if (!(fabs(got - ref) <= 2e-5 + 2e-4 * fabs(ref))) {
          if (!bad) {
            printf("FAIL chain: shape %" PRId64 " (B=%" PRId64 ", S=%" PRId64
                   ") %s[%" PRId64 ", %" PRId64 ", %d]: got %.8g, expected %.8g\n",
                   iteration, batch, seq, what, b, s, e, got, ref);
          }
          bad++;
        }
      }
    }
  }
  return bad;
}

/* Makes x[B, S, D] with random values, as a contiguous tensor or (every third time) as a
 * step-2 slice of a larger buffer; `dense` receives the logical values, contiguous. */
static stax_status_t make_input(uint64_t* seed, int64_t batch, int64_t seq, bool strided,
                                float* dense, stax_tensor_t** out_x) {
  *out_x = NULL;
  int64_t count = batch * seq * kD;
  for (int64_t i = 0; i < count; i++) dense[i] = 2.0f * rng_float(seed);
  int64_t dims[3] = {batch, seq, kD};
  if (!strided) {
    STAX_RETURN_IF_ERROR(stax_tensor_create(alloc(), STAX_DTYPE_FLOAT32, 3, dims, out_x));
    if (count) memcpy(stax_tensor_data(*out_x), dense, (size_t)count * sizeof(float));
    return STAX_OK;
  }
  int64_t big_dims[3] = {batch, seq, 2 * kD};
  stax_tensor_t* big = NULL;
  STAX_RETURN_IF_ERROR(stax_tensor_create(alloc(), STAX_DTYPE_FLOAT32, 3, big_dims, &big));
  float* data = stax_tensor_data(big);
  for (int64_t i = 0; i < count; i++) {
    data[2 * i] = dense[i];
    data[2 * i + 1] = NAN; /* poison between the elements the view sees */
  }
  int64_t starts[1] = {0}, ends[1] = {2 * kD}, steps[1] = {2};
  int32_t axes[1] = {2};
  stax_status_t status = stax_tensor_slice(alloc(), big, 1, starts, ends, axes, steps, out_x);
  stax_tensor_release(big);
  return status;
}

/* Runs `shapes` random shapes through `contexts` (used in turn); returns the failure count. */
static int run_shapes(const chain_t* chain, stax_context_t* const* contexts, int context_count,
                      uint64_t seed, int shapes, bool verbose) {
  int failures = 0;
  float* dense = malloc(sizeof(float) * 8 * 48 * kD);
  double* gelu = malloc(sizeof(double) * 8 * 48 * kE);
  double* softmax = malloc(sizeof(double) * 8 * 48 * kE);
  if (!dense || !gelu || !softmax) {
    free(dense);
    free(gelu);
    free(softmax);
    return 1;
  }
  for (int it = 0; it < shapes; it++) {
    int64_t batch = (int64_t)(rng_next(&seed) % 8);  /* 0..7 */
    int64_t seq = (int64_t)(rng_next(&seed) % 48);   /* 0..47 */
    if (it % 17 != 5) {
      batch += batch == 0;
      seq += seq == 0;
    }
    stax_tensor_t* x = NULL;
    stax_status_t status = make_input(&seed, batch, seq, it % 3 == 2, dense, &x);
    if (status) {
      report_status("making the input", status);
      failures++;
      continue;
    }
    chain_reference(chain, batch, seq, dense, gelu, softmax);
    stax_tensor_t* outs[2] = {NULL, NULL};
    status = stax_context_run(contexts[it % context_count], 1, &x, 2, outs);
    if (status) {
      printf("FAIL chain: shape %d (B=%" PRId64 ", S=%" PRId64 "): run: %s\n", it, batch, seq,
             stax_status_message(status));
      stax_status_free(status);
      failures++;
    } else {
      int64_t bad = check_output(outs[0], batch, seq, gelu, "gelu", it) +
                    check_output(outs[1], batch, seq, softmax, "softmax", it);
      failures += bad != 0;
      if (verbose && !bad) {
        printf("PASS chain shape %d (B=%" PRId64 ", S=%" PRId64 ")\n", it, batch, seq);
      }
    }
    for (int o = 0; o < 2; o++) {
      if (outs[o]) stax_tensor_release(outs[o]);
    }
    stax_tensor_release(x);
  }
  free(dense);
  free(gelu);
  free(softmax);
  return failures;
}

static stax_context_t* make_context(stax_program_t* program, stax_dispatch_mode_t mode) {
  stax_context_options_t options = {.dispatch = mode};
  stax_context_t* context = NULL;
  stax_status_t status = stax_context_create(alloc(), program, &options, &context);
  if (status) {
    report_status("creating a context", status);
    return NULL;
  }
  return context;
}

int conformance_chain_sequential(bool verbose) {
  chain_t chain;
  if (!chain_init(&chain)) return 1;
  stax_context_t* contexts[2] = {make_context(chain.program, STAX_DISPATCH_SWITCH),
                                 make_context(chain.program, STAX_DISPATCH_GOTO)};
  int failures = 1;
  if (contexts[0] && contexts[1]) {
    failures = run_shapes(&chain, contexts, 2, 0x1234567ull, kSequentialShapes, verbose);
  }
  for (int i = 0; i < 2; i++) {
    if (contexts[i]) stax_context_destroy(contexts[i]);
  }
  stax_program_release(chain.program);
  return failures;
}

typedef struct thread_job_t {
  const chain_t* chain;
  int index;
  bool verbose;
  int failures;
} thread_job_t;

static void* thread_main(void* arg) {
  thread_job_t* job = arg;
  stax_context_t* context = make_context(
      job->chain->program, job->index % 2 ? STAX_DISPATCH_GOTO : STAX_DISPATCH_SWITCH);
  if (!context) {
    job->failures = 1;
    return NULL;
  }
  job->failures = run_shapes(job->chain, &context, 1, 0xABCDEF01ull * (uint64_t)(job->index + 1),
                             kThreadShapes, job->verbose);
  stax_context_destroy(context);
  return NULL;
}

int conformance_chain_threads(bool verbose) {
  chain_t chain;
  if (!chain_init(&chain)) return 1;
  pthread_t threads[kThreads];
  thread_job_t jobs[kThreads];
  int started = 0, failures = 0;
  for (int t = 0; t < kThreads; t++) {
    jobs[t] = (thread_job_t){.chain = &chain, .index = t, .verbose = verbose};
    if (pthread_create(&threads[t], NULL, thread_main, &jobs[t]) != 0) {
      printf("FAIL chain: cannot start thread %d\n", t);
      failures++;
      break;
    }
    started++;
  }
  for (int t = 0; t < started; t++) {
    pthread_join(threads[t], NULL);
    failures += jobs[t].failures;
  }
  stax_program_release(chain.program);
  return failures;
}
