"""The norms of queries and keys before the scores (`attn.qk_norm`), in their three scopes: each
head's d_head with gains shared by the heads (Qwen3, Gemma 3), each head's d_head with a norm of its
own per head (StableLM, Cohere), or all heads of the projection at once (OLMo 2)."""

from __future__ import annotations

import torch
from einops import rearrange
from pydantic import BaseModel
from torch import Tensor, nn

from zoo.specs.choices import Choice
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import build_part


def qk_norm(spec: ModelSpec, heads: int) -> nn.Module:
    """The norm of `heads` heads of queries or keys, of the spec's qk_norm part (with the spec's
    norm_type settings, such as eps, where qk_norm names the same part)."""
    same = spec.norm_type.name == spec.attn.qk_norm
    norm_type = spec.norm_type if same else Choice("norm_type", spec.attn.qk_norm)

    def norm(width: int) -> nn.Module:  # a copy that is not a model spec, so not validated as one
        return build_part("norm_type", BaseModel.model_copy(spec, update={"d_model": width, "norm_type": norm_type}))

    if spec.attn.qk_norm_scope == "projection":
        return norm(heads * spec.d_head)
    if spec.attn.qk_norm_scope == "each_head":
        return nn.ModuleList(norm(spec.d_head) for _ in range(heads))
    return norm(spec.d_head)


def apply_qk_norm(norm: nn.Module, x: Tensor, whole: bool) -> Tensor:
    """x (B, H, T, d_head) through a norm of qk_norm: per head (one norm, or a list of one per head),
    or over all heads at once where `whole`."""
    if isinstance(norm, nn.ModuleList):
        return torch.stack([head_norm(x[:, h]) for h, head_norm in enumerate(norm)], dim=1)
    if not whole:
        return norm(x)
    return rearrange(norm(rearrange(x, "b h t d -> b t (h d)")), "b t (h d) -> b h t d", h=x.size(1))
