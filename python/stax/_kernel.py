"""Compiled kernels and loaded models.

:func:`compile` lowers expressions to a stax graph, compiles it to bytecode and returns a
:class:`Kernel`: call it with numpy arrays (or anything with the buffer protocol or
``__dlpack__``) and get numpy arrays back, without copies in either direction where the
memory allows. :func:`load` does the same for an ONNX model and returns a :class:`Model`,
whose calls take and return values by name.

How calls return (one convention per kind of object):

* a :class:`Kernel` (``compile``, ``load_program``): one array, or a tuple for several
  outputs (always a tuple when ``compile`` was given a list); ``run(..., numpy=False)``: a
  tuple of :class:`stax.Tensor`;
* a :class:`Model` (``load``: an ONNX model, or a program saved from one): a dict
  {output name: array}, or {output name: stax.Tensor} with ``numpy=False``; ``run`` also
  takes ``output_names`` first, like ONNX Runtime.
"""

import collections
import json
import os

from . import _C
from ._expr import Expr
from ._lower import build_graph
from ._options import UNSET, Options, resolve

__all__ = ["Kernel", "Model", "TensorInfo", "compile", "run", "load", "load_program"]

# ONNX Runtime's type names, by stax dtype name ("tensor(float)" for float32).
_ORT_TYPES = {"float32": "float", "float64": "double"}


class TensorInfo(collections.namedtuple("TensorInfo", ["name", "dtype", "shape"])):
    """An input or output of a kernel: ``name``, ``dtype`` (the stax dtype name, "float32")
    and ``shape`` (a tuple: ints for fixed dims, strings for symbolic ones: 'B',
    '2*S + 1'); ``type`` is ONNX Runtime's name for the dtype ("tensor(float)")."""

    __slots__ = ()

    @property
    def type(self):
        """The ONNX Runtime type string: "tensor(float)", "tensor(int64)", ...; a sequence
        (shape None) is "seq(tensor(float))"."""
        tensor = f"tensor({_ORT_TYPES.get(self.dtype, self.dtype)})"
        return f"seq({tensor})" if self.shape is None else tensor

# How a call returns outputs (program.c): one array or a tuple; a dict by output name; a tuple
# of stax Tensors; always a tuple of arrays; a dict of stax Tensors.
_MODE_NUMPY, _MODE_DICT, _MODE_TENSOR, _MODE_TUPLE, _MODE_TENSOR_DICT = 0, 1, 2, 3, 4

# A program file starts with these bytes (src/vm/program.h); stax.load reads such files too.
_PROGRAM_MAGIC = b"STAXPROG"

# compile(jit=...) / load(jit=...) -> stax_jit_mode_t (include/stax/vm.h).
_JIT_MODES = {"off": 0, "on": 1, "background": 1, "sync": 2}
_JIT_NAMES = {0: "off", 1: "on", 2: "sync"}

SOURCE_JIT_OFF = (
    "the JIT is off for this kernel (compiled with jit='off'): every segment runs in the "
    "bytecode interpreter, so there is no generated source. Compile with jit='on' or 'sync'.")
SOURCE_NOT_YET = (
    "no kernel has been compiled yet: the JIT compiles a segment once it has seen the same "
    "shapes a few times (background compiles may still be running; see Kernel.drain()).")
SOURCE_NOT_KEPT = (
    "the kernels compiled so far kept no text: with jit='on' kernels keep no LLVM IR or "
    "assembly (that would cost an extra code generation each and keep them out of the "
    "on-disk kernel cache). Compile with jit='sync' to see the generated source.")
_NO_TEXT = "(no text kept)"
# Kept for code that imported it: the reason when the JIT is off.
SOURCE_UNAVAILABLE = SOURCE_JIT_OFF


def _jit_mode(jit):
    if isinstance(jit, bool) or not isinstance(jit, str) or jit not in _JIT_MODES:
        raise ValueError(f"jit must be 'on', 'sync' or 'off', not {jit!r}")
    return _JIT_MODES[jit]


def _settings(options, where, jit, dispatch, profile_timing, disable_passes=UNSET):
    """Options merged with the keyword shortcuts (see stax.Options). The keywords keep their
    own messages for bad values ("jit must be ...")."""
    if jit is not UNSET:
        _jit_mode(jit)
    return resolve(options, where, jit=jit, dispatch=dispatch, profile_timing=profile_timing,
                   disable_passes=disable_passes)


def _configure(program, settings):
    """Sets the execution options of a new program's contexts (before its first call)."""
    cache_dir = settings.get("jit_cache_dir")
    generic = settings.get("jit_generic")
    program._configure(
        num_threads=settings.get("num_threads", -1),
        jit_threshold=settings.get("jit_threshold", 0),
        jit_max_versions=settings.get("jit_max_versions", 0),
        jit_verify=settings.get("jit_verify", False),
        jit_tolerance=settings.get("jit_tolerance", 0.0),
        jit_generic=0 if generic is None else (1 if generic else 2),
        jit_cache_dir="" if cache_dir is False else cache_dir,
        trace=bool(settings.get("trace", False)))
    program._options = Options(**settings)
    return program

_TARGETS = ("cpu",)


class Kernel(_C.Program):
    """A compiled stax program. Call it: ``k(a, b)`` or ``k(a=..., b=...)`` returns one numpy
    array, or a tuple for several outputs. The same kernel runs any shape its symbols allow and
    may be called from several threads at once (the GIL is released while it runs)."""

    def run(self, inputs, *, numpy=True):
        """Runs with inputs as a list (call order) or a dict by name. Returns what calling the
        kernel returns, or a tuple of stax.Tensor objects (DLPack-capable, no numpy) when
        numpy=False."""
        mode = self._call_mode if numpy else _MODE_TENSOR
        result = _C.Program.run(self, inputs, mode)
        return result

    def _output_indices(self, output_names):
        """Output indices for names (None: every output), naming an unknown one."""
        if output_names is None:
            return None
        if isinstance(output_names, (str, bytes)) or not hasattr(output_names, "__iter__"):
            raise TypeError("output_names must be a list of output names or None, not "
                            f"{type(output_names).__name__}")
        index = {name: i for i, name in enumerate(self.output_names)}
        selected = []
        for name in output_names:
            if not isinstance(name, str):
                raise TypeError(f"output_names entries must be strings, got {name!r}")
            if name not in index:
                raise _C.InvalidArgumentError(
                    f"unknown output {name!r}; the outputs are {list(self.output_names)}")
            selected.append(index[name])
        return selected

    def _feed(self, feed):
        if feed is None or isinstance(feed, (str, bytes)):
            raise TypeError("the inputs (feed) must be a dict {input name: array} or a list in "
                            f"input order, not {type(feed).__name__}")
        if isinstance(feed, dict):
            return feed
        if hasattr(feed, "keys"):  # any mapping
            return dict(feed)
        return list(feed)

    # -- description -----------------------------------------------------------------------
    def get_inputs(self):
        """The inputs, as a list of :class:`TensorInfo` (``.name``, ``.shape``, ``.type``,
        ``.dtype``), in call order: the same as ONNX Runtime's ``get_inputs()``."""
        return self.inputs

    def get_outputs(self):
        """The outputs, as a list of :class:`TensorInfo`, in the model's order."""
        return self.outputs

    @property
    def options(self):
        """The :class:`stax.Options` this kernel was made with (the fields that were set)."""
        return self._options

    # -- description -----------------------------------------------------------------------
    @property
    def inputs(self):
        """[TensorInfo(name, dtype, shape)] in call order."""
        return [TensorInfo(*t) for t in zip(self.input_names, self.input_dtypes, self.input_shapes)]

    @property
    def outputs(self):
        """[TensorInfo(name, dtype, shape)] in output order."""
        return [TensorInfo(*t) for t in zip(self.output_names, self.output_dtypes, self.output_shapes)]

    @property
    def target(self):
        """The target it was compiled for ("cpu")."""
        return self._target

    @property
    def bytecode(self):
        """The disassembly: the extended form (instructions with shape descriptors and the
        shape derivation chain) followed by the compact form the interpreter runs."""
        return self.disassemble(_C.DISASSEMBLE_EXTENDED | _C.DISASSEMBLE_COMPACT)

    def disassemble(self, form="both"):
        """form: 'extended', 'compact' or 'both' (or the C flag bits)."""
        if isinstance(form, int):
            return _C.Program.disassemble(self, form)
        forms = {"extended": _C.DISASSEMBLE_EXTENDED, "compact": _C.DISASSEMBLE_COMPACT,
                 "both": _C.DISASSEMBLE_EXTENDED | _C.DISASSEMBLE_COMPACT}
        if form not in forms:
            raise ValueError(f"form must be 'extended', 'compact' or 'both', not {form!r}")
        return _C.Program.disassemble(self, forms[form])

    @property
    def graph(self):
        """The stax graph the kernel was compiled from, as text (None for loaded programs)."""
        return self._graph_text

    @property
    def jit(self):
        """The JIT mode: 'on' (background compiles), 'sync' or 'off'."""
        return _JIT_NAMES.get(self.jit_mode, "off")

    def drain(self):
        """Waits until the background JIT compiler has finished the compiles queued so far
        (a no-op with jit='sync' or 'off'). Returns the kernel."""
        if self.jit_mode:
            self.jit_drain()
        return self

    def save_trace(self, path=None):
        """Writes the trace recorded since the first call (Options(trace=...)) as Chrome
        trace-event JSON (chrome://tracing, ui.perfetto.dev): {"traceEvents": [...]} with a
        "ph": "X" event per call, interpreted instruction, JIT kernel run and compile, ts and
        dur in microseconds, one track per calling thread and one for the background
        compiler. Waits for the background compiles queued so far first. path: the file, by
        default the one Options.trace names. Returns the path written."""
        trace = self.options.trace
        if not trace:
            raise _C.FailedPreconditionError(
                "the kernel records no trace: make it with options=stax.Options(trace=True) "
                "(or trace='file.json')")
        if path is None:
            if trace is True:
                raise TypeError("save_trace() needs a path: Options.trace is True, not a file")
            path = trace
        traces = [json.loads(text) for text in self._trace_json()]
        merged = {"traceEvents": [], "displayTimeUnit": "ms",
                  "otherData": {"producer": f"stax {_C.version()}", "contexts": len(traces),
                                "events": 0, "max_events": 0, "dropped_events": 0}}
        seen_threads = set()
        notes = []
        for one in traces:
            for event in one["traceEvents"]:
                if event["ph"] == "M":  # one name per thread, even when contexts share it
                    if event["tid"] in seen_threads:
                        continue
                    seen_threads.add(event["tid"])
                merged["traceEvents"].append(event)
            other = one["otherData"]
            for key in ("events", "dropped_events"):
                merged["otherData"][key] += other[key]
            merged["otherData"]["max_events"] = max(merged["otherData"]["max_events"],
                                                    other["max_events"])
            if "note" in other:
                notes.append(other["note"])
        if notes:
            merged["otherData"]["note"] = notes[0]
        with open(path, "w") as f:
            json.dump(merged, f)
        return os.fspath(path)

    def _compiled_kernels(self):
        return sum(s["compiles"] for s in self.jit_stats())

    def _jit_text(self, assembly):
        if not self.jit_mode or not self._compiled_kernels():
            return None
        text = self.jit_sources(assembly)
        # Kernels that kept no text (background compiles) leave only headers: no source.
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(";")]
        if all(ln == _NO_TEXT for ln in lines):
            return None
        return text

    @property
    def source(self):
        """The LLVM IR the JIT generated for the shapes seen so far, segment by segment (a
        comment line heads every kernel), or None when the JIT is off or nothing was compiled
        yet (``source_unavailable_reason`` says which). With jit='on' compiles run in the
        background: call ``drain()`` first to see them."""
        return self._jit_text(False)

    @property
    def source_asm(self):
        """Like ``source``, as the machine assembly of the compiled kernels."""
        return self._jit_text(True)

    @property
    def source_unavailable_reason(self):
        """Why ``source`` is None (None when it is not)."""
        if not self.jit_mode:
            return SOURCE_JIT_OFF
        if not self._compiled_kernels():
            return SOURCE_NOT_YET
        if self._jit_text(False) is None:
            return SOURCE_NOT_KEPT
        return None

    @property
    def stats(self):
        """Run and profiling counters, as a dict:

        * runs, failed_runs: calls made (all threads), and how many raised;
        * contexts: execution contexts made (one per thread that ran at the same time);
        * instruction_counts: executions per bytecode instruction (its index in the
          disassembly), summed over contexts; instruction_nanos: time per instruction when the
          kernel was compiled with profile_timing=True, else None;
        * segment_counts: entries per bytecode segment (what the JIT reads to find hot code);
        * memory: the memory plan (docs/memory.md) as a dict: planned (contexts place
          temporaries in a per-context arena; STAX_MEMORY_PLAN=0 switches it off),
          planned_values, slots, inplace_values, calls, arena_bytes (the last call's arena),
          arena_peak_bytes, arena_capacity_bytes, temp_bytes (all temporaries of the last
          call), temp_allocations, output_allocations, arena_grows (allocator calls of the
          last call), fallbacks, inplace; per counter the largest over the contexts;
        * jit: True when the JIT is on (jit='on' or 'sync'); jit_mode: 'on', 'sync' or 'off';
        * hits, full_hits, partial_hits, misses, compiles, failures, evictions,
          compile_time_s: JIT kernel cache statistics summed over segments (hits: segment
          entries run by compiled kernels, full_hits of them with every group compiled,
          partial_hits with some groups interpreted; misses: entries interpreted;
          compile_time_s: total compile time), all 0 with jit='off';
        * generic_versions, exact_versions: compiled versions held, shape-generic (one per
          shape class) and exact-shape; generic_compile_s, exact_compile_s: their compile time;
        * calls: how the calls ran, {compiled, partial, interpreted} (every group that has a
          lowering ran a kernel, some did, none did);
        * promotions: exact versions compiled for a hot shape whose generic version had every
          group; promoted_groups_kept / promoted_groups_dropped: after their timed trial, the
          groups whose exact kernel measured faster and stayed, and those that went back to
          the generic kernel;
        * dtype_fallbacks: groups the JIT leaves to the interpreter because it has no kernel
          for a dtype one of their ops computes (a float64 MatMul, a float16 AveragePool;
          a warning on stderr says so once per process);
        * jit_segments: the same per segment, a list of dicts (entries, hits, full_hits,
          partial_hits, misses, compiles, failures, evictions, compile_ms, versions,
          signatures, generic_versions, exact_versions, generic_compile_ms,
          exact_compile_ms, promotions, promoted_groups_kept, promoted_groups_dropped,
          dtype_fallbacks).
        """
        counters = self.counters()
        segments = self.jit_stats()
        totals = {key: sum(s[key] for s in segments)
                  for key in ("hits", "full_hits", "partial_hits", "misses", "compiles",
                              "failures", "evictions", "generic_versions", "exact_versions",
                              "promotions", "promoted_groups_kept", "promoted_groups_dropped",
                              "dtype_fallbacks")}
        counters.update(generic_compile_s=sum(s["generic_compile_ms"] for s in segments) / 1e3,
                        exact_compile_s=sum(s["exact_compile_ms"] for s in segments) / 1e3,
                        calls=self.jit_calls())
        counters.update(totals)
        counters.update(compile_time_s=sum(s["compile_ms"] for s in segments) / 1000.0,
                        jit=bool(self.jit_mode), jit_mode=self.jit, jit_segments=segments)
        return counters

    @property
    def passes(self):
        """What the graph passes did when this was compiled, as a dict: nodes_before,
        nodes_after (the graph and its subgraphs), rounds (the pipeline repeats until a round
        changes nothing), instructions_removed (by the compiler's dead-instruction sweep: shape
        chains whose results no instruction reads), and runs: one dict per pass run that
        changed something (pass, round, nodes_before, nodes_after, rewrites, detail). None for
        a program loaded with load_program (saved programs keep no record)."""
        return self.pass_report()

    def save(self, path):
        """Writes the compiled program (stax.load_program reads it back)."""
        _C.Program.save(self, path)

    def __reduce__(self):
        """Pickling (Ray, multiprocessing): the compiled program as bytes (``serialize()``),
        with the options it was made with and its return convention. Unpickling loads the
        program back (no ONNX import or graph passes again); JIT kernels compile anew, or come
        from the on-disk kernel cache."""
        options = {k: v for k, v in self._options.to_dict().items() if k != "disable_passes"}
        return (_unpickle, (isinstance(self, Model), self.serialize(), options, self._call_mode))

    def __repr__(self):
        def text(info):
            if info.shape is None:
                return f"{info.name}: seq({info.dtype})"
            return f"{info.name}: {info.dtype}[{', '.join(str(d) for d in info.shape)}]"
        ins = ", ".join(text(i) for i in self.inputs)
        outs = ", ".join(text(o) for o in self.outputs)
        return f"<stax.{type(self).__name__} ({ins}) -> ({outs})>"


class Model(Kernel):
    """A kernel compiled from an ONNX model (stax.load). Inputs by position or by name:
    ``m(x=arr)``; returns a dict {output name: numpy array}. ``m.run(output_names, feed)``
    selects outputs, like ONNX Runtime's ``InferenceSession.run`` (but returns a dict)."""

    def run(self, output_names, feed=UNSET, *, numpy=True):
        """``m.run(output_names, feed)`` or ``m.run(feed)``: runs with ``feed`` (a dict
        {input name: array}, or a list in input order) and returns a dict {output name: array}
        of the outputs ``output_names`` lists, in that order (None: every output). With
        numpy=False the values are stax.Tensor objects. An unknown output, or a missing or
        unknown input, raises stax.InvalidArgumentError naming it."""
        if feed is UNSET:
            feed, output_names = output_names, None
        select = self._output_indices(output_names)
        mode = _MODE_DICT if numpy else _MODE_TENSOR_DICT
        return _C.Program.run(self, self._feed(feed), mode, select)

    def _run_list(self, output_names, feed):
        """A list of arrays in output_names order (None: every output): InferenceSession.run."""
        select = self._output_indices(output_names)
        return list(_C.Program.run(self, self._feed(feed), _MODE_TUPLE, select))


def _unpickle(is_model, program, options, call_mode):
    """Kernel.__reduce__'s other half: a Model or Kernel from its serialized program."""
    if is_model:
        return load(program, options=Options(**options))
    kernel = load_program(program, options=Options(**options))
    kernel._call_mode = call_mode
    return kernel


def _finish(kernel, target, graph_text, call_mode):
    kernel._target = target
    kernel._graph_text = graph_text
    kernel._call_mode = call_mode
    return kernel


def _check_target(target):
    """Raises unless programs compile for target: 'cuda' names what this machine lacks (the
    CUDA driver, a device, NVRTC) or, when nothing is missing, that the GPU execution path is
    not implemented yet (docs/gpu.md)."""
    if not isinstance(target, str):
        raise TypeError(f"target must be a string, got {type(target).__name__}")
    if target not in _TARGETS:
        _C.check_target(target)


def _pass_list(disable_passes):
    """disable_passes as the comma-separated text the C library parses."""
    if disable_passes is None:
        return ""
    if isinstance(disable_passes, str):
        return disable_passes
    names = list(disable_passes)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"disable_passes entries must be pass names, got {type(name).__name__}")
    return ",".join(names)



def _compile_graph(graph, cls, mode, settings, static_variants, profile, target):
    """Compiles a built or imported graph into an object of cls (Kernel or Model) that
    returns its outputs the way `mode` says."""
    graph_text = graph.dump()
    program = _C.compile_program(graph, cls, static_variants=static_variants,
                                 profile_points=profile,
                                 dispatch=settings.get("dispatch", "default"),
                                 profile_timing=settings.get("profile_timing", False),
                                 call_mode=mode, jit=_JIT_MODES[settings.get("jit", "on")],
                                 disable_passes=_pass_list(settings.get("disable_passes")))
    return _finish(_configure(program, settings), target, graph_text, mode)

def compile(outputs, target="cpu", *, inputs=None, static_variants=True, profile=True,  # noqa: A001
            dispatch=UNSET, profile_timing=UNSET, jit=UNSET, disable_passes=UNSET,
            options=None):
    """Compiles expressions into a :class:`Kernel`.

    outputs: an expression, or a list/tuple of them (the kernel then returns a tuple).
    inputs: the placeholders in call order; default: every placeholder the outputs use, in the
    order they were created. static_variants / profile: compile options (static opcode variants
    where all shapes are known; profile points at segment entries). dispatch: 'default',
    'switch' or 'goto'. profile_timing: time every instruction (see Kernel.stats).
    jit: 'on' (default; hot segments are compiled to native code on a background thread while
    the interpreter keeps running, like ``stax run``), 'sync' (compile on the calling thread,
    deterministic) or 'off' (interpret only).
    disable_passes: graph passes to switch off, a list of names or "all" (see
    :data:`PASSES`; the environment variable STAX_DISABLE_PASSES does the same); what the
    passes did is in :attr:`Kernel.passes`.
    options: a :class:`stax.Options` (threads, JIT settings, ...); the keywords above are
    shortcuts for its fields.
    """
    _check_target(target)
    settings = _settings(options, "compile", jit, dispatch, profile_timing, disable_passes)
    single = isinstance(outputs, Expr)
    output_list = [outputs] if single else list(outputs)
    if not output_list:
        raise ValueError("compile needs at least one output")
    for o in output_list:
        if not isinstance(o, Expr):
            raise TypeError(f"compile outputs must be stax expressions, got {type(o).__name__}")
    graph, _ = build_graph(output_list, None if inputs is None else list(inputs))
    mode = _MODE_NUMPY if single else _MODE_TUPLE
    return _compile_graph(graph, Kernel, mode, settings, static_variants, profile, target)


def run(kernel, inputs, *, numpy=True):
    """``stax.run(k, [a, b])`` is ``k(a, b)``; inputs may also be a dict by name."""
    if isinstance(inputs, dict):
        return kernel.run(inputs, numpy=numpy)
    return kernel.run(list(inputs), numpy=numpy)


def _is_program(source):
    """True when source (a path or bytes) is a saved stax program, not an ONNX model."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source[:8]) == _PROGRAM_MAGIC
    try:
        with open(os.fspath(source), "rb") as file:
            return file.read(8) == _PROGRAM_MAGIC
    except (OSError, TypeError):
        return False  # the importer reports it


def load(source, *, symbols=None, dims_may_be_zero=False, target="cpu", static_variants=True,
         profile=True, dispatch=UNSET, profile_timing=UNSET, jit=UNSET, disable_passes=UNSET,
         options=None):
    """Loads an ONNX model (a path or the file's bytes) and compiles it into a :class:`Model`.
    A program saved with ``Model.save`` loads too (then symbols, dims_may_be_zero and
    disable_passes do not apply: it is compiled already).

    symbols: {dim_param name: int} fixes named dims to values; dims_may_be_zero: symbols for
    dim_params get the range [0, inf) instead of [1, inf). options: a :class:`stax.Options`
    (threads, JIT mode, threshold, version cap, cache folder, verification, disabled passes);
    jit ('on', 'sync' or 'off'), disable_passes, dispatch and profile_timing are shortcuts for
    its fields (see :func:`compile`).
    """
    _check_target(target)
    settings = _settings(options, "load", jit, dispatch, profile_timing, disable_passes)
    jit_mode = _JIT_MODES[settings.get("jit", "on")]
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    if _is_program(source):
        if symbols is not None or dims_may_be_zero or settings.get("disable_passes"):
            raise ValueError("load: symbols, dims_may_be_zero and disable_passes apply to ONNX "
                             "models; this is a compiled stax program")
        model = _C.load_program(source, Model, dispatch=settings.get("dispatch", "default"),
                                profile_timing=settings.get("profile_timing", False),
                                call_mode=_MODE_DICT, jit=jit_mode)
        return _finish(_configure(model, settings), "cpu", None, _MODE_DICT)
    graph = _C.import_onnx(source, symbols=symbols, dims_may_be_zero=dims_may_be_zero)
    return _compile_graph(graph, Model, _MODE_DICT, settings, static_variants, profile, target)


def load_program(source, *, dispatch=UNSET, profile_timing=UNSET, jit=UNSET, options=None):
    """Loads a program saved with Kernel.save (a path or bytes) as a :class:`Kernel` (one
    array or a tuple per call; ``stax.load`` gives a :class:`Model` instead). jit, dispatch,
    profile_timing and options: see :func:`compile` (options.disable_passes does not apply:
    the program is compiled already)."""
    settings = _settings(options, "load_program", jit, dispatch, profile_timing)
    if settings.get("disable_passes"):
        raise ValueError("load_program: options.disable_passes does not apply to a saved "
                         "program (its passes ran when it was compiled)")
    jit_mode = _JIT_MODES[settings.get("jit", "on")]
    kernel = _C.load_program(source, Kernel, dispatch=settings.get("dispatch", "default"),
                             profile_timing=settings.get("profile_timing", False),
                             call_mode=_MODE_NUMPY, jit=jit_mode)
    return _finish(_configure(kernel, settings), "cpu", None, _MODE_NUMPY)
