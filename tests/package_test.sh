#!/usr/bin/env bash
# Package test: installs the build into a temporary prefix, configures apps/example standalone against
# it (find_package(infer) through CMAKE_PREFIX_PATH), builds it, and runs it on lenet5 from model-zoo;
# the example must print lenet5's output shape. The installed infer and model-zoo must run from the
# prefix too. Needs only cmake and the compiler.
#   package_test.sh SOURCE_DIR BUILD_DIR CXX_COMPILER GENERATOR SANITIZE(ON|OFF)
set -euo pipefail

if [ $# -ne 5 ]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR CXX_COMPILER GENERATOR SANITIZE" >&2
  exit 2
fi
src=$1 build=$2 cxx=$3 generator=$4 sanitize=$5

work=$(mktemp -d "${TMPDIR:-/tmp}/infer-package-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "package_test: install $build -> $work/prefix"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"

# A sanitized libinfer needs the sanitizer runtime first in the executable too.
flags=()
if [ "$sanitize" = "ON" ] || [ "$sanitize" = "TRUE" ] || [ "$sanitize" = "1" ]; then
  flags+=(-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined
          -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined)
fi

echo "package_test: configure apps/example standalone"
cmake -S "$src/apps/example" -B "$work/example" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }

echo "package_test: build infer-example"
cmake --build "$work/example" >"$work/build.log" || { cat "$work/build.log"; exit 1; }

# The example must resolve libinfer from the temporary prefix, not the build tree.
if command -v ldd >/dev/null; then
  libs=$(ldd "$work/example/infer-example")
  grep -qF "$work/prefix" <<<"$libs" ||
    { echo "package_test: infer-example does not link the installed libinfer:" >&2; echo "$libs" >&2; exit 1; }
fi

echo "package_test: the installed apps run from the prefix"
version=$("$work/prefix/bin/infer" --version)
grep -q "^infer " <<<"$version" || { echo "package_test: installed infer --version: $version" >&2; exit 1; }
"$work/prefix/bin/model-zoo" lenet5 --out "$work/lenet5.fb" --seed 1 >/dev/null

echo "package_test: run infer-example on lenet5"
output=$("$work/example/infer-example" "$work/lenet5.fb")
echo "$output"
grep -q "shape 1x10" <<<"$output" || { echo "package_test: expected an output of shape 1x10" >&2; exit 1; }
echo "package_test: passed"
