#!/usr/bin/env bash
# Installs Triton Inference Server (PyPI's nvidia-pytriton: tritonserver, libtritonserver, the Python
# backend) and tritonclient into the project's own virtual environment .venv-triton (never a build
# dependency of the engine; docs/serving.md). --system-site-packages keeps Debian's numpy and torch
# visible. Versions are pinned; idempotent (a second run checks the imports and returns).
#   scripts/install-triton.sh                  from PyPI
#   scripts/install-triton.sh --wheels DIR     offline, from a folder made by scripts/triton-wheels.sh
# Exit 0 when the venv is ready, 1 (one line on stderr saying why) when the wheels cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${INFER_TRITON_VENV:-.venv-triton}
PYTHON=${PYTHON:-/usr/bin/python3}
# Keep in step with scripts/triton-wheels.sh.
PACKAGES=(nvidia-pytriton==0.7.0 "tritonclient[all]==2.73.0" psutil)
wheels=""
if [ "${1:-}" = "--wheels" ]; then
  [ -d "${2:-}" ] || { echo "error: --wheels needs a folder (made by scripts/triton-wheels.sh)" >&2; exit 1; }
  wheels=$(cd "$2" && pwd)
fi

check() { "$VENV/bin/python" -c "import pytriton, tritonclient.http, tritonclient.grpc, psutil" 2>/dev/null &&
          [ -x "$("$VENV/bin/python" -c 'import pytriton,os;print(os.path.dirname(pytriton.__file__))')/tritonserver/bin/tritonserver" ]; }
if [ -x "$VENV/bin/python" ] && check; then
  echo "install-triton: $VENV ready"
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv --system-site-packages "$VENV" || { echo "error: cannot create $VENV with $PYTHON -m venv (Debian: python3-venv)" >&2; exit 1; }
fi
if [ -n "$wheels" ]; then
  "$VENV/bin/pip" install -q --no-index --find-links "$wheels" "${PACKAGES[@]}" ||
    { echo "error: cannot install ${PACKAGES[*]} from $wheels" >&2; exit 1; }
else
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PACKAGES[@]}" ||
    { echo "error: cannot install ${PACKAGES[*]} from PyPI (offline? see scripts/triton-wheels.sh)" >&2; exit 1; }
fi
check || { echo "error: $VENV has no working tritonserver after the install" >&2; exit 1; }
echo "install-triton: $VENV ready ($("$VENV/bin/pip" show nvidia-pytriton | sed -n 's/^Version: /nvidia-pytriton /p'))"
