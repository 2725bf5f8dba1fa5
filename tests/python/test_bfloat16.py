"""bfloat16 through numpy: ml_dtypes.bfloat16 arrays (numpy has no bfloat16 of its own, and
cannot export it through the buffer protocol or DLPack) go in as stax bfloat16 tensors, and
bfloat16 outputs come back as ml_dtypes arrays over the same memory. Checked against numpy
computing in float32 and rounding to bfloat16."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import stax

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (an onnx dependency) is needed")
BF16 = ml_dtypes.bfloat16


def _model(op_nodes, inputs, output):
    graph = helper.make_graph(
        op_nodes, "g",
        [helper.make_tensor_value_info(name, TensorProto.BFLOAT16, dims) for name, dims in inputs],
        [helper.make_tensor_value_info(output, TensorProto.BFLOAT16, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return stax.load(model.SerializeToString(), jit="off")


def test_bfloat16_in_and_out_of_a_model():
    k = _model([helper.make_node("Mul", ["a", "b"], ["m"]),
                helper.make_node("Relu", ["m"], ["y"])], [("a", ["N", 3]), ("b", [3])], "y")
    rng = np.random.default_rng(0)
    for n in (1, 4, 7):
        a = rng.standard_normal((n, 3)).astype(np.float32).astype(BF16)
        b = rng.standard_normal(3).astype(np.float32).astype(BF16)
        y = k(a=a, b=b)["y"]
        assert isinstance(y, np.ndarray) and y.dtype == BF16 and y.shape == (n, 3)
        want = np.maximum(a.astype(np.float32) * b.astype(np.float32), 0).astype(BF16)
        np.testing.assert_array_equal(y.astype(np.float32), want.astype(np.float32))


def test_bfloat16_strided_input_is_copied_right():
    k = _model([helper.make_node("Neg", ["x"], ["y"])], [("x", ["N", "M"])], "y")
    base = (np.arange(48, dtype=np.float32).reshape(6, 8) / 4 - 3).astype(BF16)
    x = base[::2, 1::3]  # not contiguous
    y = k(x=x)["y"]
    np.testing.assert_array_equal(y.astype(np.float32), -x.astype(np.float32))


def test_bfloat16_tensor_numpy_and_tensor_outputs():
    p = stax.placeholder([2], name="p")
    k = stax.compile(stax.cast(p, "bfloat16") * 3)
    out = k(np.array([1.5, -2.0], np.float32))
    assert isinstance(out, np.ndarray) and out.dtype == BF16
    np.testing.assert_array_equal(out.astype(np.float32), [4.5, -6.0])
    back = stax.compile(stax.cast(stax.placeholder([2], dtype="bfloat16", name="b"), "float32"))
    np.testing.assert_array_equal(back(out), [4.5, -6.0])
    model = _model([helper.make_node("Abs", ["x"], ["y"])], [("x", [2])], "y")
    tensor = model.run({"x": np.array([-1, 2], np.float32).astype(BF16)}, numpy=False)["y"]
    assert isinstance(tensor, stax.Tensor) and tensor.dtype == "bfloat16"
    np.testing.assert_array_equal(tensor.numpy().astype(np.float32), [1, 2])
