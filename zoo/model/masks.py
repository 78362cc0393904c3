"""Masks from token ids, in the zoo's one convention: bool, True where a query may see a key,
shaped to broadcast over (batch, heads, queries, keys), or None where every key is visible.
Padding masks are built once at the model's boundary; causality is the decoder's self-attention's
own (`causal=True`), so a kernel may apply it without a mask tensor."""

import torch
from torch import Tensor


def padding_mask(ids: Tensor, pad_id: int, start_is_pad: bool = False) -> Tensor | None:
    """(B, 1, 1, S): every query may see the keys that are not padding. None when no key is
    padding, so attention kernels that take no mask can run; checked for ids on the host only,
    where it costs no device synchronization. `start_is_pad`: the ids are a decoder input whose
    first token, the start, is the pad id (T5, Marian), and is not padding."""
    visible = ids != pad_id
    if start_is_pad:
        visible[:, 0] = True
    visible = visible[:, None, None, :]
    if ids.device.type == "cpu" and bool(visible.all()):
        return None
    return visible


def real_tokens(ids: Tensor, spec) -> Tensor:
    """(B, T) bool: True at every token that is not padding, in a decoder input whose start token
    may be the pad id (then the first column is real)."""
    real = ids != spec.pad_id
    if spec.start_is_pad:
        real[:, 0] = True
    return real


def target_mask(tgt: Tensor, spec) -> Tensor | None:
    """The padding mask of a decoder input (starting with the spec's bos_id)."""
    return padding_mask(tgt, spec.pad_id, spec.start_is_pad)


def causal_mask(q_len: int, k_len: int, device: torch.device) -> Tensor:
    """(1, 1, q_len, k_len): the last q_len of k_len positions each see themselves and earlier keys."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(k_len - q_len)[None, None]

