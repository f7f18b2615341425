"""infer.zoo: docs/design.md's architectures with seeded weights, through the same builder as model-zoo."""
from __future__ import annotations

import os
from typing import List, Optional, Union

from . import _infer
from ._infer import Model


def build(name: str, seed: int = 1, image_size: int = 0, fp16: bool = False,
          path: Optional[Union[str, "os.PathLike[str]"]] = None) -> Model:
    """Builds zoo model `name` (see names()) with weights seeded by `seed` (byte-identical to
    `model-zoo --seed`); image_size makes a small classifier variant; writes the .fb to `path` when
    given. An unknown name is an infer.Error."""
    if seed < 0:
        raise _infer.Error(f"zoo.build: seed must be >= 0, got {seed}")
    return _infer._zoo_build(name, seed, image_size, fp16, os.fspath(path) if path is not None else "")


def names() -> List[str]:
    """The zoo's model names, in docs/design.md order."""
    return _infer._zoo_names()
