"""Conformance cases and numpy references for the elementwise ops: binary arithmetic with
broadcasting, comparisons and logic, variadic Max/Min/Sum/Mean, Where, PRelu, every unary op,
Clip, IsNaN/IsInf, Cast/CastLike, Dropout (inference) and Identity."""

import math

import numpy as np

from gen_cases import A, NONE, FLOATS, f32, multi_run, tol_for

# Broadcasting pairs: equal shapes, scalars, size-1 dims both sides, zero-sized dims, rank 6,
# and shapes long enough to leave vector-loop remainders.
BINARY_SHAPES = [
    ((), ()),
    ((5,), ()),
    ((), (4,)),
    ((3, 4), (3, 4)),
    ((2, 3), (3,)),
    ((2, 1, 4), (3, 1)),
    ((4, 1), (1, 5)),
    ((1,), (6, 5)),
    ((7, 9), (7, 1)),
    ((0, 3), (1, 3)),
    ((2, 0, 3), (3,)),
    ((3, 1), (0,)),
    ((1, 2, 1, 3, 1, 2), (2, 1, 3, 2, 1)),
    ((2, 2, 1, 2, 3, 2), (2, 2, 3, 2, 3, 2)),
    ((3, 17, 33), (33,)),
    ((2, 5, 37), (2, 1, 37)),
]

BIG_BINARY_SHAPES = [((48, 515), (515,)), ((3, 1, 1000), (1, 7, 1)), ((40000,), (40000,))]

# Shape sequences for one compiled program run again and again (same declared dims).
RUN_BINARY = [
    [((3, 4), (4,)), ((5, 7), (7,)), ((0, 2), (2,)), ((1, 9), (9,)), ((6, 33), (33,))],
    [((2, 1, 4), (3, 1)), ((5, 1, 2), (6, 1)), ((1, 1, 7), (2, 1)), ((3, 1, 0), (4, 1))],
    [((1, 2, 1, 3, 1, 2), (2, 1, 3, 2, 1)), ((1, 4, 1, 5, 1, 4), (4, 1, 5, 4, 1)),
     ((1, 0, 1, 2, 1, 0), (0, 1, 2, 0, 1))],
    [((), (4,)), ((), (9,)), ((), (0,))],
]
RUN_UNARY = [[(3, 4), (5, 7), (0, 3), (1, 1), (40, 65)],
             [(2, 3, 4), (1, 5, 2), (3, 0, 1), (4, 4, 4)]]

UNARY_SHAPES = [(), (7,), (3, 4), (0,), (2, 0, 3), (2, 3, 4, 5), (1, 2, 1, 2, 3, 2), (3, 9, 35)]

VARIADIC_SHAPES = [
    [(3, 4)],
    [(2, 3, 4), (3, 1), (4,)],
    [(), (2, 2), (1, 2)],
    [(0, 2), (2,), (1, 1)],
    [(5,), (5,)],
    [(1, 3, 1, 2, 1, 2), (2, 1, 3, 2, 2, 1), (2,)],
    [(4, 1, 3), (1, 5, 1), (4, 5, 3), (3,)],
    [(2, 33), (33,)],
]

BIG_VARIADIC = [(20, 1, 500), (7, 1), (500,)]


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x) if np.size(x) else x * 0.0


def to64(v):
    return np.asarray(v).astype(np.float64)


def out_like(ref, dtype):
    return np.asarray(ref).astype(dtype)


def sample(g, items, count):
    """`count` items chosen at random (all of them when count >= len)."""
    if count >= len(items):
        return list(items)
    picks = sorted(g.rng.choice(len(items), size=count, replace=False))
    return [items[i] for i in picks]


def with_specials(g, value):
    """Puts a few infinities and NaNs into a float array (in place on a copy)."""
    value = np.array(value)
    if value.size == 0 or value.dtype.kind != "f":
        return value
    flat = value.reshape(-1)
    for special in (np.inf, -np.inf, np.nan):
        flat[int(g.rng.integers(0, flat.size))] = special
    return value


# ---- binary arithmetic ----------------------------------------------------------------------

def int_div(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def gen_arith(op):
    def ref(a, b, dtype):
        if np.dtype(dtype).kind in "iu":
            a64, b64 = a.astype(np.int64), b.astype(np.int64)
            r = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}.get(op)
            r = r(a64, b64) if r else int_div(a64, b64)
            return r.astype(dtype)
        a64, b64 = to64(a), to64(b)
        r = {"Add": a64 + b64, "Sub": a64 - b64, "Mul": a64 * b64}.get(op)
        if r is None:
            r = a64 / b64
        return r.astype(dtype)

    def generate(g):
        dtypes = ["float32", "float64", "float16", "int32", "int64"]
        for dtype in dtypes:
            shapes = BINARY_SHAPES if dtype == "float32" else sample(g, BINARY_SHAPES, 6)
            for sa, sb in shapes:
                low, high = (-50, 50) if np.dtype(dtype).kind in "iu" else (-3.0, 3.0)
                a = g.data(sa, dtype, low, high)
                b_value = g.values(sb, dtype, low, high)
                if op == "Div":
                    b_value = np.where(b_value == 0, 1, b_value).astype(dtype)
                    if np.dtype(dtype).kind == "f":
                        b_value = np.where(np.abs(b_value) < 0.1, 0.5, b_value).astype(dtype)
                b = g.data(sb, dtype, value=b_value)
                g.case([a, b], [ref(a.value, b.value, dtype)])
        # One program, many shapes.
        for dtype in ("float32", "int64", "float16"):
            for sets in RUN_BINARY:
                def build(shapes, dtype=dtype):
                    low, high = (-50, 50) if dtype == "int64" else (-3.0, 3.0)
                    a = g.data(shapes[0], dtype, low, high)
                    bv = g.values(shapes[1], dtype, low, high)
                    if op == "Div":
                        bv = np.where(np.abs(bv) < 0.5, 1, bv).astype(dtype)
                    b = g.data(shapes[1], dtype, value=bv)
                    return [a, b], [ref(a.value, b.value, dtype)], None
                multi_run(g, build, sets)
        # Large enough for the kernels' parallel and vector paths.
        for dtype in ("float32", "float16", "int64"):
            for sa, sb in BIG_BINARY_SHAPES:
                low, high = (-50, 50) if dtype == "int64" else (-3.0, 3.0)
                a = g.data(sa, dtype, low, high)
                bv = g.values(sb, dtype, low, high)
                if op == "Div":
                    bv = np.where(np.abs(bv) < 0.5, 1, bv).astype(dtype)
                b = g.data(sb, dtype, value=bv)
                g.case([a, b], [ref(a.value, b.value, dtype)], tag="big")
        # The other integer types; unsigned Sub wraps around.
        for dtype in ("uint8", "int8", "int16", "uint16", "uint32", "uint64"):
            for sa, sb in sample(g, BINARY_SHAPES, 2):
                a = g.data(sa, dtype, 0, 11)
                b = g.data(sb, dtype, value=np.maximum(g.values(sb, dtype, 1, 11), 1))
                g.case([a, b], [ref(a.value, b.value, dtype)])
        # Division by zero in floats follows IEEE (inf, -inf, nan).
        if op == "Div":
            a = g.data((6,), "float32", value=np.array([1, -1, 0, 2, -3, 0], np.float32))
            b = g.data((6,), "float32", value=np.zeros(6, np.float32))
            g.case([a, b], [ref(a.value, b.value, "float32")], tag="divzero")
        # Infinities and NaN flow through.
        for dtype in FLOATS:
            a = g.data((4, 5), dtype, value=with_specials(g, g.values((4, 5), dtype)))
            b = g.data((5,), dtype)
            g.case([a, b], [ref(a.value, b.value, dtype)], tag="special")
    return generate


def gen_pow(g):
    def ref(a, b):
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":
            return np.power(a.astype(np.int64), b.astype(np.int64)).astype(a.dtype)
        return np.power(to64(a), to64(b)).astype(a.dtype)

    for dtype in FLOATS:
        for sa, sb in sample(g, BINARY_SHAPES, 8):
            a = g.data(sa, dtype, 0.1, 3.0)
            b = g.data(sb, dtype, -2.0, 2.0)
            g.case([a, b], [ref(a.value, b.value)], tol=tol_for(dtype, 4))
    for dtype in ("int32", "int64"):
        for sa, sb in sample(g, BINARY_SHAPES, 6):
            a = g.data(sa, dtype, -4, 4)
            b = g.data(sb, dtype, 0, 5)
            g.case([a, b], [ref(a.value, b.value)])
    # Mixed types: float base, integer exponent (negative bases are fine then); int base with
    # a float exponent.
    for ea in ("int64", "int32"):
        a = g.data((3, 4), "float32", -3.0, 3.0)
        b = g.data((4,), ea, -3, 3)
        g.case([a, b], [ref(a.value, b.value)], tol=tol_for("float32", 4), tag="mixed")
    a = g.data((2, 5), "int64", 0, 6)
    b = g.data((5,), "float32", value=np.array([0, 1, 2, 0.5, 1], np.float32))
    g.case([a, b], [np.floor(np.power(to64(a.value), to64(b.value)) + 1e-9).astype(np.int64)],
           tag="intbase")


def gen_mod(g):
    for dtype in ("int32", "int64", "int16", "int8"):
        for fmod in (0, 1):
            for sa, sb in sample(g, BINARY_SHAPES, 4):
                a = g.data(sa, dtype, -40, 40)
                bv = g.values(sb, dtype, -9, 9)
                bv = np.where(bv == 0, 3, bv).astype(dtype)
                b = g.data(sb, dtype, value=bv)
                fn = np.fmod if fmod else np.mod
                g.case([a, b], [fn(a.value, b.value).astype(dtype)], attrs=[A.i("fmod", fmod)])
    for dtype in ("uint8", "uint32"):
        a = g.data((3, 5), dtype, 0, 200)
        b = g.data((5,), dtype, value=np.array([1, 3, 7, 10, 200], dtype))
        g.case([a, b], [np.mod(a.value, b.value)])
    for dtype in FLOATS:
        for sa, sb in sample(g, BINARY_SHAPES, 5):
            a = g.data(sa, dtype, -10.0, 10.0)
            bv = g.values(sb, dtype, -4.0, 4.0)
            bv = np.where(np.abs(bv) < 0.25, 1.5, bv).astype(dtype)
            b = g.data(sb, dtype, value=bv)
            expected = np.fmod(to64(a.value), to64(b.value)).astype(dtype)
            g.case([a, b], [expected], attrs=[A.i("fmod", 1)], tol=tol_for(dtype, 4))
            # fmod = 0 on floats (opset 28): numpy's mod, the divisor's sign
            expected = np.mod(to64(a.value), to64(b.value)).astype(dtype)
            g.case([a, b], [expected], attrs=[A.i("fmod", 0)], tol=tol_for(dtype, 4),
                   tag="floor")


def gen_bitshift(g):
    for dtype in ("uint8", "uint16", "uint32", "uint64"):
        bits = np.dtype(dtype).itemsize * 8
        for direction in ("LEFT", "RIGHT"):
            for sa, sb in sample(g, BINARY_SHAPES, 4):
                a = g.data(sa, dtype, 0, min(2 ** bits - 1, 2 ** 62))
                b = g.data(sb, dtype, 0, bits - 1)
                av, bv = a.value.astype(np.uint64), b.value.astype(np.uint64)
                r = np.left_shift(av, bv) if direction == "LEFT" else np.right_shift(av, bv)
                r = (r & np.uint64(2 ** bits - 1)) if bits < 64 else r
                g.case([a, b], [r.astype(dtype)], attrs=[A.s("direction", direction)])
    # signed types (opset 28): arithmetic right shifts, sign fill past the width
    for dtype in ("int8", "int16", "int32", "int64"):
        bits = np.dtype(dtype).itemsize * 8
        info = np.iinfo(dtype)
        for direction in ("LEFT", "RIGHT"):
            for sa, sb in sample(g, BINARY_SHAPES, 3):
                a = g.data(sa, dtype, max(info.min, -2 ** 62), min(info.max, 2 ** 62))
                b = g.data(sb, dtype, -2, bits + 2)
                av, bv = a.value.astype(np.int64), b.value.astype(np.int64)
                av, bv = np.broadcast_arrays(av, bv)
                wide = (bv < 0) | (bv >= bits)
                safe = np.where(wide, 0, bv)
                if direction == "LEFT":
                    r = np.where(wide, 0, np.left_shift(av.astype(np.uint64),
                                                        safe.astype(np.uint64)))
                    r = r.astype(np.uint64).astype(dtype.replace("int", "uint")).view(dtype)
                else:
                    r = np.where(wide, np.where(av < 0, -1, 0), np.right_shift(av, safe))
                g.case([a, b], [np.asarray(r).astype(dtype)],
                       attrs=[A.s("direction", direction)], tag="signed")


def gen_prelu(g):
    shapes = [((2, 3, 4, 5), (3, 1, 1)), ((2, 3, 4, 5), (5,)), ((4, 6), (1,)), ((4, 6), ()),
              ((3, 7), (3, 7)), ((0, 3), (3,)), ((2, 1, 2, 2, 3, 2), (3, 1)), ((7,), (7,)),
              ((2, 3, 33), (3, 1))]
    for dtype in ("float32", "float64", "float16", "int32", "int64"):
        use = shapes if dtype == "float32" else sample(g, shapes, 4)
        for sx, ss in use:
            low, high = (-20, 20) if dtype.startswith("int") else (-3.0, 3.0)
            x = g.data(sx, dtype, low, high)
            s = g.data(ss, dtype, low / 10, high / 10)
            if dtype.startswith("int"):
                r = np.where(x.value < 0, x.value.astype(np.int64) * s.value, x.value)
            else:
                r = np.where(to64(x.value) < 0, to64(x.value) * to64(s.value), to64(x.value))
            g.case([x, s], [np.asarray(r).astype(dtype)])


# ---- comparisons and logic ------------------------------------------------------------------

COMPARE = {
    "Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal,
    "Greater": np.greater, "GreaterOrEqual": np.greater_equal,
}


def gen_compare(op):
    def generate(g):
        dtypes = ["float32", "float64", "float16", "int32", "int64", "uint8", "int8", "uint16",
                  "uint64", "int16", "uint32"]
        if op == "Equal":
            dtypes.append("bool")
        for dtype in dtypes:
            shapes = BINARY_SHAPES if dtype == "float32" else sample(g, BINARY_SHAPES, 4)
            for sa, sb in shapes:
                # Small integers make equal pairs common.
                a = g.data(sa, dtype, value=g.values(sa, "int64", 0, 3).astype(dtype))
                b = g.data(sb, dtype, value=g.values(sb, "int64", 0, 3).astype(dtype))
                g.case([a, b], [COMPARE[op](a.value, b.value)])
        for sets in RUN_BINARY[:3]:
            def build(shapes):
                a = g.data(shapes[0], "int32", 0, 3)
                b = g.data(shapes[1], "int32", 0, 3)
                return [a, b], [COMPARE[op](a.value, b.value)], None
            multi_run(g, build, sets)
        for sa, sb in BIG_BINARY_SHAPES[:2]:
            a = g.data(sa, "float32", value=g.values(sa, "int64", 0, 3).astype("float32"))
            b = g.data(sb, "float32", value=g.values(sb, "int64", 0, 3).astype("float32"))
            g.case([a, b], [COMPARE[op](a.value, b.value)], tag="big")
        for dtype in FLOATS:
            av = with_specials(g, g.values((3, 6), dtype))
            bv = with_specials(g, g.values((3, 6), dtype))
            bv[0, :3] = av[0, :3]
            a, b = g.data((3, 6), dtype, value=av), g.data((3, 6), dtype, value=bv)
            g.case([a, b], [COMPARE[op](a.value, b.value)], tag="special")
    return generate


def gen_logic(op):
    fn = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}[op]

    def generate(g):
        for sa, sb in BINARY_SHAPES:
            a, b = g.data(sa, "bool"), g.data(sb, "bool")
            g.case([a, b], [fn(a.value, b.value)])
        def build(shapes):
            a, b = g.data(shapes[0], "bool"), g.data(shapes[1], "bool")
            return [a, b], [fn(a.value, b.value)], None
        multi_run(g, build, RUN_BINARY[0])
    return generate


# ---- variadic and Where ---------------------------------------------------------------------

def gen_variadic(op):
    def generate(g):
        def build(shapes):
            xs = [g.data(s, "float32") for s in shapes]
            vals = [to64(x.value) for x in xs]
            r = vals[0]
            for v in vals[1:]:
                r = {"Max": np.maximum, "Min": np.minimum}.get(op, np.add)(r, v)
            if op == "Mean":
                r = r / len(vals)
            r = np.broadcast_to(r, np.broadcast_shapes(*shapes))
            return xs, [r.astype(np.float32)], tol_for("float32", 2)
        multi_run(g, build, [[(2, 3, 4), (3, 1), (4,)], [(5, 2, 6), (2, 1), (6,)],
                             [(1, 0, 2), (0, 1), (2,)], [(3, 1, 1), (1, 1), (1,)]])
        dtypes = ["float32", "float64", "float16"]
        if op in ("Max", "Min"):
            dtypes += ["int32", "int64", "uint8", "int8", "uint16", "uint32", "uint64", "int16"]
        for dtype in dtypes:
            shape_lists = VARIADIC_SHAPES if dtype == "float32" else sample(g, VARIADIC_SHAPES, 4)
            if dtype in ("float32", "float16", "int32"):
                shape_lists = shape_lists + [BIG_VARIADIC]
            for shapes in shape_lists:
                low, high = (0, 100) if dtype.startswith("u") else (-50, 50)
                if dtype in FLOATS:
                    low, high = -3.0, 3.0
                xs = [g.data(s, dtype, low, high) for s in shapes]
                vals = [x.value.astype(np.float64) if dtype in FLOATS else x.value for x in xs]
                if op == "Max":
                    r = vals[0]
                    for v in vals[1:]:
                        r = np.maximum(r, v)
                elif op == "Min":
                    r = vals[0]
                    for v in vals[1:]:
                        r = np.minimum(r, v)
                else:
                    r = vals[0]
                    for v in vals[1:]:
                        r = r + v
                    if op == "Mean":
                        r = r / len(vals)
                r = np.broadcast_to(r, np.broadcast_shapes(*shapes))
                g.case(xs, [np.asarray(r).astype(dtype)], tol=tol_for(dtype, 2),
                       tag="big" if shapes == BIG_VARIADIC else "")
    return generate


def gen_where(g):
    shape_sets = [[(3, 4), (3, 4), (3, 4)], [(2, 1, 4), (3, 1), (4,)], [(), (2, 3), ()],
                  [(5,), (), (2, 5)], [(0, 2), (2,), (1, 2)],
                  [(1, 2, 1, 2, 1, 3), (2, 1, 2, 1, 3), (2, 1, 2, 1, 1, 3)],
                  [(4, 35), (35,), (4, 1)]]
    for dtype in ("float32", "float64", "float16", "int32", "int64", "bool", "uint8"):
        use = shape_sets if dtype in ("float32", "int64") else sample(g, shape_sets, 3)
        for sc, sx, sy in use:
            c = g.data(sc, "bool")
            x, y = g.data(sx, dtype, -9, 9), g.data(sy, dtype, -9, 9)
            g.case([c, x, y], [np.where(c.value, x.value, y.value).astype(dtype)])
    def build(shapes):
        c = g.data(shapes[0], "bool")
        x, y = g.data(shapes[1], "float32"), g.data(shapes[2], "float32")
        return [c, x, y], [np.where(c.value, x.value, y.value)], None
    multi_run(g, build, [[(3, 4), (4,), (3, 1)], [(5, 2), (2,), (5, 1)], [(0, 7), (7,), (0, 1)],
                         [(1, 1), (1,), (1, 1)]])


# ---- unary ----------------------------------------------------------------------------------

def selu(x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return gamma * np.where(x <= 0, alpha * np.exp(x) - alpha, x)


# op: (reference over float64, low, high, specials, tolerance scale, extra dtypes)
UNARY = {
    "Relu": (lambda x: np.maximum(x, 0), -3, 3, False, 1, ("int32", "int64", "int8")),
    "LeakyRelu": (lambda x: np.where(x < 0, f32(0.01) * x, x), -3, 3, False, 1, ()),
    "Elu": (lambda x: np.where(x < 0, np.exp(x) - 1, x), -3, 3, False, 2, ()),
    "Selu": (lambda x: selu(x, f32(1.67326319217681884765625), f32(1.05070102214813232421875)),
             -3, 3, False, 2, ()),
    "Celu": (lambda x: np.maximum(0, x) + np.minimum(0, np.exp(x) - 1), -3, 3, False, 2, ()),
    "ThresholdedRelu": (lambda x: np.where(x > 1.0, x, 0.0), -3, 3, False, 1, ()),
    "Gelu": (lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))), -4, 4, False, 4, ()),
    "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)), -8, 8, True, 2, ()),
    "HardSigmoid": (lambda x: np.maximum(0, np.minimum(1, f32(0.2) * x + f32(0.5))), -4, 4,
                    False, 1, ()),
    "HardSwish": (lambda x: x * np.maximum(0, np.minimum(1, x / 6 + 0.5)), -5, 5, False, 2, ()),
    "Softsign": (lambda x: x / (1 + np.abs(x)), -5, 5, False, 1, ()),
    "Softplus": (lambda x: np.logaddexp(0, x), -8, 8, False, 2, ()),
    "Shrink": (lambda x: np.where(x < -0.5, x, np.where(x > 0.5, x, 0.0)), -2, 2, False, 1,
               ("int32", "int64")),
    "Tanh": (np.tanh, -4, 4, True, 2, ()),
    "Exp": (np.exp, -9, 9, True, 2, ()),
    "Log": (np.log, 0.01, 50, True, 2, ()),
    "Sqrt": (np.sqrt, 0, 50, True, 1, ()),
    "Reciprocal": (lambda x: 1 / x, 0.1, 5, True, 1, ()),
    "Neg": (lambda x: -x, -5, 5, True, 1, ("int32", "int64", "int8")),
    "Abs": (np.abs, -5, 5, True, 1, ("int32", "int64", "int8", "uint8", "int16")),
    "Erf": (erf, -3, 3, False, 4, ()),
    "Sin": (np.sin, -6, 6, False, 4, ()),
    "Cos": (np.cos, -6, 6, False, 4, ()),
    "Tan": (np.tan, -1.2, 1.2, False, 4, ()),
    "Asin": (np.arcsin, -0.99, 0.99, False, 4, ()),
    "Acos": (np.arccos, -0.99, 0.99, False, 4, ()),
    "Atan": (np.arctan, -5, 5, False, 4, ()),
    "Sinh": (np.sinh, -4, 4, False, 4, ()),
    "Cosh": (np.cosh, -4, 4, False, 4, ()),
    "Asinh": (np.arcsinh, -5, 5, False, 4, ()),
    "Acosh": (np.arccosh, 1.01, 6, False, 4, ()),
    "Atanh": (np.arctanh, -0.95, 0.95, False, 4, ()),
    "Floor": (np.floor, -6, 6, True, 1, ()),
    "Ceil": (np.ceil, -6, 6, True, 1, ()),
    "Round": (np.round, -6, 6, True, 1, ()),
    "Sign": (np.sign, -3, 3, False, 1, ("int32", "int64", "int8", "uint8")),
}


# Unary ops whose results at |x| up to 100 are well defined (finite, 0 or inf).
LARGE_OK = ("Relu", "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "Gelu", "Sigmoid",
            "HardSigmoid", "HardSwish", "Softsign", "Softplus", "Tanh", "Exp", "Erf", "Atan",
            "Sinh", "Cosh", "Asinh", "Neg", "Abs", "Floor", "Ceil", "Round", "Sign")


def gen_unary(op):
    ref, low, high, specials, scale, extra = UNARY[op]

    def generate(g):
        for dtype in FLOATS + extra:
            shapes = UNARY_SHAPES if dtype == "float32" else sample(g, UNARY_SHAPES, 4)
            for shape in shapes:
                if dtype in FLOATS:
                    value = g.values(shape, dtype, low, high)
                    if op == "Round" and value.size:
                        # exact halves exercise round-half-to-even
                        flat = value.reshape(-1)
                        flat[: flat.size // 3] = (np.floor(flat[: flat.size // 3]) + 0.5)
                    x = g.data(shape, dtype, value=value)
                    expected = np.asarray(ref(to64(x.value))).astype(dtype)
                else:
                    lo = 0 if dtype.startswith("u") else int(low * 10)
                    x = g.data(shape, dtype, lo, int(high * 10))
                    if op == "Shrink":
                        v = x.value.astype(np.float64)
                        expected = np.where(v < -0.5, v, np.where(v > 0.5, v, 0)).astype(dtype)
                    else:
                        expected = np.asarray(ref(x.value.astype(np.int64))).astype(dtype)
                g.case([x], [expected], tol=tol_for(dtype, scale))
            if specials and dtype in FLOATS:
                x = g.data((4, 6), dtype,
                           value=with_specials(g, g.values((4, 6), dtype, low, high)))
                g.case([x], [np.asarray(ref(to64(x.value))).astype(dtype)],
                       tol=tol_for(dtype, scale), tag="special")
        for dtype in ("float32", "float16"):
            for sets in RUN_UNARY:
                def build(shape, dtype=dtype):
                    x = g.data(shape, dtype, low, high)
                    return [x], [np.asarray(ref(to64(x.value))).astype(dtype)], \
                        tol_for(dtype, scale)
                multi_run(g, build, sets)
        # Large magnitudes: overflow and saturation (Softplus(100) is 100, not inf).
        if op in LARGE_OK:
            for dtype in FLOATS:
                value = g.values((6, 20), "float64", -100, 100)
                value[0, :6] = [-100, -50, -20, 20, 50, 100]
                x = g.data((6, 20), dtype, value=value.astype(dtype))
                g.case([x], [np.asarray(ref(to64(x.value))).astype(dtype)],
                       tol=tol_for(dtype, scale), tag="large")
        for dtype in ("float32", "float16"):
            x = g.data((130, 257), dtype, low, high)
            g.case([x], [np.asarray(ref(to64(x.value))).astype(dtype)], tol=tol_for(dtype, scale),
                   tag="big")
        # Attributes away from their defaults.
        attr_cases = {
            "LeakyRelu": ([A.f("alpha", 0.3)], lambda x: np.where(x < 0, f32(0.3) * x, x)),
            "Elu": ([A.f("alpha", 0.7)], lambda x: np.where(x < 0, f32(0.7) * (np.exp(x) - 1), x)),
            "Selu": ([A.f("alpha", 1.5), A.f("gamma", 2.0)], lambda x: selu(x, 1.5, 2.0)),
            "Celu": ([A.f("alpha", 2.0)],
                     lambda x: np.maximum(0, x) + np.minimum(0, 2.0 * (np.exp(x / 2.0) - 1))),
            "ThresholdedRelu": ([A.f("alpha", 0.25)], lambda x: np.where(x > 0.25, x, 0.0)),
            "Gelu": ([A.s("approximate", "tanh")],
                     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                                      (x + 0.044715 * x ** 3)))),
            "HardSigmoid": ([A.f("alpha", 0.3), A.f("beta", 0.4)],
                            lambda x: np.maximum(0, np.minimum(1, f32(0.3) * x + f32(0.4)))),
            "Shrink": ([A.f("bias", 0.25), A.f("lambd", 1.0)],
                       lambda x: np.where(x < -1, x + 0.25, np.where(x > 1, x - 0.25, 0.0))),
        }
        if op in attr_cases:
            attrs, fn = attr_cases[op]
            for dtype in FLOATS:
                for shape in sample(g, UNARY_SHAPES, 3):
                    x = g.data(shape, dtype, low, high)
                    g.case([x], [np.asarray(fn(to64(x.value))).astype(dtype)], attrs=attrs,
                           tol=tol_for(dtype, scale), tag="attr")
    return generate


def gen_not(g):
    for shape in UNARY_SHAPES:
        x = g.data(shape, "bool")
        g.case([x], [np.logical_not(x.value)])


def gen_clip(g):
    for dtype in ("float32", "float64", "float16", "int32", "int64", "uint8", "int8"):
        shapes = UNARY_SHAPES if dtype == "float32" else sample(g, UNARY_SHAPES, 3)
        for shape in shapes:
            low, high = (-9, 9) if dtype in FLOATS else (-60, 60)
            if dtype.startswith("u"):
                low, high = 0, 200
            x = g.data(shape, dtype, low, high)
            mode = int(g.rng.integers(0, 4))  # 0 both, 1 min only, 2 max only, 3 neither
            lo_v = np.asarray(low / 3 if dtype in FLOATS else (low + high) // 3, dtype)
            hi_v = np.asarray(high / 2 if dtype in FLOATS else high // 2, dtype)
            lo = g.param(lo_v, dtype, scalar=True) if mode in (0, 1) else NONE
            hi = g.param(hi_v, dtype, scalar=True) if mode in (0, 2) else NONE
            r = x.value
            if mode in (0, 1):
                r = np.maximum(r, lo_v)
            if mode in (0, 2):
                r = np.minimum(r, hi_v)
            inputs = [x, lo, hi]
            while inputs and inputs[-1] is NONE:
                inputs.pop()
            g.case(inputs, [np.asarray(r).astype(dtype)])
    # min > max: every element becomes max.
    x = g.data((3, 4), "float32")
    g.case([x, g.param(1.0, "float32", scalar=True), g.param(-1.0, "float32", scalar=True)],
           [np.full((3, 4), -1.0, np.float32)], tag="inverted")
    # Bounds as attributes (opset < 11 models).
    x = g.data((4, 5), "float32", -3, 3)
    g.case([x], [np.clip(x.value, -0.5, 1.25)], attrs=[A.f("min", -0.5), A.f("max", 1.25)],
           tag="attrs")


def gen_isnan(g):
    for dtype in FLOATS:
        for shape in UNARY_SHAPES:
            x = g.data(shape, dtype, value=with_specials(g, g.values(shape, dtype)))
            g.case([x], [np.isnan(x.value)])


def gen_isinf(g):
    for dtype in FLOATS:
        for shape in sample(g, UNARY_SHAPES, 5):
            for neg, pos in ((1, 1), (0, 1), (1, 0), (0, 0)):
                x = g.data(shape, dtype, value=with_specials(g, g.values(shape, dtype)))
                v = x.value
                r = (np.isposinf(v) & bool(pos)) | (np.isneginf(v) & bool(neg))
                attrs = []
                if (neg, pos) != (1, 1):
                    attrs = [A.i("detect_negative", neg), A.i("detect_positive", pos)]
                g.case([x], [r], attrs=attrs)


ONNX_CODE = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6,
             "int64": 7, "bool": 9, "float16": 10, "float64": 11, "uint32": 12, "uint64": 13}


def cast_source(g, shape, src, dst):
    """Values of dtype `src` that convert to `dst` without overflow or NaN."""
    if src == "bool":
        return g.values(shape, "bool")
    lo, hi = -100, 100
    if dst.startswith("u") or src.startswith("u"):
        lo = 0
    if dst in ("int8",):
        lo, hi = max(lo, -100), 100
    if dst == "bool":
        v = g.values(shape, "int64", -2, 2).astype(src)
        return v
    if src in FLOATS:
        v = g.values(shape, "float64", lo, hi)
        if dst in FLOATS:
            v = g.values(shape, "float64", -1000, 1000)
        return v.astype(src)
    return g.values(shape, "int64", lo, hi).astype(src)


def gen_cast(g):
    pairs = [("float32", "int32"), ("float32", "int64"), ("float32", "float16"),
             ("float16", "float32"), ("float64", "float32"), ("float32", "float64"),
             ("int64", "float32"), ("int32", "int64"), ("int64", "int32"), ("float32", "bool"),
             ("bool", "float32"), ("bool", "int64"), ("int32", "bool"), ("float32", "uint8"),
             ("uint8", "float32"), ("int8", "int32"), ("float16", "int64"),
             ("float64", "float16"), ("int64", "float64"), ("uint16", "int32"),
             ("float32", "float32"), ("int64", "uint64"), ("float16", "float64")]
    for src, dst in pairs:
        for shape in sample(g, UNARY_SHAPES, 3):
            x = g.data(shape, src, value=cast_source(g, shape, src, dst))
            g.case([x], [x.value.astype(dst)], attrs=[A.i("to", ONNX_CODE[dst])])
    # NaN and infinities between float types; NaN to bool is true.
    for src, dst in (("float32", "float16"), ("float16", "float32"), ("float32", "float64"),
                     ("float32", "bool")):
        x = g.data((3, 5), src, value=with_specials(g, g.values((3, 5), src)))
        g.case([x], [x.value.astype(dst)], attrs=[A.i("to", ONNX_CODE[dst])], tag="special")
    # Subnormals both ways, and the boundary of float16's normal range.
    x = g.data((8,), "float32", value=np.array([6e-8, 5.96e-8, 3e-8, 1e-5, 3.1e-5, 6.1e-5,
                                                6.2e-5, -2.5e-6], np.float32))
    g.case([x], [x.value.astype(np.float16)], attrs=[A.i("to", 10)], tag="subnormal")
    bits = np.array([1, 2, 0x3FF, 0x200, 0x8001, 0x83FF, 0x0400, 0x7BFF], np.uint16)
    x = g.data((8,), "float16", value=bits.view(np.float16))
    g.case([x], [x.value.astype(np.float32)], attrs=[A.i("to", 1)], tag="subnormal")
    g.case([g.data((8,), "float16", value=bits.view(np.float16))],
           [bits.view(np.float16).astype(np.float64)], attrs=[A.i("to", 11)], tag="subnormal")
    # Rounding to nearest even on narrowing.
    x = g.data((6,), "float32", value=np.array([1.0009765625, 1.00048828125, 1.00146484375,
                                                65504.0, 65520.0, 1e-8], np.float32))
    g.case([x], [x.value.astype(np.float16)], attrs=[A.i("to", 10)], tag="rounding")


def gen_castlike(g):
    # A scalar cast like a vector: the output keeps the input's rank 0.
    for static in (False, True):
        x = g.data((), "float32", value=np.float32(2.75))
        like = g.data((2,), "int32", 0, 1, free=False)
        g.case([x, like], [np.array(2, np.int32)], static=static, tag="scalar")
    for src, dst in (("float32", "int32"), ("int64", "float32"), ("float32", "float16"),
                     ("float16", "float64"), ("bool", "float32"), ("int32", "int64"),
                     ("float64", "float32")):
        for shape in sample(g, UNARY_SHAPES, 3):
            x = g.data(shape, src, value=cast_source(g, shape, src, dst))
            like = g.data((2,), dst, 0, 1, free=False)
            g.case([x, like], [x.value.astype(dst)])


def gen_dropout(g):
    for dtype in FLOATS:
        for shape in sample(g, UNARY_SHAPES, 4):
            x = g.data(shape, dtype)
            form = int(g.rng.integers(0, 4))
            mask = np.ones(shape, dtype=bool)
            if form == 0:
                g.case([x], [x.value])
            elif form == 1:
                g.case([x], [x.value, mask])
            elif form == 2:
                ratio = g.param(0.3, dtype, scalar=True)
                g.case([x, ratio], [x.value, mask])
            else:
                ratio = g.param(0.5, dtype, scalar=True)
                training = g.param(False, "bool", scalar=True)
                g.case([x, ratio, training], [x.value, mask])
    # Training with ratio 0 keeps everything.
    x = g.data((3, 4), "float32")
    g.case([x, g.param(0.0, "float32", scalar=True), g.param(True, "bool", scalar=True)],
           [x.value, np.ones((3, 4), bool)], tag="train0")


def gen_identity(g):
    # A reversed (step -1) view of a tensor with a zero-sized dim.
    x = g.data((2, 0, 3), "float32", view="r")
    g.case([x], [x.value], tag="reversed_empty")
    for dtype in ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
                  "uint16", "uint32", "uint64", "bool"):
        for shape in sample(g, UNARY_SHAPES, 3):
            x = g.data(shape, dtype, 0, 100)
            g.case([x], [x.value])


GENERATORS = {
    "Add": gen_arith("Add"), "Sub": gen_arith("Sub"), "Mul": gen_arith("Mul"),
    "Div": gen_arith("Div"), "Pow": gen_pow, "Mod": gen_mod, "BitShift": gen_bitshift,
    "PRelu": gen_prelu,
    "And": gen_logic("And"), "Or": gen_logic("Or"), "Xor": gen_logic("Xor"),
    "Max": gen_variadic("Max"), "Min": gen_variadic("Min"), "Sum": gen_variadic("Sum"),
    "Mean": gen_variadic("Mean"), "Where": gen_where,
    "Not": gen_not, "Clip": gen_clip, "IsNaN": gen_isnan, "IsInf": gen_isinf,
    "Cast": gen_cast, "CastLike": gen_castlike, "Dropout": gen_dropout,
    "Identity": gen_identity,
}
for _op in COMPARE:
    GENERATORS[_op] = gen_compare(_op)
for _op in UNARY:
    GENERATORS[_op] = gen_unary(_op)
