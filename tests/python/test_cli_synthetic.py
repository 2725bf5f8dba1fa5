"""`stax run` without .npy files: --shape / --shape-range synthetic inputs (--fill, --seed),
--repeat / --duration / --warmup / --threads and the timing report, models recognised by
content, and "did you mean" for mistyped commands and options."""
import pathlib
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import models  # noqa: E402


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)


def identity_model(path, elem_type, shape):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "identity",
        [helper.make_tensor_value_info("x", elem_type, list(shape))],
        [helper.make_tensor_value_info("y", elem_type, list(shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture
def s1(tmp_path):
    """The seed MLP: x float32[B, S, 64], mask bool[B, S]."""
    path = tmp_path / "s1.onnx"
    onnx.save(models.seed_mlp(), path)
    return path


def shape_rows(stderr):
    """{shape key: calls} from the per-shape table of the report."""
    rows = {}
    for line in stderr.splitlines():
        m = re.match(r"  (\S+(?: \S+=\S+)*)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)$", line)
        if m and "=" in m.group(1):
            rows[m.group(1)] = int(m.group(2))
    return rows


def report(stderr):
    m = re.search(r"(\d+) calls: median ([0-9.]+) ms, min ([0-9.]+) ms, max ([0-9.]+) ms", stderr)
    assert m, stderr
    p = re.search(r"p50 ([0-9.]+) ms, p90 ([0-9.]+) ms, p99 ([0-9.]+) ms, p99\.9 ([0-9.]+) ms; "
                  r"mean ([0-9.]+) ms; ([0-9.]+) calls/s", stderr)
    assert p, stderr
    calls = int(m.group(1))
    median, low, high = (float(v) for v in m.groups()[1:])
    p50, p90, p99, p999, mean, rate = (float(v) for v in p.groups())
    return dict(calls=calls, median=median, min=low, max=high, p50=p50, p90=p90, p99=p99,
                p999=p999, mean=mean, rate=rate)


def test_shape_cycles_and_reports_per_shape(stax_bin, s1, tmp_path):
    r = run(stax_bin, "run", s1, "--shape", "x=2x3x64", "--shape", "mask=2x3", "--shape",
            "x=4x5x64", "--shape", "mask=4x5", "--repeat", "5", "--jit", "off", "-o",
            tmp_path / "out")
    assert r.returncode == 0, r.stderr
    # Calls cycle 0, 1, 0, 1, 0: the outputs are the last call's.
    assert np.load(tmp_path / "out" / "y.npy").shape == (2, 3, 64)
    assert shape_rows(r.stderr) == {"x=2x3x64 mask=2x3": 3, "x=4x5x64 mask=4x5": 2}
    t = report(r.stderr)
    assert t["calls"] == 5
    assert t["min"] <= t["p50"] <= t["p90"] <= t["p99"] <= t["p999"] <= t["max"]
    assert t["min"] <= t["mean"] <= t["max"]
    # The lines bench/s1.py, bench/s6.py and scripts/demo.py parse are still there.
    assert re.search(r"first call ([0-9.]+) ms; last \d+ calls: median ([0-9.]+) ms", r.stderr)


def test_shape_range_is_seeded_and_shares_symbols(stax_bin, s1):
    # At most 8 shapes: every one gets a row (the table keeps the 20 most frequent).
    args = [stax_bin, "run", s1, "--shape-range", "x=1..2x2..5x64", "--shape-range",
            "mask=1..2x2..5", "--repeat", "40", "--jit", "off"]
    first = run(*args, "--seed", "7")
    again = run(*args, "--seed", "7")
    other = run(*args, "--seed", "8")
    for r in (first, again, other):
        # x and mask share B and S in the model: each call draws them once for both inputs
        # (independent draws would fail the model's guards).
        assert r.returncode == 0, r.stderr
    rows = shape_rows(first.stderr)
    assert sum(rows.values()) == 40 and len(rows) >= 5
    assert rows == shape_rows(again.stderr)
    assert rows != shape_rows(other.stderr)
    for key in rows:
        m = re.fullmatch(r"x=(\d+)x(\d+)x64 mask=(\d+)x(\d+)", key)
        b, s, mb, ms = map(int, m.groups())
        assert (b, s) == (mb, ms) and 1 <= b <= 2 and 2 <= s <= 5


def test_shape_table_keeps_the_most_frequent_shapes(stax_bin, s1):
    r = run(stax_bin, "run", s1, "--shape-range", "x=1..8x1..64x64", "--shape-range",
            "mask=1..8x1..64", "--repeat", "60", "--jit", "off")
    assert r.returncode == 0, r.stderr
    rows = shape_rows(r.stderr)
    total = int(re.search(r"(\d+) shapes:", r.stderr).group(1))
    more = re.search(r"\.\.\. (\d+) more shapes \((\d+) calls\)", r.stderr)
    assert len(rows) == 20 and more and int(more.group(1)) == total - 20
    assert sum(rows.values()) + int(more.group(2)) == 60


def test_shape_range_narrowed_by_fixed_dims(stax_bin, s1):
    # mask fixes B = 3 and S = 5 for every call; x's ranges must include them.
    r = run(stax_bin, "run", s1, "--shape-range", "x=1..4x2..9x64", "--shape", "mask=3x5",
            "--repeat", "6", "--jit", "off")
    assert r.returncode == 0, r.stderr
    assert shape_rows(r.stderr) == {"x=3x5x64 mask=3x5": 6}
    r = run(stax_bin, "run", s1, "--shape-range", "x=1..4x6..9x64", "--shape", "mask=3x5")
    assert r.returncode == 1
    assert "the model's S has one value per call" in r.stderr and "x=1..4x6..9x64" in r.stderr


def test_fill_zeros_and_random(stax_bin, tmp_path):
    model = identity_model(tmp_path / "f.onnx", TensorProto.FLOAT, ["N", 1000])
    outs = {}
    for name, extra in [("zeros", ["--fill", "zeros"]), ("r1", []), ("r1b", ["--seed", "0"]),
                        ("r2", ["--seed", "2"])]:
        r = run(stax_bin, "run", model, "--shape", "x=50x1000", *extra, "-o", tmp_path / name)
        assert r.returncode == 0, r.stderr
        outs[name] = np.load(tmp_path / name / "y.npy")
    assert outs["zeros"].shape == (50, 1000) and not outs["zeros"].any()
    np.testing.assert_array_equal(outs["r1"], outs["r1b"])  # seed 0 is the default
    assert not np.array_equal(outs["r1"], outs["r2"])
    values = outs["r1"].ravel()
    assert abs(values.mean()) < 0.02 and abs(values.std() - 1) < 0.02  # normal(0, 1)
    assert len(np.unique(values)) > 40000


@pytest.mark.parametrize("elem_type,dtype", [(TensorProto.INT64, np.int64),
                                             (TensorProto.UINT8, np.uint8),
                                             (TensorProto.BOOL, np.bool_),
                                             (TensorProto.FLOAT16, np.float16)])
def test_fill_random_other_dtypes(stax_bin, tmp_path, elem_type, dtype):
    model = identity_model(tmp_path / "m.onnx", elem_type, ["N"])
    r = run(stax_bin, "run", model, "--shape", "x=5000", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "out" / "y.npy")
    assert y.dtype == dtype and y.shape == (5000,)
    if dtype == np.bool_:
        assert 2000 < y.sum() < 3000
    elif dtype == np.float16:
        assert abs(float(y.astype(np.float32).mean())) < 0.1
    else:
        assert set(np.unique(y).tolist()) == set(range(10))  # small ints: 0..9


def test_scalar_shape(stax_bin, tmp_path):
    model = identity_model(tmp_path / "m.onnx", TensorProto.FLOAT, [])
    r = run(stax_bin, "run", model, "--shape", "x=", "--fill", "zeros")
    assert r.returncode == 0, r.stderr
    assert "y: float32[]" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["--shape", "x=2x3y64"], "unexpected 'y' after dim 1"),
    (["--shape", "x=2x-3"], "does not start with a dim"),
    (["--shape", "x2x3"], "expected NAME=DIMxDIM"),
    (["--shape", "x=2x3x"], "ends with 'x'"),
    (["--shape-range", "x=8..1x3x64"], "range 8..1 is empty"),
    (["--shape-range", "x=1..x3x64"], "needs a number after '..'"),
    (["--shape", "x=1..2x3x64"], "unexpected '.'"),  # ranges only in --shape-range
    (["--shape", "x=99999999999999x1"], "too large"),
    (["--fill", "ones"], "--fill needs random or zeros"),
    (["--seed", "-1"], "--seed needs a non-negative integer"),
    (["--duration", "0"], "--duration needs seconds above 0"),
    (["--duration", "nan"], "--duration needs seconds above 0"),
    (["--warmup", "x"], "--warmup needs a count"),
    (["--threads", "0"], "--threads needs a count from 1"),
    (["--shape"], "--shape needs a value"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_usage_errors(stax_bin, s1, args, needle):
    r = run(stax_bin, "run", s1, *args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "stax run:" in r.stderr


def test_run_errors(stax_bin, s1):
    r = run(stax_bin, "run", s1, "--shape", "x=2x3x64")
    assert r.returncode == 1
    assert ("input 'mask' is missing (give -i mask=FILE, --shape mask=DIMS or --shape-range "
            "mask=RANGES; the model says mask: bool[B, S])") in r.stderr
    # A zero dim where the model says B >= 1: the model's guards give the error.
    r = run(stax_bin, "run", s1, "--shape", "x=0x3x64", "--shape", "mask=0x3")
    assert r.returncode == 1 and 'input "x" dim 0 gives B = 0, outside its range' in r.stderr
    r = run(stax_bin, "run", s1, "--shape", "x=2x3x32", "--shape", "mask=2x3")
    assert r.returncode == 1 and 'input "x" dim 2 is 32, but the model says 64' in r.stderr
    r = run(stax_bin, "run", s1, "--shape", "x=2x3x64", "--shape", "mask=2x3", "--shape", "z=1")
    assert r.returncode == 1 and "no input named 'z'" in r.stderr
    r = run(stax_bin, "run", s1, "--shape", "x=2x3", "--shape", "mask=2x3")
    assert r.returncode == 1 and "rank 2" in r.stderr


def test_duration_repeat_warmup_threads(stax_bin, s1):
    shapes = ["--shape", "x=2x3x64", "--shape", "mask=2x3", "--jit", "off"]
    r = run(stax_bin, "run", s1, *shapes, "--duration", "0.3")
    assert r.returncode == 0, r.stderr
    t = report(r.stderr)
    assert t["calls"] > 2
    # Both given: whichever limit comes first.
    r = run(stax_bin, "run", s1, *shapes, "--duration", "100", "--repeat", "3")
    assert r.returncode == 0 and report(r.stderr)["calls"] == 3
    r = run(stax_bin, "run", s1, *shapes, "--repeat", "4", "--warmup", "3", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "(after 3 untimed warm-up calls)" in r.stderr and report(r.stderr)["calls"] == 4
    # One call and nothing asked for: no report, as before.
    r = run(stax_bin, "run", s1, *shapes)
    assert r.returncode == 0 and "calls:" not in r.stderr


def test_warmup_calls_are_not_timed(stax_bin, s1):
    # With --jit=sync the first call compiles; after a warm-up call it is an ordinary one.
    shapes = ["--shape", "x=8x32x64", "--shape", "mask=8x32", "--jit", "sync",
              "--jit-threshold", "1"]
    cold = report(run(stax_bin, "run", s1, *shapes, "--repeat", "5").stderr)
    warm = report(run(stax_bin, "run", s1, *shapes, "--repeat", "5", "--warmup", "1").stderr)
    assert warm["max"] < cold["max"]


def test_models_recognised_by_content(stax_bin, s1, tmp_path):
    shapes = ["--shape", "x=2x3x64", "--shape", "mask=2x3"]
    onnx_bin = tmp_path / "model.bin"
    onnx_bin.write_bytes(s1.read_bytes())
    r = run(stax_bin, "run", onnx_bin, *shapes)
    assert r.returncode == 0, r.stderr
    info = run(stax_bin, "info", onnx_bin)
    assert info.returncode == 0 and "x: float32[B, S, 64]" in info.stdout
    # A saved program is known by its magic, even when named .onnx.
    assert run(stax_bin, "compile", s1, "-o", tmp_path / "prog.onnx").returncode == 0
    r = run(stax_bin, "run", tmp_path / "prog.onnx", *shapes)
    assert r.returncode == 0, r.stderr
    r = run(stax_bin, "compile", tmp_path / "prog.onnx", "-o", tmp_path / "again")
    assert r.returncode == 1 and "already a compiled program" in r.stderr
    (tmp_path / "notes.txt").write_text("not a model\n")
    for verb in ("run", "info", "dis"):
        r = run(stax_bin, verb, tmp_path / "notes.txt")
        assert r.returncode == 1, (verb, r.stderr)
        assert "notes.txt' is not a model: expected an ONNX model" in r.stderr
        assert "or a program saved by 'stax compile'" in r.stderr
    (tmp_path / "broken.onnx").write_text("not a model\n")
    r = run(stax_bin, "run", tmp_path / "broken.onnx")
    assert r.returncode == 1 and "is not a valid ModelProto" in r.stderr
    r = run(stax_bin, "run", tmp_path / "missing.onnx")
    assert r.returncode == 1 and "cannot open" in r.stderr and "missing.onnx" in r.stderr


def test_did_you_mean(stax_bin, s1):
    r = run(stax_bin, "rnu")
    assert r.returncode == 2
    assert "unknown command 'rnu'; did you mean 'run'?" in r.stderr
    r = run(stax_bin, "compil")
    assert "did you mean 'compile'?" in r.stderr
    r = run(stax_bin, "frobnicate")
    assert r.returncode == 2 and "did you mean" not in r.stderr
    for typo, meant in [("--shapes", "--shape"), ("--repat", "--repeat"),
                        ("--shape-rang", "--shape-range"), ("--thread", "--threads"),
                        ("--durration=2", "--duration"), ("--jit-treshold", "--jit-threshold")]:
        r = run(stax_bin, "run", s1, typo)
        assert r.returncode == 2
        assert f"unknown option '{typo}'; did you mean '{meant}'?" in r.stderr
    r = run(stax_bin, "run", s1, "--frobnicate")
    assert r.returncode == 2 and "unknown option '--frobnicate'" in r.stderr
    assert "did you mean" not in r.stderr
