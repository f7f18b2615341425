#!/usr/bin/env python3
# What the Python binding adds per call: session.run(x) timed from Python against the C++
# Session::run on the same session and input, timed in C++ (steady_clock, Session._cpp_run_times).
# Rounds alternate the two so drift on a busy machine hits both; medians over every call. Batch 1,
# LeNet-5 (the shipped one) and DCGAN (zoo, seed 1). On cuda, also CUDA tensors in and out
# (device_outputs=True) when PyTorch has CUDA. Usage:
#   PYTHONPATH=build/python python3 bench/python_overhead.py --backend cpu [--runs 2000]
import argparse
import platform
import statistics
import time

import numpy as np

import infer


def python_times(call, runs):
    out = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        call()
        out.append((time.perf_counter_ns() - t0) * 1e-9)
    return out


def measure(session, x, runs, rounds):
    cpp, py = [], []
    session.run(x)  # warm-up
    for _ in range(rounds):
        cpp += session._cpp_run_times(runs, x)
        py += python_times(lambda: session.run(x), runs)
    return statistics.median(cpp) * 1e6, statistics.median(py) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--runs", type=int, default=400, help="calls per round and side")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    models = {"lenet5": infer.load("models/lenet5_fashion.fb"), "dcgan": infer.zoo.build("dcgan", seed=1)}
    print(f"python_overhead: backend {args.backend}, {platform.processor() or platform.machine()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.rounds} rounds x {args.runs} calls")
    print("| model | input | C++ Session::run (us) | Python session.run (us) | added (us) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, model in models.items():
        session = infer.Session(model, backend=args.backend, batch=1)
        x = session.random_inputs(1)[0]
        cpp, py = measure(session, x, args.runs, args.rounds)
        print(f"| {name} | NumPy | {cpp:.1f} | {py:.1f} | {py - cpp:.1f} |")
        if session.backend == "cuda":
            try:
                import torch
            except ImportError:
                continue
            if torch.cuda.is_available():
                xd = torch.from_numpy(x).cuda()
                session.run(xd, device_outputs=True)
                dev = []
                for _ in range(args.rounds):
                    dev += python_times(lambda: session.run(xd, device_outputs=True), args.runs)
                print(f"| {name} | torch CUDA, device_outputs | {cpp:.1f} (host I/O) | "
                      f"{statistics.median(dev) * 1e6:.1f} | - |")


if __name__ == "__main__":
    main()
