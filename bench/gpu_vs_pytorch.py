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
      (infer-bench model) vs PyTorch eager, CUDA-graph replay, channels_last + CUDA graph and
      torch.compile(mode=M, dynamic=False) of the channels_last module for each M of --compile-modes
      (max-autotune, reduce-overhead; compiled afresh per model, precision and batch; the wall time of
      the first call recorded as its compile time; at most --compile-timeout-s compile seconds per model
      and mode; Inductor's caches in --inductor-cache-dir) on the SAME weights (infer-bench weights) and
      the same input (--dump); "PyTorch best" is the fastest of them per (model, batch, precision) and
      the ratios are against it (issue 13's goals, and issue 31's with torch.compile in PyTorch best);
      the rows so far are in the JSON after each model;
  vgg16_layers: VGG-16 at batch 64 fp16, its 13 3x3 convolutions one by one: infer's per-node times
      (infer --profile-json, nodes launched one by one between CUDA events) vs each layer alone in
      PyTorch (F.conv2d, NCHW and channels_last, captured as CUDA graphs), TFLOP/s and % of the fp16
      GEMM peak; conv1_1 against its memory floor;
  width_fold: the C_in = 1 / 3 layers (VGG-16 conv1_1, AlexNet conv1, LeNet-5 conv1) at batch 64 fp16:
      infer with the fold_width pass on vs off (infer-bench --pass fold_width=off) and every conv2d
      variant forced, vs PyTorch (best of eager, CUDA graph, channels_last + CUDA graph).
Timing. infer: infer-bench --backend cuda, i.e. Session::benchmark: device time per forward between CUDA
events around CUDA-graph replays, no host copies (trtexec's "GPU Compute Time"). PyTorch: CUDA events
recorded around each call (eager, torch.compile: as called, their own CUDA graphs inside) or each
torch.cuda.CUDAGraph replay (captured after warm-up on a side stream), median per call;
torch.backends.cudnn.benchmark on unless --no-cudnn-benchmark. Items at batch
>= 32 use --large-runs / --large-warmup. Inputs and weights are seeded and never zero. Writes
<out>/gpu-<date>.md (the goals of issues 13 and 31 and the tables), <out>/gpu-<date>.json (every number,
infer-bench's own JSON included) and <out>/gpu-<date>.png (plot; skipped with a note when matplotlib is
missing; --replot JSON draws it later). A failing item is recorded with its error and the run goes on.
--merge A.json B.json ... writes one report of runs made part by part; --selftest builds the report
from synthetic numbers (no GPU needed).
"""
import argparse
import copy
import datetime
import gc
import getpass
import json
import math
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

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The zoo's PyTorch twins, the weight loader and the helpers are shared with the CPU benchmark.
from cpu_vs_pytorch import ZOO, fmt_ms, load_infer_weights, log, rel_err, torch_model  # noqa: E402

# Table 4 of the unified kernel-segregation paper (docs/design.md): (N, C_in, C_out) per row, k4 s2 p1.
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
DEVICE = "cuda"  # where PyTorch runs (an offline test of the script may point it elsewhere)
FAST = "segregated_gemm"  # the issue's "fast segregated" variant
PARTS = ["ceilings", "table4", "conv_pool", "models", "vgg16_layers", "width_fold"]
LARGE_BATCH = 32  # items at this batch or more use --large-runs / --large-warmup
BASELINE_NOISE = 1.05  # "no model slower than today": allowed ratio to the --baseline run's time
# torch.compile configurations (issue 31): the channels_last module compiled with each mode, once per
# (model, precision, batch), dynamic=False; the key its times have in a row's "torch" dict.
COMPILE_KINDS = {"max-autotune": "compile_max_autotune", "reduce-overhead": "compile_reduce_overhead"}
COMPILE_MODES = list(COMPILE_KINDS)  # --compile-modes' default, in the order they run
COMPILE_TIMEOUT_S = 60.0  # --compile-timeout-s: compile seconds per model and mode before skipping the rest
# A cold max-autotune compile on the H100 (torch 2.11) took about 6 s per distinct convolution (groups 1) / linear
# layer it autotunes (VGG-16 84 s for 13, AlexNet 61 s for 8, ResNet-50 251 s for ~47; DCGAN 5 s, EB-GAN 13 s
# for none): the estimate of a model's first max-autotune compile, so one never starts far over the budget.
COMPILE_BASE_S, COMPILE_PER_LAYER_S = 10.0, 6.0
COMPILE_CALLS = 3  # calls that compile and settle a configuration (the first compiles; cudagraph trees warm up
#                    on the first and record on the second) before the timed calls' own warm-up
DYNAMO_CACHE_LIMIT = 256  # torch._dynamo's recompile limits, raised (every configuration is compiled afresh anyway)
# PyTorch's configurations; "PyTorch best" is the fastest of those measured.
TORCH_KINDS = ["eager", "graph", "channels_last_graph"] + [COMPILE_KINDS[m] for m in COMPILE_MODES]
TORCH_KIND_NAMES = {"eager": "eager", "graph": "CUDA graph", "channels_last_graph": "channels_last + CUDA graph",
                    "compile_max_autotune": "torch.compile max-autotune (channels_last)",
                    "compile_reduce_overhead": "torch.compile reduce-overhead (channels_last)"}


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
CONV_OPS = ("conv2d", "conv_pool2d", "conv_transpose2d")  # profile nodes that can hold a convolution
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


# ---- torch.compile (issue 31) ----

def inductor_cache_base(option):
    """The folder holding the inductor caches of this run: --inductor-cache-dir, else $TORCHINDUCTOR_CACHE_DIR
    as this process found it, else inductor's own default (<tmp>/torchinductor_<user>). A persistent folder
    makes a second run fast: its FX-graph cache and autotuning results are reused."""
    if option:
        return os.path.abspath(option)
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return os.path.abspath(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
        return default_cache_dir()
    except Exception:  # noqa: BLE001  (older layouts: the same rule)
        return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser()))


def compile_setup(a):
    """Once, before the first compile (idempotent): torch._dynamo's recompile limits raised (each configuration
    is compiled afresh after torch._dynamo.reset(), so they should never bind); returns the settings the report
    states. a.compile_modes: the modes to run ([] = none); a.compile_timeout_s; a.inductor_cache_base."""
    info = {"modes": list(a.compile_modes), "timeout_s": a.compile_timeout_s, "calls": COMPILE_CALLS,
            "cache_base": a.inductor_cache_base, "cache_per_precision": True,
            "available": hasattr(torch, "compile"), "dynamo_limits": {}}
    try:
        import triton  # noqa: F401  (Inductor's GPU code generator)
        info["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001
        info["triton"] = "not importable (%s)" % type(e).__name__
    if not a.compile_modes or not info["available"]:
        return info
    try:  # what bounds a cold compile: Inductor's parallel Triton compile workers
        from torch._inductor import config as inductor_config
        info["compile_threads"] = int(inductor_config.compile_threads)
    except Exception:  # noqa: BLE001
        pass
    try:
        import torch._dynamo as dynamo  # (a plain "import torch._dynamo" would make torch local to this function)
        cfg = dynamo.config
        for name, value in (("cache_size_limit", DYNAMO_CACHE_LIMIT), ("recompile_limit", DYNAMO_CACHE_LIMIT),
                            ("accumulated_cache_size_limit", 4 * DYNAMO_CACHE_LIMIT),
                            ("accumulated_recompile_limit", 4 * DYNAMO_CACHE_LIMIT)):
            if hasattr(cfg, name):
                setattr(cfg, name, max(int(getattr(cfg, name)), value))
                info["dynamo_limits"][name] = int(getattr(cfg, name))
    except Exception as e:  # noqa: BLE001  (the compiles then record their own errors)
        info["setup_error"] = "%s: %s" % (type(e).__name__, e)
    return info


def compile_cache_dir(a, precision):
    """Points Inductor at <cache base>/<precision>: its FX-graph cache key holds cuBLAS's TF32 setting but not
    cuDNN's, so a graph compiled under tf32 must never be reused under strict fp32 (or the reverse)."""
    path = os.path.join(a.inductor_cache_base, precision)
    os.makedirs(path, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    return path


def inductor_counters():
    """torch._dynamo's "inductor" counters (FX-graph cache hits and misses, CUDA-graph skips, ...), or {}."""
    try:
        from torch._dynamo.utils import counters
        return dict(counters["inductor"])
    except Exception:  # noqa: BLE001
        return {}


def counter_delta(before, after):
    """The cache and CUDA-graph counters that changed between two inductor_counters() snapshots."""
    keys = [k for k in after if ("cache" in k or "cudagraph" in k) and after[k] != before.get(k, 0)]
    return {k: after[k] - before.get(k, 0) for k in sorted(keys)}


def reset_compiled():
    """Drops every compiled graph (torch._dynamo.reset: no recompile limit can bind, the next configuration
    compiles afresh) and the CUDA-graph trees' memory pools, then frees the cached blocks."""
    for step in ("dynamo", "cudagraph_trees"):
        try:
            if step == "dynamo":
                import torch._dynamo as dynamo
                dynamo.reset()
            else:
                from torch._inductor import cudagraph_trees
                cudagraph_trees.reset_cudagraph_trees()
        except Exception:  # noqa: BLE001  (not there in this version, or nothing to reset)
            pass
    gc.collect()
    free_cuda()


def compile_skip_reason(a, mode, state):
    """Why the model's next configuration in `mode` is skipped (None: it runs). Each mode has its own budget of
    compile seconds per model (--compile-timeout-s, 0 = none): skipped once spent, or where this mode's last
    compile of the model (for the first max-autotune one: COMPILE_BASE_S + COMPILE_PER_LAYER_S per autotuned
    layer, state["layers"]) would overrun it. state: {"spent_s": {mode: s}, "last_s": {mode: s}, "layers": n}."""
    budget = a.compile_timeout_s
    if not budget or budget <= 0:
        return None
    spent = state["spent_s"].get(mode, 0.0)
    if spent >= budget:
        return "%s budget of this model spent (--compile-timeout-s %g: %.0f s)" % (mode, budget, spent)
    last, how = state["last_s"].get(mode), "its last compile of this model took"
    if last is None and mode == "max-autotune" and state.get("layers") is not None:
        last = COMPILE_BASE_S + COMPILE_PER_LAYER_S * state["layers"]
        how = "a first compile estimated from %d autotuned layers at" % state["layers"]
    if last is not None and spent + last > budget:
        return "%s budget of this model would be exceeded (--compile-timeout-s %g: %.0f s spent, %s %.0f s)" % (
            mode, budget, spent, how, last)
    return None


def autotuned_layers(net, sample_shape, dtype=torch.float32):
    """The distinct convolutions (groups 1) and linear layers of net (on the GPU) by input and weight shape, stride,
    padding and dilation at batch 1: about what max-autotune benchmarks one by one (forward hooks, one call)."""
    seen, hooks = set(), []

    def hook(m, inputs, output):
        seen.add((type(m).__name__, tuple(inputs[0].shape[1:]), tuple(m.weight.shape), str(getattr(m, "stride", "")),
                  str(getattr(m, "padding", "")), str(getattr(m, "dilation", ""))))

    for m in net.modules():
        if (isinstance(m, nn.Conv2d) and m.groups == 1) or isinstance(m, nn.Linear):
            hooks.append(m.register_forward_hook(hook))
    try:
        with torch.no_grad():
            net(random_tensor((1,) + tuple(sample_shape), 7, 1.0, dtype))
    finally:
        for h in hooks:
            h.remove()
    return len(seen)


def time_compiled(a, module, x, batch, mode, y_ref=None):
    """torch.compile(module, mode=mode, dynamic=False) called on x under torch.no_grad(): the wall time of the
    first call (Dynamo, Inductor, Triton, autotuning: "compile_s") and of the next COMPILE_CALLS - 1 calls
    (CUDA-graph trees warm up on the first call and record on the second: "settle_s"), synchronised; then
    timed as called, with CUDA events around each call (time_events; never inside another CUDA-graph
    capture: max-autotune and reduce-overhead replay their own CUDA graphs). Each call begins a new
    CUDA-graph step (torch.compiler.cudagraph_mark_step_begin), as an inference loop does. y_ref: the
    output the compiled one's relative error is taken against ("rel_err"). Raises on failure; the caller
    calls reset_compiled() afterwards."""
    runs, warmup = runs_for(a, batch)
    warmup = max(warmup, 3)
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    compiled = torch.compile(module, mode=mode, dynamic=False)

    def call():
        if mark is not None:
            mark()
        return compiled(x)

    before = inductor_counters()
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = call()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        for _ in range(COMPILE_CALLS - 1):
            y = call()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        err = rel_err(y.float().cpu().numpy(), y_ref) if y_ref is not None else None
        del y  # a CUDA-graph output: the next replay overwrites it
    out = time_events(call, runs, warmup)
    out.update({"mode": mode, "compile_s": t1 - t0, "settle_s": t2 - t1, "rel_err": err,
                "counters": counter_delta(before, inductor_counters())})
    return out


def torch_compiled(a, t, state, name, batch, precision, net_cl, x_cl, y_ref):
    """The torch.compile configurations of one model row (a.compile_modes, each in its own try): adds
    t[kind] (time_compiled's dict), t[kind + "_error"] or t[kind + "_skipped"]. state: this model's
    {"spent_s": {mode: compile seconds so far}, "last_s": {mode: its last compile seconds}, "layers": n}."""
    for mode in getattr(a, "compile_modes", []):
        kind = COMPILE_KINDS[mode]
        why = compile_skip_reason(a, mode, state)
        if why:
            t[kind + "_skipped"] = why
            log("   %s %s batch %d %s skipped: %s" % (name, TORCH_KIND_NAMES[kind], batch, precision, why))
            continue
        t0 = time.perf_counter()
        try:
            compile_cache_dir(a, precision)
            r = time_compiled(a, net_cl, x_cl, batch, mode, y_ref)
            t[kind] = r
            took = r["compile_s"] + r["settle_s"]
            log("   %s %s batch %d %s: compile %.1f s (+ %.1f s settling), %s ms%s" % (
                name, TORCH_KIND_NAMES[kind], batch, precision, r["compile_s"], r["settle_s"],
                fmt_ms(r["median_ms"]), ", cache %s" % r["counters"] if r["counters"] else ""))
        except Exception as e:  # noqa: BLE001  (one configuration: recorded, the others go on)
            took = time.perf_counter() - t0
            t[kind + "_error"] = "%s: %s (after %.0f s)" % (type(e).__name__, str(e).strip().splitlines()[0]
                                                          if str(e).strip() else "", took)
            t[kind + "_traceback"] = traceback.format_exc()[-6000:]  # JSON only
            log("   %s %s batch %d %s failed: %s" % (name, TORCH_KIND_NAMES[kind], batch, precision, t[kind + "_error"]))
        reset_compiled()  # outside the except: its traceback no longer holds the compiled module
        state["spent_s"][mode] = state["spent_s"].get(mode, 0.0) + took
        state["last_s"][mode] = took


def random_tensor(shape, seed, scale, dtype):
    """Seeded, uniform in [-scale, -0.01 scale] U [0.01 scale, scale] (as infer-bench's data: never zero)."""
    g = torch.Generator(device=DEVICE)
    g.manual_seed(seed)
    magnitude = torch.rand(shape, generator=g, device=DEVICE) * 0.99 + 0.01
    sign = torch.randint(0, 2, shape, generator=g, device=DEVICE) * 2 - 1
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
        rows += model_rows(a, errors, name, fb, net_cpu, INPUT_SHAPES[name])
        del net_cpu
        free_cuda()
        if os.path.exists(fb):
            os.remove(fb)
        if getattr(a, "on_progress", None):  # the rows so far into the results JSON, in case the run is cut off
            a.on_progress("models", rows)
    return rows


def model_rows(a, errors, name, fb, net_cpu, sample_shape):
    """One model at every precision of a.precisions and batch of a.model_batches: infer's default plan
    (infer-bench model on the .fb; also its "no passes" run unless the JSON lacks it) vs PyTorch eager,
    CUDA graph and channels_last + CUDA graph on net_cpu (the same weights as the .fb, on the CPU; moved
    to the GPU here; None: infer only) and infer's dumped input (a seeded random one of sample_shape, the
    per-sample shape, when infer-bench failed), then torch.compile of the channels_last module in each
    mode of a.compile_modes (torch_compiled; within a.compile_timeout_s compile seconds per model and mode).
    Shared by part_models (zoo models) and byom_vs_peers.py (ONNX-imported models)."""
    rows = []
    net32 = None
    compile_state = {"spent_s": {}, "last_s": {}, "layers": None}  # this model's compile seconds per mode
    for precision in a.precisions:
        net, net_cl = None, None
        try:
            if net_cpu is not None:
                if net32 is None:
                    net32 = net_cpu.to(DEVICE).eval()  # moves the module: no second host copy
                    if "max-autotune" in getattr(a, "compile_modes", []) and a.compile_timeout_s:
                        try:  # the estimate of its first max-autotune compile (--compile-timeout-s)
                            compile_state["layers"] = autotuned_layers(net32, sample_shape)
                        except Exception as e:  # noqa: BLE001  (no estimate: the first compile just runs)
                            log("   %s: autotuned layers not counted: %s: %s" % (name, type(e).__name__, e))
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
                   "rel_err_cl": None, "rel_err_vs_fp32": None, "compile_rel_err_vs": None, "infer_bench": None,
                   "runs": runs_for(a, batch)[0], "autotuned_layers": compile_state["layers"]}
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
                x = x32 = x_cl = y_infer = None
                try:
                    if os.path.exists(os.path.join(ddir, "output_0.npy")):
                        x32 = torch.from_numpy(np.load(os.path.join(ddir, "input_0.npy"))).to(DEVICE)
                        y_infer = np.load(os.path.join(ddir, "output_0.npy"))
                    else:
                        x32 = random_tensor((batch,) + tuple(sample_shape), 6, 1.0, torch.float32)
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
                except Exception as e:  # noqa: BLE001
                    record_error(errors, item + " (PyTorch)", e)
                if net_cl is not None and x_cl is not None and getattr(a, "compile_modes", None):
                    # torch.compile on the channels_last module and input; each mode in its own try. The
                    # compiled output's error is against infer's (PyTorch eager's where infer did not run).
                    t = row["torch"] if row["torch"] is not None else {}
                    try:
                        set_torch_precision(precision)
                        ref = y_infer
                        if ref is None:
                            with torch.no_grad():
                                ref = net(x).float().cpu().numpy()
                        row["compile_rel_err_vs"] = "infer" if y_infer is not None else "PyTorch eager"
                        torch_compiled(a, t, compile_state, name, batch, precision, net_cl, x_cl, ref)
                    except Exception as e:  # noqa: BLE001  (torch_compiled records its own; this is a bug's net)
                        record_error(errors, item + " (PyTorch torch.compile)", e)
                    row["torch"] = t
                del x, x32, x_cl
            shutil.rmtree(ddir, ignore_errors=True)
            free_cuda()
            rows.append(row)
            t = row["torch"] or {}
            log("   %s: infer %s ms, PyTorch eager %s ms, graph %s ms, channels_last graph %s ms, compile "
                "max-autotune %s ms, reduce-overhead %s ms, rel err %s" % (
                    item, fmt_ms(row["infer"]["median_ms"] if row["infer"] else None),
                    fmt_ms(torch_ms(t, "eager")), fmt_ms(torch_ms(t, "graph")),
                    fmt_ms(torch_ms(t, "channels_last_graph")), fmt_ms(torch_ms(t, "compile_max_autotune")),
                    fmt_ms(torch_ms(t, "compile_reduce_overhead")),
                    "%.1e" % row["rel_err"] if row["rel_err"] is not None else "n/a"))
        if net is not None and net is not net32:
            del net
        del net_cl
        free_cuda()
    del net32
    free_cuda()
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
            z = torch.empty((n, n), dtype=DTYPES[precision], device=DEVICE)
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
        src = torch.ones(nbytes // 2, dtype=torch.float16, device=DEVICE)
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
    convs = [i for i, n in enumerate(nodes) if n.get("op") in CONV_OPS]
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
           "profile_fold_off": None, "profile_conv1_1_folded": None, "profile_conv1_1_unfolded": None, "layers": []}
    fb = os.path.join(a.tmp, "vgg16_layers.fb")
    try:
        run_cmd([a.zoo, "vgg16", "--out", fb], a.timeout)
        # conv1_1 width-folded and not, the rest of the plan as by default: the seed's claim inside the model
        for key, extra in (("profile", []), ("profile_fold_off", ["--pass", "fold_width=off"]),
                           ("profile_conv1_1_folded", ["--kernel", "conv2d:conv1_1=" + a.folded_variant]),
                           ("profile_conv1_1_unfolded", ["--kernel", "conv2d:conv1_1=" + a.unfolded_variant])):
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
               "infer_ms": None, "infer_nodes": [], "infer_fold_off_ms": None, "infer_folded_ms": None,
               "infer_unfolded_ms": None, "torch": None}
        nodes = matched.get(name) or []
        if nodes:
            row["infer_ms"] = sum(n["time_ms"] for n in nodes)
            row["infer_nodes"] = [{k: n.get(k) for k in ("name", "op", "variant", "layout", "fused", "output_shape",
                                                         "flops", "time_ms")} for n in nodes]
        if matched_off.get(name):
            row["infer_fold_off_ms"] = sum(n["time_ms"] for n in matched_off[name])
        for key, field in (("profile_conv1_1_folded", "infer_folded_ms"), ("profile_conv1_1_unfolded", "infer_unfolded_ms")):
            if name == "conv1_1" and res.get(key):
                hit = match_layer_nodes(res[key], names).get(name)
                row[field] = sum(n["time_ms"] for n in hit) if hit else None
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


def torch_best(t):
    """(kind, median ms) of PyTorch's fastest configuration measured, (None, None) when none ran."""
    measured = [(torch_ms(t, k), k) for k in TORCH_KINDS if torch_ms(t, k)]
    if not measured:
        return None, None
    ms, kind = min(measured)
    return kind, ms


def layer_precisions(results):
    """The precisions of parts (a) and (b) (results written before --layer-precisions: --precisions)."""
    return results.get("layer_precisions", results["precisions"])


def pct(v):
    return "%.0f%%" % (100 * v) if v is not None else "n/a"


def ceiling(results, key, field):
    c = (results.get("ceilings") or {}).get(key)
    return c.get(field) if c else None


def fold_pair(row, settings):
    """(folded ms, how, unfolded ms, how) of one width_fold row: the default plan (fold_width on) vs the
    default plan with --pass fold_width=off when both ran and the first folds; else the forced folded vs
    unfolded variants when both ran (one method on both sides; e.g. VGG conv1_1, whose default is now
    the unfolded mma_small_cin_nhwc); else whichever of each side there is."""
    folded_v, unfolded_v = settings.get("folded_variant", "cudnn_folded"), settings.get("unfolded_variant", "cudnn")
    plan_on = (row["fold_on"], "default plan (fold_width on: %s)" % ", ".join(row["fold_on_kernels"])) \
        if row.get("fold_on") is not None else None
    plan_off = (row["fold_off"], "--pass fold_width=off (%s)" % ", ".join(row["fold_off_kernels"])) \
        if row.get("fold_off") is not None else None
    forced_on = (row["variants"][folded_v], "forced conv2d=%s" % folded_v) \
        if row["variants"].get(folded_v) is not None else None
    forced_off = (row["variants"][unfolded_v], "forced conv2d=%s" % unfolded_v) \
        if row["variants"].get(unfolded_v) is not None else None
    plan_folds = any(k.endswith("=" + folded_v) for k in row.get("fold_on_kernels", []))
    if plan_on and plan_off and (plan_folds or not (forced_on and forced_off)):
        on, off = plan_on, plan_off
    elif forced_on and forced_off:
        on, off = forced_on, forced_off
    else:
        on, off = plan_on or forced_on or (None, "n/a"), plan_off or forced_off or (None, "n/a")
    return on[0], on[1], off[0], off[1]


def memory_floor_ms(nbytes, results):
    rate = ceiling(results, "copy", "tb_per_s")
    return nbytes / (rate * 1e12) * 1e3 if rate else None


def compute_goals(results):
    """Every goal of issue 13 ("Goals"), plus the width-folding claim of must 3 (seed 004): target,
    measured, met / missed / not measured."""
    goals = []

    def add(goal, target, measured, ok):
        goals.append({"goal": goal, "target": target, "measured": measured,
                      "status": "not measured" if ok is None else ("met" if ok else "missed")})

    md = results.get("models") or []
    model_list = results.get("model_list", [])
    precisions = results.get("precisions", [])
    batches = results.get("model_batches", [])

    def find(model, batch, p):
        return next((r for r in md if r["model"] == model and r["batch"] == batch and r["precision"] == p), None)

    def vs_best(r):
        if not r or not r["infer"]:
            return None, "n/a"
        im = r["infer"]["median_ms"]
        kind, best = torch_best(r["torch"])
        s = speedup(best, im)
        if s is None:
            return None, "infer %s ms; PyTorch n/a" % fmt_ms(im)
        return s, "%s (infer %s vs %s ms, PyTorch %s); vs eager %s" % (
            fx(s), fmt_ms(im), fmt_ms(best), TORCH_KIND_NAMES[kind], fx(speedup(torch_ms(r["torch"], "eager"), im)))

    def model_goal(m, batch, p, target):
        if m not in model_list or batch not in batches or p not in precisions:
            add("%s batch %d %s: infer vs PyTorch best" % (m, batch, p), ">= %.2fx" % target, "not in this run", None)
            return
        s, text = vs_best(find(m, batch, p))
        add("%s batch %d %s: infer vs PyTorch best" % (m, batch, p), ">= %.2fx" % target, text,
            None if s is None else s >= target)

    if "models" in results:
        for m in model_list:
            model_goal(m, 64, "fp16", 1.3 if m in ("dcgan", "ebgan", "vgg16") else 1.0)
        for m in model_list:
            model_goal(m, 64, "fp32", 1.5 if m in GENERATORS else 0.95)
        for p in ("fp32", "fp16"):
            for m in model_list:
                model_goal(m, 1, p, 1.0)
        base = results.get("baseline")
        if base:
            for p in ("fp32", "fp16"):
                for m in model_list:
                    r, then = find(m, 1, p), base["infer"].get("%s/1/%s" % (m, p))
                    now = r["infer"]["median_ms"] if r and r["infer"] else None
                    s = speedup(then, now)
                    add("%s batch 1 %s: infer no slower than on %s" % (m, p, base["date"]),
                        "<= %.2f x the earlier time" % BASELINE_NOISE,
                        "%s vs %s ms (%s)" % (fmt_ms(now), fmt_ms(then), fx(s)) if s else "n/a",
                        None if s is None else now <= then * BASELINE_NOISE)
        else:
            add("batch 1: no model slower than before this issue", "infer's batch-1 times <= the earlier run's",
                "no --baseline results JSON given", None)
        r = find("ebgan", 1, "fp32")
        im = r["infer"]["median_ms"] if r and r["infer"] else None
        add("ebgan batch 1 fp32: infer time", "<= 0.25 ms", "%s ms" % fmt_ms(im), None if im is None else im <= 0.25)

    cp = results.get("conv_pool")
    if cp is not None:
        r = next((r for r in cp if r["precision"] == "fp16" and r["c"] == 512), None)
        eager = torch_ms(r["torch"], "eager") if r else None
        if r and r["infer"] and eager:
            v = min(r["infer"], key=lambda k: r["infer"][k])
            s = speedup(eager, r["infer"][v])
            add("conv3x3+avgpool2, C=512, batch 1, fp16: infer's fastest conv_pool2d variant vs PyTorch eager "
                "conv2d + avg_pool2d", ">= 4.4x",
                "%s (%s %s vs %s ms); direct_sum %s; vs PyTorch CUDA graph %s" % (
                    fx(s), v, fmt_ms(r["infer"][v]), fmt_ms(eager),
                    fx(speedup(eager, r["infer"].get("direct_sum"))),
                    fx(speedup(torch_ms(r["torch"], "graph"), r["infer"][v]))), s >= 4.4)
        else:
            add("conv3x3+avgpool2, C=512, batch 1, fp16 vs PyTorch eager", ">= 4.4x", "n/a", None)

    peak = ceiling(results, "gemm_fp16", "tflops")
    vl = results.get("vgg16_layers")
    if vl is not None:
        sel = [r for r in vl["layers"] if r["c_out"] in (256, 512)]
        shares = [(r["layer"], r["flops"] / (r["infer_ms"] * 1e-3) / 1e12 / peak)
                  for r in sel if r["infer_ms"] and peak]
        goal = ("VGG-16 batch %d fp16: infer's 3x3 convolutions with 256 and 512 output channels, share of the "
                "measured fp16 GEMM peak (%s TFLOP/s)" % (vl["batch"], "%.0f" % peak if peak else "n/a"))
        if shares and len(shares) == len(sel):
            worst = min(shares, key=lambda x: x[1])
            add(goal, ">= 80% on each",
                "lowest %s %s; %s" % (worst[0], pct(worst[1]), ", ".join("%s %s" % (n, pct(v)) for n, v in shares)),
                worst[1] >= 0.8)
        else:
            add(goal, ">= 80% on each", "n/a (%s)" % (
                "no GEMM peak measured" if not peak else "infer times for %d of %d layers" % (len(shares), len(sel))),
                None)

    # conv1_1 vs its memory floor: the VGG-16 profile's node (the layer inside the model, its default plan)
    # where it ran, else the one-conv model of width_fold (its plan converts the 411 MB output back to NCHW,
    # which the model's next layer never pays).
    wf = results.get("width_fold") or []
    r_wf = next((r for r in wf if r["layer"] == "VGG-16 conv1_1"), None)
    r_vl = next((r for r in vl["layers"] if r["layer"] == "conv1_1"), None) if vl else None
    nbytes = (r_vl or r_wf or {}).get("bytes")
    floor = memory_floor_ms(nbytes, results) if nbytes else None
    on = fold_pair(r_wf, results["settings"])[0] if r_wf else None
    node_variant = ", ".join("%s=%s" % (n["op"], n["variant"]) for n in r_vl["infer_nodes"]) if r_vl else ""
    t, how = ((r_vl["infer_ms"], "VGG-16 profile node, %s" % node_variant) if r_vl and r_vl["infer_ms"]
              else (on, "one-conv model, infer-bench") if on else (None, ""))
    if "width_fold" in results or vl is not None:
        add("VGG-16 conv1_1 (batch %d fp16) vs its memory floor (input + output + weight bytes at the "
            "measured copy rate)" % (r_vl or r_wf)["batch"], "<= 1.5x the floor",
            "%.2fx (%s ms, %s, vs floor %s ms)%s" % (
                t / floor, fmt_ms(t), how, fmt_ms(floor),
                "; one-conv model (output converted to NCHW): %s ms" % fmt_ms(on) if on and r_vl and r_vl["infer_ms"] else "")
            if t and floor else "n/a", None if not (t and floor) else t <= 1.5 * floor)
    # seed 004's claim inside VGG-16: conv1_1 forced to the folded and the unfolded cuDNN variant
    # (--kernel conv2d:conv1_1=...), the rest of the plan unchanged
    if r_vl and (r_vl.get("infer_folded_ms") or r_vl.get("infer_unfolded_ms")):
        fo, un = r_vl.get("infer_folded_ms"), r_vl.get("infer_unfolded_ms")
        s2 = speedup(un, fo)
        a_ = results["settings"]
        add("width folding (must 3, seed 004): VGG-16 conv1_1 inside the model, batch %d fp16, folded faster than "
            "unfolded" % r_vl["batch"], "> 1.0x",
            "%s (conv1_1 forced %s %s ms, %s %s ms; the default plan's %s: %s ms)" % (
                fx(s2), a_.get("folded_variant", "cudnn_folded"), fmt_ms(fo), a_.get("unfolded_variant", "cudnn"),
                fmt_ms(un), node_variant, fmt_ms(r_vl["infer_ms"])), None if s2 is None else s2 > 1.0)

    for r in wf:
        on, on_how, off, off_how = fold_pair(r, results["settings"])
        kind, best = torch_best(r["torch"])
        s = speedup(off, on)
        add("width folding (must 3, seed 004): %s, batch %d fp16, folded faster than unfolded" % (
            r["layer"], r["batch"]),
            "> 1.0x", "%s (folded %s ms: %s; unfolded %s ms: %s); folded vs PyTorch best (%s %s ms): %s" % (
                fx(s), fmt_ms(on), on_how, fmt_ms(off), off_how,
                TORCH_KIND_NAMES.get(kind, "n/a"), fmt_ms(best), fx(speedup(best, on))),
            None if s is None else s > 1.0)
    return goals + compute_goals_31(results)


ISSUE31_TARGETS = {(64, "fp16"): {"dcgan": 1.3, "ebgan": 1.3, "vgg16": 1.3}}  # else 1.0x


def ratio_goal(model_rows_by_name, models, target_of):
    """One 'every model >= target x PyTorch best' goal (issue 31): met only where every model was measured
    with torch.compile max-autotune among PyTorch's configurations; missed where any ratio is below its
    target (whatever else is missing); otherwise not measured. model_rows_by_name: {model: row or None};
    a row: (infer ms or None, torch dict or None)."""
    parts, low, missing, no_compile = [], [], [], []
    for m in models:
        im, t = model_rows_by_name.get(m) or (None, None)
        kind, best = torch_best(t)
        s = speedup(best, im)
        if s is None:
            missing.append(m)
            parts.append("%s n/a" % m)
            continue
        if "compile_max_autotune" not in (t or {}):
            no_compile.append(m)
        if s < target_of(m):
            low.append(m)
        parts.append("%s %s (%s)" % (m, fx(s), kind))
    text = ", ".join(parts)
    if no_compile:
        text += "; without a torch.compile max-autotune time (PyTorch best may be slower than it): %s" % (
            ", ".join(no_compile))
    status = False if low else (None if missing or no_compile or not models else True)
    return text, status


def compute_goals_31(results):
    """Issue 31's goals on the zoo models: every model at batch 1 and 64, fp32 and fp16, >= 1.0x PyTorch best
    (now with torch.compile); DCGAN, EB-GAN and VGG-16 at batch 64 fp16 >= 1.3x; EB-GAN batch 1 fp32 <= 0.25
    ms and batch 64 fp16 <= 1.75 ms. Rows carry "issue": 31."""
    md = results.get("models")
    if md is None:
        return []
    goals = []

    def add(goal, target, measured, ok):
        goals.append({"issue": 31, "goal": goal, "target": target, "measured": measured,
                      "status": "not measured" if ok is None else ("met" if ok else "missed")})

    def find(model, batch, p):
        r = next((r for r in md if r["model"] == model and r["batch"] == batch and r["precision"] == p), None)
        return (r["infer"]["median_ms"] if r["infer"] else None, r["torch"]) if r else None

    listed = results.get("model_list") or []
    models = [m for m in ZOO if m in listed] + [m for m in listed if m not in ZOO]
    absent = [m for m in ZOO if m not in listed]
    for batch in (1, 64):
        for p in ("fp32", "fp16"):
            special = ISSUE31_TARGETS.get((batch, p), {})
            goal = "batch %d %s: every zoo model vs PyTorch best (with torch.compile)" % (batch, p)
            target = ">= 1.00x" + "".join("; %s >= %.2fx" % (m, v) for m, v in sorted(special.items()))
            if batch not in (results.get("model_batches") or []) or p not in (results.get("precisions") or []):
                add(goal, target, "not in this run", None)
                continue
            text, ok = ratio_goal({m: find(m, batch, p) for m in models}, models,
                                  lambda m: special.get(m, 1.0))
            if absent:
                text += "; not in this run: %s" % ", ".join(absent)
                ok = False if ok is False else None
            add(goal, target, text, ok)
    for model, batch, p, limit in (("ebgan", 1, "fp32", 0.25), ("ebgan", 64, "fp16", 1.75)):
        r = find(model, batch, p)
        im = r[0] if r else None
        add("%s batch %d %s: infer time" % (model, batch, p), "<= %.2f ms" % limit, "%s ms" % fmt_ms(im),
            None if im is None else im <= limit)
    return goals


# ---- report ----

def compile_cell(t, kind):
    """A torch.compile configuration's median ms, or why there is none: skipped / failed / - (not run)."""
    t = t or {}
    if kind in t:
        return fmt_ms(t[kind]["median_ms"])
    return "failed" if kind + "_error" in t else "skipped" if kind + "_skipped" in t else "-"


def compile_seconds_cell(t):
    """'max-autotune s / reduce-overhead s': the wall time of each configuration's first call ('-': none)."""
    t = t or {}
    return " / ".join("%.1f" % t[k]["compile_s"] if k in t and t[k].get("compile_s") is not None else "-"
                      for k in (COMPILE_KINDS[m] for m in COMPILE_MODES))


def cache_text(counters):
    """The FX-graph cache counters of one compile, e.g. 'hit 1' / 'miss 2' ('-': none counted)."""
    c = counters or {}
    parts = ["%s %d" % (label, c[k]) for k, label in (("fxgraph_cache_hit", "hit"), ("fxgraph_cache_miss", "miss"),
                                                      ("fxgraph_cache_bypass", "bypass")) if c.get(k)]
    return ", ".join(parts) or "-"


def compile_section(results, rows):
    """The torch.compile section: its settings and one line per (row, mode): median ms, compile and settling
    seconds, FX-graph cache, CUDA-graph skips, relative error, or why it did not run. rows: (label, row)
    with row["batch"], row["precision"], row["torch"] (and row["compile_rel_err_vs"])."""
    info = results.get("compile") or {}
    lines = [(label, r, m) for label, r in rows for m in COMPILE_MODES
             if any(COMPILE_KINDS[m] + suffix in (r.get("torch") or {}) for suffix in ("", "_error", "_skipped"))]
    if not lines and not info.get("modes"):
        return []
    out = ["## torch.compile\n"]
    out.append("`torch.compile(module, mode=M, dynamic=False)` of the channels_last module (fp16: `.half()` first), "
               "called on a channels_last input under `torch.no_grad()`, compiled afresh for every (model, precision, "
               "batch, mode) after `torch._dynamo.reset()` and the CUDA-graph trees' reset; `compile s`: the wall time "
               "of the first call (Dynamo, Inductor, Triton, autotuning), `settle s`: the next %d calls (CUDA-graph "
               "warm-up and recording); then timed as called with CUDA events (max-autotune and reduce-overhead "
               "replay their own CUDA graphs; reduce-overhead copies the input into its graph's buffer, part of "
               "the time), `torch.compiler.cudagraph_mark_step_begin()` before each call. Modes: %s; compile "
               "budget per model and mode: %s; Triton %s; Inductor caches under `%s`, one folder per precision (FX-graph "
               "cache: `hit` = a graph compiled by an earlier run was reused, so its compile time is not a cold "
               "one); Dynamo limits %s.%s\n" % (
                   info.get("calls", COMPILE_CALLS) - 1, ", ".join(info.get("modes") or []) or "none",
                   "%g s (--compile-timeout-s)" % info["timeout_s"] if info.get("timeout_s") else "none",
                   "%s (Inductor compile threads %s)" % (info.get("triton", "n/a"), info.get("compile_threads", "n/a")),
                   info.get("cache_base", "n/a"),
                   ", ".join("%s %s" % kv for kv in sorted((info.get("dynamo_limits") or {}).items())) or "n/a",
                   " Setup: `%s`." % info["setup_error"] if info.get("setup_error") else ""))
    if lines:
        out.append("| model | batch | precision | mode | median ms | compile s | settle s | FX-graph cache | "
                   "CUDA-graph skips | rel err | note |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for label, r, m in lines:
            t, k = r["torch"], COMPILE_KINDS[m]
            c = t.get(k)
            if c:
                vs = r.get("compile_rel_err_vs") or "infer"
                out.append("| %s | %d | %s | %s | %s | %.1f | %.1f | %s | %s | %s | %s |" % (
                    label, r["batch"], r["precision"], m, fmt_ms(c["median_ms"]), c["compile_s"], c["settle_s"],
                    cache_text(c.get("counters")), (c.get("counters") or {}).get("cudagraph_skips", 0),
                    "%.1e" % c["rel_err"] if c.get("rel_err") is not None else "n/a",
                    "" if vs == "infer" else "rel err vs %s" % vs))
            else:
                why = t.get(k + "_skipped") or t.get(k + "_error") or ""
                out.append("| %s | %d | %s | %s | %s | | | | | | %s |" % (
                    label, r["batch"], r["precision"], m, "skipped" if k + "_skipped" in t else "failed",
                    short_text(why).replace("|", "/").replace("`", "'")))
        out.append("")
    return out


def short_text(text, n=200):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + " ..."


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
               "tf32 = TF32 on in both (%s); fp16 = the module and input `.half()`; `torch.no_grad()`; "
               "channels_last = module and input `.to(memory_format=torch.channels_last)`" % (
                   "on" if a["cudnn_benchmark"] else "off",
                   "`cuda.matmul.fp32_precision` and `cudnn.conv.fp32_precision` = 'ieee'"
                   if env.get("tf32_api") == "fp32_precision" else
                   "`cudnn.allow_tf32` and `cuda.matmul.allow_tf32` False",
                   "the same = 'tf32'" if env.get("tf32_api") == "fp32_precision" else "the same flags True"))
    out.append("- timing: median of %d runs after %d warm-up runs; items at batch >= %d (models at batch 64, "
               "Table-4 at batch 32, vgg16_layers, width_fold) and the ceilings: %d runs after %d warm-up runs "
               "(PyTorch: at least 3 warm-up runs). infer: "
               "`infer-bench --backend cuda` (Session::benchmark: device time per forward between CUDA "
               "events around CUDA-graph replays, no host copies). PyTorch: CUDA events around each call "
               "(eager: the GPU time between the events, so launch overhead counts where it leaves the GPU "
               "idle) or each `torch.cuda.CUDAGraph` replay (graph, channels_last graph); the torch.compile "
               "configurations of (c) around each call as called (section \"torch.compile\"). PyTorch best: the "
               "fastest of the configurations measured for that item." % (
                   a["runs"], a["warmup"], LARGE_BATCH, a.get("large_runs", a["runs"]),
                   a.get("large_warmup", a["warmup"])))
    out.append("- ratios: `A vs B` is B's time / A's time (> 1: A is faster)")
    out.append("- command: `%s`" % results["command"])
    out.append("- wall time of the whole run: %.0f s (%s)" % (results["wall_s"], ", ".join(
        "%s %.0f s" % (k, v) for k, v in results.get("part_wall_s", {}).items())))
    if results.get("incomplete"):
        out.append("- **incomplete**: this run was cut off; parts done: %s" % ", ".join(results["part_wall_s"]))
    for m in results.get("merged_from", []):
        out.append("- merged from `%s`: %s, parts %s, %s, device %s" % (
            m["file"], m["date"], ",".join(m["parts"]), m["command"], m["device"]))
    if results.get("baseline"):
        out.append("- batch-1 baseline: `%s` (%s)" % (results["baseline"]["file"], results["baseline"]["date"]))
    out.append("")

    for issue, title in ((13, "## Goals of issue 13\n"),
                         (31, "## Goals of issue 31 (PyTorch best including torch.compile max-autotune)\n")):
        goals = [g for g in results["goals"] if g.get("issue", 13) == issue]
        if not goals:
            continue
        out.append(title)
        out.append("| goal | target | measured | |")
        out.append("|---|---|---|---|")
        for g in goals:
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
        for p in layer_precisions(results):
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
        for p in layer_precisions(results):
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

    if "ceilings" in results:
        c = results["ceilings"]
        out.append("## Ceilings (measured in this run)\n")
        out.append("cuBLAS GEMM: `torch.matmul` of two %d x %d matrices (2 n^3 FLOP); copy: `Tensor.copy_` of %s, "
                   "bytes read + written. Median of %d runs after %d warm-up runs.\n" % (
                       c["gemm_n"], c["gemm_n"], "%d MiB" % (c["copy"]["bytes"] // 2 // 2 ** 20) if c.get("copy")
                       else "n/a", c["runs"], c["warmup"]))
        out.append("| ceiling | median ms | rate |")
        out.append("|---|---|---|")
        for key, label in (("gemm_fp16", "GEMM fp16 (tensor-core peak)"), ("gemm_tf32", "GEMM tf32"),
                           ("gemm_fp32", "GEMM fp32 (strict)")):
            g = c.get(key)
            out.append("| %s | %s | %s |" % (label, fmt_ms(g["time"]["median_ms"]) if g else "n/a",
                                             "%.0f TFLOP/s" % g["tflops"] if g else "n/a"))
        g = c.get("copy")
        out.append("| copy (device to device) | %s | %s |" % (fmt_ms(g["time"]["median_ms"]) if g else "n/a",
                                                           "%.2f TB/s" % g["tb_per_s"] if g else "n/a"))
        out.append("")

    if "models" in results:
        out.append("## (c) zoo models, same weights and input, median ms\n")
        out.append("PyTorch best is the fastest of eager, CUDA graph, channels_last + CUDA graph and the torch.compile "
                   "configurations measured (its kind in brackets); `infer vs best` is PyTorch best's time / infer's. "
                   "`compile max-autotune` / `compile reduce-overhead`: `torch.compile(mode=...)` of the channels_last "
                   "module on a channels_last input (`skipped`: the model's compile budget for that mode, "
                   "--compile-timeout-s, was spent or would be overrun; `failed`: "
                   "below; `-`: not run); `compile s`: the wall time of its first call (compilation and autotuning), "
                   "max-autotune / reduce-overhead (details in \"torch.compile\" below). `rel err` is ||PyTorch - "
                   "infer|| / ||infer|| at the same precision (NCHW; channels_last in brackets); `vs fp32` is infer's "
                   "output against strict-fp32 PyTorch. Runs: the `runs` column.\n")
        out.append("| model | batch | precision | runs | infer | infer, no passes | PyTorch eager | PyTorch graph | "
                   "PyTorch channels_last graph | PyTorch compile max-autotune | PyTorch compile reduce-overhead | "
                   "PyTorch best | infer vs best | infer vs eager | compile s | rel err | vs fp32 | infer kernels |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in results["models"]:
            im = r["infer"]["median_ms"] if r["infer"] else None
            kind, best = torch_best(r["torch"])
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["model"], r["batch"], r["precision"], r.get("runs", a["runs"]), fmt_ms(im),
                fmt_ms(r["infer_no_passes"]["median_ms"] if r["infer_no_passes"] else None),
                fmt_ms(torch_ms(r["torch"], "eager")), fmt_ms(torch_ms(r["torch"], "graph")),
                fmt_ms(torch_ms(r["torch"], "channels_last_graph")),
                compile_cell(r["torch"], "compile_max_autotune"), compile_cell(r["torch"], "compile_reduce_overhead"),
                "%s (%s)" % (fmt_ms(best), kind) if kind else "n/a",
                fx(speedup(best, im)), fx(speedup(torch_ms(r["torch"], "eager"), im)), compile_seconds_cell(r["torch"]),
                ("%.1e" % r["rel_err"] if r["rel_err"] is not None else "n/a")
                + (" (%.1e)" % r["rel_err_cl"] if r.get("rel_err_cl") is not None else ""),
                "%.1e" % r["rel_err_vs_fp32"] if r["rel_err_vs_fp32"] is not None else "-",
                ", ".join(r["kernels"])))
        out.append("")
        out += compile_section(results, [("%s" % r["model"], r) for r in results["models"]])

    vl = results.get("vgg16_layers")
    if vl is not None:
        peak = ceiling(results, "gemm_fp16", "tflops")
        prof = vl.get("profile") or {}
        out.append("## VGG-16 batch %d %s: the 13 3x3 convolutions\n" % (vl["batch"], vl["precision"]))
        out.append(
            "infer: per-node times of its default plan from `infer --profile --profile-json` (%d runs, median per "
            "node). Profiling launches the nodes one by one with a CUDA event between consecutive nodes (no CUDA "
            "graph), so each node's time includes event and launch overhead; infer's nodes are conv + bias + ReLU "
            "(fused). PyTorch: `F.conv2d` (with bias, no ReLU) on each layer's shape alone, captured as a CUDA "
            "graph, NCHW and channels_last (cuDNN), median of %d replays. GFLOP: the layer's useful multiply-adds "
            "x 2 (a folded kernel's zeros not counted). %% of peak: against the fp16 cuBLAS GEMM rate measured in "
            "this run (%s). Memory floor: input + output + weight bytes (fp16) at the copy rate measured in this "
            "run.\n" % (vl["runs"], vl["runs"], "%.0f TFLOP/s" % peak if peak else "n/a"))
        out.append("| layer | input (C x H x W) | C_out | GFLOP | infer kernel | infer ms | infer TFLOP/s | "
                   "infer % of peak | PyTorch NCHW graph ms | PyTorch channels_last graph ms | PyTorch cl TFLOP/s | "
                   "PyTorch cl % of peak | infer vs PyTorch cl | memory floor ms | infer / floor |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

        def tflops(flops, ms):
            return flops / (ms * 1e-3) / 1e12 if ms else None

        tot = {"flops": 0.0, "infer": 0.0, "cl": 0.0, "nchw": 0.0}
        for r in vl["layers"]:
            cl = torch_ms(r["torch"], "channels_last_graph")
            ti, tc = tflops(r["flops"], r["infer_ms"]), tflops(r["flops"], cl)
            for k, v in (("flops", r["flops"]), ("infer", r["infer_ms"]), ("cl", cl),
                         ("nchw", torch_ms(r["torch"], "graph"))):
                tot[k] = tot[k] + v if tot[k] is not None and v else None
            floor = memory_floor_ms(r["bytes"], results)
            out.append("| %s | %d x %d x %d | %d | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["layer"], r["c_in"], r["hw"], r["hw"], r["c_out"], r["flops"] / 1e9,
                ", ".join("%s=%s%s" % (n["op"], n["variant"], " (%s)" % n["layout"] if n.get("layout") else "")
                          for n in r["infer_nodes"]) or "n/a",
                fmt_ms(r["infer_ms"]), "%.0f" % ti if ti else "n/a", pct(ti / peak) if ti and peak else "n/a",
                fmt_ms(torch_ms(r["torch"], "graph")), fmt_ms(cl), "%.0f" % tc if tc else "n/a",
                pct(tc / peak) if tc and peak else "n/a", fx(speedup(cl, r["infer_ms"])), fmt_ms(floor),
                fx(r["infer_ms"] / floor) if floor and r["infer_ms"] else "n/a"))
        ti, tc = tflops(tot["flops"], tot["infer"]), tflops(tot["flops"], tot["cl"])
        out.append("| **all 13** | | | %.1f | | %s | %s | %s | %s | %s | %s | %s | %s | | |" % (
            tot["flops"] / 1e9, fmt_ms(tot["infer"]), "%.0f" % ti if ti else "n/a",
            pct(ti / peak) if ti and peak else "n/a", fmt_ms(tot["nchw"]), fmt_ms(tot["cl"]),
            "%.0f" % tc if tc else "n/a", pct(tc / peak) if tc and peak else "n/a",
            fx(speedup(tot["cl"], tot["infer"]))))
        out.append("")
        if prof:
            convs = {n["name"] for r in vl["layers"] for n in r["infer_nodes"]}
            rest = [n for n in prof["nodes"] if n["name"] not in convs]
            by_op = {}
            for n in rest:
                by_op[n["op"]] = by_op.get(n["op"], 0.0) + n["time_ms"]
            out.append("infer's profile: %d nodes, whole run %s ms (median, host copies included); the 13 convolutions "
                       "%s ms; the other %d nodes %s ms (%s)." % (
                           len(prof["nodes"]), fmt_ms(prof.get("total_ms")), fmt_ms(tot["infer"]), len(rest),
                           fmt_ms(sum(by_op.values())),
                           ", ".join("%s %s" % (k, fmt_ms(v))
                                     for k, v in sorted(by_op.items(), key=lambda kv: -kv[1]))))
        c11 = next((r for r in vl["layers"] if r["layer"] == "conv1_1"), None)
        floor = memory_floor_ms(c11["bytes"], results) if c11 else None
        if c11:
            cl = torch_ms(c11["torch"], "channels_last_graph")
            def vs_floor(ms):
                return "%s ms%s" % (fmt_ms(ms), " = %s the floor" % fx(ms / floor) if floor and ms else "")
            out.append("conv1_1 memory floor: %.1f MB (input + output + weights, fp16) at the measured copy rate = "
                       "%s ms; infer %s (%s; with fold_width off: %s; conv1_1 forced width-folded `%s`: %s, forced "
                       "unfolded `%s`: %s); PyTorch channels_last %s." % (
                           c11["bytes"] / 1e6, fmt_ms(floor), vs_floor(c11["infer_ms"]),
                           ", ".join("%s=%s" % (n["op"], n["variant"]) for n in c11["infer_nodes"]) or "n/a",
                           vs_floor(c11["infer_fold_off_ms"]), a.get("folded_variant", "cudnn_folded"),
                           vs_floor(c11.get("infer_folded_ms")), a.get("unfolded_variant", "cudnn"),
                           vs_floor(c11.get("infer_unfolded_ms")), vs_floor(cl)))
        out.append("")
        if prof.get("passes"):
            out.append("infer's graph passes in this profile: %s\n" % "; ".join("`%s`" % x for x in prof["passes"]))
        if prof.get("table_text"):  # a fence inside would end the block early
            out.append("<details><summary>infer's profile (default plan), as printed</summary>\n\n```\n%s```\n"
                       "</details>\n" % prof["table_text"].replace("```", "'''"))

    wf = results.get("width_fold")
    if wf is not None:
        settings = results["settings"]
        out.append("## Width folding (seed 004): the C_in = 1 / 3 convolutions, fp16, median ms\n")
        out.append("infer: the one-conv model (`infer-bench op conv2d ... --save`), its default plan (fold_width on) "
                   "and the same with `--pass fold_width=off` (`infer-bench model --no-variants`), and every conv2d "
                   "variant forced (`infer-bench op conv2d --variant all`, graph passes on; variants named like "
                   "`*fold*` are the folded ones). `folded vs unfolded` compares fold on with fold off (the forced "
                   "folded / unfolded variants where a plan did not run). PyTorch: `F.conv2d` with bias, eager, "
                   "CUDA graph and channels_last + CUDA graph; best = the fastest. Memory floor: input + output + "
                   "weight bytes at the measured copy rate.\n")
        variants = []
        for r in wf:
            variants += [v for v in r["variants"] if v not in variants]
        head = ("| layer | input | output | kernel | fold on (default plan) | fold off | no passes | "
                + "".join("forced %s | " % v for v in variants)
                + "PyTorch eager | PyTorch graph | PyTorch cl graph | PyTorch best | folded vs unfolded | "
                  "folded vs PyTorch best | memory floor | folded / floor | kernels: on; off |")
        out.append(head)
        out.append("|" + "---|" * (head.count("|") - 1))
        verdicts = []
        for r in wf:
            on, on_how, off, off_how = fold_pair(r, settings)
            kind, best = torch_best(r["torch"])
            floor = memory_floor_ms(r["bytes"], results)
            out.append("| %s | %dx%dx%dx%d | %dx%dx%d | k%d s%d p%d | %s | %s | %s | %s%s | %s | %s | %s | %s | %s | "
                       "%s | %s | %s |" % (
                           r["layer"], r["batch"], r["c_in"], r["hw"], r["hw"], r["c_out"], r["hw_out"], r["hw_out"],
                           r["kernel"], r["stride"], r["padding"], fmt_ms(r["fold_on"]), fmt_ms(r["fold_off"]),
                           fmt_ms(r["no_passes"]), "".join("%s | " % fmt_ms(r["variants"].get(v)) for v in variants),
                           fmt_ms(torch_ms(r["torch"], "eager")), fmt_ms(torch_ms(r["torch"], "graph")),
                           fmt_ms(torch_ms(r["torch"], "channels_last_graph")),
                           "%s (%s)" % (fmt_ms(best), kind) if kind else "n/a",
                           fx(speedup(off, on)), fx(speedup(best, on)), fmt_ms(floor),
                           fx(on / floor) if on and floor else "n/a",
                           "%s; %s" % (", ".join(r["fold_on_kernels"]) or "n/a",
                                       ", ".join(r["fold_off_kernels"]) or "n/a")))
            s, sp = speedup(off, on), speedup(best, on)
            verdicts.append("- %s: %s. Folded (%s) %s ms vs unfolded (%s) %s ms: %s; vs PyTorch best %s ms: %s." % (
                r["layer"], "n/a (not measured)" if s is None else (
                    "the claim holds (folded faster)" if s > 1.0 else "the claim does not hold (folded not faster)"),
                on_how, fmt_ms(on), off_how, fmt_ms(off), fx(s), fmt_ms(best),
                "n/a" if sp is None else ("%s, folded infer faster" % fx(sp) if sp > 1.0
                                          else "%s, PyTorch faster" % fx(sp))))
        out.append("")
        out.append("Seed 004's claim (folding makes these layers faster), per layer:\n")
        out.extend(verdicts)
        not_run = sorted({"%s: %s" % (v, n) for r in wf for v, n in r["not_run"].items()})
        if not_run:
            out.append("\nVariants that did not run: %s" % "; ".join(not_run))
        out.append("")

    graph_errors = []  # PyTorch CUDA-graph captures that failed (eager numbers stand)
    for key in ("table4", "conv_pool", "models", "vgg16_layers", "width_fold"):
        rows = results.get(key)
        if not rows:
            continue
        for r in (rows["rows"] if key == "table4" else rows["layers"] if key == "vgg16_layers" else rows):
            for k in TORCH_KINDS:
                if not (r.get("torch") and k + "_error" in r["torch"]):
                    continue
                label = ("%s %dx%dx%d" % (r["model"], r["n"], r["n"], r["c_in"]) if key == "table4"
                         else r.get("model") or r.get("layer") or "C=%s" % r.get("c"))
                label += " batch %d" % r.get("batch", 1)
                graph_errors.append("%s %s %s (PyTorch %s)" % (key, label, r.get("precision", "fp16"),
                                                               TORCH_KIND_NAMES[k]))
                graph_errors[-1] += ": `%s`" % r["torch"][k + "_error"].replace("`", "'")
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
            for p in layer_precisions(results):
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
            for p in layer_precisions(results):
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
            for label, kind in (("infer vs PyTorch best", None),
                                ("infer vs PyTorch channels_last graph", "channels_last_graph"),
                                ("infer vs torch.compile max-autotune", "compile_max_autotune"),
                                ("infer vs PyTorch eager", "eager")):
                series[label] = [
                    speedup(torch_best(r["torch"])[1] if kind is None else torch_ms(r["torch"], kind),
                            r["infer"]["median_ms"] if r["infer"] else None) or np.nan for r in rows]
            panels.append(("(c) zoo models: speedup of infer over PyTorch (> 1: infer faster)",
                           ["%s b%d %s" % (r["model"], r["batch"], r["precision"]) for r in rows], series, True, 1.0))
        vl = results.get("vgg16_layers")
        peak = ceiling(results, "gemm_fp16", "tflops")
        if vl and vl.get("layers"):
            rows = vl["layers"]
            series = {"infer": [r["flops"] / (r["infer_ms"] * 1e-3) / 1e12 if r["infer_ms"] else np.nan
                                for r in rows]}
            for kind in ("channels_last_graph", "graph"):
                series["PyTorch " + TORCH_KIND_NAMES[kind].replace("CUDA graph", "graph")] = [
                    r["flops"] / (torch_ms(r["torch"], kind) * 1e-3) / 1e12 if torch_ms(r["torch"], kind) else np.nan
                    for r in rows]
            panels.append(("VGG-16 batch %d fp16 3x3 convolutions: TFLOP/s (line: 80%% of the fp16 GEMM peak %s)" % (
                vl["batch"], "%.0f" % peak if peak else "n/a"), [r["layer"] for r in rows], series, False,
                0.8 * peak if peak else None))
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


def parse_compile_modes(text):
    """--compile-modes: 'none' (or empty) = [], else a comma-separated subset of COMPILE_MODES (exits on others)."""
    if text is None or text.strip().lower() in ("", "none"):
        return []
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for bad in [m for m in modes if m not in COMPILE_KINDS]:
        sys.exit("error: unknown torch.compile mode '%s' (%s, or none)" % (bad, ", ".join(COMPILE_MODES)))
    return [m for m in COMPILE_MODES if m in modes]


def load_baseline(path):
    """The batch-1 infer times of an earlier results JSON of this script ("no model slower than today")."""
    with open(path) as f:
        old = json.load(f)
    times = {"%s/%d/%s" % (r["model"], r["batch"], r["precision"]): r["infer"]["median_ms"]
             for r in old.get("models") or [] if r.get("infer")}
    return {"file": path, "date": old.get("date", "?"), "infer": times}


# The parts whose rows --merge combines item by item (a later file's row replaces the same item's).
MERGE_KEYS = {"table4": lambda r: (r["model"], r["n"], r["batch"], r["precision"]),
              "conv_pool": lambda r: (r["c"], r["precision"]),
              "models": lambda r: (r["model"], r["batch"], r["precision"]),
              "width_fold": lambda r: (r["layer"], r["batch"])}


def merge_results(paths):
    """One results dict from runs made part by part (e.g. one call per part, or per group of models, on
    the GPU machine): the rows of table4, conv_pool, models and width_fold are combined item by item
    (the later file wins for the same item); ceilings and vgg16_layers come from the last file that
    ran them; lists of precisions, models and batches are united."""
    merged = None
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        info = {"file": os.path.basename(path), "date": r["date"], "parts": r["settings"]["parts"],
                "command": r["command"], "device": r["environment"].get("device", "?")}
        if merged is None:
            merged = r
            merged["merged_from"] = []
            merged["part_wall_s"] = dict(r.get("part_wall_s", {}))
        else:
            for part in PARTS:
                if part not in r:
                    continue
                merged["part_wall_s"][part] = (merged["part_wall_s"].get(part, 0.0)
                                               + r.get("part_wall_s", {}).get(part, 0.0))
                if part in MERGE_KEYS and merged.get(part) is not None and r[part] is not None:
                    # Row by row: a later file's row replaces the same item's, other rows are added.
                    key = MERGE_KEYS[part]
                    old_rows = merged[part]["rows"] if part == "table4" else merged[part]
                    new_rows = r[part]["rows"] if part == "table4" else r[part]
                    replaced = {key(x) for x in new_rows}
                    rows = [x for x in old_rows if key(x) not in replaced] + new_rows
                    if part == "table4":
                        merged[part]["rows"] = rows
                        merged[part]["variants"] += [v for v in r[part]["variants"]
                                                     if v not in merged[part]["variants"]]
                        merged[part]["infer_bench"] += r[part]["infer_bench"]
                    else:
                        if part == "models":  # the order part_models writes: model, precision, batch
                            order = {m: i for i, m in enumerate(ZOO)}
                            rows.sort(key=lambda x: (order.get(x["model"], len(order)),
                                                     list(DTYPES).index(x["precision"]), x["batch"]))
                        merged[part] = rows
                else:
                    merged[part] = r[part]
            for key in ("precisions", "layer_precisions", "model_list", "model_batches", "table4_batches",
                        "table4_models"):
                merged[key] = merged.get(key, []) + [x for x in r.get(key, []) if x not in merged.get(key, [])]
            if not merged.get("compile") and r.get("compile"):  # the torch.compile settings of the models part
                merged["compile"] = r["compile"]
            merged["errors"] = merged["errors"] + r["errors"]
            merged["wall_s"] += r["wall_s"]
            merged["settings"]["parts"] = merged["settings"]["parts"] + [
                x for x in r["settings"]["parts"] if x not in merged["settings"]["parts"]]
        merged["merged_from"].append(info)
    return merged


def write_report(results, stem):
    """<stem>.json, <stem>.md (and <stem>.png when matplotlib is there); returns the markdown."""
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
    return text


def update_docs(a, results, stem):
    """--update-docs: the docs' current GPU table from this run's models part."""
    if a.update_docs and results.get("models"):
        import current_tables
        current_tables.update(a.update_docs, "gpu", stem + ".json")
        log("updated the current:gpu table of %s" % a.update_docs)


def synthetic_results():
    """A results dict with every part filled by made-up numbers (the shapes the parts write), for
    --selftest: the goals, the markdown and the plot run without a GPU."""
    def t(ms):
        return {"median_ms": ms, "min_ms": ms * 0.98, "max_ms": ms * 1.05, "runs": 20}

    settings = {"runs": 50, "warmup": 10, "large_runs": 20, "large_warmup": 5, "cudnn_benchmark": True,
                "autotune": False, "quick": False, "parts": list(PARTS), "folded_variant": "cudnn_folded",
                "unfolded_variant": "cudnn", "compile_modes": list(COMPILE_MODES),
                "compile_timeout_s": COMPILE_TIMEOUT_S}
    r = {"date": "2026-11-24 00:00 UTC", "command": "python3 bench/gpu_vs_pytorch.py --selftest",
         "environment": {"device": "synthetic", "torch": torch.__version__, "torch_cuda": None,
                         "tf32_api": "fp32_precision", "cudnn": None, "numpy": np.__version__,
                         "python": platform.python_version(), "cpu": "?", "infer_device": "synthetic"},
         "precisions": ["fp32", "tf32", "fp16"], "layer_precisions": ["fp32", "fp16"], "table4_batches": [1],
         "table4_models": ["DCGAN"], "model_batches": [1, 64], "model_list": list(ZOO), "settings": settings,
         "errors": [{"item": "width_fold LeNet-5 conv1 (infer-bench model --pass fold_width=off)",
                     "error": "RuntimeError: infer-bench exited with 1: --pass: unknown", "traceback": ""}],
         "wall_s": 123.0, "part_wall_s": {p: 10.0 for p in PARTS},
         "baseline": {"file": "gpu-2026-11-23.json", "date": "2026-11-23 18:26 UTC",
                      "infer": {"%s/1/%s" % (m, p): 0.3 for m in ZOO for p in ("fp32", "fp16")}}}
    r["ceilings"] = {"gemm_n": 8192, "runs": 20, "warmup": 5,
                     "gemm_fp16": {"time": t(1.46), "tflops": 755.0}, "gemm_tf32": {"time": t(2.8), "tflops": 390.0},
                     "gemm_fp32": {"time": t(21.5), "tflops": 51.0},
                     "copy": {"time": t(0.72), "bytes": 2 * 2 ** 30, "tb_per_s": 2.97}}
    r["table4"] = {"infer_bench": [], "variants": ["conventional", FAST], "not_applicable": [],
                   "rows": [{"model": "DCGAN", "n": n, "c_in": ci, "c_out": co, "batch": 1, "precision": p,
                             "upsampled_bytes": 1000, "infer": {"conventional": 0.2, FAST: 0.02}, "not_run": {},
                             "torch": {"eager": t(0.05), "graph": t(0.03)}}
                            for p in ("fp32", "fp16") for n, ci, co in TABLE4["DCGAN"]]}
    r["conv_pool"] = [{"c": c, "precision": p, "torch": {"eager": t(0.08), "graph": t(0.04)}, "infer_bench": None,
                       "infer": {"direct_sum": 0.02, "unfused": 0.03, "implicit_gemm": 0.015}}
                      for p in ("fp32", "fp16") for c in (32, 512)]
    r["models"] = []
    for m in ZOO:
        for p in ("fp32", "tf32", "fp16"):
            for b in (1, 64):
                torch_t = {"eager": t(2.0 * b ** 0.5), "graph": t(1.5 * b ** 0.5),
                           "channels_last_graph": t(1.2 * b ** 0.5)} if m != "lenet5" else {
                    "eager": t(1.0), "graph": t(0.5), "channels_last_graph_error": "RuntimeError: capture failed"}
                # torch.compile: max-autotune the fastest, except LeNet-5 (max-autotune failed, reduce-overhead
                # best) and EB-GAN (from the FX-graph cache; at batch 64 fp16 max-autotune skipped, over budget)
                def compiled(ms, mode, compile_s, hit=False):
                    return dict(t(ms), mode=mode, compile_s=compile_s, settle_s=0.5, rel_err=1.2e-3,
                                counters={"fxgraph_cache_hit": 1} if hit else {"fxgraph_cache_miss": 1})
                if m == "lenet5":
                    torch_t.update({"compile_max_autotune_error": "BackendCompilerFailed: synthetic (after 3 s)",
                                    "compile_reduce_overhead": compiled(0.4, "reduce-overhead", 8.0)})
                elif m == "ebgan" and b == 64 and p == "fp16":
                    torch_t.update({"compile_max_autotune_skipped": "max-autotune budget of this model spent "
                                    "(--compile-timeout-s 60: 65 s)",
                                    "compile_reduce_overhead": compiled(1.25 * b ** 0.5, "reduce-overhead", 1.0, True)})
                else:
                    torch_t.update({"compile_max_autotune": compiled(1.1 * b ** 0.5, "max-autotune",
                                                                     1.5 if m == "ebgan" else 40.0, m == "ebgan"),
                                    "compile_reduce_overhead": compiled(1.25 * b ** 0.5, "reduce-overhead", 8.0)})
                r["models"].append({"model": m, "batch": b, "precision": p, "infer": t(1.3 * b ** 0.5),
                                    "infer_no_passes": t(1.6 * b ** 0.5), "kernels": ["conv2d=cudnn", "dense=gemm"],
                                    "torch": torch_t, "rel_err": 1e-3, "rel_err_cl": 1.1e-3,
                                    "rel_err_vs_fp32": None if p == "fp32" else 2e-3, "compile_rel_err_vs": "infer",
                                    "infer_bench": None, "runs": 20 if b == 64 else 50})
    r["compile"] = {"modes": list(COMPILE_MODES), "timeout_s": COMPILE_TIMEOUT_S, "calls": COMPILE_CALLS,
                    "cache_base": "/tmp/torchinductor_synthetic", "cache_per_precision": True, "available": True,
                    "triton": "3.5.0", "dynamo_limits": {"recompile_limit": DYNAMO_CACHE_LIMIT}}
    layers = []
    for i, (name, c_in, c_out, hw) in enumerate(VGG16_CONVS):
        flops = conv_flops(64, c_in, c_out, hw, 3)
        layers.append({"layer": name, "c_in": c_in, "c_out": c_out, "hw": hw, "batch": 64, "flops": flops,
                       "bytes": 2.0 * (64 * c_in * hw * hw + 64 * c_out * hw * hw + c_out * c_in * 9 + c_out),
                       "infer_ms": None if i == 5 else 0.2 if i == 0 else flops / 600e12 * 1e3,
                       "infer_nodes": [{"name": name, "op": "conv2d", "variant": "cudnn", "fused": ["relu"],
                                        "layout": "nhwc",
                                        "output_shape": [64, c_out, hw, hw], "flops": flops, "time_ms": 0.5}],
                       "infer_fold_off_ms": 0.9 if i == 0 else None,
                       "infer_folded_ms": 0.45 if i == 0 else None, "infer_unfolded_ms": 0.8 if i == 0 else None,
                       "torch": {"graph": t(flops / 500e12 * 1e3), "channels_last_graph": t(flops / 610e12 * 1e3)}})
    prof = {"total_ms": 9.0, "passes": ["fold_width: 1 convolution folded"], "table_text": "node  ms\nconv1_1 0.5\n",
            "nodes": [n for l in layers for n in l["infer_nodes"]]
            + [{"name": "pool1", "op": "pool2d", "variant": "direct", "fused": [], "time_ms": 0.2},
               {"name": "fc1", "op": "dense", "variant": "gemm", "fused": ["relu"], "time_ms": 0.3}]}
    r["vgg16_layers"] = {"batch": 64, "precision": "fp16", "runs": 20, "warmup": 5, "profile": prof,
                         "profile_fold_off": None, "layers": layers}
    r["width_fold"] = []
    for i, (label, c_in, hw, c_out, k, s, pad) in enumerate(FOLD_LAYERS):
        ho = conv_out(hw, k, s, pad)
        r["width_fold"].append({
            "layer": label, "batch": 64, "precision": "fp16", "c_in": c_in, "hw": hw, "c_out": c_out, "kernel": k,
            "stride": s, "padding": pad, "hw_out": ho, "flops": conv_flops(64, c_in, c_out, ho, k),
            "bytes": 2.0 * (64 * c_in * hw * hw + 64 * c_out * ho * ho + c_out * c_in * k * k + c_out),
            "variants": {"cudnn_folded": 0.2, "cudnn": 0.5, "im2col_gemm": 0.9},
            "not_run": {"direct_small_cout": "not applicable"},
            "fold_on": 0.21 if i < 2 else None, "fold_off": 0.52 if i < 2 else None, "no_passes": 0.6,
            "fold_on_kernels": ["conv2d=cudnn_folded"] if i < 2 else [],
            "fold_off_kernels": ["conv2d=cudnn"] if i < 2 else [],
            "torch": {"eager": t(1.0), "graph": t(0.99), "channels_last_graph": t(0.3)}, "infer_bench": {}})
    return r


def selftest_torch_compiled():
    """torch_compiled's flow (no GPU, no torch.compile: time_compiled and reset_compiled stubbed): each mode in
    its own try, a failure recorded with its error, the per-model budget skipping what would overrun it."""
    global time_compiled, reset_compiled
    saved = time_compiled, reset_compiled
    calls = []

    def fake_time(a, module, x, batch, mode, y_ref=None):
        calls.append((batch, mode))
        if mode == "max-autotune" and batch == 64:
            raise RuntimeError("synthetic failure\nsecond line")
        return dict(median_ms=1.0, min_ms=1.0, max_ms=1.0, runs=3, mode=mode, rel_err=None, counters={},
                    compile_s=20.0 if mode == "max-autotune" else 5.0, settle_s=1.0)

    try:
        time_compiled, reset_compiled = fake_time, (lambda: None)
        with tempfile.TemporaryDirectory() as tmp:
            old_env = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
            a = argparse.Namespace(compile_modes=list(COMPILE_MODES), compile_timeout_s=50.0, inductor_cache_base=tmp)
            state = {"spent_s": {}, "last_s": {}, "layers": None}
            t1, t64, t1b, t64b = {}, {}, {}, {}
            torch_compiled(a, t1, state, "m", 1, "fp32", None, None, None)     # max-autotune 21 s, reduce-overhead 6 s
            torch_compiled(a, t64, state, "m", 64, "fp32", None, None, None)   # max-autotune fails at once; 12 s
            torch_compiled(a, t1b, state, "m", 1, "fp16", None, None, None)    # 42 s; 18 s
            torch_compiled(a, t64b, state, "m", 64, "fp16", None, None, None)  # 42 + 21 > 50: skipped; 24 s
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == os.path.join(tmp, "fp16")
            assert os.path.isdir(os.path.join(tmp, "fp32")) and os.path.isdir(os.path.join(tmp, "fp16"))
            if old_env is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR")
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = old_env
        assert calls == [(1, "max-autotune"), (1, "reduce-overhead"), (64, "max-autotune"), (64, "reduce-overhead"),
                         (1, "max-autotune"), (1, "reduce-overhead"), (64, "reduce-overhead")], calls
        assert set(t1) == {"compile_max_autotune", "compile_reduce_overhead"}, t1
        assert t64["compile_max_autotune_error"].startswith("RuntimeError: synthetic failure (after"), t64
        assert "compile_reduce_overhead" in t64 and "second line" in t64["compile_max_autotune_traceback"], t64
        assert set(t1b) == {"compile_max_autotune", "compile_reduce_overhead"}, t1b
        assert "would be exceeded" in t64b["compile_max_autotune_skipped"] and "compile_reduce_overhead" in t64b, t64b
        assert 42.0 <= state["spent_s"]["max-autotune"] < 43.0 and state["spent_s"]["reduce-overhead"] == 24.0, state
        # a spent budget, and the first max-autotune compile estimated from the model's autotuned layers
        for st, needle in (({"spent_s": {"max-autotune": 55.0}, "last_s": {}, "layers": None}, "spent"),
                           ({"spent_s": {}, "last_s": {}, "layers": 10}, "estimated from 10 autotuned layers")):
            t = {}
            torch_compiled(a, t, st, "m", 1, "fp16", None, None, None)
            assert needle in t["compile_max_autotune_skipped"] and "compile_reduce_overhead" in t, t
        st = {"spent_s": {}, "last_s": {}, "layers": 6}  # 10 + 6 x 6 = 46 s: runs
        assert compile_skip_reason(a, "max-autotune", st) is None and compile_skip_reason(a, "reduce-overhead", st) is None
    finally:
        time_compiled, reset_compiled = saved


def selftest():
    """Goals, markdown and (when matplotlib is there) the plot from synthetic_results(); the layer
    matching and the merge on small inputs. No GPU, no infer binaries."""
    r = synthetic_results()
    r["goals"] = compute_goals(r)
    statuses = {g["status"] for g in r["goals"]}
    assert statuses <= {"met", "missed", "not measured"}, statuses
    names = [g["goal"] for g in r["goals"]]
    for needle in ("vgg16 batch 64 fp16", "alexnet batch 64 fp32", "ebgan batch 1 fp32: infer time",
                   "conv3x3+avgpool2", "share of the measured fp16 GEMM peak", "memory floor",
                   "width folding (must 3, seed 004): LeNet-5 conv1", "no slower than on"):
        assert any(needle in n for n in names), needle
    c11 = next(g for g in r["goals"] if "memory floor" in g["goal"])
    assert c11["status"] == "met" and "VGG-16 profile node" in c11["measured"], c11  # 0.2 ms vs a 0.145 ms floor
    vgg_fold = next(g for g in r["goals"] if "VGG-16 conv1_1 inside the model" in g["goal"])
    assert vgg_fold["status"] == "met" and "1.78x" in vgg_fold["measured"], vgg_fold  # 0.8 / 0.45 ms
    peak_goal = next(g for g in r["goals"] if "GEMM peak" in g["goal"])
    assert peak_goal["status"] == "not measured", peak_goal  # conv3_2 has no infer time
    lenet_fold = next(g for g in r["goals"] if "LeNet-5 conv1" in g["goal"])
    assert "forced conv2d=cudnn_folded" in lenet_fold["measured"] and lenet_fold["status"] == "met", lenet_fold
    text = markdown(r)
    for needle in ("## Goals of issue 13", "## Ceilings", "GEMM fp16 (tensor-core peak) | 1.460 | 755 TFLOP/s",
                   "## VGG-16 batch 64 fp16: the 13 3x3 convolutions", "| **all 13** |", "conv1_1 memory floor",
                   "## Width folding (seed 004)", "the claim holds", "## Items that failed",
                   "channels_last + CUDA graph", "0.300 (channels_last_graph)", "conv2d=cudnn (nhwc)"):
        assert needle in text, needle
    # torch.compile (issue 31): the columns, the best kind, the compile section, failures, issue 31's goals
    for needle in ("| PyTorch compile max-autotune | PyTorch compile reduce-overhead | PyTorch best |",
                   "| 1.100 | 1.250 | 1.100 (compile_max_autotune) | 0.85x | 1.54x | 40.0 / 8.0 |",
                   "| failed | 0.400 | 0.400 (compile_reduce_overhead) |", "| skipped | 10.000 | 9.600 (channels_last_graph)",
                   "## torch.compile\n", "| ebgan | 1 | fp32 | max-autotune | 1.100 | 1.5 | 0.5 | hit 1 | 0 | 1.2e-03 |",
                   "| ebgan | 64 | fp16 | max-autotune | skipped |", "--compile-timeout-s 60: 65 s",
                   "(PyTorch torch.compile max-autotune (channels_last)): `BackendCompilerFailed: synthetic",
                   "## Goals of issue 31", "compile budget per model and mode: 60 s"):
        assert needle in text, needle
    g31 = [g for g in r["goals"] if g.get("issue") == 31]
    assert len(g31) == 6 and all(g["status"] == "missed" for g in g31), g31
    b64 = next(g for g in g31 if g["goal"].startswith("batch 64 fp16"))
    assert "max-autotune time (PyTorch best may be slower than it): lenet5, ebgan" in b64["measured"], b64
    assert "vgg16 >= 1.30x" in b64["target"] and "alexnet 0.85x (compile_max_autotune)" in b64["measured"], b64
    # ratio_goal: met only with max-autotune measured everywhere; missed wins over not measured
    ma = {"compile_max_autotune": {"median_ms": 2.0}}
    assert ratio_goal({"x": (1.0, ma), "y": (1.0, ma)}, ["x", "y"], lambda m: 1.0)[1] is True
    assert ratio_goal({"x": (1.0, ma), "y": (1.0, {"eager": {"median_ms": 2.0}})}, ["x", "y"], lambda m: 1.0)[1] is None
    assert ratio_goal({"x": (1.0, ma), "y": None}, ["x", "y"], lambda m: 1.0)[1] is None
    assert ratio_goal({"x": (3.0, ma), "y": None}, ["x", "y"], lambda m: 1.0)[1] is False
    assert ratio_goal({"x": (1.0, ma)}, ["x"], lambda m: 2.5)[1] is False
    # --compile-modes and --compile-timeout-s
    assert parse_compile_modes("none") == [] and parse_compile_modes("") == []
    assert parse_compile_modes("reduce-overhead,max-autotune") == COMPILE_MODES
    ns, m = argparse.Namespace(compile_timeout_s=60.0), "max-autotune"
    assert compile_skip_reason(ns, m, {"spent_s": {m: 10.0}, "last_s": {m: 40.0}}) is None
    assert "spent" in compile_skip_reason(ns, m, {"spent_s": {m: 61.0}, "last_s": {}})
    assert "exceeded" in compile_skip_reason(ns, m, {"spent_s": {m: 30.0}, "last_s": {m: 40.0}})
    assert compile_skip_reason(ns, "reduce-overhead", {"spent_s": {m: 61.0}, "last_s": {}}) is None  # own budget
    assert compile_skip_reason(argparse.Namespace(compile_timeout_s=0), m, {"spent_s": {m: 1e9}, "last_s": {}}) is None
    assert compile_cell({}, "compile_max_autotune") == "-" and compile_seconds_cell(None) == "- / -"
    info = compile_setup(argparse.Namespace(compile_modes=["max-autotune"], compile_timeout_s=45.0,
                                            inductor_cache_base=inductor_cache_base(None)))
    assert info["modes"] == ["max-autotune"] and "torchinductor_" in info["cache_base"], info
    selftest_torch_compiled()
    rows = [l for l in text.splitlines() if l.startswith("|")]
    cols = None
    for line in text.splitlines():  # every markdown table has the same number of cells in every row
        if line.startswith("|"):
            n = line.count("|")
            assert cols is None or n == cols, line
            cols = n
        else:
            cols = None
    nodes = [{"name": "conv1_1.to_nhwc", "op": "layout", "time_ms": 0.1},
             {"name": "conv1_1.folded", "op": "conv2d", "time_ms": 0.2, "fused": []},
             {"name": "conv1_2", "op": "conv2d", "time_ms": 0.3, "fused": ["relu1_2"]},
             {"name": "c3", "op": "conv2d", "time_ms": 0.4, "fused": []}]
    m = match_layer_nodes({"nodes": nodes}, ["conv1_1", "conv1_2", "conv2_1"])
    assert [n["name"] for n in m["conv1_1"]] == ["conv1_1.folded"] and [n["name"] for n in m["conv2_1"]] == ["c3"], m
    with tempfile.TemporaryDirectory() as tmp:
        a, b = dict(r), json.loads(json.dumps(r))
        a = {k: v for k, v in a.items() if k not in ("vgg16_layers", "width_fold", "compile")}
        a["settings"] = dict(a["settings"], parts=["models"])
        b["settings"]["parts"] = ["vgg16_layers", "width_fold"]
        b["date"] = "2026-11-24 00:05 UTC"
        paths = []
        for i, x in enumerate((a, b)):
            paths.append(os.path.join(tmp, "%d.json" % i))
            with open(paths[-1], "w") as f:
                json.dump(x, f, default=float)
        merged = merge_results(paths)
        assert "vgg16_layers" in merged and "models" in merged and len(merged["merged_from"]) == 2
        merged["goals"] = compute_goals(merged)
        assert "merged from `1.json`" in markdown(merged) and merged["compile"]["timeout_s"] == COMPILE_TIMEOUT_S
        drawn = plot(r, os.path.join(tmp, "selftest.png"))
    print(text)
    log("selftest passed: %d goals (%s), %d table rows, plot %s" % (
        len(r["goals"]), ", ".join("%d %s" % (sum(1 for g in r["goals"] if g["status"] == s), s)
                                   for s in ("met", "missed", "not measured")), len(rows),
        "drawn" if drawn else "skipped"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build folder holding infer-bench, infer and model-zoo")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    p.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of %s (ceilings also "
                   "runs with vgg16_layers and width_fold)" % ", ".join(PARTS))
    p.add_argument("--runs", type=int, default=None, help="timed runs per item (default 50; --quick: 5)")
    p.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 10; --quick: 2)")
    p.add_argument("--large-runs", type=int, default=None, help="timed runs of items at batch >= %d, of "
                   "vgg16_layers, width_fold and the ceilings (default 20; --quick: 3)" % LARGE_BATCH)
    p.add_argument("--large-warmup", type=int, default=None, help="their untimed runs (default 5; --quick: 1)")
    p.add_argument("--models", default=None, help="zoo models for (c) (default: all; --quick: lenet5,dcgan)")
    p.add_argument("--precisions", default="fp32,tf32,fp16", help="(c) models: fp32, tf32, fp16 (comma-separated)")
    p.add_argument("--layer-precisions", default="fp32,fp16", help="(a) table4 and (b) conv_pool: precisions")
    p.add_argument("--table4-batches", default=None, help="(a) batches (default 1,32; --quick: 1)")
    p.add_argument("--table4-models", default=None,
                   help="(a) Table-4 rows (default: all four; --quick: DCGAN,EB-GAN)")
    p.add_argument("--channels", default=None, help="(b) C values (default 32,128,256,512; --quick: 32,512)")
    p.add_argument("--model-batches", default="1,64", help="(c) batches")
    p.add_argument("--layers-batch", type=int, default=64, help="vgg16_layers: batch")
    p.add_argument("--fold-batch", type=int, default=64, help="width_fold: batch")
    p.add_argument("--folded-variant", default="cudnn_folded",
                   help="width_fold: the folded conv2d variant (used where the fold_width pass cannot be switched)")
    p.add_argument("--unfolded-variant", default="cudnn", help="width_fold: the unfolded NHWC conv2d variant")
    p.add_argument("--gemm-n", type=int, default=8192, help="ceilings: GEMM size n (n x n times n x n)")
    p.add_argument("--copy-mib", type=int, default=1024, help="ceilings: MiB copied")
    p.add_argument("--baseline", metavar="JSON", help="an earlier results JSON: batch-1 infer times that must "
                   "not get slower (goal 'no model slower than today'; e.g. bench/results/gpu-2026-11-23.json)")
    p.add_argument("--variants", action="store_true", help="(c): infer-bench also forces every other variant per op")
    p.add_argument("--autotune", action="store_true", help="infer sessions autotune their kernels at creation")
    p.add_argument("--no-cudnn-benchmark", action="store_true", help="PyTorch: leave cudnn.benchmark off")
    p.add_argument("--compile-modes", default=",".join(COMPILE_MODES),
                   help="(c) models: torch.compile modes run on the channels_last module at every precision and "
                   "batch, comma-separated subset of %s, or 'none' (default: both)" % ",".join(COMPILE_MODES))
    p.add_argument("--compile-timeout-s", type=float, default=COMPILE_TIMEOUT_S,
                   help="(c) models: compile seconds per model and mode (max-autotune and reduce-overhead each have "
                   "their own); a configuration is skipped (and recorded) once they are spent or would be overrun by "
                   "the mode's last compile of the model (the first max-autotune one: estimated from the model's "
                   "convolution and linear layers); 0: no limit (default %g)" % COMPILE_TIMEOUT_S)
    p.add_argument("--inductor-cache-dir", default=None,
                   help="persistent folder for Inductor's caches (FX graphs, autotuning, Triton kernels), one "
                   "subfolder per precision; a second run with the same folder skips most compile and autotune "
                   "work (default: $TORCHINDUCTOR_CACHE_DIR, else Inductor's <tmp>/torchinductor_<user>)")
    p.add_argument("--quick", action="store_true", help="smoke test: few runs, a subset of every part")
    p.add_argument("--timeout", type=int, default=600, help="seconds one infer-bench / infer / model-zoo call may take")
    p.add_argument("--tag", default="", help="suffix of the result file names")
    p.add_argument("--update-docs", nargs="?", metavar="DOC",
                   const=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "benchmarks.md"),
                   help="also write the models part's table into DOC's current:gpu block (bench/current_tables.py; "
                   "default docs/benchmarks.md)")
    p.add_argument("--replot", metavar="JSON", help="only redraw the plot of a results JSON written by this "
                   "script (next to it, .png instead of .json; e.g. where matplotlib is installed); runs nothing")
    p.add_argument("--merge", metavar="JSON", nargs="+", help="write one report (goals and tables) from results "
                   "JSONs of runs made part by part (a part comes from the last file that has it); runs nothing")
    p.add_argument("--selftest", action="store_true", help="build the goals, the report and the plot from "
                   "synthetic numbers (no GPU, nothing written) and check them")
    a = p.parse_args()
    started = time.time()
    if a.selftest:
        selftest()
        return
    if a.replot:
        with open(a.replot) as f:
            results = json.load(f)
        png = os.path.splitext(a.replot)[0] + ".png"
        if not plot(results, png):
            sys.exit("error: no plot written")
        log("wrote %s" % png)
        return
    if a.merge:
        results = merge_results(a.merge)
        if a.baseline:
            results["baseline"] = load_baseline(a.baseline)
        results["goals"] = compute_goals(results)
        os.makedirs(a.out, exist_ok=True)
        stem = os.path.join(a.out, "gpu-" + results["date"][:10] + "-merged" + (("-" + a.tag) if a.tag else ""))
        print(write_report(results, stem))
        update_docs(a, results, stem)
        log("wrote %s.{md,json%s} from %d files" % (stem, ",png" if os.path.exists(stem + ".png") else "",
                                                     len(a.merge)))
        return

    a.runs = a.runs if a.runs is not None else (5 if a.quick else 50)
    a.warmup = a.warmup if a.warmup is not None else (2 if a.quick else 10)
    a.large_runs = a.large_runs if a.large_runs is not None else (3 if a.quick else 20)
    a.large_warmup = a.large_warmup if a.large_warmup is not None else (1 if a.quick else 5)
    a.models = csv_list(a.models) if a.models else (["lenet5", "dcgan"] if a.quick else list(ZOO))
    a.table4_batches = csv_list(a.table4_batches or ("1" if a.quick else "1,32"), int)
    a.table4_models = csv_list(a.table4_models) if a.table4_models else (
        ["DCGAN", "EB-GAN"] if a.quick else list(TABLE4_MODELS))
    a.channels = csv_list(a.channels, int) if a.channels else ([32, 512] if a.quick else list(CONV_POOL_CHANNELS))
    a.model_batches = csv_list(a.model_batches, int)
    a.precisions = csv_list(a.precisions)
    a.layer_precisions = csv_list(a.layer_precisions)
    a.compile_modes = parse_compile_modes(a.compile_modes)
    a.inductor_cache_base = inductor_cache_base(a.inductor_cache_dir)
    parts = csv_list(a.parts)
    for bad in [x for x in a.precisions + a.layer_precisions if x not in DTYPES]:
        sys.exit("error: unknown precision '%s' (fp32, tf32, fp16)" % bad)
    for bad in [x for x in parts if x not in PARTS]:
        sys.exit("error: unknown part '%s' (%s)" % (bad, ", ".join(PARTS)))
    for bad in [x for x in a.table4_models if x not in TABLE4_MODELS]:
        sys.exit("error: unknown Table-4 row '%s' (%s)" % (bad, ", ".join(TABLE4_MODELS)))
    if a.runs < 1 or a.warmup < 0 or a.large_runs < 1 or a.large_warmup < 0:
        sys.exit("error: --runs and --large-runs must be >= 1, --warmup and --large-warmup >= 0")
    if ("vgg16_layers" in parts or "width_fold" in parts) and "ceilings" not in parts:
        parts.insert(0, "ceilings")  # their TFLOP/s and memory floors are against this run's ceilings
    parts = [x for x in PARTS if x in parts]  # ceilings first, the order of PARTS

    if not torch.cuda.is_available():
        sys.exit("error: PyTorch sees no CUDA device (torch %s, built with CUDA %s)" % (
            torch.__version__, torch.version.cuda))
    a.bench = os.path.join(a.build, "infer-bench")
    a.zoo = os.path.join(a.build, "model-zoo")
    a.infer = os.path.join(a.build, "infer")
    for exe in (a.bench, a.zoo):
        if not os.access(exe, os.X_OK):
            sys.exit("error: %s not found; build it first (cmake --build %s)" % (exe, a.build))
    if "vgg16_layers" in parts and not os.access(a.infer, os.X_OK):
        log("warning: %s not found: vgg16_layers runs PyTorch only" % a.infer)
    torch.backends.cudnn.benchmark = not a.no_cudnn_benchmark
    set_torch_precision("fp32")

    now = datetime.datetime.now(datetime.timezone.utc)
    results = {"date": now.strftime("%Y-%m-%d %H:%M UTC"),
               "command": "python3 " + " ".join(shlex.quote(x) for x in sys.argv),
               "environment": environment(), "precisions": a.precisions, "layer_precisions": a.layer_precisions,
               "table4_batches": a.table4_batches, "table4_models": a.table4_models,
               "model_batches": a.model_batches, "model_list": a.models,
               "settings": {"runs": a.runs, "warmup": a.warmup, "large_runs": a.large_runs,
                            "large_warmup": a.large_warmup, "cudnn_benchmark": not a.no_cudnn_benchmark,
                            "autotune": a.autotune, "quick": a.quick, "parts": parts,
                            "folded_variant": a.folded_variant, "unfolded_variant": a.unfolded_variant,
                            "compile_modes": a.compile_modes, "compile_timeout_s": a.compile_timeout_s},
               "errors": [], "part_wall_s": {}}
    if "models" in parts:
        results["compile"] = compile_setup(a)
    if a.baseline:
        results["baseline"] = load_baseline(a.baseline)
    errors = results["errors"]
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, "gpu-" + now.strftime("%Y-%m-%d") + (("-" + a.tag) if a.tag else ""))
    with tempfile.TemporaryDirectory(prefix="infer-gpu-bench-") as tmp:
        a.tmp = tmp
        try:
            results["environment"]["infer_device"] = preflight(a)
        except Exception as e:  # noqa: BLE001
            sys.exit("error: infer-bench cannot run on cuda (built without CUDA, or no GPU?): %s" % e)
        functions = {"ceilings": part_ceilings, "table4": part_table4, "conv_pool": part_conv_pool,
                     "models": part_models, "vgg16_layers": part_vgg16_layers, "width_fold": part_width_fold}
        def on_progress(part, rows):  # a part's rows so far, written as its JSON would be (--merge reads it)
            partial = dict(results, incomplete=True, wall_s=time.time() - started, **{part: rows})
            partial["part_wall_s"] = dict(results["part_wall_s"], **{part: time.time() - t0})
            with open(stem + ".json", "w") as f:
                json.dump(partial, f, indent=1, default=float)

        a.on_progress = on_progress
        for name in parts:
            t0 = time.time()
            try:
                results[name] = functions[name](a, errors)
            except Exception as e:  # noqa: BLE001  (a bug in one part must not lose the others)
                record_error(errors, "part " + name, e)
            results["part_wall_s"][name] = time.time() - t0
            log("   part %s: %.0f s" % (name, results["part_wall_s"][name]))
            # What is done so far, in case the run is cut off (--merge STEM.json writes its report).
            results["wall_s"] = time.time() - started
            with open(stem + ".json", "w") as f:
                json.dump(dict(results, incomplete=True), f, indent=1, default=float)
    results["wall_s"] = time.time() - started
    results["goals"] = compute_goals(results)
    print(write_report(results, stem))
    update_docs(a, results, stem)
    log("wrote %s.{md,json%s} in %.0f s; %d item(s) failed" % (
        stem, ",png" if os.path.exists(stem + ".png") else "", results["wall_s"], len(errors)))


if __name__ == "__main__":
    main()
