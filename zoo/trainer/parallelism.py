"""How a run's processes divide its work, resolved once where the run starts (as torchtitan's
ParallelDims): one process or many under torchrun, each rank on its rows of the same global
batch, the model replicated (DDP) or sharded (FSDP2), activations kept or recomputed. Everything
after the start reads this object's properties, never train.parallel again."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from zoo.errors import ConfigError
from zoo.specs.experiment import TrainSpec

CPU = torch.device("cpu")


@dataclass(frozen=True)
class Parallelism:
    rank: int = 0
    world: int = 1
    device: torch.device = CPU
    """Where this rank computes: its GPU (one per rank), or the CPU for every rank (gloo)."""
    sharded: bool = False
    """train.parallel fsdp: each rank holds a shard of the weights and the optimizer's state."""
    checkpointing: str = "none"
    """train.activation_checkpointing: which blocks recompute their activations in the backward."""
    checkpoint_every: int = 2
    """train.activation_checkpointing_k, for `every_k`."""

    @classmethod
    def from_env(cls, device: torch.device, train: TrainSpec | None = None) -> Parallelism:
        """Join the process group torchrun describes in the environment, if there is one: NCCL
        between GPUs, gloo between CPU processes (train.device: cpu on a machine with GPUs too).
        train.parallel fsdp needs a group even of one process (its shards live on a device mesh)."""
        chosen: dict[str, Any] = {"device": device}
        if train is not None:
            chosen.update(sharded=train.sharded, checkpointing=train.activation_checkpointing,
                          checkpoint_every=train.activation_checkpointing_k)
        if chosen.get("sharded"):
            check_fsdp_launch(train)
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1 and not chosen.get("sharded"):
            return cls(**chosen)
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        return cls(rank=dist.get_rank(), world=dist.get_world_size(), **chosen)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def replicated(self) -> bool:
        """Several ranks each hold the whole model, their gradients averaged (DDP)."""
        return self.world > 1 and not self.sharded

    @property
    def name(self) -> str:
        """What train.parallel chose, as a run says it."""
        return "fsdp" if self.sharded else "ddp"

    def memory_shares(self) -> dict[str, Any] | None:
        """What divides or trims one rank's memory (zoo.model.memory.training_memory), where
        anything does beyond data parallelism's rows: sharding, or activation checkpointing."""
        if not self.sharded and self.checkpointing == "none":
            return None
        return {"world": self.world, "sharded": self.sharded, "checkpointing": self.checkpointing,
                "k": self.checkpoint_every}

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
    if train.sharded and train.batch_tokens is None and train.batch_size % world:
        raise ConfigError(f"train.parallel fsdp: train.batch_size {train.batch_size} does not divide over the "
                          f"{world} ranks torchrun started; take a multiple of {world}, or start a number of "
                          "processes that divides it")
