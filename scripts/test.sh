#!/usr/bin/env bash
# The whole test run (what `make test` and CI run): installs what is missing, builds stax three
# times — optimized, with AddressSanitizer + UndefinedBehaviorSanitizer, and with
# ThreadSanitizer — runs the C unit tests of the first two through ctest and the threaded ones
# of the third (scripts/tsan.sh), then the Python tests through pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

jobs=${STAX_BUILD_JOBS:-$(nproc)}
# A fresh JIT object cache for this run, so every run exercises compiling and loading alike
# and nothing is left in the user's cache folder.
export STAX_JIT_CACHE_DIR="$PWD/build/jit-cache-test"
rm -rf "$STAX_JIT_CACHE_DIR"

echo "== build (release) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"

echo "== build (asan+ubsan) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSTAX_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"

echo "== unit tests (release) =="
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== unit tests (asan+ubsan) =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"

echo "== threaded tests (tsan) =="
./scripts/tsan.sh

echo "== python package (pip install -e .) =="
.venv/bin/pip install -q --disable-pip-version-check --no-build-isolation -e .

echo "== python tests =="
STAX_BUILD_DIR="$PWD/build" .venv/bin/python -m pytest -q tests/python
