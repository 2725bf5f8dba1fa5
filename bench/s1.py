#!/usr/bin/env python3
"""BENCH.md S1: the seed MLP (bench/models.py seed_mlp) with (B, S) hopping between (32, 64)
and (64, 32), run through `stax run --repeat` (calls cycle through the two input sets).

Modes:
  interp  --jit=off: the interpreter's generic kernels
  sync    --jit=sync: segments compiled inline for each recurring shape signature
  on      --jit=on: compiled by the background thread while calls keep interpreting
  static  one model per shape with every dim fixed (all shapes known ahead of time), JIT sync;
          the per-call time is the mean of the two shapes' medians

Prints a table: median time per call, cache hit rate, compilations (one per shape signature;
each is one version of the segment: 3 kernels for S1), compile time per version.
Each run gets an empty JIT object cache, so compile times are real compiles (STAX_S1_WARM=1
keeps the user's cache). Not part of the tests (timings vary with the machine).

usage: python bench/s1.py [--stax PATH] [--repeat N] [--rounds 3]   (a release build gives real figures)
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

SHAPES = [(32, 64), (64, 32)]


def fixed_dims(model, batch, seq):
    """A copy of model whose inputs have B and S fixed: the 'static' program."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for value in fixed.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param == "B":
                dim.dim_value = batch
            elif dim.dim_param == "S":
                dim.dim_value = seq
    return fixed


def run(stax, model_path, input_sets, mode, repeat, workdir, tag):
    stats = os.path.join(workdir, f"stats_{tag}.json")
    cmd = [stax, "run", model_path, "--repeat", str(repeat), f"--jit={mode}", "--stats-json", stats]
    for files in input_sets:
        for name, path in files.items():
            cmd += ["-i", f"{name}={path}"]
    # A fresh object cache per run: compile times are real compiles, not loads of kernels an
    # earlier run left on disk (set STAX_S1_WARM=1 to measure with the user's cache instead).
    env = dict(os.environ)
    if not os.environ.get("STAX_S1_WARM"):
        env["STAX_JIT_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"cache_{tag}_", dir=workdir)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    match = re.search(r"median ([0-9.]+) ms, min ([0-9.]+) ms, max ([0-9.]+) ms", proc.stderr)
    with open(stats) as f:
        total = json.load(f)["total"]
    return float(match.group(1)), total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--stax", default=os.path.join(root, "build", "stax"))
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3,
                        help="sync JIT and static run this many times, alternating; the table "
                             "shows the median of each (the machine's speed drifts)")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="stax_s1_")
    model = models.seed_mlp()
    if isinstance(model, tuple):
        model = model[0]
    dynamic_path = os.path.join(workdir, "mlp.onnx")
    onnx.save(model, dynamic_path)
    rng = np.random.default_rng(0)
    input_sets = []
    for batch, seq in SHAPES:
        files = {}
        for name, array in models.seed_inputs(rng, batch, seq).items():
            path = os.path.join(workdir, f"{name}_{batch}x{seq}.npy")
            np.save(path, array)
            files[name] = path
        input_sets.append(files)

    def static_run(tag):
        medians, combined = [], None
        for (batch, seq), files in zip(SHAPES, input_sets):
            path = os.path.join(workdir, f"mlp_{batch}x{seq}.onnx")
            onnx.save(fixed_dims(model, batch, seq), path)
            median, total = run(args.stax, path, [files], "sync", args.repeat // 2, workdir,
                                f"static_{batch}x{seq}_{tag}")
            medians.append(median)
            if combined is None:
                combined = dict(total)
            else:
                for key in ("entries", "hits", "misses", "compiles", "failures", "compile_ms"):
                    combined[key] += total[key]
                combined["hit_rate"] = combined["hits"] / max(1, combined["entries"])
        return sum(medians) / len(medians), combined

    rows = []
    for label, mode in (("interp (--jit=off)", "off"), ("background JIT (--jit=on)", "on")):
        median, total = run(args.stax, dynamic_path, input_sets, mode, args.repeat, workdir, mode)
        rows.append((label, median, total))
    # Sync JIT against static, alternating, so drift does not read as a gap.
    sync_runs, static_runs = [], []
    for r in range(max(1, args.rounds)):
        sync_runs.append(run(args.stax, dynamic_path, input_sets, "sync", args.repeat, workdir,
                             f"sync_{r}"))
        static_runs.append(static_run(r))
    ratios = [a[0] / b[0] for a, b in zip(sync_runs, static_runs)]
    pick = lambda runs: sorted(runs, key=lambda x: x[0])[len(runs) // 2]
    rows.insert(1, ("sync JIT",) + pick(sync_runs))
    rows.append(("static (fixed dims, JIT)",) + pick(static_runs))

    print(f"S1 seed_mlp, (B,S) alternating {SHAPES}, {args.repeat} calls, {args.stax}")
    print(f"{'mode':<26}{'ms/call (median)':>18}{'hit rate':>10}{'compiles':>10}"
          f"{'compile ms':>12}{'ms/version':>12}")
    for label, median, total in rows:
        compiles = total["compiles"]
        per = total["compile_ms"] / compiles if compiles else 0.0
        print(f"{label:<26}{median:>18.3f}{total['hit_rate']:>10.3f}{compiles:>10d}"
              f"{total['compile_ms']:>12.1f}{per:>12.1f}")
    print("sync JIT / static per round (alternating): " + ", ".join(f"{x:.3f}" for x in ratios)
          + f"; median {float(np.median(ratios)):.3f}")


if __name__ == "__main__":
    main()
