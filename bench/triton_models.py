#!/usr/bin/env python3
"""The models of the Triton GPU measurement (issue 29 must 4) and their two repositories.

    python3 bench/triton_models.py export --out DIR [--models resnet50,dcgan,ebgan] [--onnx2fb build/onnx2fb]
    python3 bench/triton_models.py repo DIR --runtime infer|torch --out REPO [--kind gpu] [--precision fp16]
        [--max-batch 64] [--preferred 16,32,64] [--queue-delay-us 500] [--torch-mode graph]

`export` builds each model with seeded random weights (byom_vs_peers.build_model: ResNet-50 from
torchvision, the DCGAN and EB-GAN generators of cpu_vs_pytorch.py, BatchNorm statistics gathered and
perturbed), writes NAME.pt (its state_dict), exports ONNX (opset 17, dynamic batch) and converts it with
the build's onnx2fb into NAME.fb: both runtimes serve the same weights. Needs torch + torchvision
(/usr/bin/python3 here, python3 on the GPU machine). `repo` writes a Triton repository of every NAME.fb
in DIR: --runtime infer through python -m infer.triton's generator (model.py = infer's backend), --runtime
torch the same config.pbtxt with bench/triton_torch_model.py as model.py and NAME.pt as 1/model.pt.
Bad arguments: one `error:` line, exit 1.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
MODELS = ["resnet50", "dcgan", "ebgan"]
TORCH_MODES = ("eager", "channels_last", "graph", "compile")


def export(a):
    sys.path.insert(0, HERE)
    import torch
    import byom_vs_peers as byom
    names = [m for m in a.models.split(",") if m.strip()]
    bad = [m for m in names if m not in byom.CPU_MODELS]
    if bad or not names:
        raise ValueError(f"--models: unknown {bad or names}; any of {','.join(byom.CPU_MODELS)}")
    if not os.access(a.onnx2fb, os.X_OK):
        raise ValueError(f"--onnx2fb {a.onnx2fb} is not an executable (build the onnx2fb target)")
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            shape = byom.input_shape(name, a.size, a.size)
            net = byom.build_model(name, a.seed, shape)
            torch.save(net.state_dict(), os.path.join(a.out, name + ".pt"))
            onnx_path = os.path.join(tmp, name + ".onnx")
            byom.export_onnx(net, shape, onnx_path)
            p = subprocess.run([a.onnx2fb, onnx_path, os.path.join(a.out, name + ".fb")], capture_output=True,
                               text=True)
            if p.returncode != 0:
                raise ValueError(f"onnx2fb {name}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
            print(f"exported {name}: input {list(shape)}, seed {a.seed} -> {a.out}/{name}.fb, {name}.pt", flush=True)
    return 0


def repo(a):
    import infer.triton as triton
    fbs = sorted(os.path.join(a.models_dir, f) for f in os.listdir(a.models_dir) if f.endswith(".fb"))
    if a.only:
        fbs = [f for f in fbs if os.path.basename(f)[:-3] in a.only.split(",")]
    if not fbs:
        raise ValueError(f"no .fb files in {a.models_dir} (write them with: export --out {a.models_dir})")
    preferred = [int(v) for v in a.preferred.split(",")] if a.preferred else None
    common = dict(max_batch=a.max_batch, preferred=preferred, queue_delay_us=a.queue_delay_us, kind=a.kind,
                  instances=a.instances, precision=a.precision)
    if a.runtime == "infer":
        names = triton.write_repository(fbs, a.out, **common)
    else:
        if a.torch_mode not in TORCH_MODES:
            raise ValueError(f"--torch-mode must be one of {', '.join(TORCH_MODES)}")
        params = {"bench_dir": HERE, "torch_mode": a.torch_mode, "torch_compile_mode": a.torch_compile_mode}
        names = []
        for fb in fbs:
            name = os.path.basename(fb)[:-3]
            pt = fb[:-3] + ".pt"
            if not os.path.isfile(pt):
                raise ValueError(f"{pt} is missing (export writes NAME.pt beside NAME.fb)")
            names += triton.write_repository([fb], a.out, model_py=os.path.join(HERE, "triton_torch_model.py"),
                                             extra_params=dict(params, arch=name), **common)
            shutil.copyfile(pt, os.path.join(a.out, name, "1", "model.pt"))
    print(f"wrote {a.out} ({a.runtime}): {', '.join(names)}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="NAME.fb + NAME.pt with seeded weights")
    e.add_argument("--out", required=True)
    e.add_argument("--models", default=",".join(MODELS))
    e.add_argument("--onnx2fb", default=os.path.join(REPO_ROOT, "build", "onnx2fb"))
    e.add_argument("--seed", type=int, default=1)
    e.add_argument("--size", type=int, default=224, help="classifier input size (default 224)")
    r = sub.add_parser("repo", help="a Triton repository of DIR's .fb files for infer or PyTorch")
    r.add_argument("models_dir", metavar="DIR")
    r.add_argument("--runtime", required=True, choices=["infer", "torch"])
    r.add_argument("--out", required=True)
    r.add_argument("--only", default=None, help="model names, comma-separated (default: every .fb)")
    r.add_argument("--kind", default="gpu", choices=["gpu", "cpu"])
    r.add_argument("--precision", default="fp16")
    r.add_argument("--max-batch", type=int, default=64)
    r.add_argument("--preferred", default=None)
    r.add_argument("--queue-delay-us", type=int, default=500)
    r.add_argument("--instances", type=int, default=1)
    r.add_argument("--torch-mode", default="graph", help="eager | channels_last | graph | compile")
    r.add_argument("--torch-compile-mode", default="max-autotune-no-cudagraphs")
    a = p.parse_args(argv)
    try:
        return export(a) if a.cmd == "export" else repo(a)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - infer.Error, UsageError, torch's: one line
        print(f"error: {type(err).__name__}: {err}".splitlines()[0], file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
