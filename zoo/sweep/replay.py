"""Replays: the training batches of a recorded cell's early window, as token ids, so that its first
steps can be trained again where its corpus is not (CI holds the published Multi30k ledgers so).
This module reads a replay into a task; zoo.sweep.record_replay writes one. A replay holds ids
and the vocabularies' sizes, never their tokens: no text of the corpus.
`zoo reproduce LEDGER --early --replay FILE` trains the window from it.
"""

from __future__ import annotations

import gzip
import io
import pickle
import zlib
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from zoo.errors import ConfigError
from zoo.files import read_bounded
from zoo.specs.registries import registry
from zoo.tasks import Task, Vocabulary, task_params
from zoo.tasks.packing import Rows
from zoo.tasks.summary import vocabulary_sizes

FORMAT = 1
REPLAY_BYTES = 64 << 20
"""The most a replay file may hold, compressed and inflated (the published ones hold about 1 MB)."""
IDENTITY = ("data_dir", "tokenizer_dir", "path")
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
        self.replay_longest_document = replay.get("longest_document")  # recorded since 2026-12-07

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        key = f"{step}:{batch_size}"
        if key not in self.batches:
            raise ConfigError(f"the replay holds no batch of {batch_size} rows for step {step}: it holds the early "
                              "window it was recorded for")
        src, tgt, *offsets = self.batches[key]  # offsets where the recorded rows were packed (since 2026-12-07)
        return Rows(src.long(), tgt.long(), offsets[0].long() if offsets else None)

    def longest_training(self) -> tuple[int, int]:
        return self.longest

    def longest_document(self) -> int | None:
        return self.replay_longest_document

    def rank_share(self, step: int, batch_size: int, rank: int, world: int, unscored: frozenset[int]) -> None:
        return None  # the recorded global batches are all there is

    def passes(self, steps: int, batch_size: int) -> None:
        return None

    def held_out_bytes(self, size: int, split: str = "valid") -> int:
        return 0  # no held-out split: nothing is scored per byte

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
