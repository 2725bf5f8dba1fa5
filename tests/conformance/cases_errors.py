"""Invalid inputs: each case must make building, compiling or running the op return an error
(never crash, never leak; the sanitizer build checks the error paths). Indices out of range,
shapes that cannot reshape/expand/split, zero steps and deltas, incompatible broadcasts,
wrong channel counts, bad attributes, detection inputs of the wrong shape and batch indices out
of range."""

import numpy as np

from gen_cases import A, NONE


def err(g, inputs, n_outputs=1, attrs=()):
    g.case(inputs, [None] * n_outputs, attrs=attrs, static=False, error=True)


def feed(g, values, dtype="int64"):
    """A run-time integer vector with a constant declared length."""
    return g.param(values, dtype, kind="feed")


def indices(g, value, decl="auto"):
    return g.data(np.shape(value), "int64", value=np.asarray(value, np.int64), free=False,
                  view="c", decl=decl)


def x(g, shape, dtype="float32"):
    return g.data(shape, dtype, view="c")


def errors_for(op):
    def gather(g):
        err(g, [x(g, (5, 3)), indices(g, [0, 5])])
        err(g, [x(g, (5, 3)), indices(g, [-6])])

    def gather_elements(g):
        err(g, [x(g, (4, 3)), indices(g, [[0, 1, 4], [1, 1, 1]])])

    def gather_nd(g):
        err(g, [x(g, (4, 3)), indices(g, [[4, 0], [0, 0]], decl=(-1,))])

    def scatter_elements(g):
        err(g, [x(g, (4, 3)), indices(g, [[0, 7, 1], [1, 2, 3]]), x(g, (2, 3))])

    def scatter_nd(g):
        err(g, [x(g, (4, 3)), indices(g, [[9]], decl=(-1,)), x(g, (1, 3))])

    def compress(g):
        err(g, [x(g, (3,)), g.data((5,), "bool", value=np.ones(5, bool), view="c")],
            attrs=[A.i("axis", 0)])

    table = {
        "Gather": gather,
        "GatherElements": gather_elements,
        "GatherND": gather_nd,
        "ScatterElements": scatter_elements,
        "ScatterND": scatter_nd,
        "Compress": compress,
        "Reshape": lambda g: (err(g, [x(g, (2, 3)), feed(g, [4, 2])]),
                              err(g, [x(g, (2, 3)), feed(g, [-1, -1])])),
        "Expand": lambda g: err(g, [x(g, (3, 1)), feed(g, [4, 2])]),
        "Split": lambda g: err(g, [x(g, (6,)), feed(g, [2, 2])], n_outputs=2),
        "Tile": lambda g: err(g, [x(g, (2, 3)), feed(g, [-1, 2])]),
        "Range": lambda g: err(g, [g.param(v, kind="feed", scalar=True) for v in (0, 5, 0)]),
        "Slice": lambda g: err(g, [x(g, (6, 4)), feed(g, [0]), feed(g, [4]), feed(g, [0]),
                                   feed(g, [0])]),
        "TopK": lambda g: (err(g, [x(g, (3, 4)), feed(g, [5])], n_outputs=2),
                           err(g, [x(g, (3, 4)), feed(g, [-1])], n_outputs=2)),
        "ConstantOfShape": lambda g: err(g, [feed(g, [2, -3])]),
        "Mod": lambda g: err(g, [x(g, (3,)), x(g, (3,))], attrs=[A.i("fmod", 2)]),
        "Add": lambda g: err(g, [x(g, (3,)), x(g, (4,))]),
        "MatMul": lambda g: err(g, [x(g, (3, 4)), x(g, (5, 6))]),
        "Concat": lambda g: err(g, [x(g, (2, 3)), x(g, (4, 5))], attrs=[A.i("axis", 0)]),
        "Conv": lambda g: err(g, [x(g, (1, 2, 5, 5)), g.data((3, 4, 3, 3), "float32",
                                                             kind="init")]),
        "EyeLike": lambda g: err(g, [x(g, (2, 3, 4))]),
        "Where": lambda g: err(g, [x(g, (3,)), x(g, (3,)), x(g, (3,))]),
        "Cast": lambda g: err(g, [x(g, (3,))], attrs=[A.i("to", 12345)]),
        "Unsqueeze": lambda g: err(g, [x(g, (3, 4)), feed(g, [0, 0])]),
        "Squeeze": lambda g: err(g, [x(g, (3, 4)), feed(g, [0])]),
        "Transpose": lambda g: err(g, [x(g, (3, 4))], attrs=[A.ints("perm", [0, 0])]),
        "DepthToSpace": lambda g: err(g, [x(g, (1, 3, 2, 2))], attrs=[A.i("blocksize", 2)]),
        "SpaceToDepth": lambda g: err(g, [x(g, (1, 1, 3, 4))], attrs=[A.i("blocksize", 2)]),
        "NegativeLogLikelihoodLoss": lambda g: err(g, [x(g, (2, 3)), indices(g, [0, 7])]),
        "SoftmaxCrossEntropyLoss": lambda g: err(g, [x(g, (2, 3)), indices(g, [-2, 1])]),
        "Einsum": lambda g: err(g, [x(g, (2, 3, 4)), x(g, (4, 5))],
                                attrs=[A.s("equation", "ij,jk->ik")]),
        "Pad": lambda g: err(g, [x(g, (3, 4)), feed(g, [0, 0, 0]), NONE]),
        "NonMaxSuppression": lambda g: (
            err(g, [x(g, (1, 5, 5)), x(g, (1, 1, 5)), feed(g, [3])]),
            err(g, [x(g, (2, 5, 4)), x(g, (3, 1, 5)), feed(g, [3])]),
            err(g, [x(g, (1, 3, 4)), x(g, (1, 1, 3)), feed(g, [3]),
                    g.param([1.5], "float32", kind="feed")])),
        "RoiAlign": lambda g: (err(g, [x(g, (2, 1, 4, 4)), x(g, (2, 4)), indices(g, [0, 2])]),
                               err(g, [x(g, (1, 1, 4, 4)), x(g, (2, 3)), indices(g, [0, 0])]),
                               err(g, [x(g, (1, 1, 4, 4)), x(g, (3, 4)), indices(g, [0, 0])])),
        "LRN": lambda g: (err(g, [x(g, (2, 3, 4))]),
                          err(g, [x(g, (2, 3, 4))], attrs=[A.i("size", 0)]),
                          err(g, [x(g, (2, 3))], attrs=[A.i("size", 3)])),
        # a per-axis scale of the wrong length, a zero point of another dtype, blocks that
        # do not give the scale's dims, a zero-point length that is not M
        "QuantizeLinear": lambda g: (
            err(g, [x(g, (2, 3)), g.param(np.ones(4, np.float32), "float32", kind="feed")],
                attrs=[A.i("axis", 1)]),
            err(g, [x(g, (4, 8)), g.param(np.ones((4, 2), np.float32), "float32",
                                          kind="feed")],
                attrs=[A.i("axis", 1), A.i("block_size", 3)])),
        "DequantizeLinear": lambda g: (
            err(g, [g.data((2, 3), "int8", view="c"), g.param(np.float32(1), "float32"),
                    g.param(np.uint8(0), "uint8")]),
            err(g, [g.data((2, 3), "int8", view="c"),
                    g.param(np.ones(2, np.float32), "float32", kind="feed")],
                attrs=[A.i("axis", -1)])),
        "MatMulInteger": lambda g: (
            err(g, [g.data((4, 3), "uint8", view="c"), g.data((3, 2), "uint8", view="c"),
                    g.param(np.zeros(5, np.uint8), "uint8", kind="feed")]),
            err(g, [g.data((4, 3), "uint8", view="c"), g.data((5, 2), "int8", view="c")])),
        "ConvInteger": lambda g: err(g, [g.data((1, 2, 5, 5), "uint8", view="c"),
                                         g.data((3, 4, 3, 3), "int8", kind="init")]),
    }
    return table.get(op)
