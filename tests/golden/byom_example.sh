#!/usr/bin/env bash
# Runs the worked example of README.md's "Bring your own model" section exactly as written: every
# ```sh block of that section, in order, in a fresh temporary folder, with the built onnx2fb and infer first on
# PATH and python3 = Debian's /usr/bin/python3 (python3-torch, python3-onnx).
#   byom_example.sh SOURCE_DIR BINARY_DIR
set -euo pipefail
src=$1
bin=$2
doc="$src/README.md"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/bin"
ln -s "$bin/onnx2fb" "$work/bin/onnx2fb"
ln -s "$bin/infer" "$work/bin/infer"
ln -s /usr/bin/python3 "$work/bin/python3"
export PATH="$work/bin:$PATH"

# The ```sh blocks of the section, concatenated into one script.
awk '/^## / && !inside {section = ($0 == "## Bring your own model")}
     section && /^```sh$/ {inside = 1; next}
     inside && /^```$/ {inside = 0; next}
     inside {print}' "$doc" > "$work/example.sh"
if [ ! -s "$work/example.sh" ]; then
  echo "error: no sh blocks in the \"Bring your own model\" section of $doc" >&2
  exit 1
fi
cd "$work"
bash -euo pipefail -x example.sh
test -s tiny.fb
test -s tiny.trace.json
echo "byom_example: README.md \"Bring your own model\" ran end to end"
