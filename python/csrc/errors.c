/* The exception hierarchy: stax.Error, and one subclass per stax status code that also derives
 * from the matching builtin exception, so `except ValueError` keeps working for callers that
 * do not know stax. Each class carries `code` (the status code name, "SHAPE_MISMATCH"); the
 * message is the C message with its context first. */
#include <stdarg.h>

#include "stax_py.h"

typedef struct {
  stax_status_code_t code;
  const char* class_name; /* attribute name in the module */
  const char* code_name;  /* "SHAPE_MISMATCH" */
  PyObject** builtin;     /* the builtin base besides stax.Error */
  const char* doc;
} stax_py_error_spec_t;

static PyObject* stax_py_base_error = NULL;
static PyObject* stax_py_error_classes[STAX_STATUS_CODE_COUNT];

static const stax_py_error_spec_t kErrorSpecs[] = {
    {STAX_INVALID_ARGUMENT, "InvalidArgumentError", "INVALID_ARGUMENT", &PyExc_ValueError,
     "A bad argument: a malformed model or graph, an unknown name, a bad attribute value."},
    {STAX_OUT_OF_MEMORY, "OutOfMemoryError", "OUT_OF_MEMORY", &PyExc_MemoryError,
     "stax could not allocate memory."},
    {STAX_UNIMPLEMENTED, "UnimplementedError", "UNIMPLEMENTED", &PyExc_NotImplementedError,
     "The model uses something stax does not support (yet)."},
    {STAX_SHAPE_MISMATCH, "ShapeError", "SHAPE_MISMATCH", &PyExc_ValueError,
     "Shapes that do not fit: a wrong rank, dims that contradict the model or each other."},
    {STAX_DTYPE_MISMATCH, "DtypeError", "DTYPE_MISMATCH", &PyExc_TypeError,
     "An element type the model or op does not accept."},
    {STAX_OUT_OF_RANGE, "OutOfRangeError", "OUT_OF_RANGE", &PyExc_IndexError,
     "An index or value out of its valid range (Gather indices, symbol ranges, ...)."},
    {STAX_PARSE_ERROR, "ParseError", "PARSE_ERROR", &PyExc_ValueError,
     "A file (ONNX model, saved program, .npy) that cannot be parsed."},
    {STAX_IO_ERROR, "IoError", "IO_ERROR", &PyExc_OSError, "A file could not be read or written."},
    {STAX_FAILED_PRECONDITION, "FailedPreconditionError", "FAILED_PRECONDITION",
     &PyExc_RuntimeError, "The operation is not possible in the current state."},
    {STAX_INTERNAL, "InternalError", "INTERNAL", &PyExc_RuntimeError,
     "A bug in stax: please report it with the message."},
};

int stax_py_errors_init(PyObject* module) {
  stax_py_base_error = PyErr_NewExceptionWithDoc(
      "stax.Error",
      "Base class of every error stax raises. Attributes: code (the stax status code name, "
      "e.g. 'SHAPE_MISMATCH') and message (the text from the C library).",
      PyExc_Exception, NULL);
  if (stax_py_base_error && PyObject_SetAttrString(stax_py_base_error, "code", Py_None) < 0)
    return -1;
  if (!stax_py_base_error) return -1;
  Py_INCREF(stax_py_base_error);
  if (PyModule_AddObject(module, "Error", stax_py_base_error) < 0) {
    Py_DECREF(stax_py_base_error);
    return -1;
  }
  for (size_t i = 0; i < sizeof(kErrorSpecs) / sizeof(kErrorSpecs[0]); i++) {
    const stax_py_error_spec_t* spec = &kErrorSpecs[i];
    char qualified[96];
    snprintf(qualified, sizeof(qualified), "stax.%s", spec->class_name);
    PyObject* bases = PyTuple_Pack(2, stax_py_base_error, *spec->builtin);
    if (!bases) return -1;
    PyObject* dict = Py_BuildValue("{ss}", "code", spec->code_name);
    PyObject* cls = dict ? PyErr_NewExceptionWithDoc(qualified, spec->doc, bases, dict) : NULL;
    Py_XDECREF(dict);
    Py_DECREF(bases);
    if (!cls) return -1;
    stax_py_error_classes[spec->code] = cls; /* the module keeps the reference too */
    Py_INCREF(cls);
    if (PyModule_AddObject(module, spec->class_name, cls) < 0) {
      Py_DECREF(cls);
      return -1;
    }
  }
  return 0;
}

PyObject* stax_py_error_class(stax_status_code_t code) {
  if ((int)code > 0 && (int)code < STAX_STATUS_CODE_COUNT && stax_py_error_classes[code])
    return stax_py_error_classes[code];
  return stax_py_base_error;
}

/* The class carries `code`; Python adds the `message` property (stax/_errors.py). */
static void stax_py_set_error(stax_status_code_t code, PyObject* message) {
  PyErr_SetObject(stax_py_error_class(code), message);
}

PyObject* stax_py_raise(stax_status_t status, const char* context) {
  stax_status_code_t code = stax_status_code(status);
  PyObject* message = context && context[0]
                          ? PyUnicode_FromFormat("%s: %s", context, stax_status_message(status))
                          : PyUnicode_FromString(stax_status_message(status));
  stax_status_free(status);
  if (!message) return NULL;
  stax_py_set_error(code, message);
  Py_DECREF(message);
  return NULL;
}

PyObject* stax_py_raise_code(stax_status_code_t code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  PyObject* message = PyUnicode_FromFormatV(fmt, args);
  va_end(args);
  if (!message) return NULL;
  stax_py_set_error(code, message);
  Py_DECREF(message);
  return NULL;
}
