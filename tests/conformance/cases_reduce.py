"""Conformance cases and numpy references for reductions (Reduce* with axes as attribute or
input, keepdims, empty axes, empty reductions), ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax,
CumSum, the two losses, Layer/Batch/Instance normalization and LRN."""

import numpy as np

from gen_cases import A, FLOATS, f32, multi_run, sum_tol, tol_for
from cases_elementwise import sample, to64

REDUCE_SHAPES = [(), (5,), (3, 4), (2, 3, 4), (0, 3), (3, 0, 2), (2, 1, 3, 2, 2, 3), (4, 37),
                 (2, 9, 17)]


def empty_value(op, dtype):
    """What a reduction over an empty set yields (ONNX opset 18)."""
    dtype = np.dtype(dtype)
    if op == "ReduceMax":
        return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    if op == "ReduceMin":
        return np.inf if dtype.kind == "f" else np.iinfo(dtype).max
    if op in ("ReduceLogSum", "ReduceLogSumExp"):
        return -np.inf
    if op == "ReduceProd":
        return 1
    if op == "ReduceMean":
        return np.nan
    return 0


def reduce_ref(op, x, axes, keepdims, noop=False):
    """axes: tuple of non-negative axes (empty tuple: all, unless noop). noop: the op reduces
    over no axis at all (noop_with_empty_axes): each output element is the reduction of one
    element, so ReduceL1 gives |x|, ReduceSumSquare x*x, ReduceLogSum log(x), as in the ONNX
    reference implementation."""
    dtype = x.dtype
    is_int = dtype.kind in "iu"
    v = x.astype(np.int64) if is_int else x.astype(np.float64)
    ax = axes if (axes or noop) else tuple(range(x.ndim))
    count = int(np.prod([x.shape[a] for a in ax])) if ax else 1
    if count == 0:
        shape = [1 if a in ax else d for a, d in enumerate(x.shape)]
        if not keepdims:
            shape = [d for a, d in enumerate(x.shape) if a not in ax]
        return np.full(shape, empty_value(op, dtype)).astype(dtype), np.zeros(shape)
    kw = dict(axis=ax, keepdims=bool(keepdims))
    av = np.abs(v).astype(np.float64)
    if op == "ReduceSum":
        r, mag = np.sum(v, **kw), np.sum(av, **kw)
    elif op == "ReduceMean":
        if is_int:
            s = np.sum(v, **kw)
            q = np.abs(s) // count
            r = np.where(s < 0, -q, q)
        else:
            r = np.mean(v, **kw)
        mag = np.mean(av, **kw)
    elif op == "ReduceMax":
        r, mag = np.max(v, **kw), np.max(av, **kw)
    elif op == "ReduceMin":
        r, mag = np.min(v, **kw), np.max(av, **kw)
    elif op == "ReduceProd":
        r, mag = np.prod(v, **kw), np.prod(av, **kw)
    elif op == "ReduceL1":
        r, mag = np.sum(np.abs(v), **kw), np.sum(av, **kw)
    elif op == "ReduceL2":
        r, mag = np.sqrt(np.sum(v * v, **kw)), np.sqrt(np.sum(av * av, **kw))
    elif op == "ReduceSumSquare":
        r, mag = np.sum(v * v, **kw), np.sum(av * av, **kw)
    elif op == "ReduceLogSum":
        r, mag = np.log(np.sum(v, **kw)), np.ones(1)
    elif op == "ReduceLogSumExp":
        m = np.max(v, axis=ax, keepdims=True)
        r = np.log(np.sum(np.exp(v - m), axis=ax, keepdims=True)) + m
        if not keepdims:
            r = np.squeeze(r, axis=ax)
        mag = np.ones(1) * (np.max(av) if av.size else 0)
    return np.asarray(r).astype(dtype), mag


REDUCE_INT_OK = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                 "ReduceSumSquare")


def gen_reduce(op):
    def generate(g):
        dtypes = list(FLOATS)
        if op in REDUCE_INT_OK:
            dtypes += ["int32", "int64"]
        for dtype in dtypes:
            shapes = REDUCE_SHAPES if dtype == "float32" else sample(g, REDUCE_SHAPES, 5)
            for shape in shapes:
                rank = len(shape)
                low, high = -3.0, 3.0
                if op == "ReduceProd":
                    low, high = (0.6, 1.4) if dtype in FLOATS else (-2, 2)
                if op == "ReduceLogSum":
                    low, high = 0.1, 3.0
                if dtype.startswith("int"):
                    low, high = (low, high) if op == "ReduceProd" else (-20, 20)
                if op == "ReduceMean" and dtype.startswith("int") and 0 in shape:
                    continue  # the mean of no integers is undefined
                x = g.data(shape, dtype, low, high)
                # How the axes are given: 0 none (all), 1 attribute, 2 input, 3 none with
                # noop_with_empty_axes.
                form = int(g.rng.integers(0, 4)) if rank else g.choice([0, 3])
                keepdims = int(g.rng.integers(0, 2))
                attrs = [] if keepdims == 1 and g.chance(0.5) else [A.i("keepdims", keepdims)]
                inputs = [x]
                axes = ()
                if form in (1, 2):
                    count = int(g.rng.integers(1, rank + 1))
                    axes = tuple(sorted(g.rng.choice(rank, size=count, replace=False)))
                    given = [a - rank if g.chance(0.4) else a for a in axes]
                    if form == 1:
                        attrs.append(A.ints("axes", given))
                    else:
                        inputs.append(g.param(given, kind="init"))
                if form == 3:
                    attrs.append(A.i("noop_with_empty_axes", 1))
                    if g.chance(0.5):
                        inputs.append(g.param(np.zeros((0,), np.int64), kind="init"))
                    expected, mag = reduce_ref(op, x.value, (), keepdims, noop=True)
                else:
                    expected, mag = reduce_ref(op, x.value, axes, keepdims)
                scale = 4 if op in ("ReduceProd", "ReduceLogSumExp", "ReduceL2") else 1
                g.case(inputs, [expected], attrs=attrs, tol=sum_tol(dtype, mag, scale))
        # One program, many shapes.
        for axes, keepdims in (((1,), 0), ((0, 2), 1)):
            def build(shape, axes=axes, keepdims=keepdims):
                x = g.data(shape, "float32", 0.5, 1.5)
                expected, mag = reduce_ref(op, x.value, axes, keepdims)
                return [x], [expected], sum_tol("float32", mag, 4)
            multi_run(g, build, [(3, 4, 5), (6, 2, 7), (1, 9, 1), (4, 7, 3), (2, 33, 65)],
                      attrs=[A.ints("axes", list(axes)), A.i("keepdims", keepdims)])
        if op == "ReduceLogSumExp":
            for dtype in FLOATS:
                x = g.data((3, 7), dtype,
                           value=g.values((3, 7), "float64", -1000, 1000).astype(dtype))
                expected, mag = reduce_ref(op, x.value, (1,), 1)
                g.case([x], [expected], attrs=[A.ints("axes", [1])], tol=tol_for(dtype, 4),
                       tag="large")
        if op in ("ReduceMean", "ReduceSum", "ReduceL1"):
            # float16 input whose sum leaves float16's range: the mean stays representable
            x = g.data((40000,), "float16", 1, 3)
            expected, mag = reduce_ref(op, x.value, (0,), 0)
            g.case([x], [expected], attrs=[A.i("keepdims", 0)], tol=sum_tol("float16", mag),
                   tag="f16range")
        # Large: the parallel and vector paths, reducing inner, outer and middle axes.
        for dtype, shape, axes in (("float32", (67, 1029), (1,)), ("float32", (67, 1029), (0,)),
                                   ("float16", (33, 2049), (1,)), ("float32", (16, 300, 24), (1,)),
                                   ("float32", (16, 300, 24), (0, 2))):
            low, high = (0.99, 1.01) if op == "ReduceProd" else (0.1, 3.0)
            x = g.data(shape, dtype, low, high)
            expected, mag = reduce_ref(op, x.value, axes, 0)
            scale = 4 if op in ("ReduceProd", "ReduceLogSumExp", "ReduceL2") else 1
            g.case([x, g.param(list(axes), kind="init")], [expected],
                   attrs=[A.i("keepdims", 0)], tol=sum_tol(dtype, mag, scale), tag="big")
    return generate


# ---- ArgMax / ArgMin ------------------------------------------------------------------------

def gen_arg(op):
    def generate(g):
        shapes = [(5,), (3, 4), (2, 3, 4), (0, 3), (3, 2, 0), (2, 1, 3, 2, 2, 3), (4, 37), (1,)]
        for dtype in ("float32", "float64", "float16", "int32", "int64", "uint8"):
            use = shapes if dtype == "float32" else sample(g, shapes, 4)
            for shape in use:
                rank = len(shape)
                candidates = [a for a in range(rank) if shape[a] > 0]
                axis = g.choice(candidates)
                x = g.data(shape, dtype, value=g.values(shape, "int64", 0, 4).astype(dtype))
                keepdims = int(g.rng.integers(0, 2))
                last = int(g.rng.integers(0, 2))
                v = x.value
                fn = np.argmax if op == "ArgMax" else np.argmin
                if last:
                    idx = v.shape[axis] - 1 - fn(np.flip(v, axis), axis=axis)
                else:
                    idx = fn(v, axis=axis)
                idx = idx.astype(np.int64)
                if keepdims:
                    idx = np.expand_dims(idx, axis)
                attrs = [A.i("axis", axis - rank if g.chance(0.3) else axis)]
                if keepdims == 0 or g.chance(0.5):
                    attrs.append(A.i("keepdims", keepdims))
                if last or g.chance(0.3):
                    attrs.append(A.i("select_last_index", last))
                g.case([x], [idx], attrs=attrs)
        def build(shape):
            x = g.data(shape, "float32", value=g.values(shape, "int64", 0, 5).astype("float32"))
            fn = np.argmax if op == "ArgMax" else np.argmin
            return [x], [fn(x.value, axis=1).astype(np.int64)], None
        multi_run(g, build, [(3, 5), (6, 2), (4, 9), (0, 3), (2, 1)],
                  attrs=[A.i("axis", 1), A.i("keepdims", 0)])
        for shape, axis in (((64, 1000), 1), ((300, 40), 0)):
            x = g.data(shape, "float32")
            fn = np.argmax if op == "ArgMax" else np.argmin
            g.case([x], [fn(x.value, axis=axis).astype(np.int64)],
                   attrs=[A.i("axis", axis), A.i("keepdims", 0)], tag="big")
        # Rank 0 is not allowed; the default axis is 0.
        x = g.data((4, 3), "float32")
        fn = np.argmax if op == "ArgMax" else np.argmin
        g.case([x], [np.expand_dims(fn(x.value, axis=0), 0).astype(np.int64)], tag="default")
    return generate


# ---- softmax family -------------------------------------------------------------------------

SOFTMAX_SHAPES = [(5,), (3, 4), (2, 3, 4), (0, 3), (3, 0), (2, 1, 3, 2, 2, 3), (4, 37),
                  (2, 3, 70), (1, 1)]


def softmax_ref(op, x, axis):
    v = to64(x)
    if v.size == 0:
        return v
    m = np.max(v, axis=axis, keepdims=True)
    e = np.exp(v - m)
    s = np.sum(e, axis=axis, keepdims=True)
    if op == "Softmax":
        return e / s
    if op == "LogSoftmax":
        return v - m - np.log(s)
    idx = np.argmax(v, axis=axis)
    out = np.zeros_like(v)
    np.put_along_axis(out, np.expand_dims(idx, axis), 1.0, axis=axis)
    return out


def gen_softmax(op):
    def generate(g):
        for dtype in FLOATS:
            shapes = SOFTMAX_SHAPES if dtype == "float32" else sample(g, SOFTMAX_SHAPES, 5)
            for shape in shapes:
                rank = len(shape)
                axis = int(g.rng.integers(-rank, rank))
                value = g.values(shape, dtype, -4, 4)
                if op == "Hardmax":
                    value = g.values(shape, "int64", 0, 5).astype(dtype)  # ties: first wins
                x = g.data(shape, dtype, value=value, free=op != "Hardmax")
                attrs = [] if axis == -1 and g.chance(0.5) else [A.i("axis", axis)]
                expected = softmax_ref(op, x.value, axis).astype(dtype)
                g.case([x], [expected], attrs=attrs, tol=tol_for(dtype, 4))
        def build(shape):
            x = g.data(shape, "float32", -4, 4, free=op != "Hardmax")
            return [x], [softmax_ref(op, x.value, 1).astype(np.float32)], tol_for("float32", 4)
        multi_run(g, build, [(3, 5, 2), (6, 2, 4), (1, 11, 1), (4, 1, 3), (0, 3, 2), (2, 70, 9)],
                  attrs=[A.i("axis", 1)])
        for shape, axis in (((33, 1000), -1), ((16, 500, 8), 1)):
            x = g.data(shape, "float32", -4, 4)
            g.case([x], [softmax_ref(op, x.value, axis).astype(np.float32)],
                   attrs=[A.i("axis", axis)], tol=tol_for("float32", 4), tag="big")
        # Large magnitudes: exp() overflows unless the maximum is subtracted first.
        for dtype in FLOATS:
            x = g.data((4, 9), dtype, value=g.values((4, 9), "float64", -1000, 1000).astype(dtype))
            g.case([x], [softmax_ref(op, x.value, -1).astype(dtype)], tol=tol_for(dtype, 4),
                   tag="large")
        # -inf entries contribute nothing.
        value = g.values((3, 5), "float32")
        value[:, 1] = -np.inf
        x = g.data((3, 5), "float32", value=value, view="c")
        g.case([x], [softmax_ref(op, x.value, -1).astype(np.float32)], tag="neginf")
    return generate


# ---- CumSum ---------------------------------------------------------------------------------

def cumsum_ref(x, axis, exclusive, reverse):
    v = x.astype(np.int64) if x.dtype.kind in "iu" else to64(x)
    if reverse:
        v = np.flip(v, axis)
    c = np.cumsum(v, axis=axis)
    if exclusive:
        c = c - v
    if reverse:
        c = np.flip(c, axis)
    return c.astype(x.dtype), np.cumsum(np.abs(to64(x)), axis=axis)


def gen_cumsum(g):
    shapes = [(5,), (3, 4), (2, 3, 4), (0, 3), (3, 0), (2, 1, 3, 2, 2, 3), (4, 37), (1,),
              (70,)]
    for dtype in ("float32", "float64", "float16", "int32", "int64"):
        use = shapes if dtype == "float32" else sample(g, shapes, 5)
        for shape in use:
            rank = len(shape)
            axis = int(g.rng.integers(-rank, rank))
            x = g.data(shape, dtype, -20, 20)
            exclusive, reverse = int(g.rng.integers(0, 2)), int(g.rng.integers(0, 2))
            attrs = []
            if exclusive or g.chance(0.3):
                attrs.append(A.i("exclusive", exclusive))
            if reverse or g.chance(0.3):
                attrs.append(A.i("reverse", reverse))
            axis_input = g.param(axis, g.choice(["int64", "int32"]), scalar=g.chance(0.7))
            expected, mag = cumsum_ref(x.value, axis % rank, exclusive, reverse)
            g.case([x, axis_input], [expected], attrs=attrs, tol=sum_tol(dtype, mag))
    def build(shape):
        x = g.data(shape, "float32", -1, 1)
        expected, mag = cumsum_ref(x.value, 1, 1, 0)
        return [x, g.param(1, kind="init", scalar=True)], [expected], sum_tol("float32", mag)
    multi_run(g, build, [(3, 5), (6, 2), (0, 4), (2, 70)], attrs=[A.i("exclusive", 1)])
    for shape, axis in (((8, 5000), 1), ((3000, 9), 0)):
        x = g.data(shape, "float32", -1, 1)
        expected, mag = cumsum_ref(x.value, axis, 0, 0)
        g.case([x, g.param(axis, scalar=True)], [expected], tol=sum_tol("float32", mag),
               tag="big")


# ---- losses ---------------------------------------------------------------------------------

def nll_ref(logp, target, weight, reduction, ignore_index):
    """logp: [N, C, d...] float64; target: [N, d...]."""
    c = logp.shape[1]
    t = target.astype(np.int64)
    valid = t != ignore_index if ignore_index is not None else np.ones(t.shape, bool)
    safe = np.where(valid, t, 0)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1)[:, 0]
    w = np.ones(c) if weight is None else weight
    wt = np.where(valid, w[safe], 0.0)
    loss = -picked * wt
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.sum(loss)
    return np.sum(loss) / np.sum(wt)


def loss_inputs(g, dtype):
    n, c = int(g.rng.integers(1, 5)), int(g.rng.integers(2, 6))
    extra = g.choice([(), (3,), (2, 3)])
    scores = g.values((n, c) + extra, dtype, -3, 3)
    target = g.values((n,) + extra, "int64", 0, c - 1)
    return scores, target, c


def gen_nll(g):
    for dtype in FLOATS:
        for k in range(8):
            scores, target, c = loss_inputs(g, dtype)
            reduction = g.choice(["mean", "sum", "none"])
            use_weight = g.chance(0.5)
            ignore = None
            if g.chance(0.4):
                ignore = int(g.rng.integers(0, c))
                if np.all(target == ignore):
                    target.reshape(-1)[0] = (ignore + 1) % c
            elif g.chance(0.3):
                ignore = -100  # the usual "padding" label, outside [0, C)
                target.reshape(-1)[-1] = -100
            tdtype = g.choice(["int64", "int32"])
            x = g.data(scores.shape, dtype, value=scores)
            t = g.data(target.shape, tdtype, value=target.astype(tdtype), free=False)
            weight = g.values((c,), dtype, 0.2, 2.0) if use_weight else None
            inputs = [x, t]
            if use_weight:
                inputs.append(g.data((c,), dtype, value=weight, free=False))
            attrs = []
            if reduction != "mean" or g.chance(0.5):
                attrs.append(A.s("reduction", reduction))
            if ignore is not None:
                attrs.append(A.i("ignore_index", ignore))
            r = nll_ref(to64(x.value), target, None if weight is None else to64(weight),
                        reduction, ignore)
            mag = np.sum(np.abs(to64(x.value)))
            g.case(inputs, [np.asarray(r).astype(dtype)], attrs=attrs,
                   tol=sum_tol(dtype, mag, 2))


def gen_sce(g):
    for dtype in FLOATS:
        for k in range(8):
            scores, target, c = loss_inputs(g, dtype)
            reduction = g.choice(["mean", "sum", "none"])
            use_weight = g.chance(0.4)
            ignore = None
            if g.chance(0.4):
                ignore = int(g.rng.integers(0, c))
                if np.all(target == ignore):
                    target.reshape(-1)[0] = (ignore + 1) % c
            x = g.data(scores.shape, dtype, value=scores)
            t = g.data(target.shape, "int64", value=target, free=False)
            weight = g.values((c,), dtype, 0.2, 2.0) if use_weight else None
            inputs = [x, t]
            if use_weight:
                inputs.append(g.data((c,), dtype, value=weight, free=False))
            attrs = []
            if reduction != "mean" or g.chance(0.5):
                attrs.append(A.s("reduction", reduction))
            if ignore is not None:
                attrs.append(A.i("ignore_index", ignore))
            logp = softmax_ref("LogSoftmax", x.value, 1)
            r = nll_ref(logp, target, None if weight is None else to64(weight), reduction,
                        ignore)
            mag = np.sum(np.abs(logp))
            outs = [np.asarray(r).astype(dtype)]
            tols = [sum_tol(dtype, mag, 4)]
            if g.chance(0.5):
                outs.append(logp.astype(dtype))
                tols.append(tol_for(dtype, 4))
            g.case(inputs, outs, attrs=attrs, tol=tols)


# ---- normalization --------------------------------------------------------------------------

def gen_layernorm(g):
    shapes = [(4,), (3, 8), (2, 3, 16), (0, 8), (2, 1, 3, 2, 2, 5), (5, 67), (2, 3, 4, 5),
              (256, 768)]
    for dtype in FLOATS:
        use = shapes if dtype == "float32" else sample(g, shapes, 4)
        for shape in use:
            rank = len(shape)
            axis = int(g.rng.integers(-rank, rank))
            a = axis % rank
            norm_shape = shape[a:]
            if 0 in norm_shape:
                continue
            x = g.data(shape, dtype, -3, 3)
            scale = g.data(norm_shape, dtype, 0.5, 1.5, free=False,
                           kind=g.choice(["feed", "init"]))
            has_bias = g.chance(0.7)
            bias = g.data(norm_shape, dtype, -1, 1, free=False) if has_bias else None
            eps = g.choice([1e-5, 1e-3, 0.1])
            v = to64(x.value)
            axes = tuple(range(a, rank))
            stat_shape = shape[:a] + (1,) * (rank - a)
            mean = np.mean(v, axis=axes, keepdims=True) if v.size else np.zeros(stat_shape)
            var = np.mean((v - mean) ** 2, axis=axes, keepdims=True) if v.size else mean
            inv = 1 / np.sqrt(var + f32(eps))
            y = (v - mean) * inv * to64(scale.value)
            if has_bias:
                y = y + to64(bias.value)
            attrs = [A.f("epsilon", eps)]
            if axis != -1 or g.chance(0.5):
                attrs.append(A.i("axis", axis))
            inputs = [x, scale] + ([bias] if has_bias else [])
            outs = [y.astype(dtype)]
            tols = [tol_for(dtype, 8)]
            if g.chance(0.5):
                outs += [mean.astype(np.float32), inv.astype(np.float32)]
                stat_tol = (1e-4, 1e-5) if dtype == "float16" else tol_for("float32", 8)
                tols += [stat_tol, stat_tol]
            g.case(inputs, outs, attrs=attrs, tol=tols, keep_float32=(1, 2))
    layernorm_runs(g)
    offset_normalization(g, "LayerNormalization")


def offset_normalization(g, op):
    """Data far from zero with a small spread: E[x^2] - E[x]^2 cancels catastrophically."""
    for shape in ((4, 64), (2, 3, 50)) if op == "LayerNormalization" else ((1, 4, 64), (2, 3, 50)):
        value = 1000 + g.values(shape, "float64", -1, 1)
        x = g.data(shape, "float32", value=value.astype(np.float32))
        v = to64(x.value)
        c = shape[1]
        if op == "LayerNormalization":
            axes, pshape = (len(shape) - 1,), shape[-1:]
        else:
            axes, pshape = tuple(range(2, len(shape))), (c,)
        scale = g.data(pshape, "float32", 0.5, 1.5, free=False)
        bias = g.data(pshape, "float32", -1, 1, free=False)
        mean = np.mean(v, axis=axes, keepdims=True)
        var = np.var(v, axis=axes, keepdims=True)
        y = (v - mean) / np.sqrt(var + f32(1e-5))
        bshape = pshape if op == "LayerNormalization" else (1, c) + (1,) * (len(shape) - 2)
        y = y * to64(scale.value).reshape(bshape) + to64(bias.value).reshape(bshape)
        g.case([x, scale, bias], [y.astype(np.float32)], tol=(1e-3, 1e-3), tag="offset")


def layernorm_runs(g):
    scale = g.data((8,), "float32", 0.5, 1.5, kind="init")
    bias = g.data((8,), "float32", -1, 1, kind="init")

    def build(shape):
        x = g.data(shape, "float32", -3, 3)
        v = to64(x.value)
        mean = np.mean(v, axis=-1, keepdims=True) if v.size else np.zeros(shape[:-1] + (1,))
        var = np.mean((v - mean) ** 2, axis=-1, keepdims=True) if v.size else mean
        y = (v - mean) / np.sqrt(var + f32(1e-5)) * to64(scale.value) + to64(bias.value)
        return [x, scale, bias], [y.astype(np.float32)], tol_for("float32", 8)
    multi_run(g, build, [(3, 8), (5, 8), (0, 8), (1, 8), (300, 8)])


def gen_batchnorm(g):
    shapes = [(2, 3), (2, 3, 4), (1, 4, 3, 3), (0, 3, 2), (2, 2, 1, 2, 2, 3), (3, 5, 17)]
    for dtype in FLOATS:
        use = shapes if dtype == "float32" else sample(g, shapes, 3)
        for shape in use:
            c = shape[1]
            x = g.data(shape, dtype, -3, 3)
            params = [g.data((c,), dtype, lo, hi, free=False, kind=g.choice(["feed", "init"]))
                      for lo, hi in ((0.5, 1.5), (-1, 1), (-0.5, 0.5), (0.5, 2.0))]
            eps = g.choice([1e-5, 0.01])
            bshape = (1, c) + (1,) * (len(shape) - 2)
            s, b, m, var = [to64(p.value).reshape(bshape) for p in params]
            v = to64(x.value)
            y = (v - m) / np.sqrt(var + f32(eps)) * s + b
            g.case([x] + params, [y.astype(dtype)], attrs=[A.f("epsilon", eps)],
                   tol=tol_for(dtype, 8))
    # Training mode: batch statistics, running statistics updated with momentum.
    for dtype in ("float32", "float64"):
        for shape in ((4, 3), (2, 3, 5), (3, 2, 2, 2)):
            c = shape[1]
            x = g.data(shape, dtype, -3, 3)
            params = [g.data((c,), dtype, lo, hi, free=False)
                      for lo, hi in ((0.5, 1.5), (-1, 1), (-0.5, 0.5), (0.5, 2.0))]
            momentum, eps = 0.8, 1e-5
            axes = (0,) + tuple(range(2, len(shape)))
            v = to64(x.value)
            bm = np.mean(v, axis=axes)
            bv = np.var(v, axis=axes)
            bshape = (1, c) + (1,) * (len(shape) - 2)
            s, b = to64(params[0].value).reshape(bshape), to64(params[1].value).reshape(bshape)
            y = (v - bm.reshape(bshape)) / np.sqrt(bv.reshape(bshape) + f32(eps)) * s + b
            rm = to64(params[2].value) * f32(momentum) + bm * (1 - f32(momentum))
            rv = to64(params[3].value) * f32(momentum) + bv * (1 - f32(momentum))
            g.case([x] + params, [y.astype(dtype), rm.astype(dtype), rv.astype(dtype)],
                   attrs=[A.f("epsilon", eps), A.f("momentum", momentum),
                          A.i("training_mode", 1)],
                   tol=tol_for(dtype, 8), tag="training")


def gen_instancenorm(g):
    shapes = [(2, 3, 4), (1, 2, 3, 3), (2, 3, 1), (0, 2, 5), (2, 1, 2, 2, 3, 2), (2, 4, 67)]
    for dtype in FLOATS:
        use = shapes if dtype == "float32" else sample(g, shapes, 3)
        for shape in use:
            c = shape[1]
            x = g.data(shape, dtype, -3, 3)
            scale = g.data((c,), dtype, 0.5, 1.5, free=False)
            bias = g.data((c,), dtype, -1, 1, free=False)
            eps = g.choice([1e-5, 0.01])
            v = to64(x.value)
            axes = tuple(range(2, len(shape)))
            bshape = (1, c) + (1,) * (len(shape) - 2)
            if v.size:
                mean = np.mean(v, axis=axes, keepdims=True)
                var = np.var(v, axis=axes, keepdims=True)
                y = (v - mean) / np.sqrt(var + f32(eps))
            else:
                y = v
            y = y * to64(scale.value).reshape(bshape) + to64(bias.value).reshape(bshape)
            g.case([x, scale, bias], [y.astype(dtype)], attrs=[A.f("epsilon", eps)],
                   tol=tol_for(dtype, 8))
    offset_normalization(g, "InstanceNormalization")


def lrn_reference(v, size, alpha, beta, bias):
    """ONNX's LRN: squares summed over channels c - floor((size-1)/2) .. c + ceil((size-1)/2),
    clipped to the channel range; alpha, beta, bias are float32 attributes."""
    alpha, beta, bias = f32(alpha), f32(beta), f32(bias)
    channels = v.shape[1]
    square_sum = np.zeros_like(v)
    for c in range(channels):
        first, last = max(0, c - (size - 1) // 2), min(channels - 1, c + size // 2)
        square_sum[:, c] = np.sum(v[:, first:last + 1] ** 2, axis=1)
    return v / (bias + alpha / size * square_sum) ** beta


def gen_lrn(g):
    # C below, at and above size; C = 1; even and odd sizes; ranks 3 to 5; an empty batch
    cases = [((2, 3, 4, 5), 5), ((1, 1, 3, 3), 3), ((2, 6, 2, 2), 2), ((1, 7, 5), 4),
             ((2, 4, 1, 2, 3), 3), ((0, 3, 2, 2), 3), ((1, 16, 9, 9), 5), ((2, 9, 40), 1)]
    for dtype in FLOATS:
        use = cases if dtype == "float32" else sample(g, cases, 4)
        for shape, size in use:
            x = g.data(shape, dtype, -3, 3)
            alpha, beta, bias = g.choice([(1e-4, 0.75, 1.0), (0.5, 0.6, 2.0), (2.0, 1.0, 0.5)])
            y = lrn_reference(to64(x.value), size, alpha, beta, bias)
            g.case([x], [y.astype(dtype)],
                   attrs=[A.i("size", size), A.f("alpha", alpha), A.f("beta", beta),
                          A.f("bias", bias)],
                   tol=tol_for(dtype, 8))
    x = g.data((2, 5, 3, 3), "float32", -3, 3)
    g.case([x], [lrn_reference(to64(x.value), 3, 1e-4, 0.75, 1.0).astype(np.float32)],
           attrs=[A.i("size", 3)], tol=tol_for("float32", 8), tag="defaults")


GENERATORS = {
    "ArgMax": gen_arg("ArgMax"), "ArgMin": gen_arg("ArgMin"),
    "Softmax": gen_softmax("Softmax"), "LogSoftmax": gen_softmax("LogSoftmax"),
    "Hardmax": gen_softmax("Hardmax"), "CumSum": gen_cumsum,
    "NegativeLogLikelihoodLoss": gen_nll, "SoftmaxCrossEntropyLoss": gen_sce,
    "LayerNormalization": gen_layernorm, "BatchNormalization": gen_batchnorm,
    "InstanceNormalization": gen_instancenorm, "LRN": gen_lrn,
}
for _op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
            "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"):
    GENERATORS[_op] = gen_reduce(_op)
