/* The ONNX backend node tests as a conformance suite: every <data>/<test>/model.onnx is
 * imported, compiled and run through the VM with each test_data_set_*'s inputs, and every
 * output is compared with the stored one (shape exactly; floats with rtol 1e-3, atol 1e-7 as
 * ONNX's backend tests do, NaN equal to NaN; integers and bools exactly).
 *
 * Each test is one of: pass; unsupported (the importer reports ops it cannot import); fail
 * (wrong values, or any error or crash). tests/onnx/node_exceptions.txt lists expected failures
 * one per line ("test_name  reason"). The run succeeds when every supported test passes except
 * the listed ones, and no listed test passes (so the list stays true).
 *
 * Each test runs in a child process, so a crash or a hang (watchdog) fails that test only.
 *
 *   onnx_node_suite --data DIR [--exceptions FILE] [--test NAME]... [--no-fork]
 *                   [--timeout SECONDS] [--quiet] [--jit] [--dims-may-be-zero]
 * With --dims-may-be-zero models import with dim_params that may be 0 (stax's default range
 * starts at 1), as ONNX allows: the onnx package's shipped data has a model fed an empty input.
 * With --jit every model also runs through the JIT tier in verify mode (sync, threshold 1,
 * every data set run twice so the second call runs the compiled kernels): each compiled
 * segment is interpreted on the same inputs and compared (docs/jit.md, "Verify mode"), and
 * the outputs are compared with the stored ones as usual.
 * With --test the named tests run in-process (unless --fork) and print details: ops, import
 * errors, the imported graph, and the first mismatching elements of each output. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "onnx/onnx.pb-c.h"
#include "stax/onnx.h"
#include "stax/stax.h"

#define SUITE_REASON_SIZE 1024
#define SUITE_MAX_TENSORS 64
#define SUITE_MISMATCHES_SHOWN 8

typedef enum suite_outcome_e { SUITE_PASS, SUITE_FAIL, SUITE_UNSUPPORTED } suite_outcome_t;

typedef struct suite_result_t {
  suite_outcome_t outcome;
  char reason[SUITE_REASON_SIZE];
} suite_result_t;

typedef struct suite_options_t {
  const char* data_dir;
  const char* exceptions_path;
  const char** only;
  int only_count;
  int fork_mode; /* -1: default (fork unless --test), 0: in-process, 1: fork */
  int timeout_seconds;
  bool verbose;
  bool quiet;
  bool jit;
  /* Import with stax_onnx_import_options_t.dims_may_be_zero: dim_params may be 0, as ONNX
   * allows (test data with empty inputs). */
  bool dims_may_be_zero;
} suite_options_t;

static stax_allocator_t suite_allocator(void) { return stax_allocator_system(); }

/* ---- small string lists ------------------------------------------------------------------ */

typedef struct suite_strings_t {
  int count, capacity;
  char** items;
} suite_strings_t;

static void suite_strings_add(suite_strings_t* list, const char* text) {
  if (list->count == list->capacity) {
    list->capacity = list->capacity ? list->capacity * 2 : 16;
    list->items = realloc(list->items, (size_t)list->capacity * sizeof(char*));
    if (list->items == NULL) abort(); /* the runner's own memory, not user input */
  }
  list->items[list->count] = strdup(text);
  if (list->items[list->count] == NULL) abort();
  list->count++;
}

static int suite_strings_find(const suite_strings_t* list, const char* text) {
  for (int i = 0; i < list->count; i++) {
    if (strcmp(list->items[i], text) == 0) return i;
  }
  return -1;
}

static void suite_strings_free(suite_strings_t* list) {
  for (int i = 0; i < list->count; i++) free(list->items[i]);
  free(list->items);
  memset(list, 0, sizeof(*list));
}

static int suite_compare_strings(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

/* ---- files ------------------------------------------------------------------------------- */

static bool suite_is_file(const char* path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

static bool suite_is_dir(const char* path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

/* Subdirectory names of `dir` starting with `prefix`, sorted. */
static void suite_list_dirs(const char* dir, const char* prefix, suite_strings_t* out) {
  DIR* handle = opendir(dir);
  if (handle == NULL) return;
  struct dirent* entry;
  while ((entry = readdir(handle)) != NULL) {
    if (strncmp(entry->d_name, prefix, strlen(prefix)) != 0) continue;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, entry->d_name);
    if (suite_is_dir(path)) suite_strings_add(out, entry->d_name);
  }
  closedir(handle);
  if (out->count > 1) qsort(out->items, (size_t)out->count, sizeof(char*), suite_compare_strings);
}

/* The op types a model uses (subgraphs included), "domain.Op" outside the default domain. */
static void suite_collect_ops(const Onnx__GraphProto* graph, suite_strings_t* ops, int depth) {
  if (graph == NULL || depth > 16) return;
  for (size_t n = 0; n < graph->n_node; n++) {
    const Onnx__NodeProto* node = graph->node[n];
    if (node == NULL || node->op_type == NULL) continue;
    char name[256];
    bool default_domain = node->domain == NULL || node->domain[0] == '\0' ||
                          strcmp(node->domain, "ai.onnx") == 0;
    snprintf(name, sizeof(name), "%s%s%s", default_domain ? "" : node->domain,
             default_domain ? "" : ".", node->op_type);
    if (suite_strings_find(ops, name) < 0) suite_strings_add(ops, name);
    for (size_t a = 0; a < node->n_attribute; a++) {
      if (node->attribute[a]) suite_collect_ops(node->attribute[a]->g, ops, depth + 1);
    }
  }
}

static void suite_model_ops(const char* model_path, suite_strings_t* ops) {
  FILE* file = fopen(model_path, "rb");
  if (file == NULL) return;
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  uint8_t* data = size > 0 ? malloc((size_t)size) : NULL;
  if (data && fread(data, 1, (size_t)size, file) == (size_t)size) {
    Onnx__ModelProto* model = onnx__model_proto__unpack(NULL, (size_t)size, data);
    if (model) {
      suite_collect_ops(model->graph, ops, 0);
      onnx__model_proto__free_unpacked(model, NULL);
    }
  }
  free(data);
  fclose(file);
  if (ops->count == 0) suite_strings_add(ops, "(unreadable)");
}

/* ---- comparing tensors -------------------------------------------------------------------- */

static double suite_element_as_double(stax_dtype_t dtype, const void* data, int64_t i) {
  double value = 0;
  stax_convert_elements(dtype, (const unsigned char*)data + i * (int64_t)stax_dtype_size(dtype),
                        STAX_DTYPE_FLOAT64, &value, 1);
  return value;
}

/* Exact comparison for integers and bools, through their bytes. */
static bool suite_elements_equal_exact(stax_dtype_t dtype, const void* a, const void* b,
                                       int64_t i) {
  size_t size = stax_dtype_size(dtype);
  return memcmp((const unsigned char*)a + i * (int64_t)size,
                (const unsigned char*)b + i * (int64_t)size, size) == 0;
}

static void suite_dims_text(const stax_tensor_t* tensor, char* buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < stax_tensor_rank(tensor) && used < size; d++) {
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "",
                             (long long)stax_tensor_dims(tensor)[d]);
  }
  if (used < size) snprintf(buf + used, size - used, "]");
}

/* Compares one output; on mismatch writes why into reason and returns false. With verbose,
 * prints the first mismatching elements. */
static bool suite_compare(const char* label, stax_tensor_t* actual, stax_tensor_t* expected,
                          char* reason, size_t reason_size, bool verbose) {
  if (stax_tensor_dtype(actual) != stax_tensor_dtype(expected)) {
    snprintf(reason, reason_size, "%s: dtype %s, expected %s", label,
             stax_dtype_name(stax_tensor_dtype(actual)),
             stax_dtype_name(stax_tensor_dtype(expected)));
    return false;
  }
  char actual_dims[256], expected_dims[256];
  suite_dims_text(actual, actual_dims, sizeof(actual_dims));
  suite_dims_text(expected, expected_dims, sizeof(expected_dims));
  if (strcmp(actual_dims, expected_dims) != 0) {
    snprintf(reason, reason_size, "%s: shape %s, expected %s", label, actual_dims,
             expected_dims);
    return false;
  }
  /* Outputs may be views with any strides; compare contiguous copies. */
  stax_tensor_t* contiguous = NULL;
  stax_status_t status = stax_tensor_copy(suite_allocator(), actual, &contiguous);
  if (status != STAX_OK) {
    snprintf(reason, reason_size, "%s: copying the output failed: %s", label,
             stax_status_message(status));
    stax_status_free(status);
    return false;
  }
  stax_dtype_t dtype = stax_tensor_dtype(expected);
  const void* a = stax_tensor_data(contiguous);
  const void* e = stax_tensor_data(expected);
  int64_t count = stax_tensor_element_count(expected);
  int64_t mismatches = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < count; i++) {
    bool equal;
    if (stax_dtype_is_float(dtype)) {
      double x = suite_element_as_double(dtype, a, i);
      double y = suite_element_as_double(dtype, e, i);
      if (isnan(x) || isnan(y)) {
        equal = isnan(x) && isnan(y);
      } else if (isinf(x) || isinf(y)) {
        equal = x == y;
      } else {
        double difference = fabs(x - y);
        equal = difference <= 1e-7 + 1e-3 * fabs(y);
        if (!equal && difference > worst) worst = difference;
      }
    } else {
      equal = suite_elements_equal_exact(dtype, a, e, i);
    }
    if (equal) continue;
    if (first < 0) first = i;
    if (verbose && mismatches < SUITE_MISMATCHES_SHOWN) {
      printf("    %s element %lld: got %.9g, expected %.9g\n", label, (long long)i,
             suite_element_as_double(dtype, a, i), suite_element_as_double(dtype, e, i));
    }
    mismatches++;
  }
  if (mismatches > 0) {
    snprintf(reason, reason_size,
             "%s: %lld of %lld elements differ (first at %lld: got %.9g, expected %.9g%s)",
             label, (long long)mismatches, (long long)count, (long long)first,
             suite_element_as_double(dtype, a, first), suite_element_as_double(dtype, e, first),
             stax_dtype_is_float(dtype) ? "; rtol 1e-3, atol 1e-7" : "");
  }
  stax_tensor_release(contiguous);
  return mismatches == 0;
}

/* ---- running one test --------------------------------------------------------------------- */

/* Loads <set>/<prefix>_<i>.pb for i = 0, 1, ... until one is missing: a SequenceProto where
 * the program's input/output i is a sequence (the files do not say which they hold), else a
 * TensorProto. */
static stax_status_t suite_load_tensors(const stax_program_t* program, const char* set_dir,
                                        const char* prefix, stax_tensor_t** tensors, char** names,
                                        int* out_count) {
  *out_count = 0;
  bool outputs = strcmp(prefix, "output") == 0;
  int32_t known = outputs ? stax_program_output_count(program) : stax_program_input_count(program);
  for (int i = 0; i < SUITE_MAX_TENSORS; i++) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s_%d.pb", set_dir, prefix, i);
    if (!suite_is_file(path)) return STAX_OK;
    bool sequence = i < known && (outputs ? stax_program_output_is_sequence(program, i)
                                          : stax_program_input_is_sequence(program, i));
    if (sequence) {
      stax_dtype_t dtype = outputs ? stax_program_output_dtype(program, i)
                                   : stax_program_input_dtype(program, i);
      STAX_RETURN_IF_ERROR(
          stax_onnx_load_sequence_file(suite_allocator(), path, dtype, &tensors[i]));
    } else {
      STAX_RETURN_IF_ERROR(
          stax_onnx_load_tensor_file(suite_allocator(), path, &tensors[i], &names[i]));
    }
    (*out_count)++;
  }
  return STAX_OK;
}

static void suite_free_tensors(stax_tensor_t** tensors, char** names, int count) {
  for (int i = 0; i < count; i++) {
    stax_tensor_release(tensors[i]);
    stax_onnx_string_free(suite_allocator(), names[i]);
    tensors[i] = NULL;
    names[i] = NULL;
  }
}

static void suite_set_status_reason(suite_result_t* result, const char* stage,
                                    stax_status_t status) {
  result->outcome = SUITE_FAIL;
  snprintf(result->reason, sizeof(result->reason), "%s: [%s] %s", stage,
           stax_status_code_name(stax_status_code(status)), stax_status_message(status));
  stax_status_free(status);
}

/* numpy has no bfloat16, so the backend tests store bfloat16 tensors as uint16 bit
 * patterns: view those as bfloat16 where the program has bfloat16. Returns a new reference. */
static stax_tensor_t* suite_as_dtype(stax_tensor_t* tensor, stax_dtype_t wanted) {
  if (stax_tensor_dtype(tensor) != STAX_DTYPE_UINT16 || wanted != STAX_DTYPE_BFLOAT16) {
    stax_tensor_retain(tensor);
    return tensor;
  }
  stax_tensor_t* view = NULL;
  stax_status_t status = stax_tensor_create_view(
      suite_allocator(), stax_tensor_buffer(tensor), STAX_DTYPE_BFLOAT16, stax_tensor_rank(tensor),
      stax_tensor_dims(tensor), stax_tensor_strides(tensor), stax_tensor_offset(tensor), &view);
  if (status != STAX_OK) {
    stax_status_free(status);
    stax_tensor_retain(tensor);
    return tensor;
  }
  return view;
}

/* Compares a tensor or a sequence (element by element) with the stored value. */
static bool suite_compare_values(const char* label, stax_tensor_t* actual, stax_tensor_t* expected,
                                 char* reason, size_t reason_size, bool verbose) {
  if (!stax_tensor_is_sequence(actual) && !stax_tensor_is_sequence(expected)) {
    stax_tensor_t* wanted = suite_as_dtype(expected, stax_tensor_dtype(actual));
    bool same = suite_compare(label, actual, wanted, reason, reason_size, verbose);
    stax_tensor_release(wanted);
    return same;
  }
  if (stax_tensor_is_sequence(actual) != stax_tensor_is_sequence(expected)) {
    snprintf(reason, reason_size, "%s: got a %s, expected a %s", label,
             stax_tensor_is_sequence(actual) ? "sequence" : "tensor",
             stax_tensor_is_sequence(expected) ? "sequence" : "tensor");
    return false;
  }
  int64_t length = stax_sequence_length(actual);
  if (length != stax_sequence_length(expected)) {
    snprintf(reason, reason_size, "%s: a sequence of %lld tensors, expected %lld", label,
             (long long)length, (long long)stax_sequence_length(expected));
    return false;
  }
  for (int64_t k = 0; k < length; k++) {
    char element_label[300];
    snprintf(element_label, sizeof(element_label), "%s element %lld", label, (long long)k);
    if (!suite_compare_values(element_label, stax_sequence_at(actual, k),
                              stax_sequence_at(expected, k), reason, reason_size, verbose))
      return false;
  }
  return true;
}

/* Puts the loaded inputs in program order: by name when every name matches an input, else in
 * file order (the backend tests write them in graph input order). */
static bool suite_order_inputs(const stax_program_t* program, stax_tensor_t** loaded,
                               char** names, int count, stax_tensor_t** ordered) {
  int32_t program_inputs = stax_program_input_count(program);
  if (count != program_inputs) return false;
  bool by_name = true;
  for (int i = 0; i < count && by_name; i++) {
    ordered[i] = NULL;
    bool found = false;
    for (int j = 0; j < count; j++) {
      if (names[j] && names[j][0] && strcmp(names[j], stax_program_input_name(program, i)) == 0) {
        ordered[i] = loaded[j];
        found = true;
      }
    }
    by_name = found;
  }
  if (!by_name) {
    for (int i = 0; i < count; i++) ordered[i] = loaded[i];
  }
  for (int i = 0; i < count; i++) {
    ordered[i] = suite_as_dtype(ordered[i], stax_program_input_dtype(program, i));
  }
  return true;
}

static void suite_run_data_set(stax_context_t* context, const stax_program_t* program,
                               const char* set_dir, const char* set_name, bool verbose,
                               bool jit, suite_result_t* result) {
  stax_tensor_t* inputs[SUITE_MAX_TENSORS] = {0};
  char* input_names[SUITE_MAX_TENSORS] = {0};
  stax_tensor_t* expected[SUITE_MAX_TENSORS] = {0};
  char* expected_names[SUITE_MAX_TENSORS] = {0};
  stax_tensor_t* ordered[SUITE_MAX_TENSORS] = {0};
  stax_tensor_t* outputs[SUITE_MAX_TENSORS] = {0};
  int input_count = 0, expected_count = 0;
  int32_t output_count = stax_program_output_count(program);
  stax_status_t status =
      suite_load_tensors(program, set_dir, "input", inputs, input_names, &input_count);
  if (status == STAX_OK) {
    status = suite_load_tensors(program, set_dir, "output", expected, expected_names,
                                &expected_count);
  }
  if (status != STAX_OK) {
    suite_set_status_reason(result, set_name, status);
    goto cleanup;
  }
  if (!suite_order_inputs(program, inputs, input_names, input_count, ordered)) {
    result->outcome = SUITE_FAIL;
    snprintf(result->reason, sizeof(result->reason), "%s: %d input files, the program has %d inputs",
             set_name, input_count, stax_program_input_count(program));
    goto cleanup;
  }
  if (expected_count != output_count || output_count > SUITE_MAX_TENSORS) {
    result->outcome = SUITE_FAIL;
    snprintf(result->reason, sizeof(result->reason),
             "%s: %d output files, the program has %d outputs", set_name, expected_count,
             output_count);
    goto cleanup;
  }
  for (int call = 0; call < (jit ? 2 : 1); call++) {
    /* JIT: the first call compiles (sync), the second runs the kernels; both verify. */
    for (int32_t o = 0; call > 0 && o < output_count; o++) {
      stax_tensor_release(outputs[o]);
      outputs[o] = NULL;
    }
    status = stax_context_run(context, input_count, ordered, output_count, outputs);
    if (status != STAX_OK) {
      suite_set_status_reason(result, set_name, status);
      goto cleanup;
    }
  }
  for (int32_t o = 0; o < output_count; o++) {
    char label[256];
    snprintf(label, sizeof(label), "%s output %d '%s'", set_name, o,
             stax_program_output_name(program, o));
    char reason[SUITE_REASON_SIZE];
    if (outputs[o] == NULL) {
      result->outcome = SUITE_FAIL;
      snprintf(result->reason, sizeof(result->reason), "%s: no tensor returned", label);
      break;
    }
    bool same = suite_compare_values(label, outputs[o], expected[o], reason, sizeof(reason),
                                     verbose);
    if (!same) {
      if (result->outcome != SUITE_FAIL) {
        result->outcome = SUITE_FAIL;
        snprintf(result->reason, sizeof(result->reason), "%s", reason);
      }
      if (verbose) printf("  %s\n", reason);
      if (!verbose) break;
    }
  }

cleanup:
  for (int32_t o = 0; o < output_count && o < SUITE_MAX_TENSORS; o++) {
    stax_tensor_release(outputs[o]);
  }
  for (int i = 0; i < SUITE_MAX_TENSORS; i++) stax_tensor_release(ordered[i]);
  suite_free_tensors(inputs, input_names, input_count);
  suite_free_tensors(expected, expected_names, expected_count);
}

static void suite_run_test(const suite_options_t* options, const char* test_dir,
                           suite_result_t* result) {
  result->outcome = SUITE_PASS;
  result->reason[0] = '\0';
  char model_path[4096 + 64];
  snprintf(model_path, sizeof(model_path), "%s/model.onnx", test_dir);
  stax_allocator_t allocator = suite_allocator();

  stax_onnx_op_report_t* report = NULL;
  stax_status_t status = stax_onnx_check_ops_file(allocator, model_path, &report);
  if (status != STAX_OK) {
    suite_set_status_reason(result, "reading the model", status);
    return;
  }
  if (stax_onnx_op_report_count(report) > 0) {
    result->outcome = SUITE_UNSUPPORTED;
    stax_onnx_op_report_print(report, result->reason, sizeof(result->reason));
    stax_onnx_op_report_destroy(report);
    return;
  }
  stax_onnx_op_report_destroy(report);

  stax_graph_t* graph = NULL;
  stax_program_t* program = NULL;
  stax_context_t* context = NULL;
  stax_onnx_import_options_t import_options = {.dims_may_be_zero = options->dims_may_be_zero};
  status = stax_onnx_import_file(allocator, model_path, &import_options, &graph);
  if (status != STAX_OK) {
    suite_set_status_reason(result, "import", status);
    return;
  }
  if (options->verbose) {
    printf("  imported graph:\n");
    stax_status_t dump_status = stax_graph_dump(graph, stdout);
    if (dump_status != STAX_OK) stax_status_free(dump_status);
  }
  status = stax_program_compile(allocator, graph, NULL, &program);
  stax_graph_destroy(graph);
  if (status != STAX_OK) {
    suite_set_status_reason(result, "compile", status);
    return;
  }
  stax_context_options_t jit_options = {.jit = STAX_JIT_SYNC, .jit_threshold = 1,
                                        .jit_verify = true};
  status = stax_context_create(allocator, program, options->jit ? &jit_options : NULL, &context);
  if (status != STAX_OK) {
    suite_set_status_reason(result, "context", status);
    stax_program_release(program);
    return;
  }
  suite_strings_t sets = {0};
  suite_list_dirs(test_dir, "test_data_set_", &sets);
  if (sets.count == 0) {
    result->outcome = SUITE_FAIL;
    snprintf(result->reason, sizeof(result->reason), "no test_data_set_* directories");
  }
  for (int s = 0; s < sets.count && result->outcome == SUITE_PASS; s++) {
    char set_dir[4096 + 300];
    snprintf(set_dir, sizeof(set_dir), "%s/%s", test_dir, sets.items[s]);
    suite_run_data_set(context, program, set_dir, sets.items[s], options->verbose, options->jit,
                       result);
  }
  suite_strings_free(&sets);
  stax_context_destroy(context);
  stax_program_release(program);
}

/* Runs a test in a child process: a crash, a sanitizer report or a hang fails only it. */
static void suite_run_test_forked(const suite_options_t* options, const char* test_dir,
                                  suite_result_t* result) {
  int pipe_fds[2];
  fflush(stdout);
  fflush(stderr);
  if (pipe(pipe_fds) != 0) {
    result->outcome = SUITE_FAIL;
    snprintf(result->reason, sizeof(result->reason), "pipe failed: %s", strerror(errno));
    return;
  }
  pid_t child = fork();
  if (child < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    result->outcome = SUITE_FAIL;
    snprintf(result->reason, sizeof(result->reason), "fork failed: %s", strerror(errno));
    return;
  }
  if (child == 0) {
    close(pipe_fds[0]);
    alarm((unsigned)options->timeout_seconds);
    suite_result_t child_result;
    suite_run_test(options, test_dir, &child_result);
    ssize_t written = write(pipe_fds[1], &child_result, sizeof(child_result));
    close(pipe_fds[1]);
    /* exit (not _exit) so LeakSanitizer checks the child; a leak makes the exit code 23. */
    exit(written == (ssize_t)sizeof(child_result) ? 0 : 3);
  }
  close(pipe_fds[1]);
  suite_result_t child_result;
  size_t got = 0;
  while (got < sizeof(child_result)) {
    ssize_t n = read(pipe_fds[0], (char*)&child_result + got, sizeof(child_result) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(pipe_fds[0]);
  int wait_status = 0;
  while (waitpid(child, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(wait_status)) {
    int signal_number = WTERMSIG(wait_status);
    result->outcome = SUITE_FAIL;
    snprintf(result->reason, sizeof(result->reason), "%s (signal %d)",
             signal_number == SIGALRM ? "timed out" : "crashed", signal_number);
    return;
  }
  if (got != sizeof(child_result)) {
    result->outcome = SUITE_FAIL;
    snprintf(result->reason, sizeof(result->reason), "the test process exited with code %d "
             "without a result (sanitizer error?)", WEXITSTATUS(wait_status));
    return;
  }
  *result = child_result;
  result->reason[sizeof(result->reason) - 1] = '\0';
  if (WEXITSTATUS(wait_status) != 0 && result->outcome == SUITE_PASS) {
    result->outcome = SUITE_FAIL;
    snprintf(result->reason, sizeof(result->reason),
             "values matched but the test process exited with code %d (leak or sanitizer "
             "report)",
             WEXITSTATUS(wait_status));
  }
}

/* ---- exceptions file ---------------------------------------------------------------------- */

/* "test_name  reason" per line; '#' starts a comment. Returns false if unreadable. */
static bool suite_read_exceptions(const char* path, suite_strings_t* names) {
  if (path == NULL) return true;
  FILE* file = fopen(path, "r");
  if (file == NULL) {
    fprintf(stderr, "cannot read exceptions file '%s': %s\n", path, strerror(errno));
    return false;
  }
  char line[4096];
  int line_number = 0;
  bool ok = true;
  while (fgets(line, sizeof(line), file)) {
    line_number++;
    char* text = line;
    while (*text == ' ' || *text == '\t') text++;
    if (*text == '#' || *text == '\n' || *text == '\0') continue;
    char* end = text;
    while (*end && *end != ' ' && *end != '\t' && *end != '\n') end++;
    char* reason = end;
    while (*reason == ' ' || *reason == '\t') reason++;
    if (*reason == '\n' || *reason == '\0') {
      fprintf(stderr, "%s:%d: '%.*s' has no reason; write 'test_name  reason'\n", path,
              line_number, (int)(end - text), text);
      ok = false;
    }
    *end = '\0';
    if (suite_strings_find(names, text) >= 0) {
      fprintf(stderr, "%s:%d: '%s' is listed twice\n", path, line_number, text);
      ok = false;
    }
    suite_strings_add(names, text);
  }
  fclose(file);
  return ok;
}

/* ---- per-op statistics --------------------------------------------------------------------- */

typedef struct suite_op_stats_t {
  suite_strings_t names;
  int (*counts)[3];
} suite_op_stats_t;

static void suite_op_stats_add(suite_op_stats_t* stats, const char* op, suite_outcome_t outcome) {
  int index = suite_strings_find(&stats->names, op);
  if (index < 0) {
    suite_strings_add(&stats->names, op);
    index = stats->names.count - 1;
    stats->counts = realloc(stats->counts, (size_t)stats->names.capacity * sizeof(stats->counts[0]));
    if (stats->counts == NULL) abort();
    memset(stats->counts[index], 0, sizeof(stats->counts[0]));
  }
  stats->counts[index][outcome]++;
}

static void suite_op_stats_print(const suite_op_stats_t* stats) {
  int* order = malloc((size_t)(stats->names.count + 1) * sizeof(int));
  if (order == NULL) abort();
  for (int i = 0; i < stats->names.count; i++) order[i] = i;
  /* Insertion sort by name: a few hundred ops. */
  for (int i = 1; i < stats->names.count; i++) {
    int key = order[i], j = i - 1;
    while (j >= 0 && strcmp(stats->names.items[order[j]], stats->names.items[key]) > 0) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = key;
  }
  printf("%-40s %6s %6s %12s\n", "op", "pass", "fail", "unsupported");
  for (int i = 0; i < stats->names.count; i++) {
    int k = order[i];
    printf("%-40s %6d %6d %12d\n", stats->names.items[k], stats->counts[k][SUITE_PASS],
           stats->counts[k][SUITE_FAIL], stats->counts[k][SUITE_UNSUPPORTED]);
  }
  free(order);
}

/* ---- main ----------------------------------------------------------------------------------- */

static void suite_usage(void) {
  fprintf(stderr,
          "usage: onnx_node_suite --data DIR [--exceptions FILE] [--test NAME]... [--fork | "
          "--no-fork] [--timeout SECONDS] [--quiet] [--jit] [--dims-may-be-zero]\n");
}

static bool suite_parse_args(int argc, char** argv, suite_options_t* options) {
  memset(options, 0, sizeof(*options));
  options->fork_mode = -1;
  options->timeout_seconds = 300;
  options->only = calloc((size_t)argc + 1, sizeof(char*));
  if (options->only == NULL) abort();
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    bool has_value = i + 1 < argc;
    if (strcmp(arg, "--data") == 0 && has_value) {
      options->data_dir = argv[++i];
    } else if (strcmp(arg, "--exceptions") == 0 && has_value) {
      options->exceptions_path = argv[++i];
    } else if (strcmp(arg, "--test") == 0 && has_value) {
      options->only[options->only_count++] = argv[++i];
    } else if (strcmp(arg, "--timeout") == 0 && has_value) {
      options->timeout_seconds = atoi(argv[++i]);
    } else if (strcmp(arg, "--fork") == 0) {
      options->fork_mode = 1;
    } else if (strcmp(arg, "--no-fork") == 0) {
      options->fork_mode = 0;
    } else if (strcmp(arg, "--quiet") == 0) {
      options->quiet = true;
    } else if (strcmp(arg, "--jit") == 0) {
      options->jit = true;
    } else if (strcmp(arg, "--dims-may-be-zero") == 0) {
      options->dims_may_be_zero = true;
    } else {
      return false;
    }
  }
  if (options->timeout_seconds <= 0) options->timeout_seconds = 300;
  if (options->fork_mode < 0) options->fork_mode = options->only_count > 0 ? 0 : 1;
  options->verbose = options->only_count > 0;
  if (options->data_dir == NULL) options->data_dir = "/usr/share/libonnx-testdata/data/node";
  return true;
}

int main(int argc, char** argv) {
  suite_options_t options;
  if (!suite_parse_args(argc, argv, &options)) {
    suite_usage();
    free(options.only);
    return 2;
  }
  if (!suite_is_dir(options.data_dir)) {
    printf("ONNX node test data not found at '%s'; skipping\n", options.data_dir);
    free(options.only);
    return 77;
  }
  suite_strings_t exceptions = {0};
  if (!suite_read_exceptions(options.exceptions_path, &exceptions)) {
    suite_strings_free(&exceptions);
    free(options.only);
    return 2;
  }
  suite_strings_t tests = {0};
  if (options.only_count > 0) {
    for (int i = 0; i < options.only_count; i++) suite_strings_add(&tests, options.only[i]);
  } else {
    suite_list_dirs(options.data_dir, "test_", &tests);
  }

  suite_op_stats_t stats = {{0}, NULL};
  int totals[3] = {0, 0, 0};
  int expected_failures = 0;
  suite_strings_t unexpected_failures = {0}, unexpected_passes = {0}, stale = {0};
  bool* seen = calloc((size_t)exceptions.count + 1, sizeof(bool));
  if (seen == NULL) abort();
  for (int t = 0; t < tests.count; t++) {
    const char* name = tests.items[t];
    char test_dir[4096], model_path[4096 + 64];
    snprintf(test_dir, sizeof(test_dir), "%s/%s", options.data_dir, name);
    snprintf(model_path, sizeof(model_path), "%s/model.onnx", test_dir);
    if (!suite_is_file(model_path)) {
      if (options.only_count > 0) {
        printf("%s: no model at '%s'\n", name, model_path);
        suite_strings_add(&unexpected_failures, name);
      }
      continue;
    }
    suite_strings_t ops = {0};
    suite_model_ops(model_path, &ops);
    if (options.verbose) {
      printf("%s: ops", name);
      for (int i = 0; i < ops.count; i++) printf(" %s", ops.items[i]);
      printf("\n");
    }
    suite_result_t result;
    if (options.fork_mode) {
      suite_run_test_forked(&options, test_dir, &result);
    } else {
      suite_run_test(&options, test_dir, &result);
    }
    totals[result.outcome]++;
    for (int i = 0; i < ops.count; i++) suite_op_stats_add(&stats, ops.items[i], result.outcome);
    suite_strings_free(&ops);

    int listed = suite_strings_find(&exceptions, name);
    if (listed >= 0) seen[listed] = true;
    const char* verdict = "pass";
    if (result.outcome == SUITE_UNSUPPORTED) {
      verdict = "unsupported";
      if (listed >= 0) suite_strings_add(&stale, name);
    } else if (result.outcome == SUITE_FAIL && listed >= 0) {
      verdict = "fail (expected)";
      expected_failures++;
    } else if (result.outcome == SUITE_FAIL) {
      verdict = "FAIL";
      char line[SUITE_REASON_SIZE + 256];
      snprintf(line, sizeof(line), "%s: %s", name, result.reason);
      suite_strings_add(&unexpected_failures, line);
    } else if (listed >= 0) {
      verdict = "PASS (unexpected: listed in the exceptions)";
      suite_strings_add(&unexpected_passes, name);
    }
    if (options.verbose || (!options.quiet && result.outcome == SUITE_FAIL && listed < 0)) {
      printf("%-60s %s%s%s\n", name, verdict, result.reason[0] ? ": " : "", result.reason);
    }
  }

  if (!options.quiet && options.only_count == 0) suite_op_stats_print(&stats);
  printf("\n%d tests: %d pass, %d fail (%d expected), %d unsupported\n", tests.count,
         totals[SUITE_PASS], totals[SUITE_FAIL], expected_failures, totals[SUITE_UNSUPPORTED]);
  if (unexpected_failures.count > 0) {
    printf("%d unexpected failures (fix them or list them in the exceptions file with a "
           "reason):\n",
           unexpected_failures.count);
    for (int i = 0; i < unexpected_failures.count; i++) {
      printf("  %.300s\n", unexpected_failures.items[i]);
    }
  }
  if (unexpected_passes.count > 0) {
    printf("%d unexpectedly passing (remove them from the exceptions file):\n",
           unexpected_passes.count);
    for (int i = 0; i < unexpected_passes.count; i++) printf("  %s\n", unexpected_passes.items[i]);
  }
  if (stale.count > 0) {
    printf("note: %d listed tests are unsupported, not failing:", stale.count);
    for (int i = 0; i < stale.count; i++) printf(" %s", stale.items[i]);
    printf("\n");
  }
  if (options.only_count == 0) {
    for (int i = 0; i < exceptions.count; i++) {
      if (!seen[i]) printf("note: listed test '%s' is not in the data\n", exceptions.items[i]);
    }
  }
  int exit_code = unexpected_failures.count == 0 && unexpected_passes.count == 0 ? 0 : 1;
  free(seen);
  free(stats.counts);
  suite_strings_free(&stats.names);
  suite_strings_free(&unexpected_failures);
  suite_strings_free(&unexpected_passes);
  suite_strings_free(&stale);
  suite_strings_free(&tests);
  suite_strings_free(&exceptions);
  free(options.only);
  return exit_code;
}
