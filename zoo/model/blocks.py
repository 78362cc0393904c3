"""The block of Figure 1 of "Attention Is All You Need", one for all three kinds of model.

Self-attention (causal in a decoder, bidirectional in an encoder), cross-attention to a memory
where the stack has one (the decoder of an encoder-decoder), then the feed-forward. Each sublayer
is wrapped by the spec's norm placement, which owns the residual connection, the normalization
(the spec's norm_type) and the dropout of that sublayer.
"""

from __future__ import annotations

from torch import Tensor, nn

from zoo.model.attend import LayerCache
from zoo.parts import PositionScheme, Site, build_part
from zoo.specs.model_spec import ModelSpec


class Block(nn.Module):
    def __init__(self, spec: ModelSpec, site: Site, cross: bool):
        super().__init__()
        self.causal, self.cross = site.causal, cross
        self.self_attn = build_part("attention", spec)
        self.self_attn_residual = build_part("norm", spec, site=site)
        if cross:
            self.cross_attn = build_part("attention", spec)
            self.cross_attn_residual = build_part("norm", spec, site=site)
        self.ffn = build_part("ffn", spec)
        self.ffn_residual = build_part("norm", spec, site=site)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None,
        position: PositionScheme,
        positions: Tensor,
        key_positions: Tensor,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: LayerCache | None = None,
        need_weights: bool = False,
    ):
        weights = {}

        def self_attention(h: Tensor) -> Tensor:
            out, weights["self"] = self.self_attn(
                h, mask=mask, causal=self.causal, position=position, positions=positions, key_positions=key_positions,
                cache=None if cache is None else cache.self_attn, need_weights=need_weights,
            )
            return out

        def cross_attention(h: Tensor) -> Tensor:
            out, weights["cross"] = self.cross_attn(
                h, memory, mask=memory_mask, cache=None if cache is None else cache.cross_attn, need_weights=need_weights
            )
            return out

        x = self.self_attn_residual(x, self_attention)
        if self.cross:
            x = self.cross_attn_residual(x, cross_attention)
        return self.ffn_residual(x, self.ffn), weights
