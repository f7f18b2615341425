#!/usr/bin/env python3
"""Bring your own model, timed side by side: infer against its peers on the same ONNX files.

--device cpu (issue 27, must 5; Debian's /usr/bin/python3 with python3-torch, python3-torchvision):
    models (--models): ResNet-18, ResNet-50, MobileNetV2, MobileNetV3-Small, EfficientNet-B0, ShuffleNetV2
    x1.0, SqueezeNet 1.1 (torchvision, input --size 224), the DCGAN and EB-GAN generators of docs/design.md
    (cpu_vs_pytorch.py's modules, latent 100x1x1), the CycleGAN ResNet generator (junyanz
    pytorch-CycleGAN-and-pix2pix `resnet_9blocks`, ngf 64, InstanceNorm) and the pix2pix U-Net (`unet_256`,
    ngf 64, BatchNorm, dropout as in eval) at --gen-size 256. Seeded random weights in eval mode (every
    BatchNorm gets a random affine and running statistics gathered from random inputs, then perturbed),
    exported to ONNX (TorchScript exporter, opset 17, dynamic batch axis) and converted by the build's onnx2fb
    (a model it refuses is recorded with its error line; its peers still run).
    The sweep: every ISA level of --isa-levels (default: each one this CPU has, from /proc/cpuinfo: avx512 =
    avx512f+bw+vl+dq, avx2 = avx2+fma, baseline), every batch of --batches (1,8) and thread count of
    --threads-list (1,<cores>). Per model, level and thread count: infer (`infer-bench --threads T model X.fb`
    with INFER_CPU_ISA=<level> and OPENBLAS_CORETYPE = SkylakeX | Haswell | Prescott), then one peer worker
    process (this script, --peer-worker) with the level's caps in its environment, timing
      ONNX Runtime  (PyPI onnxruntime, CPUExecutionProvider, ORT_ENABLE_ALL, intra-op threads T, its pool
                     spinning on and off: session.intra_op.allow_spinning 1 / 0),
      OpenVINO      (PyPI openvino, CPU plugin, PERFORMANCE_HINT LATENCY, INFERENCE_PRECISION_HINT f32,
                     INFERENCE_NUM_THREADS T; the model reshaped to the static batch),
      PyTorch       (eager, channels_last, torch.jit.trace + freeze, torch.jit.optimize_for_inference; best),
    on the same input (infer-bench's --dump) and weights. Caps per level (PEER_CAPS): OpenVINO's oneDNN fork
    and its own kernels through ONEDNN_MAX_CPU_ISA + OV_CPU_MAX_ISA, PyTorch through ATEN_CPU_CAPABILITY +
    ONEDNN_MAX_CPU_ISA (its bundled oneDNN) + OPENBLAS_CORETYPE; ONNX Runtime's MLAS cannot be capped (it
    reads CPUID itself), so it runs uncapped and a ratio against it at a lower level is a lower bound. The
    report says per level which ISA each runtime actually used (OpenVINO: the primitive types of its
    compiled model; PyTorch: its oneDNN's "isa:" line and ATen's capability, from a probe process).
    Correctness per row: infer vs PyTorch eager (uncapped, fp32) within 1e-3 relative; every peer's output is
    cross-checked too (a peer off by more than 1e-2 does not count as the goal's peer). Goals per level
    (batch 1, all cores): every model >= 1.0x the faster of ONNX Runtime and OpenVINO, the generators
    >= 1.3x; infer at avx2 within 1.6x of infer at avx512 on every model. For every miss, infer's per-node
    profile (`infer --profile --profile-json`, at that level) is in the report (for the avx2-vs-avx512
    misses, both levels' profiles node by node). Timed runs: --runs after --warmup, fewer (never fewer than
    --min-runs) where that would take more than --budget seconds. OMP_WAIT_POLICY=passive by default.
    onnxruntime and openvino are benchmark peers, never build dependencies: when they cannot be imported the
    script creates a virtual environment (--venv, default <repo>/.venv-bench, --system-site-packages so
    Debian's torch stays visible), pip-installs them there and re-executes itself under it (--no-venv: they
    are then recorded as missing).
--device cuda (issue 14; the GPU machine's python3): the torchvision classifiers at batch 1 and 64, fp32
    (strict), tf32 and fp16: `infer-bench --backend cuda --precision P model X.fb` vs PyTorch eager, CUDA graph,
    channels_last + CUDA graph and torch.compile of the channels_last module in the modes of --compile-modes
    (max-autotune, reduce-overhead; compile time recorded; at most --compile-timeout-s compile seconds per model,
    Inductor's caches in --inductor-cache-dir) through gpu_vs_pytorch.py's model_rows (imported); ratio against
    PyTorch best, the fastest of them all (issue 31's goals with it).
Writes <out>/byom-<cpu|gpu>-<date>[-tag].md and .json; after each model (either device) the rows so far are in
<out>/byom-<cpu|gpu>-<date>[-tag]-partial.json (removed at the end), for --merge if the run is cut off. --merge combines runs made part by part; --selftest
builds and checks reports from synthetic numbers (no torch, no GPU, no build).
"""
import argparse
import copy
import datetime
import inspect
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

TORCHVISION_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
                      "shufflenet_v2_x1_0", "squeezenet1_1"]
GENERATORS = ["dcgan", "ebgan", "cyclegan_resnet", "pix2pix_unet"]
CPU_MODELS = TORCHVISION_MODELS + GENERATORS
GPU_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0"]  # issue 14's four
MODEL_NAMES = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2",
               "mobilenet_v3_small": "MobileNetV3-Small", "efficientnet_b0": "EfficientNet-B0",
               "shufflenet_v2_x1_0": "ShuffleNetV2 x1.0", "squeezenet1_1": "SqueezeNet 1.1",
               "dcgan": "DCGAN generator", "ebgan": "EB-GAN generator",
               "cyclegan_resnet": "CycleGAN resnet_9blocks", "pix2pix_unet": "pix2pix unet_256"}
TOLERANCE = {"fp32": 1e-3, "tf32": 2e-2, "fp16": 2e-2}
PEER_TOLERANCE = 1e-2  # a peer further than this from PyTorch eager computed something else: not a goal peer
OPSET = 17
LATENT = (100, 1, 1)

ISA_LEVELS = ["avx512", "avx2", "baseline"]
ISA_FLAGS = {"avx512": ["avx512f", "avx512bw", "avx512vl", "avx512dq"], "avx2": ["avx2", "fma"], "baseline": []}
OPENBLAS_CORETYPE = {"avx512": "SkylakeX", "avx2": "Haswell", "baseline": "Prescott"}
# The environment of the peer worker per level. ONEDNN_MAX_CPU_ISA caps oneDNN (OpenVINO's fork and
# PyTorch's bundled copy; DNNL_MAX_CPU_ISA is the older name of the same variable); OV_CPU_MAX_ISA caps
# OpenVINO's own CPU-plugin kernels (both are needed: with oneDNN's alone a Reduce kernel still ran
# jit_avx512 at AVX2); ATEN_CPU_CAPABILITY caps PyTorch's ATen kernels. At avx512 nothing is capped.
PEER_CAPS = {
    "avx512": {},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "OV_CPU_MAX_ISA": "AVX2",
             "ATEN_CPU_CAPABILITY": "avx2"},
    "baseline": {"ONEDNN_MAX_CPU_ISA": "SSE41", "DNNL_MAX_CPU_ISA": "SSE41", "OV_CPU_MAX_ISA": "SSE41",
                 "ATEN_CPU_CAPABILITY": "default"},
}
ISA_RANK = {"baseline": 0, "avx2": 1, "avx512": 2}

GOAL_PEERS = ["onnxruntime", "onnxruntime_nospin", "openvino"]
TORCH_CPU_KINDS = ["eager", "channels_last", "jit_frozen", "jit_optimized"]
CPU_PEER_KINDS = GOAL_PEERS + TORCH_CPU_KINDS
PEER_NAMES = {"onnxruntime": "ONNX Runtime", "onnxruntime_nospin": "ORT no-spin", "openvino": "OpenVINO",
              "eager": "PyTorch eager", "channels_last": "PyTorch channels_last",
              "jit_frozen": "PyTorch jit trace+freeze", "jit_optimized": "PyTorch jit optimize_for_inference",
              "graph": "PyTorch CUDA graph", "channels_last_graph": "PyTorch channels_last + CUDA graph",
              "compile_max_autotune": "PyTorch compile max-autotune", "compile_reduce_overhead":
              "PyTorch compile reduce-overhead"}
# PyTorch's GPU configurations (gpu_vs_pytorch.TORCH_KINDS; named here too: the report needs no torch)
GPU_PEER_KINDS = ["eager", "graph", "channels_last_graph", "compile_max_autotune", "compile_reduce_overhead"]
GPU_COMPILE_KINDS = {"compile_max_autotune": "max-autotune", "compile_reduce_overhead": "reduce-overhead"}
GPU_COMPILE_TIMEOUT_S = 90.0  # --compile-timeout-s on cuda: compile seconds per model and mode
# issue 31: batch 64 fp16 targets above 1.0x
GPU_GOAL31_TARGETS = {(64, "fp16"): {"mobilenet_v2": 1.2, "efficientnet_b0": 1.2}}
GOAL_RATIO = {"classifier": 1.0, "generator": 1.3}
AVX2_VS_AVX512 = 1.6
VENV_MARK = "BYOM_BENCH_IN_VENV"
PEER_PACKAGES = ["onnxruntime", "openvino"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_cmd(cmd, timeout, env=None, show_env=None):
    """Runs cmd; on a non-zero exit raises RuntimeError with the tool's last stderr line ('error: ...').
    show_env: the variables to print in front of the command in the log."""
    log("$ " + "".join("%s=%s " % kv for kv in sorted((show_env or {}).items())) +
        " ".join(shlex.quote(c) for c in cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=timeout, env=env)
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        raise RuntimeError("%s exited with %d: %s" % (os.path.basename(cmd[0]), p.returncode,
                                                      lines[-1] if lines else "(nothing on stderr)"))
    return p.stdout


def loadavg():
    try:
        return open("/proc/loadavg").read().strip()
    except OSError:
        return "?"


def cpu_name():
    try:
        return next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
                    platform.processor() or "?")
    except OSError:
        return platform.processor() or "?"


def cpu_flags():
    try:
        line = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
        return line.split(":", 1)[1].split() if ":" in line else []
    except OSError:
        return []


def supported_levels(flags):
    """The ISA levels this CPU has, highest first (baseline always)."""
    return [lvl for lvl in ISA_LEVELS if all(f in flags for f in ISA_FLAGS[lvl])]


def mlas_isa(flags):
    """What ONNX Runtime's MLAS picks on this CPU (onnxruntime/core/mlas/lib/platform.cpp: CPUID and XGETBV,
    no cap): AVX-512F kernels where avx512f is there (core = +bw/dq/vl), else FMA3/AVX2, AVX, SSE."""
    if "avx512f" in flags:
        return "AVX-512 (MLAS AVX512F%s kernels)" % (" / AVX512 core" if all(
            f in flags for f in ("avx512bw", "avx512dq", "avx512vl")) else "")
    if "avx2" in flags and "fma" in flags:
        return "AVX2 + FMA3"
    return "AVX" if "avx" in flags else "SSE"


# ---- peers in a virtual environment (benchmark peers, never build dependencies) ----

def missing_peers():
    out = []
    for mod in PEER_PACKAGES:
        try:
            __import__(mod)
        except ImportError:
            out.append(mod)
    return out


def ensure_peers(a):
    """Returns normally when onnxruntime and openvino import; otherwise creates the venv, installs them into it
    and re-executes this script under the venv's python (never returns then)."""
    missing = missing_peers()
    if not missing:
        return
    if a.no_venv or os.environ.get(VENV_MARK):
        log("note: %s cannot be imported%s; recorded as missing" % (
            ", ".join(missing), " in the venv" if os.environ.get(VENV_MARK) else " (--no-venv)"))
        return
    venv = os.path.abspath(a.venv)
    py = os.path.join(venv, "bin", "python3")
    if not os.access(py, os.X_OK):
        base = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        log("creating %s (--system-site-packages: Debian's torch, torchvision and numpy stay visible)" % venv)
        subprocess.run([base, "-m", "venv", "--system-site-packages", venv], check=True)
    log("installing %s into %s" % (" ".join(PEER_PACKAGES), venv))
    subprocess.run([py, "-m", "pip", "install", "--quiet"] + PEER_PACKAGES, check=True)
    log("re-executing under %s" % py)
    os.environ[VENV_MARK] = "1"
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


# ---- the models ----

def is_generator(name):
    return name in GENERATORS


def input_shape(name, size, gen_size):
    """The per-sample input shape (C, H, W)."""
    if name in ("dcgan", "ebgan"):
        return LATENT
    if name in ("cyclegan_resnet", "pix2pix_unet"):
        return (3, gen_size, gen_size)
    return (3, size, size)


def cyclegan_resnet_generator(ngf=64, n_blocks=9):
    """junyanz/pytorch-CycleGAN-and-pix2pix ResnetGenerator as `--netG resnet_9blocks --norm instance`
    builds it (CycleGAN's defaults: no dropout; InstanceNorm2d without affine or running statistics, so the
    convolutions carry biases): ReflectionPad 3, conv 7x7 3->ngf, IN, ReLU; two stride-2 3x3 convs (ngf*2,
    ngf*4), each IN + ReLU; 9 residual blocks (ReflectionPad 1, conv 3x3, IN, ReLU, ReflectionPad 1, conv 3x3,
    IN, + input); two ConvTranspose 3x3 s2 p1 output_padding 1 (ngf*2, ngf), each IN + ReLU; ReflectionPad 3,
    conv 7x7 ngf->3, tanh."""
    import torch.nn as nn

    def norm(c):
        return nn.InstanceNorm2d(c, affine=False, track_running_stats=False)

    class ResnetBlock(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.conv_block = nn.Sequential(
                nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, padding=0, bias=True), norm(dim), nn.ReLU(True),
                nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, padding=0, bias=True), norm(dim))

        def forward(self, x):
            return x + self.conv_block(x)

    class ResnetGenerator(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, 7, padding=0, bias=True), norm(ngf), nn.ReLU(True)]
            for i in range(2):
                mult = 2 ** i
                layers += [nn.Conv2d(ngf * mult, ngf * mult * 2, 3, stride=2, padding=1, bias=True),
                           norm(ngf * mult * 2), nn.ReLU(True)]
            layers += [ResnetBlock(ngf * 4) for _ in range(n_blocks)]
            for i in range(2):
                mult = 2 ** (2 - i)
                layers += [nn.ConvTranspose2d(ngf * mult, ngf * mult // 2, 3, stride=2, padding=1, output_padding=1,
                                              bias=True), norm(ngf * mult // 2), nn.ReLU(True)]
            layers += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, 7, padding=0), nn.Tanh()]
            self.model = nn.Sequential(*layers)

        def forward(self, x):
            return self.model(x)

    return ResnetGenerator()


def pix2pix_unet_generator(ngf=64, num_downs=8):
    """junyanz/pytorch-CycleGAN-and-pix2pix UnetGenerator as `--netG unet_256 --norm batch` builds it
    (pix2pix's defaults: BatchNorm, so no conv biases but the outermost up-convolution's; dropout 0.5 in the
    three inner ngf*8 blocks, an identity in eval): 8 down steps Conv 4x4 s2 p1 (LeakyReLU 0.2 before each
    but the first, BatchNorm after each but the first and the innermost) to 1x1, up steps ReLU +
    ConvTranspose 4x4 s2 p1 + BatchNorm, skip connections by concatenation, tanh. The ReLUs are in place as
    in the original; so the skip carries LeakyReLU(x), not x (the original behaves so too)."""
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, outer_nc, inner_nc, input_nc=None, submodule=None, outermost=False, innermost=False,
                     use_dropout=False):
            super().__init__()
            self.outermost = outermost
            input_nc = outer_nc if input_nc is None else input_nc
            downconv = nn.Conv2d(input_nc, inner_nc, 4, stride=2, padding=1, bias=False)
            downrelu, downnorm = nn.LeakyReLU(0.2, True), nn.BatchNorm2d(inner_nc)
            uprelu, upnorm = nn.ReLU(True), nn.BatchNorm2d(outer_nc)
            if outermost:
                upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, 4, stride=2, padding=1)
                model = [downconv, submodule, uprelu, upconv, nn.Tanh()]
            elif innermost:
                upconv = nn.ConvTranspose2d(inner_nc, outer_nc, 4, stride=2, padding=1, bias=False)
                model = [downrelu, downconv, uprelu, upconv, upnorm]
            else:
                upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, 4, stride=2, padding=1, bias=False)
                model = [downrelu, downconv, downnorm, submodule, uprelu, upconv, upnorm]
                if use_dropout:
                    model.append(nn.Dropout(0.5))
            self.model = nn.Sequential(*model)

        def forward(self, x):
            return self.model(x) if self.outermost else torch.cat([x, self.model(x)], 1)

    class UnetGenerator(nn.Module):
        def __init__(self):
            super().__init__()
            block = Block(ngf * 8, ngf * 8, innermost=True)
            for _ in range(num_downs - 5):
                block = Block(ngf * 8, ngf * 8, submodule=block, use_dropout=True)
            block = Block(ngf * 4, ngf * 8, submodule=block)
            block = Block(ngf * 2, ngf * 4, submodule=block)
            block = Block(ngf, ngf * 2, submodule=block)
            self.model = Block(3, ngf, input_nc=3, submodule=block, outermost=True)

        def forward(self, x):
            return self.model(x)

    return UnetGenerator()


def make_arch(name):
    """The architecture with PyTorch's default initialisation (seed it first)."""
    if name in ("dcgan", "ebgan"):
        from cpu_vs_pytorch import torch_model  # docs/design.md's generators, one definition
        return torch_model(name)
    if name == "cyclegan_resnet":
        return cyclegan_resnet_generator()
    if name == "pix2pix_unet":
        return pix2pix_unet_generator()
    import torchvision
    ctor = getattr(torchvision.models, name)
    try:
        return ctor(weights=None)
    except TypeError:  # torchvision < 0.13
        return ctor(pretrained=False)


def build_model(name, seed, shape):
    """`name` with seeded random weights in eval mode, activations kept O(1) (fp16 too).
    Every BatchNorm first gets a random affine scale / shift; then the running statistics are gathered
    from two seeded random batches of 4 (uniform in [-1, 1]; a latent input: standard normal; cumulative
    average) with only the BatchNorms in train mode, and perturbed relative to each channel's spread (mean by
    0.05 sigma, variance by 0.75-1.25x). Order matters: statistics gathered before the affine change (or
    with the whole net in train mode, EfficientNet's stochastic depth) no longer fit the eval-mode
    activations, which then grew ~2x per layer in EfficientNet-B0, to 6e4 (beyond fp16; PyTorch's own fp32
    output differed from float64 by 4e-4, which looked like an infer bug). A net without BatchNorm (the
    CycleGAN generator: InstanceNorm) keeps PyTorch's default initialisation."""
    import torch
    torch.manual_seed(seed)
    net = make_arch(name)
    bns = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in bns:
            m.weight.uniform_(0.5, 1.5, generator=g)
            m.bias.uniform_(-0.2, 0.2, generator=g)
            m.reset_running_stats()
            m.momentum = None  # cumulative moving average
        net.eval()
        for m in bns:
            m.train()
        for _ in range(2 if bns else 0):
            if tuple(shape) == LATENT:
                net(torch.randn((4,) + tuple(shape), generator=g))
            else:
                net(torch.rand((4,) + tuple(shape), generator=g) * 2 - 1)
        for m in bns:
            m.running_mean.add_(torch.randn(m.running_mean.shape, generator=g) * 0.05 * m.running_var.sqrt())
            m.running_var.mul_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
            m.momentum = 0.1
    return net.eval()


def export_onnx(net, shape, path):
    """TorchScript exporter, opset 17, dynamic batch axis (dynamo=False where that argument exists)."""
    import torch
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    x = torch.rand((1,) + tuple(shape))
    with torch.no_grad():
        torch.onnx.export(net, x, path, opset_version=OPSET, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          do_constant_folding=True, **kwargs)


def prepare(a, name):
    """(net, onnx path, fb path or None, onnx2fb error or None)."""
    net = build_model(name, a.seed, input_shape(name, a.size, a.gen_size))
    onnx_path = os.path.join(a.tmp, name + ".onnx")
    export_onnx(net, input_shape(name, a.size, a.gen_size), onnx_path)
    fb = os.path.join(a.tmp, name + ".fb")
    try:
        run_cmd([a.onnx2fb, onnx_path, fb], a.timeout)
        return net, onnx_path, fb, None
    except Exception as e:  # noqa: BLE001
        return net, onnx_path, None, str(e)


# ---- CPU: timing helpers ----

def wall_times(fn, runs, warmup, budget_s=None, min_runs=3):
    """Median / min / max wall time in ms of fn() after warm-up calls. With budget_s, at least one warm-up
    call, and the timed runs are cut to what fits budget_s by the last warm-up call's time (never below
    min_runs)."""
    last = None
    for _ in range(max(warmup, 1 if budget_s else 0)):
        t0 = time.perf_counter()
        fn()
        last = time.perf_counter() - t0
    if budget_s and last:
        runs = max(min_runs, min(runs, int(budget_s / last)))
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "runs": runs}


def runs_within(a, estimate_ms):
    """(runs, warm-up) for an item estimated to take estimate_ms per run: --runs / --warmup, fewer runs (and
    one warm-up) where those would exceed --budget seconds; never fewer than --min-runs."""
    if not estimate_ms or a.budget <= 0:
        return a.runs, a.warmup
    fit = int(a.budget * 1e3 / estimate_ms)
    if fit >= a.runs:
        return a.runs, a.warmup
    return max(a.min_runs, fit), min(a.warmup, 1)


def level_env(a, level, threads, peer=False):
    """The environment of every process at ISA `level` with `threads` threads: infer's cap (INFER_CPU_ISA;
    harmless to the peers), OpenBLAS's core type (infer's OpenBLAS variants and PyTorch's BLAS), thread counts;
    for the peer worker also PEER_CAPS[level]."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), INFER_CPU_ISA=level, OPENBLAS_CORETYPE=OPENBLAS_CORETYPE[level])
    for k in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OV_CPU_MAX_ISA", "ATEN_CPU_CAPABILITY"):
        env.pop(k, None)  # only the level's caps, not the caller's
    if peer:
        env.update(PEER_CAPS[level])
    return env


def shown_env(level, threads, peer=False):
    e = {"INFER_CPU_ISA": level, "OPENBLAS_CORETYPE": OPENBLAS_CORETYPE[level], "OMP_NUM_THREADS": threads}
    if peer:
        e.update(PEER_CAPS[level])
    return e


def json_infer_bench(a, args, tag, env, show):
    path = os.path.join(a.tmp, tag + "_bench.json")
    i = args.index("model")
    run_cmd([a.bench] + args[:i] + ["--json", path] + args[i:], a.timeout, env, show)
    with open(path) as f:
        return json.load(f)


def reported_isa(obj):
    """An ISA the engine reports about itself (a key naming 'isa' in infer-bench's environment, or the
    profile's nodes), else None: builds before INFER_CPU_ISA existed report nothing."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if "isa" in k.lower() and isinstance(v, (str, int, float)):
                return str(v)
    return None


def infer_profile(a, fb, name, level, batch, threads):
    """`infer --profile --profile-json` at `level`: the 10 slowest nodes, the time by op, every node's time."""
    path = os.path.join(a.tmp, "%s_%s_b%d_t%d_profile.json" % (name, level, batch, threads))
    run_cmd([a.infer, "--model", fb, "--backend", "cpu", "--batch", str(batch), "--profile", "--runs",
             str(a.profile_runs), "--profile-json", path], a.timeout, level_env(a, level, threads),
            shown_env(level, threads))
    with open(path) as f:
        j = json.load(f)
    nodes = j.get("nodes", [])
    sum_ms = sum(n.get("time_ms", 0.0) for n in nodes)
    by_time = sorted(nodes, key=lambda n: -n.get("time_ms", 0.0))
    top = [{"name": n["name"], "op": n["op"], "variant": n.get("variant", ""), "time_ms": n["time_ms"],
            "percent": 100.0 * n["time_ms"] / sum_ms if sum_ms else None,
            "gflops": n.get("flops", 0) / (n["time_ms"] * 1e6) if n.get("time_ms") else None,
            "output_shape": n.get("output_shape"), "fused": n.get("fused", []), "isa": n.get("isa")}
           for n in by_time[:10]]
    by_op = {}
    for n in nodes:
        s = by_op.setdefault(n["op"], {"count": 0, "time_ms": 0.0, "flops": 0.0})
        s["count"] += 1
        s["time_ms"] += n.get("time_ms", 0.0)
        s["flops"] += n.get("flops", 0.0)
    node_isas = sorted({str(n["isa"]) for n in nodes if n.get("isa")})
    return {"isa": level, "batch": batch, "threads": threads, "total_ms": j.get("total_ms"), "sum_node_ms": sum_ms,
            "nodes": len(nodes), "passes": j.get("passes"), "top": top, "by_op": by_op,
            "node_ms": {n["name"]: n.get("time_ms", 0.0) for n in nodes},
            "node_op": {n["name"]: "%s %s" % (n["op"], n.get("variant", "")) for n in nodes},
            "reported_isa": ", ".join(node_isas) or reported_isa(j)}


# ---- CPU: the peer worker (a process of its own per model, level and thread count) ----

def openvino_primitives(compiled):
    """Histogram of the primitive types of the compiled model's nodes (e.g. brgconv_avx2_f32): what ISA the
    CPU plugin really runs."""
    hist = {}
    for op in compiled.get_runtime_model().get_ops():
        rt = op.get_rt_info()
        if "primitiveType" in rt:
            v = rt["primitiveType"]
            v = v.astype(str) if hasattr(v, "astype") else str(v)
            hist[v] = hist.get(v, 0) + 1
    return hist


def peer_worker(spec_path):
    """Times the peers of one model at one level and thread count, every batch; writes spec['out']."""
    spec = json.load(open(spec_path))
    out = {"rows": [], "errors": [], "versions": {}}
    errors = out["errors"]
    threads, peers = spec["threads"], spec["peers"]
    import numpy as np
    import torch
    from cpu_vs_pytorch import rel_err
    torch.set_num_threads(threads)
    net = None
    if "torch" in peers:
        try:
            net = make_arch(spec["model"])
            net.load_state_dict(torch.load(spec["state_dict"]))
            net.eval()
        except Exception as e:  # noqa: BLE001
            record_error(errors, "%s: PyTorch model" % spec["model"], e)
    ort = ov = None
    if "onnxruntime" in peers:
        try:
            import onnxruntime as ort
            out["versions"]["onnxruntime"] = ort.__version__
        except Exception as e:  # noqa: BLE001
            record_error(errors, "%s: import onnxruntime" % spec["model"], e)
    if "openvino" in peers:
        try:
            import openvino as ov
            out["versions"]["openvino"] = ov.get_version()
        except Exception as e:  # noqa: BLE001
            record_error(errors, "%s: import openvino" % spec["model"], e)
    budget, runs, warmup, min_runs = spec["budget"], spec["runs"], spec["warmup"], spec["min_runs"]
    name = spec["model"]
    for b in spec["batches"]:
        batch = b["batch"]
        x = np.load(b["input"]).astype(np.float32)
        y_ref = np.load(b["ref"])
        row = {"batch": batch, "peers": {}, "rel_err": {}}
        tag = "%s b%d t%d %s" % (name, batch, threads, spec["level"])
        if ort is not None:
            for kind, spin in (("onnxruntime", "1"), ("onnxruntime_nospin", "0")):
                try:
                    so = ort.SessionOptions()
                    so.intra_op_num_threads = threads
                    so.inter_op_num_threads = 1
                    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    so.add_session_config_entry("session.intra_op.allow_spinning", spin)
                    sess = ort.InferenceSession(spec["onnx"], so, providers=["CPUExecutionProvider"])
                    feed = {sess.get_inputs()[0].name: x}
                    row["rel_err"]["%s_vs_torch" % kind] = rel_err(sess.run(None, feed)[0], y_ref)
                    row["peers"][kind] = wall_times(lambda: sess.run(None, feed), runs, warmup, budget, min_runs)
                    del sess
                except Exception as e:  # noqa: BLE001
                    record_error(errors, "%s: ONNX Runtime (%s)" % (tag, kind), e)
        if ov is not None:
            try:
                core = ov.Core()
                model = core.read_model(spec["onnx"])
                model.reshape(list(x.shape))  # the static batch: what a latency deployment compiles
                config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32",
                          "INFERENCE_NUM_THREADS": threads}
                compiled = core.compile_model(model, "CPU", config)
                row["openvino_config"] = {k: str(compiled.get_property(k)) for k in config}
                row["openvino_primitives"] = openvino_primitives(compiled)
                req = compiled.create_infer_request()
                req.infer({0: x})
                row["rel_err"]["openvino_vs_torch"] = rel_err(req.get_output_tensor(0).data, y_ref)
                row["peers"]["openvino"] = wall_times(lambda: req.infer({0: x}), runs, warmup, budget, min_runs)
                del req, compiled
            except Exception as e:  # noqa: BLE001
                record_error(errors, "%s: OpenVINO" % tag, e)
        if net is not None:
            xt = torch.from_numpy(x)
            configs = {}
            with torch.no_grad():
                configs["eager"] = (net, xt)
                try:
                    net_cl = copy.deepcopy(net).to(memory_format=torch.channels_last)
                    configs["channels_last"] = (net_cl.eval(), xt.contiguous(memory_format=torch.channels_last))
                except Exception as e:  # noqa: BLE001
                    record_error(errors, "%s: PyTorch channels_last" % tag, e)
                try:
                    configs["jit_frozen"] = (torch.jit.freeze(torch.jit.trace(net, xt).eval()), xt)
                except Exception as e:  # noqa: BLE001
                    record_error(errors, "%s: PyTorch jit trace+freeze" % tag, e)
                try:
                    configs["jit_optimized"] = (torch.jit.optimize_for_inference(torch.jit.trace(net, xt).eval()), xt)
                except Exception as e:  # noqa: BLE001
                    record_error(errors, "%s: PyTorch jit optimize_for_inference" % tag, e)
                for kind in TORCH_CPU_KINDS:
                    if kind not in configs:
                        continue
                    m, inp = configs[kind]
                    try:
                        row["rel_err"]["torch_%s_vs_eager" % kind] = rel_err(m(inp).numpy(), y_ref)
                        row["peers"][kind] = wall_times(lambda: m(inp), runs, warmup, budget, min_runs)
                    except Exception as e:  # noqa: BLE001
                        record_error(errors, "%s: PyTorch %s" % (tag, kind), e)
            del configs
        out["rows"].append(row)
        log("   peers %s: %s" % (tag, ", ".join("%s %s ms" % (k, fmt_ms(ms(v))) for k, v in row["peers"].items())))
    with open(spec["out"], "w") as f:
        json.dump(out, f)


TORCH_PROBE = r"""
import os, sys, torch
torch.set_num_threads(1)
cap = [l.split(":", 1)[1].strip() for l in torch.__config__.show().splitlines() if "CPU capability usage" in l]
print("ATEN_CAPABILITY=" + (cap[0] if cap else "?"), flush=True)
with torch.no_grad():
    torch.nn.functional.conv2d(torch.rand(1, 64, 56, 56), torch.rand(64, 64, 3, 3), padding=1)  # a oneDNN one
sys.stdout.flush()
"""


def torch_isa_probe(a, level):
    """What PyTorch uses under the level's caps: ATen's capability (torch.__config__.show()) and its oneDNN's
    'isa:' line and implementation (ONEDNN_VERBOSE on one 3x3 convolution that PyTorch hands to oneDNN),
    from a process of its own."""
    env = level_env(a, level, 1, peer=True)
    env.update(ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    try:
        p = subprocess.run([sys.executable, "-c", TORCH_PROBE], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=300, env=env)
        cap = re.search(r"ATEN_CAPABILITY=(.*)", p.stdout)
        isa = re.search(r"isa:([^\n]*)", p.stdout)
        conv = re.search(r"exec,cpu,convolution,([^,]*),", p.stdout)
        return {"aten": cap.group(1).strip() if cap else None,
                "onednn": ("%s (a 3x3 convolution ran %s)" % (isa.group(1).strip(), conv.group(1)) if conv else
                           isa.group(1).strip()) if isa else None}
    except Exception as e:  # noqa: BLE001
        return {"aten": None, "onednn": None, "error": str(e)}


ISA_TOKENS = [("amx", 4), ("avx512", 3), ("avx2", 2), ("avx", 1), ("sse4", 0), ("sse41", 0), ("sse42", 0)]


def openvino_isa_summary(hists):
    """(the highest ISA among OpenVINO's primitive types, 'type x count' of the most frequent ones)."""
    total = {}
    for h in hists:
        for k, v in (h or {}).items():
            total[k] = total.get(k, 0) + v
    best, best_rank = None, -1
    for k in total:
        for tok in re.split(r"[_\W]+", k.lower()):
            for name, rank in ISA_TOKENS:
                if tok.startswith(name) and rank > best_rank:
                    best, best_rank = name, rank
                    break
    isa_types = sorted(((k, v) for k, v in total.items() if any(t in k.lower() for t, _ in ISA_TOKENS)),
                       key=lambda kv: -kv[1])
    return best, ", ".join("%s x%d" % kv for kv in isa_types[:6])


# ---- CPU: the sweep ----

def make_input(a, name, batch):
    import numpy as np
    shape = (batch,) + tuple(input_shape(name, a.size, a.gen_size))
    rng = np.random.default_rng(a.seed + batch)
    return (rng.uniform(0.01, 1.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def cpu_model(a, name, errors, peer_isa):
    """Every row of one model: each level x batch x threads; then the profiles of its misses."""
    import numpy as np
    import torch
    from cpu_vs_pytorch import rel_err
    rows = []
    try:
        net, onnx_path, fb, err = prepare(a, name)
    except Exception as e:  # noqa: BLE001
        record_error(errors, "%s: build / export" % name, e)
        return rows
    if err:
        log("   %s: onnx2fb failed: %s" % (name, err))
    sd_path = os.path.join(a.tmp, name + "_state.pt")
    torch.save(net.state_dict(), sd_path)
    io = {}  # batch -> {"input": path, "ref": path, "x": array}: one input per batch for every level

    def reference(batch, x):
        """PyTorch eager (uncapped, fp32, this process) on x: the reference every output is checked against."""
        d = io.get(batch)
        if d is not None and d["x"].shape == x.shape and np.array_equal(d["x"], x):
            return d
        ipath = os.path.join(a.tmp, "%s_b%d_input.npy" % (name, batch))
        rpath = os.path.join(a.tmp, "%s_b%d_ref.npy" % (name, batch))
        np.save(ipath, x)
        with torch.no_grad():
            np.save(rpath, net(torch.from_numpy(x)).numpy())
        io[batch] = {"input": ipath, "ref": rpath, "x": x}
        return io[batch]

    estimates = {}  # (batch, threads) -> infer's ms at an earlier level (for --budget)
    for level in a.isa_levels:
        for threads in a.threads_list:
            level_rows = {}
            for batch in a.batches:
                row = {"model": name, "isa": level, "batch": batch, "threads": threads, "precision": "fp32",
                       "infer": None, "peers": {}, "rel_err": {}, "onnx2fb_error": err}
                level_rows[batch] = row
                if not fb:
                    continue
                ddir = os.path.join(a.tmp, "%s_io" % name)
                shutil.rmtree(ddir, ignore_errors=True)
                est = estimates.get((batch, threads)) or (
                    estimates.get((1, threads), 0) * batch if (1, threads) in estimates else None)
                runs, warmup = runs_within(a, est)
                try:
                    j = json_infer_bench(a, ["--backend", "cpu", "--threads", str(threads), "--runs", str(runs),
                                             "--warmup", str(warmup), "--batch", str(batch), "model", fb, "--dump",
                                             ddir, "--default-only"], "%s_%s_b%d_t%d" % (name, level, batch, threads),
                                         level_env(a, level, threads), shown_env(level, threads))
                    default = j["results"][0]
                    row["infer"] = default["time"] if default.get("ran") else None
                    row["kernels"] = sorted({"%s=%s" % (n["op"], n["variant"]) for n in j.get("nodes", [])})
                    row["infer_reported_isa"] = reported_isa(j.get("environment")) or reported_isa(default)
                    row["infer_loadavg"] = (j.get("environment") or {}).get("loadavg")
                    if row["infer"]:
                        estimates.setdefault((batch, threads), row["infer"]["median_ms"])
                    x = np.load(os.path.join(ddir, "input_0.npy")).astype(np.float32)
                    d = reference(batch, x)
                    row["rel_err"]["infer_vs_torch"] = rel_err(np.load(os.path.join(ddir, "output_0.npy")),
                                                               np.load(d["ref"]))
                except Exception as e:  # noqa: BLE001
                    record_error(errors, "%s %s b%d t%d: infer-bench" % (name, level, batch, threads), e)
                shutil.rmtree(ddir, ignore_errors=True)
            # the peers of this level and thread count, in a process of their own (the caps are read at load)
            batches = []
            for batch in a.batches:
                d = io.get(batch) or reference(batch, make_input(a, name, batch))
                batches.append({"batch": batch, "input": d["input"], "ref": d["ref"]})
            spec = {"model": name, "level": level, "threads": threads, "onnx": onnx_path, "state_dict": sd_path,
                    "batches": batches, "peers": a.peers, "runs": a.runs, "warmup": a.warmup, "budget": a.budget,
                    "min_runs": a.min_runs, "out": os.path.join(a.tmp, "%s_%s_t%d_peers.json" % (name, level, threads))}
            spec_path = spec["out"][:-5] + "_spec.json"
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            try:
                run_cmd([sys.executable, os.path.abspath(__file__), "--peer-worker", spec_path], a.timeout * 4,
                        level_env(a, level, threads, peer=True), shown_env(level, threads, peer=True))
                res = json.load(open(spec["out"]))
                errors.extend(res["errors"])
                for pr in res["rows"]:
                    row = level_rows[pr["batch"]]
                    row["peers"].update(pr["peers"])
                    row["rel_err"].update(pr["rel_err"])
                    for k in ("openvino_primitives", "openvino_config"):
                        if k in pr:
                            row[k] = pr[k]
                peer_isa.setdefault("versions", {}).update(res.get("versions", {}))
            except Exception as e:  # noqa: BLE001
                record_error(errors, "%s %s t%d: peer worker" % (name, level, threads), e)
            for batch in a.batches:
                row = level_rows[batch]
                finalize_cpu_row(row)
                rows.append(row)
                log("   %s %s b%d t%d: infer %s ms, %s; vs faster of ORT/OV %s; rel err %s" % (
                    name, level, batch, threads, fmt_ms(ms(row["infer"])),
                    ", ".join("%s %s" % (k, fmt_ms(ms(v))) for k, v in row["peers"].items()),
                    fx(row["ratio_goal"]), row["rel_err"].get("infer_vs_torch")))
    if fb:
        profile_misses(a, name, fb, rows, errors)
    keep = (onnx_path, fb) if name == "resnet50" and not a.no_peak else ()  # part_cpu_peak reads them
    for p in (onnx_path, fb, sd_path):
        if p and os.path.exists(p) and not a.keep and p not in keep:
            os.remove(p)
    return rows


def goal_row(rows, name, level, all_cores):
    return next((r for r in rows if r["model"] == name and r["isa"] == level and r["batch"] == 1
                 and r["threads"] == all_cores), None)


def profile_misses(a, name, fb, rows, errors):
    """Profiles (at the row's level): every goal miss (batch 1, all cores, below the ratio), every row with
    --profile-all; and both levels where infer at avx2 is more than 1.6x its avx512 time."""
    all_cores = max(a.threads_list)
    for r in rows:
        if r["infer"] is None:
            continue
        target = GOAL_RATIO["generator" if is_generator(name) else "classifier"]
        miss = (r["batch"] == 1 and r["threads"] == all_cores and r["ratio_goal"] is not None
                and r["ratio_goal"] < target)
        if miss or a.profile_all:
            try:
                r["profile"] = infer_profile(a, fb, name, r["isa"], r["batch"], r["threads"])
                r["profile_reason"] = "goal miss" if miss else "--profile-all"
            except Exception as e:  # noqa: BLE001
                record_error(errors, "%s %s b%d t%d: infer --profile" % (name, r["isa"], r["batch"], r["threads"]), e)
    hi, lo = goal_row(rows, name, "avx512", all_cores), goal_row(rows, name, "avx2", all_cores)
    if hi and lo and ms(hi["infer"]) and ms(lo["infer"]) and ms(lo["infer"]) / ms(hi["infer"]) > AVX2_VS_AVX512:
        for r in (hi, lo):
            if not r.get("profile"):
                try:
                    r["profile"] = infer_profile(a, fb, name, r["isa"], 1, all_cores)
                    r["profile_reason"] = "avx2 vs avx512"
                except Exception as e:  # noqa: BLE001
                    record_error(errors, "%s %s: infer --profile" % (name, r["isa"]), e)


def part_cpu(a, results):
    """The CPU rows; after each model the results so far are checkpointed (write_partial)."""
    errors, peer_isa = results["errors"], results["peer_isa"]
    log("== CPU: levels %s, batches %s, threads %s" % (a.isa_levels, a.batches, a.threads_list))
    for level in a.isa_levels:
        peer_isa.setdefault("pytorch", {})[level] = torch_isa_probe(a, level)
        log("   PyTorch at %s: %s" % (level, peer_isa["pytorch"][level]))
    rows = []
    for name in a.models:
        rows += cpu_model(a, name, errors, peer_isa)
        a.partial = write_partial(a, dict(results, rows=rows, load_after=loadavg(),
                                          wall_s=time.time() - a.started))
    return rows


# ---- CPU: the FMA peak per level, and ResNet-50's layers against it ----

SGEMM_CODE = r"""
import sys, time
import numpy as np
n, reps = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(1)
a = rng.random((n, n), dtype=np.float32)
b = rng.random((n, n), dtype=np.float32)
a @ b
best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(reps))
print(2.0 * n ** 3 / best / 1e9)
"""
PEAK_GOAL = 0.60  # ResNet-50's 3x3 and 1x1 layers: achieved GFLOP/s >= 60% of the FMA peak at the level


def conv_kernels(onnx_path):
    """ONNX Conv node name -> 'KxK' (its kernel_shape), read from the exported file."""
    import onnx
    out = {}
    for n in onnx.load(onnx_path).graph.node:
        if n.op_type == "Conv":
            ks = next((list(at.ints) for at in n.attribute if at.name == "kernel_shape"), None)
            if ks:
                out[n.name] = "x".join(map(str, ks))
    return out


def part_cpu_peak(a, results, errors):
    """The fp32 peak at every level (infer-bench peak: a register-only FMA loop; and Debian numpy's OpenBLAS
    SGEMM, n = --sgemm-size, at the level's OPENBLAS_CORETYPE), 1 thread and all cores; then ResNet-50's 3x3
    and 1x1 convolutions (batch 1, all cores, infer's per-node profile at each level) in GFLOP/s and as a share
    of the higher of the two all-core peaks."""
    all_cores = max(a.threads_list)
    peak = {}
    try:
        path = os.path.join(a.tmp, "peak.json")
        run_cmd([a.bench, "peak", "--threads", str(all_cores), "--json", path], a.timeout)
        with open(path) as f:
            for lv in json.load(f)["levels"]:
                peak.setdefault(lv["isa"], {})["fma_loop"] = {1: lv["gflops_1_thread"],
                                                              all_cores: lv["gflops_all_threads"]}
    except Exception as e:  # noqa: BLE001
        record_error(errors, "infer-bench peak", e)
    for level in a.isa_levels:
        for threads in sorted({1, all_cores}):
            try:
                out = run_cmd(["/usr/bin/python3", "-c", SGEMM_CODE, str(a.sgemm_size), "5"], a.timeout,
                              level_env(a, level, threads), shown_env(level, threads))
                peak.setdefault(level, {}).setdefault("sgemm", {})[threads] = float(out.strip().splitlines()[-1])
            except Exception as e:  # noqa: BLE001
                record_error(errors, "SGEMM peak at %s, %d threads" % (level, threads), e)
    results["peak"] = peak
    results["layer_efficiency"] = {}
    if "resnet50" not in a.models:
        return
    onnx_path, fb = os.path.join(a.tmp, "resnet50.onnx"), os.path.join(a.tmp, "resnet50.fb")
    if not (os.path.exists(onnx_path) and os.path.exists(fb)):
        return
    kernels = conv_kernels(onnx_path)
    for level in a.isa_levels:
        try:
            path = os.path.join(a.tmp, "resnet50_%s_peak_profile.json" % level)
            run_cmd([a.infer, "--model", fb, "--backend", "cpu", "--profile", "--runs", str(a.profile_runs),
                     "--profile-json", path], a.timeout, level_env(a, level, all_cores), shown_env(level, all_cores))
            with open(path) as f:
                nodes = json.load(f).get("nodes", [])
        except Exception as e:  # noqa: BLE001
            record_error(errors, "ResNet-50 profile at %s" % level, e)
            continue
        groups = {}
        for n in nodes:
            k = kernels.get(n["name"]) if n["op"] == "conv2d" else None
            if k in ("3x3", "1x1"):
                g = groups.setdefault(k, {"nodes": 0, "flops": 0.0, "time_ms": 0.0, "variants": {}})
                g["nodes"] += 1
                g["flops"] += n.get("flops", 0.0)
                g["time_ms"] += n.get("time_ms", 0.0)
                g["variants"][n.get("variant", "?")] = g["variants"].get(n.get("variant", "?"), 0) + 1
        lv = peak.get(level, {})
        ref = max([v.get(all_cores) or 0 for v in (lv.get("fma_loop", {}), lv.get("sgemm", {}))] or [0])
        for g in groups.values():
            g["gflops"] = g["flops"] / (g["time_ms"] * 1e6) if g["time_ms"] else None
            g["peak_gflops"] = ref or None
            g["share_of_peak"] = g["gflops"] / ref if g["gflops"] and ref else None
        results["layer_efficiency"][level] = groups


def peak_lines(results):
    peak, eff, cores = results.get("peak") or {}, results.get("layer_efficiency") or {}, results["all_cores"]
    if not peak:
        return []
    out = ["## The machine's fp32 peak, and ResNet-50's layers against it", "",
           "`infer-bench peak` (a register-only FMA loop compiled per level) and an OpenBLAS SGEMM (Debian numpy, "
           "n = %s, OPENBLAS_CORETYPE of the level), GFLOP/s, best of its repeats; ResNet-50 batch 1, %d threads: "
           "the 3x3 and 1x1 convolutions' summed FLOPs (direct-convolution count, the same for every variant) over "
           "their summed node times from infer's profile, as a share of the higher all-core peak." % (
               results.get("sgemm_size", "?"), cores), "",
           "| level | FMA loop, 1 thread | FMA loop, %d threads | SGEMM, 1 thread | SGEMM, %d threads | "
           "ResNet-50 3x3 | ResNet-50 1x1 |" % (cores, cores), "|---|---|---|---|---|---|---|"]
    for level in results["isa_levels"]:
        p = peak.get(level, {})
        cell = lambda d, t: "%.1f" % d[t] if d and d.get(t) else "n/a"  # noqa: E731

        def group(k):
            g = (eff.get(level) or {}).get(k)
            if not g or not g.get("gflops"):
                return "n/a"
            return "%.1f GFLOP/s, %s of peak (%d nodes: %s)" % (
                g["gflops"], "%.0f%%" % (100 * g["share_of_peak"]) if g.get("share_of_peak") else "?", g["nodes"],
                ", ".join("%s %d" % kv for kv in sorted(g["variants"].items())))
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            level, cell(p.get("fma_loop"), 1), cell(p.get("fma_loop"), cores), cell(p.get("sgemm"), 1),
            cell(p.get("sgemm"), cores), group("3x3"), group("1x1")))
    return out + [""]


# ---- GPU (gpu_vs_pytorch.py's helpers and per-model loop) ----

def part_gpu(a, errors):
    import gpu_vs_pytorch as g
    # the namespace gpu_vs_pytorch's helpers read
    a.zoo = None
    a.variants = False
    a.model_batches = a.batches
    log("== GPU: batches %s, precisions %s" % (a.batches, a.precisions))
    rows = []
    for name in a.models:
        try:
            net, onnx_path, fb, err = prepare(a, name)
        except Exception as e:  # noqa: BLE001
            record_error(errors, "%s: build / export" % name, e)
            continue
        if err:
            log("   %s: onnx2fb failed: %s" % (name, err))
            for precision in a.precisions:
                for batch in a.batches:
                    rows.append({"model": name, "batch": batch, "precision": precision, "infer": None,
                                 "peers": {}, "rel_err": {}, "onnx2fb_error": err})
                    finalize_row(rows[-1], "gpu")
            continue
        gerrors = []
        for r in g.model_rows(a, gerrors, name, fb, net, input_shape(name, a.size, a.gen_size)):
            t = r.get("torch") or {}
            row = {"model": name, "batch": r["batch"], "precision": r["precision"], "infer": r["infer"],
                   "infer_no_passes": r.get("infer_no_passes"), "kernels": r.get("kernels"),
                   "peers": {k: t[k] for k in g.TORCH_KINDS if k in t},
                   "peer_errors": {k: v for k, v in t.items() if k.endswith("_error")},
                   "peer_skipped": {k: v for k, v in t.items() if k.endswith("_skipped")},
                   "peer_tracebacks": {k: v for k, v in t.items() if k.endswith("_traceback")},
                   "compile_rel_err_vs": r.get("compile_rel_err_vs"),
                   "rel_err": {k: r[k] for k in ("rel_err", "rel_err_cl", "rel_err_vs_fp32") if r.get(k) is not None},
                   "onnx2fb_error": None, "runs": r.get("runs"), "infer_bench": r.get("infer_bench")}
            best_kind, _ = g.torch_best(t)
            row["torch_best_kind"] = best_kind
            finalize_row(row, "gpu")
            rows.append(row)
        errors.extend({k: e[k] for k in ("item", "error", "traceback")} for e in gerrors)
        del net
        g.free_cuda()
        for p in (onnx_path, fb):
            if p and os.path.exists(p) and not a.keep:  # --keep: the files stay for a later run
                os.remove(p)
        a.partial = gpu_checkpoint(a, rows, errors)
    return rows


def gpu_checkpoint(a, rows, errors):
    """part_gpu's rows so far as a partial results JSON (write_partial). Returns its path."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return write_partial(a, {
        "device": "gpu", "date": now.strftime("%Y-%m-%d %H:%M UTC"), "size": a.size, "gen_size": a.gen_size,
        "command": " ".join(shlex.quote(c) for c in [sys.executable] + sys.argv),
        "models": a.models, "precisions": a.precisions, "batches": a.batches, "runs": a.runs,
        "warmup": a.warmup, "large_runs": a.large_runs, "large_warmup": a.large_warmup,
        "load_before": "n/a", "load_after": "n/a", "environment": getattr(a, "gpu_environment", {}),
        "rows": rows, "errors": errors})


def write_partial(a, results):
    """results (the rows so far) as <out>/byom-<cpu|gpu>-<date>[-tag]-partial.json, marked incomplete: a results
    JSON that --merge reads, so a run cut off (e.g. by a time limit) keeps the models it finished; main removes
    it once the report is written. Returns its path (None where it could not be written)."""
    try:
        path = os.path.join(a.out, "byom-%s-%s%s-partial.json" % (results["device"], results["date"][:10],
                                                                ("-" + a.tag) if a.tag else ""))
        os.makedirs(a.out, exist_ok=True)
        with open(path, "w") as f:
            json.dump(dict(results, incomplete=True), f, indent=1, default=float)
        return path
    except Exception as e:  # noqa: BLE001  (a checkpoint never stops the run)
        log("   note: checkpoint not written: %s: %s" % (type(e).__name__, e))
        return None


# ---- rows, goals, report (no torch needed from here on) ----

def ms(t):
    return t["median_ms"] if t else None


def fmt_ms(v):
    return "%.3f" % v if v is not None else "n/a"


def short(text, n=240):
    """One error line for a table cell (the JSON keeps it whole)."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + " ..."


def fx(v):
    return "%.2fx" % v if v is not None else "n/a"


def name_of(m):
    return MODEL_NAMES.get(m, m)


def check_error(row):
    """(relative error used, tolerance): fp32 infer vs PyTorch fp32; tf32 / fp16 infer vs strict fp32."""
    e = row["rel_err"]
    if row["precision"] == "fp32":
        v = e.get("infer_vs_torch", e.get("rel_err"))
    else:
        v = e.get("rel_err_vs_fp32")
    return v, TOLERANCE[row["precision"]]


def finalize_row(row, device):
    """GPU rows: the best peer, the ratio (peer ms / infer ms: > 1 means infer is faster) and the check."""
    if device == "cpu":
        return finalize_cpu_row(row)
    peers = {k: ms(v) for k, v in row["peers"].items() if ms(v)}
    best = min(peers, key=peers.get) if peers else None
    row["best_peer"] = best
    row["best_peer_ms"] = peers.get(best) if best else None
    inf = ms(row["infer"])
    row["ratio_best"] = row["best_peer_ms"] / inf if inf and best else None
    row["goal_peer"] = "PyTorch best"
    row["ratio_goal"] = row["ratio_best"]
    v, tol = check_error(row)
    row["check"] = {"rel_err": v, "tolerance": tol, "ok": None if v is None else bool(v <= tol)}


def peer_ok(row, kind):
    v = row["rel_err"].get("%s_vs_torch" % kind)
    return v is None or v <= PEER_TOLERANCE


def finalize_cpu_row(row):
    """CPU rows: PyTorch best, the goal's peer (the faster of ONNX Runtime, spinning or not, and OpenVINO,
    among those whose output agrees with PyTorch within PEER_TOLERANCE), ratios peer ms / infer ms (> 1:
    infer is faster) and the check."""
    p = {k: ms(v) for k, v in row["peers"].items() if ms(v)}
    tk = [k for k in TORCH_CPU_KINDS if k in p]
    row["torch_best_kind"] = min(tk, key=p.get) if tk else None
    row["torch_best_ms"] = p[row["torch_best_kind"]] if tk else None
    goal = {k: p[k] for k in GOAL_PEERS if k in p and peer_ok(row, k)}
    row["excluded_peers"] = [k for k in GOAL_PEERS if k in p and not peer_ok(row, k)]
    row["goal_peer"] = min(goal, key=goal.get) if goal else None
    row["goal_peer_ms"] = goal[row["goal_peer"]] if goal else None
    inf = ms(row["infer"])
    row["ratio_goal"] = row["goal_peer_ms"] / inf if inf and goal else None
    row["ratio_torch"] = row["torch_best_ms"] / inf if inf and tk else None
    v, tol = check_error(row)
    row["check"] = {"rel_err": v, "tolerance": tol, "ok": None if v is None else bool(v <= tol)}


def peer_capped(level, kind):
    """Whether `kind` (a peer key) runs capped at `level`: ONNX Runtime never (MLAS reads CPUID itself)."""
    if level == "avx512":
        return True  # nothing to cap: every runtime may use all it finds
    return not kind.startswith("onnxruntime")


def compute_goals(results):
    if results["device"] == "cpu":
        return compute_goals_cpu(results)
    rows, goals = results["rows"], []
    for precision in results["precisions"]:
        got = {r["model"]: r for r in rows if r["batch"] == 1 and r["precision"] == precision}
        ratios = {m: got[m]["ratio_goal"] if m in got else None for m in GPU_MODELS}
        measured = [m for m in GPU_MODELS if ratios[m] is not None]
        missing = [m for m in GPU_MODELS if ratios[m] is None]
        low = [m for m in measured if ratios[m] < 1.0]
        status = "met" if not missing and not low else ("missed" if low or len(missing) < len(GPU_MODELS)
                                                        else "not measured")
        goals.append({"goal": "GPU batch 1 %s: infer >= 1.0x PyTorch best on all four" % precision,
                      "status": status, "detail": detail(ratios, got, GPU_MODELS)})
    goals += gpu_goals_31(results)
    goals.append(correctness_goal(rows, "correctness: infer vs PyTorch within 1e-3 (fp32) / 2e-2 (tf32, fp16) relative"))
    return goals


def gpu_goals_31(results):
    """Issue 31 on the four models: batch 1 and 64, fp32 and fp16, infer >= 1.0x PyTorch best now including
    torch.compile (MobileNetV2 and EfficientNet-B0 at batch 64 fp16 >= 1.2x). Met only where every model was
    measured with torch.compile max-autotune among PyTorch's configurations; missed where any is below."""
    rows, goals = results["rows"], []
    for batch in (1, 64):
        for precision in ("fp32", "fp16"):
            if batch not in results["batches"] or precision not in results["precisions"]:
                continue
            special = GPU_GOAL31_TARGETS.get((batch, precision), {})
            got = {r["model"]: r for r in rows if r["batch"] == batch and r["precision"] == precision}
            ratios = {m: got[m]["ratio_goal"] if m in got else None for m in GPU_MODELS}
            low = [m for m in GPU_MODELS if ratios[m] is not None and ratios[m] < special.get(m, 1.0)]
            no_compile = [m for m in GPU_MODELS if ratios[m] is not None
                          and not got[m]["peers"].get("compile_max_autotune")]
            missing = [m for m in GPU_MODELS if ratios[m] is None]
            status = "missed" if low else ("not measured" if missing or no_compile else "met")
            parts = []
            for m in GPU_MODELS:
                if ratios[m] is not None:
                    parts.append("%s %s (%s)" % (name_of(m), fx(ratios[m]), got[m].get("best_peer") or "n/a"))
                else:
                    parts.append(detail(ratios, got, [m]))
            text = ", ".join(parts)
            if no_compile:
                text += "; without a torch.compile max-autotune time (PyTorch best may be slower than it): %s" % (
                    ", ".join(name_of(m) for m in no_compile))
            goals.append({"goal": "issue 31: GPU batch %d %s: infer >= %s PyTorch best with torch.compile" % (
                batch, precision, "1.0x" + "".join(", %s >= %.1fx" % (name_of(m), v) for m, v in special.items())),
                "status": status, "detail": text})
    return goals


def correctness_goal(rows, text, level=None):
    checked = [r for r in rows if r["check"]["ok"] is not None]
    bad = [r for r in checked if not r["check"]["ok"]]
    return {"goal": text, "level": level,
            "status": "met" if checked and not bad else ("missed" if bad else "not measured"),
            "detail": "%d rows checked, %d outside" % (len(checked), len(bad)) +
            "".join("; %s b%d %s%s: %.1e" % (name_of(r["model"]), r["batch"], r["precision"],
                                             " t%d" % r["threads"] if "threads" in r else "", r["check"]["rel_err"])
                    for r in bad)}


def status_of(values, target):
    """met / missed / not measured for 'every value >= target' (None: not measured)."""
    measured = [v for v in values.values() if v is not None]
    if measured and len(measured) == len(values) and all(v >= target for v in measured):
        return "met"
    return "missed" if measured else "not measured"


def compute_goals_cpu(results):
    rows, goals = results["rows"], []
    models, all_cores = results["models"], results["all_cores"]
    levels = results["isa_levels"]
    for level in levels:
        got = {m: goal_row(rows, m, level, all_cores) for m in models}
        lower_bound = [m for m in models if got[m] and got[m].get("goal_peer") and
                       not peer_capped(level, got[m]["goal_peer"])]
        note = ("; lower bounds (the faster peer, ONNX Runtime, ran uncapped): %s" %
                ", ".join(name_of(m) for m in lower_bound)) if lower_bound else ""
        if lower_bound:  # the like-for-like comparison too: against the capped peer alone
            capped = {m: (ms(got[m]["peers"].get("openvino")) / ms(got[m]["infer"])
                          if got[m] and ms(got[m]["infer"]) and ms(got[m]["peers"].get("openvino"))
                          and peer_ok(got[m], "openvino") else None) for m in models}
            note += "; against the capped OpenVINO alone: %s" % detail(capped, got, models)
        ratios = {m: got[m]["ratio_goal"] if got[m] else None for m in models}
        goals.append({"goal": "[%s] batch 1, %d threads: every model >= 1.0x the faster of ONNX Runtime and OpenVINO"
                      % (level, all_cores), "level": level, "status": status_of(ratios, 1.0),
                      "detail": detail(ratios, got, models) + note})
        gens = [m for m in models if is_generator(m)]
        if gens:
            g = {m: ratios[m] for m in gens}
            goals.append({"goal": "[%s] batch 1, %d threads: generators >= %.1fx the faster of ONNX Runtime and "
                          "OpenVINO" % (level, all_cores, GOAL_RATIO["generator"]), "level": level,
                          "status": status_of(g, GOAL_RATIO["generator"]), "detail": detail(g, got, gens)})
        if level == "avx2" and "avx512" in levels:
            slow = {}
            for m in models:
                hi, lo = goal_row(rows, m, "avx512", all_cores), got[m]
                slow[m] = (ms(lo["infer"]) / ms(hi["infer"])) if hi and lo and ms(hi["infer"]) and ms(lo["infer"]) \
                    else None
            inv = {m: (1.0 / v if v else None) for m, v in slow.items()}  # >= 1/1.6 <=> avx2 within 1.6x
            goals.append({"goal": "[avx2] batch 1, %d threads: infer at avx2 within %.1fx of infer at avx512 on "
                          "every model" % (all_cores, AVX2_VS_AVX512), "level": level,
                          "status": status_of(inv, 1.0 / AVX2_VS_AVX512),
                          "detail": ", ".join("%s %s" % (name_of(m), "%.2fx slower" % slow[m] if slow[m] else
                                                         "not measured") for m in models)})
        eff = (results.get("layer_efficiency") or {}).get(level)
        if eff:
            shares = {k: (eff.get(k) or {}).get("share_of_peak") for k in ("3x3", "1x1")}
            goals.append({"goal": "[%s] ResNet-50's 3x3 and 1x1 layers (batch 1, %d threads) >= %.0f%% of the FMA "
                          "peak at the level" % (level, all_cores, 100 * PEAK_GOAL), "level": level,
                          "status": "met" if all(v is not None and v >= PEAK_GOAL for v in shares.values())
                          else "missed" if any(v is not None for v in shares.values()) else "not measured",
                          "detail": ", ".join("%s %s" % (k, "%.0f%%" % (100 * v) if v is not None else "n/a")
                                              for k, v in shares.items())})
        goals.append(correctness_goal([r for r in rows if r["isa"] == level],
                                      "[%s] correctness: infer vs PyTorch within 1e-3 relative (every batch and "
                                      "thread count)" % level, level))
    return goals


def detail(ratios, got, models):
    parts = []
    for m in models:
        if ratios.get(m) is not None:
            parts.append("%s %s" % (name_of(m), fx(ratios[m])))
        elif got.get(m) and got[m].get("onnx2fb_error"):
            parts.append("%s does not import" % name_of(m))
        else:
            parts.append("%s not measured" % name_of(m))
    return ", ".join(parts)


def goals_table(goals):
    out = ["| goal | status | detail |", "|---|---|---|"]
    for g in goals:
        out.append("| %s | **%s** | %s |" % (g["goal"], g["status"], g["detail"]))
    return out


def markdown(results):
    return markdown_cpu(results) if results["device"] == "cpu" else markdown_gpu(results)


def markdown_gpu(results):
    env = results["environment"]
    out = ["# Bring your own model: infer vs peers on the GPU (%s)" % results["date"], ""]
    out.append("Issue 14, must 5. torchvision models with seeded random weights (BatchNorm with gathered, "
               "perturbed running statistics), exported to ONNX (TorchScript exporter, opset %d, dynamic batch), "
               "converted by `onnx2fb`, input %dx%d. Written by `bench/byom_vs_peers.py`%s." % (
                   OPSET, results["size"], results["size"],
                   " from synthetic numbers (--selftest)" if results.get("synthetic") else ""))
    out.append("")
    out.append("- command: `%s`" % results["command"])
    if results.get("incomplete"):
        out.append("- **incomplete**: the checkpoint of a run that did not finish (the models done so far)")
    for k in ("device_name", "cpu", "cpus", "torch", "torchvision", "onnx", "numpy", "python", "host"):
        if env.get(k) is not None:
            out.append("- %s: %s" % (k, env[k]))
    out.append("- load average before: %s; after: %s" % (results.get("load_before"), results.get("load_after")))
    out.append("- runs: %s timed after %s warm-up (median); batch >= 32: %s after %s" % (
        results["runs"], results["warmup"], results.get("large_runs"), results.get("large_warmup")))
    out.append("- timing: infer: infer-bench (CUDA events around CUDA-graph replays, no host copies); peers: "
               "CUDA events per call / per graph replay")
    out += ["", "## Goals", ""] + goals_table(results["goals"])
    peer_kinds = GPU_PEER_KINDS
    out += ["", "## Times (ms, median)", ""]
    head = ["model", "batch", "precision", "infer"] + [PEER_NAMES[k] for k in peer_kinds] + \
        ["best peer", "vs PyTorch best", "compile s", "rel err (tol)", "check"]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    import_errors = []
    for r in results["rows"]:
        name = name_of(r["model"])
        if r.get("onnx2fb_error"):
            import_errors.append((name, r["onnx2fb_error"]))
        c = r["check"]
        cells = [name, str(r["batch"]), r["precision"],
                 "does not import (below)" if r.get("onnx2fb_error") else fmt_ms(ms(r["infer"]))]
        cells += [peer_cell(r, k) for k in peer_kinds]
        cells += [PEER_NAMES.get(r["best_peer"], "n/a") if r["best_peer"] else "n/a", fx(r["ratio_goal"]),
                  " / ".join("%.1f" % r["peers"][k]["compile_s"] if r["peers"].get(k, {}).get("compile_s") is not None
                             else "-" for k in GPU_COMPILE_KINDS)]
        cells += ["%.1e (%.0e)" % (c["rel_err"], c["tolerance"]) if c["rel_err"] is not None else "n/a",
                  {True: "ok", False: "**FAIL**", None: "n/a"}[c["ok"]]]
        out.append("| " + " | ".join(cells) + " |")
    out += import_error_lines(import_errors)
    out += ["", "Ratios are peer time / infer time: above 1.0x infer is faster. PyTorch best is the fastest of "
            "eager, CUDA graph, channels_last + CUDA graph and the torch.compile configurations measured "
            "(max-autotune and reduce-overhead of the channels_last module on a channels_last input: `skipped` where "
            "the model's compile budget for that mode was spent or would be overrun, `failed` below, `-` not run; `compile s`: the wall time of each "
            "one's first call, max-autotune / reduce-overhead); fp32 is strict (TF32 off on both sides), tf32 allows "
            "TF32 on both, fp16 is half on both (infer: SessionOptions::precision FP16 on the fp32 .fb); tf32/fp16 "
            "errors are against strict-fp32 PyTorch."]
    out += gpu_compile_section(results)
    out += errors_section(results)
    return "\n".join(out) + "\n"


def peer_cell(row, kind):
    """A GPU peer's median ms, or why there is none: skipped / failed / - (not run)."""
    if row["peers"].get(kind):
        return fmt_ms(ms(row["peers"][kind]))
    if kind + "_error" in (row.get("peer_errors") or {}):
        return "failed"
    return "skipped" if kind + "_skipped" in (row.get("peer_skipped") or {}) else "-" if kind in GPU_COMPILE_KINDS \
        else "n/a"


def gpu_compile_section(results):
    """torch.compile on the GPU (gpu_vs_pytorch.py's time_compiled): the settings and one line per row and mode
    (median, compile and settling seconds, FX-graph cache, CUDA-graph skips, rel err, or why it did not run);
    then the PyTorch configurations that failed."""
    info = results["environment"].get("torch_compile") or {}
    lines, failed = [], []
    for r in results["rows"]:
        for k, mode in GPU_COMPILE_KINDS.items():
            p, err, skip = r["peers"].get(k), (r.get("peer_errors") or {}).get(k + "_error"), \
                (r.get("peer_skipped") or {}).get(k + "_skipped")
            head = "| %s | %d | %s | %s |" % (name_of(r["model"]), r["batch"], r["precision"], mode)
            if p:
                cnt = p.get("counters") or {}
                cache = ", ".join("%s %d" % (label, cnt[key]) for key, label in (
                    ("fxgraph_cache_hit", "hit"), ("fxgraph_cache_miss", "miss"), ("fxgraph_cache_bypass", "bypass"))
                    if cnt.get(key)) or "-"
                vs = r.get("compile_rel_err_vs") or "infer"
                lines.append(head + " %s | %.1f | %.1f | %s | %s | %s | %s |" % (
                    fmt_ms(ms(p)), p.get("compile_s") or 0.0, p.get("settle_s") or 0.0, cache,
                    cnt.get("cudagraph_skips", 0), "%.1e" % p["rel_err"] if p.get("rel_err") is not None else "n/a",
                    "" if vs == "infer" else "rel err vs %s" % vs))
            elif err or skip:
                lines.append(head + " %s | | | | | | %s |" % ("failed" if err else "skipped",
                                                             short(err or skip).replace("|", "/").replace("`", "'")))
        for k, v in sorted((r.get("peer_errors") or {}).items()):
            failed.append("- %s b%d %s, %s: `%s`" % (name_of(r["model"]), r["batch"], r["precision"],
                                                     PEER_NAMES.get(k[:-len("_error")], k), short(v).replace("`", "'")))
    out = []
    if lines or info.get("modes"):
        out += ["", "## torch.compile", ""]
        out.append("`torch.compile(module, mode=M, dynamic=False)` of the channels_last module (fp16: `.half()` first) on "
                   "a channels_last input under `torch.no_grad()`, compiled afresh per (model, precision, batch, mode) "
                   "after `torch._dynamo.reset()` and the CUDA-graph trees' reset (gpu_vs_pytorch.py's "
                   "`time_compiled`); `compile s`: the first call's wall time (Dynamo, Inductor, Triton, "
                   "autotuning), `settle s`: the next %d calls (CUDA-graph warm-up and recording); then timed as "
                   "called with CUDA events. Modes: %s; compile budget per model and mode: %s; Triton %s; Inductor caches "
                   "under `%s`, one folder per precision (FX-graph cache `hit`: compiled by an earlier run, not a "
                   "cold compile time).%s" % (
                       (info.get("calls") or 3) - 1, ", ".join(info.get("modes") or []) or "none",
                       "%g s (--compile-timeout-s)" % info["timeout_s"] if info.get("timeout_s") else "none",
                       info.get("triton", "n/a"), info.get("cache_base", "n/a"),
                       " Setup: `%s`." % info["setup_error"] if info.get("setup_error") else ""))
    if lines:
        out += ["", "| model | batch | precision | mode | median ms | compile s | settle s | FX-graph cache | "
                "CUDA-graph skips | rel err | note |", "|---|---|---|---|---|---|---|---|---|---|---|"] + lines
    if failed:
        out += ["", "PyTorch configurations that failed (tracebacks in the JSON):", ""] + failed
    return out


def import_error_lines(import_errors):
    out, seen = [], set()
    for name, err in import_errors:
        if name not in seen:
            seen.add(name)
            out.append("\n%s does not import: `%s`" % (name, short(err).replace("`", "'")))
    return out


def errors_section(results):
    if not results["errors"]:
        return []
    out = ["", "## Items that failed", ""]
    for e in results["errors"]:
        out.append("- %s: `%s`" % (e["item"], e["error"].replace("\n", " ").replace("`", "'")[:400]))
    return out


def peer_isa_lines(results, level):
    """What each runtime was asked for and what it actually used at `level`."""
    pi = results.get("peer_isa", {})
    flags = results["environment"].get("cpu_flags_isa", [])
    rows = [r for r in results["rows"] if r["isa"] == level]
    inf_rep = sorted({r.get("infer_reported_isa") for r in rows if r.get("infer_reported_isa")})
    prof_rep = sorted({r["profile"]["reported_isa"] for r in rows if r.get("profile") and
                       r["profile"].get("reported_isa")})
    rep = ", ".join(inf_rep + [p for p in prof_rep if p not in inf_rep])
    above = [lvl for lvl in ISA_LEVELS if ISA_RANK[lvl] > ISA_RANK[level] and lvl in rep.lower()]
    out = ["- infer: `INFER_CPU_ISA=%s`, `OPENBLAS_CORETYPE=%s` (its OpenBLAS variants); %s%s" % (
        level, OPENBLAS_CORETYPE[level],
        "the engine reports: %s" % rep if rep else "this build reports no ISA of its own (the cap was passed; "
        "a binary that predates INFER_CPU_ISA ignores it and dispatches to what the CPU has)",
        " — **above the cap: INFER_CPU_ISA was not honoured**" if above else "")]
    ort = mlas_isa(flags) if flags else "what CPUID reports"
    out.append("- ONNX Runtime: **uncapped**, %s: MLAS picks its kernels from CPUID/XGETBV in MLAS_PLATFORM's "
               "constructor and has no environment variable or session option that lowers them%s" % (
                   ort, "" if level == "avx512" else "; so every ratio against ONNX Runtime at this level is a "
                   "conservative lower bound for infer (marked >=)"))
    hist = [r.get("openvino_primitives") for r in rows if r.get("openvino_primitives")]
    best, types = openvino_isa_summary(hist)
    caps = PEER_CAPS[level]
    if hist:
        ovused = "highest ISA among its primitives: %s (%s)" % (best or "none named", types or "n/a")
        over = best and level != "avx512" and (
            (level == "avx2" and best in ("avx512", "amx")) or (level == "baseline" and best not in ("sse4", "sse41", "sse42")))
        if over:
            ovused += " — **above the cap: not fully capped**"
    else:
        ovused = "not measured"
    out.append("- OpenVINO: %s; %s" % (
        "capped: `ONEDNN_MAX_CPU_ISA=%s`, `OV_CPU_MAX_ISA=%s`" % (caps["ONEDNN_MAX_CPU_ISA"], caps["OV_CPU_MAX_ISA"])
        if caps else "uncapped", ovused))
    tp = (pi.get("pytorch") or {}).get(level) or {}
    out.append("- PyTorch: %s; ATen capability: %s, its oneDNN: %s" % (
        "capped: `ATEN_CPU_CAPABILITY=%s`, `ONEDNN_MAX_CPU_ISA=%s`, `OPENBLAS_CORETYPE=%s`" % (
            caps["ATEN_CPU_CAPABILITY"], caps["ONEDNN_MAX_CPU_ISA"], OPENBLAS_CORETYPE[level]) if caps else
        "uncapped (`OPENBLAS_CORETYPE=%s`)" % OPENBLAS_CORETYPE[level], tp.get("aten") or "?", tp.get("onednn") or "?"))
    return out


def ratio_cell(row):
    r = row.get("ratio_goal")
    if r is None:
        return "n/a"
    lb = row.get("goal_peer") and not peer_capped(row["isa"], row["goal_peer"])
    return "%s%.2fx (%s)" % (">=" if lb else "", r, PEER_NAMES.get(row["goal_peer"], row["goal_peer"]))


def markdown_cpu(results):
    env = results["environment"]
    out = ["# Bring your own model: infer vs ONNX Runtime, OpenVINO and PyTorch on the CPU (%s)" % results["date"], ""]
    out.append("Issue 27, must 5. torchvision classifiers at %dx%d, the DCGAN and EB-GAN generators (latent "
               "100x1x1), the CycleGAN resnet_9blocks and pix2pix unet_256 generators at %dx%d; seeded random "
               "weights (BatchNorm with gathered, perturbed running statistics), exported to ONNX (TorchScript "
               "exporter, opset %d, dynamic batch) and converted by `onnx2fb`; every runtime gets the same `.onnx` "
               "(infer its `.fb`), the same input and weights. Written by `bench/byom_vs_peers.py`%s." % (
                   results["size"], results["size"], results.get("gen_size", 256), results.get("gen_size", 256), OPSET,
                   " from synthetic numbers (--selftest)" if results.get("synthetic") else ""))
    out.append("")
    out.append("- command: `%s`" % results["command"])
    if results.get("incomplete"):
        out.append("- **incomplete**: the checkpoint of a run that did not finish (the models done so far)")
    out.append("- CPU: %s, %s logical CPUs; ISA flags: %s" % (env.get("cpu"), env.get("cpus"),
                                                           " ".join(env.get("cpu_flags_isa", [])) or "?"))
    out.append("- ISA levels: %s (this CPU has: %s)" % (", ".join(results["isa_levels"]),
                                                       ", ".join(env.get("levels_supported", [])) or "?"))
    out.append("- batches: %s; threads: %s (all cores: %s); OMP_WAIT_POLICY: %s" % (
        ", ".join(map(str, results["batches"])), ", ".join(map(str, results["threads_list"])),
        results["all_cores"], env.get("OMP_WAIT_POLICY")))
    for k in ("torch", "torchvision", "onnxruntime", "openvino", "onnx", "numpy", "python", "host"):
        if env.get(k) is not None:
            out.append("- %s: %s" % (k, env[k]))
    out.append("- load average before: %s; after: %s" % (results.get("load_before"), results.get("load_after")))
    out.append("- runs: %s timed after %s warm-up (median); fewer (at least %s, one warm-up) where they would take "
               "more than %s s (each row's runs are in the JSON)" % (
                   results["runs"], results["warmup"], results.get("min_runs"), results.get("budget")))
    out.append("- timing: infer: infer-bench (steady_clock around Session::run, copy-in/out included); peers: "
               "perf_counter around each call (ONNX Runtime `run`, OpenVINO `InferRequest.infer`, PyTorch forward)")
    out.append("- ONNX Runtime: CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads T, inter-op 1, "
               "sequential; `ONNX Runtime` spins its pool (`session.intra_op.allow_spinning` 1, its default), "
               "`ORT no-spin` does not (0). OpenVINO: CPU, PERFORMANCE_HINT LATENCY, INFERENCE_PRECISION_HINT f32, "
               "INFERENCE_NUM_THREADS T, static batch. PyTorch best: the fastest of eager, channels_last, "
               "jit trace+freeze and optimize_for_inference.")
    out += ["", "## Goals", ""]
    by_level = {}
    for g in results["goals"]:
        by_level.setdefault(g.get("level"), []).append(g)
    for level in results["isa_levels"]:
        out += ["### %s" % level, ""] + goals_table(by_level.get(level, [])) + [""]
        out += ["What each runtime used at %s:" % level, ""] + peer_isa_lines(results, level) + [""]
    out += peak_lines(results)
    out += ["## Times (ms, median)", "",
            "Ratios are the faster of ONNX Runtime (either) and OpenVINO over infer: above 1.0x infer is faster; "
            "`>=` marks a ratio against a peer that ran uncapped above the level (a lower bound); a peer whose "
            "output is more than %.0e from PyTorch's is left out of it (`!`). rel err: infer vs PyTorch eager." %
            PEER_TOLERANCE, ""]
    import_errors = []
    head = ["model", "infer", "ONNX Runtime", "ORT no-spin", "OpenVINO", "PyTorch best",
            "infer vs faster of ORT/OV", "rel err (tol)", "check"]
    for level in results["isa_levels"]:
        for batch in results["batches"]:
            for threads in results["threads_list"]:
                rows = [r for r in results["rows"] if r["isa"] == level and r["batch"] == batch
                        and r["threads"] == threads]
                if not rows:
                    continue
                out += ["### %s, batch %d, %d thread%s" % (level, batch, threads, "s" if threads > 1 else ""), "",
                        "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                for r in rows:
                    if r.get("onnx2fb_error"):
                        import_errors.append((name_of(r["model"]), r["onnx2fb_error"]))
                    c = r["check"]

                    def peer(k):
                        v = fmt_ms(ms(r["peers"].get(k)))
                        return v + ("!" if k in r.get("excluded_peers", []) else "")
                    cells = [name_of(r["model"]),
                             "does not import" if r.get("onnx2fb_error") else fmt_ms(ms(r["infer"])),
                             peer("onnxruntime"), peer("onnxruntime_nospin"), peer("openvino"),
                             "%s (%s)" % (fmt_ms(r["torch_best_ms"]), r["torch_best_kind"]) if r.get("torch_best_kind")
                             else "n/a", ratio_cell(r),
                             "%.1e (%.0e)" % (c["rel_err"], c["tolerance"]) if c["rel_err"] is not None else "n/a",
                             {True: "ok", False: "**FAIL**", None: "n/a"}[c["ok"]]]
                    out.append("| " + " | ".join(cells) + " |")
                out.append("")
    out += import_error_lines(import_errors)
    others = [(r, k, v) for r in results["rows"] for k, v in sorted(r.get("rel_err", {}).items())
              if k not in ("infer_vs_torch", "torch_eager_vs_eager") and v is not None and v > TOLERANCE["fp32"]]
    out += ["", "Peer cross-checks: every peer output within %.0e of PyTorch eager%s" % (
        TOLERANCE["fp32"], "" if not others else ", except: " + "; ".join(
            "%s %s b%d t%d %s %.1e" % (name_of(r["model"]), r["isa"], r["batch"], r["threads"], k, v)
            for r, k, v in others))]
    out += profile_sections(results)
    out += errors_section(results)
    return "\n".join(out) + "\n"


def profile_table(p):
    out = ["%d nodes, sum of node medians %.3f ms. By op: %s" % (
        p["nodes"], p["sum_node_ms"], ", ".join(
            "%s %d x %.2f ms (%.0f GFLOP/s)" % (op, s["count"], s["time_ms"],
                                               s["flops"] / (s["time_ms"] * 1e6) if s["time_ms"] else 0)
            for op, s in sorted(p["by_op"].items(), key=lambda kv: -kv[1]["time_ms"]))), "",
        "| node | op | variant | output | ms | % | GFLOP/s |", "|---|---|---|---|---|---|---|"]
    for n in p["top"]:
        out.append("| %s | %s | %s | %s | %.3f | %.1f | %s |" % (
            n["name"], n["op"], n["variant"], "x".join(str(d) for d in n.get("output_shape") or []),
            n["time_ms"], n["percent"] or 0, "%.1f" % n["gflops"] if n["gflops"] is not None else "n/a"))
    return out + [""]


def profile_sections(results):
    rows = results["rows"]
    prof = [r for r in rows if r.get("profile") and r.get("profile_reason") != "avx2 vs avx512"]
    out = []
    if prof:
        out += ["", "## Per-node profile of the misses (infer --profile at the row's level, top 10 by time)", ""]
        for r in prof:
            out += ["### %s, %s, batch %d, %d threads (infer %s ms vs %s %s ms: %s; %s)" % (
                name_of(r["model"]), r["isa"], r["batch"], r["threads"], fmt_ms(ms(r["infer"])),
                PEER_NAMES.get(r.get("goal_peer"), "n/a"), fmt_ms(r.get("goal_peer_ms")), fx(r["ratio_goal"]),
                r.get("profile_reason")), ""] + profile_table(r["profile"])
    pairs = []
    for m in results["models"]:
        hi = goal_row(rows, m, "avx512", results["all_cores"])
        lo = goal_row(rows, m, "avx2", results["all_cores"])
        if hi and lo and hi.get("profile") and lo.get("profile") and ms(hi["infer"]) and ms(lo["infer"]) and \
                ms(lo["infer"]) / ms(hi["infer"]) > AVX2_VS_AVX512:
            pairs.append((m, hi, lo))
    if pairs:
        out += ["", "## Per-node profile of the avx2-vs-avx512 misses (batch 1, all cores; top 10 by avx2 time)", ""]
        for m, hi, lo in pairs:
            ph, pl = hi["profile"], lo["profile"]
            out += ["### %s: avx2 %s ms vs avx512 %s ms (%.2fx)" % (
                name_of(m), fmt_ms(ms(lo["infer"])), fmt_ms(ms(hi["infer"])), ms(lo["infer"]) / ms(hi["infer"])), "",
                "| node | op variant (avx2) | avx2 ms | avx512 ms | avx2 / avx512 |", "|---|---|---|---|---|"]
            for name in sorted(pl["node_ms"], key=lambda n: -pl["node_ms"][n])[:10]:
                a2, a5 = pl["node_ms"][name], ph["node_ms"].get(name)
                out.append("| %s | %s | %.3f | %s | %s |" % (name, pl["node_op"].get(name, ""), a2, fmt_ms(a5),
                                                            "%.2fx" % (a2 / a5) if a5 else "n/a"))
            out += ["", "avx2 profile by op: " + profile_table(pl)[0], "", "avx512 profile by op: " +
                    profile_table(ph)[0], ""]
    return out


def write_report(results, stem):
    results["goals"] = compute_goals(results)
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1)
    text = markdown(results)
    with open(stem + ".md", "w") as f:
        f.write(text)
    log("wrote %s.{md,json}" % stem)
    return text


def update_docs(a, results, stem):
    """--update-docs: the docs' current CPU table from this run (GPU runs: gpu_vs_pytorch.py's)."""
    if a.update_docs and results.get("device") == "cpu":
        import current_tables
        current_tables.update(a.update_docs, "cpu", stem + ".json")
        log("updated the current:cpu table of %s" % a.update_docs)


def environment(a):
    env = {"cpu": cpu_name(), "cpus": os.cpu_count(), "python": platform.python_version(), "host": platform.node(),
           "python_executable": sys.executable}
    if a.device == "cpu":
        flags = cpu_flags()
        env["cpu_flags"] = " ".join(flags)
        env["cpu_flags_isa"] = [f for f in flags if re.match(r"(avx|fma|amx|sse|f16c|bmi)", f)]
        env["levels_supported"] = supported_levels(flags)
        env["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", "(unset)")
    for mod in ("torch", "torchvision", "onnxruntime", "onnx", "numpy"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            env[mod] = None
    if a.device == "cpu":
        try:
            import openvino
            env["openvino"] = openvino.get_version()
        except Exception:  # noqa: BLE001
            env["openvino"] = None
    if a.device == "cuda":
        import torch
        import gpu_vs_pytorch as g
        env["device_name"] = torch.cuda.get_device_name(0)
        env["torch_cuda"] = torch.version.cuda
        env["torch_compile"] = g.compile_setup(a)  # and Dynamo's limits raised for the compiles
        a.gpu_environment = env  # for the checkpoints of part_gpu
    return env


def record_error(errors, item, e):
    text = "%s: %s" % (type(e).__name__, e)
    log("   FAILED %s: %s" % (item, text))
    errors.append({"item": item, "error": text, "traceback": traceback.format_exc()})


def row_key(row):
    return tuple(row.get(k) for k in ("model", "isa", "batch", "threads", "precision"))


def merge_results(paths):
    """One results dict from several of this script's JSONs (one device); a row (model, ISA level, batch,
    threads, precision) of a later file replaces an earlier one; models in the order of CPU_MODELS."""
    runs = [json.load(open(p)) for p in paths]
    devices = {r["device"] for r in runs}
    if len(devices) != 1:
        sys.exit("error: --merge needs results of one device, got %s" % sorted(devices))
    merged = dict(runs[-1])
    rows = {}
    for r in runs:
        for row in r["rows"]:
            rows[row_key(row)] = row
    order = {m: i for i, m in enumerate(CPU_MODELS)}
    lorder = {lvl: i for i, lvl in enumerate(ISA_LEVELS)}
    keys = sorted(rows, key=lambda k: (order.get(k[0], 99), lorder.get(k[1], 9), k[4], k[2], k[3] or 0))
    merged["rows"] = [rows[k] for k in keys]
    merged["models"] = [m for m in CPU_MODELS if any(k[0] == m for k in rows)]
    merged["precisions"] = sorted({k[4] for k in rows}, key=lambda p: list(TOLERANCE).index(p))
    merged["batches"] = sorted({k[2] for k in rows})
    if merged["device"] == "cpu":
        merged["isa_levels"] = [lvl for lvl in ISA_LEVELS if any(k[1] == lvl for k in rows)]
        merged["threads_list"] = sorted({k[3] for k in rows})
        merged["all_cores"] = max(r.get("all_cores", 0) for r in runs)
        pi = {}
        for r in runs:
            for k, v in r.get("peer_isa", {}).items():
                pi.setdefault(k, {}).update(v)
        merged["peer_isa"] = pi
    merged["errors"] = [e for r in runs for e in r["errors"]]
    merged["command"] = "; ".join(r["command"] for r in runs) + "; merged by: " + " ".join(
        shlex.quote(c) for c in [sys.executable] + sys.argv)
    merged["load_before"] = runs[0]["load_before"]
    merged["merged_from"] = [{"file": p, "date": r["date"], "command": r["command"]} for p, r in zip(paths, runs)]
    return merged


# ---- selftest ----

def synthetic_cpu():
    def t(v):
        return {"median_ms": v, "min_ms": v * 0.95, "max_ms": v * 1.1, "runs": 20}
    # infer ms at avx512 / ORT / ORT no-spin / OpenVINO / torch eager (None: onnx2fb refuses the model)
    spec = {"resnet18": (10.0, 11.0, 12.0, 10.5, 20.0), "resnet50": (30.0, 28.0, 29.0, 31.0, 50.0),
            "mobilenet_v2": None, "mobilenet_v3_small": (2.0, 2.5, 2.6, 2.2, 6.0),
            "efficientnet_b0": (6.0, 7.0, 7.5, 6.5, 12.0), "shufflenet_v2_x1_0": (3.0, 3.5, 3.6, 3.1, 8.0),
            "squeezenet1_1": (2.0, 2.4, 2.5, 2.2, 4.0), "dcgan": (4.0, 6.0, 6.5, 5.5, 9.0),
            "ebgan": (40.0, 45.0, 47.0, 44.0, 90.0), "cyclegan_resnet": (200.0, 300.0, 310.0, 280.0, 500.0),
            "pix2pix_unet": (60.0, 90.0, 95.0, 85.0, 150.0)}
    slow_avx2 = {"resnet50": 1.8}  # infer's avx2 time over its avx512 time (default 1.3)
    rows = []
    for m in CPU_MODELS:
        for level in ("avx512", "avx2"):
            for batch in (1, 8):
                for threads in (1, 2):
                    r = {"model": m, "isa": level, "batch": batch, "threads": threads, "precision": "fp32",
                         "infer": None, "peers": {}, "rel_err": {}, "onnx2fb_error": None}
                    if spec[m] is None:
                        r["onnx2fb_error"] = "onnx2fb exited with 2: error: unsupported op HardSwish"
                        r["peers"] = {"onnxruntime": t(5.0), "openvino": t(4.0)}
                    else:
                        inf, o, on, ov, e = spec[m]
                        f = (slow_avx2.get(m, 1.3) if level == "avx2" else 1.0) * batch * (2.0 if threads == 1 else 1.0)
                        pf = (1.2 if level == "avx2" else 1.0) * batch * (2.0 if threads == 1 else 1.0)
                        r["infer"] = t(inf * f)
                        r["peers"] = {"onnxruntime": t(o * batch * (2.0 if threads == 1 else 1.0)),
                                      "onnxruntime_nospin": t(on * batch * (2.0 if threads == 1 else 1.0)),
                                      "openvino": t(ov * pf), "eager": t(e * pf), "jit_frozen": t(e * pf * 0.9)}
                        r["rel_err"] = {"infer_vs_torch": 2e-6, "onnxruntime_vs_torch": 1e-6,
                                        "onnxruntime_nospin_vs_torch": 1e-6, "openvino_vs_torch": 3e-6}
                        r["openvino_primitives"] = {"brgconv_%s_f32" % level: 10, "jit_%s_f32" % level: 2,
                                                    "unknown_f32": 5}
                        r["infer_reported_isa"] = level
                    finalize_cpu_row(r)
                    rows.append(r)
    prof = {"isa": "x", "batch": 1, "threads": 2, "total_ms": 10.0, "sum_node_ms": 9.8, "nodes": 3, "passes": [],
            "by_op": {"conv2d": {"count": 2, "time_ms": 9.0, "flops": 1e9}}, "reported_isa": None,
            "node_ms": {"conv0": 3.0, "conv1": 3.0, "conv2": 3.0},
            "node_op": {"conv%d" % i: "conv2d im2col_gemm" for i in range(3)},
            "top": [{"name": "conv%d" % i, "op": "conv2d", "variant": "im2col_gemm", "time_ms": 3.0, "percent": 30.0,
                     "gflops": 12.0, "output_shape": [1, 64, 56, 56], "fused": [], "isa": None} for i in range(3)]}
    for r in rows:
        if r["batch"] == 1 and r["threads"] == 2 and r["infer"]:
            target = GOAL_RATIO["generator" if is_generator(r["model"]) else "classifier"]
            if r["ratio_goal"] < target or r["model"] == "resnet50":
                r["profile"] = dict(prof, isa=r["isa"])
                r["profile_reason"] = "goal miss" if r["ratio_goal"] < target else "avx2 vs avx512"
    return {"device": "cpu", "date": "2000-01-01 00:00 UTC", "synthetic": True, "size": 224, "gen_size": 256,
            "command": "bench/byom_vs_peers.py --selftest", "models": list(CPU_MODELS), "precisions": ["fp32"],
            "batches": [1, 8], "threads_list": [1, 2], "all_cores": 2, "isa_levels": ["avx512", "avx2"],
            "runs": 20, "warmup": 3, "min_runs": 3, "budget": 20, "load_before": "0.00 0.00 0.00",
            "load_after": "0.00 0.00 0.00",
            "environment": {"cpu": "synthetic", "cpus": 2, "cpu_flags_isa": ["avx2", "fma", "avx512f", "avx512bw",
                                                                          "avx512vl", "avx512dq"],
                            "levels_supported": ["avx512", "avx2", "baseline"], "OMP_WAIT_POLICY": "PASSIVE"},
            "peer_isa": {"pytorch": {"avx512": {"aten": "AVX2", "onednn": "Intel AVX-512"},
                                     "avx2": {"aten": "AVX2", "onednn": "Intel AVX2"}}},
            "rows": rows, "errors": [{"item": "mobilenet_v2: onnx2fb", "error": "synthetic", "traceback": ""}]}


def synthetic_gpu():
    def t(v):
        return {"median_ms": v, "min_ms": v * 0.95, "max_ms": v * 1.1, "runs": 20}
    rows = []
    for m in GPU_MODELS:
        for precision in ("fp32", "tf32", "fp16"):
            for batch in (1, 64):
                if m == "efficientnet_b0":
                    r = {"model": m, "batch": batch, "precision": precision, "infer": None, "peers": {},
                         "rel_err": {}, "onnx2fb_error": "onnx2fb exited with 2: error: unsupported op Mul"}
                else:
                    base = 1.0 * batch ** 0.7
                    r = {"model": m, "batch": batch, "precision": precision, "infer": t(base),
                         "peers": {"eager": t(base * 2), "graph": t(base * 1.1),
                                   "channels_last_graph": t(base * (0.9 if m == "resnet50" else 1.2))},
                         "rel_err": {"rel_err": 1e-6, "rel_err_vs_fp32": 5e-3 if precision != "fp32" else None},
                         "onnx2fb_error": None, "peer_errors": {}, "peer_skipped": {}, "compile_rel_err_vs": "infer"}
                    r["rel_err"] = {k: v for k, v in r["rel_err"].items() if v is not None}
                    # torch.compile: slower than the CUDA graph on ResNet-18, max-autotune skipped on ResNet-50 at
                    # batch 64 fp16 (budget), the best on MobileNetV2 (whose reduce-overhead fails at batch 1 fp32)
                    ma = {"resnet18": 1.15, "resnet50": 1.0, "mobilenet_v2": 0.95}[m]
                    ro = {"resnet18": 1.3, "resnet50": 1.2, "mobilenet_v2": 1.05}[m]
                    if m == "resnet50" and batch == 64 and precision == "fp16":
                        r["peer_skipped"]["compile_max_autotune_skipped"] = \
                            "max-autotune budget of this model spent (--compile-timeout-s 90: 95 s)"
                    else:
                        r["peers"]["compile_max_autotune"] = dict(t(base * ma), mode="max-autotune", compile_s=61.5,
                                                                  settle_s=0.4, rel_err=2e-6,
                                                                  counters={"fxgraph_cache_miss": 1})
                    if m == "mobilenet_v2" and batch == 1 and precision == "fp32":
                        r["peer_errors"]["compile_reduce_overhead_error"] = \
                            "BackendCompilerFailed: synthetic | failure (after 4 s)"
                    else:
                        r["peers"]["compile_reduce_overhead"] = dict(t(base * ro), mode="reduce-overhead",
                                                                     compile_s=9.5, settle_s=0.3, rel_err=2e-6,
                                                                     counters={"fxgraph_cache_hit": 1})
                finalize_row(r, "gpu")
                rows.append(r)
    return {"device": "gpu", "date": "2000-01-01 00:00 UTC", "synthetic": True, "size": 224,
            "command": "bench/byom_vs_peers.py --selftest", "models": GPU_MODELS,
            "precisions": ["fp32", "tf32", "fp16"], "batches": [1, 64], "runs": 20, "warmup": 3, "large_runs": 10,
            "large_warmup": 3, "load_before": "0.00 0.00 0.00", "load_after": "0.00 0.00 0.00",
            "environment": {"cpu": "synthetic", "cpus": 2, "device_name": "synthetic GPU",
                            "torch_compile": {"modes": ["max-autotune", "reduce-overhead"], "timeout_s": 90.0,
                                              "calls": 3, "cache_base": "/tmp/torchinductor_synthetic",
                                              "triton": "3.5.0"}},
            "rows": rows, "errors": [{"item": "efficientnet_b0: onnx2fb", "error": "synthetic", "traceback": ""}]}


def selftest():
    with tempfile.TemporaryDirectory(prefix="byom-selftest-") as tmp:
        cpu = synthetic_cpu()
        text = write_report(cpu, os.path.join(tmp, "byom-cpu"))
        every = [x for x in cpu["goals"] if "every model >= 1.0x" in x["goal"]]
        assert [x["level"] for x in every] == ["avx512", "avx2"], every
        # avx512: resnet50 28/30 = 0.93x and MobileNetV2 does not import -> missed
        assert every[0]["status"] == "missed" and "ResNet-50 0.93x" in every[0]["detail"], every[0]
        assert "MobileNetV2 does not import" in every[0]["detail"], every[0]
        gens = [x for x in cpu["goals"] if "generators >=" in x["goal"]]
        # avx512: DCGAN 5.5/4 = 1.38x, EB-GAN 44/40 = 1.10x -> missed; CycleGAN 1.40x, pix2pix 1.42x
        assert gens[0]["status"] == "missed" and "EB-GAN generator 1.10x" in gens[0]["detail"], gens[0]
        assert "DCGAN generator 1.38x" in gens[0]["detail"], gens[0]
        isa = [x for x in cpu["goals"] if "within 1.6x" in x["goal"]]
        assert len(isa) == 1 and isa[0]["status"] == "missed" and "ResNet-50 1.80x slower" in isa[0]["detail"], isa
        assert "ResNet-18 1.30x slower" in isa[0]["detail"], isa
        corr = [x for x in cpu["goals"] if "correctness" in x["goal"]]
        assert len(corr) == 2 and all(x["status"] == "met" for x in corr), corr
        # at avx2 ONNX Runtime is uncapped: where it is the faster peer the ratio is a lower bound
        avx2_r18 = [r for r in cpu["rows"] if r["model"] == "resnet18" and r["isa"] == "avx2" and r["batch"] == 1
                    and r["threads"] == 2][0]
        assert avx2_r18["goal_peer"] == "onnxruntime" and ratio_cell(avx2_r18).startswith(">="), avx2_r18
        assert "lower bounds" in every[1]["detail"], every[1]
        # resnet18 at avx2: OpenVINO 10.5 * 1.2 = 12.6 ms over infer 10 * 1.3 = 13 ms
        assert "against the capped OpenVINO alone: ResNet-18 0.97x" in every[1]["detail"], every[1]
        assert "against the capped" not in every[0]["detail"], every[0]
        for needle in ("### avx512, batch 1, 2 threads", "### avx2, batch 8, 1 thread", "| model | infer | ONNX Runtime | "
                       "ORT no-spin | OpenVINO | PyTorch best | infer vs faster of ORT/OV |",
                       "unsupported op HardSwish", "ONNX Runtime: **uncapped**", "`ONEDNN_MAX_CPU_ISA=AVX2`",
                       "highest ISA among its primitives: avx2", "highest ISA among its primitives: avx512",
                       "Per-node profile of the misses", "avx2-vs-avx512 misses", "### ResNet-50: avx2",
                       "the engine reports: avx2"):
            assert needle in text, needle
        json.load(open(os.path.join(tmp, "byom-cpu.json")))
        # a wrong peer output is not the goal's peer; a wrong infer output fails the check
        bad = synthetic_cpu()
        r0 = [r for r in bad["rows"] if r["model"] == "resnet18" and r["isa"] == "avx512" and r["batch"] == 1
              and r["threads"] == 2][0]
        r0["rel_err"]["openvino_vs_torch"] = 0.5
        r0["rel_err"]["infer_vs_torch"] = 5e-3
        r0["peers"]["openvino"]["median_ms"] = 1.0
        finalize_cpu_row(r0)
        assert r0["goal_peer"] == "onnxruntime" and r0["excluded_peers"] == ["openvino"], r0
        text = write_report(bad, os.path.join(tmp, "byom-bad"))
        assert "**FAIL**" in text and "1.000!" in text and "openvino_vs_torch 5.0e-01" in text
        assert [x for x in bad["goals"] if "correctness" in x["goal"]][0]["status"] == "missed"
        # --merge: the avx512 and avx2 halves give the whole
        h1, h2 = synthetic_cpu(), synthetic_cpu()
        h1["rows"] = [r for r in h1["rows"] if r["isa"] == "avx512"]
        h2["rows"] = [r for r in h2["rows"] if r["isa"] == "avx2"]
        for i, h in enumerate((h2, h1)):
            json.dump(h, open(os.path.join(tmp, "c%d.json" % i), "w"))
        m = merge_results([os.path.join(tmp, "c0.json"), os.path.join(tmp, "c1.json")])
        assert m["isa_levels"] == ["avx512", "avx2"] and len(m["rows"]) == len(cpu["rows"]), m["isa_levels"]
        m["goals"] = compute_goals(m)
        assert [x["detail"] for x in m["goals"]] == [x["detail"] for x in cpu["goals"]]
        # a CPU run cut off after ResNet-18: its checkpoint merges with the rest into the whole table
        cut = synthetic_cpu()
        rest = [r for r in cut["rows"] if r["model"] != "resnet18"]
        cut["rows"] = [r for r in cut["rows"] if r["model"] == "resnet18"]
        path = write_partial(argparse.Namespace(out=tmp, tag="cpucut"), cut)
        assert path and path.endswith("-cpucut-partial.json") and "byom-cpu-" in path, path
        assert "**incomplete**" in write_report(merge_results([path]), os.path.join(tmp, "byom-cpu-cut"))
        json.dump(dict(synthetic_cpu(), rows=rest), open(os.path.join(tmp, "rest.json"), "w"))
        m = merge_results([path, os.path.join(tmp, "rest.json")])
        assert len(m["rows"]) == len(cpu["rows"]) and not m.get("incomplete"), len(m["rows"])
        # the GPU report as before
        gpu = synthetic_gpu()
        text = write_report(gpu, os.path.join(tmp, "byom-gpu"))
        gg = [x for x in gpu["goals"] if x["goal"].startswith("GPU batch 1")]
        assert len(gg) == 3 and all(x["status"] == "missed" for x in gg), gg
        assert "ResNet-50 0.90x" in gg[0]["detail"] and "ResNet-18 1.10x" in gg[0]["detail"], gg[0]
        assert "EfficientNet-B0 does not import" in gg[0]["detail"]
        assert "unsupported op Mul" in text and "PyTorch channels_last + CUDA graph" in text
        # torch.compile (issue 31): columns, the best peer, compile seconds, the section, the failure, the goals
        for needle in ("| PyTorch compile max-autotune | PyTorch compile reduce-overhead | best peer | "
                       "vs PyTorch best | compile s |", "| 17.460 | 19.298 | PyTorch compile max-autotune | 0.95x | 61.5 / 9.5 |",
                       "| ResNet-50 | 64 | fp16 |", "| 16.541 | skipped | 22.055 |", "| 0.950 | failed | PyTorch compile max-autotune | 0.95x | 61.5 / - |",
                       "## torch.compile", "| MobileNetV2 | 1 | fp32 | reduce-overhead | failed | | | | | | "
                       "BackendCompilerFailed: synthetic / failure (after 4 s) |",
                       "| ResNet-18 | 1 | fp32 | max-autotune | 1.150 | 61.5 | 0.4 | miss 1 | 0 | 2.0e-06 |",
                       "| reduce-overhead | 1.300 | 9.5 | 0.3 | hit 1 |", "compile budget per model and mode: 90 s",
                       "- MobileNetV2 b1 fp32, PyTorch compile reduce-overhead: `BackendCompilerFailed"):
            assert needle in text, needle
        mnv2 = [r for r in gpu["rows"] if r["model"] == "mobilenet_v2" and r["batch"] == 64][0]
        assert mnv2["best_peer"] == "compile_max_autotune" and abs(mnv2["ratio_goal"] - 0.95) < 1e-9, mnv2
        g31 = [x for x in gpu["goals"] if x["goal"].startswith("issue 31:")]
        assert len(g31) == 4 and all(x["status"] == "missed" for x in g31), g31
        assert "MobileNetV2 >= 1.2x, EfficientNet-B0 >= 1.2x" in g31[3]["goal"], g31[3]
        assert "without a torch.compile max-autotune time (PyTorch best may be slower than it): ResNet-50" \
            in g31[3]["detail"] and "MobileNetV2 0.95x (compile_max_autotune)" in g31[3]["detail"], g31[3]
        # the checkpoint of a run cut off is a results JSON --merge reads
        ns = argparse.Namespace(out=tmp, tag="cut", size=224, gen_size=256, models=GPU_MODELS, precisions=["fp32"],
                                batches=[1, 64], runs=20, warmup=3, large_runs=10, large_warmup=3)
        path = gpu_checkpoint(ns, [r for r in gpu["rows"] if r["model"] == "resnet18"], [])
        assert path and path.endswith("-cut-partial.json"), path
        cut = write_report(merge_results([path]), os.path.join(tmp, "byom-gpu-cut"))
        assert "| ResNet-18 | 64 | fp16 | 18.379 |" in cut and "**incomplete**" in cut, cut
        # met only with max-autotune everywhere: EfficientNet-B0 as a copy of ResNet-18, infer 10x faster
        fast = synthetic_gpu()
        fast["rows"] = [r for r in fast["rows"] if r["model"] != "efficientnet_b0"]
        fast["rows"] += [dict(json.loads(json.dumps(r)), model="efficientnet_b0") for r in fast["rows"]
                         if r["model"] == "resnet18"]
        for r in fast["rows"]:
            r["infer"]["median_ms"] /= 10
            finalize_row(r, "gpu")
        st = {x["goal"].split(":")[1].strip(): x["status"] for x in gpu_goals_31(fast)}
        assert st == {"GPU batch 1 fp32": "met", "GPU batch 1 fp16": "met", "GPU batch 64 fp32": "met",
                      "GPU batch 64 fp16": "not measured"}, st
        half1, half2 = synthetic_gpu(), synthetic_gpu()
        half1["rows"] = [r for r in half1["rows"] if r["model"] in GPU_MODELS[:2]]
        half2["rows"] = [r for r in half2["rows"] if r["model"] not in GPU_MODELS[:2]]
        for i, h in enumerate((half2, half1)):
            json.dump(h, open(os.path.join(tmp, "h%d.json" % i), "w"))
        m = merge_results([os.path.join(tmp, "h0.json"), os.path.join(tmp, "h1.json")])
        assert [r["model"] for r in m["rows"]][::6] == GPU_MODELS, [r["model"] for r in m["rows"]]
        m["goals"] = compute_goals(m)
        assert m["goals"][0]["detail"] == gg[0]["detail"], (m["goals"][0], gg[0])
        # the ISA helpers
        assert supported_levels(["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"]) == ISA_LEVELS
        assert supported_levels(["avx2", "fma", "avx512f"]) == ["avx2", "baseline"]
        assert supported_levels(["avx2"]) == ["baseline"]
        cpu["rows"][0]["infer_reported_isa"] = "avx512"  # resnet18 at avx512 ...
        avx2 = [r for r in cpu["rows"] if r["isa"] == "avx2"]
        assert "not honoured" not in "\n".join(peer_isa_lines(cpu, "avx2"))
        avx2[0]["infer_reported_isa"] = "avx512"  # ... fine; at avx2 it is flagged
        assert "INFER_CPU_ISA was not honoured" in "\n".join(peer_isa_lines(cpu, "avx2"))
        assert openvino_isa_summary([{"brgconv_avx2_f32": 3, "jit_sse42_f32": 1}])[0] == "avx2"
        assert openvino_isa_summary([{"jit_avx512_f32": 1, "brgconv_avx2_f32": 3}])[0] == "avx512"
    print("selftest passed: cpu (per ISA level) and gpu reports from synthetic numbers, goals and checks as expected")


# ---- main ----

def parse_list(text, kind=str):
    return [kind(x) for x in text.split(",") if x.strip()]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], help="which part to run (required unless --selftest)")
    p.add_argument("--build", default="build", help="build folder with onnx2fb, infer-bench and infer")
    p.add_argument("--models", default=None, help="comma-separated subset of %s (cpu default: all; cuda default: %s)"
                   % (",".join(CPU_MODELS), ",".join(GPU_MODELS)))
    p.add_argument("--batches", default=None, help="cpu: default 1,8 (--quick: 1); cuda: default 1,64")
    p.add_argument("--precisions", default=None, help="cuda: default fp32,tf32,fp16 (cpu: fp32 only)")
    p.add_argument("--size", type=int, default=224, help="classifiers: input height = width")
    p.add_argument("--gen-size", type=int, default=256, help="CycleGAN and pix2pix generators: input height = width")
    p.add_argument("--threads-list", default=None, help="cpu: thread counts (default 1,<cores>; --quick: <cores>)")
    p.add_argument("--threads", type=int, default=None, help="cpu: one thread count (same as --threads-list T)")
    p.add_argument("--isa-levels", default=None, help="cpu: comma-separated subset of avx512,avx2,baseline "
                   "(default: every level this CPU has)")
    p.add_argument("--peers", default="onnxruntime,openvino,torch", help="cpu: which peers run")
    p.add_argument("--runs", type=int, default=None, help="timed runs (default cpu 30, cuda 50; --quick 3)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up runs (default cpu 5, cuda 10; --quick 1)")
    p.add_argument("--budget", type=float, default=None, help="cpu: seconds one runtime may spend on one row's timed "
                   "runs; fewer runs where --runs would take longer (default 20; --quick 5; 0: no limit)")
    p.add_argument("--min-runs", type=int, default=3, help="cpu: timed runs at least, whatever --budget says")
    p.add_argument("--quick", action="store_true", help="cpu: a short sweep: 3 runs after 1 warm-up, budget 5 s, "
                   "batch 1, all cores only, every level and model (explicit options win)")
    p.add_argument("--large-runs", type=int, default=20, help="cuda, batch >= 32: timed runs")
    p.add_argument("--large-warmup", type=int, default=5, help="cuda, batch >= 32: warm-up runs")
    p.add_argument("--omp-wait-policy", choices=["passive", "active", "unset"], default="passive",
                   help="cpu: OMP_WAIT_POLICY of every process (infer-bench, infer, the peers; default passive: on a "
                   "loaded 2-core machine spinning OpenMP threads cost infer up to 10x, docs/kernels.md); unset: "
                   "leave the environment's")
    p.add_argument("--profile-runs", type=int, default=10, help="cpu: runs of infer --profile for a miss")
    p.add_argument("--sgemm-size", type=int, default=2048, help="cpu: n of the n x n OpenBLAS SGEMM peak")
    p.add_argument("--no-peak", action="store_true", help="cpu: skip the peak measurements (infer-bench peak, "
                   "SGEMM) and ResNet-50's layers against them")
    p.add_argument("--profile-all", action="store_true", help="cpu: profile every row, not only the misses")
    p.add_argument("--no-cudnn-benchmark", action="store_true")
    p.add_argument("--compile-modes", default="max-autotune,reduce-overhead",
                   help="cuda: torch.compile modes run on the channels_last module at every precision and batch "
                   "(gpu_vs_pytorch.py's), comma-separated, or 'none' (default: max-autotune,reduce-overhead)")
    p.add_argument("--compile-timeout-s", type=float, default=GPU_COMPILE_TIMEOUT_S,
                   help="cuda: compile seconds per model and mode (gpu_vs_pytorch.py's rule: a configuration is "
                   "skipped, and recorded, once they are spent or would be overrun by the mode's last compile of the "
                   "model, the first max-autotune one estimated from its layers); 0: no limit (default %g)"
                   % GPU_COMPILE_TIMEOUT_S)
    p.add_argument("--inductor-cache-dir", default=None,
                   help="cuda: persistent folder for Inductor's caches, one subfolder per precision; a second run "
                   "reuses its compiled graphs and autotuning (default: $TORCHINDUCTOR_CACHE_DIR, else Inductor's)")
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--timeout", type=int, default=900, help="per subprocess, seconds (a peer worker: 4x)")
    p.add_argument("--venv", default=os.path.join(REPO, ".venv-bench"), help="cpu: venv that gets onnxruntime "
                   "and openvino")
    p.add_argument("--no-venv", action="store_true", help="cpu: never create / re-execute under the venv")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--tag", default="", help="suffix of the result file names")
    p.add_argument("--update-docs", nargs="?", const=os.path.join(REPO, "docs", "benchmarks.md"), metavar="DOC",
                   help="cpu: also write this run's table into DOC's current:cpu block (bench/current_tables.py; "
                   "default docs/benchmarks.md)")
    p.add_argument("--keep", metavar="DIR", help="keep the .onnx / .fb files here instead of a temporary folder")
    p.add_argument("--merge", nargs="+", metavar="JSON", help="write one report from results JSONs of this script "
                   "(same device; rows of later files win), e.g. a run split over --isa-levels or --models; runs "
                   "nothing")
    p.add_argument("--selftest", action="store_true", help="report from synthetic numbers; no torch, GPU or build")
    p.add_argument("--peer-worker", metavar="SPEC", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.peer_worker:
        peer_worker(a.peer_worker)
        return
    if a.selftest:
        selftest()
        return
    if a.merge:
        results = merge_results(a.merge)
        stem = os.path.join(a.out, "byom-%s-%s-merged%s" % (results["device"], results["date"][:10],
                                                            ("-" + a.tag) if a.tag else ""))
        print(write_report(results, stem))
        update_docs(a, results, stem)
        return
    if not a.device:
        p.error("--device cpu|cuda is required (or --selftest)")
    cpu = a.device == "cpu"
    if cpu:
        if a.omp_wait_policy != "unset":  # before torch is imported (and inherited by the venv's re-exec)
            os.environ["OMP_WAIT_POLICY"] = a.omp_wait_policy.upper()
        ensure_peers(a)
    a.models = parse_list(a.models) if a.models else list(CPU_MODELS if cpu else GPU_MODELS)
    for m in a.models:
        if m not in CPU_MODELS:
            p.error("unknown model %s (choose from %s)" % (m, ",".join(CPU_MODELS)))
    cores = os.cpu_count() or 1
    if cpu:
        a.batches = parse_list(a.batches, int) if a.batches else ([1] if a.quick else [1, 8])
        if a.threads:
            a.threads_list = [a.threads]
        else:
            a.threads_list = parse_list(a.threads_list, int) if a.threads_list else (
                [cores] if a.quick or cores == 1 else [1, cores])
        have = supported_levels(cpu_flags())
        a.isa_levels = parse_list(a.isa_levels) if a.isa_levels else have
        for lvl in a.isa_levels:
            if lvl not in ISA_LEVELS:
                p.error("unknown ISA level %s (choose from %s)" % (lvl, ",".join(ISA_LEVELS)))
            if lvl not in have:
                p.error("this CPU does not have ISA level %s (it has %s)" % (lvl, ",".join(have)))
        a.isa_levels = [lvl for lvl in ISA_LEVELS if lvl in a.isa_levels]
        a.peers = parse_list(a.peers)
        for k in a.peers:
            if k not in ("onnxruntime", "openvino", "torch"):
                p.error("unknown peer %s (choose from onnxruntime,openvino,torch)" % k)
        a.runs = a.runs or (3 if a.quick else 30)
        a.warmup = a.warmup if a.warmup is not None else (1 if a.quick else 5)
        a.budget = a.budget if a.budget is not None else (5.0 if a.quick else 20.0)
        a.precisions = ["fp32"]
    else:
        import gpu_vs_pytorch as g
        a.batches = parse_list(a.batches or "1,64", int)
        a.precisions = parse_list(a.precisions or "fp32,tf32,fp16")
        a.runs = a.runs or 50
        a.warmup = a.warmup if a.warmup is not None else 10
        a.compile_modes = g.parse_compile_modes(a.compile_modes)
        a.inductor_cache_base = g.inductor_cache_base(a.inductor_cache_dir)
    a.autotune = False
    a.bench = os.path.join(a.build, "infer-bench")
    a.infer = os.path.join(a.build, "infer")
    a.onnx2fb = os.path.join(a.build, "onnx2fb")
    for exe in (a.bench, a.infer, a.onnx2fb):
        if not os.access(exe, os.X_OK):
            sys.exit("error: %s not found; build it first (cmake --build %s)" % (exe, a.build))
    import torch
    if cpu:
        torch.set_num_threads(cores)
    else:
        torch.backends.cudnn.benchmark = not a.no_cudnn_benchmark
    now = datetime.datetime.now(datetime.timezone.utc)
    results = {"device": "cpu" if cpu else "gpu", "date": now.strftime("%Y-%m-%d %H:%M UTC"), "size": a.size,
               "gen_size": a.gen_size, "command": " ".join(shlex.quote(c) for c in [sys.executable] + sys.argv),
               "models": a.models, "precisions": a.precisions, "batches": a.batches, "runs": a.runs,
               "warmup": a.warmup, "large_runs": a.large_runs, "large_warmup": a.large_warmup,
               "load_before": loadavg(), "environment": environment(a), "rows": [], "errors": []}
    if cpu:
        results.update({"isa_levels": a.isa_levels, "threads_list": a.threads_list, "all_cores": max(a.threads_list),
                        "budget": a.budget, "min_runs": a.min_runs, "peers": a.peers, "peer_isa": {}})
    log("load average before: %s" % results["load_before"])
    started = a.started = time.time()
    tmp = a.keep or tempfile.mkdtemp(prefix="byom-")
    os.makedirs(tmp, exist_ok=True)
    a.tmp = tmp
    try:
        results["rows"] = part_cpu(a, results) if cpu else part_gpu(a, results["errors"])
        if cpu and not a.no_peak:
            results["sgemm_size"] = a.sgemm_size
            part_cpu_peak(a, results, results["errors"])
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    results["load_after"] = loadavg()
    results["wall_s"] = time.time() - started
    log("load average after: %s" % results["load_after"])
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, "byom-%s-%s%s" % (results["device"], now.strftime("%Y-%m-%d"),
                                                 ("-" + a.tag) if a.tag else ""))
    print(write_report(results, stem))
    update_docs(a, results, stem)
    if getattr(a, "partial", None) and os.path.exists(a.partial):
        os.remove(a.partial)  # the report just written holds every row


if __name__ == "__main__":
    main()
