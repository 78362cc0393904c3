"""Rows cut from documents joined end to end (a language model's `pack`), and where each row
begins inside its document: a document longer than a row goes on in the next ones (nanoGPT,
litgpt), and where the model restarts positions at each document (`documents: separate`) with
positions added to its embeddings, its tokens in a later row continue the positions it had
reached (zoo.kernels.masks.document_positions) instead of starting again from 0."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


class Rows(tuple):
    """A batch's (src, tgt), which unpacks as the pair it is, and `offsets` (B,), where its rows are
    cut from documents joined end to end: how many tokens of the document each row begins inside
    came before the row (0 where a row begins at a document's start); None for whole examples."""

    offsets: Tensor | None

    def __new__(cls, src: Tensor, tgt: Tensor, offsets: Tensor | None = None) -> Rows:
        rows = super().__new__(cls, (src, tgt))
        rows.offsets = offsets
        return rows


def offsets_of(batch: tuple[Tensor, Tensor]) -> Tensor | None:
    """The row offsets a task's batch carries (Rows), or None."""
    return getattr(batch, "offsets", None)


def packed(documents: list[list[int]], length: int, keep_rest: bool) -> tuple[list[list[int]], list[int]]:
    """The documents joined end to end, cut into rows of `length` (the shorter rest kept where
    asked), and each row's offset inside the document it begins in."""
    stream = [token for document in documents for token in document]
    end = len(stream) if keep_rest else len(stream) - len(stream) % length
    starts = np.cumsum([0, *map(len, documents)])[:-1]
    rows = list(range(0, end, length))
    return [stream[start : start + length] for start in rows], offsets_in(starts, np.asarray(rows, dtype=np.int64))


def offsets_in(document_starts: np.ndarray, row_starts: np.ndarray) -> list[int]:
    """Each row start's distance from the start of the document it lies in, for documents that
    begin at `document_starts` (ascending, the first at 0) of one stream."""
    if not len(row_starts):
        return []
    inside = np.searchsorted(document_starts, row_starts, side="right") - 1
    return (row_starts - document_starts[inside]).tolist()


def offsets_tensor(offsets: list[int] | None, numbers) -> Tensor | None:
    """The offsets of rows `numbers`, as a batch carries them; None where rows are whole examples."""
    return None if offsets is None else torch.tensor([offsets[int(n)] for n in numbers], dtype=torch.long)
