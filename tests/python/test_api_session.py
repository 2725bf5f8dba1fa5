"""Models the ONNX Runtime way: Model.run(output_names, feed) with output selection (a dict by
name, also with numpy=False and for saved models), get_inputs()/get_outputs() metadata, and
stax.InferenceSession, checked against onnxruntime itself by running the same snippet with
either module. Needs the onnx package (skipped without it); the comparisons also need
onnxruntime (skipped without it, with the reason)."""
import os
import warnings

import numpy as np
import pytest

from test_api_support import stax

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


W = rand(4, 3)

def mlp_bytes():
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
         helper.make_node("Shape", ["x"], ["shape"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [numpy_helper.from_array(W, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_load_with_options_and_keywords():
    m = stax.load(mlp_bytes(), options=stax.Options(jit="off", num_threads=2))
    assert m.jit == "off" and m.num_threads == 2
    with pytest.raises(ValueError, match="load: jit='sync' and options.jit='off' disagree"):
        stax.load(mlp_bytes(), jit="sync", options=stax.Options(jit="off"))
    with pytest.raises(ValueError, match="disable_passes=.*options.disable_passes=.*disagree"):
        stax.load(mlp_bytes(), disable_passes=["cse"], options=stax.Options(disable_passes="fuse"))


def test_run_selects_outputs_by_name():
    m = stax.load(mlp_bytes(), jit="off")
    x = rand(5, 4)
    y = np.maximum(x @ W, 0)
    every = m.run(None, {"x": x})
    assert list(every) == ["y", "shape"]
    np.testing.assert_allclose(every["y"], y, rtol=1e-5, atol=1e-6)
    picked = m.run(["shape", "y"], {"x": x})
    assert list(picked) == ["shape", "y"]
    np.testing.assert_array_equal(picked["shape"], [5, 4])
    assert list(m.run(["y"], [x])) == ["y"]  # a feed in input order works too
    assert list(m.run({"x": x})) == ["y", "shape"]  # run(feed): every output
    tensors = m.run(["y"], {"x": x}, numpy=False)
    assert isinstance(tensors["y"], stax.Tensor)
    np.testing.assert_allclose(np.asarray(tensors["y"]), y, rtol=1e-5, atol=1e-6)
    assert m.run([], {"x": x}) == {}


def test_run_errors_name_the_tensor():
    m = stax.load(mlp_bytes(), jit="off")
    x = rand(2, 4)
    with pytest.raises(stax.InvalidArgumentError, match=r"unknown output 'z'; the outputs are \['y', 'shape'\]"):
        m.run(["y", "z"], {"x": x})
    with pytest.raises(stax.InvalidArgumentError, match="missing input 'x'"):
        m.run(None, {})
    with pytest.raises(stax.InvalidArgumentError, match="unknown input 'q'"):
        m.run(None, {"x": x, "q": x})
    with pytest.raises(TypeError, match="output_names must be a list of output names"):
        m.run("y", {"x": x})
    with pytest.raises(TypeError, match="feed"):
        m.run(["y"], None)


def test_metadata():
    m = stax.load(mlp_bytes(), jit="off")
    (x,) = m.get_inputs()
    y, shape = m.get_outputs()
    assert (x.name, x.shape, x.type, x.dtype) == ("x", ("N", 4), "tensor(float)", "float32")
    assert (y.name, y.shape, y.type) == ("y", ("N", 3), "tensor(float)")
    assert (shape.shape, shape.type, shape.dtype) == ((2,), "tensor(int64)", "int64")
    assert m.get_inputs() == m.inputs


def test_saved_model_loads_as_a_model(tmp_path):
    m = stax.load(mlp_bytes(), jit="off")
    path = tmp_path / "mlp.stax"
    try:
        m.save(str(path))
    except stax.UnimplementedError:
        pytest.skip("this build of the library cannot save programs")
    x = rand(3, 4)
    for source in (path, str(path), path.read_bytes()):
        again = stax.load(source, options=stax.Options(jit="off", num_threads=1))
        assert isinstance(again, stax.Model) and again.num_threads == 1
        result = again.run(["y"], {"x": x})
        np.testing.assert_array_equal(result["y"], m(x)["y"])
        assert isinstance(again.run({"x": x}, numpy=False)["shape"], stax.Tensor)
    kernel = stax.load_program(str(path), jit="off")  # a Kernel: a tuple, like compile([...])
    y, shape = kernel(x)
    np.testing.assert_array_equal(y, m(x)["y"])
    with pytest.raises(ValueError, match="symbols, dims_may_be_zero and disable_passes"):
        stax.load(path, symbols={"N": 2})
    with pytest.raises(ValueError, match="load_program: options.disable_passes does not apply"):
        stax.load_program(str(path), options=stax.Options(disable_passes="all"))


def test_environment_is_untouched():
    before = dict(os.environ)
    stax.load(mlp_bytes(), options=stax.Options(jit="off", num_threads=1, jit_cache_dir="/tmp/x"))
    assert dict(os.environ) == before


# -- stax.InferenceSession ------------------------------------------------------------------

def ort():
    return pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: no "
                               "reference to compare stax.InferenceSession with")


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp_bytes())
    return str(path)


def ort_snippet(rt, path, x):
    """ONNX Runtime user code, unchanged but for which module `rt` is."""
    sess = rt.InferenceSession(path, providers=["CPUExecutionProvider"])
    inputs = [(i.name, list(i.shape), i.type) for i in sess.get_inputs()]
    outputs = [(o.name, list(o.shape), o.type) for o in sess.get_outputs()]
    input_name = sess.get_inputs()[0].name
    everything = sess.run(None, {input_name: x})
    shape_only = sess.run(["shape"], {input_name: x})
    swapped = sess.run([outputs[1][0], outputs[0][0]], {input_name: x})
    return inputs, outputs, everything, shape_only, swapped, sess.get_providers(), \
        rt.get_available_providers()[-1]


def test_ort_snippet_runs_unchanged(model_path):
    onnxruntime = ort()
    for n in (1, 6):
        x = rand(n, 4)
        got = ort_snippet(stax, model_path, x)
        ref = ort_snippet(onnxruntime, model_path, x)
        assert got[0] == ref[0] == [("x", ["N", 4], "tensor(float)")]
        assert got[1] == ref[1]
        for mine, theirs in zip(got[2:5], ref[2:5]):
            assert isinstance(mine, list) and len(mine) == len(theirs)
            for a, b in zip(mine, theirs):
                assert isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert got[5] == ref[5] == ["CPUExecutionProvider"]
        assert got[6] == ref[6] == "CPUExecutionProvider"


def test_ort_session_options_are_understood(model_path):
    onnxruntime = ort()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = stax.InferenceSession(model_path, sess_options=options)
    assert sess.model.num_threads == 2 and sess.model.passes["runs"] == []
    assert sess.get_session_options() == stax.Options(num_threads=2, disable_passes="all")
    x = rand(3, 4)
    ref = onnxruntime.InferenceSession(model_path, sess_options=options,
                                       providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(["y"], {"x": x})[0], ref.run(["y"], {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    default = stax.InferenceSession(model_path, sess_options=onnxruntime.SessionOptions())
    assert default.get_session_options() == stax.Options()  # 0 threads: the shared pool


def test_session_with_stax_options_bytes_and_keywords(model_path):
    sess = stax.InferenceSession(mlp_bytes(), stax.Options(jit="off", num_threads=1),
                                 symbols={"N": 2})
    assert sess.model.jit == "off" and sess.model.num_threads == 1
    assert sess.get_inputs()[0].shape == (2, 4)
    x = rand(2, 4)
    (y,) = sess.run(["y"], {"x": x}, run_options=None)
    np.testing.assert_allclose(y, np.maximum(x @ W, 0), rtol=1e-5, atol=1e-6)
    with pytest.raises(stax.ShapeError):
        sess.run(None, {"x": rand(3, 4)})
    with pytest.raises(TypeError, match="sess_options must be a stax.Options or an "
                                        "onnxruntime.SessionOptions"):
        stax.InferenceSession(model_path, sess_options={"threads": 2})
    with pytest.raises(TypeError, match="input_feed must be a dict"):
        sess.run(None, [x])


def test_session_errors_name_the_tensor(model_path):
    sess = stax.InferenceSession(model_path)
    x = rand(2, 4)
    with pytest.raises(stax.InvalidArgumentError, match="unknown output 'logits'"):
        sess.run(["logits"], {"x": x})
    with pytest.raises(stax.InvalidArgumentError, match="missing input 'x'"):
        sess.run(None, {})
    with pytest.raises(stax.InvalidArgumentError, match=r"unknown input 'input'; the inputs are \('x',\)"):
        sess.run(None, {"input": x})
    with pytest.raises(stax.InvalidArgumentError, match="unknown input 'extra'"):
        sess.run(None, {"x": x, "extra": x})


def test_providers(model_path):
    with pytest.raises(stax.UnimplementedError,
                       match="provider 'CUDAExecutionProvider' is not available: stax runs on "
                             "the CPU for now"):
        stax.InferenceSession(model_path, providers=["CUDAExecutionProvider"])
    with pytest.raises(TypeError, match="providers must be a list"):
        stax.InferenceSession(model_path, providers="CPUExecutionProvider")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sess = stax.InferenceSession(model_path, providers=[
            ("CUDAExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert any("CUDAExecutionProvider skipped" in str(w.message) for w in caught)
    assert stax.get_available_providers() == ["CPUExecutionProvider"]
