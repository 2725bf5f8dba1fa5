"""`stax run --stats-json`'s per-call log and `stax report`, which plots it: the log agrees with
the library's own counters (how calls ran, compiles), the plotted numbers agree with the log,
and the PNG is a valid PNG of the figure's size that shows the calls' colours. Error paths:
files without a log, not JSON, malformed, missing matplotlib, bad arguments."""
import json
import os
import pathlib
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

from stax import _report

REPO = pathlib.Path(__file__).resolve().parents[2]
onnx = pytest.importorskip("onnx", reason="onnx is needed to write the test model")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    w = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
        "report_test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 32])],
        [numpy_helper.from_array(w, "w")])
    path = tmp_path_factory.mktemp("report") / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def run_stats(stax_bin, model, tmp_path, *args):
    stats = tmp_path / "stats.json"
    env = dict(os.environ, STAX_JIT_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([stax_bin, "run", str(model), "--shape", "x=2x32", "--shape", "x=5x32",
                        "--stats-json", str(stats), *args], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    return stats, json.loads(stats.read_text())


def test_the_per_call_log_agrees_with_the_counters(stax_bin, model, tmp_path):
    path, stats = run_stats(stax_bin, model, tmp_path, "--jit", "sync", "--warmup", "3",
                            "--repeat", "20")
    log = stats["per_call"]
    assert log["calls"] == 23 and log["dropped"] == 0 and len(log["records"]) == 23
    _, calls = _report.read_calls(path)
    assert list(calls["warmup"]) == [True] * 3 + [False] * 20
    for how in ("compiled", "partial", "interpreted"):
        assert int((calls["ran"] == how).sum()) == stats["calls"][how]
    total = stats["total"]
    assert calls["compiles"].sum() == total["compiles"] + total["failures"]
    assert calls["compile_ms"].sum() == pytest.approx(total["compile_ms"], abs=0.01)
    # Sync mode: the first call compiles the shape-generic version, which B=5 shares.
    assert calls["compiles"][0] >= 1 and calls["compiles"][1:].sum() == 0
    assert calls["ran"][0] == "compiled" and (calls["ran"] == "compiled").all()
    assert (np.diff(calls["start_s"]) >= calls["seconds"][:-1] - 1e-9).all()  # in order
    assert calls["start_s"][0] == 0 and (calls["seconds"] > 0).all()


def test_without_the_jit_every_call_is_interpreted(stax_bin, model, tmp_path):
    path, stats = run_stats(stax_bin, model, tmp_path, "--jit", "off", "--repeat", "6")
    _, calls = _report.read_calls(path)
    assert list(calls["ran"]) == ["interpreted"] * 6 and calls["compiles"].sum() == 0
    data = _report.plot_data(stats, calls)
    assert data["compile_calls"] == [] and data["counts"]["interpreted"] == 6


def synthetic(ran, compiles, warmup=0):
    records = [[0.001 * i, 0.0005 * (1 + (h == "interpreted")), h, c, 2.5 * c, i < warmup]
               for i, (h, c) in enumerate(zip(ran, compiles))]
    return {"total": {"compiles": sum(compiles) + 2, "failures": 0},
            "per_call": {"calls": len(records), "dropped": 0,
                         "fields": ["start_s", "seconds", "ran", "compiles", "compile_ms",
                                    "warmup"], "records": records}}


def test_the_plotted_numbers(tmp_path):
    ran = ["interpreted"] * 6 + ["partial"] * 4 + ["compiled"] * 10
    compiles = [0] * 5 + [2] + [0] * 3 + [1] + [0] * 10
    path = tmp_path / "s.json"
    path.write_text(json.dumps(synthetic(ran, compiles, warmup=2)))
    stats, calls = _report.read_calls(path)
    data = _report.plot_data(stats, calls, window=4)
    assert data["compile_calls"] == [(5, 2, 5.0), (9, 1, 2.5)]
    assert data["counts"] == {"compiled": 10, "partial": 4, "interpreted": 6}
    assert data["compiles_during"] == 3 and data["compiles_after"] == 2
    np.testing.assert_allclose(data["latency_ms"][:2], [1.0, 1.0])
    shares = data["shares"]
    np.testing.assert_allclose(sum(shares.values()), np.ones(20))
    # The trailing window of 4: call 7 sees calls 4..7 (2 interpreted, 2 partial); the first
    # calls see fewer than 4.
    assert shares["interpreted"][7] == 0.5 and shares["partial"][7] == 0.5
    assert shares["interpreted"][0] == 1.0 and shares["compiled"][19] == 1.0
    assert shares["compiled"][11] == 0.5
    with pytest.raises(_report.ReportError, match="window"):
        _report.plot_data(stats, calls, window=0)


def png_chunks(data):
    """The chunks of a PNG, each CRC checked; raises AssertionError for anything else."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        chunks.append((kind, body))
        at += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    return chunks


def test_stax_report_writes_a_png_of_the_run(stax_bin, model, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install "
                                             "matplotlib): stax report cannot draw")
    import matplotlib.image
    path, _ = run_stats(stax_bin, model, tmp_path, "--jit", "sync", "--repeat", "30")
    out = tmp_path / "plot.png"
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    r = subprocess.run([sys.executable, "-m", "stax", "report", str(path), "-o", str(out),
                        "--title", "test run"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {out}: 30 calls (30 compiled, 0 partly, 0 interpreted)")
    chunks = png_chunks(out.read_bytes())
    width, height = struct.unpack(">II", chunks[0][1][:8])
    assert (width, height) == (11 * 110, 7 * 110)
    pixels = matplotlib.image.imread(out)[..., :3]
    green = np.array([0x2a, 0x9d, 0x3a]) / 255  # the compiled calls' colour
    assert (np.abs(pixels - green).max(axis=-1) < 0.02).sum() > 1000
    # The default output is the stats file with .png.
    assert _report.main([str(path)]) == 0 and path.with_suffix(".png").exists()


def test_stax_report_refuses_what_it_cannot_plot(tmp_path, capsys, stax_bin):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"segments": [], "total": {}, "calls": {}}))
    assert _report.main([str(old)]) == 1
    assert "has no per-call log ('per_call')" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert _report.main([str(bad)]) == 1
    assert "is not JSON" in capsys.readouterr().err
    assert _report.main([str(tmp_path / "missing.json")]) == 1
    assert "cannot read" in capsys.readouterr().err
    broken = synthetic(["compiled"], [0])
    broken["per_call"]["records"][0][2] = "fast"
    bad.write_text(json.dumps(broken))
    assert _report.main([str(bad)]) == 1
    assert "per_call record 0 is malformed" in capsys.readouterr().err
    empty = synthetic([], [])
    bad.write_text(json.dumps(empty))
    assert _report.main([str(bad)]) == 1 and "recorded no calls" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        _report.main([])
    assert exit_.value.code == 2
    # The C program points to the Python package's command.
    r = subprocess.run([stax_bin, "report", str(old)], capture_output=True, text=True)
    assert r.returncode == 2 and "python -m stax report FILE" in r.stderr


def test_without_matplotlib_the_error_says_what_to_install(tmp_path, capsys, monkeypatch):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(synthetic(["compiled"] * 3, [1, 0, 0])))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises
    assert _report.main([str(path)]) == 1
    assert "pip install matplotlib" in capsys.readouterr().err
    assert not path.with_suffix(".png").exists()
