"""The training statistics between two logs, kept on the device so that no step waits for them.

Each step adds its summed loss and marks, still on the device, the first step whose loss or
gradient norm was not finite. They are read back once, at a log, a checkpoint or an evaluation
(`settle`), which is where a divergence is caught: at the next log at the latest, and always
before a checkpoint, so the last checkpoint written is from before it.
"""

from __future__ import annotations

import math
import time

import torch
import torch.distributed as dist
from torch import Tensor

from zoo.errors import Diverged
from zoo.trainer.parallelism import Parallelism

NONE_BAD = 2**62
"""`first_bad` while every step was finite (a minimum over ranks keeps the earliest bad step)."""


class Window:
    def __init__(self, device: torch.device, dist_: Parallelism):
        self.device, self.dist = device, dist_
        self.first_bad = torch.tensor(NONE_BAD, dtype=torch.long, device=device)
        self.start()

    def start(self) -> None:
        self.loss = torch.zeros((), dtype=torch.float64, device=self.device)
        self.tokens, self.began = 0, time.perf_counter()
        self.aux, self.aux_steps = torch.zeros((), dtype=torch.float64, device=self.device), 0

    def add(self, step: int, loss_sum: Tensor, tokens: int, grad_norm: Tensor, grad_must_be_finite: bool = True,
            aux: Tensor | None = None) -> None:
        """One step's summed loss (this rank's rows), the global batch's tokens, the gradient norm
        (which fp16's scaler may let be infinite: it skips that step), the parts' auxiliary loss."""
        self.loss += loss_sum.detach().double()
        if aux is not None:
            self.aux += aux.detach().double()
            self.aux_steps += 1
        self.tokens += tokens
        finite = torch.isfinite(loss_sum.detach())
        if grad_must_be_finite:
            finite &= torch.isfinite(grad_norm)
        self.first_bad = torch.where(finite, self.first_bad, self.first_bad.clamp(max=step))
        self.grad_norm = grad_norm

    def settle(self) -> None:
        """Read the device once; a step whose loss or gradient was not finite ends the run."""
        first_bad = self.first_bad
        if self.dist.world > 1:
            first_bad = first_bad.clone()
            dist.all_reduce(first_bad, op=dist.ReduceOp.MIN)
        step = int(first_bad)
        if step != NONE_BAD:
            raise Diverged(f"step {step}: the loss or the gradient is not finite", step)

    def mean_loss(self) -> float:
        """The window's mean loss over all ranks so far (a read-back: the first step's base of the
        explosion rule)."""
        return self.dist.sum(self.loss).item() / max(self.tokens, 1)

    def read(self) -> dict[str, float]:
        """The window's mean loss over all ranks, its last gradient norm and tokens/s; starts a new window."""
        self.settle()
        now = time.perf_counter()
        row = {"train/loss": self.mean_loss(), "train/grad_norm": float(self.grad_norm),
               "train/tokens_per_s": self.tokens / max(now - self.began, 1e-9)}
        if self.aux_steps:  # the mean over steps and ranks; only for models whose parts add one
            row["train/aux_loss"] = self.dist.sum(self.aux).item() / self.dist.world / self.aux_steps
        self.start()
        if not math.isfinite(row["train/loss"]):
            raise Diverged(f"the loss is {row['train/loss']}")
        return row
