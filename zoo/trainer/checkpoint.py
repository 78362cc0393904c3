"""Checkpoints: written atomically from finite weights, read with torch.load(weights_only=True),
and checked before use, so a corrupt or foreign file is one clear error naming it."""

from __future__ import annotations

import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from zoo.errors import CheckpointError, Diverged, describe_validation
from zoo.files import atomic_write, human_bytes, regular_file
from zoo.model.kinds import ZooModel, build
from zoo.records import CHECKPOINT_KEYS, FORMAT, CheckpointProgress, check_format, checkpoint_progress
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.model_spec import ModelSpec
from zoo.tasks.base import Task
from zoo.trainer.guards import finite_weights
from zoo.trainer.parallelism import Parallelism
from zoo.trainer.shard_guard import DIGESTS, verify_shards
from zoo.trainer.sharded_checkpoint import REST, SHARDED_KEYS, gather_whole, is_sharded_checkpoint, save_sharded, set_aside
from zoo.trainer.sharding import is_sharded, whole_weights


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write a checkpoint (the CHECKPOINT_KEYS) in the current format; never half a file."""
    atomic_write(path, lambda handle: torch.save({"format": FORMAT, **state}, handle))


class Checkpointer:
    """The run's checkpoint as the trainer writes it: everything a resume needs to continue bitwise.
    The trainer's pieces give their state as dicts (the step's `state_dict`: weights, optimizer,
    schedule, scaler, generators; early stopping's and the kept weights' under `pieces`), so this
    module knows none of them."""

    def __init__(self, path: Path, data: Callable[[], dict[str, str]], experiment: ExperimentSpec, spec: ModelSpec,
                 task: Task, dist: Parallelism):
        """`data`: the digests of the task's files, asked for when a checkpoint is written (a run of
        replayed batches writes none, and has no files to read)."""
        self.path, self.data, self.experiment, self.spec, self.task, self.dist = path, data, experiment, spec, task, dist

    def save(self, model: ZooModel, training: dict[str, Any], progress: CheckpointProgress, wandb_id: str | None,
             pieces: dict[str, Any] | None = None, path: Path | None = None,
             optimizer: torch.optim.Optimizer | None = None) -> None:
        """Only finite weights are written (checked on every rank), by rank 0, whole or not at all;
        `training`: the step's state_dict (read on rank 0 alone, but on every rank of a sharded run);
        `path`: another file than the run's checkpoint (the best). A sharded model writes the run's
        checkpoint as shards (with `optimizer`, every rank together) and another file whole."""
        if not self.finite(model):
            raise Diverged(f"step {progress.step}: the weights are no longer finite")
        state = {**self.description(), **training, "progress": progress.model_dump(), "wandb_id": wandb_id,
                 **({"pieces": pieces} if pieces else {})}
        if is_sharded(model) and path is None:
            rest = {**state, "data": self.data()} if self.dist.is_main else {}
            save_sharded(self.path, model, optimizer, rest, self.dist.rank, self.dist.world, self.dist.barrier)
            return
        if is_sharded(model):  # the best checkpoint of a sharded run: its weights whole (no optimizer state)
            state["model"] = whole_weights(model)
        if self.dist.is_main:
            save_checkpoint(path or self.path, {**state, "data": self.data()})

    def finite(self, model: ZooModel) -> bool:
        """Whether the weights are finite: each rank's own (the same on every rank but a sharded
        model's), agreed by every rank of a sharded run."""
        finite = finite_weights(model)
        if is_sharded(model):
            finite = self.dist.sum(torch.tensor(float(not finite))).item() == 0
        return finite

    def description(self) -> dict[str, Any]:
        """What a checkpoint says of its run: enough, with weights, for zoo.load and zoo eval."""
        return {"experiment": self.experiment.model_dump(mode="json"), "spec": self.spec.model_dump(),
                "task": self.task.state()}

    def snapshot(self, model: ZooModel, path: Path) -> None:
        """The weights alone, with the run's description (train.average_last's snapshots), by rank 0
        (a sharded model's gathered whole by every rank first)."""
        weights = whole_weights(model) if is_sharded(model) else None  # every rank gathers
        if self.dist.is_main:
            path.parent.mkdir(parents=True, exist_ok=True)
            save_checkpoint(path, {**self.description(), "model": model.state_dict() if weights is None else weights})


MAPPINGS = ("experiment", "spec", "model", "optimizer", "schedule", "rng")
"""The parts of a checkpoint that hold fields by name: anything else there is another file's data."""


def verify_archive(path: Path) -> None:
    """Check every record of the checkpoint's zip archive against its stored CRC-32: torch.load
    does not, so a flipped byte in the weights would load as a NaN or a wrong number."""
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (FileNotFoundError, IsADirectoryError):
        return  # said by read_checkpoint, in its words
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise CheckpointError(f"{path}: not a readable checkpoint (corrupt, cut short or another kind of file: "
                              f"{err})") from None
    if damaged is not None:
        raise CheckpointError(f"{path}: damaged: the bytes of its record {damaged!r} do not match their stored "
                              "checksum (a disk or copy error); it was not used. Restore it from a copy, or start "
                              "the run again") from None


def check_loadable(path: Path) -> None:
    """A checkpoint is a regular file that fits in the host's free memory: /dev/zero, a FIFO or a
    file larger than memory is refused before a byte is read."""
    from zoo.model.size_checks import available_bytes

    try:
        size = regular_file(path, "a checkpoint", CheckpointError).st_size
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path}: is a folder, not a checkpoint") from None
    room = available_bytes("cpu")
    if size > room:
        raise CheckpointError(f"{path}: {human_bytes(size)}, more than the {human_bytes(room)} of memory free here to "
                              "load it")


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu", *,
                    need: tuple[str, ...] = CHECKPOINT_KEYS) -> dict[str, Any]:
    """A checkpoint's state. A missing, unreadable, corrupt, foreign or too new file raises a
    CheckpointError that names it; `need` lists the keys the caller uses."""
    path = Path(path)
    path = set_aside(path) or path  # a crash mid-save left the last one aside: read it where it is
    if is_sharded_checkpoint(path):  # its shards stay where they are: zoo.load or the resumed run reads them
        rest = read_checkpoint(path / REST, map_location, need=tuple(key for key in need if key not in SHARDED_KEYS))
        verify_shards(path, rest.pop(DIGESTS, None), rest.get("world_size"))
        return {**rest, "sharded": path}
    check_loadable(path)
    verify_archive(path)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path}: is a folder, not a checkpoint") from None
    except pickle.UnpicklingError as err:
        lines = [line.strip() for line in str(err).splitlines() if "Unsupported" in line]
        reason = lines[0].removeprefix("WeightsUnpickler error: ").split(" was not")[0] if lines else "unreadable"
        raise CheckpointError(f"{path}: not a readable checkpoint: torch.load(weights_only=True) refused it ({reason}; "
                              "a corrupt file, or one that holds objects other than tensors and plain data)") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as err:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise CheckpointError(f"{path}: not a readable checkpoint (corrupt, cut short or another kind of file: "
                              f"{first})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not a zoo checkpoint: it holds a {type(state).__name__}, not a dict")
    legacy = "format" not in state and "step" in state
    missing = [key for key in need if key not in state and not (legacy and key in ("progress", "scaler", "wandb_id"))]
    if missing:
        shown = ", ".join(sorted(map(str, state))[:8])
        raise CheckpointError(f"{path}: not a zoo checkpoint: it lacks {', '.join(missing)} (it holds {shown})")
    malformed = [f"its {key!r} is a {type(state[key]).__name__}, not a mapping" for key in need
                 if key in MAPPINGS and key in state and not isinstance(state[key], dict)]
    if malformed:
        raise CheckpointError(f"{path}: not a zoo checkpoint: {'; '.join(malformed)}")
    try:
        check_format(int(state.get("format", 0)), "the checkpoint")
        if "progress" in need:
            state["progress"] = checkpoint_progress(state)
    except (ValueError, ValidationError, KeyError) as err:
        text = describe_validation(err) if isinstance(err, ValidationError) else str(err)
        raise CheckpointError(f"{path}: {text}") from None
    return state


def load(path: str | Path, map_location: str | torch.device = "cpu") -> tuple[ZooModel, ModelSpec]:
    """The trained model (in eval mode) and its spec from a checkpoint written by the trainer."""
    state = read_checkpoint(path, map_location, need=("spec", "model"))
    try:
        spec = ModelSpec.model_validate(state["spec"])
    except ValidationError as err:
        raise CheckpointError(f"{path}: its model spec is not valid here: {describe_validation(err)}") from None
    model = build(spec, seed=0)
    try:
        if "sharded" in state:
            gather_whole(state["sharded"], model)
        else:
            model.load_state_dict(state["model"])
    except (RuntimeError, TypeError, AttributeError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        detail = " ".join(line.strip() for line in str(err).splitlines()[1:3])
        raise CheckpointError(f"{path}: its weights do not fit its spec {spec.name}: {first} {detail}".strip()) from None
    return model.to(map_location).eval(), spec
