#!/usr/bin/env python3
"""Writes the "Current results" tables at the top of docs/benchmarks.md from the benchmark scripts' JSON.

Each backend's table lives between `<!-- current:NAME:begin -->` and `<!-- current:NAME:end -->`
(NAME: cpu, gpu); this script replaces only what is between the markers, so the hand-written notes
around them stay. Standard library only: byom_vs_peers.py and gpu_vs_pytorch.py call it with
--update-docs, and it runs by hand on any saved result:

    python3 bench/current_tables.py --cpu bench/results/byom-cpu-DATE-TAG.json \
        --gpu bench/results/gpu-DATE-TAG.json [--doc docs/benchmarks.md]

--check (a ctest) re-renders each block from the results file it names and fails if the doc differs.
"""

import argparse
import json
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DOC = os.path.join(REPO, "docs", "benchmarks.md")

MODEL_NAMES = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2",
               "mobilenet_v3_small": "MobileNetV3-Small", "efficientnet_b0": "EfficientNet-B0",
               "shufflenet_v2_x1_0": "ShuffleNetV2 x1.0", "squeezenet1_1": "SqueezeNet 1.1",
               "dcgan": "DCGAN generator", "ebgan": "EB-GAN generator",
               "cyclegan_resnet": "CycleGAN resnet_9blocks", "pix2pix_unet": "pix2pix unet_256",
               "lenet5": "LeNet-5", "alexnet": "AlexNet", "vgg11": "VGG-11", "vgg16": "VGG-16"}
GOAL_PEERS = {"onnxruntime": "ORT", "onnxruntime_nospin": "ORT (no spin)", "openvino": "OV"}
TORCH_CONFIGS = {"eager": "eager", "graph": "graph", "channels_last_graph": "channels_last + graph",
                 "compile_max_autotune": "max-autotune", "compile_reduce_overhead": "reduce-overhead"}


def wrap(text, width):
    return textwrap.wrap(text, width, break_on_hyphens=False)


def fmt(ms):
    return "-" if ms is None else ("%.3f" % ms if ms < 1 else "%.2f" % ms if ms < 100 else "%.1f" % ms)


def median(entry):
    return entry.get("median_ms") if isinstance(entry, dict) else None


def rel_command(cmd):
    """The command as it would be typed in the repository root: an absolute path into a checkout (any
    checkout: the run may have been made in another one) made relative to it, so the table does not
    depend on where the repository lies."""
    out = []
    for token in cmd.split(" "):
        m = re.match(r"/\S*?/((?:bench/|\.venv-bench/|models/|scripts/|build[^/]*(?:/|$))\S*)$", token)
        out.append(m.group(1) if m else token.replace(REPO + "/", ""))
    return " ".join(out)


def cpu_table(res, source):
    rows = res["rows"]
    combos = []  # (isa, batch, threads) in the order the run made them
    for r in rows:
        key = (r["isa"], r["batch"], r["threads"])
        if key not in combos:
            combos.append(key)
    env = res.get("environment", {})
    versions = res.get("peer_isa", {}).get("versions", {})
    out = wrap("%s, %s CPUs (%s), %s; ONNX Runtime %s, OpenVINO %s. ms, median of %s runs; ratio = the faster "
           "of ONNX Runtime and OpenVINO over infer (above 1.0x infer is faster). Source: `%s`; command:"
           % (env.get("cpu", "?"), env.get("cpus", "?"), ", ".join(env.get("levels_supported", []) or []),
              res.get("date", "?"), versions.get("onnxruntime", "?"), versions.get("openvino", "?").split("-")[0],
              res.get("runs", "?"), source), 100) + ["",
           "```sh", rel_command(res.get("command", "?")), "```", ""]
    header = ["model"]
    for isa, batch, threads in combos:
        tag = "%s b%d t%d" % (isa, batch, threads)
        header += ["infer %s" % tag, "faster peer", "ratio"]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    models = []
    for r in rows:
        if r["model"] not in models:
            models.append(r["model"])
    for m in models:
        cells = [MODEL_NAMES.get(m, m)]
        for combo in combos:
            r = next((x for x in rows if (x["model"], x["isa"], x["batch"], x["threads"]) == (m,) + combo), None)
            infer_ms = median(r.get("infer")) if r else None
            peers = [(median(r["peers"].get(p)), GOAL_PEERS[p]) for p in GOAL_PEERS
                     if r and median(r.get("peers", {}).get(p)) is not None] if r else []
            best = min(peers) if peers else None
            ratio = "%.2fx" % (best[0] / infer_ms) if best and infer_ms else "-"
            cells += [fmt(infer_ms), "%s (%s)" % (fmt(best[0]), best[1]) if best else "-", ratio]
        out.append("| " + " | ".join(cells) + " |")
    capped = res.get("peer_isa", {}).get("pytorch", {})
    if any(isa != "avx512" for isa, _, _ in combos) and capped:
        out += [""] + wrap("Below AVX-512, OpenVINO is capped to the level (`ONEDNN_MAX_CPU_ISA`, "
                                    "`OV_CPU_MAX_ISA`); ONNX Runtime's MLAS cannot be, so a ratio against ORT "
                                    "there is a lower bound.", 100)
    goals = res.get("goals", [])
    if goals:
        out += ["", "Goals of the run:", ""] + ["- %s: **%s**" % (g["goal"], g["status"]) for g in goals]
    return "\n".join(out)


def gpu_table(res, source):
    env = res.get("environment", {})
    out = wrap("%s, %s; PyTorch %s. ms, median; PyTorch best = the fastest of eager, CUDA graph, channels_last + "
           "graph and torch.compile (max-autotune, reduce-overhead). Source: `%s`; command:"
           % (env.get("device", "?"), res.get("date", "?"), env.get("torch", "?"), source), 100) + ["",
           "```sh", rel_command(res.get("command", "?")), "```", "",
           "| model | precision | batch | infer | PyTorch best (config) | infer vs best |", "|---|---|---|---|---|---|"]
    for r in res.get("models", []):
        infer_ms = median(r.get("infer"))
        torch_runs = [(median(v), TORCH_CONFIGS.get(k, k)) for k, v in (r.get("torch") or {}).items()
                      if median(v) is not None]
        best = min(torch_runs) if torch_runs else None
        ratio = "%.2fx" % (best[0] / infer_ms) if best and infer_ms else "-"
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            MODEL_NAMES.get(r["model"], r["model"]), r.get("precision", "?"), r.get("batch", "?"), fmt(infer_ms),
            "%s (%s)" % (fmt(best[0]), best[1]) if best else "-", ratio))
    return "\n".join(out)


def replace_block(text, name, body):
    begin, end = "<!-- current:%s:begin -->" % name, "<!-- current:%s:end -->" % name
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit("error: %s has no %s ... %s block" % (DOC, begin, end))
    return pattern.sub(lambda _: begin + "\n" + body + "\n" + end, text)


def render(kind, json_path):
    with open(json_path) as f:
        res = json.load(f)
    source = os.path.relpath(os.path.abspath(json_path), REPO)
    return cpu_table(res, source) if kind == "cpu" else gpu_table(res, source)


def check(doc):
    """0 when every current block of doc is what its cited results file renders to."""
    with open(doc) as f:
        text = f.read()
    blocks = re.findall(r"<!-- current:(\w+):begin -->\n(.*?)\n<!-- current:\1:end -->", text, re.S)
    if not blocks:
        print("error: %s has no current:NAME blocks" % doc)
        return 1
    bad = 0
    for kind, body in blocks:
        m = re.search(r"Source:\s+`([^`]+)`", body)  # the wrap may break the line after "Source:"
        if not m or not os.path.isfile(os.path.join(REPO, m.group(1))):
            print("error: %s: the current:%s block names no results file that exists" % (doc, kind))
            bad += 1
            continue
        if render(kind, os.path.join(REPO, m.group(1))) != body:
            print("error: %s: the current:%s block differs from what %s gives (rerun this script)"
                  % (doc, kind, m.group(1)))
            bad += 1
        else:
            print("ok: current:%s block == %s" % (kind, m.group(1)))
    return 1 if bad else 0


def update(doc, kind, json_path):
    """Replaces the `kind` (cpu | gpu) table of `doc` with one made from the results file json_path."""
    body = render(kind, json_path)
    with open(doc) as f:
        text = f.read()
    text = replace_block(text, kind, body)
    tmp = doc + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, doc)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpu", metavar="JSON", help="a byom_vs_peers.py --device cpu result")
    p.add_argument("--gpu", metavar="JSON", help="a gpu_vs_pytorch.py result with the models part")
    p.add_argument("--doc", default=DOC)
    p.add_argument("--check", action="store_true", help="compare the doc's blocks with their results files")
    a = p.parse_args()
    if a.check:
        sys.exit(check(a.doc))
    if not a.cpu and not a.gpu:
        p.error("give --cpu and/or --gpu")
    for kind, path in (("cpu", a.cpu), ("gpu", a.gpu)):
        if path:
            if not os.path.isfile(path):
                sys.exit("error: %s: no such results file" % path)
            update(a.doc, kind, path)
            print("%s: %s table from %s" % (a.doc, kind, path))


if __name__ == "__main__":
    main()
