"""Session options: :class:`Options`, what :func:`stax.load`, :func:`stax.compile`,
:func:`stax.load_program` and :class:`stax.InferenceSession` take as ``options=``.

Every field is checked when it is set (the constructor, or an assignment later), so a bad
value fails where it is written, with a ValueError or TypeError naming the field. A field left
at None means "the default" (listed per field below). The keyword shortcuts of ``load`` and
``compile`` (``jit=``, ``disable_passes=``, ``dispatch=``, ``profile_timing=``) are the same
fields: giving one both ways with different values is an error naming both.
"""

import os

from . import _C

__all__ = ["Options"]

_JIT_MODES = ("on", "sync", "off")
_DISPATCH = ("default", "switch", "goto")


def _int_field(label, value, low):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{label} must be an int, not {type(value).__name__}")
    if value < low:
        raise ValueError(f"{label} must be >= {low}, got {value}")
    return value


def _bool_field(label, value):
    if not isinstance(value, bool):
        raise TypeError(f"{label} must be True or False, not {value!r}")
    return value


def _check_num_threads(value, label):
    return _int_field(label, value, 0)


def _check_jit(value, label):
    if not isinstance(value, str):
        raise ValueError(f"{label} must be 'on', 'sync' or 'off', not {value!r}")
    if value == "background":  # the C name of 'on'
        value = "on"
    if value not in _JIT_MODES:
        raise ValueError(f"{label} must be 'on', 'sync' or 'off', not {value!r}")
    return value


def _check_jit_threshold(value, label):
    return _int_field(label, value, 1)


def _check_jit_max_versions(value, label):
    return _int_field(label, value, 1)


def _check_jit_cache_dir(value, label):
    if value is False:
        return False
    if isinstance(value, bool) or not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{label} must be a folder (str or path) or False (no "
                        f"on-disk cache), not {value!r}")
    path = os.fsdecode(os.fspath(value))
    if not path:
        raise ValueError(f"{label} is empty: give a folder, or False for no "
                         "on-disk kernel cache")
    if "\0" in path:
        raise ValueError(f"{label} contains a NUL character")
    if len(os.fsencode(path)) >= 1024:
        raise ValueError(f"{label} is {len(os.fsencode(path))} bytes long; "
                         "the limit is 1023")
    return path


def _check_jit_verify(value, label):
    return _bool_field(label, value)


def _check_jit_tolerance(value, label):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{label} must be a number, not {type(value).__name__}")
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{label} must be a positive finite number, got {value}")
    return float(value)


def _check_jit_generic(value, label):
    return _bool_field(label, value)


def _check_disable_passes(value, label):
    names = value.split(",") if isinstance(value, str) else value
    try:
        names = [n.strip() if isinstance(n, str) else n for n in names]
    except TypeError:
        raise TypeError(f"{label} must be a list of pass names or a "
                        f"comma-separated string, not {type(value).__name__}") from None
    known = _C.passes()
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{label} entries must be pass names, got "
                            f"{type(name).__name__}")
        if name and name != "all" and name not in known:
            raise _C.InvalidArgumentError(f"{label}: unknown graph pass {name!r}; the passes "
                                          f"are {', '.join(known)} (or 'all')")
    return tuple(sorted(set(n for n in names if n)))


def _check_dispatch(value, label):
    if not isinstance(value, str) or value not in _DISPATCH:
        raise ValueError(f"{label} must be 'default', 'switch' or 'goto', not {value!r}")
    return value


def _check_profile_timing(value, label):
    return _bool_field(label, value)


def _check_trace(value, label):
    if value is True or value is False:
        return value
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{label} must be True, False or a file (str or path) for "
                        f"Kernel.save_trace(), not {value!r}")
    path = os.fsdecode(os.fspath(value))
    if not path:
        raise ValueError(f"{label} is empty: give a file, or True")
    return path


# field -> (checker, what None means); in the order repr shows them.
_FIELDS = {
    "num_threads": (_check_num_threads, "the process-wide pool (stax.set_num_threads)"),
    "jit": (_check_jit, "'on'"),
    "jit_threshold": (_check_jit_threshold, "2"),
    "jit_max_versions": (_check_jit_max_versions, "32"),
    "jit_cache_dir": (_check_jit_cache_dir, "the environment's (STAX_JIT_CACHE_DIR)"),
    "jit_verify": (_check_jit_verify, "False (or STAX_JIT_VERIFY=1)"),
    "jit_tolerance": (_check_jit_tolerance, "1e-4"),
    "jit_generic": (_check_jit_generic, "True (or STAX_JIT_GENERIC=0)"),
    "disable_passes": (_check_disable_passes, "every pass runs (or STAX_DISABLE_PASSES)"),
    "dispatch": (_check_dispatch, "'default'"),
    "profile_timing": (_check_profile_timing, "False"),
    "trace": (_check_trace, "False"),
}


class Options:
    """How a model is compiled and run, like ONNX Runtime's SessionOptions (pass it as
    ``options=`` to :func:`stax.load`, :func:`stax.compile`, :func:`stax.load_program`, or
    as ``sess_options`` to :class:`stax.InferenceSession`). Every field defaults to None (the
    default behaviour) and is checked when set:

    * num_threads: int >= 0. The model runs on a thread pool of its own with this many threads
      (0: one per core, or STAX_NUM_THREADS); None shares the process-wide pool.
    * jit: 'on' (compile hot segments on a background thread), 'sync' (compile on the calling
      thread) or 'off' (interpret only). Default 'on'.
    * jit_threshold: int >= 1, compile an exact-shape version of a segment once it has run
      this many times with the same shapes (shape-generic versions compile on first sight).
      Default 2.
    * jit_max_versions: int >= 1, compiled versions kept per segment (least recently used
      dropped first). Default 32.
    * jit_cache_dir: folder of the on-disk kernel cache for this model, or False for none.
      Default: the environment's (STAX_JIT_CACHE_DIR, else ~/.cache/stax/jit).
    * jit_verify: bool, also interpret every compiled segment and compare (slow; tests).
    * jit_tolerance: float > 0, jit_verify's tolerance |a - b| <= tol * (1 + |b|). Default 1e-4.
    * jit_generic: bool, compile shape-generic versions (one per shape class) before
      exact-shape ones. Default True.
    * disable_passes: graph passes to switch off, a list of names (stax.PASSES) or "all"
      (compile time: not for load_program).
    * dispatch: the interpreter's dispatch, 'default', 'switch' or 'goto'.
    * profile_timing: bool, time every bytecode instruction (Kernel.stats).
    * trace: True, or a file: record a trace of every call (interpreted instructions, JIT
      kernel runs, compiles) for Kernel.save_trace(), which writes it as Chrome trace-event
      JSON (to this file when it is one). Default False.
    """

    __slots__ = tuple("_" + name for name in _FIELDS)

    def __init__(self, **fields):
        """Options(num_threads=2, jit="sync", ...): any of the fields, by name."""
        for name in _FIELDS:
            object.__setattr__(self, "_" + name, None)
        for name, value in fields.items():
            if name not in _FIELDS:
                raise TypeError(f"Options has no field {name!r}; the fields are "
                                f"{', '.join(_FIELDS)}")
            setattr(self, name, value)

    def __repr__(self):
        given = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS
                          if getattr(self, name) is not None)
        return f"stax.Options({given})"

    def __eq__(self, other):
        if not isinstance(other, Options):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None

    def to_dict(self):
        """The fields that are set, as {name: value} (None fields left out)."""
        return {name: getattr(self, name) for name in _FIELDS if getattr(self, name) is not None}

    def copy(self, **changes):
        """A new Options with the same fields, and ``changes`` applied."""
        return Options(**{**self.to_dict(), **changes})

    @staticmethod
    def fields():
        """{field name: what None (the default) means}."""
        return {name: meaning for name, (_, meaning) in _FIELDS.items()}


def _field_property(name, check):
    def get(self):
        return getattr(self, "_" + name)

    def set_(self, value):
        object.__setattr__(self, "_" + name,
                           None if value is None else check(value, f"Options.{name}"))

    return property(get, set_, doc=f"The {name} field (None: {_FIELDS[name][1]}).")


for _name, (_check, _) in _FIELDS.items():
    setattr(Options, _name, _field_property(_name, _check))
del _name, _check


#: A keyword argument the caller did not give.
UNSET = object()


def resolve(options, where, **keywords):
    """The effective settings of a call: ``options`` (an Options or None) merged with the
    keyword shortcuts the caller gave (values other than UNSET), each checked like the field.
    A field given both ways with different values raises ValueError naming both."""
    if options is not None and not isinstance(options, Options):
        raise TypeError(f"{where}: options must be a stax.Options, not {type(options).__name__}")
    settings = options.to_dict() if options is not None else {}
    for name, value in keywords.items():
        if value is UNSET:
            continue
        checked = None if value is None else _FIELDS[name][0](value, name)
        if checked is None:
            continue
        if name in settings and settings[name] != checked:
            raise ValueError(f"{where}: {name}={value!r} and options.{name}="
                             f"{getattr(options, name)!r} disagree; give one of them")
        settings[name] = checked
    return settings
