"""`stax run` / `compile` / `info` / `dis` on small ONNX models: .npy input and output for every
dtype in C and Fortran order, TensorProto inputs, saved programs, and the error paths."""
import pathlib
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

DTYPES = {
    np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
    np.float16: TensorProto.FLOAT16, np.int8: TensorProto.INT8, np.int16: TensorProto.INT16,
    np.int32: TensorProto.INT32, np.int64: TensorProto.INT64, np.uint8: TensorProto.UINT8,
    np.uint16: TensorProto.UINT16, np.uint32: TensorProto.UINT32,
    np.uint64: TensorProto.UINT64, np.bool_: TensorProto.BOOL,
}


def identity_model(path, elem_type, shape=("N", "M")):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y/out:0"])], "identity",
        [helper.make_tensor_value_info("x", elem_type, list(shape))],
        [helper.make_tensor_value_info("y/out:0", elem_type, list(shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("order", ["C", "F"])
def test_npy_round_trip_every_dtype(stax_bin, tmp_path, dtype, order):
    model = identity_model(tmp_path / "m.onnx", DTYPES[dtype])
    rng = np.random.default_rng(0)
    x = np.asarray(rng.integers(0, 100, size=(3, 5)) * (1 if dtype != np.bool_ else 1)).astype(dtype)
    x = np.asfortranarray(x) if order == "F" else np.ascontiguousarray(x)
    np.save(tmp_path / "x.npy", x)
    r = run(stax_bin, "run", model, "-i", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    # Unsafe characters in output names become '_'.
    y = np.load(tmp_path / "out" / "y_out_0.npy")
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, x)


def test_tensorproto_input_and_single_input_shorthand(stax_bin, tmp_path):
    model = identity_model(tmp_path / "m.onnx", TensorProto.FLOAT)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "x.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    r = run(stax_bin, "run", model, "-i", tmp_path / "x.pb", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y_out_0.npy"), x)
    assert "y/out:0: float32[2, 3]" in r.stdout


def test_compile_then_run_saved_program(stax_bin, tmp_path):
    model = identity_model(tmp_path / "m.onnx", TensorProto.INT64)
    r = run(stax_bin, "compile", model, "-o", tmp_path / "m.stax")
    assert r.returncode == 0, r.stderr
    for shape in [(1, 1), (4, 7), (3, 2)]:
        x = np.arange(np.prod(shape), dtype=np.int64).reshape(shape)
        np.save(tmp_path / "x.npy", x)
        r = run(stax_bin, "run", tmp_path / "m.stax", "-i", f"x={tmp_path / 'x.npy'}", "-o",
                tmp_path / "out")
        assert r.returncode == 0, r.stderr
        np.testing.assert_array_equal(np.load(tmp_path / "out" / "y_out_0.npy"), x)
    info = run(stax_bin, "info", tmp_path / "m.stax")
    assert info.returncode == 0 and "x: int64[N, M]" in info.stdout


def test_corrupted_program_is_rejected(stax_bin, tmp_path):
    model = identity_model(tmp_path / "m.onnx", TensorProto.FLOAT)
    assert run(stax_bin, "compile", model, "-o", tmp_path / "m.stax").returncode == 0
    data = bytearray((tmp_path / "m.stax").read_bytes())
    data[len(data) // 2] ^= 0x5A
    (tmp_path / "bad.stax").write_bytes(bytes(data))
    (tmp_path / "short.stax").write_bytes(bytes(data[:20]))
    np.save(tmp_path / "x.npy", np.zeros((2, 2), np.float32))
    for name in ("bad.stax", "short.stax"):
        r = run(stax_bin, "run", tmp_path / name, "-i", f"x={tmp_path / 'x.npy'}")
        assert r.returncode == 1
        assert "stax run:" in r.stderr and ("corrupt" in r.stderr or "truncated" in r.stderr)


def test_info_and_dis(stax_bin, tmp_path):
    model = identity_model(tmp_path / "m.onnx", TensorProto.FLOAT)
    r = run(stax_bin, "info", model)
    assert r.returncode == 0
    assert "x: float32[N, M]" in r.stdout and "Identity" in r.stdout
    r = run(stax_bin, "dis", model)
    assert r.returncode == 0 and r.stdout.strip()


def test_unsupported_ops_listed_together(stax_bin, tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Det", ["x"], ["d"], name="det1"),
         helper.make_node("Det", ["x"], ["e"], name="det2"),
         helper.make_node("GRU", ["x", "x", "x"], ["g"], name="gru", hidden_size=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("d", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "u.onnx")
    info = run(stax_bin, "info", tmp_path / "u.onnx")
    assert info.returncode == 1
    assert "Det" in info.stdout and "'det1'" in info.stdout and "'det2'" in info.stdout
    assert "GRU" in info.stdout
    r = run(stax_bin, "run", tmp_path / "u.onnx", "-i", f"x={tmp_path / 'x.npy'}")
    assert r.returncode == 1 and "Det" in r.stderr and "GRU" in r.stderr


def npy_bytes(header, payload=b""):
    """A version 1.0 .npy image with this header dict text (padded as numpy pads it)."""
    text = header.encode() + b" "
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + payload


@pytest.mark.parametrize("content,needle", [
    (b"not an npy file at all", "bad magic"),
    (npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", bytes(8)),
     "big-endian"),
    (npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (9,), }", bytes(8)),
     "truncated"),
    (npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", bytes(8)),
     "unsupported .npy dtype"),
], ids=["magic", "big-endian", "truncated", "object"])
def test_bad_npy_inputs(stax_bin, tmp_path, content, needle):
    model = identity_model(tmp_path / "m.onnx", TensorProto.FLOAT, shape=("N",))
    (tmp_path / "x.npy").write_bytes(content)
    r = run(stax_bin, "run", model, "-i", f"x={tmp_path / 'x.npy'}")
    assert r.returncode == 1
    assert needle in r.stderr and "input 'x'" in r.stderr


def test_usage_errors(stax_bin, tmp_path):
    model = identity_model(tmp_path / "m.onnx", TensorProto.FLOAT)
    assert run(stax_bin, "run").returncode == 2
    assert run(stax_bin, "run", model, "--repeat", "0").returncode == 2
    r = run(stax_bin, "run", model)
    assert r.returncode == 1 and "input 'x' is missing" in r.stderr
    r = run(stax_bin, "run", model, "-i", f"nope={tmp_path / 'x.npy'}")
    assert r.returncode == 1 and "no input named 'nope'" in r.stderr
    for verb in ("run", "compile", "info", "dis"):
        r = run(stax_bin, verb, "--help")
        assert r.returncode == 0 and f"usage: stax {verb}" in r.stdout


def test_repeat_reports_time_per_call(stax_bin, tmp_path):
    model = identity_model(tmp_path / "m.onnx", TensorProto.FLOAT)
    np.save(tmp_path / "x.npy", np.ones((2, 2), np.float32))
    r = run(stax_bin, "run", model, "-i", f"x={tmp_path / 'x.npy'}", "--repeat", "5")
    assert r.returncode == 0 and "5 calls: median" in r.stderr


def test_output_folder_parents_are_created(stax_bin, tmp_path):
    model = identity_model(tmp_path / "m.onnx", TensorProto.FLOAT)
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    out = tmp_path / "a" / "b" / "c"
    r = run(stax_bin, "run", model, "-i", f"x={tmp_path / 'x.npy'}", "-o", out)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(out / "y_out_0.npy"), np.ones((2, 3), np.float32))
    (tmp_path / "file").write_text("")
    r = run(stax_bin, "run", model, "-i", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "file")
    assert r.returncode == 1 and "not a folder" in r.stderr
