"""Real exports: torchvision and Hugging Face models (random weights, small configs where the
real ones are large) exported with dynamic axes through both of torch's exporters, the
TorchScript one (opset 17) and the dynamo one (opset 20), loaded by stax and compared with
ONNX Runtime on the same file at several shapes, with the JIT compiling inline (verify mode on:
every compiled segment is also interpreted and compared).

Needs torch, torchvision and transformers (heavy; CI does not install them): the module is
skipped with the reason printed when one is missing. Run it with an interpreter that has them:

    PYTHONPATH=python python -m pytest -q -rs tests/python/test_real_exports.py
"""
import importlib.util
import warnings

import numpy as np
import pytest

MISSING = [name for name in ("torch", "torchvision", "transformers", "onnxruntime")
           if importlib.util.find_spec(name) is None]
if MISSING:
    pytest.skip(f"needs {', '.join(MISSING)} (not installed; CI does not install torch)",
                allow_module_level=True)

import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
import transformers  # noqa: E402

import stax  # noqa: E402

EXPORTERS = ["torchscript", "dynamo"]


def vision_models():
    torch.manual_seed(0)
    vit = torchvision.models.VisionTransformer(image_size=64, patch_size=16, num_layers=2,
                                               num_heads=4, hidden_dim=64, mlp_dim=128,
                                               num_classes=10)
    return {
        "resnet18": (torchvision.models.resnet18(), [(1, 96, 96), (2, 64, 80)]),
        "mobilenet_v3_small": (torchvision.models.mobilenet_v3_small(), [(1, 96, 96), (2, 64, 64)]),
        "efficientnet_b0": (torchvision.models.efficientnet_b0(), [(1, 96, 96), (2, 64, 64)]),
        # A ViT's image size is fixed by its position embeddings: the batch varies.
        "vit": (vit, [(1, 64, 64), (3, 64, 64)]),
    }


def text_models():
    torch.manual_seed(0)
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, vocab_size=1000, max_position_embeddings=128)
    bert = transformers.BertModel(transformers.BertConfig(**small))
    gpt2 = transformers.GPT2Model(transformers.GPT2Config(
        n_embd=64, n_layer=2, n_head=4, n_inner=128, vocab_size=1000, n_positions=128))
    distil = transformers.DistilBertModel(transformers.DistilBertConfig(
        dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=1000,
        max_position_embeddings=128))
    return {"bert": bert, "gpt2": gpt2, "distilbert": distil}


class FirstOutput(torch.nn.Module):
    """A Hugging Face model's last hidden state alone (a plain tensor output)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def export(module, example, path, exporter, dynamic):
    """dynamic: {dim index: name} of the one input and the output."""
    module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(module, (example,), path, dynamo=False, opset_version=17,
                              input_names=["x"], output_names=["y"],
                              dynamic_axes={"x": dynamic, "y": {0: dynamic[0]}})
        else:
            dims = {i: torch.export.Dim(name, min=1, max=512) for i, name in dynamic.items()}
            torch.onnx.export(module, (example,), path, dynamo=True, opset_version=20,
                              input_names=["x"], output_names=["y"],
                              dynamic_shapes=({k: v for k, v in dims.items()},))


def compare(path, feeds_list, rtol, atol):
    model = stax.load(str(path), options=stax.Options(jit="sync", jit_threshold=1,
                                                      jit_verify=True))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    for feed in feeds_list:
        want = session.run(None, {input_name: feed})[0]
        for _ in range(2):  # the first call compiles, the second runs the kernels
            got = model.run(None, {input_name: feed})
        got = next(iter(got.values()))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    calls = model.stats["calls"]
    assert calls["compiled"] + calls["partial"] > 0, calls


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit"])
def test_vision(tmp_path, name, exporter):
    module, shapes = vision_models()[name]
    rng = np.random.default_rng(0)
    example = torch.from_numpy(rng.standard_normal((2, 3) + shapes[-1][1:]).astype(np.float32))
    dynamic = {0: "N"} if name == "vit" else {0: "N", 2: "H", 3: "W"}
    path = tmp_path / f"{name}_{exporter}.onnx"
    export(module, example, path, exporter, dynamic)
    feeds = [rng.standard_normal((n, 3, h, w)).astype(np.float32) for n, h, w in shapes]
    compare(path, feeds, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("name", ["bert", "gpt2", "distilbert"])
def test_text(tmp_path, name, exporter):
    module = FirstOutput(text_models()[name])
    rng = np.random.default_rng(1)
    example = torch.from_numpy(rng.integers(0, 1000, (2, 12)).astype(np.int64))
    path = tmp_path / f"{name}_{exporter}.onnx"
    export(module, example, path, exporter, {0: "B", 1: "S"})
    feeds = [rng.integers(0, 1000, shape).astype(np.int64) for shape in [(1, 5), (2, 17), (3, 33)]]
    compare(path, feeds, rtol=1e-3, atol=1e-3)
