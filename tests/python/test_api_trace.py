"""stax.Options(trace=...) and Kernel.save_trace(): one Chrome trace-event file for every
thread that called the kernel, interpreted and compiled calls alike."""
import json
import threading

import numpy as np
import pytest

from test_api_support import stax


def kernel(**options):
    x = stax.placeholder(["N", 8], name="x")
    return stax.compile(stax.tanh(x @ np.eye(8, dtype=np.float32)) * 2,
                        options=stax.Options(**options))


def load(path):
    trace = json.loads(open(path).read())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    for e in events:
        assert e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["tid"], int) and e["name"]
    return trace, events


def test_trace_interpreted_calls(tmp_path):
    k = kernel(jit="off", trace=str(tmp_path / "t.json"))
    for n in (1, 3, 5):
        np.testing.assert_allclose(k(np.ones((n, 8), np.float32)), np.tanh(1.0) * 2, rtol=1e-6)
    assert k.save_trace() == str(tmp_path / "t.json")
    trace, events = load(tmp_path / "t.json")
    calls = [e for e in events if e["cat"] == "call"]
    assert [c["args"]["call"] for c in calls] == [0, 1, 2]
    ops = [e["name"] for e in events if e["cat"] == "interpreter"]
    assert ops.count("MatMul") == 3 and ops.count("Tanh") == 3
    assert trace["otherData"]["contexts"] == 1 and trace["otherData"]["dropped_events"] == 0


def test_trace_jit_and_threads(tmp_path):
    k = kernel(jit="sync", jit_threshold=1, jit_cache_dir=False, trace=True)

    def work(n):
        for _ in range(3):
            k(np.ones((n, 8), np.float32))

    threads = [threading.Thread(target=work, args=(n,)) for n in (2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    path = tmp_path / "t.json"
    k.save_trace(path)
    trace, events = load(path)
    assert len([e for e in events if e["cat"] == "call"]) == 6
    kernels = [e for e in events if e["cat"] == "kernel"]
    assert kernels and all(e["args"]["version"] in ("generic", "exact") for e in kernels)
    assert [e for e in events if e["cat"] == "compile"]
    # Each calling thread is its own track, named once.
    names = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    assert len({e["tid"] for e in names}) == len(names)
    assert len({e["tid"] for e in events if e["cat"] == "call"}) == trace["otherData"]["contexts"]


def test_trace_errors(tmp_path):
    with pytest.raises(stax.FailedPreconditionError, match="records no trace"):
        kernel(jit="off").save_trace(tmp_path / "t.json")
    with pytest.raises(TypeError, match="needs a path"):
        kernel(jit="off", trace=True).save_trace()
    with pytest.raises(TypeError, match="Options.trace must be True, False or a file"):
        stax.Options(trace=3)
    with pytest.raises(ValueError, match="Options.trace is empty"):
        stax.Options(trace="")
    assert stax.Options(trace=True).trace is True
