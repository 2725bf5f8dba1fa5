"""numpy-style indexing of expressions: x[1], x[:, 2:S-1], x[..., ::-1], x[None], x[idx].

Basic indexing becomes one Slice (steps may be negative; bounds may be symbolic dims), then a
Squeeze for integer indices and an Unsqueeze for None. One integer tensor index (an Expr or an
array) becomes a Gather on its axis.
"""

import numpy as np

from ._dims import Dim
from ._expr import Expr

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def getitem(x, key):
    from . import _ops

    if not isinstance(key, tuple):
        key = (key,)
    explicit = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    rank = x.ndim
    if explicit > rank:
        raise IndexError(f"too many indices: {explicit} for a rank-{rank} expression")
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (rank - explicit))
        else:
            expanded.append(k)
    if not any(k is Ellipsis for k in key):
        expanded.extend([slice(None)] * (rank - explicit))

    starts, ends, axes, steps = [], [], [], []
    squeeze_axes, new_axes, gather = [], [], None
    axis = 0
    out_axis = 0
    for k in expanded:
        if k is None:
            new_axes.append(out_axis)
            out_axis += 1
            continue
        if isinstance(k, slice):
            step = 1 if k.step is None else k.step
            if _is_int(step) and step == 0:
                raise ValueError("slice step cannot be zero")
            if not (k.start is None and k.stop is None and (_is_int(step) and step == 1)):
                negative = _is_int(step) and step < 0
                start = k.start if k.start is not None else (_INT64_MAX if negative else 0)
                stop = k.stop if k.stop is not None else (_INT64_MIN if negative else _INT64_MAX)
                starts.append(start)
                ends.append(stop)
                axes.append(axis)
                steps.append(step)
            axis += 1
            out_axis += 1
            continue
        if _is_int(k) or isinstance(k, Dim):
            starts.append(k)
            ends.append(_INT64_MAX if (_is_int(k) and k == -1) else k + 1)
            axes.append(axis)
            steps.append(1)
            squeeze_axes.append(axis)
            axis += 1
            continue
        if isinstance(k, Expr) or isinstance(k, (list, np.ndarray)):
            if gather is not None:
                raise IndexError("stax indexing supports one tensor index (use gather_nd)")
            indices = k if isinstance(k, Expr) else np.asarray(k)
            if not isinstance(indices, Expr) and indices.dtype == np.bool_:
                raise IndexError("boolean mask indexing: use stax.compress")
            gather = (axis, indices)
            axis += 1
            out_axis += 1
            continue
        raise IndexError(f"unsupported index {k!r}")

    result = x
    if starts:
        result = _ops.slice(result, starts, ends, axes, steps)
    if gather is not None:
        gather_axis, indices = gather
        # Earlier squeezes have not happened yet, so the axis is still in input numbering.
        result = _ops.gather(result, indices, axis=gather_axis)
        index_rank = indices.ndim if isinstance(indices, Expr) else np.ndim(indices)
        # Gather replaces the axis by the index dims: squeezed axes after it shift.
        squeeze_axes = [a if a < gather_axis else a + index_rank - 1 for a in squeeze_axes]
    if squeeze_axes:
        result = _ops.squeeze(result, squeeze_axes)
    if new_axes:
        result = _ops.expand_dims(result, new_axes)
    return result
