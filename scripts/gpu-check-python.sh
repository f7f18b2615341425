#!/usr/bin/env bash
# The Python package's GPU checks (issue 15), for a GPU machine without the Debian -dev packages:
#   here:        scripts/gpu-check-python.sh --pack build-cuda     # after building build-cuda (CUDA)
#   GPU machine: scripts/gpu-check-python.sh                       # with .gpucheck/ carried over
# --pack copies what the checks need into .gpucheck/ (git-ignored): libinfer, the built package, the
# infer / model-zoo / onnx2fb tools and the static libraries the extension links. On the GPU machine
# the packed extension is used when its Python ABI matches python3 there; otherwise the extension is
# recompiled there with g++ against that python3, PyTorch's bundled pybind11 and dlpack.h. Then: the
# pytest suite (CUDA cases included) when pytest is there, else the CUDA cases alone, the examples on
# the GPU, and bench/python_overhead.py --backend cuda. Logs under .gpucheck/logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
PACK=.gpucheck

if [ "${1:-}" = "--pack" ]; then
  build=${2:-build-cuda}
  for t in infer model-zoo onnx2fb; do
    [ -x "$build/$t" ] || { echo "error: $build/$t missing: cmake --build $build first (all targets)" >&2; exit 1; }
  done
  ls "$build"/python/infer/_infer*.so >/dev/null 2>&1 || { echo "error: no Python package in $build/python" >&2; exit 1; }
  rm -rf "$PACK" && mkdir -p "$PACK/lib" "$PACK/bin" "$PACK/static"
  cp -L "$build/libinfer.so.0" "$PACK/lib/"   # the soname the extension needs, as a plain file
  cp -a "$build/python" "$PACK/python"
  cp "$build/infer" "$build/model-zoo" "$build/onnx2fb" "$PACK/bin/"
  cp "$build/apps/libinfer_appcommon.a" "$build/apps/onnx2fb/libinfer_onnx.a" "$build/models/libinfer_zoo.a" "$PACK/static/"
  grep -q "^CMAKE_CUDA_COMPILER:.*nvcc" "$build/CMakeCache.txt" || echo "warning: $build has no CUDA compiler: a CPU-only build" >&2
  du -sh "$PACK"
  echo "packed into $PACK/; carry it (and the source tree) to the GPU machine and run $0 there"
  exit 0
fi

[ -d "$PACK" ] || { echo "error: no $PACK/ (run '$0 --pack build-cuda' on the build machine and carry it)" >&2; exit 1; }
mkdir -p "$PACK/logs"
export LD_LIBRARY_PATH="$PWD/$PACK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$PWD/$PACK/python" INFER_SOURCE_DIR="$PWD" INFER_BINARY_DIR="$PWD/$PACK/bin" OMP_WAIT_POLICY=passive
PY=${PYTHON:-python3}
nvidia-smi -L || echo "warning: nvidia-smi -L failed"
$PY -c "import sys, numpy, torch; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"

suffix=$($PY -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
if ! ls "$PACK/python/infer/_infer$suffix" >/dev/null 2>&1; then
  echo "== the packed extension is $(ls $PACK/python/infer/ | grep '^_infer.*\.so$'); compiling _infer$suffix for this python3"
  pyinc=$($PY -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  tinc=$($PY -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'include'))")
  pbinc=${PYBIND11_INCLUDE:-$tinc}   # PyTorch's wheels bundle pybind11's headers
  dl=${DLPACK_H:-$(find "$tinc" -name dlpack.h | head -1)}   # wheels: torch/include/ATen/dlpack.h
  [ -f "$pyinc/Python.h" ] || { echo "error: no Python.h under $pyinc" >&2; exit 1; }
  [ -d "$pbinc/pybind11" ] && [ -n "$dl" ] || { echo "error: pybind11 (under $pbinc) or dlpack.h (under $tinc) not found" >&2; exit 1; }
  mkdir -p "$PACK/dlpack/dlpack" && cp "$dl" "$PACK/dlpack/dlpack/dlpack.h"
  extra=$(ldd "$PACK/bin/onnx2fb" | awk '/onnx_proto|protobuf/ {print $3}' | tr '\n' ' ')
  rm -f "$PACK"/python/infer/_infer*.so
  g++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -DINFER_WITH_CUDA=1 \
    -Iengine/include -Iengine/src -I. -Iapps/common -Iapps/onnx2fb -Imodels -I"$pyinc" -I"$pbinc" -I"$PACK/dlpack" \
    python/src/module.cc python/src/arrays.cc python/src/dlpack.cc \
    "$PACK/static/libinfer_onnx.a" "$PACK/static/libinfer_zoo.a" "$PACK/static/libinfer_appcommon.a" \
    "$PACK/lib/libinfer.so.0" $extra -o "$PACK/python/infer/_infer$suffix" 2>&1 | tee "$PACK/logs/compile.log" | tail -20
  [ -f "$PACK/python/infer/_infer$suffix" ] || { echo "error: compiling the extension failed ($PACK/logs/compile.log)" >&2; exit 1; }
fi
cp python/infer/*.py python/infer/*.pyi "$PACK/python/infer/"   # the sources' pure-Python layer
ldd "$PACK"/python/infer/_infer*.so | grep "not found" && { echo "error: libraries missing (above)" >&2; exit 1; }
$PY -c "import infer; print('infer', infer.__version__, 'cuda_available', infer.cuda_available())"

status=0
if $PY -c "import pytest" 2>/dev/null; then
  echo "== pytest tests/python (CUDA cases included)"
  (cd tests/python && $PY -m pytest -q -p no:cacheprovider -rs .) 2>&1 | tee "$PACK/logs/pytest.log" | tail -25
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "== no pytest here: the CUDA cases of tests/python/test_torch.py alone"
  (cd tests/python && $PY - <<'PYEOF'
# A minimal stand-in for pytest: just enough (raises, skip, importorskip, mark.skipif, fixture) for
# the CUDA tests of test_torch.py, called with the fixtures they use.
import contextlib, pathlib, re, sys, tempfile, traceback, types
class Skip(Exception): pass
def raises(exc, match=None):
    @contextlib.contextmanager
    def cm():
        try:
            yield
        except exc as e:
            if match and not re.search(match, str(e)): raise AssertionError(f"{e!r} does not match {match!r}")
            return
        raise AssertionError(f"did not raise {exc}")
    return cm()
def skip(msg): raise Skip(msg)
def importorskip(name): return __import__(name)
mark = types.SimpleNamespace(skipif=lambda cond, reason="": (lambda f: f), parametrize=lambda *a, **k: (lambda f: f))
sys.modules["pytest"] = types.SimpleNamespace(raises=raises, skip=skip, importorskip=importorskip, mark=mark,
                                              fixture=lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda f: f)))
import infer, conftest, test_torch
failed = 0
for name in [n for n in dir(test_torch) if n.startswith("test_cuda")]:
    fn = getattr(test_torch, name)
    args = []
    for p in fn.__code__.co_varnames[:fn.__code__.co_argcount]:
        if p == "lenet": args.append(infer.load(conftest.LENET))
        elif p == "two_inputs": args.append(test_torch.two_inputs(pathlib.Path(tempfile.mkdtemp())))
    try:
        fn(*args); print("PASS", name)
    except Skip as e: print("SKIP", name, e)
    except Exception: failed += 1; print("FAIL", name); traceback.print_exc()
sys.exit(1 if failed else 0)
PYEOF
  ) 2>&1 | tee "$PACK/logs/cuda-cases.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

echo "== examples on the GPU"
$PY examples/python/generate.py --out "$PACK/logs/gpu.png" --seed 1 || status=1
"$PACK/bin/infer" --model models/ebgan_fashion.fb --out "$PACK/logs/cli.png" --batch 64 --seed 1 >/dev/null || status=1
cmp -s "$PACK/logs/gpu.png" "$PACK/logs/cli.png" && echo "generate.py: same PNG bytes as infer --out (backend auto)" \
  || { echo "generate.py: PNG differs from infer --out (both backend auto; $PACK/logs/*.png)"; status=1; }
$PY examples/python/classify.py || status=1
$PY examples/python/torch_interop.py || status=1

echo "== overhead (docs/benchmarks.md, 'Python binding overhead')"
for b in cuda cpu; do
  $PY bench/python_overhead.py --backend $b 2>&1 | tee "$PACK/logs/overhead-$b.md"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
echo "gpu-check-python: $([ $status -eq 0 ] && echo passed || echo FAILED); logs in $PACK/logs/"
exit $status
