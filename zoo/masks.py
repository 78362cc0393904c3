"""Masks from token ids, in the zoo's one convention: bool, True where a query may see a key,
shaped to broadcast over (batch, heads, queries, keys). Built once at the model's boundary."""

import torch
from torch import Tensor


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """(B, 1, 1, S): every query may see the keys that are not padding."""
    return (ids != pad_id)[:, None, None, :]


def causal_mask(q_len: int, k_len: int, device: torch.device) -> Tensor:
    """(1, 1, q_len, k_len): the last q_len of k_len positions each see themselves and earlier keys."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(k_len - q_len)[None, None]


def decoder_mask(tokens: Tensor, q_len: int, pad_id: int) -> Tensor:
    """(B, 1, q_len, K): the last q_len of the K target tokens decoded so far see earlier non-pad tokens."""
    return padding_mask(tokens, pad_id) & causal_mask(q_len, tokens.size(1), tokens.device)
