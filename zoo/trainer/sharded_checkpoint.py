"""Sharded checkpoints (train.parallel fsdp), through torch.distributed.checkpoint (DCP): every rank
writes its shards of the weights and of the optimizer's state into one folder, `checkpoint.dcp`,
and rank 0 adds `zoo.pt`, the rest of a checkpoint (its description, schedule, generators, progress,
pieces) with the world size that wrote it. DCP reads shards into any world size, one process
included, so a sharded checkpoint resumes at another world size and is gathered whole on demand.
DCP is imported where it is used: at import it would cost every run's start half a second."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from zoo.errors import ConfigError
from zoo.files import atomic_write
from zoo.records import FORMAT
from zoo.trainer.shard_guard import DIGESTS, METADATA, loading, safe_reader, shard_digests

REST = "zoo.pt"
"""The file of a sharded checkpoint that holds everything but the shards."""

SHARDED_KEYS = ("model", "optimizer")
"""What the shards hold; the rest of CHECKPOINT_KEYS is in REST."""


def is_sharded_checkpoint(path: Path) -> bool:
    """A folder of shards: DCP's index, or the rest of a zoo checkpoint (so that a missing index
    is said as such, not as "a folder")."""
    return path.is_dir() and ((path / METADATA).is_file() or (path / REST).is_file())


def staging(path: Path) -> Path:
    """Where the next checkpoint is written, beside the last, before it takes the last's place."""
    return path.with_name(f".{path.name}.staging")


def save_sharded(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, rest: dict[str, Any],
                 rank: int, world: int, barrier) -> None:
    """Every rank writes its shards into a staging folder; rank 0 writes the rest and swaps the
    folder in for the last checkpoint, so a crash at any point leaves a whole checkpoint."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    new = staging(path)
    if rank == 0:
        shutil.rmtree(new, ignore_errors=True)
        new.mkdir(parents=True)
    barrier()
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=new)
    if rank == 0:  # every rank's shards are whole once dcp.save returns: its index is written last
        rest = {"format": FORMAT, **rest, "world_size": world, DIGESTS: shard_digests(new, leave_out=(REST,))}
        atomic_write(new / REST, lambda handle: torch.save(rest, handle))
        swap_in(new, path)
    barrier()


def swap_in(new: Path, path: Path) -> None:
    """Replace the folder `path` by `new`: the old one is renamed aside first and removed last;
    recover() puts it back if a crash came between the two renames."""
    old = path.with_name(f".{path.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        os.replace(path, old)
    os.replace(new, path)
    shutil.rmtree(old, ignore_errors=True)


def recover(path: Path) -> None:
    """A crash between swap_in's renames left the last checkpoint aside: put it back. A staging
    folder left by a crash is half written and goes."""
    old = set_aside(path)
    if old is not None:
        os.replace(old, path)
    shutil.rmtree(staging(path), ignore_errors=True)


def set_aside(path: Path) -> Path | None:
    """The last checkpoint, where a crash between swap_in's renames left it aside and `path` is
    gone: what a reader (zoo.load, zoo consolidate) reads in its place, and --resume recovers."""
    old = path.with_name(f".{path.name}.old")
    return old if not path.exists() and is_sharded_checkpoint(old) else None


def load_sharded(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Read the shards this rank's model and optimizer hold, whatever world size wrote them."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optimizer_state}
    with loading(path):
        dcp.load(state, storage_reader=safe_reader(path), checkpoint_id=path)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])


def gather_whole(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> None:
    """Load every shard into a model (and an optimizer) that is not sharded, in one process: a
    sharded checkpoint consolidated (zoo.load, zoo consolidate)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer or [])
    state = {"model": model_state, **({"optimizer": optimizer_state} if optimizer is not None else {})}
    with warnings.catch_warnings():  # that one process reads every shard is the point here
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        with loading(path):
            dcp.load(state, storage_reader=safe_reader(path), checkpoint_id=path, no_dist=True)
    set_state_dict(model, optimizer or [], model_state_dict=state["model"],
                   optim_state_dict=state.get("optimizer", {}))


def check_world_size(saved: dict[str, Any] | None, world: int, reshard: bool) -> None:
    """A sharded checkpoint resumes bitwise at the world size that wrote it; at another, only on
    purpose (--reshard): the ranks then add their gradients in another order (float rounding), and
    a token budget per rank (train.batch_tokens) makes other batches."""
    if saved is None or "sharded" not in saved or reshard:
        return
    wrote = int(saved.get("world_size", world))
    if wrote != world:
        raise ConfigError(f"{saved['sharded']}: written by {wrote} ranks, and this run has {world}: resume with "
                          f"--resume --reshard to read its shards at {world} (it then continues within float "
                          f"rounding, not bitwise), or start {wrote} processes")
