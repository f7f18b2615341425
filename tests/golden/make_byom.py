#!/usr/bin/python3
"""Golden data for tests/test_byom.cc ("bring your own model", issue 14): real architectures nobody here
wrote, exported from PyTorch to ONNX, with float64 reference outputs.

Run with Debian's interpreter (/usr/bin/python3: python3-torch, python3-torchvision, python3-onnx);
ctest runs it as a fixture: `make_byom.py OUT_DIR`. Must stay fast (CI: 2 cores, no GPU): small inputs,
seeded random weights (eval mode, BatchNorm with non-trivial running statistics), single-threaded torch.
Each model is exported at batch 1 and at a fixed batch of 2 or 3, with opsets 13 and 17 (TorchScript
exporter), the upsampling generators also at opsets 9 and 10 (Upsample; Resize-10; PixelShuffle as
Reshape -> Transpose -> Reshape); OUT_DIR/manifest.json lists every export and the batches the test runs it at. Which models
are expected to import is NOT decided here: tests/test_byom.cc keeps that table.
"""
import inspect
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision

from golden_init import init_weights

torch.set_num_threads(1)
OUT = sys.argv[1] if len(sys.argv) > 1 else "byom"
os.makedirs(OUT, exist_ok=True)
T0 = time.time()
OPSETS = (13, 17)
OLD_OPSETS = OPSETS + (9, 10)  # for the models whose export differs below opset 11
FULL_RUN_OPSETS = (13, 9)  # the exports run at every batch listed (the reference backend is slow)
MAX_BATCH = 5  # the inputs hold this many samples; a run at batch n uses the first n


# ---- GAN generators, written the way people write them ----------------------------------------------

class DCGANExamples(nn.Module):
    """pytorch/examples dcgan/main.py Generator (nz 100, ngf 64, nc 3): 1x1 -> 64x64."""

    def __init__(self, nz=100, ngf=64, nc=3):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)


class LinearGen(nn.Module):
    """Latent projection: Linear(z, C*4*4) then .view(N, C, 4, 4), then stride-2 transposed convs."""

    def __init__(self, z=64, c=128):
        super().__init__()
        self.c = c
        self.fc = nn.Linear(z, c * 4 * 4)
        self.body = nn.Sequential(
            nn.BatchNorm2d(c), nn.ReLU(),
            nn.ConvTranspose2d(c, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.ConvTranspose2d(64, 3, 4, 2, 1), nn.Tanh())

    def forward(self, z):
        return self.body(self.fc(z).view(z.size(0), self.c, 4, 4))


class UpsampleGen(nn.Module):
    """Nearest-neighbour upsample + conv (the checkerboard-free generator): 4x4 -> 32x32."""

    def __init__(self, z=64):
        super().__init__()
        layers = [nn.ConvTranspose2d(z, 128, 4, 1, 0, bias=False), nn.BatchNorm2d(128), nn.ReLU()]
        c = 128
        for co in (64, 32, 16):
            layers += [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(c, co, 3, 1, 1, bias=False),
                       nn.BatchNorm2d(co), nn.ReLU()]
            c = co
        layers += [nn.Conv2d(c, 3, 3, 1, 1), nn.Tanh()]
        self.main = nn.Sequential(*layers)

    def forward(self, z):
        return self.main(z)


class PixelShuffleGen(nn.Module):
    """Sub-pixel convolution generator (ESPCN / SRGAN upsampling): z 1x1 -> 4x4, then two x2 stages of a
    conv to 4x the channels and a pixel shuffle, 4x4 -> 16x16: nn.PixelShuffle (CRD), then one written by
    hand the TensorFlow way (DCR) with the sizes read as Python ints, so a fixed-batch export names the
    batch as a number. Below opset 11 PyTorch writes both as Reshape -> Transpose -> Reshape."""

    def __init__(self, z=32, r=2):
        super().__init__()
        self.r = r
        self.head = nn.Sequential(nn.ConvTranspose2d(z, 32, 4, 1, 0, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.up1 = nn.Sequential(nn.Conv2d(32, 16 * r * r, 3, 1, 1), nn.PixelShuffle(r), nn.ReLU())
        self.conv2 = nn.Conv2d(16, 8 * r * r, 3, 1, 1)
        self.tail = nn.Sequential(nn.ReLU(), nn.Conv2d(8, 3, 3, 1, 1), nn.Tanh())

    def forward(self, z):
        y = self.conv2(self.up1(self.head(z)))
        n, c, h, w = (int(d) for d in y.shape)
        r = self.r
        y = y.view(n, r, r, c // (r * r), h, w).permute(0, 3, 4, 1, 5, 2).reshape(n, c // (r * r), h * r, w * r)
        return self.tail(y)


class UNet(nn.Module):
    """A small pix2pix-style U-Net (3x32x32 -> 3x32x32): stride-2 conv encoder, transposed-conv decoder,
    skip concatenations."""

    def __init__(self, c=16):
        super().__init__()
        self.e1 = nn.Conv2d(3, c, 4, 2, 1)
        self.e2 = nn.Sequential(nn.LeakyReLU(0.2), nn.Conv2d(c, 2 * c, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * c))
        self.e3 = nn.Sequential(nn.LeakyReLU(0.2), nn.Conv2d(2 * c, 4 * c, 4, 2, 1))
        self.d3 = nn.Sequential(nn.ReLU(), nn.ConvTranspose2d(4 * c, 2 * c, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * c))
        self.d2 = nn.Sequential(nn.ReLU(), nn.ConvTranspose2d(4 * c, c, 4, 2, 1, bias=False), nn.BatchNorm2d(c))
        self.d1 = nn.Sequential(nn.ReLU(), nn.ConvTranspose2d(2 * c, 3, 4, 2, 1), nn.Tanh())

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(a)
        y = self.d3(self.e3(b))
        y = self.d2(torch.cat([y, b], 1))
        return self.d1(torch.cat([y, a], 1))


class ResnetBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c), nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c))

    def forward(self, x):
        return x + self.block(x)


class ResnetGen(nn.Module):
    """CycleGAN's ResnetGenerator, small (ngf 8, 2 blocks): reflection padding, instance norm."""

    def __init__(self, ngf=8, blocks=2):
        super().__init__()
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, 7), nn.InstanceNorm2d(ngf), nn.ReLU(True)]
        for m in (1, 2):
            layers += [nn.Conv2d(ngf * m, ngf * m * 2, 3, 2, 1), nn.InstanceNorm2d(ngf * m * 2), nn.ReLU(True)]
        layers += [ResnetBlock(ngf * 4) for _ in range(blocks)]
        for m in (4, 2):
            layers += [nn.ConvTranspose2d(ngf * m, ngf * m // 2, 3, 2, 1, output_padding=1),
                       nn.InstanceNorm2d(ngf * m // 2), nn.ReLU(True)]
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x)


def alexnet():
    """torchvision AlexNet at its own 224x224 (its AdaptiveAvgPool2d(6) exports only where the feature
    map divides by 6); the classifier is narrowed to 64 units so the .onnx files stay a few MB."""
    net = torchvision.models.alexnet(weights=None)
    net.classifier = nn.Sequential(nn.Dropout(), nn.Linear(256 * 6 * 6, 64), nn.ReLU(True), nn.Dropout(),
                                   nn.Linear(64, 64), nn.ReLU(True), nn.Linear(64, 10))
    return net


tv = torchvision.models
# name, constructor, per-sample input shape, fixed export batch, batches the fixed export runs at
# (opsets: OPSETS, or OLD_OPSETS for the names in OLD_OPSET_MODELS)
MODELS = [
    ("resnet18", lambda: tv.resnet18(weights=None, num_classes=10), (3, 64, 64), 2, [1, 2, 5]),
    ("alexnet", alexnet, (3, 224, 224), 2, [1, 2, 5]),
    ("mobilenet_v2", lambda: tv.mobilenet_v2(weights=None, num_classes=10), (3, 64, 64), 2, [2]),
    ("mobilenet_v3_small", lambda: tv.mobilenet_v3_small(weights=None, num_classes=10), (3, 64, 64), 2, [2]),
    ("efficientnet_b0", lambda: tv.efficientnet_b0(weights=None, num_classes=10), (3, 64, 64), 2, [2]),
    ("shufflenet_v2_x0_5", lambda: tv.shufflenet_v2_x0_5(weights=None, num_classes=10), (3, 64, 64), 2, [2, 3]),
    ("squeezenet1_1", lambda: tv.squeezenet1_1(weights=None, num_classes=10), (3, 64, 64), 2, [2]),
    ("googlenet", lambda: tv.googlenet(weights=None, num_classes=10, aux_logits=False, init_weights=False),
     (3, 64, 64), 2, [2]),
    ("dcgan_examples", DCGANExamples, (100, 1, 1), 3, [1, 3, 5]),
    ("linear_gen", LinearGen, (64,), 2, [1, 2, 5]),
    ("upsample_gen", UpsampleGen, (64, 1, 1), 2, [2, 3]),
    ("pixel_shuffle_gen", PixelShuffleGen, (32, 1, 1), 2, [1, 2, 5]),
    ("unet", UNet, (3, 32, 32), 3, [3, 5]),
    ("resnet_gen", ResnetGen, (3, 32, 32), 2, [2]),
]


OLD_OPSET_MODELS = {"upsample_gen", "pixel_shuffle_gen"}


def export(net, example, path, opset):
    """The TorchScript exporter at a fixed batch (no dynamic axes): what a user gets by default from
    torch.onnx.export before PyTorch 2.9; newer PyTorch needs dynamo=False for it."""
    kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(net, example, os.path.join(OUT, path), opset_version=opset, input_names=["input"],
                      output_names=["output"], **kwargs)


def main():
    cases = []
    for i, (name, make, shape, batch, fixed_runs) in enumerate(MODELS):
        t = time.time()
        torch.manual_seed(500 + i)
        net = init_weights(make(), 600 + i)
        x = torch.randn((MAX_BATCH,) + shape, generator=torch.Generator().manual_seed(700 + i))
        with torch.no_grad():
            y = net.double()(x.double()).numpy()
        net.float()
        np.save(os.path.join(OUT, f"{name}.in.npy"), x.numpy())
        np.save(os.path.join(OUT, f"{name}.out.npy"), y.astype(np.float32))
        exports = []
        for b, runs in ((1, [1, 2]), (batch, fixed_runs)):
            for opset in OLD_OPSETS if name in OLD_OPSET_MODELS else OPSETS:
                onnx_file = f"{name}_b{b}_op{opset}.onnx"
                export(net, x[:b], onnx_file, opset)
                exports.append({"onnx": onnx_file, "opset": opset, "batch": b,
                                "run_batches": runs if opset in FULL_RUN_OPSETS else [b]})
        cases.append({"name": name, "input": f"{name}.in.npy", "output": f"{name}.out.npy",
                      "exports": exports})
        print(f"make_byom: {name} in {time.time() - t:.1f} s", flush=True)
    seconds = time.time() - T0
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"models": cases, "torch": torch.__version__, "torchvision": torchvision.__version__,
                   "seconds": round(seconds, 1)}, f, indent=1)
    print(f"make_byom: {len(cases)} models, {sum(len(c['exports']) for c in cases)} exports in {OUT} "
          f"({seconds:.1f} s)")


if __name__ == "__main__":
    main()
