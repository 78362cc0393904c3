"""Axis `ffn`: the position-wise feed-forward sublayer.

`d_ff: auto` asks the part for its width: 4 d_model for a dense one (Vaswani et al. 2017), 2/3 of
that for a gated one, whose three matrices then hold about as many parameters as two dense ones.
"""

import math
from typing import ClassVar, Literal

import torch
from pydantic import Field
from torch import Tensor, nn

from zoo.dropout.masks import Dropout
from zoo.kernels.routing import balance_loss, capacity_of, route
from zoo.parts import FeedForwardBase
from zoo.roles import Role
from zoo.specs.choices import PartSettings
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry

register = registry("ffn").register


class TwoLayerFeedForward(FeedForwardBase):
    """Linear(d_model, d_ff), activation, dropout, Linear(d_ff, d_model)."""

    weight_roles: ClassVar[dict[str, Role]] = {"linear1.weight": "ffn.input", "linear2.weight": "ffn.output"}
    mup = "two hidden matrices (d_ff grows with d_model), trained at rate 1/m; an elementwise activation"

    activation: type[nn.Module]

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.linear1 = nn.Linear(spec.d_model, spec.ffn_width, bias=spec.bias)
        self.act = self.activation()
        self.dropout = Dropout(spec.dropout_at("activation"))
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


class GatedFeedForward(FeedForwardBase):
    """(act(x W) * x V) W2 (Shazeer 2020): `gate` is W, `linear1` is V, `linear2` is W2."""

    weight_roles: ClassVar[dict[str, Role]] = {"gate.weight": "ffn.gate", "linear1.weight": "ffn.input",
                                               "linear2.weight": "ffn.output"}
    mup = "three hidden matrices (d_ff grows with d_model), trained at rate 1/m; an elementwise gate"

    activation: type[nn.Module]
    matrices = 3

    @staticmethod
    def auto_width(d_model: int) -> int:
        return 8 * math.ceil(2 * 4 * d_model / 3 / 8)

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.gate = nn.Linear(spec.d_model, spec.ffn_width, bias=spec.bias)
        self.linear1 = nn.Linear(spec.d_model, spec.ffn_width, bias=spec.bias)
        self.act = self.activation()
        self.dropout = Dropout(spec.dropout_at("activation"))
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


DENSE_PARTS = tuple(registry("ffn").names())
"""The feed-forwards an expert may be: every part above."""


class ExpertSettings(PartSettings):
    experts: int = Field(8, ge=2, description="the number of expert feed-forwards")
    top_k: int = Field(2, ge=1, description="experts per token (Switch: 1)")
    capacity_factor: float = Field(
        1.25, gt=0.0, description="in training, each expert takes at most this times an even share of the "
                                  "assignments; the rest are dropped (never in evaluation or decoding)")
    aux_loss_weight: float = Field(0.01, ge=0.0, description="the weight of the load-balancing loss (Switch: 0.01)")
    expert: Literal[DENSE_PARTS] = Field("relu", description="the feed-forward part each expert is, of width d_ff")


@register("moe")
class MixtureOfExperts(FeedForwardBase):
    """A learned router sends each real token to its top-k of `experts` dense feed-forwards and
    sums their outputs weighted by the gate (Shazeer et al. 2017; Switch with top_k 1, Fedus et
    al. 2022). Padding is not routed (its output is 0); capacity drops apply in training only (see
    zoo.kernels.routing). In training, `aux_loss` holds the weighted load-balancing loss of the
    last forward, which the trainer adds to the loss. Each expert is initialized as a dense
    feed-forward of its width is; in training every expert runs on its buffer each step, empty
    or not, so data-parallel training sees a gradient for every parameter."""

    Settings = ExpertSettings
    weight_roles: ClassVar[dict[str, Role]] = {"router.weight": "ffn.router"}
    """Each expert, a feed-forward part, declares its own."""
    takes_real_tokens = True
    mup = ("each expert as its feed-forward scales; the router reads d_model into a fixed count of experts, a "
           "readout whose initial draw (std times m^-1/2) and rate (1/m) shrink with width, so its logits do not grow")
    copies = "experts"
    """Its size is linear in this setting (zoo.model.size_checks counts a million experts from two and three)."""

    @classmethod
    def spec_problem(cls, spec: ModelSpec) -> str | None:
        settings = spec.ffn
        if settings.top_k > settings.experts:
            return f"ffn moe: top_k {settings.top_k} is more than experts {settings.experts}"
        return None

    @classmethod
    def forward_flops(cls, spec: ModelSpec, tokens: int) -> int:
        """The router over every position, and in training every expert over its buffer of slots
        (the capacity of all positions, padding's included, however many fill them)."""
        settings = spec.ffn.settings
        slots = min(tokens, capacity_of(tokens, settings.experts, settings.top_k, settings.capacity_factor))
        expert = registry("ffn").get(settings.expert)
        return 2 * tokens * spec.d_model * settings.experts + settings.experts * expert.forward_flops(spec, slots)

    def __init__(self, spec: ModelSpec):
        super().__init__()
        settings = spec.ffn.settings
        self.top_k, self.capacity_factor, self.weight = settings.top_k, settings.capacity_factor, settings.aux_loss_weight
        self.router = nn.Linear(spec.d_model, settings.experts, bias=False)
        self.experts = nn.ModuleList(registry("ffn").get(settings.expert)(spec) for _ in range(settings.experts))
        self.aux_loss: Tensor | None = None

    def forward(self, x: Tensor, real: Tensor | None = None) -> Tensor:
        flat = x.reshape(-1, x.size(-1))
        real = None if real is None else real.reshape(-1)
        out = self.buffered(flat, real) if self.training else self.exact(flat, real)
        return out.reshape(*x.shape[:-1], out.size(-1))

    def buffered(self, flat: Tensor, real: Tensor | None) -> Tensor:
        """Training: each expert reads a buffer of a fixed number of slots, the capacity the batch
        would have without padding, so that no count is read back to the host; the capacity
        that drops assignments is that of the real tokens, counted on the device. Padding and
        assignments past their expert's capacity fill no slot."""
        experts, tokens = len(self.experts), len(flat)
        routed = tokens if real is None else real.sum()
        routes = route(self.router(flat), self.top_k, real, capacity_of(routed, experts, self.top_k, self.capacity_factor))
        self.aux_loss = self.weight * balance_loss(routes)
        slots = min(tokens, capacity_of(tokens, experts, self.top_k, self.capacity_factor))
        # slot `slots` of each expert is where what fills no slot goes, never read back
        index = routes.choice * (slots + 1) + torch.where(routes.kept, routes.place, slots)
        buffer = flat.new_zeros(experts * (slots + 1), flat.size(-1))
        buffer = buffer.index_put((index.reshape(-1),), flat.repeat_interleave(self.top_k, dim=0), accumulate=True)
        buffer = buffer.view(experts, slots + 1, -1)[:, :slots]
        outs = torch.stack([expert(buffer[e]) for e, expert in enumerate(self.experts)])
        outs = torch.cat([outs, outs.new_zeros(experts, 1, outs.size(-1))], dim=1).flatten(0, 1)
        weights = (routes.gate * routes.kept)[..., None].to(outs.dtype)
        return (outs[index] * weights).sum(1)

    def exact(self, flat: Tensor, real: Tensor | None) -> Tensor:
        """Evaluation and decoding: each expert runs on exactly the real tokens that chose it."""
        self.aux_loss = None
        rows = None if real is None else real.nonzero().squeeze(1)
        tokens = flat if rows is None else flat[rows]
        routes = route(self.router(tokens), self.top_k)
        out = None
        for index, expert in enumerate(self.experts):
            token, rank = (routes.choice == index).nonzero(as_tuple=True)
            y = expert(tokens[token])
            out = y.new_zeros(len(tokens), y.size(-1)) if out is None else out
            out = out.index_add(0, token, y * routes.gate[token, rank, None].to(y.dtype))
        if rows is not None:
            out = out.new_zeros(len(flat), out.size(-1)).index_copy(0, rows, out)
        return out
