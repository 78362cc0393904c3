"""The small fixed interfaces between axes, written down as typing Protocols.

- norm (NormPlacement): wraps a block's sublayers with their residual connections and normalization.
- norm_type (NormType): any nn.Module mapping (..., d_model) -> (..., d_model).
- position (PositionScheme): may add to the embeddings, rotate queries and keys, or bias scores.
- attention (Attention): queries from x, keys/values from x or a memory, one mask convention (see
  zoo.kernels.attend), an optional incremental cache.
- ffn (FeedForward): any nn.Module mapping (B, T, d_model) -> (B, T, d_model).

The built-in parts subclass the base classes below (NormPlacement, PositionScheme, Attention),
which implement the Protocols (WrapsSublayers, EncodesPositions, Attends) with defaults; a plugin
may subclass them too, or implement a Protocol from scratch. Norm placements and position
schemes are built knowing their `Site` (is the stack's self-attention causal, how deep is the
model), never the name of a stack, so one part serves encoder-decoders, decoder-only and
encoder-only models alike.

Optional hooks (`Settings`, `spec_problem`, `auto_width`, `wants_final_norm`, `compose`, `forward_flops`,
`init_gain`, `takes_real_tokens`, `aux_loss`, `copies`) are runtime-checkable Protocols in
zoo.specs.hooks, each with what a part that omits it gets; `weight_roles` and `init_std` are
declared by zoo.roles.HoldsWeights. Callers check a part against a Protocol (`implements`), never a
name; the base classes below (NormPlacement, FeedForwardBase, PositionScheme, Attention) declare
the hooks with their defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zoo.dropout.masks import Dropout
from zoo.errors import InputError
from zoo.parts.qk_norm import apply_qk_norm, qk_norm
from zoo.roles import HoldsWeights, Role
from zoo.specs.model_spec import ModelSpec
from zoo.specs.parametrization import score_scale
from zoo.specs.registries import build_part


@dataclass(frozen=True)
class Site:
    """Where a norm placement or position scheme serves: whether its stack's self-attention is
    causal, and the model's depths (0 for a stack the model does not have), which DeepNorm's
    constants depend on."""

    causal: bool
    encoder_layers: int
    decoder_layers: int

    @property
    def layers(self) -> int:
        """The depth of the stack served."""
        return self.decoder_layers if self.causal else self.encoder_layers


class CachesKeys(Protocol):
    """What attention asks of a decoding cache (zoo.kernels.attend.KVCache is one): self-attention
    appends each step's keys and values under its slot; cross-attention computes the memory's once."""

    def append(self, slot: object, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]: ...

    def memo(self, slot: object, compute: Callable[[], tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]: ...


class WrapsSublayers(Protocol):
    """A norm placement: built as `part(spec, site=site, index=i)` for the i-th sublayer of a
    block (0: self-attention, then cross-attention where the block has it, then the
    feed-forward), holding that sublayer's residual state (norm, dropout, scalars). The block
    hands all its sublayers to the placement's class at once, `compose(x, [(part_i, F_i), ...])`,
    so a placement decides how they combine: in turn (post, pre, ...) or side by side (parallel).
    A part without `compose` is called once per sublayer, in turn: `part(x, F) -> x'`."""

    def __call__(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor: ...


class EncodesPositions(Protocol):
    """A position scheme: built as `part(spec, site=site)`, one per stack, shared by its layers."""

    max_length: int | None

    def __call__(self, x: Tensor, positions: Tensor) -> Tensor: ...
    def rotate(self, x: Tensor, positions: Tensor) -> Tensor: ...
    def score_bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor | None: ...
    def prepare(self, length: int) -> None: ...
    def check_length(self, length: int) -> None: ...


class Attends(Protocol):
    """An attention layout: built as `part(spec)`; see Attention for the call and the weights."""

    def __call__(self, x: Tensor, memory: Tensor | None = None, *, mask: Tensor | None, causal: bool = False,
                 position: EncodesPositions | None = None, positions: Tensor | None = None,
                 key_positions: Tensor | None = None, cache: CachesKeys | None = None,
                 need_weights: bool = False) -> tuple[Tensor, Tensor | None]: ...
    def canonical_state(self) -> dict[str, Tensor]: ...
    def load_canonical_state(self, state: dict[str, Tensor]) -> None: ...


@runtime_checkable
class NormType(Protocol):
    """A normalization: built as `part(spec)`."""

    def __call__(self, x: Tensor) -> Tensor: ...


@runtime_checkable
class FeedForward(Protocol):
    """A feed-forward: built as `part(spec)`, of width `spec.ffn_width`."""

    def __call__(self, x: Tensor) -> Tensor: ...


Step = tuple[nn.Module, Callable[[Tensor], Tensor]]
"""One sublayer of a block: the placement part built for it, and the sublayer F itself."""


class NormPlacement(nn.Module):
    """The residual connection, normalization (the spec's norm_type) and dropout of one sublayer
    F of a block, built knowing its site and its sublayer's index in the block. The block's
    sublayers run in turn unless a subclass defines `compose` (parallel). `normalizes` False
    builds no norm (ReZero, Fixup)."""

    wants_final_norm: ClassVar[bool] = False
    """Whether `final_norm: auto` puts a norm after the last block (pre-norm needs one)."""

    def __init__(self, spec: ModelSpec, site: Site, index: int = 0, normalizes: bool = True):
        super().__init__()
        self.norm = build_part("norm_type", spec) if normalizes else nn.Identity()
        self.dropout = Dropout(spec.dropout_at("residual"))

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        """x after the sublayer, where the block's sublayers run in turn."""
        raise NotImplementedError

    @classmethod
    def compose(cls, x: Tensor, steps: Sequence[Step]) -> Tensor:
        """A block's sublayers, each wrapped by its placement part, in turn (Parallel sums them)."""
        for part, sublayer in steps:
            x = part(x, sublayer)
        return x

    @classmethod
    def init_gain(cls, spec: ModelSpec, role: Role | None, site: Site | None) -> float:
        """The gain of the initial draw of a matrix of `role` (None: a part that declares no roles)
        in the stack at `site` (None: outside the stacks, the output projection): 1 unless the
        placement rescales the initialization (DeepNorm, Fixup)."""
        return 1.0


class FeedForwardBase(HoldsWeights, nn.Module):
    """The built-in feed-forwards' base, declaring their optional hooks with the defaults a part
    that omits them gets: d_ff auto is 4 d_model, called as ffn(x), no auxiliary loss."""

    takes_real_tokens: ClassVar[bool] = False
    aux_loss: Tensor | None = None
    matrices: ClassVar[int] = 2
    """The d_model x d_ff weight matrices each token passes through: what its FLOPs count."""

    @staticmethod
    def auto_width(d_model: int) -> int:
        return 4 * d_model

    @classmethod
    def forward_flops(cls, spec: ModelSpec, tokens: int) -> int:
        """The matrix products of a training forward over `tokens` positions (padding included: it
        is computed), 2 per multiply-add, at the layer spec's width (zoo.model.flops)."""
        return 2 * tokens * cls.matrices * spec.d_model * spec.ffn_width


class PositionScheme(HoldsWeights, nn.Module):
    """Where order enters the model. Positions are int64 tensors (B or 1, T): each row's own
    positions, so a batch of right-padded prompts can decode with each row at its own length.

    The defaults do nothing, so a scheme overrides only the hooks it uses.
    """

    max_length: int | None = None
    """The longest sequence the scheme can encode, or None for no limit."""

    def __init__(self, spec: ModelSpec, site: Site):
        super().__init__()
        self.causal = site.causal

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """Embeddings (B, T, d_model) with absolute positions added."""
        return x

    @classmethod
    def absolute(cls) -> bool:
        """Whether the scheme adds positions to the embeddings (its own `forward`: learned,
        sinusoidal): the schemes whose output moves when every position of a document shifts by one
        constant, which relative schemes (rotary, biases) leave as it is but for the rounding."""
        return cls.forward is not PositionScheme.forward

    def rotate(self, x: Tensor, positions: Tensor) -> Tensor:
        """Queries or keys (B, H, T, d_head) rotated by their positions (RoPE)."""
        return x

    def score_bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor | None:
        """A bias (B or 1, H or 1, Tq, Tk) added to self-attention scores (ALiBi, T5), or None,
        for queries at q_positions (B or 1, Tq) and keys at k_positions (B or 1, Tk)."""
        return None

    def prepare(self, length: int) -> None:
        """Positions 0 .. length - 1 are about to be used: refuse a length past max_length (a
        scheme with tables that grow grows them here, where the length is known on the host)."""
        self.check_length(length)

    def check_length(self, length: int) -> None:
        if self.max_length is not None and length > self.max_length:
            raise InputError(
                f"a sequence of {length} positions is longer than max_len {self.max_length} of "
                f"'{type(self).__name__}' positions; raise max_len in the spec or use shorter inputs"
            )


class Attention(HoldsWeights, nn.Module):
    """How heads are held. Subclasses implement forward with the signature below and expose their
    weights in one canonical form: a `q` projection (n_heads * d_head) x d_model, `k` and `v`
    projections (kv_heads * d_head) x d_model, rows grouped by head, and an `out` projection
    d_model x (n_heads * d_head), which initialization, `zoo.convert` and interop share. With
    grouped-query attention (n_kv_heads < n_heads) query head h uses key/value head
    h // (n_heads / n_kv_heads), and the cache holds key/value heads only. Scores are scaled by
    `scale`: 1 / sqrt(d_head), or 1 where the spec does not scale them (T5), then soft-capped
    where the spec caps them (`softcap`, Gemma 2). Where the spec asks, each head's queries and
    keys are normalized first (`qk_norm`, zoo.parts.qk_norm; or unit length with a learned scale per
    query head), and self-attention sees only the keys within `window` positions, the cache keeping
    no key that no later query can see.

    forward(x, memory=None, *, mask, causal=False, position=None, positions=None, key_positions=None,
    cache=None, need_weights=False) returns (out (B, T, d_model), weights (B, H, Tq, Tk) or None).
    Self-attention when memory is None: the position scheme applies to queries at `positions` and
    keys at `key_positions` (the cached keys' and the new ones'; by default `positions`), and the
    cache grows. Cross-attention otherwise: keys come from the memory and are computed once per
    cache. `mask` is a padding mask or None (see zoo.kernels.attend); `causal` hides later keys.
    """

    computes: ClassVar[str | None] = None
    """Parts that name the same function here compute it alike: the same outputs from the same
    weights at the same initialization, without attention dropout. `zoo compare` counts their cells
    as one computation and checks that identity instead of testing it as an effect."""
    weight_roles: ClassVar[dict[str, Role]] = {"q.weight": "attention.query", "k.weight": "attention.key",
                                               "v.weight": "attention.value", "out.weight": "attention.output"}

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.d_model, self.n_heads, self.d_head = spec.d_model, spec.n_heads, spec.d_head
        self.kv_heads, self.group = spec.kv_heads, spec.n_heads // spec.kv_heads
        self.kv_width = self.kv_heads * self.d_head
        self.q_width = spec.attention_width
        self.scale = score_scale(spec)
        self.softcap, self.window = spec.attn.softcap, spec.attn.window
        self.in_kinds, self.out_kinds = (("weight", "bias") if on else ("weight",) for on in (spec.qkv_bias, spec.out_bias))
        self.dropout = spec.dropout_at("attention")
        if spec.attn.qk_norm == "l2":  # scores g cos(q, k) / sqrt(d_head): g = d_head gives them standard spread
            self.qk_scale = nn.Parameter(torch.full((spec.n_heads,), float(spec.d_head)))
        elif spec.attn.qk_norm is not None:
            self.whole = spec.attn.qk_norm_scope == "projection"
            self.q_norm, self.k_norm = qk_norm(spec, self.n_heads), qk_norm(spec, self.kv_heads)

    def norm_queries(self, q: Tensor) -> Tensor:
        """Queries (B, H, T, d_head) normalized as the spec's qk_norm says (unchanged without one)."""
        if hasattr(self, "qk_scale"):
            return F.normalize(q, dim=-1) * self.qk_scale[:, None, None]
        return self.normed(self.q_norm, q) if hasattr(self, "q_norm") else q

    def norm_keys(self, k: Tensor) -> Tensor:
        if hasattr(self, "qk_scale"):
            return F.normalize(k, dim=-1)
        return self.normed(self.k_norm, k) if hasattr(self, "k_norm") else k

    def normed(self, norm: nn.Module, x: Tensor) -> Tensor:
        return apply_qk_norm(norm, x, self.whole)

    def qk_norm_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """The query/key normalization's parameters, which the layouts' canonical states carry."""
        return [(name, p) for name, p in self.named_parameters() if name.split(".")[0] in ("qk_scale", "q_norm", "k_norm")]

    def qk_norm_state(self) -> dict[str, Tensor]:
        return {name: p.detach().clone() for name, p in self.qk_norm_parameters()}

    @torch.no_grad()
    def load_qk_norm_state(self, state: dict[str, Tensor]) -> None:
        for name, param in self.qk_norm_parameters():
            param.copy_(state[name])

    def canonical_state(self) -> dict[str, Tensor]:
        raise NotImplementedError

    def load_canonical_state(self, state: dict[str, Tensor]) -> None:
        raise NotImplementedError

    def attention_dropout(self) -> float:
        return self.dropout if self.training else 0.0

    @staticmethod
    def rotate_queries(q: Tensor, position, positions: Tensor | None) -> Tensor:
        return q if position is None else position.rotate(q, positions)

    @staticmethod
    def self_keys(slot, k, v, position, positions: Tensor | None, cache: CachesKeys | None):
        """Self-attention: rotate the new keys at their positions, then extend the cache."""
        if position is not None:
            k = position.rotate(k, positions)
        if cache is not None:
            k, v = cache.append(slot, k, v)
        return k, v

    @staticmethod
    def memory_keys(slot, project, memory: Tensor, cache: CachesKeys | None):
        """Cross-attention: keys and values of the memory, once per cache."""
        return cache.memo(slot, lambda: project(memory)) if cache is not None else project(memory)

    @staticmethod
    def score_bias(position, positions: Tensor | None, key_positions: Tensor | None) -> Tensor | None:
        if position is None:
            return None
        return position.score_bias(positions, positions if key_positions is None else key_positions)
