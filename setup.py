"""Builds the stax Python package: the C library and the stax._C extension through CMake.

    pip install .                      # a regular install
    pip install -e .                   # editable: python/stax is used in place
    python setup.py build_ext --inplace  # python/stax/_C*.so next to the sources

build_ext runs CMake on python/CMakeLists.txt, which adds the repository's CMake project and
links the extension against its stax_static target (so the link dependencies — threads, libm,
protobuf-c for the ONNX importer — come from the library's own CMake files). The CMake build
directory persists between builds (incremental): build-python/<interpreter tag>/ in the
repository (e.g. build-python/cpython-311), or $STAX_PY_BUILD_DIR. $STAX_PY_BUILD_TYPE
(default RelWithDebInfo) and $STAX_BUILD_JOBS (default: the CPU count) tune it.

The same CMake build makes the `stax` command-line program (target stax_cli), which goes into
the package as stax/_bin/stax; the `stax` console script (stax._cli:main, pyproject.toml) runs
it, so `pip install` puts the very program `make build` makes on PATH.
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeExtension(Extension):
    """An extension whose sources CMake compiles (python/csrc/*.c)."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuildExt(build_ext):
    def run(self):
        # In place (editable installs, build_ext --inplace) setuptools builds in build-python/
        # and copies only the extension into python/stax; the program goes along here.
        inplace = self.inplace or getattr(self, "editable_mode", False)
        self.bundled_programs = []
        super().run()
        if inplace:
            for program in self.bundled_programs:
                destination = ROOT / "python" / "stax" / "_bin" / program.name
                destination.parent.mkdir(exist_ok=True)
                if program.resolve() != destination.resolve():
                    shutil.copy2(program, destination)

    def build_extension(self, ext):
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        # One CMake tree per interpreter (its headers and extension suffix are cached there).
        default_dir = ROOT / "build-python" / sys.implementation.cache_tag
        build_dir = pathlib.Path(os.environ.get("STAX_PY_BUILD_DIR", default_dir))
        build_dir.mkdir(parents=True, exist_ok=True)
        build_type = os.environ.get("STAX_PY_BUILD_TYPE", "RelWithDebInfo")
        jobs = os.environ.get("STAX_BUILD_JOBS", str(os.cpu_count() or 1))
        configure = [
            "cmake", "-S", str(ROOT / "python"), "-B", str(build_dir),
            f"-DCMAKE_BUILD_TYPE={build_type}",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ]
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "stax_python",
                               "stax_cli", "-j", jobs])
        built = sorted(build_dir.glob("_C*.so")) + sorted(build_dir.glob("_C*.pyd"))
        if not built:
            raise RuntimeError(f"CMake did not produce the stax._C extension in {build_dir}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[-1], target)
        # The command-line program, run by the `stax` console script (python/stax/_cli.py).
        program = build_dir / "stax" / "stax"
        if not program.exists():
            raise RuntimeError(f"CMake did not produce the stax program at {program}")
        bin_dir = target.parent / "_bin"
        bin_dir.mkdir(exist_ok=True)
        shutil.copy2(program, bin_dir / "stax")
        self.bundled_programs.append(bin_dir / "stax")


setup(
    ext_modules=[CMakeExtension("stax._C")],
    cmdclass={"build_ext": CMakeBuildExt},
    # setuptools' own staging (build/lib.*, build/temp.*) stays out of build/, which is the
    # top-level CMake build directory.
    options={"build": {"build_base": str(ROOT / "build-python" / "setuptools")}},
)
