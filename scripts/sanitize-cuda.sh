#!/usr/bin/env bash
# compute-sanitizer memcheck + racecheck over the CUDA kernel tests on a GPU machine: `make sanitize-cuda`
# or scripts/sanitize-cuda.sh [BUILD_DIR] [LOG_DIR] (SANITIZE_TESTS="..." picks a subset), in quick mode
# (INFER_TEST_QUICK=1: the tools slow launches ~100x). Clean = memcheck 0 errors, racecheck hazards only in
# cuBLAS's and cuDNN's own kernels (nvjet, xmma, cutlass, cublas, cudnn, sm90_*: synchronisation racecheck cannot
# model), never ours. CUTLASS kernels that infer instantiates (conv2d/conv_transpose2d `cutlass`) are ours:
# their mangled names carry infer's namespace (5infer) in the template arguments.
# Exit 0 clean, 1 not, 2 when it cannot run here (no compute-sanitizer, no CUDA build, no GPU).
set -uo pipefail

build=${1:-build}
logs=${2:-$build/sanitize-cuda}
read -r -a tests <<<"${SANITIZE_TESTS:-test_cuda_kernels test_cuda_conv_transpose2d test_cuda_layout}"  # or a subset
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

[ -x "$san" ] || { echo "sanitize-cuda: compute-sanitizer not found (CUDA toolkit's bin/)" >&2; exit 2; }
for t in "${tests[@]}"; do
  [ -x "$build/tests/$t" ] || { echo "sanitize-cuda: $build/tests/$t not built (a CUDA build is needed)" >&2; exit 2; }
done
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "sanitize-cuda: no CUDA device on this machine (nvidia-smi -L failed); run it on a GPU machine" >&2
  exit 2
fi
mkdir -p "$logs"

status=0
for t in "${tests[@]}"; do
  log="$logs/$t.memcheck.log"
  INFER_TEST_QUICK=1 "$san" --tool memcheck --error-exitcode 99 "$build/tests/$t" >"$log" 2>&1
  rc=$?
  summary=$(grep -E "ERROR SUMMARY" "$log" | tail -1)
  if grep -q "CUDA tests skipped" "$log"; then
    echo "sanitize-cuda: $t skipped its tests (no usable CUDA device): $log" >&2
    status=1
  elif [ $rc -ne 0 ]; then
    echo "memcheck  $t: FAILED (exit $rc) ${summary:-} -> $log"
    status=1
  else
    echo "memcheck  $t: clean, ${summary:-no summary}"
  fi

  log="$logs/$t.racecheck.log"
  # Unfiltered (a --kernel-name filter made racecheck fail internally, 2026-11-23) and with mangled
  # names, which have no spaces: "Race reported between Write access at NAME+0x.. in FILE ...".
  INFER_TEST_QUICK=1 "$san" --tool racecheck --demangle no "$build/tests/$t" >"$log" 2>&1
  rc=$?
  names() { grep -oE "access at [^ +]+" "$log" | awk '{print $3}'; }
  kernels=$(names | sort | uniq -c)
  ours=$( (names | grep -E '5infer'; names | grep -v -i -E 'nvjet|xmma|cutlass|cublas|cudnn|sm90_|sm80_') | sort -u)
  if [ $rc -ne 0 ] || ! grep -q "Status: SUCCESS" "$log"; then
    echo "racecheck $t: the tests failed under racecheck (exit $rc) -> $log"
    status=1
  elif [ -n "$ours" ]; then
    echo "racecheck $t: hazards in infer kernels: $(echo $ours) -> $log"
    status=1
  else
    echo "racecheck $t: no hazard in infer kernels$([ -n "$kernels" ] && echo "; cuBLAS-internal hazards (allowed): $(echo $kernels)")"
  fi
done
exit $status
