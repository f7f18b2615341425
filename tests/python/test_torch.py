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


@cuda
def test_cuda_session_takes_cuda_tensors(lenet):
    if not torch.cuda.is_available():
        pytest.skip("CUDA tests skipped: torch has no CUDA")
    s = infer.Session(lenet, backend="cuda", batch=2)
    x = torch.randn(2, 1, 28, 28, device="cuda")
    want = infer.Session(lenet, backend="cpu", batch=2).run(x.cpu())[0]
    host = s.run(x)[0]
    assert isinstance(host, np.ndarray)
    np.testing.assert_allclose(host, want, rtol=1e-4, atol=1e-5)
    (dev,) = s.run(x, device_outputs=True)
    y = torch.from_dlpack(dev)
    assert y.is_cuda and y.shape == (2, 10)
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-4, atol=1e-5)
    # No copy on the way out: the tensor aliases the array the session returned.
    assert y.data_ptr() == torch.from_dlpack(dev).data_ptr()
