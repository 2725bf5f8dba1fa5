"""Conformance cases and numpy references for MatMul, Gemm, Einsum, Conv, ConvTranspose and the
pools. Convolutions and pools are written as loops over kernel positions with strided slices
(small sizes), independent of any im2col/GEMM formulation a kernel might use."""

import itertools

import numpy as np

from gen_cases import A, FLOATS, f32, multi_run, sum_tol, tol_for
from cases_elementwise import sample, to64


def as_compute(v):
    return v.astype(np.int64) if v.dtype.kind in "iu" else to64(v)


# ---- MatMul ---------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((0, 4), (4, 5)), ((3, 0), (0, 5)),
    ((3, 4), (4, 0)), ((2, 2, 1, 2, 3, 4), (1, 2, 4, 2)), ((65, 130), (130, 33)),
    ((17, 64), (64, 48)), ((1, 1), (1, 1)), ((5, 1, 7), (7, 1)), ((3, 2, 9, 31), (31, 20)),
    ((128, 256), (256, 96)), ((8, 64, 64), (8, 64, 64)), ((1, 300), (300, 200)),
]


def gen_matmul(g):
    for dtype in ("float32", "float64", "float16", "int32", "int64"):
        use = MATMUL_SHAPES if dtype == "float32" else sample(g, MATMUL_SHAPES, 7)
        for sa, sb in use:
            low, high = (-5, 5) if dtype.startswith("int") else (-1.0, 1.0)
            a, b = g.data(sa, dtype, low, high), g.data(sb, dtype, low, high)
            r = np.matmul(as_compute(a.value), as_compute(b.value))
            mag = np.matmul(np.abs(to64(a.value)), np.abs(to64(b.value)))
            g.case([a, b], [np.asarray(r).astype(dtype)], tol=sum_tol(dtype, mag))
    matmul_runs(g)


def matmul_runs(g):
    def build(shapes):
        a, b = g.data(shapes[0], "float32", -1, 1), g.data(shapes[1], "float32", -1, 1)
        mag = np.matmul(np.abs(to64(a.value)), np.abs(to64(b.value)))
        return [a, b], [np.matmul(to64(a.value), to64(b.value)).astype(np.float32)], \
            sum_tol("float32", mag)
    multi_run(g, build, [((3, 4), (4, 5)), ((6, 2), (2, 9)), ((1, 7), (7, 1)), ((0, 3), (3, 2)),
                         ((5, 0), (0, 4)), ((70, 40), (40, 33))])
    multi_run(g, build, [((2, 3, 4), (2, 4, 5)), ((3, 5, 2), (3, 2, 7)), ((1, 2, 3), (1, 3, 4)),
                         ((4, 0, 6), (4, 6, 2))])
    # the weight a constant, as in a model
    weight = g.data((6, 5), "float32", -1, 1, kind="init")
    def build_weight(shape):
        a = g.data(shape, "float32", -1, 1)
        mag = np.abs(to64(a.value)) @ np.abs(to64(weight.value))
        return [a, weight], [(to64(a.value) @ to64(weight.value)).astype(np.float32)], \
            sum_tol("float32", mag)
    multi_run(g, build_weight, [(2, 3, 6), (4, 1, 6), (1, 9, 6), (0, 2, 6), (3, 40, 6)])


def gen_gemm(g):
    dims = [(3, 4, 5), (1, 1, 1), (0, 3, 4), (4, 0, 3), (5, 3, 0), (33, 65, 17), (8, 16, 9),
            (200, 300, 150)]
    for dtype in ("float32", "float64", "float16", "int32", "int64"):
        use = dims if dtype == "float32" else sample(g, dims, 4)
        for m, k, n in use:
            trans_a, trans_b = int(g.rng.integers(0, 2)), int(g.rng.integers(0, 2))
            low, high = (-5, 5) if dtype.startswith("int") else (-1.0, 1.0)
            a = g.data((k, m) if trans_a else (m, k), dtype, low, high)
            b = g.data((n, k) if trans_b else (k, n), dtype, low, high)
            c_shape = g.choice([None, (), (n,), (1, n), (m, 1), (m, n)])
            is_int = dtype.startswith("int")
            alpha = 1.0 if is_int else g.choice([1.0, 0.5, -2.0])
            beta = 1.0 if is_int else g.choice([1.0, 0.25, 0.0])
            av = as_compute(a.value)
            bv = as_compute(b.value)
            av = av.T if trans_a else av
            bv = bv.T if trans_b else bv
            r = f32(alpha) * (av @ bv) if not is_int else av @ bv
            mag = np.abs(to64(av)) @ np.abs(to64(bv))
            inputs = [a, b]
            if c_shape is not None:
                c = g.data(c_shape, dtype, low, high, kind=g.choice(["feed", "init"]))
                inputs.append(c)
                r = r + (f32(beta) if not is_int else 1) * as_compute(c.value)
                mag = mag + np.abs(to64(c.value))
            attrs = []
            for name, v, default in (("transA", trans_a, 0), ("transB", trans_b, 0)):
                if v != default or g.chance(0.3):
                    attrs.append(A.i(name, v))
            if alpha != 1.0:
                attrs.append(A.f("alpha", alpha))
            if beta != 1.0:
                attrs.append(A.f("beta", beta))
            r = np.broadcast_to(r, (m, n))
            g.case(inputs, [np.asarray(r).astype(dtype)], attrs=attrs,
                   tol=sum_tol(dtype, mag * 2))

    def build(dims):
        m, k, n = dims
        a, b = g.data((k, m), "float32", -1, 1), g.data((k, n), "float32", -1, 1)
        c = g.data((n,), "float32", -1, 1)
        r = f32(0.5) * (to64(a.value).T @ to64(b.value)) + f32(2.0) * to64(c.value)
        mag = np.abs(to64(a.value)).T @ np.abs(to64(b.value)) + 2 * np.abs(to64(c.value))
        return [a, b, c], [r.astype(np.float32)], sum_tol("float32", mag * 2)
    multi_run(g, build, [(3, 4, 5), (7, 2, 6), (1, 1, 1), (0, 3, 2), (6, 0, 3), (40, 33, 65)],
              attrs=[A.i("transA", 1), A.f("alpha", 0.5), A.f("beta", 2.0)])


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]), ("ij->ji", [(3, 5)]), ("ij->", [(3, 4)]), ("i,i->", [(6,), (6,)]),
    ("i,j->ij", [(3,), (4,)]), ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("ij,jk", [(3, 4), (4, 2)]),
    ("abc->cba", [(2, 3, 4)]), ("ijk,k->ij", [(2, 3, 4), (4,)]), ("ii", [(3, 3)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]), ("bij,jk->bik", [(2, 3, 4), (4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]), ("ij,jk->ik", [(0, 3), (3, 2)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]), ("abcdef->fedcba", [(1, 2, 1, 3, 2, 2)]),
    ("...i,...i->...", [(2, 3, 4), (3, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("i->", [(7,)]), ("ij->i", [(4, 33)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]


def gen_einsum(g):
    for dtype in ("float32", "float64", "float16", "int64", "int32"):
        use = EINSUM if dtype == "float32" else sample(g, EINSUM, 8)
        for equation, shapes in use:
            low, high = (-4, 4) if dtype.startswith("int") else (-1.0, 1.0)
            xs = [g.data(s, dtype, low, high) for s in shapes]
            r = np.einsum(equation, *[as_compute(x.value) for x in xs])
            mag = np.einsum(equation, *[np.abs(to64(x.value)) for x in xs])
            g.case(xs, [np.asarray(r).astype(dtype)], attrs=[A.s("equation", equation)],
                   tol=sum_tol(dtype, mag))


# ---- convolution ----------------------------------------------------------------------------

def same_pads(in_sizes, kernel, strides, dilations, mode):
    begin, end = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small = total // 2
        if mode == "SAME_UPPER":
            begin.append(small)
            end.append(total - small)
        else:
            begin.append(total - small)
            end.append(small)
    return begin + end


def conv_ref(x, w, b, strides, pads, dilations, group):
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    nd = x.ndim - 2
    xs = as_compute(x)
    wv = as_compute(w)
    xp = np.pad(xs, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    out_sp = [(x.shape[2 + i] + pads[i] + pads[i + nd] - (dilations[i] * (w.shape[2 + i] - 1) + 1))
              // strides[i] + 1 for i in range(nd)]
    out = np.zeros((n, m) + tuple(out_sp), dtype=xs.dtype)
    mag = np.zeros_like(out, dtype=np.float64)
    mg = m // group
    for gi in range(group):
        xg = xp[:, gi * cg:(gi + 1) * cg]
        wg = wv[gi * mg:(gi + 1) * mg]
        for kidx in itertools.product(*[range(k) for k in w.shape[2:]]):
            sl = tuple(slice(kidx[i] * dilations[i],
                             kidx[i] * dilations[i] + strides[i] * (out_sp[i] - 1) + 1,
                             strides[i]) for i in range(nd))
            patch = xg[(slice(None), slice(None)) + sl]
            wk = wg[(slice(None), slice(None)) + kidx]
            out[:, gi * mg:(gi + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wk)
            mag[:, gi * mg:(gi + 1) * mg] += np.einsum("nc...,mc->nm...", np.abs(patch),
                                                       np.abs(wk))
    if b is not None:
        out = out + as_compute(b).reshape((1, m) + (1,) * nd)
        mag = mag + np.abs(to64(b)).reshape((1, m) + (1,) * nd)
    return out, mag


# (x shape, w shape, group, strides, pads, dilations, auto_pad)
CONV_CASES = [
    ((1, 1, 5), (1, 1, 3), 1, None, None, None, None),
    ((2, 3, 9), (4, 3, 3), 1, [2], [1, 2], None, None),
    ((1, 2, 5, 5), (3, 2, 3, 3), 1, None, [1, 1, 1, 1], None, None),
    ((2, 4, 6, 7), (4, 2, 3, 2), 2, [2, 1], [0, 1, 1, 0], None, None),
    ((1, 4, 7, 7), (4, 1, 3, 3), 4, None, [1, 1, 1, 1], [2, 2], None),
    ((1, 3, 6, 6), (6, 1, 3, 3), 3, [2, 2], None, None, None),
    ((1, 2, 6, 5), (2, 2, 3, 3), 1, [2, 2], None, None, "SAME_UPPER"),
    ((1, 2, 6, 5), (2, 2, 2, 3), 1, [1, 2], None, None, "SAME_LOWER"),
    ((1, 2, 6, 5), (2, 2, 3, 3), 1, [2, 1], None, None, "VALID"),
    ((0, 2, 4, 4), (3, 2, 3, 3), 1, None, None, None, None),
    ((1, 2, 3, 4, 4), (2, 2, 2, 3, 3), 1, [1, 2, 1], [0, 1, 1, 1, 0, 0], None, None),
    ((1, 8, 16, 16), (16, 8, 3, 3), 1, None, [1, 1, 1, 1], None, None),
    ((2, 3, 1, 1), (5, 3, 1, 1), 1, None, None, None, None),
    ((1, 6, 5, 9), (4, 3, 1, 3), 2, [1, 3], [0, 0, 0, 2], [1, 2], None),
    ((2, 16, 24, 24), (32, 16, 3, 3), 1, None, [1, 1, 1, 1], None, None),
    ((1, 32, 20, 20), (32, 1, 3, 3), 32, [2, 2], [1, 1, 1, 1], None, None),
]


def conv_attrs(g, nd, kernel, strides, pads, dilations, auto_pad, group):
    attrs = []
    if g.chance(0.5):
        attrs.append(A.ints("kernel_shape", kernel))
    if strides is not None:
        attrs.append(A.ints("strides", strides))
    if pads is not None:
        attrs.append(A.ints("pads", pads))
    if dilations is not None:
        attrs.append(A.ints("dilations", dilations))
    if auto_pad is not None:
        attrs.append(A.s("auto_pad", auto_pad))
    if group != 1 or g.chance(0.3):
        attrs.append(A.i("group", group))
    return attrs


def gen_conv(g):
    for dtype in FLOATS:
        use = CONV_CASES if dtype == "float32" else sample(g, CONV_CASES, 5)
        for xs, ws, group, strides, pads, dilations, auto_pad in use:
            nd = len(xs) - 2
            kernel = list(ws[2:])
            st = strides or [1] * nd
            dl = dilations or [1] * nd
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                pd = same_pads(xs[2:], kernel, st, dl, auto_pad)
            else:
                pd = pads or [0] * (2 * nd)
            x = g.data(xs, dtype, -1, 1)
            w = g.data(ws, dtype, -1, 1, kind=g.choice(["feed", "init", "init"]))
            has_bias = g.chance(0.5)
            b = g.data((ws[0],), dtype, -1, 1, free=False) if has_bias else None
            r, mag = conv_ref(x.value, w.value, None if b is None else b.value, st, pd, dl, group)
            attrs = conv_attrs(g, nd, kernel, strides, pads, dilations, auto_pad, group)
            inputs = [x, w] + ([b] if has_bias else [])
            g.case(inputs, [r.astype(dtype)], attrs=attrs, tol=sum_tol(dtype, mag))
    conv_runs(g)


def conv_runs(g):
    w = g.data((4, 3, 3, 3), "float32", -1, 1, kind="init")
    b = g.data((4,), "float32", -1, 1, kind="init")
    def build(shape):
        x = g.data(shape, "float32", -1, 1)
        r, mag = conv_ref(x.value, w.value, b.value, [2, 1], [1, 1, 1, 1], [1, 1], 1)
        return [x, w, b], [r.astype(np.float32)], sum_tol("float32", mag)
    multi_run(g, build, [(2, 3, 7, 8), (1, 3, 9, 5), (5, 3, 4, 6), (0, 3, 6, 6), (1, 3, 30, 31)],
              attrs=[A.ints("strides", [2, 1]), A.ints("pads", [1, 1, 1, 1])])


def conv_transpose_ref(x, w, b, strides, pads, dilations, group, out_pad):
    n, c = x.shape[:2]
    cg = c // group
    mg = w.shape[1]
    m = mg * group
    nd = x.ndim - 2
    ks = w.shape[2:]
    in_sp = x.shape[2:]
    full = [strides[i] * (in_sp[i] - 1) + (ks[i] - 1) * dilations[i] + 1 + out_pad[i]
            for i in range(nd)]
    xs, wv = to64(x), to64(w)
    out = np.zeros((n, m) + tuple(full))
    mag = np.zeros_like(out)
    for gi in range(group):
        xg = xs[:, gi * cg:(gi + 1) * cg]
        wg = wv[gi * cg:(gi + 1) * cg]
        for kidx in itertools.product(*[range(k) for k in ks]):
            sl = tuple(slice(kidx[i] * dilations[i],
                             kidx[i] * dilations[i] + strides[i] * (in_sp[i] - 1) + 1,
                             strides[i]) for i in range(nd))
            wk = wg[(slice(None), slice(None)) + kidx]
            target = (slice(None), slice(gi * mg, (gi + 1) * mg)) + sl
            out[target] += np.einsum("nc...,cm->nm...", xg, wk)
            mag[target] += np.einsum("nc...,cm->nm...", np.abs(xg), np.abs(wk))
    crop = tuple(slice(pads[i], full[i] - pads[i + nd]) for i in range(nd))
    out = out[(slice(None), slice(None)) + crop]
    mag = mag[(slice(None), slice(None)) + crop]
    if b is not None:
        out = out + to64(b).reshape((1, m) + (1,) * nd)
        mag = mag + np.abs(to64(b)).reshape((1, m) + (1,) * nd)
    return out, mag


# (x shape, w shape, group, strides, pads, dilations, output_padding)
CONVT_CASES = [
    ((1, 1, 4), (1, 1, 3), 1, None, None, None, None),
    ((2, 2, 5), (2, 3, 3), 1, [2], [1, 0], None, [1]),
    ((1, 2, 3, 3), (2, 2, 3, 3), 1, [2, 2], [1, 1, 1, 1], None, None),
    ((1, 4, 3, 4), (4, 1, 2, 2), 2, [1, 2], [0, 0, 0, 0], [2, 1], None),
    ((1, 3, 4, 3), (3, 1, 3, 3), 3, [3, 2], [1, 0, 0, 1], None, [1, 1]),
    ((0, 2, 3, 3), (2, 2, 2, 2), 1, None, None, None, None),
    ((1, 2, 2, 3, 2), (2, 1, 2, 2, 2), 1, [2, 1, 2], None, None, None),
    ((2, 8, 7, 7), (8, 4, 3, 3), 1, [2, 2], [1, 1, 1, 1], None, [1, 1]),
]


def gen_conv_transpose(g):
    for dtype in FLOATS:
        use = CONVT_CASES if dtype == "float32" else sample(g, CONVT_CASES, 4)
        for xs, ws, group, strides, pads, dilations, out_pad in use:
            nd = len(xs) - 2
            st = strides or [1] * nd
            dl = dilations or [1] * nd
            pd = pads or [0] * (2 * nd)
            op_ = out_pad or [0] * nd
            x = g.data(xs, dtype, -1, 1)
            w = g.data(ws, dtype, -1, 1, kind=g.choice(["feed", "init"]))
            has_bias = g.chance(0.5)
            b = g.data((ws[1] * group,), dtype, -1, 1, free=False) if has_bias else None
            r, mag = conv_transpose_ref(x.value, w.value, None if b is None else b.value, st, pd,
                                        dl, group, op_)
            attrs = conv_attrs(g, nd, list(ws[2:]), strides, pads, dilations, None, group)
            if out_pad is not None:
                attrs.append(A.ints("output_padding", out_pad))
            inputs = [x, w] + ([b] if has_bias else [])
            g.case(inputs, [r.astype(dtype)], attrs=attrs, tol=sum_tol(dtype, mag))
    # output_shape with an even total padding (split evenly, so the begin/end convention of
    # an odd total does not matter).
    x = g.data((1, 2, 3, 3), "float32", -1, 1)
    w = g.data((2, 2, 3, 3), "float32", -1, 1)
    # full size 2*(3-1)+3 = 7 per dim; output 5 -> total padding 2 -> pads 1, 1
    r, mag = conv_transpose_ref(x.value, w.value, None, [2, 2], [1, 1, 1, 1], [1, 1], 1, [0, 0])
    g.case([x, w], [r.astype(np.float32)],
           attrs=[A.ints("strides", [2, 2]), A.ints("output_shape", [5, 5])],
           tol=sum_tol("float32", mag), tag="output_shape")


# ---- pooling --------------------------------------------------------------------------------

def pool_out_sizes(in_sp, kernel, strides, pads, dilations, ceil_mode):
    nd = len(in_sp)
    out = []
    for i in range(nd):
        span = in_sp[i] + pads[i] + pads[i + nd] - ((kernel[i] - 1) * dilations[i] + 1)
        if ceil_mode:
            o = -(-span // strides[i]) + 1
            if (o - 1) * strides[i] >= in_sp[i] + pads[i]:
                o -= 1
        else:
            o = span // strides[i] + 1
        out.append(o)
    return out


def pool_ref(kind, x, kernel, strides, pads, dilations, ceil_mode, count_include_pad,
             storage_order=0):
    n, c = x.shape[:2]
    nd = x.ndim - 2
    in_sp = x.shape[2:]
    out_sp = pool_out_sizes(in_sp, kernel, strides, pads, dilations, ceil_mode)
    # pad generously on the end so ceil-mode windows stay inside the array
    extra = [max(0, (out_sp[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 -
                 (in_sp[i] + pads[i] + pads[i + nd])) for i in range(nd)]
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[i + nd] + extra[i]) for i in range(nd)]
    is_int = x.dtype.kind in "iu"
    v = x.astype(np.int64) if is_int else to64(x)
    low = np.iinfo(np.int64).min if is_int else -np.inf
    padded = np.pad(v, widths, constant_values=low if kind == "max" else 0)
    # which padded positions are real input, and which lie inside the explicit padding
    real = np.pad(np.ones(in_sp), [w for w in widths[2:]], constant_values=0)
    inside = np.pad(np.ones(tuple(in_sp[i] + pads[i] + pads[i + nd] for i in range(nd))),
                    [(0, e) for e in extra], constant_values=0)
    # flat index of every padded position in the unpadded input
    coords = np.meshgrid(*[np.arange(-pads[i], in_sp[i] + pads[i + nd] + extra[i])
                           for i in range(nd)], indexing="ij")
    if storage_order == 0:
        flat = np.zeros(coords[0].shape, dtype=np.int64)
        for i in range(nd):
            flat = flat * in_sp[i] + coords[i]
    else:
        flat = np.zeros(coords[0].shape, dtype=np.int64)
        for i in reversed(range(nd)):
            flat = flat * in_sp[i] + coords[i]
    shape = (n, c) + tuple(out_sp)
    best = np.full(shape, low, dtype=padded.dtype)
    best_idx = np.zeros(shape, dtype=np.int64)
    total = np.zeros(shape)
    count = np.zeros(tuple(out_sp))
    for kidx in itertools.product(*[range(k) for k in kernel]):
        sl = tuple(slice(kidx[i] * dilations[i],
                         kidx[i] * dilations[i] + strides[i] * (out_sp[i] - 1) + 1, strides[i])
                   for i in range(nd))
        window = padded[(slice(None), slice(None)) + sl]
        if kind == "max":
            better = window > best
            best = np.where(better, window, best)
            best_idx = np.where(better, flat[sl], best_idx)
        else:
            total = total + window
            count = count + (inside[sl] if count_include_pad else real[sl])
    if kind == "max":
        nc_offset = (np.arange(n * c).reshape(n, c) * int(np.prod(in_sp))).reshape(
            (n, c) + (1,) * nd)
        return best.astype(x.dtype), best_idx + nc_offset
    return (total / count).astype(x.dtype), None


# (x shape, kernel, strides, pads, dilations, ceil_mode, auto_pad)
POOL_CASES = [
    ((1, 1, 6), [2], None, None, None, 0, None),
    ((2, 3, 7), [3], [2], [1, 1], None, 0, None),
    ((1, 2, 5, 5), [2, 2], [2, 2], None, None, 0, None),
    ((1, 2, 5, 5), [2, 2], [2, 2], None, None, 1, None),
    ((2, 2, 6, 7), [3, 3], [2, 2], [1, 1, 1, 1], None, 0, None),
    ((1, 3, 7, 6), [3, 2], [2, 1], [1, 0, 0, 1], None, 1, None),
    ((1, 1, 7, 7), [2, 2], [1, 1], None, [2, 2], 0, None),
    ((1, 2, 5, 6), [3, 3], [2, 2], None, None, 0, "SAME_UPPER"),
    ((1, 2, 5, 6), [2, 3], [2, 2], None, None, 0, "SAME_LOWER"),
    ((1, 2, 5, 6), [2, 2], [2, 1], None, None, 0, "VALID"),
    ((0, 2, 4, 4), [2, 2], None, None, None, 0, None),
    ((1, 2, 4, 5, 4), [2, 2, 2], [2, 1, 2], [0, 1, 0, 1, 0, 1], None, 0, None),
    ((2, 4, 17, 17), [3, 3], [2, 2], [1, 1, 1, 1], None, 0, None),
    ((1, 1, 8), [3], [3], [0, 0], None, 1, None),
    ((2, 8, 64, 64), [3, 3], [2, 2], [1, 1, 1, 1], None, 0, None),
]


def gen_pool(kind):
    def generate(g):
        dtypes = list(FLOATS) + (["int8", "uint8"] if kind == "max" else [])
        for dtype in dtypes:
            use = POOL_CASES if dtype == "float32" else sample(g, POOL_CASES, 4)
            for xs, kernel, strides, pads, dilations, ceil_mode, auto_pad in use:
                nd = len(xs) - 2
                st = strides or [1] * nd
                dl = dilations or [1] * nd
                if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                    pd = same_pads(xs[2:], kernel, st, dl, auto_pad)
                else:
                    pd = pads or [0] * (2 * nd)
                # distinct values so the argmax is unique
                size = int(np.prod(xs))
                if dtype in FLOATS:
                    value = (g.rng.permutation(size).reshape(xs) / max(size, 1) * 4 - 2)
                else:
                    value = g.values(xs, dtype, -100, 100)
                x = g.data(xs, dtype, value=np.asarray(value).astype(dtype), free=False)
                count_include_pad = 0
                if kind == "avg" and not ceil_mode and g.chance(0.5):
                    count_include_pad = 1
                order = 0
                if kind == "max" and nd == 2 and g.chance(0.25):
                    order = 1
                r, idx = pool_ref(kind, x.value, kernel, st, pd, dl, ceil_mode,
                                  count_include_pad, order)
                attrs = [A.ints("kernel_shape", kernel)]
                if strides is not None:
                    attrs.append(A.ints("strides", strides))
                if pads is not None:
                    attrs.append(A.ints("pads", pads))
                if dilations is not None:
                    attrs.append(A.ints("dilations", dilations))
                if ceil_mode:
                    attrs.append(A.i("ceil_mode", 1))
                if auto_pad is not None:
                    attrs.append(A.s("auto_pad", auto_pad))
                if count_include_pad:
                    attrs.append(A.i("count_include_pad", 1))
                if order:
                    attrs.append(A.i("storage_order", 1))
                outs = [r]
                if kind == "max" and dtype in FLOATS and g.chance(0.6):
                    outs.append(idx)
                g.case([x], outs, attrs=attrs, tol=tol_for(dtype, 4))

        def build(shape):
            size = int(np.prod(shape))
            value = (g.rng.permutation(size).reshape(shape) / max(size, 1) * 4 - 2)
            x = g.data(shape, "float32", value=value.astype(np.float32), free=False)
            r, idx = pool_ref(kind, x.value, [3, 2], [2, 2], [1, 0, 1, 1], [1, 1], 0, 0)
            return [x], [r] + ([idx] if kind == "max" else []), tol_for("float32", 4)
        multi_run(g, build, [(2, 3, 7, 8), (1, 4, 9, 5), (3, 2, 4, 6), (0, 3, 6, 6),
                             (1, 2, 33, 30)],
                  attrs=[A.ints("kernel_shape", [3, 2]), A.ints("strides", [2, 2]),
                         A.ints("pads", [1, 0, 1, 1])])
    return generate


def gen_global_pool(kind):
    def generate(g):
        shapes = [(2, 3, 4, 5), (1, 2, 7), (2, 3, 2, 2, 3), (0, 3, 4, 4), (2, 3, 1, 1),
                  (1, 2, 2, 2, 2, 3), (1, 4, 33, 9)]
        for dtype in FLOATS:
            use = shapes if dtype == "float32" else sample(g, shapes, 4)
            for shape in use:
                x = g.data(shape, dtype, -2, 2)
                axes = tuple(range(2, len(shape)))
                v = to64(x.value)
                if kind == "avg":
                    r = np.mean(v, axis=axes, keepdims=True) if v.size else \
                        np.zeros(shape[:2] + (1,) * len(axes))
                else:
                    r = np.max(v, axis=axes, keepdims=True) if v.size else \
                        np.zeros(shape[:2] + (1,) * len(axes))
                g.case([x], [r.astype(dtype)], tol=sum_tol(dtype, np.abs(v)))
    return generate


GENERATORS = {
    "MatMul": gen_matmul, "Gemm": gen_gemm, "Einsum": gen_einsum, "Conv": gen_conv,
    "ConvTranspose": gen_conv_transpose, "MaxPool": gen_pool("max"),
    "AveragePool": gen_pool("avg"), "GlobalAveragePool": gen_global_pool("avg"),
    "GlobalMaxPool": gen_global_pool("max"),
}
