#!/usr/bin/env python3
"""Per-layer depthwise convolutions on the GPU: infer's conv2d variants vs cuDNN vs PyTorch (issue 31).

Run on the GPU machine with its python3 (PyTorch with CUDA, torchvision, onnx):
    python3 bench/gpu_depthwise.py --build build --out bench/results/depthwise [--batches 1,64]
        [--precisions fp16,tf32,fp32] [--runs 50] [--models mobilenet_v2,efficientnet_b0]
The layers: every depthwise convolution (groups == C_in == C_out > 1) of torchvision's mobilenet_v2 and
efficientnet_b0 at 224x224, found with forward hooks (C, H, W, kernel, stride, padding), identical
shapes merged (count kept). Each becomes a one-layer model: an ONNX Conv (group = C, bias) + the
network's activation (ReLU6 as Clip, SiLU as Mul(x, Sigmoid(x))) written with onnx.helper, converted by
onnx2fb, behind a 1x1 "lead" convolution (C -> C): in a network the depthwise conv reads a 1x1 conv's
output, which runs channels-last, and the layout pass keeps a node in its input's layout where both rank
alike, so without the lead conv a lone depthwise conv stays NCHW and the NHWC kernel is never timed
(the run of 2026-11-27 17:49 UTC made that mistake). Per layer, batch and precision:
  infer: `infer --profile --profile-json` (nodes launched one by one between CUDA events), the depthwise
      node's time (the lead conv and layout conversions are separate nodes and not counted) in the default
      plan and with `--kernel conv2d:dw=depthwise` and `--kernel conv2d:dw=cudnn` forced; its variant and
      layout are recorded. fp16 and tf32 run channels-last (NHWC, the tiled kernel; depthwise in tf32 is
      plain fp32 arithmetic), strict fp32 keeps NCHW (the NCHW kernel).
  PyTorch: F.conv2d(groups=C) + bias + the activation on channels_last tensors, captured as a CUDA
      graph (replays timed with CUDA events, median), cudnn.benchmark on; also the convolution alone.
Prints a markdown table and writes <out>/depthwise-<date>.json and .md. --cpu-check builds the models
and runs each once on infer's cpu backend (no GPU, no timing): the CPU-side logic on any machine.
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

MODELS = {"mobilenet_v2": "relu6", "efficientnet_b0": "silu"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_cmd(cmd, timeout=600):
    log("$ " + " ".join(shlex.quote(c) for c in cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        raise RuntimeError("%s exited with %d: %s" % (os.path.basename(cmd[0]), p.returncode,
                                                      lines[-1] if lines else "(nothing on stderr)"))
    return p.stdout


# ---- layers ----

def depthwise_layers(model_name):
    """[(C, H, W, k, stride, pad, count)] of the model's depthwise convolutions at 224x224, in order of
    first appearance (torchvision, random weights; shapes only)."""
    import torch
    import torchvision
    model = getattr(torchvision.models, model_name)(weights=None).eval()
    seen, order = {}, []

    def hook(mod, inp, _out):
        x = inp[0]
        key = (int(x.shape[1]), int(x.shape[2]), int(x.shape[3]), int(mod.kernel_size[0]), int(mod.stride[0]),
               int(mod.padding[0]))
        if key not in seen:
            seen[key] = 0
            order.append(key)
        seen[key] += 1

    handles = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d) and m.groups > 1 and m.groups == m.in_channels == m.out_channels:
            handles.append(m.register_forward_hook(hook))
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))
    for h in handles:
        h.remove()
    return [k + (seen[k],) for k in order]


def out_size(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def write_onnx(path, c, h, w, k, s, p, act, seed):
    """y = act(Conv(lead(x), W, B; group = C)), lead a 1x1 C -> C conv, batch dimension symbolic."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    wt = (rng.uniform(-1, 1, (c, 1, k, k)) / k).astype(np.float32)
    bias = rng.uniform(-0.1, 0.1, (c,)).astype(np.float32)
    lead_w = (rng.uniform(-1, 1, (c, c, 1, 1)) / c ** 0.5).astype(np.float32)
    inits = [numpy_helper.from_array(wt, "w"), numpy_helper.from_array(bias, "b"),
             numpy_helper.from_array(lead_w, "lead_w")]
    nodes = [helper.make_node("Conv", ["x", "lead_w"], ["lead"], name="lead", kernel_shape=[1, 1]),
             helper.make_node("Conv", ["lead", "w", "b"], ["conv"], name="dw", group=c, kernel_shape=[k, k],
                              strides=[s, s], pads=[p, p, p, p])]
    if act == "relu6":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["conv", "lo", "hi"], ["y"], name="relu6"))
    else:
        nodes.append(helper.make_node("Sigmoid", ["conv"], ["gate"], name="sigmoid"))
        nodes.append(helper.make_node("Mul", ["conv", "gate"], ["y"], name="silu"))
    ho, wo = out_size(h, k, s, p), out_size(w, k, s, p)
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, h, w])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", c, ho, wo])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="gpu_depthwise.py")
    onnx.checker.check_model(model)
    onnx.save(model, path)


def layer_label(model, c, h, w, k, s):
    return "%s %dx%dx%d k%d s%d" % (model, c, h, w, k, s)


# ---- infer ----

def infer_conv_ms(a, fb, backend, precision, batch, kernel=None, runs=None):
    """The depthwise node ("dw") of infer's profile: time_ms, variant, layout, layout nodes' time."""
    path = fb + ".%s.%s.%d.%s.json" % (backend, precision, batch, kernel or "default")
    cmd = [a.infer, "--model", fb, "--backend", backend, "--precision", precision, "--batch", str(batch),
           "--profile", "--runs", str(runs or a.runs), "--profile-json", path]
    if kernel:
        cmd += ["--kernel", "conv2d:dw=" + kernel]
    run_cmd(cmd)
    with open(path) as f:
        prof = json.load(f)
    convs = [n for n in prof["nodes"] if n["op"] == "conv2d" and n["name"] == "dw"]
    if len(convs) != 1:
        raise RuntimeError("%s: expected one conv2d node named dw, found %d" % (fb, len(convs)))
    n = convs[0]
    return {"ms": n["time_ms"], "variant": n["variant"], "layout": n["layout"],
            "layout_nodes_ms": sum(m["time_ms"] for m in prof["nodes"] if m["op"] == "layout")}


# ---- PyTorch ----

def torch_ms(c, h, w, k, s, p, act, batch, precision, runs, warmup):
    """{conv, conv_act}: F.conv2d(groups=C) (+ activation) on channels_last tensors, CUDA-graph replays."""
    import torch
    import torch.nn.functional as F
    torch.backends.cudnn.benchmark = True
    tf32 = precision == "tf32"
    try:
        torch.backends.cudnn.conv.fp32_precision = "tf32" if tf32 else "ieee"
    except AttributeError:
        torch.backends.cudnn.allow_tf32 = tf32
    dtype = torch.float16 if precision == "fp16" else torch.float32
    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    x = torch.rand((batch, c, h, w), generator=g, device="cuda").to(dtype).contiguous(memory_format=torch.channels_last)
    wt = (torch.rand((c, 1, k, k), generator=g, device="cuda") / k).to(dtype).contiguous(
        memory_format=torch.channels_last)
    b = torch.rand((c,), generator=g, device="cuda").to(dtype)
    activation = (lambda t: F.relu6(t)) if act == "relu6" else (lambda t: F.silu(t))
    fns = {"conv": lambda: F.conv2d(x, wt, b, stride=s, padding=p, groups=c),
           "conv_act": lambda: activation(F.conv2d(x, wt, b, stride=s, padding=p, groups=c))}
    out = {}
    for name, fn in fns.items():
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(max(warmup, 3)):
                    fn()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static = fn()
            for _ in range(warmup):
                graph.replay()
            torch.cuda.synchronize()
            times = []
            for _ in range(runs):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                graph.replay()
                e1.record()
                e1.synchronize()
                times.append(e0.elapsed_time(e1))
            del graph, static
        out[name] = statistics.median(times)
    return out


# ---- report ----

def fmt(v):
    return "-" if v is None else "%.4f" % v


def ratio(a, b):
    return "-" if a is None or b is None or a <= 0 else "%.2fx" % (b / a)


def markdown(rows, meta):
    out = ["# Depthwise layers: infer vs cuDNN vs PyTorch", "",
           "%s, %s, runs %d. infer: conv node time of `infer --profile` (default plan, and `--kernel conv2d=V`); "
           "PyTorch: F.conv2d(groups=C) + activation, channels_last, CUDA graph. Ratios: PyTorch (conv + act) / "
           "infer default, cuDNN (through infer) / infer depthwise." % (meta["date"], meta.get("device", "?"), meta["runs"]),
           "", "| layer | n | batch | prec | default ms (variant, layout) | depthwise ms | cudnn ms | torch conv ms | "
           "torch conv+act ms | vs torch | depthwise vs cudnn |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        d = r.get("default") or {}
        dw = (r.get("depthwise") or {}).get("ms")
        cu = (r.get("cudnn") or {}).get("ms")
        t = r.get("torch") or {}
        out.append("| %s | %d | %d | %s | %s (%s, %s) | %s | %s | %s | %s | %s | %s |" % (
            r["layer"], r["count"], r["batch"], r["precision"], fmt(d.get("ms")), d.get("variant", "-"),
            d.get("layout", "-"), fmt(dw), fmt(cu), fmt(t.get("conv")), fmt(t.get("conv_act")),
            ratio(d.get("ms"), t.get("conv_act")), ratio(dw, cu)))
    out.append("")
    # per (model, batch, precision): sums weighted by the layer count (the network's depthwise time)
    sums = {}
    for r in rows:
        k = (r["model"], r["batch"], r["precision"])
        s = sums.setdefault(k, {"default": 0.0, "depthwise": 0.0, "cudnn": 0.0, "torch": 0.0, "ok": True})
        for key in ("default", "depthwise", "cudnn"):
            if r.get(key):
                s[key] += r[key]["ms"] * r["count"]
            else:
                s["ok"] = False
        if r.get("torch"):
            s["torch"] += r["torch"]["conv_act"] * r["count"]
        else:
            s["ok"] = False
    out += ["| model | batch | prec | default ms | depthwise ms | cudnn ms | torch conv+act ms | complete |",
            "|---|---|---|---|---|---|---|---|"]
    for (m, b, p), s in sums.items():
        out.append("| %s | %d | %s | %.4f | %.4f | %.4f | %.4f | %s |" % (m, b, p, s["default"], s["depthwise"],
                                                                      s["cudnn"], s["torch"], "yes" if s["ok"] else "no"))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="build folder holding infer and onnx2fb")
    ap.add_argument("--out", default="bench/results/depthwise")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--precisions", default="fp16,tf32,fp32")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cpu-check", action="store_true", help="build the models, run each once on cpu; no timing")
    a = ap.parse_args()
    a.infer = os.path.join(a.build, "infer")
    a.onnx2fb = os.path.join(a.build, "onnx2fb")
    for tool in (a.infer, a.onnx2fb):
        if not os.access(tool, os.X_OK):
            sys.exit("error: %s not found (build the infer and onnx2fb targets)" % tool)
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="gpu_depthwise_")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = {"date": date, "runs": a.runs, "warmup": a.warmup, "command": " ".join(map(shlex.quote, sys.argv))}
    rows, errors = [], []
    for model in a.models.split(","):
        act = MODELS[model]
        for i, (c, h, w, k, s, p, count) in enumerate(depthwise_layers(model)):
            fb = os.path.join(tmp, "%s_%d.fb" % (model, i))
            onnx_path = fb[:-3] + ".onnx"
            write_onnx(onnx_path, c, h, w, k, s, p, act, seed=100 + i)
            run_cmd([a.onnx2fb, onnx_path, fb])
            label = layer_label(model, c, h, w, k, s)
            if a.cpu_check:
                r = infer_conv_ms(a, fb, "cpu", "fp32", 1, runs=1)
                if r["variant"] == "":
                    raise RuntimeError(label + ": no variant")
                rows.append({"model": model, "layer": label, "count": count, "batch": 1, "precision": "fp32",
                             "c": c, "h": h, "w": w, "k": k, "stride": s, "pad": p, "cpu": r})
                log("ok %s (x%d): cpu %s %s" % (label, count, r["variant"], r["layout"]))
                continue
            for batch in map(int, a.batches.split(",")):
                for prec in a.precisions.split(","):
                    row = {"model": model, "layer": label, "count": count, "batch": batch, "precision": prec,
                           "c": c, "h": h, "w": w, "k": k, "stride": s, "pad": p, "activation": act}
                    for key, kernel in (("default", None), ("depthwise", "depthwise"), ("cudnn", "cudnn")):
                        try:
                            row[key] = infer_conv_ms(a, fb, "cuda", prec, batch, kernel)
                        except Exception as e:  # noqa: BLE001  (recorded; the run goes on)
                            errors.append({"item": "%s b%d %s %s" % (label, batch, prec, key), "error": str(e)})
                            log("   FAILED: %s" % e)
                    try:
                        row["torch"] = torch_ms(c, h, w, k, s, p, act, batch, prec, a.runs, a.warmup)
                    except Exception as e:  # noqa: BLE001
                        errors.append({"item": "%s b%d %s torch" % (label, batch, prec), "error": str(e)})
                        log("   FAILED torch: %s" % e)
                    rows.append(row)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M")
    if a.cpu_check:
        print("cpu check: %d layers built and run" % len(rows))
        for r in rows:
            print("  %s x%d -> %s (%s)" % (r["layer"], r["count"], r["cpu"]["variant"], r["cpu"]["layout"]))
        return 0
    try:
        import torch
        meta["device"] = torch.cuda.get_device_name(0)
        meta["torch"] = torch.__version__
    except Exception:  # noqa: BLE001
        pass
    md = markdown(rows, meta)
    print(md)
    with open(os.path.join(a.out, "depthwise-%s.json" % stamp), "w") as f:
        json.dump({"meta": meta, "rows": rows, "errors": errors}, f, indent=1)
    with open(os.path.join(a.out, "depthwise-%s.md" % stamp), "w") as f:
        f.write(md)
    if errors:
        log("%d items failed (in the JSON)" % len(errors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
