"""stax: a compiler and runtime for tensor programs with dynamic shapes (Python API).

    import numpy as np, stax
    B, S = stax.symbol("B"), stax.symbol("S", max=4096)
    x = stax.placeholder([B, S, 64], name="x")
    w = np.random.rand(64, 32).astype(np.float32)
    k = stax.compile(stax.softmax(x @ w, axis=-1))
    y = k(np.ones((2, 7, 64), np.float32))      # any B, S: one kernel

See docs/python.md for the whole API.
"""

import numpy as _np

from . import _C
from ._C import (  # noqa: F401 - the error hierarchy
    DtypeError,
    Error,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    IoError,
    OutOfMemoryError,
    OutOfRangeError,
    ParseError,
    ShapeError,
    Tensor,
    UnimplementedError,
)
from ._dims import Dim, Symbol, ceildiv, dim_max, dim_min, symbol  # noqa: F401
from ._expr import Expr, constant, placeholder  # noqa: F401
from ._kernel import Kernel, Model, TensorInfo, compile, load, load_program, run  # noqa: F401
from ._ops import *  # noqa: F401,F403 - the op functions
from ._ops import ops, op  # noqa: F401
from ._options import Options  # noqa: F401
from ._session import InferenceSession, get_available_providers  # noqa: F401
from . import _ops as _ops_module

__version__ = _C.version()

Error.message = property(lambda self: str(self.args[0]) if self.args else "",
                         doc="The error text (the C library's message, context first).")


def _coerce_array(obj, dtype):
    """Copy helper for the C converter: a native-byte-order, aligned, C-contiguous numpy array.
    Array-likes keep their dtype (stax never casts silently); plain Python values (lists,
    numbers) take `dtype` when the kernel input's dtype is known."""
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__") or isinstance(
            obj, (memoryview, bytearray)):
        array = _np.asarray(obj)
        # a fresh array: numpy allocates it aligned, native and C-contiguous
        return _np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True)
    if dtype is not None and dtype != "bfloat16":
        return _np.ascontiguousarray(_np.asarray(obj, dtype=dtype))
    array = _np.asarray(obj)
    if array.dtype == _np.float64:
        array = array.astype(_np.float32)
    return _np.ascontiguousarray(array)


def _bfloat16_array(tensor):
    """Output helper for the C converter: a bfloat16 tensor as an ml_dtypes.bfloat16 numpy
    array over the same memory (numpy has no bfloat16 of its own), or the Tensor itself when
    ml_dtypes is not installed."""
    try:
        import ml_dtypes
    except ImportError:
        return tensor
    return _np.asarray(tensor._bits16()).view(ml_dtypes.bfloat16)


_C._set_hooks(_np.asarray, _coerce_array, _bfloat16_array)


def from_dlpack(obj):
    """A stax.Tensor over anything with ``__dlpack__`` (or a DLPack capsule), zero copy."""
    return _C.from_dlpack(obj)


def asarray(obj, dtype=None):
    """A stax.Tensor over obj: zero copy for buffers (numpy arrays) in stax's dtypes with
    aligned memory, a copy otherwise. dtype, when given, must match (no silent casts) except
    for Python lists and numbers, which are converted to it."""
    return _C.asarray(obj, dtype)


def set_num_threads(count):
    """Sets the size of stax's thread pool before its first use (0: one per core). Returns
    False when the pool already exists (then the call has no effect)."""
    return _C.set_num_threads(count)


def num_threads():
    """Threads in stax's default pool (creating it on first use)."""
    return _C.num_threads()


#: The graph passes compile and load run, in pipeline order: {name: what it rewrites}. Names
#: are what ``disable_passes=`` and STAX_DISABLE_PASSES accept (docs/passes.md).
PASSES = _C.passes()


def build_info():
    """What this build and machine give programs, as a dict: version; isa (the vector level in
    use) and isa_detected (the CPU's); gemm and gemm_tile (the generic GEMM's variant and
    register tile); jit: None when the JIT is unavailable (jit_unavailable says why), else
    {backend, cpu, vector_bits, fma, matmul_tile}; jit_cache_dir (None when the on-disk kernel
    cache is off); gpu (False: no GPU execution path yet) and gpu_unavailable (what this
    machine lacks for target="cuda", or that execution is not implemented); cuda: {driver,
    driver_version, device_count, device_name, compute_capability, driver_unavailable, nvrtc,
    nvrtc_version, nvrtc_path, nvrtc_unavailable} (the CUDA driver and NVRTC are loaded at run
    time, never linked; see docs/gpu.md). The same as ``stax version --verbose``. Starts the
    JIT backend if it has not started."""
    return _C.build_info()


def isa():
    """The vector instruction set stax's kernels use, as (level in use, the CPU's level):
    "avx512", "avx2" or "sse2" ("baseline" off x86). The level in use is the CPU's, lowered
    by a cap (STAX_ISA in the environment, or set_isa_cap)."""
    return _C.isa()


def set_isa_cap(name):
    """Caps the instruction set stax's kernels use at `name` ("avx512", "avx2", "sse2";
    "native" or None: no cap), to run and test the code a lesser CPU runs. The generic kernels
    follow at once; the JIT reads the level when it starts (its first compile), so set the cap
    before any model runs compiled. Raises ValueError for an unknown name."""
    _C.set_isa_cap(name)


dtypes = tuple(name for name, _, _ in _C.dtypes())


__all__ = sorted(set(_ops_module.__all__) | {
    "DtypeError", "Error", "FailedPreconditionError", "InternalError", "InvalidArgumentError",
    "IoError", "OutOfMemoryError", "OutOfRangeError", "ParseError", "ShapeError", "Tensor",
    "UnimplementedError", "Dim", "Symbol", "ceildiv", "dim_max", "dim_min", "symbol", "Expr",
    "constant", "placeholder", "Kernel", "Model", "TensorInfo", "compile", "load",
    "load_program", "run", "Options", "InferenceSession", "get_available_providers",
    "from_dlpack", "asarray", "set_num_threads", "num_threads", "PASSES", "build_info", "isa",
    "set_isa_cap", "dtypes", "__version__",
})
