"""The block of Figure 1 of "Attention Is All You Need", one for all three kinds of model.

Self-attention (causal in a decoder, bidirectional in an encoder), cross-attention to a memory
where the stack has one (the decoder of an encoder-decoder), then the feed-forward. The spec's
norm placement owns the residual connections, the normalization (the spec's norm_type) and the
dropout: one part per sublayer holds its state, and the placement combines the block's sublayers,
in turn (NormPlacement.compose) or side by side (a placement's own `compose`).
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from zoo.kernels.attend import LayerCache
from zoo.kernels.masks import real_queries
from zoo.parts import NormPlacement, PositionScheme, Site
from zoo.specs.hooks import Composes, TakesRealTokens, implements
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import build_part


class Block(nn.Module):
    def __init__(self, spec: ModelSpec, site: Site, cross: bool):
        super().__init__()
        self.causal, self.cross = site.causal, cross
        self.self_attn = build_part("attention", spec)
        self.self_attn_residual = build_part("norm", spec, site=site, index=0)
        if cross:
            self.cross_attn = build_part("attention", spec)
            self.cross_attn_residual = build_part("norm", spec, site=site, index=1)
        self.ffn = build_part("ffn", spec)
        self.ffn_takes_real_tokens = implements(self.ffn, TakesRealTokens) and self.ffn.takes_real_tokens
        self.ffn_residual = build_part("norm", spec, site=site, index=2 if cross else 1)
        placement = type(self.ffn_residual)
        # found once, not per step; a placement without the hook combines the sublayers in turn
        self.compose = placement.compose if implements(placement, Composes) else NormPlacement.compose

    recompute = False
    """Activation checkpointing (train.activation_checkpointing, set by zoo.trainer.recompute): while
    gradients are taken, keep only the block's inputs and compute it again in the backward pass. The
    random state is replayed (dropout draws the same masks), so gradients are the same."""

    def forward(self, *args, **kwargs):
        if self.recompute and torch.is_grad_enabled():
            return checkpoint(self.compute, *args, use_reentrant=False, **kwargs)
        return self.compute(*args, **kwargs)

    def compute(
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

        steps = [(self.self_attn_residual, self_attention)]
        if self.cross:
            steps.append((self.cross_attn_residual, cross_attention))
        steps.append((self.ffn_residual, partial(self.feed_forward, mask=mask) if self.ffn_takes_real_tokens else self.ffn))
        return self.compose(x, steps), weights

    def feed_forward(self, h: Tensor, mask: Tensor | None) -> Tensor:
        """The feed-forward told which of the new positions are real tokens (MoE routes only those)."""
        return self.ffn(h, real=None if mask is None else real_queries(mask, h.size(1)).expand(h.shape[:2]))
