#!/usr/bin/env bash
# GPU check of the hand-written CUDA GEMMs' shared main loop and epilogue (issue 28 must 3):
#   scripts/gpu-check-gemm.sh NEW_BUILD [OLD_BUILD]    # CUDA builds after (and before) the change
# 1. NEW_BUILD's CUDA tests that run those kernels against the reference: test_cuda_gemm_epilogue,
#    test_cuda_kernels, test_cuda_conv_transpose2d, test_cuda_layout. 2. With OLD_BUILD: old and new
#    interleaved, 3 rounds, infer-bench on the layers those kernels take (logs: .gpucheck/gemm/).
set -uo pipefail
cd "$(dirname "$0")/.."
new=${1:?usage: $0 NEW_BUILD [OLD_BUILD]}
old=${2:-}
logs=.gpucheck/gemm
mkdir -p "$logs"
nvidia-smi -L || echo "warning: nvidia-smi -L failed"
status=0
for t in test_cuda_gemm_epilogue test_cuda_kernels test_cuda_conv_transpose2d test_cuda_layout; do
  if [ ! -x "$new/tests/$t" ]; then echo "error: $new/tests/$t missing (cmake --build $new --target $t)"; status=1; continue; fi
  (cd "$new/tests" && ./$t) > "$logs/$t.log" 2>&1 && echo "pass $t" || { echo "FAIL $t (see $logs/$t.log)"; status=1; }
done
[ -n "$old" ] || exit $status

# The layers: VGG-16 conv1_1 (mma_small_cin_nhwc), EB-GAN's output layer (mma_small_cout_nhwc) and its
# transposed convs (segregated_mma_nhwc at batch 8), DCGAN; every variant per op is timed (infer-bench model).
for m in vgg16 dcgan ebgan; do "$new/model-zoo" "$m" -o "$logs/$m.fb" || status=1; done
for round in 1 2 3; do
  for side in old new; do
    b=$old; [ $side = new ] && b=$new
    for m in vgg16 dcgan ebgan; do
      for batch in 64 8; do
        "$b/infer-bench" --backend cuda --precision fp16 --batch $batch --runs 100 --warmup 20 \
          --json "$logs/$side-$m-b$batch-r$round.json" model "$logs/$m.fb" > "$logs/$side-$m-b$batch-r$round.txt" 2>&1 || status=1
      done
    done
    # segregated_gemm (wmma fp16 / tf32, SIMT fp32; skinny on the small layers) on the Table-4 layers
    for p in fp16 tf32 fp32; do
      "$b/infer-bench" --backend cuda --precision $p --batch 32 --runs 50 --table4 --tconv-variant segregated_gemm \
        --json "$logs/$side-table4-$p-r$round.json" > "$logs/$side-table4-$p-r$round.txt" 2>&1 || status=1
    done
  done
done
echo "timings in $logs/{old,new}-*.txt (compare the variants mma_small_cin_nhwc, mma_small_cout_nhwc,"
echo "segregated_mma_nhwc, segregated_gemm per layer across the three rounds)"
exit $status
