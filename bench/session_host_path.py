"""Times infer.Session.run from NumPy arrays on a cuda session (what Triton's Python backend calls) per
batch, steady and with the batch changing every run: the whole call against the engine's part
(Session._last_engine_seconds), to see what the host path adds to a forward. Used for docs/serving.md.

    python3 bench/session_host_path.py MODELS_DIR [--models resnet50,ebgan,dcgan] [--precision fp16]

MODELS_DIR holds NAME.fb (bench/triton_models.py export writes them: .triton-gpu/models).
"""
import argparse
import time

import numpy as np

import infer


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models_dir")
    ap.add_argument("--models", default="resnet50,ebgan,dcgan")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    for name in a.models.split(","):
        s = infer.Session(infer.load(f"{a.models_dir}/{name}.fb"), backend="cuda", precision=a.precision, batch=64)
        dims = list(s.inputs[0].shape[1:])
        xs = {b: np.random.rand(b, *dims).astype(np.float32) for b in (1, 4, 16, 32, 64)}
        for b in (64, 32, 16, 4, 1):  # plan (and capture) every batch first
            s.run(xs[b])
        for b in (4, 16, 64):
            t = time.perf_counter()
            for _ in range(a.runs):
                s.run(xs[b])
            dt = (time.perf_counter() - t) / a.runs
            print(f"{name} steady b{b}: {dt * 1e3:.2f} ms/run (engine {s._last_engine_seconds * 1e3:.2f} ms) "
                  f"{b / dt:.0f} img/s", flush=True)
        seq = [4, 16, 64, 32, 1] * 6
        t = time.perf_counter()
        for b in seq:
            s.run(xs[b])
        print(f"{name} alternating {len(seq)} runs: {(time.perf_counter() - t) * 1e3 / len(seq):.2f} ms/run avg",
              flush=True)


if __name__ == "__main__":
    main()
