#!/usr/bin/env python3
# PyTorch and infer side by side on the same tensors: a small DCGAN-style generator (transposed
# convolutions + BatchNorm + ReLU, tanh) is exported to ONNX, converted with infer.onnx.convert, and
# both run on one batch of latents; the torch tensor goes to infer as is (DLPack, no copy on the way
# in for CUDA) and infer's output comes back as a torch tensor (torch.from_numpy / from_dlpack, no
# copy). Prints the relative difference; exits non-zero above 1e-5 (fp32; PyTorch's cuDNN convolutions
# default to TF32, so TF32 is turned off on its side: with it on, an H100 showed 1.8e-5, without 9.5e-8).
import pathlib
import tempfile

import torch
import torch.nn as nn

import infer

torch.manual_seed(0)
net = nn.Sequential(
    nn.ConvTranspose2d(16, 32, 4, 1, 0), nn.BatchNorm2d(32), nn.ReLU(),
    nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.ConvTranspose2d(16, 3, 4, 2, 1), nn.Tanh()).eval()
for m in net.modules():  # non-trivial running statistics, so BatchNorm folding is exercised
    if isinstance(m, nn.BatchNorm2d):
        m.running_mean.uniform_(-0.5, 0.5)
        m.running_var.uniform_(0.5, 2.0)

batch = 8
z = torch.randn(batch, 16, 1, 1)
with tempfile.TemporaryDirectory() as tmp:
    onnx_path = pathlib.Path(tmp) / "generator.onnx"
    torch.onnx.export(net, z, onnx_path, input_names=["z"], output_names=["image"], opset_version=13,
                      dynamic_axes={"z": {0: "batch"}, "image": {0: "batch"}})
    model = infer.onnx.convert(onnx_path, metadata={"task": "generator"})

session = infer.Session(model, batch=batch)
device = "cuda" if session.backend == "cuda" and torch.cuda.is_available() else "cpu"
torch.backends.cudnn.allow_tf32 = False  # strict fp32 on PyTorch's side too (its cuDNN default is TF32)
net, z = net.to(device), z.to(device)
with torch.no_grad():
    want = net(z)
if device == "cuda":
    (out,) = session.run(z, device_outputs=True)   # GPU in, GPU out: no host round trip
    got = torch.from_dlpack(out)
else:
    got = torch.from_numpy(session(z))             # shares the NumPy array's memory
err = ((got - want).norm() / want.norm()).item()
print(f"infer ({session.backend}) vs PyTorch {torch.__version__} ({device}) on {tuple(want.shape)}: "
      f"relative difference {err:.2e}, max abs {(got - want).abs().max().item():.2e}")
if err > 1e-5:
    raise SystemExit("error: relative difference above 1e-5")
