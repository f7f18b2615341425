# Top-level shortcuts around CMake + ctest. `make build` only builds (dependencies must be present);
# test, test-asan and demo install missing Debian packages first (scripts/install-deps.sh, idempotent).
# Builds use -j2 and Ninja; build/ is Release (with the CUDA backend when a toolkit is found),
# build-asan/ is ASan + UBSan (RelWithDebInfo) of the host code without CUDA: ASan cannot see device
# memory, and the CUDA code is checked with compute-sanitizer on a GPU machine instead.

JOBS ?= 2
BUILD_DIR := build
ASAN_DIR := build-asan

.PHONY: build test test-asan sanitize-cuda demo deps clean

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

# sanitize-cuda: compute-sanitizer memcheck + racecheck over build/'s CUDA kernel tests (needs a GPU
# and a CUDA build, e.g. after `make test` on a GPU machine); logs in build/sanitize-cuda/.
sanitize-cuda:
	scripts/sanitize-cuda.sh $(BUILD_DIR)

# demo: an 8x8 grid of garments from the shipped EB-GAN generator (models/README.md) in img.png.
demo:
	scripts/install-deps.sh
	$(MAKE) --no-print-directory build
	./$(BUILD_DIR)/infer --model models/ebgan_fashion.fb --out img.png --batch 64 --seed 1

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) img.png
