"""Checkpoints: written atomically, loadable with torch.load(weights_only=True)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from zoo.model import EncoderDecoder
from zoo.spec import ModelSpec


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write to a temporary file beside `path`, then rename over it: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    return torch.load(Path(path), map_location=map_location, weights_only=True)


def load(path: str | Path, map_location: str | torch.device = "cpu") -> tuple[EncoderDecoder, ModelSpec]:
    """The trained model (in eval mode) and its spec from a checkpoint written by the trainer."""
    state = read_checkpoint(path, map_location)
    spec = ModelSpec.model_validate(state["spec"])
    model = EncoderDecoder(spec, seed=0)
    model.load_state_dict(state["model"])
    return model.to(map_location).eval(), spec
