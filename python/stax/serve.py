"""Serving a stax model with Ray Serve: dynamic batching over N replicas (docs/serve.md).

    pip install stax[serve]

    from ray import serve
    import stax.serve
    app = stax.serve.deployment("model.onnx", replicas=2, threads=2, max_batch_size=32)
    serve.run(app)                           # HTTP on :8000, or a handle in Python

Requests that reach a replica within ``batch_wait_timeout_s`` of each other are joined by
``@serve.batch`` into one call: every input is concatenated along its first (batch) dim, the
model runs once, and every output is split back along its first dim in the requests' sizes.
So a replica sees varying batch sizes, which stax's shape-generic kernels are compiled for
once (docs/jit.md). Requests whose other dims differ (a different sequence length) are run as
separate calls within the batch; a request that fails (a wrong shape, an unknown input) fails
alone, with the model's error.

Each replica loads the model itself, from a path every node can read or from bytes (an ONNX
model, a program saved by Model.save, or ``pickle.dumps(model)``), and runs it on a thread
pool of its own with ``threads`` threads; Ray reserves that many CPUs for it.

Importing this module needs Ray; ``import stax`` does not.
"""

import asyncio
import os
import pickle

import numpy as np

try:
    from ray import serve
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("stax.serve needs Ray Serve: pip install 'stax[serve]' (or 'ray[serve]')"
                      f" ({error})") from error

from . import _C
from ._batching import Failed, batched_call, load_source
from ._kernel import Model
from ._options import Options

__all__ = ["StaxDeployment", "deployment", "batched_call", "load_source"]


class StaxDeployment:
    """A Ray Serve deployment class (use :func:`deployment` to make one): each replica loads
    the model and serves it with dynamic batching.

    * ``await handle.infer.remote({"x": array})`` (a DeploymentHandle) returns
      {output name: array} for that request alone;
    * HTTP: POST a JSON object {"inputs": {name: nested list}} (and optionally
      "outputs": [names]); the answer is {"outputs": {name: nested list}}, or status 400 with
      {"error": text} for a request the model refuses.
    """

    def __init__(self, source, threads=1, options=None, max_batch_size=16,
                 batch_wait_timeout_s=0.005):
        options = Options() if options is None else options
        if not isinstance(options, Options):
            raise TypeError(f"options must be a stax.Options, not {type(options).__name__}")
        self.threads = threads
        self.model = load_source(source, options.copy(num_threads=threads))
        self.replica = f"pid {os.getpid()}"
        self._batch.set_max_batch_size(max_batch_size)
        self._batch.set_batch_wait_timeout_s(batch_wait_timeout_s)
        self.batches = []  # the size of each batch this replica ran (for tests and tuning)

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.005)
    async def _batch(self, feeds):
        self.batches.append(len(feeds))
        # In a thread: the event loop keeps taking requests while the model runs (the GIL is
        # released inside the call).
        return await asyncio.get_running_loop().run_in_executor(
            None, batched_call, self.model, feeds)

    async def infer(self, feed):
        """One request's outputs, {name: array}, computed in a batch with whatever other
        requests arrived with it; raises the model's error for this request."""
        result = await self._batch(feed)
        if isinstance(result, Failed):
            raise result.error
        return result

    def info(self):
        """What this replica is: its process, threads, the batch sizes it ran, and the model's
        call statistics (how many calls ran compiled)."""
        return {"replica": self.replica, "threads": self.threads, "batches": list(self.batches),
                "calls": self.model.stats["calls"]}

    async def __call__(self, request):
        from starlette.responses import JSONResponse

        try:
            body = await request.json()
            if not isinstance(body, dict) or not isinstance(body.get("inputs"), dict):
                raise ValueError('the body must be a JSON object {"inputs": {name: values}}')
            outputs = await self.infer(body["inputs"])
            wanted = body.get("outputs")
            if wanted is not None:
                missing = [n for n in wanted if n not in outputs]
                if missing:
                    raise _C.InvalidArgumentError(f"unknown outputs {missing}; the outputs "
                                                  f"are {list(outputs)}")
                outputs = {n: outputs[n] for n in wanted}
        except (ValueError, TypeError, _C.Error) as error:
            return JSONResponse({"error": f"{type(error).__name__}: {error}"}, status_code=400)
        return JSONResponse({"outputs": {n: np.asarray(v).tolist() for n, v in outputs.items()}})


def deployment(source, *, replicas=1, threads=1, options=None, max_batch_size=16,
               batch_wait_timeout_s=0.005, name="stax", max_ongoing_requests=None,
               ray_actor_options=None):
    """A Ray Serve application serving ``source`` (a path every node can read, or bytes:
    an ONNX model, a saved program, ``pickle.dumps(model)``; or a stax.Model):
    ``serve.run(deployment(...))``.

    replicas: how many replicas (processes, placed by Ray anywhere in the cluster); threads:
    each replica's thread pool (Ray reserves as many CPUs per replica); options: a
    stax.Options for loading (JIT mode, cache folder, ...; num_threads comes from threads);
    max_batch_size / batch_wait_timeout_s: @serve.batch's limits (requests per batch, and how
    long the first request of a batch waits for others); max_ongoing_requests: requests a
    replica accepts at once (default: enough to fill two batches); ray_actor_options: given
    to Ray as they are (num_cpus defaults to threads)."""
    if not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"replicas must be an int >= 1, not {replicas!r}")
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, not {threads!r}")
    if not isinstance(max_batch_size, int) or max_batch_size < 1:
        raise ValueError(f"max_batch_size must be an int >= 1, not {max_batch_size!r}")
    if isinstance(source, Model):
        source = pickle.dumps(source)
    actor = {"num_cpus": threads, **(ray_actor_options or {})}
    ongoing = max_ongoing_requests if max_ongoing_requests is not None else 2 * max_batch_size
    cls = serve.deployment(StaxDeployment, name=name)
    return cls.options(num_replicas=replicas, ray_actor_options=actor,
                       max_ongoing_requests=ongoing).bind(
        source, threads=threads, options=options, max_batch_size=max_batch_size,
        batch_wait_timeout_s=batch_wait_timeout_s)
