"""Dynamic batching for stax.serve, without Ray: how a batch of requests becomes model calls
and their outputs go back to each request, and how a replica gets its model from a path or
bytes. stax.serve's Ray Serve deployment calls these; the tests run them without Ray too."""

import os
import pickle

import numpy as np

from . import _C
from ._kernel import Model, load
from ._options import Options

__all__ = ["Failed", "batched_call", "load_source"]

# A pickled object starts with the PROTO opcode (protocol 2 and later).
_PICKLE_START = b"\x80"


def load_source(source, options):
    """The model a replica serves: ``source`` is a path (str or os.PathLike), bytes (an ONNX
    model, a saved stax program, or a pickled stax.Model), or a stax.Model (pickled on the way
    to the replica). ``options`` (a stax.Options) applies to paths and model bytes; a pickled
    Model keeps the options it was made with, those of ``options`` replacing them."""
    if isinstance(source, Model):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if data[:1] == _PICKLE_START:
            model = pickle.loads(data)
            if not isinstance(model, Model):
                raise TypeError(f"the pickled model is a {type(model).__name__}, not a stax.Model")
            # Loaded again from its program with the replica's settings over its own: its own
            # thread pool, above all (a loaded program's pool is fixed at load).
            kept = {k: v for k, v in model.options.to_dict().items() if k != "disable_passes"}
            return load(model.serialize(), options=Options(**{**kept, **options.to_dict()}))
        return load(data, options=options)
    if isinstance(source, (str, os.PathLike)):
        return load(os.fspath(source), options=options)
    raise TypeError("the model must be a path, bytes or a stax.Model, not "
                    f"{type(source).__name__}")


class Failed:
    """One request's error, carried through @serve.batch's result list and raised again in
    that request's own call (the batch's other requests still get their outputs)."""

    def __init__(self, error):
        self.error = error


def _rows(feed, names):
    """The batch size of one request: the first dim shared by all its inputs."""
    sizes = {name: np.shape(feed[name])[0] if np.ndim(feed[name]) else None for name in names}
    values = set(sizes.values())
    if None in values:
        raise _C.InvalidArgumentError("every input needs a batch (first) dim to be batched: "
                                      + ", ".join(n for n, s in sizes.items() if s is None))
    if len(values) != 1:
        raise _C.InvalidArgumentError(f"the inputs' first dims differ: {sizes}")
    return values.pop()


def batched_call(model, feeds):
    """Runs a list of requests (each a dict {input name: array}) as few model calls as their
    shapes allow and returns, per request, a dict {output name: array} or a Failed.

    Requests whose inputs agree in every dim but the first are concatenated along it and run
    as one call; the outputs, whose first dim must be the summed batch, are split back. A call
    that fails is retried request by request, so only the failing ones get the error."""
    names = [info.name for info in model.get_inputs()]
    dtypes = {info.name: info.dtype for info in model.get_inputs()}
    results = [None] * len(feeds)
    groups = {}
    for i, feed in enumerate(feeds):
        try:
            if not isinstance(feed, dict):
                raise TypeError(f"a request is a dict {{input name: array}}, not "
                                f"{type(feed).__name__}")
            unknown = sorted(set(feed) - set(names))
            missing = [n for n in names if n not in feed]
            if unknown or missing:
                raise _C.InvalidArgumentError(
                    f"the model's inputs are {names}; the request has unknown {unknown} and "
                    f"lacks {missing}")
            arrays = {n: np.asarray(feed[n], dtype=dtypes[n]) for n in names}
            rows = _rows(arrays, names)
        except Exception as error:  # the request's own mistake: it alone fails
            results[i] = Failed(error)
            continue
        key = tuple((n, arrays[n].shape[1:]) for n in names)
        groups.setdefault(key, []).append((i, arrays, rows))
    for members in groups.values():
        _run_group(model, names, members, results)
    return results


def _run_group(model, names, members, results):
    if len(members) == 1:
        i, arrays, _ = members[0]
        try:
            results[i] = model(**arrays)
        except Exception as error:
            results[i] = Failed(error)
        return
    joined = {n: np.concatenate([arrays[n] for _, arrays, _ in members]) for n in names}
    total = sum(rows for _, _, rows in members)
    try:
        outputs = model(**joined)
        for name, value in outputs.items():
            if np.ndim(value) == 0 or np.shape(value)[0] != total:
                raise _C.InvalidArgumentError(
                    f"output '{name}' has shape {np.shape(value)}, not a first dim of the "
                    f"batch's {total} rows: this model cannot be batched along dim 0")
    except Exception:
        for member in members:  # one by one: only the requests that fail get an error
            _run_group(model, names, [member], results)
        return
    start = 0
    for i, _, rows in members:
        results[i] = {name: value[start:start + rows] for name, value in outputs.items()}
        start += rows
