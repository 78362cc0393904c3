"""Optimizers and learning-rate schedules, each a multiplier of the optimizer's peak lr."""

from __future__ import annotations

import math

import torch
from torch import nn

from zoo.specs.experiment import TrainSpec


def make_optimizer(model: nn.Module, train: TrainSpec) -> torch.optim.Optimizer:
    o = train.optimizer
    kinds = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    # On CUDA the fused kernel: one launch for every parameter, and no step counter read back.
    fused = all(p.is_cuda for p in model.parameters()) or None
    return kinds[o.name](model.parameters(), lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay, fused=fused)


def lr_multiplier(train: TrainSpec, step: int) -> float:
    """The schedule at a 1-based step: linear warmup to the peak, then constant, proportional to
    1/sqrt(step) (Vaswani et al. 2017, continuous at the end of warmup), or a cosine to zero."""
    warmup = train.warmup_steps
    if step <= warmup:
        return step / warmup
    if train.schedule == "constant":
        return 1.0
    if train.schedule == "inverse_sqrt":
        return math.sqrt(max(warmup, 1) / step)
    progress = (step - warmup) / max(1, train.steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def make_schedule(optimizer: torch.optim.Optimizer, train: TrainSpec) -> torch.optim.lr_scheduler.LambdaLR:
    # LambdaLR calls the function with the number of steps taken so far; step s + 1 is next.
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda taken: lr_multiplier(train, taken + 1))
