#!/usr/bin/env python3
"""Train LeNet-5 (the exact architecture of docs/design.md, "The models") on Fashion-MNIST and export it.

Architecture (pooling before activation, so infer can fuse conv+avgpool):
  input 1x28x28, x = (p/255 - 0.5)/0.5
  conv1  1->6  k5 p2 (bias) -> avgpool 2 -> tanh        (6x14x14)
  conv2  6->16 k5 p0 (bias) -> avgpool 2 -> tanh        (16x5x5)
  flatten 400 -> fc1 120 tanh -> fc2 84 tanh -> fc3 10 (logits)

Export folder (--out):
  <state_dict key>.npy   every parameter, float32, PyTorch layout (conv: [Cout,Cin,kh,kw], dense: [out,in])
  manifest.json          architecture, parameter names/shapes, accuracy, seed, epochs, wall time, device
  predictions.bin        10,000 uint8 predicted classes on the test set (test-set order), CPU float32
  inputs.npy             first 8 test images, normalised as the model sees them, float32 [8,1,28,28]
  logits.npy             the model's logits for them, float32 [8,10], computed on the CPU in float32

Example:
  python3 models/train/train_lenet5.py --data .data/fashion-mnist --out .data/trained/lenet5
"""

import argparse
import json
import os
import sys
import time

# Needed by torch.use_deterministic_algorithms for cuBLAS; must be set before CUDA initialises.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5, padding=2, bias=True)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5, padding=0, bias=True)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = torch.tanh(F.avg_pool2d(self.conv1(x), 2))   # 6x14x14
        x = torch.tanh(F.avg_pool2d(self.conv2(x), 2))   # 16x5x5
        x = torch.flatten(x, 1)                          # 400 (C,H,W order)
        x = torch.tanh(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        return self.fc3(x)


def normalise(images_u8):
    """uint8 [N,28,28] -> float32 tensor [N,1,28,28], x = (p/255 - 0.5)/0.5."""
    x = torch.from_numpy(images_u8).float().div_(255.0)
    return ((x - 0.5) / 0.5).unsqueeze(1).contiguous()


def set_determinism(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    # Full float32 everywhere (no TF32): the model is tiny, and accuracy is measured in true fp32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)  # warns (never silently) if an op has no deterministic kernel


@torch.no_grad()
def predict(model, x, batch=2000):
    out = []
    for i in range(0, x.shape[0], batch):
        out.append(model(x[i:i + batch]).argmax(1))
    return torch.cat(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=fashion_mnist.DEFAULT_DIR, help="folder with the IDX .gz files")
    ap.add_argument("--out", required=True, help="export folder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--lr-step", type=int, default=15, help="multiply the LR by --lr-gamma every N epochs")
    ap.add_argument("--lr-gamma", type=float, default=0.3)
    ap.add_argument("--hflip", type=int, default=1, help="1: random horizontal flips (seeded) as augmentation")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--limit-train", type=int, default=0, help="use only the first N training images (testing)")
    args = ap.parse_args()

    t_start = time.time()
    set_determinism(args.seed)
    dev = torch.device(args.device)
    device_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print("torch %s, device %s" % (torch.__version__, device_name), flush=True)

    xtr_u8, ytr_u8 = fashion_mnist.load(args.data, "train")
    xte_u8, yte_u8 = fashion_mnist.load(args.data, "test")
    if args.limit_train:
        xtr_u8, ytr_u8 = xtr_u8[:args.limit_train], ytr_u8[:args.limit_train]
    xtr = normalise(xtr_u8).to(dev)
    ytr = torch.from_numpy(ytr_u8.astype(np.int64)).to(dev)
    xte_cpu = normalise(xte_u8)
    yte_cpu = torch.from_numpy(yte_u8.astype(np.int64))
    xte, yte = xte_cpu.to(dev), yte_cpu.to(dev)
    n = xtr.shape[0]
    print("train %d, test %d" % (n, xte.shape[0]), flush=True)

    model = LeNet5().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=args.lr_step, gamma=args.lr_gamma)
    order_gen = torch.Generator().manual_seed(args.seed)   # seeded data order and flips (CPU)

    t_train = time.time()
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        model.train()
        perm = torch.randperm(n, generator=order_gen).to(dev)
        flips = (torch.rand(n, generator=order_gen) < 0.5).to(dev)
        total, count = torch.zeros((), device=dev), 0
        for i in range(0, n, args.batch):
            idx = perm[i:i + args.batch]
            xb = xtr[idx]
            if args.hflip:
                fb = flips[i:i + args.batch].view(-1, 1, 1, 1)
                xb = torch.where(fb, xb.flip(3), xb)
            loss = F.cross_entropy(model(xb), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach() * idx.numel()
            count += idx.numel()
        sched.step()
        model.eval()
        acc = (predict(model, xte) == yte).float().mean().item()
        print("epoch %3d  lr %.2e  train loss %.4f  test acc %.4f" %
              (epoch, opt.param_groups[0]["lr"], (total / count).item(), acc), flush=True)
    train_s = time.time() - t_train

    # ---- export (everything below on the CPU in float32) ----
    os.makedirs(args.out, exist_ok=True)
    model = model.cpu().float().eval()
    params = []
    for key, t in model.state_dict().items():
        a = t.detach().numpy().astype(np.float32)
        np.save(os.path.join(args.out, key + ".npy"), a)
        params.append({"name": key, "shape": list(a.shape), "dtype": "float32", "file": key + ".npy"})

    with torch.no_grad():
        pred_cpu = predict(model, xte_cpu)
        logits8 = model(xte_cpu[:8]).numpy().astype(np.float32)
    acc_cpu = (pred_cpu == yte_cpu).float().mean().item()
    pred_cpu.numpy().astype(np.uint8).tofile(os.path.join(args.out, "predictions.bin"))
    np.save(os.path.join(args.out, "inputs.npy"), xte_cpu[:8].numpy().astype(np.float32))
    np.save(os.path.join(args.out, "logits.npy"), logits8)

    manifest = {
        "architecture": "lenet5",
        "description": "conv1 1->6 k5 p2; avgpool2; tanh; conv2 6->16 k5; avgpool2; tanh; flatten 400; "
                       "fc1 120 tanh; fc2 84 tanh; fc3 10 (logits)",
        "input": {"shape": [1, 1, 28, 28], "normalisation": "x = (p/255 - 0.5)/0.5"},
        "layers": [
            {"name": "conv1", "op": "conv2d", "in": 1, "out": 6, "kernel": 5, "stride": 1, "padding": 2, "bias": True},
            {"op": "avgpool2d", "kernel": 2, "stride": 2},
            {"op": "tanh"},
            {"name": "conv2", "op": "conv2d", "in": 6, "out": 16, "kernel": 5, "stride": 1, "padding": 0, "bias": True},
            {"op": "avgpool2d", "kernel": 2, "stride": 2},
            {"op": "tanh"},
            {"op": "flatten", "order": "CHW", "size": 400},
            {"name": "fc1", "op": "dense", "in": 400, "out": 120, "bias": True},
            {"op": "tanh"},
            {"name": "fc2", "op": "dense", "in": 120, "out": 84, "bias": True},
            {"op": "tanh"},
            {"name": "fc3", "op": "dense", "in": 84, "out": 10, "bias": True},
        ],
        "layout": "PyTorch: conv weight [Cout,Cin,kh,kw], dense weight [out,in]",
        "parameters": params,
        "num_parameters": int(sum(int(np.prod(p["shape"])) for p in params)),
        "classes": fashion_mnist.CLASSES,
        "test_accuracy": acc_cpu,
        "test_accuracy_device": acc,
        "predictions": "predictions.bin: 10000 uint8 argmax classes, test-set order, CPU float32",
        "test_vectors": {"inputs": "inputs.npy float32 [8,1,28,28] (first 8 test images, normalised)",
                         "logits": "logits.npy float32 [8,10] (CPU float32)",
                         "labels": yte_u8[:8].astype(int).tolist()},
        "seed": args.seed,
        "epochs": args.epochs,
        "batch": args.batch,
        "optimizer": {"name": "Adam", "lr": args.lr, "betas": [0.9, 0.999],
                      "schedule": "StepLR step %d gamma %g" % (args.lr_step, args.lr_gamma)},
        "augmentation": "random horizontal flip p=0.5 (seeded)" if args.hflip else "none",
        "train_images": int(n),
        "wall_time_s": round(time.time() - t_start, 2),
        "train_time_s": round(train_s, 2),
        "device": device_name,
        "torch": torch.__version__,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python3"] + sys.argv),
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print("final test accuracy (CPU fp32) %.4f  (device %.4f)  wall %.1f s  -> %s" %
          (acc_cpu, acc, manifest["wall_time_s"], args.out), flush=True)


if __name__ == "__main__":
    main()
