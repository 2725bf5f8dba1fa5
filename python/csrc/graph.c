/* stax._C.Graph: the C builder API for the Python frontend (stax/_lower.py drives it).
 *
 * Dims cross the boundary as nested tuples built by stax/_dims.py:
 *   int | ("sym", name, min, max_or_None) | (op, a, b) with op in add, mul, floordiv, ceildiv,
 *   min, max.
 * Attributes as (name, kind, value) with kind in int, float, string, ints, floats, strings,
 * tensor (an array-like, copied), graph (a Graph made by Graph.subgraph(), whose ownership
 * passes to the node). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stax_py.h"

typedef struct {
  PyObject_HEAD
  stax_graph_t* graph; /* owned; NULL once a subgraph has been given to a node */
  PyObject* parent;    /* a subgraph keeps its parent alive */
} StaxGraphObj;

static stax_allocator_t graph_alloc(void) { return stax_allocator_system(); }

static int graph_check(StaxGraphObj* self) {
  if (!self->graph) {
    PyErr_SetString(PyExc_RuntimeError,
                    "this subgraph now belongs to a node and cannot be changed");
    return -1;
  }
  return 0;
}

PyObject* stax_py_graph_new(stax_graph_t* graph) {
  StaxGraphObj* self = PyObject_New(StaxGraphObj, &StaxGraph_Type);
  if (!self) {
    stax_graph_destroy(graph);
    return NULL;
  }
  self->graph = graph;
  self->parent = NULL;
  return (PyObject*)self;
}

static PyObject* graph_tp_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  if (!PyArg_ParseTuple(args, ":Graph") || (kwargs && PyDict_Size(kwargs) > 0)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Graph() takes no arguments");
    return NULL;
  }
  stax_graph_t* graph = NULL;
  stax_status_t status = stax_graph_create(graph_alloc(), &graph);
  if (status) return stax_py_raise(status, NULL);
  StaxGraphObj* self = (StaxGraphObj*)type->tp_alloc(type, 0);
  if (!self) {
    stax_graph_destroy(graph);
    return NULL;
  }
  self->graph = graph;
  self->parent = NULL;
  return (PyObject*)self;
}

static void graph_dealloc(StaxGraphObj* self) {
  if (self->graph) stax_graph_destroy(self->graph);
  Py_XDECREF(self->parent);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* ---- dims ----------------------------------------------------------------------------------- */

static int64_t graph_long(PyObject* obj, int* error) {
  long long value = PyLong_AsLongLong(obj);
  if (value == -1 && PyErr_Occurred()) *error = 1;
  return (int64_t)value;
}

/* NULL with a Python error set on failure. */
static const stax_dim_t* graph_dim(stax_shape_ctx_t* shape, PyObject* spec, int depth) {
  if (depth > 200) {
    PyErr_SetString(PyExc_RecursionError, "dim expression too deep");
    return NULL;
  }
  if (PyLong_Check(spec)) {
    int error = 0;
    int64_t value = graph_long(spec, &error);
    if (error) return NULL;
    const stax_dim_t* dim = stax_dim_const(shape, value);
    if (!dim) stax_py_raise(stax_shape_ctx_take_error(shape), "dim");
    return dim;
  }
  if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 3) {
    PyErr_Format(PyExc_TypeError, "bad dim spec %R", spec);
    return NULL;
  }
  const char* op = PyUnicode_AsUTF8(PyTuple_GET_ITEM(spec, 0));
  if (!op) return NULL;
  if (strcmp(op, "sym") == 0) {
    const char* name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(spec, 1));
    if (!name || PyTuple_GET_SIZE(spec) != 4) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "bad symbol spec %R", spec);
      return NULL;
    }
    int error = 0;
    int64_t min = graph_long(PyTuple_GET_ITEM(spec, 2), &error);
    PyObject* max_obj = PyTuple_GET_ITEM(spec, 3);
    int64_t max = max_obj == Py_None ? STAX_DIM_MAX : graph_long(max_obj, &error);
    if (error) return NULL;
    const stax_dim_t* dim = NULL;
    stax_status_t status = stax_symbol_get(shape, name, min, max, &dim);
    if (status) {
      stax_py_raise(status, NULL);
      return NULL;
    }
    return dim;
  }
  const stax_dim_t* a = graph_dim(shape, PyTuple_GET_ITEM(spec, 1), depth + 1);
  if (!a) return NULL;
  const stax_dim_t* b = graph_dim(shape, PyTuple_GET_ITEM(spec, 2), depth + 1);
  if (!b) return NULL;
  const stax_dim_t* dim = NULL;
  if (strcmp(op, "add") == 0) dim = stax_dim_add(shape, a, b);
  else if (strcmp(op, "mul") == 0) dim = stax_dim_mul(shape, a, b);
  else if (strcmp(op, "floordiv") == 0) dim = stax_dim_floordiv(shape, a, b);
  else if (strcmp(op, "ceildiv") == 0) dim = stax_dim_ceildiv(shape, a, b);
  else if (strcmp(op, "min") == 0) dim = stax_dim_min(shape, a, b);
  else if (strcmp(op, "max") == 0) dim = stax_dim_max(shape, a, b);
  else {
    PyErr_Format(PyExc_ValueError, "unknown dim operation '%s'", op);
    return NULL;
  }
  if (!dim) stax_py_raise(stax_shape_ctx_take_error(shape), "dim expression");
  return dim;
}

/* A dim as Python sees it: int, ("sym", name, min, max) for a bare symbol, or its text. */
static PyObject* graph_dim_to_python(stax_shape_ctx_t* shape, const stax_dim_t* dim) {
  if (!dim) Py_RETURN_NONE;
  if (stax_dim_is_const(dim)) return PyLong_FromLongLong(stax_dim_const_value(dim));
  stax_symbol_id_t id = 0;
  if (stax_dim_as_symbol(dim, &id)) {
    int64_t min = 0, max = 0;
    stax_symbol_range(shape, id, &min, &max);
    if (max == STAX_DIM_MAX)
      return Py_BuildValue("(ssLO)", "sym", stax_symbol_name(shape, id), (long long)min, Py_None);
    return Py_BuildValue("(ssLL)", "sym", stax_symbol_name(shape, id), (long long)min,
                         (long long)max);
  }
  char text[512];
  stax_dim_print(shape, dim, text, sizeof(text));
  return PyUnicode_FromString(text);
}

/* ---- building ------------------------------------------------------------------------------- */

static PyObject* graph_add_input(StaxGraphObj* self, PyObject* args) {
  const char* name = NULL;
  PyObject *dtype_obj = NULL, *dims_obj = NULL;
  if (!PyArg_ParseTuple(args, "sOO:add_input", &name, &dtype_obj, &dims_obj)) return NULL;
  if (graph_check(self) < 0) return NULL;
  stax_dtype_t dtype = stax_py_parse_dtype(dtype_obj);
  if (dtype == STAX_DTYPE_INVALID) return NULL;
  PyObject* seq = PySequence_Fast(dims_obj, "dims must be a sequence");
  if (!seq) return NULL;
  Py_ssize_t rank = PySequence_Fast_GET_SIZE(seq);
  if (rank > STAX_MAX_RANK) {
    Py_DECREF(seq);
    return stax_py_raise_code(STAX_SHAPE_MISMATCH, "input '%s': rank %zd exceeds %d", name,
                              rank, STAX_MAX_RANK);
  }
  const stax_dim_t* dims[STAX_MAX_RANK];
  stax_shape_ctx_t* shape = stax_graph_shape_ctx(self->graph);
  for (Py_ssize_t d = 0; d < rank; d++) {
    dims[d] = graph_dim(shape, PySequence_Fast_GET_ITEM(seq, d), 0);
    if (!dims[d]) {
      Py_DECREF(seq);
      return NULL;
    }
  }
  Py_DECREF(seq);
  stax_value_id_t value = STAX_VALUE_NONE;
  stax_status_t status =
      stax_graph_add_input(self->graph, name, dtype, (int32_t)rank, dims, &value);
  if (status) return stax_py_raise(status, NULL);
  return PyLong_FromLong(value);
}

/* A contiguous copy owned by stax (the graph keeps constants; later changes to the array must
 * not leak into compiled programs). */
static stax_tensor_t* graph_constant_tensor(PyObject* obj, const char* what) {
  stax_tensor_t* view = NULL;
  if (stax_py_to_tensor(obj, STAX_DTYPE_INVALID, what, &view) < 0) return NULL;
  stax_tensor_t* copy = NULL;
  stax_status_t status = stax_tensor_copy(graph_alloc(), view, &copy);
  stax_tensor_release(view);
  if (status) {
    stax_py_raise(status, what);
    return NULL;
  }
  return copy;
}

static PyObject* graph_add_initializer(StaxGraphObj* self, PyObject* args) {
  const char* name = NULL;
  PyObject* array = NULL;
  if (!PyArg_ParseTuple(args, "sO:add_initializer", &name, &array)) return NULL;
  if (graph_check(self) < 0) return NULL;
  char what[256];
  snprintf(what, sizeof(what), "constant '%s'", name);
  stax_tensor_t* tensor = graph_constant_tensor(array, what);
  if (!tensor) return NULL;
  stax_value_id_t value = STAX_VALUE_NONE;
  stax_status_t status = stax_graph_add_initializer(self->graph, name, tensor, &value);
  stax_tensor_release(tensor);
  if (status) return stax_py_raise(status, NULL);
  return PyLong_FromLong(value);
}

/* Storage that lives until add_node returns. */
typedef struct {
  stax_attr_t attrs[64];
  int32_t count;
  stax_tensor_t* tensors[64];
  int32_t tensor_count;
  void* blocks[128]; /* malloc'd arrays */
  int32_t block_count;
  StaxGraphObj* graphs[16]; /* GRAPH attributes: ownership passes on success */
  int32_t graph_count;
  PyObject* sequences[64]; /* keep the strings of list attributes alive */
  int32_t sequence_count;
} graph_attr_storage_t;

static void graph_attr_storage_free(graph_attr_storage_t* storage) {
  for (int32_t i = 0; i < storage->tensor_count; i++) stax_tensor_release(storage->tensors[i]);
  for (int32_t i = 0; i < storage->block_count; i++) free(storage->blocks[i]);
  for (int32_t i = 0; i < storage->sequence_count; i++) Py_DECREF(storage->sequences[i]);
}

static void* graph_attr_block(graph_attr_storage_t* storage, size_t bytes) {
  if (storage->block_count >= (int32_t)(sizeof(storage->blocks) / sizeof(storage->blocks[0]))) {
    PyErr_SetString(PyExc_ValueError, "too many list attributes");
    return NULL;
  }
  void* block = malloc(bytes ? bytes : 1);
  if (!block) {
    PyErr_NoMemory();
    return NULL;
  }
  storage->blocks[storage->block_count++] = block;
  return block;
}

static int graph_parse_attr(graph_attr_storage_t* storage, PyObject* item, const char* op) {
  const char *name = NULL, *kind = NULL;
  PyObject* value = NULL;
  if (!PyArg_ParseTuple(item, "ssO;attributes are (name, kind, value) tuples", &name, &kind,
                        &value))
    return -1;
  if (storage->count >= (int32_t)(sizeof(storage->attrs) / sizeof(storage->attrs[0]))) {
    PyErr_SetString(PyExc_ValueError, "too many attributes");
    return -1;
  }
  stax_attr_t* attr = &storage->attrs[storage->count];
  if (strcmp(kind, "int") == 0) {
    int error = 0;
    int64_t v = graph_long(value, &error);
    if (error) return -1;
    *attr = stax_attr_int(name, v);
  } else if (strcmp(kind, "float") == 0) {
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    *attr = stax_attr_float(name, (float)v);
  } else if (strcmp(kind, "string") == 0) {
    const char* v = PyUnicode_AsUTF8(value);
    if (!v) return -1;
    *attr = stax_attr_string(name, v);
  } else if (strcmp(kind, "ints") == 0 || strcmp(kind, "floats") == 0 ||
             strcmp(kind, "strings") == 0) {
    PyObject* seq = PySequence_Fast(value, "list attributes need a sequence");
    if (!seq) return -1;
    /* storage->count < 64, so there is room; the strings live as long as the sequence */
    storage->sequences[storage->sequence_count++] = seq;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int is_ints = kind[0] == 'i', is_floats = kind[0] == 'f';
    size_t element = is_ints ? sizeof(int64_t) : is_floats ? sizeof(float) : sizeof(char*);
    void* block = graph_attr_block(storage, (size_t)n * element);
    if (!block) return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
      PyObject* entry = PySequence_Fast_GET_ITEM(seq, k);
      if (is_ints) {
        int error = 0;
        ((int64_t*)block)[k] = graph_long(entry, &error);
        if (error) break;
      } else if (is_floats) {
        double v = PyFloat_AsDouble(entry);
        if (v == -1.0 && PyErr_Occurred()) break;
        ((float*)block)[k] = (float)v;
      } else {
        /* The sequence holds the strings alive until add_node copies them. */
        const char* v = PyUnicode_AsUTF8(entry);
        if (!v) break;
        ((const char**)block)[k] = v;
      }
    }
    if (PyErr_Occurred()) return -1;
    if (is_ints) *attr = stax_attr_ints(name, (int32_t)n, (const int64_t*)block);
    else if (is_floats) *attr = stax_attr_floats(name, (int32_t)n, (const float*)block);
    else *attr = stax_attr_strings(name, (int32_t)n, (const char* const*)block);
  } else if (strcmp(kind, "tensor") == 0) {
    char what[256];
    snprintf(what, sizeof(what), "%s attribute '%s'", op, name);
    stax_tensor_t* tensor = graph_constant_tensor(value, what);
    if (!tensor) return -1;
    storage->tensors[storage->tensor_count++] = tensor;
    *attr = stax_attr_tensor(name, tensor);
  } else if (strcmp(kind, "graph") == 0) {
    if (!PyObject_TypeCheck(value, &StaxGraph_Type)) {
      PyErr_Format(PyExc_TypeError, "attribute '%s' needs a Graph", name);
      return -1;
    }
    StaxGraphObj* sub = (StaxGraphObj*)value;
    if (graph_check(sub) < 0) return -1;
    if (storage->graph_count >= 16) {
      PyErr_SetString(PyExc_ValueError, "too many graph attributes");
      return -1;
    }
    storage->graphs[storage->graph_count++] = sub;
    *attr = stax_attr_graph(name, sub->graph);
  } else {
    PyErr_Format(PyExc_ValueError, "unknown attribute kind '%s'", kind);
    return -1;
  }
  storage->count++;
  return 0;
}

static PyObject* graph_add_node(StaxGraphObj* self, PyObject* args) {
  const char* op_name = NULL;
  PyObject *name_obj = NULL, *inputs_obj = NULL, *attrs_obj = NULL, *output_names_obj = Py_None;
  int output_count = 1;
  if (!PyArg_ParseTuple(args, "sOOiO|O:add_node", &op_name, &name_obj, &inputs_obj,
                        &output_count, &attrs_obj, &output_names_obj))
    return NULL;
  if (graph_check(self) < 0) return NULL;
  stax_op_t op = stax_op_from_name(op_name);
  if (op == STAX_OP_INVALID)
    return stax_py_raise_code(STAX_INVALID_ARGUMENT, "unknown op '%s'", op_name);
  const char* node_name = name_obj == Py_None ? NULL : PyUnicode_AsUTF8(name_obj);
  if (name_obj != Py_None && !node_name) return NULL;
  if (output_count < 0 || output_count > 1024) {
    PyErr_SetString(PyExc_ValueError, "bad output count");
    return NULL;
  }
  PyObject* inputs_seq = PySequence_Fast(inputs_obj, "inputs must be a sequence");
  if (!inputs_seq) return NULL;
  Py_ssize_t input_count = PySequence_Fast_GET_SIZE(inputs_seq);
  stax_value_id_t* inputs = calloc((size_t)(input_count ? input_count : 1), sizeof(*inputs));
  stax_value_id_t* outputs = calloc((size_t)(output_count ? output_count : 1), sizeof(*outputs));
  graph_attr_storage_t* storage = calloc(1, sizeof(*storage));
  const char** output_names = calloc((size_t)(output_count ? output_count : 1), sizeof(char*));
  PyObject* attrs_seq = NULL;
  PyObject* names_seq = NULL;
  PyObject* result = NULL;
  if (!inputs || !outputs || !storage || !output_names) {
    PyErr_NoMemory();
    goto cleanup;
  }
  if (output_names_obj != Py_None) {
    names_seq = PySequence_Fast(output_names_obj, "output names must be a sequence");
    if (!names_seq) goto cleanup;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(names_seq) && k < output_count; k++) {
      PyObject* item = PySequence_Fast_GET_ITEM(names_seq, k);
      if (item == Py_None) continue;
      output_names[k] = PyUnicode_AsUTF8(item);
      if (!output_names[k]) goto cleanup;
    }
  }
  for (Py_ssize_t i = 0; i < input_count; i++) {
    PyObject* item = PySequence_Fast_GET_ITEM(inputs_seq, i);
    if (item == Py_None) {
      inputs[i] = STAX_VALUE_NONE;
    } else {
      long v = PyLong_AsLong(item);
      if (v == -1 && PyErr_Occurred()) goto cleanup;
      inputs[i] = (stax_value_id_t)v;
    }
  }
  attrs_seq = PySequence_Fast(attrs_obj, "attributes must be a sequence");
  if (!attrs_seq) goto cleanup;
  for (Py_ssize_t a = 0; a < PySequence_Fast_GET_SIZE(attrs_seq); a++)
    if (graph_parse_attr(storage, PySequence_Fast_GET_ITEM(attrs_seq, a), op_name) < 0)
      goto cleanup;
  stax_node_desc_t desc = {.op = op,
                           .name = node_name,
                           .input_count = (int32_t)input_count,
                           .inputs = inputs,
                           .output_count = output_count,
                           .output_names = output_names,
                           .attr_count = storage->count,
                           .attrs = storage->attrs};
  stax_status_t status = stax_graph_add_node(self->graph, &desc, outputs);
  if (status) {
    stax_py_raise(status, NULL);
    goto cleanup;
  }
  for (int32_t g = 0; g < storage->graph_count; g++) storage->graphs[g]->graph = NULL;
  result = PyTuple_New(output_count);
  if (!result) goto cleanup;
  for (int32_t k = 0; k < output_count; k++) {
    PyObject* id = PyLong_FromLong(outputs[k]);
    if (!id) {
      Py_CLEAR(result);
      goto cleanup;
    }
    PyTuple_SET_ITEM(result, k, id);
  }
cleanup:
  if (storage) {
    graph_attr_storage_free(storage);
    free(storage);
  }
  free(inputs);
  free(outputs);
  free(output_names);
  Py_XDECREF(names_seq);
  Py_XDECREF(attrs_seq);
  Py_DECREF(inputs_seq);
  return result;
}

static PyObject* graph_add_output(StaxGraphObj* self, PyObject* arg) {
  long value = PyLong_AsLong(arg);
  if (value == -1 && PyErr_Occurred()) return NULL;
  if (graph_check(self) < 0) return NULL;
  stax_status_t status = stax_graph_add_output(self->graph, (stax_value_id_t)value);
  if (status) return stax_py_raise(status, NULL);
  Py_RETURN_NONE;
}

static PyObject* graph_subgraph(StaxGraphObj* self, PyObject* unused) {
  (void)unused;
  if (graph_check(self) < 0) return NULL;
  stax_graph_t* sub = NULL;
  stax_status_t status = stax_graph_create_subgraph(self->graph, &sub);
  if (status) return stax_py_raise(status, NULL);
  StaxGraphObj* result = (StaxGraphObj*)stax_py_graph_new(sub);
  if (!result) return NULL;
  Py_INCREF(self);
  result->parent = (PyObject*)self;
  return (PyObject*)result;
}

static PyObject* graph_capture(StaxGraphObj* self, PyObject* arg) {
  long value = PyLong_AsLong(arg);
  if (value == -1 && PyErr_Occurred()) return NULL;
  if (graph_check(self) < 0) return NULL;
  stax_value_id_t local = STAX_VALUE_NONE;
  stax_status_t status = stax_graph_capture(self->graph, (stax_value_id_t)value, &local);
  if (status) return stax_py_raise(status, NULL);
  return PyLong_FromLong(local);
}

/* ---- inspection ----------------------------------------------------------------------------- */

static int graph_value_arg(StaxGraphObj* self, PyObject* arg, stax_value_id_t* out) {
  long value = PyLong_AsLong(arg);
  if (value == -1 && PyErr_Occurred()) return -1;
  if (graph_check(self) < 0) return -1;
  if (value < 0 || value >= stax_graph_value_count(self->graph)) {
    PyErr_Format(PyExc_IndexError, "no value %ld in this graph", value);
    return -1;
  }
  *out = (stax_value_id_t)value;
  return 0;
}

/* (name, dtype, dims, is_constant) */
static PyObject* graph_value_info(StaxGraphObj* self, PyObject* arg) {
  stax_value_id_t value = 0;
  if (graph_value_arg(self, arg, &value) < 0) return NULL;
  stax_graph_t* g = self->graph;
  int32_t rank = stax_value_rank(g, value);
  const stax_dim_t* const* dims = stax_value_dims(g, value);
  PyObject* dim_list = PyTuple_New(rank > 0 ? rank : 0);
  if (!dim_list) return NULL;
  for (int32_t d = 0; d < rank; d++) {
    PyObject* dim = graph_dim_to_python(stax_graph_shape_ctx(g), dims ? dims[d] : NULL);
    if (!dim) {
      Py_DECREF(dim_list);
      return NULL;
    }
    PyTuple_SET_ITEM(dim_list, d, dim);
  }
  return Py_BuildValue("(ssNO)", stax_value_name(g, value),
                       stax_dtype_name(stax_value_dtype(g, value)), dim_list,
                       stax_value_constant(g, value) ? Py_True : Py_False);
}

static PyObject* graph_ids(StaxGraphObj* self, int outputs) {
  if (graph_check(self) < 0) return NULL;
  int32_t count = outputs ? stax_graph_output_count(self->graph)
                          : stax_graph_input_count(self->graph);
  PyObject* list = PyList_New(count);
  if (!list) return NULL;
  for (int32_t i = 0; i < count; i++) {
    stax_value_id_t id = outputs ? stax_graph_output(self->graph, i)
                                 : stax_graph_input(self->graph, i);
    PyObject* item = PyLong_FromLong(id);
    if (!item) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, i, item);
  }
  return list;
}

static PyObject* graph_inputs(StaxGraphObj* self, PyObject* unused) {
  (void)unused;
  return graph_ids(self, 0);
}

static PyObject* graph_outputs(StaxGraphObj* self, PyObject* unused) {
  (void)unused;
  return graph_ids(self, 1);
}

static PyObject* graph_node_count(StaxGraphObj* self, PyObject* unused) {
  (void)unused;
  if (graph_check(self) < 0) return NULL;
  return PyLong_FromLong(stax_graph_node_count(self->graph));
}

static PyObject* graph_find_value(StaxGraphObj* self, PyObject* arg) {
  const char* name = PyUnicode_AsUTF8(arg);
  if (!name) return NULL;
  if (graph_check(self) < 0) return NULL;
  stax_value_id_t id = stax_graph_find_value(self->graph, name);
  if (id == STAX_VALUE_NONE) Py_RETURN_NONE;
  return PyLong_FromLong(id);
}

/* [(name, min, max_or_None)] for every symbol of the graph's shape context. */
static PyObject* graph_symbols(StaxGraphObj* self, PyObject* unused) {
  (void)unused;
  if (graph_check(self) < 0) return NULL;
  stax_shape_ctx_t* shape = stax_graph_shape_ctx(self->graph);
  int32_t count = stax_shape_ctx_symbol_count(shape);
  PyObject* list = PyList_New(count);
  if (!list) return NULL;
  for (int32_t id = 0; id < count; id++) {
    int64_t min = 0, max = 0;
    stax_symbol_range(shape, id, &min, &max);
    PyObject* item = max == STAX_DIM_MAX
                         ? Py_BuildValue("(sLO)", stax_symbol_name(shape, id), (long long)min, Py_None)
                         : Py_BuildValue("(sLL)", stax_symbol_name(shape, id), (long long)min,
                                         (long long)max);
    if (!item) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, id, item);
  }
  return list;
}

static PyObject* graph_dump(StaxGraphObj* self, PyObject* unused) {
  (void)unused;
  if (graph_check(self) < 0) return NULL;
  char* text = NULL;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  if (!out) return PyErr_SetFromErrno(PyExc_OSError);
  stax_status_t status = stax_graph_dump(self->graph, out);
  fclose(out);
  if (status) {
    free(text);
    return stax_py_raise(status, NULL);
  }
  PyObject* result = PyUnicode_FromStringAndSize(text ? text : "", (Py_ssize_t)size);
  free(text);
  return result;
}

static PyObject* graph_verify(StaxGraphObj* self, PyObject* unused) {
  (void)unused;
  if (graph_check(self) < 0) return NULL;
  stax_status_t status = stax_graph_verify(self->graph);
  if (status) return stax_py_raise(status, NULL);
  Py_RETURN_NONE;
}

static PyMethodDef graph_methods[] = {
    {"add_input", (PyCFunction)graph_add_input, METH_VARARGS,
     "add_input(name, dtype, dims) -> value id"},
    {"add_initializer", (PyCFunction)graph_add_initializer, METH_VARARGS,
     "add_initializer(name, array) -> value id (the array is copied)"},
    {"add_node", (PyCFunction)graph_add_node, METH_VARARGS,
     "add_node(op, name, inputs, output_count, attrs, output_names=None) -> output value ids"},
    {"add_output", (PyCFunction)graph_add_output, METH_O, "add_output(value id)"},
    {"subgraph", (PyCFunction)graph_subgraph, METH_NOARGS,
     "subgraph() -> Graph sharing this graph's shapes (for If/Loop attributes)"},
    {"capture", (PyCFunction)graph_capture, METH_O,
     "capture(outer value id) -> local value id (subgraphs)"},
    {"value_info", (PyCFunction)graph_value_info, METH_O,
     "value_info(id) -> (name, dtype, dims, is_constant)"},
    {"inputs", (PyCFunction)graph_inputs, METH_NOARGS, "input value ids"},
    {"outputs", (PyCFunction)graph_outputs, METH_NOARGS, "output value ids"},
    {"node_count", (PyCFunction)graph_node_count, METH_NOARGS, "number of nodes"},
    {"find_value", (PyCFunction)graph_find_value, METH_O, "find_value(name) -> id or None"},
    {"dump", (PyCFunction)graph_dump, METH_NOARGS, "the graph as text"},
    {"symbols", (PyCFunction)graph_symbols, METH_NOARGS, "[(name, min, max or None)]"},
    {"verify", (PyCFunction)graph_verify, METH_NOARGS, "checks the whole graph"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject StaxGraph_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stax._C.Graph",
    .tp_basicsize = sizeof(StaxGraphObj),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A stax graph under construction (internal; see stax.compile).",
    .tp_methods = graph_methods,
    .tp_new = graph_tp_new,
};

int stax_py_graph_init_type(PyObject* module) {
  if (PyType_Ready(&StaxGraph_Type) < 0) return -1;
  Py_INCREF(&StaxGraph_Type);
  if (PyModule_AddObject(module, "Graph", (PyObject*)&StaxGraph_Type) < 0) {
    Py_DECREF(&StaxGraph_Type);
    return -1;
  }
  return 0;
}

stax_graph_t* stax_py_graph_handle(PyObject* obj) {
  if (!PyObject_TypeCheck(obj, &StaxGraph_Type)) {
    PyErr_SetString(PyExc_TypeError, "expected a stax._C.Graph");
    return NULL;
  }
  StaxGraphObj* self = (StaxGraphObj*)obj;
  if (graph_check(self) < 0) return NULL;
  return self->graph;
}
