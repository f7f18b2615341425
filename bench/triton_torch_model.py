"""Triton's Python backend over PyTorch, the peer of python/infer/triton_model.py (issue 29 must 4): the
same repository layout, config.pbtxt, dynamic batching and batch buckets, so a Triton serving infer and
one serving PyTorch differ only in what runs inside execute(). bench/triton_models.py copies it as
model.py with the weights (1/model.pt, a state_dict) and parameters: arch (byom_vs_peers.make_arch's
name), bench_dir (where that module is), torch_mode, precision, batch_buckets.
torch_mode: eager | channels_last | graph (channels_last + one CUDA graph per bucket, captured at load;
the default on GPU) | compile (torch.compile of the channels_last module, mode torch_compile_mode,
default max-autotune-no-cudagraphs, one compile per bucket at load, then a CUDA graph per bucket).
fp16: the module in half, inputs cast on the device, outputs returned as float32 (as infer's fp16).
"""
import json
import os
import sys

import numpy as np
import torch
import triton_python_backend_utils as pb_utils


def _params(config):
    return {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = _params(config)
        sys.path.insert(0, params["bench_dir"])
        from byom_vs_peers import make_arch  # the architectures of the .fb files (one definition)

        kind = args.get("model_instance_kind", "CPU")
        self.device = torch.device(f"cuda:{int(args.get('model_instance_device_id', '0') or 0)}"
                                   if kind == "GPU" else "cpu")
        self.precision = params.get("precision", "fp32")
        self.mode = params.get("torch_mode", "graph" if kind == "GPU" else "channels_last")
        if self.device.type == "cpu" and (self.mode in ("graph", "compile") or self.precision != "fp32"):
            raise pb_utils.TritonModelException(f"torch_mode {self.mode} / {self.precision} need KIND_GPU")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            tf32 = self.precision == "tf32"  # fp32: strict, as infer's fp32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cudnn.benchmark = True
        self.dtype = torch.float16 if self.precision == "fp16" else torch.float32
        self.inputs = [(i["name"], [int(d) for d in i["dims"]]) for i in config["input"]]
        self.outputs = [o["name"] for o in config["output"]]
        self.max_batch = int(config.get("max_batch_size", 0))
        if self.max_batch < 1:
            raise pb_utils.TritonModelException("the PyTorch backend serves batched models (max_batch_size >= 1)")
        buckets = [int(b) for b in params.get("batch_buckets", "").split(",") if b.strip()]
        self.buckets = sorted(set(b for b in buckets if 0 < b <= self.max_batch) | {self.max_batch})

        net = make_arch(params["arch"])
        path = os.path.join(args["model_repository"], args["model_version"], "model.pt")
        net.load_state_dict(torch.load(path, map_location="cpu"))
        net = net.eval().to(self.device, self.dtype)
        if self.mode != "eager":
            net = net.to(memory_format=torch.channels_last)
        if self.mode == "compile":
            net = torch.compile(net, mode=params.get("torch_compile_mode", "max-autotune-no-cudagraphs"),
                                dynamic=False)
        self.net = net
        self.graphs = {}  # bucket -> (graph, static inputs, static outputs)
        with torch.inference_mode():
            for b in reversed(self.buckets):  # compile / capture every bucket now, the largest first
                x = [torch.zeros([b] + dims, device=self.device, dtype=self.dtype) for _, dims in self.inputs]
                if self.mode in ("graph", "compile"):
                    self.graphs[b] = self._capture(x)
                else:
                    self._forward(x)
        pb_utils.Logger.log_info(
            f"torch: '{args['model_name']}' instance {args.get('model_instance_name', '')} on {self.device}, "
            f"{self.precision}, mode {self.mode}, torch {torch.__version__}, batch buckets {self.buckets}")

    def _forward(self, x):
        if self.mode != "eager":
            x = [t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t for t in x]
        y = self.net(*x)
        return list(y) if isinstance(y, (tuple, list)) else [y]

    def _capture(self, x):
        s = torch.cuda.Stream(self.device)
        s.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(s):
            for _ in range(3):  # cuDNN's benchmark and lazy init before the capture
                self._forward(x)
        torch.cuda.current_stream(self.device).wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = self._forward(x)
        return g, x, y

    def _bucket(self, n):
        for b in self.buckets:
            if b >= n:
                return b
        return n

    def _run(self, arrays, n):
        """Runs `n` rows (arrays: one per input, each [n, ...]) padded to a bucket; outputs [n, ...]."""
        b = self._bucket(n)
        with torch.inference_mode():
            if b in self.graphs:
                g, xs, ys = self.graphs[b]
                for x, a in zip(xs, arrays):
                    x[:n].copy_(torch.from_numpy(a), non_blocking=False)
                    if b > n:
                        x[n:].zero_()
                g.replay()
            else:
                xs = [torch.zeros([b] + list(a.shape[1:]), device=self.device, dtype=self.dtype) for a in arrays]
                for x, a in zip(xs, arrays):
                    x[:n].copy_(torch.from_numpy(a))
                ys = self._forward(xs)
            return [y[:n].float().cpu().numpy() for y in ys]

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
                    a = t.as_numpy()
                    if a.dtype != np.float32:
                        raise ValueError(f"input '{name}' is {a.dtype}, expected float32")
                    arrays.append(a)
                rows = {a.shape[0] for a in arrays}
                if len(rows) != 1:
                    raise ValueError(f"inputs have different batch sizes {sorted(rows)}")
                batch.append((i, arrays, rows.pop()))
            except Exception as e:  # noqa: BLE001 - each request gets its own error
                responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
        limit = self.buckets[-1]
        group = []
        for item in batch + [None]:
            if item is not None and (not group or sum(g[2] for g in group) + item[2] <= limit):
                group.append(item)
                continue
            if group:
                self._execute_group(group, responses)
            group = [item] if item is not None else []
        return responses

    def _execute_group(self, group, responses):
        try:
            n = sum(rows for _, _, rows in group)
            arrays = [np.concatenate([g[1][k] for g in group]) if len(group) > 1 else group[0][1][k]
                      for k in range(len(self.inputs))]
            outs = self._run(arrays, n)
        except Exception as e:  # noqa: BLE001 - answered, not raised
            for i, _, _ in group:
                responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
            return
        offset = 0
        for i, _, rows in group:
            tensors = [pb_utils.Tensor(name, np.ascontiguousarray(out[offset:offset + rows]))
                       for name, out in zip(self.outputs, outs)]
            responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
            offset += rows

    def finalize(self):
        self.graphs = {}
        self.net = None
