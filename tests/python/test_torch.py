# PyTorch interop: CPU tensors in through DLPack (dtypes, strides, no autograd), outputs back into
# torch without a copy; CUDA tensors on a GPU machine (skipped, saying so, where there is none).
import numpy as np
import pytest

import infer
from conftest import cuda

torch = pytest.importorskip("torch")


@pytest.fixture
def session(lenet):
    return infer.Session(lenet, backend="cpu", batch=2)


def test_cpu_tensor_in(session):
    x = torch.randn(2, 1, 28, 28)
    want = session.run(x.numpy())[0]
    np.testing.assert_array_equal(session.run(x)[0], want)
    np.testing.assert_array_equal(session.run({"image": x})[0], want)
    np.testing.assert_array_equal(session.run(x.double())[0], session.run(x.double().numpy())[0])


def test_strided_tensors(session):
    base = torch.randn(2, 1, 28, 56)
    for x in [base[..., ::2], base[..., :28].transpose(2, 3), base.flip(3)[..., :28],
              base.permute(0, 3, 2, 1).contiguous().permute(0, 3, 2, 1)[..., :28]]:
        assert x.shape == (2, 1, 28, 28)
        np.testing.assert_array_equal(session.run(x)[0], session.run(x.contiguous().numpy())[0])


def test_requires_grad_is_a_clear_error(session):
    x = torch.randn(2, 1, 28, 28, requires_grad=True)
    with pytest.raises(infer.Error, match="image"):
        session.run(x)
    session.run(x.detach())


def test_outputs_into_torch_without_copy(session):
    out = session.run(torch.randn(2, 1, 28, 28))[0]
    t = torch.from_numpy(out)
    assert t.data_ptr() == out.ctypes.data
    d = torch.from_dlpack(out)
    assert d.data_ptr() == out.ctypes.data and d.shape == (2, 10)


def cuda_torch():
    if not torch.cuda.is_available():
        pytest.skip("CUDA tests skipped: this PyTorch has no CUDA device")


def test_cpu_session_refuses_cuda_and_device_outputs(session):
    with pytest.raises(infer.Error, match="device_outputs=True needs the inputs on the GPU"):
        session.run(torch.randn(2, 1, 28, 28), device_outputs=True)
    if torch.cuda.is_available():
        with pytest.raises(infer.Error, match="cuda session"):
            session.run(torch.randn(2, 1, 28, 28, device="cuda"))


@cuda
def test_cuda_session_takes_cuda_tensors(lenet):
    cuda_torch()
    s = infer.Session(lenet, backend="cuda", batch=2)
    x = torch.randn(2, 1, 28, 28, device="cuda")
    want = infer.Session(lenet, backend="cpu", batch=2).run(x.cpu())[0]
    host = s.run(x)[0]
    assert isinstance(host, np.ndarray)
    np.testing.assert_allclose(host, want, rtol=1e-4, atol=1e-5)
    (dev,) = s.run(x, device_outputs=True)
    assert dev.shape == (2, 10) and dev.dtype == "float32" and dev.device == x.device.index
    y = torch.from_dlpack(dev)
    assert y.is_cuda and y.shape == (2, 10)
    assert y.data_ptr() == dev.data_ptr  # no copy on the way out
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(s.run({"image": x}, device_outputs=True)[0].__dlpack_device__(),
                                  dev.__dlpack_device__())


@cuda
def test_cuda_no_host_round_trip(lenet):
    # The CUDA profiler sees every copy of the process: the host path has HtoD and DtoH copies, the
    # device path must have neither.
    cuda_torch()
    from torch.profiler import ProfilerActivity, profile
    s = infer.Session(lenet, backend="cuda", batch=2)
    x = torch.randn(2, 1, 28, 28, device="cuda")
    xh = x.cpu().numpy()
    s.run(x, device_outputs=True)
    torch.cuda.synchronize()

    def copies(call):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        names = [e.name for e in prof.events()]
        return [n for n in names if "HtoD" in n or "DtoH" in n], names

    host_copies, _ = copies(lambda: s.run(xh))
    if not host_copies:
        pytest.skip("the CUDA profiler does not see this process's copies here; no conclusion")
    device_copies, names = copies(lambda: s.run(x, device_outputs=True))
    assert device_copies == [], device_copies
    assert any("DtoD" in n for n in names)


@cuda
def test_cuda_device_input_errors(lenet):
    cuda_torch()
    s = infer.Session(lenet, backend="cuda", batch=2)
    x = torch.randn(2, 1, 28, 28, device="cuda")
    with pytest.raises(infer.Error, match="float32"):
        s.run(x.half())
    with pytest.raises(infer.Error, match="non-contiguous"):
        s.run(torch.randn(2, 1, 28, 56, device="cuda")[..., ::2])
    with pytest.raises(infer.Error, match="expected shape"):
        s.run(torch.randn(1, 1, 28, 28, device="cuda"))
    if torch.cuda.device_count() > 1:
        with pytest.raises(infer.Error, match="not memory of this session's GPU"):
            s.run(x.to("cuda:1"))


class AddTwo(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)


@pytest.fixture
def two_inputs(tmp_path):
    torch.onnx.export(AddTwo(), (torch.zeros(1, 2, 3, 3), torch.zeros(1, 2, 3, 3)), tmp_path / "add.onnx",
                      input_names=["a", "b"], output_names=["y"], opset_version=13)
    return infer.onnx.convert(tmp_path / "add.onnx")


def test_two_inputs_forms(two_inputs):
    s = infer.Session(two_inputs, backend="cpu")
    a, b = torch.randn(1, 2, 3, 3), torch.randn(1, 2, 3, 3)
    want = torch.relu(a + b).numpy()
    np.testing.assert_array_equal(s.run(a, b)[0], want)
    np.testing.assert_array_equal(s.run({"b": b, "a": a})[0], want)
    np.testing.assert_array_equal(s.run((a.numpy(), b))[0], want)


@cuda
def test_cuda_mixed_inputs_refused(two_inputs):
    cuda_torch()
    s = infer.Session(two_inputs, backend="cuda")
    a, b = torch.randn(1, 2, 3, 3), torch.randn(1, 2, 3, 3, device="cuda")
    with pytest.raises(infer.Error, match="all on the host or all on the GPU"):
        s.run(a, b)
    np.testing.assert_allclose(s.run(a.cuda(), b)[0], torch.relu(a + b.cpu()).numpy(), rtol=1e-6)


@cuda
def test_cuda_fp16_and_lifetime(lenet):
    cuda_torch()
    x = torch.randn(2, 1, 28, 28, device="cuda")
    want = infer.Session(lenet, backend="cpu", batch=2).run(x.cpu())[0]
    s = infer.Session(lenet, backend="cuda", precision="fp16", batch=2)
    (dev,) = s.run(x, device_outputs=True)
    del s  # the output owns its memory
    got = torch.from_dlpack(dev).cpu().numpy()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-2
