"""stax's main job, end to end: make an ONNX transformer layer with dynamic batch and sequence
length, run it through `stax run` with shapes that change on every call, and check each
output against ONNX Runtime on the same file."""
import os
import pathlib
import re
import time
import subprocess
import sys
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
    options.intra_op_num_threads = os.cpu_count() or 1  # stax's default pool: every core
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    print("\n  shape (B, S)   stax per call   onnxruntime per call   max |stax - onnxruntime|")
    print("                 (median of 20 calls each, same threads; stax JIT compiles in the "
          "background)")
    worst = 0.0
    for batch, seq in [(1, 8), (2, 17), (4, 64), (3, 5), (1, 128), (2, 17)]:
        x = rng.standard_normal((batch, seq, 64)).astype(np.float32)
        np.save(WORK / "x.npy", x)
        out_dir = WORK / f"out_{batch}x{seq}"
        result = subprocess.run([STAX, "run", model_path, "-i", f"x={WORK / 'x.npy'}", "-o",
                                 out_dir, "--repeat", "20"],
                                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        median = re.search(r"median ([0-9.]+) ms", result.stderr)
        elapsed = float(median.group(1)) / 1e3 if median else float("nan")
        y_stax = np.load(out_dir / "y.npy")
        ort_times = []
        for _ in range(20):
            start = time.perf_counter()
            (y_ort,) = session.run(None, {"x": x})
            ort_times.append(time.perf_counter() - start)
        ort_median = sorted(ort_times)[len(ort_times) // 2]
        diff = float(np.max(np.abs(y_stax - y_ort)))
        worst = max(worst, diff)
        print(f"  ({batch:>2}, {seq:>3})     {elapsed * 1e3:8.3f} ms     {ort_median * 1e3:8.3f} ms"
              f"            {diff:.2e}")
    ok = worst < 1e-3
    print(f"\n{'agree' if ok else 'DISAGREE'}: every output within {worst:.2e} of ONNX Runtime "
          f"(each stax row: one `stax run --repeat 20` process)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
