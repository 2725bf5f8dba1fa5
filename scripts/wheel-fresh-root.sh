#!/bin/bash
# Installs a stax wheel into a fresh Debian 12 root and runs it there: another machine's
# filesystem on this one. The root is a debootstrap --variant=minbase with python3 and venv
# only (no LLVM, protobuf-c, compiler or headers); numpy comes from a wheel that pip
# downloads on the host first. Needs root, debootstrap (apt-get install debootstrap) and
# Debian's mirror; about two minutes the first time (the root is kept in ROOT for later runs).
#
#   scripts/wheel-fresh-root.sh dist/stax-*.whl [ROOT]
#
# Not part of make test (it needs the mirror and root); test_wheel.py's mount-namespace test
# is the offline stand-in. It prints `stax version --verbose`, runs `stax run` with the JIT,
# and compares a compiled call with an interpreted one through the Python API.
set -euo pipefail
wheel=$(readlink -f "${1:?usage: scripts/wheel-fresh-root.sh WHEEL [ROOT]}")
root=${2:-/tmp/stax-fresh-root}
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
if [ ! -x "$root/usr/bin/python3" ]; then
  echo "wheel-fresh-root: making a Debian 12 minbase root in $root"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" \
    http://deb.debian.org/debian >/dev/null
fi
mkdir -p "$root/opt/stax/wheels"
cp "$wheel" "$root/opt/stax/wheels/"
version=$(chroot "$root" python3 -c 'import sys; print("%d%d" % sys.version_info[:2])')
"$python" -m pip download -q numpy --only-binary=:all: --python-version "$version" \
  -d "$root/opt/stax/wheels"
"$python" -c "import sys; sys.path.insert(0, '$here/bench'); import models, onnx; \
onnx.save(models.bert_encoder(hidden=64, heads=4, ffn=128), '$root/opt/stax/model.onnx')"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc"' EXIT
chroot "$root" /bin/bash -euc '
cd /opt/stax
rm -rf venv && python3 -m venv venv
venv/bin/pip install -q --no-index --find-links wheels stax
ls /usr/lib/x86_64-linux-gnu | grep -E "LLVM|protobuf" || echo "this root has no LLVM or protobuf-c"
venv/bin/stax version --verbose | head -5
venv/bin/stax run model.onnx --shape x=2x9x64 --jit sync --repeat 5 2>&1 | tail -2
venv/bin/python -c "
import numpy as np, stax
m = stax.load(\"model.onnx\", jit=\"sync\")
x = np.random.default_rng(0).standard_normal((3, 11, 64)).astype(np.float32)
a, b = m(x), stax.load(\"model.onnx\", jit=\"off\")(x)
diff = max(float(np.abs(a[k] - b[k]).max()) for k in a)
assert diff < 1e-4 and m.stats[\"calls\"][\"compiled\"] == 1, (diff, m.stats[\"calls\"])
print(\"compiled call against the interpreter: max abs diff\", diff)
"
'
echo "wheel-fresh-root: $(basename "$wheel") ran in $root"
