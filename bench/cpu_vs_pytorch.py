#!/usr/bin/python3
"""infer (cpu backend) vs PyTorch eager on the CPU, side by side in one run on one machine.

Run with Debian's python3 (python3-torch, python3-numpy; python3-matplotlib for the plot):
    /usr/bin/python3 bench/cpu_vs_pytorch.py --build build [--threads 2] [--runs 20]
Parts (each timed as the median of --runs after --warmup untimed runs, both sides with --threads):
  (a) Table-4 transposed-conv layers: every infer conv_transpose2d variant (infer-bench --table4) vs
      torch.nn.functional.conv_transpose2d on the same shapes;
  (b) each zoo model at batch 1: infer's default plan (passes + kernel heuristic; infer-bench model) vs
      PyTorch eager on the SAME weights (dumped by `infer-bench weights`) and the same input, with the
      relative error of PyTorch's output against infer's as a sanity check;
  (c) conv3x3 + avgpool2 at 32x32, C in {32,128,512}: infer's conv_pool2d variants (infer-bench op
      conv_pool2d) vs torch conv2d + avg_pool2d.
infer's numbers come from infer-bench --json (steady_clock around Session::run). Writes
<out>/cpu-<date>.md (tables), <out>/cpu-<date>.json (everything) and <out>/cpu-<date>.png (plot).
--replot JSON redraws only the plot of an earlier results JSON (e.g. after installing matplotlib).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ZOO = ["lenet5", "alexnet", "vgg11", "vgg16", "dcgan", "ebgan"]
CONV_POOL_CHANNELS = [32, 128, 512]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, env):
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)


def infer_bench_json(bench, args, env, tmp, name):
    path = os.path.join(tmp, name + ".json")
    run([bench] + args + ["--json", path], env)
    with open(path) as f:
        return json.load(f)


def time_torch(fn, runs, warmup):
    """Median / min / max wall time in ms of fn() (under no_grad), after warm-up calls."""
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "runs": runs}


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


# ---- the zoo's architectures in PyTorch (docs/design.md, "The models"; names match the .fb tensors) ----

class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = torch.tanh(F.avg_pool2d(self.conv1(x), 2))  # pooling before the activation
        x = torch.tanh(F.avg_pool2d(self.conv2(x), 2))
        x = torch.flatten(x, 1)
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


class AlexNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 11, 4, 2)
        self.conv2 = nn.Conv2d(64, 192, 5, padding=2)
        self.conv3 = nn.Conv2d(192, 384, 3, padding=1)
        self.conv4 = nn.Conv2d(384, 256, 3, padding=1)
        self.conv5 = nn.Conv2d(256, 256, 3, padding=1)
        self.fc1, self.fc2, self.fc3 = nn.Linear(9216, 4096), nn.Linear(4096, 4096), nn.Linear(4096, 1000)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 3, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 3, 2)
        x = F.relu(self.conv3(x))
        x = F.relu(self.conv4(x))
        x = F.max_pool2d(F.relu(self.conv5(x)), 3, 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class VGG(nn.Module):
    CFG = {"vgg11": [64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0],
           "vgg16": [64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0]}

    def __init__(self, name):
        super().__init__()
        self.plan = []  # conv names and "pool"
        c_in, block, index = 3, 1, 1
        for c in self.CFG[name]:
            if c == 0:
                self.plan.append("pool")
                block, index = block + 1, 1
            else:
                conv_name = "conv%d_%d" % (block, index)
                setattr(self, conv_name, nn.Conv2d(c_in, c, 3, padding=1))
                self.plan.append(conv_name)
                c_in, index = c, index + 1
        self.fc1, self.fc2, self.fc3 = nn.Linear(25088, 4096), nn.Linear(4096, 4096), nn.Linear(4096, 1000)

    def forward(self, x):
        for step in self.plan:
            x = F.max_pool2d(x, 2) if step == "pool" else F.relu(getattr(self, step)(x))
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Generator(nn.Module):
    """DCGAN / EB-GAN generator: tconv k4 s1 p0 to 4x4, then k4 s2 p1 tconvs, each + BN + relu."""

    def __init__(self, widths, head):
        super().__init__()
        self.n = len(widths)
        c_in = 100
        for i, c in enumerate(widths, 1):
            first = i == 1
            setattr(self, "tconv%d" % i, nn.ConvTranspose2d(c_in, c, 4, 1 if first else 2, 0 if first else 1, bias=False))
            setattr(self, "bn%d" % i, nn.BatchNorm2d(c, eps=1e-5))
            c_in = c
        self.head_name, self.head = head, None
        if head == "tconv5":  # DCGAN
            self.tconv5 = nn.ConvTranspose2d(c_in, 3, 4, 2, 1, bias=True)
        else:  # EB-GAN: conv8 3x3 p1
            self.conv8 = nn.Conv2d(c_in, 3, 3, padding=1)

    def forward(self, z):
        x = z
        for i in range(1, self.n + 1):
            x = F.relu(getattr(self, "bn%d" % i)(getattr(self, "tconv%d" % i)(x)))
        return torch.tanh(getattr(self, self.head_name)(x))


def torch_model(name):
    if name == "lenet5":
        return LeNet5()
    if name == "alexnet":
        return AlexNet()
    if name in ("vgg11", "vgg16"):
        return VGG(name)
    if name == "dcgan":
        return Generator([1024, 512, 256, 128], "tconv5")
    if name == "ebgan":
        return Generator([2048, 1024, 512, 256, 128, 64, 64], "conv8")
    raise ValueError(name)


def load_infer_weights(model, folder):
    """Copies every <name>.npy written by `infer-bench weights` into the module (zoo BN names:
    .scale/.mean/.var are PyTorch's .weight/.running_mean/.running_var); every parameter must be set."""
    rename = {".scale": ".weight", ".mean": ".running_mean", ".var": ".running_var"}
    state = model.state_dict()
    loaded = set()
    for file in os.listdir(folder):
        key = file[:-4]
        for zoo_suffix, torch_suffix in rename.items():
            if key.endswith(zoo_suffix):
                key = key[: -len(zoo_suffix)] + torch_suffix
        if key not in state:
            raise KeyError("infer constant %s has no PyTorch counterpart" % file)
        value = torch.from_numpy(np.load(os.path.join(folder, file)))
        if tuple(value.shape) != tuple(state[key].shape):
            raise ValueError("%s: shape %s vs %s" % (key, tuple(value.shape), tuple(state[key].shape)))
        state[key] = value
        loaded.add(key)
    missing = [k for k in state if k not in loaded and not k.endswith("num_batches_tracked")]
    if missing:
        raise KeyError("PyTorch parameters without infer constants: %s" % missing)
    model.load_state_dict(state)
    return model.eval()


# ---- the three parts ----

def part_table4(bench, env, tmp, a):
    """One Table-4 row (model) at a time, infer then PyTorch, so both see the same machine state."""
    log("== (a) Table-4 transposed-conv layers")
    rows, runs = [], []
    for model in ["DCGAN", "ArtGAN", "GP-GAN", "EB-GAN"]:
        j = infer_bench_json(bench, ["--table4", "--model", model, "--runs", str(a.runs), "--warmup",
                                     str(a.warmup), "--threads", str(a.threads)], env, tmp, "table4_" + model)
        runs.append(j)
        for layer in j["layers"]:
            n, c_in, c_out = layer["n"], layer["c_in"], layer["c_out"]
            x = torch.from_numpy(np.random.default_rng(1).uniform(-1, 1, (1, c_in, n, n)).astype(np.float32))
            w = torch.from_numpy(np.random.default_rng(2).uniform(-1, 1, (c_in, c_out, 4, 4)).astype(np.float32))
            t = time_torch(lambda: F.conv_transpose2d(x, w, stride=2, padding=1), a.runs, a.warmup)
            infer = {r["label"]: r["time"]["median_ms"] for r in layer["results"] if r["ran"]}
            rows.append({"model": layer["model"], "n": n, "c_in": c_in, "c_out": c_out, "torch": t,
                         "infer": infer, "upsampled_bytes": layer["upsampled_bytes"]})
    # Variants that ran on at least one layer, in infer-bench's order (conventional first).
    variants = [v for v in runs[0]["variants"] if any(v in r["infer"] for r in rows)]
    skipped = [v for v in runs[0]["variants"] if v not in variants]
    return {"infer_bench": runs, "variants": variants, "not_applicable": skipped, "rows": rows}


def part_models(bench, zoo, env, tmp, a):
    log("== (b) zoo models at batch 1")
    rows = []
    for name in a.models:
        fb = os.path.join(tmp, name + ".fb")
        run([zoo, name, "--out", fb], env)
        wdir, ddir = os.path.join(tmp, name + "_weights"), os.path.join(tmp, name + "_io")
        run([bench, "weights", fb, "--out", wdir], env)
        j = infer_bench_json(bench, ["model", fb, "--batch", "1", "--runs", str(a.runs), "--warmup",
                                     str(a.warmup), "--threads", str(a.threads), "--dump", ddir]
                             + ([] if a.variants else ["--no-variants"]), env, tmp, "model_" + name)
        net = load_infer_weights(torch_model(name), wdir)
        x = torch.from_numpy(np.load(os.path.join(ddir, "input_0.npy")))
        with torch.no_grad():
            y = net(x).numpy()
        err = rel_err(y, np.load(os.path.join(ddir, "output_0.npy")))
        t = time_torch(lambda: net(x), a.runs, a.warmup)
        default = j["results"][0]
        rows.append({"model": name, "torch": t, "infer": default["time"], "rel_err": err,
                     "infer_bench": j})
        log("   %s: infer %.3f ms, torch %.3f ms, rel err %.2e" % (name, default["time"]["median_ms"],
                                                                  t["median_ms"], err))
    return rows


def part_conv_pool(bench, env, tmp, a):
    log("== (c) conv3x3 + avgpool2 at 32x32")
    rows = []
    for c in CONV_POOL_CHANNELS:
        j = infer_bench_json(bench, ["op", "conv_pool2d", "--input", "1x%dx32x32" % c, "--out-channels", str(c),
                                     "--kernel", "3", "--padding", "1", "--pool", "2", "--baseline", "unfused",
                                     "--runs", str(a.runs), "--warmup", str(a.warmup), "--threads",
                                     str(a.threads)], env, tmp, "conv_pool_%d" % c)
        rng = np.random.default_rng(3)
        x = torch.from_numpy(rng.uniform(-1, 1, (1, c, 32, 32)).astype(np.float32))
        w = torch.from_numpy(rng.uniform(-1, 1, (c, c, 3, 3)).astype(np.float32))
        b = torch.from_numpy(rng.uniform(-1, 1, (c,)).astype(np.float32))
        t = time_torch(lambda: F.avg_pool2d(F.conv2d(x, w, b, padding=1), 2), a.runs, a.warmup)
        infer = {r["label"]: r["time"]["median_ms"] for r in j["results"] if r["ran"]}
        rows.append({"c": c, "torch": t, "infer": infer, "infer_bench": j})
    return rows


# ---- report ----

def fmt_ms(v):
    return "%.3f" % v if v is not None else "n/a"


def ratio(num, den):
    return "%.2fx" % (num / den) if num and den else "n/a"


def markdown(results, machine, a):
    out = []
    out.append("# infer vs PyTorch on the CPU, %s\n" % results["date"])
    out.append("- machine: %s, %d logical CPUs; threads: infer %d, PyTorch %d" % (
        machine["cpu"], machine["cpus"], a.threads, torch.get_num_threads()))
    out.append("- PyTorch %s (eager, no_grad), NumPy %s, Python %s" % (torch.__version__, np.__version__,
                                                                    platform.python_version()))
    out.append("- load average before: %s; after: %s" % (machine["load_before"], machine["load_after"]))
    out.append("- timing: median of %d runs after %d warm-up runs; infer: steady_clock around Session::run; "
               "PyTorch: perf_counter around the call" % (a.runs, a.warmup))
    out.append("- command: `%s`\n" % results["command"])

    if "table4" in results:
        rows = results["table4"]["rows"]
        variants = results["table4"]["variants"]
        out.append("## (a) Table-4 transposed-conv layers (k4 s2 p1, batch 1), median ms\n")
        if results["table4"]["not_applicable"]:
            out.append("Not applicable to these layers (not shown): %s.\n" % ", ".join(results["table4"]["not_applicable"]))
        head = "| model | input | output | " + " | ".join(variants) + " | PyTorch | " + \
               " | ".join("%s vs conventional" % v for v in variants if v != "conventional") + \
               " | " + " | ".join("%s / PyTorch" % v for v in variants) + " | upsampled B |"
        out.append(head)
        out.append("|" + "---|" * (head.count("|") - 1))
        totals = {}
        for r in rows:
            t = r["torch"]["median_ms"]
            tot = totals.setdefault(r["model"], {"torch": 0.0, "upsampled": 0, **{v: 0.0 for v in variants}})
            tot["torch"] += t
            tot["upsampled"] += r["upsampled_bytes"]
            for v in variants:
                if v in r["infer"] and tot[v] is not None:
                    tot[v] += r["infer"][v]
                else:
                    tot[v] = None
            conv = r["infer"].get("conventional")
            out.append("| %s | %dx%dx%d | %dx%dx%d | %s | %s | %s | %s | %d |" % (
                r["model"], r["n"], r["n"], r["c_in"], 2 * r["n"], 2 * r["n"], r["c_out"],
                " | ".join(fmt_ms(r["infer"].get(v)) for v in variants), fmt_ms(t),
                " | ".join(ratio(conv, r["infer"].get(v)) for v in variants if v != "conventional"),
                " | ".join(ratio(r["infer"].get(v), t) for v in variants), r["upsampled_bytes"]))
        for m, tot in totals.items():
            out.append("| **%s total** | | | %s | %s | %s | %s | %d |" % (
                m, " | ".join(fmt_ms(tot[v]) for v in variants), fmt_ms(tot["torch"]),
                " | ".join(ratio(tot.get("conventional"), tot[v]) for v in variants if v != "conventional"),
                " | ".join(ratio(tot[v], tot["torch"]) for v in variants), tot["upsampled"]))
        out.append("\nRatios `A vs conventional` are conventional time / A time (speedup, goal >= 4.6x in "
                   "total for DCGAN and EB-GAN); `A / PyTorch` is A time / PyTorch time (goal <= 1.0x).\n")

    if "models" in results:
        out.append("## (b) zoo models at batch 1, same weights and input, median ms\n")
        out.append("| model | infer (default plan) | PyTorch | infer / PyTorch | rel err vs PyTorch | infer kernels |")
        out.append("|---|---|---|---|---|---|")
        for r in results["models"]:
            kernels = sorted({"%s=%s" % (n["op"], n["variant"]) for n in r["infer_bench"]["nodes"]})
            out.append("| %s | %s | %s | %s | %.1e | %s |" % (
                r["model"], fmt_ms(r["infer"]["median_ms"]), fmt_ms(r["torch"]["median_ms"]),
                ratio(r["infer"]["median_ms"], r["torch"]["median_ms"]), r["rel_err"], ", ".join(kernels)))
        if a.variants:
            out.append("\nOther variants forced per op (infer-bench model), median ms and speedup vs the default plan:\n")
            for r in results["models"]:
                alts = [x for x in r["infer_bench"]["results"][1:]]
                if not alts:
                    continue
                out.append("- %s: " % r["model"] + "; ".join(
                    "%s %s (%.2fx)" % (x["label"], fmt_ms(x["time"]["median_ms"]), x["speedup"]) if x["ran"]
                    else "%s n/a" % x["label"] for x in alts))
        out.append("\nGoal: infer / PyTorch <= 1.0x for every model.\n")

    if "conv_pool" in results:
        rows = results["conv_pool"]
        variants = sorted({v for r in rows for v in r["infer"]})
        out.append("## (c) conv3x3 p1 + avgpool2 at 32x32, batch 1, C_in = C_out = C, median ms\n")
        out.append("| C | " + " | ".join(variants) + " | PyTorch conv2d+avg_pool2d | " +
                   " | ".join("%s vs unfused" % v for v in variants if v != "unfused") + " | " +
                   " | ".join("%s / PyTorch" % v for v in variants) + " |")
        out.append("|" + "---|" * (2 + 2 * len(variants) + (len(variants) - (1 if "unfused" in variants else 0))))
        for r in rows:
            t = r["torch"]["median_ms"]
            out.append("| %d | %s | %s | %s | %s |" % (
                r["c"], " | ".join(fmt_ms(r["infer"].get(v)) for v in variants), fmt_ms(t),
                " | ".join(ratio(r["infer"].get("unfused"), r["infer"].get(v)) for v in variants if v != "unfused"),
                " | ".join(ratio(r["infer"].get(v), t) for v in variants)))
        out.append("\nGoal: direct_sum >= 2x over unfused.\n")
    return "\n".join(out) + "\n"


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not installed (Debian: python3-matplotlib): no plot")
        return False
    panels = [k for k in ("table4", "models", "conv_pool") if k in results]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, key in zip(axes[0], panels):
        if key == "table4":
            rows = results["table4"]["rows"]
            labels = ["%s %d" % (r["model"], r["n"]) for r in rows]
            series = {v: [r["infer"].get(v, np.nan) for r in rows] for v in results["table4"]["variants"]}
            series["PyTorch"] = [r["torch"]["median_ms"] for r in rows]
            title = "(a) Table-4 tconv layers"
        elif key == "models":
            rows = results["models"]
            labels = [r["model"] for r in rows]
            series = {"infer": [r["infer"]["median_ms"] for r in rows], "PyTorch": [r["torch"]["median_ms"] for r in rows]}
            title = "(b) zoo models, batch 1"
        else:
            rows = results["conv_pool"]
            labels = ["C=%d" % r["c"] for r in rows]
            variants = sorted({v for r in rows for v in r["infer"]})
            series = {v: [r["infer"].get(v, np.nan) for r in rows] for v in variants}
            series["PyTorch"] = [r["torch"]["median_ms"] for r in rows]
            title = "(c) conv3x3 + avgpool2, 32x32"
        x = np.arange(len(labels))
        width = 0.8 / len(series)
        for i, (name, values) in enumerate(series.items()):
            ax.bar(x + i * width - 0.4 + width / 2, values, width, label=name)
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("median ms (log)")
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build folder holding infer-bench and model-zoo")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    p.add_argument("--parts", default="table4,models,conv_pool", help="comma-separated subset")
    p.add_argument("--models", default=",".join(ZOO), help="zoo models for part (b)")
    p.add_argument("--variants", action="store_true", help="(b): also force every other variant per op")
    p.add_argument("--tag", default="", help="suffix of the result file names")
    p.add_argument("--replot", metavar="JSON", help="only redraw the plot of a results JSON written by this "
                   "script (next to it, .png instead of .json); runs nothing")
    a = p.parse_args()
    if a.replot:
        with open(a.replot) as f:
            results = json.load(f)
        png = os.path.splitext(a.replot)[0] + ".png"
        if not plot(results, png):
            sys.exit("error: no plot written (matplotlib missing)")
        log("wrote %s" % png)
        return
    a.models = [m for m in a.models.split(",") if m]
    parts = set(a.parts.split(","))

    torch.set_num_threads(a.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads))
    bench = os.path.join(a.build, "infer-bench")
    zoo = os.path.join(a.build, "model-zoo")
    for exe in (bench, zoo):
        if not os.access(exe, os.X_OK):
            sys.exit("error: %s not found; build it first (cmake --build %s)" % (exe, a.build))

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    machine = {"cpu": cpu, "cpus": os.cpu_count(), "load_before": open("/proc/loadavg").read().strip()}
    now = datetime.datetime.now(datetime.timezone.utc)
    results = {"date": now.strftime("%Y-%m-%d %H:%M UTC"),
               "command": "/usr/bin/python3 " + " ".join(sys.argv), "torch": torch.__version__}
    with tempfile.TemporaryDirectory(prefix="infer-bench-") as tmp:
        if "table4" in parts:
            results["table4"] = part_table4(bench, env, tmp, a)
        if "models" in parts:
            results["models"] = part_models(bench, zoo, env, tmp, a)
        if "conv_pool" in parts:
            results["conv_pool"] = part_conv_pool(bench, env, tmp, a)
    machine["load_after"] = open("/proc/loadavg").read().strip()
    results["machine"] = machine

    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, "cpu-" + now.strftime("%Y-%m-%d") + (("-" + a.tag) if a.tag else ""))
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1)
    text = markdown(results, machine, a)
    if plot(results, stem + ".png"):
        text += "\n![infer vs PyTorch](%s)\n" % os.path.basename(stem + ".png")
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)
    log("wrote %s.{md,json,png}" % stem)


if __name__ == "__main__":
    main()
