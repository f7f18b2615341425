#!/usr/bin/env python3
"""Bring your own model, timed side by side (issue 14, must 5): torchvision classifiers through ONNX.

ResNet-18, ResNet-50, MobileNetV2 and EfficientNet-B0 (--models) are built from torchvision with seeded
random weights in eval mode (BatchNorm running statistics gathered from random batches, then random
affine scales: non-trivial), exported to ONNX (TorchScript exporter, opset 17, dynamic batch axis;
dynamo=False where torch.onnx.export has that argument), converted with the build's onnx2fb, then timed
in one run on one machine:
  --device cuda (the GPU machine's python3: CUDA PyTorch, torchvision, onnx): batch 1 and 64 (--batches),
      fp32 (strict: TF32 off on both sides), tf32 and fp16 (--precisions). infer: `infer-bench --backend
      cuda --precision P model X.fb` (the .fb stays fp32; SessionOptions::precision converts) vs PyTorch
      eager, CUDA graph and channels_last + CUDA graph; the ratio is against "PyTorch best". The timing
      helpers and the per-model loop are gpu_vs_pytorch.py's (model_rows), imported, not copied.
  --device cpu (Debian's /usr/bin/python3 with python3-torch, python3-torchvision): batch 1, fp32, input
      --size (224). infer's cpu backend (`infer-bench --backend cpu --threads T`) vs ONNX Runtime
      (PyPI onnxruntime, CPUExecutionProvider, the same .onnx, intra-op threads T, all graph
      optimisations; its pool spinning, the default, and not spinning: the faster counts) vs PyTorch
      (eager, channels_last eager, torch.jit.trace + freeze, torch.jit.optimize_for_inference; best of
      those), all with T = --threads (default: the cores) and OMP_WAIT_POLICY=passive (--omp-wait-policy).
      onnxruntime is a benchmark peer only, never a build dependency: when it cannot be imported the
      script creates a virtual environment (--venv, default <repo>/.venv-bench, with
      --system-site-packages so Debian's torch stays visible), pip-installs onnxruntime there and
      re-executes itself under it. --no-venv turns that off (ONNX Runtime is then recorded as missing).
All peers get the same non-zero seeded input (infer-bench's --dump of the default plan) and the same
weights. Wall/median of --runs after --warmup. Correctness per model: infer's output vs PyTorch's within
1e-3 relative in fp32 (2e-2 in tf32 / fp16, against strict-fp32 PyTorch). A model onnx2fb cannot convert
is recorded with onnx2fb's error line and the run goes on. For each CPU goal miss the per-node profile
top-10 (`infer --profile --profile-json`) is in the report. Writes <out>/byom-<cpu|gpu>-<date>[-tag].md
and .json. --selftest builds and checks a report from synthetic numbers (no torch, no GPU, no build).
"""
import argparse
import copy
import datetime
import inspect
import json
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0"]
MODEL_NAMES = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2",
               "efficientnet_b0": "EfficientNet-B0"}
TOLERANCE = {"fp32": 1e-3, "tf32": 2e-2, "fp16": 2e-2}
OPSET = 17
CPU_GOAL_MODELS = 2  # CPU batch 1: infer >= 1.0x ONNX Runtime on at least this many of the four
TORCH_CPU_KINDS = ["eager", "channels_last", "jit_frozen", "jit_optimized"]
PEER_NAMES = {"onnxruntime": "ONNX Runtime", "onnxruntime_nospin": "ONNX Runtime, no spinning", "eager": "PyTorch eager", "channels_last": "PyTorch channels_last",
              "jit_frozen": "PyTorch jit trace+freeze", "jit_optimized": "PyTorch jit optimize_for_inference",
              "graph": "PyTorch CUDA graph", "channels_last_graph": "PyTorch channels_last + CUDA graph"}
VENV_MARK = "BYOM_BENCH_IN_VENV"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_cmd(cmd, timeout, env=None):
    """Runs cmd; on a non-zero exit raises RuntimeError with the tool's last stderr line ('error: ...')."""
    log("$ " + " ".join(shlex.quote(c) for c in cmd))
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


# ---- ONNX Runtime in a virtual environment (a benchmark peer, never a build dependency) ----

def ensure_onnxruntime(a):
    """Returns normally when onnxruntime imports; otherwise creates the venv, installs onnxruntime into it
    and re-executes this script under the venv's python (never returns then)."""
    try:
        import onnxruntime  # noqa: F401
        return
    except ImportError:
        pass
    if a.no_venv or os.environ.get(VENV_MARK):
        log("note: onnxruntime cannot be imported%s; ONNX Runtime is recorded as missing" %
            (" in the venv" if os.environ.get(VENV_MARK) else " (--no-venv)"))
        return
    venv = os.path.abspath(a.venv)
    py = os.path.join(venv, "bin", "python3")
    if not os.access(py, os.X_OK):
        base = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        log("creating %s (--system-site-packages: Debian's torch, torchvision and numpy stay visible)" % venv)
        subprocess.run([base, "-m", "venv", "--system-site-packages", venv], check=True)
    log("installing onnxruntime into %s" % venv)
    subprocess.run([py, "-m", "pip", "install", "--quiet", "onnxruntime"], check=True)
    log("re-executing under %s" % py)
    os.environ[VENV_MARK] = "1"
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


# ---- the models ----

def build_model(name, seed, size):
    """torchvision `name` with seeded random weights in eval mode, activations kept O(1) (fp16 too).
    Every BatchNorm first gets a random affine scale / shift; then the running statistics are gathered
    from two seeded random batches (cumulative average) with only the BatchNorms in train mode, and
    perturbed relative to each channel's spread (mean by 0.05 sigma, variance by 0.75-1.25x).
    Order matters: statistics gathered before the affine change (or with the whole net in train mode,
    EfficientNet's stochastic depth) no longer fit the eval-mode activations, which then grew ~2x per
    layer in EfficientNet-B0, to 6e4 (beyond fp16; PyTorch's own fp32 output differed from float64 by
    4e-4, which looked like an infer bug)."""
    import torch
    import torchvision
    torch.manual_seed(seed)
    ctor = getattr(torchvision.models, name)
    try:
        net = ctor(weights=None)
    except TypeError:  # torchvision < 0.13
        net = ctor(pretrained=False)
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
        for _ in range(2):
            net(torch.rand((4, 3, size, size), generator=g) * 2 - 1)
        for m in bns:
            m.running_mean.add_(torch.randn(m.running_mean.shape, generator=g) * 0.05 * m.running_var.sqrt())
            m.running_var.mul_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
            m.momentum = 0.1
    return net.eval()


def export_onnx(net, size, path):
    """TorchScript exporter, opset 17, dynamic batch axis (dynamo=False where that argument exists)."""
    import torch
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    x = torch.rand((1, 3, size, size))
    with torch.no_grad():
        torch.onnx.export(net, x, path, opset_version=OPSET, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          do_constant_folding=True, **kwargs)


def prepare(a, name):
    """(net, onnx path, fb path or None, onnx2fb error or None)."""
    net = build_model(name, a.seed, a.size)
    onnx_path = os.path.join(a.tmp, name + ".onnx")
    export_onnx(net, a.size, onnx_path)
    fb = os.path.join(a.tmp, name + ".fb")
    try:
        run_cmd([a.onnx2fb, onnx_path, fb], a.timeout)
        return net, onnx_path, fb, None
    except Exception as e:  # noqa: BLE001
        return net, onnx_path, None, str(e)


# ---- CPU ----

def wall_times(fn, runs, warmup):
    """Median / min / max wall time in ms of fn() after warm-up calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "runs": runs}


def cpu_env(a):
    return dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads))


def infer_profile_top(a, fb, name):
    """`infer --profile --profile-json` on the cpu backend: the 10 slowest nodes and the totals."""
    path = os.path.join(a.tmp, name + "_profile.json")
    run_cmd([a.infer, "--model", fb, "--backend", "cpu", "--batch", "1", "--profile", "--runs",
             str(a.profile_runs), "--profile-json", path], a.timeout, cpu_env(a))
    with open(path) as f:
        j = json.load(f)
    nodes = sorted(j.get("nodes", []), key=lambda n: -n.get("time_ms", 0.0))
    sum_ms = sum(n.get("time_ms", 0.0) for n in j.get("nodes", []))
    top = [{"name": n["name"], "op": n["op"], "variant": n.get("variant", ""), "time_ms": n["time_ms"],
            "percent": 100.0 * n["time_ms"] / sum_ms if sum_ms else None,
            "gflops": n.get("flops", 0) / (n["time_ms"] * 1e6) if n.get("time_ms") else None,
            "output_shape": n.get("output_shape"), "fused": n.get("fused", [])} for n in nodes[:10]]
    by_op = {}
    for n in j.get("nodes", []):
        s = by_op.setdefault(n["op"], {"count": 0, "time_ms": 0.0, "flops": 0.0})
        s["count"] += 1
        s["time_ms"] += n.get("time_ms", 0.0)
        s["flops"] += n.get("flops", 0.0)
    return {"total_ms": j.get("total_ms"), "sum_node_ms": sum_ms, "nodes": len(j.get("nodes", [])),
            "passes": j.get("passes"), "top": top, "by_op": by_op}


def cpu_model(a, name, errors):
    import numpy as np
    import torch
    from cpu_vs_pytorch import rel_err
    row = {"model": name, "batch": 1, "precision": "fp32", "infer": None, "peers": {}, "rel_err": {},
           "onnx2fb_error": None}
    net, onnx_path, fb, err = prepare(a, name)
    if err:
        row["onnx2fb_error"] = err
        log("   %s: onnx2fb failed: %s" % (name, err))
    ddir = os.path.join(a.tmp, name + "_io")
    x = None
    y_infer = None
    if fb:
        try:
            j = json_infer_bench(a, ["--backend", "cpu", "--threads", str(a.threads), "--runs", str(a.runs),
                                     "--warmup", str(a.warmup), "--batch", "1", "model", fb, "--dump", ddir,
                                     "--no-variants"], name)
            default = j["results"][0]
            row["infer"] = default["time"] if default.get("ran") else None
            row["kernels"] = sorted({"%s=%s" % (n["op"], n["variant"]) for n in j.get("nodes", [])})
            x = np.load(os.path.join(ddir, "input_0.npy")).astype(np.float32)
            y_infer = np.load(os.path.join(ddir, "output_0.npy"))
        except Exception as e:  # noqa: BLE001
            record_error(errors, "%s: infer-bench" % name, e)
    if x is None:  # infer could not run: the peers still do, on a seeded non-zero input
        rng = np.random.default_rng(a.seed)
        x = (rng.uniform(0.01, 1.0, (1, 3, a.size, a.size)) * rng.choice([-1.0, 1.0], (1, 3, a.size, a.size))
             ).astype(np.float32)
    xt = torch.from_numpy(x)
    with torch.no_grad():
        y_torch = net(xt).numpy()
    if y_infer is not None:
        row["rel_err"]["infer_vs_torch"] = rel_err(y_infer, y_torch)
    # ONNX Runtime on the same .onnx: its intra-op pool spinning (its default) and sleeping (as OpenMP's
    # passive wait policy); the faster is "ONNX Runtime" for the goal
    try:
        import onnxruntime as ort
        for kind, spin in (("onnxruntime", "1"), ("onnxruntime_nospin", "0")):
            so = ort.SessionOptions()
            so.intra_op_num_threads = a.threads
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.add_session_config_entry("session.intra_op.allow_spinning", spin)
            sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
            feed = {sess.get_inputs()[0].name: x}
            y_ort = sess.run(None, feed)[0]
            row["rel_err"]["%s_vs_torch" % kind] = rel_err(y_ort, y_torch)
            row["peers"][kind] = wall_times(lambda: sess.run(None, feed), a.runs, a.warmup)
            del sess
    except Exception as e:  # noqa: BLE001
        record_error(errors, "%s: ONNX Runtime" % name, e)
    # PyTorch: every configuration, best of them
    torch.set_num_threads(a.threads)
    configs = {}
    with torch.no_grad():
        configs["eager"] = (net, xt)
        try:
            net_cl = copy.deepcopy(net).to(memory_format=torch.channels_last)
            configs["channels_last"] = (net_cl.eval(), xt.contiguous(memory_format=torch.channels_last))
        except Exception as e:  # noqa: BLE001
            record_error(errors, "%s: PyTorch channels_last" % name, e)
        try:
            configs["jit_frozen"] = (torch.jit.freeze(torch.jit.trace(net, xt).eval()), xt)
        except Exception as e:  # noqa: BLE001
            record_error(errors, "%s: PyTorch jit trace+freeze" % name, e)
        try:
            configs["jit_optimized"] = (torch.jit.optimize_for_inference(torch.jit.trace(net, xt).eval()), xt)
        except Exception as e:  # noqa: BLE001
            record_error(errors, "%s: PyTorch jit optimize_for_inference" % name, e)
        for kind in TORCH_CPU_KINDS:
            if kind not in configs:
                continue
            m, inp = configs[kind]
            try:
                y = m(inp)
                row["rel_err"]["torch_%s_vs_eager" % kind] = rel_err(y.numpy(), y_torch)
                row["peers"][kind] = wall_times(lambda: m(inp), a.runs, a.warmup)
            except Exception as e:  # noqa: BLE001
                record_error(errors, "%s: PyTorch %s" % (name, kind), e)
    finalize_row(row, "cpu")
    miss = row.get("ratio_goal") is not None and row["ratio_goal"] < 1.0
    if fb and (miss or a.profile_all):
        try:
            row["profile"] = infer_profile_top(a, fb, name)
        except Exception as e:  # noqa: BLE001
            record_error(errors, "%s: infer --profile" % name, e)
    shutil.rmtree(ddir, ignore_errors=True)
    log("   %s: infer %s ms, %s; rel err %s" % (
        name, fmt_ms(ms(row["infer"])), ", ".join("%s %s ms" % (k, fmt_ms(ms(v))) for k, v in row["peers"].items()),
        row["rel_err"].get("infer_vs_torch")))
    return row


def json_infer_bench(a, args, name):
    path = os.path.join(a.tmp, name + "_bench.json")
    run_cmd([a.bench] + args[:args.index("model")] + ["--json", path] + args[args.index("model"):], a.timeout,
            cpu_env(a))
    with open(path) as f:
        return json.load(f)


def part_cpu(a, errors):
    log("== CPU, batch 1, %d threads, %dx%d" % (a.threads, a.size, a.size))
    return [cpu_model(a, name, errors) for name in a.models]


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
        for r in g.model_rows(a, gerrors, name, fb, net, (3, a.size, a.size)):
            t = r.get("torch") or {}
            row = {"model": name, "batch": r["batch"], "precision": r["precision"], "infer": r["infer"],
                   "infer_no_passes": r.get("infer_no_passes"), "kernels": r.get("kernels"),
                   "peers": {k: t[k] for k in g.TORCH_KINDS if k in t},
                   "peer_errors": {k: v for k, v in t.items() if k.endswith("_error")},
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
            if p and os.path.exists(p):
                os.remove(p)
    return rows


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


def check_error(row):
    """(relative error used, tolerance): fp32 infer vs PyTorch fp32; tf32 / fp16 infer vs strict fp32."""
    e = row["rel_err"]
    if row["precision"] == "fp32":
        v = e.get("infer_vs_torch", e.get("rel_err"))
    else:
        v = e.get("rel_err_vs_fp32")
    return v, TOLERANCE[row["precision"]]


def finalize_row(row, device):
    """Adds the best peer, the ratios (peer ms / infer ms: > 1 means infer is faster) and the check."""
    peers = {k: ms(v) for k, v in row["peers"].items() if ms(v)}
    best = min(peers, key=peers.get) if peers else None
    row["best_peer"] = best
    row["best_peer_ms"] = peers.get(best) if best else None
    inf = ms(row["infer"])
    row["ratio_best"] = row["best_peer_ms"] / inf if inf and best else None
    if device == "cpu":
        ort_ms = [v for k, v in peers.items() if k.startswith("onnxruntime")]
        row["goal_peer"] = "ONNX Runtime (faster of spinning / not spinning)"
        row["ratio_goal"] = min(ort_ms) / inf if inf and ort_ms else None
    else:
        row["goal_peer"] = "PyTorch best"
        row["ratio_goal"] = row["ratio_best"]
    v, tol = check_error(row)
    row["check"] = {"rel_err": v, "tolerance": tol,
                    "ok": None if v is None else bool(v <= tol)}


def compute_goals(results):
    rows, goals = results["rows"], []
    models = results["models"]
    if results["device"] == "gpu":
        for precision in results["precisions"]:
            got = {r["model"]: r for r in rows if r["batch"] == 1 and r["precision"] == precision}
            ratios = {m: got[m]["ratio_goal"] if m in got else None for m in MODELS}
            measured = [m for m in MODELS if ratios[m] is not None]
            missing = [m for m in MODELS if ratios[m] is None]
            low = [m for m in measured if ratios[m] < 1.0]
            status = "met" if not missing and not low else ("missed" if low or len(missing) < len(MODELS)
                                                            else "not measured")
            goals.append({"goal": "GPU batch 1 %s: infer >= 1.0x PyTorch best on all four" % precision,
                          "status": status, "detail": detail(ratios, got)})
    else:
        got = {r["model"]: r for r in rows if r["batch"] == 1}
        ratios = {m: got[m]["ratio_goal"] if m in got else None for m in MODELS}
        n_met = sum(1 for m in MODELS if ratios[m] is not None and ratios[m] >= 1.0)
        any_measured = any(ratios[m] is not None for m in MODELS)
        status = "met" if n_met >= CPU_GOAL_MODELS else ("missed" if any_measured else "not measured")
        goals.append({"goal": "CPU batch 1: infer >= 1.0x ONNX Runtime on at least %d of the four" % CPU_GOAL_MODELS,
                      "status": status, "detail": "%d of 4 at >= 1.0x; %s" % (n_met, detail(ratios, got))})
    checked = [r for r in rows if r["check"]["ok"] is not None]
    bad = [r for r in checked if not r["check"]["ok"]]
    goals.append({"goal": "correctness: infer vs PyTorch within 1e-3 (fp32) / 2e-2 (tf32, fp16) relative",
                  "status": "met" if checked and not bad else ("missed" if bad else "not measured"),
                  "detail": "%d rows checked, %d outside" % (len(checked), len(bad)) +
                  ("".join("; %s b%d %s: %.1e" % (MODEL_NAMES.get(r["model"], r["model"]), r["batch"],
                                                   r["precision"], r["check"]["rel_err"]) for r in bad))})
    return goals


def detail(ratios, got):
    parts = []
    for m in MODELS:
        if ratios.get(m) is not None:
            parts.append("%s %s" % (MODEL_NAMES[m], fx(ratios[m])))
        elif m in got and got[m].get("onnx2fb_error"):
            parts.append("%s does not import" % MODEL_NAMES[m])
        else:
            parts.append("%s not measured" % MODEL_NAMES[m])
    return ", ".join(parts)


def markdown(results):
    dev = results["device"]
    env = results["environment"]
    out = ["# Bring your own model: infer vs peers on the %s (%s)" % (dev.upper(), results["date"]), ""]
    out.append("Issue 14, must 5. torchvision models with seeded random weights (BatchNorm with gathered, "
               "perturbed running statistics), exported to ONNX (TorchScript exporter, opset %d, dynamic batch), "
               "converted by `onnx2fb`, input %dx%d. Written by `bench/byom_vs_peers.py`%s." % (
                   OPSET, results["size"], results["size"],
                   " from synthetic numbers (--selftest)" if results.get("synthetic") else ""))
    out.append("")
    out.append("- command: `%s`" % results["command"])
    for k in ("device_name", "cpu", "cpus", "threads", "OMP_WAIT_POLICY", "torch", "torchvision", "onnxruntime", "onnx", "numpy",
              "python", "host"):
        if env.get(k) is not None:
            out.append("- %s: %s" % (k, env[k]))
    out.append("- load average before: %s; after: %s" % (results.get("load_before"), results.get("load_after")))
    out.append("- runs: %s timed after %s warm-up (median)%s" % (
        results["runs"], results["warmup"],
        "; batch >= 32: %s after %s" % (results.get("large_runs"), results.get("large_warmup")) if dev == "gpu" else ""))
    out.append("- timing: infer: infer-bench (%s); peers: %s" % (
        "CUDA events around CUDA-graph replays, no host copies" if dev == "gpu" else
        "steady_clock around Session::run, copy-in/out included",
        "CUDA events per call / per graph replay" if dev == "gpu" else "perf_counter around each call"))
    out += ["", "## Goals", "", "| goal | status | detail |", "|---|---|---|"]
    for g in results["goals"]:
        out.append("| %s | **%s** | %s |" % (g["goal"], g["status"], g["detail"]))
    peer_kinds = (["onnxruntime", "onnxruntime_nospin"] + TORCH_CPU_KINDS) if dev == "cpu" else ["eager", "graph", "channels_last_graph"]
    out += ["", "## Times (ms, median)", ""]
    goal_col = "vs ONNX Runtime" if dev == "cpu" else "vs PyTorch best"
    head = ["model", "batch", "precision", "infer"] + [PEER_NAMES[k] for k in peer_kinds] + \
        ["best peer", goal_col] + (["vs best peer"] if dev == "cpu" else []) + ["rel err (tol)", "check"]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    import_errors = []
    for r in results["rows"]:
        name = MODEL_NAMES.get(r["model"], r["model"])
        if r.get("onnx2fb_error"):
            import_errors.append((name, r["onnx2fb_error"]))
        c = r["check"]
        cells = [name, str(r["batch"]), r["precision"],
                 "does not import (below)" if r.get("onnx2fb_error") else fmt_ms(ms(r["infer"]))]
        cells += [fmt_ms(ms(r["peers"].get(k))) for k in peer_kinds]
        cells += [PEER_NAMES.get(r["best_peer"], "n/a") if r["best_peer"] else "n/a", fx(r["ratio_goal"])]
        if dev == "cpu":
            cells.append(fx(r["ratio_best"]))
        cells += ["%.1e (%.0e)" % (c["rel_err"], c["tolerance"]) if c["rel_err"] is not None else "n/a",
                  {True: "ok", False: "**FAIL**", None: "n/a"}[c["ok"]]]
        out.append("| " + " | ".join(cells) + " |")
    seen = set()
    for name, err in import_errors:
        if name not in seen:
            seen.add(name)
            out.append("\n%s does not import yet: `%s`" % (name, short(err).replace("`", "'")))
    out += ["", "Ratios are peer time / infer time: above 1.0x infer is faster. %s" % (
        "PyTorch best is the fastest of eager, CUDA graph and channels_last + CUDA graph; fp32 is strict (TF32 off "
        "on both sides), tf32 allows TF32 on both, fp16 is half on both (infer: SessionOptions::precision FP16 on "
        "the fp32 .fb); tf32/fp16 errors are against strict-fp32 PyTorch." if dev == "gpu" else
        "All peers use %s threads; vs ONNX Runtime: against the faster of its two configurations (intra-op pool "
        "spinning, its default, or not: session.intra_op.allow_spinning = 0); rel err: infer vs PyTorch eager."
        % results["environment"].get("threads"))]
    if dev == "cpu":
        others = [(r, k, v) for r in results["rows"] for k, v in sorted(r.get("rel_err", {}).items())
                  if k not in ("infer_vs_torch", "torch_eager_vs_eager")]
        if others:
            out += ["", "Peer cross-checks (relative error): " + "; ".join(
                "%s %s %.1e" % (MODEL_NAMES.get(r["model"], r["model"]), k, v) for r, k, v in others)]
    prof = [r for r in results["rows"] if r.get("profile")]
    if prof:
        out += ["", "## Per-node profile of the CPU misses (infer --profile, top 10 by time)", ""]
        for r in prof:
            p = r["profile"]
            out += ["### %s (infer %s ms vs ONNX Runtime %s ms: %s)" % (
                MODEL_NAMES.get(r["model"], r["model"]), fmt_ms(ms(r["infer"])),
                fmt_ms(min([ms(v) for k, v in r["peers"].items() if k.startswith("onnxruntime")] or [None],
                         key=lambda v: v if v is not None else 1e300)), fx(r["ratio_goal"])), "",
                "%d nodes, sum of node medians %.3f ms. By op: %s" % (
                    p["nodes"], p["sum_node_ms"], ", ".join(
                        "%s %d x %.2f ms (%.0f GFLOP/s)" % (op, s["count"], s["time_ms"],
                                                           s["flops"] / (s["time_ms"] * 1e6) if s["time_ms"] else 0)
                        for op, s in sorted(p["by_op"].items(), key=lambda kv: -kv[1]["time_ms"]))), "",
                "| node | op | variant | output | ms | % | GFLOP/s |", "|---|---|---|---|---|---|---|"]
            for n in p["top"]:
                out.append("| %s | %s | %s | %s | %.3f | %.1f | %s |" % (
                    n["name"], n["op"], n["variant"], "x".join(str(d) for d in n.get("output_shape") or []),
                    n["time_ms"], n["percent"] or 0, "%.1f" % n["gflops"] if n["gflops"] is not None else "n/a"))
            out.append("")
    if results["errors"]:
        out += ["", "## Items that failed", ""]
        for e in results["errors"]:
            out.append("- %s: `%s`" % (e["item"], e["error"].replace("\n", " ")[:400]))
    return "\n".join(out) + "\n"


def write_report(results, stem):
    results["goals"] = compute_goals(results)
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1)
    text = markdown(results)
    with open(stem + ".md", "w") as f:
        f.write(text)
    log("wrote %s.{md,json}" % stem)
    return text


def environment(a):
    env = {"cpu": cpu_name(), "cpus": os.cpu_count(), "python": platform.python_version(), "host": platform.node(),
           "python_executable": sys.executable}
    if a.device == "cpu":
        env["threads"] = a.threads
        env["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", "(unset)")
    for mod in ("torch", "torchvision", "onnxruntime", "onnx", "numpy"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            env[mod] = None
    if a.device == "cuda":
        import torch
        env["device_name"] = torch.cuda.get_device_name(0)
        env["torch_cuda"] = torch.version.cuda
    return env


def record_error(errors, item, e):
    text = "%s: %s" % (type(e).__name__, e)
    log("   FAILED %s: %s" % (item, text))
    errors.append({"item": item, "error": text, "traceback": traceback.format_exc()})


def merge_results(paths):
    """One results dict from several of this script's JSONs (one device); a (model, batch, precision) row of
    a later file replaces an earlier one; models in the order of MODELS."""
    runs = [json.load(open(p)) for p in paths]
    devices = {r["device"] for r in runs}
    if len(devices) != 1:
        sys.exit("error: --merge needs results of one device, got %s" % sorted(devices))
    merged = dict(runs[-1])
    rows = {}
    for r in runs:
        for row in r["rows"]:
            rows[(row["model"], row["batch"], row["precision"])] = row
    order = {m: i for i, m in enumerate(MODELS)}
    merged["rows"] = [rows[k] for k in sorted(rows, key=lambda k: (order.get(k[0], 99), k[2], k[1]))]
    merged["models"] = [m for m in MODELS if any(k[0] == m for k in rows)]
    merged["precisions"] = sorted({k[2] for k in rows}, key=lambda p: list(TOLERANCE).index(p))
    merged["batches"] = sorted({k[1] for k in rows})
    merged["errors"] = [e for r in runs for e in r["errors"]]
    merged["command"] = "; ".join(r["command"] for r in runs) + "; merged by: " + " ".join(
        shlex.quote(c) for c in [sys.executable] + sys.argv)
    merged["load_before"] = runs[0]["load_before"]
    merged["merged_from"] = [{"file": p, "date": r["date"], "command": r["command"]} for p, r in zip(paths, runs)]
    return merged


# ---- selftest ----

def synthetic(device):
    def t(v):
        return {"median_ms": v, "min_ms": v * 0.95, "max_ms": v * 1.1, "runs": 20}
    rows = []
    if device == "cpu":
        spec = {"resnet18": (30.0, 25.0, 40.0), "resnet50": (80.0, 85.0, 95.0), "mobilenet_v2": None,
                "efficientnet_b0": (20.0, 10.0, 30.0)}
        for m in MODELS:
            if spec[m] is None:
                rows.append({"model": m, "batch": 1, "precision": "fp32", "infer": None, "peers": {}, "rel_err": {},
                             "onnx2fb_error": "onnx2fb exited with 2: error: unsupported op Clip"})
                finalize_row(rows[-1], "cpu")
                continue
            inf, ort, eager = spec[m]
            r = {"model": m, "batch": 1, "precision": "fp32", "infer": t(inf),
                 "peers": {"onnxruntime": t(ort), "eager": t(eager), "jit_frozen": t(eager * 0.9)},
                 "rel_err": {"infer_vs_torch": 2e-6, "onnxruntime_vs_torch": 1e-6}, "onnx2fb_error": None}
            finalize_row(r, "cpu")
            if r["ratio_goal"] < 1.0:
                r["profile"] = {"total_ms": inf, "sum_node_ms": inf * 0.98, "nodes": 3, "passes": [],
                                "by_op": {"conv2d": {"count": 2, "time_ms": inf * 0.9, "flops": 1e9}},
                                "top": [{"name": "conv%d" % i, "op": "conv2d", "variant": "im2col_gemm",
                                         "time_ms": inf * 0.3, "percent": 30.0, "gflops": 12.0,
                                         "output_shape": [1, 64, 56, 56], "fused": []} for i in range(3)]}
            rows.append(r)
    else:
        for m in MODELS:
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
                             "onnx2fb_error": None}
                        r["rel_err"] = {k: v for k, v in r["rel_err"].items() if v is not None}
                    finalize_row(r, "gpu")
                    rows.append(r)
    return {"device": device, "date": "2000-01-01 00:00 UTC", "synthetic": True, "size": 224,
            "command": "bench/byom_vs_peers.py --selftest", "models": MODELS,
            "precisions": ["fp32"] if device == "cpu" else ["fp32", "tf32", "fp16"],
            "batches": [1] if device == "cpu" else [1, 64], "runs": 20, "warmup": 3, "large_runs": 10,
            "large_warmup": 3, "load_before": "0.00 0.00 0.00", "load_after": "0.00 0.00 0.00",
            "environment": {"cpu": "synthetic", "cpus": 2, "threads": 2, "device_name": "synthetic GPU"},
            "rows": rows, "errors": [{"item": "mobilenet_v2: onnx2fb", "error": "synthetic", "traceback": ""}]}


def selftest():
    with tempfile.TemporaryDirectory(prefix="byom-selftest-") as tmp:
        cpu = synthetic("cpu")
        text = write_report(cpu, os.path.join(tmp, "byom-cpu"))
        g = {x["goal"].split(":")[0]: x for x in cpu["goals"]}
        # resnet18 0.83x, resnet50 1.06x, efficientnet 0.5x: 1 of 4 -> missed
        assert g["CPU batch 1"]["status"] == "missed", cpu["goals"]
        assert "1 of 4" in g["CPU batch 1"]["detail"] and "MobileNetV2 does not import" in g["CPU batch 1"]["detail"]
        assert g["correctness"]["status"] == "met"
        assert "unsupported op Clip" in text and "Per-node profile of the CPU misses" in text
        assert "### ResNet-18" in text and "### ResNet-50" not in text and "### EfficientNet-B0" in text
        json.load(open(os.path.join(tmp, "byom-cpu.json")))
        gpu = synthetic("gpu")
        text = write_report(gpu, os.path.join(tmp, "byom-gpu"))
        gg = [x for x in gpu["goals"] if x["goal"].startswith("GPU batch 1")]
        assert len(gg) == 3 and all(x["status"] == "missed" for x in gg), gg
        assert "ResNet-50 0.90x" in gg[0]["detail"] and "ResNet-18 1.10x" in gg[0]["detail"], gg[0]
        assert "EfficientNet-B0 does not import" in gg[0]["detail"]
        assert "unsupported op Mul" in text and "PyTorch channels_last + CUDA graph" in text
        # a row that fails the check is reported as such
        bad = synthetic("cpu")
        bad["rows"][0]["rel_err"]["infer_vs_torch"] = 5e-3
        finalize_row(bad["rows"][0], "cpu")
        text = write_report(bad, os.path.join(tmp, "byom-bad"))
        assert "**FAIL**" in text and [x for x in bad["goals"] if x["goal"].startswith("correctness")][0][
            "status"] == "missed"
        # --merge: two GPU halves give the whole
        half1, half2 = synthetic("gpu"), synthetic("gpu")
        half1["rows"] = [r for r in half1["rows"] if r["model"] in MODELS[:2]]
        half2["rows"] = [r for r in half2["rows"] if r["model"] not in MODELS[:2]]
        for i, h in enumerate((half2, half1)):
            json.dump(h, open(os.path.join(tmp, "h%d.json" % i), "w"))
        m = merge_results([os.path.join(tmp, "h0.json"), os.path.join(tmp, "h1.json")])
        assert [r["model"] for r in m["rows"]][::6] == MODELS, [r["model"] for r in m["rows"]]
        m["goals"] = compute_goals(m)
        assert m["goals"][0]["detail"] == gg[0]["detail"], (m["goals"][0], gg[0])
    print("selftest passed: cpu and gpu reports from synthetic numbers, goals and checks as expected")


# ---- main ----

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], help="which part to run (required unless --selftest)")
    p.add_argument("--build", default="build", help="build folder with onnx2fb, infer-bench and infer")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    p.add_argument("--batches", default=None, help="cuda: default 1,64 (cpu: 1 only)")
    p.add_argument("--precisions", default=None, help="cuda: default fp32,tf32,fp16 (cpu: fp32 only)")
    p.add_argument("--size", type=int, default=224, help="input height = width")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="cpu: threads of every peer (default: cores)")
    p.add_argument("--runs", type=int, default=None, help="timed runs (default cpu 30, cuda 50)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up runs (default cpu 5, cuda 10)")
    p.add_argument("--large-runs", type=int, default=20, help="cuda, batch >= 32: timed runs")
    p.add_argument("--large-warmup", type=int, default=5, help="cuda, batch >= 32: warm-up runs")
    p.add_argument("--omp-wait-policy", choices=["passive", "active", "unset"], default="passive",
                   help="cpu: OMP_WAIT_POLICY of every peer (infer-bench, infer, PyTorch; default passive: on a "
                   "loaded 2-core machine spinning OpenMP threads cost infer up to 10x, docs/kernels.md); unset: "
                   "leave the environment's")
    p.add_argument("--profile-runs", type=int, default=10, help="cpu: runs of infer --profile for a miss")
    p.add_argument("--profile-all", action="store_true", help="cpu: profile every model, not only the misses")
    p.add_argument("--no-cudnn-benchmark", action="store_true")
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--timeout", type=int, default=900, help="per subprocess, seconds")
    p.add_argument("--venv", default=os.path.join(REPO, ".venv-bench"), help="cpu: venv that gets onnxruntime")
    p.add_argument("--no-venv", action="store_true", help="cpu: never create / re-execute under the venv")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--tag", default="", help="suffix of the result file names")
    p.add_argument("--keep", metavar="DIR", help="keep the .onnx / .fb files here instead of a temporary folder")
    p.add_argument("--merge", nargs="+", metavar="JSON", help="write one report from results JSONs of this script "
                   "(same device; rows of later files win), e.g. a GPU run split over --models; runs nothing")
    p.add_argument("--selftest", action="store_true", help="report from synthetic numbers; no torch, GPU or build")
    a = p.parse_args()
    if a.selftest:
        selftest()
        return
    if a.merge:
        results = merge_results(a.merge)
        stem = os.path.join(a.out, "byom-%s-%s-merged%s" % (results["device"], results["date"][:10],
                                                            ("-" + a.tag) if a.tag else ""))
        print(write_report(results, stem))
        return
    if not a.device:
        p.error("--device cpu|cuda is required (or --selftest)")
    cpu = a.device == "cpu"
    if cpu:
        if a.omp_wait_policy != "unset":  # before torch is imported (and inherited by the venv's re-exec)
            os.environ["OMP_WAIT_POLICY"] = a.omp_wait_policy.upper()
        ensure_onnxruntime(a)
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in MODELS:
            p.error("unknown model %s (choose from %s)" % (m, ",".join(MODELS)))
    a.batches = [1] if cpu else [int(b) for b in (a.batches or "1,64").split(",") if b]
    a.precisions = ["fp32"] if cpu else [x for x in (a.precisions or "fp32,tf32,fp16").split(",") if x]
    a.runs = a.runs or (30 if cpu else 50)
    a.warmup = a.warmup if a.warmup is not None else (5 if cpu else 10)
    a.autotune = False
    a.bench = os.path.join(a.build, "infer-bench")
    a.infer = os.path.join(a.build, "infer")
    a.onnx2fb = os.path.join(a.build, "onnx2fb")
    for exe in (a.bench, a.infer, a.onnx2fb):
        if not os.access(exe, os.X_OK):
            sys.exit("error: %s not found; build it first (cmake --build %s)" % (exe, a.build))
    import torch
    if cpu:
        torch.set_num_threads(a.threads)
    else:
        torch.backends.cudnn.benchmark = not a.no_cudnn_benchmark
    now = datetime.datetime.now(datetime.timezone.utc)
    results = {"device": "cpu" if cpu else "gpu", "date": now.strftime("%Y-%m-%d %H:%M UTC"), "size": a.size,
               "command": " ".join(shlex.quote(c) for c in [sys.executable] + sys.argv), "models": a.models,
               "precisions": a.precisions, "batches": a.batches, "runs": a.runs, "warmup": a.warmup,
               "large_runs": a.large_runs, "large_warmup": a.large_warmup, "load_before": loadavg(),
               "environment": environment(a), "rows": [], "errors": []}
    log("load average before: %s" % results["load_before"])
    started = time.time()
    tmp = a.keep or tempfile.mkdtemp(prefix="byom-")
    os.makedirs(tmp, exist_ok=True)
    a.tmp = tmp
    try:
        results["rows"] = part_cpu(a, results["errors"]) if cpu else part_gpu(a, results["errors"])
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


if __name__ == "__main__":
    main()
