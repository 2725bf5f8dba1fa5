#!/usr/bin/env python3
"""Shared machinery of bench/s2.py and bench/s6.py (BENCH.md S2, S6): shape streams, one
worker process per (engine, thread count) run, correctness checks against ONNX Runtime,
summaries, JSON and plots. Not a benchmark by itself.

Every run is its own process (`python bench/harness.py worker SPEC.json`) so that thread
pools, the JIT's caches and environment variables (STAX_NUM_THREADS, STAX_JIT_CACHE_DIR,
STAX_LOG, OPENBLAS_CORETYPE) are per run. A worker calls the model once on a warm-up shape
that the stream never uses (S = 7), then on every (B, S) of the stream in order, timing each
call alone (time.perf_counter around the call; inputs are made before, outputs checked after).

Engines:
  ort    onnxruntime.InferenceSession, CPU provider, intra_op_num_threads = threads,
         inter_op_num_threads = 1, default graph optimizations. Saves its output for the first
         call of every shape as the reference the other engines are compared with.
  stax   stax.load(model, jit=...) (python/stax, the C library linked into stax._C);
         STAX_NUM_THREADS and stax.set_num_threads(threads). After each call (outside the timed
         part) it reads the kernel's JIT counters, so every call is known to have run compiled
         (hits) or interpreted (misses).
  torch  PyTorch eager, the same layer written with torch.nn.functional from the ONNX file's
         initializers; torch.set_num_threads(threads), inference_mode.
"""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HIDDEN = 768
TOLERANCE = 1e-3
WARMUP_SHAPE = (1, 7)          # outside every stream (S >= 8): never seen by the JIT again


# ---------------------------------------------------------------------------------- shapes

BATCHES = (1, 2, 4, 8)


def draw_seq(rng, s_min=8, s_max=512, median=40.0, sigma=0.9, multiple=1):
    """Sequence length: log-normal around `median` (most short, a tail of long ones), clipped
    to [s_min, s_max], rounded up to a multiple of `multiple` (padding buckets; 1 = any)."""
    while True:
        s = int(round(median * np.exp(sigma * rng.standard_normal())))
        if multiple > 1:
            s = -(-s // multiple) * multiple
        if s_min <= s <= s_max:
            return s


def draw_shape(rng, multiple=1):
    return int(rng.choice(BATCHES)), draw_seq(rng, multiple=multiple)


def make_input(seed, occurrence, batch, seq, align=64):
    """x for the occurrence-th call of shape (batch, seq): the same in every run and engine.
    align=64: the data starts on a 64-byte boundary (a copy outside the timed part); 0: the
    array numpy makes (16-byte aligned: its address modulo 64 changes from call to call, and
    stax's JIT signature includes 64-byte alignment, so one shape makes two signatures)."""
    x = np.random.default_rng([seed, batch, seq, occurrence]).standard_normal(
        (batch, seq, HIDDEN), dtype=np.float32)
    if not align:
        return x
    raw = np.empty(x.size + align // 4, dtype=np.float32)
    offset = (-raw.ctypes.data % align) // 4
    out = raw[offset:offset + x.size].reshape(x.shape)
    out[...] = x
    assert out.ctypes.data % align == 0
    return out


# ---------------------------------------------------------------------------------- engines

def _ort_session(model_path, threads):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})[0]


def _torch_model(model_path, threads):
    import onnx
    import torch
    from onnx import numpy_helper
    torch.set_num_threads(threads)
    model = onnx.load(model_path)
    w = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in model.graph.initializer}
    layers = sorted({n.split("_")[0] for n in w if re.match(r"l\d+_", n)}, key=lambda p: int(p[1:]))
    heads = int(w["heads_dims"][0])
    F = torch.nn.functional

    def layer(x, p):
        b, s, h = x.shape
        d = h // heads
        q = (x @ w[p + "_wq"] + w[p + "_bq"]).view(b, s, heads, d).transpose(1, 2)
        k = (x @ w[p + "_wk"] + w[p + "_bk"]).view(b, s, heads, d).permute(0, 2, 3, 1)
        v = (x @ w[p + "_wv"] + w[p + "_bv"]).view(b, s, heads, d).transpose(1, 2)
        probs = torch.softmax((q @ k) * w[p + "_scale"], dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(b, s, h)
        h1 = F.layer_norm(x + ctx @ w[p + "_wo"] + w[p + "_bo"], (h,), w[p + "_ln1_g"],
                          w[p + "_ln1_b"], 1e-12)
        f = h1 @ w[p + "_w1"] + w[p + "_b1"]
        f = f * (1 + torch.erf(f / w[p + "_gelu_sqrt2"])) * 0.5
        return F.layer_norm(h1 + f @ w[p + "_w2"] + w[p + "_b2"], (h,), w[p + "_ln2_g"],
                            w[p + "_ln2_b"], 1e-12)

    def run(x):
        with torch.inference_mode():
            y = torch.from_numpy(x)
            for p in layers:
                y = layer(y, p)
            return y.numpy()
    return run


def _stax_model(model_path, threads, jit):
    import stax
    stax.set_num_threads(threads)
    model = stax.load(model_path, jit=jit)
    return model, (lambda x: model(x=x)["y"])


def versions():
    out = {"python": sys.version.split()[0], "numpy": np.__version__}
    for name in ("onnx", "onnxruntime", "torch", "stax", "matplotlib"):
        try:
            module = __import__(name)
            out[name] = getattr(module, "__version__", "?")
            if name == "stax":
                out["stax_extension"] = module._C.__file__
        except Exception as error:  # noqa: BLE001 - a missing peer is reported, not fatal
            out[name] = f"not available ({type(error).__name__}: {error})"
    return out


def worker(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    engine, threads, calls = spec["engine"], spec["threads"], spec["calls"]
    ref_dir, seed = spec["ref_dir"], spec["seed"]
    stax_model = None
    t0 = time.perf_counter()
    if engine == "ort":
        run = _ort_session(spec["model"], threads)
    elif engine == "torch":
        run = _torch_model(spec["model"], threads)
    else:
        stax_model, run = _stax_model(spec["model"], threads, spec.get("jit", "on"))
    load_s = time.perf_counter() - t0

    def counters():
        if stax_model is None:
            return 0, 0, {}
        stats = stax_model.stats
        return stats["hits"], stats["misses"], stats["calls"]

    verify = spec.get("verify", False)
    align = spec.get("align", 64)
    run(make_input(seed, 0, *WARMUP_SHAPE, align=align))
    hits0, misses0, calls0 = counters()
    seen = {}
    latency, hits, misses, occurrence, diffs, kinds = [], [], [], [], {}, []
    start = time.perf_counter()
    for index, (batch, seq) in enumerate(calls):
        key = f"{batch}x{seq}"
        seen[key] = seen.get(key, 0) + 1
        x = make_input(seed, 1 if verify else seen[key], batch, seq, align=align)
        t = time.perf_counter()
        y = run(x)
        latency.append(time.perf_counter() - t)
        occurrence.append(seen[key])
        h, m, c = counters()
        hits.append(h - hits0)
        misses.append(m - misses0)
        # How this call ran: every compilable group a kernel, some, or none.
        kinds.append(next((k for k in ("compiled", "partial", "interpreted")
                           if c.get(k, 0) > calls0.get(k, 0)), "interpreted"))
        hits0, misses0, calls0 = h, m, c
        if (seen[key] == 1 or verify) and ref_dir:
            path = os.path.join(ref_dir, key + ".npy")
            if engine == "ort":
                np.save(path, np.asarray(y))
            elif os.path.exists(path):
                d = float(np.max(np.abs(np.asarray(y) - np.load(path))))
                diffs[key] = max(d, diffs.get(key, 0.0))
    total_s = time.perf_counter() - start
    result = {"engine": engine, "threads": threads, "label": spec["label"], "load_s": load_s,
              "total_s": total_s, "latency_s": latency, "occurrence": occurrence,
              "max_abs_diff": diffs, "versions": versions()}
    if stax_model is not None:
        result["hits"], result["misses"], result["call_kind"] = hits, misses, kinds
        t = time.perf_counter()
        stax_model.drain()
        result["drain_s"] = time.perf_counter() - t
        stats = stax_model.stats
        result["stax_stats"] = {k: v for k, v in stats.items()
                                if k not in ("instruction_counts", "instruction_nanos")}
    with open(spec["out"], "w") as f:
        json.dump(result, f)


# ---------------------------------------------------------------------------------- driver side

def peer_env(threads, engine, notes):
    """Environment of one run: OPENBLAS_CORETYPE is removed for the peers (ORT, torch) only."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    if engine in ("ort", "torch") and "OPENBLAS_CORETYPE" in env:
        value = env.pop("OPENBLAS_CORETYPE")
        note = (f"OPENBLAS_CORETYPE={value} is set here: unset for the peer runs (ORT, torch) "
                "only, kept for stax")
        if note not in notes:
            notes.append(note)
            print("  note: " + note)
    return env


def run_worker(workdir, label, engine, threads, model, calls, seed, ref_dir, notes, jit="on",
               extra_env=None, log_path=None, verify=False, align=64):
    spec = {"engine": engine, "threads": threads, "model": model, "calls": calls, "seed": seed,
            "ref_dir": ref_dir, "jit": jit, "label": label, "verify": verify, "align": align,
            "out": os.path.join(workdir, f"result_{label}.json")}
    spec_path = os.path.join(workdir, f"spec_{label}.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    env = peer_env(threads, engine, notes)
    if engine == "stax":
        env["STAX_NUM_THREADS"] = str(threads)
    env.update(extra_env or {})
    sys.stdout.write(f"  running {label} ({len(calls)} calls) ... ")
    sys.stdout.flush()
    t = time.perf_counter()
    stderr = open(log_path, "w") if log_path else subprocess.PIPE
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "worker", spec_path],
                          env=env, stderr=stderr, stdout=subprocess.PIPE, text=True)
    if log_path:
        stderr.close()
    if proc.returncode != 0:
        err = proc.stderr if not log_path else open(log_path).read()[-4000:]
        sys.exit(f"\nFAILED: {label} exited with {proc.returncode}:\n{err}")
    print(f"{time.perf_counter() - t:.1f} s")
    with open(spec["out"]) as f:
        return json.load(f)


def check_diffs(results, notes):
    """Every non-ORT run against ORT's first-call outputs; fails loudly above TOLERANCE."""
    worst_all, bad = 0.0, []
    for r in results:
        if r["engine"] == "ort" or not r["max_abs_diff"]:
            continue
        key, worst = max(r["max_abs_diff"].items(), key=lambda kv: kv[1])
        worst_all = max(worst_all, worst)
        print(f"  correctness {r['label']}: {len(r['max_abs_diff'])} shapes vs ORT, "
              f"max abs diff {worst:.3e} (shape {key})")
        if not worst <= TOLERANCE:
            bad.append(f"{r['label']}: max abs diff {worst:.3e} at {key} > {TOLERANCE}")
    if bad:
        print("\n!!!! CORRECTNESS FAILURE !!!!\n" + "\n".join(bad), file=sys.stderr)
        sys.exit(1)
    return worst_all


def verify_upfront(workdir, model, seed, notes, shapes=((1, 8), (2, 33), (4, 100))):
    """Before any timing: stax (JIT sync, each shape three times so the compiled kernels run)
    vs ORT on a few shapes; exits on a mismatch."""
    ref = os.path.join(workdir, "verify_ref")
    os.makedirs(ref, exist_ok=True)
    calls = [list(s) for s in shapes]
    run_worker(workdir, "verify_ort", "ort", 1, model, calls, seed, ref, notes)
    calls3 = [list(s) for s in shapes for _ in range(3)]
    r = run_worker(workdir, "verify_stax", "stax", 1, model, calls3, seed, ref, notes, jit="sync",
                   extra_env={"STAX_JIT_CACHE_DIR": os.path.join(workdir, "verify_cache")},
                   verify=True)
    # every call is compared (the first of a shape is interpreted, the later ones compiled)
    check_diffs([r], notes)
    if r["stax_stats"]["compiles"] == 0:
        notes.append("stax compiled nothing in the upfront check (JIT not working here?)")


def pct(values, q):
    return float(np.percentile(np.asarray(values), q)) if len(values) else float("nan")


def summarize(r, calls):
    lat = np.asarray(r["latency_s"])
    tokens = np.asarray([b * s for b, s in calls])
    first = np.asarray(r["occurrence"]) == 1
    out = {"calls": len(lat), "tokens_per_s": float(tokens.sum() / lat.sum()),
           "p50_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3,
           "new_calls": int(first.sum()),
           "new_p50_ms": pct(lat[first], 50) * 1e3, "new_p99_ms": pct(lat[first], 99) * 1e3,
           "seen_p50_ms": pct(lat[~first], 50) * 1e3, "seen_p99_ms": pct(lat[~first], 99) * 1e3,
           "seen_tokens_per_s": float(tokens[~first].sum() / lat[~first].sum())
           if (~first).any() else float("nan"),
           "total_s": float(lat.sum())}
    if "call_kind" in r:
        kind = np.asarray(r["call_kind"])
        occ = np.asarray(r["occurrence"])
        interp = kind != "compiled"  # partly compiled or interpreted
        # a seen shape interpreted after it had already run compiled: its version was evicted
        # (at most 8 READY versions per segment, LRU); interpreted and never compiled before:
        # no kernel yet (compile queued or running, or evicted / dropped from the table of
        # counted signatures before this shape came back)
        ran_compiled, after_hit = set(), np.zeros(len(calls), dtype=bool)
        for i, c in enumerate(calls):
            key = tuple(c)
            after_hit[i] = key in ran_compiled
            if not interp[i]:
                ran_compiled.add(key)
        out["partial_calls"] = int((kind == "partial").sum())
        out["interpreted_calls"] = int((kind == "interpreted").sum())
        out["not_compiled_calls"] = int(interp.sum())
        out["interpreted_first_occurrence"] = int((interp & (occ == 1)).sum())
        out["interpreted_second_occurrence"] = int((interp & (occ == 2)).sum())
        out["interpreted_waiting"] = int((interp & (occ >= 3) & ~after_hit).sum())
        out["interpreted_evicted"] = int((interp & (occ >= 2) & after_hit).sum())
        out["compiled_calls"] = int((~interp).sum())
        out["shapes_ever_compiled"] = len(ran_compiled)
        s = r["stax_stats"]
        out["compiles"] = s["compiles"]
        out["compile_time_s"] = s["compile_time_s"]
        out["failures"] = s["failures"]
        out["evictions"] = s["evictions"]
        out["generic_versions"] = s.get("generic_versions", 0)
        out["exact_versions"] = s.get("exact_versions", 0)
        out["generic_compile_s"] = s.get("generic_compile_s", 0.0)
        out["exact_compile_s"] = s.get("exact_compile_s", 0.0)
    return out


def paired_ratio(r, peer):
    """Per call latency ratio stax / peer over the same call stream: median, p10, p90."""
    ratio = np.asarray(r["latency_s"]) / np.asarray(peer["latency_s"])
    return pct(ratio, 50), pct(ratio, 10), pct(ratio, 90)


def parse_jit_log(path):
    """Per-kernel compile times from STAX_LOG=jit: 'compiled kernel ...: lower X ms, LLVM Y ms'
    (a kernel loaded from the object cache is logged 'loaded from the object cache in Z ms' and
    then 'compiled kernel' too: counted as a load only), and per-version 'segment S: compiled (G group(s)) in T ms'."""
    kernel_ms, cache_load_ms, version_ms = [], [], []
    if not path or not os.path.exists(path):
        return None
    after_load = False
    with open(path, errors="replace") as f:
        for line in f:
            m = re.search(r"compiled kernel '[^']*': lower ([0-9.]+) ms, LLVM ([0-9.]+) ms", line)
            if m:
                if not after_load:          # a load is logged as 'compiled kernel' too
                    kernel_ms.append(float(m.group(1)) + float(m.group(2)))
                after_load = False
                continue
            m = re.search(r"loaded from the object cache in ([0-9.]+) ms", line)
            if m:
                cache_load_ms.append(float(m.group(1)))
                after_load = True
                continue
            m = re.search(r"segment \d+: compiled \(\d+ group\(s\)\) in ([0-9.]+) ms", line)
            if m:
                version_ms.append(float(m.group(1)))

    def stat(v):
        return {"count": len(v), "median_ms": pct(v, 50), "p99_ms": pct(v, 99),
                "max_ms": max(v) if v else float("nan"), "sum_ms": float(sum(v))}
    return {"kernel": stat(kernel_ms), "cache_load": stat(cache_load_ms),
            "version": stat(version_ms)}


def fmt(v, nd=1):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "-"
    return f"{v:.{nd}f}"


def try_pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except Exception:  # noqa: BLE001
        return None


def machine_notes():
    return {"cores": os.cpu_count(), "load_avg": os.getloadavg(),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}


def interp_text(s):
    """stax's calls, compiled or interpreted and why (summarize's counters)."""
    return (f"{s['compiled_calls']} calls ran fully compiled, {s['partial_calls']} partly, "
            f"{s['interpreted_calls']} interpreted; of the {s['not_compiled_calls']} not fully "
            f"compiled: {s['interpreted_first_occurrence']} first call of a shape, "
            f"{s['interpreted_second_occurrence']} second call, "
            f"{s['interpreted_waiting']} later calls with no (exact) kernel yet for some group "
            f"(not hot enough yet, compile queued or running, or evicted before use), "
            f"{s['interpreted_evicted']} after the shape had run fully compiled; {s['compiles']} versions compiled ({s['generic_versions']} "
            f"shape-generic in {s['generic_compile_s']:.1f} s, {s['exact_versions']} exact in "
            f"{s['exact_compile_s']:.1f} s held at the end; {s['failures']} failed, "
            f"{s['evictions']} evicted), {s['shapes_ever_compiled']} shapes ever ran fully "
            f"compiled, {s['compile_time_s']:.1f} s on the compiler thread")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        sys.path.insert(0, HERE)
        worker(sys.argv[2])
    else:
        sys.exit("usage: harness.py worker SPEC.json (started by bench/s2.py, bench/s6.py)")
