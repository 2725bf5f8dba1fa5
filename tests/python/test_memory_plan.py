"""Memory planning (docs/memory.md) on bench/models.py's models: outputs with the plan on are
bit-identical to outputs with it off (STAX_MEMORY_PLAN=0, read when a context is created)
over random shapes, with the JIT off and on; k.stats['memory'] reports the arena, and a
steady-state call allocates nothing for its temporaries; prune_mlp's values after NonZero
fall back to the pool."""
import pathlib
import sys

import numpy as np
import onnx
import pytest

import stax

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import models  # noqa: E402


def _kernels(model, jit="off"):
    """(planned, unplanned) kernels of one model. Contexts are made at a kernel's first call,
    so each kernel runs once under its own setting of STAX_MEMORY_PLAN."""
    data = model.SerializeToString()
    on = stax.load(data, jit=jit)
    off = stax.load(data, jit=jit)
    return on, off


def _call(kernel, feeds, monkeypatch, planned):
    if planned:
        monkeypatch.delenv("STAX_MEMORY_PLAN", raising=False)
    else:
        monkeypatch.setenv("STAX_MEMORY_PLAN", "0")
    result = kernel.run(feeds)
    monkeypatch.delenv("STAX_MEMORY_PLAN", raising=False)
    if isinstance(result, dict):  # a loaded ONNX model returns outputs by name
        return tuple(result[name] for name in sorted(result))
    return result if isinstance(result, tuple) else (result,)


def _same(a, b):
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("jit", ["off", "sync"])
def test_transformer_layer(monkeypatch, jit):
    on, off = _kernels(models.transformer_layer(), jit)
    rng = np.random.default_rng(0)
    for batch, seq in [(1, 1), (2, 7), (3, 33), (1, 64), (2, 7), (2, 7)]:
        x = rng.standard_normal((batch, seq, 64)).astype(np.float32)
        _same(_call(on, {"x": x}, monkeypatch, True), _call(off, {"x": x}, monkeypatch, False))
    memory = on.stats["memory"]
    assert memory["planned"] and memory["planned_values"] > 0
    assert not off.stats["memory"]["planned"]
    if jit == "off":
        # Three calls at (2, 7) in a row: the last one reused the arena and the headers.
        assert memory["temp_allocations"] == 0 and memory["arena_grows"] == 0
        assert 0 < memory["arena_bytes"] < memory["temp_bytes"]
        assert memory["arena_peak_bytes"] >= memory["arena_bytes"]


def test_bert_layer(monkeypatch):
    on, off = _kernels(models.bert_layer())
    rng = np.random.default_rng(1)
    for batch, seq in [(1, 5), (2, 16), (1, 40)]:
        x = rng.standard_normal((batch, seq, 768)).astype(np.float32)
        _same(_call(on, {"x": x}, monkeypatch, True), _call(off, {"x": x}, monkeypatch, False))
    memory = on.stats["memory"]
    assert memory["inplace"] > 0 and memory["fallbacks"] == 0
    assert memory["arena_bytes"] * 2 < memory["temp_bytes"]


def test_seed_mlp(monkeypatch):
    on, off = _kernels(models.seed_mlp())
    rng = np.random.default_rng(2)
    for batch, seq in [(1, 3), (4, 17), (2, 64)]:
        feeds = models.seed_inputs(rng, batch, seq)
        _same(_call(on, feeds, monkeypatch, True), _call(off, feeds, monkeypatch, False))


def test_prune_mlp_falls_back_after_nonzero(monkeypatch):
    on, off = _kernels(models.prune_mlp())
    rng = np.random.default_rng(3)
    for n in [1, 5, 40, 300]:
        feeds = {"x": rng.standard_normal((n, 32)).astype(np.float32),
                 "scores": rng.standard_normal(n).astype(np.float32),
                 "k": np.array([min(3, n)], dtype=np.int64)}
        _same(_call(on, feeds, monkeypatch, True), _call(off, feeds, monkeypatch, False))
    memory = on.stats["memory"]
    assert memory["planned"]
    # Values sized by NonZero's count come from the pool.
    assert memory["temp_allocations"] > 0
