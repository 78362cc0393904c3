"""Synthetic string tasks generated on the fly: reverse, copy, sort, and random ids."""

from __future__ import annotations

import string

import torch
from pydantic import Field, PositiveInt, model_validator
from torch import Tensor

from zoo.errors import ConfigError
from zoo.specs.registries import registry
from zoo.tasks.base import Task, TaskParams, Vocabulary, in_batches, pad_rows, step_generator

register = registry("task").register

EVAL_SEED = 20_17
"""Every run, whatever its seed, evaluates on the same held-out strings."""
SPLIT_STREAMS = {"valid": 0, "long": 1, "test": 2}
"""Each held-out split draws from a stream of its own, so no split shares a draw with another."""


class StringParams(TaskParams):
    min_len: PositiveInt = 10
    max_len: PositiveInt = 19
    eval_min_len: PositiveInt | None = Field(None, description="default: min_len")
    eval_max_len: PositiveInt | None = Field(None, description="default: max_len")
    alphabet: str = Field(string.ascii_lowercase, min_length=2)
    long_eval_min_len: PositiveInt | None = Field(None, description="a second held-out split, `long`, scored at the end")
    long_eval_max_len: PositiveInt | None = None
    test_size: PositiveInt | None = Field(None, description="a held-out split, `test`, of this many new strings drawn "
                                                            "as the valid ones are, scored once at the end: what a "
                                                            "tuned sweep compares on, the valid split having chosen")

    @model_validator(mode="after")
    def _ordered(self):
        if self.min_len > self.max_len:
            raise ConfigError(f"min_len {self.min_len} is larger than max_len {self.max_len}")
        if (self.eval_min_len or self.min_len) > (self.eval_max_len or self.max_len):
            raise ConfigError("eval_min_len is larger than eval_max_len")
        if (self.long_eval_min_len is None) != (self.long_eval_max_len is None):
            raise ConfigError("long_eval_min_len and long_eval_max_len go together")
        if self.long_eval_min_len is not None and self.long_eval_min_len > self.long_eval_max_len:
            raise ConfigError("long_eval_min_len is larger than long_eval_max_len")
        return self


class StringTask(Task):
    """Random strings over an alphabet; the target is a function of the source letters."""

    Params = StringParams
    token_batches = True

    def __init__(self, params: StringParams, seed: int, state=None):
        super().__init__(params, seed)
        self.src_vocab = self.tgt_vocab = Vocabulary(list(params.alphabet))

    @classmethod
    def splits(cls, params: StringParams) -> tuple[str, ...]:
        return ("valid", *(["long"] if params.long_eval_min_len is not None else []),
                *(["test"] if params.test_size is not None else []))

    def transform(self, letters: list[str]) -> list[str]:
        raise NotImplementedError

    def longest_training(self) -> tuple[int, int]:
        longest = self.params.max_len
        return longest + 2, len(self.transform([self.params.alphabet[0]] * longest)) + 2

    def _strings(self, gen: torch.Generator, count: int, low: int, high: int) -> tuple[Tensor, Tensor]:
        alphabet = self.params.alphabet
        lengths = torch.randint(low, high + 1, (count,), generator=gen).tolist()
        letters = [[alphabet[i] for i in torch.randint(len(alphabet), (n,), generator=gen).tolist()] for n in lengths]
        src = pad_rows([self.src_vocab.encode(word) for word in letters])
        tgt = pad_rows([self.tgt_vocab.encode(self.transform(word)) for word in letters])
        return src, tgt

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        return self._strings(step_generator(self.seed, step), batch_size, self.params.min_len, self.params.max_len)

    def token_batch(self, step: int, budget: int, multiple: int = 1) -> tuple[Tensor, Tensor]:
        """Strings of one length, drawn uniformly for the step, as many as the budget holds: no
        padding at all (so each length gets the same share of tokens, not of strings)."""
        longest = self.params.max_len + 2  # bos and eos
        if multiple * longest > budget:
            raise ConfigError(f"train.batch_tokens: {multiple} row{'s' * (multiple > 1)} of {longest} tokens "
                              f"need{'s' * (multiple == 1)} {multiple * longest} positions, more than the budget of "
                              f"{budget}; raise it")
        gen = step_generator(self.seed, step, stream=3)
        length = int(torch.randint(self.params.min_len, self.params.max_len + 1, (1,), generator=gen))
        rows = budget // (length + 2)
        return self._strings(gen, rows - rows % multiple, length, length)

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        self.check_split(split)
        p = self.params
        low, high = p.eval_min_len or p.min_len, p.eval_max_len or p.max_len
        if split == "long":
            low, high = p.long_eval_min_len, p.long_eval_max_len
        size = p.test_size if split == "test" else size
        src, tgt = self._strings(step_generator(EVAL_SEED, 0, stream=SPLIT_STREAMS[split]), size, low, high)
        return in_batches(src, tgt, batch_size)

    def held_out_rows(self, size: int, split: str = "valid") -> int:
        return self.params.test_size if split == "test" else size


@register("reverse")
class Reverse(StringTask):
    """Target: the source string reversed."""

    def transform(self, letters):
        return letters[::-1]


@register("copy")
class Copy(StringTask):
    """Target: the source string."""

    def transform(self, letters):
        return list(letters)


@register("sort")
class Sort(StringTask):
    """Target: the source letters sorted."""

    def transform(self, letters):
        return sorted(letters)


class RandomParams(TaskParams):
    vocab_size: int = Field(64, ge=4)
    src_len: PositiveInt = 16
    tgt_len: PositiveInt = 16


@register("random")
class RandomIds(Task):
    """Random source and target ids (the torch.nn.Transformer notebook's smoke test): it checks
    that the loop runs, not that anything is learned."""

    Params = RandomParams

    def __init__(self, params: RandomParams, seed: int, state=None):
        super().__init__(params, seed)
        self.src_vocab = self.tgt_vocab = Vocabulary([f"t{i}" for i in range(params.vocab_size - 3)], joiner=" ")

    def _batch(self, gen: torch.Generator, count: int) -> tuple[Tensor, Tensor]:
        p, high = self.params, self.params.vocab_size
        rows = [torch.randint(3, high, (n,), generator=gen).tolist() for n in [p.src_len] * count + [p.tgt_len] * count]
        src = pad_rows([[1, *row, 2] for row in rows[:count]])
        tgt = pad_rows([[1, *row, 2] for row in rows[count:]])
        return src, tgt

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        return self._batch(step_generator(self.seed, step), batch_size)

    def longest_training(self) -> tuple[int, int]:
        return self.params.src_len + 2, self.params.tgt_len + 2

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        src, tgt = self._batch(step_generator(EVAL_SEED, 0), size)
        return in_batches(src, tgt, batch_size)
