#!/usr/bin/env python3
# What the Python binding adds per call, two ways, batch 1, LeNet-5 (the shipped one) and DCGAN (zoo,
# seed 1): (1) paired: each session.run(x) timed from Python minus the engine call inside that same
# call (the binding times Session::run around it: Session._last_engine_seconds), so the model's own
# run-to-run noise cancels; (2) unpaired: medians of session.run from Python and of Session::run
# timed in C++ (Session._cpp_run_times), alternating rounds so drift on a busy machine hits both.
# "caches flushed": LeNet-5 with 64 MiB touched before each call, the state a large model's run leaves
# the caches in (the binding's code and the interpreter's data then miss). On cuda, also CUDA tensors
# in and out (device_outputs=True) when PyTorch has CUDA. Usage:
#   PYTHONPATH=build/python python3 bench/python_overhead.py --backend cpu [--runs 400 --rounds 5]
import argparse
import os
import platform
import statistics
import time

import infer


def timed_calls(session, call, runs, flush=None):
    """Per call: (Python wall seconds, the engine's seconds inside that call)."""
    out = []
    for _ in range(runs):
        if flush is not None:
            flush += 1.0  # touch 64 MiB, outside the timing: every cache level starts cold
        t0 = time.perf_counter_ns()
        call()
        out.append(((time.perf_counter_ns() - t0) * 1e-9, session._last_engine_seconds))
    return out


def report(name, kind, session, call, x, runs, rounds, with_cpp=True, flush=None):
    call()  # warm-up
    cpp, pairs = [], []
    for _ in range(rounds):
        if with_cpp:
            cpp += session._cpp_run_times(runs, x)
        pairs += timed_calls(session, call, runs, flush)
    us = 1e6
    added = statistics.median(p - e for p, e in pairs) * us
    py = statistics.median(p for p, _ in pairs) * us
    cpp_text = f"{statistics.median(cpp) * us:.1f}" if cpp else "-"
    unpaired = f"{py - statistics.median(cpp) * us:.1f}" if cpp else "-"
    print(f"| {name} | {kind} | {cpp_text} | {py:.1f} | {added:.2f} | {unpaired} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--runs", type=int, default=400, help="calls per round and side")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    here = os.path.dirname(os.path.abspath(__file__))
    models = {"lenet5": infer.load(os.path.join(here, "..", "models", "lenet5_fashion.fb")),
              "dcgan": infer.zoo.build("dcgan", seed=1)}
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"]
    print(f"python_overhead: backend {args.backend}, {platform.machine()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {' '.join(load)}, "
          f"{args.rounds} rounds x {args.runs} calls, medians")
    print("| model | input | C++ Session::run (us) | Python session.run (us) | added, paired (us) "
          "| added, unpaired (us) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, model in models.items():
        session = infer.Session(model, backend=args.backend, batch=1)
        x = session.random_inputs(1)[0]
        report(name, "NumPy float32", session, lambda: session.run(x), x, args.runs, args.rounds)
        if name == "lenet5":  # what a model with a large working set (DCGAN on cpu) does to the caches
            import numpy as np
            report(name, "NumPy float32, caches flushed before each call", session,
                   lambda: session.run(x), x, args.runs // 4, args.rounds, with_cpp=False,
                   flush=np.ones(8 << 20))
        if session.backend != "cuda":
            continue
        try:
            import torch
        except ImportError:
            continue
        if torch.cuda.is_available():
            xd = torch.from_numpy(x).cuda()
            report(name, "torch CUDA, device_outputs", session,
                   lambda: session.run(xd, device_outputs=True), x, args.runs, args.rounds, with_cpp=False)


if __name__ == "__main__":
    try:
        main()
    except infer.Error as e:
        raise SystemExit(f"error: {e}")
