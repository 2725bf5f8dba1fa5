#!/usr/bin/env python3
"""BENCH.md S5: SGEMM against the machine's FMA peak and the peers, in one run.

Shapes: square 256, 512, 1024, 2048 and skinny M in {1, 8, 32, 128} with (N, K) in
{(768, 768), (3072, 768), (768, 3072)}: C[M, N] = A[M, K] . B[K, N], B a constant (a model's
weight, as in every layer stax runs). Each shape is a one-node ONNX MatMul with M open.

  peak   build/stax_peak (bench/peak.c): float32 FMA GFLOP/s of the widest vector width this
         CPU runs, on 1 thread and on every core, measured in this run
  stax   build/stax run --jit sync (the kernel is compiled before the timed calls; the
         shape-generic kernel unless STAX_JIT_PROMOTE allows an exact one), median per call
  ort    ONNX Runtime on the same file, intra_op_num_threads = threads, median per call
  numpy  numpy.matmul (its BLAS: OpenBLAS here), threadpoolctl limiting the threads if
         installed, else OPENBLAS_NUM_THREADS / OMP_NUM_THREADS
  onednn oneDNN's dnnl_sgemm through bench/dnnl_sgemm.c, which this script compiles against
         Debian's libdnnl-dev when it is installed (`apt-get install libdnnl-dev`; left out
         with a note otherwise), OMP_NUM_THREADS = threads; B is not prepacked there

OPENBLAS_CORETYPE (set on some machines here) slows OpenBLAS: it is unset for the peer
processes only, and the output says so. Rounds alternate the engines (--rounds, default 3);
the table gives each engine's best median over the rounds, GFLOP/s, the fraction of the
peak on the same thread count, and the ratios stax/ORT, stax/numpy and stax/oneDNN (> 1:
stax faster).
Writes results/bench/s5/s5.json.

usage: .venv/bin/python bench/s5.py [--threads 1,2] [--rounds 3] [--shapes square,skinny]
       [--seconds 0.5]
About 2-4 minutes on 2 cores.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

SQUARE = [256, 512, 1024, 2048]
SKINNY_M = [1, 8, 32, 128]
SKINNY_NK = [(768, 768), (3072, 768), (768, 3072)]
PEER = r"""
import json, os, sys, time
import numpy as np
engine, path, m, k, n, threads, seconds = sys.argv[1:8]
m, k, n, threads, seconds = int(m), int(k), int(n), int(threads), float(seconds)
rng = np.random.default_rng(0)
a = rng.standard_normal((m, k)).astype(np.float32)
if engine == "ort":
    import onnxruntime as ort
    so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    run = lambda: s.run(None, {"a": a})
else:
    b = np.load(path)
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(threads)
    except ImportError:
        pass
    run = lambda: np.matmul(a, b)
for _ in range(3): run()
times, start = [], time.perf_counter()
while time.perf_counter() - start < seconds or len(times) < 5:
    t = time.perf_counter(); run(); times.append(time.perf_counter() - t)
print(json.dumps({"median_ms": float(np.median(times)) * 1e3, "calls": len(times)}))
"""


def model(k, n, seed=0):
    rng = np.random.default_rng(seed)
    b = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "sgemm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["M", k])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, ["M", n])],
        [numpy_helper.from_array(b, "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, b


def run_stax(stax, path, m, k, threads, seconds, env):
    # Enough calls for a median, bounded in time; the compile (sync) happens in the warm-up.
    out = subprocess.run([stax, "run", path, "--shape", f"a={m}x{k}", "--jit", "sync",
                          "--threads", str(threads), "--warmup", "3", "--repeat", "1000",
                          "--duration", str(seconds)],
                         capture_output=True, text=True, env=env)
    found = re.search(r"median ([0-9.]+) ms", out.stderr)
    if out.returncode != 0 or not found:
        sys.exit(f"stax failed on {path} at M = {m}:\n{out.stderr[-2000:]}")
    return float(found.group(1))


def run_peer(engine, path, m, k, n, threads, seconds, env):
    out = subprocess.run([sys.executable, "-c", PEER, engine, path, str(m), str(k), str(n),
                          str(threads), str(seconds)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{engine} failed at {m}x{k}x{n}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def onednn_version():
    """libdnnl-dev's version from dpkg, or None."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "libdnnl-dev"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def build_onednn(workdir, notes):
    """bench/dnnl_sgemm.c compiled against libdnnl, or None (with a note) when it cannot be."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dnnl_sgemm.c")
    binary = os.path.join(workdir, "dnnl_sgemm")
    out = subprocess.run(["cc", "-O2", "-o", binary, source, "-ldnnl"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        notes.append("oneDNN left out: bench/dnnl_sgemm.c did not build (apt-get install "
                     "libdnnl-dev): " + out.stderr.strip().splitlines()[-1][:200]
                     if out.stderr.strip() else "oneDNN left out: the driver did not build")
        return None
    return binary


def run_onednn(binary, m, k, n, threads, seconds, env):
    env = dict(env, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([binary, str(m), str(k), str(n), str(seconds)], capture_output=True,
                         text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"oneDNN failed at {m}x{k}x{n}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default="square,skinny")
    parser.add_argument("--seconds", type=float, default=0.5, help="timing per engine and shape")
    parser.add_argument("--out", default=os.path.join(H.ROOT, "results", "bench", "s5"))
    args = parser.parse_args()
    stax = os.path.join(H.ROOT, "build", "stax")
    peak_bin = os.path.join(H.ROOT, "build", "stax_peak")
    for path in (stax, peak_bin):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: run `make build` first")
    threads_list = [int(t) for t in args.threads.split(",")]
    kinds = args.shapes.split(",")
    shapes = []
    if "square" in kinds:
        shapes += [(s, s, s) for s in SQUARE]
    if "skinny" in kinds:
        shapes += [(m, k, n) for (n, k) in SKINNY_NK for m in SKINNY_M]
    notes = []
    vers = H.versions()
    peak = json.loads(subprocess.run([peak_bin, "--json", "--threads", str(max(threads_list))],
                                     capture_output=True, text=True, check=True).stdout)
    widest = list(peak["fma_gflops"])[-1]
    per_threads = {t: peak["fma_gflops"][widest][0 if t == 1 else 1] for t in threads_list}
    print(f"S5: SGEMM, B constant, {len(shapes)} shapes, threads {threads_list}, "
          f"{args.rounds} rounds alternating engines")
    print(f"machine: {H.machine_notes()}")
    print(f"peak (stax_peak, {widest}): " +
          ", ".join(f"{t} thread(s) {g:.1f} GFLOP/s" for t, g in per_threads.items()) +
          f"; triad {peak['triad_gbs'][0]:.1f} / {peak['triad_gbs'][1]:.1f} GB/s")
    print(f"versions: onnxruntime {vers['onnxruntime']}, numpy {vers['numpy']}, stax "
          f"{vers['stax']}" + (f", oneDNN {onednn_version()}" if onednn_version() else ""))
    workdir = tempfile.mkdtemp(prefix="stax_s5_")
    paths = {}
    for (_, k, n) in shapes:
        if (k, n) not in paths:
            m_, b = model(k, n)
            paths[(k, n)] = (os.path.join(workdir, f"mm_{k}_{n}.onnx"),
                             os.path.join(workdir, f"b_{k}_{n}.npy"))
            onnx.save(m_, paths[(k, n)][0])
            np.save(paths[(k, n)][1], b)
    stax_env = dict(os.environ, STAX_JIT_CACHE_DIR=os.path.join(workdir, "cache"))
    onednn = build_onednn(workdir, notes)
    engines = ["stax", "ort", "numpy"] + (["onednn"] if onednn else [])
    rows = []
    started = time.perf_counter()
    for threads in threads_list:
        peer_env = H.peer_env(threads, "ort", notes)
        peer_env["OPENBLAS_NUM_THREADS"] = str(threads)
        for (m, k, n) in shapes:
            onnx_path, npy_path = paths[(k, n)]
            best = {engine: [] for engine in engines}
            for _ in range(args.rounds):
                best["stax"].append(run_stax(stax, onnx_path, m, k, threads, args.seconds,
                                             stax_env))
                best["ort"].append(run_peer("ort", onnx_path, m, k, n, threads, args.seconds,
                                            peer_env))
                best["numpy"].append(run_peer("numpy", npy_path, m, k, n, threads,
                                              args.seconds, peer_env))
                if onednn:
                    best["onednn"].append(run_onednn(onednn, m, k, n, threads, args.seconds,
                                                     peer_env))
            flops = 2.0 * m * k * n
            row = {"m": m, "k": k, "n": n, "threads": threads}
            for engine, times in best.items():
                ms = min(times)
                row[engine + "_ms"] = ms
                row[engine + "_gflops"] = flops / ms * 1e-6
                row[engine + "_rounds_ms"] = times
            row["peak_gflops"] = per_threads[threads]
            rows.append(row)
            print(f"  t{threads} {m:5d} x {k:5d} x {n:5d}: stax {row['stax_gflops']:6.1f} "
                  f"({row['stax_gflops'] / row['peak_gflops']:4.0%} of peak)  ORT "
                  f"{row['ort_gflops']:6.1f}  numpy {row['numpy_gflops']:6.1f}" +
                  (f"  oneDNN {row['onednn_gflops']:6.1f}" if onednn else "") + " GFLOP/s;  "
                  f"stax/ORT {row['ort_ms'] / row['stax_ms']:.2f}  stax/numpy "
                  f"{row['numpy_ms'] / row['stax_ms']:.2f}" +
                  (f"  stax/oneDNN {row['onednn_ms'] / row['stax_ms']:.2f}" if onednn else ""))
    os.makedirs(args.out, exist_ok=True)
    result = {"scenario": "S5", "args": vars(args), "peak": peak, "versions": vers,
              "machine": H.machine_notes(), "notes": notes, "rows": rows,
              "wall_s": time.perf_counter() - started}
    with open(os.path.join(args.out, "s5.json"), "w") as f:
        json.dump(result, f, indent=1)
    for note in notes:
        print("note: " + note)
    print(f"wrote {os.path.join(args.out, 's5.json')}; wall {result['wall_s']:.0f} s "
          "(ratios > 1: stax faster; best median of the rounds per engine)")


if __name__ == "__main__":
    main()
