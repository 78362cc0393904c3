"""Optimizers, registered by name as parts are: each declares its own typed settings (beside the
learning rate and weight decay every one takes) and builds torch's optimizer from them.

`train.optimizer: {name: sgd, lr: 0.1, momentum: 0.9, nesterov: true}`: the settings sit beside the
name, validated by the optimizer's `Settings`, every default written out in the experiment.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import torch
from pydantic import Field, model_validator
from torch import nn

from zoo.errors import ConfigError
from zoo.specs.choices import PartSettings
from zoo.specs.registries import registry

register = registry("optimizer").register


class Optimizer:
    """A registered optimizer: `Settings`, and `build` for a model's parameters from every setting."""

    Settings: ClassVar[type[PartSettings]] = PartSettings
    fused: ClassVar[bool] = False
    """Whether torch has a fused CUDA kernel for it (one launch for every parameter)."""
    mup_rates: ClassVar[bool] = False
    """Whether its update's size does not follow the gradient's (Adam and its kin), so that muP's
    per-layer learning rates (zoo.model.mup) hold for it."""
    usual: ClassVar[dict[str, Any]] = {"lr": 1e-3}
    """The rate and settings it is commonly run with at the zoo's sizes (the main job's 1e-3 for
    Adam and its kin): where the registry's benchmark and tests start each optimizer from."""

    @classmethod
    def build(cls, model: nn.Module, lr: float, weight_decay: float, settings: PartSettings,
              fused: bool | None) -> torch.optim.Optimizer:
        raise NotImplementedError


Beta = Annotated[float, Field(ge=0.0, lt=1.0)]
"""A moment's decay rate: in [0, 1), as torch's optimizers check only when they are built."""
Betas = tuple[Beta, Beta]


class AdamSettings(PartSettings):
    betas: Betas = Field((0.9, 0.98), strict=False, description="the moments' decay rates, each in [0, 1)")
    eps: float = Field(1e-9, gt=0.0, description="added to the second moment's root")


@register("adam")
class Adam(Optimizer):
    """Adam (Kingma and Ba 2015), with the Transformer's betas (0.9, 0.98) and eps 1e-9 (Vaswani et al.
    2017); weight decay added to the gradient (L2)."""

    Settings = AdamSettings
    fused = True
    mup_rates = True
    torch_class: ClassVar[type] = torch.optim.Adam

    @classmethod
    def build(cls, model, lr, weight_decay, settings, fused):
        return cls.torch_class(model.parameters(), lr=lr, betas=settings.betas, eps=settings.eps, weight_decay=weight_decay,
                               fused=fused)


@register("adamw")
class AdamW(Adam):
    """AdamW (Loshchilov and Hutter 2019): Adam with the weight decay decoupled from the gradient."""

    torch_class = torch.optim.AdamW


class SGDSettings(PartSettings):
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="heavy-ball momentum, in [0, 1); 0: plain SGD")
    nesterov: bool = Field(False, description="Nesterov's momentum (needs momentum > 0)")
    dampening: float = Field(0.0, ge=0.0, le=1.0, description="a share of the gradient left out of the momentum")

    TRIED: ClassVar = ({"momentum": 0.9, "nesterov": True},)

    @model_validator(mode="after")
    def _nesterov_needs_momentum(self):
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ConfigError("nesterov needs momentum > 0 and dampening 0")
        return self


@register("sgd")
class SGD(Optimizer):
    """Stochastic gradient descent, with momentum (Polyak 1964) or Nesterov's (Sutskever et al. 2013)."""

    Settings = SGDSettings
    fused = True
    usual: ClassVar = {"lr": 0.1, "momentum": 0.9, "nesterov": True}

    @classmethod
    def build(cls, model, lr, weight_decay, settings, fused):
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=settings.momentum, nesterov=settings.nesterov,
                               dampening=settings.dampening, weight_decay=weight_decay, fused=fused)


class AdafactorSettings(PartSettings):
    beta2_decay: float = Field(-0.8, le=0.0, description="the second moment's decay rate is 1 - step ** this")
    eps: float = Field(1e-3, gt=0.0, description="the floor of the update's scale relative to the parameter's")
    d: float = Field(1.0, gt=0.0, description="the update's root mean square is clipped to this")


@register("adafactor")
class Adafactor(Optimizer):
    """Adafactor (Shazeer and Stern 2018), torch's own: factored second moments (a row and a column
    of statistics per matrix instead of a full one), no first moment; T5's optimizer."""

    Settings = AdafactorSettings
    usual: ClassVar = {"lr": 0.01}  # its update is scaled by each weight's size

    @classmethod
    def build(cls, model, lr, weight_decay, settings, fused):
        return torch.optim.Adafactor(model.parameters(), lr=lr, beta2_decay=settings.beta2_decay, eps=(None, settings.eps),
                                     d=settings.d, weight_decay=weight_decay)


class AdamFamilySettings(PartSettings):
    betas: Betas = Field((0.9, 0.999), strict=False, description="the moments' decay rates, each in [0, 1)")
    eps: float = Field(1e-8, gt=0.0, description="added to the second moment's root")
    decoupled_weight_decay: bool = Field(False, description="decay the weights apart from the gradient, as AdamW")


class AdamFamily(Optimizer):
    """Adam's kin in torch that take its settings and a decoupled weight decay (`torch_class`)."""

    Settings = AdamFamilySettings
    mup_rates = True
    torch_class: ClassVar[type]

    @classmethod
    def build(cls, model, lr, weight_decay, settings, fused):
        return cls.torch_class(model.parameters(), lr=lr, betas=settings.betas, eps=settings.eps, weight_decay=weight_decay,
                               decoupled_weight_decay=settings.decoupled_weight_decay)


@register("nadam")
class NAdam(AdamFamily):
    """NAdam (Dozat 2016): Adam with Nesterov's momentum."""

    torch_class = torch.optim.NAdam


@register("radam")
class RAdam(AdamFamily):
    """RAdam (Liu et al. 2020): Adam whose adaptive step is rectified while its variance estimate is
    poor, a warmup built into the optimizer."""

    torch_class = torch.optim.RAdam
