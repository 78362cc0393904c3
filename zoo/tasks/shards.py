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
from zoo.tasks.packing import Rows, offsets_tensor
from zoo.tasks.shard_order import epoch_rows
from zoo.tasks.shard_store import INDEX, ShardStore
from zoo.tasks.text import codec_from_state


class StoreParams(TaskParams):
    path: str = Field(description="a token store written by zoo data prepare (the folder of its index.json)")
    test_split: bool = Field(True, description="score the store's test split once at the end")


class ShardParams(StoreParams):
    pack: int = Field(ge=2, description="rows of this many ids cut from the training documents joined end to end "
                                        "(a row's first id is read, never scored); the held-out documents likewise, "
                                        "the last row shorter")


class StoreTask(Task):
    """A task that reads a token store: its tokenizer, special ids and splits are the store's."""

    Params = StoreParams
    corpus: ClassVar[str]
    """The store's corpus the task trains on (zoo.tasks.shard_store.STREAMS)."""

    def __init__(self, params: StoreParams, seed: int, state: dict[str, Any] | None = None):
        super().__init__(params, seed)
        self.store = ShardStore.open(params.path)
        if self.store.corpus != self.corpus:
            names = {"documents": "documents (zoo data prepare without --pair)", "pairs": "sentence pairs (--pair)"}
            raise ConfigError(f"task.path {params.path!r}: a store of {names[self.store.corpus]}; this task trains "
                              f"on a store of {names[self.corpus]}")
        self.codec = codec_from_state(json.loads(self.store.tokenizer_text()) if state is None else state["vocab"])
        if len(self.codec) != self.store.vocab_size:
            raise ConfigError(f"task.path {params.path!r}: the checkpoint's tokenizer holds {len(self.codec)} tokens, "
                              f"the store's {self.store.vocab_size}: the store was prepared with another tokenizer")
        self.src_vocab = self.tgt_vocab = self.codec

    @classmethod
    def special_ids_for(cls, params: StoreParams) -> dict[str, int]:
        """The store's; a recipe whose store is not prepared yet validates with the zoo's own (0, 1,
        2), and its training stops at the missing store before any step."""
        if not (Path(params.path) / INDEX).is_file():
            return dict(cls.special_ids)
        return dict(ShardStore.open(params.path, verify=False).index["special_ids"])

    @cached_property
    def pad_id(self) -> int:
        return int(self.store.index["special_ids"]["pad_id"])

    def state(self) -> dict[str, Any]:
        return {"vocab": self.codec.state()}

    @classmethod
    def splits(cls, params: StoreParams) -> tuple[str, ...]:
        return ("valid", "test") if params.test_split else ("valid",)

    @classmethod
    def content_digests(cls, params: StoreParams) -> dict[str, str]:
        """The store's content: a digest of what its index says of every shard and of the tokenizer
        (each file's SHA-256, checked at every open), not of how or when it was prepared, so the
        same store prepared again, by another command or commit, is the same data."""
        from zoo.tasks.shard_store import content_digest

        return {str(Path(params.path) / INDEX): content_digest(ShardStore.open(params.path, verify=False).index)}


@registry("task").register("lm_shards")
class ShardLanguageModeling(StoreTask):
    """Next-token prediction over rows of a token store, as `lm` with `pack` over text."""

    Params = ShardParams
    corpus = "documents"
    next_token = True
    scores_text = True
    generates = False
    kinds: ClassVar[tuple[str, ...]] = ("decoder",)

    def __init__(self, params: ShardParams, seed: int, state: dict[str, Any] | None = None):
        super().__init__(params, seed, state)
        self.train = self.store.stream("train")
        self.rows = self.train.tokens // params.pack
        if self.rows == 0:
            raise ConfigError(f"task.pack {params.pack}: the training split holds {self.train.tokens} ids, fewer than "
                              "one row")

    def _rows(self, numbers: np.ndarray) -> Tensor:
        pack = self.params.pack
        return torch.from_numpy(np.stack([self.train.read(int(row) * pack, pack) for row in numbers]).astype(np.int64))

    def _offsets(self, numbers: np.ndarray) -> Tensor:
        """Each row's offset in the document it begins in (zoo.tasks.packing)."""
        starts = np.asarray(numbers, dtype=np.int64) * self.params.pack
        return torch.tensor(self.train.offsets_in_documents(starts), dtype=torch.long)

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        numbers = epoch_rows(self.seed, self.rows, step * batch_size, batch_size)
        ids = self._rows(numbers)
        return Rows(ids[:, :1], ids, self._offsets(numbers))

    def rank_share(self, step: int, batch_size: int, rank: int, world: int,
                   unscored: frozenset[int]) -> tuple[Rows, int] | None:
        """This rank's rows of the global batch, read alone, and the labels the whole batch scores:
        every row is full, so each scores all its ids after its first, where no unscored id stands
        inside the text. A document's start that the framing leaves unscored (documents apart), or a
        pad id inside documents, can only be counted in the whole batch: every rank reads it then."""
        if self.store.index.get("pad_in_documents", 1) or self.store.index["special_ids"]["bos_id"] in unscored:
            return None
        numbers = epoch_rows(self.seed, self.rows, step * batch_size, batch_size)[rank::world]
        ids = self._rows(numbers)
        return Rows(ids[:, :1], ids, self._offsets(numbers)), batch_size * (self.params.pack - 1)

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
        """The held-out rows in the store's order, each batch with its rows' offsets."""
        rows, stream = self.held_out(size, split), self.store.stream(split)
        offsets = stream.offsets_in_documents(np.arange(len(rows), dtype=np.int64) * self.params.pack)
        batches = []
        for start in range(0, len(rows), batch_size):
            ids = pad_rows([row.tolist() for row in rows[start : start + batch_size]], self.pad_id)
            batches.append(Rows(ids[:, :1], ids, offsets_tensor(offsets, range(start, start + ids.size(0)))))
        return batches

    def held_out_rows(self, size: int, split: str = "valid") -> int:
        return -(-self.store.stream(split).first_documents(size)[1] // self.params.pack)

    def held_out_bytes(self, size: int, split: str = "valid") -> int:
        return self.store.stream(split).first_documents(size)[2]

    def longest_training(self) -> tuple[int, int]:
        return 1, self.params.pack

    def longest_document(self) -> int:
        return self.train.longest_document()

    def summary(self, eval_size: int) -> dict[str, float | int]:
        return {**super().summary(eval_size), "train_documents": self.train.documents, "train_tokens": self.train.tokens,
                "train_rows": self.rows, "max_tokens": self.params.pack}


class PairParams(StoreParams):
    max_tokens: int = Field(256, ge=3, description="a longer side of a training pair (bos and eos counted) is cut to "
                                                   "this many ids, its last one eos: a store's pairs are never left out "
                                                   "of an epoch; held-out pairs are scored whole")


@registry("task").register("parallel_shards")
class ShardTranslation(StoreTask):
    """Sentence pairs of a token store (`zoo data prepare --pair`) for an encoder-decoder: each
    epoch visits every pair once, in an order that is a pure function of (seed, epoch); held-out
    pairs keep the store's order, and their references are the targets' ids decoded."""

    Params = PairParams
    corpus = "pairs"
    text_metric = True
    scores_text = True

    def __init__(self, params: PairParams, seed: int, state: dict[str, Any] | None = None):
        super().__init__(params, seed, state)
        self.sides = tuple(self.store.stream("train", side) for side in ("src", "tgt"))
        self.pairs = self.sides[0].documents

    def _pair_ids(self, split: str, numbers) -> tuple[list[list[int]], list[list[int]]]:
        """Training pairs cut to max_tokens; held-out pairs whole, as `parallel` scores them."""
        if split != "train":
            sides = tuple(self.store.stream(split, side) for side in ("src", "tgt"))
            return tuple([side.document(int(n)).tolist() for n in numbers] for side in sides)
        return tuple([self._cut(side.document(int(n))) for n in numbers] for side in self.sides)

    def _cut(self, ids: np.ndarray) -> list[int]:
        limit = self.params.max_tokens
        return ids.tolist() if len(ids) <= limit else [*ids[: limit - 1].tolist(), int(ids[-1])]

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        src, tgt = self._pair_ids("train", epoch_rows(self.seed, self.pairs, step * batch_size, batch_size))
        return pad_rows(src, self.pad_id), pad_rows(tgt, self.pad_id)

    def passes(self, steps: int, batch_size: int) -> float:
        return steps * batch_size / self.pairs

    def _held_out(self, size: int | None, split: str) -> tuple[list[list[int]], list[list[int]]]:
        self.check_split(split)
        count = self.store.stream(split, "src").first_documents(size)[0]
        return self._pair_ids(split, range(count))

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        src, tgt = self._held_out(size, split)
        return [(pad_rows(src[i : i + batch_size], self.pad_id), pad_rows(tgt[i : i + batch_size], self.pad_id))
                for i in range(0, len(src), batch_size)]

    def references(self, size: int, split: str = "valid") -> list[str]:
        return [self.codec.decode(ids[1:]) for ids in self._held_out(size, split)[1]]

    def held_out_rows(self, size: int, split: str = "valid") -> int:
        return self.store.stream(split, "src").first_documents(size)[0]

    def held_out_bytes(self, size: int, split: str = "valid") -> int:
        return self.store.stream(split, "tgt").first_documents(size)[2]

    def longest_training(self) -> tuple[int, int]:
        return tuple(min(side.longest_document(), self.params.max_tokens) for side in self.sides)

    def summary(self, eval_size: int) -> dict[str, float | int]:
        return {**super().summary(eval_size), "train_examples": self.pairs, "max_tokens": self.params.max_tokens}
