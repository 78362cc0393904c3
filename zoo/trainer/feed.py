"""Training batches built on the host one step ahead, so a step on the GPU waits for nothing.

Everything that needs the values of a batch is done here, on host tensors where it costs no
synchronization: the id check, the token count of the loss's mean, and the padding masks (None
where a side holds no padding, so attention kernels may run without a mask). On CUDA the batch
goes through pinned memory with non_blocking copies; it is prepared while the previous step's
kernels still run. A compiled step takes batches of bucketed shapes (zoo.trainer.buckets).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from zoo.kernels.masks import documents_apart
from zoo.model.inputs import check_ids
from zoo.model.kinds import model_class
from zoo.specs.model_spec import ModelSpec
from zoo.tasks.base import Task
from zoo.tasks.packing import offsets_of
from zoo.trainer.buckets import bucketed, explicit, pad_to
from zoo.trainer.parallelism import Parallelism


class Batch(NamedTuple):
    inputs: tuple[Tensor, ...]
    padding: tuple[Tensor | None, ...]
    labels: Tensor
    tokens: int
    """Labels of the whole global batch that the loss counts (not padding, not a prompt)."""
    offsets: Tensor | None = None
    """Where the model continues a document's positions across packed rows (ZooModel.continues_positions):
    each row's offset in its first document, on the host (zoo.tasks.packing); None elsewhere."""

    def model_inputs(self) -> dict[str, Tensor]:
        """The keyword inputs forward takes beside the sequences and masks."""
        return {} if self.offsets is None else {"offsets": self.offsets}


class BatchFeed:
    """`accumulate` micro-batches per step (train.accumulate): the step's global batch is
    accumulate times as large, and each rank splits its rows into that many micro-batches, every
    accumulate-th row each (rows of similar length stay together in token batches)."""

    def __init__(self, task: Task, batch_size: int, spec: ModelSpec, dist: Parallelism, device: torch.device,
                 batch_tokens: int | None = None, buckets: bool = False, accumulate: int = 1):
        self.task, self.batch_size, self.spec, self.dist, self.device = task, batch_size, spec, dist, device
        self.batch_tokens, self.buckets, self.accumulate = batch_tokens, buckets, accumulate
        self.kind = model_class(spec)
        self._ready: tuple[int, list[Batch]] | None = None

    def global_batch(self, step: int) -> tuple[Tensor, Tensor]:
        """Every rank's rows: batch_size of them per micro-batch, or a budget of batch_tokens per
        rank and micro-batch, each share of rows of similar length (every world-th row of a
        length-sorted batch, then every accumulate-th of those)."""
        if self.batch_tokens is None:
            return self.task.train_batch(step, self.batch_size * self.accumulate)
        shares = self.dist.world * self.accumulate
        return self.task.token_batch(step, self.batch_tokens * shares, shares)

    def prepare(self, step: int) -> None:
        """Build the micro-batches of `step` and start their copy to the device."""
        spec = self.spec
        share = None if self.batch_tokens is not None or self.dist.world == 1 else \
            self.task.rank_share(step, self.batch_size * self.accumulate, self.dist.rank, self.dist.world,
                                 unscored_ids(spec))
        rows = self.global_batch(step) if share is None else share[0]
        src, tgt = rows
        check_ids("src", src, spec.src_vocab_size)
        check_ids("tgt", tgt, spec.tgt_vocab_size)
        inputs, labels = self.kind.frame(spec, src, tgt)
        offsets = offsets_of(rows) if self.kind.continues_positions(spec) else None
        if share is None:
            tokens = max(1, int((labels != spec.pad_id).sum()))  # a batch may hold none (masked LM, rarely)
            inputs, labels = tuple(self.dist.shard(t) for t in inputs), self.dist.shard(labels)
            offsets = None if offsets is None else self.dist.shard(offsets)
        else:  # this rank's rows alone, read so (a token store): the task counts the global batch's labels
            tokens = share[1]
        shares = [(inputs, labels, offsets)] if self.accumulate == 1 else [
            (*trimmed(tuple(t[m :: self.accumulate] for t in inputs), labels[m :: self.accumulate], spec.pad_id),
             None if offsets is None else offsets[m :: self.accumulate])
            for m in range(self.accumulate)]
        self._ready = (step, [self._batch(*share, tokens) for share in shares])

    def _batch(self, inputs: tuple[Tensor, ...], labels: Tensor, offsets: Tensor | None, tokens: int) -> Batch:
        spec = self.spec
        if self.buckets:
            inputs, labels = bucketed(inputs, labels, spec.pad_id, spec.max_len, rows=self.batch_tokens is not None)
            offsets = None if offsets is None else pad_to(offsets, 0, labels.size(0), 0)
        masks = self.kind.input_masks(spec, inputs)
        masks = explicit(masks, inputs) if self.buckets else masks
        return Batch(tuple(map(self._to_device, inputs)), tuple(map(self._to_device, masks)), self._to_device(labels),
                     tokens, offsets)

    def take(self, step: int) -> list[Batch]:
        """The micro-batches of `step`: those prepared ahead, or built now (the first step, a resume)."""
        if self._ready is None or self._ready[0] != step:
            self.prepare(step)
        batches = self._ready[1]
        self._ready = None
        return batches

    def _to_device(self, tensor: Tensor | None) -> Tensor | None:
        if tensor is None or self.device.type == "cpu":
            return tensor
        return tensor.contiguous().pin_memory().to(self.device, non_blocking=True)


def unscored_ids(spec: ModelSpec) -> frozenset[int]:
    """Ids whose labels the framing leaves unscored wherever they stand in a row: pad, and a
    document's start where documents are apart (zoo.model.decoder_only.frame)."""
    return frozenset({spec.pad_id, *([spec.bos_id] if documents_apart(spec) else [])})


def trimmed(inputs: tuple[Tensor, ...], labels: Tensor, pad_id: int) -> tuple[tuple[Tensor, ...], Tensor]:
    """A micro-batch without the columns that are padding in all its rows, inputs and labels
    alike (the labels keep the last input's width): less work, the same loss."""
    def width(*tensors: Tensor) -> int:
        used = torch.stack([(t != pad_id).any(0) for t in tensors]).any(0).nonzero()
        return int(used.max()) + 1 if used.numel() else 1

    *first, last = inputs
    keep = width(last, labels)
    return (*(t[:, : width(t)] for t in first), last[:, :keep]), labels[:, :keep]
