"""What every task gives the trainer: vocabularies, batches that depend only on (seed, step), and
a fixed held-out evaluation set.

Batches are a pure function of the seed and the step, so a resumed run sees exactly the batches
an uninterrupted one would, and distributed ranks can take disjoint rows of one global batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from zoo.errors import ConfigError, DataError
from zoo.metrics import CURVE, reported
from zoo.specs.strict import StrictSettings
from zoo.tasks.summary import vocabulary_sizes

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS)


class Vocabulary:
    """Tokens <-> ids; ids 0, 1, 2 are pad, bos and eos in every vocabulary of the zoo.

    With `unk`, id 3 is <unk> and stands for any piece outside the vocabulary (real text always
    holds words the training split never had); without it, such a piece is an error.
    """

    def __init__(self, tokens: Sequence[str], joiner: str = "", unk: bool = False):
        specials = (*SPECIALS, UNK) if unk else SPECIALS
        self.tokens = [*specials, *(t for t in tokens if t not in specials)]
        self.index = {token: i for i, token in enumerate(self.tokens)}
        self.joiner, self.unk = joiner, unk
        if len(self.index) != len(self.tokens):
            raise DataError("a vocabulary's tokens must be distinct")

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, pieces: Sequence[str]) -> list[int]:
        """bos, the pieces' ids, eos."""
        if self.unk:
            return [self.bos_id, *(self.index.get(p, self.unk_id) for p in pieces), self.eos_id]
        try:
            return [self.bos_id, *(self.index[p] for p in pieces), self.eos_id]
        except KeyError as err:
            raise DataError(f"token {err.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: Sequence[int]) -> str:
        """Text of the ids up to the first eos, without special tokens."""
        pieces = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i > self.eos_id:
                pieces.append(self.tokens[i])
        return self.joiner.join(pieces)

    def piece(self, i: int) -> str:
        """The token of one id, specials included (for labels of plots)."""
        return self.tokens[i]

    def state(self) -> dict[str, Any]:
        return {"kind": "vocabulary", "tokens": self.tokens, "joiner": self.joiner, "unk": self.unk}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Vocabulary:
        return cls(state["tokens"], state["joiner"], state.get("unk", False))


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int = 0) -> Tensor:
    """Right-pad id lists into one int64 (rows, longest) tensor. One conversion of all the ids
    and one masked write, not a tensor per row: a training batch is built on the host every step
    (a batch of 128 Multi30k pairs, both sides: 0.6 ms instead of 1.9)."""
    lengths = torch.tensor([len(row) for row in rows], dtype=torch.long)
    out = torch.full((len(rows), int(lengths.max())), pad_id, dtype=torch.long)
    out[torch.arange(out.size(1)) < lengths[:, None]] = torch.tensor([i for row in rows for i in row], dtype=torch.long)
    return out


def in_batches(src: Tensor, tgt: Tensor, batch_size: int) -> list[tuple[Tensor, Tensor]]:
    """Consecutive (src, tgt) slices of at most batch_size rows, each trimmed of all-pad columns."""
    out = []
    for i in range(0, src.size(0), batch_size):
        s, t = src[i : i + batch_size], tgt[i : i + batch_size]
        out.append((s[:, : int((s != 0).sum(1).max())], t[:, : int((t != 0).sum(1).max())]))
    return out


def step_generator(seed: int, step: int, stream: int = 0) -> torch.Generator:
    """A generator for one (seed, step, stream), independent of any other. The mix is taken modulo
    2^64, as torch itself wraps a negative seed: every seed that fitted before draws what it drew,
    and a large one (above 2.3e9) no longer overflows torch's 64-bit seed."""
    return torch.Generator().manual_seed(((seed * 1_000_003 + step) * 7919 + stream) % 2**64)


class EpochOrder:
    """The rows of a training set in a new random order each epoch, a pure function of (seed,
    epoch); the current epoch's order is kept. Batches walk it without gaps across epochs."""

    def __init__(self, seed: int, size: int):
        self.seed, self.size = seed, size
        self._epoch: tuple[int, list[int]] | None = None

    def order(self, epoch: int) -> list[int]:
        if self._epoch is None or self._epoch[0] != epoch:
            generator = step_generator(self.seed, epoch, stream=1)
            self._epoch = (epoch, torch.randperm(self.size, generator=generator).tolist())
        return self._epoch[1]

    def rows(self, step: int, batch_size: int) -> list[int]:
        """The row indices of the batch of `step`."""
        return [self.order(position // self.size)[position % self.size]
                for position in range(step * batch_size, (step + 1) * batch_size)]


def metric_prefix(split: str) -> str:
    """Metrics of the "valid" split are logged as eval/*, those of any other split under its name."""
    return "eval" if split == "valid" else split


class TaskParams(StrictSettings):
    pass


def held_out_part(params: Any, size: int | None, split: str) -> tuple[str, int | None]:
    """(the file stem, how many of its first lines) a file task holds out for `split`: the valid
    split's first `size`, the test split's first test_size (all when None)."""
    if split == "valid":
        return params.valid_split, size
    return params.test_split, params.test_size


class Task:
    """A source of (src, tgt) id batches with bos, eos and pad."""

    Params: ClassVar[type[TaskParams]] = TaskParams
    special_ids: ClassVar[dict[str, int]] = {"pad_id": Vocabulary.pad_id, "bos_id": Vocabulary.bos_id,
                                             "eos_id": Vocabulary.eos_id}
    """The ids of pad, bos and eos in the task's vocabularies; the model takes them from here."""

    @classmethod
    def special_ids_for(cls, params: TaskParams) -> dict[str, int]:
        """The special ids under these settings: a task whose tokenizer comes from a folder reads them there."""
        return cls.special_ids

    text_metric: ClassVar[bool] = False
    """Whether the decoded targets are text, scored by the text metrics (BLEU, chrF, TER)."""
    next_token: ClassVar[bool] = False
    """Whether the task is language modeling, whose loss has a perplexity."""
    scores_text: ClassVar[bool] = False
    """Whether the teacher-forced loss scores the held-out text itself (a language model's
    documents, a translation's targets), so that it has a value per UTF-8 byte of that text
    (bits_per_byte): the one scale on which two tokenizers compare."""
    generates: ClassVar[bool] = True
    """Whether held-out targets are decoded (exact match, BLEU): not for language modeling."""
    shape: ClassVar[str] = "sequences"
    """What the task's (src, tgt) pairs are: "sequences" (a target to generate for each source) or
    "positions" (a label at each source position); every model kind that trains on them fits."""
    kinds: ClassVar[tuple[str, ...] | None] = None
    """The only model kinds the task trains, where it narrows those that fit its examples."""
    token_batches: ClassVar[bool] = False
    """Whether the task can batch by a token budget (`token_batch`, train.batch_tokens)."""

    def __init__(self, params: TaskParams, seed: int, state: dict[str, Any] | None = None):
        """`state` is what `state()` returned in an earlier run; tasks whose vocabulary is learned
        from data take it back from there, so a resumed run encodes text exactly as before."""
        self.params, self.seed = params, seed

    src_vocab: Vocabulary
    tgt_vocab: Vocabulary

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def token_batch(self, step: int, budget: int, multiple: int = 1) -> tuple[Tensor, Tensor]:
        """The batch of `step` within `budget` padded positions (rows x the longer side's length),
        of sentences of similar length, its rows a multiple of `multiple` (one share per rank)."""
        raise NotImplementedError

    def longest_document(self) -> int | None:
        """The most ids of one training document (bos and eos counted), where rows are cut from
        documents joined end to end (a language model's pack) and a row may continue a document's
        positions (zoo.tasks.packing); None where each row is a whole example."""
        return None

    def rank_share(self, step: int, batch_size: int, rank: int, world: int,
                   unscored: frozenset[int]) -> tuple[tuple[Tensor, Tensor], int] | None:
        """This rank's rows (rank, rank + world, ...) of the global batch of `step` as (src, tgt)
        with their offsets (zoo.tasks.packing.Rows), read without the others' rows, with the count
        of labels the whole global batch scores (`unscored`: ids whose
        labels the model's framing does not score); None where the task builds the global batch and
        each rank keeps its rows of it (the count then comes from the whole batch)."""
        return None

    def passes(self, steps: int, batch_size: int) -> float | None:
        """How many times `steps` batches of `batch_size` rows read each training example, where the
        task can say before training (a run that repeats data is warned of)."""
        return None

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        """The fixed held-out set: the same for every seed and every run."""
        raise NotImplementedError

    def held_out_rows(self, size: int, split: str = "valid") -> int:
        """How many examples eval_batches(size, ...) makes: as many as asked, for a task that
        generates them; a task that reads files has at most the split's lines."""
        return size

    def held_out_bytes(self, size: int, split: str = "valid") -> int:
        """The UTF-8 bytes of the held-out text that eval_batches(size, ...) scores, as the corpus
        holds it (before a tokenizer's normalization): a task that scores_text says."""
        raise NotImplementedError(f"{type(self).__name__} does not score its held-out text (scores_text)")

    @classmethod
    def splits(cls, params: TaskParams) -> tuple[str, ...]:
        """Held-out splits: "valid" is evaluated during training, any other one once at the end."""
        return ("valid",)

    @classmethod
    def final_metrics(cls, params: TaskParams) -> list[str]:
        """Every metric in a finished run's result: what a sweep can rank its variants by."""
        names = cls.metrics()
        return [*(f"{metric_prefix(split)}/{name}" for split in cls.splits(params) for name in names),
                *(f"{CURVE}/{name}" for name in names)]

    @classmethod
    def traits(cls) -> frozenset[str]:
        """What the task does, which decides the registered metrics it reports (zoo.metrics)."""
        flags = {"generates": cls.generates, "text": cls.text_metric, "next_token": cls.next_token,
                 "text_bytes": cls.scores_text}
        return frozenset(name for name, on in flags.items() if on)

    @classmethod
    def metrics(cls) -> list[str]:
        """The registered metrics each held-out split of the task reports."""
        return reported(cls.traits())

    def summary(self, eval_size: int) -> dict[str, float | int]:
        """What the run's data is (zoo.tasks.summary): vocabulary sizes and held-out examples per
        split here; a task that reads files says more."""
        return {**vocabulary_sizes(self.src_vocab, self.tgt_vocab),
                **{f"{split}_examples": self.held_out_rows(eval_size, split) for split in self.eval_splits}}

    def longest_training(self) -> tuple[int, int] | None:
        """The most tokens (bos and eos counted) of a training source and target, where the task
        knows them before training: a sequence a model cannot place is then found before any step."""
        return None

    @classmethod
    def data_files(cls, params: TaskParams) -> list[Path]:
        """The files the task reads (a run's identity covers their content); none for generated data."""
        return []

    @classmethod
    def content_digests(cls, params: TaskParams) -> dict[str, str]:
        """{what: digest} of data the task reads that its files' own digests do not stand for (a
        token store's shards, which its index lists by SHA-256)."""
        return {}

    @property
    def eval_splits(self) -> tuple[str, ...]:
        return type(self).splits(self.params)

    def check_split(self, split: str) -> None:
        if split not in self.eval_splits:
            raise ConfigError(f"split {split!r} is not held out by this task; choices: {', '.join(self.eval_splits)}")

    def references(self, size: int, split: str = "valid") -> list[str] | None:
        """The held-out targets as raw text, in the order of eval_batches, for BLEU; None when the
        decoded target ids are the reference."""
        return None

    def state(self) -> dict[str, Any]:
        """What a checkpoint needs to turn ids back into text."""
        return {"src_vocab": self.src_vocab.state(), "tgt_vocab": self.tgt_vocab.state()}


def text_stays_text(tokenizer):
    """A tokenizer that reads `<pad>`, `<eos>` or any special token written in a document as the
    characters it is: matched as the special id, it would end a row's labels, or split a document
    mid-sentence under `documents: separate`. The codec adds the special ids itself; the setting is
    not part of the tokenizer's saved text, so it is set on every tokenizer the codecs hold."""
    tokenizer.encode_special_tokens = True
    return tokenizer
