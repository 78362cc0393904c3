"""What a run keeps beside its last checkpoint, and when it stops early: each a piece of the
trainer with its own state (`state_dict`, `load_state_dict`), which the checkpoint holds, so a
resumed run stops, keeps and averages exactly as an uninterrupted one."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from zoo.metrics import better
from zoo.model.kinds import ZooModel, build
from zoo.specs.experiment import TrainSpec
from zoo.trainer.averaging import SNAPSHOTS, write_average
from zoo.trainer.checkpoint import read_checkpoint
from zoo.trainer.evaluate import Evaluator
from zoo.trainer.sharding import is_sharded

BEST, AVERAGED = "checkpoint_best.pt", "checkpoint_averaged.pt"


class EarlyStop:
    """train.early_stop: counts the evaluations since the metric's best (by more than min_delta)."""

    def __init__(self, train: TrainSpec):
        self.spec = train.early_stop
        self.best: float | None = None
        self.best_step: int | None = None
        self.waited = 0
        self.stopped_at: int | None = None

    def observe(self, metrics: dict[str, float], step: int) -> bool:
        """Whether the run stops after this evaluation (rank 0's metrics; other ranks see none)."""
        if self.spec is None or not metrics:
            return False
        value = metrics[self.spec.metric]
        if better(self.spec.metric, value, self.best, self.spec.min_delta):
            self.best, self.best_step, self.waited = value, step, 0
        else:
            self.waited += 1
        return self.waited >= self.spec.patience

    def note(self) -> str:
        spec = self.spec
        return (f"stopped early at step {self.stopped_at}: {spec.metric} did not improve on {self.best:.6g} (step "
                f"{self.best_step}) by more than {spec.min_delta:g} in {spec.patience} evaluations")

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_step": self.best_step, "waited": self.waited, "stopped_at": self.stopped_at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_step, self.waited = state["best"], state["best_step"], state["waited"]
        self.stopped_at = state["stopped_at"]


class KeptWeights:
    """train.keep_best: which evaluation was best (its checkpoint is written by the trainer);
    train.average_last: the weights of the last N checkpoints, one file each under averaging/."""

    def __init__(self, train: TrainSpec, run_dir: Path):
        self.metric, self.last = train.keep_best, train.average_last
        self.best_path, self.averaged_path = run_dir / BEST, run_dir / AVERAGED
        self.snapshots = run_dir / SNAPSHOTS
        self.best: float | None = None
        self.best_step: int | None = None

    def improved(self, metrics: dict[str, float], step: int) -> bool:
        """Whether this evaluation is the best so far by train.keep_best (its checkpoint is then kept)."""
        if self.metric is None or not metrics or not better(self.metric, metrics[self.metric], self.best):
            return False
        self.best, self.best_step = metrics[self.metric], step
        return True

    def snapshot_path(self, step: int) -> Path | None:
        """Where the weights of the checkpoint at `step` go, with train.average_last."""
        return None if self.last is None else self.snapshots / f"step_{step:09d}.pt"

    def prune(self, step: int) -> None:
        """Keep the last `average_last` snapshots up to `step`; a resumed run's later ones are made again."""
        for old in self.kept(step)[: -self.last]:
            old.unlink(missing_ok=True)

    def kept(self, step: int) -> list[Path]:
        """The snapshots of steps up to `step`, oldest first."""
        if self.last is None or not self.snapshots.is_dir():
            return []
        return sorted(path for path in self.snapshots.glob("step_*.pt") if int(path.stem.split("_")[1]) <= step)

    def to_average(self, step: int) -> list[Path]:
        return self.kept(step)[-self.last :] if self.last else []

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_step": self.best_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_step = state["best"], state["best_step"]


def kept_results(early_stop: EarlyStop, kept: KeptWeights, model: ZooModel, evaluator: Evaluator,
                 step: int) -> dict[str, Any]:
    """What result.json says of early stopping, the best checkpoint and the average of the last
    checkpoints, each model scored on every split (on rank 0, at the end of a run)."""
    found: dict[str, Any] = {"stopped_early_at": early_stop.stopped_at}
    if kept.best_step is not None and kept.best_path.exists():
        found["best_checkpoint"] = {"step": kept.best_step, "metric": kept.metric, "value": kept.best,
                                    "path": str(kept.best_path), "metrics": scored(model, kept.best_path, evaluator)}
    sources = kept.to_average(step)
    if sources:  # fewer than asked only where the run stopped early: averaged is then what there is, and says so
        write_average(sources, kept.averaged_path, least=1)
        found["averaged"] = {"steps": [int(path.stem.split("_")[1]) for path in sources], "asked": kept.last,
                             "path": str(kept.averaged_path), "metrics": scored(model, kept.averaged_path, evaluator)}
    return found


def kept_lines(record: dict[str, Any]) -> list[str]:
    """What `zoo train` prints of the models a run kept beside its last: each one's file, what it
    is and its metrics; an average of fewer checkpoints than train.average_last asked says so."""
    lines = []
    best = record.get("best_checkpoint")
    if best:
        lines.append(f"best checkpoint:   {best['path']}  (step {best['step']}, {best['metric']} {best['value']:.4g})")
        lines.append("  " + metric_line(best["metrics"]))
    averaged = record.get("averaged")
    if averaged:
        steps, asked = averaged["steps"], averaged.get("asked")
        short = (f"; only {len(steps)} of the {asked} train.average_last asked: the run stopped early at step "
                 f"{record.get('stopped_early_at')}" if asked and len(steps) < asked else "")
        lines.append(f"averaged:          {averaged['path']}  (steps {', '.join(map(str, steps))}{short})")
        lines.append("  " + metric_line(averaged["metrics"]))
    return lines


def metric_line(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in metrics.items())


def scored(model: ZooModel, checkpoint: Path, evaluator: Evaluator) -> dict[str, float]:
    """The metrics on every split of the run's model with a checkpoint's weights (a sharded model's
    spec built again whole: its checkpoints beside the last are whole)."""
    if is_sharded(model):
        other = build(model.spec, seed=0).to(next(model.parameters()).device)
    else:
        other = copy.deepcopy(model)
    other.load_state_dict(read_checkpoint(checkpoint, need=("model",))["model"])
    return evaluator.every_split(other)
