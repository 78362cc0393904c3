"""Axis `norm`: where the normalization (LN: the spec's norm_type) sits around each sublayer F
(attention or feed-forward)."""

import re

from torch import Tensor

from zoo.parts import NormPlacement, Site, build_part, stack_sites
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry

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


@register("sandwich")
class SandwichNorm(NormPlacement):
    """x + LN(F(LN(x))): Pre-LN with a second norm on the sublayer's output (Ding et al. 2021, CogView)."""

    wants_final_norm = True

    def __init__(self, spec: ModelSpec, site: Site):
        super().__init__(spec, site)
        self.out_norm = build_part("norm_type", spec)

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.dropout(self.out_norm(sublayer(self.norm(x))))


def deepnorm_constants(site: Site) -> tuple[float, float]:
    """(alpha, beta) of the stack at `site` (Wang et al. 2022, DeepNet, Table 1). In an
    encoder-decoder of N encoder and M decoder layers: encoder 0.81 (N^4 M)^(1/16) and
    0.87 (N^4 M)^(-1/16), decoder (3M)^(1/4) and (12M)^(-1/4). A model of one stack of L layers
    (encoder-only or decoder-only): (2L)^(1/4) and (8L)^(-1/4)."""
    n, m = site.encoder_layers, site.decoder_layers
    if not (n and m):
        return (2 * site.layers) ** (1 / 4), (8 * site.layers) ** (-1 / 4)
    if site.causal:
        return (3 * m) ** (1 / 4), (12 * m) ** (-1 / 4)
    return 0.81 * (n**4 * m) ** (1 / 16), 0.87 * (n**4 * m) ** (-1 / 16)


BETA_SCALED = re.compile(r"^(encoder|decoder)\.layers\.\d+\.(ffn\.[\w.]+|(self|cross)_attn\.(v|out))\.weight$")
"""The weights DeepNet draws with gain beta: the feed-forward, value and output projections."""


@register("deepnorm")
class DeepNorm(NormPlacement):
    """LN(alpha x + F(x)) with the feed-forward, value and output projections initialized with gain
    beta (Wang et al. 2022, DeepNet); alpha and beta depend on the model's kind and depths."""

    def __init__(self, spec: ModelSpec, site: Site):
        super().__init__(spec, site)
        self.alpha = deepnorm_constants(site)[0]

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return self.norm(self.alpha * x + self.dropout(sublayer(x)))

    @classmethod
    def init_gain(cls, spec: ModelSpec, name: str) -> float:
        found = BETA_SCALED.match(name)
        if found is None:
            return 1.0
        return deepnorm_constants(stack_sites(spec)[found.group(1)])[1]
