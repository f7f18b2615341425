#!/bin/sh
# Two builds side by side at the AVX-512 and AVX2 levels (issue 27): `infer-bench model X.fb --default-only`
# per model, level and build, the builds alternating inside each round so that both see the same machine
# load; OPENBLAS_CORETYPE as bench/byom_vs_peers.py sets it per level (SkylakeX / Haswell). One line per run:
# UTC time, 1-minute load, round, model, level, build, median and min ms.
#
#   bench/cpu_isa_side_by_side.sh OLD_BUILD NEW_BUILD ROUNDS MODEL.fb... [env: THREADS=2 RUNS=20]
#
# A build is a folder with infer-bench and libinfer.so* (a copy of an older build-cpu works: its
# libinfer.so is found through LD_LIBRARY_PATH, which precedes the binaries' RUNPATH).
set -eu
[ $# -ge 4 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1; }
old=$1; new=$2; rounds=$3; shift 3
for b in "$old" "$new"; do [ -x "$b/infer-bench" ] || { echo "error: $b/infer-bench not found" >&2; exit 1; }; done
for r in $(seq "$rounds"); do for m in "$@"; do for isa in avx512 avx2; do
  ct=SkylakeX; [ "$isa" = avx2 ] && ct=Haswell
  for b in "$old" "$new"; do
    t=$(LD_LIBRARY_PATH=$b OPENBLAS_CORETYPE=$ct INFER_CPU_ISA=$isa OMP_WAIT_POLICY=PASSIVE \
        "$b/infer-bench" --threads "${THREADS:-2}" --runs "${RUNS:-20}" --warmup 3 model "$m" --default-only 2>&1 |
        awk '$1 == "default" && $2 ~ /^[0-9]/ {print $2, $3}')
    echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg) round $r $(basename "$m" .fb) $isa $([ "$b" = "$new" ] && echo new || echo old) median/min ms: $t"
  done; done; done; done
