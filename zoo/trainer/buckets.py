"""Batch shapes for compiled training: lengths (and the row counts of token batches) rounded up to
a few buckets, so torch.compile builds one static graph per bucket instead of one per length, or
a dynamic-shape graph whose kernels are slower.

Padding never changes a real token's result (the test grid checks it for every variant), the
loss counts real labels only, and rows of padding alone give finite outputs, so a bucketed
batch trains exactly what the batch it pads trains.
"""

from __future__ import annotations

import torch
from torch import Tensor


def bucket(n: int) -> int:
    """The smallest of 8, 12, 16, 24, 32, 48, 64, 96, ... (the powers of two and 1.5 times them)
    that holds n: at most a third of a bucket is padding, and lengths up to 1024 fall in 15 buckets."""
    size = 8
    while size < n:
        size = size * 3 // 2 if size & (size - 1) == 0 else size * 4 // 3
    return size


def pad_to(tensor: Tensor, dim: int, size: int, value: int) -> Tensor:
    """`tensor` right-padded with `value` along `dim` to `size`."""
    missing = size - tensor.size(dim)
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor, tensor.new_full(shape, value)], dim=dim)


def bucketed(inputs: tuple[Tensor, ...], labels: Tensor, pad_id: int, longest: int,
             rows: bool) -> tuple[tuple[Tensor, ...], Tensor]:
    """Inputs and labels padded to bucketed lengths (never past `longest`, the model's position
    limit) and, with `rows`, to a bucketed row count. The labels pad along with the last input,
    whose positions they label."""
    def width(tensor: Tensor) -> int:
        return max(tensor.size(1), min(bucket(tensor.size(1)), longest))

    inputs = tuple(pad_to(t, 1, width(t), pad_id) for t in inputs)
    labels = pad_to(labels, 1, inputs[-1].size(1), pad_id)
    if rows:
        count = bucket(labels.size(0))
        inputs, labels = tuple(pad_to(t, 0, count, pad_id) for t in inputs), pad_to(labels, 0, count, pad_id)
    return inputs, labels


def explicit(masks: tuple[Tensor | None, ...], inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """Padding masks with None (no key is padding) written out as all-visible masks, so a batch
    that happens to fill its bucket runs the same graph as the others."""
    return tuple(torch.ones(ids.size(0), 1, 1, ids.size(1), dtype=torch.bool) if mask is None else mask
                 for mask, ids in zip(masks, inputs, strict=True))
