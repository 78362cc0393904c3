"""Checks at the model's boundary, so a user's mistake reads as one, not as a shape error from torch."""

from __future__ import annotations

import torch
from torch import Tensor

from zoo.errors import InputError, InputTypeError


def check_ids(name: str, ids: object, vocab_size: int) -> None:
    """`ids` must be an int64 (batch, length) tensor of ids in [0, vocab_size)."""
    if not isinstance(ids, Tensor):
        raise InputTypeError(f"{name} must be a torch.Tensor of int64 token ids, got {type(ids).__name__}")
    if ids.dtype != torch.long:
        raise InputTypeError(
            f"{name} must hold int64 token ids of shape (batch, length); "
            f"got dtype {ids.dtype} with shape {tuple(ids.shape)}"
        )
    if ids.dim() != 2 or ids.size(1) == 0:
        raise InputError(f"{name} must have shape (batch, length) with length >= 1; got shape {tuple(ids.shape)}")
    if ids.numel() == 0:
        return
    low, high = ids.min().item(), ids.max().item()
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise InputError(
            f"{name} holds id {bad}, outside the vocabulary of size {vocab_size} (valid ids 0..{vocab_size - 1})"
        )


def check_memory(memory: object, src: Tensor, d_model: int) -> None:
    """The encoder memory must be (batch, src_length, d_model) for the src it was encoded from."""
    expected = (src.size(0), src.size(1), d_model)
    if not isinstance(memory, Tensor) or tuple(memory.shape) != expected:
        shape = tuple(memory.shape) if isinstance(memory, Tensor) else type(memory).__name__
        raise InputError(f"memory must have shape {expected} to match src {tuple(src.shape)}; got {shape}")


def check_same_batch(src: Tensor, tgt: Tensor) -> None:
    if src.size(0) != tgt.size(0):
        raise InputError(
            f"src and tgt must have the same batch size; got src {tuple(src.shape)} and tgt {tuple(tgt.shape)}"
        )
