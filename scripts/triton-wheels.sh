#!/usr/bin/env bash
# Downloads the wheels scripts/install-triton.sh installs (nvidia-pytriton, tritonclient[all], psutil and
# every dependency) into a folder, for a machine without internet (the GPU machines): carry the folder
# and run `scripts/install-triton.sh --wheels DIR` there. Wheels for CPython 3.10, 3.11 and 3.12 on
# manylinux x86-64 (glibc >= 2.35), so the GPU machine's python3 need not be this one's.
#   scripts/triton-wheels.sh [DIR]      default DIR: .whl/triton
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.whl/triton}
PACKAGES=(nvidia-pytriton==0.7.0 "tritonclient[all]==2.73.0" psutil)  # as in scripts/install-triton.sh
pip=(/usr/bin/python3 -m pip)
[ -x .venv-triton/bin/pip ] && pip=(.venv-triton/bin/pip)
mkdir -p "$out"
for py in 3.10 3.11 3.12; do
  "${pip[@]}" download -q --disable-pip-version-check --only-binary=:all: --platform manylinux_2_35_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --python-version "$py" --implementation cp -d "$out" "${PACKAGES[@]}" ||
    { echo "error: cannot download the wheels for Python $py" >&2; exit 1; }
done
echo "triton-wheels: $(ls "$out" | wc -l) wheels, $(du -sh "$out" | cut -f1) in $out (install there: scripts/install-triton.sh --wheels $out)"
