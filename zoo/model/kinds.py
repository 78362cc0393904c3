"""The models of the three kinds, from one block and one stack, and `build`, which makes one from a
spec, a name or a mapping.

- EncoderDecoder: src -> encoder -> memory; tgt + memory -> decoder -> logits.
- DecoderOnly (kind `decoder`): ids -> causal stack -> next-token logits; a language model.
- EncoderOnly (kind `encoder`): ids -> bidirectional stack -> per-token logits; a masked LM.

Stacks keep their names across kinds (`encoder`, `decoder`, `generator`), so a parameter that two
kinds share has one canonical name and one initial draw.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from zoo.model.decoding import Decoding
from zoo.model.init import draw_seed, initialize
from zoo.model.inputs import check_ids, check_memory, check_same_batch
from zoo.model.masks import input_masks, padding_mask, real_tokens, target_mask
from zoo.model.memory import check_fits
from zoo.model.stacks import Generator, Stack, model_stack
from zoo.parts import stack_sites
from zoo.specs.catalog import resolve
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry

QUERY_WEIGHT = re.compile(r"\.(self|cross)_attn\.q\.weight$")


def init_gain(spec: ModelSpec, name: str) -> float:
    """The norm placement's gain (DeepNorm's beta), times d_head^-1/2 for query weights where the
    scores are not scaled: T5's way of starting from the same function as scaled attention."""
    placement_gain = getattr(registry("norm").get(spec.norm.name), "init_gain", None)  # optional: zoo.parts
    gain = 1.0 if placement_gain is None else placement_gain(spec, name)
    if not spec.scale_scores and QUERY_WEIGHT.search(name):
        gain *= spec.d_head**-0.5
    return gain


class AttentionMaps(NamedTuple):
    """Attention weights per layer, each (batch, heads, queries, keys); empty for a stack the
    model's kind lacks."""

    encoder: list[Tensor]
    decoder_self: list[Tensor]
    decoder_cross: list[Tensor]


class ZooModel(nn.Module):
    """What every kind shares: built from a spec, its weights initialized from `seed` (by default
    one draw from torch's global generator) so that variants sharing a parameter share its initial
    value (see zoo.model.init), an output projection, and decoding for the kinds that decode."""

    kind: ClassVar[str]

    def __init__(self, spec: ModelSpec, seed: int | None = None):
        super().__init__()
        if spec.kind != self.kind:
            raise ValueError(f"{type(self).__name__} builds kind {self.kind}, but the spec's kind is {spec.kind}; "
                             "use zoo.build")
        check_fits(spec, "cpu")  # weights are made on the host first
        self.spec = spec
        sites = stack_sites(spec)
        with torch.random.fork_rng(devices=[]):  # construction's own draws are replaced by initialize
            for name in sites:  # `encoder` and/or `decoder`
                setattr(self, name, model_stack(spec, name, sites))
            self.generator = Generator(spec)
        if spec.share_embeddings:  # the table, and its projection where factorized
            self.decoder.embed.tokens.weight = self.encoder.embed.tokens.weight
            if spec.embedding_dim is not None:
                self.decoder.embed.project.weight = self.encoder.embed.project.weight
        if spec.tie_embeddings:
            self.generator.weight = self.output_stack.embed.tokens.weight
        initialize(self, draw_seed() if seed is None else seed, gain=partial(init_gain, spec))

    def save_pretrained(self, directory) -> Path:
        """The model as a folder (config.json, model.safetensors) that zoo.from_pretrained reads."""
        from zoo.model.pretrained import save_pretrained

        return save_pretrained(self, directory)

    @property
    def output_stack(self) -> Stack:
        """The stack whose output the generator reads (and whose table it ties to)."""
        return self.decoder if hasattr(self, "decoder") else self.encoder

    def num_parameters(self) -> int:
        """Trained parameters, each shared one once (a fixed logits bias is not trained)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def generate(self, inputs: Tensor, max_new_tokens: int | None = None, use_cache: bool = True,
                 num_beams: int = 1, length_penalty: float = 1.0) -> Tensor:
        """Greedy decoding (zoo.model.generate.greedy), or beam search with `num_beams` > 1
        (zoo.model.beam.beam_search, scores divided by length ** length_penalty), through the public
        decoding step (`start_decoding`, `decode_step`). Without `max_new_tokens`, at most 2 x the
        input's padded length + 10 new tokens, within max_len."""
        if num_beams == 1:
            from zoo.model.generate import greedy

            return greedy(self, inputs, max_new_tokens, use_cache)
        from zoo.model.beam import beam_search

        return beam_search(self, inputs, num_beams, max_new_tokens, length_penalty, use_cache)

    def start_decoding(self, inputs: Tensor, use_cache: bool = True, beams: int = 1) -> tuple[Tensor, Decoding]:
        """The first tokens of every row (each row repeated `beams` times) and the state that
        `decode_step` carries between steps."""
        raise TypeError(f"a model of kind {self.kind} does not decode; its forward gives per-token logits")

    @torch.no_grad()
    def decode_step(self, tokens: Tensor, state: Decoding) -> Tensor:
        """Next-token logits (B, vocab) of each row of `tokens`, every token so far (B, T), feeding
        the model only what the cache lacks. Rows keep their own positions, so right-padded
        prompts of different lengths decode in one batch."""
        fed = state.fed if state.cache is not None else 0
        new = tokens[:, fed:]
        mask = target_mask(tokens, self.spec)
        positions = None
        if state.own_positions:
            positions = (real_tokens(tokens, self.spec).cumsum(1) - 1).clamp(min=0)[:, fed:]
        hidden = self.decoder(new, mask, state.memory, state.memory_mask, state.cache, positions)[0]
        state.fed = tokens.size(1)
        if state.first is not None:  # the prompt's step (nothing was fed before): each row's last prompt token
            last, state.first = state.first, None
            return self.generator(hidden[torch.arange(hidden.size(0), device=hidden.device), last])
        return self.generator(hidden[:, -1])


class EncoderDecoder(ZooModel):
    """src ids -> encoder -> memory; tgt ids + memory -> decoder -> logits over the target vocabulary."""

    kind = "encoder_decoder"

    def forward(self, src: Tensor, tgt: Tensor, padding: tuple[Tensor | None, Tensor | None] | None = None,
                head: bool = True) -> Tensor:
        """Logits (B, T, tgt_vocab_size) for int64 src (B, S) and tgt (B, T); with `head` False, the
        decoder's output (B, T, d_model) that the generator would read (a loss that applies the
        generator a chunk at a time: zoo.trainer.objective).

        `padding` is (src mask, tgt mask) from zoo.model.masks.padding_mask, built while the ids were on
        the host, where the ids were checked too (the trainer's batches): then nothing here reads a
        value back from the device, so a CUDA step never waits."""
        if padding is None:
            self._check_pair(src, tgt)
            padding = input_masks(self.spec, (src, tgt))
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


class DecoderOnly(ZooModel):
    """ids -> causal stack -> next-token logits: a language model; `generate(prompt)` returns each
    prompt followed by its continuation."""

    kind = "decoder"

    def forward(self, ids: Tensor, padding: tuple[Tensor | None] | None = None, head: bool = True) -> Tensor:
        """Logits (B, T, vocab): position t predicts token t + 1. `padding` is (mask,) built on
        the host, as the encoder-decoder's is; `head` as there."""
        if padding is None:
            check_ids("ids", ids, self.spec.tgt_vocab_size)
            padding = input_masks(self.spec, (ids,))
        hidden = self.decoder(ids, padding[0])[0]
        return self.generator(hidden) if head else hidden

    def attention_maps(self, ids: Tensor) -> AttentionMaps:
        check_ids("ids", ids, self.spec.tgt_vocab_size)
        maps = self.decoder(ids, target_mask(ids, self.spec), need_weights=True)[1]
        return AttentionMaps(encoder=[], decoder_self=[m["self"] for m in maps], decoder_cross=[])

    def start_decoding(self, inputs: Tensor, use_cache: bool = True, beams: int = 1) -> tuple[Tensor, Decoding]:
        prompt = inputs.repeat_interleave(beams, dim=0)
        last = (real_tokens(prompt, self.spec).sum(1) - 1).clamp(min=0)  # rows are right-padded
        return prompt, Decoding(self.decoder.new_cache() if use_cache else None, own_positions=True, first=last)


class EncoderOnly(ZooModel):
    """ids -> bidirectional stack -> per-token logits (a masked-language-model head)."""

    kind = "encoder"

    def forward(self, ids: Tensor, padding: tuple[Tensor | None] | None = None, head: bool = True) -> Tensor:
        """Logits (B, T, vocab) of every position, each seeing the whole row but its padding;
        `head` as the encoder-decoder's."""
        if padding is None:
            check_ids("ids", ids, self.spec.src_vocab_size)
            padding = input_masks(self.spec, (ids,))
        hidden = self.encoder(ids, padding[0])[0]
        return self.generator(hidden) if head else hidden

    def attention_maps(self, ids: Tensor) -> AttentionMaps:
        check_ids("ids", ids, self.spec.src_vocab_size)
        maps = self.encoder(ids, padding_mask(ids, self.spec.pad_id), need_weights=True)[1]
        return AttentionMaps(encoder=[m["self"] for m in maps], decoder_self=[], decoder_cross=[])


MODELS: dict[str, type[ZooModel]] = {model.kind: model for model in (EncoderDecoder, DecoderOnly, EncoderOnly)}


def model_class(spec: ModelSpec) -> type[ZooModel]:
    return MODELS[spec.kind]


def build(source: ModelSpec | str | Mapping[str, Any], /, *, seed: int | None = None, **overrides: Any) -> ZooModel:
    """A model of the spec's kind from a ModelSpec, a preset or canonical name, or a mapping, with
    field overrides."""
    spec = resolve(source, **overrides)
    return model_class(spec)(spec, seed=seed)
