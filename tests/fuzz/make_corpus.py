"""Writes the fuzzers' seed corpora (scripts/fuzz.sh runs this): small ONNX models covering the
importer's paths (elementwise with broadcasting, MatMul/Gemm, Conv and pooling, shape chains
with Reshape, If and Loop subgraphs, sequence ops, a transformer layer, constants of several
dtypes), the
same models compiled and saved as stax programs, and .npy files of every dtype in C and
Fortran order. Usage: make_corpus.py OUTDIR (writes OUTDIR/{onnx,program,npy}/)."""
import io
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

RNG = np.random.default_rng(0)


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "seed", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def seeds():
    f = TensorProto.FLOAT
    yield "relu", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", f, ["N"])],
                        [vi("y", f, ["N"])])
    yield "broadcast", model(
        [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Mul", ["s", "x"], ["p"]),
         helper.make_node("Where", ["c", "p", "s"], ["y"])],
        [vi("x", f, ["B", 4]), vi("b", f, [4]), vi("c", TensorProto.BOOL, ["B", 1])],
        [vi("y", f, ["B", 4])])
    yield "mlp", model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
         helper.make_node("Gemm", ["hb", "w2"], ["y"], transB=1)],
        [vi("x", f, ["N", 8])], [vi("y", f, ["N", 3])],
        [const("w", RNG.standard_normal((8, 5))), const("b", RNG.standard_normal(5)),
         const("w2", RNG.standard_normal((3, 5)))])
    yield "conv", model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2])],
        [vi("x", f, ["N", 3, "H", "W"])], [vi("y", f, None)],
        [const("w", RNG.standard_normal((4, 3, 3, 3)))])
    yield "shape_chain", model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Gather", ["s", "i0"], ["b"]),
         helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
         helper.make_node("Concat", ["b1", "tail"], ["t"], axis=0),
         helper.make_node("Reshape", ["x", "t"], ["r"]),
         helper.make_node("Slice", ["r", "st", "en", "axs", "sp"], ["y"])],
        [vi("x", f, ["B", "S", 6])], [vi("y", f, None)],
        [const("i0", 0, np.int64), const("ax", [0], np.int64), const("tail", [-1, 3], np.int64),
         const("st", [-1], np.int64), const("en", [np.iinfo(np.int64).min], np.int64),
         const("axs", [1], np.int64), const("sp", [-2], np.int64)])
    then_graph = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                                   [vi("t", f, ["N"])])
    else_graph = helper.make_graph([helper.make_node("Exp", ["x"], ["e"])], "else", [],
                                   [vi("e", f, ["N"])])
    yield "if", model([helper.make_node("If", ["c"], ["y"], then_branch=then_graph,
                                        else_branch=else_graph)],
                      [vi("x", f, ["N"]), vi("c", TensorProto.BOOL, [])], [vi("y", f, ["N"])])
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x"], ["next"]),
         helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Identity", ["next"], ["scan"])],
        "body", [vi("i", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []),
                 vi("acc", f, ["N"])],
        [vi("cond_out", TensorProto.BOOL, []), vi("next", f, ["N"]), vi("scan", f, ["N"])])
    yield "loop", model([helper.make_node("Loop", ["m", "c", "x"], ["y", "ys"], body=body)],
                        [vi("x", f, ["N"]), vi("m", TensorProto.INT64, []),
                         vi("c", TensorProto.BOOL, [])],
                        [vi("y", f, ["N"]), vi("ys", f, None)])
    # Sequence values: a sequence input and output, and the sequence ops (program seeds then
    # hold sequence registers for the program-load fuzzer to mutate).
    seq = helper.make_value_info("s", helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(f, ["R", 3])))
    out_seq = helper.make_value_info("joined", helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(f, None)))
    yield "sequences", model(
        [helper.make_node("SequenceInsert", ["s", "x", "p"], ["more"]),
         helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
         helper.make_node("SequenceAt", ["rows", "p"], ["row"]),
         helper.make_node("SequenceErase", ["more"], ["joined"]),
         helper.make_node("ConcatFromSequence", ["more"], ["y"], axis=0),
         helper.make_node("SequenceLength", ["rows"], ["n"])],
        [seq, vi("x", f, [2, 3]), vi("p", TensorProto.INT64, [])],
        [vi("y", f, None), vi("row", f, None), vi("n", TensorProto.INT64, []), out_seq])
    yield "casts", model(
        [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
         helper.make_node("Cast", ["h"], ["i"], to=TensorProto.INT32),
         helper.make_node("ReduceSum", ["i", "axes"], ["y"], keepdims=0)],
        [vi("x", f, ["N", 4])], [vi("y", TensorProto.INT32, None)],
        [const("axes", [1], np.int64)])
    try:
        import models
        yield "transformer", models.transformer_layer(hidden=16, heads=2, ffn=32)
    except Exception as error:  # noqa: BLE001 - the corpus is useful without it
        print(f"make_corpus: no transformer seed ({error})", file=sys.stderr)


def write_programs(out, models_by_name):
    """The models compiled by stax and saved, when the stax package can be imported."""
    try:
        import stax
    except ImportError as error:
        print(f"make_corpus: no program seeds (stax not importable: {error})", file=sys.stderr)
        return 0
    count = 0
    for name, m in models_by_name:
        try:
            k = stax.load(m.SerializeToString(), jit="off")
        except stax.Error:
            continue
        with open(os.path.join(out, name + ".stax"), "wb") as f:
            f.write(k.serialize())
        count += 1
    return count


def write_npy(out):
    dtypes = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
              np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
    count = 0
    for dtype in dtypes:
        for order in "CF":
            a = np.asarray(RNG.integers(0, 3, size=(2, 3)), dtype=dtype, order=order)
            buffer = io.BytesIO()
            np.save(buffer, a)
            with open(os.path.join(out, f"{np.dtype(dtype).name}_{order}.npy"), "wb") as f:
                f.write(buffer.getvalue())
            count += 1
    for name, a in (("scalar", np.float32(3.5)), ("empty", np.zeros((0, 4), np.float32))):
        buffer = io.BytesIO()
        np.save(buffer, a)
        with open(os.path.join(out, name + ".npy"), "wb") as f:
            f.write(buffer.getvalue())
        count += 1
    return count


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    dirs = {kind: os.path.join(root, kind) for kind in ("onnx", "program", "npy")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    all_models = list(seeds())
    for name, m in all_models:
        onnx.save(m, os.path.join(dirs["onnx"], name + ".onnx"))
    programs = write_programs(dirs["program"], all_models)
    npys = write_npy(dirs["npy"])
    print(f"make_corpus: {len(all_models)} models, {programs} programs, {npys} .npy files in {root}")


if __name__ == "__main__":
    main()
