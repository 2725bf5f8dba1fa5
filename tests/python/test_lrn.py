"""LRN (local response normalization, AlexNet / Inception v1 / ZFNet) through ONNX import and
the Python builder: against ONNX Runtime on float32 NCHW (odd sizes: ONNX Runtime refuses even
ones), against a numpy transcription of the ONNX formula elsewhere (even sizes, float64,
float16, ranks 3 and 5, strided inputs), and the errors for bad attributes and ranks."""
import numpy as np
import pytest

from test_api_support import stax

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

RNG = np.random.default_rng(13)


def lrn_reference(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """The ONNX definition: channels c - floor((size-1)/2) .. c + ceil((size-1)/2), clipped.
    alpha, beta and bias are float32 attributes, so they are rounded to float32 first."""
    alpha, beta, bias = (float(np.float32(a)) for a in (alpha, beta, bias))
    v = x.astype(np.float64)
    channels = v.shape[1]
    square_sum = np.zeros_like(v)
    for c in range(channels):
        first = max(0, c - (size - 1) // 2)
        last = min(channels - 1, c + int(np.ceil((size - 1) / 2)))
        square_sum[:, c] = np.sum(v[:, first:last + 1] ** 2, axis=1)
    return v / (bias + alpha / size * square_sum) ** beta


def lrn_model(shape, dtype=TensorProto.FLOAT, **attrs):
    node = helper.make_node("LRN", ["x"], ["y"], name="lrn", **attrs)
    graph = helper.make_graph([node], "lrn", [helper.make_tensor_value_info("x", dtype, shape)],
                              [helper.make_tensor_value_info("y", dtype, None)])
    return helper.make_model(graph)


ORT_CASES = [
    # (N, C, H, W), size, alpha, beta, bias
    ((2, 3, 4, 5), 5, 1e-4, 0.75, 1.0),   # C < size
    ((1, 1, 3, 3), 3, 0.5, 0.6, 2.0),     # C = 1
    ((1, 1, 3, 3), 1, 0.5, 0.6, 2.0),
    ((2, 8, 6, 6), 3, 2.0, 0.75, 1.0),
    ((1, 16, 5, 7), 5, 1e-2, 0.5, 0.5),   # size < C, windows clipped at both ends
    ((3, 7, 1, 1), 9, 1.0, 1.0, 1.0),
    ((1, 96, 13, 13), 5, 1e-4, 0.75, 1.0),  # AlexNet's first LRN, smaller image
    ((0, 3, 2, 2), 3, 1e-4, 0.75, 1.0),   # empty batch
]


@pytest.mark.parametrize("shape,size,alpha,beta,bias", ORT_CASES)
def test_lrn_against_onnxruntime(shape, size, alpha, beta, bias):
    model = lrn_model(["N", shape[1], "H", "W"], size=size, alpha=alpha, beta=beta, bias=bias)
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    got = stax.load(model.SerializeToString(), dims_may_be_zero=True)(x=x)["y"]
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got.shape == want.shape == shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, lrn_reference(x, size, alpha, beta, bias), rtol=1e-5,
                               atol=1e-6)


def test_lrn_defaults_match_onnxruntime():
    model = lrn_model([2, 4, 3, 3], size=3)
    x = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32) * 40
    got = stax.load(model.SerializeToString())(x=x)["y"]
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [2, 4, 6, 8])
@pytest.mark.parametrize("channels", [1, 3, 5, 10])
def test_lrn_even_sizes(size, channels):
    """Even windows reach one channel further after c than before it."""
    x = RNG.standard_normal((2, channels, 3, 4)).astype(np.float32)
    model = lrn_model([2, channels, 3, 4], size=size, alpha=0.8, beta=0.7, bias=1.5)
    got = stax.load(model.SerializeToString())(x=x)["y"]
    np.testing.assert_allclose(got, lrn_reference(x, size, 0.8, 0.7, 1.5), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 5, 7), (1, 4, 2, 3, 3), (2, 3, 1, 1, 1, 2)])
@pytest.mark.parametrize("dtype,np_dtype,rtol", [(TensorProto.FLOAT, np.float32, 1e-5),
                                                 (TensorProto.DOUBLE, np.float64, 1e-12),
                                                 (TensorProto.FLOAT16, np.float16, 2e-3)])
def test_lrn_ranks_and_dtypes(shape, dtype, np_dtype, rtol):
    x = RNG.standard_normal(shape).astype(np_dtype)
    model = lrn_model(list(shape), dtype, size=3, alpha=0.9, beta=0.75, bias=1.0)
    got = stax.load(model.SerializeToString())(x=x)["y"]
    assert got.dtype == np_dtype
    np.testing.assert_allclose(got.astype(np.float64), lrn_reference(x, 3, 0.9, 0.75, 1.0),
                               rtol=rtol, atol=rtol)


def test_lrn_python_builder_on_strided_input():
    """The builder function, fed a transposed (non-contiguous) view."""
    N, H = stax.symbol("N"), stax.symbol("H")
    x = stax.placeholder([N, 6, H, 5], name="x")
    kernel = stax.compile(stax.local_response_norm(x, size=3, alpha=0.3, beta=0.9, bias=2.0))
    base = RNG.standard_normal((2, 5, 4, 6)).astype(np.float32)
    view = base.transpose(0, 3, 2, 1)  # (2, 6, 4, 5), channels strided
    np.testing.assert_allclose(kernel(view), lrn_reference(view, 3, 0.3, 0.9, 2.0), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("shape,attrs,error,message", [
    ([2, 3, 4, 4], {}, stax.Error,
     "LRN node 'lrn': attribute 'size' (how many channels of input 0 'x' dim 1 to sum over) "
     "is required"),
    ([2, 3, 4, 4], {"size": 0}, stax.Error,
     "LRN node 'lrn': attribute 'size' is 0; it counts channels of input 0 'x' dim 1"),
    ([2, 3, 4, 4], {"size": -3}, stax.Error, "attribute 'size' is -3"),
    ([2, 3], {"size": 3}, stax.ShapeError,
     "LRN node 'lrn': input 0 'x' has rank 2; LRN needs (N, C, D1, ...), rank >= 3"),
    ([6], {"size": 3}, stax.ShapeError, "input 0 'x' has rank 1"),
])
def test_lrn_errors_name_node_tensor_and_dim(shape, attrs, error, message):
    model = lrn_model(shape, **attrs)
    with pytest.raises(error) as info:
        stax.load(model.SerializeToString())
    assert message in str(info.value)


def test_lrn_integer_input_refused():
    model = lrn_model([1, 3, 2, 2], TensorProto.INT32, size=3)
    with pytest.raises(stax.Error, match="LRN node 'lrn'.*floating-point"):
        stax.load(model.SerializeToString())


@pytest.mark.parametrize("jit", ["off", "sync"])
def test_lrn_in_alexnet_block_against_onnxruntime(stax_bin, tmp_path, jit):
    """Conv -> Relu -> LRN -> MaxPool as AlexNet has it, through `stax run`: with --jit=sync
    the groups around LRN are compiled and LRN itself interpreted between them."""
    import subprocess
    from onnx import numpy_helper
    w = (RNG.standard_normal((8, 3, 3, 3)) * 0.5).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("LRN", ["r"], ["n"], size=5, alpha=1e-2, beta=0.75, bias=2.0),
             helper.make_node("MaxPool", ["n"], ["y"], kernel_shape=[3, 3], strides=[2, 2])]
    graph = helper.make_graph(
        nodes, "alexnet_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                               ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])
    path = tmp_path / "block.onnx"
    onnx.save(helper.make_model(graph), str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for shape in [(1, 3, 11, 11), (2, 3, 16, 9)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        out = tmp_path / f"out{shape[0]}"
        result = subprocess.run([stax_bin, "run", str(path), "-i", f"x={tmp_path / 'x.npy'}",
                                 "-o", str(out), f"--jit={jit}", "--repeat", "3"],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        np.testing.assert_allclose(np.load(out / "y.npy"), session.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-5)
