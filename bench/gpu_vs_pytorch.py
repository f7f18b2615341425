#!/usr/bin/env python3
"""infer (cuda backend) vs PyTorch on the same GPU, side by side in one run.

Run on the GPU machine with its python3 (PyTorch with CUDA, NumPy; matplotlib for the plot, optional):
    python3 bench/gpu_vs_pytorch.py --build build [--parts ...] [--runs 50] [--large-runs 20] [--quick]
Parts (--parts), each item run by infer-bench / infer (subprocesses) and then by PyTorch in this process,
one after the other, at every precision of --precisions (fp32: strict, TF32 off on both sides; tf32:
TF32 on in cuDNN and cuBLAS; fp16: half storage):
  ceilings: the rates the per-layer tables are held against, measured in the same run: cuBLAS GEMM
      (torch.matmul, 8192^3) in fp16 (the tensor-core peak), tf32 and strict fp32, TFLOP/s; the copy
      rate (device-to-device copy of 1 GiB, bytes read + written per second). Run whenever
      vgg16_layers or width_fold is.
  table4: the Table-4 transposed-conv layers (k4 s2 p1, no bias) at batch 1 and 32: every cuda
      conv_transpose2d variant (infer-bench --table4) vs torch.nn.functional.conv_transpose2d (cuDNN);
  conv_pool: conv3x3 p1 + avgpool2 at 32x32, C in {32,128,256,512}, batch 1: infer's conv_pool2d
      variants (infer-bench op conv_pool2d) vs F.conv2d + F.avg_pool2d;
  models: every zoo model at batch 1 and 64 (classifiers at 224x224): infer's default plan
      (infer-bench model) vs PyTorch eager, CUDA-graph replay and channels_last + CUDA graph on the
      SAME weights (infer-bench weights) and the same input (--dump); "PyTorch best" is the fastest of
      the three per (model, batch, precision) and the ratios are against it;
  vgg16_layers: VGG-16 at batch 64 fp16, its 13 3x3 convolutions one by one: infer's per-node times
      (infer --profile-json, nodes launched one by one between CUDA events) vs each layer alone in
      PyTorch (F.conv2d, NCHW and channels_last, captured as CUDA graphs), TFLOP/s and % of the fp16
      GEMM peak; conv1_1 against its memory floor;
  width_fold: the C_in = 1 / 3 layers (VGG-16 conv1_1, AlexNet conv1, LeNet-5 conv1) at batch 64 fp16:
      infer with the fold_width pass on vs off (infer-bench --pass fold_width=off) and every conv2d
      variant forced, vs PyTorch (best of eager, CUDA graph, channels_last + CUDA graph).
Timing. infer: infer-bench --backend cuda, i.e. Session::benchmark: device time per forward between CUDA
events around CUDA-graph replays, no host copies (trtexec's "GPU Compute Time"). PyTorch: CUDA events
recorded around each call (eager) or each torch.cuda.CUDAGraph replay (captured after warm-up on a side
stream), median per call; torch.backends.cudnn.benchmark on unless --no-cudnn-benchmark. Items at batch
>= 32 use --large-runs / --large-warmup. Inputs and weights are seeded and never zero. Writes
<out>/gpu-<date>.md (the goals of issue 13 and the tables), <out>/gpu-<date>.json (every number,
infer-bench's own JSON included) and <out>/gpu-<date>.png (plot; skipped with a note when matplotlib is
missing; --replot JSON draws it later). A failing item is recorded with its error and the run goes on.
--merge A.json B.json ... writes one report of runs made part by part; --selftest builds the report
from synthetic numbers (no GPU needed).
"""
import argparse
import copy
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The zoo's PyTorch twins, the weight loader and the helpers are shared with the CPU benchmark.
from cpu_vs_pytorch import ZOO, fmt_ms, load_infer_weights, log, rel_err, torch_model  # noqa: E402

# Table 4 of the unified kernel-segregation paper (DESIGN.md): (N, C_in, C_out) per row, k4 s2 p1.
TABLE4 = {"DCGAN": [(4, 1024, 512), (8, 512, 256), (16, 256, 128), (32, 128, 3)],
          "ArtGAN": [(4, 512, 256), (8, 256, 128), (16, 128, 128), (32, 128, 3)],
          "GP-GAN": [(4, 512, 256), (8, 256, 128), (16, 128, 64), (32, 64, 3)],
          "EB-GAN": [(4, 2048, 1024), (8, 1024, 512), (16, 512, 256), (32, 256, 128), (64, 128, 64),
                     (128, 64, 64)]}
TABLE4_MODELS = list(TABLE4)
TABLE4_LAYERS = {m: len(layers) for m, layers in TABLE4.items()}
# Per-sample input shapes of the zoo models (PyTorch still runs when infer-bench fails on one).
INPUT_SHAPES = {"lenet5": (1, 28, 28), "alexnet": (3, 224, 224), "vgg11": (3, 224, 224),
                "vgg16": (3, 224, 224), "dcgan": (100, 1, 1), "ebgan": (100, 1, 1)}
CONV_POOL_CHANNELS = [32, 128, 256, 512]
GENERATORS = ["dcgan", "ebgan"]
CLASSIFIERS = ["lenet5", "alexnet", "vgg11", "vgg16"]
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16}
FAST = "segregated_gemm"  # the "fast segregated" variant
PARTS = ["ceilings", "table4", "conv_pool", "models", "vgg16_layers", "width_fold"]
LARGE_BATCH = 32  # items at this batch or more use --large-runs / --large-warmup
# PyTorch's configurations; "PyTorch best" is the fastest of those measured.
TORCH_KINDS = ["eager", "graph", "channels_last_graph"]
TORCH_KIND_NAMES = {"eager": "eager", "graph": "CUDA graph", "channels_last_graph": "channels_last + CUDA graph"}


def vgg16_convs():
    """VGG-16's 3x3 p1 convolutions at 224x224: (name, C_in, C_out, H = W), in order."""
    convs, c_in, block, index, hw = [], 3, 1, 1, 224
    for c in [64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0]:
        if c == 0:
            block, index, hw = block + 1, 1, hw // 2
        else:
            convs.append(("conv%d_%d" % (block, index), c_in, c, hw))
            c_in, index = c, index + 1
    return convs


VGG16_CONVS = vgg16_convs()
# The layers width folding is for (C_in = 1 or 3): (label, C_in, H = W, C_out, kernel, stride, padding).
FOLD_LAYERS = [("VGG-16 conv1_1", 3, 224, 64, 3, 1, 1), ("AlexNet conv1", 3, 224, 64, 11, 4, 2),
               ("LeNet-5 conv1", 1, 28, 6, 5, 1, 2)]


def conv_out(hw, k, stride, pad):
    return (hw + 2 * pad - k) // stride + 1


def conv_flops(batch, c_in, c_out, hw_out, k):
    """Multiply-adds counted as 2, square images and kernels (the useful work: no folded zeros)."""
    return 2.0 * batch * c_in * c_out * hw_out * hw_out * k * k


# ---- running infer-bench ----

def run_cmd(cmd, timeout):
    """Runs cmd; on a non-zero exit raises RuntimeError with infer-bench's one-line 'error: ...'."""
    log("$ " + " ".join(shlex.quote(c) for c in cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=timeout)
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        raise RuntimeError("%s exited with %d: %s" % (os.path.basename(cmd[0]), p.returncode,
                                                      lines[-1] if lines else "(nothing on stderr)"))
    return p.stdout


def runs_for(a, batch):
    """(runs, warm-up runs) of one item: --large-runs / --large-warmup at batch >= LARGE_BATCH."""
    return (a.large_runs, a.large_warmup) if batch >= LARGE_BATCH else (a.runs, a.warmup)


def bench_globals(a, precision, batch=1):
    """infer-bench's global options for one item (given before any subcommand)."""
    runs, warmup = runs_for(a, batch)
    args = ["--backend", "cuda", "--precision", precision, "--runs", str(runs), "--warmup", str(warmup)]
    return args + (["--autotune"] if a.autotune else [])


def infer_bench_json(a, precision, args, name, batch=1, extra=()):
    """infer-bench with the global options of this item (plus `extra`, e.g. --pass fold_width=off) and
    --json; returns its JSON."""
    path = os.path.join(a.tmp, name + ".json")
    run_cmd([a.bench] + bench_globals(a, precision, batch) + list(extra) + ["--json", path] + args, a.timeout)
    with open(path) as f:
        return json.load(f)


# ---- PyTorch timing ----

def tf32_api():
    """PyTorch >= 2.9 controls TF32 with fp32_precision ('ieee' | 'tf32') and warns about (and refuses
    mixing with) the older allow_tf32 flags; older versions only have the flags."""
    try:  # older versions' cuda.matmul raises AssertionError, not AttributeError, for unknown names
        getattr(torch.backends.cuda.matmul, "fp32_precision")
        return "fp32_precision"
    except Exception:  # noqa: BLE001
        return "allow_tf32"


def set_torch_precision(precision):
    """fp32: strict (no TF32 in cuDNN convolutions or cuBLAS matmuls); tf32: TF32 allowed in both;
    fp16: float32 settings as fp32 (the tensors are half)."""
    tf32 = precision == "tf32"
    if tf32_api() == "fp32_precision":
        mode = "tf32" if tf32 else "ieee"
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
    else:
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32


def stats(times):
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "runs": len(times)}


def time_events(fn, runs, warmup):
    """CUDA events recorded on the current stream around each of `runs` calls after `warmup` calls;
    per-call device time, so an eager call's launch overhead counts where it leaves the GPU idle."""
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(runs)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
    return stats([start.elapsed_time(end) for start, end in events])


def time_graph(fn, runs, warmup):
    """fn captured as one torch.cuda.CUDAGraph and its replays timed. Warm-up runs on a side stream
    before the capture (cudnn.benchmark's algorithm search and lazy allocations must not happen inside
    it); raises when the capture fails."""
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = fn()  # kept alive while the graph replays into it
    torch.cuda.synchronize()
    try:
        return time_events(graph.replay, runs, warmup)
    finally:
        del graph, static_out


def time_torch(fn, a, batch=1, fn_cl=None, eager=True):
    """PyTorch eager and CUDA-graph replay of fn, and the CUDA-graph replay of fn_cl (the same work on
    channels_last module / tensors) when given. A failed capture is recorded as <kind>_error and
    leaves the other numbers standing."""
    runs, warmup = runs_for(a, batch)
    warmup = max(warmup, 3)  # the first call under cudnn.benchmark searches algorithms
    out = {"eager": time_events(fn, runs, warmup)} if eager else {}
    for kind, f in (("graph", fn), ("channels_last_graph", fn_cl)):
        if f is None:
            continue
        try:
            out[kind] = time_graph(f, runs, warmup)
        except Exception as e:  # noqa: BLE001
            out[kind + "_error"] = "%s: %s" % (type(e).__name__, e)
            log("   %s failed: %s" % (TORCH_KIND_NAMES[kind], out[kind + "_error"]))
        free_cuda()
    return out


def random_tensor(shape, seed, scale, dtype):
    """Seeded, uniform in [-scale, -0.01 scale] U [0.01 scale, scale] (as infer-bench's data: never zero)."""
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    magnitude = torch.rand(shape, generator=g, device="cuda") * 0.99 + 0.01
    sign = torch.randint(0, 2, shape, generator=g, device="cuda") * 2 - 1
    return (magnitude * sign * scale).to(dtype)


def free_cuda():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def record_error(errors, item, e):
    text = "%s: %s" % (type(e).__name__, e)
    log("   FAILED %s: %s" % (item, text))
    errors.append({"item": item, "error": text, "traceback": traceback.format_exc()})


def median_of(result):
    return result["time"]["median_ms"] if result.get("ran") else None


# ---- the three parts ----

def torch_tconv(batch, c_in, c_out, n, dtype, a):
    """PyTorch's transposed conv on one Table-4 layer; weights scaled by 1/sqrt(fan-in) as infer-bench's."""
    x = random_tensor((batch, c_in, n, n), 1, 1.0, dtype)
    w = random_tensor((c_in, c_out, 4, 4), 2, 1.0 / math.sqrt(c_in * 16), dtype)
    return time_torch(lambda: F.conv_transpose2d(x, w, stride=2, padding=1), a, batch)


def torch_conv_pool(c, dtype, a):
    x = random_tensor((1, c, 32, 32), 3, 1.0, dtype)
    w = random_tensor((c, c, 3, 3), 4, 1.0 / math.sqrt(c * 9), dtype)
    b = random_tensor((c,), 5, 0.1, dtype)
    return time_torch(lambda: F.avg_pool2d(F.conv2d(x, w, b, padding=1), 2), a)


def part_table4(a, errors):
    """One Table-4 row (model) at a time: infer-bench, then PyTorch on each of its layers (PyTorch runs
    even when infer-bench failed, so the peer's numbers are there)."""
    log("== (a) Table-4 transposed-conv layers")
    rows, runs = [], []
    for precision in a.layer_precisions:
        for batch in a.table4_batches:
            for model in a.table4_models:
                item = "table4 %s batch %d %s" % (model, batch, precision)
                layers = {}
                try:
                    j = infer_bench_json(a, precision, ["--table4", "--model", model, "--batch", str(batch)],
                                         "table4_%s_%d_%s" % (model, batch, precision), batch)
                    j["precision"] = precision
                    runs.append(j)
                    layers = {(l["n"], l["c_in"], l["c_out"]): l for l in j["layers"]}
                except Exception as e:  # noqa: BLE001
                    record_error(errors, item, e)
                set_torch_precision(precision)
                for n, c_in, c_out in TABLE4[model]:
                    layer = layers.get((n, c_in, c_out), {"results": [], "upsampled_bytes": 0})
                    row = {"model": model, "n": n, "c_in": c_in, "c_out": c_out, "batch": batch,
                           "precision": precision, "upsampled_bytes": layer["upsampled_bytes"],
                           "infer": {r["label"]: median_of(r) for r in layer["results"] if r["ran"]},
                           "not_run": {r["label"]: r.get("note", "") for r in layer["results"] if not r["ran"]},
                           "torch": None}
                    try:
                        row["torch"] = torch_tconv(batch, c_in, c_out, n, DTYPES[precision], a)
                    except Exception as e:  # noqa: BLE001
                        record_error(errors, "%s layer %dx%dx%d (PyTorch)" % (item, n, n, c_in), e)
                    free_cuda()
                    rows.append(row)
                log("   %s done" % item)
    order = []
    for j in runs:
        for v in j["variants"]:
            if v not in order:
                order.append(v)
    variants = [v for v in order if any(v in r["infer"] for r in rows)]
    return {"infer_bench": runs, "variants": variants,
            "not_applicable": [v for v in order if v not in variants], "rows": rows}


def part_conv_pool(a, errors):
    log("== (b) conv3x3 + avgpool2 at 32x32")
    rows = []
    for precision in a.layer_precisions:
        for c in a.channels:
            item = "conv_pool C=%d %s" % (c, precision)
            j = None
            try:
                j = infer_bench_json(a, precision, ["op", "conv_pool2d", "--input", "1x%dx32x32" % c,
                                                    "--out-channels", str(c), "--kernel", "3", "--padding", "1",
                                                    "--pool", "2", "--baseline", "unfused"],
                                     "conv_pool_%d_%s" % (c, precision))
            except Exception as e:  # noqa: BLE001  (PyTorch still runs: the peer's numbers stay useful)
                record_error(errors, item, e)
            row = {"c": c, "precision": precision, "torch": None, "infer_bench": j,
                   "infer": {r["label"]: median_of(r) for r in j["results"] if r["ran"]} if j else {}}
            try:
                set_torch_precision(precision)
                row["torch"] = torch_conv_pool(c, DTYPES[precision], a)
            except Exception as e:  # noqa: BLE001
                record_error(errors, item + " (PyTorch)", e)
            free_cuda()
            rows.append(row)
    return rows


def prepare_model(a, name):
    """Writes the zoo model, dumps its weights, loads them into the PyTorch twin (on the CPU)."""
    fb = os.path.join(a.tmp, name + ".fb")
    run_cmd([a.zoo, name, "--out", fb], a.timeout)
    wdir = os.path.join(a.tmp, name + "_weights")
    run_cmd([a.bench, "weights", fb, "--out", wdir], a.timeout)
    net = load_infer_weights(torch_model(name), wdir)
    shutil.rmtree(wdir, ignore_errors=True)
    return fb, net


def part_models(a, errors):
    log("== (c) zoo models")
    rows = []
    for name in a.models:
        try:
            fb, net_cpu = prepare_model(a, name)
        except Exception as e:  # noqa: BLE001
            record_error(errors, "model %s (prepare)" % name, e)
            fb, net_cpu = os.path.join(a.tmp, name + ".fb"), None
            if not os.path.exists(fb):
                continue
        net32 = None
        for precision in a.precisions:
            net, net_cl = None, None
            try:
                if net_cpu is not None:
                    if net32 is None:
                        net32 = net_cpu.to("cuda").eval()  # moves the module: no second host copy
                    net = net32 if DTYPES[precision] == torch.float32 else copy.deepcopy(net32).half().eval()
                    # Module.to(memory_format=...) converts the 4-d parameters in place: a copy of its own.
                    net_cl = copy.deepcopy(net).to(memory_format=torch.channels_last).eval()
            except Exception as e:  # noqa: BLE001
                record_error(errors, "model %s %s (PyTorch model)" % (name, precision), e)
            for batch in a.model_batches:
                item = "model %s batch %d %s" % (name, batch, precision)
                ddir = os.path.join(a.tmp, "io_%s_%d_%s" % (name, batch, precision))
                row = {"model": name, "batch": batch, "precision": precision, "infer": None,
                       "infer_no_passes": None, "kernels": [], "torch": None, "rel_err": None,
                       "rel_err_cl": None, "rel_err_vs_fp32": None, "infer_bench": None,
                       "runs": runs_for(a, batch)[0]}
                try:
                    j = infer_bench_json(a, precision, ["--batch", str(batch), "model", fb, "--dump", ddir]
                                         + ([] if a.variants else ["--no-variants"]),
                                         "model_%s_%d_%s" % (name, batch, precision), batch)
                    default = j["results"][0]
                    no_passes = next((r for r in j["results"] if r["label"] == "no passes"), None)
                    row.update({"infer": default["time"] if default["ran"] else None,
                                "infer_no_passes": no_passes["time"] if no_passes and no_passes["ran"] else None,
                                "kernels": sorted({"%s=%s" % (n["op"], n["variant"]) for n in j["nodes"]}),
                                "infer_bench": j})
                except Exception as e:  # noqa: BLE001  (PyTorch still runs, on a random input)
                    record_error(errors, item, e)
                if net is not None:
                    try:
                        y_infer = None
                        if os.path.exists(os.path.join(ddir, "output_0.npy")):
                            x32 = torch.from_numpy(np.load(os.path.join(ddir, "input_0.npy"))).cuda()
                            y_infer = np.load(os.path.join(ddir, "output_0.npy"))
                        else:
                            x32 = random_tensor((batch,) + INPUT_SHAPES[name], 6, 1.0, torch.float32)
                        x = x32.to(DTYPES[precision])
                        x_cl = x.contiguous(memory_format=torch.channels_last)
                        set_torch_precision(precision)
                        if y_infer is not None:
                            with torch.no_grad():
                                row["rel_err"] = rel_err(net(x).float().cpu().numpy(), y_infer)
                                if net_cl is not None:
                                    row["rel_err_cl"] = rel_err(net_cl(x_cl).float().cpu().numpy(), y_infer)
                        if precision != "fp32" and y_infer is not None:  # infer's error vs strict fp32
                            set_torch_precision("fp32")
                            with torch.no_grad():
                                row["rel_err_vs_fp32"] = rel_err(y_infer, net32(x32).cpu().numpy())
                            set_torch_precision(precision)
                        row["torch"] = time_torch(lambda: net(x), a, batch,
                                                  fn_cl=(lambda: net_cl(x_cl)) if net_cl is not None else None)
                        del x, x32, x_cl
                    except Exception as e:  # noqa: BLE001
                        record_error(errors, item + " (PyTorch)", e)
                shutil.rmtree(ddir, ignore_errors=True)
                free_cuda()
                rows.append(row)
                t = row["torch"] or {}
                log("   %s: infer %s ms, PyTorch eager %s ms, graph %s ms, channels_last graph %s ms, "
                    "rel err %s" % (
                        item, fmt_ms(row["infer"]["median_ms"] if row["infer"] else None),
                        fmt_ms(torch_ms(t, "eager")), fmt_ms(torch_ms(t, "graph")),
                        fmt_ms(torch_ms(t, "channels_last_graph")),
                        "%.1e" % row["rel_err"] if row["rel_err"] is not None else "n/a"))
            if net is not None and net is not net32:
                del net
            del net_cl
            free_cuda()
        del net32, net_cpu
        free_cuda()
        if os.path.exists(fb):
            os.remove(fb)
    return rows


def part_ceilings(a, errors):
    """The rates the layer tables are held against, measured in this run: cuBLAS GEMM (torch.matmul of
    two n x n matrices, n = --gemm-n) in fp16 (the tensor-core peak), tf32 and strict fp32, and the
    copy rate (a device-to-device copy of --copy-mib MiB; bytes read + written per second)."""
    log("== ceilings: cuBLAS GEMM and copy rates")
    n = a.gemm_n
    runs, warmup = max(a.large_runs, 5), max(a.large_warmup, 2)
    out = {"gemm_n": n, "runs": runs, "warmup": warmup}
    for precision in ("fp16", "tf32", "fp32"):
        try:
            set_torch_precision(precision)
            x = random_tensor((n, n), 7, 1.0, DTYPES[precision])
            y = random_tensor((n, n), 8, 1.0, DTYPES[precision])
            z = torch.empty((n, n), dtype=DTYPES[precision], device="cuda")
            t = time_events(lambda: torch.matmul(x, y, out=z), runs, warmup)
            out["gemm_" + precision] = {"time": t, "tflops": 2.0 * n ** 3 / (t["median_ms"] * 1e-3) / 1e12}
            log("   GEMM %d^3 %s: %.3f ms, %.0f TFLOP/s" % (n, precision, t["median_ms"],
                                                         out["gemm_" + precision]["tflops"]))
            del x, y, z
        except Exception as e:  # noqa: BLE001
            record_error(errors, "ceilings: GEMM %s" % precision, e)
        free_cuda()
    set_torch_precision("fp32")
    try:
        nbytes = a.copy_mib * 2 ** 20
        src = torch.ones(nbytes // 2, dtype=torch.float16, device="cuda")
        dst = torch.empty_like(src)
        t = time_events(lambda: dst.copy_(src), runs, warmup)
        out["copy"] = {"time": t, "bytes": 2 * nbytes, "tb_per_s": 2.0 * nbytes / (t["median_ms"] * 1e-3) / 1e12}
        log("   copy %d MiB: %.3f ms, %.2f TB/s read + written" % (a.copy_mib, t["median_ms"],
                                                                  out["copy"]["tb_per_s"]))
        del src, dst
    except Exception as e:  # noqa: BLE001
        record_error(errors, "ceilings: copy", e)
    free_cuda()
    return out


def infer_profile(a, fb, precision, batch, runs, extra, name):
    """`infer --profile --profile-json` on a model file: the per-node profile (nodes launched one by one
    with CUDA events between them), with the printed table kept as "table_text"."""
    path = os.path.join(a.tmp, name + ".json")
    text = run_cmd([a.infer, "--model", fb, "--backend", "cuda", "--precision", precision, "--batch", str(batch),
                    "--profile", "--runs", str(runs), "--profile-json", path] + list(extra), a.timeout)
    with open(path) as f:
        j = json.load(f)
    j["table_text"] = text
    j["command_extra"] = list(extra)
    return j


def match_layer_nodes(profile, names):
    """{layer name: [profile nodes]}: the conv nodes named after the layer (or with it among the nodes
    fused into them, or named '<layer>...' by a pass); layers no node names get the conv nodes left
    over, in order."""
    nodes = profile.get("nodes", [])
    convs = [i for i, n in enumerate(nodes) if "conv" in n.get("op", "")]
    found, used = {}, set()
    for name in names:
        hit = [i for i in convs if nodes[i]["name"] == name or name in nodes[i].get("fused", [])
               or nodes[i]["name"].startswith(name + ".") or nodes[i]["name"].startswith(name + "/")]
        found[name] = hit
        used.update(hit)
    rest = [i for i in convs if i not in used]
    for name in names:
        if not found[name] and rest:
            found[name] = [rest.pop(0)]
    return {name: [nodes[i] for i in idx] for name, idx in found.items()}


def part_vgg16_layers(a, errors):
    """VGG-16 at batch 64 fp16: infer's per-node profile (default plan; and with fold_width off) and
    each 3x3 convolution alone in PyTorch (F.conv2d + bias, NCHW and channels_last, CUDA graphs)."""
    log("== vgg16_layers: VGG-16 batch %d fp16, per 3x3 convolution" % a.layers_batch)
    batch, precision = a.layers_batch, "fp16"
    runs, warmup = runs_for(a, batch)
    res = {"batch": batch, "precision": precision, "runs": runs, "warmup": warmup, "profile": None,
           "profile_fold_off": None, "layers": []}
    fb = os.path.join(a.tmp, "vgg16_layers.fb")
    try:
        run_cmd([a.zoo, "vgg16", "--out", fb], a.timeout)
        for key, extra in (("profile", []), ("profile_fold_off", ["--pass", "fold_width=off"])):
            try:
                res[key] = infer_profile(a, fb, precision, batch, runs, extra, "vgg16_" + key)
            except Exception as e:  # noqa: BLE001  (e.g. a pass infer does not know yet)
                record_error(errors, "vgg16_layers: infer --profile-json %s" % " ".join(extra), e)
    except Exception as e:  # noqa: BLE001
        record_error(errors, "vgg16_layers: model-zoo vgg16", e)
    if os.path.exists(fb):
        os.remove(fb)
    names = [c[0] for c in VGG16_CONVS]
    matched = match_layer_nodes(res["profile"], names) if res["profile"] else {}
    matched_off = match_layer_nodes(res["profile_fold_off"], names) if res["profile_fold_off"] else {}
    set_torch_precision(precision)
    for i, (name, c_in, c_out, hw) in enumerate(VGG16_CONVS):
        row = {"layer": name, "c_in": c_in, "c_out": c_out, "hw": hw, "batch": batch,
               "flops": conv_flops(batch, c_in, c_out, hw, 3),
               "bytes": 2.0 * (batch * c_in * hw * hw + batch * c_out * hw * hw + c_out * c_in * 9 + c_out),
               "infer_ms": None, "infer_nodes": [], "infer_fold_off_ms": None, "torch": None}
        nodes = matched.get(name) or []
        if nodes:
            row["infer_ms"] = sum(n["time_ms"] for n in nodes)
            row["infer_nodes"] = [{k: n.get(k) for k in ("name", "op", "variant", "fused", "output_shape", "flops",
                                                         "time_ms")} for n in nodes]
        if matched_off.get(name):
            row["infer_fold_off_ms"] = sum(n["time_ms"] for n in matched_off[name])
        try:
            x = random_tensor((batch, c_in, hw, hw), 20 + i, 1.0, torch.float16)
            w = random_tensor((c_out, c_in, 3, 3), 40 + i, 1.0 / math.sqrt(9 * c_in), torch.float16)
            b = random_tensor((c_out,), 60 + i, 0.1, torch.float16)
            x_cl = x.contiguous(memory_format=torch.channels_last)
            w_cl = w.contiguous(memory_format=torch.channels_last)
            row["torch"] = time_torch(lambda: F.conv2d(x, w, b, padding=1), a, batch,
                                      fn_cl=lambda: F.conv2d(x_cl, w_cl, b, padding=1), eager=False)
            del x, w, b, x_cl, w_cl
        except Exception as e:  # noqa: BLE001
            record_error(errors, "vgg16_layers %s (PyTorch)" % name, e)
        free_cuda()
        res["layers"].append(row)
        log("   %s: infer %s ms, PyTorch channels_last graph %s ms" % (
            name, fmt_ms(row["infer_ms"]), fmt_ms(torch_ms(row["torch"], "channels_last_graph"))))
    set_torch_precision("fp32")
    return res


def part_width_fold(a, errors):
    """The C_in = 1 / 3 layers at batch --fold-batch fp16: infer's one-conv model with the fold_width
    pass on (the default plan) and off (--pass fold_width=off), every conv2d variant forced (infer-bench
    op --variant all), and PyTorch's F.conv2d (eager, CUDA graph, channels_last + CUDA graph)."""
    log("== width_fold: C_in = 1 / 3 convolutions, batch %d fp16" % a.fold_batch)
    batch, precision = a.fold_batch, "fp16"
    rows = []
    for i, (label, c_in, hw, c_out, k, stride, pad) in enumerate(FOLD_LAYERS):
        key = label.lower().replace(" ", "_").replace("-", "")
        hw_out = conv_out(hw, k, stride, pad)
        row = {"layer": label, "batch": batch, "precision": precision, "c_in": c_in, "hw": hw, "c_out": c_out,
               "kernel": k, "stride": stride, "padding": pad, "hw_out": hw_out,
               "flops": conv_flops(batch, c_in, c_out, hw_out, k),
               "bytes": 2.0 * (batch * c_in * hw * hw + batch * c_out * hw_out * hw_out + c_out * c_in * k * k + c_out),
               "variants": {}, "not_run": {}, "fold_on": None, "fold_off": None, "no_passes": None,
               "fold_on_kernels": [], "fold_off_kernels": [], "torch": None, "infer_bench": {}}
        fb = os.path.join(a.tmp, "fold_%s.fb" % key)
        item = "width_fold %s batch %d %s" % (label, batch, precision)
        try:
            j = infer_bench_json(a, precision, ["op", "conv2d", "--input", "%dx%dx%dx%d" % (batch, c_in, hw, hw),
                                                "--out-channels", str(c_out), "--kernel", str(k), "--stride",
                                                str(stride), "--padding", str(pad), "--variant", "all",
                                                "--save", fb], "fold_%s_op" % key, batch)
            row["infer_bench"]["op"] = j
            row["variants"] = {r["label"]: median_of(r) for r in j["results"] if r["ran"]}
            row["not_run"] = {r["label"]: r.get("note", "") for r in j["results"] if not r["ran"]}
        except Exception as e:  # noqa: BLE001
            record_error(errors, item + " (infer-bench op conv2d --variant all)", e)
        for state, extra in (("fold_on", []), ("fold_off", ["--pass", "fold_width=off"])):
            if not os.path.exists(fb):
                break
            try:
                j = infer_bench_json(a, precision, ["--batch", str(batch), "model", fb, "--no-variants"],
                                     "fold_%s_%s" % (key, state), batch, extra)
                row["infer_bench"][state] = j
                default = j["results"][0]
                row[state] = median_of(default)
                row[state + "_kernels"] = ["%s=%s" % (n["op"], n["variant"]) for n in j["nodes"]]
                if state == "fold_on":
                    no_passes = next((r for r in j["results"] if r["label"] == "no passes"), None)
                    row["no_passes"] = median_of(no_passes) if no_passes else None
            except Exception as e:  # noqa: BLE001  (e.g. infer-bench without --pass yet)
                record_error(errors, "%s (infer-bench model %s)" % (item, " ".join(extra) or "default plan"), e)
        if os.path.exists(fb):
            os.remove(fb)
        try:
            set_torch_precision(precision)
            x = random_tensor((batch, c_in, hw, hw), 80 + i, 1.0, torch.float16)
            w = random_tensor((c_out, c_in, k, k), 90 + i, 1.0 / math.sqrt(c_in * k * k), torch.float16)
            b = random_tensor((c_out,), 100 + i, 0.1, torch.float16)
            x_cl = x.contiguous(memory_format=torch.channels_last)
            w_cl = w.contiguous(memory_format=torch.channels_last)
            row["torch"] = time_torch(lambda: F.conv2d(x, w, b, stride=stride, padding=pad), a, batch,
                                      fn_cl=lambda: F.conv2d(x_cl, w_cl, b, stride=stride, padding=pad))
            del x, w, b, x_cl, w_cl
        except Exception as e:  # noqa: BLE001
            record_error(errors, item + " (PyTorch)", e)
        set_torch_precision("fp32")
        free_cuda()
        rows.append(row)
        log("   %s: infer fold on %s ms, off %s ms, PyTorch best %s ms" % (
            label, fmt_ms(row["fold_on"]), fmt_ms(row["fold_off"]), fmt_ms(torch_best(row["torch"])[1])))
    return rows


# ---- numbers for the report ----

def speedup(base_ms, new_ms):
    """base time / new time: > 1 means `new` is faster."""
    return base_ms / new_ms if base_ms and new_ms else None


def fx(v):
    return "%.2fx" % v if v is not None else "n/a"


def torch_ms(t, kind):
    return t[kind]["median_ms"] if t and kind in t else None


def table4_totals(rows, variants):
    """{(precision, batch, model): {"layers": n, variant: total ms or None, "eager": ..., "graph": ...}}"""
    totals = {}
    for r in rows:
        key = (r["precision"], r["batch"], r["model"])
        t = totals.setdefault(key, {"layers": 0, "upsampled": 0, **{v: 0.0 for v in variants},
                                    "eager": 0.0, "graph": 0.0})
        t["layers"] += 1
        t["upsampled"] += r["upsampled_bytes"]
        for v in variants:
            t[v] = t[v] + r["infer"][v] if t[v] is not None and r["infer"].get(v) else None
        for kind in ("eager", "graph"):
            ms = torch_ms(r["torch"], kind)
            t[kind] = t[kind] + ms if t[kind] is not None and ms else None
    return totals


def compute_goals(results):
    """Every goal of issue 4 (part 7): target, measured, met / missed / not measured."""
    goals = []

    def add(goal, target, measured, ok):
        goals.append({"goal": goal, "target": target, "measured": measured,
                      "status": "not measured" if ok is None else ("met" if ok else "missed")})

    t4 = results.get("table4")
    if t4 is not None:
        rows, variants = t4["rows"], t4["variants"]
        totals = table4_totals(rows, variants)
        for p in results["precisions"]:
            if p not in ("fp32", "fp16"):
                continue
            for b in results["table4_batches"]:
                parts, ok = [], None
                for m in results["table4_models"]:
                    t = totals.get((p, b, m))
                    s = speedup(t.get("conventional"), t.get(FAST)) if t else None
                    if s is not None and t["layers"] == TABLE4_LAYERS[m]:
                        parts.append("%s %s" % (m, fx(s)))
                        ok = (ok is not False) and s >= 3.3
                    else:
                        parts.append("%s n/a" % m)
                add("Table-4 %s total vs conventional, each model, batch %d, %s" % (FAST, b, p),
                    ">= 3.3x", ", ".join(parts), ok)
        for p in results["precisions"]:
            if p not in ("fp32", "fp16") or 1 not in results["table4_batches"]:
                continue
            layer_rows = [r for r in rows if r["precision"] == p and r["batch"] == 1]
            for kind, peer in (("eager", "PyTorch conv_transpose2d (eager)"),
                               ("graph", "PyTorch conv_transpose2d (CUDA graph)")):
                pairs = [(r, speedup(torch_ms(r["torch"], kind), r["infer"].get(FAST))) for r in layer_rows]
                measured = [(r, s) for r, s in pairs if s is not None]
                if not measured:
                    add("Table-4 layers, batch 1, %s: %s faster than %s" % (p, FAST, peer), "every layer",
                        "n/a", None)
                    continue
                faster = sum(1 for _, s in measured if s > 1.0)
                worst_r, worst = min(measured, key=lambda rs: rs[1])
                # For reference: the fastest infer variant of each layer, whichever it is.
                best = [speedup(torch_ms(r["torch"], kind), min(r["infer"].values())) for r in layer_rows
                        if r["infer"]]
                expected = sum(TABLE4_LAYERS[m] for m in results["table4_models"])
                add("Table-4 layers, batch 1, %s: %s faster than %s" % (p, FAST, peer),
                    "every layer (%d)" % expected,
                    "%d of %d layers; slowest: %s %dx%dx%d %s (fastest infer variant per layer: %d of %d)" % (
                        faster, len(measured), worst_r["model"], worst_r["n"], worst_r["n"], worst_r["c_in"],
                        fx(worst), sum(1 for s in best if s is not None and s > 1.0), len(best)),
                    faster == len(measured) and len(measured) == expected)
        t = totals.get(("fp32", 1, "EB-GAN"))
        if t and t["layers"] == 6 and t.get(FAST):
            best = min((v for v in variants if t.get(v)), key=lambda v: t[v])
            add("Table-4 EB-GAN's six layers, batch 1, fp32, %s total" % FAST, "<= 0.25 ms",
                "%.3f ms (fastest variant: %s %.3f ms)" % (t[FAST], best, t[best]), t[FAST] <= 0.25)
        else:
            add("Table-4 EB-GAN's six layers, batch 1, fp32, %s total" % FAST, "<= 0.25 ms", "n/a", None)

    cp = results.get("conv_pool")
    if cp is not None:
        for p, target in (("fp32", 2.9), ("fp16", 4.4)):
            if p not in results["precisions"]:
                continue
            r = next((r for r in cp if r["precision"] == p and r["c"] == 512), None)
            s = speedup(torch_ms(r["torch"], "eager"), r["infer"].get("direct_sum")) if r else None
            g = speedup(torch_ms(r["torch"], "graph"), r["infer"].get("direct_sum")) if r else None
            add("conv3x3+avgpool2, C=512, batch 1, %s: direct_sum vs PyTorch conv2d + avg_pool2d" % p,
                ">= %.1fx" % target,
                "%s (%s vs %s ms); vs PyTorch as a CUDA graph: %s" % (
                    fx(s), fmt_ms(r["infer"].get("direct_sum")), fmt_ms(torch_ms(r["torch"], "eager")), fx(g))
                if s is not None else "n/a", None if s is None else s >= target)

    md = results.get("models")
    if md is not None:
        def find(model, batch, p):
            return next((r for r in md if r["model"] == model and r["batch"] == batch and r["precision"] == p),
                        None)

        def vs_graph(r):
            if not r or not r["infer"]:
                return None, "n/a"
            im = r["infer"]["median_ms"]
            g, e = torch_ms(r["torch"], "graph"), torch_ms(r["torch"], "eager")
            s = speedup(g, im)
            return s, "%s (infer %s vs %s ms); vs eager %s" % (fx(s), fmt_ms(im), fmt_ms(g), fx(speedup(e, im)))

        for p in results["precisions"]:
            if p not in ("fp32", "fp16"):
                continue
            for m in results["model_list"]:
                if 1 in results["model_batches"]:
                    s, text = vs_graph(find(m, 1, p))
                    add("%s batch 1 %s: infer vs PyTorch CUDA graph" % (m, p), "> 1.0x (faster)", text,
                        None if s is None else s > 1.0)
        r = find("ebgan", 1, "fp32")
        if "ebgan" in results["model_list"] and 1 in results["model_batches"] and "fp32" in results["precisions"]:
            im = r["infer"]["median_ms"] if r and r["infer"] else None
            add("ebgan batch 1 fp32: infer time", "<= 0.25 ms", "%s ms" % fmt_ms(im), None if im is None else im <= 0.25)
        for p in results["precisions"]:
            if p not in ("fp32", "fp16") or 64 not in results["model_batches"]:
                continue
            for m in results["model_list"]:
                s, text = vs_graph(find(m, 64, p))
                if m in GENERATORS:
                    add("%s batch 64 %s: infer vs PyTorch CUDA graph" % (m, p), ">= 1.5x", text,
                        None if s is None else s >= 1.5)
                elif m in CLASSIFIERS:
                    add("%s batch 64 %s: infer vs PyTorch CUDA graph (within 10%%)" % (m, p),
                        ">= 0.91x (infer <= 1.1x PyTorch's time)", text, None if s is None else s >= 1 / 1.1)
    return goals


# ---- report ----

def markdown(results):
    a = results["settings"]
    env = results["environment"]
    out = ["# infer vs PyTorch on the GPU, %s\n" % results["date"]]
    out.append("- device: %s (PyTorch: `torch.cuda.get_device_name`); infer: %s" % (
        env["device"], env.get("infer_device") or "n/a"))
    if env.get("nvidia_smi"):
        out.append("- nvidia-smi: %s" % env["nvidia_smi"])
    out.append("- PyTorch %s (CUDA %s, cuDNN %s), NumPy %s, Python %s; host CPU: %s" % (
        env["torch"], env["torch_cuda"], env["cudnn"], env["numpy"], env["python"], env["cpu"]))
    out.append("- PyTorch settings: cudnn.benchmark %s; fp32 = strict, TF32 off in cuDNN and cuBLAS (%s); "
               "fp16 = the module and input `.half()`; `torch.no_grad()`" % (
                   "on" if a["cudnn_benchmark"] else "off",
                   "`cuda.matmul.fp32_precision` and `cudnn.conv.fp32_precision` = 'ieee'"
                   if env.get("tf32_api") == "fp32_precision" else
                   "`cudnn.allow_tf32` and `cuda.matmul.allow_tf32` False"))
    out.append("- timing: median of %d runs after %d warm-up runs (PyTorch: at least 3). infer: "
               "`infer-bench --backend cuda` (Session::benchmark: device time per forward between CUDA "
               "events around CUDA-graph replays, no host copies). PyTorch: CUDA events around each call "
               "(eager: the GPU time between the events, so launch overhead counts where it leaves the GPU "
               "idle) or each `torch.cuda.CUDAGraph` replay (graph)." % (a["runs"], a["warmup"]))
    out.append("- ratios: `A vs B` is B's time / A's time (> 1: A is faster)")
    out.append("- command: `%s`" % results["command"])
    out.append("- wall time of the whole run: %.0f s\n" % results["wall_s"])

    out.append("## Goals of issue 4 (part 7)\n")
    out.append("| goal | target | measured | |")
    out.append("|---|---|---|---|")
    for g in results["goals"]:
        out.append("| %s | %s | %s | %s |" % (g["goal"], g["target"], g["measured"], g["status"]))
    out.append("")

    if "table4" in results:
        t4 = results["table4"]
        rows, variants = t4["rows"], t4["variants"]
        totals = table4_totals(rows, variants)
        others = [v for v in variants if v != "conventional"]
        out.append("## (a) Table-4 transposed-conv layers (k4 s2 p1, no bias), median ms\n")
        if t4["not_applicable"]:
            out.append("Not applicable to these layers (not shown): %s.\n" % ", ".join(t4["not_applicable"]))
        for p in results["precisions"]:
            for b in results["table4_batches"]:
                sel = [r for r in rows if r["precision"] == p and r["batch"] == b]
                if not sel:
                    continue
                out.append("### %s, batch %d\n" % (p, b))
                head = ("| model | input | output | " + " | ".join(variants) + " | PyTorch eager | PyTorch graph | "
                        + " | ".join("%s vs conventional" % v for v in others)
                        + " | %s vs PyTorch eager | %s vs PyTorch graph |" % (FAST, FAST))
                out.append(head)
                out.append("|" + "---|" * (head.count("|") - 1))
                for r in sel:
                    conv = r["infer"].get("conventional")
                    out.append("| %s | %dx%dx%d | %dx%dx%d | %s | %s | %s | %s | %s | %s |" % (
                        r["model"], r["n"], r["n"], r["c_in"], 2 * r["n"], 2 * r["n"], r["c_out"],
                        " | ".join(fmt_ms(r["infer"].get(v)) for v in variants),
                        fmt_ms(torch_ms(r["torch"], "eager")), fmt_ms(torch_ms(r["torch"], "graph")),
                        " | ".join(fx(speedup(conv, r["infer"].get(v))) for v in others),
                        fx(speedup(torch_ms(r["torch"], "eager"), r["infer"].get(FAST))),
                        fx(speedup(torch_ms(r["torch"], "graph"), r["infer"].get(FAST)))))
                for m in TABLE4_MODELS:
                    t = totals.get((p, b, m))
                    if not t:
                        continue
                    out.append("| **%s total** | | | %s | %s | %s | %s | %s | %s |" % (
                        m, " | ".join(fmt_ms(t[v]) for v in variants), fmt_ms(t["eager"]), fmt_ms(t["graph"]),
                        " | ".join(fx(speedup(t.get("conventional"), t[v])) for v in others),
                        fx(speedup(t["eager"], t.get(FAST))), fx(speedup(t["graph"], t.get(FAST)))))
                out.append("")

    if "conv_pool" in results:
        rows = results["conv_pool"]
        variants = sorted({v for r in rows for v in r["infer"]})
        others = [v for v in variants if v != "unfused"]
        out.append("## (b) conv3x3 p1 + avgpool2 at 32x32, batch 1, C_in = C_out = C, median ms\n")
        for p in results["precisions"]:
            sel = [r for r in rows if r["precision"] == p]
            if not sel:
                continue
            out.append("### %s\n" % p)
            head = ("| C | " + " | ".join(variants) + " | PyTorch eager | PyTorch graph | "
                    + " | ".join("%s vs unfused" % v for v in others)
                    + " | direct_sum vs PyTorch eager | direct_sum vs PyTorch graph |")
            out.append(head)
            out.append("|" + "---|" * (head.count("|") - 1))
            for r in sel:
                out.append("| %d | %s | %s | %s | %s | %s | %s |" % (
                    r["c"], " | ".join(fmt_ms(r["infer"].get(v)) for v in variants),
                    fmt_ms(torch_ms(r["torch"], "eager")), fmt_ms(torch_ms(r["torch"], "graph")),
                    " | ".join(fx(speedup(r["infer"].get("unfused"), r["infer"].get(v))) for v in others),
                    fx(speedup(torch_ms(r["torch"], "eager"), r["infer"].get("direct_sum"))),
                    fx(speedup(torch_ms(r["torch"], "graph"), r["infer"].get("direct_sum")))))
            out.append("")

    if "models" in results:
        out.append("## (c) zoo models, same weights and input, median ms\n")
        out.append("`rel err` is ||PyTorch - infer|| / ||infer|| at the same precision; `vs fp32` is infer's "
                   "output against strict-fp32 PyTorch.\n")
        out.append("| model | batch | precision | infer | infer, no passes | PyTorch eager | PyTorch graph | "
                   "infer vs eager | infer vs graph | rel err | vs fp32 | infer kernels |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in results["models"]:
            im = r["infer"]["median_ms"] if r["infer"] else None
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["model"], r["batch"], r["precision"], fmt_ms(im),
                fmt_ms(r["infer_no_passes"]["median_ms"] if r["infer_no_passes"] else None),
                fmt_ms(torch_ms(r["torch"], "eager")), fmt_ms(torch_ms(r["torch"], "graph")),
                fx(speedup(torch_ms(r["torch"], "eager"), im)), fx(speedup(torch_ms(r["torch"], "graph"), im)),
                "%.1e" % r["rel_err"] if r["rel_err"] is not None else "n/a",
                "%.1e" % r["rel_err_vs_fp32"] if r["rel_err_vs_fp32"] is not None else "-",
                ", ".join(r["kernels"])))
        out.append("")

    graph_errors = []  # PyTorch CUDA-graph captures that failed (eager numbers stand)
    for key in ("table4", "conv_pool", "models"):
        rows = results.get(key)
        if not rows:
            continue
        for r in (rows["rows"] if key == "table4" else rows):
            if r.get("torch") and "graph_error" in r["torch"]:
                label = ("%s %dx%dx%d" % (r["model"], r["n"], r["n"], r["c_in"]) if key == "table4"
                         else r.get("model", "C=%s" % r.get("c")))
                label += " batch %d" % r.get("batch", 1)
                graph_errors.append("%s %s %s (PyTorch CUDA graph)" % (key, label, r["precision"]))
                graph_errors[-1] += ": `%s`" % r["torch"]["graph_error"].replace("`", "'")
    if results["errors"] or graph_errors:
        out.append("## Items that failed\n")
        for e in results["errors"]:
            out.append("- %s: `%s`" % (e["item"], e["error"].replace("`", "'")))
        out.extend("- " + g for g in graph_errors)
        out.append("")
    return "\n".join(out) + "\n"


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed: no plot (pip install matplotlib, or "
              "apt-get install python3-matplotlib)")
        return False
    try:
        panels = []  # (title, labels, {series: values}, log scale, reference line)
        if "table4" in results:
            rows, variants = results["table4"]["rows"], results["table4"]["variants"]
            b = min(results["table4_batches"])
            for p in results["precisions"]:
                sel = [r for r in rows if r["precision"] == p and r["batch"] == b]
                if not sel:
                    continue
                series = {v: [r["infer"].get(v) or np.nan for r in sel] for v in variants}
                for kind in ("eager", "graph"):
                    series["PyTorch " + kind] = [torch_ms(r["torch"], kind) or np.nan for r in sel]
                panels.append(("(a) Table-4 tconv layers, batch %d, %s: median ms" % (b, p),
                               ["%s %dx%dx%d" % (r["model"], r["n"], r["n"], r["c_in"]) for r in sel], series,
                               True, None))
        if "conv_pool" in results:
            rows = results["conv_pool"]
            variants = sorted({v for r in rows for v in r["infer"]})
            for p in results["precisions"]:
                sel = [r for r in rows if r["precision"] == p]
                if not sel:
                    continue
                series = {v: [r["infer"].get(v) or np.nan for r in sel] for v in variants}
                for kind in ("eager", "graph"):
                    series["PyTorch " + kind] = [torch_ms(r["torch"], kind) or np.nan for r in sel]
                panels.append(("(b) conv3x3 + avgpool2, 32x32, batch 1, %s: median ms" % p,
                               ["C=%d" % r["c"] for r in sel], series, True, None))
        if results.get("models"):
            rows = results["models"]
            series = {}
            for kind in ("graph", "eager"):
                series["infer vs PyTorch " + kind] = [
                    speedup(torch_ms(r["torch"], kind), r["infer"]["median_ms"] if r["infer"] else None) or np.nan
                    for r in rows]
            panels.append(("(c) zoo models: speedup of infer over PyTorch (> 1: infer faster)",
                           ["%s b%d %s" % (r["model"], r["batch"], r["precision"]) for r in rows], series, True, 1.0))
        if not panels:
            print("note: nothing to plot")
            return False
        fig, axes = plt.subplots(len(panels), 1, figsize=(14, 4.2 * len(panels)), squeeze=False)
        for ax, (title, labels, series, logy, line) in zip(axes[:, 0], panels):
            x = np.arange(len(labels))
            width = 0.8 / len(series)
            for i, (name, values) in enumerate(series.items()):
                ax.bar(x + i * width - 0.4 + width / 2, values, width, label=name)
            if line is not None:
                ax.axhline(line, color="black", linewidth=0.8)
            ax.set_xticks(x)
            ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
            if logy:
                ax.set_yscale("log")
            ax.set_title(title, fontsize=10)
            ax.legend(fontsize=7, ncol=min(len(series), 6))
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return True
    except Exception as e:  # noqa: BLE001  (the plot never fails the run)
        print("note: the plot failed (%s: %s); tables and JSON are written" % (type(e).__name__, e))
        return False


def environment():
    env = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
           "tf32_api": tf32_api(),
           "cudnn": torch.backends.cudnn.version(), "numpy": np.__version__,
           "python": platform.python_version(), "host": platform.node()}
    try:
        env["cpu"] = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
                          platform.processor() or "?")
    except OSError:
        env["cpu"] = platform.processor() or "?"
    if shutil.which("nvidia-smi"):
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,"
                                "power.limit", "--format=csv,noheader"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, universal_newlines=True, timeout=30)
            env["nvidia_smi"] = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else ""
        except Exception:  # noqa: BLE001
            env["nvidia_smi"] = ""
    return env


def preflight(a):
    """One tiny cuda op through infer-bench: the cuda backend is built and finds the GPU."""
    j = infer_bench_json(a, "fp32", ["op", "conv2d", "--input", "1x8x8x8", "--out-channels", "8", "--kernel", "3",
                                     "--padding", "1"], "preflight")
    return j.get("environment", {}).get("device", "")


def csv_list(text, kind=str):
    return [kind(x) for x in text.split(",") if x.strip()]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build folder holding infer-bench and model-zoo")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    p.add_argument("--parts", default="table4,conv_pool,models", help="comma-separated subset")
    p.add_argument("--runs", type=int, default=None, help="timed runs per item (default 50; --quick: 5)")
    p.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 10; --quick: 2)")
    p.add_argument("--models", default=None, help="zoo models for (c) (default: all; --quick: lenet5,dcgan)")
    p.add_argument("--precisions", default="fp32,fp16", help="fp32, tf32, fp16 (comma-separated)")
    p.add_argument("--table4-batches", default=None, help="(a) batches (default 1,32; --quick: 1)")
    p.add_argument("--table4-models", default=None,
                   help="(a) Table-4 rows (default: all four; --quick: DCGAN,EB-GAN)")
    p.add_argument("--channels", default=None, help="(b) C values (default 32,128,256,512; --quick: 32,512)")
    p.add_argument("--model-batches", default="1,64", help="(c) batches")
    p.add_argument("--variants", action="store_true", help="(c): infer-bench also forces every other variant per op")
    p.add_argument("--autotune", action="store_true", help="infer sessions autotune their kernels at creation")
    p.add_argument("--no-cudnn-benchmark", action="store_true", help="PyTorch: leave cudnn.benchmark off")
    p.add_argument("--quick", action="store_true", help="smoke test: few runs, a subset of every part")
    p.add_argument("--timeout", type=int, default=600, help="seconds one infer-bench / model-zoo call may take")
    p.add_argument("--tag", default="", help="suffix of the result file names")
    p.add_argument("--replot", metavar="JSON", help="only redraw the plot of a results JSON written by this "
                   "script (next to it, .png instead of .json; e.g. where matplotlib is installed); runs nothing")
    a = p.parse_args()
    started = time.time()
    if a.replot:
        with open(a.replot) as f:
            results = json.load(f)
        png = os.path.splitext(a.replot)[0] + ".png"
        if not plot(results, png):
            sys.exit("error: no plot written")
        log("wrote %s" % png)
        return

    a.runs = a.runs if a.runs is not None else (5 if a.quick else 50)
    a.warmup = a.warmup if a.warmup is not None else (2 if a.quick else 10)
    a.models = csv_list(a.models) if a.models else (["lenet5", "dcgan"] if a.quick else list(ZOO))
    a.table4_batches = csv_list(a.table4_batches or ("1" if a.quick else "1,32"), int)
    a.table4_models = csv_list(a.table4_models) if a.table4_models else (
        ["DCGAN", "EB-GAN"] if a.quick else list(TABLE4_MODELS))
    a.channels = csv_list(a.channels, int) if a.channels else ([32, 512] if a.quick else list(CONV_POOL_CHANNELS))
    a.model_batches = csv_list(a.model_batches, int)
    a.precisions = csv_list(a.precisions)
    parts = csv_list(a.parts)
    for bad in [x for x in a.precisions if x not in DTYPES]:
        sys.exit("error: unknown precision '%s' (fp32, tf32, fp16)" % bad)
    for bad in [x for x in parts if x not in ("table4", "conv_pool", "models")]:
        sys.exit("error: unknown part '%s' (table4, conv_pool, models)" % bad)
    for bad in [x for x in a.table4_models if x not in TABLE4_MODELS]:
        sys.exit("error: unknown Table-4 row '%s' (%s)" % (bad, ", ".join(TABLE4_MODELS)))
    if a.runs < 1 or a.warmup < 0:
        sys.exit("error: --runs must be >= 1 and --warmup >= 0")

    if not torch.cuda.is_available():
        sys.exit("error: PyTorch sees no CUDA device (torch %s, built with CUDA %s)" % (
            torch.__version__, torch.version.cuda))
    a.bench = os.path.join(a.build, "infer-bench")
    a.zoo = os.path.join(a.build, "model-zoo")
    for exe in (a.bench, a.zoo):
        if not os.access(exe, os.X_OK):
            sys.exit("error: %s not found; build it first (cmake --build %s)" % (exe, a.build))
    torch.backends.cudnn.benchmark = not a.no_cudnn_benchmark
    set_torch_precision("fp32")

    now = datetime.datetime.now(datetime.timezone.utc)
    results = {"date": now.strftime("%Y-%m-%d %H:%M UTC"),
               "command": "python3 " + " ".join(shlex.quote(x) for x in sys.argv),
               "environment": environment(), "precisions": a.precisions, "table4_batches": a.table4_batches,
               "table4_models": a.table4_models, "model_batches": a.model_batches, "model_list": a.models,
               "settings": {"runs": a.runs, "warmup": a.warmup, "cudnn_benchmark": not a.no_cudnn_benchmark,
                            "autotune": a.autotune, "quick": a.quick, "parts": parts},
               "errors": []}
    errors = results["errors"]
    with tempfile.TemporaryDirectory(prefix="infer-gpu-bench-") as tmp:
        a.tmp = tmp
        try:
            results["environment"]["infer_device"] = preflight(a)
        except Exception as e:  # noqa: BLE001
            sys.exit("error: infer-bench cannot run on cuda (built without CUDA, or no GPU?): %s" % e)
        for name, fn in (("table4", part_table4), ("conv_pool", part_conv_pool), ("models", part_models)):
            if name not in parts:
                continue
            try:
                results[name] = fn(a, errors)
            except Exception as e:  # noqa: BLE001  (a bug in one part must not lose the others)
                record_error(errors, "part " + name, e)
    results["wall_s"] = time.time() - started
    results["goals"] = compute_goals(results)

    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, "gpu-" + now.strftime("%Y-%m-%d") + (("-" + a.tag) if a.tag else ""))
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1, default=float)
    try:
        text = markdown(results)
    except Exception:  # noqa: BLE001  (the JSON above holds every number; say what broke)
        text = "# infer vs PyTorch on the GPU, %s\n\nThe report failed; the numbers are in %s.\n\n```\n%s```\n" % (
            results["date"], os.path.basename(stem + ".json"), traceback.format_exc())
    if plot(results, stem + ".png"):
        text += "\n![infer vs PyTorch on the GPU](%s)\n" % os.path.basename(stem + ".png")
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)
    log("wrote %s.{md,json%s} in %.0f s; %d item(s) failed" % (
        stem, ",png" if os.path.exists(stem + ".png") else "", results["wall_s"], len(errors)))


if __name__ == "__main__":
    main()
