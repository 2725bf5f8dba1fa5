#!/usr/bin/env bash
# The conformance test as ctest runs it: generates the cases and numpy references into OUTDIR
# (in the build tree), then runs every case through stax.
#   run.sh PYTHON RUNNER OUTDIR [runner options: --filter OP, --verbose, --no-chain]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=$1
if ! [ -x "$python" ]; then
  echo "run.sh: $python not found (run scripts/setup.sh); trying python3" >&2
  python=python3
fi
runner=$2
outdir=$3
shift 3
rm -rf "$outdir"
"$python" "$here/gen_cases.py" "$outdir"
exec "$runner" "$outdir" "$@"
