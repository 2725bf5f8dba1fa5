"""S3: a ResNet-18-like CNN (bench/models.py resnet18(), dynamic N/H/W, random weights), stax
vs ONNX Runtime per call, at a few (batch, H = W) shapes and thread counts.

stax runs through the command line (`stax run --shape ... --repeat --warmup --jit=sync`, one
process per shape, so the first call compiles and the timed calls are steady state); ORT runs
in this process (graph optimizations on, as users run it, spinning off). Rounds alternate the
engines; every round's ratio is printed and the median of the rounds is the figure. Several
stax builds can be compared in one run: --stax base=/path/to/old/stax --stax new=build/stax.

    env -u OPENBLAS_CORETYPE .venv/bin/python bench/s3.py [--shapes 1x224,1x128] [--threads 1]
        [--calls 20] [--rounds 3] [--stax NAME=PATH ...] [--json FILE]

Prints, per shape and thread count: ORT's median ms per call, each stax build's median ms and
first-call ms, and the ratio ORT time / stax time (> 1: stax faster)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ort_median(path, shape, threads, calls, warmup):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    start = time.perf_counter()
    session.run(None, {"x": x})
    first = (time.perf_counter() - start) * 1e3
    for _ in range(warmup):
        session.run(None, {"x": x})
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        session.run(None, {"x": x})
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), first


def stax_median(binary, path, shape, threads, calls, warmup, extra_env):
    dims = "x".join(str(d) for d in shape)
    env = dict(os.environ)
    env.update(extra_env)
    cmd = [binary, "run", path, "--shape", "x=" + dims, "--repeat", str(calls), "--warmup",
           str(warmup), "--threads", str(threads), "--jit=sync"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stderr
    return float(re.search(r"calls: median ([0-9.]+) ms", out).group(1))


def stax_first(binary, path, shape, threads):
    """The first call of a fresh process with an empty object cache (compiles included)."""
    dims = "x".join(str(d) for d in shape)
    env = dict(os.environ)
    env["STAX_JIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="stax-s3-cold-")
    cmd = [binary, "run", path, "--shape", "x=" + dims, "--repeat", "2", "--threads",
           str(threads), "--jit=sync"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stderr
    return float(re.search(r"first call ([0-9.]+) ms", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="1x224,1x128",
                        help="comma-separated NxH (H = W), default 1x224,1x128")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stax", action="append", default=[],
                        help="NAME=PATH of a stax binary (default: new=build/stax)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    builds = [s.split("=", 1) for s in args.stax] or [["stax", os.path.join(ROOT, "build/stax")]]
    cache = tempfile.mkdtemp(prefix="stax-s3-cache-")
    extra_env = {"STAX_JIT_CACHE_DIR": cache}
    workdir = tempfile.mkdtemp(prefix="stax-s3-")
    path = os.path.join(workdir, "resnet18.onnx")
    import onnx
    onnx.save(models.resnet18(), path)
    if "OPENBLAS_CORETYPE" in os.environ:
        print("note: OPENBLAS_CORETYPE is set; run under env -u OPENBLAS_CORETYPE for the peers")
    import onnxruntime
    print("onnxruntime %s; builds: %s" % (onnxruntime.__version__,
                                          ", ".join("%s=%s" % (n, p) for n, p in builds)))
    results = []
    for threads in [int(t) for t in args.threads.split(",")]:
        for spec in args.shapes.split(","):
            n, h = (int(v) for v in spec.split("x"))
            shape = (n, 3, h, h)
            rounds = []
            for r in range(args.rounds):
                row = {"ort": ort_median(path, shape, threads, args.calls, args.warmup)[0]}
                for name, binary in builds:
                    row[name] = stax_median(binary, path, shape, threads, args.calls,
                                            args.warmup, extra_env)
                rounds.append(row)
                print("  %dx%d t%d round %d: ORT %.2f ms; %s" % (
                    n, h, threads, r + 1, row["ort"],
                    "; ".join("%s %.2f ms (%.2fx)" % (name, row[name], row["ort"] / row[name])
                              for name, _ in builds)), flush=True)
            summary = {"shape": list(shape), "threads": threads, "rounds": rounds,
                       "ort_ms": statistics.median(r["ort"] for r in rounds)}
            for name, binary in builds:
                summary[name + "_ms"] = statistics.median(r[name] for r in rounds)
                summary[name + "_ratio"] = statistics.median(r["ort"] / r[name] for r in rounds)
                summary[name + "_first_ms"] = stax_first(binary, path, shape, threads)
            results.append(summary)
            print("%dx3x%dx%d, %d thread(s): ORT %.2f ms | %s" % (
                n, h, h, threads, summary["ort_ms"],
                " | ".join("%s %.2f ms, %.2fx ORT's speed (first call %.0f ms)" % (
                    name, summary[name + "_ms"], summary[name + "_ratio"],
                    summary[name + "_first_ms"]) for name, _ in builds)), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
