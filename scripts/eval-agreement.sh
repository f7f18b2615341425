#!/usr/bin/env bash
# CPU-vs-CUDA agreement of `infer eval --features` (issue 16): evaluates the shipped EB-GAN generator
# against the Fashion-MNIST test images on both backends with one seed (fp32) and checks that the
# Fréchet distance, its two terms and the class entropy agree to the third significant digit (within
# half a unit of it). Needs a CUDA build of infer and python3 (standard library only).
# Usage: scripts/eval-agreement.sh [BUILD_DIR [IMAGES [SAMPLES]]]; exit 1 when they disagree.
set -euo pipefail
build=${1:-build}
images=${2:-}
samples=${3:-10000}
if [ -z "$images" ]; then
  for f in /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz .data/fashion-mnist/t10k-images-idx3-ubyte.gz; do
    [ -f "$f" ] && images=$f && break
  done
fi
[ -n "$images" ] || { echo "error: no t10k-images-idx3-ubyte.gz; pass its path" >&2; exit 2; }
out=${OUT:-$(mktemp -d)}
for backend in cpu cuda; do
  "$build/infer" eval --model models/ebgan_fashion.fb --features models/lenet5_fashion.fb \
    --images "$images" --samples "$samples" --seed 1 --backend "$backend" --json > "$out/eval_$backend.json"
done
python3 - "$out/eval_cpu.json" "$out/eval_cuda.json" <<'PY'
import json, math, sys
cpu, cuda = (json.load(open(path)) for path in sys.argv[1:3])
ok = True
for key in ("frechet_distance", "frechet_mean_term", "frechet_covariance_term", "entropy_bits"):
    x, y = cpu[key], cuda[key]
    tolerance = 0.5 * 10 ** (math.floor(math.log10(abs(x))) - 2) if x else 5e-3
    agree = abs(x - y) <= tolerance
    ok &= agree
    print(f"{key:24} cpu {x:.6g}  cuda {y:.6g}  |diff| {abs(x - y):.3g}  {'agree' if agree else 'DIFFER'} (3 significant digits)")
moved = sum(abs(a["count"] - b["count"]) for a, b in zip(cpu["classes"], cuda["classes"])) // 2
print(f"class histogram: {moved} of {cpu['generated']['count']} samples change class between backends")
print(f"images/s: cpu {cpu['images_per_second']:.0f}, cuda {cuda['images_per_second']:.0f} ({cuda['precision']})")
sys.exit(0 if ok else 1)
PY
