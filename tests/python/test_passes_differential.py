"""Each graph pass switched off alone, against the pipeline with it on, on the benchmark models
(a transformer layer, a BERT layer, a torch-style GPT-2 block, a ResNet-18; small sizes so
the interpreter is quick) over random shapes: the passes documented bit for bit give the same
bits, the two that round differently (fuse, bnfold) agree within float32 rounding.

The bit-for-bit comparisons run with fuse and bnfold off on both sides: with them on,
switching another pass off can keep a chain from fusing (a GELU whose constant `fold` has
not made yet), which changes the rounding, not the meaning."""
import os
import sys

import numpy as np
import pytest

from test_api_support import stax

pytest.importorskip("onnx")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import models  # noqa: E402

ROUNDING = ("fuse", "bnfold")
SHAPES = 8


def model_cases():
    return {
        "transformer": (models.transformer_layer(), lambda r: (int(r.integers(1, 4)), int(r.integers(1, 24)), 64)),
        "bert": (models.bert_encoder(hidden=64, heads=4, ffn=128), lambda r: (int(r.integers(1, 4)), int(r.integers(1, 24)), 64)),
        "gpt2": (models.gpt2_block(hidden=64, heads=4, positions=64), lambda r: (int(r.integers(1, 3)), int(r.integers(1, 33)), 64)),
        "cnn": (models.resnet18(classes=10), lambda r: (int(r.integers(1, 3)), 3, int(r.integers(16, 41)), int(r.integers(16, 41)))),
    }


def run_all(kernel, inputs):
    return [kernel(x=x)[name] for x in inputs for name in sorted(kernel(x=inputs[0]))]


@pytest.mark.parametrize("name", ["transformer", "bert", "gpt2", "cnn"])
def test_each_pass_off_against_on(name):
    model, draw = model_cases()[name]
    data = model.SerializeToString()
    rng = np.random.default_rng(len(name))
    inputs = [rng.standard_normal(draw(rng)).astype(np.float32) for _ in range(SHAPES)]
    exact_kernel = stax.load(data, jit="off", disable_passes=list(ROUNDING))
    full_kernel = stax.load(data, jit="off")
    exact_base, full = run_all(exact_kernel, inputs), run_all(full_kernel, inputs)
    changed = 0
    for p in stax.PASSES:
        if p in ROUNDING:
            off = stax.load(data, jit="off", disable_passes=[p])
            changed += off.passes["nodes_after"] != full_kernel.passes["nodes_after"]
            got = run_all(off, inputs)
            for a, b in zip(got, full):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"{name}: {p} off")
            continue
        off = stax.load(data, jit="off", disable_passes=[p, *ROUNDING])
        changed += off.passes["nodes_after"] != exact_kernel.passes["nodes_after"]
        got = run_all(off, inputs)
        for a, b in zip(got, exact_base):
            assert a.dtype == b.dtype and a.shape == b.shape, f"{name}: {p} off"
            np.testing.assert_array_equal(a, b, err_msg=f"{name}: {p} off changed the bits")
    # The sweep means something only if switching passes off changes the graphs it runs.
    assert changed >= 1, f"{name}: no pass changed the node count"
