"""Compiled kernels and loaded models.

:func:`compile` lowers expressions to a stax graph, compiles it to bytecode and returns a
:class:`Kernel`: call it with numpy arrays (or anything with the buffer protocol or
``__dlpack__``) and get numpy arrays back, without copies in either direction where the
memory allows. :func:`load` does the same for an ONNX model and returns a :class:`Model`,
whose calls take and return values by name.
"""

import collections

from . import _C
from ._expr import Expr
from ._lower import build_graph

__all__ = ["Kernel", "Model", "TensorInfo", "compile", "run", "load"]

TensorInfo = collections.namedtuple("TensorInfo", ["name", "dtype", "shape"])
TensorInfo.__doc__ = ("An input or output of a kernel: name, dtype name and shape (ints for "
                      "fixed dims, strings for symbolic ones: 'B', '2*S + 1').")

# How a call returns outputs (program.c): one array or a tuple; a dict by output name; a tuple
# of stax Tensors; always a tuple of arrays.
_MODE_NUMPY, _MODE_DICT, _MODE_TENSOR, _MODE_TUPLE = 0, 1, 2, 3

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

    # -- description -----------------------------------------------------------------------
    @property
    def inputs(self):
        """[TensorInfo(name, dtype, shape)] in call order."""
        return [TensorInfo(*t) for t in zip(self.input_names, self.input_dtypes, self.input_shapes)]

    @property
    def outputs(self):
        return [TensorInfo(*t) for t in zip(self.output_names, self.output_dtypes, self.output_shapes)]

    @property
    def target(self):
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
        * jit_segments: the same per segment, a list of dicts (entries, hits, full_hits,
          partial_hits, misses, compiles, failures, evictions, compile_ms, versions,
          signatures, generic_versions, exact_versions, generic_compile_ms,
          exact_compile_ms).
        """
        counters = self.counters()
        segments = self.jit_stats()
        totals = {key: sum(s[key] for s in segments)
                  for key in ("hits", "full_hits", "partial_hits", "misses", "compiles",
                              "failures", "evictions", "generic_versions", "exact_versions")}
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

    def __repr__(self):
        def text(info):
            return f"{info.name}: {info.dtype}[{', '.join(str(d) for d in info.shape)}]"
        ins = ", ".join(text(i) for i in self.inputs)
        outs = ", ".join(text(o) for o in self.outputs)
        return f"<stax.{type(self).__name__} ({ins}) -> ({outs})>"


class Model(Kernel):
    """A kernel compiled from an ONNX model (stax.load). Inputs by position or by name:
    ``m(x=arr)``; returns a dict {output name: numpy array}."""


def _finish(kernel, target, graph_text, call_mode):
    kernel._target = target
    kernel._graph_text = graph_text
    kernel._call_mode = call_mode
    return kernel


def _check_target(target):
    if target not in _TARGETS:
        raise _C.UnimplementedError(
            f"target {target!r} is not available: stax runs on {', '.join(_TARGETS)} for now "
            "(the GPU backend comes with the JIT)")


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


def compile(outputs, target="cpu", *, inputs=None, static_variants=True, profile=True,  # noqa: A001
            dispatch="default", profile_timing=False, jit="on", disable_passes=None):
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
    """
    _check_target(target)
    jit_mode = _jit_mode(jit)
    single = isinstance(outputs, Expr)
    output_list = [outputs] if single else list(outputs)
    if not output_list:
        raise ValueError("compile needs at least one output")
    for o in output_list:
        if not isinstance(o, Expr):
            raise TypeError(f"compile outputs must be stax expressions, got {type(o).__name__}")
    graph, _ = build_graph(output_list, None if inputs is None else list(inputs))
    graph_text = graph.dump()
    mode = _MODE_NUMPY if single else _MODE_TUPLE
    kernel = _C.compile_program(graph, Kernel, static_variants=static_variants,
                                profile_points=profile, dispatch=dispatch,
                                profile_timing=profile_timing, call_mode=mode, jit=jit_mode,
                                disable_passes=_pass_list(disable_passes))
    return _finish(kernel, target, graph_text, mode)


def run(kernel, inputs, *, numpy=True):
    """``stax.run(k, [a, b])`` is ``k(a, b)``; inputs may also be a dict by name."""
    if isinstance(inputs, dict):
        return kernel.run(inputs, numpy=numpy)
    return kernel.run(list(inputs), numpy=numpy)


def load(source, *, symbols=None, dims_may_be_zero=False, target="cpu", static_variants=True,
         profile=True, dispatch="default", profile_timing=False, jit="on", disable_passes=None):
    """Loads an ONNX model (a path or the file's bytes) and compiles it into a :class:`Model`.

    symbols: {dim_param name: int} fixes named dims to values; dims_may_be_zero: symbols for
    dim_params get the range [0, inf) instead of [1, inf). jit: 'on', 'sync' or 'off';
    disable_passes: graph passes to switch off (see :func:`compile`).
    """
    _check_target(target)
    jit_mode = _jit_mode(jit)
    graph = _C.import_onnx(source, symbols=symbols, dims_may_be_zero=dims_may_be_zero)
    graph_text = graph.dump()
    model = _C.compile_program(graph, Model, static_variants=static_variants,
                               profile_points=profile, dispatch=dispatch,
                               profile_timing=profile_timing, call_mode=_MODE_DICT,
                               jit=jit_mode, disable_passes=_pass_list(disable_passes))
    return _finish(model, target, graph_text, _MODE_DICT)


def load_program(source, *, dispatch="default", profile_timing=False, jit="on"):
    """Loads a program saved with Kernel.save (a path or bytes) as a Kernel. jit: see
    :func:`compile`."""
    jit_mode = _jit_mode(jit)
    kernel = _C.load_program(source, Kernel, dispatch=dispatch, profile_timing=profile_timing,
                             call_mode=_MODE_NUMPY, jit=jit_mode)
    return _finish(kernel, "cpu", None, _MODE_NUMPY)
