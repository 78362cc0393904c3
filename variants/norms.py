"""Axis `norm`: where LayerNorm sits around each sublayer F (attention or feed-forward)."""

from torch import Tensor

from zoo.parts import NormPlacement
from zoo.registries import registry

register = registry("norm").register


@register("post")
class PostNorm(NormPlacement):
    """LN(x + F(x)), as in Vaswani et al. 2017."""

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return self.norm(x + self.dropout(sublayer(x)))


@register("pre")
class PreNorm(NormPlacement):
    """x + F(LN(x)), as in Xiong et al. 2020; the residual stream needs a final LayerNorm."""

    wants_final_norm = True

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.dropout(sublayer(self.norm(x)))


@register("res_post")
class ResidualPostNorm(NormPlacement):
    """x + LN(F(x)): the residual post-norm of Swin Transformer V2."""

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.dropout(self.norm(sublayer(x)))
