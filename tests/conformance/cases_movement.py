"""Conformance cases and numpy references for data movement and generators: Reshape, Flatten,
Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Expand, Tile, Pad, Shape, Size,
ConstantOfShape, Range, Resize, Trilu, OneHot, EyeLike, DepthToSpace, SpaceToDepth."""

import math

import numpy as np

from gen_cases import A, NONE, FLOATS, multi_run, tol_for
from cases_elementwise import to64

MOVE_DTYPES = ["float32", "int64", "float16", "bool", "uint8", "int32", "float64", "int8"]


def dtype_cycle(g, k):
    return MOVE_DTYPES[k % len(MOVE_DTYPES)] if k < len(MOVE_DTYPES) else g.choice(MOVE_DTYPES)


def gen_reshape(g):
    cases = [((2, 3, 4), [4, 6], 0), ((2, 3, 4), [-1], 0), ((2, 3, 4), [0, -1], 0),
             ((2, 3, 4), [2, 0, 2, 2], 0), ((2, 3, 4), [-1, 4], 0),
             ((2, 3, 4), [1, 2, 1, 3, 1, 4], 0), ((0, 3), [3, 0], 1), ((0, 3), [0, 3], 0),
             ((), [1], 0), ((), [1, 1], 0), ((1,), [], 0), ((6,), [3, -1], 0),
             ((2, 1, 3, 1, 2, 2), [2, 3, 4], 0), ((4, 35), [7, 20], 0), ((3, 4), [0, 0], 0),
             ((2, 0, 4), [0, 4, 0], 1), ((5, 7), [35, 1], 0)]
    for k, (shape, target, allowzero) in enumerate(cases * 2):
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        dims = list(target)
        out = []
        for i, d in enumerate(dims):
            out.append(shape[i] if (d == 0 and not allowzero) else d)
        expected = x.value.reshape(out)
        attrs = [A.i("allowzero", 1)] if allowzero else []
        g.case([x, g.param(target)], [expected], attrs=attrs)


def gen_flatten(g):
    shapes = [(5,), (2, 3), (2, 3, 4), (0, 3), (3, 0, 2), (2, 1, 3, 2, 2, 3), (4, 35)]
    for k in range(len(shapes) * 3):
        shape = shapes[k % len(shapes)]
        rank = len(shape)
        axis = int(g.rng.integers(-rank, rank + 1))
        a = axis % rank if axis < 0 else axis
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        outer = int(np.prod(shape[:a])) if a else 1
        expected = x.value.reshape(outer, int(np.prod(shape[a:])) if a < rank else 1)
        attrs = [] if axis == 1 and g.chance(0.5) else [A.i("axis", axis)]
        g.case([x], [expected], attrs=attrs)


def gen_transpose(g):
    shapes = [(), (5,), (2, 3), (2, 3, 4), (0, 3), (3, 0, 2), (2, 1, 3, 2, 2, 3), (4, 35),
              (3, 17, 9), (64, 33, 65)]
    for k in range(len(shapes) * 3):
        shape = shapes[k % len(shapes)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        if g.chance(0.3) or not shape:
            g.case([x], [x.value.transpose()])
        else:
            perm = [int(p) for p in g.rng.permutation(len(shape))]
            g.case([x], [x.value.transpose(perm)], attrs=[A.ints("perm", perm)])


def gen_squeeze(g):
    shapes = [(1,), (1, 3), (2, 1, 4), (1, 1), (0, 1, 3), (1, 2, 1, 3, 1, 2), (3, 1, 35), (1, 0)]
    for k in range(len(shapes) * 3):
        shape = shapes[k % len(shapes)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        ones = [a for a, d in enumerate(shape) if d == 1]
        form = int(g.rng.integers(0, 3))  # 0 no axes, 1 input, 2 attribute
        if form == 0:
            # without axes the output rank depends on which dims are 1: declare them all
            x.decl = "const"
            g.case([x], [np.squeeze(x.value)])
            continue
        count = int(g.rng.integers(1, len(ones) + 1))
        axes = sorted(int(a) for a in g.rng.choice(ones, size=count, replace=False))
        given = [a - len(shape) if g.chance(0.4) else a for a in axes]
        expected = np.squeeze(x.value, axis=tuple(axes))
        if form == 1:
            g.case([x, g.param(given)], [expected])
        else:
            g.case([x], [expected], attrs=[A.ints("axes", given)], tag="attr")


def gen_unsqueeze(g):
    shapes = [(), (3,), (2, 4), (0, 3), (2, 3, 4), (2, 1, 3), (4, 35)]
    for k in range(len(shapes) * 3):
        shape = shapes[k % len(shapes)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        count = int(g.rng.integers(1, min(3, 6 - len(shape)) + 1))
        out_rank = len(shape) + count
        axes = sorted(int(a) for a in g.rng.choice(out_rank, size=count, replace=False))
        given = [a - out_rank if g.chance(0.4) else a for a in axes]
        expected = x.value
        for a in axes:
            expected = np.expand_dims(expected, a)
        if g.chance(0.7):
            g.case([x, g.param(given)], [expected])
        else:
            g.case([x], [expected], attrs=[A.ints("axes", given)], tag="attr")


def gen_concat(g):
    cases = [([(3,)], 0), ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 5), (2, 1)], 1),
             ([(2, 0), (2, 3)], -1), ([(0, 4), (0, 4)], 0), ([(2, 3, 4), (2, 3, 4)], 2),
             ([(1, 2, 1, 3, 1, 2), (1, 2, 2, 3, 1, 2)], 2), ([(4, 35), (4, 3), (4, 2), (4, 1)], 1),
             ([(1, 5), (3, 5), (0, 5)], -2), ([(300, 64), (200, 64)], 0),
             ([(64, 300), (64, 1), (64, 200)], 1)]
    for k in range(len(cases) * 3):
        shapes, axis = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        xs = [g.data(s, dtype, -9, 9) for s in shapes]
        expected = np.concatenate([x.value for x in xs], axis=axis)
        g.case(xs, [expected], attrs=[A.i("axis", axis)])


def gen_split(g):
    cases = [((6,), 0, [2, 4]), ((6,), 0, 3), ((4, 6), 1, [1, 2, 3]), ((4, 6), -1, 2),
             ((4, 6), 0, [4, 0]), ((5, 3), 0, "n2"), ((7, 2), 0, "n3"), ((0, 4), 1, [1, 3]),
             ((2, 1, 4, 2, 3, 2), 2, [1, 1, 2]), ((4, 35), 1, [30, 5]), ((3, 9), 1, "n3")]
    for k in range(len(cases) * 2):
        shape, axis, spec = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        dim = shape[axis]
        attrs = [A.i("axis", axis)] if axis != 0 or g.chance(0.5) else []
        inputs = [x]
        if isinstance(spec, list):
            sizes = spec
            if g.chance(0.7):
                inputs.append(g.param(sizes))
            else:
                attrs.append(A.ints("split", sizes))
        elif isinstance(spec, int):
            sizes = [dim // spec] * spec  # equal split by output count
        else:
            n = int(spec[1:])
            chunk = -(-dim // n)
            sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
            attrs.append(A.i("num_outputs", n))
        bounds = np.cumsum([0] + sizes)
        outs = [np.take(x.value, np.arange(bounds[i], bounds[i + 1]), axis=axis)
                for i in range(len(sizes))]
        g.case(inputs, outs, attrs=attrs)


def gen_slice(g):
    big = 2 ** 63 - 1
    cases = [
        ((10,), [2], [7], None, None), ((10,), [-3], [big], None, None),
        ((10,), [8], [1], None, [-2]), ((10,), [-1], [-big - 1], None, [-1]),
        ((10,), [20], [30], None, None), ((4, 6), [1, 0], [3, 6], None, None),
        ((4, 6), [0], [-1], [1], None), ((4, 6), [5, -10], [0, 10], [1, 0], [-2, 3]),
        ((2, 3, 4), [0, 1], [2, 3], [-1, 0], [2, 1]), ((0, 5), [0], [3], [1], None),
        ((5, 4), [3], [3], [0], None),
        ((2, 3, 2, 4, 2, 3), [1, 0, 3], [3, 2, 0], [1, 3, 5], [1, 1, -1]),
        ((4, 35), [1, 2], [4, 33], None, [2, 3]), ((6, 6), [-100], [100], [0], [1]),
        ((7, 3), [6], [-8], [0], [-3]), ((300, 200), [5, 3], [290, 199], None, [3, 2]),
        ((0, 5), [-1], [-big - 1], [0], [-1]), ((3, 0), [2, 0], [0, -1], [0, 1], [-1, -1]),
    ]
    for k in range(len(cases) * 3):
        shape, starts, ends, axes, steps = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        rank = len(shape)
        ax = axes if axes is not None else list(range(len(starts)))
        st = steps if steps is not None else [1] * len(starts)
        index = [slice(None)] * rank
        for s, e, a, p in zip(starts, ends, ax, st):
            index[a] = slice(s, e, p)
        expected = x.value[tuple(index)]
        idtype = g.choice(["int64", "int32"]) if max(abs(v) for v in starts + ends) < 2 ** 31 \
            else "int64"
        inputs = [x, g.param(starts, idtype), g.param(ends, idtype)]
        if axes is not None or steps is not None:
            inputs.append(g.param(ax, idtype) if axes is not None or g.chance(0.5) else NONE)
        if steps is not None:
            inputs.append(g.param(st, idtype))
        g.case(inputs, [expected])


def gen_expand(g):
    cases = [((3, 1), [2, 1, 4]), ((1,), [3]), ((), [2, 3]), ((2, 1), [1]),
             ((3, 1, 2), [2, 1, 1, 1]),
             ((1, 3), [0, 3]), ((1, 2, 1, 3, 1, 1), [2, 1, 2, 1, 1, 4]), ((4, 1), [4, 35]),
             ((2, 3), [2, 3]), ((5,), [3, 1, 5])]
    for k in range(len(cases) * 3):
        shape, target = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        out_shape = np.broadcast_shapes(shape, tuple(target))
        g.case([x, g.param(target)], [np.broadcast_to(x.value, out_shape).copy()])


def gen_tile(g):
    cases = [((3,), [2]), ((2, 3), [1, 2]), ((2, 3), [3, 1]), ((2, 0), [2, 2]), ((2, 3), [0, 1]),
             ((1, 2, 1, 2, 1, 2), [2, 1, 2, 1, 3, 1]), ((4, 9), [2, 4]), ((), [])]
    for k in range(len(cases) * 3):
        shape, reps = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        g.case([x, g.param(reps)], [np.tile(x.value, reps) if reps else x.value.copy()])


def pad_ref(x, pads, mode, value, axes=None):
    rank = x.ndim
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    n = len(axes)
    begin = [0] * rank
    end = [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[i + n]
    # negative pads crop first
    index = tuple(slice(-b if b < 0 else 0, (x.shape[a] + e) if e < 0 else None)
                  for a, (b, e) in enumerate(zip(begin, end)))
    v = x[index]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if mode == "constant":
        return np.pad(v, widths, mode="constant", constant_values=value)
    return np.pad(v, widths, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])


def gen_pad(g):
    cases = [((5,), [1, 2], "constant"), ((3, 4), [1, 0, 2, 1], "constant"),
             ((3, 4), [0, -1, 1, -2], "constant"), ((3, 4), [2, 1, 1, 3], "reflect"),
             ((3, 4), [1, 2, 2, 1], "edge"), ((3, 4), [2, 3, 1, 1], "wrap"),
             ((0, 3), [1, 0, 1, 1], "constant"), ((2, 3, 4), [0, 1, 2, 1, 0, 0], "reflect"),
             ((1, 2, 1, 3, 1, 2), [0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 1], "constant"),
             ((4, 35), [1, 3, 2, 5], "edge"), ((2, 5), [0, 0, 0, 0], "reflect"),
             ((1, 3), [2, 2, 0, 4], "edge")]
    for k in range(len(cases) * 3):
        shape, pads, mode = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        if dtype == "bool":
            dtype = "int32"
        x = g.data(shape, dtype, -9, 9)
        use_axes = g.chance(0.25) and len(shape) >= 2
        axes = None
        given_pads = pads
        if use_axes:
            rank = len(shape)
            axes = [rank - 1]  # pad only the last axis
            given_pads = [pads[rank - 1], pads[2 * rank - 1]]
        cval = 0
        inputs = [x, g.param(given_pads)]
        if mode == "constant" and g.chance(0.6):
            cval = np.asarray(3, dtype).item()
            inputs.append(g.param(cval, dtype, scalar=True))
        elif axes is not None:
            inputs.append(NONE)
        if axes is not None:
            inputs.append(g.param(axes))
        attrs = [] if mode == "constant" and g.chance(0.5) else [A.s("mode", mode)]
        g.case(inputs, [pad_ref(x.value, given_pads, mode, cval, axes).astype(dtype)],
               attrs=attrs)


def gen_shape(g):
    shapes = [(), (5,), (2, 3), (0, 3), (2, 3, 4), (2, 1, 3, 2, 2, 3)]
    for k in range(len(shapes) * 3):
        shape = shapes[k % len(shapes)]
        x = g.data(shape, dtype_cycle(g, k))
        rank = len(shape)
        attrs, start, end = [], 0, rank
        if k >= len(shapes):
            start = int(g.rng.integers(-rank - 2, rank + 3))
            end = int(g.rng.integers(-rank - 2, rank + 3))
            attrs.append(A.i("start", start))
            if g.chance(0.7):
                attrs.append(A.i("end", end))
            else:
                end = rank
        def clamp(v):
            return max(0, min(v + rank if v < 0 else v, rank))
        expected = np.array(shape[clamp(start):clamp(end)], dtype=np.int64)
        g.case([x], [expected], attrs=attrs)


def gen_size(g):
    shapes = [(), (5,), (2, 3), (0, 3), (2, 3, 4), (2, 1, 3, 2, 2, 3)]
    for k, shape in enumerate(shapes * 2):
        x = g.data(shape, dtype_cycle(g, k))
        g.case([x], [np.array(int(np.prod(shape)), dtype=np.int64)])


def gen_constant_of_shape(g):
    shapes = [[2, 3], [0], [4], [], [1, 2, 1, 3, 1, 2], [3, 0, 2], [35]]
    values = [None, np.array([1.5], np.float32), np.array([7], np.int64),
              np.array([True]), np.array([-2.5], np.float16), np.array([3], np.int32),
              np.array([0.125], np.float64), np.array([9], np.uint8)]
    for k in range(len(shapes) * 3):
        shape = shapes[k % len(shapes)]
        value = values[k % len(values)]
        attrs = [] if value is None else [A.t("value", value)]
        fill = np.float32(0) if value is None else value[0]
        expected = np.full(shape, fill, dtype=np.float32 if value is None else value.dtype)
        g.case([g.param(shape)], [expected], attrs=attrs)


def gen_range(g):
    cases = [(0, 5, 1), (1, 10, 3), (10, 1, -2), (5, 5, 1), (5, 1, 1), (-3, 3, 2),
             (0.5, 3.0, 0.25), (2.0, -1.0, -0.75), (0, 70, 1), (1.0, 2.0, 1.5)]
    for k in range(len(cases) * 3):
        start, limit, delta = cases[k % len(cases)]
        is_float = any(isinstance(v, float) for v in (start, limit, delta))
        dtype = g.choice(["float32", "float64"]) if is_float else \
            g.choice(["int32", "int64", "int16", "float32"])
        count = max(int(math.ceil((limit - start) / delta)), 0)
        expected = (np.float64(start) + np.arange(count) * np.float64(delta)).astype(dtype)
        kind = g.choice(["init", "feed"])
        inputs = [g.param(v, dtype, kind=kind, scalar=True) for v in (start, limit, delta)]
        g.case(inputs, [expected], tol=tol_for(dtype))


# ---- Resize ---------------------------------------------------------------------------------

def cubic_coeffs(r, a):
    return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
            ((a * (2 - r) - 5 * a) * (2 - r) + 8 * a) * (2 - r) - 4 * a]


def source_coord(o, in_len, out_len, scale, coord, precision):
    if precision == "f64":
        s = np.float64(scale)
        if coord == "half_pixel":
            return (o + 0.5) / s - 0.5
        if coord == "pytorch_half_pixel":
            return (o + 0.5) / s - 0.5 if out_len > 1 else 0.0
        if coord == "align_corners":
            return 0.0 if out_len == 1 else o * (in_len - 1) / (out_len - 1)
        return o / s
    # float32, with the division done as a multiplication by the reciprocal: a kernel may do
    # either, so a case whose nearest picks differ between the two is ambiguous and skipped.
    s = np.float32(scale)
    inv = np.float32(1) / s
    o32 = np.float32(o)
    if coord == "half_pixel":
        return float((o32 + np.float32(0.5)) * inv - np.float32(0.5))
    if coord == "pytorch_half_pixel":
        return float((o32 + np.float32(0.5)) * inv - np.float32(0.5)) if out_len > 1 else 0.0
    if coord == "align_corners":
        return 0.0 if out_len == 1 else float(o32 * np.float32((in_len - 1) / (out_len - 1)))
    return float(o32 * inv)


def nearest_index(x, mode):
    if mode == "round_prefer_floor":
        return math.ceil(x - 0.5)
    if mode == "round_prefer_ceil":
        return math.floor(x + 0.5)
    if mode == "floor":
        return math.floor(x)
    return math.ceil(x)


def resize_matrix(in_len, out_len, scale, mode, coord, nearest_mode, cubic_a, exclude,
                  precision="f64"):
    w = np.zeros((out_len, in_len))
    for o in range(out_len):
        x = source_coord(o, in_len, out_len, scale, coord, precision)
        if mode == "nearest":
            i = min(max(nearest_index(x, nearest_mode), 0), in_len - 1)
            w[o, i] = 1
        elif mode == "linear":
            x = min(max(x, 0.0), in_len - 1)
            i0 = int(math.floor(x))
            i1 = min(i0 + 1, in_len - 1)
            f = x - i0
            w[o, i0] += 1 - f
            w[o, i1] += f
        else:
            i0 = int(math.floor(x))
            coeffs = cubic_coeffs(x - i0, cubic_a)
            idx = [i0 - 1, i0, i0 + 1, i0 + 2]
            if exclude:
                coeffs = [c if 0 <= i < in_len else 0.0 for c, i in zip(coeffs, idx)]
                total = sum(coeffs)
                coeffs = [c / total for c in coeffs]
            for c, i in zip(coeffs, idx):
                w[o, min(max(i, 0), in_len - 1)] += c
    return w


def resize_apply(x, matrices):
    v = to64(x)
    for axis, m in matrices.items():
        v = np.moveaxis(np.tensordot(m, np.moveaxis(v, axis, 0), axes=(1, 0)), 0, axis)
    return v


RESIZE_CASES = [
    # (shape, per-axis (scale or None), per-axis sizes or None, mode, coord, nearest_mode)
    ((1, 1, 2, 3), [1, 1, 2, 2], None, "nearest", None, None),
    ((1, 2, 4, 4), [1, 1, 0.5, 0.5], None, "nearest", "asymmetric", "floor"),
    ((1, 1, 3, 3), [1, 1, 3, 1.5], None, "nearest", "half_pixel", "round_prefer_ceil"),
    ((1, 1, 3, 5), None, [1, 1, 5, 7], "nearest", "align_corners", "round_prefer_floor"),
    ((2, 2, 3, 4), None, [2, 2, 7, 2], "nearest", "half_pixel", "ceil"),
    ((1, 1, 2, 2), [1, 1, 2, 2], None, "linear", None, None),
    ((1, 2, 4, 5), [1, 1, 0.5, 0.6], None, "linear", "asymmetric", None),
    ((1, 1, 3, 4), None, [1, 1, 5, 7], "linear", "align_corners", None),
    ((1, 1, 4, 4), None, [1, 1, 3, 6], "linear", "pytorch_half_pixel", None),
    ((2, 3), [2, 1.5], None, "linear", "half_pixel", None),
    ((1, 1, 4, 4), [1, 1, 2, 2], None, "cubic", None, None),
    ((1, 1, 5, 4), None, [1, 1, 3, 9], "cubic", "align_corners", None),
    ((1, 1, 4, 4), [1, 1, 1.5, 0.75], None, "cubic", "asymmetric", None),
    ((6,), [2.5], None, "nearest", "asymmetric", "round_prefer_floor"),
    ((5,), None, [1], "linear", "pytorch_half_pixel", None),
    ((0, 2, 3, 3), [1, 1, 2, 2], None, "nearest", None, None),
    ((1, 3, 9, 17), None, [1, 3, 16, 11], "linear", "half_pixel", None),
    ((2, 2, 3, 2), [1, 1, 2, 3], None, "nearest", "half_pixel", "floor"),
    ((1, 3, 64, 64), [1, 1, 2, 2], None, "linear", None, None),
]


def gen_resize(g):
    for k in range(len(RESIZE_CASES) * 3):
        shape, scales, sizes, mode, coord, nearest_mode = RESIZE_CASES[k % len(RESIZE_CASES)]
        dtype = ["float32", "float16", "float64", "uint8", "int32"][k // len(RESIZE_CASES)
                                                                   if k < 2 * len(RESIZE_CASES)
                                                                   else 2 + (k % 3)]
        if mode != "nearest" and dtype in ("uint8", "int32"):
            dtype = "float32"
        rank = len(shape)
        cubic_a = -0.75
        exclude = 0
        if mode == "cubic" and g.chance(0.5):
            cubic_a = -0.5
            exclude = 1
        use_axes = g.chance(0.3) and rank == 4
        axes = [2, 3] if use_axes else list(range(rank))
        if sizes is not None:
            out = list(sizes)
            per_axis_scale = [sizes[a] / shape[a] if shape[a] else 1.0 for a in range(rank)]
        else:
            out = [int(math.floor(shape[a] * scales[a])) for a in range(rank)]
            per_axis_scale = list(scales)
        eff_coord = coord or "half_pixel"
        eff_nearest = nearest_mode or "round_prefer_floor"
        matrices = {}
        ambiguous = False
        for a in range(rank):
            if out[a] == shape[a] and per_axis_scale[a] == 1.0:
                continue
            if shape[a] == 0:
                continue
            args = (shape[a], out[a], per_axis_scale[a], mode, eff_coord, eff_nearest, cubic_a,
                    exclude)
            m = resize_matrix(*args)
            if mode == "nearest" and not np.array_equal(m, resize_matrix(*args, precision="f32")):
                ambiguous = True
            matrices[a] = m
        if ambiguous:
            continue
        if dtype in FLOATS:
            x = g.data(shape, dtype, -2, 2)
        else:
            x = g.data(shape, dtype, 0, 100)
        expected = resize_apply(x.value, matrices) if x.value.size else np.zeros(out)
        expected = expected.reshape(out).astype(dtype) if dtype in FLOATS else \
            np.rint(expected).reshape(out).astype(dtype)
        attrs = []
        if mode != "nearest" or g.chance(0.5):
            attrs.append(A.s("mode", mode))
        if coord is not None:
            attrs.append(A.s("coordinate_transformation_mode", coord))
        if nearest_mode is not None:
            attrs.append(A.s("nearest_mode", nearest_mode))
        if mode == "cubic" and cubic_a != -0.75:
            attrs.append(A.f("cubic_coeff_a", cubic_a))
        if exclude:
            attrs.append(A.i("exclude_outside", 1))
        if use_axes:
            attrs.append(A.ints("axes", axes))
        roi = NONE
        if sizes is not None:
            given = [sizes[a] for a in axes]
            inputs = [x, roi, NONE, g.param(given)]
        else:
            given = [scales[a] for a in axes]
            inputs = [x, roi, g.param(given, "float32", kind="init")]
        g.case(inputs, [expected], attrs=attrs, tol=tol_for(dtype, 16))


# ---- generators over matrices ---------------------------------------------------------------

def gen_trilu(g):
    shapes = [(3, 4), (4, 3), (2, 3, 5), (0, 3), (3, 0), (1, 2, 1, 2, 3, 4), (5, 35), (1, 1)]
    for k in range(len(shapes) * 3):
        shape = shapes[k % len(shapes)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        upper = int(g.rng.integers(0, 2))
        kval = int(g.rng.integers(-3, 4)) if g.chance(0.7) else None
        if kval is not None and g.chance(0.15):
            kval = g.choice([-40, 40])  # beyond the matrix: all or nothing kept
        kk = kval or 0
        expected = np.triu(x.value, kk) if upper else np.tril(x.value, kk)
        attrs = [] if upper and g.chance(0.5) else [A.i("upper", upper)]
        inputs = [x] + ([g.param(kval, scalar=True)] if kval is not None else [])
        g.case(inputs, [expected], attrs=attrs)


def gen_onehot(g):
    cases = [((4,), 5, -1), ((2, 3), 4, -1), ((2, 3), 3, 0), ((2, 3), 3, 1), ((), 4, 0),
             ((0, 2), 3, -1), ((2, 1, 2), 6, -2), ((35,), 7, 1)]
    for k in range(len(cases) * 3):
        shape, depth, axis = cases[k % len(cases)]
        idx_dtype = g.choice(["int64", "int32", "float32"])
        idx = g.values(shape, "int64", -depth - 1, depth)
        vdtype = g.choice(["float32", "int64", "float16", "int32"])
        values = np.array([g.rng.integers(-5, 0), g.rng.integers(1, 9)]).astype(vdtype)
        r = np.where(idx < 0, idx + depth, idx)
        valid = (r >= 0) & (r < depth)
        hot = (np.arange(depth) == r[..., None]) & valid[..., None]
        expected = np.where(hot, values[1], values[0]).astype(vdtype)
        expected = np.moveaxis(expected, -1, axis if axis >= 0 else len(shape) + 1 + axis)
        indices = g.data(shape, idx_dtype, value=idx.astype(idx_dtype), free=False)
        depth_in = g.param(depth, g.choice(["int64", "float32", "int32"]), scalar=g.chance(0.7),
                           kind="init" if g.chance(0.6) else "feed")
        vals = g.param(values, vdtype)
        attrs = [] if axis == -1 and g.chance(0.5) else [A.i("axis", axis)]
        g.case([indices, depth_in, vals], [expected], attrs=attrs)


def gen_eyelike(g):
    cases = [(3, 3), (3, 5), (5, 2), (0, 3), (1, 1), (4, 35)]
    onnx_codes = {"float32": 1, "int64": 7, "float16": 10, "int32": 6, "float64": 11,
                  "bool": 9, "uint8": 2}
    for k in range(len(cases) * 3):
        shape = cases[k % len(cases)]
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        kval = int(g.rng.integers(-3, 4)) if g.chance(0.6) else 0
        out_dtype = dtype
        attrs = [A.i("k", kval)] if kval or g.chance(0.3) else []
        if g.chance(0.4):
            out_dtype = g.choice(list(onnx_codes))
            attrs.append(A.i("dtype", onnx_codes[out_dtype]))
        expected = np.eye(shape[0], shape[1], kval).astype(out_dtype)
        g.case([x], [expected], attrs=attrs)


def gen_depth_to_space(g):
    cases = [((1, 4, 2, 3), 2), ((2, 8, 1, 2), 2), ((1, 9, 2, 2), 3), ((0, 4, 2, 2), 2),
             ((1, 16, 3, 1), 4), ((2, 12, 3, 5), 2)]
    for k in range(len(cases) * 3):
        shape, b = cases[k % len(cases)]
        n, c, h, w = shape
        mode = g.choice(["DCR", "CRD"])
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        if mode == "DCR":
            t = x.value.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            t = x.value.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        expected = t.reshape(n, c // (b * b), h * b, w * b)
        attrs = [A.i("blocksize", b)]
        if mode == "CRD" or g.chance(0.5):
            attrs.append(A.s("mode", mode))
        g.case([x], [expected], attrs=attrs)


def gen_space_to_depth(g):
    cases = [((1, 1, 4, 6), 2), ((2, 3, 2, 4), 2), ((1, 2, 6, 3), 3), ((0, 2, 4, 4), 2),
             ((1, 1, 4, 4), 4), ((2, 5, 6, 10), 2)]
    for k in range(len(cases) * 3):
        shape, b = cases[k % len(cases)]
        n, c, h, w = shape
        dtype = dtype_cycle(g, k)
        x = g.data(shape, dtype, -9, 9)
        t = x.value.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
        g.case([x], [t.reshape(n, c * b * b, h // b, w // b)], attrs=[A.i("blocksize", b)])
        # mode (opset 28): CRD orders the output channels c, row, column
        t = x.value.reshape(n, c, h // b, b, w // b, b).transpose(0, 1, 3, 5, 2, 4)
        g.case([x], [t.reshape(n, c * b * b, h // b, w // b)],
               attrs=[A.i("blocksize", b), A.s("mode", "CRD")], tag="crd")


# ---- one program, many shapes ---------------------------------------------------------------

def movement_runs(op):
    """Cases whose program is compiled once and run with several shapes."""
    def run_cases(g):
        x3 = [(2, 3, 4), (5, 1, 2), (3, 6, 0), (1, 2, 9), (7, 5, 3)]
        if op == "Reshape":
            target = g.param([0, -1], kind="init")
            multi_run(g, lambda s: reshape_run(g, s, target), x3)
        elif op == "Transpose":
            multi_run(g, lambda s: transpose_run(g, s), x3, attrs=[A.ints("perm", [2, 0, 1])])
        elif op == "Flatten":
            multi_run(g, lambda s: one(g, s, lambda v: v.reshape(v.shape[0], -1)), x3,
                      attrs=[A.i("axis", 1)])
        elif op == "Concat":
            def build(shapes):
                xs = [g.data(s, "int64", -9, 9) for s in shapes]
                return xs, [np.concatenate([x.value for x in xs], axis=1)], None
            multi_run(g, build, [[(2, 3), (2, 5)], [(4, 1), (4, 2)], [(0, 6), (0, 7)],
                                 [(3, 0), (3, 4)]], attrs=[A.i("axis", 1)])
        elif op == "Slice":
            params = [g.param(v, kind="init") for v in ([1, -4], [-1, 100], [0, 1], [1, 2])]
            multi_run(g, lambda s: slice_run(g, s, params),
                      [(10, 6), (4, 9), (7, 7), (1, 3), (30, 40)])
        elif op == "Expand":
            shape = g.param([2, 1, 4], kind="init")
            multi_run(g, lambda s: expand_run(g, s, shape), [(3, 1), (5, 1), (0, 1), (1, 1)])
        elif op == "Pad":
            pads = g.param([1, 0, 2, 3], kind="init")
            multi_run(g, lambda s: one(g, s, lambda v: np.pad(v, [(1, 2), (0, 3)]), extra=[pads]),
                      [(3, 4), (5, 2), (1, 1), (0, 6)])
        elif op == "Tile":
            reps = g.param([2, 3], kind="init")
            multi_run(g, lambda s: one(g, s, lambda v: np.tile(v, (2, 3)), extra=[reps]),
                      [(3, 4), (5, 2), (1, 1), (0, 6)])
        elif op == "Unsqueeze":
            axes = g.param([0, 3], kind="init")
            multi_run(g, lambda s: one(g, s, lambda v: v[None, :, :, None], extra=[axes]),
                      [(3, 4), (5, 2), (1, 1), (0, 6)])
        elif op == "Resize":
            scales = g.param([1, 1, 2, 0.5], "float32", kind="init")
            def build(s):
                x = g.data(s, "float32")
                mats = {2: resize_matrix(s[2], 2 * s[2], 2.0, "linear", "half_pixel", None, 0, 0),
                        3: resize_matrix(s[3], s[3] // 2, 0.5, "linear", "half_pixel", None,
                                         0, 0)}
                return [x, NONE, scales], [resize_apply(x.value, mats).astype(np.float32)], \
                    tol_for("float32", 16)
            multi_run(g, build, [(1, 2, 3, 4), (1, 1, 5, 6), (1, 3, 2, 10)],
                      attrs=[A.s("mode", "linear")])
        elif op == "Range":
            def build(bounds):
                start, limit, delta = bounds
                count = max(int(np.ceil((limit - start) / delta)), 0)
                inputs = [g.param(v, "int64", kind="feed", scalar=True) for v in bounds]
                return inputs, [start + np.arange(count, dtype=np.int64) * delta], None
            multi_run(g, build, [(0, 5, 1), (3, 20, 4), (5, 5, 1), (10, -3, -2)])
        elif op == "ConstantOfShape":
            multi_run(g, lambda s: ([g.param(list(s), kind="feed")],
                                    [np.zeros(s, np.float32)], None),
                      [(2, 3), (5, 1), (0, 4), (7, 9)])
    return run_cases


def one(g, shape, fn, extra=(), dtype="float32"):
    x = g.data(shape, dtype)
    return [x] + list(extra), [fn(x.value)], None


def reshape_run(g, shape, target):
    x = g.data(shape, "float32")
    return [x, target], [x.value.reshape(shape[0], -1)], None


def transpose_run(g, shape):
    x = g.data(shape, "int32", -9, 9)
    return [x], [x.value.transpose(2, 0, 1)], None


def slice_run(g, shape, params):
    x = g.data(shape, "float32")
    return [x] + params, [x.value[1:-1, -4:100:2]], None


def expand_run(g, shape, target):
    x = g.data(shape, "float32")
    return [x, target], [np.broadcast_to(x.value, np.broadcast_shapes(shape, (2, 1, 4))).copy()], \
        None


def with_runs(op, generate):
    runs = movement_runs(op)

    def both(g):
        generate(g)
        runs(g)
    return both


GENERATORS = {
    "Reshape": gen_reshape, "Flatten": gen_flatten, "Transpose": gen_transpose,
    "Squeeze": gen_squeeze, "Unsqueeze": gen_unsqueeze, "Concat": gen_concat,
    "Split": gen_split, "Slice": gen_slice, "Expand": gen_expand, "Tile": gen_tile,
    "Pad": gen_pad, "Shape": gen_shape, "Size": gen_size,
    "ConstantOfShape": gen_constant_of_shape, "Range": gen_range, "Resize": gen_resize,
    "Trilu": gen_trilu, "OneHot": gen_onehot, "EyeLike": gen_eyelike,
    "DepthToSpace": gen_depth_to_space, "SpaceToDepth": gen_space_to_depth,
}
for _op in ("Reshape", "Flatten", "Transpose", "Unsqueeze", "Concat", "Slice", "Expand", "Tile",
            "Pad", "Range", "ConstantOfShape", "Resize"):
    GENERATORS[_op] = with_runs(_op, GENERATORS[_op])
