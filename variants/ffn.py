"""Axis `ffn`: the position-wise feed-forward sublayer.

`d_ff: auto` asks the part for its width: 4 d_model for a dense one (Vaswani et al. 2017), 2/3 of
that for a gated one, whose three matrices then hold about as many parameters as two dense ones.
"""

import math

import torch
from torch import Tensor, nn

from zoo.model.dropout import Dropout
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry

register = registry("ffn").register


class TwoLayerFeedForward(nn.Module):
    """Linear(d_model, d_ff), activation, dropout, Linear(d_ff, d_model)."""

    activation: type[nn.Module]

    @staticmethod
    def auto_width(d_model: int) -> int:
        return 4 * d_model

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.linear1 = nn.Linear(spec.d_model, spec.ffn_width, bias=spec.bias)
        self.act = self.activation()
        self.dropout = Dropout(spec.dropout)
        self.linear2 = nn.Linear(spec.ffn_width, spec.d_model, bias=spec.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.act(self.linear1(x))))


@register("relu")
class ReLUFeedForward(TwoLayerFeedForward):
    """max(0, x W1 + b1) W2 + b2, as in Vaswani et al. 2017."""

    activation = nn.ReLU


@register("gelu")
class GELUFeedForward(TwoLayerFeedForward):
    """GELU (exact, erf form) in place of ReLU, as in BERT and GPT."""

    activation = nn.GELU


class TanhGELU(nn.GELU):
    def __init__(self):
        super().__init__(approximate="tanh")


@register("gelu_tanh")
class TanhGELUFeedForward(TwoLayerFeedForward):
    """GELU by its tanh approximation (Hendrycks and Gimpel 2016), as GPT-2 computes it."""

    activation = TanhGELU


@register("swish")
class SwishFeedForward(TwoLayerFeedForward):
    """Swish with beta 1, x sigmoid(x), also called SiLU (Ramachandran et al. 2017); Marian's "swish"."""

    activation = nn.SiLU


@register("elu")
class ELUFeedForward(TwoLayerFeedForward):
    """ELU, x for x > 0 and exp(x) - 1 below (Clevert et al. 2016); a row of Narang et al. 2021."""

    activation = nn.ELU


@register("selu")
class SELUFeedForward(TwoLayerFeedForward):
    """SELU, the scaled ELU of self-normalizing networks (Klambauer et al. 2017); a row of Narang et al. 2021."""

    activation = nn.SELU


class SquaredReLU(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(x).square()


@register("relu2")
class SquaredReLUFeedForward(TwoLayerFeedForward):
    """relu(x W1)^2 W2: the squared ReLU of Primer (So et al. 2021)."""

    activation = SquaredReLU


class GatedFeedForward(nn.Module):
    """(act(x W) * x V) W2 (Shazeer 2020): `gate` is W, `linear1` is V, `linear2` is W2."""

    activation: type[nn.Module]

    @staticmethod
    def auto_width(d_model: int) -> int:
        return 8 * math.ceil(2 * 4 * d_model / 3 / 8)

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.gate = nn.Linear(spec.d_model, spec.ffn_width, bias=spec.bias)
        self.linear1 = nn.Linear(spec.d_model, spec.ffn_width, bias=spec.bias)
        self.act = self.activation()
        self.dropout = Dropout(spec.dropout)
        self.linear2 = nn.Linear(spec.ffn_width, spec.d_model, bias=spec.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.act(self.gate(x)) * self.linear1(x)))


@register("swiglu")
class SwiGLUFeedForward(GatedFeedForward):
    """Swish (SiLU) gate, Shazeer 2020; PaLM and LLaMA use it."""

    activation = nn.SiLU


@register("geglu")
class GEGLUFeedForward(GatedFeedForward):
    """GELU gate, Shazeer 2020."""

    activation = nn.GELU


@register("geglu_tanh")
class TanhGEGLUFeedForward(GatedFeedForward):
    """GELU gate by the tanh approximation: T5 1.1's and Flan-T5's "gated-gelu"."""

    activation = TanhGELU


@register("reglu")
class ReGLUFeedForward(GatedFeedForward):
    """ReLU gate, Shazeer 2020."""

    activation = nn.ReLU


@register("glu")
class GLUFeedForward(GatedFeedForward):
    """Sigmoid gate: the GLU of Dauphin et al. 2017 as a feed-forward (Shazeer 2020)."""

    activation = nn.Sigmoid


@register("liglu")
class BilinearFeedForward(GatedFeedForward):
    """No activation on the gate: the bilinear layer of Shazeer 2020, "LiGLU" in Narang et al. 2021."""

    activation = nn.Identity
