#!/usr/bin/env bash
# Installs the Debian packages infer builds and tests with (docs/design.md "Dependencies"); clang with
# libclang-rt-14-dev (libFuzzer, sanitizer runtimes) and libomp-dev (its OpenMP) build `make fuzz`.
# Then CUTLASS's headers (scripts/fetch-cutlass.sh, pinned; python3-pip fetches them). Idempotent:
# packages already present are skipped, so a second run costs one dpkg query and a file test. Runs as
# root or via sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libflatbuffers-dev flatbuffers-compiler
  libspdlog-dev libfmt-dev
  doctest-dev libstb-dev libcli11-dev nlohmann-json3-dev
  libopenblas-dev libopenblas-openmp-dev liblapacke-dev zlib1g-dev
  dataset-fashion-mnist
  libonnx-dev libprotobuf-dev protobuf-compiler python3-torch python3-torchvision python3-onnx python3-numpy
  python3-dev python3-pip pybind11-dev libdlpack-dev python3-pytest
  clang libclang-rt-14-dev libomp-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exec "$(dirname "$0")/fetch-cutlass.sh"
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
"$(dirname "$0")/fetch-cutlass.sh"
