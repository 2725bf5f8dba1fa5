"""Lowering: Python expressions -> a stax graph (stax._C.Graph), for compile and for on-demand
shape inference.

Every node reachable from the outputs is added in dependency order; placeholders become graph
inputs (in the order given), constants become initializers, Python numbers take the dtype of
the op's other data inputs, and lists of symbolic dims (reshape to ``[B, S*2, -1]``) become
small integer subgraphs over ``Shape`` of the inputs that bind the symbols, which the C shape
inference folds back into symbolic dims. Errors from the C builder keep their class and gain
the Python line that created the node.
"""

import numpy as np

from . import _C
from ._dims import Dim, Symbol
from ._expr import Const, Expr, Node, dims_from_info

_DEFAULT_DTYPES = {"f": "float32", "i": "int64", "u": "int64", "b": "bool"}
_BFLOAT16_ONNX = {name: code for name, _, code in _C.dtypes()}["bfloat16"]


def _python_default_dtype(value):
    kind = np.asarray(value).dtype.kind
    return _DEFAULT_DTYPES.get(kind, "float32")


class Subgraph:
    """A traced function body for If / Loop: params (placeholders inside the body), outputs and
    the scope that marks the nodes made while tracing."""

    def __init__(self, scope, params, outputs):
        self.scope = scope
        self.params = params
        self.outputs = outputs

    def free_nodes(self):
        """Nodes from outside the body that the body uses."""
        free, seen = [], set()
        stack = [e._node for e in self.outputs]
        while stack:
            node = stack.pop()
            if node.id in seen:
                continue
            seen.add(node.id)
            if node.scope is not self.scope:
                free.append(node)
                continue
            for operand in node.inputs:
                if isinstance(operand, Expr):
                    stack.append(operand._node)
            for kind, value in node.attrs.values():
                if kind == "graph":
                    stack.extend(value.free_nodes())
        return free


class Lowering:
    def __init__(self, graph=None, parent=None, scope=None):
        self.graph = graph if graph is not None else _C.Graph()
        self.parent = parent
        self.scope = scope
        self.values = {}         # node id -> tuple of value ids
        self.consts = {}         # (const id, dtype) -> value id
        self.symbol_sources = {}  # symbol name -> (value id, axis)
        self.shape_slices = {}   # (value id, axis) -> value id of Shape(x)[axis:axis+1]
        self.lowered = []        # op nodes in the order they were added
        self.output_names = {}   # (node id, index) -> name for unnamed kernel outputs
        self.counter = 0

    # -- inputs ------------------------------------------------------------------------------
    def add_placeholders(self, placeholders, names=None):
        used = {p._node.name for p in placeholders if p._node.name}
        for k, expr in enumerate(placeholders):
            node = expr._node
            if node.kind != "input":
                raise TypeError(f"inputs must be placeholders, got {expr!r}")
            if node.id in self.values:
                raise ValueError(f"placeholder {node.name or k} is listed twice in inputs")
            name = names[k] if names else node.name
            if not name:
                name = f"input_{k}"
                suffix = 0
                while name in used:
                    suffix += 1
                    name = f"input_{k}_{suffix}"
                used.add(name)
            dims = [d._spec() if isinstance(d, Dim) else d for d in node.dims]
            try:
                vid = self.graph.add_input(name, node.dtype, dims)
            except _C.Error as error:
                raise _annotated(error, node) from None
            self.values[node.id] = (vid,)
            for axis, d in enumerate(node.dims):
                if isinstance(d, Symbol) and d.name not in self.symbol_sources:
                    self.symbol_sources[d.name] = (vid, axis)

    # -- values ------------------------------------------------------------------------------
    def value_of(self, expr):
        node = expr._node
        vids = self.values.get(node.id)
        if vids is None and self.parent is not None and node.scope is not self.scope:
            outer = self.parent.value_of(expr)
            local = self.graph.capture(outer)
            return local
        if vids is None:
            if node.kind == "input":
                name = f" '{node.name}'" if node.name else ""
                raise _C.InvalidArgumentError(
                    f"the outputs depend on placeholder{name} (created at {node.site}), which is "
                    "not among the kernel's inputs")
            raise _C.InternalError(f"{node.describe()} was not lowered before its use")
        return vids[expr._index]

    def _constant(self, const, dtype):
        key = (const.id, dtype)
        vid = self.consts.get(key)
        if vid is None:
            value = const.value
            if isinstance(value, list) and any(isinstance(v, Dim) for v in value):
                vid = self._dims_vector(value)
            else:
                if dtype == "bfloat16":
                    # numpy has no bfloat16: a float32 constant, converted by stax
                    array = np.ascontiguousarray(np.asarray(value, dtype=np.float32))
                    source = self.graph.add_initializer(f"const_{const.id}", array)
                    vid = self._add("Cast", [source], [("to", "int", _BFLOAT16_ONNX)])[0]
                else:
                    array = np.ascontiguousarray(np.asarray(value, dtype=dtype))
                    vid = self.graph.add_initializer(f"const_{const.id}", array)
            self.consts[key] = vid
        return vid

    def _node_name(self, base):
        self.counter += 1
        return f"{base}_{self.counter}"

    def _add(self, op, inputs, attrs=(), n_outputs=1):
        return self.graph.add_node(op, None, inputs, n_outputs, list(attrs))

    # -- symbolic dims computed at run time ---------------------------------------------------
    def _int_vector(self, values):
        array = np.asarray(values, dtype=np.int64).reshape(-1)
        self.counter += 1
        return self.graph.add_initializer(f"dims_{self.counter}", array)

    def _dim_value(self, d):
        """A value id of an int64[1] tensor holding dim d at run time."""
        if isinstance(d, int):
            return self._int_vector([d])
        if isinstance(d, Symbol):
            source = self.symbol_sources.get(d.name)
            if source is None:
                outer = self.parent
                while outer is not None and source is None:
                    source = outer.symbol_sources.get(d.name)
                    if source is not None:
                        return self.graph.capture(outer._shape_slice(*source))
                    outer = outer.parent
                raise _C.InvalidArgumentError(
                    f"symbol {d.name} is used in a shape computed at run time, but no input has "
                    f"it as a dim, so its value is not known at run time")
            return self._shape_slice(*source)
        a, b = d._args
        if d._op == "add":
            return self._add("Add", [self._dim_value(a), self._dim_value(b)])[0]
        if d._op == "mul":
            return self._add("Mul", [self._dim_value(a), self._dim_value(b)])[0]
        if d._op == "floordiv":
            return self._add("Div", [self._dim_value(a), self._dim_value(b)])[0]
        if d._op == "ceildiv":
            return self._dim_value((a + b - 1) // b)
        if d._op in ("min", "max"):
            return self._add(d._op.capitalize(), [self._dim_value(a), self._dim_value(b)])[0]
        raise _C.InternalError(f"unknown dim operation {d._op}")

    def _shape_slice(self, vid, axis):
        key = (vid, axis)
        if key not in self.shape_slices:
            self.shape_slices[key] = self._add(
                "Shape", [vid], [("start", "int", axis), ("end", "int", axis + 1)])[0]
        return self.shape_slices[key]

    def _dims_vector(self, dims):
        pieces, run = [], []
        for d in dims:
            if isinstance(d, Dim):
                if run:
                    pieces.append(self._int_vector(run))
                    run = []
                pieces.append(self._dim_value(d))
            else:
                run.append(int(d))
        if run:
            pieces.append(self._int_vector(run))
        if len(pieces) == 1:
            return pieces[0]
        return self._add("Concat", pieces, [("axis", "int", 0)])[0]

    # -- nodes -------------------------------------------------------------------------------
    def _order(self, roots):
        order, visited = [], set()
        stack = [(expr._node, False) for expr in reversed(roots)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if node.id in visited or node.id in self.values:
                continue
            if self.parent is not None and node.scope is not self.scope:
                continue  # from an enclosing graph: captured when used
            visited.add(node.id)
            stack.append((node, True))
            dependencies = [op._node for op in node.inputs if isinstance(op, Expr)]
            for kind, value in node.attrs.values():
                if kind == "graph":
                    dependencies.extend(value.free_nodes())
            for dep in reversed(dependencies):
                stack.append((dep, False))
        return order

    def lower(self, exprs):
        for node in self._order(exprs):
            if node.kind == "input":
                if self.parent is not None and node.scope is self.scope:
                    raise _C.InvalidArgumentError(
                        f"placeholder created inside a traced body (at {node.site}); use the "
                        "body's parameters instead")
                self.value_of(Expr(node, 0))  # raises: not an input
            elif node.kind == "const":
                const = node.inputs[0]
                self.values[node.id] = (self._constant(const, const.dtype),)
            else:
                self._lower_node(node)
        return [self.value_of(e) for e in exprs]

    def _weak_dtype(self, node, operands):
        for operand, role in zip(operands, node.roles):
            if isinstance(operand, Expr) and role == "x":
                return self.graph.value_info(self.value_of(operand))[1]
        for operand, role in zip(operands, node.roles):
            if isinstance(operand, Const) and not operand.weak and role == "x":
                return operand.dtype
        return None

    def _lower_node(self, node):
        operands = node.inputs
        inputs = []
        weak_dtype = None
        try:
            for operand, role in zip(operands, node.roles):
                if operand is None:
                    inputs.append(None)
                elif isinstance(operand, Expr):
                    inputs.append(self.value_of(operand))
                elif operand.weak:
                    if weak_dtype is None:
                        weak_dtype = self._weak_dtype(node, operands) or _python_default_dtype(
                            operand.value)
                    inputs.append(self._constant(operand, weak_dtype))
                else:
                    inputs.append(self._constant(operand, operand.dtype))
            while inputs and inputs[-1] is None:
                inputs.pop()
            attrs = []
            for attr_name, (kind, value) in node.attrs.items():
                if kind == "graph":
                    value = self._lower_subgraph(value, node)
                attrs.append((attr_name, kind, value))
            output_names = node.output_names
            if output_names is None and self.output_names:
                output_names = [self.output_names.get((node.id, k)) for k in range(node.n_outputs)]
            vids = self.graph.add_node(node.op, node.name, inputs, node.n_outputs, attrs,
                                       output_names)
        except _C.Error as error:
            raise _annotated(error, node) from None
        self.values[node.id] = tuple(vids)
        self.lowered.append(node)

    def _lower_subgraph(self, sub, node):
        child = Lowering(self.graph.subgraph(), parent=self, scope=sub.scope)
        child.add_placeholders(sub.params, [p._node.name or f"{node.op}_param_{k}"
                                            for k, p in enumerate(sub.params)])
        for vid in child.lower(sub.outputs):
            child.graph.add_output(vid)
        return child.graph

    # -- inference ---------------------------------------------------------------------------
    def record_info(self):
        symbols = {name: Symbol(name, low, high) for name, low, high in self.graph.symbols()}
        for node in self.lowered:
            if node.info is None:
                infos = []
                for vid in self.values[node.id]:
                    _, dtype, dims, _ = self.graph.value_info(vid)
                    infos.append((dtype, dims_from_info(dims, symbols)))
                node.info = infos


def _annotated(error, node):
    """The same error class with the Python creation site added."""
    message = str(error.args[0]) if error.args else str(error)
    if node.site and node.site not in message:
        message = f"{message} (the {node.op or 'placeholder'} created at {node.site})"
    return type(error)(message)


def reachable_placeholders(exprs, include_scoped=False):
    found, seen = {}, set()
    stack = [e._node for e in exprs]
    while stack:
        node = stack.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        if node.kind == "input":
            if node.scope is None or include_scoped:
                found[node.id] = node
            continue
        for operand in node.inputs:
            if isinstance(operand, Expr):
                stack.append(operand._node)
        for kind, value in node.attrs.values():
            if kind == "graph":
                stack.extend(n for n in value.free_nodes())
    return [Expr(found[k], 0) for k in sorted(found)]


def build_graph(outputs, inputs=None):
    """(graph, lowering) with the outputs added. inputs: placeholders in call order (default:
    every placeholder the outputs use, in creation order)."""
    if inputs is None:
        inputs = reachable_placeholders(outputs)
    # A value can be a graph output once: repeats become copies (Identity).
    seen, distinct = set(), []
    for expr in outputs:
        key = (expr._node.id, expr._index)
        if key in seen:
            from ._ops import identity
            expr = identity(expr)
        seen.add(key)
        distinct.append(expr)
    outputs = distinct
    lowering = Lowering()
    lowering.add_placeholders(list(inputs))
    taken = {p._node.name for p in inputs if p._node.name}
    for k, expr in enumerate(outputs):
        key = (expr._node.id, expr._index)
        if expr._node.kind == "op" and expr.name is None and key not in lowering.output_names:
            name = f"output_{k}"
            while name in taken:
                name += "_"
            taken.add(name)
            lowering.output_names[key] = name
    vids = lowering.lower(list(outputs))
    for vid in vids:
        lowering.graph.add_output(vid)
    return lowering.graph, lowering


def infer(exprs):
    """Runs shape inference over the expressions' ancestors and caches dtype and dims on every
    node it lowered."""
    lowering = Lowering()
    lowering.add_placeholders(reachable_placeholders(exprs, include_scoped=True))
    lowering.lower(list(exprs))
    lowering.record_info()
