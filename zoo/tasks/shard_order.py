"""The order in which a run reads the rows of a token store: a new random permutation each epoch,
a pure function of (seed, epoch), computed for the rows a batch needs and never held whole.

A shuffled index of a billion-token corpus (a million rows of 1,024) would be 8 MB a rank and grow
with the corpus; a keyed Feistel network permutes the row numbers in constant memory instead
(cycle-walking back into [0, rows) from the power of four above it), so the batch of any step is
found without reading the steps before it: a resumed run, and every rank, compute the same rows.
"""

from __future__ import annotations

import numpy as np

ROUNDS = 4
MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: every input bit moves every output bit (uint64 in, uint64 out)."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class RowPermutation:
    """A bijection of [0, size) keyed by (seed, epoch)."""

    def __init__(self, size: int, seed: int, epoch: int):
        self.size = size
        self.half = max(1, (int(size - 1).bit_length() + 1) // 2)
        self.low = np.uint64((1 << self.half) - 1)
        with np.errstate(over="ignore"):
            base = mix64(mix64(np.array([seed % 2**64], dtype=np.uint64)) + np.uint64(epoch % 2**64))
            self.keys = mix64(base * np.uint64(ROUNDS + 1) + np.arange(1, ROUNDS + 1, dtype=np.uint64))

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        shift = np.uint64(self.half)
        left, right = x >> shift, x & self.low
        for key in self.keys:
            left, right = right, left ^ (mix64(right ^ key) & self.low)
        return (left << shift) | right

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The permuted row of each position (each in [0, size))."""
        out = self._feistel(np.asarray(positions, dtype=np.uint64))
        outside = out >= self.size
        while outside.any():  # cycle-walk: a bijection of the larger domain, walked until it lands inside
            out[outside] = self._feistel(out[outside])
            outside = out >= self.size
        return out.astype(np.int64)


def epoch_rows(seed: int, size: int, start: int, count: int) -> np.ndarray:
    """The rows at positions start .. start + count of the endless sequence of epochs, each epoch
    a permutation of all `size` rows: the rows of one batch, however far into training."""
    positions = np.arange(start, start + count, dtype=np.int64)
    epochs, within = positions // size, positions % size
    out = np.empty(count, dtype=np.int64)
    for epoch in np.unique(epochs):
        where = epochs == epoch
        out[where] = RowPermutation(size, seed, int(epoch))(within[where])
    return out
