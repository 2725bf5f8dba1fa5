"""Graph passes through the Python API and the command line, on ONNX models written the way
exporters write them: the erf GELU and the pre-opset-17 LayerNorm chain (fused, within float32
rounding of the unfused model and of ONNX Runtime), BatchNormalization folded into the Conv
before it and a lone one split into Mul + Add (the same, within rounding), a shape built from Mod of constants (folded
so the model loads with a static rank), a Shape/Gather/Unsqueeze/Concat/Reshape chain (its
instructions removed), the report (Kernel.passes, stax info --passes), and the switches."""
import subprocess

import numpy as np
import pytest

from test_api_support import stax

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(7)


def make_model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "passes", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def ffn_block():
    """LayerNorm chain -> MatMul -> erf GELU chain, x[B, S, 16] -> y."""
    gamma = RNG.standard_normal(16).astype(np.float32)
    beta = RNG.standard_normal(16).astype(np.float32)
    w = (RNG.standard_normal((16, 24)) * 0.3).astype(np.float32)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["d2"]),
        helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], ["ng"]),
        helper.make_node("Add", ["ng", "beta"], ["ln"]),
        helper.make_node("MatMul", ["ln", "w"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["hs"]),
        helper.make_node("Erf", ["hs"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["h", "e1"], ["he"]),
        helper.make_node("Mul", ["he", "half"], ["y"]),
    ]
    inits = [const("two", 2.0), const("eps", 1e-5), const("gamma", gamma), const("beta", beta),
             const("w", w), const("sqrt2", np.sqrt(2.0)), const("one", 1.0), const("half", 0.5)]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", 24])], inits)


def test_fusions_match_unfused_and_ort():
    model = ffn_block()
    data = model.SerializeToString()
    fused = stax.load(data, jit="off")
    plain = stax.load(data, jit="off", disable_passes="all")
    report = fused.passes
    details = " ".join(run["detail"] for run in report["runs"])
    assert "1 GELU fused into Gelu" in details
    assert "1 LayerNorm chain fused into LayerNormalization" in details
    assert report["nodes_before"] == 15 and report["nodes_after"] == 3
    assert plain.passes["runs"] == []
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for b, s in [(1, 1), (2, 5), (3, 17)]:
        x = RNG.standard_normal((b, s, 16)).astype(np.float32)
        got, want = fused(x=x)["y"], plain(x=x)["y"]
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)


def conv_bn_block():
    """Conv -> BatchNormalization -> Relu -> BatchNormalization -> MaxPool, x[N, 3, H, W]."""
    c = 8
    w = (RNG.standard_normal((c, 3, 3, 3)) * 0.3).astype(np.float32)
    inits = [const("w", w), const("cb", RNG.standard_normal(c))]
    for p in ("a", "b"):
        inits += [const(p + "s", 0.5 + RNG.random(c)), const(p + "b", RNG.standard_normal(c)),
                  const(p + "m", RNG.standard_normal(c)), const(p + "v", 0.5 + RNG.random(c))]
    nodes = [
        helper.make_node("Conv", ["x", "w", "cb"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["conv", "as", "ab", "am", "av"], ["bn1"]),
        helper.make_node("Relu", ["bn1"], ["r"]),
        helper.make_node("BatchNormalization", ["r", "bs", "bb", "bm", "bv"], ["bn2"],
                         epsilon=1e-3),
        helper.make_node("MaxPool", ["bn2"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return make_model(nodes, [x], [y], inits)


def test_batch_norm_folds_match_unfolded_and_ort():
    data = conv_bn_block().SerializeToString()
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    for jit in ("off", "sync"):
        folded = stax.load(data, jit=jit)
        plain = stax.load(data, jit=jit, disable_passes=["bnfold"])
        details = " ".join(run["detail"] for run in folded.passes["runs"])
        assert "1 BatchNormalization folded into Conv" in details
        assert "1 BatchNormalization into Mul + Add" in details
        assert "BatchNormalization" not in " ".join(r["detail"] for r in plain.passes["runs"])
        for n, h, w in [(1, 4, 4), (2, 9, 13), (1, 32, 17)]:
            x = RNG.standard_normal((n, 3, h, w)).astype(np.float32)
            for _ in range(2):  # the second call of a shape runs compiled kernels under sync
                got, want = folded(x=x)["y"], plain(x=x)["y"]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_mod_of_constants_gives_a_static_shape():
    # Reshape(x, Concat(Slice(Shape(x), 0, Reshape(Mod(2, 3), [1])), [-1])): without folding
    # the Concat's length is unknown and the Reshape's rank cannot be inferred.
    nodes = [
        helper.make_node("Mod", ["two", "three"], ["m"]),
        helper.make_node("Reshape", ["m", "one_d"], ["end"]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "zero_d", "end"], ["head"]),
        helper.make_node("Concat", ["head", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    inits = [const("two", 2, np.int64), const("three", 3, np.int64),
             const("one_d", [1], np.int64), const("zero_d", [0], np.int64),
             const("minus_one", [-1], np.int64)]
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 4, 5])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = stax.load(model.SerializeToString(), jit="off")
    assert len(m.outputs[0].shape) == 3  # [B, S, 20]
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(m(x=x)["y"], np.maximum(x.reshape(2, 3, 20), 0))


def shape_chain_model():
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "i0"], ["b"]),
        helper.make_node("Gather", ["shape", "i1"], ["s"]),
        helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "axes"], ["s1"]),
        helper.make_node("Concat", ["b1", "s1", "heads"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["split"]),
        helper.make_node("Transpose", ["split"], ["y"], perm=[0, 2, 1, 3]),
    ]
    inits = [const("i0", 0, np.int64), const("i1", 1, np.int64), const("axes", [0], np.int64),
             const("heads", [4, 8], np.int64)]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 32])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)


def test_shape_chain_instructions_are_removed():
    data = shape_chain_model().SerializeToString()
    m = stax.load(data, jit="off")
    kept = stax.load(data, jit="off", disable_passes=["dce"])
    assert m.passes["instructions_removed"] >= 8
    assert kept.passes["instructions_removed"] == 0
    assert "Gather" not in m.bytecode and "Gather" in kept.bytecode
    for b, s in [(1, 1), (2, 9), (5, 3)]:
        x = RNG.standard_normal((b, s, 32)).astype(np.float32)
        want = x.reshape(b, s, 4, 8).transpose(0, 2, 1, 3)
        np.testing.assert_array_equal(m(x=x)["y"], want)
        np.testing.assert_array_equal(kept(x=x)["y"], want)


def test_pass_switches_and_errors():
    assert list(stax.PASSES) == ["fold", "noop", "simplify", "fuse", "bnfold", "widen", "shapefold", "fill",
                                 "gemmtrans", "cse", "dce"]
    data = ffn_block().SerializeToString()
    unfused = stax.load(data, jit="off", disable_passes=["fuse"])
    assert all("fused" not in run["detail"] for run in unfused.passes["runs"])
    with pytest.raises(stax.InvalidArgumentError, match="unknown graph pass 'fusion'.*fold, noop"):
        stax.load(data, jit="off", disable_passes=["fusion"])
    with pytest.raises(TypeError, match="pass names"):
        stax.load(data, jit="off", disable_passes=[3])
    x = stax.placeholder([stax.symbol("N"), 4], name="x")
    k = stax.compile(stax.relu(-(-x)), jit="off")
    assert "Neg of Neg removed" in " ".join(run["detail"] for run in k.passes["runs"])
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(k(a), np.maximum(a, 0))


def test_saved_program_has_no_report(tmp_path):
    x = stax.placeholder([stax.symbol("N"), 4], name="x")
    k = stax.compile(stax.relu(x), jit="off")
    path = tmp_path / "k.stax"
    k.save(str(path))
    assert stax.load_program(str(path), jit="off").passes is None


def test_cli_info_passes(stax_bin, tmp_path):
    path = tmp_path / "ffn.onnx"
    onnx.save(ffn_block(), str(path))
    r = subprocess.run([stax_bin, "info", "--passes", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "graph passes (15 nodes before, 3 after" in r.stdout
    assert "1 GELU fused into Gelu" in r.stdout
    assert "Gelu" in r.stdout.split("graph passes")[0]  # the histogram after the passes
    r = subprocess.run([stax_bin, "info", "--passes", "--disable-pass", "all", str(path)],
                       capture_output=True, text=True)
    assert "nothing to rewrite" in r.stdout
    r = subprocess.run([stax_bin, "dis", "--disable-pass", "bogus", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "unknown graph pass 'bogus'" in r.stderr
    for verb in ("run", "dis", "info", "compile"):
        help_text = subprocess.run([stax_bin, verb, "--help"], capture_output=True, text=True).stdout
        assert "--disable-pass" in help_text
