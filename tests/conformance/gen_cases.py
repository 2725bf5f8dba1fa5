#!/usr/bin/env python3
"""Generates the stax op conformance suite: for every op in include/stax/ops.def except If,
Loop, Constant and the sequence ops (they have their own tests), many one-node cases with inputs and numpy
reference outputs, written as .npy files plus one line-based manifest that
tests/conformance/runner.c reads.

    gen_cases.py OUTDIR [--filter OP[,OP...]] [--limit N] [--all]

The references are numpy code in this folder (one module per op family, cases_*.py), written
from the ONNX operator semantics; nothing is taken from another implementation. Everything is
deterministic: each op has its own random generator seeded from its name, so adding cases to
one op leaves the others unchanged. Besides single runs, cases cover one program run with
several shapes in turn, invalid inputs that must be rejected (cases_errors.py), and a bfloat16
pass over many ops' float32 cases.

Manifest format (OUTDIR/manifest.txt), one record per line, tokens separated by one space,
'#' starts a comment line. A case is:

    case NAME OP OUTPUTS STATIC      STATIC 1: every input dim declared constant
    sym NAME MIN MAX                 a shape symbol used by this case's declared dims; MAX is
                                     an integer or 'inf'
    attr NAME int V
    attr NAME float V                V is a float32 value printed exactly ('%r' of a float32)
    attr NAME ints N V1 .. VN
    attr NAME floats N V1 .. VN
    attr NAME string S               S has no spaces
    attr NAME tensor FILE
    in none                          an omitted optional input
    in init FILE                     a graph initializer (a constant)
    in feed FILE VIEW SHAPE DIMS     a graph input fed at run time
    out FILE RTOL ATOL               expected output: |got - want| <= ATOL + RTOL * |want|
    out skip                         output produced but not compared
    error                            (optional, right after 'case') the inputs are invalid:
                                     building, compiling or running must return an error
    again                            (optional, repeatable) another run of the same compiled
                                     program: then one 'in feed' line per fed input (new
                                     values and shapes, the same declared dims) and the
                                     'out' lines for that run
    end

FILE is '@OFFSET:SIZE' or '@OFFSET:SIZE:bf16': the .npy image of SIZE bytes at OFFSET in
OUTDIR/arrays.bin (one file for the whole suite: thousands of small files are slow to write
and read). ':bf16' marks a uint16 array holding bfloat16 bits (numpy has no bfloat16), to be
fed or compared as bfloat16.

SHAPE is the logical shape fed ('-' for rank 0, else comma-separated sizes); DIMS is the
declared shape, each entry an integer or a symbol name.
VIEW says how to turn the stored array into the logical input as a non-contiguous view:
    c  the stored array as is (contiguous)
    t  stored transposed (all axes reversed); the runner transposes it back as a view
    s  stored with every dim doubled, the values at even indices; the runner slices with step 2
    x  both: stored transposed with every dim doubled; the runner transposes, then slices
    r  stored with every axis reversed; the runner slices with step -1
    b  stored with size 1 on some axes; the runner broadcasts it (stride 0) to SHAPE
Integer outputs and bools compare exactly (tolerances 0); NaN equals NaN; infinities must match.
"""

import argparse
import io
import math
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

FLOATS = ("float32", "float64", "float16")

# Base tolerances per dtype: (rtol, atol).
BASE_TOL = {
    "float64": (1e-10, 1e-12),
    "float32": (2e-5, 1e-6),
    "float16": (2e-3, 1e-3),
}

EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10}


def round_bf16(value):
    """float32 values rounded to the nearest bfloat16 (ties to even), still as float32."""
    v = np.array(value, dtype=np.float32)
    bits = v.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32).reshape(v.shape)
    return np.where(np.isnan(v), np.float32(np.nan), out).astype(np.float32)


class Bf16:
    """An array stored as bfloat16 (numpy has no such dtype): float32 values that bfloat16
    represents exactly, saved as their upper 16 bits and marked ':bf16' in the manifest."""

    def __init__(self, value):
        self.value = round_bf16(value)

    def bits(self):
        return (self.value.view(np.uint32) >> 16).astype(np.uint16)


def tol_for(dtype, scale=1.0):
    dtype = np.dtype(dtype).name
    if dtype not in BASE_TOL:
        return (0.0, 0.0)
    rtol, atol = BASE_TOL[dtype]
    return (rtol * scale, atol * scale)


def sum_tol(dtype, abs_reference, scale=1.0):
    """Tolerances for outputs that are sums of products (reductions, matmul, conv): the
    absolute error of a sum is bounded by the sum of the magnitudes of its terms, so atol grows
    with `abs_reference` (the same computation over |inputs|)."""
    dtype = np.dtype(dtype).name
    if dtype not in BASE_TOL:
        return (0.0, 0.0)
    rtol, atol = BASE_TOL[dtype]
    magnitude = float(np.max(abs_reference)) if np.size(abs_reference) else 0.0
    if not math.isfinite(magnitude):
        magnitude = 0.0
    factor = 4.0 if dtype == "float16" else 32.0
    return (rtol * scale, max(atol, factor * EPS[dtype] * magnitude) * scale)


class Inp:
    """One node input: a logical value plus how the runner gets it (feed/init/none), how it is
    viewed, and how its dims are declared ('auto': symbols, 'const': constants, or a tuple of
    negative dim positions declared constant, the rest symbols)."""

    def __init__(self, value, kind="feed", view="c", decl="auto", stored=None, bf16=False):
        self.bf16 = bf16
        self.value = value
        self.kind = kind
        self.view = view
        self.decl = decl
        self.stored = stored


NONE = Inp(None, kind="none")


class A:
    """Typed attribute constructors."""

    @staticmethod
    def i(name, v):
        return (name, "int", int(v))

    @staticmethod
    def f(name, v):
        return (name, "float", float(np.float32(v)))

    @staticmethod
    def ints(name, vs):
        return (name, "ints", [int(v) for v in vs])

    @staticmethod
    def floats(name, vs):
        return (name, "floats", [float(np.float32(v)) for v in vs])

    @staticmethod
    def s(name, v):
        assert " " not in v
        return (name, "string", v)

    @staticmethod
    def t(name, array):
        return (name, "tensor", np.asarray(array))


def multi_run(g, build, shape_sets, attrs=(), **kwargs):
    """One case whose program is compiled once and run with each shape set in turn (in the same
    context): build(shapes) returns (inputs, outputs, tol) for one run."""
    runs = [build(shapes) for shapes in shape_sets]
    inputs, outputs, tol = runs[0]
    g.case(inputs, outputs, attrs=attrs, tol=tol, runs=runs[1:], **kwargs)


def f32(v):
    """An attribute value as the kernel sees it (float32), in float64 for references."""
    return float(np.float32(v))


class Gen:
    """Case factory for one op: random inputs, view and declaration choices, manifest output."""

    def __init__(self, suite, op, bf16=False):
        """bf16: the op's float32 cases become bfloat16 ones: float32 inputs are rounded to
        bfloat16 and fed as such, float32 outputs are expected as bfloat16 (rounded from the
        float64 reference), with bfloat16 tolerances."""
        self.suite = suite
        self.op = op
        self.bf16 = bf16
        self.rng = np.random.default_rng(zlib.crc32(op.encode()))
        self.count = 0

    # ---- inputs ----------------------------------------------------------------------------

    def values(self, shape, dtype, low=-2.0, high=2.0):
        shape = tuple(shape)
        dtype = np.dtype(dtype)
        if dtype == np.bool_:
            return self.rng.random(shape) < 0.5
        if dtype.kind in "iu":
            lo = int(max(low, np.iinfo(dtype).min))
            hi = int(min(high, np.iinfo(dtype).max))
            return self.rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(dtype)
        return self.rng.uniform(low, high, size=shape).astype(dtype)

    def pick_view(self, shape, free):
        rank = len(shape)
        if rank == 0 or self.rng.random() >= 0.4:
            return "c"
        # 's' stores 2**rank times the data: only for small arrays
        small = int(np.prod(shape)) << rank <= 16384
        choices = (["s"] if small else []) + (["r"] if all(shape) else [])
        if rank >= 2:
            choices += ["t", "t"] + (["x"] if small else [])
        if free and any(d > 1 for d in shape):
            choices.append("b")
        if not choices:
            return "c"
        return str(self.rng.choice(choices))

    def data(self, shape, dtype, low=-2.0, high=2.0, value=None, kind="feed", view=None,
             decl="auto", free=True):
        """A data input. free: any values are valid, so a broadcast view may replace some."""
        if value is None:
            value = self.values(shape, dtype, low, high)
        value = np.asarray(value)
        bf16 = self.bf16 and value.dtype == np.float32
        if bf16:
            value = round_bf16(value)
        if kind != "feed":
            return Inp(value, kind=kind, decl=decl, bf16=bf16)
        if view is None:
            view = self.pick_view(value.shape, free)
        stored = None
        if view == "b":
            axes = [a for a, d in enumerate(value.shape) if d > 1]
            chosen = [a for a in axes if self.rng.random() < 0.5] or [axes[0]]
            index = tuple(slice(0, 1) if a in chosen else slice(None)
                          for a in range(value.ndim))
            stored = np.ascontiguousarray(value[index])
            value = np.broadcast_to(stored, value.shape).copy()
        return Inp(value, kind="feed", view=view, decl=decl, stored=stored, bf16=bf16)

    def param(self, values, dtype="int64", kind=None, scalar=False):
        """A small integer/float vector that parameterises the op (axes, shape, pads, k...):
        an initializer or, at random, a run-time input with a constant declared length."""
        value = np.asarray(values, dtype=dtype)
        if scalar:
            value = value.reshape(())
        if kind is None:
            kind = "init" if self.rng.random() < 0.6 else "feed"
        bf16 = self.bf16 and value.dtype == np.float32
        if bf16:
            value = round_bf16(value)
        return Inp(value, kind=kind, view="c", decl="const", bf16=bf16)

    def chance(self, p):
        return self.rng.random() < p

    def choice(self, seq):
        return seq[int(self.rng.integers(0, len(seq)))]

    # ---- cases ------------------------------------------------------------------------------

    def case(self, inputs, outputs, attrs=(), tol=None, static=None, n_outputs=None, tag="",
             keep_float32=(), runs=(), error=False):
        """outputs: expected arrays (None: not compared). tol: one (rtol, atol) for all
        outputs, a list per output, or None for the base tolerance of each output's dtype.
        keep_float32: outputs that stay float32 in bf16 mode (LayerNormalization's stats).
        runs: more (inputs, outputs, tol) for the same program: new values and shapes for the
        fed inputs (the same kinds and declared dims), run through the same context.
        error: the inputs are invalid: building, compiling or running must fail with an error
        (and not crash); outputs are then None."""
        if self.suite.limit and self.count >= self.suite.limit:
            return
        if self.bf16 and not any(inp is not None and inp.bf16 for inp in inputs):
            return  # the bfloat16 pass repeats only cases that have bfloat16 inputs
        if n_outputs is None:
            n_outputs = len(outputs)
        if runs:
            static = False
        elif static is None:
            static = self.chance(0.25)
        all_runs = [(inputs, outputs, tol)] + list(runs)
        prepared = [(i,) + self.expected(o, t, keep_float32) for i, o, t in all_runs]
        if self.bf16:
            tag = "bf16" + ("_" + tag if tag else "")
        if runs:
            tag = (tag + "_" if tag else "") + "runs%d" % len(all_runs)
        if error:
            tag = (tag + "_" if tag else "") + "error"
        self.suite.write_case(self, prepared, attrs, static, n_outputs, tag, error)
        self.count += 1

    def expected(self, outputs, tol, keep_float32):
        """The outputs to compare and their tolerances (see case())."""
        if not isinstance(tol, list):
            tol = [tol] * len(outputs)
        tols = []
        for expected, t in zip(outputs, tol):
            if expected is None:
                tols.append(None)
                continue
            if t is None or np.asarray(expected).dtype.kind not in "f":
                t = tol_for(np.asarray(expected).dtype) if t is None else (0.0, 0.0)
            tols.append(t)
        outputs = list(outputs)
        if self.bf16:
            for k, expected in enumerate(outputs):
                if expected is None or k in keep_float32 or \
                        np.asarray(expected).dtype != np.float32:
                    continue
                outputs[k] = Bf16(expected)
                # bfloat16 keeps 8 significant bits: 2 ulps relative, and the absolute part
                # scaled from float32's (which grows with the magnitude of summed terms)
                rtol, atol = tols[k]
                scale = rtol / BASE_TOL["float32"][0]
                tols[k] = (2 * 2.0 ** -7 * scale, max(atol * 2.0 ** 13, 1e-2))
        return outputs, tols


class Suite:
    def __init__(self, outdir, limit=0, include_all=False):
        self.outdir = outdir
        self.include_all = include_all
        self.limit = limit
        self.lines = []
        self.case_count = 0
        self.file_count = 0
        self.data = open(os.path.join(outdir, "arrays.bin"), "wb")
        self.data_size = 0

    def save(self, op, name, array, bf16=False):
        """Appends one .npy image to arrays.bin; returns its manifest reference."""
        if isinstance(array, Bf16):
            array, bf16 = array.value, True
        if bf16:
            array = Bf16(array).bits()
        buffer = io.BytesIO()
        np.save(buffer, np.array(array, order="C"))
        data = buffer.getvalue()
        offset = self.data_size
        self.data.write(data)
        self.data_size += len(data)
        self.file_count += 1
        return "@%d:%d%s" % (offset, len(data), ":bf16" if bf16 else "")

    def write_case(self, gen, runs, attrs, static, n_outputs, tag, error=False):
        """runs: [(inputs, outputs, tols)]; the first run's inputs declare the graph."""
        name = "%s_%03d%s" % (gen.op, gen.count, ("_" + tag) if tag else "")
        lines = ["case %s %s %d %d" % (name, gen.op, n_outputs, 1 if static else 0)]
        if error:
            lines.append("error")
        inputs = runs[0][0]
        # Declared dims from the first run: a symbol per distinct size (a size-1 dim is the
        # constant 1, as broadcasting needs); every later run must agree with them.
        symbols = {}
        declared = []
        for inp in inputs:
            if inp is None or inp.kind != "feed":
                declared.append(None)
                continue
            value = np.asarray(inp.value)
            dims = []
            for a, d in enumerate(value.shape):
                if static or inp.decl == "const" or d == 1 or \
                        (isinstance(inp.decl, tuple) and a - value.ndim in inp.decl):
                    dims.append(str(d))
                    continue
                if d not in symbols:
                    symbols[d] = "S%d_%s" % (len(symbols), gen.op)
                dims.append(symbols[d])
            declared.append(dims)
        minimum = {sym: d for d, sym in symbols.items()}
        for r, (run_inputs, _, _) in enumerate(runs[1:], 1):
            seen = {}
            for k, inp in enumerate(run_inputs):
                if declared[k] is None:
                    continue
                shape = np.asarray(inp.value).shape
                assert len(shape) == len(declared[k]), (name, r, k)
                for token, d in zip(declared[k], shape):
                    if token.isdigit():
                        assert int(token) == d, ("%s run %d input %d: dim %d, declared %s" %
                                                 (name, r, k, d, token))
                    else:
                        assert seen.setdefault(token, d) == d, ("%s run %d: %s is %d and %d" %
                                                                (name, r, token, seen[token], d))
                        minimum[token] = min(minimum[token], d)
        for d, sym in sorted(symbols.items(), key=lambda item: item[1]):
            lines.append("sym %s %d inf" % (sym, 0 if minimum[sym] == 0 else 1))
        for attr_name, kind, value in attrs:
            if kind == "int":
                lines.append("attr %s int %d" % (attr_name, value))
            elif kind == "float":
                lines.append("attr %s float %r" % (attr_name, value))
            elif kind == "ints":
                lines.append("attr %s ints %d%s" % (attr_name, len(value),
                                                    "".join(" %d" % v for v in value)))
            elif kind == "floats":
                lines.append("attr %s floats %d%s" % (attr_name, len(value),
                                                      "".join(" %r" % v for v in value)))
            elif kind == "string":
                lines.append("attr %s string %s" % (attr_name, value))
            elif kind == "tensor":
                path = self.save(gen.op, "%s_a_%s" % (name, attr_name), value)
                lines.append("attr %s tensor %s" % (attr_name, path))
        for r, (run_inputs, outputs, tols) in enumerate(runs):
            if r:
                lines.append("again")
            for k, inp in enumerate(run_inputs):
                if r and declared[k] is None:
                    continue  # later runs list only the fed inputs
                if inp is None or inp.kind == "none":
                    lines.append("in none")
                    continue
                value = np.asarray(inp.value)
                if inp.kind == "init":
                    path = self.save(gen.op, "%s_i%d" % (name, k), value, inp.bf16)
                    lines.append("in init %s" % path)
                    continue
                stored = stored_form(value, inp.view, inp.stored)
                path = self.save(gen.op, "%s_r%d_i%d" % (name, r, k), stored, inp.bf16)
                shape = ",".join(str(d) for d in value.shape) or "-"
                lines.append("in feed %s %s %s %s" % (path, inp.view, shape,
                                                      ",".join(declared[k]) or "-"))
            for k, (expected, t) in enumerate(zip(outputs, tols)):
                if expected is None:
                    lines.append("out skip")
                    continue
                path = self.save(gen.op, "%s_r%d_o%d" % (name, r, k), expected)
                lines.append("out %s %r %r" % (path, float(t[0]), float(t[1])))
            for _ in range(len(outputs), n_outputs):
                lines.append("out skip")
        lines.append("end")
        self.lines += lines
        self.case_count += 1

    def write_manifest(self):
        self.data.close()
        with open(os.path.join(self.outdir, "manifest.txt"), "w") as f:
            f.write("# stax conformance manifest, written by tests/conformance/gen_cases.py\n")
            f.write("\n".join(self.lines))
            f.write("\n")


def stored_form(value, view, stored):
    if view == "c":
        return value
    if view == "t":
        return np.ascontiguousarray(value.transpose())
    if view == "r":
        return np.ascontiguousarray(value[(slice(None, None, -1),) * value.ndim])
    if view == "x":
        return stored_form(value, "s", None).transpose()
    if view == "s":
        big = np.zeros(tuple(2 * d for d in value.shape), dtype=value.dtype)
        if value.dtype.kind == "f":
            big[...] = np.nan  # poison: a kernel that ignores the strides reads NaN
        elif value.dtype.kind in "iu":
            big[...] = np.iinfo(value.dtype).max
        else:
            big[...] = True
        big[(slice(None, None, 2),) * value.ndim] = value
        return big
    if view == "b":
        return stored
    raise ValueError(view)


def all_ops():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                        "stax", "ops.def")
    ops = []
    with open(path) as f:
        for line in f:
            if line.startswith("STAX_OP("):
                ops.append(line[len("STAX_OP("):].split(",")[0].strip())
    return ops


# The sequence ops take or make sequence values, which these one-node tensor cases cannot
# express: tests/unit/test_sequence.c and tests/python/test_sequences.py test them.
SKIPPED = ("If", "Loop", "Constant", "SequenceEmpty", "SequenceConstruct", "SequenceInsert",
           "SequenceErase", "SequenceAt", "SequenceLength", "SplitToSequence",
           "ConcatFromSequence")

# Ops whose float32 cases are generated a second time in bfloat16.
BF16_OPS = set("""
Add Sub Mul Div PRelu Equal Less Greater Max Min Sum Mean Where Relu LeakyRelu Elu Gelu Sigmoid
HardSwish Softplus Tanh Exp Log Sqrt Reciprocal Neg Abs Erf Sin Floor Round Sign IsNaN IsInf
ReduceSum ReduceMean ReduceMax ReduceL2 ReduceLogSumExp ArgMax Softmax LogSoftmax CumSum
LayerNormalization BatchNormalization InstanceNormalization LRN MatMul Gemm Einsum Conv
ConvTranspose MaxPool AveragePool GlobalAveragePool Transpose Concat Gather Slice Pad Expand
""".split())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--filter", help="only this op (comma-separated list allowed)")
    parser.add_argument("--limit", type=int, default=0, help="at most this many cases per op")
    parser.add_argument("--all", action="store_true",
                        help="also cases of features known to be unimplemented (BatchNormalization "
                             "training mode)")
    args = parser.parse_args()

    import cases_elementwise
    import cases_reduce
    import cases_linalg
    import cases_movement
    import cases_indexing
    import cases_quant
    import cases_detection
    import cases_errors

    generators = {}
    for module in (cases_elementwise, cases_reduce, cases_linalg, cases_movement,
                   cases_indexing, cases_quant, cases_detection):
        generators.update(module.GENERATORS)

    ops = [op for op in all_ops() if op not in SKIPPED]
    missing = [op for op in ops if op not in generators]
    if missing:
        sys.exit("gen_cases.py: no generator for %s" % ", ".join(missing))
    if args.filter:
        wanted = set(args.filter.split(","))
        ops = [op for op in ops if op in wanted]

    os.makedirs(args.outdir, exist_ok=True)
    suite = Suite(args.outdir, args.limit, args.all)
    np.seterr(all="ignore")
    for op in ops:
        gen = Gen(suite, op)
        generators[op](gen)
        errors = cases_errors.errors_for(op)
        if errors:
            errors(gen)
        if op in BF16_OPS:
            generators[op](Gen(suite, op, bf16=True))
    suite.write_manifest()
    print("gen_cases.py: %d cases for %d ops, %d arrays (%.1f MB) in %s" %
          (suite.case_count, len(ops), suite.file_count, suite.data_size / 1e6, args.outdir))


if __name__ == "__main__":
    main()
