"""Routing tokens to experts, for a mixture-of-experts feed-forward (Shazeer et al. 2017; GShard,
Lepikhin et al. 2021; Switch, Fedus et al. 2022).

Only real tokens are routed: padding makes no assignment and takes no place. Capacity is a training
device: with a capacity, each expert takes at most that many assignments, first choices before
second ones and earlier tokens before later ones, and the rest are dropped (their token skips
that expert; the residual connection carries it on). Without one (evaluation, decoding) no token
is dropped, and a token's output depends on the token alone, never on the rest of its batch.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor


def one_hot(index: Tensor, classes: int) -> Tensor:
    """torch.nn.functional.one_hot without its range check, which reads the indices back."""
    return (index[..., None] == torch.arange(classes, device=index.device)).long()


class Routes(NamedTuple):
    choice: Tensor
    """(N, k) int64: each token's experts, best first."""
    gate: Tensor
    """(N, k) float32: each choice's weight."""
    kept: Tensor
    """(N, k) bool: the choices made (a real token's) and within capacity."""
    place: Tensor
    """(N, k) int64: each kept choice's place in its expert's queue."""
    probs: Tensor
    """(N, E) float32: the router's softmax over experts."""
    routed: Tensor
    """(N,) bool: the tokens routed (the real ones)."""


def route(logits: Tensor, top_k: int, real: Tensor | None = None, capacity: Tensor | int | None = None) -> Routes:
    """Top-k routing of N tokens by their router logits (N, E), only of the `real` ones (N,) where
    given. With k = 1 the gate is the chosen expert's probability (Switch); with k > 1 the chosen
    probabilities renormalized to sum to 1 (GShard's top-2, Mixtral). Every step is a tensor
    operation: nothing is read back to the host, even for a capacity held on the device."""
    probs = logits.float().softmax(-1)
    gate, choice = probs.topk(top_k, dim=-1)
    if top_k > 1:
        gate = gate / gate.sum(-1, keepdim=True)
    real = torch.ones_like(choice[:, 0], dtype=torch.bool) if real is None else real
    made = real[:, None].expand_as(choice)
    ranked = one_hot(choice.t().reshape(-1), probs.size(-1)) * made.t().reshape(-1, 1)
    place = ((ranked.cumsum(0) * ranked).sum(-1) - 1).reshape(choice.t().shape).t()  # first choices first
    kept = made if capacity is None else made & (place < capacity)
    return Routes(choice, gate, kept, place, probs, real)


def capacity_of(tokens: Tensor | int, experts: int, top_k: int, factor: float) -> Tensor | int:
    """Assignments each expert takes: the factor times an even share of the k N assignments (a
    count on the device stays there). A factor above the number of experts takes every
    assignment, as that number does, and cannot overflow the count."""
    share = min(factor, experts) * tokens * top_k / experts
    return share.ceil().long() if isinstance(share, Tensor) else math.ceil(share)


def balance_loss(routes: Routes) -> Tensor:
    """Switch's load-balancing loss E * sum_e f_e P_e over the tokens routed: f_e the share of
    their assignments made to expert e (before any capacity drop), P_e its mean router
    probability; 1 when perfectly balanced, 0 when no token was routed."""
    real = routes.routed
    experts = routes.probs.size(-1)
    count = real.sum().clamp(min=1)
    assigned = (one_hot(routes.choice, experts) * real[:, None, None]).sum((0, 1))
    share = assigned / (count * routes.choice.size(-1))
    return experts * (share * (routes.probs * real[:, None]).sum(0) / count).sum()
