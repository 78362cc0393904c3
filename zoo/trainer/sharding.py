"""train.parallel: fsdp: torch's FSDP2 (fully_shard) over the ranks torchrun starts. Each distinct
block of each stack is a unit of its own, gathered just before it computes and freed after; the
rest (embeddings, the output projection and whatever is tied to them, final norms) is the model's
root unit. Weights, gradients and the optimizer's state live as shards, a 1/world of each."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from zoo.errors import ConfigError
from zoo.specs.registries import AXES, registry
from zoo.trainer.recompute import stack_blocks

warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor")
"""The zoo never changes a model's output in place (its losses are new tensors), which is what the
warning is about; it would otherwise be printed by every rank at the first step."""


def is_sharded(model: nn.Module) -> bool:
    """Whether fully_shard made the model an FSDP module: never where FSDP was not imported, as it
    is only by `shard` (a plain run then saves the half second torch.distributed.fsdp takes)."""
    fsdp = sys.modules.get("torch.distributed.fsdp")
    return fsdp is not None and isinstance(model, fsdp.FSDPModule)


def units(model: nn.Module) -> list[nn.Module]:
    """The blocks that are units of their own: each distinct block of a stack of more than one."""
    return [block for blocks in stack_blocks(model) if len(blocks) > 1 for block in blocks]


def shared_across_units(model: nn.Module) -> str | None:
    """A parameter that two units would hold (a block's weight also used outside it) cannot be
    sharded one unit at a time: its two names, or None."""
    own = {id(block) for block in units(model)}
    prefixes = [f"{name}." for name, module in model.named_modules(remove_duplicate=False) if id(module) in own]
    seen: dict[int, tuple[str, str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        unit = next((prefix for prefix in prefixes if name.startswith(prefix)), "")
        first, first_unit = seen.setdefault(id(parameter), (name, unit))
        if first_unit != unit:
            return f"{first} (also {name})"
    return None


def owner_part(model: nn.Module, parameter: str) -> str:
    """The registered part a parameter belongs to, as its axis names it (norm rezero), else its module's class."""
    module = model.get_submodule(parameter.rpartition(".")[0])
    for axis in AXES:
        names = [name for name in registry(axis).names() if type(module) is registry(axis).get(name)]
        if names:
            return f"{axis} {names[0]}"
    return type(module).__name__


def shard(model: nn.Module, amp_dtype: torch.dtype | None, device: torch.device | None = None) -> nn.Module:
    """fully_shard each distinct block of every stack, then the model; under bf16 or fp16 the
    gathered weights compute in that type and gradients are reduced in float32. A stack that
    shares one block over its depth (share_layers) keeps it in the root unit: a unit called again
    before its backward would be gathered and freed once per use."""
    scalar = next((name for name, parameter in model.named_parameters() if parameter.dim() == 0), None)
    if scalar is not None:
        raise ConfigError(f"train.parallel fsdp: the model holds a scalar parameter ({scalar}, of "
                          f"{owner_part(model, scalar)}), and torch's fully_shard shards only tensors of one dimension "
                          "or more; use train.parallel: ddp")
    shared = shared_across_units(model)
    if shared is not None:
        raise ConfigError(f"train.parallel fsdp: the parameter {shared} is used in more than one of the units FSDP "
                          "shards a block at a time, so no one rank could gather it whole; use train.parallel: ddp")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=amp_dtype, reduce_dtype=torch.float32) if amp_dtype else MixedPrecisionPolicy()
    # the mesh on the run's device: left to itself, fully_shard takes CUDA wherever there is one,
    # and would move a run of train.device cpu onto the GPU
    mesh = init_device_mesh((device or torch.device("cpu")).type, (torch.distributed.get_world_size(),))
    for block in units(model):
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


@contextmanager
def gathered(model: nn.Module) -> Iterator[None]:
    """The root unit's weights whole while the block is inside (every rank must enter it): decoding
    calls the embeddings and the output projection outside the model's forward, which gathers them.
    The blocks gather themselves as they compute. Nothing happens for a model that is not sharded."""
    if not is_sharded(model):
        yield
        return
    model.unshard()
    try:
        yield
    finally:
        model.reshard()


def whole_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights gathered whole onto the host, by every rank together (rank 0 keeps them;
    the others get an empty dict): a sharded run's best checkpoint and averaging snapshots."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
