#!/bin/sh
# Table 4 of the unified kernel-segregation paper at every CPU ISA level this machine has (issue 27, must 5):
# `infer-bench --table4 --model DCGAN --model EB-GAN` once per level with INFER_CPU_ISA=<level> (and
# OPENBLAS_CORETYPE, for the variants that call OpenBLAS) on all cores, then one markdown table per level:
# per layer every conv_transpose2d variant's median ms and its speedup over `conventional`, and the model
# totals. Levels from /proc/cpuinfo: avx512 = avx512f+bw+vl+dq, avx2 = avx2+fma, baseline always.
#
#   bench/cpu_table4_isa.sh [--build DIR] [--out DIR] [--threads N] [--runs N] [--warmup N]
#                           [--levels avx512,avx2,baseline] [--tag TAG] [--quick]
#
# Writes <out>/cpu-table4-isa-<date>[-TAG].md and .json (the .json holds infer-bench's JSON per level).
# Needs only a python3 (standard library) for the tables. Exit: 0 done, 1 usage error, 2 a run failed.
set -eu

build=build
out=$(dirname "$0")/results
threads=$(nproc)
runs=20
warmup=3
levels=""
tag=""
cmdline="$0 $*"
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --levels) levels=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --quick) runs=3; warmup=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown argument $1" >&2; usage >&2; exit 1 ;;
  esac
done
bench=$build/infer-bench
[ -x "$bench" ] || { echo "error: $bench not found; build it first (cmake --build $build --target infer-bench)" >&2; exit 1; }

flags=$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2)
has() { for f in "$@"; do case " $flags " in *" $f "*) ;; *) return 1 ;; esac; done; }
supported=""
has avx512f avx512bw avx512vl avx512dq && supported="avx512"
has avx2 fma && supported="$supported avx2"
supported="$supported baseline"
if [ -z "$levels" ]; then
  levels=$supported
else
  levels=$(echo "$levels" | tr ',' ' ')
  for l in $levels; do
    case " $supported " in *" $l "*) ;; *) echo "error: this CPU has no ISA level '$l' (it has:$supported)" >&2; exit 1 ;; esac
  done
fi

coretype() { case "$1" in avx512) echo SkylakeX ;; avx2) echo Haswell ;; *) echo Prescott ;; esac; }
date=$(date -u +%Y-%m-%d)
stem=$out/cpu-table4-isa-$date${tag:+-$tag}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
load_before=$(cat /proc/loadavg)
for l in $levels; do
  echo "\$ INFER_CPU_ISA=$l OPENBLAS_CORETYPE=$(coretype "$l") $bench --threads $threads --runs $runs --warmup $warmup --table4 --model DCGAN --model EB-GAN --json $tmp/$l.json" >&2
  INFER_CPU_ISA=$l OPENBLAS_CORETYPE=$(coretype "$l") OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
    OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} \
    "$bench" --threads "$threads" --runs "$runs" --warmup "$warmup" --table4 --model DCGAN --model EB-GAN \
    --json "$tmp/$l.json" >&2 || { echo "error: infer-bench --table4 failed at level $l" >&2; exit 2; }
done

# shellcheck disable=SC2086  # $levels: one argument per level
python3 - "$stem" "$tmp" "$load_before" "$(cat /proc/loadavg)" "$cmdline" $levels <<'EOF'
import json, os, sys

stem, tmp, load_before, load_after, command = sys.argv[1:6]
levels = sys.argv[6:]
runs = {lvl: json.load(open(os.path.join(tmp, lvl + ".json"))) for lvl in levels}
first = runs[levels[0]]
env = first.get("environment", {})
coretype = {"avx512": "SkylakeX", "avx2": "Haswell", "baseline": "Prescott"}
out = ["# Table 4 transposed-conv layers per CPU ISA level (DCGAN, EB-GAN)", "",
       "`infer-bench --table4` at each ISA level (INFER_CPU_ISA, OPENBLAS_CORETYPE), batch %s, %s threads, "
       "median of %s runs after %s warm-up; speedup over `conventional` (zero insertion) in brackets. Written by "
       "`bench/cpu_table4_isa.sh`." % (first.get("batch"), env.get("threads"), first.get("runs"), first.get("warmup")),
       "", "- command: `%s`" % command, "- CPU: %s" % env.get("cpu"), "- infer: %s" % env.get("infer_version"),
       "- load average before: %s; after: %s" % (load_before, load_after), ""]
for lvl in levels:
    j = runs[lvl]
    e = j.get("environment", {})
    isa = [str(v) for k, v in e.items() if "isa" in k.lower()]
    variants = j["variants"]
    out += ["## %s" % lvl, "",
            "INFER_CPU_ISA=%s, OPENBLAS_CORETYPE=%s; %s; infer-bench's UTC time %s, load average %s." % (
                lvl, coretype[lvl], "the engine reports ISA " + ", ".join(isa) if isa else
                "this build reports no ISA of its own (a binary that predates INFER_CPU_ISA ignores it)",
                e.get("utc"), e.get("loadavg")), ""]
    head = ["model", "input NxNxC_in", "output"] + ["%s ms (x)" % v for v in variants]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for layer in j["layers"]:
        res = {r["label"]: r for r in layer["results"]}
        cells = [layer["model"], "%dx%dx%d" % (layer["n"], layer["n"], layer["c_in"]),
                 "%dx%dx%d" % (2 * layer["n"], 2 * layer["n"], layer["c_out"])]
        for v in variants:
            r = res.get(v)
            cells.append("%.3f (%.2fx)" % (r["time"]["median_ms"], r.get("speedup") or 0)
                         if r and r.get("ran") else "n/a")
        out.append("| " + " | ".join(cells) + " |")
    for t in j["totals"]:
        cells = ["**%s total**" % t["model"], "%d layers" % t["layers"], ""]
        for v in variants:
            tv = t["variants"].get(v)
            cells.append("**%.3f (%.2fx)**" % (tv["total_ms"], tv.get("speedup") or 0)
                         if tv and "total_ms" in tv else "n/a")
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
if len(levels) > 1:
    out += ["## Model totals across levels (ms; each level's over the first's in brackets)", ""]
    head = ["model", "variant"] + levels
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in first["totals"]:
        for v in first["variants"]:
            vals = []
            for lvl in levels:
                tt = next((x for x in runs[lvl]["totals"] if x["model"] == t["model"]), {})
                vals.append((tt.get("variants", {}).get(v) or {}).get("total_ms"))
            if vals[0] is None:
                continue
            out.append("| %s | %s | %s |" % (t["model"], v, " | ".join(
                "n/a" if x is None else "%.3f (%.2fx)" % (x, x / vals[0]) for x in vals)))
    out.append("")
open(stem + ".md", "w").write("\n".join(out))
json.dump({"command": command, "levels": levels, "load_before": load_before, "load_after": load_after,
           "infer_bench": runs}, open(stem + ".json", "w"), indent=1)
print("\n".join(out))
print("wrote %s.{md,json}" % stem, file=sys.stderr)
EOF
