"""What the models of every kind share, and the questions each kind answers about its framing.

A kind is one class: how it frames a task's (source, target) pairs into inputs and labels, which
padding masks its inputs take, how long each stack's input is, where decoding starts and what it
returns. The trainer, evaluation, decoding, pictures and size checks ask the model's class, so
they never test which kind they hold, and a new kind (zoo.model.kinds.register_kind) is one new
class.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from zoo.errors import ConfigError, ConfigTypeError
from zoo.kernels.masks import document_positions, real_tokens, self_mask
from zoo.model.assembly import stack_sites
from zoo.model.beam import beam_search
from zoo.model.decoding import Decoding
from zoo.model.generate import greedy
from zoo.model.init import draw_seed, initialize
from zoo.model.pretrained import save_pretrained
from zoo.model.size_checks import check_fits
from zoo.model.stacks import OutputProjection, Stack, model_stack
from zoo.parts import Site
from zoo.roles import Role
from zoo.specs.hooks import InitGain, implements
from zoo.specs.model_spec import ModelSpec
from zoo.specs.parametrization import is_mup, width_multiplier
from zoo.specs.registries import registry


def init_gain(spec: ModelSpec, role: Role | None, site: Site | None) -> float:
    """The norm placement's gain for a matrix of this role (DeepNorm's beta, Fixup's), times
    d_head^-1/2 for query weights where the scores are not scaled: T5's way of starting from the
    same function as scaled attention."""
    placement = registry("norm").get(spec.norm.name)
    gain = placement.init_gain(spec, role, site) if implements(placement, InitGain) else 1.0
    if not spec.attn.scale_scores and role == "attention.query":
        gain *= spec.d_head**-0.5
    if role == "ffn.router" and is_mup(spec):  # a readout to a fixed width: std ~ 1/fan-in (zoo.model.mup)
        gain *= width_multiplier(spec) ** -0.5
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
            raise ConfigError(f"{type(self).__name__} builds kind {self.kind}, but the spec's kind is {spec.kind}; "
                              "use zoo.build")
        check_fits(spec, "cpu")  # weights are made on the host first
        self.spec = spec
        sites = stack_sites(spec)
        with torch.random.fork_rng(devices=[]):  # construction's own draws are replaced by initialize
            for name in sites:  # `encoder` and/or `decoder`
                setattr(self, name, model_stack(spec, name, sites))
            self.generator = OutputProjection(spec)
        if spec.embeddings.share:  # the table, and its projection where factorized
            self.decoder.embed.tokens.weight = self.encoder.embed.tokens.weight
            if spec.embeddings.dim is not None:
                self.decoder.embed.project.weight = self.encoder.embed.project.weight
                if self.encoder.embed.project.bias is not None:
                    self.decoder.embed.project.bias = self.encoder.embed.project.bias
        if spec.embeddings.tie:
            self.generator.weight = self.output_stack.embed.tokens.weight
        initialize(self, draw_seed() if seed is None else seed, sites, gain=partial(init_gain, spec))

    def save_pretrained(self, directory) -> Path:
        """The model as a folder (config.json, model.safetensors) that zoo.from_pretrained reads."""
        return save_pretrained(self, directory)

    @property
    def output_stack(self) -> Stack:
        """The stack whose output the generator reads (and whose table it ties to)."""
        return self.decoder if "decoder" in self.reads else self.encoder

    def num_parameters(self) -> int:
        """Trained parameters, each shared one once (a fixed logits bias is not trained)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    # -- the kind's framing: class methods, so that a spec is enough (before any model is built) --

    reads: ClassVar[dict[str, str]]
    """Each stack the kind has, and what it reads: "source", "target", or "source and target". A
    kind of one stack reads source and target in one vocabulary."""
    trains_on: ClassVar[str] = "sequences"
    """The examples the kind learns from, as a task makes them (Task.shape): "sequences" (a
    target to generate for each source) or "positions" (a label at each position of the source)."""
    cross_attention: ClassVar[bool] = False
    """Whether a decoder attends to an encoder's memory (a picture of it can be drawn)."""

    @classmethod
    def frame(cls, spec: ModelSpec, src: Tensor, tgt: Tensor) -> tuple[tuple[Tensor, ...], Tensor]:
        """The model's inputs for a task's (src, tgt) batch, and the labels of each input position
        (the pad id where nothing is predicted)."""
        raise NotImplementedError

    @classmethod
    def input_masks(cls, spec: ModelSpec, inputs: tuple[Tensor, ...]) -> tuple[Tensor | None, ...]:
        """The padding masks (zoo.kernels.masks) that forward takes with these inputs."""
        raise NotImplementedError

    @classmethod
    def continues_positions(cls, spec: ModelSpec) -> bool:
        """Whether forward takes `offsets`, so that a document cut across packed rows continues its
        positions in the next row: only a kind that restarts them at each document does."""
        return False

    @classmethod
    def sequence_lengths(cls, spec: ModelSpec, src_len: int, tgt_len: int) -> tuple[int, int]:
        """(encoder, decoder) input lengths of a pair whose source and target have these lengths; 0
        for a stack the kind lacks."""
        raise NotImplementedError

    @classmethod
    def prompts(cls, spec: ModelSpec, src: Tensor) -> Tensor:
        """What `generate` reads for a batch of the task's sources: the sources themselves."""
        return src

    @classmethod
    def decoding_input(cls, spec: ModelSpec) -> tuple[str, int]:
        """(name, vocabulary size) of what `generate` reads; a kind that does not decode raises."""
        raise ConfigError(f"a model of kind {spec.kind} does not decode; its forward gives per-token logits")

    @classmethod
    def start_columns(cls, spec: ModelSpec, input_len: int) -> int:
        """Positions the decoder holds before the first new token, for an input of this length."""
        raise NotImplementedError

    @classmethod
    def joined(cls, spec: ModelSpec, inputs: Tensor, generated: Tensor) -> Tensor:
        """What decoding returns, from the inputs and the generated ids (B, steps); with no rows,
        what an empty batch gives."""
        raise NotImplementedError

    @classmethod
    def continuations(cls, spec: ModelSpec, src: Tensor, decoded: Tensor) -> list[list[int]]:
        """The generated ids of each row of `joined`'s output, without what was given."""
        raise NotImplementedError

    def check_decoding_length(self, length: int) -> None:
        """Refuse a decoding whose decoder would hold more positions than its table has."""
        self.decoder.embed.position.check_length(length)

    def position_limits(self) -> dict[str, int | None]:
        """The longest input each stack's positions can place (None: any)."""
        return {name: getattr(self, name).embed.position.max_length for name in self.reads}

    def generate(self, inputs: Tensor, max_new_tokens: int | None = None, use_cache: bool = True,
                 num_beams: int = 1, length_penalty: float = 1.0) -> Tensor:
        """Greedy decoding (zoo.model.generate.greedy), or beam search with `num_beams` > 1
        (zoo.model.beam.beam_search, scores divided by length ** length_penalty), through the public
        decoding step (`start_decoding`, `decode_step`). Without `max_new_tokens`, at most 2 x the
        input's padded length + 10 new tokens, within max_len."""
        if num_beams == 1:
            return greedy(self, inputs, max_new_tokens, use_cache)
        return beam_search(self, inputs, num_beams, max_new_tokens, length_penalty, use_cache)

    def start_decoding(self, inputs: Tensor, use_cache: bool = True, beams: int = 1) -> tuple[Tensor, Decoding]:
        """The first tokens of every row (each row repeated `beams` times) and the state that
        `decode_step` carries between steps."""
        raise ConfigTypeError(f"a model of kind {self.kind} does not decode; its forward gives per-token logits")

    @torch.no_grad()
    def decode_step(self, tokens: Tensor, state: Decoding) -> Tensor:
        """Next-token logits (B, vocab) of each row of `tokens`, every token so far (B, T), feeding
        the model only what the cache lacks. Rows keep their own positions, so right-padded
        prompts of different lengths decode in one batch."""
        fed = state.fed if state.cache is not None else 0
        new = tokens[:, fed:]
        mask = self_mask(tokens, self.spec, queries=new.size(1))
        positions = None
        if state.own_positions:
            restarted = document_positions(tokens, self.spec)
            own = (real_tokens(tokens, self.spec).cumsum(1) - 1).clamp(min=0) if restarted is None else restarted
            positions = own[:, fed:]
        hidden = self.decoder(new, mask, state.memory, state.memory_mask, state.cache, positions)[0]
        state.fed = tokens.size(1)
        if state.first is not None:  # the prompt's step (nothing was fed before): each row's last prompt token
            last, state.first = state.first, None
            return self.generator(hidden[torch.arange(hidden.size(0), device=hidden.device), last])
        return self.generator(hidden[:, -1])


