"""stax's main job, end to end: make an ONNX transformer layer with dynamic batch and sequence
length, run it through `stax run` with shapes that change on every call, and check each
output against ONNX Runtime on the same file."""
import pathlib
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import models  # noqa: E402

STAX = REPO / "build" / "stax"
WORK = REPO / "results" / "demo"


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    model_path = WORK / "transformer_layer.onnx"
    onnx.save(models.transformer_layer(hidden=64, heads=4, ffn=256), model_path)
    print(f"model: {model_path.relative_to(REPO)} (x: float32[B, S, 64] -> y)\n")
    subprocess.run([STAX, "info", model_path], check=True)

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    print("\n  shape (B, S)   stax run     max |stax - onnxruntime|")
    worst = 0.0
    for batch, seq in [(1, 8), (2, 17), (4, 64), (3, 5), (1, 128), (2, 17)]:
        x = rng.standard_normal((batch, seq, 64)).astype(np.float32)
        np.save(WORK / "x.npy", x)
        out_dir = WORK / f"out_{batch}x{seq}"
        start = time.perf_counter()
        subprocess.run([STAX, "run", model_path, "-i", f"x={WORK / 'x.npy'}", "-o", out_dir],
                       check=True, stdout=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        y_stax = np.load(out_dir / "y.npy")
        (y_ort,) = session.run(None, {"x": x})
        diff = float(np.max(np.abs(y_stax - y_ort)))
        worst = max(worst, diff)
        print(f"  ({batch:>2}, {seq:>3})     {elapsed * 1e3:7.1f} ms   {diff:.2e}")
    ok = worst < 1e-3
    print(f"\n{'agree' if ok else 'DISAGREE'}: every output within {worst:.2e} of ONNX Runtime "
          f"(process start-up included in the times above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
