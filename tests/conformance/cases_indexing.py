"""Conformance cases and numpy references for indexing and data-dependent ops: Gather,
GatherElements, GatherND, ScatterElements, ScatterND (every reduction), Compress, NonZero,
TopK and Unique."""

import itertools

import numpy as np

from gen_cases import A, multi_run, tol_for
from cases_movement import dtype_cycle


def negate_some(g, idx, dims):
    """Turns some indices negative (same element, counted from the end)."""
    flip = g.rng.random(idx.shape) < 0.3
    return np.where(flip, idx - dims, idx)


def gen_gather(g):
    cases = [((5,), (3,), 0), ((5,), (), 0), ((4, 3), (2,), 0), ((4, 3), (2, 2), 1),
             ((4, 3), (0,), 0), ((0, 3), (2,), 1), ((2, 3, 4), (3, 2), -1), ((2, 3, 4), (), 1),
             ((2, 1, 3, 2, 2, 3), (2,), 3), ((4, 35), (7, 3), 1), ((1000, 64), (500,), 0)]
    for k in range(len(cases) * 3):
        shape, ishape, axis = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        dim = shape[axis]
        idx = g.values(ishape, "int64", 0, dim - 1) if dim else np.zeros(ishape, np.int64)
        idx = negate_some(g, idx, dim) if dim else idx
        idtype = g.choice(["int64", "int32"])
        ind = g.data(ishape, idtype, value=idx.astype(idtype), free=False,
                     kind=g.choice(["feed", "feed", "init"]))
        expected = np.take(x.value, np.where(idx < 0, idx + dim, idx), axis=axis)
        attrs = [] if axis == 0 and g.chance(0.5) else [A.i("axis", axis)]
        g.case([x, ind], [expected], attrs=attrs)


def gen_gather_elements(g):
    cases = [((5,), (3,), 0), ((4, 3), (2, 3), 0), ((4, 3), (4, 5), 1), ((3, 4), (3, 0), 1),
             ((2, 3, 4), (2, 3, 2), -1), ((2, 1, 3, 2, 2, 3), (2, 1, 2, 2, 2, 3), 2),
             ((4, 35), (4, 20), 1)]
    for k in range(len(cases) * 3):
        shape, ishape, axis = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        dim = shape[axis]
        idx = negate_some(g, g.values(ishape, "int64", 0, dim - 1), dim)
        idtype = g.choice(["int64", "int32"])
        ind = g.data(ishape, idtype, value=idx.astype(idtype), free=False)
        norm = np.where(idx < 0, idx + dim, idx)
        # take_along_axis needs the non-axis dims equal; the indices may be smaller there
        sub = tuple(slice(0, ishape[a]) if a != axis % len(shape) else slice(None)
                    for a in range(len(shape)))
        expected = np.take_along_axis(x.value[sub], norm, axis=axis)
        attrs = [] if axis == 0 and g.chance(0.5) else [A.i("axis", axis)]
        g.case([x, ind], [expected], attrs=attrs)


def gather_nd_ref(data, idx, batch_dims):
    batch_shape = data.shape[:batch_dims]
    k = idx.shape[-1]
    out_shape = idx.shape[:-1] + data.shape[batch_dims + k:]
    out = np.zeros(out_shape, dtype=data.dtype)
    for b in itertools.product(*[range(d) for d in batch_shape]):
        d = data[b]
        ib = idx[b]
        for pos in itertools.product(*[range(s) for s in ib.shape[:-1]]):
            out[b + pos] = d[tuple(int(v) for v in ib[pos])]
    return out


def gen_gather_nd(g):
    cases = [((4, 3), (2, 2), 0), ((4, 3), (2, 1), 0), ((2, 3, 4), (3, 2), 0),
             ((2, 3, 4), (2, 2, 1), 1), ((2, 3, 4), (2, 3, 1, 1), 2), ((5,), (1,), 0),
             ((4, 3), (0, 2), 0), ((2, 2, 3, 2, 1, 2), (2, 2, 2), 1), ((4, 35), (6, 2), 0)]
    for k in range(len(cases) * 3):
        shape, ishape, batch_dims = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        kdim = ishape[-1]
        bounds = np.array(shape[batch_dims:batch_dims + kdim])
        idx = np.floor(g.rng.random(ishape) * bounds).astype(np.int64)
        idx = negate_some(g, idx, bounds)
        ind = g.data(ishape, "int64", value=idx, free=False, decl=(-1,))
        norm = np.where(idx < 0, idx + bounds, idx)
        attrs = [A.i("batch_dims", batch_dims)] if batch_dims or g.chance(0.3) else []
        g.case([x, ind], [gather_nd_ref(x.value, norm, batch_dims)], attrs=attrs)


def apply_reduction(old, new, reduction):
    if reduction == "none":
        return new
    if reduction == "add":
        return old + new
    if reduction == "mul":
        return old * new
    if reduction == "max":
        return max(old, new)
    return min(old, new)


def gen_scatter_elements(g):
    cases = [((5,), (3,), 0), ((4, 3), (2, 3), 0), ((4, 3), (4, 2), 1), ((3, 4), (3, 0), 1),
             ((2, 3, 4), (2, 3, 2), -1), ((2, 1, 3, 2, 2, 3), (2, 1, 2, 2, 2, 3), 2),
             ((4, 35), (4, 20), 1)]
    for k in range(len(cases) * 4):
        shape, ishape, axis = cases[k % len(cases)]
        rank = len(shape)
        ax = axis % rank
        reduction = ["none", "add", "mul", "max", "min"][k % 5]
        dtype = g.choice(["float32", "int64", "float16", "int32", "float64"])
        if reduction == "none" and k % 7 == 0:
            dtype = "bool"
        x = g.data(shape, dtype, -5, 5)
        dim = shape[ax]
        # unique targets along the axis when the reduction is none (duplicates are undefined)
        idx = np.zeros(ishape, np.int64)
        for pos in itertools.product(*[range(s) for a, s in enumerate(ishape) if a != ax]):
            line = list(pos[:ax]) + [slice(None)] + list(pos[ax:])
            n = ishape[ax]
            if reduction == "none":
                idx[tuple(line)] = g.rng.permutation(dim)[:n]
            else:
                idx[tuple(line)] = g.rng.integers(0, dim, size=n)
        idx = negate_some(g, idx, dim)
        updates = g.data(ishape, dtype, -5, 5, free=False)
        ind = g.data(ishape, g.choice(["int64", "int32"]), value=idx, free=False)
        out = x.value.copy()
        norm = np.where(idx < 0, idx + dim, idx)
        for pos in itertools.product(*[range(s) for s in ishape]):
            target = list(pos)
            target[ax] = int(norm[pos])
            target = tuple(target)
            out[target] = apply_reduction(out[target], updates.value[pos], reduction)
        attrs = [A.i("axis", axis)] if axis or g.chance(0.5) else []
        if reduction != "none" or g.chance(0.5):
            attrs.append(A.s("reduction", reduction))
        g.case([x, ind, updates], [out.astype(dtype)], attrs=attrs, tol=tol_for(dtype, 2))


def gen_scatter_nd(g):
    cases = [((5,), (3, 1)), ((4, 3), (2, 2)), ((4, 3), (2, 1)), ((2, 3, 4), (2, 2, 2)),
             ((2, 3, 4), (0, 1)), ((2, 2, 3, 2, 1, 2), (3, 3)), ((4, 35), (3, 1))]
    for k in range(len(cases) * 4):
        shape, ishape = cases[k % len(cases)]
        reduction = ["none", "add", "mul", "max", "min"][k % 5]
        dtype = g.choice(["float32", "int64", "float16", "int32", "float64"])
        x = g.data(shape, dtype, -5, 5)
        kdim = ishape[-1]
        bounds = shape[:kdim]
        count = int(np.prod(ishape[:-1]))
        total = int(np.prod(bounds))
        if reduction == "none":
            flat = g.rng.permutation(total)[:count]
        else:
            flat = g.rng.integers(0, total, size=count)
        idx = np.array(np.unravel_index(flat, bounds)).T.reshape(ishape) if count else \
            np.zeros(ishape, np.int64)
        idx = negate_some(g, idx.astype(np.int64), np.array(bounds))
        ushape = ishape[:-1] + shape[kdim:]
        updates = g.data(ushape, dtype, -5, 5, free=False)
        ind = g.data(ishape, "int64", value=idx, free=False, decl=(-1,))
        out = x.value.copy()
        norm = np.where(idx < 0, idx + np.array(bounds), idx)
        for pos in itertools.product(*[range(s) for s in ishape[:-1]]):
            target = tuple(int(v) for v in norm[pos])
            if reduction == "none":
                out[target] = updates.value[pos]
            else:
                old = out[target]
                new = updates.value[pos]
                fn = {"add": np.add, "mul": np.multiply, "max": np.maximum,
                      "min": np.minimum}[reduction]
                out[target] = fn(old, new)
        attrs = [A.s("reduction", reduction)] if reduction != "none" or g.chance(0.5) else []
        g.case([x, ind, updates], [out.astype(dtype)], attrs=attrs, tol=tol_for(dtype, 2))


def gen_compress(g):
    cases = [((5,), 0, 5), ((4, 3), 0, 4), ((4, 3), 1, 2), ((4, 3), None, 12), ((4, 3), None, 5),
             ((0, 3), 1, 3), ((2, 3, 4), -1, 4), ((2, 1, 3, 2, 2, 3), 2, 3), ((4, 35), 1, 35)]
    for k in range(len(cases) * 3):
        shape, axis, clen = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        cond = g.rng.random(clen) < 0.5
        c = g.data((clen,), "bool", value=cond, free=False,
                   kind="init" if g.chance(0.3) else "feed")
        if axis is None:
            expected = np.compress(cond, x.value.reshape(-1))
            attrs = []
        else:
            expected = np.compress(cond, x.value, axis=axis)
            attrs = [A.i("axis", axis)]
        g.case([x, c], [expected], attrs=attrs)


def gen_nonzero(g):
    shapes = [(5,), (3, 4), (0, 3), (2, 3, 4), (2, 1, 3, 2, 2, 3), (4, 35), (1,)]
    for k in range(len(shapes) * 3):
        shape = shapes[k % len(shapes)]
        dtype = dtype_cycle(g, k)
        value = g.values(shape, "int64", -1, 1).astype(dtype)
        if k % 5 == 4:
            value = np.zeros(shape, dtype)
        x = g.data(shape, dtype, value=value, free=False)
        g.case([x], [np.array(np.nonzero(x.value), dtype=np.int64).reshape(len(shape), -1)])


def topk_ref(x, k, axis, largest):
    if x.dtype.kind == "u":
        key = x.astype(np.int64)
    else:
        key = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def gen_topk(g):
    cases = [((5,), 3, -1), ((4, 6), 2, 1), ((4, 6), 4, 0), ((4, 6), 0, -1), ((3, 5), 5, 1),
             ((0, 4), 2, 1), ((2, 3, 4), 1, 1), ((2, 1, 3, 2, 2, 3), 2, 2), ((3, 70), 9, -1)]
    for k in range(len(cases) * 3):
        shape, kk, axis = cases[k % len(cases)]
        dtype = ["float32", "float64", "float16", "int32", "int64", "uint8"][k % 6]
        # a few ties: lower index first
        value = g.values(shape, "int64", 0, max(3, shape[axis] // 2 + 2)).astype(dtype) \
            if k % 2 else g.values(shape, dtype, 0, 100)
        x = g.data(shape, dtype, value=value, free=False)
        largest = int(g.rng.integers(0, 2))
        vals, idx = topk_ref(x.value, kk, axis, largest)
        attrs = [] if axis == -1 and g.chance(0.5) else [A.i("axis", axis)]
        if not largest or g.chance(0.3):
            attrs.append(A.i("largest", largest))
        if g.chance(0.3):
            attrs.append(A.i("sorted", 1))
        kin = g.param([kk], kind="init" if g.chance(0.5) else "feed")
        g.case([x, kin], [vals, idx], attrs=attrs)


def unique_ref(x, axis, sorted_):
    if axis is None:
        y, index, inverse, counts = np.unique(x.reshape(-1), return_index=True,
                                              return_inverse=True, return_counts=True)
    else:
        y, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                              return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted_:
        order = np.argsort(index, kind="stable")
        position = np.argsort(order)
        y = np.take(y, order, axis=0 if axis is None else axis)
        index, counts = index[order], counts[order]
        inverse = position[inverse]
    return [y, index.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


def gen_unique(g):
    cases = [((8,), None), ((3, 4), None), ((0,), None), ((4, 3), 0), ((3, 4), 1),
             ((2, 3, 2), 1), ((2, 1, 2, 2, 1, 2), None), ((40,), None), ((6, 2), -2)]
    for k in range(len(cases) * 3):
        shape, axis = cases[k % len(cases)]
        dtype = ["float32", "int64", "int32", "float64"][k % 4]
        value = g.values(shape, "int64", 0, 3).astype(dtype)
        if axis is not None and shape[axis % len(shape)] > 1:
            # repeat a slice so the axis has a duplicate
            src = np.take(value, [0], axis=axis)
            index = [slice(None)] * len(shape)
            index[axis] = slice(1, 2)
            value[tuple(index)] = src
        x = g.data(shape, dtype, value=value, free=False)
        sorted_ = int(g.rng.integers(0, 2))
        outs = unique_ref(x.value, axis, sorted_)
        count = int(g.rng.integers(1, 5))
        attrs = [] if axis is None else [A.i("axis", axis)]
        if not sorted_ or g.chance(0.3):
            attrs.append(A.i("sorted", sorted_))
        g.case([x], outs[:count], attrs=attrs)


# ---- one program, many shapes ---------------------------------------------------------------

def indexing_runs(op, g):
    if op == "Gather":
        def build(shapes):
            x = g.data(shapes[0], "float32")
            idx = g.values(shapes[1], "int64", -shapes[0][0], shapes[0][0] - 1) \
                if shapes[0][0] else np.zeros(shapes[1], np.int64)
            ind = g.data(shapes[1], "int64", value=idx, free=False)
            return [x, ind], [np.take(x.value, np.where(idx < 0, idx + shapes[0][0], idx),
                                      axis=0)], None
        multi_run(g, build, [((5, 3), (4,)), ((7, 2), (9,)), ((6, 4), (0,)), ((2, 1), (3,))])
    elif op == "TopK":
        k = g.param([2], kind="init")
        def build(shape):
            x = g.data(shape, "float32", free=False)
            vals, idx = topk_ref(x.value, 2, -1, 1)
            return [x, k], [vals, idx], None
        multi_run(g, build, [(4, 6), (3, 9), (5, 3), (0, 4), (1, 2)])
    elif op == "NonZero":
        def build(shape):
            x = g.data(shape, "int32", value=g.values(shape, "int64", -1, 1).astype(np.int32),
                       free=False)
            return [x], [np.array(np.nonzero(x.value), dtype=np.int64).reshape(2, -1)], None
        multi_run(g, build, [(3, 4), (5, 2), (0, 3), (6, 7)])
    elif op == "Compress":
        def build(shapes):
            x = g.data(shapes[0], "float32")
            cond = g.rng.random(shapes[1]) < 0.5
            c = g.data(shapes[1], "bool", value=cond, free=False)
            return [x, c], [np.compress(cond, x.value, axis=1)], None
        multi_run(g, build, [((2, 5), (5,)), ((3, 8), (8,)), ((1, 0), (0,)), ((4, 3), (3,))],
                  attrs=[A.i("axis", 1)])
    elif op == "Unique":
        def build(shape):
            x = g.data(shape, "int64", 0, 4, free=False)
            return [x], unique_ref(x.value, None, 1), None
        multi_run(g, build, [(8,), (3,), (0,), (20,)])


def with_runs(op, generate):
    def both(g):
        generate(g)
        indexing_runs(op, g)
    return both


GENERATORS = {
    "Gather": gen_gather, "GatherElements": gen_gather_elements, "GatherND": gen_gather_nd,
    "ScatterElements": gen_scatter_elements, "ScatterND": gen_scatter_nd,
    "Compress": gen_compress, "NonZero": gen_nonzero, "TopK": gen_topk, "Unique": gen_unique,
}
for _op in ("Gather", "TopK", "NonZero", "Compress", "Unique"):
    GENERATORS[_op] = with_runs(_op, GENERATORS[_op])
