"""Shape-chain folding (shapefold), ConstantOfShape as a fill (fill) and Transpose into Gemm's
transA/transB (gemmtrans) on whole models (bench/models.py): the demo's transformer layer, the
benchmarks' BERT layer and a GPT-2 block written the way the TorchScript exporter writes it
(opset 14: every size a Shape -> Gather/Slice -> Unsqueeze -> Concat chain, the causal mask
sliced from a buffer, Range position ids, a ConstantOfShape mask). The shape-chain opcodes are
absent from their bytecode; outputs are bit for bit those with the three passes off, over
random shapes, interpreted and compiled by the JIT; and within float32 noise of ONNX Runtime."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from test_api_support import stax

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import models  # noqa: E402

OURS = ["shapefold", "fill", "gemmtrans"]
# Kernels that exporters run on small int64 shape tensors.
CHAIN_OPCODES = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Mul", "Add",
                 "Sub", "Div", "Cast", "ConstantOfShape"}
RNG = np.random.default_rng(12)


def opcodes(model):
    """(opcode, output dtypes) for every instruction of the extended form."""
    text = model.disassemble("extended")
    registers = dict(re.findall(r"^\s+(r\d+)\s+\S+\s+(\w+)\[", text, re.M))
    result = []
    for line in text.splitlines():
        m = re.match(r"^\s+\d+\s+([A-Z]\w*)\s+(.*)$", line)
        if not m:
            continue
        op = m.group(1).removesuffix("_STATIC")
        outputs = re.search(r"\), \(([^)]*)\)", m.group(2))
        dtypes = [registers.get(r.strip()) for r in outputs.group(1).split(",")] if outputs else []
        result.append((op, dtypes))
    return result


def shape_kernels(model):
    """Compute instructions of a chain op writing an integer tensor."""
    return [op for op, dtypes in opcodes(model)
            if op in CHAIN_OPCODES and any(d in ("int64", "int32") for d in dtypes)]


def small_gpt2():
    return models.gpt2_block(hidden=64, heads=4, positions=64, seed=3)


LAYERS = {
    "transformer": (lambda: models.transformer_layer(), 64),
    "bert": (lambda: models.bert_layer(), 768),
    "gpt2": (small_gpt2, 64),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_shape_chains_absent_from_bytecode(name):
    build, _ = LAYERS[name]
    data = build().SerializeToString()
    folded = stax.load(data, jit="off")
    kept = stax.load(data, jit="off", disable_passes=OURS + ["dce"])
    assert shape_kernels(folded) == []
    if name == "gpt2":
        # Without the passes (and the sweep) the exporter's chains run on every call.
        assert len(shape_kernels(kept)) >= 20
        ops = [op for op, _ in opcodes(folded)]
        assert "DIM_VALUES" in ops and "BROADCAST_TO" in ops
        assert "ConstantOfShape" not in ops
        details = " ".join(run["detail"] for run in folded.passes["runs"])
        assert "shape values with equal contents merged" in details
        assert "1 ConstantOfShape turned into a broadcast fill" in details


# "sync": both programs run compiled from the first call on. (With background compiles one
# program may run a segment interpreted while the other runs it compiled, and compiled
# kernels round differently from the interpreter.)
@pytest.mark.parametrize("jit", ["off", "sync"])
def test_gpt2_block_bit_for_bit_and_ort(jit):
    data = small_gpt2().SerializeToString()
    folded = stax.load(data, jit=jit)
    plain = stax.load(data, jit=jit, disable_passes=OURS)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    shapes = [(1, 1), (2, 7), (1, 64)] + [(int(RNG.integers(1, 5)), int(RNG.integers(1, 65)))
                                          for _ in range(4)]
    for b, s in shapes:
        x = RNG.standard_normal((b, s, 64)).astype(np.float32)
        for _ in range(2):  # the second call reuses the arena and pooled buffers
            got = folded(x=x)["y"]
            np.testing.assert_array_equal(got, plain(x=x)["y"])
        np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["transformer", "bert"])
def test_encoder_layers_bit_for_bit(name):
    build, hidden = LAYERS[name]
    data = build().SerializeToString()
    folded = stax.load(data, jit="off")
    plain = stax.load(data, jit="off", disable_passes=OURS)
    for _ in range(3):
        b, s = int(RNG.integers(1, 4)), int(RNG.integers(1, 24))
        x = RNG.standard_normal((b, s, hidden)).astype(np.float32)
        np.testing.assert_array_equal(folded(x=x)["y"], plain(x=x)["y"])


def gemm_model():
    """y = Gemm(Transpose(a), Transpose(b), c, transB=1) with a[K, M], b[K, N] inputs."""
    nodes = [
        helper.make_node("Transpose", ["a"], ["at"]),
        helper.make_node("Transpose", ["b"], ["bt"], perm=[1, 0]),
        helper.make_node("Gemm", ["at", "bt", "c"], ["y"], transB=1, alpha=0.75, beta=1.5),
    ]
    c = numpy_helper.from_array(RNG.standard_normal(5).astype(np.float32), "c")
    graph = helper.make_graph(
        nodes, "gemm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [6, "M"]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [6, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 5])], [c])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("jit", ["off", "sync"])
def test_gemm_reads_transposed_operands(jit):
    data = gemm_model().SerializeToString()
    folded = stax.load(data, jit=jit)
    plain = stax.load(data, jit=jit, disable_passes=["gemmtrans"])
    assert "TRANSPOSE_VIEW" not in [op for op, _ in opcodes(folded)]
    assert "TRANSPOSE_VIEW" in [op for op, _ in opcodes(plain)]
    for m in (1, 3, 17):
        a = RNG.standard_normal((6, m)).astype(np.float32)
        b = RNG.standard_normal((6, 5)).astype(np.float32)
        got = folded(a=a, b=b)["y"]
        np.testing.assert_array_equal(got, plain(a=a, b=b)["y"])
        want = 0.75 * (a.T.astype(np.float64) @ b) + 1.5 * folded_c(data)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def folded_c(data):
    model = onnx.load_from_string(data)
    return numpy_helper.to_array(model.graph.initializer[0]).astype(np.float64)


def test_cli_reports_the_gpt2_block(stax_bin, tmp_path):
    path = tmp_path / "gpt2.onnx"
    onnx.save(small_gpt2(), str(path))
    r = subprocess.run([stax_bin, "info", "--passes", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "shapefold" in r.stdout and "fill" in r.stdout
    dis = subprocess.run([stax_bin, "dis", "--extended", str(path)], capture_output=True, text=True)
    assert dis.returncode == 0, dis.stderr
    assert re.search(r"DIM_VALUES\s+r\d+, \[S\]", dis.stdout)
    off = subprocess.run([stax_bin, "dis", "--extended", "--disable-pass", "shapefold,fill",
                          str(path)], capture_output=True, text=True)
    assert "DIM_VALUES" not in off.stdout and re.search(r"\bConstantOfShape\s+node", off.stdout)


def test_saved_program_keeps_dim_values(tmp_path):
    data = small_gpt2().SerializeToString()
    folded = stax.load(data, jit="off")
    path = tmp_path / "gpt2.stax"
    folded.save(str(path))
    loaded = stax.load_program(str(path), jit="off")
    assert "DIM_VALUES" in [op for op, _ in opcodes(loaded)]
    for b, s in [(1, 5), (3, 20)]:
        x = RNG.standard_normal((b, s, 64)).astype(np.float32)
        got = loaded(x)  # a loaded program is a Kernel: positional inputs, a plain result
        np.testing.assert_array_equal(got[0] if isinstance(got, tuple) else got, folded(x=x)["y"])


def loop_model():
    """A Loop whose carried x grows by one row per iteration; the body scans out
    Shape(x)[0:1] (a DIM_VALUES value computed from the iteration's symbols) and carries
    Concat(x, x[0:1]). Each iteration's scan entry must keep its own value."""
    body = helper.make_graph(
        [helper.make_node("Shape", ["x_in"], ["shape"]),
         helper.make_node("Slice", ["shape", "zero", "one"], ["rows"]),
         helper.make_node("Slice", ["x_in", "zero", "one"], ["head"]),
         helper.make_node("Concat", ["x_in", "head"], ["x_out"], axis=0),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("rows", TensorProto.INT64, [1])],
        [numpy_helper.from_array(np.array([0], np.int64), "zero"),
         numpy_helper.from_array(np.array([1], np.int64), "one")])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "cond", "x"], ["x_final", "rows_scan"], body=body)],
        "loop",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("x_final", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("rows_scan", TensorProto.INT64, None)],
        [numpy_helper.from_array(np.array(4, np.int64), "trips"),
         numpy_helper.from_array(np.array(True), "cond")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_dim_values_in_a_loop_keep_each_iteration():
    data = loop_model().SerializeToString()
    folded = stax.load(data, jit="off")
    plain = stax.load(data, jit="off", disable_passes=OURS)
    assert "DIM_VALUES" in [op for op, _ in opcodes(folded)]
    for n in (1, 2, 5):
        x = RNG.standard_normal((n, 3)).astype(np.float32)
        for _ in range(2):
            got = folded(x=x)
            np.testing.assert_array_equal(got["rows_scan"].ravel(), np.arange(n, n + 4))
            np.testing.assert_array_equal(got["x_final"], plain(x=x)["x_final"])
            np.testing.assert_array_equal(got["rows_scan"], plain(x=x)["rows_scan"])
