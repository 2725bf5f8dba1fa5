/* stax._C.Tensor: one owned stax tensor (any view: strides, offsets, broadcast dims) made
 * visible to Python without copies.
 *
 *   - buffer protocol (PEP 3118): numpy.asarray(t), memoryview(t); strides in bytes, format
 *     characters numpy understands ('e' for float16). The exporter stays alive while any
 *     view of it exists, and so does the stax buffer.
 *   - __array_interface__ (version 3): the same description as a dict.
 *   - __dlpack__ / __dlpack_device__: a "dltensor" capsule over stax_tensor_to_dlpack.
 * bfloat16 has no buffer format; such tensors leave through DLPack (or .numpy(), which fails
 * with a clear message). */
#include <dlpack/dlpack.h>
#include <stdlib.h>

#include "stax_py.h"

const char* stax_py_dtype_format(stax_dtype_t dtype) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: return "f";
    case STAX_DTYPE_FLOAT64: return "d";
    case STAX_DTYPE_FLOAT16: return "e";
    case STAX_DTYPE_INT8: return "b";
    case STAX_DTYPE_INT16: return "h";
    case STAX_DTYPE_INT32: return "i";
    case STAX_DTYPE_INT64: return "q";
    case STAX_DTYPE_UINT8: return "B";
    case STAX_DTYPE_UINT16: return "H";
    case STAX_DTYPE_UINT32: return "I";
    case STAX_DTYPE_UINT64: return "Q";
    case STAX_DTYPE_BOOL: return "?";
    default: return NULL;
  }
}

const char* stax_py_dtype_typestr(stax_dtype_t dtype) {
  switch (dtype) {
    case STAX_DTYPE_FLOAT32: return "<f4";
    case STAX_DTYPE_FLOAT64: return "<f8";
    case STAX_DTYPE_FLOAT16: return "<f2";
    case STAX_DTYPE_INT8: return "|i1";
    case STAX_DTYPE_INT16: return "<i2";
    case STAX_DTYPE_INT32: return "<i4";
    case STAX_DTYPE_INT64: return "<i8";
    case STAX_DTYPE_UINT8: return "|u1";
    case STAX_DTYPE_UINT16: return "<u2";
    case STAX_DTYPE_UINT32: return "<u4";
    case STAX_DTYPE_UINT64: return "<u8";
    case STAX_DTYPE_BOOL: return "|b1";
    default: return NULL;
  }
}

PyObject* stax_py_tensor_new(stax_tensor_t* tensor, int readonly) {
  StaxTensorObject* self = PyObject_New(StaxTensorObject, &StaxTensor_Type);
  if (!self) {
    stax_tensor_release(tensor);
    return NULL;
  }
  self->tensor = tensor;
  self->readonly = readonly;
  self->weakrefs = NULL;
  int32_t rank = stax_tensor_rank(tensor);
  const int64_t* dims = stax_tensor_dims(tensor);
  const int64_t* strides = stax_tensor_strides(tensor);
  Py_ssize_t item = (Py_ssize_t)stax_dtype_size(stax_tensor_dtype(tensor));
  for (int32_t d = 0; d < rank; d++) {
    self->shape[d] = (Py_ssize_t)dims[d];
    self->strides[d] = (Py_ssize_t)strides[d] * item;
  }
  return (PyObject*)self;
}

static void tensor_dealloc(StaxTensorObject* self) {
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject*)self);
  /* Releasing may run a wrapped input's release callback, which takes the GIL we hold. */
  if (self->tensor) stax_tensor_release(self->tensor);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* tensor_tp_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  (void)type, (void)args, (void)kwargs;
  PyErr_SetString(PyExc_TypeError,
                  "stax.Tensor cannot be created directly; use stax.asarray(obj) or "
                  "stax.from_dlpack(obj)");
  return NULL;
}

/* ---- buffer protocol ------------------------------------------------------------------------ */

static int tensor_getbuffer(StaxTensorObject* self, Py_buffer* view, int flags) {
  stax_tensor_t* t = self->tensor;
  stax_dtype_t dtype = stax_tensor_dtype(t);
  const char* format = stax_py_dtype_format(dtype);
  view->obj = NULL;
  if (!format) {
    PyErr_Format(PyExc_BufferError,
                 "stax tensor of dtype %s has no buffer format; use __dlpack__ instead",
                 stax_dtype_name(dtype));
    return -1;
  }
  if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && self->readonly) {
    PyErr_SetString(PyExc_BufferError,
                    "this stax tensor is read-only (it is a constant of the program)");
    return -1;
  }
  bool contiguous = stax_tensor_is_contiguous(t);
  if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !contiguous) {
    PyErr_SetString(PyExc_BufferError,
                    "stax tensor is not contiguous; the consumer must accept strides");
    return -1;
  }
  if (((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS ||
       (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS ||
       (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS) &&
      !contiguous && stax_tensor_element_count(t) > 1) {
    PyErr_SetString(PyExc_BufferError, "stax tensor is not C-contiguous");
    return -1;
  }
  int32_t rank = stax_tensor_rank(t);
  Py_ssize_t item = (Py_ssize_t)stax_dtype_size(dtype);
  view->buf = stax_tensor_data(t);
  view->obj = (PyObject*)self;
  Py_INCREF(self);
  view->len = (Py_ssize_t)stax_tensor_element_count(t) * item;
  view->readonly = self->readonly;
  view->itemsize = item;
  view->format = (flags & PyBUF_FORMAT) ? (char*)format : NULL;
  view->ndim = rank;
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? self->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

static void tensor_releasebuffer(StaxTensorObject* self, Py_buffer* view) {
  (void)self, (void)view;
}

static PyBufferProcs tensor_as_buffer = {
    .bf_getbuffer = (getbufferproc)tensor_getbuffer,
    .bf_releasebuffer = (releasebufferproc)tensor_releasebuffer,
};

/* ---- properties ----------------------------------------------------------------------------- */

static PyObject* tensor_shape(StaxTensorObject* self, void* closure) {
  (void)closure;
  int32_t rank = stax_tensor_rank(self->tensor);
  PyObject* shape = PyTuple_New(rank);
  if (!shape) return NULL;
  for (int32_t d = 0; d < rank; d++) {
    PyObject* dim = PyLong_FromSsize_t(self->shape[d]);
    if (!dim) {
      Py_DECREF(shape);
      return NULL;
    }
    PyTuple_SET_ITEM(shape, d, dim);
  }
  return shape;
}

static PyObject* tensor_strides(StaxTensorObject* self, void* closure) {
  (void)closure;
  int32_t rank = stax_tensor_rank(self->tensor);
  PyObject* strides = PyTuple_New(rank);
  if (!strides) return NULL;
  for (int32_t d = 0; d < rank; d++) {
    PyObject* stride = PyLong_FromSsize_t(self->strides[d]);
    if (!stride) {
      Py_DECREF(strides);
      return NULL;
    }
    PyTuple_SET_ITEM(strides, d, stride);
  }
  return strides;
}

static PyObject* tensor_dtype(StaxTensorObject* self, void* closure) {
  (void)closure;
  return PyUnicode_FromString(stax_dtype_name(stax_tensor_dtype(self->tensor)));
}

static PyObject* tensor_ndim(StaxTensorObject* self, void* closure) {
  (void)closure;
  return PyLong_FromLong(stax_tensor_rank(self->tensor));
}

static PyObject* tensor_size(StaxTensorObject* self, void* closure) {
  (void)closure;
  return PyLong_FromLongLong(stax_tensor_element_count(self->tensor));
}

static PyObject* tensor_itemsize(StaxTensorObject* self, void* closure) {
  (void)closure;
  return PyLong_FromSize_t(stax_dtype_size(stax_tensor_dtype(self->tensor)));
}

static PyObject* tensor_nbytes(StaxTensorObject* self, void* closure) {
  (void)closure;
  return PyLong_FromLongLong(stax_tensor_element_count(self->tensor) *
                             (long long)stax_dtype_size(stax_tensor_dtype(self->tensor)));
}

static PyObject* tensor_data_ptr(StaxTensorObject* self, void* closure) {
  (void)closure;
  return PyLong_FromVoidPtr(stax_tensor_data(self->tensor));
}

static PyObject* tensor_is_contiguous(StaxTensorObject* self, void* closure) {
  (void)closure;
  return PyBool_FromLong(stax_tensor_is_contiguous(self->tensor));
}

static PyObject* tensor_readonly(StaxTensorObject* self, void* closure) {
  (void)closure;
  return PyBool_FromLong(self->readonly);
}

static PyObject* tensor_array_interface(StaxTensorObject* self, void* closure) {
  (void)closure;
  stax_dtype_t dtype = stax_tensor_dtype(self->tensor);
  const char* typestr = stax_py_dtype_typestr(dtype);
  if (!typestr) {
    PyErr_Format(PyExc_AttributeError,
                 "stax tensor of dtype %s has no __array_interface__ (numpy has no such "
                 "dtype); use __dlpack__",
                 stax_dtype_name(dtype));
    return NULL;
  }
  PyObject* shape = tensor_shape(self, NULL);
  PyObject* strides = stax_tensor_is_contiguous(self->tensor) ? (Py_INCREF(Py_None), Py_None)
                                                              : tensor_strides(self, NULL);
  PyObject* result = NULL;
  if (shape && strides) {
    result = Py_BuildValue("{s:N,s:s,s:(N,O),s:N,s:i}", "shape", shape, "typestr", typestr,
                           "data", PyLong_FromVoidPtr(stax_tensor_data(self->tensor)),
                           self->readonly ? Py_True : Py_False, "strides", strides, "version",
                           3);
    return result;
  }
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return NULL;
}

/* numpy's array interface struct (documented protocol; no numpy headers needed). */
typedef struct {
  int two;
  int nd;
  char typekind;
  int itemsize;
  int flags;
  Py_intptr_t* shape;
  Py_intptr_t* strides;
  void* data;
  PyObject* descr;
} stax_py_array_interface_t;

enum {
  STAX_PY_ARR_C_CONTIGUOUS = 0x1,
  STAX_PY_ARR_ALIGNED = 0x100,
  STAX_PY_ARR_NOTSWAPPED = 0x200,
  STAX_PY_ARR_WRITEABLE = 0x400,
};

static void array_struct_destructor(PyObject* capsule) {
  void* pointer = PyCapsule_GetPointer(capsule, NULL);
  PyObject* owner = (PyObject*)PyCapsule_GetContext(capsule);
  PyMem_Free(pointer);
  Py_XDECREF(owner);
}

/* __array_struct__: the fastest way into numpy (no format parsing, no memoryview). */
static PyObject* tensor_array_struct(StaxTensorObject* self, void* closure) {
  (void)closure;
  stax_dtype_t dtype = stax_tensor_dtype(self->tensor);
  const char* typestr = stax_py_dtype_typestr(dtype);
  if (!typestr) {
    PyErr_Format(PyExc_AttributeError, "numpy has no %s dtype", stax_dtype_name(dtype));
    return NULL;
  }
  int32_t rank = stax_tensor_rank(self->tensor);
  stax_py_array_interface_t* info =
      PyMem_Malloc(sizeof(*info) + 2 * sizeof(Py_intptr_t) * (size_t)(rank ? rank : 1));
  if (!info) return PyErr_NoMemory();
  Py_intptr_t* shape = (Py_intptr_t*)(info + 1);
  Py_intptr_t* strides = shape + (rank ? rank : 1);
  for (int32_t d = 0; d < rank; d++) {
    shape[d] = self->shape[d];
    strides[d] = self->strides[d];
  }
  info->two = 2;
  info->nd = rank;
  info->typekind = typestr[1];
  info->itemsize = (int)stax_dtype_size(dtype);
  info->flags = STAX_PY_ARR_ALIGNED | STAX_PY_ARR_NOTSWAPPED |
                (self->readonly ? 0 : STAX_PY_ARR_WRITEABLE) |
                (stax_tensor_is_contiguous(self->tensor) ? STAX_PY_ARR_C_CONTIGUOUS : 0);
  info->shape = shape;
  info->strides = strides;
  info->data = stax_tensor_data(self->tensor);
  info->descr = NULL;
  PyObject* capsule = PyCapsule_New(info, NULL, array_struct_destructor);
  if (!capsule) {
    PyMem_Free(info);
    return NULL;
  }
  Py_INCREF(self);
  if (PyCapsule_SetContext(capsule, self) < 0) {
    Py_DECREF(self);
    Py_DECREF(capsule);
    return NULL;
  }
  return capsule;
}

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_shape, NULL, "Dims as a tuple of ints.", NULL},
    {"strides", (getter)tensor_strides, NULL, "Strides in bytes (numpy convention).", NULL},
    {"dtype", (getter)tensor_dtype, NULL, "Element type name ('float32').", NULL},
    {"ndim", (getter)tensor_ndim, NULL, "Rank.", NULL},
    {"size", (getter)tensor_size, NULL, "Element count.", NULL},
    {"itemsize", (getter)tensor_itemsize, NULL, "Bytes per element.", NULL},
    {"nbytes", (getter)tensor_nbytes, NULL, "size * itemsize.", NULL},
    {"data_ptr", (getter)tensor_data_ptr, NULL, "Address of the first element.", NULL},
    {"is_contiguous", (getter)tensor_is_contiguous, NULL, "Row-major contiguous.", NULL},
    {"readonly", (getter)tensor_readonly, NULL,
     "True when the memory is a program constant that must not be written.", NULL},
    {"__array_interface__", (getter)tensor_array_interface, NULL,
     "numpy array interface (version 3).", NULL},
    {"__array_struct__", (getter)tensor_array_struct, NULL,
     "numpy array interface as a C struct (the fast path for numpy.asarray).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ---- DLPack --------------------------------------------------------------------------------- */

/* DLPack 1.0's versioned managed tensor. The C library speaks the 0.x ABI (Debian's dlpack.h);
 * the versioned form wraps it: same DLTensor layout, plus a version and flags (read-only,
 * copied). Consumers that ask with max_version >= (1, 0) get it — numpy then knows the memory
 * is writable; others get the unversioned capsule. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} stax_py_dlpack_version_t;

typedef struct stax_py_dl_versioned_s {
  stax_py_dlpack_version_t version;
  void* manager_ctx;
  void (*deleter)(struct stax_py_dl_versioned_s* self);
  uint64_t flags;
  DLTensor dl_tensor;
} stax_py_dl_versioned_t;

#define STAX_PY_DLPACK_FLAG_READ_ONLY (1ull << 0)
#define STAX_PY_DLPACK_FLAG_IS_COPIED (1ull << 1)

/* Export: a versioned block around the library's unversioned managed tensor. */
typedef struct {
  stax_py_dl_versioned_t versioned;
  DLManagedTensor* legacy;
} stax_py_versioned_export_t;

static void versioned_export_deleter(stax_py_dl_versioned_t* versioned) {
  stax_py_versioned_export_t* block = (stax_py_versioned_export_t*)versioned->manager_ctx;
  if (block->legacy->deleter) block->legacy->deleter(block->legacy);
  free(block);
}

/* Import: an unversioned shim over a versioned producer tensor, for stax_tensor_from_dlpack. */
typedef struct {
  DLManagedTensor legacy;
  stax_py_dl_versioned_t* versioned;
} stax_py_versioned_import_t;

static void versioned_import_deleter(DLManagedTensor* legacy) {
  stax_py_versioned_import_t* shim = (stax_py_versioned_import_t*)legacy->manager_ctx;
  if (shim->versioned->deleter) shim->versioned->deleter(shim->versioned);
  free(shim);
}

static void dlpack_capsule_destructor(PyObject* capsule) {
  /* A consumer renames the capsule ("used_dltensor...") and owns the tensor from then on; only
   * an unconsumed capsule still holds a reference we must drop. */
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor* managed = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
    if (managed && managed->deleter) managed->deleter(managed);
  } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    stax_py_dl_versioned_t* managed =
        (stax_py_dl_versioned_t*)PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (managed && managed->deleter) managed->deleter(managed);
  }
}

/* 1 when the consumer accepts DLPack >= 1.0 (max_version=(major, minor), major >= 1). */
static int dlpack_wants_versioned(PyObject* max_version) {
  if (max_version == Py_None || !PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) < 1)
    return 0;
  long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
  if (major == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  return major >= 1;
}

static PyObject* tensor_dlpack(StaxTensorObject* self, PyObject* args, PyObject* kwargs) {
  static char* keywords[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO", keywords, &stream, &max_version,
                                   &dl_device, &copy))
    return NULL;
  if (stream != Py_None && !(PyLong_Check(stream) && PyLong_AsLong(stream) == -1)) {
    if (PyErr_Occurred()) return NULL;
    PyErr_SetString(PyExc_BufferError, "stax tensors live on the CPU: stream must be None");
    return NULL;
  }
  if (dl_device != Py_None) {
    long type = -1, id = -1;
    if (!PyArg_ParseTuple(dl_device, "ll;dl_device must be (device_type, device_id)", &type, &id))
      return NULL;
    if (type != kDLCPU || id != 0) {
      PyErr_Format(PyExc_BufferError,
                   "stax tensors live on the CPU (device (1, 0)); cannot export to (%ld, %ld)",
                   type, id);
      return NULL;
    }
  }
  stax_tensor_t* source = self->tensor;
  stax_tensor_t* exported = source;
  int want_copy = copy == Py_None ? 0 : PyObject_IsTrue(copy);
  if (want_copy < 0) return NULL;
  if (copy == Py_False && self->readonly) {
    PyErr_SetString(PyExc_BufferError,
                    "this tensor is a program constant: it can only be exported as a copy");
    return NULL;
  }
  /* A consumer may write; a program constant must not change, so it leaves as a copy. */
  int copied = want_copy || self->readonly;
  if (copied) {
    stax_status_t status = stax_tensor_copy(stax_allocator_system(), source, &exported);
    if (status) return stax_py_raise(status, "__dlpack__");
  } else {
    stax_tensor_retain(exported);
  }
  DLManagedTensor* managed = NULL;
  stax_status_t status = stax_tensor_to_dlpack(stax_allocator_system(), exported, &managed);
  stax_tensor_release(exported); /* the managed tensor holds its own reference */
  if (status) return stax_py_raise(status, "__dlpack__");
  if (!dlpack_wants_versioned(max_version)) {
    PyObject* capsule = PyCapsule_New(managed, "dltensor", dlpack_capsule_destructor);
    if (!capsule) managed->deleter(managed);
    return capsule;
  }
  stax_py_versioned_export_t* block = calloc(1, sizeof(*block));
  if (!block) {
    managed->deleter(managed);
    return PyErr_NoMemory();
  }
  block->legacy = managed;
  block->versioned.version.major = 1;
  block->versioned.version.minor = 0;
  block->versioned.manager_ctx = block;
  block->versioned.deleter = versioned_export_deleter;
  block->versioned.flags = copied ? STAX_PY_DLPACK_FLAG_IS_COPIED : 0;
  block->versioned.dl_tensor = managed->dl_tensor;
  PyObject* capsule =
      PyCapsule_New(&block->versioned, "dltensor_versioned", dlpack_capsule_destructor);
  if (!capsule) versioned_export_deleter(&block->versioned);
  return capsule;
}

static PyObject* tensor_dlpack_device(StaxTensorObject* self, PyObject* unused) {
  (void)self, (void)unused;
  return Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

PyObject* stax_py_tensor_from_capsule(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    stax_py_dl_versioned_t* versioned =
        (stax_py_dl_versioned_t*)PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (!versioned) return NULL;
    if (versioned->version.major != 1) {
      PyErr_Format(PyExc_BufferError, "DLPack version %u.%u is not supported (stax reads 1.x)",
                   versioned->version.major, versioned->version.minor);
      return NULL;
    }
    stax_py_versioned_import_t* shim = calloc(1, sizeof(*shim));
    if (!shim) return PyErr_NoMemory();
    shim->versioned = versioned;
    shim->legacy.dl_tensor = versioned->dl_tensor;
    shim->legacy.manager_ctx = shim;
    shim->legacy.deleter = versioned_import_deleter;
    stax_tensor_t* tensor = NULL;
    stax_status_t status = stax_tensor_from_dlpack(stax_allocator_system(), &shim->legacy, &tensor);
    if (status) {
      free(shim); /* the producer's tensor stays with the capsule */
      return stax_py_raise(status, NULL);
    }
    if (PyCapsule_SetName(capsule, "used_dltensor_versioned") < 0) {
      stax_tensor_release(tensor);
      return NULL;
    }
    return stax_py_tensor_new(tensor, (versioned->flags & STAX_PY_DLPACK_FLAG_READ_ONLY) != 0);
  }
  if (!PyCapsule_IsValid(capsule, "dltensor")) {
    PyErr_SetString(PyExc_ValueError,
                    "expected an unconsumed DLPack capsule named 'dltensor' or "
                    "'dltensor_versioned' (a capsule can be imported only once)");
    return NULL;
  }
  DLManagedTensor* managed = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
  if (!managed) return NULL;
  stax_tensor_t* tensor = NULL;
  stax_status_t status = stax_tensor_from_dlpack(stax_allocator_system(), managed, &tensor);
  if (status) return stax_py_raise(status, NULL); /* ownership stays with the capsule */
  if (PyCapsule_SetName(capsule, "used_dltensor") < 0) {
    /* The tensor owns `managed` now; dropping it runs the deleter once. */
    stax_tensor_release(tensor);
    return NULL;
  }
  return stax_py_tensor_new(tensor, 0);
}

PyObject* stax_py_tensor_from_dlpack_object(PyObject* obj) {
  if (PyCapsule_CheckExact(obj)) return stax_py_tensor_from_capsule(obj);
  if (StaxTensor_Check(obj)) {
    Py_INCREF(obj);
    return obj;
  }
  PyObject* method = PyObject_GetAttrString(obj, "__dlpack__");
  if (!method) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "%s has no __dlpack__ method (and is not a DLPack capsule)",
                   Py_TYPE(obj)->tp_name);
    }
    return NULL;
  }
  /* Ask for DLPack 1.0 (read-only arrays can only leave that way); producers that predate it
   * reject the keyword with a TypeError, and get the plain call. */
  PyObject* kwargs = Py_BuildValue("{s:(ii)}", "max_version", 1, 0);
  PyObject* empty = PyTuple_New(0);
  PyObject* capsule = kwargs && empty ? PyObject_Call(method, empty, kwargs) : NULL;
  Py_XDECREF(kwargs);
  Py_XDECREF(empty);
  if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    capsule = PyObject_CallNoArgs(method);
  }
  Py_DECREF(method);
  if (!capsule) return NULL;
  PyObject* tensor = stax_py_tensor_from_capsule(capsule);
  Py_DECREF(capsule);
  return tensor;
}

/* ---- methods -------------------------------------------------------------------------------- */

static PyObject* tensor_numpy(StaxTensorObject* self, PyObject* unused) {
  (void)unused;
  if (!stax_py_hook_asarray) {
    PyErr_SetString(PyExc_RuntimeError, "numpy is not available");
    return NULL;
  }
  if (stax_tensor_dtype(self->tensor) == STAX_DTYPE_BFLOAT16 && stax_py_hook_bfloat16) {
    PyObject* array = PyObject_CallOneArg(stax_py_hook_bfloat16, (PyObject*)self);
    if (!array || array != (PyObject*)self) return array;
    Py_DECREF(array); /* ml_dtypes is missing: the error below */
  }
  if (!stax_py_dtype_format(stax_tensor_dtype(self->tensor))) {
    PyErr_Format(PyExc_TypeError,
                 "numpy has no %s dtype; install ml_dtypes (pip install ml_dtypes) for "
                 "bfloat16 arrays, convert in the graph (stax.cast), or use DLPack",
                 stax_dtype_name(stax_tensor_dtype(self->tensor)));
    return NULL;
  }
  return PyObject_CallOneArg(stax_py_hook_asarray, (PyObject*)self);
}

/* The same memory as 16-bit unsigned integers (a 2-byte dtype only): how a bfloat16 tensor
 * reaches numpy, which has no bfloat16, as the bits ml_dtypes reinterprets. */
static PyObject* tensor_bits16(StaxTensorObject* self, PyObject* unused) {
  (void)unused;
  const stax_tensor_t* t = self->tensor;
  if (stax_dtype_size(stax_tensor_dtype(t)) != 2) {
    PyErr_Format(PyExc_TypeError, "_bits16: a %s tensor is not 2 bytes per element",
                 stax_dtype_name(stax_tensor_dtype(t)));
    return NULL;
  }
  stax_tensor_t* view = NULL;
  stax_status_t status = stax_tensor_create_view(
      stax_allocator_system(), stax_tensor_buffer(t), STAX_DTYPE_UINT16, stax_tensor_rank(t),
      stax_tensor_dims(t), stax_tensor_strides(t), stax_tensor_offset(t), &view);
  if (status) return stax_py_raise(status, "_bits16");
  return stax_py_tensor_new(view, self->readonly);
}

static PyObject* tensor_repr(StaxTensorObject* self) {
  char text[256];
  int32_t rank = stax_tensor_rank(self->tensor);
  size_t used = (size_t)snprintf(text, sizeof(text), "stax.Tensor(%s[",
                                 stax_dtype_name(stax_tensor_dtype(self->tensor)));
  for (int32_t d = 0; d < rank && used < sizeof(text); d++)
    used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%lld", d ? ", " : "",
                             (long long)self->shape[d]);
  if (used < sizeof(text)) snprintf(text + used, sizeof(text) - used, "])");
  return PyUnicode_FromString(text);
}

static Py_ssize_t tensor_length(StaxTensorObject* self) {
  if (stax_tensor_rank(self->tensor) == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a 0-d stax tensor");
    return -1;
  }
  return self->shape[0];
}

static PySequenceMethods tensor_as_sequence = {.sq_length = (lenfunc)tensor_length};

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "Exports the tensor as a DLPack capsule, zero copy (copy=True copies). CPU only."},
    {"__dlpack_device__", (PyCFunction)tensor_dlpack_device, METH_NOARGS,
     "Returns (1, 0): the CPU."},
    {"numpy", (PyCFunction)tensor_numpy, METH_NOARGS,
     "numpy() -> numpy.ndarray\n--\n\nA numpy view of the tensor (no copy); bfloat16 as "
     "ml_dtypes.bfloat16 when ml_dtypes is installed."},
    {"_bits16", (PyCFunction)tensor_bits16, METH_NOARGS,
     "_bits16() -> Tensor\n--\n\nThe same memory as uint16 (2-byte dtypes only)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject StaxTensor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stax.Tensor",
    .tp_basicsize = sizeof(StaxTensorObject),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_repr = (reprfunc)tensor_repr,
    .tp_as_sequence = &tensor_as_sequence,
    .tp_as_buffer = &tensor_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tensor owned by stax (a run's output, or an imported array). numpy.asarray() "
              "and numpy.from_dlpack() wrap it without copying; it stays alive as long as any "
              "array viewing it.",
    .tp_weaklistoffset = offsetof(StaxTensorObject, weakrefs),
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
    .tp_new = tensor_tp_new,
};

int stax_py_tensor_init_type(PyObject* module) {
  if (PyType_Ready(&StaxTensor_Type) < 0) return -1;
  Py_INCREF(&StaxTensor_Type);
  if (PyModule_AddObject(module, "Tensor", (PyObject*)&StaxTensor_Type) < 0) {
    Py_DECREF(&StaxTensor_Type);
    return -1;
  }
  return 0;
}
