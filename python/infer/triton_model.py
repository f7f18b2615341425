"""Triton Inference Server's Python backend over infer (issue 29): copied as model.py into every model
of a repository that `python -m infer.triton repo` writes (docs/serving.md). One instance is one
infer.Session on the instance's device (KIND_GPU: cuda on model_instance_device_id; KIND_CPU: cpu).
Requests that the dynamic batcher hands over together are concatenated along the batch, padded with
zero rows up to the next planned batch bucket (powers of two and the preferred sizes; every bucket is
planned, and on cuda its CUDA graph captured, at load, so no request waits for planning), run once,
and split back. The merged inputs and the outputs live in arrays kept per bucket and reused by every
execute() (Session.run(out=...)): a fresh 40-50 MB array per batch of 64 page-faults on every run and
cost more than the forward (ResNet-50 / EB-GAN fp16 on an H100, docs/serving.md). Rows never mix, but a row may differ in float rounding from the same row run at
another batch (kernels may pick another variant or summation order per batch). A request that cannot
run gets its own error response; the others still run.
"""
import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

# The backend's stub embeds Python without reading PYTHONPATH; `infer` may live there (a build's
# python/ folder, as `python -m infer.triton serve` passes it) rather than in site-packages.
for _p in reversed(os.environ.get("PYTHONPATH", "").split(os.pathsep)):
    if _p and _p not in sys.path:
        sys.path.insert(0, _p)

import infer  # noqa: E402


def _params(config):
    return {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}


class TritonPythonModel:
    def initialize(self, args):
        # nvidia-pytriton 0.7.0's stub (Triton 2.51) hands back empty output tensors for NumPy >= 2
        # arrays (seen with NumPy 2.5 on the GPU machine; its wheel requires numpy<2): refuse to load
        # rather than serve empty answers.
        if int(np.__version__.split(".")[0]) >= 2:
            raise RuntimeError(
                f"infer: this Triton's Python backend needs NumPy < 2 (found {np.__version__} at "
                f"{os.path.dirname(np.__file__)}): pip install 'numpy<2' into the environment the stub imports")
        config = json.loads(args["model_config"])
        params = _params(config)
        path = os.path.join(args["model_repository"], args["model_version"], "model.fb")
        kind = args.get("model_instance_kind", "CPU")
        device = int(args.get("model_instance_device_id", "0") or 0)
        backend = "cuda" if kind == "GPU" else params.get("cpu_backend", "cpu")
        self.precision = params.get("precision", "fp32")
        self.inputs = [(i["name"], [int(d) for d in i["dims"]]) for i in config["input"]]
        self.outputs = [o["name"] for o in config["output"]]
        self.max_batch = int(config.get("max_batch_size", 0))
        buckets = [int(b) for b in params.get("batch_buckets", "").split(",") if b.strip()]
        self.buckets = sorted(set(b for b in buckets if 0 < b <= self.max_batch) | {self.max_batch}) \
            if self.max_batch > 0 else []
        on_gpu = {"device": device} if backend == "cuda" else {}  # this instance's GPU
        self.session = infer.Session(infer.load(path), backend=backend, precision=self.precision,
                                     batch=self.buckets[-1] if self.buckets else None, **on_gpu)
        # Plan (and on cuda capture the CUDA graph of) every bucket now, the largest first; its input
        # and output arrays are made here and reused (self._buffers).
        self._bufs = {}
        for b in reversed(self.buckets):
            ins, outs = self._buffers(b, set())
            self.session.run(*ins, out=outs)
        pb_utils.Logger.log_info(
            f"infer: '{args['model_name']}' instance {args.get('model_instance_name', '')} on "
            f"{self.session.backend} ({self.session.device}), {self.precision}, batch buckets {self.buckets}")

    def _bucket(self, n):
        for b in self.buckets:
            if b >= n:
                return b
        return n

    def _buffers(self, b, used):
        """Input and output arrays of bucket b, kept across execute() calls. A second run at the same
        bucket within one execute() gets new arrays: the first run's responses still point into its."""
        if b in used or b not in self._bufs:
            ins = [np.zeros([b] + dims, np.float32) for _, dims in self.inputs]
            outs = [np.empty((b,) + tuple(o.shape[1:]), np.float32) for o in self.session.outputs]
            if b in used:
                return ins, outs
            self._bufs[b] = (ins, outs)
        used.add(b)
        return self._bufs[b]

    def _run(self, parts, n, used):
        """Runs `n` rows, given per input as a list of arrays [rows, ...] to stack, padded with zero rows
        to a bucket; returns the outputs' first n rows (views of the bucket's output arrays)."""
        if self.max_batch <= 0:  # no batch dimension: one request at a time, as it came
            return self.session.run(*[p[0] for p in parts])
        b = self._bucket(n)
        ins, outs = self._buffers(b, used)
        arrays = []
        for k, p in enumerate(parts):
            if len(p) == 1 and b == n:
                arrays.append(p[0])  # the request's own memory, no copy
                continue
            row = 0
            for a in p:
                if a.shape[1:] != ins[k].shape[1:]:  # never let NumPy broadcast a wrong shape
                    raise ValueError(f"input '{self.inputs[k][0]}' has shape {list(a.shape)}, expected "
                                     f"[{a.shape[0]}, {', '.join(map(str, ins[k].shape[1:]))}]")
                ins[k][row:row + a.shape[0]] = a
                row += a.shape[0]
            ins[k][n:] = 0  # padding rows: zero, whatever an earlier run left there
            arrays.append(ins[k])
        self.session.run(*arrays, out=outs)
        return [o[:n] for o in outs]

    def execute(self, requests):
        responses = [None] * len(requests)
        batch = []  # (request index, [input arrays], rows)
        for i, request in enumerate(requests):
            try:
                arrays = []
                for name, _ in self.inputs:
                    t = pb_utils.get_input_tensor_by_name(request, name)
                    if t is None:
                        raise ValueError(f"input '{name}' is missing")
                    a = t.as_numpy()  # a view of the request's memory, no copy
                    if a.dtype != np.float32:
                        raise ValueError(f"input '{name}' is {a.dtype}, expected float32")
                    arrays.append(a if self.max_batch > 0 else a[np.newaxis])
                rows = {a.shape[0] for a in arrays}
                if len(rows) != 1:
                    raise ValueError(f"inputs have different batch sizes {sorted(rows)}")
                batch.append((i, arrays, rows.pop()))
            except Exception as e:  # noqa: BLE001 - each request gets its own error
                responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
        # Runs of at most the largest bucket (the batcher never forms more than max_batch_size rows).
        limit = self.buckets[-1] if self.buckets else 1
        group, used = [], set()
        for item in batch + [None]:
            if item is not None and (not group or sum(g[2] for g in group) + item[2] <= limit):
                group.append(item)
                continue
            if group:
                self._execute_group(group, responses, used)
            group = [item] if item is not None else []
        return responses

    def _execute_group(self, group, responses, used):
        try:
            n = sum(rows for _, _, rows in group)
            outs = self._run([[g[1][k] for g in group] for k in range(len(self.inputs))], n, used)
        except Exception as e:  # noqa: BLE001 - infer.Error and anything else: answered, not raised
            for i, _, _ in group:
                responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
            return
        offset = 0
        for i, _, rows in group:
            tensors = []
            for name, out in zip(self.outputs, outs):
                part = out[offset:offset + rows] if self.max_batch > 0 else out[0]
                # Copied once into the response's shared memory. (pb_utils.Tensor.from_dlpack refuses
                # NumPy's capsules in this Triton, 2.51: "PyCapsule_GetPointer called with incorrect name".)
                tensors.append(pb_utils.Tensor(name, np.ascontiguousarray(part)))
            responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
            offset += rows

    def finalize(self):
        self.session = None
