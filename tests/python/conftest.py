# Shared fixtures of the Python package's tests (run by ctest through pytest with Debian's python3;
# tests/CMakeLists.txt sets PYTHONPATH to the build's python/ folder and the INFER_* variables below).
# CUDA cases skip, saying so, when infer.cuda_available() is false (no CUDA build or no GPU).
import os
import pathlib
import subprocess

import numpy as np
import pytest

import infer

SOURCE = pathlib.Path(os.environ.get("INFER_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BINARY = pathlib.Path(os.environ.get("INFER_BINARY_DIR", SOURCE / "build"))
LENET = SOURCE / "models" / "lenet5_fashion.fb"
EBGAN = SOURCE / "models" / "ebgan_fashion.fb"
SAMPLE = SOURCE / "models" / "samples" / "fashion_mnist_test_0000_ankle_boot.png"

cuda = pytest.mark.skipif(not infer.cuda_available(),
                          reason="CUDA tests skipped: no CUDA device (or a CPU-only build)")


def tool(name):
    """Path of a built app (infer, model-zoo, onnx2fb)."""
    return str(BINARY / name)


def run_tool(*args, cwd=None):
    """Runs a built app; returns its stdout; fails the test with its stderr on a non-zero exit."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd)
    assert p.returncode == 0, f"{args} exited {p.returncode}: {p.stderr}"
    return p.stdout


@pytest.fixture(scope="session")
def lenet():
    return infer.load(LENET)


@pytest.fixture(scope="session")
def ebgan():
    return infer.load(EBGAN)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
