"""The JIT tier through the Python API: compile(jit='sync') gives the interpreter's answers over
alternating shapes, Kernel.stats reports real hits and compiles, Kernel.source holds the
generated LLVM IR, jit='off' keeps everything interpreted, and bad modes are refused."""
import numpy as np
import pytest

from test_api_support import stax

RNG = np.random.default_rng(7)

SHAPES = [(2, 8), (5, 8), (2, 8), (5, 8), (3, 8), (2, 8), (5, 8), (3, 8), (3, 8)]


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def make(jit):
    S = stax.symbol("S", max=1000)
    x = stax.placeholder([S, 8], name="x")
    y = stax.placeholder([S, 8], name="y")
    return stax.compile(stax.tanh(x * y + 1.5) - stax.relu(x) * 0.25, jit=jit)


def run_shapes(kernel, inputs):
    return [kernel(a, b) for a, b in inputs]


def test_sync_matches_off_over_alternating_shapes():
    inputs = [(rand(*s), rand(*s)) for s in SHAPES]
    off = make("off")
    sync = make("sync")
    expected = run_shapes(off, inputs)
    got = run_shapes(sync, inputs)
    for (a, b), e, g in zip(inputs, expected, got):
        assert g.shape == e.shape == a.shape
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(e, np.tanh(a * b + 1.5) - np.maximum(a, 0) * 0.25,
                                   rtol=1e-5, atol=1e-5)
    stats = sync.stats
    assert stats["jit"] is True and stats["jit_mode"] == "sync"
    assert stats["compiles"] >= 1
    assert stats["hits"] > 0
    # One shape-generic version, compiled at the first call, serves every S: no call
    # interpreted, no exact version needed.
    assert stats["generic_versions"] == 1 and stats["exact_versions"] == 0
    assert stats["compiles"] == 1 and stats["misses"] == 0
    assert stats["full_hits"] == stats["hits"] == len(SHAPES)
    assert stats["calls"] == {"compiled": len(SHAPES), "partial": 0, "interpreted": 0}
    assert stats["generic_compile_s"] > 0.0 and stats["exact_compile_s"] == 0.0
    assert stats["failures"] >= 0 and stats["evictions"] >= 0
    assert stats["compile_time_s"] > 0.0
    assert stats["runs"] == len(SHAPES)
    segments = stats["jit_segments"]
    assert len(segments) == len(stats["segment_counts"]) >= 1
    assert sum(s["hits"] for s in segments) == stats["hits"]
    assert sum(s["compiles"] for s in segments) == stats["compiles"]
    assert {"entries", "hits", "full_hits", "partial_hits", "misses", "compiles", "failures",
            "evictions", "compile_ms", "versions", "signatures", "generic_versions",
            "exact_versions", "generic_compile_ms", "exact_compile_ms"} <= set(segments[0])
    assert max(s["versions"] for s in segments) >= 1


def test_exact_only_policy_compiles_per_shape(monkeypatch):
    """STAX_JIT_GENERIC=0: the exact-shape policy, one version per shape seen twice."""
    monkeypatch.setenv("STAX_JIT_GENERIC", "0")
    sync = make("sync")
    inputs = [(rand(*s), rand(*s)) for s in SHAPES]
    for (a, b), g in zip(inputs, run_shapes(sync, inputs)):
        np.testing.assert_allclose(g, np.tanh(a * b + 1.5) - np.maximum(a, 0) * 0.25,
                                   rtol=1e-5, atol=1e-5)
    stats = sync.stats
    assert stats["generic_versions"] == 0 and stats["exact_versions"] == 3
    assert stats["calls"]["interpreted"] >= 3  # each shape's first call
    assert stats["calls"]["compiled"] + stats["calls"]["interpreted"] == len(SHAPES)


def test_source_after_sync_run():
    k = make("sync")
    assert k.jit == "sync"
    assert k.source is None and "no kernel has been compiled" in k.source_unavailable_reason
    a, b = rand(4, 8), rand(4, 8)
    for _ in range(4):
        k(a, b)
    text = k.source
    assert text is not None and "define" in text
    assert k.source_unavailable_reason is None
    asm = k.source_asm
    assert asm is not None and asm.strip() and asm != text


def test_off_has_no_source_and_no_compiles():
    k = make("off")
    a, b = rand(3, 8), rand(3, 8)
    for _ in range(5):
        k(a, b)
    assert k.jit == "off"
    assert k.source is None and k.source_asm is None
    assert "off" in k.source_unavailable_reason
    stats = k.stats
    assert stats["jit"] is False and stats["jit_mode"] == "off"
    assert stats["compiles"] == stats["hits"] == stats["failures"] == 0
    assert stats["compile_time_s"] == 0.0
    assert k.drain() is k


def test_background_default_drains_and_agrees():
    k = make("on")
    off = make("off")
    assert k.jit == "on" and k.stats["jit"] is True
    a, b = rand(6, 8), rand(6, 8)
    expected = off(a, b)
    for _ in range(3):
        np.testing.assert_allclose(k(a, b), expected, rtol=1e-5, atol=1e-5)
    k.drain()
    for _ in range(3):
        np.testing.assert_allclose(k(a, b), expected, rtol=1e-5, atol=1e-5)
    stats = k.stats
    assert stats["compiles"] + stats["failures"] >= 1
    if stats["compiles"]:
        # Background compiles may keep no text (then source is None and the reason says so).
        assert (k.source is not None and "define" in k.source) or \
            "jit='sync'" in k.source_unavailable_reason
    # The default is the background JIT, as on the command line.
    S = stax.symbol("S")
    assert stax.compile(stax.placeholder([S], name="z") * 2).jit == "on"


@pytest.mark.parametrize("bad", ["fast", "ON", "", None, True, 1])
def test_bad_jit_value_raises(bad):
    x = stax.placeholder([4], name="x")
    with pytest.raises(ValueError, match="jit must be"):
        stax.compile(x + 1, jit=bad)


def test_load_model_jit_modes():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = RNG.standard_normal((8, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
         helper.make_node("Add", ["t", "h"], ["y"])], "jit_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(w, "w")])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = data.SerializeToString()
    off = stax.load(data, jit="off")
    sync = stax.load(data, jit="sync")
    assert off.jit == "off" and sync.jit == "sync" and stax.load(data).jit == "on"
    for n in (3, 5, 3, 5, 3, 5):
        x = rand(n, 8)
        np.testing.assert_allclose(sync(x=x)["y"], off(x=x)["y"], rtol=1e-5, atol=1e-5)
    assert off.stats["compiles"] == 0 and off.source is None
    stats = sync.stats
    assert stats["jit"] is True and stats["runs"] == 6
    assert stats["compiles"] + stats["failures"] >= 1
    with pytest.raises(ValueError, match="jit must be"):
        stax.load(data, jit="always")
