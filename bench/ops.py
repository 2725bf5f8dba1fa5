#!/usr/bin/env python3
"""Per-op speed of stax's interpreted (generic) kernels against ONNX Runtime, on the shapes of
the S2 layer (BERT-base: hidden 768, 12 heads, FFN 3072).

Every call of a stream interprets until its shape-generic kernel lands, so these kernels set
the speed of a stream's first calls (issue "shape-generic kernels", item 5). Each op is a
one-node ONNX model (GELU: the five-node Erf chain exporters write, which ORT fuses into one
Gelu kernel); stax runs it with the JIT off, ORT with its default graph optimizations, the
same intra-op thread count and its pool's spinning off (it ran beside stax in one process). The two engines alternate in blocks of calls in one process (one
process per thread count), so a drift of the machine's speed hits both; the table gives the median time of each and their ratio
(> 1: stax slower).

    .venv/bin/python bench/ops.py [--threads 1,2] [--batch 4] [--seq 128] [--calls 100]
                                  [--ops matmul,softmax,...]

Set STAX_ISA=avx2 (or sse2) to measure a capped ISA. OPENBLAS_CORETYPE is not touched: unset
it for this command if it is set, since ORT does not use OpenBLAS but numpy does.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN, HEADS, FFN = 768, 12, 3072


def _model(nodes, inputs, output, inits):
    graph = helper.make_graph(nodes, "op", inputs, [output], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _in(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _init(name, array):
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


def build(op, b, s, rng):
    """(model, feed) for one op at batch b, sequence s."""
    rows = ["B", "S"]
    f32 = np.float32
    if op in ("matmul_qkv", "matmul_ffn1", "matmul_ffn2"):
        k, n = {"matmul_qkv": (HIDDEN, HIDDEN), "matmul_ffn1": (HIDDEN, FFN),
                "matmul_ffn2": (FFN, HIDDEN)}[op]
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(f32)
        model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_in("x", rows + [k])],
                       _in("y", rows + [n]), [_init("w", w)])
        return model, {"x": rng.standard_normal((b, s, k)).astype(f32)}
    if op == "attention_qk":
        d = HIDDEN // HEADS
        model = _model([helper.make_node("MatMul", ["q", "k"], ["y"])],
                       [_in("q", ["B", HEADS, "S", d]), _in("k", ["B", HEADS, d, "S"])],
                       _in("y", ["B", HEADS, "S", "S"]), [])
        return model, {"q": rng.standard_normal((b, HEADS, s, d)).astype(f32),
                       "k": rng.standard_normal((b, HEADS, d, s)).astype(f32)}
    if op == "softmax":
        model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
                       [_in("x", ["B", HEADS, "S", "S"])], _in("y", ["B", HEADS, "S", "S"]), [])
        return model, {"x": rng.standard_normal((b, HEADS, s, s)).astype(f32)}
    x = rng.standard_normal((b, s, HIDDEN if op in ("layernorm", "add") else FFN)).astype(f32)
    dims = rows + [x.shape[-1]]
    if op == "layernorm":
        g = rng.standard_normal(HIDDEN).astype(f32)
        beta = rng.standard_normal(HIDDEN).astype(f32)
        node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1,
                                epsilon=1e-12)
        return _model([node], [_in("x", dims)], _in("y", dims),
                      [_init("g", g), _init("b", beta)]), {"x": x}
    if op == "add":
        bias = rng.standard_normal(HIDDEN).astype(f32)
        return _model([helper.make_node("Add", ["x", "bias"], ["y"])], [_in("x", dims)],
                      _in("y", dims), [_init("bias", bias)]), {"x": x}
    if op == "erf":
        return _model([helper.make_node("Erf", ["x"], ["y"])], [_in("x", dims)],
                      _in("y", dims), []), {"x": x}
    if op == "gelu":
        nodes = [helper.make_node("Div", ["x", "sqrt2"], ["xs"]),
                 helper.make_node("Erf", ["xs"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["e1"]),
                 helper.make_node("Mul", ["x", "e1"], ["xe"]),
                 helper.make_node("Mul", ["xe", "half"], ["y"])]
        inits = [_init("sqrt2", np.array(np.sqrt(2.0), f32)), _init("one", np.array(1.0, f32)),
                 _init("half", np.array(0.5, f32))]
        return _model(nodes, [_in("x", dims)], _in("y", dims), inits), {"x": x}
    raise SystemExit(f"unknown op {op!r}")


OPS = ("matmul_qkv", "matmul_ffn1", "matmul_ffn2", "attention_qk", "softmax", "layernorm",
       "add", "erf", "gelu")


def measure(op, b, s, threads, calls, workdir):
    import onnxruntime as ort
    import stax
    rng = np.random.default_rng(0)
    model, feed = build(op, b, s, rng)
    path = os.path.join(workdir, f"{op}.onnx")
    onnx.save(model, path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # ORT's pool threads spin long after a run and took the second core from stax's next
    # block (stax's Softmax at 2 threads measured 0.82-0.94 ms beside a spinning ORT, 0.57-0.61
    # beside a sleeping one); ORT's own times were the same either way.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    kernel = stax.load(path, jit="off")
    want = session.run(None, feed)[0]
    got = kernel(**feed)["y"]
    err = float(np.max(np.abs(np.asarray(got) - want)))
    scale = float(np.max(np.abs(want))) or 1.0
    if err > 1e-3 * scale:
        raise SystemExit(f"{op}: stax differs from ORT by {err} (max |y| {scale})")
    # Blocks of calls, alternating engines, the first calls of each block untimed: call-by-call
    # alternation would have ORT's pool threads, which spin for a while after a run, compete
    # with stax's for the cores, and a pause between blocks would let a virtual machine park
    # an idle core (waking it then costs about a millisecond per call).
    t_stax, t_ort = [], []
    block = max(1, calls // 5)
    for _ in range(0, calls, block):
        for fn, times in ((lambda: kernel(**feed), t_stax),
                          (lambda: session.run(None, feed), t_ort)):
            for _ in range(3):
                fn()
            for _ in range(block):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
    return float(np.median(t_stax)) * 1e3, float(np.median(t_ort)) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.worker:
        # stax's thread pool is sized once per process: one process per thread count.
        status = 0
        for threads in args.threads.split(","):
            env = dict(os.environ, STAX_NUM_THREADS=threads)
            status |= subprocess.call([sys.executable, os.path.abspath(__file__), "--worker",
                                       "--threads", threads, "--batch", str(args.batch),
                                       "--seq", str(args.seq), "--calls", str(args.calls),
                                       "--ops", args.ops], env=env)
        return status
    import onnxruntime as ort
    import stax
    print(f"\nstax {stax.__version__} (JIT off; STAX_ISA={os.environ.get('STAX_ISA', 'unset')}), "
          f"onnxruntime {ort.__version__}; (B, S) = ({args.batch}, {args.seq}); "
          f"median of {args.calls} calls in alternating blocks")
    if os.environ.get("OPENBLAS_CORETYPE"):
        print(f"note: OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} is set")
    threads = int(args.threads)
    stax.set_num_threads(threads)
    print(f"\n{stax.num_threads()} thread(s)\n{'op':<14}{'stax ms':>10}{'ORT ms':>10}"
          f"{'stax/ORT':>10}")
    with tempfile.TemporaryDirectory() as workdir:
        for op in args.ops.split(","):
            ms_stax, ms_ort = measure(op, args.batch, args.seq, threads, args.calls, workdir)
            print(f"{op:<14}{ms_stax:>10.3f}{ms_ort:>10.3f}{ms_stax / ms_ort:>10.2f}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
