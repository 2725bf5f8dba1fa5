#!/usr/bin/env python3
"""BENCH.md S6: a stream of new shapes through the S2 layer (bench/models.py bert_encoder:
BERT-base, hidden 768, 12 heads, FFN 3072; B and S dynamic).

The stream (fixed seed): --calls (500) calls; the first --new-first (200) are 200 different
(B, S) (B in {1, 2, 4, 8}, S in 8..512 log-normal, median 40, any length), so no shape repeats
there; then a realistic mix: each call is, with probability 0.85, one of a hot set of 24
shapes already seen (Zipf weights 1/rank), else a fresh draw from the distribution (a new
shape or, by chance, a seen one).

Runs (own process each, --threads threads, default 2: all cores of this machine):
  ort         ONNX Runtime, CPU provider, intra_op_num_threads = threads
  stax        stax.load(jit="on"): background JIT (threshold 2: a shape's second call queues
              its compile, calls keep interpreting until the kernels land), STAX_NUM_THREADS =
              threads plus the compiler thread; latency of every call
  torch       PyTorch eager (if installed)
  cli_cold /  the object cache, measured with build/stax (`stax run` cycling the stream's 8
  cli_warm    most frequent shapes 4 times: it takes at most 16 files per input), background
              JIT: first with a fresh empty STAX_JIT_CACHE_DIR, then a second process with the
              folder the first filled (compiles become loads; the threshold still applies). Through the Python package the cache is not used:
              its binding keeps LLVM texts for k.source (stax_program_jit_keep_sources), and
              kernels that keep texts bypass the cache (docs/jit.md, "Object cache").
              The command line reports median/min/max per call only, not every call.
stax's runs log STAX_LOG=jit to a file: compile time per kernel (lower + LLVM) and per
version (all 12 kernels of a shape), loads from the object cache.

Prints: latency p50/p99 for new vs seen shapes, per phase; per-call ratio to ORT; compile
time per kernel (median, p99); how many calls ran interpreted, and why (first call of a
shape: below the threshold; second call: compile just queued; later calls: the compiler had
not finished). Writes results/bench/s6/s6.json (every latency) and s6.png (latency per call).
Before the timing, stax (JIT sync) is checked against ORT on three shapes; every first call
of a shape is compared with ORT's output (exit 1 above 1e-3).

usage: .venv/bin/python bench/s6.py [--calls 500] [--new-first 200] [--threads 2]
       [--engines ort,stax,torch] [--out results/bench/s6] [--seed 0] [--unaligned]
Default configuration: about 4-6 minutes on a 2-core machine.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import models  # noqa: E402


def make_stream(seed, calls, new_first, hot=24, p_hot=0.85):
    rng = np.random.default_rng(seed)
    stream, seen = [], set()
    while len(stream) < min(calls, new_first):
        shape = H.draw_shape(rng)
        if shape not in seen:
            seen.add(shape)
            stream.append(shape)
    hot_set = [stream[i] for i in rng.choice(len(stream), size=min(hot, len(stream)),
                                             replace=False)]
    weights = 1.0 / np.arange(1, len(hot_set) + 1)
    weights /= weights.sum()
    while len(stream) < calls:
        if rng.random() < p_hot:
            stream.append(hot_set[rng.choice(len(hot_set), p=weights)])
        else:
            stream.append(H.draw_shape(rng))
    return [list(s) for s in stream]


def cli_cache_runs(args, workdir, model_path, calls, threads, shapes=8, rounds=4):
    """The object cache, measured with the command line (the Python binding keeps LLVM texts
    for k.source, which bypasses the cache). `stax run` takes at most 16 files per input, so
    this is not the whole stream: the 8 most frequent shapes of the stream (8: the versions
    kept per segment, so no eviction), cycled `rounds` times (`--repeat 32`: calls 1-8 are
    first calls, 9-16 queue the compiles, later ones run compiled once the kernels are
    there), background JIT, STAX_LOG=jit; first with a fresh
    empty STAX_JIT_CACHE_DIR ("cli_cold"), then again with the folder it filled ("cli_warm")."""
    import re
    import subprocess
    from collections import Counter
    files = os.path.join(workdir, "cli_inputs")
    os.makedirs(files, exist_ok=True)
    order = {tuple(c): i for i, c in reversed(list(enumerate(calls)))}
    counts = Counter(tuple(c) for c in calls)
    top = sorted(counts, key=lambda c: (-counts[c], order[c]))[:shapes]
    cmd = [args.stax, "run", model_path, "--repeat", str(len(top) * rounds), "--jit=on"]
    for b, s in top:
        path = os.path.join(files, f"{b}x{s}.npy")
        np.save(path, H.make_input(args.seed, 1, b, s))
        cmd += ["-i", f"x={path}"]
    # a private copy of the program: the object cache keys on the build (a hash of the file),
    # so a rebuild of build/stax between the two runs would turn the warm run cold
    program = os.path.join(workdir, "stax")
    shutil.copy2(args.stax, program)
    cmd[0] = program
    cache = tempfile.mkdtemp(prefix="jit_cache_cli_", dir=workdir)
    out = {}
    for label in ("cli_cold", "cli_warm"):
        log = os.path.join(workdir, f"{label}.log")
        stats = os.path.join(workdir, f"{label}.json")
        env = dict(os.environ, STAX_NUM_THREADS=str(threads), STAX_JIT_CACHE_DIR=cache,
                   STAX_LOG="jit")
        sys.stdout.write(f"  running {label} ({args.stax} run, {len(top)} shapes x {rounds}) ... ")
        sys.stdout.flush()
        t = time.perf_counter()
        with open(log, "w") as err:
            proc = subprocess.run(cmd + ["--stats-json", stats], env=env, stderr=err,
                                  stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        print(f"{wall:.1f} s")
        if proc.returncode != 0:
            sys.exit(f"FAILED: {label}: exit {proc.returncode}, see {log}")
        text = open(log, errors="replace").read()
        m = re.search(r"(\d+) calls: median ([0-9.]+) ms, min ([0-9.]+) ms, max ([0-9.]+) ms", text)
        with open(stats) as f:
            total = json.load(f)["total"]
        out[label] = {"wall_s": wall, "median_ms": float(m.group(2)), "min_ms": float(m.group(3)),
                      "max_ms": float(m.group(4)), "jit": total, "jit_log": H.parse_jit_log(log),
                      "cache_files": len(os.listdir(cache)), "shapes": [list(t) for t in top],
                      "calls": len(top) * rounds}
    return out


def print_cli(cli, ort, tokens):
    first = next(iter(cli.values()))
    print(f"\nobject cache (build/stax run, background JIT, the stream's {len(first['shapes'])} most "
          f"frequent shapes cycled: {first['calls']} calls; wall = whole process):")
    print(f"{'run':<10}{'wall s':>8}{'median ms':>10}{'max ms':>9}{'hits':>6}{'misses':>7}"
          f"{'versions':>9}{'compile s':>10}{'kernels compiled':>18}{'loaded':>8}"
          f"{'kernel ms p50/p99':>19}{'load ms p50/p99':>17}")
    for label, r in cli.items():
        j = r["jit_log"]
        k, c = j["kernel"], j["cache_load"]
        loaded = c["count"]
        compiled = k["count"]
        print(f"{label:<10}{r['wall_s']:>8.1f}{r['median_ms']:>10.1f}{r['max_ms']:>9.1f}"
              f"{r['jit']['hits']:>6}{r['jit']['misses']:>7}{r['jit']['compiles']:>9}"
              f"{r['jit']['compile_ms'] / 1e3:>10.1f}{compiled:>18}{loaded:>8}"
              f"{H.fmt(k['median_ms']) + '/' + H.fmt(k['p99_ms']):>19}"
              f"{H.fmt(c['median_ms'], 2) + '/' + H.fmt(c['p99_ms'], 2):>17}")
    if ort:
        print(f"(ORT, same stream: p50 {ort['p50_ms']:.1f} ms per call, {ort['total_s']:.1f} s in "
              f"calls)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--new-first", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--engines", default="ort,stax,torch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unaligned", action="store_true",
                        help="plain numpy inputs (16-byte aligned) instead of 64-byte aligned")
    parser.add_argument("--out", default=os.path.join(H.ROOT, "results", "bench", "s6"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--stax", default=os.path.join(H.ROOT, "build", "stax"),
                        help="the stax program for the object-cache runs")
    parser.add_argument("--no-cli", action="store_true", help="skip the object-cache runs")
    args = parser.parse_args()
    engines = args.engines.split(",")
    threads = args.threads
    notes = []
    started = time.perf_counter()
    align = 0 if args.unaligned else 64

    vers = H.versions()
    if "torch" in engines and vers["torch"].startswith("not available"):
        engines.remove("torch")
        notes.append(f"torch left out: {vers['torch']}")
    workdir = tempfile.mkdtemp(prefix="stax_s6_")
    model_path = os.path.join(workdir, "bert.onnx")
    onnx.save(models.bert_encoder(layers=args.layers, seed=args.seed), model_path)
    calls = make_stream(args.seed, args.calls, args.new_first)
    tokens = np.asarray([b * s for b, s in calls])
    print(f"S6: BERT-base encoder, {args.layers} layer(s), {len(calls)} calls "
          f"({args.new_first} never-repeating shapes, then a mix), "
          f"{len({tuple(c) for c in calls})} distinct (B, S), {tokens.sum()} tokens, "
          f"{threads} thread(s), seed {args.seed}")
    print(f"machine: {H.machine_notes()}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()))
    print("inputs: " + ("plain numpy arrays (16-byte aligned)" if args.unaligned
                        else "64-byte aligned for every engine (--unaligned: plain numpy)"))
    print("verifying stax (JIT sync) against ORT first ...")
    H.verify_upfront(workdir, model_path, args.seed, notes)

    ref_dir = os.path.join(workdir, "ref")
    os.makedirs(ref_dir, exist_ok=True)
    runs = []
    plan = [("ort", "ort", {})]
    if "stax" in engines:
        plan.append(("stax", "stax", {"STAX_LOG": "jit", "STAX_JIT_CACHE_DIR":
                                      tempfile.mkdtemp(prefix="jit_cache_py_", dir=workdir)}))
    if "torch" in engines:
        plan.append(("torch", "torch", {}))
    logs = {}
    for label, engine, extra in plan:
        log = os.path.join(workdir, f"{label}.log") if engine == "stax" else None
        logs[label] = log
        runs.append(H.run_worker(workdir, label, engine, threads, model_path, calls, args.seed,
                                 ref_dir, notes, extra_env=extra, log_path=log, align=align))
    cli = {}
    if "stax" in engines and not args.no_cli:
        cli = cli_cache_runs(args, workdir, model_path, calls, threads)
    H.check_diffs(runs, notes)

    by = {r["label"]: r for r in runs}
    peer = by["ort"]
    phase = np.arange(len(calls)) < args.new_first
    summary = {}
    print()
    print(f"S6 results ({threads} thread(s); latency in ms; 'new' = first call of a shape; "
          f"ratio = per-call latency / ORT's on the same call, median (p10-p90))")
    print(f"{'run':<11}{'total s':>8}{'tok/s':>8}{'p50':>8}{'p99':>9}{'new p50':>9}{'new p99':>9}"
          f"{'seen p50':>9}{'seen p99':>9}{'ratio first ' + str(args.new_first):>20}"
          f"{'ratio mix':>20}{'ratio seen':>20}")
    for r in runs:
        s = H.summarize(r, calls)
        ratio = np.asarray(r["latency_s"]) / np.asarray(peer["latency_s"])
        occ = np.asarray(r["occurrence"])
        cells = {}
        for name, sel in (("first", phase), ("mix", ~phase), ("seen", occ > 1)):
            v = ratio[sel]
            cells[name] = (H.pct(v, 50), H.pct(v, 10), H.pct(v, 90))
        s["ratio_vs_ort"] = {k: {"median": v[0], "p10": v[1], "p90": v[2]}
                             for k, v in cells.items()}
        for name, sel in (("first", phase), ("mix", ~phase)):
            lat = np.asarray(r["latency_s"])[sel]
            s[f"{name}_p50_ms"], s[f"{name}_p99_ms"] = H.pct(lat, 50) * 1e3, H.pct(lat, 99) * 1e3
            s[f"{name}_tokens_per_s"] = float(tokens[sel].sum() / lat.sum()) if len(lat) else None
        if r["engine"] == "stax":
            s["jit_log"] = H.parse_jit_log(logs[r["label"]])
        summary[r["label"]] = s
        f3 = lambda c: f"{c[0]:.2f} ({c[1]:.2f}-{c[2]:.2f})"  # noqa: E731
        print(f"{r['label']:<11}{s['total_s']:>8.1f}{s['tokens_per_s']:>8.0f}{s['p50_ms']:>8.1f}"
              f"{s['p99_ms']:>9.1f}{s['new_p50_ms']:>9.1f}{s['new_p99_ms']:>9.1f}"
              f"{H.fmt(s['seen_p50_ms']):>9}{H.fmt(s['seen_p99_ms']):>9}"
              f"{f3(cells['first']):>20}{f3(cells['mix']):>20}{f3(cells['seen']):>20}")
    print(f"\nper phase (p50 / p99 ms, tokens/s): first {args.new_first} calls | the mix")
    for r in runs:
        s = summary[r["label"]]
        print(f"  {r['label']:<11} {s['first_p50_ms']:.1f} / {s['first_p99_ms']:.1f}, "
              f"{s['first_tokens_per_s']:.0f} | {H.fmt(s['mix_p50_ms'])} / "
              f"{H.fmt(s['mix_p99_ms'])}, {H.fmt(s['mix_tokens_per_s'], 0)}")
    for label in ("stax",):
        if label not in summary:
            continue
        s, r = summary[label], by[label]
        j = s["jit_log"] or {}
        k, c, v = j.get("kernel", {}), j.get("cache_load", {}), j.get("version", {})
        print(f"\n{label}: {s['compiles']} versions compiled ({s['failures']} failed, "
              f"{s['evictions']} evicted), {s['compile_time_s']:.1f} s on the compiler thread; "
              f"drain after the last call {r['drain_s']:.1f} s")
        if k.get("count"):
            print(f"  per kernel (lower + LLVM, STAX_LOG=jit): {k['count']} kernels, median "
                  f"{k['median_ms']:.1f} ms, p99 {k['p99_ms']:.1f} ms, max {k['max_ms']:.1f} ms")
        if c.get("count"):
            print(f"  loaded from the object cache: {c['count']} kernels, median "
                  f"{c['median_ms']:.2f} ms, p99 {c['p99_ms']:.2f} ms")
        if v.get("count"):
            print(f"  per version (a shape's 12 kernels): median {v['median_ms']:.0f} ms, p99 "
                  f"{v['p99_ms']:.0f} ms")
        print("  " + H.interp_text(s))
        occ = np.asarray(r["occurrence"])
        waited = (occ >= 2) & (np.asarray(r["call_kind"]) != "compiled")
        lat = np.asarray(r["latency_s"])
        s["calls_waited_for_compiler"] = int(waited.sum())
        if waited.any():
            print(f"  calls that waited for a compiler (seen shape, not fully compiled): "
                  f"{int(waited.sum())}, p50 {H.pct(lat[waited], 50) * 1e3:.1f} ms, "
                  f"ratio to ORT p50 "
                  f"{H.pct(lat[waited] / np.asarray(peer['latency_s'])[waited], 50):.2f}")

    os.makedirs(args.out, exist_ok=True)
    if cli:
        print_cli(cli, summary.get("ort"), tokens)
    payload = {"scenario": "S6", "args": vars(args), "calls": calls, "versions": vers,
               "cli_object_cache_runs": cli,
               "machine": H.machine_notes(), "notes": notes, "summary": summary, "runs": runs,
               "wall_s": time.perf_counter() - started}
    with open(os.path.join(args.out, "s6.json"), "w") as f:
        json.dump(payload, f, indent=1)
    plt = H.try_pyplot()
    if plt is None:
        notes.append("matplotlib not installed: no plot")
    else:
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(13, 8), sharex=True)
        colors = {"ort": "tab:blue", "stax": "tab:red", "torch": "tab:green"}
        idx = np.arange(len(calls))
        for r in runs:
            lat = np.asarray(r["latency_s"]) * 1e3
            occ = np.asarray(r["occurrence"])
            ax.plot(idx, lat / tokens, lw=0.7, c=colors[r["label"]], label=r["label"])
            ax.scatter(idx[occ == 1], (lat / tokens)[occ == 1], s=6, c=colors[r["label"]])
            if r["label"] != "ort":
                ax2.plot(idx, lat / (np.asarray(peer["latency_s"]) * 1e3), lw=0.7,
                         c=colors[r["label"]], label=r["label"])
        for a in (ax, ax2):
            a.axvline(args.new_first - 0.5, c="k", lw=0.8, ls="--")
            a.set_yscale("log")
            a.legend(fontsize=8)
        ax.set_ylabel("ms per token (dots: new shape)")
        ax2.set_ylabel("latency / ORT latency")
        ax2.axhline(1.0, c="tab:blue", lw=0.8)
        ax2.set_xlabel(f"call (first {args.new_first}: never-repeating shapes, then the mix)")
        ax.set_title(f"S6 stream of new shapes, BERT layer, {threads} thread(s)")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "s6.png"), dpi=110)
    for note in notes:
        print("note: " + note)
    print(f"wrote {os.path.join(args.out, 's6.json')}"
          + ("" if plt is None else f" and {os.path.join(args.out, 's6.png')}")
          + f"; wall {time.perf_counter() - started:.0f} s")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
