"""Batches by a token budget (fairseq's max-tokens): sentences of similar length together.

A budget counts padded positions: rows x the longest side of the longest pair in the batch. An
epoch's plan shuffles the pairs, sorts them by length, then by the source's and the target's
lengths (so both sides of a batch pad little; the shuffle breaks the remaining ties), cuts the sorted
list greedily into batches that keep within the budget, with a row count that is a multiple of
the number of ranks, and shuffles the order of the batches. The lengths come out sorted the same
way every epoch, so every epoch has the same number of batches, and the batch of a step is a pure
function of (seed, step), as the trainer's resume needs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from zoo.errors import ConfigError
from zoo.tasks.base import step_generator


def cut(order: Sequence[int], lengths: Sequence[int], budget: int, multiple: int) -> list[list[int]]:
    """Consecutive runs of `order` (ascending lengths) of at most `budget` padded positions each,
    each a multiple of `multiple` rows; a remainder too small for that is left out."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        if current and (len(current) + 1) * lengths[index] > budget:
            keep = len(current) - len(current) % multiple
            if keep == 0:
                raise ConfigError(f"train.batch_tokens: {multiple} rows of {lengths[index]} tokens do not fit the budget of "
                                 f"{budget} positions; raise it, or lower task.max_tokens")
            batches.append(current[:keep])
            current = current[keep:]
        current.append(index)
    keep = len(current) - len(current) % multiple
    if keep:
        batches.append(current[:keep])
    return batches


class TokenPlan:
    """The epochs of token batches over fixed pairs, each epoch made once and kept."""

    def __init__(self, lengths: Sequence[int], seed: int, budget: int, multiple: int,
                 sides: Sequence[tuple[int, ...]] | None = None):
        longest = max(lengths)
        if longest * multiple > budget:
            raise ConfigError(f"train.batch_tokens: the longest training pair has {longest} tokens, so {multiple} row(s) "
                             f"need {longest * multiple} positions, more than the budget of {budget}; raise it, or "
                             "lower task.max_tokens")
        self.lengths, self.seed, self.budget, self.multiple = list(lengths), seed, budget, multiple
        self.keys = [(n, *side) for n, side in zip(self.lengths, sides or [()] * len(self.lengths), strict=True)]
        self._epoch: tuple[int, list[list[int]]] | None = None
        self.per_epoch = len(self._batches(0))

    def _batches(self, epoch: int) -> list[list[int]]:
        if self._epoch is None or self._epoch[0] != epoch:
            gen = step_generator(self.seed, epoch, stream=2)
            shuffled = torch.randperm(len(self.lengths), generator=gen).tolist()
            order = sorted(shuffled, key=self.keys.__getitem__)  # stable: ties keep the shuffle
            batches = cut(order, self.lengths, self.budget, self.multiple)
            self._epoch = (epoch, [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()])
        return self._epoch[1]

    def rows(self, step: int) -> list[int]:
        """The pairs of the batch of `step`."""
        epoch, index = divmod(step, self.per_epoch)
        return self._batches(epoch)[index]
