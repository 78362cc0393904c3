"""Muon (Jordan et al. 2024; Liu et al. 2025 at scale), torch's own: momentum whose update is
orthogonalized by Newton-Schulz iterations, for the hidden matrices of the stacks' layers; AdamW
for the rest (token and position tables, norms, biases, the output head), as every Muon recipe
does. One optimizer to the trainer: one set of parameter groups the schedule scales, one state."""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.optim.optimizers import Betas, Optimizer, register
from zoo.specs.choices import PartSettings


def hidden_matrices(model: nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(the 2-D weights of the stacks' layers, every other parameter), each parameter once."""
    matrices, others = [], []
    for name, param in model.named_parameters():  # a tied weight is named once
        (matrices if param.ndim == 2 and ".layers." in f".{name}" else others).append(param)
    return matrices, others


class MuonSettings(PartSettings):
    momentum: float = Field(0.95, ge=0.0, lt=1.0, description="the momentum of the matrices' updates")
    nesterov: bool = Field(True, description="Nesterov's momentum")
    ns_steps: int = Field(5, ge=1, le=20, description="Newton-Schulz iterations that orthogonalize an update")
    adjust_lr: Literal["match_rms_adamw", "original"] = Field(
        "match_rms_adamw", description="match_rms_adamw: updates scaled to AdamW's size (Liu et al. 2025), so lr and "
                                       "weight decay tuned for AdamW serve; original: Jordan's sqrt(max(1, rows/cols))")
    adamw_betas: Betas = Field((0.9, 0.95), strict=False, description="AdamW's betas, for the rest, each in [0, 1)")
    adamw_eps: float = Field(1e-8, gt=0.0, description="AdamW's eps, for the rest")
    adamw_lr_scale: float = Field(1.0, gt=0.0, description="AdamW's rate as a multiple of lr (original wants "
                                                           "a far larger lr for the matrices than for the rest)")


class MuonWithAdamW(torch.optim.Optimizer):
    """torch's Muon on the hidden matrices and AdamW on the rest, stepped together. Its parameter
    groups are the two optimizers' own, so a schedule that scales them scales both."""

    def __init__(self, model: nn.Module, lr: float, weight_decay: float, settings: MuonSettings):
        matrices, others = hidden_matrices(model)
        self.parts: list[torch.optim.Optimizer] = []
        if matrices:
            self.parts.append(torch.optim.Muon(matrices, lr=lr, weight_decay=weight_decay, momentum=settings.momentum,
                                               nesterov=settings.nesterov, ns_steps=settings.ns_steps,
                                               adjust_lr_fn=settings.adjust_lr))
        if others:
            self.parts.append(torch.optim.AdamW(others, lr=lr * settings.adamw_lr_scale, betas=settings.adamw_betas,
                                                eps=settings.adamw_eps, weight_decay=weight_decay))
        super().__init__(self._groups(), {})

    def _groups(self) -> list[dict[str, Any]]:
        return [group for part in self.parts for group in part.param_groups]

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for part in self.parts:
            part.step()
        return loss

    def state_dict(self) -> dict[str, Any]:
        return {"parts": [part.state_dict() for part in self.parts]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for part, state in zip(self.parts, state_dict["parts"], strict=True):
            part.load_state_dict(state)
        self.param_groups = self._groups()  # loading makes each part's groups anew


@register("muon")
class Muon(Optimizer):
    """Muon (Jordan et al. 2024), torch's own, for the layers' matrices, with AdamW for embeddings,
    norms, biases and the output head (Liu et al. 2025's Moonlight recipe: lr and weight decay as AdamW's)."""

    Settings = MuonSettings

    @classmethod
    def build(cls, model, lr, weight_decay, settings, fused):
        return MuonWithAdamW(model, lr, weight_decay, settings)
