"""infer: a C++17/CUDA inference engine for CNNs and GAN generators, from Python.

    import infer
    model = infer.load("models/lenet5_fashion.fb")
    session = infer.Session(model)
    (probs,) = session.run(x)            # x: NumPy array, PyTorch tensor, anything array-like, any batch

Thread safety: a Model is immutable and may be shared by any number of threads and sessions. A
Session runs one call at a time: calls from several threads on one session take turns (a lock), so
for parallel work create one Session per thread (from the same Model). The GIL is released while the
engine runs, so sessions in different threads run at the same time.
"""
from __future__ import annotations

import json as _json
import os as _os
from typing import Any, Dict, Iterator, List, Optional, Union

from . import _infer
from ._infer import DeviceArray, Error, Model, TensorInfo, cuda_available

__version__: str = _infer.__version__
__all__ = ["DeviceArray", "Error", "Model", "TensorInfo", "Session", "Profile", "load", "load_image", "save_grid",
           "cuda_available", "onnx", "zoo"]


def load(path: Union[str, "_os.PathLike[str]"]) -> Model:
    """Loads (mmaps, verifies and validates) a .fb model file; infer.Error if anything is wrong."""
    return Model.load(_os.fspath(path))


def load_image(path: Union[str, "_os.PathLike[str]"], model: Model) -> Any:
    """An image file (PNG/JPEG/BMP) as the model's input [1, C, H, W] float32 array: converted to the
    input's channels, resized to its size and normalised by its metadata (input.mean, input.std),
    exactly as `infer --input image.png` does."""
    return _infer.load_image(_os.fspath(path), model)


def save_grid(path: Union[str, "_os.PathLike[str]"], images: Any, lo: float = -1.0,
              hi: float = 1.0) -> None:
    """Writes a batch [N, 1 or 3, H, W] as one PNG grid (values lo..hi -> 0..255), as `infer --out`
    writes a generator's images; pass a generator's model.output_range as lo, hi."""
    _infer.save_grid(_os.fspath(path), images, lo, hi)


class Profile:
    """A profiling run: the per-node rows (a list of dicts, the CLI's --profile-json "nodes"), the
    totals as attributes, and the same report as JSON (to_json), a Chrome trace (trace) or the CLI's
    table (table). Indexing and iterating go over the rows."""

    def __init__(self, json_text: str, trace_text: str, table_text: str) -> None:
        self._json, self._trace, self._table = json_text, trace_text, table_text
        data = _json.loads(json_text)
        self.rows: List[Dict[str, Any]] = data["nodes"]
        self.model: str = data["model"]
        self.backend: str = data["backend"]
        self.device: str = data["device"]
        self.precision: str = data["precision"]
        self.batch: int = data["batch"]
        self.runs: int = data["runs"]
        self.total_ms: float = data["total_ms"]
        self.passes: List[str] = data["passes"]
        self.memory: Dict[str, int] = data["memory"]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> Dict[str, Any]:
        return self.rows[i]

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        return iter(self.rows)

    def __repr__(self) -> str:
        return (f"<infer.Profile '{self.model}' on {self.backend}: {len(self.rows)} nodes, "
                f"median run {self.total_ms:.3f} ms>")

    def to_json(self) -> str:
        """The whole profile as the CLI's --profile-json writes it."""
        return self._json

    def table(self) -> str:
        """The CLI's --profile table."""
        return self._table

    def trace(self, path: Union[str, "_os.PathLike[str]"]) -> None:
        """Writes a Chrome trace (traceEvents) for ui.perfetto.dev / chrome://tracing."""
        _infer._write_text(_os.fspath(path), self._trace)


class Session(_infer.Session):
    """A model bound to a backend, a precision and a batch size.

    Session(model, backend="auto", precision="fp32", batch=None, autotune=False, kernels={}, passes={},
            extra_outputs=[], device=None, plan_cache=None)
    model: a Model or a path. backend: "auto" | "cpu" | "cuda" | "reference". precision: "fp32" |
    "tf32" | "fp16" (cuda only). batch: the batch the session is planned at; None: the model's own (the
    batch it was built at, else 1). kernels: {op: variant} forces kernel variants. passes: {name: False}
    switches graph passes off. extra_outputs names intermediate values (model.nodes' outputs) to return
    after the model's outputs, e.g. a hidden layer as features. device: the GPU a cuda session runs on
    (None: the current one, 0 unless chosen otherwise; cpu: None or 0). autotune: choose variants by
    timing (kept only where the whole forward gets faster). plan_cache: a JSON file of autotuned plans,
    used when it holds this graph's (nothing timed), else added to by an autotuned session (--plan-cache).
    Creation plans everything; run() only executes.

    The batch follows the input: run() and profile() take host inputs of any batch the model allows
    (the session's shapes with another leading size); the first call at a batch plans it once and
    keeps that plan. Device (DLPack) inputs need the session's own batch.

    Thread safety: calls on one session take turns (a lock); use one Session per thread for parallel
    runs (sharing one Model is fine). The GIL is released while the engine works.
    """

    def __init__(self, model: Union[Model, str, "_os.PathLike[str]"], backend: str = "auto",
                 precision: str = "fp32", batch: Optional[int] = None, autotune: bool = False,
                 kernels: Optional[Dict[str, str]] = None,
                 passes: Optional[Dict[str, bool]] = None,
                 extra_outputs: Optional[List[str]] = None, device: Optional[int] = None,
                 plan_cache: Optional[str] = None) -> None:
        if not isinstance(model, Model):
            model = load(model)
        super().__init__(model, backend, precision, 0 if batch is None else batch, autotune,
                         kernels or {}, passes or {}, list(extra_outputs or []),
                         -1 if device is None else device, "" if plan_cache is None else str(plan_cache))

    def run(self, *inputs: Any, device_outputs: bool = False, out: Optional[List[Any]] = None) -> List[Any]:
        """Runs the model; returns the outputs as a list of NumPy float32 arrays, in output order.

        Inputs: positional (session.run(x) / session.run(x, y)), one list or tuple of them, or one dict
        {input name: value}. Each value is a NumPy array or anything with the buffer protocol,
        __array__ or __dlpack__ (a PyTorch tensor), of the session's input shape, or all of them at
        another batch (the outputs then have that batch). Host data of
        other real dtypes is converted to float32, and non-contiguous host data is copied in order.

        On a cuda session, inputs may instead all be CUDA tensors (float32, C-contiguous, on the
        session's GPU): they are read in place, no host copy. With device_outputs=True the outputs
        stay on the GPU as DeviceArray objects (torch.from_dlpack takes them without a copy).

        out: a list of float32 C-contiguous writeable NumPy arrays, one per output with the shape this
        run returns (host inputs only): written in place and returned, so a caller that runs large
        batches over and over (a server) reuses its buffers instead of allocating new ones each run.
        Host inputs are read in place either way (no copy when they are float32 C-contiguous).
        """
        if out is not None:
            if device_outputs:
                raise Error("run: out= and device_outputs=True exclude each other")
            return self._run_into(list(out), *inputs)
        if device_outputs:
            return self._run_device(*inputs)
        return self._run(*inputs)

    def __call__(self, *inputs: Any) -> Any:
        """session(x): like run(), but a model with one output returns that array, not a list."""
        out = self._run(*inputs)
        return out[0] if len(out) == 1 else tuple(out)

    def profile(self, *inputs: Any, runs: int = 10) -> Profile:
        """Runs `runs` times (after a warm-up) timing every node; without inputs, the seeded random
        ones the CLI uses (seed 1). Returns a Profile (rows as dicts, to_json(), trace(path))."""
        return Profile(*self._profile(runs, *inputs))

    def __repr__(self) -> str:
        return (f"<infer.Session '{self.model.name}' on {self.backend} ({self.precision}), "
                f"batch {self.batch}>")


from . import onnx, zoo  # noqa: E402  (submodules use the names above)
