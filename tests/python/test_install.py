"""cmake --install: the libraries, headers, program, stax.pc and CMake package land under a
prefix, and examples/c/hello.c builds against them both ways the README shows (the CMake
package, static; pkg-config, shared) and runs. And `pip install` puts a working `stax` command
next to the interpreter (the console script runs the program the package bundles)."""
import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def build_dir():
    return pathlib.Path(os.environ.get("STAX_BUILD_DIR", REPO / "build"))


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    for tool in ("cmake", "cc", "pkg-config"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    if not (build_dir() / "CMakeCache.txt").exists():
        pytest.skip(f"no configured build in {build_dir()}")
    root = tmp_path_factory.mktemp("install") / "prefix"
    r = subprocess.run(["cmake", "--install", str(build_dir()), "--prefix", str(root)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return root


def check_hello(binary, env=None):
    r = subprocess.run([str(binary)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hello: ok" in r.stdout
    assert r.stdout.count("sum 1.0000") == 7  # two rows at B=2, five at B=5


def test_installed_files(prefix):
    for path in ("include/stax/stax.h", "include/stax/ops.def", "include/stax/passes.def",
                 "lib/libstax.a", "lib/libstax.so", "lib/pkgconfig/stax.pc",
                 "lib/cmake/stax/staxConfig.cmake", "lib/cmake/stax/staxConfigVersion.cmake",
                 "bin/stax"):
        assert (prefix / path).exists(), path
    r = subprocess.run([str(prefix / "bin/stax"), "version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("stax ")


def test_example_with_the_cmake_package(prefix, tmp_path):
    build = tmp_path / "hello"
    r = subprocess.run(["cmake", "-S", str(REPO / "examples/c"), "-B", str(build),
                        f"-DCMAKE_PREFIX_PATH={prefix}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    check_hello(build / "hello")


def test_example_with_pkg_config(prefix, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib/pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "stax"], capture_output=True,
                           text=True, env=env)
    assert flags.returncode == 0, flags.stderr
    libdir = subprocess.run(["pkg-config", "--variable=libdir", "stax"], capture_output=True,
                            text=True, env=env).stdout.strip()
    assert pathlib.Path(libdir).resolve() == (prefix / "lib").resolve()
    binary = tmp_path / "hello"
    # -Wall -Wextra -Werror: the public headers compile clean in a user's strict build.
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror",
                        str(REPO / "examples/c/hello.c"), *flags.stdout.split(),
                        f"-Wl,-rpath,{libdir}", "-o", str(binary)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    check_hello(binary)
    static = subprocess.run(["pkg-config", "--static", "--libs", "stax"], capture_output=True,
                            text=True, env=env).stdout
    assert "protobuf-c" in static and "-lm" in static


# -- the `stax` console script of the Python package ----------------------------------------

def installed_script():
    """The `stax` script pip put next to this interpreter, or None (package not pip-installed
    into this environment: then the tests below say so and skip)."""
    import sys
    script = pathlib.Path(sys.executable).parent / "stax"
    return script if script.exists() else None


def test_console_script_runs_the_bundled_program():
    import sys
    script = installed_script()
    if script is None:
        pytest.skip(f"no stax script next to {sys.executable}: the package is not "
                    "pip-installed here (pip install -e .)")
    r = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("usage: stax <command>")
    r = subprocess.run([str(script), "version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("stax ")
    if (build_dir() / "stax").exists():  # the same program as the CMake build's
        built = subprocess.run([str(build_dir() / "stax"), "version"], capture_output=True,
                               text=True)
        assert r.stdout == built.stdout
    r = subprocess.run([str(script), "no-such-command"], capture_output=True, text=True)
    assert r.returncode != 0 and "unknown command 'no-such-command'" in r.stderr
    r = subprocess.run([sys.executable, "-m", "stax", "version"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout.startswith("stax ")


def test_console_script_does_not_import_the_package():
    """The launcher finds the program without running the package's __init__ (numpy and the
    extension: ~150 ms before the program starts), and hands `report` and a missing program
    to the package."""
    import sys
    code = ("import sys, _stax_cli; d = _stax_cli._package_dir(); "
            "print(d is not None and (d / '__init__.py').exists(), 'stax' in sys.modules, "
            "'numpy' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "False"]
    r = subprocess.run([sys.executable, "-m", "_stax_cli", "report", "--help"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "usage" in (r.stdout + r.stderr).lower()


def test_console_script_without_the_program_says_so(tmp_path, monkeypatch, capsys):
    import sys
    sys.path.insert(0, str(REPO / "python"))
    try:
        from stax import _cli
    finally:
        sys.path.pop(0)
    monkeypatch.setattr(_cli, "program_path", lambda: tmp_path / "missing" / "stax")
    assert _cli.main(["--help"]) == 127
    assert "the command-line program is not in this installation" in capsys.readouterr().err
