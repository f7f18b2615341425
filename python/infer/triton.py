"""Serving infer models with Triton Inference Server (issue 29, docs/serving.md).

    python -m infer.triton repo MODEL.fb... --out DIR [--max-batch 64] [--precision fp16] ...
    python -m infer.triton serve DIR [--http-port 8000 --grpc-port 8001 --metrics-port 8002]
    python -m infer.triton query MODEL_NAME [--url localhost:8000] [--batch 8 --out img.png | --input x.png]

`repo` writes a Triton model repository: per model DIR/NAME/config.pbtxt (inputs and outputs from the
.fb file, max_batch_size, dynamic_batching, instance_group, precision as a parameter), DIR/NAME/1/model.fb
and DIR/NAME/1/model.py (infer/triton_model.py: the Python backend over infer.Session). `serve` runs
the tritonserver that PyPI's nvidia-pytriton wheel ships (scripts/install-triton.sh puts it into
.venv-triton) on that repository, in the foreground. `query` sends one request over HTTP as the CLI
would run it (a generator's seeded latents, or an image file) and prints or writes the result.
Bad arguments are one `error: ...` line and exit status 1.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
from typing import Dict, List, Optional, Sequence

import infer

_MODEL_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "triton_model.py")
PRECISIONS = ("fp32", "tf32", "fp16")
KINDS = ("auto", "gpu", "cpu")


class UsageError(Exception):
    """A bad argument: printed as one line by main()."""


def _dims(shape: Sequence[int]) -> str:
    return "[ " + ", ".join(str(d) for d in shape) + " ]"


def _pow2_upto(n: int) -> List[int]:
    out, b = [], 1
    while b < n:
        out.append(b)
        b *= 2
    return out + [n]


def model_config(model: "infer.Model", name: str, max_batch: int = 64,
                 preferred: Optional[Sequence[int]] = None, queue_delay_us: int = 500,
                 kind: str = "auto", gpus: Optional[Sequence[int]] = None, instances: int = 1,
                 precision: str = "fp32", extra_params: Optional[Dict[str, str]] = None) -> str:
    """The config.pbtxt text for one model (see docs/serving.md for every knob). `extra_params` go into
    `parameters` beside precision and batch_buckets (the backend's model.py reads them)."""
    if precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}, got '{precision}'")
    if kind not in KINDS:
        raise UsageError(f"--kind must be one of {', '.join(KINDS)}, got '{kind}'")
    if max_batch < 0 or instances < 1 or queue_delay_us < 0:
        raise UsageError("--max-batch must be >= 0, --instances >= 1 and --queue-delay-us >= 0")
    if kind == "auto":
        kind = "gpu" if infer.cuda_available() else "cpu"
    if kind == "cpu" and precision != "fp32":
        raise UsageError(f"precision {precision} needs GPU instances (the cpu backend runs fp32 only)")
    # Every model runs at any batch unless its producer fixed it (batch.fixed: docs/format.md).
    batched = max_batch > 0 and "batch.fixed" not in model.metadata and all(t.shape for t in model.inputs)
    if not batched:
        max_batch = 0
    if preferred is None:
        preferred = [b for b in _pow2_upto(max_batch) if b >= 4] if batched else []
    preferred = sorted(set(int(p) for p in preferred))
    if any(p < 1 or p > max_batch for p in preferred):
        raise UsageError(f"--preferred sizes must lie in 1..--max-batch ({max_batch}), got {preferred}")
    buckets = sorted(set(_pow2_upto(max_batch)) | set(preferred)) if batched else []

    def tensor(t: "infer.TensorInfo") -> str:
        shape = list(t.shape[1:]) if batched else [d if d > 0 else 1 for d in t.shape]
        return (f'  {{\n    name: "{t.name}"\n    data_type: TYPE_FP32\n    dims: {_dims(shape)}\n  }}')

    lines = [f'name: "{name}"', 'backend: "python"', f"max_batch_size: {max_batch}",
             "input [\n" + ",\n".join(tensor(t) for t in model.inputs) + "\n]",
             "output [\n" + ",\n".join(tensor(t) for t in model.outputs) + "\n]"]
    if batched:
        lines.append("dynamic_batching {\n"
                     + (f"  preferred_batch_size: {_dims(preferred)}\n" if preferred else "")
                     + f"  max_queue_delay_microseconds: {queue_delay_us}\n}}")
    if kind == "gpu":
        # No `gpus` list: Triton puts `count` instances on every GPU it sees (one per GPU by default).
        g = f"\n    gpus: {_dims(gpus)}" if gpus else ""
        lines.append(f"instance_group [\n  {{\n    count: {instances}\n    kind: KIND_GPU{g}\n  }}\n]")
    else:
        lines.append(f"instance_group [\n  {{\n    count: {instances}\n    kind: KIND_CPU\n  }}\n]")
    params = {"precision": precision, "batch_buckets": ",".join(str(b) for b in buckets)}
    for k, v in (extra_params or {}).items():
        if not re.fullmatch(r"[A-Za-z0-9_]+", k) or '"' in str(v) or "\\" in str(v):
            raise UsageError(f"parameter {k}={v!r}: keys are letters, digits and '_'; values hold no quotes")
        params[k] = str(v)
    lines.append("parameters [\n" + ",\n".join(
        f'  {{\n    key: "{k}"\n    value: {{ string_value: "{v}" }}\n  }}' for k, v in params.items()) + "\n]")
    return "\n".join(lines) + "\n"


def write_repository(models: Sequence[str], out: str, names: Optional[Sequence[str]] = None,
                     model_py: Optional[str] = None, **config_args) -> List[str]:
    """Writes a model repository for the .fb files `models` into `out` (created; existing model folders
    of the same names are replaced). Returns the model names (the file names without .fb unless
    `names` gives them). `model_py`: another Python backend than infer's (bench/triton_torch_model.py
    serves the same models through PyTorch)."""
    if not models:
        raise UsageError("no model given (repo MODEL.fb... --out DIR)")
    if names is not None and len(names) != len(models):
        raise UsageError(f"--name given {len(names)} time(s) for {len(models)} model(s)")
    loaded: Dict[str, tuple] = {}
    for k, path in enumerate(models):
        name = names[k] if names else os.path.splitext(os.path.basename(path))[0]
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise UsageError(f"model name '{name}' may hold only letters, digits, '_', '.', '-'")
        if name in loaded:
            raise UsageError(f"two models named '{name}' (use --name)")
        model = infer.load(path)  # infer.Error names what is wrong with the file
        loaded[name] = (path, model_config(model, name, **config_args))
    os.makedirs(out, exist_ok=True)
    for name, (path, config) in loaded.items():
        folder = os.path.join(out, name)
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        os.makedirs(os.path.join(folder, "1"))
        shutil.copyfile(path, os.path.join(folder, "1", "model.fb"))
        shutil.copyfile(model_py or _MODEL_PY, os.path.join(folder, "1", "model.py"))
        with open(os.path.join(folder, "config.pbtxt"), "w") as f:
            f.write(config)
    return list(loaded)


def server_command(repo: str, workdir: str, http_port: int = 8000, grpc_port: int = 8001,
                   metrics_port: int = 8002, log_verbose: int = 0,
                   extra: Sequence[str] = ()) -> tuple:
    """(argv, env) that start nvidia-pytriton's tritonserver on `repo`. `workdir` receives the backend
    folder (the Python backend with the stub for this interpreter's version, as pytriton lays it
    out). PYTHONPATH carries this `infer` package to the backend's stub processes."""
    try:
        import pytriton  # noqa: F401 - only to find the wheel's files
    except ImportError:
        raise UsageError("Triton is not installed for this Python: run scripts/install-triton.sh and use "
                         ".venv-triton/bin/python") from None
    dist = os.path.join(os.path.dirname(pytriton.__file__), "tritonserver")
    libs = os.path.join(os.path.dirname(os.path.dirname(pytriton.__file__)), "nvidia_pytriton.libs")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    stub = os.path.join(dist, "python_backend_stubs", version, "triton_python_backend_stub")
    if not os.path.isfile(stub):
        raise UsageError(f"nvidia-pytriton has no Python backend stub for Python {version}")
    backends = os.path.join(workdir, "backends")
    shutil.rmtree(backends, ignore_errors=True)
    shutil.copytree(os.path.join(dist, "backends"), backends)
    shutil.copy(stub, os.path.join(backends, "python", "triton_python_backend_stub"))
    env = dict(os.environ)
    # The stub embeds libpython of this version but not this interpreter's paths: it needs the folder
    # holding libpython (a standalone or venv-built Python keeps it beside itself, not in /usr/lib) and
    # this interpreter's site-packages (a venv's torch, numpy), so model.py sees what the server's Python sees.
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    env["LD_LIBRARY_PATH"] = ":".join(p for p in (env.get("LD_LIBRARY_PATH"), libs, libdir) if p)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(infer.__file__)))
    sites = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
    env["PYTHONPATH"] = ":".join(p for p in (pkg_root, env.get("PYTHONPATH"), *sites) if p)
    env["PATH"] = os.path.dirname(sys.executable) + ":" + env.get("PATH", "")
    argv = [os.path.join(dist, "bin", "tritonserver"), f"--model-repository={os.path.abspath(repo)}",
            f"--backend-directory={backends}", f"--cache-directory={os.path.join(dist, 'caches')}",
            f"--http-port={http_port}", f"--grpc-port={grpc_port}", f"--metrics-port={metrics_port}",
            f"--log-verbose={log_verbose}", "--exit-timeout-secs=10",
            # The Python backend's shared memory per instance: 16 MiB to start, grown by 16 MiB.
            "--backend-config=python,shm-default-byte-size=16777216",
            "--backend-config=python,shm-growth-byte-size=16777216", *extra]
    return argv, env


def _serve(a) -> int:
    if not os.path.isdir(a.repo) or not any(os.path.isfile(os.path.join(a.repo, d, "config.pbtxt"))
                                            for d in os.listdir(a.repo)):
        raise UsageError(f"'{a.repo}' is not a model repository (write one with: repo MODEL.fb --out DIR)")
    workdir = os.path.abspath(a.workdir or os.path.join(a.repo, os.pardir, ".triton-" + os.path.basename(
        os.path.abspath(a.repo))))
    os.makedirs(workdir, exist_ok=True)
    argv, env = server_command(a.repo, workdir, a.http_port, a.grpc_port, a.metrics_port, a.log_verbose)
    print(" ".join(argv), flush=True)
    proc = subprocess.Popen(argv, env=env)
    signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        return proc.wait()


def _query(a) -> int:
    import numpy as np
    try:
        import tritonclient.http as http
    except ImportError:
        raise UsageError("tritonclient is not installed for this Python: use .venv-triton/bin/python "
                         "(scripts/install-triton.sh)") from None
    client = http.InferenceServerClient(a.url)
    meta = client.get_model_metadata(a.model)
    config = client.get_model_config(a.model)
    batched = int(config.get("max_batch_size", 0)) > 0
    model_fb = infer.load(a.fb) if a.fb else None
    if a.input:
        if model_fb is None:
            raise UsageError("--input needs --fb MODEL.fb (the image is normalised as its metadata says)")
        x = [infer.load_image(a.input, model_fb)]
    else:
        shapes = [[a.batch] + [int(d) for d in t["shape"][1 if batched else 0:]] for t in meta["inputs"]]
        rng = np.random.default_rng(a.seed)
        x = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    inputs = []
    for t, arr in zip(meta["inputs"], x):
        i = http.InferInput(t["name"], list(arr.shape), "FP32")
        i.set_data_from_numpy(arr)
        inputs.append(i)
    result = client.infer(a.model, inputs)
    for t in meta["outputs"]:
        y = result.as_numpy(t["name"])
        if a.out:
            lo, hi = model_fb.output_range if model_fb is not None else (-1.0, 1.0)
            infer.save_grid(a.out, y, lo, hi)
            print(f"wrote {a.out}: {y.shape[0]} image(s) {'x'.join(map(str, y.shape[1:]))} from '{a.model}'")
        elif y.ndim == 2:
            labels = model_fb.labels if model_fb is not None else []
            for r, row in enumerate(y):
                top = np.argsort(-row)[:5]
                print(f"row {r}: " + ", ".join(
                    f"{labels[c] if c < len(labels) else c} {row[c]:.4f}" for c in top))
        else:
            print(f"{t['name']}: shape {list(y.shape)}, mean {float(y.mean()):.6f}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0].endswith(".fb"):
        argv.insert(0, "repo")  # python -m infer.triton MODEL.fb... --out DIR
    p = argparse.ArgumentParser(prog="python -m infer.triton", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("repo", help="write a Triton model repository for .fb files")
    r.add_argument("models", nargs="+", metavar="MODEL.fb")
    r.add_argument("--out", required=True, help="the repository folder (created)")
    r.add_argument("--name", action="append", help="the model's name in the repository (once per model)")
    r.add_argument("--max-batch", type=int, default=64, help="max_batch_size (default 64; 0: no batching)")
    r.add_argument("--preferred", default=None,
                   help="dynamic_batching preferred sizes, comma-separated (default: powers of two from 4)")
    r.add_argument("--queue-delay-us", type=int, default=500, help="max_queue_delay_microseconds (default 500)")
    r.add_argument("--kind", default="auto", help="instances on gpu or cpu (default auto: gpu when present)")
    r.add_argument("--gpus", default=None, help="GPU ids for the instances (default: every GPU, one each)")
    r.add_argument("--instances", type=int, default=1, help="instances per GPU (or on the CPU); default 1")
    r.add_argument("--precision", default="fp32", help="fp32 | tf32 | fp16 (gpu)")
    s = sub.add_parser("serve", help="run tritonserver (nvidia-pytriton) on a repository")
    s.add_argument("repo")
    s.add_argument("--http-port", type=int, default=8000)
    s.add_argument("--grpc-port", type=int, default=8001)
    s.add_argument("--metrics-port", type=int, default=8002)
    s.add_argument("--log-verbose", type=int, default=0)
    s.add_argument("--workdir", default=None, help="where the backend folder goes (default beside DIR)")
    q = sub.add_parser("query", help="send one request over HTTP and show the result")
    q.add_argument("model", help="the model's name in the repository")
    q.add_argument("--url", default="localhost:8000")
    q.add_argument("--fb", default=None, help="the model's .fb file: labels, output range, image normalisation")
    q.add_argument("--batch", type=int, default=1, help="random inputs: the batch (default 1)")
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--input", default=None, help="an image file for a classifier (needs --fb)")
    q.add_argument("--out", default=None, help="write the output batch as a PNG grid (a generator)")
    a = p.parse_args(argv)
    try:
        if a.cmd == "repo":
            def ints(text, what):
                try:
                    return [int(v) for v in text.split(",") if v.strip()]
                except ValueError:
                    raise UsageError(f"{what} takes comma-separated integers, got '{text}'") from None
            names = write_repository(
                a.models, a.out, names=a.name, max_batch=a.max_batch,
                preferred=ints(a.preferred, "--preferred") if a.preferred is not None else None,
                queue_delay_us=a.queue_delay_us, kind=a.kind.lower(),
                gpus=ints(a.gpus, "--gpus") if a.gpus else None, instances=a.instances,
                precision=a.precision)
            print(f"wrote {a.out}: {', '.join(names)}")
            return 0
        if a.cmd == "serve":
            return _serve(a)
        if a.batch < 1:
            raise UsageError("--batch must be >= 1")
        return _query(a)
    except (UsageError, infer.Error, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - tritonclient's errors (server down, unknown model): one line
        print(f"error: {type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
