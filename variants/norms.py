"""Axis `norm`: where the normalization (LN: the spec's norm_type) sits around each sublayer F
(attention or feed-forward), and how a block's sublayers combine."""

from collections.abc import Sequence

import torch
from pydantic import Field
from torch import Tensor, nn

from zoo.parts import NormPlacement, Site, Step, build_part
from zoo.roles import Role
from zoo.specs.choices import PartSettings
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry

register = registry("norm").register


@register("post")
class PostNorm(NormPlacement):
    """LN(x + F(x)), as in Vaswani et al. 2017."""

    mup = "its norm alone: a norm over d_model brings x + F(x) back to unit coordinates at any width"

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return self.norm(x + self.dropout(sublayer(x)))


@register("pre")
class PreNorm(NormPlacement):
    """x + F(LN(x)), as in Xiong et al. 2020; the residual stream needs a final LayerNorm. With
    `attention_norm: false` the self-attention reads x itself: ModernBERT's first layer, whose
    embeddings end in a norm (a per-layer rule: `layers: {first: {only: [0], set: {norm:
    {attention_norm: false}}}}`)."""

    wants_final_norm = True
    mup = "its norm alone; the residual stream sums sublayer outputs whose size muP holds, so it does not grow"

    class Settings(PartSettings):
        attention_norm: bool = Field(True, description="normalize the self-attention's input; false: x as it is")

        TRIED = ({"attention_norm": False},)

    def __init__(self, spec: ModelSpec, site: Site, index: int = 0):
        super().__init__(spec, site, index, normalizes=index != 0 or spec.norm.attention_norm)

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.dropout(sublayer(self.norm(x)))


@register("res_post")
class ResidualPostNorm(NormPlacement):
    """x + LN(F(x)): the residual post-norm of Swin Transformer V2."""

    mup = "its norm alone, on each sublayer's output: unit coordinates at any width"

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.dropout(self.norm(sublayer(x)))


@register("sandwich")
class SandwichNorm(NormPlacement):
    """x + LN(F(LN(x))): Pre-LN with a second norm on the sublayer's output (Ding et al. 2021, CogView)."""

    wants_final_norm = True
    mup = "its two norms alone: unit coordinates in and out of each sublayer at any width"

    def __init__(self, spec: ModelSpec, site: Site, index: int = 0):
        super().__init__(spec, site, index)
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


BETA_SCALED: frozenset[str] = frozenset({"attention.value", "attention.output", "ffn.input", "ffn.gate", "ffn.output",
                                         "ffn.router"})
"""The roles DeepNet draws with gain beta: the feed-forward, value and output projections."""


@register("deepnorm")
class DeepNorm(NormPlacement):
    """LN(alpha x + F(x)) with the feed-forward, value and output projections initialized with gain
    beta (Wang et al. 2022, DeepNet); alpha and beta depend on the model's kind and depths."""

    mup = "alpha and beta depend on depth, not width; its norm over d_model gives unit coordinates at any width"

    def __init__(self, spec: ModelSpec, site: Site, index: int = 0):
        super().__init__(spec, site, index)
        self.alpha = deepnorm_constants(site)[0]

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return self.norm(self.alpha * x + self.dropout(sublayer(x)))

    @classmethod
    def init_gain(cls, spec: ModelSpec, role: Role | None, site: Site | None) -> float:
        return deepnorm_constants(site)[1] if role in BETA_SCALED and site is not None else 1.0


@register("rezero")
class ReZero(NormPlacement):
    """x + a F(x), one learned scalar a per sublayer starting at 0, so every block starts as the
    identity (Bachlechner et al. 2020). With `norm`, x + a F(LN(x)) and a final norm: Narang et
    al. 2021's "ReZero + LayerNorm" (or "+ RMSNorm", by the spec's norm_type)."""

    mup = "one scalar per sublayer, trained at the base rate: Adam moves a scalar by the same step at any width"

    class Settings(PartSettings):
        norm: bool = Field(False, description="normalize the sublayer's input (the spec's norm_type)")

    @classmethod
    def wants_final_norm(cls, spec: ModelSpec) -> bool:
        return spec.norm.norm

    def __init__(self, spec: ModelSpec, site: Site, index: int = 0):
        super().__init__(spec, site, index, normalizes=spec.norm.norm)
        self.scale = nn.Parameter(torch.zeros(()))

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.scale * self.dropout(sublayer(self.norm(x)))


@register("layerscale")
class LayerScale(NormPlacement):
    """x + diag(l) F(LN(x)): Pre-LN with a learned scale per channel starting small (Touvron et
    al. 2021, CaiT, which starts at 0.1 up to 18 layers and lower for deeper models)."""

    wants_final_norm = True
    mup = "a scale per channel, a vector trained at the base rate, beside a pre-norm's residual stream"

    class Settings(PartSettings):
        init: float = Field(0.1, gt=0.0, description="the initial value of every channel's scale")

    def __init__(self, spec: ModelSpec, site: Site, index: int = 0):
        super().__init__(spec, site, index)
        self.scale = nn.Parameter(torch.full((spec.d_model,), spec.norm.init))

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.scale * self.dropout(sublayer(self.norm(x)))


FIXUP_ZEROED: frozenset[str] = frozenset({"attention.output", "ffn.output"})
"""The last weight of each residual branch, which Fixup starts at zero."""
FIXUP_SCALED: frozenset[str] = frozenset({"attention.value", "ffn.input", "ffn.gate"})
"""The other weights on each branch's path from input to output (values; the feed-forward's first layer)."""


@register("fixup")
class Fixup(NormPlacement):
    """x + s F(x + b1) + b2 with no normalization: scalar biases b1, b2 (starting at 0) and a scalar
    multiplier s (starting at 1), each branch's last weight starting at 0 and its other weights
    scaled by L^(-1/2), L the model's number of residual branches (Zhang et al. 2019, Fixup, with
    m = 2 layers per branch; for attention the value and output projections)."""

    mup = ("scalar biases and a scalar multiplier at the base rate; its initial gains depend on depth, not width; "
           "no norm, so only muP's own scaling holds the residual stream")

    def __init__(self, spec: ModelSpec, site: Site, index: int = 0):
        super().__init__(spec, site, index, normalizes=False)
        self.in_bias = nn.Parameter(torch.zeros(()))
        self.multiplier = nn.Parameter(torch.ones(()))
        self.out_bias = nn.Parameter(torch.zeros(()))

    def forward(self, x: Tensor, sublayer) -> Tensor:
        return x + self.multiplier * self.dropout(sublayer(x + self.in_bias)) + self.out_bias

    @classmethod
    def init_gain(cls, spec: ModelSpec, role: Role | None, site: Site | None) -> float:
        if role in FIXUP_ZEROED:
            return 0.0
        if role in FIXUP_SCALED:
            encoder, decoder = spec.depths
            return (2 * encoder + (3 if encoder else 2) * decoder) ** -0.5
        return 1.0


@register("parallel")
class Parallel(NormPlacement):
    """x + sum_i F_i(LN(x)): the block's sublayers read one normalized input and their outputs are
    summed into the residual (GPT-J, PaLM), so one norm serves the block (the first sublayer's
    part holds it); with `shared_norm: false`, each sublayer reads a norm of its own,
    x + sum_i F_i(LN_i(x)) (GPT-NeoX, Pythia). In a decoder block with cross-attention, the
    cross-attention's queries are normalized x too, not the self-attention's output: the memory
    and this layer's self-attention reach each other only in the next layer."""

    wants_final_norm = True
    mup = "its norms alone; the residual stream sums sublayer outputs whose size muP holds"

    class Settings(PartSettings):
        shared_norm: bool = Field(True, description="one norm for the block's sublayers (GPT-J, PaLM); false: one "
                                                    "per sublayer (GPT-NeoX, Pythia)")

        TRIED = ({"shared_norm": False},)

    def __init__(self, spec: ModelSpec, site: Site, index: int = 0):
        self.shared = spec.norm.shared_norm
        super().__init__(spec, site, index, normalizes=index == 0 or not self.shared)

    @classmethod
    def compose(cls, x: Tensor, steps: Sequence[Step]) -> Tensor:
        if steps[0][0].shared:
            h = steps[0][0].norm(x)
            return x + sum(part.dropout(sublayer(h)) for part, sublayer in steps)
        return x + sum(part.dropout(sublayer(part.norm(x))) for part, sublayer in steps)
