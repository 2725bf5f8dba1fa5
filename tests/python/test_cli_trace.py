"""`stax run --trace`: a Chrome trace-event file (every call, interpreted instruction, JIT
kernel run and compile, compiles on the compiler thread's own track in the background, the
cap and its note), and progress lines (forced with STAX_PROGRESS=1, absent otherwise)."""
import json
import os
import pathlib
import subprocess
import sys

import onnx
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import models  # noqa: E402

SHAPES = ["--shape", "x=4x16x64", "--shape", "mask=4x16"]


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)


@pytest.fixture
def s1(tmp_path):
    path = tmp_path / "s1.onnx"
    onnx.save(models.seed_mlp(), path)
    return path


def env(**extra):
    # No object cache: every compile compiles (and takes long enough to be seen).
    return dict(os.environ, STAX_JIT_CACHE="0", **extra)


def load_trace(path):
    trace = json.loads(pathlib.Path(path).read_text())
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    for e in events:
        assert e["ph"] in ("X", "M", "i"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["name"]
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            assert e["cat"] in ("call", "interpreter", "kernel", "compile")
            assert isinstance(e["args"], dict)
    return trace, [e for e in events if e["ph"] == "X"]


def by_cat(events, cat):
    return [e for e in events if e["cat"] == cat]


def inside(inner, outer):
    return (inner["tid"] == outer["tid"] and outer["ts"] <= inner["ts"] + 1e-3
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3)


def within(inner, outer):
    """inner's time span lies in outer's, on any thread."""
    return (outer["ts"] <= inner["ts"] + 1e-3
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3)


def test_trace_sync_jit(stax_bin, s1, tmp_path):
    out = tmp_path / "t.json"
    r = run(stax_bin, "run", s1, *SHAPES, "--jit", "sync", "--repeat", "3", "--trace", out,
            env=env())
    assert r.returncode == 0, r.stderr
    trace, events = load_trace(out)
    calls = by_cat(events, "call")
    assert [c["args"]["call"] for c in calls] == [0, 1, 2]
    assert trace["otherData"]["dropped_events"] == 0
    assert trace["otherData"]["events"] == len(events)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    # Sync compiles run on the calling thread and its pool's threads.
    assert "stax calls" in names and names <= {"stax calls", "stax pool (sync compile)"}
    interpreted = by_cat(events, "interpreter")
    guards = [e for e in interpreted if e["args"]["opcode"] == "JUMP_IF_SHAPE_UNMATCHED"]
    segment_calls = [e for e in interpreted if e["args"]["opcode"] == "CALL_FUNC"]
    assert len(guards) >= 3 and len(segment_calls) >= 2
    kernels = by_cat(events, "kernel")
    assert len(kernels) >= 2 * 2  # calls 1 and 2 run compiled
    for k in kernels:
        assert k["args"]["version"] in ("generic", "exact")
        assert isinstance(k["args"]["segment"], int) and isinstance(k["args"]["group"], int)
        # Kernels run inside the segment's CALL_FUNC, inside a call.
        assert any(inside(k, c) for c in calls) and any(inside(k, c) for c in segment_calls)
    compiles = by_cat(events, "compile")
    kernel_compiles = [c for c in compiles if c["name"].startswith("compile seg")]
    versions = [c for c in compiles if c["name"].startswith("compile segment")]
    assert kernel_compiles and versions
    assert all(c["args"]["outcome"] in ("compiled", "interpreted") for c in kernel_compiles)
    assert abs(kernel_compiles[0]["args"]["ms"] * 1e3 - kernel_compiles[0]["dur"]) < 1
    # A kernel's compile lies within its version's (on the calling thread or one of the
    # pool's), which lies inside the first call.
    assert all(any(within(k, v) for v in versions) for k in kernel_compiles)
    assert inside(versions[0], calls[0]) and inside(versions[0], guards[0])
    assert {k["name"] for k in kernels} <= {c["name"][len("compile "):] for c in kernel_compiles}


def test_trace_interpreter_names_ops_and_nodes(stax_bin, s1, tmp_path):
    out = tmp_path / "t.json"
    r = run(stax_bin, "run", s1, *SHAPES, "--jit", "off", "--repeat", "2", "--trace", out)
    assert r.returncode == 0, r.stderr
    _, events = load_trace(out)
    assert not by_cat(events, "kernel") and not by_cat(events, "compile")
    interpreted = by_cat(events, "interpreter")
    graph = models.seed_mlp().graph
    ops = {n.op_type for n in graph.node}
    matmuls = [e for e in interpreted if e["name"] == "MatMul"]
    assert len(matmuls) == 2 * sum(n.op_type == "MatMul" for n in graph.node)
    assert all(e["args"]["node"] and e["args"]["opcode"].startswith("MatMul") for e in matmuls)
    assert "LayerNormalization" in ops or any(e["name"] == "LayerNormalization" for e in interpreted)
    calls = by_cat(events, "call")
    assert len(calls) == 2
    assert all(any(inside(e, c) for c in calls) for e in interpreted)


def test_trace_background_compiles_on_their_own_track(stax_bin, s1, tmp_path):
    out = tmp_path / "t.json"
    r = run(stax_bin, "run", s1, *SHAPES, "--jit", "on", "--repeat", "2", "--trace", out,
            env=env())
    assert r.returncode == 0, r.stderr
    trace, events = load_trace(out)
    threads = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert set(threads) == {"stax calls", "stax jit compiler"}
    assert threads["stax calls"] != threads["stax jit compiler"]
    compiles = by_cat(events, "compile")
    assert compiles and all(c["tid"] == threads["stax jit compiler"] for c in compiles)
    assert all(c["tid"] == threads["stax calls"] for c in by_cat(events, "call"))


def test_trace_cap(stax_bin, s1, tmp_path):
    out = tmp_path / "t.json"
    r = run(stax_bin, "run", s1, *SHAPES, "--jit", "off", "--repeat", "5", "--trace", out,
            "--trace-max-events", "10")
    assert r.returncode == 0, r.stderr
    trace, events = load_trace(out)
    assert len(events) == 10
    other = trace["otherData"]
    assert other["max_events"] == 10 and other["dropped_events"] > 0
    assert "reached its cap of 10 events" in other["note"]
    assert [e for e in trace["traceEvents"] if e["ph"] == "i"][0]["name"] == "trace cap reached"


def test_trace_errors(stax_bin, s1, tmp_path):
    r = run(stax_bin, "run", s1, *SHAPES, "--trace-max-events", "10")
    assert r.returncode == 2 and "--trace-max-events needs --trace FILE" in r.stderr
    r = run(stax_bin, "run", s1, *SHAPES, "--trace", tmp_path / "no" / "such" / "t.json")
    assert r.returncode == 1 and "cannot write the trace" in r.stderr
    r = run(stax_bin, "run", s1, *SHAPES, "--trace")
    assert r.returncode == 2


def test_progress_lines(stax_bin, s1):
    args = [stax_bin, "run", s1, *SHAPES, "--jit", "sync"]
    r = run(*args, env=env(STAX_PROGRESS="1", STAX_PROGRESS_DELAY_MS="0"))
    assert r.returncode == 0, r.stderr
    assert "stax run: compiling " in r.stderr and " kernels for segment 0 (shape-generic " \
        "version) ... done in " in r.stderr
    # Not a terminal, nothing forced: nothing said.
    r = run(*args, env=env(STAX_PROGRESS_DELAY_MS="0"))
    assert r.returncode == 0 and "compiling" not in r.stderr
    r = run(*args, env=env(STAX_PROGRESS="0", STAX_PROGRESS_DELAY_MS="0"))
    assert r.returncode == 0 and "compiling" not in r.stderr
    # The default delay: a compile of the seed MLP's segment is shorter than half a second
    # on most machines, so no line is asserted either way; the run still succeeds.
    assert run(*args, env=env(STAX_PROGRESS="1")).returncode == 0
    # One call with the background JIT: its compile is still running at exit.
    r = run(stax_bin, "run", s1, *SHAPES, env=env(STAX_PROGRESS="1"))
    assert r.returncode == 0, r.stderr
    assert "stax run: waiting for 1 background compile to finish ... done in " in r.stderr
    r = run(stax_bin, "run", s1, *SHAPES, env=env())
    assert r.returncode == 0 and "waiting" not in r.stderr
