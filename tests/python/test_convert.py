# infer.onnx.convert and infer.zoo.build: the same bytes as the onnx2fb and model-zoo tools (they share
# the importer and the zoo builder), outputs against PyTorch, and their error paths.
import numpy as np
import pytest

import infer
from conftest import run_tool, tool

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                              torch.nn.ReLU(), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
                              torch.nn.Linear(8 * 4 * 4, 5)).eval()
    path = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    torch.onnx.export(net, torch.zeros(1, 3, 8, 8), path, input_names=["x"], output_names=["y"],
                      opset_version=13, dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
    return net, path


def test_convert_same_as_onnx2fb(tiny_onnx, tmp_path):
    net, path = tiny_onnx
    run_tool(tool("onnx2fb"), path, tmp_path / "cli.fb", "--metadata", "task=classifier")
    m = infer.onnx.convert(path, tmp_path / "py.fb", metadata={"task": "classifier"})
    assert (tmp_path / "py.fb").read_bytes() == (tmp_path / "cli.fb").read_bytes()
    assert m.metadata["task"] == "classifier" and m.task == "classifier"
    x = torch.randn(3, 3, 8, 8)
    with torch.no_grad():
        want = net(x).numpy()
    got = infer.Session(m, backend="cpu", batch=3).run(x)[0]
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5


def test_a_fixed_batch_export_runs_at_any_batch(tmp_path):
    # Exported at a fixed batch of 2 (no dynamic axes): a session made without a batch takes inputs of
    # batch 2, 5 or 1, each planned once when it first comes.
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(128, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    torch.onnx.export(net, torch.zeros(2, 128), tmp_path / "b2.onnx", input_names=["x"], opset_version=13)
    s = infer.Session(infer.onnx.convert(tmp_path / "b2.onnx"), backend="cpu")
    for batch in (2, 5, 1):
        x = torch.randn(batch, 128)
        with torch.no_grad():
            want = net(x).numpy()
        got = s.run(x)[0]
        assert got.shape == (batch, 4)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class ViewAtBatch(torch.nn.Module):
    """x.view(x.size(0), -1) traced at batch 4 with 4 channels: the importer cannot tell the batch."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3)

    def forward(self, x):
        return self.conv(x).view(x.size(0), -1)


def test_a_fixed_batch_export_that_cannot_change_says_why(tmp_path):
    torch.onnx.export(ViewAtBatch().eval(), torch.zeros(4, 2, 6, 6), tmp_path / "pinned.onnx",
                      input_names=["x"], opset_version=13)
    m = infer.onnx.convert(tmp_path / "pinned.onnx")
    assert "batch.fixed" in m.metadata
    s = infer.Session(m, backend="cpu")
    assert s.batch == 4 and s.run(np.zeros((4, 2, 6, 6), np.float32))[0].shape == (4, 64)
    with pytest.raises(infer.Error, match=r"run: inputs at batch 2 \(the session's is 4\): .*batch 2 cannot "
                                          r"apply: .*batch.fixed: node"):
        s.run(np.zeros((2, 2, 6, 6), np.float32))


def test_convert_options(tiny_onnx, tmp_path):
    _, path = tiny_onnx
    m16 = infer.onnx.convert(path, fp16=True, name="small")
    assert m16.name == "small"
    assert m16.weight_bytes < infer.onnx.convert(path).weight_bytes
    assert "Conv" in infer.onnx.supported_ops()


def test_convert_errors(tiny_onnx, tmp_path):
    with pytest.raises(infer.Error, match="missing.onnx"):
        infer.onnx.convert(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07junk" * 50)
    with pytest.raises(infer.Error):
        infer.onnx.convert(tmp_path / "junk.onnx")
    _, path = tiny_onnx
    with pytest.raises(infer.Error):
        infer.onnx.convert(path, tmp_path / "no" / "such" / "dir" / "m.fb")
    bad = infer.onnx.convert(path, metadata={"output.range": "up,down"})
    with pytest.raises(infer.Error, match="output.range"):
        bad.output_range


def test_unsupported_op_is_one_error(tmp_path):
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.GELU()).eval()
    torch.onnx.export(net, torch.zeros(1, 1, 5, 5), tmp_path / "gelu.onnx", opset_version=13)
    with pytest.raises(infer.Error, match="unsupported"):
        infer.onnx.convert(tmp_path / "gelu.onnx")


@pytest.mark.parametrize("name, seed", [("dcgan", 0), ("lenet5", 7)])
def test_zoo_same_as_model_zoo(name, seed, tmp_path):
    run_tool(tool("model-zoo"), name, "-o", tmp_path / "cli.fb", "--seed", seed)
    m = infer.zoo.build(name, seed=seed, path=tmp_path / "py.fb")
    assert (tmp_path / "py.fb").read_bytes() == (tmp_path / "cli.fb").read_bytes()
    assert m.name == name
    assert infer.zoo.names() == ["lenet5", "alexnet", "vgg11", "vgg16", "dcgan", "ebgan"]


def test_zoo_options_and_errors():
    small = infer.zoo.build("vgg11", image_size=32)
    assert small.inputs[0].shape == (-1, 3, 32, 32)
    assert infer.zoo.build("dcgan", fp16=True).weight_bytes < infer.zoo.build("dcgan").weight_bytes
    with pytest.raises(infer.Error, match="resnet"):
        infer.zoo.build("resnet")
    with pytest.raises(infer.Error):
        infer.zoo.build("vgg11", image_size=4)
    with pytest.raises(infer.Error, match="seed"):
        infer.zoo.build("dcgan", seed=-1)
