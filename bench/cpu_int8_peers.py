#!/usr/bin/env python3
"""int8 on the CPU: infer beside ONNX Runtime and OpenVINO on the same QDQ files, and PyTorch's int8 (issue 30 must 5).

Per model (torchvision classifiers of bench/byom_vs_peers.py: seeded random weights, 224x224): the fp32
ONNX export, and its QDQ form from ONNX Runtime's own quantize_static (per-channel int8 weights, uint8
activations, 16 random calibration inputs: the weights are random, so this measures speed and agreement
only). Every runtime gets the same two files: ONNX Runtime (CPUExecutionProvider, ORT_ENABLE_ALL: its
QDQ -> QLinearConv fusion), OpenVINO (CPU, LATENCY; its low-precision transformations run the QDQ model
in int8), infer (onnx2fb of each file; its fuse_quantized_conv2d pass); beside them PyTorch's own int8
(the same torch module through torch.ao's FX post-training quantization on its x86 engine: x86 or
fbgemm where the build has it, else onednn; its default qconfig, the same 16 calibration inputs) and
PyTorch fp32 (eager, no_grad). Batch 1, one thread and all
cores, median of --runs after warm-up, runtimes alternating per model and thread count. The outputs of
the three int8 runs are compared on one input (relative L2 error against ONNX Runtime's int8 output).
--reduce-range quantizes with ONNX Runtime's reduce_range=True instead (7-bit weights, its advice for
AVX2 CPUs without VNNI; infer then runs its vpmaddubsw GEMM on them), into *_qdq_rr.onnx.

Peers go into a venv of their own (--venv, default .venv-int8: ONNX Runtime's quantization tools need
a newer onnx and ml_dtypes, which byom_vs_peers.py's .venv-bench keeps out), created with
--system-site-packages so Debian's torch stays visible; this script re-executes itself there. Never
in the engine's build dependencies.

    python3 bench/cpu_int8_peers.py --build build-cpu --work /tmp/int8peers --out bench/results --tag epyc
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from byom_vs_peers import PEER_PACKAGES, build_model, export_onnx, wall_times  # noqa: E402

VENV_MARK = "INFER_INT8_PEERS_IN_VENV"
# onnxruntime.quantization imports onnx.reference (onnx >= 1.13; Debian has 1.12) and ml_dtypes
PACKAGES = PEER_PACKAGES + ["onnx>=1.16", "ml_dtypes"]
NAMES = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def ensure_peers(venv):
    try:
        import onnxruntime.quantization  # noqa: F401
        import openvino  # noqa: F401
        return
    except ImportError:
        if os.environ.get(VENV_MARK):
            sys.exit("error: onnxruntime / openvino do not import in %s" % venv)
    venv = os.path.abspath(venv)
    py = os.path.join(venv, "bin", "python3")
    if not os.access(py, os.X_OK):
        log("creating %s" % venv)
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True)
    log("installing %s into %s" % (" ".join(PACKAGES), venv))
    subprocess.run([py, "-m", "pip", "install", "--quiet"] + PACKAGES, check=True)
    os.environ[VENV_MARK] = "1"
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


def rel_err(a, b):
    import numpy as np
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def prepare(a, name):
    """fp32 .onnx / .fb and the QDQ .onnx / .fb of one model in a.work (7-bit weights with --reduce-range)."""
    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    f32 = os.path.join(a.work, name + ".onnx")
    q = os.path.join(a.work, name + ("_qdq_rr.onnx" if a.reduce_range else "_qdq.onnx"))
    if not os.path.exists(f32):
        export_onnx(build_model(name, 14, (3, 224, 224)), (3, 224, 224), f32)
    if not os.path.exists(q):
        import onnx
        rng = np.random.default_rng(3)

        class Reader(CalibrationDataReader):
            def __init__(self, input_name):
                self.name = input_name
                self.left = [rng.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(16)]

            def get_next(self):
                return {self.name: self.left.pop()} if self.left else None

        reader = Reader(onnx.load(f32, load_external_data=False).graph.input[0].name)
        quantize_static(f32, q, reader, quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=a.reduce_range)
    for src in (f32, q):
        fb = src[:-5] + ".fb"
        if not os.path.exists(fb):
            subprocess.run([os.path.join(a.build, "onnx2fb"), src, fb], check=True, stdout=subprocess.DEVNULL)
    return f32, q


def infer_time(a, fb, threads, dump=None, extra=()):
    cmd = [os.path.join(a.build, "infer-bench"), "--threads", str(threads), "--runs", str(a.runs),
           "--warmup", str(a.warmup)] + list(extra) + ["model", fb, "--default-only"]
    if dump:
        cmd += ["--dump", dump]
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, env=env).stdout
    m = re.search(r"^default +([0-9.]+) +([0-9.]+) +([0-9.]+)", out, re.M)
    if not m:
        raise RuntimeError("no timing line from infer-bench:\n" + out[-2000:])
    return {"median_ms": float(m.group(1)), "min_ms": float(m.group(2)), "max_ms": float(m.group(3)),
            "runs": a.runs}


def int8_nodes(a, fb):
    out = subprocess.run([os.path.join(a.build, "infer"), "--model", fb, "--backend", "cpu", "-v"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True).stdout
    return len(re.findall(r"\(quantized_conv2d\): kernel variant", out)), len(re.findall(r"\((conv2d)\): kernel variant", out))


def to_torch(arr):
    """A float32 numpy array as a torch tensor without torch's numpy bridge (Debian's torch is built
    against the NumPy 1.x ABI; the venv's NumPy may be 2.x, which that bridge refuses)."""
    import numpy as np
    import torch
    a = np.ascontiguousarray(arr, dtype=np.float32)
    return torch.frombuffer(bytearray(a.tobytes()), dtype=torch.float32).reshape(a.shape)


def from_torch(t):
    import numpy as np
    return np.array(t.detach().flatten().tolist(), dtype=np.float32).reshape(tuple(t.shape))


def torch_models(name):
    """The fp32 torch module of `name` and its int8 form from torch.ao FX post-training quantization
    (calibrated on the 16 inputs quantize_static sees), and the quantized engine used."""
    import copy
    import numpy as np
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    engines = torch.backends.quantized.supported_engines
    engine = next(e for e in ("x86", "fbgemm", "onednn", "qnnpack") if e in engines)
    torch.backends.quantized.engine = engine
    net = build_model(name, 14, (3, 224, 224)).eval()
    rng = np.random.default_rng(3)
    calib = [to_torch(rng.standard_normal((1, 3, 224, 224))) for _ in range(16)]
    prepared = prepare_fx(copy.deepcopy(net), get_default_qconfig_mapping(engine), (calib[0],))
    with torch.no_grad():
        for x in calib:
            prepared(x)
    return net, convert_fx(prepared), engine


def ort_session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ov_request(path, threads, shape):
    import openvino as ov
    core = ov.Core()
    model = core.read_model(path)
    model.reshape(list(shape))
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32",
                                                 "INFERENCE_NUM_THREADS": threads})
    return compiled, compiled.create_infer_request()


def ov_int8_primitives(compiled):
    """How many of OpenVINO's executed primitives (constants left out) run in u8 / i8."""
    n = 0
    for op in compiled.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        if "runtimePrecision" not in rt or rt["layerType"].astype(str) == "Const":
            continue
        if rt["runtimePrecision"].astype(str) in ("u8", "i8"):
            n += 1
    return n


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build-cpu")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "infer-int8-peers"))
    p.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    p.add_argument("--threads-list", default="1,2")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", default=None, help="write cpu-int8-peers-<date>[-tag].{json,md} here")
    p.add_argument("--tag", default="")
    p.add_argument("--reduce-range", action="store_true", help="7-bit weights (ONNX Runtime's reduce_range)")
    p.add_argument("--venv", default=os.path.join(os.path.dirname(HERE), ".venv-int8"))
    a = p.parse_args()
    ensure_peers(a.venv)
    import numpy as np
    import onnxruntime as ort
    import openvino as ov
    os.makedirs(a.work, exist_ok=True)
    a.build = os.path.abspath(a.build)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = open("/proc/loadavg").read().split()[:3]
    rows = []
    for name in a.models.split(","):
        f32, q = prepare(a, name)
        qfb = q[:-5] + ".fb"
        nq, nf = int8_nodes(a, qfb)
        log("%s: infer runs %d convolutions of the QDQ file in int8 (%d stay float)" % (name, nq, nf))
        # agreement of the three int8 outputs on infer-bench's own input
        dump = os.path.join(a.work, name + "_dump")
        infer_time(a, qfb, 1, dump)
        x = np.load(os.path.join(dump, "input_0.npy")).astype(np.float32)
        y_infer = np.load(os.path.join(dump, "output_0.npy"))
        fake = os.path.join(a.work, name + "_dump_fake")  # the same file as fake quantization, same input
        infer_time(a, qfb, 1, fake, ["--pass", "fuse_quantized_conv2d=off"])
        y_fake = np.load(os.path.join(fake, "output_0.npy"))
        s = ort_session(q, 1)
        y_ort = s.run(None, {s.get_inputs()[0].name: x})[0]
        compiled, req = ov_request(q, 1, x.shape)
        req.infer({0: x})
        y_ov = req.get_output_tensor(0).data.copy()
        ov_int8 = ov_int8_primitives(compiled)
        s32 = ort_session(f32, 1)
        y_f32 = s32.run(None, {s32.get_inputs()[0].name: x})[0]
        import torch
        net, qnet, engine = torch_models(name)
        xt = to_torch(x)
        with torch.no_grad():
            y_pt = from_torch(qnet(xt))
        agreement = {"infer_int8_vs_infer_fake": rel_err(y_infer, y_fake), "infer_int8_vs_ort_int8": rel_err(y_infer, y_ort), "openvino_int8_vs_ort_int8": rel_err(y_ov, y_ort),
                     "ort_int8_vs_ort_fp32": rel_err(y_ort, y_f32), "pytorch_int8_vs_ort_fp32": rel_err(y_pt, y_f32)}
        del s, s32, compiled, req
        for threads in [int(t) for t in a.threads_list.split(",")]:
            row = {"model": name, "threads": threads, "int8_convs": nq, "float_convs": nf,
                   "openvino_int8_primitives": ov_int8, "agreement": agreement, "times": {}}
            for kind, path in (("fp32", f32), ("int8", q)):
                row["times"]["infer_" + kind] = infer_time(a, path[:-5] + ".fb", threads)
                s = ort_session(path, threads)
                feed = {s.get_inputs()[0].name: x}
                row["times"]["ort_" + kind] = wall_times(lambda: s.run(None, feed), a.runs, a.warmup)
                del s
                compiled, req = ov_request(path, threads, x.shape)
                row["times"]["openvino_" + kind] = wall_times(lambda: req.infer({0: x}), a.runs, a.warmup)
                del compiled, req
                torch.set_num_threads(threads)
                module = net if kind == "fp32" else qnet
                with torch.no_grad():
                    row["times"]["pytorch_" + kind] = wall_times(lambda: module(xt), a.runs, a.warmup)
            log("%s t%d: %s" % (name, threads, ", ".join("%s %.2f" % (k, v["median_ms"]) for k, v in row["times"].items())))
            rows.append(row)
    result = {"date": started.strftime("%Y-%m-%d %H:%M UTC"), "cpu": platform.processor() or cpu_model(),
              "reduce_range": a.reduce_range,
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "load_before": load_before,
              "load_after": open("/proc/loadavg").read().split()[:3], "onnxruntime": ort.__version__,
              "openvino": ov.get_version(), "pytorch": torch.__version__, "pytorch_engine": engine, "rows": rows}
    md = markdown(result)
    print(md)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        base = os.path.join(a.out, "cpu-int8-peers-%s%s" % (started.strftime("%Y-%m-%d"), "-" + a.tag if a.tag else ""))
        json.dump(result, open(base + ".json", "w"), indent=1)
        open(base + ".md", "w").write(md)
        log("wrote %s.{json,md}" % base)


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "cpu"


def markdown(r):
    out = ["# int8 on the CPU: infer, ONNX Runtime and OpenVINO on the same QDQ files, PyTorch's own int8 beside "
           "them (%s)" % r["date"], "",
           "- command: `%s`" % r["command"], "- CPU: %s; load before %s, after %s" % (
               r["cpu"], " ".join(r["load_before"]), " ".join(r["load_after"])),
           "- ONNX Runtime %s, OpenVINO %s, PyTorch %s (int8: torch.ao FX, engine %s); batch 1; median ms; "
           "weights %s" % (r["onnxruntime"], r["openvino"], r.get("pytorch", "-"), r.get("pytorch_engine", "-"),
                           "7-bit (reduce_range)" if r.get("reduce_range") else "8-bit"), "",
           "| model | threads | infer fp32 | infer int8 | ORT fp32 | ORT int8 | OpenVINO fp32 | OpenVINO int8 | "
           "PyTorch fp32 | PyTorch int8 | infer int8 vs fp32 | infer int8 vs faster peer int8 |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in r["rows"]:
        t = {k: v["median_ms"] for k, v in row["times"].items()}
        peer = min(t[k] for k in ("ort_int8", "openvino_int8", "pytorch_int8") if k in t)
        out.append("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s | %.2fx | %.2fx |" % (
            NAMES.get(row["model"], row["model"]), row["threads"], t["infer_fp32"], t["infer_int8"], t["ort_fp32"],
            t["ort_int8"], t["openvino_fp32"], t["openvino_int8"],
            "%.2f" % t["pytorch_fp32"] if "pytorch_fp32" in t else "-",
            "%.2f" % t["pytorch_int8"] if "pytorch_int8" in t else "-", t["infer_fp32"] / t["infer_int8"],
            peer / t["infer_int8"]))
    out += ["", "Relative L2 errors of the outputs on one input. Random weights: the quantization error itself (ORT "
            "int8 vs fp32) is large, and any two int8 computations of these deep random networks drift apart: "
            "where a float sum and an exact integer sum of the same layer land on two sides of a rounding "
            "boundary, the next quantize_linear differs by one step, and such flips compound layer by layer "
            "(infer int8 vs infer's own fake quantization of the same file: 2e-7 after the first convolution, "
            "1e-6 after the second, then growing; docs/benchmarks.md).", "",
            "| model | convs in int8 (infer) | stay float | OpenVINO u8/i8 primitives | infer int8 vs infer fake-quant | "
            "infer int8 vs ORT int8 | OpenVINO int8 vs ORT int8 | ORT int8 vs ORT fp32 | PyTorch int8 vs ORT fp32 |",
            "|---|---|---|---|---|---|---|---|---|"]
    seen = set()
    for row in r["rows"]:
        if row["model"] in seen:
            continue
        seen.add(row["model"])
        g = row["agreement"]
        out.append("| %s | %d | %d | %d | %.2e | %.2e | %.2e | %.2e | %s |" % (
            NAMES.get(row["model"], row["model"]), row["int8_convs"], row["float_convs"], row["openvino_int8_primitives"],
            g["infer_int8_vs_infer_fake"], g["infer_int8_vs_ort_int8"], g["openvino_int8_vs_ort_int8"],
            g["ort_int8_vs_ort_fp32"],
            "%.2e" % g["pytorch_int8_vs_ort_fp32"] if "pytorch_int8_vs_ort_fp32" in g else "-"))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
