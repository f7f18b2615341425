# session.profile(): the per-node rows as dicts, the same nodes, kernels, FLOPs, bytes and memory plan
# as the CLI's --profile-json for the same model and options (times differ run to run), to_json(),
# trace(path) and table().
import json

import numpy as np
import pytest

import infer
from conftest import EBGAN, LENET, run_tool, tool

STATIC_KEYS = ["name", "op", "variant", "fused", "activation", "output_shape", "flops", "bytes",
               "live_bytes", "workspace_bytes"]


@pytest.mark.parametrize("path", [LENET, EBGAN])
def test_profile_matches_cli(path, tmp_path):
    run_tool(tool("infer"), "--model", path, "--backend", "cpu", "--batch", 2, "--runs", 3,
             "--profile-json", tmp_path / "cli.json")
    cli = json.loads((tmp_path / "cli.json").read_text())
    p = infer.Session(path, backend="cpu", batch=2).profile(runs=3)
    assert len(p) == len(cli["nodes"]) > 0
    for row, want in zip(p, cli["nodes"]):
        assert {k: row[k] for k in STATIC_KEYS} == {k: want[k] for k in STATIC_KEYS}
        assert row["time_ms"] > 0
    assert p.memory == cli["memory"]
    assert (p.model, p.backend, p.batch, p.runs, p.precision) == (cli["model"], "cpu", 2, 3, "fp32")
    assert p.passes == cli["passes"]
    assert p.total_ms > 0
    assert p.rows == json.loads(p.to_json())["nodes"]
    assert "Run order" in p.table()
    assert p[0] is p.rows[0] and [r["name"] for r in p] == [r["name"] for r in p.rows]


def test_profile_with_inputs_and_trace(lenet, tmp_path):
    s = infer.Session(lenet, backend="cpu")
    p = s.profile({"image": np.zeros((1, 1, 28, 28), np.float32)}, runs=2)
    assert p.runs == 2
    p.trace(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert [e["name"] for e in events if e["ph"] == "X"] == [r["name"] for r in p]
    assert "lenet5" in repr(p)


def test_profile_errors(lenet, tmp_path):
    s = infer.Session(lenet, backend="cpu")
    with pytest.raises(infer.Error, match="runs"):
        s.profile(runs=0)
    with pytest.raises(infer.Error, match="expected shape"):
        s.profile(np.zeros(3, np.float32))
    p = s.profile(runs=1)
    with pytest.raises(infer.Error, match="cannot write"):
        p.trace(tmp_path / "no" / "such" / "dir" / "t.json")
