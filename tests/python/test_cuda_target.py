"""target="cuda": what stax says about the GPU on this machine (src/cuda/cuda_loader.c,
docs/gpu.md). Nothing runs on a GPU yet, so every CUDA request fails, with an error that
names what this machine lacks (driver, device, NVRTC) or, where nothing is missing, says the
execution path is not implemented yet."""
import os
import subprocess

import pytest
from test_api_support import stax


def _cuda():
    return stax.build_info()["cuda"]


def _expected_cause(info):
    """A piece of text the cuda error must contain on this machine."""
    if not info["cuda"]["driver"]:
        return "libcuda.so.1"
    if not info["cuda"]["nvrtc"]:
        return "NVRTC not found"
    return "not implemented yet"


def test_build_info_reports_cuda():
    info = stax.build_info()
    cuda = info["cuda"]
    assert info["gpu"] is False and info["gpu_unavailable"]
    assert set(cuda) == {"driver", "driver_version", "device_count", "device_name",
                         "compute_capability", "driver_unavailable", "nvrtc", "nvrtc_version",
                         "nvrtc_path", "nvrtc_unavailable"}
    if cuda["driver"]:
        assert cuda["device_count"] > 0 and cuda["device_name"] and cuda["compute_capability"][0] > 0
        assert cuda["driver_unavailable"] == ""
    else:
        assert "libcuda.so.1" in cuda["driver_unavailable"]
        assert cuda["driver_unavailable"] in info["gpu_unavailable"]
    if cuda["nvrtc"]:
        assert cuda["nvrtc_version"][0] >= 11 and cuda["nvrtc_path"]
    else:
        assert cuda["nvrtc_unavailable"].startswith("NVRTC not found (tried ")


def test_compile_for_cuda_names_what_is_missing():
    info = stax.build_info()
    a = stax.placeholder([3], name="a")
    with pytest.raises(stax.UnimplementedError, match="target 'cuda'") as raised:
        stax.compile(a + 1, target="cuda")
    message = str(raised.value)
    assert _expected_cause(info) in message
    assert "cpu for now" not in message
    assert info["gpu_unavailable"] in message


def test_load_for_cuda_fails_before_reading_the_model():
    with pytest.raises(stax.UnimplementedError, match="target 'cuda'"):
        stax.load(b"not an onnx model", target="cuda")


def test_other_targets():
    a = stax.placeholder([3], name="a")
    assert stax.compile(a + 1, target="cpu").target == "cpu"
    with pytest.raises(stax.InvalidArgumentError, match="unknown target 'tpu'"):
        stax.compile(a + 1, target="tpu")
    with pytest.raises(TypeError, match="target must be a string"):
        stax.compile(a + 1, target=3)


def test_cli_reports_nvrtc_path_override(stax_bin):
    env = dict(os.environ, STAX_NVRTC_PATH="/nonexistent/stax/libnvrtc.so")
    r = subprocess.run([stax_bin, "version", "--verbose"], capture_output=True, text=True, env=env)
    assert r.returncode == 0
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines()[1:])
    assert lines["nvrtc"].startswith("none: NVRTC not found (tried STAX_NVRTC_PATH: ")
    assert "/nonexistent/stax/libnvrtc.so" in lines["nvrtc"]
    assert "/nonexistent/stax/libnvrtc.so" in lines["gpu"]
    assert lines["cuda driver"].startswith("none: ") == (not _cuda()["driver"])
