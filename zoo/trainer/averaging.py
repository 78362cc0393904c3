"""Checkpoint averaging (fairseq's average_checkpoints): the element-wise mean of the weights of
several checkpoints of one model, often better than the last alone (Vaswani et al. 2017 average
the last 5 or 20). `zoo average` and `train.average_last` both write it as a checkpoint that
`zoo eval` and `zoo.load` read."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from zoo.errors import CheckpointError
from zoo.trainer.checkpoint import read_checkpoint, save_checkpoint

SNAPSHOTS = "averaging"
"""The folder of a run where train.average_last keeps the weights of its last checkpoints."""
KEPT = ("experiment", "spec", "task")
"""What an averaged checkpoint takes from the last of its sources beside the weights: enough for
zoo.load and zoo eval, nothing to resume from."""


def averaged_weights(paths: Sequence[str | Path], least: int = 2) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The mean of the checkpoints' weights (in float64, stored in each weight's dtype; integer
    buffers are the last checkpoint's) and the last checkpoint's state, for its experiment and task.
    `least` is 1 only for a run that stopped early with one snapshot: its "average" is that one."""
    if len(paths) < least:
        raise CheckpointError(f"averaging needs {'two checkpoints' if least == 2 else 'a checkpoint'} or more; "
                              f"got {len(paths)}")
    total: dict[str, torch.Tensor] = {}
    last: dict[str, Any] = {}
    for i, path in enumerate(paths):
        state = read_checkpoint(path, need=("spec", "model"))
        if i and state["spec"] != last["spec"]:
            raise CheckpointError(f"{path}: another model than {paths[0]}'s; only checkpoints of one model average")
        if i and state["model"].keys() != total.keys():
            raise CheckpointError(f"{path}: its weights are not named as {paths[0]}'s")
        for name, tensor in state["model"].items():
            if not tensor.is_floating_point():
                total[name] = tensor
            else:
                total[name] = tensor.double() if i == 0 else total[name] + tensor.double()
        last = state
    mean = {name: (value / len(paths)).to(last["model"][name].dtype) if value.is_floating_point() else value
            for name, value in total.items()}
    return mean, last


def checkpoints_to_average(paths: Sequence[str | Path], last: int | None = None) -> list[Path]:
    """The checkpoint files named, a run folder standing for the snapshots train.average_last kept
    in it (oldest first); with `last`, the last that many of them all."""
    found: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            found.append(path)
            continue
        kept = sorted((path / SNAPSHOTS).glob("step_*.pt"))
        if not kept:
            raise CheckpointError(f"{path}: a folder without snapshots to average (averaging/step_*.pt); a run keeps "
                                  "them with train.average_last=N, or give checkpoint files")
        found += kept
    return found[-last:] if last else found


def write_average(paths: Sequence[str | Path], output: str | Path, least: int = 2) -> Path:
    """Average the checkpoints into `output`; the sources are listed in it (`averaged_from`). An
    output that is one of the sources is refused before anything is read: it would replace it."""
    output = Path(output)
    source = next((Path(path) for path in paths if Path(path).resolve() == output.resolve()), None)
    if source is not None:
        raise CheckpointError(f"-o {output}: is one of the checkpoints averaged ({source}), which the average would "
                              "replace; write the average elsewhere")
    weights, last = averaged_weights(paths, least)
    output.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(output, {**{key: last[key] for key in KEPT if key in last}, "model": weights,
                             "averaged_from": [str(path) for path in paths]})
    return output
