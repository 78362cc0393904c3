"""The device and the autocast precision a run trains with."""

from __future__ import annotations

import os

import torch

from zoo.errors import ConfigError


def processes_here() -> tuple[int, int]:
    """(this process's index on this machine, how many torchrun started here): (0, 1) alone."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))


def pick_device(choice: str) -> torch.device:
    """`train.device` for this process: under torchrun each process on a machine takes the GPU of
    its local rank, so more processes than visible GPUs are refused before any joins the group."""
    if choice == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device is 'cuda' but CUDA is not available; choices: auto, cpu, cuda")
    if choice == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    local_rank, local_world = processes_here()
    gpus = torch.cuda.device_count()
    if local_world > gpus:
        raise ConfigError(f"train.device '{choice}': torchrun started {local_world} processes on this machine but "
                          f"CUDA shows {gpus} GPU{'s' if gpus != 1 else ''}, and each process needs one of its own; "
                          f"start at most {gpus} (--nproc_per_node {gpus}), or set train.device: cpu to train "
                          "every process on the CPU with gloo")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError("train.precision 'fp16' needs CUDA; on CPU choose fp32, bf16 or auto")
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
