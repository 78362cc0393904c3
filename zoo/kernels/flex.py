"""Attention by FlexAttention (torch.nn.attention.flex_attention, PyTorch 2.5+): the score changes
that SDPA's kernels cannot take (soft-capped scores) or take only as a dense float mask (ALiBi's
and T5's biases, windows, padding) are read inside one generated kernel.

What `attend` computes, to the rounding: softmax(softcap(scale q k^T) + additive) v, where
`additive` (broadcastable to (batch, heads, queries, keys)) holds a position scheme's bias and the
dtype's most negative finite value where a key is hidden, so a row that is all padding attends
uniformly and stays finite, as in the reference.

FlexAttention has no attention dropout, returns no attention maps, and has no backward pass on the
CPU, where it also runs unfused (it materializes the scores, slower than the reference); its CUDA
kernel takes heads of 16 dimensions or more. `runs_here` says where the reference must compute instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cache

import torch
from torch import Tensor
from torch.nn.attention.flex_attention import flex_attention

FLEX_ON_CPU = False
"""Whether inference on the CPU goes through FlexAttention's unfused path too (the tests set it to
hold that path against the reference; the reference is faster there)."""

CUDA_MIN_HEAD_DIM = 16
"""FlexAttention's generated CUDA kernel refuses narrower heads (measured on an H200, torch 2.11:
"NYI: embedding dimension of the query, key, and value must be at least 16")."""


def runs_here(q: Tensor, extra: Tensor | None, dropout: float, need_weights: bool) -> bool:
    """Whether FlexAttention can compute this call: on CUDA without attention dropout or maps, for
    heads its kernel takes, and on the CPU (FLEX_ON_CPU) only where no gradient is wanted."""
    if dropout > 0.0 or need_weights:
        return False
    if q.is_cuda:
        return cuda_kernel_takes(q.size(-1))
    wants_grad = torch.is_grad_enabled() and (q.requires_grad or (extra is not None and extra.requires_grad))
    return FLEX_ON_CPU and q.device.type == "cpu" and not wants_grad


def cuda_kernel_takes(head_dim: int) -> bool:
    return head_dim >= CUDA_MIN_HEAD_DIM


@cache
def _kernel() -> Callable[..., Tensor]:
    """flex_attention, compiled for CUDA (its fused kernels exist only compiled); eager elsewhere."""
    return torch.compile(flex_attention, dynamic=False) if torch.cuda.is_available() else flex_attention


def score_mod(additive: Tensor | None, softcap: float | None) -> Callable[..., Tensor] | None:
    """The per-score change: cap, then add the term (read at the score's batch row, head, query and
    key, where the term is not broadcast along that dimension)."""
    if additive is None and softcap is None:
        return None
    rows, heads, queries, _ = additive.shape if additive is not None else (1, 1, 1, 1)

    def change(score: Tensor, b: Tensor, h: Tensor, q: Tensor, k: Tensor) -> Tensor:
        if softcap is not None:
            score = softcap * torch.tanh(score / softcap)
        if additive is not None:
            score = score + additive[b if rows > 1 else 0, h if heads > 1 else 0, q if queries > 1 else 0, k]
        return score

    return change


def flex_attend(q: Tensor, k: Tensor, v: Tensor, additive: Tensor | None, scale: float,
                softcap: float | None, grouped: bool) -> Tensor:
    """q (B, H, Tq, d) over k, v (B, H_kv, Tk, d); `grouped` where H_kv < H (GQA)."""
    with warnings.catch_warnings():  # the CPU's unfused path says it is unfused; FLEX_ON_CPU knows
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        return _kernel()(q, k, v, score_mod=score_mod(additive, softcap), scale=scale, enable_gqa=grouped)
