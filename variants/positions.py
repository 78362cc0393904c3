"""Axis `position`: how token order enters the model."""

import math
from typing import Literal

import torch
from einops import rearrange
from pydantic import Field, model_validator
from torch import Tensor, nn

from zoo.parts import PositionScheme, Site
from zoo.specs.choices import PartSettings
from zoo.specs.model_spec import ModelSpec
from zoo.specs.parametrization import scaling_width
from zoo.specs.registries import registry

register = registry("position").register


def sinusoid_table(length: int, d_model: int, base: float = 10000.0, layout: str = "interleaved",
                   spacing: str = "vaswani") -> Tensor:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(same), computed in float64;
    `halves` puts every sine first and every cosine after them (Marian, fairseq). `tensor2tensor`
    spaces the d/2 frequencies as base^(-i / (d/2 - 1)), computed in float32 as fairseq does
    (M2M100, NLLB), so the tables are those models' own to the bit."""
    if spacing == "tensor2tensor":
        half = d_model // 2
        frequency = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(base) / max(half - 1, 1)))
        angles = torch.arange(length, dtype=torch.int64).float()[:, None] * frequency[None]
        sines, cosines = torch.sin(angles), torch.cos(angles)
    else:
        position = torch.arange(length, dtype=torch.float64)[:, None]
        frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(base) / d_model))
        sines, cosines = torch.sin(position * frequency), torch.cos(position * frequency[: d_model // 2])
    table = torch.zeros(length, d_model, dtype=torch.float64)
    if layout == "halves":
        table[:, : sines.size(1)], table[:, sines.size(1) : sines.size(1) + cosines.size(1)] = sines, cosines
    else:
        table[:, 0::2][:, : sines.size(1)], table[:, 1::2][:, : cosines.size(1)] = sines, cosines
    return table.float()


@register("sinusoidal")
class Sinusoidal(PositionScheme):
    """Fixed sinusoids of Vaswani et al. 2017; the table grows on demand, so any length works.
    `layout: halves` holds the same sinusoids with all sines first (Marian's tables); `spacing:
    tensor2tensor` spaces the frequencies as tensor2tensor and fairseq do; with `offset`, position p
    reads the sinusoids of p + offset (M2M100 and NLLB: 2, the row after their pad id)."""

    mup = "fixed sinusoids with entries in [-1, 1], added at the same size at any width"

    class Settings(PartSettings):
        base: float = Field(10000.0, gt=1.0, description="the longest wavelength is 2 pi base")
        layout: Literal["interleaved", "halves"] = Field(
            "interleaved", description="sine and cosine of each frequency side by side, or all sines then all cosines"
        )
        spacing: Literal["vaswani", "tensor2tensor"] = Field(
            "vaswani", description="frequencies base^(-2i/d) (the paper) or base^(-i/(d/2 - 1)) (tensor2tensor, "
                                   "fairseq: M2M100, NLLB)"
        )
        offset: int = Field(0, ge=0, description="position p reads the sinusoids of p + offset (M2M100, NLLB: 2)")

        TRIED = ({"spacing": "tensor2tensor", "offset": 2},)

    def __init__(self, spec: ModelSpec, site: Site):
        super().__init__(spec, site)
        self.d_model, self.base, self.layout = spec.d_model, spec.position.base, spec.position.layout
        self.spacing, self.offset = spec.position.spacing, spec.position.offset
        self.register_buffer("table", self.sinusoids(spec.max_len + self.offset), persistent=False)

    def sinusoids(self, length: int) -> Tensor:
        return sinusoid_table(length, self.d_model, self.base, self.layout, self.spacing)

    def prepare(self, length: int) -> None:
        if length + self.offset > self.table.size(0):
            self.table = self.sinusoids(max(length + self.offset, 2 * self.table.size(0))).to(self.table.device)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        return x + self.table[positions + self.offset if self.offset else positions].to(x.dtype)

    def _apply(self, fn, recurse=True):
        return keep_float32(self, ("table",), lambda: super(Sinusoidal, self)._apply(fn, recurse))


@register("learned")
class Learned(PositionScheme):
    """A trained table of max_len position embeddings (BERT, GPT-2); with `offset`, position p
    reads row p + offset of a table that many rows longer (BART's offset of 2); with
    `token_types`, BERT's table of segment embeddings too, whose first row every token adds (the
    zoo feeds one segment).

    Initialized with the RMS of the sinusoidal table (1/sqrt(2)), so both schemes start at one scale.
    """

    mup = "a table (an input weight): its std and its rate are the base width's at every width"

    class Settings(PartSettings):
        offset: int = Field(0, ge=0, description="rows before position 0's (BART: 2)")
        token_types: int = Field(0, ge=0, description="rows of a token-type table whose first row every token adds "
                                                      "(BERT: 2); 0: none")

    def __init__(self, spec: ModelSpec, site: Site):
        super().__init__(spec, site)
        self.max_length, self.offset = spec.max_len, spec.position.offset
        self.table = nn.Embedding(spec.max_len + self.offset, spec.d_model)
        self.weight_roles = {"table.weight": "embedding.positions"}
        if spec.position.token_types:
            self.types = nn.Embedding(spec.position.token_types, spec.d_model)
            self.weight_roles = {**self.weight_roles, "types.weight": "embedding.types"}
        self.init_std = 2**-0.5

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        x = x + self.table(positions + self.offset if self.offset else positions)
        return x + self.types.weight[0] if hasattr(self, "types") else x


@register("none")
class NoPosition(PositionScheme):
    """No position information: a bag-of-tokens baseline (the decoder still sees causal order)."""

    mup = "nothing that depends on width"


def keep_float32(module: nn.Module, tables: tuple[str, ...], apply):
    """Run a module's `_apply` (`.to()`, `.half()`, `.cuda()`) and keep its position tables in
    float32 on the new device: a table computed once is never rounded to half precision and back
    (`.half().float()` would leave it at half precision for good). Each use casts it to the
    activations' dtype, as transformers computes its rotary tables in float32 and casts them."""
    kept = {name: getattr(module, name) for name in tables}
    apply()
    for name, table in kept.items():
        setattr(module, name, table.to(device=getattr(module, name).device))
    return module


def rotary_angles(length: int, d_head: int, base: float) -> Tensor:
    """Angles (length, d_head / 2) of positions 0.. for the frequencies base^(-2i/d_head); float64."""
    position = torch.arange(length, dtype=torch.float64)[:, None]
    frequency = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    return position * frequency


@register("rope")
class Rotary(PositionScheme):
    """Rotary position embedding of Su et al. 2021 (RoFormer): queries and keys of self-attention are
    rotated by their absolute positions, so q . k depends only on the offset between them.

    `layout: halves` pairs dimension i with i + width/2 (GPT-NeoX, Llama); `interleaved` pairs
    adjacent dimensions 2i and 2i + 1 (the paper, GPT-J): a fixed permutation of each other, the
    same function class, but not the same function of given weights. With `fraction`, only the
    first fraction of each head's dimensions is rotated, with frequencies over that width, and the
    rest passes unrotated (GPT-NeoX/Pythia 0.25, Phi 0.4 or 0.5). Cross-attention gets no rotation,
    as in the paper, which rotates self-attention only: source and target positions do not share
    one axis. Any length.
    """

    mup = "a rotation of each query and key pair, which keeps their norms at any width"

    class Settings(PartSettings):
        base: float = Field(10000.0, gt=1.0, description="wavelengths run from 2 pi to 2 pi base")
        fraction: float = Field(1.0, gt=0.0, le=1.0, description="of each head's dimensions, the first "
                                "int(fraction * d_head) are rotated (GPT-NeoX's rotary_pct, Phi's "
                                "partial_rotary_factor)")
        layout: Literal["halves", "interleaved"] = Field(
            "halves", description="halves: dimension i pairs with i + width/2 (GPT-NeoX, Llama); interleaved: 2i "
                                  "with 2i + 1 (RoFormer, GPT-J)")

        TRIED = ({"fraction": 0.5}, {"layout": "interleaved"})

    @classmethod
    def spec_problem(cls, spec: ModelSpec) -> str | None:
        width = rotated_width(spec)
        if spec.position.fraction == 1.0 and width % 2:
            return (f"position rope rotates pairs of dimensions: d_head {spec.d_head} (d_model {spec.d_model} / "
                    f"n_heads {spec.n_heads}) must be even")
        if width % 2 or width == 0:
            return (f"position rope rotates pairs of dimensions: int({spec.position.fraction} x d_head {spec.d_head}) "
                    f"= {width} dimensions must be even and at least 2")
        return None

    def __init__(self, spec: ModelSpec, site: Site):
        super().__init__(spec, site)
        self.width, self.base, self.layout = rotated_width(spec), spec.position.base, spec.position.layout
        self._table(spec.max_len)

    def _table(self, length: int, device: torch.device | None = None) -> None:
        angles = rotary_angles(length, self.width, self.base)
        self.register_buffer("cos", angles.cos().float().to(device), persistent=False)
        self.register_buffer("sin", angles.sin().float().to(device), persistent=False)

    def prepare(self, length: int) -> None:
        if length > self.cos.size(0):
            self._table(max(length, 2 * self.cos.size(0)), self.cos.device)

    def _apply(self, fn, recurse=True):
        return keep_float32(self, ("cos", "sin"), lambda: super(Rotary, self)._apply(fn, recurse))

    def rotate(self, x: Tensor, positions: Tensor) -> Tensor:
        cos, sin = self.cos[positions][:, None].to(x.dtype), self.sin[positions][:, None].to(x.dtype)
        rotated, passed = (x, None) if self.width == x.size(-1) else (x[..., : self.width], x[..., self.width :])
        if self.layout == "halves":
            first, second = rotated.chunk(2, dim=-1)
            rotated = torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
        else:
            even, odd = rotated[..., 0::2], rotated[..., 1::2]
            rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
        return rotated if passed is None else torch.cat([rotated, passed], dim=-1)


def rotated_width(spec: ModelSpec) -> int:
    """How many of each head's dimensions rope rotates (transformers rounds the same way, down)."""
    return int(spec.d_head * spec.position.fraction)


def alibi_slopes(n_heads: int) -> Tensor:
    """Press et al.'s head slopes: the geometric sequence 2^(-8/n), 2^(-16/n), ... for n a power of
    two; otherwise those of the largest power of two below n, then every other slope of twice that."""
    def geometric(n: int) -> list[float]:
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]

    below = 2 ** math.floor(math.log2(n_heads))
    return torch.tensor(geometric(below) + geometric(2 * below)[0::2][: n_heads - below])


@register("alibi")
class ALiBi(PositionScheme):
    """Attention with Linear Biases (Press et al. 2022): self-attention scores get -slope_h * distance,
    with one fixed slope per head, and no position enters the embeddings. Any length.

    Causal self-attention sees keys up to the query only, so its distance is query - key as in the
    paper; bidirectional self-attention (an encoder's) uses |query - key|, the symmetric form of
    later encoder work, since the paper treats causal models only. Cross-attention gets no bias.
    Positions are a row's own, so its padding never shifts its distances.
    """

    mup = "fixed slopes per head added to the scores, the same at any width"

    def __init__(self, spec: ModelSpec, site: Site):
        super().__init__(spec, site)
        self.register_buffer("slopes", alibi_slopes(spec.n_heads)[:, None, None], persistent=False)

    def score_bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        distance = q_positions[:, :, None] - k_positions[:, None, :]
        return -self.slopes * distance.abs()[:, None]


def t5_bucket(relative: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """The bucket of each key - query offset: exact buckets for the nearest half, then log-spaced ones
    up to max_distance, the last bucket for anything farther. Bidirectional halves the buckets
    between keys before and after the query; causal keeps all for keys before (later keys: bucket 0)."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        distance = (-relative).clamp(min=0)
    exact = num_buckets // 2
    far = exact + (torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact)
                   * (num_buckets - exact)).long()
    return bucket + torch.where(distance < exact, distance, far.clamp(max=num_buckets - 1))


@register("t5")
class T5Bias(PositionScheme):
    """T5's learned relative position bias (Raffel et al. 2020): one scalar per head and bucket of the
    key - query offset, added to self-attention scores; one table per stack, shared by its layers.
    Buckets are bidirectional where self-attention is (an encoder's) and causal where it is causal.
    Cross-attention gets no bias, as in T5. Any length: offsets past max_distance share the last bucket.
    """

    mup = "a table of one scalar per head and bucket (an input weight): its std is the base width's, its rate the base's"

    class Settings(PartSettings):
        num_buckets: int = Field(32, ge=4, description="buckets: half each way where attention is "
                                 "bidirectional, all before the query where it is causal")
        max_distance: int = Field(128, ge=2, description="offsets at and beyond this share the last bucket")

        @model_validator(mode="after")
        def _log_buckets_fit(self):
            if self.max_distance <= self.num_buckets // 2:
                raise ValueError(f"max_distance {self.max_distance} must exceed num_buckets // 2 = "
                                 f"{self.num_buckets // 2}, where the log-spaced buckets start")
            return self

    def __init__(self, spec: ModelSpec, site: Site):
        super().__init__(spec, site)
        self.num_buckets, self.max_distance = spec.position.num_buckets, spec.position.max_distance
        self.bias = nn.Embedding(self.num_buckets, spec.n_heads)
        self.weight_roles, self.init_std = {"bias.weight": "attention.position_bias"}, scaling_width(spec) ** -0.5

    def score_bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        relative = k_positions[:, None, :] - q_positions[:, :, None]
        buckets = t5_bucket(relative, not self.causal, self.num_buckets, self.max_distance)
        return rearrange(self.bias(buckets), "b q k h -> b h q k")
