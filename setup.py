"""Builds the stax Python package: the C library and the stax._C extension through CMake.

    pip install .                      # a regular install (a wheel, built out of the tree)
    pip wheel . -w dist/               # the same wheel, kept (make wheel: scripts/wheel.sh)
    pip install -e .                   # editable: python/stax is used in place
    python setup.py build_ext --inplace  # python/stax/_C*.so next to the sources

build_ext runs CMake on python/CMakeLists.txt, which adds the repository's CMake project and
links the extension against the library's own CMake targets (so the link dependencies come
from the library's CMake files). Two layouts:

* A wheel (`pip install .`, `pip wheel .`): STAX_PY_BUNDLE, a self-contained
  stax/_lib/libstax.so that both the extension and the `stax` program (stax/_bin/stax) link
  through their RPATH; LLVM, protobuf-c, zlib, zstd and libstdc++ are linked into it
  statically (cmake/static_deps.cmake), so the wheel needs only glibc and libgcc_s from the
  machine it runs on. The binaries are stripped. CMake builds in a temporary folder, and
  setuptools stages there too: the source tree is left as it was.
* In place (editable installs, build_ext --inplace): the extension links libstax.a and the
  system's shared LLVM and protobuf-c; the CMake folder persists between builds
  (incremental), build-python/<interpreter tag>/ in the repository (build-python/cpython-311).

Environment: $STAX_PY_BUILD_DIR, a CMake folder of one's own for either (kept, so rebuilds
are incremental: scripts/wheel.sh --reuse-build); $STAX_PY_BUNDLE=0|1 overrides the layout;
$STAX_PY_STRIP=0 keeps the wheel's symbols and debug info; $STAX_PY_BUILD_TYPE (default
RelWithDebInfo: optimized, asserts on) and $STAX_BUILD_JOBS (default: the CPU count) tune the
build.

Progress: pip shows a build backend's output only with -v, so while CMake builds, one line per
tenth of the work also goes to the terminal (/dev/tty, when there is one and stderr is not
it already); STAX_PY_PROGRESS=0 turns that off.

The `stax` console script (stax._cli:main, pyproject.toml) runs the bundled program, so
`pip install` puts the very program `make build` makes on PATH.
"""
import atexit
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent

# The commands that build in place (editable installs, build_ext --inplace, develop).
IN_PLACE = any(arg in ("editable_wheel", "develop", "--inplace", "-i") for arg in sys.argv[1:])


def _flag(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value not in ("0", "off", "OFF", "no", "false")


def _scratch_dir():
    """A temporary folder for one out-of-tree build, removed when the build process ends."""
    path = tempfile.mkdtemp(prefix="stax-build-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return pathlib.Path(path)


class Progress:
    """Forwards CMake's output to stdout (pip's log; shown by pip -v) and, when the user would
    otherwise see nothing, one line per tenth of the build on the terminal."""

    STEP = re.compile(rb"^\[\s*(\d+)%\]")

    def __init__(self):
        self.tty = None
        if _flag("STAX_PY_PROGRESS", True) and not sys.stderr.isatty():
            try:
                self.tty = open("/dev/tty", "w")
            except OSError:
                self.tty = None  # no terminal (CI, a service): the log has it all
        self.start = time.monotonic()
        self.shown = -1

    def show(self, text):
        # Over pip's spinner: back to the line's start and clear it first.
        self.tty.write("\r\033[K" + text + "\n")
        self.tty.flush()

    def say(self, text):
        print(text, flush=True)
        if self.tty:
            self.show(text)

    def run(self, command):
        """Runs command, forwarding its output; raises CalledProcessError when it fails."""
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for line in process.stdout:
            sys.stdout.buffer.write(line)
            match = self.STEP.match(line)
            if match and self.tty:
                tenth = int(match.group(1)) // 10
                if tenth > self.shown:
                    self.shown = tenth
                    self.show(f"stax: building the C library and extension: "
                              f"{int(match.group(1))}% ({time.monotonic() - self.start:.0f} s)")
        sys.stdout.flush()
        if process.wait():
            raise subprocess.CalledProcessError(process.returncode, command)

    def close(self):
        if self.tty:
            self.tty.close()
            self.tty = None


class CMakeExtension(Extension):
    """An extension whose sources CMake compiles (python/csrc/*.c)."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuildExt(build_ext):
    def run(self):
        # In place (editable installs, build_ext --inplace) setuptools copies only the
        # extension into python/stax; the program goes along here.
        inplace = self.inplace or getattr(self, "editable_mode", False)
        self.bundled_files = []
        super().run()
        if inplace:
            for built, relative in self.bundled_files:
                destination = ROOT / "python" / "stax" / relative
                destination.parent.mkdir(exist_ok=True)
                if built.resolve() != destination.resolve():
                    shutil.copy2(built, destination)

    def build_extension(self, ext):
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        inplace = self.inplace or getattr(self, "editable_mode", False) or IN_PLACE
        bundle = _flag("STAX_PY_BUNDLE", not inplace)
        if os.environ.get("STAX_PY_BUILD_DIR"):
            build_dir = pathlib.Path(os.environ["STAX_PY_BUILD_DIR"]).resolve()
        elif inplace:
            # One CMake tree per interpreter (its headers and extension suffix are cached there).
            build_dir = ROOT / "build-python" / sys.implementation.cache_tag
        else:
            build_dir = _scratch_dir() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        build_type = os.environ.get("STAX_PY_BUILD_TYPE", "RelWithDebInfo")
        jobs = os.environ.get("STAX_BUILD_JOBS", str(os.cpu_count() or 1))
        progress = Progress()
        layout = "a self-contained libstax.so" if bundle else "the system's LLVM"
        progress.say(f"stax: configuring CMake in {build_dir} ({build_type}, {layout}; "
                     f"pip -v shows every step)")
        configure = [
            "cmake", "-S", str(ROOT / "python"), "-B", str(build_dir),
            f"-DCMAKE_BUILD_TYPE={build_type}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DSTAX_PY_BUNDLE={'ON' if bundle else 'OFF'}",
        ]
        targets = ["stax_python", "stax_py_cli" if bundle else "stax_cli"]
        try:
            progress.run(configure)
            progress.run(["cmake", "--build", str(build_dir), "--target", *targets, "-j", jobs])
        finally:
            elapsed = time.monotonic() - progress.start
            progress.say(f"stax: CMake finished after {elapsed:.0f} s")
            progress.close()

        built = sorted(build_dir.glob("_C*.so")) + sorted(build_dir.glob("_C*.pyd"))
        if not built:
            raise RuntimeError(f"CMake did not produce the stax._C extension in {build_dir}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        # The command-line program, run by the `stax` console script (python/stax/_cli.py),
        # and in the wheel's layout the library both link.
        extras = [(build_dir / "_bin" / "stax", "_bin/stax"),
                  (build_dir / "_lib" / "libstax.so", "_lib/libstax.so")] if bundle else \
                 [(build_dir / "stax" / "stax", "_bin/stax")]
        strip = bundle and not inplace and _flag("STAX_PY_STRIP", True) and shutil.which("strip")
        for source, destination in [(built[-1], target)] + \
                [(s, target.parent / r) for s, r in extras]:
            if not source.exists():
                raise RuntimeError(f"CMake did not produce {source}")
            destination.parent.mkdir(exist_ok=True)
            shutil.copy2(source, destination)
            if strip:
                # Debug info and local symbols: 56 -> 43 MB for libstax.so.
                subprocess.check_call(["strip", "--strip-unneeded", str(destination)])
        for source, relative in extras:
            self.bundled_files.append((target.parent / relative, relative))


def _options():
    """Where setuptools stages its own files (build/lib.*, build/bdist.*, *.egg-info): in
    place, build-python/setuptools (build/ is the top-level CMake build directory); otherwise
    a temporary folder, so `pip install .` leaves nothing in the source tree."""
    base = ROOT / "build-python" / "setuptools" if IN_PLACE else _scratch_dir() / "setuptools"
    options = {"build": {"build_base": str(base)}}
    if not IN_PLACE:
        base.mkdir(parents=True, exist_ok=True)
        options["egg_info"] = {"egg_base": str(base)}
    return options


setup(
    ext_modules=[CMakeExtension("stax._C")],
    cmdclass={"build_ext": CMakeBuildExt},
    options=_options(),
)
