"""The JIT tier through the command line: --jit modes give the interpreter's answers,
--stats-json reports hits and compiles, STAX_JIT_VERIFY=1 cross-checks every compiled segment,
and `stax source` prints the generated LLVM IR."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import models  # noqa: E402


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)


def setup_s1(tmp_path):
    onnx.save(models.seed_mlp(), tmp_path / "s1.onnx")
    rng = np.random.default_rng(1)
    args = []
    for i, (batch, seq) in enumerate([(4, 6), (3, 9)]):
        feeds = models.seed_inputs(rng, batch, seq)
        for name, value in feeds.items():
            np.save(tmp_path / f"{name}{i}.npy", value)
            args += ["-i", f"{name}={tmp_path / f'{name}{i}.npy'}"]
    return tmp_path / "s1.onnx", args


def test_jit_modes_agree_with_interpreter(stax_bin, tmp_path):
    model, inputs = setup_s1(tmp_path)
    outputs = {}
    for mode in ("off", "sync", "on"):
        out = tmp_path / f"out_{mode}"
        # 5 calls cycle through the two shapes; the last call is shape 0 again.
        r = run(stax_bin, "run", model, *inputs, "--repeat", "5", f"--jit={mode}", "-o", out,
                "--stats-json", tmp_path / f"stats_{mode}.json")
        assert r.returncode == 0, r.stderr
        outputs[mode] = np.load(out / "y.npy")
    np.testing.assert_allclose(outputs["sync"], outputs["off"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outputs["on"], outputs["off"], rtol=1e-4, atol=1e-5)
    stats = json.loads((tmp_path / "stats_sync.json").read_text())
    text = json.dumps(stats)
    assert "hits" in text and "compiles" in text
    # The buffer pool: the compiled segment's values come from it, and every buffer taken
    # went back (outputs were written and dropped) or is still live.
    pool = stats["pool"]
    assert pool["hits"] + pool["misses"] >= 5
    assert pool["returns"] <= pool["hits"] + pool["misses"]
    assert pool["peak_live_bytes"] >= pool["live_bytes"]
    assert pool["peak_live_bytes"] > 0
    assert pool["limit"] == max(256 << 20, 2 * pool["peak_live_bytes"])


def test_jit_verify_mode(stax_bin, tmp_path):
    model, inputs = setup_s1(tmp_path)
    env = dict(os.environ, STAX_JIT_VERIFY="1")
    r = run(stax_bin, "run", model, *inputs, "--repeat", "6", "--jit=sync", env=env)
    assert r.returncode == 0, r.stderr


def test_compile_failure_falls_back(stax_bin, tmp_path):
    model, inputs = setup_s1(tmp_path)
    env = dict(os.environ, STAX_JIT_FAIL_COMPILE="1")
    r = run(stax_bin, "run", model, *inputs, "--repeat", "4", "--jit=sync", "-o",
            tmp_path / "out_fail", env=env)
    assert r.returncode == 0, r.stderr
    r = run(stax_bin, "run", model, *inputs, "--repeat", "4", "--jit=off", "-o",
            tmp_path / "out_off")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out_fail" / "y.npy"),
                                  np.load(tmp_path / "out_off" / "y.npy"))


def test_source_prints_llvm_ir(stax_bin, tmp_path):
    model, _ = setup_s1(tmp_path)
    r = run(stax_bin, "source", model, "--shape", "x=2x3x64", "--shape", "mask=2x3")
    assert r.returncode == 0, r.stderr
    assert "define" in r.stdout
    r = run(stax_bin, "source", model, "--shape", "x=2x3x64", "--shape", "mask=2x3", "--asm")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    r = run(stax_bin, "source", model, "--shape", "x=2x3")
    assert r.returncode != 0 and r.stderr.strip()


def test_missing_jit_backend_warns_once(stax_bin, tmp_path):
    # STAX_JIT_BACKEND=none is how a build without LLVM starts: every call interprets, and the
    # user is told so once, not once per call; the answers are the interpreter's.
    model, inputs = setup_s1(tmp_path)
    env = dict(os.environ, STAX_JIT_BACKEND="none")
    r = run(stax_bin, "run", model, *inputs, "--repeat", "5", "--jit=sync", "-o",
            tmp_path / "none", "--stats-json", tmp_path / "none.json", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("the JIT is unavailable, so every call is interpreted") == 1, r.stderr
    assert "STAX_JIT_BACKEND=none" in r.stderr
    calls = json.loads((tmp_path / "none.json").read_text())["calls"]
    assert calls["compiled"] == 0 and calls["partial"] == 0 and calls["interpreted"] == 5
    r = run(stax_bin, "run", model, *inputs, "--repeat", "5", "--jit=off", "-o", tmp_path / "off")
    assert r.returncode == 0 and "JIT is unavailable" not in r.stderr, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "none" / "y.npy"),
                                  np.load(tmp_path / "off" / "y.npy"))


def test_stats_json_on_stdout_is_the_json_alone(stax_bin, tmp_path):
    """`--stats-json -`: stdout parses as one JSON document; the outputs' summary moves to
    stderr."""
    model, inputs = setup_s1(tmp_path)
    r = run(stax_bin, "run", model, *inputs, "--repeat", "2", "--jit=off", "--stats-json", "-")
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    assert stats["per_call"]["calls"] == 2
    assert "y: float32[" in r.stderr
    assert "y: float32[" not in r.stdout


def test_compiled_calls_allocate_nothing_in_steady_state(stax_bin, tmp_path):
    """Compiled segments take their values from the buffer pool (docs/memory.md): once the
    shapes of a stream have been seen, every call is served by pool hits, so 25 calls cycling
    two shapes miss exactly as often as 5 do (no malloc, no fresh pages)."""
    model, inputs = setup_s1(tmp_path)
    pools = {}
    for repeat in (5, 25):
        r = run(stax_bin, "run", model, *inputs, "--repeat", str(repeat), "--jit=sync",
                "--stats-json", "-")
        assert r.returncode == 0, r.stderr
        stats = json.loads(r.stdout)
        assert stats["calls"]["compiled"] >= repeat - 2, stats["calls"]
        pools[repeat] = stats["pool"]
    assert pools[25]["misses"] == pools[5]["misses"], pools
    assert pools[25]["hits"] > pools[5]["hits"], pools
    assert pools[25]["evictions"] == 0 and pools[25]["live_bytes"] == 0, pools


def test_compiled_values_live_only_while_read(stax_bin, tmp_path):
    """A compiled segment allocates each value just before the group that writes it and frees
    it after the last group that reads it (docs/jit.md, "Tiering"): a chain of five MatMul +
    Relu groups holds at most two of its [64, 256] values at once, not all five, and gives
    the interpreter's answers."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    nodes, inits, prev = [], [], "x"
    for i in range(5):
        w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"h{i}" if i < 4 else "y"]))
        prev = f"h{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 256])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "chain.onnx")
    np.save(tmp_path / "x.npy", rng.standard_normal((64, 256)).astype(np.float32))
    outputs = {}
    for mode in ("off", "sync"):
        r = run(stax_bin, "run", tmp_path / "chain.onnx", "-i", f"x={tmp_path / 'x.npy'}",
                "--repeat", "4", f"--jit={mode}", "-o", tmp_path / mode,
                "--stats-json", tmp_path / f"{mode}.json")
        assert r.returncode == 0, r.stderr
        outputs[mode] = np.load(tmp_path / mode / "y.npy")
    np.testing.assert_allclose(outputs["sync"], outputs["off"], rtol=1e-4, atol=1e-5)
    stats = json.loads((tmp_path / "sync.json").read_text())
    assert stats["calls"]["compiled"] >= 2, stats["calls"]
    value_bytes = 64 * 256 * 4
    assert stats["pool"]["peak_live_bytes"] >= 2 * value_bytes, stats["pool"]
    assert stats["pool"]["peak_live_bytes"] <= 2 * value_bytes, stats["pool"]
