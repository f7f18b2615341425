"""infer.onnx: ONNX models -> infer models, through the same importer as the onnx2fb tool."""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Union

from . import _infer
from ._infer import Model

PathLike = Union[str, "os.PathLike[str]"]


def convert(src: PathLike, dst: Optional[PathLike] = None, fp16: bool = False,
            metadata: Optional[Dict[str, str]] = None, name: str = "") -> Model:
    """Converts the ONNX file `src`; writes the .fb to `dst` when given and returns the Model.
    metadata adds key/values (after the ONNX metadata_props, so they win); fp16 stores weights in half
    precision. An unsupported op or a malformed file is an infer.Error (one line)."""
    return _infer._onnx_convert(os.fspath(src), os.fspath(dst) if dst is not None else "", fp16,
                                dict(metadata or {}), name)


def supported_ops() -> List[str]:
    """The ONNX op types the importer understands, sorted."""
    return _infer._onnx_supported_ops()
