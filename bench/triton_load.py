"""Load generator for a Triton server (issue 29 must 4): N concurrent streams, each its own process
with its own gRPC (or HTTP) client, sending requests of --batch rows back to back (closed loop, as
perf_analyzer's concurrency mode; PyPI has no perf_analyzer binary: its `perf-analyzer` 0.1.0 is a
placeholder). Per concurrency level: images/s, requests/s, p50/p90/p99 latency, failures. Inputs are
random float32 of the model's input shape, drawn once per stream (their values do not change the work).

    .venv-triton/bin/python bench/triton_load.py --model resnet50 --batch 8 --concurrency 1,4,16,64 \
        --seconds 20 [--url localhost:8001] [--protocol grpc] [--json out.json]
"""
import argparse
import json
import multiprocessing as mp
import sys
import time

import numpy as np


def stream(url, protocol, model, batch, seconds, warmup, seed, queue):
    if protocol == "grpc":
        import tritonclient.grpc as client
    else:
        import tritonclient.http as client
    c = client.InferenceServerClient(url)
    deadline = time.time() + 120  # the server may still be loading its models
    while True:
        try:
            meta = c.get_model_metadata(model)
            break
        except Exception as e:  # noqa: BLE001
            if time.time() > deadline:
                print(f"error: stream {seed}: {e}", file=sys.stderr)
                queue.put(([], 1))
                return
            time.sleep(1)
    if protocol == "grpc":
        meta = {"inputs": [{"name": t.name, "shape": list(t.shape)} for t in meta.inputs]}
    rng = np.random.default_rng(seed)
    inputs = []
    for t in meta["inputs"]:
        shape = [batch] + [int(d) for d in t["shape"][1:]]
        i = client.InferInput(t["name"], shape, "FP32")
        i.set_data_from_numpy(rng.standard_normal(shape).astype(np.float32))
        inputs.append(i)
    lat, failed = [], 0
    start = time.perf_counter()
    t_end = start + warmup + seconds
    while True:
        t0 = time.perf_counter()
        if t0 >= t_end:
            break
        try:
            c.infer(model, inputs)
            ok = True
        except Exception:  # noqa: BLE001 - counted
            ok = False
        t1 = time.perf_counter()
        if t0 >= start + warmup:
            if ok:
                lat.append(t1 - t0)
            else:
                failed += 1
    c.close()
    queue.put((lat, failed))


def level(a, n):
    q = mp.Queue()
    procs = [mp.Process(target=stream, args=(a.url, a.protocol, a.model, a.batch, a.seconds, a.warmup, k, q))
             for k in range(n)]
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    lat = np.array([x for r in results for x in r[0]]) * 1e3
    failed = sum(r[1] for r in results)
    req = len(lat) / a.seconds
    row = {"concurrency": n, "batch": a.batch, "requests_per_s": req, "images_per_s": req * a.batch,
           "failed": failed, "requests": int(len(lat))}
    for p in (50, 90, 99):
        row[f"p{p}_ms"] = float(np.percentile(lat, p)) if len(lat) else float("nan")
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--url", default=None, help="default localhost:8001 (grpc) or localhost:8000 (http)")
    p.add_argument("--protocol", default="grpc", choices=["grpc", "http"])
    p.add_argument("--batch", type=int, default=1, help="rows per request (default 1)")
    p.add_argument("--concurrency", default="1,2,4,8,16,32,64", help="streams per level, comma-separated")
    p.add_argument("--seconds", type=float, default=20, help="measured seconds per level (default 20)")
    p.add_argument("--warmup", type=float, default=3, help="unmeasured seconds first (default 3)")
    p.add_argument("--json", default=None, help="also write the rows as JSON")
    p.add_argument("--tag", default="", help="recorded with the rows (e.g. 'infer fp16 2xH100')")
    a = p.parse_args()
    a.url = a.url or ("localhost:8001" if a.protocol == "grpc" else "localhost:8000")
    try:
        levels = [int(x) for x in a.concurrency.split(",") if x.strip()]
    except ValueError:
        print(f"error: --concurrency takes comma-separated integers, got '{a.concurrency}'", file=sys.stderr)
        return 1
    if a.batch < 1 or not levels or min(levels) < 1 or a.seconds <= 0:
        print("error: --batch, --concurrency and --seconds must be positive", file=sys.stderr)
        return 1
    rows = []
    print(f"{a.tag} model {a.model} batch {a.batch} over {a.protocol} {a.url}")
    print("concurrency  images/s  requests/s   p50 ms   p90 ms   p99 ms  failed")
    for n in levels:
        r = level(a, n)
        r["model"], r["tag"] = a.model, a.tag
        rows.append(r)
        print(f"{n:11d} {r['images_per_s']:9.1f} {r['requests_per_s']:11.1f} {r['p50_ms']:8.2f} "
              f"{r['p90_ms']:8.2f} {r['p99_ms']:8.2f} {r['failed']:7d}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if any(r["failed"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
