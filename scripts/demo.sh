#!/usr/bin/env bash
# stax's main job, as a newcomer runs it (`make demo`): installs what is missing, builds stax,
# then runs an ONNX transformer layer through `stax run` with changing shapes and compares
# every output with ONNX Runtime (scripts/demo.py).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target stax_cli >/dev/null
.venv/bin/python scripts/demo.py
