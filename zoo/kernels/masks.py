"""Masks from token ids, in the zoo's one convention: bool, True where a query may see a key,
shaped to broadcast over (batch, heads, queries, keys), or None where every key is visible.
Padding masks are built once at the model's boundary; causality is the decoder's self-attention's
own (`causal=True`), so a kernel may apply it without a mask tensor.

Documents packed in one row (spec.documents `separate` or `masked`) begin at each bos_id: a
query sees the keys of its own document only (a (B, 1, queries, keys) mask), and under `separate`
its position counts from its document's start, so each document is computed as if alone (a
document cut across rows continues its positions in the next row, where they are absolute)."""

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


def documents_apart(spec) -> bool:
    """Whether attention stops at each document's start (spec.documents other than `joined`)."""
    return spec.documents != "joined"


def document_ids(ids: Tensor, spec) -> Tensor:
    """(B, T): the document of each column, counted by the starts (bos_id) at or before it; the
    columns before a row's first start (a document cut off by packing) are document 0."""
    return (ids == spec.bos_id).cumsum(1)


def self_mask(ids: Tensor, spec, queries: int | None = None) -> Tensor | None:
    """The mask of a decoder's self-attention over every column of `ids`, for its last `queries`
    columns (all by default): the padding mask, and where documents are apart, the keys of each
    query's own document only. A mask a row of one document would not need is the padding mask."""
    padding = target_mask(ids, spec)
    if not documents_apart(spec):
        return padding
    documents = document_ids(ids, spec)
    if ids.device.type == "cpu" and bool((documents == documents[:, :1]).all()):
        return padding  # every row one document: no mask of queries x keys, so kernels may take none
    own = (documents[:, -(queries or ids.size(1)):, None] == documents[:, None, :])[:, None]
    return own if padding is None else own & padding


def document_positions(ids: Tensor, spec, offsets: Tensor | None = None) -> Tensor | None:
    """(B, T) positions that restart at each document's start (spec.documents `separate`),
    counting the real tokens of a row (a right-padded prompt's continuation follows its last
    token); None where positions are the columns' own. `offsets` (B,): how many tokens of the
    document a packed row begins inside came before the row, which its columns before the row's
    first start continue from (zoo.tasks.packing)."""
    if spec.documents != "separate":
        return None
    count = real_tokens(ids, spec).cumsum(1) - 1
    starts = ids == spec.bos_id
    start = torch.where(starts, count, torch.zeros_like(count)).cummax(1).values
    positions = (count - start).clamp(min=0)
    if offsets is None:
        return positions
    continued = starts.cumsum(1) == 0  # the columns before the row's first start
    return positions + torch.where(continued, offsets[:, None].to(positions), torch.zeros_like(positions))


def real_queries(mask: Tensor, queries: int) -> Tensor:
    """(B, queries) bool: which of the last `queries` positions are real tokens, read from a
    padding mask (B, 1, 1, K) or a document mask (B, 1, Q, K), where a token sees itself exactly
    when it is real."""
    if mask.size(-2) == 1:
        return mask[:, 0, 0, -queries:]
    return mask[:, 0].diagonal(offset=mask.size(-1) - mask.size(-2), dim1=-2, dim2=-1)[:, -queries:]
