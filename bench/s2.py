#!/usr/bin/env python3
"""BENCH.md S2: a BERT-base-like encoder layer (bench/models.py bert_encoder: hidden 768,
12 heads, FFN 3072, Erf GELU, post-LN; B and S dynamic), one stream of calls with batch in
{1, 2, 4, 8} and sequence length from 8..512 (log-normal, median 40: most short, a tail of
long ones; rounded up to a multiple of --s-multiple, default 8, as tokenizers pad), fixed seed.

Runs, each in its own process, at every thread count (default 1 and 2):
  ort     ONNX Runtime, CPU provider, intra_op_num_threads = threads
  stax    stax.load(jit="on"): background JIT, threshold 2 (a shape is compiled at its second
          call and used once the kernels land), STAX_NUM_THREADS = threads (+ the compiler's
          own thread), a fresh empty object cache (STAX_JIT_CACHE_DIR) per run
  torch   PyTorch eager (if installed), torch.set_num_threads(threads)
All see the same calls with the same inputs, 64-byte aligned (--unaligned: numpy's own
16-byte alignment, which splits stax's JIT signatures: see harness.make_input). Before any timing, stax (JIT sync) is checked
against ORT on three shapes; during the runs every first call of a shape is compared with ORT
(max abs diff printed, exit 1 above 1e-3).

Prints per thread count: tokens/s, p50/p99 latency per call (all calls, first call of a new
shape, calls of a seen shape), the median (p10-p90) of the per-call latency ratio to ORT,
and stax's compiled/interpreted call counts. Writes results/bench/s2/s2.json (every latency)
and s2.png (latency vs tokens per call).

usage: .venv/bin/python bench/s2.py [--calls 400] [--threads 1,2] [--layers 1] [--s-multiple 8]
       [--engines ort,stax,torch] [--out results/bench/s2] [--seed 0] [--rounds 1]
Default configuration: about 5-8 minutes on a 2-core machine.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--layers", type=int, default=1, help="1: the layer, 4: the stack")
    parser.add_argument("--s-multiple", type=int, default=8,
                        help="sequence lengths rounded up to a multiple of this (1: any)")
    parser.add_argument("--engines", default="ort,stax,torch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1,
                        help="run ORT and stax this many times each, alternating (a fresh stax "
                             "cache each time), and print every round's tokens/s ratio and "
                             "their median: the machine's speed drifts between runs")
    parser.add_argument("--out", default=os.path.join(H.ROOT, "results", "bench", "s2"))
    parser.add_argument("--unaligned", action="store_true",
                        help="plain numpy inputs (16-byte aligned) instead of 64-byte aligned")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    threads_list = [int(t) for t in args.threads.split(",")]
    engines = args.engines.split(",")
    notes = []
    started = time.perf_counter()

    vers = H.versions()
    if "torch" in engines and vers["torch"].startswith("not available"):
        engines.remove("torch")
        notes.append(f"torch left out: {vers['torch']}")
    workdir = tempfile.mkdtemp(prefix="stax_s2_")
    model_path = os.path.join(workdir, "bert.onnx")
    onnx.save(models.bert_encoder(layers=args.layers, seed=args.seed), model_path)
    rng = np.random.default_rng(args.seed)
    calls = [list(H.draw_shape(rng, args.s_multiple)) for _ in range(args.calls)]
    tokens = [b * s for b, s in calls]
    distinct = len({tuple(c) for c in calls})

    print(f"S2: BERT-base encoder, {args.layers} layer(s), {args.calls} calls, {distinct} distinct "
          f"(B, S), {sum(tokens)} tokens (p50 {int(np.median(tokens))}, max {max(tokens)} per "
          f"call), S multiple of {args.s_multiple}, seed {args.seed}")
    print(f"machine: {H.machine_notes()}")
    print("inputs: " + ("plain numpy arrays (16-byte aligned; stax's JIT signature includes "
                        "64-byte alignment, so a shape can make two signatures)" if args.unaligned
                        else "64-byte aligned for every engine (--unaligned: plain numpy)"))
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()))
    print("verifying stax (JIT sync) against ORT first ...")
    H.verify_upfront(workdir, model_path, args.seed, notes)

    ref_dir = os.path.join(workdir, "ref")
    os.makedirs(ref_dir, exist_ok=True)
    results = []
    extra_rounds = []  # (threads, round, engine, tokens/s) of rounds after the first
    for threads in threads_list:
        print(f"threads = {threads}:")
        for round_index in range(max(1, args.rounds)):
            for engine in ["ort"] + [e for e in engines if e != "ort"]:
                label = f"{engine}_t{threads}" + (f"_r{round_index + 1}" if round_index else "")
                extra = {}
                if engine == "stax":
                    extra["STAX_JIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="cache_", dir=workdir)
                r = H.run_worker(workdir, label, engine, threads, model_path, calls, args.seed,
                                 ref_dir, notes, extra_env=extra,
                                 align=0 if args.unaligned else 64)
                if round_index == 0:
                    results.append(r)
                else:
                    extra_rounds.append((threads, round_index, engine,
                                         H.summarize(r, calls)["tokens_per_s"]))
    H.check_diffs(results, notes)

    by = {r["label"]: r for r in results}
    summary = {}
    print()
    print(f"S2 results ({args.calls} calls per run; latency in ms; ratio = per-call latency / "
          f"ORT's on the same call, median (p10-p90); 'new' = first call of a shape)")
    header = (f"{'run':<10}{'thr':>4}{'tok/s':>9}{'p50':>8}{'p99':>9}{'new p50':>9}"
              f"{'new p99':>9}{'seen p50':>9}{'seen p99':>9}{'seen tok/s':>11}"
              f"{'tok/s vs ORT':>13}{'ratio vs ORT':>20}")
    print(header)
    for threads in threads_list:
        peer = by[f"ort_t{threads}"]
        peer_sum = H.summarize(peer, calls)
        for engine in ["ort"] + [e for e in engines if e != "ort"]:
            r = by[f"{engine}_t{threads}"]
            s = H.summarize(r, calls)
            med, p10, p90 = H.paired_ratio(r, peer)
            s["ratio_vs_ort"] = {"median": med, "p10": p10, "p90": p90}
            s["throughput_vs_ort"] = s["tokens_per_s"] / peer_sum["tokens_per_s"]
            summary[r["label"]] = s
            print(f"{engine:<10}{threads:>4}{s['tokens_per_s']:>9.0f}{s['p50_ms']:>8.1f}"
                  f"{s['p99_ms']:>9.1f}{s['new_p50_ms']:>9.1f}{s['new_p99_ms']:>9.1f}"
                  f"{H.fmt(s['seen_p50_ms']):>9}{H.fmt(s['seen_p99_ms']):>9}"
                  f"{H.fmt(s['seen_tokens_per_s'], 0):>11}{s['throughput_vs_ort']:>13.2f}"
                  f"{f'{med:.2f} ({p10:.2f}-{p90:.2f})':>20}")
    if args.rounds > 1:
        print("\ntokens/s vs ORT per round (ORT and stax alternating; round 1 is the table's):")
        for threads in threads_list:
            for engine in [e for e in engines if e != "ort"]:
                per = [summary[f"{engine}_t{threads}"]["throughput_vs_ort"]]
                for round_index in range(1, args.rounds):
                    got = {e: t for (th, ri, e, t) in extra_rounds
                           if th == threads and ri == round_index}
                    if engine in got and "ort" in got:
                        per.append(got[engine] / got["ort"])
                summary[f"{engine}_t{threads}"]["throughput_vs_ort_rounds"] = per
                print(f"  {engine} t{threads}: " + ", ".join(f"{x:.2f}" for x in per)
                      + f"; median {float(np.median(per)):.2f}")
    print()
    for threads in threads_list:
        if f"stax_t{threads}" not in summary:
            continue
        s = summary[f"stax_t{threads}"]
        r = by[f"stax_t{threads}"]
        print(f"stax t{threads}: " + H.interp_text(s) + f"; drain at the end {r['drain_s']:.1f} s")
    # per token-size bucket: where stax wins and loses (seen shapes only)
    buckets = [(1, 64), (65, 256), (257, 1024), (1025, 4096)]
    print("\nmedian per-call ratio stax / ORT by tokens per call (new | seen shapes):")
    for threads in threads_list:
        if f"stax_t{threads}" not in by:
            continue
        r, peer = by[f"stax_t{threads}"], by[f"ort_t{threads}"]
        ratio = np.asarray(r["latency_s"]) / np.asarray(peer["latency_s"])
        occ = np.asarray(r["occurrence"])
        tok = np.asarray(tokens)
        cells = []
        for lo, hi in buckets:
            sel = (tok >= lo) & (tok <= hi)
            new = ratio[sel & (occ == 1)]
            seen = ratio[sel & (occ > 1)]
            cells.append(f"{lo}-{hi}: {H.fmt(H.pct(new, 50), 2)} | {H.fmt(H.pct(seen, 50), 2)}"
                         f" (n={int(sel.sum())})")
        print(f"  t{threads}: " + "; ".join(cells))
        summary[f"stax_t{threads}"]["ratio_by_tokens"] = cells
        kind = np.asarray(r["call_kind"])
        split = {}
        for name in ("compiled", "partial", "interpreted"):
            sel = kind == name
            split[name] = {"calls": int(sel.sum()), "median": H.pct(ratio[sel], 50),
                           "p10": H.pct(ratio[sel], 10), "p90": H.pct(ratio[sel], 90)}
        summary[f"stax_t{threads}"]["ratio_by_call_kind"] = split
        print("      stax ms / ORT ms by how the call ran: " + "; ".join(
            f"{name} {split[name]['calls']} calls, {H.fmt(split[name]['median'], 2)} "
            f"({H.fmt(split[name]['p10'], 2)}-{H.fmt(split[name]['p90'], 2)})"
            for name in split))

    os.makedirs(args.out, exist_ok=True)
    payload = {"scenario": "S2", "args": vars(args), "calls": calls, "versions": vers,
               "machine": H.machine_notes(), "notes": notes, "summary": summary,
               "runs": results, "wall_s": time.perf_counter() - started}
    with open(os.path.join(args.out, "s2.json"), "w") as f:
        json.dump(payload, f, indent=1)
    plt = H.try_pyplot()
    if plt is None:
        notes.append("matplotlib not installed: no plot")
    else:
        fig, axes = plt.subplots(1, len(threads_list), figsize=(7 * len(threads_list), 5),
                                 squeeze=False)
        colors = {"ort": "tab:blue", "stax": "tab:red", "torch": "tab:green"}
        for ax, threads in zip(axes[0], threads_list):
            for engine in ["ort"] + [e for e in engines if e != "ort"]:
                r = by[f"{engine}_t{threads}"]
                lat = np.asarray(r["latency_s"]) * 1e3
                occ = np.asarray(r["occurrence"])
                tok = np.asarray(tokens)
                ax.scatter(tok[occ > 1], lat[occ > 1], s=10, c=colors[engine],
                           label=f"{engine} seen shape")
                ax.scatter(tok[occ == 1], lat[occ == 1], s=22, marker="x", c=colors[engine],
                           label=f"{engine} new shape")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("tokens per call (B*S)")
            ax.set_ylabel("latency per call (ms)")
            ax.set_title(f"S2 BERT layer x{args.layers}, {threads} thread(s)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "s2.png"), dpi=110)
    for note in notes:
        print("note: " + note)
    print(f"wrote {os.path.join(args.out, 's2.json')}"
          + ("" if plt is None else f" and {os.path.join(args.out, 's2.png')}")
          + f"; wall {time.perf_counter() - started:.0f} s")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
