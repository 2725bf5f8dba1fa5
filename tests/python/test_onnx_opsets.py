"""ONNX models at the opset the installed `onnx` stamps by default (helper.make_model without
opset_imports: 28 for onnx 1.23), run by stax and by ONNX Runtime, compared; the ops whose
semantics grew in opsets 22-28 (Mod fmod=0 on floats, signed BitShift, SpaceToDepth CRD, Range
stash_type); and a model beyond stax's newest opset, refused with the way to convert it.
docs/onnx.md has the table of opset 22-28 decisions these tests hold stax to."""
import numpy as np
import pytest

from test_api_support import stax

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

STAX_MAX_OPSET = 28
RNG = np.random.default_rng(28)


def default_model(nodes, inputs, outputs, initializers=()):
    """A model as people build it: make_model's own opset and IR version."""
    graph = helper.make_graph(nodes, "opset_test", inputs, outputs, list(initializers))
    return helper.make_model(graph)


def run_both(model, feeds):
    data = model.SerializeToString()
    got = stax.load(data)(**feeds)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return [(name, got[name], want) for name, want in zip(names, session.run(None, feeds))]


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


F = TensorProto.FLOAT


def test_default_opset_is_stax_maximum():
    """The premise: what make_model stamps is what stax now accepts, and the onnx package
    defines no newer opset."""
    model = default_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])],
                          [vi("y", F, [2])])
    assert model.opset_import[0].version == onnx.defs.onnx_opset_version() == STAX_MAX_OPSET
    x = np.array([-1.5, 2.0], np.float32)
    np.testing.assert_array_equal(stax.load(model.SerializeToString())(x=x)["y"], [0.0, 2.0])


def mlp_block():
    w = RNG.standard_normal((8, 6)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    scale = RNG.standard_normal(6).astype(np.float32)
    bias = RNG.standard_normal(6).astype(np.float32)
    shape = np.array([0, -1, 3], np.int64)
    axes = np.array([1, 2], np.int64)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("LayerNormalization", ["r", "scale", "bias"], ["ln"], axis=-1,
                         epsilon=1e-5),
        helper.make_node("Softmax", ["ln"], ["sm"], axis=-1),
        helper.make_node("Reshape", ["sm", "shape"], ["rs"]),
        helper.make_node("Transpose", ["rs"], ["tr"], perm=[0, 2, 1]),
        helper.make_node("ReduceMean", ["tr", "axes"], ["mean"], keepdims=1),
        helper.make_node("Cast", ["tr"], ["y16"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["y16"], ["y"], to=TensorProto.FLOAT),
    ]
    inits = [numpy_helper.from_array(v, n) for n, v in
             [("w", w), ("b", b), ("scale", scale), ("bias", bias), ("shape", shape),
              ("axes", axes)]]
    return default_model(nodes, [vi("x", F, ["B", "S", 8])],
                         [vi("y", F, ["B", 3, None]), vi("mean", F, ["B", 1, 1])], inits)


@pytest.mark.parametrize("batch,seq", [(1, 1), (2, 5), (3, 16)])
def test_mlp_block_at_default_opset(batch, seq):
    x = RNG.standard_normal((batch, seq, 8)).astype(np.float32)
    for name, got, want in run_both(mlp_block(), {"x": x}):
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=name)


def test_cnn_block_at_default_opset():
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    slope = np.full((4, 1, 1), 0.1, np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("PRelu", ["c", "slope"], ["p"]),
        helper.make_node("MaxPool", ["p"], ["m"], kernel_shape=[2, 2], strides=[2, 2],
                         ceil_mode=1),
        helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[0, 0, 1, 1], ceil_mode=1, count_include_pad=0),
        helper.make_node("GlobalAveragePool", ["a"], ["g"]),
        helper.make_node("Flatten", ["g"], ["y"]),
        helper.make_node("Sin", ["a"], ["s"]),
        helper.make_node("Round", ["s"], ["rounded"]),
        helper.make_node("HardSwish", ["a"], ["hs"]),
    ]
    model = default_model(
        nodes, [vi("x", F, ["N", 3, "H", "W"])],
        [vi("y", F, None), vi("rounded", F, None), vi("hs", F, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(slope, "slope")])
    for shape in [(1, 3, 9, 9), (2, 3, 12, 7)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        for name, got, want in run_both(model, {"x": x}):
            assert got.shape == want.shape, name
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)


def binary_model(op, dtype, **attrs):
    return default_model([helper.make_node(op, ["a", "b"], ["c"], **attrs)],
                         [vi("a", dtype, ["N"]), vi("b", dtype, ["N"])], [vi("c", dtype, ["N"])])


def test_mod_fmod0_floats_opset28():
    """Mod-28 defines fmod=0 for floats (numpy's mod; signed zeros, inf and NaN cases)."""
    a = np.array([-3.5, 3.5, 4, -4, 0, -0.0, 5, -5, np.inf, 7, np.nan], np.float32)
    b = np.array([2, -2, -2, 2, -3, 3, np.inf, np.inf, 2, 0, 1], np.float32)
    for dtype, np_dtype in [(TensorProto.FLOAT, np.float32), (TensorProto.DOUBLE, np.float64)]:
        model = binary_model("Mod", dtype, fmod=0)
        ((_, got, want),) = run_both(model, {"a": a.astype(np_dtype), "b": b.astype(np_dtype)})
        np.testing.assert_array_equal(got, want)
        numbers = ~np.isnan(want)  # a NaN's sign is not specified
        np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(got, np.mod(a, b).astype(np_dtype))


def test_bitshift_signed_opset28():
    """BitShift-28 adds signed types: arithmetic right shifts; negative or too-wide counts
    leave the sign fill."""
    for dtype, np_dtype in [(TensorProto.INT8, np.int8), (TensorProto.INT32, np.int32),
                            (TensorProto.INT64, np.int64)]:
        bits = np.dtype(np_dtype).itemsize * 8
        info = np.iinfo(np_dtype)
        a = np.array([info.min, -5, 100, -1, -7, 64, 3, info.max], np_dtype)
        b = np.array([bits - 1, 1, -1, bits, 2, 1, bits + 3, 1], np_dtype)
        for direction in ("LEFT", "RIGHT"):
            ((_, got, want),) = run_both(binary_model("BitShift", dtype, direction=direction),
                                         {"a": a, "b": b})
            np.testing.assert_array_equal(got, want, err_msg=f"{np_dtype} {direction}")


def test_space_to_depth_modes_opset28():
    x = RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)
    for mode in ("DCR", "CRD"):
        model = default_model(
            [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode=mode),
             helper.make_node("DepthToSpace", ["y"], ["z"], blocksize=2, mode=mode)],
            [vi("x", F, [2, 3, 4, 6])], [vi("y", F, None), vi("z", F, None)])
        results = run_both(model, {"x": x})
        for name, got, want in results:
            np.testing.assert_array_equal(got, want, err_msg=f"{mode} {name}")
        np.testing.assert_array_equal(results[1][1], x)  # each mode inverts its own order


def test_range_float16_stash_type_opset27():
    inputs = [vi(n, TensorProto.FLOAT16, []) for n in ("start", "limit", "delta")]
    feeds = {"start": np.array(1000, np.float16), "limit": np.array(1100, np.float16),
             "delta": np.array(0.75, np.float16)}
    for stash in (None, 1, 11):
        attrs = {} if stash is None else {"stash_type": stash}
        model = default_model([helper.make_node("Range", list(feeds), ["y"], **attrs)], inputs,
                              [vi("y", TensorProto.FLOAT16, None)])
        ((_, got, want),) = run_both(model, feeds)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, (1000 + 0.75 * np.arange(134)).astype(np.float16))
    model = default_model([helper.make_node("Range", list(feeds), ["y"], stash_type=10)],
                          inputs, [vi("y", TensorProto.FLOAT16, None)])
    with pytest.raises(stax.UnimplementedError, match="'stash_type' = 10 for float16"):
        stax.load(model.SerializeToString())


def test_opset_beyond_stax_names_maximum_and_converter():
    model = default_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])],
                          [vi("y", F, [2])])
    model.opset_import[0].version = STAX_MAX_OPSET + 1
    with pytest.raises(stax.UnimplementedError) as info:
        stax.load(model.SerializeToString())
    message = str(info.value)
    assert f"opset {STAX_MAX_OPSET + 1}" in message
    assert f"stax supports opsets 1 to {STAX_MAX_OPSET}" in message
    assert f"onnx.version_converter.convert_version(model, {STAX_MAX_OPSET})" in message


def test_converter_the_message_names_runs():
    """The API the message names exists and gives a model stax runs."""
    from onnx import version_converter
    model = default_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [3])],
                          [vi("y", F, [3])])
    converted = version_converter.convert_version(model, 21)
    assert converted.opset_import[0].version == 21
    x = np.array([-1, 0, 2], np.float32)
    np.testing.assert_array_equal(stax.load(converted.SerializeToString())(x=x)["y"],
                                  np.maximum(x, 0))


def prelu_model(opset, x_shape, slope):
    graph = helper.make_graph(
        [helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")], "prelu",
        [vi("x", F, list(x_shape))], [vi("y", F, None)], [numpy_helper.from_array(slope, "slope")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("x_shape",
                         [(2, 3), (2, 3, 4), (2, 3, 4, 5), (2, 3, 4, 5, 6), (1, 3, 3, 3)])
@pytest.mark.parametrize("opset", [1, 6])
def test_prelu_legacy_per_channel_slope(opset, x_shape):
    """Before opset 7 a slope of C values applies per channel (input dim 1), as the
    pytorch-converted test_PReLU_*_multiparam models expect; (1, 3, 3, 3) would also broadcast
    numpy's way, along the last dim, which opset 6 did not mean."""
    x = RNG.standard_normal(x_shape).astype(np.float32)
    slope = np.array([0.25, -0.5, 2.0], np.float32)
    got = stax.load(prelu_model(opset, x_shape, slope).SerializeToString())(x=x)["y"]
    per_channel = slope.reshape((3,) + (1,) * (len(x_shape) - 2))
    np.testing.assert_allclose(got, np.where(x < 0, x * per_channel, x), rtol=1e-6)
    shared = np.array([0.3], np.float32)
    got = stax.load(prelu_model(opset, x_shape, shared).SerializeToString())(x=x)["y"]
    np.testing.assert_allclose(got, np.where(x < 0, x * 0.3, x), rtol=1e-6)


def test_prelu_opset7_broadcasts_numpy_style():
    """From opset 7 on the slope broadcasts like numpy: a [C] slope aligns with the last dim."""
    x = RNG.standard_normal((2, 3, 4, 3)).astype(np.float32)
    slope = np.array([0.25, -0.5, 2.0], np.float32)
    got = stax.load(prelu_model(7, x.shape, slope).SerializeToString())(x=x)["y"]
    np.testing.assert_allclose(got, np.where(x < 0, x * slope, x), rtol=1e-6)
    legacy = stax.load(prelu_model(6, x.shape, slope).SerializeToString())(x=x)["y"]
    np.testing.assert_allclose(legacy, np.where(x < 0, x * slope.reshape(3, 1, 1), x), rtol=1e-6)
    with pytest.raises(stax.ShapeError, match="PRelu node 'prelu'"):
        stax.load(prelu_model(7, (2, 3, 4, 5), slope).SerializeToString())
