"""Shared setup for the Python API tests (test_api*.py): imports the stax package.

Order: the installed package (`pip install -e .` puts python/ on the path), else the in-tree
python/ directory; when its extension (stax._C) is not built there yet, it is built in place
once with `python setup.py build_ext --inplace` (CMake; incremental in build-python/).
This module has no tests of its own.
"""
import importlib
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def _forget_stax():
    for name in [m for m in sys.modules if m == "stax" or m.startswith("stax.")]:
        del sys.modules[name]


def _import_stax():
    try:
        import stax  # noqa: F401
        return sys.modules["stax"]
    except ImportError:
        _forget_stax()
    source = str(REPO / "python")
    if source not in sys.path:
        sys.path.insert(0, source)
    try:
        import stax  # noqa: F401
        return sys.modules["stax"]
    except ImportError:
        _forget_stax()
    subprocess.check_call([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=REPO)
    importlib.invalidate_caches()
    import stax  # noqa: F401
    return sys.modules["stax"]


stax = _import_stax()
