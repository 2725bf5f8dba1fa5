"""Conformance cases and numpy references for the quantization ops: QuantizeLinear and
DequantizeLinear (per tensor, per axis with any axis, blocked with short last blocks; every
integer type; optional zero points), DynamicQuantizeLinear, MatMulInteger and QLinearMatMul
(zero points per tensor, row and column; batch broadcasting; 1-D operands), ConvInteger and
QLinearConv (the float Conv cases' geometries, per-channel weight parameters, int32 bias).
Requantization follows the ONNX formula in float32, as the kernels compute it."""

import numpy as np

from gen_cases import A, NONE
from cases_linalg import CONV_CASES, conv_attrs, conv_ref, same_pads

INT_TYPES = ("int8", "uint8", "int16", "uint16")


def info(dtype):
    return np.iinfo(np.dtype(dtype))


def ints(g, shape, dtype, kind="feed", low=None, high=None):
    i = info(dtype)
    low = i.min if low is None else max(low, i.min)
    high = i.max if high is None else min(high, i.max)
    if kind == "feed":
        return g.data(shape, dtype, low, high)
    return g.param(g.values(shape, dtype, low, high), dtype, kind=kind)


def zero_point(g, shape, dtype):
    return ints(g, shape, dtype, kind=None, low=-60, high=60)


def scales(g, shape, low=0.01, high=0.2):
    return g.param(g.rng.uniform(low, high, size=shape).astype(np.float32), "float32")


def expand_param(value, shape, axis, block):
    """A scale / zero point broadcast to x's shape (per tensor, per axis or blocked)."""
    value = np.asarray(value)
    if value.size == 1:
        return value.reshape(())
    if not block:
        dims = [1] * len(shape)
        dims[axis] = value.size
        return value.reshape(dims)
    return np.take(np.repeat(value, block, axis=axis), range(shape[axis]), axis=axis)


# (x shape, mode, axis, block): mode 't' per tensor, 'a' per axis, 'b' blocked
QUANT_LAYOUTS = [
    ((3, 4), "t", 1, 0), ((2, 3, 5), "a", 1, 0), ((2, 3, 5), "a", -1, 0), ((4, 6), "a", 0, 0),
    ((4, 8), "b", 1, 4), ((5, 7), "b", 1, 3), ((6, 5), "b", 0, 4), ((2, 9, 3), "b", -2, 2),
    ((0, 3), "a", 1, 0), ((7,), "t", 0, 0), ((2, 3, 10), "b", 2, 16), ((), "t", 0, 0),
]


def param_shape(shape, mode, axis, block):
    if mode == "t":
        return ()
    if mode == "a":
        return (shape[axis],)
    dims = list(shape)
    dims[axis] = -(-shape[axis] // block)
    return tuple(dims)


def layout_attrs(mode, axis, block):
    attrs = [] if mode == "t" else [A.i("axis", axis)]
    if mode == "b":
        attrs.append(A.i("block_size", block))
    return attrs


def gen_quantize(g):
    for shape, mode, axis, block in QUANT_LAYOUTS:
        for out_type in INT_TYPES + (None,):
            pshape = param_shape(shape, mode, axis, block)
            x = g.data(shape, "float32", -30, 30)
            s = scales(g, pshape, 0.05, 0.5)
            z = zero_point(g, pshape, out_type) if out_type else None
            q = x.value / expand_param(s.value, shape, axis, block)
            zero = 0 if z is None else expand_param(z.value, shape, axis, block).astype(np.int64)
            dtype = out_type or "uint8"
            want = np.clip(np.rint(q) + zero, info(dtype).min, info(dtype).max).astype(dtype)
            inputs = [x, s] + ([z] if z is not None else [])
            g.case(inputs, [want], attrs=layout_attrs(mode, axis, block))
    # ties round half to even; out-of-range values and infinities saturate
    x = g.data((2, 6), "float32", value=np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5],
                                                   [1e9, -1e9, np.inf, -np.inf, 300, -300]],
                                                  np.float32), view="c", free=False)
    for dtype in INT_TYPES:
        z = g.param(np.array(0, dtype), dtype, kind="init")
        want = np.clip(np.rint(x.value), info(dtype).min, info(dtype).max)
        want[1, 2], want[1, 3] = info(dtype).max, info(dtype).min
        g.case([x, g.param(np.float32(1.0), "float32", kind="init"), z], [want.astype(dtype)],
               tag="ties")
    # output_dtype without a zero point
    x = g.data((3, 5), "float32", -300, 300)
    want = np.clip(np.rint(x.value / np.float32(0.25)), -32768, 32767).astype(np.int16)
    g.case([x, g.param(np.float32(0.25), "float32", kind="init")], [want],
           attrs=[A.i("output_dtype", 5)], tag="output_dtype")


def gen_dequantize(g):
    for shape, mode, axis, block in QUANT_LAYOUTS:
        for in_type in INT_TYPES + ("int32",):
            pshape = param_shape(shape, mode, axis, block)
            x = ints(g, shape, in_type, low=-70000, high=70000)
            s = scales(g, pshape, 0.001, 0.1)
            z = zero_point(g, pshape, in_type) if in_type != "int32" and g.chance(0.8) else None
            zero = 0 if z is None else expand_param(z.value, shape, axis, block).astype(np.int64)
            diff = (x.value.astype(np.int64) - zero).astype(np.float32)
            want = diff * expand_param(s.value, shape, axis, block)
            inputs = [x, s] + ([z] if z is not None else [])
            g.case(inputs, [want.astype(np.float32)], attrs=layout_attrs(mode, axis, block),
                   tol=(1e-6, 0.0))


def gen_dynamic_quantize(g):
    for shape, low, high in [((3, 7), -4, 4), ((2, 5), 1, 3), ((9,), -3, -1), ((2, 3), 0, 0),
                             ((1, 40, 17), -100, 20), ((0, 4), -1, 1)]:
        x = g.data(shape, "float32", low, high, free=False)
        v = x.value
        hi = np.float32(max(0.0, float(v.max()) if v.size else 0.0))
        lo = np.float32(min(0.0, float(v.min()) if v.size else 0.0))
        scale = np.float32(1.0 if hi == lo else hi - lo) / np.float32(255)
        zero = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255))
        y = np.clip(np.rint(v / scale) + zero, 0, 255).astype(np.uint8)
        g.case([x], [y, np.array(scale, np.float32), np.array(zero, np.uint8)],
               tol=[None, (0.0, 0.0), None])


def matmul_int_ref(a, b, za, zb):
    av = a.astype(np.int64) - (0 if za is None else za.astype(np.int64))
    bv = b.astype(np.int64) - (0 if zb is None else zb.astype(np.int64))
    return np.matmul(av, bv)


# a shape, b shape, a zero point kind, b zero point kind: None, 't' one element, 'r' per row /
# 'c' per column (1-D), 'R' / 'C' with batch dims
MATMUL_INT_CASES = [
    ((4, 3), (3, 5), "t", "t"), ((7, 33), (33, 17), "r", "c"), ((2, 5, 9), (9, 6), "t", "c"),
    ((2, 5, 9), (2, 9, 6), "R", "C"), ((3, 1, 4, 8), (2, 8, 5), None, None),
    ((8,), (8, 3), "t", None), ((4, 8), (8,), None, "t"), ((65, 131), (131, 47), "r", "c"),
    ((0, 4), (4, 3), "t", "t"), ((1, 1), (1, 1), None, None),
]


def matmul_param(g, kind, matrix_shape, dtype, rows):
    if kind is None:
        return None, None
    if kind == "t":
        p = zero_point(g, (), dtype)
        return p, p.value
    m = matrix_shape[-2] if rows else matrix_shape[-1]
    if kind in "rc":
        p = zero_point(g, (m,), dtype)
        return p, p.value[:, None] if rows else p.value
    dims = list(matrix_shape)
    dims[-1 if rows else -2] = 1
    p = zero_point(g, tuple(dims), dtype)
    return p, p.value


def gen_matmul_integer(g):
    for a_shape, b_shape, za_kind, zb_kind in MATMUL_INT_CASES:
        for a_type, b_type in [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8"),
                               ("int8", "uint8")]:
            a = ints(g, a_shape, a_type)
            b = ints(g, b_shape, b_type, kind=g.choice(["feed", "init"]))
            za, za_v = matmul_param(g, za_kind, a_shape, a_type, True)
            zb, zb_v = matmul_param(g, zb_kind, b_shape, b_type, False)
            want = matmul_int_ref(a.value, b.value, za_v, zb_v).astype(np.int32)
            inputs = [a, b]
            if za is not None or zb is not None:
                inputs.append(za if za is not None else NONE)
            if zb is not None:
                inputs.append(zb)
            g.case(inputs, [want])


def requantize(acc, multiplier, zero, dtype):
    value = np.rint(acc.astype(np.float32) * multiplier.astype(np.float32))
    return np.clip(value + zero, info(dtype).min, info(dtype).max).astype(dtype)


def gen_qlinear_matmul(g):
    cases = [((4, 6), (6, 3), False), ((2, 5, 16), (16, 9), False), ((3, 2, 7), (3, 7, 4), False),
             ((5, 12), (12, 7), True), ((9,), (9, 2), False)]
    for a_shape, b_shape, per_row in cases:
        for a_type, b_type, y_type in [("uint8", "int8", "uint8"), ("int8", "int8", "int8"),
                                       ("uint8", "uint8", "int8")]:
            a, b = ints(g, a_shape, a_type), ints(g, b_shape, b_type, kind="init")
            m, n = (a_shape[-2] if len(a_shape) > 1 else 1), b_shape[-1]
            sa = scales(g, (m,) if per_row else (), 0.01, 0.05)
            za = zero_point(g, (m,) if per_row else (), a_type)
            sb = scales(g, (n,) if per_row else (), 0.001, 0.01)
            zb = zero_point(g, (n,) if per_row else (), b_type)
            sy, zy = scales(g, (), 0.2, 0.5), zero_point(g, (), y_type)
            row = (lambda v: v[:, None]) if per_row else (lambda v: v)
            acc = matmul_int_ref(a.value, b.value, row(za.value), zb.value)
            multiplier = (row(sa.value) * sb.value) / sy.value
            want = requantize(acc, np.asarray(multiplier, np.float32), int(zy.value), y_type)
            g.case([a, sa, za, b, sb, zb, sy, zy], [want])


def conv_geometry(xs, ws, strides, pads, dilations, auto_pad):
    nd = len(xs) - 2
    st = strides or [1] * nd
    dl = dilations or [1] * nd
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pd = same_pads(xs[2:], list(ws[2:]), st, dl, auto_pad)
    elif auto_pad == "VALID":
        pd = [0] * (2 * nd)
    else:
        pd = pads or [0] * (2 * nd)
    return st, pd, dl


def int_conv(x, w, xz, wz, st, pd, dl, group):
    """Exact: the int64 values are at most 2^16 and the sums far below 2^53."""
    xv = x.astype(np.float64) - xz
    wz = np.asarray(wz, np.float64)
    wv = w.astype(np.float64) - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.ndim else wz)
    r, _ = conv_ref(xv, wv, None, st, pd, dl, group)
    return np.rint(r).astype(np.int64)


def gen_conv_integer(g):
    for xs, ws, group, strides, pads, dilations, auto_pad in CONV_CASES[:14]:
        for x_type, w_type in [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")]:
            st, pd, dl = conv_geometry(xs, ws, strides, pads, dilations, auto_pad)
            x = ints(g, xs, x_type)
            w = ints(g, ws, w_type, kind=g.choice(["feed", "init", "init"]))
            xz = zero_point(g, (), x_type) if g.chance(0.8) else None
            per_channel = g.chance(0.5)
            wz = zero_point(g, (ws[0],) if per_channel else (), w_type) if g.chance(0.8) \
                else None
            want = int_conv(x.value, w.value, 0 if xz is None else int(xz.value),
                            0 if wz is None else wz.value, st, pd, dl, group).astype(np.int32)
            inputs = [x, w]
            if xz is not None or wz is not None:
                inputs.append(xz if xz is not None else NONE)
            if wz is not None:
                inputs.append(wz)
            attrs = conv_attrs(g, len(xs) - 2, list(ws[2:]), strides, pads, dilations, auto_pad,
                               group)
            g.case(inputs, [want], attrs=attrs)


def gen_qlinear_conv(g):
    for xs, ws, group, strides, pads, dilations, auto_pad in CONV_CASES[:14]:
        for x_type, w_type in [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")]:
            st, pd, dl = conv_geometry(xs, ws, strides, pads, dilations, auto_pad)
            m = ws[0]
            x = ints(g, xs, x_type)
            w = ints(g, ws, w_type, kind="init")
            per_channel = g.chance(0.5)
            xsc, xz = scales(g, (), 0.01, 0.05), zero_point(g, (), x_type)
            wsc = scales(g, (m,) if per_channel else (), 0.001, 0.01)
            wz = zero_point(g, (m,) if per_channel else (), w_type)
            ysc, yz = scales(g, (), 0.1, 0.4), zero_point(g, (), x_type)
            has_bias = g.chance(0.7)
            bias = g.param(g.values((m,), "int32", -3000, 3000), "int32") if has_bias else None
            acc = int_conv(x.value, w.value, int(xz.value), wz.value, st, pd, dl, group)
            shape = (1, m) + (1,) * (len(xs) - 2)
            if has_bias:
                acc = acc + bias.value.astype(np.int64).reshape(shape)
            multiplier = (xsc.value * wsc.value) / ysc.value
            multiplier = np.asarray(multiplier, np.float32)
            if multiplier.ndim:
                multiplier = multiplier.reshape(shape)
            want = requantize(acc, multiplier, int(yz.value), x_type)
            attrs = conv_attrs(g, len(xs) - 2, list(ws[2:]), strides, pads, dilations, auto_pad,
                               group)
            inputs = [x, xsc, xz, w, wsc, wz, ysc, yz] + ([bias] if has_bias else [])
            g.case(inputs, [want], attrs=attrs)


GENERATORS = {
    "QuantizeLinear": gen_quantize, "DequantizeLinear": gen_dequantize,
    "DynamicQuantizeLinear": gen_dynamic_quantize, "MatMulInteger": gen_matmul_integer,
    "QLinearMatMul": gen_qlinear_matmul, "ConvInteger": gen_conv_integer,
    "QLinearConv": gen_qlinear_conv,
}
