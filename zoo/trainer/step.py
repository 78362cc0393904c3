"""One optimizer step on the device: what the trainer's loop calls once per step, with the state a
step needs (optimizer, schedule, fp16 scaler, the wrapped forward, the log window)."""

from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Any

import torch
from torch import Tensor

from zoo.model.kinds import ZooModel
from zoo.specs.experiment import TrainSpec
from zoo.trainer.compiled import CompileClock, compiled
from zoo.trainer.feed import Batch
from zoo.trainer.log_window import Window
from zoo.trainer.objective import auxiliary_loss, auxiliary_losses, batch_loss_sum
from zoo.trainer.optim import make_optimizer, make_schedule
from zoo.trainer.parallelism import Parallelism
from zoo.trainer.recompute import recompute_blocks
from zoo.trainer.sharded_checkpoint import load_sharded
from zoo.trainer.sharding import shard


def sharded_scaler() -> torch.amp.GradScaler:
    """fp16 under fsdp: the scaler that reads every rank's shards (imported here: a plain run does
    not pay for torch.distributed.fsdp)."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    return ShardedGradScaler("cuda")


def dtensor() -> type:
    from torch.distributed.tensor import DTensor

    return DTensor


class TrainStep:
    """Forward, loss, backward, optimizer step. Built after the model is on its device; a resume's
    training state is restored before the forward is wrapped (DDP, compile), as it always was; under
    fsdp after the model is sharded, as its shards are read into the shards the ranks hold."""

    def __init__(self, model: ZooModel, train: TrainSpec, device: torch.device, dist: Parallelism,
                 amp_dtype: torch.dtype | None, saved: dict[str, Any] | None = None):
        self.model, self.train, self.device, self.amp_dtype = model, train, device, amp_dtype
        self.aux_parts = auxiliary_losses(model)
        recompute_blocks(model, dist.checkpointing, dist.checkpoint_every)
        self.sharded = dist.sharded
        if self.sharded:  # before the optimizer, which then holds the shards
            shard(model, amp_dtype, device)
        self.optimizer = make_optimizer(model, train)
        self.schedule = make_schedule(self.optimizer, train)
        self.scaler = None
        if amp_dtype == torch.float16:
            self.scaler = sharded_scaler() if self.sharded else torch.amp.GradScaler("cuda")
        if saved is not None:
            self.load_state_dict(saved)
        self.forward = self.ddp = model
        if dist.replicated:
            ids = [device.index] if device.type == "cuda" else None
            self.forward = self.ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        if train.compile:
            self.forward = compiled(self.forward)
        self.world = dist.world
        self.clock = CompileClock(enabled=train.compile)
        self.window = Window(device, dist)
        self.lr = self.optimizer.param_groups[0]["lr"]

    def state_dict(self) -> dict[str, Any]:
        """Everything that makes a resumed run continue bitwise: weights, optimizer, schedule, the
        fp16 scaler and every random generator (the host's, and the training device's where it is CUDA).
        Under fsdp the weights and the optimizer are left out: each rank writes its shards of them
        (zoo.trainer.sharded_checkpoint)."""
        rest = {"schedule": self.schedule.state_dict(), "scaler": None if self.scaler is None else self.scaler.state_dict(),
                "rng": random_state(self.device)}
        if self.sharded:
            return rest
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), **rest}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The inverse of state_dict (a checkpoint's keys; a sharded checkpoint's folder under `sharded`)."""
        if "sharded" in state:
            load_sharded(state["sharded"], self.model, self.optimizer)
        else:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        restore_random_state(state["rng"], self.device)

    def __call__(self, step: int, micro: list[Batch]) -> None:
        """Nothing is read back from the device, so the host runs ahead to the next batch (see
        zoo.trainer.log_window). The step's micro-batches (train.accumulate) add their gradients
        up, each loss scaled by the global batch's tokens, so they sum to the whole batch's mean;
        under DDP and FSDP the ranks average gradients once, with the last micro-batch's backward."""
        t = self.train
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum, aux = self._backward(micro[0], last=len(micro) == 1, parts=len(micro))
        for i, batch in enumerate(micro[1:], 2):
            more, more_aux = self._backward(batch, last=i == len(micro), parts=len(micro))
            loss_sum = loss_sum + more
            aux = more_aux if aux is None else aux + more_aux
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.grad_clip or math.inf)
        if self.sharded and isinstance(grad_norm, dtensor()):  # the norm over every rank's shards (a collective)
            grad_norm = grad_norm.full_tensor()
        if self.scaler:  # skips a step whose gradient is not finite (and reads that back: fp16 only)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.lr = self.optimizer.param_groups[0]["lr"]  # the rate this step used, before the schedule moves on
        self.schedule.step()
        self.window.add(step, loss_sum, micro[0].tokens, grad_norm, grad_must_be_finite=self.scaler is None, aux=aux)

    def _backward(self, batch: Batch, last: bool, parts: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One micro-batch's forward and backward; its summed loss and its share of the parts'
        auxiliary loss (their mean over micro-batches). DDP syncs gradients at the `last` only."""
        t, pad = self.train, self.model.spec.pad_id
        autocast = torch.autocast(self.device.type, self.amp_dtype) if self.amp_dtype else nullcontext()
        sync = nullcontext() if last or self.ddp is self.model else self.ddp.no_sync()
        if self.sharded:  # FSDP reduces the gradients' shards once, with the last micro-batch's backward
            self.model.set_requires_gradient_sync(last)
        with sync:
            loss_sum = batch_loss_sum(self.forward, self.model.generator, batch, pad, t, autocast)
            aux = auxiliary_loss(self.aux_parts)  # a mean over this rank's tokens, which DDP's averaging keeps
            if aux is not None and parts > 1:
                aux = aux / parts
            # DDP and FSDP average gradients over ranks, so each rank scales its sum to give the global mean.
            loss = loss_sum * self.world / batch.tokens + (0.0 if aux is None else aux)
            (self.scaler.scale(loss) if self.scaler else loss).backward()
        return loss_sum, aux


def random_state(device: torch.device) -> dict[str, Tensor | None]:
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return {"torch": torch.get_rng_state(), "cuda": cuda}


def restore_random_state(saved: dict[str, Tensor | None], device: torch.device) -> None:
    """The inverse of random_state. Generator states must be host byte tensors: each is brought
    to the host first, whatever device the checkpoint was read onto. A CUDA state restores the
    training device's generator; a run moved between CPU and CUDA keeps the host's and draws the
    device's afresh."""
    torch.set_rng_state(saved["torch"].cpu())
    if device.type == "cuda" and saved.get("cuda") is not None:
        torch.cuda.set_rng_state(saved["cuda"].cpu(), device)
