"""stax against ONNX Runtime on the same ONNX files, over several shapes each: a transformer
layer with dynamic batch and sequence, a small CNN with dynamic H/W, and a model with NonZero
+ Gather (data-dependent shapes) and TopK with a run-time k. Runs through `stax run`; the
transformer and the CNN also with --jit=sync, so the compared outputs come from JIT kernels
(MatMul / Conv with their epilogues, rows, elementwise chains)."""
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import models  # noqa: E402


def run_both(stax_bin, tmp_path, model, feeds, jit="on"):
    """jit="sync": three calls with inline compiles, so the outputs written (the last call's)
    come from the compiled kernels (threshold 2)."""
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    args = [stax_bin, "run", str(path), "-o", str(tmp_path / "out"), f"--jit={jit}"]
    if jit == "sync":
        args += ["--repeat", "3"]
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["-i", f"{name}={tmp_path / (name + '.npy')}"]
    result = subprocess.run(args, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    names = [o.name for o in session.get_outputs()]
    return {n: (np.load(tmp_path / "out" / f"{n}.npy"), e) for n, e in zip(names, expected)}


@pytest.mark.parametrize("jit", ["on", "sync"])
@pytest.mark.parametrize("batch,seq", [(1, 1), (2, 7), (4, 33), (3, 64), (1, 100)])
def test_transformer_layer(stax_bin, tmp_path, batch, seq, jit):
    rng = np.random.default_rng(batch * 1000 + seq)
    x = rng.standard_normal((batch, seq, 64)).astype(np.float32)
    for name, (got, want) in run_both(stax_bin, tmp_path, models.transformer_layer(),
                                      {"x": x}, jit).items():
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("jit", ["on", "sync"])
@pytest.mark.parametrize("n,h,w", [(1, 16, 16), (2, 20, 12), (1, 33, 17), (3, 8, 40)])
def test_small_cnn(stax_bin, tmp_path, n, h, w, jit):
    rng = np.random.default_rng(h * 100 + w)
    x = rng.standard_normal((n, 3, h, w)).astype(np.float32)
    for name, (got, want) in run_both(stax_bin, tmp_path, models.small_cnn(), {"x": x},
                                      jit).items():
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("n,k", [(10, 3), (50, 1), (7, 7), (1, 1), (64, 10)])
def test_nonzero_gather_topk(stax_bin, tmp_path, n, k):
    rng = np.random.default_rng(n * 10 + k)
    feeds = {"x": rng.standard_normal((n, 32)).astype(np.float32),
             "scores": rng.standard_normal(n).astype(np.float32),
             "k": np.array([k], dtype=np.int64)}
    for name, (got, want) in run_both(stax_bin, tmp_path, models.prune_mlp(), feeds).items():
        assert got.shape == want.shape, name
        assert got.dtype == want.dtype, name
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)


def test_shape_contradicting_model_is_an_error(stax_bin, tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(models.seed_mlp(), path)
    np.save(tmp_path / "x.npy", np.zeros((2, 3, 64), np.float32))
    np.save(tmp_path / "mask.npy", np.ones((2, 4), bool))  # S = 3 for x, 4 for mask
    result = subprocess.run([stax_bin, "run", str(path), "-i", f"x={tmp_path / 'x.npy'}",
                             "-i", f"mask={tmp_path / 'mask.npy'}"], capture_output=True,
                            text=True)
    assert result.returncode == 1
    assert "mask" in result.stderr and "dim 1" in result.stderr
