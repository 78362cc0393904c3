"""The encoder and decoder blocks of Figure 1 of "Attention Is All You Need".

Each sublayer (attention or feed-forward) is wrapped by the spec's norm placement, which owns the
residual connection, the normalization (the spec's norm_type) and the dropout of that sublayer.
"""

from __future__ import annotations

from torch import Tensor, nn

from zoo.attend import LayerCache
from zoo.model_spec import ModelSpec
from zoo.parts import PositionScheme, build_part


class EncoderBlock(nn.Module):
    """Self-attention over the source, then the feed-forward."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.self_attn = build_part("attention", spec)
        self.self_attn_residual = build_part("norm", spec, stack="encoder")
        self.ffn = build_part("ffn", spec)
        self.ffn_residual = build_part("norm", spec, stack="encoder")

    def forward(self, x: Tensor, mask: Tensor | None, position: PositionScheme, need_weights: bool = False):
        weights = {}

        def self_attention(h: Tensor) -> Tensor:
            out, weights["self"] = self.self_attn(h, mask=mask, position=position, need_weights=need_weights)
            return out

        x = self.self_attn_residual(x, self_attention)
        x = self.ffn_residual(x, self.ffn)
        return x, weights


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention to the encoder memory, then the feed-forward."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.self_attn = build_part("attention", spec)
        self.self_attn_residual = build_part("norm", spec, stack="decoder")
        self.cross_attn = build_part("attention", spec)
        self.cross_attn_residual = build_part("norm", spec, stack="decoder")
        self.ffn = build_part("ffn", spec)
        self.ffn_residual = build_part("norm", spec, stack="decoder")

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None,
        cross_mask: Tensor | None,
        position: PositionScheme,
        offset: int = 0,
        cache: LayerCache | None = None,
        need_weights: bool = False,
    ):
        weights = {}

        def self_attention(h: Tensor) -> Tensor:
            out, weights["self"] = self.self_attn(
                h, mask=self_mask, causal=True, position=position, offset=offset,
                cache=None if cache is None else cache.self_attn, need_weights=need_weights,
            )
            return out

        def cross_attention(h: Tensor) -> Tensor:
            out, weights["cross"] = self.cross_attn(
                h, memory, mask=cross_mask, cache=None if cache is None else cache.cross_attn, need_weights=need_weights
            )
            return out

        x = self.self_attn_residual(x, self_attention)
        x = self.cross_attn_residual(x, cross_attention)
        x = self.ffn_residual(x, self.ffn)
        return x, weights
