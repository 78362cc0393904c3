"""Recording a replay (zoo.sweep.replay reads one):

    python -m zoo.sweep.record_replay LEDGER OUT.pt.gz [CELL] [--set task.data_dir=...]

trains the cell's early window on its corpus (its sensitive cell by default), recording every batch
the trainer asks its task for, and writes them only if the losses it logged match the record bit for
bit. Apart from the reader, so that `zoo reproduce` (which this module uses) reads replays without
importing what records them.
"""

from __future__ import annotations

import argparse
import gzip
import io
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from zoo.errors import ConfigError, ZooError
from zoo.specs.experiment import validate_experiment
from zoo.sweep.replay import FORMAT, task_identity
from zoo.sweep.reproduce import early_differences, early_window, recorded_cells, sensitive_cell
from zoo.sweep.spec import cell_experiment
from zoo.tasks import Task, build_task
from zoo.tasks.packing import offsets_of
from zoo.trainer.loop import Trainer


class Recording:
    """Wraps a built task's train_batch, keeping every batch asked for."""

    def __init__(self, task: Task):
        self.task, self.batches = task, {}
        self.asked = task.train_batch
        task.train_batch = self  # the trainer asks the task it was given

    def __call__(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        rows = self.asked(step, batch_size)
        kept = [*rows] if offsets_of(rows) is None else [*rows, offsets_of(rows)]  # offsets of packed rows too
        self.batches[f"{step}:{batch_size}"] = tuple(t.to(torch.int32) for t in kept)
        return rows

    def replay(self, fields: dict[str, Any], seed: int) -> dict[str, Any]:
        task = self.task
        return {"format": FORMAT, "task": task_identity(fields), "seed": seed, "src_size": len(task.src_vocab),
                "tgt_size": len(task.tgt_vocab), "shared": task.src_vocab is task.tgt_vocab,
                "longest": list(task.longest_training()), "longest_document": task.longest_document(),
                "batches": self.batches}


def record(experiment: dict[str, Any], until: int, out: Path) -> list[dict[str, float]]:
    """Train `experiment` to step `until` on its corpus, write the batches it took to `out`, and
    give the losses it logged."""
    spec = validate_experiment(experiment)
    if spec.train.eval_every <= until:
        raise ConfigError(f"train.eval_every {spec.train.eval_every}: the window to step {until} evaluates, and a "
                          "replay holds no held-out split")
    task = build_task(spec.task, spec.train.seed)
    recording = Recording(task)
    history = Trainer(spec, task=task).first_steps(until)
    buffer = io.BytesIO()
    torch.save(recording.replay(spec.task, spec.train.seed), buffer)
    out.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0))
    return history


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ledger", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("cell", nargs="?")
    parser.add_argument("--set", action="extend", nargs="+", default=[], metavar="task.KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        sweep, base, finished = recorded_cells(args.ledger, args.set)
        name = args.cell or sensitive_cell(args.ledger)
        cell, recorded = finished[name]
        experiment = cell_experiment(sweep, base, cell).model_dump(mode="json")
        window = early_window(recorded.history)
        with tempfile.TemporaryDirectory(prefix="zoo-replay-") as scratch:
            experiment["train"] |= {"out_dir": scratch, "device": "cpu"}
            experiment["wandb"] |= {"mode": "disabled", "dir": scratch}
            torch.set_num_threads(recorded.threads or torch.get_num_threads())
            history = record(experiment, window, args.out)
        differences = early_differences(recorded.history, history, window)
        if differences:
            args.out.unlink()
            raise ZooError(f"{name}: its early window does not match its record here, so no replay was written: "
                           + "; ".join(differences))
    except ZooError as err:
        sys.exit(f"zoo: {err}")
    print(f"{args.out}: {name}, the batches of steps 1 to {window}, its losses matching the record bit for bit")


if __name__ == "__main__":
    main()
