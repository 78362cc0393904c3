"""The training loss: summed cross-entropy over the counted labels (the mean is taken over the
global batch by the caller), with label smoothing, plus PaLM's z-loss where the recipe asks for it:
z times the squared log-partition log sum exp(logits) of each counted position, which keeps the
softmax normalizer near 1 (Chowdhery et al. 2022, 1e-4 there). Held-out losses are the
cross-entropy alone. Parts may add auxiliary losses of their own (MoE's load balancing), which
join the training loss as they are, already weighted.

With `train.loss_chunk`, the generator and the loss run a chunk of positions at a time, each
chunk's logits recomputed in the backward pass instead of kept (activation checkpointing), so the
batch's full float32 logits (batch x length x vocabulary) never exist at once: the same sum, to
float rounding, in the memory of one chunk's logits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from zoo.specs.hooks import AuxLoss, implements


def training_loss_sum(logits: Tensor, labels: Tensor, pad_id: int, label_smoothing: float = 0.0,
                      z_loss: float = 0.0) -> Tensor:
    """The loss summed over the positions whose label is not the pad id, in float32."""
    flat, targets = logits.float().flatten(0, 1), labels.flatten()
    loss = F.cross_entropy(flat, targets, ignore_index=pad_id, label_smoothing=label_smoothing, reduction="sum")
    if z_loss:  # a mask product, not boolean indexing: nothing is read back from the device
        loss = loss + z_loss * (flat.logsumexp(-1).square() * (targets != pad_id)).sum()
    return loss


def chunked_loss_sum(hidden: Tensor, generator: nn.Module, labels: Tensor, pad_id: int, chunk: int,
                     label_smoothing: float = 0.0, z_loss: float = 0.0) -> Tensor:
    """training_loss_sum(generator(hidden), labels, ...), `chunk` positions at a time: hidden is
    the last stack's output (B, T, d_model), labels (B, T)."""
    flat, targets = hidden.flatten(0, 1), labels.flatten()

    def piece(rows: Tensor, wanted: Tensor) -> Tensor:
        return training_loss_sum(generator(rows)[None], wanted[None], pad_id, label_smoothing, z_loss)

    total = flat.new_zeros((), dtype=torch.float32)
    for start in range(0, flat.size(0), chunk):
        total = total + checkpoint(piece, flat[start : start + chunk], targets[start : start + chunk], use_reentrant=False)
    return total


def batch_loss_sum(forward, generator: nn.Module, batch, pad_id: int, train, autocast) -> Tensor:
    """The training loss summed over a batch's counted labels: the forward under `autocast`, then
    the whole logits' loss in float32, or (train.loss_chunk) the loss a chunk at a time, whose
    generator runs under the same autocast as the forward would have run it."""
    with autocast:
        output = forward(*batch.inputs, batch.padding, head=not train.loss_chunk, **batch.model_inputs())
        if train.loss_chunk:
            return chunked_loss_sum(output, generator, batch.labels, pad_id, train.loss_chunk, train.label_smoothing,
                                    train.z_loss)
    return training_loss_sum(output, batch.labels, pad_id, train.label_smoothing, train.z_loss)


def auxiliary_losses(model: nn.Module) -> list[nn.Module]:
    """The parts that may set an auxiliary loss (zoo.parts.AuxLoss), found once per model."""
    return [module for module in model.modules() if implements(module, AuxLoss)]


def auxiliary_loss(parts: list[nn.Module]) -> Tensor | None:
    """The sum of the `aux_loss` each of these parts set in the model's last training forward, or
    None where none set one."""
    losses = [part.aux_loss for part in parts if part.aux_loss is not None]
    return torch.stack(losses).sum() if losses else None
