"""Every error path of the Python API: C status codes become stax.Error subclasses (also the
matching builtin exceptions) with the C message and the Python line that made the bad node;
wrong inputs are refused before anything runs, naming the input; a failed run leaves the
kernel usable."""
import sys
import numpy as np
import pytest

from test_api_support import stax

F32 = np.float32


def test_hierarchy():
    assert issubclass(stax.ShapeError, stax.Error) and issubclass(stax.ShapeError, ValueError)
    assert issubclass(stax.DtypeError, TypeError)
    assert issubclass(stax.OutOfRangeError, IndexError)
    assert issubclass(stax.UnimplementedError, NotImplementedError)
    assert issubclass(stax.IoError, OSError)
    assert issubclass(stax.OutOfMemoryError, MemoryError)
    assert issubclass(stax.ParseError, ValueError)
    assert issubclass(stax.InvalidArgumentError, ValueError)
    assert issubclass(stax.FailedPreconditionError, RuntimeError)
    assert issubclass(stax.InternalError, RuntimeError)
    assert stax.ShapeError.code == "SHAPE_MISMATCH" and stax.DtypeError.code == "DTYPE_MISMATCH"
    assert stax.Error.code is None
    error = stax.ShapeError("a message")
    assert error.message == "a message" and error.code == "SHAPE_MISMATCH"


# ---- graph building (compile time) -------------------------------------------------------------


def test_shape_mismatch_names_node_and_python_line():
    a = stax.placeholder([3, 4], name="a")
    b = stax.placeholder([5, 2], name="b")
    product = a @ b  # the line the message must point at
    with pytest.raises(stax.ShapeError) as info:
        stax.compile(product)
    message = str(info.value)
    assert "MatMul" in message and "'a'" in message and "'b'" in message
    assert "test_api_errors.py:" in message
    assert info.value.code == "SHAPE_MISMATCH"


def test_dtype_mismatch_at_compile():
    a = stax.placeholder([3], name="a")
    i = stax.placeholder([3], dtype="int32", name="i")
    with pytest.raises(stax.DtypeError, match="float32.*int32"):
        stax.compile(a + i)


def test_attribute_errors():
    a = stax.placeholder([3, 4], name="a")
    with pytest.raises(stax.OutOfRangeError, match="axis 5"):
        stax.compile(stax.softmax(a, axis=5))
    with pytest.raises(stax.InvalidArgumentError, match="approximate"):
        stax.compile(stax.gelu(a, approximate="fast"))
    with pytest.raises(TypeError, match="is a string"):
        stax.ops.Gelu(a, approximate=3)
    with pytest.raises(TypeError, match="is an integer"):
        stax.ops.Softmax(a, axis=1.5)


def test_shape_errors_at_compile():
    a = stax.placeholder([3, 4], name="a")
    b = stax.placeholder([5, 2], name="b")
    with pytest.raises(stax.ShapeError, match="12 elements"):
        stax.compile(stax.reshape(a, [5, 5]))
    with pytest.raises(stax.ShapeError, match="sum to 2"):
        stax.compile(stax.split(a, [1, 1], axis=1))
    with pytest.raises(stax.ShapeError, match="Concat"):
        stax.compile(stax.concat([a, b], axis=0))
    with pytest.raises(stax.ShapeError, match="rank 9"):
        stax.placeholder([1] * 9)


def test_shape_inference_errors_surface_on_shape_queries():
    a = stax.placeholder([3, 4], name="a")
    bad = a @ stax.placeholder([5], name="v")
    with pytest.raises(stax.ShapeError):
        bad.shape
    assert "MatMul" in repr(bad)  # repr never raises


def test_symbol_and_input_errors_at_compile():
    a = stax.placeholder([3, 4], name="a")
    T = stax.symbol("T")
    with pytest.raises(stax.InvalidArgumentError, match="symbol T"):
        stax.compile(stax.reshape(a, [T, -1]))
    with pytest.raises(stax.InvalidArgumentError, match="not among the kernel's inputs"):
        stax.compile(a + 1, inputs=[])
    with pytest.raises(ValueError, match="listed twice"):
        stax.compile(a + 1, inputs=[a, a])
    with pytest.raises(TypeError, match="placeholders"):
        stax.compile(a + 1, inputs=[a + 1])
    S1 = stax.symbol("R", min=1, max=4)
    S2 = stax.symbol("R", min=10, max=20)
    with pytest.raises(stax.Error, match="R"):
        stax.compile(stax.placeholder([S1]) + stax.placeholder([S2]))


def test_python_side_argument_errors():
    a = stax.placeholder([3], name="a")
    with pytest.raises(TypeError, match="unknown dtype"):
        stax.placeholder([1], dtype="float128")
    with pytest.raises(stax.UnimplementedError, match="target 'cuda'"):
        stax.compile(a + 1, target="cuda")
    with pytest.raises(TypeError, match="truth value"):
        bool(a)
    with pytest.raises(TypeError, match="outputs must be stax expressions"):
        stax.compile([a, 3])
    with pytest.raises(ValueError, match="at least one output"):
        stax.compile([])
    with pytest.raises(TypeError, match="cannot use"):
        a + object()
    with pytest.raises(ValueError, match="outputs"):
        stax.ops.Add(a, a, outputs=2)
    with pytest.raises(TypeError, match="takes 2 inputs"):
        stax.ops.Add(a, a, a)
    with pytest.raises(TypeError, match="given twice"):
        stax.ops.Add(a, a, a=a)
    with pytest.raises(ValueError, match="cond"):
        stax.cond(a.sum() > 0, lambda: a, lambda: (a, a))
    with pytest.raises(ValueError, match="padding"):
        stax.conv(stax.placeholder([1, 1, 4, 4]), np.zeros((1, 1, 3, 3), F32), padding=[1, 1, 1])


# ---- run time: inputs refused before anything runs ----------------------------------------------


@pytest.fixture
def kernel():
    S = stax.symbol("S", max=4)
    x = stax.placeholder([S, 2], name="x")
    y = stax.placeholder([S], name="y")
    return stax.compile(x + stax.expand_dims(y, 1))


def test_wrong_dtype_is_refused_before_running(kernel):
    with pytest.raises(stax.DtypeError) as info:
        kernel(np.zeros((3, 2), np.float64), np.zeros(3, F32))
    assert "input 'x'" in str(info.value) and "float64" in str(info.value)
    assert kernel.stats["runs"] == 0


def test_wrong_rank_is_refused_before_running(kernel):
    with pytest.raises(stax.ShapeError, match=r"input 'y': expected rank 1 \[S\], got rank 2"):
        kernel(np.zeros((3, 2), F32), np.zeros((3, 1), F32))
    assert kernel.stats["runs"] == 0


def test_dims_checked_by_the_guards(kernel):
    with pytest.raises(stax.ShapeError, match="outside its range"):
        kernel(np.zeros((5, 2), F32), np.zeros(5, F32))
    with pytest.raises(stax.ShapeError, match='input "y" dim 0 is 2'):
        kernel(np.zeros((3, 2), F32), np.zeros(2, F32))
    with pytest.raises(stax.ShapeError, match="dim 1 is 3"):
        kernel(np.zeros((3, 3), F32), np.zeros(3, F32))
    stats = kernel.stats
    assert stats["runs"] == 3 and stats["failed_runs"] == 3
    # the kernel still works after failures
    np.testing.assert_array_equal(kernel(np.ones((2, 2), F32), np.ones(2, F32)), 2)


def test_argument_list_errors(kernel):
    x, y = np.zeros((3, 2), F32), np.zeros(3, F32)
    with pytest.raises(stax.InvalidArgumentError, match="missing input 'y'"):
        kernel(x)
    with pytest.raises(stax.InvalidArgumentError, match="takes 2 inputs"):
        kernel(x, y, y)
    with pytest.raises(stax.InvalidArgumentError, match="unknown input 'z'"):
        kernel(x, z=y)
    with pytest.raises(stax.InvalidArgumentError, match="given twice"):
        kernel(x, y, x=x)
    with pytest.raises(TypeError):
        stax.run(kernel, 5)


def test_unsupported_array_types(kernel):
    y = np.zeros(3, F32)
    with pytest.raises(stax.DtypeError, match="complex64 is not a stax dtype"):
        kernel(np.zeros((3, 2), np.complex64), y)
    with pytest.raises(stax.DtypeError, match="object is not a stax dtype"):
        kernel(np.array([[object()] * 2] * 3), y)
    with pytest.raises(stax.InvalidArgumentError, match="cannot convert dict"):
        kernel({}, y)
    with pytest.raises(stax.InvalidArgumentError, match="cannot convert str"):
        kernel("abc", y)
    with pytest.raises(stax.ShapeError, match="rank 9"):
        stax.asarray(np.zeros([1] * 9, F32))
    with pytest.raises(stax.DtypeError, match="does not cast"):
        stax.asarray(np.zeros(3, np.float64), dtype="float32")


def test_index_errors_at_run_time():
    a = stax.placeholder([3, 4], name="a")
    g = stax.placeholder([2], dtype="int64", name="g")
    k = stax.compile(stax.gather(a, g, axis=1))
    with pytest.raises(stax.OutOfRangeError, match="value 9"):
        k(np.zeros((3, 4), F32), np.array([0, 9]))
    np.testing.assert_array_equal(k(np.ones((3, 4), F32), np.array([0, 3])), 1)


def test_dlpack_errors():
    with pytest.raises(TypeError, match="__dlpack__"):
        stax.from_dlpack(3)
    x = stax.placeholder([2], name="x")
    tensor = stax.compile(x + 1).run([np.zeros(2, F32)], numpy=False)[0]
    with pytest.raises(BufferError, match="CPU"):
        tensor.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream"):
        tensor.__dlpack__(stream=5)
    capsule = tensor.__dlpack__()
    stax.from_dlpack(capsule)
    with pytest.raises(ValueError, match="only once"):
        stax.from_dlpack(capsule)


def test_bfloat16_outputs_without_ml_dtypes_stay_stax_tensors(monkeypatch):
    # numpy has no bfloat16: without ml_dtypes the output stays a stax Tensor, numpy() says why
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    p = stax.placeholder([2], name="p")
    k = stax.compile(stax.cast(p, "bfloat16") * 2)
    out = k(np.ones(2, F32))
    assert isinstance(out, stax.Tensor) and out.dtype == "bfloat16"
    with pytest.raises(TypeError, match="numpy has no bfloat16.*ml_dtypes"):
        out.numpy()
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(out)
    back = stax.compile(stax.cast(stax.placeholder([2], dtype="bfloat16", name="b"), "float32"))
    np.testing.assert_array_equal(back(out), [2, 2])


def test_load_errors(tmp_path):
    with pytest.raises(stax.IoError, match="cannot open"):
        stax.load(str(tmp_path / "missing.onnx"))
    with pytest.raises(stax.ParseError, match="not a valid ModelProto"):
        stax.load(b"garbage")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\x03abc\xff\xff")
    with pytest.raises(stax.Error):
        stax.load(str(bad))
