"""Evaluation during training: the same held-out batches each time, made once on rank 0; the best
values kept in the run's progress; the final metrics and the cross-attention picture at the end."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from zoo.errors import Diverged
from zoo.metrics import better, curve_means
from zoo.model.kinds import ZooModel
from zoo.records import CheckpointProgress
from zoo.specs.experiment import TrainSpec
from zoo.tasks.base import Task
from zoo.trainer.distributed import Distributed
from zoo.trainer.evaluate import evaluate, evaluate_split
from zoo.trainer.picture import try_cross_attention_png


class Evaluator:
    def __init__(self, task: Task, train: TrainSpec, device: torch.device, dist: Distributed,
                 progress: CheckpointProgress):
        self.task, self.train, self.device, self.dist, self.progress = task, train, device, dist, progress
        self.batches = task.eval_batches(train.eval_size, train.batch_size) if dist.is_main else []
        self.references = task.references(train.eval_size) if dist.is_main else None
        self.decoding = {"num_beams": train.eval_beams, "length_penalty": train.length_penalty}

    def __call__(self, model: ZooModel, step: int, collective: bool = True) -> dict[str, float]:
        """Rank 0 evaluates; with `collective`, every rank learns whether the loss was finite, and
        all stop together (every rank must then call it)."""
        metrics = {}
        if self.dist.is_main:
            metrics = evaluate(model, self.task, self.batches, self.device, self.references, **self.decoding)
        bad = torch.tensor(float(not math.isfinite(metrics.get("eval/loss", 0.0))), device=self.device)
        if (self.dist.sum(bad) if collective else bad).item() > 0:
            raise Diverged(f"step {step}: the evaluation loss is {metrics.get('eval/loss', 'not finite')}")
        for name, value in metrics.items():
            if better(name, value, self.progress.best.get(name)):
                self.progress.best[name] = value
        self.progress.last_eval = metrics
        return metrics

    def final(self, model: ZooModel, step: int) -> dict[str, float]:
        """On rank 0: the last evaluation (made now if the run had none), the means over the run's
        curves, and every further split the task has (its test set)."""
        if not self.progress.last_eval:
            self(model, step, collective=False)
        final = dict(self.progress.last_eval)
        final.update(curve_means(self.progress.history) or curve_means([final]))
        for split in self.task.eval_splits[1:]:
            final.update(evaluate_split(model, self.task, split, self.train.eval_size, self.train.batch_size,
                                        self.device, **self.decoding))
        broken = {k: v for k, v in final.items() if not math.isfinite(v)}
        if broken:
            raise Diverged(f"step {step}: the final evaluation is not finite ({broken})")
        return final

    def picture(self, model: ZooModel, path: Path) -> str | None:
        """The cross-attention of the first held-out source, drawn into `path`; its caption, or
        None where the model has no cross-attention or the drawing failed (a warning)."""
        return try_cross_attention_png(model, self.task, self.batches[0][0], path)
