"""The two stacks: embed -> positions -> blocks -> optional final norm."""

from __future__ import annotations

import math

from torch import Tensor, nn

from zoo.attend import DecoderCache, LayerCache
from zoo.blocks import DecoderBlock, EncoderBlock
from zoo.dropout import Dropout
from zoo.model_spec import ModelSpec
from zoo.parts import Stack, build_part


def final_norm(spec: ModelSpec) -> nn.Module:
    return build_part("norm_type", spec) if spec.uses_final_norm else nn.Identity()


class Embedder(nn.Module):
    """Token embedding (times sqrt(d_model) if the spec scales), positions, optional norm, dropout.
    Its position scheme serves every layer of the stack (so a learned bias is shared by them)."""

    def __init__(self, spec: ModelSpec, vocab_size: int, stack: Stack):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, spec.d_model)
        # Scaled embeddings start at std d^-1/2 so that, scaled, they have unit variance either way.
        self.tokens.init_std = spec.d_model**-0.5 if spec.scale_embeddings else 1.0
        self.scale = math.sqrt(spec.d_model) if spec.scale_embeddings else 1.0
        self.position = build_part("position", spec, stack=stack)
        self.norm = build_part("norm_type", spec) if spec.embedding_norm else nn.Identity()
        self.dropout = Dropout(spec.dropout)

    def forward(self, ids: Tensor, offset: int = 0) -> Tensor:
        x = self.tokens(ids)
        if self.scale != 1.0:
            x = x * self.scale
        return self.dropout(self.norm(self.position(x, offset)))


class Generator(nn.Linear):
    """The output projection to the target vocabulary, of d_model^-1/2 times the decoder's output
    where the spec scales it (T5 1.0), with the spec's logits bias: trained, fixed (a parameter the
    optimizer never changes, BART's final_logits_bias) or none."""

    def __init__(self, spec: ModelSpec):
        super().__init__(spec.d_model, spec.tgt_vocab_size, bias=spec.logits_bias != "none")
        if spec.logits_bias == "fixed":
            self.bias.requires_grad_(False)
        self.scale = spec.d_model**-0.5 if spec.scale_output else 1.0

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x * self.scale if self.scale != 1.0 else x)


class Encoder(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.embed = Embedder(spec, spec.src_vocab_size, "encoder")
        self.layers = nn.ModuleList(EncoderBlock(spec) for _ in range(spec.n_encoder_layers))
        self.norm = final_norm(spec)

    def forward(self, src: Tensor, mask: Tensor | None, need_weights: bool = False):
        x, maps = self.embed(src), []
        for layer in self.layers:
            x, weights = layer(x, mask, self.embed.position, need_weights)
            maps.append(weights)
        return self.norm(x), maps


class Decoder(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.embed = Embedder(spec, spec.tgt_vocab_size, "decoder")
        self.layers = nn.ModuleList(DecoderBlock(spec) for _ in range(spec.n_decoder_layers))
        self.norm = final_norm(spec)

    def new_cache(self) -> DecoderCache:
        return DecoderCache([LayerCache() for _ in self.layers])

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        self_mask: Tensor | None,
        cross_mask: Tensor | None,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
    ):
        """With a cache, `tgt` holds only the new positions; earlier ones are in the cache.
        `self_mask` is the padding of every target token so far (or None); causality is added by
        the self-attention itself."""
        offset = 0 if cache is None else cache.offset
        x, maps = self.embed(tgt, offset), []
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache.layers[i]
            x, weights = layer(
                x, memory, self_mask, cross_mask, self.embed.position, offset, layer_cache, need_weights
            )
            maps.append(weights)
        if cache is not None:
            cache.offset += tgt.size(1)
        return self.norm(x), maps
