"""The state the public decoding step (`model.decode_step`) carries between steps."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from zoo.kernels.attend import DecoderCache


@dataclass
class Decoding:
    """`cache`: the incremental key/value cache, or None to re-decode every token each step.
    `memory`, `memory_mask`: an encoder-decoder's encoded source. `own_positions`: rows take their
    positions from their tokens, not their columns (a decoder-only model's right-padded prompts).
    `first`: the column of each row's last prompt token, read on the first step only. `fed`: the
    columns the cache holds."""

    cache: DecoderCache | None
    memory: Tensor | None = None
    memory_mask: Tensor | None = None
    own_positions: bool = False
    first: Tensor | None = None
    fed: int = 0

    def reorder(self, rows: Tensor) -> None:
        """Keep batch rows `rows` (beam search moves each surviving hypothesis to its new beam)."""
        if self.cache is not None:
            self.cache.reorder(rows)
