#!/bin/bash
# infer's int8 convolutions (quantized_conv2d.qgemm) against its fp32 plan and against the same quantized
# model run as fake quantization (--pass fuse_quantized_conv2d=off), on the byom torchvision models
# (bench/byom_vs_peers.py's export: seeded random weights, 224x224), quantized by `infer quantize
# --calib random` (speed only: random weights have no accuracy to keep). infer-bench model
# --default-only, the plans alternating per level, thread count and round; prints one line each. Plans:
# fp32, int8 (8-bit weights: the pmaddwd GEMM), int8r (`--reduce-range`, 7-bit weights: the vpmaddubsw
# GEMM on AVX2 / AVX-512), fake (int8's model with fuse_quantized_conv2d off), int8f (int8 with
# quantized_activations off: float tensors between the int8 convolutions, as before that pass).
# A model WORKDIR/NAME.fb already there is used as it is (the zoo generators: `model-zoo ebgan -o
# WORKDIR/ebgan.fb`, or models/ebgan_fashion.fb copied there).
# Usage: bench/cpu_int8_vs_fp32.sh BUILD WORKDIR [models...]
#        (env: ISAS="avx2 baseline", THREADS="1 2", KINDS="fp32 int8 int8r fake", RUNS=10, ROUNDS=2)
set -eu
build=$(cd "$1" && pwd)
work=$2
shift 2
models=${*:-resnet18 resnet50 mobilenet_v2}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
cd "$work"
for m in $models; do
  if [ ! -f "$m.fb" ]; then
    /usr/bin/python3 - "$here" "$m" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import byom_vs_peers as b
net = b.build_model(sys.argv[2], 14, (3, 224, 224))
b.export_onnx(net, (3, 224, 224), sys.argv[2] + '.onnx')
PY
    "$build/onnx2fb" "$m.onnx" "$m.fb" > /dev/null
  fi
  [ -f "${m}_int8.fb" ] || "$build/infer" quantize "$m.fb" --calib random --samples 16 --batch 8 \
      --report-samples 4 --out "${m}_int8.fb" > /dev/null
  [ -f "${m}_int8r.fb" ] || "$build/infer" quantize "$m.fb" --calib random --samples 16 --batch 8 \
      --report-samples 4 --reduce-range --out "${m}_int8r.fb" > /dev/null
done
export OMP_WAIT_POLICY=passive
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# model level threads round kind | infer-bench's default line (median min max GFLOP/s ...)"
for m in $models; do
  for isa in ${ISAS:-avx2 baseline}; do
    for t in ${THREADS:-1 2}; do
      for round in $(seq 1 "${ROUNDS:-2}"); do
        for kind in ${KINDS:-fp32 int8 int8r fake}; do
          f=$m.fb extra=()
          [ "$kind" = fp32 ] || f=${m}_int8.fb
          [ "$kind" = int8r ] && f=${m}_int8r.fb
          [ "$kind" = fake ] && extra=(--pass fuse_quantized_conv2d=off)
          [ "$kind" = int8f ] && extra=(--pass quantized_activations=off)
          line=$(INFER_CPU_ISA=$isa "$build/infer-bench" --threads "$t" --runs "${RUNS:-10}" --warmup 2 "${extra[@]}" \
                 model "$f" --default-only 2>&1 | grep -m1 -E '^default +[0-9]')
          echo "$m $isa t$t r$round $kind | $line"
        done
      done
    done
  done
done
