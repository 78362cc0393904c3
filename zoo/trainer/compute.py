"""What a run has spent: training model FLOPs (zoo.model.flops) and the labels its loss counted,
added up every step, summed over ranks, held in the checkpoint's progress so that a resume counts
on; and the budget (train.budget) that ends the run at the first step where it is spent."""

from __future__ import annotations

import torch

from zoo.errors import ConfigError
from zoo.model.flops import stack_shapes, training_flops, uncounted
from zoo.records import CheckpointProgress
from zoo.specs.experiment import BudgetSpec
from zoo.specs.model_spec import ModelSpec
from zoo.trainer.feed import Batch
from zoo.trainer.parallelism import Parallelism


class ComputeCounter:
    def __init__(self, spec: ModelSpec, reads: list[str], progress: CheckpointProgress, budget: BudgetSpec,
                 dist: Parallelism, device: torch.device):
        self.spec, self.reads, self.progress, self.budget, self.dist = spec, reads, progress, budget, dist
        self.device = device
        self.countable = not uncounted(spec)
        if budget.flops is not None and not self.countable:
            raise ConfigError(f"train.budget.flops: ffn {', '.join(uncounted(spec))} declares no FLOPs "
                              "(zoo.specs.hooks.CountsFlops), so the run's FLOPs are not counted and the budget could "
                              "never end it; budget the run in tokens instead (train.budget.tokens)")
        if not self.countable:
            progress.flops = None
        self.pending_flops, self.pending_tokens = 0, 0
        self.by_shape: dict[tuple, int] = {}
        """A micro-batch's training FLOPs by its inputs' shapes: batches repeat a few shapes."""

    def add(self, micro: list[Batch]) -> None:
        """One step's micro-batches (this rank's); the labels are the global batch's, counted once."""
        if self.countable:
            for batch in micro:
                key = tuple(t.shape for t in batch.inputs)
                if key not in self.by_shape:
                    self.by_shape[key] = training_flops(self.spec, stack_shapes(self.reads, batch.inputs))
                self.pending_flops += self.by_shape[key]
        self.pending_tokens += micro[0].tokens

    def settle(self) -> None:
        """Add what the steps since the last settling spent to the progress: under torchrun the ranks'
        FLOPs are summed (a collective, so every rank settles at the same steps)."""
        flops = self.pending_flops
        if self.dist.world > 1:
            flops = self.dist.sum(torch.tensor(float(flops), dtype=torch.float64, device=self.device)).item()
        if self.progress.flops is not None:
            self.progress.flops = self.progress.flops + flops
        if self.progress.tokens is not None:
            self.progress.tokens = self.progress.tokens + self.pending_tokens
        self.pending_flops, self.pending_tokens = 0, 0

    def spent(self) -> str | None:
        """Why the budget ends the run here, or None: what was spent against what was allowed."""
        flops, tokens = self.progress.flops, self.progress.tokens
        if self.budget.flops is not None and flops is not None and flops >= self.budget.flops:
            return f"the budget of {self.budget.flops:.3g} training FLOPs is spent ({flops:.3g})"
        if self.budget.tokens is not None and tokens is not None and tokens >= self.budget.tokens:
            return f"the budget of {self.budget.tokens:,} tokens is spent ({tokens:,})"
        return None

    def unspent(self, steps: int) -> str | None:
        """Why a budget set for the run did not end it (said when it ended at train.steps), or None:
        runs meant to compare at equal compute would then compare at equal steps, in silence."""
        flops, tokens = self.progress.flops, self.progress.tokens
        if self.budget.flops is not None and flops is None:
            return (f"the budget of {self.budget.flops:.3g} training FLOPs was never applied: the run resumed from a "
                    "checkpoint that did not count its FLOPs")
        if self.budget.flops is not None and flops < self.budget.flops:
            return (f"the budget of {self.budget.flops:.3g} training FLOPs was never reached: train.steps {steps} ended "
                    f"the run at {flops:.3g} ({flops / self.budget.flops:.0%}); raise train.steps so that the budget "
                    "ends it")
        if self.budget.tokens is not None and tokens is not None and tokens < self.budget.tokens:
            return (f"the budget of {self.budget.tokens:,} tokens was never reached: train.steps {steps} ended the run "
                    f"at {tokens:,} ({tokens / self.budget.tokens:.0%}); raise train.steps so that the budget ends it")
        return None

    def metrics(self) -> dict[str, float]:
        counted = {"train/flops": self.progress.flops, "train/tokens": self.progress.tokens}
        return {key: float(value) for key, value in counted.items() if value is not None}
