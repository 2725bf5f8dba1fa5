"""Serves an ONNX model over HTTP with Ray Serve: N replicas with dynamic batching
(stax.serve, docs/serve.md).

    pip install 'stax[serve]' onnx
    python examples/serve/serve_model.py                 # a small demo model, 2 replicas
    python examples/serve/serve_model.py model.onnx --replicas 4 --threads 2 --port 8000

Then POST {"inputs": {name: nested lists}} to http://127.0.0.1:PORT/ (client.py does, with
concurrent requests of mixed batch sizes). Ctrl-C stops it. Without a model file it writes
a demo model (y = softmax(x @ W), x: [B, 64]) to the temporary folder first.
"""
import argparse
import pathlib
import signal
import tempfile
import time

import numpy as np
import ray
from ray import serve

import stax
import stax.serve

def demo_model(path):
    """y = softmax(x @ W) with an open batch dim B, as an ONNX file."""
    from onnx import TensorProto, helper, numpy_helper, save
    w = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Softmax", ["h"], ["y"], axis=-1)],
        "demo", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 16])],
        [numpy_helper.from_array(w, "w")])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", help="an ONNX model or saved stax program")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="threads per replica")
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument("--wait-ms", type=float, default=5.0, help="batch wait timeout")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--address", default=None,
                        help="a Ray cluster to join (ray start --head ...); default: a local one")
    args = parser.parse_args()
    path = pathlib.Path(args.model) if args.model else demo_model(pathlib.Path(tempfile.gettempdir()) / "stax-serve-demo.onnx")

    ray.init(address=args.address or "local", include_dashboard=False)
    serve.start(http_options={"host": args.host, "port": args.port})
    # Bytes, not the path: every replica gets the model wherever Ray places it.
    app = stax.serve.deployment(path.read_bytes(), replicas=args.replicas,
                                threads=args.threads, max_batch_size=args.max_batch_size,
                                batch_wait_timeout_s=args.wait_ms / 1e3)
    serve.run(app, name="stax", route_prefix="/")
    inputs = stax.load(path, jit="off").get_inputs()
    print(f"serving {path.name} at http://{args.host}:{args.port}/ with {args.replicas} "
          f"replicas of {args.threads} thread(s); inputs: "
          + ", ".join(f"{i.name} {i.type} {list(i.shape)}" for i in inputs))
    # Ctrl-C, or a TERM from a service manager: shut the deployment down.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()


if __name__ == "__main__":
    main()
