# Top-level shortcuts around CMake + ctest. `make build` only builds (dependencies must be present);
# test, test-asan and demo install missing Debian packages first (scripts/install-deps.sh, idempotent).
# Builds use -j2 and Ninja; build/ is Release (with the CUDA backend when a toolkit is found),
# build-asan/ is ASan + UBSan (RelWithDebInfo, compiled at -O1 -g1: CMakeLists.txt says why) of the host
# code without CUDA: ASan cannot see device memory, and the CUDA code is checked with compute-sanitizer
# on a GPU machine instead. build-tsan/ (ThreadSanitizer, test-tsan) and build-fuzz/ (clang +
# libFuzzer, fuzz) build only their targets.

JOBS ?= 2
BUILD_DIR := build
ASAN_DIR := build-asan
TSAN_DIR := build-tsan

.PHONY: build test test-asan test-tsan fuzz sanitize-cuda demo deps clean bit-identical-data serve query

deps:
	scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD_DIR) -j$(JOBS)

# Steps run in order even under `make -j`: each recipe line waits for the previous one.
test:
	scripts/install-deps.sh
	$(MAKE) --no-print-directory build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS)

test-asan:
	scripts/install-deps.sh
	cmake -S . -B $(ASAN_DIR) -G Ninja -DINFER_SANITIZE=ON -DINFER_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(ASAN_DIR) -j$(JOBS)
	ctest --test-dir $(ASAN_DIR) --output-on-failure -j$(JOBS)

# test-tsan: the concurrency tests (8 threads, a Session each over one shared Model) under
# ThreadSanitizer, host code only. Only their targets are built. OMP_NUM_THREADS=1 keeps libgomp's and
# OpenBLAS's own (uninstrumented) worker threads out of the picture: TSan cannot see their
# synchronisation and would report false races; the engine's threads are what is tested here.
test-tsan:
	scripts/install-deps.sh
	cmake -S . -B $(TSAN_DIR) -G Ninja -DINFER_TSAN=ON -DINFER_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(TSAN_DIR) -j$(JOBS) --target test_concurrency
	OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --test-dir $(TSAN_DIR) --output-on-failure -R '^test_concurrency$$'

# fuzz: every libFuzzer target (fuzz/: model, onnx, npy, image, idx) for FUZZ_SECONDS each (default 60)
# from its committed seeds; fails on any finding (scripts/fuzz.sh; clang build in build-fuzz/).
FUZZ_SECONDS ?= 60
fuzz:
	scripts/install-deps.sh
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) scripts/fuzz.sh

# sanitize-cuda: compute-sanitizer memcheck + racecheck over build/'s CUDA kernel tests (needs a GPU
# and a CUDA build, e.g. after `make test` on a GPU machine); logs in build/sanitize-cuda/.
sanitize-cuda:
	scripts/sanitize-cuda.sh $(BUILD_DIR)

# bit-identical-data: regenerates tests/data/bit_identical/ (what tests/test_bit_identical.cc compares
# against) from this checkout's code: builds, runs the golden and byom fixtures (torch), then the test in
# write mode with the thread count and OpenBLAS kernels ctest pins. Run it on a CPU with AVX-512 so that every ISA level is
# saved, and commit the data with the change that altered results. BUILD_DIR=build-cpu for a CPU build.
bit-identical-data:
	$(MAKE) --no-print-directory build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -R '^(golden_data|byom_data)$$'
	INFER_BIT_IDENTICAL_WRITE=1 OMP_NUM_THREADS=2 OPENBLAS_CORETYPE=Haswell OMP_WAIT_POLICY=passive $(BUILD_DIR)/tests/test_bit_identical

# demo: an 8x8 grid of garments from the shipped EB-GAN generator (models/README.md) in img.png.
demo:
	scripts/install-deps.sh
	$(MAKE) --no-print-directory build
	./$(BUILD_DIR)/infer --model models/ebgan_fashion.fb --out img.png --batch 64 --seed 1

# serve: Triton Inference Server (PyPI's nvidia-pytriton in .venv-triton) on a repository of the shipped
# models in $(BUILD_DIR)/triton-repo, HTTP :8000, gRPC :8001, metrics :8002 (docs/serving.md).
# query (another shell): EB-GAN latents in, img.png out; the sample ankle boot's top-5 from LeNet-5.
TRITON_PY := PYTHONPATH=$(BUILD_DIR)/python .venv-triton/bin/python
serve:
	scripts/install-deps.sh
	scripts/install-triton.sh
	$(MAKE) --no-print-directory build
	$(TRITON_PY) -m infer.triton repo models/ebgan_fashion.fb models/lenet5_fashion.fb --out $(BUILD_DIR)/triton-repo
	$(TRITON_PY) -m infer.triton serve $(BUILD_DIR)/triton-repo

query:
	$(TRITON_PY) -m infer.triton query ebgan_fashion --fb models/ebgan_fashion.fb --batch 64 --out img.png
	$(TRITON_PY) -m infer.triton query lenet5_fashion --fb models/lenet5_fashion.fb \
	  --input models/samples/fashion_mnist_test_0000_ankle_boot.png

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) build-fuzz img.png
