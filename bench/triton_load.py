"""Load generator for a Triton server (issue 29 must 4): N concurrent streams, each its own process
with its own gRPC (or HTTP) client, sending requests of --batch rows back to back (closed loop, as
perf_analyzer's concurrency mode; PyPI has no perf_analyzer binary: its `perf-analyzer` 0.1.0 is a
placeholder). Per concurrency level: images/s, requests/s, p50/p90/p99 latency, failures. Inputs are
random float32 of the model's input shape, drawn once per stream (their values do not change the work).

    .venv-triton/bin/python bench/triton_load.py --model resnet50 --batch 8 --concurrency 1,4,16,64 \
        --seconds 20 [--url localhost:8001] [--protocol grpc] [--json out.json] [--tag T] [--meta k=v ...]
    python3 bench/triton_load.py --summarize DIR [--md DIR/triton-gpu.md] [--summary-json DIR/triton-gpu.json]

--summarize (bench/triton_gpu.sh's last step) reads every rows-*.json under DIR (written with --json and
--meta runtime=R gpus=G) and writes one JSON and a markdown table per model: per runtime and GPU count the
rows (images/s, p50/p99) and the best images/s, its scaling over one GPU and per-GPU efficiency.
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import time


def stream(url, protocol, model, batch, seconds, warmup, seed, queue, barrier):
    import numpy as np
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
                _wait(barrier)
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
    _wait(barrier)  # every stream starts its window together
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


def _wait(barrier):
    try:
        barrier.wait(timeout=300)
    except Exception:  # noqa: BLE001 - a broken barrier: the others measure on
        pass


def level(a, n):
    import numpy as np
    # Spawned, not forked: gRPC's core is not fork-safe (a stream forked after the parent's own gRPC
    # client, --save-output, hung in its first call).
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    barrier = ctx.Barrier(n)
    procs = [ctx.Process(target=stream, args=(a.url, a.protocol, a.model, a.batch, a.seconds, a.warmup, k, q,
                                              barrier)) for k in range(n)]
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


def save_output(a):
    """One request with a fixed input (seed 12345), its first output saved: the summary compares the
    runtimes' outputs for the same input (both serve the same weights). False (one line) on failure."""
    import numpy as np
    import tritonclient.grpc as g
    import tritonclient.http as h
    client = (g if a.protocol == "grpc" else h)
    c = client.InferenceServerClient(a.url)
    try:
        meta = c.get_model_metadata(a.model)
        tensors = [(t.name, list(t.shape)) for t in meta.inputs] if a.protocol == "grpc" else \
            [(t["name"], t["shape"]) for t in meta["inputs"]]
        outs = [t.name for t in meta.outputs] if a.protocol == "grpc" else [t["name"] for t in meta["outputs"]]
        rng = np.random.default_rng(12345)
        inputs = []
        for name, shape in tensors:
            shape = [a.batch] + [int(d) for d in shape[1:]]
            i = client.InferInput(name, shape, "FP32")
            i.set_data_from_numpy(rng.standard_normal(shape).astype(np.float32))
            inputs.append(i)
        np.save(a.save_output, c.infer(a.model, inputs).as_numpy(outs[0]))
        return True
    except Exception as e:  # noqa: BLE001
        print(f"error: --save-output: {e}".splitlines()[0], file=sys.stderr)
        return False


def _agreement(folder, model, gpus):
    """max |infer - torch| / max |torch| over the saved outputs of one model and GPU count, or None."""
    import numpy as np
    paths = [os.path.join(folder, f"output-{r}-{gpus}gpu-{model}.npy") for r in ("infer", "torch")]
    if not all(os.path.isfile(p) for p in paths):
        return None
    x, y = (np.load(p).astype(np.float64) for p in paths)
    if x.shape != y.shape:
        return float("inf")
    return float(np.abs(x - y).max() / max(np.abs(y).max(), 1e-30))


def _best(rows):
    ok = [r for r in rows if not r["failed"] and r["requests"] > 0]
    return max(ok, key=lambda r: r["images_per_s"]) if ok else None


def summarize(folder, md_path, json_path):
    """The summary of bench/triton_gpu.sh's rows: returns 0, or 1 when there are none (one line)."""
    import glob
    rows, meta = [], {}
    for path in sorted(glob.glob(os.path.join(folder, "**", "rows-*.json"), recursive=True)):
        with open(path) as f:
            rows += json.load(f)
    info = os.path.join(folder, "machine.json")
    if os.path.isfile(info):
        with open(info) as f:
            meta = json.load(f)
    if not rows:
        print(f"error: no rows-*.json under {folder} (bench/triton_gpu.sh writes them)", file=sys.stderr)
        return 1
    key = lambda r: (r["model"], r.get("runtime", "?"), int(r.get("gpus", 1)))  # noqa: E731
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    scaling = []
    for (model, runtime, gpus), rs in sorted(groups.items()):
        best = _best(rs)
        one = _best(groups.get((model, runtime, 1), []))
        s = {"model": model, "runtime": runtime, "gpus": gpus,
             "best_images_per_s": best["images_per_s"] if best else None,
             "best_at_concurrency": best["concurrency"] if best else None,
             "p50_ms_at_best": best["p50_ms"] if best else None, "p99_ms_at_best": best["p99_ms"] if best else None,
             "failed": sum(r["failed"] for r in rs)}
        s["scaling_over_1gpu"] = best["images_per_s"] / one["images_per_s"] if best and one else None
        s["infer_vs_torch_rel_diff"] = _agreement(folder, model, gpus)
        s["per_gpu_efficiency"] = s["scaling_over_1gpu"] / gpus if s["scaling_over_1gpu"] and gpus else None
        scaling.append(s)
    with open(json_path, "w") as f:
        json.dump({"meta": meta, "rows": rows, "summary": scaling}, f, indent=1)
    fmt = lambda v, spec: "-" if v is None or v != v else format(v, spec)  # noqa: E731
    lines = ["# Triton serving: infer vs PyTorch (bench/triton_gpu.sh)", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["- GPUs 0: the CPU check (--cpu). Output vs the other runtime: max |infer - torch| / max |torch| for one "
              "request of the same seeded input (same weights; fp16 differs by rounding).", ""]
    lines += ["## Best throughput and scaling", "",
              "| model | runtime | GPUs | best images/s | at concurrency | p50 ms | p99 ms | x over 1 GPU | "
              "per-GPU efficiency | failed | output vs the other runtime |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in scaling:
        lines.append(f"| {s['model']} | {s['runtime']} | {s['gpus']} | {fmt(s['best_images_per_s'], '.1f')} | "
                     f"{fmt(s['best_at_concurrency'], 'd')} | {fmt(s['p50_ms_at_best'], '.2f')} | "
                     f"{fmt(s['p99_ms_at_best'], '.2f')} | {fmt(s['scaling_over_1gpu'], '.2f')} | "
                     f"{fmt(s['per_gpu_efficiency'], '.2f')} | {s['failed']} | "
                     f"{fmt(s['infer_vs_torch_rel_diff'], '.1e')} |")
    for model in sorted({r["model"] for r in rows}):
        lines += ["", f"## {model}: throughput and latency against offered load", "",
                  "| runtime | GPUs | concurrency | batch/request | images/s | requests/s | p50 ms | p90 ms | "
                  "p99 ms | failed |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in sorted((r for r in rows if r["model"] == model),
                        key=lambda r: (r.get("runtime", ""), int(r.get("gpus", 1)), r["concurrency"])):
            lines.append(f"| {r.get('runtime', '?')} | {r.get('gpus', '?')} | {r['concurrency']} | {r['batch']} | "
                         f"{fmt(r['images_per_s'], '.1f')} | {fmt(r['requests_per_s'], '.1f')} | "
                         f"{fmt(r['p50_ms'], '.2f')} | {fmt(r['p90_ms'], '.2f')} | {fmt(r['p99_ms'], '.2f')} | "
                         f"{r['failed']} |")
    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {md_path} and {json_path}: {len(rows)} rows")
    return 0


def main():
    if "--summarize" in sys.argv:
        p = argparse.ArgumentParser(description="summary of bench/triton_gpu.sh's rows")
        p.add_argument("--summarize", required=True, metavar="DIR")
        p.add_argument("--md", default=None)
        p.add_argument("--summary-json", default=None)
        a = p.parse_args()
        return summarize(a.summarize, a.md or os.path.join(a.summarize, "triton-gpu.md"),
                         a.summary_json or os.path.join(a.summarize, "triton-gpu.json"))
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
    p.add_argument("--save-output", default=None, metavar="PATH.npy",
                   help="first send one request of --batch rows drawn with seed 12345, save its first output")
    p.add_argument("--meta", nargs="*", default=[], metavar="KEY=VALUE", help="recorded with every row")
    a = p.parse_args()
    meta = dict(m.split("=", 1) for m in a.meta if "=" in m)
    if len(meta) != len(a.meta):
        print(f"error: --meta takes KEY=VALUE, got {a.meta}", file=sys.stderr)
        return 1
    a.url = a.url or ("localhost:8001" if a.protocol == "grpc" else "localhost:8000")
    try:
        levels = [int(x) for x in a.concurrency.split(",") if x.strip()]
    except ValueError:
        print(f"error: --concurrency takes comma-separated integers, got '{a.concurrency}'", file=sys.stderr)
        return 1
    if a.batch < 1 or not levels or min(levels) < 1 or a.seconds <= 0:
        print("error: --batch, --concurrency and --seconds must be positive", file=sys.stderr)
        return 1
    if a.save_output and not save_output(a):
        return 1
    rows = []
    print(f"{a.tag} model {a.model} batch {a.batch} over {a.protocol} {a.url}")
    print("concurrency  images/s  requests/s   p50 ms   p90 ms   p99 ms  failed")
    for n in levels:
        r = level(a, n)
        r["model"], r["tag"] = a.model, a.tag
        r.update(meta)
        rows.append(r)
        print(f"{n:11d} {r['images_per_s']:9.1f} {r['requests_per_s']:11.1f} {r['p50_ms']:8.2f} "
              f"{r['p90_ms']:8.2f} {r['p99_ms']:8.2f} {r['failed']:7d}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if any(r["failed"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
