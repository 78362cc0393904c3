"""Mechanism statistics (Wortsman et al. 2023): what grows inside a model before its loss shows it.
Per attention layer, the largest attention logit (q·k scaled, before any soft cap or bias, over the
keys a query may see) and the mean attention entropy; for the output, the largest logit and the
mean log-partition (what z-loss holds near 0).

Read from one forward of a held-out batch under `probed`: every attention layout then computes with
the reference kernel (the same function; `sdpa` and `flex` return no scores), which records what
it sees under the name of the attention module it serves."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from zoo.parts import Attention

_LISTENING: dict[str, object] = {"seen": None, "layer": "attention"}
"""What a probe records into and the attention module now running: a plain module dict, which
torch.compile reads without a graph break (a ContextVar's `get` breaks every compiled attention)."""


def probing() -> bool:
    """Whether a probe is listening: attention kernels then compute with the reference."""
    return _LISTENING["seen"] is not None


def observe_attention(scores: Tensor, weights: Tensor, visible: Tensor | None) -> None:
    """Called by the reference kernel with its raw scores (B, H, Tq, Tk), the softmax weights and
    the visible keys (or None): the layer's largest visible logit and mean entropy."""
    seen = _LISTENING["seen"]
    if seen is None:
        return
    shown = scores if visible is None else scores.masked_fill(~visible, -math.inf)
    entropy = -(weights * weights.clamp_min(1e-30).log()).sum(-1)
    record = seen.setdefault(_LISTENING["layer"], {"logit_max": -math.inf, "entropy": 0.0, "calls": 0})
    record["logit_max"] = max(record["logit_max"], float(shown.detach().amax()))
    record["entropy"] += float(entropy.detach().float().mean())
    record["calls"] += 1


@contextmanager
def probed(model: nn.Module) -> Iterator[dict[str, dict[str, float]]]:
    """Listen to every attention module of `model` (by its name in the model) while the block runs."""
    seen: dict[str, dict[str, float]] = {}
    before = dict(_LISTENING)
    _LISTENING["seen"] = seen

    def enter(name: str):
        def hook(module, args, kwargs):
            _LISTENING["layer"] = name
        return hook

    def leave(module, args, kwargs, output):
        _LISTENING["layer"] = before["layer"]

    handles = []
    for name, module in model.named_modules():
        if isinstance(module, Attention):
            handles.append(module.register_forward_pre_hook(enter(name), with_kwargs=True))
            handles.append(module.register_forward_hook(leave, with_kwargs=True))
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()
        _LISTENING.update(before)


def output_statistics(logits: Tensor, real: Tensor) -> dict[str, float]:
    """The largest |logit| and the mean log-partition over the real positions (B, T) of logits (B, T, V)."""
    chosen = logits.detach().float()[real]
    if chosen.numel() == 0:
        return {}
    return {"mech/output_logit_max": float(chosen.abs().amax()), "mech/output_logsumexp": float(chosen.logsumexp(-1).mean())}


def mechanism_metrics(model: nn.Module, inputs: tuple[Tensor, ...], padding: tuple, real: Tensor,
                      **keywords: Tensor) -> dict[str, float]:
    """One held-out forward's mechanism statistics, per attention layer and over all of them;
    `keywords`, what else forward takes with the batch (a packed row's offsets)."""
    with torch.no_grad(), probed(model) as seen:
        logits = model(*inputs, padding, **keywords)
    metrics = {}
    for name, record in seen.items():
        metrics[f"mech/attn_logit_max/{name}"] = record["logit_max"]
        metrics[f"mech/attn_entropy/{name}"] = record["entropy"] / record["calls"]
    if seen:
        metrics["mech/attn_logit_max"] = max(r["logit_max"] for r in seen.values())
        metrics["mech/attn_entropy"] = sum(r["entropy"] / r["calls"] for r in seen.values()) / len(seen)
    return {**metrics, **output_statistics(logits, real)}
