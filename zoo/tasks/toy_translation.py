"""A small word-level parallel set from a tiny grammar (我 吃 肉 -> I eat meat): word vocabularies,
agreement (he eats) and reordering-free negation (我 不 吃 肉 -> I do not eat meat)."""

from __future__ import annotations

import itertools

import torch
from pydantic import Field
from torch import Tensor

from zoo.specs.registries import registry
from zoo.tasks.base import Task, TaskParams, Vocabulary, in_batches, pad_rows, step_generator

SUBJECTS = [("我", "I", False), ("你", "you", False), ("他", "he", True), ("她", "she", True),
            ("我们", "we", False), ("他们", "they", False)]
VERBS = [("吃", "eat"), ("喝", "drink"), ("喜欢", "like"), ("看", "see"), ("买", "buy")]
OBJECTS = [("肉", "meat"), ("鱼", "fish"), ("水", "water"), ("茶", "tea"), ("米饭", "rice"),
           ("书", "books"), ("苹果", "apples"), ("面包", "bread")]


def sentence_pairs() -> list[tuple[list[str], list[str]]]:
    pairs = []
    for (zh_s, en_s, third), negated, (zh_v, en_v), (zh_o, en_o) in itertools.product(
        SUBJECTS, (False, True), VERBS, OBJECTS
    ):
        zh = [zh_s, *(["不"] if negated else []), zh_v, zh_o]
        if negated:
            en = [en_s, "does" if third else "do", "not", en_v, en_o]
        else:
            en = [en_s, en_v + ("s" if third else ""), en_o]
        pairs.append((zh, en))
    return pairs


class ToyParams(TaskParams):
    eval_fraction: float = Field(0.2, gt=0.0, lt=1.0)
    shared_vocab: bool = Field(False, description="one vocabulary of both languages' words (a decoder-only model "
                                                  "needs one)")


@registry("task").register("toy_translation")
class ToyTranslation(Task):
    """Chinese -> English sentences of a tiny grammar; a fixed fraction is held out for evaluation."""

    Params = ToyParams
    text_metric = True

    def __init__(self, params: ToyParams, seed: int, state=None):
        super().__init__(params, seed)
        pairs = sentence_pairs()
        if params.shared_vocab:
            self.src_vocab = self.tgt_vocab = Vocabulary(sorted({w for pair in pairs for side in pair for w in side}),
                                                         joiner=" ")
        else:
            self.src_vocab = Vocabulary(sorted({w for zh, _ in pairs for w in zh}), joiner=" ")
            self.tgt_vocab = Vocabulary(sorted({w for _, en in pairs for w in en}), joiner=" ")
        order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(0)).tolist()
        held_out = int(len(pairs) * params.eval_fraction)
        self.eval_pairs = [pairs[i] for i in order[:held_out]]
        self.train_pairs = [pairs[i] for i in order[held_out:]]

    def _encode(self, pairs) -> tuple[Tensor, Tensor]:
        return (pad_rows([self.src_vocab.encode(zh) for zh, _ in pairs]),
                pad_rows([self.tgt_vocab.encode(en) for _, en in pairs]))

    def longest_training(self) -> tuple[int, int]:
        return max(len(zh) for zh, _ in self.train_pairs) + 2, max(len(en) for _, en in self.train_pairs) + 2

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        picks = torch.randint(len(self.train_pairs), (batch_size,), generator=step_generator(self.seed, step))
        return self._encode([self.train_pairs[i] for i in picks.tolist()])

    def held_out_rows(self, size: int, split: str = "valid") -> int:
        return min(size, len(self.eval_pairs))

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        return in_batches(*self._encode(self.eval_pairs[:size]), batch_size)
