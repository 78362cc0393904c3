"""One process or many under torchrun: each rank trains on its rows of the same global batch."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from zoo.errors import ConfigError
from zoo.specs.experiment import TrainSpec


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world: int = 1

    @classmethod
    def from_env(cls, device: torch.device, train: TrainSpec | None = None) -> Distributed:
        """Join the process group torchrun describes in the environment, if there is one: NCCL
        between GPUs, gloo between CPU processes (train.device: cpu on a machine with GPUs too).
        train.parallel fsdp needs a group even of one process (its shards live on a device mesh)."""
        fsdp = train is not None and train.parallel == "fsdp"
        if fsdp:
            check_fsdp_launch(train)
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1 and not fsdp:
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
        """Leave the group from_env joined: any under torchrun (fsdp joins one of a single process too)."""
        if "WORLD_SIZE" in os.environ and dist.is_initialized():
            dist.destroy_process_group()


def check_fsdp_launch(train: TrainSpec) -> None:
    """train.parallel fsdp shards over the processes torchrun starts: refused, before any process
    joins a group, where there is no torchrun, or where the global batch's rows do not split evenly
    over the ranks (each rank's share of memory is then the same)."""
    if "WORLD_SIZE" not in os.environ:
        raise ConfigError("train.parallel fsdp: shards the model over the processes torchrun starts, and this is one "
                          "process without it; start it as `torchrun --nproc_per_node N -m zoo.cli train ...` (N 1 "
                          "too), or set train.parallel: ddp")
    check_fsdp_world(train, int(os.environ["WORLD_SIZE"]))


def check_fsdp_world(train: TrainSpec, world: int) -> None:
    """The global batch's rows split evenly over `world` ranks under fsdp (a sweep asks before its
    cells start)."""
    if train.parallel == "fsdp" and train.batch_tokens is None and train.batch_size % world:
        raise ConfigError(f"train.parallel fsdp: train.batch_size {train.batch_size} does not divide over the "
                          f"{world} ranks torchrun started; take a multiple of {world}, or start a number of "
                          "processes that divides it")
