"""Routing tokens to experts, for a mixture-of-experts feed-forward (Shazeer et al. 2017; GShard,
Lepikhin et al. 2021; Switch, Fedus et al. 2022).

Only the tokens handed in are routed (the caller leaves padding out). Capacity is a training
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


class Routes(NamedTuple):
    choice: Tensor
    """(N, k) int64: each token's experts, best first."""
    gate: Tensor
    """(N, k) float32: each choice's weight."""
    kept: Tensor
    """(N, k) bool: the choices within capacity (all of them without a capacity)."""
    probs: Tensor
    """(N, E) float32: the router's softmax over experts."""


def route(logits: Tensor, top_k: int, capacity: int | None = None) -> Routes:
    """Top-k routing of N tokens by their router logits (N, E). With k = 1 the gate is the chosen
    expert's probability (Switch); with k > 1 the chosen probabilities renormalized to sum to 1
    (GShard's top-2, Mixtral)."""
    probs = logits.float().softmax(-1)
    gate, choice = probs.topk(top_k, dim=-1)
    if top_k > 1:
        gate = gate / gate.sum(-1, keepdim=True)
    kept = torch.ones_like(choice, dtype=torch.bool) if capacity is None else within_capacity(choice, probs.size(-1), capacity)
    return Routes(choice, gate, kept, probs)


def within_capacity(choice: Tensor, experts: int, capacity: int) -> Tensor:
    """(N, k) bool: the assignments that fit, counted per expert in order of choice rank, then token."""
    ranked = torch.nn.functional.one_hot(choice.t().reshape(-1), experts)  # (k N, E), first choices first
    place = (ranked.cumsum(0) * ranked).sum(-1) - 1  # each assignment's place in its expert's queue
    return (place < capacity).reshape(choice.t().shape).t()


def capacity_of(tokens: int, experts: int, top_k: int, factor: float) -> int:
    """Assignments each expert takes: the factor times an even share of the k N assignments."""
    return math.ceil(factor * tokens * top_k / experts)


def balance_loss(routes: Routes) -> Tensor:
    """Switch's load-balancing loss E * sum_e f_e P_e: f_e the share of assignments made to expert
    e (before any capacity drop), P_e its mean router probability; 1 when perfectly balanced.
    0 (still in the graph) when no token was routed."""
    tokens, experts = routes.probs.shape
    if tokens == 0:
        return routes.probs.sum() * 0.0
    share = torch.bincount(routes.choice.reshape(-1), minlength=experts).float() / routes.choice.numel()
    return experts * (share * routes.probs.mean(0)).sum()
