"""`lm_shards`: a decoder-only language model trained from a token store (`zoo data prepare`),
read through memory maps, so memory does not grow with the corpus.

The training documents, joined end to end (each bos ... eos), are cut into rows of `pack` ids;
each epoch visits every row once, in an order that is a pure function of (seed, epoch)
(zoo.tasks.shard_order), so the batch of any step, on any rank, is computed without reading the
steps before it: a resumed run reads exactly the batches an uninterrupted one would, and each
rank reads only its own rows of the global batch (rank, rank + world, ...). `model.documents`
(joined, separate, masked) decides, as for `lm`, whether attention crosses a document's bos.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import Field
from torch import Tensor

from zoo.errors import ConfigError
from zoo.specs.registries import registry
from zoo.tasks.base import Task, TaskParams, pad_rows
from zoo.tasks.shard_order import epoch_rows
from zoo.tasks.shard_store import INDEX, ShardStore
from zoo.tasks.text import codec_from_state


class ShardParams(TaskParams):
    path: str = Field(description="a token store written by zoo data prepare (the folder of its index.json)")
    pack: int = Field(ge=2, description="rows of this many ids cut from the training documents joined end to end "
                                        "(a row's first id is read, never scored); the held-out documents likewise, "
                                        "the last row shorter")
    test_split: bool = Field(True, description="score the store's test split once at the end")


@registry("task").register("lm_shards")
class ShardLanguageModeling(Task):
    """Next-token prediction over rows of a token store, as `lm` with `pack` over text."""

    Params = ShardParams
    next_token = True
    scores_text = True
    generates = False
    kinds: ClassVar[tuple[str, ...]] = ("decoder",)

    def __init__(self, params: ShardParams, seed: int, state: dict[str, Any] | None = None):
        super().__init__(params, seed)
        self.store = ShardStore.open(params.path)
        if self.store.corpus != "documents":
            raise ConfigError(f"task.path {params.path!r}: a store of sentence pairs; lm_shards trains on a store of "
                              "documents (zoo data prepare without --pair)")
        self.codec = codec_from_state(json.loads(self.store.tokenizer_text()) if state is None else state["vocab"])
        if len(self.codec) != self.store.vocab_size:
            raise ConfigError(f"task.path {params.path!r}: the checkpoint's tokenizer holds {len(self.codec)} tokens, "
                              f"the store's {self.store.vocab_size}: the store was prepared with another tokenizer")
        self.src_vocab = self.tgt_vocab = self.codec
        self.train = self.store.stream("train")
        self.rows = self.train.tokens // params.pack
        if self.rows == 0:
            raise ConfigError(f"task.pack {params.pack}: the training split holds {self.train.tokens} ids, fewer than "
                              "one row")

    @classmethod
    def special_ids_for(cls, params: ShardParams) -> dict[str, int]:
        return dict(ShardStore.open(params.path, verify=False).index["special_ids"])

    @cached_property
    def pad_id(self) -> int:
        return int(self.store.index["special_ids"]["pad_id"])

    def state(self) -> dict[str, Any]:
        return {"vocab": self.codec.state()}

    @classmethod
    def splits(cls, params: ShardParams) -> tuple[str, ...]:
        return ("valid", "test") if params.test_split else ("valid",)

    @classmethod
    def data_files(cls, params: ShardParams) -> list[Path]:
        """The index: it holds the SHA-256 of every shard and of the tokenizer, checked at every open."""
        return [Path(params.path) / INDEX]

    def _rows(self, numbers: np.ndarray) -> Tensor:
        pack = self.params.pack
        return torch.from_numpy(np.stack([self.train.read(int(row) * pack, pack) for row in numbers]).astype(np.int64))

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        ids = self._rows(epoch_rows(self.seed, self.rows, step * batch_size, batch_size))
        return ids[:, :1], ids

    def rank_share(self, step: int, batch_size: int, rank: int, world: int) -> tuple[Tensor, Tensor, int] | None:
        """This rank's rows of the global batch, read alone, and the labels the whole batch scores:
        every row is full, so each scores all its ids after its first."""
        if self.store.index.get("pad_in_documents", 1):
            return None  # a pad id inside the text is not scored: only the global batch can count the labels
        numbers = epoch_rows(self.seed, self.rows, step * batch_size, batch_size)[rank::world]
        ids = self._rows(numbers)
        return ids[:, :1], ids, batch_size * (self.params.pack - 1)

    def passes(self, steps: int, batch_size: int) -> float:
        """How many times a run of `steps` batches reads each training row."""
        return steps * batch_size / self.rows

    def held_out(self, size: int | None, split: str) -> list[np.ndarray]:
        """The first `size` documents of the split, joined and cut into rows, the last shorter."""
        self.check_split(split)
        stream = self.store.stream(split)
        _, tokens, _ = stream.first_documents(size)
        ids, pack = stream.read(0, tokens), self.params.pack
        return [ids[start : start + pack] for start in range(0, tokens, pack)]

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        rows = self.held_out(size, split)
        batches = []
        for start in range(0, len(rows), batch_size):
            ids = pad_rows([row.tolist() for row in rows[start : start + batch_size]], self.pad_id)
            batches.append((ids[:, :1], ids))
        return batches

    def held_out_rows(self, size: int, split: str = "valid") -> int:
        return -(-self.store.stream(split).first_documents(size)[1] // self.params.pack)

    def held_out_bytes(self, size: int, split: str = "valid") -> int:
        return self.store.stream(split).first_documents(size)[2]

    def longest_training(self) -> tuple[int, int]:
        return 1, self.params.pack

    def summary(self, eval_size: int) -> dict[str, float | int]:
        return {**super().summary(eval_size), "train_documents": self.train.documents, "train_tokens": self.train.tokens,
                "train_rows": self.rows, "max_tokens": self.params.pack}
