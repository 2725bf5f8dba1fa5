"""Tracing Python functions into subgraphs (If branches, Loop bodies).

The function runs once with placeholders for its parameters; every node it creates is marked
with a fresh scope, so lowering can tell the body's own nodes from values of the enclosing
graph (which become captures).
"""

from . import _expr
from ._expr import Expr, Node, constant
from ._lower import Subgraph


class _Scope:
    """Identity token for the nodes of one traced body."""

    __slots__ = ("parent",)

    def __init__(self, parent):
        self.parent = parent


def trace(function, params):
    """params: [(dtype, dims)] -> Subgraph with placeholder params and the function's outputs."""
    local = _expr._local
    outer = getattr(local, "scope", None)
    scope = _Scope(outer)
    local.scope = scope
    try:
        placeholders = []
        for k, (dtype, dims) in enumerate(params):
            node = Node("input", name=None)
            node.dtype = dtype
            node.dims = tuple(dims)
            placeholders.append(Expr(node, 0))
        result = function(*placeholders)
        if not isinstance(result, (tuple, list)):
            result = (result,)
        outputs = [r if isinstance(r, Expr) else constant(r) for r in result]
    finally:
        local.scope = outer
    return Subgraph(scope, placeholders, outputs)
