"""EncoderDecoder: the full model, and `build`, which makes one from a spec, a name or a mapping."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from zoo.catalog import resolve
from zoo.init import draw_seed, initialize
from zoo.inputs import check_ids, check_memory, check_same_batch
from zoo.masks import padding_mask, target_mask
from zoo.memory import check_fits
from zoo.model_spec import ModelSpec
from zoo.registries import registry
from zoo.stacks import Decoder, Encoder, Generator

QUERY_WEIGHT = re.compile(r"\.(self|cross)_attn\.q\.weight$")


def init_gain(spec: ModelSpec, name: str) -> float:
    """The norm placement's gain (DeepNorm's beta), times d_head^-1/2 for query weights where the
    scores are not scaled: T5's way of starting from the same function as scaled attention."""
    gain = registry("norm").get(spec.norm.name).init_gain(spec, name)
    if not spec.scale_scores and QUERY_WEIGHT.search(name):
        gain *= spec.d_head**-0.5
    return gain


class AttentionMaps(NamedTuple):
    """Attention weights per layer, each (batch, heads, queries, keys)."""

    encoder: list[Tensor]
    decoder_self: list[Tensor]
    decoder_cross: list[Tensor]


class EncoderDecoder(nn.Module):
    """src ids -> encoder -> memory; tgt ids + memory -> decoder -> logits over the target vocabulary.

    Weights are initialized from `seed` (by default one draw from torch's global generator) so
    that variants sharing a parameter share its initial value; see zoo.init.
    """

    def __init__(self, spec: ModelSpec, seed: int | None = None):
        super().__init__()
        check_fits(spec, "cpu")  # weights are made on the host first
        self.spec = spec
        with torch.random.fork_rng(devices=[]):  # construction's own draws are replaced by initialize
            self.encoder = Encoder(spec)
            self.decoder = Decoder(spec)
            self.generator = Generator(spec)
        if spec.share_embeddings:
            self.decoder.embed.tokens.weight = self.encoder.embed.tokens.weight
        if spec.tie_embeddings:
            self.generator.weight = self.decoder.embed.tokens.weight
        initialize(self, draw_seed() if seed is None else seed, gain=partial(init_gain, spec))

    def forward(self, src: Tensor, tgt: Tensor, padding: tuple[Tensor | None, Tensor | None] | None = None) -> Tensor:
        """Logits (B, T, tgt_vocab_size) for int64 src (B, S) and tgt (B, T).

        `padding` is (src mask, tgt mask) from zoo.masks.padding_mask, built while the ids were on
        the host, where the ids were checked too (the trainer's batches): then nothing here reads a
        value back from the device, so a CUDA step never waits."""
        if padding is None:
            self._check_pair(src, tgt)
            padding = (padding_mask(src, self.spec.pad_id), target_mask(tgt, self.spec))
        memory = self.encoder(src, padding[0])[0]
        return self.generator(self.decoder(tgt, memory, padding[1], padding[0])[0])

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

    def generate(self, src: Tensor, max_new_tokens: int | None = None, use_cache: bool = True,
                 num_beams: int = 1, length_penalty: float = 1.0) -> Tensor:
        """Greedy decoding (zoo.generate.greedy), or beam search with `num_beams` > 1
        (zoo.beam.beam_search, scores divided by length ** length_penalty). Without
        `max_new_tokens`, at most 2 x the source's padded length + 10 new tokens, within max_len."""
        if num_beams == 1:
            from zoo.generate import greedy

            return greedy(self, src, max_new_tokens, use_cache)
        from zoo.beam import beam_search

        return beam_search(self, src, num_beams, max_new_tokens, length_penalty, use_cache)

    def num_parameters(self) -> int:
        """Trained parameters, each shared one once (a fixed logits bias is not trained)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def _check_pair(self, src: Tensor, tgt: Tensor) -> None:
        check_ids("src", src, self.spec.src_vocab_size)
        check_ids("tgt", tgt, self.spec.tgt_vocab_size)
        check_same_batch(src, tgt)

    def _encode(self, src: Tensor, need_weights: bool = False):
        return self.encoder(src, padding_mask(src, self.spec.pad_id), need_weights)

    def _decode(self, tgt: Tensor, memory: Tensor, src: Tensor, need_weights: bool = False):
        self_mask, cross_mask = target_mask(tgt, self.spec), padding_mask(src, self.spec.pad_id)
        hidden, maps = self.decoder(tgt, memory, self_mask, cross_mask, None, need_weights)
        return self.generator(hidden), maps


def build(source: ModelSpec | str | Mapping[str, Any], /, *, seed: int | None = None, **overrides: Any) -> EncoderDecoder:
    """A model from a ModelSpec, a preset or canonical name, or a mapping, with field overrides."""
    return EncoderDecoder(resolve(source, **overrides), seed=seed)
