"""Replays: the training batches of a recorded cell's early window, as token ids, so that its first
steps can be trained again where its corpus is not (CI holds the published Multi30k ledgers so).

    python -m zoo.sweep.replay LEDGER OUT.pt.gz [CELL] [--set task.data_dir=...]

trains the cell's early window on its corpus (its sensitive cell by default), recording every batch
the trainer asks its task for, and writes them only if the losses it logged match the record bit for
bit. A replay holds ids and the vocabularies' sizes, never their tokens: no text of the corpus.
`zoo reproduce LEDGER --early --replay FILE` then trains the window from it.
"""

from __future__ import annotations

import argparse
import gzip
import io
import pickle
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from zoo.errors import ConfigError, ZooError
from zoo.files import read_bounded
from zoo.specs.registries import registry
from zoo.tasks import Task, Vocabulary, build_task, task_params
from zoo.tasks.summary import vocabulary_sizes

FORMAT = 1
REPLAY_BYTES = 64 << 20
"""The most a replay file may hold, compressed and inflated (the published ones hold about 1 MB)."""
IDENTITY = ("data_dir", "tokenizer_dir")
"""Task fields that say where the data is, not what it is: a replay holds whatever they were."""


def task_identity(fields: dict[str, Any]) -> dict[str, Any]:
    """The task's fields that say what it is, each only away from its default (so a field added to
    the task since a replay was made, at its default, is the same task)."""
    params = registry("task").get(fields["name"]).Params.model_fields
    return {key: value for key, value in fields.items()
            if key not in IDENTITY and not (key in params and params[key].default == value)}


def ids_only(size: int) -> Vocabulary:
    """A vocabulary of `size` ids whose tokens stand for nothing: a replay holds no text."""
    return Vocabulary([f"#{i}" for i in range(3, size)])


class Replayed(Task):
    """The recorded task's batches, asked for by (step, rows) as the trainer asked for them then;
    it holds no held-out split, so a window that evaluates cannot be replayed."""

    def __init__(self, params, seed: int, replay: dict[str, Any]):
        Task.__init__(self, params, seed)  # not the recorded task's own, which reads its corpus
        self.src_vocab = ids_only(replay["src_size"])
        self.tgt_vocab = self.src_vocab if replay["shared"] else ids_only(replay["tgt_size"])
        self.batches, self.longest = replay["batches"], tuple(replay["longest"])

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        key = f"{step}:{batch_size}"
        if key not in self.batches:
            raise ConfigError(f"the replay holds no batch of {batch_size} rows for step {step}: it holds the early "
                              "window it was recorded for")
        src, tgt = self.batches[key]
        return src.long(), tgt.long()

    def longest_training(self) -> tuple[int, int]:
        return self.longest

    def summary(self, eval_size: int) -> dict[str, float | int]:
        """A replay's data is its recorded batches: the vocabularies' sizes and how many batches."""
        return {**vocabulary_sizes(self.src_vocab, self.tgt_vocab), "replayed_batches": len(self.batches)}

    @property
    def eval_splits(self) -> tuple[str, ...]:
        return ()

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        return []

    def references(self, size: int, split: str = "valid") -> None:
        return None


def replayed_task(path: str | Path, fields: dict[str, Any], seed: int) -> Task:
    """The task of `fields` (seed `seed`) from a replay recorded for the same task and seed."""
    replay = read_replay(path)
    if task_identity(fields) != task_identity(replay["task"]) or seed != replay["seed"]:
        raise ConfigError(f"{path}: a replay of task {replay['task']} with seed {replay['seed']}, not of this cell's "
                          f"task {task_identity(fields)} with seed {seed}")
    cls, params = task_params(fields)
    replayed = type(f"Replayed{cls.__name__}", (Replayed, cls), {})  # the task's own kinds, shape and metrics
    return replayed(params, seed, replay)


def read_replay(path: str | Path) -> dict[str, Any]:
    try:
        data = read_bounded(path, "a replay", REPLAY_BYTES)
    except (FileNotFoundError, IsADirectoryError):
        raise ConfigError(f"{path}: no replay file there") from None
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
            inflated = handle.read(REPLAY_BYTES + 1)
        replay = torch.load(io.BytesIO(inflated[:REPLAY_BYTES]), weights_only=True)
    except (OSError, EOFError, zlib.error, RuntimeError, ValueError, pickle.UnpicklingError) as err:
        raise ConfigError(f"{path}: not a replay the zoo wrote ({err})") from None
    if len(inflated) > REPLAY_BYTES or not isinstance(replay, dict) or replay.get("format") != FORMAT:
        raise ConfigError(f"{path}: not a replay of format {FORMAT} the zoo wrote")
    return replay


class Recording:
    """Wraps a built task's train_batch, keeping every batch asked for."""

    def __init__(self, task: Task):
        self.task, self.batches = task, {}
        self.asked = task.train_batch
        task.train_batch = self  # the trainer asks the task it was given

    def __call__(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        src, tgt = self.asked(step, batch_size)
        self.batches[f"{step}:{batch_size}"] = (src.to(torch.int32), tgt.to(torch.int32))
        return src, tgt

    def replay(self, fields: dict[str, Any], seed: int) -> dict[str, Any]:
        task = self.task
        return {"format": FORMAT, "task": task_identity(fields), "seed": seed, "src_size": len(task.src_vocab),
                "tgt_size": len(task.tgt_vocab), "shared": task.src_vocab is task.tgt_vocab,
                "longest": list(task.longest_training()), "batches": self.batches}


def record(experiment: dict[str, Any], until: int, out: Path) -> list[dict[str, float]]:
    """Train `experiment` to step `until` on its corpus, write the batches it took to `out`, and
    give the losses it logged."""
    from zoo.specs.experiment import validate_experiment
    from zoo.trainer.loop import Trainer

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
    from zoo.sweep.reproduce import early_differences, early_window, recorded_cells, sensitive_cell
    from zoo.sweep.spec import cell_experiment

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
