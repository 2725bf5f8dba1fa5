#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer (in build-fuzz/), writes their seed corpora
# (tests/fuzz/make_corpus.py) and runs each fuzzer: ONNX import + compile, program load, .npy.
#
#   scripts/fuzz.sh                 each fuzzer for FUZZ_SECONDS (default 300) seconds (make fuzz)
#   scripts/fuzz.sh --runs N        each fuzzer for N executions (make test runs a short pass)
#
# Inputs that crash, leak, trip a sanitizer or take over 10 s land in build-fuzz/artifacts/;
# the run fails if any fuzzer found one. New interesting inputs accumulate in
# build-fuzz/corpus-found/ between runs.
set -uo pipefail
cd "$(dirname "$0")/.."

limit=(-max_total_time="${FUZZ_SECONDS:-300}")
if [ "${1:-}" = "--runs" ]; then
  limit=(-runs="${2:?--runs needs a count}")
elif [ -n "${1:-}" ]; then
  echo "usage: scripts/fuzz.sh [--runs N]  (or FUZZ_SECONDS=S scripts/fuzz.sh)" >&2
  exit 2
fi

if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: installing clang (libFuzzer)"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq clang >/dev/null ||
    { echo "fuzz: could not install clang"; exit 1; }
fi

jobs=${STAX_BUILD_JOBS:-$(nproc)}
fuzzers=(fuzz_onnx_import fuzz_program_load fuzz_npy)
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DSTAX_SANITIZE=ON -DSTAX_FUZZ=ON \
  >/dev/null && cmake --build build-fuzz -j"$jobs" --target "${fuzzers[@]}" ||
  { echo "fuzz: build failed"; exit 1; }

rm -rf build-fuzz/corpus
.venv/bin/python tests/fuzz/make_corpus.py build-fuzz/corpus || { echo "fuzz: no corpus"; exit 1; }
mkdir -p build-fuzz/artifacts

failed=0
for fuzzer in "${fuzzers[@]}"; do
  kind=${fuzzer#fuzz_}
  case $kind in onnx_import) kind=onnx ;; program_load) kind=program ;; esac
  found=build-fuzz/corpus-found/$kind
  mkdir -p "$found"
  echo "== $fuzzer (${limit[*]}) =="
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 STAX_JIT_CACHE=0 \
    "build-fuzz/$fuzzer" "${limit[@]}" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$fuzzer-" \
    "$found" "build-fuzz/corpus/$kind" 2>&1 | tail -n 25; then
    failed=1
  fi
done
exit $failed
