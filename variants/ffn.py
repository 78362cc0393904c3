"""Axis `ffn`: the position-wise feed-forward sublayer."""

from torch import Tensor, nn

from zoo.model_spec import ModelSpec
from zoo.registries import registry

register = registry("ffn").register


class TwoLayerFeedForward(nn.Module):
    """Linear(d_model, d_ff), activation, dropout, Linear(d_ff, d_model)."""

    activation: type[nn.Module]

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.linear1 = nn.Linear(spec.d_model, spec.d_ff, bias=spec.bias)
        self.act = self.activation()
        self.dropout = nn.Dropout(spec.dropout)
        self.linear2 = nn.Linear(spec.d_ff, spec.d_model, bias=spec.bias)

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
