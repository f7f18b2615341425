#!/usr/bin/env python3
"""A/B of one kernel variant inside a whole model: the default plan against the same plan with every
node that runs variant NEW of OP forced to OLD (infer-bench model --kernel OP:NAME=OLD per node), in
interleaved rounds of `infer-bench model --default-only` (CUDA-graph replays on cuda); prints the median
ms of each round. With --profile also `infer --profile` of both plans (nodes launched one by one) and the
changed nodes side by side. Example (the .fb from bench/byom_vs_peers.py --keep DIR):

    python3 bench/variant_ab.py --build build --model DIR/mobilenet_v2.fb --precision fp16 --batch 64 \\
        --op conv2d --new mma_1x1_nhwc --old gemm_1x1_nhwc [--profile]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run_json(args, what, timeout):
    """Runs `args` + [json path] (the tool writes its JSON there) and returns the parsed JSON."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        r = subprocess.run(args + [path], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            sys.exit("%s failed: %s" % (what, r.stderr.strip()[-500:]))
        with open(path) as f:
            return json.load(f)
    finally:
        os.remove(path)


def forced(kernels):
    """The --kernel arguments of `kernels` (OP[:NODE]=VAR strings)."""
    return [x for k in kernels for x in ("--kernel", k)]


def bench_model(a, kernels):
    """(median ms, infer-bench's JSON) of one default-only session with `kernels` forced."""
    args = [os.path.join(a.build, "infer-bench"), "--backend", a.backend, "--precision", a.precision, "--batch",
            str(a.batch), "--runs", str(a.runs), "--warmup", str(a.warmup), "model", a.model, "--default-only"]
    d = run_json(args + forced(kernels) + ["--json"], "infer-bench", a.timeout)
    return d["results"][0]["time"]["median_ms"], d


def profile(a, kernels):
    """{node name: node} from `infer --profile-json` of the plan with `kernels` forced."""
    args = [os.path.join(a.build, "infer"), "--model", a.model, "--backend", a.backend, "--precision", a.precision,
            "--batch", str(a.batch), "--profile", "--runs", "20"]
    return {n["name"]: n for n in run_json(args + forced(kernels) + ["--profile-json"], "infer --profile",
                                            a.timeout)["nodes"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="folder holding infer-bench and infer")
    p.add_argument("--model", required=True, help=".fb file")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--precision", default="fp16")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--op", required=True)
    p.add_argument("--new", required=True, help="the variant under test (as the default plan picks it)")
    p.add_argument("--old", required=True, help="the variant its nodes are forced to in the other plan")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--timeout", type=int, default=180)
    p.add_argument("--profile", action="store_true", help="also the per-node profile of both plans")
    a = p.parse_args()

    _, d = bench_model(a, [])
    names = [n["name"] for n in d["nodes"] if n["op"] == a.op and n["variant"] == a.new]
    if not names:
        sys.exit("no %s node runs %s in the default plan" % (a.op, a.new))
    to_old = ["%s:%s=%s" % (a.op, n, a.old) for n in names]
    new, old = [], []
    for _ in range(a.rounds):
        new.append(bench_model(a, [])[0])
        old.append(bench_model(a, to_old)[0])
    fmt = lambda v: ", ".join("%.4f" % x for x in v)
    print("%s %s batch %d: %d %s nodes on %s; default plan %s ms, those forced to %s %s ms" % (
        os.path.basename(a.model), a.precision, a.batch, len(names), a.op, a.new, fmt(new), a.old, fmt(old)))
    if a.profile:
        pn, po = profile(a, []), profile(a, to_old)
        tn = to = 0.0
        for n in names:
            x, y = pn[n], po[n]
            tn, to = tn + x["time_ms"], to + y["time_ms"]
            print("  %-48s %-16s %-6s %s %.4f  %s %.4f  %.2fx" % (
                n[-48:], "x".join(map(str, x["output_shape"])), x.get("activation", ""), a.new, x["time_ms"],
                a.old, y["time_ms"], y["time_ms"] / x["time_ms"]))
        print("  sum %s %.4f  %s %.4f" % (a.new, tn, a.old, to))


if __name__ == "__main__":
    main()
