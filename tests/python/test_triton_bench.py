# The Triton GPU measurement's pieces that run without Triton or a GPU (issue 29 must 4): the summary of
# bench/triton_load.py (best throughput, scaling over one GPU, per-GPU efficiency, the two runtimes'
# output agreement) from synthetic rows, and bench/triton_models.py's repositories for infer and PyTorch
# (same config.pbtxt, the PyTorch backend with its parameters and weights).
import json
import pathlib
import subprocess
import sys

import numpy as np

from conftest import LENET

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


def row(runtime, gpus, concurrency, images_per_s, failed=0):
    return {"concurrency": concurrency, "batch": 4, "requests_per_s": images_per_s / 4, "images_per_s": images_per_s,
            "failed": failed, "requests": 100, "p50_ms": 10.0 * concurrency, "p90_ms": 11.0 * concurrency,
            "p99_ms": 12.0 * concurrency, "model": "m", "tag": "", "runtime": runtime, "gpus": str(gpus)}


def test_summary(tmp_path):
    rows = {"infer": {1: [(1, 100.0), (4, 300.0)], 2: [(1, 110.0), (4, 600.0), (16, 900.0, 3)]},
            "torch": {1: [(1, 50.0), (4, 200.0)], 2: [(4, 300.0)]}}
    for runtime, by_gpus in rows.items():
        for gpus, levels in by_gpus.items():
            with open(tmp_path / f"rows-{runtime}-{gpus}gpu-m.json", "w") as f:
                json.dump([row(runtime, gpus, *lv) for lv in levels], f)
    y = np.linspace(-1, 1, 12, dtype=np.float32)
    np.save(tmp_path / "output-torch-1gpu-m.npy", y)
    np.save(tmp_path / "output-infer-1gpu-m.npy", y + np.float32(0.01))
    p = subprocess.run([sys.executable, str(BENCH / "triton_load.py"), "--summarize", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    summary = {(s["runtime"], s["gpus"]): s for s in json.load(open(tmp_path / "triton-gpu.json"))["summary"]}
    # A level with failed requests is not a best: infer on 2 GPUs peaks at 600, not 900.
    assert summary[("infer", 2)]["best_images_per_s"] == 600.0 and summary[("infer", 2)]["failed"] == 3
    assert summary[("infer", 2)]["scaling_over_1gpu"] == 2.0 and summary[("infer", 2)]["per_gpu_efficiency"] == 1.0
    assert summary[("torch", 2)]["scaling_over_1gpu"] == 1.5 and summary[("torch", 2)]["per_gpu_efficiency"] == 0.75
    assert summary[("infer", 1)]["best_at_concurrency"] == 4 and summary[("infer", 1)]["p99_ms_at_best"] == 48.0
    assert abs(summary[("infer", 1)]["infer_vs_torch_rel_diff"] - 0.01) < 1e-6
    assert summary[("infer", 2)]["infer_vs_torch_rel_diff"] is None  # no outputs saved at 2 GPUs
    md = (tmp_path / "triton-gpu.md").read_text()
    assert "| m | infer | 2 | 600.0 | 4 |" in md and "| m | torch | 2 | 300.0 | 4 |" in md


def test_summary_without_rows_is_one_error(tmp_path):
    p = subprocess.run([sys.executable, str(BENCH / "triton_load.py"), "--summarize", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.startswith("error: no rows-*.json")


def test_repositories(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / "lenet.fb").write_bytes(pathlib.Path(LENET).read_bytes())
    (models / "lenet.pt").write_bytes(b"weights")

    def repo(runtime, *extra):
        return subprocess.run([sys.executable, str(BENCH / "triton_models.py"), "repo", str(models), "--runtime",
                               runtime, "--out", str(tmp_path / runtime), "--kind", "cpu", "--precision", "fp32",
                               "--max-batch", "8", *extra], capture_output=True, text=True)

    for runtime in ("infer", "torch"):
        p = repo(runtime)
        assert p.returncode == 0, p.stderr
    infer_cfg = (tmp_path / "infer" / "lenet" / "config.pbtxt").read_text()
    torch_cfg = (tmp_path / "torch" / "lenet" / "config.pbtxt").read_text()
    # The same config up to the PyTorch backend's own parameters.
    assert torch_cfg.startswith(infer_cfg[:infer_cfg.index("parameters [")])
    for key, value in (("arch", "lenet"), ("torch_mode", "graph"), ("bench_dir", str(BENCH))):
        assert f'key: "{key}"\n    value: {{ string_value: "{value}" }}' in torch_cfg
    assert "torch_mode" not in infer_cfg
    assert (tmp_path / "torch" / "lenet" / "1" / "model.py").read_text() == \
        (BENCH / "triton_torch_model.py").read_text()
    assert (tmp_path / "torch" / "lenet" / "1" / "model.pt").read_bytes() == b"weights"
    assert "infer.Session" in (tmp_path / "infer" / "lenet" / "1" / "model.py").read_text()
    (models / "lenet.pt").unlink()
    p = repo("torch")
    assert p.returncode == 1 and p.stderr.startswith("error: ") and "lenet.pt is missing" in p.stderr
    p = repo("torch", "--torch-mode", "fast")
    assert p.returncode == 1 and "--torch-mode must be one of" in p.stderr
