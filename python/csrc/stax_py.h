/* The stax Python extension (module stax._C): what its files share.
 *
 *   module.c   module init, module-level functions (op table, version, ONNX import, DLPack)
 *   errors.c   the exception hierarchy (one class per stax status code) and status -> raise
 *   tensor.c   stax._C.Tensor: an owned stax tensor exposed through the buffer protocol,
 *              __array_interface__ and DLPack, so numpy wraps it without copying
 *   convert.c  any Python array-like -> stax tensor, zero copy whenever the memory allows
 *   graph.c    stax._C.Graph: the C builder API (inputs, initializers, nodes, outputs)
 *   program.c  stax._C.Program: a compiled program, its context pool and the run path
 *
 * Only the public C API (include/stax/) is used. No numpy C API: arrays come in through the
 * buffer protocol (PEP 3118) or DLPack, and go out as Tensor objects that numpy wraps. */
#ifndef STAX_PYTHON_STAX_PY_H_
#define STAX_PYTHON_STAX_PY_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "stax/onnx.h"
#include "stax/stax.h"

/* ---- errors.c ---------------------------------------------------------------------------- */

int stax_py_errors_init(PyObject* module);
/* Raises the exception class of the status's code with its message, consumes the status and
 * returns NULL (so `return stax_py_raise(status);` reads naturally). `context` (may be NULL)
 * is prepended: "context: message". */
PyObject* stax_py_raise(stax_status_t status, const char* context);
/* Raises the class of `code` with a formatted message; returns NULL. */
PyObject* stax_py_raise_code(stax_status_code_t code, const char* fmt, ...);
/* Borrowed class for a code (stax.Error for unknown codes). */
PyObject* stax_py_error_class(stax_status_code_t code);

/* ---- tensor.c ---------------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  stax_tensor_t* tensor;            /* owned */
  int readonly;                     /* the memory belongs to something that must not change */
  Py_ssize_t shape[STAX_MAX_RANK];  /* for the buffer protocol */
  Py_ssize_t strides[STAX_MAX_RANK]; /* bytes */
  PyObject* weakrefs;
} StaxTensorObject;

extern PyTypeObject StaxTensor_Type;
#define StaxTensor_Check(op) PyObject_TypeCheck(op, &StaxTensor_Type)

/* Wraps `tensor` (the reference is stolen, also on failure). */
PyObject* stax_py_tensor_new(stax_tensor_t* tensor, int readonly);
/* numpy-style buffer format of a dtype ("f", "e", "q", "?"); NULL for bfloat16. */
const char* stax_py_dtype_format(stax_dtype_t dtype);
/* The numpy typestr ("<f4") of a dtype; NULL for bfloat16. */
const char* stax_py_dtype_typestr(stax_dtype_t dtype);
int stax_py_tensor_init_type(PyObject* module);
/* Imports a DLPack capsule, unversioned or 1.x (renamed "used_..." on success). */
PyObject* stax_py_tensor_from_capsule(PyObject* capsule);
/* Imports a capsule, a stax Tensor (returned as is) or anything with __dlpack__. */
PyObject* stax_py_tensor_from_dlpack_object(PyObject* obj);

/* ---- convert.c --------------------------------------------------------------------------- */

/* Converts obj to a stax tensor: a stax Tensor is used as is; a buffer (numpy arrays,
 * memoryviews, ...) is wrapped without copying when its dtype is supported, its data aligned
 * to the element size and its strides whole elements (else copied through numpy); an object
 * with __dlpack__ is imported without copying; anything else (lists, scalars) goes through
 * numpy.asarray with `dtype` (STAX_DTYPE_INVALID: numpy's choice). `what` names the argument
 * in messages ("input 'x'"). On success *out_tensor is a new reference and 0 is returned. */
int stax_py_to_tensor(PyObject* obj, stax_dtype_t dtype, const char* what,
                      stax_tensor_t** out_tensor);
/* A buffer format string -> dtype (STAX_DTYPE_INVALID when unsupported). Sets *non_native when
 * the format asks for a byte order other than the machine's. */
stax_dtype_t stax_py_format_dtype(const char* format, Py_ssize_t itemsize, int* non_native);
/* Parses a dtype given as a name ("float32"), or anything with a `.name` or `str()` that
 * names one (numpy dtypes and scalar types). Raises TypeError and returns INVALID otherwise. */
stax_dtype_t stax_py_parse_dtype(PyObject* obj);
/* Hooks installed from Python (stax._C._set_hooks): numpy.asarray and the coercion helper. */
extern PyObject* stax_py_hook_asarray; /* numpy.asarray */
extern PyObject* stax_py_hook_coerce;  /* stax._coerce_array(obj, dtype_name_or_None) */
/* stax._bfloat16_array(tensor): an ml_dtypes.bfloat16 numpy view of a bfloat16 tensor, or the
 * tensor itself when ml_dtypes is not installed. NULL until set. */
extern PyObject* stax_py_hook_bfloat16;

/* ---- graph.c ----------------------------------------------------------------------------- */

extern PyTypeObject StaxGraph_Type;
/* The graph of a Graph object (borrowed); NULL with an error when it was given away. */
stax_graph_t* stax_py_graph_handle(PyObject* obj);
int stax_py_graph_init_type(PyObject* module);
/* A new Graph object owning `graph` (stolen, destroyed on failure). */
PyObject* stax_py_graph_new(stax_graph_t* graph);

/* ---- program.c --------------------------------------------------------------------------- */

extern PyTypeObject StaxProgram_Type;
int stax_py_program_init_type(PyObject* module);
/* compile_program(graph, cls, static_variants, profile_points, dispatch, profile_timing,
 * call_mode, jit) -> instance of cls (a subclass of Program). */
PyObject* stax_py_compile_program(PyObject* self, PyObject* args, PyObject* kwargs);

#endif /* STAX_PYTHON_STAX_PY_H_ */
