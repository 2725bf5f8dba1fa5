"""stax.load: ONNX models built here with the `onnx` package (skipped when it is not installed),
run by name and by position, with symbolic dims, bound symbols, several outputs and errors."""
import numpy as np
import pytest

from test_api_support import stax

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(1)


def make_model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.fixture
def mlp(tmp_path):
    w = RNG.standard_normal((4, 3)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
         helper.make_node("Relu", ["hb"], ["y"], name="relu"),
         helper.make_node("Shape", ["x"], ["shape"], name="shape")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    return path, model, w, b


def test_load_run_by_name_and_position(mlp):
    path, _, w, b = mlp
    m = stax.load(str(path))
    assert isinstance(m, stax.Model) and isinstance(m, stax.Kernel)
    assert m.inputs == [stax.TensorInfo("x", "float32", ("N", 4))]
    assert [o.name for o in m.outputs] == ["y", "shape"]
    assert m.outputs[0].shape == ("N", 3) and m.outputs[1].dtype == "int64"
    for n in (1, 2, 7):
        x = RNG.standard_normal((n, 4)).astype(np.float32)
        by_name = m(x=x)
        assert set(by_name) == {"y", "shape"}
        np.testing.assert_allclose(by_name["y"], np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(by_name["shape"], [n, 4])
        np.testing.assert_array_equal(m(x)["y"], by_name["y"])
        np.testing.assert_array_equal(stax.run(m, {"x": x})["y"], by_name["y"])
    assert m.stats["runs"] == 9
    assert "MatMul" in m.bytecode and "MatMul(x, w)" in m.graph
    tensors = m.run([x], numpy=False)  # a dict, like every Model call, of stax.Tensor
    assert list(tensors) == ["y", "shape"]
    assert all(isinstance(t, stax.Tensor) for t in tensors.values())
    np.testing.assert_array_equal(np.asarray(tensors["y"]), by_name["y"])


def test_load_from_bytes_and_path_objects(mlp):
    path, model, w, b = mlp
    from_bytes = stax.load(model.SerializeToString())
    from_path = stax.load(path)  # os.PathLike
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(from_bytes(x)["y"], from_path(x)["y"])


def test_symbol_bindings(mlp):
    path, _, _, _ = mlp
    m = stax.load(str(path), symbols={"N": 2})
    assert m.inputs[0].shape == (2, 4)
    m(np.ones((2, 4), np.float32))
    with pytest.raises(stax.ShapeError):
        m(np.ones((3, 4), np.float32))
    zero = stax.load(str(path), dims_may_be_zero=True)
    assert zero(np.ones((0, 4), np.float32))["y"].shape == (0, 3)


def test_input_errors_name_the_input(mlp):
    path, _, _, _ = mlp
    m = stax.load(str(path))
    with pytest.raises(stax.DtypeError, match="input 'x'"):
        m(np.ones((2, 4), np.float64))
    with pytest.raises(stax.ShapeError, match="input 'x'"):
        m(np.ones(4, np.float32))
    with pytest.raises(stax.InvalidArgumentError, match="unknown input 'z'"):
        m(z=np.ones((2, 4), np.float32))


def test_constant_outputs_are_read_only(tmp_path):
    table = np.arange(3, dtype=np.float32)
    model = make_model(
        [helper.make_node("Identity", ["t"], ["out"]), helper.make_node("Neg", ["x"], ["nx"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("nx", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(table, "t")])
    m = stax.load(model.SerializeToString())
    result = m(np.ones(3, np.float32))
    np.testing.assert_array_equal(result["out"], table)
    assert not result["out"].flags.writeable and result["nx"].flags.writeable


def test_unsupported_op_is_reported(tmp_path):
    model = make_model(
        [helper.make_node("Det", ["x"], ["y"], name="determinant")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    with pytest.raises(stax.UnimplementedError, match="Det"):
        stax.load(model.SerializeToString())


def test_conv_model():
    w = RNG.standard_normal((2, 1, 3, 3)).astype(np.float32)
    model = make_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
         helper.make_node("GlobalAveragePool", ["y"], ["g"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, "H", "W"])],
        [helper.make_tensor_value_info("g", TensorProto.FLOAT, ["N", 2, 1, 1])],
        [numpy_helper.from_array(w, "w")])
    m = stax.load(model.SerializeToString())
    assert m.inputs[0].shape == ("N", 1, "H", "W")
    for n, h, wd in ((1, 3, 3), (2, 5, 4)):
        x = RNG.standard_normal((n, 1, h, wd)).astype(np.float32)
        padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
        conv = np.zeros((n, 2, h, wd), np.float32)
        for i in range(h):
            for j in range(wd):
                conv[:, :, i, j] = np.einsum("nchw,ochw->no", padded[:, :, i:i + 3, j:j + 3], w)
        np.testing.assert_allclose(m(x)["g"], conv.mean((2, 3), keepdims=True), rtol=1e-4,
                                   atol=1e-5)


def test_isa_cap_runs_every_level_to_the_same_values(tmp_path):
    """The generic kernels' per-ISA loops (Softmax, LayerNormalization, Gelu, Erf, MatMul)
    give the same values, to float32 rounding, at every level the CPU has."""
    import math
    w = RNG.standard_normal((64, 64)).astype(np.float32)
    g = RNG.standard_normal(64).astype(np.float32)
    beta = RNG.standard_normal(64).astype(np.float32)
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("LayerNormalization", ["h", "g", "beta"], ["n"], axis=-1),
         helper.make_node("Gelu", ["n"], ["a"]),
         helper.make_node("Erf", ["a"], ["e"]),
         helper.make_node("Softmax", ["e"], ["y"], axis=-1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(g, "g"),
         numpy_helper.from_array(beta, "beta")], opset=20)
    path = tmp_path / "isa.onnx"
    onnx.save(model, str(path))
    x = RNG.standard_normal((37, 64)).astype(np.float32)
    h = x.astype(np.float64) @ w
    n = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) * g + beta
    erf = np.vectorize(math.erf)
    a = 0.5 * n * (1 + erf(n / math.sqrt(2)))
    e = erf(a)
    want = np.exp(e - e.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    in_use, cpu = stax.isa()
    assert in_use in ("avx512", "avx2", "sse2", "baseline")
    levels = [level for level in ("sse2", "avx2", "avx512")
              if ["sse2", "avx2", "avx512"].index(level) <=
              ["sse2", "avx2", "avx512"].index(cpu if cpu != "baseline" else "sse2")]
    kernel = stax.load(str(path), jit="off")
    try:
        for level in levels:
            stax.set_isa_cap(level)
            assert stax.isa() == (level, cpu)
            got = kernel(x=x)["y"]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        with pytest.raises(ValueError, match="'avx3' is not one of"):
            stax.set_isa_cap("avx3")
    finally:
        stax.set_isa_cap(None)
    assert stax.isa() == (cpu, cpu)
