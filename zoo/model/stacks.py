"""The stack, one for all three kinds: embed -> positions -> blocks -> optional final norm; and the
output projection."""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from pydantic import BaseModel
from torch import Tensor, nn

from zoo.dropout.masks import Dropout
from zoo.errors import ConfigError
from zoo.kernels.attend import DecoderCache, LayerCache
from zoo.model.blocks import Block
from zoo.parts import PositionScheme, Site
from zoo.roles import HoldsWeights, Role
from zoo.specs.model_spec import ModelSpec
from zoo.specs.parametrization import is_mup, scaling_width, width_multiplier
from zoo.specs.registries import build_part, registry


def final_norm(spec: ModelSpec) -> nn.Module:
    return build_part("norm_type", spec) if spec.uses_final_norm else nn.Identity()


def narrow_embedding(spec: ModelSpec) -> bool:
    """Whether the whole embedding and the output head work at the factorized width (ALBERT, ELECTRA)."""
    return spec.embeddings.dim is not None and spec.embeddings.dim_scope == "embedding"


def at_width(spec: ModelSpec, width: int) -> ModelSpec:
    """The spec as parts built at another width read it: d_model changed, the heads' width kept (a
    copy that is not a model spec, so not validated as one)."""
    attn = spec.attn.model_copy(update={"head_width": spec.d_head})
    return BaseModel.model_copy(spec, update={"d_model": width, "attn": attn})


class Embedder(HoldsWeights, nn.Module):
    """Token embedding (times sqrt(d_model) if the spec scales), positions, optional norm, dropout.
    Factorized, the token table is narrower than d_model and projected to it before the positions,
    or (dim_scope embedding: ALBERT, ELECTRA) the whole embedding is narrow and projected after its
    norm and dropout. Its position scheme serves every layer of the stack (so a learned bias is shared
    by them)."""

    def __init__(self, spec: ModelSpec, vocab_size: int, site: Site):
        super().__init__()
        self.narrow = narrow_embedding(spec)
        inner = at_width(spec, spec.embedding_width) if self.narrow else spec
        self.tokens = nn.Embedding(vocab_size, spec.embedding_width)
        self.weight_roles = {"tokens.weight": "embedding.tokens"}
        if spec.embeddings.dim is not None:
            self.project = nn.Linear(spec.embeddings.dim, spec.d_model, bias=self.narrow and spec.bias)
            self.weight_roles = {**self.weight_roles, "project.weight": "embedding.projection"}
        # Scaled embeddings start at std d^-1/2 so that, scaled, they have unit variance either way
        # (under muP, d of the base width: input coordinates and their updates stay the same size).
        width = scaling_width(spec)
        self.init_std = spec.embeddings.init_std or (width**-0.5 if spec.embeddings.scale else 1.0)
        self.scale = math.sqrt(width) if spec.embeddings.scale else 1.0
        self.position = build_part("position", inner, site=site)
        self.norm = build_part("norm_type", inner) if spec.embeddings.norm else nn.Identity()
        self.dropout = Dropout(spec.dropout_at("embedding"))

    def forward(self, ids: Tensor, positions: Tensor) -> Tensor:
        x = self.tokens(ids)
        if hasattr(self, "project") and not self.narrow:
            x = self.project(x)
        if self.scale != 1.0:
            x = x * self.scale
        x = self.dropout(self.norm(self.position(x, positions)))
        return self.project(x) if self.narrow else x


class OutputTransform(HoldsWeights, nn.Module):
    """Dense, GELU, norm: BERT's transform of the last hidden states before its output projection,
    to the factorized width where the whole embedding is narrow (ALBERT's and ELECTRA's heads)."""

    weight_roles: ClassVar[dict[str, Role]] = {"dense.weight": "output.transform"}

    def __init__(self, spec: ModelSpec):
        super().__init__()
        width = spec.embedding_width if narrow_embedding(spec) else spec.d_model
        self.dense = nn.Linear(spec.d_model, width, bias=spec.bias)
        self.act = nn.GELU()
        self.norm = build_part("norm_type", at_width(spec, width))

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(self.act(self.dense(x)))


class OutputProjection(HoldsWeights, nn.Linear):
    """The output projection to the target vocabulary, of d_model^-1/2 times the last stack's
    output where the spec scales it (T5 1.0), after the spec's output transform (BERT), with the
    spec's logits bias: trained, fixed (a parameter the optimizer never changes, BART's
    final_logits_bias) or none; scaled where the spec scales logits (Cohere), then soft-capped
    where it caps them (Gemma 2). Tied to a factorized table, or wherever the whole embedding is
    narrow, it reads the factorized width: through the transform where that maps to it, else
    through a bias-free projection from d_model (ALBERT)."""

    def __init__(self, spec: ModelSpec):
        narrow = narrow_embedding(spec)
        factorized = spec.embeddings.dim is not None and (spec.embeddings.tie or narrow)
        super().__init__(spec.embedding_width if factorized else spec.d_model, spec.tgt_vocab_size,
                         bias=spec.logits_bias != "none")
        self.weight_roles = {"weight": "output.projection"}
        if factorized and not (narrow and spec.output.transform):
            self.project = nn.Linear(spec.d_model, spec.embeddings.dim, bias=False)
            self.weight_roles = {**self.weight_roles, "project.weight": "output.projection"}
        if spec.logits_bias == "fixed":
            self.bias.requires_grad_(False)
        # muP's output multiplier 1/m, and T5's d^-1/2 at the base width (zoo.specs.parametrization)
        self.scale = scaling_width(spec) ** -0.5 if spec.output.scale else 1.0
        if is_mup(spec):
            self.scale /= width_multiplier(spec)
        self.transform = OutputTransform(spec) if spec.output.transform else nn.Identity()
        self.softcap, self.logit_scale = spec.output.softcap, spec.output.logit_scale

    def forward(self, x: Tensor) -> Tensor:
        x = self.transform(x)
        if hasattr(self, "project"):
            x = self.project(x)
        logits = super().forward(x * self.scale if self.scale != 1.0 else x)
        if self.logit_scale is not None:
            logits = logits * self.logit_scale
        return logits if self.softcap is None else self.softcap * torch.tanh(logits / self.softcap)


class Stack(nn.Module):
    """N blocks over one embedded sequence: an encoder (bidirectional), a decoder-only model's
    stack (causal), or an encoder-decoder's decoder (causal, with cross-attention to a memory).
    With `share_layers`, one block is applied N times (each application with a cache of its own).
    A layer that the spec's per-layer rules change is built from its own spec (spec.at_layer), with
    a position scheme of its own where the rules change the stack's (Gemma 3's global rope base)."""

    def __init__(self, spec: ModelSpec, vocab_size: int, layers: int, site: Site, cross: bool = False):
        super().__init__()
        self.embed = Embedder(spec, vocab_size, site)
        self.depth = layers
        self.layers = nn.ModuleList(layer_block(spec, i, site, cross) for i in range(1 if spec.share_layers else layers))
        self.schemes = [self.embed.position, *(layer.position for layer in self.layers if hasattr(layer, "position"))]
        self.norm = final_norm(spec)

    def prepare_positions(self, length: int) -> None:
        """Positions 0 .. length - 1 are about to be used (zoo.parts.PositionScheme.prepare)."""
        for scheme in self.schemes:
            scheme.prepare(length)

    def applied(self) -> list[Block]:
        """The block at each depth."""
        return list(self.layers) if len(self.layers) == self.depth else [self.layers[0]] * self.depth

    def new_cache(self) -> DecoderCache:
        return DecoderCache([LayerCache() for _ in range(self.depth)])

    def forward(
        self,
        ids: Tensor,
        mask: Tensor | None,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        positions: Tensor | None = None,
        need_weights: bool = False,
    ):
        """Hidden states (B, T, d_model) and each layer's attention weights. `mask` is the padding
        of every position so far, cached ones included (or None); causality is added by the
        self-attention itself. With a cache, `ids` holds only the new positions. `positions`
        (B or 1, T) default to the columns' own (after the cached ones)."""
        start = 0 if cache is None else cache.length
        if positions is None:
            positions = torch.arange(start, start + ids.size(1), device=ids.device)[None]
        self.prepare_positions(start + ids.size(1))
        key_positions = positions if cache is None else cache.extend(positions)
        x, maps = self.embed(ids, positions), []
        for i, layer in enumerate(self.applied()):
            position = layer.position if hasattr(layer, "position") else self.embed.position
            x, weights = layer(x, mask, position, positions, key_positions, memory, memory_mask,
                               None if cache is None else cache.layers[i], need_weights)
            maps.append(weights)
        return self.norm(x), maps


def layer_block(spec: ModelSpec, index: int, site: Site, cross: bool) -> Block:
    """The block at depth `index` of the stack at `site`, as the spec's per-layer rules make it."""
    layer = spec.at_layer("decoder" if site.causal else "encoder", index)
    block = Block(layer, site, cross)
    if layer.position != spec.position:
        schemes = (registry("position").get(choice.name) for choice in (spec.position, layer.position))
        if any(scheme.forward is not PositionScheme.forward for scheme in schemes):
            raise ConfigError(f"layers: position {spec.position} -> {layer.position} at layer {index}: a layer may "
                              "change only a scheme that acts inside attention (rope, alibi, t5); one that adds to "
                              "the embeddings serves the whole stack")
        block.position = build_part("position", layer, site=site)
    return block


def model_stack(spec: ModelSpec, name: str, sites: dict[str, Site], layers: int | None = None) -> Stack:
    """The model's stack `name` (see zoo.model.assembly.stack_sites): the encoder reads the source
    vocabulary, the decoder the target's and cross-attends where the model has an encoder; its
    depth is the site's unless `layers` says otherwise (counting parameters from small stacks)."""
    site = sites[name]
    vocab = spec.src_vocab_size if name == "encoder" else spec.tgt_vocab_size
    return Stack(spec, vocab, site.layers if layers is None else layers, site,
                 cross=name == "decoder" and "encoder" in sites)
