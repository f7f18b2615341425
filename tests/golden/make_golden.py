#!/usr/bin/python3
"""Golden data for tests/test_onnx.cc: PyTorch models exported to ONNX with reference outputs.

Run with Debian's interpreter (/usr/bin/python3: python3-torch, python3-onnx, python3-numpy); ctest runs
it as a fixture: `make_golden.py OUT_DIR`. Writes into OUT_DIR:
  - the docs/design.md zoo architectures in PyTorch with the zoo's layer names (classifiers at small image
    sizes: lenet5 28, alexnet 63, vgg11/vgg16 32; generators full size), seeded weights, BatchNorm with
    non-trivial running statistics, eval mode; exported at opset 13 (TorchScript exporter where PyTorch
    offers a choice; a few also at 11 and 17 through the default exporter, dynamo since 2.9); their
    weights as <state_dict key>.npy folders for `model-zoo --weights` (the zoo/onnx2fb identity test);
  - >= 20 random small nets of conv / tconv / pool / dense layers (random kernel, stride, padding,
    output_padding, odd sizes), opsets 11-17, some with a dynamic batch axis;
  - small nets for each element-wise activation PyTorch exports as its own op or pattern (ReLU6 ->
    Clip, Hardsigmoid, Hardswish (a HardSigmoid * x pattern below opset 14), SiLU (x * Sigmoid(x)),
    ELU, Softplus, exp / sqrt / neg / abs), each at opset 13 and 17, with the activation names the
    imported model must contain ("activations" in the manifest);
  - element-wise binary nets (Add/Sub/Mul/Div with broadcasting): a per-channel scale and shift,
    squeeze-excitation (x * sigmoid(conv1x1(relu(conv1x1(pool(x)))))), x / c and c - x with scalar
    constants, x - y of two branches and x - pool(x); each at opset 13 and 17;
  - grouped / depthwise / dilated conv nets (GroupedNet) at opsets 13 and 17, and the same for
    transposed convs (groups 2 + dilation 2, depthwise-transposed + BN, groups 3 + dilation (2, 3));
  - hand-written ONNX graphs (Gemm alpha/beta/transB=0, MatMul+Add, Constant, Identity, Dropout),
    a model with external data, one with metadata_props, one with unsupported ops;
  - manifest.json listing every case (file names, expected output, tolerance notes).
Reference outputs are computed in float64 (the nets are run in double) and stored as float32 .npy.
Deterministic: fixed seeds, single-threaded torch.
"""
import inspect
import json
import os
import random
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import TensorProto, helper, numpy_helper

from golden_init import init_weights

torch.set_num_threads(1)
OUT = sys.argv[1] if len(sys.argv) > 1 else "golden"
os.makedirs(OUT, exist_ok=True)
MANIFEST = {"cases": [], "unsupported": None, "metadata": None}
T0 = time.time()


def save_npy(name, array):
    np.save(os.path.join(OUT, name), np.ascontiguousarray(array, dtype=np.float32))
    return name


# ---- the zoo architectures, with the zoo's layer names (models/zoo.cc) ------------------------------

class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = torch.tanh(nn.functional.avg_pool2d(self.conv1(x), 2))
        x = torch.tanh(nn.functional.avg_pool2d(self.conv2(x), 2))
        x = torch.flatten(x, 1)
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


class AlexNet(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 11, 4, 2)
        self.conv2 = nn.Conv2d(64, 192, 5, padding=2)
        self.conv3 = nn.Conv2d(192, 384, 3, padding=1)
        self.conv4 = nn.Conv2d(384, 256, 3, padding=1)
        self.conv5 = nn.Conv2d(256, 256, 3, padding=1)
        s = (size - 7) // 4 + 1
        for _ in range(3):
            s = (s - 3) // 2 + 1
        self.fc1, self.fc2, self.fc3 = nn.Linear(256 * s * s, 4096), nn.Linear(4096, 4096), nn.Linear(4096, 1000)

    def forward(self, x):
        relu, mp = torch.relu, nn.functional.max_pool2d
        x = mp(relu(self.conv1(x)), 3, 2)
        x = mp(relu(self.conv2(x)), 3, 2)
        x = relu(self.conv5(relu(self.conv4(relu(self.conv3(x))))))
        x = torch.flatten(mp(x, 3, 2), 1)
        return self.fc3(relu(self.fc2(relu(self.fc1(x)))))


VGG_CFG = {"vgg11": [64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0],
           "vgg16": [64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0]}


class VGG(nn.Module):
    def __init__(self, name, size):
        super().__init__()
        self.cfg, c, block, conv = VGG_CFG[name], 3, 1, 1
        self.order = []
        for v in self.cfg:
            if v == 0:
                self.order.append(None)
                block, conv = block + 1, 1
            else:
                layer = f"conv{block}_{conv}"
                setattr(self, layer, nn.Conv2d(c, v, 3, padding=1))
                self.order.append(layer)
                c, conv = v, conv + 1
        s = size // 32
        self.fc1, self.fc2, self.fc3 = nn.Linear(512 * s * s, 4096), nn.Linear(4096, 4096), nn.Linear(4096, 1000)

    def forward(self, x):
        for layer in self.order:
            x = nn.functional.max_pool2d(x, 2) if layer is None else torch.relu(getattr(self, layer)(x))
        x = torch.flatten(x, 1)
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Generator(nn.Module):
    """zoo generator_body: tconv k4 (s1 p0 first, then s2 p1) + BN + relu, no bias; then a head."""

    def __init__(self, widths, head):
        super().__init__()
        self.n = len(widths)
        c = 100
        for i, w in enumerate(widths):
            first = i == 0
            setattr(self, f"tconv{i + 1}", nn.ConvTranspose2d(c, w, 4, 1 if first else 2, 0 if first else 1, bias=False))
            setattr(self, f"bn{i + 1}", nn.BatchNorm2d(w, eps=1e-5))
            c = w
        self.head = head
        if head == "dcgan":
            self.tconv5 = nn.ConvTranspose2d(c, 3, 4, 2, 1)
        else:
            self.conv8 = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, x):
        for i in range(1, self.n + 1):
            x = torch.relu(getattr(self, f"bn{i}")(getattr(self, f"tconv{i}")(x)))
        return torch.tanh(self.tconv5(x) if self.head == "dcgan" else self.conv8(x))


def export(net, example, path, opset, dynamic=False, torchscript=False):
    """torchscript=True asks PyTorch >= 2.5 for its TorchScript exporter, which writes the modules as
    they are; the default since 2.9 (dynamo) folds BatchNorm into the layer before it and rewrites
    pooling heads, which the zoo/onnx2fb identity test cannot compare node by node."""
    kwargs = {}
    if torchscript and "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    torch.onnx.export(net, example, os.path.join(OUT, path), opset_version=opset,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}} if dynamic else None,
                      **kwargs)


def reference(net, x):
    """The float64 forward of a float32 net (so the golden output carries no float32 rounding)."""
    with torch.no_grad():
        y = net.double()(x.double())
    net.float()
    return y.numpy()


def save_weights(net, folder):
    """state_dict as <key>.npy (model-zoo --weights); BN's num_batches_tracked is not a parameter."""
    path = os.path.join(OUT, folder)
    os.makedirs(path, exist_ok=True)
    for key, value in net.state_dict().items():
        if not key.endswith("num_batches_tracked"):
            np.save(os.path.join(path, key + ".npy"), value.detach().float().numpy())
    return folder


def add_case(name, onnx_file, inp, out, **extra):
    case = {"name": name, "onnx": onnx_file, "input": inp, "output": out}
    case.update(extra)
    MANIFEST["cases"].append(case)


def zoo_cases():
    specs = [("lenet5", LeNet5, 28, 1, [13, 11, 17]), ("alexnet", None, 63, 3, [13]),
             ("vgg11", None, 32, 3, [13]), ("vgg16", None, 32, 3, [13]), ("dcgan", None, 0, 100, [13, 11, 17]),
             ("ebgan", None, 0, 100, [13])]
    for i, (name, _, size, channels, opsets) in enumerate(specs):
        torch.manual_seed(100 + i)
        if name == "lenet5":
            net = LeNet5()
        elif name == "alexnet":
            net = AlexNet(size)
        elif name.startswith("vgg"):
            net = VGG(name, size)
        else:
            net = Generator([1024, 512, 256, 128] if name == "dcgan" else [2048, 1024, 512, 256, 128, 64, 64],
                            name)
        init_weights(net, 1000 + i)
        shape = (2, channels, size, size) if size else (2, 100, 1, 1)
        x = torch.randn(shape, generator=torch.Generator().manual_seed(2000 + i))
        inp = save_npy(f"{name}.in.npy", x.numpy())
        out = save_npy(f"{name}.out.npy", reference(net, x))
        # The zoo/onnx2fb identity test reads these; vgg16 and ebgan (most of the bytes) are left out.
        weights = save_weights(net, f"weights_{name}") if name not in ("vgg16", "ebgan") else None
        for opset in opsets:
            # Batch 1 export for the big ones (the importer turns a batch of 1 into -1), dynamic for others.
            dynamic = name in ("lenet5", "dcgan", "alexnet") and opset != 11
            # opset 13 is the identity test's (TorchScript exporter where there is a choice); the other
            # opsets go through the installed PyTorch's default exporter.
            export(net, x[:1], f"{name}_op{opset}.onnx", opset, dynamic, torchscript=opset == 13)
            add_case(f"{name}_op{opset}", f"{name}_op{opset}.onnx", inp, out, zoo=name, image_size=size,
                     weights=weights, opset=opset)
        print(f"make_golden: {name} done at {time.time() - T0:.1f} s", flush=True)


# ---- random small nets ------------------------------------------------------------------------------

class RandomNet(nn.Module):
    """A random stack of conv / tconv / pool / BN / activation layers, optionally a dense head."""

    def __init__(self, rng, c, h, w):
        super().__init__()
        self.steps, self.layers = [], nn.ModuleList()
        self.branch = None
        for _ in range(rng.randint(2, 5)):
            kind = rng.choice(["conv", "conv", "tconv", "tconv", "pool", "bn_act"])
            if kind == "conv":
                k = rng.randint(1, 5)
                s, p = rng.randint(1, 3), rng.randint(0, k - 1)
                if (h + 2 * p - k) // s + 1 < 1 or (w + 2 * p - k) // s + 1 < 1:
                    continue
                co = rng.randint(1, 7)
                self.layers.append(nn.Conv2d(c, co, k, s, p, bias=rng.random() < 0.7))
                c, h, w = co, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            elif kind == "tconv":
                k = rng.randint(1, 5)
                s = rng.randint(1, 3)
                p = rng.randint(0, k - 1)
                op = rng.randint(0, s - 1)
                ho, wo = (h - 1) * s - 2 * p + k + op, (w - 1) * s - 2 * p + k + op
                if ho < 1 or wo < 1 or ho > 40 or wo > 40:
                    continue
                co = rng.randint(1, 7)
                self.layers.append(nn.ConvTranspose2d(c, co, k, s, p, op, bias=rng.random() < 0.7))
                c, h, w = co, ho, wo
            elif kind == "pool":
                k = rng.randint(1, 3)
                s, p = rng.randint(1, 3), rng.randint(0, k // 2)
                if (h + 2 * p - k) // s + 1 < 1 or (w + 2 * p - k) // s + 1 < 1:
                    continue
                if rng.random() < 0.5:
                    self.layers.append(nn.MaxPool2d(k, s, p))
                else:
                    self.layers.append(nn.AvgPool2d(k, s, p, count_include_pad=rng.random() < 0.5))
                h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            else:
                self.layers.append(nn.BatchNorm2d(c))
                self.layers.append(rng.choice([nn.ReLU(), nn.LeakyReLU(rng.choice([0.01, 0.2])), nn.Tanh(),
                                               nn.Sigmoid()]))
        self.c, self.h, self.w = c, h, w
        self.head = rng.choice(["none", "dense", "dense_softmax", "matmul", "gap", "view", "residual"])
        if self.head in ("dense", "dense_softmax", "view"):
            self.fc = nn.Linear(c * h * w, rng.randint(1, 9))
        elif self.head == "matmul":
            self.wm = nn.Parameter(torch.randn(c * h * w, 5))
            self.bm = nn.Parameter(torch.randn(5))
        elif self.head == "residual":
            self.ra = nn.Conv2d(c, c, 3, 1, 1)
            self.rb = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        if self.head == "dense":
            return self.fc(torch.flatten(x, 1))
        if self.head == "dense_softmax":
            return torch.softmax(self.fc(torch.flatten(x, 1)), dim=1)
        if self.head == "view":  # exporters emit Shape/Gather/Unsqueeze/Concat for this
            return self.fc(x.view(x.size(0), -1))
        if self.head == "matmul":
            return torch.flatten(x, 1) @ self.wm + self.bm
        if self.head == "gap":
            return nn.functional.adaptive_avg_pool2d(x, 1)
        if self.head == "residual":
            return torch.cat([torch.relu(x + self.ra(x)), self.rb(x)], dim=1)
        return x


def random_cases(count=24):
    rng = random.Random(7)
    made = 0
    while made < count:
        c, h, w = rng.randint(1, 4), rng.randint(3, 13), rng.randint(3, 13)
        net = RandomNet(rng, c, h, w)
        if len(net.layers) == 0:
            continue
        torch.manual_seed(made)
        init_weights(net, 3000 + made)
        opset = [11, 12, 13, 14, 15, 16, 17][made % 7]
        dynamic = made % 2 == 0
        x = torch.randn((3, c, h, w), generator=torch.Generator().manual_seed(4000 + made))
        name = f"random{made:02d}"
        inp = save_npy(f"{name}.in.npy", x.numpy())
        out = save_npy(f"{name}.out.npy", reference(net, x))
        export(net, x if dynamic else x[:1], f"{name}.onnx", opset, dynamic)
        add_case(name, f"{name}.onnx", inp, out, opset=opset, layers=repr(net))
        made += 1
    print(f"make_golden: {count} random nets done at {time.time() - T0:.1f} s", flush=True)


# ---- element-wise activations ----------------------------------------------------------------------

class ActNet(nn.Module):
    """conv + BN + act, conv (stride 2) + act, a residual add + act, dense + act: the activation as a
    fused epilogue of conv (after BN folding), add and dense, and standalone where nothing fuses."""

    def __init__(self, make_act):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 6, 3, 2, 1)
        self.conv3 = nn.Conv2d(6, 6, 1)
        self.fc = nn.Linear(6 * 4 * 5, 7)
        self.a1, self.a2, self.a3, self.a4 = make_act(), make_act(), make_act(), make_act()

    def forward(self, x):
        x = self.a1(self.bn1(self.conv1(x)))
        x = self.a2(self.conv2(x))
        x = self.a3(x + self.conv3(x))
        return self.a4(self.fc(torch.flatten(x, 1)))


class Extras(nn.Module):
    """exp, sqrt, neg, abs and softplus, each once, on values where they are defined."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 4, 3, 1, 1), nn.Conv2d(4, 4, 3, 1, 1)

    def forward(self, x):
        x = self.conv1(x)
        x = torch.sqrt(torch.abs(x)) + torch.exp(torch.neg(x))
        return nn.functional.softplus(self.conv2(x))


def activation_cases():
    specs = [("relu6", nn.ReLU6, ["clip"]), ("hardsigmoid", nn.Hardsigmoid, ["hard_sigmoid"]),
             ("hardswish", nn.Hardswish, ["hard_swish"]), ("silu", nn.SiLU, ["silu"]),
             ("elu", lambda: nn.ELU(0.7), ["elu"]), ("extras", None, ["exp", "sqrt", "neg", "abs", "softplus"])]
    for i, (name, make, acts) in enumerate(specs):
        torch.manual_seed(500 + i)
        net = init_weights(Extras() if make is None else ActNet(make), 5000 + i)
        # Spread wide enough to reach every branch (ReLU6's 6, the hard gates' saturation at +-3).
        x = (1 if make is None else 3) * torch.randn((2, 3, 8, 9), generator=torch.Generator().manual_seed(6000 + i))
        inp = save_npy(f"act_{name}.in.npy", x.numpy())
        out = save_npy(f"act_{name}.out.npy", reference(net, x))
        for opset in (13, 17):
            case = f"act_{name}_op{opset}"
            export(net, x[:1], case + ".onnx", opset, dynamic=opset == 17, torchscript=True)
            add_case(case, case + ".onnx", inp, out, opset=opset, activations=acts)
    print(f"make_golden: activation nets done at {time.time() - T0:.1f} s", flush=True)
# ---- PRelu, Softmax / LogSoftmax over channels (issue 28 must 4) -------------------------------------

class PReluNet(nn.Module):
    """nn.PReLU per channel (slope [C,1,1] in ONNX) and shared (one slope) after conv2d, conv_transpose2d
    and dense (slope [F]); onnx2fb writes prelu nodes, the shared ones fuse into their producer."""

    def __init__(self):
        super().__init__()
        self.conv1, self.p1 = nn.Conv2d(3, 6, 3, 1, 1), nn.PReLU(6)
        self.conv2, self.p2 = nn.Conv2d(6, 5, 3, 2, 1), nn.PReLU()
        self.tconv, self.p3 = nn.ConvTranspose2d(5, 4, 4, 2, 1), nn.PReLU(4)
        self.fc, self.p4 = nn.Linear(4 * 8 * 10, 7), nn.PReLU(7)

    def forward(self, x):
        x = self.p3(self.tconv(self.p2(self.conv2(self.p1(self.conv1(x))))))
        return self.p4(self.fc(torch.flatten(x, 1)))


class ChannelSoftmax(nn.Module):
    """Softmax and LogSoftmax along dim 1 of NCHW tensors (segmentation heads)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 5, 3, 1, 1), nn.Conv2d(5, 4, 1)

    def forward(self, x):
        return torch.log_softmax(self.conv2(torch.softmax(self.conv1(x), dim=1)), dim=1)


def prelu_softmax_cases():
    nets = [("prelu", PReluNet, (3, 8, 10), ["conv2d", "prelu", "conv2d", "prelu", "conv_transpose2d",
                                              "prelu", "flatten", "dense", "prelu"]),
            ("channel_softmax", ChannelSoftmax, (3, 7, 9), ["conv2d", "softmax", "conv2d", "log_softmax"])]
    for k, (base, make, (c, h, w), ops) in enumerate(nets):
        torch.manual_seed(2800 + k)
        net = init_weights(make(), 28000 + k)
        for mod in net.modules():  # distinct slopes, negative ones too
            if isinstance(mod, nn.PReLU):
                with torch.no_grad():
                    mod.weight.uniform_(-0.5, 0.8)
        x = 3 * torch.randn((2, c, h, w), generator=torch.Generator().manual_seed(28100 + k))
        inp = save_npy(f"{base}.in.npy", x.numpy())
        out = save_npy(f"{base}.out.npy", reference(net, x))
        for opset in (13, 17):
            name = f"{base}_op{opset}"
            export(net, x[:1], f"{name}.onnx", opset, dynamic=opset == 17, torchscript=True)
            add_case(name, f"{name}.onnx", inp, out, opset=opset, layers=repr(net), ops=ops)
    print(f"make_golden: prelu / softmax nets done at {time.time() - T0:.1f} s", flush=True)


# ---- element-wise binary ops with broadcasting --------------------------------------------------------

class ChannelScale(nn.Module):
    """conv, then a per-channel scale [1,C,1,1] and shift [C,1,1] (Mul and Add by constants), relu."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)
        self.scale = nn.Parameter(torch.randn(1, 5, 1, 1))
        self.shift = nn.Parameter(torch.randn(5, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x) * self.scale + self.shift)


class SqueezeExcite(nn.Module):
    """EfficientNet-style squeeze-excitation: the gate [N,C,1,1] multiplies the map [N,C,H,W]."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.reduce = nn.Conv2d(8, 2, 1)
        self.expand = nn.Conv2d(2, 8, 1)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        s = torch.sigmoid(self.expand(torch.relu(self.reduce(s))))
        return x * s


class DivConst(nn.Module):
    """x / c and c - x with scalar constants (the constant on either side)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3)

    def forward(self, x):
        y = self.conv(x) / 2.5
        return 1.5 - torch.tanh(y)


class SubBranches(nn.Module):
    """x - y of two equally shaped branches, then x - mean over space ([N,C,H,W] - [N,C,1,1])."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        d = self.a(x) - self.b(x)
        return d - nn.functional.adaptive_avg_pool2d(d, 1)


def binary_cases():
    nets = [("binary_scale", ChannelScale, 3, 9, 7), ("binary_se", SqueezeExcite, 3, 8, 11),
            ("binary_divconst", DivConst, 2, 7, 6), ("binary_sub", SubBranches, 3, 6, 9)]
    for i, (name, cls, c, h, w) in enumerate(nets):
        torch.manual_seed(500 + i)
        net = cls()
        init_weights(net, 5000 + i)
        net.eval()
        x = torch.randn((2, c, h, w), generator=torch.Generator().manual_seed(5100 + i))
        inp = save_npy(f"{name}.in.npy", x.numpy())
        out = save_npy(f"{name}.out.npy", reference(net, x))
        for opset in (13, 17):
            export(net, x, f"{name}_op{opset}.onnx", opset, dynamic=True)
            add_case(f"{name}_op{opset}", f"{name}_op{opset}.onnx", inp, out, opset=opset)
    print(f"make_golden: binary nets done at {time.time() - T0:.1f} s", flush=True)


# ---- grouped / depthwise / dilated convolutions --------------------------------------------------------

class GroupedNet(nn.Module):
    """Grouped / depthwise / dilated convolutions (issue 14): `kind` picks a MobileNet-style block
    (depthwise 3x3 + BN + ReLU, pointwise 1x1 + BN + ReLU, depthwise stride 2 with channel multiplier
    2), groups 2 and 3 with odd channels per group, dilation 2 / (2, 3) with padding edges and an
    average pool right after a dilated conv (which fuse_conv_avgpool must leave alone), or transposed
    convs ("tconv": groups 2 + dilation 2 + output_padding, a depthwise-transposed k4 s2 upsampler
    whose BatchNorm folds into it, groups 3 + dilation (2, 3) + output_padding 2 < dilation)."""

    def __init__(self, kind):
        super().__init__()
        if kind == "mobilenet":
            self.layers = nn.Sequential(
                nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=16), nn.ReLU())
        elif kind == "groups":
            self.layers = nn.Sequential(
                nn.Conv2d(6, 10, 3, padding=1, groups=2), nn.ReLU(),
                nn.Conv2d(10, 15, (3, 1), stride=(2, 1), padding=(1, 0), groups=5),
                nn.Conv2d(15, 6, 3, padding=(0, 2), groups=3), nn.LeakyReLU(0.1))
        elif kind == "tconv":  # grouped / depthwise / dilated ConvTranspose2d, BN folded into one
            self.layers = nn.Sequential(
                nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2),
                nn.BatchNorm2d(6), nn.ReLU(),
                nn.ConvTranspose2d(6, 6, 4, stride=2, padding=1, groups=6, bias=False), nn.BatchNorm2d(6),
                nn.LeakyReLU(0.1),
                nn.ConvTranspose2d(6, 9, (3, 2), stride=(3, 1), padding=(2, 0), output_padding=(1, 2),
                                   groups=3, dilation=(2, 3)), nn.Tanh())
        else:
            self.layers = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=2, dilation=2), nn.ReLU(),
                nn.Conv2d(8, 8, 3, padding=(1, 3), dilation=(2, 3), groups=4), nn.AvgPool2d(2),
                nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2, groups=8), nn.Tanh())

    def forward(self, x):
        return self.layers(x)


def grouped_cases():
    """GroupedNet in its four kinds at opsets 13 and 17, a dynamic batch axis, batch 2."""
    for i, (kind, c, h, w) in enumerate([("mobilenet", 8, 13, 11), ("groups", 6, 9, 8),
                                         ("dilated", 3, 15, 17), ("tconv", 4, 7, 6)]):
        net = init_weights(GroupedNet(kind), 6000 + i)
        x = torch.randn((2, c, h, w), generator=torch.Generator().manual_seed(6100 + i))
        for opset in (13, 17):
            name = f"grouped_{kind}_op{opset}"
            inp = save_npy(f"{name}.in.npy", x.numpy())
            out = save_npy(f"{name}.out.npy", reference(net, x))
            export(net, x, f"{name}.onnx", opset, dynamic=True)
            add_case(name, f"{name}.onnx", inp, out, opset=opset, layers=repr(net))


# ---- padding and instance norm (issue 14): PyTorch's pad modules and a CycleGAN residual block ----

class PadConv(nn.Module):
    def __init__(self, pad, c=3):
        super().__init__()
        self.pad, self.conv = pad, nn.Conv2d(c, 4, 3)

    def forward(self, x):
        return self.conv(self.pad(x))


class NormRelu(nn.Module):
    def __init__(self, affine):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(3, 5, 3, padding=1), nn.InstanceNorm2d(5, affine=affine)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))


class ResnetBlock(nn.Module):
    """CycleGAN's ResnetBlock (padding_type='reflect', InstanceNorm2d without running statistics)."""

    def __init__(self, c=4):
        super().__init__()
        self.block = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c, affine=True), nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(c, c, 3), nn.InstanceNorm2d(c, affine=True))

    def forward(self, x):
        return x + self.block(x)


def pad_norm_cases():
    # ops: the node ops onnx2fb must write (a zero pad folds into the conv while the sum < kernel).
    pc, ir = ["pad2d", "conv2d"], ["conv2d", "instance_norm", "activation"]
    nets = [
        ("reflectpad_conv", lambda: PadConv(nn.ReflectionPad2d(3)), (3, 7, 9), [13, 17], pc),
        ("reflectpad_asym", lambda: PadConv(nn.ReflectionPad2d((2, 0, 1, 3))), (3, 6, 5), [13], pc),
        ("replicationpad_conv", lambda: PadConv(nn.ReplicationPad2d((1, 2, 3, 0))), (3, 5, 8), [13, 17], pc),
        ("zeropad_conv", lambda: PadConv(nn.ZeroPad2d(1)), (3, 6, 7), [13], ["conv2d"]),
        ("zeropad_large_conv", lambda: PadConv(nn.ZeroPad2d((4, 0, 3, 1))), (3, 6, 7), [13], pc),
        ("constantpad_conv", lambda: PadConv(nn.ConstantPad2d(2, 0.5)), (3, 6, 7), [13, 17], pc),
        ("instnorm_affine_relu", lambda: NormRelu(True), (3, 9, 7), [13, 17], ir),
        ("instnorm_relu", lambda: NormRelu(False), (3, 8, 8), [13], ir),
        ("cyclegan_resblock", lambda: ResnetBlock(4), (4, 11, 10), [13, 17],
         ["pad2d", "conv2d", "instance_norm", "activation", "pad2d", "conv2d", "instance_norm", "add"]),
    ]
    for k, (base, make, (c, h, w), opsets, ops) in enumerate(nets):
        torch.manual_seed(500 + k)
        net = init_weights(make(), 5000 + k)
        for mod in net.modules():
            if isinstance(mod, nn.InstanceNorm2d) and mod.affine:
                with torch.no_grad():
                    mod.weight.uniform_(0.5, 1.5)
                    mod.bias.uniform_(-0.5, 0.5)
        x = torch.randn((2, c, h, w), generator=torch.Generator().manual_seed(6000 + k))
        inp = save_npy(f"{base}.in.npy", x.numpy())
        out = save_npy(f"{base}.out.npy", reference(net, x))
        for opset in opsets:
            name = f"{base}_op{opset}"
            export(net, x[:1], f"{name}.onnx", opset, dynamic=opset == 17, torchscript=True)
            add_case(name, f"{name}.onnx", inp, out, opset=opset, layers=repr(net), ops=ops)
    # ShuffleNetV2's stride-1 unit as torchvision writes it: chunk along channels (a Split, or Slices
    # with ends computed from the shape), a branch, concat, then the reshape/transpose channel shuffle.
    class ShuffleUnit(nn.Module):
        def __init__(self, c=6):
            super().__init__()
            self.branch = nn.Sequential(nn.Conv2d(c // 2, c // 2, 1), nn.ReLU())

        def forward(self, x):
            a, b = x.chunk(2, dim=1)
            y = torch.cat((a, self.branch(b)), dim=1)
            n, c, h, w = y.shape
            y = torch.transpose(y.view(n, 2, c // 2, h, w), 1, 2).contiguous()
            return y.view(n, -1, h, w)[:, 1:5]

    torch.manual_seed(520)
    net = init_weights(ShuffleUnit(6), 5020)
    x = torch.randn((2, 6, 5, 7), generator=torch.Generator().manual_seed(6020))
    inp = save_npy("shuffle_unit.in.npy", x.numpy())
    out = save_npy("shuffle_unit.out.npy", reference(net, x))
    for opset in (13, 17):
        name = f"shuffle_unit_op{opset}"
        export(net, x[:1], f"{name}.onnx", opset, dynamic=opset == 17, torchscript=True)
        add_case(name, f"{name}.onnx", inp, out, opset=opset, layers=repr(net),
                 ops=["slice", "slice", "conv2d", "activation", "concat", "channel_shuffle", "slice"])
    print(f"make_golden: pad / instance norm / shuffle nets done at {time.time() - T0:.1f} s", flush=True)


# ---- single layers of issue 14 (pooling with ceil_mode, global max pool, ...) ------------------------

class ConvThen(nn.Module):
    """A 3x3 convolution (so the case has weights and a non-trivial input) followed by `layer`."""

    def __init__(self, c_in, c_out, layer):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.layer = layer

    def forward(self, x):
        return self.layer(self.conv(x))


class Interpolate(nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, x):
        return nn.functional.interpolate(x, **self.kwargs)


def layer_cases():
    """Each layer after a conv, exported at opset 13 and 17 with a batch of 2 traced as dynamic; the
    input sizes make ceil_mode add a partial last window (and, for AvgPool2d(2, 2, 1) on 5 rows, drop
    the window that would start in the bottom padding: PyTorch's rule, which the ONNX graph of Pad +
    AveragePool alone would not follow)."""
    specs = [
        ("maxpool_ceil", lambda: nn.MaxPool2d(3, 2, ceil_mode=True), (3, 10, 9)),
        ("avgpool_ceil_incl", lambda: nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=True),
         (3, 10, 9)),
        ("avgpool_ceil_excl", lambda: nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False),
         (3, 10, 9)),
        ("avgpool_ceil_drop", lambda: nn.AvgPool2d(2, 2, padding=1, ceil_mode=True, count_include_pad=True),
         (2, 5, 7)),
        ("globalmaxpool", lambda: nn.AdaptiveMaxPool2d(1), (3, 7, 5)),
        # a generator block: nearest x2 upsample + conv + relu
        ("upsample_nearest_conv", lambda: nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"),
                                                        nn.Conv2d(4, 3, 3, padding=1), nn.ReLU()), (3, 5, 7)),
        ("upsample_bilinear", lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), (3, 5, 7)),
        ("upsample_bilinear_ac", lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), (3, 5, 7)),
        ("upsample_bilinear_down", lambda: nn.Upsample(scale_factor=0.5, mode="bilinear"), (2, 9, 8)),
        ("interpolate_size_bilinear", lambda: Interpolate(size=(7, 9), mode="bilinear", align_corners=False),
         (3, 3, 4)),
        ("interpolate_size_nearest", lambda: Interpolate(size=(7, 9), mode="nearest"), (3, 3, 4)),
        ("pixel_shuffle", lambda: nn.PixelShuffle(2), (3, 5, 6)),  # DepthToSpace CRD of the conv's 4 channels
    ]
    for i, (name, make, (c, h, w)) in enumerate(specs):
        for opset in (13, 17):
            torch.manual_seed(500 + i)
            net = init_weights(ConvThen(c, 4, make()), 5000 + i)
            x = torch.randn((2, c, h, w), generator=torch.Generator().manual_seed(6000 + i))
            case = f"{name}_op{opset}"
            inp = save_npy(f"{case}.in.npy", x.numpy())
            out = save_npy(f"{case}.out.npy", reference(net, x))
            export(net, x, f"{case}.onnx", opset, dynamic=True, torchscript=True)
            if name == "globalmaxpool":  # torch writes MaxPool(kernel = H x W): make it ONNX's GlobalMaxPool
                model = onnx.load(os.path.join(OUT, f"{case}.onnx"))
                for node in model.graph.node:
                    if node.op_type == "MaxPool":
                        node.op_type = "GlobalMaxPool"
                        del node.attribute[:]
                onnx.checker.check_model(model)
                onnx.save(model, os.path.join(OUT, f"{case}.onnx"))
            add_case(case, f"{case}.onnx", inp, out, opset=opset, layers=repr(net))


# ---- hand-written graphs ----------------------------------------------------------------------------

def handmade_case():
    """Gemm (transB=0, alpha, beta) -> Identity -> Relu -> MatMul + Add -> Dropout -> Softmax, with
    weights from Constant nodes and initializers; the expected output computed in numpy (float64)."""
    rng = np.random.default_rng(11)
    b = rng.standard_normal((8, 6)).astype(np.float32)
    c = rng.standard_normal((6,)).astype(np.float32)
    m = rng.standard_normal((6, 4)).astype(np.float32)
    d = rng.standard_normal((4,)).astype(np.float32)
    nodes = [
        helper.make_node("Constant", [], ["B"], value=numpy_helper.from_array(b, "B"), name="const_b"),
        helper.make_node("Gemm", ["x", "B", "C"], ["g"], alpha=0.5, beta=2.0, transB=0, name="gemm"),
        helper.make_node("Identity", ["g"], ["gi"], name="identity"),
        helper.make_node("Relu", ["gi"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "M"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "D"], ["a"], name="add_bias"),
        helper.make_node("Dropout", ["a"], ["dr"], name="dropout"),
        helper.make_node("Softmax", ["dr"], ["y"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "handmade", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(c, "C"), numpy_helper.from_array(m, "M"), numpy_helper.from_array(d, "D")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, "handmade.onnx"))
    x = rng.standard_normal((5, 8)).astype(np.float32)
    g = 0.5 * x.astype(np.float64) @ b + 2.0 * c
    a = np.maximum(g, 0) @ m + d
    e = np.exp(a - a.max(axis=1, keepdims=True))
    add_case("handmade", "handmade.onnx", save_npy("handmade.in.npy", x),
             save_npy("handmade.out.npy", e / e.sum(axis=1, keepdims=True)), opset=13)


def conv2d_np(x, w, b, pad):
    """Stride-1 cross-correlation in float64 (NCHW, weight [C_out][C_in][KH][KW])."""
    n, _, h, wd = x.shape
    co, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, co, ho, wo)) + b.reshape(1, co, 1, 1)
    for ky in range(kh):
        for kx in range(kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + ho, kx:kx + wo], w[:, :, ky, kx])
    return y


def dynamo_style_cases():
    """Graphs written the way PyTorch >= 2.9's default (dynamo) exporter writes a classifier head,
    built by hand so that the older PyTorch of the CI machine still produces them: opset 18
    ReduceMean with its axes as an input (adaptive_avg_pool2d(x, 1)) then Reshape [-1, C] (flatten);
    and opset 13 ReduceMean with an axes attribute and keepdims = 0 (x.mean((2, 3))). Expected
    outputs in numpy (float64)."""
    rng = np.random.default_rng(18)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    fw = rng.standard_normal((4, 5)).astype(np.float32)
    fb = rng.standard_normal((4,)).astype(np.float32)
    x = rng.standard_normal((3, 3, 9, 7)).astype(np.float32)
    features = np.maximum(conv2d_np(x, w, b, 1), 0).mean(axis=(2, 3))  # [n, 5]
    expected = features @ fw.T.astype(np.float64) + fb
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B"),
             numpy_helper.from_array(fw, "FW"), numpy_helper.from_array(fb, "FB")]
    conv = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3],
                             name="node_conv2d"),
            helper.make_node("Relu", ["c"], ["r"], name="node_relu")]
    gemm = helper.make_node("Gemm", ["f", "FW", "FB"], ["y"], transB=1, name="node_linear")
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 9, 7])
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    for name, opset, nodes, extra in [
        ("dynamo_gap_op18", 18,
         [helper.make_node("ReduceMean", ["r", "axes"], ["m"], keepdims=1, name="node_mean"),
          helper.make_node("Reshape", ["m", "shape"], ["f"], name="node_view")],
         [numpy_helper.from_array(np.array([-1, -2], dtype=np.int64), "axes"),
          numpy_helper.from_array(np.array([-1, 5], dtype=np.int64), "shape")]),
        ("mean_keepdims0_op13", 13,
         [helper.make_node("ReduceMean", ["r"], ["f"], axes=[2, 3], keepdims=0, name="node_mean")], []),
    ]:
        graph = helper.make_graph(conv + nodes + [gemm], name, [x_info], [y_info], inits + extra)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        if opset <= onnx.defs.onnx_opset_version():  # Debian's onnx 1.12 knows opsets up to 17
            onnx.checker.check_model(model)
        onnx.save(model, os.path.join(OUT, name + ".onnx"))
        add_case(name, name + ".onnx", save_npy(name + ".in.npy", x), save_npy(name + ".out.npy", expected),
                 opset=opset)


def clip_cases():
    """Clip as exporters other than PyTorch's write it: opset 10 with min / max attributes; opset 13
    with only a max (an empty min name), only a min of 0 (imported as relu), and none (a copy), each
    after a conv; the expected outputs in numpy (float64)."""
    rng = np.random.default_rng(21)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    x = rng.standard_normal((2, 2, 6, 5)).astype(np.float32)
    c = conv2d_np(x, w, b, 1)
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 6, 5])
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 6, 5])
    conv = helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3], name="conv")
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")]
    lo = numpy_helper.from_array(np.array(0, dtype=np.float32), "lo")
    hi = numpy_helper.from_array(np.array(1.5, dtype=np.float32), "hi")
    for name, opset, clip, extra, expected in [
        ("clip_attr_op10", 10, helper.make_node("Clip", ["c"], ["y"], min=-1.0, max=2.0, name="clip"), [],
         np.clip(c, -1, 2)),
        ("clip_max_only_op13", 13, helper.make_node("Clip", ["c", "", "hi"], ["y"], name="clip"), [hi],
         np.minimum(c, 1.5)),
        ("clip_min0_op13", 13, helper.make_node("Clip", ["c", "lo"], ["y"], name="clip"), [lo], np.maximum(c, 0)),
        ("clip_none_op13", 13, helper.make_node("Clip", ["c"], ["y"], name="clip"), [], c),
    ]:
        graph = helper.make_graph([conv, clip], name, [x_info], [y_info], inits + extra)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(OUT, name + ".onnx"))
        add_case(name, name + ".onnx", save_npy(name + ".in.npy", x), save_npy(name + ".out.npy", expected),
                 opset=opset)


def external_data_case():
    """A small conv net (LeakyRelu, Sigmoid) saved with its weights in a separate file (data_location
    EXTERNAL)."""
    torch.manual_seed(5)
    net = init_weights(nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.LeakyReLU(0.1),
                                     nn.ConvTranspose2d(8, 4, 4, 2, 1), nn.Sigmoid()), 5)
    x = torch.randn((2, 3, 7, 9), generator=torch.Generator().manual_seed(5))
    os.makedirs(os.path.join(OUT, "external"), exist_ok=True)
    tmp = os.path.join(OUT, "external", "tmp.onnx")
    torch.onnx.export(net, x, tmp, opset_version=13, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    model = onnx.load(tmp)
    os.remove(tmp)
    onnx.save_model(model, os.path.join(OUT, "external", "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="model.weights", size_threshold=0)
    add_case("external", "external/model.onnx", save_npy("external.in.npy", x.numpy()),
             save_npy("external.out.npy", reference(net, x)), opset=13, external=True)


def metadata_case():
    """lenet5 (opset 13) with metadata_props the importer must pass through byte for byte."""
    model = onnx.load(os.path.join(OUT, "lenet5_op13.onnx"))
    props = {"task": "classifier", "labels": "T-shirt\nTrouser\nPullover\n", "input.mean": "0.5",
             "input.std": "0.5", "unicode": "h\u00e9llo \u2713 \u65e5\u672c", "spaces": "  a = b  ",
             "empty": "", "json": '{"a": [1, 2], "b": "c"}'}
    onnx.helper.set_model_props(model, props)
    onnx.save(model, os.path.join(OUT, "metadata.onnx"))
    MANIFEST["metadata"] = {"onnx": "metadata.onnx", "keys": sorted(props)}


def unsupported_case():
    """A net with ops infer does not import: Cos (twice), Sin, Atan (Resize, here before, imports now)."""

    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)

        def forward(self, x):
            x = torch.cos(torch.sin(self.conv(x)))
            return torch.atan(torch.cos(x))

    torch.manual_seed(9)
    net = Bad().eval()
    export(net, torch.randn(1, 3, 8, 8), "unsupported.onnx", 13)
    model = onnx.load(os.path.join(OUT, "unsupported.onnx"))
    bad = {}
    for node in model.graph.node:
        if node.op_type in ("Cos", "Sin", "Atan"):
            bad.setdefault(node.op_type, []).append(node.name)
    MANIFEST["unsupported"] = {"onnx": "unsupported.onnx", "ops": bad}


def main():
    zoo_cases()
    random_cases()
    activation_cases()
    prelu_softmax_cases()
    binary_cases()
    grouped_cases()
    pad_norm_cases()
    layer_cases()
    handmade_case()
    dynamo_style_cases()
    clip_cases()
    external_data_case()
    metadata_case()
    unsupported_case()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(MANIFEST, f, indent=1)
    print(f"make_golden: {len(MANIFEST['cases'])} cases in {OUT} ({time.time() - T0:.1f} s)")


if __name__ == "__main__":
    main()
