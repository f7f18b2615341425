#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets (fuzz/, clang + ASan + UBSan, into build-fuzz/) and runs each
# for FUZZ_SECONDS (default 60) from its committed seeds (fuzz/corpus/<name>/; new inputs go to
# build-fuzz/fuzz/work/<name>/, the seeds are never modified). Any finding fails: a crash, a sanitizer
# report, a leak, an input slower than 10 s or one using more than 2 GB; the input is kept as
# build-fuzz/fuzz/findings/<name>/<kind>-<sha1>. Usage: scripts/fuzz.sh [target ...] (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-60}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(model onnx npy image idx)

command -v clang++ >/dev/null || { echo "error: clang++ not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DINFER_FUZZ=ON -DINFER_CUDA=OFF \
  -DINFER_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target fuzz_targets

failed=()
for name in "${targets[@]}"; do
  exe="$build/fuzz/fuzz_$name"
  seeds="fuzz/corpus/$name"
  work="$build/fuzz/work/$name"
  findings="$build/fuzz/findings/$name"
  [ -x "$exe" ] || { echo "error: no fuzz target '$name' ($exe)" >&2; exit 1; }
  mkdir -p "$work" "$findings"
  echo "=== fuzz_$name: ${seconds}s from $seeds ==="
  # One OpenMP / OpenBLAS thread: the fuzzer runs one input at a time, and leak checks stay exact.
  if ! OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
      ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
      UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="$findings/" -print_final_stats=1 "$work" "$seeds" \
        > "$build/fuzz/$name.log" 2>&1; then
    failed+=("$name")
    tail -n 60 "$build/fuzz/$name.log"
  fi
  grep -E "^#[0-9]+.*DONE|^stat::number_of_executed_units|^stat::peak_rss_mb" "$build/fuzz/$name.log" || true
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "error: fuzzing found problems in: ${failed[*]} (inputs in $build/fuzz/findings/)" >&2
  exit 1
fi
echo "fuzz: no findings in ${targets[*]} (${seconds}s each)"
