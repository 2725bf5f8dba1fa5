"""Sends concurrent requests of mixed batch sizes to serve_model.py's demo model over HTTP and
prints throughput and latency percentiles.

    python examples/serve/client.py --requests 200 --concurrency 32 --url http://127.0.0.1:8000/
"""
import argparse
import concurrent.futures
import json
import time
import urllib.request

import numpy as np


def post(url, x):
    body = json.dumps({"inputs": {"x": x.tolist()}}).encode()
    start = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=60) as r:
        answer = json.loads(r.read())
    y = np.array(answer["outputs"]["y"], np.float32)
    if y.shape != (x.shape[0], 16):
        raise RuntimeError(f"answer of shape {y.shape} for a batch of {x.shape[0]}")
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((int(rng.integers(1, 9)), 64)).astype(np.float32)
               for _ in range(args.requests)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        latencies = np.sort(list(pool.map(lambda x: post(args.url, x), batches)))
    elapsed = time.perf_counter() - start
    rows = sum(x.shape[0] for x in batches)
    pct = {p: latencies[int(np.ceil(p / 100 * len(latencies))) - 1] * 1e3 for p in (50, 90, 99)}
    print(f"{len(batches)} requests ({rows} rows) in {elapsed:.2f} s: "
          f"{len(batches) / elapsed:.0f} requests/s; latency p50 {pct[50]:.1f} ms, "
          f"p90 {pct[90]:.1f} ms, p99 {pct[99]:.1f} ms")


if __name__ == "__main__":
    main()
