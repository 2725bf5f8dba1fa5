"""float16 and bfloat16 models run compiled: the `widen` pass computes their MatMul, Gemm, Conv
and MaxPool in float32 between Casts (as the kernels do), so the JIT compiles those groups with
their 16-bit epilogues. Each model runs with the JIT over several shapes, every call fully
compiled, against the interpreter on the model with `widen` off: within a few 16-bit units of
1 + |y| (the JIT's float32 sums differ from the interpreter's in their last bits, which moves
some 16-bit roundings by one unit, and such a unit moves what follows)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stax

RNG = np.random.default_rng(11)


def _const(name, array, dtype):
    return numpy_helper.from_array(array.astype(np.float32).astype(dtype), name)


def ffn_block(dtype, onnx_type, hidden=64, inner=96):
    """x -> MatMul + bias -> GELU (the erf chain) -> MatMul + bias -> + x -> LayerNorm."""
    inits = [_const("w1", RNG.standard_normal((hidden, inner)) / np.sqrt(hidden), dtype),
             _const("b1", RNG.standard_normal(inner) * 0.1, dtype),
             _const("w2", RNG.standard_normal((inner, hidden)) / np.sqrt(inner), dtype),
             _const("b2", RNG.standard_normal(hidden) * 0.1, dtype),
             _const("sqrt2", np.array(np.sqrt(2.0)), dtype), _const("one", np.array(1.0), dtype),
             _const("half", np.array(0.5), dtype),
             _const("gamma", 1 + RNG.standard_normal(hidden) * 0.1, dtype),
             _const("beta", RNG.standard_normal(hidden) * 0.1, dtype)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Div", ["a1", "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Mul", ["a1", "e1"], ["g0"]),
             helper.make_node("Mul", ["g0", "half"], ["g"]),
             helper.make_node("MatMul", ["g", "w2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["a2"]),
             helper.make_node("Add", ["a2", "x"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["y"], axis=-1)]
    graph = helper.make_graph(
        nodes, "ffn", [helper.make_tensor_value_info("x", onnx_type, ["B", "S", hidden])],
        [helper.make_tensor_value_info("y", onnx_type, ["B", "S", hidden])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def conv_block(dtype, onnx_type, channels=8):
    """x -> Conv 3x3 -> BatchNormalization -> Relu -> MaxPool 2x2 -> Conv 3x3 + bias -> + itself
    through a 1x1 Conv -> Relu."""
    c = channels
    inits = [_const("w1", RNG.standard_normal((c, 3, 3, 3)) * 0.3, dtype),
             _const("scale", 1 + RNG.standard_normal(c) * 0.1, dtype),
             _const("shift", RNG.standard_normal(c) * 0.1, dtype),
             _const("mean", RNG.standard_normal(c) * 0.1, dtype),
             _const("var", 0.5 + RNG.random(c), dtype),
             _const("w2", RNG.standard_normal((c, c, 3, 3)) * 0.2, dtype),
             _const("b2", RNG.standard_normal(c) * 0.1, dtype),
             _const("w3", RNG.standard_normal((c, c, 1, 1)) * 0.3, dtype)]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "scale", "shift", "mean", "var"], ["n1"]),
             helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p", "w3"], ["c3"]),
             helper.make_node("Add", ["c2", "c3"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", onnx_type, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", onnx_type, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def check_compiled_against_reference(data, dtype, shapes, units):
    reference = stax.load(data, jit="off", disable_passes=["widen"])
    compiled = stax.load(data, jit="sync")
    unit = 2.0 ** -10 if dtype == np.float16 else 2.0 ** -7
    for shape in shapes:
        x = RNG.standard_normal(shape).astype(np.float32).astype(dtype)
        want = np.asarray(reference(x=x)["y"]).astype(np.float32)
        got = compiled(x=x)["y"]
        assert got.dtype == dtype and got.shape == want.shape
        err = np.abs(np.asarray(got).astype(np.float32) - want) / (1 + np.abs(want))
        assert err.max() <= units * unit, (shape, float(err.max()))
    calls = compiled.stats["calls"]
    assert calls == {"compiled": len(shapes), "partial": 0, "interpreted": 0}, calls
    assert compiled.stats["exact_versions"] == 0
    details = " ".join(run["detail"] for run in compiled.passes["runs"])
    assert "16-bit products computed in float32" in details


FFN_SHAPES = [(1, 1, 64), (2, 7, 64), (1, 33, 64), (3, 5, 64), (2, 64, 64)]
CNN_SHAPES = [(1, 3, 8, 8), (2, 3, 13, 10), (1, 3, 20, 31), (3, 3, 6, 9)]


def test_float16_ffn_compiles_and_agrees():
    check_compiled_against_reference(ffn_block(np.float16, TensorProto.FLOAT16), np.float16,
                                     FFN_SHAPES, 2)


def test_float16_cnn_compiles_and_agrees():
    data = conv_block(np.float16, TensorProto.FLOAT16)
    # The folded BatchNormalization moves the terms by a 16-bit rounding (3.3 units measured).
    check_compiled_against_reference(data, np.float16, CNN_SHAPES, 6)
    details = " ".join(run["detail"] for run in stax.load(data, jit="off").passes["runs"])
    assert "16-bit Conv + BatchNormalization computed in float32" in details
    assert "BatchNormalization folded into Conv" in details


def test_bfloat16_ffn_compiles_and_agrees():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (an onnx dependency) is needed")
    check_compiled_against_reference(ffn_block(ml_dtypes.bfloat16, TensorProto.BFLOAT16),
                                     ml_dtypes.bfloat16, FFN_SHAPES, 2)


def test_widen_off_keeps_16_bit_products_interpreted():
    data = ffn_block(np.float16, TensorProto.FLOAT16)
    k = stax.load(data, jit="sync", disable_passes=["widen"])
    for shape in FFN_SHAPES[:2]:
        k(x=RNG.standard_normal(shape).astype(np.float16))
    # The two product groups have no kernel (counted, and warned about once); the LayerNorm
    # group compiles.
    assert k.stats["dtype_fallbacks"] == 2


def avg_pool_model():
    """A float16 AveragePool (no 16-bit kernel: widen leaves it, its average rounds from
    double) beside a compiled float16 Relu."""
    graph = helper.make_graph(
        [helper.make_node("AveragePool", ["x"], ["p"], kernel_shape=[2, 2]),
         helper.make_node("Relu", ["p"], ["y"])], "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["N", 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_dtype_fallback_is_counted_and_right():
    data = avg_pool_model().SerializeToString()
    k = stax.load(data, jit="sync")
    ref = stax.load(data, jit="off")
    for n in (1, 3):
        x = RNG.standard_normal((n, 2, 6, 6)).astype(np.float16)
        np.testing.assert_array_equal(np.asarray(k(x=x)["y"]), np.asarray(ref(x=x)["y"]))
    assert k.stats["dtype_fallbacks"] == 1
    assert [s["dtype_fallbacks"] for s in k.stats["jit_segments"]] == [1]
    assert ref.stats["dtype_fallbacks"] == 0


def test_dtype_fallback_warns_once_on_stderr(stax_bin, tmp_path):
    import json
    import subprocess
    import onnx
    path = tmp_path / "pool16.onnx"
    onnx.save(avg_pool_model(), path)
    r = subprocess.run([stax_bin, "run", str(path), "--shape", "x=2x2x6x6", "--jit", "sync",
                        "--repeat", "4", "--stats-json", "-"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    warning = "stax: warning: the JIT has no AveragePool kernel for float16"
    assert r.stderr.count(warning) == 1, r.stderr
    stats = json.loads(r.stdout)
    assert stats["total"]["dtype_fallbacks"] == 1
    assert stats["segments"][0]["dtype_fallbacks"] == 1
