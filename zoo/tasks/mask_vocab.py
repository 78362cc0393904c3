"""The vocabulary mlm's source reads: the task's codec and the <mask> id it writes where it hides
a token, with which ids are ordinary text (the ones a chosen or random token may be)."""

from __future__ import annotations

import torch
from torch import Tensor

from zoo.tasks.base import Vocabulary
from zoo.tasks.pretrained_tokenizer import PretrainedCodec


class WithMask:
    """A codec with one more id, <mask>, after its own; its ordinary ids are those after eos."""

    def __init__(self, codec):
        self.codec, self.mask_id = codec, len(codec)

    def __len__(self) -> int:
        return len(self.codec) + 1

    def decode(self, ids) -> str:
        return self.codec.decode([i for i in ids if int(i) != self.mask_id])

    def piece(self, i: int) -> str:
        return "<mask>" if i == self.mask_id else self.codec.piece(i)

    @staticmethod
    def ordinary(ids: Tensor) -> Tensor:
        return ids > Vocabulary.eos_id

    def random_ids(self, shape: torch.Size, generator: torch.Generator) -> Tensor:
        return torch.randint(Vocabulary.eos_id + 1, self.mask_id, shape, generator=generator)


class TokenizerMask:
    """A pretrained tokenizer whose own mask_token masks: its ordinary ids are all but its special
    tokens, so a chosen or random token is never one of them."""

    def __init__(self, codec: PretrainedCodec, mask_id: int):
        self.codec, self.mask_id = codec, mask_id
        special = torch.tensor([*codec.special(), mask_id])
        self.specials, self.ordinary_ids = special, torch.tensor(sorted(set(range(len(codec))) - set(special.tolist())))

    def __len__(self) -> int:
        return len(self.codec)

    def decode(self, ids) -> str:
        return self.codec.decode(ids)

    def piece(self, i: int) -> str:
        return self.codec.piece(i)

    def ordinary(self, ids: Tensor) -> Tensor:
        return ~torch.isin(ids, self.specials)

    def random_ids(self, shape: torch.Size, generator: torch.Generator) -> Tensor:
        return self.ordinary_ids[torch.randint(0, len(self.ordinary_ids), shape, generator=generator)]
