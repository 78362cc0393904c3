"""Axis `position`: how token order enters the model."""

import math

import torch
from pydantic import Field
from torch import Tensor, nn

from zoo.choices import PartSettings
from zoo.model_spec import ModelSpec
from zoo.parts import PositionScheme, Stack
from zoo.registries import registry

register = registry("position").register


def sinusoid_table(length: int, d_model: int, base: float = 10000.0) -> Tensor:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(same); computed in float64."""
    position = torch.arange(length, dtype=torch.float64)[:, None]
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(base) / d_model))
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table.float()


@register("sinusoidal")
class Sinusoidal(PositionScheme):
    """Fixed sinusoids of Vaswani et al. 2017; the table grows on demand, so any length works."""

    class Settings(PartSettings):
        base: float = Field(10000.0, gt=1.0, description="the longest wavelength is 2 pi base")

    def __init__(self, spec: ModelSpec, stack: Stack):
        super().__init__(spec, stack)
        self.d_model, self.base = spec.d_model, spec.position.base
        self.register_buffer("table", sinusoid_table(spec.max_len, spec.d_model, self.base), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.table.size(0):
            self.table = sinusoid_table(max(end, 2 * self.table.size(0)), self.d_model, self.base).to(self.table.device)
        return x + self.table[offset:end].to(x.dtype)


@register("learned")
class Learned(PositionScheme):
    """A trained table of max_len position embeddings (BERT, GPT-2).

    Initialized with the RMS of the sinusoidal table (1/sqrt(2)), so both schemes start at one scale.
    """

    def __init__(self, spec: ModelSpec, stack: Stack):
        super().__init__(spec, stack)
        self.max_length = spec.max_len
        self.table = nn.Embedding(spec.max_len, spec.d_model)
        self.table.init_std = 2**-0.5

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        self.check_length(offset + x.size(1))
        return x + self.table.weight[offset : offset + x.size(1)]


@register("none")
class NoPosition(PositionScheme):
    """No position information: a bag-of-tokens baseline (the decoder still sees causal order)."""
