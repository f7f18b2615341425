# infer.load / infer.Model: metadata, inputs, outputs, nodes, and every way a model can be bad.
import pathlib

import pytest

import infer
from conftest import LENET, EBGAN


def test_load_lenet(lenet):
    assert lenet.name == "lenet5"
    assert lenet.format_version == 1
    assert lenet.task == "classifier"
    assert len(lenet.labels) == 10 and lenet.labels[9] == "Ankle boot"
    assert lenet.metadata["task"] == "classifier"
    (x,) = lenet.inputs
    assert (x.name, x.shape, x.dtype) == ("image", (-1, 1, 28, 28), "float32")
    (y,) = lenet.outputs
    assert y.shape == (-1, 10)
    assert "TensorInfo(name='image'" in repr(x)
    assert lenet.weight_bytes > 200_000
    names = [n["name"] for n in lenet.nodes]
    assert names[0] == "conv1" and lenet.nodes[0]["op"] == "conv2d"
    assert lenet.nodes[0]["inputs"] == ["image", "conv1.weight", "conv1.bias"]
    assert len(names) == 12
    assert "lenet5" in repr(lenet)


def test_load_pathlike_and_generator_metadata(ebgan):
    m = infer.load(pathlib.Path(EBGAN))
    assert m.name == ebgan.name
    assert ebgan.task == "generator"
    assert ebgan.output_range == (-1.0, 1.0)
    assert ebgan.inputs[0].shape == (-1, 100, 1, 1)


def strided_view(data):
    """A non-contiguous memoryview whose logical bytes are `data`."""
    import numpy as np
    twice = np.zeros(2 * len(data), np.uint8)
    twice[::2] = np.frombuffer(data, np.uint8)
    return memoryview(twice[::2])


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, strided_view])
def test_from_bytes(kind):
    data = LENET.read_bytes()
    m = infer.Model.from_bytes(kind(data))
    assert m.name == "lenet5"
    assert [n["name"] for n in m.nodes] == [n["name"] for n in infer.load(LENET).nodes]


def test_model_outlives_its_bytes():
    data = bytearray(LENET.read_bytes())
    m = infer.Model.from_bytes(data)
    data[:] = b"\0" * len(data)  # the model holds its own copy
    assert infer.Session(m).run(infer.Session(m).random_inputs(1))[0].shape == (1, 10)


def test_error_is_value_error():
    assert issubclass(infer.Error, ValueError)


def test_missing_file(tmp_path):
    with pytest.raises(infer.Error, match="nope.fb"):
        infer.load(tmp_path / "nope.fb")


@pytest.mark.parametrize("data", [b"", b"garbage" * 10, LENET.read_bytes()[:1000],
                                  LENET.read_bytes()[:-7]])
def test_bad_bytes(data):
    with pytest.raises(infer.Error):
        infer.Model.from_bytes(data)


def test_corrupted_bytes_never_crash():
    good = bytearray(LENET.read_bytes())
    for pos in range(0, 4096, 37):  # flip bytes in the header and tables: Error or a valid model
        bad = bytearray(good)
        bad[pos] ^= 0xFF
        try:
            infer.Model.from_bytes(bad)
        except infer.Error:
            pass


def test_directory_is_an_error(tmp_path):
    with pytest.raises(infer.Error):
        infer.load(tmp_path)


def test_from_bytes_wrong_type():
    with pytest.raises(TypeError):
        infer.Model.from_bytes("a string is not bytes")
