"""stax.serve: dynamic batching (stax._batching, checked without Ray against direct calls),
models that reach replicas as paths, bytes or pickles, and a Ray Serve deployment of 2
replicas on a local Ray instance (loopback only) answering a burst of concurrent requests of
mixed batch sizes, by handle and over HTTP, every answer checked against a direct call.

The Ray part skips with the reason when ray[serve] is not installed (CI does not install it:
pip install 'stax[serve]')."""
import asyncio
import json
import pickle
import socket
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import stax
from stax._batching import Failed, batched_call, load_source

onnx = pytest.importorskip("onnx", reason="onnx is needed to write the test models")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(3)
W = RNG.standard_normal((8, 4)).astype(np.float32)


def model_bytes(reduce_batch=False):
    """y = relu(x @ W) for x [B, S, 8] (S open too), or with reduce_batch its sum over the
    batch dim (an output that cannot be split back)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"])]
    if reduce_batch:
        nodes.append(helper.make_node("ReduceSum", ["r", "axes"], ["y"], keepdims=1))
        out_shape = [1, "S", 4]
        inits = [numpy_helper.from_array(np.array([0], np.int64), "axes")]
    else:
        nodes.append(helper.make_node("Identity", ["r"], ["y"]))
        out_shape, inits = ["B", "S", 4], []
    graph = helper.make_graph(
        nodes, "serve_test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(W, "w")] + inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def reference(x):
    return np.maximum(x @ W, 0)


def request(rows, seq=3):
    return {"x": RNG.standard_normal((rows, seq, 8)).astype(np.float32)}


@pytest.fixture(scope="module")
def model():
    return stax.load(model_bytes(), options=stax.Options(num_threads=1, jit="sync"))


# -- batching, without Ray ----------------------------------------------------------------------

def test_a_batch_of_mixed_sizes_runs_as_one_call_and_splits_back(model):
    feeds = [request(rows) for rows in (1, 3, 2, 5)]
    runs = model.stats["runs"]
    results = batched_call(model, feeds)
    assert model.stats["runs"] == runs + 1  # one call for the four requests
    for feed, result in zip(feeds, results):
        assert list(result) == ["y"] and result["y"].shape == (feed["x"].shape[0], 3, 4)
        np.testing.assert_allclose(result["y"], reference(feed["x"]), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(result["y"], model(**feed)["y"])


def test_requests_of_other_shapes_run_in_calls_of_their_own(model):
    feeds = [request(2, seq=3), request(1, seq=5), request(4, seq=3), request(1, seq=5)]
    runs = model.stats["runs"]
    results = batched_call(model, feeds)
    assert model.stats["runs"] == runs + 2  # S=3 and S=5
    for feed, result in zip(feeds, results):
        np.testing.assert_allclose(result["y"], reference(feed["x"]), rtol=1e-5, atol=1e-6)


def test_a_bad_request_fails_alone(model):
    good = request(2)
    bad_dim = {"x": np.ones((2, 3, 7), np.float32)}       # the last dim must be 8
    unknown = {"x": good["x"], "z": good["x"]}
    no_batch = {"x": np.float32(1.0)}
    results = batched_call(model, [good, bad_dim, unknown, no_batch, "not a dict", good])
    for i in (0, 5):
        np.testing.assert_allclose(results[i]["y"], reference(good["x"]), rtol=1e-5, atol=1e-6)
    assert isinstance(results[1], Failed) and isinstance(results[1].error, stax.Error)
    assert "8" in str(results[1].error) and "7" in str(results[1].error)
    assert isinstance(results[2], Failed) and "unknown ['z']" in str(results[2].error)
    assert isinstance(results[3], Failed) and "batch (first) dim" in str(results[3].error)
    assert isinstance(results[4], Failed) and isinstance(results[4].error, TypeError)


def test_outputs_that_do_not_split_fall_back_to_one_call_per_request():
    summed = stax.load(model_bytes(reduce_batch=True), options=stax.Options(jit="off"))
    feeds = [request(2), request(3)]
    results = batched_call(summed, feeds)
    for feed, result in zip(feeds, results):
        np.testing.assert_allclose(result["y"], reference(feed["x"]).sum(0, keepdims=True),
                                   rtol=1e-5, atol=1e-5)


def test_models_reach_replicas_as_paths_bytes_programs_and_pickles(tmp_path, model):
    path = tmp_path / "model.onnx"
    path.write_bytes(model_bytes())
    program = tmp_path / "model.staxprog"
    model.save(program)
    options = stax.Options(num_threads=2, jit="off")
    feed = request(3)
    sources = [path, str(path), model_bytes(), program.read_bytes(), pickle.dumps(model)]
    for source in sources:
        loaded = load_source(source, options)
        assert isinstance(loaded, stax.Model)
        assert loaded.options.num_threads == 2 and loaded.options.jit == "off"
        np.testing.assert_allclose(loaded(**feed)["y"], reference(feed["x"]), rtol=1e-5,
                                   atol=1e-6)
    with pytest.raises(TypeError, match="path, bytes or a stax.Model"):
        load_source(42, options)
    with pytest.raises(TypeError, match="not a stax.Model"):
        load_source(pickle.dumps([1, 2]), options)


def test_a_model_pickles_with_its_options_and_return_convention(model):
    copy = pickle.loads(pickle.dumps(model))
    assert type(copy) is stax.Model and copy.options == model.options
    feed = request(2)
    np.testing.assert_array_equal(copy(**feed)["y"], model(**feed)["y"])
    x = stax.placeholder([stax.symbol("B"), 4], name="x")
    kernel = stax.compile([stax.relu(x), x * 2.0], options=stax.Options(jit="off"))
    again = pickle.loads(pickle.dumps(kernel))
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    assert isinstance(again(a), tuple)  # compile() of a list returns a tuple, still
    for u, v in zip(kernel(a), again(a)):
        np.testing.assert_array_equal(u, v)


# -- Ray Serve ------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_serve():
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'stax[serve]')")
    serve = pytest.importorskip("ray.serve", reason="ray[serve] is not installed "
                                                    "(pip install 'stax[serve]')")
    # A local instance on the loopback interface only, no dashboard.
    ray.init(address="local", num_cpus=2, include_dashboard=False,
             _node_ip_address="127.0.0.1", log_to_driver=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    yield serve, port
    serve.shutdown()
    ray.shutdown()


async def burst(handle, feeds):
    """Sends every request at once; returns the results and each request's latency."""
    async def one(feed):
        start = time.perf_counter()
        result = await handle.infer.remote(feed)
        return result, time.perf_counter() - start

    return await asyncio.gather(*(one(feed) for feed in feeds))


def test_two_replicas_answer_a_burst_of_mixed_batch_sizes(ray_serve, model):
    serve, port = ray_serve
    import stax.serve

    app = stax.serve.deployment(model_bytes(), replicas=2, threads=1, max_batch_size=8,
                                batch_wait_timeout_s=0.02,
                                options=stax.Options(jit="on", jit_cache_dir=False))
    handle = serve.run(app, name="stax_test", route_prefix="/stax", blocking=False)
    status = serve.status().applications["stax_test"].deployments["stax"]
    assert status.replica_states.get("RUNNING") == 2, status

    sizes = [1, 2, 3, 5, 8]
    feeds = [request(sizes[i % len(sizes)], seq=3 if i % 4 else 5) for i in range(96)]
    start = time.perf_counter()
    answers = asyncio.run(burst(handle, feeds))
    elapsed = time.perf_counter() - start
    assert len(answers) == len(feeds)  # none lost
    for feed, (result, _) in zip(feeds, answers):
        np.testing.assert_allclose(result["y"], model(**feed)["y"], rtol=1e-5, atol=1e-6)
    latencies = np.sort([latency for _, latency in answers])
    rows = sum(f["x"].shape[0] for f in feeds)
    p50, p99 = latencies[len(latencies) // 2], latencies[int(np.ceil(0.99 * len(latencies))) - 1]
    replicas = {}
    for _ in range(12):
        info = handle.info.remote().result(timeout_s=60)
        replicas[info["replica"]] = info
    batches = [b for info in replicas.values() for b in info["batches"]]
    print(f"\nstax.serve: {len(feeds)} requests ({rows} rows) in {elapsed:.2f} s: "
          f"{len(feeds) / elapsed:.0f} requests/s, {rows / elapsed:.0f} rows/s; latency p50 "
          f"{p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms; {len(replicas)} replicas seen, batches "
          f"of {sorted(batches)}")
    assert all(info["threads"] == 1 for info in replicas.values())
    assert max(batches) > 1  # requests were joined
    if len(replicas) == 2:  # every request was counted by the replica that ran it
        assert sum(batches) == len(feeds), batches

    # Over HTTP: an answer, and a refused request with the model's error.
    url = f"http://127.0.0.1:{port}/stax"
    feed = request(2)
    body = json.dumps({"inputs": {"x": feed["x"].tolist()}}).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=60) as r:
        answer = json.loads(r.read())
    np.testing.assert_allclose(np.array(answer["outputs"]["y"], np.float32),
                               model(**feed)["y"], rtol=1e-5, atol=1e-6)
    bad = json.dumps({"inputs": {"x": [[[1.0] * 7]]}}).encode()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, data=bad), timeout=60)
    assert refused.value.code == 400
    assert "ShapeError" in json.loads(refused.value.read())["error"]
    serve.delete("stax_test")
