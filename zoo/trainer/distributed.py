"""One process or many under torchrun: each rank trains on its rows of the same global batch."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world: int = 1

    @classmethod
    def from_env(cls, device: torch.device) -> Distributed:
        """Join the process group torchrun describes in the environment, if there is one: NCCL
        between GPUs, gloo between CPU processes (train.device: cpu on a machine with GPUs too)."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        return cls(rank=dist.get_rank(), world=dist.get_world_size())

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, rows: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a global batch: rank, rank + world, ..."""
        return rows[self.rank :: self.world]

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            value = value.clone()
            dist.all_reduce(value)
        return value

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def close(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()
