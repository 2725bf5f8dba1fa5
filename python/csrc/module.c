/* stax._C: module init and module-level functions (op table, dtypes, version, ONNX import,
 * DLPack and buffer import, thread settings). The Python package (python/stax/) builds the
 * user-facing API on top of these. */
#include <stdlib.h>
#include <string.h>

#include "stax_py.h"

PyObject* stax_py_load_program(PyObject* module, PyObject* args, PyObject* kwargs);

static PyObject* module_set_hooks(PyObject* module, PyObject* args) {
  (void)module;
  PyObject *asarray = NULL, *coerce = NULL, *bfloat16 = NULL;
  if (!PyArg_ParseTuple(args, "OOO:_set_hooks", &asarray, &coerce, &bfloat16)) return NULL;
  Py_INCREF(asarray);
  Py_INCREF(coerce);
  Py_INCREF(bfloat16);
  Py_XSETREF(stax_py_hook_asarray, asarray);
  Py_XSETREF(stax_py_hook_coerce, coerce);
  Py_XSETREF(stax_py_hook_bfloat16, bfloat16);
  Py_RETURN_NONE;
}

static PyObject* module_version(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  return PyUnicode_FromString(stax_version());
}

/* [(name, flags), ...] for every op in ops.def, in table order. */
static PyObject* module_ops(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  PyObject* list = PyList_New(STAX_OP_COUNT);
  if (!list) return NULL;
  for (int op = 0; op < STAX_OP_COUNT; op++) {
    PyObject* item = Py_BuildValue("(sI)", stax_op_name((stax_op_t)op),
                                   (unsigned int)stax_op_flags((stax_op_t)op));
    if (!item) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, op, item);
  }
  return list;
}

static PyObject* module_op_flags(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  return Py_BuildValue("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "elementwise", STAX_OPF_ELEMENTWISE,
                       "broadcast", STAX_OPF_BROADCAST, "reduction", STAX_OPF_REDUCTION, "view",
                       STAX_OPF_VIEW, "data_dependent", STAX_OPF_DATA_DEPENDENT, "control",
                       STAX_OPF_CONTROL, "shape_only", STAX_OPF_SHAPE_ONLY);
}

/* [(name, itemsize, onnx code), ...] */
static PyObject* module_dtypes(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  PyObject* list = PyList_New(STAX_DTYPE_COUNT);
  if (!list) return NULL;
  for (int d = 0; d < STAX_DTYPE_COUNT; d++) {
    PyObject* item = Py_BuildValue("(sni)", stax_dtype_name((stax_dtype_t)d),
                                   (Py_ssize_t)stax_dtype_size((stax_dtype_t)d),
                                   (int)stax_dtype_to_onnx((stax_dtype_t)d));
    if (!item) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, d, item);
  }
  return list;
}

static PyObject* module_parse_dtype(PyObject* module, PyObject* arg) {
  (void)module;
  stax_dtype_t dtype = stax_py_parse_dtype(arg);
  if (dtype == STAX_DTYPE_INVALID) return NULL;
  return PyUnicode_FromString(stax_dtype_name(dtype));
}

static PyObject* module_from_dlpack(PyObject* module, PyObject* arg) {
  (void)module;
  PyObject* tensor = stax_py_tensor_from_dlpack_object(arg);
  if (!tensor && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_Format(PyExc_TypeError, "from_dlpack: %S", value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
  }
  return tensor;
}

static PyObject* module_asarray(PyObject* module, PyObject* args, PyObject* kwargs) {
  (void)module;
  static char* keywords[] = {"obj", "dtype", NULL};
  PyObject *obj = NULL, *dtype_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:asarray", keywords, &obj, &dtype_obj))
    return NULL;
  stax_dtype_t dtype = STAX_DTYPE_INVALID;
  if (dtype_obj != Py_None) {
    dtype = stax_py_parse_dtype(dtype_obj);
    if (dtype == STAX_DTYPE_INVALID) return NULL;
  }
  stax_tensor_t* tensor = NULL;
  if (stax_py_to_tensor(obj, dtype, "asarray", &tensor) < 0) return NULL;
  if (dtype != STAX_DTYPE_INVALID && stax_tensor_dtype(tensor) != dtype) {
    stax_dtype_t found = stax_tensor_dtype(tensor);
    stax_tensor_release(tensor);
    return stax_py_raise_code(STAX_DTYPE_MISMATCH,
                              "asarray: the array is %s, not %s (stax does not cast silently)",
                              stax_dtype_name(found), stax_dtype_name(dtype));
  }
  return stax_py_tensor_new(tensor, 0);
}

/* Reads {name: int} symbol bindings into a malloc'd array (names borrowed from the dict). */
static int module_bindings(PyObject* dict, stax_onnx_symbol_binding_t** out, int32_t* out_count) {
  *out = NULL;
  *out_count = 0;
  if (dict == Py_None) return 0;
  if (!PyDict_Check(dict)) {
    PyErr_SetString(PyExc_TypeError, "symbols must be a dict {name: int}");
    return -1;
  }
  Py_ssize_t n = PyDict_Size(dict);
  stax_onnx_symbol_binding_t* bindings = calloc((size_t)(n ? n : 1), sizeof(*bindings));
  if (!bindings) {
    PyErr_NoMemory();
    return -1;
  }
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  int32_t i = 0;
  while (PyDict_Next(dict, &pos, &key, &value)) {
    const char* name = PyUnicode_AsUTF8(key);
    long long v = name ? PyLong_AsLongLong(value) : -1;
    if (!name || (v == -1 && PyErr_Occurred())) {
      free(bindings);
      return -1;
    }
    bindings[i].name = name;
    bindings[i].value = (int64_t)v;
    i++;
  }
  *out = bindings;
  *out_count = i;
  return 0;
}

static PyObject* module_import_onnx(PyObject* module, PyObject* args, PyObject* kwargs) {
  (void)module;
  static char* keywords[] = {"source", "symbols", "dims_may_be_zero", "name", NULL};
  PyObject *source = NULL, *symbols = Py_None;
  int dims_may_be_zero = 0;
  const char* name = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|Ops:import_onnx", keywords, &source,
                                   &symbols, &dims_may_be_zero, &name))
    return NULL;
  stax_onnx_import_options_t options = {0};
  stax_onnx_symbol_binding_t* bindings = NULL;
  if (module_bindings(symbols, &bindings, &options.symbol_binding_count) < 0) return NULL;
  options.symbol_bindings = bindings;
  options.dims_may_be_zero = dims_may_be_zero != 0;
  stax_graph_t* graph = NULL;
  stax_status_t status = STAX_OK;
  if (PyBytes_Check(source)) {
    status = stax_onnx_import_memory(stax_allocator_system(), PyBytes_AS_STRING(source),
                                     (size_t)PyBytes_GET_SIZE(source), name, &options, &graph);
  } else {
    PyObject* path = NULL;
    if (!PyUnicode_FSConverter(source, &path)) {
      free(bindings);
      return NULL;
    }
    const char* path_text = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    status = stax_onnx_import_file(stax_allocator_system(), path_text, &options, &graph);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
  }
  free(bindings);
  if (status) return stax_py_raise(status, NULL);
  return stax_py_graph_new(graph);
}

static PyObject* module_set_num_threads(PyObject* module, PyObject* arg) {
  (void)module;
  long count = PyLong_AsLong(arg);
  if (count == -1 && PyErr_Occurred()) return NULL;
  if (count < 0) {
    PyErr_SetString(PyExc_ValueError, "thread count must be >= 0 (0: one per core)");
    return NULL;
  }
  return PyBool_FromLong(stax_threadpool_set_default_threads((int32_t)count));
}

static PyObject* module_num_threads(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  return PyLong_FromLong(stax_threadpool_thread_count(stax_threadpool_default()));
}

static PyObject* module_build_info(PyObject* self, PyObject* unused) {
  (void)self, (void)unused;
  stax_build_info_t info;
  Py_BEGIN_ALLOW_THREADS
  stax_build_info(&info); /* may start LLVM */
  Py_END_ALLOW_THREADS
  PyObject* jit = info.jit_available
                      ? Py_BuildValue("{s:s,s:s,s:i,s:O,s:(ii)}", "backend", info.jit_backend,
                                      "cpu", info.jit_cpu, "vector_bits", info.jit_vector_bits,
                                      "fma", info.jit_fma ? Py_True : Py_False, "matmul_tile",
                                      info.jit_matmul_tile_rows, info.jit_matmul_tile_cols)
                      : (Py_INCREF(Py_None), Py_None);
  if (!jit) return NULL;
  PyObject* cache = info.jit_cache ? PyUnicode_DecodeFSDefault(info.jit_cache_dir)
                                   : (Py_INCREF(Py_None), Py_None);
  if (!cache) {
    Py_DECREF(jit);
    return NULL;
  }
  PyObject* cuda = Py_BuildValue(
      "{s:O,s:i,s:i,s:s,s:(ii),s:s,s:O,s:(ii),s:s,s:s}", "driver",
      info.cuda_driver ? Py_True : Py_False, "driver_version", (int)info.cuda_driver_version,
      "device_count", (int)info.cuda_device_count, "device_name", info.cuda_device_name,
      "compute_capability", (int)info.cuda_compute_major, (int)info.cuda_compute_minor,
      "driver_unavailable", info.cuda_driver_unavailable, "nvrtc",
      info.cuda_nvrtc ? Py_True : Py_False, "nvrtc_version", (int)info.cuda_nvrtc_major,
      (int)info.cuda_nvrtc_minor, "nvrtc_path", info.cuda_nvrtc_path, "nvrtc_unavailable",
      info.cuda_nvrtc_unavailable);
  if (!cuda) {
    Py_DECREF(jit);
    Py_DECREF(cache);
    return NULL;
  }
  return Py_BuildValue("{s:s,s:s,s:s,s:s,s:(ii),s:N,s:s,s:N,s:O,s:s,s:N}", "version",
                       info.version, "isa", stax_isa_name(info.isa), "isa_detected",
                       stax_isa_name(info.isa_detected), "gemm", info.gemm_variant, "gemm_tile",
                       info.gemm_tile_rows, info.gemm_tile_cols, "jit", jit, "jit_unavailable",
                       info.jit_unavailable, "jit_cache_dir", cache, "gpu",
                       info.gpu_available ? Py_True : Py_False, "gpu_unavailable",
                       info.gpu_unavailable, "cuda", cuda);
}

/* _C.check_target(name): None for a target programs can be compiled for, else the error
 * stax_target_check gives (UnimplementedError naming what a CUDA target lacks). */
static PyObject* module_check_target(PyObject* self, PyObject* arg) {
  (void)self;
  const char* name = PyUnicode_AsUTF8(arg);
  if (!name) return NULL;
  stax_status_t status;
  Py_BEGIN_ALLOW_THREADS
  status = stax_target_check(name); /* may dlopen the CUDA libraries */
  Py_END_ALLOW_THREADS
  if (status != STAX_OK) return stax_py_raise(status, NULL);
  Py_RETURN_NONE;
}

static PyObject* module_passes(PyObject* self, PyObject* unused) {
  (void)self, (void)unused;
  PyObject* result = PyDict_New();
  for (int32_t p = 0; result && p < STAX_PASS_COUNT; p++) {
    PyObject* summary = PyUnicode_FromString(stax_pass_summary((stax_pass_t)p));
    if (!summary || PyDict_SetItemString(result, stax_pass_name((stax_pass_t)p), summary) < 0) {
      Py_XDECREF(summary);
      Py_DECREF(result);
      return NULL;
    }
    Py_DECREF(summary);
  }
  return result;
}

static PyObject* module_isa(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  return Py_BuildValue("(ss)", stax_isa_name(stax_isa()), stax_isa_name(stax_isa_detected()));
}

static PyObject* module_set_isa_cap(PyObject* module, PyObject* arg) {
  (void)module;
  const char* name = NULL;
  if (arg != Py_None) {
    name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
  }
  stax_status_t status = stax_set_isa_cap(name);
  if (status != STAX_OK) return stax_py_raise(status, NULL);
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"_set_hooks", module_set_hooks, METH_VARARGS, "_set_hooks(asarray, coerce, bfloat16)"},
    {"version", module_version, METH_NOARGS, "The C library version."},
    {"ops", module_ops, METH_NOARGS, "[(op name, flags)] for every op stax has."},
    {"op_flags", module_op_flags, METH_NOARGS, "Names of the op flag bits."},
    {"dtypes", module_dtypes, METH_NOARGS, "[(dtype name, itemsize, ONNX code)]."},
    {"parse_dtype", module_parse_dtype, METH_O, "Canonical dtype name of a dtype-like object."},
    {"from_dlpack", module_from_dlpack, METH_O,
     "from_dlpack(obj) -> Tensor: imports anything with __dlpack__ (or a capsule), zero copy."},
    {"asarray", (PyCFunction)(void (*)(void))module_asarray, METH_VARARGS | METH_KEYWORDS,
     "asarray(obj, dtype=None) -> Tensor: zero copy when the memory allows."},
    {"import_onnx", (PyCFunction)(void (*)(void))module_import_onnx, METH_VARARGS | METH_KEYWORDS,
     "import_onnx(path_or_bytes, symbols=None, dims_may_be_zero=False, name=None) -> Graph"},
    {"compile_program", (PyCFunction)(void (*)(void))stax_py_compile_program,
     METH_VARARGS | METH_KEYWORDS,
     "compile_program(graph, cls, static_variants=True, profile_points=True, "
     "dispatch='default', profile_timing=False, call_mode=0, jit=0) -> cls instance; jit: 0 off, "
     "1 background, 2 sync"},
    {"load_program", (PyCFunction)(void (*)(void))stax_py_load_program,
     METH_VARARGS | METH_KEYWORDS,
     "load_program(path_or_bytes, cls, dispatch='default', profile_timing=False, call_mode=0, "
     "jit=0)"},
    {"set_num_threads", module_set_num_threads, METH_O,
     "Sets the default thread pool's size; False when the pool already exists."},
    {"num_threads", module_num_threads, METH_NOARGS, "Threads in the default pool."},
    {"isa", module_isa, METH_NOARGS, "(level in use, the CPU's level)."},
    {"passes", module_passes, METH_NOARGS, "{graph pass name: what it rewrites}, in pipeline order."},
    {"build_info", module_build_info, METH_NOARGS, "What this build and machine give programs."},
    {"check_target", module_check_target, METH_O,
     "None when programs compile for the target, else raises why not."},
    {"set_isa_cap", module_set_isa_cap, METH_O, "Caps the ISA level (None: no cap)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef stax_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "stax._C",
    .m_doc = "The stax C library, for the stax Python package.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__C(void) {
  PyObject* module = PyModule_Create(&stax_module);
  if (!module) return NULL;
  if (stax_py_errors_init(module) < 0 || stax_py_tensor_init_type(module) < 0 ||
      stax_py_graph_init_type(module) < 0 || stax_py_program_init_type(module) < 0) {
    Py_DECREF(module);
    return NULL;
  }
  if (PyModule_AddIntConstant(module, "MAX_RANK", STAX_MAX_RANK) < 0 ||
      PyModule_AddIntConstant(module, "DISASSEMBLE_EXTENDED", STAX_DISASSEMBLE_EXTENDED) < 0 ||
      PyModule_AddIntConstant(module, "DISASSEMBLE_COMPACT", STAX_DISASSEMBLE_COMPACT) < 0) {
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
