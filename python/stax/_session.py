"""An ONNX Runtime look-alike: :class:`InferenceSession`, so code written for
``onnxruntime.InferenceSession`` runs on stax by changing the import.

It is a thin layer over :func:`stax.load` and :class:`stax.Model`: ``run(output_names,
input_feed)`` returns a list of arrays in ``output_names`` order, as ONNX Runtime does;
``get_inputs()`` / ``get_outputs()`` give objects with ``name``, ``shape`` and ``type``.
"""

import warnings

from . import _C
from ._kernel import load
from ._options import Options

__all__ = ["InferenceSession", "get_available_providers"]

CPU_PROVIDER = "CPUExecutionProvider"

# ONNX Runtime's GraphOptimizationLevel.ORT_DISABLE_ALL.
_ORT_DISABLE_ALL = 0


def get_available_providers():
    """The execution providers stax has, ONNX Runtime style: ["CPUExecutionProvider"]."""
    return [CPU_PROVIDER]


def _provider_names(providers):
    if providers is None:
        return [CPU_PROVIDER]
    if isinstance(providers, str):
        raise TypeError("providers must be a list of provider names, e.g. "
                        f"['{CPU_PROVIDER}'], not a string")
    names = []
    for provider in providers:
        name = provider[0] if isinstance(provider, tuple) and provider else provider
        if not isinstance(name, str):
            raise TypeError("providers entries must be names, or (name, options) tuples; got "
                            f"{provider!r}")
        names.append(name)
    others = [name for name in names if name != CPU_PROVIDER]
    if CPU_PROVIDER not in names:
        raise _C.UnimplementedError(
            f"provider {others[0] if others else '(none)'!r} is not available: stax runs on "
            f"the CPU for now (use providers=['{CPU_PROVIDER}'], or leave providers out)")
    if others:
        # ONNX Runtime falls back along the list when a provider is missing; so does this.
        warnings.warn(f"stax runs on the CPU for now: {', '.join(others)} skipped, running "
                      f"with {CPU_PROVIDER}", RuntimeWarning, stacklevel=3)
    return [CPU_PROVIDER]


def _session_options(sess_options):
    """sess_options as stax.Options: a stax.Options as is; an ONNX Runtime SessionOptions
    (or anything with its attribute names) by intra_op_num_threads and
    graph_optimization_level; None: the defaults."""
    if sess_options is None or isinstance(sess_options, Options):
        return sess_options
    if not hasattr(sess_options, "intra_op_num_threads"):
        raise TypeError("sess_options must be a stax.Options or an onnxruntime.SessionOptions "
                        f"(something with intra_op_num_threads), not "
                        f"{type(sess_options).__name__}")
    options = Options()
    threads = sess_options.intra_op_num_threads
    try:
        threads = int(threads)
    except (TypeError, ValueError):
        raise TypeError("sess_options.intra_op_num_threads must be an int, not "
                        f"{threads!r}") from None
    if threads < 0:
        raise ValueError(f"sess_options.intra_op_num_threads must be >= 0, got {threads}")
    if threads > 0:  # 0: ONNX Runtime's default, the shared pool here
        options.num_threads = threads
    level = getattr(sess_options, "graph_optimization_level", None)
    if level is not None and int(getattr(level, "value", level)) == _ORT_DISABLE_ALL:
        options.disable_passes = "all"
    return options


class InferenceSession:
    """``stax.InferenceSession(path_or_bytes, sess_options=None, providers=None, **kwargs)``:
    an ONNX model loaded with :func:`stax.load`, with ONNX Runtime's session interface.

    sess_options: a :class:`stax.Options`, or an ``onnxruntime.SessionOptions`` (its
    intra_op_num_threads becomes Options.num_threads, a graph_optimization_level of
    ORT_DISABLE_ALL switches the graph passes off; other fields are ignored). providers:
    None or a list with "CPUExecutionProvider" (others in the list are skipped with a
    warning; a list without it raises stax.UnimplementedError). kwargs go to
    :func:`stax.load` (symbols=, jit=, ...). ``session.model`` is the :class:`stax.Model`.
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 **kwargs):
        """Loads and compiles the model (see the class docstring)."""
        self._providers = _provider_names(providers)
        if provider_options is not None and not isinstance(provider_options, (list, tuple)):
            raise TypeError("provider_options must be a list of dicts, one per provider")
        self._options = _session_options(sess_options)
        self._model = load(path_or_bytes, options=self._options, **kwargs)

    @property
    def model(self):
        """The :class:`stax.Model` this session runs."""
        return self._model

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model on input_feed ({input name: array}) and returns the outputs
        output_names lists (None: all of them), as a list of numpy arrays in that order.
        run_options is accepted and ignored. Unknown outputs, and missing or unknown inputs,
        raise stax.InvalidArgumentError naming them."""
        if not isinstance(input_feed, dict):
            raise TypeError("input_feed must be a dict {input name: array}, not "
                            f"{type(input_feed).__name__}")
        return self._model._run_list(output_names, input_feed)

    def get_inputs(self):
        """The model's inputs: objects with name, shape (ints, and strings for symbolic
        dims), type ("tensor(float)") and dtype (the stax dtype name)."""
        return self._model.get_inputs()

    def get_outputs(self):
        """The model's outputs, like get_inputs()."""
        return self._model.get_outputs()

    def get_providers(self):
        """The providers in use: ["CPUExecutionProvider"]."""
        return list(self._providers)

    def get_session_options(self):
        """The stax.Options the session was made with (None: the defaults)."""
        return self._options

    def __repr__(self):
        return f"<stax.InferenceSession over {self._model!r}>"
