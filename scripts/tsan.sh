#!/usr/bin/env bash
# ThreadSanitizer check of stax's threaded code: builds stax with -fsanitize=thread in
# build-tsan and runs, through ctest, every test that starts threads or thread pools (the
# thread pool, the buffer pool, the VM on four threads, the JIT tier's background compiler,
# four LLVM compiles at once, the parallel kernels, the conformance chains). Fails on any
# TSan report (halt_on_error=1, exit code 66). Suppressions: tests/tsan.supp (LLVM only).
#
# Environment: STAX_BUILD_JOBS (default: nproc) for build and ctest parallelism;
# STAX_NUM_THREADS (default 4) sizes the default pool, so workers interleave even on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=${STAX_BUILD_JOBS:-$(nproc)}
tsan_flags="-fsanitize=thread -g -O1 -fno-omit-frame-pointer"

# The threaded tests: these, plus any tests/unit/test_*.c that starts threads or pools itself
# (found below, so a new one is covered without editing this list). conformance runs its
# op chains on four threads (tests/conformance/chain.c).
tests=(
  test_allocator test_pool test_threadpool
  test_vm_threads test_vm_jit test_jit_llvm test_jit_fused
  conformance
)
for src in $(grep -lE 'pthread_create|stax_threadpool_(create|default)' tests/unit/test_*.c); do
  name=$(basename "$src" .c)
  [[ " ${tests[*]} " == *" $name "* ]] || tests+=("$name")
done

echo "== build (tsan) =="
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DSTAX_SANITIZE=OFF \
  -DCMAKE_C_FLAGS="$tsan_flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" >/dev/null
cmake --build build-tsan -j"$jobs"

regex="^($(IFS='|'; echo "${tests[*]}"))\$"
# ctest -R silently skips a name that no longer exists: check that each one is still there.
found=$(ctest --test-dir build-tsan -N -R "$regex" | sed -n 's/^Total Tests: //p')
if [ "$found" != "${#tests[@]}" ]; then
  echo "tsan: ctest knows $found of the ${#tests[@]} tests listed in $0" >&2
  exit 1
fi

echo "== threaded tests (tsan): ${tests[*]} =="
# allocator_may_return_null: some tests allocate absurd sizes on purpose and expect a NULL.
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 \
allocator_may_return_null=1 suppressions=$PWD/tests/tsan.supp"
STAX_NUM_THREADS=${STAX_NUM_THREADS:-4} \
  ctest --test-dir build-tsan --output-on-failure -j"$jobs" -R "$regex"
