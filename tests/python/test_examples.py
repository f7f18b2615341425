# examples/python/*.py run as a user runs them (a subprocess with this interpreter), checked against
# the CLI: generate.py writes the same PNG bytes as `infer --out` for the same seed; classify.py finds
# the ankle boot; torch_interop.py agrees with PyTorch (it asserts that itself).
import os
import subprocess
import sys

import pytest

import infer
from conftest import EBGAN, SOURCE, run_tool, tool

EXAMPLES = SOURCE / "examples" / "python"
# The examples import the same infer package as these tests.
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [os.path.dirname(os.path.dirname(infer.__file__))] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))


def example(name, *args, cwd):
    p = subprocess.run([sys.executable, str(EXAMPLES / name), *map(str, args)], capture_output=True,
                       text=True, cwd=cwd, env=ENV)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("batch, seed", [(64, 1), (5, 42)])
def test_generate_same_pixels_as_cli(tmp_path, batch, seed):
    out = example("generate.py", "--out", tmp_path / "py.png", "--batch", batch, "--seed", seed,
                  "--backend", "cpu", cwd=tmp_path)
    assert f"{batch} image(s) 1x64x64" in out
    run_tool(tool("infer"), "--model", EBGAN, "--backend", "cpu", "--out", tmp_path / "cli.png",
             "--batch", batch, "--seed", seed)
    assert (tmp_path / "py.png").read_bytes() == (tmp_path / "cli.png").read_bytes()


def test_generate_bad_model_is_one_line(tmp_path):
    p = subprocess.run([sys.executable, str(EXAMPLES / "generate.py"), "--model", "missing.fb"],
                       capture_output=True, text=True, cwd=tmp_path, env=ENV)
    assert p.returncode == 1 and p.stderr.startswith("error: ") and p.stderr.count("\n") == 1


def test_classify(tmp_path):
    lines = example("classify.py", cwd=tmp_path).splitlines()
    assert len(lines) == 5
    assert lines[0].startswith("1. Ankle boot (9)")
    assert float(lines[0].split()[-1]) > 0.99


def test_torch_interop(tmp_path):
    pytest.importorskip("torch")
    out = example("torch_interop.py", cwd=tmp_path)
    assert "relative difference" in out
