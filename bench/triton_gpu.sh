#!/usr/bin/env bash
# Triton on 1, 2, 4 GPUs, infer against PyTorch through the same Python backend (issue 29 must 4): for
# each GPU count (CUDA_VISIBLE_DEVICES=0..N-1; one instance per GPU) it starts tritonserver on infer's
# repository, then on PyTorch's (bench/triton_torch_model.py: channels_last + CUDA graph per bucket, or
# --torch-mode compile), runs bench/triton_load.py at increasing concurrency for each model (ResNet-50,
# DCGAN, EB-GAN; fp16; seeded weights, the same in both runtimes) and writes rows-*.json, machine.json,
# triton-gpu.json and triton-gpu.md (throughput, p50/p99, scaling per GPU) under $OUT. No internet
# needed: Triton from .venv-triton or the wheels of scripts/triton-wheels.sh (--wheels DIR).
#   bench/triton_gpu.sh [--gpus 1,2,4] [--models resnet50,dcgan,ebgan] [--runtimes infer,torch]
#       [--concurrency 1,4,16,64] [--batch 4] [--seconds 6] [--warmup 2] [--torch-mode graph|compile]
#       [--wheels DIR] [--infer-python DIR] [--onnx2fb PATH] [--work DIR] [--cpu] [--dry-run]
# An estimated 4-6 minutes per GPU count at the defaults, not yet measured (one command per count fits a
# 10-minute limit: --gpus 1, then --gpus 2, --gpus 4; `--summarize DIR...` merges their $OUT folders;
# the models are exported once into --work, default .triton-gpu/). --cpu: the same
# on the CPU (fp32, KIND_CPU, tiny windows; what can be checked without a GPU). --dry-run: print the
# commands only. Exit 1 (one `error:` line) on bad arguments or a server that does not come up; a
# level with failed requests is recorded (column failed) and the script goes on.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/.triton-gpu/out}
gpus=1,2,4 models=resnet50,dcgan,ebgan runtimes=infer,torch concurrency=1,4,16,64 batch=4 seconds=6
warmup=2 torch_mode=graph wheels="" work=$ROOT/.triton-gpu cpu=0 dry=0 max_batch=64 precision=fp16
infer_py="" onnx2fb="" summarize=()
die() { echo "error: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in --gpus|--models|--runtimes|--concurrency|--batch|--seconds|--warmup|--torch-mode|--wheels|--infer-python|\
    --onnx2fb|--work) [ $# -ge 2 ] || die "$1 needs a value" ;; esac
  case $1 in
    --gpus) gpus=$2; shift ;;
    --models) models=$2; shift ;;
    --runtimes) runtimes=$2; shift ;;
    --concurrency) concurrency=$2; shift ;;
    --batch) batch=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --torch-mode) torch_mode=$2; shift ;;
    --wheels) wheels=$2; shift ;;
    --infer-python) infer_py=$2; shift ;;
    --onnx2fb) onnx2fb=$2; shift ;;
    --work) work=$2; shift ;;
    --cpu) cpu=1 ;;
    --dry-run) dry=1 ;;
    --summarize) shift; summarize=("$@"); break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (--help lists them)" ;;
  esac
  shift
done
# The machine's python3 with torch (+ torchvision): exports, the torch backend (.venv-triton is made from
# it with --system-site-packages). Here Debian's /usr/bin/python3 has torch, not the python3 on PATH.
PY=${PYTHON:-python3}
[ -n "${PYTHON:-}" ] || python3 -c "import torch" 2>/dev/null || PY=/usr/bin/python3
TPY=$ROOT/.venv-triton/bin/python

if [ ${#summarize[@]} -gt 0 ]; then  # merge the $OUT folders of several runs (one per GPU count)
  mkdir -p "$OUT/merged"
  for d in "${summarize[@]}"; do
    [ -d "$d" ] || die "--summarize: '$d' is not a folder"
    cp "$d"/rows-*.json "$d"/output-*.npy "$OUT/merged/" 2>/dev/null
    [ -f "$d/machine.json" ] && cp "$d/machine.json" "$OUT/merged/"
  done
  exec "$PY" bench/triton_load.py --summarize "$OUT/merged"
fi

[[ $gpus =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--gpus takes comma-separated GPU counts, got '$gpus'"
[[ $concurrency =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--concurrency takes comma-separated integers, got '$concurrency'"
[[ $batch =~ ^[1-9][0-9]*$ ]] || die "--batch must be a positive integer, got '$batch'"
for r in ${runtimes//,/ }; do [[ $r = infer || $r = torch ]] || die "--runtimes: infer and/or torch, got '$r'"; done
kind=gpu
if [ $cpu = 1 ]; then
  # The CPU check: one "GPU count" 0 (no GPU visible), fp32, small batches, short windows; EB-GAN's
  # 256x256 generator is left out unless asked for (seconds per row on two cores).
  kind=cpu precision=fp32 gpus=0 max_batch=4
  [ "$torch_mode" = graph ] && torch_mode=channels_last
  [ "$models" = resnet50,dcgan,ebgan ] && models=resnet50,dcgan
fi
[ -n "$infer_py" ] || for d in "$ROOT/.gpucheck/python" "$ROOT/build/python" "$ROOT/build-cpu/python"; do
  ls "$d"/infer/_infer*.so >/dev/null 2>&1 && { infer_py=$d; break; }
done
[ -n "$onnx2fb" ] || for f in "$ROOT/.gpucheck/bin/onnx2fb" "$ROOT/build/onnx2fb" "$ROOT/build-cpu/onnx2fb"; do
  [ -x "$f" ] && { onnx2fb=$f; break; }
done
[ -d "$infer_py" ] || die "no built infer package (--infer-python DIR: a build's python/ folder)"
[ -f "$ROOT/.gpucheck/lib/libinfer.so.0" ] && [[ $infer_py == $ROOT/.gpucheck/* ]] &&
  export LD_LIBRARY_PATH="$ROOT/.gpucheck/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
models_dir=$work/models
repo() { echo "$work/repo-$1-$kind"; }

run() {  # prints the command; runs it unless --dry-run
  echo "+ $*"
  [ $dry = 1 ] || "$@"
}

if [ $dry = 0 ]; then
  mkdir -p "$OUT" "$work"
  PYTHON=$(command -v "$PY") scripts/install-triton.sh ${wheels:+--wheels "$wheels"} || exit 1
  "$TPY" -c "import torch" 2>/dev/null || die ".venv-triton does not see torch (made with another python3? rm -rf .venv-triton)"
  why=$(PYTHONPATH="$infer_py" "$TPY" -c "import infer, infer.triton" 2>&1) || die "cannot import infer from $infer_py" \
    "(${why##*$'\n'}; with .gpucheck/: scripts/gpu-check-python.sh compiles the extension for this python3)"
fi
missing=0
for m in ${models//,/ }; do [ -f "$models_dir/$m.fb" ] && [ -f "$models_dir/$m.pt" ] || missing=1; done
if [ $missing = 1 ]; then
  [ -n "$onnx2fb" ] || die "no onnx2fb (--onnx2fb PATH) to export the models"
  run "$PY" bench/triton_models.py export --out "$models_dir" --models "$models" --onnx2fb "$onnx2fb" || exit 1
fi
for r in ${runtimes//,/ }; do
  # No `gpus` in instance_group: one instance on every GPU the server sees.
  run env PYTHONPATH="$infer_py" "$TPY" bench/triton_models.py repo "$models_dir" --runtime "$r" --out "$(repo "$r")" \
    --only "$models" --kind $kind --precision $precision --max-batch $max_batch --torch-mode "$torch_mode" || exit 1
done
if [ $dry = 0 ]; then
  "$PY" - "$OUT/machine.json" "$kind" "$precision" "$batch" "$torch_mode" <<'EOF'
import datetime, json, platform, subprocess, sys
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""
import torch
json.dump({"date": datetime.datetime.now().isoformat(timespec="seconds"), "host": platform.node(),
           "gpus": sh("nvidia-smi", "-L").splitlines(), "cpu": platform.processor() or platform.machine(),
           "torch": torch.__version__, "infer_commit": sh("git", "rev-parse", "--short", "HEAD"),
           "kind": sys.argv[2], "precision": sys.argv[3], "batch_per_request": int(sys.argv[4]),
           "torch_mode": sys.argv[5]}, open(sys.argv[1], "w"), indent=1)
EOF
fi

http=${TRITON_HTTP_PORT:-8000} grpc=${TRITON_GRPC_PORT:-8001} metrics=${TRITON_METRICS_PORT:-8002}
for g in ${gpus//,/ }; do
  if [ "$g" = 0 ]; then visible=""; else visible=$(seq -s, 0 $((g - 1))); fi
  for r in ${runtimes//,/ }; do
    log=$OUT/server-$r-${g}gpu.log
    echo "== $r on $g GPU(s) (CUDA_VISIBLE_DEVICES='$visible'), $precision, server log $log"
    cmd=(env CUDA_VISIBLE_DEVICES="$visible" PYTHONPATH="$infer_py" "$TPY" -m infer.triton serve "$(repo "$r")"
         --http-port $http --grpc-port $grpc --metrics-port $metrics --workdir "$work/server-$r")
    if [ $dry = 1 ]; then
      echo "+ ${cmd[*]} &"
    else
      "${cmd[@]}" >"$log" 2>&1 &
      server=$!
      # Ready when every model of the repository is (planning / capture happen at load).
      if ! "$TPY" - "$http" "$models" "$server" <<'EOF'
import os, sys, time
import tritonclient.http as http
c = http.InferenceServerClient(f"localhost:{sys.argv[1]}")
deadline = time.time() + 300
while time.time() < deadline:
    try:
        os.kill(int(sys.argv[3]), 0)
    except OSError:
        sys.exit(1)
    try:
        if all(c.is_model_ready(m) for m in sys.argv[2].split(",")):
            sys.exit(0)
    except Exception:  # noqa: BLE001 - not up yet
        pass
    time.sleep(1)
sys.exit(1)
EOF
      then
        kill -TERM $server 2>/dev/null; wait $server
        tail -20 "$log" >&2
        die "tritonserver ($r, $g GPU(s)) did not get its models ready: $log"
      fi
    fi
    for m in ${models//,/ }; do
      run "$TPY" bench/triton_load.py --model "$m" --url localhost:$grpc --batch "$batch" --concurrency "$concurrency" \
        --seconds "$seconds" --warmup "$warmup" --tag "$r $precision ${g}gpu" \
        --meta runtime=$r gpus=$g precision=$precision --json "$OUT/rows-$r-${g}gpu-$m.json" \
        --save-output "$OUT/output-$r-${g}gpu-$m.npy"
    done
    if [ $dry = 0 ]; then
      kill -TERM $server 2>/dev/null
      wait $server
      echo "tritonserver exited $? (SIGTERM)"
    fi
  done
done
[ $dry = 1 ] && exit 0
"$PY" bench/triton_load.py --summarize "$OUT"
