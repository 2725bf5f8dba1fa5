"""Hostile inputs found by fuzzing and by hand, each with its clear error (or, for a valid
model, the right result): Slice steps at the ends of int64, external data that names a FIFO,
an initializer that declares 2^36 floats with its external file missing, and a folder given
where a file is expected."""
import os
import subprocess

import numpy as np
import pytest

from test_api_support import stax

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def make_model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def ints(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def test_slice_steps_at_the_ends_of_int64():
    i64 = np.iinfo(np.int64)
    model = make_model(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [ints("starts", [-1, 2]), ints("ends", [i64.min, i64.max]), ints("axes", [0, 1]),
         ints("steps", [i64.min, i64.max])])
    m = stax.load(model.SerializeToString(), jit="off")
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    np.testing.assert_array_equal(m(x=x)["y"], x[-1::-(2**63), 2::2**63 - 1])


def external_model(folder, location, dims):
    weight = TensorProto()
    weight.name = "w"
    weight.data_type = TensorProto.FLOAT
    weight.dims.extend(dims)
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", location
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], [weight])
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_external_data_fifo_is_refused_without_blocking(stax_bin, tmp_path):
    os.mkfifo(tmp_path / "weights.bin")
    path = external_model(tmp_path, "weights.bin", [4])
    # A blocking open would wait for a writer forever; the timeout turns that into a failure.
    r = subprocess.run([stax_bin, "info", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "external data" in r.stderr and "is not a regular file" in r.stderr


def test_huge_initializer_with_missing_file_says_missing(tmp_path):
    path = external_model(tmp_path, "absent.bin", [1 << 18, 1 << 18])  # 2^36 floats
    with pytest.raises(stax.Error, match="cannot open external data file .*absent.bin") as info:
        stax.load(str(path), jit="off")
    assert "out of memory" not in str(info.value)


def test_external_data_shorter_than_dims_is_refused_before_allocating(tmp_path):
    (tmp_path / "short.bin").write_bytes(b"\0" * 16)
    path = external_model(tmp_path, "short.bin", [1 << 18, 1 << 18])
    with pytest.raises(stax.Error, match="external data .* has 16 bytes, its dims need"):
        stax.load(str(path), jit="off")


def test_folder_as_input_or_model(stax_bin, tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])])
    path = tmp_path / "relu.onnx"
    path.write_bytes(model.SerializeToString())
    folder = tmp_path / "inputs"
    folder.mkdir()
    r = subprocess.run([stax_bin, "run", str(path), "-i", f"x={folder}"], capture_output=True,
                       text=True)
    assert r.returncode == 1
    assert "it is a folder" in r.stderr and "out of memory" not in r.stderr
    (tmp_path / "model_dir.onnx").mkdir()
    r = subprocess.run([stax_bin, "info", str(tmp_path / "model_dir.onnx")], capture_output=True,
                       text=True)
    assert r.returncode == 1
    assert "it is a folder" in r.stderr
    r = subprocess.run([stax_bin, "run", str(folder)], capture_output=True, text=True)
    assert r.returncode == 1 and "it is a folder" in r.stderr
