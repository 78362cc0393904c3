"""Scaled dot-product attention and the key/value cache shared by every attention variant.

Mask convention (the only one inside the zoo): a bool tensor broadcastable to
(batch, heads, queries, keys), True where a query may look at a key, or None for every key;
`causal` hides the keys after each query on top of it. Masked scores are set to the
dtype's most negative finite value, not -inf, so a query with no visible key (a row that is all
padding) attends uniformly and stays finite instead of turning into NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from zoo.dropout.masks import dropout as zoo_dropout
from zoo.kernels.masks import causal_mask
from zoo.kernels.probes import observe_attention, probing


def visible_keys(mask: Tensor | None, causal: bool, q_len: int, k_len: int, device: torch.device) -> Tensor | None:
    """The padding mask, with later keys hidden too when `causal` (the queries are the last q_len
    of the k_len positions)."""
    if not causal or q_len == 1:  # one query, the newest: every key is at or before it
        return mask
    later = causal_mask(q_len, k_len, device)
    return later if mask is None else mask & later


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    bias: Tensor | None = None,
    dropout: float = 0.0,
    need_weights: bool = False,
    causal: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
) -> tuple[Tensor, Tensor | None]:
    """softmax(softcap(scale q k^T) + bias) v for q (B, H, Tq, d), k and v (B, H, Tk, d); `scale`
    is 1 / sqrt(d) unless given (T5: 1); `softcap` c maps scores s to c tanh(s / c) (Gemma 2)."""
    scale = q.size(-1) ** -0.5 if scale is None else scale
    scores = torch.einsum("bhqd,bhkd->bhqk", q * scale if scale != 1.0 else q, k)
    raw = scores if probing() else None
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias
    mask = visible_keys(mask, causal, q.size(-2), k.size(-2), q.device)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if raw is not None:
        observe_attention(raw, weights, mask)
    dropped = zoo_dropout(weights, dropout)
    out = torch.einsum("bhqk,bhkd->bhqd", dropped, v)
    return out, (weights if need_weights else None)


def stale_columns(positions: Tensor, key_positions: Tensor, mask: Tensor | None, window: int) -> int:
    """How many leading key columns no query at `positions` (B or 1, Tq) or later can see through a
    window: keys at `window` or more positions before every row's earliest query, padding, or
    keys of an earlier document.
    A row's later queries only move forward, so a column stale for every row stays stale (even
    after beam search reorders rows). One read-back of a count per step."""
    stale = key_positions <= positions.amin(-1, keepdim=True) - window
    if mask is not None:  # the newest query's row: documents only begin, so what it cannot see stays hidden
        stale = stale | ~mask[:, 0, -1, :]
    return int(stale.all(0).int().cumprod(0).sum())


def within_window(window: int, q_len: int, mask: Tensor | None, positions: Tensor | None,
                  key_positions: Tensor | None, k: Tensor, v: Tensor, cache: KVCache | None):
    """Sliding-window self-attention, after the new keys joined the cache (slot 0): the cache
    forgets the oldest keys that no query of this step or later can see; the padding mask and the
    key positions follow the keys kept, and keys `window` or more positions away are hidden.
    Returns (mask, key_positions, k, v)."""
    if positions is None:  # called without positions (and so without a cache): the columns' own
        positions = torch.arange(k.size(-2) - q_len, k.size(-2), device=k.device)[None]
    key_positions = positions if key_positions is None else key_positions
    if cache is not None:
        kept = k.size(-2)
        k, v = cache.forget_oldest(0, stale_columns(positions, key_positions[:, -kept:],
                                                    None if mask is None else mask[..., -kept:], window))
    key_positions, mask = key_positions[:, -k.size(-2):], None if mask is None else mask[..., -k.size(-2):]
    near = (positions[:, None, :, None] - key_positions[:, None, None, :]).abs() < window
    return near if mask is None else mask & near, key_positions, k, v


class KVCache:
    """Keys and values one attention layer computed in earlier decoding steps.

    Self-attention `append`s each step's keys; cross-attention `memo`izes the keys of the encoder
    memory, which do not change. `slot` separates groups of heads that cache on their own.
    """

    def __init__(self) -> None:
        self._store: dict[object, tuple[Tensor, Tensor]] = {}

    def append(self, slot: object, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if slot in self._store:
            old_k, old_v = self._store[slot]
            k, v = torch.cat([old_k, k], dim=-2), torch.cat([old_v, v], dim=-2)
        self._store[slot] = (k, v)
        return k, v

    def memo(self, slot: object, compute: Callable[[], tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
        if slot not in self._store:
            self._store[slot] = compute()
        return self._store[slot]

    def forget_oldest(self, slot: object, columns: int) -> tuple[Tensor, Tensor]:
        """Drop the first `columns` cached keys and values of `slot`; returns what is kept."""
        k, v = self._store[slot]
        if columns:
            self._store[slot] = k, v = k[..., columns:, :], v[..., columns:, :]
        return k, v

    def reorder(self, rows: Tensor) -> None:
        """Keep batch rows `rows` (in that order) of everything cached: beam search moves each
        surviving hypothesis's history to its new beam."""
        self._store = {slot: (k[rows], v[rows]) for slot, (k, v) in self._store.items()}


@dataclass
class LayerCache:
    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=KVCache)


@dataclass
class DecoderCache:
    """Everything incremental decoding keeps between steps: the per-layer caches and the positions
    of the cached keys (B or 1, K), each row's own (a batch of prompts of different lengths)."""

    layers: list[LayerCache]
    positions: Tensor | None = None

    @property
    def length(self) -> int:
        """Key columns cached so far."""
        return 0 if self.positions is None else self.positions.size(1)

    def extend(self, positions: Tensor) -> Tensor:
        """Add the positions of a step's new keys; returns those of every key."""
        if self.positions is not None:
            rows = max(self.positions.size(0), positions.size(0))
            positions = torch.cat([self.positions.expand(rows, -1), positions.expand(rows, -1)], dim=1)
        self.positions = positions
        return positions

    def reorder(self, rows: Tensor) -> None:
        for layer in self.layers:
            layer.self_attn.reorder(rows)
            layer.cross_attn.reorder(rows)
        if self.positions is not None and self.positions.size(0) > 1:
            self.positions = self.positions[rows]
