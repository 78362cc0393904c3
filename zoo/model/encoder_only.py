"""The encoder-only model (kind `encoder`): ids -> bidirectional stack -> per-token logits, a
masked language model; it does not decode."""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor

from zoo.kernels.masks import padding_mask
from zoo.model.inputs import check_ids
from zoo.model.zoo_model import AttentionMaps, ZooModel
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import register_kind


@register_kind
class EncoderOnly(ZooModel):
    """ids -> bidirectional stack -> per-token logits (a masked-language-model head)."""

    kind = "encoder"
    reads: ClassVar[dict[str, str]] = {"encoder": "source"}
    trains_on = "positions"

    @classmethod
    def frame(cls, spec: ModelSpec, src: Tensor, tgt: Tensor) -> tuple[tuple[Tensor, ...], Tensor]:
        """The (masked) source, labelled position by position with the target."""
        return (src,), tgt

    @classmethod
    def input_masks(cls, spec: ModelSpec, inputs: tuple[Tensor, ...]) -> tuple[Tensor | None, ...]:
        return (padding_mask(inputs[0], spec.pad_id),)

    @classmethod
    def sequence_lengths(cls, spec: ModelSpec, src_len: int, tgt_len: int) -> tuple[int, int]:
        return src_len, 0

    def forward(self, ids: Tensor, padding: tuple[Tensor | None] | None = None, head: bool = True) -> Tensor:
        """Logits (B, T, vocab) of every position, each seeing the whole row but its padding;
        `head` as the encoder-decoder's."""
        if padding is None:
            check_ids("ids", ids, self.spec.src_vocab_size)
            padding = self.input_masks(self.spec, (ids,))
        hidden = self.encoder(ids, padding[0])[0]
        return self.generator(hidden) if head else hidden

    def attention_maps(self, ids: Tensor) -> AttentionMaps:
        check_ids("ids", ids, self.spec.src_vocab_size)
        maps = self.encoder(ids, padding_mask(ids, self.spec.pad_id), need_weights=True)[1]
        return AttentionMaps(encoder=[m["self"] for m in maps], decoder_self=[], decoder_cross=[])
