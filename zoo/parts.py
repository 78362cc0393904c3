"""The small fixed interfaces between axes. Every registered part subclasses one of these.

- norm (NormPlacement): forward(x, sublayer) -> x; where normalization sits around a sublayer.
- norm_type: any nn.Module mapping (..., d_model) -> (..., d_model); the normalization itself.
- position (PositionScheme): may add to the embeddings, rotate queries and keys, or bias scores.
- attention (Attention): queries from x, keys/values from x or the encoder memory, one mask
  convention (see zoo.attend), an optional incremental cache.
- ffn: any nn.Module mapping (B, T, d_model) -> (B, T, d_model).

Any part may declare `Settings` (see zoo.choices) and a classmethod `spec_problem(spec) -> str |
None` that ModelSpec validation calls, so a part's needs (RoPE: an even d_head) fail at the spec.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from torch import Tensor, nn

from zoo.attend import KVCache
from zoo.dropout import Dropout
from zoo.model_spec import ModelSpec
from zoo.registries import registry

Stack = Literal["encoder", "decoder"]


def build_part(axis: str, spec: ModelSpec, **context: Any) -> nn.Module:
    """The part the spec names on an axis, built from the spec (and, for norm placements and
    position schemes, the stack it serves: `stack="encoder"` or `"decoder"`)."""
    return registry(axis).get(getattr(spec, axis).name)(spec, **context)


class NormPlacement(nn.Module):
    """Wraps one sublayer F with its residual connection, its normalization (the spec's
    norm_type) and its dropout. Built once per sublayer, knowing its stack."""

    wants_final_norm: ClassVar[bool] = False
    """Whether `final_norm: auto` puts a norm after the last block (pre-norm needs one)."""

    def __init__(self, spec: ModelSpec, stack: Stack):
        super().__init__()
        self.norm = build_part("norm_type", spec)
        self.dropout = Dropout(spec.dropout)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        raise NotImplementedError

    @classmethod
    def init_gain(cls, spec: ModelSpec, name: str) -> float:
        """The gain of the initial draw of the canonical parameter `name` (`decoder.layers.0.ffn.
        linear1.weight`): 1 unless the placement rescales the initialization (DeepNorm)."""
        return 1.0


class PositionScheme(nn.Module):
    """Where order enters the model. Positions of a step start at `offset` (earlier decoded steps).

    The defaults do nothing, so a scheme overrides only the hooks it uses.
    """

    max_length: int | None = None
    """The longest sequence the scheme can encode, or None for no limit."""

    def __init__(self, spec: ModelSpec, stack: Stack):
        super().__init__()
        self.stack = stack

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Embeddings (B, T, d_model) with absolute positions added."""
        return x

    def rotate(self, x: Tensor, offset: int = 0) -> Tensor:
        """Queries or keys (B, H, T, d_head) rotated by their positions (RoPE)."""
        return x

    def score_bias(self, q_len: int, k_len: int, offset: int = 0) -> Tensor | None:
        """A bias (H or 1, q_len, k_len) added to self-attention scores (ALiBi, T5), or None.

        Queries sit at positions offset .. offset + q_len - 1, keys at 0 .. k_len - 1.
        """
        return None

    def check_length(self, length: int) -> None:
        if self.max_length is not None and length > self.max_length:
            raise ValueError(
                f"a sequence of {length} positions is longer than max_len {self.max_length} of "
                f"'{type(self).__name__}' positions; raise max_len in the spec or use shorter inputs"
            )


class Attention(nn.Module):
    """How heads are held. Subclasses implement forward with the signature below and expose their
    weights in one canonical form: a `q` projection (n_heads * d_head) x d_model, `k` and `v`
    projections (kv_heads * d_head) x d_model, rows grouped by head, and an `out` projection
    d_model x (n_heads * d_head), which initialization, `zoo.convert` and interop share. With
    grouped-query attention (n_kv_heads < n_heads) query head h uses key/value head
    h // (n_heads / n_kv_heads), and the cache holds key/value heads only. Scores are scaled by
    `scale`: 1 / sqrt(d_head), or 1 where the spec does not scale them (T5).

    forward(x, memory=None, *, mask, causal=False, position=None, offset=0, cache=None,
    need_weights=False) returns (out (B, T, d_model), weights (B, H, Tq, Tk) or None). Self-attention
    when memory is None: the position scheme applies and the cache grows. Cross-attention
    otherwise: keys come from the memory and are computed once per cache. `mask` is a padding
    mask or None (see zoo.attend); `causal` hides later keys (the decoder's self-attention).
    """

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.d_model, self.n_heads, self.d_head = spec.d_model, spec.n_heads, spec.d_head
        self.kv_heads, self.group = spec.kv_heads, spec.n_heads // spec.kv_heads
        self.kv_width = self.kv_heads * self.d_head
        self.q_width = spec.attention_width
        self.scale = self.d_head**-0.5 if spec.scale_scores else 1.0
        self.param_kinds = ("weight", "bias") if spec.bias else ("weight",)
        self.dropout = spec.dropout

    def canonical_state(self) -> dict[str, Tensor]:
        raise NotImplementedError

    def load_canonical_state(self, state: dict[str, Tensor]) -> None:
        raise NotImplementedError

    def attention_dropout(self) -> float:
        return self.dropout if self.training else 0.0

    @staticmethod
    def rotate_queries(q: Tensor, position, offset: int) -> Tensor:
        return q if position is None else position.rotate(q, offset)

    @staticmethod
    def self_keys(slot, k, v, position, offset, cache: KVCache | None):
        """Self-attention: rotate keys at their positions, then extend the cache."""
        if position is not None:
            k = position.rotate(k, offset)
        if cache is not None:
            k, v = cache.append(slot, k, v)
        return k, v

    @staticmethod
    def memory_keys(slot, project, memory: Tensor, cache: KVCache | None):
        """Cross-attention: keys and values of the memory, once per cache."""
        return cache.memo(slot, lambda: project(memory)) if cache is not None else project(memory)

    @staticmethod
    def score_bias(position, q: Tensor, k: Tensor, offset: int) -> Tensor | None:
        return None if position is None else position.score_bias(q.size(-2), k.size(-2), offset)
