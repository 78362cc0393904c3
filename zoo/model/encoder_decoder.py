"""The encoder-decoder: src -> encoder -> memory; tgt + memory -> decoder -> logits."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from zoo.kernels.masks import padding_mask, target_mask
from zoo.model.decoding import Decoding
from zoo.model.inputs import check_ids, check_memory, check_same_batch
from zoo.model.zoo_model import AttentionMaps, ZooModel
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import register_kind


@register_kind
class EncoderDecoder(ZooModel):
    """src ids -> encoder -> memory; tgt ids + memory -> decoder -> logits over the target vocabulary."""

    kind = "encoder_decoder"
    reads: ClassVar[dict[str, str]] = {"encoder": "source", "decoder": "target"}
    cross_attention = True

    @classmethod
    def frame(cls, spec: ModelSpec, src: Tensor, tgt: Tensor) -> tuple[tuple[Tensor, ...], Tensor]:
        """The source, and the target without its last token; labels: the target after its start."""
        return (src, tgt[:, :-1]), tgt[:, 1:]

    @classmethod
    def input_masks(cls, spec: ModelSpec, inputs: tuple[Tensor, ...]) -> tuple[Tensor | None, ...]:
        return padding_mask(inputs[0], spec.pad_id), target_mask(inputs[1], spec)

    @classmethod
    def sequence_lengths(cls, spec: ModelSpec, src_len: int, tgt_len: int) -> tuple[int, int]:
        return src_len, tgt_len - 1

    @classmethod
    def decoding_input(cls, spec: ModelSpec) -> tuple[str, int]:
        return "src", spec.src_vocab_size

    @classmethod
    def start_columns(cls, spec: ModelSpec, input_len: int) -> int:
        return 1

    @classmethod
    def joined(cls, spec: ModelSpec, inputs: Tensor, generated: Tensor) -> Tensor:
        """The start column, then the generated ids."""
        start = torch.full((generated.size(0), 1), spec.bos_id, dtype=torch.long, device=generated.device)
        return torch.cat([start, generated], dim=1)

    @classmethod
    def continuations(cls, spec: ModelSpec, src: Tensor, decoded: Tensor) -> list[list[int]]:
        return [row[1:] for row in decoded.tolist()]

    def forward(self, src: Tensor, tgt: Tensor, padding: tuple[Tensor | None, Tensor | None] | None = None,
                head: bool = True) -> Tensor:
        """Logits (B, T, tgt_vocab_size) for int64 src (B, S) and tgt (B, T); with `head` False, the
        decoder's output (B, T, d_model) that the generator would read (a loss that applies the
        generator a chunk at a time: zoo.trainer.objective).

        `padding` is (src mask, tgt mask) from zoo.kernels.masks.padding_mask, built while the ids were on
        the host, where the ids were checked too (the trainer's batches): then nothing here reads a
        value back from the device, so a CUDA step never waits."""
        if padding is None:
            self._check_pair(src, tgt)
            padding = self.input_masks(self.spec, (src, tgt))
        memory = self.encoder(src, padding[0])[0]
        hidden = self.decoder(tgt, padding[1], memory, padding[0])[0]
        return self.generator(hidden) if head else hidden

    def encode(self, src: Tensor) -> Tensor:
        """The encoder memory (B, S, d_model)."""
        check_ids("src", src, self.spec.src_vocab_size)
        return self._encode(src)[0]

    def decode(self, tgt: Tensor, memory: Tensor, src: Tensor) -> Tensor:
        """Logits for tgt given the memory encoded from src (whose padding the decoder must skip)."""
        self._check_pair(src, tgt)
        check_memory(memory, src, self.spec.d_model)
        return self._decode(tgt, memory, src)[0]

    def attention_maps(self, src: Tensor, tgt: Tensor) -> AttentionMaps:
        """Every layer's attention weights for one teacher-forced pass (for plotting)."""
        self._check_pair(src, tgt)
        memory, encoder_maps = self._encode(src, need_weights=True)
        _, decoder_maps = self._decode(tgt, memory, src, need_weights=True)
        return AttentionMaps(
            encoder=[m["self"] for m in encoder_maps],
            decoder_self=[m["self"] for m in decoder_maps],
            decoder_cross=[m["cross"] for m in decoder_maps],
        )

    def start_decoding(self, inputs: Tensor, use_cache: bool = True, beams: int = 1) -> tuple[Tensor, Decoding]:
        memory = self._encode(inputs)[0]
        src = inputs.repeat_interleave(beams, dim=0)
        state = Decoding(self.decoder.new_cache() if use_cache else None, memory.repeat_interleave(beams, dim=0),
                         padding_mask(src, self.spec.pad_id))
        return torch.full((src.size(0), 1), self.spec.bos_id, dtype=torch.long, device=src.device), state

    def _check_pair(self, src: Tensor, tgt: Tensor) -> None:
        check_ids("src", src, self.spec.src_vocab_size)
        check_ids("tgt", tgt, self.spec.tgt_vocab_size)
        check_same_batch(src, tgt)

    def _encode(self, src: Tensor, need_weights: bool = False):
        return self.encoder(src, padding_mask(src, self.spec.pad_id), need_weights=need_weights)

    def _decode(self, tgt: Tensor, memory: Tensor, src: Tensor, need_weights: bool = False):
        hidden, maps = self.decoder(tgt, target_mask(tgt, self.spec), memory, padding_mask(src, self.spec.pad_id),
                                    need_weights=need_weights)
        return self.generator(hidden), maps
