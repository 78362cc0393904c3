"""The device and the autocast precision a run trains with."""

from __future__ import annotations

import torch

from zoo.errors import ConfigError
from zoo.trainer.distributed import Distributed


def pick_device(choice: str, dist: Distributed) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device is 'cuda' but CUDA is not available; choices: auto, cpu, cuda")
    if choice == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    torch.cuda.set_device(dist.local_rank)
    return torch.device("cuda", dist.local_rank)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError("train.precision 'fp16' needs CUDA; on CPU choose fp32, bf16 or auto")
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
