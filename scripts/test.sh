#!/usr/bin/env bash
# The whole test run (what `make test` and CI run): installs what is missing, builds stax three
# times — optimized, with AddressSanitizer + UndefinedBehaviorSanitizer, and with
# ThreadSanitizer — runs the C unit tests of the first two through ctest and the threaded ones
# of the third (scripts/tsan.sh), then the Python tests through pytest, then a short pass of
# the fuzzers (scripts/fuzz.sh: clang, ASan + UBSan, 100000 executions each).
#
# Every stage runs even when an earlier one failed (a failed build skips only the stages that
# need it); the run ends with one summary of the stages and exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh || { echo "setup failed"; exit 1; }

jobs=${STAX_BUILD_JOBS:-$(nproc)}
# A fresh JIT object cache for this run, so every run exercises compiling and loading alike
# and nothing is left in the user's cache folder.
export STAX_JIT_CACHE_DIR="$PWD/build/jit-cache-test"
rm -rf "$STAX_JIT_CACHE_DIR"

names=()
results=()
# stage NAME COMMAND...: runs the command, records passed/failed.
stage() {
  local name=$1
  shift
  echo "== $name =="
  if "$@"; then
    results+=("passed")
  else
    results+=("failed")
  fi
  names+=("$name")
}
# skip NAME WHY: a stage that cannot run (its build failed) counts as failed.
skip() {
  echo "== $1 == skipped: $2"
  names+=("$1")
  results+=("failed (skipped: $2)")
}
passed() { [[ ${results[$1]} == passed ]]; }

build_release() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j"$jobs"
}
build_asan() {
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSTAX_SANITIZE=ON >/dev/null &&
    cmake --build build-asan -j"$jobs"
}
unit_asan() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs"
}
python_package() {
  .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation -e .
}
python_tests() {
  STAX_BUILD_DIR="$PWD/build" .venv/bin/python -m pytest -q tests/python
}

stage "build (release)" build_release
release_built=$((${#results[@]} - 1))
stage "build (asan+ubsan)" build_asan
asan_built=$((${#results[@]} - 1))
if passed $release_built; then
  stage "unit tests (release)" ctest --test-dir build --output-on-failure -j"$jobs"
else
  skip "unit tests (release)" "the release build failed"
fi
if passed $asan_built; then
  stage "unit tests (asan+ubsan)" unit_asan
else
  skip "unit tests (asan+ubsan)" "the asan build failed"
fi
stage "threaded tests (tsan)" ./scripts/tsan.sh
if passed $release_built; then
  stage "python package (pip install -e .)" python_package
  stage "python tests" python_tests
else
  skip "python package (pip install -e .)" "the release build failed"
  skip "python tests" "the release build failed"
fi
stage "fuzzers (asan+ubsan, short)" ./scripts/fuzz.sh --runs "${STAX_FUZZ_RUNS:-100000}"

echo
echo "== summary =="
failed=0
for i in "${!names[@]}"; do
  printf '  %-36s %s\n' "${names[$i]}" "${results[$i]}"
  [[ ${results[$i]} == passed ]] || failed=$((failed + 1))
done
echo "stages: $((${#names[@]} - failed)) passed, $failed failed"
[[ $failed -eq 0 ]]
