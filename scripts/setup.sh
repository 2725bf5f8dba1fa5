#!/usr/bin/env bash
# Installs what stax needs to build and test, skipping whatever is already there:
# Debian packages (compiler, CMake, LLVM 19, protobuf-c, ONNX proto + test data, DLPack) and a
# Python virtual environment in .venv with the test requirements.
set -euo pipefail
cd "$(dirname "$0")/.."

debian_packages=(
  build-essential cmake pkg-config python3-venv
  llvm-19-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata
  libdlpack-dev
  # libzstd.a: the wheel links LLVM's dependencies statically (cmake/static_deps.cmake).
  libzstd-dev
)

missing=()
for pkg in "${debian_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python_bin=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating Python virtual environment in .venv"
  "$python_bin" -m venv .venv
fi
# requirements-test.txt pins nothing exotic; pip skips what is installed.
if ! .venv/bin/python -c "import pytest, numpy, onnx, onnxruntime, setuptools, wheel, auditwheel, matplotlib" 2>/dev/null; then
  echo "setup: installing Python test requirements"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-test.txt
fi
