"""The run's optimizer and schedule, built from the registered ones (zoo.optim) that the
experiment names; the schedule is a multiplier of the optimizer's peak rate."""

from __future__ import annotations

import torch
from torch import nn

from zoo.model.mup import rate_multipliers
from zoo.optim.schedules import multiplier
from zoo.specs.experiment import TrainSpec
from zoo.specs.registries import registry


def make_optimizer(model: nn.Module, train: TrainSpec) -> torch.optim.Optimizer:
    o = train.optimizer
    optimizer = registry("optimizer").get(o.name)
    # On CUDA the fused kernel, where torch has one: one launch for every parameter, no step counter read back.
    fused = (all(p.is_cuda for p in model.parameters()) or None) if optimizer.fused else None
    return by_rate(optimizer.build(model, o.lr, o.weight_decay, o.settings, fused), model)


def by_rate(optimizer: torch.optim.Optimizer, model: nn.Module) -> torch.optim.Optimizer:
    """The optimizer's one group split by muP's learning-rate multipliers (zoo.model.mup), before any
    step, the base rate's group first (the one logged); under the standard parametrization, unchanged."""
    multipliers = rate_multipliers(model)
    if all(m == 1.0 for m in multipliers):
        return optimizer
    (group,) = optimizer.param_groups
    settings = {key: value for key, value in group.items() if key != "params"}
    rates: dict[float, list[nn.Parameter]] = {}
    for parameter, rate in zip(model.parameters(), multipliers, strict=True):
        rates.setdefault(rate, []).append(parameter)
    optimizer.param_groups = []
    for rate, parameters in sorted(rates.items(), key=lambda item: item[0] != 1.0):  # the base rate first
        optimizer.add_param_group({**settings, "params": parameters, "lr": group["lr"] * rate})
    return optimizer


def lr_multiplier(train: TrainSpec, step: int) -> float:
    """The schedule at a 1-based step: the warmup's linear ramp to the peak, then the schedule's own."""
    return multiplier(train.schedule, step, train.warmup_steps, train.steps)


def make_schedule(optimizer: torch.optim.Optimizer, train: TrainSpec) -> torch.optim.lr_scheduler.LambdaLR:
    # LambdaLR calls the function with the number of steps taken so far; step s + 1 is next.
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda taken: lr_multiplier(train, taken + 1))
