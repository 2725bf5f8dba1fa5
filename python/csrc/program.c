/* stax._C.Program: a compiled stax program and the run path.
 *
 * Threads. A program is immutable and shared; every run needs an execution context of its own.
 * Instead of one context per thread (thread-local storage would leak a context per thread that
 * ever ran the program, and contexts would outlive the program when threads do), each Program
 * keeps a small pool of idle contexts behind a mutex: a call takes one (or creates one), runs
 * with the GIL released, and puts it back. So N threads calling at once use N contexts, and a
 * single-threaded caller reuses the same context on every call (warm registers and counters).
 *
 * The call path converts every argument without copying where possible (convert.c), checks
 * dtypes and ranks against the program before anything runs (errors name the input), runs,
 * then wraps the outputs as Tensor objects and, by default, as numpy arrays over them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stax_py.h"

enum {
  CALL_NUMPY = 0,  /* one output: the array; several: a tuple of arrays */
  CALL_DICT = 1,   /* {output name: array} */
  CALL_TENSOR = 2, /* a tuple of stax Tensors */
  CALL_TUPLE = 3,  /* always a tuple of arrays (compile([out])) */
  CALL_TENSOR_DICT = 4, /* {output name: stax Tensor} (models with numpy=False) */
  CALL_MODE_COUNT
};

static int program_check_mode(int mode) {
  if (mode < 0 || mode >= CALL_MODE_COUNT) {
    PyErr_Format(PyExc_ValueError, "bad call mode %d", mode);
    return -1;
  }
  return 0;
}

typedef struct {
  PyObject_HEAD
  stax_program_t* program;
  stax_context_options_t options;
  pthread_mutex_t lock;
  stax_context_t** idle; /* contexts not running, ready for the next call */
  int32_t idle_count;
  stax_context_t** all; /* every context made (for counters and destruction) */
  int32_t all_count, all_capacity;
  uint64_t runs, failures;
  int32_t input_count, output_count;
  stax_dtype_t* input_dtypes;
  int32_t* input_ranks;
  char** input_what;       /* "input 'x'" for messages */
  char** input_shape_text; /* "[B, S, 512]" for messages */
  PyObject* input_names;   /* tuple of str */
  PyObject* output_names;  /* tuple of str */
  PyObject* input_shapes;  /* tuple of tuples of int | str */
  PyObject* output_shapes;
  uint8_t* output_readonly;
  int call_mode;
  stax_threadpool_t* own_pool; /* configure(num_threads=n): this program's pool, else NULL */
} StaxProgramObject;

static stax_allocator_t program_alloc(void) { return stax_allocator_system(); }

/* ---- construction --------------------------------------------------------------------------- */

/* A dim as Python shows it: int when the text is a number, else the text ("B", "2*S + 1"). */
static PyObject* program_dim_object(const char* text) {
  char* end = NULL;
  long long value = strtoll(text, &end, 10);
  if (end != text && *end == '\0') return PyLong_FromLongLong(value);
  return PyUnicode_FromString(text);
}

static PyObject* program_shapes(stax_program_t* program, int outputs) {
  int32_t count = outputs ? stax_program_output_count(program) : stax_program_input_count(program);
  PyObject* shapes = PyTuple_New(count);
  if (!shapes) return NULL;
  for (int32_t i = 0; i < count; i++) {
    /* A sequence has no shape of its own (its elements may differ): None. */
    if (outputs ? stax_program_output_is_sequence(program, i)
                : stax_program_input_is_sequence(program, i)) {
      Py_INCREF(Py_None);
      PyTuple_SET_ITEM(shapes, i, Py_None);
      continue;
    }
    int32_t rank = outputs ? stax_program_output_rank(program, i) : stax_program_input_rank(program, i);
    PyObject* shape = PyTuple_New(rank);
    if (!shape) goto fail;
    PyTuple_SET_ITEM(shapes, i, shape);
    for (int32_t d = 0; d < rank; d++) {
      char text[512] = "";
      if (outputs) stax_program_output_dim_text(program, i, d, text, sizeof(text));
      else stax_program_input_dim_text(program, i, d, text, sizeof(text));
      PyObject* dim = program_dim_object(text);
      if (!dim) goto fail;
      PyTuple_SET_ITEM(shape, d, dim);
    }
  }
  return shapes;
fail:
  Py_DECREF(shapes);
  return NULL;
}

static PyObject* program_names(stax_program_t* program, int outputs) {
  int32_t count = outputs ? stax_program_output_count(program) : stax_program_input_count(program);
  PyObject* names = PyTuple_New(count);
  if (!names) return NULL;
  for (int32_t i = 0; i < count; i++) {
    const char* name = outputs ? stax_program_output_name(program, i)
                               : stax_program_input_name(program, i);
    PyObject* text = PyUnicode_FromString(name ? name : "");
    if (!text) {
      Py_DECREF(names);
      return NULL;
    }
    PyTuple_SET_ITEM(names, i, text);
  }
  return names;
}

/* True when the value is a constant, or a view (reshape, transpose, slice, ...) of one: the
 * VM hands such outputs out as views of the program's own constants, which must not be
 * written through. */
static int program_value_is_constant_view(stax_graph_t* graph, stax_value_id_t value, int depth) {
  if (depth > 64 || value == STAX_VALUE_NONE) return 0;
  if (stax_value_constant(graph, value)) return 1;
  stax_node_id_t producer = stax_value_producer(graph, value);
  if (producer < 0) return 0;
  stax_op_t op = stax_node_op(graph, producer);
  if (!(stax_op_flags(op) & STAX_OPF_VIEW) || stax_node_input_count(graph, producer) < 1) return 0;
  return program_value_is_constant_view(graph, stax_node_input(graph, producer, 0), depth + 1);
}

static int program_setup(StaxProgramObject* self, stax_program_t* program, stax_graph_t* graph) {
  self->program = program;
  pthread_mutex_init(&self->lock, NULL);
  self->input_count = stax_program_input_count(program);
  self->output_count = stax_program_output_count(program);
  size_t n_in = (size_t)(self->input_count > 0 ? self->input_count : 1);
  size_t n_out = (size_t)(self->output_count > 0 ? self->output_count : 1);
  self->input_dtypes = calloc(n_in, sizeof(*self->input_dtypes));
  self->input_ranks = calloc(n_in, sizeof(*self->input_ranks));
  self->input_what = calloc(n_in, sizeof(*self->input_what));
  self->input_shape_text = calloc(n_in, sizeof(*self->input_shape_text));
  self->output_readonly = calloc(n_out, 1);
  if (!self->input_dtypes || !self->input_ranks || !self->input_what ||
      !self->input_shape_text || !self->output_readonly) {
    PyErr_NoMemory();
    return -1;
  }
  for (int32_t i = 0; i < self->input_count; i++) {
    self->input_dtypes[i] = stax_program_input_dtype(program, i);
    self->input_ranks[i] = stax_program_input_rank(program, i);
    const char* name = stax_program_input_name(program, i);
    size_t length = strlen(name ? name : "") + 16;
    self->input_what[i] = malloc(length);
    if (!self->input_what[i]) {
      PyErr_NoMemory();
      return -1;
    }
    snprintf(self->input_what[i], length, "input '%s'", name ? name : "");
    char text[1024];
    size_t used = (size_t)snprintf(text, sizeof(text), "[");
    for (int32_t d = 0; d < self->input_ranks[i] && used < sizeof(text); d++) {
      char dim[256] = "";
      stax_program_input_dim_text(program, i, d, dim, sizeof(dim));
      used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s", d ? ", " : "", dim);
    }
    if (used < sizeof(text)) snprintf(text + used, sizeof(text) - used, "]");
    self->input_shape_text[i] = strdup(text);
    if (!self->input_shape_text[i]) {
      PyErr_NoMemory();
      return -1;
    }
  }
  if (graph) {
    for (int32_t o = 0; o < self->output_count && o < stax_graph_output_count(graph); o++)
      self->output_readonly[o] =
          (uint8_t)program_value_is_constant_view(graph, stax_graph_output(graph, o), 0);
  }
  self->input_names = program_names(program, 0);
  self->output_names = program_names(program, 1);
  self->input_shapes = program_shapes(program, 0);
  self->output_shapes = program_shapes(program, 1);
  if (!self->input_names || !self->output_names || !self->input_shapes || !self->output_shapes)
    return -1;
  return 0;
}

static int program_parse_dispatch(const char* text, stax_dispatch_mode_t* out) {
  if (strcmp(text, "default") == 0) *out = STAX_DISPATCH_DEFAULT;
  else if (strcmp(text, "switch") == 0) *out = STAX_DISPATCH_SWITCH;
  else if (strcmp(text, "goto") == 0) *out = STAX_DISPATCH_GOTO;
  else {
    PyErr_Format(PyExc_ValueError, "dispatch must be 'default', 'switch' or 'goto', not '%s'",
                 text);
    return -1;
  }
  return 0;
}

/* jit: 0 off, 1 background, 2 sync (stax_jit_mode_t). */
static int program_check_jit(int jit) {
  if (jit != STAX_JIT_OFF && jit != STAX_JIT_BACKGROUND && jit != STAX_JIT_SYNC) {
    PyErr_Format(PyExc_ValueError, "bad jit mode %d (0 off, 1 background, 2 sync)", jit);
    return -1;
  }
  return 0;
}

static PyObject* program_wrap(PyTypeObject* cls, stax_program_t* program, stax_graph_t* graph,
                              const char* dispatch, int profile_timing, int call_mode, int jit) {
  if (program_check_mode(call_mode) < 0 || program_check_jit(jit) < 0) {
    stax_program_release(program);
    return NULL;
  }
  if (!PyType_IsSubtype(cls, &StaxProgram_Type)) {
    stax_program_release(program);
    PyErr_SetString(PyExc_TypeError, "cls must be a subclass of stax._C.Program");
    return NULL;
  }
  StaxProgramObject* self = (StaxProgramObject*)cls->tp_alloc(cls, 0);
  if (!self) {
    stax_program_release(program);
    return NULL;
  }
  if (program_setup(self, program, graph) < 0 ||
      program_parse_dispatch(dispatch, &self->options.dispatch) < 0) {
    Py_DECREF(self);
    return NULL;
  }
  self->options.profile_timing = profile_timing != 0;
  self->options.pool = NULL;
  self->options.jit = (stax_jit_mode_t)jit;
  /* jit='sync' (tests, inspection): kernels keep their LLVM IR / assembly for Kernel.source.
   * Not with jit='on': keeping texts costs an extra code generation per kernel and keeps
   * kernels out of the on-disk object cache, which serving needs more. */
  if (jit == STAX_JIT_SYNC) stax_program_jit_keep_sources(program);
  self->call_mode = call_mode;
  return (PyObject*)self;
}

PyObject* stax_py_compile_program(PyObject* module, PyObject* args, PyObject* kwargs) {
  (void)module;
  static char* keywords[] = {"graph", "cls", "static_variants", "profile_points", "dispatch",
                             "profile_timing", "call_mode", "jit", "disable_passes", NULL};
  PyObject *graph_obj = NULL, *cls = NULL;
  int static_variants = 1, profile_points = 1, profile_timing = 0, call_mode = CALL_NUMPY;
  int jit = STAX_JIT_OFF;
  const char* dispatch = "default";
  const char* disable_passes = "";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!|ppspiis:compile_program", keywords,
                                   &graph_obj, &PyType_Type, &cls, &static_variants,
                                   &profile_points, &dispatch, &profile_timing, &call_mode, &jit,
                                   &disable_passes))
    return NULL;
  stax_graph_t* graph = stax_py_graph_handle(graph_obj);
  if (!graph) return NULL;
  uint32_t disabled = 0;
  stax_status_t parsed = stax_pass_parse_list(disable_passes, &disabled);
  if (parsed) return stax_py_raise(parsed, NULL);
  stax_compile_options_t options = {.disable_static_variants = !static_variants,
                                    .disable_profile_points = !profile_points,
                                    .disable_passes = disabled};
  stax_program_t* program = NULL;
  stax_status_t status;
  Py_BEGIN_ALLOW_THREADS
  status = stax_graph_verify(graph);
  if (!status) status = stax_program_compile(program_alloc(), graph, &options, &program);
  Py_END_ALLOW_THREADS
  if (status) return stax_py_raise(status, NULL);
  return program_wrap((PyTypeObject*)cls, program, graph, dispatch, profile_timing, call_mode,
                      jit);
}

/* load_program(path_or_bytes, cls, dispatch, profile_timing, call_mode) */
PyObject* stax_py_load_program(PyObject* module, PyObject* args, PyObject* kwargs);
PyObject* stax_py_load_program(PyObject* module, PyObject* args, PyObject* kwargs) {
  (void)module;
  static char* keywords[] = {"source", "cls", "dispatch", "profile_timing", "call_mode", "jit",
                             NULL};
  PyObject *source = NULL, *cls = NULL;
  const char* dispatch = "default";
  int profile_timing = 0, call_mode = CALL_NUMPY, jit = STAX_JIT_OFF;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!|spii:load_program", keywords, &source,
                                   &PyType_Type, &cls, &dispatch, &profile_timing, &call_mode,
                                   &jit))
    return NULL;
#ifndef STAX_PY_HAVE_PROGRAM_IO
  (void)source, (void)cls, (void)dispatch, (void)profile_timing, (void)call_mode, (void)jit;
  return stax_py_raise_code(STAX_UNIMPLEMENTED,
                            "this build of the stax library cannot load saved programs");
#else
  stax_program_t* program = NULL;
  stax_status_t status = STAX_OK;
  if (PyBytes_Check(source)) {
    status = stax_program_deserialize(program_alloc(), PyBytes_AS_STRING(source),
                                      (size_t)PyBytes_GET_SIZE(source), NULL, &program);
  } else {
    PyObject* path = NULL;
    if (!PyUnicode_FSConverter(source, &path)) return NULL;
    status = stax_program_load(program_alloc(), PyBytes_AS_STRING(path), &program);
    Py_DECREF(path);
  }
  if (status) return stax_py_raise(status, NULL);
  return program_wrap((PyTypeObject*)cls, program, NULL, dispatch, profile_timing, call_mode,
                      jit);
#endif
}

static void program_dealloc(StaxProgramObject* self) {
  /* No call can be running: each holds a reference to the program object. */
  for (int32_t i = 0; i < self->all_count; i++) stax_context_destroy(self->all[i]);
  /* After its contexts: they run on it. */
  if (self->own_pool) stax_threadpool_destroy(self->own_pool);
  free(self->all);
  free(self->idle);
  if (self->program) {
    stax_program_release(self->program);
    pthread_mutex_destroy(&self->lock);
  }
  for (int32_t i = 0; self->input_what && i < self->input_count; i++) free(self->input_what[i]);
  for (int32_t i = 0; self->input_shape_text && i < self->input_count; i++)
    free(self->input_shape_text[i]);
  free(self->input_what);
  free(self->input_shape_text);
  free(self->input_dtypes);
  free(self->input_ranks);
  free(self->output_readonly);
  Py_XDECREF(self->input_names);
  Py_XDECREF(self->output_names);
  Py_XDECREF(self->input_shapes);
  Py_XDECREF(self->output_shapes);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* ---- context pool --------------------------------------------------------------------------- */

static stax_context_t* program_take_context(StaxProgramObject* self) {
  stax_context_t* context = NULL;
  pthread_mutex_lock(&self->lock);
  if (self->idle_count > 0) context = self->idle[--self->idle_count];
  pthread_mutex_unlock(&self->lock);
  if (context) return context;
  stax_status_t status =
      stax_context_create(program_alloc(), self->program, &self->options, &context);
  if (status) {
    stax_py_raise(status, "while creating an execution context");
    return NULL;
  }
  pthread_mutex_lock(&self->lock);
  int ok = 1;
  if (self->all_count == self->all_capacity) {
    int32_t capacity = self->all_capacity ? self->all_capacity * 2 : 4;
    stax_context_t** all = realloc(self->all, (size_t)capacity * sizeof(*all));
    stax_context_t** idle = all ? realloc(self->idle, (size_t)capacity * sizeof(*idle)) : NULL;
    if (all) self->all = all;
    if (idle) {
      self->idle = idle;
      self->all_capacity = capacity;
    } else {
      ok = 0;
    }
  }
  if (ok) self->all[self->all_count++] = context;
  pthread_mutex_unlock(&self->lock);
  if (!ok) {
    stax_context_destroy(context);
    PyErr_NoMemory();
    return NULL;
  }
  return context;
}

static void program_return_context(StaxProgramObject* self, stax_context_t* context, int failed) {
  pthread_mutex_lock(&self->lock);
  self->idle[self->idle_count++] = context; /* idle has room for every context in `all` */
  self->runs++;
  if (failed) self->failures++;
  pthread_mutex_unlock(&self->lock);
}

/* ---- running -------------------------------------------------------------------------------- */

/* Puts the arguments in input order (borrowed references into `ordered`). */
static int program_order_arguments(StaxProgramObject* self, PyObject* const* args,
                                   Py_ssize_t nargs, PyObject* kwargs, PyObject** ordered) {
  int32_t n = self->input_count;
  if (nargs > n) {
    stax_py_raise_code(STAX_INVALID_ARGUMENT, "the kernel takes %d input%s %R, got %zd", n,
                       n == 1 ? "" : "s", self->input_names, nargs);
    return -1;
  }
  for (int32_t i = 0; i < n; i++) ordered[i] = i < nargs ? args[i] : NULL;
  if (kwargs && PyDict_GET_SIZE(kwargs) > 0) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      int32_t found = -1;
      for (int32_t i = 0; i < n; i++) {
        int eq = PyUnicode_Check(key)
                     ? PyUnicode_Compare(key, PyTuple_GET_ITEM(self->input_names, i)) == 0
                     : 0;
        if (eq) {
          found = i;
          break;
        }
      }
      if (found < 0) {
        stax_py_raise_code(STAX_INVALID_ARGUMENT, "unknown input %R; the inputs are %R", key,
                           self->input_names);
        return -1;
      }
      if (ordered[found]) {
        stax_py_raise_code(STAX_INVALID_ARGUMENT, "input %R given twice", key);
        return -1;
      }
      ordered[found] = value;
    }
  }
  for (int32_t i = 0; i < n; i++) {
    if (!ordered[i]) {
      stax_py_raise_code(STAX_INVALID_ARGUMENT, "missing %s (the inputs are %R)",
                         self->input_what[i], self->input_names);
      return -1;
    }
  }
  return 0;
}

static PyObject* program_shape_text(const stax_tensor_t* tensor) {
  PyObject* dims = PyTuple_New(stax_tensor_rank(tensor));
  if (!dims) return NULL;
  for (int32_t d = 0; d < stax_tensor_rank(tensor); d++) {
    PyObject* dim = PyLong_FromLongLong(stax_tensor_dims(tensor)[d]);
    if (!dim) {
      Py_DECREF(dims);
      return NULL;
    }
    PyTuple_SET_ITEM(dims, d, dim);
  }
  return dims;
}

/* dtype and rank checks before anything runs. */
static int program_check_input(StaxProgramObject* self, int32_t i, const stax_tensor_t* tensor) {
  stax_dtype_t dtype = stax_tensor_dtype(tensor);
  if (dtype != self->input_dtypes[i]) {
    stax_py_raise_code(STAX_DTYPE_MISMATCH,
                       "%s: expected dtype %s, got %s (convert with .astype('%s'))",
                       self->input_what[i], stax_dtype_name(self->input_dtypes[i]),
                       stax_dtype_name(dtype), stax_dtype_name(self->input_dtypes[i]));
    return -1;
  }
  if (stax_tensor_rank(tensor) != self->input_ranks[i]) {
    PyObject* got = program_shape_text(tensor);
    if (!got) return -1;
    stax_py_raise_code(STAX_SHAPE_MISMATCH, "%s: expected rank %d %s, got rank %d with shape %R",
                       self->input_what[i], self->input_ranks[i], self->input_shape_text[i],
                       stax_tensor_rank(tensor), got);
    Py_DECREF(got);
    return -1;
  }
  return 0;
}

/* A sequence input from a list or tuple of arrays (each converted as a tensor input is, to
 * the sequence's dtype). Anything else is an error naming the input. */
static int program_to_sequence(StaxProgramObject* self, int32_t i, PyObject* value,
                               stax_tensor_t** out_sequence) {
  *out_sequence = NULL;
  const char* what = self->input_what[i];
  stax_dtype_t dtype = self->input_dtypes[i];
  if (!PyList_Check(value) && !PyTuple_Check(value)) {
    stax_py_raise_code(STAX_INVALID_ARGUMENT,
                       "%s is a sequence of %s tensors: pass a list of arrays, got %s", what,
                       stax_dtype_name(dtype), Py_TYPE(value)->tp_name);
    return -1;
  }
  PyObject* items = PySequence_Fast(value, "a sequence input must be a list");
  if (!items) return -1;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
  stax_tensor_t** tensors = calloc((size_t)(count > 0 ? count : 1), sizeof(*tensors));
  int result = -1;
  Py_ssize_t made = 0;
  if (!tensors) {
    PyErr_NoMemory();
    goto cleanup;
  }
  for (; made < count; made++) {
    char element_what[512];
    snprintf(element_what, sizeof(element_what), "%s element %zd", what, made);
    if (stax_py_to_tensor(PySequence_Fast_GET_ITEM(items, made), dtype, element_what,
                          &tensors[made]) < 0)
      goto cleanup;
    if (stax_tensor_dtype(tensors[made]) != dtype) {
      stax_py_raise_code(STAX_DTYPE_MISMATCH, "%s: expected dtype %s, got %s", element_what,
                         stax_dtype_name(dtype), stax_dtype_name(stax_tensor_dtype(tensors[made])));
      made++;
      goto cleanup;
    }
  }
  stax_status_t status = stax_sequence_create(stax_allocator_system(), dtype, count, tensors,
                                              out_sequence);
  if (status) {
    stax_py_raise(status, what);
    goto cleanup;
  }
  result = 0;
cleanup:
  for (Py_ssize_t k = 0; k < made; k++) stax_tensor_release(tensors[k]);
  free(tensors);
  Py_DECREF(items);
  return result;
}

/* A sequence output as a list: each element as a tensor output would be (numpy array, or
 * stax.Tensor in the tensor call modes). Takes over `sequence`. */
static PyObject* program_sequence_to_list(stax_tensor_t* sequence, int tensors) {
  int64_t length = stax_sequence_length(sequence);
  PyObject* list = PyList_New((Py_ssize_t)length);
  if (!list) {
    stax_tensor_release(sequence);
    return NULL;
  }
  for (int64_t k = 0; k < length; k++) {
    stax_tensor_t* element = stax_sequence_at(sequence, k);
    stax_tensor_retain(element);
    PyObject* item = stax_py_tensor_new(element, 0);
    if (item && !tensors && stax_py_hook_asarray &&
        stax_py_dtype_format(stax_tensor_dtype(element))) {
      PyObject* array = PyObject_CallOneArg(stax_py_hook_asarray, item);
      Py_DECREF(item);
      item = array;
    } else if (item && !tensors && stax_py_hook_bfloat16 &&
               stax_tensor_dtype(element) == STAX_DTYPE_BFLOAT16) {
      PyObject* array = PyObject_CallOneArg(stax_py_hook_bfloat16, item);
      Py_DECREF(item);
      item = array;
    }
    if (!item) {
      Py_DECREF(list);
      stax_tensor_release(sequence);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)k, item);
  }
  stax_tensor_release(sequence);
  return list;
}

/* The outputs as Python objects: `select` (count entries, indices into the outputs, repeats
 * allowed; NULL: every output in order) says which, in which order. Every output is
 * released. */
static PyObject* program_outputs_to_python(StaxProgramObject* self, stax_tensor_t** outputs,
                                           int mode, const int32_t* select, int32_t count) {
  int32_t n = self->output_count;
  PyObject* result = NULL;
  PyObject* wrapped = PyTuple_New(n); /* Tensor objects, one per output */
  PyObject* items = NULL;
  if (!wrapped) goto cleanup;
  int tensors = mode == CALL_TENSOR || mode == CALL_TENSOR_DICT;
  for (int32_t o = 0; o < n; o++) {
    PyObject* tensor = stax_tensor_is_sequence(outputs[o])
                           ? program_sequence_to_list(outputs[o], tensors)
                           : stax_py_tensor_new(outputs[o], self->output_readonly[o]);
    outputs[o] = NULL; /* stolen, also on failure */
    if (!tensor) goto cleanup;
    PyTuple_SET_ITEM(wrapped, o, tensor);
  }
  if (!select) count = n;
  items = PyTuple_New(count);
  if (!items) goto cleanup;
  for (int32_t k = 0; k < count; k++) {
    int32_t o = select ? select[k] : k;
    PyObject* tensor = PyTuple_GET_ITEM(wrapped, o);
    PyObject* item = tensor;
    if (PyList_Check(tensor)) { /* a sequence output, already converted */
      Py_INCREF(item);
      PyTuple_SET_ITEM(items, k, item);
      continue;
    }
    stax_dtype_t out_dtype = stax_tensor_dtype(((StaxTensorObject*)tensor)->tensor);
    if (!tensors && stax_py_hook_asarray && stax_py_dtype_format(out_dtype)) {
      item = PyObject_CallOneArg(stax_py_hook_asarray, tensor);
      if (!item) goto cleanup;
    } else if (!tensors && stax_py_hook_bfloat16 && out_dtype == STAX_DTYPE_BFLOAT16) {
      item = PyObject_CallOneArg(stax_py_hook_bfloat16, tensor);
      if (!item) goto cleanup;
    } else {
      Py_INCREF(item);
    }
    PyTuple_SET_ITEM(items, k, item);
  }
  if (mode == CALL_DICT || mode == CALL_TENSOR_DICT) {
    PyObject* dict = PyDict_New();
    if (!dict) goto cleanup;
    for (int32_t k = 0; k < count; k++) {
      int32_t o = select ? select[k] : k;
      if (PyDict_SetItem(dict, PyTuple_GET_ITEM(self->output_names, o),
                         PyTuple_GET_ITEM(items, k)) < 0) {
        Py_DECREF(dict);
        goto cleanup;
      }
    }
    result = dict;
  } else if (mode == CALL_NUMPY && count == 1 && !select) {
    result = PyTuple_GET_ITEM(items, 0);
    Py_INCREF(result);
  } else {
    result = items;
    items = NULL;
  }
cleanup:
  for (int32_t o = 0; o < n; o++) stax_tensor_release(outputs[o]); /* NULL-safe: not wrapped */
  Py_XDECREF(items);
  Py_XDECREF(wrapped);
  return result;
}

#define PROGRAM_STACK_IO 16

static PyObject* program_execute(StaxProgramObject* self, PyObject* const* args,
                                 Py_ssize_t nargs, PyObject* kwargs, int mode,
                                 const int32_t* select, int32_t select_count) {
  int32_t n_in = self->input_count, n_out = self->output_count;
  PyObject* ordered_stack[PROGRAM_STACK_IO];
  stax_tensor_t* inputs_stack[PROGRAM_STACK_IO];
  stax_tensor_t* outputs_stack[PROGRAM_STACK_IO];
  PyObject** ordered = n_in <= PROGRAM_STACK_IO ? ordered_stack : calloc((size_t)n_in, sizeof(PyObject*));
  stax_tensor_t** inputs = n_in <= PROGRAM_STACK_IO ? inputs_stack : calloc((size_t)n_in, sizeof(stax_tensor_t*));
  stax_tensor_t** outputs = n_out <= PROGRAM_STACK_IO ? outputs_stack : calloc((size_t)n_out, sizeof(stax_tensor_t*));
  PyObject* result = NULL;
  int32_t converted = 0;
  if (!ordered || !inputs || !outputs) {
    PyErr_NoMemory();
    goto cleanup;
  }
  if (program_order_arguments(self, args, nargs, kwargs, ordered) < 0) goto cleanup;
  for (; converted < n_in; converted++) {
    int32_t i = converted;
    if (stax_program_input_is_sequence(self->program, i)) {
      if (program_to_sequence(self, i, ordered[i], &inputs[i]) < 0) goto cleanup;
      continue;
    }
    if (stax_py_to_tensor(ordered[i], self->input_dtypes[i], self->input_what[i], &inputs[i]) < 0)
      goto cleanup;
    if (program_check_input(self, i, inputs[i]) < 0) {
      converted++; /* inputs[i] is set and must be released */
      goto cleanup;
    }
  }
  stax_context_t* context = program_take_context(self);
  if (!context) goto cleanup;
  stax_status_t status;
  Py_BEGIN_ALLOW_THREADS
  status = stax_context_run(context, n_in, inputs, n_out, outputs);
  Py_END_ALLOW_THREADS
  program_return_context(self, context, status != STAX_OK);
  if (status) {
    stax_py_raise(status, NULL);
    goto cleanup;
  }
  result = program_outputs_to_python(self, outputs, mode, select, select_count);
cleanup:
  for (int32_t i = 0; i < converted; i++) stax_tensor_release(inputs[i]);
  if (ordered != ordered_stack) free(ordered);
  if (inputs != inputs_stack) free(inputs);
  if (outputs != outputs_stack) free(outputs);
  return result;
}

static PyObject* program_call(StaxProgramObject* self, PyObject* args, PyObject* kwargs) {
  return program_execute(self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), kwargs,
                         self->call_mode, NULL, 0);
}

/* Output indices from a sequence of ints (Python checked the names). */
static int program_parse_select(StaxProgramObject* self, PyObject* select, int32_t** out_select,
                                int32_t* out_count) {
  *out_select = NULL;
  *out_count = 0;
  if (select == Py_None) return 0;
  PyObject* seq = PySequence_Fast(select, "select must be a sequence of output indices");
  if (!seq) return -1;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
  int32_t* indices = malloc((size_t)(count ? count : 1) * sizeof(*indices));
  if (!indices) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t k = 0; k < count; k++) {
    long index = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, k));
    if (index == -1 && PyErr_Occurred()) goto fail;
    if (index < 0 || index >= self->output_count) {
      PyErr_Format(PyExc_IndexError, "output index %ld out of range (the program has %d outputs)",
                   index, (int)self->output_count);
      goto fail;
    }
    indices[k] = (int32_t)index;
  }
  Py_DECREF(seq);
  *out_select = indices;
  *out_count = (int32_t)count;
  return 0;
fail:
  Py_DECREF(seq);
  free(indices);
  return -1;
}

/* run(inputs, mode=0, select=None) with inputs a sequence (positional) or a mapping (by
 * name); select: output indices to return, in that order (None: all). */
static PyObject* program_run(StaxProgramObject* self, PyObject* args) {
  PyObject* inputs = NULL;
  PyObject* select_obj = Py_None;
  int mode = CALL_NUMPY;
  if (!PyArg_ParseTuple(args, "O|iO:run", &inputs, &mode, &select_obj)) return NULL;
  if (program_check_mode(mode) < 0) return NULL;
  int32_t* select = NULL;
  int32_t select_count = 0;
  if (program_parse_select(self, select_obj, &select, &select_count) < 0) return NULL;
  PyObject* result = NULL;
  if (PyDict_Check(inputs)) {
    result = program_execute(self, NULL, 0, inputs, mode, select, select_count);
  } else {
    PyObject* seq = PySequence_Fast(inputs, "inputs must be a sequence or a dict");
    if (seq) {
      result = program_execute(self, PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq),
                               NULL, mode, select, select_count);
      Py_DECREF(seq);
    }
  }
  free(select);
  return result;
}

/* configure(num_threads=-1, jit_threshold=0, jit_max_versions=0, jit_verify=False,
 * jit_tolerance=0.0, jit_generic=0, jit_cache_dir=None, trace=False): the execution options of the
 * contexts this program makes (stax_context_options_t), before the first call. num_threads
 * -1: the process-wide pool; n >= 0: a pool of the program's own (0: one thread per core).
 * jit_cache_dir: None keeps the environment's folder, "" switches the on-disk cache off. */
static PyObject* program_configure(StaxProgramObject* self, PyObject* args, PyObject* kwargs) {
  static char* keywords[] = {"num_threads", "jit_threshold", "jit_max_versions", "jit_verify",
                             "jit_tolerance", "jit_generic", "jit_cache_dir", "trace", NULL};
  int num_threads = -1, threshold = 0, max_versions = 0, verify = 0, generic = 0, trace = 0;
  double tolerance = 0.0;
  PyObject* cache_dir = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|iiipdiOp:_configure", keywords, &num_threads,
                                   &threshold, &max_versions, &verify, &tolerance, &generic,
                                   &cache_dir, &trace))
    return NULL;
  if (threshold < 0 || max_versions < 0 || tolerance < 0 || num_threads < -1 ||
      generic < STAX_JIT_GENERIC_DEFAULT || generic > STAX_JIT_GENERIC_OFF) {
    PyErr_SetString(PyExc_ValueError, "configure: a value is out of range");
    return NULL;
  }
  pthread_mutex_lock(&self->lock);
  int32_t made = self->all_count;
  pthread_mutex_unlock(&self->lock);
  if (made > 0 || self->own_pool)
    return stax_py_raise_code(STAX_FAILED_PRECONDITION,
                              "configure: the program has run already (or was configured); "
                              "execution options are set before the first call");
  if (cache_dir != Py_None) {
    PyObject* path = NULL;
    if (!PyUnicode_FSConverter(cache_dir, &path)) return NULL;
    stax_status_t status = stax_program_jit_set_cache_dir(self->program, PyBytes_AS_STRING(path));
    Py_DECREF(path);
    if (status) return stax_py_raise(status, "jit_cache_dir");
  }
  if (num_threads >= 0) {
    stax_threadpool_t* pool = NULL;
    stax_status_t status = stax_threadpool_create(program_alloc(), num_threads, &pool);
    if (status) return stax_py_raise(status, "while creating the model's thread pool");
    self->own_pool = pool;
    self->options.pool = pool;
  }
  self->options.jit_threshold = threshold;
  self->options.jit_max_versions = max_versions;
  self->options.jit_verify = verify != 0;
  self->options.jit_tolerance = tolerance;
  self->options.jit_generic = (stax_jit_generic_t)generic;
  self->options.trace = trace != 0; /* every context records from its first call */
  Py_RETURN_NONE;
}

/* _trace_json() -> list of str: the trace of each context this program made (one per
 * thread that called it), as Chrome trace-event JSON, after the background compiles queued
 * so far have finished (their events belong in it). Empty when tracing is off. */
static PyObject* program_trace_json(StaxProgramObject* self, PyObject* unused) {
  (void)unused;
  if (!self->options.trace) return PyList_New(0);
  Py_BEGIN_ALLOW_THREADS stax_program_jit_drain(self->program);
  Py_END_ALLOW_THREADS
  PyObject* list = PyList_New(0);
  if (!list) return NULL;
  pthread_mutex_lock(&self->lock);
  /* The contexts live as long as the program; a running one keeps appending (the trace has
   * its own lock), so this reads what it has so far. */
  int32_t count = self->all_count;
  stax_context_t** contexts = malloc((size_t)(count > 0 ? count : 1) * sizeof(*contexts));
  if (contexts) memcpy(contexts, self->all, (size_t)count * sizeof(*contexts));
  pthread_mutex_unlock(&self->lock);
  if (!contexts) {
    Py_DECREF(list);
    return PyErr_NoMemory();
  }
  for (int32_t c = 0; c < count; c++) {
    char* text = NULL;
    size_t size = 0;
    FILE* out = open_memstream(&text, &size);
    if (!out) {
      free(contexts);
      Py_DECREF(list);
      return PyErr_SetFromErrno(PyExc_OSError);
    }
    stax_status_t status = stax_context_trace_write(contexts[c], out);
    fclose(out);
    PyObject* item = status ? NULL : PyUnicode_DecodeUTF8(text, (Py_ssize_t)size, "replace");
    free(text);
    if (status || !item || PyList_Append(list, item) < 0) {
      Py_XDECREF(item);
      free(contexts);
      Py_DECREF(list);
      return status ? stax_py_raise(status, "while writing the trace") : NULL;
    }
    Py_DECREF(item);
  }
  free(contexts);
  return list;
}

static PyObject* program_get_num_threads(StaxProgramObject* self, void* c) {
  (void)c;
  return PyLong_FromLong(stax_threadpool_thread_count(self->own_pool ? self->own_pool
                                                                     : stax_threadpool_default()));
}

/* ---- inspection ----------------------------------------------------------------------------- */

static PyObject* program_disassemble(StaxProgramObject* self, PyObject* args) {
  unsigned int forms = STAX_DISASSEMBLE_EXTENDED | STAX_DISASSEMBLE_COMPACT;
  if (!PyArg_ParseTuple(args, "|I:disassemble", &forms)) return NULL;
  char* text = NULL;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  if (!out) return PyErr_SetFromErrno(PyExc_OSError);
  stax_status_t status = stax_program_disassemble(self->program, forms, out);
  fclose(out);
  if (status) {
    free(text);
    return stax_py_raise(status, "disassemble");
  }
  PyObject* result = PyUnicode_FromStringAndSize(text ? text : "", (Py_ssize_t)size);
  free(text);
  return result;
}

static PyObject* program_counter_list(const uint64_t* const* arrays, int32_t array_count,
                                      int32_t length) {
  PyObject* list = PyList_New(length);
  if (!list) return NULL;
  for (int32_t k = 0; k < length; k++) {
    unsigned long long sum = 0;
    for (int32_t c = 0; c < array_count; c++)
      if (arrays[c]) sum += arrays[c][k];
    PyObject* value = PyLong_FromUnsignedLongLong(sum);
    if (!value) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, k, value);
  }
  return list;
}

/* Memory statistics of the idle contexts (docs/memory.md): the plan's sizes, and per counter
 * the largest of the contexts' last calls (arena_capacity_bytes: their sum, what they hold). */
static PyObject* program_memory_stats(StaxProgramObject* self) {
  stax_memory_stats_t all;
  memset(&all, 0, sizeof(all));
  for (int32_t c = 0; c < self->idle_count; c++) {
    stax_memory_stats_t s;
    stax_status_t status = stax_context_memory_stats(self->idle[c], &s);
    if (status) return stax_py_raise(status, "memory statistics");
    all.planned = all.planned || s.planned;
    all.planned_values = s.planned_values;
    all.slots = s.slots;
    all.inplace_values = s.inplace_values;
    all.calls += s.calls;
    all.arena_capacity_bytes += s.arena_capacity_bytes;
#define STAX_PY_MAX(field) if (s.field > all.field) all.field = s.field;
    STAX_PY_MAX(arena_bytes) STAX_PY_MAX(arena_peak_bytes) STAX_PY_MAX(temp_bytes)
    STAX_PY_MAX(temp_allocations) STAX_PY_MAX(output_allocations) STAX_PY_MAX(arena_grows)
    STAX_PY_MAX(fallbacks) STAX_PY_MAX(inplace)
#undef STAX_PY_MAX
  }
  return Py_BuildValue("{s:O,s:i,s:i,s:i,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "planned",
                       all.planned ? Py_True : Py_False, "planned_values", (int)all.planned_values,
                       "slots", (int)all.slots, "inplace_values", (int)all.inplace_values,
                       "calls", (unsigned long long)all.calls,
                       "arena_bytes", (unsigned long long)all.arena_bytes,
                       "arena_peak_bytes", (unsigned long long)all.arena_peak_bytes,
                       "arena_capacity_bytes", (unsigned long long)all.arena_capacity_bytes,
                       "temp_bytes", (unsigned long long)all.temp_bytes,
                       "temp_allocations", (unsigned long long)all.temp_allocations,
                       "output_allocations", (unsigned long long)all.output_allocations,
                       "arena_grows", (unsigned long long)all.arena_grows,
                       "fallbacks", (unsigned long long)all.fallbacks,
                       "inplace", (unsigned long long)all.inplace);
}

/* Counters summed over the idle contexts (a context that is running at this moment is left
 * out; its counts show up once it is back). */
static PyObject* program_counters(StaxProgramObject* self, PyObject* unused) {
  (void)unused;
  PyObject* result = NULL;
  pthread_mutex_lock(&self->lock);
  int32_t count = self->idle_count;
  const uint64_t** counts = calloc((size_t)(count ? count : 1), sizeof(*counts));
  const uint64_t** nanos = calloc((size_t)(count ? count : 1), sizeof(*nanos));
  const uint64_t** segments = calloc((size_t)(count ? count : 1), sizeof(*segments));
  if (counts && nanos && segments) {
    for (int32_t c = 0; c < count; c++) {
      counts[c] = stax_context_instruction_counts(self->idle[c]);
      nanos[c] = stax_context_instruction_nanos(self->idle[c]);
      segments[c] = stax_context_segment_counts(self->idle[c]);
    }
    int32_t instructions = count ? stax_context_instruction_count(self->idle[0]) : 0;
    int32_t segment_count = count ? stax_context_segment_count(self->idle[0]) : 0;
    PyObject* ins = program_counter_list(counts, count, instructions);
    PyObject* ns = self->options.profile_timing ? program_counter_list(nanos, count, instructions)
                                                : (Py_INCREF(Py_None), Py_None);
    PyObject* seg = program_counter_list(segments, count, segment_count);
    PyObject* memory = ins && ns && seg ? program_memory_stats(self) : NULL;
    if (ins && ns && seg && memory) {
      result = Py_BuildValue("{s:K,s:K,s:i,s:N,s:N,s:N,s:N}", "runs",
                             (unsigned long long)self->runs, "failed_runs",
                             (unsigned long long)self->failures, "contexts",
                             (int)self->all_count, "instruction_counts", ins,
                             "instruction_nanos", ns, "segment_counts", seg, "memory", memory);
    } else {
      Py_XDECREF(ins);
      Py_XDECREF(ns);
      Py_XDECREF(seg);
      Py_XDECREF(memory);
    }
  } else {
    PyErr_NoMemory();
  }
  pthread_mutex_unlock(&self->lock);
  free(counts);
  free(nanos);
  free(segments);
  return result;
}

/* ---- JIT ------------------------------------------------------------------------------------ */

/* [ {entries, hits, full_hits, partial_hits, misses, compiles, failures, evictions,
 *    compile_ms, versions, signatures, generic_versions, exact_versions, generic_compile_ms,
 *    exact_compile_ms, promotions, promoted_groups_kept, promoted_groups_dropped,
 *    dtype_fallbacks} ]
 * per bytecode segment (the kernel cache belongs to the program: all contexts together). */
static PyObject* program_jit_stats(StaxProgramObject* self, PyObject* unused) {
  (void)unused;
  int32_t count = stax_program_segment_count(self->program);
  PyObject* list = PyList_New(count > 0 ? count : 0);
  if (!list) return NULL;
  for (int32_t s = 0; s < count; s++) {
    stax_jit_segment_stats_t st;
    memset(&st, 0, sizeof(st));
    stax_status_t status = stax_program_jit_stats(self->program, s, &st);
    if (status) {
      Py_DECREF(list);
      return stax_py_raise(status, "jit statistics");
    }
    PyObject* item = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:i,s:i,s:i,s:i,s:d,s:d,s:K,s:K,s:K,s:K}", "entries",
        (unsigned long long)st.entries, "hits", (unsigned long long)st.hits, "full_hits",
        (unsigned long long)st.full_hits, "partial_hits", (unsigned long long)st.partial_hits,
        "misses", (unsigned long long)st.misses, "compiles", (unsigned long long)st.compiles,
        "failures", (unsigned long long)st.failures, "evictions",
        (unsigned long long)st.evictions, "compile_ms", st.compile_ms, "versions",
        (int)st.versions, "signatures", (int)st.signatures, "generic_versions",
        (int)st.generic_versions, "exact_versions", (int)st.exact_versions,
        "generic_compile_ms", st.generic_compile_ms, "exact_compile_ms", st.exact_compile_ms,
        "promotions", (unsigned long long)st.promotions, "promoted_groups_kept",
        (unsigned long long)st.promoted_groups_kept, "promoted_groups_dropped",
        (unsigned long long)st.promoted_groups_dropped, "dtype_fallbacks",
        (unsigned long long)st.dtype_fallbacks);
    if (!item) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, s, item);
  }
  return list;
}

/* jit_calls() -> {compiled, partial, interpreted}: how the program's calls ran. */
static PyObject* program_jit_calls(StaxProgramObject* self, PyObject* unused) {
  (void)unused;
  stax_jit_call_stats_t calls;
  stax_status_t status = stax_program_jit_call_stats(self->program, &calls);
  if (status) return stax_py_raise(status, "jit call statistics");
  return Py_BuildValue("{s:K,s:K,s:K}", "compiled", (unsigned long long)calls.compiled,
                       "partial", (unsigned long long)calls.partial, "interpreted",
                       (unsigned long long)calls.interpreted);
}

/* jit_sources(assembly=False) -> str: the generated code of every kernel compiled so far. */
static PyObject* program_jit_sources(StaxProgramObject* self, PyObject* args) {
  int assembly = 0;
  if (!PyArg_ParseTuple(args, "|p:jit_sources", &assembly)) return NULL;
  char* text = NULL;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  if (!out) return PyErr_SetFromErrno(PyExc_OSError);
  stax_status_t status;
  Py_BEGIN_ALLOW_THREADS
  status = stax_program_jit_sources(self->program, assembly != 0, out);
  Py_END_ALLOW_THREADS
  fclose(out);
  if (status) {
    free(text);
    return stax_py_raise(status, "jit sources");
  }
  PyObject* result = PyUnicode_DecodeUTF8(text ? text : "", (Py_ssize_t)size, "replace");
  free(text);
  return result;
}

static PyObject* program_jit_drain(StaxProgramObject* self, PyObject* unused) {
  (void)unused;
  Py_BEGIN_ALLOW_THREADS
  stax_program_jit_drain(self->program);
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

static PyObject* program_get_jit_mode(StaxProgramObject* self, void* c) {
  (void)c;
  return PyLong_FromLong((long)self->options.jit);
}

#ifndef STAX_PY_HAVE_PROGRAM_IO
static PyObject* program_save(StaxProgramObject* self, PyObject* arg) {
  (void)self, (void)arg;
  return stax_py_raise_code(STAX_UNIMPLEMENTED,
                            "this build of the stax library cannot save programs");
}

static PyObject* program_serialize(StaxProgramObject* self, PyObject* unused) {
  return program_save(self, unused);
}
#else
static PyObject* program_save(StaxProgramObject* self, PyObject* arg) {
  PyObject* path = NULL;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  stax_status_t status = stax_program_save(self->program, PyBytes_AS_STRING(path));
  Py_DECREF(path);
  if (status) return stax_py_raise(status, NULL);
  Py_RETURN_NONE;
}

static PyObject* program_serialize(StaxProgramObject* self, PyObject* unused) {
  (void)unused;
  void* data = NULL;
  size_t size = 0;
  stax_status_t status = stax_program_serialize(self->program, program_alloc(), &data, &size);
  if (status) return stax_py_raise(status, NULL);
  PyObject* result = PyBytes_FromStringAndSize(data, (Py_ssize_t)size);
  stax_allocator_free(program_alloc(), data, size);
  return result;
}
#endif

/* pass_report(): what the graph passes did at compile time, as a dict (None for a loaded
 * program). */
static PyObject* program_pass_report(StaxProgramObject* self, PyObject* unused) {
  (void)unused;
  int32_t before = 0, after = 0, rounds = 0, removed = 0;
  stax_program_pass_totals(self->program, &before, &after, &rounds, &removed);
  if (before < 0) Py_RETURN_NONE;
  int32_t count = stax_program_pass_report_count(self->program);
  PyObject* runs = PyList_New(count);
  if (!runs) return NULL;
  for (int32_t k = 0; k < count; k++) {
    stax_pass_report_t report;
    stax_status_t status = stax_program_pass_report(self->program, k, &report);
    if (status) {
      Py_DECREF(runs);
      return stax_py_raise(status, NULL);
    }
    PyObject* run = Py_BuildValue("{s:s,s:i,s:i,s:i,s:i,s:s}", "pass", stax_pass_name(report.pass),
                                  "round", report.round, "nodes_before", report.nodes_before,
                                  "nodes_after", report.nodes_after, "rewrites", report.rewrites,
                                  "detail", report.detail);
    if (!run) {
      Py_DECREF(runs);
      return NULL;
    }
    PyList_SET_ITEM(runs, k, run);
  }
  return Py_BuildValue("{s:i,s:i,s:i,s:i,s:N}", "nodes_before", before, "nodes_after", after,
                       "rounds", rounds, "instructions_removed", removed, "runs", runs);
}

static PyObject* program_input_dtypes(StaxProgramObject* self, void* closure) {
  (void)closure;
  PyObject* list = PyTuple_New(self->input_count);
  for (int32_t i = 0; list && i < self->input_count; i++)
    PyTuple_SET_ITEM(list, i, PyUnicode_FromString(stax_dtype_name(self->input_dtypes[i])));
  return list;
}

static PyObject* program_output_dtypes(StaxProgramObject* self, void* closure) {
  (void)closure;
  PyObject* list = PyTuple_New(self->output_count);
  for (int32_t o = 0; list && o < self->output_count; o++)
    PyTuple_SET_ITEM(list, o,
                     PyUnicode_FromString(stax_dtype_name(stax_program_output_dtype(self->program, o))));
  return list;
}

#define PROGRAM_TUPLE_GETTER(field)                                        \
  static PyObject* program_get_##field(StaxProgramObject* self, void* c) { \
    (void)c;                                                               \
    Py_INCREF(self->field);                                                \
    return self->field;                                                    \
  }
PROGRAM_TUPLE_GETTER(input_names)
PROGRAM_TUPLE_GETTER(output_names)
PROGRAM_TUPLE_GETTER(input_shapes)
PROGRAM_TUPLE_GETTER(output_shapes)

static PyObject* program_get_output_readonly(StaxProgramObject* self, void* c) {
  (void)c;
  PyObject* list = PyTuple_New(self->output_count);
  for (int32_t o = 0; list && o < self->output_count; o++)
    PyTuple_SET_ITEM(list, o, PyBool_FromLong(self->output_readonly[o]));
  return list;
}

static PyGetSetDef program_getset[] = {
    {"input_names", (getter)program_get_input_names, NULL, "Input names, in call order.", NULL},
    {"output_names", (getter)program_get_output_names, NULL, "Output names.", NULL},
    {"input_shapes", (getter)program_get_input_shapes, NULL,
     "Declared input shapes: ints and symbol expressions as strings.", NULL},
    {"output_shapes", (getter)program_get_output_shapes, NULL, "Declared output shapes.", NULL},
    {"input_dtypes", (getter)program_input_dtypes, NULL, "Input dtype names.", NULL},
    {"output_dtypes", (getter)program_output_dtypes, NULL, "Output dtype names.", NULL},
    {"output_readonly", (getter)program_get_output_readonly, NULL,
     "Per output: True when it is (a view of) a program constant, returned read-only.", NULL},
    {"jit_mode", (getter)program_get_jit_mode, NULL,
     "The JIT mode of this program's contexts: 0 off, 1 background, 2 sync.", NULL},
    {"num_threads", (getter)program_get_num_threads, NULL,
     "Threads of the pool this program's calls run on (its own, or the process-wide one).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef program_methods[] = {
    {"run", (PyCFunction)program_run, METH_VARARGS,
     "run(inputs, mode=0, select=None): inputs as a sequence or a {name: array} dict; mode 0 "
     "numpy (one array or a tuple), 1 dict by output name, 2 tuple of stax Tensors, 3 tuple of "
     "arrays, 4 dict of stax Tensors; select: output indices to return, in order."},
    {"_configure", (PyCFunction)(void (*)(void))program_configure, METH_VARARGS | METH_KEYWORDS,
     "_configure(num_threads=-1, jit_threshold=0, jit_max_versions=0, jit_verify=False, "
     "jit_tolerance=0.0, jit_generic=0, jit_cache_dir=None, trace=False): execution options, "
     "before the first call."},
    {"_trace_json", (PyCFunction)program_trace_json, METH_NOARGS,
     "_trace_json() -> list of str: each context's trace (Chrome trace-event JSON)."},
    {"disassemble", (PyCFunction)program_disassemble, METH_VARARGS,
     "disassemble(forms=3) -> str: 1 extended form, 2 compact form, 3 both."},
    {"counters", (PyCFunction)program_counters, METH_NOARGS,
     "Run and profiling counters summed over this program's execution contexts."},
    {"jit_calls", (PyCFunction)program_jit_calls, METH_NOARGS,
     "How the program's calls ran: {compiled, partial, interpreted} (every group with a "
     "lowering ran a kernel, some did, none did)."},
    {"jit_stats", (PyCFunction)program_jit_stats, METH_NOARGS,
     "Per segment JIT statistics (a list of dicts), over all contexts."},
    {"jit_sources", (PyCFunction)program_jit_sources, METH_VARARGS,
     "jit_sources(assembly=False) -> str: LLVM IR (or assembly) of the compiled kernels."},
    {"jit_drain", (PyCFunction)program_jit_drain, METH_NOARGS,
     "Waits until the background JIT compiler's queue is empty."},
    {"pass_report", (PyCFunction)program_pass_report, METH_NOARGS,
     "pass_report(): what the graph passes did at compile time (None for a loaded program)."},
    {"save", (PyCFunction)program_save, METH_O, "save(path): writes the compiled program."},
    {"serialize", (PyCFunction)program_serialize, METH_NOARGS, "The compiled program as bytes."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject StaxProgram_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stax._C.Program",
    .tp_basicsize = sizeof(StaxProgramObject),
    .tp_dealloc = (destructor)program_dealloc,
    .tp_call = (ternaryfunc)program_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A compiled stax program (base of stax.Kernel and stax.Model).",
    .tp_methods = program_methods,
    .tp_getset = program_getset,
};

int stax_py_program_init_type(PyObject* module) {
  if (PyType_Ready(&StaxProgram_Type) < 0) return -1;
  Py_INCREF(&StaxProgram_Type);
  if (PyModule_AddObject(module, "Program", (PyObject*)&StaxProgram_Type) < 0) {
    Py_DECREF(&StaxProgram_Type);
    return -1;
  }
  return 0;
}
