#!/usr/bin/env bash
# Fetches CUTLASS's C++ headers (docs/design.md "Dependencies": PyPI's nvidia-cutlass, version pinned, its
# wheel checked by SHA-256) into .deps/cutlass-<version>/include, where CMake looks for them
# (INFER_CUTLASS). Only the headers are kept; nothing is installed into any Python. Idempotent: a
# second run finds the headers and returns. Called by scripts/install-deps.sh.
set -euo pipefail

version=4.2.0.0
sha256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.deps/cutlass-$version"

if [ -f "$dest/include/cutlass/cutlass.h" ]; then
  echo "fetch-cutlass: CUTLASS $version headers present ($dest/include)"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "nvidia-cutlass==$version --hash=sha256:$sha256" > "$tmp/requirements.txt"
# pip download only fetches and checks the wheel (no install, so PEP 668 does not apply).
/usr/bin/python3 -m pip download --quiet --no-deps --require-hashes -r "$tmp/requirements.txt" -d "$tmp"
/usr/bin/python3 - "$tmp" "$dest" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(os.path.join(tmp, "nvidia_cutlass-*.whl"))
prefix = "cutlass_library/source/include/"
staging = dest + ".partial"
shutil.rmtree(staging, ignore_errors=True)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            out = os.path.join(staging, "include", name[len(prefix):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(name) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
shutil.rmtree(dest, ignore_errors=True)
os.rename(staging, dest)  # whole or nothing: an interrupted run leaves no half tree behind
PY
echo "fetch-cutlass: CUTLASS $version headers in $dest/include"
