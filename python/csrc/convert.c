/* Python objects -> stax tensors, zero copy whenever the memory allows it.
 *
 * Order of attempts: a stax Tensor (used as is), the buffer protocol (numpy arrays, memoryview,
 * array.array, ...), __dlpack__ (PyTorch, JAX, CuPy-on-host, ...), and last numpy.asarray for
 * lists and scalars. A buffer is wrapped in place when stax knows its dtype, its data is
 * aligned to the element size and its strides are whole elements; the Py_buffer is held until
 * stax drops the last reference to the memory (which may be after the run, when an output is a
 * view of an input). Other buffers (big-endian, unaligned, odd strides) are copied by numpy into
 * a fresh native array, never rejected; dtypes stax does not have (complex, object, strings)
 * are a DtypeError naming the argument. */
#include <stdint.h>
#include <string.h>

#include "stax_py.h"

PyObject* stax_py_hook_asarray = NULL;
PyObject* stax_py_hook_coerce = NULL;
PyObject* stax_py_hook_bfloat16 = NULL;

stax_dtype_t stax_py_format_dtype(const char* format, Py_ssize_t itemsize, int* non_native) {
  *non_native = 0;
  if (!format) return STAX_DTYPE_UINT8; /* "B" is implied when no format is given */
  const char* f = format;
  static const int little_endian_host = (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
  if (*f == '@' || *f == '=') {
    f++;
  } else if (*f == '<') {
    if (!little_endian_host) *non_native = 1;
    f++;
  } else if (*f == '>' || *f == '!') {
    if (little_endian_host) *non_native = 1;
    f++;
  }
  if (f[0] == '\0' || f[1] != '\0') return STAX_DTYPE_INVALID; /* structs, counts, complex */
  switch (f[0]) {
    case '?':
      return itemsize == 1 ? STAX_DTYPE_BOOL : STAX_DTYPE_INVALID;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
      switch (itemsize) {
        case 1: return STAX_DTYPE_INT8;
        case 2: return STAX_DTYPE_INT16;
        case 4: return STAX_DTYPE_INT32;
        case 8: return STAX_DTYPE_INT64;
        default: return STAX_DTYPE_INVALID;
      }
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N':
      switch (itemsize) {
        case 1: return STAX_DTYPE_UINT8;
        case 2: return STAX_DTYPE_UINT16;
        case 4: return STAX_DTYPE_UINT32;
        case 8: return STAX_DTYPE_UINT64;
        default: return STAX_DTYPE_INVALID;
      }
    case 'e': return itemsize == 2 ? STAX_DTYPE_FLOAT16 : STAX_DTYPE_INVALID;
    case 'f': return itemsize == 4 ? STAX_DTYPE_FLOAT32 : STAX_DTYPE_INVALID;
    case 'd': return itemsize == 8 ? STAX_DTYPE_FLOAT64 : STAX_DTYPE_INVALID;
    default: return STAX_DTYPE_INVALID;
  }
}

stax_dtype_t stax_py_parse_dtype(PyObject* obj) {
  PyObject* text = NULL;
  if (PyUnicode_Check(obj)) {
    text = obj;
    Py_INCREF(text);
  } else {
    /* numpy dtypes and scalar types both answer numpy.dtype(x).name in Python; here, a dtype
     * object has .name, and a type like numpy.float32 has __name__. */
    text = PyObject_GetAttrString(obj, "name");
    if (!text || !PyUnicode_Check(text)) {
      Py_XDECREF(text);
      PyErr_Clear();
      text = PyObject_GetAttrString(obj, "__name__");
      if (!text || !PyUnicode_Check(text)) {
        Py_XDECREF(text);
        PyErr_Clear();
        text = NULL;
      }
    }
  }
  stax_dtype_t dtype = STAX_DTYPE_INVALID;
  if (text) {
    const char* name = PyUnicode_AsUTF8(text);
    if (name) dtype = stax_dtype_from_name(strcmp(name, "bool_") == 0 ? "bool" : name);
  }
  if (dtype == STAX_DTYPE_INVALID && !PyErr_Occurred()) {
    PyErr_Format(PyExc_TypeError,
                 "unknown dtype %R: stax has float32, float64, float16, bfloat16, int8, int16, "
                 "int32, int64, uint8, uint16, uint32, uint64 and bool",
                 text ? text : obj);
  }
  Py_XDECREF(text);
  return dtype;
}

/* ---- buffer wrapping ---------------------------------------------------------------------- */

typedef struct {
  Py_buffer view;
} stax_py_held_buffer_t;

static int stax_py_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

/* Runs when stax drops the last reference to the memory; may be on a thread without the GIL
 * (a pool worker, or the caller during a run with the GIL released). */
static void stax_py_release_held_buffer(void* release_ctx, void* data) {
  (void)data;
  stax_py_held_buffer_t* held = (stax_py_held_buffer_t*)release_ctx;
  if (!Py_IsInitialized() || stax_py_finalizing()) return; /* the interpreter is going away */
  if (PyGILState_Check()) { /* the common case: the last reference goes after a run */
    PyBuffer_Release(&held->view);
    PyMem_RawFree(held);
    return;
  }
  PyGILState_STATE state = PyGILState_Ensure();
  PyBuffer_Release(&held->view);
  PyMem_RawFree(held);
  PyGILState_Release(state);
}

/* Non-native byte order, misalignment or strides that are not whole elements: numpy copies. */
static int stax_py_buffer_needs_copy(const Py_buffer* view, int non_native) {
  if (non_native) return 1;
  Py_ssize_t item = view->itemsize;
  if (item > 1 && ((uintptr_t)view->buf % (uintptr_t)item) != 0) return 1;
  if (view->strides) {
    for (int d = 0; d < view->ndim; d++)
      if (view->strides[d] % item != 0) return 1;
  }
  return 0;
}

/* Wraps a buffer the caller has checked; takes ownership of *view on success and on failure
 * (released either way). */
static int stax_py_wrap_buffer(Py_buffer* view, stax_dtype_t dtype, const char* what,
                               stax_tensor_t** out_tensor) {
  int32_t rank = view->ndim;
  int64_t dims[STAX_MAX_RANK], strides[STAX_MAX_RANK];
  Py_ssize_t item = view->itemsize;
  int64_t lowest = 0, highest = 0, count = 1;
  for (int32_t d = 0; d < rank; d++) {
    dims[d] = view->shape ? (int64_t)view->shape[d] : (int64_t)(view->len / item);
    count *= dims[d];
  }
  if (view->strides) {
    for (int32_t d = 0; d < rank; d++) strides[d] = (int64_t)(view->strides[d] / item);
  } else {
    int64_t step = 1;
    for (int32_t d = rank - 1; d >= 0; d--) {
      strides[d] = step;
      step *= dims[d];
    }
  }
  if (count > 0) {
    for (int32_t d = 0; d < rank; d++) {
      if (strides[d] < 0) lowest += (dims[d] - 1) * strides[d];
      else highest += (dims[d] - 1) * strides[d];
    }
  }
  stax_py_held_buffer_t* held = PyMem_RawMalloc(sizeof(*held));
  if (!held) {
    PyBuffer_Release(view);
    PyErr_NoMemory();
    return -1;
  }
  held->view = *view;
  char* first = (char*)view->buf;
  size_t size_bytes = count > 0 ? (size_t)(highest - lowest + 1) * (size_t)item : 0;
  stax_buffer_t* buffer = NULL;
  stax_status_t status =
      stax_buffer_wrap(stax_allocator_system(), first + lowest * item, size_bytes,
                       stax_py_release_held_buffer, held, &buffer);
  if (status) {
    PyBuffer_Release(&held->view);
    PyMem_RawFree(held);
    stax_py_raise(status, what);
    return -1;
  }
  /* From here the buffer owns `held`: releasing it releases the Py_buffer. */
  status = stax_tensor_create_view(stax_allocator_system(), buffer, dtype, rank, dims, strides,
                                   -lowest, out_tensor);
  stax_buffer_release(buffer);
  if (status) {
    stax_py_raise(status, what);
    return -1;
  }
  return 0;
}

static PyObject* stax_py_dtype_description(PyObject* obj, const char* format) {
  PyObject* numpy_dtype = PyObject_GetAttrString(obj, "dtype");
  if (numpy_dtype) {
    PyObject* text = PyObject_Str(numpy_dtype);
    Py_DECREF(numpy_dtype);
    if (text) return text;
  }
  PyErr_Clear();
  return PyUnicode_FromFormat("buffer format '%s'", format ? format : "B");
}

/* Copies through numpy: a native, aligned, C-contiguous array (of `dtype` when given). */
static int stax_py_coerce(PyObject* obj, stax_dtype_t dtype, const char* what, int depth,
                          stax_tensor_t** out_tensor);

static int stax_py_from_buffer(PyObject* obj, stax_dtype_t dtype, const char* what, int depth,
                               stax_tensor_t** out_tensor) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO) < 0) return 1; /* not usable: next */
  int non_native = 0;
  stax_dtype_t found = stax_py_format_dtype(view.format, view.itemsize, &non_native);
  if (found == STAX_DTYPE_INVALID) {
    PyObject* description = stax_py_dtype_description(obj, view.format);
    PyBuffer_Release(&view);
    if (!description) return -1;
    stax_py_raise_code(STAX_DTYPE_MISMATCH,
                       "%s: %U is not a stax dtype (stax has float32, float64, float16, "
                       "bfloat16, int8..int64, uint8..uint64 and bool)",
                       what, description);
    Py_DECREF(description);
    return -1;
  }
  if (view.ndim > STAX_MAX_RANK) {
    int ndim = view.ndim;
    PyBuffer_Release(&view);
    stax_py_raise_code(STAX_SHAPE_MISMATCH, "%s: rank %d exceeds stax's maximum rank %d", what,
                       ndim, STAX_MAX_RANK);
    return -1;
  }
  if (stax_py_buffer_needs_copy(&view, non_native)) {
    PyBuffer_Release(&view);
    if (depth > 0) {
      PyErr_Format(PyExc_RuntimeError, "%s: the copied array is still not usable", what);
      return -1;
    }
    return stax_py_coerce(obj, dtype, what, depth + 1, out_tensor);
  }
  return stax_py_wrap_buffer(&view, found, what, out_tensor);
}

static int stax_py_from_dlpack_object(PyObject* obj, const char* what,
                                      stax_tensor_t** out_tensor) {
  PyObject* tensor = stax_py_tensor_from_dlpack_object(obj);
  if (!tensor) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyErr_Format(type, "%s: %S", what, value);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return -1;
  }
  *out_tensor = ((StaxTensorObject*)tensor)->tensor;
  stax_tensor_retain(*out_tensor);
  Py_DECREF(tensor);
  return 0;
}

static int stax_py_coerce(PyObject* obj, stax_dtype_t dtype, const char* what, int depth,
                          stax_tensor_t** out_tensor) {
  if (!stax_py_hook_coerce) {
    PyErr_SetString(PyExc_RuntimeError, "stax._C hooks are not installed (import stax)");
    return -1;
  }
  PyObject* dtype_name = dtype == STAX_DTYPE_INVALID
                             ? (Py_INCREF(Py_None), Py_None)
                             : PyUnicode_FromString(stax_dtype_name(dtype));
  if (!dtype_name) return -1;
  PyObject* array = PyObject_CallFunctionObjArgs(stax_py_hook_coerce, obj, dtype_name, NULL);
  Py_DECREF(dtype_name);
  if (!array) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    /* stax errors pass through; numpy's own (ValueError, TypeError, ...) name the argument. */
    if (value && PyObject_IsInstance(value, stax_py_error_class(STAX_OK_CODE)) == 0) {
      stax_py_raise_code(STAX_INVALID_ARGUMENT, "%s: cannot convert %s to a tensor: %S", what,
                         Py_TYPE(obj)->tp_name, value);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(traceback);
    } else {
      PyErr_Restore(type, value, traceback);
    }
    return -1;
  }
  int result = stax_py_from_buffer(array, dtype, what, depth, out_tensor);
  Py_DECREF(array);
  if (result > 0) {
    PyErr_Format(PyExc_RuntimeError, "%s: the coerced array has no buffer", what);
    return -1;
  }
  return result;
}

/* An ml_dtypes.bfloat16 numpy array: numpy cannot export that dtype through the buffer
 * protocol or DLPack, so its bits are taken as uint16 (a view, or a contiguous copy when the
 * view is not usable) and wrapped as bfloat16. 1 when obj is not such an array. */
static int stax_py_from_bfloat16_array(PyObject* obj, const char* what,
                                       stax_tensor_t** out_tensor) {
  PyObject* numpy_dtype = PyObject_GetAttrString(obj, "dtype");
  if (!numpy_dtype) {
    PyErr_Clear();
    return 1;
  }
  PyObject* name = PyObject_GetAttrString(numpy_dtype, "name");
  Py_DECREF(numpy_dtype);
  int is_bfloat16 = name && PyUnicode_Check(name) &&
                    PyUnicode_CompareWithASCIIString(name, "bfloat16") == 0;
  Py_XDECREF(name);
  PyErr_Clear();
  if (!is_bfloat16 || !PyObject_HasAttrString(obj, "view")) return 1;
  PyObject* bits = PyObject_CallMethod(obj, "view", "s", "uint16");
  if (!bits) return -1;
  Py_buffer view;
  if (PyObject_GetBuffer(bits, &view, PyBUF_RECORDS_RO) == 0 &&
      stax_py_buffer_needs_copy(&view, 0)) {
    PyBuffer_Release(&view);
    PyObject* copy = stax_py_hook_coerce
                         ? PyObject_CallFunctionObjArgs(stax_py_hook_coerce, bits, Py_None, NULL)
                         : NULL;
    Py_DECREF(bits);
    if (!copy) return -1;
    bits = copy;
    if (PyObject_GetBuffer(bits, &view, PyBUF_RECORDS_RO) < 0) {
      Py_DECREF(bits);
      return -1;
    }
  } else if (PyErr_Occurred()) {
    Py_DECREF(bits);
    return -1;
  }
  Py_DECREF(bits); /* the Py_buffer holds the exporter */
  return stax_py_wrap_buffer(&view, STAX_DTYPE_BFLOAT16, what, out_tensor);
}

int stax_py_to_tensor(PyObject* obj, stax_dtype_t dtype, const char* what,
                      stax_tensor_t** out_tensor) {
  *out_tensor = NULL;
  if (StaxTensor_Check(obj)) {
    *out_tensor = ((StaxTensorObject*)obj)->tensor;
    stax_tensor_retain(*out_tensor);
    return 0;
  }
  int bfloat16 = stax_py_from_bfloat16_array(obj, what, out_tensor);
  if (bfloat16 <= 0) return bfloat16;
  if (PyObject_CheckBuffer(obj) && !PyBytes_Check(obj) && !PyUnicode_Check(obj)) {
    int result = stax_py_from_buffer(obj, dtype, what, 0, out_tensor);
    if (result <= 0) return result;
    PyErr_Clear(); /* the exporter refused this request: try the other ways */
  }
  if (PyObject_HasAttrString(obj, "__dlpack__")) return stax_py_from_dlpack_object(obj, what, out_tensor);
  return stax_py_coerce(obj, dtype, what, 0, out_tensor);
}
