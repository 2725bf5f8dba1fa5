"""Lazy tensor expressions: placeholders, constants and op nodes with operator overloading.

Nothing is computed or checked by C code while expressions are built; :func:`stax.compile`
lowers the expressions reachable from its outputs into a stax graph, where every node's
shape function runs and errors name the node and the Python line that made it. ``.shape``,
``.dtype`` and ``.ndim`` run the same shape inference on demand (on the expression's
ancestors) and cache the answer.
"""

import itertools
import os
import sys
import threading

import numpy as np

from . import _C
from ._dims import Dim, Symbol, as_dim, parse_dim

__all__ = ["Expr", "placeholder", "constant"]

_ids = itertools.count()
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_local = threading.local()


def _creation_site():
    """'file.py:12' of the first frame outside the stax package (for error messages)."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep):
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


class Const:
    """A constant operand. ``weak`` constants (Python numbers and lists) take their dtype from
    the op's other data inputs when the graph is built; arrays keep theirs."""

    __slots__ = ("value", "dtype", "weak", "id")

    def __init__(self, value, dtype=None, weak=False):
        self.value = value
        self.dtype = dtype
        self.weak = weak
        self.id = next(_ids)


class Node:
    """One op application (or a placeholder, kind 'input'). Outputs are Exprs (node, index)."""

    __slots__ = ("kind", "op", "inputs", "roles", "attrs", "n_outputs", "name", "output_names",
                 "site", "id", "info", "dtype", "dims", "scope", "__weakref__")

    def __init__(self, kind, op=None, inputs=(), attrs=None, n_outputs=1, name=None, roles=""):
        self.kind = kind
        self.op = op
        self.inputs = tuple(inputs)
        self.roles = roles
        self.attrs = attrs or {}
        self.n_outputs = n_outputs
        self.name = name
        self.output_names = None
        self.site = _creation_site()
        self.id = next(_ids)
        self.info = None  # [(dtype, dims)] per output once inferred
        self.dtype = None  # placeholders
        self.dims = None
        self.scope = getattr(_local, "scope", None)  # the subgraph being traced, if any

    def describe(self):
        what = f"{self.op} node" if self.kind == "op" else "placeholder"
        if self.name:
            what += f" '{self.name}'"
        if self.site:
            what += f" (created at {self.site})"
        return what


def _is_python_number(value):
    return isinstance(value, (bool, int, float)) or isinstance(value, np.generic)


def _is_weak_sequence(value):
    if not isinstance(value, (list, tuple)) or not value:
        return False
    return all(_is_python_number(v) or _is_weak_sequence(v) for v in value)


def as_operand(value, role="x"):
    """An Expr, a Const, or None for an omitted input."""
    if value is None or isinstance(value, (Expr, Const)):
        return value
    if isinstance(value, Dim):
        return Const([value], "int64")  # a 1-element shape vector computed at run time
    if role == "i":
        if isinstance(value, (list, tuple)) and any(isinstance(v, Dim) for v in value):
            return Const([as_dim(v) if isinstance(v, Dim) else int(v) for v in value], "int64")
        array = np.asarray(value)
        if array.size == 0 and array.dtype.kind == "f" and not isinstance(value, np.ndarray):
            array = array.astype(np.int64)  # [] from Python: an empty shape or axes list
        if array.dtype.kind in "iub":
            return Const(array.astype(np.int64, copy=False), "int64")
        raise _C.DtypeError(f"expected integers, got {array.dtype} ({value!r})")
    if role == "f":
        return Const(np.asarray(value, dtype=np.float32), "float32")
    if role == "c" and (_is_python_number(value) or _is_weak_sequence(value)):
        return Const(np.asarray(value).astype(np.bool_), "bool")
    if _is_python_number(value) or _is_weak_sequence(value):
        if role == "a":
            array = np.asarray(value)
            if array.dtype == np.float64 and not isinstance(value, np.generic):
                array = array.astype(np.float32)
            return Const(array, _C.parse_dtype(array.dtype))
        return Const(value, None, weak=True)
    if hasattr(value, "__array_interface__") or hasattr(value, "__array__") or hasattr(value, "__dlpack__"):
        array = np.asarray(value)
        return Const(array, _C.parse_dtype(array.dtype))
    raise TypeError(f"cannot use {type(value).__name__} as a stax operand")


def apply(op, inputs, roles, attrs=None, n_outputs=1, name=None, output_names=None):
    """Makes an op node. inputs: values or Exprs; roles: one role per input (see _optable)."""
    operands = [as_operand(v, r) for v, r in zip(inputs, roles)]
    node = Node("op", op, operands, attrs, n_outputs, name, roles)
    if output_names is not None:
        node.output_names = list(output_names)
    elif name is not None and n_outputs == 1:
        node.output_names = [name]
    if n_outputs == 1:
        return Expr(node, 0)
    return tuple(Expr(node, k) for k in range(n_outputs))


class Expr:
    """A tensor-valued expression: a placeholder, a constant or an op output. Supports
    ``+ - * / // % ** @``, unary ``-``, ``abs()``, comparisons (bool results), ``& | ^ ~`` on
    bools, indexing and slicing, and numpy-like methods (``reshape``, ``transpose``, ``T``,
    ``astype``, ``sum``, ``mean``, ...)."""

    __slots__ = ("_node", "_index", "__weakref__")
    __array_ufunc__ = None  # numpy defers to our reflected operators: ndarray + Expr -> Expr
    __hash__ = object.__hash__

    def __init__(self, node, index=0):
        self._node = node
        self._index = index

    # -- information (inferred on demand) --------------------------------------------------
    def _info(self):
        node = self._node
        if node.kind == "input":
            return node.dtype, node.dims
        if node.info is None:
            from ._lower import infer
            infer([self])
        return node.info[self._index]

    @property
    def dtype(self):
        """Element type name ('float32'), from shape inference."""
        return self._info()[0]

    @property
    def shape(self):
        """Dims from shape inference: ints and symbolic dims (stax.Dim)."""
        return tuple(self._info()[1])

    @property
    def ndim(self):
        """The rank (number of dims)."""
        return len(self._info()[1])

    @property
    def name(self):
        """The name of the value (the node's output name, or the node's name; None when
        unnamed)."""
        node = self._node
        if node.output_names and self._index < len(node.output_names):
            return node.output_names[self._index]
        return node.name

    def __repr__(self):
        node = self._node
        label = node.name or (node.op if node.kind == "op" else node.kind)
        if node.kind == "op" and node.n_outputs > 1:
            label += f"[{self._index}]"
        try:
            dtype, dims = self._info()
            shape = "[" + ", ".join(str(d) for d in dims) + "]"
            return f"stax.Expr({label}: {dtype}{shape})"
        except Exception:  # repr must not raise on a bad graph
            return f"stax.Expr({label})"

    def __bool__(self):
        raise TypeError("a stax expression has no truth value until it runs; use stax.where "
                        "or compile it")

    def __len__(self):
        first = self.shape[0] if self.ndim else None
        if isinstance(first, int):
            return first
        raise TypeError(f"len() of an expression whose first dim is {first!r}")

    def __iter__(self):
        raise TypeError("stax expressions are not iterable; index them or use stax.split")

    # -- arithmetic ------------------------------------------------------------------------
    def __add__(self, other):
        return _binary("Add", self, other)

    def __radd__(self, other):
        return _binary("Add", other, self)

    def __sub__(self, other):
        return _binary("Sub", self, other)

    def __rsub__(self, other):
        return _binary("Sub", other, self)

    def __mul__(self, other):
        return _binary("Mul", self, other)

    def __rmul__(self, other):
        return _binary("Mul", other, self)

    def __truediv__(self, other):
        return _binary("Div", self, other)

    def __rtruediv__(self, other):
        return _binary("Div", other, self)

    def __floordiv__(self, other):
        from . import _ops
        return _ops.floor_divide(self, other)

    def __rfloordiv__(self, other):
        from . import _ops
        return _ops.floor_divide(other, self)

    def __mod__(self, other):
        from . import _ops
        return _ops.remainder(self, other)

    def __rmod__(self, other):
        from . import _ops
        return _ops.remainder(other, self)

    def __pow__(self, other):
        return _binary("Pow", self, other)

    def __rpow__(self, other):
        return _binary("Pow", other, self)

    def __matmul__(self, other):
        return _binary("MatMul", self, other)

    def __rmatmul__(self, other):
        return _binary("MatMul", other, self)

    def __neg__(self):
        return apply("Neg", [self], "x")

    def __pos__(self):
        return self

    def __abs__(self):
        return apply("Abs", [self], "x")

    def __invert__(self):
        return apply("Not", [self], "c")

    def __and__(self, other):
        return apply("And", [self, other], "cc")

    def __rand__(self, other):
        return apply("And", [other, self], "cc")

    def __or__(self, other):
        return apply("Or", [self, other], "cc")

    def __ror__(self, other):
        return apply("Or", [other, self], "cc")

    def __xor__(self, other):
        return apply("Xor", [self, other], "cc")

    def __rxor__(self, other):
        return apply("Xor", [other, self], "cc")

    # -- comparisons (elementwise, bool results) -------------------------------------------
    def __lt__(self, other):
        return _binary("Less", self, other)

    def __le__(self, other):
        return _binary("LessOrEqual", self, other)

    def __gt__(self, other):
        return _binary("Greater", self, other)

    def __ge__(self, other):
        return _binary("GreaterOrEqual", self, other)

    def __eq__(self, other):
        return _binary("Equal", self, other)

    def __ne__(self, other):
        return apply("Not", [_binary("Equal", self, other)], "c")

    # -- indexing and numpy-like methods ----------------------------------------------------
    def __getitem__(self, key):
        from ._index import getitem
        return getitem(self, key)

    @property
    def T(self):
        """The expression with its dims reversed (ONNX Transpose), like numpy's ``.T``."""
        return apply("Transpose", [self], "x")

    def reshape(self, *shape):
        """``x.reshape(B, -1)`` or ``x.reshape([B, -1])``: see :func:`stax.reshape`."""
        from . import _ops
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = shape[0]
        return _ops.reshape(self, shape)

    def transpose(self, *axes):
        """``x.transpose(1, 0)``, or reversed dims without axes: see :func:`stax.transpose`."""
        from . import _ops
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = axes[0]
        return _ops.transpose(self, axes or None)

    def astype(self, dtype):
        """The expression converted to ``dtype`` (ONNX Cast)."""
        from . import _ops
        return _ops.cast(self, dtype)

    def flatten(self):
        """The expression as one dim (a reshape to [-1]), like numpy's ``.flatten()``."""
        from . import _ops
        return _ops.reshape(self, [-1])

    def __getattr__(self, attr):
        # sum, mean, max, min, prod, argmax, argmin, softmax, relu, ... as methods
        from . import _ops
        if attr in _ops.METHODS:
            function = getattr(_ops, attr)
            return lambda *args, **kwargs: function(self, *args, **kwargs)
        raise AttributeError(f"'stax.Expr' object has no attribute '{attr}'")


def _binary(op, a, b):
    return apply(op, [a, b], "xx")


def placeholder(shape, dtype="float32", name=None):
    """A graph input: ``stax.placeholder([B, S, 512], dtype="float32", name="a")``. Dims are
    ints, symbols (stax.symbol), symbol expressions, or strings (symbols with range
    [1, inf)). Unnamed placeholders are called input_0, input_1, ... in creation order."""
    if isinstance(shape, (int, Dim, str)):
        shape = [shape]
    dims = tuple(as_dim(d, "placeholder dim") for d in shape)
    if len(dims) > _C.MAX_RANK:
        raise _C.ShapeError(f"placeholder rank {len(dims)} exceeds stax's maximum {_C.MAX_RANK}")
    node = Node("input", name=name)
    node.dtype = _C.parse_dtype(dtype)
    node.dims = dims
    return Expr(node, 0)


def constant(value, dtype=None, name=None):
    """A constant tensor (copied when the graph is built). Python numbers and lists without a
    dtype become float32 (floats), int64 (ints) or bool."""
    if isinstance(value, Expr):
        return value
    if dtype is not None:
        dtype = _C.parse_dtype(dtype)
        array = np.asarray(value, dtype=dtype if dtype != "bfloat16" else None)
    else:
        array = np.asarray(value)
        if array.dtype == np.float64 and not isinstance(value, np.ndarray):
            array = array.astype(np.float32)
    node = Node("const", name=name)
    node.inputs = (Const(array, _C.parse_dtype(array.dtype)),)
    return Expr(node, 0)


def dims_from_info(dims, symbols):
    """value_info dims -> Python dims (ints, Symbols, parsed expressions)."""
    result = []
    for d in dims:
        if isinstance(d, int):
            result.append(d)
        elif isinstance(d, tuple):
            _, name, low, high = d
            known = symbols.get(name)
            result.append(known if known is not None else Symbol(name, low, high))
        elif d is None:
            result.append(None)
        else:
            try:
                result.append(parse_dim(d, symbols))
            except ValueError:
                result.append(d)
    return result
