"""stax's main job, end to end: make an ONNX transformer layer with dynamic batch and sequence
length, run it through `stax run` with shapes that change on every call, and check each
output against ONNX Runtime on the same file."""
import json
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
    shapes = [(1, 8), (2, 17), (4, 64), (3, 5), (1, 128), (2, 17)]
    print("\n  One `stax run --duration 1.5` process per shape (calls for 1.5 s, the JIT")
    print("  compiling in the background meanwhile, kernels kept on disk for later runs:")
    print("  ~/.cache/stax/jit); ONNX Runtime on the same file with the same thread count, 100")
    print("  calls. Times per call:\n")
    print("  shape (B, S)   stax first call   stax steady*   onnxruntime   max |stax - ort|"
          "   calls compiled**")
    worst = 0.0
    inputs = []
    for batch, seq in shapes:
        x = rng.standard_normal((batch, seq, 64)).astype(np.float32)
        path = WORK / f"x_{batch}x{seq}.npy"
        np.save(path, x)
        inputs.append((path, x))
        out_dir = WORK / f"out_{batch}x{seq}"
        first, steady, calls = run_stax(model_path, [path], out_dir, 1.5)
        y_stax = np.load(out_dir / "y.npy")
        ort_median, y_ort = run_ort(session, [x], 100)
        diff = float(np.max(np.abs(y_stax - y_ort)))
        worst = max(worst, diff)
        print(f"  ({batch:>2}, {seq:>3})     {first:10.3f} ms   {steady:9.3f} ms"
              f"   {ort_median:8.3f} ms       {diff:.2e}       {calls}")
    # The dynamic-shape case proper: one process whose shape changes on every call.
    paths = [p for p, _ in inputs[:5]]
    first, steady, calls = run_stax(model_path, paths, WORK / "out_cycle", 2.0)
    ort_median, _ = run_ort(session, [x for _, x in inputs[:5]], 500)
    print(f"  cycling the first 5 shapes, a new shape every call, for 2 seconds (ORT: 500 calls):")
    print(f"                 {first:10.3f} ms   {steady:9.3f} ms   {ort_median:8.3f} ms"
          f"                    {calls}")
    print("\n  * median of the last half of the calls")
    print("  ** calls that ran fully compiled, of all (the others interpreted some or all of")
    print("     their work while the background compiler had not finished; the steady column")
    print("     is compiled speed when the last half of the calls all ran compiled)")
    ok = worst < 1e-3
    print(f"\n{'agree' if ok else 'DISAGREE'}: every output within {worst:.2e} of ONNX Runtime")
    return 0 if ok else 1


def run_stax(model_path, paths, out_dir, seconds):
    """(first call ms, median ms of the last half of the calls, "compiled of all calls") of
    one `stax run` process timing calls for `seconds`: long enough for the background
    compiler's kernels to land on a fresh machine (a tiny shape's hundred calls take a few
    milliseconds, less than any compile), so the steady column is compiled speed."""
    stats_path = pathlib.Path(out_dir) / "stats.json"
    pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
    args = [STAX, "run", model_path, "-o", out_dir, "--duration", str(seconds),
            "--stats-json", stats_path]
    for path in paths:
        args += ["-i", f"x={path}"]
    result = subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    match = re.search(r"first call ([0-9.]+) ms; last \d+ calls: median ([0-9.]+) ms",
                      result.stderr)
    try:
        counts = json.loads(stats_path.read_text())["calls"]
        compiled = f"{counts['compiled']} of {sum(counts.values())}"
    except (OSError, ValueError, KeyError):
        compiled = "?"
    if not match:
        return float("nan"), float("nan"), compiled
    return float(match.group(1)), float(match.group(2)), compiled


def run_ort(session, xs, calls):
    """(median ms over all calls cycling through xs, the output of the first input)."""
    times, first_output = [], None
    for call in range(calls):
        x = xs[call % len(xs)]
        start = time.perf_counter()
        (y,) = session.run(None, {"x": x})
        times.append(time.perf_counter() - start)
        if call == 0:
            first_output = y
    return sorted(times)[len(times) // 2] * 1e3, first_output


if __name__ == "__main__":
    sys.exit(main())
