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

SOURCE_UNAVAILABLE = (
    "stax has no JIT yet: every kernel runs in the bytecode interpreter, so there is no "
    "generated source. Once the JIT lands, `source` returns the specialized kernel source "
    "(LLVM IR / CUDA C) of the hot segments.")

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
    def source(self):
        """The JIT-generated kernel source. Always None for now: stax has no JIT yet (see
        ``source_unavailable_reason``)."""
        return None

    @property
    def source_unavailable_reason(self):
        return SOURCE_UNAVAILABLE

    @property
    def stats(self):
        """Run and profiling counters, as a dict:

        * runs, failed_runs: calls made (all threads), and how many raised;
        * contexts: execution contexts made (one per thread that ran at the same time);
        * instruction_counts: executions per bytecode instruction (its index in the
          disassembly), summed over contexts; instruction_nanos: time per instruction when the
          kernel was compiled with profile_timing=True, else None;
        * segment_counts: entries per bytecode segment (what the JIT will read to find hot
          code);
        * hits, misses, compiles, compile_time_s: JIT specialization cache statistics, 0 until
          the JIT exists (the keys stay; the JIT fills them in); jit: False.
        """
        counters = self.counters()
        counters.update(hits=0, misses=0, compiles=0, compile_time_s=0.0, jit=False)
        return counters

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


def compile(outputs, target="cpu", *, inputs=None, static_variants=True, profile=True,  # noqa: A001
            dispatch="default", profile_timing=False):
    """Compiles expressions into a :class:`Kernel`.

    outputs: an expression, or a list/tuple of them (the kernel then returns a tuple).
    inputs: the placeholders in call order; default: every placeholder the outputs use, in the
    order they were created. static_variants / profile: compile options (static opcode variants
    where all shapes are known; profile points at segment entries). dispatch: 'default',
    'switch' or 'goto'. profile_timing: time every instruction (see Kernel.stats).
    """
    _check_target(target)
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
                                profile_timing=profile_timing, call_mode=mode)
    return _finish(kernel, target, graph_text, mode)


def run(kernel, inputs, *, numpy=True):
    """``stax.run(k, [a, b])`` is ``k(a, b)``; inputs may also be a dict by name."""
    if isinstance(inputs, dict):
        return kernel.run(inputs, numpy=numpy)
    return kernel.run(list(inputs), numpy=numpy)


def load(source, *, symbols=None, dims_may_be_zero=False, target="cpu", static_variants=True,
         profile=True, dispatch="default", profile_timing=False):
    """Loads an ONNX model (a path or the file's bytes) and compiles it into a :class:`Model`.

    symbols: {dim_param name: int} fixes named dims to values; dims_may_be_zero: symbols for
    dim_params get the range [0, inf) instead of [1, inf).
    """
    _check_target(target)
    graph = _C.import_onnx(source, symbols=symbols, dims_may_be_zero=dims_may_be_zero)
    graph_text = graph.dump()
    model = _C.compile_program(graph, Model, static_variants=static_variants,
                               profile_points=profile, dispatch=dispatch,
                               profile_timing=profile_timing, call_mode=_MODE_DICT)
    return _finish(model, target, graph_text, _MODE_DICT)


def load_program(source, *, dispatch="default", profile_timing=False):
    """Loads a program saved with Kernel.save (a path or bytes) as a Kernel."""
    kernel = _C.load_program(source, Kernel, dispatch=dispatch, profile_timing=profile_timing,
                             call_mode=_MODE_NUMPY)
    return _finish(kernel, "cpu", None, _MODE_NUMPY)
