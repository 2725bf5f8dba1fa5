"""Half precision: the S2 BERT layer and the S3 ResNet-18 stored in float16 (bench/models.py
to_half), each against its float32 original, per call, in stax (sync JIT, steady state) and,
for reference, stax with the `widen` pass off (16-bit products interpreted, as before it).

stax runs through the command line (`stax run --shape ... --repeat --warmup --jit=sync`, one
process per model and shape); rounds alternate the variants, every round's times are printed
and the medians are the figures. The ratio is float16 time / float32 time (the issue's goal:
at most 1.3).

    .venv/bin/python bench/half.py [--threads 1] [--calls 20] [--rounds 3] [--json FILE]
        [--bert 4x128,1x64] [--resnet 1x224,1x128]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stax_median(path, dims, threads, calls, warmup, env):
    cmd = [os.path.join(ROOT, "build/stax"), "run", path, "--shape", "x=" + dims, "--repeat",
           str(calls), "--warmup", str(warmup), "--threads", str(threads), "--jit=sync"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stderr
    return float(re.search(r"calls: median ([0-9.]+) ms", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bert", default="4x128,1x64", help="BxS shapes of the BERT layer")
    parser.add_argument("--resnet", default="1x224,1x128", help="NxH (H = W) of ResNet-18")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    import onnx
    workdir = tempfile.mkdtemp(prefix="stax-half-")
    cases = []
    for name, model, shapes, dims_of in (
            ("bert", models.bert_encoder(layers=1, seed=0), args.bert,
             lambda b, s: "%dx%dx768" % (b, s)),
            ("resnet18", models.resnet18(), args.resnet, lambda n, h: "%dx3x%dx%d" % (n, h, h))):
        paths = {}
        for dtype, m in (("float32", model), ("float16", models.to_half(model))):
            paths[dtype] = os.path.join(workdir, "%s_%s.onnx" % (name, dtype))
            onnx.save(m, paths[dtype])
        for spec in [s for s in shapes.split(",") if s]:
            a, b = (int(v) for v in spec.split("x"))
            cases.append((name, spec, dims_of(a, b), paths))
    env = dict(os.environ)
    env["STAX_JIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="stax-half-cache-")
    env_off = dict(env, STAX_DISABLE_PASSES="widen")
    variants = (("float32", "float32", env), ("float16", "float16", env),
                ("float16_widen_off", "float16", env_off))
    results = []
    for threads in [int(t) for t in args.threads.split(",")]:
        for name, spec, dims, paths in cases:
            rounds = []
            for r in range(args.rounds):
                row = {label: stax_median(paths[dtype], dims, threads, args.calls, args.warmup, e)
                       for label, dtype, e in variants}
                rounds.append(row)
                print("  %s %s t%d round %d: %s" % (name, spec, threads, r + 1, "; ".join(
                    "%s %.2f ms" % (label, row[label]) for label, _, _ in variants)), flush=True)
            summary = {"model": name, "shape": spec, "threads": threads, "rounds": rounds}
            for label, _, _ in variants:
                summary[label + "_ms"] = statistics.median(r[label] for r in rounds)
            summary["ratio"] = statistics.median(r["float16"] / r["float32"] for r in rounds)
            summary["ratio_widen_off"] = statistics.median(
                r["float16_widen_off"] / r["float32"] for r in rounds)
            results.append(summary)
            print("%s %s, %d thread(s): float32 %.2f ms, float16 %.2f ms (%.2fx float32's time; "
                  "with widen off %.2f ms, %.2fx)" % (
                      name, spec, threads, summary["float32_ms"], summary["float16_ms"],
                      summary["ratio"], summary["float16_widen_off_ms"],
                      summary["ratio_widen_off"]), flush=True)
    out = args.json or os.path.join(ROOT, "results/bench/half/half.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
