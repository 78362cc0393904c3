"""Axis `norm_type`: the normalization every placement, final norm and embedding norm uses.

Each part maps (..., d_model) -> (..., d_model). `layernorm` is the default, so a spec that never
names this axis builds exactly the model it built before the axis existed.
"""

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import Tensor, nn

from zoo.specs.choices import PartSettings
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry

register = registry("norm_type").register


class Epsilon(PartSettings):
    eps: float = Field(1e-5, gt=0.0, description="added for numerical safety")


@register("layernorm")
class LayerNorm(nn.LayerNorm):
    """(x - mean) / std * g + b over d_model (Ba et al. 2016), as in Vaswani et al. 2017; without
    the shift b where `bias` is false (OLMo, Cohere, ModernBERT)."""

    mup = "gains and shifts are vectors at the base rate; normalizing over d_model gives unit coordinates"

    class Settings(Epsilon):
        bias: bool = Field(True, description="a learned shift b; false: (x - mean) / std * g")

        TRIED = ({"bias": False},)

    def __init__(self, spec: ModelSpec):
        super().__init__(spec.d_model, eps=spec.norm_type.eps, bias=spec.norm_type.bias)


@register("rmsnorm")
class RMSNorm(nn.RMSNorm):
    """x / sqrt(mean(x^2) + eps) * g: no centring and no bias (Zhang and Sennrich 2019). With
    `unit_offset` the gain is stored as w and applied as 1 + w, starting at w = 0 (Gemma): the
    same function, another parameter (which weight decay pulls towards a gain of 1, not 0)."""

    mup = "gains are vectors at the base rate; normalizing over d_model gives unit coordinates"

    class Settings(PartSettings):
        eps: float = Field(1e-6, gt=0.0, description="added to the mean square (T5 and LLaMA use 1e-6)")
        unit_offset: bool = Field(False, description="the gain applied as 1 + w, w stored (Gemma)")

        TRIED = ({"unit_offset": True},)

    def __init__(self, spec: ModelSpec):
        super().__init__(spec.d_model, eps=spec.norm_type.eps)
        self.unit_offset = spec.norm_type.unit_offset
        if self.unit_offset:
            nn.init.zeros_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        if not self.unit_offset:
            return super().forward(x)
        return F.rms_norm(x, self.normalized_shape, eps=self.eps) * (1.0 + self.weight)


@register("scalenorm")
class ScaleNorm(nn.Module):
    """g * x / ||x|| with one learned scalar g, initialized to sqrt(d_model) (Nguyen and Salazar 2019)."""

    mup_refused = ("its one gain starts at sqrt(d_model), so Adam's fixed step is a share of it that shrinks as width "
                   "grows and the norm stops learning; use layernorm or rmsnorm")

    Settings = Epsilon

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.eps = spec.norm_type.eps
        self.gain = nn.Parameter(torch.tensor(float(spec.d_model) ** 0.5))

    def forward(self, x: Tensor) -> Tensor:
        norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp(min=self.eps)
        return self.gain * x / norm
