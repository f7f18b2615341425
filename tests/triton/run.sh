#!/usr/bin/env bash
# ctest's triton_server: installs Triton (scripts/install-triton.sh: nvidia-pytriton and tritonclient
# into .venv-triton, idempotent) and runs test_triton_server.py with that venv's Python and the build's
# `infer` package. Exit 77 (ctest: skipped), with the reason on one line, only where the wheels cannot
# be installed; any other failure fails the test. Usage: run.sh SOURCE_DIR BINARY_DIR
set -uo pipefail
src=$1 bin=$2
if ! why=$("$src/scripts/install-triton.sh" 2>&1 >/dev/null); then
  echo "SKIPPED: Triton's wheels cannot be installed here: ${why##*$'\n'}"
  exit 77
fi
[ -f "$bin/python/infer/triton.py" ] || { echo "error: $bin/python/infer has no triton.py (build the infer_python target)"; exit 1; }
export PYTHONPATH="$bin/python" INFER_SOURCE_DIR="$src" INFER_BINARY_DIR="$bin"
exec "$src/.venv-triton/bin/python" -m pytest -q -p no:cacheprovider -rs -s "$src/tests/triton/test_triton_server.py"
